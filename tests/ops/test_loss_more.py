"""fluid 1.8's hinge_loss, modified_huber_loss, bce_loss, nll_loss and squared_l2_distance
(fluidlite/ops/loss_more.py): outputs against NumPy references of fluid's kernels (Paddle 2.6's
CPU kernels give the same numbers on these inputs), numeric float64 gradients, shape errors."""
import numpy as np
import pytest

from fluidlite.core.registry import VarSpec, get_op_def
from fluidlite.testing import OpTest


def _t(op_type, inputs, outputs, attrs=None):
    t = OpTest()
    t.op_type, t.inputs, t.outputs, t.attrs = op_type, inputs, outputs, attrs or {}
    t.check_infer()
    t.check_output()
    return t


def test_hinge_loss():
    x = np.array([[0.3], [1.8], [-1.4], [1.6], [-0.75], [-0.3], [1.3], [-2.2]])
    y = np.array([[0.0], [1.0], [1.0], [0.0], [1.0], [1.0], [1.0], [0.0]])
    x = np.where(np.abs(x * (2 * y - 1) - 1) < 0.05, x + 0.2, x)        # off the kink
    t = _t("hinge_loss", {"Logits": x, "Labels": y},
           {"Loss": np.maximum(1 - x * (2 * y - 1), 0)})
    assert (t.outputs["Loss"] == 0).any() and (t.outputs["Loss"] > 0).any()
    t.check_grad(["Logits"], "Loss")


def test_modified_huber_loss():
    x = np.array([[-3.0], [-0.7], [0.4], [1.6], [0.2], [-1.4]])
    y = np.array([[1.0], [0.0], [1.0], [1.0], [0.0], [0.0]])
    v = x * (2 * y - 1)
    out = np.where(v < -1, -4 * v, np.where(v < 1, (1 - v) ** 2, 0.0))
    t = _t("modified_huber_loss", {"X": x, "Y": y}, {"IntermediateVal": v, "Out": out})
    t.check_grad(["X"], "Out")


def test_bce_loss_clamps_the_logs_at_minus_100():
    """fluid: Out = (Label - 1) max(log(1 - X), -100) - Label max(log(X), -100): X = 0 with
    label 1 costs 100, not inf (Paddle 2.6: the same), and the gradient's denominator is
    clamped at 1e-12."""
    x = np.array([[0.0, 1.0, 0.3], [1e-30, 0.999, 0.5]])
    lab = np.array([[1.0, 0.0, 0.7], [1.0, 1.0, 0.5]])
    with np.errstate(divide="ignore"):
        out = (lab - 1) * np.maximum(np.log(1 - x), -100) - lab * np.maximum(np.log(x), -100)
    t = _t("bce_loss", {"X": x, "Label": lab}, {"Out": out})
    np.testing.assert_allclose(t.outputs["Out"][:, 0], [100.0, 69.07755279])
    g = get_op_def("bce_loss").backward(x, lab, np.ones_like(x))["X"]
    np.testing.assert_allclose(g[0, :2], [-1e12, 1e12])
    x = OpTest.rand(3, 4, low=0.1, high=0.9, seed=3)
    lab = OpTest.rand(3, 4, low=0, high=1, seed=4)
    t = _t("bce_loss", {"X": x, "Label": lab},
           {"Out": -(lab * np.log(x) + (1 - lab) * np.log(1 - x))})
    t.check_grad(["X"], "Out")
    with pytest.raises(ValueError, match="must be in"):
        get_op_def("bce_loss").forward(np.array([1.5]), np.array([1.0]))


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_nll_loss(reduction):
    x = np.log(np.array([[0.2, 0.5, 0.3], [0.1, 0.1, 0.8], [0.6, 0.3, 0.1], [0.3, 0.3, 0.4]]))
    lab = np.array([0, 2, 1, 1], np.int64)
    w = np.array([1.0, 2.0, 0.5])
    per = -x[np.arange(4), lab] * w[lab]
    per[1] = 0.0                                     # ignore_index 2
    total = w[lab].sum() - w[2]
    want = {"none": per, "sum": np.array([per.sum()]), "mean": np.array([per.sum() / total])}
    t = _t("nll_loss", {"X": x, "Label": lab, "Weight": w},
           {"Out": want[reduction],
            "Total_weight": np.array([0.0 if reduction == "none" else total])},
           {"reduction": reduction, "ignore_index": 2})
    if reduction == "mean":          # Paddle 2.6: 1.285065825947569, total weight 5
        np.testing.assert_allclose(t.outputs["Out"], [1.285065825947569])
    t.check_grad(["X"], "Out", allow_zero_grad=False)


def test_nll_loss_4d_and_errors():
    x = np.log(OpTest.rand(2, 3, 2, 2, low=0.1, high=1.0))
    lab = np.array([[[0, 1], [2, 1]], [[1, 1], [0, 2]]], np.int64)
    pick = np.take_along_axis(x, lab[:, None], axis=1)[:, 0]
    t = _t("nll_loss", {"X": x, "Label": lab}, {"Out": np.array([-pick.mean()]),
                                                  "Total_weight": np.array([8.0])})
    t.check_grad(["X"], "Out")
    d = get_op_def("nll_loss")
    with pytest.raises(ValueError, match=r"Label must be \[2, 2, 2\]"):
        d.infer(VarSpec([2, 3, 2, 2], "float32"), VarSpec([2, 2], "int64"))
    with pytest.raises(ValueError, match="out of range"):
        d.forward(x, np.full((2, 2, 2), 5, np.int64))


@pytest.mark.parametrize("y_rows", [4, 1])
def test_squared_l2_distance(y_rows):
    x = OpTest.rand(4, 2, 3, seed=5)
    y = OpTest.rand(y_rows, 2, 3, seed=6)
    sub = x.reshape(4, -1) - y.reshape(y_rows, -1)
    t = _t("squared_l2_distance", {"X": x, "Y": y},
           {"sub_result": sub, "Out": (sub ** 2).sum(1, keepdims=True)})
    t.check_grad(["X", "Y"], "Out")
    with pytest.raises(ValueError, match="first dim of Y must be 1"):
        get_op_def("squared_l2_distance").infer(VarSpec([4, 6], "float32"),
                                                VarSpec([3, 6], "float32"))
