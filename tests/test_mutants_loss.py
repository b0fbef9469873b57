"""Tests written from mutation testing (issue 28, docs/mutation.md) for ``fluidlite/ops/loss.py``.

References are computed here in float64 NumPy from fluid 1.8's kernels
(``operators/math/cross_entropy.cc``, ``softmax_with_cross_entropy_op.h``,
``sigmoid_cross_entropy_with_logits_op.cc``):

* cross entropy: ``y = -TolerableValue(log(x[label]))``, ``y = 0`` where ``label ==
  ignore_index``; ``dx = -dy / x`` at the label (0 in ignored rows); soft labels
  ``y = -sum(label * log(x))``, ``dx = -dy * label / x``;
* softmax with cross entropy: fluid's softmax (shifted logits clipped at -64), then the above;
  ``dlogits = (softmax - onehot(label)) * dloss`` (0 in ignored rows);
* sigmoid cross entropy: ``max(x, 0) - x * label + log(1 + exp(-|x|))``, 0 where ``label ==
  ignore_index``, divided by the number of kept entries with ``normalize``.

Hard labels whose ``ignore_index`` lies inside the class range (0 for padding, the last class)
are the case the ops' shortcuts must not get wrong; each op is checked directly, through its
lowered kernels and through the Executor (``OpTest.check_grad``: random upstream gradients).
"""
import math
import warnings

import numpy as np
import pytest

from fluidlite.core.registry import VarSpec, get_op_def
from fluidlite.ops import loss as loss_mod
from fluidlite.testing import OpTest

CE, CE2 = get_op_def("cross_entropy"), get_op_def("cross_entropy2")
SWCE, SCE = get_op_def("softmax_with_cross_entropy"), get_op_def(
    "sigmoid_cross_entropy_with_logits")
SWCE_ATTRS = {"soft_label": False, "ignore_index": -100, "numeric_stable_mode": True, "axis": -1}


def _rand(shape, seed, lo=-2.0, hi=2.0, dtype="float64"):
    return np.random.default_rng(seed).uniform(lo, hi, shape).astype(dtype)


def _probs(n, c, seed=0, dtype="float64"):
    p = _rand((n, c), seed, 0.1, 1.0)
    return (p / p.sum(1, keepdims=True)).astype(dtype)


def _ref_softmax(x, axis=-1):
    x = np.asarray(x, np.float64)
    e = np.exp(np.maximum(x - x.max(axis, keepdims=True), -64.0))
    return e / e.sum(axis, keepdims=True)


def _ref_xent(p, label, ignore_index):
    """-log(p[label]) per row (float64), 0 where label == ignore_index."""
    lab = label.reshape(-1)
    keep = lab != ignore_index
    rows = np.arange(lab.size)
    out = np.zeros(lab.size)
    out[keep] = -np.log(p.reshape(lab.size, -1)[rows[keep], lab[keep]].astype(np.float64))
    return out.reshape(label.shape)


def _ref_swce_grad(sm, label, dloss, ignore_index):
    lab = label.reshape(-1)
    g = sm.reshape(lab.size, -1).astype(np.float64).copy()
    keep = lab != ignore_index
    g[np.arange(lab.size)[keep], lab[keep]] -= 1.0
    g *= dloss.reshape(-1, 1)
    g[~keep] = 0.0
    return g.reshape(sm.shape)


N, C = 6, 5
LOGITS = _rand((N, C), 1)
# labels using 0 and C - 1 (each also tried as ignore_index) and a class in between
LABELS = np.array([[0], [4], [2], [0], [4], [1]], np.int64)


# -- ignore_index inside the class range ------------------------------------------------------
@pytest.mark.parametrize("ignore_index", [0, C - 1, 2])
def test_softmax_with_cross_entropy_ignores_an_in_range_index_on_every_path(ignore_index):
    attrs = dict(SWCE_ATTRS, ignore_index=ignore_index)
    sm = _ref_softmax(LOGITS)
    want = _ref_xent(sm, LABELS, ignore_index)
    fast = SWCE.lower([VarSpec((N, C), "float64"), VarSpec((N, 1), "int64")], attrs)
    assert fast is not None
    for out in (SWCE.forward(LOGITS, LABELS, **attrs), fast(LOGITS, LABELS)):
        np.testing.assert_allclose(out["Loss"], want, rtol=1e-12, atol=0)
        np.testing.assert_allclose(out["Softmax"], sm, rtol=1e-12)
    dloss = _rand((N, 1), 2)
    want_g = _ref_swce_grad(sm, LABELS, dloss, ignore_index)
    fast_g = SWCE.lower_grad([VarSpec((N, 1), "int64"), VarSpec((N, C), "float64")], attrs,
                             {"Logits"})
    assert fast_g is not None
    for g in (SWCE.backward(LABELS, sm, dloss, **attrs)["Logits"],
              fast_g(LABELS, sm, None, dloss)["Logits"]):
        np.testing.assert_allclose(g, want_g, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("ignore_index", [0, C - 1])
def test_in_range_ignore_index_through_the_executor_and_backward(ignore_index):
    # append_backward + the Executor (lowered kernels) against central differences with a
    # random upstream gradient: an ignored row has no gradient
    t = OpTest()
    t.op_type, t.attrs = "softmax_with_cross_entropy", {"ignore_index": ignore_index}
    t.inputs = {"Logits": LOGITS, "Label": LABELS}
    sm = _ref_softmax(LOGITS)
    t.outputs = {"Loss": _ref_xent(sm, LABELS, ignore_index), "Softmax": sm}
    t.check_output(atol=1e-10, rtol=1e-10)
    t.check_grad(["Logits"], "Loss", max_relative_error=1e-4)
    p = _probs(N, C, seed=3)
    for op_type, outs in (("cross_entropy", {"Y": _ref_xent(p, LABELS, ignore_index)}),
                          ("cross_entropy2", {"Y": _ref_xent(p, LABELS, ignore_index),
                                              "MatchX": None, "XShape": None})):
        t = OpTest()
        t.op_type, t.attrs = op_type, {"ignore_index": ignore_index}
        t.inputs = {"X": p, "Label": LABELS}
        t.outputs = {k: v for k, v in outs.items() if v is not None}
        if op_type == "cross_entropy2":
            t.outputs["MatchX"] = np.where(LABELS == ignore_index, 0.0,
                                           np.take_along_axis(p, LABELS, 1))
            t.outputs["XShape"] = np.empty((0, N, C))
            t.check_output(atol=1e-10, rtol=1e-10, no_check_set=["XShape"])
        else:
            t.check_output(atol=1e-10, rtol=1e-10)
        t.check_grad(["X"], "Y", max_relative_error=1e-4)


@pytest.mark.parametrize("ignore_index", [0, C - 1, -100, 255])
def test_cross_entropy_ops_ignore_rows_directly(ignore_index):
    lab = LABELS.copy()
    if ignore_index not in (0, C - 1):
        lab[[1, 3]] = ignore_index          # outside the class range: -100 and 255
    p = _probs(N, C, seed=4)
    ign = (lab == ignore_index)
    want = _ref_xent(p, lab, ignore_index)
    dy = _rand((N, 1), 5)
    want_dx = np.zeros((N, C))
    for i in range(N):
        if not ign[i, 0]:
            want_dx[i, lab[i, 0]] = -dy[i, 0] / p[i, lab[i, 0]]
    y = CE.forward(p, lab, soft_label=False, ignore_index=ignore_index)["Y"]
    np.testing.assert_allclose(y, want, rtol=1e-13, atol=0)
    dx = CE.backward(p, lab, dy, soft_label=False, ignore_index=ignore_index)["X"]
    np.testing.assert_allclose(dx, want_dx, rtol=1e-13, atol=0)
    out = CE2.forward(p, lab, ignore_index=ignore_index)
    np.testing.assert_allclose(out["Y"], want, rtol=1e-13, atol=0)
    # fluid's HardLabelCrossEntropy: MatchX = x[label], 0 in an ignored row
    np.testing.assert_array_equal(
        out["MatchX"], np.where(ign, 0.0, np.take_along_axis(p, np.where(ign, 0, lab), 1)))
    assert out["XShape"].shape == (0, N, C)
    dx2 = CE2.backward(out["XShape"], lab, out["MatchX"], dy, ignore_index=ignore_index)["X"]
    np.testing.assert_allclose(dx2, want_dx, rtol=1e-13, atol=0)
    lo = SWCE.forward(LOGITS, lab, **dict(SWCE_ATTRS, ignore_index=ignore_index))["Loss"]
    np.testing.assert_allclose(lo, _ref_xent(_ref_softmax(LOGITS), lab, ignore_index),
                               rtol=1e-12, atol=0)


def test_a_single_class_with_an_ignored_row():
    p = np.array([[1.0], [0.5], [0.25]])
    lab = np.array([[0], [7], [0]])
    out = CE2.forward(p, lab, ignore_index=7)
    np.testing.assert_allclose(out["Y"], [[0.0], [0.0], [math.log(4)]], atol=1e-15)
    np.testing.assert_array_equal(out["MatchX"], [[1.0], [0.0], [0.25]])
    y = CE.forward(p, lab, soft_label=False, ignore_index=7)["Y"]
    np.testing.assert_allclose(y, [[0.0], [0.0], [math.log(4)]], atol=1e-15)


# -- labels out of range ----------------------------------------------------------------------
def _bad_label_calls(lab):
    p = _probs(N, C)
    sm = _ref_softmax(LOGITS)
    fast = SWCE.lower([VarSpec((N, C), "float64"), VarSpec((N, 1), "int64")], SWCE_ATTRS)
    fast_g = SWCE.lower_grad([VarSpec((N, 1), "int64"), VarSpec((N, C), "float64")],
                             SWCE_ATTRS, {"Logits"})
    dy = np.ones((N, 1))
    return [
        ("cross_entropy", lambda: CE.forward(p, lab, soft_label=False, ignore_index=-100)),
        ("cross_entropy", lambda: CE.backward(p, lab, dy, soft_label=False, ignore_index=-100)),
        ("cross_entropy2", lambda: CE2.forward(p, lab, ignore_index=-100)),
        ("cross_entropy2", lambda: CE2.backward(np.empty((0, N, C)), lab, np.ones((N, 1)), dy,
                                                ignore_index=-100)),
        ("softmax_with_cross_entropy", lambda: SWCE.forward(LOGITS, lab, **SWCE_ATTRS)),
        ("softmax_with_cross_entropy", lambda: fast(LOGITS, lab)),
        ("softmax_with_cross_entropy", lambda: SWCE.backward(lab, sm, dy, **SWCE_ATTRS)),
        ("softmax_with_cross_entropy", lambda: fast_g(lab, sm, None, dy)),
    ]


@pytest.mark.parametrize("bad", [C, C + 3, -1])
def test_a_label_outside_the_classes_is_refused_naming_the_op(bad):
    lab = LABELS.copy()
    lab[3] = bad
    for op_type, call in _bad_label_calls(lab):
        with pytest.raises(ValueError, match=rf"^{op_type}: label {bad} is out of range "
                                             rf"\[0, {C}\) \(ignore_index=-100\); labels must "
                                             rf"be class indices$"):
            call()


def test_zero_size_batches_give_empty_losses():
    p, lab = np.zeros((0, C)), np.zeros((0, 1), np.int64)
    dy = np.zeros((0, 1))
    assert CE.forward(p, lab, soft_label=False, ignore_index=-100)["Y"].shape == (0, 1)
    assert CE.backward(p, lab, dy, soft_label=False, ignore_index=-100)["X"].shape == (0, C)
    out = CE2.forward(p, lab, ignore_index=-100)
    assert out["Y"].shape == (0, 1) and out["MatchX"].shape == (0, 1)
    assert CE2.backward(out["XShape"], lab, out["MatchX"], dy,
                        ignore_index=-100)["X"].shape == (0, C)
    for ig in (-100, 0):
        out = SWCE.forward(p, lab, **dict(SWCE_ATTRS, ignore_index=ig))
        assert out["Loss"].shape == (0, 1) and out["Softmax"].shape == (0, C)
        g = SWCE.backward(lab, p, dy, **dict(SWCE_ATTRS, ignore_index=ig))["Logits"]
        assert g.shape == (0, C)


# -- no floating-point warnings where fluid's formulas give inf / TolerableValue ----------------
def test_handled_infinities_warn_nothing():
    p = np.array([[0.0, 1.0], [0.5, 0.5]])
    lab = np.array([[0], [1]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = CE.forward(p, lab, soft_label=False, ignore_index=-100)["Y"]
        np.testing.assert_allclose(y, [[1e20], [math.log(2)]])     # -TolerableValue(log 0)
        dx = CE.backward(p, lab, np.ones((2, 1)), soft_label=False, ignore_index=-100)["X"]
        assert dx[0, 0] == -np.inf and dx[1, 1] == -2.0             # -dy / 0
        soft = np.array([[0.0, 1.0], [0.5, 0.5]])
        ys = CE.forward(p, soft, soft_label=True, ignore_index=-100)["Y"]
        np.testing.assert_allclose(ys, [[0.0], [math.log(2)]])       # 0 * 1e20 = 0
        g = CE.backward(p, soft, np.ones((2, 1)), soft_label=True, ignore_index=-100)
        assert np.isnan(g["X"][0, 0]) and g["X"][0, 1] == -1.0      # -0 * 1 / 0
        np.testing.assert_allclose(g["Label"], [[1e20, 0.0], [math.log(2), math.log(2)]])
        out = CE2.forward(p, lab, ignore_index=-100)
        dx2 = CE2.backward(out["XShape"], lab, out["MatchX"], np.ones((2, 1)),
                           ignore_index=-100)["X"]
        assert dx2[0, 0] == -np.inf
        x = np.array([[-1000.0, 1000.0, 0.0]])
        d = SCE.backward(x, np.array([[1.0, 0.0, 0.5]]), np.ones((1, 3)), ignore_index=-100,
                         normalize=False)["X"]
        np.testing.assert_allclose(d, [[-1.0, 1.0, 0.0]])           # sigmoid(x) - label


def test_float16_tolerable_value_is_the_largest_float16():
    p = np.array([[0.0, 1.0]], np.float16)
    y = CE.forward(p, np.array([[0]]), soft_label=False, ignore_index=-100)["Y"]
    assert y.dtype == np.float16 and y[0, 0] == np.finfo(np.float16).max


# -- dtypes -----------------------------------------------------------------------------------
def test_float32_losses_and_gradients_stay_float32():
    f = np.float32
    p, lab = _probs(N, C, seed=6, dtype="float32"), LABELS
    soft = _probs(N, C, seed=7, dtype="float32")
    dy = _rand((N, 1), 8, dtype="float32")
    lab_ig = LABELS.copy()
    lab_ig[0] = -100
    for g in (CE.backward(p, lab, dy, soft_label=False, ignore_index=-100)["X"],
              CE.backward(p, lab_ig, dy, soft_label=False, ignore_index=-100)["X"],
              CE.forward(p, soft, soft_label=True, ignore_index=-100)["Y"],
              *CE.backward(p, soft, dy, soft_label=True, ignore_index=-100).values(),
              *SWCE.backward(soft, p, dy, **dict(SWCE_ATTRS, soft_label=True)).values(),
              SWCE.backward(lab_ig, p, dy, **SWCE_ATTRS)["Logits"]):
        assert g.dtype == f
    x = _rand((N, C), 9, dtype="float32")
    y = _rand((N, C), 10, 0, 1, dtype="float32")
    y[0, 0] = -100
    for normalize in (False, True):
        out = SCE.forward(x, y, ignore_index=-100, normalize=normalize)["Out"]
        assert out.dtype == f
        g = SCE.backward(x, y, np.ones((N, C), f), ignore_index=-100, normalize=normalize)
        assert g["X"].dtype == f and g["Label"].dtype == f


# -- axes and ranks ---------------------------------------------------------------------------
@pytest.mark.parametrize("axis", [-2, 1])
def test_softmax_with_cross_entropy_on_a_middle_axis(axis):
    x = _rand((2, 4, 3), 11)
    lab = np.array([[[0, 3, 1]], [[2, 2, 0]]], np.int64)         # [2, 1, 3]: classes on axis 1
    sm = _ref_softmax(x, 1)
    attrs = dict(SWCE_ATTRS, axis=axis)
    out = SWCE.forward(x, lab, **attrs)
    np.testing.assert_allclose(out["Softmax"], sm, rtol=1e-12)
    np.testing.assert_allclose(out["Loss"], -np.log(np.take_along_axis(sm, lab, 1)),
                               rtol=1e-12)
    dl = _rand((2, 1, 3), 12)
    onehot = (np.arange(4)[None, :, None] == lab).astype(np.float64)
    g = SWCE.backward(lab, sm, dl, **attrs)["Logits"]
    np.testing.assert_allclose(g, (sm - onehot) * dl, rtol=1e-12, atol=1e-15)
    # soft labels on the same axis (Label has the logits' shape)
    soft = _ref_softmax(_rand((2, 4, 3), 13), 1)
    attrs["soft_label"] = True
    out = SWCE.forward(x, soft, **attrs)
    np.testing.assert_allclose(out["Loss"], -(soft * np.log(sm)).sum(1, keepdims=True),
                               rtol=1e-12)
    g = SWCE.backward(soft, sm, dl, **attrs)
    np.testing.assert_allclose(g["Logits"], (sm - soft) * dl, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(g["Label"], -np.log(sm) * dl, rtol=1e-12)


def test_three_d_inputs_on_the_last_axis():
    x = _rand((2, 3, 4), 14)
    sm = _ref_softmax(x)
    lab = np.array([[[3], [0], [2]], [[1], [1], [0]]], np.int64)
    out = SWCE.forward(x, lab, **SWCE_ATTRS)
    np.testing.assert_allclose(out["Loss"], -np.log(np.take_along_axis(sm, lab, -1)),
                               rtol=1e-12)
    soft = _ref_softmax(_rand((2, 3, 4), 15))
    want = -(soft * np.log(sm)).sum(-1, keepdims=True)
    out = SWCE.forward(x, soft, **dict(SWCE_ATTRS, soft_label=True))
    np.testing.assert_allclose(out["Loss"], want, rtol=1e-12)
    y = CE.forward(sm, soft, soft_label=True, ignore_index=-100)["Y"]
    np.testing.assert_allclose(y, want, rtol=1e-12)
    spec = CE.infer(VarSpec((2, 3, 4), "float32"), VarSpec((2, 3, 1), "int64"),
                    soft_label=False, ignore_index=-100)["Y"]
    assert spec.shape == (2, 3, 1)


def test_int32_labels_and_a_fresh_offset_cache(monkeypatch):
    monkeypatch.setattr(loss_mod, "_OFFSETS", {})
    sm = _ref_softmax(LOGITS)
    for lab in (LABELS, LABELS.astype(np.int32)):
        out = SWCE.forward(LOGITS, lab, **SWCE_ATTRS)
        np.testing.assert_allclose(out["Loss"], _ref_xent(sm, LABELS, -100), rtol=1e-12)
        dl = _rand((N, 1), 16)
        g = SWCE.backward(lab, sm, dl, **SWCE_ATTRS)["Logits"]
        np.testing.assert_allclose(g, _ref_swce_grad(sm, LABELS, dl, -100), rtol=1e-12,
                                   atol=1e-15)
    cached = loss_mod._OFFSETS[(N, C)]
    assert cached.tolist() == [i * C for i in range(N)] and not cached.flags.writeable


def test_the_offset_cache_is_bounded(monkeypatch):
    monkeypatch.setattr(loss_mod, "_OFFSETS", {})
    for rows in range(1, 300):
        idx = np.zeros((rows, 1), np.int64)
        assert loss_mod._flat_index(idx, 3).tolist() == [3 * i for i in range(rows)]
    assert len(loss_mod._OFFSETS) == 256


def test_the_lowered_gradient_with_a_fortran_ordered_softmax():
    fast_g = SWCE.lower_grad([VarSpec((N, 1), "int64"), VarSpec((N, C), "float64")],
                             SWCE_ATTRS, {"Logits"})
    sm = np.asfortranarray(_ref_softmax(LOGITS))
    dl = _rand((N, 1), 17)
    np.testing.assert_allclose(fast_g(LABELS, sm, None, dl)["Logits"],
                               _ref_swce_grad(sm, LABELS, dl, -100), rtol=1e-12, atol=1e-15)


def test_lowered_kernels_are_offered_for_a_classifiers_loss_only():
    x64, x32 = VarSpec((-1, C), "float64"), VarSpec((-1, C), "float32")
    hard = VarSpec((-1, 1), "int64")
    for axis in (-1, 1):
        attrs = dict(SWCE_ATTRS, axis=axis)
        assert SWCE.lower([x64, hard], attrs) is not None
        assert SWCE.lower([x32, hard], attrs) is not None
        assert SWCE.lower_grad([hard, x32], attrs, {"Logits"}) is not None
    assert SWCE.lower([VarSpec((-1, C), "float16"), hard], SWCE_ATTRS) is None
    assert SWCE.lower([VarSpec((2, 3, C), "float32"), VarSpec((2, 3, 1), "int64")],
                      SWCE_ATTRS) is None
    soft = dict(SWCE_ATTRS, soft_label=True)
    assert SWCE.lower([x32, x32], soft) is None
    assert SWCE.lower_grad([x32, x32], soft, {"Logits", "Label"}) is None
    assert SWCE.lower_grad([hard, x32], SWCE_ATTRS, {"Logits", "Label"}) is None


# -- build-time checks and their messages ------------------------------------------------------
def test_inferred_outputs_keep_the_dtype_and_lod_level_of_the_input():
    x = VarSpec((-1, C), "float32", 1)
    for lab in (VarSpec((-1, 1), "int64"), VarSpec((-1,), "int64")):
        y = CE.infer(x, lab, soft_label=False, ignore_index=-100)["Y"]
        assert y.dtype == x.dtype and y.lod_level == 1
        out = CE2.infer(x, lab, ignore_index=-100)
        for k in ("Y", "MatchX"):
            assert out[k].dtype == x.dtype and out[k].lod_level == 1
        assert out["XShape"].shape == (0, -1, C)
    assert CE2.infer(x, VarSpec((-1,), "int64"), ignore_index=-100)["Y"].shape == (-1,)
    out = SWCE.infer(x, VarSpec((-1, 1), "int64"), **{k: SWCE_ATTRS[k] for k in
                                                     ("soft_label", "ignore_index", "axis")})
    assert out["Loss"].lod_level == 1 and out["Loss"].shape == (-1, 1)
    assert SCE.infer(x, VarSpec((-1, C), "float32"), ignore_index=-100,
                     normalize=False)["Out"] is x


def _infer_swce(x, lab, soft=False, axis=-1):
    return SWCE.infer(x, lab, soft_label=soft, ignore_index=-100, axis=axis)


def test_label_checks_name_the_op_and_the_rule():
    x = VarSpec((4, C), "float32")
    hint = " or, for hard labels, the input's shape without its last dim"
    with pytest.raises(ValueError) as e:
        CE.infer(x, VarSpec((4, 1, 1), "int64"), soft_label=False, ignore_index=-100)
    assert str(e.value) == (f"cross_entropy: Label [4, 1, 1] must have the rank of the input "
                            f"[4, {C}]{hint}")
    with pytest.raises(ValueError) as e:
        CE.infer(x, VarSpec((4,), "float32"), soft_label=True, ignore_index=-100)
    assert str(e.value) == f"cross_entropy: Label [4] must have the rank of the input [4, {C}]"
    with pytest.raises(ValueError) as e:                  # softmax_with_cross_entropy: same rank
        _infer_swce(x, VarSpec((4,), "int64"))
    assert str(e.value) == (f"softmax_with_cross_entropy: Label [4] must have the rank of the "
                            f"input [4, {C}]")
    with pytest.raises(ValueError) as e:
        CE2.infer(x, VarSpec((4, 2), "int64"), ignore_index=-100)
    assert str(e.value) == (f"cross_entropy2: Label shape [4, 2] must equal the input's shape "
                            f"with dim 1 = 1 (input [4, {C}], soft_label=False)")
    with pytest.raises(ValueError) as e:
        _infer_swce(x, VarSpec((4, C + 1), "float32"), soft=True)
    assert str(e.value) == (f"softmax_with_cross_entropy: Label shape [4, {C + 1}] must equal "
                            f"the input's shape (input [4, {C}], soft_label=True)")
    with pytest.raises(ValueError) as e:
        CE.infer(x, VarSpec((4,), "float32"), soft_label=False, ignore_index=-100)
    assert str(e.value) == ("cross_entropy: hard labels must be an integer tensor (int64), got "
                            f"{VarSpec((1,), 'float32').dtype}")
    with pytest.raises(ValueError) as e:
        _infer_swce(x, VarSpec((4, 1), "float32"))
    assert str(e.value) == ("softmax_with_cross_entropy: hard labels must be an integer tensor "
                            f"(int64), got {VarSpec((1,), 'float32').dtype}; cast with "
                            ".astype('int64') or pass soft_label=True")
    with pytest.raises(ValueError, match=r"^softmax_with_cross_entropy: axis 2 is out of range "
                                         r"for input of rank 2"):
        _infer_swce(x, VarSpec((4, 1), "int64"), axis=2)
    # a rank N-1 label must match the leading dims: [2, 3, C] takes [2, 3], not [2, 4]
    with pytest.raises(ValueError, match=r"^cross_entropy2: Label \[2, 4\] must have the rank"):
        CE2.infer(VarSpec((2, 3, C), "float32"), VarSpec((2, 4), "int64"), ignore_index=-100)
    assert CE2.infer(VarSpec((2, 3, C), "float32"), VarSpec((2, 3), "int64"),
                     ignore_index=-100)["Y"].shape == (2, 3)


def test_sigmoid_cross_entropy_label_shape_check():
    x = VarSpec((4, C), "float32")
    for lab in ((4,), (4, C, 1), (4, C + 1)):
        with pytest.raises(ValueError) as e:
            SCE.infer(x, VarSpec(lab, "float32"), ignore_index=-100, normalize=False)
        assert str(e.value) == (f"sigmoid_cross_entropy_with_logits: Label shape {list(lab)} "
                                f"must equal X's shape [4, {C}]")


# -- sigmoid_cross_entropy_with_logits ----------------------------------------------------------
def _ref_sce(x, lab, ignore_index, normalize):
    out = np.maximum(x, 0) - x * lab + np.log1p(np.exp(-np.abs(x)))
    keep = lab != ignore_index
    out = np.where(keep, out, 0.0)
    if normalize:
        out = out / max(keep.sum(), 1e-5)
    return out


@pytest.mark.parametrize("normalize", [False, True])
def test_sigmoid_cross_entropy_with_ignored_entries(normalize):
    x = _rand((3, 4), 18, -4, 4)
    lab = _rand((3, 4), 19, 0, 1)
    lab[0, 1] = lab[2, 3] = -1.0
    out = SCE.forward(x, lab, ignore_index=-1, normalize=normalize)["Out"]
    np.testing.assert_allclose(out, _ref_sce(x, lab, -1, normalize), rtol=1e-12, atol=1e-15)
    d = _rand((3, 4), 20)
    g = SCE.backward(x, lab, d, ignore_index=-1, normalize=normalize)
    keep = lab != -1
    k = keep.sum() if normalize else 1.0
    np.testing.assert_allclose(g["X"], np.where(keep, (1 / (1 + np.exp(-x)) - lab) * d, 0) / k,
                               rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(g["Label"], np.where(keep, -x * d, 0) / k, rtol=1e-12,
                               atol=1e-15)
    t = OpTest()
    t.op_type, t.attrs = "sigmoid_cross_entropy_with_logits", {"ignore_index": -1,
                                                               "normalize": normalize}
    t.inputs, t.outputs = {"X": x, "Label": lab}, {"Out": _ref_sce(x, lab, -1, normalize)}
    t.check_output(atol=1e-12, rtol=1e-12)
    # (dLabel is not checked here: moving an ignored label off ignore_index is a jump)
    t.check_grad(["X"], "Out", max_relative_error=1e-4)
    t.inputs = {"X": x, "Label": np.abs(lab)}               # nothing ignored: dX and dLabel
    t.check_grad(["X", "Label"], "Out", max_relative_error=1e-4)


def test_sigmoid_cross_entropy_normalized_by_one_kept_entry_is_not_rescaled():
    x = np.array([[0.3, -1.2]])
    lab = np.array([[0.25, -100.0]])
    out = SCE.forward(x, lab, ignore_index=-100, normalize=True)["Out"]
    np.testing.assert_allclose(out, _ref_sce(x, lab, -100, True), rtol=1e-14, atol=0)
    g = SCE.backward(x, lab, np.ones((1, 2)), ignore_index=-100, normalize=True)
    np.testing.assert_allclose(g["X"], [[1 / (1 + math.exp(-0.3)) - 0.25, 0.0]], rtol=1e-14)
    out = SCE.forward(x, np.full((1, 2), -100.0), ignore_index=-100, normalize=True)["Out"]
    assert out.tolist() == [[0.0, 0.0]]                    # nothing kept: 0, not NaN


def test_soft_label_gradients_against_central_differences():
    # cross_entropy and softmax_with_cross_entropy with soft labels: dX and dLabel through the
    # Executor against central differences (random upstream gradients)
    p = _probs(N, C, seed=21)
    soft = _probs(N, C, seed=22)
    for op_type, inputs, out, grads in (
            ("cross_entropy", {"X": p, "Label": soft}, "Y", ["X", "Label"]),
            ("softmax_with_cross_entropy", {"Logits": LOGITS, "Label": soft}, "Loss",
             ["Logits", "Label"])):
        t = OpTest()
        t.op_type, t.attrs, t.inputs = op_type, {"soft_label": True}, inputs
        t.outputs = {}
        t.check_grad(grads, out, max_relative_error=1e-4, delta=1e-5)


def test_attribute_defaults_are_fluids():
    # fluid 1.8's op makers: soft_label false, ignore_index kIgnoreIndex = -100,
    # numeric_stable_mode true, axis -1, normalize false
    assert CE.attr_defaults == {"soft_label": False, "ignore_index": -100}
    assert CE2.attr_defaults == {"ignore_index": -100}
    assert SWCE.attr_defaults == {"soft_label": False, "ignore_index": -100,
                                  "numeric_stable_mode": True, "axis": -1}
    assert SCE.attr_defaults == {"ignore_index": -100, "normalize": False}
    # the kernels called without attrs use the same defaults
    p = _probs(N, C, seed=23)
    np.testing.assert_allclose(CE.forward(p, LABELS)["Y"], _ref_xent(p, LABELS, -100),
                               rtol=1e-13)
    x, lab = _rand((2, 3), 24), _rand((2, 3), 25, 0, 1)
    np.testing.assert_allclose(SCE.forward(x, lab)["Out"], _ref_sce(x, lab, -100, False),
                               rtol=1e-12)


def test_nan_results_warn_nothing():
    # log of a negative "probability" is NaN (not masked), and 0 / 0 in the hard-label
    # gradients is NaN: as fluid's kernels, without a floating-point warning
    p = np.array([[-0.5, 1.5], [0.0, 1.0]])
    lab = np.array([[0], [0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = CE.forward(p, lab, soft_label=False, ignore_index=-100)["Y"]
        assert np.isnan(y[0, 0]) and y[1, 0] == 1e20
        out = CE2.forward(p, lab, ignore_index=-100)
        assert np.isnan(out["Y"][0, 0])
        dx = CE2.backward(out["XShape"], lab, out["MatchX"], np.zeros((2, 1)),
                          ignore_index=-100)["X"]
        assert np.isnan(dx[1, 0]) and dx[0, 0] == 0.0          # 0 / 0, -0 / -0.5
        dx = CE.backward(p, lab, np.zeros((2, 1)), soft_label=False, ignore_index=-100)["X"]
        assert np.isnan(dx[1, 0])
