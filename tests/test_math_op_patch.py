"""Variable arithmetic (fluidlite/layers/math_op_patch.py): the ops each operator builds, scalar
folding into ``scale``, dtype handling, ``astype``, ``__getitem__`` and the known value
z = x*x*y (dz/dx = 12, dz/dy = 4 at x=2, y=3)."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core.dtypes import VarType


def run(fetch, feed):
    return fluid.Executor(fluid.CPUPlace()).run(feed=feed, fetch_list=fetch)


def last_op():
    return fluid.default_main_program().global_block().ops[-1]


def test_known_value_z_equals_x_x_y():
    x = fluid.data("x", [1], "float32")
    y = fluid.data("y", [1], "float32")
    x.stop_gradient = y.stop_gradient = False
    z = x * x * y
    assert [op.type for op in fluid.default_main_program().global_block().ops] == \
        ["elementwise_mul", "elementwise_mul"]
    gx, gy = fluid.gradients(z, [x, y])
    zv, gxv, gyv = run([z, gx, gy], {"x": np.array([2.0], "float32"),
                                     "y": np.array([3.0], "float32")})
    assert (zv[0], gxv[0], gyv[0]) == (12.0, 12.0, 4.0)


@pytest.mark.parametrize("expr,scale,bias,ref", [
    (lambda x: x + 2, 1.0, 2.0, lambda v: v + 2),
    (lambda x: 2 + x, 1.0, 2.0, lambda v: v + 2),
    (lambda x: x - 2, 1.0, -2.0, lambda v: v - 2),
    (lambda x: 2 - x, -1.0, 2.0, lambda v: 2 - v),
    (lambda x: x * 3, 3.0, 0.0, lambda v: v * 3),
    (lambda x: 3 * x, 3.0, 0.0, lambda v: v * 3),
    (lambda x: x / 4, 0.25, 0.0, lambda v: v / 4),
    (lambda x: -x, -1.0, 0.0, lambda v: -v),
    (lambda x: x * np.float32(1.5), 1.5, 0.0, lambda v: v * 1.5),
], ids=["add", "radd", "sub", "rsub", "mul", "rmul", "div", "neg", "numpy-scalar"])
def test_scalars_fold_into_one_scale_op(expr, scale, bias, ref):
    x = fluid.data("x", [None, 3], "float32")
    out = expr(x)
    ops = fluid.default_main_program().global_block().ops
    assert [op.type for op in ops] == ["scale"]
    assert (ops[0].attr("scale"), ops[0].attr("bias")) == (scale, bias)
    assert out.name == "tmp_0" and out.dtype == VarType.FP32 and out.shape == (-1, 3)
    xv = np.array([[1, -2, 3.5]], "float32")
    got = run([out], {"x": xv})[0]
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, ref(xv), rtol=1e-6)


@pytest.mark.parametrize("expr,op_type,ref", [
    (lambda x: x ** 2, "elementwise_pow", lambda v: v ** 2),
    (lambda x: 2 ** x, "elementwise_pow", lambda v: 2 ** v),
    (lambda x: 6 / x, "elementwise_div", lambda v: 6 / v),
    (lambda x: x % 2, "elementwise_mod", lambda v: v % 2),
    (lambda x: 7 % x, "elementwise_mod", lambda v: 7 % v),
    (lambda x: x // 2, "elementwise_floordiv", lambda v: v // 2),
    (lambda x: 7 // x, "elementwise_floordiv", lambda v: 7 // v),
    (lambda x: x < 2, "less_than", lambda v: v < 2),
    (lambda x: x <= 2, "less_equal", lambda v: v <= 2),
    (lambda x: x > 2, "greater_than", lambda v: v > 2),
    (lambda x: 2 > x, "less_than", lambda v: v < 2),
    (lambda x: x >= 2, "greater_equal", lambda v: v >= 2),
    (lambda x: x == 2, "equal", lambda v: v == 2),
    (lambda x: x != 2, "not_equal", lambda v: v != 2),
], ids=["pow", "rpow", "rdiv", "mod", "rmod", "floordiv", "rfloordiv", "lt", "le", "gt",
        "reflected-gt", "ge", "eq", "ne"])
def test_other_scalar_cases_use_a_fill_constant(expr, op_type, ref):
    x = fluid.data("x", [None, 3], "float32")
    out = expr(x)
    ops = fluid.default_main_program().global_block().ops
    assert [op.type for op in ops] == ["fill_constant", op_type]
    const = ops[0]
    assert const.attr("shape") == [1] and const.attr("dtype") == VarType.FP32
    assert out.name == "tmp_1" and out.shape == (-1, 3)
    if op_type in ("less_than", "less_equal", "greater_than", "greater_equal", "equal",
                   "not_equal"):
        assert out.dtype == VarType.BOOL and out.stop_gradient
    xv = np.array([[1, 2, 3.5]], "float32")
    np.testing.assert_allclose(run([out], {"x": xv})[0], ref(xv), rtol=1e-6)


def test_variable_operands_and_broadcasting():
    x = fluid.data("x", [None, 2, 3], "float32")
    b = fluid.data("b", [3], "float32")
    n = fluid.data("n", [None, 2], "float32")
    outs = [x + b, x - b, x * b, x / b, x ** b, b + x, x * n]
    ops = fluid.default_main_program().global_block().ops
    assert [op.type for op in ops] == ["elementwise_add", "elementwise_sub", "elementwise_mul",
                                       "elementwise_div", "elementwise_pow", "elementwise_add",
                                       "elementwise_mul"]
    assert ops[0].attr("axis") == -1 and ops[-1].attr("axis") == 0   # batch-leading operand
    assert [o.name for o in outs] == [f"tmp_{i}" for i in range(7)]
    xv = np.random.default_rng(0).uniform(1, 2, (2, 2, 3)).astype("float32")
    bv = np.array([1.0, 2.0, 0.5], "float32")
    nv = np.array([[1.0, 2.0], [3.0, 4.0]], "float32")
    res = run(outs, {"x": xv, "b": bv, "n": nv})
    refs = [xv + bv, xv - bv, xv * bv, xv / bv, xv ** bv, xv + bv, xv * nv[:, :, None]]
    for r, want in zip(res, refs):
        np.testing.assert_allclose(r, want, rtol=1e-5)


def test_mismatched_dtype_casts_right_operand_to_left():
    x = fluid.data("x", [2], "float32")
    i = fluid.data("i", [2], "int64")
    out = x + i
    ops = fluid.default_main_program().global_block().ops
    assert [op.type for op in ops] == ["cast", "elementwise_add"]
    assert ops[0].attr("out_dtype") == VarType.FP32 and out.dtype == VarType.FP32
    res = run([out], {"x": np.array([0.5, 1.5], "float32"), "i": np.array([1, 2])})[0]
    np.testing.assert_allclose(res, [1.5, 3.5])


def test_integer_variables():
    i = fluid.data("i", [4], "int64")
    outs = [i + 2, i * 3, i / 2, i // 2, i % 3, i - 1.0]
    assert all(o.dtype == VarType.INT64 for o in outs)
    assert [op.type for op in fluid.default_main_program().global_block().ops][2:4] == \
        ["fill_constant", "elementwise_div"]             # fluid 1.8: integer division
    iv = np.array([7, -7, 4, 0])
    res = run(outs, {"i": iv})
    for r, want in zip(res, [iv + 2, iv * 3, [3, -3, 2, 0], iv // 2, iv % 3, iv - 1]):
        np.testing.assert_array_equal(r, want)
    with pytest.raises(TypeError, match=r"int64 Variable 'i' \* 0.5: a non-integral float"):
        i * 0.5
    f = i.astype("float32") * 0.5
    np.testing.assert_allclose(run([f], {"i": iv})[0], iv * 0.5)


def test_astype():
    x = fluid.data("x", [None, 2], "float32")
    y = x.astype("int32")
    op = last_op()
    assert op.type == "cast" and op.attr("in_dtype") == VarType.FP32
    assert op.attr("out_dtype") == VarType.INT32 and y.dtype == VarType.INT32
    assert y.shape == (-1, 2) and y.name == "tmp_0"
    np.testing.assert_array_equal(run([y], {"x": np.array([[1.7, -2.2]], "float32")})[0],
                                  [[1, -2]])
    with pytest.raises(TypeError, match="is not a data type"):
        x.astype("nope")


def test_getitem_builds_slice_ops():
    x = fluid.data("x", [None, 4, 5], "float32")
    a = x[0]
    op = last_op()
    assert op.type == "slice" and op.attr("axes") == [0] and op.attr("starts") == [0]
    assert op.attr("ends") == [1] and op.attr("decrease_axis") == [0]
    assert a.name == "x_slice_0" and a.shape == (4, 5)
    b = x[:, 1:3, -1]
    op = last_op()
    assert (op.attr("axes"), op.attr("starts"), op.attr("ends"), op.attr("decrease_axis")) == \
        ([1, 2], [1, 4], [3, 5], [2])
    assert b.shape == (-1, 2)
    c = x[..., ::2]
    op = last_op()
    assert op.type == "strided_slice" and op.attr("strides") == [2] and op.attr("axes") == [2]
    assert c.shape == (-1, 4, 3)
    d = x[-1, ::-1, 1:]
    op = last_op()
    assert op.type == "strided_slice" and op.attr("decrease_axis") == [0]
    assert op.attr("starts")[0] == -1 and op.attr("ends")[0] == 10000000   # -1 on unknown dim
    assert x[:] is x and x[...] is x
    xv = np.arange(3 * 4 * 5, dtype="float32").reshape(3, 4, 5)
    res = run([a, b, c, d], {"x": xv})
    for r, want in zip(res, [xv[0], xv[:, 1:3, -1], xv[..., ::2], xv[-1, ::-1, 1:]]):
        np.testing.assert_array_equal(r, want)


def test_getitem_gradient():
    x = fluid.data("x", [3, 4], "float64")
    x.stop_gradient = False
    y = x[1:, ::2] * 2.0
    g = fluid.gradients(fluid.layers.mean(y), x)[0]
    want = np.zeros((3, 4))
    want[1:, ::2] = 2.0 / 4
    np.testing.assert_allclose(run([g], {"x": np.ones((3, 4))})[0], want)


def test_getitem_errors():
    x = fluid.data("x", [None, 4], "float32")
    with pytest.raises(IndexError, match=r"Variable 'x' of shape \[-1, 4\]: index 4 is out of "
                                         r"bounds for dim 1 with size 4"):
        x[0, 4]
    with pytest.raises(IndexError, match="too many indices: 3 given for 2 dims"):
        x[0, 1, 2]
    with pytest.raises(IndexError, match="single ellipsis"):
        x[..., ...]
    with pytest.raises(ValueError, match="slice step cannot be zero"):
        x[:, ::0]
    with pytest.raises(TypeError, match="None \\(newaxis\\) indices are not supported"):
        x[None]
    with pytest.raises(TypeError, match="slice start must be an int or None"):
        x[1.5:]
    with pytest.raises(TypeError, match="use fluid.layers.gather"):
        x[[0, 1]]


def test_equality_hashing_and_truth_value():
    x = fluid.data("x", [2], "float32")
    y = fluid.data("y", [2], "float32")
    assert {x: 1, y: 2}[y] == 2 and len({x, y, x}) == 2
    assert (x == None) is False and (x != "x") is True     # noqa: E711 - identity fallback
    eq = x == y
    assert eq.op.type == "equal"
    with pytest.raises(TypeError, match=r"truth value of the comparison Variable 'tmp_0' "
                                        r"\(x == y\)"):
        bool(eq)
    with pytest.raises(TypeError, match="do not use `in`"):
        x in [y]                                           # noqa: B015
    assert x in [x]           # identity short-circuits; plain Variables are truthy
    assert bool(x)


def test_operand_errors():
    x = fluid.data("x", [2], "float32")
    with pytest.raises(TypeError, match=r"unsupported operand for \+: Variable 'x' and ndarray "
                                        r"\(wrap arrays with fluid.layers.assign"):
        x + np.ones(2)
    with pytest.raises(TypeError, match="unsupported operand"):
        x * "a"
    with pytest.raises(ZeroDivisionError):
        x / 0
    other = fluid.Program()
    with fluid.program_guard(other):
        z = fluid.data("z", [2], "float32")
    with pytest.raises(ValueError, match="different Programs"):
        x + z


def test_a_one_element_array_operand_acts_as_its_number():
    # fluid 1.8 fills a [1] tensor with float(other) for a non-Variable operand, in static and
    # dygraph mode alike (the zoo's dygraph actor_critic.py: `-1 * advantage * ones_like(...)`)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 3], "float32")
        outs = [x * np.ones([1], "float32") * 2.5, np.array([[4]], "int64") - x,
                x + np.float64(0.5) * np.ones(1)]
    xv = np.array([[1, 2, 3], [4, 5, 6]], "float32")
    got = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": xv}, fetch_list=outs)
    for g, w in zip(got, [xv * 2.5, 4 - xv, xv + 0.5]):
        assert g.dtype == np.float32
        np.testing.assert_array_equal(g, w)
    with fluid.dygraph.guard():
        v = fluid.dygraph.to_variable(xv)
        np.testing.assert_array_equal((v * np.array([3.0])).numpy(), xv * 3)
        np.testing.assert_array_equal((np.float32(1) - v[0][0]).numpy(), [0.0])
        with pytest.raises(TypeError, match="wrap arrays with fluid.layers.assign"):
            v * np.ones([2, 1], "float32")
