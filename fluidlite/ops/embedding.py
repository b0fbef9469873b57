"""Embedding lookups: ``lookup_table`` (ids [..., 1]) and ``lookup_table_v2`` (ids of any shape).

Out = W[ids]; rows whose id equals ``padding_idx`` are zero and get no gradient. With
``is_sparse=False`` dW is dense: the dOut rows of each id summed into a zero table. With
``is_sparse=True`` dW is fluid's SelectedRows (``core/selected_rows.py``): rows = the ids (in
order, duplicates kept), values = the dOut rows, height = the table's rows -- memory and time
grow with the batch, not the table; the optimizers merge duplicates when they update. (fluid
1.8 also keeps padding ids in a sparse gradient, whose optimizers then move the padding row;
here padding ids are dropped as in the dense gradient, so both agree.)
"""
from __future__ import annotations

from typing import Any, Dict

import numpy as np

from ..core.dtypes import VarType
from ..core.registry import OpDef, VarSpec, register
from ..core.selected_rows import SelectedRows, merge_rows

_EXTRA = {"remote_prefetch": False, "trainer_id": 0, "height_sections": [], "epmap": [],
          "table_names": [], "grad_inplace": False, "entry_config": "", "is_test": False}


def _check_ids(op: str, W: VarSpec, Ids: VarSpec) -> None:
    if Ids.dtype not in (VarType.INT64, VarType.INT32):
        raise ValueError(f"{op}: Ids must be an int64 (or int32) tensor, got "
                         f"{Ids.dtype.name.lower()}; feed the ids as int64 (array.astype('int64'))")
    if W.ndim != 2:
        raise ValueError(f"{op}: W must be 2-D [vocab_size, emb_dim], got {list(W.shape)}")


def _lookup(op: str, W: np.ndarray, ids: np.ndarray, padding_idx: int) -> np.ndarray:
    if ids.size:
        lo, hi = int(ids.min()), int(ids.max())
        if lo < 0 or hi >= W.shape[0]:
            bad = lo if lo < 0 else hi
            raise ValueError(f"{op}: id {bad} is out of range [0, {W.shape[0]}) of the "
                             f"embedding table (vocab_size {W.shape[0]})")
    out = np.take(W, ids, axis=0)
    if padding_idx >= 0:
        out[ids == padding_idx] = 0
    return out


def _scatter(W: np.ndarray, ids: np.ndarray, dOut: np.ndarray, padding_idx: int) -> np.ndarray:
    flat = ids.reshape(-1)
    rows = dOut.reshape(flat.size, W.shape[1])
    if padding_idx >= 0:
        keep = flat != padding_idx
        flat, rows = flat[keep], rows[keep]
    dW = np.zeros(W.shape, dOut.dtype)
    uniq, summed = merge_rows(flat.astype(np.int64, copy=False), rows)
    dW[uniq] = summed           # the sparse gradient's merge: the same sums, bit for bit
    return dW


def _grad(W: np.ndarray, ids: np.ndarray, dOut: np.ndarray, padding_idx: int,
          is_sparse: bool) -> Any:
    if not is_sparse:
        return _scatter(W, ids, dOut, padding_idx)
    flat = ids.reshape(-1).astype(np.int64, copy=False)
    rows = dOut.reshape(flat.size, W.shape[1])
    if padding_idx >= 0:
        keep = flat != padding_idx
        if not keep.all():
            flat, rows = flat[keep], rows[keep]
    return SelectedRows(flat, rows, W.shape[0])


def _sparse_w_grad(attrs: Any) -> Dict[str, Any]:
    return {"W@GRAD": VarType.SELECTED_ROWS if attrs.get("is_sparse") else VarType.LOD_TENSOR}


@register
class LookupTable(OpDef):
    """Out[..., :] = W[Ids[..., 0]] (zeros where Ids == padding_idx);
    dW[r] = sum of dOut rows whose id is r (padding_idx excluded); a SelectedRows of the ids'
    rows with is_sparse."""
    type, inputs, outputs = "lookup_table", ("W", "Ids"), ("Out",)
    grad_uses = ("W", "Ids")
    extra_attrs = _EXTRA

    def infer(self, W, Ids):
        _check_ids(self.type, W, Ids)
        if Ids.ndim < 1 or Ids.shape[-1] not in (1, -1):
            raise ValueError(f"lookup_table: the last dim of Ids must be 1, got shape "
                             f"{list(Ids.shape)}; use fluid.embedding / lookup_table_v2 for "
                             f"ids without the trailing 1")
        return {"Out": VarSpec(tuple(Ids.shape[:-1]) + (W.shape[1],), W.dtype, Ids.lod_level)}

    def forward(self, W, Ids, *, padding_idx=-1, is_sparse=False, is_distributed=False):
        ids = Ids.reshape(Ids.shape[:-1]) if Ids.ndim > 1 else Ids
        return {"Out": _lookup(self.type, W, ids, padding_idx)}

    def backward(self, W, Ids, dOut, *, padding_idx=-1, is_sparse=False, is_distributed=False):
        return {"W": _grad(W, Ids, dOut, padding_idx, is_sparse)}

    def grad_var_types(self, in_types, attrs):
        return _sparse_w_grad(attrs)


@register
class LookupTableV2(OpDef):
    """Out[i..., :] = W[Ids[i...]] (zeros where Ids == padding_idx); Out shape Ids.shape + [D];
    dW as lookup_table."""
    type, inputs, outputs = "lookup_table_v2", ("W", "Ids"), ("Out",)
    grad_uses = ("W", "Ids")
    extra_attrs = _EXTRA

    def infer(self, W, Ids):
        _check_ids(self.type, W, Ids)
        return {"Out": VarSpec(tuple(Ids.shape) + (W.shape[1],), W.dtype, Ids.lod_level)}

    def forward(self, W, Ids, *, padding_idx=-1, is_sparse=False, is_distributed=False):
        return {"Out": _lookup(self.type, W, Ids, padding_idx)}

    def backward(self, W, Ids, dOut, *, padding_idx=-1, is_sparse=False, is_distributed=False):
        return {"W": _grad(W, Ids, dOut, padding_idx, is_sparse)}

    def grad_var_types(self, in_types, attrs):
        return _sparse_w_grad(attrs)


@register
class LookupTableDequant(OpDef):
    """fluid 1.8's lookup of an 8-bit quantized table: each float32 row of W [rows, q] holds
    (min, max, then the quantized values packed four bytes per float); the row of an id
    dequantizes every byte b to ``(max - min) / 256 * b + min`` (float32, as fluid), giving
    ``(q - 2) * 4`` values. Ids [..., 1] (int64) -> Out [..., (q - 2) * 4]; ``padding_idx``
    rows are zeros. Out keeps Ids' LoD. No gradient (fluid: EmptyGradOpMaker)."""
    type, inputs, outputs = "lookup_table_dequant", ("W", "Ids"), ("Out",)
    no_grad = True

    def infer(self, W, Ids, *, padding_idx=-1):
        if W.ndim != 2 or (W.shape[1] != -1 and W.shape[1] < 2):
            raise ValueError(f"lookup_table_dequant: W must be 2-D [rows, 2 + packed values], "
                             f"got {list(W.shape)}")
        if Ids.shape[-1] not in (1, -1):
            raise ValueError(f"lookup_table_dequant: the last dim of Ids must be 1, got shape "
                             f"{list(Ids.shape)}")
        width = (W.shape[1] - 2) * 4 if W.shape[1] > 0 else -1
        return {"Out": VarSpec(tuple(Ids.shape[:-1]) + (width,), VarType.FP32, Ids.lod_level)}

    def forward(self, W, Ids, *, padding_idx=-1):
        table = np.ascontiguousarray(W, dtype=np.float32)
        ids = np.asarray(Ids).reshape(-1).astype(np.int64)
        bad = (ids < 0) | (ids >= table.shape[0])
        if padding_idx != -1:
            bad &= ids != padding_idx
        if bad.any():
            raise ValueError(f"lookup_table_dequant: ids must be in [0, {table.shape[0]}), got "
                             f"{int(ids[bad][0])}")
        rows = table[np.clip(ids, 0, table.shape[0] - 1)]
        lo, hi = rows[:, :1], rows[:, 1:2]
        codes = np.ascontiguousarray(rows[:, 2:]).view(np.uint8).astype(np.float32)
        out = (hi - lo) / np.float32(256) * codes + lo
        if padding_idx != -1:
            out[ids == padding_idx] = np.float32(0)
        return {"Out": out.reshape(tuple(np.shape(Ids)[:-1]) + (out.shape[1],))}
