"""OpTest cases for fluidlite/ops/loss_extra.py (huber_loss, smooth_l1_loss, log_loss,
kldiv_loss, margin_rank_loss, rank_loss, bpr_loss, sigmoid_focal_loss,
teacher_student_sigmoid_loss, center_loss) against NumPy, numeric float64 gradients, bad
arguments, and the loss layers (including the compositions mse_loss, dice_loss, npair_loss)."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.testing import OpTest

L = fluid.layers


def _t(op_type, inputs, outputs, attrs=None):
    t = OpTest()
    t.op_type, t.inputs, t.outputs, t.attrs = op_type, inputs, outputs, attrs or {}
    t.check_infer()
    t.check_output()
    return t


def _sig(x):
    return 1 / (1 + np.exp(-x))


@pytest.mark.parametrize("delta", [1.0, 0.3])
def test_huber_loss_op(delta):
    x, y = OpTest.rand(6, 1, seed=1), OpTest.rand(6, 1, low=-2, high=2, seed=2)
    r = y - x
    r = np.where(np.abs(np.abs(r) - delta) < 0.05, r + 0.1, r)   # stay off the kink
    y = x + r
    out = np.where(np.abs(r) <= delta, 0.5 * r * r, delta * (np.abs(r) - 0.5 * delta))
    t = _t("huber_loss", {"X": x, "Y": y}, {"Out": out, "Residual": r}, {"delta": delta})
    t.check_grad(["X", "Y"], "Out")


def _smooth_l1(x, y, iw, ow, sigma):
    d = (x - y) * iw
    s2 = sigma * sigma
    e = np.where(np.abs(d) < 1 / s2, 0.5 * s2 * d * d, np.abs(d) - 0.5 / s2) * ow
    return d, e.reshape(len(x), -1).sum(1, keepdims=True)


@pytest.mark.parametrize("weights,sigma", [(False, 1.0), (True, 2.0), (False, 0.5)])
def test_smooth_l1_loss_op(weights, sigma):
    x, y = OpTest.rand(4, 3, 2, low=-2, high=2, seed=3), OpTest.rand(4, 3, 2, seed=4)
    iw = OpTest.rand(4, 3, 2, low=0.5, high=1.5, seed=5) if weights else np.ones_like(x)
    ow = OpTest.rand(4, 3, 2, low=0.5, high=1.5, seed=6) if weights else np.ones_like(x)
    d = (x - y) * iw
    bad = np.abs(np.abs(d) - 1 / sigma ** 2) < 0.05
    x = np.where(bad, x + 0.2 / iw, x)
    inputs = {"X": x, "Y": y}
    if weights:
        inputs.update(InsideWeight=iw, OutsideWeight=ow)
    diff, out = _smooth_l1(x, y, iw, ow, sigma)
    t = _t("smooth_l1_loss", inputs, {"Diff": diff, "Out": out}, {"sigma": sigma})
    t.check_grad(["X", "Y"], "Out")


def test_log_loss_op():
    p, lab = OpTest.rand(5, 1, low=0.1, high=0.9, seed=7), np.array([[0.], [1.], [1.], [0.],
                                                                     [0.3]])
    eps = 1e-4
    ref = -lab * np.log(p + eps) - (1 - lab) * np.log(1 - p + eps)
    t = _t("log_loss", {"Predicted": p, "Labels": lab}, {"Loss": ref}, {"epsilon": eps})
    t.check_grad(["Predicted"], "Loss")


@pytest.mark.parametrize("reduction", ["none", "sum", "mean", "batchmean"])
def test_kldiv_loss_op(reduction):
    x = OpTest.rand(3, 4, low=-2, high=0, seed=8)
    target = OpTest.rand(3, 4, low=0.0, high=1.0, seed=9)
    target[0, 1] = 0.0          # zero targets contribute nothing
    l = np.where(target > 0, target * (np.log(np.where(target > 0, target, 1)) - x), 0)
    ref = {"none": l, "sum": np.array([l.sum()]), "mean": np.array([l.mean()]),
           "batchmean": np.array([l.sum() / 3])}[reduction]
    t = _t("kldiv_loss", {"X": x, "Target": target}, {"Loss": ref}, {"reduction": reduction})
    t.check_grad(["X"], "Loss")


def test_margin_rank_loss_op():
    lab = np.array([[1.], [-1.], [1.], [-1.], [1.]])
    x1, x2 = OpTest.rand(5, 1, seed=10), OpTest.rand(5, 1, seed=11)
    v = -lab * (x1 - x2) + 0.1
    x1 = np.where(np.abs(v) < 0.05, x1 + 0.2 * lab, x1)
    v = -lab * (x1 - x2) + 0.1
    t = _t("margin_rank_loss", {"Label": lab, "X1": x1, "X2": x2},
           {"Out": np.maximum(v, 0), "Activated": (v > 0).astype("float64")}, {"margin": 0.1})
    t.check_grad(["X1", "X2"], "Out")


def test_rank_loss_op():
    lab = np.array([[1.], [0.], [0.5], [1.]])
    left, right = OpTest.rand(4, 1, low=-3, high=3, seed=12), OpTest.rand(4, 1, seed=13)
    o = left - right
    t = _t("rank_loss", {"Label": lab, "Left": left, "Right": right},
           {"Out": np.log1p(np.exp(o)) - lab * o})
    t.check_grad(["Left", "Right"], "Out")


def test_bpr_loss_op():
    x = OpTest.rand(4, 5, low=-2, high=2, seed=14)
    lab = np.array([[0], [3], [4], [3]], dtype="int64")
    ref = np.zeros((4, 1))
    for i in range(4):
        ref[i] = -sum(np.log(_sig(x[i, lab[i, 0]] - x[i, j])) for j in range(5)
                      if j != lab[i, 0]) / 4
    t = _t("bpr_loss", {"X": x, "Label": lab}, {"Y": ref})
    t.check_grad(["X"], "Y")


@pytest.mark.parametrize("gamma,alpha,fg", [(2.0, 0.25, 3), (0.0, 0.5, 0), (1.5, 0.75, 2)])
def test_sigmoid_focal_loss_op(gamma, alpha, fg):
    x = OpTest.rand(5, 3, low=-3, high=3, seed=15)
    lab = np.array([[0], [1], [3], [-1], [2]], dtype="int32")
    fgn = max(fg, 1)
    p = _sig(x)
    d = np.arange(3)[None]
    pos = (lab == d + 1).astype("float64")
    neg = ((lab != -1) & (lab != d + 1)).astype("float64")
    ref = (-pos * alpha / fgn * (1 - p) ** gamma * np.log(p)
           - neg * (1 - alpha) / fgn * p ** gamma * np.log(1 - p))
    t = _t("sigmoid_focal_loss", {"X": x, "Label": lab, "FgNum": np.array([fg], "int32")},
           {"Out": ref}, {"gamma": gamma, "alpha": alpha})
    t.check_grad(["X"], "Out")


def test_teacher_student_sigmoid_loss_op():
    x = OpTest.rand(6, 1, low=-4, high=4, seed=16)
    z = np.array([[-2.], [-1.], [0.3], [0.0], [1.7], [1.0]])
    sp = np.log1p(np.exp(x))
    ref = np.where(z < -1, sp, np.where(z < 0, sp - x, 2 * sp - x * z))
    t = _t("teacher_student_sigmoid_loss", {"X": x, "Label": z}, {"Y": ref})
    t.check_grad(["X"], "Y")
    # fluid's kernel: no gradient where x is outside [lower, upper]
    from fluidlite.core.registry import get_op_def
    g = get_op_def("teacher_student_sigmoid_loss").backward(
        np.array([[20.0], [0.0]]), np.array([[-2.0], [-2.0]]), np.ones((2, 1)))["X"]
    np.testing.assert_allclose(g, [[0.0], [0.5]])


@pytest.mark.parametrize("need_update", [True, False])
def test_center_loss_op(need_update):
    x = OpTest.rand(5, 3, seed=17)
    lab = np.array([[0], [2], [0], [1], [0]], dtype="int64")
    centers = OpTest.rand(4, 3, seed=18)
    rate = np.array([0.5])
    diff = x - centers[lab[:, 0]]
    new = centers.copy()
    if need_update:
        for k in range(4):
            rows = lab[:, 0] == k
            new[k] += 0.5 / (1 + rows.sum()) * diff[rows].sum(0)
    t = _t("center_loss", {"X": x, "Label": lab, "Centers": centers, "CenterUpdateRate": rate},
           {"SampleCenterDiff": diff, "Loss": 0.5 * (diff ** 2).sum(1, keepdims=True),
            "CentersOut": new}, {"cluster_num": 4, "need_update": need_update})
    t.check_grad(["X"], "Loss")


# -- bad arguments -----------------------------------------------------------------------------
def _build(fn):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        return fn()


@pytest.mark.parametrize("fn,err,match", [
    (lambda: L.huber_loss(fluid.data("a", [4, 1]), fluid.data("b", [4, 2]), 1.0), ValueError,
     "same shape"),
    (lambda: L.huber_loss(fluid.data("a", [4, 1]), fluid.data("b", [4, 1]), "big"), TypeError,
     "delta"),
    (lambda: L.kldiv_loss(fluid.data("a", [4, 3]), fluid.data("b", [4, 3]), reduction="avg"),
     ValueError, "reduction must be one of"),
    (lambda: L.bpr_loss(fluid.data("a", [4, 3]), fluid.data("b", [4, 1])), TypeError,
     "The data type of 'label' in bpr_loss"),
    (lambda: L.log_loss(fluid.data("a", [4, 2]), fluid.data("b", [4, 2])), ValueError,
     r"shape \[N, 1\]"),
    (lambda: L.smooth_l1(fluid.data("a", [4]), fluid.data("b", [4])), ValueError,
     "at least 2 dims"),
    (lambda: L.margin_rank_loss(np.ones((2, 1)), fluid.data("b", [2, 1]),
                                fluid.data("c", [2, 1])), TypeError,
     "The type of 'label' in margin_rank_loss must be Variable"),
    (lambda: L.dice_loss(fluid.data("a", [4, 3]), fluid.data("b", [4, 1], dtype="bool")),
     TypeError, "The data type of 'label' in dice_loss"),
    (lambda: L.npair_loss(fluid.data("a", [4, 3]), fluid.data("p", [4, 5]),
                          fluid.data("l", [4], dtype="float32")), ValueError,
     "anchor and positive"),
    (lambda: L.sigmoid_focal_loss(fluid.data("a", [4, 3]), fluid.data("b", [4, 1], "int32"),
                                  fluid.data("f", [1], "float32")), TypeError,
     "The data type of 'fg_num' in sigmoid_focal_loss"),
    (lambda: L.center_loss(fluid.data("a", [4, 3]), fluid.data("b", [4, 1], "int64"), 5,
                           alpha="x", param_attr=None), TypeError, "alpha"),
])
def test_bad_arguments(fn, err, match):
    with pytest.raises(err, match=match):
        _build(fn)


def test_label_out_of_range_is_reported():
    from fluidlite.core.registry import get_op_def
    with pytest.raises(ValueError, match=r"bpr_loss: label 5 is out of range \[0, 3\)"):
        get_op_def("bpr_loss").forward(np.zeros((2, 3)), np.array([[0], [5]]))


# -- layers ------------------------------------------------------------------------------------
def _run(build, feed):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        outs = build()
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(startup)
        return main, exe.run(main, feed=feed, fetch_list=outs), scope


def test_loss_layers_match_numpy():
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (4, 3)).astype("float32")
    y = rng.uniform(-1, 1, (4, 3)).astype("float32")
    p = rng.uniform(0.1, 0.9, (4, 1)).astype("float32")
    lab = np.array([[1.0], [0.0], [1.0], [0.0]], "float32")
    cls = np.array([[0], [2], [1], [2]], "int64")

    def build():
        a, b = fluid.data("x", [-1, 3]), fluid.data("y", [-1, 3])
        pp, ll = fluid.data("p", [-1, 1]), fluid.data("lab", [-1, 1])
        cc = fluid.data("cls", [-1, 1], "int64")
        a1, b1 = L.slice(a, [1], [0], [1]), L.slice(b, [1], [0], [1])
        return [L.mse_loss(a, b), L.huber_loss(a1, b1, 0.5), L.smooth_l1(a, b, sigma=2.0),
                L.log_loss(pp, ll), L.kldiv_loss(a, L.softmax(b), reduction="batchmean"),
                L.margin_rank_loss(L.scale(ll, 2.0, -1.0), a1, b1, margin=0.2),
                L.rank_loss(ll, a1, b1), L.bpr_loss(a, cc), L.dice_loss(L.softmax(a), cc),
                L.teacher_student_sigmoid_loss(a1, ll)]

    main, got, _ = _run(build, {"x": x, "y": y, "p": p, "lab": lab, "cls": cls})
    r = y[:, :1] - x[:, :1]
    sm = np.exp(y) / np.exp(y).sum(1, keepdims=True)
    d, s = x - y, 4.0
    sl1 = np.where(np.abs(d) < 1 / s, 0.5 * s * d * d, np.abs(d) - 0.5 / s).sum(1,
                                                                                keepdims=True)
    o = x[:, :1] - y[:, :1]
    bpr = np.array([[-sum(np.log(_sig(x[i, cls[i, 0]] - x[i, j])) for j in range(3)
                          if j != cls[i, 0]) / 2] for i in range(4)])
    sa = np.exp(x) / np.exp(x).sum(1, keepdims=True)
    oh = np.eye(3)[cls[:, 0]]
    dice = np.mean(1 - 2 * (sa * oh).sum(1) / (sa.sum(1) + oh.sum(1) + 1e-5))
    sp = np.log1p(np.exp(x[:, :1]))
    want = [[((x - y) ** 2).mean()],
            np.where(np.abs(r) <= 0.5, 0.5 * r * r, 0.5 * (np.abs(r) - 0.25)), sl1,
            -lab * np.log(p + 1e-4) - (1 - lab) * np.log(1 - p + 1e-4),
            [(sm * (np.log(sm) - x)).sum() / 4],
            np.maximum(-(2 * lab - 1) * o + 0.2, 0), np.log1p(np.exp(o)) - lab * o, bpr, [dice],
            np.where(lab < 1, 2 * sp - x[:, :1] * lab, 2 * sp - x[:, :1] * lab)]
    for i, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_allclose(g, np.asarray(w, "float32"), rtol=1e-4, atol=1e-5,
                                   err_msg=f"output {i}")
    types = {op.type for op in main.global_block().ops}
    assert {"huber_loss", "smooth_l1_loss", "log_loss", "kldiv_loss", "margin_rank_loss",
            "rank_loss", "bpr_loss", "teacher_student_sigmoid_loss"} <= types


def _npair_ref(anchor, positive, labels, l2_reg):
    eq = (labels[:, None] == labels[None, :]).astype("float64")
    eq /= eq.sum(1, keepdims=True)
    l2 = ((anchor ** 2).sum(1).mean() + (positive ** 2).sum(1).mean()) * 0.25 * l2_reg
    sim = anchor @ positive.T
    logp = sim - sim.max(1, keepdims=True)
    logp = logp - np.log(np.exp(logp).sum(1, keepdims=True))
    ce = -(eq * logp).sum(1)
    return l2 + ce.mean()


def test_npair_loss_matches_its_formula():
    rng = np.random.default_rng(1)
    a = rng.uniform(-1, 1, (4, 3)).astype("float32")
    pos = rng.uniform(-1, 1, (4, 3)).astype("float32")
    labels = np.array([0, 1, 0, 2], "float32")
    _, got, _ = _run(lambda: [L.npair_loss(fluid.data("a", [4, 3]), fluid.data("p", [4, 3]),
                                           fluid.data("l", [4]), l2_reg=0.01)],
                     {"a": a, "p": pos, "l": labels})
    np.testing.assert_allclose(got[0], [_npair_ref(a, pos, labels, 0.01)], rtol=1e-5)


def test_sigmoid_focal_loss_layer():
    x = np.array([[0.5, -1.0], [2.0, 0.1]], "float32")
    lab = np.array([[1], [0]], "int32")
    _, got, _ = _run(lambda: [L.sigmoid_focal_loss(
        fluid.data("x", [2, 2]), fluid.data("lab", [2, 1], "int32"),
        fluid.data("fg", [1], "int32"), gamma=2.0, alpha=0.25)],
        {"x": x, "lab": lab, "fg": np.array([1], "int32")})
    p = _sig(x.astype("float64"))
    want = np.array([[-0.25 * (1 - p[0, 0]) ** 2 * np.log(p[0, 0]),
                      -0.75 * p[0, 1] ** 2 * np.log(1 - p[0, 1])],
                     [-0.75 * p[1, 0] ** 2 * np.log(1 - p[1, 0]),
                      -0.75 * p[1, 1] ** 2 * np.log(1 - p[1, 1])]])
    np.testing.assert_allclose(got[0], want, rtol=1e-5)


def test_center_loss_layer_updates_centers_and_trains():
    x = np.array([[1.0, 0.0], [0.0, 2.0], [3.0, 0.0]], "float32")
    lab = np.array([[0], [1], [0]], "int64")

    def build():
        a = fluid.data("x", [-1, 2])
        a.stop_gradient = False
        loss = L.center_loss(a, fluid.data("lab", [-1, 1], "int64"), num_classes=3, alpha=0.5,
                             param_attr=fluid.ParamAttr(
                                 name="centers",
                                 initializer=fluid.initializer.Constant(1.0)))
        return [loss, fluid.backward.gradients([L.reduce_sum(loss)], [a])[0]]

    main, (loss, dx), scope = _run(build, {"x": x, "lab": lab})
    c = np.ones((3, 2))
    diff = x - c[lab[:, 0]]
    np.testing.assert_allclose(loss, 0.5 * (diff ** 2).sum(1, keepdims=True))
    np.testing.assert_allclose(dx, diff)
    new = np.array(scope.find_var("centers").get_tensor())
    want = c.copy()
    want[0] += 0.5 / 3 * (diff[0] + diff[2])
    want[1] += 0.5 / 2 * diff[1]
    np.testing.assert_allclose(new, want, rtol=1e-6)
    assert scope.find_var("centerloss_alpha") is not None


def test_loss_layers_in_dygraph():
    x = np.array([[0.2], [1.5]], "float32")
    y = np.array([[0.0], [0.0]], "float32")
    with fluid.dygraph.guard():
        a, b = fluid.dygraph.to_variable(x), fluid.dygraph.to_variable(y)
        a.stop_gradient = False
        out = L.huber_loss(a, b, 1.0)
        np.testing.assert_allclose(out.numpy(), [[0.02], [1.0]], rtol=1e-6)
        L.reduce_sum(out).backward()
        np.testing.assert_allclose(a.gradient(), [[0.2], [1.0]], rtol=1e-6)
        np.testing.assert_allclose(L.mse_loss(a, b).numpy(), [(0.04 + 2.25) / 2], rtol=1e-6)


# -- float32 end to end -------------------------------------------------------------------------
F32_LOSSES = [
    ("huber_loss", lambda x, t, c: L.huber_loss(x, t, 0.5)),
    ("smooth_l1", lambda x, t, c: L.smooth_l1(x, t, x * 0 + 1.0, x * 0 + 2.0, sigma=3.0)),
    ("log_loss", lambda x, t, c: L.log_loss(L.sigmoid(x), L.scale(t, 0.0, 1.0))),
    ("kldiv_loss", lambda x, t, c: L.kldiv_loss(x, L.sigmoid(t), "batchmean")),
    ("margin_rank_loss", lambda x, t, c: L.margin_rank_loss(L.sign(t), x, t)),
    ("rank_loss", lambda x, t, c: L.rank_loss(L.sigmoid(t), x, t)),
    ("bpr_loss", lambda x, t, c: L.bpr_loss(L.concat([x, t], axis=1), c)),
    ("sigmoid_focal_loss", lambda x, t, c: L.sigmoid_focal_loss(
        L.concat([x, t], axis=1), L.cast(c, "int32"), L.fill_constant([1], "int32", 2))),
    ("teacher_student_sigmoid_loss",
     lambda x, t, c: L.teacher_student_sigmoid_loss(x, L.scale(t, 1.0, 0.5))),
    ("center_loss", lambda x, t, c: L.center_loss(L.concat([x, t], axis=1), c, 3, 0.1, None)),
    ("mse_loss", lambda x, t, c: L.mse_loss(x, t)),
    ("dice_loss", lambda x, t, c: L.dice_loss(L.softmax(L.concat([x, t, x], axis=1)), c)),
    ("npair_loss", lambda x, t, c: L.npair_loss(L.concat([x, t], axis=1),
                                                L.concat([t, x], axis=1),
                                                L.reshape(c, [-1]))),
]


@pytest.mark.parametrize("name,build", F32_LOSSES, ids=[n for n, _ in F32_LOSSES])
def test_float32_loss_forward_and_backward_stay_float32(name, build):
    rng = np.random.default_rng(4)
    feed = {"x": rng.uniform(-1, 1, (4, 1)).astype("float32"),
            "t": rng.uniform(-1, 1, (4, 1)).astype("float32"),
            "c": np.array([[0], [1], [1], [0]], "int64")}
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x, t = fluid.data("x", [4, 1]), fluid.data("t", [4, 1])
        c = fluid.data("c", [4, 1], "int64")
        x.stop_gradient = False
        out = build(x, t, c)
        g = fluid.backward.gradients([L.mean(out)], [x])[0]
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(fluid.Scope()):
        exe.run(startup)
        o, gx = exe.run(main, feed=feed, fetch_list=[out, g])
    assert o.dtype == np.float32 and gx.dtype == np.float32, (o.dtype, gx.dtype)
    assert gx.shape == (4, 1) and np.isfinite(gx).all() and np.isfinite(o).all()


def test_fluid_doc_examples_label_dtypes_and_feature_dims_are_accepted():
    """fluid 1.8's documented examples pass float class labels to dice_loss, int64 click
    labels to teacher_student_sigmoid_loss and 3-D features to center_loss."""
    rng = np.random.default_rng(5)
    probs = rng.uniform(0.1, 1, (2, 3)).astype("float32")
    x = rng.uniform(-1, 1, (2, 1)).astype("float32")
    feats = rng.uniform(-1, 1, (2, 2, 3)).astype("float32")

    def build():
        p = fluid.data("p", [2, 3])
        lab_f = fluid.data("lab_f", [2, 1])
        xx = fluid.data("x", [2, 1])
        clicks = fluid.data("clicks", [2, 1], "int64")
        f = fluid.data("f", [-1, 2, 3])
        cls = fluid.data("cls", [-1, 1], "int64")
        return [L.dice_loss(p, lab_f), L.dice_loss(p, L.cast(lab_f, "int64")),
                L.teacher_student_sigmoid_loss(xx, clicks),
                L.teacher_student_sigmoid_loss(xx, L.cast(clicks, "float32")),
                L.center_loss(f, cls, num_classes=2, alpha=0.1, param_attr=fluid.ParamAttr(
                    initializer=fluid.initializer.Constant(0.0)), update_center=False)]

    main, (d1, d2, t1, t2, c), _ = _run(build, {
        "p": probs, "lab_f": np.array([[2.0], [0.0]], "float32"), "x": x,
        "clicks": np.array([[-2], [-1]], "int64"), "f": feats,
        "cls": np.array([[0], [1]], "int64")})
    np.testing.assert_allclose(d1, d2)
    np.testing.assert_allclose(t1, t2)
    np.testing.assert_allclose(c, 0.5 * (feats.reshape(2, 6) ** 2).sum(1, keepdims=True),
                               rtol=1e-6)
    centers = [p for p in main.global_block().all_parameters() if "center_loss" in p.name]
    assert tuple(centers[0].shape) == (2, 6)


# -- fluid's numeric guards (issue 29): Paddle 2.6 CPU values ------------------------------------
def test_bpr_loss_tolerable_value():
    """fluid's kernel: -log(1 + TolerableValue(exp(x_j - x_label))): an overflowing exp
    counts as 1e20, so a term is at most log(1 + 1e20) = 46.0517 (Paddle 2.6's values)."""
    from fluidlite.core.registry import get_op_def
    x = np.array([[0.0, 100.0, -50.0, 3.0], [200.0, -300.0, 0.5, 1.0],
                  [-1000.0, 1000.0, 0.0, 0.0]], np.float32)
    lab = np.array([[0], [1], [2]], np.int64)
    d = get_op_def("bpr_loss")
    y = d.forward(x, lab)["Y"]
    assert y.dtype == np.float32
    np.testing.assert_allclose(y.ravel(), [16.366762, 46.0517, 15.581615], rtol=1e-6)
    g = d.backward(x, lab, np.ones((3, 1), np.float32))["X"]
    np.testing.assert_allclose(g, [[-0.65085804, 1 / 3, 6.4291665e-23, 0.3175247],
                                   [1 / 3, -1.0, 1 / 3, 1 / 3],
                                   [3.3333333e-21, 1 / 3, -0.5, 0.16666667]], rtol=1e-6)


def test_rank_loss_has_no_guard_in_fluid():
    """fluid computes log(1 + exp(o)) - label * o literally: +inf once exp(o) overflows
    (Paddle 2.6: [inf, 0, inf]); the gradient stays finite."""
    from fluidlite.core.registry import get_op_def
    f = np.float32
    lab = np.array([[1.0], [0.0], [1.0]], f)
    left, right = np.array([[100.0], [-100.0], [1e4]], f), np.array([[-100.0], [100.0], [0]], f)
    d = get_op_def("rank_loss")
    out = d.forward(lab, left, right)["Out"]
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out.ravel(), [np.inf, 0.0, np.inf])
    g = d.backward(lab, left, right, np.ones((3, 1), f))
    np.testing.assert_array_equal(g["Left"].ravel(), [0.0, 0.0, 0.0])


def test_rank_loss_accepts_n_and_n_by_1():
    """fluid's RankLossOp: Label, Left and Right each [N] or [N, 1], flattened by the kernel;
    Out has Label's shape (Paddle 2.6: Out [0.974077, 3.0485873], dLeft [[-0.6224593],
    [0.95257413]], dRight [0.6224593, -0.95257413] for these inputs and dOut = 1)."""
    lab, left, right = np.array([1.0, 0.0]), np.array([[0.5], [2.0]]), np.array([1.0, -1.0])
    o = left.ravel() - right
    t = _t("rank_loss", {"Label": lab, "Left": left, "Right": right},
           {"Out": np.log1p(np.exp(o)) - lab * o})
    np.testing.assert_allclose(t.outputs["Out"], [0.974077, 3.0485873], rtol=1e-6)
    t.check_grad(["Left", "Right"], "Out")
    from fluidlite.core.registry import get_op_def
    g = get_op_def("rank_loss").backward(lab, left, right, np.ones(2))
    np.testing.assert_allclose(g["Left"], [[-0.6224593], [0.95257413]], rtol=1e-6)
    np.testing.assert_allclose(g["Right"], [0.6224593, -0.95257413], rtol=1e-6)
    from fluidlite.core.registry import VarSpec
    d = get_op_def("rank_loss")
    with pytest.raises(ValueError, match=r"rank_loss: Left must be \[N\] or \[N, 1\]"):
        d.infer(VarSpec([2], "float32"), VarSpec([2, 2], "float32"), VarSpec([2], "float32"))
    with pytest.raises(ValueError, match="same first dim"):
        d.infer(VarSpec([2], "float32"), VarSpec([3], "float32"), VarSpec([2], "float32"))


def test_center_loss_takes_a_rank_1_label():
    """fluid 1.8's center_loss reads Label as N flat ids (its InferShape has no label check):
    a [N] label gives what the [N, 1] one gives; a wrong length is refused."""
    x, centers = OpTest.rand(4, 3, seed=1), OpTest.rand(3, 3, seed=2)
    lab = np.array([2, 0, 2, 1], dtype="int64")
    diff = x - centers[lab]
    t = _t("center_loss", {"X": x, "Label": lab, "Centers": centers,
                           "CenterUpdateRate": np.array([0.1])},
           {"SampleCenterDiff": diff, "Loss": 0.5 * (diff ** 2).sum(1, keepdims=True)},
           {"cluster_num": 3, "need_update": False})
    t.check_grad(["X"], "Loss")
    with pytest.raises(ValueError, match=r"Label \[N\] must have one id per row of X"):
        _build(lambda: fluid.layers.center_loss(fluid.data("a", [4, 3]),
                                                fluid.data("b", [5], "int64"), 3, 0.1,
                                                param_attr=None))
