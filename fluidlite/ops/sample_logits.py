"""``sample_logits``: the op under fluid 1.8's ``layers.sampled_softmax_with_cross_entropy``
(which feeds its SampledLogits and SampledLabels to ``softmax_with_cross_entropy``).

Samples [N, T + S] holds each row's T true labels, then S negatives shared by the whole batch,
drawn from fluid's log-uniform sampler, P(k) = log((k + 2) / (k + 1)) / log(K + 1). With
``uniq`` the negatives are distinct (drawn until S distinct ones were seen, in ``tries``
draws) and every sample's probability is 1 - (1 - P)^tries; without, S draws with P * S.
SampledLogits = Logits[i, Samples[i]] - log(Probabilities); with ``remove_accidental_hits``
a negative equal to one of the row's true labels gets -1e20 more. SampledLabels = 0..T-1.
``use_customized_samples`` takes Samples and Probabilities from CustomizedSamples /
CustomizedProbabilities instead. Seeds as fluid: the sampler is re-created at each run from
``seed`` (non-zero: the same negatives every step; 0: fresh ones); the stream is NumPy's.
"""
from __future__ import annotations

import numpy as np

from ..core.registry import OpDef, VarSpec, register


def _log_uniform(rng: np.random.Generator, k: int, n: int) -> np.ndarray:
    u = rng.random(n)
    return (np.exp(u * np.log(k + 1.0)) - 1.0).astype(np.int64) % k


def _p(samples: np.ndarray, k: int) -> np.ndarray:
    return np.log((samples + 2.0) / (samples + 1.0)) / np.log(k + 1.0)


@register
class SampleLogits(OpDef):
    """See the module docstring; dLogits[i, Samples[i, j]] += dSampledLogits[i, j]."""
    type = "sample_logits"
    inputs = ("Logits", "Labels", "CustomizedSamples?", "CustomizedProbabilities?")
    outputs = ("Samples", "Probabilities", "SampledLogits", "SampledLabels",
               "LogitsDim?", "LabelsDim?")
    grad_uses = ("Logits", "Samples")

    def infer(self, Logits, Labels, CustomizedSamples, CustomizedProbabilities, *,
              num_samples=1, **_):
        t = Labels.shape[1] if len(Labels.shape) > 1 else 1
        width = (Logits.shape[0], t + num_samples)
        return {"Samples": VarSpec(width, "int64"), "Probabilities": VarSpec(width, Logits.dtype),
                "SampledLogits": VarSpec(width, Logits.dtype),
                "SampledLabels": VarSpec((Logits.shape[0], t), "int64"),
                "LogitsDim": VarSpec((2,), "int64"), "LabelsDim": VarSpec((2,), "int64")}

    def forward(self, Logits, Labels, CustomizedSamples=None, CustomizedProbabilities=None, *,
                num_samples=1, seed=0, uniq=True, remove_accidental_hits=True,
                use_customized_samples=False):
        n, k = Logits.shape
        true = Labels.reshape(n, -1).astype(np.int64)
        t = true.shape[1]
        if use_customized_samples:
            samples = np.asarray(CustomizedSamples, np.int64)
            probs = np.asarray(CustomizedProbabilities, np.float64)
        else:
            rng = np.random.default_rng(seed if seed else None)
            if uniq:
                if num_samples > k:
                    raise ValueError(f"sample_logits: num_samples ({num_samples}) exceeds the "
                                     f"{k} classes, so uniq sampling cannot finish")
                seen, order, tries = set(), [], 0
                while len(order) < num_samples:
                    for s in _log_uniform(rng, k, num_samples):
                        tries += 1
                        if s not in seen:
                            seen.add(int(s))
                            order.append(int(s))
                            if len(order) == num_samples:
                                break
                neg = np.array(order, np.int64)
            else:
                neg = _log_uniform(rng, k, num_samples)
            samples = np.concatenate([true, np.tile(neg, (n, 1))], axis=1)
            p = _p(samples, k)
            probs = -np.expm1(tries * np.log1p(-p)) if uniq else p * num_samples
        logits = np.take_along_axis(Logits, samples, axis=1).astype(np.float64) - np.log(probs)
        if remove_accidental_hits:
            hit = (samples[:, t:, None] == true[:, None, :]).any(-1)
            logits[:, t:] -= 1e20 * hit
        return {"Samples": samples, "Probabilities": probs.astype(Logits.dtype),
                "SampledLogits": logits.astype(Logits.dtype),
                "SampledLabels": np.tile(np.arange(t, dtype=np.int64), (n, 1)),
                "LogitsDim": np.array(Logits.shape, np.int64),
                "LabelsDim": np.array(true.shape, np.int64)}

    def backward(self, Logits, Samples, dSampledLogits, dSamples=None, dProbabilities=None,
                 dSampledLabels=None, dLogitsDim=None, dLabelsDim=None, **_):
        d = np.zeros(Logits.shape, np.float64)
        rows = np.repeat(np.arange(Logits.shape[0]), Samples.shape[1])
        np.add.at(d, (rows, Samples.reshape(-1)), dSampledLogits.reshape(-1))
        return {"Logits": d.astype(Logits.dtype)}
