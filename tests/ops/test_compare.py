"""OpTest cases for fluidlite/ops/compare.py: less_than, less_equal, greater_than,
greater_equal, equal, not_equal, logical_and/or/xor/not (bool outputs, broadcasting, no
gradient), their layers and error paths."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core.registry import get_op_def
from fluidlite.testing import OpTest

COMPARE = {"less_than": np.less, "less_equal": np.less_equal, "greater_than": np.greater,
           "greater_equal": np.greater_equal, "equal": np.equal, "not_equal": np.not_equal}
LOGICAL = {"logical_and": np.logical_and, "logical_or": np.logical_or,
           "logical_xor": np.logical_xor}


def _check(op_type, inputs, attrs, out):
    t = OpTest()
    t.op_type, t.inputs, t.attrs, t.outputs = op_type, inputs, attrs, {"Out": out}
    t.check_infer()
    t.check_output()
    assert get_op_def(op_type).no_grad


@pytest.mark.parametrize("op_type", list(COMPARE))
def test_compare_ops(op_type):
    rng = np.random.default_rng(0)
    x = rng.integers(0, 3, size=(2, 3, 4)).astype("float64")
    y = rng.integers(0, 3, size=(2, 3, 4)).astype("float64")
    _check(op_type, {"X": x, "Y": y}, {}, COMPARE[op_type](x, y))
    b = rng.integers(0, 3, size=(3,)).astype("float64")
    _check(op_type, {"X": x, "Y": b}, {"axis": 1}, COMPARE[op_type](x, b.reshape(1, 3, 1)))
    xi, yi = x.astype("int64"), y[0, 0].astype("int64")
    _check(op_type, {"X": xi, "Y": yi}, {}, COMPARE[op_type](xi, yi))


@pytest.mark.parametrize("op_type", list(LOGICAL))
def test_logical_binary_ops(op_type):
    rng = np.random.default_rng(1)
    x, y = rng.random((3, 4)) > 0.5, rng.random((3, 4)) > 0.5
    _check(op_type, {"X": x, "Y": y}, {}, LOGICAL[op_type](x, y))
    _check(op_type, {"X": x, "Y": y[0]}, {}, LOGICAL[op_type](x, y[0]))


def test_logical_not_op():
    x = np.random.default_rng(2).random((3, 4)) > 0.5
    _check("logical_not", {"X": x}, {}, ~x)


def test_compare_layers():
    L = fluid.layers
    x = fluid.data("x", [None, 3], "float32")
    y = fluid.data("y", [None, 3], "float32")
    outs = [L.less_than(x, y, force_cpu=True), L.less_equal(x, y), L.greater_than(x, y),
            L.greater_equal(x, y), L.equal(x, y), L.not_equal(x, y)]
    assert outs[0].name == "less_than_0.tmp_0"
    assert outs[0].op.attr("force_cpu") is True
    assert all(o.dtype == fluid.core.VarDesc.VarType.BOOL and o.stop_gradient for o in outs)
    cond = fluid.default_main_program().global_block().create_var(name="cond", dtype="bool")
    assert L.less_than(x, y, cond=cond) is cond
    b = [L.logical_and(outs[0], outs[1]), L.logical_or(outs[0], outs[2]),
         L.logical_xor(outs[4], outs[5]), L.logical_not(outs[0], name="nlt")]
    assert b[-1].name == "nlt"
    xv = np.array([[1, 2, 3], [4, 5, 6]], "float32")
    yv = np.array([[3, 2, 1], [4, 0, 9]], "float32")
    res = fluid.Executor(fluid.CPUPlace()).run(feed={"x": xv, "y": yv},
                                                fetch_list=outs + b + [cond])
    for r, fn in zip(res, list(COMPARE.values())):
        np.testing.assert_array_equal(r, fn(xv, yv))
    np.testing.assert_array_equal(res[6], (xv < yv) & (xv <= yv))
    np.testing.assert_array_equal(res[7], (xv < yv) | (xv > yv))
    np.testing.assert_array_equal(res[8], np.ones_like(xv, bool))
    np.testing.assert_array_equal(res[9], ~(xv < yv))
    np.testing.assert_array_equal(res[10], xv < yv)


def test_compare_errors():
    x = fluid.data("x", [2, 3], "float32")
    i = fluid.data("i", [2, 3], "int64")
    with pytest.raises(ValueError, match=r"op 'less_than' shape inference failed: X and Y must "
                                         r"have the same data type"):
        fluid.layers.less_than(x, i)
    with pytest.raises(ValueError, match=r"op 'equal' shape inference failed: X shape \[2, 3\] "
                                         r"and Y shape \[4\] cannot be broadcast"):
        fluid.layers.equal(x, fluid.data("z", [4], "float32"))
    with pytest.raises(TypeError, match="The data type of 'x' in logical_and must be one of "
                                        r"\['bool'\]"):
        fluid.layers.logical_and(x, x)
    with pytest.raises(TypeError, match="cond must be a Variable"):
        fluid.layers.greater_than(x, x, cond="c")
    with pytest.raises(TypeError, match="The type of 'y' in less_equal must be Variable"):
        fluid.layers.less_equal(x, 1.0)
    flag = fluid.data("flag", [2, 3], "bool")
    with pytest.raises(TypeError, match="logical_not: out must be a Variable"):
        fluid.layers.logical_not(flag, out="o")


def test_compare_dtypes_and_force_cpu_are_checked_as_fluid_18():
    """fluid 1.8's comparisons take float32/float64/int32/int64 (check_variable_and_dtype)
    and a bool force_cpu (check_type): anything else is a TypeError, not a later ValueError."""
    x = fluid.data("x", [2], "int32")
    a = fluid.data("a", [2], "int16")
    for op in ("less_than", "less_equal", "greater_than", "greater_equal", "equal",
               "not_equal"):
        layer = getattr(fluid.layers, op)
        with pytest.raises(TypeError, match=f"The data type of 'y' in {op} must be one of "
                                            r"\['float32', 'float64', 'int32', 'int64'"):
            layer(x, a)
        with pytest.raises(TypeError, match=f"The data type of 'x' in {op}"):
            layer(a, x)
    with pytest.raises(TypeError, match=r"less_than: force_cpu must be a bool, but received int"):
        fluid.layers.less_than(x, x, force_cpu=1)
    assert fluid.layers.less_than(x, x, force_cpu=True).dtype == fluid.core.VarDesc.VarType.BOOL


def test_equal_reduce_is_one_bool_for_the_whole_broadcast_comparison():
    # fluid 1.8's compare_reduce_op: Out = [all(X == Y)], Y broadcast from `axis`
    x = np.arange(24, dtype="int64").reshape(2, 3, 4)
    _check("equal_reduce", {"X": x, "Y": x.copy()}, {}, np.array([True]))
    y = x.copy()
    y[1, 2, 3] += 1
    _check("equal_reduce", {"X": x, "Y": y}, {}, np.array([False]))
    ones = np.ones((2, 3, 4), "float32")
    _check("equal_reduce", {"X": ones, "Y": np.ones(3, "float32")}, {"axis": 1}, np.array([True]))
    _check("equal_reduce", {"X": ones, "Y": np.zeros(3, "float32")}, {"axis": 1},
           np.array([False]))
    with pytest.raises(ValueError, match="more dimensions than X"):
        _check("equal_reduce", {"X": ones[0], "Y": ones}, {}, np.array([True]))
