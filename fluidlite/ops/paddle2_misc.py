"""Small Paddle 2.x ops of exported programs (each checked against Paddle 2.6 in
tests/ops/test_paddle_oracle.py):

* pass-throughs Paddle's executor inserts: ``share_data``, ``memcpy_d2h`` / ``memcpy_h2d``
  (one CPU here: a copy), ``depend`` (Out = X; ``Dep`` only orders ops in Paddle's graph);
* fills: ``fill_any`` (``Tensor.fill_``), ``fill_diagonal``;
* comparisons and integers: ``isclose``, ``elementwise_fmax`` / ``elementwise_fmin`` (NaN
  ignored), ``bitwise_and`` / ``or`` / ``xor`` / ``not``;
* selections: ``kthvalue``, ``mode``, ``bincount``, ``searchsorted``, ``nms``
  (``paddle.vision.ops.nms``), ``unique_consecutive``, ``tril_indices`` / ``triu_indices``;
* ``logcumsumexp``.
"""
from __future__ import annotations

from typing import Any, Dict, Tuple

import numpy as np

from ..core.dtypes import VarType, to_numpy_dtype
from ..core.registry import OpDef, VarSpec, register
from .broadcast import reduce_to
from .tensor import norm_axis


# -- pass-throughs ----------------------------------------------------------------------------
class _Copy(OpDef):
    inputs, outputs = ("X",), ("Out",)
    grad_uses = ()

    def infer(self, X, **_):
        return {"Out": X}

    def forward(self, X):
        return {"Out": X.copy()}

    def backward(self, dOut):
        return {"X": dOut}


@register
class ShareData(_Copy):
    """Out = X (Paddle shares the buffer; a copy here, the same values)."""
    type = "share_data"


@register
class MemcpyD2H(_Copy):
    """Out = X: Paddle's copy from the device to the host; fluidlite runs on the CPU only, so
    ``dst_place_type`` has one meaning here (the host) and the op is a copy."""
    type = "memcpy_d2h"

    def forward(self, X, *, dst_place_type=0):
        return {"Out": X.copy()}

    def backward(self, dOut, *, dst_place_type=0):
        return {"X": dOut}


@register
class MemcpyH2D(MemcpyD2H):
    """Out = X: Paddle's copy from the host to a device (a copy on fluidlite's one CPU)."""
    type = "memcpy_h2d"


@register
class Depend(OpDef):
    """Out = X; ``Dep`` only makes Paddle's scheduler run its producers first (the plan here
    runs ops in program order), so it is read for that order and not used."""
    type, inputs, outputs = "depend", ("X", "Dep*"), ("Out",)
    grad_uses = ()

    def infer(self, X, Dep):
        return {"Out": X}

    def forward(self, X, Dep):
        return {"Out": X}

    def backward(self, dOut):
        return {"X": dOut}


# -- fills ------------------------------------------------------------------------------------
@register
class FillAny(OpDef):
    """Out = X's shape and dtype filled with ``value`` (``Tensor.fill_``);  dX = 0."""
    type, inputs, outputs = "fill_any", ("X",), ("Out",)
    grad_uses = ("X",)

    def infer(self, X, *, value=0.0):
        return {"Out": X}

    def forward(self, X, *, value=0.0):
        return {"Out": np.full(X.shape, value, X.dtype)}

    def backward(self, X, dOut, *, value=0.0):
        return {"X": np.zeros_like(dOut)}


def _diagonal_positions(shape: Tuple[int, ...], offset: int, wrap: bool) -> np.ndarray:
    """Flat positions of ``fill_diagonal``: a 2-D X's (i, i + offset) -- with ``wrap`` a tall
    matrix starts again every cols + 1 rows, as numpy's fill_diagonal -- or (i, i, ..., i)
    for a cube."""
    if len(shape) == 2:
        rows, cols = shape
        step = cols + 1
        end = rows * cols if wrap else min(rows, cols) * cols
        pos = np.arange(0, end, step, dtype=np.int64)
        col = pos % cols + offset
        ok = (col >= 0) & (col < cols)
        return (pos + offset)[ok]
    n = min(shape)
    step = sum(int(np.prod(shape[k + 1:])) for k in range(len(shape)))
    return np.arange(n, dtype=np.int64) * step


@register
class FillDiagonal(OpDef):
    """Out = X with its diagonal (``offset``; ``wrap``: numpy's wrapping for tall matrices)
    set to ``value``;  dX = dOut with those places zeroed. A cube's diagonal is every
    (i, i, ..., i), as numpy's fill_diagonal (Paddle 2.6 fills only the first: a deviation,
    docs/compatibility.md)."""
    type, inputs, outputs = "fill_diagonal", ("X",), ("Out",)
    grad_uses = ("X",)

    def infer(self, X, *, value=0.0, offset=0, wrap=False):
        if len(X.shape) > 2 and len(set(X.shape)) != 1:
            raise ValueError(f"fill_diagonal: a tensor of more than 2 dims must have equal "
                             f"dims, got {list(X.shape)}")
        return {"Out": X}

    def forward(self, X, *, value=0.0, offset=0, wrap=False):
        out = X.copy()
        out.reshape(-1)[_diagonal_positions(X.shape, offset, wrap)] = value
        return {"Out": out}

    def backward(self, X, dOut, *, value=0.0, offset=0, wrap=False):
        g = dOut.copy()
        g.reshape(-1)[_diagonal_positions(X.shape, offset, wrap)] = 0
        return {"X": g}


# -- comparisons and integers -----------------------------------------------------------------
def _tolerance(t: Any, attr: Any) -> float:
    return float(np.asarray(t).reshape(-1)[0]) if t is not None else float(attr)


@register
class Isclose(OpDef):
    """Out = |Input - Other| <= atol + rtol |Other| (equal infinities too; NaNs equal with
    ``equal_nan``); ``Rtol`` / ``Atol`` tensors override the (string) attributes."""
    type, inputs, outputs = "isclose", ("Input", "Other", "Rtol?", "Atol?"), ("Out",)
    no_grad = True

    def infer(self, Input, Other, Rtol=None, Atol=None, *, rtol="1e-05", atol="1e-08",
              equal_nan=False):
        shapes = [tuple(Input.shape), tuple(Other.shape)]
        shape = (-1,) * max(map(len, shapes)) if any(-1 in s for s in shapes) else \
            np.broadcast_shapes(*shapes)
        return {"Out": VarSpec(shape, VarType.BOOL)}

    def forward(self, Input, Other, Rtol=None, Atol=None, *, rtol="1e-05", atol="1e-08",
                equal_nan=False):
        r, a = _tolerance(Rtol, rtol), _tolerance(Atol, atol)
        x, y = Input.astype(np.float64), Other.astype(np.float64)
        with np.errstate(invalid="ignore"):
            close = (x == y) | (np.abs(x - y) <= a + r * np.abs(y))
        if equal_nan:
            close |= np.isnan(x) & np.isnan(y)
        return {"Out": np.asarray(close)}


class _FMinMax(OpDef):
    """Elementwise max / min ignoring NaN (numpy broadcasting)."""
    inputs, outputs = ("X", "Y"), ("Out",)
    pick: Any
    wins: Any

    def infer(self, X, Y, *, axis=-1):
        shapes = [tuple(X.shape), tuple(Y.shape)]
        shape = (-1,) * max(map(len, shapes)) if any(-1 in s for s in shapes) else \
            np.broadcast_shapes(*shapes)
        return {"Out": VarSpec(shape, X.dtype)}

    def forward(self, X, Y, *, axis=-1):
        return {"Out": self.pick(X, Y)}

    def backward(self, X, Y, dOut, *, axis=-1):
        take_x = self.wins(X, Y) | np.isnan(Y)
        zero = dOut.dtype.type(0)
        return {"X": reduce_to(np.where(take_x, dOut, zero), X.shape).astype(X.dtype, copy=False),
                "Y": reduce_to(np.where(take_x, zero, dOut), Y.shape).astype(Y.dtype, copy=False)}


@register
class ElementwiseFmax(_FMinMax):
    """Out = fmax(X, Y) (the other operand where one is NaN);  the gradient goes to X where
    X >= Y or Y is NaN, to Y elsewhere."""
    type = "elementwise_fmax"
    pick, wins = staticmethod(np.fmax), staticmethod(np.greater_equal)


@register
class ElementwiseFmin(_FMinMax):
    """Out = fmin(X, Y) (NaN ignored);  the gradient goes to X where X <= Y or Y is NaN."""
    type = "elementwise_fmin"
    pick, wins = staticmethod(np.fmin), staticmethod(np.less_equal)


_INTEGERS = (VarType.BOOL, VarType.UINT8, VarType.INT8, VarType.INT16, VarType.INT32,
             VarType.INT64)


class _Bitwise(OpDef):
    """Out = f(X, Y) (or f(X) for ``bitwise_not``) on bool / integer tensors."""
    outputs = ("Out",)
    no_grad = True
    f: Any

    def infer(self, X, Y=None):
        if X.dtype not in _INTEGERS:
            raise ValueError(f"{self.type}: X must be a bool or integer tensor, got "
                             f"{X.dtype.name.lower()}")
        if Y is None:
            return {"Out": X}
        shapes = [tuple(X.shape), tuple(Y.shape)]
        shape = (-1,) * max(map(len, shapes)) if any(-1 in s for s in shapes) else \
            np.broadcast_shapes(*shapes)
        return {"Out": VarSpec(shape, X.dtype)}

    def forward(self, X, Y=None):
        if Y is None:
            return {"Out": self.f(X)}
        return {"Out": self.f(X, Y).astype(X.dtype, copy=False)}


def _bitwise(op_type: str, f: Any, unary: bool = False) -> None:
    # (the kernels are _Bitwise's methods, not closures made here: registration runs at
    # import time, where mutation testing cannot reach code)
    register(type(op_type.title().replace("_", ""), (_Bitwise,), {
        "__doc__": f"Out = {f.__name__}(X{'' if unary else ', Y'}) (bool / integer tensors).",
        "type": op_type, "inputs": ("X",) if unary else ("X", "Y"), "f": staticmethod(f)}))


_bitwise("bitwise_and", np.bitwise_and)
_bitwise("bitwise_or", np.bitwise_or)
_bitwise("bitwise_xor", np.bitwise_xor)
_bitwise("bitwise_not", np.invert, unary=True)


# -- selections -------------------------------------------------------------------------------
class _Select(OpDef):
    """Out / Indices picked along ``axis``; dX = dOut put back at Indices."""
    inputs, outputs = ("X",), ("Out", "Indices")
    grad_uses = ("X", "Indices")

    def _spec(self, X, axis, keepdim):
        if not X.shape:
            return {"Out": X, "Indices": VarSpec((), VarType.INT64)}
        a = norm_axis(self.type, axis, len(X.shape))
        shape = [1 if i == a else d for i, d in enumerate(X.shape)] if keepdim else \
            [d for i, d in enumerate(X.shape) if i != a]
        return {"Out": VarSpec(shape, X.dtype), "Indices": VarSpec(shape, VarType.INT64)}

    def _scatter(self, X, Indices, dOut, axis):
        if X.ndim == 0:
            return {"X": dOut.copy()}
        a = norm_axis(self.type, axis, X.ndim)
        idx = np.expand_dims(Indices, a) if Indices.ndim < X.ndim else Indices
        g = np.zeros(X.shape, dOut.dtype)
        d = np.expand_dims(dOut, a) if dOut.ndim < X.ndim else dOut
        np.put_along_axis(g, idx, d, a)
        return {"X": g}


@register
class Kthvalue(_Select):
    """Out = the k-th smallest value along ``axis`` (k from 1), Indices its position (the
    first of equal values in a stable sort)."""
    type = "kthvalue"

    def infer(self, X, *, k=1, axis=-1, keepdim=False):
        return self._spec(X, axis, keepdim)

    def forward(self, X, *, k=1, axis=-1, keepdim=False):
        if X.ndim == 0:
            return {"Out": X.copy(), "Indices": np.zeros((), np.int64)}
        a = norm_axis(self.type, axis, X.ndim)
        if not 1 <= k <= X.shape[a]:
            raise ValueError(f"kthvalue: k must be in [1, {X.shape[a]}] (the size of axis "
                             f"{a}), got {k}")
        order = np.argsort(X, axis=a, kind="stable")
        idx = np.take(order, [k - 1], axis=a)
        out = np.take_along_axis(X, idx, a)
        if not keepdim:
            idx, out = np.squeeze(idx, a), np.squeeze(out, a)
        return {"Out": out, "Indices": idx.astype(np.int64)}

    def backward(self, X, Indices, dOut, dIndices=None, *, k=1, axis=-1, keepdim=False):
        return self._scatter(X, Indices, dOut, axis)


@register
class Mode(_Select):
    """Out = the most frequent value along ``axis`` (the smallest of equally frequent ones),
    Indices the position of its last occurrence (Paddle 2.6's choices)."""
    type = "mode"

    def infer(self, X, *, axis=-1, keepdim=False):
        return self._spec(X, axis, keepdim)

    def forward(self, X, *, axis=-1, keepdim=False):
        if X.ndim == 0:
            return {"Out": X.copy(), "Indices": np.zeros((), np.int64)}
        a = norm_axis(self.type, axis, X.ndim)
        xm = np.moveaxis(X, a, -1)
        flat = xm.reshape(-1, xm.shape[-1])
        vals, idxs = np.empty(flat.shape[0], X.dtype), np.empty(flat.shape[0], np.int64)
        for r, row in enumerate(flat):
            u, counts = np.unique(row, return_counts=True)
            best = u[int(np.argmax(counts))]           # u is sorted: the smallest wins
            vals[r] = best
            idxs[r] = np.flatnonzero(row == best)[-1]
        shape = xm.shape[:-1]
        out, idx = vals.reshape(shape), idxs.reshape(shape)
        if keepdim:
            out, idx = np.expand_dims(out, a), np.expand_dims(idx, a)
        return {"Out": out, "Indices": idx}

    def backward(self, X, Indices, dOut, dIndices=None, *, axis=-1, keepdim=False):
        return self._scatter(X, Indices, dOut, axis)


@register
class Bincount(OpDef):
    """Out[v] = how often v occurs in the non-negative integers X (summing ``Weights`` when
    given), at least ``minlength`` long; int64 counts, or the weights' dtype."""
    type, inputs, outputs = "bincount", ("X", "Weights?"), ("Out",)
    no_grad = True

    def infer(self, X, Weights=None, *, minlength=0):
        dt = VarType.INT64 if Weights is None else Weights.dtype
        return {"Out": VarSpec((-1,), dt)}

    def forward(self, X, Weights=None, *, minlength=0):
        x = np.asarray(X).reshape(-1)
        if x.size and x.min() < 0:
            raise ValueError(f"bincount: X must not be negative, but holds {int(x.min())}")
        w = None if Weights is None else np.asarray(Weights).reshape(-1)
        out = np.bincount(x.astype(np.int64), w, minlength=max(int(minlength), 0))
        return {"Out": out.astype(np.int64 if w is None else w.dtype)}


@register
class Searchsorted(OpDef):
    """Out = the insertion positions of Values in the sorted last dim of SortedSequence (a
    1-D sequence serves every row), left (first) or ``right`` (after equal values); int64,
    or int32 with ``out_int32``."""
    type, inputs, outputs = "searchsorted", ("SortedSequence", "Values"), ("Out",)
    no_grad = True

    def infer(self, SortedSequence, Values, *, out_int32=False, right=False):
        return {"Out": VarSpec(Values.shape, VarType.INT32 if out_int32 else VarType.INT64)}

    def forward(self, SortedSequence, Values, *, out_int32=False, right=False):
        side = "right" if right else "left"
        dt = np.int32 if out_int32 else np.int64
        if SortedSequence.ndim == 1:
            return {"Out": np.searchsorted(SortedSequence, Values, side).astype(dt)}
        if SortedSequence.shape[:-1] != Values.shape[:-1]:
            raise ValueError(f"searchsorted: SortedSequence {list(SortedSequence.shape)} and "
                             f"Values {list(Values.shape)} must agree on all dims but the last")
        seq = SortedSequence.reshape(-1, SortedSequence.shape[-1])
        val = Values.reshape(-1, Values.shape[-1])
        out = np.stack([np.searchsorted(s, v, side) for s, v in zip(seq, val)])
        return {"Out": out.reshape(Values.shape).astype(dt)}


@register
class Nms(OpDef):
    """``paddle.vision.ops.nms``'s op: greedy NMS over Boxes [N, 4] taken in their order
    (the caller sorts by score): a box is kept when its IoU (plain areas) with every kept
    box is at most ``iou_threshold``; KeepBoxesIdxs (int64) lists the kept positions."""
    type, inputs, outputs = "nms", ("Boxes",), ("KeepBoxesIdxs",)
    no_grad = True

    def infer(self, Boxes, *, iou_threshold=0.3):
        return {"KeepBoxesIdxs": VarSpec((-1,), VarType.INT64)}

    def forward(self, Boxes, *, iou_threshold=0.3):
        b = np.asarray(Boxes, np.float64).reshape(-1, 4)
        area = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
        keep = []
        thr = float(np.float32(iou_threshold))
        for i in range(b.shape[0]):
            ok = True
            for j in keep:
                iw = min(b[i, 2], b[j, 2]) - max(b[i, 0], b[j, 0])
                ih = min(b[i, 3], b[j, 3]) - max(b[i, 1], b[j, 1])
                inter = max(iw, 0.0) * max(ih, 0.0)
                union = area[i] + area[j] - inter
                if union > 0 and inter / union > thr:
                    ok = False
                    break
            if ok:
                keep.append(i)
        return {"KeepBoxesIdxs": np.asarray(keep, np.int64)}


@register
class UniqueConsecutive(OpDef):
    """Out = X (flattened, or its slices along ``axis``) with runs of equal items collapsed
    to one; Index the run of each item, Counts each run's length (``dtype``)."""
    type, inputs, outputs = "unique_consecutive", ("X",), ("Out", "Index?", "Counts?")
    no_grad = True

    def infer(self, X, *, return_inverse=False, return_counts=False, axis=[],
              dtype=int(VarType.INT64)):
        dt = VarType(int(dtype))
        if not axis:
            return {"Out": VarSpec((-1,), X.dtype), "Index": VarSpec((-1,), dt),
                    "Counts": VarSpec((-1,), dt)}
        a = norm_axis(self.type, int(axis[0]), len(X.shape))
        return {"Out": VarSpec([-1 if i == a else d for i, d in enumerate(X.shape)], X.dtype),
                "Index": VarSpec((X.shape[a],), dt), "Counts": VarSpec((-1,), dt)}

    def forward(self, X, *, return_inverse=False, return_counts=False, axis=[],
                dtype=int(VarType.INT64)):
        dt = to_numpy_dtype(VarType(int(dtype)))
        if axis:
            a = norm_axis(self.type, int(axis[0]), X.ndim)
            items = np.moveaxis(X, a, 0).reshape(X.shape[a], -1)
        else:
            a, items = None, X.reshape(-1, 1)
        n = items.shape[0]
        new = np.ones(n, bool)
        if n > 1:
            new[1:] = (items[1:] != items[:-1]).any(axis=1)
        starts = np.flatnonzero(new)
        index = np.cumsum(new) - 1
        counts = np.diff(np.append(starts, n))
        out = X.reshape(-1)[starts] if a is None else np.take(X, starts, axis=a)
        return {"Out": out, "Index": index.astype(dt), "Counts": counts.astype(dt)}


class _TriIndices(OpDef):
    inputs, outputs = (), ("out",)
    no_grad = True
    below: bool                   # (not ``lower``: that is OpDef's fast-path hook)

    def _pairs(self, rows: int, cols: int, offset: int) -> np.ndarray:
        f = np.tril_indices if self.below else np.triu_indices
        return np.stack(f(rows, offset, cols))


@register
class TrilIndices(_TriIndices):
    """out [2, K]: the (row, column) of every element on or below the ``offset`` diagonal of
    a ``rows`` x ``cols`` matrix, row by row."""
    type, below = "tril_indices", True

    def infer(self, *, rows=0, cols=0, offset=0, dtype=int(VarType.INT64)):
        return {"out": VarSpec((2, self._pairs(rows, cols, offset).shape[1]),
                               VarType(int(dtype)))}

    def forward(self, *, rows=0, cols=0, offset=0, dtype=int(VarType.INT64)):
        return {"out": self._pairs(rows, cols, offset).astype(to_numpy_dtype(VarType(dtype)))}


@register
class TriuIndices(_TriIndices):
    """out [2, K]: the (row, column) of every element on or above the ``offset`` diagonal of
    a ``row`` x ``col`` matrix, row by row."""
    type, below = "triu_indices", False

    def infer(self, *, row=0, col=0, offset=0, dtype=int(VarType.INT64)):
        return {"out": VarSpec((2, self._pairs(row, col, offset).shape[1]),
                               VarType(int(dtype)))}

    def forward(self, *, row=0, col=0, offset=0, dtype=int(VarType.INT64)):
        return {"out": self._pairs(row, col, offset).astype(to_numpy_dtype(VarType(dtype)))}


# -- logcumsumexp -----------------------------------------------------------------------------
@register
class Logcumsumexp(OpDef):
    """Out = log(cumsum(exp(X))) along ``axis`` (all of X flattened with ``flatten``;
    ``exclusive``: the sum before each element; ``reverse``: from the end); an empty sum
    (none yet, or only -inf so far) is the lowest finite value, as Paddle 2.6's kernel.
    Computed stably with a running log-add-exp (a sum of tiny terms far below a later
    maximum stays finite);  dX_i = sum over the j whose sum holds i of dOut_j exp(X_i - Out_j),
    summed in the log domain for the positive and negative dOut_j apart (PyTorch's and
    Paddle's rule: no exp(X) or exp(-Out) alone, which overflow for |X| > 709)."""
    type, inputs, outputs = "logcumsumexp", ("X",), ("Out",)
    grad_uses = ("X", "Out")

    def infer(self, X, *, axis=-1, flatten=False, exclusive=False, reverse=False):
        return {"Out": X.with_(shape=(-1 if -1 in X.shape else int(np.prod(X.shape)),))
                if flatten else X}

    @staticmethod
    def _scan(x: np.ndarray, exclusive: bool) -> np.ndarray:
        """Inclusive (or exclusive) log-cum-sum-exp along the last dim."""
        lowest = np.finfo(x.dtype).min
        out = np.logaddexp.accumulate(x, axis=-1)
        out = np.where(out == -np.inf, lowest, out)
        if exclusive and x.shape[-1]:
            out = np.concatenate([np.full(x.shape[:-1] + (1,), lowest, x.dtype),
                                  out[..., :-1]], axis=-1)
        return out.astype(x.dtype, copy=False)

    def _view(self, X, axis, flatten):
        if flatten:
            return X.reshape(-1), 0
        return X, norm_axis(self.type, axis, X.ndim)

    def forward(self, X, *, axis=-1, flatten=False, exclusive=False, reverse=False):
        x, a = self._view(X, axis, flatten)
        xm = np.moveaxis(x, a, -1)
        if reverse:
            xm = xm[..., ::-1]
        out = self._scan(xm, exclusive)
        if reverse:
            out = out[..., ::-1]
        return {"Out": np.moveaxis(out, -1, a)}

    def backward(self, X, Out, dOut, *, axis=-1, flatten=False, exclusive=False,
                 reverse=False):
        x, a = self._view(X, axis, flatten)
        xm = np.moveaxis(x, a, -1)
        om = np.moveaxis(Out.reshape(x.shape), a, -1)
        dm = np.moveaxis(dOut.reshape(x.shape), a, -1)
        if reverse:
            xm, om, dm = xm[..., ::-1], om[..., ::-1], dm[..., ::-1]
        # dX_i = sum_{j >= i} (j > i: exclusive) dOut_j exp(X_i - Out_j), as exp(X_i + L_i)
        # with L_i = log sum_{j >= i} dOut_j exp(-Out_j) -- a reverse running log-add-exp of
        # the positive and of the negative dOut_j apart; an empty sum adds nothing
        empty = ~np.isfinite(om) | (om == np.finfo(om.dtype).min)    # (an exclusive first)
        g = 0
        for sign in (1, -1):
            d = sign * dm
            one, zero, ninf = d.dtype.type(1), om.dtype.type(0), d.dtype.type(-np.inf)
            t = np.where(empty | ~(d > 0), ninf,
                         np.log(np.where(d > 0, d, one)) - np.where(empty, zero, om))
            acc = np.logaddexp.accumulate(t[..., ::-1], axis=-1)[..., ::-1]
            if exclusive:
                acc = np.concatenate([acc[..., 1:], np.full_like(acc[..., :1], -np.inf)],
                                     axis=-1)
            g = g + sign * np.exp(xm + acc)
        if reverse:
            g = g[..., ::-1]
        g = np.moveaxis(g, -1, a)
        return {"X": g.reshape(X.shape).astype(X.dtype, copy=False)}
