"""fluid 1.8's local ops of distributed training (operators/distributed_ops/): ``split_ids``
routes ids to parameter-server shards by ``id % shard_num``, ``merge_ids`` puts the rows the
shards sent back in the order of the original ids (split_ids -> prefetch -> merge_ids),
``ref_by_trainer_id`` picks the trainer's copy of a parameter and ``fake_init`` declares a
table's shape on a trainer. None has a gradient (fluid registers no grad op maker for them).
"""
from __future__ import annotations

import functools

import numpy as np

from ..core.dtypes import VarType
from ..core.registry import Binding, OpDef, VarSpec, register
from ..core.selected_rows import SelectedRows


@register
class SplitIds(OpDef):
    """Ids (one or more [n_i, 1] int64 tensors) are concatenated, de-duplicated and sorted;
    Out[k] ([m_k, 1]) gets the ids with ``id % len(Out) == k``, ascending. A SelectedRows Ids
    is split by row instead: Out[k] holds the rows (in input order) with ``row % len(Out) ==
    k`` and their values, with Ids's height."""
    type, inputs, outputs = "split_ids", ("Ids*",), ("Out*",)
    no_grad = True

    def infer(self, Ids):
        if Ids[0].ndim != 2:
            raise ValueError(f"split_ids: Ids must be 2-D [batch, 1], got shape "
                             f"{list(Ids[0].shape)}")
        return {}

    def var_types(self, in_types, attrs):
        t = (in_types.get("Ids") or [None])[0]
        return {"Out": VarType.SELECTED_ROWS if t == VarType.SELECTED_ROWS
                else VarType.LOD_TENSOR}

    def bind(self, in_specs, attrs, outputs_present):
        # the shard count is the number of Out variables: the plan tells it
        count = getattr(in_specs, "output_count", None)
        n = count("Out") if count is not None else None
        return Binding(functools.partial(self.forward, n_out=n), False)

    def forward(self, Ids, n_out=None):
        if not n_out:
            raise ValueError("split_ids: the number of outputs Out (the shard count) is "
                             "unknown; give Out one variable per shard")
        if type(Ids[0]) is SelectedRows:
            sr = Ids[0]
            shard = sr.rows % n_out
            return {"Out": [SelectedRows(sr.rows[shard == k], sr.value[shard == k], sr.height)
                            for k in range(n_out)]}
        ids = np.concatenate([np.asarray(t).reshape(-1) for t in Ids])
        uniq = np.unique(ids)                 # fluid: a std::set, so sorted and de-duplicated
        shard = uniq.astype(np.int64) % n_out
        return {"Out": [uniq[shard == k].reshape(-1, 1) for k in range(n_out)]}


@register
class MergeIds(OpDef):
    """Out[i] [len(Ids[i]), D]: row j is the row of X[k] whose id (Rows[k][r]) equals
    Ids[i][j] -- the embeddings the shards returned, put back in the order of the original
    ids; Out[i] keeps Ids[i]'s LoD. Rows[k] ([n_k, 1] int64) names the rows of X[k] ([n_k, D]);
    the ids across all Rows must be distinct."""
    type, inputs, outputs = "merge_ids", ("Ids*", "Rows*", "X*"), ("Out*",)
    no_grad = True
    lod_aware = True

    def infer(self, Ids, Rows, X):
        if Ids[0].ndim != 2 or Ids[0].shape[1] not in (1, -1):
            raise ValueError(f"merge_ids: Ids must be [batch, 1], got shape "
                             f"{list(Ids[0].shape)}")
        if len(Rows) != len(X):
            raise ValueError(f"merge_ids: Rows and X must have as many tensors (one per "
                             f"shard), got {len(Rows)} and {len(X)}")
        d = X[0].shape[-1]
        return {"Out": [VarSpec((t.shape[0], d), X[0].dtype, t.lod_level) for t in Ids]}

    def forward(self, Ids, Rows, X, lod=None):
        d = X[0].shape[1]
        for k, x in enumerate(X):
            if x.shape[1] != d or x.shape[0] != np.size(Rows[k]):
                raise ValueError(f"merge_ids: X[{k}] {list(x.shape)} must be [len(Rows[{k}]) "
                                 f"= {np.size(Rows[k])}, {d}] (all X share the embedding "
                                 f"size)")
        rows = np.concatenate([np.asarray(r, np.int64).reshape(-1) for r in Rows])
        table = np.concatenate(X) if X else np.zeros((0, d))
        order = np.argsort(rows, kind="stable")
        if np.unique(rows).size != rows.size:
            raise ValueError("merge_ids: the ids of Rows must be distinct across all shards")
        outs = []
        for i, t in enumerate(Ids):
            ids = np.asarray(t, np.int64).reshape(-1)
            pos = np.searchsorted(rows[order], ids)
            pos = np.minimum(pos, max(rows.size - 1, 0))
            # (no Rows at all: every id is missing -- rows[order][pos] would not exist)
            missing = ids if rows.size == 0 else ids[rows[order][pos] != ids]
            if missing.size:
                raise ValueError(f"merge_ids: id {int(missing[0])} of Ids[{i}] is in none of "
                                 f"the Rows")
            outs.append(table[order[pos]].astype(X[0].dtype, copy=False))
        in_lod = (lod or {}).get("Ids") or []
        out_lod = [in_lod[i] if i < len(in_lod) else None for i in range(len(Ids))]
        return {"Out": outs, "lod": {"Out": out_lod}}


@register
class RefByTrainerId(OpDef):
    """Out = X[TrainerId] (a copy): the copy of a parameter that belongs to this trainer."""
    type, inputs, outputs = "ref_by_trainer_id", ("X*", "TrainerId"), ("Out",)
    no_grad = True

    def infer(self, X, TrainerId):
        if TrainerId.dtype != VarType.INT64:
            raise ValueError(f"ref_by_trainer_id: TrainerId must be int64, got "
                             f"{TrainerId.dtype}")
        return {"Out": X[0]}

    def forward(self, X, TrainerId):
        tid = int(np.asarray(TrainerId).reshape(-1)[0])
        if not 0 <= tid < len(X):
            raise ValueError(f"ref_by_trainer_id: TrainerId {tid} must index one of the "
                             f"{len(X)} tensors of X")
        return {"Out": np.array(X[tid], copy=True)}


@register
class FakeInit(OpDef):
    """Out gets the shape ``shape`` (fluid 1.8 declares a distributed table's shape on the
    trainer without filling it: its memory is uninitialized; here it holds zeros)."""
    type, inputs, outputs = "fake_init", (), ("Out",)
    no_grad = True

    def infer(self, *, shape=()):
        if any(int(d) < 0 for d in shape):
            raise ValueError(f"fake_init: shape must have dims >= 0, got {list(shape)}")
        return {"Out": VarSpec(tuple(int(d) for d in shape), VarType.FP32)}

    def forward(self, *, shape=()):
        return {"Out": np.zeros(tuple(int(d) for d in shape), np.float32)}
