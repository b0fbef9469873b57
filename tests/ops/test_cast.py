"""OpTest cases for fluidlite/ops/cast.py: ``cast`` between float, int and bool types; its
gradient exists only between float types (cast back), never into integer types."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core.dtypes import VarType
from fluidlite.core.registry import get_op_def
from fluidlite.testing import OpTest


@pytest.mark.parametrize("src,dst", [("float64", "float32"), ("float64", "int64"),
                                     ("float64", "int32"), ("float64", "bool"),
                                     ("int64", "float32"), ("bool", "float64"),
                                     ("float32", "float16"), ("int32", "int64")])
def test_cast_op(src, dst):
    x = (OpTest.rand(3, 4, low=-3, high=3) * 2).astype(src)
    t = OpTest()
    t.op_type, t.inputs = "cast", {"X": x}
    t.attrs = {"in_dtype": VarType.FP64 if src == "float64" else src, "out_dtype": dst}
    t.outputs = {"Out": x.astype(dst)}
    t.check_infer()
    t.check_output(atol=1e-3 if dst == "float16" else 1e-6)


def test_cast_float_to_int_truncates_toward_zero():
    out = get_op_def("cast").forward(np.array([-1.7, -0.2, 0.2, 1.7]), out_dtype="int64")["Out"]
    assert out.dtype == np.int64 and out.tolist() == [-1, 0, 0, 1]


def test_cast_grad_between_floats_is_cast_back():
    t = OpTest()
    x = OpTest.rand(3, 4)
    t.op_type, t.inputs = "cast", {"X": x}
    t.attrs = {"in_dtype": "float64", "out_dtype": "float64"}
    t.outputs = {"Out": x}
    t.check_grad(["X"], "Out")
    x = fluid.data("x", [2, 3], "float64")
    x.stop_gradient = False
    y = fluid.layers.cast(x, "float32")
    g = fluid.gradients(fluid.layers.mean(y), x)[0]
    grad_op = g.op
    assert grad_op.type == "cast" and grad_op.attr("in_dtype") == VarType.FP32 \
        and grad_op.attr("out_dtype") == VarType.FP64
    res = fluid.Executor(fluid.CPUPlace()).run(feed={"x": np.ones((2, 3))}, fetch_list=[g])[0]
    assert res.dtype == np.float64
    np.testing.assert_allclose(res, np.full((2, 3), 1 / 6))


def test_cast_to_integer_passes_no_gradient():
    assert get_op_def("cast").differentiable_between("float32", "float64")
    assert not get_op_def("cast").differentiable_between("float32", "int64")
    assert not get_op_def("cast").differentiable_between("int64", "float32")
    x = fluid.data("x", [2, 3], "float32")
    x.stop_gradient = False
    via_int = fluid.layers.cast(fluid.layers.cast(x, "int64"), "float32")
    loss = fluid.layers.mean(fluid.layers.elementwise_add(via_int, x))
    g = fluid.gradients(loss, x)[0]
    block = fluid.default_main_program().global_block()
    assert [op.type for op in block.ops].count("cast") == 2     # no cast grad op was added
    res = fluid.Executor(fluid.CPUPlace()).run(feed={"x": np.full((2, 3), 1.5, "float32")},
                                                fetch_list=[g])[0]
    np.testing.assert_allclose(res, np.full((2, 3), 1 / 6))     # only the direct path


def test_cast_layer():
    x = fluid.data("x", [None, 3], "int64")
    y = fluid.layers.cast(x, "float32")
    assert y.name == "cast_0.tmp_0" and y.dtype == VarType.FP32 and y.shape == (-1, 3)
    assert y.op.attr("in_dtype") == VarType.INT64 and y.op.attr("out_dtype") == VarType.FP32
    z = fluid.layers.cast(y, np.float64)
    assert z.dtype == VarType.FP64
    with pytest.raises(TypeError, match="cast: dtype must be a data type"):
        fluid.layers.cast(x, "floatish")
    with pytest.raises(TypeError, match="The type of 'x' in cast must be Variable"):
        fluid.layers.cast([1, 2], "float32")
