"""layer_norm and its input gradient over two parallel parts of the rows
(fluidlite/ops/norm.py): the one-part values bit for bit for any thread count, float64
formulas, and dScale / dBias read after dX (which keeps xh for them)."""
import numpy as np
import pytest

from fluidlite.core import threads
from fluidlite.core.registry import get_op_def
from fluidlite.ops import norm

LN, LN_GRAD = get_op_def("layer_norm"), get_op_def("layer_norm_grad")


def _run(x, scale, bias, dy, axis):
    out = LN.forward(x, scale, bias, epsilon=1e-5, begin_norm_axis=axis)
    g = LN_GRAD.forward(x, scale, out["Mean"], out["Variance"], dy, epsilon=1e-5,
                        begin_norm_axis=axis)
    return [out["Y"], out["Mean"], out["Variance"], g["X@GRAD"], g["Scale@GRAD"],
            g["Bias@GRAD"]]


@pytest.mark.parametrize("shape, axis", [((8, 128, 256), 2), ((1025, 300), 1),
                                         ((4, 33, 40, 50), 2)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_row_parts_give_the_one_part_bits(shape, axis, dtype):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(shape) * 3 + 1).astype(dtype)
    right = int(np.prod(shape[axis:]))
    scale, bias = (rng.standard_normal(right).astype(dtype) for _ in range(2))
    dy = rng.standard_normal(shape).astype(dtype)
    with threads.using(2):
        assert norm.ln_row_parts(x.reshape(-1, right), scale, bias)
    runs = []
    for t in (2, 3):
        with threads.using(t):
            runs.append(_run(x, scale, bias, dy, axis))
    with threads.using(1):                                       # one part
        assert not norm.ln_row_parts(x.reshape(-1, right), scale, bias)
        one = _run(x, scale, bias, dy, axis)
    for run in runs:
        for a, b in zip(run, one):
            assert a.dtype == dtype and np.array_equal(a, b)
    x2, dy2 = x.reshape(-1, right).astype(np.float64), dy.reshape(-1, right).astype(np.float64)
    mu = x2.mean(1, keepdims=True)
    inv = 1 / np.sqrt(((x2 - mu) ** 2).mean(1, keepdims=True) + 1e-5)
    xh = (x2 - mu) * inv
    g = dy2 * scale
    dx = (g - g.mean(1, keepdims=True) - xh * (g * xh).mean(1, keepdims=True)) * inv
    tol = 2e-4 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(one[0].reshape(-1, right), xh * scale + bias, rtol=tol,
                               atol=tol)
    np.testing.assert_allclose(one[3].reshape(-1, right), dx, rtol=tol, atol=tol)
    np.testing.assert_allclose(one[4], (dy2 * xh).sum(0), rtol=tol, atol=tol * 100)


def test_rows_split_from_the_size_where_two_threads_pay():
    """Two parts from ``_LN_PARALLEL_MIN`` elements on (under it a part's few NumPy calls are
    too short for two threads: 64K elements took 2x the time of one part), and only with
    two rows or more, two threads, and one float dtype throughout."""
    n = norm._LN_PARALLEL_MIN
    x = np.zeros((n // 256, 256), np.float32)
    scale = np.ones(256, np.float32)
    with threads.using(2):
        assert norm.ln_row_parts(x, scale, None)
        assert not norm.ln_row_parts(x.reshape(-1)[:n - 256].reshape(-1, 256), scale, None)
        assert not norm.ln_row_parts(x.reshape(1, -1), None, None)
        assert not norm.ln_row_parts(x, scale.astype(np.float64), None)
    with threads.using(1):
        assert not norm.ln_row_parts(x, scale, None)
