"""Tests written from the mutation run of ``fluidlite/ops/metric.py`` (issue 28, round 11):
top_k on 3-D inputs and on long rows (the argpartition path, with ties), k from the K input,
the shape checks and their messages; arg_max / arg_min with their fluid defaults, ``dtype``,
``flatten``, ``keepdims`` and 1-D inputs; accuracy's shape checks, an empty batch and fluid's
``label >= 0`` check.

References: NumPy's stable argsort (top_k: value descending, ties by lower index, as fluid
1.8's top_k kernel's std::partial_sort over (value, index) pairs gives for distinct values and
the documented tie order), np.argmax / np.argmin, fluid 1.8's kernels
(paddle/fluid/operators/top_k_op.{cc,h}, arg_min_max_op_base.h: keepdims default false, dtype
default -1 = int64; metrics/accuracy_op.h: label >= 0 enforced, 0 accuracy for no rows)."""
import re

import numpy as np
import pytest

from fluidlite.core.dtypes import VarType
from fluidlite.core.registry import VarSpec, get_op_def

TOPK, ARGMAX, ARGMIN, ACC = (get_op_def(t) for t in ("top_k", "arg_max", "arg_min",
                                                      "accuracy"))


def ref_topk(x, k):
    idx = np.argsort(-x, axis=-1, kind="stable")[..., :k]
    return np.take_along_axis(x, idx, -1), idx


@pytest.mark.parametrize("shape,k", [((2, 3, 7), 3), ((2, 3, 7), 7), ((3, 40, 100), 1),
                                     ((3, 40, 100), 6), ((3, 40, 100), 99), ((2, 2, 65), 64),
                                     ((5, 64), 10)])
def test_top_k_3d_and_long_rows_with_ties(shape, k):
    rng = np.random.default_rng(k + shape[-1])
    x = rng.integers(0, 12, shape).astype(np.float64)      # many ties
    got = TOPK.forward(x, None, k=k)
    want_out, want_idx = ref_topk(x, k)
    assert got["Indices"].dtype == np.int64 and got["Out"].dtype == np.float64
    np.testing.assert_array_equal(got["Indices"], want_idx)
    np.testing.assert_array_equal(got["Out"], want_out)
    y = rng.standard_normal(shape).astype(np.float32)        # distinct values
    got = TOPK.forward(y, None, k=k)
    np.testing.assert_array_equal(got["Indices"], ref_topk(y, k)[1])
    assert got["Out"].dtype == np.float32


def test_top_k_k_from_the_k_input():
    x = np.arange(24, dtype=np.float64).reshape(2, 3, 4)[..., ::-1].copy()
    got = TOPK.forward(x, np.array([3], np.int32), k=1)
    np.testing.assert_array_equal(got["Indices"], np.broadcast_to([0, 1, 2], (2, 3, 3)))
    got = TOPK.forward(x, np.array([4], np.int64), k=1)          # k == the last dim
    assert got["Out"].shape == (2, 3, 4)
    for bad in (5, 0):
        with pytest.raises(ValueError, match=rf"^top_k: k={bad} must be in \[1, 4\] for X of "
                                             rf"shape \[2, 3, 4\]$"):
            TOPK.forward(x, np.array([bad], np.int32), k=1)
    with pytest.raises(ValueError, match=r"^top_k: k=5 must be in \[1, 4\]"):
        TOPK.forward(x, None, k=5)


def test_top_k_infer():
    spec = TOPK.infer(VarSpec((2, 3, 4), "float32", 1), None, k=4)
    assert (spec["Out"].shape, spec["Out"].dtype, spec["Out"].lod_level) == \
        ((2, 3, 4), VarType.FP32, 1)
    assert (spec["Indices"].shape, spec["Indices"].dtype, spec["Indices"].lod_level) == \
        ((2, 3, 4), VarType.INT64, 1)
    spec = TOPK.infer(VarSpec((2, 3, 9), "float64"), VarSpec((1,), "int32"), k=1)
    assert spec["Out"].shape == (2, 3, -1) and spec["Indices"].shape == (2, 3, -1)
    # k is checked against the last dim only when K is not given and the dim is known
    assert TOPK.infer(VarSpec((2, -1), "float32"), None, k=50)["Out"].shape == (2, 50)
    assert TOPK.infer(VarSpec((9, 3), "float32"), VarSpec((1,), "int32"), k=7)
    with pytest.raises(ValueError, match=r"^top_k: X must have at least one dim$"):
        TOPK.infer(VarSpec((), "float32"), None, k=1)
    with pytest.raises(ValueError, match=r"^top_k: k must be >= 1, got 0$"):
        TOPK.infer(VarSpec((2, 3), "float32"), None, k=0)
    for shape in ((9, 3), (3, 0)):
        with pytest.raises(ValueError, match=rf"^top_k: k=4 exceeds the last dim of X \(shape "
                                             rf"\[{shape[0]}, {shape[1]}\]\)$"):
            TOPK.infer(VarSpec(shape, "float32"), None, k=4)


X3 = np.random.default_rng(1).standard_normal((3, 4, 5))


@pytest.mark.parametrize("op,fn", [(ARGMAX, np.argmax), (ARGMIN, np.argmin)])
def test_arg_extremum_defaults_dtype_flatten(op, fn):
    got = op.forward(X3, axis=1)                    # keepdims false, int64 (fluid's defaults)
    assert got["Out"].dtype == np.int64
    np.testing.assert_array_equal(got["Out"], fn(X3, axis=1))
    got = op.forward(X3)                            # axis 0
    np.testing.assert_array_equal(got["Out"], fn(X3, axis=0))
    spec = op.infer(VarSpec((3, 4, 5), "float64"), axis=1)
    assert spec["Out"].shape == (3, 5) and spec["Out"].dtype == VarType.INT64
    assert op.infer(VarSpec((3, 4, 5), "float64"))["Out"].shape == (4, 5)
    got = op.forward(X3, axis=-1, keepdims=True, dtype=VarType.INT32)
    assert got["Out"].dtype == np.int32 and got["Out"].shape == (3, 4, 1)
    np.testing.assert_array_equal(got["Out"][..., 0], fn(X3, axis=-1))
    spec = op.infer(VarSpec((3, 4, 5), "float64"), axis=-1, keepdims=True, dtype=VarType.INT32)
    assert spec["Out"].shape == (3, 4, 1) and spec["Out"].dtype == VarType.INT32
    got = op.forward(X3, axis=2, flatten=True, dtype=VarType.INT32)
    assert got["Out"].dtype == np.int32 and got["Out"].shape == (1,)
    assert got["Out"][0] == fn(X3.reshape(-1))
    assert op.forward(X3, axis=2, flatten=True)["Out"].dtype == np.int64
    spec = op.infer(VarSpec((3, 4, 5), "float64"), axis=2, flatten=True)
    assert spec["Out"].shape == (1,) and spec["Out"].dtype == VarType.INT64
    # a 1-D input reduces to a [1] result (fluid keeps at least one dim)
    v = np.array([3.0, -1.0, 7.0, 0.5])
    got = op.forward(v, axis=0)
    assert got["Out"].shape == (1,) and got["Out"][0] == fn(v)
    assert op.infer(VarSpec((4,), "float64"), axis=0)["Out"].shape == (1,)
    with pytest.raises(ValueError, match=rf"^{op.type}: axis 3 is out of range"):
        op.infer(VarSpec((3, 4, 5), "float64"), axis=3)


def test_accuracy_checks_and_empty_batch():
    i32 = VarSpec((-1, 2), "int64")
    for shape in ((4,), (4, 2), (4, 1, 1)):
        want = "accuracy: Label must have shape [N, 1], got " + str(list(shape))
        with pytest.raises(ValueError, match="^" + re.escape(want) + "$"):
            ACC.infer(VarSpec((4, 2), "float32"), VarSpec((4, 2), "int64"),
                      VarSpec(shape, "int64"))
    spec = ACC.infer(VarSpec((4, 2), "float32"), i32, VarSpec((-1, -1), "int64"))
    assert {k: (v.shape, v.dtype) for k, v in spec.items()} == {
        "Accuracy": ((1,), VarType.FP32), "Correct": ((1,), VarType.INT32),
        "Total": ((1,), VarType.INT32)}
    with pytest.raises(ValueError, match=r"^accuracy: Indices \[4, 2\] and Label \[3, 1\] must "
                                         r"have the same number of rows$"):
        ACC.infer(VarSpec((4, 2), "float32"), VarSpec((4, 2), "int64"),
                  VarSpec((3, 1), "int64"))
    got = ACC.forward(np.zeros((0, 2), np.float32), np.zeros((0, 2), np.int64),
                      np.zeros((0, 1), np.int64))
    assert got["Accuracy"].tolist() == [0.0] and got["Accuracy"].dtype == np.float32
    assert got["Correct"].tolist() == [0] and got["Total"].tolist() == [0]


def test_accuracy_rejects_negative_labels_as_fluid():
    with pytest.raises(ValueError, match=r"^accuracy: labels must be >= 0, got -1$"):
        ACC.forward(np.zeros((2, 2), np.float32), np.array([[0, 1], [1, 0]], np.int64),
                    np.array([[0], [-1]], np.int64))
    got = ACC.forward(np.zeros((3, 2), np.float32), np.array([[0, 1], [1, 2], [2, 0]]),
                      np.array([[1], [0], [0]], np.int64))
    assert got["Correct"].tolist() == [2] and got["Total"].tolist() == [3]
    np.testing.assert_array_equal(got["Accuracy"], np.array([2 / 3], np.float32))


def test_top_k_long_rows_with_nan_and_many_rows():
    rng = np.random.default_rng(11)
    x = rng.standard_normal((4, 80))
    x[0, [3, 50]] = np.nan
    x[2, :70] = np.nan                      # fewer finite values than k
    got = TOPK.forward(x, None, k=12)
    want = np.argsort(-x, axis=-1, kind="stable")[..., :12]      # NaN: after every number
    np.testing.assert_array_equal(got["Indices"], want)
    y = rng.standard_normal((300, 1000))
    for k in (2, 3, 7, 40):
        np.testing.assert_array_equal(TOPK.forward(y, None, k=k)["Indices"],
                                      np.argsort(-y, axis=-1, kind="stable")[..., :k])


def test_top_k_and_take_along_axis_grads_on_3d():
    rng = np.random.default_rng(12)
    x = rng.standard_normal((2, 3, 5))
    idx = TOPK.forward(x, None, k=2)["Indices"]
    d = rng.standard_normal((2, 3, 2))
    dx = TOPK.backward(x, idx, d, k=2)["X"]
    want = np.zeros_like(x)
    for i in np.ndindex(2, 3):
        want[i][idx[i]] = d[i]
    np.testing.assert_array_equal(dx, want)
    take = get_op_def("take_along_axis_last")
    index = np.array([[[0, 0, 4], [1, 2, 1], [3, 3, 3]], [[4, 0, 1], [2, 2, 0], [1, 4, 4]]])
    np.testing.assert_array_equal(take.forward(x, index)["Out"],
                                  np.take_along_axis(x, index, -1))
    spec = take.infer(VarSpec((2, 3, 5), "float32"), VarSpec((2, 3, 3), "int64"))["Out"]
    assert spec.shape == (2, 3, 3) and spec.dtype == VarType.FP32
    dout = rng.standard_normal((2, 3, 3))
    got = take.backward(x, index, dout)["X"]
    want = np.zeros_like(x)
    for i in np.ndindex(2, 3):
        np.add.at(want[i], index[i], dout[i])            # repeated indices accumulate
    np.testing.assert_allclose(got, want, rtol=1e-15)
