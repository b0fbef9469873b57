"""Tests written from mutation testing (issue 28, docs/mutation.md) for
``fluidlite/ops/embedding.py``: lookup_table / lookup_table_v2 forward, dense and sparse
gradients, against a float64 loop over the ids written here (fluid 1.8's lookup_table_op.h:
``Out[i] = W[ids[i]]``, zeros for ``padding_idx``; the dense dW sums the dOut rows of each id;
the sparse dW is a SelectedRows of the ids in order, duplicates kept), and the build-time checks
with their messages."""
import re

import numpy as np
import pytest

from fluidlite.core.dtypes import VarType
from fluidlite.core.registry import VarSpec, get_op_def
from fluidlite.core.selected_rows import SelectedRows


def ref_lookup(W, ids, padding_idx):
    out = np.zeros(ids.shape + (W.shape[1],))
    for i in np.ndindex(ids.shape):
        if ids[i] != padding_idx:
            out[i] = W[ids[i]]
    return out


def ref_dense_grad(W, ids, dout, padding_idx):
    dW = np.zeros(W.shape)
    for i in np.ndindex(ids.shape):
        if ids[i] != padding_idx:
            dW[ids[i]] += dout[i]
    return dW


def table(v=7, d=3, dtype=np.float64, seed=0):
    return np.random.default_rng(seed).standard_normal((v, d)).astype(dtype)


IDS = np.array([[3, 0, 3], [6, 1, 3]], np.int64)       # duplicates, the first and last rows


@pytest.mark.parametrize("padding_idx", [-1, 3, 0, 6, 5])
@pytest.mark.parametrize("v2", [False, True])
def test_lookup_forward_and_dense_gradient_match_a_loop(padding_idx, v2):
    W = table()
    op = get_op_def("lookup_table_v2" if v2 else "lookup_table")
    ids_in = IDS if v2 else IDS[..., None]
    out = op.forward(W, ids_in, padding_idx=padding_idx)["Out"]
    np.testing.assert_array_equal(out, ref_lookup(W, IDS, padding_idx))
    assert out.shape == (2, 3, 3) and out.dtype == W.dtype
    dout = np.random.default_rng(1).standard_normal(out.shape)
    dW = op.backward(W, ids_in, dout, padding_idx=padding_idx)["W"]
    assert isinstance(dW, np.ndarray) and dW.dtype == np.float64
    np.testing.assert_allclose(dW, ref_dense_grad(W, IDS, dout, padding_idx), rtol=1e-15)
    # the default padding_idx is none (-1): every id, also 0, is looked up
    np.testing.assert_array_equal(op.forward(W, ids_in)["Out"], ref_lookup(W, IDS, -1))
    np.testing.assert_allclose(op.backward(W, ids_in, dout)["W"],
                               ref_dense_grad(W, IDS, dout, -1), rtol=1e-15)


def test_lookup_forward_does_not_write_into_the_table():
    W = table()
    keep = W.copy()
    get_op_def("lookup_table_v2").forward(W, IDS, padding_idx=3)
    np.testing.assert_array_equal(W, keep)


@pytest.mark.parametrize("padding_idx", [-1, 3, 1, 0])
@pytest.mark.parametrize("v2", [False, True])
def test_sparse_gradient_keeps_the_ids_in_order_and_drops_the_padding_id(padding_idx, v2):
    W = table(dtype=np.float32)
    op = get_op_def("lookup_table_v2" if v2 else "lookup_table")
    ids_in = IDS.astype(np.int32) if v2 else IDS[..., None]
    dout = np.random.default_rng(2).standard_normal((2, 3, 3)).astype(np.float32)
    g = op.backward(W, ids_in, dout, padding_idx=padding_idx, is_sparse=True)["W"]
    assert isinstance(g, SelectedRows)
    flat, rows = IDS.reshape(-1), dout.reshape(-1, 3)
    keep = flat != padding_idx
    np.testing.assert_array_equal(g.rows, flat[keep])
    assert g.rows.dtype == np.int64
    np.testing.assert_array_equal(g.value, rows[keep])
    assert g.value.dtype == np.float32
    assert g.height == 7 and g.shape == (7, 3)
    # densified, it is the dense gradient
    dense = np.zeros(W.shape)
    np.add.at(dense, g.rows, g.value.astype(np.float64))
    np.testing.assert_allclose(dense, ref_dense_grad(W, IDS, dout.astype(np.float64),
                                                     padding_idx), rtol=1e-6)
    dW = op.backward(W, ids_in, dout, padding_idx=padding_idx)["W"]
    assert dW.dtype == np.float32
    np.testing.assert_allclose(dW, dense, rtol=1e-6)


def test_lookup_table_3d_ids():
    W = table()
    op = get_op_def("lookup_table")
    ids3 = np.array([[[1], [5]], [[5], [0]]], np.int64)  # [2, 2, 1]
    out = op.forward(W, ids3, padding_idx=5)["Out"]
    np.testing.assert_array_equal(out, ref_lookup(W, ids3[..., 0], 5))


@pytest.mark.parametrize("op", ["lookup_table", "lookup_table_v2"])
def test_ids_out_of_range_are_refused_naming_the_id_and_the_range(op):
    W = table()
    tail = (1,) if op == "lookup_table" else ()
    for bad, ids in [(7, [1, 7, 2]), (-1, [1, -1, 9]), (-3, [-3, 0, 1]), (12, [12, 0, 1])]:
        ids = np.array(ids, np.int64).reshape((3,) + tail)
        msg = (f"{op}: id {bad} is out of range [0, 7) of the embedding table (vocab_size 7)")
        with pytest.raises(ValueError, match="^" + re.escape(msg) + "$"):
            get_op_def(op).forward(W, ids)
    # the extremes themselves are in range
    ids = np.array([0, 6], np.int64).reshape((2,) + tail)
    np.testing.assert_array_equal(get_op_def(op).forward(W, ids)["Out"].reshape(2, 3),
                                  W[[0, 6]])
    # no ids: an empty lookup, an empty (zero) gradient
    ids = np.zeros((0,) + tail, np.int64)
    out = get_op_def(op).forward(W, ids)["Out"]
    assert out.shape == (0, 3)
    dW = get_op_def(op).backward(W, ids, np.zeros((0, 3)))["W"]
    np.testing.assert_array_equal(dW, np.zeros(W.shape))


def _refused(op, w, ids, msg, ids_dtype="int64"):
    with pytest.raises(ValueError, match="^" + re.escape(msg) + "$"):
        get_op_def(op).infer(VarSpec(w, "float32"), VarSpec(ids, ids_dtype))


@pytest.mark.parametrize("op", ["lookup_table", "lookup_table_v2"])
def test_build_time_checks(op):
    _refused(op, [10, 4], [5, 1], f"{op}: Ids must be an int64 (or int32) tensor, got fp32; "
             "feed the ids as int64 (array.astype('int64'))", ids_dtype="float32")
    _refused(op, [10, 4], [5, 1], f"{op}: Ids must be an int64 (or int32) tensor, got int16; "
             "feed the ids as int64 (array.astype('int64'))", ids_dtype="int16")
    _refused(op, [10, 4, 2], [5, 1], f"{op}: W must be 2-D [vocab_size, emb_dim], got "
             "[10, 4, 2]")
    _refused(op, [10], [5, 1], f"{op}: W must be 2-D [vocab_size, emb_dim], got [10]")
    for dt in ("int32", "int64"):
        out = get_op_def(op).infer(VarSpec([10, 4], "float32"), VarSpec([5, 1], dt, 1))["Out"]
        assert out.lod_level == 1 and out.dtype == VarType.FP32
        assert list(out.shape) == ([5, 4] if op == "lookup_table" else [5, 1, 4])
    out = get_op_def(op).infer(VarSpec([10, 4], "float64"), VarSpec([-1, 3, 1], "int64"))["Out"]
    assert out.dtype == VarType.FP64 and out.lod_level == 0
    assert list(out.shape) == ([-1, 3, 4] if op == "lookup_table" else [-1, 3, 1, 4])


def test_lookup_table_needs_a_trailing_one():
    msg = ("lookup_table: the last dim of Ids must be 1, got shape [5, 2]; use fluid.embedding "
           "/ lookup_table_v2 for ids without the trailing 1")
    _refused("lookup_table", [10, 4], [5, 2], msg)
    _refused("lookup_table", [10, 4], [], msg.replace("[5, 2]", "[]"))
    out = get_op_def("lookup_table").infer(VarSpec([10, 4], "float32"),
                                           VarSpec([5, -1], "int64"))["Out"]
    assert list(out.shape) == [5, 4]
    # fluid's InferShape: Ids' dims without the last (1), then the embedding width
    for ids in ([1], [-1]):
        out = get_op_def("lookup_table").infer(VarSpec([10, 4], "float32"),
                                               VarSpec(ids, "int64"))["Out"]
        assert list(out.shape) == [4]
    out = get_op_def("lookup_table_v2").infer(VarSpec([10, 4], "float32"),
                                              VarSpec([5, 2], "int64"))["Out"]
    assert list(out.shape) == [5, 2, 4]


@pytest.mark.parametrize("op", ["lookup_table", "lookup_table_v2"])
def test_the_gradient_var_type_follows_is_sparse(op):
    opdef = get_op_def(op)
    assert opdef.grad_var_types({}, {"is_sparse": True}) == {"W@GRAD": VarType.SELECTED_ROWS}
    assert opdef.grad_var_types({}, {"is_sparse": False}) == {"W@GRAD": VarType.LOD_TENSOR}
    assert opdef.grad_var_types({}, {}) == {"W@GRAD": VarType.LOD_TENSOR}
