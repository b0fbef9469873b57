"""fluid 1.8's tree-based deep model (TDM) retrieval ops (operators/tdm_child_op.*,
tdm_sampler_op.*; fluid.contrib.layers.tdm_child / tdm_sampler build them): ``tdm_child``
reads a node's children from the tree table, ``tdm_sampler`` draws each layer's positive and
negative nodes for the items of a batch. Neither has a gradient (fluid: EmptyGradOpMaker).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..core.dtypes import VarType, to_numpy_dtype
from ..core.registry import OpDef, VarSpec, register

_INT_TYPES = (VarType.INT32, VarType.INT64)


def _out_dtype(op: str, dtype: Any) -> Any:
    if int(dtype) not in (int(t) for t in _INT_TYPES):
        raise ValueError(f"{op}: dtype must be int32 ({int(VarType.INT32)}) or int64 "
                         f"({int(VarType.INT64)}), got {dtype}")
    return VarType(int(dtype))


@register
class TDMChild(OpDef):
    """TreeInfo [node_nums, 3 + child_nums] holds per node (item_id, layer_id, ancestor_id,
    child ids...). For every id of X: Child = its child_nums children (zeros for node 0 and
    for leaves, whose first child id is 0), LeafMask = 1 where the child is an item (item_id
    != 0). Child and LeafMask are X.shape + [child_nums] of ``dtype`` (int32 by default)."""
    type, inputs, outputs = "tdm_child", ("X", "TreeInfo"), ("Child", "LeafMask")
    no_grad = True

    def infer(self, X, TreeInfo, *, child_nums, dtype=int(VarType.INT32)):
        if child_nums < 1:
            raise ValueError(f"{self.type}: child_nums must be > 0, got {child_nums}")
        if TreeInfo.ndim != 2:
            raise ValueError(f"{self.type}: TreeInfo must be 2-D [node_nums, 3 + child_nums], "
                             f"got {list(TreeInfo.shape)}")
        spec = VarSpec(tuple(X.shape) + (child_nums,), _out_dtype(self.type, dtype),
                       X.lod_level)
        return {"Child": spec, "LeafMask": spec}

    def forward(self, X, TreeInfo, *, child_nums=2, dtype=int(VarType.INT32)):
        out_t = to_numpy_dtype(_out_dtype(self.type, dtype))
        ids = np.asarray(X).reshape(-1).astype(np.int64)
        n = TreeInfo.shape[0]
        if ids.size and (ids.min() < 0 or ids.max() >= n):
            bad = ids[(ids < 0) | (ids >= n)][0]
            raise ValueError(f"{self.type}: the ids of X must lie in [0, {n}) (TreeInfo's "
                             f"rows), got {bad}")
        if TreeInfo.shape[1] < 3 + child_nums:
            raise ValueError(f"{self.type}: TreeInfo needs 3 + child_nums = {3 + child_nums} "
                             f"columns, got {TreeInfo.shape[1]}")
        kids = TreeInfo[ids][:, 3:3 + child_nums].astype(np.int64)
        has = (ids != 0) & (TreeInfo[ids][:, 3] != 0)
        kids = np.where(has[:, None], kids, 0)
        mask = np.where(has[:, None], TreeInfo[kids][..., 0] != 0, False)
        shape = tuple(np.shape(X)) + (child_nums,)
        return {"Child": kids.astype(out_t).reshape(shape),
                "LeafMask": mask.astype(out_t).reshape(shape)}


@register
class TDMSampler(OpDef):
    """For every item id x of X and every tree layer l (Travel [items, layers] holds each
    item's path, 0 = padding; Layer holds the nodes of all layers, layer l being rows
    layer_offset_lod[l]:layer_offset_lod[l+1]): the positive node Travel[x, l] (when
    output_positive; label 1) followed by neg_samples_num_list[l] distinct other nodes of
    layer l drawn uniformly (label 0); Mask is 1 except on padding (a 0 path node: zeros
    everywhere). Out / Labels / Mask [N, sum_l (neg_l + output_positive)] of ``dtype``."""
    type, inputs = "tdm_sampler", ("X", "Travel", "Layer")
    outputs = ("Out", "Labels", "Mask")
    no_grad = True
    uses_rng = True

    def infer(self, X, Travel, Layer, *, neg_samples_num_list=(), layer_offset_lod=(),
              output_positive=True, seed=0, dtype=int(VarType.INT32)):
        if len(layer_offset_lod) != len(neg_samples_num_list) + 1:
            raise ValueError(f"{self.type}: layer_offset_lod must hold one offset more than "
                             f"neg_samples_num_list has layers ({len(neg_samples_num_list)}), "
                             f"got {list(layer_offset_lod)}")
        for l, k in enumerate(neg_samples_num_list):
            nodes = layer_offset_lod[l + 1] - layer_offset_lod[l]
            if not 0 <= k <= nodes - 1:
                raise ValueError(f"{self.type}: layer {l} has {nodes} nodes, so at most "
                                 f"{nodes - 1} negatives can be drawn, got {k}")
        width = sum(neg_samples_num_list) + len(neg_samples_num_list) * int(output_positive)
        if X.ndim != 2 or X.shape[1] not in (1, -1):
            raise ValueError(f"{self.type}: X must be [N, 1] (one item id per row), got "
                             f"{list(X.shape)}")
        spec = VarSpec((X.shape[0], width), _out_dtype(self.type, dtype))
        return {"Out": spec, "Labels": spec, "Mask": spec}

    def forward(self, X, Travel, Layer, *, rng, neg_samples_num_list=(), layer_offset_lod=(),
                output_positive=True, seed=0, dtype=int(VarType.INT32)):
        out_t = to_numpy_dtype(_out_dtype(self.type, dtype))
        ids = np.asarray(X).reshape(-1).astype(np.int64)
        if ids.size and (ids.min() < 0 or ids.max() >= Travel.shape[0]):
            raise ValueError(f"{self.type}: the ids of X must lie in [0, {Travel.shape[0]}) "
                             f"(Travel's rows)")
        layer = np.asarray(Layer).reshape(-1)
        pos_flag = int(bool(output_positive))
        width = sum(neg_samples_num_list) + len(neg_samples_num_list) * pos_flag
        out = np.zeros((ids.size, width), np.int64)
        label = np.zeros_like(out)
        mask = np.ones_like(out)
        for i, x in enumerate(ids):
            at = 0
            for l, k in enumerate(neg_samples_num_list):
                lo, hi = layer_offset_lod[l], layer_offset_lod[l + 1]
                positive = int(Travel[x, l])
                n = k + pos_flag
                if positive == 0:          # padding: zeros, masked out
                    mask[i, at:at + n] = 0
                    at += n
                    continue
                if pos_flag:
                    out[i, at], label[i, at] = positive, 1
                    at += 1
                cand = np.nonzero(layer[lo:hi] != positive)[0]
                pick = rng.choice(cand, size=k, replace=False) if k else cand[:0]
                out[i, at:at + k] = layer[lo + pick]
                at += k
        return {"Out": out.astype(out_t), "Labels": label.astype(out_t),
                "Mask": mask.astype(out_t)}
