"""Training never changes a dtype: every persistable keeps its declared dtype across steps, for
every optimizer x gradient clip x regularizer, on NumPy 1.x and 2.x alike.

NumPy 1.x promotes ``np.float32 scalar * python float`` to float64 where NumPy 2 keeps float32;
an update kernel relying on either rule silently turns float32 parameters into float64 on one
NumPy line (issue 26). The plans compiled here also carry the per-output dtype check
(``FLUIDLITE_CHECK_DTYPES``, on in the test suite), so a drifting temporary fails too.
"""
from __future__ import annotations

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core.dtypes import VarType, to_numpy_dtype
from fluidlite.executor import plan as plan_mod
from fluidlite.ops.py_func import register_callable

OPTIMIZERS = {
    "sgd": lambda **kw: fluid.optimizer.SGD(learning_rate=0.1, **kw),
    "momentum": lambda **kw: fluid.optimizer.Momentum(learning_rate=0.1, momentum=0.9, **kw),
    "nesterov": lambda **kw: fluid.optimizer.Momentum(learning_rate=0.1, momentum=0.9,
                                                 use_nesterov=True, **kw),
    "adagrad": lambda **kw: fluid.optimizer.Adagrad(learning_rate=0.1, **kw),
    "decayed_adagrad": lambda **kw: fluid.optimizer.DecayedAdagrad(learning_rate=0.1, **kw),
    "adadelta": lambda **kw: fluid.optimizer.Adadelta(learning_rate=0.1, **kw),
    "rmsprop": lambda **kw: fluid.optimizer.RMSProp(learning_rate=0.1, **kw),
    "centered_rmsprop": lambda **kw: fluid.optimizer.RMSProp(learning_rate=0.1, centered=True,
                                                        momentum=0.5, **kw),
    "adam": lambda **kw: fluid.optimizer.Adam(learning_rate=0.01, **kw),
    "adam_lazy": lambda **kw: fluid.optimizer.Adam(learning_rate=0.01, lazy_mode=True, **kw),
    "adamax": lambda **kw: fluid.optimizer.Adamax(learning_rate=0.01, **kw),
    "ftrl": lambda **kw: fluid.optimizer.Ftrl(learning_rate=0.1, **kw),
    "lamb": lambda **kw: fluid.optimizer.Lamb(learning_rate=0.01, **kw),
    "lars": lambda **kw: fluid.optimizer.LarsMomentum(learning_rate=0.1, momentum=0.9, **kw),
}
# fluid 1.8's Dpsgd takes neither grad_clip nor regularization: it clips and noises itself
DPSGD = lambda grad_clip=None, regularization=None: fluid.optimizer.Dpsgd(  # noqa: E731
    learning_rate=0.1, clip=0.5, batch_size=5.0, sigma=0.1)
CLIPS = {
    "none": lambda: None,
    "value": lambda: fluid.clip.GradientClipByValue(max=0.01, min=-0.01),
    "norm": lambda: fluid.clip.GradientClipByNorm(clip_norm=0.01),
    "global": lambda: fluid.clip.GradientClipByGlobalNorm(clip_norm=0.01),
}
REGULARIZERS = {
    "none": lambda: None,
    "l1": lambda: fluid.regularizer.L1Decay(1e-3),
    "l2": lambda: fluid.regularizer.L2Decay(1e-3),
}


def _build(dtype: str, opt, clip, reg):
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 5
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data(name="x", shape=[-1, 6], dtype=dtype)
        y = fluid.data(name="y", shape=[-1, 1], dtype="int64")
        h = fluid.layers.fc(x, 8, act="tanh")
        prob = fluid.layers.fc(h, 3, act="softmax")
        loss = fluid.layers.mean(fluid.layers.cross_entropy(prob, y))
        opt(grad_clip=clip, regularization=reg).minimize(loss)
    return main, startup, loss


def _declared(program: fluid.Program):
    """name -> declared numpy dtype of every persistable dense tensor of ``program``."""
    return {v.name: np.dtype(to_numpy_dtype(v.dtype))
            for v in program.list_vars()
            if v.persistable and v.type == VarType.LOD_TENSOR and v.dtype is not None}


def _train_and_check(dtype: str, opt_name: str, clip_name: str, reg_name: str,
                     steps: int = 3) -> None:
    main, startup, loss = _build(dtype, OPTIMIZERS.get(opt_name, DPSGD), CLIPS[clip_name](),
                                 REGULARIZERS[reg_name]())
    scope = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    rng = np.random.default_rng(0)
    declared = _declared(main)
    with fluid.scope_guard(scope):
        exe.run(startup)
        for step in range(steps):
            feed = {"x": rng.standard_normal((5, 6)).astype(dtype),
                    "y": rng.integers(0, 3, (5, 1)).astype("int64")}
            out, = exe.run(main, feed=feed, fetch_list=[loss])
            assert out.dtype == np.dtype(dtype)
            for name, want in declared.items():
                var = scope.find_var(name)
                if var is None or not var.is_initialized():
                    continue
                got = np.asarray(var.get_tensor()).dtype
                assert got == want, (
                    f"{opt_name} x clip {clip_name} x {reg_name}: '{name}' is {got} after step "
                    f"{step + 1}, declared {want}")


@pytest.mark.parametrize("reg_name", sorted(REGULARIZERS))
@pytest.mark.parametrize("clip_name", sorted(CLIPS))
@pytest.mark.parametrize("opt_name", sorted(OPTIMIZERS))
def test_float32_training_keeps_every_persistable_dtype(opt_name, clip_name, reg_name):
    _train_and_check("float32", opt_name, clip_name, reg_name)


@pytest.mark.parametrize("opt_name", sorted(OPTIMIZERS))
def test_float64_training_keeps_every_persistable_dtype(opt_name):
    _train_and_check("float64", opt_name, "global", "l2")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_dpsgd_training_keeps_every_persistable_dtype(dtype):
    _train_and_check(dtype, "dpsgd", "none", "none")


def test_the_suite_runs_with_the_dtype_check_on():
    """The guarantee above leans on the plan's check: the suite must compile with it."""
    assert plan_mod.CHECK_DTYPES


def test_the_dtype_check_names_the_drifting_output():
    """A kernel returning another dtype than its inference declared fails at that op."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data(name="x", shape=[2], dtype="float32")
        out = main.global_block().create_var(name="drift", dtype="float32", shape=[2])
        main.global_block().append_op(
            "py_func", {"X": [x]}, {"Out": [out]},
            {"forward_callable_id": register_callable(lambda a: np.asarray(a, np.float64)),
             "backward_callable_id": -1, "backward_skip_vars": []})
    with pytest.raises(Exception, match="'drift' was computed as float64 but the program "
                                        "declares it float32"):
        fluid.Executor().run(main, feed={"x": np.ones(2, "float32")}, fetch_list=[out])

