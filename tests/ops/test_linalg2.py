"""ops/linalg2.py: paddle.linalg's matrix ops. Values and gradients against Paddle 2.6 are in
tests/ops/test_paddle_oracle.py; here float64 central differences with random upstream
weights for every one, values against NumPy's linalg, and the errors."""
import numpy as np
import pytest

from fluidlite.core.registry import VarSpec, get_op_def
from fluidlite.testing import OpTest

RNG = np.random.default_rng(42)


def _u(*shape):
    return RNG.uniform(-1, 1, shape)


def _well(*shape):
    return _u(*shape) + 3 * np.eye(shape[-1])


def _spd(*shape):
    a = _u(*shape)
    return a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])


CASES = [
    ("inverse", {"Input": _well(2, 3, 3)}, {}, "Output", ["Input"],
     lambda i: np.linalg.inv(i["Input"])),
    ("determinant", {"Input": _well(2, 3, 3)}, {}, "Out", ["Input"],
     lambda i: np.linalg.det(i["Input"])),
    ("slogdeterminant", {"Input": _well(3, 3)}, {}, "Out", ["Input"],
     lambda i: np.stack(np.linalg.slogdet(i["Input"]))),
    ("matrix_power", {"X": _u(3, 3)}, {"n": 3}, "Out", ["X"],
     lambda i: i["X"] @ i["X"] @ i["X"]),
    ("matrix_power", {"X": _well(2, 3, 3)}, {"n": -2}, "Out", ["X"],
     lambda i: np.linalg.inv(i["X"] @ i["X"])),
    ("cholesky", {"X": _spd(2, 3, 3)}, {"upper": False}, "Out", ["X"],
     lambda i: np.linalg.cholesky(i["X"])),
    ("cholesky", {"X": _spd(3, 3)}, {"upper": True}, "Out", ["X"],
     lambda i: np.linalg.cholesky(i["X"]).T),
    ("mv", {"X": _u(3, 4), "Vec": _u(4)}, {}, "Out", ["X", "Vec"],
     lambda i: i["X"] @ i["Vec"]),
    # (references broadcast Y themselves: NumPy 1.x reads a [3, 2] Y against [2, 3, 3] as
    # vectors, NumPy 2 as a matrix)
    ("solve", {"X": _well(2, 3, 3), "Y": _u(3, 2)}, {}, "Out", ["X", "Y"],
     lambda i: np.linalg.solve(i["X"], np.broadcast_to(i["Y"], (2, 3, 2)))),
    ("solve", {"X": _well(3, 3), "Y": _u(3)}, {}, "Out", ["X", "Y"],
     lambda i: np.linalg.solve(i["X"], i["Y"])),
    ("solve", {"X": _well(2, 3, 3), "Y": _u(2, 3)}, {}, "Out", ["X", "Y"],     # vectors
     lambda i: np.linalg.solve(i["X"], i["Y"][..., None])[..., 0]),
    ("triangular_solve", {"X": _well(2, 3, 3), "Y": _u(3, 2)},
     dict(upper=False, transpose=True, unitriangular=False), "Out", ["X", "Y"],
     lambda i: np.linalg.solve(np.swapaxes(np.tril(i["X"]), -1, -2),
                               np.broadcast_to(i["Y"], (2, 3, 2)))),
    ("triangular_solve", {"X": _well(3, 3), "Y": _u(3, 2)},
     dict(upper=True, transpose=False, unitriangular=True), "Out", ["X", "Y"],
     lambda i: np.linalg.solve(np.triu(i["X"], 1) + np.eye(3), i["Y"])),
]


@pytest.mark.parametrize("op_type,inputs,attrs,out,grads,ref", CASES)
def test_values_and_numeric_gradients(op_type, inputs, attrs, out, grads, ref):
    class T(OpTest):
        pass
    T.op_type, T.inputs, T.attrs = op_type, inputs, attrs
    T.outputs = {out: ref(inputs)}
    T().check_output(atol=1e-10, rtol=1e-10)
    # (cholesky's input is symmetric: the check perturbs one entry, the rule is the
    # symmetrised gradient -- compare on the symmetric part by perturbing pairs below)
    if op_type != "cholesky":
        T().check_grad(grads, out)


def test_cholesky_gradient_on_symmetric_perturbations():
    a, u = _spd(3, 3), _u(3, 3)
    op = get_op_def("cholesky")
    low = op.forward(a)["Out"]
    g = op.backward(low, u)["X"]
    np.testing.assert_allclose(g, g.T, rtol=0, atol=1e-14)
    for i in range(3):
        for j in range(i + 1):
            e = np.zeros((3, 3))
            e[i, j] = e[j, i] = 1e-6
            num = ((np.linalg.cholesky(a + e) - np.linalg.cholesky(a - e)) * u).sum() / 2e-6
            np.testing.assert_allclose((g * e).sum() / 1e-6, num, rtol=1e-6, atol=1e-9)

    class T(OpTest):
        op_type, attrs = "cholesky", {"upper": False}
        inputs = {"X": a}
        outputs = {"Out": low}
    T().check_output()


def test_multi_dot_with_vector_ends_and_errors():
    xs = [_u(4), _u(4, 3), _u(3, 2)]

    class T(OpTest):
        op_type, attrs = "multi_dot", {}
        inputs = {"X": [(f"x{k}", x) for k, x in enumerate(xs)]}
        outputs = {"Out": xs[0] @ xs[1] @ xs[2]}
    T().check_output(atol=1e-12)
    T().check_grad(["x0", "x1", "x2"], "Out")
    with pytest.raises(ValueError, match="square matrices"):
        get_op_def("inverse").infer(VarSpec((2, 3), "float32"))
    with pytest.raises(ValueError, match="symmetric positive-definite"):
        get_op_def("cholesky").forward(-np.eye(2))
