"""fluid.WeightNormParamAttr: w = g * v / ||v|| (norm over every dim but ``dim``), trained through
the parameters <name>_g and <name>_v; g starts at ||v||, so w starts at the initializer's values."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.testing import numeric_grad


def _net(dim, dtype="float64"):
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 4
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 4], dtype)
        attr = fluid.WeightNormParamAttr(dim=dim, name="w",
                                         initializer=fluid.initializer.Uniform(-1, 1, seed=3))
        y = fluid.layers.fc(x, 3, param_attr=attr, bias_attr=False)
        r = fluid.data("r", [-1, 3], dtype)
        loss = fluid.layers.reduce_sum(fluid.layers.elementwise_mul(y, r))
    return main, startup, loss, y


@pytest.mark.parametrize("dim", [None, 0, 1, -1])
def test_weight_is_g_times_unit_v_and_starts_at_the_initializer(dim):
    main, startup, loss, y = _net(dim)
    assert sorted(p.name for p in main.all_parameters()) == ["w_g", "w_v"]
    scope = fluid.Scope()
    exe = fluid.Executor()
    exe.run(startup, scope=scope)
    g = np.array(scope.find_var("w_g").get_tensor())
    v = np.array(scope.find_var("w_v").get_tensor())
    axes = tuple(i for i in range(2) if dim is None or i != dim % 2)
    np.testing.assert_allclose(g, np.sqrt((v ** 2).sum(axis=axes, keepdims=True)), rtol=1e-12)
    x = np.random.default_rng(0).standard_normal((5, 4))
    got, = exe.run(main, feed={"x": x, "r": np.ones((5, 3))}, fetch_list=[y], scope=scope)
    np.testing.assert_allclose(got, x @ v, rtol=1e-12)      # w == v at step 0


@pytest.mark.parametrize("dim", [None, 1])
def test_gradients_of_g_and_v_match_central_differences(dim):
    main, startup, loss, _ = _net(dim)
    fwd = main.clone()
    with fluid.program_guard(main, startup):
        grads = fluid.gradients(loss, [main.global_block().var("w_g"),
                                       main.global_block().var("w_v")])
    scope = fluid.Scope()
    exe = fluid.Executor()
    exe.run(startup, scope=scope)
    rng = np.random.default_rng(1)
    feed = {"x": rng.standard_normal((5, 4)), "r": rng.standard_normal((5, 3))}
    analytic = exe.run(main, feed=feed, fetch_list=grads, scope=scope)
    values = {n: np.array(scope.find_var(n).get_tensor()) for n in ("w_g", "w_v")}

    def f(fd):
        s = fluid.Scope()
        for n in ("w_g", "w_v"):
            s.var(n).get_tensor().set(fd[n], fluid.CPUPlace())
        return float(exe.run(fwd, feed={"x": fd["x"], "r": fd["r"]}, fetch_list=[loss.name],
                             scope=s)[0][0])
    point = dict(feed, **values)
    for name, a in zip(("w_g", "w_v"), analytic):
        n = numeric_grad(f, point, name, 1e-6)
        np.testing.assert_allclose(a, n, rtol=1e-5, atol=1e-7)
        assert np.abs(n).max() > 1e-3


def test_training_updates_g_and_v_and_keeps_the_relation():
    main, startup, loss, _ = _net(1, "float32")
    with fluid.program_guard(main, startup):
        fluid.optimizer.SGD(0.1).minimize(loss)
    exe = fluid.Executor()
    exe.run(startup)
    sc = fluid.global_scope()
    before = {n: np.array(sc.find_var(n).get_tensor()) for n in ("w_g", "w_v")}
    rng = np.random.default_rng(2)
    for _ in range(3):
        exe.run(main, feed={"x": rng.standard_normal((5, 4)).astype("float32"),
                            "r": rng.standard_normal((5, 3)).astype("float32")})
    for n in ("w_g", "w_v"):
        assert not np.allclose(np.array(sc.find_var(n).get_tensor()), before[n])


def test_dygraph_refuses_it_with_the_reason():
    with fluid.dygraph.guard():
        with pytest.raises(TypeError, match="WeightNormParamAttr .* static graph mode"):
            fluid.dygraph.Linear(4, 3, param_attr=fluid.WeightNormParamAttr(dim=1))
