"""Channels-last (NHWC) forward kernels: a convolution on ``[N, H, W, C]`` maps computed in
that layout, with no transposes to and from NCHW.

* **1x1** (groups 1, no padding, any stride): ``Y = X W^T`` with the batch's pixels as the
  rows of ONE GEMM, ``[N*oh*ow, C] @ [C, F]`` (``gemm_rows``: blocks of rows on the threads,
  each followed by its epilogue while in cache). Also the GEMM of ``conv.py``'s channels-last
  im2col, ``cols^T @ W^T``.
* **Depthwise** (groups == C == F, one filter per channel): each tap is a slice of the
  zero-padded map whose channels are the innermost, contiguous axis, so the kh*kw
  multiply-adds of a block of output rows are ONE ``np.einsum`` whose inner loop runs over
  the block's ``ow * C`` contiguous elements (stride 1: the filter is tiled ``ow`` times
  along the row so that one column of taps reads one contiguous run), or over its ``C``
  channels (other strides). The einsum keeps the block's sums in its output and reads every
  tap once: one pass over memory where the NCHW tap kernels make two per tap (a product and
  an add). MobileNetV2's layers at batch 1 on one thread (AMD EPYC, NumPy 2.4, ms):
  576 x 14x14 0.14 against 0.39 as nine multiply-add passes, 192 x 28x28 0.20 / 0.54,
  32 x 112x112 0.67 / 2.06. Batches of small maps go in blocks of whole images, one einsum
  per run of output rows for all of them (``_depthwise_images``); either way the filter rows
  that meet only padding are left out where that saves enough (``_image_runs``).

The filter is read as ``last_filter`` lays it out (W^T row-major; the depthwise taps, tiled),
made here or -- an inference program's constant filter -- once at load. ``conv.conv2d_forward``
runs these kernels for an NHWC input when ``conv.channels_last_kernel`` names one, and
``inference``'s ``conv2d_fusion_layout_transfer_pass`` puts the convolutions of
depthwise-separable networks in NHWC so that they do.

Determinism: the output rows are cut into fixed parts (``_conv_kernels.run_parts``) and each
element is made by one einsum or GEMM call whose shapes depend on the input's shape only: the
depthwise bits never depend on the thread count, a GEMM's as ``linalg._gemm``'s (the same for
every count from two; one thread runs a product ``_gemm`` would cut as one call, which a BLAS
may sum in another order). A depthwise output element adds its taps in (i, j) order from
zero, as the NCHW tap kernels do.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, List, Optional, Sequence, Tuple

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ._conv_kernels import _BLOCK, parts_alone, run_parts
from .linalg import _gemm

__all__ = ["channels_last_kind", "conv_last_fwd", "gemm_rows", "last_filter",
           "last_filter_shape", "separable_fwd"]

Epilogue = Callable[[np.ndarray, tuple], Any]
_ALL = slice(None)
_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def channels_last_kind(C: int, w_shape: Sequence[int], g: Any, dtype: Any) -> str:
    """Which of this module's kernels runs a forward of C input channels with a filter of
    ``w_shape`` and the geometry ``g`` (``conv._Geom``): ``"pointwise"``, ``"depthwise"``, or
    ``""`` (``conv.py`` decides the rest). float32 and float64 only (einsum and GEMM
    accumulate other types differently)."""
    if np.dtype(dtype) not in _DTYPES or len(w_shape) != 4:
        return ""
    F, cg, kh, kw = (int(d) for d in w_shape)
    if (kh, kw, g.groups, cg) == (1, 1, 1, C) and (g.pt, g.pb, g.pl, g.pr) == (0, 0, 0, 0):
        return "pointwise"
    if g.groups == C == F and cg == 1 and C > 1:
        return "depthwise"
    return ""


def last_filter_shape(w_shape: Sequence[int], g: Any, kind: str) -> Tuple[int, ...]:
    """The shape of ``last_filter`` for a filter of ``w_shape``: [C*kh*kw, F] for a GEMM
    (``"pointwise"``, ``"im2col"``), [kh, kw, ow*C] for a depthwise stride-1 filter tiled
    along the output row, [kh, kw, C] for other strides."""
    F, kh, kw = int(w_shape[0]), int(w_shape[2]), int(w_shape[3])
    if kind == "depthwise":
        return (kh, kw, g.ow * F) if g.sw == 1 else (kh, kw, F)
    return (int(np.prod(w_shape[1:])), F)


def last_filter(w: np.ndarray, g: Any, kind: str) -> np.ndarray:
    """The filter ``w`` [F, C/groups, kh, kw] laid out as the channels-last kernel ``kind``
    reads it (``last_filter_shape``), contiguous: GEMMs read W^T [C*kh*kw, F] (row-major
    B operands run 0.7x the time of a transposed view's: [49, 320] @ [320, 1280] 0.25 against
    0.35 ms on one thread), the depthwise einsum its taps [kh, kw, C], tiled ``ow`` times along
    the row for stride 1."""
    F = w.shape[0]
    if kind != "depthwise":
        return np.ascontiguousarray(w.reshape(F, -1).T)
    taps = w.reshape(F, g.kh, g.kw).transpose(1, 2, 0)
    if g.sw != 1:
        return np.ascontiguousarray(taps)
    return np.ascontiguousarray(np.broadcast_to(
        taps[:, :, None, :], (g.kh, g.kw, g.ow, F))).reshape(g.kh, g.kw, g.ow * F)


def conv_last_fwd(x: np.ndarray, w: np.ndarray, g: Any, kind: str,
                  epilogue: Optional[Epilogue] = None,
                  laid: Optional[np.ndarray] = None) -> np.ndarray:
    """Y [N, oh, ow, F] of the NHWC input ``x`` and the filter ``w`` [F, C/groups, kh, kw] by
    the ``kind`` of ``channels_last_kind``. ``laid``: ``last_filter(w, g, kind)`` made ahead
    (an inference program's constant filter, laid out once at load; the same bits as laying
    it out here). ``epilogue(block, where)`` (in place) runs on each block of
    ``Y2 = Y.reshape(N*oh*ow, F)`` as soon as it is made, in the thread that made it:
    ``block`` is ``Y2[where]``, ``where`` = (rows, columns) slices."""
    if kind not in ("pointwise", "depthwise"):
        raise ValueError(f"conv_last_fwd: no channels-last kernel named {kind!r} "
                         f"(channels_last_kind names 'pointwise' and 'depthwise')")
    if laid is None:
        laid = last_filter(w, g, kind)
    if kind == "pointwise":
        return _pointwise(x, laid, g, epilogue)
    return _depthwise(x, laid, g, epilogue)


def _pointwise(x: np.ndarray, wt: np.ndarray, g: Any,
               epilogue: Optional[Epilogue]) -> np.ndarray:
    N, F = x.shape[0], wt.shape[1]
    if (g.sh, g.sw) != (1, 1):
        x = x[:, ::g.sh, ::g.sw][:, :g.oh, :g.ow]
    rows = np.ascontiguousarray(x).reshape(-1, x.shape[3])        # [N*oh*ow, C]
    y = np.empty((N, g.oh, g.ow, F), np.result_type(x.dtype, wt.dtype))
    gemm_rows(rows, wt, y.reshape(-1, F), epilogue)
    return y


def gemm_rows(a: np.ndarray, b: np.ndarray, out: np.ndarray,
              epilogue: Optional[Epilogue] = None) -> None:
    """``out[...] = a @ b`` with ``epilogue(out[where], where)`` on each block as it is made:
    the batch's pixels are the rows of ONE product, cut in blocks of rows (an output of
    ``_BLOCK`` elements or more; the product's own row or column parts when it makes no more
    than two) that run on the threads, each followed by its epilogue while in cache. Each
    row's dot products are BLAS's whatever the cut (the cut depends on the shapes only)."""
    M, F = out.shape
    rb = max(_MIN_ROWS, _BLOCK // max(F, 1))
    if M <= 2 * rb:
        post = None if epilogue is None else \
            (lambda block, r, c: epilogue(block, (slice(*r.indices(M)[:2]), c)))
        _gemm(a, b, out, post)
        return

    def part(lo: int, hi: int) -> None:
        for r0 in range(lo, hi, rb):
            r1 = min(hi, r0 + rb)
            np.matmul(a[r0:r1], b, out=out[r0:r1])
            if epilogue is not None:
                where = (slice(r0, r1), _ALL)
                epilogue(out[where], where)
    run_parts(part, M, out.size)


_MIN_ROWS = 64          # rows of a block of ``gemm_rows`` at least (BLAS's panels fill)


def _depthwise(x: np.ndarray, taps: np.ndarray, g: Any,
               epilogue: Optional[Epilogue]) -> np.ndarray:
    N, C = x.shape[0], x.shape[3]
    dtype = np.result_type(x.dtype, taps.dtype)
    y = np.empty((N, g.oh, g.ow, C), dtype)
    y2 = y.reshape(-1, C)
    hb = max(1, _BLOCK // (g.ow * C))          # output rows per block
    reach = (g.kh - 1) * g.dh + 1              # padded input rows one output row reads
    if N > 1 and hb >= _IMAGES_MIN * g.oh:
        _depthwise_images(x, taps, g, epilogue, y, hb // g.oh)
        return y
    # the row runs that skip the padding, where the parts run on this thread alone: with
    # two threads each further einsum call's end waits for the GIL the other one holds (a
    # 5x5 layer on 80 x 80 x 96 1.35 -> 1.4-1.5 ms, on 2 x 96 x 200 one call: 167 -> 93 us)
    alone = parts_alone(y.size)

    def part(lo: int, hi: int) -> None:        # output rows lo:hi of the N*oh
        canvas = np.empty(((min(hb, hi - lo) - 1) * g.sh + reach, g.Wp, C), dtype)
        canvas[:, :g.pl] = 0                    # the padding columns, zero for good (the rest
        canvas[:, g.pl + g.W:] = 0              # is written by each block's ``_fill``)
        for n in range(lo // g.oh, (hi - 1) // g.oh + 1):
            h0, h1 = max(lo - n * g.oh, 0), min(hi - n * g.oh, g.oh)
            for b0 in range(h0, h1, hb):
                b1 = min(h1, b0 + hb)
                _image_taps(_fill(canvas, x[n], g, b0, b1, reach)[None], taps, g,
                            y[n, b0:b1][None],
                            _image_runs(g, g.kw * g.ow * C, b0, b1) if alone else None)
                if epilogue is not None:
                    where = (slice((n * g.oh + b0) * g.ow, (n * g.oh + b1) * g.ow), _ALL)
                    epilogue(y2[where], where)
    run_parts(part, N * g.oh, y.size)
    return y


def _depthwise_images(x: np.ndarray, taps: np.ndarray, g: Any, epilogue: Optional[Epilogue],
                      y: np.ndarray, per: int) -> None:
    """``_depthwise`` of small maps into ``y``: blocks of up to ``per`` whole images laid in
    one canvas [images, rows, Wp, C] whose padding stays zero, each block's taps one einsum
    per run of output rows (``_image_runs``) for all its images, where the strip path makes
    them per block of rows of one image. An SE network's 5x5 layers on 2-3 rows of 96 pixels
    (PP-OCR's direction classifier) spend 40-60 % of their multiply-adds on padding rows,
    which the runs skip, and at batch 6 the fewer, longer calls also hand the GIL between the
    threads less often. Each output element adds the same products in the same order as the
    strip path's (the skipped ones are +-0, see ``_image_runs``): the same bits."""
    N, C = x.shape[0], x.shape[3]
    y2 = y.reshape(-1, C)
    rows = (g.oh - 1) * g.sh + (g.kh - 1) * g.dh + 1        # padded rows the outputs read
    r0, r1 = g.pt, min(rows, g.pt + g.H)                    # the canvas rows of image rows
    runs = _image_runs(g, per * g.kw * g.ow * C)

    def part(lo: int, hi: int) -> None:        # images lo:hi
        canvas = np.zeros((min(per, hi - lo), rows, g.Wp, C), y.dtype)
        for n0 in range(lo, hi, per):
            k = min(per, hi - n0)
            if r1 > r0:
                canvas[:k, r0:r1, g.pl:g.pl + g.W] = x[n0:n0 + k, :r1 - r0]
            _image_taps(canvas[:k], taps, g, y[n0:n0 + k], runs)
            if epilogue is not None:
                where = (slice(n0 * g.oh * g.ow, (n0 + k) * g.oh * g.ow), _ALL)
                epilogue(y2[where], where)
    run_parts(part, N, y.size)


def _image_taps(cv: np.ndarray, taps: np.ndarray, g: Any, out: np.ndarray,
                runs: Optional[Sequence[Tuple[int, int, int, int]]]) -> None:
    """``out`` [k, rows, ow, C] = the depthwise taps over the canvas ``cv`` [k, (rows-1)*sh +
    reach, Wp, C] (C-contiguous images): for each run (h0, h1, i0, i1), output rows h0:h1 of
    every image from filter rows i0:i1 (None: all rows from all filter rows, unsliced -- the
    strip path's every call), one einsum whose inner loop runs over a row's ``ow * C``
    contiguous elements at stride 1, over ``C`` otherwise."""
    e, img, row = cv.itemsize, cv.strides[0], cv.strides[1]
    k, rows, C = out.shape[0], out.shape[1], out.shape[3]
    if g.sw == 1:
        view = as_strided(cv, (k, rows, g.kh, g.kw, g.ow * C),
                          (img, g.sh * row, g.dh * row, g.dw * C * e, e))
        flat = out.reshape(k, rows, g.ow * C)
        if runs is None:
            np.einsum("nhijq,ijq->nhq", view, taps, out=flat)
            return
        for h0, h1, i0, i1 in runs:
            if i1 > i0:
                np.einsum("nhijq,ijq->nhq", view[:, h0:h1, i0:i1], taps[i0:i1],
                          out=flat[:, h0:h1])
            else:
                flat[:, h0:h1] = 0
    else:
        view = as_strided(cv, (k, rows, g.ow, g.kh, g.kw, C),
                          (img, g.sh * row, g.sw * C * e, g.dh * row, g.dw * C * e, e))
        if runs is None:
            np.einsum("nhwijc,ijc->nhwc", view, taps, out=out)
            return
        for h0, h1, i0, i1 in runs:
            if i1 > i0:
                np.einsum("nhwijc,ijc->nhwc", view[:, h0:h1, :, i0:i1], taps[i0:i1],
                          out=out[:, h0:h1])
            else:
                out[:, h0:h1] = 0


_IMAGES_MIN = 2         # whole images a block's budget must hold for ``_depthwise_images``
_SKIP_MIN = 1 << 15     # multiply-adds a further einsum call must skip (~6 us of taps)


def _image_runs(g: Any, per_tap_row: int, b0: int = 0,
                b1: int = -1) -> Tuple[Tuple[int, int, int, int], ...]:
    """``((h0, h1, i0, i1), ...)``: runs of an image's output rows b0:b1 (all when ``b1`` is
    -1; h0, h1 counted from b0) whose windows reach image rows only through filter rows
    i0:i1, the others falling on the zero padding above or below it (which adds nothing:
    Paddle's kernels never read it either). A partial sum starts at +0 and never becomes -0,
    so leaving out the +-0 products changes no bit (only a non-finite weight's, NaN against
    padding, no longer reach the output). Cut only where the multiply-adds skipped
    (``per_tap_row`` a filter row and output row) pay for the further einsum calls; else one
    run over all filter rows. (A 5x5 layer on 2 rows of 96 x 200 channels, PP-OCR's direction
    classifier at batch 1, one thread: 62 us against 183 with the padding's taps.)"""
    return _runs(g, per_tap_row, b0, g.oh if b1 < 0 else b1, _SKIP_MIN)


@functools.lru_cache(maxsize=1024)
def _runs(g: Any, per_tap_row: int, b0: int, b1: int,
          skip_min: int) -> Tuple[Tuple[int, int, int, int], ...]:
    """``_image_runs``, memoised (called for every block of rows of every run)."""
    runs: List[List[int]] = []
    for h in range(b1 - b0):
        base = (b0 + h) * g.sh - g.pt                # image row of filter row 0
        i0 = min(g.kh, max(0, -(base // g.dh)))      # (ceil(-base / dh))
        i1 = max(i0, min(g.kh, -((base - g.H) // g.dh)))
        if runs and runs[-1][2:] == [i0, i1]:
            runs[-1][1] = h + 1
        else:
            runs.append([h, h + 1, i0, i1])
    skipped = sum((h1 - h0) * (g.kh - (i1 - i0)) for h0, h1, i0, i1 in runs) * per_tap_row
    if len(runs) > 1 and skipped < skip_min * (len(runs) - 1):
        return ((0, b1 - b0, 0, g.kh),)
    return tuple((h0, h1, i0, i1) for h0, h1, i0, i1 in runs)


def _taps_into(cv: np.ndarray, taps: np.ndarray, g: Any, out: np.ndarray) -> None:
    """``out`` [rows, ow, C] (contiguous) = the depthwise taps over the padded rows ``cv``
    [(rows-1)*sh + reach, Wp, C] (a C-contiguous canvas): one einsum, whose inner loop runs
    over a row's ``ow * C`` contiguous elements at stride 1, over ``C`` otherwise."""
    _image_taps(cv[None], taps, g, out[None], None)


def _fill(canvas: np.ndarray, img: np.ndarray, g: Any, b0: int, b1: int,
          reach: int) -> np.ndarray:
    """The padded input rows that output rows b0:b1 of image ``img`` [H, W, C] read, laid in
    ``canvas`` (whose padding columns are zero and stay so): returns its first
    (b1-b0-1)*sh + reach rows, row r being padded row b0*sh + r."""
    need = (b1 - b0 - 1) * g.sh + reach
    cv = canvas[:need]
    top = b0 * g.sh - g.pt                      # input row of canvas row 0
    r0, r1 = max(0, -top), min(need, g.H - top)
    cv[:r0] = 0
    cv[max(r1, r0):] = 0
    if r1 > r0:
        cv[r0:r1, g.pl:g.pl + g.W] = img[top + r0:top + r1]
    return cv


# -- depthwise-separable blocks --------------------------------------------------------------
Stage = Callable[[np.ndarray], Any]


def separable_fwd(x: np.ndarray, expand: Optional[np.ndarray], expand_post: Optional[Stage],
                  taps: np.ndarray, g: Any, depthwise_post: Optional[Epilogue],
                  project: np.ndarray, epilogue: Optional[Epilogue]) -> np.ndarray:
    """Y [N, oh, ow, F] of a depthwise-separable block on the NHWC input ``x`` [N, H, W, C]:
    ``E = expand_post(x @ expand)`` (a 1x1 layer, ``expand`` [C, E] as ``last_filter`` lays
    it out; without it E = x), ``D = depthwise_post(depthwise(E))`` (``taps`` laid out for
    the geometry ``g``, of E's map), ``Y = epilogue(D @ project)`` (``project`` [E, F]).

    The three layers run strip by strip of output rows, each strip's E and D made and used
    while in cache -- E and D, the block's largest maps (MobileNetV2 expands 6x), never exist
    whole -- and the block costs one hand-off to the threads where the three layers would
    cost three. A strip's E rows are the padded rows its depthwise windows read; the rows a
    strip shares with the next (``reach - sh``) are kept, not made again.

    ``expand_post(block)`` runs in place on each [rows, W, E] block of E (a strided view of
    the canvas); ``depthwise_post(block, where)`` on D's rows ``D.reshape(-1, E)[where]``;
    ``epilogue(block, where)`` on ``Y.reshape(-1, F)[where]`` (``where`` = (rows, columns)
    slices), each as soon as its rows are made. Every output element is one einsum's or
    GEMM's whose shapes depend on the input's shape only (the strips are fixed parts of the
    rows): the bits never depend on the thread count."""
    N, C = x.shape[0], x.shape[3]
    E = C if expand is None else expand.shape[1]
    F = project.shape[1]
    dtype = np.result_type(x.dtype, taps.dtype, project.dtype,
                           *(() if expand is None else (expand.dtype,)))
    y = np.empty((N, g.oh, g.ow, F), dtype)
    y2 = y.reshape(-1, F)
    reach = (g.kh - 1) * g.dh + 1
    hb = max(1, _BLOCK // (g.sh * g.Wp * E))   # output rows per strip: a canvas of ~_BLOCK

    def fill(canvas: np.ndarray, img: np.ndarray, p0: int, need: int, keep: int) -> None:
        """canvas[keep:need] = padded rows p0+keep : p0+need of E (its rows 0:keep hold
        p0 : p0+keep already)."""
        top = p0 - g.pt                         # map row of canvas row 0
        r0, r1 = max(keep, -top), min(need, g.H - top)
        canvas[keep:r0] = 0
        canvas[max(r1, r0):need] = 0
        if r1 > r0:
            inner = canvas[r0:r1, g.pl:g.pl + g.W]
            src = img[top + r0:top + r1]
            if expand is None:
                inner[...] = src
            elif g.W >= _MIN_ROWS:              # a GEMM per map row, into the canvas
                np.matmul(src, expand, out=inner)
            else:                               # one GEMM (narrow rows make thin GEMMs)
                inner[...] = np.matmul(src.reshape(-1, C), expand).reshape(inner.shape)
            if expand is not None and expand_post is not None:
                expand_post(inner)

    def part(lo: int, hi: int) -> None:        # output rows lo:hi of the N*oh
        canvas = np.empty(((min(hb, hi - lo) - 1) * g.sh + reach, g.Wp, E), dtype)
        canvas[:, :g.pl] = 0                    # the padding columns, zero for good
        canvas[:, g.pl + g.W:] = 0
        mid = np.empty((min(hb, hi - lo), g.ow, E), dtype)
        for n in range(lo // g.oh, (hi - 1) // g.oh + 1):
            h0, h1 = max(lo - n * g.oh, 0), min(hi - n * g.oh, g.oh)
            held = (0, 0)                       # (first padded row in the canvas, rows held)
            for b0 in range(h0, h1, hb):
                b1 = min(h1, b0 + hb)
                p0, need = b0 * g.sh, (b1 - b0 - 1) * g.sh + reach
                keep = max(0, min(held[0] + held[1] - p0, need))
                if keep:                        # rows the strip before made: slide them up
                    canvas[:keep] = canvas[p0 - held[0]:p0 - held[0] + keep]
                fill(canvas, x[n], p0, need, keep)
                held = (p0, need)
                d = mid[:b1 - b0]
                _taps_into(canvas[:need], taps, g, d)
                rows = slice((n * g.oh + b0) * g.ow, (n * g.oh + b1) * g.ow)
                d2 = d.reshape(-1, E)
                if depthwise_post is not None:
                    depthwise_post(d2, (rows, _ALL))
                np.matmul(d2, project, out=y2[rows])
                if epilogue is not None:
                    epilogue(y2[rows], (rows, _ALL))
    run_parts(part, N * g.oh, N * g.H * g.W * E)
    return y
