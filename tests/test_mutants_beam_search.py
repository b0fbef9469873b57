"""Mutation-round tests for fluidlite/ops/beam_search.py (gather_tree, beam_search,
beam_search_decode).

References: fluid 1.8's C++ BeamSearchFunctor (paddle/fluid/operators/math/beam_search.cc)
written as a literal Python loop (``ref_beam_search``: its ``Insert`` into a sorted top list,
``ToMap`` and ``PruneEndBeams``); its outputs on tied scores were checked against Paddle 2.6's
beam_search op (the same C++ kernel) on 60 random tied cases -- two of them are spelled out
below. gather_tree against a per-beam backtrace loop; beam_search_decode against hand-built
searches.
"""
import numpy as np
import pytest

from fluidlite.core.dtypes import VarType
from fluidlite.core.registry import VarSpec, get_op_def
from tests.ops.test_beam_search import ref_gather_tree


def _offsets(lens):
    return tuple(tuple(np.concatenate([[0], np.cumsum(level)]).astype(int).tolist())
                 for level in lens)


def ref_beam_search(pre_ids, pre_scores, ids, scores, lens, level, beam_size, end_id,
                    is_accumulated):
    """fluid 1.8's BeamSearchFunctor, line by line (float32 scores as its ``float``)."""
    lod = [list(l) for l in _offsets(lens)]
    high = lod[level]
    for deeper in lod[level + 1:]:
        high = [deeper[i] for i in high]

    def less(a, b):                                  # Item::operator<
        return a[2] < b[2] or (a[2] == b[2] and a[0] < b[0])

    def insert(top, item):
        if len(top) < beam_size:
            top.append(None)
        elif less(item, top[beam_size - 1]):
            return
        for k in range(len(top) - 2, -1, -1):
            if less(top[k], item):
                top[k + 1] = top[k]
            else:
                top[k + 1] = item
                return
        top[0] = item

    width = scores.shape[1]
    per_offset = [[] for _ in range(high[-1])]
    for s in range(len(high) - 1):
        top = []
        for off in range(high[s], high[s + 1]):
            pre_id, pre_score = int(pre_ids[off, 0]), np.float32(pre_scores[off, 0])
            if pre_id == end_id:
                insert(top, (off, end_id, pre_score))
                continue
            for d in range(width):
                cid = int(ids[off, d]) if ids is not None else d
                sc = np.float32(scores[off, d]) if is_accumulated else \
                    np.float32(pre_score + np.log(np.float32(scores[off, d])))
                insert(top, (off, cid, sc))
        for item in top:
            per_offset[item[0]].append(item)
        # PruneEndBeams
        if all(item[1] == end_id and int(pre_ids[off, 0]) == end_id
               for off in range(high[s], high[s + 1]) for item in per_offset[off]):
            for off in range(high[s], high[s + 1]):
                per_offset[off] = []
    sel_ids, sel_sc, parent, low = [], [], [], [0]
    for off, items in enumerate(per_offset):
        for item in items:
            sel_ids.append(item[1])
            sel_sc.append(item[2])
            parent.append(off)
        low.append(len(sel_ids))
    return sel_ids, sel_sc, parent, (tuple(high), tuple(low))


def run_beam(pre_ids, pre_scores, ids, scores, lens, lod_slot="scores", **attrs):
    return get_op_def("beam_search").forward(pre_ids, pre_scores, ids, scores,
                                             lod={lod_slot: _offsets(lens)}, **attrs)


def _random_case(rng):
    nsrc = int(rng.integers(1, 4))
    pref = [int(rng.integers(0 if nsrc > 1 else 1, 4)) for _ in range(nsrc)]
    n = sum(pref)
    w = int(rng.integers(1, 5))
    acc = bool(rng.integers(0, 2))
    vals = [0.125, 0.25, 0.5] if acc else [0.25, 0.5]
    scores = rng.choice(vals, (n, w)).astype("float32")
    return dict(pre_ids=rng.integers(0, 3, (n, 1)).astype("int64"),
                pre_scores=rng.choice([0.125, 0.25, -0.5], (n, 1)).astype("float32"),
                ids=rng.integers(0, 9, (n, w)).astype("int64"), scores=scores,
                lens=[pref, [1] * n], level=0, beam_size=int(rng.integers(1, 5)), end_id=0,
                is_accumulated=acc)


@pytest.mark.parametrize("seed", range(4))
def test_beam_search_matches_fluids_functor_on_tied_scores(seed):
    rng = np.random.default_rng(seed)
    for _ in range(40):
        c = _random_case(rng)
        if rng.integers(0, 3) == 0:
            c["ids"] = None                          # ids omitted: the column is the id
        want = ref_beam_search(**c)
        got = run_beam(c["pre_ids"], c["pre_scores"], c["ids"], c["scores"], c["lens"],
                       level=0, beam_size=c["beam_size"], end_id=0,
                       is_accumulated=c["is_accumulated"])
        np.testing.assert_array_equal(got["selected_ids"].reshape(-1), want[0])
        np.testing.assert_array_equal(got["selected_scores"].reshape(-1),
                                      np.asarray(want[1], np.float32))
        np.testing.assert_array_equal(got["parent_idx"], want[2])
        assert got["lod"]["selected_ids"] == want[3] == got["lod"]["selected_scores"]
        assert got["selected_ids"].dtype == np.int64 and got["parent_idx"].dtype == np.int32
        assert got["selected_scores"].dtype == np.float32
        assert got["selected_ids"].shape == got["selected_scores"].shape == (len(want[0]), 1)


# Paddle 2.6's beam_search (fluid 1.8's kernel) on tied scores: the later prefix row wins a
# tie, and an equal later column of the same row replaces the last kept one
TIED = dict(pre_ids=np.array([[1], [2], [3], [4]], "int64"),
            pre_scores=np.array([[0.1], [0.2], [0.3], [0.4]], "float32"),
            ids=np.array([[4, 2, 5], [2, 1, 3], [3, 5, 2], [8, 2, 1]], "int64"),
            scores=np.array([[0.5, 0.5, 0.5], [0.5, 0.3, 0.1], [0.9, 0.9, 0.9],
                             [0.9, 0.5, 0.1]], "float32"),
            lens=[[2, 2], [1, 1, 1, 1]])


@pytest.mark.parametrize("beam_size, ids, scores, parent, low", [
    (2, [4, 2, 3, 8], [0.5, 0.5, 0.9, 0.9], [0, 1, 2, 3], (0, 1, 2, 3, 4)),
    (1, [2, 8], [0.5, 0.9], [1, 3], (0, 0, 1, 1, 2)),
    (3, [4, 2, 2, 3, 5, 8], [0.5, 0.5, 0.5, 0.9, 0.9, 0.9], [0, 0, 1, 2, 2, 3],
     (0, 2, 3, 5, 6)),
])
def test_beam_search_ties_as_paddle(beam_size, ids, scores, parent, low):
    got = run_beam(**TIED, level=0, beam_size=beam_size, end_id=0, is_accumulated=True)
    np.testing.assert_array_equal(got["selected_ids"].reshape(-1), ids)
    np.testing.assert_allclose(got["selected_scores"].reshape(-1), scores, rtol=1e-7)
    np.testing.assert_array_equal(got["parent_idx"], parent)
    assert got["lod"]["selected_ids"] == ((0, 2, 4), low)
    want = ref_beam_search(**TIED, level=0, beam_size=beam_size, end_id=0, is_accumulated=True)
    assert list(got["selected_ids"].reshape(-1)) == want[0]


@pytest.mark.parametrize("T", [0, 1, 2, 4])
def test_gather_tree_lengths(T):
    rng = np.random.default_rng(T)
    ids = rng.integers(0, 9, (T, 2, 3)).astype("int32")
    parents = rng.integers(0, 3, (T, 2, 3)).astype("int32")
    out = get_op_def("gather_tree").forward(ids, parents)["Out"]
    assert out.dtype == np.int32 and out.shape == ids.shape
    np.testing.assert_array_equal(out, ref_gather_tree(ids, parents))


@pytest.mark.parametrize("bad", [3, -1])
def test_gather_tree_parent_out_of_range(bad):
    ids = np.zeros((3, 1, 3), "int64")
    parents = np.zeros((3, 1, 3), "int64")
    parents[2, 0, 1] = bad
    with pytest.raises(ValueError, match=rf"^gather_tree: Parents\[2\] holds {max(bad, 0)}, "
                                         r"outside \[0, beam_size = 3\)$"):
        get_op_def("gather_tree").forward(ids, parents)


def _spec(shape, dtype=VarType.INT64):
    return VarSpec(tuple(shape), dtype)


@pytest.mark.parametrize("ids, parents, msg", [
    ([2, 3], [2, 3, 4], r"Ids and Parents must be 3-D \[max_time, batch_size, beam_size\], "
                        r"got \[2, 3\] and \[2, 3, 4\]"),
    ([2, 3, 4], [2, 3], r"Ids and Parents must be 3-D \[max_time, batch_size, beam_size\], "
                        r"got \[2, 3, 4\] and \[2, 3\]"),
    ([2, 3, 4], [2, 3, 5], r"Ids \[2, 3, 4\] and Parents \[2, 3, 5\] must have the same shape"),
    ([0, 3, 4], [2, 3, 4], r"Ids \[0, 3, 4\] and Parents \[2, 3, 4\] must have the same shape"),
    ([2, 3, 4], [0, 3, 4], r"Ids \[2, 3, 4\] and Parents \[0, 3, 4\] must have the same shape"),
])
def test_gather_tree_inference_errors(ids, parents, msg):
    with pytest.raises(ValueError, match="^gather_tree: " + msg + "$"):
        get_op_def("gather_tree").infer(_spec(ids), _spec(parents))


def test_gather_tree_inference():
    out = get_op_def("gather_tree").infer(_spec([-1, 3, 4]), _spec([5, 3, 4]))["Out"]
    assert tuple(out.shape) == (-1, 3, 4) and out.dtype == VarType.INT64
    with pytest.raises(ValueError, match=r"^gather_tree: Ids must be int32 or int64, got "):
        get_op_def("gather_tree").infer(_spec([2, 3, 4], VarType.FP32), _spec([2, 3, 4]))


def test_beam_search_decode_inference_and_errors():
    out = get_op_def("beam_search_decode").infer(_spec([-1, 1]), _spec([-1, 1], VarType.FP64))
    assert tuple(out["SentenceIds"].shape) == (-1,) and out["SentenceIds"].dtype == VarType.INT64
    assert tuple(out["SentenceScores"].shape) == (-1,)
    assert out["SentenceScores"].dtype == VarType.FP64
    assert out["SentenceIds"].lod_level == out["SentenceScores"].lod_level == 2
    d = get_op_def("beam_search_decode")
    step = np.zeros((1, 1), "int64")
    with pytest.raises(ValueError, match=r"^beam_search_decode: Ids must be a non-empty "
                                         r"LoDTensorArray \(one beam_search output per step\)$"):
        d.forward([], [], lod={"Ids": []})
    with pytest.raises(ValueError, match="non-empty LoDTensorArray"):
        d.forward(np.zeros((2, 1), "int64"), [step], lod={"Ids": [((0, 1), (0, 1))]})
    msg = (r"^beam_search_decode: every step of Ids needs the 2-level LoD that beam_search "
           r"gives its selected_ids$")
    for lods in ([((0, 1),)], [None], (((0, 1), (0, 1)),)):
        with pytest.raises(ValueError, match=msg):
            d.forward([step], [step.astype("float32")], lod={"Ids": lods})


def test_beam_search_decode_shapes_and_dtypes():
    # one source, one step of two candidates given as [2, 1] columns; float64 scores
    ids = [np.array([[0]], "int64"), np.array([[4], [2]], "int64")]
    scores = [np.array([[0.0]]), np.array([[-0.5], [-0.25]])]
    lods = [((0, 1), (0, 1)), ((0, 1), (0, 2))]
    res = get_op_def("beam_search_decode").forward(ids, scores, lod={"Ids": lods,
                                                                     "Scores": lods},
                                                   beam_size=2, end_id=1)
    np.testing.assert_array_equal(res["SentenceIds"], [0, 2, 0, 4])
    np.testing.assert_array_equal(res["SentenceScores"], [0.0, -0.25, 0.0, -0.5])
    assert res["SentenceIds"].dtype == np.int64 and res["SentenceScores"].dtype == np.float64
    assert res["lod"]["SentenceIds"] == res["lod"]["SentenceScores"] == ((0, 2), (0, 2, 4))


def test_beam_search_inference():
    d = get_op_def("beam_search")
    for lvl in (1, 2):
        out = d.infer(VarSpec((-1, 1), VarType.INT64, lvl), VarSpec((-1, 1), VarType.FP32, lvl),
                      VarSpec((-1, 3), VarType.INT64, lvl), VarSpec((-1, 3), VarType.FP64, lvl))
        for slot in ("selected_ids", "selected_scores"):
            assert tuple(out[slot].shape) == (-1, 1) and out[slot].lod_level == 2
        assert out["selected_ids"].dtype == VarType.INT64
        assert out["selected_scores"].dtype == VarType.FP64
        assert tuple(out["parent_idx"].shape) == (-1,)
        assert out["parent_idx"].dtype == VarType.INT32


@pytest.mark.parametrize("slot", ["scores", "ids", "pre_ids"])
def test_beam_search_takes_the_lod_of_any_input(slot):
    c = dict(TIED)
    got = run_beam(c["pre_ids"], c["pre_scores"], c["ids"], c["scores"], c["lens"],
                   lod_slot=slot, level=0, beam_size=2, end_id=0, is_accumulated=True)
    np.testing.assert_array_equal(got["selected_ids"].reshape(-1), [4, 2, 3, 8])


def test_beam_search_level_checks():
    with pytest.raises(ValueError, match=r"^beam_search: level 2 is out of range for a LoD of "
                                         r"2 level\(s\)$"):
        run_beam(**TIED, level=2, beam_size=2, end_id=0)
    with pytest.raises(ValueError, match=r"^beam_search: scores has no LoD; it must carry the "
                                         r"2-level LoD \[sources -> prefixes, prefixes -> "
                                         r"candidates rows\]$"):
        get_op_def("beam_search").forward(TIED["pre_ids"], TIED["pre_scores"], TIED["ids"],
                                          TIED["scores"], lod={}, beam_size=2)


@pytest.mark.parametrize("level", [0, 1])
def test_beam_search_three_level_lod(level):
    # sources -> groups -> prefixes -> rows: level 0 or 1 picks the grouping (ToAbsOffset)
    rng = np.random.default_rng(level)
    lens = [[2, 1], [1, 2, 1], [1, 1, 1, 1]]
    c = dict(pre_ids=np.array([[1], [2], [3], [4]], "int64"),
             pre_scores=np.zeros((4, 1), "float32"),
             ids=rng.integers(1, 9, (4, 3)).astype("int64"),
             scores=rng.choice([0.25, 0.5, 0.75], (4, 3)).astype("float32"))
    got = run_beam(c["pre_ids"], c["pre_scores"], c["ids"], c["scores"], lens, level=level,
                   beam_size=2, end_id=0, is_accumulated=True)
    want = ref_beam_search(**c, lens=lens, level=level, beam_size=2, end_id=0,
                           is_accumulated=True)
    np.testing.assert_array_equal(got["selected_ids"].reshape(-1), want[0])
    np.testing.assert_array_equal(got["parent_idx"], want[2])
    assert got["lod"]["selected_ids"] == want[3]


def test_beam_search_an_end_candidate_of_a_live_prefix_is_not_pruned():
    # source 0: its live prefix's best candidate is the end id 0 -- kept (fluid prunes a source
    # only when every kept candidate ends an already ended prefix)
    c = dict(pre_ids=np.array([[0], [5]], "int64"), pre_scores=np.array([[0.9], [0.1]], "float32"),
             ids=np.array([[7, 7], [0, 3]], "int64"),
             scores=np.array([[0.1, 0.1], [0.8, 0.2]], "float32"), lens=[[2], [1, 1]])
    got = run_beam(**c, level=0, beam_size=2, end_id=0, is_accumulated=True)
    np.testing.assert_array_equal(got["selected_ids"].reshape(-1), [0, 0])
    np.testing.assert_array_equal(got["parent_idx"], [0, 1])
    assert got["lod"]["selected_ids"] == ((0, 2), (0, 1, 2))


def test_beam_search_decode_candidate_outside_its_source():
    ids = [np.array([[0]], "int64"), np.array([[4], [9]], "int64"),
           np.array([[5], [6]], "int64")]
    scores = [np.array([[0.0]], "float32"), np.array([[-0.5], [-0.6]], "float32"),
              np.array([[-0.7], [-0.9]], "float32")]
    # step 2 names two prefixes (rows 0 and 1 of step 1), but step 1's LoD holds one
    lods = [((0, 1), (0, 1)), ((0, 1), (0, 1)), ((0, 2), (0, 1, 2))]
    with pytest.raises(ValueError, match=r"^beam_search_decode: candidate row 1 lies outside "
                                         r"the prefixes \[0, 1\) of its source$"):
        get_op_def("beam_search_decode").forward(ids, scores, lod={"Ids": lods},
                                                 beam_size=2, end_id=1)
