"""Tests written from the mutation run of ``fluidlite/optimizer/special.py`` (issue 28, round
10, docs/mutation.md): ``DGCMomentumOptimizer``, ``DpsgdOptimizer`` and ``PipelineOptimizer``.

References: fluid 1.8's python/paddle/fluid/optimizer.py (DGCMomentumOptimizer.__init__ /
_is_use_dgc / apply_gradients: the gradients DGC does not compress are clipped with the
optimizer's ``grad_clip`` -- ``self._grad_clip(not_dgc_params_grads)`` -- else with the legacy
per-parameter clips; PipelineOptimizer's checks) and step-by-step float64 NumPy simulations of
momentum / SGD on the gradients the program fetches."""
from __future__ import annotations

import numpy as np
import pytest

import fluidlite as fluid


def _fc_program(size_in, size_out, seed=5, dtype="float32"):
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = seed
    with fluid.program_guard(main, startup):
        x = fluid.data(name="x", shape=[-1, size_in], dtype=dtype)
        y = fluid.layers.fc(x, size=size_out, param_attr=fluid.ParamAttr(name="w"),
                            bias_attr=fluid.ParamAttr(name="b"))
        loss = fluid.layers.mean(fluid.layers.square(y))
    return main, startup, x, loss


def _clip(g, norm):
    n = np.linalg.norm(g)
    return g * (norm / n) if n > norm else g


def _run(main, startup, feeds, names):
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(startup)
        start = {n: np.array(scope.find_var(n).get_tensor()).astype(np.float64) for n in names}
        grads = []
        for xv in feeds:
            grads.append(exe.run(main, feed={"x": xv}, fetch_list=[n + "@GRAD" for n in names]))
        end = {n: np.array(scope.find_var(n).get_tensor()) for n in names}
    return start, grads, end


# -- DGC: the gradients it does not compress -----------------------------------------------------
def test_dgc_grad_clip_also_clips_the_uncompressed_gradients_from_the_first_step():
    """fluid 1.8: ``grad_clip=GradientClipByNorm(c)`` clips the compressed gradients to
    c / sqrt(num_trainers) once compression started and every other gradient to c at every
    step (the bias here: 128 elements, under DGC's 16384)."""
    main, startup, x, loss = _fc_program(128, 128)
    with fluid.program_guard(main, startup):
        fluid.optimizer.DGCMomentumOptimizer(
            learning_rate=0.5, momentum=0.9, rampup_begin_step=100,
            grad_clip=fluid.clip.GradientClipByNorm(0.001), num_trainers=4).minimize(loss)
    types = [op.type for op in main.global_block().ops]
    assert types.count("dgc") == 1 and types.count("momentum") == 1
    rng = np.random.default_rng(1)
    feeds = [rng.standard_normal((4, 128)).astype("float32") for _ in range(3)]
    start, grads, end = _run(main, startup, feeds, ["w", "b"])
    b, vel = start["b"], np.zeros_like(start["b"])
    for _, gb in grads:
        assert np.linalg.norm(gb) > 0.01                  # the clip bites
        vel = 0.9 * vel + _clip(gb.astype(np.float64), 0.001)
        b = b - 0.5 * vel
    np.testing.assert_allclose(end["b"], b, rtol=1e-5, atol=1e-7)
    # before rampup_begin_step the compressed parameter is plain momentum, unclipped
    w, vel = start["w"], np.zeros_like(start["w"])
    for gw, _ in grads:
        vel = 0.9 * vel + gw
        w = w - 0.5 * vel
    np.testing.assert_allclose(end["w"], w, rtol=1e-4, atol=1e-6)


def test_dgc_uncompressed_gradients_take_the_legacy_per_parameter_clip():
    """Without ``grad_clip``, fluid 1.8's ``append_gradient_clip_ops`` applies the clips set
    by ``fluid.clip.set_gradient_clip`` to the gradients DGC does not compress."""
    main, startup, x, loss = _fc_program(4, 3)
    with fluid.program_guard(main, startup):
        with pytest.warns(UserWarning, match="set_gradient_clip"):
            fluid.clip.set_gradient_clip(fluid.clip.GradientClipByValue(0.01), param_list=["b"])
        fluid.optimizer.DGCMomentumOptimizer(learning_rate=0.5, momentum=0.0,
                                             rampup_begin_step=0).minimize(loss)
    rng = np.random.default_rng(2)
    feeds = [rng.standard_normal((4, 4)).astype("float32") * 10]
    start, grads, end = _run(main, startup, feeds, ["w", "b"])
    gw, gb = (g.astype(np.float64) for g in grads[0])
    assert np.abs(gb).max() > 0.01
    np.testing.assert_allclose(end["b"], start["b"] - 0.5 * np.clip(gb, -0.01, 0.01),
                               rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(end["w"], start["w"] - 0.5 * gw, rtol=1e-5, atol=1e-6)


def test_dgc_local_clip_op_is_a_backward_op_of_the_parameter():
    """fluid 1.8 appends ``dgc_clip_by_norm`` under ``_backward_role_guard``: a Backward op
    (here also tagged with its [param, grad], like the other backward ops of a parameter)."""
    main, startup, x, loss = _fc_program(128, 128)
    with fluid.program_guard(main, startup):
        fluid.optimizer.DGCMomentumOptimizer(0.1, 0.9, 2, local_grad_clip_norm=1.0,
                                             num_trainers=1).minimize(loss)
    op, = [o for o in main.global_block().ops if o.type == "dgc_clip_by_norm"]
    assert op.attr("op_role") == int(fluid.core.ir.OpRole.Backward)
    assert list(op.attr("op_role_var")) == ["w", "w@GRAD"]
    assert op.attr("op_namescope") == "/dgc_clip/"          # its group in fluidlite.viz
    assert op.attr("max_norm") == 1.0 and op.attr("rampup_begin_step") == 2.0


# -- Dpsgd -------------------------------------------------------------------------------------
def test_dpsgd_defaults_are_fluids():
    """fluid 1.8: learning_rate 0.001, clip 0.9, batch_size 0.999, sigma 1e-8, and the op's
    seed attribute 0 (fluid's ``self._seed`` is None until the op is appended, then 0)."""
    main, startup, x, loss = _fc_program(4, 3)
    with fluid.program_guard(main, startup):
        opt = fluid.optimizer.Dpsgd()
        opt.minimize(loss)
    ops = [o for o in main.global_block().ops if o.type == "dpsgd"]
    assert len(ops) == 2
    for op in ops:
        assert {k: op.attr(k) for k in ("clip", "batch_size", "sigma", "seed")} == \
            {"clip": 0.9, "batch_size": 0.999, "sigma": 1e-8, "seed": 0}
    assert opt._learning_rate == 0.001


@pytest.mark.parametrize("kwargs,match", [
    (dict(learning_rate=None), "^learning_rate is not set.$"),
    (dict(clip=None), "^clip is not set.$"),
    (dict(batch_size=None), "^batch_size is not set.$"),
    (dict(sigma=None), "^sigma is not set.$"),
    (dict(batch_size=0.0), r"^Dpsgd: batch_size must be a number in \(0.0, inf\), but received 0.0$"),
    (dict(sigma=-0.5), r"^Dpsgd: sigma must be a number in \[0.0, inf\), but received -0.5$"),
])
def test_dpsgd_argument_errors_name_the_argument(kwargs, match):
    with pytest.raises(ValueError, match=match):
        fluid.optimizer.Dpsgd(**kwargs)


@pytest.mark.parametrize("plist,no_grad", [(["w"], None), (None, {"b"})])
def test_dpsgd_minimize_passes_its_arguments_on(plist, no_grad):
    main, startup, x, loss = _fc_program(4, 3)
    other = fluid.Program()
    with fluid.program_guard(main, startup):
        opt = fluid.optimizer.Dpsgd(learning_rate=0.1, clip=100.0, batch_size=1.0, sigma=0.0)
        ops, pairs = opt.minimize(loss, startup_program=other, parameter_list=plist,
                                  no_grad_set=no_grad,
                                  grad_clip=fluid.clip.GradientClipByValue(0.001))
    assert [p.name for p, _ in pairs] == ["w"]
    assert [op.type for op in ops] == ["dpsgd"]
    assert other.global_block().ops                       # the learning rate's initializer
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(startup)
        exe.run(other)
        w0 = np.array(scope.find_var("w").get_tensor()).astype(np.float64)
        b0 = np.array(scope.find_var("b").get_tensor())
        gw, = exe.run(main, feed={"x": np.full((2, 4), 3.0, "float32")}, fetch_list=["w@GRAD"])
        w1 = np.array(scope.find_var("w").get_tensor())
        b1 = np.array(scope.find_var("b").get_tensor())
    assert np.abs(gw).max() > 0.001
    np.testing.assert_allclose(w1, w0 - 0.1 * np.clip(gw, -0.001, 0.001), rtol=1e-5, atol=1e-8)
    np.testing.assert_array_equal(b1, b0)


def test_dpsgd_dygraph_minimize_takes_parameter_list_and_no_grad_set():
    with fluid.dygraph.guard():
        lin = fluid.dygraph.Linear(4, 2, param_attr=fluid.initializer.Constant(0.5),
                                   bias_attr=fluid.initializer.Constant(0.25))
        other = fluid.dygraph.Linear(4, 2)
        opt = fluid.optimizer.Dpsgd(learning_rate=0.1, clip=100.0, batch_size=1.0, sigma=0.0,
                                    parameter_list=lin.parameters() + other.parameters())
        x = fluid.dygraph.to_variable(np.ones((3, 4), "float32"))
        loss = fluid.layers.mean(lin(x)) + fluid.layers.mean(other(x))
        loss.backward()
        g = lin.weight.gradient().astype(np.float64)
        o_w = other.weight.numpy().copy()
        ops, pairs = opt.minimize(loss, parameter_list=lin.parameters(),
                                  no_grad_set={lin.bias.name})
        assert ops == [] and [p.name for p, _ in pairs] == [lin.weight.name]
        np.testing.assert_allclose(lin.weight.numpy(), 0.5 - 0.1 * g, rtol=1e-6)
        np.testing.assert_array_equal(lin.bias.numpy(), np.full(2, 0.25, "float32"))
        np.testing.assert_array_equal(other.weight.numpy(), o_w)


# -- PipelineOptimizer -------------------------------------------------------------------------
@pytest.mark.parametrize("plist,no_grad", [(["w"], None), (None, {"b"})])
def test_pipeline_records_fluids_settings_and_passes_minimize_arguments_on(plist, no_grad):
    main, startup, x, loss = _fc_program(4, 3)
    other = fluid.Program()
    with fluid.program_guard(main, startup):
        opt = fluid.optimizer.PipelineOptimizer(fluid.optimizer.SGD(0.1))
        ops, pairs = opt.minimize(loss, startup_program=other, parameter_list=plist,
                                  no_grad_set=no_grad)
    assert main._pipeline_opt == {"num_microbatches": 1, "start_cpu_core_id": 0,
                                  "section_program": None}
    assert [p.name for p, _ in pairs] == ["w"] and [op.type for op in ops] == ["sgd"]
    assert other.global_block().ops
    main, startup, x, loss = _fc_program(4, 3)
    with fluid.program_guard(main, startup):
        fluid.optimizer.PipelineOptimizer(fluid.optimizer.SGD(0.1), num_microbatches=3,
                                          start_cpu_core_id=2).minimize(loss)
    assert main._pipeline_opt == {"num_microbatches": 3, "start_cpu_core_id": 2,
                                  "section_program": None}


@pytest.mark.parametrize("kwargs,match", [
    (dict(num_microbatches=True), "^num_microbatches must be a positive value, but received True$"),
    (dict(num_microbatches=1.5), "^num_microbatches must be a positive value, but received 1.5$"),
    (dict(start_cpu_core_id=True),
     "^start_cpu_core_id must be greater than or equal to 0, but received True$"),
    (dict(start_cpu_core_id=0.5),
     "^start_cpu_core_id must be greater than or equal to 0, but received 0.5$"),
])
def test_pipeline_integer_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        fluid.optimizer.PipelineOptimizer(fluid.optimizer.SGD(0.1), **kwargs)


def test_pipeline_error_messages():
    with pytest.raises(ValueError, match=r"^The 'optimizer' parameter for PipelineOptimizer must "
                                         r"be an instance of Optimizer, but the given type is "
                                         r"<class 'str'>\.$"):
        fluid.optimizer.PipelineOptimizer("sgd")
    with fluid.dygraph.guard():
        with pytest.raises(RuntimeError, match=r"^In dygraph, don't support PipelineOptimizer\.$"):
            fluid.optimizer.PipelineOptimizer(fluid.optimizer.SGD(0.1))


# -- DGC: the op attributes, the arguments it passes on, its checks -----------------------------
def _simulate_dgc(w, grads, lr, mu, begin, sparsity, rampup_step, coeff=0.0, nesterov=False):
    """fluid 1.8's DGC on one process: momentum before ``begin``; then u = mu u + g,
    v = v + u, the top-k of |v| sent (k = numel * (1 - sparsity of the period)), cleared in
    u and v, and SGD on what was sent. L2 weight decay ``coeff`` added to every gradient."""
    from fluidlite.ops.optim_extra import period_sparsity
    vel, u, v = np.zeros_like(w), np.zeros_like(w), np.zeros_like(w)
    for step, g in enumerate(grads):
        g = g.astype(np.float64) + coeff * w
        if step < begin:
            vel = mu * vel + g
            w = w - lr * (g + mu * vel if nesterov else vel)
            continue
        u = mu * u + g
        v = v + u
        k = max(1, int(v.size * (1 - period_sparsity(sparsity, step - begin, rampup_step))))
        flat = v.reshape(-1)
        top = np.argsort(-np.abs(flat))[:k]
        sent = np.zeros_like(flat)
        sent[top] = flat[top]
        u.reshape(-1)[top] = 0
        v.reshape(-1)[top] = 0
        w = w - lr * sent.reshape(w.shape)
    return w


def test_dgc_momentum_rampup_step_regularization_and_parameter_list_reach_the_update():
    """momentum 0.5 and a 4-step rampup over sparsities [0.5, 0.9] (the dgc op's defaults
    would be m 0.9 and 1 step), L2 decay, only ``w`` in parameter_list (the bias keeps its
    value)."""
    main, startup, x, loss = _fc_program(128, 128)
    with fluid.program_guard(main, startup):
        opt = fluid.optimizer.DGCMomentumOptimizer(
            learning_rate=0.05, momentum=0.5, rampup_begin_step=1, rampup_step=4,
            sparsity=[0.5, 0.9], parameter_list=["w"],
            regularization=fluid.regularizer.L2Decay(0.1))
        ops, pairs = opt.minimize(loss)
    assert [p.name for p, _ in pairs] == ["w"]
    op, = [o for o in main.global_block().ops if o.type == "dgc"]
    assert {k: op.attr(k) for k in ("m", "use_nesterov", "sparsity", "rampup_begin_step",
                                    "rampup_step")} == \
        {"m": 0.5, "use_nesterov": False, "sparsity": [0.5, 0.9], "rampup_begin_step": 1.0,
         "rampup_step": 4.0}
    rng = np.random.default_rng(3)
    feeds = [rng.standard_normal((4, 128)).astype("float32") for _ in range(5)]
    start, fetched, end = _run(main, startup, feeds, ["w", "b"])
    np.testing.assert_array_equal(end["b"], start["b"].astype(np.float32))
    # the raw gradients of mean((x w + b)^2), step by step from the simulated w (the fetched
    # w@GRAD holds the decayed gradient: fluid's regularization sums into it in place)
    w, b, raw = start["w"], start["b"], []
    for step, xv in enumerate(feeds):
        xv = xv.astype(np.float64)
        g = xv.T @ (2 * (xv @ w + b)) / (4 * 128)
        np.testing.assert_allclose(fetched[step][0], g + 0.1 * w, rtol=1e-4, atol=1e-6)
        raw.append(g)
        w = _simulate_dgc(start["w"], raw, 0.05, 0.5, 1, [0.5, 0.9], 4, coeff=0.1)
    np.testing.assert_allclose(end["w"], w, rtol=1e-4, atol=1e-6)


def test_dgc_nesterov_before_rampup_and_the_accumulator_names():
    main, startup, x, loss = _fc_program(128, 128)
    with fluid.program_guard(main, startup):
        fluid.optimizer.DGCMomentumOptimizer(0.05, 0.5, rampup_begin_step=10, use_nesterov=True,
                                             name="dgcopt").minimize(loss)
    op, = [o for o in main.global_block().ops if o.type == "dgc"]
    assert op.attr("use_nesterov") is True and op.attr("rampup_step") == 1.0 and \
        op.attr("sparsity") == [0.999]
    names = set(main.global_block().vars)
    assert {"w_dgcopt_velocity_0", "w_dgcopt__dgc_u__0", "w_dgcopt__dgc_v__0",
            "b_dgcopt_velocity_0"} <= names
    rng = np.random.default_rng(4)
    feeds = [rng.standard_normal((4, 128)).astype("float32") for _ in range(3)]
    start, grads, end = _run(main, startup, feeds, ["w", "b"])
    want = _simulate_dgc(start["w"], [g for g, _ in grads], 0.05, 0.5, 10, [0.999], 1,
                         nesterov=True)
    np.testing.assert_allclose(end["w"], want, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("kwargs,exc,match", [
    (dict(momentum=None), ValueError, r"^momentum is not set\.$"),
    (dict(rampup_begin_step=-1), ValueError,
     r"^DGCMomentumOptimizer: rampup_begin_step must be an int >= 0, but received -1$"),
    (dict(rampup_begin_step=1.5), ValueError,
     r"^DGCMomentumOptimizer: rampup_begin_step must be an int >= 0, but received 1\.5$"),
    (dict(rampup_step="2"), ValueError,
     r"^DGCMomentumOptimizer: rampup_step must be an int >= 1, but received '2'$"),
    (dict(sparsity=[]), TypeError, r"^DGCMomentumOptimizer: sparsity must be a non-empty list "
                                   r"of floats in \[0, 1\), but received \[\]$"),
    (dict(sparsity="0.9"), TypeError, r"sparsity must be a non-empty list"),
    (dict(sparsity=[0.5, 1.0]), ValueError,
     r"^DGCMomentum: sparsity must be a number in \[0\.0, 1\.0\), but received 1\.0$"),
    (dict(local_grad_clip_norm=1.0, num_trainers=2.0), TypeError,
     r"^The type of num_trainers should be 'int', but received float$"),
    (dict(local_grad_clip_norm=-1.0, num_trainers=2), ValueError,
     r"^DGCMomentum: clip norm must be a number in \(0\.0, inf\), but received -1\.0$"),
    (dict(grad_clip=fluid.clip.GradientClipByGlobalNorm(1.0), num_trainers=2), TypeError,
     r"^The type of grad_clip should be 'GradientClipByNorm', because DGCMomentumOptimizer "
     r"only support GradientClipByNorm, but received GradientClipByGlobalNorm$"),
])
def test_dgc_argument_errors(kwargs, exc, match):
    args = dict(learning_rate=0.1, momentum=0.9, rampup_begin_step=0)
    args.update(kwargs)
    with pytest.raises(exc, match=match):
        fluid.optimizer.DGCMomentumOptimizer(**args)


def test_dgc_tuple_sparsity_and_its_dygraph_message():
    opt = fluid.optimizer.DGCMomentumOptimizer(0.1, 0.9, 0, sparsity=(0.5, 0.75))
    assert opt._sparsity == [0.5, 0.75]
    with fluid.dygraph.guard():
        with pytest.raises(RuntimeError, match=r"^In dygraph, don't support "
                                               r"DGCMomentumOptimizer\.$"):
            fluid.optimizer.DGCMomentumOptimizer(0.1, 0.9, 0)


# -- PipelineOptimizer: attributes come from the wrapped optimizer --------------------------------
def test_pipeline_reads_the_wrapped_optimizers_attributes():
    import copy
    sgd = fluid.optimizer.SGD(0.25)
    opt = fluid.optimizer.PipelineOptimizer(sgd)
    assert opt._learning_rate == 0.25 and opt.type == "sgd"
    with pytest.raises(AttributeError, match="no_such_attribute"):
        opt._no_such_attribute
    with pytest.raises(AttributeError, match="^__no_such_dunder__$"):
        opt.__no_such_dunder__
    clone = copy.copy(opt)
    assert clone._optimizer is sgd
    # an instance not initialized yet (as while unpickling) has no _optimizer: its lookups
    # raise AttributeError naming it, not an endless recursion
    bare = fluid.optimizer.PipelineOptimizer.__new__(fluid.optimizer.PipelineOptimizer)
    with pytest.raises(AttributeError, match="^_optimizer$"):
        bare._learning_rate
