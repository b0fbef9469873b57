"""OpTest cases for fluidlite/ops/loss.py and the loss layers (incl. known values)."""
import math

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core.registry import get_op_def, has_op
from fluidlite.testing import OpTest

N, C = 4, 5
PROBS = OpTest.rand(N, C, low=0.1, high=1.0)
PROBS = PROBS / PROBS.sum(1, keepdims=True)
LABEL = np.array([[1], [0], [4], [2]], np.int64)
LOGITS = OpTest.rand(N, C, low=-2, high=2, seed=7)


def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def check(op_type, inputs, attrs, outputs, grad, out, max_rel=0.005, no_check=()):
    t = OpTest()
    t.op_type, t.inputs, t.attrs, t.outputs = op_type, inputs, attrs, outputs
    t.check_infer()
    t.check_output(no_check_set=no_check)
    t.check_grad(grad, out, max_relative_error=max_rel)


def test_cross_entropy2():
    y = -np.log(np.take_along_axis(PROBS, LABEL, 1))
    check("cross_entropy2", {"X": PROBS, "Label": LABEL}, {},
          {"Y": y, "MatchX": np.exp(-y), "XShape": np.empty((0, N, C))}, ["X"], "Y",
          no_check=["XShape"])


def test_cross_entropy2_ignore_index():
    lab = LABEL.copy()
    lab[1] = -1
    y = -np.log(np.take_along_axis(PROBS, np.maximum(lab, 0), 1))
    y[1] = 0
    check("cross_entropy2", {"X": PROBS, "Label": lab}, {"ignore_index": -1}, {"Y": y}, ["X"],
          "Y")


def test_cross_entropy_legacy_hard_and_soft():
    y = -np.log(np.take_along_axis(PROBS, LABEL, 1))
    check("cross_entropy", {"X": PROBS, "Label": LABEL}, {}, {"Y": y}, ["X"], "Y")
    soft = softmax(OpTest.rand(N, C, seed=3))
    check("cross_entropy", {"X": PROBS, "Label": soft}, {"soft_label": True},
          {"Y": -(soft * np.log(PROBS)).sum(1, keepdims=True)}, ["X", "Label"], "Y")


def test_softmax_with_cross_entropy_hard():
    sm = softmax(LOGITS)
    loss = -np.log(np.take_along_axis(sm, LABEL, 1))
    check("softmax_with_cross_entropy", {"Logits": LOGITS, "Label": LABEL}, {},
          {"Loss": loss, "Softmax": sm}, ["Logits"], "Loss")


def test_softmax_with_cross_entropy_ignore_and_soft():
    lab = LABEL.copy()
    lab[2] = 7
    sm = softmax(LOGITS)
    loss = -np.log(np.take_along_axis(sm, np.where(lab == 7, 0, lab), 1))
    loss[2] = 0
    check("softmax_with_cross_entropy", {"Logits": LOGITS, "Label": lab}, {"ignore_index": 7},
          {"Loss": loss, "Softmax": sm}, ["Logits"], "Loss")
    soft = softmax(OpTest.rand(N, C, seed=4))
    check("softmax_with_cross_entropy", {"Logits": LOGITS, "Label": soft},
          {"soft_label": True},
          {"Loss": -(soft * np.log(sm)).sum(1, keepdims=True), "Softmax": sm},
          ["Logits", "Label"], "Loss")


def test_softmax_with_cross_entropy_axis():
    x = OpTest.rand(2, 3, 4, seed=5)
    lab = np.array([[[0, 2, 1, 1]], [[2, 2, 0, 1]]], np.int64)      # [2, 1, 4], axis 1
    sm = softmax(x, 1)
    loss = -np.log(np.take_along_axis(sm, lab, 1))
    check("softmax_with_cross_entropy", {"Logits": x, "Label": lab}, {"axis": 1},
          {"Loss": loss, "Softmax": sm}, ["Logits"], "Loss")


def test_softmax_with_cross_entropy_stable_float32():
    x = np.array([[1000.0, 0.0], [-1000.0, 0.0]], np.float32)
    out = get_op_def("softmax_with_cross_entropy").forward(x, np.array([[1], [1]]))
    assert out["Loss"].dtype == np.float32 and np.isfinite(out["Loss"]).all()
    # fluid clips the shifted logits at -64: the wrong class costs 64, not 1000
    np.testing.assert_allclose(out["Loss"].ravel(), [64.0, 0.0], atol=1e-3)


def test_bad_label_errors():
    op = get_op_def("softmax_with_cross_entropy")
    with pytest.raises(ValueError, match="softmax_with_cross_entropy: label 9 is out of range"):
        op.forward(LOGITS, np.array([[9], [0], [0], [0]]))
    with fluid.program_guard(fluid.Program()):
        x = fluid.layers.data("x", [C])
        bad = fluid.layers.data("y", [1], dtype="float32")
        with pytest.raises(TypeError, match="label.*softmax_with_cross_entropy.*int64"):
            fluid.layers.softmax_with_cross_entropy(x, bad)
        with pytest.raises(TypeError, match="'input' in cross_entropy"):
            fluid.layers.cross_entropy(np.zeros((2, C)), bad)
        wrong = fluid.layers.data("z", [2], dtype="int64")
        with pytest.raises(ValueError, match="cross_entropy2.*Label shape"):
            fluid.layers.cross_entropy(x, wrong)


def test_sigmoid_cross_entropy_with_logits():
    x = OpTest.rand(3, 4, low=-3, high=3, seed=8)
    lab = OpTest.rand(3, 4, low=0, high=1, seed=9)
    ref = np.maximum(x, 0) - x * lab + np.log1p(np.exp(-np.abs(x)))
    check("sigmoid_cross_entropy_with_logits", {"X": x, "Label": lab}, {}, {"Out": ref},
          ["X", "Label"], "Out")
    lab2 = lab.copy()
    lab2[0, :2] = -100
    ref2 = np.where(lab2 == -100, 0, np.maximum(x, 0) - x * lab2 + np.log1p(np.exp(-np.abs(x))))
    check("sigmoid_cross_entropy_with_logits", {"X": x, "Label": lab2}, {"normalize": True},
          {"Out": ref2 / 10.0}, ["X"], "Out")


def _run(main, startup, feed, fetch):
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    return exe.run(main, feed=feed, fetch_list=fetch)


@pytest.mark.skipif(not (has_op("elementwise_sub") and has_op("square")),
                    reason="square_error_cost needs elementwise_sub and square (helper H1)")
def test_known_values_square_error_cost():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", [3])
        x.stop_gradient = False
        label = fluid.layers.data("label", [1])
        label.stop_gradient = False
        w = fluid.ParamAttr(initializer=fluid.initializer.NumpyArrayInitializer(
            np.array([[2.0], [3.0], [4.0]], np.float32)))
        y = fluid.layers.fc(x, 1, param_attr=w, bias_attr=False)
        loss = fluid.layers.mean(fluid.layers.square_error_cost(y, label))
        ops = [op.type for op in main.global_block().ops]
        assert ops[-3:] == ["elementwise_sub", "square", "mean"]
        fluid.backward.append_backward(loss)
    got = _run(main, startup, {"x": np.array([[1, 2, 3]], np.float32),
                               "label": np.array([[19]], np.float32)},
               [loss, "x@GRAD", "fc_0.w_0@GRAD", "label@GRAD"])
    np.testing.assert_allclose(got[0], [1.0])
    np.testing.assert_allclose(got[1], [[4, 6, 8]])
    np.testing.assert_allclose(got[2], [[2], [4], [6]])
    np.testing.assert_allclose(got[3], [[-2]])


def test_known_values_softmax_with_cross_entropy():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", [3])
        label = fluid.layers.data("label", [1], dtype="int64")
        zero = fluid.initializer.Constant(0.0)
        y = fluid.layers.fc(x, 2, param_attr=fluid.ParamAttr(initializer=zero),
                            bias_attr=fluid.ParamAttr(initializer=zero))
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(y, label))
        fluid.backward.append_backward(loss)
    got = _run(main, startup, {"x": np.array([[0.2, 0.5, 0.2]], np.float32),
                               "label": np.array([[0]], np.int64)},
               [loss, "fc_0.w_0@GRAD", "fc_0.b_0@GRAD"])
    np.testing.assert_allclose(got[0], [math.log(2)], rtol=1e-6)
    np.testing.assert_allclose(got[1], [[-0.1, 0.1], [-0.25, 0.25], [-0.1, 0.1]], rtol=1e-6)
    np.testing.assert_allclose(got[2], [-0.5, 0.5], rtol=1e-6)
    assert got[0].dtype == np.float32


def test_loss_layers_shapes_and_return_softmax():
    with fluid.program_guard(fluid.Program()):
        x = fluid.layers.data("x", [C])
        lab = fluid.layers.data("lab", [1], dtype="int64")
        loss, sm = fluid.layers.softmax_with_cross_entropy(x, lab, return_softmax=True)
        assert loss.shape == (-1, 1) and sm.shape == (-1, C)
        p = fluid.layers.softmax(x)
        assert fluid.layers.cross_entropy(p, lab).shape == (-1, 1)
        soft = fluid.layers.data("soft", [C])
        assert fluid.layers.cross_entropy(p, soft, soft_label=True).shape == (-1, 1)
        s = fluid.layers.sigmoid_cross_entropy_with_logits(x, soft, normalize=True)
        assert s.shape == (-1, C)
        types = [op.type for op in fluid.default_main_program().global_block().ops]
        assert "cross_entropy2" in types and "cross_entropy" in types


# -- fluid's numeric guards (issue 29): Paddle 2.6 CPU values ------------------------------------
BIG = np.array([[0.0, 100.0, -50.0, 3.0], [200.0, -300.0, 0.5, 1.0],
                [-1000.0, 1000.0, 0.0, 0.0]], np.float32)
BIG_LABEL = np.array([[0], [1], [2]], np.int64)


def _run_swce(logits, label, **attrs):
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", list(logits.shape), str(logits.dtype))
        x.stop_gradient = False
        y = fluid.data("y", list(label.shape), str(label.dtype))
        loss, sm = fluid.layers.softmax_with_cross_entropy(x, y, return_softmax=True, **attrs)
        grad, = fluid.gradients([fluid.layers.reduce_sum(loss)], [x])
    return fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": logits, "y": label},
                                                fetch_list=[sm, loss, grad])


def test_softmax_with_cross_entropy_clips_at_minus_64():
    """fluid's SoftmaxFunctor clips the shifted logits at -64 and CrossEntropyFunctor takes
    -log of that probability: a badly wrong class costs 64 (not 100 ... 2000) and every
    probability is at least e^-64 / sum; Paddle 2.6 gives exactly these."""
    e64 = np.float32(1.6038109e-28)
    for float_type in ("float32", "float64"):
        sm, loss, grad = _run_swce(BIG.astype(float_type), BIG_LABEL)
        assert loss.dtype == np.dtype(float_type)
        np.testing.assert_allclose(loss.ravel(), [64.0, 64.0, 64.0], rtol=1e-6)
        np.testing.assert_allclose(sm[0], [e64, 1.0, e64, e64], rtol=1e-6)
        np.testing.assert_allclose(grad, [[-1.0, 1.0, e64, e64], [1.0, -1.0, e64, e64],
                                          [e64, 1.0, -1.0, e64]], rtol=1e-6)
    soft = (np.abs(BIG) / np.abs(BIG).sum(1, keepdims=True)).astype(np.float32)
    _, loss, _ = _run_swce(BIG, soft, soft_label=True)
    np.testing.assert_allclose(loss.ravel(), [22.169935, 38.47657, 32.0], rtol=1e-6)
    sm, loss, _ = _run_swce(np.ascontiguousarray(BIG.T), np.ascontiguousarray(BIG_LABEL.T),
                            axis=0)
    np.testing.assert_allclose(loss.ravel(), [64.0, 64.0, 64.0], rtol=1e-6)


def test_softmax_with_cross_entropy_training_stays_finite():
    """A confidently wrong classifier: fluid's loss stays 64 and its gradient finite, so SGD
    recovers instead of diverging to inf / NaN."""
    logits = np.array([[0.0, 5000.0]], np.float32)
    for _ in range(3):
        _, loss, grad = _run_swce(logits, np.array([[0]], np.int64))
        assert np.isfinite(loss).all() and np.isfinite(grad).all() and loss.item() <= 64.0
        logits = logits - 1000.0 * grad
    assert logits[0, 0] > logits[0, 1] - 3000


def test_softmax_with_cross_entropy_fast_path_is_forward_bit_for_bit():
    d = get_op_def("softmax_with_cross_entropy")
    from fluidlite.core.registry import VarSpec
    rng = np.random.default_rng(3)
    for dtype in (np.float32, np.float64):
        x = (rng.standard_normal((7, 5)) * 40).astype(dtype)
        x[0, 0] = -np.inf
        lab = rng.integers(0, 5, (7, 1)).astype(np.int64)
        fast = d.lower([VarSpec(x.shape, dtype), VarSpec(lab.shape, "int64")], {})
        assert fast is not None
        a, b = fast(x, lab), d.forward(x, lab)
        for k in ("Softmax", "Loss"):
            assert a[k].dtype == b[k].dtype == dtype
            np.testing.assert_array_equal(a[k], b[k])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_softmax_with_cross_entropy_fast_paths_in_parts_are_the_general_bits(dtype):
    """Logits large enough to be cut in row blocks on two threads: the fast forward and
    gradient give the general kernels' bits, for 1, 2 and 3 threads."""
    from fluidlite.core import threads
    from fluidlite.core.registry import VarSpec
    d = get_op_def("softmax_with_cross_entropy")
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((601, 500)) * 8).astype(dtype)      # 300,500 elements
    lab = rng.integers(0, 500, (601, 1)).astype(np.int64)
    dloss = rng.standard_normal((601, 1)).astype(dtype)
    specs = [VarSpec(x.shape, dtype), VarSpec(lab.shape, "int64")]
    fast = d.lower(specs, {})
    fast_grad = d.lower_grad([VarSpec(lab.shape, "int64"), VarSpec(x.shape, dtype)], {},
                             {"Logits"})
    want = d.forward(x, lab)
    want_dx = d.backward(lab, want["Softmax"], dloss)["Logits"]
    for n in (1, 2, 3):
        with threads.using(n):
            got = fast(x, lab)
            dx = fast_grad(lab, got["Softmax"], None, dloss)["Logits"]
        for k in ("Softmax", "Loss"):
            assert got[k].dtype == dtype
            np.testing.assert_array_equal(got[k], want[k])
        assert dx.dtype == dtype
        np.testing.assert_array_equal(dx, want_dx)


def test_sigmoid_cross_entropy_gradient_is_fluids_sigmoid():
    """dX = 1 / (1 + exp(-x)) - label: in float32 at x = -30 that is 9.36e-14, not 0 (a
    tanh-based sigmoid rounds it away); Paddle 2.6: -3.0671097e-14 for dOut = -0.3277."""
    x = np.array([[-30.0, 30.0]], np.float32)
    lab = np.array([[0.0, 1.0]], np.float32)
    g = get_op_def("sigmoid_cross_entropy_with_logits").backward(x, lab, np.ones_like(x))["X"]
    assert g.dtype == np.float32
    np.testing.assert_allclose(g[0, 0], 1 / (1 + np.exp(30.0)), rtol=1e-6)


# -- label shapes fluid accepts (issue 29) -------------------------------------------------------
@pytest.mark.parametrize("op_type", ["cross_entropy", "cross_entropy2"])
def test_cross_entropy_rank_minus_one_label(op_type):
    """fluid's CrossEntropyOpBase takes hard labels of rank N-1 (X [N, C], Label [N]); Y
    then has the label's shape (Paddle 2.6: Y (3,) = [0.2231, 0.5108, 0.6931], dX as for
    [N, 1] labels; MatchX stays [N, 1])."""
    x = np.array([[0.2, 0.8], [0.6, 0.4], [0.5, 0.5]])
    lab = np.array([1, 0, 1], np.int64)
    t = OpTest()
    t.op_type, t.inputs, t.attrs = op_type, {"X": x, "Label": lab}, {}
    t.outputs = {"Y": -np.log([0.8, 0.6, 0.5])}
    if op_type == "cross_entropy2":
        t.outputs["MatchX"] = np.array([[0.8], [0.6], [0.5]])
    t.check_infer()
    t.check_output()
    t.check_grad(["X"], "Y")
    x3 = OpTest.rand(2, 3, 4, low=0.1, high=1.0)
    lab3 = np.array([[0, 3, 1], [2, 2, 0]], np.int64)
    t.inputs = {"X": x3, "Label": lab3}
    t.outputs = {"Y": -np.log(np.take_along_axis(x3, lab3[..., None], -1)[..., 0])}
    if op_type == "cross_entropy2":
        t.outputs["MatchX"] = np.take_along_axis(x3, lab3[..., None], -1)
    t.check_infer()
    t.check_output()
    t.check_grad(["X"], "Y")
    with fluid.program_guard(fluid.Program(), fluid.Program()):     # the layer, as in fluid
        p = fluid.data("p", [-1, 2], "float32")
        y = fluid.data("y", [-1], "int64")
        out = fluid.layers.cross_entropy(p, y)
        assert out.shape == (-1,)
        got, = fluid.Executor(fluid.CPUPlace()).run(
            feed={"p": x.astype("float32"), "y": lab}, fetch_list=[out])
        np.testing.assert_allclose(got, [0.22314353, 0.5108256, 0.6931472], rtol=1e-6)


def test_cross_entropy_label_shape_errors():
    from fluidlite.core.registry import VarSpec
    d = get_op_def("cross_entropy")
    with pytest.raises(ValueError, match="with dim 1 = 1"):
        d.infer(VarSpec([3, 2], "float32"), VarSpec([3, 2], "int64"), soft_label=False)
    with pytest.raises(ValueError, match="must have the rank of the input"):
        d.infer(VarSpec([3, 2], "float32"), VarSpec([3], "float32"), soft_label=True)
    with pytest.raises(ValueError, match="must have the rank of the input"):
        d.infer(VarSpec([3, 2], "float32"), VarSpec([4], "int64"))
