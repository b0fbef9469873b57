"""Paddle 2.x ops of the long tail that exported programs still hold, with Paddle 2.6's slots,
attributes and numbers (tests/ops/test_paddle_oracle.py runs each in Paddle 2.6 too):

* scans and comparisons: ``cummax`` / ``cummin`` (values and the index each came from),
  ``equal_all``, ``elementwise_heaviside``, ``broadcast_tensors``;
* special functions: ``lgamma``, ``digamma`` (``polygamma`` of order 1 for its gradient);
* creation and statistics: ``logspace``, ``histogram``, ``nanmedian``;
* writes: ``fill_diagonal_tensor``, ``index_put``;
* ``renorm``, ``fold`` (col2im, the inverse layout of ``unfold``), ``rrelu`` and
  ``dropout_nd`` (dropout with one mask per slice of ``axis``).

Gradients are ``backward`` rules registered as ``<type>_grad`` with Paddle's slot names.
"""
from __future__ import annotations

import math
from typing import Any, List, Sequence, Tuple

import numpy as np

from ..core.dtypes import FLOATS, VarType, to_numpy_dtype
from ..core.registry import OpDef, VarSpec, get_op_def, register
from .broadcast import reduce_to
from .compare import fluid_equal
from .tensor import norm_axis


def _need(op: str, ok: bool, what: str) -> None:
    if not ok:
        raise ValueError(f"{op}: {what}")


def _broadcast_spec(op: str, shapes: Sequence[Sequence[int]]) -> Tuple[int, ...]:
    """numpy's broadcast of ``shapes`` with ``-1`` (unknown) dims: a dim is known when every
    input that is not 1 there knows it."""
    n = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(n):
        dims = [s[len(s) - n + i] for s in shapes if len(s) - n + i >= 0]
        known = {d for d in dims if d not in (1, -1)}
        _need(op, len(known) <= 1, f"the shapes {[list(s) for s in shapes]} do not broadcast")
        out.append(-1 if -1 in dims and not known else (known.pop() if known else
                                                         (-1 if -1 in dims else 1)))
    return tuple(out)


# -- scans and comparisons --------------------------------------------------------------------
class _CumExtreme(OpDef):
    """out[..., i] = the running extreme of x[..., :i+1] along ``axis``, indices[..., i] the
    position it came from: a later equal value takes over, and a NaN takes over and stays
    (Paddle 2.6's rule); dx = the sum of dout over the positions whose value came from x."""
    inputs, outputs = ("x",), ("out", "indices")
    grad_uses = ("x", "indices")
    _better = staticmethod(np.greater_equal)

    def infer(self, x, *, axis=-1, dtype=3):
        if x.shape:
            norm_axis(self.type, axis, len(x.shape), "axis")
        _need(self.type, VarType(dtype) in (VarType.INT32, VarType.INT64),
              f"dtype must be int32 or int64, got {VarType(dtype).name}")
        return {"out": x, "indices": VarSpec(x.shape, VarType(dtype))}

    def forward(self, x, *, axis=-1, dtype=3):
        idt = to_numpy_dtype(VarType(dtype))
        if x.ndim == 0:
            return {"out": x.copy(), "indices": np.zeros((), idt)}
        a = norm_axis(self.type, axis, x.ndim, "axis")
        v = np.moveaxis(x, a, -1)
        out, idx = np.empty_like(v), np.zeros(v.shape, idt)
        if v.shape[-1]:
            cur, at = v[..., 0].copy(), np.zeros(v.shape[:-1], idt)
            out[..., 0] = cur
            for i in range(1, v.shape[-1]):
                e = v[..., i]
                take = np.isnan(e) | (~np.isnan(cur) & self._better(e, cur))
                cur = np.where(take, e, cur)
                at = np.where(take, idt.type(i), at)
                out[..., i], idx[..., i] = cur, at
        return {"out": np.moveaxis(out, -1, a), "indices": np.moveaxis(idx, -1, a)}

    def backward(self, x, indices, dout, dindices=None, *, axis=-1, dtype=3):
        if x.ndim == 0:
            return {"x": dout.copy()}
        a = norm_axis(self.type, axis, x.ndim, "axis")
        d = np.moveaxis(dout, a, -1)
        i = np.moveaxis(indices, a, -1).astype(np.int64, copy=False)
        dx = np.zeros(d.shape, dout.dtype)
        rows = np.arange(int(np.prod(d.shape[:-1]))).reshape(d.shape[:-1] + (1,))
        np.add.at(dx.reshape(-1, d.shape[-1]), (rows.reshape(-1, 1),
                                                  i.reshape(-1, d.shape[-1])),
                  d.reshape(-1, d.shape[-1]))
        return {"x": np.moveaxis(dx, -1, a)}


@register
class Cummax(_CumExtreme):
    """The running maximum along ``axis`` and its indices (see ``_CumExtreme``)."""
    type = "cummax"


@register
class Cummin(_CumExtreme):
    """The running minimum along ``axis`` and its indices (see ``_CumExtreme``)."""
    type = "cummin"
    _better = staticmethod(np.less_equal)


@register
class EqualAll(OpDef):
    """Out = (X and Y have the same shape and every element is equal as ``equal`` compares:
    floats within 1e-8), a bool 0-D tensor."""
    type, inputs, outputs = "equal_all", ("X", "Y"), ("Out",)
    no_grad = True

    def infer(self, X, Y):
        return {"Out": VarSpec((), VarType.BOOL)}

    def forward(self, X, Y):
        same = X.shape == Y.shape and bool(np.all(fluid_equal(X, Y)))
        return {"Out": np.array(same)}


@register
class ElementwiseHeaviside(OpDef):
    """Out = 0 where X < 0, Y where X == 0, 1 where X > 0 (numpy broadcasting);
    dX = 0, dY = dOut where X == 0 (Paddle's rule), summed over Y's broadcast dims."""
    type, inputs, outputs = "elementwise_heaviside", ("X", "Y"), ("Out",)

    def infer(self, X, Y, *, axis=-1):
        return {"Out": VarSpec(_broadcast_spec(self.type, [X.shape, Y.shape]), X.dtype)}

    def forward(self, X, Y, *, axis=-1):
        return {"Out": np.heaviside(X, Y).astype(X.dtype, copy=False)}

    def backward(self, X, Y, dOut, *, axis=-1):
        return {"X": np.zeros(X.shape, dOut.dtype),
                "Y": reduce_to(dOut * (X == 0), Y.shape).astype(dOut.dtype, copy=False)}


@register
class BroadcastTensors(OpDef):
    """Out[i] = X[i] broadcast to the common shape (numpy's rule);
    dX[i] = dOut[i] summed over the dims broadcasting added."""
    type, inputs, outputs = "broadcast_tensors", ("X*",), ("Out*",)

    def infer(self, X):
        shape = _broadcast_spec(self.type, [x.shape for x in X])
        return {"Out": [VarSpec(shape, x.dtype) for x in X]}

    def forward(self, X):
        shape = np.broadcast_shapes(*(x.shape for x in X))
        return {"Out": [np.array(np.broadcast_to(x, shape)) for x in X]}

    def backward(self, X, dOut):
        return {"X": [np.zeros(x.shape, x.dtype) if d is None else
                      reduce_to(d, x.shape).astype(x.dtype, copy=False)
                      for x, d in zip(X, dOut)]}


# -- special functions ------------------------------------------------------------------------
_lgamma = np.frompyfunc(math.lgamma, 1, 1)


def lgamma_numpy(x: np.ndarray) -> np.ndarray:
    """log|Gamma(x)| per element (C's lgamma; +inf at the poles 0, -1, -2, ...)."""
    x = np.asarray(x)
    out = np.empty(x.shape, np.float64)
    flat, res = x.reshape(-1).astype(np.float64), out.reshape(-1)
    pole = (flat <= 0) & (flat == np.floor(flat))
    ok = np.isfinite(flat) & ~pole
    res[ok] = _lgamma(flat[ok]).astype(np.float64)
    res[pole] = np.inf
    res[np.isinf(flat)] = np.inf
    res[np.isnan(flat)] = np.nan
    return out


def _polygamma_large(x: np.ndarray, order: int) -> np.ndarray:
    """psi (order 0) or psi' (order 1) for x >= 10 by their asymptotic series (Bernoulli
    numbers B2..B12: under 1e-16 relative there)."""
    r = 1.0 / x
    r2 = r * r
    if order == 0:
        series = r2 * (1 / 12 - r2 * (1 / 120 - r2 * (1 / 252 - r2 * (1 / 240 - r2 * (
            1 / 132 - r2 * 691 / 32760)))))
        return np.log(x) - 0.5 * r - series
    series = r2 * (1 / 6 - r2 * (1 / 30 - r2 * (1 / 42 - r2 * (1 / 30 - r2 * (
        5 / 66 - r2 * 691 / 2730)))))
    return r + 0.5 * r2 + r * series


def polygamma_numpy(x: np.ndarray, order: int) -> np.ndarray:
    """digamma (order 0) or trigamma (order 1) per element, in float64: the recurrences
    psi(x) = psi(x + 1) - 1/x and psi'(x) = psi'(x + 1) + 1/x^2 up to x >= 10, the asymptotic
    series there, the reflection formulas for x < 0; NaN (order 0) / inf (order 1) at the
    poles 0, -1, -2, ... as Paddle's kernels."""
    x = np.asarray(x, np.float64)
    out = np.empty(x.shape)
    neg = x < 0
    pole = (x <= 0) & (x == np.floor(x))
    y = np.where(neg, 1.0 - x, x)
    y = np.where(pole | ~np.isfinite(y), 10.0, y)
    acc = np.zeros(x.shape)
    while True:
        small = y < 10
        if not small.any():
            break
        acc = np.where(small, acc + (1.0 / y if order == 0 else 1.0 / (y * y)), acc)
        y = np.where(small, y + 1.0, y)
    base = _polygamma_large(y, order)
    val = base - acc if order == 0 else base + acc
    if neg.any():
        t = np.pi / np.tan(np.pi * np.where(neg & ~pole, x, 0.5))
        s = np.pi / np.sin(np.pi * np.where(neg & ~pole, x, 0.5))
        val = np.where(neg, val - t if order == 0 else -val + s * s, val)
    out[...] = val
    out[pole] = np.nan if order == 0 else np.inf
    out[np.isnan(x)] = np.nan
    out[np.isposinf(x)] = np.inf if order == 0 else 0.0
    out[np.isneginf(x)] = np.nan
    return out


class _Special(OpDef):
    inputs, outputs = ("X",), ("Out",)

    def infer(self, X):
        _need(self.type, X.dtype in FLOATS, f"X must be a float tensor, got {X.dtype.name}")
        return {"Out": X}


@register
class Lgamma(_Special):
    """Out = log|Gamma(X)|;  dX = dOut * digamma(X)."""
    type = "lgamma"

    def forward(self, X):
        return {"Out": lgamma_numpy(X).astype(X.dtype, copy=False)}

    def backward(self, X, dOut):
        return {"X": (dOut * polygamma_numpy(X, 0)).astype(dOut.dtype, copy=False)}


@register
class Digamma(_Special):
    """Out = digamma(X) = d/dX log Gamma(X);  dX = dOut * trigamma(X)."""
    type = "digamma"

    def forward(self, X):
        return {"Out": polygamma_numpy(X, 0).astype(X.dtype, copy=False)}

    def backward(self, X, dOut):
        return {"X": (dOut * polygamma_numpy(X, 1)).astype(dOut.dtype, copy=False)}


# -- creation and statistics ------------------------------------------------------------------
def _scalar(op: str, slot: str, t: np.ndarray) -> Any:
    t = np.asarray(t)
    _need(op, t.size == 1, f"{slot} must hold one value, got shape {list(t.shape)}")
    return t.reshape(-1)[0]


@register
class Logspace(OpDef):
    """Out[i] = Base ** (Start + i (Stop - Start) / (Num - 1)), i < Num (Out = [Base ** Start]
    for Num 1), in ``dtype``: computed in float64 and cast (an int dtype truncates, as
    Paddle's kernel)."""
    type, inputs, outputs = "logspace", ("Start", "Stop", "Num", "Base"), ("Out",)
    no_grad = True

    def infer(self, Start, Stop, Num, Base, *, dtype=5):
        return {"Out": VarSpec((-1,), VarType(dtype))}

    def forward(self, Start, Stop, Num, Base, *, dtype=5):
        num = int(_scalar(self.type, "Num", Num))
        _need(self.type, num >= 0, f"Num must be >= 0, got {num}")
        start, stop = (float(_scalar(self.type, s, t)) for s, t in
                       (("Start", Start), ("Stop", Stop)))
        base = float(_scalar(self.type, "Base", Base))
        expo = np.linspace(start, stop, num) if num > 1 else np.full(num, start)
        return {"Out": np.power(base, expo).astype(to_numpy_dtype(VarType(dtype)))}


@register
class Histogram(OpDef):
    """Out[b] = the number of X's values in bin b of ``bins`` equal bins over [min, max]
    (the last bin closed; values outside are not counted); min == max == 0 takes X's own
    range, a range of width 0 widens to [min - 1, max + 1] (Paddle 2.6's rules). int64."""
    type, inputs, outputs = "histogram", ("X",), ("Out",)
    no_grad = True

    def infer(self, X, *, bins=100, min=0, max=0):
        _need(self.type, bins >= 1, f"bins must be >= 1, got {bins}")
        _need(self.type, max >= min, f"max ({max}) must be >= min ({min})")
        return {"Out": VarSpec((bins,), VarType.INT64)}

    def forward(self, X, *, bins=100, min=0, max=0):
        x = X.reshape(-1).astype(np.float64)
        lo, hi = float(min), float(max)
        if lo == hi == 0 and x.size:
            lo, hi = float(x.min()), float(x.max())
        if lo == hi:
            lo, hi = lo - 1, hi + 1
        inside = x[(x >= lo) & (x <= hi)]
        b = np.minimum(((inside - lo) * bins / (hi - lo)).astype(np.int64), bins - 1)
        return {"Out": np.bincount(b, minlength=bins).astype(np.int64)}


@register
class Nanmedian(OpDef):
    """Out = the median of X's non-NaN values over ``axis`` (all axes when empty), the mean
    of the two middle values for an even count, NaN where every value is NaN;
    dX = dOut at the median element (half to each of two middle ones)."""
    type, inputs, outputs = "nanmedian", ("X",), ("Out", "MedianIndex")
    grad_uses = ("X", "MedianIndex")

    def _axes(self, ndim: int, axis: Sequence[int]) -> List[int]:
        axes = sorted({norm_axis(self.type, a, ndim, "axis") for a in axis}) if axis else \
            list(range(ndim))
        return axes

    def infer(self, X, *, axis=[], keepdim=True):
        axes = self._axes(len(X.shape), axis)
        shape = [1 if i in axes else d for i, d in enumerate(X.shape)] if keepdim else \
            [d for i, d in enumerate(X.shape) if i not in axes]
        return {"Out": VarSpec(shape, X.dtype), "MedianIndex": VarSpec(shape + [2],
                                                                       VarType.INT64)}

    def _rows(self, X, axis):
        axes = self._axes(X.ndim, axis)
        rest = [i for i in range(X.ndim) if i not in axes]
        v = np.transpose(X, rest + axes)
        return v.reshape([X.shape[i] for i in rest] + [-1]), axes, rest

    def forward(self, X, *, axis=[], keepdim=True):
        rows, axes, rest = self._rows(X, axis)
        flat = rows.reshape(-1, rows.shape[-1])
        order = np.argsort(np.where(np.isnan(flat), np.inf, flat), axis=1, kind="stable")
        count = (~np.isnan(flat)).sum(axis=1)
        lo_k = np.maximum((count - 1) // 2, 0)
        hi_k = np.maximum(count // 2, 0)
        r = np.arange(flat.shape[0])
        if flat.shape[1]:
            lo, hi = order[r, lo_k], order[r, hi_k]
            med = np.where(count == 0, np.nan, (flat[r, lo] + flat[r, hi]) / 2)
        else:               # an empty reduction: no median
            lo, hi, med = lo_k, hi_k, np.full(flat.shape[0], np.nan)
        lo, hi = np.where(count == 0, -1, lo), np.where(count == 0, -1, hi)
        out_shape = [1 if i in axes else d for i, d in enumerate(X.shape)] if keepdim else \
            [d for i, d in enumerate(X.shape) if i not in axes]
        return {"Out": med.astype(X.dtype).reshape(out_shape),
                "MedianIndex": np.stack([lo, hi], -1).astype(np.int64).reshape(
                    out_shape + [2])}

    def backward(self, X, MedianIndex, dOut, dMedianIndex=None, *, axis=[], keepdim=True):
        rows, axes, rest = self._rows(X, axis)
        flat_shape = (int(np.prod(rows.shape[:-1])), rows.shape[-1])
        d = dOut.reshape(-1)
        idx = MedianIndex.reshape(-1, 2)
        g = np.zeros(flat_shape, dOut.dtype)
        r = np.arange(flat_shape[0])
        ok = idx[:, 0] >= 0
        half = (d / 2).astype(dOut.dtype, copy=False)
        np.add.at(g, (r[ok], idx[ok, 0]), half[ok])
        np.add.at(g, (r[ok], idx[ok, 1]), half[ok])
        g = g.reshape([X.shape[i] for i in rest] + [X.shape[i] for i in axes])
        return {"X": np.transpose(g, np.argsort(rest + axes))}


# -- writes -----------------------------------------------------------------------------------
def _diag_view(a: np.ndarray, offset: int, dim1: int, dim2: int) -> np.ndarray:
    view = np.diagonal(a, offset, dim1, dim2)
    view.setflags(write=True)
    return view


@register
class FillDiagonalTensor(OpDef):
    """Out = X with its ``offset`` diagonal of the (dim1, dim2) planes set to Y (Y's shape:
    the other dims, then the diagonal's length, as ``np.diagonal`` gives);
    dX = dOut with that diagonal zeroed (Y gets no gradient, as in Paddle 2.6)."""
    type, inputs, outputs = "fill_diagonal_tensor", ("X", "Y"), ("Out",)
    grad_outputs = ("X",)         # Paddle's grad maker writes X@GRAD only (Y gets none)

    def _dims(self, rank: int, dim1: int, dim2: int) -> Tuple[int, int]:
        a, b = (norm_axis(self.type, d, rank, n) for d, n in ((dim1, "dim1"), (dim2, "dim2")))
        _need(self.type, a != b, f"dim1 and dim2 must differ, both are {a}")
        return a, b

    def infer(self, X, Y, *, offset=0, dim1=0, dim2=1):
        self._dims(len(X.shape), dim1, dim2)
        return {"Out": X}

    def forward(self, X, Y, *, offset=0, dim1=0, dim2=1):
        a, b = self._dims(X.ndim, dim1, dim2)
        out = X.copy()
        view = _diag_view(out, offset, a, b)
        _need(self.type, Y.size == view.size,
              f"Y {list(Y.shape)} must hold the diagonal's {list(view.shape)} values")
        view[...] = Y.reshape(view.shape)
        return {"Out": out}

    def backward(self, X, Y, dOut, *, offset=0, dim1=0, dim2=1):
        a, b = self._dims(X.ndim, dim1, dim2)
        dx = dOut.copy()
        _diag_view(dx, offset, a, b)[...] = 0
        return {"X": dx}


@register
class IndexPut(OpDef):
    """out = x with out[indices] = value (``accumulate``: += value; repeated positions then
    add up), ``indices`` a list of int index tensors broadcast together (one per leading
    dim) or one bool mask; dx = dout (zeroed at the written positions unless
    ``accumulate``), dvalue = dout gathered there, summed to value's shape."""
    type, inputs, outputs = "index_put", ("x", "indices*", "value"), ("out",)
    grad_uses = ("x", "indices", "value")

    def _where(self, x: np.ndarray, indices: List[np.ndarray]) -> Tuple[np.ndarray, ...]:
        if len(indices) == 1 and indices[0].dtype == np.bool_:
            m = indices[0]
            _need(self.type, m.shape == x.shape[:m.ndim],
                  f"the bool index {list(m.shape)} must match x's leading dims "
                  f"{list(x.shape[:m.ndim])}")
            return np.nonzero(m)
        _need(self.type, len(indices) <= x.ndim,
              f"{len(indices)} index tensors for a {x.ndim}-D x")
        out = []
        for k, i in enumerate(indices):
            _need(self.type, i.dtype.kind in "iu", f"indices[{k}] must be an int tensor, got "
                                                   f"{i.dtype}")
            n = x.shape[k]
            i = i.astype(np.int64, copy=False)
            _need(self.type, i.size == 0 or (i.min() >= -n and i.max() < n),
                  f"indices[{k}] values must be in [{-n}, {n}) for dim {k} of size {n}")
            out.append(np.where(i < 0, i + n, i))
        return tuple(np.broadcast_arrays(*out))

    def infer(self, x, indices, value, *, accumulate=False):
        return {"out": x}

    def forward(self, x, indices, value, *, accumulate=False):
        where = self._where(x, indices)
        out = x.copy()
        v = value.astype(x.dtype, copy=False)
        if accumulate:
            np.add.at(out, where, np.broadcast_to(v, out[where].shape))
        else:
            out[where] = v
        return {"out": out}

    def backward(self, x, indices, value, dout, *, accumulate=False):
        where = self._where(x, indices)
        dx = dout.copy()
        dv = dout[where]
        if not accumulate:
            dx[where] = 0
        return {"x": dx, "value": reduce_to(dv, value.shape).astype(value.dtype, copy=False)}


# -- norms, layout, random --------------------------------------------------------------------
@register
class Renorm(OpDef):
    """Out = X with every slice along ``axis`` whose p-norm exceeds ``max_norm`` scaled by
    f = max_norm / norm (Paddle 2.6's kernel: no epsilon); dX is the derivative of that map:
    dX = f dOut - max_norm / norm^2 <X, dOut> dnorm/dX on the scaled slices."""
    type, inputs, outputs = "renorm", ("X",), ("Out",)

    def infer(self, X, *, p=2.0, axis=0, max_norm=1.0):
        norm_axis(self.type, axis, len(X.shape), "axis")
        _need(self.type, p > 0, f"p must be > 0, got {p}")
        return {"Out": X}

    def _norms(self, X, p, axis):
        a = norm_axis(self.type, axis, X.ndim, "axis")
        others = tuple(i for i in range(X.ndim) if i != a)
        norm = np.sum(np.abs(X) ** p, axis=others, keepdims=True) ** (1.0 / p)
        return norm, others

    def forward(self, X, *, p=2.0, axis=0, max_norm=1.0):
        norm, _ = self._norms(X, p, axis)
        f = np.where(norm > max_norm, max_norm / np.where(norm > max_norm, norm, 1.0), 1.0)
        return {"Out": (X * f).astype(X.dtype, copy=False)}

    def backward(self, X, dOut, *, p=2.0, axis=0, max_norm=1.0):
        norm, others = self._norms(X, p, axis)
        big = norm > max_norm
        safe = np.where(big, norm, 1.0)       # a scaled slice's norm is > max_norm >= 0
        f = np.where(big, max_norm / safe, 1.0)
        dnorm = np.sign(X) * np.abs(X) ** (p - 1) * safe ** (1 - p)     # d norm / dX
        dot = np.sum(X * dOut, axis=others, keepdims=True)
        corr = np.where(big, max_norm / (safe * safe), 0.0) * dot * dnorm
        return {"X": (dOut * f - corr).astype(dOut.dtype, copy=False)}


@register
class Fold(OpDef):
    """col2im: Y [N, C, H, W] (``output_sizes``) sums the blocks of X [N, C kh kw, L] (the
    inverse layout of ``unfold``, same ``paddings`` [top, left, bottom, right]); dX = unfold
    of dY."""
    type, inputs, outputs = "fold", ("X",), ("Y",)
    grad_uses = ("X",)

    def _unfold_args(self, X_shape, output_sizes, kernel_sizes, strides, paddings,
                     dilations) -> Tuple[Tuple[int, ...], dict]:
        _need(self.type, len(X_shape) == 3, f"X must be 3-D [N, C*kh*kw, L], got "
                                            f"{list(X_shape)}")
        _need(self.type, len(output_sizes) == 2 and len(kernel_sizes) == 2,
              f"output_sizes and kernel_sizes must have 2 values, got {list(output_sizes)}, "
              f"{list(kernel_sizes)}")
        k = kernel_sizes[0] * kernel_sizes[1]
        _need(self.type, X_shape[1] < 0 or X_shape[1] % k == 0,
              f"X's dim 1 ({X_shape[1]}) must be a multiple of kh*kw = {k}")
        c = X_shape[1] // k if X_shape[1] >= 0 else -1
        pads = list(paddings) * 2 if len(paddings) == 2 else list(paddings)
        return (X_shape[0], c) + tuple(output_sizes), dict(
            kernel_sizes=list(kernel_sizes), strides=list(strides), paddings=pads,
            dilations=list(dilations))

    def infer(self, X, *, output_sizes=[], kernel_sizes=[], strides=[1, 1],
              paddings=[0, 0, 0, 0], dilations=[1, 1]):
        shape, args = self._unfold_args(X.shape, output_sizes, kernel_sizes, strides, paddings,
                                        dilations)
        cols = get_op_def("unfold").infer(VarSpec(shape, X.dtype), **args)["Y"]
        _need(self.type, X.shape[2] < 0 or cols.shape[2] < 0 or X.shape[2] == cols.shape[2],
              f"X holds {X.shape[2]} blocks where output_sizes {list(output_sizes)} make "
              f"{cols.shape[2]}")
        return {"Y": VarSpec(shape, X.dtype)}

    def forward(self, X, *, output_sizes=[], kernel_sizes=[], strides=[1, 1],
                paddings=[0, 0, 0, 0], dilations=[1, 1]):
        shape, args = self._unfold_args(X.shape, output_sizes, kernel_sizes, strides, paddings,
                                        dilations)
        unfold = get_op_def("unfold")
        blocks = unfold.infer(VarSpec(shape, X.dtype), **args)["Y"].shape[2]
        _need(self.type, X.shape[2] == blocks,
              f"X holds {X.shape[2]} blocks where output_sizes {list(output_sizes)} make "
              f"{blocks}")
        return {"Y": unfold.backward(np.empty(shape, X.dtype), X, **args)["X"]}

    def backward(self, X, dY, *, output_sizes=[], kernel_sizes=[], strides=[1, 1],
                 paddings=[0, 0, 0, 0], dilations=[1, 1]):
        _, args = self._unfold_args(X.shape, output_sizes, kernel_sizes, strides, paddings,
                                    dilations)
        return {"X": np.ascontiguousarray(get_op_def("unfold").forward(dY, **args)["Y"])}


@register
class Rrelu(OpDef):
    """Out = X where X >= 0, X * a elsewhere: a ~ U(lower, upper) per element in training,
    a = (lower + upper) / 2 with ``is_test``; Noise = the factor used (1 where X >= 0);
    dX = dOut * Noise."""
    type, inputs, outputs = "rrelu", ("X",), ("Out", "Noise")
    grad_uses = ("X", "Noise")
    uses_rng = True

    def infer(self, X, *, is_test=False, lower=1.0 / 8, upper=1.0 / 3):
        _need(self.type, 0 <= lower <= upper <= 1,
              f"need 0 <= lower <= upper <= 1, got lower {lower}, upper {upper}")
        return {"Out": X, "Noise": X}

    def forward(self, X, *, rng, is_test=False, lower=1.0 / 8, upper=1.0 / 3):
        t = X.dtype.type
        if is_test:         # the middle slope in float32, as Paddle's kernel computes it
            a = np.full(X.shape, t((np.float32(lower) + np.float32(upper)) / np.float32(2)))
        else:
            a = rng.uniform(lower, upper, X.shape).astype(X.dtype)
        noise = np.where(X >= 0, t(1), a).astype(X.dtype, copy=False)
        return {"Out": X * noise, "Noise": noise}

    def backward(self, X, Noise, dOut, dNoise=None, *, is_test=False, lower=1.0 / 8,
                 upper=1.0 / 3):
        return {"X": dOut * Noise}


def _keep_rate(p: float) -> np.float32:
    """1 - p in float32 (the float attr's arithmetic in Paddle's kernels)."""
    return np.float32(1) - np.float32(p)


def _kept_scale(p: float, upscale: bool) -> float:
    """What a kept value is multiplied by in training: 1 / (1 - p) in float32 for
    upscale_in_train (0 for p = 1), else 1."""
    if not upscale:
        return 1.0
    return 0.0 if p == 1 else float(np.float32(1) / _keep_rate(p))


@register
class DropoutNd(OpDef):
    """dropout with one keep/drop draw per slice: the mask has X's dims in ``axis`` and 1
    elsewhere (all dims when empty), broadcast over the rest; upscale_in_train scales kept
    values by 1/(1-p), downgrade_in_infer scales by (1-p) in test mode; dX = dOut * Mask
    (the same scale)."""
    type, inputs, outputs = "dropout_nd", ("X", "Seed?"), ("Out", "Mask")
    grad_uses = ("Mask",)
    uses_rng = True

    def _mask_shape(self, shape: Sequence[int], axis: Sequence[int]) -> List[int]:
        axes = {norm_axis(self.type, a, len(shape), "axis") for a in axis}
        return [d if (not axes or i in axes) else 1 for i, d in enumerate(shape)]

    def infer(self, X, Seed=None, *, dropout_prob=0.5, is_test=False,
              dropout_implementation="downgrade_in_infer", axis=[]):
        _need(self.type, 0 <= dropout_prob <= 1,
              f"dropout_prob must be in [0, 1], got {dropout_prob}")
        _need(self.type, dropout_implementation in ("downgrade_in_infer", "upscale_in_train"),
              f"dropout_implementation must be 'downgrade_in_infer' or 'upscale_in_train', "
              f"got {dropout_implementation!r}")
        return {"Out": X, "Mask": VarSpec(self._mask_shape(X.shape, axis), VarType.UINT8)}

    def forward(self, X, Seed=None, *, rng, dropout_prob=0.5, is_test=False,
                dropout_implementation="downgrade_in_infer", axis=[]):
        p, up = float(dropout_prob), dropout_implementation == "upscale_in_train"
        t = X.dtype.type
        shape = self._mask_shape(X.shape, axis)
        if is_test:
            return {"Out": X.copy() if up else X * t(_keep_rate(p)),
                    "Mask": np.ones(shape, np.uint8)}
        if Seed is not None:
            rng = np.random.default_rng(int(np.asarray(Seed).reshape(-1)[0]))
        keep = (rng.random(shape, dtype=np.float32) >= p).astype(np.uint8)
        return {"Out": (X * (keep * t(_kept_scale(p, up)))).astype(X.dtype, copy=False),
                "Mask": keep}

    def backward(self, Mask, dOut, dMask=None, *, dropout_prob=0.5, is_test=False,
                 dropout_implementation="downgrade_in_infer", axis=[]):
        p, up = float(dropout_prob), dropout_implementation == "upscale_in_train"
        t = dOut.dtype.type
        if is_test:
            return {"X": dOut.copy() if up else dOut * t(_keep_rate(p))}
        return {"X": dOut * (Mask * t(_kept_scale(p, up)))}
