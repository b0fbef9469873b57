"""precision_recall and positive_negative_pair (fluidlite/ops/metric_more.py) against
loop references of fluid's kernels (Paddle 2.6's CPU kernels give the same numbers)."""
import itertools

import numpy as np
import pytest

from fluidlite.core.registry import get_op_def
from fluidlite.testing import OpTest


def ref_states(idx, lab, w, c):
    s = np.zeros((c, 4))                  # TP, FP, TN, FN
    for i, l, wt in zip(idx, lab, w):
        if i == l:
            s[i, 0] += wt
            s[:, 2] += wt
            s[i, 2] -= wt
        else:
            s[l, 3] += wt
            s[i, 1] += wt
            s[:, 2] += wt
            s[i, 2] -= wt
            s[l, 2] -= wt
    return s


def ref_metrics(s):
    def ratio(a, b):
        return a / (a + b) if a > 0 or b > 0 else 1.0

    def f1(p, r):
        return 2 * p * r / (p + r) if p > 0 or r > 0 else 0.0
    mp = np.mean([ratio(r[0], r[1]) for r in s])
    mr = np.mean([ratio(r[0], r[3]) for r in s])
    tp, fp, fn = s[:, 0].sum(), s[:, 1].sum(), s[:, 3].sum()
    return np.array([mp, mr, f1(mp, mr), ratio(tp, fp), ratio(tp, fn),
                     f1(ratio(tp, fp), ratio(tp, fn))])


@pytest.mark.parametrize("weighted", [False, True])
def test_precision_recall(weighted):
    rng = np.random.default_rng(8)
    n, c = 20, 4
    idx = rng.integers(0, c, (n, 1)).astype(np.int32)
    lab = rng.integers(0, c, (n, 1)).astype(np.int32)
    w = rng.uniform(0.5, 2, (n, 1)) if weighted else np.ones((n, 1))
    states_in = rng.uniform(0, 5, (c, 4))
    t = OpTest()
    t.op_type, t.attrs = "precision_recall", {"class_number": c}
    t.inputs = {"MaxProbs": rng.uniform(0, 1, (n, 1)), "Indices": idx, "Labels": lab}
    if weighted:
        t.inputs.update(Weights=w, StatesInfo=states_in)
    s = ref_states(idx.ravel(), lab.ravel(), w.ravel(), c)
    acc = s + states_in if weighted else s
    t.outputs = {"BatchMetrics": ref_metrics(s), "AccumMetrics": ref_metrics(acc),
                 "AccumStatesInfo": acc}
    t.check_infer()
    t.check_output(atol=1e-12, rtol=1e-12)


def test_precision_recall_empty_counts_and_errors():
    got = get_op_def("precision_recall").forward(
        np.ones((3, 1)), np.zeros((3, 1), np.int32), np.zeros((3, 1), np.int32),
        class_number=3)
    # classes 1, 2 never seen: precision = recall = 1 (fluid's convention)
    np.testing.assert_allclose(got["BatchMetrics"], [1, 1, 1, 1, 1, 1])
    with pytest.raises(ValueError, match="out of range"):
        get_op_def("precision_recall").forward(np.ones((1, 1)), np.array([[5]], np.int32),
                                               np.array([[0]], np.int32), class_number=3)


def ref_pairs(score, label, query, weight):
    pos = neg = neu = 0.0
    for q in set(query):
        rows = [i for i in range(len(query)) if query[i] == q]
        for a, b in itertools.combinations(rows, 2):
            if label[a] == label[b]:
                continue
            w = (weight[a] + weight[b]) * 0.5
            if score[a] == score[b]:
                neu += w
            if (score[a] - score[b]) * (label[a] - label[b]) > 0:
                pos += w
            else:
                neg += w
    return pos, neg, neu


@pytest.mark.parametrize("accumulate", [False, True])
def test_positive_negative_pair(accumulate):
    rng = np.random.default_rng(8)
    n = 20
    score = np.round(rng.uniform(0, 1, (n, 2)), 1)        # ties included
    label = rng.integers(0, 3, (n, 1)).astype(np.float64)
    query = rng.integers(0, 4, (n, 1)).astype(np.int64)
    w = rng.uniform(0.5, 2, (n, 1)) if accumulate else np.ones((n, 1))
    pos, neg, neu = ref_pairs(score[:, 1], label.ravel(), query.ravel(), w.ravel())
    t = OpTest()
    t.op_type, t.attrs = "positive_negative_pair", {"column": -1 if accumulate else 1}
    t.inputs = {"Score": score, "Label": label, "QueryID": query}
    if accumulate:
        t.inputs.update(AccumulatePositivePair=np.array([1.5]),
                        AccumulateNegativePair=np.array([2.5]),
                        AccumulateNeutralPair=np.array([0.5]), Weight=w)
        pos, neg, neu = pos + 1.5, neg + 2.5, neu + 0.5
    t.outputs = {"PositivePair": np.array([pos]), "NegativePair": np.array([neg]),
                 "NeutralPair": np.array([neu])}
    assert neu > 0
    t.check_infer()
    t.check_output(atol=1e-12, rtol=1e-12)
