"""Gradient clipping: numbers, exact op sequences, need_clip, attachment paths, error clip,
the fetchable global norm and the non-finite check, plus hypothesis properties."""
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import fluidlite as fluid
from fluidlite.core.ir import OpRole

X = np.array([[0.2, 0.5, 0.2]], "float32")
LABEL = np.array([[0]], "int64")
RAW_W = np.array([[-0.1, 0.1], [-0.25, 0.25], [-0.1, 0.1]], "float32")
RAW_B = np.array([-0.5, 0.5], "float32")


def seed_net(w_attr=None, b_attr=None):
    """The seed document's model: fc 3 -> 2 with zero weights, softmax cross-entropy."""
    x = fluid.data("x", [-1, 3], "float32")
    label = fluid.data("label", [-1, 1], "int64")
    w_attr = w_attr or fluid.ParamAttr()
    w_attr.initializer = fluid.initializer.Constant(0.0)
    logits = fluid.layers.fc(x, 2, param_attr=w_attr, bias_attr=b_attr)
    return fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, label))


def build(clip=None, opt=None, minimize_clip=None, **net_kw):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        loss = seed_net(**net_kw)
        opt = opt or fluid.optimizer.SGD(0.1, grad_clip=clip)
        opt.minimize(loss, grad_clip=minimize_clip)
    return main, startup, loss


def run(main, startup, fetch, steps=1, feed=None):
    exe = fluid.Executor()
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    out = None
    for _ in range(steps):
        out = exe.run(main, feed=feed or {"x": X, "label": LABEL}, fetch_list=fetch, scope=scope)
    return out, scope


def update_grads(main):
    """{param: name of the gradient its update op reads} (the clipped grads)."""
    return {op.input("Param")[0]: op.input("Grad")[0] for op in main.global_block().ops
            if op.type == "sgd"}


def tail(main, start_type="mul_grad"):
    ops = main.global_block().ops
    i = max(k for k, op in enumerate(ops) if op.type == start_type)
    return [op.type for op in ops[i + 1:]]


# -- the seed document's numbers -------------------------------------------------------------
def test_seed_raw_gradients_clip_by_value_and_sgd():
    main, startup, _ = build(fluid.clip.GradientClipByValue(0.1))
    g = update_grads(main)
    (w_raw, b_raw, w_clip, b_clip, w_new, b_new), scope = run(
        main, startup, ["fc_0.w_0@GRAD", "fc_0.b_0@GRAD", g["fc_0.w_0"], g["fc_0.b_0"],
                        "fc_0.w_0", "fc_0.b_0"])
    np.testing.assert_allclose(w_raw, RAW_W, rtol=1e-6)
    np.testing.assert_allclose(b_raw, RAW_B, rtol=1e-6)
    np.testing.assert_allclose(w_clip, [[-0.1, 0.1]] * 3, rtol=1e-6)
    np.testing.assert_allclose(b_clip, [-0.1, 0.1], rtol=1e-6)
    np.testing.assert_allclose(w_new, [[0.01, -0.01]] * 3, rtol=1e-6)
    np.testing.assert_allclose(b_new, [0.01, -0.01], rtol=1e-6)


def test_seed_static_example_runs_as_written():
    main_prog = fluid.Program()
    startup_prog = fluid.Program()
    with fluid.program_guard(main_program=main_prog, startup_program=startup_prog):
        image = fluid.data(name='x', shape=[-1, 2], dtype='float32')
        predict = fluid.layers.fc(input=image, size=3, act='relu')
        loss = fluid.layers.mean(predict)
        clip = fluid.clip.GradientClipByValue(min=-1, max=1)

        def fileter_func(Parameter):
            return Parameter.name == "fc_0.w_0"
        clip2 = fluid.clip.GradientClipByValue(min=-1, max=1, need_clip=fileter_func)
        assert clip2 is not None
        sgd_optimizer = fluid.optimizer.SGDOptimizer(learning_rate=0.1, grad_clip=clip)
        sgd_optimizer.minimize(loss)
    place = fluid.CPUPlace()
    exe = fluid.Executor(place)
    x = np.random.uniform(-100, 100, (10, 2)).astype('float32')
    exe.run(startup_prog)
    out = exe.run(main_prog, feed={'x': x}, fetch_list=loss)
    assert out[0].shape == (1,) and np.isfinite(out[0]).all()


def test_need_clip_callable_selects_only_the_weight():
    clip = fluid.clip.GradientClipByValue(min=-0.1, max=0.1,
                                          need_clip=lambda p: p.name == "fc_0.w_0")
    main, startup, _ = build(clip)
    clip_ops = [op for op in main.global_block().ops if op.type == "clip"]
    assert [op.input("X") for op in clip_ops] == [["fc_0.w_0@GRAD"]]
    g = update_grads(main)
    assert g["fc_0.b_0"] == "fc_0.b_0@GRAD"          # passed through untouched
    (b_new,), _ = run(main, startup, ["fc_0.b_0"])
    np.testing.assert_allclose(b_new, -0.1 * RAW_B, rtol=1e-6)


# -- op sequences ----------------------------------------------------------------------------
def _check_clip_ops(main, types):
    ops = [op for op in main.global_block().ops if "gradient_clip" in op.attr("op_namescope")]
    assert [op.type for op in ops] == types
    g = update_grads(main)
    for op in ops:
        assert op.attr("op_role") == OpRole.Optimize
        assert op.attr("op_namescope") == "/gradient_clip/"
        p = op.attr("op_role_var")[0]
        assert op.attr("op_role_var") == [p, g[p]]
    return ops


def test_clip_by_value_op_sequence():
    main, _, _ = build(fluid.clip.GradientClipByValue(max=0.3, min=-0.2))
    ops = _check_clip_ops(main, ["clip", "clip"])
    assert [op.input("X")[0] for op in ops] == ["fc_0.b_0@GRAD", "fc_0.w_0@GRAD"]  # sorted
    assert [op.output("Out")[0] for op in ops] == ["clip_0.tmp_0", "clip_1.tmp_0"]
    assert ops[0].attr("min") == -0.2 and ops[0].attr("max") == 0.3
    assert tail(main) == ["clip", "clip", "sgd", "sgd"]


def test_clip_by_norm_numbers_and_ops():
    main, startup, _ = build(fluid.clip.GradientClipByNorm(clip_norm=0.3))
    ops = _check_clip_ops(main, ["clip_by_norm", "clip_by_norm"])
    assert ops[0].attr("max_norm") == pytest.approx(0.3)
    g = update_grads(main)
    (w, b), _ = run(main, startup, [g["fc_0.w_0"], g["fc_0.b_0"]])
    np.testing.assert_allclose(w, RAW_W * 0.3 / np.linalg.norm(RAW_W), rtol=1e-5)
    np.testing.assert_allclose(b, RAW_B * 0.3 / np.linalg.norm(RAW_B), rtol=1e-5)
    assert np.linalg.norm(w) == pytest.approx(0.3, rel=1e-5)


def test_clip_by_global_norm_numbers_and_ops():
    clip = fluid.clip.GradientClipByGlobalNorm(clip_norm=0.25)
    main, startup, _ = build(clip)
    # the norm chain runs in float64 (overflow-safe); its scale is cast back to float32
    ops = _check_clip_ops(main, ["squared_l2_norm", "squared_l2_norm", "sum", "sqrt",
                                 "fill_constant", "elementwise_max", "elementwise_div", "cast",
                                 "elementwise_mul", "elementwise_mul"])
    assert ops[3].output("Out") == [clip.global_norm.name]
    assert clip.global_norm.dtype == fluid.core.VarType.FP64
    assert ops[8].input("Y") == ops[7].output("Out")
    assert ops[4].attr("value") == 0.25 and ops[4].attr("shape") == [1]
    assert ops[5].input("X") == ops[4].output("Out") and ops[5].input("Y") == ops[3].output("Out")
    assert tail(main) == [op.type for op in ops] + ["sgd", "sgd"]
    g = update_grads(main)
    (w, b, norm), _ = run(main, startup, [g["fc_0.w_0"], g["fc_0.b_0"], clip.global_norm])
    expected = np.sqrt((RAW_W ** 2).sum() + (RAW_B ** 2).sum())
    np.testing.assert_allclose(norm, [expected], rtol=1e-6)
    np.testing.assert_allclose(w, RAW_W * 0.25 / expected, rtol=1e-5)
    np.testing.assert_allclose(b, RAW_B * 0.25 / expected, rtol=1e-5)


def test_global_norm_below_clip_norm_scales_by_exactly_one():
    main, startup, _ = build(fluid.clip.GradientClipByGlobalNorm(clip_norm=10.0))
    g = update_grads(main)
    (w, b), _ = run(main, startup, [g["fc_0.w_0"], g["fc_0.b_0"]])
    assert np.array_equal(w, RAW_W) and np.array_equal(b, RAW_B)


@pytest.mark.parametrize("how", ["callable", "param_attr"])
def test_need_clip_excluded_from_global_norm(how):
    if how == "callable":
        clip = fluid.clip.GradientClipByGlobalNorm(0.1, need_clip=lambda p: "w_0" in p.name)
        main, startup, _ = build(clip)
    else:
        clip = fluid.clip.GradientClipByGlobalNorm(0.1)
        main, startup, _ = build(clip, b_attr=fluid.ParamAttr(need_clip=False))
    sq = [op for op in main.global_block().ops if op.type == "squared_l2_norm"]
    assert [op.input("X") for op in sq] == [["fc_0.w_0@GRAD"]]
    g = update_grads(main)
    assert g["fc_0.b_0"] == "fc_0.b_0@GRAD"
    (w, b, norm), _ = run(main, startup, [g["fc_0.w_0"], g["fc_0.b_0"], clip.global_norm])
    np.testing.assert_allclose(norm, [np.linalg.norm(RAW_W)], rtol=1e-6)
    np.testing.assert_allclose(w, RAW_W * 0.1 / np.linalg.norm(RAW_W), rtol=1e-5)
    np.testing.assert_allclose(b, RAW_B)


# -- standalone use, None grads ---------------------------------------------------------------
def _standalone_pairs():
    loss = seed_net()
    params_grads = fluid.backward.append_backward(loss)
    extra = fluid.default_main_program().global_block().create_parameter(
        shape=[2], dtype="float32", name="zz_no_grad")
    return params_grads + [(extra, None)]


@pytest.mark.parametrize("clip", [fluid.clip.GradientClipByValue(0.1),
                                  fluid.clip.GradientClipByNorm(0.1),
                                  fluid.clip.GradientClipByGlobalNorm(0.1)])
def test_standalone_call_in_program_guard_drops_none_grads(clip):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        pairs = _standalone_pairs()
        new = clip(pairs)
    assert [p.name for p, _ in new] == ["fc_0.w_0", "fc_0.b_0"]
    assert all(g is not None and g.name.split("_")[0] != "fc" for _, g in new)
    exe = fluid.Executor()
    exe.run(startup)
    out = exe.run(main, feed={"x": X, "label": LABEL}, fetch_list=[g for _, g in new])
    assert all(np.abs(o).max() <= 0.1 + 1e-6 or np.linalg.norm(o) <= 0.1 + 1e-6 for o in out)


def test_global_norm_with_everything_filtered_returns_input_unchanged():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        pairs = _standalone_pairs()
        n_ops = len(fluid.default_main_program().global_block().ops)
        out = fluid.clip.GradientClipByGlobalNorm(1.0, need_clip=lambda p: False)(pairs)
        assert out == pairs          # Nones included
        assert len(fluid.default_main_program().global_block().ops) == n_ops


# -- attachment paths -------------------------------------------------------------------------
def test_minimize_grad_clip_and_precedence():
    main, _, _ = build(minimize_clip=fluid.clip.GradientClipByNorm(1.0))
    assert "clip_by_norm" in tail(main)
    with pytest.warns(UserWarning, match="is ignored: the optimizer was built with"):
        main, _, _ = build(fluid.clip.GradientClipByValue(1.0),
                           minimize_clip=fluid.clip.GradientClipByNorm(1.0))
    assert "clip" in tail(main) and "clip_by_norm" not in tail(main)


def test_legacy_set_gradient_clip_each_param_uses_its_own_clip():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        loss = seed_net()
        with pytest.warns(UserWarning, match="set_gradient_clip' is not recommended"):
            fluid.clip.set_gradient_clip(fluid.clip.GradientClipByValue(0.1),
                                         param_list=["fc_0.w_0"])
            fluid.clip.set_gradient_clip(fluid.clip.GradientClipByNorm(0.2),
                                         param_list=[main.global_block().var("fc_0.b_0")])
        fluid.optimizer.SGD(0.1).minimize(loss)
    ops = [op for op in main.global_block().ops if "gradient_clip" in op.attr("op_namescope")]
    assert [(op.type, op.input("X")[0]) for op in ops] == [
        ("clip_by_norm", "fc_0.b_0@GRAD"), ("clip", "fc_0.w_0@GRAD")]
    assert all(op.attr("op_namescope") == "/gradient_clip_@CLIP/" for op in ops)
    g = update_grads(main)
    (w, b), _ = run(main, startup, [g["fc_0.w_0"], g["fc_0.b_0"]])
    np.testing.assert_allclose(w, np.clip(RAW_W, -0.1, 0.1), rtol=1e-6)
    np.testing.assert_allclose(b, RAW_B * 0.2 / np.linalg.norm(RAW_B), rtol=1e-5)


def test_legacy_param_attr_gradient_clip_and_params_without_attr_pass_through():
    with pytest.warns(DeprecationWarning):
        attr = fluid.ParamAttr(gradient_clip=fluid.clip.GradientClipByValue(0.1))
    main, startup, _ = build(w_attr=attr)
    g = update_grads(main)
    assert g["fc_0.b_0"] == "fc_0.b_0@GRAD"
    (w,), _ = run(main, startup, [g["fc_0.w_0"]])
    np.testing.assert_allclose(w, np.clip(RAW_W, -0.1, 0.1))


def test_optimizer_clip_wins_over_legacy_and_warns():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        loss = seed_net()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fluid.clip.set_gradient_clip(fluid.clip.GradientClipByNorm(0.2))
        with pytest.warns(UserWarning, match="ineffective"):
            fluid.optimizer.SGD(0.1, grad_clip=fluid.clip.GradientClipByValue(0.1)).minimize(loss)
    assert "clip_by_norm" not in tail(main) and tail(main).count("clip") == 2


def test_set_gradient_clip_after_minimize_warns_and_validates():
    main, _, _ = build()
    with fluid.program_guard(main):
        with pytest.warns(UserWarning) as record:
            fluid.clip.set_gradient_clip(fluid.clip.GradientClipByValue(1.0))
        assert any("'minimize' has been invoked before" in str(w.message) for w in record)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with pytest.raises(TypeError, match="'clip' should be an instance"):
                fluid.clip.set_gradient_clip(3.0)
            with pytest.raises(TypeError, match="'param_list' should be a list of Parameter"):
                fluid.clip.set_gradient_clip(fluid.clip.GradientClipByValue(1.0),
                                             param_list=[main.global_block().var("x")])


def test_legacy_global_norm_groups():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        loss = seed_net()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fluid.clip.set_gradient_clip(
                fluid.clip.GradientClipByGlobalNorm(0.1, group_name="a"), ["fc_0.w_0"])
            fluid.clip.set_gradient_clip(
                fluid.clip.GradientClipByGlobalNorm(0.2, group_name="b"), ["fc_0.b_0"])
        fluid.optimizer.SGD(0.1).minimize(loss)
    assert len(fluid.clip.global_norm_vars(main)) == 2
    g = update_grads(main)
    (w, b), _ = run(main, startup, [g["fc_0.w_0"], g["fc_0.b_0"]])
    np.testing.assert_allclose(w, RAW_W * 0.1 / np.linalg.norm(RAW_W), rtol=1e-5)
    np.testing.assert_allclose(b, RAW_B * 0.2 / np.linalg.norm(RAW_B), rtol=1e-5)


def test_legacy_global_norm_group_needs_one_clip_norm():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        loss = seed_net()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fluid.clip.set_gradient_clip(fluid.clip.GradientClipByGlobalNorm(0.1), ["fc_0.w_0"])
            fluid.clip.set_gradient_clip(fluid.clip.GradientClipByGlobalNorm(0.2), ["fc_0.b_0"])
        with pytest.raises(ValueError, match="'clip_norm' of a same group should be the same"):
            fluid.optimizer.SGD(0.1).minimize(loss)


# -- error clip -------------------------------------------------------------------------------
def test_error_clip_by_value_clips_the_back_propagated_error():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 3], "float32")
        label = fluid.data("label", [-1, 1], "int64")
        logits = fluid.layers.fc(x, 2, param_attr=fluid.initializer.Constant(0.0))
        logits._set_error_clip(fluid.clip.ErrorClipByValue(max=0.2))
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, label))
        fluid.optimizer.SGD(0.1).minimize(loss)
    ops = main.global_block().ops
    clip_ops = [op for op in ops if op.type == "clip"]
    assert len(clip_ops) == 1
    op = clip_ops[0]
    assert op.input("X") == op.output("Out") == [logits.name + "@GRAD"]
    assert op.attr("op_role") == OpRole.Backward and op.attr("min") == -0.2
    (gw, gl), _ = run(main, startup, ["fc_0.w_0@GRAD", logits.name + "@GRAD"])
    np.testing.assert_allclose(gl, [[-0.2, 0.2]])
    np.testing.assert_allclose(gw, X.T @ np.array([[-0.2, 0.2]]), rtol=1e-6)


def test_error_clip_must_be_an_error_clip():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.data("x", [-1, 3], "float32")
        h = fluid.layers.fc(x, 2)
        h._set_error_clip("nope")
        with pytest.raises(TypeError, match="error_clip should be an instance of "
                                            "BaseErrorClipAttr"):
            fluid.optimizer.SGD(0.1).minimize(fluid.layers.mean(h))


# -- validation and printing ------------------------------------------------------------------
def test_argument_validation():
    C = fluid.clip
    with pytest.raises(ValueError, match="max must be > 0 when min is omitted"):
        C.GradientClipByValue(-1.0)
    with pytest.raises(ValueError, match="min .* must not be greater than max"):
        C.GradientClipByValue(max=1.0, min=2.0)
    with pytest.raises(ValueError, match="must be a number"):
        C.GradientClipByValue("1")
    with pytest.raises(ValueError, match="clip_norm must be > 0"):
        C.GradientClipByNorm(0.0)
    with pytest.raises(ValueError, match="clip_norm must be > 0"):
        C.GradientClipByGlobalNorm(-2.0)
    with pytest.raises(ValueError, match="must be a number"):
        C.GradientClipByGlobalNorm(None)
    with pytest.raises(TypeError, match="need_clip must be None or a function"):
        C.GradientClipByNorm(1.0, need_clip="fc_0.w_0")
    with pytest.raises(TypeError, match="group_name must be a str"):
        C.GradientClipByGlobalNorm(1.0, group_name=3)
    with pytest.raises(ValueError, match="max must be > 0"):
        C.ErrorClipByValue(0.0)
    assert C.GradientClipByValue(max=1, min=-1).min == -1.0


def test_str_and_aliases():
    C = fluid.clip
    assert str(C.GradientClipByValue(1.0)) == \
        "Gradient Clip By Value, min = -1.000000, max=1.000000"
    assert str(C.GradientClipByNorm(2.0)) == "Gradient Clip By Norm, clip_norm=2.000000"
    assert str(C.GradientClipByGlobalNorm(3.0)) == \
        "Gradient Clip By GlobalNorm, global_norm=3.000000"
    assert C.ClipGradByValue is C.ClipByValue is C.GradientClipByValue
    assert C.ClipGradByNorm is C.ClipByNorm is C.GradientClipByNorm
    assert C.ClipGradByGlobalNorm is C.ClipByGlobalNorm is C.GradientClipByGlobalNorm


# -- beyond fluid: the global norm and the non-finite check -----------------------------------
def test_global_norm_is_fetchable_every_step():
    clip = fluid.clip.GradientClipByGlobalNorm(0.1)
    main, startup, _ = build(clip)
    assert fluid.clip.get_global_norm(main) is clip.global_norm
    assert clip.global_norm.name == fluid.clip.global_norm_vars(main)[0].name
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    w = np.zeros((3, 2), "float32")
    b = np.zeros(2, "float32")
    for _ in range(3):
        logits = X @ w + b
        p = np.exp(logits) / np.exp(logits).sum()
        d = p - np.array([[1.0, 0.0]])
        gw, gb = X.T @ d, d.sum(0)
        n = np.sqrt((gw ** 2).sum() + (gb ** 2).sum())
        (got,) = exe.run(main, feed={"x": X, "label": LABEL}, fetch_list=[clip.global_norm],
                         scope=scope)
        np.testing.assert_allclose(got, [n], rtol=1e-5)
        s = 0.1 / max(n, 0.1)
        w, b = w - 0.1 * s * gw, b - 0.1 * s * gb


def test_get_global_norm_without_a_global_norm_clip():
    main, _, _ = build(fluid.clip.GradientClipByValue(1.0))
    with pytest.raises(ValueError, match="computes no global gradient norm"):
        fluid.clip.get_global_norm(main)
    assert fluid.clip.global_norm_vars(main) == []


@pytest.mark.parametrize("opt", ["sgd", "momentum"])
def test_nonfinite_check_raises_before_any_update(opt):
    clip = fluid.clip.GradientClipByGlobalNorm(1.0, error_if_nonfinite=True)
    make = {"sgd": lambda: fluid.optimizer.SGD(0.1, grad_clip=clip),
            "momentum": lambda: fluid.optimizer.Momentum(0.1, 0.9, grad_clip=clip)}[opt]
    main, startup, _ = build(opt=make())
    types = [op.type for op in main.global_block().ops]
    assert types[types.index("sqrt") + 1] == "check_finite_norm"
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    exe.run(main, feed={"x": X, "label": LABEL}, scope=scope)
    names = ["fc_0.w_0", "fc_0.b_0"] + (["fc_0.w_0_velocity_0", "fc_0.b_0_velocity_0"]
                                        if opt == "momentum" else [])
    before = {n: np.array(scope.find_var(n).get_tensor()) for n in names}
    bad = X.copy()
    bad[0, 1] = np.inf
    with pytest.raises(FloatingPointError) as e, np.errstate(all="ignore"):
        exe.run(main, feed={"x": bad, "label": LABEL}, scope=scope)
    msg = str(e.value)
    assert "fc_0.w_0@GRAD" in msg and "error_if_nonfinite" in msg and "No parameter was updated" \
        in msg
    for n in names:
        assert np.array_equal(np.array(scope.find_var(n).get_tensor()), before[n]), n
    exe.run(main, feed={"x": X, "label": LABEL}, scope=scope)   # training can continue


def test_without_the_check_nonfinite_poisons_the_parameters():
    main, startup, _ = build(fluid.clip.GradientClipByGlobalNorm(1.0))
    bad = X.copy()
    bad[0, 1] = np.nan
    with np.errstate(all="ignore"):
        (w,), _ = run(main, startup, ["fc_0.w_0"], feed={"x": bad, "label": LABEL})
    assert np.isnan(w).all()


# -- hypothesis properties --------------------------------------------------------------------
def _grad_program(clip, shapes):
    """A program whose 'gradients' are fed data vars, clipped by ``clip``."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        block = main.global_block()
        pairs = []
        for i, shape in enumerate(shapes):
            p = block.create_parameter(shape=list(shape), dtype="float64", name=f"p{i}")
            g = fluid.data(f"g{i}", list(shape), "float64")
            pairs.append((p, g))
        new = clip(pairs)
    return main, [g for _, g in new]


SHAPES = [(3, 4), (5,)]
EXE = fluid.Executor()


def _grads():
    return st.tuples(*[arrays("float64", s, elements=st.floats(-1e3, 1e3)) for s in SHAPES])


@settings(max_examples=40, deadline=None)
@given(grads=_grads(), clip_norm=st.floats(0.01, 100.0))
def test_property_global_norm_bounded_and_directions_kept(grads, clip_norm):
    main, out = _grad_program(fluid.clip.GradientClipByGlobalNorm(clip_norm), SHAPES)
    got = EXE.run(main, feed={f"g{i}": g for i, g in enumerate(grads)}, fetch_list=out,
                  scope=fluid.Scope())
    norm = np.sqrt(sum((g ** 2).sum() for g in got))
    assert norm <= clip_norm * (1 + 1e-9) + 1e-12
    before = np.sqrt(sum((g ** 2).sum() for g in grads))
    scale = min(1.0, clip_norm / before) if before > 0 else 1.0
    for g, c in zip(grads, got):
        np.testing.assert_allclose(c, g * scale, rtol=1e-9, atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(grads=_grads(), lo=st.floats(-10, 0), width=st.floats(0, 10))
def test_property_clip_by_value_within_bounds(grads, lo, width):
    hi = lo + width
    main, out = _grad_program(fluid.clip.GradientClipByValue(max=hi, min=lo), SHAPES)
    got = EXE.run(main, feed={f"g{i}": g for i, g in enumerate(grads)}, fetch_list=out,
                  scope=fluid.Scope())
    for g, c in zip(grads, got):
        assert (c >= lo).all() and (c <= hi).all()
        inside = (g >= lo) & (g <= hi)
        assert np.array_equal(c[inside], g[inside])


@settings(max_examples=40, deadline=None)
@given(grads=_grads(), clip_norm=st.floats(0.01, 100.0))
def test_property_clip_by_norm_never_increases_a_norm(grads, clip_norm):
    main, out = _grad_program(fluid.clip.GradientClipByNorm(clip_norm), SHAPES)
    got = EXE.run(main, feed={f"g{i}": g for i, g in enumerate(grads)}, fetch_list=out,
                  scope=fluid.Scope())
    for g, c in zip(grads, got):
        n, m = np.linalg.norm(g), np.linalg.norm(c)
        assert m <= n * (1 + 1e-12) + 1e-12
        assert m <= clip_norm * (1 + 1e-9) + 1e-12


def test_global_norm_found_again_after_clone():
    main, _, _ = build(fluid.clip.GradientClipByGlobalNorm(1.0))
    clone = main.clone()
    found = fluid.clip.get_global_norm(clone)
    assert found.block.program is clone and found.name == fluid.clip.get_global_norm(main).name


def test_sample_grad_clip_runs(capsys):
    import os
    import runpy
    path = os.path.join(os.path.dirname(__file__), "..", "samples", "grad_clip.py")
    runpy.run_path(path, run_name="__main__")
    out = capsys.readouterr().out
    assert "clip(X=['fc_0.w_0@GRAD']) -> ['clip_0.tmp_0']" in out
    assert "fc_0.b_0 <- fc_0.b_0@GRAD" in out
    rows = [line.split() for line in out.splitlines() if line[:4].strip().isdigit()]
    assert len(rows) == 15 and float(rows[-1][1]) < float(rows[0][1])
