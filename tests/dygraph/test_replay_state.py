"""Dygraph step replay of ops writing their own state (issue 31 item 5): ``batch_norm``'s
moving mean and variance are persistables of the compiled step, written by the plan, so a
conv net with batch norm replays -- and gives the eager numbers bit for bit, statistics
included."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import dygraph
from fluidlite.dygraph import replay

R = replay.REPLAYER
RNG = np.random.default_rng(0)
X = RNG.standard_normal((4, 3, 8, 8)).astype("float32")
Y = RNG.integers(0, 5, (4, 1)).astype("int64")


@pytest.fixture(autouse=True)
def _fresh():
    off = R.off
    R.reset()
    yield
    R.reset()
    R.off = off


class Net(dygraph.Layer):
    def __init__(self):
        super().__init__()
        self.conv = dygraph.Conv2D(3, 6, 3, padding=1)
        self.bn = dygraph.BatchNorm(6, act="relu")
        self.conv2 = dygraph.Conv2D(6, 6, 3, padding=1)
        self.bn2 = dygraph.BatchNorm(6)
        self.fc = dygraph.Linear(6 * 8 * 8, 5)

    def forward(self, x):
        h = self.bn(self.conv(x))
        h = fluid.layers.relu(self.bn2(self.conv2(h)) + h)
        return self.fc(fluid.layers.reshape(h, [-1, 6 * 8 * 8]))


def train(replayed, steps=6, opt="momentum", eval_at=None, read_at=None):
    R.reset()
    R.off = not replayed
    before = R.replayed
    with dygraph.guard():
        net = Net()
        for i, p in enumerate(net.parameters()):
            if p.trainable:
                p.set_value(np.random.default_rng(i).uniform(-0.3, 0.3, p.shape)
                            .astype("float32"))
        params = [p for p in net.parameters() if p.trainable]
        o = {"momentum": lambda: fluid.optimizer.Momentum(
                 0.05, 0.9, parameter_list=params,
                 regularization=fluid.regularizer.L2Decay(1e-4),
                 grad_clip=fluid.clip.GradientClipByGlobalNorm(5.0)),
             "adam": lambda: fluid.optimizer.Adam(0.01, parameter_list=params)}[opt]()
        losses, evals = [], []
        for s in range(steps):
            loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(
                net(dygraph.to_variable(X)), dygraph.to_variable(Y)))
            if s == read_at:        # a pending value read: the step runs eagerly from here
                float(loss)
            loss.backward()
            o.minimize(loss)
            net.clear_gradients()
            losses.append(float(loss.numpy()[0]))
            if eval_at is not None and s == eval_at:        # eval mode reads the statistics
                net.eval()
                evals.append(net(dygraph.to_variable(X)).numpy())
                net.train()
        state = {k: v.numpy() for k, v in net.state_dict().items()}
    return losses, state, evals, R.replayed - before


@pytest.mark.parametrize("opt", ["momentum", "adam"])
def test_batch_norm_net_replays_with_the_eager_numbers(opt):
    losses, state, _, n = train(True, opt=opt)
    e_losses, e_state, _, e_n = train(False, opt=opt)
    assert n >= 3 and e_n == 0
    assert losses == e_losses
    assert state.keys() == e_state.keys()
    stats = [k for k in state if "w_1" in k or "w_2" in k or "mean" in k or "variance" in k]
    assert stats                                          # moving statistics are checked too
    for k in state:
        np.testing.assert_array_equal(state[k], e_state[k], err_msg=k)


def test_statistics_written_by_the_replayed_step_are_what_eval_reads():
    """eval() between replayed steps materializes nothing and reads the statistics the plan
    wrote (the eager run's, bit for bit); training then replays again."""
    losses, state, evals, n = train(True, steps=7, eval_at=3)
    e_losses, e_state, e_evals, _ = train(False, steps=7, eval_at=3)
    assert n >= 3 and losses == e_losses
    np.testing.assert_array_equal(evals[0], e_evals[0])
    for k in state:
        np.testing.assert_array_equal(state[k], e_state[k], err_msg=k)


def test_a_materialized_step_writes_the_statistics_once_as_eager_does():
    # the matched batch_norm calls run again eagerly with their statistics as outputs (the
    # same parameters, not new tensors): the eager numbers, statistics included
    losses, state, _, n = train(True, steps=7, read_at=4)
    e_losses, e_state, _, _ = train(False, steps=7, read_at=4)
    assert n == 3 and losses == e_losses         # steps 3, 5 and 6
    for k in state:
        np.testing.assert_array_equal(state[k], e_state[k], err_msg=k)
