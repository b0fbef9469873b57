"""``merge_selected_rows`` and ``get_tensor_from_selected_rows``: fluid's SelectedRows ops.

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
from ..core.registry import register
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
