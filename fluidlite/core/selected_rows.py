"""``SelectedRows``: fluid's sparse row-set value, what a sparse embedding's gradient is.

A SelectedRows stands for a ``[height, D...]`` tensor that is zero except at ``rows``:
``dense[rows[i]] += value[i]`` for every i. ``rows`` may repeat (fluid's ``lookup_table_grad``
writes one entry per looked-up id, duplicates included); ``merged()`` sums duplicates and sorts
the row indices (fluid's ``MergeAdd``), which is what every consumer that needs one value per
row (optimizers, norms) works on. Memory is ``len(rows) * D``, never ``height * D``.

A variable holding one is declared ``VarType.SELECTED_ROWS`` in the program (the op that
writes it says so: ``OpDef.var_types``); kernels that understand it test
``type(x) is SelectedRows``; ``np.asarray(x)`` gives the dense tensor, so a kernel that does not
understand it still computes the right numbers, densely.

Example:
    >>> sr = SelectedRows(np.array([3, 0, 3]), np.ones((3, 2), "float32"), height=5)
    >>> sr.merged().rows.tolist(), sr.merged().value[:, 0].tolist()
    ([0, 3], [1.0, 2.0])
"""
from __future__ import annotations

import threading
from typing import Any, Optional, Tuple

import numpy as np


class SelectedRows:
    """Rows ``rows`` (int64, length n) of a ``[height] + value.shape[1:]`` tensor, with values
    ``value`` ([n, D...]). ``merged`` tells that rows are unique and sorted."""

    __slots__ = ("rows", "value", "height", "merged_flag")

    def __init__(self, rows: Any, value: np.ndarray, height: int, merged: bool = False) -> None:
        rows = np.asarray(rows, dtype=np.int64).reshape(-1)
        if value.ndim < 1 or value.shape[0] != rows.size:
            raise ValueError(f"SelectedRows: value must have one row per index: {rows.size} "
                             f"rows but value shape {list(value.shape)}")
        self.rows, self.value, self.height = rows, value, int(height)
        self.merged_flag = merged

    # -- what a tensor answers ---------------------------------------------------------------
    @property
    def dtype(self) -> np.dtype:
        return self.value.dtype

    @property
    def shape(self) -> Tuple[int, ...]:
        """The dense shape, ``[height] + value.shape[1:]`` (fluid's var dims)."""
        return (self.height,) + tuple(self.value.shape[1:])

    @property
    def ndim(self) -> int:
        return self.value.ndim

    def __repr__(self) -> str:
        return (f"SelectedRows(height={self.height}, rows={self.rows.size}, "
                f"value={list(self.value.shape)} {self.value.dtype})")

    def get_tensor(self) -> np.ndarray:
        """The value tensor (fluid's ``SelectedRows.get_tensor``)."""
        return self.value

    # -- conversions --------------------------------------------------------------------------
    def merged(self) -> "SelectedRows":
        """Duplicated rows summed, rows sorted ascending: fluid's
        ``MergeAdd``. Returns ``self`` when already merged."""
        if self.merged_flag:
            return self
        rows, value = merge_rows(self.rows, self.value)
        return SelectedRows(rows, value, self.height, merged=True)

    def to_dense(self, dtype: Optional[np.dtype] = None) -> np.ndarray:
        """The dense ``[height, D...]`` tensor (duplicates summed)."""
        out = np.zeros(self.shape, dtype or self.value.dtype)
        m = self.merged()
        out[m.rows] = m.value
        return out

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return self.to_dense(np.dtype(dtype) if dtype is not None else None)

    def with_value(self, value: np.ndarray) -> "SelectedRows":
        """The same rows with another value tensor (elementwise maps of the values)."""
        return SelectedRows(self.rows, value, self.height, self.merged_flag)

    def astype(self, dtype: Any) -> "SelectedRows":
        return self.with_value(self.value.astype(dtype))

    def copy(self) -> "SelectedRows":
        return SelectedRows(self.rows.copy(), self.value.copy(), self.height, self.merged_flag)

    # Arithmetic. Multiplying or dividing by a one-element factor keeps the rows (the clip's
    # scale, loss scaling, an optimizer's rate) and adding two SelectedRows concatenates them
    # (dygraph's gradient accumulation); any other ufunc sees the dense tensor.
    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if method == "__call__" and ufunc in _ROW_WISE and len(inputs) == 2 and \
                "out" not in kwargs:
            a, b = inputs
            if type(a) is SelectedRows and _one_element(b, a):
                return a.with_value(ufunc(a.value, b, **kwargs))
            if ufunc is np.multiply and type(b) is SelectedRows and _one_element(a, b):
                return b.with_value(ufunc(a, b.value, **kwargs))
        if method == "__call__" and ufunc is np.add and len(inputs) == 2 and "out" not in \
                kwargs and all(type(x) is SelectedRows for x in inputs):
            return concat(list(inputs))         # a sum of sparse gradients stays sparse
        dense = tuple(np.asarray(x) if type(x) is SelectedRows else x for x in inputs)
        if "out" in kwargs:
            kwargs["out"] = tuple(np.asarray(x) if type(x) is SelectedRows else x
                                  for x in kwargs["out"])
        return getattr(ufunc, method)(*dense, **kwargs)

    def __add__(self, other: Any) -> Any:
        return np.add(self, other)

    def __radd__(self, other: Any) -> Any:
        return np.add(other, self)

    def __mul__(self, other: Any) -> Any:
        return np.multiply(self, other)

    def __rmul__(self, other: Any) -> Any:
        return np.multiply(other, self)

    def __truediv__(self, other: Any) -> Any:
        return np.true_divide(self, other)


_ROW_WISE = (np.multiply, np.true_divide)


def _one_element(x: Any, rows: "SelectedRows") -> bool:
    """``x`` is a scalar or a one-element array of at most the rows' rank: fluid's
    ``elementwise_mul`` / ``div`` by a [1] Y (which the kernels see aligned to X's rank, as
    [1, 1]) scales the values row by row, duplicated rows apart."""
    return np.isscalar(x) or (isinstance(x, np.ndarray) and x.size == 1
                              and x.ndim <= rows.value.ndim)


def _stable_order(rows: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """(the stable argsort of 1-D integer ``rows``, the sorted rows). Each row is keyed with
    its position (``row * n + i``: all keys distinct), so any sort yields the stable order, and
    NumPy's vectorised quicksort of int64 does it in one pass (a DeepFM batch's 20K ids: 0.21
    ms against 0.99 for ``argsort(kind="stable")`` on NumPy 2.x; about even on 1.23)."""
    n = rows.size
    lo, hi = int(rows.min()), int(rows.max())
    if max(-lo, hi) >= (1 << 62) // n:          # keys would overflow int64
        order = np.argsort(rows, kind="stable")
        return order, rows[order]
    key = rows.astype(np.int64) * n
    key += np.arange(n, dtype=np.int64)
    key.sort()
    order, srt = np.divmod(key, n)[::-1]          # floor division: negative rows too
    return order, srt.astype(rows.dtype, copy=False)


# A batch's ids often feed several tables (DeepFM's first- and second-order embeddings): their
# gradients then carry equal rows, and the sort is the merge's largest cost (0.22 of 1.2 ms on
# 20K ids). Each thread keeps the segments of the last rows it merged, with a copy of those
# rows to compare against; rows longer than this are never kept (the copy's memory).
_SEGMENTS_MEMO_MAX = 1 << 20
_memo = threading.local()


def _segments(rows: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(the stable argsort of 1-D int64 ``rows``, the unique sorted rows, where each run of
    equal sorted rows starts); the last result is reused when the same rows come again."""
    last = getattr(_memo, "last", None)
    if (last is not None and last[0].shape == rows.shape and last[0].dtype == rows.dtype
            and np.array_equal(last[0], rows)):
        return last[1], last[2], last[3]
    order, srt = _stable_order(rows)
    head = np.empty(srt.size, bool)
    head[0] = True
    np.not_equal(srt[1:], srt[:-1], out=head[1:])
    starts = np.flatnonzero(head)
    uniq = srt[starts] if starts.size < srt.size else srt
    if rows.size <= _SEGMENTS_MEMO_MAX:
        for a in (order, uniq, starts):
            a.flags.writeable = False       # shared by later merges: never written
        _memo.last = (rows.copy(), order, uniq, starts)
    return order, uniq, starts


def merge_rows(rows: np.ndarray, value: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """(unique sorted rows, the values of equal rows summed): a stable sort of the rows, then
    one ``np.add.reduceat`` over each run of equal rows (O(n log n) in the rows, never in the
    table's height); each sum adds its rows in their order in ``rows``. The dense embedding
    gradient is built from the same merge, so sparse and dense gradients hold the same sums bit
    for bit. The returned rows are a new array (or one a previous merge of equal rows
    returned: read-only)."""
    if rows.size == 0:
        return rows, value
    order, uniq, starts = _segments(rows)
    vals = np.take(value, order, axis=0)        # (2.4x faster than value[order] on rows)
    if starts.size == order.size:       # no duplicates: only sorted
        return uniq, vals
    return uniq, np.add.reduceat(vals, starts, axis=0)


def concat(parts: "list[SelectedRows]") -> SelectedRows:
    """The sum of SelectedRows of one height as one (rows and values concatenated, unmerged):
    fluid's ``sum`` op on SelectedRows inputs."""
    heights = {p.height for p in parts}
    if len(heights) != 1:
        raise ValueError(f"sum: SelectedRows inputs must have one height, got {sorted(heights)}")
    rows = np.concatenate([p.rows for p in parts])
    value = np.concatenate([p.value for p in parts], axis=0)
    return SelectedRows(rows, value, parts[0].height)
