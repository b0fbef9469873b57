"""Beam-search ops (fluid 1.8): ``gather_tree`` (backtrace of BeamSearchDecoder's parent
pointers), ``beam_search`` (one LoD step of the classic While-loop decoder) and
``beam_search_decode`` (the sentences of a LoDTensorArray of beam_search steps).

None is differentiable (``no_grad``): they select integer ids.

LoD conventions of ``beam_search`` (as fluid): its inputs carry a 2-level LoD whose level
``level`` groups *prefixes* (rows) by *source* sentence; the output's level 0 keeps that
grouping and its level 1 says how many of the selected candidates each prefix got.
"""
from __future__ import annotations

from typing import List, Sequence, Tuple

import numpy as np

from ..core.dtypes import VarType
from ..core.registry import OpDef, VarSpec, register


@register
class GatherTree(OpDef):
    """Out[T-1, b, k] = Ids[T-1, b, k]; going back, p = Parents[t+1, b, p] and
    Out[t, b, k] = Ids[t, b, p] (the full id path ending in beam k); Ids, Parents
    [max_time, batch, beam] of one integer dtype."""
    type, inputs, outputs = "gather_tree", ("Ids", "Parents"), ("Out",)
    no_grad = True

    def infer(self, Ids, Parents):
        if Ids.ndim != 3 or Parents.ndim != 3:
            raise ValueError(f"gather_tree: Ids and Parents must be 3-D [max_time, batch_size, "
                             f"beam_size], got {list(Ids.shape)} and {list(Parents.shape)}")
        if any(a >= 0 and b >= 0 and a != b for a, b in zip(Ids.shape, Parents.shape)):
            raise ValueError(f"gather_tree: Ids {list(Ids.shape)} and Parents "
                             f"{list(Parents.shape)} must have the same shape")
        if Ids.dtype not in (VarType.INT32, VarType.INT64):
            raise ValueError(f"gather_tree: Ids must be int32 or int64, got {Ids.dtype}")
        return {"Out": Ids}

    def forward(self, Ids, Parents):
        T, B, K = Ids.shape
        out = np.empty_like(Ids)
        if T == 0:
            return {"Out": out}
        b = np.arange(B)[:, None]
        out[T - 1] = Ids[T - 1]
        parent = Parents[T - 1]
        for t in range(T - 2, -1, -1):
            if parent.size and (parent.min() < 0 or parent.max() >= K):
                raise ValueError(f"gather_tree: Parents[{t + 1}] holds {int(parent.max())}, "
                                 f"outside [0, beam_size = {K})")
            out[t] = Ids[t][b, parent]
            parent = Parents[t][b, parent]
        return {"Out": out}


def _abs_level(lod: Sequence[Sequence[int]], level: int) -> np.ndarray:
    """Offsets of LoD level ``level`` in rows (fluid's ToAbsOffset)."""
    off = np.asarray(lod[level], np.int64)
    for deeper in lod[level + 1:]:
        off = np.asarray(deeper, np.int64)[off]
    return off


def _top_beam(rows: Sequence[int], scores: Sequence[float], beam_size: int) -> List[int]:
    """Indices of the ``beam_size`` candidates fluid 1.8's BeamSearchFunctor keeps, best first:
    its ``Insert`` into a sorted top list, in candidate order, where item a < item b when
    a.score < b.score or (equal scores and a's prefix row < b's): on a tie the later prefix row
    ranks first, and an equal later candidate of the same row replaces the last kept one.
    Candidates scoring below the ``beam_size``-th best score never survive and are skipped."""
    if beam_size <= 0:
        return []
    sc = np.asarray(scores, np.float64)
    if sc.size > beam_size:
        cut = np.partition(sc, sc.size - beam_size)[sc.size - beam_size]
        cand = np.flatnonzero(sc >= cut).tolist()
    else:
        cand = list(range(sc.size))

    def less(i: int, j: int) -> bool:
        return bool(sc[i] < sc[j] or (sc[i] == sc[j] and rows[i] < rows[j]))

    top: List[int] = []
    for i in cand:
        if len(top) < beam_size:
            top.append(i)
        elif less(i, top[-1]):
            continue
        k = len(top) - 2
        while k >= 0 and less(top[k], i):
            top[k + 1] = top[k]
            k -= 1
        top[k + 1] = i
    return top


@register
class BeamSearch(OpDef):
    """One beam-search step over a LoD batch. For each source (rows ``[s0, s1)`` of LoD level
    ``level``) the candidates are, per prefix row r: (r, end_id, pre_scores[r]) if
    pre_ids[r] == end_id, else (r, ids[r, k] (or k), s) for each column k, with
    s = scores[r, k] when ``is_accumulated`` else pre_scores[r] + log(scores[r, k]). The
    ``beam_size`` best (score descending; ties as fluid 1.8's kernel: the later prefix row
    first, see ``_top_beam``) are kept; a source
    whose kept candidates all end an ended prefix is pruned. Outputs, grouped by prefix:
    selected_ids / selected_scores [M, 1] with LoD [sources -> prefixes, prefixes -> selected]
    and parent_idx [M] (the prefix row of each)."""
    type = "beam_search"
    inputs = ("pre_ids", "pre_scores", "ids?", "scores")
    outputs = ("selected_ids", "selected_scores", "parent_idx?")
    no_grad = True
    lod_aware = True

    def infer(self, pre_ids, pre_scores, ids, scores):
        lvl = max(scores.lod_level, 2)
        return {"selected_ids": VarSpec((-1, 1), VarType.INT64, lvl),
                "selected_scores": VarSpec((-1, 1), scores.dtype, lvl),
                "parent_idx": VarSpec((-1,), VarType.INT32)}

    def forward(self, pre_ids, pre_scores, ids, scores, lod=None, *, level=0, beam_size=1,
                end_id=0, is_accumulated=True):
        lod = lod or {}
        full = lod.get("scores") or lod.get("ids") or lod.get("pre_ids")
        if not full:
            raise ValueError("beam_search: scores has no LoD; it must carry the 2-level LoD "
                             "[sources -> prefixes, prefixes -> candidates rows]")
        if level >= len(full):
            raise ValueError(f"beam_search: level {level} is out of range for a LoD of "
                             f"{len(full)} level(s)")
        high = _abs_level(full, level)
        n_rows = scores.shape[0]
        pre_ids = pre_ids.reshape(-1)
        pre_sc = pre_scores.reshape(-1)
        per_prefix: List[List[Tuple[int, float]]] = [[] for _ in range(n_rows)]
        for s in range(high.size - 1):
            rows, cand_ids, cand_sc = [], [], []
            for r in range(int(high[s]), int(high[s + 1])):
                if pre_ids[r] == end_id:
                    rows.append(r)
                    cand_ids.append(end_id)
                    cand_sc.append(pre_sc[r])
                    continue
                sc = scores[r] if is_accumulated else pre_sc[r] + np.log(scores[r])
                rows += [r] * sc.size
                cand_ids += list(ids[r] if ids is not None else range(sc.size))
                cand_sc += list(sc)
            if not rows:
                continue
            order = _top_beam(rows, cand_sc, beam_size)
            picked = [(rows[i], int(cand_ids[i]), float(cand_sc[i])) for i in order]
            if all(cid == end_id and pre_ids[r] == end_id for r, cid, _ in picked):
                continue                  # every branch of this source has ended: prune it
            for r, cid, sc in picked:
                per_prefix[r].append((cid, sc))
        sel_ids, sel_sc, parents, low = [], [], [], [0]
        for r, items in enumerate(per_prefix):
            for cid, sc in items:
                sel_ids.append(cid)
                sel_sc.append(sc)
                parents.append(r)
            low.append(len(sel_ids))
        out_lod = (tuple(int(v) for v in high), tuple(low))
        return {"selected_ids": np.asarray(sel_ids, np.int64).reshape(-1, 1),
                "selected_scores": np.asarray(sel_sc, scores.dtype).reshape(-1, 1),
                "parent_idx": np.asarray(parents, np.int32),
                "lod": {"selected_ids": out_lod, "selected_scores": out_lod}}


@register
class BeamSearchDecode(OpDef):
    """Backtrace the steps of a beam search (LoDTensorArrays ``Ids`` / ``Scores`` of
    ``beam_search`` outputs, 2-level LoD each) into full sentences: per source, every surviving
    candidate of the last step it appears in is followed back through its prefixes; repeated
    end tokens are dropped. Sentences of a source are sorted by their final score (descending).
    SentenceIds / SentenceScores are 1-D with LoD [sources -> sentences, sentences -> tokens]."""
    type = "beam_search_decode"
    inputs = ("Ids", "Scores")
    outputs = ("SentenceIds", "SentenceScores")
    no_grad = True
    lod_aware = True

    def infer(self, Ids, Scores):
        return {"SentenceIds": VarSpec((-1,), VarType.INT64, 2),
                "SentenceScores": VarSpec((-1,), Scores.dtype, 2)}

    def forward(self, Ids, Scores, lod=None, *, beam_size=1, end_id=0):
        lods = (lod or {}).get("Ids")
        if not isinstance(Ids, list) or not Ids:
            raise ValueError("beam_search_decode: Ids must be a non-empty LoDTensorArray (one "
                             "beam_search output per step)")
        if not isinstance(lods, list) or any(l is None or len(l) < 2 for l in lods):
            raise ValueError("beam_search_decode: every step of Ids needs the 2-level LoD "
                             "that beam_search gives its selected_ids")
        n_src = len(lods[0][0]) - 1
        sents: List[List[Tuple[List[int], List[float]]]] = [[] for _ in range(n_src)]
        follow: List[List[int]] = [[] for _ in range(n_src)]    # candidate rows being traced
        for step in range(len(Ids) - 1, -1, -1):
            ids, sc = Ids[step].reshape(-1), Scores[step].reshape(-1)
            src_lod, sen_lod = lods[step][0], lods[step][1]
            for s in range(n_src):
                p0, p1 = src_lod[s], src_lod[s + 1]
                if not follow[s]:          # this source ends here (pruned or the last step)
                    for p in range(p0, p1):
                        for c in range(sen_lod[p], sen_lod[p + 1]):
                            follow[s].append(c)
                            sents[s].append(([int(ids[c])], [float(sc[c])]))
                    # candidates -> their prefix rows
                    follow[s] = [self._prefix(sen_lod, p0, p1, c) for c in follow[s]]
                    continue
                for k, c in enumerate(follow[s]):
                    words, scores = sents[s][k]
                    if ids[c] != end_id or not words:
                        words.append(int(ids[c]))
                        scores.append(float(sc[c]))
                    follow[s][k] = self._prefix(sen_lod, p0, p1, c)
        out_ids, out_sc, src_off, tok_off = [], [], [0], [0]
        for s in range(n_src):
            done = sorted(sents[s], key=lambda ws: -ws[1][0])   # final score first
            for words, scores in done:
                out_ids += words[::-1]
                out_sc += scores[::-1]
                tok_off.append(len(out_ids))
            src_off.append(src_off[-1] + len(done))
        out_lod = (tuple(src_off), tuple(tok_off))
        return {"SentenceIds": np.asarray(out_ids, np.int64),
                "SentenceScores": np.asarray(out_sc, Scores[0].dtype),
                "lod": {"SentenceIds": out_lod, "SentenceScores": out_lod}}

    @staticmethod
    def _prefix(sen_lod: Sequence[int], p0: int, p1: int, cand: int) -> int:
        for p in range(p0, p1):
            if sen_lod[p] <= cand < sen_lod[p + 1]:
                return p
        raise ValueError(f"beam_search_decode: candidate row {cand} lies outside the prefixes "
                         f"[{p0}, {p1}) of its source")
