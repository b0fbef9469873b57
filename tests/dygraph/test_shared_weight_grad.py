"""backward() on a weight shared by several plain products (an unrolled recurrence): its
gradient is one GEMM over the products' stacked rows, as the static plan computes it
(executor/fusion/patterns/stacked_grad.py) -- the true gradient, and nothing else changes."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import dygraph
from fluidlite.executor.fusion.kernels.stacked_grad import StackedWeightGrad

L = fluid.layers
RNG = np.random.default_rng(3)
XS = RNG.standard_normal((6, 5, 8))
W0 = RNG.uniform(-0.4, 0.4, (8, 8))


@pytest.fixture
def stacks(monkeypatch):
    calls = []
    real = StackedWeightGrad.forward
    monkeypatch.setattr(StackedWeightGrad, "forward",
                        lambda self, *a: (calls.append(len(a[0])), real(self, *a))[1])
    return calls


def _recurrence(dtype, extra=None, steps=6, api="backward"):
    """h_t = tanh(h_{t-1} W + x_t), loss = mean(h^2) (+ ``extra(W)``); returns dL/dW."""
    with dygraph.guard():
        w = dygraph.to_variable(W0.astype(dtype))
        w.stop_gradient = False
        h = dygraph.to_variable(XS[0].astype(dtype))
        for t in range(1, steps):
            h = L.tanh(L.matmul(h, w) + dygraph.to_variable(XS[t].astype(dtype)))
        loss = L.reduce_mean(h * h)
        if extra is not None:
            loss = loss + extra(w)
        if api == "grad":
            return dygraph.grad(loss, [w])[0].numpy()
        loss.backward()
        return w.gradient()


def _float64_reference():
    # the chain rule by hand, in float64: dW = sum_t h_{t-1}^T dz_t
    hs, zs = [XS[0]], []
    for t in range(1, 6):
        zs.append(hs[-1] @ W0 + XS[t])
        hs.append(np.tanh(zs[-1]))
    dh = 2 * hs[-1] / hs[-1].size
    dw = np.zeros_like(W0)
    for t in range(5, 0, -1):
        dz = dh * (1 - hs[t] ** 2)
        dw += hs[t - 1].T @ dz
        dh = dz @ W0.T
    return dw


@pytest.mark.parametrize("dtype, tol", [("float64", 1e-13), ("float32", 2e-6)])
def test_the_stacked_gradient_is_the_true_gradient(dtype, tol, stacks):
    got = _recurrence(dtype)
    assert stacks == [5] and got.dtype == np.dtype(dtype)
    np.testing.assert_allclose(got, _float64_reference(), rtol=tol, atol=tol)


def test_backward_and_grad_agree_bit_for_bit(stacks):
    a = _recurrence("float32")
    b = _recurrence("float32", api="grad")
    assert stacks == [5, 5]
    np.testing.assert_array_equal(a, b)


def test_another_use_or_a_single_product_keeps_the_sum(stacks):
    # the weight read by another op too: its gradient adds that op's part in pass order
    got = _recurrence("float64", extra=lambda w: L.reduce_sum(w) * 0.5)
    np.testing.assert_allclose(got, _float64_reference() + 0.5, rtol=1e-13)
    _recurrence("float64", steps=2)                # one product: nothing to stack
    assert stacks == []


def test_double_backward_through_a_shared_weight_is_unchanged(stacks):
    with dygraph.guard():
        w = dygraph.to_variable(W0[:4, :4])
        w.stop_gradient = False
        x = dygraph.to_variable(XS[0][:, :4])
        y = L.matmul(L.matmul(x, w), w)
        (g,) = dygraph.grad(L.reduce_sum(y * y), [w], create_graph=True)
        L.reduce_sum(g * g).backward()
        second = w.gradient()
    assert stacks == []                            # create_graph: the recorded sums
    # d/dw of |dL/dw|^2 against central differences of the float64 first gradient
    def first(wv):
        xw = XS[0][:, :4] @ wv
        dy = 2 * (xw @ wv)
        return xw.T @ dy + XS[0][:, :4].T @ (dy @ wv.T)
    eps, num = 1e-6, np.zeros((4, 4))
    for i in range(4):
        for j in range(4):
            e = np.zeros((4, 4))
            e[i, j] = eps
            num[i, j] = (np.sum(first(W0[:4, :4] + e) ** 2)
                         - np.sum(first(W0[:4, :4] - e) ** 2)) / (2 * eps)
    np.testing.assert_allclose(second, num, rtol=1e-6, atol=1e-6)


def _manual(fn, dtype="float64"):
    """backward() of ``fn(w)`` for the leaf ``w`` = W0; returns w's gradient."""
    with dygraph.guard():
        w = dygraph.to_variable(W0.astype(dtype))
        w.stop_gradient = False
        fn(w).backward()
        return w.gradient()


def _h(t, dtype="float64"):
    return dygraph.to_variable(XS[t].astype(dtype))


def test_two_products_are_enough_to_stack(stacks):
    got = _recurrence("float64", steps=3)
    assert stacks == [2]
    h1 = np.tanh(XS[0] @ W0 + XS[1])
    h2 = np.tanh(h1 @ W0 + XS[2])
    dz2 = 2 * h2 / h2.size * (1 - h2 ** 2)
    dz1 = dz2 @ W0.T * (1 - h1 ** 2)
    np.testing.assert_allclose(got, XS[0].T @ dz1 + h1.T @ dz2, rtol=1e-13)


def test_products_that_are_not_plain_keep_the_sum(stacks):
    # transposed, 3-D and float16 products of a shared weight: the pass's sum, as the static
    # plan keeps it (its pattern stacks plain 2-D float32 / float64 products only)
    tr = _manual(lambda w: L.reduce_sum(L.matmul(_h(0), w, transpose_y=True))
                 + L.reduce_sum(L.matmul(_h(1), w, transpose_y=True)))
    np.testing.assert_allclose(tr, np.outer(np.ones(8), XS[0].sum(0) + XS[1].sum(0)),
                               rtol=1e-13)
    batched = _manual(lambda w: L.reduce_sum(L.matmul(dygraph.to_variable(XS[:2]), w))
                      + L.reduce_sum(L.matmul(_h(2), w)))
    np.testing.assert_allclose(
        batched, np.outer(XS[0].sum(0) + XS[1].sum(0) + XS[2].sum(0), np.ones(8)), rtol=1e-13)
    half = _manual(lambda w: L.reduce_sum(L.matmul(_h(0, "float16"), w))
                   + L.reduce_sum(L.matmul(_h(1, "float16"), w)), "float16")
    assert half.dtype == np.float16
    assert stacks == []


def test_another_use_before_the_products_keeps_the_sum(stacks):
    # the weight's other reader made first (so walked last): its part still counts
    def f(w):
        first = L.reduce_sum(w) * 0.5
        h = _h(0)
        for t in range(1, 6):
            h = L.tanh(L.matmul(h, w) + _h(t))
        return first + L.reduce_mean(h * h)
    np.testing.assert_allclose(_manual(f), _float64_reference() + 0.5, rtol=1e-13)
    # ... or a list input holding it (concat)
    def g(w):
        h = _h(0)
        for t in range(1, 6):
            h = L.tanh(L.matmul(h, w) + _h(t))
        return L.reduce_mean(h * h) + L.reduce_sum(L.concat([h, w], axis=0)) * 0.25
    # (the concat's part reaches h too: compare with the float64 chain rule through h)
    hs = [XS[0]]
    for t in range(1, 6):
        hs.append(np.tanh(hs[-1] @ W0 + XS[t]))
    dh = 2 * hs[-1] / hs[-1].size + 0.25
    dw = np.full_like(W0, 0.25)
    for t in range(5, 0, -1):
        dz = dh * (1 - hs[t] ** 2)
        dw += hs[t - 1].T @ dz
        dh = dz @ W0.T
    np.testing.assert_allclose(_manual(g), dw, rtol=1e-12)
    assert stacks == []


def test_a_computed_or_frozen_weight_is_not_stacked(stacks):
    def computed(w):
        w2 = w * 1.5                       # an intermediate used by every product
        h = _h(0)
        for t in range(1, 6):
            h = L.tanh(L.matmul(h, w2) + _h(t))
        return L.reduce_mean(h * h)
    with dygraph.guard():
        w = dygraph.to_variable((W0 / 1.5))
        w.stop_gradient = False
        computed(w).backward()
        np.testing.assert_allclose(w.gradient(), 1.5 * _float64_reference(), rtol=1e-12)
        frozen = dygraph.to_variable(W0)   # stop_gradient: no gradient at all
        h = _h(0)
        for t in range(1, 4):
            h = L.tanh(L.matmul(h, frozen) + _h(t))
        x0 = dygraph.to_variable(XS[0])
        x0.stop_gradient = False
        L.reduce_mean(L.matmul(x0, frozen) + h).backward()
        assert frozen.gradient() is None and x0.gradient() is not None
    assert stacks == []
