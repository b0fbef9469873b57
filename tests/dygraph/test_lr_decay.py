"""Dygraph learning-rate decays (fluid 1.8 formulas) and their use by the optimizers."""
import math

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import dygraph


def rates(decay, n=5):
    return [float(decay()) for _ in range(n)]


@pytest.fixture(autouse=True)
def dy():
    with dygraph.guard():
        yield


def test_formulas():
    assert rates(dygraph.PiecewiseDecay([2, 4], [1.0, 0.5, 0.1], 0)) == \
        pytest.approx([1.0, 1.0, 0.5, 0.5, 0.1])
    assert rates(dygraph.ExponentialDecay(1.0, 2, 0.5, staircase=True)) == \
        pytest.approx([1, 1, 0.5, 0.5, 0.25])
    assert rates(dygraph.NaturalExpDecay(1.0, 2, 0.5)) == \
        pytest.approx([math.exp(-0.25 * i) for i in range(5)], rel=1e-6)
    assert rates(dygraph.InverseTimeDecay(1.0, 1, 1.0)) == \
        pytest.approx([1 / (1 + i) for i in range(5)], rel=1e-6)
    assert rates(dygraph.PolynomialDecay(1.0, 4, end_learning_rate=0.0)) == \
        pytest.approx([1, 0.75, 0.5, 0.25, 0.0])
    assert rates(dygraph.CosineDecay(1.0, 1, 4)) == \
        pytest.approx([0.5 * (math.cos(i * math.pi / 4) + 1) for i in range(5)], rel=1e-6)
    noam = rates(dygraph.NoamDecay(4, 2), 3)
    assert noam == pytest.approx([0.5 * min(s ** -0.5, 2 ** -1.5 * s) for s in (1, 2, 3)],
                                 rel=1e-6)
    warm = dygraph.LinearLrWarmup(0.5, warmup_steps=2, start_lr=0.0, end_lr=1.0, begin=0)
    assert rates(warm, 4) == pytest.approx([0.0, 0.5, 0.5, 0.5])


def test_reduce_on_plateau():
    sched = dygraph.ReduceLROnPlateau(1.0, patience=1, decay_rate=0.5)
    for loss in (3.0, 3.0, 3.0):
        sched.step(dygraph.to_variable(np.array([loss], "float32")))
    assert float(sched()) == 0.5
    sched.step(1.0)
    assert float(sched()) == 0.5


def test_optimizer_uses_the_decay_once_per_minimize():
    lin = dygraph.Linear(2, 1, bias_attr=False)
    sgd = fluid.optimizer.SGD(dygraph.PiecewiseDecay([1], [1.0, 0.1], 0),
                              parameter_list=lin.parameters())
    x = dygraph.to_variable(np.ones((1, 2), "float32"))
    steps = []
    for _ in range(2):
        w0 = lin.weight.numpy().copy()
        fluid.layers.reduce_sum(lin(x)).backward()     # d/dW = 1
        sgd.minimize(None)
        lin.clear_gradients()
        steps.append(float((w0 - lin.weight.numpy()).mean()))
    assert steps == pytest.approx([1.0, 0.1], rel=1e-6)
    assert sgd.state_dict()["LR_Scheduler@step_num"].numpy() == 2
