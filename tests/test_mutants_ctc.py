"""Tests written from the mutation run of ``fluidlite/ops/ctc.py`` (issue 28, docs/mutation.md):
warp-ctc's feasibility rule (a label needs U + adjacent repeats steps; padding and
non-adjacent repeats do not count), the padded form's checks and messages, the build-time
shape, the defaults, and no warning from the time mask of a batch of unequal lengths.
Reference: the probability of every alignment enumerated and collapsed in the test (Graves
2006), float64."""
import itertools
import warnings

import numpy as np
import pytest

from fluidlite.core.dtypes import VarType
from fluidlite.core.registry import VarSpec, get_op_def

CTC = get_op_def("warpctc")


def _nll(logits, label, blank):
    """-log of the summed probability of the paths collapsing to ``label`` (0 if none)."""
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    total = 0.0
    for path in itertools.product(range(logits.shape[1]), repeat=logits.shape[0]):
        merged = [k for i, k in enumerate(path) if i == 0 or k != path[i - 1]]
        if [k for k in merged if k != blank] == list(label):
            total += float(np.prod([p[t, k] for t, k in enumerate(path)]))
    return -np.log(total) if total > 0 else 0.0


def _lod(lengths):
    return (tuple(int(v) for v in np.concatenate([[0], np.cumsum(lengths)])),)


def _batch(tl, labels, c=4, seed=0):
    logits = np.random.default_rng(seed).uniform(-1, 1, (sum(tl), c))
    lab = np.array([v for s in labels for v in s], np.int32).reshape(-1, 1)
    lod = {"Logits": _lod(tl), "Label": _lod([len(s) for s in labels])}
    return logits, lab, lod


def _want(logits, tl, labels, blank=0):
    out, at = [], 0
    for n, s in zip(tl, labels):
        out.append(_nll(logits[at:at + n], s, blank))
        at += n
    return np.array(out)


def test_feasibility_counts_only_adjacent_repeats_of_the_real_label():
    # [3] in 1 step next to a longer label padded with blanks (the padding repeats itself);
    # [1, 2, 1] in 3 steps (a repeat, but not adjacent); [2, 2] in 3 steps (adjacent: fits
    # exactly) and in 2 steps (does not fit: loss 0, warp-ctc's early return)
    tl = [1, 3, 3, 2]
    labels = [[3], [1, 2, 1], [2, 2], [2, 2]]
    logits, lab, lod = _batch(tl, labels)
    loss = CTC.forward(logits, lab, lod=lod, blank=0)["Loss"]
    want = _want(logits, tl, labels)
    assert want[3] == 0.0 and all(w > 0 for w in want[:3])
    np.testing.assert_allclose(loss[:, 0], want, rtol=1e-9)
    g = CTC.backward(logits, lab, lod=lod, dLoss=np.ones((4, 1)), blank=0)["Logits"]
    assert not g[7:].any()                      # rows of the infeasible sequence
    for rows in (slice(0, 1), slice(1, 4), slice(4, 7)):
        assert np.abs(g[rows]).sum() > 0


def test_a_batch_of_unequal_lengths_gives_no_warning_and_zero_past_each_length():
    tl, labels = [4, 2, 1], [[1, 2], [3], []]
    logits, lab, lod = _batch(tl, labels, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loss = CTC.forward(logits, lab, lod=lod, blank=0)["Loss"]
        g = CTC.backward(logits, lab, lod=lod, dLoss=np.ones((3, 1)), blank=0)["Logits"]
    np.testing.assert_allclose(loss[:, 0], _want(logits, tl, labels), rtol=1e-9)
    assert np.isfinite(g).all() and g.shape == logits.shape
    # each step's gradient is softmax - occupancy: it sums to 0 over the classes
    np.testing.assert_allclose(g.sum(1), 0.0, atol=1e-12)


def test_defaults_are_blank_0_and_no_normalisation():
    tl, labels = [3, 2], [[1, 2], [2]]
    logits, lab, lod = _batch(tl, labels, seed=2)
    np.testing.assert_array_equal(CTC.forward(logits, lab, lod=lod)["Loss"],
                                  CTC.forward(logits, lab, lod=lod, blank=0)["Loss"])
    d = np.array([[1.0], [2.0]])
    np.testing.assert_array_equal(
        CTC.backward(logits, lab, lod=lod, dLoss=d)["Logits"],
        CTC.backward(logits, lab, lod=lod, dLoss=d, blank=0, norm_by_times=False)["Logits"])
    assert CTC.attr_defaults["blank"] == 0 and CTC.attr_defaults["norm_by_times"] is False


def test_infer_declares_loss_per_sequence():
    x = VarSpec((-1, 5), VarType.FP64)
    out = CTC.infer(x, VarSpec((-1, 1), VarType.INT32), None, None)
    assert out == {"Loss": VarSpec((-1, 1), VarType.FP64), "WarpCTCGrad": x}
    x3 = VarSpec((6, 2, 5), VarType.FP32)
    out = CTC.infer(x3, VarSpec((2, 3), VarType.INT32), VarSpec((2,), VarType.INT64),
                    VarSpec((2,), VarType.INT64))
    assert out["Loss"] == VarSpec((-1, 1), VarType.FP32)


def _padded():
    logits = np.zeros((3, 2, 4))                         # [max_T, B, C]
    label = np.array([[1, 2], [3, 0]], np.int32)        # [B, max_U]
    return logits, label


@pytest.mark.parametrize("which", ["LogitsLength", "LabelLength"])
def test_padded_lengths_must_come_together(which):
    logits, label = _padded()
    lens = np.array([3, 2], np.int64)
    kw = {which: lens}
    msg = r"^warpctc: LogitsLength and LabelLength must be given together$"
    with pytest.raises(ValueError, match=msg):
        CTC.forward(logits, label, **kw)
    with pytest.raises(ValueError, match=msg):
        CTC.backward(logits, label, dLoss=np.ones((2, 1)), **kw)
    spec = VarSpec((2,), VarType.INT64)
    with pytest.raises(ValueError, match=msg):
        CTC.infer(VarSpec((3, 2, 4), VarType.FP32), VarSpec((2, 2), VarType.INT32),
                  spec if which == "LogitsLength" else None,
                  spec if which == "LabelLength" else None)


def test_padded_checks_name_the_slot():
    logits, label = _padded()
    ok = np.array([3, 2], np.int64)
    with pytest.raises(ValueError, match=r"^warpctc: with LabelLength, Label must be \[batch_size, "
                                         r"max_label_length\] with batch_size 2, got \[3, 2\]$"):
        CTC.forward(logits, np.zeros((3, 2), np.int32), ok, np.array([1, 1, 1]))
    with pytest.raises(ValueError, match=r"^warpctc: every LogitsLength must lie in \[0, 3\]"):
        CTC.forward(logits, label, np.array([4, 2]), np.array([2, 1]))
    with pytest.raises(ValueError, match=r"^warpctc: every LabelLength must lie in \[0, 2\]"):
        CTC.forward(logits, label, ok, np.array([3, 1]))
    with pytest.raises(ValueError, match=r"^warpctc: every LogitsLength must be >= 1, got "
                                         r"\[3, 0\]$"):
        CTC.forward(logits, label, np.array([3, 0]), np.array([2, 1]))
    # a valid padded batch gives the LoD form's losses
    loss = CTC.forward(logits, label, ok, np.array([2, 1]))["Loss"]
    np.testing.assert_allclose(loss[:, 0], [_nll(np.zeros((3, 4)), [1, 2], 0),
                                            _nll(np.zeros((2, 4)), [3], 0)], rtol=1e-9)


def test_lod_checks_name_the_slot():
    logits = np.zeros((3, 4))
    lab = np.array([[1]], np.int32)
    with pytest.raises(ValueError, match=r"^warpctc: input Logits has no LoD"):
        CTC.forward(logits, lab, lod={"Label": _lod([1])})
    with pytest.raises(ValueError, match=r"^warpctc: input Label has no LoD"):
        CTC.forward(logits, lab, lod={"Logits": _lod([3])})
    with pytest.raises(ValueError, match=r"^warpctc: Logits and Label must have the same number "
                                         r"of sequences$"):
        CTC.forward(logits, lab, lod={"Logits": _lod([1, 2]), "Label": _lod([1])})
