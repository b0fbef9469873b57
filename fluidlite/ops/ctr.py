"""CTR ops of fluid's recommendation stack: ``cvm`` (continuous value model: the show / click
columns of an embedding), ``filter_by_instag`` (keep the instances whose tags meet a filter)
and ``rank_attention`` (a rank-pair-specific projection of the ads shown together).

Both are ``lod_aware`` (see ``core/lod.py``): ``cvm_grad`` reads X's LoD to find which row of CVM
belongs to each instance, ``filter_by_instag`` reads the LoD of Ins / Ins_tag and writes the LoD
of its three outputs. Kernels are vectorised (no Python loop per instance).
"""
from __future__ import annotations

from typing import Any, Dict, Optional

import numpy as np

from ..core.dtypes import VarType
from ..core.registry import OpDef, VarSpec, register


def _level0(lod: Any, slot: str) -> Optional[np.ndarray]:
    """The row offsets of the top-level sequences of input ``slot`` (int64), or None without a
    LoD. With one LoD level (what fluid documents) this is ``lod[0]``; deeper LoDs are
    composed down to rows (fluid read ``lod[0]`` as row offsets there, which miscounts)."""
    full = (lod or {}).get(slot)
    if not full:
        return None
    off = np.asarray(full[0], dtype=np.int64)
    for level in full[1:]:
        off = np.asarray(level, dtype=np.int64)[off]
    return off


# -- cvm --------------------------------------------------------------------------------------
@register
class Cvm(OpDef):
    """Continuous value model over X = [show, click, embedding...] ([N, D], D >= 2).

    ``use_cvm=True``: Y = [log(show + 1), log(click + 1) - log(show + 1), embedding...] ([N, D]);
    ``use_cvm=False``: Y = [embedding...] ([N, D - 2], the show/click columns dropped). Y keeps
    X's LoD.

    The gradient is fluid's ``cvm_grad``, which is *not* the derivative of the first two
    columns: dX[:, 2:] = the gradient of the embedding columns of Y, and dX[:, :2] = the
    (show, click) row of CVM that belongs to the instance -- one CVM row per instance when X has
    no LoD, one per sequence (shared by its instances) when it has one. fluid's parameter
    server pushes these values as the show/click statistics of the sparse features. CVM gets no
    gradient (a zero gradient when one is requested)."""
    type, inputs, outputs = "cvm", ("X", "CVM"), ("Y",)
    grad_uses = ("X", "CVM")
    lod_aware = True

    def infer(self, X, CVM, *, use_cvm=True):
        if X.ndim != 2:
            raise ValueError(f"cvm: Input(X)'s rank should be 2 ([N, 2 + embedding dim]), got "
                             f"shape {list(X.shape)}")
        if X.shape[1] >= 0 and X.shape[1] < 2:
            raise ValueError(f"cvm: X must have at least the 2 show/click columns, got shape "
                             f"{list(X.shape)}")
        if CVM.ndim != 2 or CVM.shape[1] not in (-1, 2):
            raise ValueError(f"cvm: Input(CVM) must be [N, 2] (show, click), got shape "
                             f"{list(CVM.shape)}")
        width = X.shape[1] if use_cvm or X.shape[1] < 0 else X.shape[1] - 2
        return {"Y": VarSpec((X.shape[0], width), X.dtype, X.lod_level)}

    def forward(self, X, CVM, lod=None, *, use_cvm=True):
        if X.ndim != 2 or X.shape[1] < 2:
            raise ValueError(f"cvm: X must be [N, D] with D >= 2 (show, click, embedding...), "
                             f"got shape {list(X.shape)}")
        if use_cvm:
            y = X.copy()
            y[:, 0] = np.log(X[:, 0] + 1)
            y[:, 1] = np.log(X[:, 1] + 1) - y[:, 0]
        else:
            y = X[:, 2:].copy()
        return {"Y": y, "lod": {"Y": (lod or {}).get("X")}}

    def backward(self, X, CVM, dY, lod=None, *, use_cvm=True):
        off = _level0(lod, "X")
        n = X.shape[0]
        cvm = np.asarray(CVM).reshape(-1, 2) if np.asarray(CVM).size else np.zeros((0, 2))
        if off is None:
            per_row = np.arange(n)
            want = n
        else:
            lens = np.diff(off)
            per_row = np.repeat(np.arange(lens.size), lens)
            want = lens.size
        if cvm.shape[0] < want:
            raise ValueError(f"cvm_grad: CVM must have one (show, click) row per "
                             f"{'sequence' if off is not None else 'instance'} of X ({want}), "
                             f"got {cvm.shape[0]}")
        dX = np.empty_like(X)
        dX[:, 2:] = dY[:, 2:] if use_cvm else dY
        dX[:, :2] = cvm[per_row]
        return {"X": dX, "CVM": np.zeros_like(CVM)}


# -- filter_by_instag -------------------------------------------------------------------------
@register
class FilterByInstag(OpDef):
    """Keep the instances of Ins whose tag list meets ``Filter_tag``.

    An instance is one row of Ins (``is_lod=False``) or one sequence of Ins's first LoD level
    (``is_lod=True``). Ins_tag holds one tag list per instance: its sequences (first LoD level),
    or, without a LoD, its rows. An instance is kept when one of its tags is in Filter_tag.

    * Out: the rows of the kept instances, in order; LoD ``[[0, len_1, len_1 + len_2, ...]]``.
    * LossWeight: float32 [k, 1] of ones, one per kept instance (LoD ``[[0, 1, ..., k]]``).
    * IndexMap: int64 [k, 3]: (first row in Out, first row in Ins, row count) per kept instance.

    When nothing is kept (as fluid): Out is one row of ``out_val_if_empty``, LossWeight
    ``[[0]]`` and IndexMap ``[[0, 1, 1]]`` (all with LoD ``[[0, 1]]``), so a loss weighted by
    LossWeight is zero. dIns copies the gradient of each kept row back to its row of Ins (zero
    elsewhere, and everywhere when nothing was kept)."""
    type, inputs, outputs = "filter_by_instag", ("Ins", "Ins_tag", "Filter_tag"), \
        ("Out", "LossWeight", "IndexMap")
    grad_uses = ("Ins", "LossWeight", "IndexMap")
    lod_aware = True

    def infer(self, Ins, Ins_tag, Filter_tag, *, is_lod, out_val_if_empty=0):
        if Ins.ndim < 2:
            raise ValueError(f"filter_by_instag: Ins must be [N, D] (D the embedding size), "
                             f"got shape {list(Ins.shape)}")
        if Ins_tag.dtype not in (VarType.INT64, VarType.INT32):
            raise ValueError(f"filter_by_instag: Ins_tag must hold int64 tags, got "
                             f"{Ins_tag.dtype}")
        if Filter_tag.dtype not in (VarType.INT64, VarType.INT32):
            raise ValueError(f"filter_by_instag: Filter_tag must hold int64 tags, got "
                             f"{Filter_tag.dtype}")
        return {"Out": VarSpec((-1,) + tuple(Ins.shape[1:]), Ins.dtype, 1),
                "LossWeight": VarSpec((-1, 1), VarType.FP32, 1),
                "IndexMap": VarSpec((-1, 3), VarType.INT64, 1)}

    @staticmethod
    def _instances(Ins: np.ndarray, lod: Dict[str, Any], is_lod: bool) -> np.ndarray:
        if not is_lod:
            return np.arange(Ins.shape[0] + 1, dtype=np.int64)
        off = _level0(lod, "Ins")
        if off is None:
            raise ValueError("filter_by_instag: is_lod=True but Ins has no LoD; feed a "
                             "LoDTensor (one sequence per instance) or pass is_lod=False")
        return off

    def forward(self, Ins, Ins_tag, Filter_tag, lod=None, *, is_lod, out_val_if_empty=0):
        lod = lod or {}
        ins_off = self._instances(Ins, lod, is_lod)
        n_ins = ins_off.size - 1
        tags = np.asarray(Ins_tag)
        tag_off = _level0(lod, "Ins_tag")
        if tag_off is None:             # no LoD: row i of Ins_tag is the tag list of instance i
            flat = tags.reshape(tags.shape[0], -1) if tags.ndim else tags.reshape(1, 1)
            tag_off = np.arange(flat.shape[0] + 1, dtype=np.int64) * flat.shape[1]
            tags = flat
        if tag_off.size - 1 != n_ins:
            raise ValueError(f"filter_by_instag: Ins_tag must hold one tag list per instance of "
                             f"Ins ({n_ins} {'sequences' if is_lod else 'rows'}), got "
                             f"{tag_off.size - 1} tag lists")
        tags = tags.reshape(-1)
        hit = np.isin(tags, np.asarray(Filter_tag).reshape(-1)).astype(np.int64)
        seg = np.repeat(np.arange(n_ins), np.diff(tag_off))
        keep = np.bincount(seg, weights=hit, minlength=n_ins)[:n_ins] > 0
        starts, lens = ins_off[:-1][keep], np.diff(ins_off)[keep]
        k = int(keep.sum())
        if k == 0:
            out = np.full((1,) + Ins.shape[1:], out_val_if_empty, dtype=Ins.dtype)
            one = ((0, 1),)
            return {"Out": out, "LossWeight": np.zeros((1, 1), np.float32),
                    "IndexMap": np.array([[0, 1, 1]], np.int64),
                    "lod": {"Out": one, "LossWeight": one, "IndexMap": one}}
        out_off = np.concatenate([[0], np.cumsum(lens)])
        total = int(out_off[-1])
        rows = np.repeat(starts - out_off[:-1], lens) + np.arange(total)
        index_map = np.stack([out_off[:-1], starts, lens], axis=1).astype(np.int64)
        per = (tuple(range(k + 1)),)
        return {"Out": Ins[rows], "LossWeight": np.ones((k, 1), np.float32),
                "IndexMap": index_map,
                "lod": {"Out": (tuple(int(v) for v in out_off),), "LossWeight": per,
                        "IndexMap": per}}

    def backward(self, Ins, LossWeight, IndexMap, dOut, dLossWeight=None, dIndexMap=None,
                 lod=None, *, is_lod, out_val_if_empty=0):
        dIns = np.zeros(Ins.shape, dtype=dOut.dtype)
        lw = np.asarray(LossWeight).reshape(-1)
        if lw.size == 1 and lw[0] == 0:          # nothing was kept: no row of Ins reached Out
            return {"Ins": dIns}
        imap = np.asarray(IndexMap).reshape(-1, 3)
        lens = imap[:, 2]
        total = int(lens.sum())
        base = np.arange(total) - np.repeat(np.concatenate([[0], np.cumsum(lens)[:-1]]), lens)
        src = np.repeat(imap[:, 0], lens) + base
        dst = np.repeat(imap[:, 1], lens) + base
        dIns[dst] = dOut[src]
        return {"Ins": dIns}


def _rank_pairs(X: np.ndarray, RankOffset: np.ndarray, max_rank: int):
    """(rows i, source rows idx, parameter blocks) of every valid (instance, k) pair of
    rank_attention: instance i of rank ``lower + 1`` and its k-th neighbour (rank ``faster +
    1``, at row ``idx``) use block ``lower * max_rank + faster`` of the parameter."""
    ro = np.asarray(RankOffset).astype(np.int64)
    n = X.shape[0]
    if ro.shape != (n, 2 * max_rank + 1):
        raise ValueError(f"rank_attention: RankOffset must be [{n}, 2 * MaxRank + 1 = "
                         f"{2 * max_rank + 1}] (X has {n} rows), got {list(ro.shape)}")
    lower = ro[:, :1] - 1                                   # [n, 1]
    faster = ro[:, 1::2] - 1                                # [n, max_rank]
    idx = ro[:, 2::2]                                       # [n, max_rank]
    valid = (lower >= 0) & (faster >= 0)
    rows, ks = np.nonzero(valid)
    src = idx[rows, ks]
    if src.size and (src.min() < 0 or src.max() >= n):
        raise ValueError(f"rank_attention: RankOffset's row indices must be in [0, {n}), got "
                         f"{int(src.min() if src.min() < 0 else src.max())}")
    block = lower[rows, 0] * max_rank + faster[rows, ks]
    if block.size and block.max() >= max_rank * max_rank:
        raise ValueError(f"rank_attention: ranks in RankOffset must be <= MaxRank "
                         f"({max_rank})")
    return rows, src, block


@register
class RankAttention(OpDef):
    """fluid 1.8's rank_attention (PaddleRec): X [N, C] holds the ads of page views,
    RankOffset [N, 2 * MaxRank + 1] (int32) per instance i its rank r_i (column 0, -1: none)
    and, for each neighbour rank k + 1, (k + 1, row of that neighbour) in columns 2k+1, 2k+2
    (-1: absent); RankParam [MaxRank^2 * C, P] holds one [C, P] block per (rank, neighbour
    rank) pair::

        Out[i] = sum_k X[row_ik] @ RankParam[block(r_i - 1, k) rows]   (valid pairs only)

    Out [N, P] shares X's LoD. As in fluid only RankParam gets a gradient:
    dRankParam[block] += X[row_ik]^T dOut[i]. (fluid 1.8 ran it on GPU only; this is its
    computation on the CPU.)"""
    type, inputs, outputs = "rank_attention", ("X", "RankOffset", "RankParam"), ("Out",)
    grad_uses = ("X", "RankOffset", "RankParam")
    grad_outputs = ("RankParam",)

    def infer(self, X, RankOffset, RankParam, *, MaxRank=3):
        if X.ndim != 2 or RankOffset.ndim != 2 or RankParam.ndim != 2:
            raise ValueError(f"rank_attention: X, RankOffset and RankParam must be 2-D, got "
                             f"{list(X.shape)}, {list(RankOffset.shape)} and "
                             f"{list(RankParam.shape)}")
        if RankOffset.shape[1] not in (-1, 2 * MaxRank + 1):
            raise ValueError(f"rank_attention: RankOffset must have 2 * MaxRank + 1 = "
                             f"{2 * MaxRank + 1} columns, got {RankOffset.shape[1]}")
        want = MaxRank * MaxRank * X.shape[1]
        if X.shape[1] >= 0 and RankParam.shape[0] not in (-1, want):
            raise ValueError(f"rank_attention: RankParam must have MaxRank^2 * X.shape[1] = "
                             f"{want} rows, got {RankParam.shape[0]}")
        return {"Out": VarSpec((X.shape[0], RankParam.shape[1]), X.dtype, X.lod_level)}

    def forward(self, X, RankOffset, RankParam, *, MaxRank=3):
        rows, src, block = _rank_pairs(X, RankOffset, MaxRank)
        blocks = RankParam.reshape(MaxRank * MaxRank, X.shape[1], RankParam.shape[1])
        out = np.zeros((X.shape[0], RankParam.shape[1]), X.dtype)
        np.add.at(out, rows, np.einsum("nc,ncp->np", X[src], blocks[block]))
        return {"Out": out}

    def backward(self, X, RankOffset, RankParam, dOut, *, MaxRank=3):
        rows, src, block = _rank_pairs(X, RankOffset, MaxRank)
        d = np.zeros((MaxRank * MaxRank, X.shape[1], RankParam.shape[1]), dOut.dtype)
        np.add.at(d, block, np.einsum("nc,np->ncp", X[src], dOut[rows]))
        return {"RankParam": d.reshape(RankParam.shape)}
