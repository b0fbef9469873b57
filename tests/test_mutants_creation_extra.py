"""Tests written from the mutation run of ``fluidlite/ops/creation_extra.py`` (issue 28, round
11): range (an empty range, a wrong-signed fractional step, integer counts, a float32 count
computed in float32, a non-zero start), linspace (two points, the slot checks), diag's and
eye's inference, eye's zero sizes and fluid's defaults, and the checks with their messages.

References: fluid 1.8's kernels (range_op.h: GetSize = ceil(|(end - start) / step|) in T,
std::ceil of the division for integers; linspace_op.h: step = (stop - start) / (num - 1);
eye_op.cc: num_rows >= 0, num_columns -1 = num_rows) and NumPy's arange / linspace / eye."""
import re

import numpy as np
import pytest

from fluidlite.core.dtypes import VarType
from fluidlite.core.registry import VarSpec, get_op_def

RANGE, LIN, DIAG, EYE = (get_op_def(t) for t in ("range", "linspace", "diag", "eye"))


def r(start, end, step, dt):
    return RANGE.forward(np.array([start], dt), np.array([end], dt), np.array([step], dt))["Out"]


def test_range_values_and_counts():
    assert r(3, 3, -1, np.int64).tolist() == []
    out = r(0, 6, 4, np.int32)
    assert out.tolist() == [0, 4] and out.dtype == np.int32
    assert r(7, -2, -3, np.int64).tolist() == [7, 4, 1]
    # float32(7.35) / float32(0.29) from 3: 15 in float32 arithmetic (fluid), 16 in double
    out = r(3.0, 7.35, 0.29, np.float32)
    assert out.dtype == np.float32 and out.size == 15
    np.testing.assert_allclose(out, 3.0 + np.float32(0.29) * np.arange(15), rtol=1e-6)
    out = r(-1.5, 1.0, 0.5, np.float64)
    np.testing.assert_allclose(out, [-1.5, -1.0, -0.5, 0.0, 0.5])


def test_range_checks():
    with pytest.raises(ValueError, match=r"^range: step must not be 0$"):
        r(0, 1, 0, np.int64)
    with pytest.raises(ValueError, match=re.escape("range: step (0.5) must be > 0 when start "
                                                   "(5.0) < end (1.0) and < 0 when start > end")):
        r(5.0, 1.0, 0.5, np.float64)
    with pytest.raises(ValueError, match=r"^range: step \(-1\) must be > 0"):
        r(1, 5, -1, np.int64)
    for i, slot in enumerate(("Start", "End", "Step")):
        args = [np.array([0.0]), np.array([4.0]), np.array([1.0])]
        args[i] = np.array([1.0, 2.0])
        with pytest.raises(ValueError, match=rf"^range: {slot} must hold exactly one value, but "
                                             rf"it has shape \[2\]$"):
            RANGE.forward(*args)
    f, i = VarSpec((1,), "float32"), VarSpec((1,), "int64")
    assert RANGE.infer(f, f, f)["Out"].shape == (-1,)
    for args, slot in (((f, i, f), "End"), ((f, f, i), "Step")):
        with pytest.raises(ValueError, match=rf"^range: {slot} must have the dtype of Start"):
            RANGE.infer(*args)


def test_linspace():
    out = LIN.forward(np.array([2.0]), np.array([5.0]), np.array([2], np.int32),
                      dtype=VarType.FP64)["Out"]
    assert out.tolist() == [2.0, 5.0] and out.dtype == np.float64
    out = LIN.forward(np.array([1.0]), np.array([3.0]), np.array([5]))["Out"]
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, [1.0, 1.5, 2.0, 2.5, 3.0])
    spec = LIN.infer(VarSpec((1,), "float32"), VarSpec((1,), "float32"),
                     VarSpec((1,), "int32"), dtype=VarType.FP64)["Out"]
    assert spec.shape == (-1,) and spec.dtype == VarType.FP64
    with pytest.raises(ValueError, match=r"^linspace: Num must be int32 or int64, but received "):
        LIN.infer(VarSpec((1,), "float32"), VarSpec((1,), "float32"), VarSpec((1,), "float32"))
    for i, slot in enumerate(("Start", "Stop", "Num")):
        args = [np.array([0.0]), np.array([4.0]), np.array([3])]
        args[i] = np.zeros(2, args[i].dtype)
        with pytest.raises(ValueError, match=rf"^linspace: {slot} must hold exactly one value, "
                                             rf"but it has shape \[2\]$"):
            LIN.forward(*args)


def test_diag_and_eye():
    spec = DIAG.infer(VarSpec((3,), "int32"))["Out"]
    assert spec.shape == (3, 3) and spec.dtype == VarType.INT32
    assert EYE.infer()["Out"].shape == (0, 0)
    assert EYE.forward()["Out"].shape == (0, 0)
    assert EYE.infer(num_rows=0, num_columns=3)["Out"].shape == (0, 3)
    assert EYE.infer(num_rows=2, num_columns=0)["Out"].shape == (2, 0)
    np.testing.assert_array_equal(EYE.forward(num_rows=2, num_columns=3)["Out"], np.eye(2, 3))
    for rows, cols in ((-1, 3), (2, -2)):
        with pytest.raises(ValueError, match=rf"^eye: num_rows and num_columns must be >= 0, but "
                                             rf"received {rows} and {cols}$"):
            EYE.infer(num_rows=rows, num_columns=cols)


def test_range_size_of_python_values():
    """Without a dtype (the layers' static size): fluid's ceil(|(end - start) / step|)."""
    from fluidlite.ops.creation_extra import range_size
    assert range_size(0.0, 1.0, 0.3) == 4
    assert range_size(2, 0.5, -0.5) == 3
    assert range_size(1.0, 1.0, 0.25) == 0
    assert range_size(0, 7, 3) == 3 and range_size(7, 0, -3) == 3
