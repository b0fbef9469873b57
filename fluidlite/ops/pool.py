"""2-D pooling: ``pool2d`` (max / avg; global, ceil_mode, exclusive, paddings; NCHW or NHWC).

Vectorized over kernel offsets: the output is a max (or sum) of kh*kw strided views of the
(padded) input, one whole-tensor numpy operation per offset — never a loop over pixels.
Window bounds follow fluid: a window starts at ``o*stride - pad_before`` and is clipped to the
input; ``exclusive`` averages divide by the number of input cells in the window, otherwise by
kh*kw. Max-pool gradients go to the first maximum of each window (row-major), as in fluid.

Output sizes are fluid's ``PoolOutputSize`` in C++ int arithmetic (division truncates toward
zero): a 2x2 / stride-2 pool of a 1-row map has 1 row. A window holding no input cell (one in
the padding, or past the input with ``ceil_mode``) gives what fluid 1.8's kernel gives: max
pooling its initial value ``-FLT_MAX``, exclusive averaging ``0 / cells`` with fluid's signed
cell count ``(hend - hstart) * (wend - wstart)`` (NaN for 0 cells, -0 for a negative count).
"""
from __future__ import annotations

from typing import Any, List, NamedTuple, Sequence, Tuple

import numpy as np

from ..core import threads
from ..core.registry import OpDef, VarSpec, register
from ._conv_kernels import Phases, phase_parts
from .conv import c_div, normalize_paddings

_EXTRA = {"use_cudnn": False, "use_mkldnn": False, "use_quantizer": False, "is_test": False}


class _PoolGeom(NamedTuple):
    kh: int
    kw: int
    sh: int
    sw: int
    pt: int
    pl: int
    H: int
    W: int
    oh: int
    ow: int
    Hn: int         # rows/cols of the padded canvas the windows read
    Wn: int

    def view(self, xp: np.ndarray, i: int, j: int) -> np.ndarray:
        """Input cells at kernel offset (i, j) of every window: [N, C, oh, ow]."""
        return xp[:, :, i:i + self.sh * (self.oh - 1) + 1:self.sh,
                  j:j + self.sw * (self.ow - 1) + 1:self.sw]

    @property
    def padded(self) -> bool:
        return (self.pt, self.pl, self.Hn, self.Wn) != (0, 0, self.H, self.W)

    @property
    def disjoint(self) -> bool:
        return self.sh >= self.kh and self.sw >= self.kw

    # the fields ``Phases`` reads (a canvas Hn x Wn, windows without dilation)
    Hp = property(lambda self: self.Hn)
    Wp = property(lambda self: self.Wn)
    dh = dw = property(lambda self: 1)


_FLT_MAX = float(np.finfo(np.float32).max)   # MaxPool's initial value: -FLT_MAX for every dtype


def _max_floor(dtype: np.dtype) -> Any:
    """MaxPool's initial value -FLT_MAX in ``dtype``: -inf where FLT_MAX overflows (float16),
    made without NumPy's overflow warning."""
    return dtype.type(-_FLT_MAX if float(np.finfo(dtype).max) >= _FLT_MAX else -np.inf)


def _out_size(size: int, k: int, pad_total: int, stride: int, ceil_mode: bool) -> int:
    """fluid's ``PoolOutputSize`` (C++ int division: truncated toward zero)."""
    if size < 0:
        return -1
    return c_div(size + pad_total - k + (stride - 1 if ceil_mode else 0), stride) + 1


def _resolve(op: str, hw: Sequence[int], ksize: Sequence[int], strides: Sequence[int],
             paddings: Sequence[int], global_pooling: bool, algorithm: str
             ) -> Tuple[List[int], List[int], List[int]]:
    """(ksize, strides, [top, bottom, left, right]) after global pooling / padding_algorithm
    (fixed windows: adaptive pooling runs pool3d.py's N-d kernel)."""
    strides = [int(s) for s in strides]
    if len(strides) != 2 or min(strides) < 1:
        raise ValueError(f"{op}: strides must be 2 positive ints, got {list(strides)}")
    if global_pooling:
        return [int(hw[0]), int(hw[1])], strides, [0, 0, 0, 0]
    ksize = [int(k) for k in ksize]
    if len(ksize) != 2 or min(ksize) < 1:
        raise ValueError(f"{op}: ksize must be 2 positive ints (or set global_pooling=True), "
                         f"got {list(ksize)}")
    pads = normalize_paddings(paddings)
    if algorithm == "SAME":
        for i in range(2):
            if hw[i] >= 0:
                out = (hw[i] + strides[i] - 1) // strides[i]
                total = max((out - 1) * strides[i] + ksize[i] - hw[i], 0)
                pads[2 * i], pads[2 * i + 1] = total // 2, total - total // 2
    elif algorithm == "VALID":
        pads = [0, 0, 0, 0]
    elif algorithm != "EXPLICIT":
        raise ValueError(f"{op}: padding_algorithm must be 'EXPLICIT', 'SAME' or 'VALID', got "
                         f"{algorithm!r}")
    return ksize, strides, pads


def _one_window(op: str, x: np.ndarray, ksize: Sequence[int], strides: Sequence[int],
                paddings: Sequence[int], global_pooling: bool, adaptive: bool,
                algorithm: str) -> bool:
    """Whether ``x`` [N, C, H, W] (float, non-empty maps) is pooled in one window, the whole
    map, with no padding: global pooling, an adaptive pooling to 1x1 (an SE block's squeeze)
    or a window of the map's size (``_whole_map``)."""
    hw = x.shape[2:]
    if x.dtype.kind != "f" or min(hw) < 1:
        return False
    if adaptive:        # (adaptive + global: one window per cell, fluid's ksize := hw)
        return not global_pooling and [int(k) for k in ksize] == [1, 1]
    k, _, pads = _resolve(op, hw, ksize, strides, paddings, global_pooling, algorithm)
    return k == [int(d) for d in hw] and not any(pads)


def _whole_map(x: np.ndarray, pooling_type: str) -> np.ndarray:
    """[N, C, 1, 1]: each map's max (at least -FLT_MAX, MaxPool's initial value; NaN wins) or
    mean. The mean sums in float64 and rounds once, so its bits follow neither the reduction
    order NumPy picks for ``x``'s strides (an NHWC map seen as NCHW reduces across pixels,
    a contiguous one pairwise) nor the NumPy version; the window kernels' resampling
    products took 3-90x its time (an SE block's [6, 200, 2, 96] squeeze: 0.28 -> 0.10 ms)."""
    if pooling_type == "max":
        return np.maximum(np.maximum.reduce(x, axis=(2, 3), keepdims=True), _max_floor(x.dtype))
    total = np.add.reduce(x, axis=(2, 3), dtype=np.float64, keepdims=True)
    return (total / float(x.shape[2] * x.shape[3])).astype(x.dtype)


def _layout(op: str, data_format: str) -> bool:
    if data_format in ("NCHW", "AnyLayout"):
        return False
    if data_format == "NHWC":
        return True
    raise ValueError(f"{op}: data_format must be 'NCHW' or 'NHWC', got {data_format!r}")


def _geom(x: np.ndarray, ksize, strides, paddings, global_pooling, ceil_mode,
          algorithm) -> _PoolGeom:
    H, W = x.shape[2:]
    k, s, p = _resolve("pool2d", (H, W), ksize, strides, paddings, global_pooling, algorithm)
    oh = _out_size(H, k[0], p[0] + p[1], s[0], ceil_mode)
    ow = _out_size(W, k[1], p[2] + p[3], s[1], ceil_mode)
    if oh < 1 or ow < 1:
        raise ValueError(f"pool2d: empty output for input {H}x{W}, ksize {k}, strides {s}, "
                         f"paddings {p}")
    Hn = max((oh - 1) * s[0] + k[0], p[0] + H)
    Wn = max((ow - 1) * s[1] + k[1], p[2] + W)
    return _PoolGeom(k[0], k[1], s[0], s[1], p[0], p[2], H, W, oh, ow, Hn, Wn)


def _pad(x: np.ndarray, g: _PoolGeom, fill: float) -> np.ndarray:
    if not g.padded:
        return x
    xp = np.full(x.shape[:2] + (g.Hn, g.Wn), fill, x.dtype)
    xp[:, :, g.pt:g.pt + g.H, g.pl:g.pl + g.W] = x
    return xp


class _Canvas:
    """The padded input a pooling reads (or its gradient, written), seen tap by tap. With
    strides > 1 the canvas is stored as its sh*sw stride phases (rows a, a+sh, ... and columns
    b, b+sw, ...: ``[phases, N, C, Hq, Wq]``), in which every tap (i, j) of every window is
    one contiguous-row slice -- row y + i//sh, column x + j//sw of phase (i%sh, j%sw) -- where
    the plain canvas would be read with a stride (NumPy's loops: not vectorised, 2-3x slower
    on ResNet's 3x3 / 2 max pool). Each cell gets the same operations in the same order
    either way: the same bits."""

    def __init__(self, g: _PoolGeom, a: np.ndarray) -> None:
        self.g, self.a = g, a
        self.phased = (g.sh, g.sw) != (1, 1)

    @classmethod
    def of(cls, x: np.ndarray, g: _PoolGeom, fill: float) -> "_Canvas":
        if (g.sh, g.sw) == (1, 1):
            return cls(g, _pad(x, g, fill))
        a = np.full(cls._shape(x, g), fill, x.dtype)
        for ph, src, dst in cls._parts(g):
            a[ph][dst] = x[src]
        return cls(g, a)

    @classmethod
    def zeros(cls, x: np.ndarray, g: _PoolGeom, dtype: np.dtype) -> "_Canvas":
        if (g.sh, g.sw) == (1, 1):
            return cls(g, np.zeros(x.shape[:2] + (g.Hn, g.Wn), dtype))
        return cls(g, np.zeros(cls._shape(x, g), dtype))

    @staticmethod
    def _shape(x: np.ndarray, g: _PoolGeom) -> Tuple[int, ...]:
        return (g.sh * g.sw,) + x.shape[:2] + (-(-g.Hn // g.sh), -(-g.Wn // g.sw))

    @staticmethod
    def _parts(g: _PoolGeom) -> List[Tuple[int, Tuple[slice, ...], Tuple[slice, ...]]]:
        """Per phase holding input cells: the cells and where they lie in its plane."""
        out = []
        for ph, h0, w0, r, c in phase_parts(g.sh, g.sw, g.pt, g.pl, g.H, g.W):
            nh, nw = -(-(g.H - h0) // g.sh), -(-(g.W - w0) // g.sw)
            out.append((ph, (slice(None), slice(None), slice(h0, None, g.sh),
                             slice(w0, None, g.sw)),
                        (slice(None), slice(None), slice(r, r + nh), slice(c, c + nw))))
        return out

    def tap(self, i: int, j: int) -> np.ndarray:
        """The cells at kernel offset (i, j) of every window: [N, C, oh, ow] (a view)."""
        g = self.g
        if not self.phased:
            return g.view(self.a, i, j)
        qi, qj = i // g.sh, j // g.sw
        return self.a[(i % g.sh) * g.sw + j % g.sw, :, :, qi:qi + g.oh, qj:qj + g.ow]

    def unpadded(self) -> np.ndarray:
        """The input's cells [N, C, H, W] (a gradient canvas read back: a new array)."""
        g = self.g
        if not self.phased:
            if g.padded:
                return np.ascontiguousarray(self.a[:, :, g.pt:g.pt + g.H, g.pl:g.pl + g.W])
            return self.a
        out = np.empty(self.a.shape[1:3] + (g.H, g.W), self.a.dtype)
        for ph, src, dst in self._parts(g):
            out[src] = self.a[ph][dst]
        return out


def _counts(g: _PoolGeom, exclusive: bool, dtype: np.dtype) -> np.ndarray:
    """Divisor of each window: [oh, ow]; exclusive: fluid's ``(hend - hstart) * (wend -
    wstart)``, signed (0 or negative for a window without input cells, as fluid)."""
    if not exclusive:
        return np.full((g.oh, g.ow), g.kh * g.kw, dtype)

    def one(o: int, k: int, s: int, p: int, n: int) -> np.ndarray:
        start = np.arange(o) * s - p
        return np.minimum(start + k, n) - np.maximum(start, 0)

    return np.outer(one(g.oh, g.kh, g.sh, g.pt, g.H),
                    one(g.ow, g.kw, g.sw, g.pl, g.W)).astype(dtype)


def _pool_fwd(x: np.ndarray, g: _PoolGeom, pooling_type: str, exclusive: bool) -> np.ndarray:
    if pooling_type == "max":
        xp = _Canvas.of(x, g, -np.inf)
        out = xp.tap(0, 0).copy()
        for i in range(g.kh):
            for j in range(g.kw):
                if i or j:
                    np.maximum(out, xp.tap(i, j), out=out)
        # fluid's MaxPool starts from -FLT_MAX: an empty window (or one of -inf) gives that
        # (in float16, -FLT_MAX rounds to -inf, as fluid's float16 conversion does)
        return np.maximum(out, _max_floor(x.dtype), out=out)
    xp = _Canvas.of(x, g, 0.0)
    out = xp.tap(0, 0).copy()
    for i in range(g.kh):
        for j in range(g.kw):
            if i or j:
                out += xp.tap(i, j)
    with np.errstate(divide="ignore", invalid="ignore"):    # 0 cells: 0 / 0 as fluid
        out /= _counts(g, exclusive, x.dtype)
    return out


def _pool_bwd(x: np.ndarray, out: np.ndarray, dout: np.ndarray, g: _PoolGeom,
              pooling_type: str, exclusive: bool) -> np.ndarray:
    dxp = _Canvas.zeros(x, g, dout.dtype)
    add = not g.disjoint
    if pooling_type == "max":
        xp = _Canvas.of(x, g, -np.inf)
        hit = np.empty(out.shape, bool)
        taken = np.zeros(out.shape, bool)    # windows whose (first) maximum was already seen
        part = np.empty_like(dout) if add else None
        offsets = [(i, j) for i in range(g.kh) for j in range(g.kw)]
        for k, (i, j) in enumerate(offsets):
            np.equal(xp.tap(i, j), out, out=hit)
            if k:
                np.greater(hit, taken, out=hit)          # hit and not taken
            if k < len(offsets) - 1:
                np.logical_or(taken, hit, out=taken)
            target = dxp.tap(i, j)
            if add:
                np.multiply(dout, hit, out=part)
                target += part
            else:       # disjoint windows: every input cell is written at most once
                np.multiply(dout, hit, out=target)
    else:
        share = _avg_share(dout, g, exclusive)
        for i in range(g.kh):
            for j in range(g.kw):
                if add:
                    dxp.tap(i, j)[...] += share
                else:
                    dxp.tap(i, j)[...] = share
    return dxp.unpadded()


def _avg_share(dout: np.ndarray, g: _PoolGeom, exclusive: bool) -> np.ndarray:
    """Each window's share of its dOut: dOut / divisor (0 for a window without cells)."""
    counts = _counts(g, exclusive, dout.dtype)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = dout / counts
    if exclusive and not counts.all():      # a window without cells reaches no cell
        share = np.where(counts == 0, share.dtype.type(0), share)
    return share


_PARTS_MIN = 1 << 18        # input elements from which a pooling runs as two parallel parts


def _in_parts(fn: Any, arrays: Sequence[np.ndarray], shape: Tuple[int, ...],
              dtype: np.dtype) -> np.ndarray:
    """``fn(*arrays)`` (a pooling of [N, C, ...] maps, each (n, c) on its own), with two
    threads or more as two fixed parts of the batch -- of the channels for one image -- run
    as ``core.threads`` items: the same bits as one call."""
    axis = 0 if arrays[0].shape[0] >= 2 else 1
    n = arrays[0].shape[axis]
    if n < 2 or arrays[0].size < _PARTS_MIN or not threads.splitting():
        return fn(*arrays)
    out = np.empty(shape, dtype)

    def part(lo: int, hi: int) -> None:
        sl = (slice(None),) * axis + (slice(lo, hi),)
        out[sl] = fn(*(a[sl] for a in arrays))
    threads.parallel_ranges(part, n)
    return out


# -- big maps: flat phase planes ----------------------------------------------------------------
# As the depthwise kernels (``_conv_kernels.Phases``): each (n, c) map's padded canvas is split
# into its stride phases, each laid out flat ``Wq`` wide, so that a tap of every window of a
# map is ONE contiguous slice of oh*Wq cells -- where ``_Canvas``'s taps are oh runs of ow
# (ResNet's 3x3 / 2 max pool of 112x112 maps: 56-cell runs, whose per-run dispatch was most of
# its 40 ms gradient). The Wq - ow columns past each output row are computed and dropped
# (forward), or carry a gradient of exact zeros (backward: their dOut is 0, their Out NaN).
# Maps run in blocks of rows whose planes stay in cache, in two fixed parts of the rows on the
# pool's threads. Each window cell gets the same operations in the same order as on
# ``_Canvas``: the same values.
_FLAT_MIN = 1 << 18         # input elements from which a float pooling runs on flat planes
_FLAT_BLOCK = 1 << 17       # window outputs (oh*Wq) per block of rows


def _flat(x: np.ndarray, g: _PoolGeom) -> bool:
    """Big float maps with overlapping windows take the flat planes. Disjoint windows (2x2 /
    2, global pooling) stay on ``_Canvas``, whose gradient writes each cell once instead of
    adding into zeroed planes (flat: 1.1-1.5x their time; overlapping 3x3 windows 0.45-0.85x
    forward and backward, ResNet's max pool gradient 45 -> 25 ms on two threads)."""
    overlap = (g.oh > 1 and g.sh < g.kh) or (g.ow > 1 and g.sw < g.kw)
    return overlap and x.size >= _FLAT_MIN and x.dtype.kind == "f"


def _flat_blocks(fn: Any, rows: int, L: int) -> None:
    """``fn(lo, hi, rb)`` over two fixed parts of ``range(rows)`` (parallel when threads are
    set), each walked in blocks of ``rb`` rows."""
    rb = max(1, _FLAT_BLOCK // L)
    threads.parallel_ranges(lambda lo, hi: fn(lo, hi, rb), rows, 2)


def _flat_fwd(x: np.ndarray, g: _PoolGeom, pooling_type: str, exclusive: bool) -> np.ndarray:
    """``_pool_fwd`` on flat phase planes."""
    N, C = x.shape[:2]
    q, R = Phases(g), N * C
    L = g.oh * q.Wq
    rows = x.reshape(R, g.H, g.W)
    out = np.empty((R, g.oh, g.ow), x.dtype)
    is_max = pooling_type == "max"
    if is_max:
        fill = -np.inf
        floor = _max_floor(x.dtype)
    else:
        fill, counts = 0.0, _counts(g, exclusive, x.dtype)

    def part(lo: int, hi: int, rb: int) -> None:
        nb = min(rb, hi - lo)
        planes = np.full((nb, q.planes, q.Hq, q.Wq), fill, x.dtype)    # padding: fill, kept
        acc = np.empty((nb, L), x.dtype)
        for r0 in range(lo, hi, rb):
            n = min(hi, r0 + rb) - r0
            q.put(rows[r0:r0 + n], g, planes[:n])
            xf, a = planes[:n].reshape(n, q.planes, -1), acc[:n]
            with np.errstate(invalid="ignore"):     # (dropped columns may add inf - inf)
                for k, (ph, off) in enumerate(q.taps):
                    tap = xf[:, ph, off:off + L]
                    if k == 0:
                        np.copyto(a, tap)
                    elif is_max:
                        np.maximum(a, tap, out=a)
                    else:
                        a += tap
            win = a.reshape(n, g.oh, q.Wq)[:, :, :g.ow]
            if is_max:
                np.maximum(win, floor, out=out[r0:r0 + n])
            else:
                with np.errstate(divide="ignore", invalid="ignore"):
                    np.divide(win, counts, out=out[r0:r0 + n])
    _flat_blocks(part, R, L)
    return out.reshape(N, C, g.oh, g.ow)


def _flat_bwd(x: np.ndarray, out: np.ndarray, dout: np.ndarray, g: _PoolGeom,
              pooling_type: str, exclusive: bool) -> np.ndarray:
    """``_pool_bwd`` on flat phase planes."""
    N, C = x.shape[:2]
    q, R = Phases(g), N * C
    L = g.oh * q.Wq
    is_max = pooling_type == "max"
    if is_max:
        rows, outs = x.reshape(R, g.H, g.W), out.reshape(R, g.oh, g.ow)
        grads = dout.reshape(R, g.oh, g.ow)
    else:
        grads = _avg_share(dout, g, exclusive).reshape(R, g.oh, g.ow)
    dx = np.empty((R, g.H, g.W), dout.dtype)

    def part(lo: int, hi: int, rb: int) -> None:
        nb = min(rb, hi - lo)
        dplanes = np.empty((nb, q.planes, q.Hq, q.Wq), dout.dtype)
        d = np.zeros((nb, g.oh, q.Wq), dout.dtype)      # the gradient, Wq wide: 0 past ow
        if is_max:
            planes = np.full((nb, q.planes, q.Hq, q.Wq), -np.inf, x.dtype)
            o = np.full((nb, g.oh, q.Wq), np.nan, out.dtype)   # NaN past ow: never a hit
            hit, taken = np.empty((nb, L), bool), np.empty((nb, L), bool)
            part_ = np.empty((nb, L), dout.dtype)
        for r0 in range(lo, hi, rb):
            n = min(hi, r0 + rb) - r0
            d[:n, :, :g.ow] = grads[r0:r0 + n]
            df = d[:n].reshape(n, L)
            dp = dplanes[:n]
            dp.fill(0)
            dpf = dp.reshape(n, q.planes, -1)
            if is_max:
                q.put(rows[r0:r0 + n], g, planes[:n])
                o[:n, :, :g.ow] = outs[r0:r0 + n]
                _max_taps(q, planes[:n].reshape(n, q.planes, -1), o[:n].reshape(n, L), df,
                          dpf, hit[:n], taken[:n], part_[:n], L)
            else:
                for ph, off in q.taps:
                    dpf[:, ph, off:off + L] += df
            q.take(dp, g, dx[r0:r0 + n])
    _flat_blocks(part, R, L)
    return dx.reshape(N, C, g.H, g.W)


def _max_taps(q: Phases, xf: np.ndarray, of: np.ndarray, df: np.ndarray, dpf: np.ndarray,
              hit: np.ndarray, taken: np.ndarray, part: np.ndarray, L: int) -> None:
    """Each window's dOut (``df``) to the first tap (row-major) whose cell equals its Out
    (``of``), added into the gradient planes ``dpf``; ``_pool_bwd``'s operations."""
    last = len(q.taps) - 1
    for k, (ph, off) in enumerate(q.taps):
        np.equal(xf[:, ph, off:off + L], of, out=hit)
        if k:
            np.greater(hit, taken, out=hit)             # hit and not taken
        if k < last:
            if k:
                np.logical_or(taken, hit, out=taken)
            else:
                np.copyto(taken, hit)
        np.multiply(df, hit, out=part)
        dpf[:, ph, off:off + L] += part


@register
class Pool2D(OpDef):
    """Out[n,c,y,x] = max (or mean) of X[n,c] over the window at (y*sh - pt, x*sw - pl) of
    size ksize (clipped to X);  dX routes dOut to each window's first max (or spreads it
    evenly over the window's divisor)."""
    type, inputs, outputs = "pool2d", ("X",), ("Out",)
    grad_uses = ("X", "Out")
    extra_attrs = _EXTRA

    def infer(self, X, *, pooling_type="max", ksize=(), global_pooling=False, strides=(1, 1),
              paddings=(0, 0), exclusive=True, adaptive=False, ceil_mode=False,
              data_format="NCHW", padding_algorithm="EXPLICIT"):
        if pooling_type not in ("max", "avg"):
            raise ValueError(f"pool2d: pooling_type must be 'max' or 'avg', got "
                             f"{pooling_type!r}")
        last = _layout(self.type, data_format)
        if X.ndim != 4:
            raise ValueError(f"pool2d: X must be 4-D ({'NHWC' if last else 'NCHW'}), got shape "
                             f"{list(X.shape)}")
        hw = X.shape[1:3] if last else X.shape[2:]
        if adaptive:        # adaptive windows (see ops/pool3d.py); with global_pooling, fluid
            # sets ksize to the input's size first: one window per input cell
            out = [int(v) for v in hw] if global_pooling else [int(k) for k in ksize]
            shape = [X.shape[0], out[0], out[1], X.shape[3]] if last else list(X.shape[:2]) + out
            return {"Out": VarSpec(shape, X.dtype)}
        k, s, p = _resolve(self.type, hw, ksize, strides, paddings, global_pooling,
                           padding_algorithm)
        out = [_out_size(hw[i], k[i], p[2 * i] + p[2 * i + 1], s[i], ceil_mode)
               if k[i] >= 0 else -1 for i in range(2)]
        if global_pooling:
            out = [1, 1]
        if any(hw[i] >= 0 and k[i] >= 0 and out[i] < 1 for i in range(2)):  # else unknown
            raise ValueError(f"pool2d: output size {out} is not positive for input "
                             f"{list(X.shape)}, ksize {k}, strides {s}, paddings {p}")
        shape = [X.shape[0], out[0], out[1], X.shape[3]] if last else list(X.shape[:2]) + out
        return {"Out": VarSpec(shape, X.dtype)}

    def forward(self, X, *, pooling_type="max", ksize=[], global_pooling=False, strides=[1, 1],
                paddings=[0, 0], exclusive=True, adaptive=False, ceil_mode=False,
                data_format="NCHW", padding_algorithm="EXPLICIT"):
        last = _layout(self.type, data_format)
        x = X.transpose(0, 3, 1, 2) if last else X
        if _one_window(self.type, x, ksize, strides, paddings, global_pooling, adaptive,
                       padding_algorithm):
            out = _whole_map(x, pooling_type)
            return {"Out": np.ascontiguousarray(out.transpose(0, 2, 3, 1)) if last else out}
        if adaptive:        # adaptive windows (also global + adaptive): pool3d.py's N-d kernel
            from .pool3d import pool_nd
            out = pool_nd(x, pooling_type, ksize, strides, paddings, global_pooling, exclusive,
                          True, ceil_mode, padding_algorithm, self.type)
            return {"Out": np.ascontiguousarray(out.transpose(0, 2, 3, 1)) if last else out}
        g = _geom(x, ksize, strides, paddings, global_pooling, ceil_mode, padding_algorithm)
        if _flat(x, g):
            out = _flat_fwd(x, g, pooling_type, exclusive)
            return {"Out": np.ascontiguousarray(out.transpose(0, 2, 3, 1)) if last else out}
        out = _in_parts(lambda a: _pool_fwd(a, g, pooling_type, exclusive), [x],
                        x.shape[:2] + (g.oh, g.ow), x.dtype)
        return {"Out": np.ascontiguousarray(out.transpose(0, 2, 3, 1)) if last else out}

    def backward(self, X, Out, dOut, *, pooling_type="max", ksize=[], global_pooling=False,
                 strides=[1, 1], paddings=[0, 0], exclusive=True, adaptive=False,
                 ceil_mode=False, data_format="NCHW", padding_algorithm="EXPLICIT"):
        last = _layout(self.type, data_format)
        t = (lambda a: a.transpose(0, 3, 1, 2)) if last else (lambda a: a)
        x = t(X)
        if adaptive:        # adaptive windows (also global + adaptive): pool3d.py's N-d kernel
            from .pool3d import pool_nd_grad
            dx = pool_nd_grad(x, t(Out), t(dOut), pooling_type, ksize, strides, paddings,
                              global_pooling, exclusive, True, ceil_mode, padding_algorithm,
                              self.type)
            return {"X": np.ascontiguousarray(dx.transpose(0, 2, 3, 1)) if last else dx}
        g = _geom(x, ksize, strides, paddings, global_pooling, ceil_mode, padding_algorithm)
        if _flat(x, g):
            dx = _flat_bwd(x, t(Out), t(dOut), g, pooling_type, exclusive)
            return {"X": np.ascontiguousarray(dx.transpose(0, 2, 3, 1)) if last else dx}
        dx = _in_parts(lambda a, o, d: _pool_bwd(a, o, d, g, pooling_type, exclusive),
                       [x, t(Out), t(dOut)], x.shape, dOut.dtype)
        return {"X": np.ascontiguousarray(dx.transpose(0, 2, 3, 1)) if last else dx}
