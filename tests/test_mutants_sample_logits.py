"""Tests written from the mutation run of ``fluidlite/ops/sample_logits.py`` (issue 28, round
11): the log-uniform sampler's distribution (frequencies of many draws against P(k)), the uniq
probability for one negative (one try: exactly P), all classes drawn (num_samples == K), fluid's
default attributes (uniq, remove_accidental_hits, seed 0 = fresh negatives), two true labels
per row, customized samples given as int32 / float32, the auxiliary outputs LogitsDim /
LabelsDim, shape inference and the gradient's dtype.

References: fluid 1.8's sample_logits_op.{cc,h} and math/sampler.cc (LogUniformSampler:
P(k) = log((k + 2) / (k + 1)) / log(K + 1); sample_prob.h: with uniq the probability is
1 - (1 - P)^tries; OpMaker defaults uniq = remove_accidental_hits = true,
use_customized_samples = false, seed 0), checked as distribution properties, not exact draws."""
import numpy as np
import pytest

from fluidlite.core.dtypes import VarType
from fluidlite.core.registry import VarSpec, get_op_def

OP = get_op_def("sample_logits")


def p_log_uniform(s, k):
    return np.log((s + 2.0) / (s + 1.0)) / np.log(k + 1.0)


def test_log_uniform_frequencies():
    k, s = 5, 40000
    logits = np.zeros((1, k))
    got = OP.forward(logits, np.array([[0]]), num_samples=s, seed=7, uniq=False,
                     remove_accidental_hits=False)
    neg = got["Samples"][0, 1:]
    freq = np.bincount(neg, minlength=k) / s
    np.testing.assert_allclose(freq, p_log_uniform(np.arange(k), k), atol=0.012)
    # without uniq: Probabilities = P * num_samples
    np.testing.assert_allclose(got["Probabilities"][0], p_log_uniform(got["Samples"][0], k) * s,
                               rtol=1e-12)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_uniq_with_one_negative_is_one_try(dt):
    k = 30
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((3, k)).astype(dt)
    labels = np.array([[4, 9], [0, 1], [29, 2]], np.int64)        # two true labels per row
    got = OP.forward(logits, labels, num_samples=1, seed=3, uniq=True,
                     remove_accidental_hits=False)
    samples = got["Samples"]
    assert samples.shape == (3, 3) and samples.dtype == np.int64
    np.testing.assert_array_equal(samples[:, :2], labels)
    want_p = p_log_uniform(samples, k)            # 1 - (1 - P)^1
    np.testing.assert_allclose(got["Probabilities"], want_p, rtol=1e-6)
    assert got["Probabilities"].dtype == dt and got["SampledLogits"].dtype == dt
    want = np.take_along_axis(logits.astype(np.float64), samples, 1) - np.log(want_p)
    np.testing.assert_allclose(got["SampledLogits"], want, rtol=1e-5)
    np.testing.assert_array_equal(got["SampledLabels"], [[0, 1]] * 3)
    assert got["SampledLabels"].dtype == np.int64
    np.testing.assert_array_equal(got["LogitsDim"], [3, k])
    np.testing.assert_array_equal(got["LabelsDim"], [3, 2])
    assert got["LogitsDim"].dtype == np.int64 and got["LabelsDim"].dtype == np.int64


def test_all_classes_and_too_many():
    logits = np.zeros((2, 4))
    got = OP.forward(logits, np.array([[1], [2]]), num_samples=4, seed=5)
    assert sorted(got["Samples"][0, 1:].tolist()) == [0, 1, 2, 3]
    with pytest.raises(ValueError, match=r"^sample_logits: num_samples \(5\) exceeds the 4 "
                                         r"classes, so uniq sampling cannot finish$"):
        OP.forward(logits, np.array([[1], [2]]), num_samples=5, seed=5)


def test_fluid_defaults_uniq_hits_and_fresh_seed():
    k = 1000
    logits = np.zeros((2, k))
    labels = np.arange(2).reshape(2, 1)
    a = OP.forward(logits, labels, num_samples=60)
    b = OP.forward(logits, labels, num_samples=60)
    assert not np.array_equal(a["Samples"], b["Samples"])     # seed 0: fresh negatives
    for got in (a, b):
        neg = got["Samples"][0, 1:]
        assert len(set(neg.tolist())) == 60                     # uniq by default
        # accidental hits (class 0 or 1 is very likely among 60 log-uniform draws) get -1e20
        hit = got["Samples"][:, 1:] == labels
        assert hit.any()
        assert (got["SampledLogits"][:, 1:][hit] < -1e19).all()
        assert (got["SampledLogits"][:, 1:][~hit] > -1e3).all()


def test_customized_samples_given_as_int32_and_float32():
    logits = np.random.default_rng(2).standard_normal((2, 6))
    samples = np.array([[1, 3, 4], [0, 5, 1]], np.int32)
    probs = np.array([[0.3, 0.2, 0.1], [0.7, 0.15, 0.05]], np.float32)
    got = OP.forward(logits, np.array([[1], [0]]), samples, probs, num_samples=2,
                     use_customized_samples=True, remove_accidental_hits=False)
    assert got["Samples"].dtype == np.int64
    want = np.take_along_axis(logits, samples.astype(np.int64), 1) - np.log(
        probs.astype(np.float64))
    np.testing.assert_allclose(got["SampledLogits"], want, rtol=1e-14)


def test_infer():
    spec = OP.infer(VarSpec((-1, 50), "float32"), VarSpec((-1, 2), "int64"), None, None,
                    num_samples=7)
    assert {k: (v.shape, v.dtype) for k, v in spec.items()} == {
        "Samples": ((-1, 9), VarType.INT64), "Probabilities": ((-1, 9), VarType.FP32),
        "SampledLogits": ((-1, 9), VarType.FP32), "SampledLabels": ((-1, 2), VarType.INT64),
        "LogitsDim": ((2,), VarType.INT64), "LabelsDim": ((2,), VarType.INT64)}
    spec = OP.infer(VarSpec((4, 50), "float64"), VarSpec((4,), "int64"), None, None,
                    num_samples=3)
    assert spec["Samples"].shape == (4, 4) and spec["SampledLabels"].shape == (4, 1)


def test_grad_dtype_and_repeated_samples():
    logits = np.zeros((2, 5), np.float32)
    samples = np.array([[1, 1, 3], [0, 4, 4]], np.int64)
    d = OP.backward(logits, samples, np.arange(6, dtype=np.float32).reshape(2, 3))["Logits"]
    assert d.dtype == np.float32
    np.testing.assert_array_equal(d, [[0, 1, 0, 2, 0], [3, 0, 0, 0, 9]])
