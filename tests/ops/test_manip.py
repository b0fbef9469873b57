"""OpTest cases for fluidlite/ops/manip.py (reshape-like ops, concat / split / stack)."""
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
