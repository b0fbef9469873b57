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
