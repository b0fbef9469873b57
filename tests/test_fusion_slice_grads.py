"""The sum of the slice_grads of one tensor (an unrolled layer reading its input a time step at
a time) as one scatter (executor/fusion/patterns/slice_grads.py): the same gradient bit for bit
as the unfused plan, and the float64 one; sums it cannot take stay."""
import numpy as np
import pytest

import fluidlite as fluid
import fluidlite.executor.plan as plan_mod
from fluidlite.executor import fusion
from fluidlite.executor.fusion.kernels.slice_grads import SliceGradSum

L = fluid.layers
B, T, H = 3, 4, 5


def build(dtype="float64", decrease=False, overlap=False, fetch_part=False):
    """loss = sum_t sum(w_t * slice_t(x)^2), slice t the time step t (or t..t+2)."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [B, T, H], dtype=dtype)
        x.stop_gradient = False
        terms = []
        for t in range(T):
            end = min(t + 2, T) if overlap else t + 1
            # x[:, t]: a slice op with decrease_axis [1]
            s = x[:, t] if decrease else L.slice(x, axes=[1], starts=[t], ends=[end])
            terms.append(L.scale(L.reduce_sum(L.square(s)), float(t + 1)))
        loss = L.sums(terms)
        grad = fluid.gradients(loss, [x])[0]
    fetch = [grad]
    if fetch_part:
        fetch.append(main.global_block().var("x@GRAD@RENAME@0"))
    return main, startup, fetch


X = np.random.default_rng(0).standard_normal((B, T, H))


def want(overlap=False):
    g = np.zeros((B, T, H))
    for t in range(T):
        end = min(t + 2, T) if overlap else t + 1
        g[:, t:end] += 2 * (t + 1) * X[:, t:end]
    return g


def run(main, startup, fetch, dtype, fused):
    old, plan_mod.ENABLE_FUSION = plan_mod.ENABLE_FUSION, fused
    try:
        exe, scope = fluid.Executor(), fluid.Scope()
        exe.run(startup, scope=scope)
        return exe.run(main, feed={"x": X.astype(dtype)}, fetch_list=fetch, scope=scope)
    finally:
        plan_mod.ENABLE_FUSION = old


def types(main, fetch):
    block = main.global_block()
    return [op.type for op in fusion.fuse(list(block.ops), block, [v.name for v in fetch],
                                           {"x"})]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("decrease, overlap", [(False, False), (True, False), (False, True)])
def test_slice_gradients_are_one_scatter_with_the_unfused_bits(dtype, decrease, overlap):
    main, startup, fetch = build(dtype, decrease, overlap)
    if decrease:
        assert any(op.type == "slice" and op.attr("decrease_axis") == [1]
                   for op in main.global_block().ops)
    ops = types(main, fetch)
    assert "fused(slice_grads)" in ops and "slice_grad" not in ops
    got = run(main, startup, fetch, dtype, True)[0]
    plain = run(main, startup, fetch, dtype, False)[0]
    assert got.dtype == np.dtype(dtype) and np.array_equal(got, plain)
    np.testing.assert_allclose(got, want(overlap), rtol=1e-6 if dtype == "float32" else 1e-14)


def test_a_seen_slice_gradient_keeps_the_sum():
    main, startup, fetch = build(fetch_part=True)
    ops = types(main, fetch)
    assert "fused(slice_grads)" not in ops and "sum" in ops
    got = run(main, startup, fetch, "float64", True)
    np.testing.assert_allclose(got[0], want(), rtol=1e-14)


def test_the_kernel_adds_each_gradient_into_its_own_window():
    x = np.zeros((2, 3))
    k = SliceGradSum([{"axes": [1], "starts": [0], "ends": [2]},
                      {"axes": [1], "starts": [1], "ends": [3]}])
    a, b = np.ones((2, 2)), np.full((2, 2), 10.0)
    assert k.forward(x, [a, b])["Out"].tolist() == [[1, 11, 10], [1, 11, 10]]
    with pytest.raises(ValueError, match="1 OutGrad for 2 slices"):
        k.forward(x, [a])
    with pytest.raises(ValueError, match=r"shape \[2, 3\] for a slice of shape \[2, 2\]"):
        k.forward(x, [np.ones((2, 3)), b])
