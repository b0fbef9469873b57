"""Tests written from the mutation run of ``fluidlite/ops/index_extra.py`` (issue 28,
docs/mutation.md): the build-time checks of scatter, gather_nd, scatter_nd_add, multiplex,
index_select, index_sample, masked_select and shard_index with their exact messages and the
specs they declare (unknown and zero-sized dims); indices equal to the dim refused with the
op's name; inputs never written in place; gather_nd / scatter_nd_add with an empty last index
dim (fluid's CPUGatherNd copies all of X per index row); index_select refusing indices outside
the dim (fluid's index_select_op.h); second-order gradients when only one input needs a
gradient -- against NumPy indexing written here and numeric gradients."""
import numpy as np
import pytest

from fluidlite.core.dtypes import VarType
from fluidlite.core.registry import VarSpec, get_op_def
from fluidlite.testing import OpTest

F32, F64, I32, I64 = VarType.FP32, VarType.FP64, VarType.INT32, VarType.INT64


def _spec(shape, dtype=F32, lod=0):
    return VarSpec(tuple(shape), dtype, lod)


def _infer_error(op, *args, **attrs):
    with pytest.raises(ValueError) as e:
        get_op_def(op).infer(*args, **attrs)
    return str(e.value)


# -- integer index checks -----------------------------------------------------------------------
@pytest.mark.parametrize("op,args,slot", [
    ("scatter", (_spec((4, 3)), _spec((2,), F32), _spec((2, 3))), "Ids"),
    ("gather_nd", (_spec((4, 3)), _spec((2, 1), F32)), "Index"),
    ("scatter_nd_add", (_spec((4, 3)), _spec((2, 1), F64), _spec((2, 3))), "Index"),
    ("multiplex", (_spec((4, 1), F32), [_spec((4, 3)), _spec((4, 3))]), "Ids"),
    ("index_select", (_spec((4, 3)), _spec((2,), F32)), "Index"),
    ("index_sample", (_spec((4, 3)), _spec((4, 2), F32)), "Index"),
])
def test_index_inputs_must_be_integers(op, args, slot):
    dtype = args[1].dtype if op != "multiplex" else args[0].dtype
    assert _infer_error(op, *args) == f"{op}: {slot} must be int32 or int64, but received {dtype}"


# -- scatter ------------------------------------------------------------------------------------
def test_scatter_build_time_checks():
    x, up = _spec((4, 3), F64, 1), _spec((2, 3), F64)
    for ids in ((2,), (2, 1), (2, -1), (-1,)):
        out = get_op_def("scatter").infer(x, _spec(ids, I64), up)["Out"]
        assert tuple(out.shape) == (4, 3) and out.dtype == F64 and out.lod_level == 1
    for ids in ((2, 2), (2, 1, 1)):
        assert _infer_error("scatter", x, _spec(ids, I64), up) == (
            f"scatter: Ids must be 1-D (or [N, 1]), but its shape is {list(ids)}")
    for u in ((2, 4), (2, 3, 1), (2, 0)):
        assert _infer_error("scatter", x, _spec((2,), I32), _spec(u)) == (
            f"scatter: Updates must have X's shape except for the first dim, but X has [4, 3] "
            f"and Updates {list(u)}")
    assert _infer_error("scatter", _spec((4, 0)), _spec((2,), I32), _spec((2, 3))) == (
        "scatter: Updates must have X's shape except for the first dim, but X has [4, 0] and "
        "Updates [2, 3]")
    # unknown trailing dims are accepted on either side
    get_op_def("scatter").infer(_spec((4, -1)), _spec((2,), I32), _spec((2, 3)))
    get_op_def("scatter").infer(_spec((4, 3)), _spec((2,), I32), _spec((2, -1)))
    for n, m in ((2, 3), (0, 2), (2, 0)):
        assert _infer_error("scatter", x, _spec((n,), I64), _spec((m, 3))) == (
            f"scatter: Updates must have one row per index: Ids has {n} entries, Updates {m} "
            f"rows")
    get_op_def("scatter").infer(x, _spec((-1,), I64), _spec((2, 3)))
    get_op_def("scatter").infer(x, _spec((2,), I64), _spec((-1, 3)))


@pytest.mark.parametrize("overwrite", [True, False])
def test_scatter_leaves_its_inputs_alone_and_refuses_the_row_count(overwrite):
    x = np.arange(12.0).reshape(4, 3)
    before = x.copy()
    up = np.ones((2, 3))
    d = get_op_def("scatter")
    out = d.forward(x, np.array([3, 0]), up, overwrite=overwrite)["Out"]
    np.testing.assert_array_equal(x, before)
    want = before.copy()
    want[[3, 0]] = 1
    np.testing.assert_array_equal(out, want)
    for bad, ids in ((4, [0, 4]), (-1, [-1, 7])):
        with pytest.raises(IndexError) as e:
            d.forward(x, np.array(ids), up, overwrite=overwrite)
        assert str(e.value) == (f"scatter: Ids holds {bad}, out of range for X with 4 rows (ids "
                                f"must lie in [0, 4); they do not wrap around)")
    g = np.arange(12.0).reshape(4, 3)
    gb = g.copy()
    grads = d.backward(np.array([[3], [0]], np.int32), up.astype(np.float32), g,
                       overwrite=overwrite)
    np.testing.assert_array_equal(g, gb)
    assert grads["Updates"].dtype == np.float32
    np.testing.assert_array_equal(grads["Updates"], gb[[3, 0]])
    with pytest.raises(IndexError, match=r"scatter: Ids holds 4"):
        d.backward(np.array([4]), up[:1], g, overwrite=overwrite)


def _double(op, inputs, attrs, check, out="Out"):
    t = OpTest()
    t.op_type, t.inputs, t.outputs, t.attrs = op, inputs, {}, attrs
    t.check_double_grad(check, out)


@pytest.mark.parametrize("check", [["X"], ["Updates"], ["X", "Updates"]])
def test_scatter_and_scatter_nd_add_second_order_with_one_input(check):
    rng = np.random.default_rng(0)
    _double("scatter", {"X": rng.standard_normal((4, 3)), "Ids": np.array([2, 0], np.int64),
                        "Updates": rng.standard_normal((2, 3))}, {}, check)
    _double("scatter_nd_add", {"X": rng.standard_normal((3, 4)),
                               "Index": np.array([[2], [0], [2]], np.int64),
                               "Updates": rng.standard_normal((3, 4))}, {}, check)


# -- gather_nd / scatter_nd_add -------------------------------------------------------------------
def test_output_dtypes_follow_x():
    f16, b = VarType.FP16, VarType.BOOL
    specs = {"gather_nd": (_spec((4, 3), f16), _spec((2, 1), I64)),
             "index_select": (_spec((4, 3), f16), _spec((2,), I64)),
             "index_sample": (_spec((4, 3), f16), _spec((4, 2), I64)),
             "masked_select": (_spec((4, 3), f16), _spec((4, 3), b))}
    for op, args in specs.items():
        out = get_op_def(op).infer(*args)
        assert next(iter(out.values())).dtype == f16, op


def test_gather_nd_shapes_and_checks():
    d = get_op_def("gather_nd")
    for idx, want in (((5, 2), (5, 4)), ((2, 3, 1), (2, 3, 3, 4)), ((2, 3, 3), (2, 3)),
                      ((5, 0), (5, 2, 3, 4)), ((-1, 2), (-1, 4))):
        out = d.infer(_spec((2, 3, 4), F64), _spec(idx, I32))["Out"]
        assert tuple(out.shape) == want and out.dtype == F64, idx
    assert _infer_error("gather_nd", _spec((2, 3)), _spec((5, 3), I64)) == (
        "gather_nd: the last dim of Index (3) must not exceed the rank of X (2); X has shape "
        "[2, 3]")


def test_gather_nd_of_an_empty_index_copies_x_per_index_row():
    # fluid's CPUGatherNd: with Index.shape[-1] == 0 each index row selects all of X
    x = np.arange(24.0).reshape(2, 3, 4)
    idx = np.zeros((2, 0), np.int64)
    d = get_op_def("gather_nd")
    out = d.forward(x, idx)["Out"]
    assert out.shape == (2, 2, 3, 4)
    np.testing.assert_array_equal(out, np.stack([x, x]))
    assert tuple(d.infer(_spec(x.shape), _spec(idx.shape, I64))["Out"].shape) == out.shape
    g = np.random.default_rng(1).standard_normal(out.shape)
    np.testing.assert_allclose(d.backward(x, idx, g)["X"], g[0] + g[1])
    t = OpTest()
    t.op_type, t.inputs, t.outputs, t.attrs = "gather_nd", {"X": x, "Index": idx}, {}, {}
    t.check_grad(["X"], "Out")


def test_gather_nd_indices_at_the_dim_are_refused_naming_the_op():
    x = np.zeros((3, 4))
    d = get_op_def("gather_nd")
    for idx, dim, bad, n in (([[0, 1], [3, 0]], 0, 3, 3), ([[0, 4]], 1, 4, 4),
                             ([[0, 1], [5, 0], [-1, 0]], 0, 5, 3)):
        with pytest.raises(IndexError) as e:
            d.forward(x, np.array(idx))
        assert str(e.value) == (f"gather_nd: Index holds {bad}, outside [0, {n}) (dim {dim} of "
                                f"X); indices do not wrap around")
        with pytest.raises(IndexError, match=rf"^gather_nd_grad: Index holds {bad}"):
            d.backward(x, np.array(idx), np.zeros((len(idx),)))
    np.testing.assert_array_equal(d.forward(np.arange(12.0).reshape(3, 4),
                                            np.array([[2, 3], [0, 0]]))["Out"], [11.0, 0.0])


def test_scatter_nd_add_shapes_checks_and_kernels():
    d = get_op_def("scatter_nd_add")
    x = _spec((2, 3, 4), F64, 2)
    for idx, up in (((5, 2), (5, 4)), ((2, 3, 1), (2, 3, 3, 4)), ((5, 0), (5, 2, 3, 4)),
                    ((2, 5, 3), (2, 5)), ((5, 2), (-1, 4)), ((-1, 2), (5, 4))):
        out = d.infer(x, _spec(idx, I64), _spec(up, F64))["Out"]
        assert tuple(out.shape) == (2, 3, 4) and out.dtype == F64 and out.lod_level == 2
    assert _infer_error("scatter_nd_add", x, _spec((5, 4), I64), _spec((5,))) == (
        "scatter_nd_add: the last dim of Index (4) must not exceed the rank of X (3)")
    for idx, up, want in (((5, 2), (5, 3), [5, 4]), ((2, 3, 1), (2, 3, 4), [2, 3, 3, 4]),
                          ((5, 0), (5, 3, 4), [5, 2, 3, 4]), ((5, 1), (4, 3, 4), [5, 3, 4]),
                          ((5, 2), (5, 0), [5, 4])):
        assert _infer_error("scatter_nd_add", x, _spec(idx, I64), _spec(up)) == (
            f"scatter_nd_add: Updates must have shape Index.shape[:-1] + "
            f"X.shape[Index.shape[-1]:] = {want}, but received {list(up)}")
    # a zero-sized dim of X must match Updates too
    assert _infer_error("scatter_nd_add", _spec((2, 3, 0)), _spec((5, 2), I64),
                        _spec((5, 3))) == (
        "scatter_nd_add: Updates must have shape Index.shape[:-1] + X.shape[Index.shape[-1]:] "
        "= [5, 0], but received [5, 3]")
    xv = np.arange(12.0).reshape(3, 4)
    before = xv.copy()
    idx = np.array([[[2], [0]], [[2], [1]]])           # rank-3 Index, last dim 1
    up = np.ones((2, 2, 4))
    out = d.forward(xv, idx, up)["Out"]
    np.testing.assert_array_equal(xv, before)
    want = before.copy()
    for r in (2, 0, 2, 1):
        want[r] += 1
    np.testing.assert_array_equal(out, want)
    g = np.arange(12.0).reshape(3, 4)
    grads = d.backward(idx, g)
    np.testing.assert_array_equal(grads["X"], g)
    assert not np.shares_memory(grads["X"], g)
    np.testing.assert_array_equal(grads["Updates"], g[[[2, 0], [2, 1]]])
    with pytest.raises(IndexError, match=r"^scatter_nd_add: Index holds 3, outside \[0, 3\)"):
        d.forward(xv, np.array([[3]]), np.ones((1, 4)))
    with pytest.raises(IndexError, match=r"^scatter_nd_add_grad: Index holds 3"):
        d.backward(np.array([[3]]), g)
    # an empty index: every update adds to all of X; dX and dUpdates are copies of dOut
    empty = np.zeros((2, 1, 0), np.int64)
    x32 = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    u = np.ones((2, 1, 3, 4), np.float32)
    out = d.forward(x32, empty, u)["Out"]
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, x32 + 2)
    grads = d.backward(empty, g)
    np.testing.assert_array_equal(grads["X"], g)
    assert not np.shares_memory(grads["X"], g)
    np.testing.assert_array_equal(grads["Updates"], np.broadcast_to(g, (2, 1, 3, 4)))


# -- multiplex ------------------------------------------------------------------------------------
def test_multiplex_checks():
    ids = _spec((4, 1), I32)
    assert _infer_error("multiplex", ids, [_spec((4, 3))]) == (
        "multiplex: X must hold at least 2 candidate tensors, but received 1")
    for k in (1, 2):
        xs = [_spec((4, 3)), _spec((4, 3)), _spec((4, 3))]
        xs[k] = _spec((4, 2))
        assert _infer_error("multiplex", ids, xs) == (
            f"multiplex: all candidates must have the same shape, but X[0] has [4, 3] and "
            f"X[{k}] [4, 2]")
    out = get_op_def("multiplex").infer(ids, [_spec((4, 3), F64, 1), _spec((4, 3), F32)])["Out"]
    assert out.dtype == F64 and out.lod_level == 1


def test_multiplex_second_order_with_one_candidate_needing_a_gradient():
    rng = np.random.default_rng(3)
    xs = [("a", rng.standard_normal((4, 3))), ("b", rng.standard_normal((4, 3)))]
    _double("multiplex", {"Ids": np.array([[1], [0], [1], [1]], np.int32), "X": xs}, {},
            ["a", "b"])


# -- index_select / index_sample -------------------------------------------------------------------
def test_index_select_checks_default_dim_and_range():
    d = get_op_def("index_select")
    out = d.infer(_spec((4, 3), F64), _spec((6,), I64))["Out"]          # dim 0 by default
    assert tuple(out.shape) == (6, 3) and out.dtype == F64
    assert tuple(d.infer(_spec((4, 3)), _spec((6,), I64), dim=-1)["Out"].shape) == (4, 6)
    assert _infer_error("index_select", _spec((4, 3)), _spec((6, 1), I64)) == (
        "index_select: Index must be 1-D, but its shape is [6, 1]")
    assert _infer_error("index_select", _spec((4, 3)), _spec((6,), I64), dim=2) == (
        "index_select: dim 2 is out of range for input of rank 2 (valid: -2..1)")
    x = np.arange(12.0).reshape(4, 3)
    np.testing.assert_array_equal(d.forward(x, np.array([3, 1, 3]))["Out"], x[[3, 1, 3]])
    g = np.ones((3, 3), np.float32)
    dx = d.backward(x, np.array([3, 1, 3]), g)["X"]
    assert dx.dtype == np.float32
    np.testing.assert_array_equal(dx, [[0] * 3, [1] * 3, [0] * 3, [2] * 3])
    with pytest.raises(ValueError) as e:
        d.backward(x, np.array([0]), g[:1], dim=3)
    assert str(e.value) == "index_select: dim 3 is out of range for input of rank 2 (valid: -2..1)"


def test_index_select_refuses_indices_outside_the_dim():
    # fluid's index_select_op.h enforces 0 <= index < the dim's size: no wrap-around
    d = get_op_def("index_select")
    x = np.arange(12.0).reshape(4, 3)
    for idx, bad in (([0, -1], -1), ([3, 1], 3)):
        with pytest.raises(IndexError) as e:
            d.forward(x, np.array(idx), dim=1)
        assert str(e.value) == (f"index_select: Index holds {bad}, outside [0, 3) (dim 1 of X); "
                                f"indices do not wrap around")
        with pytest.raises(IndexError, match=rf"index_select: Index holds {bad}"):
            d.backward(x, np.array(idx), np.ones((4, 2)), dim=1)


def test_index_sample_checks_and_range():
    d = get_op_def("index_sample")
    out = d.infer(_spec((4, 5), F64), _spec((4, 2), I32))["Out"]
    assert tuple(out.shape) == (4, 2) and out.dtype == F64
    d.infer(_spec((-1, 5)), _spec((4, 2), I32))
    d.infer(_spec((4, 5)), _spec((-1, 2), I32))
    for xs, ids in (((4, 5, 1), (4, 2)), ((4, 5), (4,)), ((4,), (4, 2))):
        assert _infer_error("index_sample", _spec(xs), _spec(ids, I64)) == (
            f"index_sample: X and Index must be 2-D, but received shapes {list(xs)} and "
            f"{list(ids)}")
    for n, m in ((4, 3), (0, 2), (3, 0), (5, 5)):
        if n == m:
            continue
        assert _infer_error("index_sample", _spec((n, 5)), _spec((m, 2), I64)) == (
            f"index_sample: X and Index must have the same first dim, but received {n} and {m}")
    x = np.arange(10.0).reshape(2, 5)
    with pytest.raises(IndexError) as e:
        d.forward(x, np.array([[0, 5], [7, 1]]))
    assert str(e.value) == ("index_sample: Index holds 5, outside [0, 5) (the columns of X); "
                            "indices do not wrap around")
    np.testing.assert_array_equal(d.forward(x, np.array([[4, 0], [1, 1]]))["Out"],
                                  [[4, 0], [6, 6]])


# -- masked_select --------------------------------------------------------------------------------
def test_masked_select_checks_and_kernels():
    d = get_op_def("masked_select")
    out = d.infer(_spec((4, 3), F64), _spec((1, 3), VarType.BOOL))["Y"]
    assert tuple(out.shape) == (-1,) and out.dtype == F64
    d.infer(_spec((-1, 3)), _spec((4, 3), VarType.BOOL))
    assert _infer_error("masked_select", _spec((4, 3)), _spec((4, 3), I32)) == (
        f"masked_select: Mask must be bool, but received {I32}")
    assert _infer_error("masked_select", _spec((4, 3)), _spec((2, 3), VarType.BOOL)) == (
        "masked_select: Mask of shape [2, 3] cannot be broadcast to X of shape [4, 3]")
    x = np.arange(12.0).reshape(4, 3)
    mask = np.array([[True, False, True]])
    np.testing.assert_array_equal(d.forward(x, mask)["Y"], x[:, [0, 2]].reshape(-1))
    dx = d.backward(x, mask, np.arange(8, dtype=np.float32))["X"]
    assert dx.dtype == np.float32
    want = np.zeros((4, 3), np.float32)
    want[:, [0, 2]] = np.arange(8).reshape(4, 2)
    np.testing.assert_array_equal(dx, want)


# -- shard_index ----------------------------------------------------------------------------------
def test_shard_index_checks_and_kernel():
    d = get_op_def("shard_index")
    attrs = dict(index_num=19, nshards=3, shard_id=1)
    out = d.infer(_spec((6, 1), I64, 1), **attrs)["Out"]
    assert tuple(out.shape) == (6, 1) and out.dtype == I64 and out.lod_level == 1
    d.infer(_spec((6, -1), I32), **attrs)
    d.infer(_spec((6, 1), I32), index_num=1, nshards=1, shard_id=0)
    assert _infer_error("shard_index", _spec((6, 1), F32), **attrs) == (
        f"shard_index: X must be int32 or int64, but received {F32}")
    for shape in ((6, 2), (2, 3, 2), (2, 3, 1, 4), ()):
        assert _infer_error("shard_index", _spec(shape, I64), **attrs) == (
            f"shard_index: the last dim of X must be 1, but X has shape {list(shape)}")
    d.infer(_spec((2, 3, 1), I64), **attrs)
    for bad, msg in ((dict(index_num=0), "index_num must be > 0, but received 0"),
                     (dict(nshards=0), "nshards must be > 0, but received 0"),
                     (dict(shard_id=3), "shard_id must be in [0, nshards) = [0, 3), but "
                                        "received 3"),
                     (dict(shard_id=-1), "shard_id must be in [0, nshards) = [0, 3), but "
                                         "received -1")):
        assert _infer_error("shard_index", _spec((6, 1), I64), **dict(attrs, **bad)) == (
            f"shard_index: {msg}")
        with pytest.raises(ValueError, match=rf"^shard_index: {msg[:12]}"):
            d.forward(np.zeros((2, 1), np.int64), **dict(attrs, **bad))
    # shard size ceil(20 / 3) = 7 (an integer: 14 is in shard 2, not 1)
    out = d.forward(np.array([[14], [13], [7]], np.int64), index_num=20, nshards=3,
                    shard_id=1)["Out"]
    assert out.tolist() == [[-1], [6], [0]] and out.dtype == np.int64
    # shard size ceil(19 / 3) = 7: shard 1 holds 7..13 (as 0..6); the rest is ignore_value (-1)
    x = np.array([[0], [6], [7], [13], [14], [18]], np.int64)
    out = d.forward(x, **attrs)["Out"]
    assert out.dtype == np.int64 and out.tolist() == [[-1], [-1], [0], [6], [-1], [-1]]
    out = d.forward(x.astype(np.int32), **attrs, ignore_value=-5)["Out"]
    assert out.dtype == np.int32 and out.tolist() == [[-5], [-5], [0], [6], [-5], [-5]]
    for bad in (19, -1):
        with pytest.raises(ValueError) as e:
            d.forward(np.array([[0], [bad]], np.int64), **attrs)
        lo, hi = min(0, bad), max(0, bad)
        assert str(e.value) == (f"shard_index: every entry of X must lie in [0, index_num) = "
                                f"[0, 19), but received values in [{lo}, {hi}]")


def test_where_index_spec_and_gradient_dtypes():
    out = get_op_def("where_index").infer(_spec((4, 3, 2), VarType.BOOL))["Out"]
    assert tuple(out.shape) == (-1, 3) and out.dtype == I64
    g32 = np.ones((2, 3), np.float32)
    dx = get_op_def("gather_nd").backward(np.zeros((4, 3)), np.array([[1], [3]]), g32)["X"]
    assert dx.dtype == np.float32 and dx.sum() == 6
    dx = get_op_def("index_sample").backward(np.zeros((2, 3)), np.array([[0, 2, 2], [1, 1, 0]]),
                                             g32)["X"]
    assert dx.dtype == np.float32 and dx.tolist() == [[1, 0, 2], [1, 2, 0]]


def test_index_select_second_order_on_another_dim():
    # the double-grad index_select must keep the grad op's dim
    rng = np.random.default_rng(5)
    _double("index_select", {"X": rng.standard_normal((3, 4)),
                             "Index": np.array([3, 0, 3], np.int64)}, {"dim": 1}, ["X"])
