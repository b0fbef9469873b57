"""The plan's fused batch norm + activation (executor/fusion/patterns/norm_act.py): the unfused
ops' values -- their bits on whole maps, within float rounding of the channel sums on batch
norm's channel blocks --, with one thread and two, and no fusion where the batch norm's output
or the activation's gradient is needed elsewhere."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core import threads
from fluidlite.executor import fusion, plan
from fluidlite.ops import norm

SHAPE = (4, 6, 10, 10)


def _program(act, is_test=False, layout="NCHW", fetch_y=False, extra_reader=False,
             overwrite_x=False, **act_attrs):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.unique_name.guard(), fluid.program_guard(main, startup):
        shape = list(SHAPE) if layout == "NCHW" else [SHAPE[0], SHAPE[2], SHAPE[3], SHAPE[1]]
        x = fluid.data("x", shape, "float32")
        x.stop_gradient = False
        scale = fluid.ParamAttr(initializer=fluid.initializer.Constant(3.0))   # relu6 clips
        y = fluid.layers.batch_norm(x, is_test=is_test, data_layout=layout, momentum=0.8,
                                    param_attr=scale, name="bn")
        if overwrite_x:                      # X written between the forward and its gradient
            fluid.layers.assign(fluid.layers.scale(x, 0.5), output=x)
        out = getattr(fluid.layers, act)(y, **act_attrs) if act else y
        loss = fluid.layers.reduce_mean(out * out)
        if extra_reader:                     # the activation's gradient has a second reader
            loss = loss + fluid.layers.reduce_sum(fluid.layers.sqrt(fluid.layers.abs(y) + 1.0))
        if not is_test:
            fluid.optimizer.SGD(0.5).minimize(loss)
    fetch = [loss, out] + ([y] if fetch_y else []) + ([] if is_test else ["x@GRAD"])
    return main, startup, fetch


def _steps(act, fused, n=3, **kw):
    """Fetched values, parameters and running statistics after ``n`` steps, and the plan's
    kernel types."""
    old = plan.ENABLE_FUSION
    plan.ENABLE_FUSION = fused
    try:
        main, startup, fetch = _program(act, **kw)
        exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
        exe.run(startup, scope=scope)
        rng = np.random.default_rng(7)
        shape = main.global_block().var("x").shape
        got = []
        for _ in range(n):
            x = (rng.standard_normal(shape) * 3 + 1).astype(np.float32)
            got.append(exe.run(main, feed={"x": x}, fetch_list=fetch, scope=scope))
        exe.run(main, feed={"x": x}, fetch_list=fetch, scope=scope, profile=True)
        state = {v.name: np.array(scope.find_var(v.name).get_tensor())
                 for v in main.list_vars() if v.persistable and scope.find_var(v.name)}
        return got, state, set(exe.last_profile.by_type)
    finally:
        plan.ENABLE_FUSION = old


def _same(a, b, rtol=0.0):
    """The same fetched values and persistables (bit for bit unless ``rtol``)."""
    (ga, sa, _), (gb, sb, _) = a, b
    assert sa.keys() == sb.keys()
    pairs = [(sa[k], sb[k], k) for k in sa] + [
        (u, v, f"fetch {i}") for xa, xb in zip(ga, gb) for i, (u, v) in enumerate(zip(xa, xb))]
    for u, v, what in pairs:
        if rtol:
            np.testing.assert_allclose(u, v, rtol=rtol, atol=rtol, err_msg=what)
        else:
            np.testing.assert_array_equal(u, v, err_msg=what)


@pytest.mark.parametrize("act", ["relu", "relu6"])
@pytest.mark.parametrize("blocks", [False, True])
@pytest.mark.parametrize("nthreads", [1, 2])
def test_fused_training_steps_equal_the_unfused_ops_bit_for_bit(act, blocks, nthreads,
                                                                monkeypatch):
    if blocks:      # batch norm in blocks of one channel, forward and backward
        monkeypatch.setattr(norm, "_BLOCK_BYTES", SHAPE[0] * SHAPE[2] * SHAPE[3] * 4)
    kw = {"threshold": 5.0} if act == "relu6" else {}      # not the default 6
    with threads.using(nthreads):
        fused = _steps(act, True, **kw)
        unfused = _steps(act, False, **kw)
    assert {f"fused(batch_norm+{act})", f"fused({act}_grad+batch_norm_grad)"} <= fused[2]
    assert act not in fused[2] and "batch_norm" not in fused[2]
    # channel blocks: a block's sums may be ordered unlike the unfused view's (kernel docstring)
    _same(fused, unfused, rtol=1e-5 if blocks or nthreads > 1 else 0.0)
    # the activation really ran: relu6 clips at its threshold, both cut at 0
    out = fused[0][-1][1]
    assert out.min() == 0 and (act != "relu6" or out.max() == 5.0)


def test_fused_inference_equals_the_unfused_ops():
    fused, unfused = _steps("relu6", True, is_test=True), _steps("relu6", False, is_test=True)
    assert "fused(batch_norm+relu6)" in fused[2]
    _same(fused, unfused)


def test_no_forward_fusion_when_y_is_fetched():
    got = _steps("relu", True, n=1, fetch_y=True)
    # (the batch norm alone, handing its gradient X - SavedMean)
    assert "fused(batch_norm+relu)" not in got[2] and "fused(batch_norm+centred)" in got[2]
    assert "fused(relu_grad+batch_norm_grad)" in got[2]     # the backward does not need Y
    _same(got, _steps("relu", False, n=1, fetch_y=True))


def test_channels_last_fuses_on_the_whole_map():
    got = _steps("relu6", True, layout="NHWC", threshold=4.0)
    assert {"fused(batch_norm+relu6)", "fused(relu6_grad+batch_norm_grad)"} <= got[2]
    _same(got, _steps("relu6", False, layout="NHWC", threshold=4.0))
    assert got[0][-1][1].max() == 4.0                       # the op's own threshold


def test_no_backward_fusion_when_the_activation_gradient_is_summed_with_another():
    # Y has a second reader: the forward stays unfused and dY is a sum of two gradients
    got = _steps("relu", True, n=1, extra_reader=True)
    assert not {"fused(batch_norm+relu)", "fused(relu_grad+batch_norm_grad)"} & got[2]
    _same(got, _steps("relu", False, n=1, extra_reader=True))


def test_the_fusions_leave_the_program_unchanged():
    main, _, fetch = _program("relu6")
    before = [(op.type, dict(op.inputs), dict(op.outputs)) for op in main.global_block().ops]
    ops = fusion.fuse(list(main.global_block().ops), main.global_block(),
                      [f if isinstance(f, str) else f.name for f in fetch], ["x"])
    assert {"fused(batch_norm+relu6)", "fused(relu6_grad+batch_norm_grad)"} <= {
        op.type for op in ops}
    assert before == [(op.type, dict(op.inputs), dict(op.outputs))
                      for op in main.global_block().ops]


def _plan_ops(main, fetch):
    return fusion.fuse(list(main.global_block().ops), main.global_block(),
                       [f if isinstance(f, str) else f.name for f in fetch], ["x"])


@pytest.mark.parametrize("act", ["relu6", None])
def test_the_gradient_reads_the_centred_map_the_forward_made(act):
    """The batch norm's forward also writes X - SavedMean, a variable of the plan alone,
    which its gradient reads in X's place: X is no longer read after the forward."""
    main, _, fetch = _program(act)
    ops = _plan_ops(main, fetch)
    fwd_type = "fused(batch_norm+relu6)" if act else "fused(batch_norm+centred)"
    grad_type = "fused(relu6_grad+batch_norm_grad)" if act else "fused(centred+batch_norm_grad)"
    fwd = next(op for op in ops if op.type == fwd_type)
    grad = next(op for op in ops if op.type == grad_type)
    centred = fwd.outputs["Centred"]
    assert centred == ["x@CENTRED0.0"] and grad.inputs["X"] == centred
    assert main.global_block()._find_var_recursive(centred[0]) is None
    assert [op.type for op in ops if "x" in op.input_arg_names] == [fwd_type]


@pytest.mark.parametrize("blocks,nthreads", [(False, 1), (True, 1), (True, 2), (False, 2)])
def test_a_batch_norm_alone_hands_its_gradient_the_centred_map(blocks, nthreads, monkeypatch):
    """No activation: ``fused(batch_norm+centred)`` / ``fused(centred+batch_norm_grad)``, the
    unfused ops' values -- bit for bit on whole maps and in the same channel parts."""
    if blocks:
        monkeypatch.setattr(norm, "_BLOCK_BYTES", SHAPE[0] * SHAPE[2] * SHAPE[3] * 4)
    with threads.using(nthreads):
        fused = _steps(None, True)
        unfused = _steps(None, False)
    assert {"fused(batch_norm+centred)", "fused(centred+batch_norm_grad)"} <= fused[2]
    assert "batch_norm" not in fused[2] and "batch_norm_grad" not in fused[2]
    _same(fused, unfused, rtol=1e-5 if nthreads > 1 and not blocks else 0.0)


def test_no_centred_map_when_x_is_written_before_the_gradient():
    """X overwritten after the forward: the gradient reads X (fluid's semantics), unpaired."""
    main, _, fetch = _program("relu", overwrite_x=True)
    ops = _plan_ops(main, fetch)
    assert not any("Centred" in op.outputs for op in ops)
    grad = next(op for op in ops if op.type == "fused(relu_grad+batch_norm_grad)")
    assert grad.inputs["X"] == ["x"]
    got = _steps("relu", True, n=2, overwrite_x=True)
    _same(got, _steps("relu", False, n=2, overwrite_x=True))


def test_no_centred_map_with_global_statistics():
    """use_global_stats: the gradient never centres X by the batch's mean; nothing paired."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.unique_name.guard(), fluid.program_guard(main, startup):
        x = fluid.data("x", list(SHAPE), "float32")
        x.stop_gradient = False
        y = fluid.layers.batch_norm(x, use_global_stats=True)
        loss = fluid.layers.reduce_mean(y * y)
        fluid.optimizer.SGD(0.5).minimize(loss)
    ops = _plan_ops(main, [loss, "x@GRAD"])
    assert "batch_norm_grad" in {op.type for op in ops}
    assert not any("Centred" in op.outputs for op in ops)


def _bn_args(shape, seed=0):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 2 + 3).astype(np.float32)
    c = shape[1]
    return (x, rng.uniform(0.5, 2, c).astype(np.float32), rng.standard_normal(c).astype(
        np.float32), rng.standard_normal(c).astype(np.float32),
        rng.uniform(0.5, 2, c).astype(np.float32))


def test_a_centred_forward_cuts_the_map_as_its_gradient_does(monkeypatch):
    """Between the gradient's block threshold (2 blocks' bytes) and the forward's own (6), a
    forward keeping X - mean cuts the map into the gradient's channel blocks, each one
    contiguous; the gradient from them equals the gradient from X, bit for bit, and gives
    only the gradients asked for."""
    bn, grad = registry_def("batch_norm"), registry_def("batch_norm_grad")
    x, scale, bias, mean, var = _bn_args((4, 8, 6, 6))
    monkeypatch.setattr(norm, "_BLOCK_BYTES", x.nbytes // 4)        # 2x < X < 6x
    assert norm._channel_parts(x, 1, 6 * norm._BLOCK_BYTES) is None
    parts = norm._channel_parts(x, 1, 2 * norm._BLOCK_BYTES)
    assert parts is not None and len(parts) > 1
    kept = bn.forward_then(None, x, scale, bias, mean, var, centred=True)
    plain = bn.forward(x, scale, bias, mean, var)
    for k in plain:
        assert np.array_equal(kept[k], plain[k]), k
    xc = kept["Centred"]
    assert isinstance(xc, norm.CentredBlocks) and xc.parts == parts and xc.shape == x.shape
    for (lo, hi), block in zip(parts, xc.blocks):
        assert block.flags.c_contiguous
        assert np.array_equal(block, x[:, lo:hi] - plain["SavedMean"][None, lo:hi, None, None])
    dy = np.random.default_rng(1).standard_normal(x.shape).astype(np.float32)
    sm, sv = plain["SavedMean"], plain["SavedVariance"]
    want = grad.forward(x, scale, sm, sv, dy)
    got = grad.forward(xc, scale, sm, sv, dy)
    assert set(got) == {"X@GRAD", "Scale@GRAD", "Bias@GRAD"}
    for k in got:
        assert np.array_equal(got[k], want[k]), k
    kept = bn.forward_then(None, x, scale, bias, mean, var, centred=True)
    only = grad.forward(kept["Centred"], scale, sm, sv, dy, frozenset({"Scale@GRAD"}))
    assert set(only) == {"Scale@GRAD"} and np.array_equal(only["Scale@GRAD"],
                                                          want["Scale@GRAD"])


def test_a_centred_forward_with_global_statistics_centres_by_the_running_mean():
    bn = registry_def("batch_norm")
    x, scale, bias, mean, var = _bn_args((2, 3, 4, 4), seed=2)
    for kw in ({"use_global_stats": True}, {"is_test": True}):
        out = bn.forward_then(None, x, scale, bias, mean, var, centred=True, **kw)
        assert np.array_equal(out["Centred"], x - mean[None, :, None, None])
        plain = bn.forward(x, scale, bias, mean, var, **kw)
        assert all(np.array_equal(out[k], plain[k]) for k in plain)


def registry_def(name):
    from fluidlite.core import registry
    return registry.get_op_def(name)
