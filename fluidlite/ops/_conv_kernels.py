"""Convolution kernels for the shapes where ``conv.py``'s im2col + one GEMM is a poor fit.

* **Depthwise** (``groups`` == input channels, ``F = C * m`` filters: m per channel). im2col
  would copy every input kh*kw times and then run C tiny products that NumPy loops over
  outside BLAS. Here the input and output are seen as ``R = N*C`` rows of feature maps and each
  of the kh*kw taps is one strided multiply-add over a block of rows (``_BLOCK`` output
  elements, so the taps' passes stay in cache): forward, input gradient and filter gradient
  alike. The filter gradient sums each row's products, then the N rows of a channel in a fixed
  order. Maps under ``_ROWS_LAST_MAX`` pixels (7x7, 14x14) put the rows last instead
  (``[Hp, Wp, N*C]``) so that each pass is one long contiguous loop, not thousands of 7-wide
  ones. The forward and input gradient (any stride) of bigger maps
  split each row's padded map into its stride phases laid out flat, so that every tap is one
  contiguous slice per row; with stride 1, one filter per channel and a finite filter, the
  input gradient is that forward run on dY with the filter turned (``_turned``).
* **1x1** convolutions with groups 1 and no padding: a plain GEMM per image on the NCHW
  arrays, ``Y[n] = W X[n]``, with no im2col and no layout transposes.
* **Stride-1 forwards of large maps** (``use_taps``): one GEMM per filter tap on a shifted
  slice of the flat padded map, strip by strip of output rows, with no im2col and no
  transformed tiles (both stream several copies of a large map through memory).
* ``copy_parts`` / ``run_parts``: the layout copies and col2im adds of ``conv.py``'s im2col
  route split over the same pool (BLAS already threads the GEMMs; NumPy's copies would run on
  one core).

* **Depthwise on small maps** (at most ``_BAND_MAX`` output pixels, finite operands): banded
  GEMMs, one batched matmul per routine (``_Band``; see the section's comment) -- except the
  forward of maps at most ``LAST_WIDTH`` wide or ``_LAST_PIXELS`` pixels in the batch, which
  runs the rows-last taps.

Determinism: the rows are split into a fixed number of parts (``_PARTS``) that run on a small
thread pool (NumPy's loops release the GIL); every output element and every per-row sum is
computed by one part with the same operations in the same order whatever the number of
threads, so results are bit-identical run to run and machine to machine (for a given BLAS).
The banded GEMMs add the same products in BLAS's order: bit-identical run to run for a given
BLAS, within float32 rounding of the tap kernels.

The geometry ``g`` is ``conv._Geom`` (kernel kh, kw; strides sh, sw; dilations dh, dw;
paddings pt, pb, pl, pr; input H, W; output oh, ow; groups; padded Hp, Wp).
"""
from __future__ import annotations

from typing import Any, Callable, List, Optional, Sequence, Tuple

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ..core import threads
from .broadcast import whole_runs
from .linalg import _gemm

__all__ = ["copy_parts", "run_parts", "phase_parts", "Phases", "use_depthwise", "depthwise_fwd",
           "depthwise_dx", "depthwise_dw", "use_pointwise", "pointwise_fwd", "pointwise_dx",
           "pointwise_dw", "uses_band", "band_filter", "band_shape", "use_taps", "taps_fwd",
           "LAST_WIDTH"]

# ``conv.conv2d_forward``'s epilogue (an inference ``conv2d_fusion``'s bias, residual and
# activation): an in-place elementwise function ``epilogue(block, where)`` of the blocks
# ``Y3[where]`` of a forward's output (Y3 = Y as [N, F, oh*ow])
Epilogue = Callable[[np.ndarray, tuple], Any]
_ALL = slice(None)

# output elements per block of rows (1 MiB of float32). Not smaller: every tap pass is a
# NumPy call that holds the GIL while it dispatches, and a thread that finds it taken sleeps
# until it is handed over -- two threads taking blocks of 32K elements ran 1.3-1.6x slower
# than one on 112x112 and 56x56 maps. Not larger: a block's taps, accumulator and phase
# planes then leave the core's cache. The best size moves with the machine: on the Intel
# machine of session 54, 128K against 256K ran MobileNetV2 inference in 0.90-0.98x the time;
# on the 2-vCPU AMD EPYC guest of session 67 (KVM, where handing the GIL to a sleeping
# thread is slower), 256K against 128K took 0.97x at batch 1 and 16 (whole model, six and
# five alternations), the flat forward of 32 x 112x112 and 144 x 56x56 at batch 1 0.79-0.81x,
# and 512K against 256K 1.00-1.02x.
_BLOCK = 1 << 18
_PARTS = 2              # fixed split of the rows (results never depend on the thread count)
_ROWS_LAST_MAX = 256    # depthwise maps with fewer output pixels use the rows-last layout
# A depthwise forward runs its taps rows last, not as banded GEMMs, on output maps at most
# ``LAST_WIDTH`` wide or of at most ``_LAST_PIXELS`` pixels in the whole batch: there the
# banded GEMMs are a few columns wide, or one per channel of ~10K multiply-adds for 0.6 us of
# dispatch each, and the taps' 17 passes over long runs of rows win. MobileNetV2's layers
# (2 threads, AMD EPYC, NumPy 2.4; rows-last time / banded time): 7x7 outputs 0.54-0.81 at
# batch 1 to 16; 14x14 outputs at batch 1 0.68-0.85, at batch 2 1.02-1.15 (stride 2: 0.83),
# from batch 4 on 1.08-1.77 (stride 2: 0.85 at 4, 1.10 at 8)
LAST_WIDTH = 8
_LAST_PIXELS = 256
_SUMS_PADDED_OW = 48    # stride-1 output rows from which the filter gradient sums padded rows
_POINTWISE_MIN = 128    # output pixels from which a 1x1 convolution always runs a GEMM per image
_POINTWISE_FILTER_READS = 3     # ... and below it while the filter's rereads stay this small


def _run_parts(fn: Callable[[int, int], None], n: int) -> None:
    """``fn(lo, hi)`` over ``_PARTS`` fixed slices of ``range(n)``, in parallel when there
    are threads (each part writes disjoint outputs)."""
    threads.parallel_ranges(fn, n, _PARTS)


_COPY_MIN = 1 << 17      # elements below which a copy is not worth a second thread


def copy_parts(dst: np.ndarray, src: Any) -> np.ndarray:
    """``dst[...] = src`` (broadcasting), split along axis 0 over the pool for big arrays:
    the layout copies of im2col run on both cores (a copy's result never depends on how it is
    split)."""
    if dst.size < _COPY_MIN or dst.ndim == 0 or threads.get_num_threads() < 2:
        np.copyto(dst, src)
        return dst
    src = np.broadcast_to(src, dst.shape)

    def part(lo: int, hi: int) -> None:
        np.copyto(dst[lo:hi], src[lo:hi])
    _run_parts(part, dst.shape[0])
    return dst


def run_parts(fn: Callable[[int, int], None], n: int, size: int) -> None:
    """``fn(lo, hi)`` over fixed parts of ``range(n)`` when ``size`` elements (the largest
    array the parts' NumPy calls touch) make those calls long enough to pay for two threads
    (``_COPY_MIN``), else one call on the calling thread; each part must write its own
    outputs. Each NumPy call retakes the GIL when its loop ends, and a thread that finds it
    taken sleeps until it is handed over, tens of microseconds on the 2-vCPU guest measured:
    MobileNetV2's depthwise layers at batch 1 (2026-12-03, AMD EPYC, NumPy 2.4), split in
    two parts on two threads against one call: 7x7 maps of 960 channels 1.73x the time,
    strided 14x14 of 576 2.0x, 14x14 of 384 1.18x. The bits never depend on the split."""
    if size < _COPY_MIN:
        fn(0, n)
    else:
        _run_parts(fn, n)


def parts_alone(size: int) -> bool:
    """Whether ``run_parts`` of ``size`` elements runs its parts on the calling thread only
    (one call, or no second thread), where no other thread waits for the GIL at the end of
    each NumPy call."""
    return size < _COPY_MIN or not threads.splitting()


# -- depthwise ----------------------------------------------------------------------------------
def use_depthwise(x_shape: Sequence[int], w_shape: Sequence[int], groups: int) -> bool:
    """The depthwise kernels apply: groups == input channels > 1, filter [C*m, 1, kh, kw]."""
    return groups > 1 and x_shape[1] == groups and w_shape[1] == 1


def _tap(a: np.ndarray, g: Any, i: int, j: int) -> np.ndarray:
    """Rows ``a`` [r, Hp, Wp] seen at tap (i, j): [r, oh, ow] (a strided view)."""
    hs, ws = i * g.dh, j * g.dw
    return a[:, hs:hs + g.sh * (g.oh - 1) + 1:g.sh, ws:ws + g.sw * (g.ow - 1) + 1:g.sw]


def _rows_weights(w: np.ndarray, C: int, N: int) -> np.ndarray:
    """Filter [C*m, 1, kh, kw] -> [m, kh, kw, N*C, 1, 1]: row r = n*C + c gets channel c's."""
    m = w.shape[0] // C
    t = w.reshape(C, m, w.shape[2], w.shape[3]).transpose(1, 2, 3, 0)
    return np.ascontiguousarray(np.tile(t, (1, 1, 1, N)))[..., None, None]


def depthwise_fwd(x: np.ndarray, w: np.ndarray, g: Any,
                  band: Optional[np.ndarray] = None,
                  epilogue: Optional[Epilogue] = None) -> np.ndarray:
    """Y[n, c*m + k] = sum_{i,j} W[c*m + k, 0, i, j] * Xpad[n, c, tap(i, j)];  -> [N, F, oh, ow].
    ``band``: ``band_filter(w, g)`` made ahead (an inference program's constant filter, laid
    out once at load), used when the banded kernel runs (the same bits as laying it out here).
    ``epilogue(Y3[where], where)`` (Y3 = Y as [N, F, oh*ow]; see ``conv.conv2d_forward``) runs
    on each block of Y as soon as the block is made, in the block's thread."""
    if _band_forward(x.shape[0], g, x.dtype):
        return _band_fwd(x, w, g, band, epilogue)
    return _taps_fwd(x, w, g, epilogue)


def _band_forward(N: int, g: Any, dtype: np.dtype) -> bool:
    """Whether ``depthwise_fwd`` of N images runs the banded GEMMs (see ``LAST_WIDTH``)."""
    return _use_band(g, dtype) and g.ow > LAST_WIDTH and N * g.oh * g.ow > _LAST_PIXELS


def _taps_fwd(x: np.ndarray, w: np.ndarray, g: Any,
              epilogue: Optional[Epilogue] = None) -> np.ndarray:
    """``depthwise_fwd`` by the tap kernels: rows last on small maps, else the phase planes
    (any stride: MobileNetV2's strided 112x112 layer at batch 16 took 23 ms there against 45
    as banded GEMMs and 59 with strided taps on one thread, 22 / 24 / 48 on two)."""
    if g.oh * g.ow < _ROWS_LAST_MAX:
        return _depthwise_fwd_last(x, w, g, epilogue)
    return _depthwise_fwd_flat(x, w, g, epilogue)


def _rows_epilogue(epilogue: Epilogue, y3: np.ndarray, r0: int, r1: int, C: int,
                   m: int) -> None:
    """``epilogue`` on the output of the input rows r0:r1 (row n*C + c: image n, channel c,
    its output channels c*m .. c*m + m - 1 of ``y3`` [N, C*m, oh*ow]), one piece per image."""
    for n in range(r0 // C, (r1 - 1) // C + 1):
        where = (n, slice(max(r0 - n * C, 0) * m, min(r1 - n * C, C) * m))
        epilogue(y3[where], where)


def depthwise_dx(dy: np.ndarray, w: np.ndarray, g: Any, C: int) -> np.ndarray:
    """dX [N, C, H, W]: every tap scatters sum_k W[c*m + k, 0, i, j] dY[n, c*m + k] back
    through its strided view (the adjoint of ``depthwise_fwd``)."""
    if (g.H * g.W <= _BAND_MAX or (g.sh, g.sw) == (1, 1)) and _use_band(g, dy.dtype):
        return _band_dx(dy, w, g, C)
    return _taps_dx(dy, w, g, C)


def _taps_dx(dy: np.ndarray, w: np.ndarray, g: Any, C: int) -> np.ndarray:
    """``depthwise_dx`` by the tap kernels."""
    if g.oh * g.ow < _ROWS_LAST_MAX:
        return _depthwise_dx_last(dy, w, g, C)
    gt = _turned(g, w, C)
    if gt is not None:
        return _depthwise_fwd_flat(dy, w[:, :, ::-1, ::-1], gt)
    # (any stride: strided maps of 256-2048 output pixels, which used to scatter through
    # strided views of each padded row, take 0.45-0.75x the time on phase planes, the same
    # bits -- MobileNetV2's 144 x 56x56 / 2 layer at batch 8: 17.0 -> 7.9 ms)
    return _depthwise_dx_flat(dy, w, g, C)


def _turned(g: Any, w: np.ndarray, C: int) -> Any:
    """The geometry of dX as a forward: with stride 1 and one filter per channel, dX is the
    forward of dY padded by the kernel's reach less the forward's padding, with the filter
    turned 180 degrees -- a forward's 9 multiply-adds per pixel instead of the scatter's 9
    multiplies, 9 adds and 9 column clears. None when that does not hold, or the filter is not
    finite (its turned taps would also multiply the padding's zeros: 0 * Inf where fluid's
    scatter never reaches)."""
    if (g.sh, g.sw) != (1, 1) or w.shape[0] != C or not np.isfinite(w).all():
        return None
    reach_h, reach_w = (g.kh - 1) * g.dh, (g.kw - 1) * g.dw
    pads = (reach_h - g.pt, reach_h - g.pb, reach_w - g.pl, reach_w - g.pr)
    if min(pads) < 0:
        return None
    return g._replace(pt=pads[0], pb=pads[1], pl=pads[2], pr=pads[3], H=g.oh, W=g.ow,
                      oh=g.H, ow=g.W)


def depthwise_dw(x: np.ndarray, dy: np.ndarray, g: Any, w_shape: Sequence[int]) -> np.ndarray:
    """dW[c*m + k, 0, i, j] = sum_n sum_{y,x} dY[n, c*m + k] * Xpad[n, c, tap(i, j)]: each
    row's sum in one piece, then the N rows of a channel added in order."""
    if g.H * g.W <= _BAND_DW_MAX and _use_band(g, x.dtype):
        return _band_dw(x, dy, g, w_shape)
    return _taps_dw(x, dy, g, w_shape)


def _taps_dw(x: np.ndarray, dy: np.ndarray, g: Any, w_shape: Sequence[int]) -> np.ndarray:
    """``depthwise_dw`` by the tap kernels."""
    N, C = x.shape[:2]
    m = w_shape[0] // C
    if g.oh * g.ow < _ROWS_LAST_MAX:
        sums = _depthwise_sums_last(x, dy, g, m)
    else:
        sums = _depthwise_sums(x, dy, g, m)
    dw = sums.reshape(m, g.kh, g.kw, N, C).sum(axis=3)       # [m, kh, kw, C]
    return np.ascontiguousarray(dw.transpose(3, 0, 1, 2)).reshape(w_shape)


def _depthwise_sums(x: np.ndarray, dy: np.ndarray, g: Any, m: int) -> np.ndarray:
    """[m, kh, kw, N*C]: each row's sum of dY * tap(Xpad) (rows-first layout), a block of rows
    at a time in buffers of its part, made right before its taps read them. Strided layers
    and narrow maps (``_SUMS_PADDED_OW``) lay out the block's phase planes and its dY ``Wq``
    wide (zeros past ow), so that every tap's products are one contiguous dot per row (the
    forward's layout, below) instead of oh strided ones: MobileNetV2's layers at batch 8,
    96 x 112x112 / 2 0.81-0.88x the time, 144 x 56x56 / 2 0.73-0.82x, 192 x 28x28 0.79-0.85x.
    The taps also read the planes' cells past each output row, times dY's zeros: a block whose
    input is not finite (0 * Inf) sums strided taps over its padded rows instead
    (``_padded_sums``), which read only the cells fluid's kernel does -- as do the wide
    stride-1 maps, whose rows are long contiguous loops already (32 x 112x112 and 144 x 56x56
    took 1.0-1.17x the time flat)."""
    N, C = x.shape[:2]
    q = Phases(g)
    rows = x.reshape(N * C, g.H, g.W)
    dyr = dy.reshape(N * C, m, g.oh, g.ow)
    L = g.oh * q.Wq
    sums = np.empty((m, g.kh, g.kw, N * C), x.dtype)
    flat = sums.reshape(m, g.kh * g.kw, N * C)
    rb = max(1, _BLOCK // L)
    on_planes = (g.sh, g.sw) != (1, 1) or g.ow < _SUMS_PADDED_OW

    def part(lo: int, hi: int) -> None:
        nb = min(rb, hi - lo)
        if on_planes:
            planes = np.zeros((nb, q.planes, q.Hq, q.Wq), x.dtype)
            dyw = np.zeros((nb, m, g.oh, q.Wq), dy.dtype)
        for r0 in range(lo, hi, rb):
            r1 = min(hi, r0 + rb)
            if not (on_planes and _finite(rows[r0:r1])):
                _padded_sums(rows[r0:r1], dyr[r0:r1], g, m, sums[..., r0:r1])
                continue
            q.put(rows[r0:r1], g, planes[:r1 - r0])
            xf = planes[:r1 - r0].reshape(r1 - r0, q.planes, -1)
            d = dyw[:r1 - r0]
            d[..., :g.ow] = dyr[r0:r1]
            d = d.reshape(r1 - r0, m, -1)
            for k in range(m):
                for n, (ph, off) in enumerate(q.taps):
                    np.einsum("rl,rl->r", xf[:, ph, off:off + L], d[:, k],
                              out=flat[k, n, r0:r1])
    run_parts(part, N * C, dy.size)
    return sums


def _padded_sums(rows: np.ndarray, dyr: np.ndarray, g: Any, m: int, out: np.ndarray) -> None:
    """``_depthwise_sums`` of a block of rows [r, H, W] (dY rows [r, m, oh, ow]) by strided
    taps over its zero-padded rows, into ``out`` [m, kh, kw, r]."""
    src = rows
    if (g.pt, g.pb, g.pl, g.pr) != (0, 0, 0, 0):
        src = np.zeros((rows.shape[0], g.Hp, g.Wp), rows.dtype)
        src[:, g.pt:g.pt + g.H, g.pl:g.pl + g.W] = rows
    for k in range(m):
        for i in range(g.kh):
            for j in range(g.kw):
                np.einsum("rhw,rhw->r", _tap(src, g, i, j), dyr[:, k], out=out[k, i, j])


# -- depthwise on flat phase planes ---------------------------------------------------------------
# The padded map of each row is split into its sh*sw stride phases (padded rows a, a+sh, ...
# and columns b, b+sw, ...: one plane for stride 1), each laid out flat ``Wq`` wide. Tap (i, j)
# of output pixel (y, x) is then pixel (y + qi, x + qj) of phase (pi, pj) (i*dh = qi*sh + pi,
# j*dw = qj*sw + pj): with output pixels numbered p = y*Wq + x, every tap of a block of rows
# is ONE contiguous slice of oh*Wq elements per row, instead of oh strided slices of ow. The
# Wq - ow columns past each output row are computed and dropped (forward) or zeroed before
# they are added back (input gradient); each plane has a spare zero row, so a map's last
# taps stay inside it. The same operations per element, in the same order, as taps read
# with strides from each padded row (the tests' reference kernel): the forward is
# bit-identical to that.
def phase_parts(sh: int, sw: int, pt: int, pl: int, H: int, W: int
                ) -> List[Tuple[int, int, int, int, int]]:
    """Where an H x W map padded by (pt, pl) lands in its sh*sw stride phases (padded rows a,
    a+sh, ... and columns b, b+sw, ...): per phase holding input cells, ``(phase, h0, w0, r,
    c)`` -- its first input row h0 and column w0 (the cells ``[h0::sh, w0::sw]``) lie from
    row r, column c of the phase's plane. Shared by the depthwise phase planes and pooling."""
    parts = []
    for a in range(sh):
        h0 = (a - pt) % sh
        for b in range(sw):
            w0 = (b - pl) % sw
            if h0 < H and w0 < W:
                parts.append((a * sw + b, h0, w0, (pt + h0) // sh, (pl + w0) // sw))
    return parts


class Phases:
    """Where the stride phases of a padded map lie: ``planes`` (sh*sw) of ``Hq`` x ``Wq``,
    the plane and flat offset of every tap (``taps``), and per plane the input rows and
    columns that land in it (``parts``). ``g`` is any geometry with the fields kh, kw, sh,
    sw, dh, dw, pt, pl, H, W, Hp, Wp (a convolution's, or pooling's ``_PoolGeom``)."""

    def __init__(self, g: Any) -> None:
        self.Wq = -(-g.Wp // g.sw)
        self.Hq = -(-g.Hp // g.sh) + 1
        self.planes = g.sh * g.sw
        self.taps = []
        for i in range(g.kh):
            qi, pi = divmod(i * g.dh, g.sh)
            for j in range(g.kw):
                qj, pj = divmod(j * g.dw, g.sw)
                self.taps.append((pi * g.sw + pj, qi * self.Wq + qj))
        self.parts = phase_parts(g.sh, g.sw, g.pt, g.pl, g.H, g.W)

    def put(self, rows: np.ndarray, g: Any, planes: np.ndarray) -> None:
        """Rows [n, H, W] into their phase planes [n, planes, Hq, Wq]: the cells the input
        lands on (the padding's cells are left as they are: zero in a buffer made by
        ``np.zeros``, whatever rows it held before)."""
        for ph, h0, w0, r, c in self.parts:
            src = rows[:, h0::g.sh, w0::g.sw]
            planes[:, ph, r:r + src.shape[1], c:c + src.shape[2]] = src

    def take(self, planes: np.ndarray, g: Any, rows: np.ndarray) -> None:
        """Phase planes [n, planes, Hq, Wq] -> the unpadded rows [n, H, W]."""
        for ph, h0, w0, r, c in self.parts:
            dst = rows[:, h0::g.sh, w0::g.sw]
            dst[...] = planes[:, ph, r:r + dst.shape[1], c:c + dst.shape[2]]


# The flat kernels below make the phase planes of one block of rows at a time, in a buffer of
# their part, right before the taps read them: the planes never exist for the whole batch, and
# a block's copy is still in the core's cache when its taps run (MobileNetV2's 112x112 maps
# would otherwise write and read back 15-40 MB of planes per call).
def _depthwise_fwd_flat(x: np.ndarray, w: np.ndarray, g: Any,
                        epilogue: Optional[Epilogue] = None) -> np.ndarray:
    N, C = x.shape[:2]
    m = w.shape[0] // C
    q = Phases(g)
    rows = x.reshape(N * C, g.H, g.W)
    wr = _rows_weights(w, C, N).reshape(m, g.kh * g.kw, N * C, 1)
    L = g.oh * q.Wq
    y = np.empty((N * C, m, g.oh, g.ow), x.dtype)
    rb = max(1, _BLOCK // L)

    def part(lo: int, hi: int) -> None:
        nb = min(rb, hi - lo)
        planes = np.zeros((nb, q.planes, q.Hq, q.Wq), x.dtype)
        acc = np.empty((nb, L), x.dtype)
        tmp = np.empty_like(acc)
        for r0 in range(lo, hi, rb):
            r1 = min(hi, r0 + rb)
            q.put(rows[r0:r1], g, planes[:r1 - r0])
            xf = planes[:r1 - r0].reshape(r1 - r0, q.planes, -1)
            a, t = acc[:r1 - r0], tmp[:r1 - r0]
            with whole_runs(L, a.size * m * len(q.taps)):   # each row's weight on L pixels
                for k in range(m):
                    for n, (ph, off) in enumerate(q.taps):
                        if n == 0:
                            np.multiply(xf[:, ph, off:off + L], wr[k, n, r0:r1], out=a)
                        else:
                            np.multiply(xf[:, ph, off:off + L], wr[k, n, r0:r1], out=t)
                            a += t
                    y[r0:r1, k] = a.reshape(r1 - r0, g.oh, q.Wq)[:, :, :g.ow]
            if epilogue is not None:            # (the block's rows are still in cache)
                _rows_epilogue(epilogue, y3, r0, r1, C, m)
    y3 = y.reshape(N, C * m, g.oh * g.ow)
    run_parts(part, N * C, y.size)
    return y.reshape(N, C * m, g.oh, g.ow)


def _depthwise_dx_flat(dy: np.ndarray, w: np.ndarray, g: Any, C: int) -> np.ndarray:
    N, m = dy.shape[0], dy.shape[1] // C
    q = Phases(g)
    dys = dy.reshape(N * C, m, g.oh, g.ow)
    wr = _rows_weights(w, C, N).reshape(m, g.kh * g.kw, N * C, 1)
    L = g.oh * q.Wq
    dx = np.empty((N, C, g.H, g.W), dy.dtype)
    rows = dx.reshape(N * C, g.H, g.W)
    rb = max(1, _BLOCK // L)

    def part(lo: int, hi: int) -> None:
        nb = min(rb, hi - lo)
        dyr = np.zeros((nb, m, g.oh, q.Wq), dy.dtype)       # dY rows laid out Wq wide
        planes = np.empty((nb, q.planes, q.Hq, q.Wq), dy.dtype)
        tmp = np.empty((nb, L), dy.dtype)
        acc = np.empty_like(tmp) if m > 1 else None
        for r0 in range(lo, hi, rb):
            r1 = min(hi, r0 + rb)
            d = dyr[:r1 - r0]
            d[..., :g.ow] = dys[r0:r1]
            d = d.reshape(r1 - r0, m, -1)
            p = planes[:r1 - r0]
            p.fill(0)
            dxf = p.reshape(r1 - r0, q.planes, -1)
            t = tmp[:r1 - r0]
            with whole_runs(L, t.size * m * len(q.taps)):
                for n, (ph, off) in enumerate(q.taps):
                    np.multiply(d[:, 0], wr[0, n, r0:r1], out=t)
                    for k in range(1, m):
                        a = acc[:r1 - r0]
                        np.multiply(d[:, k], wr[k, n, r0:r1], out=a)
                        t += a
                    # the dropped columns add exact zeros (even where W is not finite)
                    t.reshape(r1 - r0, g.oh, q.Wq)[:, :, g.ow:] = 0
                    view = dxf[:, ph, off:off + L]
                    view += t
            q.take(p, g, rows[r0:r1])
    run_parts(part, N * C, max(dx.size, dy.size))
    return dx


# -- depthwise on small maps: rows last ---------------------------------------------------------
# With a few pixels per map the rows-first loops run over ow (7, 14) elements at a time; with
# the rows as the last axis ([Hp, Wp, N*C]) every tap is a long contiguous loop over the rows,
# for the price of one transposing copy in and one out.
def _padded_last(x: np.ndarray, g: Any) -> np.ndarray:
    """``x`` [N, C, H, W] zero-padded as [Hp, Wp, N*C]."""
    N, C = x.shape[:2]
    buf = np.zeros((g.Hp, g.Wp, N, C), x.dtype)
    buf[g.pt:g.pt + g.H, g.pl:g.pl + g.W] = x.transpose(2, 3, 0, 1)
    return buf.reshape(g.Hp, g.Wp, N * C)


def _weights_last(w: np.ndarray, C: int, N: int) -> np.ndarray:
    """Filter [C*m, 1, kh, kw] -> [m, kh, kw, N*C] (row r = n*C + c gets channel c's)."""
    m = w.shape[0] // C
    t = w.reshape(C, m, w.shape[2], w.shape[3]).transpose(1, 2, 3, 0)
    return np.ascontiguousarray(np.tile(t, (1, 1, 1, N)))


def _tap_last(a: np.ndarray, g: Any, i: int, j: int, h0: int, h1: int, r0: int,
              r1: int) -> np.ndarray:
    """[Hp, Wp, R] seen at tap (i, j) for output rows h0:h1 and rows r0:r1."""
    hs, ws = h0 * g.sh + i * g.dh, j * g.dw
    return a[hs:hs + g.sh * (h1 - h0 - 1) + 1:g.sh, ws:ws + g.sw * (g.ow - 1) + 1:g.sw, r0:r1]


def _dy_last(dy: np.ndarray, g: Any, C: int) -> np.ndarray:
    """dY [N, C*m, oh, ow] -> [oh, ow, m, N*C]."""
    N, m = dy.shape[0], dy.shape[1] // C
    t = dy.reshape(N, C, m, g.oh, g.ow).transpose(3, 4, 2, 0, 1)
    return np.ascontiguousarray(t).reshape(g.oh, g.ow, m, N * C)


def _depthwise_fwd_last(x: np.ndarray, w: np.ndarray, g: Any,
                        epilogue: Optional[Epilogue] = None) -> np.ndarray:
    """``depthwise_fwd`` rows last. Each part of the rows pads its own rows into a [Hp, Wp,
    rows] canvas, runs the taps and writes its rows back to the NCHW output, then runs
    ``epilogue`` on them: the layout copies and the epilogue run on both threads, on rows
    still in cache."""
    N, C = x.shape[:2]
    m = w.shape[0] // C
    rows = x.reshape(N * C, g.H, g.W)
    wt = _weights_last(w, C, N)
    y = np.empty((N * C, m, g.oh, g.ow), x.dtype)
    y3 = y.reshape(N, C * m, g.oh * g.ow)

    def part(r0: int, r1: int) -> None:
        xp = np.zeros((g.Hp, g.Wp, r1 - r0), x.dtype)
        xp[g.pt:g.pt + g.H, g.pl:g.pl + g.W] = rows[r0:r1].transpose(1, 2, 0)
        hb = max(1, _BLOCK // (g.ow * (r1 - r0)))
        acc = np.empty((min(hb, g.oh), g.ow, r1 - r0), x.dtype)
        tmp = np.empty_like(acc)
        for k in range(m):
            for h0 in range(0, g.oh, hb):
                h1 = min(g.oh, h0 + hb)
                a, t = acc[:h1 - h0], tmp[:h1 - h0]
                for i in range(g.kh):
                    for j in range(g.kw):
                        v, wij = _tap_last(xp, g, i, j, h0, h1, 0, r1 - r0), wt[k, i, j, r0:r1]
                        if i == 0 and j == 0:
                            np.multiply(v, wij, out=a)
                        else:
                            np.multiply(v, wij, out=t)
                            a += t
                y[r0:r1, k, h0:h1] = a.transpose(2, 0, 1)
        if epilogue is not None:
            _rows_epilogue(epilogue, y3, r0, r1, C, m)
    run_parts(part, N * C, y.size)
    return y.reshape(N, C * m, g.oh, g.ow)


def _depthwise_dx_last(dy: np.ndarray, w: np.ndarray, g: Any, C: int) -> np.ndarray:
    N, m = dy.shape[0], dy.shape[1] // C
    dyl, wt = _dy_last(dy, g, C), _weights_last(w, C, N)
    dxp = np.zeros((g.Hp, g.Wp, N * C), dy.dtype)

    def part(r0: int, r1: int) -> None:      # rows are disjoint: no two parts add to a cell
        hb = max(1, _BLOCK // (g.ow * (r1 - r0)))
        tmp = np.empty((min(hb, g.oh), g.ow, r1 - r0), dy.dtype)
        acc = np.empty_like(tmp) if m > 1 else None
        for h0 in range(0, g.oh, hb):
            h1 = min(g.oh, h0 + hb)
            t = tmp[:h1 - h0]
            for i in range(g.kh):
                for j in range(g.kw):
                    np.multiply(dyl[h0:h1, :, 0, r0:r1], wt[0, i, j, r0:r1], out=t)
                    for k in range(1, m):
                        a = acc[:h1 - h0]
                        np.multiply(dyl[h0:h1, :, k, r0:r1], wt[k, i, j, r0:r1], out=a)
                        t += a
                    view = _tap_last(dxp, g, i, j, h0, h1, r0, r1)
                    view += t
    run_parts(part, N * C, max(dxp.size, dy.size))
    dx = dxp.reshape(g.Hp, g.Wp, N, C)[g.pt:g.pt + g.H, g.pl:g.pl + g.W]
    return np.ascontiguousarray(dx.transpose(2, 3, 0, 1))


def _depthwise_sums_last(x: np.ndarray, dy: np.ndarray, g: Any, m: int) -> np.ndarray:
    """[m, kh, kw, N*C]: each row's sum of dY * tap(Xpad) (rows-last layout)."""
    N, C = x.shape[:2]
    xp, dyl = _padded_last(x, g), _dy_last(dy, g, C)
    sums = np.empty((m, g.kh, g.kw, N * C), x.dtype)

    def part(r0: int, r1: int) -> None:
        for k in range(m):
            for i in range(g.kh):
                for j in range(g.kw):
                    np.einsum("hwr,hwr->r", _tap_last(xp, g, i, j, 0, g.oh, r0, r1),
                              dyl[:, :, k, r0:r1], out=sums[k, i, j, r0:r1])
    run_parts(part, N * C, dy.size)
    return sums


# -- depthwise as banded GEMMs, channel-major ----------------------------------------------------
# On small maps the tap-by-tap passes above spend their time in layout transposes and short
# loops. Here every output row is cut into ``nt`` tiles of ``tw`` pixels, and one tile of one
# image and channel is a row of a GEMM: the kh input rows of its receptive field, ``span``
# pixels each (one copy of the padded input, ``_Band.rows``), times that channel's filter laid
# out as a banded [kh*span, m*tw] matrix (``_Band.filt``: column k*tw + x holds W[c*m + k, 0,
# i, j] at row i*span + x*sw + j*dw). One batched matmul over the channels computes the
# forward, its transpose the input gradient (added back through the same rows, in pieces that
# never overlap), and rows^T dY the filter gradient (read off the band's diagonals). The
# matrices are kh*span/(kh*kw) times the taps' work (~6x for 3x3 tiles of 16), at BLAS speed
# instead of ~18 NumPy passes.
_BAND_MAX = 1024        # depthwise maps of at most this many output pixels run as banded GEMMs
                        # (< 0: never)
# input pixels up to which the filter gradient runs banded: MobileNetV2's 28x28 maps (stride 1
# and 2) took 0.65-0.95x the time with the tap kernels (192 channels at batch 8: 4.4 -> 2.9 ms),
# its 14x14 and 7x7 ones 0.85-0.9x banded
_BAND_DW_MAX = 256
_BAND_TILE = 16         # output pixels per tile (at most)
_BAND_BUDGET = 8 << 20  # bytes of GEMM rows per block of channels (``_band_chunks``) ...
_BAND_BUDGET_PARTS = 2 << 20    # ... when the blocks run on the pool's threads
# bytes of GEMM rows from which a layer is cut in at least ``_PARTS`` blocks: below it one
# block, on the calling thread. MobileNetV2's small layers at batch 1 (0.7-1.0 MB of rows:
# 384 channels of 14x14, 960 of 7x7, strided 28x28 and 14x14) ran 1.05-1.3x slower in two
# blocks on two threads than in one (the pool's hand-off against 300 us of work); 2 MB
# (192 channels of 28x28) gains 0.86x
_BAND_SPLIT_MIN = 3 << 19


def _use_band(g: Any, dtype: np.dtype) -> bool:
    """Small maps in float32 / float64. The band kernels check each block of channels'
    operands (``_finite``): a GEMM
    multiplies every input of a tile by the band's zeros too, so a NaN or Inf would reach a
    whole tile where fluid's kernel spoils only the pixels its taps reach -- such a block
    takes the tap kernels (channels are independent)."""
    return 0 <= g.oh * g.ow <= _BAND_MAX and dtype in (np.float32, np.float64)


def uses_band(g: Any, dtype: Any) -> bool:
    """Whether ``depthwise_fwd`` multiplies by ``band_filter`` for this geometry and dtype
    (finite operands; see ``_use_band``)."""
    return _use_band(g, np.dtype(dtype))


def band_shape(g: Any, w_shape: Sequence[int]) -> Tuple[int, int, int]:
    """The shape of ``band_filter`` for a depthwise filter of ``w_shape`` [C*m, 1, kh, kw]."""
    b = _Band(g)
    return (g.groups, b.K, w_shape[0] // g.groups * b.tw)


def _tile_band(g: Any) -> "_Band":
    """The tiling of full ``_BAND_TILE``-pixel tiles for ``g``'s kernel, strides and
    dilations, whatever its map's width: its band holds every narrower tiling's as a corner
    (``_narrowed``), so an input of free width can have its filter laid out at load
    (``band_filter`` of a geometry whose output is one tile wide)."""
    return _Band(g._replace(ow=_BAND_TILE))


def _narrowed(band: np.ndarray, g: Any, b: "_Band", m: int) -> Optional[np.ndarray]:
    """``b``'s band cut from a full-tile band (None when ``band`` is not one): tile column x
    of tap (i, j) sits at row i*span + x*sw + j*dw, so the narrower tiling's matrices are the
    corner of the first ``span`` rows of each tap row and the first ``tw`` columns of each
    filter -- the same values ``b.filt`` lays out."""
    t = _tile_band(g)
    C = band.shape[0]
    if band.shape != (C, t.K, m * t.tw):
        return None
    if (b.span, b.tw) == (t.span, t.tw):
        return band
    corner = band.reshape(C, g.kh, t.span, m, t.tw)[:, :, :b.span, :, :b.tw]
    return np.ascontiguousarray(corner).reshape(C, b.K, m * b.tw)


def band_filter(w: np.ndarray, g: Any) -> np.ndarray:
    """The banded filter matrices [C, kh*span, m*tw] the banded forward multiplies the GEMM
    rows of channel c by (``_Band.filt``; C = ``g.groups``): made once for a constant filter,
    then handed to ``depthwise_fwd``.

    Example:
        >>> import numpy as np
        >>> from fluidlite.ops._conv_kernels import band_filter, band_shape
        >>> from fluidlite.ops.conv import _geom
        >>> g = _geom((7, 7), (3, 3), (1, 1), [1, 1], (1, 1), "EXPLICIT", 4)
        >>> band_filter(np.ones((4, 1, 3, 3), np.float32), g).shape == band_shape(g, (4, 1, 3, 3))
        True
    """
    return _Band(g).filt(w, g, g.groups)


def _finite(*arrays: np.ndarray) -> bool:
    """Every element of the arrays is finite, told by one sum each (its overflow, too, only
    sends the block to the tap kernels). The band kernels check each block's operands in the
    block's own thread, instead of a serial pass over whole operands first (12 ms of a
    MobileNetV2 training step)."""
    with np.errstate(all="ignore"):
        return all(np.isfinite(np.add.reduce(a, axis=None)) for a in arrays)


class _Band:
    """Tiles of the banded-GEMM kernels: ``nt`` tiles of ``tw`` output pixels per output row
    (equal tiles, the last one padded), ``span`` input pixels per tile row, the canvas ``Wq``
    wide so that every tile's span lies inside it, ``K = kh * span`` the GEMM depth."""

    def __init__(self, g: Any) -> None:
        self.nt = -(-g.ow // _BAND_TILE)
        self.tw = -(-g.ow // self.nt)
        self.span = (self.tw - 1) * g.sw + (g.kw - 1) * g.dw + 1
        self.Wq = max(g.Wp, (self.nt - 1) * self.tw * g.sw + self.span)
        self.K = g.kh * self.span

    def canvas(self, x: np.ndarray, g: Any) -> np.ndarray:
        """``x`` [N, C, H, W] zero-padded, channel-major: [C, N, Hp, Wq]."""
        N, C = x.shape[:2]
        buf = np.zeros((C, N, g.Hp, self.Wq), x.dtype)
        buf[:, :, g.pt:g.pt + g.H, g.pl:g.pl + g.W] = x.transpose(1, 0, 2, 3)
        return buf

    def view(self, buf: np.ndarray, g: Any) -> np.ndarray:
        """The canvas seen as [C, N, oh, nt, kh, span]: tile (y, t)'s kh rows of span pixels
        (tiles overlap by ``span - tw*sw`` pixels)."""
        sC, sN, sH, sW = buf.strides
        return as_strided(buf, buf.shape[:2] + (g.oh, self.nt, g.kh, self.span),
                          (sC, sN, g.sh * sH, self.tw * g.sw * sW, g.dh * sH, sW),
                          writeable=False)

    def rows(self, x: np.ndarray, g: Any) -> np.ndarray:
        """The GEMM rows of ``x``: [C, N*oh*nt, K]."""
        v = self.view(self.canvas(x, g), g)
        return np.ascontiguousarray(v).reshape(v.shape[0], -1, self.K)

    def filt(self, w: np.ndarray, g: Any, C: int) -> np.ndarray:
        """The banded filter matrices [C, K, m*tw]."""
        m, tw = w.shape[0] // C, self.tw
        band = np.zeros((C, g.kh, self.span, m, tw), w.dtype)
        xs = np.arange(tw)
        w4 = w.reshape(C, m, g.kh, g.kw)
        for j in range(g.kw):       # [tw, C, kh, m] <- [C, kh, m]
            band[:, :, xs * g.sw + j * g.dw, :, xs] = w4[:, :, :, j].transpose(0, 2, 1)
        return band.reshape(C, self.K, m * tw)

    def dy_rows(self, dy: np.ndarray, g: Any, C: int) -> np.ndarray:
        """dY [N, C*m, oh, ow] as GEMM rows [C, N*oh*nt, m*tw] (zeros past ow)."""
        N, m = dy.shape[0], dy.shape[1] // C
        t = np.zeros((C, N, g.oh, self.nt * self.tw, m), dy.dtype)
        t[:, :, :, :g.ow] = dy.reshape(N, C, m, g.oh, g.ow).transpose(1, 0, 3, 4, 2)
        t = t.reshape(C, N, g.oh, self.nt, self.tw, m).transpose(0, 1, 2, 3, 5, 4)
        return np.ascontiguousarray(t).reshape(C, N * g.oh * self.nt, m * self.tw)


def _band_chunks(C: int, per_channel: int) -> List[Tuple[int, int]]:
    """Blocks of channels whose GEMM rows take about ``_BAND_BUDGET`` bytes: each block's
    copies and products stay in cache instead of streaming batch-sized matrices through
    memory (MobileNetV2's 112x112 layer at batch 16 would copy 120 MB of rows). At least
    ``_PARTS`` blocks when there are that many channels and ``_BAND_SPLIT_MIN`` bytes of
    rows (one block below), an even count of equal ones
    (``threads.even_ranges``): the blocks are the items the threads share
    (``_band_blocks``); a channel's product is the same in any block. Blocks that run on
    the pool's threads take ``_BAND_BUDGET_PARTS`` (a core's share of the cache: MobileNetV2
    training 0.98x, inference at batch 16 0.94x); on one thread BLAS's own threads share each
    block's GEMMs, which run better on the bigger ones (inference at batch 16: 1.04x at 2 MB)."""
    budget = _BAND_BUDGET_PARTS if threads.splitting() else _BAND_BUDGET
    least = _PARTS if C * per_channel >= _BAND_SPLIT_MIN else 1
    return threads.even_ranges(C, budget // max(per_channel, 1), least=least)


def _band_blocks(fn: Callable[[int, int], None], C: int, per_channel: int) -> None:
    """``fn(lo, hi)`` over the channel blocks of ``_band_chunks``, in parallel when there are
    threads (each block writes its own channels)."""
    chunks = _band_chunks(C, per_channel)
    threads.parallel(lambda i: fn(*chunks[i]), len(chunks))


def _band_fwd(x: np.ndarray, w: np.ndarray, g: Any, band: Optional[np.ndarray] = None,
              epilogue: Optional[Epilogue] = None) -> np.ndarray:
    N, C = x.shape[:2]
    m, b = w.shape[0] // C, _Band(g)
    given = band
    if band is None:
        band = b.filt(w, g, C)                              # [C, K, m*tw]
    elif band.dtype == w.dtype and band.shape != (C, b.K, m * b.tw):
        band = _narrowed(band, g, b, m)         # a full-tile band (a free width), or None
    if band is None or band.dtype != w.dtype or band.shape != (C, b.K, m * b.tw):
        raise ValueError(f"depthwise: the banded filter must be {w.dtype} "
                         f"{[C, b.K, m * b.tw]} (band_filter of the filter {list(w.shape)} "
                         f"for a {g.H}x{g.W} input, or the full-tile band "
                         f"{[C, _tile_band(g).K, m * _BAND_TILE]}), got {given.dtype} "
                         f"{list(given.shape)}")
    out = np.empty((N, C, m, g.oh, g.ow), np.result_type(x.dtype, w.dtype))
    out3 = out.reshape(N, C * m, g.oh * g.ow)

    def block(lo: int, hi: int) -> None:
        if not _finite(x[:, lo:hi]):
            out[:, lo:hi] = _taps_fwd(x[:, lo:hi], w[lo * m:hi * m], g).reshape(
                N, hi - lo, m, g.oh, g.ow)
        else:
            y = np.matmul(b.rows(x[:, lo:hi], g), band[lo:hi])  # [c, N*oh*nt, m*tw]
            y = y.reshape(hi - lo, N, g.oh, b.nt, m, b.tw).transpose(1, 0, 4, 2, 3, 5)
            if b.nt == 1:
                out[:, lo:hi] = y.reshape(N, hi - lo, m, g.oh, g.ow)
            else:
                t = np.empty((N, hi - lo, m, g.oh, b.nt * b.tw), y.dtype)
                t.reshape(N, hi - lo, m, g.oh, b.nt, b.tw)[...] = y
                out[:, lo:hi] = t[..., :g.ow]
        if epilogue is not None:
            where = (_ALL, slice(lo * m, hi * m))
            epilogue(out3[where], where)
    _band_blocks(block, C, N * g.oh * b.nt * b.K * x.itemsize)
    return out.reshape(N, C * m, g.oh, g.ow)


def _band_dx(dy: np.ndarray, w: np.ndarray, g: Any, C: int) -> np.ndarray:
    N, m, b = dy.shape[0], w.shape[0] // C, _Band(g)
    gt = _turned(g, w, C)
    if gt is not None:
        return _band_fwd(dy, w[:, :, ::-1, ::-1], gt)
    band = b.filt(w, g, C).transpose(0, 2, 1)              # [C, m*tw, K]
    dx = np.empty((N, C, g.H, g.W), np.result_type(dy.dtype, w.dtype))
    # pieces of ``step`` pixels of the tiles never overlap (one tile per row: no overlap)
    step = b.span if b.nt == 1 else b.tw * g.sw

    def block(lo: int, hi: int) -> None:
        c = hi - lo
        if not _finite(dy[:, lo * m:hi * m], w[lo * m:hi * m]):
            dx[:, lo:hi] = _taps_dx(dy[:, lo * m:hi * m], w[lo * m:hi * m], g, c)
            return
        drows = np.matmul(b.dy_rows(dy[:, lo * m:hi * m], g, c), band[lo:hi])
        drows = drows.reshape(c, N, g.oh, b.nt, g.kh, b.span)
        buf = np.zeros((c, N, g.Hp, b.Wq), drows.dtype)
        sC, sN, sH, sW = buf.strides
        for i in range(g.kh):
            for s0 in range(0, b.span, step):
                s1 = min(b.span, s0 + step)
                dst = as_strided(buf[:, :, i * g.dh:, s0:], (c, N, g.oh, b.nt, s1 - s0),
                                 (sC, sN, g.sh * sH, step * sW, sW))
                dst += drows[:, :, :, :, i, s0:s1]
        dx[:, lo:hi] = buf[:, :, g.pt:g.pt + g.H, g.pl:g.pl + g.W].transpose(1, 0, 2, 3)
    _band_blocks(block, C, N * g.oh * b.nt * b.K * dy.itemsize)
    return dx


def _band_dw(x: np.ndarray, dy: np.ndarray, g: Any, w_shape: Sequence[int]) -> np.ndarray:
    N, C = x.shape[:2]
    m, b = w_shape[0] // C, _Band(g)
    xs = np.arange(b.tw)
    dw = np.empty((C, m, g.kh, g.kw), np.result_type(x.dtype, dy.dtype))

    def block(lo: int, hi: int) -> None:
        c = hi - lo
        if not _finite(x[:, lo:hi], dy[:, lo * m:hi * m]):
            dw[lo:hi] = _taps_dw(x[:, lo:hi], dy[:, lo * m:hi * m], g,
                                 (c * m, 1, g.kh, g.kw)).reshape(c, m, g.kh, g.kw)
            return
        dband = np.matmul(b.rows(x[:, lo:hi], g).transpose(0, 2, 1),
                          b.dy_rows(dy[:, lo * m:hi * m], g, c))       # [c, K, m*tw]
        dband = dband.reshape(c, g.kh, b.span, m, b.tw)
        for j in range(g.kw):       # the diagonal of tap j: [tw, c, kh, m] summed over x
            dw[lo:hi, :, :, j] = dband[:, :, xs * g.sw + j * g.dw, :, xs].sum(
                axis=0).transpose(0, 2, 1)
    _band_blocks(block, C, N * g.oh * b.nt * b.K * x.itemsize)
    return dw.reshape(w_shape)


# -- 1x1 ----------------------------------------------------------------------------------------
def use_pointwise(g: Any, w_shape: Sequence[int], n: int = 1) -> bool:
    """The 1x1 GEMM-per-image kernels apply to ``n`` images: 1x1 filter, groups 1, no
    padding, and either maps of at least ``_POINTWISE_MIN`` output pixels or a filter small
    against the batch. A GEMM per image reads the filter once per image, F*C*(n - 1)
    elements more than one GEMM over the batch, which in turn copies the input and output
    maps to and from the channel-major layout, n*(C + F)*oh*ow elements: the images go one
    by one while the first is at most ``_POINTWISE_FILTER_READS`` times the second. On 7x7
    maps at batch 8 (two threads, forward / input gradient / filter gradient, ms):
    576 -> 160 (ratio 2.2) 0.59 / 0.56 / 0.88 per image against 0.67 / 0.72 / 0.92 as one
    GEMM; 960 -> 320 (4.3) 2.42 / 1.90 / 2.52 against 1.92 / 1.69 / 2.13."""
    if (g.kh, g.kw, g.groups) != (1, 1, 1) or (g.pt, g.pb, g.pl, g.pr) != (0, 0, 0, 0):
        return False
    pixels = g.oh * g.ow
    F, C = w_shape[0], w_shape[1]
    return pixels >= _POINTWISE_MIN or \
        F * C * (n - 1) <= _POINTWISE_FILTER_READS * n * (C + F) * pixels


def _strided_rows(x: np.ndarray, g: Any) -> np.ndarray:
    """``x`` [N, C, H, W] sampled at the stride: [N, C, oh*ow] (a copy only when strided)."""
    if (g.sh, g.sw) != (1, 1):
        x = x[:, :, ::g.sh, ::g.sw][:, :, :g.oh, :g.ow]
    return np.ascontiguousarray(x).reshape(x.shape[0], x.shape[1], g.oh * g.ow)


def _mm_into(mm: Callable, a: np.ndarray, b: np.ndarray, out: np.ndarray,
             epilogue: Optional[Callable[[np.ndarray, slice, slice], Any]] = None) -> None:
    """``out[...] = a @ b`` (float16 through ``mm``'s float32 product; one image alone through
    ``_gemm``, whose blocks use the threads the images would), then ``epilogue(block, rows,
    cols)`` on ``out[rows, cols]`` (on each block of ``_gemm``'s parts as they are made)."""
    if out.dtype == np.float16:
        out[...] = mm(a, b)
        if epilogue is not None:
            epilogue(out, slice(None), slice(None))
    else:
        _gemm(a, b, out, epilogue)


def pointwise_fwd(x: np.ndarray, w: np.ndarray, g: Any, mm: Callable,
                  epilogue: Optional[Callable[[np.ndarray, tuple], Any]] = None
                  ) -> np.ndarray:
    """Y[n] = W X[n] (W [F, C]);  -> [N, F, oh, ow], one GEMM per image (the images in
    parallel), each followed by ``epilogue(Y3[n, rows, cols], (n, rows, cols))`` (in place,
    Y3 = Y as [N, F, oh*ow]) on the image's product, or on each block of it the GEMM's
    parts make, when given (``conv.conv2d_forward``)."""
    N, F = x.shape[0], w.shape[0]
    xs, wm = _strided_rows(x, g), w.reshape(F, -1)
    y = np.empty((N, F, g.oh, g.ow), np.result_type(x.dtype, w.dtype))
    rows = y.reshape(N, F, g.oh * g.ow)

    def one(n: int) -> None:
        post = None if epilogue is None else \
            (lambda block, r, c: epilogue(block, (n, r, c)))
        _mm_into(mm, wm, xs[n], rows[n], post)
    threads.parallel(one, N)
    return y


def pointwise_dx(dy: np.ndarray, w: np.ndarray, g: Any, mm: Callable) -> np.ndarray:
    """dX[n] = W^T dY[n], scattered back to the strided positions."""
    N, F = dy.shape[:2]
    wt, C = w.reshape(F, -1).T, w.shape[1]
    dyr = np.ascontiguousarray(dy).reshape(N, F, g.oh * g.ow)
    if (g.sh, g.sw) == (1, 1):
        dx = np.empty((N, C, g.H * g.W), np.result_type(dy.dtype, w.dtype))
        threads.parallel(lambda n: _mm_into(mm, wt, dyr[n], dx[n]), N)
        return dx.reshape(N, C, g.H, g.W)
    dx = np.zeros((N, C, g.H, g.W), dy.dtype)

    def one(n: int) -> None:
        dx[n, :, ::g.sh, ::g.sw][:, :g.oh, :g.ow] = mm(wt, dyr[n]).reshape(C, g.oh, g.ow)
    threads.parallel(one, N)
    return dx


def pointwise_dw(x: np.ndarray, dy: np.ndarray, g: Any, w_shape: Sequence[int],
                 mm: Callable) -> np.ndarray:
    """dW = sum_n dY[n] X[n]^T, the images' products computed in parallel and added in
    batch order."""
    N, F = dy.shape[:2]
    xs = _strided_rows(x, g)
    dyr = np.ascontiguousarray(dy).reshape(N, F, g.oh * g.ow)
    acc: list = []

    def add(n: int, part: np.ndarray) -> None:
        if acc:
            acc[0] += part
        else:
            acc.append(part)
    threads.parallel(lambda n: mm(dyr[n], xs[n].T), N, add)
    return acc[0].reshape(w_shape)


# -- stride 1 on large maps: a GEMM per tap -----------------------------------------------------
# With the padded map of each channel laid out flat (rows Wp wide), tap (i, j) of every output
# pixel p = y*Wp + x reads input p + i*dh*Wp + j*dw: one contiguous slice of the flat map per
# tap, so Y = sum_ij W_ij [F, C] @ Xflat[:, shifted] on an output grid Wp wide (its last
# (kw-1)*dw columns dropped). im2col writes and reads kh*kw copies of the input and Winograd
# four of its transformed tiles: on one image of a few hundred thousand pixels that traffic
# leaves the cache, and the GEMMs of few channels (K = C per tile position) run far below
# BLAS's speed. Strip by strip of ``_TAPS_ROWS`` output rows, a strip's canvas, its products
# and its accumulator stay in a core's cache. Measured (two threads, one image, ms, against
# the Winograd kernel it replaces): PaddleOCR's detector neck 96 -> 24 channels at 160x160
# 9.5 against 20.9, 24 -> 96 at 160x160 10.5 / 27.8, 96 -> 24 at 320x320 42 / 101, 16 -> 16
# at 320x320 7.5 / 25.5, 48 -> 48 at 160x160 at batch 2 18 / 29. With more channels on both
# sides, smaller maps gain little or lose (Winograd's GEMMs do 4/9 of the taps' work): 96 ->
# 96 at 80x80 0.95-1.03x, 64 -> 64 at 56x56 0.9x at batch 1 and 1.07-1.23x at batch 2 and 8,
# 128 -> 128 at 28x28 1.03-1.27x, hence ``_TAPS_MIN_PIXELS``; with 32 channels or fewer on
# one side they still gain from 56x56 (``_TAPS_THIN_PIXELS``): 96 -> 24 at 80x80 0.48x (batch
# 8: 0.67x), at 56x56 0.59x (0.77x), 32 -> 32 at 56x56 0.76x (0.93x), 24 -> 96 at 56x56 0.84x
# (0.92x) -- and at 40x40 and batch 8 no longer (32 -> 32 1.03x).
_TAPS_MIN_PIXELS = 1 << 14      # output pixels per image (128x128) from which the taps run
_TAPS_THIN_PIXELS = 56 * 56     # ... and from which they run when either side has few channels
_TAPS_THIN = 32                 # few channels: Winograd's transforms, C + F per pixel, weigh
                                # the most against its GEMMs' C * F
_TAPS_MIN_CHANNELS = 16         # input channels (each tap's GEMM depth) from which they run
_TAPS_ROWS = 16                 # output rows per strip (a [96, 18, 162] canvas: 1.1 MB)


def use_taps(g: Any, C: int, F: int, dtype: Any) -> bool:
    """Whether ``taps_fwd`` runs a forward of ``C`` input and ``F`` output channels: groups
    1, stride 1, a filter of more than one tap, a canvas of exactly the output size plus the
    filter's reach (not a transposed convolution's larger one), float32 / float64, at least
    ``_TAPS_MIN_CHANNELS`` input channels, and per image ``_TAPS_MIN_PIXELS`` output pixels,
    or ``_TAPS_THIN_PIXELS`` when C or F is at most ``_TAPS_THIN`` (a choice by the shapes
    of one image: the same bits whatever the batch and the thread count)."""
    pixels = g.oh * g.ow
    return (g.groups == 1 and (g.sh, g.sw) == (1, 1) and g.kh * g.kw > 1
            and g.Hp == g.oh + (g.kh - 1) * g.dh and g.Wp == g.ow + (g.kw - 1) * g.dw
            and C >= _TAPS_MIN_CHANNELS
            and (pixels >= _TAPS_MIN_PIXELS
                 or pixels >= _TAPS_THIN_PIXELS and min(C, F) <= _TAPS_THIN)
            and np.dtype(dtype) in (np.float32, np.float64))


def taps_fwd(x: np.ndarray, w: np.ndarray, g: Any,
             epilogue: Optional[Epilogue] = None) -> np.ndarray:
    """Y[n, :, y, x] = sum_{i,j} W[:, :, i, j] @ Xpad[n, :, y + i*dh, x + j*dw] (stride 1,
    groups 1; see ``use_taps``) -> [N, F, oh, ow], the taps added in row-major order. The
    strips of ``_TAPS_ROWS`` output rows of every image are the items the threads share; each
    strip's ``epilogue(Y3[where], where)``, where = (n, all filters, its pixels), runs in
    the strip's thread as soon as the strip is made (``conv.conv2d_forward``)."""
    N, C = x.shape[:2]
    F = w.shape[0]
    Wp, reach = g.Wp, (g.kh - 1) * g.dh
    wt = np.ascontiguousarray(w.transpose(2, 3, 0, 1))        # [kh, kw, F, C]
    y = np.empty((N, F, g.oh, g.ow), np.result_type(x.dtype, w.dtype))
    y3 = y.reshape(N, F, g.oh * g.ow)
    strips = [(n, h0, min(g.oh, h0 + _TAPS_ROWS)) for n in range(N)
              for h0 in range(0, g.oh, _TAPS_ROWS)]

    def strip(k: int) -> None:
        n, h0, h1 = strips[k]
        rows, L = h1 - h0 + reach, (h1 - h0) * Wp
        # the strip's padded rows h0 .. h1 - 1 + reach, flat, and the (kw-1)*dw zeros the
        # last row's last taps read past its end
        flat = np.zeros((C, rows * Wp + (g.kw - 1) * g.dw), x.dtype)
        a0, a1 = max(h0 - g.pt, 0), min(h0 + rows - g.pt, g.H)
        if a1 > a0:
            canvas = flat[:, :rows * Wp].reshape(C, rows, Wp)
            canvas[:, a0 + g.pt - h0:a1 + g.pt - h0, g.pl:g.pl + g.W] = x[n, :, a0:a1]
        acc = np.empty((F, L), y.dtype)
        tmp = np.empty_like(acc)
        for i in range(g.kh):
            for j in range(g.kw):
                off = i * g.dh * Wp + j * g.dw
                if i == 0 and j == 0:
                    np.matmul(wt[0, 0], flat[:, off:off + L], out=acc)
                else:
                    np.matmul(wt[i, j], flat[:, off:off + L], out=tmp)
                    acc += tmp
        y[n, :, h0:h1] = acc.reshape(F, h1 - h0, Wp)[:, :, :g.ow]
        if epilogue is not None:            # (the strip is still in cache)
            where = (n, _ALL, slice(h0 * g.ow, h1 * g.ow))
            epilogue(y3[where], where)
    threads.parallel(strip, len(strips))
    return y
