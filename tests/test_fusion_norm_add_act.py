"""A residual block's end fused (executor/fusion/patterns/norm_act.py, ``ADD_FORWARD``):
``batch_norm -> elementwise_add(shortcut) -> relu / relu6`` as one kernel -- the unfused plan's
bits, with the add's gradient reading a stand-in for batch norm's Y, and no fusion where Y or
the sum is seen or the shortcut is broadcast."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core import threads
from fluidlite.core.registry import get_op_def
from fluidlite.executor import fusion, plan
from fluidlite.ops import norm

SHAPE = (4, 6, 10, 10)
FUSED = "fused(batch_norm+elementwise_add+{})"


def _program(act="relu", shortcut="identity", bn_first=True, fetch=(), is_test=False,
             dtype="float32", **act_attrs):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.unique_name.guard(), fluid.program_guard(main, startup):
        x = fluid.data("x", list(SHAPE), dtype)
        h = fluid.layers.conv2d(x, SHAPE[1], 3, padding=1, bias_attr=False)
        y = fluid.layers.batch_norm(h, is_test=is_test, momentum=0.8, name="bn")
        if shortcut == "identity":
            s = x
        elif shortcut == "projection":        # its own conv and batch norm, right before the add
            s = fluid.layers.batch_norm(
                fluid.layers.conv2d(x, SHAPE[1], 1, bias_attr=False), is_test=is_test)
            y, s = s, y                          # the batch norm next to the add is the shortcut's
        else:                                    # a per-channel shortcut: broadcast, not fused
            s = fluid.layers.create_parameter([SHAPE[1]], dtype, name="bias_s")
        z = fluid.layers.elementwise_add(y, s, axis=1 if shortcut == "channel" else -1) \
            if bn_first else fluid.layers.elementwise_add(s, y)
        out = getattr(fluid.layers, act)(z, **act_attrs)
        loss = fluid.layers.reduce_mean(out * out)
        if not is_test:
            fluid.optimizer.Momentum(0.05, 0.9).minimize(loss)
    names = {"y": y.name, "z": z.name}
    return main, startup, [loss, out] + [names[f] for f in fetch]


def _steps(fused, n=3, **kw):
    old = plan.ENABLE_FUSION
    plan.ENABLE_FUSION = fused
    try:
        main, startup, fetch = _program(**kw)
        exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
        exe.run(startup, scope=scope)
        rng = np.random.default_rng(3)
        got = [exe.run(main, feed={"x": rng.standard_normal(SHAPE).astype(
            kw.get("dtype", "float32"))}, fetch_list=fetch, scope=scope) for _ in range(n)]
        state = {v.name: np.array(scope.find_var(v.name).get_tensor())
                 for v in main.list_vars() if v.persistable and scope.find_var(v.name)}
        return got, state, exe.cached_plans(main)[0].step_types
    finally:
        plan.ENABLE_FUSION = old


def _same_bits(a, b):
    (ga, sa, _), (gb, sb, _) = a, b
    assert sa.keys() == sb.keys()
    for k in sa:
        assert sa[k].tobytes() == sb[k].tobytes(), k
    for xa, xb in zip(ga, gb):
        assert [np.asarray(u).tobytes() for u in xa] == [np.asarray(u).tobytes() for u in xb]


@pytest.mark.parametrize("shortcut,bn_first", [("identity", True), ("identity", False),
                                               ("projection", True)])
@pytest.mark.parametrize("blocks", [False, True])
@pytest.mark.parametrize("nthreads", [1, 2])
def test_fused_residual_end_equals_the_unfused_ops_bit_for_bit(shortcut, bn_first, blocks,
                                                              nthreads, monkeypatch):
    if blocks:      # batch norm in blocks of one channel: the shortcut added block by block
        monkeypatch.setattr(norm, "_BLOCK_BYTES", SHAPE[0] * SHAPE[2] * SHAPE[3] * 4)
        monkeypatch.setattr(norm, "_BN_PARALLEL_MIN", 0)
    with threads.using(nthreads):
        got = _steps(True, shortcut=shortcut, bn_first=bn_first)
        ref = _steps(False, shortcut=shortcut, bn_first=bn_first)
    assert got[2].count(FUSED.format("relu")) == 1
    assert "elementwise_add" not in got[2] and "relu" not in got[2]
    _same_bits(got, ref)
    out = got[0][-1][1]
    assert out.min() == 0 and out.max() > 0


def test_relu6_float64_and_inference():
    for kw in ({"act": "relu6", "threshold": 1.5}, {"dtype": "float64"},
               {"is_test": True}, {"act": "relu6", "is_test": True, "threshold": 0.5}):
        got, ref = _steps(True, **kw), _steps(False, **kw)
        assert FUSED.format(kw.get("act", "relu")) in got[2]
        _same_bits(got, ref)
        if "threshold" in kw:                   # the op's own threshold, not the default 6
            assert got[0][-1][1].max() == kw["threshold"]


@pytest.mark.parametrize("seen", ["y", "z"])
def test_no_fusion_when_the_sum_or_the_normalized_map_is_fetched(seen):
    got = _steps(True, n=2, fetch=(seen,))
    assert not any("elementwise_add+" in t for t in got[2])
    _same_bits(got, _steps(False, n=2, fetch=(seen,)))


def test_no_fusion_for_a_broadcast_shortcut():
    got = _steps(True, n=2, shortcut="channel")
    assert not any("elementwise_add+" in t for t in got[2]) and "elementwise_add" in got[2]
    _same_bits(got, _steps(False, n=2, shortcut="channel"))


def test_a_shortcut_broadcast_at_run_time_takes_the_adds_own_kernel():
    """Declared shapes equal, a batch of one fed as the shortcut: broadcast as unfused."""
    def run(fused):
        old = plan.ENABLE_FUSION
        plan.ENABLE_FUSION = fused
        try:
            main, startup = fluid.Program(), fluid.Program()
            with fluid.unique_name.guard(), fluid.program_guard(main, startup):
                x = fluid.data("x", [-1] + list(SHAPE[1:]), "float32")
                s = fluid.data("s", [-1] + list(SHAPE[1:]), "float32")
                y = fluid.layers.batch_norm(x, momentum=0.8)
                out = fluid.layers.relu(fluid.layers.elementwise_add(y, s))
            exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
            exe.run(startup, scope=scope)
            rng = np.random.default_rng(5)
            feed = {"x": rng.standard_normal(SHAPE).astype("float32"),
                    "s": rng.standard_normal((1,) + SHAPE[1:]).astype("float32")}
            got = exe.run(main, feed=feed, fetch_list=[out], scope=scope)[0]
            return got, exe.cached_plans(main)[0].step_types
        finally:
            plan.ENABLE_FUSION = old
    (got, types), (ref, _) = run(True), run(False)
    assert FUSED.format("relu") in types
    assert got.shape == SHAPE and got.tobytes() == ref.tobytes()


def test_a_mismatched_residual_is_refused_by_the_kernel():
    bn = get_op_def("batch_norm")
    c = SHAPE[1]
    x = np.ones(SHAPE, np.float32)
    stats = [np.ones(c, np.float32) for _ in range(4)]
    with pytest.raises(ValueError, match="fused residual must have Y's shape"):
        bn.forward_then(None, x, *stats, residual=np.ones(SHAPE[1:], np.float32))


def test_the_fusion_leaves_the_program_unchanged():
    main, _, fetch = _program(shortcut="projection")
    before = [(op.type, dict(op.inputs), dict(op.outputs)) for op in main.global_block().ops]
    ops = fusion.fuse(list(main.global_block().ops), main.global_block(),
                      [f if isinstance(f, str) else f.name for f in fetch], ["x"])
    assert FUSED.format("relu") in {op.type for op in ops}
    assert before == [(op.type, dict(op.inputs), dict(op.outputs))
                      for op in main.global_block().ops]
