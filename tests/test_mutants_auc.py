"""Tests written from the mutation run of ``fluidlite/ops/auc.py`` (issue 28, round 11): the
auc op's AUC against the rank statistic of the bucketed scores, probabilities exactly 0 and 1
(the first and last buckets), one class only, a single pair, ties in bucket 0, the positive
probability taken from the last column of a 1- or 3-column Predict, the bucket of a float32
probability computed in float32 (as fluid's kernel), fluid's default attributes and the checks
with their messages.

References: fluid 1.8's AucKernel (paddle/fluid/operators/metrics/auc_op.h: bucket
``(uint32) (predict * num_thresholds)`` in Predict's type T, a row with label > 0 counts as
positive and == 0 as negative, calcAuc's trapezoids normalised by the totals and 0 when a class
is absent; defaults curve "ROC", num_thresholds 4095, slide_steps 1) and, independently, the
Mann-Whitney statistic of the bucket indices: AUC = P(b_pos > b_neg) + P(b_pos == b_neg) / 2."""
import numpy as np
import pytest

from fluidlite.core.dtypes import VarType
from fluidlite.core.registry import VarSpec, get_op_def

AUC = get_op_def("auc")


def mann_whitney(bins, label):
    pos, neg = bins[label > 0], bins[label == 0]
    if pos.size == 0 or neg.size == 0:
        return 0.0
    return float(np.mean(pos[:, None] > neg[None, :])
                 + 0.5 * np.mean(pos[:, None] == neg[None, :]))


def run(pred, label, t=10, stats=None):
    size = t + 1
    zero = np.zeros(size, np.int64) if stats is None else stats
    return AUC.forward(pred, np.asarray(label, np.int64).reshape(-1, 1), zero, zero.copy(),
                       num_thresholds=t, slide_steps=0)


@pytest.mark.parametrize("width", [1, 2, 3])
def test_auc_is_the_rank_statistic_of_the_buckets(width):
    rng = np.random.default_rng(width)
    n = 60
    label = rng.integers(0, 2, n)
    q = rng.uniform(0, 1, n)
    q[:6] = [0.0, 0.0, 1.0, 1.0, 0.05, 0.95]        # the first and last buckets, both classes
    label[:6] = [0, 1, 0, 1, 0, 1]
    pred = np.concatenate([rng.uniform(0, 1, (n, width - 1)), q[:, None]], axis=1)
    got = run(pred, label)
    bins = (q * 10).astype(np.int64)
    np.testing.assert_allclose(got["AUC"], [mann_whitney(bins, label)], rtol=1e-12)
    assert got["AUC"].dtype == np.float64 and got["AUC"].shape == (1,)
    np.testing.assert_array_equal(got["StatPosOut"], np.bincount(bins[label == 1],
                                                                 minlength=11))
    np.testing.assert_array_equal(got["StatNegOut"], np.bincount(bins[label == 0],
                                                                 minlength=11))


def test_auc_edge_cases():
    # one class only: 0, as fluid's calcAuc
    assert run(np.array([[0.2], [0.9]]), [1, 1])["AUC"].tolist() == [0.0]
    assert run(np.array([[0.2], [0.9]]), [0, 0])["AUC"].tolist() == [0.0]
    # one positive and one negative
    assert run(np.array([[0.2], [0.9]]), [0, 1])["AUC"].tolist() == [1.0]
    assert run(np.array([[0.2], [0.9]]), [1, 0])["AUC"].tolist() == [0.0]
    # a tie in bucket 0 (and in the last bucket) is half a pair
    assert run(np.array([[0.0], [0.01]]), [1, 0])["AUC"].tolist() == [0.5]
    assert run(np.array([[1.0], [1.0]]), [1, 0])["AUC"].tolist() == [0.5]
    # labels other than 0 and > 0 are neither class
    got = run(np.array([[0.2], [0.9], [0.5]]), [0, 1, -1])
    assert got["StatPosOut"].sum() == 1 and got["StatNegOut"].sum() == 1


def test_float32_bucket_is_computed_in_float32():
    """float32(0.7) * 10 is 7.0 in float32 (fluid's bucket 7) but 6.99999988 in float64."""
    pred = np.array([[0.3, 0.7], [0.1, 0.9], [0.8, 0.2]], np.float32)
    got = run(pred, [1, 1, 0])
    assert np.nonzero(got["StatPosOut"])[0].tolist() == [7, 9]
    got64 = run(pred.astype(np.float64), [1, 1, 0])
    assert np.nonzero(got64["StatPosOut"])[0].tolist() == [6, 8]


def test_fluid_default_attributes():
    """curve 'ROC', num_thresholds 4095, slide_steps 1: StatPos holds 2 * 4096 + 1 values."""
    size = 2 * 4096 + 1
    pred = np.array([[0.5, 0.25], [0.5, 0.75]])
    got = AUC.forward(pred, np.array([[0], [1]]), np.zeros(size, np.int64),
                      np.zeros(size, np.int64))
    assert got["AUC"].tolist() == [1.0]
    b0, b1 = int(0.25 * 4095), int(0.75 * 4095)
    assert got["StatNegOut"][4096 + b0] == 1 and got["StatPosOut"][4096 + b1] == 1
    assert got["StatPosOut"][-1] == 1 and got["StatNegOut"][-1] == 1
    spec = AUC.infer(VarSpec((-1, 2), "float32"), VarSpec((-1, 1), "int64"),
                     VarSpec((size,), "int64"), VarSpec((size,), "int64"))
    assert spec["AUC"].shape == (1,) and spec["AUC"].dtype == VarType.FP64
    assert spec["StatPosOut"].shape == (size,) and spec["StatNegOut"].shape == (size,)


def test_checks():
    with pytest.raises(ValueError, match=r"^auc: only curve='ROC' is computed \(as fluid's "
                                         r"kernel\), got 'PR'$"):
        AUC.infer(VarSpec((-1, 2), "float32"), VarSpec((-1, 1), "int64"),
                  VarSpec((11,), "int64"), VarSpec((11,), "int64"), curve="PR")
    with pytest.raises(ValueError, match=r"^auc: Predict must be \[N, C\] probabilities, got "
                                         r"shape \[4\]$"):
        AUC.infer(VarSpec((4,), "float32"), VarSpec((-1, 1), "int64"),
                  VarSpec((11,), "int64"), VarSpec((11,), "int64"))
    for bad, lo, hi in (([-0.1, 0.5], "-0.1", "0.5"), ([0.5, 1.5], "0.5", "1.5"),
                        ([0.2, 2.5], "0.2", "2.5")):
        with pytest.raises(ValueError, match=rf"^auc: the positive-class probabilities must lie "
                                             rf"in \[0, 1\], got values in \[{lo}, {hi}\]$"):
            run(np.array(bad).reshape(-1, 1), [0, 1])
    run(np.array([[0.0], [1.0]]), [0, 1])               # the ends are valid
    with pytest.raises(ValueError, match=r"^auc: with slide_steps=2 StatPos must hold "
                                         r"\(slide_steps \+ 1\) \* \(num_thresholds \+ 1\) \+ 1 "
                                         r"= 34 values, got 33$"):
        AUC.forward(np.array([[0.5]]), np.array([[1]]), np.zeros(33, np.int64),
                    np.zeros(33, np.int64), num_thresholds=10, slide_steps=2)
