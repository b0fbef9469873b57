"""Optimizers through minimize(): each against a closed-form NumPy update over several steps,
plus the pass structure (names, roles, order, per-parameter learning rate, trainable=False)."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core.ir import OpRole

RNG = np.random.default_rng(42)
W0 = RNG.uniform(0.1, 0.6, (4, 3)).astype("float32")
B0 = np.array([0.2, -0.1, 0.3], "float32")
BATCHES = [RNG.uniform(-1, 1, (5, 4)).astype("float32") for _ in range(4)]


def net(w_attr=None, b_attr=None, dtype="float32"):
    """fc(4 -> 3, relu) + mean; weights fixed by NumpyArrayInitializer."""
    x = fluid.data("x", [-1, 4], dtype)
    w_attr = w_attr or fluid.ParamAttr()
    b_attr = b_attr or fluid.ParamAttr()
    w_attr.initializer = fluid.initializer.NumpyArrayInitializer(W0.astype(dtype))
    b_attr.initializer = fluid.initializer.NumpyArrayInitializer(B0.astype(dtype))
    y = fluid.layers.fc(x, 3, act="relu", param_attr=w_attr, bias_attr=b_attr)
    return fluid.layers.mean(y)


def grads(w, b, x):
    """d mean(relu(x @ w + b)) / d(w, b)."""
    h = x @ w + b
    dh = (h > 0) / h.size
    return x.T @ dh, dh.sum(0)


def train(make_opt, steps=4, **net_kw):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        loss = net(**net_kw)
        opt = make_opt()
        opt.minimize(loss)
    scope = fluid.Scope()
    exe = fluid.Executor()
    exe.run(startup, scope=scope)
    hist = []
    for xb in BATCHES[:steps]:
        exe.run(main, feed={"x": xb.astype(net_kw.get("dtype", "float32"))}, scope=scope)
        hist.append([np.array(scope.find_var(n).get_tensor()) for n in ("fc_0.w_0", "fc_0.b_0")])
    return hist, main, startup, opt


def reference(update, steps=4):
    """``update(key, p, g) -> p`` (keeps its own state per key)."""
    w, b = W0.astype("float64"), B0.astype("float64")
    hist = []
    for xb in BATCHES[:steps]:
        gw, gb = grads(w, b, xb.astype("float64"))
        w, b = update("w", w, gw), update("b", b, gb)
        hist.append([w, b])
    return hist


def assert_same(hist, ref, rtol=1e-4, atol=1e-6):
    for step, (got, want) in enumerate(zip(hist, ref)):
        for g, w, name in zip(got, want, ("w", "b")):
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol,
                                       err_msg=f"{name} after step {step + 1}")
    assert not np.allclose(hist[0][0], hist[-1][0]), "parameters never moved"


class State(dict):
    def get_(self, key, name, like, value=0.0):
        return self.setdefault((key, name), np.full_like(like, value))


# -- update rules -----------------------------------------------------------------------------
def sgd_ref(lr):
    return lambda k, p, g: p - lr * g


def momentum_ref(lr, mu, nesterov=False):
    s = State()

    def upd(k, p, g):
        v = s[(k, "v")] = mu * s.get_(k, "v", p) + g
        return p - (g + mu * v) * lr if nesterov else p - lr * v
    return upd


def lars_ref(lr, mu, coeff, wd):
    s = State()

    def upd(k, p, g):
        pn, gn = np.linalg.norm(p), np.linalg.norm(g)
        llr = lr * coeff * pn / (gn + wd * pn) if pn > 0 and gn > 0 else lr
        v = s[(k, "v")] = mu * s.get_(k, "v", p) + llr * (g + wd * p)
        return p - v
    return upd


def adagrad_ref(lr, eps, init):
    s = State()

    def upd(k, p, g):
        m = s[(k, "m")] = s.get_(k, "m", p, init) + g * g
        return p - lr * g / (np.sqrt(m) + eps)
    return upd


def decayed_adagrad_ref(lr, decay, eps):
    s = State()

    def upd(k, p, g):
        m = s[(k, "m")] = decay * s.get_(k, "m", p) + (1 - decay) * g * g
        return p - lr * g / (np.sqrt(m) + eps)
    return upd


def adam_ref(lr, b1, b2, eps):
    s = State()

    def upd(k, p, g):
        t = s[(k, "t")] = s.get((k, "t"), 0) + 1
        b1p, b2p = b1 ** t, b2 ** t           # the accumulators start at beta, not 1
        m1 = s[(k, "m1")] = b1 * s.get_(k, "m1", p) + (1 - b1) * g
        m2 = s[(k, "m2")] = b2 * s.get_(k, "m2", p) + (1 - b2) * g * g
        lr_t = lr * np.sqrt(1 - b2p) / (1 - b1p)
        return p - lr_t * m1 / (np.sqrt(m2) + eps * np.sqrt(1 - b2p))
    return upd


def adamax_ref(lr, b1, b2, eps):
    s = State()

    def upd(k, p, g):
        t = s[(k, "t")] = s.get((k, "t"), 0) + 1
        m = s[(k, "m")] = b1 * s.get_(k, "m", p) + (1 - b1) * g
        u = s[(k, "u")] = np.maximum(b2 * s.get_(k, "u", p) + eps, np.abs(g))
        return p - lr / (1 - b1 ** t) * m / u
    return upd


def adadelta_ref(lr, rho, eps):
    s = State()

    def upd(k, p, g):
        eg = s[(k, "eg")] = rho * s.get_(k, "eg", p) + (1 - rho) * g * g
        dx = -np.sqrt((s.get_(k, "edx", p) + eps) / (eg + eps)) * g
        s[(k, "edx")] = rho * s[(k, "edx")] + (1 - rho) * dx * dx
        return p + lr * dx
    return upd


def rmsprop_ref(lr, rho, eps, momentum, centered):
    s = State()

    def upd(k, p, g):
        ms = s[(k, "ms")] = rho * s.get_(k, "ms", p) + (1 - rho) * g * g
        if centered:
            mg = s[(k, "mg")] = rho * s.get_(k, "mg", p) + (1 - rho) * g
            denom = np.sqrt(ms - mg * mg + eps)
        else:
            denom = np.sqrt(ms + eps)
        mom = s[(k, "mom")] = momentum * s.get_(k, "mom", p) + lr * g / denom
        return p - mom
    return upd


def ftrl_ref(lr, l1, l2):
    s = State()

    def upd(k, p, g):
        n = s.get_(k, "n", p)
        n2 = n + g * g
        z = s[(k, "z")] = s.get_(k, "z", p) + g - (np.sqrt(n2) - np.sqrt(n)) / lr * p
        s[(k, "n")] = n2
        return np.where(np.abs(z) > l1, (l1 * np.sign(z) - z) / (np.sqrt(n2) / lr + 2 * l2), 0.0)
    return upd


def lamb_ref(lr, wd, b1, b2, eps, excluded):
    s = State()

    def upd(k, p, g):
        m1 = s[(k, "m1")] = b1 * s.get_(k, "m1", p) + (1 - b1) * g
        m2 = s[(k, "m2")] = b2 * s.get_(k, "m2", p) + (1 - b2) * g * g
        r = m1 / (np.sqrt(m2) + eps) + (0.0 if k in excluded else wd) * p
        pn, rn = np.linalg.norm(p), np.linalg.norm(r)
        trust = pn / rn if pn > 0 and rn > 0 else 1.0
        return p - lr * trust * r
    return upd


O = fluid.optimizer
def _cases():
    # built afresh for each test: the reference update rules keep their state (accumulators) in
    # closures, and a test may run more than once in one process (mutation testing, docs/mutation.md)
    return {
    "sgd": (lambda: O.SGD(0.1), sgd_ref(0.1)),
    "momentum": (lambda: O.Momentum(0.1, 0.9), momentum_ref(0.1, 0.9)),
    "nesterov": (lambda: O.MomentumOptimizer(0.1, momentum=0.9, use_nesterov=True),
                 momentum_ref(0.1, 0.9, True)),
    "lars": (lambda: O.LarsMomentum(0.1, 0.9, lars_coeff=0.01, lars_weight_decay=0.0005),
             lars_ref(0.1, 0.9, 0.01, 0.0005)),
    "adagrad": (lambda: O.Adagrad(0.1, epsilon=1e-6, initial_accumulator_value=0.1),
                adagrad_ref(0.1, 1e-6, 0.1)),
    "decayed_adagrad": (lambda: O.DecayedAdagrad(0.1, decay=0.9), decayed_adagrad_ref(0.1, 0.9,
                                                                                      1e-6)),
    "adam": (lambda: O.Adam(0.01), adam_ref(0.01, 0.9, 0.999, 1e-8)),
    "adam_lazy": (lambda: O.AdamOptimizer(0.01, beta1=0.8, beta2=0.99, lazy_mode=True),
                  adam_ref(0.01, 0.8, 0.99, 1e-8)),
    "adamax": (lambda: O.Adamax(0.01), adamax_ref(0.01, 0.9, 0.999, 1e-8)),
    "adadelta": (lambda: O.Adadelta(0.5, epsilon=1e-6, rho=0.9), adadelta_ref(0.5, 0.9, 1e-6)),
    "rmsprop": (lambda: O.RMSProp(0.01, rho=0.9, momentum=0.5), rmsprop_ref(0.01, 0.9, 1e-6, 0.5,
                                                                            False)),
    "rmsprop_centered": (lambda: O.RMSPropOptimizer(0.01, rho=0.9, momentum=0.5, centered=True),
                         rmsprop_ref(0.01, 0.9, 1e-6, 0.5, True)),
    "ftrl": (lambda: O.Ftrl(0.1, l1=0.001, l2=0.1), ftrl_ref(0.1, 0.001, 0.1)),
    "lamb": (lambda: O.Lamb(0.01, lamb_weight_decay=0.01,
                            exclude_from_weight_decay_fn=lambda p: p.name.endswith(".b_0")),
             lamb_ref(0.01, 0.01, 0.9, 0.999, 1e-6, {"b"})),
}


CASES = _cases()


@pytest.mark.parametrize("case", sorted(CASES))
def test_optimizer_matches_closed_form(case):
    make_opt, upd = _cases()[case]
    hist, main, _, _ = train(make_opt)
    assert_same(hist, reference(upd))
    assert all(h.dtype == np.float32 for step in hist for h in step)


def test_ftrl_uses_l2_not_l1():
    """fluid 1.8 passed l1 as l2; fluidlite passes l2 (docs/compatibility.md)."""
    _, main, _, _ = train(lambda: O.Ftrl(0.1, l1=0.001, l2=0.1), steps=1)
    op = [op for op in main.global_block().ops if op.type == "ftrl"][0]
    assert op.attr("l1") == 0.001 and op.attr("l2") == 0.1


def test_adadelta_learning_rate_one_is_fluid_18():
    """With learning_rate=1.0 the update equals fluid 1.8's (which ignored the rate)."""
    hist, *_ = train(lambda: O.Adadelta(1.0, rho=0.9))
    assert_same(hist, reference(adadelta_ref(1.0, 0.9, 1e-6)))


def test_adam_beta_variables():
    def make():
        b1 = fluid.layers.create_global_var([1], 0.9, "float32", persistable=True, name="b1")
        b2 = fluid.layers.create_global_var([1], 0.999, "float32", persistable=True, name="b2")
        return O.Adam(0.01, beta1=b1, beta2=b2)
    hist, main, startup, _ = train(make)
    assert_same(hist, reference(adam_ref(0.01, 0.9, 0.999, 1e-8)))
    op = [op for op in main.global_block().ops if op.type == "adam"][0]
    assert op.input("Beta1Tensor") == ["b1"] and op.input("Beta2Tensor") == ["b2"]


# -- structure --------------------------------------------------------------------------------
def test_accumulators_named_like_fluid_and_initialised_in_startup():
    _, main, startup, opt = train(lambda: O.Adam(0.01, beta1=0.8), steps=1)
    block = main.global_block()
    for p in ("fc_0.w_0", "fc_0.b_0"):
        for acc in ("moment1", "moment2", "beta1_pow_acc", "beta2_pow_acc"):
            v = block.var(f"{p}_{acc}_0")
            assert v.persistable and v.belong_to_optimizer
    assert block.var("fc_0.w_0_beta1_pow_acc_0").shape == (1,)
    inits = {op.output("Out")[0]: op for op in startup.global_block().ops}
    assert inits["fc_0.w_0_beta1_pow_acc_0"].type == "fill_constant"
    assert inits["fc_0.w_0_beta1_pow_acc_0"].attr("value") == pytest.approx(0.8)
    assert inits["fc_0.w_0_beta2_pow_acc_0"].attr("value") == pytest.approx(0.999)
    assert inits["fc_0.w_0_moment1_0"].attr("value") == 0.0
    assert inits["learning_rate_0"].attr("value") == pytest.approx(0.01)
    lr = block.var("learning_rate_0")
    assert lr.persistable and lr.shape == (1,) and lr.dtype == fluid.VarType.FP32
    assert sorted(opt.get_opti_var_name_list())[:2] == ["fc_0.b_0_beta1_pow_acc_0",
                                                        "fc_0.b_0_beta2_pow_acc_0"]


def test_optimizer_name_prefixes_accumulators():
    _, main, _, _ = train(lambda: O.Momentum(0.1, 0.9, name="myopt"), steps=1)
    assert main.global_block().has_var("fc_0.w_0_myopt_velocity_0")


def test_update_ops_roles_namescope_and_returned_values():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        loss = net()
        ops, params_grads = O.SGD(0.1).minimize(loss)
    assert [op.type for op in ops] == ["sgd", "sgd"]
    # update ops follow the sorted parameter names
    assert [op.input("Param")[0] for op in ops] == ["fc_0.b_0", "fc_0.w_0"]
    for op in ops:
        assert op.attr("op_role") == OpRole.Optimize
        assert op.attr("op_namescope").startswith("/optimizer")
        assert op.attr("op_role_var") == [op.input("Param")[0], op.input("Grad")[0]]
    # minimize returns the raw backward pairs
    assert {(p.name, g.name) for p, g in params_grads} == {
        ("fc_0.w_0", "fc_0.w_0@GRAD"), ("fc_0.b_0", "fc_0.b_0@GRAD")}


def test_per_parameter_learning_rate_scale_op():
    hist, main, _, _ = train(lambda: O.SGD(0.1),
                             w_attr=fluid.ParamAttr(learning_rate=0.5))
    scale_ops = [op for op in main.global_block().ops if op.type == "scale"]
    assert len(scale_ops) == 1
    op = scale_ops[0]
    assert op.input("X") == ["learning_rate_0"] and op.attr("scale") == 0.5
    assert op.attr("op_role") == OpRole.LRSched | OpRole.Optimize
    assert op.attr("op_namescope").startswith("/optimizer") and \
        op.attr("op_namescope").endswith("scale_with_param_lr/")
    sgd_w = [o for o in main.global_block().ops if o.type == "sgd" and
             o.input("Param") == ["fc_0.w_0"]][0]
    assert sgd_w.input("LearningRate") == op.output("Out")
    lrs = {"w": 0.05, "b": 0.1}
    assert_same(hist, reference(lambda k, p, g: p - lrs[k] * g))


def test_non_trainable_parameter_is_never_updated():
    hist, main, _, _ = train(lambda: O.Adam(0.01),
                             b_attr=fluid.ParamAttr(trainable=False))
    assert all(np.array_equal(step[1], B0) for step in hist)
    assert not np.array_equal(hist[-1][0], W0)
    updated = [op.input("Param")[0] for op in main.global_block().ops if op.type == "adam"]
    assert updated == ["fc_0.w_0"]
    assert not main.global_block().has_var("fc_0.b_0_moment1_0")


def test_float64_model_gets_float64_learning_rate():
    hist, main, _, _ = train(lambda: O.SGD(0.1), dtype="float64")
    assert main.global_block().var("learning_rate_0").dtype == fluid.VarType.FP64
    assert hist[0][0].dtype == np.float64
    assert_same(hist, reference(sgd_ref(0.1)), rtol=1e-10)


def test_learning_rate_must_be_float_or_variable():
    with pytest.raises(TypeError, match="learning rate should be float or Variable"):
        O.SGD(1)
    with pytest.raises(TypeError, match="learning rate should be float or Variable"):
        O.Adam("0.1")
    O.SGD(np.float32(0.1))    # numpy floats are accepted


def test_variable_learning_rate_of_another_program_is_rejected():
    other = fluid.Program()
    with fluid.program_guard(other, fluid.Program()):
        lr = fluid.layers.create_global_var([1], 0.1, "float32", persistable=True)
    opt = O.SGD(lr)
    with pytest.raises(TypeError, match="learning rate variable is create outside optimizer"):
        opt.minimize(net())


def test_minimize_twice_with_the_same_optimizer_fails_clearly():
    loss = net()
    opt = O.Momentum(0.1, 0.9)
    opt.minimize(loss)
    # issue 28: in the same program the second update is refused first, naming the parameter
    with pytest.raises(RuntimeError, match="'fc_0.b_0' is already updated by the 'momentum'"):
        opt.minimize(loss)
    # in another program holding the same parameter names, the instance's accumulators clash
    with fluid.program_guard(fluid.Program(), fluid.Program()), fluid.unique_name.guard():
        loss2 = net()
        with pytest.raises(RuntimeError, match="Accumulator velocity already exists"):
            opt.minimize(loss2)


def test_bad_arguments():
    with pytest.raises(TypeError, match="The loss should be an Variable"):
        O.SGD(0.1).minimize("loss")
    with pytest.raises(TypeError, match="'grad_clip' should be an instance of GradientClipBase"):
        O.SGD(0.1, grad_clip=1.0)
    with pytest.raises(TypeError, match="'grad_clip' should be an instance"):
        O.SGD(0.1).minimize(net(), grad_clip="clip")
    with pytest.raises(ValueError, match="rho is not set"):
        O.Adadelta(0.1, rho=None)
    with pytest.raises(ValueError, match="momentum is not set"):
        O.Momentum(0.1, None)
    with pytest.raises(TypeError, match="exclude_from_weight_decay_fn"):
        O.Lamb(0.1, exclude_from_weight_decay_fn=3)


def test_apply_gradients_on_explicit_pairs():
    """backward + apply_gradients is the same as minimize (a None grad is skipped)."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        loss = net()
        opt = O.SGD(0.1)
        pg = opt.backward(loss)
        extra = fluid.default_main_program().global_block().create_parameter(
            shape=[2], dtype="float32", name="unused")
        ops = opt.apply_gradients(pg + [(extra, None)])
    assert [op.input("Param")[0] for op in ops] == ["fc_0.b_0", "fc_0.w_0"]


# -- averaging and wrappers -------------------------------------------------------------------
def _sgd_weights(steps):
    """SGD(0.1) weights after each step (NumPy)."""
    return [w for w, _ in reference(sgd_ref(0.1), steps)]


def _build_with(extra):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        loss = net()
        fluid.optimizer.SGD(0.1).minimize(loss)
        obj = extra()
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    return main, exe, scope, obj


def _param(scope, name="fc_0.w_0"):
    return np.array(scope.find_var(name).get_tensor())


@pytest.mark.parametrize("steps", [3, 4])
def test_model_average_is_the_window_mean(steps):
    main, exe, scope, ma = _build_with(lambda: O.ModelAverage(0.15, min_average_window=2,
                                                              max_average_window=3))
    ops = [op for op in main.global_block().ops if op.type == "average_accumulates"]
    assert len(ops) == 2 and ops[0].attr("op_namescope") == "/move_average/"
    assert main.global_block().var("fc_0.w_0_num_updates_0").dtype == fluid.VarType.INT64
    for xb in BATCHES[:steps]:
        exe.run(main, feed={"x": xb}, scope=scope)
    ws = _sgd_weights(steps)
    # windows roll every 2 steps: after 3 steps the mean covers w1..w3, after 4 only w3, w4
    want = np.mean(ws, axis=0) if steps == 3 else (ws[2] + ws[3]) / 2
    with fluid.scope_guard(scope):
        with ma.apply(exe):
            np.testing.assert_allclose(_param(scope), want, rtol=1e-5)
        np.testing.assert_allclose(_param(scope), ws[-1], rtol=1e-5)   # restored
        with ma.apply(exe, need_restore=False):
            pass
        np.testing.assert_allclose(_param(scope), want, rtol=1e-5)
        ma.restore(exe)
        np.testing.assert_allclose(_param(scope), ws[-1], rtol=1e-5)


def test_model_average_skips_params_without_do_model_average_and_validates():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        loss = net(b_attr=fluid.ParamAttr(do_model_average=False))
        fluid.optimizer.SGD(0.1).minimize(loss)
        ma = O.ModelAverage(0.15)
        assert [p.name for p, _ in ma.params_grads] == ["fc_0.w_0"]
        with pytest.raises(ValueError, match="min_average_window"):
            O.ModelAverage(0.1, min_average_window=5, max_average_window=2)
        with pytest.raises(TypeError, match="not a standalone optimizer"):
            ma.minimize(loss)


def test_exponential_moving_average_update_apply_restore():
    def make():
        ema = O.ExponentialMovingAverage(0.9)
        ema.update()
        return ema
    main, exe, scope, ema = _build_with(make)
    assert main.global_block().ops[0].type == "increment"     # @EMA_STEP_COUNTER@
    ws = _sgd_weights(3)
    e = np.zeros_like(ws[0])
    for xb, w in zip(BATCHES[:3], ws):
        exe.run(main, feed={"x": xb}, scope=scope)
        e = 0.9 * e + 0.1 * w
        np.testing.assert_allclose(_param(scope, "fc_0.w_0_ema_0"), e, rtol=1e-5)
    with fluid.scope_guard(scope):
        for _ in range(2):     # applying twice gives the same values (no compounding)
            with ema.apply(exe):
                np.testing.assert_allclose(_param(scope), e / (1 - 0.9 ** 3), rtol=1e-5)
            np.testing.assert_allclose(_param(scope), ws[-1], rtol=1e-6)
        np.testing.assert_allclose(_param(scope, "fc_0.w_0_ema_0"), e, rtol=1e-5)


def test_exponential_moving_average_with_thres_steps():
    def make():
        step = fluid.layers.autoincreased_step_counter()
        ema = O.ExponentialMovingAverage(0.999, thres_steps=step)
        ema.update()
        return ema
    main, exe, scope, ema = _build_with(make)
    ws = _sgd_weights(3)
    e = np.zeros_like(ws[0])
    for t, (xb, w) in enumerate(zip(BATCHES[:3], ws), start=1):
        exe.run(main, feed={"x": xb}, scope=scope)
        d = min(0.999, (1 + t) / (10 + t))
        np.testing.assert_allclose(_param(scope, "scheduled_ema_decay_rate"), [d], rtol=1e-6)
        e = d * e + (1 - d) * w
    np.testing.assert_allclose(_param(scope, "fc_0.w_0_ema_0"), e, rtol=1e-5)
    with pytest.raises(ValueError, match="decay must be a float in"):
        O.ExponentialMovingAverage(1.5)


def test_lookahead_syncs_every_k_steps():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        loss = net()
        la = O.LookaheadOptimizer(O.SGD(0.1), alpha=0.25, k=2)
        ops, pg = la.minimize(loss)
    assert [op.type for op in ops] == ["sgd", "sgd"] and len(pg) == 2
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    np.testing.assert_allclose(_param(scope, "fc_0.w_0@SLOW"), W0)
    fast = [W0.astype("float64"), B0.astype("float64")]
    slow = [f.copy() for f in fast]
    for t, xb in enumerate(BATCHES[:4], start=1):
        fast = [f - 0.1 * g for f, g in zip(fast, grads(fast[0], fast[1], xb))]
        if t % 2 == 0:
            slow = [0.25 * f + 0.75 * s for f, s in zip(fast, slow)]
            fast = [s.copy() for s in slow]
        exe.run(main, feed={"x": xb}, scope=scope)
        for i, name in enumerate(("fc_0.w_0", "fc_0.b_0")):
            np.testing.assert_allclose(_param(scope, name), fast[i], rtol=1e-5)
            np.testing.assert_allclose(_param(scope, name + "@SLOW"), slow[i], rtol=1e-5)


def test_lookahead_validation():
    with pytest.raises(ValueError, match="inner optimizer can not be None"):
        O.LookaheadOptimizer(None)
    with pytest.raises(ValueError, match="alpha should be larger or equal to 0.0"):
        O.LookaheadOptimizer(O.SGD(0.1), alpha=1.5)
    with pytest.raises(ValueError, match="k should be a positive integer"):
        O.LookaheadOptimizer(O.SGD(0.1), k=0)


def test_minimize_startup_program_and_parameter_list():
    main, startup, other = fluid.Program(), fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        loss = net()
        ops, pg = O.Momentum(0.1, 0.9).minimize(loss, startup_program=other,
                                                  parameter_list=["fc_0.w_0"])
    assert [op.input("Param")[0] for op in ops] == ["fc_0.w_0"]
    assert [p.name for p, _ in pg] == ["fc_0.w_0"]
    other_inits = {op.output("Out")[0] for op in other.global_block().ops}
    assert other_inits == {"fc_0.w_0_velocity_0", "learning_rate_0"}
    assert not {"fc_0.w_0_velocity_0"} & {op.output("Out")[0]
                                            for op in startup.global_block().ops}


def test_recompute_optimizer_matches_the_plain_one():
    def make():
        opt = O.RecomputeOptimizer(O.Adam(0.01))
        block = fluid.default_main_program().global_block()
        opt._set_checkpoints([block.var("fc_0.tmp_1")])
        return opt
    hist, main, _, _ = train(make)
    assert_same(hist, reference(adam_ref(0.01, 0.9, 0.999, 1e-8)))
    with pytest.raises(ValueError, match="_set_checkpoints first"):
        O.RecomputeOptimizer(O.SGD(0.1)).minimize(net())
    with pytest.raises(TypeError, match="wraps an Optimizer"):
        O.RecomputeOptimizer("sgd")


def test_weighted_average():
    with pytest.warns(DeprecationWarning):
        avg = fluid.average.WeightedAverage()
    with pytest.raises(ValueError, match="There is no data"):
        avg.eval()
    avg.add(value=2.0, weight=1)
    avg.add(value=np.array([4.0]), weight=3)
    np.testing.assert_allclose(avg.eval(), [3.5])
    with pytest.raises(ValueError, match="'weight' must be a number"):
        avg.add(1.0, "w")
    avg.reset()
    with pytest.raises(ValueError):
        avg.eval()
