"""batch_norm's kernels reuse their temporaries (Y in the centred input's buffer; the
gradient's product and xhat buffers for dX): every gradient, read in any order, equals the
float64 formulas, and the inputs are never written."""
import itertools

import numpy as np
import pytest

from fluidlite.core.registry import get_op_def

BN, BN_GRAD = get_op_def("batch_norm"), get_op_def("batch_norm_grad")
SLOTS = ("X@GRAD", "Scale@GRAD", "Bias@GRAD")


def _reference(x, scale, dy, axes, bs, eps=1e-5):
    x, dy = x.astype(np.float64), dy.astype(np.float64)
    mu = x.mean(axis=axes, keepdims=True)
    inv = 1.0 / np.sqrt(((x - mu) ** 2).mean(axis=axes, keepdims=True) + eps)
    xh = (x - mu) * inv
    m = x.size // x.shape[1 if bs[1] != 1 else -1]
    db, ds = dy.sum(axis=axes), (dy * xh).sum(axis=axes)
    dx = scale.reshape(bs) * inv * (dy - db.reshape(bs) / m - xh * ds.reshape(bs) / m)
    return xh * scale.reshape(bs), {"X@GRAD": dx, "Scale@GRAD": ds, "Bias@GRAD": db}


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("order", list(itertools.permutations(SLOTS)))
def test_gradients_in_any_order_equal_the_formulas(layout, order):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((4, 3, 5, 6)) * 2 + 1).astype(np.float32)
    if layout == "NHWC":
        x = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    c = x.shape[1] if layout == "NCHW" else x.shape[-1]
    axes = (0, 2, 3) if layout == "NCHW" else (0, 1, 2)
    bs = (1, c, 1, 1) if layout == "NCHW" else (1, 1, 1, c)
    scale, bias = rng.standard_normal(c).astype(np.float32), rng.standard_normal(c).astype(
        np.float32)
    stats = [np.zeros(c, np.float32), np.ones(c, np.float32)]
    dy = rng.standard_normal(x.shape).astype(np.float32)
    inputs = [a.copy() for a in (x, scale, dy)]
    out = BN.forward(x, scale, bias, *stats, data_layout=layout)
    y_want, g_want = _reference(x, scale, dy, axes, bs)
    np.testing.assert_allclose(out["Y"], y_want + bias.reshape(bs), rtol=1e-5, atol=1e-5)
    grads = BN_GRAD.forward(x, scale, out["SavedMean"], out["SavedVariance"], dy,
                            data_layout=layout)
    for slot in order:
        got = grads[slot]
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, g_want[slot], rtol=1e-4, atol=1e-4)
    for before, after in zip(inputs, (x, scale, dy)):
        np.testing.assert_array_equal(before, after)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("shape, layout", [((3, 4, 7, 5), "NCHW"), ((3, 7, 5, 4), "NHWC"),
                                           ((6, 4), "NCHW"), ((2, 4, 9), "NCHW")])
def test_statistics_every_rank_layout_and_dtype(shape, layout, dtype):
    """The per-channel sums (einsum for float32/64, NumPy's reductions for float16) give the
    float64 batch mean and biased variance, in X's dtype."""
    rng = np.random.default_rng(5)
    x = (rng.standard_normal(shape) * 3 + 2).astype(dtype)
    ch = 1 if layout == "NCHW" else x.ndim - 1
    c = x.shape[ch]
    axes = tuple(a for a in range(x.ndim) if a != ch)
    ones, zeros = np.ones(c, dtype), np.zeros(c, dtype)
    out = BN.forward(x, ones, zeros, zeros, ones, data_layout=layout, momentum=0.0)
    x64 = x.astype(np.float64)
    tol = 2e-3 if dtype == "float16" else 1e-5
    for got, want in ((out["SavedMean"], x64.mean(axis=axes)),
                      (out["VarianceOut"], x64.var(axis=axes))):
        assert got.dtype == np.dtype(dtype)
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol)


def test_empty_batch_gives_nan_statistics_and_an_empty_output():
    x = np.zeros((0, 3, 4, 4), np.float32)
    ones, zeros = np.ones(3, np.float32), np.zeros(3, np.float32)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = BN.forward(x, ones, zeros, zeros, ones)
    assert out["Y"].shape == (0, 3, 4, 4) and np.isnan(out["SavedMean"]).all()
