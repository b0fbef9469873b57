"""``merge_selected_rows``, ``get_tensor_from_selected_rows`` and ``split_selected_rows``:
fluid's SelectedRows ops.

A SelectedRows (``core/selected_rows.py``) is a sparse set of rows of a tall tensor -- what a
sparse embedding's gradient is. ``merge_selected_rows`` sums the duplicated rows and sorts the
row indices (fluid's ``MergeAdd``); ``get_tensor_from_selected_rows`` returns the value tensor
(``[number of rows, D]``). fluid's clip code inserts both to take the norm of a sparse
gradient. On a dense tensor (fluid raises there) both are copies: a dense tensor has no
duplicated rows and is its own value.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping

import numpy as np

from ..core.dtypes import VarType
from ..core.registry import OpDef, register
from ..core.selected_rows import SelectedRows
from .tensor import Assign


def same_var_type(in_types: Mapping[str, List[Any]], slot: str = "X") -> Dict[str, Any]:
    """``Out`` has the var type of input ``slot`` (fluid's PassInDtypeAndVarTypeToOutput)."""
    t = (in_types.get(slot) or [None])[0]
    return {"Out": VarType.SELECTED_ROWS if t == VarType.SELECTED_ROWS else VarType.LOD_TENSOR}


@register
class MergeSelectedRows(Assign):
    """Out = X with duplicated rows summed and rows sorted (SelectedRows X); Out = copy(X)
    for a dense X. dX = dOut."""
    type = "merge_selected_rows"

    def forward(self, X):
        if type(X) is SelectedRows:
            return {"Out": X.merged()}
        return {"Out": np.array(X, copy=True)}

    def var_types(self, in_types, attrs):
        return same_var_type(in_types)


@register
class GetTensorFromSelectedRows(Assign):
    """Out = the value tensor of a SelectedRows X ([len(rows), D...]); Out = copy(X) for a
    dense X. dX = dOut."""
    type = "get_tensor_from_selected_rows"

    def forward(self, X):
        if type(X) is SelectedRows:
            return {"Out": X.value}
        return {"Out": np.array(X, copy=True)}

    def var_types(self, in_types, attrs):
        return {"Out": VarType.LOD_TENSOR}


@register
class SplitSelectedRows(OpDef):
    """fluid's ``split_selected_rows`` (parameter-server sharding of a sparse gradient):
    ``height_sections`` cut X's height into consecutive blocks; Out[k] (a SelectedRows of
    height ``height_sections[k]``) gets X's rows falling in block k, in X's order, renumbered
    from the block start, with their values. A dense X is taken as all its rows. dX: each row
    of X gets the gradient of its row in its block's Out (fluid's grad maker adds up the Out
    gradients instead, mixing the blocks' renumbered rows)."""
    type, inputs, outputs = "split_selected_rows", ("X",), ("Out*",)
    grad_uses = ("X",)

    def infer(self, X, *, height_sections=()):
        if not height_sections:
            raise ValueError("split_selected_rows: height_sections must list the height of "
                             "every output, got []")
        return {"Out": [X.with_(shape=(int(h),) + tuple(X.shape[1:]))
                        for h in height_sections]}

    def var_types(self, in_types, attrs):
        return {"Out": VarType.SELECTED_ROWS}

    def forward(self, X, *, height_sections=()):
        sr = X if type(X) is SelectedRows else \
            SelectedRows(np.arange(np.shape(X)[0]), np.asarray(X), np.shape(X)[0])
        starts = np.concatenate([[0], np.cumsum(height_sections, dtype=np.int64)[:-1]])
        if sr.rows.size and (sr.rows.min() < 0 or sr.rows.max() >= sr.height):
            raise ValueError(f"split_selected_rows: each row of X must be < its height "
                             f"{sr.height}, got rows {sr.rows.tolist()}")
        # fluid's GetSectionIndex: the last block whose start is <= the row
        block = np.searchsorted(starts, sr.rows, side="right") - 1
        outs = []
        for k, h in enumerate(height_sections):
            sel = block == k
            local = sr.rows[sel] - starts[k]
            if local.size and local.max() >= h:
                raise ValueError(f"split_selected_rows: row {int(local.max() + starts[k])} "
                                 f"is past block {k} (start {int(starts[k])}, height {h})")
            outs.append(SelectedRows(local, sr.value[sel], int(h)))
        return {"Out": outs}

    def backward(self, X, dOut, *, height_sections=()):
        # the true derivative: row i of X takes the gradient of its row in its block's Out.
        # (fluid's grad maker sums the Out gradients instead, which mixes the blocks' local
        # row numbers; fluid only ran it on parameter servers)
        rows = X.rows if type(X) is SelectedRows else np.arange(np.shape(X)[0])
        value = X.value if type(X) is SelectedRows else np.asarray(X)
        starts = np.concatenate([[0], np.cumsum(height_sections, dtype=np.int64)[:-1]])
        block = np.searchsorted(starts, rows, side="right") - 1
        dvalue = np.zeros(value.shape, value.dtype)
        for k, d in enumerate(dOut):
            if d is None:
                continue
            dk = d.value if type(d) is SelectedRows else np.asarray(d)
            dvalue[block == k] = dk.reshape((-1,) + value.shape[1:])
        if type(X) is SelectedRows:
            return {"X": SelectedRows(rows, dvalue, X.height)}
        return {"X": dvalue}
