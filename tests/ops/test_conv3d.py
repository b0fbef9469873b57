"""conv3d / conv3d_transpose / pool3d / max_pool{2,3}d_with_index / adaptive pool2d: forward
against direct loop references, numeric float64 gradients, argument errors."""
import itertools

import numpy as np
import pytest

from fluidlite.core.registry import get_op_def
from fluidlite.testing import OpTest


def ref_conv3d(x, w, s=(1, 1, 1), p=(0, 0, 0), d=(1, 1, 1), groups=1):
    """Direct definition: one output cell at a time."""
    N, C, D, H, W = x.shape
    F, Cg, kd, kh, kw = w.shape
    xp = np.pad(x, [(0, 0), (0, 0)] + [(v, v) for v in p])
    od = (D + 2 * p[0] - d[0] * (kd - 1) - 1) // s[0] + 1
    oh = (H + 2 * p[1] - d[1] * (kh - 1) - 1) // s[1] + 1
    ow = (W + 2 * p[2] - d[2] * (kw - 1) - 1) // s[2] + 1
    out = np.zeros((N, F, od, oh, ow))
    fg = F // groups
    for f in range(F):
        g = f // fg
        xs = xp[:, g * Cg:(g + 1) * Cg]
        for z, y, xx in itertools.product(range(od), range(oh), range(ow)):
            win = xs[:, :, z * s[0]:z * s[0] + d[0] * (kd - 1) + 1:d[0],
                     y * s[1]:y * s[1] + d[1] * (kh - 1) + 1:d[1],
                     xx * s[2]:xx * s[2] + d[2] * (kw - 1) + 1:d[2]]
            out[:, f, z, y, xx] = (win * w[f]).sum(axis=(1, 2, 3, 4))
    return out


def ref_conv3d_transpose(x, w, s=(1, 1, 1), p=(0, 0, 0), d=(1, 1, 1), groups=1):
    """Scatter definition: every input cell adds its filter-weighted copy to the output."""
    N, C, D, H, W = x.shape
    _, Fg, kd, kh, kw = w.shape
    cg = C // groups
    size = [(n - 1) * s[i] + d[i] * (k - 1) + 1 for i, (n, k) in
            enumerate(zip((D, H, W), (kd, kh, kw)))]
    out = np.zeros((N, Fg * groups, *size))
    for c in range(C):
        g = c // cg
        for z, y, xx in itertools.product(range(D), range(H), range(W)):
            for a, i, j in itertools.product(range(kd), range(kh), range(kw)):
                out[:, g * Fg:(g + 1) * Fg, z * s[0] + a * d[0], y * s[1] + i * d[1],
                    xx * s[2] + j * d[2]] += x[:, c, z, y, xx, None] * w[c, :, a, i, j]
    return out[:, :, p[0]:size[0] - p[0], p[1]:size[1] - p[1], p[2]:size[2] - p[2]]


class TestConv3D(OpTest):
    op_type = "conv3d"

    @pytest.mark.parametrize("s,p,d,groups", [((1, 1, 1), (0, 0, 0), (1, 1, 1), 1),
                                              ((2, 1, 2), (1, 0, 1), (1, 2, 1), 2)])
    def test_conv(self, s, p, d, groups):
        x = self.rand(2, 4, 5, 5, 4)
        w = self.rand(4, 4 // groups, 2, 2, 3, seed=1)
        self.inputs = {"Input": x, "Filter": w}
        self.attrs = {"strides": list(s), "paddings": list(p), "dilations": list(d),
                      "groups": groups}
        self.outputs = {"Output": ref_conv3d(x, w, s, p, d, groups)}
        self.check_infer()
        self.check_output()
        self.check_grad(["Input", "Filter"], "Output", weighted=True)

    def test_ndhwc_and_same(self):
        x = self.rand(1, 2, 3, 4, 5)
        w = self.rand(3, 2, 3, 3, 3, seed=2)
        self.inputs = {"Input": np.ascontiguousarray(x.transpose(0, 2, 3, 4, 1)), "Filter": w}
        self.attrs = {"padding_algorithm": "SAME", "data_format": "NDHWC"}
        self.outputs = {"Output": ref_conv3d(x, w, p=(1, 1, 1)).transpose(0, 2, 3, 4, 1)}
        self.check_infer()
        self.check_output()
        self.check_grad(["Input", "Filter"], "Output")

    def test_asymmetric_paddings(self):
        x = self.rand(1, 1, 3, 3, 3)
        w = self.rand(1, 1, 2, 2, 2, seed=3)
        self.inputs = {"Input": x, "Filter": w}
        self.attrs = {"paddings": [1, 0, 0, 1, 1, 1]}
        xp = np.pad(x, [(0, 0), (0, 0), (1, 0), (0, 1), (1, 1)])
        self.outputs = {"Output": ref_conv3d(xp, w)}
        self.check_infer()
        self.check_output()


class TestConv3DTranspose(OpTest):
    op_type = "conv3d_transpose"

    @pytest.mark.parametrize("s,p,d,groups", [((1, 1, 1), (0, 0, 0), (1, 1, 1), 1),
                                              ((2, 1, 2), (1, 0, 0), (1, 1, 2), 2)])
    def test_transpose(self, s, p, d, groups):
        x = self.rand(2, 4, 3, 2, 3)
        w = self.rand(4, 3, 3, 2, 2, seed=1)
        self.inputs = {"Input": x, "Filter": w}
        self.attrs = {"strides": list(s), "paddings": list(p), "dilations": list(d),
                      "groups": groups}
        self.outputs = {"Output": ref_conv3d_transpose(x, w, s, p, d, groups)}
        self.check_infer()
        self.check_output()
        self.check_grad(["Input", "Filter"], "Output", weighted=True)

    def test_output_size(self):
        x = self.rand(1, 2, 2, 2, 2)
        w = self.rand(2, 1, 3, 3, 3, seed=4)
        self.inputs = {"Input": x, "Filter": w}
        self.attrs = {"strides": [2, 2, 2], "output_size": [6, 5, 6]}
        full = ref_conv3d_transpose(x, w, (2, 2, 2))            # natural size 5
        ref = np.zeros((1, 1, 6, 5, 6))
        ref[:, :, :5, :5, :5] = full
        self.outputs = {"Output": ref}
        self.check_infer()
        self.check_output()


def test_conv3d_errors():
    d = get_op_def("conv3d")
    x, w = np.zeros((1, 3, 4, 4, 4)), np.zeros((2, 2, 1, 1, 1))
    with pytest.raises(ValueError, match="data_format"):
        d.forward(x, np.zeros((2, 3, 1, 1, 1)), data_format="NCWH")
    with pytest.raises(ValueError, match="empty"):
        d.forward(x, np.zeros((2, 3, 5, 1, 1)))
    with pytest.raises(ValueError, match="paddings"):
        d.forward(x, np.zeros((2, 3, 1, 1, 1)), paddings=[1, 1])
    from fluidlite.core.registry import VarSpec
    with pytest.raises(ValueError, match="channels"):
        d.infer(VarSpec(x.shape, "float32"), VarSpec(w.shape, "float32"))
    t = get_op_def("conv3d_transpose")
    with pytest.raises(ValueError, match="not reachable"):
        t.forward(np.zeros((1, 2, 2, 2, 2)), np.zeros((2, 1, 3, 3, 3)), output_size=[9, 9, 9])


# -- pooling --------------------------------------------------------------------------------------
def distinct(*shape, seed=0):
    """Values at least 0.01 apart, so that no window has a near-tie for the numeric max grad."""
    n = int(np.prod(shape))
    return np.random.default_rng(seed).permutation(n).reshape(shape) * 0.01 - n * 0.005


def ref_pool3d(x, k, s, p=(0, 0, 0), ptype="max", exclusive=True, ceil=False, adaptive=False):
    N, C = x.shape[:2]
    size = x.shape[2:]
    if adaptive:
        out = list(k)
        bounds = [[(o * n // m, -(-(o + 1) * n // m)) for o in range(m)]
                  for n, m in zip(size, out)]
    else:
        out = [(n + 2 * pp - kk + (ss - 1 if ceil else 0)) // ss + 1
               for n, kk, ss, pp in zip(size, k, s, p)]
        bounds = [[(max(o * ss - pp, 0), min(o * ss - pp + kk, n)) for o in range(m)]
                  for n, m, kk, ss, pp in zip(size, out, k, s, p)]
    res = np.zeros((N, C, *out))
    for idx in itertools.product(*(range(m) for m in out)):
        sl = tuple(slice(*bounds[i][o]) for i, o in enumerate(idx))
        win = x[(slice(None), slice(None)) + sl]
        if ptype == "max":
            res[(slice(None), slice(None)) + idx] = win.max(axis=(2, 3, 4)[:len(size)])
        else:
            div = win[0, 0].size if (exclusive or adaptive) else np.prod(k)
            res[(slice(None), slice(None)) + idx] = win.sum(
                axis=tuple(range(2, 2 + len(size)))) / div
    return res


class TestPool3D(OpTest):
    op_type = "pool3d"

    @pytest.mark.parametrize("ptype,k,s,p,exclusive,ceil", [
        ("max", (2, 2, 2), (2, 2, 2), (0, 0, 0), True, False),
        ("avg", (3, 2, 3), (2, 1, 2), (1, 0, 1), True, False),
        ("avg", (3, 3, 3), (2, 2, 2), (1, 1, 1), False, True),
        ("max", (3, 3, 2), (2, 2, 1), (1, 1, 0), True, True)])
    def test_pool(self, ptype, k, s, p, exclusive, ceil):
        x = distinct(2, 2, 5, 4, 5)
        self.inputs = {"X": x}
        self.attrs = {"pooling_type": ptype, "ksize": list(k), "strides": list(s),
                      "paddings": list(p), "exclusive": exclusive, "ceil_mode": ceil}
        self.outputs = {"Out": ref_pool3d(x, k, s, p, ptype, exclusive, ceil)}
        self.check_infer()
        self.check_output()
        self.check_grad(["X"], "Out", weighted=True)

    @pytest.mark.parametrize("ptype", ["max", "avg"])
    def test_adaptive(self, ptype):
        x = distinct(1, 2, 5, 4, 7)
        self.inputs = {"X": x}
        self.attrs = {"pooling_type": ptype, "ksize": [2, 3, 3], "adaptive": True}
        self.outputs = {"Out": ref_pool3d(x, (2, 3, 3), None, ptype=ptype, adaptive=True)}
        self.check_infer()
        self.check_output()
        self.check_grad(["X"], "Out", weighted=True)

    def test_global_ndhwc(self):
        x = self.rand(2, 3, 2, 3, 4)
        self.inputs = {"X": np.ascontiguousarray(x.transpose(0, 2, 3, 4, 1))}
        self.attrs = {"pooling_type": "avg", "ksize": [1, 1, 1], "global_pooling": True,
                      "data_format": "NDHWC"}
        self.outputs = {"Out": x.mean(axis=(2, 3, 4), keepdims=True).transpose(0, 2, 3, 4, 1)}
        self.check_infer()
        self.check_output()
        self.check_grad(["X"], "Out")


class TestAdaptivePool2D(OpTest):
    op_type = "pool2d"

    @pytest.mark.parametrize("ptype", ["max", "avg"])
    def test_adaptive(self, ptype):
        x = distinct(2, 3, 7, 5)
        self.inputs = {"X": x}
        self.attrs = {"pooling_type": ptype, "ksize": [3, 2], "adaptive": True}
        self.outputs = {"Out": ref_pool3d(x, (3, 2), None, ptype=ptype, adaptive=True)}
        self.check_infer()
        self.check_output()
        self.check_grad(["X"], "Out", weighted=True)


class TestMaxPoolWithIndex(OpTest):
    op_type = "max_pool2d_with_index"

    def test_adaptive_mask(self):
        x = distinct(2, 2, 5, 6)
        self.inputs = {"X": x}
        self.attrs = {"ksize": [2, 3], "adaptive": True, "strides": [1, 1],
                      "paddings": [0, 0]}
        out = ref_pool3d(x, (2, 3), None, adaptive=True)
        mask = np.zeros(out.shape, np.int32)
        for n, c, i, j in itertools.product(range(2), range(2), range(2), range(3)):
            hs, he = i * 5 // 2, -(-(i + 1) * 5 // 2)
            ws, we = j * 6 // 3, -(-(j + 1) * 6 // 3)
            win = x[n, c, hs:he, ws:we]
            a, b = np.unravel_index(win.argmax(), win.shape)
            mask[n, c, i, j] = (hs + a) * 6 + ws + b
        self.outputs = {"Out": out, "Mask": mask}
        self.check_infer()
        self.check_output()
        self.check_grad(["X"], "Out", weighted=True)


class TestMaxPool3DWithIndex(OpTest):
    op_type = "max_pool3d_with_index"

    def test_fixed(self):
        x = distinct(1, 2, 4, 4, 4)
        self.inputs = {"X": x}
        self.attrs = {"ksize": [2, 2, 2], "strides": [2, 2, 2], "paddings": [0, 0, 0]}
        out = ref_pool3d(x, (2, 2, 2), (2, 2, 2))
        self.outputs = {"Out": out}
        self.check_output()
        self.check_grad(["X"], "Out")


def test_pool3d_errors():
    d = get_op_def("pool3d")
    x = np.zeros((1, 1, 4, 4, 4))
    with pytest.raises(ValueError, match="ksize and strides must have 3"):
        d.forward(x, ksize=[2, 2], strides=[1, 1, 1])
    with pytest.raises(ValueError, match="data_format"):
        d.forward(x, ksize=[2, 2, 2], data_format="NCHW")
    from fluidlite.core.registry import VarSpec
    with pytest.raises(ValueError, match="pooling_type"):
        d.infer(VarSpec(x.shape, "float32"), pooling_type="min", ksize=[2, 2, 2])


# -- fluid's C++ integer arithmetic (issue 29): values of Paddle 2.6's CPU kernels ---------------
FLT_MAX = float(np.finfo(np.float32).max)


class TestPool3DCppArithmetic(OpTest):
    op_type = "pool3d"

    def test_truncated_output_size(self):
        # (1 - 2) / 2 + 1 = 1 along depth and height: one window over the whole 1x2 plane
        x = np.arange(10.0).reshape(1, 1, 1, 2, 5)
        self.inputs = {"X": x}
        self.attrs = {"pooling_type": "max", "ksize": [2, 2, 2], "strides": [2, 2, 2],
                      "paddings": [0, 0, 0]}
        self.outputs = {"Out": np.array([6.0, 8.0]).reshape(1, 1, 1, 1, 2)}
        self.check_infer()
        self.check_output()
        self.check_grad(["X"], "Out")

    @pytest.mark.parametrize("ptype", ["max", "avg"])
    def test_empty_windows(self, ptype):
        # ceil_mode: along W the second window starts at 4 > 2 (no input cell): -FLT_MAX for
        # max, 0 / (3 - 4) = -0.0 for exclusive avg, as Paddle
        x = np.arange(27.0).reshape(1, 1, 3, 3, 3) - 13
        self.inputs = {"X": x}
        self.attrs = {"pooling_type": ptype, "ksize": [1, 1, 1], "strides": [2, 2, 4],
                      "paddings": [0, 0, 0], "ceil_mode": True}
        first = np.array([-13.0, -7.0, 5.0, 11.0]).reshape(1, 1, 2, 2, 1)
        empty = np.full((1, 1, 2, 2, 1), -FLT_MAX if ptype == "max" else -0.0)
        self.outputs = {"Out": np.concatenate([first, empty], axis=-1)}
        self.check_infer()
        self.check_output()
        got = get_op_def("pool3d").forward(x, **self.attrs)["Out"]
        assert np.signbit(got[..., 1]).all()
        if ptype == "avg":
            self.check_grad(["X"], "Out")
        else:
            dx = get_op_def("pool3d").backward(x, got, np.ones(got.shape), **self.attrs)["X"]
            assert dx.sum() == 4 and dx[0, 0, 0, 0, 0] == 1 and dx[0, 0, 2, 2, 0] == 1


class TestMaxPoolWithIndexCppArithmetic(OpTest):
    op_type = "max_pool2d_with_index"

    def test_truncated_output_size(self):
        x = np.arange(10.0).reshape(1, 1, 2, 5)
        self.inputs = {"X": x}
        self.attrs = {"ksize": [3, 2], "strides": [2, 2], "paddings": [0, 0]}
        self.outputs = {"Out": np.array([[[[6.0, 8.0]]]]),
                        "Mask": np.array([[[[6, 8]]]], np.int32)}     # Paddle 2.6
        self.check_infer()
        self.check_output()
        self.check_grad(["X"], "Out")

    def test_windows_in_the_padding_keep_mask_minus_one(self):
        x = np.arange(9.0).reshape(1, 1, 3, 3)
        self.inputs = {"X": x}
        self.attrs = {"ksize": [2, 2], "strides": [1, 1], "paddings": [2, 2]}
        inner = np.array([[0, 1, 2, 2], [3, 4, 5, 5], [6, 7, 8, 8], [6, 7, 8, 8]])
        mask = np.full((6, 6), -1)
        mask[1:5, 1:5] = inner
        out = np.full((6, 6), -FLT_MAX)
        out[1:5, 1:5] = inner
        self.outputs = {"Out": out[None, None], "Mask": mask[None, None].astype(np.int32)}
        self.check_infer()
        self.check_output()
        d = get_op_def("max_pool2d_with_index")
        dx = d.backward(x, self.outputs["Mask"], np.ones((1, 1, 6, 6)), **self.attrs)["X"]
        np.testing.assert_array_equal(dx[0, 0], [[1, 1, 2], [1, 1, 2], [2, 2, 4]])


def test_pool3d_valid_keeps_ceil_mode():
    """fluid's UpdatePadding zeroes the paddings for VALID and leaves ceil_mode alone:
    a 2/2 pool of 5 cells gives 3 (Paddle 2.6: [1, 1, 3, 3, 3], as pool2d's [1, 5, 3, 3])."""
    x = np.arange(125.0).reshape(1, 1, 5, 5, 5)
    out = get_op_def("pool3d").forward(x, pooling_type="max", ksize=[2, 2, 2],
                                       strides=[2, 2, 2], paddings=[0, 0, 0],
                                       padding_algorithm="VALID", ceil_mode=True)["Out"]
    assert out.shape == (1, 1, 3, 3, 3) and out[0, 0, 2, 2, 2] == 124.0


def test_conv3d_transpose_same_padding_is_fluids():
    """SAME: fluid pads for ceil(in / s) windows of the input (Paddle 2.6: [1, 3, 9, 13, 4]
    for input [5, 7, 4], strides [2, 2, 1], kernel [3, 5, 2])."""
    x, w = OpTest.rand(1, 2, 5, 7, 4), OpTest.rand(2, 3, 3, 5, 2, seed=1)
    out = get_op_def("conv3d_transpose").forward(x, w, strides=[2, 2, 1],
                                                 paddings=[0, 0, 0],
                                                 padding_algorithm="SAME")["Output"]
    assert out.shape == (1, 3, 9, 13, 4)
    pads = []
    for n, s, k in ((5, 2, 3), (7, 2, 5), (4, 1, 2)):
        total = max((-(-n // s) - 1) * s + k - n, 0)
        pads += [total // 2, total - total // 2]        # (before, after) per axis
    ref = get_op_def("conv3d_transpose").forward(x, w, strides=[2, 2, 1],
                                                 paddings=pads)["Output"]
    np.testing.assert_allclose(out, ref)


@pytest.mark.parametrize("op", ["conv3d", "conv3d_transpose"])
def test_conv3d_reads_fluids_nchw_nhwc_as_channel_first_and_last(op):
    # fluid 1.8's kernels: "NHWC"/"NDHWC" are channel-last, "NCHW"/"NCDHW"/"AnyLayout"
    # channel-first (conv3d_transpose only knows NCHW/NHWC: StringToDataLayout)
    d = get_op_def(op)
    x = OpTest.rand(1, 2, 3, 3, 3)
    w = OpTest.rand(2, 2, 2, 2, 2, seed=1)
    first = d.forward(x, w, data_format="NCDHW")["Output"]
    np.testing.assert_array_equal(d.forward(x, w, data_format="NCHW")["Output"], first)
    np.testing.assert_array_equal(d.forward(x, w, data_format="AnyLayout")["Output"], first)
    xl = np.moveaxis(x, 1, -1)
    last = d.forward(xl, w, data_format="NDHWC")["Output"]
    np.testing.assert_array_equal(d.forward(xl, w, data_format="NHWC")["Output"], last)
    np.testing.assert_allclose(np.moveaxis(last, -1, 1), first, rtol=1e-12)


@pytest.mark.parametrize("case", [
    # (N, C, size, F, k, strides, paddings, dilations, groups)
    (3, 4, (5, 6, 7), 6, (3, 2, 3), (1, 2, 1), (1, 0, 2), (1, 1, 2), 2),
    (2, 3, (4, 5, 5), 3, (2, 3, 2), (2, 1, 2), (0, 1, 1), (2, 1, 1), 3),
    (4, 2, (6, 4, 5), 4, (3, 3, 3), (1, 1, 1), (2, 2, 2), (1, 1, 1), 1),
])
def test_conv_nd_kernels_by_kernel_offset_equal_the_im2col_ones(monkeypatch, case):
    # the offset-by-offset path (column matrices above _MAX_COLS, fluid 1.8's Conv3DTranspose
    # doc example) against the one-GEMM path, with image blocks of one and of several images
    from fluidlite.ops import conv3d as c3
    N, C, size, F, k, s, p, d, G = case
    rng = np.random.default_rng(11)
    x = rng.standard_normal((N, C) + size)
    w = rng.standard_normal((F, C // G) + k)
    g = c3._geom(size, k, s, list(p), d, "EXPLICIT", G, "conv3d")
    dy = rng.standard_normal((N, F) + g.out)
    want = (c3.conv_nd_fwd(x, w, g), c3.conv_nd_dx(c3._rows(dy), w, g, N),
            c3.conv_nd_dw(x, c3._rows(dy), g, w.shape))
    assert want[0].shape == (N, F) + g.out and want[1].shape == x.shape
    for block_bytes in (1, 1 << 22):
        monkeypatch.setattr(c3, "_MAX_COLS", 0)
        monkeypatch.setattr(c3, "_BLOCK_BYTES", block_bytes)
        got = (c3.conv_nd_fwd(x, w, g), c3.conv_nd_dx(c3._rows(dy), w, g, N),
               c3.conv_nd_dw(x, c3._rows(dy), g, w.shape))
        for a, b in zip(got, want):
            assert a.dtype == b.dtype == np.float64
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("by_offset", [False, True])
def test_conv3d_transpose_with_a_large_kernel_runs_by_kernel_offset(monkeypatch, by_offset):
    # fluid 1.8's dygraph Conv3DTranspose example (a 12^3 filter) built a 5 GB column matrix;
    # a smaller version checked against a direct scatter loop, by both paths
    from fluidlite.ops import conv3d as c3
    if by_offset:
        monkeypatch.setattr(c3, "_MAX_COLS", 0)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 2, 3, 4, 4)).astype("float32")
    w = rng.standard_normal((2, 3, 5, 5, 5)).astype("float32")
    want = np.zeros((2, 3, 7, 8, 8))
    for n, f, i, j, l in itertools.product(range(2), range(2), range(3), range(4), range(4)):
        want[n, :, i:i + 5, j:j + 5, l:l + 5] += x[n, f, i, j, l] * w[f].astype(np.float64)
    g = c3._geom((7, 8, 8), (5, 5, 5), (1, 1, 1), [0, 0, 0], (1, 1, 1), "EXPLICIT", 1,
                 "conv3d_transpose")
    assert bool(c3._image_blocks(g, 3, 2, 3 * 7 * 8 * 8)) == by_offset
    got = c3.conv_nd_dx(c3._rows(x), w, g, 2)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)
