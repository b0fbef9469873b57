"""Tests written from the mutation run of ``fluidlite/ops/loss_extra.py`` (issue 28,
docs/mutation.md): the build-time checks of every loss op with their exact messages and the
specs they declare, fluid 1.8's attribute defaults, the boundaries of fluid's kernels
(margin_rank_loss's ``Activated = out > 0``, teacher_student_sigmoid_loss's gradient cut at
``x <= lower`` / ``x >= upper``, a label equal to the class count), kldiv_loss's divisors for one
element / one row / a 0-d input, rank-3 inputs of bpr_loss, overflow without warnings, and
gradients with non-default attributes through the program (the grad op must get them) --
against float64 NumPy formulas written here, numeric gradients and fluid 1.8's kernels
(margin_rank_loss_op.h, teacher_student_sigmoid_loss_op.h, bpr_loss_op.h)."""
import warnings

import numpy as np
import pytest

from fluidlite.core.dtypes import VarType
from fluidlite.core.registry import VarSpec, get_op_def
from fluidlite.testing import OpTest

F32, I64 = VarType.FP32, VarType.INT64


def _spec(shape, dtype=F32, lod=0):
    return VarSpec(tuple(shape), dtype, lod)


def _sig(x):
    return 1.0 / (1.0 + np.exp(-x))


def _grad_check(op_type, inputs, outputs_slot, attrs, check):
    t = OpTest()
    t.op_type, t.inputs, t.outputs, t.attrs = op_type, inputs, {}, attrs
    t.check_grad(check, outputs_slot)


# -- build-time checks: every message names the op, the slots and what was received -----------
_BAD = [
    ("huber_loss", dict(X=_spec([4, 1]), Y=_spec([4, 2])),
     "huber_loss: X and Y must have the same shape, but received X [4, 1] and Y [4, 2]"),
    ("huber_loss", dict(X=_spec([4, 1], I64), Y=_spec([4, 1], I64)),
     "huber_loss: X must be a float tensor, but it is int64"),
    ("smooth_l1_loss", dict(X=_spec([4, 3]), Y=_spec([4, 2])),
     "smooth_l1_loss: X and Y must have the same shape, but received X [4, 3] and Y [4, 2]"),
    ("smooth_l1_loss", dict(X=_spec([4, 3], I64), Y=_spec([4, 3], I64)),
     "smooth_l1_loss: X must be a float tensor, but it is int64"),
    ("smooth_l1_loss", dict(X=_spec([4]), Y=_spec([4])),
     "smooth_l1_loss: X must have at least 2 dims (batch first), but its shape is [4]"),
    ("smooth_l1_loss", dict(X=_spec([4, 3]), Y=_spec([4, 3]), InsideWeight=_spec([4, 2])),
     "smooth_l1_loss: X and InsideWeight must have the same shape, but received X [4, 3] and "
     "InsideWeight [4, 2]"),
    ("smooth_l1_loss", dict(X=_spec([4, 3]), Y=_spec([4, 3]), InsideWeight=_spec([4, 3]),
                            OutsideWeight=_spec([3, 3])),
     "smooth_l1_loss: X and OutsideWeight must have the same shape, but received X [4, 3] and "
     "OutsideWeight [3, 3]"),
    ("log_loss", dict(Predicted=_spec([4, 1]), Labels=_spec([5, 1])),
     "log_loss: Predicted and Labels must have the same shape, but received Predicted [4, 1] "
     "and Labels [5, 1]"),
    ("log_loss", dict(Predicted=_spec([4, 1], I64), Labels=_spec([4, 1], I64)),
     "log_loss: Predicted must be a float tensor, but it is int64"),
    ("log_loss", dict(Predicted=_spec([4, 2]), Labels=_spec([4, 2])),
     "log_loss: Predicted must have shape [N, 1], but it is [4, 2]"),
    ("log_loss", dict(Predicted=_spec([4]), Labels=_spec([4])),
     "log_loss: Predicted must have shape [N, 1], but it is [4]"),
    ("kldiv_loss", dict(X=_spec([4, 3]), Target=_spec([4, 2])),
     "kldiv_loss: X and Target must have the same shape, but received X [4, 3] and Target "
     "[4, 2]"),
    ("kldiv_loss", dict(X=_spec([4, 3], I64), Target=_spec([4, 3], I64)),
     "kldiv_loss: X must be a float tensor, but it is int64"),
    ("margin_rank_loss", dict(Label=_spec([4, 1]), X1=_spec([4, 1]), X2=_spec([3, 1])),
     "margin_rank_loss: X1 and X2 must have the same shape, but received X1 [4, 1] and X2 "
     "[3, 1]"),
    ("margin_rank_loss", dict(Label=_spec([3, 1]), X1=_spec([4, 1]), X2=_spec([4, 1])),
     "margin_rank_loss: Label and X1 must have the same shape, but received Label [3, 1] and "
     "X1 [4, 1]"),
    ("margin_rank_loss", dict(Label=_spec([4, 1], I64), X1=_spec([4, 1], I64),
                              X2=_spec([4, 1], I64)),
     "margin_rank_loss: X1 must be a float tensor, but it is int64"),
    ("rank_loss", dict(Label=_spec([4, 1, 1]), Left=_spec([4, 1]), Right=_spec([4, 1])),
     "rank_loss: Label must be [N] or [N, 1], but received Label [4, 1, 1]"),
    ("rank_loss", dict(Label=_spec([4, 1]), Left=_spec([4, 2]), Right=_spec([4, 1])),
     "rank_loss: Left must be [N] or [N, 1], but received Left [4, 2]"),
    ("rank_loss", dict(Label=_spec([4, 1]), Left=_spec([4, 1]), Right=_spec([4, 3])),
     "rank_loss: Right must be [N] or [N, 1], but received Right [4, 3]"),
    ("rank_loss", dict(Label=_spec([4, 1]), Left=_spec([5, 1]), Right=_spec([4, 1])),
     "rank_loss: Label and Left must have the same first dim, but received Label [4, 1] and "
     "Left [5, 1]"),
    ("rank_loss", dict(Label=_spec([4]), Left=_spec([4]), Right=_spec([3])),
     "rank_loss: Label and Right must have the same first dim, but received Label [4] and "
     "Right [3]"),
    ("rank_loss", dict(Label=_spec([4, 1]), Left=_spec([4, 1], I64), Right=_spec([4, 1], I64)),
     "rank_loss: Left must be a float tensor, but it is int64"),
    ("bpr_loss", dict(X=_spec([4, 3], I64), Label=_spec([4, 1], I64)),
     "bpr_loss: X must be a float tensor, but it is int64"),
    ("bpr_loss", dict(X=_spec([4, 3]), Label=_spec([4, 1])),
     "bpr_loss: Label must be an integer tensor (class indices), but it is float32"),
    ("bpr_loss", dict(X=_spec([4, 3]), Label=_spec([4, 2], I64)),
     "bpr_loss: Label must have X's shape with last dim 1, but received X [4, 3] and Label "
     "[4, 2]"),
    ("bpr_loss", dict(X=_spec([4, 3]), Label=_spec([4], I64)),
     "bpr_loss: Label must have X's shape with last dim 1, but received X [4, 3] and Label [4]"),
    ("bpr_loss", dict(X=_spec([2, 4, 3]), Label=_spec([2, 5, 1], I64)),
     "bpr_loss: Label must have X's shape with last dim 1, but received X [2, 4, 3] and Label "
     "[2, 5, 1]"),
    ("bpr_loss", dict(X=_spec([2, 4, 3]), Label=_spec([3, 4, 1], I64)),
     "bpr_loss: Label must have X's shape with last dim 1, but received X [2, 4, 3] and Label "
     "[3, 4, 1]"),
    ("sigmoid_focal_loss", dict(X=_spec([4, 3], I64), Label=_spec([4, 1], VarType.INT32),
                                FgNum=_spec([1], VarType.INT32)),
     "sigmoid_focal_loss: X must be a float tensor, but it is int64"),
    ("sigmoid_focal_loss", dict(X=_spec([2, 4, 3]), Label=_spec([2, 4, 1], VarType.INT32),
                                FgNum=_spec([1], VarType.INT32)),
     "sigmoid_focal_loss: X must be [N, C], but its shape is [2, 4, 3]"),
    ("sigmoid_focal_loss", dict(X=_spec([4, 3]), Label=_spec([4, 1]),
                                FgNum=_spec([1], VarType.INT32)),
     "sigmoid_focal_loss: Label must be an integer tensor (class indices), but it is float32"),
    ("sigmoid_focal_loss", dict(X=_spec([4, 3]), Label=_spec([4, 1], VarType.INT32),
                                FgNum=_spec([1])),
     "sigmoid_focal_loss: FgNum must be an int32 tensor of shape [1], but it is float32"),
    ("teacher_student_sigmoid_loss", dict(X=_spec([4, 1], I64), Label=_spec([4, 1], I64)),
     "teacher_student_sigmoid_loss: X must be a float tensor, but it is int64"),
    ("teacher_student_sigmoid_loss", dict(X=_spec([4, 1]), Label=_spec([3, 1])),
     "teacher_student_sigmoid_loss: X and Label must have the same shape, but received X "
     "[4, 1] and Label [3, 1]"),
    ("teacher_student_sigmoid_loss", dict(X=_spec([4, 2]), Label=_spec([4, 2])),
     "teacher_student_sigmoid_loss: X must have shape [N, 1], but it is [4, 2]"),
    ("teacher_student_sigmoid_loss", dict(X=_spec([4, 1, 1]), Label=_spec([4, 1, 1])),
     "teacher_student_sigmoid_loss: X must have shape [N, 1], but it is [4, 1, 1]"),
    ("center_loss", dict(X=_spec([4, 3], I64), Label=_spec([4, 1], I64), Centers=_spec([5, 3]),
                         CenterUpdateRate=_spec([1])),
     "center_loss: X must be a float tensor, but it is int64"),
    ("center_loss", dict(X=_spec([4, 3]), Label=_spec([4, 1], I64), Centers=_spec([5, 2]),
                         CenterUpdateRate=_spec([1])),
     "center_loss: X [N, D] and Centers [num_classes, D] must agree on D, but received X "
     "[4, 3] and Centers [5, 2]"),
    ("center_loss", dict(X=_spec([4]), Label=_spec([4, 1], I64), Centers=_spec([5, 3]),
                         CenterUpdateRate=_spec([1])),
     "center_loss: X [N, D] and Centers [num_classes, D] must agree on D, but received X "
     "[4] and Centers [5, 3]"),
    ("center_loss", dict(X=_spec([4, 3]), Label=_spec([4, 1], I64), Centers=_spec([3]),
                         CenterUpdateRate=_spec([1])),
     "center_loss: X [N, D] and Centers [num_classes, D] must agree on D, but received X "
     "[4, 3] and Centers [3]"),
    ("center_loss", dict(X=_spec([4, 3]), Label=_spec([4], I64), Centers=_spec([6, 3]),
                         CenterUpdateRate=_spec([1])),
     "center_loss: Centers has 6 rows but cluster_num is 5"),
    ("center_loss", dict(X=_spec([4, 3]), Label=_spec([3], I64), Centers=_spec([5, 3]),
                         CenterUpdateRate=_spec([1])),
     "center_loss: Label [N] must have one id per row of X, but received X [4, 3] and Label "
     "[3]"),
    ("center_loss", dict(X=_spec([4, 3]), Label=_spec([4]), Centers=_spec([5, 3]),
                         CenterUpdateRate=_spec([1])),
     "center_loss: Label must be an integer tensor (class indices), but it is float32"),
    ("center_loss", dict(X=_spec([4, 3]), Label=_spec([3, 1], I64), Centers=_spec([5, 3]),
                         CenterUpdateRate=_spec([1])),
     "center_loss: Label must have X's shape with last dim 1, but received X [4, 3] and Label "
     "[3, 1]"),
]


@pytest.mark.parametrize("op,specs,message", _BAD, ids=[f"{b[0]}-{i}" for i, b in
                                                        enumerate(_BAD)])
def test_build_time_checks_give_the_exact_message(op, specs, message):
    attrs = {"cluster_num": 5} if op == "center_loss" else {}
    with pytest.raises(ValueError) as e:
        get_op_def(op).infer(**specs, **attrs)
    assert str(e.value) == message


def test_kldiv_reduction_is_checked_first_and_named():
    with pytest.raises(ValueError) as e:
        get_op_def("kldiv_loss").infer(X=_spec([4, 3], I64), Target=_spec([4, 2]),
                                       reduction="avg")
    assert str(e.value) == ("kldiv_loss: reduction must be one of ['none', 'batchmean', 'mean', "
                            "'sum'], but received 'avg'")


@pytest.mark.parametrize("op,specs,want", [
    # unknown trailing dims (-1) are accepted where a size 1 is required
    ("log_loss", dict(Predicted=_spec([-1, -1]), Labels=_spec([-1, -1])),
     {"Loss": ((-1, -1), F32, 0)}),
    ("teacher_student_sigmoid_loss", dict(X=_spec([-1, -1]), Label=_spec([-1, -1])),
     {"Y": ((-1, -1), F32, 0)}),
    ("rank_loss", dict(Label=_spec([5, -1]), Left=_spec([5, -1], F32, 1),
                       Right=_spec([5, 1])),
     {"Out": ((5, -1), F32, 1)}),
    ("rank_loss", dict(Label=_spec([5]), Left=_spec([5, 1], VarType.FP64, 2),
                       Right=_spec([5, 1])),
     {"Out": ((5,), VarType.FP64, 2)}),
    ("bpr_loss", dict(X=_spec([2, 4, 3]), Label=_spec([2, 4, -1], I64)),
     {"Y": ((2, 4, 1), F32, 0)}),
    ("smooth_l1_loss", dict(X=_spec([6, 2, 3], F32, 1), Y=_spec([6, 2, 3])),
     {"Diff": ((6, 2, 3), F32, 1), "Out": ((6, 1), F32, 1)}),
    ("huber_loss", dict(X=_spec([6, 1], VarType.FP64), Y=_spec([6, 1], VarType.FP64)),
     {"Out": ((6, 1), VarType.FP64, 0), "Residual": ((6, 1), VarType.FP64, 0)}),
    ("kldiv_loss", dict(X=_spec([6, 2]), Target=_spec([6, 2])),
     {"Loss": ((1,), F32, 0)}),
    ("center_loss", dict(X=_spec([4, 3]), Label=_spec([4, 1], I64), Centers=_spec([-1, 3]),
                         CenterUpdateRate=_spec([1])),
     {"SampleCenterDiff": ((4, 3), F32, 0), "Loss": ((4, 1), F32, 0),
      "CentersOut": ((-1, 3), F32, 0)}),
])
def test_declared_specs(op, specs, want):
    attrs = {"cluster_num": 5} if op == "center_loss" else {}
    got = get_op_def(op).infer(**specs, **attrs)
    for slot, (shape, dtype, lod) in want.items():
        assert tuple(got[slot].shape) == shape, slot
        assert got[slot].dtype == dtype, slot
        assert got[slot].lod_level == lod, slot


# -- fluid 1.8's attribute defaults (a program without the attribute) ----------------------------
def test_defaults_of_fluid_1_8():
    rng = np.random.default_rng(3)
    # smooth_l1_loss: sigma 1.0; |d| = 1.5 and 0.5 fall on either side of 1 / sigma^2 but not of
    # 1 / 4 (sigma 2)
    x, y = np.array([[1.5, 0.5]]), np.zeros((1, 2))
    d = get_op_def("smooth_l1_loss")
    assert d.forward(x, y)["Out"].tolist() == [[(1.5 - 0.5) + 0.5 * 0.25]]
    g = d.backward(None, None, x, None, np.ones((1, 1)))["X"]
    np.testing.assert_allclose(g, [[1.0, 0.5]])
    # log_loss: epsilon 1e-4
    p, lab = np.array([[0.3], [0.8]]), np.array([[1.0], [0.0]])
    eps = 1e-4
    d = get_op_def("log_loss")
    np.testing.assert_allclose(d.forward(p, lab)["Loss"],
                               -lab * np.log(p + eps) - (1 - lab) * np.log(1 - p + eps))
    np.testing.assert_allclose(d.backward(p, lab, np.ones((2, 1)))["Predicted"],
                               -lab / (p + eps) + (1 - lab) / (1 - p + eps))
    # kldiv_loss: reduction "mean"
    x, t = rng.uniform(-1, 0, (3, 4)), rng.uniform(0.1, 1, (3, 4))
    d = get_op_def("kldiv_loss")
    np.testing.assert_allclose(d.forward(x, t)["Loss"], [(t * (np.log(t) - x)).mean()])
    np.testing.assert_allclose(d.backward(x, t, np.array([2.0]))["X"], -t * 2.0 / 12)
    # margin_rank_loss: margin 0
    d = get_op_def("margin_rank_loss")
    out = d.forward(np.array([[1.0], [1.0]]), np.array([[0.2], [0.6]]), np.array([[0.5], [0.5]]))
    np.testing.assert_allclose(out["Out"], [[0.3], [0.0]])
    # sigmoid_focal_loss: gamma 2, alpha 0.25
    x = np.array([[0.3, -1.2]])
    lab, fg = np.array([[1]], "int32"), np.array([1], "int32")
    p = _sig(x)
    want = np.array([[-0.25 * (1 - p[0, 0]) ** 2 * np.log(p[0, 0]),
                      -0.75 * p[0, 1] ** 2 * np.log(1 - p[0, 1])]])
    d = get_op_def("sigmoid_focal_loss")
    np.testing.assert_allclose(d.forward(x, lab, fg)["Out"], want)
    h = 1e-6
    num = (d.forward(x + h, lab, fg)["Out"] - d.forward(x - h, lab, fg)["Out"]) / (2 * h)
    np.testing.assert_allclose(d.backward(x, lab, fg, np.ones((1, 2)))["X"], num, rtol=1e-6)
    # teacher_student_sigmoid_loss: bounds 15 / -15 (no gradient at or beyond them)
    x = np.array([[15.5], [-15.5], [14.5], [-14.5]])
    z = np.full((4, 1), -2.0)
    g = get_op_def("teacher_student_sigmoid_loss").backward(x, z, np.ones((4, 1)))["X"]
    np.testing.assert_allclose(g, [[0.0], [0.0], [_sig(14.5)], [_sig(-14.5)]])


# -- kernel boundaries ----------------------------------------------------------------------------
def test_margin_rank_loss_activated_is_zero_where_the_hinge_is_exactly_zero():
    # fluid: act = Heaviside(out) = out > 0 ? 1 : 0, and dX1 = -dOut act label
    label = np.array([[1.0], [-1.0], [1.0]])
    x1, x2 = np.array([[0.75], [0.75], [0.0]]), np.array([[0.5], [0.5], [0.5]])
    d = get_op_def("margin_rank_loss")
    out = d.forward(label, x1, x2, margin=0.25)
    assert out["Out"].tolist() == [[0.0], [0.5], [0.75]]
    assert out["Activated"].tolist() == [[0.0], [1.0], [1.0]]
    g = d.backward(label, out["Activated"], np.array([[2.0], [3.0], [5.0]]), margin=0.25)
    assert g["X1"].tolist() == [[-0.0], [3.0], [-5.0]]
    assert g["X2"].tolist() == [[0.0], [-3.0], [5.0]]


def test_margin_rank_loss_gradient_with_labels_other_than_one():
    # the formula holds for any real label (fluid's kernel multiplies by it)
    label = np.array([[0.5], [-2.0], [3.0], [-0.25]])
    x1, x2 = np.array([[0.1], [0.9], [-0.4], [0.3]]), np.array([[-0.3], [0.2], [0.5], [-0.6]])
    _grad_check("margin_rank_loss", {"Label": label, "X1": x1, "X2": x2}, "Out",
                {"margin": 0.7}, ["X1", "X2"])


def test_teacher_student_gradient_is_cut_at_the_bounds_themselves():
    # fluid's kernel: dx = 0 when x >= soft_max_up_bound or x <= soft_max_lower_bound
    x = np.array([[2.0], [-2.0], [1.999], [-1.999]])
    z = np.array([[0.5], [0.5], [-2.0], [-0.5]])
    g = get_op_def("teacher_student_sigmoid_loss").backward(
        x, z, np.ones((4, 1)), soft_max_up_bound=2.0, soft_max_lower_bound=-2.0)["X"]
    np.testing.assert_allclose(g, [[0.0], [0.0], [_sig(1.999)], [_sig(-1.999) - 1]])


@pytest.mark.parametrize("op", ["bpr_loss", "center_loss"])
def test_a_label_equal_to_the_class_count_is_out_of_range(op):
    d = get_op_def(op)
    x = np.zeros((3, 4))
    if op == "bpr_loss":
        call = lambda lab: d.forward(x, lab)
        n = 4
    else:
        centers = np.zeros((3, 4))
        call = lambda lab: d.forward(x, lab, centers, np.array([0.5]), cluster_num=3)
        n = 3
    with pytest.raises(ValueError) as e:
        call(np.array([[0], [n], [1]], "int64"))
    assert str(e.value) == f"{op}: label {n} is out of range [0, {n})"
    # two bad labels: the first one is named
    with pytest.raises(ValueError) as e:
        call(np.array([[n + 2], [0], [-1]], "int64"))
    assert str(e.value) == f"{op}: label {n + 2} is out of range [0, {n})"
    call(np.array([[n - 1], [0], [0]], "int64"))      # the last class is fine


# -- kldiv_loss: one element, one row, 0-d ---------------------------------------------------------
@pytest.mark.parametrize("reduction", ["mean", "batchmean", "sum"])
def test_kldiv_loss_of_one_element_and_one_row(reduction):
    d = get_op_def("kldiv_loss")
    x, t = np.array([[-0.5]]), np.array([[0.4]])
    l = 0.4 * (np.log(0.4) + 0.5)
    np.testing.assert_allclose(d.forward(x, t, reduction=reduction)["Loss"], [l])
    np.testing.assert_allclose(d.backward(x, t, np.array([3.0]), reduction=reduction)["X"],
                               [[-0.4 * 3.0]])
    # one row of three: batchmean divides by 1, mean by 3
    x, t = np.array([[-0.5, -1.0, -2.0]]), np.array([[0.4, 0.0, 0.6]])
    l = np.where(t > 0, t * (np.log(np.where(t > 0, t, 1)) + np.array([0.5, 1.0, 2.0])), 0)
    div = {"mean": 3, "batchmean": 1, "sum": 1}[reduction]
    np.testing.assert_allclose(d.forward(x, t, reduction=reduction)["Loss"], [l.sum() / div])
    np.testing.assert_allclose(d.backward(x, t, np.array([3.0]), reduction=reduction)["X"],
                               -t * 3.0 / div)


@pytest.mark.parametrize("reduction", ["mean", "batchmean", "sum", "none"])
def test_kldiv_loss_of_a_0d_input(reduction):
    d = get_op_def("kldiv_loss")
    x, t = np.array(-0.5), np.array(0.25)
    l = 0.25 * (np.log(0.25) + 0.5)
    out = d.forward(x, t, reduction=reduction)["Loss"]
    np.testing.assert_allclose(out, l if reduction == "none" else [l])
    dl = np.array(2.0) if reduction == "none" else np.array([2.0])
    g = d.backward(x, t, dl, reduction=reduction)["X"]
    assert g.shape == ()
    assert float(g) == pytest.approx(-0.5)


def test_kldiv_loss_of_float32_keeps_the_dtype():
    d = get_op_def("kldiv_loss")
    x = np.array([[-0.5, -1.0]], np.float32)
    t = np.array([[0.4, 0.0]], np.float32)
    for r in ("mean", "batchmean", "sum", "none"):
        assert d.forward(x, t, reduction=r)["Loss"].dtype == np.float32, r


# -- bpr_loss on rank-3 inputs --------------------------------------------------------------------
def test_bpr_loss_of_a_rank_3_input():
    rng = np.random.default_rng(5)
    x = rng.uniform(-2, 2, (2, 3, 4))
    lab = np.array([[[0], [3], [1]], [[2], [2], [0]]], "int64")
    d = get_op_def("bpr_loss")
    want = np.zeros((2, 3, 1))
    for i in range(2):
        for k in range(3):
            l = lab[i, k, 0]
            want[i, k, 0] = -sum(np.log(_sig(x[i, k, l] - x[i, k, j])) for j in range(4)
                                 if j != l) / 3
    y = d.forward(x, lab)["Y"]
    assert y.shape == (2, 3, 1)
    np.testing.assert_allclose(y, want, rtol=1e-12)
    _grad_check("bpr_loss", {"X": x, "Label": lab}, "Y", {}, ["X"])


# -- overflow: fluid's values, and no RuntimeWarning ----------------------------------------------
def test_overflowing_exponentials_give_fluids_values_without_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # rank_loss: log(1 + exp(o)) is +inf once exp overflows (fluid's formula, unguarded)
        d = get_op_def("rank_loss")
        lab = np.array([[1.0], [0.0]])
        left, right = np.array([[1000.0], [-1000.0]]), np.array([[0.0], [0.0]])
        out = d.forward(lab, left, right)["Out"]
        assert np.isinf(out[0, 0]) and out[1, 0] == 0.0
        g = d.backward(lab, left, right, np.ones((2, 1)))
        np.testing.assert_allclose(g["Left"], [[0.0], [0.0]])
        # bpr_loss: TolerableValue turns an overflowing exp into 1e20: a term is log(1 + 1e20)
        d = get_op_def("bpr_loss")
        x = np.array([[-1000.0, 0.0, 1000.0]])
        y = d.forward(x, np.array([[0]], "int64"))["Y"]
        np.testing.assert_allclose(y, [[np.log1p(1e20)]], rtol=1e-12)
        gx = d.backward(x, np.array([[2]], "int64"), np.ones((1, 1)))["X"]
        assert np.isfinite(gx).all()


# -- non-default attributes reach the grad op -----------------------------------------------------
def test_log_loss_gradient_with_a_large_epsilon():
    p = np.array([[0.2], [0.7], [0.45]])
    lab = np.array([[1.0], [0.0], [0.3]])
    _grad_check("log_loss", {"Predicted": p, "Labels": lab}, "Loss", {"epsilon": 0.3},
                ["Predicted"])


def test_kldiv_loss_gradient_with_each_reduction_through_the_program():
    rng = np.random.default_rng(7)
    x, t = rng.uniform(-2, 0, (3, 2)), rng.uniform(0.1, 1, (3, 2))
    for r in ("none", "sum", "batchmean"):
        _grad_check("kldiv_loss", {"X": x, "Target": t}, "Loss", {"reduction": r}, ["X"])


def test_teacher_student_bounds_reach_the_grad_op_in_a_program():
    # fluid's grad kernel reads the bounds from the grad op's attributes: with bounds of +-1,
    # x = 2 and x = -3 get no gradient, x = 0.5 gets sigmoid(0.5) (label < -1)
    import fluidlite as fluid
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [3, 1], "float64")
        x.stop_gradient = False
        z = fluid.data("z", [3, 1], "float64")
        y = fluid.layers.teacher_student_sigmoid_loss(x, z, soft_max_up_bound=1.0,
                                                      soft_max_lower_bound=-1.0)
        gx, = fluid.gradients([fluid.layers.reduce_sum(y)], [x])
    got, = fluid.Executor(fluid.CPUPlace()).run(
        main, feed={"x": np.array([[2.0], [-3.0], [0.5]]), "z": np.full((3, 1), -2.0)},
        fetch_list=[gx], scope=fluid.Scope())
    np.testing.assert_allclose(got, [[0.0], [0.0], [_sig(0.5)]])
