"""Second derivatives through mul, matmul, reduce_sum/mean/max/min and mean (issue 3 item 4).

Pattern: g = fluid.gradients(loss, x); penalty = f(g); fluid.gradients(penalty, w) is compared
with central differences of the penalty (the first-gradient program) w.r.t. w, in float64.
"""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core.registry import get_op_def, has_op

L = fluid.layers
W0 = (np.arange(12.0).reshape(3, 4) / 10.0 - 0.5)
XV = np.array([[1.0, 2.0, 3.0], [0.5, -1.0, 2.0]])


def sq_sum(v):
    """sum(v * v) built from matmul only (works for any 2-D v): trace(v^T v)."""
    flat = L.reshape(v, [1, -1])
    return L.matmul(flat, flat, transpose_y=True)


def check_second_order(make_loss, rtol=1e-5, w0=W0, xv=XV, delta=1e-5):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.data("x", [xv.shape[1]], dtype="float64")
        x.stop_gradient = False
        w = L.create_parameter(list(w0.shape), "float64", name="w",
                               default_initializer=fluid.initializer.NumpyArrayInitializer(w0))
        loss = make_loss(x, w)
        g, = fluid.gradients(loss, x)
        assert g is not None
        penalty = L.mean(sq_sum(g))
        gw, = fluid.gradients(penalty, w)
        assert gw is not None, "no second-order gradient reached w"
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    feed = {"x": xv}
    analytic = exe.run(main, feed=feed, fetch_list=[gw], scope=scope)[0]
    numeric = np.zeros_like(w0)
    tensor = scope.find_var("w").get_tensor()
    for i in np.ndindex(*w0.shape):
        vals = []
        for s in (1, -1):
            wp = w0.copy()
            wp[i] += s * delta
            tensor.set(wp, fluid.CPUPlace())
            vals.append(exe.run(main, feed=feed, fetch_list=[penalty], scope=scope)[0][0])
        numeric[i] = (vals[0] - vals[1]) / (2 * delta)
    tensor.set(w0, fluid.CPUPlace())
    assert np.abs(numeric).max() > 1e-6, "degenerate check: the penalty does not depend on w"
    np.testing.assert_allclose(analytic, numeric, rtol=rtol, atol=1e-6)
    return main


def test_mul_gradient_penalty():
    main = check_second_order(lambda x, w: L.reduce_sum(sq_sum(L.mul(x, w))))
    types = [op.type for op in main.global_block().ops]
    assert "mul_grad" in types and types.count("mul") >= 2   # double grad is built from mul ops


def test_fc_style_mul_with_num_col_dims():
    xv = np.arange(12.0).reshape(2, 6) / 7.0 - 0.4

    def loss(x, w):
        x3 = L.reshape(x, [0, 2, 3])
        return L.reduce_mean(sq_sum(L.reshape(L.mul(x3, w, x_num_col_dims=2), [0, -1])))
    check_second_order(loss, xv=xv)


@pytest.mark.parametrize("tx,ty,alpha", [(False, False, 1.0), (False, True, 0.5),
                                         (True, False, 2.0), (True, True, 1.0)])
def test_matmul_gradient_penalty(tx, ty, alpha):
    def loss(x, w):
        a = L.transpose(x, [1, 0]) if tx else x
        b = L.transpose(w, [1, 0]) if ty else w
        h = L.matmul(a, b, transpose_x=tx, transpose_y=ty, alpha=alpha)
        return L.reduce_sum(sq_sum(h))
    check_second_order(loss)


def test_batched_matmul_gradient_penalty():
    def loss(x, w):
        xb = L.stack([x, L.scale(x, 2.0)], axis=0) if has_op("scale") else L.stack([x, x])
        h = L.matmul(xb, w)                         # [2, N, 4]: w broadcast over the batch
        hh = L.matmul(h, h, transpose_y=True)       # [2, N, N]
        return L.reduce_sum(hh)
    check_second_order(loss)


@pytest.mark.parametrize("op", ["reduce_sum", "reduce_mean", "reduce_max", "reduce_min"])
def test_reduction_gradient_penalty(op):
    def loss(x, w):
        h = L.mul(x, w)                              # [N, 4]
        m = getattr(L, op)(h, dim=1, keep_dim=True)  # [N, 1]; its grad depends on w
        return L.reduce_sum(L.matmul(m, m, transpose_x=True))
    check_second_order(loss)


def test_reduce_all_and_mean_gradient_penalty():
    def loss(x, w):
        h = L.mul(x, w)
        mu = L.mean(h)                               # [1]
        s = L.reduce_sum(h, dim=[0, 1])              # [1]
        return L.matmul(mu, s)                       # 1-D @ 1-D -> [1]
    check_second_order(loss)


def test_reduce_max_grad_grad_is_emitted():
    main = check_second_order(
        lambda x, w: L.reduce_sum(L.matmul(*(2 * [L.reduce_max(L.mul(x, w), dim=1,
                                                                keep_dim=True)]),
                                           transpose_x=True)))
    assert "reduce_max_grad_grad" in [op.type for op in main.global_block().ops]


@pytest.mark.skipif(not all(has_op(t) for t in ("square", "elementwise_sub", "tanh")) or
                    not get_op_def("square_grad").has_make_grad(),
                    reason="needs helper H1's square/tanh double grads")
def test_gradient_penalty_with_square_error_cost():
    def loss(x, w):
        y = L.fc(x, 1, param_attr=fluid.ParamAttr(name="w"), bias_attr=False)
        label = L.fill_constant([1], "float64", 0.5)
        return L.mean(L.square_error_cost(L.tanh(y), label))
    check_second_order(loss, w0=np.array([[0.3], [-0.2], [0.5]]))
