"""fluid 1.8's metric ops ``precision_recall`` and ``positive_negative_pair`` (not
differentiable), with fluid's slots, attributes and kernel arithmetic."""
from __future__ import annotations

from typing import Dict, List

import numpy as np

from ..core.dtypes import FLOATS, convert_dtype
from ..core.registry import OpDef, VarSpec, register

_TP, _FP, _TN, _FN = range(4)


def _need(op: str, cond: bool, msg: str) -> None:
    if not cond:
        raise ValueError(f"{op}: {msg}")


def _metrics(states: np.ndarray) -> np.ndarray:
    """fluid's ComputeMetrics: [macro precision, macro recall, macro F1, micro precision,
    micro recall, micro F1]; a precision / recall with no count is 1, an F1 of two zeros 0."""
    t = states.dtype.type

    def ratio(a, b):
        return a / (a + b) if (a > 0 or b > 0) else t(1)

    def f1(p, r):
        return t(2) * p * r / (p + r) if (p > 0 or r > 0) else t(0)

    n = states.shape[0]
    macro_p = sum((ratio(s[_TP], s[_FP]) for s in states), t(0)) / t(n)
    macro_r = sum((ratio(s[_TP], s[_FN]) for s in states), t(0)) / t(n)
    tp, fp, fn = (states[:, k].sum(dtype=states.dtype) for k in (_TP, _FP, _FN))
    micro_p, micro_r = ratio(tp, fp), ratio(tp, fn)
    return np.array([macro_p, macro_r, f1(macro_p, macro_r), micro_p, micro_r,
                     f1(micro_p, micro_r)], states.dtype)


@register
class PrecisionRecall(OpDef):
    """Per-class TP / FP / TN / FN counts (weighted by Weights) of the predicted classes
    Indices against Labels, then macro / micro precision, recall and F1: BatchMetrics [6] from
    this batch, AccumStatesInfo [class_number, 4] = this batch's counts + StatesInfo, and
    AccumMetrics [6] from those."""
    type = "precision_recall"
    inputs = ("MaxProbs", "Indices", "Labels", "Weights?", "StatesInfo?")
    outputs = ("BatchMetrics", "AccumMetrics", "AccumStatesInfo")
    no_grad = True

    def infer(self, MaxProbs, Indices, Labels, Weights=None, StatesInfo=None, *,
              class_number=1):
        _need(self.type, class_number >= 1, f"class_number must be >= 1, got {class_number}")
        _need(self.type, MaxProbs.dtype in FLOATS,
              f"MaxProbs must be a float tensor, got {convert_dtype(MaxProbs.dtype)}")
        for slot, spec in (("MaxProbs", MaxProbs), ("Indices", Indices), ("Labels", Labels)):
            _need(self.type, len(spec.shape) == 2 and spec.shape[1] in (1, -1),
                  f"{slot} must be [N, 1], got {list(spec.shape)}")
        if StatesInfo is not None:
            _need(self.type, list(StatesInfo.shape) in ([class_number, 4], [-1, 4]),
                  f"StatesInfo must be [class_number, 4] = [{class_number}, 4], got "
                  f"{list(StatesInfo.shape)}")
        dt = MaxProbs.dtype
        return {"BatchMetrics": VarSpec((6,), dt), "AccumMetrics": VarSpec((6,), dt),
                "AccumStatesInfo": VarSpec((class_number, 4), dt)}

    def forward(self, MaxProbs, Indices, Labels, Weights=None, StatesInfo=None, *,
                class_number=1):
        dt = MaxProbs.dtype
        idx = Indices.reshape(-1).astype(np.int64)
        lab = Labels.reshape(-1).astype(np.int64)
        for name, v in (("Indices", idx), ("Labels", lab)):
            bad = (v < 0) | (v >= class_number)
            _need(self.type, not bad.any(),
                  f"{name} {int(v[bad][0]) if bad.any() else 0} is out of range "
                  f"[0, {class_number})")
        w = np.ones(idx.shape, dt) if Weights is None else Weights.reshape(-1).astype(dt)
        states = np.zeros((class_number, 4), dt)
        hit = idx == lab
        np.add.at(states[:, _TP], idx[hit], w[hit])
        np.add.at(states[:, _FN], lab[~hit], w[~hit])
        np.add.at(states[:, _FP], idx[~hit], w[~hit])
        # every class but the predicted one (and the true one when they differ) gains a TN
        states[:, _TN] += w.sum(dtype=dt)
        np.subtract.at(states[:, _TN], idx, w)
        np.subtract.at(states[:, _TN], lab[~hit], w[~hit])
        batch = _metrics(states)
        if StatesInfo is not None:
            states = states + StatesInfo.astype(dt, copy=False)
        return {"BatchMetrics": batch, "AccumMetrics": _metrics(states),
                "AccumStatesInfo": states}


@register
class PositiveNegativePair(OpDef):
    """For each query (QueryID), over every pair of its documents with different Label:
    weight w = (Weight_a + Weight_b) / 2 (weights default 1) goes to PositivePair when
    (Score_a - Score_b) (Label_a - Label_b) > 0, else to NegativePair, and also to NeutralPair
    when the scores tie (a tie counts as negative too, as fluid's kernel). Scores are column
    ``column`` of Score; the Accumulate* inputs are added."""
    type = "positive_negative_pair"
    inputs = ("Score", "Label", "QueryID", "AccumulatePositivePair?",
              "AccumulateNegativePair?", "AccumulateNeutralPair?", "Weight?")
    outputs = ("PositivePair", "NegativePair", "NeutralPair?")
    no_grad = True

    def infer(self, Score, Label, QueryID, AccumulatePositivePair=None,
              AccumulateNegativePair=None, AccumulateNeutralPair=None, Weight=None, *,
              column=0):
        _need(self.type, len(Score.shape) == 2, f"Score must be [N, D], got "
                                                f"{list(Score.shape)}")
        for slot, spec in (("Label", Label), ("QueryID", QueryID)):
            _need(self.type, len(spec.shape) == 2 and spec.shape[1] in (1, -1),
                  f"{slot} must be [N, 1], got {list(spec.shape)}")
        accs = (AccumulatePositivePair, AccumulateNegativePair, AccumulateNeutralPair)
        _need(self.type, all(a is None for a in accs) or all(a is not None for a in accs),
              "AccumulatePositivePair, AccumulateNegativePair and AccumulateNeutralPair must "
              "be given together")
        width = Score.shape[1]
        _need(self.type, width < 0 or -width <= column < width,
              f"column {column} is out of range for Score of width {width}")
        one = VarSpec((1,), Score.dtype)
        return {"PositivePair": one, "NegativePair": one, "NeutralPair": one}

    def forward(self, Score, Label, QueryID, AccumulatePositivePair=None,
                AccumulateNegativePair=None, AccumulateNeutralPair=None, Weight=None, *,
                column=0):
        dt = Score.dtype
        t = dt.type
        col = column + Score.shape[1] if column < 0 else column
        score = Score[:, col]
        label = Label.reshape(-1).astype(dt, copy=False)
        weight = np.ones(score.shape, dt) if Weight is None else Weight.reshape(-1).astype(dt)
        queries: Dict[int, List[int]] = {}
        for i, q in enumerate(QueryID.reshape(-1).tolist()):
            queries.setdefault(int(q), []).append(i)
        pos, neg, neu = (t(0) if a is None else a.reshape(-1)[0].astype(dt)
                         for a in (AccumulatePositivePair, AccumulateNegativePair,
                                   AccumulateNeutralPair))
        for rows in queries.values():
            r = np.asarray(rows)
            a, b = np.triu_indices(r.size, 1)
            a, b = r[a], r[b]
            keep = label[a] != label[b]
            a, b = a[keep], b[keep]
            w = (weight[a] + weight[b]) * t(0.5)
            better = (score[a] - score[b]) * (label[a] - label[b]) > 0
            pos = pos + w[better].sum(dtype=dt)
            neg = neg + w[~better].sum(dtype=dt)
            neu = neu + w[score[a] == score[b]].sum(dtype=dt)
        as1 = lambda v: np.array([v], dt)           # noqa: E731
        return {"PositivePair": as1(pos), "NegativePair": as1(neg), "NeutralPair": as1(neu)}
