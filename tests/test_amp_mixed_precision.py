"""fluid.contrib.mixed_precision: the float16 rewrite, loss scaling, check_finite_and_unscale /
update_loss_scaling, and "an overflowing step updates nothing" (parameters, Adam moments and
beta powers, the LR counter: bit-identical; with plan-time fusion), the clip seeing unscaled
gradients, the returned values and the errors."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.contrib import mixed_precision as mp
from fluidlite.core.dtypes import VarType, to_numpy_dtype

RNG = np.random.default_rng(3)
XS = RNG.normal(size=(8, 16)).astype("float32")
YS = RNG.integers(0, 4, (8, 1)).astype("int64")


def mlp(hidden=16):
    x = fluid.data("x", [-1, 16])
    y = fluid.data("y", [-1, 1], dtype="int64")
    init = fluid.initializer.Uniform(-0.3, 0.3, seed=1)
    h = fluid.layers.fc(x, hidden, act="relu", param_attr=fluid.ParamAttr(initializer=init))
    h = fluid.layers.elementwise_mul(h, fluid.layers.scale(h, 0.5, bias=1.0))
    logits = fluid.layers.fc(h, 4, param_attr=fluid.ParamAttr(initializer=init))
    return fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, y))


def build(make_opt, amp=True, lr_decay=False, hidden=16, **kw):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        loss = mlp(hidden)
        lr = fluid.layers.exponential_decay(0.05, 1, 0.9) if lr_decay else 0.05
        opt = make_opt(lr)
        if amp:
            opt = mp.decorate(opt, **kw)
        result = opt.minimize(loss)
    scope = fluid.Scope()
    exe = fluid.Executor()
    exe.run(startup, scope=scope)
    return main, scope, exe, loss, opt, result


def persistables(main, scope):
    return {v.name: np.array(scope.find_var(v.name).get_tensor()).copy()
            for v in main.global_block().vars.values()
            if v.persistable and scope.find_var(v.name) is not None}


def test_rewrite_puts_white_ops_in_float16_and_keeps_parameters_float32():
    main, scope, exe, loss, opt, (ops, pairs) = build(lambda lr: fluid.optimizer.SGD(lr))
    block = main.global_block()
    muls = [o for o in block.ops if o.type == "mul"]
    assert len(muls) == 2
    for o in muls:
        for n in o.input_arg_names + o.output_arg_names:
            assert block.var(n).dtype == VarType.FP16, n
    assert "x.cast_fp16" in block.vars and "fc_0.w_0.cast_fp16" in block.vars
    smce = next(o for o in block.ops if o.type == "softmax_with_cross_entropy")
    assert smce.inputs["Logits"][0].endswith(".cast_fp32")
    for p in block.all_parameters():
        assert p.dtype == VarType.FP32
    # minimize returns the gradients of the scaled loss, as fluid's decorated optimizer
    assert sorted(p.name for p, _ in pairs) == ["fc_0.b_0", "fc_0.w_0", "fc_1.b_0", "fc_1.w_0"]
    assert all(g.name == p.name + "@GRAD" and g.dtype == VarType.FP32 for p, g in pairs)
    assert opt.get_scaled_loss().op.type == "elementwise_mul"
    types = [o.type for o in block.ops]
    assert types.count("check_finite_and_unscale") == 1 and \
        types.count("update_loss_scaling") == 1
    assert types.count("select_input") == 4           # one per parameter (SGD: no state)
    main.lint()


def test_every_run_time_dtype_matches_the_declared_one():
    """The float16 kernels really compute in float16 (NumPy never promotes behind our back)."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 1, 6, 6])
        y = fluid.data("y", [-1, 1], dtype="int64")
        c = fluid.layers.conv2d(x, 2, 3, act="relu")
        b = fluid.layers.batch_norm(c)
        p = fluid.layers.pool2d(b, 2, "max", 2)
        w = fluid.layers.create_parameter([8, 6], "float32")
        m = fluid.layers.matmul(fluid.layers.reshape(p, [-1, 8]), w)
        t = fluid.layers.sigmoid(fluid.layers.tanh(fluid.layers.dropout(m, 0.2)))
        t = fluid.layers.elementwise_sub(t, fluid.layers.leaky_relu(t, 0.1))
        logits = fluid.layers.fc(t, 3)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, y))
        opt = mp.decorate(fluid.optimizer.Momentum(0.01, 0.9), init_loss_scaling=64.0)
        opt.minimize(loss)
    exe = fluid.Executor()
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    block = main.global_block()
    names = [v.name for v in block.vars.values()
             if not v.persistable and v.dtype in (VarType.FP16, VarType.FP32)
             and "@SKIPPABLE" not in v.name]
    feed = {"x": RNG.normal(size=(2, 1, 6, 6)).astype("float32"),
            "y": np.array([[0], [2]], "int64")}
    values = exe.run(main, feed=feed, fetch_list=names, scope=scope)
    half = 0
    for n, v in zip(names, values):
        want = np.dtype(to_numpy_dtype(block.var(n).dtype))
        assert np.asarray(v).dtype == want, f"{n}: ran as {np.asarray(v).dtype}, declared {want}"
        half += want == np.float16
    assert half >= 20            # conv2d, matmul, mul and the gray ops between them (+ grads)
    assert block.var(c.name).dtype == VarType.FP16
    assert block.var(b.name).dtype == VarType.FP32    # batch_norm runs in float32 (documented)


def test_training_tracks_float32_training():
    ref = build(lambda lr: fluid.optimizer.SGD(lr * 10), amp=False)
    got = build(lambda lr: fluid.optimizer.SGD(lr * 10), init_loss_scaling=2.0 ** 10)
    losses = []
    for step in range(5):
        lr_, = ref[2].run(ref[0], feed={"x": XS, "y": YS}, fetch_list=[ref[3]], scope=ref[1])
        lg, = got[2].run(got[0], feed={"x": XS, "y": YS}, fetch_list=[got[3]], scope=got[1])
        # same start and updates: only float16 rounding differs
        np.testing.assert_allclose(lg, lr_, rtol=5e-3)
        losses.append(float(lg[0]))
    assert losses == sorted(losses, reverse=True)
    for n in ("fc_0.w_0", "fc_1.w_0"):
        np.testing.assert_allclose(np.array(got[1].find_var(n).get_tensor()),
                                   np.array(ref[1].find_var(n).get_tensor()), atol=2e-3)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")        # the injected overflow
@pytest.mark.parametrize("hidden", [16, 1024])    # 1024: a 16384-element weight: fused(adam)
def test_an_overflowing_step_updates_nothing_and_lowers_the_scale(hidden):
    main, scope, exe, loss, opt, _ = build(
        lambda lr: fluid.optimizer.Adam(lr), lr_decay=True, hidden=hidden,
        init_loss_scaling=1024.0, decr_every_n_nan_or_inf=1, decr_ratio=0.5,
        incr_every_n_steps=1000)
    scale = opt.get_loss_scaling()
    assert scale.persistable and scale.shape == (1,)
    exe.run(main, feed={"x": XS, "y": YS}, scope=scope)       # a normal step first
    before = persistables(main, scope)
    assert before["@LR_DECAY_COUNTER@"][0] == 0
    bad = XS.copy()
    bad[3, 5] = np.inf                                         # the injected overflow
    s, = exe.run(main, feed={"x": bad, "y": YS}, fetch_list=[scale], scope=scope)
    assert s[0] == 512.0
    after = persistables(main, scope)
    changed = sorted(n for n in before if not np.array_equal(before[n], after[n]))
    assert changed == sorted([scale.name, "num_good_steps_0"])  # good steps: 1 -> 0
    moments = [n for n in before if "moment" in n or "pow_acc" in n]
    assert len(moments) == 16
    # the next finite step trains again (and the LR counter moves on)
    s, = exe.run(main, feed={"x": XS, "y": YS}, fetch_list=[scale], scope=scope)
    final = persistables(main, scope)
    assert s[0] == 512.0 and final["@LR_DECAY_COUNTER@"][0] == 1
    assert not np.array_equal(final["fc_0.w_0"], before["fc_0.w_0"])
    # beta1_pow starts at beta1 and advanced on the two finite steps only
    np.testing.assert_allclose(final["fc_0.w_0_beta1_pow_acc_0"], [0.9 ** 3], rtol=1e-6)
    if hidden == 1024:
        plan = str(exe.cached_plans(main)[0])
        assert "fused(adam)" in plan


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_a_too_large_scale_overflows_float16_and_is_lowered_until_training_proceeds():
    main, scope, exe, loss, opt, _ = build(
        lambda lr: fluid.optimizer.SGD(lr), init_loss_scaling=2.0 ** 40,
        decr_every_n_nan_or_inf=1, decr_ratio=0.125)
    w0 = np.array(scope.find_var("fc_0.w_0").get_tensor()).copy()
    scales = []
    for _ in range(12):
        s, = exe.run(main, feed={"x": XS, "y": YS}, fetch_list=[opt.get_loss_scaling()],
                     scope=scope)
        scales.append(float(s[0]))
        if np.array_equal(np.array(scope.find_var("fc_0.w_0").get_tensor()), w0):
            continue
        break
    assert scales[0] == 2.0 ** 37 and scales == sorted(scales, reverse=True)
    assert len(scales) >= 3 and scales[-1] <= 2.0 ** 16   # float16 tops out at 65504


def test_the_scale_grows_after_incr_every_n_finite_steps():
    main, scope, exe, loss, opt, _ = build(lambda lr: fluid.optimizer.SGD(lr),
                                           init_loss_scaling=8.0, incr_every_n_steps=2,
                                           incr_ratio=2.0)
    got = [float(exe.run(main, feed={"x": XS, "y": YS}, fetch_list=[opt.get_loss_scaling()],
                         scope=scope)[0][0]) for _ in range(5)]
    assert got == [8.0, 16.0, 16.0, 32.0, 32.0]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_static_loss_scaling_keeps_the_scale_and_still_skips_overflow():
    main, scope, exe, loss, opt, _ = build(lambda lr: fluid.optimizer.Momentum(lr, 0.9),
                                           init_loss_scaling=128.0,
                                           use_dynamic_loss_scaling=False)
    types = [o.type for o in main.global_block().ops]
    assert "update_loss_scaling" not in types and "check_finite_and_unscale" in types
    before = persistables(main, scope)
    bad = XS.copy()
    bad[0, 0] = np.nan
    exe.run(main, feed={"x": bad, "y": YS}, scope=scope)
    after = persistables(main, scope)
    assert all(np.array_equal(before[n], after[n]) for n in before)
    exe.run(main, feed={"x": XS, "y": YS}, scope=scope)
    assert float(np.array(scope.find_var(opt.get_loss_scaling().name).get_tensor())[0]) == 128.0


def test_the_inner_grad_clip_sees_unscaled_gradients():
    """All-float32 lists (mul blacklisted) so only the loss scaling differs: a power-of-two
    scale is exact, so the clipped updates equal the undecorated optimizer's."""
    def make(lr):
        return fluid.optimizer.SGD(lr, grad_clip=fluid.clip.GradientClipByGlobalNorm(0.01))

    ref = build(make, amp=False)
    lists = mp.AutoMixedPrecisionLists(custom_black_list={"mul"})
    got = build(make, amp_lists=lists, init_loss_scaling=2.0 ** 12)
    assert "cast" not in [o.type for o in got[0].global_block().ops[:8]]
    for _ in range(3):
        ref[2].run(ref[0], feed={"x": XS, "y": YS}, scope=ref[1])
        got[2].run(got[0], feed={"x": XS, "y": YS}, scope=got[1])
    for n in ("fc_0.w_0", "fc_0.b_0", "fc_1.w_0"):
        np.testing.assert_allclose(np.array(got[1].find_var(n).get_tensor()),
                                   np.array(ref[1].find_var(n).get_tensor()), rtol=1e-6,
                                   atol=1e-7)


def test_lists():
    lists = mp.AutoMixedPrecisionLists(custom_white_list={"tanh", "softmax"},
                                       custom_black_list={"mul"},
                                       custom_black_varnames={"fc_0.tmp_0"})
    assert "softmax" in lists.white_list and "softmax" not in lists.black_list
    assert "tanh" in lists.white_list and "tanh" not in lists.gray_list
    assert "mul" in lists.black_list and "mul" not in lists.white_list
    assert lists.black_varnames == {"fc_0.tmp_0"}
    assert "mul" in mp.AutoMixedPrecisionLists().white_list       # a fresh copy each time
    with pytest.raises(ValueError, match="Custom white list overlap custom black list"):
        mp.AutoMixedPrecisionLists(custom_white_list={"mul"}, custom_black_list={"mul"})
    with pytest.raises(TypeError, match="custom_white_list must be a set/list"):
        mp.AutoMixedPrecisionLists(custom_white_list="mul")


def test_black_varnames_keep_an_op_in_float32():
    lists = mp.AutoMixedPrecisionLists(custom_black_varnames={"fc_1.tmp_0"})
    main, *_ = build(lambda lr: fluid.optimizer.SGD(lr), amp_lists=lists)
    block = main.global_block()
    mul2 = [o for o in block.ops if o.type == "mul"][1]
    assert block.var(mul2.output("Out")[0]).dtype == VarType.FP32
    mul1 = [o for o in block.ops if o.type == "mul"][0]
    assert block.var(mul1.output("Out")[0]).dtype == VarType.FP16


@pytest.mark.parametrize("kw, msg", [
    ({"init_loss_scaling": 0.0}, "init_loss_scaling must be a number > 0, but received 0.0"),
    ({"init_loss_scaling": -1}, "init_loss_scaling"),
    ({"incr_every_n_steps": 0}, "incr_every_n_steps must be an integer >= 1"),
    ({"decr_every_n_nan_or_inf": 1.5}, "decr_every_n_nan_or_inf must be an integer >= 1"),
    ({"incr_ratio": 1.0}, "incr_ratio must be a number > 1"),
    ({"decr_ratio": 1.0}, r"decr_ratio must be a number in \(0, 1\)"),
])
def test_decorate_argument_errors(kw, msg):
    with pytest.raises(ValueError, match=msg):
        mp.decorate(fluid.optimizer.SGD(0.1), **kw)


def test_other_errors_and_atomicity():
    with pytest.raises(TypeError, match="optimizer must be a fluid optimizer"):
        mp.decorate(None)
    with pytest.raises(TypeError, match="amp_lists must be an AutoMixedPrecisionLists"):
        mp.decorate(fluid.optimizer.SGD(0.1), amp_lists={"mul"})
    with pytest.raises(AttributeError, match="fluid.contrib.slim is not provided"):
        fluid.contrib.slim
    with pytest.raises(AttributeError, match="search_pyramid_hash is not provided.*only "
                                             "fluid.contrib.mixed_precision"):
        fluid.contrib.search_pyramid_hash
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        loss = mlp()
    opt = mp.decorate(fluid.optimizer.SGD(0.1))        # made in the default programs
    n_ops = len(main.global_block().ops)
    with pytest.raises(ValueError, match="call decorate\\(\\) inside the same program_guard"):
        opt.minimize(loss)
    assert len(main.global_block().ops) == n_ops        # one transaction: nothing left behind
    with fluid.dygraph.guard():
        with pytest.raises(RuntimeError, match="works on static programs"):
            opt.minimize(loss)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_saved_and_reloaded_program_trains_the_same():
    """The rewritten program (casts, the three new ops) survives serialization (JSON and
    Paddle's ProgramDesc) and trains bit-identically, overflow skip included."""
    from fluidlite.formats import serialize
    main, scope, exe, loss, opt, _ = build(lambda lr: fluid.optimizer.Adam(lr),
                                           init_loss_scaling=64.0, decr_every_n_nan_or_inf=1)
    copies = [serialize.loads_program(serialize.dumps_program(main)),
              fluid.Program.parse_from_string(main.desc.serialize_to_string())]
    start = persistables(main, scope)
    bad = XS.copy()
    bad[1, 1] = -np.inf
    feeds = [{"x": XS, "y": YS}, {"x": bad, "y": YS}, {"x": XS, "y": YS}]
    for f in feeds:
        exe.run(main, feed=f, scope=scope)
    want = persistables(main, scope)
    for copy in copies:
        s = fluid.Scope()
        for n, v in start.items():
            s.var(n).get_tensor().set(v.copy(), fluid.CPUPlace())
        for f in feeds:
            exe.run(copy, feed=f, scope=s)
        for n, v in want.items():
            np.testing.assert_array_equal(np.array(s.find_var(n).get_tensor()), v, err_msg=n)


def test_clone_for_test_keeps_the_float16_forward_only():
    main, scope, exe, loss, opt, _ = build(lambda lr: fluid.optimizer.SGD(lr))
    test = main.clone(for_test=True)
    types = [o.type for o in test.global_block().ops]
    assert "mul" in types and "cast" in types
    assert not {"check_finite_and_unscale", "update_loss_scaling", "select_input",
                "sgd"} & set(types)
    got, = exe.run(test, feed={"x": XS, "y": YS}, fetch_list=[loss.name], scope=scope)
    want, = exe.run(main, feed={"x": XS, "y": YS}, fetch_list=[loss.name], scope=scope)
    np.testing.assert_array_equal(got, want)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_fusion_folds_the_guard_into_in_place_update_groups(monkeypatch):
    """executor/fusion.py: an update committed by the guard's selects joins its fused group
    again with a Skip mask: in place on a finite step, untouched on an overflow, and
    bit-identical to the unfused plan."""
    from fluidlite.executor import plan as plan_mod
    feeds = []
    for k in range(5):
        x = XS.copy()
        if k == 2:
            x[4, 4] = np.nan
        feeds.append({"x": x, "y": YS})
    results = []
    for fusion in (True, False):
        monkeypatch.setattr(plan_mod, "ENABLE_FUSION", fusion)
        main, scope, exe, loss, opt, _ = build(
            lambda lr: fluid.optimizer.Adam(lr), hidden=1024, lr_decay=True,
            init_loss_scaling=256.0, decr_every_n_nan_or_inf=1)
        buf = scope.find_var("fc_0.w_0").get_tensor()._array
        before = None
        for k, f in enumerate(feeds):
            if k == 2:
                before = persistables(main, scope)
            exe.run(main, feed=f, scope=scope)
            if k == 2:
                after = persistables(main, scope)
                assert sorted(n for n in before if not np.array_equal(before[n], after[n])) \
                    == sorted([opt.get_loss_scaling().name, "num_good_steps_0"])
        if fusion:
            text = str(exe.cached_plans(main)[0])
            fused = [ln for ln in text.splitlines() if ln.endswith("# fused(adam)")]
            assert len(fused) == 1 and "select_input" in text
            # the 16384-element weight was updated in its own buffer (in place)
            assert scope.find_var("fc_0.w_0").get_tensor()._array is buf
            # its five states are committed by the group: only the small ones and the LR
            # counter keep their selects (3 small parameters x 5 states + 1)
            assert text.count("# select_input") == 16
        results.append(persistables(main, scope))
    fused_state, plain_state = results
    for n, v in plain_state.items():
        np.testing.assert_array_equal(fused_state[n], v, err_msg=n)


def _h(*shape):
    return np.random.default_rng(0).uniform(0.5, 1.5, shape).astype("float16")


def test_white_and_gray_kernels_keep_float16():
    """Each white/gray op fluidlite registers computes a float16 result from float16 inputs
    (no silent promotion); batch_norm is the documented exception (run in float32)."""
    from fluidlite.core.registry import get_op_def, has_op
    h = _h
    two = (h(2, 3), h(2, 3))
    cases = {
        "elementwise_add": (two, {}), "elementwise_sub": (two, {}),
        "elementwise_mul": ((h(2, 3), h(3)), {}), "elementwise_div": (two, {}),
        "elementwise_max": (two, {}), "elementwise_min": (two, {}),
        "elementwise_pow": (two, {}), "elementwise_mod": (two, {}),
        "elementwise_floordiv": (two, {}),
        "tanh": ((h(2, 3),), {}), "sigmoid": ((h(2, 3),), {}), "relu": ((h(2, 3),), {}),
        "relu6": ((h(2, 3),), {}), "leaky_relu": ((h(2, 3),), {}),
        "soft_relu": ((h(2, 3),), {}), "scale": ((h(2, 3),), {"scale": 2.0}),
        "sign": ((h(2, 3),), {}), "transpose2": ((h(2, 3),), {"axis": [1, 0]}),
        "reshape2": ((h(2, 3), None, None), {"shape": [3, 2]}),
        "flatten2": ((h(2, 3, 2),), {"axis": 1}),
        "stack": (([h(2, 3), h(2, 3)],), {"axis": 0}),
        "unstack": ((h(2, 3),), {"axis": 0, "num": 2}),
        "slice": ((h(4, 3), None, None, None, None),
                  {"axes": [0], "starts": [1], "ends": [3]}),
        "gather": ((h(4, 3), np.array([0, 2])), {}), "top_k": ((h(2, 5), None), {"k": 2}),
        "pool2d": ((h(1, 1, 4, 4),), {"ksize": [2, 2], "strides": [2, 2]}),
        "mul": ((h(2, 3), h(3, 4)), {}), "matmul": ((h(2, 3), h(3, 4)), {}),
        "conv2d": ((h(1, 1, 4, 4), h(2, 1, 3, 3)), {}),
    }
    probed = 0
    for t, (args, attrs) in cases.items():
        assert t in mp.fp16_lists.white_list | mp.fp16_lists.gray_list
        if not has_op(t):
            continue
        out = get_op_def(t).forward(*args, **attrs)
        for slot, v in out.items():
            for a in (v if isinstance(v, list) else [v]):
                if a.dtype.kind == "f":
                    assert a.dtype == np.float16, f"{t}.{slot} computed {a.dtype}"
        probed += 1
    assert probed >= 28


ALL_OPTIMIZERS = {
    "sgd": lambda lr: fluid.optimizer.SGD(lr),
    "momentum": lambda lr: fluid.optimizer.Momentum(lr, 0.9, use_nesterov=True),
    "lars": lambda lr: fluid.optimizer.LarsMomentum(lr, 0.9),
    "adagrad": lambda lr: fluid.optimizer.Adagrad(lr),
    "decayed_adagrad": lambda lr: fluid.optimizer.DecayedAdagrad(lr),
    "adadelta": lambda lr: fluid.optimizer.Adadelta(lr),
    "rmsprop": lambda lr: fluid.optimizer.RMSProp(lr, centered=True),
    "adamax": lambda lr: fluid.optimizer.Adamax(lr),
    "lamb": lambda lr: fluid.optimizer.Lamb(lr),
    "ftrl": lambda lr: fluid.optimizer.Ftrl(lr),
}


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("name", sorted(ALL_OPTIMIZERS))
def test_every_optimizer_skips_an_overflowing_step_bit_identically(name):
    main, scope, exe, loss, opt, _ = build(ALL_OPTIMIZERS[name], lr_decay=True,
                                           init_loss_scaling=32.0)
    exe.run(main, feed={"x": XS, "y": YS}, scope=scope)
    before = persistables(main, scope)
    bad = XS.copy()
    bad[2, 2] = np.inf
    exe.run(main, feed={"x": bad, "y": YS}, scope=scope)
    after = persistables(main, scope)
    skipped = {n for n in before if not np.array_equal(before[n], after[n])}
    assert skipped == {"num_good_steps_0", "num_bad_steps_0"}      # bad steps: 0 -> 1
    exe.run(main, feed={"x": XS, "y": YS}, scope=scope)
    final = persistables(main, scope)
    assert not np.array_equal(final["fc_0.w_0"], after["fc_0.w_0"])
    assert final["@LR_DECAY_COUNTER@"][0] == after["@LR_DECAY_COUNTER@"][0] + 1


def test_fleet_data_parallel_unscales_after_the_all_reduce():
    """fleet.distributed_optimizer(decorate(opt)): fleet calls the decorated optimizer's
    _apply_optimize after its all-reduce pass, so the check sees the averaged gradients and the
    inner optimizer gets them unscaled (one process: same result as without fleet)."""
    from fluidlite.incubate.fleet.collective import DistributedStrategy, fleet
    ref = build(lambda lr: fluid.optimizer.SGD(lr), init_loss_scaling=64.0)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        loss = mlp()
        fleet.init()
        opt = mp.decorate(fluid.optimizer.SGD(0.05), init_loss_scaling=64.0)
        fleet.distributed_optimizer(opt, DistributedStrategy()).minimize(loss)
    types = [o.type for o in main.global_block().ops]
    # issue 17: the all-reduce ends with c_allreduce_wait (overlap, default) or is one
    # c_allreduce_sum (blocking)
    reduced = "c_allreduce_wait" if "c_allreduce_wait" in types else "c_allreduce_sum"
    assert types.index(reduced) < types.index("check_finite_and_unscale") < \
        types.index("sgd")
    scope = fluid.Scope()
    exe = fluid.Executor()
    exe.run(startup, scope=scope)
    for _ in range(2):
        exe.run(main, feed={"x": XS, "y": YS}, scope=scope)
        ref[2].run(ref[0], feed={"x": XS, "y": YS}, scope=ref[1])
    for n in ("fc_0.w_0", "fc_1.b_0"):
        np.testing.assert_allclose(np.array(scope.find_var(n).get_tensor()),
                                   np.array(ref[1].find_var(n).get_tensor()), rtol=1e-6)


def test_a_float64_model_is_scaled_in_float64():
    """No float32 in the network: nothing is cast to float16, the scale is cast to the loss's
    type, and training equals the undecorated optimizer's (power-of-two scale: exact)."""
    def net():
        x = fluid.data("x", [-1, 3], dtype="float64")
        return fluid.layers.mean(fluid.layers.square(fluid.layers.fc(
            x, 1, param_attr=fluid.ParamAttr(initializer=fluid.initializer.Constant(0.5)))))

    runs = []
    for amp in (False, True):
        main, startup = fluid.Program(), fluid.Program()
        with fluid.program_guard(main, startup), fluid.unique_name.guard():
            loss = net()
            opt = fluid.optimizer.SGD(0.1)
            if amp:
                opt = mp.decorate(opt, init_loss_scaling=16.0)
            opt.minimize(loss)
        scope = fluid.Scope()
        exe = fluid.Executor()
        exe.run(startup, scope=scope)
        for _ in range(2):
            exe.run(main, feed={"x": np.arange(6.0).reshape(2, 3)}, scope=scope)
        runs.append(np.array(scope.find_var("fc_0.w_0").get_tensor()))
        if amp:
            assert all(v.dtype != VarType.FP16 for v in main.global_block().vars.values())
    np.testing.assert_array_equal(runs[1], runs[0])


def test_a_failing_minimize_leaves_the_programs_exactly_as_before():
    """The whole pass is one transaction: the float16 rewrite (new casts, variables declared
    float16) is undone too when the inner optimizer fails late."""
    main, startup = fluid.Program(), fluid.Program()
    other = fluid.Program()
    with fluid.program_guard(other, fluid.Program()):
        foreign_lr = fluid.layers.create_global_var([1], 0.1, "float32", persistable=True)
    with fluid.program_guard(main, startup):
        loss = mlp()
        opt = mp.decorate(fluid.optimizer.SGD(foreign_lr))
    before_ops = [o.type for o in main.global_block().ops]
    before_vars = {n: v.dtype for n, v in main.global_block().vars.items()}
    n_startup = len(startup.global_block().ops)
    with fluid.program_guard(main, startup):
        with pytest.raises(TypeError, match="learning rate variable is create outside"):
            opt.minimize(loss)
    assert [o.type for o in main.global_block().ops] == before_ops
    assert {n: v.dtype for n, v in main.global_block().vars.items()} == before_vars
    assert len(startup.global_block().ops) == n_startup
