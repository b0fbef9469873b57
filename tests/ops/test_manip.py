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


def test_reshape2_takes_the_shape_tensor_list_over_the_shape_tensor():
    # fluid 1.8's ReshapeKernel and Paddle 2.6 (checked: Shape [2, 3] with ShapeTensor [3, 2]
    # gives (3, 2)) read the ShapeTensor list first; the declared shape has its rank
    from fluidlite.core import rewrite
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [6], "float32")
        block = main.global_block()
        out = rewrite.tmp(block, "reshape2", "float32")
        rewrite.append(block, "reshape2",
                       {"X": [x], "Shape": [fluid.layers.assign(np.array([2, 3], "int32"))],
                        "ShapeTensor": [fluid.layers.fill_constant([1], "int32", 3),
                                        fluid.layers.fill_constant([1], "int32", 2)]},
                       {"Out": [out], "XShape": [rewrite.tmp(block, "xshape", "float32")]},
                       {"shape": [-1]})
    assert len(out.shape) == 2          # the attr [-1] has another rank: not taken
    (got,) = fluid.Executor(fluid.CPUPlace()).run(
        main, feed={"x": np.arange(6, dtype="float32")}, fetch_list=[out])
    assert got.shape == (3, 2)
    np.testing.assert_array_equal(got.reshape(-1), np.arange(6))


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


def _concat_lod(axis, lods, shapes):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        xs = [fluid.data(f"x{i}", [-1] + list(s[1:]), "float64", lod_level=len(l))
              for i, (s, l) in enumerate(zip(shapes, lods))]
        out = fluid.layers.concat(xs, axis=axis)
    feed = {f"x{i}": fluid.create_lod_tensor(np.ones(s), l, fluid.CPUPlace()) if l
            else np.ones(s) for i, (s, l) in enumerate(zip(shapes, lods))}
    got = fluid.Executor(fluid.CPUPlace()).run(main, feed=feed, fetch_list=[out],
                                                return_numpy=False)[0]
    return np.array(got).shape, got.recursive_sequence_lengths()


def test_concat_on_axis_0_joins_the_inputs_lods_as_fluid():
    # fluid's ConcatKernel: every level is X[0]'s sequences followed by the others'
    assert _concat_lod(0, [[[2, 3]], [[1, 4]], [[5]]], [(5, 2), (5, 2), (5, 2)]) == \
        ((15, 2), [[2, 3, 1, 4, 5]])
    assert _concat_lod(0, [[[1, 1], [2, 3]], [[2], [1, 1]]], [(5, 2), (2, 2)]) == \
        ((7, 2), [[1, 1, 2], [2, 3, 1, 1]])
    # another axis, or an input without LoD: Out shares X[0]'s LoD (fluid's ShareLoD)
    assert _concat_lod(1, [[[2, 3]], [[4, 1]]], [(5, 2), (5, 3)]) == ((5, 5), [[2, 3]])
    assert _concat_lod(0, [[[2, 3]], []], [(5, 2), (5, 2)])[1] == []


@pytest.mark.parametrize("op_type,attrs,shape,out", [
    ("squeeze", {"axes": [0, 2]}, (1, 3, 1, 2), (3, 2)),
    ("squeeze", {"axes": []}, (1, 3, 1, 2), (3, 2)),
    ("unsqueeze", {"axes": [0, 2]}, (3, 2), (1, 3, 1, 2)),
    ("flatten", {"axis": 2}, (2, 3, 4), (6, 4)),
    ("flatten", {"axis": 0}, (2, 3), (1, 6))])
def test_fluid18_v1_reshape_ops_have_no_xshape(op_type, attrs, shape, out):
    # fluid 1.8 keeps squeeze / unsqueeze / flatten beside their *2 versions: same Out, no
    # XShape output, dX = reshape(dOut, X.shape)
    x = OpTest.rand(*shape)
    assert [s.name for s in get_op_def(op_type).out_slots] == ["Out"]
    run_op(op_type, {"X": x}, attrs, {"Out": x.reshape(out)}, grad=["X"])


@pytest.mark.parametrize("start,length,cols", [(1, 2, slice(1, 3)), (-2, -1, slice(3, 5)),
                                               (0, -1, slice(0, 5))])
def test_partial_concat_and_partial_sum(start, length, cols):
    # fluid 1.8: the column window [start, start + length) of every 2-D input, joined along
    # axis 1 (partial_concat) or added up (partial_sum)
    a, b = OpTest.rand(3, 5), OpTest.rand(3, 5, seed=1)
    attrs = {"start_index": start, "length": length}
    inputs = {"X": [("a", a), ("b", b)]}
    run_op("partial_concat", inputs, attrs,
           {"Out": np.concatenate([a[:, cols], b[:, cols]], axis=1)}, grad=["a", "b"])
    run_op("partial_sum", inputs, attrs, {"Out": a[:, cols] + b[:, cols]}, grad=["a", "b"])


def test_partial_concat_refuses_a_window_outside_the_columns():
    with pytest.raises(ValueError, match="start_index 5 is out of range"):
        get_op_def("partial_concat").forward([np.ones((2, 5))], start_index=5)
    with pytest.raises(ValueError, match="exceeds the 5 columns"):
        get_op_def("partial_sum").forward([np.ones((2, 5))], start_index=3, length=4)
