"""``nce`` (fluid.layers.nce's op): noise-contrastive estimation, fluid 1.8 semantics.

Row i scores its ``num_true`` labels and ``num_neg_samples`` sampled negatives
(``SampleLabels[i]``, true labels first): o_ij = sigmoid(W[l_ij] . x_i + b[l_ij])
(``SampleLogits`` holds o, as fluid's does) and with q_ij = P_noise(l_ij) * num_neg_samples::

    Cost[i] = w_i * ( sum_true -log(o / (o + q)) + sum_neg -log(q / (o + q)) )

Samplers (attr ``sampler``): 0 uniform over [0, num_total_classes), P = 1/num_total_classes;
1 log-uniform, P(k) = log((k + 2) / (k + 1)) / log(num_total_classes + 1); 2 custom, P from
``CustomDistProbs``. ``custom_neg_classes`` (when given) are every row's negatives. Seeds follow
fluid: the sampler is re-created at each run from ``seed``, so a non-zero seed draws the same
negatives every step, and seed 0 draws fresh ones (fluid: random_device). The random stream is
NumPy's (``default_rng(seed)``), not libstdc++'s minstd_rand, so the negatives themselves
differ from Paddle's for the same seed.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..core.registry import OpDef, VarSpec, register


def _probability(labels: np.ndarray, sampler: int, num_classes: int,
                 probs: Optional[np.ndarray]) -> np.ndarray:
    labels = labels.astype(np.int64)
    if sampler == 0:
        return np.full(labels.shape, 1.0 / num_classes)
    if sampler == 1:
        return np.log((labels + 2.0) / (labels + 1.0)) / np.log(num_classes + 1.0)
    if probs is None:
        raise ValueError("nce: sampler 2 (custom_dist) needs the CustomDistProbs input")
    return np.asarray(probs, np.float64).reshape(-1)[labels]


def _sample(rows: int, n: int, sampler: int, num_classes: int,
            probs: Optional[np.ndarray], seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed if seed else None)
    if sampler == 0:
        return rng.integers(0, num_classes, (rows, n))
    if sampler == 1:        # fluid's LogUniformSampler: exp(u log(range + 1)) - 1
        u = rng.random((rows, n))
        return (np.exp(u * np.log(num_classes + 1.0)) - 1.0).astype(np.int64) % num_classes
    p = np.asarray(probs, np.float64).reshape(-1)
    return rng.choice(p.size, (rows, n), p=p / p.sum())


@register
class NCE(OpDef):
    """Cost [N, 1], SampleLogits = sigmoid scores [N, T + S], SampleLabels [N, T + S] (see the
    module docstring). With g = dCost * w: d logit = g * -(q (1 - o) / (o + q)) for true
    labels and g * o (1 - o) / (o + q) for negatives; dInput = sum_j dz_j W[l_j],
    dW[l_j] += dz_j x, dBias[l_j] += dz_j."""
    type = "nce"
    inputs = ("Input", "Label", "Weight", "Bias?", "SampleWeight?", "CustomDistProbs?",
              "CustomDistAlias?", "CustomDistAliasProbs?")
    outputs = ("Cost", "SampleLogits", "SampleLabels")
    grad_uses = ("Input", "Label", "Weight", "Bias", "SampleWeight", "CustomDistProbs",
                 "SampleLogits", "SampleLabels")
    extra_attrs = {"is_sparse": False, "remote_prefetch": False, "is_test": False,
                   "height_sections": [], "epmap": [], "table_names": []}

    def infer(self, Input, Label, Weight, Bias, SampleWeight, CustomDistProbs,
              CustomDistAlias, CustomDistAliasProbs, *, num_neg_samples=10,
              custom_neg_classes=(), num_total_classes=None, **_):
        # fluid 1.8's NCEOp::InferShape checks
        if num_total_classes is not None and Weight.shape[0] >= 0 and \
                Weight.shape[0] != num_total_classes:
            raise ValueError(f"nce: num_total_classes ({num_total_classes}) must equal the "
                             f"first dim of Weight (shape {list(Weight.shape)})")
        if custom_neg_classes and len(custom_neg_classes) != num_neg_samples:
            raise ValueError(f"nce: custom_neg_classes holds {len(custom_neg_classes)} "
                             f"classes but num_neg_samples is {num_neg_samples}; they must "
                             f"be equal")
        n = len(custom_neg_classes) if custom_neg_classes else num_neg_samples
        width = (Label.shape[1] if len(Label.shape) > 1 else 1) + n
        return {"Cost": VarSpec((Input.shape[0], 1), Input.dtype),
                "SampleLogits": VarSpec((Input.shape[0], width), Input.dtype),
                "SampleLabels": VarSpec((Input.shape[0], width), "int64")}

    def forward(self, Input, Label, Weight, Bias=None, SampleWeight=None,
                CustomDistProbs=None, CustomDistAlias=None, CustomDistAliasProbs=None, *,
                num_total_classes, num_neg_samples=10, sampler=0, seed=0,
                custom_neg_classes=()):
        rows = Input.shape[0]
        true = Label.reshape(rows, -1).astype(np.int64)
        if true.size and (true.min() < 0 or true.max() >= num_total_classes):
            raise ValueError(f"nce: labels must lie in [0, {num_total_classes})")
        if custom_neg_classes:
            neg = np.tile(np.asarray(custom_neg_classes, np.int64), (rows, 1))
        else:
            neg = _sample(rows, num_neg_samples, sampler, num_total_classes,
                          CustomDistProbs, seed)
        labels = np.concatenate([true, neg.astype(np.int64)], axis=1)
        z = np.einsum("nd,njd->nj", Input, Weight[labels])
        if Bias is not None:
            z = z + Bias.reshape(-1)[labels]
        o = 1.0 / (1.0 + np.exp(-z))
        cost = self._cost(o, labels, true.shape[1], SampleWeight, CustomDistProbs,
                          num_total_classes, num_neg_samples, sampler)
        return {"Cost": cost.astype(Input.dtype), "SampleLogits": o.astype(Input.dtype),
                "SampleLabels": labels}

    @staticmethod
    def _q(labels, probs, num_classes, num_neg, sampler):
        return _probability(labels, sampler, num_classes, probs) * num_neg

    def _cost(self, o, labels, num_true, weight, probs, num_classes, num_neg, sampler):
        q = self._q(labels, probs, num_classes, num_neg, sampler)
        terms = np.log(o + q)
        terms[:, :num_true] -= np.log(o[:, :num_true])
        terms[:, num_true:] -= np.log(q[:, num_true:])
        cost = terms.sum(1, keepdims=True)
        return cost * weight.reshape(-1, 1) if weight is not None else cost

    def backward(self, Input, Label, Weight, Bias, SampleWeight, CustomDistProbs,
                 SampleLogits, SampleLabels, dCost, dSampleLogits=None,
                 dSampleLabels=None, *, num_total_classes, num_neg_samples=10, sampler=0,
                 **_):
        o = SampleLogits.astype(np.float64)
        labels = SampleLabels.astype(np.int64)
        num_true = Label.reshape(Input.shape[0], -1).shape[1]
        q = self._q(labels, CustomDistProbs, num_total_classes, num_neg_samples, sampler)
        dz = o * (1.0 - o) / (o + q)
        dz[:, :num_true] = -q[:, :num_true] * (1.0 - o[:, :num_true]) / (o + q)[:, :num_true]
        g = dCost.reshape(-1, 1)
        if SampleWeight is not None:
            g = g * SampleWeight.reshape(-1, 1)
        dz = dz * g
        res = {"Input": np.einsum("nj,njd->nd", dz, Weight[labels]).astype(Input.dtype)}
        dW = np.zeros(Weight.shape, np.float64)
        np.add.at(dW, labels.reshape(-1), (dz[..., None] * Input[:, None, :]).reshape(
            -1, Input.shape[1]))
        res["Weight"] = dW.astype(Weight.dtype)
        if Bias is not None:
            dB = np.zeros(Bias.size, np.float64)
            np.add.at(dB, labels.reshape(-1), dz.reshape(-1))
            res["Bias"] = dB.reshape(Bias.shape).astype(Bias.dtype)
        return res
