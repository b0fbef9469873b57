"""Tests written from the mutation run of ``fluidlite/ops/einsum.py`` (issue 28, round 10): the
equation parser's edges (spaces, a bad output label, two ``...`` in a term, rank mismatches
both ways, an upper-case ``X`` label in the implicit output), label sizes at build time
(unknown dims on either side, a labelled 1 against another size in either order), the
messages naming the equation, the optional InnerCache / XShape outputs outside a plan, and
the gradients of a summed-out label on a square operand, of a ``...`` dim of size 1 against 2,
and of float32 operands.

References: ``numpy.einsum`` (values, the implicit output: the labels seen once, sorted, upper
case before lower case) in float64, the rules Paddle 2.6's einsum enforces (labels of one size;
a labelled 1 does not broadcast), and hand-derived gradients (d/dX of sum(dOut * einsum) for
``ij->i`` is dOut[i] along j)."""
import numpy as np
import pytest

from fluidlite.core.registry import VarSpec, get_op_def
from fluidlite.testing import OpTest

OP = get_op_def("einsum")


def _spec(*shape, dtype="float32"):
    return VarSpec(shape, dtype)


def _values(equation, *xs):
    return OP.forward(list(xs), equation=equation)["Out"]


def test_spaces_in_the_equation_are_ignored():
    rng = np.random.default_rng(0)
    a, b = rng.uniform(-1, 1, (2, 3)), rng.uniform(-1, 1, (3, 4))
    np.testing.assert_allclose(_values(" ij , jk -> ik ", a, b), a @ b, rtol=1e-12)
    assert OP.infer([_spec(2, 3), _spec(3, 4)], equation="ij, jk ->ik")["Out"].shape == (2, 4)


@pytest.mark.parametrize("equation,shapes,message", [
    ("ij->i!", [(2, 3)], r"einsum: invalid subscripts 'i!' in equation 'ij->i!': use letters, "
                         r"at most one '...' per term, ',' and '->'"),
    ("...i...->i", [(2, 3, 4)], r"invalid subscripts '...i...' in equation '...i...->i'"),
    ("ij->i", [(2, 3, 4)], r"einsum: operand 'ij' of equation 'ij->i' has rank 3, which its 2 "
                           r"label\(s\) do not match"),
    ("...ijk->i", [(2, 3)], r"einsum: operand '...ijk' of equation '...ijk->i' has rank 2, "
                            r"which its 3 label\(s\) do not match"),
    ("ij->iX", [(2, 3)], r"einsum: the output 'iX' of equation 'ij->iX' must name each label "
                         r"once, and only labels of the operands"),
    ("ij,jk->iX", [(2, 3), (3, 4)], r"the output 'iX' of equation 'ij,jk->iX' must name each "
                                    r"label once"),
    ("ij,jk->ik", [(2, 3), (1, 4)], r"einsum: label 'j' of equation 'ij,jk->ik' has size 3 in "
                                    r"one operand and 1 in another; the sizes of a label must "
                                    r"be equal"),
    ("ij,ij->ij", [(2, 3), (1, 3)], r"label 'i' of equation 'ij,ij->ij' has size 2 in one "
                                    r"operand and 1"),
])
def test_parse_and_size_errors(equation, shapes, message):
    with pytest.raises(ValueError, match=message):
        OP.infer([_spec(*s) for s in shapes], equation=equation)
    with pytest.raises(ValueError, match=message):
        OP.forward([np.ones(s, np.float32) for s in shapes], equation=equation)


def test_operand_count_and_dtype_messages():
    with pytest.raises(ValueError, match=r"^einsum: at least one operand is needed$"):
        OP.infer([], equation="i")
    with pytest.raises(ValueError, match=r"einsum: all operands must have one dtype; operand 0 "
                                         r"is float32, operand 1 int64"):
        OP.infer([_spec(2), _spec(2, dtype="int64")], equation="i,i->i")


def test_unknown_dims_take_the_known_size():
    # j unknown in the first operand, known (5) in the second: the output's j is 5
    assert OP.infer([_spec(2, -1), _spec(5)], equation="ij,j->ij")["Out"].shape == (2, 5)
    # known first, unknown second: no conflict, the size stays
    assert OP.infer([_spec(2, 3), _spec(-1, 4)], equation="ij,jk->ijk")["Out"].shape \
        == (2, 3, 4)


def test_implicit_output_with_upper_case_labels():
    rng = np.random.default_rng(1)
    a, b = rng.uniform(-1, 1, (2, 3)), rng.uniform(-1, 1, (2, 4))
    want = np.einsum("aX,ab", a, b)                 # implicit output "Xb"
    assert want.shape == (3, 4)
    np.testing.assert_allclose(_values("aX,ab", a, b), want, rtol=1e-12)
    c = rng.uniform(-1, 1, (2, 3))
    np.testing.assert_allclose(_values("...X", c), np.einsum("...X", c), rtol=1e-12)
    assert OP.infer([_spec(2, 3)], equation="...X")["Out"].shape == (2, 3)


def test_inner_cache_and_xshape_outside_a_plan():
    """Bound without the plan's ``output_count`` (a plain list of specs), the optional outputs
    a program names hold the operands."""
    a, b = np.ones((2, 3), np.float32), np.ones((3, 2), np.float32)
    binding = OP.bind([_spec(2, 3), _spec(3, 2)], {"equation": "ij,jk->ik"},
                      {"Out", "InnerCache", "XShape"})
    res = binding.fn([a, b])
    np.testing.assert_array_equal(res["Out"], np.full((2, 2), 3.0, np.float32))
    assert len(res["InnerCache"]) == 2 and len(res["XShape"]) == 2
    np.testing.assert_array_equal(res["InnerCache"][1], b)
    res = OP.bind([_spec(2, 3), _spec(3, 2)], {"equation": "ij,jk->ik"}, {"Out"}).fn([a, b])
    assert set(res) == {"Out"}


def test_gradient_of_a_summed_label_on_a_square_operand():
    """``ij->i``: dX[i, j] = dOut[i] (the same along j), not dOut[j]."""
    x = np.arange(9, dtype=np.float64).reshape(3, 3)
    dout = np.array([1.0, 10.0, 100.0])
    g = OP.backward([x], dout, equation="ij->i")["Operands"][0]
    np.testing.assert_array_equal(g, np.repeat(dout[:, None], 3, axis=1))
    g = OP.backward([x], dout, equation="ij->j")["Operands"][0]
    np.testing.assert_array_equal(g, np.repeat(dout[None, :], 3, axis=0))


def test_gradient_of_a_broadcast_dim_of_size_one_against_two():
    """``...i,...i->...i`` with ... = [1] and [2]: operand 0's gradient sums over the two."""
    rng = np.random.default_rng(2)
    a, b = rng.uniform(-1, 1, (1, 3)), rng.uniform(-1, 1, (2, 3))
    dout = rng.uniform(-1, 1, (2, 3))
    ga, gb = OP.backward([a, b], dout, equation="...i,...i->...i")["Operands"]
    np.testing.assert_allclose(ga, (dout * b).sum(0, keepdims=True), rtol=1e-12)
    np.testing.assert_allclose(gb, dout * a, rtol=1e-12)

    class T(OpTest):
        op_type = "einsum"
        inputs = {"Operands": [("a", a), ("b", b)]}
        attrs = {"equation": "...i,...i->...i"}
        outputs = {"Out": a * b}
    T().check_grad(["a", "b"], "Out")


def test_float32_gradients_keep_float32():
    rng = np.random.default_rng(3)
    a = rng.uniform(-1, 1, (2, 3)).astype(np.float32)
    b = rng.uniform(-1, 1, (3, 4)).astype(np.float32)
    dout = rng.uniform(-1, 1, (2, 4)).astype(np.float32)
    ga, gb = OP.backward([a, b], dout, equation="ij,jk->ik")["Operands"]
    assert ga.dtype == np.float32 and gb.dtype == np.float32
    np.testing.assert_allclose(ga, dout.astype(np.float64) @ b.T.astype(np.float64),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gb, a.T.astype(np.float64) @ dout.astype(np.float64),
                               rtol=1e-5, atol=1e-6)
