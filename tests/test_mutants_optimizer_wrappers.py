"""Tests written from mutation testing (issue 28, docs/mutation.md, tenth round) for the wrapping
optimizers of ``fluidlite/optimizer/wrappers.py``: ModelAverage, ExponentialMovingAverage,
LookaheadOptimizer, RecomputeOptimizer (and its dropout seeding), the apply / restore programs.

References: float64 NumPy loops of fluid 1.8's semantics -- the ``average_accumulates`` kernel
(paddle/fluid/operators/average_accumulates_op.h of release/1.8) for ModelAverage's window,
``ema = d * ema + (1 - d) * p`` with the bias correction ``ema / (1 - d**t)`` for the EMA,
Zhang et al.'s Lookahead as fluid 1.8 wrote it (every k-th step both weights become
``alpha * fast + (1 - alpha) * slow``) -- on a model whose gradients are known in closed form
(a linear loss ``sum(w * cw) + sum(v * cv)``: the gradient of w is the feed cw); the program
structure fluid 1.8's python/paddle/fluid/optimizer.py and backward.py build (variable names,
shapes, dtypes, persistable flags, op roles, name scopes, defaults); the plain optimizer as the
reference of RecomputeOptimizer (same gradients, same clip / no_grad_set / startup program).
Models are float64 so that a lost cast or a float32 copy shows; every build runs with
``UnknownAttributeWarning`` as an error (an op given an attribute it does not declare).
Seeded and built in fresh programs (re-runnable in one process).
"""
import contextlib
import re
import warnings

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core.ir import OpRole
from fluidlite.core.registry import UnknownAttributeWarning

O = fluid.optimizer
RNG = np.random.default_rng(2811)
W0 = RNG.uniform(-0.8, 0.8, (2, 3))
V0 = RNG.uniform(-0.8, 0.8, (3,))
FEEDS = [{"cw": RNG.uniform(-1, 1, (2, 3)), "cv": RNG.uniform(-1, 1, (3,))} for _ in range(7)]
LR = 0.1


@contextlib.contextmanager
def strict():
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnknownAttributeWarning)
        yield


def _model(dtype="float64", v_attr=None):
    """w [2, 3], v [3]; loss = sum(w * cw) + sum(v * cv), so d loss / d w = cw."""
    cw = fluid.data("cw", [2, 3], dtype)
    cv = fluid.data("cv", [3], dtype)
    w = fluid.layers.create_parameter(
        [2, 3], dtype, name="w",
        default_initializer=fluid.initializer.NumpyArrayInitializer(W0.astype(dtype)))
    v = fluid.layers.create_parameter(
        [3], dtype, attr=v_attr, name=None if v_attr else "v",
        default_initializer=fluid.initializer.NumpyArrayInitializer(V0.astype(dtype)))
    return fluid.layers.reduce_sum(w * cw) + fluid.layers.reduce_sum(v * cv)


def _sgd_history(steps, lr=LR):
    """SGD's w and v after each step (float64 NumPy)."""
    w, v, hist = W0.copy(), V0.copy(), []
    for f in FEEDS[:steps]:
        w, v = w - lr * f["cw"], v - lr * f["cv"]
        hist.append((w, v))
    return hist


def _build(extra, dtype="float64", **model_kw):
    """SGD(LR).minimize on the model, then ``extra()`` (the wrapper) in the same guard."""
    main, startup = fluid.Program(), fluid.Program()
    with strict(), fluid.program_guard(main, startup), fluid.unique_name.guard():
        loss = _model(dtype, **model_kw)
        O.SGD(LR).minimize(loss)
        obj = extra()
    scope, exe = fluid.Scope(), fluid.Executor()
    exe.run(startup, scope=scope)
    return main, startup, exe, scope, obj


def _run(main, exe, scope, steps, dtype="float64"):
    for f in FEEDS[:steps]:
        exe.run(main, feed={k: x.astype(dtype) for k, x in f.items()}, scope=scope)


def _get(scope, name):
    return np.array(scope.find_var(name).get_tensor())


# -- ModelAverage ------------------------------------------------------------------------------
def _average_ref(params, rate, min_w, max_w):
    """fluid 1.8's average_accumulates kernel over ``params`` (one call per step), then
    ModelAverage's apply: (sum_1 + sum_2 + sum_3) / (num_accumulates + old_num_accumulates).
    The op's in_sum_k and out_sum_k are the same variable, so the kernel's later reads of
    in_sum_1 / in_sum_2 see the values it already wrote (sum_1 includes the current param)."""
    s1 = s2 = s3 = np.zeros_like(params[0])
    n_upd = n_acc = old = 0
    for p in params:
        n_upd += 1
        n_acc += 1
        s1 = s1 + p
        if n_upd % 16384 == 0:
            s2, s1 = s2 + s1, np.zeros_like(p)
        if n_acc >= min_w and n_acc >= min(max_w, int(n_upd * rate)):
            s3, s1, s2 = s1 + s2, np.zeros_like(p), np.zeros_like(p)
            old, n_acc = n_acc, 0
    return (s1 + s2 + s3) / (n_acc + old)


@pytest.mark.parametrize("rate, min_w, max_w", [(1.0, 2, 3), (2.0, 1, 10), (1.0, 1, 2)])
def test_model_average_window_is_fluid_18s(rate, min_w, max_w):
    main, _, exe, scope, ma = _build(lambda: O.ModelAverage(rate, min_average_window=min_w,
                                                            max_average_window=max_w))
    _run(main, exe, scope, 7)
    hist = _sgd_history(7)
    with fluid.scope_guard(scope):
        with ma.apply(exe):
            for i, name in enumerate(("w", "v")):
                got = _get(scope, name)
                assert got.dtype == np.float64
                np.testing.assert_allclose(got, _average_ref([h[i] for h in hist], rate, min_w,
                                                             max_w), rtol=1e-12)
        np.testing.assert_array_equal(_get(scope, "w"), hist[-1][0])      # restored exactly


def test_model_average_program_structure_is_fluid_18s():
    main, startup, _, _, ma = _build(lambda: O.ModelAverage(0.15, name="ma"))
    block = main.global_block()
    ops = [op for op in block.ops if op.type == "average_accumulates"]
    assert sorted(op.input("param")[0] for op in ops) == ["v", "w"]
    op = [op for op in ops if op.input("param") == ["w"]][0]
    # fluid 1.8's defaults: min_average_window = max_average_window = 10000
    assert op.attr("average_window") == pytest.approx(0.15)
    assert op.attr("min_average_window") == 10000 and op.attr("max_average_window") == 10000
    assert op.attr("op_role") == OpRole.Optimize
    assert op.attr("op_namescope") == "/move_average/"
    # the backup of each parameter: "<param>.tmp_N", the parameter's dtype and shape,
    # not persistable, stop_gradient (fluid 1.8's ModelAverage.__init__)
    backup = [p for p in ma.params_grads if p[0].name == "w"][0][1]
    assert re.fullmatch(r"w\.tmp_\d+", backup.name)
    assert backup.dtype == fluid.VarType.FP64 and tuple(backup.shape) == (2, 3)
    assert backup.persistable is False and backup.stop_gradient is True
    assert op.attr("op_role_var") == ["w", backup.name]
    # accumulators named with the optimizer's name; the counters are int64 [1]
    for acc in ("sum_1", "sum_2", "sum_3"):
        var = block.var(f"w_ma_{acc}_0")
        assert var.dtype == fluid.VarType.FP64 and tuple(var.shape) == (2, 3)
        assert op.input("in_" + acc) == [var.name] and op.output("out_" + acc) == [var.name]
    for acc in ("num_accumulates", "old_num_accumulates", "num_updates"):
        var = block.var(f"w_ma_{acc}_0")
        assert var.dtype == fluid.VarType.INT64 and tuple(var.shape) == (1,)
    # the apply program reads the backup and the accumulators as persistable variables
    apply_block = ma.apply_program.global_block()
    assert apply_block.var(backup.name).persistable
    assert apply_block.var("w_ma_num_accumulates_0").persistable
    assert ma.restore_program.global_block().var(backup.name).persistable


def test_model_average_arguments():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        _model()
        with pytest.raises(TypeError, match="regularization"):
            O.ModelAverage(0.15, regularization="l2")
        with pytest.raises(ValueError, match=re.escape(
                "ModelAverage: min_average_window (5) must be <= max_average_window (2)")):
            O.ModelAverage(0.1, min_average_window=5, max_average_window=2)
        ma = O.ModelAverage(0.15)
        with pytest.raises(TypeError, match="^" + re.escape(
                "ModelAverage is not a standalone optimizer: build it after another "
                "optimizer's minimize() and use apply()/restore()") + "$"):
            ma.minimize(None)


# -- ExponentialMovingAverage ------------------------------------------------------------------
def _ema(decay=0.9, **kw):
    def make():
        ema = O.ExponentialMovingAverage(decay, **kw)
        ema.update()
        return ema
    return make


@pytest.mark.parametrize("steps", [1, 3])
def test_ema_apply_is_the_bias_corrected_average(steps):
    main, _, exe, scope, ema = _build(_ema(0.9))
    _run(main, exe, scope, steps)
    hist = _sgd_history(steps)
    d = float(np.float32(0.9))              # the decay variable is float32, as fluid 1.8's
    e = [np.zeros_like(W0), np.zeros_like(V0)]
    for h in hist:
        e = [d * a + (1 - d) * p for a, p in zip(e, h)]
    # the apply program computes 1 - d**t in float32 (the decay and step are float32)
    denom = float(np.float32(1) - np.float32(d) ** np.float32(steps))
    with fluid.scope_guard(scope):
        with ema.apply(exe):
            for i, name in enumerate(("w", "v")):
                got = _get(scope, name)
                assert got.dtype == np.float64
                np.testing.assert_allclose(got, e[i] / denom, rtol=1e-12)
        np.testing.assert_array_equal(_get(scope, "w"), hist[-1][0])
        np.testing.assert_array_equal(_get(scope, "v"), hist[-1][1])


def test_ema_thres_steps_decay_in_float64():
    def make():
        step = fluid.layers.autoincreased_step_counter()
        return _ema(0.95, thres_steps=step)()
    main, _, exe, scope, ema = _build(make)
    _run(main, exe, scope, 3)
    e = np.zeros_like(W0)
    ds = []
    for t, (w, _) in enumerate(_sgd_history(3), start=1):
        d = min(0.95, (1 + t) / (10 + t))
        ds.append(d)
        e = d * e + (1 - d) * w
    np.testing.assert_allclose(_get(scope, "w_ema_0"), e, rtol=1e-6)
    # the decay schedule is LRSched, as fluid 1.8's _lr_schedule_guard
    producers = [op for op in main.global_block().ops
                 if "scheduled_ema_decay_rate" in op.output_arg_names]
    assert producers and all(op.attr("op_role") == OpRole.LRSched for op in producers)


def test_ema_program_structure_is_fluid_18s():
    main, startup, _, _, ema = _build(_ema(0.9, name="ema_a_"))
    block = main.global_block()
    counter = block.var("@EMA_STEP_COUNTER@")
    assert counter.dtype == fluid.VarType.INT64 and tuple(counter.shape) == (1,)
    assert counter.persistable
    shadow = block.var("ema_a_w_ema_0")
    assert shadow.dtype == fluid.VarType.FP64 and tuple(shadow.shape) == (2, 3)
    assert shadow.persistable
    tmp = [t for p, t in ema._params_tmps if p.name == "w"][0]
    assert re.fullmatch(r"ema_a_w\.ema_tmp_\d+", tmp.name)
    assert tmp.dtype == fluid.VarType.FP64 and tuple(tmp.shape) == (2, 3)
    assert tmp.persistable is False and tmp.stop_gradient is True
    # the update ops: Optimize role, [param, tmp] as role var, name scope moving_average
    writes = [op for op in block.ops if "ema_a_w_ema_0" in op.output_arg_names]
    assert writes
    for op in writes:
        assert op.attr("op_role") == OpRole.Optimize
        assert op.attr("op_role_var") == ["w", tmp.name]
        assert re.search(r"/moving_average(_\d+)?/$", op.attr("op_namescope"))
    inits = {op.output("Out")[0]: op for op in startup.global_block().ops}
    assert inits["ema_a_w_ema_0"].attr("value") == 0.0
    assert inits["scheduled_ema_decay_rate"].attr("value") == pytest.approx(0.9)
    apply_block = ema.apply_program.global_block()
    assert apply_block.var(tmp.name).persistable
    assert apply_block.var("@EMA_STEP_COUNTER@").dtype == fluid.VarType.INT64
    assert tuple(apply_block.var("@EMA_STEP_COUNTER@").shape) == (1,)
    for op in apply_block.ops:
        if op.type == "fill_constant":
            assert op.attr("shape") == [1]


def test_ema_default_decay_is_0_999():
    main, startup, _, _, _ = _build(lambda: O.ExponentialMovingAverage())
    inits = {op.output("Out")[0]: op for op in startup.global_block().ops}
    assert inits["scheduled_ema_decay_rate"].attr("value") == pytest.approx(0.999)


def test_ema_arguments():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        _model()
        for decay in (0.0, 1.0, 1):
            O.ExponentialMovingAverage(decay)
        for decay in (-0.1, 1.5, "0.5", True, None):
            with pytest.raises(ValueError, match="^" + re.escape(
                    f"ExponentialMovingAverage: decay must be a float in [0, 1], but received "
                    f"{decay!r}") + "$"):
                O.ExponentialMovingAverage(decay)
        with pytest.raises(TypeError, match="^" + re.escape(
                "ExponentialMovingAverage: thres_steps must be a Variable (a step counter) or "
                "None, but received 3") + "$"):
            O.ExponentialMovingAverage(0.9, thres_steps=3)


# -- LookaheadOptimizer ------------------------------------------------------------------------
def _lookahead_ref(steps, alpha, k):
    # lookahead_alpha is a float32 variable and 1 - alpha is computed in float32 (fluid 1.8)
    alpha, one_minus = float(np.float32(alpha)), float(np.float32(1) - np.float32(alpha))
    fast, slow = [W0.copy(), V0.copy()], [W0.copy(), V0.copy()]
    hist = []
    for t, f in enumerate(FEEDS[:steps], start=1):
        fast = [fast[0] - LR * f["cw"], fast[1] - LR * f["cv"]]
        if t % k == 0:
            slow = [alpha * a + one_minus * s for a, s in zip(fast, slow)]
            fast = [s.copy() for s in slow]
        hist.append((fast, slow))
    return hist


def _lookahead(alpha=None, k=None, decoy=None, dtype="float64"):
    """With ``decoy``: the model's startup program is passed to minimize while ``decoy`` is the
    default startup program."""
    main, startup = fluid.Program(), fluid.Program()
    kw = {key: val for key, val in (("alpha", alpha), ("k", k)) if val is not None}
    with strict(), fluid.unique_name.guard():
        with fluid.program_guard(main, startup):
            loss = _model(dtype)
        with fluid.program_guard(main, decoy if decoy is not None else startup):
            la = O.LookaheadOptimizer(O.SGD(LR), **kw)
            out = la.minimize(loss, startup_program=startup if decoy is not None else None)
    return main, startup, la, out


def test_lookahead_in_float64_against_the_reference():
    main, startup, la, (ops, pg) = _lookahead(alpha=0.3, k=3)
    assert la.type == "lookahead"
    block = main.global_block()
    for name, shape in (("w", (2, 3)), ("v", (3,))):
        slow = block.var(name + "@SLOW")
        assert slow.dtype == fluid.VarType.FP64 and tuple(slow.shape) == shape and \
            slow.persistable
        s_slow = startup.global_block().var(name + "@SLOW")
        assert s_slow.dtype == fluid.VarType.FP64 and tuple(s_slow.shape) == shape
    scope, exe = fluid.Scope(), fluid.Executor()
    exe.run(startup, scope=scope)
    for t, (fast, slow) in enumerate(_lookahead_ref(7, 0.3, 3), start=1):
        _run_one = FEEDS[t - 1]
        exe.run(main, feed=_run_one, scope=scope)
        for i, name in enumerate(("w", "v")):
            assert _get(scope, name).dtype == np.float64
            np.testing.assert_allclose(_get(scope, name), fast[i], rtol=1e-12, atol=1e-15)
            np.testing.assert_allclose(_get(scope, name + "@SLOW"), slow[i], rtol=1e-12,
                                       atol=1e-15)


def test_lookahead_defaults_and_state_variables_are_fluid_18s():
    main, startup, la, _ = _lookahead()
    inits = {op.output("Out")[0]: op for op in startup.global_block().ops}
    assert inits["lookahead_k"].attr("value") == 5
    assert inits["lookahead_alpha"].attr("value") == pytest.approx(0.5)
    assert inits["lookahead_step"].attr("value") == 0
    block = main.global_block()
    assert block.var("lookahead_k").dtype == fluid.VarType.INT32
    assert block.var("lookahead_alpha").dtype == fluid.VarType.FP32
    assert block.var("lookahead_step").dtype == fluid.VarType.INT32
    inc = [op for op in block.ops if op.type == "increment"]
    assert len(inc) == 1 and inc[0].input("X") == ["lookahead_step"] and \
        inc[0].attr("step") == 1.0
    assert [op.type for op in block.ops].count("conditional_block") == 2   # case + default
    for op in block.ops[block.ops.index(inc[0]):]:
        assert op.attr("op_role") == OpRole.Optimize
        if op.type == "fill_constant":
            assert op.attr("shape") == [1]
    eq = [op for op in block.ops if op.type == "equal"][0]
    assert block.var(eq.output("Out")[0]).dtype == fluid.VarType.BOOL


def test_lookahead_startup_program_argument():
    """Every state the rewrite creates is initialised by the startup program given, not by
    the default one (fluid 1.8 put lookahead_k / _alpha / _step in the default startup
    program; fluidlite keeps them with the rest)."""
    decoy = fluid.Program()
    main, startup, _, _ = _lookahead(alpha=0.5, k=2, decoy=decoy)
    inits = {op.output("Out")[0] for op in startup.global_block().ops}
    assert {"w@SLOW", "v@SLOW", "lookahead_k", "lookahead_alpha", "lookahead_step",
            "learning_rate_0"} <= inits
    assert not decoy.global_block().ops
    scope, exe = fluid.Scope(), fluid.Executor()
    exe.run(startup, scope=scope)
    for f in FEEDS[:2]:
        exe.run(main, feed=f, scope=scope)
    fast, slow = _lookahead_ref(2, 0.5, 2)[-1]
    np.testing.assert_allclose(_get(scope, "w@SLOW"), slow[0], rtol=1e-12)


def test_lookahead_arguments():
    with pytest.raises(ValueError, match="^inner optimizer can not be None$"):
        O.LookaheadOptimizer(None)
    for alpha in (-0.1, 1.5, "0.5", True):
        with pytest.raises(ValueError, match="^" + re.escape(
                "alpha should be larger or equal to 0.0, and less or equal than 1.0, but "
                f"received {alpha!r}") + "$"):
            O.LookaheadOptimizer(O.SGD(0.1), alpha=alpha)
    for k in (0, -1, 2.0, True):
        with pytest.raises(ValueError, match="^" + re.escape(
                f"k should be a positive integer, but received {k!r}") + "$"):
            O.LookaheadOptimizer(O.SGD(0.1), k=k)
    for alpha, k in ((0.0, 1), (1.0, 1), (0, 3)):
        la = O.LookaheadOptimizer(O.SGD(0.1), alpha=alpha, k=k)
        assert (la.alpha, la.k) == (alpha, k)


# -- RecomputeOptimizer ------------------------------------------------------------------------
def _mlp(dtype="float64", checkpoint=True):
    """x -> fc(4, tanh) -> fc(1) -> mean; returns loss and the hidden (the checkpoint)."""
    x = fluid.data("x", [-1, 3], dtype)
    init = fluid.initializer.NumpyArrayInitializer
    h = fluid.layers.fc(x, 4, act="tanh", param_attr=fluid.ParamAttr(
        name="w1", initializer=init(RNG_W1.astype(dtype))), bias_attr=False)
    out = fluid.layers.fc(h, 1, param_attr=fluid.ParamAttr(
        name="w2", initializer=init(RNG_W2.astype(dtype))), bias_attr=False)
    return fluid.layers.mean(out), h


RNG_W1 = np.random.default_rng(5).uniform(-1, 1, (3, 4))
RNG_W2 = np.random.default_rng(6).uniform(-1, 1, (4, 1))
X = np.random.default_rng(7).uniform(-2, 2, (5, 3))


def _train_mlp(make_opt, recompute, steps=3, dtype="float64", startup_program=None,
               **minimize_kw):
    main, startup = fluid.Program(), fluid.Program()
    with strict(), fluid.program_guard(main, startup), fluid.unique_name.guard():
        loss, h = _mlp(dtype)
        opt = make_opt()
        if recompute:
            opt = O.RecomputeOptimizer(opt)
            opt._set_checkpoints([h])
        res = opt.minimize(loss, startup_program=startup_program, **minimize_kw)
    scope, exe = fluid.Scope(), fluid.Executor()
    exe.run(startup, scope=scope)
    if startup_program is not None:
        exe.run(startup_program, scope=scope)
    for _ in range(steps):
        exe.run(main, feed={"x": X.astype(dtype)}, scope=scope)
    return [_get(scope, n) for n in ("w1", "w2")], main, startup, opt, res


@pytest.mark.parametrize("kw", [
    {},
    {"no_grad_set": {"w1"}},
    {"parameter_list": ["w1"]},
    {"grad_clip": fluid.clip.GradientClipByValue(0.05)},
], ids=["plain", "no_grad_set", "parameter_list", "minimize_grad_clip"])
def test_recompute_trains_like_the_plain_optimizer(kw):
    make = lambda: O.Momentum(0.2, 0.5)
    got, main, _, _, (ops, pg) = _train_mlp(make, True, **kw)
    want, *_ = _train_mlp(make, False, **kw)
    for g, w_ in zip(got, want):
        np.testing.assert_allclose(g, w_, rtol=1e-12)
    assert [op.type for op in ops] == ["momentum"] * len(ops)
    if kw:
        # the argument mattered
        plain, *_ = _train_mlp(make, False)
        assert any(not np.allclose(a, b) for a, b in zip(got, plain))


def test_recompute_uses_the_wrapped_optimizers_grad_clip():
    clip = fluid.clip.GradientClipByValue(0.05)
    make = lambda: O.SGD(0.5, grad_clip=clip)
    got, *_ = _train_mlp(make, True)
    want, *_ = _train_mlp(make, False)
    plain, *_ = _train_mlp(lambda: O.SGD(0.5), False)
    for g, w_ in zip(got, want):
        np.testing.assert_allclose(g, w_, rtol=1e-12)
    assert any(not np.allclose(a, b) for a, b in zip(got, plain))


def test_recompute_float64_model_and_learning_rate():
    """The wrapped optimizer learns the loss dtype (a float64 learning rate, as the plain
    one) and the wrapper exposes its learning rate as fluid 1.8's did."""
    _, main, _, opt, _ = _train_mlp(lambda: O.SGD(0.5), True, steps=1)
    lr = main.global_block().var("learning_rate_0")
    assert lr.dtype == fluid.VarType.FP64
    assert opt._learning_rate == 0.5
    with fluid.program_guard(main):
        assert opt._global_learning_rate() is lr
    assert opt.type == "recompute"


def test_recompute_startup_program_argument():
    other = fluid.Program()
    got, main, startup, _, _ = _train_mlp(lambda: O.Momentum(0.2, 0.5), True,
                                          startup_program=other)
    inits = {n for op in other.global_block().ops for n in op.output_arg_names}
    assert {"w1_velocity_0", "w2_velocity_0", "learning_rate_0"} <= inits
    assert not inits & {n for op in startup.global_block().ops for n in op.output_arg_names}
    want, *_ = _train_mlp(lambda: O.Momentum(0.2, 0.5), False)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12)


def test_recompute_failed_minimize_changes_neither_program():
    """The learning rate Variable of another program fails after the accumulators were made:
    the main and the startup programs are left as they were."""
    other = fluid.Program()
    with fluid.program_guard(other, fluid.Program()):
        lr = fluid.layers.create_global_var([1], 0.1, "float64", persistable=True)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        loss, h = _mlp()
        opt = O.RecomputeOptimizer(O.Momentum(lr, 0.9))
        opt._set_checkpoints([h])
        n_main, n_start = len(main.global_block().ops), len(startup.global_block().ops)
        vars_main = set(main.global_block().vars)
        with pytest.raises(TypeError, match="learning rate variable is create outside"):
            opt.minimize(loss)
    assert len(main.global_block().ops) == n_main
    assert len(startup.global_block().ops) == n_start
    assert set(main.global_block().vars) == vars_main


def test_recompute_backward_then_apply_optimize_and_apply_gradients():
    for apply in ("apply_optimize", "apply_gradients"):
        main, startup = fluid.Program(), fluid.Program()
        other = fluid.Program()
        with strict(), fluid.program_guard(main, startup), fluid.unique_name.guard():
            loss, h = _mlp()
            opt = O.RecomputeOptimizer(O.Momentum(0.2, 0.5))
            opt._set_checkpoints([h])
            calls = []
            pg = opt.backward(loss, parameter_list=["w1", "w2"],
                              callbacks=[lambda block, context: calls.append(1)])
            assert calls, "the user's callback was not called"
            assert sorted(p.name for p, _ in pg) == ["w1", "w2"]
            if apply == "apply_optimize":
                ops = opt.apply_optimize(loss, other, pg)
                inits = {n for op in other.global_block().ops for n in op.output_arg_names}
                assert {"w1_velocity_0", "learning_rate_0"} <= inits
            else:
                ops = opt.apply_gradients(pg)
        assert [op.type for op in ops] == ["momentum", "momentum"]
        assert [op.input("Param")[0] for op in ops] == ["w1", "w2"]


def test_recompute_backward_no_grad_set_and_error_clip():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        loss, h = _mlp()
        opt = O.RecomputeOptimizer(O.SGD(0.1))
        opt._set_checkpoints([h])
        pg = opt.backward(loss, no_grad_set={"w2"})
    assert [p.name for p, _ in pg] == ["w1"]
    # error clip (fluid's error_clip_callback is always added): h's gradient is clipped
    grads = []
    for recompute in (True, False):
        main, startup = fluid.Program(), fluid.Program()
        with fluid.program_guard(main, startup), fluid.unique_name.guard():
            loss, h = _mlp()
            h.error_clip = fluid.clip.ErrorClipByValue(max=1e-3)
            opt = O.SGD(0.1)
            if recompute:
                opt = O.RecomputeOptimizer(opt)
                opt._set_checkpoints([h])
            opt.backward(loss)
        exe, scope = fluid.Executor(), fluid.Scope()
        exe.run(startup, scope=scope)
        grads.append(exe.run(main, feed={"x": X}, fetch_list=["w1@GRAD"], scope=scope)[0])
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-12)
    # clipped to 1e-3 per element of h's gradient: |dw1| <= sum |x| * 1e-3
    assert np.abs(grads[0]).max() <= np.abs(X).sum(0).max() * 1e-3 + 1e-15


def test_recompute_failed_backward_leaves_the_program():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, 8], "float32")
        d = fluid.layers.dropout(fluid.layers.fc(x, 4), 0.5)
        loss = fluid.layers.mean(d)
        opt = O.RecomputeOptimizer(O.SGD(0.1))
        opt._set_checkpoints([d])
        n = len(main.global_block().ops)
        with pytest.raises(TypeError, match=r"parameter_list\[0\]"):
            opt.backward(loss, parameter_list=[3])       # fails after the seed ops went in
    assert len(main.global_block().ops) == n


def test_recompute_arguments():
    with pytest.raises(TypeError, match="^" + re.escape(
            "RecomputeOptimizer wraps an Optimizer, but received 'sgd'") + "$"):
        O.RecomputeOptimizer("sgd")
    opt = O.RecomputeOptimizer(O.SGD(0.1))
    with pytest.raises(TypeError, match="^" + re.escape(
            "checkpoints must be a list of Variables or names, but received str") + "$"):
        opt._set_checkpoints("h")
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        loss, h = _mlp()
        for call in (lambda: opt.backward(loss), lambda: opt.minimize(loss)):
            with pytest.raises(ValueError, match="^You should call _set_checkpoints first$"):
                call()
        opt._set_checkpoints((h,))
        with pytest.raises(TypeError, match="^The loss should be an Variable, but received str$"):
            opt.backward("loss")
    with pytest.raises(NotImplementedError, match="^" + re.escape(
            "load function is not supported by Recompute Optimizer for now; restore "
            "parameters and optimizer state with fluid.io.load_persistables or fluid.load "
            "instead") + "$"):
        opt.load({})


def test_recompute_seed_ops_are_fluid_18s():
    """fluid 1.8's modify_forward_desc_for_recompute: an int32 [1] seed before each dropout,
    seed = the dropout's fixed seed (0 when not fixed), the dropout reading it; the seed op
    keeps the dropout's role."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, 8], "float32")
        h = fluid.layers.fc(x, 8)
        d1 = fluid.layers.dropout(h, 0.5, seed=11)
        d2 = fluid.layers.dropout(d1, 0.3)
        loss = fluid.layers.mean(fluid.layers.fc(d2, 1))
        opt = O.RecomputeOptimizer(O.SGD(0.1))
        opt._set_checkpoints([d1])
        opt.minimize(loss)
    block = main.global_block()
    ops = block.ops
    seeds = [i for i, op in enumerate(ops) if op.type == "seed"]
    assert len(seeds) == 2
    for i, fixed, prob in zip(seeds, (11, 0), (0.5, 0.3)):
        seed, drop = ops[i], ops[i + 1]
        assert drop.type == "dropout" and drop.attr("dropout_prob") == pytest.approx(prob)
        assert seed.attr("seed") == fixed
        assert drop.input("Seed") == seed.output("Out")
        assert drop.attr("fix_seed") is False and drop.attr("seed") == 0
        assert seed.attr("op_role") == drop.attr("op_role") == OpRole.Forward
        out = block.var(seed.output("Out")[0])
        assert out.dtype == fluid.VarType.INT32 and tuple(out.shape) == (1,)
        assert re.fullmatch(r"seed_\d+\.tmp_\d+", out.name)       # fluid 1.8's naming
        assert drop.input("X") and drop.output("Out") and drop.output("Mask")
    assert [op.type for op in ops].count("dropout") == 3      # d2 is replayed, d1 is kept
    main.lint()


def test_recompute_seeds_only_unseeded_dropouts_with_fluids_seed_rule():
    """A dropout that already reads a Seed keeps it (no second seed op); an unfixed dropout's
    seed op gets 0 whatever its ``seed`` attr (fluid 1.8: ``0 if fix_seed is False``)."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, 8], "float32")
        h = fluid.layers.fc(x, 8)
        block = main.global_block()
        own = block.create_var(name="own_seed", dtype="int32", shape=[1])
        block.append_op(type="seed", outputs={"Out": [own]}, attrs={"seed": 3})
        out = block.create_var(name="d0_out", dtype="float32", shape=h.shape)
        mask = block.create_var(name="d0_mask", dtype="uint8", shape=h.shape)
        block.append_op(type="dropout", inputs={"X": [h], "Seed": [own]},
                        outputs={"Out": [out], "Mask": [mask]},
                        attrs={"dropout_prob": 0.5, "fix_seed": False, "seed": 0})
        d1 = fluid.layers.dropout(out, 0.3)
        block.ops[-1]._set_attr("seed", 7)          # not fixed: the attr is ignored
        loss = fluid.layers.mean(fluid.layers.fc(d1, 1))
        opt = O.RecomputeOptimizer(O.SGD(0.1))
        opt._set_checkpoints([h])
        opt.minimize(loss)
    ops = block.ops
    seeds = [op for op in ops if op.type == "seed"]
    assert [op.attr("seed") for op in seeds] == [3, 0]
    drops = [op for op in ops if op.type == "dropout"]
    assert drops[0].input("Seed") == ["own_seed"]
    assert drops[1].input("Seed") == seeds[1].output("Out")


def test_recompute_failed_minimize_with_a_startup_program_leaves_it():
    other_lr = fluid.Program()
    with fluid.program_guard(other_lr, fluid.Program()):
        lr = fluid.layers.create_global_var([1], 0.1, "float64", persistable=True)
    main, startup, given = fluid.Program(), fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        loss, h = _mlp()
        opt = O.RecomputeOptimizer(O.Momentum(lr, 0.9))
        opt._set_checkpoints([h])
        with pytest.raises(TypeError, match="learning rate variable is create outside"):
            opt.minimize(loss, startup_program=given)
    assert not given.global_block().ops and not given.global_block().vars
