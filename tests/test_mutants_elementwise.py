"""Tests written from mutation testing (issue 28, docs/mutation.md) for
``fluidlite/ops/elementwise.py``: the variable type a SelectedRows input gives ``scale`` and
``elementwise_mul`` (fluid keeps a sparse gradient sparse when it scales it), the LoD level an
elementwise output inherits from X, and the dtype-mismatch error's fix."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core.dtypes import VarType
from fluidlite.core.registry import get_op_def
from fluidlite.core.selected_rows import SelectedRows


def _block_with(x_type):
    main = fluid.Program()
    block = main.global_block()
    x = block.create_var(name="x", shape=[6, 3], dtype="float32", type=x_type)
    s = block.create_var(name="s", shape=[1], dtype="float32")
    return main, block, x, s


@pytest.mark.parametrize("x_type", [VarType.SELECTED_ROWS, VarType.LOD_TENSOR])
def test_scale_and_mul_keep_a_selected_rows_x_sparse_and_a_dense_x_dense(x_type):
    main, block, x, s = _block_with(x_type)
    out_scale = block.create_var(name="o1", dtype="float32")
    out_mul = block.create_var(name="o2", dtype="float32")
    block.append_op(type="scale", inputs={"X": x}, outputs={"Out": out_scale},
                    attrs={"scale": 2.0})
    block.append_op(type="elementwise_mul", inputs={"X": x, "Y": s}, outputs={"Out": out_mul})
    assert out_scale.type == x_type and out_mul.type == x_type


def test_scaling_a_selected_rows_value_scales_its_values_and_keeps_its_rows():
    rows = SelectedRows([4, 1, 4], np.arange(9, dtype=np.float32).reshape(3, 3), height=6)
    got = get_op_def("scale").forward(rows, scale=3.0, bias=0.0)["Out"]
    assert isinstance(got, SelectedRows)
    assert list(got.rows) == [4, 1, 4] and got.height == 6
    np.testing.assert_array_equal(got.value,
                                  3 * np.arange(9, dtype=np.float32).reshape(3, 3))


@pytest.mark.parametrize("op", ["elementwise_add", "elementwise_mul", "elementwise_sub"])
def test_an_elementwise_output_inherits_the_lod_level_of_x(op):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 3], "float32", lod_level=1)
        y = fluid.data("y", [3], "float32")
        out = getattr(fluid.layers, op)(x, y)
    assert out.lod_level == 1


def test_a_dtype_mismatch_names_both_dtypes_and_the_cast_that_fixes_it():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 3], "float64")
        y = fluid.data("y", [-1, 3], "float32")
        with pytest.raises(ValueError, match=r"X is float64 and Y is float32; cast one of them, "
                                             r"e\.g\. fluid\.layers\.cast\(y, 'float64'\)"):
            fluid.layers.elementwise_add(x, y)
