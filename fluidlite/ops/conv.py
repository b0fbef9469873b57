"""2-D convolution: ``conv2d``, ``depthwise_conv2d``, ``conv2d_transpose`` and
``depthwise_conv2d_transpose`` (NCHW or NHWC).

All three are built from three routines over one ``_Geom``etry (kernel, strides, paddings,
dilations, groups):

* ``_conv_fwd``   Y = W (*) X: an im2col copy made through ``as_strided`` plus ONE GEMM;
* ``_conv_dx``    dX from dY: one GEMM, then col2im as kh*kw strided adds (never per pixel);
* ``_conv_dw``    dW from X and dY: the same im2col copy plus one GEMM.

``conv2d_transpose`` is the adjoint of ``conv2d``: its forward is ``_conv_dx`` and its input
gradient is ``_conv_fwd``. ``conv2d`` runs the three over blocks of images whose columns fit
the cache (``_batch_blocks``); the filter gradient sums the blocks' products in batch order.

Three shapes skip im2col (``_kind``): depthwise convolutions (groups == input channels, any
channel multiplier) run as kh*kw strided multiply-adds over blocks of feature maps, unpadded
1x1 convolutions with groups 1 as one GEMM per image on the NCHW arrays (both in
``_conv_kernels.py``), and 3x3 stride-1 convolutions with at least 16 input and output
channels as Winograd F(2x2, 3x3) (``_winograd.py``: 16 GEMMs of 4/9 the multiply-adds).

Internally everything is channel-major so that the GEMMs see plain 2-D matrices: the columns
are ``[C*kh*kw, M]`` with M ordered (oh, ow, N) — batch last, so im2col / col2im copy runs of
ow*N elements — for narrow outputs of enough images, and (N, oh, ow) otherwise (see
``_batch_last``).

The grad kernels return a lazy mapping: the executor reads only the gradient slots the program
binds, so a gradient nobody asked for (the image input of the first conv) is never computed.
"""
from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import (AbstractSet, Any, Callable, Dict, Iterator, List, NamedTuple, Optional,
                    Sequence, Tuple)

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ..core import threads
from ..core.registry import Binding, OpDef, VarSpec, get_op_def, register
from . import _conv_kernels as K
from . import _winograd as WG
from ._conv_last import (channels_last_kind, conv_last_fwd, gemm_rows, last_filter,
                         last_filter_shape, separable_fwd)
from .linalg import _gemm, _mm  # (_mm: float16 products in float32; no float16 BLAS)

__all__ = ["LazyOutputs", "band_filter", "band_filter_shape", "c_div", "channels_last_filter",
           "channels_last_filter_shape", "channels_last_kernel", "conv2d_forward",
           "conv_out_size", "normalize_paddings", "separable_forward"]

# bytes of float32 columns an im2col block may take (``_batch_blocks``): about what stays in the
# last-level cache next to the GEMM's own working set
_COLS_BUDGET = 6 << 20
_ALL = slice(None)
_EXTRA = {"use_cudnn": False, "use_mkldnn": False, "use_quantizer": False, "fuse_relu": False,
          "fuse_residual_connection": False, "fuse_relu_before_depthwise_conv": False,
          "workspace_size_MB": 4096, "exhaustive_search": False, "force_fp32_output": False}


class LazyOutputs(Mapping):
    """An op result whose slots are computed on first access (see module docstring)."""

    def __init__(self, thunks: Dict[str, Callable[[], np.ndarray]]) -> None:
        self._thunks, self._done = thunks, {}

    def __getitem__(self, key: str) -> np.ndarray:
        if key not in self._done:
            self._done[key] = self._thunks[key]()
        return self._done[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._thunks)

    def __len__(self) -> int:
        return len(self._thunks)


# -- geometry -----------------------------------------------------------------------------------
def normalize_paddings(paddings: Sequence[int], what: str = "paddings") -> List[int]:
    """fluid paddings -> ``[top, bottom, left, right]`` (2 values mean symmetric)."""
    p = [int(v) for v in paddings]
    if len(p) == 2:
        return [p[0], p[0], p[1], p[1]]
    if len(p) == 4:
        return p
    raise ValueError(f"{what} must have 2 ([pad_h, pad_w]) or 4 ([top, bottom, left, right]) "
                     f"values, got {list(paddings)}")


def c_div(a: int, b: int) -> int:
    """``a / b`` as C++ divides ints: truncated toward zero (Python's ``//`` floors). Paddle's
    output-size arithmetic is C++ int division, so ``(1 - 2) / 2 + 1`` is 1 there, not 0."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def conv_out_size(size: int, k: int, pad_total: int, stride: int, dilation: int) -> int:
    """Output length of a convolution along one axis, fluid's ``ConvOutputSize``:
    ``(size + pad_total - (dilation * (k - 1) + 1)) / stride + 1`` in C++ int arithmetic
    (truncated toward zero; -1 stays unknown)."""
    if size < 0:
        return -1
    return c_div(size + pad_total - (dilation * (k - 1) + 1), stride) + 1


def resolve_padding(in_hw: Sequence[int], k_hw: Sequence[int], strides: Sequence[int],
                    paddings: Sequence[int], dilations: Sequence[int],
                    algorithm: str) -> Tuple[List[int], List[int]]:
    """Apply ``padding_algorithm`` (EXPLICIT / SAME / VALID) as fluid does: SAME pads so that
    ``out = ceil(in / stride)`` (extra padding at the end) and uses dilation 1."""
    pads, dil = normalize_paddings(paddings), [int(d) for d in dilations]
    if algorithm == "SAME":
        for i in range(2):
            if in_hw[i] < 0:
                continue
            out = (in_hw[i] + strides[i] - 1) // strides[i]
            total = max((out - 1) * strides[i] + k_hw[i] - in_hw[i], 0)
            pads[2 * i], pads[2 * i + 1] = total // 2, total - total // 2
            dil[i] = 1
    elif algorithm == "VALID":
        pads = [0, 0, 0, 0]
    elif algorithm != "EXPLICIT":
        raise ValueError(f"padding_algorithm must be 'EXPLICIT', 'SAME' or 'VALID', got "
                         f"{algorithm!r}")
    return pads, dil


class _Geom(NamedTuple):
    kh: int
    kw: int
    sh: int
    sw: int
    dh: int
    dw: int
    pt: int
    pb: int
    pl: int
    pr: int
    H: int          # unpadded input size
    W: int
    oh: int
    ow: int
    groups: int

    @property
    def Hp(self) -> int:
        return self.H + self.pt + self.pb

    @property
    def Wp(self) -> int:
        return self.W + self.pl + self.pr


def _geom(in_hw: Sequence[int], k_hw: Sequence[int], strides: Sequence[int],
          paddings: Sequence[int], dilations: Sequence[int], algorithm: str,
          groups: int) -> _Geom:
    """The geometry of a 2-D convolution (memoised: a compiled plan asks for the same few
    dozen every run, and working one out costs several microseconds of Python)."""
    return _geom_of(tuple(map(int, in_hw)), tuple(map(int, k_hw)), tuple(map(int, strides)),
                    tuple(paddings), tuple(dilations), algorithm, int(groups))


@functools.lru_cache(maxsize=4096)
def _geom_of(in_hw: Tuple[int, ...], k_hw: Tuple[int, ...], strides: Tuple[int, ...],
             paddings: Tuple[int, ...], dilations: Tuple[int, ...], algorithm: str,
             groups: int) -> _Geom:
    pads, dil = resolve_padding(in_hw, k_hw, strides, paddings, dilations, algorithm)
    H, W = in_hw
    oh = conv_out_size(H, k_hw[0], pads[0] + pads[1], strides[0], dil[0])
    ow = conv_out_size(W, k_hw[1], pads[2] + pads[3], strides[1], dil[1])
    if oh <= 0 or ow <= 0:
        raise ValueError(f"the output of the convolution would be empty: input {H}x{W}, kernel "
                         f"{k_hw[0]}x{k_hw[1]}, paddings {pads}, strides {list(strides)}, "
                         f"dilations {dil}")
    # with C++'s truncating division the last window may reach past the bottom/right padding
    # (input 2, kernel 3, stride 2: one output); fluid's im2col reads zeros there, so the
    # canvas grows by that many zero rows/cols (sliced away again by the input gradient)
    for i, (n, o) in enumerate(((H, oh), (W, ow))):
        reach = (o - 1) * strides[i] + dil[i] * (k_hw[i] - 1) + 1
        pads[2 * i + 1] += max(reach - (n + pads[2 * i] + pads[2 * i + 1]), 0)
    return _Geom(k_hw[0], k_hw[1], strides[0], strides[1], dil[0], dil[1], *pads, H, W, oh, ow,
                 groups)


# -- the three routines (NCHW) ------------------------------------------------------------------
# images a block needs before a strided convolution's columns go batch-last: its copies then
# move runs of only N elements (the windows step over the batch-last canvas by sw*N). Measured
# (one thread, 3x3 stride 2): 2 images 1.45-2.5x slower than batch-second, 4 1.2-1.5x, 8 even,
# 16 0.86-1.0x.
_STRIDED_BL_MIN = 12


def _batch_last(g: _Geom, n: int) -> bool:
    """Column layout: batch-last ``[C*kh*kw, oh*ow*N]`` (copies move runs of ow*N) when output
    rows are short, else batch-second ``[C*kh*kw, N*oh*ow]`` (runs of ow, and only cheap
    transposes of whole feature maps). Strided windows need ``_STRIDED_BL_MIN`` images. A 1x1
    filter's columns are the maps themselves: batch-second copies them whole (a 7x7 map's 49
    pixels at a time, where batch-last gathers every pixel of the batch one by one: 1.35x
    the time of one GEMM over MobileNetV2's [8, 960, 7, 7] maps)."""
    return g.kh * g.kw > 1 and g.ow < 16 and n >= (_STRIDED_BL_MIN if g.sw > 1 else 2)


def _phases(g: _Geom) -> Tuple[int, int]:
    """The phases ``_padded`` splits the padded rows and columns into: the strides, for
    undilated strided windows of long output rows and several taps a phase class, else
    (1, 1). Measured at batch 1 (AMD EPYC, NumPy 2.4, ms, im2col without / with phases):
    3 channels 224x224, 7x7 stride 2 0.84 / 0.45, 5x5 0.63 / 0.43, 3x3 0.33 / 0.33; but
    64 channels 112x112 3x3 stride 2 0.87 / 1.30, 16 channels 56x56 7x7 0.30 / 0.45 (short
    runs: the phase copies cost more than the strided gather they save)."""
    if (g.dh, g.dw) != (1, 1) or (g.sh, g.sw) == (1, 1) or g.ow < _PHASE_MIN_WIDTH \
            or g.kh * g.kw < _PHASE_MIN_TAPS * g.sh * g.sw:
        return 1, 1
    return g.sh, g.sw


_PHASE_MIN_WIDTH = 64       # output columns from which im2col reads a phase-split canvas
_PHASE_MIN_TAPS = 4         # ... and taps per phase class, on average


def _padded(x: np.ndarray, g: _Geom, bl: bool) -> np.ndarray:
    """``x`` [N,C,H,W] zero-padded, channel-major, its rows and columns split by phase (P, Q
    = ``_phases``: padded row P*r + p is row r of phase p): [C, P, Q, Hq, Wq, N] (bl) or
    [C, N, P, Q, Hq, Wq]. A window of stride P then steps one row of its phase, so the
    im2col copies move runs of ow contiguous elements, not every sw-th one (the 7x7 stride-2
    stem of ResNet at batch 1: 1.1 -> 0.4 ms)."""
    N, C = x.shape[:2]
    P, Q = _phases(g)
    shape = (-(-g.Hp // P), -(-g.Wp // Q))
    xt = x.transpose(1, 2, 3, 0) if bl else x.transpose(1, 0, 2, 3)   # [C,H,W,N] / [C,N,H,W]
    if (g.pt, g.pb, g.pl, g.pr, P, Q) == (0, 0, 0, 0, 1, 1):
        return K.copy_parts(np.empty(xt.shape, x.dtype), xt).reshape(
            (C, 1, 1) + xt.shape[1:] if bl else (C, N, 1, 1) + xt.shape[2:])
    buf = np.zeros((C, P, Q) + shape + (N,) if bl else (C, N, P, Q) + shape, x.dtype)
    for p in range(P):
        r0 = (p - g.pt) % P                     # first input row of phase p
        rows = slice(r0, g.H, P)
        k0 = (r0 + g.pt) // P                   # its row in the phase
        nr = len(range(r0, g.H, P))
        for q in range(Q):
            c0 = (q - g.pl) % Q
            cols = slice(c0, g.W, Q)
            l0 = (c0 + g.pl) // Q
            nc = len(range(c0, g.W, Q))
            if bl:
                K.copy_parts(buf[:, p, q, k0:k0 + nr, l0:l0 + nc], xt[:, rows, cols])
            else:
                K.copy_parts(buf[:, :, p, q, k0:k0 + nr, l0:l0 + nc], xt[:, :, rows, cols])
    return buf


def _im2col(x: np.ndarray, g: _Geom, bl: bool) -> np.ndarray:
    """Columns [C*kh*kw, M] of ``x`` [N,C,H,W]: one strided view of the phase-split padded
    input per phase class of the taps (taps i = i0 (mod P), j = j0 (mod Q)), several copied
    in parallel parts of the output rows (a few channels: the stem's three), one in parts
    of the channels."""
    C = x.shape[1]
    buf = _padded(x, g, bl)
    P, Q = _phases(g)
    n = buf.shape[-1] if bl else buf.shape[1]
    cols = np.empty((C, g.kh, g.kw) + ((g.oh, g.ow, n) if bl else (n, g.oh, g.ow)), x.dtype)
    copies = []
    for i0 in range(min(P, g.kh)):
        for j0 in range(min(Q, g.kw)):
            shape = (C, len(range(i0, g.kh, P)), len(range(j0, g.kw, Q)))
            # tap i0 + P*a of phase i0 reads its row oh + a*dh (P > 1 only when dh == 1)
            if bl:
                base = buf[:, i0, j0]
                sC, sH, sW, sN = base.strides
                view = as_strided(base, shape + (g.oh, g.ow, n),
                                  (sC, g.dh * sH, g.dw * sW, g.sh // P * sH, g.sw // Q * sW, sN),
                                  writeable=False)
            else:
                base = buf[:, :, i0, j0]
                sC, sN, sH, sW = base.strides
                view = as_strided(base, shape + (n, g.oh, g.ow),
                                  (sC, g.dh * sH, g.dw * sW, sN, g.sh // P * sH, g.sw // Q * sW),
                                  writeable=False)
            copies.append((cols[:, i0::P, j0::Q], view))
    if len(copies) == 1:            # (one class: one copy, in parts of whole channels)
        return K.copy_parts(cols, copies[0][1]).reshape(C * g.kh * g.kw, -1)
    axis = (_ALL,) * (3 if bl else 4)

    def part(lo: int, hi: int) -> None:        # output rows lo:hi
        rows = axis + (slice(lo, hi),)
        for dst, src in copies:
            np.copyto(dst[rows], src[rows])
    K.run_parts(part, g.oh, cols.size)
    return cols.reshape(C * g.kh * g.kw, -1)


def _dy_rows(dy: np.ndarray, bl: bool) -> np.ndarray:
    """dY [N,F,oh,ow] -> [F, M] in the column order of ``_im2col``."""
    t = dy.transpose((1, 2, 3, 0) if bl else (1, 0, 2, 3))
    return K.copy_parts(np.empty(t.shape, dy.dtype), t).reshape(dy.shape[1], -1)


def _to_batch_major(t: np.ndarray, out: Optional[np.ndarray] = None) -> np.ndarray:
    """A contiguous copy of the view ``t`` (the final NCHW layout), into ``out`` if given."""
    return K.copy_parts(np.empty(t.shape, t.dtype) if out is None else out, t)


def _from_rows(y: np.ndarray, g: _Geom, n: int, bl: bool,
               out: Optional[np.ndarray] = None) -> np.ndarray:
    """[F, M] -> [N, F, oh, ow] (into ``out`` if given)."""
    if bl:
        return _to_batch_major(y.reshape(-1, g.oh, g.ow, n).transpose(3, 0, 1, 2), out)
    return _to_batch_major(y.reshape(-1, n, g.oh, g.ow).transpose(1, 0, 2, 3), out)


def _batch_blocks(C: int, g: _Geom, N: int) -> List[Tuple[int, int]]:
    """The images the im2col routines take at a time: as many as keep the columns of a block
    (C*kh*kw x b*oh*ow) within ``_COLS_BUDGET`` bytes of float32, at least one -- so im2col,
    the GEMM and col2im work on cache-resident columns instead of streaming a batch-sized
    matrix through memory (25 % off a 64-channel 3x3 layer on 32x32 maps, batch 32)."""
    per_image = C * g.kh * g.kw * g.oh * g.ow * 4
    # more than one block: an even count of equal ones (the threads share them)
    return threads.even_ranges(N, _COLS_BUDGET // max(per_image, 1), least=1)


def _grouped(a: np.ndarray, groups: int) -> np.ndarray:
    return a.reshape(groups, a.shape[0] // groups, -1)


def _kind(N: int, C: int, w_shape: Sequence[int], g: _Geom, dtype: np.dtype) -> str:
    """Which kernels run a convolution of N images with C input channels: "depthwise" /
    "pointwise" (``_conv_kernels``), "winograd" (``_winograd``) or "" (im2col + GEMM here)."""
    if K.use_depthwise((0, C), w_shape, g.groups):
        return "depthwise"
    if K.use_pointwise(g, w_shape, N):
        return "pointwise"
    return "winograd" if WG.use_winograd(g, N, C, w_shape[0], dtype) else ""


def _conv_fwd(x: np.ndarray, w: np.ndarray, g: _Geom, tiles: Optional[np.ndarray] = None,
              epilogue: Optional[Callable[[np.ndarray, tuple], Any]] = None,
              band: Optional[np.ndarray] = None) -> np.ndarray:
    """Y[n,f] = sum_c W[f,c] (*) X[n,c] with the geometry ``g``; returns [N,F,oh,ow]
    (``tiles``: ``WG.filter_tiles(w)`` computed ahead, used when the Winograd kernel runs;
    ``band``: ``K.band_filter(w, g)`` computed ahead, used when the banded depthwise kernel
    runs; ``epilogue``: see ``conv2d_forward``)."""
    kind = _kind(x.shape[0], x.shape[1], w.shape, g, x.dtype)
    if kind in ("winograd", "") and K.use_taps(g, x.shape[1], w.shape[0], x.dtype):
        # (a forward only: the gradients keep ``kind``'s kernels, and training's forward,
        # which saves Winograd tiles for them, keeps Winograd -- ``Conv2D.forward_saving``)
        return K.taps_fwd(x, w, g, epilogue)
    if kind == "pointwise":
        return K.pointwise_fwd(x, w, g, _mm, epilogue)
    if kind == "depthwise":
        return K.depthwise_fwd(x, w, g, band, epilogue)
    if kind == "winograd":
        return WG.winograd_fwd(x, w, g, tiles, epilogue)
    blocks = _batch_blocks(x.shape[1], g, x.shape[0])
    out = np.empty((x.shape[0], w.shape[0], g.oh, g.ow), np.result_type(x.dtype, w.dtype))
    # (a block of images whose epilogue runs in the block's item, while it is in cache)
    threads.parallel(lambda i: _conv_fwd_cols(x, w, g, out, blocks[i], epilogue), len(blocks))
    return out


def _conv_fwd_cols(x: np.ndarray, w: np.ndarray, g: _Geom, out: np.ndarray,
                   images: Tuple[int, int],
                   epilogue: Optional[Callable[[np.ndarray, tuple], Any]] = None) -> None:
    """``_conv_fwd`` of the images lo:hi = ``images`` of ``x`` by im2col and one GEMM, into
    ``out[lo:hi]``, then ``epilogue`` on them (``where`` = (images,)). One image with one
    group: the GEMM's [F, oh*ow] product is its NCHW output already, so it is made in place
    (no reordering copy) and the epilogue runs on the GEMM's parts (``where`` = (image,
    channels, pixels)), in parallel, each while its block is in cache."""
    lo, hi = images
    N, F = hi - lo, w.shape[0]
    bl = _batch_last(g, N)
    cols = _im2col(x[lo:hi], g, bl)
    if N == 1 and g.groups == 1 and w.dtype == cols.dtype == out.dtype != np.float16:
        post = None
        if epilogue is not None:
            def post(block: np.ndarray, rows: slice, pixels: slice) -> None:
                epilogue(block[None], (slice(lo, hi), rows, pixels))
        _gemm(w.reshape(F, -1), cols, out[lo].reshape(F, -1), post)
        return
    if g.groups == 1:
        y = _mm(w.reshape(F, -1), cols)
    else:
        y = _mm(_grouped(w, g.groups), _grouped(cols, g.groups))
    _from_rows(y, g, N, bl, out[lo:hi])
    if epilogue is not None:
        where = (slice(lo, hi),)
        epilogue(out[where].reshape(N, F, -1), where)


def _conv_dx(dy_rows: np.ndarray, w: np.ndarray, g: _Geom, N: int,
             out: Optional[np.ndarray] = None) -> np.ndarray:
    """dX [N,C,H,W] from dY rows [F, M]: one GEMM, then col2im (kh*kw strided adds); into
    ``out`` if given."""
    bl = _batch_last(g, N)
    C = w.shape[1] * g.groups
    if g.groups == 1:
        dcols = _mm(w.reshape(w.shape[0], -1).T, dy_rows)
    else:
        dcols = _mm(_grouped(w, g.groups).transpose(0, 2, 1), _grouped(dy_rows, g.groups))
    block = (g.oh, g.ow, N) if bl else (N, g.oh, g.ow)
    dcols = dcols.reshape((C, g.kh, g.kw) + block)
    buf = np.zeros((C, g.Hp, g.Wp, N) if bl else (C, N, g.Hp, g.Wp), dy_rows.dtype)
    planes = buf if bl else buf.transpose(0, 2, 3, 1)          # [C, Hp, Wp, N] either way
    cells = dcols if bl else dcols.transpose(0, 1, 2, 4, 5, 3)  # [C, kh, kw, oh, ow, N]

    def col2im(lo: int, hi: int) -> None:     # channels lo:hi (the parts never overlap)
        for i in range(g.kh):
            for j in range(g.kw):
                hs, ws = i * g.dh, j * g.dw
                planes[lo:hi, hs:hs + g.sh * (g.oh - 1) + 1:g.sh,
                       ws:ws + g.sw * (g.ow - 1) + 1:g.sw] += cells[lo:hi, i, j]
    K.run_parts(col2im, C, dcols.size)
    dx = planes[:, g.pt:g.pt + g.H, g.pl:g.pl + g.W]
    return _to_batch_major(dx.transpose(3, 0, 1, 2), out)


def _conv_dw(x: np.ndarray, dy_rows: np.ndarray, g: _Geom, w_shape: Sequence[int]) -> np.ndarray:
    """dW [F, C/groups, kh, kw] = dY rows @ im2col(X)^T (per group)."""
    cols = _im2col(x, g, _batch_last(g, x.shape[0]))
    if g.groups == 1:
        dw = _mm(dy_rows, cols.T)
    else:
        dw = _mm(_grouped(dy_rows, g.groups), _grouped(cols, g.groups).transpose(0, 2, 1))
    return dw.reshape(w_shape)


def _conv_dx_blocks(dy: np.ndarray, w: np.ndarray, g: _Geom) -> np.ndarray:
    """``_conv_dx`` over the batch blocks of ``_batch_blocks`` (each block's columns stay in
    cache; the blocks in parallel); dX of an image depends on that image alone."""
    C = w.shape[1] * g.groups
    blocks = _batch_blocks(C, g, dy.shape[0])
    if len(blocks) == 1:
        return _conv_dx(_dy_rows(dy, _batch_last(g, dy.shape[0])), w, g, dy.shape[0])
    dx = np.empty((dy.shape[0], C, g.H, g.W), np.result_type(dy.dtype, w.dtype))

    def one(i: int) -> None:
        lo, hi = blocks[i]
        d = dy[lo:hi]
        _conv_dx(_dy_rows(d, _batch_last(g, d.shape[0])), w, g, d.shape[0], dx[lo:hi])
    threads.parallel(one, len(blocks))
    return dx


def _conv_dw_blocks(x: np.ndarray, dy: np.ndarray, g: _Geom,
                    w_shape: Sequence[int]) -> np.ndarray:
    """``_conv_dw`` over the batch blocks of ``_batch_blocks`` (in parallel), the blocks' dW
    summed in batch order (fluid's kernel sums per image in batch order too)."""
    blocks = _batch_blocks(x.shape[1], g, x.shape[0])
    acc: List[np.ndarray] = []

    def one(i: int) -> np.ndarray:
        lo, hi = blocks[i]
        d = dy[lo:hi]
        return _conv_dw(x[lo:hi], _dy_rows(d, _batch_last(g, d.shape[0])), g, w_shape)

    def add(i: int, part: np.ndarray) -> None:
        if acc:
            acc[0] += part
        else:
            acc.append(part)
    threads.parallel(one, len(blocks), add)
    return acc[0]


def _conv_dx_nchw(dy: np.ndarray, w: np.ndarray, g: _Geom) -> np.ndarray:
    """dX [N,C,H,W] from dY [N,F,oh,ow] (the kernels of ``_kind``)."""
    C = w.shape[1] * g.groups
    kind = _kind(dy.shape[0], C, w.shape, g, dy.dtype)
    if kind == "depthwise":
        return K.depthwise_dx(dy, w, g, C)
    if kind == "winograd":
        return WG.winograd_dx(dy, w, g)
    if kind == "pointwise":
        return K.pointwise_dx(dy, w, g, _mm)
    return _conv_dx_blocks(dy, w, g)


def _conv_dw_nchw(x: np.ndarray, dy: np.ndarray, g: _Geom,
                  w_shape: Sequence[int]) -> np.ndarray:
    """dW from X [N,C,H,W] and dY [N,F,oh,ow] (the kernels of ``_kind``)."""
    kind = _kind(x.shape[0], x.shape[1], w_shape, g, x.dtype)
    if kind == "depthwise":
        return K.depthwise_dw(x, dy, g, w_shape)
    if kind == "winograd":
        return WG.winograd_dw(x, dy, g, w_shape)
    if kind == "pointwise":
        return K.pointwise_dw(x, dy, g, w_shape, _mm)
    return _conv_dw_blocks(x, dy, g, w_shape)


# -- layout helpers -----------------------------------------------------------------------------
def _channels_last(data_format: str) -> bool:
    if data_format in ("NCHW", "AnyLayout"):
        return False
    if data_format == "NHWC":
        return True
    raise ValueError(f"data_format must be 'NCHW' or 'NHWC', got {data_format!r}")


def _to_nchw(x: np.ndarray, last: bool) -> np.ndarray:
    return x.transpose(0, 3, 1, 2) if last else x


def _from_nchw(x: np.ndarray, last: bool) -> np.ndarray:
    return np.ascontiguousarray(x.transpose(0, 2, 3, 1)) if last else x


def _check_conv_specs(op: str, Input: VarSpec, Filter: VarSpec, groups: int, last: bool,
                      transpose: bool, dims: int = 2) -> Tuple[int, int]:
    """Validate ranks and channel counts of a ``dims``-D convolution (2: conv2d, 3: conv3d and
    their transposes); return (N, C)."""
    rank = dims + 2
    layout = ("NHWC" if last else "NCHW") if dims == 2 else ("NDHWC" if last else "NCDHW")
    kernel = ", ".join(("kd", "kh", "kw")[3 - dims:])
    if Input.ndim != rank:
        raise ValueError(f"{op}: Input must be {rank}-D ({layout}), got shape "
                         f"{list(Input.shape)}")
    if Filter.ndim != rank:
        raise ValueError(f"{op}: Filter must be {rank}-D, got shape {list(Filter.shape)}")
    if groups < 1:
        raise ValueError(f"{op}: groups must be >= 1, got {groups}")
    C = Input.shape[rank - 1] if last else Input.shape[1]
    if transpose:
        if C >= 0 and C != Filter.shape[0]:
            raise ValueError(f"{op}: Input has {C} channels but Filter {list(Filter.shape)} "
                             f"expects {Filter.shape[0]} (Filter is [C_in, C_out/groups, "
                             f"{kernel}])")
        if Filter.shape[0] % groups:
            raise ValueError(f"{op}: input channels {Filter.shape[0]} not divisible by groups "
                             f"{groups}")
    else:
        if C >= 0 and C != Filter.shape[1] * groups:
            raise ValueError(f"{op}: Input has {C} channels but Filter {list(Filter.shape)} with "
                             f"groups={groups} expects {Filter.shape[1] * groups} (Filter is "
                             f"[C_out, C_in/groups, {kernel}])")
        if Filter.shape[0] % groups:
            raise ValueError(f"{op}: number of filters {Filter.shape[0]} not divisible by groups "
                             f"{groups}")
    return Input.shape[0], C


def _pair(v: Sequence[int], name: str, op: str) -> List[int]:
    v = [int(a) for a in v]
    if len(v) != 2:
        raise ValueError(f"{op}: {name} must have 2 values, got {v}")
    if min(v) < 1:      # strides and dilations: 0 would divide by zero, < 0 walks backwards
        raise ValueError(f"{op}: every value of {name} must be >= 1, got {v}")
    return v


# -- conv2d -------------------------------------------------------------------------------------
class _ConvBase(OpDef):
    inputs, outputs = ("Input", "Filter"), ("Output",)
    extra_attrs = _EXTRA

    def make_grad(self, g, **attrs):
        g.append(self.type + "_grad",
                 {"Input": g.input("Input"), "Filter": g.input("Filter"),
                  "Output@GRAD": g.output_grad("Output")},
                 {"Input@GRAD": g.input_grad("Input"), "Filter@GRAD": g.input_grad("Filter")},
                 attrs)


def _conv_geom(x: np.ndarray, w: np.ndarray, strides, paddings, dilations, algorithm,
               groups) -> _Geom:
    return _geom(x.shape[2:], w.shape[2:], strides, paddings, dilations, algorithm, groups)


def band_filter_shape(in_hw: Sequence[int], w_shape: Sequence[int], dtype: Any,
                      strides: Any, paddings: Any, padding_algorithm: str, groups: int,
                      dilations: Any) -> Optional[Tuple[int, int, int]]:
    """The shape of ``band_filter`` for an NCHW input of spatial size ``in_hw`` and a filter of
    ``w_shape`` and ``dtype``; None when no banded depthwise kernel runs for them (not a
    depthwise filter, a map too big, another dtype, both sizes unknown). With one size
    unknown, the band that serves every value of it (``_band_geom``).

    Args:
        in_hw: the input's height and width (-1: unknown).
        w_shape: the filter's shape [C*m, 1, kh, kw].
        dtype: the filter's NumPy dtype.
        strides, paddings, padding_algorithm, groups, dilations: conv2d's attributes.

    Returns:
        (C, kh*span, m*tw), or None.

    Example:
        >>> import numpy as np
        >>> from fluidlite.ops.conv import band_filter_shape
        >>> band_filter_shape((14, 14), (8, 1, 3, 3), np.float32, [1, 1], [1, 1], "EXPLICIT",
        ...                   8, [1, 1])
        (8, 48, 14)
        >>> band_filter_shape((112, 112), (8, 1, 3, 3), np.float32, [1, 1], [1, 1],
        ...                   "EXPLICIT", 8, [1, 1]) is None
        True
    """
    g = _band_geom(in_hw, w_shape, dtype, strides, paddings, padding_algorithm, groups,
                   dilations)
    if g is None:
        return None
    return K.band_shape(g, w_shape)


def _band_geom(in_hw: Sequence[int], w_shape: Sequence[int], dtype: Any, strides: Any,
               paddings: Any, padding_algorithm: str, groups: int, dilations: Any) -> Any:
    """The geometry a band filter is laid out for, or None when no banded kernel can run.
    A free height or width stands in as 64 pixels. The band depends on the output's width
    only: a free height takes the width's band when one output row of it fits the banded
    kernel; a free width takes the band of an output one tile wide (the full-tile band: any
    width's band is its corner, ``_conv_kernels._narrowed``) when a tile row of the known
    output height fits."""
    if not K.use_depthwise((0, groups), w_shape, groups) or min(in_hw) < 0 and max(in_hw) < 0:
        return None
    try:
        g = _geom([d if d >= 0 else 64 for d in in_hw], w_shape[2:], strides, paddings,
                  dilations, padding_algorithm, groups)
    except ValueError:          # an empty output
        return None
    if in_hw[1] < 0:
        g = g._replace(ow=K._BAND_TILE)
    elif in_hw[0] < 0:
        g = g._replace(oh=1)
    return g if K.uses_band(g, dtype) else None


def band_filter(w: np.ndarray, in_hw: Sequence[int], strides: Any, paddings: Any,
                padding_algorithm: str, groups: int, dilations: Any) -> np.ndarray:
    """The banded matrices [C, K, m*tw] the depthwise kernel multiplies by (see
    ``_conv_kernels.band_filter``) for the depthwise filter ``w`` [C*m, 1, kh, kw] and an
    NCHW input of spatial size ``in_hw``: what ``conv2d_forward`` takes as ``filter_band``.

    Args:
        w: the depthwise filter [C*m, 1, kh, kw], float32 or float64.
        in_hw: the input's height and width (-1: unknown, see ``band_filter_shape``).
        strides, paddings, padding_algorithm, groups, dilations: conv2d's attributes.

    Returns:
        np.ndarray: [C, kh*span, m*tw] of ``w``'s dtype (``band_filter_shape``).

    Example:
        >>> import numpy as np
        >>> from fluidlite.ops.conv import band_filter
        >>> band_filter(np.ones((8, 1, 3, 3), np.float32), (14, 14), [1, 1], [1, 1],
        ...             "EXPLICIT", 8, [1, 1]).shape
        (8, 48, 14)

    Raises:
        ValueError: no banded kernel runs for this filter and input (``band_filter_shape``
            is None).
    """
    g = _band_geom(in_hw, w.shape, w.dtype, strides, paddings, padding_algorithm, groups,
                   dilations)
    if g is None:
        raise ValueError(f"band_filter: no banded depthwise kernel runs for the filter "
                         f"{w.dtype} {list(w.shape)} (groups {groups}) on a "
                         f"{list(in_hw)} input; it needs a depthwise float32/float64 filter "
                         f"and a small output map")
    return K.band_filter(w, g)


@register
class Conv2D(_ConvBase):
    """Output[n,f,y,x] = sum_{c,i,j} Input[n, g*C/G + c, y*sh + i*dh - pt, x*sw + j*dw - pl]
    * Filter[f,c,i,j] (zero padding; g = the group of f);  dInput, dFilter by the adjoint."""
    type = "conv2d"

    def infer(self, Input, Filter, *, strides=(1, 1), paddings=(0, 0),
              padding_algorithm="EXPLICIT", groups=1, dilations=(1, 1), data_format="NCHW"):
        last = _channels_last(data_format)
        N, _ = _check_conv_specs(self.type, Input, Filter, groups, last, False)
        strides = _pair(strides, "strides", self.type)
        dilations = _pair(dilations, "dilations", self.type)
        hw = Input.shape[1:3] if last else Input.shape[2:]
        pads, dil = resolve_padding(hw, Filter.shape[2:], strides, paddings, dilations,
                                    padding_algorithm)
        out = [conv_out_size(hw[i], Filter.shape[2 + i], pads[2 * i] + pads[2 * i + 1],
                             strides[i], dil[i]) for i in range(2)]
        if any(hw[i] >= 0 and out[i] < 1 for i in range(2)):    # -1 only when hw is unknown
            raise ValueError(f"{self.type}: output size {out} is not positive for input "
                             f"{list(Input.shape)}, filter {list(Filter.shape)}, paddings "
                             f"{pads}, strides {strides}, dilations {dil}")
        F = Filter.shape[0]
        shape = [N, out[0], out[1], F] if last else [N, F, out[0], out[1]]
        return {"Output": VarSpec(shape, Input.dtype)}

    def forward(self, Input, Filter, *, strides=[1, 1], paddings=[0, 0],
                padding_algorithm="EXPLICIT", groups=1, dilations=[1, 1], data_format="NCHW"):
        return {"Output": conv2d_forward(Input, Filter, strides, paddings, padding_algorithm,
                                         groups, dilations, data_format)}

    saves_for_grad = True

    def forward_saving(self, Input, Filter, *, strides=[1, 1], paddings=[0, 0],
                       padding_algorithm="EXPLICIT", groups=1, dilations=[1, 1],
                       data_format="NCHW"):
        """``forward``'s Output and, where the Winograd kernel runs, the transformed input
        tiles V of its blocks of images (``_winograd.winograd_fwd_tiles``; 4x the input's
        size), which the filter gradient multiplies by dY's tiles: ``backward_saved`` then
        does not transform the input again (a fifth of a 3x3 layer's gradient). Nothing is
        saved (None) for the other kernels."""
        last = _channels_last(data_format)
        x = _to_nchw(Input, last)
        g = _conv_geom(x, Filter, strides, paddings, dilations, padding_algorithm, groups)
        if _kind(x.shape[0], x.shape[1], Filter.shape, g, x.dtype) != "winograd":
            return {"Output": _from_nchw(_conv_fwd(x, Filter, g), last)}, None
        y, tiles = WG.winograd_fwd_tiles(x, Filter, g)
        return {"Output": _from_nchw(y, last)}, tiles

    def backward_saved(self, saved, Input, Filter, dOutput, *, wanted=None, **attrs):
        """conv2d_grad's gradients (of the input slots in ``wanted``; None: both), the
        filter's from the tiles ``forward_saving`` kept when they are the tiles of this
        input's blocks (the bits of transforming it again)."""
        slots = ("Input", "Filter") if wanted is None else tuple(
            s for s in ("Input", "Filter") if s in wanted)
        got = _conv2d_grads(Input, Filter, dOutput, frozenset(s + "@GRAD" for s in slots),
                           tiles=saved, **attrs)
        return {s: got[s + "@GRAD"] for s in slots}


def conv2d_forward(x: np.ndarray, w: np.ndarray, strides: Any, paddings: Any,
                   padding_algorithm: str, groups: int, dilations: Any, data_format: str,
                   filter_tiles: Optional[np.ndarray] = None,
                   epilogue: Optional[Callable[[np.ndarray, tuple], Any]] = None,
                   filter_band: Optional[np.ndarray] = None,
                   filter_last: Optional[np.ndarray] = None) -> np.ndarray:
    """conv2d's output for ``x`` (NCHW or NHWC as ``data_format``) and the filter ``w``
    [F, C/groups, kh, kw]: its pointwise, depthwise, Winograd and im2col kernels.

    Args:
        filter_tiles: ``_winograd.filter_tiles(w)`` [16, F, C] computed ahead (an inference
            program's constant filter, transformed once at load); used when the Winograd
            kernel runs, with the same result bits as transforming ``w`` here.
        filter_band: ``_conv_kernels.band_filter(w, g)`` of a depthwise filter computed ahead
            for this input size (likewise, for the banded depthwise kernel).
        filter_last: ``channels_last_filter(w, ...)`` for this NHWC input (likewise, for
            the channels-last kernels).
        epilogue: ``epilogue(block, where)``, an elementwise in-place function of the NCHW
            output seen as ``Y3 = Y.reshape(N, F, oh * ow)`` (a bias, a residual, an
            activation), where ``block`` is ``Y3[where]``, called on each block of the
            output as soon as a kernel has made it, in the thread that made it (still in
            cache: a 77 MB MobileNetV2 output is not read back from memory twice, and the
            blocks' epilogues run in parallel): the 1x1 kernel's images, or the blocks of
            their GEMMs' parts (``where`` = (n, rows, columns)); the depthwise kernels' rows
            of an image (n, channels) or blocks of channels (:, channels); the Winograd and
            im2col kernels' blocks of images (images,), im2col's GEMM parts for one image of
            one group (image, channels, pixels). The depthwise kernel of small maps that
            transposes its result at the end (rows last) calls it once on the whole output
            (``where`` = ()). An NHWC input that a
            channels-last kernel runs (``channels_last_kernel``; ``_conv_last``) calls it on
            blocks of the output seen as ``Y2 = Y.reshape(N * oh * ow, F)`` instead, ``where``
            = (rows, columns).
    """
    last = _channels_last(data_format)
    g = _conv_geom(_to_nchw(x, last), w, strides, paddings, dilations, padding_algorithm,
                   groups)
    kind = _last_kind(x.shape[3], w.shape, g, np.result_type(x, w)) if last else ""
    if kind == "im2col":
        return _conv_fwd_cols_last(x, w, g, epilogue, filter_last)
    if kind:
        return conv_last_fwd(x, w, g, kind, epilogue, filter_last)
    # (the NCHW kernels, through transposes for NHWC: the epilogue sees NCHW channels)
    return _from_nchw(_conv_fwd(_to_nchw(x, last), w, g, filter_tiles, epilogue, filter_band),
                      last)


def _last_kind(C: int, w_shape: Sequence[int], g: _Geom, dtype: Any) -> str:
    """The channels-last kernel of an NHWC forward: ``_conv_last``'s "pointwise" and
    "depthwise", "im2col" (``_conv_fwd_cols_last``) for the other groups-1 convolutions
    that the NCHW kernels would run by im2col too (not the Winograd shapes -- 3x3, stride 1,
    ``_winograd.MIN_CHANNELS`` channels -- nor ``use_taps``'), else "" (the NCHW kernels
    through transposes). Decided by the shapes of one image: never by the batch."""
    kind = channels_last_kind(C, w_shape, g, dtype)
    if kind or g.groups != 1 or np.dtype(dtype) not in (np.float32, np.float64) \
            or K.use_taps(g, C, w_shape[0], dtype):
        return kind
    winograd = (g.kh, g.kw, g.sh, g.sw, g.dh, g.dw) == (3, 3, 1, 1, 1, 1) \
        and min(C, w_shape[0]) >= WG.MIN_CHANNELS
    return "" if winograd else "im2col"


def _conv_fwd_cols_last(x: np.ndarray, w: np.ndarray, g: _Geom,
                        epilogue: Optional[Callable[[np.ndarray, tuple], Any]],
                        laid: Optional[np.ndarray]) -> np.ndarray:
    """The NHWC forward by im2col: the columns [C*kh*kw, N*oh*ow] of the input seen as NCHW
    (a view of it: the very array when it came in through a transpose) times the filter
    [C*kh*kw, F], ``cols^T @ W^T``, whose rows are already the NHWC output's pixels -- no
    transpose of the output. Blocks of images as ``_batch_blocks``."""
    N, F = x.shape[0], w.shape[0]
    wt = last_filter(w, g, "im2col") if laid is None else laid
    xc = _to_nchw(x, True)
    y = np.empty((N, g.oh, g.ow, F), np.result_type(x.dtype, w.dtype))
    y2 = y.reshape(-1, F)
    P = g.oh * g.ow
    for lo, hi in _batch_blocks(xc.shape[1], g, N):
        cols = _im2col(xc[lo:hi], g, False)
        post = None
        if epilogue is not None:
            def post(block: np.ndarray, where: tuple, base: int = lo * P) -> None:
                r = slice(base + where[0].start, base + where[0].stop)
                epilogue(block, (r, where[1]))
        gemm_rows(cols.T, wt, y2[lo * P:hi * P], post)
    return y


def channels_last_kernel(x_shape: Sequence[int], w_shape: Sequence[int], dtype: Any,
                         strides: Any, paddings: Any, padding_algorithm: str, groups: int,
                         dilations: Any, data_format: str) -> str:
    """The channels-last kernel ``conv2d_forward`` runs for an input of ``x_shape`` (of
    ``data_format``) -- "pointwise", "depthwise" or "im2col", whose epilogue sees the output
    as [N*oh*ow, F] rows -- or "" (an NCHW kernel; also when H or W is unknown, -1)."""
    if not _channels_last(data_format) or len(x_shape) != 4 or len(w_shape) != 4 \
            or min(x_shape[1:3]) < 1:
        return ""
    N, H, W, C = x_shape
    g = _geom((H, W), w_shape[2:], strides, paddings, dilations, padding_algorithm, groups)
    return _last_kind(C, w_shape, g, dtype)


def channels_last_filter(w: np.ndarray, x_shape: Sequence[int], strides: Any, paddings: Any,
                         padding_algorithm: str, groups: int, dilations: Any) -> np.ndarray:
    """The filter ``w`` laid out for the channels-last kernel of an NHWC input of
    ``x_shape`` (``_conv_last.last_filter``): what ``conv2d_forward`` takes as
    ``filter_last``.

    Args:
        w: the filter [F, C/groups, kh, kw], float32 or float64.
        x_shape: the NHWC input's shape [N, H, W, C] (N may be -1).
        strides, paddings, padding_algorithm, groups, dilations: conv2d's attributes.

    Returns:
        np.ndarray: of ``channels_last_filter_shape``, ``w``'s dtype.

    Example:
        >>> import numpy as np
        >>> from fluidlite.ops.conv import channels_last_filter
        >>> channels_last_filter(np.ones((8, 4, 1, 1), np.float32), (-1, 7, 7, 4), [1, 1],
        ...                      [0, 0], "EXPLICIT", 1, [1, 1]).shape
        (4, 8)

    Raises:
        ValueError: no channels-last kernel runs for this filter and input.
    """
    kind, g = _last_geom(w.shape, w.dtype, x_shape, strides, paddings, padding_algorithm,
                         groups, dilations)
    return last_filter(w, g, kind)


def channels_last_filter_shape(w_shape: Sequence[int], dtype: Any, x_shape: Sequence[int],
                               strides: Any, paddings: Any, padding_algorithm: str,
                               groups: int, dilations: Any) -> Tuple[int, ...]:
    """The shape of ``channels_last_filter`` (raises as it does)."""
    kind, g = _last_geom(w_shape, dtype, x_shape, strides, paddings, padding_algorithm, groups,
                         dilations)
    return last_filter_shape(w_shape, g, kind)


def _last_geom(w_shape: Sequence[int], dtype: Any, x_shape: Sequence[int], strides: Any,
               paddings: Any, padding_algorithm: str, groups: int,
               dilations: Any) -> Tuple[str, _Geom]:
    kind = channels_last_kernel(x_shape, w_shape, dtype, strides, paddings, padding_algorithm,
                                groups, dilations, "NHWC")
    if not kind:
        raise ValueError(f"channels_last_filter: no channels-last kernel runs for the filter "
                         f"{np.dtype(dtype)} {list(w_shape)} (groups {groups}) on an NHWC "
                         f"input {list(x_shape)}")
    g = _geom(tuple(x_shape[1:3]), w_shape[2:], strides, paddings, dilations,
              padding_algorithm, groups)
    return kind, g


@functools.lru_cache(maxsize=1024)
def _layer_kind(x_shape: Tuple[int, ...], w_shape: Tuple[int, ...], dtype: np.dtype,
                strides: Tuple[int, ...], paddings: Tuple[int, ...], padding_algorithm: str,
                groups: int, dilations: Tuple[int, ...]) -> str:
    """``channels_last_kernel`` of an NHWC layer, memoised: a block's three layers are checked
    on every run (6 us each uncached, for 51 layers in MobileNetV2)."""
    return channels_last_kernel(x_shape, w_shape, dtype, strides, paddings, padding_algorithm,
                                groups, dilations, "NHWC")


def separable_forward(x: np.ndarray, expand: Optional[np.ndarray], depthwise: np.ndarray,
                      project: np.ndarray, strides: Any, paddings: Any, padding_algorithm: str,
                      dilations: Any, expand_post: Optional[Callable[[np.ndarray], Any]] = None,
                      depthwise_post: Optional[Callable[[np.ndarray, tuple], Any]] = None,
                      epilogue: Optional[Callable[[np.ndarray, tuple], Any]] = None,
                      laid: Sequence[Optional[np.ndarray]] = (None, None, None)) -> np.ndarray:
    """A depthwise-separable block on the NHWC input ``x`` [N, H, W, C] in one pass
    (``_conv_last.separable_fwd``): ``E = expand_post(conv2d(x, expand))``, a 1x1 layer
    (none when ``expand`` is None: E = x), ``D = depthwise_post(conv2d(E, depthwise))`` with
    groups = E's channels and the convolution attributes given, ``Y = epilogue(conv2d(D,
    project))``, a 1x1 layer; returns Y [N, oh, ow, F].

    Args:
        expand, depthwise, project: the filters [E, C, 1, 1], [E, 1, kh, kw], [F, E, 1, 1].
        strides, paddings, padding_algorithm, dilations: the depthwise layer's attributes
            (the 1x1 layers have stride 1 and no padding).
        expand_post: in place on blocks [rows, W, E] of E (a bias, an activation).
        depthwise_post, epilogue: in place on blocks of D and Y seen as rows of pixels, as
            ``conv2d_forward``'s channels-last ``epilogue`` (``where`` = (rows, columns)).
        laid: the three filters as ``channels_last_filter`` lays them out for their layer's
            input, made ahead (an inference program's constants); None: laid out here.

    Raises:
        ValueError: a layer is not of the block's kind (a 1x1 of stride 1 without padding, a
            depthwise with one filter per channel), or the channels do not chain.
    """
    N, H, W, C = x.shape
    E = C if expand is None else int(expand.shape[0])
    dtype = np.result_type(x.dtype, depthwise.dtype)
    shapes = [(expand, (N, H, W, C), (1, 1), (0, 0), "EXPLICIT", 1, (1, 1), "pointwise"),
              (depthwise, (N, H, W, E), strides, paddings, padding_algorithm, E, dilations,
               "depthwise")]
    g = _geom((H, W), depthwise.shape[2:], strides, paddings, dilations, padding_algorithm, E)
    shapes.append((project, (N, g.oh, g.ow, E), (1, 1), (0, 0), "EXPLICIT", 1, (1, 1),
                   "pointwise"))
    filters = []
    for (w, xs, st, pd, alg, grp, dl, want), made in zip(shapes, laid):
        if w is None:
            filters.append(None)
            continue
        if w.ndim != 4 or w.shape[1] * grp != xs[3] or _layer_kind(
                tuple(xs), tuple(w.shape), dtype, tuple(st), tuple(pd), alg, grp,
                tuple(dl)) != want:
            raise ValueError(f"separable_forward: the {want} layer's filter {list(w.shape)} "
                             f"does not run as a {want} layer on the NHWC input {list(xs)} "
                             f"(strides {list(st)}, paddings {list(pd)}, groups {grp})")
        filters.append(made if made is not None
                       else channels_last_filter(w, xs, st, pd, alg, grp, dl))
    return separable_fwd(x, filters[0], expand_post, filters[1], g, depthwise_post,
                         filters[2], epilogue)


@register
class DepthwiseConv2D(Conv2D):
    """conv2d with groups == input channels (fluid's depthwise kernel; same maths)."""
    type = "depthwise_conv2d"
    saves_for_grad = False      # (its kernels never run Winograd: nothing to save)


class _ConvGradBase(OpDef):
    inputs = ("Input", "Filter", "Output@GRAD")
    outputs = ("Input@GRAD?", "Filter@GRAD?")
    no_grad = True          # no double-grad rule for convolutions
    extra_attrs = _EXTRA

    def infer(self, *specs, **attrs):
        return {}


@register
class Conv2DGrad(_ConvGradBase):
    """Gradient of conv2d: dInput = conv2d^T(dOutput, Filter), dFilter = dOutput (x) Input."""
    type = "conv2d_grad"

    def bind(self, in_specs, attrs, outputs_present):
        """``forward`` told which gradients the program writes (``wanted``)."""
        kw = self.kernel_attrs(attrs)
        return Binding(functools.partial(self.forward, wanted=frozenset(outputs_present), **kw),
                       False)

    def forward(self, Input, Filter, dOutput, wanted=None, *, strides=[1, 1], paddings=[0, 0],
                padding_algorithm="EXPLICIT", groups=1, dilations=[1, 1], data_format="NCHW"):
        return _conv2d_grads(Input, Filter, dOutput, wanted, strides=strides, paddings=paddings,
                            padding_algorithm=padding_algorithm, groups=groups,
                            dilations=dilations, data_format=data_format)


def _conv2d_grads(Input: np.ndarray, Filter: np.ndarray, dOutput: np.ndarray,
                 wanted: Optional[AbstractSet[str]] = None, *, strides: Any = (1, 1),
                 paddings: Any = (0, 0), padding_algorithm: str = "EXPLICIT", groups: int = 1,
                 dilations: Any = (1, 1), data_format: str = "NCHW",
                 tiles: Any = None) -> Mapping:
    """conv2d_grad's ``{"Input@GRAD": dX, "Filter@GRAD": dW}``: those in ``wanted`` when
    it is given (the Winograd kernels make both in one pass over the blocks), else both,
    each computed when first read. ``tiles``: the Winograd tiles of ``Input`` that
    ``Conv2D.forward_saving`` kept (used when they fit, ``_winograd.tiles_fit``)."""
    last = _channels_last(data_format)
    x, dy = _to_nchw(Input, last), _to_nchw(dOutput, last)
    g = _conv_geom(x, Filter, strides, paddings, dilations, padding_algorithm, groups)
    kind = _kind(x.shape[0], x.shape[1], Filter.shape, g, x.dtype)
    if kind == "winograd" and wanted:
        # both gradients in one pass over the blocks: each block's transformed dY serves
        # both products
        dx, dw = WG.winograd_grads(
            dy, g, w=Filter if "Input@GRAD" in wanted else None,
            x=x if "Filter@GRAD" in wanted else None,
            tiles=tiles if tiles is not None and WG.tiles_fit(tiles, x, g) else None)
        out = {"Filter@GRAD": dw} if dw is not None else {}
        if dx is not None:
            out["Input@GRAD"] = _from_nchw(dx, last)
        return out
    if kind or \
            len(_batch_blocks(x.shape[1], g, x.shape[0])) > 1:
        return LazyOutputs({
            "Input@GRAD": lambda: _from_nchw(_conv_dx_nchw(dy, Filter, g), last),
            "Filter@GRAD": lambda: _conv_dw_nchw(x, dy, g, Filter.shape)})
    rows: List[np.ndarray] = []

    def dy_rows() -> np.ndarray:      # shared by both gradients
        if not rows:
            rows.append(_dy_rows(dy, _batch_last(g, dy.shape[0])))
        return rows[0]

    return LazyOutputs({
        "Input@GRAD": lambda: _from_nchw(_conv_dx(dy_rows(), Filter, g, x.shape[0]), last),
        "Filter@GRAD": lambda: _conv_dw(x, dy_rows(), g, Filter.shape)})


@register
class DepthwiseConv2DGrad(Conv2DGrad):
    """Gradient of depthwise_conv2d (same as conv2d_grad)."""
    type = "depthwise_conv2d_grad"


Conv2DGrad.forward_def = get_op_def("conv2d")
DepthwiseConv2DGrad.forward_def = get_op_def("depthwise_conv2d")


# -- conv2d_transpose ---------------------------------------------------------------------------
def transpose_out_size(size: int, k: int, pad_total: int, stride: int, dilation: int) -> int:
    """Natural output length of a transposed convolution (-1 stays unknown)."""
    if size < 0:
        return -1
    return (size - 1) * stride - pad_total + dilation * (k - 1) + 1


def _transpose_geom(x_hw: Sequence[int], k_hw: Sequence[int], output_size: Sequence[int],
                    strides, paddings, dilations, algorithm, groups, op: str) -> _Geom:
    """The geometry of the conv2d whose adjoint this transposed conv is (its input = our
    output)."""
    pads, dil = normalize_paddings(paddings), [int(d) for d in dilations]
    if algorithm == "SAME":
        # fluid's UpdatePaddingAndDilation on the *input* sizes, as for conv2d: the padding
        # that makes ceil(in / stride) windows (so the output is (in - 1) * s - pad + k)
        pads = [0, 0, 0, 0]
        for i in range(2):
            n_out = c_div(x_hw[i] + strides[i] - 1, strides[i])
            total = max((n_out - 1) * strides[i] + k_hw[i] - x_hw[i], 0)
            pads[2 * i], pads[2 * i + 1] = total // 2, total - total // 2
        dil = [1, 1]
    elif algorithm == "VALID":
        pads = [0, 0, 0, 0]
    elif algorithm != "EXPLICIT":
        raise ValueError(f"{op}: padding_algorithm must be 'EXPLICIT', 'SAME' or 'VALID', got "
                         f"{algorithm!r}")
    natural = [transpose_out_size(x_hw[i], k_hw[i], pads[2 * i] + pads[2 * i + 1], strides[i],
                                  dil[i]) for i in range(2)]
    out = list(natural)
    if output_size:
        for i in range(2):
            want = int(output_size[i])
            if not natural[i] <= want < natural[i] + strides[i]:
                raise ValueError(f"{op}: output_size {list(output_size)} is not reachable from "
                                 f"input {list(x_hw)}: along axis {i} it must lie in "
                                 f"[{natural[i]}, {natural[i] + strides[i] - 1}]")
            out[i] = want
    g = _geom(out, k_hw, strides, pads, dil, "EXPLICIT", groups)
    if (g.oh, g.ow) != tuple(x_hw):
        raise ValueError(f"{op}: inconsistent geometry for input {list(x_hw)}")   # pragma: no cover
    return g


def _tiles_output(g: _Geom, groups: int) -> bool:
    """A transposed convolution whose windows tile its output: stride = filter size, no
    dilation, padding or groups, and the natural output size -- every output pixel is one
    input pixel's product with one filter tap (the 2x2 / 2 upsampling of U-Nets and of
    PP-OCR's detection head)."""
    return ((g.sh, g.sw) == (g.kh, g.kw) and (g.dh, g.dw) == (1, 1) and groups == 1
            and (g.pt, g.pb, g.pl, g.pr) == (0, 0, 0, 0)
            and (g.H, g.W) == (g.oh * g.kh, g.ow * g.kw))


def _transpose_tiles(x: np.ndarray, w: np.ndarray, g: _Geom) -> np.ndarray:
    """conv2d_transpose of ``x`` [N, C, h, w] by ``w`` [C, F, kh, kw] when ``_tiles_output``:
    Y[n, f, y*kh + i, x*kw + j] = sum_c W[c, f, i, j] X[n, c, y, x], one GEMM [F*kh*kw, C] @
    [C, pixels] per strip of input rows, its rows (f, i, j) copied into place one column
    phase j at a time (a copy whose source runs along x: 0.86 ms for 24 channels 160x160 ->
    320x320, where one transposing copy of all of it took 4.6 ms). Instead of col2im's zeroed
    canvas, kh*kw strided adds and a reordering copy: the same products, each output written
    once (PP-OCRv4's 24-channel head layer 5.6 -> 2 ms; col2im's values to rounding: a GEMM
    over a strip's columns may sum in another order). Strips: two fixed halves of the input
    rows of each image from ``K._COPY_MIN`` output elements an image (the items of the pool,
    cut by the shapes alone)."""
    N, C, h, wd = x.shape
    F, kh, kw = w.shape[1], g.kh, g.kw
    wm = w.reshape(C, F * kh * kw).T                # rows (f, i, j); a view BLAS reads as is
    out = np.empty((N, F, h, kh, wd * kw), np.result_type(x.dtype, w.dtype))
    parts = 2 if h >= 2 and F * g.H * g.W >= K._COPY_MIN else 1
    cuts = [h * p // parts for p in range(parts + 1)]

    def strip(item: int) -> None:
        n, p = divmod(item, parts)
        lo, hi = cuts[p], cuts[p + 1]
        cols = x[n].reshape(C, h * wd)[:, lo * wd:hi * wd]
        d = _mm(wm, cols).reshape(F, kh, kw, hi - lo, wd)
        for j in range(kw):
            np.copyto(out[n, :, lo:hi, :, j::kw], d[:, :, j].transpose(0, 2, 1, 3))
    threads.parallel(strip, N * parts)
    return out.reshape(N, F, g.H, g.W)


@register
class Conv2DTranspose(_ConvBase):
    """Output = conv2d^T(Input, Filter): the adjoint (input gradient) of conv2d with the same
    strides/paddings/dilations; Filter is [C_in, C_out/groups, kh, kw];
    dInput = conv2d(dOutput, Filter), dFilter = Input (x) dOutput."""
    type = "conv2d_transpose"

    def infer(self, Input, Filter, *, output_size=(), strides=(1, 1), paddings=(0, 0),
              padding_algorithm="EXPLICIT", groups=1, dilations=(1, 1), data_format="NCHW"):
        last = _channels_last(data_format)
        N, _ = _check_conv_specs(self.type, Input, Filter, groups, last, True)
        strides = _pair(strides, "strides", self.type)
        dilations = _pair(dilations, "dilations", self.type)
        hw = list(Input.shape[1:3] if last else Input.shape[2:])
        F = Filter.shape[1] * groups
        if hw[0] < 0 or hw[1] < 0:
            out = list(output_size) if output_size else [-1, -1]
        else:
            g = _transpose_geom(hw, Filter.shape[2:], output_size, strides, paddings,
                                dilations, padding_algorithm, groups, self.type)
            out = [g.H, g.W]
        shape = [N, out[0], out[1], F] if last else [N, F, out[0], out[1]]
        return {"Output": VarSpec(shape, Input.dtype)}

    def forward(self, Input, Filter, *, output_size=[], strides=[1, 1], paddings=[0, 0],
                padding_algorithm="EXPLICIT", groups=1, dilations=[1, 1], data_format="NCHW"):
        last = _channels_last(data_format)
        x = _to_nchw(Input, last)
        g = _transpose_geom(x.shape[2:], Filter.shape[2:], output_size, strides, paddings,
                            dilations, padding_algorithm, groups, self.type)
        if _tiles_output(g, groups) and x.dtype != np.float16:
            return {"Output": _from_nchw(_transpose_tiles(x, Filter, g), last)}
        return {"Output": _from_nchw(_conv_dx_nchw(x, Filter, g), last)}


@register
class Conv2DTransposeGrad(_ConvGradBase):
    """Gradient of conv2d_transpose: dInput = conv2d(dOutput, Filter), dFilter = the conv2d
    filter gradient with the roles of Input and dOutput swapped."""
    type = "conv2d_transpose_grad"

    def forward(self, Input, Filter, dOutput, *, output_size=[], strides=[1, 1],
                paddings=[0, 0], padding_algorithm="EXPLICIT", groups=1, dilations=[1, 1],
                data_format="NCHW"):
        last = _channels_last(data_format)
        x, dy = _to_nchw(Input, last), _to_nchw(dOutput, last)
        g = _transpose_geom(x.shape[2:], Filter.shape[2:], output_size, strides, paddings,
                            dilations, padding_algorithm, groups, self.type)
        return LazyOutputs({
            "Input@GRAD": lambda: _from_nchw(_conv_fwd(dy, Filter, g), last),
            "Filter@GRAD": lambda: _conv_dw_nchw(dy, x, g, Filter.shape)})


Conv2DTransposeGrad.forward_def = get_op_def("conv2d_transpose")


@register
class DepthwiseConv2DTranspose(Conv2DTranspose):
    """conv2d_transpose with groups == input channels (fluid 1.8's depthwise kernel, the op
    of ``conv2d_transpose`` layers whose groups equal the channels; same maths and attrs)."""
    type = "depthwise_conv2d_transpose"


@register
class DepthwiseConv2DTransposeGrad(Conv2DTransposeGrad):
    """Gradient of depthwise_conv2d_transpose (same as conv2d_transpose_grad)."""
    type = "depthwise_conv2d_transpose_grad"


DepthwiseConv2DTransposeGrad.forward_def = get_op_def("depthwise_conv2d_transpose")
