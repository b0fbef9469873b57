"""OpTest cases for fluidlite/ops/metric.py: top_k, take_along_axis_last, arg_max, arg_min,
accuracy."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core.registry import get_op_def
from fluidlite.ops.metric import topk_indices
from fluidlite.testing import OpTest

X = OpTest.rand(3, 6)


def run_op(op_type, inputs, attrs, outputs, grad=(), out=None):
    t = OpTest()
    t.op_type, t.inputs, t.attrs, t.outputs = op_type, inputs, attrs, outputs
    t.check_infer()
    t.check_output()
    if grad:
        t.check_grad(list(grad), out or next(iter(outputs)))


def test_top_k():
    idx = np.argsort(-X, axis=-1)[:, :2]
    run_op("top_k", {"X": X}, {"k": 2},
           {"Out": np.take_along_axis(X, idx, -1), "Indices": idx}, grad=["X"], out="Out")


def test_top_k_ties_and_large_rows():
    x = np.array([[1.0, 3.0, 3.0, 2.0]])
    np.testing.assert_array_equal(topk_indices(x, 2), [[1, 2]])
    big = np.random.default_rng(0).standard_normal((4, 500))
    np.testing.assert_array_equal(topk_indices(big, 5), np.argsort(-big, axis=-1)[:, :5])


def test_top_k_k_too_large():
    with fluid.program_guard(fluid.Program()):
        x = fluid.layers.data("x", [4])
        with pytest.raises(ValueError, match="top_k: k=5 exceeds"):
            fluid.layers.topk(x, 5)


def test_take_along_axis_last():
    idx = np.array([[0, 5], [2, 2], [1, 4]], np.int64)
    run_op("take_along_axis_last", {"X": X, "Index": idx}, {},
           {"Out": np.take_along_axis(X, idx, -1)}, grad=["X"])


def test_arg_max_arg_min():
    run_op("arg_max", {"X": X}, {"axis": 1}, {"Out": X.argmax(1)})
    run_op("arg_min", {"X": X}, {"axis": 0}, {"Out": X.argmin(0)})
    run_op("arg_max", {"X": X}, {"axis": -1, "keepdims": True},
           {"Out": X.argmax(1).reshape(3, 1)})
    assert get_op_def("arg_max").no_grad and get_op_def("arg_min").no_grad


def test_accuracy():
    idx = np.array([[1, 0], [2, 3], [0, 1], [4, 2]], np.int64)
    label = np.array([[0], [1], [0], [2]], np.int64)
    run_op("accuracy", {"Out": np.zeros((4, 2)), "Indices": idx, "Label": label}, {},
           {"Accuracy": np.array([0.75], np.float32), "Correct": np.array([3], np.int32),
            "Total": np.array([4], np.int32)})
    assert get_op_def("accuracy").no_grad


def test_accuracy_layer_through_program():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", [4])
        label = fluid.layers.data("label", [1], dtype="int64")
        correct = fluid.layers.create_tensor("int32")
        acc = fluid.layers.accuracy(x, label, k=1, correct=correct)
        acc2 = fluid.layers.accuracy(x, label, k=2)
        am = fluid.layers.argmax(x, axis=1)
        assert acc.shape == (1,) and am.shape == (-1,) and am.dtype == "int64"
        assert am.stop_gradient
    scores = np.array([[0.1, 0.9, 0, 0], [0.8, 0.1, 0.05, 0.05], [0.2, 0.3, 0.4, 0.1]],
                      np.float32)
    lab = np.array([[1], [1], [1]], np.int64)
    exe = fluid.Executor(fluid.CPUPlace())
    a, c, a2, m = exe.run(main, feed={"x": scores, "label": lab},
                          fetch_list=[acc, correct, acc2, am])
    np.testing.assert_allclose(a, [1 / 3], rtol=1e-6)
    np.testing.assert_array_equal(c, [1])
    np.testing.assert_allclose(a2, [1.0])
    np.testing.assert_array_equal(m, [1, 0, 2])
    with fluid.program_guard(fluid.Program()):
        x = fluid.layers.data("x", [4])
        with pytest.raises(TypeError, match="'label' in accuracy.*int64"):
            fluid.layers.accuracy(x, fluid.layers.data("l", [1]))
