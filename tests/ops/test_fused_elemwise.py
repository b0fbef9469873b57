"""OpTest cases for fluidlite/ops/fused_elemwise.py (fluid 1.8's fused_elemwise_activation)."""
import numpy as np
import pytest

from fluidlite.core.registry import get_op_def
from fluidlite.testing import OpTest

UNARY = {"scale": lambda v: v * 0.1, "relu": lambda v: np.maximum(v, 0), "tanh": np.tanh,
         "sigmoid": lambda v: 1 / (1 + np.exp(-v))}
BINARY = {"elementwise_add": np.add, "elementwise_mul": np.multiply}


@pytest.mark.parametrize("unary", list(UNARY))
@pytest.mark.parametrize("binary", list(BINARY))
@pytest.mark.parametrize("outside", [True, False])
@pytest.mark.parametrize("xs,ys,axis,yb", [((2, 3, 4), (2, 3, 4), -1, (2, 3, 4)),
                                           ((2, 3, 4), (3,), 1, (1, 3, 1)),
                                           ((3,), (2, 3, 4), 1, None)])
def test_fused_elemwise_activation(unary, binary, outside, xs, ys, axis, yb):
    x = OpTest.rand(*xs, avoid=0.0)
    y = OpTest.rand(*ys, avoid=0.0, seed=1)
    if yb is None:                      # X is the smaller operand, placed at `axis` in Y
        xa, ya = x.reshape(1, 3, 1), y
    else:
        xa, ya = x, y.reshape(yb)
    u, b = UNARY[unary], BINARY[binary]
    if outside:                         # [unary, binary]: Out = unary(binary(X, Y))
        inter = b(xa, ya)
        out, fl = u(inter), [unary, binary]
    else:                               # [binary, unary]: Out = binary(X, unary(Y))
        inter = u(y)
        out, fl = b(xa, u(ya)), [binary, unary]
    t = OpTest()
    t.op_type = "fused_elemwise_activation"
    t.inputs = {"X": x, "Y": y}
    t.attrs = {"axis": axis, "scale": 0.1, "functor_list": fl, "save_intermediate_out": True}
    t.outputs = {"Out": out, "IntermediateOut": inter}
    t.check_infer()
    t.check_output(rtol=1e-12, atol=1e-12)
    t.check_grad(["X", "Y"], "Out")


def test_fused_elemwise_activation_refuses_unknown_functors():
    with pytest.raises(ValueError, match="functor_list must be"):
        get_op_def("fused_elemwise_activation").forward(
            np.ones(2), np.ones(2), functor_list=["gelu", "elementwise_add"])


@pytest.mark.parametrize("unary", list(UNARY))
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_fused_elemwise_activation_without_the_intermediate(unary, dtype):
    # (relu and tanh of float sums then run in place on the fresh sum: the same values)
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((2, 3, 4)) * 3).astype(dtype)
    y = (rng.standard_normal(3) * 3).astype(dtype)
    op = get_op_def("fused_elemwise_activation")
    kw = dict(axis=1, scale=0.1, functor_list=[unary, "elementwise_add"])
    got = op.forward(x, y, **kw)
    saved = op.forward(x, y, save_intermediate_out=True, **kw)
    assert set(got) == {"Out"} and set(saved) == {"Out", "IntermediateOut"}
    np.testing.assert_array_equal(saved["IntermediateOut"], x + y.reshape(1, 3, 1))
    assert got["Out"].dtype == saved["Out"].dtype
    np.testing.assert_array_equal(got["Out"], saved["Out"])
    if dtype != "int64":
        want = UNARY[unary](x.astype(np.float64) + y.reshape(1, 3, 1))
        np.testing.assert_allclose(got["Out"], want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("unary", ["relu", "tanh", "sigmoid"])
def test_fused_elemwise_activation_of_0d_operands(unary):
    # 0-d operands sum to a NumPy scalar: the activation cannot run in place on it
    op = get_op_def("fused_elemwise_activation")
    x, y = np.array(-1.5, np.float32), np.array(0.5, np.float32)
    out = op.forward(x, y, axis=-1, scale=0.0, functor_list=[unary, "elementwise_add"])["Out"]
    assert np.asarray(out).shape == () and np.asarray(out).dtype == np.float32
    np.testing.assert_allclose(out, UNARY[unary](np.float64(-1.0)), rtol=1e-6)
