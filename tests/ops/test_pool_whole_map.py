"""pool2d in one window over the whole map (global pooling, adaptive pooling to 1x1, a window of
the map's size): ``ops/pool.py``'s ``_whole_map``, against float64 NumPy."""
from __future__ import annotations

import numpy as np
import pytest

from fluidlite.core.registry import get_op_def

POOL = get_op_def("pool2d")
FLT_MAX = float(np.finfo(np.float32).max)

# (attrs that make one window of a [.., 5, 7] map)
ONE_WINDOW = [
    dict(global_pooling=True, ksize=[1, 1]),
    dict(adaptive=True, ksize=[1, 1]),
    dict(ksize=[5, 7], strides=[1, 1]),
    dict(ksize=[5, 7], strides=[3, 2], ceil_mode=True),
    dict(ksize=[5, 7], paddings=[1, 1], padding_algorithm="VALID"),
]


def _run(x, last=False, **attrs):
    if last:
        out = POOL.forward(np.ascontiguousarray(x.transpose(0, 2, 3, 1)), data_format="NHWC",
                           **attrs)["Out"]
        assert out.flags.c_contiguous
        return out.transpose(0, 3, 1, 2)
    return POOL.forward(x, **attrs)["Out"]


@pytest.mark.parametrize("attrs", ONE_WINDOW)
@pytest.mark.parametrize("last", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_whole_map_mean_and_max(attrs, last, dtype):
    x = (np.random.default_rng(0).standard_normal((3, 4, 5, 7)) * 3 + 1).astype(dtype)
    ref = x.astype(np.float64)
    avg = _run(x, last, pooling_type="avg", **attrs)
    mx = _run(x, last, pooling_type="max", **attrs)
    assert avg.shape == mx.shape == (3, 4, 1, 1) and avg.dtype == mx.dtype == dtype
    mean = ref.mean(axis=(2, 3), keepdims=True)
    if dtype == np.float32:     # summed in float64 and rounded once: the nearest float32
        np.testing.assert_array_equal(avg, mean.astype(dtype))
    else:
        np.testing.assert_allclose(avg, mean, rtol=1e-15, atol=0)
    np.testing.assert_array_equal(mx, x.max(axis=(2, 3), keepdims=True))


def test_whole_map_mean_is_the_same_for_every_layout():
    # a mean of 10^4 cells: float32 summed in one order or another would differ in the last
    # bits; one float64 sum does not
    base = np.random.default_rng(1).standard_normal((2, 100, 100, 6)).astype(np.float32) + 5
    nchw = np.ascontiguousarray(base.transpose(0, 3, 1, 2))
    views = [nchw, base.transpose(0, 3, 1, 2), nchw[:, ::-1]]
    got = [POOL.forward(v, pooling_type="avg", ksize=[1, 1], adaptive=True)["Out"]
           for v in views]
    np.testing.assert_array_equal(got[0], got[1])
    np.testing.assert_array_equal(got[0][:, ::-1], got[2])
    exact = nchw.astype(np.float64).mean(axis=(2, 3), keepdims=True)
    assert np.abs(got[0] - exact).max() <= 0.5 * np.spacing(np.float32(5.0))


def test_whole_map_max_floor_nan_and_float16():
    x = np.full((1, 3, 2, 2), -np.inf, np.float32)
    x[0, 1, 1, 0] = np.nan
    x[0, 2, 0, 1] = -7.0
    out = _run(x, pooling_type="max", global_pooling=True, ksize=[1, 1])
    # MaxPool starts from -FLT_MAX; NaN wins
    assert out[0, 0, 0, 0] == -FLT_MAX and np.isnan(out[0, 1, 0, 0]) and out[0, 2, 0, 0] == -7
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        h = _run(x.astype(np.float16), pooling_type="max", adaptive=True, ksize=[1, 1])
    assert h.dtype == np.float16 and h[0, 0, 0, 0] == -np.inf and h[0, 2, 0, 0] == -7


def test_windows_that_are_not_the_whole_map_keep_their_kernels():
    x = np.random.default_rng(2).standard_normal((2, 3, 4, 6)).astype(np.float32)
    ref = x.astype(np.float64)
    # padded: the window of the map's size slides over 3x3 positions
    pad = _run(x, pooling_type="max", ksize=[4, 6], paddings=[1, 1], strides=[1, 1])
    assert pad.shape == (2, 3, 3, 3)
    np.testing.assert_array_equal(pad[:, :, 1:2, 1:2], x.max(axis=(2, 3), keepdims=True))
    # adaptive to 2x3 and adaptive + global (one window per cell)
    a = _run(x, pooling_type="avg", adaptive=True, ksize=[2, 3])
    np.testing.assert_allclose(a, ref.reshape(2, 3, 2, 2, 3, 2).mean(axis=(3, 5)), rtol=1e-6)
    g = _run(x, pooling_type="avg", adaptive=True, global_pooling=True, ksize=[1, 1])
    np.testing.assert_allclose(g, x, rtol=1e-6)


@pytest.mark.parametrize("attrs", ONE_WINDOW[:3])
@pytest.mark.parametrize("last", [False, True])
def test_whole_map_mean_gradient(attrs, last):
    """dX = dOut / (H W) on every cell, checked against central differences of
    sum(Out * dOut) with a random dOut in float64."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 5, 7))
    dout = rng.standard_normal((2, 3, 1, 1))
    fmt = "NHWC" if last else "NCHW"
    to = (lambda a: np.ascontiguousarray(a.transpose(0, 2, 3, 1))) if last else (lambda a: a)
    back = (lambda a: a.transpose(0, 3, 1, 2)) if last else (lambda a: a)
    kw = dict(pooling_type="avg", data_format=fmt, **attrs)
    out = POOL.forward(to(x), **kw)["Out"]
    dx = back(POOL.backward(to(x), out, to(dout), **kw)["X"])
    np.testing.assert_array_equal(dx, np.broadcast_to(dout / 35.0, x.shape))
    eps, num = 1e-6, np.empty_like(x)
    for idx in np.ndindex(*x.shape):
        hi, lo = x.copy(), x.copy()
        hi[idx] += eps
        lo[idx] -= eps
        f = [float((back(POOL.forward(to(v), **kw)["Out"]) * dout).sum()) for v in (hi, lo)]
        num[idx] = (f[0] - f[1]) / (2 * eps)
    np.testing.assert_allclose(dx, num, rtol=1e-6, atol=1e-9)


def test_which_pools_take_the_whole_map_reduction(monkeypatch):
    from fluidlite.ops import pool
    calls = []
    real = pool._whole_map
    monkeypatch.setattr(pool, "_whole_map", lambda x, t: calls.append(x.shape) or real(x, t))
    x = np.random.default_rng(4).standard_normal((2, 3, 5, 7)).astype(np.float32)
    for attrs in ONE_WINDOW:
        calls.clear()
        _run(x, pooling_type="avg", **attrs)
        assert calls == [(2, 3, 5, 7)], attrs
    for attrs in [dict(adaptive=True, ksize=[1, 2]), dict(adaptive=True, ksize=[2, 1]),
                  dict(adaptive=True, global_pooling=True, ksize=[1, 1]),
                  dict(ksize=[5, 6]), dict(ksize=[4, 7]), dict(ksize=[5, 7], paddings=[0, 1]),
                  dict(ksize=[5, 7], paddings=[1, 0])]:
        calls.clear()
        _run(x, pooling_type="max", **attrs)
        assert calls == [], attrs
    calls.clear()
    one = x[:, :, :1, :1]               # a map of one pixel is still one window
    np.testing.assert_array_equal(_run(one, pooling_type="avg", global_pooling=True,
                                       ksize=[1, 1]), one)
    assert calls == [(2, 3, 1, 1)]
