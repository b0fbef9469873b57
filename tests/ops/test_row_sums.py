"""``activation.row_sums`` (einsum row sums behind softmax, its gradient, layer norm and the
fused attention) and softmax's ``fmax`` row max: the sums equal float64 sums, a block of rows
gives the whole's bits, other axes and dtypes keep NumPy's own sums, and non-finite logits
give fluid's results -- a row holding a NaN is all NaN, as with ``max``."""
import numpy as np
import pytest

from fluidlite.core.registry import get_op_def
from fluidlite.ops.activation import fluid_softmax, row_sums


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(7, 128), (3, 5, 256), (1000,)])
def test_row_sums_equal_float64_sums_and_rows_stand_alone(dtype, shape):
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal(shape).astype(dtype) for _ in range(2))
    for got, want in ((row_sums(a, -1), a.astype(np.float64).sum(-1, keepdims=True)),
                      (row_sums(a, a.ndim - 1, b),
                       (a.astype(np.float64) * b).sum(-1, keepdims=True))):
        assert got.dtype == dtype and got.shape == shape[:-1] + (1,)
        tol = 1e-5 if dtype == np.float32 else 1e-12
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * shape[-1])
    if a.ndim > 1:
        assert np.array_equal(row_sums(a[1:], -1), row_sums(a, -1)[1:])
        assert np.array_equal(row_sums(a[:1], -1, b[:1]), row_sums(a, -1, b)[:1])


def test_row_sums_of_other_axes_and_dtypes_are_numpys():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((4, 6)).astype(np.float32)
    assert np.array_equal(row_sums(a, 0), a.sum(axis=0, keepdims=True))
    h = a.astype(np.float16)
    assert np.array_equal(row_sums(h, -1), h.sum(axis=-1, keepdims=True))
    assert row_sums(h, -1).dtype == np.float16
    b = a.astype(np.float64)                       # another dtype: NumPy's product and sum
    assert np.array_equal(row_sums(a, -1, b), (a * b).sum(axis=-1, keepdims=True))


def _softmax_with_max(x):
    """fluid's SoftmaxFunctor with the row max (float64 reference of the old formula)."""
    with np.errstate(invalid="ignore"):
        e = np.maximum(x - x.max(axis=-1, keepdims=True), -64.0)
        e = np.exp(e)
        return e / e.sum(axis=-1, keepdims=True)


def test_softmax_rows_with_nan_or_inf_are_what_the_row_max_gives():
    x = np.array([[1.0, np.nan, 3.0, 2.0],
                  [np.nan, np.nan, np.nan, np.nan],
                  [1.0, np.inf, 0.0, 2.0],
                  [-np.inf, -np.inf, -np.inf, -np.inf],
                  [-np.inf, 0.0, 1.0, np.nan],
                  [0.5, -1.0, 200.0, 3.0]], np.float32)
    with np.errstate(invalid="ignore"):
        got = fluid_softmax(x)
    want = _softmax_with_max(x.astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7, equal_nan=True)
    assert np.isnan(got[[0, 1, 2, 3, 4]]).all() and np.isfinite(got[5]).all()


@pytest.mark.parametrize("shape", [(2, 4, 16, 128), (300, 1000)])
def test_softmax_and_its_gradient_match_float64(shape):
    rng = np.random.default_rng(2)
    x = (rng.standard_normal(shape) * 4).astype(np.float32)
    op = get_op_def("softmax")
    out = op.forward(x)["Out"]
    want = _softmax_with_max(x.astype(np.float64))
    np.testing.assert_allclose(out, want, rtol=2e-6, atol=1e-7)
    d = rng.standard_normal(shape).astype(np.float32)
    dx = op.backward(out, d)["X"]
    o64 = out.astype(np.float64)
    want_dx = (d - (d * o64).sum(-1, keepdims=True)) * o64
    np.testing.assert_allclose(dx, want_dx, rtol=1e-5, atol=1e-6)


def test_row_sums_take_the_einsum_path_for_any_rank_and_either_spelling_of_the_last_axis():
    rng = np.random.default_rng(5)
    a = rng.standard_normal(3000).astype(np.float32)
    b = rng.standard_normal(3000).astype(np.float32)
    assert np.array_equal(row_sums(a, -1), row_sums(a[None], -1)[0])       # 1-D: a row too
    assert np.array_equal(row_sums(a, 0, b), row_sums(a[None], 1, b[None])[0])
    m = a.reshape(30, 100)
    assert np.array_equal(row_sums(m, 1), row_sums(m, -1))


def test_float16_layer_norm_keeps_numpys_float32_accumulated_means():
    """float16 rows take NumPy's mean (float32 accumulation), not row_sums' float16 sums."""
    rng = np.random.default_rng(6)
    x = (rng.standard_normal((6, 300)) * 2 + 5).astype(np.float16)
    s = rng.standard_normal(300).astype(np.float16)
    b = rng.standard_normal(300).astype(np.float16)
    ln, lng = get_op_def("layer_norm"), get_op_def("layer_norm_grad")
    out = ln.forward(x, s, b)
    mean = x.mean(axis=1)
    assert out["Mean"].dtype == np.float16 and np.array_equal(out["Mean"], mean)
    xc = x - mean[:, None]
    assert np.array_equal(out["Variance"], np.mean(np.square(xc), axis=1))
    x64 = x.astype(np.float64)
    m64, v64 = x64.mean(1, keepdims=True), x64.var(1, keepdims=True)
    y64 = (x64 - m64) / np.sqrt(v64 + 1e-5) * s + b
    np.testing.assert_allclose(out["Y"].astype(np.float64), y64, rtol=2e-2, atol=2e-2)
    dy = rng.standard_normal(x.shape).astype(np.float16)
    dx = lng.forward(x, s, out["Mean"], out["Variance"], dy)["X@GRAD"]
    xh = (x64 - m64) / np.sqrt(v64 + 1e-5)
    g = dy.astype(np.float64) * s
    want = (g - g.mean(1, keepdims=True) - xh * (g * xh).mean(1, keepdims=True)) / np.sqrt(
        v64 + 1e-5)
    assert dx.dtype == np.float16
    np.testing.assert_allclose(dx.astype(np.float64), want, rtol=5e-2, atol=5e-2)


def test_batch_norm_gradient_of_float16_maps_with_float32_statistics():
    """dX's per-channel factors are float32: the centred float16 map is scaled out of place
    (a float32 product), and dX keeps dY's dtype, as before the factors were folded."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((4, 3, 6, 6)).astype(np.float16)
    scale = (rng.standard_normal(3) + 2).astype(np.float32)
    mean = x.astype(np.float32).mean(axis=(0, 2, 3))
    inv = (1.0 / np.sqrt(x.astype(np.float32).var(axis=(0, 2, 3)) + 1e-5)).astype(np.float32)
    dy = rng.standard_normal(x.shape).astype(np.float16)
    g = get_op_def("batch_norm_grad").forward(x, scale, mean, inv, dy)
    x64, d64 = x.astype(np.float64), dy.astype(np.float64)
    xh = (x64 - mean.reshape(1, 3, 1, 1)) * inv.reshape(1, 3, 1, 1)
    m = x.size // 3
    db, ds = d64.sum((0, 2, 3)), (d64 * xh).sum((0, 2, 3))
    want = (scale * inv).reshape(1, 3, 1, 1) * (
        d64 - db.reshape(1, 3, 1, 1) / m - xh * ds.reshape(1, 3, 1, 1) / m)
    dx = g["X@GRAD"]
    assert dx.dtype == np.float16
    np.testing.assert_allclose(dx.astype(np.float64), want, rtol=2e-2, atol=2e-2)
    np.testing.assert_allclose(g["Scale@GRAD"], ds, rtol=1e-2, atol=1e-2)
    np.testing.assert_allclose(g["Bias@GRAD"], db, rtol=1e-2, atol=1e-2)
