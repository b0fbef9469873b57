"""Sorting and uniqueness ops of fluid 1.8: argsort (stable, optionally descending), unique
and unique_with_counts (values in order of first appearance)."""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from ..core import shape as S
from ..core.dtypes import VarType, to_numpy_dtype
from ..core.names import live
from ..core.registry import OpDef, VarSpec, register
from .tensor import emit_grad_op, norm_axis

_INTS = (VarType.INT32, VarType.INT64)


# -- sorting and uniqueness ---------------------------------------------------------------------
@register
class Argsort(OpDef):
    """Out = sort(X, axis) (``descending`` reverses; ties keep their input order),
    Indices = int64 positions of Out's entries in X;  dX = dOut sent back to those positions."""
    type, inputs, outputs = "argsort", ("X",), ("Out", "Indices")
    grad_uses = ("X", "Indices")

    def infer(self, X, *, axis=-1):
        norm_axis("argsort", axis, len(X.shape))
        return {"Out": X, "Indices": X.with_(dtype=VarType.INT64)}

    def forward(self, X, *, axis=-1, descending=False):
        key = -X if descending and X.dtype != np.bool_ else X
        if descending and X.dtype == np.bool_:
            key = ~X
        idx = np.argsort(key, axis=axis, kind="stable")
        return {"Out": np.take_along_axis(X, idx, axis=axis), "Indices": idx.astype(np.int64)}

    def backward(self, X, Indices, dOut, dIndices=None, *, axis=-1, descending=False):
        dx = np.zeros(X.shape, dtype=dOut.dtype)
        np.put_along_axis(dx, Indices, dOut, axis=axis)
        return {"X": dx}

    def make_grad(self, g, **attrs):
        emit_grad_op(g, "argsort", attrs, uses=self.grad_uses)

    def double_grad(self, g, *, axis=-1, **_):
        """argsort_grad scatters Out@GRAD back through Indices (linear): its gradient gathers
        ddX along ``axis`` (take_along_axis_last, between transposes for another axis)."""
        dd, target = live(g.output_grad("X@GRAD")), g.input_grad("Out@GRAD")
        if dd is None or target is None:
            return
        ids = g.input("Indices")
        rank = len(g.op.block._find_var_recursive(g.input("X")).shape)
        a = axis % rank
        if a == rank - 1:
            g.append("take_along_axis_last", {"X": dd, "Index": ids}, {"Out": target})
            return
        perm = list(range(rank))
        perm[a], perm[-1] = perm[-1], perm[a]          # a swap: its own inverse

        def swap(x, out):
            g.append("transpose2", {"X": x}, {"Out": out, "XShape": g.tmp("xshape")},
                     axis=perm)
        tx, ti, to = g.tmp("ddx_t"), g.tmp("ids_t"), g.tmp("taken_t")
        swap(dd, tx)
        swap(ids, ti)
        g.append("take_along_axis_last", {"X": tx, "Index": ti}, {"Out": to})
        swap(to, target)


def _unique(x: np.ndarray):
    """(values in order of first appearance, index of each x entry into them, counts)."""
    flat = x.reshape(-1)
    _, first, inverse, counts = np.unique(flat, return_index=True, return_inverse=True,
                                          return_counts=True)
    order = np.argsort(first, kind="stable")          # sorted-unique -> first-appearance
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return flat[first[order]], rank[inverse.reshape(-1)], counts[order]


class _UniqueBase(OpDef):
    inputs = ("X",)
    no_grad = True

    def _specs(self, X, dtype):
        if len(X.shape) != 1:
            raise ValueError(f"{self.type}: X must be 1-D, but its shape is {list(X.shape)}")
        if dtype not in _INTS:
            raise ValueError(f"{self.type}: dtype must be int32 or int64, but received {dtype}")
        return VarSpec((-1,), X.dtype), VarSpec(X.shape, dtype), VarSpec((-1,), dtype)


@register
class Unique(_UniqueBase):
    """Out = the distinct values of 1-D X in order of first appearance; Index[i] = position of
    X[i] in Out (dtype ``dtype``).

    With ``is_sorted`` (Paddle 2.x's ``paddle.unique``): X of any rank is flattened (or, with
    ``axis``, its slices along that axis are the items), Out holds the distinct items in
    ascending (lexicographic) order, Index the position in Out of each item of X, Indices the
    first item of X equal to each of Out, Counts how often each occurs (``np.unique``'s
    order and counts). ``return_*`` only say which of them a program keeps."""
    type, outputs = "unique", ("Out", "Index", "Indices?", "Counts?")

    def infer(self, X, *, dtype=VarType.INT32, is_sorted=False, axis=[], return_index=False,
              return_inverse=False, return_counts=False):
        if not is_sorted:
            out, index, _ = self._specs(X, dtype)
            return {"Out": out, "Index": index}
        if dtype not in _INTS:
            raise ValueError(f"unique: dtype must be int32 or int64, but received {dtype}")
        a = self._axis(axis, len(X.shape))
        n = S.numel(X.shape) if a is None else X.shape[a]
        out = (-1,) if a is None else tuple(-1 if i == a else d for i, d in enumerate(X.shape))
        ids = VarSpec((-1,), dtype)
        return {"Out": VarSpec(out, X.dtype), "Index": VarSpec((n,), dtype), "Indices": ids,
                "Counts": ids}

    @staticmethod
    def _axis(axis: Any, rank: int) -> Optional[int]:
        axes = [int(v) for v in (axis if isinstance(axis, (list, tuple)) else [axis])]
        if not axes:
            return None
        if len(axes) != 1 or not -rank <= axes[0] < rank:
            raise ValueError(f"unique: axis must be one dim of X (rank {rank}), but received "
                             f"{axes}")
        return axes[0] % rank

    def forward(self, X, *, dtype=VarType.INT32, is_sorted=False, axis=[], return_index=False,
                return_inverse=False, return_counts=False):
        dt = to_numpy_dtype(dtype)
        if not is_sorted:
            out, index, counts = _unique(X)
            # (Indices / Counts of this order too, for a program that declares them)
            first = np.zeros(len(out), np.int64)
            first[index[::-1]] = np.arange(len(index) - 1, -1, -1)
            return {"Out": out, "Index": index.astype(dt), "Indices": first.astype(dt),
                    "Counts": counts.astype(dt)}
        a = self._axis(axis, X.ndim)
        out, first, inverse, counts = np.unique(X.reshape(-1) if a is None else X, axis=a,
                                                return_index=True, return_inverse=True,
                                                return_counts=True)
        return {"Out": out, "Index": inverse.reshape(-1).astype(dt),
                "Indices": first.astype(dt), "Counts": counts.astype(dt)}


@register
class UniqueWithCounts(_UniqueBase):
    """As ``unique``, plus Count[k] = how often Out[k] occurs in X."""
    type, outputs = "unique_with_counts", ("Out", "Index", "Count")

    def infer(self, X, *, dtype=VarType.INT32):
        out, index, count = self._specs(X, dtype)
        return {"Out": out, "Index": index, "Count": count}

    def forward(self, X, *, dtype=VarType.INT32):
        out, index, count = _unique(X)
        dt = to_numpy_dtype(dtype)
        return {"Out": out, "Index": index.astype(dt), "Count": count.astype(dt)}
