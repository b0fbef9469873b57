"""Data types: fluid's ``VarType`` enum and its numpy / string spellings.

``VarType.FP32 == np.float32 == 'float32'`` holds, so scripts that compare ``var.dtype`` with any
spelling keep working. Non-tensor kinds (LOD_TENSOR, FEED_MINIBATCH, ...) share the enum, as in
fluid's ``core.VarDesc.VarType``.
"""
from __future__ import annotations

import enum
from typing import Any, Dict

import numpy as np


class VarType(enum.IntEnum):
    """fluid's ``core.VarDesc.VarType`` (proto values)."""

    BOOL = 0
    INT16 = 1
    INT32 = 2
    INT64 = 3
    FP16 = 4
    FP32 = 5
    FP64 = 6
    LOD_TENSOR = 7
    SELECTED_ROWS = 8
    FEED_MINIBATCH = 9
    FETCH_LIST = 10
    STEP_SCOPES = 11
    LOD_RANK_TABLE = 12
    LOD_TENSOR_ARRAY = 13
    PLACE_LIST = 14
    READER = 15
    RAW = 17
    TUPLE = 18
    SIZE_T = 19
    UINT8 = 20
    INT8 = 21

    def __eq__(self, other: Any) -> bool:
        if isinstance(other, (VarType, int)) and not isinstance(other, bool):
            return int(self) == int(other)
        try:
            return int(self) == int(convert_np_dtype_to_dtype_(other))
        except (TypeError, ValueError):
            return False

    def __ne__(self, other: Any) -> bool:
        return not self.__eq__(other)

    __hash__ = enum.IntEnum.__hash__

    def __str__(self) -> str:
        return f"VarType.{self.name}"

    __repr__ = __str__


_NP = {
    VarType.BOOL: np.dtype(np.bool_), VarType.INT16: np.dtype(np.int16),
    VarType.INT32: np.dtype(np.int32), VarType.INT64: np.dtype(np.int64),
    VarType.FP16: np.dtype(np.float16), VarType.FP32: np.dtype(np.float32),
    VarType.FP64: np.dtype(np.float64), VarType.UINT8: np.dtype(np.uint8),
    VarType.INT8: np.dtype(np.int8),
}
_FROM_NP = {v: k for k, v in _NP.items()}
FLOATS = frozenset({VarType.FP16, VarType.FP32, VarType.FP64})
INTS = frozenset({VarType.INT8, VarType.INT16, VarType.INT32, VarType.INT64, VarType.UINT8})


class UnknownDtypeError(TypeError, ValueError):
    """A dtype spelling that names no data type: a TypeError as in fluid 1.8 (where numpy
    raised it), and a ValueError for code written against earlier fluidlite."""


def convert_np_dtype_to_dtype_(dtype: Any) -> VarType:
    """Any spelling (VarType, numpy dtype/type, string such as ``'float32'``) -> ``VarType``."""
    if isinstance(dtype, VarType):
        return dtype
    if isinstance(dtype, int) and not isinstance(dtype, bool):
        return VarType(dtype)
    if isinstance(dtype, str) and dtype.startswith("VarType."):
        return VarType[dtype[len("VarType."):]]
    try:
        np_dtype = np.dtype(dtype)
    except TypeError:
        raise UnknownDtypeError(f"Not supported numpy dtype {dtype!r}: not a data type; use "
                                f"e.g. 'float32', 'int64' or 'bool'") from None
    if np_dtype not in _FROM_NP:
        raise ValueError(f"Not supported numpy dtype {np_dtype}")
    return _FROM_NP[np_dtype]


def to_numpy_dtype(dtype: Any) -> np.dtype:
    """``VarType`` or any spelling -> ``np.dtype`` (tensor types only)."""
    vt = convert_np_dtype_to_dtype_(dtype)
    if vt not in _NP:
        raise ValueError(f"{vt} is not a tensor data type")
    return _NP[vt]


_NAMES: Dict[Any, str] = {}


def convert_dtype(dtype: Any) -> str:
    """``VarType`` or any spelling -> canonical string (``'float32'``), like fluid's data_feeder.
    Memoised per hashable spelling: layer argument checks call it on every dygraph op, and
    ``np.dtype.name`` is slow."""
    try:
        return _NAMES[dtype]
    except (KeyError, TypeError):
        pass
    name = to_numpy_dtype(dtype).name
    try:
        if len(_NAMES) < 256:
            _NAMES[dtype] = name
    except TypeError:           # unhashable spelling
        pass
    return name


def is_float(dtype: Any) -> bool:
    return convert_np_dtype_to_dtype_(dtype) in FLOATS
