"""Tests written from the mutation run of ``fluidlite/ops/ctr.py`` (issue 28, round 10): the
build-time checks and output specs of cvm / filter_by_instag / rank_attention (fluid 1.8's
InferShape: shapes, dtypes, LoD levels, messages), cvm at its smallest width and with an empty
batch, filter_by_instag's gradient when instances are dropped (rows move), with one kept
instance, with trailing instances without tags and with a 0-d tag, float32 gradients, and
rank_attention's index / rank checks.

References: fluid 1.8's kernels transcribed as float64 NumPy loops (cvm_op.h: Y = [log(show +
1), log(click + 1) - log(show + 1), emb...], cvm_grad copies the CVM row of the instance;
filter_by_instag_op.h: kept instances' rows in order, IndexMap (out start, ins start, rows),
dIns = dOut routed back by IndexMap; rank_attention.cu.h's expand_input_by_rank /
expand_rank_attention_param)."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core.dtypes import VarType
from fluidlite.core.registry import VarSpec, get_op_def

PLACE = fluid.CPUPlace()


def _lod(arr, lens):
    return fluid.create_lod_tensor(np.asarray(arr), [list(lens)], PLACE)


# -- cvm ---------------------------------------------------------------------------------------
def test_cvm_inference():
    d = get_op_def("cvm")
    y = d.infer(VarSpec((-1, 6), "float32", 1), VarSpec((-1, 2), "float32"), use_cvm=True)["Y"]
    assert y == VarSpec((-1, 6), "float32", 1)
    y = d.infer(VarSpec((5, 6), "float64", 2), VarSpec((5, 2), "float64"), use_cvm=False)["Y"]
    assert y == VarSpec((5, 4), "float64", 2)
    # the smallest X: show and click only
    assert d.infer(VarSpec((5, 2), "float32"), VarSpec((5, 2), "float32"),
                   use_cvm=False)["Y"].shape == (5, 0)
    assert d.infer(VarSpec((5, 2), "float32"), VarSpec((5, 2), "float32"),
                   use_cvm=True)["Y"].shape == (5, 2)
    # unknown widths pass
    assert d.infer(VarSpec((5, -1), "float32"), VarSpec((5, -1), "float32"),
                   use_cvm=False)["Y"].shape == (5, -1)
    with pytest.raises(ValueError, match=r"cvm: X must have at least the 2 show/click columns, "
                                         r"got shape \[5, 0\]"):
        d.infer(VarSpec((5, 0), "float32"), VarSpec((5, 2), "float32"), use_cvm=True)
    with pytest.raises(ValueError, match=r"cvm: X must have at least the 2 show/click columns, "
                                         r"got shape \[5, 1\]"):
        d.infer(VarSpec((5, 1), "float32"), VarSpec((5, 2), "float32"), use_cvm=True)


def test_cvm_forward_at_width_two_and_its_errors():
    d = get_op_def("cvm")
    x = np.array([[3.0, 1.0], [0.0, 0.0]])
    y = d.forward(x, np.ones((2, 2)), use_cvm=True)["Y"]
    np.testing.assert_allclose(y, [[np.log(4.0), np.log(2.0) - np.log(4.0)], [0.0, 0.0]],
                               rtol=1e-15)
    assert d.forward(x, np.ones((2, 2)), use_cvm=False)["Y"].shape == (2, 0)
    for bad in (np.ones((3, 1)), np.ones(4)):
        with pytest.raises(ValueError, match=r"cvm: X must be \[N, D\] with D >= 2 \(show, "
                                             r"click, embedding...\), got shape \[" +
                                             ", ".join(map(str, bad.shape)) + r"\]"):
            d.forward(bad, np.ones((3, 2)), use_cvm=True)


def test_cvm_grad_rows_without_lod_and_the_cvm_gradient():
    """Without a LoD instance i takes CVM row i (extra CVM rows are not read); CVM gets a zero
    gradient of its own shape."""
    d = get_op_def("cvm")
    x = np.arange(12, dtype=np.float64).reshape(3, 4)
    cvm = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]])
    dy = np.full((3, 4), 0.5)
    g = d.backward(x, cvm, dy, use_cvm=True)
    np.testing.assert_array_equal(g["X"][:, :2], cvm[:3])
    np.testing.assert_array_equal(g["X"][:, 2:], dy[:, 2:])
    assert set(g) == {"X", "CVM"}
    assert g["CVM"].shape == (4, 2) and g["CVM"].dtype == np.float64 and not g["CVM"].any()
    with pytest.raises(ValueError, match=r"cvm_grad: CVM must have one \(show, click\) row per "
                                         r"instance of X \(3\), got 2"):
        d.backward(x, cvm[:2], dy, use_cvm=True)
    with pytest.raises(ValueError, match=r"per instance of X \(1\), got 0"):
        d.backward(x[:1], np.zeros((0, 2)), dy[:1], use_cvm=True)


def test_cvm_grad_of_an_empty_batch():
    d = get_op_def("cvm")
    g = d.backward(np.zeros((0, 4)), np.zeros((0, 2)), np.zeros((0, 4)), use_cvm=True)
    assert g["X"].shape == (0, 4) and g["CVM"].shape == (0, 2)


# -- filter_by_instag --------------------------------------------------------------------------
def test_filter_by_instag_inference():
    d = get_op_def("filter_by_instag")
    out = d.infer(VarSpec((-1, 3), "float32", 1), VarSpec((-1, 1), "int64", 1),
                  VarSpec((-1,), "int64"), is_lod=True)
    assert out == {"Out": VarSpec((-1, 3), "float32", 1),
                   "LossWeight": VarSpec((-1, 1), VarType.FP32, 1),
                   "IndexMap": VarSpec((-1, 3), VarType.INT64, 1)}
    with pytest.raises(ValueError, match=r"filter_by_instag: Ins must be \[N, D\] \(D the "
                                         r"embedding size\), got shape \[5\]"):
        d.infer(VarSpec((5,), "float32"), VarSpec((-1, 1), "int64"), VarSpec((-1,), "int64"),
                is_lod=False)
    with pytest.raises(ValueError, match=r"filter_by_instag: Ins_tag must hold int64 tags, "
                                         r"got "):
        d.infer(VarSpec((5, 2), "float32"), VarSpec((-1, 1), "float32"),
                VarSpec((-1,), "int64"), is_lod=False)
    with pytest.raises(ValueError, match=r"filter_by_instag: Filter_tag must hold int64 tags, "
                                         r"got "):
        d.infer(VarSpec((5, 2), "float32"), VarSpec((-1, 1), "int64"),
                VarSpec((-1,), "float64"), is_lod=False)


def _filter_ref(ins, ins_lens, tag_lists, filt):
    off = np.concatenate([[0], np.cumsum(ins_lens)]).astype(int)
    rows, imap, pos = [], [], 0
    for i, tags in enumerate(tag_lists):
        if set(tags) & set(filt):
            rows.append(ins[off[i]:off[i + 1]])
            imap.append([pos, off[i], ins_lens[i]])
            pos += ins_lens[i]
    return np.concatenate(rows), np.array(imap)


def test_filter_by_instag_gradient_when_instances_are_dropped():
    """Instances 0 and 2 dropped: Out's rows come from further down Ins, and dIns puts each
    row of dOut back at its Ins row (zero on the dropped rows)."""
    d = get_op_def("filter_by_instag")
    ins_lens, tag_lists = [1, 2, 2, 1], [[4], [3, 9], [5], [3]]
    ins = np.random.default_rng(0).uniform(-1, 1, (6, 2)).astype(np.float32)
    tags = np.array([t for ts in tag_lists for t in ts], np.int64).reshape(-1, 1)
    lod = {"Ins": ((0, 1, 3, 5, 6),), "Ins_tag": ((0, 1, 3, 4, 5),)}
    res = d.forward(ins, tags, np.array([3], np.int64), lod, is_lod=True)
    want_out, want_map = _filter_ref(ins, ins_lens, tag_lists, [3])
    np.testing.assert_array_equal(res["Out"], want_out)
    np.testing.assert_array_equal(res["IndexMap"], want_map)
    dout = np.arange(1, 7, dtype=np.float32).reshape(3, 2)
    g = d.backward(ins, res["LossWeight"], res["IndexMap"], dout, lod=lod, is_lod=True)["Ins"]
    assert g.dtype == np.float32
    want = np.zeros((6, 2), np.float32)
    want[1:3], want[5] = dout[:2], dout[2]
    np.testing.assert_array_equal(g, want)


def test_filter_by_instag_one_kept_instance_gets_its_gradient():
    d = get_op_def("filter_by_instag")
    ins = np.arange(6, dtype=np.float64).reshape(3, 2)
    res = d.forward(ins, np.array([[1], [2], [1]], np.int64), np.array([2], np.int64),
                    is_lod=False)
    np.testing.assert_array_equal(res["Out"], ins[1:2])
    np.testing.assert_array_equal(res["LossWeight"], [[1.0]])
    g = d.backward(ins, res["LossWeight"], res["IndexMap"], np.array([[7.0, 8.0]]),
                   is_lod=False)["Ins"]
    np.testing.assert_array_equal(g, [[0, 0], [7, 8], [0, 0]])


def test_filter_by_instag_trailing_instances_without_tags():
    """The last instances' tag lists are empty (Ins_tag's LoD ends in repeated offsets):
    they are not kept."""
    d = get_op_def("filter_by_instag")
    ins = np.arange(8, dtype=np.float64).reshape(4, 2)
    lod = {"Ins_tag": ((0, 1, 2, 2, 2),)}
    res = d.forward(ins, np.array([[6], [7]], np.int64), np.array([6, 7], np.int64), lod,
                    is_lod=False)
    np.testing.assert_array_equal(res["Out"], ins[:2])
    np.testing.assert_array_equal(res["IndexMap"], [[0, 0, 1], [1, 1, 1]])


def test_filter_by_instag_scalar_tag_of_one_instance():
    d = get_op_def("filter_by_instag")
    ins = np.array([[1.0, 2.0]])
    res = d.forward(ins, np.array(5, np.int64), np.array([5], np.int64), is_lod=False)
    np.testing.assert_array_equal(res["Out"], ins)
    res = d.forward(ins, np.array(5, np.int64), np.array([4], np.int64), is_lod=False)
    np.testing.assert_array_equal(res["LossWeight"], [[0.0]])


def test_filter_by_instag_errors_and_empty_lods():
    d = get_op_def("filter_by_instag")
    with pytest.raises(ValueError, match=r"filter_by_instag: Ins_tag must hold one tag list per "
                                         r"instance of Ins \(3 rows\), got 2 tag lists"):
        d.forward(np.ones((3, 2)), np.array([[1], [2]], np.int64), np.array([1], np.int64),
                  is_lod=False)
    with pytest.raises(ValueError, match=r"filter_by_instag: is_lod=True but Ins has no LoD; "
                                         r"feed a LoDTensor \(one sequence per instance\) or "
                                         r"pass is_lod=False"):
        d.forward(np.ones((3, 2)), np.array([[1], [2], [3]], np.int64),
                  np.array([1], np.int64), is_lod=True)
    # nothing kept: every output's LoD is [[0, 1]] (fluid's placeholder)
    prog = fluid.Program()
    with fluid.program_guard(prog, fluid.Program()):
        iv = fluid.data("ins", [-1, 2], "float64")
        tv = fluid.data("tag", [-1, 1], "int64")
        out, lw = fluid.layers.filter_by_instag(iv, tv, fluid.data("ft", [-1], "int64"), False)
    imap = prog.global_block().ops[-1].output("IndexMap")[0]
    got = fluid.Executor().run(prog, feed={"ins": np.ones((2, 2)),
                                           "tag": np.array([[1], [2]], np.int64),
                                           "ft": np.array([9], np.int64)},
                               fetch_list=[out, lw, imap], scope=fluid.Scope(),
                               return_numpy=False)
    assert [t.lod() for t in got] == [[[0, 1]]] * 3
    assert np.array(got[2]).dtype == np.int64


# -- rank_attention ----------------------------------------------------------------------------
def _ro(rows):
    return np.array(rows, np.int32)


def test_rank_attention_inference():
    d = get_op_def("rank_attention")
    s = lambda *shape, lod=0: VarSpec(shape, "float32", lod)
    out = d.infer(s(-1, 4, lod=1), VarSpec((-1, 7), "int32"), s(36, 5), MaxRank=3)["Out"]
    assert out == VarSpec((-1, 5), "float32", 1)
    assert d.infer(s(6, 4), VarSpec((6, -1), "int32"), s(-1, 5), MaxRank=3)["Out"] \
        == VarSpec((6, 5), "float32", 0)
    for x, ro, p, shown in ((s(6, 4, 1), s(6, 7), s(36, 5), r"\[6, 4, 1\], \[6, 7\] and \[36, 5\]"),
                            (s(6, 4), s(6, 7, 1), s(36, 5), r"\[6, 4\], \[6, 7, 1\] and \[36, 5\]"),
                            (s(6, 4), s(6, 7), s(36, 5, 1), r"\[6, 4\], \[6, 7\] and \[36, 5, 1\]")):
        with pytest.raises(ValueError, match=r"rank_attention: X, RankOffset and RankParam must "
                                             r"be 2-D, got " + shown):
            d.infer(x, ro, p, MaxRank=3)
    with pytest.raises(ValueError, match=r"rank_attention: RankOffset must have 2 \* MaxRank \+ "
                                         r"1 = 7 columns, got 5"):
        d.infer(s(6, 4), s(6, 5), s(36, 5), MaxRank=3)
    with pytest.raises(ValueError, match=r"rank_attention: RankParam must have MaxRank\^2 \* "
                                         r"X.shape\[1\] = 9 rows, got 8"):
        d.infer(s(6, 1), s(6, 7), s(8, 5), MaxRank=3)
    # X with no columns: MaxRank^2 blocks of 0 rows each, so RankParam must have 0 rows too
    assert d.infer(s(6, 0), s(6, 7), s(0, 5), MaxRank=3)["Out"].shape == (6, 5)
    with pytest.raises(ValueError, match=r"X.shape\[1\] = 0 rows, got 4"):
        d.infer(s(6, 0), s(6, 7), s(4, 5), MaxRank=3)


def test_rank_attention_offset_checks():
    d = get_op_def("rank_attention")
    x = np.ones((2, 1))
    p = np.ones((4, 1))                 # MaxRank 2: 4 blocks of [1, 1]
    with pytest.raises(ValueError, match=r"rank_attention: RankOffset must be \[2, 2 \* MaxRank "
                                         r"\+ 1 = 5\] \(X has 2 rows\), got \[2, 3\]"):
        d.forward(x, _ro([[1, 1, 0], [1, 1, 0]]), p, MaxRank=2)
    # a neighbour row outside [0, n): the offending index is named
    with pytest.raises(ValueError, match=r"rank_attention: RankOffset's row indices must be in "
                                         r"\[0, 2\), got 2"):
        d.forward(x, _ro([[1, 1, 0, 2, 2], [2, 1, 0, 2, 1]]), p, MaxRank=2)
    with pytest.raises(ValueError, match=r"row indices must be in \[0, 2\), got -3"):
        d.forward(x, _ro([[1, 1, -3, -1, -1], [1, 1, 1, -1, -1]]), p, MaxRank=2)
    # a rank above MaxRank
    with pytest.raises(ValueError, match=r"rank_attention: ranks in RankOffset must be <= "
                                         r"MaxRank \(2\)"):
        d.forward(x, _ro([[3, 1, 0, -1, -1], [1, 1, 1, -1, -1]]), p, MaxRank=2)


def test_rank_attention_float32_param_gradient():
    d = get_op_def("rank_attention")
    rng = np.random.default_rng(3)
    x = rng.uniform(-1, 1, (2, 3)).astype(np.float32)
    p = rng.uniform(-1, 1, (4 * 3, 2)).astype(np.float32)
    ro = _ro([[1, 1, 0, 2, 1], [2, 1, 0, -1, -1]])
    out = d.forward(x, ro, p, MaxRank=2)["Out"]
    blocks = p.astype(np.float64).reshape(4, 3, 2)
    x64 = x.astype(np.float64)
    want = np.stack([x64[0] @ blocks[0] + x64[1] @ blocks[1], x64[0] @ blocks[2]])
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
    dout = rng.uniform(-1, 1, (2, 2)).astype(np.float32)
    g = d.backward(x, ro, p, dout, MaxRank=2)["RankParam"]
    assert g.dtype == np.float32 and g.shape == p.shape
    gw = np.zeros((4, 3, 2))
    gw[0] += np.outer(x64[0], dout[0])
    gw[1] += np.outer(x64[1], dout[0])
    gw[2] += np.outer(x64[0], dout[1])
    np.testing.assert_allclose(g, gw.reshape(12, 2), rtol=1e-5, atol=1e-6)
