"""A forward op and its gradient sharing work at plan time (executor/fusion/patterns/
saved_grad.py): GELU and swish save their slope for their grad op. Training gives the unfused ops' bits, every
``saves_for_grad`` declaration keeps ``forward`` / ``backward``'s bits, and the pairing stays
away from a grad op whose input was rewritten after the forward."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import dygraph
from fluidlite.core import registry
from fluidlite.dygraph import replay
from fluidlite.executor import fusion
from fluidlite.executor.fusion.kernels import saved_grad as kernels
from fluidlite.executor.fusion.patterns import saved_grad

L = fluid.layers
X = np.random.default_rng(0).standard_normal((40, 6)) * 3


def build(dtype, approximate=False, twice=False, rewrite=False):
    """x -> fc(20) -> gelu -> fc(3) -> mean square, trained by SGD. ``twice``: a second gelu
    of the same input adds to the first; ``rewrite``: the gelu's input is overwritten after
    the gelu (so its gradient reads the new value)."""
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 5
    with fluid.unique_name.guard(), fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 6], dtype)
        h = L.fc(x, 20)
        g = L.gelu(h, approximate=approximate)
        if twice:
            g = g + L.gelu(h, approximate=approximate) * 0.5
        if rewrite:
            L.assign(L.fc(x, 20), output=h)
        loss = L.mean(L.square(L.fc(g, 3)))
        fluid.optimizer.SGD(0.05).minimize(loss)
    return main, startup, loss


def fused_types(main, loss):
    block = main.global_block()
    return [op.type for op in fusion.fuse(list(block.ops), block, [loss.name], ["x"])]


def train(main, startup, loss, dtype, steps=3):
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    losses = [exe.run(main, feed={"x": X.astype(dtype)}, fetch_list=[loss], scope=scope)[0]
              for _ in range(steps)]
    return losses, [np.asarray(scope.find_var(p.name).get_tensor()).copy()
                    for p in main.all_parameters()]


def unfused(monkeypatch):
    monkeypatch.setattr(fusion, "PIPELINE",
                        tuple(p for p in fusion.PIPELINE if p is not saved_grad.SAVED_GRAD))


def assert_same(got, want):
    for g, w in zip(got[0] + got[1], want[0] + want[1]):
        assert g.dtype == w.dtype and np.array_equal(g, w)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("approximate", [False, True])
def test_gelu_layers_train_with_the_unfused_bits(dtype, approximate, monkeypatch):
    main, startup, loss = build(dtype, approximate)
    types = fused_types(main, loss)
    assert "fused(gelu+saved)" in types and "fused(saved+gelu_grad)" in types
    assert "gelu" not in types and "gelu_grad" not in types
    got = train(main, startup, loss, dtype)
    unfused(monkeypatch)
    main2, startup2, loss2 = build(dtype, approximate)
    assert "gelu_grad" in fused_types(main2, loss2)
    want = train(main2, startup2, loss2, dtype)
    assert_same(got, want)
    assert got[0][-1] < got[0][0]                          # it learns


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_swish_layers_train_with_the_unfused_bits(dtype, monkeypatch):
    def make():
        main, startup = fluid.Program(), fluid.Program()
        main.random_seed = startup.random_seed = 5
        with fluid.unique_name.guard(), fluid.program_guard(main, startup):
            x = fluid.data("x", [-1, 6], dtype)
            h = L.swish(L.fc(x, 20), beta=1.5)
            loss = L.mean(L.square(L.fc(h, 3)))
            fluid.optimizer.SGD(0.05).minimize(loss)
        return main, startup, loss
    main, startup, loss = make()
    types = fused_types(main, loss)
    assert "fused(swish+saved)" in types and "fused(saved+swish_grad)" in types
    got = train(main, startup, loss, dtype)
    unfused(monkeypatch)
    main2, startup2, loss2 = make()
    assert "swish_grad" in fused_types(main2, loss2)
    assert_same(got, train(main2, startup2, loss2, dtype))


def test_the_gradient_matches_the_float64_formula():
    # against an independent derivative: GELU'(x) = Phi(x) + x phi(x), by math.erf
    main, startup, loss = build("float64")
    block = main.global_block()
    h = next(op for op in block.ops if op.type == "gelu").inputs["X"][0]
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    hv, dh, dg = exe.run(main, feed={"x": X}, scope=scope,
                         fetch_list=[h, h + "@GRAD", block.ops[[o.type for o in block.ops]
                                                               .index("gelu")]
                                     .outputs["Out"][0] + "@GRAD"])
    erf = np.vectorize(__import__("math").erf)
    slope = 0.5 * (1 + erf(hv / np.sqrt(2))) + hv * np.exp(-hv * hv / 2) / np.sqrt(2 * np.pi)
    np.testing.assert_allclose(dh, dg * slope, rtol=1e-12, atol=1e-15)


def test_two_gelus_of_one_input_and_a_rewritten_input(monkeypatch):
    for kw in ({"twice": True}, {"rewrite": True}):
        main, startup, loss = build("float32", **kw)
        types = fused_types(main, loss)
        got = train(main, startup, loss, "float32")
        if kw.get("rewrite"):      # its gradient reads the new value: not the forward's slope
            assert "gelu_grad" in types and "fused(gelu+saved)" not in types
        else:                      # one pair; the other grad op recomputes
            assert types.count("fused(saved+gelu_grad)") == 1 and "gelu_grad" in types
        with monkeypatch.context() as m:
            unfused(m)
            main2, startup2, loss2 = build("float32", **kw)
            want = train(main2, startup2, loss2, "float32")
        assert_same(got, want)


def test_the_grad_op_reads_the_saved_slope(monkeypatch):
    # the fused gradient never evaluates GELU's derivative again: backward is not called
    gelu = registry.get_op_def("gelu")
    calls = []
    real = type(gelu).backward
    monkeypatch.setattr(type(gelu), "backward",
                        lambda self, *a, **k: calls.append(1) or real(self, *a, **k))
    main, startup, loss = build("float32")
    block = main.global_block()
    fused = fusion.fuse(list(block.ops), block, [loss.name], ["x"])
    fwd = next(op for op in fused if op.type == "fused(gelu+saved)")
    bwd = next(op for op in fused if op.type == "fused(saved+gelu_grad)")
    saved = fwd.outputs["Saved"]
    assert saved == bwd.inputs["Saved"] and len(saved) == 1
    assert saved[0].startswith(fwd.outputs["Out"][0] + "@SAVED0.")
    train(main, startup, loss, "float32", steps=2)
    assert calls == []


@pytest.mark.parametrize("approximate", [False, True])
def test_the_fused_gradient_without_a_saved_slope_is_backwards(approximate):
    # a gradient of another dtype, or no saved value: the op's own backward, attrs and all
    gdef = registry.get_op_def("gelu_grad")
    x = np.random.default_rng(2).standard_normal((4, 5)).astype("float32")
    d = np.random.default_rng(3).standard_normal((4, 5))
    want = gdef.forward_def.backward(x, d, approximate=approximate)["X"]
    got = kernels.SavedGrad(gdef, {"approximate": approximate}).forward(None, x, d)
    assert np.array_equal(got["X@GRAD"], want)
    _, saved = gdef.forward_def.forward_saving(x, approximate=approximate)
    got = kernels.SavedGrad(gdef, {"approximate": approximate}).forward(saved, x, d)
    assert np.array_equal(got["X@GRAD"], want)
    for dout in (d.astype("float32"), d[:1].astype("float32")):    # no slope; a broadcast
        want = gdef.forward_def.backward(x, dout.copy(), approximate=approximate)["X"]
        _, saved = gdef.forward_def.forward_saving(x, approximate=approximate)
        for s in (None, saved):
            got = kernels.SavedGrad(gdef, {"approximate": approximate}).forward(s, x, dout)
            assert np.array_equal(got["X@GRAD"], want)


def test_a_gelu_after_the_gradient_is_not_its_forward(monkeypatch):
    # a gelu of the same input appended after minimize (a metric): the grad op pairs with
    # the forward before it, never with one after it
    main, startup, loss = build("float32")
    with fluid.unique_name.guard("late"), fluid.program_guard(main, startup):
        h = next(op for op in main.global_block().ops if op.type == "gelu").inputs["X"][0]
        late = L.reduce_mean(L.gelu(main.global_block().var(h)))
    types = fused_types(main, loss)
    assert types.index("fused(gelu+saved)") < types.index("fused(saved+gelu_grad)")
    assert types.index("fused(saved+gelu_grad)") < types.index("gelu")
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    got = exe.run(main, feed={"x": X.astype("float32")}, fetch_list=[loss, late], scope=scope)
    unfused(monkeypatch)
    exe2, scope2 = fluid.Executor(), fluid.Scope()
    exe2.run(startup, scope=scope2)
    want = exe2.run(main, feed={"x": X.astype("float32")}, fetch_list=[loss, late], scope=scope2)
    for g, w in zip(got, want):
        assert np.array_equal(g, w)


def test_a_program_without_the_gradient_is_unchanged():
    main, _, loss = build("float32")
    test = main.clone(for_test=True)
    assert "gelu" in fused_types(test, loss)


# the elementwise declarations (one input X, ``backward`` beside them); conv2d's has its own
# tests (tests/test_fusion_saved_conv.py)
SAVING = sorted(t for t in registry.all_op_types() if registry.get_op_def(t).saves_for_grad
                and [s.name for s in registry.get_op_def(t).in_slots] == ["X"])


def _values(dtype, n):
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(n) * 4).astype(dtype)
    x[:12] = [0.0, -0.0, np.inf, -np.inf, np.nan, 70.0, -70.0, 1e-30, -1e-30, 5.7, -5.7, 3.0]
    return x.reshape(-1, 8) if n % 8 == 0 else x


@pytest.mark.filterwarnings("ignore::RuntimeWarning")    # inf * 0 in both rules alike
@pytest.mark.parametrize("op_type", SAVING)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n", [96, 3 * (1 << 18) + 8])      # one block; several (threads)
def test_saves_for_grad_declarations_keep_the_bits(op_type, dtype, n):
    d = registry.get_op_def(op_type)
    bools = [k for k, v in d.attr_defaults.items() if isinstance(v, bool)]
    x = _values(dtype, n)
    dout = np.random.default_rng(4).standard_normal(x.shape).astype(dtype)
    for flags in ([{}] + [{k: True} for k in bools]):
        kw = d.kernel_attrs(dict(d.attr_defaults, **flags))
        outs, saved = d.forward_saving(x.copy(), **kw)
        want = d.forward(x.copy(), **kw)
        assert outs.keys() == want.keys()
        for k in want:
            assert np.array_equal(outs[k], want[k], equal_nan=True), (k, flags)
        got = d.backward_saved(saved, x.copy(), dout, **kw)
        ref = d.backward(x.copy(), dout, **kw)
        assert got.keys() == ref.keys()
        for k in ref:
            assert got[k].dtype == ref[k].dtype
            assert np.array_equal(got[k], ref[k], equal_nan=True), (k, flags)
        # a gradient of another dtype takes backward's own path
        other = dout.astype(np.float64 if dtype == "float32" else np.float32)
        _, saved = d.forward_saving(x.copy(), **kw)
        got = d.backward_saved(saved, x.copy(), other, **kw)
        ref = d.backward(x.copy(), other, **kw)
        for k in ref:
            assert np.array_equal(got[k], ref[k], equal_nan=True)


def test_the_dygraph_replay_pairs_and_keeps_the_eager_bits(monkeypatch):
    calls = []
    forward = kernels.SavedForward.forward
    monkeypatch.setattr(kernels.SavedForward, "forward",
                        lambda self, *a: calls.append(self.type) or forward(self, *a))
    rng = np.random.default_rng(1)
    xs = rng.standard_normal((8, 6)).astype("float32")

    def run(replayed):
        R = replay.REPLAYER
        R.reset()
        off, R.off = R.off, not replayed
        before = R.replayed
        try:
            with dygraph.guard():
                l1, l2 = dygraph.Linear(6, 12), dygraph.Linear(12, 2)
                params = l1.parameters() + l2.parameters()
                for i, p in enumerate(params):
                    p.set_value(np.random.default_rng(i).uniform(-0.5, 0.5, p.shape))
                opt = fluid.optimizer.Adam(0.01, parameter_list=params)
                losses = []
                for _ in range(5):
                    loss = L.mean(L.square(l2(L.gelu(l1(dygraph.to_variable(xs))))))
                    loss.backward()
                    opt.minimize(loss)
                    opt.clear_gradients()
                    losses.append(float(loss))
                return losses, [p.numpy() for p in params], R.replayed - before
        finally:
            R.off = off
            R.reset()

    want = run(False)
    assert not calls
    got = run(True)
    assert got[2] > 0 and want[2] == 0 and calls and set(calls) == {"fused(gelu+saved)"}
    assert want[0] == got[0]
    for a, b in zip(want[1], got[1]):
        assert np.array_equal(a, b)
