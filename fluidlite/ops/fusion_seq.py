"""fluid 1.8's fused sequence and fc inference ops (paddle/fluid/operators/fused/):
``fusion_seqpool_concat``, ``fusion_seqpool_cvm_concat``, ``fusion_seqexpand_concat_fc``,
``fusion_seqconv_eltadd_relu``, ``fusion_repeated_fc_relu`` and ``fusion_squared_mat_sub``
-- written by fluid's inference passes (seqpool_concat_fuse_pass, seqconv_eltadd_relu_fuse_pass,
repeated_fc_relu_fuse_pass, squared_mat_sub_fuse_pass, ...), with no gradient in fluid, so none
here -- and ``fused_embedding_seq_pool`` (fluid.contrib's embedding + sum pooling, which has
a gradient w.r.t. the table). Each computes what the chain it replaces computes.
"""
from __future__ import annotations

from typing import Any, Dict, List

import numpy as np

from ..core.registry import OpDef, VarSpec, register
from .rnn_core import _act
from .sequence import _context, _off

_POOLS = ("SUM", "AVERAGE", "SQRT")


def _pool_widths(op: str, X: List[Any], axis: int, pooltype: str) -> int:
    """Build-time checks of the seqpool-concat ops; the width of one pooled input."""
    if axis != 1:
        raise ValueError(f"{op}: only axis=1 is supported (as in fluid), got axis={axis}")
    if pooltype not in _POOLS:
        raise ValueError(f"{op}: pooltype must be one of {list(_POOLS)}, got {pooltype!r}")
    if not X:
        raise ValueError(f"{op}: X must hold at least one LoDTensor")
    if X[0].ndim != 2:
        raise ValueError(f"{op}: the inputs must be 2-D [T, w], got X[0] {list(X[0].shape)}")
    return X[0].shape[1]


def _seqpool(op: str, x: np.ndarray, lod: Any, i: int, bs: int, pooltype: str) -> np.ndarray:
    """SUM / AVERAGE / SQRT pooling of every sequence of ``x`` (fluid's jit SeqPool: an empty
    sequence gives zeros)."""
    off = _off(op, lod, f"X[{i}]")
    if off.size - 1 != bs:
        raise ValueError(f"{op}: every X must hold the same number of sequences; X[0] has {bs}, "
                         f"X[{i}] has {off.size - 1}")
    if x.ndim != 2 or x.shape[0] != off[-1]:
        raise ValueError(f"{op}: X[{i}] must be [T, w] with T = {off[-1]} rows (its LoD), got "
                         f"{list(x.shape)}")
    lens = np.diff(off)
    out = np.zeros((bs, x.shape[1]), x.dtype)
    nz = lens > 0
    if nz.any():
        out[nz] = np.add.reduceat(x, off[:-1][nz], axis=0)
    n = np.maximum(lens, 1).astype(x.dtype).reshape(-1, 1)
    if pooltype == "AVERAGE":
        out = out / n
    elif pooltype == "SQRT":
        out = out / np.sqrt(n)
    return out


def _pool_concat(op: str, X: List[np.ndarray], lods: Any, pooltype: str, cvm: bool
                 ) -> Dict[str, Any]:
    lods = list(lods or [None] * len(X))
    bs = _off(op, lods[0], "X[0]").size - 1
    w = X[0].shape[1]
    parts = []
    for i, (x, lod) in enumerate(zip(X, lods)):
        if x.ndim != 2 or x.shape[1] != w:
            raise ValueError(f"{op}: every X must be [T, {w}] (X[0]'s width), got X[{i}] "
                             f"{list(x.shape)}")
        p = _seqpool(op, x, lod, i, bs, pooltype)
        if cvm:         # fluid's cvm on the pooled show / click columns
            one = x.dtype.type(1)
            show = np.log(p[:, 0] + one)
            p[:, 1] = np.log(p[:, 1] + one) - show
            p[:, 0] = show
        parts.append(p)
    out = np.concatenate(parts, axis=1) if parts else np.zeros((bs, 0), X[0].dtype)
    return {"Out": out, "lod": {"Out": (tuple(range(bs + 1)),)}}


@register
class FusionSeqPoolConcat(OpDef):
    """fluid's ``fusion_seqpool_concat``: Out = concat_i(sequence_pool(X[i], pooltype),
    axis=1) for pooltype SUM, AVERAGE or SQRT; every X[i] is [T_i, w] with the same number N
    of sequences; Out [N, n * w] has the LoD [0, 1, ..., N] (one row per sequence, as fluid
    sets it). Inference only (no gradient)."""
    type, inputs, outputs = "fusion_seqpool_concat", ("X*",), ("Out",)
    lod_aware = True
    no_grad = True

    def infer(self, X, *, pooltype="SUM", axis=1):
        w = _pool_widths(self.type, X, axis, pooltype)
        return {"Out": VarSpec((-1, w * len(X) if w >= 0 else -1), X[0].dtype, 1)}

    def forward(self, X, lod=None, *, pooltype="SUM", axis=1):
        return _pool_concat(self.type, X, (lod or {}).get("X"), pooltype, False)


@register
class FusionSeqPoolCVMConcat(OpDef):
    """fluid's ``fusion_seqpool_cvm_concat``: as ``fusion_seqpool_concat``, with fluid's
    ``cvm`` applied to each pooled input (p0' = log(p0 + 1), p1' = log(p1 + 1) - p0'); fluid
    supports only use_cvm=True (CVM [N, 2] is declared by fluid and not read by its kernel).
    Out [N, n * w], LoD [0, 1, ..., N]. Inference only (no gradient)."""
    type, inputs, outputs = "fusion_seqpool_cvm_concat", ("X*", "CVM"), ("Out",)
    lod_aware = True
    no_grad = True

    def infer(self, X, CVM, *, pooltype="SUM", use_cvm=True, axis=1):
        if not use_cvm:
            raise ValueError(f"{self.type}: only use_cvm=True is supported (as in fluid); use "
                             f"sequence_pool + cvm(use_cvm=False) + concat instead")
        w = _pool_widths(self.type, X, axis, pooltype)
        if w >= 0 and w < 2:
            raise ValueError(f"{self.type}: the inputs need at least the 2 cvm columns (show, "
                             f"click), got width {w}")
        return {"Out": VarSpec((-1, w * len(X) if w >= 0 else -1), X[0].dtype, 1)}

    def forward(self, X, CVM, lod=None, *, pooltype="SUM", use_cvm=True, axis=1):
        return _pool_concat(self.type, X, (lod or {}).get("X"), pooltype, True)


@register
class FusionSeqExpandConcatFC(OpDef):
    """fluid's ``fusion_seqexpand_concat_fc``: X[0] [T, M0] carries the LoD (N sequences),
    each X[i>0] [N, Mi] holds one row per sequence, repeated over that sequence's rows
    (sequence_expand); Out = act(concat(X[0], expanded X[1:], axis=1) @ FCWeight + FCBias)
    with FCWeight [M0 + M1 + ..., D] and fc_activation identity / sigmoid / tanh / relu.
    Out [T, D] keeps X[0]'s LoD; FCOut [N, D] is X[1:]'s part of the fc, per sequence.
    Inference only (no gradient)."""
    type = "fusion_seqexpand_concat_fc"
    inputs, outputs = ("X*", "FCWeight", "FCBias?"), ("Out", "FCOut?")
    lod_aware = True
    no_grad = True

    def infer(self, X, FCWeight, FCBias, *, fc_activation="identity"):
        _act(self.type, fc_activation, "fc_activation")
        if len(X) < 2:
            raise ValueError(f"{self.type}: X must hold at least 2 inputs, got {len(X)}")
        if FCWeight.ndim != 2 or any(x.ndim != 2 for x in X):
            raise ValueError(f"{self.type}: X and FCWeight must be 2-D")
        widths = [x.shape[1] for x in X]
        if min(widths) >= 0 and FCWeight.shape[0] >= 0 and sum(widths) != FCWeight.shape[0]:
            raise ValueError(f"{self.type}: FCWeight must have sum of the X widths = "
                             f"{sum(widths)} rows, got {list(FCWeight.shape)}")
        D = FCWeight.shape[1]
        if FCBias is not None and FCBias.shape[-1] >= 0 and D >= 0 and (
                int(np.prod(FCBias.shape)) != D):
            raise ValueError(f"{self.type}: FCBias must be [{D}] or [1, {D}], got "
                             f"{list(FCBias.shape)}")
        return {"Out": VarSpec((X[0].shape[0], D), X[0].dtype, X[0].lod_level),
                "FCOut": VarSpec((-1, D), X[0].dtype)}

    def forward(self, X, FCWeight, FCBias, lod=None, *, fc_activation="identity"):
        lods = list((lod or {}).get("X") or [None])
        off = _off(self.type, lods[0], "X[0]")
        N, M0 = off.size - 1, X[0].shape[1]
        for i, x in enumerate(X[1:], 1):
            if x.shape[0] != N:
                raise ValueError(f"{self.type}: X[{i}] must have one row per sequence of X[0] "
                                 f"({N}), got {list(x.shape)}")
        out = X[0] @ FCWeight[:M0]
        if FCBias is not None:
            out = out + FCBias.reshape(1, -1)
        rest = np.concatenate(X[1:], axis=1) @ FCWeight[M0:]
        out = out + np.repeat(rest, np.diff(off), axis=0)
        act = _act(self.type, fc_activation, "fc_activation")[0]
        return {"Out": act(out.astype(X[0].dtype, copy=False)),
                "FCOut": rest.astype(X[0].dtype, copy=False), "lod": {"Out": lods[0]}}


@register
class FusionSeqConvEltAddRelu(OpDef):
    """fluid's ``fusion_seqconv_eltadd_relu`` (sequence_conv + elementwise_add + relu):
    Out = relu(sequence_conv(X, Filter; contextLength, contextStart) + Bias), Filter
    [contextLength * M, D], Bias [1, D]; rows outside a sequence read zeros (contextStride must
    be 1, as in fluid). ColMat [T, contextLength * M] holds the context rows. Out keeps X's LoD.
    Inference only (no gradient)."""
    type = "fusion_seqconv_eltadd_relu"
    inputs, outputs = ("X", "Filter", "Bias"), ("Out", "ColMat?")
    lod_aware = True
    no_grad = True

    def infer(self, X, Filter, Bias, *, contextLength, contextStart=0, contextStride=1):
        if contextStride != 1:
            raise ValueError(f"{self.type}: only contextStride = 1 is supported (as in fluid), "
                             f"got {contextStride}")
        if X.ndim != 2 or Filter.ndim != 2:
            raise ValueError(f"{self.type}: X must be [T, M] and Filter [contextLength * M, D]")
        if X.shape[1] >= 0 and Filter.shape[0] >= 0 and \
                Filter.shape[0] != contextLength * X.shape[1]:
            raise ValueError(f"{self.type}: Filter height {Filter.shape[0]} must be "
                             f"contextLength * M = {contextLength} * {X.shape[1]}")
        return {"Out": VarSpec((X.shape[0], Filter.shape[1]), X.dtype, X.lod_level),
                "ColMat": VarSpec((X.shape[0], Filter.shape[0]), X.dtype)}

    def forward(self, X, Filter, Bias, lod=None, *, contextLength=3, contextStart=0,
                contextStride=1):
        off = _off(self.type, (lod or {}).get("X"))
        idx, valid = _context(X, off, contextLength, contextStart)
        cols = (X[idx] * valid[:, :, None].astype(X.dtype)).reshape(X.shape[0], -1)
        out = np.maximum(cols @ Filter + Bias.reshape(1, -1), X.dtype.type(0))
        return {"Out": out.astype(X.dtype, copy=False), "ColMat": cols,
                "lod": {"Out": lod["X"]}}


@register
class FusionRepeatedFCRelu(OpDef):
    """fluid's ``fusion_repeated_fc_relu``: n >= 2 fc + relu layers in a row,
    y_0 = X, y_k = relu(y_{k-1} @ W[k] + Bias[k]) (X [N, ...] flattened to [N, K0]); Out =
    y_n, ReluOut[k] = y_{k+1} for k < n - 1. Inference only (no gradient)."""
    type = "fusion_repeated_fc_relu"
    inputs, outputs = ("X", "W*", "Bias*"), ("ReluOut*", "Out")
    no_grad = True

    def infer(self, X, W, Bias):
        if len(W) < 2 or len(W) != len(Bias):
            raise ValueError(f"{self.type}: W and Bias must hold the same number (>= 2) of "
                             f"tensors, got {len(W)} and {len(Bias)}")
        k = int(np.prod(X.shape[1:])) if min(X.shape[1:], default=0) >= 0 else -1
        for i, w in enumerate(W):
            if w.ndim != 2 or (k >= 0 and w.shape[0] >= 0 and w.shape[0] != k):
                raise ValueError(f"{self.type}: W[{i}] must be [{k}, O{i}] (the previous "
                                 f"layer's width), got {list(w.shape)}")
            k = w.shape[1]
        n = X.shape[0]
        return {"Out": VarSpec((n, W[-1].shape[1]), X.dtype),
                "ReluOut": [VarSpec((n, w.shape[1]), X.dtype) for w in W[:-1]]}

    def forward(self, X, W, Bias):
        y = X.reshape(X.shape[0], -1)
        outs = []
        for w, b in zip(W, Bias):
            y = np.maximum(y @ w + b.reshape(1, -1), X.dtype.type(0)).astype(X.dtype, copy=False)
            outs.append(y)
        return {"Out": outs[-1], "ReluOut": outs[:-1]}


@register
class FusionSquaredMatSub(OpDef):
    """fluid's ``fusion_squared_mat_sub``: Out = ((X @ Y)^2 - X^2 @ Y^2) * scalar, X [M, K],
    Y [K, N]; SquaredX = X^2, SquaredY = Y^2, SquaredXY = (X @ Y)^2. Inference only."""
    type, inputs = "fusion_squared_mat_sub", ("X", "Y")
    outputs = ("SquaredX?", "SquaredY?", "SquaredXY?", "Out")
    no_grad = True

    def infer(self, X, Y, *, scalar=1.0):
        if X.ndim != 2 or Y.ndim != 2 or (
                X.shape[1] >= 0 and Y.shape[0] >= 0 and X.shape[1] != Y.shape[0]):
            raise ValueError(f"{self.type}: X must be [M, K] and Y [K, N], got "
                             f"{list(X.shape)} and {list(Y.shape)}")
        return {"Out": VarSpec((X.shape[0], Y.shape[1]), X.dtype), "SquaredX": X,
                "SquaredY": Y, "SquaredXY": VarSpec((X.shape[0], Y.shape[1]), X.dtype)}

    def forward(self, X, Y, *, scalar=1.0):
        sx, sy = X * X, Y * Y
        xy = X @ Y
        sxy = xy * xy
        out = (sxy - sx @ sy) * X.dtype.type(scalar)
        return {"Out": out, "SquaredX": sx, "SquaredY": sy, "SquaredXY": sxy}


@register
class FusedEmbeddingSeqPool(OpDef):
    """fluid's ``fused_embedding_seq_pool`` (lookup_table + sequence_pool SUM): each row of Ids
    [T, k..., 1] (int64, LoD of one level, N sequences) holds k ids; Out [N, k * D] is, per
    sequence, the sum over its rows of the k looked-up rows of W [V, D] laid side by side; ids
    equal to ``padding_idx`` contribute zeros (combiner must be "sum", as in fluid).
    dW[id] += the matching D-wide slice of dOut for every (non-padding) occurrence of id."""
    type, inputs, outputs = "fused_embedding_seq_pool", ("W", "Ids"), ("Out",)
    grad_uses = ("W", "Ids")
    lod_aware = True
    # is_sparse / grad_inplace choose fluid's SelectedRows / in-place gradient storage; the
    # values are the same dense ones here
    extra_attrs = {"is_sparse": False, "grad_inplace": False}

    def infer(self, W, Ids, *, combiner="sum", padding_idx=-1):
        if combiner != "sum":
            raise ValueError(f"{self.type}: only combiner='sum' is supported (as in fluid), got "
                             f"{combiner!r}")
        if W.ndim != 2 or Ids.ndim < 2 or Ids.shape[-1] not in (1, -1):
            raise ValueError(f"{self.type}: W must be [V, D] and Ids [T, ..., 1], got W "
                             f"{list(W.shape)} and Ids {list(Ids.shape)}")
        if Ids.lod_level != 1:
            raise ValueError(f"{self.type}: Ids must be a LoD tensor of lod_level 1, got "
                             f"lod_level {Ids.lod_level}")
        k = int(np.prod(Ids.shape[1:])) if min(Ids.shape[1:]) >= 0 else -1
        return {"Out": VarSpec((-1, k * W.shape[1] if k >= 0 else -1), W.dtype)}

    def _ids(self, W: np.ndarray, Ids: np.ndarray, lod: Any, padding_idx: int):
        off = _off(self.type, (lod or {}).get("Ids"), "Ids")
        ids = np.asarray(Ids).reshape(Ids.shape[0], -1).astype(np.int64)
        live = ids != padding_idx if padding_idx != -1 else np.ones(ids.shape, bool)
        bad = live & ((ids < 0) | (ids >= W.shape[0]))
        if bad.any():
            raise ValueError(f"{self.type}: Ids must lie in [0, {W.shape[0]}) (the rows of W), "
                             f"got {int(ids[bad][0])}")
        return off, np.where(live, ids, 0), live

    def forward(self, W, Ids, lod=None, *, combiner="sum", padding_idx=-1):
        off, ids, live = self._ids(W, Ids, lod, padding_idx)
        rows = W[ids] * live[..., None].astype(W.dtype)          # [T, k, D]
        n = off.size - 1
        out = np.zeros((n,) + rows.shape[1:], W.dtype)
        nz = np.diff(off) > 0
        if nz.any():
            out[nz] = np.add.reduceat(rows, off[:-1][nz], axis=0)
        return {"Out": out.reshape(n, -1)}

    def backward(self, W, Ids, dOut, lod=None, *, combiner="sum", padding_idx=-1):
        off, ids, live = self._ids(W, Ids, lod, padding_idx)
        seq = np.repeat(np.arange(off.size - 1), np.diff(off))
        g = dOut.reshape(off.size - 1, ids.shape[1], W.shape[1])[seq]   # [T, k, D]
        dW = np.zeros_like(W)
        np.add.at(dW, ids[live], g[live])
        return {"W": dW}
