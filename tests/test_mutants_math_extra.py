"""Tests written from the sampled mutation run (issue 28, docs/mutation.md, seventh round) for
``fluidlite/ops/math_extra.py``: the whole-tensor checks (isfinite / isinf / isnan) on integer
and float inputs, NumPy's broadcast rule in the build-time checks of ``dist`` / ``allclose``
(a 0-sized dim does not broadcast against 4), and the messages of ``bmm`` / ``log_softmax``'s
checks -- against NumPy and the documented contracts."""
import numpy as np
import pytest

from fluidlite.core.dtypes import VarType
from fluidlite.core.registry import VarSpec, get_op_def


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.bool_])
def test_whole_checks_of_an_integer_tensor_are_finite_and_never_inf_or_nan(dtype):
    x = np.array([[0, 1], [1, 0]], dtype)
    expected = {"isfinite": True, "isinf": False, "isnan": False}
    for op, want in expected.items():
        out = get_op_def(op).forward(X=x)
        assert set(out) == {"Out"}
        assert out["Out"].dtype == np.bool_ and out["Out"].shape == (1,)
        assert out["Out"].tolist() == [want], op


@pytest.mark.parametrize("bad,want", [
    (None, {"isfinite": True, "isinf": False, "isnan": False}),
    (np.inf, {"isfinite": False, "isinf": True, "isnan": False}),
    (-np.inf, {"isfinite": False, "isinf": True, "isnan": False}),
    (np.nan, {"isfinite": False, "isinf": False, "isnan": True})])
def test_whole_checks_of_a_float_tensor_against_numpy(bad, want):
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    if bad is not None:
        x[2, 1] = bad
    for op, expected in want.items():
        out = get_op_def(op).forward(X=x)["Out"]
        assert out.tolist() == [expected], op
        ref = {"isfinite": np.isfinite(x).all(), "isinf": np.isinf(x).any(),
               "isnan": np.isnan(x).any()}[op]
        assert out.tolist() == [bool(ref)]


@pytest.mark.parametrize("op", ["dist", "allclose"])
def test_build_time_broadcast_follows_numpy_also_for_zero_sized_dims(op):
    d = get_op_def(op)
    slots = ("X", "Y") if op == "dist" else ("Input", "Other")
    spec = lambda s: VarSpec(s, VarType.FP32)
    # NumPy refuses (4,) against (0,): a size-0 dim is not a 1
    with pytest.raises(ValueError):
        np.broadcast_shapes((4,), (0,))
    with pytest.raises(ValueError, match=rf"{op}: shapes \[4\] and \[0\] cannot be broadcast"):
        d.infer(**{slots[0]: spec((4,)), slots[1]: spec((0,))})
    # an unknown dim (-1) is accepted against any size, on either side
    d.infer(**{slots[0]: spec((-1, 3)), slots[1]: spec((5, 3))})
    d.infer(**{slots[0]: spec((5, 3)), slots[1]: spec((5, -1))})
    with pytest.raises(ValueError, match=rf"{op}: shapes \[2, 3\] and \[2, 4\]"):
        d.infer(**{slots[0]: spec((2, 3)), slots[1]: spec((2, 4))})


def test_bmm_and_log_softmax_messages_name_the_shapes_and_the_slot():
    bmm = get_op_def("bmm")
    with pytest.raises(ValueError, match=r"bmm: X and Y must be 3-D tensors, but received X "
                                         r"\[2, 3\] and Y \[2, 3, 4\]"):
        bmm.infer(X=VarSpec((2, 3), VarType.FP32), Y=VarSpec((2, 3, 4), VarType.FP32))
    with pytest.raises(ValueError, match=r"log_softmax: X must be a float tensor, but it is "
                                         r"int64"):
        get_op_def("log_softmax").infer(X=VarSpec((2, 3), VarType.INT64))
