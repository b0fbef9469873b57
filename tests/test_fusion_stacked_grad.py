"""A weight shared by T products (an unrolled recurrent layer): its gradient is one stacked GEMM
(executor/fusion/patterns/stacked_grad.py) and the products' grad ops compute dX alone; the
gradients equal the float64 sums of the T products, and the fusion stays away from sums it
cannot stack."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.executor import fusion
from fluidlite.executor.fusion.kernels.stacked_grad import StackedWeightGrad

L = fluid.layers
T, B, K, N = 5, 3, 4, 6


def build(kind="matmul", dtype="float64", transpose=False, other_use=False):
    """loss = sum_t sum((x_t @ W)^2) + sum_t mean(x_t @ W) [+ sum(W^2) / 100], with a product
    per step."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        xs = [fluid.data(f"x{t}", [B, K], dtype=dtype) for t in range(T)]
        for x in xs:
            x.stop_gradient = False
        w = L.create_parameter([N, K] if transpose else [K, N], dtype, name="W",
                               default_initializer=fluid.initializer.Normal(0, 1, seed=3))
        terms = []
        for t, x in enumerate(xs):
            y = L.mul(x, w) if kind == "mul" else L.matmul(x, w, transpose_y=transpose)
            terms += [L.reduce_sum(L.square(y)), L.reduce_mean(y)]
        if other_use:               # W also read by another op: its sum has another input
            terms.append(L.scale(L.reduce_sum(L.square(w)), 0.01))
        loss = L.sums(terms)
        grads = fluid.gradients(loss, xs + [w])
    return main, startup, xs, w, grads


FEED = {f"x{t}": np.random.default_rng(t).standard_normal((B, K)) for t in range(T)}


def run(main, startup, fetch, dtype="float64"):
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    w = np.asarray(scope.find_var("W").get_tensor())
    feed = {k: v.astype(dtype) for k, v in FEED.items()}
    return w, exe.run(main, feed=feed, fetch_list=fetch, scope=scope)


def want_grads(w):
    """float64 gradients of the loss: dY_t = 2 Y_t + 1 / (B N)."""
    dxs, dw = [], np.zeros_like(w, dtype=np.float64)
    for t in range(T):
        x = FEED[f"x{t}"]
        d = 2 * (x @ w) + 1.0 / (B * N)
        dxs.append(d @ w.T)
        dw += x.T @ d
    return dxs, dw


def fused_types(main, fetch):
    block = main.global_block()
    return [getattr(op, "type", None) for op in fusion.fuse(list(block.ops), block,
                                                            [v.name for v in fetch], FEED)]


@pytest.mark.parametrize("kind", ["matmul", "mul"])
@pytest.mark.parametrize("dtype, rtol", [("float64", 1e-12), ("float32", 1e-5)])
def test_shared_weight_gradient_is_one_stacked_gemm(kind, dtype, rtol):
    main, startup, xs, w, grads = build(kind, dtype)
    w0, got = run(main, startup, grads, dtype)
    dxs, dw = want_grads(w0.astype(np.float64))
    for g, want in zip(got, dxs + [dw]):
        assert g.dtype == np.dtype(dtype)
        np.testing.assert_allclose(g, want, rtol=rtol, atol=rtol * np.abs(want).max())
    block = main.global_block()
    ops = fusion.fuse(list(block.ops), block, [g.name for g in grads], FEED)
    stacked = [op for op in ops if op.type == "fused(stacked_weight_grad)"]
    assert len(stacked) == 1 and len(stacked[0].inputs["X"]) == T
    assert sorted(stacked[0].inputs["X"]) == sorted(x.name for x in xs)
    products = [op for op in ops if op.type == kind + "_grad"]
    assert len(products) == T and all("Y@GRAD" not in op.outputs for op in products)
    assert "sum" not in [op.type for op in ops if w.name + "@GRAD" in op.output_arg_names]


def test_the_stacked_rows_pair_each_x_with_its_own_output_gradient():
    # X_t and dOut_t must be stacked in the same order: a kernel pairing them wrongly (or
    # summing X^T dOut over mismatched t) gives another matrix
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((m, 3)) for m in (2, 4, 1)]
    ds = [rng.standard_normal((m, 5)) for m in (2, 4, 1)]
    got = StackedWeightGrad().forward(xs, ds)["Out"]
    np.testing.assert_allclose(got, sum(x.T @ d for x, d in zip(xs, ds)), rtol=1e-13)
    with pytest.raises(ValueError, match="as many of each"):
        StackedWeightGrad().forward(xs, ds[:2])
    with pytest.raises(ValueError, match="as many rows"):
        StackedWeightGrad().forward(xs, [ds[1], ds[0], ds[2]])


@pytest.mark.parametrize("case", ["transpose", "other_use", "fetched_part"])
def test_sums_it_cannot_stack_stay(case):
    main, startup, xs, w, grads = build(transpose=case == "transpose",
                                        other_use=case == "other_use")
    fetch = list(grads)
    if case == "fetched_part":      # one product's own dW is seen: it must be computed
        fetch.append(main.global_block().var("W@GRAD@RENAME@0"))
    types = fused_types(main, fetch)
    assert "fused(stacked_weight_grad)" not in types and "sum" in types
    w0, got = run(main, startup, fetch)
    if case == "transpose":
        w0 = w0.T
    dxs, dw = want_grads(w0)
    if case == "other_use":
        dw += 0.02 * w0
    dw_got = got[T].T if case == "transpose" else got[T]
    np.testing.assert_allclose(dw_got, dw, rtol=1e-12)
    if case == "fetched_part":
        assert got[-1].shape == w0.shape and np.abs(got[-1]).max() > 0


def _grad_block(shapes, dtypes=None, count=2, attrs=None, rewrite_x=False):
    """A hand-made block: ``count`` matmul_grads of one weight w and the sum of their dW
    (``shapes``: x, w, d; ``dtypes`` likewise, float32 by default)."""
    main = fluid.Program()
    block = main.global_block()
    xs, ws, ds = shapes
    xd, wd, dd = dtypes or ("float32",) * 3
    block.create_var(name="w", shape=ws, dtype=wd)
    block.create_var(name="gw", shape=ws, dtype=wd)
    for t in range(count):
        block.create_var(name=f"x{t}", shape=xs, dtype=xd)
        block.create_var(name=f"d{t}", shape=ds, dtype=dd)
        block.create_var(name=f"dx{t}", shape=xs, dtype=xd)
        block.create_var(name=f"dw{t}", shape=ws, dtype=wd)
    for t in range(count):
        block.append_op("matmul_grad", {"X": [f"x{t}"], "Y": ["w"], "Out@GRAD": [f"d{t}"]},
                        {"X@GRAD": [f"dx{t}"], "Y@GRAD": [f"dw{t}"]}, dict(attrs or {}))
    if rewrite_x:       # x0 written again after its product's gradient, before the sum
        block.append_op("scale", {"X": ["x1"]}, {"Out": ["x0"]}, {"scale": 2.0})
    block.append_op("sum", {"X": [f"dw{t}" for t in range(count)]}, {"Out": ["gw"]}, {})
    fetch = [f"dx{t}" for t in range(count)] + ["gw"]
    return [getattr(op, "type", None) for op in fusion.fuse(list(block.ops), block, fetch, [])]


@pytest.mark.parametrize("case, want", [
    (dict(), True),                                           # two products, attrs unset
    (dict(count=3, attrs={"transpose_X": False, "alpha": 1.0}), True),
    (dict(shapes=([2, 3, 4], [4, 5], [2, 3, 5])), False),      # a stack @ a matrix
    (dict(dtypes=("float32", "float64", "float32")), False),   # mixed dtypes
    (dict(dtypes=("int64",) * 3), False),                      # not float
    (dict(attrs={"alpha": 2.0}), False),
    (dict(rewrite_x=True), False),                            # an X changed before the sum
])
def test_which_sums_of_a_weights_gradients_are_stacked(case, want):
    case = dict(case)
    types = _grad_block(case.pop("shapes", ([3, 4], [4, 5], [3, 5])), **case)
    assert ("fused(stacked_weight_grad)" in types) == want
    assert ("sum" in types) == (not want)


def test_the_kernel_refuses_operands_that_are_not_matrices():
    x = np.ones((2, 3))
    with pytest.raises(ValueError, match=r"X\[0\] \[2, 3, 1\] and OutGrad\[0\] \[2, 5\]"):
        StackedWeightGrad().forward([x[..., None], x], [np.ones((2, 5))] * 2)
