"""OpTest cases for fluidlite/ops/tensor.py (creation, indexing, reshaping, joining ops)."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import fluidlite as fluid
from fluidlite.core.registry import VarSpec, get_op_def
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


def xshape(x):
    return np.empty((0,) + x.shape, dtype=x.dtype)


X = OpTest.rand(2, 3, 4)


# -- existing creation / plumbing ops --------------------------------------------------------
def test_fill_constant():
    run_op("fill_constant", {}, {"shape": [2, 3], "value": 1.5, "dtype": "float32"},
           {"Out": np.full((2, 3), 1.5, np.float32)})
    run_op("fill_constant", {"ShapeTensor": np.array([3, 1], np.int32)},
           {"value": 2.0, "dtype": "int64"}, {"Out": np.full((3, 1), 2, np.int64)})


def test_assign_value_and_fill_like():
    run_op("assign_value", {}, {"shape": [2, 2], "dtype": "float32", "values": [1., 2., 3., 4.]},
           {"Out": np.array([[1, 2], [3, 4]], np.float32)})
    run_op("fill_any_like", {"X": X}, {"value": 1.0}, {"Out": np.ones_like(X)})
    run_op("fill_zeros_like", {"X": X}, {}, {"Out": np.zeros_like(X)})


def test_assign_and_sum():
    run_op("assign", {"X": X}, {}, {"Out": X}, grad=["X"])
    a, b = OpTest.rand(3, 4, seed=1), OpTest.rand(3, 4, seed=2)
    run_op("sum", {"X": [("a", a), ("b", b)]}, {}, {"Out": a + b}, grad=["a", "b"])


def test_feed_fetch_are_markers():
    assert get_op_def("feed").no_grad and get_op_def("fetch").no_grad
    with pytest.raises(RuntimeError):
        get_op_def("feed").forward(X)


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


# -- reshape-like ops -----------------------------------------------------------------------
def test_reshape2():
    run_op("reshape2", {"X": X}, {"shape": [0, -1]},
           {"Out": X.reshape(2, 12), "XShape": xshape(X)}, grad=["X"], grad_out="Out",
           no_check=["XShape"])
    run_op("reshape2", {"X": X, "Shape": np.array([4, 6], np.int32)}, {"shape": [4, 6]},
           {"Out": X.reshape(4, 6)}, grad=["X"])


def test_reshape2_errors():
    with fluid.program_guard(fluid.Program()):
        x = fluid.layers.data("x", [3, 4])
        with pytest.raises(ValueError, match="reshape2.*cannot reshape"):
            fluid.layers.reshape(x, [0, 5])        # 12 elements per row cannot become 5
        with pytest.raises(ValueError, match="reshape2.*not divisible"):
            fluid.layers.reshape(x, [0, 5, -1])
        with pytest.raises(ValueError, match="only one dimension"):
            fluid.layers.reshape(x, [-1, -1])
        with pytest.raises(ValueError, match=r"reshape2.*\[2, 5\]"):
            fluid.layers.reshape(fluid.layers.data("y", [3, 4], append_batch_size=False), [2, 5])


def test_transpose2():
    run_op("transpose2", {"X": X}, {"axis": [2, 0, 1]},
           {"Out": X.transpose(2, 0, 1), "XShape": xshape(X)}, grad=["X"], grad_out="Out",
           no_check=["XShape"])
    with fluid.program_guard(fluid.Program()):
        x = fluid.layers.data("x", [3, 4])
        with pytest.raises(ValueError, match="transpose2.*not a permutation"):
            fluid.layers.transpose(x, [0, 0, 1])


def test_squeeze2_unsqueeze2():
    x = OpTest.rand(2, 1, 3, 1)
    run_op("squeeze2", {"X": x}, {"axes": [1, -1]}, {"Out": x.reshape(2, 3)}, grad=["X"])
    run_op("squeeze2", {"X": x}, {"axes": []}, {"Out": x.reshape(2, 3)})
    run_op("squeeze2", {"X": x}, {"axes": [0]}, {"Out": x})     # size-2 dim is kept (fluid)
    run_op("unsqueeze2", {"X": X}, {"axes": [0, -1]}, {"Out": X.reshape(1, 2, 3, 4, 1)},
           grad=["X"])
    run_op("unsqueeze2", {"X": X}, {"axes": [1, 1]}, {"Out": X.reshape(2, 1, 1, 3, 4)})


def test_flatten2():
    run_op("flatten2", {"X": X}, {"axis": 2}, {"Out": X.reshape(6, 4)}, grad=["X"])
    run_op("flatten2", {"X": X}, {"axis": 0}, {"Out": X.reshape(1, 24)})


# -- concat / split / stack -------------------------------------------------------------------
def test_concat():
    a, b = OpTest.rand(2, 3, seed=1), OpTest.rand(2, 5, seed=2)
    run_op("concat", {"X": [("a", a), ("b", b)]}, {"axis": 1},
           {"Out": np.concatenate([a, b], 1)}, grad=["a", "b"])
    run_op("concat", {"X": [("a", a), ("b", a)]}, {"axis": -2},
           {"Out": np.concatenate([a, a], 0)})


def test_concat_shape_mismatch():
    with fluid.program_guard(fluid.Program()):
        a = fluid.layers.data("a", [2, 3])
        b = fluid.layers.data("b", [4, 3])
        with pytest.raises(ValueError, match=r"concat.*\[-1, 2, 3\].*\[-1, 4, 3\]"):
            fluid.layers.concat([a, b], axis=2)
        with pytest.raises(ValueError, match="concat.*out of range"):
            fluid.layers.concat([a, b], axis=3)


def test_split():
    x = OpTest.rand(3, 6)
    parts = np.split(x, [1, 4], axis=1)
    run_op("split", {"X": x}, {"sections": [1, -1, 2], "axis": 1},
           {"Out": [("o0", parts[0]), ("o1", parts[1]), ("o2", parts[2])]},
           grad=["X"], grad_out="Out")
    parts = np.split(x, 3, axis=1)
    run_op("split", {"X": x}, {"num": 3, "axis": -1},
           {"Out": [("o0", parts[0]), ("o1", parts[1]), ("o2", parts[2])]})


def test_stack():
    a, b = OpTest.rand(2, 3, seed=1), OpTest.rand(2, 3, seed=2)
    run_op("stack", {"X": [("a", a), ("b", b)]}, {"axis": 1}, {"Y": np.stack([a, b], 1)},
           grad=["a", "b"])
    run_op("stack", {"X": [("a", a), ("b", b)]}, {"axis": -1}, {"Y": np.stack([a, b], -1)})


# -- gather / expand / shape / one_hot --------------------------------------------------------
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


def test_shape():
    run_op("shape", {"Input": X}, {}, {"Out": np.array([2, 3, 4], np.int32)})
    assert get_op_def("shape").no_grad


def test_one_hot():
    x = np.array([[1], [0], [3]], np.int64)
    run_op("one_hot", {"X": x}, {"depth": 4}, {"Out": np.eye(4, dtype=np.float32)[[1, 0, 3]]})
    x = np.array([[1], [5]], np.int64)
    run_op("one_hot", {"X": x}, {"depth": 4, "allow_out_of_range": True},
           {"Out": np.array([[0, 1, 0, 0], [0, 0, 0, 0]], np.float32)})
    assert get_op_def("one_hot").no_grad


def test_one_hot_out_of_range_error():
    t = OpTest()
    t.op_type, t.inputs, t.attrs = "one_hot", {"X": np.array([[7]], np.int64)}, {"depth": 4}
    t.outputs = {"Out": np.zeros((1, 4), np.float32)}
    with pytest.raises(ValueError, match="one_hot.*7.*allow_out_of_range"):
        t.check_output()


# -- hypothesis: shape inference agrees with numpy ---------------------------------------------
dims = st.lists(st.integers(1, 4), min_size=1, max_size=4)


def infer(op_type, specs, **attrs):
    opdef = get_op_def(op_type)
    return opdef.infer(*specs, **attrs)


@settings(max_examples=60, deadline=None)
@given(shape=dims, data=st.data())
def test_reshape_infer_matches_numpy(shape, data):
    x = np.zeros(shape)
    target = list(data.draw(st.permutations(shape)))
    k = data.draw(st.integers(0, len(target) - 1))
    mode = data.draw(st.sampled_from(["plain", "minus1", "zero"]))
    if mode == "minus1":
        target[k] = -1
    elif mode == "zero":
        same = [i for i, d in enumerate(target) if d == shape[i]]
        if same:
            target[same[k % len(same)]] = 0
    expect = x.reshape([shape[i] if d == 0 else d for i, d in enumerate(target)]).shape
    got = infer("reshape2", [VarSpec(shape, "float32"), None, []], shape=target)["Out"]
    assert got.shape == expect


@settings(max_examples=60, deadline=None)
@given(shape=dims, data=st.data())
def test_transpose_infer_matches_numpy(shape, data):
    perm = data.draw(st.permutations(range(len(shape))))
    got = infer("transpose2", [VarSpec(shape, "float32")], axis=list(perm))["Out"]
    assert got.shape == np.zeros(shape).transpose(perm).shape


@settings(max_examples=60, deadline=None)
@given(shape=dims, data=st.data())
def test_concat_infer_matches_numpy(shape, data):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    n = data.draw(st.integers(1, 3))
    shapes = []
    for _ in range(n):
        s = list(shape)
        s[axis] = data.draw(st.integers(1, 4))
        shapes.append(s)
    got = infer("concat", [[VarSpec(s, "float32") for s in shapes]], axis=axis)["Out"]
    assert got.shape == np.concatenate([np.zeros(s) for s in shapes], axis=axis).shape
