"""Tests written from the mutation run of ``fluidlite/optimizer/gradient_merge.py`` (issue 28,
round 10, docs/mutation.md): ``GradientMergeOptimizer``.

* k = 2 with ``avg=True`` applies the mean (two micro-batches == one SGD step on the whole
  batch, a float64 NumPy computation of the MLP's gradient);
* the arguments reach where they belong: ``minimize(startup_program=)``,
  ``apply_optimize`` / ``_apply_optimize`` (fleet's entry point) put the step counter and
  the accumulators' initializers in the given startup program; ``backward`` passes
  ``parameter_list``, ``no_grad_set`` and ``callbacks`` to the inner optimizer;
* a ``minimize`` that fails (a parameter already updated) leaves the main and the startup
  program as they were (one build transaction);
* the program: the persistable step counter ``gradient_merge_step_N`` (int32) and one
  ``<param>@GRAD@GradientMerge`` accumulator per parameter, the accumulation ops tagged
  Optimize with their [param, grad], every op the merge adds in a ``gradient_merge`` name
  scope, the int32 ``Mask`` of the ``select_input`` resets (fluid's select_input reads an
  int32 mask);
* the messages of Paddle 2.x's ``paddle.incubate.optimizer.GradientMergeOptimizer`` (the
  class fluid 1.8's users get it from), ``type``, the defaults k_steps=1, avg=True."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core.dtypes import VarType
from fluidlite.core.ir import OpRole

RNG = np.random.default_rng(17)
W = RNG.uniform(-0.5, 0.5, (4, 3)).astype("float32")
X = RNG.uniform(-1, 1, (8, 4)).astype("float32")
Y = RNG.uniform(-1, 1, (8, 3)).astype("float32")


def _loss():
    x = fluid.data("x", [-1, 4])
    y = fluid.data("y", [-1, 3])
    out = fluid.layers.fc(x, 3, param_attr=fluid.ParamAttr(
        name="w", initializer=fluid.initializer.NumpyArrayInitializer(W)),
        bias_attr=fluid.ParamAttr(name="b"))
    return fluid.layers.mean(fluid.layers.square(out - y))


def _grads(w, b, x, y):
    """float64 d mean((x w + b - y)^2) / d(w, b)."""
    r = 2 * (x @ w + b - y) / y.size
    return x.T @ r, r.sum(0)


def test_k_2_with_avg_applies_the_mean_of_the_two_micro_batches():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        loss = _loss()
        fluid.optimizer.GradientMergeOptimizer(fluid.optimizer.SGD(0.5), k_steps=2,
                                               avg=True).minimize(loss)
    scope = fluid.Scope()
    exe = fluid.Executor()
    exe.run(startup, scope=scope)
    b0 = np.array(scope.find_var("b").get_tensor()).astype(np.float64)
    x, y = X.astype(np.float64), Y.astype(np.float64)
    gw1, gb1 = _grads(W.astype(np.float64), b0, x[:4], y[:4])
    gw2, gb2 = _grads(W.astype(np.float64), b0, x[4:], y[4:])
    exe.run(main, feed={"x": X[:4], "y": Y[:4]}, scope=scope)
    np.testing.assert_array_equal(np.array(scope.find_var("w").get_tensor()), W)
    exe.run(main, feed={"x": X[4:], "y": Y[4:]}, scope=scope)
    np.testing.assert_allclose(np.array(scope.find_var("w").get_tensor()),
                               W - 0.5 * (gw1 + gw2) / 2, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.array(scope.find_var("b").get_tensor()),
                               b0 - 0.5 * (gb1 + gb2) / 2, rtol=1e-5, atol=1e-6)


def _init_names(prog):
    return {n for op in prog.global_block().ops for n in op.output_arg_names}


GM_STATE = {"gradient_merge_step_0", "w@GRAD@GradientMerge", "b@GRAD@GradientMerge"}


def test_the_program_the_merge_builds():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        loss = _loss()
        fluid.optimizer.GradientMergeOptimizer(fluid.optimizer.SGD(0.5), k_steps=3).minimize(
            loss)
    block = main.global_block()
    persist = {n for n, v in block.vars.items() if v.persistable}
    assert GM_STATE <= persist and GM_STATE <= _init_names(startup)
    assert block.var("gradient_merge_step_0").dtype == VarType.INT32
    adds = [op for op in block.ops if op.type == "elementwise_add" and
            op.output("Out")[0].endswith("@GradientMerge")]
    assert len(adds) == 2
    for op in adds:
        p = op.output("Out")[0].split("@")[0]
        assert op.attr("op_role") == int(OpRole.Optimize)
        assert list(op.attr("op_role_var")) == [p, p + "@GRAD"]
    sels = [op for op in block.ops if op.type == "select_input" and
            op.output("Out")[0].endswith("@GradientMerge")]
    assert len(sels) == 2
    for op in sels:
        assert op.attr("op_role") == int(OpRole.Optimize)
        assert block.var(op.input("Mask")[0]).dtype == VarType.INT32
    # every op the merge adds (all but the inner optimizer's update) is an Optimize op in a
    # "gradient_merge" name scope (the group fluidlite.viz draws, the scope program text shows)
    ops = block.ops[[op.type for op in block.ops].index("increment"):]
    assert [op.type for op in ops].count("sgd") == 2
    for op in ops:
        assert op.attr("op_role") == int(OpRole.Optimize), op.type
        if op.type != "sgd":
            assert op.attr("op_namescope").startswith("/gradient_merge"), op.type
    casts = [op for op in block.ops if op.type == "cast" and
             op.output("Out")[0] == sels[0].input("Mask")[0]]
    assert len(casts) == 1 and casts[0].attr("out_dtype") == VarType.INT32
    assert casts[0].attr("op_role") == int(OpRole.Optimize)


def test_minimize_uses_the_startup_program_it_is_given():
    main, startup, other = fluid.Program(), fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        loss = _loss()
        gm = fluid.optimizer.GradientMergeOptimizer(fluid.optimizer.SGD(0.5), k_steps=2)
        gm.minimize(loss, startup_program=other)
    assert GM_STATE <= _init_names(other)
    assert not GM_STATE & _init_names(startup)


def test_apply_optimize_and_fleets_entry_point_use_the_startup_program_they_are_given():
    for entry in ("apply_optimize", "_apply_optimize"):
        main, startup, other = fluid.Program(), fluid.Program(), fluid.Program()
        with fluid.program_guard(main, startup), fluid.unique_name.guard():
            loss = _loss()
            gm = fluid.optimizer.GradientMergeOptimizer(fluid.optimizer.SGD(0.5), k_steps=2)
            pairs = gm.backward(loss)
            ops = getattr(gm, entry)(loss, other, pairs)
        assert [op.type for op in ops] == ["sgd", "sgd"]
        assert GM_STATE <= _init_names(other), entry
        assert not GM_STATE & _init_names(startup), entry


def test_backward_passes_its_arguments_to_the_inner_optimizer():
    main, startup, other = fluid.Program(), fluid.Program(), fluid.Program()
    seen = []
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        loss = _loss()
        gm = fluid.optimizer.GradientMergeOptimizer(fluid.optimizer.SGD(0.5), k_steps=2)
        pairs = gm.backward(loss, other, parameter_list=["w"],
                            callbacks=[lambda block, context: seen.append(context)])
        assert [p.name for p, _ in pairs] == ["w"]
        pairs = gm.backward(loss, other, no_grad_set={"w"})
        assert [p.name for p, _ in pairs] == ["b"]
    assert seen


def test_a_failed_minimize_leaves_both_programs_as_they_were():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        loss = _loss()
        gm = fluid.optimizer.GradientMergeOptimizer(fluid.optimizer.SGD(0.5), k_steps=2)
        gm.minimize(loss)
        before = (len(main.global_block().ops), len(startup.global_block().ops),
                  set(main.global_block().vars), set(startup.global_block().vars))
        with pytest.raises(RuntimeError):
            gm.minimize(loss)                # w and b already have their update ops
        after = (len(main.global_block().ops), len(startup.global_block().ops),
                 set(main.global_block().vars), set(startup.global_block().vars))
    assert after == before


def test_messages_and_type():
    sgd = fluid.optimizer.SGD(0.1)
    gm = fluid.optimizer.GradientMergeOptimizer(sgd, k_steps=np.int64(2))
    assert gm.type == "gradient_merge" and gm.k_steps == 2 and type(gm.k_steps) is int
    default = fluid.optimizer.GradientMergeOptimizer(sgd)       # Paddle's k_steps=1, avg=True
    assert default.k_steps == 1 and default.avg is True
    with pytest.raises(ValueError, match=r"^GradientMergeOptimizer: inner_optimizer must be a "
                                         r"fluid optimizer \(e\.g\. fluid\.optimizer\.SGD\(0\.01\)"
                                         r"\), but received 'sgd'$"):
        fluid.optimizer.GradientMergeOptimizer("sgd", k_steps=2)
    with pytest.raises(TypeError, match=r"^The loss should be an Variable, but received int$"):
        gm.minimize(3)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        loss = _loss()
        with pytest.raises(ValueError, match=r"^The parameter_list should be None when using "
                                             r"GradientMergeOptimizer$"):
            gm.minimize(loss, parameter_list=["w"])
        with pytest.raises(ValueError, match=r"^The no_grad_set should be None when using "
                                             r"GradientMergeOptimizer$"):
            gm.minimize(loss, no_grad_set={"w"})
    with fluid.dygraph.guard():
        with pytest.raises(RuntimeError, match=r"^In dygraph, we don't support "
                                               r"GradientMergeOptimizer\. You can do Gradient "
                                               r"merge by yourself with k-times forward \+ "
                                               r"backward, and one-time optimizer\.minimize\(\)$"):
            fluid.optimizer.GradientMergeOptimizer(sgd, k_steps=2)
