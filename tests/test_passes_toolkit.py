"""The rewrite toolkit (core/rewrite.py) and the contract every pass keeps: roles set at creation,
lint-clean results, atomic failure, and core/ at the bottom of the import graph."""
import ast
import pathlib

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core import names, rewrite
from fluidlite.core.ir import OpRole

PKG = pathlib.Path(fluid.__file__).parent


# -- layering ------------------------------------------------------------------------------------
def _imports(path: pathlib.Path, package: str):
    """Absolute names of every module ``path`` imports (top level and inside functions)."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            yield mod
            for a in node.names:                 # `from .. import clip` imports a module
                yield f"{mod}.{a.name}"


def test_core_imports_nothing_above_it():
    bad = []
    for path in sorted((PKG / "core").glob("*.py")):
        for mod in _imports(path, "fluidlite.core"):
            if mod.startswith("fluidlite") and not mod.startswith("fluidlite.core") \
                    and mod != "fluidlite":
                bad.append(f"{path.name} imports {mod}")
            if mod == "fluidlite":
                bad.append(f"{path.name} imports the fluidlite package")
    assert not bad, bad


def test_optimizer_modules_form_no_cycle():
    base = set(_imports(PKG / "optimizer" / "base.py", "fluidlite"))
    wrappers = set(_imports(PKG / "optimizer" / "wrappers.py", "fluidlite"))
    assert not {"fluidlite.optimizer", "fluidlite.optimizer.wrappers"} & base
    assert "fluidlite.optimizer" not in wrappers
    assert fluid.optimizer.ModelAverage is fluid.optimizer.wrappers.ModelAverage


def test_serialize_names_no_pass():
    """formats/serialize.py's code (docstrings aside) names no clip or regularizer class."""
    tree = ast.parse((PKG / "formats" / "serialize.py").read_text())
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef)) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    words = [n.value for n in ast.walk(tree)
             if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs]
    words += [n.id for n in ast.walk(tree) if isinstance(n, ast.Name)]
    words += [n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)]
    for word in words:
        assert not any(k in word for k in ("GradientClip", "ClipGrad", "Decay")), word


# -- the verbs -----------------------------------------------------------------------------------
def test_role_context_sets_role_role_var_and_name_scope():
    main = fluid.Program()
    block = main.global_block()
    x = block.create_var(name="x", shape=[2, 3], dtype="float32")
    with rewrite.role(main, OpRole.Optimize, [x, "x@GRAD"], name_scope="demo"):
        y = rewrite.op(block, "scale", X=x, attrs={"scale": 2.0})
    op = block.ops[-1]
    assert op.attr("op_role") == OpRole.Optimize
    assert op.attr("op_role_var") == ["x", "x@GRAD"]
    assert "demo" in op.attr("op_namescope")
    assert y.name.startswith("scale_") and y.name.endswith(".tmp_0") and y.shape == (2, 3)
    rewrite.op(block, "scale", X=y)                       # outside: back to the default role
    assert block.ops[-1].attr("op_role") == OpRole.Forward


def test_tmp_name_reserves_the_layer_name():
    with names.guard():
        n = rewrite.tmp_name("elementwise_mul")
        assert n == "elementwise_mul_0.tmp_0"
        assert rewrite.tmp_name("elementwise_mul") == "elementwise_mul_1.tmp_0"


def test_uses_index_and_replace_op_bump_version():
    main = fluid.Program()
    block = main.global_block()
    x = block.create_var(name="x", shape=[4], dtype="float32", is_data=True)
    a = rewrite.op(block, "relu", X=x)
    b = rewrite.op(block, "scale", X=a)
    uses = rewrite.Uses(block)
    assert uses.producer(a.name) == 0 and uses.producer(b.name) == 1
    assert uses.reader_count(a.name) == 1 and uses.producer("x") is None
    v = main.version
    new = rewrite.replace_op(block, block.ops[0], "sigmoid", {"X": x}, {"Out": a})
    assert main.version > v and block.ops[0] is new and [o.type for o in block.ops] == [
        "sigmoid", "scale"]
    main.lint()


def test_global_var_initialised_in_startup_with_forward_role():
    main, startup = fluid.Program(), fluid.Program()
    with rewrite.role(main, OpRole.Optimize):
        v = rewrite.global_var(main, startup, "lr_x", [1], 0.5, "float32")
    assert v.persistable and main.global_block().var("lr_x") is v
    init = startup.global_block().ops[-1]
    assert init.type == "fill_constant" and init.attr("value") == 0.5
    assert init.attr("op_role") == OpRole.Forward
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    np.testing.assert_array_equal(np.array(scope.find_var("lr_x").get_tensor()), [0.5])


# -- every pass: roles at creation, lint-clean ---------------------------------------------------
def _mlp(opt, reg=None):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data(name="x", shape=[-1, 4], dtype="float32")
        y = fluid.data(name="y", shape=[-1, 1], dtype="int64")
        h = fluid.layers.fc(x, 5, act="relu", param_attr=fluid.ParamAttr(regularizer=reg))
        prob = fluid.layers.fc(h, 3, act="softmax")
        loss = fluid.layers.mean(fluid.layers.cross_entropy(prob, y))
        out = opt().minimize(loss)
    return main, startup, loss, out


CLIPS = [None, lambda: fluid.clip.GradientClipByValue(0.5),
         lambda: fluid.clip.GradientClipByNorm(0.5),
         lambda: fluid.clip.GradientClipByGlobalNorm(0.5, error_if_nonfinite=True)]
OPTS = {
    "sgd": lambda c: fluid.optimizer.SGD(0.1, grad_clip=c),
    "momentum": lambda c: fluid.optimizer.Momentum(0.1, 0.9, use_nesterov=True, grad_clip=c),
    "lars": lambda c: fluid.optimizer.LarsMomentum(0.1, 0.9, grad_clip=c),
    "adam": lambda c: fluid.optimizer.Adam(0.01, grad_clip=c),
    "adamax": lambda c: fluid.optimizer.Adamax(0.01, grad_clip=c),
    "adagrad": lambda c: fluid.optimizer.Adagrad(0.01, grad_clip=c),
    "decayed_adagrad": lambda c: fluid.optimizer.DecayedAdagrad(0.01, grad_clip=c),
    "adadelta": lambda c: fluid.optimizer.Adadelta(1.0, grad_clip=c),
    "rmsprop": lambda c: fluid.optimizer.RMSProp(0.01, centered=True, momentum=0.5,
                                                 grad_clip=c),
    "ftrl": lambda c: fluid.optimizer.Ftrl(0.01, l1=0.1, l2=0.1, grad_clip=c),
    "lamb": lambda c: fluid.optimizer.Lamb(0.01, grad_clip=c),
}


@pytest.mark.parametrize("clip", range(len(CLIPS)))
@pytest.mark.parametrize("opt", sorted(OPTS))
def test_every_optimizer_and_clip_leaves_the_programs_lint_clean(opt, clip):
    make_clip = CLIPS[clip]
    main, startup, loss, _ = _mlp(lambda: OPTS[opt](make_clip() if make_clip else None),
                                  reg=fluid.regularizer.L2Decay(1e-3))
    main.lint()
    startup.lint()
    roles = {}
    for op in main.global_block().ops:
        scope = op.attr("op_namescope") or ""
        role = op.attr("op_role")
        if "gradient_clip" in scope or "regularization" in scope or "optimizer" in scope:
            assert role & OpRole.Optimize, (op.type, scope, role)
            rv = op.attr("op_role_var")
            assert rv and main.global_block().has_var(rv[0]), (op.type, rv)
            roles.setdefault(scope, set()).add(role)
        elif op.type.endswith("_grad") or op.type == "fill_zeros_like":
            assert role == OpRole.Backward, (op.type, role)
    seed = [op for op in main.global_block().ops if op.attr("op_role") == OpRole.Backward
            | OpRole.Loss]
    assert len(seed) == 1 and seed[0].output("Out") == [loss.name + "@GRAD"]
    # a clipped gradient's ops name [param, clipped grad] from creation on
    for op in main.global_block().ops:
        if "gradient_clip" in (op.attr("op_namescope") or "") and op.type in (
                "clip", "clip_by_norm", "elementwise_mul"):
            assert op.attr("op_role_var")[1] == op.output("Out")[0]


def test_gradients_recompute_and_wrappers_are_lint_clean():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data(name="x", shape=[-1, 4], dtype="float32")
        x.stop_gradient = False
        h = fluid.layers.fc(x, 6, act="tanh")
        h2 = fluid.layers.fc(h, 6, act="tanh")
        loss = fluid.layers.mean(fluid.layers.fc(h2, 1))
        (gx,) = fluid.gradients([loss], [x])
        assert gx is not None
        opt = fluid.optimizer.RecomputeOptimizer(fluid.optimizer.Adam(0.01))
        opt._set_checkpoints([h])
        opt.minimize(loss, grad_clip=fluid.clip.GradientClipByGlobalNorm(1.0))
        ema = fluid.optimizer.ExponentialMovingAverage(0.9)
        ema.update()
        fluid.optimizer.ModelAverage(0.15, min_average_window=2, max_average_window=4)
    main.lint()
    startup.lint()
    ema.apply_program.lint()
    main2, startup2 = fluid.Program(), fluid.Program()
    with fluid.program_guard(main2, startup2), fluid.unique_name.guard():
        x = fluid.data(name="x", shape=[-1, 4], dtype="float32")
        loss = fluid.layers.mean(fluid.layers.fc(x, 1))
        fluid.optimizer.LookaheadOptimizer(fluid.optimizer.SGD(0.1), alpha=0.5, k=2).minimize(
            loss)
    main2.lint()
    test_prog = main2.clone(for_test=True)
    assert not any(op.type in ("increment", "sgd") for op in test_prog.global_block().ops)


# -- atomic passes -------------------------------------------------------------------------------
def _snapshot(*programs):
    return [(p.version, str(p)) for p in programs]


def test_failing_minimize_leaves_main_and_startup_unchanged():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data(name="x", shape=[-1, 4], dtype="float32")
        loss = fluid.layers.mean(fluid.layers.fc(fluid.layers.fc(x, 3), 1))
        before = _snapshot(main, startup)
        calls = []

        def need_clip(p):           # fails after backward and part of the clip were appended
            calls.append(p.name)
            if len(calls) == 3:
                raise RuntimeError("need_clip exploded")
            return True
        clip = fluid.clip.GradientClipByNorm(1.0, need_clip=need_clip)
        with pytest.raises(RuntimeError, match="need_clip exploded"):
            fluid.optimizer.Adam(0.01, grad_clip=clip).minimize(loss)
        assert _snapshot(main, startup) == before
        # and the programs still build and train after the failure
        fluid.optimizer.Adam(0.01).minimize(loss)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    out, = exe.run(main, feed={"x": np.ones((2, 4), "float32")}, fetch_list=[loss], scope=scope)
    assert np.isfinite(out).all()


def test_failing_append_backward_rolls_back():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data(name="x", shape=[-1, 4], dtype="float32")
        loss = fluid.layers.mean(fluid.layers.fc(x, 1))
        before = _snapshot(main)

        def boom(block, context):
            if len(block.ops) > len(main.global_block().ops) - 1 and "mul_grad" in [
                    o.type for o in block.ops]:
                raise KeyError("callback failed")
        with pytest.raises(KeyError):
            fluid.backward.append_backward(loss, callbacks=[boom])
        assert _snapshot(main) == before
        assert main._appending_grad_times == 0


# -- validation ----------------------------------------------------------------------------------
@pytest.mark.parametrize("make, match", [
    (lambda: fluid.optimizer.SGD(-0.1), r"learning_rate must be a number in \[0"),
    (lambda: fluid.optimizer.Adam(0.1, beta1=1.0), r"beta1 must be a number in \[0.0, 1.0\)"),
    (lambda: fluid.optimizer.Adam(0.1, beta2=-0.5), r"beta2 .* received -0.5"),
    (lambda: fluid.optimizer.Adam(0.1, epsilon=0.0), r"epsilon must be a number in \(0.0"),
    (lambda: fluid.optimizer.Momentum(0.1, momentum=-1.0), "momentum"),
    (lambda: fluid.optimizer.RMSProp(0.1, rho=1.5), "rho"),
    (lambda: fluid.optimizer.Adagrad(0.1, epsilon=-1e-6), "epsilon"),
    (lambda: fluid.optimizer.Ftrl(0.1, lr_power=0.5), "lr_power"),
    (lambda: fluid.optimizer.Lamb(0.1, lamb_weight_decay=-0.01), "lamb_weight_decay"),
    (lambda: fluid.optimizer.Adamax(0.1, beta1=float("nan")), "beta1"),
])
def test_hyper_parameters_are_range_checked(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_numpy_scalars_are_accepted_like_python_numbers():
    opt = fluid.optimizer.Adam(np.float32(0.01), beta1=np.float64(0.8), epsilon=np.float32(1e-7))
    assert opt._beta1 == pytest.approx(0.8) and opt._epsilon == pytest.approx(1e-7)
    clip = fluid.clip.GradientClipByValue(np.float32(1.0))
    assert (clip.min, clip.max) == (-1.0, 1.0)
    assert fluid.clip.GradientClipByGlobalNorm(np.int64(2)).clip_norm == 2.0
    assert fluid.regularizer.L2Decay(np.float32(0.5))._regularization_coeff == 0.5
    with pytest.raises(ValueError):
        fluid.clip.GradientClipByNorm(np.bool_(True))


def test_clip_and_regularizer_config_round_trip_through_their_registry():
    from fluidlite.formats import serialize
    for obj in (fluid.clip.GradientClipByValue(2.0, -1.0), fluid.clip.ClipGradByNorm(3.0),
                fluid.clip.GradientClipByGlobalNorm(4.0, "g", error_if_nonfinite=True),
                fluid.clip.ErrorClipByValue(5.0), fluid.regularizer.L1Decay(0.25)):
        kind = "regularizer" if "Decay" in type(obj).__name__ else "clip"
        d = serialize._enc_config(obj, kind, "here")
        back = serialize._dec_config(d, kind, "here")
        assert type(back) is type(obj) and back.to_config() == obj.to_config()
    with pytest.raises(serialize.ProgramFormatError, match="unknown regularizer type"):
        serialize._dec_config({"type": "GradientClipByNorm", "clip_norm": 1.0}, "regularizer",
                              "here")
