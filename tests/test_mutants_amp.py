"""Mutation-round tests for fluidlite/ops/amp.py (check_finite_and_unscale,
update_loss_scaling, select_input).

References: Paddle's update_loss_scaling kernel (paddle/fluid/operators/amp/
update_loss_scaling_op.h, ``Update``: the rule written below as a Python loop over steps, its
scale arithmetic in the scale's dtype) and its ``LazyZeros`` (the outputs are zeros on an
overflow); a sparse (SelectedRows) gradient keeps its rows as fluid's; the slot names of the
error messages are the op's input slots.
"""
import warnings

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core.registry import get_op_def
from fluidlite.core.selected_rows import SelectedRows


def ref_update(found, scale, good, bad, n_incr, n_decr, incr, decr):
    """Paddle's Update (update_loss_scaling_op.h) for one step, in the scale's dtype."""
    t = type(scale)
    if found:
        good, bad = 0, bad + 1
        if bad == n_decr:
            new = t(scale * t(decr))
            scale = t(1) if new < t(1) else new
            bad = 0
    else:
        bad, good = 0, good + 1
        if good == n_incr:
            with np.errstate(over="ignore"):
                new = t(scale * t(incr))
            scale = new if np.isfinite(new) else scale
            good = 0
    return scale, good, bad


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n_incr, n_decr, incr, decr", [(3, 2, 2.0, 0.5), (1, 1, 3.0, 0.8),
                                                         (2, 3, 1.5, 0.25)])
def test_update_loss_scaling_follows_paddles_rule_over_many_steps(dtype, n_incr, n_decr,
                                                                  incr, decr):
    rng = np.random.default_rng(n_incr * 10 + n_decr)
    d = get_op_def("update_loss_scaling")
    t = np.dtype(dtype).type
    scale, good, bad = t(4.0), 0, 0
    x = np.arange(6, dtype=dtype).reshape(2, 3)
    for _ in range(40):
        found = bool(rng.random() < 0.4)
        out = d.forward([x], np.array([found]), np.array([scale], dtype),
                        np.array([good], "int32"), np.array([bad], "int32"),
                        incr_every_n_steps=n_incr, decr_every_n_nan_or_inf=n_decr,
                        incr_ratio=incr, decr_ratio=decr)
        scale, good, bad = ref_update(found, scale, good, bad, n_incr, n_decr, incr, decr)
        assert out["LossScaling"].dtype == np.dtype(dtype) and out["LossScaling"].shape == (1,)
        assert out["LossScaling"][0] == scale
        assert out["OutGoodSteps"].tolist() == [good] and out["OutBadSteps"].tolist() == [bad]
        assert out["OutGoodSteps"].dtype == out["OutBadSteps"].dtype == np.int32
        np.testing.assert_array_equal(out["Out"][0], np.zeros_like(x) if found else x)


def _uls(found, scale, good=0, bad=0, dtype="float32", **attrs):
    kw = dict(incr_every_n_steps=2, decr_every_n_nan_or_inf=1, incr_ratio=2.0, decr_ratio=0.8)
    kw.update(attrs)
    return get_op_def("update_loss_scaling").forward(
        [np.ones(2, dtype)], np.array([found]), np.array([scale], dtype),
        np.array([good], "int32"), np.array([bad], "int32"), **kw)


def test_a_shrunk_scale_between_one_and_two_is_kept():
    out = _uls(True, 2.0, decr_ratio=0.8)
    assert out["LossScaling"][0] == np.float32(1.6)
    out = _uls(True, 1.0, decr_ratio=0.5)                   # below 1: clamped to 1
    assert out["LossScaling"].tolist() == [1.0]


def test_a_grown_scale_that_overflows_keeps_the_old_one_silently():
    big = np.finfo(np.float32).max / 1.5
    with warnings.catch_warnings():
        warnings.simplefilter("error")                      # no overflow RuntimeWarning
        out = _uls(False, big, good=1)
    assert out["LossScaling"][0] == np.float32(big) and out["OutGoodSteps"].tolist() == [0]


def test_stop_update_only_zeroes():
    out = _uls(True, 8.0, good=1, bad=0, stop_update=True)
    assert out["LossScaling"].tolist() == [8.0]
    assert out["OutGoodSteps"].tolist() == [1] and out["OutBadSteps"].tolist() == [0]
    np.testing.assert_array_equal(out["Out"][0], [0.0, 0.0])


@pytest.mark.parametrize("slot", ["FoundInfinite", "InGoodSteps", "InBadSteps"])
def test_update_loss_scaling_one_element_inputs_are_checked(slot):
    args = {"FoundInfinite": np.array([False]), "PrevLossScaling": np.array([2.0], "float32"),
            "InGoodSteps": np.array([0], "int32"), "InBadSteps": np.array([0], "int32")}
    args[slot] = np.repeat(args[slot], 2)
    with pytest.raises(ValueError, match=rf"^update_loss_scaling: input {slot} must hold "
                                         r"exactly one element, but it has shape \[2\]$"):
        get_op_def("update_loss_scaling").forward([np.ones(2, "float32")], **args,
                                                  incr_every_n_steps=2,
                                                  decr_every_n_nan_or_inf=1, incr_ratio=2.0,
                                                  decr_ratio=0.5)


def _sparse(value):
    return SelectedRows(np.array([4, 1], np.int64), value, 6)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_a_sparse_gradient_keeps_its_rows_when_zeroed():
    v = np.array([[1.0, np.inf], [2.0, 3.0]], "float32")
    out = get_op_def("check_finite_and_unscale").forward([_sparse(v)], np.array([2.0], "float32"))
    o = out["Out"][0]
    assert type(o) is SelectedRows and o.rows.tolist() == [4, 1] and o.height == 6
    np.testing.assert_array_equal(o.value, np.zeros((2, 2), "float32"))
    assert o.value.dtype == np.float32 and out["FoundInfinite"].tolist() == [True]
    fine = np.array([[1.0, 4.0], [2.0, 3.0]], "float32")
    out = get_op_def("check_finite_and_unscale").forward([_sparse(fine)],
                                                         np.array([2.0], "float32"))
    np.testing.assert_array_equal(out["Out"][0].value, fine / 2)
    res = get_op_def("update_loss_scaling").forward(
        [_sparse(fine)], np.array([True]), np.array([2.0], "float32"), np.array([0], "int32"),
        np.array([0], "int32"), incr_every_n_steps=2, decr_every_n_nan_or_inf=2, incr_ratio=2.0,
        decr_ratio=0.5)
    o = res["Out"][0]
    assert type(o) is SelectedRows and o.rows.tolist() == [4, 1]
    np.testing.assert_array_equal(o.value, np.zeros((2, 2), "float32"))


def test_select_input_errors_and_inference():
    d = get_op_def("select_input")
    with pytest.raises(ValueError, match=r"^select_input: input Mask must hold exactly one "
                                         r"element, but it has shape \[2\]$"):
        d.forward([np.zeros(1), np.ones(1)], np.array([0, 1], "int32"))
    with pytest.raises(ValueError, match=r"^select_input: input X must hold at least one "
                                         r"variable$"):
        d.infer([], None)
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        a = fluid.data("a", [2, 3], "float32")
        b = fluid.data("b", [4, 5], "float64")
        m = fluid.data("m", [1], "int32")
        block = main.global_block()
        out = block.create_var(name="sel_out")
        block.append_op("select_input", {"X": [a, b], "Mask": m}, {"Out": out})
    assert tuple(out.shape) == (2, 3) and out.dtype == fluid.core.VarDesc.VarType.FP32


def test_out_var_types_follow_x():
    from fluidlite.core.dtypes import VarType
    for op_type in ("check_finite_and_unscale", "update_loss_scaling"):
        vt = get_op_def(op_type).var_types
        assert vt({"X": [VarType.SELECTED_ROWS, VarType.LOD_TENSOR, VarType.LOD_TENSOR_ARRAY]},
                  {}) == {"Out": [VarType.SELECTED_ROWS, VarType.LOD_TENSOR, VarType.LOD_TENSOR]}
        assert vt({}, {}) == {"Out": []}


def test_scale_message_names_the_op():
    with pytest.raises(ValueError, match=r"^check_finite_and_unscale: input Scale must hold "
                                         r"exactly one element, but it has shape \[2\]$"):
        get_op_def("check_finite_and_unscale").forward([np.ones(2, "float32")],
                                                       np.ones(2, "float32"))
