"""OpTest cases for fluidlite/ops/index.py (slice, strided_slice, gather, expand, one_hot)."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core.registry import get_op_def
from fluidlite.testing import OpTest


def run_op(op_type, inputs, attrs, outputs, grad=(), grad_out=None, max_rel=0.005,
           no_check=()):
    t = OpTest()
    t.op_type, t.inputs, t.attrs, t.outputs = op_type, inputs, attrs, outputs
    t.check_infer()
    t.check_output(no_check_set=no_check)
    if grad:
        t.check_grad(list(grad), grad_out or next(iter(outputs)), max_relative_error=max_rel)
    return t


X = OpTest.rand(2, 3, 4)


# -- slice / strided_slice ------------------------------------------------------------------
def test_slice():
    run_op("slice", {"Input": X}, {"axes": [1, 2], "starts": [-2, 1], "ends": [10, -1]},
           {"Out": X[:, -2:, 1:-1]}, grad=["Input"])


def test_slice_decrease_axis_and_last_index():
    run_op("slice", {"Input": X}, {"axes": [0, 2], "starts": [-1, 0], "ends": [0, 2],
                                   "decrease_axis": [0]},
           {"Out": X[-1, :, 0:2]}, grad=["Input"])
    run_op("slice", {"Input": X}, {"axes": [0, 1, 2], "starts": [1, 2, 3], "ends": [2, 3, 4],
                                   "decrease_axis": [0, 1, 2]},
           {"Out": X[1, 2, 3].reshape(1)})


def test_slice_tensor_starts():
    run_op("slice", {"Input": X, "StartsTensor": np.array([1], np.int64)},
           {"axes": [2], "starts": [0], "ends": [3]}, {"Out": X[:, :, 1:3]})


def test_slice_errors():
    main = fluid.Program()
    with fluid.program_guard(main):
        x = fluid.layers.data("x", [3, 4])
        with pytest.raises(ValueError, match="slice.*out of range"):
            fluid.layers.slice(x, axes=[3], starts=[0], ends=[1])
        with pytest.raises(ValueError, match="end > start"):
            fluid.layers.slice(x, axes=[1], starts=[3], ends=[2])


def test_strided_slice():
    run_op("strided_slice", {"Input": X},
           {"axes": [1, 2], "starts": [-1, 0], "ends": [-4, 4], "strides": [-1, 2]},
           {"Out": X[:, ::-1, 0:4:2]}, grad=["Input"])
    run_op("strided_slice", {"Input": X},
           {"axes": [0, 2], "starts": [1, 3], "ends": [2, 0], "strides": [1, -2],
            "decrease_axis": [0]},
           {"Out": X[1, :, 3:0:-2]}, grad=["Input"])


# -- gather / expand / one_hot ---------------------------------------------------------------
def test_gather():
    x = OpTest.rand(4, 3)
    idx = np.array([2, 0], np.int64)
    run_op("gather", {"X": x, "Index": idx}, {}, {"Out": x[idx]}, grad=["X"])
    run_op("gather", {"X": x, "Index": idx.reshape(2, 1).astype(np.int32)}, {}, {"Out": x[idx]})


def test_gather_accumulates_repeated_index_when_not_overwrite():
    idx = np.array([1, 1, 0], np.int64)
    run_op("gather", {"X": X, "Index": idx}, {"overwrite": False}, {"Out": X[idx]}, grad=["X"])


def test_expand():
    x = OpTest.rand(2, 1, 3)
    run_op("expand", {"X": x}, {"expand_times": [2, 3, 1]}, {"Out": np.tile(x, (2, 3, 1))},
           grad=["X"])


def test_one_hot():
    x = np.array([[1], [0], [3]], np.int64)
    run_op("one_hot", {"X": x}, {"depth": 4}, {"Out": np.eye(4, dtype=np.float32)[[1, 0, 3]]})
    x = np.array([[1], [5]], np.int64)
    run_op("one_hot", {"X": x}, {"depth": 4, "allow_out_of_range": True},
           {"Out": np.array([[0, 1, 0, 0], [0, 0, 0, 0]], np.float32)})
    assert get_op_def("one_hot").no_grad


def test_one_hot_v2_has_no_trailing_one():
    x = np.array([[1, 0], [3, 2]], dtype=np.int64)
    run_op("one_hot_v2", {"X": x}, {"depth": 4}, {"Out": np.eye(4, dtype=np.float32)[x]})
    x1 = np.array([[1], [3]], dtype=np.int64)          # a trailing 1 is kept: [2, 1, 4]
    run_op("one_hot_v2", {"X": x1}, {"depth": 4}, {"Out": np.eye(4, dtype=np.float32)[x1]})
    with pytest.raises(ValueError, match="out of range"):
        run_op("one_hot_v2", {"X": np.array([4], np.int64)}, {"depth": 4},
               {"Out": np.zeros((1, 4), np.float32)})


def test_one_hot_out_of_range_error():
    t = OpTest()
    t.op_type, t.inputs, t.attrs = "one_hot", {"X": np.array([[7]], np.int64)}, {"depth": 4}
    t.outputs = {"Out": np.zeros((1, 4), np.float32)}
    with pytest.raises(ValueError, match="one_hot.*7.*allow_out_of_range"):
        t.check_output()


def test_gather_refuses_indices_outside_the_rows_instead_of_wrapping():
    """fluid reads rows by number: -1 is an error naming the index, not the last row."""
    import fluidlite as fluid
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [4, 2], "float32")
        i = fluid.data("i", [2], "int64")
        out = fluid.layers.gather(x, i)
    exe = fluid.Executor()
    feed = {"x": np.arange(8, dtype="float32").reshape(4, 2)}
    got, = exe.run(main, feed=dict(feed, i=np.array([3, 0])), fetch_list=[out])
    np.testing.assert_array_equal(got, [[6, 7], [0, 1]])
    for bad in (-1, 4):
        with pytest.raises(IndexError, match=rf"gather: Index holds {bad}, outside \[0, 4\)"):
            exe.run(main, feed=dict(feed, i=np.array([0, bad])), fetch_list=[out])
