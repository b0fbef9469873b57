"""Dygraph step replay (``fluidlite/dygraph/replay.py``): a repeating training step is compiled
once and replayed, giving exactly the eager numbers; every use the replay cannot serve
(reading a pending value, a gradient before ``minimize``, a mismatching op, ``set_value``,
``retain_graph`` ...) materializes the step, which then continues eagerly -- and the whole run
still gives the eager numbers, bit for bit."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import dygraph
from fluidlite.core import mode
from fluidlite.dygraph import replay

R = replay.REPLAYER
RNG = np.random.default_rng(0)
X = RNG.standard_normal((16, 8)).astype("float32")
Y = RNG.integers(0, 3, (16, 1)).astype("int64")
STEPS = 7


@pytest.fixture(autouse=True)
def _fresh():
    off = R.off
    R.reset()
    yield
    R.reset()
    R.off = off


def _make_opt(name, params, clip, decay):
    clip = {"gn": fluid.clip.GradientClipByGlobalNorm(0.5),
            "value": fluid.clip.GradientClipByValue(0.05),
            "norm": fluid.clip.GradientClipByNorm(0.1), None: None}[clip]
    kw = dict(parameter_list=params, grad_clip=clip,
              regularization=fluid.regularizer.L2Decay(0.01) if decay else None)
    return {"sgd": lambda: fluid.optimizer.SGD(0.1, **kw),
            "momentum": lambda: fluid.optimizer.Momentum(0.1, 0.9, **kw),
            "adam": lambda: fluid.optimizer.Adam(0.01, **kw)}[name]()


def train(replayed, opt_name="sgd", clip="gn", decay=False, hook=None, steps=STEPS):
    """Train a 2-layer MLP ``steps`` steps (``hook(step, stage, state)`` may interfere);
    returns (losses, parameters, steps replayed)."""
    R.reset()
    R.off = not replayed
    before = R.replayed
    with dygraph.guard():
        l1, l2 = dygraph.Linear(8, 10, act="tanh"), dygraph.Linear(10, 3)
        params = l1.parameters() + l2.parameters()
        for i, p in enumerate(params):                     # the same start every run
            p.set_value(np.random.default_rng(i).uniform(-0.5, 0.5, p.shape))
        opt = _make_opt(opt_name, params, clip, decay)
        losses = []
        for s in range(steps):
            st = {"opt": opt, "params": params, "x": X, "y": Y}
            if hook:
                hook(s, "start", st)
            h = l1(dygraph.to_variable(st["x"]))
            st["h"] = h
            if hook:
                hook(s, "hidden", st)
            loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(
                l2(h), dygraph.to_variable(st["y"])))
            st["loss"] = loss
            if hook:
                hook(s, "loss", st)
            if st.get("skip_backward"):
                pass
            elif not st.get("retain"):
                loss.backward()
            else:
                loss.backward(retain_graph=True)
            if hook:
                hook(s, "backward", st)
            st["minimized"] = opt.minimize(loss)
            if hook:
                hook(s, "minimized", st)
            if not st.get("keep_grads"):
                opt.clear_gradients()
            losses.append(float(loss))
        return losses, [p.numpy() for p in params], R.replayed - before


def same_as_eager(hook=None, **kw):
    want = train(False, hook=hook, **kw)
    got = train(True, hook=hook, **kw)
    assert got[0] == want[0]
    for a, b in zip(got[1], want[1]):
        np.testing.assert_array_equal(a, b)
    return got[2]


@pytest.mark.parametrize("opt_name", ["sgd", "momentum", "adam"])
@pytest.mark.parametrize("clip,decay", [("gn", False), ("value", True), (None, True),
                                        ("norm", False)])
def test_replayed_training_is_the_eager_training_bit_for_bit(opt_name, clip, decay):
    assert same_as_eager(opt_name=opt_name, clip=clip, decay=decay) == STEPS - 3


def test_off_switch(monkeypatch):
    monkeypatch.setenv("FLUIDLITE_STEP_REPLAY", "0")
    assert replay.Replayer().off
    monkeypatch.setenv("FLUIDLITE_STEP_REPLAY", "1")
    assert not replay.Replayer().off
    assert train(False)[2] == 0


def _at(step, stage, fn):
    def hook(s, st, state):
        if s == step and st == stage:
            fn(state)
    return hook


@pytest.mark.parametrize("stage,action", [
    ("hidden", lambda st: st["h"].numpy()),                      # a pending value read
    ("loss", lambda st: float(st["loss"])),
    ("backward", lambda st: st["params"][0].gradient()),          # a deferred gradient
    ("backward", lambda st: st["params"][1].clear_gradient()),    # ... cleared: no update
    ("hidden", lambda st: st["params"][3].set_value(np.ones(3))),  # changed mid-step
    ("start", lambda st: st.update(x=X[:8], y=Y[:8])),            # another batch shape
    ("start", lambda st: st.update(retain=True)),                 # backward(retain_graph)
    ("backward", lambda st: fluid.layers.reduce_sum(st["h"]).numpy()),  # an extra op
    ("minimized", lambda st: st.update(keep_grads=True)),   # the next step accumulates
    ("loss", lambda st: st.update(skip_backward=True)),     # minimize with no gradients
])
def test_every_interference_materializes_and_keeps_the_eager_numbers(stage, action):
    replayed = same_as_eager(hook=_at(4, stage, action))
    # step 4 ran eagerly (or, keeping its gradients, step 5); the others replayed
    assert replayed == STEPS - 4


def test_after_minimize_the_gradients_and_what_minimize_returns_are_the_eager_ones():
    # a replayed minimize leaves each parameter's gradient until clear_gradients and its
    # version bumped once per update, returns fluid's ([], params_grads) and the clip's
    # global norm, all as an eager step does
    def seen_by(log):
        def hook(s, stage, st):
            if stage == "minimized" and s >= 2:
                ops, pairs = st["minimized"]
                log.append((ops, [(p.gradient().copy(), p._version) for p in st["params"]],
                            [(p.name, g.name, g.numpy().copy()) for p, g in pairs],
                            st["opt"]._grad_clip.global_norm.name,
                            st["opt"]._grad_clip.global_norm.numpy().copy()))
        return hook
    got, want = [], []
    assert train(True, hook=seen_by(got))[2] == STEPS - 3
    train(False, hook=seen_by(want))
    assert len(got) == len(want) == STEPS - 2
    for (ops, grads, pairs, norm_name, norm), (e_ops, e_grads, e_pairs, e_name, e_norm) in \
            zip(got, want):
        assert ops == e_ops == [] and norm_name == e_name
        np.testing.assert_array_equal(norm, e_norm)
        for (g, version), (e, e_version) in zip(grads, e_grads):
            np.testing.assert_array_equal(g, e)
            assert version == e_version         # (autograd's check of in-place updates)
        assert [(p, g) for p, g, _ in pairs] == [(p, g) for p, g, _ in e_pairs]
        for (_, _, a), (_, _, b) in zip(pairs, e_pairs):
            np.testing.assert_array_equal(a, b)


def test_a_step_whose_plan_fails_to_build_runs_eagerly_and_is_given_up(monkeypatch, caplog):
    def broken(self, live):
        raise RuntimeError("no plan")
    monkeypatch.setattr(replay._Compiled, "runner", broken)
    with caplog.at_level("DEBUG", logger="fluidlite"):
        assert same_as_eager() == 0
    assert "step replay: not planned (RuntimeError('no plan'))" in caplog.text
    # given up at once (and materialized once more): it rests, no second plan is tried
    assert R.compiled is not None and R.compiled.fails > replay._MAX_FAILS
    assert caplog.text.count("not planned") == 1


def test_without_reference_counts_every_output_is_fetched(monkeypatch):
    # (a Python without sys.getrefcount: _live keeps every output, the plan fetches all)
    monkeypatch.setattr(replay, "_REFCOUNT_BASE", None)
    assert same_as_eager() == STEPS - 3
    c = R.compiled
    assert list(c.runners) == [tuple(range(len(c.out_flat)))]


def test_pending_tensors_know_shape_and_dtype_without_running():
    seen = {}

    def hook(s, stage, st):
        if s == 4 and stage == "hidden":
            h = st["h"]
            seen["pending"] = "_pending" in h.__dict__
            seen["meta"] = (h.shape, h.dtype, h.stop_gradient)
            seen["still"] = R.active is not None and "_pending" in h.__dict__
    train(True, hook=hook)
    assert seen == {"pending": True, "meta": ([16, 10], fluid.VarType.FP32, False),
                    "still": True}


def test_clip_global_norm_and_gradients_are_left_as_eager_leaves_them():
    got = {}

    def hook(s, stage, st):
        if stage == "start" and s == 5:
            got["norm"] = st["opt"]._grad_clip.global_norm.numpy().copy()
    eager_norm = {}

    def ehook(s, stage, st):
        if stage == "start" and s == 5:
            eager_norm["norm"] = st["opt"]._grad_clip.global_norm.numpy().copy()
    train(True, hook=hook)
    train(False, hook=ehook)
    np.testing.assert_array_equal(got["norm"], eager_norm["norm"])


def test_a_kernel_error_in_a_replayed_step_raises_and_changes_nothing():
    seen = {}

    def hook(s, stage, st):
        if s == 4 and stage == "start":
            st["y"] = np.full_like(Y, 7)            # labels out of range for 3 classes
            seen["params"] = st["params"]
            seen["before"] = [p.numpy() for p in st["params"]]
            seen["replaying"] = R.active is not None
    with pytest.raises(ValueError, match="label 7 is out of range"):
        train(True, hook=hook)
    assert seen["replaying"]
    for p, b in zip(seen["params"], seen["before"]):
        np.testing.assert_array_equal(p.numpy(), b)


def _dropout_training(replayed, seed, steps=6, reseed_at=None):
    """An MLP with two dropouts (one upscale_in_train) and a fixed-seed dropout, trained
    ``steps`` steps; returns (losses, parameters, masks drawn after training, replayed)."""
    R.reset()
    R.off = not replayed
    before = R.replayed
    with dygraph.guard():
        fluid.default_main_program().random_seed = seed      # fluid 1.8's dygraph seeding
        l1, l2 = dygraph.Linear(8, 10, act="tanh"), dygraph.Linear(10, 3)
        params = l1.parameters() + l2.parameters()
        for i, p in enumerate(params):
            p.set_value(np.random.default_rng(i).uniform(-0.5, 0.5, p.shape))
        opt = fluid.optimizer.Adam(0.01, parameter_list=params)
        losses = []
        for s in range(steps):
            if s == reseed_at:
                fluid.default_main_program().random_seed = 99
            h = fluid.layers.dropout(l1(dygraph.to_variable(X)), 0.3)
            h = fluid.layers.dropout(h, 0.5, dropout_implementation="upscale_in_train")
            h = fluid.layers.dropout(h, 0.2, seed=7)
            loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(
                l2(h), dygraph.to_variable(Y)))
            loss.backward()
            opt.minimize(loss)
            opt.clear_gradients()
            losses.append(float(loss))
        # the generator's state after training: what the next eager draw gives
        after = fluid.layers.dropout(dygraph.to_variable(X), 0.5).numpy()
        return losses, [p.numpy() for p in params], after, R.replayed - before


@pytest.mark.parametrize("reseed_at", [None, 4])
def test_random_ops_are_replayed_drawing_what_eager_draws(reseed_at):
    # a replayed step's dropouts draw from the tracer's generator in program order: the
    # same masks, losses and parameters as eager steps, bit for bit, and the generator ends
    # in the same state (also when program.random_seed reseeds it mid-training)
    want = _dropout_training(False, 5, reseed_at=reseed_at)
    got = _dropout_training(True, 5, reseed_at=reseed_at)
    assert got[3] > 0 and want[3] == 0
    assert got[0] == want[0]
    for a, b in zip(got[1], want[1]):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(got[2], want[2])
    # another seed gives other masks (the streams are really drawn, not fixed)
    assert _dropout_training(True, 6)[0] != got[0]


def test_a_replayed_step_keeps_no_graph():
    kept = {}

    def hook(s, stage, st):
        if stage == "loss" and s == 5:
            kept["loss"] = st["loss"]
    train(True, hook=hook)
    loss = kept["loss"]
    assert "_pending" not in loss.__dict__ and loss._node is None
    assert np.isfinite(loss.numpy()).all()


def test_a_parameter_outside_parameter_list_keeps_its_eager_gradient():
    R.reset()
    R.off = False
    with dygraph.guard():
        l1, l2 = dygraph.Linear(8, 10), dygraph.Linear(10, 3)
        opt = fluid.optimizer.SGD(0.1, parameter_list=l2.parameters())     # l1 not trained
        for _ in range(5):
            loss = fluid.layers.mean(l2(l1(dygraph.to_variable(X))))
            loss.backward()
            opt.minimize(loss)
        assert l1.weight.gradient() is not None     # accumulated, as eager backward does
    assert R.compiled is None


def test_a_step_that_keeps_materializing_rests_and_changed_settings_recompile(monkeypatch):
    monkeypatch.setattr(replay, "_REST", 3)
    log = []

    def hook(s, stage, st):
        if stage == "loss" and s < 8:
            float(st["loss"])                       # read before minimize: materializes
        if stage == "start" and s == 12:
            st["opt"]._grad_clip.clip_norm = 0.25   # a changed setting
        if stage == "start":
            log.append(R.active is not None)
    same_as_eager(hook=hook, steps=20)
    armed = log[20:]                                # (the first 20: the eager run)
    # armed from step 3; materialized 3 times, rests, step 8 recorded, replayed from 9; the
    # changed clip materializes steps 12-14, rests, step 17 recorded and recompiled: 18, 19
    assert armed == [False] * 3 + [True] * 3 + [False] * 3 + [True] * 6 + [False] * 3 + \
        [True] * 2


def test_one_outside_tensor_recorded_twice_must_stay_one_tensor():
    R.reset()
    R.off = False
    a = RNG.standard_normal((16, 8)).astype("float32")
    b = RNG.standard_normal((16, 8)).astype("float32")
    with dygraph.guard():
        lin = dygraph.Linear(8, 3)
        opt = fluid.optimizer.SGD(0.1, parameter_list=lin.parameters())
        outs = []
        for s in range(6):
            x = dygraph.to_variable(a)
            y = x if s < 5 else dygraph.to_variable(b)      # x * x, then at last x * y
            prod = fluid.layers.elementwise_mul(x, y)
            loss = fluid.layers.mean(lin(prod))
            loss.backward()
            opt.minimize(loss)
            opt.clear_gradients()
            outs.append(prod)
        assert R.compiled is not None and R.active is not None
    np.testing.assert_array_equal(outs[-1].numpy(), a * b)
    np.testing.assert_array_equal(outs[-2].numpy(), a * a)


def _recurrent(replayed, steps=5):
    """A layer applied 8 times (an unrolled recurrence): its weight's gradient is the sum of
    8 products, which a static plan may stack into one GEMM."""
    R.reset()
    R.off = not replayed
    before = R.replayed
    rng = np.random.default_rng(5)
    xs = rng.standard_normal((8, 16, 64)).astype("float32")
    with dygraph.guard():
        cell = dygraph.Linear(64, 64)
        for i, p in enumerate(cell.parameters()):
            p.set_value(np.random.default_rng(i).uniform(-0.2, 0.2, p.shape))
        opt = fluid.optimizer.SGD(0.05, parameter_list=cell.parameters())
        for _ in range(steps):
            h = dygraph.to_variable(xs[0])
            for t in range(1, 8):
                h = fluid.layers.tanh(cell(h) + dygraph.to_variable(xs[t]))
            loss = fluid.layers.reduce_mean(h * h)
            loss.backward()
            opt.minimize(loss)
            opt.clear_gradients()
        return [p.numpy() for p in cell.parameters()], R.replayed - before


def test_a_shared_weight_replays_with_the_eager_sums():
    # the weight's gradient is one GEMM over the stacked rows of its 7 products in both
    # modes: the eager backward stacks what the replay's static plan stacks, so the replayed
    # run is the eager one bit for bit
    from fluidlite.executor.fusion.kernels.stacked_grad import StackedWeightGrad
    calls = []
    real = StackedWeightGrad.forward
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(StackedWeightGrad, "forward",
                   lambda self, *a: (calls.append(len(a[0])), real(self, *a))[1])
        want, _ = _recurrent(False)
        eager = list(calls)
        got, replayed = _recurrent(True)
    assert replayed > 0 and eager == [7] * 5 and calls == [7] * 10
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("keep", ["list", "shared_dict", "own_dicts"])
def test_outputs_the_caller_keeps_hold_their_values(keep):
    # _live keeps an output anything besides the step's own list refers to: a tensor the
    # caller keeps, everything in a list the caller holds (``split``'s outputs, "list"), a
    # tensor in an inputs dict the caller hands to two ops ("shared_dict") -- the step keeps
    # no slot dict of its own, so no reference of the caller's is mistaken for the step's
    R.reset()
    R.off = False
    before = R.replayed
    rng = np.random.default_rng(3)
    a, b = (rng.standard_normal((4, 6)).astype("float32") for _ in range(2))
    kept = []
    with dygraph.guard():
        lin = dygraph.Linear(6, 6)
        opt = fluid.optimizer.SGD(0.1, parameter_list=lin.parameters())
        tracer = mode.tracer
        for _ in range(6):
            w, bias = lin.weight.numpy().copy(), lin.bias.numpy().copy()
            x, y = dygraph.to_variable(a), dygraph.to_variable(b)
            h = lin(x)
            cat = fluid.layers.concat([h, y], axis=1)
            parts = fluid.layers.split(cat, 2, dim=1)
            ins = {"X": parts[0], "Y": y}
            s = tracer.new_var(None, h.dtype)
            tracer.trace_op("elementwise_add", ins, {"Out": s}, {"axis": -1})
            p = tracer.new_var(None, h.dtype)
            tracer.trace_op("elementwise_mul", dict(ins) if keep == "own_dicts" else ins,
                            {"Out": p}, {"axis": -1})
            held = parts if keep == "list" else parts[0]
            # (an input from split's second output: the records' count of it is split's
            # output 1, not the output before it -- ``cat``, which the caller keeps)
            rest = fluid.layers.reduce_mean(parts[1])
            del ins, parts, h
            loss = fluid.layers.mean(s + p) + rest
            del s, p, rest
            loss.backward()
            opt.minimize(loss)
            opt.clear_gradients()
            kept.append((held, w, bias, cat))
            del held, cat
        assert R.replayed - before >= 3
    for held, w, bias, cat in kept:
        h = a @ w + bias
        np.testing.assert_allclose(cat.numpy(), np.concatenate([h, b], 1), rtol=1e-5,
                                   atol=1e-6)
        if keep == "list":
            np.testing.assert_allclose(held[0].numpy(), h, rtol=1e-5, atol=1e-6)
            np.testing.assert_array_equal(held[1].numpy(), b)
        else:
            np.testing.assert_allclose(held.numpy(), h, rtol=1e-5, atol=1e-6)


def _lists(replayed, interfere=None, steps=6):
    """A step whose ops take and give lists and tuples (``concat``, ``split``, ``stack``),
    one outside tensor read by three ops, a tuple slot of the caller's own and a slot given
    as None;
    ``interfere(step, tensors)`` may read a pending value mid-step."""
    R.reset()
    R.off = not replayed
    before = R.replayed
    rng = np.random.default_rng(11)
    a, b = (rng.standard_normal((4, 6)).astype("float32") for _ in range(2))
    losses = []
    with dygraph.guard():
        lin = dygraph.Linear(6, 6)
        for i, p in enumerate(lin.parameters()):
            p.set_value(np.random.default_rng(i).uniform(-0.5, 0.5, p.shape))
        opt = fluid.optimizer.SGD(0.1, parameter_list=lin.parameters())
        tracer = mode.tracer
        for s in range(steps):
            x, y = dygraph.to_variable(a), dygraph.to_variable(b)
            h = lin(x)
            cat = tracer.new_var(None, h.dtype)
            tracer.trace_op("concat", {"X": (h, y, x)}, {"Out": cat}, {"axis": 1})
            p0, p1, p2 = fluid.layers.split(cat, 3, dim=1)
            half = tracer.new_var(None, h.dtype)        # (an optional input given as None)
            tracer.trace_op("scale", {"X": p1, "ScaleTensor": None}, {"Out": half},
                            {"scale": 0.5})
            if interfere is not None:
                interfere(s, (h, cat, p1))
            st = fluid.layers.stack([p0 * y, half, p2 + x], axis=0)
            loss = fluid.layers.reduce_mean(st * st)
            loss.backward()
            opt.minimize(loss)
            opt.clear_gradients()
            losses.append(float(loss))
        return losses, [p.numpy() for p in lin.parameters()], R.replayed - before


@pytest.mark.parametrize("at", [None, 0, 1, 2])
def test_a_step_of_list_and_tuple_slots_materializes_as_it_was_called(at):
    # materialize calls the matched ops again from the compiled record of their slots: the
    # same tensors in the same lists and tuples, the feed read thrice the same tensor --
    # which gives the eager numbers only if every source resolves to the right tensor
    def interfere(s, ts):
        if s == 4 and at is not None:
            ts[at].numpy()
    want = _lists(False, interfere)
    got = _lists(True, interfere)
    assert got[0] == want[0]
    for x, y in zip(got[1], want[1]):
        np.testing.assert_array_equal(x, y)
    assert got[2] == (3 if at is None else 2)      # steps 3-5 replay; 4 read a value


def _wired(replayed, variant, steps=6, peek=None):
    """Two same-shaped linear layers on two outside tensors; at step 4 ``variant`` wires one
    op's input (or output) to another tensor of the same shape and dtype, which only the
    matchers' identity checks tell from the recorded step."""
    R.reset()
    R.off = not replayed
    before = R.replayed
    rng = np.random.default_rng(4)
    a, b, c = (rng.standard_normal((4, 6)).astype("float32") for _ in range(3))
    losses = []
    with dygraph.guard():
        l1, l2 = dygraph.Linear(6, 6), dygraph.Linear(6, 6)
        for i, p in enumerate(l1.parameters() + l2.parameters()):
            p.set_value(np.random.default_rng(i).uniform(-0.5, 0.5, p.shape))
        opt = fluid.optimizer.SGD(0.1, parameter_list=l1.parameters() + l2.parameters())
        tracer = mode.tracer
        for s in range(steps):
            odd = s == 4 and variant
            x, y = dygraph.to_variable(a), dygraph.to_variable(b)
            ys = fluid.layers.scale(y, 0.5)         # (stop_gradient, as y is)
            if peek is not None and s == 4:
                peek(ys)
            h1 = (l2 if odd == "param" else l1)(ys if odd == "pending_first_feed" else x)
            h2 = (l1 if odd == "param" else l2)(y)
            first = h2 if odd == "output" else h1
            prod = first * (ys if odd == "pending_feed" else y)
            second = dygraph.to_variable(c) if odd == "feed" else x
            out = dygraph.to_variable(np.zeros((4, 6), "float32")) if odd == "filled_output" \
                else tracer.new_var(None, h2.dtype)
            tracer.trace_op("elementwise_add", {"X": h2, "Y": second}, {"Out": out},
                            {"axis": -1})
            loss = fluid.layers.mean(prod + out)
            loss.backward()
            opt.minimize(loss)
            opt.clear_gradients()
            losses.append(float(loss))
        return losses, [p.numpy() for p in l1.parameters() + l2.parameters()], \
            R.replayed - before


@pytest.mark.parametrize("variant", ["output", "param", "feed", "pending_feed",
                                     "pending_first_feed", "filled_output"])
def test_a_step_wired_unlike_the_recorded_one_runs_eagerly(variant):
    # another earlier output, the other layer's parameter, another outside tensor where the
    # recorded step read one tensor twice, a pending tensor where an outside one was read
    # (also at its first use, where no earlier array of that feed tells them apart):
    # each is a different computation on the same shapes, so the step must not match (a
    # matched one would compute the recorded step). An output tensor that already holds a
    # value is not a new empty tensor either: the matchers take only those
    want = _wired(False, variant)
    got = _wired(True, variant)
    assert got[0] == want[0]
    for x, y in zip(got[1], want[1]):
        np.testing.assert_array_equal(x, y)
    assert got[2] == 2                      # steps 3 and 5; step 4 ran eagerly
    if variant != "filled_output":              # (the variant changed the numbers)
        assert _wired(False, None)[0] != want[0]


def test_a_pending_output_keeps_its_recorded_stop_gradient():
    seen = []
    _wired(True, None, peek=lambda t: seen.append(
        (t._pending is not None, t.stop_gradient, t.shape, t.dtype)))
    assert seen == [(True, True, [4, 6], fluid.VarType.FP32)]


def _late_backward(replayed, steps=6):
    """A step with an op after its loss; at step 4 ``backward`` comes before that op."""
    R.reset()
    R.off = not replayed
    before = R.replayed
    losses = []
    with dygraph.guard():
        lin = dygraph.Linear(8, 3)
        for i, p in enumerate(lin.parameters()):
            p.set_value(np.random.default_rng(i).uniform(-0.5, 0.5, p.shape))
        opt = fluid.optimizer.SGD(0.1, parameter_list=lin.parameters())
        for s in range(steps):
            h = lin(dygraph.to_variable(X))
            loss = fluid.layers.mean(h * h)
            if s == 4:
                loss.backward()
            peak = fluid.layers.reduce_max(h)
            if s != 4:
                loss.backward()
            opt.minimize(loss)
            opt.clear_gradients()
            losses.append((float(loss), float(peak)))
        return losses, [p.numpy() for p in lin.parameters()], R.replayed - before


def test_backward_before_the_steps_last_op_runs_eagerly():
    # backward is deferred only once every op of the step has matched: here the step goes on
    # eagerly, backward included (a deferred one would be lost with the ops still to come)
    want = _late_backward(False)
    got = _late_backward(True)
    assert got[0] == want[0]
    for x, y in zip(got[1], want[1]):
        np.testing.assert_array_equal(x, y)
    assert got[2] == 2
