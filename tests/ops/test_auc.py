"""auc op and fluid.layers.auc: global AUC equals fluid.metrics.Auc on all batches so far (the
same buckets) and the exact rank AUC up to bucketing; the sliding AUC covers the last
``slide_steps`` batches; bad arguments are named."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.testing import OpTest

RNG = np.random.default_rng(5)


def batches(n, size=40):
    out = []
    for _ in range(n):
        y = RNG.integers(0, 2, (size, 1)).astype("int64")
        q = np.clip(0.35 * y[:, 0] + RNG.uniform(0, 0.65, size), 0, 1)
        out.append((np.stack([1 - q, q], 1).astype("float32"), y))
    return out


def exact_auc(p, y):
    """Mann-Whitney: P(score of a positive > score of a negative)."""
    pos, neg = p[y == 1], p[y == 0]
    return float(np.mean(pos[:, None] > neg[None, :]) + 0.5 * np.mean(pos[:, None] == neg))


def test_global_and_sliding_auc():
    p = fluid.data("p", [None, 2], "float32")
    y = fluid.data("y", [None, 1], "int64")
    auc, batch_auc, stats = fluid.layers.auc(p, y, num_thresholds=4095, slide_steps=2)
    assert [s.shape for s in stats] == [(3 * 4096 + 1,)] * 2 + [(1, 4096)] * 2
    assert all(s.persistable for s in stats)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(fluid.default_startup_program())
    ref = fluid.metrics.Auc(num_thresholds=4095)
    data = batches(4)
    for i, (pv, yv) in enumerate(data):
        got, got_batch = exe.run(feed={"p": pv, "y": yv}, fetch_list=[auc, batch_auc])
        ref.update(pv, yv)
        np.testing.assert_allclose(got, [ref.eval()], rtol=1e-12)
        window = data[max(0, i - 1):i + 1]
        last = fluid.metrics.Auc(num_thresholds=4095)
        for b in window:
            last.update(*b)
        np.testing.assert_allclose(got_batch, [last.eval()], rtol=1e-12)
    allp = np.concatenate([b[0][:, 1] for b in data])
    ally = np.concatenate([b[1][:, 0] for b in data])
    assert abs(got[0] - exact_auc(allp, ally)) < 2e-3
    assert got.dtype == np.float64


def test_op_kernel_slide_zero_and_errors():
    pv, yv = batches(1)[0]
    t = OpTest()
    t.op_type = "auc"
    t.inputs = {"Predict": pv, "Label": yv, "StatPos": np.zeros((1, 11), np.int64),
                "StatNeg": np.zeros((1, 11), np.int64)}
    t.attrs = {"num_thresholds": 10, "slide_steps": 0}
    bins = (pv[:, 1].astype(np.float64) * 10).astype(int)
    pos = np.bincount(bins[yv[:, 0] == 1], minlength=11)
    neg = np.bincount(bins[yv[:, 0] == 0], minlength=11)
    ref = fluid.metrics.Auc(num_thresholds=10)
    ref.update(pv, yv)
    t.outputs = {"AUC": np.array([ref.eval()]), "StatPosOut": pos.reshape(1, 11),
                 "StatNegOut": neg.reshape(1, 11)}
    t.check_infer()
    t.check_output()
    x = fluid.data("x", [None, 2], "float32")
    lab = fluid.data("lab", [None, 1], "int64")
    with pytest.raises(ValueError, match="curve must be 'ROC'"):
        fluid.layers.auc(x, lab, curve="PR")
    # slide_steps=0 is fluid 1.8's global AUC (issue 29, tests/test_fluid18_zoo_items.py);
    # a negative count is refused
    with pytest.raises((TypeError, ValueError), match="slide_steps"):
        fluid.layers.auc(x, lab, slide_steps=-1)


def test_op_kernel_sliding_window_counts_batches_in_both_tensors():
    """fluid 1.8's auc kernel (and test_auc_op.py): with slide_steps=k the trailing entry of
    StatPosOut and of StatNegOut both count the batches; the slot is StatPos's count mod k."""
    pv, yv = batches(1)[0]
    n, k = 10, 2
    size = (k + 1) * (n + 1) + 1
    pos_in, neg_in = np.zeros(size, np.int64), np.zeros(size, np.int64)
    pos_in[-1] = neg_in[-1] = 3                 # three batches seen: this one goes to slot 1
    t = OpTest()
    t.op_type = "auc"
    t.inputs = {"Predict": pv, "Label": yv, "StatPos": pos_in, "StatNeg": neg_in}
    t.attrs = {"num_thresholds": n, "slide_steps": k}
    bins = (pv[:, 1] * np.float32(n)).astype(int)
    pos, neg = pos_in.copy(), neg_in.copy()
    for stat, lab in ((pos, 1), (neg, 0)):
        counts = np.bincount(bins[yv[:, 0] == lab], minlength=n + 1)
        stat[(n + 1):2 * (n + 1)] = counts          # slot 1
        stat[k * (n + 1):(k + 1) * (n + 1)] = counts  # the window's sum
        stat[-1] = 4
    ref = fluid.metrics.Auc(num_thresholds=n)
    ref.update(pv, yv)
    t.outputs = {"AUC": np.array([ref.eval()]), "StatPosOut": pos, "StatNegOut": neg}
    t.check_output()
