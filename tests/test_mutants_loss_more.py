"""Tests written from the mutation run of ``fluidlite/ops/loss_more.py`` (issue 28,
docs/mutation.md): the build-time checks of hinge_loss, modified_huber_loss, bce_loss,
nll_loss and squared_l2_distance with their exact messages and the specs they declare, the
kernels' boundaries and dtypes -- against float64 formulas written here and fluid 1.8's
kernels (hinge_loss_op.h, modified_huber_loss_op.h, bce_loss_op.h, nll_loss_op.h,
squared_l2_distance_op.h)."""
import numpy as np
import pytest

from fluidlite.core.dtypes import VarType
from fluidlite.core.registry import VarSpec, get_op_def

F16, F32, F64, I64 = VarType.FP16, VarType.FP32, VarType.FP64, VarType.INT64


def _spec(shape, dtype=F32, lod=0):
    return VarSpec(tuple(shape), dtype, lod)


def _err(op, *args, **attrs):
    with pytest.raises(ValueError) as e:
        get_op_def(op).infer(*args, **attrs)
    return str(e.value)


@pytest.mark.parametrize("op,args,attrs,message", [
    ("hinge_loss", (_spec((4, 1)), _spec((3, 1))), {},
     "hinge_loss: Logits and Labels must have the same shape, but received Logits [4, 1] and "
     "Labels [3, 1]"),
    ("hinge_loss", (_spec((4, 1)), _spec((4, 1, 1))), {},
     "hinge_loss: Logits and Labels must have the same shape, but received Logits [4, 1] and "
     "Labels [4, 1, 1]"),
    ("hinge_loss", (_spec((4, 2)), _spec((4, 2))), {},
     "hinge_loss: Logits must be [batch_size, 1], but its shape is [4, 2]"),
    ("hinge_loss", (_spec((4,)), _spec((4,))), {},
     "hinge_loss: Logits must be [batch_size, 1], but its shape is [4]"),
    ("hinge_loss", (_spec((4, 1), I64), _spec((4, 1), I64)), {},
     "hinge_loss: Logits must be a float tensor, but it is int64"),
    ("modified_huber_loss", (_spec((4, 1)), _spec((5, 1))), {},
     "modified_huber_loss: X and Y must have the same shape, but received X [4, 1] and Y "
     "[5, 1]"),
    ("modified_huber_loss", (_spec((4, 3)), _spec((4, 3))), {},
     "modified_huber_loss: X must be [batch_size, 1], but its shape is [4, 3]"),
    ("modified_huber_loss", (_spec((4, 1), I64), _spec((4, 1), I64)), {},
     "modified_huber_loss: X must be a float tensor, but it is int64"),
    ("bce_loss", (_spec((4, 3)), _spec((4, 3, 1))), {},
     "bce_loss: X and Label must have the same rank, but received X [4, 3] and Label "
     "[4, 3, 1]"),
    ("bce_loss", (_spec((4, 3)), _spec((4, 2))), {},
     "bce_loss: X and Label must have the same shape, but received X [4, 3] and Label [4, 2]"),
    ("bce_loss", (_spec((4, 3), I64), _spec((4, 3), I64)), {},
     "bce_loss: X must be a float tensor, but it is int64"),
    ("nll_loss", (_spec((4, 3)), _spec((4,), I64)), {"reduction": "avg"},
     "nll_loss: reduction must be one of ['none', 'mean', 'sum'], got 'avg'"),
    ("nll_loss", (_spec((4, 3, 2)), _spec((4, 2), I64)), {},
     "nll_loss: X must be 2-D [N, C] or 4-D [N, C, H, W], got [4, 3, 2]"),
    ("nll_loss", (_spec((4, 3), I64), _spec((4,), I64)), {},
     "nll_loss: X must be a float tensor, but it is int64"),
    ("nll_loss", (_spec((4, 3)), _spec((4,), F32)), {},
     "nll_loss: Label must be an int64 tensor, but it is float32"),
    ("nll_loss", (_spec((4, 3)), _spec((4, 1), I64)), {},
     "nll_loss: Label must be [4] for X [4, 3], got [4, 1]"),
    ("nll_loss", (_spec((4, 3)), _spec((5,), I64)), {},
     "nll_loss: Label must be [4] for X [4, 3], got [5]"),
    ("nll_loss", (_spec((2, 3, 5, 6)), _spec((2, 6, 5), I64)), {},
     "nll_loss: Label must be [2, 5, 6] for X [2, 3, 5, 6], got [2, 6, 5]"),
    ("nll_loss", (_spec((4, 3)), _spec((4,), I64), _spec((2,))), {},
     "nll_loss: Weight must be [C] = [3], got [2]"),
    ("nll_loss", (_spec((4, 3)), _spec((4,), I64), _spec((3, 1))), {},
     "nll_loss: Weight must be [C] = [3], got [3, 1]"),
    ("squared_l2_distance", (_spec((4, 6)), _spec((4, 6, 1))), {},
     "squared_l2_distance: X and Y must have the same rank, got [4, 6] and [4, 6, 1]"),
    ("squared_l2_distance", (_spec((4,)), _spec((4,))), {},
     "squared_l2_distance: the rank must be at least 2, got 1"),
    ("squared_l2_distance", (_spec((4, 2, 3)), _spec((4, 2, 2))), {},
     "squared_l2_distance: X [4, 2, 3] and Y [4, 2, 2] must have the same size past the first "
     "dim"),
    ("squared_l2_distance", (_spec((4, 6)), _spec((3, 6))), {},
     "squared_l2_distance: the first dim of Y must be 1 or X's, got [3, 6] for X [4, 6]"),
])
def test_build_time_checks_give_the_exact_message(op, args, attrs, message):
    assert _err(op, *args, **attrs) == message


def test_declared_specs():
    d = get_op_def("hinge_loss")
    out = d.infer(_spec((4, 1), F16, 1), _spec((4, 1), F16))["Loss"]
    assert tuple(out.shape) == (4, 1) and out.dtype == F16 and out.lod_level == 1
    d.infer(_spec((-1, -1)), _spec((4, 1)))
    d = get_op_def("modified_huber_loss")
    out = d.infer(_spec((4, 1), F16, 1), _spec((4, 1), F16))
    for slot in ("IntermediateVal", "Out"):
        assert tuple(out[slot].shape) == (4, 1) and out[slot].dtype == F16
    d.infer(_spec((4, -1)), _spec((-1, 1)))
    assert get_op_def("bce_loss").infer(_spec((4, 3), F16), _spec((-1, 3), F16))["Out"].dtype \
        == F16
    d = get_op_def("nll_loss")
    for red, shape in (("none", (4,)), ("mean", (1,)), ("sum", (1,))):
        out = d.infer(_spec((4, 3), F16), _spec((4,), I64), reduction=red)
        assert tuple(out["Out"].shape) == shape and out["Out"].dtype == F16
        assert tuple(out["Total_weight"].shape) == (1,) and out["Total_weight"].dtype == F16
    out = d.infer(_spec((2, 3, 5, 6)), _spec((2, 5, 6), VarType.INT32), _spec((-1,)),
                  reduction="none")["Out"]
    assert tuple(out.shape) == (2, 5, 6)
    assert tuple(d.infer(_spec((4, 3)), _spec((4,), I64))["Out"].shape) == (1,)   # mean
    d = get_op_def("squared_l2_distance")
    out = d.infer(_spec((4, 2, 3), F16, 1), _spec((1, 3, 2), F16))
    assert tuple(out["sub_result"].shape) == (4, 6) and out["sub_result"].dtype == F16
    assert tuple(out["Out"].shape) == (4, 1) and out["Out"].dtype == F16
    assert out["Out"].lod_level == 1 and out["sub_result"].lod_level == 0
    out = d.infer(_spec((4, -1)), _spec((-1, 6)))
    assert tuple(out["sub_result"].shape) == (4, -1)
    # an unknown dim past the first, in X or in Y: the row size is unknown and not checked
    assert tuple(d.infer(_spec((4, -1, 3)), _spec((4, 2, 3)))["sub_result"].shape) == (4, -1)
    assert tuple(d.infer(_spec((4, 2, 3)), _spec((4, -1, 6)))["sub_result"].shape) == (4, -1)
    # zero-sized rows are known sizes
    assert tuple(d.infer(_spec((4, 0)), _spec((1, 0)))["sub_result"].shape) == (4, 0)
    assert _err("squared_l2_distance", _spec((4, 0, 2)), _spec((4, 3, 1))) == (
        "squared_l2_distance: X [4, 0, 2] and Y [4, 3, 1] must have the same size past the "
        "first dim")
    d.infer(_spec((-1, 6)), _spec((3, 6)))


# -- kernels ---------------------------------------------------------------------------------------
def test_hinge_loss_gradient_is_zero_on_the_hinge_itself():
    # fluid: dLogits = -dLoss y where Logits y < 1 (strictly), y = 2 Labels - 1
    d = get_op_def("hinge_loss")
    x = np.array([[1.0], [-1.0], [0.5], [-0.25], [2.0]], np.float32)
    lab = np.array([[1], [0], [1], [0], [0]], np.float32)
    loss = d.forward(x, lab)["Loss"]
    assert loss.dtype == np.float32
    assert loss.reshape(-1).tolist() == [0.0, 0.0, 0.5, 0.75, 3.0]
    g = d.backward(x, lab, np.full((5, 1), 2.0, np.float32))["Logits"]
    assert g.dtype == np.float32
    assert g.reshape(-1).tolist() == [0.0, 0.0, -2.0, 2.0, 2.0]


def test_modified_huber_loss_pieces_and_dtype():
    d = get_op_def("modified_huber_loss")
    # fluid: -4 v for v < -1, (1 - v)^2 for -1 <= v < 1, 0 above
    x = np.array([[-3.0], [0.5], [2.0], [-0.5], [-1.5], [1.5]], np.float32)
    y = np.array([[1.0], [1.0], [1.0], [0.0], [1.0], [0.0]], np.float32)
    res = d.forward(x, y)
    v = [-3.0, 0.5, 2.0, 0.5, -1.5, -1.5]
    assert res["IntermediateVal"].reshape(-1).tolist() == v
    assert res["Out"].reshape(-1).tolist() == [12.0, 0.25, 0.0, 0.25, 6.0, 6.0]
    assert res["Out"].dtype == np.float32 and res["IntermediateVal"].dtype == np.float32
    g = d.backward(y, res["IntermediateVal"], None, np.ones((6, 1), np.float32))["X"]
    assert g.dtype == np.float32
    assert g.reshape(-1).tolist() == [-4.0, -1.0, 0.0, 1.0, -4.0, 4.0]


def test_bce_loss_range_is_closed_and_float32_kept():
    d = get_op_def("bce_loss")
    x = np.array([[0.0, 1.0, 0.25]], np.float32)
    lab = np.array([[0.0, 1.0, 1.0]], np.float32)
    out = d.forward(x, lab)["Out"]
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, [[0.0, 0.0, -np.log(0.25)]], rtol=1e-6)
    g = d.backward(x, lab, np.ones((1, 3), np.float32))["X"]
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, [[0.0, 0.0, -0.75 / (0.75 * 0.25)]], rtol=1e-6)
    for bad in (1.0000001, -1e-7):
        with pytest.raises(ValueError) as e:
            d.forward(np.array([[0.5, bad]]), np.array([[1.0, 1.0]]))
        assert str(e.value) == ("bce_loss: Illegal input, input must be in [0, 1] "
                                "(probabilities, e.g. the output of a sigmoid)")
    d.forward(np.zeros((0, 3)), np.zeros((0, 3)))            # an empty batch is fine
    # log(0) is clamped at -100 silently (no divide-by-zero warning)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = d.forward(np.array([[0.0, 1.0]]), np.array([[1.0, 0.0]]))["Out"]
    assert out.tolist() == [[100.0, 100.0]]


def test_nll_loss_defaults_ignored_rows_and_label_range():
    d = get_op_def("nll_loss")
    x = np.log(np.array([[0.2, 0.5, 0.3], [0.1, 0.1, 0.8], [0.6, 0.3, 0.1]]))
    lab = np.array([1, -100, 0], np.int64)
    # fluid 1.8: ignore_index -100, reduction "mean"
    res = d.forward(x, lab)
    np.testing.assert_allclose(res["Out"], [-(x[0, 1] + x[2, 0]) / 2])
    np.testing.assert_allclose(res["Total_weight"], [2.0])
    g = d.backward(x, lab, None, res["Total_weight"], np.array([1.0]))["X"]
    want = np.zeros_like(x)
    want[0, 1], want[2, 0] = -0.5, -0.5
    np.testing.assert_allclose(g, want)
    # every row ignored: the mean is the (zero) sum, not a division by 0
    allign = np.array([-100, -100, -100], np.int64)
    res = d.forward(x, allign)
    assert res["Out"].tolist() == [0.0] and res["Total_weight"].tolist() == [0.0]
    g = d.backward(x, allign, None, res["Total_weight"], np.array([1.0]))["X"]
    assert not g.any()
    # none: per row, ignored rows +0
    res = d.forward(x, lab, reduction="none")
    np.testing.assert_allclose(res["Out"], [-x[0, 1], 0.0, -x[2, 0]])
    g = d.backward(x, lab, None, res["Total_weight"], np.array([1.0, 2.0, 3.0]),
                   reduction="none")["X"]
    want = np.zeros_like(x)
    want[0, 1], want[2, 0] = -1.0, -3.0
    np.testing.assert_allclose(g, want)
    res = d.forward(x.astype(np.float32), lab, reduction="none")
    assert res["Out"].dtype == np.float32 and res["Total_weight"].dtype == np.float32
    # weights of float32 X; sum
    x32, w = x.astype(np.float32), np.array([1.0, 2.0, 0.5])
    res = d.forward(x32, np.array([1, 2, 0]), w, reduction="sum")
    assert res["Out"].dtype == np.float32 and res["Total_weight"].dtype == np.float32
    np.testing.assert_allclose(res["Out"], [-(2 * x[0, 1] + 0.5 * x[1, 2] + x[2, 0])],
                               rtol=1e-6)
    np.testing.assert_allclose(res["Total_weight"], [3.5])
    g = d.backward(x32, np.array([1, 2, 0]), w, res["Total_weight"],
                   np.array([2.0], np.float32), reduction="sum")["X"]
    assert g.dtype == np.float32
    want = np.zeros((3, 3))
    want[0, 1], want[1, 2], want[2, 0] = -4.0, -1.0, -2.0
    np.testing.assert_allclose(g, want)
    for bad in (3, -1):
        with pytest.raises(ValueError) as e:
            d.forward(x, np.array([0, bad, 1]))
        assert str(e.value) == f"nll_loss: label {bad} is out of range [0, 3)"
    # one class and an ignored row
    res = d.forward(np.log(np.array([[1.0], [1.0]])), np.array([0, -100]), reduction="sum")
    assert res["Out"].tolist() == [-0.0] and res["Total_weight"].tolist() == [1.0]
    # a custom ignore_index may lie inside the class range
    res = d.forward(x, np.array([1, 2, 0]), ignore_index=2, reduction="sum")
    np.testing.assert_allclose(res["Out"], [-(x[0, 1] + x[2, 0])])


def test_squared_l2_distance_kernels():
    d = get_op_def("squared_l2_distance")
    x = np.arange(12.0, dtype=np.float32).reshape(3, 2, 2)
    y = np.ones((1, 4), np.float32)
    res = d.forward(x, y)
    sub = x.reshape(3, 4) - 1
    np.testing.assert_array_equal(res["sub_result"], sub)
    np.testing.assert_array_equal(res["Out"], (sub ** 2).sum(1, keepdims=True))
    assert res["Out"].dtype == np.float32 and res["Out"].shape == (3, 1)
    dout = np.array([[1.0], [2.0], [3.0]], np.float32)
    g = d.backward(x, y, res["sub_result"], None, dout)
    np.testing.assert_array_equal(g["X"], (2 * dout * sub).reshape(3, 2, 2))
    np.testing.assert_array_equal(g["Y"], -(2 * dout * sub).sum(0, keepdims=True))
    assert g["X"].dtype == np.float32 and g["Y"].dtype == np.float32
    assert g["Y"].shape == (1, 4)
    y3 = np.ones((3, 2, 2), np.float32)
    res = d.forward(x, y3)
    g = d.backward(x, y3, res["sub_result"], None, dout)
    np.testing.assert_array_equal(g["Y"], -(2 * dout * sub).reshape(3, 2, 2))
