"""OpTest cases for fluidlite/ops/reduce.py: mean, reduce_sum/mean/max/min (+ grad_grad ops)."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import fluidlite as fluid
from fluidlite.core.registry import VarSpec, get_op_def
from fluidlite.testing import OpTest

X = OpTest.rand(2, 3, 4)


def run_op(op_type, inputs, attrs, outputs, grad=("X",), max_rel=0.005):
    t = OpTest()
    t.op_type, t.inputs, t.attrs, t.outputs = op_type, inputs, attrs, outputs
    t.check_infer()
    t.check_output()
    if grad:
        t.check_grad(list(grad), next(iter(outputs)), max_relative_error=max_rel)


def test_mean():
    run_op("mean", {"X": X}, {}, {"Out": np.array([X.mean()])})


@pytest.mark.parametrize("op_type,fn", [("reduce_sum", np.sum), ("reduce_mean", np.mean),
                                        ("reduce_max", np.max), ("reduce_min", np.min)])
def test_reduce_ops(op_type, fn):
    run_op(op_type, {"X": X}, {"dim": [1]}, {"Out": fn(X, axis=1)})
    run_op(op_type, {"X": X}, {"dim": [0, -1], "keep_dim": True},
           {"Out": fn(X, axis=(0, 2), keepdims=True)})
    run_op(op_type, {"X": X}, {"reduce_all": True}, {"Out": np.array([fn(X)])})
    run_op(op_type, {"X": X}, {"dim": [0, 1, 2]}, {"Out": np.array([fn(X)])}, grad=())
    v = OpTest.rand(5)
    run_op(op_type, {"X": v}, {"dim": [0]}, {"Out": np.array([fn(v)])}, grad=())


def test_reduce_keeps_float32():
    x = X.astype(np.float32)
    for op_type in ("reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "mean"):
        out = get_op_def(op_type).forward(x, **({} if op_type == "mean" else {"dim": [1]}))
        assert out["Out"].dtype == np.float32, op_type


def test_reduce_max_ties_share_gradient():
    x = np.array([[1.0, 3.0, 3.0]])
    d = get_op_def("reduce_max").backward(x, np.array([3.0]), np.array([2.0]), dim=[1])
    np.testing.assert_allclose(d["X"], [[0, 2, 2]])


@pytest.mark.parametrize("op_type,fn", [("reduce_max_grad_grad", np.max),
                                        ("reduce_min_grad_grad", np.min)])
def test_extremum_grad_grad_ops(op_type, fn):
    out = fn(X, axis=1)
    dd = OpTest.rand(2, 3, 4, seed=3)
    mask = X == fn(X, axis=1, keepdims=True)
    t = OpTest()
    t.op_type = op_type
    t.inputs = {"X": X, "Out": out, "DDX": dd}
    t.attrs = {"dim": [1]}
    t.outputs = {"DDOut": (dd * mask).sum(axis=1)}
    t.check_infer()
    t.check_output()
    t.check_grad(["DDX"], "DDOut")


def test_reduce_bad_dim():
    with fluid.program_guard(fluid.Program()):
        x = fluid.layers.data("x", [3, 4])
        with pytest.raises(ValueError, match="reduce_sum.*dim 3 is out of range"):
            fluid.layers.reduce_sum(x, dim=3)
        with pytest.raises(TypeError, match="reduce_mean"):
            fluid.layers.reduce_mean(x, dim="1")


@pytest.mark.parametrize("op_type", ["reduce_sum", "reduce_mean", "reduce_max", "reduce_min"])
@pytest.mark.parametrize("dim", [[0, 5], [5, 0], [-3, 1], [2]])
def test_reduce_out_of_range_dim_in_list(op_type, dim):
    """A bad entry inside a list used to be ignored when len(dim) == rank (the layer then sets
    reduce_all): it must raise at build time naming the op, the dim and the valid range."""
    bad = next(d for d in dim if not -2 <= d < 2)
    with fluid.program_guard(fluid.Program()):
        x = fluid.data("x", [-1, 4], "float32")
        with pytest.raises(ValueError, match=rf"{op_type}: dim {bad} is out of range for input "
                                             rf"of rank 2 \(valid: -2\.\.1\)"):
            getattr(fluid.layers, op_type)(x, dim=dim)
        prog = fluid.Program()
        v = prog.global_block().create_var(name="v", shape=[2, 4], dtype="float32")
        out = prog.global_block().create_var(name="o")
        with pytest.raises(ValueError, match=rf"{op_type}: dim {bad} is out of range"):
            prog.global_block().append_op(op_type, {"X": v}, {"Out": out},
                                          {"dim": dim, "reduce_all": True})


def test_reduce_layers_shapes():
    with fluid.program_guard(fluid.Program()):
        x = fluid.layers.data("x", [3, 4])
        assert fluid.layers.reduce_sum(x).shape == (1,)
        assert fluid.layers.reduce_mean(x, dim=[1, 2]).shape == (-1,)
        assert fluid.layers.reduce_max(x, dim=-1, keep_dim=True).shape == (-1, 3, 1)
        assert fluid.layers.reduce_min(x, dim=[0, 1, 2], keep_dim=True).shape == (1, 1, 1)
        op = fluid.default_main_program().global_block().ops[-1]
        assert op.attr("reduce_all") is True


@settings(max_examples=80, deadline=None)
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=4), data=st.data())
def test_reduce_infer_matches_numpy(shape, data):
    rank = len(shape)
    dims = data.draw(st.lists(st.integers(-rank, rank - 1), min_size=1, max_size=rank,
                              unique_by=lambda d: d % rank))
    keep = data.draw(st.booleans())
    spec = get_op_def("reduce_sum").infer(VarSpec(shape, "float32"), dim=dims, keep_dim=keep)
    expect = np.sum(np.zeros(shape), axis=tuple(dims), keepdims=keep).shape or (1,)
    assert spec["Out"].shape == expect
    out = get_op_def("reduce_sum").forward(np.zeros(shape, np.float32), dim=dims, keep_dim=keep)
    assert out["Out"].shape == spec["Out"].shape


@pytest.mark.parametrize("shape,dim,keep", [
    ((512, 39, 16), [1], False),       # DeepFM's field sum: whole-slice adds
    ((512, 39, 16), [-2], True),
    ((300, 3, 2, 5), [1], True),
    ((4096, 10, 8), [1], False),
    ((8, 39, 16), [1], False),         # too few rows before the axis: np.sum
])
def test_reduce_sum_over_a_middle_axis(shape, dim, keep):
    # the slice-by-slice path adds in index order as NumPy's middle-axis sum does: the same
    # bits as np.sum, and the float64 sum within float32 rounding; nan and inf propagate
    from fluidlite.ops.reduce import ReduceSum
    x = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
    x.reshape(-1)[[3, 77]] = np.nan, np.inf
    axis = dim[0] % len(shape)
    got = ReduceSum().forward(x, dim=dim, keep_dim=keep)["Out"]
    want = np.sum(x.astype(np.float64), axis=axis, keepdims=keep)
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert np.array_equal(got, np.sum(x, axis=axis, keepdims=keep), equal_nan=True)


@pytest.mark.parametrize("shape,axis,dtype,slices", [
    ((512, 39, 16), 1, np.float32, True),
    ((256, 256, 2), 1, np.float64, True),      # the bounds themselves
    ((256, 257, 2), 1, np.float32, False),     # too long an axis: a Python loop per slice
    ((256, 39, 33), 1, np.float32, False),     # enough inner elements: np.sum's loops are long
    ((255, 39, 16), 1, np.float32, False),     # too few rows before the axis
    ((512, 39, 1), 1, np.float32, False),      # one inner element: np.sum is a plain reduction
    ((512, 1, 16), 1, np.float32, False),      # nothing to add
    ((512, 39, 16), 2, np.float32, False),     # the last axis
    ((512, 39, 16), 0, np.float32, False),     # the first axis
    ((512, 39, 16), 1, np.float16, False),     # float16 sums round as NumPy chooses
])
def test_which_middle_axis_sums_go_slice_by_slice(shape, axis, dtype, slices):
    from fluidlite.ops.reduce import _slices_pay
    assert _slices_pay(np.zeros(shape, dtype), axis) is slices
