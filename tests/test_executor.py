"""Executor, Scope, places and initializers: semantics, plan caching and every feed/run error."""
import logging

import numpy as np
import pytest

import fluidlite as fluid


def mlp(seed=3):
    fluid.default_main_program().random_seed = seed
    fluid.default_startup_program().random_seed = seed
    x = fluid.data("x", [-1, 4], "float32")
    y = fluid.layers.fc(x, 3, act="softmax")
    return x, y


def ready(seed=3):
    x, y = mlp(seed)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(fluid.default_startup_program())
    return exe, x, y


X = np.arange(8, dtype="float32").reshape(2, 4) / 10


# -- results and scope semantics --------------------------------------------------------------
def test_forward_script_runs_like_fluid():
    exe, x, y = ready()
    out = exe.run(fluid.default_main_program(), feed={"x": X}, fetch_list=[y])
    assert isinstance(out, list) and len(out) == 1
    assert out[0].shape == (2, 3) and out[0].dtype == np.float32
    np.testing.assert_allclose(out[0].sum(axis=1), 1.0, rtol=1e-6)
    w = np.array(fluid.global_scope().find_var("fc_0.w_0").get_tensor())
    b = np.array(fluid.global_scope().find_var("fc_0.b_0").get_tensor())
    logits = X @ w + b
    ref = np.exp(logits - logits.max(1, keepdims=True))
    np.testing.assert_allclose(out[0], ref / ref.sum(1, keepdims=True), rtol=1e-5)


def test_fetch_forms_and_order():
    exe, x, y = ready()
    a, b = exe.run(feed={"x": X}, fetch_list=[y.name, "fc_0.tmp_0"])
    assert a.shape == (2, 3) and b.shape == (2, 3)
    (c,) = exe.run(feed={"x": X}, fetch_list=y)
    [[d]] = [exe.run(feed={"x": X}, fetch_list=[[y]])]
    np.testing.assert_array_equal(a, c)
    np.testing.assert_array_equal(a, d)
    assert exe.run(feed={"x": X}) == []


def test_non_persistables_are_not_kept_in_scope_but_persistables_are():
    exe, x, y = ready()
    exe.run(feed={"x": X}, fetch_list=[y])
    scope = fluid.global_scope()
    assert scope.find_var("fc_0.tmp_0") is None and scope.find_var(y.name) is None
    assert scope.find_var("fc_0.w_0").is_initialized()


def test_fetching_a_parameter_returns_a_copy():
    exe, x, y = ready()
    (w,) = exe.run(feed={"x": X}, fetch_list=["fc_0.w_0"])
    w[...] = 42
    assert not np.any(np.array(fluid.global_scope().find_var("fc_0.w_0").get_tensor()) == 42)


def test_return_numpy_false_gives_lodtensors():
    exe, x, y = ready()
    (t,) = exe.run(feed={"x": X}, fetch_list=[y], return_numpy=False)
    assert isinstance(t, fluid.LoDTensor) and np.array(t).shape == (2, 3) and t.shape() == [2, 3]


def test_scope_api_and_scope_guard():
    scope = fluid.core.Scope()
    v = scope.var("a")
    v.get_tensor().set(np.ones((2, 2), "float32"), fluid.CPUPlace())
    assert np.array(scope.find_var("a").get_tensor()).sum() == 4
    kid = scope.new_scope()
    assert kid.find_var("a") is v and kid.find_var("zz") is None
    assert scope.local_var_names() == ["a"]
    scope.drop_kids()
    exe = fluid.Executor(fluid.CPUPlace())
    mlp()
    with fluid.scope_guard(scope):
        exe.run(fluid.default_startup_program())
        assert fluid.global_scope() is scope
    assert scope.find_var("fc_0.w_0") is not None


def test_explicit_scope_argument():
    x, y = mlp()
    exe = fluid.Executor(fluid.CPUPlace())
    s = fluid.Scope()
    exe.run(fluid.default_startup_program(), scope=s)
    assert fluid.global_scope().find_var("fc_0.w_0") is None
    exe.run(feed={"x": X}, fetch_list=[y], scope=s)


def test_cuda_place_runs_on_cpu_and_warns_once(caplog):
    import fluidlite.executor.executor as ex
    ex._warned_cuda = False
    x, y = mlp()
    exe = fluid.Executor(fluid.CUDAPlace(0))
    with caplog.at_level(logging.WARNING, logger="fluidlite"):
        exe.run(fluid.default_startup_program())
        exe.run(feed={"x": X}, fetch_list=[y])
    assert sum("CPU" in r.message for r in caplog.records) == 1
    assert fluid.is_compiled_with_cuda() is False
    assert len(fluid.cpu_places(2)) == 2


def test_compiled_program_runs():
    exe, x, y = ready()
    cp = fluid.CompiledProgram(fluid.default_main_program()).with_data_parallel(loss_name=y.name)
    assert exe.run(cp, feed={"x": X}, fetch_list=[y])[0].shape == (2, 3)


def test_closed_executor_and_bad_program():
    exe, x, y = ready()
    with pytest.raises(TypeError, match="Executor requires Program"):
        exe.run("prog")
    exe.close()
    with pytest.raises(RuntimeError, match="closed Executor"):
        exe.run()


def test_empty_program_warns(caplog):
    with caplog.at_level(logging.WARNING, logger="fluidlite"):
        assert fluid.Executor(fluid.CPUPlace()).run(fluid.Program()) == []
    assert "no operators" in caplog.text


# -- plan cache -------------------------------------------------------------------------------
def test_plan_is_cached_and_invalidated_by_program_changes():
    exe, x, y = ready()
    prog = fluid.default_main_program()
    exe.run(feed={"x": X}, fetch_list=[y])
    (plan,) = exe.cached_plans(prog)
    exe.run(feed={"x": X}, fetch_list=[y])
    assert exe.cached_plans(prog) == [plan]
    with fluid.program_guard(prog):
        z = fluid.layers.scale(y, scale=2.0) if hasattr(fluid.layers, "scale") else None
    if z is None:
        prog.global_block().append_op("scale", {"X": y}, {"Out": "z"}, {"scale": 2.0})
        z = prog.global_block().var("z")
    a, b = exe.run(feed={"x": X}, fetch_list=[y, z])
    np.testing.assert_allclose(b, 2 * a)
    # an attribute change after a run is never executed with the stale plan
    prog.global_block().ops[-1]._set_attr("scale", 3.0)
    a, b = exe.run(feed={"x": X}, fetch_list=[y, z])
    np.testing.assert_allclose(b, 3 * a)


def test_plan_prints_generated_source():
    exe, x, y = ready()
    exe.run(feed={"x": X}, fetch_list=[y])
    (plan,) = exe.cached_plans(fluid.default_main_program())
    src = str(plan)
    assert "def __plan(F, P, K, S):" in src and "del " in src
    # every kernel call names its op (the fc layer's mul and bias add: one fused kernel)
    assert "t3 = k0(t0, t1, t2)  # fused(mul+elementwise_add)" in src
    assert "  # softmax" in src


# -- errors before effects --------------------------------------------------------------------
def test_unknown_feed_name():
    exe, x, y = ready()
    with pytest.raises(ValueError, match="'xx' is not declared.*'x'"):
        exe.run(feed={"xx": X}, fetch_list=[y])


def test_feed_rank_mismatch():
    exe, x, y = ready()
    with pytest.raises(ValueError) as e:
        exe.run(feed={"x": X.reshape(2, 2, 2)}, fetch_list=[y])
    msg = str(e.value)
    assert "'x'" in msg and "dimensions = 2" in msg and "[-1, 4]" in msg and "[2, 2, 2]" in msg


def test_feed_shape_mismatch_minus_one_matches_anything():
    exe, x, y = ready()
    exe.run(feed={"x": np.zeros((7, 4), "float32")}, fetch_list=[y])
    with pytest.raises(ValueError, match=r"shape = \[-1, 4\], but received fed shape \[2, 5\]"):
        exe.run(feed={"x": np.zeros((2, 5), "float32")}, fetch_list=[y])


def test_feed_dtype_mismatch_suggests_astype():
    exe, x, y = ready()
    with pytest.raises(ValueError) as e:
        exe.run(feed={"x": X.astype("float64")}, fetch_list=[y])
    msg = str(e.value)
    assert "'x'" in msg and "'float32'" in msg and "'float64'" in msg
    assert ".astype('float32')" in msg


def test_layers_data_is_not_feed_checked_but_warns_once(caplog):
    # fluid checks only fluid.data variables (need_check_feed); layers.data runs on the fed array
    label = fluid.layers.data("label", [1], dtype="int64")
    out = fluid.layers.scale(fluid.layers.cast(label, "float32"), 2.0)
    exe = fluid.Executor(fluid.CPUPlace())
    with caplog.at_level("WARNING", logger="fluidlite"):
        for _ in range(3):
            (got,) = exe.run(feed={"label": np.array([[1], [2]], "int32")}, fetch_list=[out])
            (got3,) = exe.run(feed={"label": np.ones((2, 1, 3), "int64")}, fetch_list=[out])
    np.testing.assert_array_equal(got, [[2.0], [4.0]])
    assert got3.shape == (2, 1, 3)
    warned = [r.getMessage() for r in caplog.records if "not checked" in r.getMessage()]
    assert len(warned) == 2 and "'label'" in warned[0] and "int32" in warned[0]


def test_fluid_data_stays_strictly_checked():
    fluid.data("label", [None, 1], dtype="int64")
    exe = fluid.Executor(fluid.CPUPlace())
    with pytest.raises(ValueError, match=r"astype\('int64'\)"):
        exe.run(feed={"label": np.zeros((2, 1), "int32")})


def test_scalars_and_0d_arrays_feed_as_one_element_tensors():
    x = fluid.data("x", [1], dtype="float32")
    y = fluid.layers.scale(x, 3.0)
    exe = fluid.Executor(fluid.CPUPlace())
    for value in (2.0, 2, np.float32(2.0), np.array(2.0, "float32"), [2.0]):
        (got,) = exe.run(feed={"x": value}, fetch_list=[y])
        assert got.shape == (1,) and got.dtype == np.float32 and got[0] == 6.0


def test_python_list_feed_is_converted_and_ragged_rejected():
    exe, x, y = ready()
    (out,) = exe.run(feed={"x": [[0.0, 0.1, 0.2, 0.3]]}, fetch_list=[y])
    assert out.shape == (1, 3)
    with pytest.raises(TypeError, match="create_lod_tensor"):
        exe.run(feed={"x": [[0.0, 0.1], [0.2]]}, fetch_list=[y])
    with pytest.raises(TypeError, match="feed requires dict"):
        exe.run(feed=3, fetch_list=[y])


def test_unknown_fetch_lists_closest_names():
    exe, x, y = ready()
    with pytest.raises(ValueError) as e:
        exe.run(feed={"x": X}, fetch_list=["fc_0.tmp_9"])
    assert "fc_0.tmp_9" in str(e.value) and "fc_0.tmp_0" in str(e.value)
    with pytest.raises(TypeError, match=r"fetch_list\[0\] 's type"):
        exe.run(feed={"x": X}, fetch_list=[3])


def test_missing_feed_names_the_variable():
    exe, x, y = ready()
    with pytest.raises(ValueError, match="Need feed data for variable 'x'"):
        exe.run(fetch_list=[y])


def test_uninitialized_parameter_says_run_startup():
    x, y = mlp()
    exe = fluid.Executor(fluid.CPUPlace())
    with pytest.raises(RuntimeError) as e:
        exe.run(feed={"x": X}, fetch_list=[y])
    assert "fc_0.w_0" in str(e.value) and "startup program" in str(e.value)


def _failing_program():
    """w is updated in place (persistable), then an op fails at run time."""
    block = fluid.default_main_program().global_block()
    w = fluid.layers.create_parameter([2, 3], "float32", name="w") \
        if hasattr(fluid.layers, "create_parameter") else None
    if w is None:
        helper = fluid.layer_helper.LayerHelper("w")
        w = helper.create_parameter(fluid.ParamAttr(name="w"), [2, 3], "float32")
    block.append_op("scale", {"X": w}, {"Out": w}, {"scale": 2.0})
    a = fluid.data("a", [-1, -1], "float32")
    bad = block.create_var(name="bad")
    block.append_op("mul", {"X": a, "Y": w}, {"Out": bad})   # shapes only known at run time
    return a, bad


def test_kernel_error_names_op_shapes_and_user_line():
    a, bad = _failing_program()
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(fluid.default_startup_program())
    with pytest.raises(Exception) as e:
        exe.run(feed={"a": np.ones((4, 5), "float32")}, fetch_list=[bad])
    msg = str(e.value)
    assert "'mul'" in msg and "a: [4, 5] float32" in msg and "w: [2, 3] float32" in msg
    assert "test_executor.py" in msg and "block.append_op(\"mul\"" in msg


def test_failed_run_leaves_persistables_untouched():
    a, bad = _failing_program()
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(fluid.default_startup_program())
    before = np.array(fluid.global_scope().find_var("w").get_tensor()).copy()
    with pytest.raises(Exception):
        exe.run(feed={"a": np.ones((4, 5), "float32")}, fetch_list=[bad])
    np.testing.assert_array_equal(np.array(fluid.global_scope().find_var("w").get_tensor()),
                                  before)
    exe.run(feed={"a": np.ones((4, 2), "float32")}, fetch_list=[bad])
    np.testing.assert_allclose(np.array(fluid.global_scope().find_var("w").get_tensor()),
                               2 * before)


# -- initializers and determinism -------------------------------------------------------------
def _init_values(seed):
    with fluid.unique_name.guard():
        main, startup = fluid.Program(), fluid.Program()
        startup.random_seed = seed
        with fluid.program_guard(main, startup):
            x = fluid.data("x", [-1, 16])
            fluid.layers.fc(x, 16)
            fluid.layers.fc(x, 16)
        scope = fluid.Scope()
        fluid.Executor(fluid.CPUPlace()).run(startup, scope=scope)
        return [np.array(scope.find_var(n).get_tensor()) for n in ("fc_0.w_0", "fc_1.w_0")]


def test_same_random_seed_same_numbers_bit_for_bit():
    a, b = _init_values(11), _init_values(11)
    for u, v in zip(a, b):
        assert u.tobytes() == v.tobytes()
    c = _init_values(12)
    assert a[0].tobytes() != c[0].tobytes()
    assert a[0].tobytes() != a[1].tobytes()   # same-shaped params still differ


@pytest.mark.parametrize("init,check", [
    (fluid.initializer.Constant(0.5), lambda v: np.all(v == 0.5)),
    (fluid.initializer.Uniform(-0.1, 0.2), lambda v: v.min() >= -0.1 and v.max() < 0.2),
    (fluid.initializer.Normal(1.0, 0.01), lambda v: abs(v.mean() - 1.0) < 0.01),
    (fluid.initializer.TruncatedNormal(0.0, 1.0), lambda v: np.abs(v).max() <= 2.0),
    (fluid.initializer.Xavier(), lambda v: np.abs(v).max() <= np.sqrt(6 / (40 + 50))),
    (fluid.initializer.Xavier(uniform=False), lambda v: abs(v.std() - np.sqrt(2 / 90)) < 0.03),
    (fluid.initializer.MSRA(), lambda v: np.abs(v).max() <= np.sqrt(6 / 40)),
    (fluid.initializer.NumpyArrayInitializer(np.full((40, 50), 3, "float32")),
     lambda v: np.all(v == 3)),
])
def test_initializers_are_startup_ops(init, check):
    x = fluid.data("x", [-1, 40])
    fluid.layers.fc(x, 50, param_attr=fluid.ParamAttr(initializer=init), bias_attr=False)
    startup = fluid.default_startup_program()
    assert len(startup.global_block().ops) == 1
    scope = fluid.Scope()
    fluid.Executor(fluid.CPUPlace()).run(startup, scope=scope)
    v = np.array(scope.find_var("fc_0.w_0").get_tensor())
    assert v.shape == (40, 50) and v.dtype == np.float32 and check(v)


def test_initializer_aliases_and_param_attr():
    assert fluid.initializer.ConstantInitializer is fluid.initializer.Constant
    assert fluid.initializer.XavierInitializer is fluid.initializer.Xavier
    attr = fluid.ParamAttr(name="w", learning_rate=0.1, trainable=False, need_clip=False,
                           regularizer=fluid.regularizer.L2Decay(0.1))
    x = fluid.data("x", [-1, 2])
    fluid.layers.fc(x, 2, param_attr=attr)
    w = fluid.default_main_program().global_block().var("w")
    assert w.optimize_attr["learning_rate"] == 0.1 and not w.trainable and not w.need_clip
    assert isinstance(w.regularizer, fluid.regularizer.L2Decay)
    with pytest.raises(TypeError, match="instance"):
        fluid.ParamAttr(regularizer=fluid.regularizer.L2Decay)
    with pytest.raises(ValueError):
        fluid.ParamAttr(name="")


# -- profiling --------------------------------------------------------------------------------
def test_run_with_profile_reports_per_op_times(capsys):
    exe, x, y = ready()
    exe.run(feed={"x": X}, fetch_list=[y], profile=True)
    assert capsys.readouterr().out == ""            # benchmarks doc: kept in last_profile, not printed
    prof = exe.last_profile
    # the fc layer's mul and bias add run as one fused kernel (executor/fusion)
    assert set(prof.by_type) == {"fused(mul+elementwise_add)", "softmax"}
    assert all(s.calls == 1 and s.total >= 0 for s in prof.by_type.values())
    text = prof.report()
    assert "By op type:" in text and "#0 fused(mul+elementwise_add)" in text


def test_profiler_context_manager_accumulates_and_writes(tmp_path, capsys):
    exe, x, y = ready()
    path = tmp_path / "prof.txt"
    with fluid.profiler.profiler("CPU", sorted_key="calls", profile_path=str(path)) as prof:
        for _ in range(3):
            exe.run(feed={"x": X}, fetch_list=[y])
    assert prof.runs == 3 and prof.by_type["fused(mul+elementwise_add)"].calls == 3
    assert "Profiling Report" in path.read_text()
    # benchmarks doc: the profiler prints the time per op type and per op when the block ends, on
    # stdout as fluid's profiler did, whether or not logging is configured
    out = capsys.readouterr().out
    assert out.startswith("------------------------->  Profiling Report")
    assert "(3 run(s), total" in out and "By op type:" in out
    assert "#0 fused(mul+elementwise_add)" in out
    assert out.strip() == path.read_text().strip()
    with pytest.raises(ValueError, match="state must be"):
        fluid.profiler.start_profiler("TPU")
    with pytest.raises(ValueError, match="sorted_key"):
        with fluid.profiler.profiler("CPU", sorted_key="fastest"):
            pass


# -- plan-time fusion -------------------------------------------------------------------------
def _train(fusion, steps=4):
    import fluidlite.executor.plan as plan_mod
    old, plan_mod.ENABLE_FUSION = plan_mod.ENABLE_FUSION, fusion
    try:
        with fluid.unique_name.guard():
            main, startup = fluid.Program(), fluid.Program()
            main.random_seed = startup.random_seed = 5
            with fluid.program_guard(main, startup):
                x = fluid.data("x", [-1, 6])
                label = fluid.data("label", [-1, 1], "int64")
                h = fluid.layers.fc(x, 5, act="relu")
                logits = fluid.layers.fc(h, 3)
                loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, label))
                fluid.optimizer.SGD(0.5, grad_clip=fluid.clip.GradientClipByGlobalNorm(0.1)) \
                    .minimize(loss)
            exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
            exe.run(startup, scope=scope)
            rng = np.random.default_rng(0)
            feed = {"x": rng.normal(size=(8, 6)).astype("float32"),
                    "label": rng.integers(0, 3, (8, 1)).astype("int64")}
            losses = [exe.run(main, feed=feed, fetch_list=[loss], scope=scope)[0]
                      for _ in range(steps)]
            (plan,) = exe.cached_plans(main)
            params = {p.name: np.array(scope.find_var(p.name).get_tensor())
                      for p in main.all_parameters()}
            return losses, params, plan.step_types
    finally:
        plan_mod.ENABLE_FUSION = old


def test_fusion_matches_unfused_ops_and_leaves_program_unchanged():
    fused_losses, fused_params, fused_ops = _train(True)
    plain_losses, plain_params, plain_ops = _train(False)
    assert "fused(elementwise_mul+sgd)" in fused_ops and "sgd" in plain_ops
    assert len(fused_ops) < len(plain_ops)
    # the fused update forms lr * scale first: equal up to float32 rounding
    np.testing.assert_allclose(fused_losses, plain_losses, rtol=1e-6)
    for name in plain_params:
        np.testing.assert_allclose(fused_params[name], plain_params[name], rtol=1e-6, atol=1e-7)
    again = _train(True)        # and deterministic, bit for bit
    assert all(a.tobytes() == b.tobytes() for a, b in zip(again[0], fused_losses))
    assert all(again[1][n].tobytes() == fused_params[n].tobytes() for n in fused_params)


def test_error_in_profiled_run_is_annotated_with_the_block_position():
    a, bad = _failing_program()
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(fluid.default_startup_program())
    with pytest.raises(Exception) as e:
        exe.run(feed={"a": np.ones((4, 5), "float32")}, fetch_list=[bad], profile=True)
    assert "Error in op 'mul' (op #1 of block 0)" in str(e.value)
    assert e.value.op_index == 1 and "test_executor.py" in str(e.value)


def _train_with_dropout(seed):
    with fluid.unique_name.guard():
        main, startup = fluid.Program(), fluid.Program()
        main.random_seed = startup.random_seed = seed
        with fluid.program_guard(main, startup):
            x = fluid.data("x", [-1, 8])
            label = fluid.data("label", [-1, 1], "int64")
            h = fluid.layers.dropout(fluid.layers.fc(x, 16, act="relu"), dropout_prob=0.5)
            loss = fluid.layers.mean(
                fluid.layers.softmax_with_cross_entropy(fluid.layers.fc(h, 4), label))
            fluid.optimizer.Adam(0.01).minimize(loss)
        exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
        exe.run(startup, scope=scope)
        rng = np.random.default_rng(1)
        feed = {"x": rng.normal(size=(16, 8)).astype("float32"),
                "label": rng.integers(0, 4, (16, 1)).astype("int64")}
        return np.concatenate([exe.run(main, feed=feed, fetch_list=[loss], scope=scope)[0]
                               for _ in range(5)])


def test_training_with_dropout_is_bit_for_bit_deterministic():
    a, b, c = _train_with_dropout(7), _train_with_dropout(7), _train_with_dropout(8)
    assert a.tobytes() == b.tobytes()
    assert a.tobytes() != c.tobytes()
    assert len(set(a.tolist())) == 5          # dropout draws a new mask every step


# -- OpDef.bind: the one callable the plan binds ----------------------------------------------
def test_default_bind_uses_lower_for_single_output_ops_and_forward_otherwise():
    from fluidlite.core.registry import VarSpec, get_op_def
    spec = VarSpec((2, 3), "float32")
    add = get_op_def("elementwise_add").bind([spec, spec], {"axis": -1, "op_role": 0}, {"Out"})
    assert add.single and add.fn(np.ones((2, 3)), np.ones((2, 3))).tolist() == [[2.0] * 3] * 2
    top = get_op_def("top_k").bind([spec, None], {"k": 1}, {"Out", "Indices"})
    assert not top.single
    res = top.fn(np.array([[1.0, 3.0, 2.0]]), None)
    assert res[top.result_keys.get("Indices", "Indices")].tolist() == [[1]]


def test_generated_grad_bind_calls_the_rule_and_skips_unwanted_gradients():
    from fluidlite.core.registry import get_op_def
    grad = get_op_def("elementwise_mul_grad")
    x, y, d = np.full((2, 2), 2.0), np.full((2, 2), 3.0), np.ones((2, 2))
    only_y = grad.bind([None] * 3, {"axis": -1}, {"Y@GRAD"})
    out = only_y.fn(x, y, d)
    assert not only_y.single and only_y.result_keys["Y@GRAD"] == "Y"
    assert set(out) == {"Y"} and out["Y"].tolist() == x.tolist()     # dX was never computed
    both = grad.bind([None] * 3, {"axis": -1}, {"X@GRAD", "Y@GRAD"}).fn(x, y, d)
    assert set(both) == {"X", "Y"}
    # forward() keeps the op contract: {slot: array} with fluid's slot names
    assert set(grad.forward(x, y, d, axis=-1)) == {"X@GRAD", "Y@GRAD"}


def test_plan_has_no_reference_to_generated_op_internals():
    import inspect
    import fluidlite.executor.plan as plan_mod
    src = inspect.getsource(plan_mod)
    for name in ("wants_outputs", "direct_backward", "raw_forward", "_wanted", "_grad"):
        assert name not in src


def test_the_unchecked_feed_warning_also_names_model_files(tmp_path, caplog, monkeypatch):
    """A loaded program's feed variable saved without need_check_feed (fluid.layers.data, fluid
    <= 1.5 files) runs on other shapes; the warning must not send the user to a layers.data
    call they never wrote."""
    # logged once per (variable, dtype, shape) and process: a fresh record, so the test can
    # run twice in one process (mutmut does)
    import fluidlite.executor.plan as plan_mod
    monkeypatch.setattr(plan_mod, "_LOOSE_WARNED", set())
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("img", [3], dtype="float32")
        y = fluid.layers.scale(x, 2.0)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    fluid.io.save_inference_model(str(tmp_path), ["img"], [y], exe, main)
    prog, feeds, fetches = fluid.io.load_inference_model(str(tmp_path), exe)
    with caplog.at_level("WARNING", logger="fluidlite"):
        (got,) = exe.run(prog, feed={"img": np.ones((2, 5), "float32")}, fetch_list=fetches)
    assert got.shape == (2, 5)
    warned = [r.getMessage() for r in caplog.records if "not checked" in r.getMessage()]
    assert len(warned) == 1
    assert "'img'" in warned[0] and "model file it was loaded from" in warned[0]
    assert "need_check_feed" in warned[0]
