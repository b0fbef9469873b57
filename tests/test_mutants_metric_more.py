"""Tests written from the mutation run of ``fluidlite/ops/metric_more.py`` (issue 28, round 11):
precision_recall and positive_negative_pair in float32 (output values and exact dtypes, at
build time and at run time), fluid 1.8's conventions at the edges (a class never predicted /
never seen has precision / recall 1, an F1 of two zeros is 0, a fractional weight), the default
``column`` 0, and the shape / range checks with the messages users see.

References: fluid 1.8's kernels (paddle/fluid/operators/metrics/precision_recall_op.h,
positive_negative_pair_op.h), written below as float64 loops over the rows; fluid's InferShape
checks (precision_recall_op.cc, positive_negative_pair_op.cc) for which inputs are rejected."""
import itertools

import numpy as np
import pytest

from fluidlite.core.dtypes import VarType
from fluidlite.core.registry import VarSpec, get_op_def

PR, PNP = get_op_def("precision_recall"), get_op_def("positive_negative_pair")


def pr_reference(idx, lab, w, c, states_in=None):
    """fluid 1.8's PrecisionRecallKernel: per-sample state updates, then ComputeMetrics."""
    s = np.zeros((c, 4))                          # TP, FP, TN, FN
    for i, l, wt in zip(idx, lab, w):
        for k in range(c):
            if k == i and k == l:
                s[k, 0] += wt
            elif k == i:
                s[k, 1] += wt
            elif k == l:
                s[k, 3] += wt
            else:
                s[k, 2] += wt
    batch = s.copy()
    acc = s + (0 if states_in is None else states_in)

    def metrics(st):
        def prec_or_rec(a, b):
            return a / (a + b) if (a > 0 or b > 0) else 1.0

        def f1(p, r):
            return 2 * p * r / (p + r) if (p > 0 or r > 0) else 0.0
        mp = sum(prec_or_rec(r[0], r[1]) for r in st) / len(st)
        mr = sum(prec_or_rec(r[0], r[3]) for r in st) / len(st)
        up = prec_or_rec(st[:, 0].sum(), st[:, 1].sum())
        ur = prec_or_rec(st[:, 0].sum(), st[:, 3].sum())
        return np.array([mp, mr, f1(mp, mr), up, ur, f1(up, ur)])
    return metrics(batch), metrics(acc), acc


def col(v, dt=np.int32):
    return np.asarray(v, dt).reshape(-1, 1)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_precision_recall_dtypes_and_values(dt):
    rng = np.random.default_rng(3)
    n, c = 12, 3
    idx, lab = rng.integers(0, c, n), rng.integers(0, c, n)
    w = rng.uniform(0.25, 2.0, n)
    states = rng.uniform(0, 3, (c, 4))
    got = PR.forward(col(rng.uniform(0, 1, n), dt), col(idx), col(lab), col(w, dt),
                     states.astype(dt), class_number=c)
    want = pr_reference(idx, lab, w.astype(dt), c, states.astype(dt))
    tol = 1e-5 if dt == np.float32 else 1e-12
    for slot, ref in zip(("BatchMetrics", "AccumMetrics", "AccumStatesInfo"), want):
        assert got[slot].dtype == dt, slot
        np.testing.assert_allclose(got[slot], ref, rtol=tol, atol=tol, err_msg=slot)
    spec = PR.infer(VarSpec((n, 1), dt), VarSpec((n, 1), "int32"), VarSpec((n, 1), "int32"),
                    None, VarSpec((c, 4), dt), class_number=c)
    want_dt = VarType.FP32 if dt == np.float32 else VarType.FP64
    assert {k: (v.shape, v.dtype) for k, v in spec.items()} == {
        "BatchMetrics": ((6,), want_dt), "AccumMetrics": ((6,), want_dt),
        "AccumStatesInfo": ((c, 4), want_dt)}


def test_precision_recall_unweighted_float32_counts():
    got = PR.forward(col([0.5, 0.5, 0.5], np.float32), col([0, 1, 1]), col([0, 1, 0]),
                     class_number=2)
    assert got["AccumStatesInfo"].dtype == np.float32
    # class 0: TP 1, FN 1, TN 1; class 1: TP 1, FP 1, TN 1
    np.testing.assert_array_equal(got["AccumStatesInfo"], [[1, 0, 1, 1], [1, 1, 1, 0]])


def test_precision_recall_edges_of_the_metrics():
    # every prediction wrong: precision and recall 0 for both classes, F1 of two zeros is 0
    got = PR.forward(col([0.9, 0.9], np.float64), col([0, 1]), col([1, 0]), class_number=2)
    np.testing.assert_array_equal(got["BatchMetrics"], np.zeros(6))
    # one class, always right
    got = PR.forward(col([0.9, 0.9], np.float64), col([0, 0]), col([0, 0]), class_number=1)
    np.testing.assert_array_equal(got["BatchMetrics"], np.ones(6))
    # fractional weights: class 0 only has FP 0.5 -> precision 0; class 1 only FN 0.5 ->
    # recall 0; class 2 never seen -> 1 and 1
    got = PR.forward(col([0.9], np.float64), col([0]), col([1]), col([0.5], np.float64),
                     class_number=3)
    want = pr_reference([0], [1], [0.5], 3)[0]
    np.testing.assert_allclose(got["BatchMetrics"], want, rtol=1e-12)
    np.testing.assert_allclose(want[:2], [2 / 3, 2 / 3])


def _pr_infer(maxprobs=(4, 1), indices=(4, 1), labels=(4, 1), states=None, c=3,
              dt="float32"):
    return PR.infer(VarSpec(maxprobs, dt), VarSpec(indices, "int64"),
                    VarSpec(labels, "int64"), None,
                    None if states is None else VarSpec(states, "float32"), class_number=c)


def test_precision_recall_checks():
    with pytest.raises(ValueError, match=r"^precision_recall: class_number must be >= 1, "
                                         r"got 0$"):
        _pr_infer(c=0)
    _pr_infer(c=1)
    with pytest.raises(ValueError, match=r"^precision_recall: MaxProbs must be a float "
                                         r"tensor, got int32$"):
        _pr_infer(dt="int32")
    for slot in ("MaxProbs", "Indices", "Labels"):
        kw = {slot.lower(): (4, 2)}
        with pytest.raises(ValueError, match=rf"^precision_recall: {slot} must be \[N, 1\], "
                                             rf"got \[4, 2\]$"):
            _pr_infer(**kw)
        with pytest.raises(ValueError, match=rf"^precision_recall: {slot} must be \[N, 1\], "
                                             rf"got \[4\]$"):
            _pr_infer(**{slot.lower(): (4,)})
        with pytest.raises(ValueError, match=rf"{slot} must be \[N, 1\], got \[4, -2\]"):
            _pr_infer(**{slot.lower(): (4, -2)})
    _pr_infer(maxprobs=(-1, -1), indices=(-1, -1), labels=(-1, -1), states=(-1, 4))
    for bad in ((3, 5), (-1, 5), (1, 4)):
        with pytest.raises(ValueError, match=rf"^precision_recall: StatesInfo must be "
                                             rf"\[class_number, 4\] = \[3, 4\], got "
                                             rf"\[{bad[0]}, {bad[1]}\]$"):
            _pr_infer(states=bad)
    with pytest.raises(ValueError, match=r"StatesInfo must be .* got \[-2, 4\]"):
        _pr_infer(states=(-2, 4))


@pytest.mark.parametrize("name,idx,lab,bad", [("Labels", [0, 1], [1, 3], 3),
                                              ("Indices", [0, -1], [1, 1], -1),
                                              ("Indices", [2, 0], [1, 1], 2)])
def test_precision_recall_out_of_range(name, idx, lab, bad):
    c = 3 if name == "Labels" or bad < 0 else 2
    with pytest.raises(ValueError, match=rf"^precision_recall: {name} {bad} is out of range "
                                         rf"\[0, {c}\)$"):
        PR.forward(col([0.1, 0.2], np.float32), col(idx), col(lab), class_number=c)
    # the largest valid class is accepted
    PR.forward(col([0.1], np.float32), col([c - 1]), col([c - 1]), class_number=c)


def pnp_reference(score, label, query, weight):
    pos = neg = neu = 0.0
    for a, b in itertools.combinations(range(len(score)), 2):
        if query[a] != query[b] or label[a] == label[b]:
            continue
        w = (weight[a] + weight[b]) / 2
        if score[a] == score[b]:
            neu += w
        if (score[a] - score[b]) * (label[a] - label[b]) > 0:
            pos += w
        else:
            neg += w
    return np.array([pos, neg, neu])


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_positive_negative_pair_default_column_and_dtypes(dt):
    rng = np.random.default_rng(5)
    n = 16
    score = np.round(rng.uniform(0, 1, (n, 3)), 1).astype(dt)
    label = rng.integers(0, 3, n)
    query = rng.integers(0, 3, n)
    w = rng.uniform(0.5, 2, n).astype(dt)
    got = PNP.forward(score, col(label, dt), col(query, np.int64), Weight=col(w, dt))
    want = pnp_reference(score[:, 0], label, query, w)
    tol = 1e-5 if dt == np.float32 else 1e-12
    for i, slot in enumerate(("PositivePair", "NegativePair", "NeutralPair")):
        assert got[slot].dtype == dt and got[slot].shape == (1,), slot
        np.testing.assert_allclose(got[slot], want[i:i + 1], rtol=tol, err_msg=slot)
    # the same scores put in the last column, picked with column=-1 and column=2
    for c in (-1, 2):
        moved = np.concatenate([score[:, 1:], score[:, :1]], axis=1)
        g2 = PNP.forward(moved, col(label, dt), col(query, np.int64), Weight=col(w, dt),
                         column=c)
        for slot in got:
            np.testing.assert_array_equal(g2[slot], got[slot])
    acc = [np.array([1.0], np.float64)] * 3
    g3 = PNP.forward(score, col(label, dt), col(query, np.int64), *acc)
    assert all(g3[s].dtype == dt for s in g3)
    spec = PNP.infer(VarSpec((n, 3), dt), VarSpec((n, 1), dt), VarSpec((n, 1), "int64"))
    want_dt = VarType.FP32 if dt == np.float32 else VarType.FP64
    assert {k: (v.shape, v.dtype) for k, v in spec.items()} == {
        s: ((1,), want_dt) for s in ("PositivePair", "NegativePair", "NeutralPair")}


def _pnp_infer(score=(4, 3), label=(4, 1), query=(4, 1), accs=(), column=0):
    a = [VarSpec((1,), "float32") for _ in accs] + [None] * (3 - len(accs))
    return PNP.infer(VarSpec(score, "float32"), VarSpec(label, "float32"),
                     VarSpec(query, "int64"), *a, column=column)


def test_positive_negative_pair_checks():
    with pytest.raises(ValueError, match=r"^positive_negative_pair: Score must be \[N, D\], "
                                         r"got \[4\]$"):
        _pnp_infer(score=(4,))
    for slot in ("Label", "QueryID"):
        key = "label" if slot == "Label" else "query"
        with pytest.raises(ValueError, match=rf"^positive_negative_pair: {slot} must be "
                                             rf"\[N, 1\], got \[4, 2\]$"):
            _pnp_infer(**{key: (4, 2)})
        with pytest.raises(ValueError, match=rf"{slot} must be \[N, 1\], got \[4\]$"):
            _pnp_infer(**{key: (4,)})
        with pytest.raises(ValueError, match=rf"{slot} must be \[N, 1\], got \[4, -2\]$"):
            _pnp_infer(**{key: (4, -2)})
    _pnp_infer(label=(-1, -1), query=(-1, -1), accs=(1, 2, 3))
    with pytest.raises(ValueError, match=r"^positive_negative_pair: AccumulatePositivePair, "
                                         r"AccumulateNegativePair and AccumulateNeutralPair "
                                         r"must be given together$"):
        _pnp_infer(accs=(1,))
    for c in (-3, 0, 2):
        _pnp_infer(column=c)
    for c in (3, -4):
        with pytest.raises(ValueError, match=rf"^positive_negative_pair: column {c} is out of "
                                             rf"range for Score of width 3$"):
            _pnp_infer(column=c)
    with pytest.raises(ValueError, match=r"column 0 is out of range for Score of width 0"):
        _pnp_infer(score=(4, 0))
    _pnp_infer(score=(-1, -1), column=5)           # unknown width: checked at run time


def test_positive_negative_pair_default_column_in_infer():
    PNP.infer(VarSpec((4, 1), "float32"), VarSpec((4, 1), "float32"), VarSpec((4, 1), "int64"))
