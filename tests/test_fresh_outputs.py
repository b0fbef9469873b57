"""The buffer contracts ops declare for the plan (``OpDef.fresh_outputs`` / ``fresh_grads`` /
``passes_through``) hold for their kernels, and the data-parallel fusion uses them only where
reducing a gradient in its own buffer is safe."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core import registry
from fluidlite.executor import fusion

rng = np.random.default_rng(0)


def _r(*shape):
    return rng.standard_normal(shape).astype(np.float32)


# op type -> (inputs by slot, attrs); every op declaring a contract needs a case here
CASES = {
    "mul": ({"X": _r(3, 4), "Y": _r(4, 5)}, {}),
    "mul_grad": ({"X": _r(3, 4), "Y": _r(4, 5), "Out@GRAD": _r(3, 5)}, {}),
    "concat": ({"X": [_r(2, 3)]}, {"axis": 0}),
    "c_sync_calc_stream": ({"X": _r(4)}, {}),
    "c_sync_comm_stream": ({"X": [_r(4), _r(2, 2)]}, {}),
}


def _declaring():
    return sorted(t for t in registry.all_op_types()
                  if registry.get_op_def(t).fresh_outputs or registry.get_op_def(t).passes_through)


def test_every_declaring_op_has_a_case():
    assert set(_declaring()) <= set(CASES), set(_declaring()) - set(CASES)


def _run(op_type):
    ins, attrs = CASES[op_type]
    opdef = registry.get_op_def(op_type)
    arrays = [ins.get(s.name) for s in opdef.in_slots]
    specs = [None if a is None else [registry.VarSpec(x.shape, x.dtype) for x in a]
             if isinstance(a, list) else registry.VarSpec(a.shape, a.dtype) for a in arrays]
    outs = frozenset(s.name for s in opdef.out_slots)
    binding = opdef.bind(specs, opdef.check_attrs(dict(attrs)), outs)
    res = binding.fn(*arrays)
    if binding.single:
        res = {opdef.out_slots[0].name: res}
    flat_in = [a for v in arrays if v is not None for a in (v if isinstance(v, list) else [v])]
    return opdef, ins, res, flat_in


@pytest.mark.parametrize("op_type", sorted(CASES))
def test_declared_outputs_are_fresh_or_passed_through(op_type):
    opdef, ins, res, flat_in = _run(op_type)
    for slot in opdef.fresh_outputs:
        key = slot if slot in res else slot[:-len("@GRAD")]
        a = res[key]
        assert isinstance(a, np.ndarray) and a.flags.c_contiguous and a.flags.writeable
        assert not any(np.shares_memory(a, x) for x in flat_in), f"{op_type}.{slot}"
        others = [v for k, v in res.items() if k != key and isinstance(v, np.ndarray)]
        assert not any(np.shares_memory(a, o) for o in others)
    for out_slot, in_slot in opdef.passes_through.items():
        out, src = res[out_slot], ins[in_slot]
        pairs = zip(out, src) if isinstance(src, list) else [(out, src)]
        assert all(o is i for o, i in pairs)


def _dp_program(read_between: bool, overlapped: bool = False):
    """fc -> loss; backward; the data-parallel pass's averaging of W@GRAD: blocking
    (c_sync_calc_stream + c_allreduce_sum + scale) or ``overlapped`` (c_allreduce_start ...
    c_allreduce_wait + scale); optionally another op reading W@GRAD in between."""
    from fluidlite.core.dtypes import VarType
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 4], "float32")
        loss = fluid.layers.mean(fluid.layers.fc(x, 3, bias_attr=False))
        (_, g), = fluid.backward.append_backward(loss)
        block = main.global_block()
        if overlapped:
            req = block.create_var(name="req", type=VarType.RAW)
            block.append_op("c_allreduce_start", {"X": [g]}, {"Request": [req]},
                            {"ring_id": 0})
        else:
            block.append_op("c_sync_calc_stream", {"X": [g]}, {"Out": [g]})
        peek = fluid.layers.reduce_sum(g) if read_between else None
        if overlapped:
            block.append_op("c_allreduce_wait", {"Request": [req]}, {"Out": [g]},
                            {"ring_id": 0})
        else:
            block.append_op("c_allreduce_sum", {"X": [g]}, {"Out": [g]}, {"ring_id": 0})
        block.append_op("scale", {"X": [g]}, {"Out": [g]}, {"scale": 0.5})
    return main, startup, loss, g, peek


@pytest.mark.parametrize("read_between", [False, True], ids=["owned", "read-in-between"])
def test_allreduce_of_a_fresh_gradient_runs_in_place_only_when_nothing_else_reads_it(
        read_between):
    main, startup, loss, g, peek = _dp_program(read_between)
    block = main.global_block()
    ops = fusion.fuse(block.ops, block, [loss.name], ["x"])
    (red,) = [op for op in ops if op.type == "fused(c_allreduce_sum+scale)"]
    assert red.opdef.inplace is (not read_between)
    _check_numbers(main, startup, g, peek)


def _check_numbers(main, startup, g, peek):
    """One process: the sum is the identity, then * 0.5; ``peek`` (read before the
    reduction) is the unscaled gradient's sum."""
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    feed = {"x": _r(5, 4)}
    w = np.array(scope.find_var(main.global_block().all_parameters()[0].name).get_tensor())
    assert w.shape == (4, 3)
    got = exe.run(main, feed=feed, fetch_list=[g] + ([peek] if peek is not None else []),
                  scope=scope)
    dw = feed["x"].T @ np.full((5, 3), 1 / 15, np.float32)
    np.testing.assert_allclose(got[0], 0.5 * dw, rtol=1e-6)
    if peek is not None:
        np.testing.assert_allclose(got[1], dw.sum(), rtol=1e-5)


def test_a_fetched_or_fed_gradient_is_never_reduced_in_place():
    main, startup, loss, g, _ = _dp_program(False)
    block = main.global_block()
    fetched = fusion.fuse(block.ops, block, [loss.name, g.name], ["x"])
    assert [op.opdef.inplace for op in fetched if op.type.startswith("fused(c_allreduce")] == \
        [False]
    fed = fusion.fuse(block.ops, block, [loss.name], ["x", g.name])
    assert [op.opdef.inplace for op in fed if op.type.startswith("fused(c_allreduce")] == [False]


@pytest.mark.parametrize("read_between", [False, True], ids=["owned", "read-in-between"])
def test_an_overlapped_allreduce_is_reduced_in_place_at_its_wait_only_when_owned(read_between):
    """c_allreduce_start -> (backward ops) -> c_allreduce_wait + scale, as the overlap pass
    writes them: the wait may reduce in the start's input buffer when that buffer is fresh and
    nothing but the start reads it (what the shared-memory window does at the wait)."""
    main, startup, loss, g, peek = _dp_program(read_between, overlapped=True)
    block = main.global_block()
    ops = fusion.fuse(block.ops, block, [loss.name], ["x"])
    (red,) = [op for op in ops if op.type == "fused(c_allreduce_wait+scale)"]
    assert red.opdef.inplace is (not read_between)
    _check_numbers(main, startup, g, peek)
