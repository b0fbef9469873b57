"""nce op: cost against a NumPy reference of fluid 1.8's formula for each sampler, seeds
(fixed seed -> the same negatives every run), and numeric gradient checks."""
import numpy as np
import pytest

from .test_sequence import check_grad, run

RNG = np.random.default_rng(4)
N, D, C = 5, 3, 7
X = RNG.uniform(-1, 1, (N, D)).astype("float32")
W = RNG.uniform(-1, 1, (C, D)).astype("float32")
B = RNG.uniform(-0.5, 0.5, (C, 1)).astype("float32")
LABEL = RNG.integers(0, C, (N, 1)).astype("int64")
SW = RNG.uniform(0.5, 2, (N, 1)).astype("float32")
PROBS = np.array([.3, .1, .1, .2, .1, .1, .1], "float32")


def _reference(labels, num_neg, p):
    z = np.einsum("nd,njd->nj", X.astype(np.float64), W[labels]) + B[labels, 0]
    o = 1 / (1 + np.exp(-z))
    q = p(labels) * num_neg
    cost = -np.log(o[:, :1] / (o[:, :1] + q[:, :1])).sum(1) - \
        np.log(q[:, 1:] / (o[:, 1:] + q[:, 1:])).sum(1)
    return o, (cost * SW[:, 0]).reshape(-1, 1)


SAMPLERS = {0: lambda l: np.full(l.shape, 1 / C),
            1: lambda l: np.log((l + 2.0) / (l + 1.0)) / np.log(C + 1.0),
            2: lambda l: PROBS.astype(np.float64)[l]}


def _inputs(sampler):
    inputs = {"Input": (X, None), "Label": (LABEL, None), "Weight": (W, None),
              "Bias": (B, None), "SampleWeight": (SW, None)}
    if sampler == 2:
        inputs["CustomDistProbs"] = (PROBS, None)
    return inputs


@pytest.mark.parametrize("sampler", [0, 1, 2])
def test_cost_matches_reference(sampler):
    attrs = {"num_total_classes": C, "num_neg_samples": 4, "sampler": sampler, "seed": 9}
    cost, logits, labels = run("nce", _inputs(sampler), attrs,
                               outs=("Cost", "SampleLogits", "SampleLabels"))
    labels = np.asarray(labels)
    assert labels.shape == (N, 5) and labels.dtype == np.int64
    np.testing.assert_array_equal(labels[:, 0], LABEL[:, 0])       # true labels first
    assert labels.min() >= 0 and labels.max() < C
    o, want = _reference(labels, 4, SAMPLERS[sampler])
    np.testing.assert_allclose(np.asarray(logits), o, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(cost), want, rtol=1e-5)


def test_custom_neg_classes_are_every_rows_negatives():
    attrs = {"num_total_classes": C, "num_neg_samples": 2, "custom_neg_classes": [1, 5]}
    cost, labels = run("nce", _inputs(0), attrs, outs=("Cost", "SampleLabels"))
    np.testing.assert_array_equal(np.asarray(labels)[:, 1:], [[1, 5]] * N)
    np.testing.assert_allclose(np.asarray(cost),
                               _reference(np.asarray(labels), 2, SAMPLERS[0])[1], rtol=1e-5)


def test_seed_fixes_the_negatives_and_zero_draws_fresh_ones():
    def negatives(seed, k=40):
        attrs = {"num_total_classes": 1000, "num_neg_samples": k, "seed": seed}
        ins = dict(_inputs(0), Weight=(np.zeros((1000, D), "float32"), None),
                   Bias=(np.zeros((1000, 1), "float32"), None))
        return np.asarray(run("nce", ins, attrs, outs=("SampleLabels",))[0])[:, 1:]
    np.testing.assert_array_equal(negatives(3), negatives(3))
    assert not np.array_equal(negatives(3), negatives(4))
    assert not np.array_equal(negatives(0), negatives(0))


@pytest.mark.parametrize("wrt", ["Input", "Weight", "Bias"])
@pytest.mark.parametrize("sampler", [0, 1])
def test_grad(wrt, sampler):
    attrs = {"num_total_classes": C, "num_neg_samples": 3, "sampler": sampler, "seed": 5}
    check_grad("nce", _inputs(sampler), wrt, attrs, out="Cost")
