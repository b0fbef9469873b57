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
    np.testing.assert_allclose(out["Loss"].ravel(), [1000.0, 0.0], atol=1e-3)


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
