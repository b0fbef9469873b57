"""Tests written from mutation testing (issue 28, docs/mutation.md) for ``fluidlite/ops/linalg.py``:
float16 products (computed in float32, rounded once, float16 out), ``mul``'s num_col_dims
range and messages, ``matmul``'s shape inference (broadcast batch dims, 1-D operands, the
errors), and ``matmul``'s gradient over broadcast batch dims -- against float64 NumPy."""
import numpy as np
import pytest

from fluidlite.core.registry import VarSpec, get_op_def
from fluidlite.ops.linalg import _mm

MATMUL, MUL = get_op_def("matmul"), get_op_def("mul")


@pytest.mark.parametrize("da,db", [(np.float16, np.float16), (np.float16, np.float32),
                                   (np.float32, np.float16)])
@pytest.mark.parametrize("shapes", [((3, 4), (4, 5)), ((2, 3, 4), (4, 5)),
                                    ((2, 3, 4), (2, 4, 5))])
def test_float16_products_round_once_from_float32(da, db, shapes):
    rng = np.random.default_rng(0)
    a = rng.standard_normal(shapes[0]).astype(da)
    b = rng.standard_normal(shapes[1]).astype(db)
    got = _mm(a, b)
    want = np.result_type(da, db)
    assert got.dtype == want
    ref = np.matmul(a.astype(np.float32), b.astype(np.float32)).astype(want)
    np.testing.assert_array_equal(got, ref)
    np.testing.assert_allclose(got.astype(np.float64),
                               np.matmul(a.astype(np.float64), b.astype(np.float64)),
                               rtol=2e-3, atol=2e-3)


def test_float16_matmul_op_keeps_float16():
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal((2, 3)).astype(np.float16), rng.standard_normal((3, 2)).astype(
        np.float16)
    out = MATMUL.forward(x, y, alpha=1.0)["Out"]
    assert out.dtype == np.float16
    np.testing.assert_allclose(out.astype(np.float64), x.astype(np.float64) @ y, rtol=3e-3,
                               atol=3e-3)


@pytest.mark.parametrize("xc,yc", [(0, 1), (2, 1), (1, 0), (1, 2), (3, 1)])
def test_mul_num_col_dims_out_of_range_are_named(xc, yc):
    with pytest.raises(ValueError, match=rf"mul: x_num_col_dims={xc} / y_num_col_dims={yc} out "
                                         rf"of range for X \[4, 6\], Y \[6, 3\]"):
        MUL.infer(VarSpec((4, 6), "float32"), VarSpec((6, 3), "float32"),
                  x_num_col_dims=xc, y_num_col_dims=yc)


def test_mul_flattens_at_the_column_dims():
    out = MUL.infer(VarSpec((2, 3, 4, 5), "float32"), VarSpec((4, 5, 7), "float32"),
                    x_num_col_dims=2, y_num_col_dims=2)["Out"]
    assert out.shape == (2, 3, 7)


@pytest.mark.parametrize("xs,ys,tx,ty,out", [
    ((2, 3, 4), (4, 5), False, False, (2, 3, 5)),
    ((4, 5), (2, 5, 6), False, False, (2, 4, 6)),
    ((1, 3, 4), (7, 4, 5), False, False, (7, 3, 5)),
    ((7, 3, 4), (1, 4, 5), False, False, (7, 3, 5)),
    ((2, 1, 3, 4), (5, 4, 6), False, False, (2, 5, 3, 6)),
    ((4, 3), (5, 4), True, True, (3, 5)),
    ((4,), (4, 5), False, False, (5,)),
    ((3, 4), (4,), False, False, (3,)),
    ((4,), (4,), False, False, (1,)),
    ((-1, 3, 4), (4, 5), False, False, (-1, 3, 5)),
])
def test_matmul_output_shapes(xs, ys, tx, ty, out):
    got = MATMUL.infer(VarSpec(xs, "float32"), VarSpec(ys, "float32"), transpose_X=tx,
                       transpose_Y=ty)["Out"]
    assert tuple(got.shape) == out
    if -1 not in xs:
        rng = np.random.default_rng(2)
        x, y = rng.standard_normal(xs), rng.standard_normal(ys)
        assert MATMUL.forward(x, y, transpose_X=tx, transpose_Y=ty, alpha=1.0)["Out"].shape \
            == out


def test_matmul_errors_name_shapes_and_transposes():
    with pytest.raises(ValueError, match=r"matmul: inputs must have at least one dim, got X "
                                         r"\[\], Y \[3\]"):
        MATMUL.infer(VarSpec((), "float32"), VarSpec((3,), "float32"))
    with pytest.raises(ValueError, match=r"matmul: inputs must have at least one dim, got X "
                                         r"\[3\], Y \[\]"):
        MATMUL.infer(VarSpec((3,), "float32"), VarSpec((), "float32"))
    with pytest.raises(ValueError, match=r"X's width 4 must equal Y's height 5; received X shape "
                                         r"\[3, 4\] \(transpose_X=False\), Y shape \[5, 6\] "
                                         r"\(transpose_Y=False\)"):
        MATMUL.infer(VarSpec((3, 4), "float32"), VarSpec((5, 6), "float32"))
    with pytest.raises(ValueError, match=r"batch dims of X \[2, 3, 4\] and Y \[5, 4, 6\] do not "
                                         r"broadcast \(2 vs 5\)"):
        MATMUL.infer(VarSpec((2, 3, 4), "float32"), VarSpec((5, 4, 6), "float32"))


def test_matmul_gradient_sums_over_broadcast_batch_dims():
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal((1, 3, 4)), rng.standard_normal((5, 4, 2))
    dout = rng.standard_normal((5, 3, 2))
    g = MATMUL.backward(x, y, dout, alpha=0.5)
    dx, dy = g["X"], g["Y"]
    assert dx.shape == x.shape and dy.shape == y.shape
    np.testing.assert_allclose(dx, 0.5 * (dout @ y.transpose(0, 2, 1)).sum(0, keepdims=True),
                               rtol=1e-12)
    np.testing.assert_allclose(dy, 0.5 * np.broadcast_to(x, (5, 3, 4)).transpose(0, 2, 1) @ dout,
                               rtol=1e-12)
