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


# -- every double_grad rule, checked directly on its grad op ------------------------------------
from fluidlite.core.registry import VarSpec   # noqa: E402
from fluidlite.testing import OpTest          # noqa: E402


class GradOpTest(OpTest):
    """OpTest for a generated ``<type>_grad`` op. Grad ops infer nothing (the backward pass gives
    grad vars their forward var's spec), so the outputs get the reference specs here."""

    def _build(self, dtype=None, requires_grad=()):
        prog, feed, out_vars, in_vars = super()._build(dtype, requires_grad)
        op = prog.global_block().ops[-1]
        for slot in [s for s in out_vars if s not in self.outputs]:
            del op.outputs[slot], out_vars[slot]    # only the gradients under test
        for slot, v in out_vars.items():
            refs = self.outputs[slot]
            pairs = zip(v, [a for _, a in refs]) if isinstance(refs, list) else [(v, refs)]
            for var, ref in pairs:
                ref = np.asarray(ref)
                var._set_spec(VarSpec(ref.shape, dtype or ref.dtype))
        return prog, feed, out_vars, in_vars


def grad_op(op_type, inputs, attrs, outputs, check):
    t = GradOpTest()
    t.op_type, t.inputs, t.attrs, t.outputs = op_type, inputs, attrs, outputs
    t.check_output()
    t.check_grad(check, list(outputs))


R = OpTest.rand
A, B, D = R(3, 4, seed=1), R(4, 5, seed=2), R(3, 5, seed=3)


def test_mul_grad_double():
    grad_op("mul_grad", {"X": A, "Y": B, "Out@GRAD": D}, {},
            {"X@GRAD": D @ B.T, "Y@GRAD": A.T @ D}, ["X", "Y", "Out@GRAD"])


@pytest.mark.parametrize("xs,ys,tx,ty", [((3, 4), (5, 4), False, True),
                                         ((2, 4, 3), (4, 5), True, False),
                                         ((4,), (4, 5), False, False)])
def test_matmul_grad_double(xs, ys, tx, ty):
    x, y = R(*xs, seed=4), R(*ys, seed=5)
    a = np.swapaxes(x, -1, -2) if tx else x
    b = np.swapaxes(y, -1, -2) if ty else y
    out = 0.5 * np.matmul(a, b)
    d = R(*out.shape, seed=6)
    ref = get_op_def("matmul").backward(x, y, d, transpose_X=tx, transpose_Y=ty, alpha=0.5)
    grad_op("matmul_grad", {"X": x, "Y": y, "Out@GRAD": d},
            {"transpose_X": tx, "transpose_Y": ty, "alpha": 0.5},
            {"X@GRAD": ref["X"], "Y@GRAD": ref["Y"]}, ["X", "Y", "Out@GRAD"])


@pytest.mark.parametrize("op", ["mean", "reduce_sum", "reduce_mean", "reduce_max", "reduce_min"])
def test_reduce_grad_double(op):
    attrs = {} if op == "mean" else {"dim": [1], "keep_dim": False}
    out = get_op_def(op).forward(A, **attrs)["Out"]
    d = R(*out.shape, seed=7)
    ins = {"X": A, "Out@GRAD": d}
    if op in ("reduce_max", "reduce_min"):
        ins["Out"] = out
        ref = get_op_def(op).backward(A, out, d, **attrs)["X"]
    else:
        ref = get_op_def(op).backward(A, d, **attrs)["X"]
    grad_op(op + "_grad", ins, attrs, {"X@GRAD": ref}, ["Out@GRAD"])


def _xs(x):
    return np.empty((0,) + x.shape)


@pytest.mark.parametrize("op,attrs,out_shape", [
    ("reshape2", {"shape": [4, 3]}, (4, 3)),
    ("transpose2", {"axis": [1, 0]}, (4, 3)),
    ("squeeze2", {"axes": [1]}, None),
    ("unsqueeze2", {"axes": [0]}, (1, 3, 4)),
    ("flatten2", {"axis": 0}, (1, 12)),
])
def test_reshape_like_grad_double(op, attrs, out_shape):
    x = R(3, 1, 4, seed=8) if op == "squeeze2" else A
    out = get_op_def(op).forward(x, *([None, []] if op in ("reshape2", "unsqueeze2") else []),
                                 **attrs)["Out"]
    d = R(*out.shape, seed=9)
    ref = get_op_def(op).backward(_xs(x), d, **attrs)["X"]
    grad_op(op + "_grad", {"XShape": _xs(x), "Out@GRAD": d}, attrs, {"X@GRAD": ref},
            ["Out@GRAD"])


def test_slice_grad_double():
    d = R(3, 2, seed=10)
    ref = np.zeros_like(A)
    ref[:, 1:3] = d
    grad_op("slice_grad", {"Input": A, "Out@GRAD": d},
            {"axes": [1], "starts": [1], "ends": [3]}, {"Input@GRAD": ref}, ["Out@GRAD"])
    d = R(3, 2, seed=11)
    ref = np.zeros_like(A)
    ref[:, 3:0:-2] = d
    grad_op("strided_slice_grad", {"Input": A, "Out@GRAD": d},
            {"axes": [1], "starts": [3], "ends": [0], "strides": [-2]}, {"Input@GRAD": ref},
            ["Out@GRAD"])


def test_join_grad_double():
    a, b = R(2, 3, seed=12), R(2, 2, seed=13)
    d = R(2, 5, seed=14)
    grad_op("concat_grad", {"X": [("a", a), ("b", b)], "Out@GRAD": d}, {"axis": 1},
            {"X@GRAD": [("ga", d[:, :3]), ("gb", d[:, 3:])]}, ["Out@GRAD"])
    dy = R(2, 2, 3, seed=15)
    grad_op("stack_grad", {"Y@GRAD": dy}, {"axis": 1},
            {"X@GRAD": [("ga", dy[:, 0]), ("gb", dy[:, 1])]}, ["Y@GRAD"])


def test_gather_expand_topk_grad_double():
    idx = np.array([2, 0], np.int64)
    d = R(2, 4, seed=16)
    ref = np.zeros_like(A)
    ref[idx] = d
    grad_op("gather_grad", {"X": A, "Index": idx, "Out@GRAD": d}, {}, {"X@GRAD": ref},
            ["Out@GRAD"])
    x = R(2, 1, seed=17)
    d = R(4, 3, seed=18)
    grad_op("expand_grad", {"X": x, "Out@GRAD": d}, {"expand_times": [2, 3]},
            {"X@GRAD": d.reshape(2, 2, 1, 3).sum(axis=(0, 3))}, ["Out@GRAD"])
    ind = np.argsort(-A, axis=-1)[:, :2]
    d = R(3, 2, seed=19)
    ref = np.zeros_like(A)
    np.put_along_axis(ref, ind, d, -1)
    grad_op("top_k_grad", {"X": A, "Indices": ind, "Out@GRAD": d}, {"k": 2}, {"X@GRAD": ref},
            ["Out@GRAD"])
    grad_op("take_along_axis_last_grad", {"X": A, "Index": ind, "Out@GRAD": d}, {},
            {"X@GRAD": ref}, ["Out@GRAD"])
