"""OpTest cases for fluidlite/ops/index_extra.py (where_index, scatter, gather_nd,
scatter_nd_add, multiplex, index_select, index_sample, masked_select, argsort, unique,
unique_with_counts, shard_index) and fluidlite/ops/hash.py."""
import numpy as np
import pytest

from fluidlite.testing import OpTest, check_double_grad
from tests.ops.optest_helpers import expect_error


def run_op(op_type, inputs, attrs, outputs, check_grad=(), grad_out=None, max_rel=0.005,
           weighted=True):
    """Check inference, output and (optionally) the numeric gradient of one op; ``weighted``
    uses a non-uniform upstream gradient (needs static output shapes)."""
    t = OpTest()
    t.op_type, t.inputs, t.attrs, t.outputs = op_type, inputs, attrs, outputs
    t.check_infer()
    t.check_output()
    if check_grad:      # the keyword's name lets tests/dygraph/test_op_grads.py find these
        t.check_grad(list(check_grad), grad_out or next(iter(outputs)), max_relative_error=max_rel,
                     weighted=weighted)
    return t


X = OpTest.rand(5, 3)


def test_where_index():
    cond = np.array([[True, False], [False, True], [True, True]])
    run_op("where_index", {"Condition": cond}, {}, {"Out": np.argwhere(cond).astype(np.int64)})
    run_op("where_index", {"Condition": np.array([1, 0, 1], np.int32)}, {},
           {"Out": np.array([[0], [2]], np.int64)})
    run_op("where_index", {"Condition": np.zeros(3, bool)}, {},
           {"Out": np.zeros((0, 1), np.int64)})


# -- scatter ----------------------------------------------------------------------------------
def test_scatter_overwrite():
    ids = np.array([1, 4, 0], np.int64)
    up = OpTest.rand(3, 3, seed=5)
    ref = X.copy()
    ref[ids] = up
    run_op("scatter", {"X": X, "Ids": ids, "Updates": up}, {}, {"Out": ref},
           check_grad=["X", "Updates"])


def test_scatter_duplicates():
    ids = np.array([1, 1, 3], np.int32)
    up = OpTest.rand(3, 3, seed=5)
    over = X.copy()
    over[1], over[3] = up[1], up[2]            # the last update of a repeated index wins
    run_op("scatter", {"X": X, "Ids": ids, "Updates": up}, {"overwrite": True}, {"Out": over},
           check_grad=["X", "Updates"])
    add = X.copy()
    add[1], add[3] = up[0] + up[1], up[2]      # rows are zeroed, then updates add up
    run_op("scatter", {"X": X, "Ids": ids, "Updates": up}, {"overwrite": False}, {"Out": add},
           check_grad=["X", "Updates"])


def test_scatter_negative_ids_are_refused():
    # Paddle 2.6's scatter raises for a negative id; NumPy would silently write row n - 1
    up = OpTest.rand(2, 3, seed=6)
    t = OpTest()
    t.op_type, t.attrs, t.outputs = "scatter", {}, {"Out": X}
    t.inputs = {"X": X, "Ids": np.array([-1, 4], np.int64), "Updates": up}
    with pytest.raises(IndexError, match="Ids holds -1, out of range for X with 5 rows"):
        t.check_output()


def test_scatter_errors():
    up = OpTest.rand(2, 3)
    expect_error("scatter", {"X": X, "Ids": np.array([0, 1, 2], np.int64), "Updates": up}, {},
                 {"Out": X}, "Ids has 3 entries, Updates 2 rows")
    expect_error("scatter", {"X": X, "Ids": np.array([0., 1.]), "Updates": up}, {},
                 {"Out": X}, "scatter: Ids must be int32 or int64")
    t = OpTest()
    t.op_type, t.attrs, t.outputs = "scatter", {}, {"Out": X}
    t.inputs = {"X": X, "Ids": np.array([0, 7], np.int64), "Updates": up}
    with pytest.raises(IndexError, match="Ids holds 7, out of range for X with 5 rows"):
        t.check_output()


# -- gather_nd / scatter_nd_add ---------------------------------------------------------------
def test_gather_nd():
    x = OpTest.rand(3, 4, 2)
    index = np.array([[[0, 1], [2, 3]], [[1, 1], [0, 1]]], np.int64)     # repeats on purpose
    ref = x[index[..., 0], index[..., 1]]
    run_op("gather_nd", {"X": x, "Index": index}, {}, {"Out": ref}, check_grad=["X"])
    run_op("gather_nd", {"X": x, "Index": np.array([[1, 2, 0]], np.int32)}, {},
           {"Out": x[1, 2, 0].reshape(1)})


def test_scatter_nd_add():
    x = OpTest.rand(3, 4)
    index = np.array([[1], [2], [1]], np.int64)
    up = OpTest.rand(3, 4, seed=9)
    ref = x.copy()
    ref[1] += up[0] + up[2]
    ref[2] += up[1]
    run_op("scatter_nd_add", {"X": x, "Index": index, "Updates": up}, {}, {"Out": ref},
           check_grad=["X", "Updates"])
    index2 = np.array([[0, 0], [2, 3], [0, 0]], np.int32)
    up2 = OpTest.rand(3, seed=4)
    ref2 = x.copy()
    ref2[0, 0] += up2[0] + up2[2]
    ref2[2, 3] += up2[1]
    run_op("scatter_nd_add", {"X": x, "Index": index2, "Updates": up2}, {}, {"Out": ref2},
           check_grad=["X", "Updates"])


def test_scatter_nd_add_with_an_empty_index_adds_every_update_to_all_of_x():
    """fluid 1.8 (TestScatterNdAddWithEmptyIndex): Index [2, 0] names the whole of X twice."""
    x = OpTest.rand(3, 4)
    up = OpTest.rand(2, 3, 4, seed=3)
    run_op("scatter_nd_add", {"X": x, "Index": np.zeros((2, 0), np.int32), "Updates": up}, {},
           {"Out": x + up[0] + up[1]}, check_grad=["X", "Updates"])


def test_scatter_nd_add_bad_updates():
    expect_error("scatter_nd_add", {"X": OpTest.rand(3, 4), "Index": np.array([[1]], np.int64),
                                    "Updates": OpTest.rand(1, 5)}, {}, {"Out": X},
                 r"Updates must have shape .* = \[1, 4\], but received \[1, 5\]")


# -- multiplex / index_select / index_sample / masked_select ----------------------------------
def test_multiplex():
    a, b, c = OpTest.rand(4, 3, seed=1), OpTest.rand(4, 3, seed=2), OpTest.rand(4, 3, seed=3)
    ids = np.array([[2], [0], [1], [2]], np.int32)
    ref = np.stack([a, b, c])[ids[:, 0], np.arange(4)]
    run_op("multiplex", {"X": [("a", a), ("b", b), ("c", c)], "Ids": ids}, {}, {"Out": ref},
           check_grad=["a", "b", "c"])


def test_multiplex_bad_ids():
    a, b = OpTest.rand(4, 3, seed=1), OpTest.rand(4, 3, seed=2)
    expect_error("multiplex", {"X": [("a", a), ("b", b)], "Ids": np.array([[2]] * 4, np.int32)},
                 {}, {"Out": a}, r"Ids must lie in \[0, 2\)", when="run")


def test_index_select():
    data = np.array([[1., 2., 3., 4.], [5., 6., 7., 8.], [9., 10., 11., 12.]])
    idx = np.array([0, 1, 1], np.int32)
    run_op("index_select", {"X": data, "Index": idx}, {}, {"Out": data[[0, 1, 1]]},
           check_grad=["X"])
    run_op("index_select", {"X": data, "Index": idx}, {"dim": 1}, {"Out": data[:, [0, 1, 1]]},
           check_grad=["X"])


def test_index_sample():
    x = OpTest.rand(3, 5)
    idx = np.array([[0, 4, 4], [1, 2, 0], [3, 3, 3]], np.int64)
    run_op("index_sample", {"X": x, "Index": idx}, {},
           {"Out": np.take_along_axis(x, idx, 1)}, check_grad=["X"])


def test_index_sample_bad_index():
    x = OpTest.rand(3, 5)
    idx = np.array([[0, 4, 4], [1, 2, 0]], np.int64)
    expect_error("index_sample", {"X": x, "Index": idx}, {}, {"Out": x},
                 "same first dim, but received 3 and 2")


def test_masked_select():
    x = OpTest.rand(4, 4)
    mask = np.array([[True], [True], [False], [True]])               # broadcast over columns
    run_op("masked_select", {"X": x, "Mask": mask}, {},
           {"Y": x[np.broadcast_to(mask, x.shape)]}, check_grad=["X"], weighted=False)
    full = OpTest.rand(4, 4, seed=3) > 0
    run_op("masked_select", {"X": x, "Mask": full}, {}, {"Y": x[full]})


def test_masked_select_bad_mask():
    x = OpTest.rand(4, 4)
    expect_error("masked_select", {"X": x, "Mask": np.ones((3,), bool)}, {}, {"Y": x},
                 r"Mask of shape \[3\] cannot be broadcast to X of shape \[4, 4\]")


# -- argsort / unique -------------------------------------------------------------------------
def test_argsort():
    x = OpTest.rand(3, 5)
    idx = np.argsort(x, axis=1)
    run_op("argsort", {"X": x}, {"axis": 1},
           {"Out": np.sort(x, 1), "Indices": idx.astype(np.int64)}, check_grad=["X"],
           grad_out="Out")
    idx0 = np.argsort(-x, axis=0)
    run_op("argsort", {"X": x}, {"axis": 0, "descending": True},
           {"Out": np.take_along_axis(x, idx0, 0), "Indices": idx0}, check_grad=["X"],
           grad_out="Out")


def test_argsort_ties_keep_input_order():
    x = np.array([3, 1, 3, 1, 2], np.int64)
    run_op("argsort", {"X": x}, {}, {"Out": np.array([1, 1, 2, 3, 3]),
                                     "Indices": np.array([1, 3, 4, 0, 2])})
    run_op("argsort", {"X": x}, {"descending": True},
           {"Out": np.array([3, 3, 2, 1, 1]), "Indices": np.array([0, 2, 4, 1, 3])})


def test_unique_docs_example():
    x = np.array([2, 3, 3, 1, 5, 3], np.int32)
    run_op("unique", {"X": x}, {}, {"Out": np.array([2, 3, 1, 5], np.int32),
                                    "Index": np.array([0, 1, 1, 2, 3, 1], np.int32)})
    run_op("unique_with_counts", {"X": x}, {"dtype": "int64"},
           {"Out": np.array([2, 3, 1, 5], np.int32),
            "Index": np.array([0, 1, 1, 2, 3, 1], np.int64),
            "Count": np.array([1, 3, 1, 1], np.int64)})
    f = np.array([0.5, -1.0, 0.5, 2.0])
    run_op("unique", {"X": f}, {"dtype": "int64"},
           {"Out": np.array([0.5, -1.0, 2.0]), "Index": np.array([0, 1, 0, 2])})


def test_unique_errors():
    expect_error("unique", {"X": np.zeros((2, 2))}, {}, {"Out": np.zeros(1)},
                 r"unique: X must be 1-D, but its shape is \[2, 2\]")
    expect_error("unique", {"X": np.zeros(3)}, {"dtype": "float32"}, {"Out": np.zeros(1)},
                 "unique: dtype must be int32 or int64")


# -- shard_index ------------------------------------------------------------------------------
def test_shard_index():
    x = np.array([[16], [1], [9], [19]], np.int64)
    # index_num 20, 2 shards -> shard size 10
    run_op("shard_index", {"X": x}, {"index_num": 20, "nshards": 2, "shard_id": 0},
           {"Out": np.array([[-1], [1], [9], [-1]], np.int64)})
    run_op("shard_index", {"X": x}, {"index_num": 20, "nshards": 2, "shard_id": 1,
                                     "ignore_value": -5},
           {"Out": np.array([[6], [-5], [-5], [9]], np.int64)})
    run_op("shard_index", {"X": x.astype(np.int32)}, {"index_num": 20, "nshards": 3,
                                                      "shard_id": 2},
           {"Out": np.array([[2], [-1], [-1], [5]], np.int32)})


def test_shard_index_errors():
    x = np.array([[3]], np.int64)
    expect_error("shard_index", {"X": x}, {"index_num": 20, "nshards": 2, "shard_id": 2},
                 {"Out": x}, r"shard_id must be in \[0, nshards\) = \[0, 2\), but received 2")
    expect_error("shard_index", {"X": x}, {"index_num": 0, "nshards": 2, "shard_id": 0},
                 {"Out": x}, "index_num must be > 0")
    expect_error("shard_index", {"X": np.array([[25]], np.int64)},
                 {"index_num": 20, "nshards": 2, "shard_id": 0}, {"Out": x},
                 r"must lie in \[0, index_num\)", when="run")


def test_gather_like_double_grad():
    """gather_nd / index_select / index_sample grads scatter Out@GRAD (linear): second order."""
    x = OpTest.rand(3, 4)
    check_double_grad("gather_nd", {"X": x, "Index": np.array([[0, 1], [2, 3], [0, 1]])},
                      "Out")
    check_double_grad("index_select", {"X": x, "Index": np.array([2, 0, 2], np.int32)}, "Out",
                      {"dim": 0})
    check_double_grad("index_sample", {"X": x, "Index": np.array([[0, 3], [1, 1], [2, 0]])},
                      "Out")


def test_scatter_like_double_grad():
    """scatter / scatter_nd_add / multiplex / masked_select are linear in their float inputs:
    their grad ops' own gradients are checked at second order."""
    up = OpTest.rand(3, 3, seed=5)
    for overwrite in (True, False):
        check_double_grad("scatter", {"X": X, "Ids": np.array([1, 1, 3]), "Updates": up},
                          "Out", {"overwrite": overwrite})
    check_double_grad("scatter_nd_add", {"X": OpTest.rand(3, 4), "Index": np.array([[1], [2]]),
                                         "Updates": OpTest.rand(2, 4, seed=2)}, "Out")
    check_double_grad("scatter_nd_add", {"X": OpTest.rand(3, 4), "Index": np.array([[1], [2]]),
                                         "Updates": OpTest.rand(2, 4, seed=2)}, "Out",
                      inputs_to_check=["Updates"])
    a, b = OpTest.rand(4, 3, seed=1), OpTest.rand(4, 3, seed=2)
    check_double_grad("multiplex", {"X": [("a", a), ("b", b)],
                                    "Ids": np.array([[1], [0], [1], [1]], np.int32)}, "Out",
                      inputs_to_check=["a", "b"])
    check_double_grad("multiplex", {"X": [("a", a), ("b", b)],
                                    "Ids": np.array([[1], [0], [1], [1]], np.int32)}, "Out",
                      inputs_to_check=["b"])
    mask = np.array([[True], [False], [True], [True]])
    t = OpTest()
    t.op_type, t.inputs, t.attrs = "masked_select", {"X": a, "Mask": mask}, {}
    check_double_grad_static_y(t)


def check_double_grad_static_y(t):
    """masked_select's Y has a run-time length: give it its static shape, then check."""
    from fluidlite.core.registry import VarSpec
    build = t._build

    def _build(dtype=None, requires_grad=()):
        prog, feed, out_vars, in_vars = build(dtype, requires_grad)
        out_vars["Y"]._set_spec(VarSpec((9,), out_vars["Y"].dtype))
        return prog, feed, out_vars, in_vars
    t._build = _build
    t.check_double_grad(["X"], "Y")


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_argsort_double_grad(axis):
    x = OpTest.rand(3, 4, 2, seed=8)
    idx = np.argsort(x, axis=axis, kind="stable")
    t = OpTest()
    t.op_type, t.inputs, t.attrs = "argsort", {"X": x}, {"axis": axis}
    t.outputs = {"Out": np.take_along_axis(x, idx, axis), "Indices": idx}
    t.check_double_grad(["X"], "Out")
