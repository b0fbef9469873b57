"""@declarative / ProgramTranslator: traced static programs inside dygraph mode, trained by the
dygraph optimizers with the same numbers as plain dygraph."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import dygraph
from fluidlite.dygraph import ProgramTranslator, declarative


@pytest.fixture(autouse=True)
def _translator_on():
    ProgramTranslator().enable(True)
    yield
    ProgramTranslator().enable(True)


class MLP(dygraph.Layer):
    def __init__(self, static):
        super().__init__()
        self.fc1 = dygraph.Linear(6, 16, act="relu")
        self.fc2 = dygraph.Linear(16, 4)
        self.static = static

    def body(self, x):
        return self.fc2(self.fc1(x))

    @declarative
    def traced(self, x):
        return self.body(x)

    def forward(self, x):
        return self.traced(x) if self.static else self.body(x)


class ConvNet(dygraph.Layer):
    def __init__(self, static):
        super().__init__()
        self.conv = dygraph.Conv2D(2, 4, 3, padding=1)
        self.bn = dygraph.BatchNorm(4, act="relu")
        self.pool = dygraph.Pool2D(2, "max", 2)
        self.fc = dygraph.Linear(4 * 3 * 3, 3)
        self.static = static

    def body(self, x):
        h = self.pool(self.bn(self.conv(x)))
        return self.fc(fluid.layers.reshape(h, [-1, 36]))

    @declarative
    def traced(self, x):
        return self.body(x)

    def forward(self, x):
        return self.traced(x) if self.static else self.body(x)


def _train(make, opt_cls, xs, labels, static, steps=4):
    with dygraph.guard():
        fluid.default_main_program().random_seed = 7
        net = make(static)
        opt = opt_cls(learning_rate=0.05, parameter_list=net.parameters())
        losses = []
        for i in range(steps):
            x = dygraph.to_variable(xs[i % len(xs)])
            y = dygraph.to_variable(labels[i % len(labels)])
            logits = net(x)
            loss = fluid.layers.reduce_mean(
                fluid.layers.softmax_with_cross_entropy(logits, y))
            loss.backward()
            opt.minimize(loss)
            net.clear_gradients()
            losses.append(float(loss))
        return losses, {k: v.numpy() for k, v in net.state_dict().items()}


@pytest.mark.parametrize("opt_cls", [fluid.optimizer.SGD, fluid.optimizer.Adam])
@pytest.mark.parametrize("make,shape", [(MLP, (8, 6)), (ConvNet, (5, 2, 6, 6))])
def test_declarative_trains_like_dygraph(make, shape, opt_cls):
    rng = np.random.RandomState(0)
    xs = [rng.randn(*shape).astype("float32") for _ in range(2)]
    labels = [rng.randint(0, 3, (shape[0], 1)).astype("int64") for _ in range(2)]
    l_eager, p_eager = _train(make, opt_cls, xs, labels, static=False)
    l_static, p_static = _train(make, opt_cls, xs, labels, static=True)
    np.testing.assert_allclose(l_static, l_eager, rtol=1e-5, atol=1e-6)
    assert l_static[-1] < l_static[0]
    assert p_static.keys() == p_eager.keys()
    for k in p_eager:       # includes batch norm's moving mean/variance
        np.testing.assert_allclose(p_static[k], p_eager[k], rtol=1e-5, atol=1e-6, err_msg=k)


def test_traced_once_per_signature_and_program_shares_parameters():
    with dygraph.guard():
        net = MLP(static=True)
        x = np.ones((3, 6), "float32")
        a = net(dygraph.to_variable(x))
        net(dygraph.to_variable(x * 2))
        assert net.traced.cache_size == 1
        net(dygraph.to_variable(np.ones((5, 6), "float32")))       # new batch size
        assert net.traced.cache_size == 2
        types = [op.type for op in net.traced.program.global_block().ops]
        assert types == ["mul", "elementwise_add", "relu", "mul", "elementwise_add"]
        net.fc2.bias.set_value(np.full([4], 3.0, "float32"))       # read at every call
        b = net(dygraph.to_variable(x))
        np.testing.assert_allclose(b.numpy(), net.body(dygraph.to_variable(x)).numpy(),
                                   rtol=1e-6)
        assert not np.allclose(a.numpy(), b.numpy())


def test_gradient_flows_into_inputs_and_through_following_dygraph_ops():
    @declarative
    def f(x, y):
        return fluid.layers.elementwise_mul(x, x) + y * 3.0

    with dygraph.guard():
        x = dygraph.to_variable(np.array([1.0, 2.0], "float32"))
        y = dygraph.to_variable(np.array([0.5, -1.0], "float32"))
        x.stop_gradient = False
        y.stop_gradient = False
        h = x * 2.0                              # a dygraph op before the static part
        out = f(h, y)
        # one autograd node for the whole static part, named as fluid 1.8's op
        assert out._node.opdef.type == "run_program"
        z = fluid.layers.reduce_sum(out * 2.0)
        z.backward()
        # z = 2 * sum((2x)^2 + 3y): dz/dx = 16x, dz/dy = 6
        np.testing.assert_allclose(x.gradient(), [16.0, 32.0])
        np.testing.assert_allclose(y.gradient(), [6.0, 6.0])
        with pytest.raises(RuntimeError, match="retain_graph=True"):
            z.backward()


def test_no_grad_and_disabled_translator():
    with dygraph.guard():
        net = MLP(static=True)
        x = dygraph.to_variable(np.ones((2, 6), "float32"))
        with dygraph.no_grad():
            out = net(x)
        assert out.stop_gradient
        ProgramTranslator.get_instance().enable(False)
        eager = net(x)
        assert net.traced.cache_size == 1              # no trace while disabled
        np.testing.assert_allclose(eager.numpy(), out.numpy(), rtol=1e-6)
        with pytest.raises(TypeError, match="enable_declarative must be a bool"):
            ProgramTranslator().enable(1)
    assert ProgramTranslator() is ProgramTranslator.get_instance()


def test_value_dependent_control_flow_runs_eagerly(caplog):
    @declarative
    def f(x):
        if fluid.layers.mean(x) > 0:
            return x - 1
        return x + 1

    with dygraph.guard():
        with caplog.at_level("WARNING", logger="fluidlite"):
            pos = f(dygraph.to_variable(np.ones((1, 2), "float32")))
        assert "reads the value" in caplog.text
        neg = f(dygraph.to_variable(-np.ones((1, 2), "float32")))
        np.testing.assert_allclose(pos.numpy(), [[0.0, 0.0]])
        np.testing.assert_allclose(neg.numpy(), [[0.0, 0.0]])
        with pytest.raises(ValueError, match="no single traced program"):
            ProgramTranslator().get_program(f, np.ones((1, 2), "float32"))


def test_program_translator_get_output_program_code_func():
    def func(x):
        x = dygraph.to_variable(x)
        return fluid.layers.relu(x) * 2.0

    pt = ProgramTranslator()
    x = np.array([[-1.0, 2.0]], "float32")
    with dygraph.guard():
        out = pt.get_output(func, x)
        np.testing.assert_allclose(out.numpy(), [[0.0, 4.0]])
        main, startup, inputs, outputs = pt.get_program(func, x)
    assert [v.name for v in inputs] == ["feed_0"]
    assert [op.type for op in main.global_block().ops] == ["relu", "scale"]
    exe = fluid.Executor(fluid.CPUPlace())
    (res,) = exe.run(main, feed={"feed_0": x}, fetch_list=outputs)
    np.testing.assert_allclose(res, [[0.0, 4.0]])
    sf = declarative(func)
    assert "def func" in pt.get_code(sf)
    with dygraph.guard():
        sf(x)
    assert "relu" in pt.get_code(sf)
    # get_func: the function builds static ops into the current program
    static_fn = pt.get_func(declarative(lambda v: fluid.layers.relu(v) * 2.0))
    prog = fluid.Program()
    with fluid.program_guard(prog, fluid.Program()):
        v = fluid.data("v", [None, 2], "float32")
        o = static_fn(v)
    (res,) = exe.run(prog, feed={"v": x}, fetch_list=[o])
    np.testing.assert_allclose(res, [[0.0, 4.0]])


def test_bad_input_static_variable():
    f = declarative(lambda x: x * 2.0)
    prog = fluid.Program()
    with fluid.program_guard(prog):
        v = fluid.data("v", [2], "float32")
    with dygraph.guard():
        with pytest.raises(TypeError, match="argument 0 is the static Variable 'v'"):
            f(v)
    with pytest.raises(TypeError, match="expected a function"):
        declarative(3)


def test_tensors_in_lists_and_keyword_arguments_are_feeds():
    @declarative
    def f(pair, scale=1.0, bias=None):
        a, b = pair
        return fluid.layers.elementwise_add(a * scale, b) + bias

    with dygraph.guard():
        a = dygraph.to_variable(np.array([1.0, 2.0], "float32"))
        a.stop_gradient = False
        b = dygraph.to_variable(np.array([3.0, 4.0], "float32"))
        out = f([a, b], scale=2.0, bias=dygraph.to_variable(np.ones(2, "float32")))
        np.testing.assert_allclose(out.numpy(), [6.0, 9.0])
        fluid.layers.reduce_sum(out).backward()
        np.testing.assert_allclose(a.gradient(), [2.0, 2.0])
        # new values, same signature: no retrace, the new values are used
        out2 = f([b, b], scale=2.0, bias=np.full(2, 5.0, "float32"))
        assert f.cache_size == 2          # b.stop_gradient differs from a's: one more trace
        np.testing.assert_allclose(out2.numpy(), [14.0, 17.0])
        out3 = f([b, a.detach()], scale=2.0, bias=np.zeros(2, "float32"))
        assert f.cache_size == 2
        np.testing.assert_allclose(out3.numpy(), [7.0, 10.0])
        f([b, b], scale=3.0, bias=np.zeros(2, "float32"))      # a constant changed: retrace
        assert f.cache_size == 3
