"""``fluid.profiler`` in dygraph mode: eager ops, the eager backward's nodes and replayed
steps' plans are all timed into the running profile."""
import numpy as np

import fluidlite as fluid
from fluidlite import dygraph
from fluidlite.dygraph import replay

L = fluid.layers
X = np.random.default_rng(0).standard_normal((8, 6)).astype("float32")


def _train(steps, replayed):
    R = replay.REPLAYER
    R.reset()
    off, R.off = R.off, not replayed
    before = R.replayed
    try:
        with dygraph.guard():
            l1, l2 = dygraph.Linear(6, 12), dygraph.Linear(12, 2)
            opt = fluid.optimizer.SGD(0.1, parameter_list=l1.parameters() + l2.parameters())
            with fluid.profiler.profiler("CPU") as prof:
                for _ in range(steps):
                    loss = L.mean(L.square(l2(L.tanh(l1(dygraph.to_variable(X))))))
                    loss.backward()
                    opt.minimize(loss)
                    opt.clear_gradients()
            return prof, R.replayed - before
    finally:
        R.off = off
        R.reset()


def test_eager_ops_and_their_gradients_are_timed(capsys):
    prof, replayed = _train(3, replayed=False)
    assert replayed == 0
    types = prof.by_type
    for t in ("tanh", "mean", "square", "tanh_grad", "square_grad", "mean_grad"):
        assert types[t].calls == 3 and types[t].total > 0, t
    for t in ("mul", "elementwise_add", "mul_grad", "elementwise_add_grad"):   # two layers
        assert types[t].calls == 6 and types[t].total > 0, t
    assert ("dygraph", "tanh") in prof.by_op
    out = capsys.readouterr().out
    assert "dygraph tanh_grad" in out and "tanh " in out


def test_replayed_steps_are_timed_by_their_plans(capsys):
    prof, replayed = _train(6, replayed=True)
    assert replayed > 0
    assert prof.runs >= replayed                 # one plan run per replayed step at least
    planned = [t for (i, t) in prof.by_op if isinstance(i, int)]
    assert "tanh" in planned and "tanh_grad" in planned
    # the eager steps before the replay started, and the replayed ones: every step once
    assert prof.by_type["tanh"].calls == 6
    capsys.readouterr()


def test_nothing_is_timed_without_a_profiler():
    with dygraph.guard():
        y = L.tanh(dygraph.to_variable(X))
    assert fluid.profiler.active() is None and y.shape == [8, 6]
