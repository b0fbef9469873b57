"""Ops Paddle 2.x programs use whose semantics no fluid 1.x op expresses (issue 18): loaded from
``.pdmodel`` files (``formats/paddle/program.py``) and usable like any other op.

* ``flatten_contiguous_range``: dims ``start_axis..stop_axis`` merged into one.
* ``expand_v2``: X broadcast (numpy rule, X right-aligned) to ``shape``; -1 keeps X's dim.
* ``tile``: ``np.tile`` with ``repeat_times`` (X or repeat_times left-padded with 1s).
* ``where``: ``Out = Condition ? X : Y`` (numpy broadcasting of the three).
* ``top_k_v2``: top-k along ``axis``, ``largest`` or smallest first.
* ``p_norm``: the vector p-norm along ``axis`` (or of all of X with ``asvector``).
* ``isfinite_v2`` / ``isnan_v2`` / ``isinf_v2``: elementwise tests (fluid's ``isfinite`` reduces).
* ``pad3d``: padding of the D/H/W dims of a 5-D tensor (constant, reflect, replicate,
  circular), what Paddle 2.x's ``F.pad`` writes for 3-D to 5-D inputs.
* ``mish``: ``X * tanh(softplus(X))``; ``diag_v2``: a diagonal matrix from a vector or a diagonal
  of a matrix, at ``offset``.

Gradients are ``backward`` kernels registered as ``<type>_grad`` with Paddle's slot names
(``X``, ``Out@GRAD`` -> ``X@GRAD``), so Paddle 2.x training programs holding these grad ops load.
"""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

import numpy as np

from ..core import shape as S
from ..core.dtypes import VarType
from ..core.registry import OpDef, VarSpec, register
from .broadcast import reduce_to
from .manip import _spec_xshape, _xshape, _XShapeOp
from .tensor import emit_grad_op, norm_axis, tensor_values


def _flat_range(op: str, rank: int, start: int, stop: int) -> Tuple[int, int]:
    if rank == 0:
        return 0, 0
    a, b = norm_axis(op, start, rank, "start_axis"), norm_axis(op, stop, rank, "stop_axis")
    if a > b:
        raise ValueError(f"{op}: start_axis ({start}) must not be after stop_axis ({stop}) for "
                         f"input of rank {rank}")
    return a, b


@register
class FlattenContiguousRange(_XShapeOp):
    """Out = reshape(X, X.shape[:start] + [prod(X.shape[start:stop+1])] + X.shape[stop+1:])
    (0-D X gives shape [1]);  dX = reshape(dOut, X.shape)."""
    type = "flatten_contiguous_range"

    def infer(self, X, *, start_axis=1, stop_axis=1):
        shape = tuple(X.shape)
        if not shape:
            return {"Out": VarSpec((1,), X.dtype, X.lod_level), "XShape": _spec_xshape(X)}
        a, b = _flat_range(self.type, len(shape), start_axis, stop_axis)
        out = shape[:a] + (S.numel(shape[a:b + 1]),) + shape[b + 1:]
        return {"Out": VarSpec(out, X.dtype, X.lod_level), "XShape": _spec_xshape(X)}

    def forward(self, X, *, start_axis=1, stop_axis=1):
        if X.ndim == 0:
            return {"Out": X.reshape(1), "XShape": _xshape(X)}
        a, b = _flat_range(self.type, X.ndim, start_axis, stop_axis)
        out = X.shape[:a] + (int(np.prod(X.shape[a:b + 1], dtype=np.int64)),) + X.shape[b + 1:]
        return {"Out": X.reshape(out), "XShape": _xshape(X)}


def _expand_target(x_shape: Sequence[int], shape: Sequence[int]) -> Tuple[int, ...]:
    """expand_v2's Out shape: X right-aligned against ``shape``; -1 keeps X's dim (only where
    X has one); X's dims must be 1 or equal to the target's."""
    x_shape, shape = tuple(x_shape), [int(d) for d in shape]
    if len(shape) < len(x_shape):
        raise ValueError(f"expand_v2: shape {shape} has fewer dims than X (shape "
                         f"{list(x_shape)}); it needs at least {len(x_shape)}")
    lead = len(shape) - len(x_shape)
    out = []
    for i, d in enumerate(shape):
        xd = x_shape[i - lead] if i >= lead else None
        if d == -1:
            if xd is None:
                raise ValueError(f"expand_v2: shape {shape} has -1 at dim {i}, which X (shape "
                                 f"{list(x_shape)}) does not have; only X's own dims may be -1")
            out.append(xd)
        elif d < 1 and d != 0:
            raise ValueError(f"expand_v2: shape {shape} has {d} at dim {i}; expected a size "
                             f">= 0 or -1")
        else:
            if xd is not None and xd not in (1, d) and xd >= 0:
                raise ValueError(f"expand_v2: X's dim {i - lead} is {xd}, which cannot be "
                                 f"expanded to {d} (shape {shape}); it must be 1 or {d}")
            out.append(d)
    return tuple(out)


@register
class ExpandV2(OpDef):
    """Out = broadcast_to(X, shape) (``Shape`` tensor or ``expand_shapes_tensor`` list override
    ``shape``);  dX = dOut summed over the broadcast dims."""
    type, inputs, outputs = "expand_v2", ("X", "Shape?", "expand_shapes_tensor*?"), ("Out",)
    grad_uses = ("X",)

    def infer(self, X, Shape=None, expand_shapes_tensor=(), *, shape=[]):
        if Shape is not None or expand_shapes_tensor:
            n = len(expand_shapes_tensor) if expand_shapes_tensor else \
                (Shape.shape[0] if Shape.shape and Shape.shape[0] > 0 else len(X.shape))
            return {"Out": VarSpec((-1,) * max(n, len(X.shape)), X.dtype)}
        return {"Out": VarSpec(_expand_target(X.shape, shape), X.dtype)}

    def forward(self, X, Shape=None, expand_shapes_tensor=(), *, shape=[]):
        dyn = tensor_values(Shape, expand_shapes_tensor or None)
        target = _expand_target(X.shape, dyn if dyn is not None else shape)
        return {"Out": np.ascontiguousarray(np.broadcast_to(X, target))}

    def backward(self, X, dOut, *, shape=[]):
        return {"X": reduce_to(dOut, X.shape)}

    def make_grad(self, g, **attrs):
        emit_grad_op(g, self.type, attrs, uses=("X",))


def _tile_shapes(x_shape: Sequence[int], reps: Sequence[int]
                 ) -> Tuple[Tuple[int, ...], Tuple[int, ...]]:
    reps = [int(r) for r in reps]
    if any(r < 0 for r in reps):
        raise ValueError(f"tile: repeat_times {reps} must be >= 0")
    n = max(len(x_shape), len(reps))
    return (1,) * (n - len(x_shape)) + tuple(x_shape), (1,) * (n - len(reps)) + tuple(reps)


@register
class Tile(OpDef):
    """Out = np.tile(X, repeat_times) (``RepeatTimes`` / ``repeat_times_tensor`` override it);
    dX = dOut summed over the copies."""
    type, inputs, outputs = "tile", ("X", "RepeatTimes?", "repeat_times_tensor*?"), ("Out",)
    grad_uses = ("X",)

    def infer(self, X, RepeatTimes=None, repeat_times_tensor=(), *, repeat_times=[]):
        if RepeatTimes is not None or repeat_times_tensor:
            n = len(repeat_times_tensor) if repeat_times_tensor else len(X.shape)
            return {"Out": VarSpec((-1,) * max(n, len(X.shape)), X.dtype)}
        xs, reps = _tile_shapes(X.shape, repeat_times)
        return {"Out": VarSpec(tuple(d * r if d >= 0 else -1 for d, r in zip(xs, reps)),
                               X.dtype)}

    def _reps(self, X, RepeatTimes, repeat_times_tensor, repeat_times):
        dyn = tensor_values(RepeatTimes, repeat_times_tensor or None)
        return _tile_shapes(X.shape, dyn if dyn is not None else repeat_times)

    def forward(self, X, RepeatTimes=None, repeat_times_tensor=(), *, repeat_times=[]):
        xs, reps = self._reps(X, RepeatTimes, repeat_times_tensor, repeat_times)
        return {"Out": np.tile(X.reshape(xs), reps)}

    def backward(self, X, dOut, *, repeat_times=[]):
        # the repeats are read off dOut (the tensor forms of repeat_times need no re-reading)
        xs = (1,) * (dOut.ndim - X.ndim) + X.shape
        reps = tuple(o // x if x else 0 for o, x in zip(dOut.shape, xs))
        inter = [v for pair in zip(reps, xs) for v in pair]      # (r0, x0, r1, x1, ...)
        g = dOut.reshape(inter).sum(axis=tuple(range(0, len(inter), 2)))
        return {"X": g.reshape(X.shape)}

    def make_grad(self, g, **attrs):
        emit_grad_op(g, self.type, attrs, uses=("X",))


@register
class Where(OpDef):
    """Out = where(Condition, X, Y) (numpy broadcasting);  dX = reduce(dOut * Condition),
    dY = reduce(dOut * !Condition)."""
    type, inputs, outputs = "where", ("Condition", "X", "Y"), ("Out",)
    grad_uses = ("Condition", "X", "Y")

    def infer(self, Condition, X, Y):
        if X.dtype != Y.dtype:
            raise ValueError(f"where: X and Y must have the same data type, got {X.dtype} and "
                             f"{Y.dtype}")
        shapes = [tuple(Condition.shape), tuple(X.shape), tuple(Y.shape)]
        try:        # an unknown dim (-1) broadcasts like 1 here; a 0 dim stays 0
            out = np.broadcast_shapes(*[tuple(d if d >= 0 else 1 for d in s) for s in shapes])
        except ValueError:
            raise ValueError(f"where: Condition {list(shapes[0])}, X {list(shapes[1])} and Y "
                             f"{list(shapes[2])} cannot be broadcast together") from None
        n = len(out)
        padded = [(1,) * (n - len(s)) + s for s in shapes]
        out = tuple(-1 if any(p[i] < 0 for p in padded) and out[i] == 1 else out[i]
                    for i in range(n))
        return {"Out": VarSpec(out, X.dtype, X.lod_level)}

    def forward(self, Condition, X, Y):
        return {"Out": np.where(Condition.astype(bool), X, Y)}

    def backward(self, Condition, X, Y, dOut):
        c = Condition.astype(bool)
        zero = np.zeros((), dOut.dtype)
        return {"X": reduce_to(np.where(c, dOut, zero), X.shape),
                "Y": reduce_to(np.where(c, zero, dOut), Y.shape)}

    def make_grad(self, g, **attrs):
        emit_grad_op(g, self.type, attrs, uses=("Condition", "X", "Y"), in_grads=("X", "Y"))


def _topk(X: np.ndarray, k: int, axis: int, largest: bool) -> np.ndarray:
    """Indices of the top k along ``axis`` (ties: lower index first)."""
    key = X
    if largest:     # an order-reversing key: -x for floats; ~x (-x - 1 for signed ints) for
        # bools and integers, where -x fails (bool), wraps (unsigned) or overflows (the minimum)
        key = ~X if X.dtype.kind in "biu" else -X
    return np.take(np.argsort(key, axis=axis, kind="stable"), np.arange(k), axis=axis)


@register
class TopKV2(OpDef):
    """Out, Indices = the k largest (``largest``) or smallest entries of X along ``axis``,
    sorted, and their int64 positions (``K`` tensor overrides ``k``);
    dX = dOut scattered to Indices."""
    type, inputs, outputs = "top_k_v2", ("X", "K?"), ("Out", "Indices")
    grad_uses = ("X", "Indices")

    def infer(self, X, K=None, *, k=1, axis=-1, largest=True, sorted=True):
        rank = len(X.shape)
        if rank == 0:
            return {"Out": VarSpec((), X.dtype), "Indices": VarSpec((), VarType.INT64)}
        a = norm_axis(self.type, axis, rank)
        if K is None:
            if k < 1:
                raise ValueError(f"top_k_v2: k must be >= 1, got {k}")
            if X.shape[a] >= 0 and k > X.shape[a]:
                raise ValueError(f"top_k_v2: k={k} exceeds dim {a} of X (shape "
                                 f"{list(X.shape)})")
        shape = list(X.shape)
        shape[a] = k if K is None else -1
        return {"Out": VarSpec(tuple(shape), X.dtype, X.lod_level),
                "Indices": VarSpec(tuple(shape), VarType.INT64, X.lod_level)}

    def forward(self, X, K=None, *, k=1, axis=-1, largest=True, sorted=True):
        if K is not None:
            k = int(np.asarray(K).reshape(-1)[0])
        if X.ndim == 0:
            return {"Out": X.copy(), "Indices": np.zeros((), np.int64)}
        a = norm_axis(self.type, axis, X.ndim)
        if not 1 <= k <= X.shape[a]:
            raise ValueError(f"top_k_v2: k={k} must be in [1, {X.shape[a]}] for X of shape "
                             f"{list(X.shape)} along axis {axis}")
        idx = _topk(X, k, a, largest)
        return {"Out": np.take_along_axis(X, idx, axis=a), "Indices": idx.astype(np.int64)}

    def backward(self, X, Indices, dOut, dIndices=None, *, k=1, axis=-1, largest=True,
                 sorted=True):
        dx = np.zeros(X.shape, dtype=dOut.dtype)
        if X.ndim == 0:
            return {"X": dOut.astype(dx.dtype).reshape(())}
        np.put_along_axis(dx, Indices, dOut, axis=norm_axis(self.type, axis, X.ndim))
        return {"X": dx}

    def make_grad(self, g, **attrs):
        emit_grad_op(g, self.type, attrs, uses=("X", "Indices"))


def _norm_axes(X: np.ndarray, axis: int, asvector: bool) -> Optional[int]:
    return None if asvector or X.ndim == 0 else norm_axis("p_norm", axis, X.ndim)


@register
class PNorm(OpDef):
    """Out = (sum |X|^p)^(1/p) along ``axis`` (all of X with ``asvector``); p = inf: max |X|,
    -inf: min |X|, 0: count of non-zeros.  dX = dOut * sign(X) |X|^(p-1) / max(Out^(p-1), eps)
    (inf/-inf: dOut * sign(X) where |X| == Out; p = 0: 0)."""
    type, inputs, outputs = "p_norm", ("X",), ("Out",)
    grad_uses = ("X", "Out")

    def infer(self, X, *, porder=2.0, axis=-1, epsilon=1e-12, keepdim=False, asvector=False):
        rank = len(X.shape)
        if asvector or rank == 0:
            return {"Out": VarSpec((1,) * rank if keepdim else (), X.dtype)}
        a = norm_axis(self.type, axis, rank)
        shape = list(X.shape)
        if keepdim:
            shape[a] = 1
        else:
            del shape[a]
        return {"Out": VarSpec(tuple(shape), X.dtype)}

    def forward(self, X, *, porder=2.0, axis=-1, epsilon=1e-12, keepdim=False,
                asvector=False):
        a = _norm_axes(X, axis, asvector)
        ax = np.abs(X)
        kd = keepdim and not (asvector and X.ndim == 0)
        if porder == np.inf:
            out = ax.max(axis=a, keepdims=kd)
        elif porder == -np.inf:
            out = ax.min(axis=a, keepdims=kd)
        elif porder == 0:
            out = (X != 0).sum(axis=a, keepdims=kd).astype(X.dtype)
        else:
            out = np.power(np.power(ax, porder).sum(axis=a, keepdims=kd), 1.0 / porder)
        return {"Out": np.asarray(out, dtype=X.dtype)}

    def backward(self, X, Out, dOut, *, porder=2.0, axis=-1, epsilon=1e-12, keepdim=False,
                 asvector=False):
        a = _norm_axes(X, axis, asvector)
        if a is None:
            out, dout = Out.reshape((1,) * X.ndim), dOut.reshape((1,) * X.ndim)
        else:
            out, dout = np.expand_dims(Out, a) if not keepdim else Out, \
                np.expand_dims(dOut, a) if not keepdim else dOut
        if porder == 0:
            return {"X": np.zeros_like(X)}
        if porder in (np.inf, -np.inf):
            return {"X": (dout * np.sign(X) * (np.abs(X) == out)).astype(X.dtype)}
        grad = np.sign(X) * np.power(np.abs(X), porder - 1.0) / \
            np.maximum(np.power(out, porder - 1.0), epsilon)
        return {"X": (dout * grad).astype(X.dtype)}


class _ElementwiseTest(OpDef):
    """Out = test(X) elementwise (bool, X's shape). Not differentiable."""
    inputs, outputs = ("X",), ("Out",)
    no_grad = True
    test = staticmethod(np.isfinite)

    def infer(self, X):
        return {"Out": VarSpec(tuple(X.shape), VarType.BOOL, X.lod_level)}

    def forward(self, X):
        return {"Out": self.test(X)}


@register
class IsfiniteV2(_ElementwiseTest):
    """Out = isfinite(X) elementwise (bool). Not differentiable."""
    type = "isfinite_v2"


@register
class IsnanV2(_ElementwiseTest):
    """Out = isnan(X) elementwise (bool). Not differentiable."""
    type = "isnan_v2"
    test = staticmethod(np.isnan)


@register
class IsinfV2(_ElementwiseTest):
    """Out = isinf(X) elementwise (bool). Not differentiable."""
    type = "isinf_v2"
    test = staticmethod(np.isinf)


def _mish_softplus(x: np.ndarray, threshold: float) -> np.ndarray:
    """fluid's CalcSoftplus: x above ``threshold``, exp(x) below ``-threshold`` (threshold > 0
    only), log1p(exp(x)) between; in x's dtype."""
    with np.errstate(over="ignore"):
        e = np.exp(x)
        sp = np.log1p(e)
    if threshold > 0:
        t = x.dtype.type(threshold)
        sp = np.where(x > t, x, np.where(x < -t, e, sp))
    return sp


@register
class Mish(OpDef):
    """Out = X * tanh(sp), sp = fluid's softplus: X above ``threshold``, exp(X) below
    ``-threshold``, log1p(exp(X)) between (``threshold`` > 0; else always the last);
    dX = dOut * (X * (1 - tanh(sp)^2) * dsp + tanh(sp)), dsp = sp's derivative on its piece:
    1, exp(X) or sigmoid(X). (fluid's kernel used 1 - exp(-sp), sigmoid(X)'s value on the
    middle piece, everywhere: the same to 1e-9 at the default threshold of 20, not the
    derivative of its own forward near a small one -- docs/compatibility.md.)"""
    type, inputs, outputs = "mish", ("X",), ("Out",)
    grad_uses = ("X",)

    def infer(self, X, *, threshold=20.0):
        return {"Out": X}

    def forward(self, X, *, threshold=20.0):
        return {"Out": (X * np.tanh(_mish_softplus(X, threshold))).astype(X.dtype, copy=False)}

    def backward(self, X, dOut, *, threshold=20.0):
        sp = _mish_softplus(X, threshold)
        t = np.tanh(sp)
        one = X.dtype.type(1)
        dsp = -np.expm1(-sp)                 # sigmoid(X) where sp = log1p(exp(X))
        if threshold > 0:
            th = X.dtype.type(threshold)
            dsp = np.where(X > th, one, np.where(X < -th, np.exp(np.minimum(X, -th)), dsp))
        return {"X": (dOut * (X * ((one - t * t) * dsp) + t)).astype(X.dtype, copy=False)}


@register
class DiagV2(OpDef):
    """1-D X: Out = the square matrix with X on diagonal ``offset``, ``padding_value``
    elsewhere; 2-D X: Out = X's diagonal ``offset``.  dX = the diagonal of dOut (1-D X), or
    dOut placed on the diagonal (2-D X)."""
    type, inputs, outputs = "diag_v2", ("X",), ("Out",)
    grad_uses = ("X",)

    def infer(self, X, *, offset=0, padding_value=0.0):
        if len(X.shape) == 1:
            n = X.shape[0] + abs(offset) if X.shape[0] >= 0 else -1
            return {"Out": VarSpec((n, n), X.dtype)}
        if len(X.shape) == 2:
            h, w = X.shape
            if h < 0 or w < 0:
                return {"Out": VarSpec((-1,), X.dtype)}
            n = max(0, min(h, w - offset) if offset >= 0 else min(h + offset, w))
            return {"Out": VarSpec((n,), X.dtype)}
        raise ValueError(f"diag_v2: X must be 1-D or 2-D, got shape {list(X.shape)}")

    def forward(self, X, *, offset=0, padding_value=0.0):
        if X.ndim == 1:
            n = X.shape[0] + abs(offset)
            out = np.full((n, n), padding_value, dtype=X.dtype)
            r = np.arange(X.shape[0])
            out[r + max(-offset, 0), r + max(offset, 0)] = X
            return {"Out": out}
        if X.ndim != 2:
            raise ValueError(f"diag_v2: X must be 1-D or 2-D, got shape {list(X.shape)}")
        return {"Out": np.diagonal(X, offset).copy()}

    def backward(self, X, dOut, *, offset=0, padding_value=0.0):
        if X.ndim == 1:
            return {"X": np.diagonal(dOut, offset).copy()}
        dx = np.zeros(X.shape, dOut.dtype)
        n = dOut.shape[0]
        r = np.arange(n)
        dx[r + max(-offset, 0), r + max(offset, 0)] = dOut
        return {"X": dx}


_PAD_MODES = {"constant": "constant", "reflect": "reflect", "replicate": "edge",
              "circular": "wrap"}


def _pad_source(n: int, before: int, after: int, mode: str) -> np.ndarray:
    """For each output position along one axis, the input index it copies (-1: the constant)."""
    i = np.arange(-before, n + after)
    if mode == "constant":
        return np.where((i >= 0) & (i < n), i, -1)
    if mode == "replicate":
        return np.clip(i, 0, n - 1)
    if mode == "circular":
        return np.mod(i, n)
    period = 2 * (n - 1) if n > 1 else 1                  # reflect (edge not repeated)
    j = np.mod(i, period)
    return np.where(j < n, j, period - j)


def _pad3d_axes(ndim: int, data_format: str) -> Tuple[int, int, int]:
    """(D, H, W) axes of a 5-D X."""
    return (2, 3, 4) if data_format.upper() == "NCDHW" else (1, 2, 3)


def _pad3d_pairs(Paddings, paddings) -> List[int]:
    pads = [int(v) for v in (np.asarray(Paddings).reshape(-1) if Paddings is not None
                             else paddings)]
    if len(pads) != 6 or any(p < 0 for p in pads):
        raise ValueError(f"pad3d: paddings must be 6 non-negative ints [left, right, top, "
                         f"bottom, front, back], got {pads}")
    return pads


@register
class Pad3d(OpDef):
    """Out = X padded on W by (paddings[0], paddings[1]), H by (2, 3), D by (4, 5) (the
    ``Paddings`` tensor overrides the attr); ``mode`` constant (``value``), reflect, replicate
    or circular;  dX = dOut summed back onto the input positions each output copies."""
    type, inputs, outputs = "pad3d", ("X", "Paddings?"), ("Out",)
    grad_uses = ("X", "Paddings")

    def infer(self, X, Paddings=None, *, paddings=[0, 0, 0, 0, 0, 0], mode="constant",
              value=0.0, data_format="NCDHW"):
        if len(X.shape) != 5:
            raise ValueError(f"pad3d: X must be 5-D, got shape {list(X.shape)}")
        if mode not in _PAD_MODES:
            raise ValueError(f"pad3d: mode must be one of {sorted(_PAD_MODES)}, got {mode!r}")
        if data_format.upper() not in ("NCDHW", "NDHWC"):
            raise ValueError(f"pad3d: data_format must be 'NCDHW' or 'NDHWC', got "
                             f"{data_format!r}")
        shape = list(X.shape)
        if Paddings is not None:
            for a in _pad3d_axes(5, data_format):
                shape[a] = -1
            return {"Out": VarSpec(tuple(shape), X.dtype)}
        pads = _pad3d_pairs(None, paddings)
        for a, (lo, hi) in zip(_pad3d_axes(5, data_format)[::-1], (pads[0:2], pads[2:4],
                                                                   pads[4:6])):
            shape[a] = shape[a] + lo + hi if shape[a] >= 0 else -1
        return {"Out": VarSpec(tuple(shape), X.dtype)}

    def _sources(self, X, Paddings, paddings, mode, data_format):
        pads = _pad3d_pairs(Paddings, paddings)
        d, h, w = _pad3d_axes(X.ndim, data_format)
        out = []
        for a, (lo, hi) in ((w, pads[0:2]), (h, pads[2:4]), (d, pads[4:6])):
            n = X.shape[a]
            if mode == "reflect" and (lo >= n or hi >= n):
                raise ValueError(f"pad3d: reflect padding ({lo}, {hi}) must be smaller than "
                                 f"the dim it pads ({n})")
            if mode in ("replicate", "circular") and n == 0 and (lo or hi):
                raise ValueError(f"pad3d: {mode} padding of an empty dim")
            out.append((a, _pad_source(n, lo, hi, mode)))
        return out

    def forward(self, X, Paddings=None, *, paddings=[0, 0, 0, 0, 0, 0], mode="constant",
                value=0.0, data_format="NCDHW"):
        out = X
        for a, src in self._sources(X, Paddings, paddings, mode, data_format):
            if out.shape[a] == 0 and len(src):   # constant padding of an empty dim (_sources
                shape = list(out.shape)          # refuses the other modes there): nothing to
                shape[a] = len(src)              # take, the constant is filled in below
                taken = np.empty(shape, out.dtype)
            else:
                taken = np.take(out, np.maximum(src, 0), axis=a)
            if mode == "constant":
                mask_shape = [1] * out.ndim
                mask_shape[a] = len(src)
                taken = np.where((src >= 0).reshape(mask_shape), taken,
                                 np.asarray(value, X.dtype))
            out = taken
        return {"Out": np.ascontiguousarray(out, dtype=X.dtype)}

    def backward(self, X, Paddings, dOut, *, paddings=[0, 0, 0, 0, 0, 0], mode="constant",
                 value=0.0, data_format="NCDHW"):
        g = dOut
        for a, src in reversed(self._sources(X, Paddings, paddings, mode, data_format)):
            m = np.zeros((len(src), X.shape[a]), dtype=dOut.dtype)   # output pos -> input pos
            keep = src >= 0
            m[np.nonzero(keep)[0], src[keep]] = 1.0
            g = np.moveaxis(np.tensordot(g, m, axes=([a], [0])), -1, a)
        return {"X": g.astype(dOut.dtype, copy=False)}

    def make_grad(self, g, **attrs):
        emit_grad_op(g, self.type, attrs, uses=("X", "Paddings"))


__all__: List[str] = []
