"""sample_logits (under sampled_softmax_with_cross_entropy): samples, probabilities, logits
against a NumPy reference, accidental hits, seeds, and a numeric gradient check."""
import numpy as np
import pytest

from .test_sequence import check_grad, run

RNG = np.random.default_rng(8)
N, K = 4, 20
LOGITS = RNG.uniform(-2, 2, (N, K)).astype("float32")
LABELS = np.array([[3], [0], [3], [17]], "int64")
OUTS = ("Samples", "Probabilities", "SampledLogits", "SampledLabels")


def _p(s):
    return np.log((s + 2.0) / (s + 1.0)) / np.log(K + 1.0)


@pytest.mark.parametrize("uniq", [True, False])
def test_matches_reference(uniq):
    attrs = {"num_samples": 6, "seed": 11, "uniq": uniq, "remove_accidental_hits": True}
    samples, probs, logits, labels = (np.asarray(a) for a in run(
        "sample_logits", {"Logits": (LOGITS, None), "Labels": (LABELS, None)}, attrs, OUTS))
    assert samples.shape == (N, 7)
    np.testing.assert_array_equal(samples[:, 0], LABELS[:, 0])
    assert (samples[:, 1:] == samples[:1, 1:]).all()            # negatives shared by the batch
    if uniq:
        assert len(set(samples[0, 1:])) == 6
        ratio = np.log1p(-probs) / np.log1p(-_p(samples))       # = the number of tries
        np.testing.assert_allclose(ratio, ratio[0, 0], rtol=1e-4)
        assert ratio[0, 0] >= 6 - 1e-3
    else:
        np.testing.assert_allclose(probs, _p(samples) * 6, rtol=1e-5)
    want = np.take_along_axis(LOGITS, samples, 1) - np.log(probs.astype(np.float64))
    hit = samples[:, 1:] == LABELS
    want[:, 1:] -= 1e20 * hit
    np.testing.assert_allclose(logits, want, rtol=1e-5)
    np.testing.assert_array_equal(labels, np.zeros((N, 1)))


def test_customized_samples_and_seeds():
    samples = np.array([[3, 1, 2]] * N, "int64")
    samples[:, 0] = LABELS[:, 0]
    probs = np.full((N, 3), 0.25, "float32")
    out = run("sample_logits", {"Logits": (LOGITS, None), "Labels": (LABELS, None),
                                "CustomizedSamples": (samples, None),
                                "CustomizedProbabilities": (probs, None)},
              {"num_samples": 2, "use_customized_samples": True,
               "remove_accidental_hits": False}, ("SampledLogits",))
    np.testing.assert_allclose(np.asarray(out[0]),
                               np.take_along_axis(LOGITS, samples, 1) - np.log(0.25), rtol=1e-5)

    def negatives(seed):
        return np.asarray(run("sample_logits", {"Logits": (LOGITS, None),
                                                "Labels": (LABELS, None)},
                              {"num_samples": 10, "seed": seed}, ("Samples",))[0])[0, 1:]
    np.testing.assert_array_equal(negatives(5), negatives(5))
    assert not np.array_equal(negatives(5), negatives(6))


def test_grad():
    check_grad("sample_logits", {"Logits": (LOGITS, None), "Labels": (LABELS, None)}, "Logits",
               {"num_samples": 5, "seed": 3, "remove_accidental_hits": False},
               out="SampledLogits")
