"""N-d pooling: the ``pool3d`` op (max / avg; global, adaptive, ceil_mode, exclusive, paddings;
NCDHW or NDHWC) and the adaptive path of ``pool2d`` (``pool_nd`` / ``pool_nd_grad``).

Windows follow fluid. Along each axis, output ``o`` reads the input cells ``[start, end)``:

* fixed windows: ``start = o * stride - pad_before``, ``end = min(start + k, in)``, then
  ``start = max(start, 0)``;
* adaptive windows (``adaptive=True``, ``ksize`` is the output size):
  ``start = floor(o * in / out)``, ``end = ceil((o + 1) * in / out)``.

Averages are separable: one ``[out, in]`` window-sum matrix per axis (``tensordot``), divided by
the window's cell count (``exclusive`` or adaptive) or by ``prod(ksize)``. Max pooling visits the
``prod(max window)`` kernel offsets, each a whole-tensor gather; its gradient goes to the first
maximum of each window in row-major order, as fluid's kernel does.

Output sizes are fluid's C++ int arithmetic (division truncates toward zero). A fixed window
without input cells gives fluid 1.8's values: ``-FLT_MAX`` (max pooling's initial value; Mask
-1) and, for exclusive averages, ``0 / count`` with fluid's signed per-axis product
``count = prod(end - start)`` (NaN for 0 cells, -0 for a negative count).
"""
from __future__ import annotations

import itertools
from typing import List, NamedTuple, Sequence, Tuple

import numpy as np

from ..core.registry import OpDef, VarSpec, register
from .conv import c_div
from .conv3d import nd_paddings
from .interp import resize

__all__ = ["pool_nd", "pool_nd_grad", "pool_out_size", "resolve_pool"]

_NEG_FLT_MAX = -float(np.finfo(np.float32).max)     # fluid's MaxPool initial value

_EXTRA = {"use_cudnn": False, "use_mkldnn": False, "use_quantizer": False, "is_test": False}


def pool_out_size(size: int, k: int, pad: Tuple[int, int], stride: int, ceil_mode: bool) -> int:
    """fluid's ``PoolOutputSize`` (C++ int division: truncated toward zero)."""
    if size < 0:
        return -1
    return c_div(size + pad[0] + pad[1] - k + (stride - 1 if ceil_mode else 0), stride) + 1


def resolve_pool(op: str, size: Sequence[int], ksize: Sequence[int], strides: Sequence[int],
                 paddings: Sequence[int], global_pooling: bool, algorithm: str, adaptive: bool,
                 ceil_mode: bool) -> Tuple[List[int], List[int], List[Tuple[int, int]],
                                           List[int]]:
    """(ksize, strides, (before, after) paddings, output sizes) as fluid resolves them."""
    n = len(size)
    ksize, strides = [int(v) for v in ksize], [int(v) for v in strides]
    if len(ksize) != n or len(strides) != n:
        raise ValueError(f"{op}: ksize and strides must have {n} values, got ksize {ksize}, "
                         f"strides {strides}")
    pads = nd_paddings(paddings, n, f"{op}: paddings")
    if global_pooling:
        if adaptive:        # fluid: ksize := the input's size, and adaptive outputs ksize
            return list(size), strides, [(0, 0)] * n, list(size)
        return list(size), [1] * n, [(0, 0)] * n, [1] * n
    if adaptive:
        if any(k < 1 for k in ksize):
            raise ValueError(f"{op}: the adaptive output size (ksize) must be positive, got "
                             f"{ksize}")
        return ksize, strides, [(0, 0)] * n, list(ksize)
    if any(k < 1 for k in ksize) or any(s < 1 for s in strides):
        raise ValueError(f"{op}: ksize and strides must be positive, got ksize {ksize}, "
                         f"strides {strides}")
    if algorithm == "SAME":
        for i in range(n):
            if size[i] < 0:
                continue
            out = (size[i] + strides[i] - 1) // strides[i]
            total = max((out - 1) * strides[i] + ksize[i] - size[i], 0)
            pads[i] = (total // 2, total - total // 2)
    elif algorithm == "VALID":        # fluid's UpdatePadding zeroes the paddings only
        pads = [(0, 0)] * n
    elif algorithm != "EXPLICIT":
        raise ValueError(f"{op}: padding_algorithm must be 'EXPLICIT', 'SAME' or 'VALID', got "
                         f"{algorithm!r}")
    out = [pool_out_size(size[i], ksize[i], pads[i], strides[i], ceil_mode) for i in range(n)]
    return ksize, strides, pads, out


class _Windows(NamedTuple):
    start: List[np.ndarray]     # per axis, [out]
    end: List[np.ndarray]


def _windows(size: Sequence[int], ksize: Sequence[int], strides: Sequence[int],
             pads: Sequence[Tuple[int, int]], out: Sequence[int], adaptive: bool) -> _Windows:
    starts, ends = [], []
    for i, n_in in enumerate(size):
        o = np.arange(out[i])
        if adaptive:
            s = (o * n_in) // out[i]
            e = -((-(o + 1) * n_in) // out[i])          # ceil
        else:
            s = o * strides[i] - pads[i][0]
            e = np.minimum(s + ksize[i], n_in)
            s = np.maximum(s, 0)
        starts.append(s)
        ends.append(e)
    return _Windows(starts, ends)


def _sum_matrix(start: np.ndarray, end: np.ndarray, n_in: int) -> np.ndarray:
    cells = np.arange(n_in)
    return ((cells >= start[:, None]) & (cells < end[:, None])).astype(np.float64)


def _avg_parts(size, win: _Windows, ksize, exclusive: bool, adaptive: bool, dtype):
    mats = [_sum_matrix(s, e, n).astype(dtype) for s, e, n in zip(win.start, win.end, size)]
    if exclusive or adaptive:
        count = np.ones(())
        for s, e in zip(win.start, win.end):
            count = np.multiply.outer(count, (e - s).astype(np.float64))
    else:
        count = np.full((), float(np.prod(ksize)))
    return mats, count.astype(dtype)


def _offsets(win: _Windows):
    """Per kernel offset: the clipped per-axis index arrays and the valid-window mask."""
    widths = [int((e - s).max()) if e.size else 0 for s, e in zip(win.start, win.end)]
    n = len(widths)
    for off in itertools.product(*(range(w) for w in widths)):
        idx, valid = [], np.ones((), bool)
        for i in range(n):
            raw = win.start[i] + off[i]
            idx.append(np.minimum(raw, np.maximum(win.end[i] - 1, 0)))
            valid = np.logical_and.outer(valid, raw < win.end[i])
        grid = np.ix_(*idx)
        yield grid, valid


def _geometry(x: np.ndarray, ksize, strides, paddings, global_pooling, algorithm, adaptive,
              ceil_mode, op):
    size = x.shape[2:]
    k, s, p, out = resolve_pool(op, size, ksize, strides, paddings, global_pooling, algorithm,
                                adaptive, ceil_mode)
    if any(o < 1 for o in out):
        raise ValueError(f"{op}: output size {out} is not positive for input {list(x.shape)}, "
                         f"ksize {k}, strides {s}, paddings {p}")
    return k, _windows(size, k, s, p, out, adaptive)


def pool_nd(x: np.ndarray, pooling_type: str, ksize, strides, paddings, global_pooling,
            exclusive, adaptive, ceil_mode, algorithm, op: str) -> np.ndarray:
    """Pool ``x`` [N, C, *size] (see the module docstring)."""
    k, win = _geometry(x, ksize, strides, paddings, global_pooling, algorithm, adaptive,
                       ceil_mode, op)
    axes = list(range(2, x.ndim))
    if pooling_type == "avg":
        work = x if x.dtype.kind == "f" else x.astype(np.float64)
        mats, count = _avg_parts(x.shape[2:], win, k, exclusive, adaptive, work.dtype)
        with np.errstate(divide="ignore", invalid="ignore"):     # 0 cells: 0 / 0 as fluid
            return (resize(work, mats, axes) / count).astype(x.dtype, copy=False)
    lo = x.dtype.type(_NEG_FLT_MAX)
    out = np.full(x.shape[:2] + tuple(len(st) for st in win.start), lo, x.dtype)
    for grid, valid in _offsets(win):
        g = x[(slice(None), slice(None)) + grid]
        # cells outside the window read ``lo`` (the start value: no effect on the max), a
        # scalar of x's dtype (a Python -inf would promote to float64 under NumPy 1.x rules)
        g = np.where(valid, g, lo) if not valid.all() else g
        np.maximum(out, g, out=out)
    return out


def pool_nd_grad(x: np.ndarray, out: np.ndarray, dout: np.ndarray, pooling_type: str, ksize,
                 strides, paddings, global_pooling, exclusive, adaptive, ceil_mode, algorithm,
                 op: str) -> np.ndarray:
    """dX of ``pool_nd``: avg spreads dOut over each window's divisor; max routes it to the
    window's first maximum (row-major)."""
    k, win = _geometry(x, ksize, strides, paddings, global_pooling, algorithm, adaptive,
                       ceil_mode, op)
    axes = list(range(2, x.ndim))
    if pooling_type == "avg":
        mats, count = _avg_parts(x.shape[2:], win, k, exclusive, adaptive, dout.dtype)
        with np.errstate(divide="ignore", invalid="ignore"):
            share = dout / count
        if (count == 0).any():              # a window without cells reaches no cell (no NaN)
            share = np.where(count == 0, share.dtype.type(0), share)
        return np.ascontiguousarray(resize(share, [m.T for m in mats], axes))
    dx = np.zeros(x.shape, dout.dtype)
    taken = np.zeros(out.shape, bool)
    N, C = x.shape[:2]
    lead = (np.arange(N).reshape((N, 1) + (1,) * len(axes)),
            np.arange(C).reshape((1, C) + (1,) * len(axes)))
    for grid, valid in _offsets(win):
        hit = (x[(slice(None), slice(None)) + grid] == out) & valid & ~taken
        if not hit.any():
            continue
        taken |= hit
        idx = lead + tuple(np.broadcast_to(gi, out.shape[2:]) for gi in grid)
        np.add.at(dx, idx, np.where(hit, dout, dout.dtype.type(0)))
    return dx


def _layout(op: str, data_format: str, n: int) -> bool:
    first, last = ("NCHW", "NHWC") if n == 2 else ("NCDHW", "NDHWC")
    if data_format in (first, "AnyLayout"):
        return False
    if data_format == last:
        return True
    raise ValueError(f"{op}: data_format must be {first!r} or {last!r}, got {data_format!r}")


@register
class Pool3D(OpDef):
    """Out[n,c,z,y,x] = max (or mean) of X[n,c] over the window of output (z, y, x) (fixed:
    start ``o*stride - pad``, clipped; adaptive: ``[floor(o*in/out), ceil((o+1)*in/out))``);
    dX routes dOut to each window's first max (or spreads it over the window's divisor)."""
    type, inputs, outputs = "pool3d", ("X",), ("Out",)
    grad_uses = ("X", "Out")
    extra_attrs = _EXTRA

    def infer(self, X, *, pooling_type="max", ksize=(), global_pooling=False,
              strides=(1, 1, 1), paddings=(0, 0, 0), exclusive=True, adaptive=False,
              ceil_mode=False, data_format="NCDHW", padding_algorithm="EXPLICIT"):
        if pooling_type not in ("max", "avg"):
            raise ValueError(f"pool3d: pooling_type must be 'max' or 'avg', got "
                             f"{pooling_type!r}")
        last = _layout(self.type, data_format, 3)
        if X.ndim != 5:
            raise ValueError(f"pool3d: X must be 5-D ({'NDHWC' if last else 'NCDHW'}), got "
                             f"shape {list(X.shape)}")
        size = X.shape[1:4] if last else X.shape[2:]
        _, _, _, out = resolve_pool(self.type, size, ksize, strides, paddings, global_pooling,
                                    padding_algorithm, adaptive, ceil_mode)
        if any(size[i] >= 0 and out[i] < 1 for i in range(3)):
            raise ValueError(f"pool3d: output size {out} is not positive for input "
                             f"{list(X.shape)}, ksize {list(ksize)}, strides {list(strides)}, "
                             f"paddings {list(paddings)}")
        shape = [X.shape[0]] + out + [X.shape[4]] if last else list(X.shape[:2]) + out
        return {"Out": VarSpec(shape, X.dtype)}

    def forward(self, X, *, pooling_type="max", ksize=[], global_pooling=False,
                strides=[1, 1, 1], paddings=[0, 0, 0], exclusive=True, adaptive=False,
                ceil_mode=False, data_format="NCDHW", padding_algorithm="EXPLICIT"):
        last = _layout(self.type, data_format, 3)
        x = np.moveaxis(X, -1, 1) if last else X
        out = pool_nd(x, pooling_type, ksize, strides, paddings, global_pooling, exclusive,
                      adaptive, ceil_mode, padding_algorithm, self.type)
        return {"Out": np.ascontiguousarray(np.moveaxis(out, 1, -1) if last else out)}

    def backward(self, X, Out, dOut, *, pooling_type="max", ksize=[], global_pooling=False,
                 strides=[1, 1, 1], paddings=[0, 0, 0], exclusive=True, adaptive=False,
                 ceil_mode=False, data_format="NCDHW", padding_algorithm="EXPLICIT"):
        last = _layout(self.type, data_format, 3)
        t = (lambda a: np.moveaxis(a, -1, 1)) if last else (lambda a: a)
        dx = pool_nd_grad(t(X), t(Out), t(dOut), pooling_type, ksize, strides, paddings,
                          global_pooling, exclusive, adaptive, ceil_mode, padding_algorithm,
                          self.type)
        return {"X": np.ascontiguousarray(np.moveaxis(dx, 1, -1)) if last else dx}


def _argmax_first(x: np.ndarray, out: np.ndarray, win: _Windows) -> np.ndarray:
    """Flat spatial index (row-major over the input map) of each window's first maximum."""
    size = x.shape[2:]
    mask = np.full(out.shape, -1, np.int64)
    for grid, valid in _offsets(win):
        # fluid updates on ``max < x`` from -FLT_MAX: a window of cells <= -FLT_MAX keeps -1
        xg = x[(slice(None), slice(None)) + grid]
        hit = (xg == out) & (xg > _NEG_FLT_MAX) & valid & (mask < 0)
        if hit.any():
            flat = np.ravel_multi_index(tuple(np.broadcast_to(g, out.shape[2:]) for g in grid),
                                        size)
            mask = np.where(hit, flat, mask)
    return mask


class _MaxPoolWithIndex(OpDef):
    inputs, outputs = ("X",), ("Out", "Mask")
    grad_uses = ("X", "Mask")
    rank = 4

    def infer(self, X, *, ksize=(), global_pooling=False, strides=(), paddings=(),
              adaptive=False):
        n = self.rank - 2
        if X.ndim != self.rank:
            raise ValueError(f"{self.type}: X must be {self.rank}-D, got shape {list(X.shape)}")
        _, _, _, out = resolve_pool(self.type, X.shape[2:], ksize, strides or [1] * n,
                                    paddings or [0] * n, global_pooling, "EXPLICIT", adaptive,
                                    False)
        shape = list(X.shape[:2]) + out
        return {"Out": VarSpec(shape, X.dtype), "Mask": VarSpec(shape, "int32")}

    def forward(self, X, *, ksize=[], global_pooling=False, strides=[], paddings=[],
                adaptive=False):
        n = self.rank - 2
        strides, paddings = strides or [1] * n, paddings or [0] * n
        out = pool_nd(X, "max", ksize, strides, paddings, global_pooling, True, adaptive,
                      False, "EXPLICIT", self.type)
        _, win = _geometry(X, ksize, strides, paddings, global_pooling, "EXPLICIT", adaptive,
                           False, self.type)
        return {"Out": out, "Mask": _argmax_first(X, out, win).astype(np.int32)}

    def backward(self, X, Mask, dOut, dMask=None, *, ksize=[], global_pooling=False,
                 strides=[], paddings=[], adaptive=False):
        N, C = X.shape[:2]
        plane = int(np.prod(X.shape[2:]))
        dx = np.zeros((N * C, plane), dOut.dtype)
        rows = np.repeat(np.arange(N * C), Mask[0, 0].size)
        cols = Mask.reshape(-1)
        keep = cols >= 0                    # -1: a window without a maximum gets no gradient
        np.add.at(dx, (rows[keep], cols[keep]), dOut.reshape(-1)[keep])
        return {"X": dx.reshape(X.shape)}


@register
class MaxPool2DWithIndex(_MaxPoolWithIndex):
    """2-D max pooling that also returns ``Mask``, the flat index ``h * W + w`` of each window's
    first maximum (fixed or adaptive windows); dX scatters dOut to those indices."""
    type = "max_pool2d_with_index"


@register
class MaxPool3DWithIndex(_MaxPoolWithIndex):
    """3-D max pooling with ``Mask`` = the flat index ``(d * H + h) * W + w`` of each window's
    first maximum; dX scatters dOut to those indices."""
    type, rank = "max_pool3d_with_index", 5
