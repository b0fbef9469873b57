"""Known values from the documents the project started from (issue 3 item 6), computed through
the real backward pass and Executor."""
import math

import numpy as np

import fluidlite as fluid
from fluidlite.backward import append_backward

L = fluid.layers


def test_z_equals_x_times_x_times_y():
    """z = x*x*y at x=2, y=3: dz/dx = 2xy = 12, dz/dy = x^2 = 4."""
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [1], "float32")
        y = fluid.data("y", [1], "float32")
        x.stop_gradient = y.stop_gradient = False
        z = L.elementwise_mul(L.elementwise_mul(x, x), y)
        pg = append_backward(z, parameter_list=[x, y])
    assert [(p.name, g.name) for p, g in pg] == [("x", "x@GRAD"), ("y", "y@GRAD")]
    zv, gx, gy = fluid.Executor().run(
        main, feed={"x": np.array([2.0], "float32"), "y": np.array([3.0], "float32")},
        fetch_list=[z, "x@GRAD", "y@GRAD"], scope=fluid.Scope())
    assert zv.tolist() == [12.0] and gx.tolist() == [12.0] and gy.tolist() == [4.0]


def test_fc_without_bias_square_error_cost():
    """fc 3->1, weight [[2],[3],[4]], x=[[1,2,3]], label 19: prediction 20, loss 1,
    grad x = 2*(20-19)*w^T = [[4,6,8]], grad w = 2*x^T = [[2],[4],[6]], grad label = -2."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, 3], "float32")
        label = fluid.data("label", [None, 1], "float32")
        x.stop_gradient = label.stop_gradient = False
        w_init = fluid.initializer.NumpyArrayInitializer(np.array([[2], [3], [4]], "float32"))
        pred = L.fc(x, 1, param_attr=fluid.ParamAttr(name="w", initializer=w_init),
                    bias_attr=False)
        loss = L.mean(L.square_error_cost(pred, label))
        pg = append_backward(loss, parameter_list=["w", x, label])
    assert [g.name for _, g in pg] == ["w@GRAD", "x@GRAD", "label@GRAD"]
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    lv, gw, gx, gl = exe.run(
        main, feed={"x": np.array([[1, 2, 3]], "float32"),
                    "label": np.array([[19]], "float32")},
        fetch_list=[loss] + [g for _, g in pg], scope=scope)
    np.testing.assert_allclose(lv, [1.0])
    np.testing.assert_allclose(gx, [[4, 6, 8]])
    np.testing.assert_allclose(gw, [[2], [4], [6]])
    np.testing.assert_allclose(gl, [[-2]])


def test_fc_zero_init_softmax_with_cross_entropy():
    """fc 3->2 with zero weight and bias, x=[[0.2,0.5,0.2]], label 0: softmax = [0.5, 0.5],
    loss ln 2, dlogits = [-0.5, 0.5], weight grad x^T dlogits, bias grad [-0.5, 0.5]."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, 3], "float32")
        label = fluid.data("label", [None, 1], "int64")
        zero = fluid.initializer.Constant(0.0)
        logits = L.fc(x, 2, param_attr=fluid.ParamAttr(name="w", initializer=zero),
                      bias_attr=fluid.ParamAttr(name="b", initializer=zero))
        loss = L.mean(L.softmax_with_cross_entropy(logits, label))
        pg = append_backward(loss)
    assert [(p.name, g.name) for p, g in pg] == [("w", "w@GRAD"), ("b", "b@GRAD")]
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    lv, gw, gb = exe.run(
        main, feed={"x": np.array([[0.2, 0.5, 0.2]], "float32"),
                    "label": np.array([[0]], "int64")},
        fetch_list=[loss, "w@GRAD", "b@GRAD"], scope=scope)
    np.testing.assert_allclose(lv, [math.log(2)], rtol=1e-6)
    np.testing.assert_allclose(gw, [[-0.1, 0.1], [-0.25, 0.25], [-0.1, 0.1]], rtol=1e-6)
    np.testing.assert_allclose(gb, [-0.5, 0.5], rtol=1e-6)
