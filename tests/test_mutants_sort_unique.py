"""Mutation-round tests for fluidlite/ops/sort_unique.py (argsort, unique, unique_with_counts).

References: Paddle 2.6's ``paddle.unique`` (the sorted form, ``is_sorted=True``, with
``return_index / return_inverse / return_counts`` and ``axis``) and fluid 1.8's ``unique`` /
``unique_with_counts`` ops (first-appearance order) -- their outputs on the inputs below were
produced by Paddle 2.6.2 and are spelled out; argsort against NumPy's stable sort and its
gradients with the OpTest helpers (float64).
"""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core.dtypes import VarType
from fluidlite.core.registry import get_op_def

X2 = np.array([[2, 1, 2], [0, 1, 0], [2, 1, 2], [0, 1, 0], [3, 3, 3]], "int64")
Y = np.array([5.0, -1.0, 5.0, 2.0, -1.0, 7.0], "float32")

# paddle.unique(X2, return_index=True, return_inverse=True, return_counts=True, axis=..,
# dtype="int32") in Paddle 2.6.2: (out, indices, inverse, counts)
PADDLE_SORTED = {
    None: ([0, 1, 2, 3], [3, 1, 0, 12], [2, 1, 2, 0, 1, 0, 2, 1, 2, 0, 1, 0, 3, 3, 3],
           [4, 4, 4, 3]),
    0: ([[0, 1, 0], [2, 1, 2], [3, 3, 3]], [1, 0, 4], [1, 0, 1, 0, 2], [2, 2, 1]),
    1: ([[1, 2], [1, 0], [1, 2], [1, 0], [3, 3]], [1, 0], [1, 0, 1], [1, 2]),
    -1: ([[1, 2], [1, 0], [1, 2], [1, 0], [3, 3]], [1, 0], [1, 0, 1], [1, 2]),
}


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("as_list", [True, False])
def test_sorted_unique_matches_paddle(axis, as_list):
    if axis is None and not as_list:
        pytest.skip("axis None is the empty list")
    attr = ([] if axis is None else [axis]) if as_list else axis
    got = get_op_def("unique").forward(X2, dtype=VarType.INT32, is_sorted=True, axis=attr)
    out, indices, inverse, counts = PADDLE_SORTED[axis]
    np.testing.assert_array_equal(got["Out"], out)
    np.testing.assert_array_equal(got["Indices"], indices)
    np.testing.assert_array_equal(got["Index"], inverse)
    np.testing.assert_array_equal(got["Counts"], counts)
    assert got["Out"].dtype == np.int64
    assert got["Index"].dtype == got["Indices"].dtype == got["Counts"].dtype == np.int32


def test_sorted_unique_of_floats_in_int64_matches_paddle():
    got = get_op_def("unique").forward(Y, dtype=VarType.INT64, is_sorted=True, axis=[])
    np.testing.assert_array_equal(got["Out"], [-1.0, 2.0, 5.0, 7.0])
    np.testing.assert_array_equal(got["Indices"], [1, 3, 0, 5])
    np.testing.assert_array_equal(got["Index"], [2, 0, 2, 1, 0, 3])
    np.testing.assert_array_equal(got["Counts"], [2, 1, 2, 1])
    assert got["Out"].dtype == np.float32
    assert got["Index"].dtype == got["Indices"].dtype == got["Counts"].dtype == np.int64


def test_first_appearance_unique_matches_fluid():
    # fluid's unique / unique_with_counts (Paddle 2.6.2 ran them): values in order of first
    # appearance; Indices (declared by a program) = the first position of each
    got = get_op_def("unique").forward(Y, dtype=VarType.INT64)
    np.testing.assert_array_equal(got["Out"], [5.0, -1.0, 2.0, 7.0])
    np.testing.assert_array_equal(got["Index"], [0, 1, 0, 2, 1, 3])
    np.testing.assert_array_equal(got["Indices"], [0, 1, 3, 5])
    np.testing.assert_array_equal(got["Counts"], [2, 2, 1, 1])
    assert got["Index"].dtype == got["Indices"].dtype == got["Counts"].dtype == np.int64
    got = get_op_def("unique_with_counts").forward(Y, dtype=VarType.INT32)
    np.testing.assert_array_equal(got["Count"], [2, 2, 1, 1])
    assert got["Index"].dtype == got["Count"].dtype == np.int32


def _infer(op_type, shape, xdtype="float32", **attrs):
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", shape, xdtype)
        block = main.global_block()
        slots = ("Out", "Index", "Indices", "Counts") if op_type == "unique" else \
            ("Out", "Index", "Count")
        outs = {s: block.create_var(name=f"{op_type}_{s}") for s in slots}
        block.append_op(op_type, {"X": x}, outs, attrs)
    return {s: (tuple(v.shape), v.dtype) for s, v in outs.items()}


def test_sorted_unique_inference():
    got = _infer("unique", [5, 3], xdtype="int64", is_sorted=True, axis=[1], dtype=VarType.INT32)
    assert got["Out"] == ((5, -1), VarType.INT64)
    assert got["Index"] == ((3,), VarType.INT32)
    assert got["Indices"] == got["Counts"] == ((-1,), VarType.INT32)
    got = _infer("unique", [5, 3], xdtype="float32", is_sorted=True, axis=[-2], dtype=VarType.INT64)
    assert got["Out"] == ((-1, 3), VarType.FP32) and got["Index"] == ((5,), VarType.INT64)
    got = _infer("unique", [5, 3], xdtype="float32", is_sorted=True, axis=[], dtype=VarType.INT64)
    assert got["Out"] == ((-1,), VarType.FP32) and got["Index"] == ((15,), VarType.INT64)
    assert got["Counts"] == ((-1,), VarType.INT64)


def test_first_appearance_inference():
    got = _infer("unique", [6], xdtype="float32", dtype=VarType.INT64)
    assert got["Out"] == ((-1,), VarType.FP32) and got["Index"] == ((6,), VarType.INT64)
    got = _infer("unique_with_counts", [6], xdtype="int32", dtype=VarType.INT32)
    assert got["Out"] == ((-1,), VarType.INT32) and got["Index"] == ((6,), VarType.INT32)
    assert got["Count"] == ((-1,), VarType.INT32)


@pytest.mark.parametrize("axis", [[2], [-3], [0, 1]])
def test_sorted_unique_axis_errors(axis):
    with pytest.raises(ValueError, match=r"unique: axis must be one dim of X \(rank 2\), "
                                         rf"but received \[{', '.join(map(str, axis))}\](\n|$)"):
        _infer("unique", [5, 3], xdtype="int64", is_sorted=True, axis=axis, dtype=VarType.INT32)
    with pytest.raises(ValueError, match=r"^unique: axis must be one dim of X"):
        get_op_def("unique").forward(X2, is_sorted=True, axis=axis)


def test_dtype_and_rank_errors():
    with pytest.raises(ValueError, match=r"unique: dtype must be int32 or int64, but "
                                         r"received"):
        _infer("unique", [5, 3], xdtype="int64", is_sorted=True, axis=[], dtype=VarType.FP32)
    for op_type in ("unique", "unique_with_counts"):
        with pytest.raises(ValueError, match=rf"{op_type}: X must be 1-D, but its shape is "
                                             r"\[2, 3\]\n"):
            _infer(op_type, [2, 3], dtype=VarType.INT32)
        with pytest.raises(ValueError, match=rf"{op_type}: dtype must be int32 or int64, but "
                                             r"received"):
            _infer(op_type, [6], dtype=VarType.FP64)


ARGSORT = get_op_def("argsort")


@pytest.mark.parametrize("descending", [False, True])
def test_argsort_ties_keep_their_input_order(descending):
    rng = np.random.default_rng(0)
    x = rng.integers(0, 4, (3, 100)).astype("float32")      # long rows of ties
    got = ARGSORT.forward(x, axis=1, descending=descending)
    for r in range(3):
        order = sorted(range(100), key=lambda i: (-x[r, i] if descending else x[r, i], i))
        assert got["Indices"][r].tolist() == order
        np.testing.assert_array_equal(got["Out"][r], x[r, order])
    assert got["Indices"].dtype == np.int64 and got["Out"].dtype == np.float32


def test_argsort_bool_descending():
    x = np.array([[False, True, False, True, True]])
    got = ARGSORT.forward(x, axis=-1, descending=True)
    assert got["Indices"].tolist() == [[1, 3, 4, 0, 2]]
    assert got["Out"].tolist() == [[True, True, True, False, False]]
    got = ARGSORT.forward(x, axis=-1, descending=False)
    assert got["Indices"].tolist() == [[0, 2, 1, 3, 4]]


def test_argsort_gradient_dtype_and_axis_message():
    x = np.array([[3.0, 1.0, 2.0]], "float32")
    idx = ARGSORT.forward(x)["Indices"]
    dx = ARGSORT.backward(x, idx, np.array([[10.0, 20.0, 30.0]], "float32"))["X"]
    assert dx.dtype == np.float32 and dx.tolist() == [[30.0, 10.0, 20.0]]
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        xv = fluid.data("x", [2, 3], "float32")
        block = main.global_block()
        outs = {s: block.create_var(name="as_" + s) for s in ("Out", "Indices")}
        with pytest.raises(ValueError, match=r"argsort: "):
            block.append_op("argsort", {"X": xv}, outs, {"axis": 2})
