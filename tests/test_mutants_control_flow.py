"""Tests written from the mutation run of ``fluidlite/ops/control_flow.py`` (issue 28,
docs/mutation.md): the kernels, shape inference and messages of the tensor-array ops, the
IfElse split / merge, Print / Assert and the DynamicRNN rank-table ops, called directly
(the layers' tests reach them through plans, which always pass every attribute and never hand
a kernel an absent array). References: Python lists and NumPy slicing written here, fluid
1.8's documented behaviour (tensor_array_to_tensor_op.cc: concat / stack along ``axis``,
``OutIndex`` the sizes along it; lod_rank_table.cc: a stable sort by length, longest first;
print_op.cc's layout)."""
import pickle
import warnings

import numpy as np
import pytest

import fluidlite  # noqa: F401  (registers the backward pass's grad builder)
from fluidlite.core.dtypes import VarType
from fluidlite.core.registry import VarSpec, get_op_def
from fluidlite.ops import control_flow as cf

F32 = VarType.FP32
I64 = VarType.INT64


def op(name):
    return get_op_def(name)


def idx(i, dtype=np.int64):
    return np.array([i], dtype)


# -- the block ops --------------------------------------------------------------------------
def test_grad_through_blocks_without_a_builder_names_the_fix():
    saved = list(cf._GRAD_BUILDER)
    try:
        cf._GRAD_BUILDER[:] = []
        with pytest.raises(RuntimeError, match=r"^the gradient of a control-flow op is built by "
                                               r"fluidlite\.backward; call append_backward / "
                                               r"gradients \(import fluidlite\) to build it$"):
            op("while").make_grad(None)
        seen = []
        cf.provide_grad_builder(seen.append)
        assert cf._GRAD_BUILDER == [seen.append]
        op("conditional_block").make_grad("g")
        op("while").make_grad("h")
        assert seen == ["g", "h"]
    finally:
        cf._GRAD_BUILDER[:] = saved


def test_block_grad_ops_declare_one_gradient_per_input():
    a, b = VarSpec((2, 3), F32), VarSpec((4,), VarType.FP64)
    out = op("while_grad").infer([a, b], [a], [a], None)
    assert list(out) == ["X@GRAD"] and out["X@GRAD"] == [a, b]
    out = op("conditional_block_grad").infer([], [a, b], [a], [a], None)
    assert list(out) == ["Input@GRAD"] and out["Input@GRAD"] == [a, b]
    assert op("while").infer() == {} and op("conditional_block").infer() == {}


# -- index checks ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["write_to_array", "read_from_array",
                                  "clear_tensor_array_entry"])
def test_index_spec_checks_name_the_op_shape_and_dtype(name):
    x = VarSpec((2, 3), F32)
    # one element, or unknown (-1: a fed index)
    for shape in [(1,), (1, 1), (-1,), ()]:
        assert list(op(name).infer(x, VarSpec(shape, I64))) == ["Out"]
    assert op(name).infer(x, VarSpec((1,), VarType.INT32))["Out"] == x
    with pytest.raises(ValueError, match=rf"^{name}: the index I must hold one element, but its "
                                         r"shape is \[2\]$"):
        op(name).infer(x, VarSpec((2,), I64))
    with pytest.raises(ValueError, match=rf"^{name}: the index I must be int64 or int32, but it "
                                         r"is fp32$"):
        op(name).infer(x, VarSpec((1,), F32))


@pytest.mark.parametrize("name,what", [("write_to_array", "array_write"),
                                       ("read_from_array", "array_read"),
                                       ("clear_tensor_array_entry", "clear_tensor_array_entry"),
                                       ("shrink_rnn_memory", "shrink_memory")])
def test_run_time_index_of_several_elements_names_the_op(name, what):
    x = np.ones((2, 3), np.float32)
    args = {"write_to_array": (x, np.array([0, 1]), None),
            "read_from_array": ([x], np.array([0, 1])),
            "clear_tensor_array_entry": ([x], np.array([0, 1])),
            "shrink_rnn_memory": (x, np.array([0, 1]), ((0, 2), (1, 1)))}[name]
    with pytest.raises(ValueError, match=rf"^{what}: the index I must hold one element, but its "
                                         r"shape is \[2\]$"):
        op(name).forward(*args)
    if name in ("write_to_array", "read_from_array"):
        grad_args = (x, np.array([[0, 1]]), [x]) if name == "write_to_array" \
            else (np.array([[0, 1]]), x)
        with pytest.raises(ValueError, match=rf"^{what}: the index I must hold one element, "
                                             r"but its shape is \[1, 2\]$"):
            op(name).backward(*grad_args)


def test_a_2d_index_is_read_without_a_deprecated_array_to_int_conversion():
    x = np.arange(3, dtype=np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = op("write_to_array").forward(x, np.array([[1]], np.int32), None)["Out"]
        assert len(out) == 2
        got = op("read_from_array").forward(out, np.array([[1]]))["Out"]
    np.testing.assert_array_equal(got, x)


# -- write_to_array -------------------------------------------------------------------------
def test_write_to_array_grows_with_empty_entries_of_x_dtype():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = op("write_to_array").forward(x, idx(2), None)["Out"]
    assert len(out) == 3 and out[2] is x
    for gap in out[:2]:
        assert gap.shape == (0,) and gap.dtype == np.float32
    # the previous value is not mutated: a new list
    prev = [np.zeros(1, np.float32)]
    out = op("write_to_array").forward(x, idx(0), prev)["Out"]
    assert out is not prev and out[0] is x and prev[0].shape == (1,)
    # an int32 index and an overwrite in the middle
    arr = [np.full(1, k, np.float64) for k in range(3)]
    out = op("write_to_array").forward(np.full(1, 9.0), idx(1, np.int32), arr)["Out"]
    assert [float(v[0]) for v in out] == [0.0, 9.0, 2.0]


def test_write_to_array_refuses_a_negative_index_before_writing():
    prev = [np.zeros(2)]
    with pytest.raises(IndexError, match=r"^array_write: the index must be >= 0, but it is -1$"):
        op("write_to_array").forward(np.ones(2), idx(-1), prev)
    assert len(prev) == 1
    out = op("write_to_array").forward(np.ones(2), idx(0), prev)["Out"]   # 0 is valid
    np.testing.assert_array_equal(out[0], np.ones(2))


def test_write_to_array_lod_per_entry():
    x = np.ones((3, 1), np.float32)
    lod_x = ((0, 1, 3),)
    # no previous LoD list: the gaps get None, the written entry X's LoD
    res = op("write_to_array").forward(x, idx(2), None, lod={"X": lod_x})
    assert res["lod"]["Out"] == [None, None, lod_x]
    # a previous LoD list shorter than the array; entries keep theirs
    prev = [np.ones((2, 1)), np.ones((1, 1)), np.ones((1, 1))]
    res = op("write_to_array").forward(x, idx(1), prev, lod={"X": lod_x, "Out": [((0, 2),)]})
    assert res["lod"]["Out"] == [((0, 2),), lod_x, None]
    res = op("write_to_array").forward(x, idx(0), prev[:1], lod={"X": None, "Out": None})
    assert res["lod"]["Out"] == [None]
    assert "lod" not in op("write_to_array").forward(x, idx(0), None)


def test_write_to_array_gradient_reads_entry_i():
    x = np.array([4.0])
    w = op("write_to_array")
    # a one-element gradient is a real gradient (only an empty one is "none")
    np.testing.assert_array_equal(w.backward(x, idx(1), [None, np.array([7.0])])["X"], [7.0])
    # an empty gap entry, an absent entry, an absent array: zeros of X
    for d in ([np.zeros(0), np.zeros(0)], [np.array([1.0]), None], [np.array([1.0])], None):
        g = w.backward(x, idx(1), d)["X"]
        assert g.shape == (1,) and not g.any()
    # an empty X gets the empty gradient
    e = np.zeros((0, 2))
    assert w.backward(e, idx(0), [np.zeros((0, 2))])["X"].shape == (0, 2)


# -- clear_tensor_array_entry ---------------------------------------------------------------
def test_clear_tensor_array_entry():
    c = op("clear_tensor_array_entry")
    arr = [np.ones(1), np.full(1, 2.0), np.full(1, 3.0)]
    out = c.forward(arr, idx(1))["Out"]
    assert out[0] is arr[0] and out[1] is None and out[2] is arr[2] and arr[1] is not None
    assert c.forward(arr, idx(2))["Out"][2] is None
    assert c.forward(arr, idx(0))["Out"][0] is None
    # past the end and negative: unchanged
    for i in (3, -1):
        assert c.forward(arr, idx(i))["Out"] == arr
    assert c.forward(None, idx(0))["Out"] == []
    assert op("clear_tensor_array_entry").no_grad


# -- read_from_array ------------------------------------------------------------------------
def test_read_from_array_bounds_and_message():
    arr = [np.full(2, k, np.float32) for k in range(3)]
    r = op("read_from_array")
    np.testing.assert_array_equal(r.forward(arr, idx(2))["Out"], [2, 2])   # the last index
    np.testing.assert_array_equal(r.forward(arr, idx(0))["Out"], [0, 0])
    with pytest.raises(IndexError, match=r"^array_read: index 3 is out of range: the array has 3 "
                                         r"element\(s\) \(valid indices 0\.\.2\)$"):
        r.forward(arr, idx(3))
    with pytest.raises(IndexError, match=r"^array_read: index -1 is out of range"):
        r.forward(arr, idx(-1))
    with pytest.raises(IndexError, match=r"^array_read: index 0 is out of range: the array has 0 "
                                         r"element\(s\) \(valid indices 0\.\.-1\)$"):
        r.forward(None, idx(0))
    # the lowered kernel is the same read
    fn = r.lower([None, None], {})
    np.testing.assert_array_equal(fn(arr, idx(1)), [1, 1])
    with pytest.raises(IndexError, match=r"index 3 is out of range"):
        fn(arr, idx(3))


def test_read_from_array_lod_of_the_entry():
    arr = [np.ones((2, 1)), np.ones((3, 1))]
    r = op("read_from_array")
    lods = [((0, 2),), ((0, 1, 3),)]
    assert r.forward(arr, idx(1), lod={"X": lods})["lod"]["Out"] == ((0, 1, 3),)
    # fewer LoD entries than array entries: the last one has none
    assert r.forward(arr, idx(1), lod={"X": lods[:1]})["lod"]["Out"] is None
    assert r.forward(arr, idx(0), lod={"X": None})["lod"]["Out"] is None


def test_read_from_array_gradient_is_an_array_up_to_i():
    d = np.array([1.0, 2.0])
    g = op("read_from_array").backward(idx(2), d)["X"]
    assert len(g) == 3 and g[0] is None and g[1] is None and g[2] is d
    assert op("read_from_array").backward(idx(0), d)["X"] == [d]


# -- array gradients: add_arrays / sum_tensor_array ----------------------------------------
def _vals(arr):
    return [None if v is None else v.tolist() for v in arr]


def test_add_arrays_position_wise():
    one, two = np.array([1.0]), np.array([2.0])
    e = np.zeros(0)
    assert cf.add_arrays(None, [one]) == [one] and cf.add_arrays([one], None) == [one]
    assert cf.add_arrays(None, None) is None
    # b longer, a longer, equal
    assert _vals(cf.add_arrays([one], [None, None, two])) == [[1.0], None, [2.0]]
    assert _vals(cf.add_arrays([one, None, two], [two])) == [[3.0], None, [2.0]]
    assert _vals(cf.add_arrays([one, two], [two, two])) == [[3.0], [4.0]]
    # empty gap tensors are zeros: kept only where nothing else is
    assert _vals(cf.add_arrays([one, e], [e, two])) == [[1.0], [2.0]]
    assert _vals(cf.add_arrays([None], [e])) == [[]]
    # one-element entries are values, not gaps
    assert _vals(cf.add_arrays([one], [one])) == [[2.0]]
    assert _vals(cf.add_arrays([None, one], [one, None])) == [[1.0], [1.0]]


def test_sum_tensor_array():
    s = op("sum_tensor_array")
    a = VarSpec((2,), F32)
    assert s.infer([]) == {}
    assert s.infer([a, VarSpec((3,), F32)]) == {"Out": a}
    assert s.forward([])["Out"] == [] and isinstance(s.forward([])["Out"], list)
    assert s.forward([None, None])["Out"] == []
    one = np.array([1.0])
    assert _vals(s.forward([[one], None, [None, one], [one]])["Out"]) == [[2.0], [1.0]]
    assert s.no_grad


# -- lod_array_length / is_empty --------------------------------------------------------------
def test_lod_array_length_kernels_give_int64():
    ln = op("lod_array_length")
    assert ln.infer(VarSpec((2,), F32)) == {"Out": VarSpec((1,), I64)}
    fn = ln.lower([None], {})
    for arr, n in [(None, 0), ([], 0), ([np.ones(1)] * 3, 3)]:
        for got in (ln.forward(arr)["Out"], fn(arr)):
            assert got.dtype == np.int64 and got.tolist() == [n]


def test_is_empty():
    e = op("is_empty")
    assert e.infer(VarSpec((2, 3), F32)) == {"Out": VarSpec((1,), VarType.BOOL)}
    assert e.forward(np.zeros((2, 0)))["Out"].tolist() == [True]
    assert e.forward(np.zeros(1))["Out"].tolist() == [False]
    assert e.forward(np.zeros((2, 0)))["Out"].dtype == np.bool_


# -- tensor_array_to_tensor -------------------------------------------------------------------
def _array():
    rng = np.random.default_rng(5)
    return [rng.standard_normal((2, k + 1, 3)) for k in range(3)]


@pytest.mark.parametrize("axis", [1, -2])
def test_tensor_array_to_tensor_concat_with_a_negative_axis(axis):
    t = op("tensor_array_to_tensor")
    arr = _array()
    res = t.forward(arr, axis=axis)
    ref = np.concatenate(arr, axis=1)          # -2 of a rank-3 entry is axis 1
    np.testing.assert_array_equal(res["Out"], ref)
    assert res["OutIndex"].dtype == np.int32 and res["OutIndex"].tolist() == [1, 2, 3]
    spec = VarSpec((2, 5, 3), VarType.FP64, 1)
    out = t.infer(spec, axis=axis)
    assert out["Out"].shape == (2, -1, 3) and out["Out"].dtype == VarType.FP64
    assert out["OutIndex"] == VarSpec((-1,), VarType.INT32)
    d = np.random.default_rng(1).standard_normal(ref.shape)
    parts = t.backward(arr, d, axis=axis)["X"]
    np.testing.assert_array_equal(parts[0], d[:, :1])
    np.testing.assert_array_equal(parts[1], d[:, 1:3])
    np.testing.assert_array_equal(parts[2], d[:, 3:])


def test_tensor_array_to_tensor_concat_on_the_last_axis_and_axis_0():
    t = op("tensor_array_to_tensor")
    arr = [np.ones((2, 3, k + 1)) * k for k in range(2)]
    assert t.infer(VarSpec((2, 3, 4), F32), axis=-1)["Out"].shape == (2, 3, -1)
    assert t.infer(VarSpec((2, 3, 4), F32), axis=0)["Out"].shape == (-1, 3, 4)
    d = np.arange(2 * 3 * 3, dtype=np.float64).reshape(2, 3, 3)
    parts = t.backward(arr, d, axis=-1)["X"]
    np.testing.assert_array_equal(parts[1], d[:, :, 1:])
    arr0 = [np.ones((1, 2)), np.ones((2, 2))]
    d0 = np.arange(6.0).reshape(3, 2)
    parts = t.backward(arr0, d0, axis=0)["X"]
    np.testing.assert_array_equal(parts[1], d0[1:])


@pytest.mark.parametrize("axis,pos", [(1, 1), (-1, 3), (-4, 0), (0, 0)])
def test_tensor_array_to_tensor_stack_axes(axis, pos):
    t = op("tensor_array_to_tensor")
    arr = [np.full((2, 4, 3), k, np.float32) for k in range(3)]
    res = t.forward(arr, axis=axis, use_stack=True)
    ref = np.stack(arr, axis=pos)
    np.testing.assert_array_equal(res["Out"], ref)
    assert res["OutIndex"].dtype == np.int32 and res["OutIndex"].tolist() == [1, 1, 1]
    shape = [2, 4, 3]
    shape.insert(pos, -1)
    assert t.infer(VarSpec((2, 4, 3), F32), axis=axis, use_stack=True)["Out"].shape == \
        tuple(shape)
    d = np.random.default_rng(2).standard_normal(ref.shape)
    parts = t.backward(arr, d, axis=axis, use_stack=True)["X"]
    for k in range(3):
        np.testing.assert_array_equal(parts[k], np.take(d, k, axis=pos))


def test_tensor_array_to_tensor_defaults_are_fluids_axis_1_concat():
    t = op("tensor_array_to_tensor")
    arr = _array()
    np.testing.assert_array_equal(t.forward(arr)["Out"], np.concatenate(arr, axis=1))
    assert t.infer(VarSpec((2, 5, 3), F32))["Out"].shape == (2, -1, 3)
    d = np.ones((2, 6, 3))
    assert [p.shape for p in t.backward(arr, d)["X"]] == [(2, 1, 3), (2, 2, 3), (2, 3, 3)]
    assert t.attr_defaults["axis"] == 1 and t.attr_defaults["use_stack"] is False
    with pytest.raises(ValueError, match=r"^tensor_array_to_tensor: the array is empty$"):
        t.forward([], axis=1)


# -- split_lod_tensor / merge_lod_tensor (IfElse) ------------------------------------------
def _rows_of(x, offs, picks):
    return [x[offs[k]:offs[k + 1]] for k in range(len(offs) - 1) if picks[k]]


def test_split_lod_tensor_rows_without_lod():
    s = op("split_lod_tensor")
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    res = s.forward(x, np.array([[True], [False], [True], [True]]))
    np.testing.assert_array_equal(res["OutTrue"], x[[0, 2, 3]])
    np.testing.assert_array_equal(res["OutFalse"], x[[1]])
    assert "lod" not in res
    # every row true: OutFalse is an empty [0, 3] tensor of X's dtype
    res = s.forward(x, np.ones(4, bool))
    assert res["OutFalse"].shape == (0, 3) and res["OutFalse"].dtype == np.float32
    res = s.forward(x, np.zeros(4, bool))
    assert res["OutTrue"].shape == (0, 3)
    with pytest.raises(ValueError, match=r"^split_lod_tensor: the mask has 3 entries but the "
                                         r"input has 4 sequences \(rows when it has no LoD\)$"):
        s.forward(x, np.ones(3, bool))
    with pytest.raises(ValueError, match=r"^split_lod_tensor: the mask has 3 entries but the "
                                         r"input has 4 sequences"):
        s.backward(x, np.ones(3, bool), x[:3], None)


def test_split_lod_tensor_sequences_and_their_lod():
    s = op("split_lod_tensor")
    x = np.arange(7, dtype=np.float64)[:, None]
    lod = ((0, 2, 3, 7),)
    m = np.array([False, True, False])
    res = s.forward(x, m, lod={"X": lod})
    offs = lod[0]
    np.testing.assert_array_equal(res["OutTrue"], np.concatenate(_rows_of(x, offs, m)))
    np.testing.assert_array_equal(res["OutFalse"], np.concatenate(_rows_of(x, offs, ~m)))
    assert res["lod"] == {"OutTrue": ((0, 1),), "OutFalse": ((0, 2, 6),)}
    # the gradient puts each part back at its rows; an absent part is zero
    dt, df = np.full((1, 1), 5.0), np.arange(6.0)[:, None] + 10
    dx = s.backward(x, m, dt, df, lod={"X": lod})
    assert dx["Mask"] is None and set(dx) == {"X", "Mask"}
    np.testing.assert_array_equal(dx["X"][:, 0], [10, 11, 5, 12, 13, 14, 15])
    dx = s.backward(x, m, None, df, lod={"X": lod})["X"]
    np.testing.assert_array_equal(dx[:, 0], [10, 11, 0, 12, 13, 14, 15])
    dx = s.backward(x, m, dt, None, lod={"X": lod})["X"]
    np.testing.assert_array_equal(dx[:, 0], [0, 0, 5, 0, 0, 0, 0])


def test_split_lod_tensor_level_of_a_two_level_lod():
    s = op("split_lod_tensor")
    x = np.arange(6, dtype=np.float64)[:, None]
    lod = ((0, 1, 3), (0, 2, 4, 6))      # 2 top sequences of 1 and 2 sub-sequences
    # level 0 (the default): the top sequences' rows, [0, 2) and [2, 6)
    for res in (s.forward(x, np.array([True, False]), lod={"X": lod}),
                s.forward(x, np.array([True, False]), lod={"X": lod}, level=0)):
        np.testing.assert_array_equal(res["OutTrue"][:, 0], [0, 1])
        np.testing.assert_array_equal(res["OutFalse"][:, 0], [2, 3, 4, 5])
    # level 1: the 3 sub-sequences [0, 2), [2, 4), [4, 6)
    res = s.forward(x, np.array([False, True, False]), lod={"X": lod}, level=1)
    np.testing.assert_array_equal(res["OutTrue"][:, 0], [2, 3])
    np.testing.assert_array_equal(res["OutFalse"][:, 0], [0, 1, 4, 5])
    assert res["lod"]["OutTrue"] == ((0, 2),) and res["lod"]["OutFalse"] == ((0, 2, 4),)
    d = np.arange(2.0)[:, None] + 1
    dx = s.backward(x, np.array([False, True, False]), d, None, lod={"X": lod}, level=1)["X"]
    np.testing.assert_array_equal(dx[:, 0], [0, 0, 1, 2, 0, 0])
    dx = s.backward(x, np.array([True, False]), np.ones((2, 1)), None, lod={"X": lod})["X"]
    np.testing.assert_array_equal(dx[:, 0], [1, 1, 0, 0, 0, 0])


def test_split_lod_tensor_infer():
    s = op("split_lod_tensor")
    spec = VarSpec((5, 3, 4), VarType.FP64, 1)
    out = s.infer(spec, VarSpec((5, 1), VarType.BOOL))
    assert set(out) == {"OutTrue", "OutFalse"}
    for v in out.values():
        assert v == VarSpec((-1, 3, 4), VarType.FP64, 1)
    assert s.infer(spec, VarSpec((5, 1), VarType.BOOL), level=0) == out


def _merge_ref(mask, parts_true, parts_false):
    it, jf, rows, lengths = iter(parts_true), iter(parts_false), [], []
    for flag in mask:
        p = next(it) if flag else next(jf)
        rows.append(p)
        lengths.append(len(p))
    return np.concatenate(rows), lengths


def test_merge_lod_tensor_interleaves_sequences_in_mask_order():
    mg = op("merge_lod_tensor")
    rng = np.random.default_rng(3)
    lt, lf = [1, 3, 2, 1], [2, 1]
    t = rng.standard_normal((sum(lt), 2)).astype(np.float32)
    f = rng.standard_normal((sum(lf), 2)).astype(np.float32)
    ot, of = np.concatenate([[0], np.cumsum(lt)]), np.concatenate([[0], np.cumsum(lf)])
    mask = np.array([1, 1, 0, 1, 0, 1], bool)[:, None]
    lod = {"InTrue": (tuple(ot),), "InFalse": (tuple(of),)}
    res = mg.forward(None, mask, t, f, lod=lod)
    ref, lengths = _merge_ref(mask[:, 0], _rows_of(t, ot, [1] * 4), _rows_of(f, of, [1] * 2))
    np.testing.assert_array_equal(res["Out"], ref)
    assert res["Out"].dtype == np.float32
    assert res["lod"]["Out"] == (tuple(int(v) for v in np.concatenate([[0], np.cumsum(lengths)])),)
    # the gradient: the rows each input came from
    d = rng.standard_normal(ref.shape)
    g = mg.backward(None, mask, t, f, d, lod=lod)
    assert g["X"] is None and g["Mask"] is None
    np.testing.assert_array_equal(g["InTrue"], np.concatenate([d[0:1], d[1:4], d[6:8], d[9:10]]))
    np.testing.assert_array_equal(g["InFalse"], np.concatenate([d[4:6], d[8:9]]))
    # only InFalse with LoD
    res = mg.forward(None, np.array([0, 1, 0], bool), t[:1], f, lod={"InFalse": (tuple(of),)})
    np.testing.assert_array_equal(res["Out"], np.concatenate([f[:2], t[:1], f[2:]]))
    assert res["lod"]["Out"] == ((0, 2, 3, 4),)


def test_merge_lod_tensor_rows_and_a_branch_that_did_not_run():
    mg = op("merge_lod_tensor")
    t = np.array([[1.0], [2.0]], np.float32)
    f = np.array([[3.0]], np.float32)
    res = mg.forward(None, np.array([0, 1, 1]), t, f)
    np.testing.assert_array_equal(res["Out"][:, 0], [3, 1, 2])
    assert "lod" not in res
    # InTrue absent (the true branch never ran): every mask entry false
    res = mg.forward(None, np.array([0]), None, f)
    np.testing.assert_array_equal(res["Out"], f)
    assert res["Out"].dtype == np.float32
    g = mg.backward(None, np.array([0]), None, f, np.array([[9.0]]))
    assert g["InTrue"].shape == (0, 1) and g["InFalse"].tolist() == [[9.0]]
    # InTrue empty: the reference for shape and dtype is InFalse
    res = mg.forward(None, np.array([0, 0]), np.zeros((0, 3), np.float64),
                     np.ones((2, 3), np.float32))
    assert res["Out"].dtype == np.float32 and res["Out"].shape == (2, 3)
    # InFalse absent: every mask entry true
    res = mg.forward(None, np.array([1, 1]), t, None)
    np.testing.assert_array_equal(res["Out"], t)


@pytest.mark.parametrize("mask,msg", [
    ([1, 1, 0], r"selects 2 true and 1 false sequences, but InTrue holds 3 and InFalse 1"),
    ([1, 1, 1, 0, 0], r"selects 3 true and 2 false sequences, but InTrue holds 3 and InFalse 1"),
    ([1, 0, 0, 0], r"selects 1 true and 3 false sequences, but InTrue holds 3 and InFalse 1")])
def test_merge_lod_tensor_counts_must_match_the_mask(mask, msg):
    t, f = np.ones((3, 1)), np.ones((1, 1))
    with pytest.raises(ValueError, match=r"^merge_lod_tensor: the mask " + msg + "$"):
        op("merge_lod_tensor").forward(None, np.array(mask), t, f)
    with pytest.raises(ValueError, match=msg):
        op("merge_lod_tensor").backward(None, np.array(mask), t, f, np.ones((4, 1)))


def test_merge_lod_tensor_infer():
    mg = op("merge_lod_tensor")
    a, b = VarSpec((4, 3, 2), VarType.FP64, 1), VarSpec((5, 3, 2), F32, 0)
    m = VarSpec((9, 1), VarType.BOOL)
    assert mg.infer(None, m, a, b) == {"Out": VarSpec((-1, 3, 2), VarType.FP64, 1)}
    assert mg.infer(None, m, None, b) == {"Out": VarSpec((-1, 3, 2), F32, 0)}
    assert op("merge_lod_tensor_infer").infer(None, m, a, b)["Out"].shape == (-1, 3, 2)
    assert op("merge_lod_tensor_infer").no_grad


# -- Print / Assert -----------------------------------------------------------------------------
def _printed(capsys):
    return capsys.readouterr().out.splitlines()


def test_print_fields_follow_the_flags(capsys):
    p = op("print")
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert p.forward(x, message="msg", var_name="v")["Out"] is x
    lines = _printed(capsys)
    assert lines[0].endswith("\tmsg") and lines[0].split("\t")[0].isdigit()
    assert lines[1:] == ["Tensor[v]", "    shape: [2,3,]", "    dtype: float",
                         "    data: 0.0,1.0,2.0,3.0,4.0,5.0,"]
    p.forward(x, var_name="v", print_tensor_name=False, print_tensor_type=False,
              print_tensor_shape=False, summarize=2)
    lines = _printed(capsys)
    assert lines[0].isdigit() and lines[1:] == ["Tensor", "    data: 0.0,1.0,"]
    # summarize -1: every value; the default 20
    p.forward(np.arange(25, dtype=np.int64), summarize=-1, print_tensor_type=True)
    lines = _printed(capsys)
    assert lines[-1] == "    data: " + "".join(f"{v}," for v in range(25))
    assert "    dtype: int64_t" in lines
    p.forward(np.arange(25, dtype=np.int64))
    assert _printed(capsys)[-1] == "    data: " + "".join(f"{v}," for v in range(20))


def test_print_lod_and_dtype_names(capsys):
    class WithLod(np.ndarray):
        pass
    x = np.arange(3, dtype=np.float64).view(WithLod)
    x.lod = [[0, 1, 3]]
    op("print").forward(x, var_name="s")
    assert "    LoD: [[0,1,3,]]" in _printed(capsys)
    op("print").forward(x, var_name="s", print_tensor_lod=False)
    lines = _printed(capsys)
    assert not any("LoD" in ln for ln in lines) and "    dtype: double" in lines
    for dt, name in [(np.bool_, "bool"), (np.int32, "int"), (np.float16, "float16"),
                     (np.uint8, "uint8_t"), (np.int8, "int8_t"), (np.int16, "int16")]:
        op("print").forward(np.zeros(1, dt))
        assert f"    dtype: {name}" in _printed(capsys)


def test_print_phases(capsys):
    p = op("print")
    x, d = np.ones(2, np.float32), np.full(2, 3.0, np.float32)
    p.forward(x, print_phase="backward")
    assert _printed(capsys) == []
    g = p.backward(d, var_name="v", print_phase="forward")
    assert g["In"] is d and _printed(capsys) == []
    for phase in ("backward", "both"):
        p.backward(d, var_name="v", print_phase=phase, message="m")
        lines = _printed(capsys)
        assert lines[0].endswith("\tm") and lines[1] == "Tensor[v@GRAD]"
        assert lines[-1] == "    data: 3.0,3.0,"
    p.backward(d, var_name="v", print_tensor_name=False)
    assert _printed(capsys)[1] == "Tensor"
    p.backward(d, var_name="v")     # the defaults: phase both, name shown, 20 values
    lines = _printed(capsys)
    assert lines[1:] == ["Tensor[v@GRAD]", "    shape: [2,]", "    dtype: float",
                         "    data: 3.0,3.0,"]
    p.backward(np.arange(30.0), summarize=3)
    assert _printed(capsys)[-1] == "    data: 0.0,1.0,2.0,"
    p.backward(np.arange(30.0))
    assert _printed(capsys)[-1].count(",") == 20
    p.forward(x, print_phase="forward")
    assert len(_printed(capsys)) == 5
    assert p.infer(VarSpec((2,), F32)) == {"Out": VarSpec((2,), F32)}


def test_print_first_n_counts_runs_of_one_binding(capsys):
    p = op("print")
    x = np.ones(1, np.float32)
    run = p.bind([VarSpec((1,), F32)], {"first_n": 2, "message": "hi", "summarize": 1}, None)
    assert run.single is False
    for _ in range(4):
        assert run.fn(x)["Out"] is x
    assert sum(ln.endswith("\thi") for ln in _printed(capsys)) == 2
    run = p.bind([VarSpec((1,), F32)], {"first_n": -1}, None)
    for _ in range(3):
        run.fn(x)
    assert sum(ln.startswith("Tensor") for ln in _printed(capsys)) == 3
    run = p.bind([VarSpec((1,), F32)], {}, None)       # no first_n: every run
    run.fn(x)
    run.fn(x)
    assert sum(ln.startswith("Tensor") for ln in _printed(capsys)) == 2
    # fluid's print_op limits only for first_n > 0: 0 prints every run (it printed nothing)
    run = p.bind([VarSpec((1,), F32)], {"first_n": 0}, None)
    for _ in range(3):
        assert run.fn(x)["Out"] is x
    assert sum(ln.startswith("Tensor") for ln in _printed(capsys)) == 3
    run = p.bind([VarSpec((1,), F32)], {"first_n": 1}, None)
    for _ in range(3):
        run.fn(x)
    assert sum(ln.startswith("Tensor") for ln in _printed(capsys)) == 1


def test_print_reads_fluids_upper_case_phases(capsys):
    # fluid 1.8's layers.Print stores print_phase.upper(): a loaded program says "BOTH"
    p = op("print")
    x = np.ones(1, np.float32)
    for phase, fwd, bwd in [("BOTH", 1, 1), ("FORWARD", 1, 0), ("BACKWARD", 0, 1)]:
        p.forward(x, print_phase=phase)
        assert sum(ln == "Tensor" for ln in _printed(capsys)) == fwd
        p.backward(x, print_phase=phase)
        assert sum(ln == "Tensor[@GRAD]" for ln in _printed(capsys)) == bwd


def test_print_defaults_show_every_field(capsys):
    class WithLod(np.ndarray):
        pass
    x = np.arange(30, dtype=np.float32).view(WithLod)
    x.lod = [[0, 30]]
    op("print").forward(x)
    lines = _printed(capsys)
    assert lines[0].isdigit()
    assert lines[1:5] == ["Tensor", "    shape: [30,]", "    dtype: float", "    LoD: [[0,30,]]"]
    assert lines[5] == "    data: " + "".join(f"{float(v)}," for v in range(20))
    op("print").backward(x)
    lines = _printed(capsys)
    assert lines[0].isdigit()           # no message by default
    assert lines[1:5] == ["Tensor[@GRAD]", "    shape: [30,]", "    dtype: float",
                          "    LoD: [[0,30,]]"]


def test_assert_checks_and_message():
    a = op("assert")
    assert a.infer(VarSpec((1,), VarType.BOOL), []) == {}
    assert a.infer(VarSpec((-1,), VarType.BOOL), []) == {}
    with pytest.raises(ValueError, match=r"^Assert: the condition must hold one element, but its "
                                         r"shape is \[2\]$"):
        a.infer(VarSpec((2,), VarType.BOOL), [])
    with pytest.raises(ValueError, match=r"^Assert: the condition must be bool, but it is "
                                         r"int64$"):
        a.infer(VarSpec((1,), I64), [])
    assert a.forward(np.array([True]), [np.ones(3)]) == {}
    with pytest.raises(ValueError) as e:
        a.forward(np.array([[False]]), [np.arange(3.0), np.array([[1, 2], [3, 4]])], summarize=3)
    assert str(e.value) == ("Assert failed: the condition is False\n"
                            "  Data[0]: shape [3], values 0.0 1.0 2.0\n"
                            "  Data[1]: shape [2, 2], values 1 2 3")
    with pytest.raises(ValueError) as e:
        a.forward(np.array([False]), [np.arange(25)])
    assert str(e.value).endswith("values " + " ".join(str(v) for v in range(20)))
    with pytest.raises(ValueError) as e:
        a.forward(np.array([False]), [np.arange(25)], summarize=-1)
    assert str(e.value).endswith(" 23 24")
    assert a.no_grad


# -- rank tables (DynamicRNN) -------------------------------------------------------------------
def _table_ref(lengths):
    # stable, longest first
    return tuple(sorted(((k, n) for k, n in enumerate(lengths)), key=lambda kn: -kn[1]))


def test_lod_rank_table_stable_longest_first_and_levels():
    r = op("lod_rank_table")
    x = np.zeros((9, 1))
    lod = ((0, 2, 5, 7, 9),)
    assert r.forward(x, lod={"X": lod})["Out"] == _table_ref([2, 3, 2, 2])
    assert r.forward(x, lod={"X": lod}, level=0)["Out"] == ((1, 3), (0, 2), (2, 2), (3, 2))
    # no LoD: one row per sequence, order kept
    assert r.forward(np.zeros((3, 2)))["Out"] == ((0, 1), (1, 1), (2, 1))
    # two levels (lod_rank_table.cc: a length is the difference of lod[level]): level 1 ranks
    # the sub-sequences by their rows, level 0 the sequences by their sub-sequence counts
    lod2 = ((0, 1, 3), (0, 2, 3, 6))
    t1 = r.forward(np.zeros((6, 1)), lod={"X": lod2}, level=1)["Out"]
    assert t1 == ((2, 3), (0, 2), (1, 1)) and t1.level == 1 and t1.coarse_lod == ((0, 1, 3),)
    t0 = r.forward(np.zeros((6, 1)), lod={"X": lod2}, level=0)["Out"]
    assert t0 == ((1, 2), (0, 1)) and t0.level == 0 and t0.coarse_lod == ()
    assert pickle.loads(pickle.dumps(t1)).coarse_lod == t1.coarse_lod
    with pytest.raises(ValueError, match="level 2 is out of range for X's LoD of 2 level"):
        r.forward(np.zeros((6, 1)), lod={"X": lod2}, level=2)
    with pytest.raises(ValueError, match="X has no LoD, so only level 0"):
        r.forward(np.zeros((6, 1)), level=1)
    assert r.infer(VarSpec((9, 1), F32)) == {} and r.no_grad


def test_max_sequence_len():
    m = op("max_sequence_len")
    assert m.infer(None) == {"Out": VarSpec((1,), I64)}
    got = m.forward(((3, 5), (0, 2), (1, 2)))["Out"]
    assert got.dtype == np.int64 and got.tolist() == [5]
    got = m.forward(())["Out"]
    assert got.dtype == np.int64 and got.tolist() == [0]


LOD = ((0, 2, 5, 6),)               # lengths 2, 3, 1
TABLE = ((1, 3), (0, 2), (2, 1))


def _steps_ref(x, offs, table):
    steps = []
    for t in range(table[0][1]):
        steps.append(np.stack([x[offs[k] + t] for k, n in table if n > t]))
    return steps


def test_lod_tensor_to_array_and_back():
    x = np.arange(12, dtype=np.float32).reshape(6, 2)
    ta = op("lod_tensor_to_array")
    arr = ta.forward(x, TABLE, lod={"X": LOD})["Out"]
    ref = _steps_ref(x, LOD[0], TABLE)
    assert len(arr) == 3
    for a, b in zip(arr, ref):
        np.testing.assert_array_equal(a, b)
    assert ta.forward(x, (), lod={"X": LOD})["Out"] == []
    assert ta.infer(VarSpec((6, 2, 3), F32, 1), None)["Out"] == VarSpec((-1, 2, 3), F32, 1)
    # the gradient scatters each step back; absent and empty steps add nothing
    d = [np.ones((3, 2)), None, np.zeros((0, 2))]
    dx = ta.backward(x, TABLE, d, lod={"X": LOD})["X"]
    np.testing.assert_array_equal(dx[:, 0], [1, 0, 1, 0, 0, 1])
    d = [np.ones((3, 2)), np.full((2, 2), 2.0), np.full((1, 2), 3.0)]
    dx = ta.backward(x, TABLE, d, lod={"X": LOD})["X"]
    np.testing.assert_array_equal(dx[:, 0], [1, 2, 1, 2, 3, 1])
    assert not ta.backward(x, TABLE, None, lod={"X": LOD})["X"].any()
    # array_to_lod_tensor inverts it, with the LoD of the original order
    back = op("array_to_lod_tensor")
    res = back.forward(arr, TABLE)
    np.testing.assert_array_equal(res["Out"], x)
    assert res["Out"].dtype == np.float32 and res["lod"] == {"Out": LOD}
    grads = back.backward(arr, TABLE, x * 10)["X"]
    for g, a in zip(grads, arr):
        np.testing.assert_array_equal(g, a * 10)
    with pytest.raises(ValueError, match=r"^array_to_lod_tensor: the array is empty$"):
        back.forward([], TABLE)
    assert back.infer(VarSpec((3, 2, 4), F32, 0), None)["Out"] == VarSpec((-1, 2, 4), F32, 0)
    assert back.infer(VarSpec((), F32), None) == {}


def test_reorder_lod_tensor_by_rank():
    ro = op("reorder_lod_tensor_by_rank")
    x = np.arange(6, dtype=np.float64)[:, None]
    res = ro.forward(x, TABLE, lod={"X": LOD})
    np.testing.assert_array_equal(res["Out"][:, 0], [2, 3, 4, 0, 1, 5])
    assert res["lod"] == {"Out": ((0, 3, 5, 6),)}
    d = np.arange(6.0)[:, None] * 10
    dx = ro.backward(x, TABLE, d, lod={"X": LOD})["X"]
    np.testing.assert_array_equal(dx[:, 0], [30, 40, 0, 10, 20, 50])
    # rows without LoD: one row per sequence, no LoD out
    res = ro.forward(x[:3], ((2, 1), (0, 1), (1, 1)))
    np.testing.assert_array_equal(res["Out"][:, 0], [2, 0, 1])
    assert res["lod"] == {}
    # an empty table selects nothing
    res = ro.forward(x, (), lod={"X": LOD})
    assert res["Out"].shape == (0, 1) and res["lod"] == {"Out": ((0,),)}
    spec = VarSpec((6, 1), VarType.FP64, 1)
    assert ro.infer(spec, None) == {"Out": spec}


def test_shrink_rnn_memory():
    sh = op("shrink_rnn_memory")
    x = np.arange(3, dtype=np.float32)[:, None]
    for i, k in [(0, 3), (1, 2), (2, 1), (3, 0)]:
        np.testing.assert_array_equal(sh.forward(x, idx(i), TABLE)["Out"], x[:k])
    dx = sh.backward(x, idx(1), TABLE, np.full((2, 1), 4.0, np.float32))["X"]
    assert dx.dtype == np.float32 and dx[:, 0].tolist() == [4, 4, 0]
    assert sh.infer(VarSpec((3, 2), F32, 1), None, None)["Out"] == VarSpec((-1, 2), F32, 1)


# -- select_output ------------------------------------------------------------------------------
def test_select_output():
    so = op("select_output")
    x = np.ones(2)
    assert so.infer(VarSpec((2,), F32), VarSpec((1,), VarType.INT32)) == \
        {"Out": [VarSpec((2,), F32)]}
    with pytest.raises(ValueError, match=r"^select_output: input Mask must hold exactly one "
                                         r"element, but its shape is \[2\]$"):
        so.infer(VarSpec((2,), F32), VarSpec((2,), VarType.INT32))
    assert so.forward(x, np.array([1]), n_out=3)["Out"] == [None, x, None]
    assert so.forward(x, np.array([2]))["Out"] == [None, None, x]
    with pytest.raises(ValueError, match=r"^select_output: Mask must be in \[0, 2\) \(the number "
                                         r"of outputs Out\), but received 2$"):
        so.forward(x, np.array([2]), n_out=2)
    with pytest.raises(ValueError, match=r"but received -1$"):
        so.forward(x, np.array([-1]))
    with pytest.raises(ValueError, match=r"^select_output: input Mask must hold exactly one "
                                         r"element, but its shape is \[1, 2\]$"):
        so.forward(x, np.array([[0, 1]]))
    assert so.backward(x, np.array([1]), [None, x * 2])["X"].tolist() == [2.0, 2.0]
    assert not so.backward(x, np.array([0]), [None, x])["X"].any()
    assert not so.backward(x, np.array([0]), [np.ones(3), x])["X"].any()


def test_summarize_zero_shows_no_values(capsys):
    # print_op.cc: summarize != -1 prints min(size, summarize) values
    op("print").forward(np.arange(3.0), summarize=0)
    assert _printed(capsys)[-1] == "    data: "
    with pytest.raises(ValueError) as e:
        op("assert").forward(np.array([False]), [np.arange(3.0)], summarize=0)
    assert str(e.value).splitlines()[1] == "  Data[0]: shape [3], values "


def test_split_lod_tensor_levels_of_a_three_level_lod_take_the_rows_below():
    s = op("split_lod_tensor")
    x = np.arange(8, dtype=np.float64)[:, None]
    lod = ((0, 2), (0, 2, 3), (0, 2, 5, 8))
    # level 0: one sequence of all 8 rows; level 1: rows [0, 5) and [5, 8); level 2: 3 parts
    res = s.forward(x, np.array([True]), lod={"X": lod})
    np.testing.assert_array_equal(res["OutTrue"][:, 0], np.arange(8))
    assert res["OutFalse"].shape == (0, 1)
    res = s.forward(x, np.array([False, True]), lod={"X": lod}, level=1)
    np.testing.assert_array_equal(res["OutTrue"][:, 0], [5, 6, 7])
    np.testing.assert_array_equal(res["OutFalse"][:, 0], [0, 1, 2, 3, 4])
    res = s.forward(x, np.array([True, False, True]), lod={"X": lod}, level=2)
    np.testing.assert_array_equal(res["OutTrue"][:, 0], [0, 1, 5, 6, 7])


def test_array_to_lod_tensor_of_one_step():
    # every sequence one row long: the array has a single entry
    back = op("array_to_lod_tensor")
    table = ((0, 1), (1, 1))
    res = back.forward([np.array([[1, 2], [3, 4]], np.int32)], table)
    assert res["Out"].dtype == np.int32 and res["Out"].tolist() == [[1, 2], [3, 4]]
    assert res["lod"] == {"Out": ((0, 1, 2),)}
    # rank order differs from the original order
    res = back.forward([np.array([[1.0], [2.0]]), np.array([[3.0]])], ((1, 2), (0, 1)))
    np.testing.assert_array_equal(res["Out"][:, 0], [2.0, 1.0, 3.0])
    assert res["lod"] == {"Out": ((0, 1, 3),)}


def test_rnn_memory_helper_copies_and_declares_out():
    h = op("rnn_memory_helper")
    spec = VarSpec((2, 3), F32, 1)
    assert h.infer(spec) == {"Out": spec}
    d = np.ones((2, 3))
    g = h.backward(d, d, d)["X"]
    assert g is not d and np.array_equal(g, d)
    out = h.forward(d)["Out"]
    assert out is not d and np.array_equal(out, d)


def test_select_output_binding_and_gradient_checks():
    so = op("select_output")
    x = np.ones(2)
    # a plain list of specs (no output_count): the mask alone sizes the outputs
    b = so.bind([VarSpec((2,), F32), VarSpec((1,), VarType.INT32)], {}, None)
    assert b.single is False and b.fn(x, np.array([1]))["Out"] == [None, x]

    class Specs(list):
        def output_count(self, slot):
            return {"Out": 3}[slot]
    b = so.bind(Specs([VarSpec((2,), F32), VarSpec((1,), VarType.INT32)]), {}, None)
    assert b.fn(x, np.array([0]))["Out"] == [x, None, None]
    with pytest.raises(ValueError, match=r"Mask must be in \[0, 3\)"):
        b.fn(x, np.array([3]))
    # the gradient checks the mask against the gradients it received
    with pytest.raises(ValueError, match=r"^select_output: Mask must be in \[0, 2\) \(the number "
                                         r"of outputs Out\), but received 2$"):
        so.backward(x, np.array([2]), [x, x])
    g = so.backward(x, np.array([0]), [None, x])["X"]
    assert g.shape == (2,) and g.dtype == x.dtype and not g.any()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert so.forward(x, np.array([[1]]), n_out=2)["Out"] == [None, x]


def test_print_of_a_two_level_lod(capsys):
    class WithLod(np.ndarray):
        pass
    x = np.zeros(3, np.float32).view(WithLod)
    x.lod = [[0, 1], [0, 2, 3]]
    op("print").forward(x)
    assert "    LoD: [[0,1,][0,2,3,]]" in _printed(capsys)


def test_merge_lod_tensor_three_sequences_per_branch_and_lod_on_one_side():
    mg = op("merge_lod_tensor")
    lt, lf = [1, 2, 3], [3, 1, 2]
    t = np.arange(sum(lt), dtype=np.float64)[:, None]
    f = -1 - np.arange(sum(lf), dtype=np.float64)[:, None]
    ot, of = np.concatenate([[0], np.cumsum(lt)]), np.concatenate([[0], np.cumsum(lf)])
    mask = np.array([0, 1, 0, 1, 0, 1], bool)
    res = mg.forward(None, mask, t, f, lod={"InTrue": (tuple(ot),), "InFalse": (tuple(of),)})
    ref, lengths = _merge_ref(mask, _rows_of(t, ot, [1] * 3), _rows_of(f, of, [1] * 3))
    np.testing.assert_array_equal(res["Out"], ref)
    # only InTrue has a LoD (InFalse: one row per sequence): Out still gets the merged LoD
    res = mg.forward(None, np.array([1, 0, 1, 0]), t[:3], f[:2], lod={"InTrue": ((0, 1, 3),)})
    np.testing.assert_array_equal(res["Out"][:, 0], [0, -1, 1, 2, -2])
    assert res["lod"] == {"Out": ((0, 1, 2, 4, 5),)}


def test_lod_tensor_to_array_of_rows_without_lod():
    ta = op("lod_tensor_to_array")
    x = np.arange(3, dtype=np.float32)[:, None]
    table = ((2, 1), (0, 1), (1, 1))
    arr = ta.forward(x, table)["Out"]
    assert len(arr) == 1 and arr[0][:, 0].tolist() == [2, 0, 1]
    dx = ta.backward(x, table, [np.array([[1.0], [2.0], [3.0]], np.float32)])["X"]
    assert dx[:, 0].tolist() == [2, 3, 1]


def test_select_output_accepts_a_mask_of_unknown_size():
    out = op("select_output").infer(VarSpec((2,), F32), VarSpec((-1,), VarType.INT32))
    assert out == {"Out": [VarSpec((2,), F32)]}
