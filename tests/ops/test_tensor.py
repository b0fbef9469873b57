"""OpTest cases for fluidlite/ops/tensor.py (creation and plumbing ops, shape)."""
import numpy as np
import pytest

from fluidlite.core.registry import get_op_def
from fluidlite.testing import OpTest


def run_op(op_type, inputs, attrs, outputs, grad=(), grad_out=None, max_rel=0.005,
           no_check=()):
    t = OpTest()
    t.op_type, t.inputs, t.attrs, t.outputs = op_type, inputs, attrs, outputs
    t.check_infer()
    t.check_output(no_check_set=no_check)
    if grad:
        t.check_grad(list(grad), grad_out or next(iter(outputs)), max_relative_error=max_rel)
    return t


X = OpTest.rand(2, 3, 4)


# -- creation / plumbing ops -----------------------------------------------------------------
def test_fill_constant():
    run_op("fill_constant", {}, {"shape": [2, 3], "value": 1.5, "dtype": "float32"},
           {"Out": np.full((2, 3), 1.5, np.float32)})
    run_op("fill_constant", {"ShapeTensor": np.array([3, 1], np.int32)},
           {"value": 2.0, "dtype": "int64"}, {"Out": np.full((3, 1), 2, np.int64)})


def test_assign_value_and_fill_like():
    run_op("assign_value", {}, {"shape": [2, 2], "dtype": "float32", "values": [1., 2., 3., 4.]},
           {"Out": np.array([[1, 2], [3, 4]], np.float32)})
    run_op("fill_any_like", {"X": X}, {"value": 1.0}, {"Out": np.ones_like(X)})
    run_op("fill_zeros_like", {"X": X}, {}, {"Out": np.zeros_like(X)})


def test_assign_and_sum():
    run_op("assign", {"X": X}, {}, {"Out": X}, grad=["X"])
    a, b = OpTest.rand(3, 4, seed=1), OpTest.rand(3, 4, seed=2)
    run_op("sum", {"X": [("a", a), ("b", b)]}, {}, {"Out": a + b}, grad=["a", "b"])


def test_feed_fetch_are_markers():
    assert get_op_def("feed").no_grad and get_op_def("fetch").no_grad
    with pytest.raises(RuntimeError):
        get_op_def("feed").forward(X)


def test_shape():
    run_op("shape", {"Input": X}, {}, {"Out": np.array([2, 3, 4], np.int32)})
    assert get_op_def("shape").no_grad


def test_fill_zeros_like2_takes_the_output_dtype_from_its_attribute():
    # fluid 1.8's fill_zeros_like2: zeros of X's shape in `dtype` (a VarType code, default FP32)
    from fluidlite.core.dtypes import convert_np_dtype_to_dtype_
    from fluidlite.testing import OpTest as _OpTest
    x = np.arange(6, dtype="int64").reshape(2, 3)
    for dt in ("float64", "int32", "bool"):
        t = _OpTest()
        t.op_type, t.inputs = "fill_zeros_like2", {"X": x}
        t.attrs = {"dtype": int(convert_np_dtype_to_dtype_(dt))}
        t.outputs = {"Out": np.zeros((2, 3), dtype=dt)}
        t.check_infer()
        t.check_output()
    from fluidlite.core.registry import get_op_def
    assert get_op_def("fill_zeros_like2").forward(x)["Out"].dtype == np.float32


@pytest.mark.parametrize("value,dtype", [(1e100, "int32"), (3e9, "int32"), (-1e39, "float32"),
                                         (float("nan"), "float64"), (300, "uint8")])
def test_fill_any_like_refuses_a_value_its_dtype_cannot_hold(value, dtype):
    """fluid's kernel check (InvalidArgument): the float32 value must lie in the output dtype's
    range and not be NaN; raised when the op is built, as a ValueError that fluid 1.x scripts
    catch as core.EnforceNotMet."""
    import fluidlite as fluid
    from fluidlite.core.registry import get_op_def
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [2, 3], dtype)
        out = main.global_block().create_var(name="out")
        with pytest.raises(ValueError, match="out of range|NaN") as e:
            main.global_block().append_op("fill_any_like", {"X": x}, {"Out": out},
                                          {"value": value})
        assert isinstance(e.value, fluid.core.EnforceNotMet)
        assert not [op for op in main.global_block().ops if op.type == "fill_any_like"]
        # the bounds themselves are fine
        main.global_block().append_op("fill_any_like", {"X": x}, {"Out": out},
                                      {"value": 255 if dtype == "uint8" else 7})
    assert get_op_def("fill_any_like").forward(
        np.zeros((2, 3), dtype), value=255 if dtype == "uint8" else 7)["Out"].dtype == dtype
