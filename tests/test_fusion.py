"""Plan-time fusion (executor/fusion.py): every optimizer's fused in-place update against the
unfused plan, the fused global-norm kernel, errors before effects, feeds and threads."""
import threading

import numpy as np
import pytest

import fluidlite as fluid
import fluidlite.executor.plan as plan_mod
from fluidlite.executor import fusion
from fluidlite.ops import inplace

# name -> (optimizer class, kwargs)
OPTIMIZERS = {
    "sgd": ("SGD", {}),
    "momentum": ("Momentum", {"momentum": 0.9}),
    "nesterov": ("Momentum", {"momentum": 0.9, "use_nesterov": True}),
    "lars": ("LarsMomentum", {"momentum": 0.9}),
    "adam": ("Adam", {}),
    "adamax": ("Adamax", {}),
    "adagrad": ("Adagrad", {}),
    "decayed_adagrad": ("DecayedAdagrad", {}),
    "adadelta": ("Adadelta", {}),
    "rmsprop": ("RMSProp", {}),
    "rmsprop_centered": ("RMSProp", {"centered": True, "momentum": 0.5}),
    "ftrl": ("Ftrl", {"l1": 0.01, "l2": 0.01}),
    "lamb": ("Lamb", {}),
}
IN_DIM, WIDTH = 60, 40        # the first weight has 2400 elements: three update chunks of 1024


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch):
    """Exercise the chunked in-place path (and its bit-identity across chunk boundaries) with
    small arrays."""
    monkeypatch.setattr(inplace, "CHUNK", 1024)
    monkeypatch.setattr(fusion, "_INPLACE_MIN", 1024)   # w0 (2400) in place, the rest not


def _program(opt, clip=False, l2=False, nonfinite_check=False, in_dim=IN_DIM, width=WIDTH):
    cls, kw = OPTIMIZERS[opt]
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 3
    with fluid.unique_name.guard(), fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, in_dim])
        label = fluid.data("label", [-1, 1], "int64")
        h = fluid.layers.fc(x, width, act="relu")
        logits = fluid.layers.fc(h, 3)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, label))
        grad_clip = fluid.clip.GradientClipByGlobalNorm(
            0.5, error_if_nonfinite=nonfinite_check) if clip else None
        reg = fluid.regularizer.L2Decay(1e-2) if l2 else None
        getattr(fluid.optimizer, cls)(learning_rate=0.05, grad_clip=grad_clip,
                                      regularization=reg, **kw).minimize(loss)
    return main, startup, loss


def _feeds(steps, in_dim=IN_DIM, seed=0):
    rng = np.random.default_rng(seed)
    return [{"x": rng.normal(size=(8, in_dim)).astype("float32"),
             "label": rng.integers(0, 3, (8, 1)).astype("int64")} for _ in range(steps)]


def _persistables(main, scope):
    return {v.name: np.array(scope.find_var(v.name).get_tensor()) for v in main.list_vars()
            if v.persistable and scope.find_var(v.name) is not None}


def _train(opt, fusion_on, steps=4, **kw):
    old, plan_mod.ENABLE_FUSION = plan_mod.ENABLE_FUSION, fusion_on
    try:
        main, startup, loss = _program(opt, **kw)
        exe, scope = fluid.Executor(), fluid.Scope()
        exe.run(startup, scope=scope)
        losses = [exe.run(main, feed=f, fetch_list=[loss], scope=scope)[0]
                  for f in _feeds(steps)]
        (plan,) = exe.cached_plans(main)
        return losses, _persistables(main, scope), plan.step_types
    finally:
        plan_mod.ENABLE_FUSION = old


@pytest.mark.parametrize("l2", [False, True], ids=["plain", "l2"])
@pytest.mark.parametrize("clip", [False, True], ids=["noclip", "clip"])
@pytest.mark.parametrize("opt", list(OPTIMIZERS))
def test_fused_update_matches_unfused_plan(opt, clip, l2):
    losses, state, types = _train(opt, True, clip=clip, l2=l2)
    ref_losses, ref_state, ref_types = _train(opt, False, clip=clip, l2=l2)
    op_type = {"nesterov": "momentum", "lars": "lars_momentum",
               "rmsprop_centered": "rmsprop"}.get(opt, opt)
    # parameters under fusion._INPLACE_MIN elements keep their own update op (sgd: none do)
    small = 0 if opt == "sgd" else 3            # b0 (40), w1 (120), b1 (3); w0 has 2400
    assert ref_types.count(op_type) == 4 and types.count(op_type) == small
    fused = [t for t in types if t.startswith("fused(")]
    assert any(t.endswith(op_type + ")") for t in fused), types
    assert ("fused(global_norm)" in types) == clip
    assert len(types) < len(ref_types) if clip or opt == "sgd" else len(types) <= len(ref_types)
    assert set(state) == set(ref_state)
    if opt == "sgd" and clip and not l2:
        # p - (lr * scale) * g instead of p - lr * (g * scale): one float32 rounding apart
        for n, ref in ref_state.items():
            np.testing.assert_allclose(state[n], ref, rtol=1e-6, atol=1e-7, err_msg=n)
        np.testing.assert_allclose(losses, ref_losses, rtol=1e-6)
    else:                       # bit for bit: every persistable and every loss
        for n, ref in ref_state.items():
            assert state[n].tobytes() == ref.tobytes(), n
        assert [l.tobytes() for l in losses] == [l.tobytes() for l in ref_losses]


def test_fusion_leaves_the_program_unchanged():
    main, startup, loss = _program("adam", clip=True, l2=True)
    before, version = str(main), main.version
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    exe.run(main, feed=_feeds(1)[0], fetch_list=[loss], scope=scope)
    assert str(main) == before and main.version == version


def test_one_update_kernel_and_one_norm_kernel_for_all_parameters():
    _, _, types = _train("sgd", True, steps=1, clip=True)
    assert types.count("fused(global_norm)") == 1
    assert types.count("fused(elementwise_mul+sgd)") == 1
    for t in ("squared_l2_norm", "sum", "sqrt", "elementwise_max", "elementwise_div", "cast",
              "elementwise_mul", "sgd"):
        assert t not in types
    _, _, types = _train("adam", True, steps=1, clip=True)
    # the three small parameters keep their adam op (and a tiny-scale-safe clip multiply)
    assert types.count("fused(elementwise_mul+adam)") == 1 and types.count("adam") == 3
    assert types.count("fused(clip_scale)") == 3 and "cast" not in types


def test_global_norm_is_fetchable_and_equals_the_unfused_value():
    values = {}
    for on in (True, False):
        old, plan_mod.ENABLE_FUSION = plan_mod.ENABLE_FUSION, on
        try:
            main, startup, loss = _program("momentum", clip=True)
            norm = fluid.clip.get_global_norm(main)
            exe, scope = fluid.Executor(), fluid.Scope()
            exe.run(startup, scope=scope)
            values[on] = [exe.run(main, feed=f, fetch_list=[loss, norm], scope=scope)
                          for f in _feeds(3)]
            assert ("fused(global_norm)" in exe.cached_plans(main)[0].step_types) == on
        finally:
            plan_mod.ENABLE_FUSION = old
    for got, ref in zip(values[True], values[False]):
        assert [a.tobytes() for a in got] == [a.tobytes() for a in ref]
        assert got[1].shape == ref[1].shape and got[1].dtype == ref[1].dtype


@pytest.mark.parametrize("opt", ["adam", "sgd", "ftrl"])
def test_nonfinite_gradient_step_changes_no_persistable(opt):
    main, startup, loss = _program(opt, clip=True, nonfinite_check=True)
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    feeds = _feeds(3)
    for f in feeds[:2]:
        exe.run(main, feed=f, fetch_list=[loss], scope=scope)
    before = _persistables(main, scope)
    bad = dict(feeds[2])
    bad["x"] = bad["x"].copy()
    bad["x"][0, 0] = np.nan
    with pytest.raises(FloatingPointError, match="No parameter was updated"):
        exe.run(main, feed=bad, fetch_list=[loss], scope=scope)
    assert "fused(global_norm)" in exe.cached_plans(main)[0].step_types
    after = _persistables(main, scope)
    assert set(after) == set(before)
    for n, v in before.items():
        assert after[n].tobytes() == v.tobytes(), n
    exe.run(main, feed=feeds[2], fetch_list=[loss], scope=scope)      # and training goes on
    assert any(_persistables(main, scope)[n].tobytes() != v.tobytes() for n, v in before.items())


def test_feeding_a_parameter_never_writes_the_callers_array():
    main, startup, loss = _program("adam", clip=True)
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    w = np.array(scope.find_var("fc_0.w_0").get_tensor())
    mine = w.copy()
    feed = dict(_feeds(1)[0], **{"fc_0.w_0": mine})
    exe.run(main, feed=feed, fetch_list=[loss], scope=scope)
    assert mine.tobytes() == w.tobytes()
    frozen = w.copy()
    frozen.flags.writeable = False                       # a read-only feed works as well
    exe.run(main, feed=dict(feed, **{"fc_0.w_0": frozen}), fetch_list=[loss], scope=scope)
    assert frozen.tobytes() == w.tobytes()


def test_fed_names_are_never_updated_in_place_by_the_plan():
    main, startup, loss = _program("sgd")
    block = main.global_block()
    ops = [op for op in block.ops if op.type not in ("feed", "fetch")]
    fused = fusion.fuse(ops, block, fetch_names={loss.name}, feed_names={"x", "fc_0.w_0"})
    (group,) = [op for op in fused if op.type == "fused(sgd)"]
    params = group.inputs["Param"]
    flags = dict(zip(params, group.opdef.inplace))
    assert flags["fc_0.w_0"] is False and flags["fc_1.w_0"] is True
    # the older positional signature: protected names are kept and never written in place
    fused = fusion.fuse(ops, block, {loss.name, "fc_1.w_0"})
    (group,) = [op for op in fused if op.type == "fused(sgd)"]
    assert dict(zip(group.inputs["Param"], group.opdef.inplace))["fc_1.w_0"] is False


def test_updates_followed_by_a_fallible_op_are_not_written_in_place():
    main, startup, loss = _program("adam")
    block = main.global_block()
    ops = [op for op in block.ops if op.type not in ("feed", "fetch")]
    fused = fusion.fuse(ops, block, fetch_names=set(), feed_names={"x", "label"})
    assert all(fused[-1].opdef.inplace)
    later = fusion.fuse(ops + [ops[0]], block, fetch_names=set(), feed_names={"x", "label"})
    (group,) = [op for op in later if op.type == "fused(adam)"]
    assert not any(group.opdef.inplace)


@pytest.mark.parametrize("opt", ["momentum", "rmsprop_centered", "lamb"])
def test_two_threads_on_separate_scopes_match_sequential_runs(opt):
    main, startup, loss = _program(opt, clip=True, in_dim=200, width=100)   # 20 chunks
    data = [_feeds(5, in_dim=200, seed=s) for s in (1, 2)]

    def train(exe, feeds, out):
        scope = fluid.Scope()
        exe.run(startup, scope=scope)
        for f in feeds:
            exe.run(main, feed=f, fetch_list=[loss], scope=scope)
        out.append(_persistables(main, scope))

    sequential = []
    for d in data:
        train(fluid.Executor(), d, sequential)
    exe, results = fluid.Executor(), [[], []]
    threads = [threading.Thread(target=train, args=(exe, d, r)) for d, r in zip(data, results)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for ref, (got,) in zip(sequential, results):
        for n, v in ref.items():
            assert got[n].tobytes() == v.tobytes(), n


def _clipped_step(scale_loss, fusion_on):
    """One SGD step (lr 1) with GradientClipByGlobalNorm(1.0) on a loss scaled by ``scale_loss``:
    returns (param before, param after, global norm fetched)."""
    old, plan_mod.ENABLE_FUSION = plan_mod.ENABLE_FUSION, fusion_on
    try:
        main, startup = fluid.Program(), fluid.Program()
        with fluid.unique_name.guard(), fluid.program_guard(main, startup):
            x = fluid.data("x", [-1, 50])
            y = fluid.layers.fc(x, 40, bias_attr=False,
                                param_attr=fluid.ParamAttr(name="w"))
            loss = fluid.layers.scale(fluid.layers.reduce_sum(y), scale=scale_loss)
            clip = fluid.clip.GradientClipByGlobalNorm(1.0)
            fluid.optimizer.SGD(1.0, grad_clip=clip).minimize(loss)
        exe, scope = fluid.Executor(), fluid.Scope()
        exe.run(startup, scope=scope)
        before = np.array(scope.find_var("w").get_tensor())
        x = np.random.default_rng(0).uniform(0.5, 1.0, (4, 50)).astype("float32")
        (norm,) = exe.run(main, feed={"x": x}, fetch_list=[clip.global_norm], scope=scope)
        return before, np.array(scope.find_var("w").get_tensor()), norm
    finally:
        plan_mod.ENABLE_FUSION = old


@pytest.mark.parametrize("scale_loss", [1e25, 1e36])
def test_global_norm_clip_is_correct_for_huge_finite_gradients(scale_loss):
    # squares overflow float32 (1e50, 1e72); with scale_loss=1e36 the scale (~4e-39) is below
    # float32's smallest normal, so the fused kernel multiplies in float64
    before, after, norm = _clipped_step(scale_loss, True)
    assert np.isfinite(norm).all() and norm[0] > 1e20
    step = (before.astype(np.float64) - after)
    assert np.isfinite(after).all()
    np.testing.assert_allclose(np.sqrt(np.sum(step ** 2)), 1.0, rtol=1e-5)
    # direction unchanged: every column of dW is the same (sum of x over the batch)
    g = np.random.default_rng(0).uniform(0.5, 1.0, (4, 50)).astype("float32").sum(0)
    expected = np.repeat((g / np.linalg.norm(g) / np.sqrt(40))[:, None], 40, axis=1)
    np.testing.assert_allclose(step, expected, rtol=1e-4)
    if scale_loss < 1e30:    # a normal scale: fused and unfused agree
        ref = _clipped_step(scale_loss, False)
        np.testing.assert_allclose(after, ref[1], rtol=1e-6, atol=1e-7)
        assert norm.tobytes() == ref[2].tobytes()


def test_per_parameter_learning_rate_and_fetched_parameters():
    """ParamAttr(learning_rate=) puts a ``scale`` of the learning rate before each update; the
    group still forms, and fetching a parameter returns its updated value."""
    results = {}
    for on in (True, False):
        old, plan_mod.ENABLE_FUSION = plan_mod.ENABLE_FUSION, on
        try:
            main, startup = fluid.Program(), fluid.Program()
            with fluid.unique_name.guard(), fluid.program_guard(main, startup):
                x = fluid.data("x", [-1, IN_DIM])
                label = fluid.data("label", [-1, 1], "int64")
                h = fluid.layers.fc(x, WIDTH, act="relu",
                                    param_attr=fluid.ParamAttr(name="w0", learning_rate=2.0))
                logits = fluid.layers.fc(h, 3, param_attr=fluid.ParamAttr(name="w1"))
                loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, label))
                fluid.optimizer.Adam(0.01, grad_clip=fluid.clip.GradientClipByGlobalNorm(0.5)) \
                    .minimize(loss)
            exe, scope = fluid.Executor(), fluid.Scope()
            exe.run(startup, scope=scope)
            results[on] = [exe.run(main, feed=f, fetch_list=[loss, "w0", "w1"], scope=scope)
                           for f in _feeds(3)]
            types = exe.cached_plans(main)[0].step_types
            assert ("fused(elementwise_mul+adam)" in types) == on
            assert np.array(scope.find_var("w0").get_tensor()).tobytes() == \
                results[on][-1][1].tobytes()
        finally:
            plan_mod.ENABLE_FUSION = old
    for got, ref in zip(results[True], results[False]):
        assert [a.tobytes() for a in got] == [a.tobytes() for a in ref]


def test_a_member_that_must_fail_runs_before_any_in_place_write():
    """Out-of-place members (here a centered rmsprop without MeanGrad, whose kernel raises) run
    first, so the in-place members of the same group are untouched when the group fails."""
    group = fusion._UpdateGroup("rmsprop", ["Param", "LearningRate", "Grad", "Moment",
                                            "MeanSquare"],
                                ["ParamOut", "MomentOut", "MeanSquareOut"],
                                [{"centered": False}, {"centered": True}], [True, True], False)
    assert group.inplace == [True, False]
    rng = np.random.default_rng(0)
    arrays = [[rng.normal(size=(3, 4)).astype("float32") for _ in range(2)] for _ in range(5)]
    arrays[1] = [np.array([0.1], "float32")] * 2                     # LearningRate
    arrays[4] = [np.abs(a) for a in arrays[4]]                        # MeanSquare
    before = [[a.copy() for a in col] for col in arrays]
    with pytest.raises(ValueError, match="centered=True needs the MeanGrad"):
        group.forward(*arrays)
    for col, ref in zip(arrays, before):
        for a, b in zip(col, ref):
            assert a.tobytes() == b.tobytes()


# -- issue 17: the data-parallel averaging (c_allreduce_sum + scale) is one in-place kernel -------
def _reduce_scale_program(fetch_sum: bool):
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [4, 3], "float32")
        y = fluid.layers.elementwise_mul(x, x)          # a temporary the all-reduce may own
        block = main.global_block()
        s = block.create_var(name="summed", shape=[4, 3], dtype="float32")
        block.append_op("c_allreduce_sum", {"X": [y]}, {"Out": [s]}, {"ring_id": 0})
        block.append_op("scale", {"X": [s]}, {"Out": [y]}, {"scale": 0.5})
        # a fed name, reduced and scaled under its own name: fused, but never written in place
        block.append_op("c_allreduce_sum", {"X": [x]}, {"Out": [x]}, {"ring_id": 0})
        block.append_op("scale", {"X": [x]}, {"Out": [x]}, {"scale": 0.25})
    return main, [y, x] + ([s] if fetch_sum else [])


@pytest.mark.parametrize("fetch_sum", [False, True], ids=["private", "fetched"])
def test_allreduce_then_scale_is_fused_and_never_writes_the_fed_array(fetch_sum):
    feed = np.arange(12, dtype=np.float32).reshape(4, 3)
    results = {}
    for on in (True, False):
        old, plan_mod.ENABLE_FUSION = plan_mod.ENABLE_FUSION, on
        try:
            main, fetch = _reduce_scale_program(fetch_sum)
            exe = fluid.Executor()
            fed = feed.copy()
            results[on] = exe.run(main, feed={"x": fed}, fetch_list=fetch)
            np.testing.assert_array_equal(fed, feed)      # the fed buffer is untouched
            types = exe.cached_plans(main)[0].step_types
        finally:
            plan_mod.ENABLE_FUSION = old
        # one process: the reduction is the identity, so Out = scale * X
        # a fetched unscaled sum stays materialised: that pair is not fused
        assert types.count("fused(c_allreduce_sum+scale)") == ((1 if fetch_sum else 2) if on
                                                                else 0)
    for got, ref in zip(results[True], results[False]):
        assert got.tobytes() == ref.tobytes()
    np.testing.assert_array_equal(results[True][0], 0.5 * feed * feed)
    np.testing.assert_array_equal(results[True][1], 0.25 * feed)
