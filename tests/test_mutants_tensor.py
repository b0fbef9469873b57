"""Tests written from mutation testing (issue 28, docs/mutation.md) for ``fluidlite/ops/tensor.py``:
``assign_value`` reads the value attribute fluid names by dtype (and the legacy ``values``),
``sum`` over SelectedRows (all sparse: MergeAdd; mixed: dense with rows scatter-added, repeats
summed), ``fill_any_like`` and ``fill_constant``'s shape inference -- against NumPy."""
import numpy as np
import pytest

from fluidlite.core.dtypes import VarType
from fluidlite.core.registry import VarSpec, get_op_def
from fluidlite.core.selected_rows import SelectedRows

AV = get_op_def("assign_value")


@pytest.mark.parametrize("dtype,attr,values,np_dtype", [
    (VarType.FP32, "fp32_values", [1.5, -2.0, 3.25, 0.0], np.float32),
    (VarType.FP16, "fp32_values", [1.5, -2.0, 3.25, 0.0], np.float16),
    (VarType.FP64, "fp64_values", [1.5, -2.0, 3.25, 1e300], np.float64),
    (VarType.INT32, "int32_values", [1, -2, 3, 2 ** 31 - 1], np.int32),
    (VarType.INT64, "int64_values", [1, -2, 3, 2 ** 40], np.int64),
    (VarType.BOOL, "bool_values", [True, False, False, True], np.bool_)])
def test_assign_value_reads_the_attribute_of_its_dtype(dtype, attr, values, np_dtype):
    decoys = {a: [9, 9, 9, 9] for a in ("fp32_values", "int32_values", "int64_values",
                                          "bool_values", "fp64_values") if a != attr}
    out = AV.forward(shape=[2, 2], dtype=dtype, **{attr: values}, **decoys)["Out"]
    assert out.dtype == np_dtype and out.shape == (2, 2)
    np.testing.assert_array_equal(out, np.array(values, np_dtype).reshape(2, 2))


def test_assign_value_falls_back_to_legacy_values_then_to_any_given_list():
    out = AV.forward(shape=[3], dtype=VarType.INT64, values=[4, 5, 6])["Out"]
    np.testing.assert_array_equal(out, np.array([4, 5, 6], np.int64))
    out = AV.forward(shape=[2], dtype=VarType.FP32, int64_values=[7, 8])["Out"]
    assert out.dtype == np.float32 and out.tolist() == [7.0, 8.0]
    assert AV.infer(shape=[2, 3], dtype=VarType.INT32)["Out"] == VarSpec((2, 3), VarType.INT32)


def _rows(rows, seed, height=6):
    v = np.random.default_rng(seed).standard_normal((len(rows), 3))
    return SelectedRows(np.array(rows, np.int64), v, height)


def test_sum_of_selected_rows_merges_their_rows():
    a, b = _rows([4, 1, 4], 0), _rows([1, 5], 1)
    out = get_op_def("sum").forward([a, b])["Out"]
    assert isinstance(out, SelectedRows) and out.height == 6
    assert out.rows.tolist() == [1, 4, 5]
    np.testing.assert_allclose(out.to_dense(), a.to_dense() + b.to_dense(), rtol=1e-15)


def test_sum_of_dense_and_selected_rows_is_dense_with_repeated_rows_added():
    dense = np.random.default_rng(2).standard_normal((6, 3))
    dense2 = np.random.default_rng(3).standard_normal((6, 3))
    a = _rows([4, 1, 4], 4)
    out = get_op_def("sum").forward([dense, a, dense2])["Out"]
    assert isinstance(out, np.ndarray) and out.shape == (6, 3)
    ref = dense + dense2
    np.add.at(ref, [4, 1, 4], a.value)
    np.testing.assert_allclose(out, ref, rtol=1e-14)
    assert not np.shares_memory(out, dense)          # the first input is not written


def test_sum_var_types_follow_fluid():
    s = get_op_def("sum")
    sr, lt = VarType.SELECTED_ROWS, VarType.LOD_TENSOR
    assert s.var_types({"X": [sr, sr]}, {})["Out"] == sr
    assert s.var_types({"X": [sr, lt]}, {})["Out"] == lt
    assert s.var_types({"X": [lt, lt]}, {})["Out"] == lt


@pytest.mark.parametrize("value,dtype,want", [(2.5, -1, np.float32),
                                              (3.0, int(VarType.INT64), np.int64)])
def test_fill_any_like(value, dtype, want):
    x = np.zeros((2, 3), np.float32)
    out = get_op_def("fill_any_like").forward(x, value=value, dtype=dtype)["Out"]
    assert out.dtype == want and out.shape == (2, 3) and (out == value).all()
    spec = get_op_def("fill_any_like").infer(VarSpec((2, 3), VarType.FP32), dtype=dtype)["Out"]
    assert spec.dtype == (VarType.FP32 if dtype < 0 else VarType.INT64)


def test_fill_constant_shape_inference():
    fc = get_op_def("fill_constant")
    assert fc.infer(shape=[2, 3])["Out"].shape == (2, 3)
    assert fc.infer(VarSpec((1,), VarType.FP32), VarSpec((3,), VarType.INT32),
                    shape=[])["Out"].shape == (-1, -1, -1)
    lst = [VarSpec((1,), VarType.INT32)] * 2
    assert fc.infer(None, None, lst, shape=[])["Out"].shape == (-1, -1)
    assert fc.infer(None, None, lst, shape=[4, 5])["Out"].shape == (4, 5)
    with pytest.raises(ValueError, match=r"fill_constant: every dim of shape must be >= 0, but "
                                         r"received shape \[2, -1\]"):
        fc.infer(shape=[2, -1])
