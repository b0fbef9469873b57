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
