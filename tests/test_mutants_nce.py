"""Tests written from the mutation run of ``fluidlite/ops/nce.py`` (issue 28, round 11): the
three samplers' distributions (frequencies of many draws against P), fluid's default attributes
(10 negatives, uniform sampler, seed 0 = fresh negatives), the label range and sampler checks
with their messages, the cost without SampleWeight, two true labels per row, shape inference,
and the gradients under the custom sampler (against central differences of the cost) with
float32 dtypes kept.

References: fluid 1.8's nce_op.{cc,h} and math/sampler.cc (UniformSampler over
[0, num_total_classes), LogUniformSampler P(k) = log((k + 2) / (k + 1)) / log(K + 1),
CustomSampler P from CustomDistProbs; OpMaker defaults num_neg_samples 10, sampler 0, seed 0);
the cost formula of the module docstring checked by central differences, not re-derived."""
import numpy as np
import pytest

from fluidlite.core.dtypes import VarType
from fluidlite.core.registry import VarSpec, get_op_def

NCE = get_op_def("nce")


def _forward(x, label, w, b=None, sw=None, probs=None, **attrs):
    return NCE.forward(x, label, w, b, sw, probs, **attrs)


@pytest.mark.parametrize("sampler", [0, 1, 2])
def test_sampler_frequencies(sampler):
    k, s = 6, 30000
    x = np.zeros((1, 2))
    w = np.zeros((k, 2))
    probs = np.array([0.05, 0.4, 0.1, 0.05, 0.3, 0.1])
    got = _forward(x, np.array([[0]]), w, probs=probs if sampler == 2 else None,
                   num_total_classes=k, num_neg_samples=s, sampler=sampler, seed=9)
    neg = got["SampleLabels"][0, 1:]
    assert got["SampleLabels"].dtype == np.int64
    freq = np.bincount(neg, minlength=k) / s
    want = {0: np.full(k, 1 / k),
            1: np.log((np.arange(k) + 2.0) / (np.arange(k) + 1.0)) / np.log(k + 1.0),
            2: probs}[sampler]
    np.testing.assert_allclose(freq, want, atol=0.012)


def test_fluid_defaults():
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((3, 4)), rng.standard_normal((500, 4))
    a = _forward(x, np.array([[1], [2], [0]]), w, num_total_classes=500)
    b = _forward(x, np.array([[1], [2], [0]]), w, num_total_classes=500)
    assert a["SampleLabels"].shape == (3, 11)                   # 10 negatives
    assert not np.array_equal(a["SampleLabels"], b["SampleLabels"])   # seed 0: fresh
    # the uniform sampler: the classes above the log-uniform head are as likely as the head
    many = _forward(np.zeros((1, 4)), np.array([[0]]), w, num_total_classes=500,
                    num_neg_samples=4000)["SampleLabels"][0, 1:]
    assert 0.4 < np.mean(many >= 250) < 0.6


def test_label_range_and_sampler_checks():
    x, w = np.ones((2, 3)), np.ones((5, 3))
    _forward(x, np.array([[0], [4]]), w, num_total_classes=5, num_neg_samples=2, seed=1)
    for bad in ([[0], [5]], [[-1], [2]]):
        with pytest.raises(ValueError, match=r"^nce: labels must lie in \[0, 5\)$"):
            _forward(x, np.array(bad), w, num_total_classes=5, num_neg_samples=2, seed=1)
    with pytest.raises(ValueError, match=r"^nce: sampler 2 \(custom_dist\) needs the "
                                         r"CustomDistProbs input$"):
        _forward(x, np.array([[0], [1]]), w, num_total_classes=5, num_neg_samples=2,
                 sampler=2, custom_neg_classes=[3, 4])


def test_infer_checks_of_fluid():
    """fluid 1.8's NCEOp::InferShape: num_total_classes == Weight's first dim, and
    custom_neg_classes (when given) holds num_neg_samples classes."""
    specs = (VarSpec((5, 8), "float32"), VarSpec((5, 1), "int64"))
    with pytest.raises(ValueError, match=r"^nce: num_total_classes \(50\) must equal the first "
                                         r"dim of Weight \(shape \[100, 8\]\)$"):
        NCE.infer(*specs, VarSpec((100, 8), "float32"), None, None, None, None, None,
                  num_total_classes=50)
    NCE.infer(*specs, VarSpec((-1, 8), "float32"), None, None, None, None, None,
              num_total_classes=50)
    with pytest.raises(ValueError, match=r"^nce: num_total_classes \(5\) must equal the first "
                                         r"dim of Weight \(shape \[0, 8\]\)$"):
        NCE.infer(*specs, VarSpec((0, 8), "float32"), None, None, None, None, None,
                  num_total_classes=5)
    with pytest.raises(ValueError, match=r"^nce: custom_neg_classes holds 2 classes but "
                                         r"num_neg_samples is 10; they must be equal$"):
        NCE.infer(*specs, VarSpec((100, 8), "float32"), None, None, None, None, None,
                  num_total_classes=100, custom_neg_classes=[1, 2])


def test_cost_without_sample_weight_and_two_true_labels():
    rng = np.random.default_rng(4)
    x, w, b = rng.standard_normal((2, 3)), rng.standard_normal((7, 3)), rng.standard_normal(7)
    label = np.array([[1, 2], [0, 6]])
    got = _forward(x, label, w, b, num_total_classes=7, num_neg_samples=3,
                   custom_neg_classes=[3, 4, 5])
    labels = got["SampleLabels"]
    np.testing.assert_array_equal(labels, [[1, 2, 3, 4, 5], [0, 6, 3, 4, 5]])
    o = 1 / (1 + np.exp(-(np.einsum("nd,njd->nj", x, w[labels]) + b[labels])))
    q = 3 / 7                                  # uniform P * num_neg (3 custom negatives)
    want = -(np.log(o[:, :2] / (o[:, :2] + q)).sum(1) + np.log(q / (o[:, 2:] + q)).sum(1))
    np.testing.assert_allclose(got["Cost"][:, 0], want, rtol=1e-12)
    np.testing.assert_allclose(got["SampleLogits"], o, rtol=1e-12)


def test_infer():
    spec = NCE.infer(VarSpec((5, 8), "float32"), VarSpec((5, 2), "int64"),
                     VarSpec((100, 8), "float32"), None, None, None, None, None)
    assert {k: (v.shape, v.dtype) for k, v in spec.items()} == {
        "Cost": ((5, 1), VarType.FP32), "SampleLogits": ((5, 12), VarType.FP32),
        "SampleLabels": ((5, 12), VarType.INT64)}
    spec = NCE.infer(VarSpec((5, 8), "float64"), VarSpec((5,), "int64"),
                     VarSpec((100, 8), "float64"), None, None, None, None, None,
                     num_neg_samples=4)
    assert spec["SampleLogits"].shape == (5, 5)
    spec = NCE.infer(VarSpec((5, 8), "float64"), VarSpec((5, 1), "int64"),
                     VarSpec((100, 8), "float64"), None, None, None, None, None,
                     num_neg_samples=2, custom_neg_classes=[1, 2])
    assert spec["SampleLabels"].shape == (5, 3)


@pytest.mark.parametrize("with_weight", [False, True])
def test_grad_with_the_custom_sampler(with_weight):
    rng = np.random.default_rng(6)
    k = 6
    x, w, b = rng.standard_normal((3, 4)), rng.standard_normal((k, 4)), rng.standard_normal(k)
    label = np.array([[1], [0], [5]])
    sw = rng.uniform(0.5, 2, (3, 1)) if with_weight else None
    probs = np.array([0.05, 0.4, 0.1, 0.05, 0.3, 0.1])
    attrs = dict(num_total_classes=k, num_neg_samples=3, sampler=2,
                 custom_neg_classes=[2, 3, 4])
    dcost = rng.standard_normal((3, 1))

    def loss(x_, w_, b_):
        return float((_forward(x_, label, w_, b_, sw, probs, **attrs)["Cost"] * dcost).sum())
    fwd = _forward(x, label, w, b, sw, probs, **attrs)
    g = NCE.backward(x, label, w, b, sw, probs, fwd["SampleLogits"], fwd["SampleLabels"],
                     dcost, **attrs)
    eps = 1e-6
    for name, arr in (("Input", x), ("Weight", w), ("Bias", b)):
        num = np.zeros_like(arr)
        for i in np.ndindex(arr.shape):
            hi, lo = arr.copy(), arr.copy()
            hi[i] += eps
            lo[i] -= eps
            args = {"Input": (hi, w, b), "Weight": (x, hi, b), "Bias": (x, w, hi)}[name]
            args_lo = {"Input": (lo, w, b), "Weight": (x, lo, b), "Bias": (x, w, lo)}[name]
            num[i] = (loss(*args) - loss(*args_lo)) / (2 * eps)
        np.testing.assert_allclose(g[name], num, rtol=1e-5, atol=1e-8, err_msg=name)
    # float32 in, float32 gradients out
    f = lambda a: a.astype(np.float32)          # noqa: E731
    fwd32 = _forward(f(x), label, f(w), f(b), None, probs, **attrs)
    g32 = NCE.backward(f(x), label, f(w), f(b), None, probs, fwd32["SampleLogits"],
                       fwd32["SampleLabels"], f(dcost), **attrs)
    assert {n: g32[n].dtype for n in g32} == {"Input": np.float32, "Weight": np.float32,
                                              "Bias": np.float32}
    assert fwd32["Cost"].dtype == np.float32 and fwd32["SampleLogits"].dtype == np.float32
