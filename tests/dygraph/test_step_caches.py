"""The dygraph training step's caches: the optimizer's group plan (``dygraph/optim.py``
``_GroupPlan``: the static plan's fused global norm and update group) and the backward
engine's per-op gradient plans (``dygraph/autograd.py`` ``_PLAIN``). Each is checked against
the uncached path (the per-parameter updates / the general gradient path) and the static
executor, and for invalidation when the parameter set, gradient shapes, optimizer attrs or
clip settings change."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import dygraph
from fluidlite.dygraph import autograd, optim

OPTS = {
    "sgd": lambda **kw: fluid.optimizer.SGD(learning_rate=0.1, **kw),
    "momentum": lambda **kw: fluid.optimizer.Momentum(learning_rate=0.1, momentum=0.9, **kw),
    "adam": lambda **kw: fluid.optimizer.Adam(learning_rate=0.01, **kw),
    "adamax": lambda **kw: fluid.optimizer.Adamax(learning_rate=0.01, **kw),
    "rmsprop": lambda **kw: fluid.optimizer.RMSProp(learning_rate=0.01, **kw),
    "lamb": lambda **kw: fluid.optimizer.Lamb(learning_rate=0.01, **kw),
}
SIZES = (8, 300, 60, 4)       # 300x60 = 18000 elements: updated in place by the group


def _weights(seed=0):
    rs = np.random.RandomState(seed)
    ws = [rs.uniform(-0.5, 0.5, (a, b)).astype("float32") for a, b in zip(SIZES, SIZES[1:])]
    bs = [rs.uniform(-0.1, 0.1, (b,)).astype("float32") for b in SIZES[1:]]
    return ws, bs


def _data(n=4, seed=1):
    rs = np.random.RandomState(seed)
    return [(rs.randn(5, SIZES[0]).astype("float32") * 3,
             rs.randint(0, SIZES[-1], (5, 1)).astype("int64")) for _ in range(n)]


def _net():
    ws, bs = _weights()
    layers = [dygraph.Linear(a, b, act="relu" if i < len(SIZES) - 2 else None)
              for i, (a, b) in enumerate(zip(SIZES, SIZES[1:]))]
    for layer, w, b in zip(layers, ws, bs):
        layer.weight.set_value(w)
        layer.bias.set_value(b)
    return layers


def _loss(layers, xb, yb):
    h = dygraph.to_variable(xb)
    for layer in layers:
        h = layer(h)
    return fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(
        h, dygraph.to_variable(yb)))


def _train(opt_name, clip, data, grouped=True, monkeypatch=None, **opt_kw):
    with dygraph.guard():
        layers = _net()
        params = [p for layer in layers for p in layer.parameters()]
        opt = OPTS[opt_name](parameter_list=params, grad_clip=clip, **opt_kw)
        if not grouped:
            monkeypatch.setattr(optim, "_groupable", lambda *a: False)
        for xb, yb in data:
            loss = _loss(layers, xb, yb)
            loss.backward()
            opt.minimize(loss)
            for p in params:
                p.clear_gradient()
        if not grouped:
            monkeypatch.undo()
        return [p.numpy() for p in params], opt


def _static(opt_name, clip, data):
    ws, bs = _weights()
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [-1, SIZES[0]], "float32")
        y = fluid.data("y", [-1, 1], "int64")
        h = x
        for i, n in enumerate(SIZES[1:]):
            h = fluid.layers.fc(h, n, act="relu" if i < len(SIZES) - 2 else None,
                                param_attr=fluid.ParamAttr(name=f"w{i}"),
                                bias_attr=fluid.ParamAttr(name=f"b{i}"))
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(h, y))
        OPTS[opt_name](grad_clip=clip).minimize(loss)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    for i, (w, b) in enumerate(zip(ws, bs)):
        scope.var(f"w{i}").get_tensor().set(w, fluid.CPUPlace())
        scope.var(f"b{i}").get_tensor().set(b, fluid.CPUPlace())
    for xb, yb in data:
        exe.run(main, feed={"x": xb, "y": yb}, fetch_list=[loss], scope=scope)
    out = []
    for i in range(len(SIZES) - 1):
        out += [np.array(scope.find_var(f"w{i}").get_tensor()),
                np.array(scope.find_var(f"b{i}").get_tensor())]
    return out


@pytest.mark.parametrize("opt_name", ["sgd", "momentum", "adam"])
def test_group_update_is_the_static_plans_bit_for_bit(opt_name):
    data = _data()
    dy, opt = _train(opt_name, fluid.clip.GradientClipByGlobalNorm(0.5), data)
    assert opt.__dict__.get("_dygraph_group") is not None       # the group path ran
    for a, b in zip(dy, _static(opt_name, fluid.clip.GradientClipByGlobalNorm(0.5), data)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("opt_name", sorted(OPTS))
@pytest.mark.parametrize("clip", ["none", "global"])
def test_group_update_equals_per_parameter_updates(opt_name, clip, monkeypatch):
    make = {"none": lambda: None, "global": lambda: fluid.clip.GradientClipByGlobalNorm(0.5)}
    data = _data()
    grouped, _ = _train(opt_name, make[clip](), data)
    single, opt = _train(opt_name, make[clip](), data, grouped=False, monkeypatch=monkeypatch)
    assert opt.__dict__.get("_dygraph_group") is None
    for a, b in zip(grouped, single):
        if opt_name == "sgd" and clip == "global":
            # the group forms lr * scale first (as the static plan): one float32 rounding
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
        else:
            np.testing.assert_array_equal(a, b)


def test_group_plan_rebuilt_when_parameter_set_or_settings_change():
    data = _data(8)
    with dygraph.guard():
        layers = _net()
        params = [p for layer in layers for p in layer.parameters()]
        clip = fluid.clip.GradientClipByGlobalNorm(0.5)
        opt = OPTS["adam"](parameter_list=params, grad_clip=clip)
        plans = []

        def step(i, **kw):
            loss = _loss(layers, *data[i])
            loss.backward()
            opt.minimize(loss, **kw)
            for p in params:
                p.clear_gradient()
            plans.append(opt.__dict__["_dygraph_group"])

        step(0)
        step(1)
        assert plans[1] is plans[0]                         # cached
        step(2, parameter_list=params[:4])                  # another parameter set
        assert plans[2] is not plans[1] and len(plans[2].params) == 4
        step(3)
        assert len(plans[3].params) == len(params)
        clip.clip_norm = 0.25                               # clip settings
        step(4)
        assert plans[4] is not plans[3] and plans[4].norm.limit == 0.25
        opt._attrs["epsilon"] = 1e-6                         # update op attrs
        step(5)
        assert plans[5] is not plans[4]
        assert plans[5].group.attrs_list[0]["epsilon"] == 1e-6
        params[0].need_clip = False                         # which gradients are clipped
        step(6)
        assert plans[6] is not plans[5]
        assert [c for q, c in zip(plans[6].params, plans[6].counted) if q is params[0]] == [False]
        assert not plans[6].group.scaled


def test_need_clip_and_changed_settings_match_the_per_parameter_path(monkeypatch):
    def run(grouped):
        data = _data(6)
        with dygraph.guard():
            layers = _net()
            params = [p for layer in layers for p in layer.parameters()]
            params[1].need_clip = False
            clip = fluid.clip.GradientClipByGlobalNorm(0.5)
            opt = OPTS["momentum"](parameter_list=params, grad_clip=clip)
            if not grouped:
                monkeypatch.setattr(optim, "_groupable", lambda *a: False)
            norms = []
            for i, (xb, yb) in enumerate(data):
                if i == 3:
                    clip.clip_norm = 0.1
                    opt._attrs["mu"] = 0.5
                loss = _loss(layers, xb, yb)
                loss.backward()
                opt.minimize(loss, parameter_list=params[:4] if i == 4 else None)
                norms.append(clip.global_norm.numpy())
                for p in params:
                    p.clear_gradient()
            monkeypatch.undo()
            return [p.numpy() for p in params], norms

    (a, na), (b, nb) = run(True), run(False)
    for i, (x, y) in enumerate(zip(na, nb)):
        np.testing.assert_array_equal(x, y, err_msg=f"step {i}")    # the norm: bit for bit
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


def test_nonfinite_global_norm_raises_before_any_update():
    with dygraph.guard():
        layers = _net()
        params = [p for layer in layers for p in layer.parameters()]
        opt = OPTS["adam"](parameter_list=params, grad_clip=fluid.clip.GradientClipByGlobalNorm(
            0.5, error_if_nonfinite=True))
        loss = _loss(layers, *_data(1)[0])
        loss.backward()
        params[2]._grad = params[2]._grad.copy()
        params[2]._grad[0, 0] = np.inf
        before = [p.numpy() for p in params]
        with pytest.raises(FloatingPointError):
            opt.minimize(loss)
        for p, b in zip(params, before):
            np.testing.assert_array_equal(p.numpy(), b)


def test_plain_gradient_plans_match_the_general_path(monkeypatch):
    """backward() through the cached plain plans equals the general path (zeros for every
    unreached output, ``_node_grads``), also when which inputs need gradients changes."""
    def grads(plain, stop_first_bias):
        if not plain:
            monkeypatch.setattr(autograd, "_plain_grads", lambda n, d: None)
        with dygraph.guard():
            layers = _net()
            layers[0].bias.stop_gradient = stop_first_bias
            x = dygraph.to_variable(_data(1)[0][0])
            x.stop_gradient = False
            loss = _loss(layers, x.numpy(), _data(1)[0][1])
            loss2 = _loss(layers, x.numpy(), _data(1)[0][1])
            (loss + loss2).backward()
            out = [p.gradient() for layer in layers for p in layer.parameters()]
        monkeypatch.undo()
        return out

    for stop in (False, True, False):
        a, b = grads(True, stop), grads(False, stop)
        for x, y in zip(a, b):
            if y is None:
                assert x is None
            else:
                np.testing.assert_array_equal(x, y)


def test_plain_plan_follows_a_changed_batch_size():
    with dygraph.guard():
        layers = _net()
        for n in (5, 3, 5):
            rs = np.random.RandomState(n)
            xb = rs.randn(n, SIZES[0]).astype("float32")
            yb = rs.randint(0, SIZES[-1], (n, 1)).astype("int64")
            loss = _loss(layers, xb, yb)
            loss.backward()
            w = layers[0].weight
            g = w.gradient()
            w.clear_gradient()
            # the first layer's weight gradient against its own x^T @ dY
            h = dygraph.to_variable(xb)
            h.stop_gradient = False
            out = layers[0](h)
            rest = out
            for layer in layers[1:]:
                rest = layer(rest)
            total = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(
                rest, dygraph.to_variable(yb)))
            (dout,) = dygraph.grad([total], [out])
            dpre = dout.numpy() * (out.numpy() > 0)
            np.testing.assert_allclose(g, xb.T @ dpre, rtol=1e-5, atol=1e-6)
            for layer in layers:
                layer.clear_gradients()
