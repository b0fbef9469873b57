"""Tests written from the mutation run of ``fluidlite/ops/cast.py`` (issue 28, round 11): the
gradient of a float32 -> float64 cast is cast back to float32 (its grad op's attributes and the
fetched gradient's dtype), and the lowered kernel's default out_dtype (FP32).

References: fluid 1.8's cast_op.cc (CastOpGradMaker: a cast from out_dtype back to in_dtype;
out_dtype is required, the lowered form defaults to FP32 as the op's own default)."""
import numpy as np

import fluidlite as fluid
from fluidlite.core.dtypes import VarType
from fluidlite.core.registry import get_op_def


def test_float32_to_float64_gradient_is_cast_back_to_float32():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [2, 3], "float32")
        x.stop_gradient = False
        y = fluid.layers.cast(x, "float64")
        g = fluid.gradients(fluid.layers.reduce_sum(y * y), x)[0]
    op = g.op
    assert op.type == "cast"
    assert op.attr("in_dtype") == VarType.FP64 and op.attr("out_dtype") == VarType.FP32
    xv = np.arange(6, dtype=np.float32).reshape(2, 3)
    res = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": xv}, fetch_list=[g])[0]
    assert res.dtype == np.float32
    np.testing.assert_allclose(res, 2 * xv)


def test_lowered_cast_default_out_dtype():
    f = get_op_def("cast").lower(None, {})
    out = f(np.array([1, 2], np.int64))
    assert out.dtype == np.float32
    assert get_op_def("cast").lower(None, {"out_dtype": VarType.INT32})(
        np.array([1.7])).dtype == np.int32


def test_gradient_takes_the_variables_dtype_when_in_dtype_is_not_set():
    """An appended cast op without ``in_dtype`` (its default FP32) on a float64 variable: the
    gradient is still cast back to the variable's own dtype."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [2, 3], "float64")
        x.stop_gradient = False
        block = main.global_block()
        y = block.create_var(name="y", shape=(2, 3), dtype="float32")
        block.append_op(type="cast", inputs={"X": [x]}, outputs={"Out": [y]},
                        attrs={"out_dtype": VarType.FP32})
        g = fluid.gradients(fluid.layers.reduce_sum(y), x)[0]
    assert g.op.type == "cast" and g.op.attr("out_dtype") == VarType.FP64
    res = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": np.ones((2, 3))},
                                               fetch_list=[g])[0]
    assert res.dtype == np.float64
    np.testing.assert_array_equal(res, np.ones((2, 3)))
