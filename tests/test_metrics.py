"""fluid.metrics accumulators, ParallelExecutor, and the names fluidlite does not provide."""
import numpy as np
import pytest

import fluidlite as fluid


def test_accuracy_is_the_weighted_mean_of_batches():
    acc = fluid.metrics.Accuracy()
    acc.update(value=np.array([0.5]), weight=10)
    acc.update(value=1.0, weight=30)
    assert acc.eval() == pytest.approx((0.5 * 10 + 30) / 40)
    acc.reset()
    with pytest.raises(ValueError, match="no data in Accuracy"):
        acc.eval()
    with pytest.raises(ValueError, match="'value' must be a number"):
        acc.update("x", 1)


def test_precision_recall_and_composite():
    preds = np.array([[0.9], [0.8], [0.2], [0.7], [0.1]])
    labels = np.array([[1], [0], [1], [1], [0]])
    comp = fluid.metrics.CompositeMetric()
    comp.add_metric(fluid.metrics.Precision())
    comp.add_metric(fluid.metrics.Recall())
    comp.update(preds, labels)
    precision, recall = comp.eval()
    assert precision == pytest.approx(2 / 3) and recall == pytest.approx(2 / 3)
    comp.reset()
    assert comp.eval() == [0.0, 0.0]
    with pytest.raises(ValueError, match="inherit from MetricBase"):
        comp.add_metric(object())


def test_auc_matches_the_pairwise_definition():
    rng = np.random.default_rng(0)
    scores = rng.random(400)
    labels = (rng.random(400) < scores).astype(np.int64)
    auc = fluid.metrics.Auc(num_thresholds=100000)
    for part in np.array_split(np.arange(400), 4):   # streamed over batches
        auc.update(np.stack([1 - scores[part], scores[part]], axis=1), labels[part, None])
    pos, neg = scores[labels == 1], scores[labels == 0]
    pairwise = (np.mean(pos[:, None] > neg[None, :])
                + 0.5 * np.mean(pos[:, None] == neg[None, :]))
    assert auc.eval() == pytest.approx(pairwise, abs=1e-3)


def test_chunk_evaluator_and_edit_distance():
    ce = fluid.metrics.ChunkEvaluator()
    ce.update(10, 8, 6)
    ce.update(np.array([2]), np.array([4]), np.array([3]))
    p, r, f1 = ce.eval()
    assert (p, r) == (pytest.approx(9 / 12), pytest.approx(9 / 12)) and f1 == pytest.approx(0.75)
    ed = fluid.metrics.EditDistance("ed")
    ed.update(np.array([0.0, 2.0, 1.0]), 3)
    assert ed.eval() == (pytest.approx(1.0), pytest.approx(2 / 3))
    assert ed.get_config()["name"] == "ed"


def test_parallel_executor_runs_on_one_cpu_device():
    x = fluid.data("x", [-1, 3])
    loss = fluid.layers.mean(fluid.layers.fc(x, 2))
    fluid.optimizer.SGD(0.1).minimize(loss)
    fluid.Executor(fluid.CPUPlace()).run(fluid.default_startup_program())
    pe = fluid.ParallelExecutor(use_cuda=False, loss_name=loss.name)
    (l1,) = pe.run(fetch_list=[loss.name], feed={"x": np.ones((4, 3), "float32")})
    (l2,) = pe.run(fetch_list=[loss.name], feed_dict={"x": np.ones((4, 3), "float32")})
    assert l1.shape == (1,) and l2[0] < l1[0] and pe.device_count == 1


def test_parallel_executor_arguments_take_effect_or_are_refused():
    x = fluid.data("x", [-1, 3])
    loss = fluid.layers.mean(fluid.layers.fc(x, 2))
    fluid.optimizer.SGD(0.1).minimize(loss)
    scope = fluid.Scope()
    fluid.Executor().run(fluid.default_startup_program(), scope=scope)
    first = fluid.ParallelExecutor(loss_name=loss.name, scope=scope)
    second = fluid.ParallelExecutor(loss_name=loss.name, share_vars_from=first)
    assert second._scope is scope                     # runs on the shared parameters
    feed = {"x": np.ones((4, 3), "float32")}
    (a,) = first.run(fetch_list=[loss.name], feed=feed)
    (b,) = second.run(fetch_list=[loss.name], feed=feed)
    assert b[0] < a[0]                                 # second saw first's update
    with pytest.raises(ValueError, match="num_trainers=2, trainer_id=1, but this process is "
                                         "rank 0 of a launch of 1"):
        fluid.ParallelExecutor(loss_name=loss.name, num_trainers=2, trainer_id=1)
    with pytest.raises(TypeError, match="share_vars_from must be a ParallelExecutor"):
        fluid.ParallelExecutor(loss_name=loss.name, share_vars_from=object())
    with pytest.raises(ValueError, match="use_cuda=False"):
        fluid.ParallelExecutor(use_cuda=True, loss_name=loss.name)
    bs = fluid.BuildStrategy()
    bs.gradient_scale_strategy = fluid.BuildStrategy.GradientScaleStrategy.One
    with pytest.raises(ValueError, match="gradient_scale_strategy=One is not supported"):
        fluid.ParallelExecutor(loss_name=loss.name, build_strategy=bs)


@pytest.mark.parametrize("name", ["slim", "quantize"])   # issue 13: contrib.mixed_precision exists
def test_unprovided_parts_say_so(name):
    with pytest.raises(AttributeError, match="not provided"):
        getattr(fluid.contrib, name)
