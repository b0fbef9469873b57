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
