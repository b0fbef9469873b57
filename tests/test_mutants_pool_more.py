"""Mutation-round tests for fluidlite/ops/pool_more.py (spp, unpool).

References: fluid 1.8's unpool_op.cc / unpooling.cc (output size (H - 1) * s - 2p + k, Out
zero but at the Indices positions, dX = dOut gathered at Indices) written as loops; the
InferShape checks' messages are the op's own; spp against fluid's SppKernel arithmetic
(``pool2d`` per level) as loops.
"""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core.registry import get_op_def

UNPOOL = get_op_def("unpool")


def _unpool_prog(x_shape, idx_shape, x_dtype="float32", idx_dtype="int32", **attrs):
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", x_shape, x_dtype)
        idx = fluid.data("idx", idx_shape, idx_dtype)
        block = main.global_block()
        out = block.create_var(name="unpool_out")
        kw = {"unpooling_type": "max", "ksize": [2, 2], "strides": [2, 2], "paddings": [0, 0]}
        kw.update(attrs)
        block.append_op("unpool", {"X": x, "Indices": idx}, {"Out": out}, kw)
    return out


def test_unpool_inference():
    out = _unpool_prog([2, 3, 4, 5], [2, 3, 4, 5], "float64")
    assert tuple(out.shape) == (2, 3, 8, 10) and out.dtype == fluid.core.VarDesc.VarType.FP64
    out = _unpool_prog([-1, 3, -1, 5], [-1, 3, 4, 5], strides=[3, 2], paddings=[1, 1])
    assert tuple(out.shape) == (-1, 3, -1, 8)                   # (5-1)*2 - 2*1 + 2
    out = _unpool_prog([2, 3, 1, 1], [2, 3, 1, 1], ksize=[3, 3], strides=[1, 1])
    assert tuple(out.shape) == (2, 3, 3, 3)


@pytest.mark.parametrize("x, idx, attrs, msg", [
    ([2, 3, 4], [2, 3, 4], {}, r"X must be 4-D \[N, C, H, W\], got \[2, 3, 4\]"),
    ([2, 3, 4, 4], [2, 3, 4, 4], {"unpooling_type": "avg"},
     "unpooling_type must be 'max', got 'avg'"),
    ([2, 3, 4, 4], [2, 3, 4, 4], {"ksize": [2]},
     r"ksize, strides and paddings must have 2 values, got \[2\], \[2, 2\], \[0, 0\]"),
    ([2, 3, 4, 4], [2, 3, 4, 4], {"strides": [2]},
     r"ksize, strides and paddings must have 2 values, got \[2, 2\], \[2\], \[0, 0\]"),
    ([2, 3, 4, 4], [2, 3, 4, 4], {"paddings": [0, 0, 0]},
     r"ksize, strides and paddings must have 2 values, got \[2, 2\], \[2, 2\], \[0, 0, 0\]"),
    ([2, 3, 4, 4], [2, 3, 4, 2], {}, r"Indices \[2, 3, 4, 2\] must have X's shape \[2, 3, 4, 4\]"),
    ([2, 3, 4, 4], [2, 3, 4], {}, r"Indices \[2, 3, 4\] must have X's shape \[2, 3, 4, 4\]"),
    ([2, 3, 0, 4], [2, 3, 4, 4], {}, r"Indices \[2, 3, 4, 4\] must have X's shape \[2, 3, 0, 4\]"),
    ([2, 3, 4, 4], [2, 3, 0, 4], {}, r"Indices \[2, 3, 0, 4\] must have X's shape \[2, 3, 4, 4\]"),
])
def test_unpool_inference_errors(x, idx, attrs, msg):
    with pytest.raises(ValueError, match="unpool: " + msg):
        _unpool_prog(x, idx, **attrs)


def test_unpool_indices_dtype_error():
    with pytest.raises(ValueError, match="unpool: Indices must be an int32 tensor, but it is "
                                         "float32"):
        _unpool_prog([2, 3, 4, 4], [2, 3, 4, 4], idx_dtype="float32")


def _pooled_with_index(rng, n, c, h, w):
    """A 2x2 / stride-2 max pool's values and flat argmax indices (fluid's Mask)."""
    src = rng.normal(size=(n, c, 2 * h, 2 * w))
    x = np.zeros((n, c, h, w))
    idx = np.zeros((n, c, h, w), np.int32)
    for a in range(n):
        for b in range(c):
            for i in range(h):
                for j in range(w):
                    win = src[a, b, 2 * i:2 * i + 2, 2 * j:2 * j + 2]
                    di, dj = np.unravel_index(np.argmax(win), (2, 2))
                    x[a, b, i, j] = win[di, dj]
                    idx[a, b, i, j] = (2 * i + di) * (2 * w) + 2 * j + dj
    return x, idx


def test_unpool_forward_and_backward_against_loops():
    rng = np.random.default_rng(0)
    x, idx = _pooled_with_index(rng, 2, 3, 2, 3)
    attrs = dict(unpooling_type="max", ksize=[2, 2], strides=[2, 2], paddings=[0, 0])
    out = UNPOOL.forward(x, idx, **attrs)["Out"]
    ref = np.zeros((2, 3, 4, 6))
    for a in range(2):
        for b in range(3):
            for i in range(2):
                for j in range(3):
                    ref[a, b].flat[idx[a, b, i, j]] = x[a, b, i, j]
    np.testing.assert_array_equal(out, ref)
    assert out.dtype == np.float64
    out32 = UNPOOL.forward(x.astype("float32"), idx, **attrs)["Out"]
    assert out32.dtype == np.float32
    dout = rng.normal(size=(2, 3, 4, 6))
    dx = UNPOOL.backward(x, idx, dout, **attrs)["X"]
    want = np.array([[[[dout[a, b].flat[idx[a, b, i, j]] for j in range(3)] for i in range(2)]
                      for b in range(3)] for a in range(2)])
    np.testing.assert_array_equal(dx, want)


def test_unpool_index_outside_the_map():
    x = np.ones((1, 1, 2, 2))
    idx = np.array([[[[0, 1], [2, 16]]]], np.int32)          # the map is 4x4: 16 is outside
    with pytest.raises(ValueError, match=r"^unpool: an index lies outside the 4x4 output map$"):
        UNPOOL.forward(x, idx, ksize=[2, 2], strides=[2, 2], paddings=[0, 0])
    idx[0, 0, 1, 1] = 15
    out = UNPOOL.forward(x, idx, ksize=[2, 2], strides=[2, 2], paddings=[0, 0])["Out"]
    assert out.sum() == 4 and out[0, 0, 3, 3] == 1
    idx[0, 0, 0, 0] = -1
    with pytest.raises(ValueError, match="an index lies outside"):
        UNPOOL.forward(x, idx, ksize=[2, 2], strides=[2, 2], paddings=[0, 0])


SPP = get_op_def("spp")


def _spp_prog(shape, dtype="float32", **attrs):
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", shape, dtype)
        out = main.global_block().create_var(name="spp_out")
        main.global_block().append_op("spp", {"X": x}, {"Out": out}, attrs)
    return out


def test_spp_inference():
    out = _spp_prog([2, 5, 8, 8], "float64", pyramid_height=1, pooling_type="max")
    assert tuple(out.shape) == (2, 5) and out.dtype == fluid.core.VarDesc.VarType.FP64
    out = _spp_prog([2, 3, 8, 8], pyramid_height=3, pooling_type="avg")
    assert tuple(out.shape) == (2, 63) and all(type(d) is int for d in out.shape)
    assert tuple(_spp_prog([2, -1, 8, 8], pyramid_height=2).shape) == (2, -1)
    assert tuple(_spp_prog([2, 0, 8, 8], pyramid_height=2).shape) == (2, 0)


@pytest.mark.parametrize("shape, attrs, msg", [
    ([2, 3, 8], {"pyramid_height": 1}, r"X must be 4-D \[N, C, H, W\], got \[2, 3, 8\]"),
    ([2, 3, 8, 8], {"pyramid_height": 0}, "pyramid_height must be >= 1, got 0"),
    ([2, 3, 8, 8], {"pyramid_height": 1, "pooling_type": "sum"},
     "pooling_type must be 'max' or 'avg', got 'sum'"),
])
def test_spp_inference_errors(shape, attrs, msg):
    with pytest.raises(ValueError, match="spp: " + msg):
        _spp_prog(shape, **attrs)


def test_spp_level_that_cannot_make_its_bins():
    with pytest.raises(ValueError, match=r"^spp: level 1 pools 1x1 into 3x3 bins, not 2x2$"):
        SPP.forward(np.ones((1, 1, 1, 1)), pyramid_height=3, pooling_type="max")


@pytest.mark.parametrize("pooling_type", ["max", "avg"])
def test_spp_against_a_loop_and_float32_gradient(pooling_type):
    rng = np.random.default_rng(2)
    x = rng.normal(size=(2, 2, 5, 6))
    out = SPP.forward(x, pyramid_height=2, pooling_type=pooling_type)["Out"]
    parts = []
    for p in range(2):
        bins = 2 ** p
        kh, kw = -(-5 // bins), -(-6 // bins)
        ph, pw = (kh * bins - 5 + 1) // 2, (kw * bins - 6 + 1) // 2
        lvl = np.zeros((2, 2, bins, bins))
        for i in range(bins):
            for j in range(bins):
                h0, w0 = i * kh - ph, j * kw - pw
                win = x[:, :, max(h0, 0):min(h0 + kh, 5), max(w0, 0):min(w0 + kw, 6)]
                lvl[:, :, i, j] = win.max((2, 3)) if pooling_type == "max" else win.mean((2, 3))
        parts.append(lvl.reshape(2, -1))
    np.testing.assert_allclose(out, np.concatenate(parts, 1), rtol=1e-12)
    x32 = x.astype("float32")
    o32 = SPP.forward(x32, pyramid_height=2, pooling_type=pooling_type)["Out"]
    dx = SPP.backward(x32, o32, np.ones_like(o32), pyramid_height=2,
                      pooling_type=pooling_type)["X"]
    assert dx.dtype == np.float32 and dx.shape == x.shape


def test_unpool_single_index_outside_the_map():
    with pytest.raises(ValueError, match=r"^unpool: an index lies outside the 2x2 output map$"):
        UNPOOL.forward(np.ones((1, 1, 1, 1)), np.array([[[[5]]]], np.int32), ksize=[2, 2],
                       strides=[2, 2], paddings=[0, 0])
