"""``auc``: area under the ROC (or PR) curve from bucketed prediction statistics, as fluid's
auc op. The positive-class probability (the last column of ``Predict``) of each row falls in
bucket ``int(p * num_thresholds)``; ``StatPos`` / ``StatNeg`` count positives / negatives per
bucket and are carried across runs (persistable, written back through ``StatPosOut`` /
``StatNegOut``).

``slide_steps == 0``: the counts accumulate forever (global AUC); the stat tensors hold
``num_thresholds + 1`` buckets. ``slide_steps = k > 0``: the AUC of the last k batches. The
stat tensors then hold k per-batch slots, their running sum and one trailing entry counting
the batches (in both tensors; the slot is chosen by StatPos's): ``(k + 1) *
(num_thresholds + 1) + 1`` values.
"""
from __future__ import annotations

import numpy as np

from ..core.dtypes import VarType
from ..core.registry import OpDef, VarSpec, register


def _trapezoid_auc(pos: np.ndarray, neg: np.ndarray) -> float:
    """Sum of trapezoids walking the buckets from the highest threshold down (fluid's
    ``calcAuc``); normalised by the totals, 0 when a class is absent."""
    tot_pos = np.cumsum(pos[::-1].astype(np.float64))
    tot_neg = np.cumsum(neg[::-1].astype(np.float64))
    prev_pos = np.concatenate([[0.0], tot_pos[:-1]])
    prev_neg = np.concatenate([[0.0], tot_neg[:-1]])
    area = float(np.sum(np.abs(tot_neg - prev_neg) * (tot_pos + prev_pos) / 2.0))
    if tot_pos[-1] > 0 and tot_neg[-1] > 0:
        return area / tot_pos[-1] / tot_neg[-1]
    return 0.0


@register
class Auc(OpDef):
    """AUC = trapezoidal area under the ROC curve of the bucketed counts (after adding this
    batch); StatPosOut / StatNegOut the updated counts (see the module docstring)."""
    type = "auc"
    inputs, outputs = ("Predict", "Label", "StatPos", "StatNeg"), \
        ("AUC", "StatPosOut", "StatNegOut")
    no_grad = True

    def infer(self, Predict, Label, StatPos, StatNeg, *, curve="ROC", num_thresholds=4095,
              slide_steps=1):
        if curve != "ROC":
            raise ValueError(f"auc: only curve='ROC' is computed (as fluid's kernel), got "
                             f"{curve!r}")
        if Predict.ndim != 2:
            raise ValueError(f"auc: Predict must be [N, C] probabilities, got shape "
                             f"{list(Predict.shape)}")
        return {"AUC": VarSpec((1,), VarType.FP64), "StatPosOut": StatPos,
                "StatNegOut": StatNeg}

    def forward(self, Predict, Label, StatPos, StatNeg, *, curve="ROC", num_thresholds=4095,
                slide_steps=1):
        buckets = int(num_thresholds) + 1
        p = np.asarray(Predict)[:, -1]
        if p.size and (p.min() < 0 or p.max() > 1):
            raise ValueError(f"auc: the positive-class probabilities must lie in [0, 1], got "
                             f"values in [{p.min()}, {p.max()}]")
        # fluid's kernel: (uint32) (predict * num_thresholds), the product in Predict's type
        # (float32(0.7) * 10 is bucket 7 in float32, 6 in float64)
        bins = (p * p.dtype.type(num_thresholds)).astype(np.int64)
        label = np.asarray(Label).reshape(-1)
        batch_pos = np.bincount(bins[label > 0], minlength=buckets)
        batch_neg = np.bincount(bins[label == 0], minlength=buckets)
        pos = np.array(StatPos, dtype=np.int64).reshape(-1)
        neg = np.array(StatNeg, dtype=np.int64).reshape(-1)
        if slide_steps == 0:
            pos[:buckets] += batch_pos
            neg[:buckets] += batch_neg
            total_pos, total_neg = pos[:buckets], neg[:buckets]
        else:
            k = int(slide_steps)
            need = (k + 1) * buckets + 1
            if pos.size != need:
                raise ValueError(f"auc: with slide_steps={k} StatPos must hold (slide_steps + "
                                 f"1) * (num_thresholds + 1) + 1 = {need} values, got "
                                 f"{pos.size}")
            cur = int(pos[-1]) % k
            slot, total = slice(cur * buckets, (cur + 1) * buckets), \
                slice(k * buckets, (k + 1) * buckets)
            for stat, batch in ((pos, batch_pos), (neg, batch_neg)):
                stat[total] -= stat[slot]            # drop the batch k steps ago
                stat[slot] = batch
                stat[total] += batch
            pos[-1] += 1            # fluid 1.8 counts the batches in both tensors
            neg[-1] += 1
            total_pos, total_neg = pos[total], neg[total]
        auc = _trapezoid_auc(total_pos, total_neg)
        return {"AUC": np.array([auc], np.float64),
                "StatPosOut": pos.reshape(np.shape(StatPos)),
                "StatNegOut": neg.reshape(np.shape(StatNeg))}
