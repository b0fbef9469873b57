"""Region-of-interest pooling: ``roi_align``, ``roi_pool`` and ``psroi_pool`` (fluid 1.8).

ROIs are ``[R, 4]`` boxes ``(x1, y1, x2, y2)`` in input-image pixels; the image of each ROI is
given by the ROIs' LoD (level 0), or by the optional ``RoisLod`` input (the offsets as a 1-D
int tensor), as in fluid 1.8. Without either, every ROI belongs to image 0.

``roi_align`` is separable: every output bin averages bilinear samples on a regular grid, and
both the sample positions and the bilinear weights factor into a y part and an x part. So each
ROI builds two small matrices, ``Ay`` ``[pooled_h, H]`` and ``Ax`` ``[pooled_w, W]``, and
``Out[r] = Ay X[b] Ax^T`` per channel; the gradient is ``Ay^T dOut[r] Ax`` (one loop over ROIs,
no loop over samples or pixels).
"""
from __future__ import annotations

from typing import Any, Dict, Optional

import numpy as np

from ..core.registry import OpDef, VarSpec, register
from .tensor import emit_grad_op


def _need(op: str, cond: bool, msg: str) -> None:
    if not cond:
        raise ValueError(f"{op}: {msg}")


def roi_batch_ids(op: str, n_rois: int, lod: Any, rois_lod: Optional[np.ndarray],
                  batch: int, rois_num: Optional[np.ndarray] = None) -> np.ndarray:
    """The image index of each ROI: from ``RoisNum`` (Paddle 2.x: the ROIs of each image),
    ``RoisLod`` (fluid 1.8: offsets) or the ROIs' LoD; all in image 0 without any."""
    if rois_num is not None:
        counts = np.asarray(rois_num, np.int64).reshape(-1)
        _need(op, bool((counts >= 0).all()), f"RoisNum must not be negative, got "
              f"{counts.tolist()}")
        off = np.concatenate([[0], np.cumsum(counts)])
    elif rois_lod is not None:
        off = np.asarray(rois_lod, np.int64).reshape(-1)
    elif lod:
        from .detection import offsets_of
        off = offsets_of(lod, n_rois)
    else:
        return np.zeros(n_rois, np.int64)
    _need(op, off[0] == 0 and off[-1] == n_rois,
          f"the ROIs' LoD {off.tolist()} does not cover the {n_rois} ROIs")
    _need(op, len(off) - 1 <= batch,
          f"the ROIs' LoD has {len(off) - 1} images but the input batch has {batch}")
    return np.repeat(np.arange(len(off) - 1), np.diff(off))


def _round_half_away(v: np.ndarray) -> np.ndarray:
    """C's ``round``: halves go away from zero (numpy rounds them to even)."""
    return np.sign(v) * np.floor(np.abs(v) + v.dtype.type(0.5))


# -- roi_align ------------------------------------------------------------------------------------
def _align_axis(start: float, size: float, pooled: int, grid: int, n: int) -> np.ndarray:
    """``[pooled, n]``: the averaged bilinear weights of the ``grid`` samples of each bin along
    one axis (fluid's rule: samples outside [-1, n] weigh 0, others clamp to the border)."""
    bin_size = size / pooled
    p = np.arange(pooled)[:, None]
    g = np.arange(grid)[None, :]
    pos = (start + p * bin_size + (g + 0.5) * bin_size / grid).reshape(-1)
    valid = (pos >= -1.0) & (pos <= n)
    pos = np.maximum(pos, 0.0)
    low = np.floor(pos).astype(np.int64)
    at_end = low >= n - 1
    low = np.where(at_end, n - 1, low)
    high = np.where(at_end, n - 1, low + 1)
    pos = np.where(at_end, low.astype(np.float64), pos)
    frac = pos - low
    m = np.zeros((pooled * grid, n))
    rows = np.arange(pooled * grid)
    np.add.at(m, (rows, low), np.where(valid, 1.0 - frac, 0.0))
    np.add.at(m, (rows, high), np.where(valid, frac, 0.0))
    return m.reshape(pooled, grid, n).sum(axis=1) / grid


def _align_mats(roi: np.ndarray, spatial_scale: float, ph: int, pw: int, sampling_ratio: int,
                H: int, W: int, aligned: bool = False):
    # ``aligned`` (Paddle 2.x): pixel centres at +0.5 -- the corners shift by half a pixel
    # and the ROI keeps its size (fluid 1.8: at least 1 pixel)
    shift = 0.5 if aligned else 0.0
    x1, y1, x2, y2 = (float(v) * spatial_scale - shift for v in roi)
    rw, rh = (x2 - x1, y2 - y1) if aligned else (max(x2 - x1, 1.0), max(y2 - y1, 1.0))
    gh = sampling_ratio if sampling_ratio > 0 else int(np.ceil(rh / ph))
    gw = sampling_ratio if sampling_ratio > 0 else int(np.ceil(rw / pw))
    return _align_axis(y1, rh, ph, gh, H), _align_axis(x1, rw, pw, gw, W)


class _RoiBase(OpDef):
    lod_aware = True

    def _spec(self, X, ROIs, channels: int, pooled_height: int, pooled_width: int):
        _need(self.type, X.ndim == 4, f"X must be 4-D [N, C, H, W], got {list(X.shape)}")
        _need(self.type, ROIs.ndim == 2 and ROIs.shape[1] == 4,
              f"ROIs must be [num_rois, 4] (x1, y1, x2, y2), got {list(ROIs.shape)}")
        _need(self.type, pooled_height > 0 and pooled_width > 0,
              f"pooled_height and pooled_width must be > 0, got {pooled_height} and "
              f"{pooled_width}")
        return VarSpec([ROIs.shape[0], channels, pooled_height, pooled_width], X.dtype)


@register
class RoiAlign(_RoiBase):
    """Out[r, c, i, j] = mean of the bilinear samples of X[b(r), c] on a grid_h x grid_w grid in
    bin (i, j) of ROI r scaled by ``spatial_scale`` (ROI size at least 1; grid from
    ``sampling_ratio``, else ceil(roi size / pooled size)); dX scatters the same weights.
    ``aligned`` (Paddle 2.x) shifts the scaled corners by -0.5 and drops the minimum size;
    ``RoisNum`` (Paddle 2.x) gives the ROIs per image instead of ``RoisLod`` / LoD."""
    type, inputs, outputs = "roi_align", ("X", "ROIs", "RoisLod?", "RoisNum?"), ("Out",)
    grad_uses = ("X", "ROIs", "RoisLod", "RoisNum")

    def make_grad(self, g, **attrs):
        """fluid's grad maker: X@GRAD only (the boxes get none)."""
        emit_grad_op(g, self.type, attrs, uses=self.grad_uses, out_grads=("Out",),
                     in_grads=("X",))

    def infer(self, X, ROIs, RoisLod=None, RoisNum=None, *, spatial_scale=1.0,
              pooled_height=1, pooled_width=1, sampling_ratio=-1, aligned=False):
        return {"Out": self._spec(X, ROIs, X.shape[1], pooled_height, pooled_width)}

    def forward(self, X, ROIs, RoisLod=None, RoisNum=None, lod=None, *, spatial_scale=1.0,
                pooled_height=1, pooled_width=1, sampling_ratio=-1, aligned=False):
        N, C, H, W = X.shape
        bid = roi_batch_ids(self.type, ROIs.shape[0], (lod or {}).get("ROIs"), RoisLod, N,
                            RoisNum)
        out = np.zeros((ROIs.shape[0], C, pooled_height, pooled_width), X.dtype)
        for r in range(ROIs.shape[0]):
            ay, ax = _align_mats(ROIs[r], spatial_scale, pooled_height, pooled_width,
                                 sampling_ratio, H, W, aligned)
            out[r] = (ay.astype(X.dtype) @ X[bid[r]]) @ ax.T.astype(X.dtype)
        return {"Out": out}

    def backward(self, X, ROIs, RoisLod, RoisNum, dOut, lod=None, *, spatial_scale=1.0,
                 pooled_height=1, pooled_width=1, sampling_ratio=-1, aligned=False):
        N, C, H, W = X.shape
        bid = roi_batch_ids(self.type, ROIs.shape[0], (lod or {}).get("ROIs"), RoisLod, N,
                            RoisNum)
        dx = np.zeros_like(X)
        for r in range(ROIs.shape[0]):
            ay, ax = _align_mats(ROIs[r], spatial_scale, pooled_height, pooled_width,
                                 sampling_ratio, H, W, aligned)
            dx[bid[r]] += (ay.T.astype(dOut.dtype) @ dOut[r]) @ ax.astype(dOut.dtype)
        return {"X": dx}


# -- roi_pool -------------------------------------------------------------------------------------
def _pool_bins(roi: np.ndarray, spatial_scale: float, ph: int, pw: int, H: int, W: int):
    x1, y1, x2, y2 = (_round_half_away(np.asarray(v * v.dtype.type(spatial_scale)))
                      for v in roi)
    # fluid's integer corners and float bins, in the ROIs' dtype (roi_pool_op.h)
    t = roi.dtype.type
    x1, y1, x2, y2 = int(x1), int(y1), int(x2), int(y2)
    rh, rw = max(y2 - y1 + 1, 1), max(x2 - x1 + 1, 1)
    bh, bw = t(rh) / t(ph), t(rw) / t(pw)
    i, j = np.arange(ph, dtype=roi.dtype), np.arange(pw, dtype=roi.dtype)
    hs = np.clip(np.floor(i * bh) + y1, 0, H).astype(np.int64)
    he = np.clip(np.ceil((i + 1) * bh) + y1, 0, H).astype(np.int64)
    ws = np.clip(np.floor(j * bw) + x1, 0, W).astype(np.int64)
    we = np.clip(np.ceil((j + 1) * bw) + x1, 0, W).astype(np.int64)
    return hs, he, ws, we


@register
class RoiPool(_RoiBase):
    """Out[r, c, i, j] = max of X[b(r), c] over bin (i, j) of ROI r (corners rounded after
    ``spatial_scale``, size + 1; bins floor/ceil-split and clipped; empty bins give 0);
    Argmax the flat index h*W + w of the first maximum (-1 when empty); dX routes dOut there.
    ``RoisNum`` (Paddle 2.x) gives the ROIs per image instead of ``RoisLod`` / LoD."""
    type, inputs, outputs = "roi_pool", ("X", "ROIs", "RoisLod?", "RoisNum?"), ("Out", "Argmax")
    grad_uses = ("X", "ROIs", "RoisLod", "RoisNum", "Argmax")

    def make_grad(self, g, **attrs):
        """fluid's grad maker: X@GRAD only (the boxes get none)."""
        emit_grad_op(g, self.type, attrs, uses=self.grad_uses, out_grads=("Out",),
                     in_grads=("X",))

    def infer(self, X, ROIs, RoisLod=None, RoisNum=None, *, spatial_scale=1.0,
              pooled_height=1, pooled_width=1):
        spec = self._spec(X, ROIs, X.shape[1], pooled_height, pooled_width)
        return {"Out": spec, "Argmax": spec.with_(dtype="int64")}

    def forward(self, X, ROIs, RoisLod=None, RoisNum=None, lod=None, *, spatial_scale=1.0,
                pooled_height=1, pooled_width=1):
        N, C, H, W = X.shape
        bid = roi_batch_ids(self.type, ROIs.shape[0], (lod or {}).get("ROIs"), RoisLod, N,
                            RoisNum)
        R = ROIs.shape[0]
        out = np.zeros((R, C, pooled_height, pooled_width), X.dtype)
        arg = np.full((R, C, pooled_height, pooled_width), -1, np.int64)
        for r in range(R):
            hs, he, ws, we = _pool_bins(ROIs[r], spatial_scale, pooled_height, pooled_width,
                                        H, W)
            img = X[bid[r]]
            for i in range(pooled_height):
                for j in range(pooled_width):
                    if he[i] <= hs[i] or we[j] <= ws[j]:
                        continue
                    win = img[:, hs[i]:he[i], ws[j]:we[j]].reshape(C, -1)
                    k = np.argmax(win, axis=1)                      # first maximum
                    bw = we[j] - ws[j]
                    out[r, :, i, j] = win[np.arange(C), k]
                    arg[r, :, i, j] = (hs[i] + k // bw) * W + ws[j] + k % bw
        return {"Out": out, "Argmax": arg}

    def backward(self, X, ROIs, RoisLod, RoisNum, Argmax, dOut, dArgmax=None, lod=None, *,
                 spatial_scale=1.0, pooled_height=1, pooled_width=1):
        N, C, H, W = X.shape
        bid = roi_batch_ids(self.type, ROIs.shape[0], (lod or {}).get("ROIs"), RoisLod, N,
                            RoisNum)
        dx = np.zeros((N, C, H * W), dOut.dtype)
        R = ROIs.shape[0]
        b = np.broadcast_to(bid.reshape(R, 1, 1, 1), Argmax.shape)
        c = np.broadcast_to(np.arange(C).reshape(1, C, 1, 1), Argmax.shape)
        ok = Argmax >= 0
        np.add.at(dx, (b[ok], c[ok], Argmax[ok]), dOut[ok])
        return {"X": dx.reshape(X.shape)}


# -- psroi_pool -----------------------------------------------------------------------------------
def _ps_bins(roi: np.ndarray, spatial_scale: float, ph: int, pw: int, H: int, W: int):
    r = _round_half_away(np.asarray(roi, np.float64))
    x1, y1 = r[0] * spatial_scale, r[1] * spatial_scale
    x2, y2 = (r[2] + 1.0) * spatial_scale, (r[3] + 1.0) * spatial_scale
    rh, rw = max(y2 - y1, 0.1), max(x2 - x1, 0.1)
    bh, bw = rh / ph, rw / pw
    i, j = np.arange(ph), np.arange(pw)
    hs = np.clip(np.floor(bh * i + y1), 0, H).astype(np.int64)
    he = np.clip(np.ceil(bh * (i + 1) + y1), 0, H).astype(np.int64)
    ws = np.clip(np.floor(bw * j + x1), 0, W).astype(np.int64)
    we = np.clip(np.ceil(bw * (j + 1) + x1), 0, W).astype(np.int64)
    return hs, he, ws, we


@register
class PsroiPool(_RoiBase):
    """Position-sensitive ROI average pooling: X has output_channels * pooled_h * pooled_w
    channels; Out[r, c, i, j] = mean of X[b(r), (c*pooled_h + i)*pooled_w + j] over bin (i, j)
    (ROI corners rounded, end + 1, times ``spatial_scale``; size at least 0.1; empty bins 0);
    dX spreads dOut evenly over each bin. ``RoisNum`` (Paddle 2.x): the ROIs per image."""
    type, inputs, outputs = "psroi_pool", ("X", "ROIs", "RoisNum?"), ("Out",)
    grad_uses = ("X", "ROIs", "RoisNum")

    def make_grad(self, g, **attrs):
        """fluid's grad maker: X@GRAD only (the boxes get none)."""
        emit_grad_op(g, self.type, attrs, uses=self.grad_uses, out_grads=("Out",),
                     in_grads=("X",))

    def infer(self, X, ROIs, RoisNum=None, *, output_channels=1, spatial_scale=1.0,
              pooled_height=1, pooled_width=1):
        _need(self.type, X.shape[1] < 0 or
              X.shape[1] == output_channels * pooled_height * pooled_width,
              f"the input channels ({X.shape[1]}) must equal output_channels * pooled_height "
              f"* pooled_width = {output_channels * pooled_height * pooled_width}")
        return {"Out": self._spec(X, ROIs, output_channels, pooled_height, pooled_width)}

    def _bins(self, X, ROIs, RoisNum, lod, output_channels, spatial_scale, ph, pw):
        N, C, H, W = X.shape
        _need(self.type, C == output_channels * ph * pw,
              f"the input channels ({C}) must equal output_channels * pooled_height * "
              f"pooled_width = {output_channels * ph * pw}")
        bid = roi_batch_ids(self.type, ROIs.shape[0], (lod or {}).get("ROIs"), None, N,
                            RoisNum)
        return bid, [_ps_bins(ROIs[r], spatial_scale, ph, pw, H, W)
                     for r in range(ROIs.shape[0])]

    def forward(self, X, ROIs, RoisNum=None, lod=None, *, output_channels=1, spatial_scale=1.0,
                pooled_height=1, pooled_width=1):
        ph, pw = pooled_height, pooled_width
        bid, bins = self._bins(X, ROIs, RoisNum, lod, output_channels, spatial_scale, ph, pw)
        xs = X.reshape(X.shape[0], output_channels, ph, pw, X.shape[2], X.shape[3])
        out = np.zeros((ROIs.shape[0], output_channels, ph, pw), X.dtype)
        for r, (hs, he, ws, we) in enumerate(bins):
            for i in range(ph):
                for j in range(pw):
                    area = (he[i] - hs[i]) * (we[j] - ws[j])
                    if area <= 0:
                        continue
                    win = xs[bid[r], :, i, j, hs[i]:he[i], ws[j]:we[j]]
                    out[r, :, i, j] = win.sum(axis=(1, 2)) / X.dtype.type(area)  # T / int
        return {"Out": out}

    def backward(self, X, ROIs, RoisNum, dOut, lod=None, *, output_channels=1,
                 spatial_scale=1.0, pooled_height=1, pooled_width=1):
        ph, pw = pooled_height, pooled_width
        bid, bins = self._bins(X, ROIs, RoisNum, lod, output_channels, spatial_scale, ph, pw)
        dx = np.zeros((X.shape[0], output_channels, ph, pw, X.shape[2], X.shape[3]),
                      dOut.dtype)
        for r, (hs, he, ws, we) in enumerate(bins):
            for i in range(ph):
                for j in range(pw):
                    area = (he[i] - hs[i]) * (we[j] - ws[j])
                    if area <= 0:
                        continue
                    dx[bid[r], :, i, j, hs[i]:he[i], ws[j]:we[j]] += \
                        (dOut[r, :, i, j] / dOut.dtype.type(area))[:, None, None]
        return {"X": dx.reshape(X.shape)}


# -- prroi_pool -----------------------------------------------------------------------------------
def _tent_cdf(t: np.ndarray) -> np.ndarray:
    """Antiderivative of the tent max(0, 1 - |t|), from -inf."""
    return np.where(t <= -1, 0.0, np.where(t <= 0, 0.5 * (t + 1) ** 2,
                                           np.where(t <= 1, 1.0 - 0.5 * (1 - t) ** 2, 1.0)))


def _integral_weights(start: float, size: float, pooled: int, n: int) -> np.ndarray:
    """``[pooled, n]``: the integral over each bin of the tent around each pixel (the exact
    integral of the bilinear interpolant along one axis, zero outside the map)."""
    lo = start + np.arange(pooled) * size
    hi = lo + size
    px = np.arange(n)
    return _tent_cdf(hi[:, None] - px) - _tent_cdf(lo[:, None] - px)


def _integral_weight_grads(start: float, size: float, pooled: int, n: int):
    """d(``_integral_weights``)/d(roi start) and /d(roi end), ``[pooled, n]`` each: bin k
    spans [start + k size, start + (k+1) size] with size = (end - start) / pooled, and the
    derivative of the integral w.r.t. a bin edge is the tent at that edge."""
    k = np.arange(pooled)[:, None]
    px = np.arange(n)
    lo = start + k * size
    at_lo = np.maximum(1.0 - np.abs(lo - px), 0.0)
    at_hi = np.maximum(1.0 - np.abs(lo + size - px), 0.0)
    d_start = at_hi * (1.0 - (k + 1) / pooled) - at_lo * (1.0 - k / pooled)
    d_end = at_hi * ((k + 1) / pooled) - at_lo * (k / pooled)
    return d_start, d_end


@register
class PrroiPool(_RoiBase):
    """Precise RoI pooling, fluid 1.8's op (prroi_pool_op.h; not position-sensitive: the
    output keeps the input's channels): Out[r, c, i, j] = (integral of the bilinear
    interpolant of X[b(r), c] over bin (i, j)) / bin area, with the ROI scaled by
    ``spatial_scale`` (not rounded) and empty bins giving 0; the integral factorises per axis,
    so each ROI costs two small matrices. The image of each ROI comes from ``BatchRoINums``
    (ROIs per image) or the ROIs' LoD. dX spreads dOut with the same weights; dROIs is the
    exact derivative w.r.t. the box corners (the bins' edges move with them), as fluid's
    PrRoIPoolingCoorBackward."""
    type, inputs, outputs = "prroi_pool", ("X", "ROIs", "BatchRoINums?"), ("Out",)
    grad_uses = ("X", "ROIs", "BatchRoINums")

    def infer(self, X, ROIs, BatchRoINums=None, *, spatial_scale=1.0, pooled_height=1,
              pooled_width=1):
        return {"Out": self._spec(X, ROIs, X.shape[1], pooled_height, pooled_width)}

    def _mats(self, X, ROIs, BatchRoINums, lod, spatial_scale, ph, pw):
        N, C, H, W = X.shape
        nums = None if BatchRoINums is None else np.concatenate(
            [[0], np.cumsum(np.asarray(BatchRoINums).reshape(-1))])
        bid = roi_batch_ids(self.type, ROIs.shape[0], (lod or {}).get("ROIs"), nums, N)
        mats = []
        for roi in ROIs.astype(np.float64):
            x1, y1, x2, y2 = roi * spatial_scale
            bw, bh = max(x2 - x1, 0.0) / pw, max(y2 - y1, 0.0) / ph
            area = bw * bh
            wy = _integral_weights(y1, bh, ph, H)
            wx = _integral_weights(x1, bw, pw, W)
            mats.append((wy, wx, area))
        return bid, mats

    def forward(self, X, ROIs, BatchRoINums=None, lod=None, *, spatial_scale=1.0,
                pooled_height=1, pooled_width=1):
        ph, pw = pooled_height, pooled_width
        bid, mats = self._mats(X, ROIs, BatchRoINums, lod, spatial_scale, ph, pw)
        out = np.zeros((ROIs.shape[0], X.shape[1], ph, pw), X.dtype)
        for r, (wy, wx, area) in enumerate(mats):
            if area > 0:
                out[r] = np.einsum("ih,chw,jw->cij", wy, X[bid[r]], wx, optimize=True) / area
        return {"Out": out}

    def backward(self, X, ROIs, BatchRoINums, dOut, lod=None, *, spatial_scale=1.0,
                 pooled_height=1, pooled_width=1, wanted=None):
        ph, pw = pooled_height, pooled_width
        bid, mats = self._mats(X, ROIs, BatchRoINums, lod, spatial_scale, ph, pw)
        res = {}
        if wanted is None or "X" in wanted:
            dx = np.zeros(X.shape, dOut.dtype)
            for r, (wy, wx, area) in enumerate(mats):
                if area > 0:
                    dx[bid[r]] += np.einsum("ih,cij,jw->chw", wy, dOut[r], wx,
                                            optimize=True) / area
            res["X"] = dx
        if wanted is None or "ROIs" in wanted:
            res["ROIs"] = self._roi_grad(X, ROIs, dOut, bid, mats, spatial_scale, ph, pw)
        return res

    @staticmethod
    def _roi_grad(X, ROIs, dOut, bid, mats, spatial_scale, ph, pw):
        """Out = S / area with S = wy X wx^T per bin and area = bw * bh, so
        dOut/dcorner = (dS/dcorner - Out * darea/dcorner) / area, times spatial_scale."""
        H, W = X.shape[2:]
        g = np.zeros(ROIs.shape, np.float64)
        for r, (wy, wx, area) in enumerate(mats):
            if area <= 0:
                continue
            x1, y1, x2, y2 = ROIs[r].astype(np.float64) * spatial_scale
            bw, bh = (x2 - x1) / pw, (y2 - y1) / ph
            dy1, dy2 = _integral_weight_grads(y1, bh, ph, H)
            dx1, dx2 = _integral_weight_grads(x1, bw, pw, W)
            xr, d = X[bid[r]].astype(np.float64), dOut[r].astype(np.float64)
            out = np.einsum("ih,chw,jw->cij", wy, xr, wx, optimize=True) / area

            def along(dwy, dwx, d_area):
                ds = np.einsum("ih,chw,jw->cij", dwy, xr, dwx, optimize=True)
                return float(np.sum(d * (ds - out * d_area))) / area

            g[r] = [along(wy, dx1, -bh / pw), along(dy1, wx, -bw / ph),
                    along(wy, dx2, bh / pw), along(dy2, wx, bw / ph)]
        return (g * spatial_scale).astype(ROIs.dtype, copy=False)


# -- deformable_psroi_pooling ---------------------------------------------------------------------
class _DPSGeom:
    """Per-ROI geometry of deformable (PS)RoI pooling (fluid / DCN's rule)."""

    def __init__(self, roi, spatial_scale, ph, pw):
        r = _round_half_away(np.asarray(roi, np.float64))
        self.x0 = r[0] * spatial_scale - 0.5
        self.y0 = r[1] * spatial_scale - 0.5
        self.rw = max((r[2] + 1.0) * spatial_scale - 0.5 - self.x0, 0.1)
        self.rh = max((r[3] + 1.0) * spatial_scale - 0.5 - self.y0, 0.1)
        self.bw, self.bh = self.rw / pw, self.rh / ph


@register
class DeformablePsroiPooling(_RoiBase):
    """Deformable (position-sensitive) RoI pooling: bin (i, j) of ROI r, shifted by
    ``Trans[r, 2*class, part_i, part_j] * trans_std * roi size`` (unless ``no_trans``), averages
    ``sample_per_part``² bilinear samples (samples outside [-0.5, size - 0.5] are skipped, the
    others clamped to the map) of channel ``(c*group_h + g_i)*group_w + g_j``; TopCount holds
    the number of samples used. dInput scatters the bilinear weights / count; dTrans is the
    derivative of the samples in x and y times trans_std and the ROI size."""
    type = "deformable_psroi_pooling"
    inputs, outputs = ("Input", "ROIs", "Trans"), ("Output", "TopCount")
    grad_uses = ("Input", "ROIs", "Trans", "TopCount")

    def make_grad(self, g, **attrs):
        """fluid's grad maker: Input@GRAD and Trans@GRAD (the boxes get none)."""
        emit_grad_op(g, self.type, attrs, uses=self.grad_uses, out_grads=("Output",),
                     in_grads=("Input", "Trans"))

    def _check(self, in_shape, trans_shape, no_trans, output_dim, group_size, ph, pw,
               part_size, sample_per_part):
        _need(self.type, len(group_size) == 2 and min(group_size) >= 1,
              f"group_size must be 2 positive ints, got {list(group_size)}")
        _need(self.type, len(part_size) == 2 and min(part_size) >= 1,
              f"part_size must be 2 positive ints, got {list(part_size)}")
        _need(self.type, sample_per_part >= 1, f"sample_per_part must be >= 1, got "
                                               f"{sample_per_part}")
        _need(self.type, in_shape[1] < 0 or
              in_shape[1] == output_dim * group_size[0] * group_size[1],
              f"Input has {in_shape[1]} channels but output_dim * group_size = "
              f"{output_dim * group_size[0] * group_size[1]}")
        if not no_trans:
            _need(self.type, len(trans_shape) == 4 and trans_shape[1] % 2 == 0,
                  f"Trans must be [num_rois, 2*num_classes, part_h, part_w], got "
                  f"{list(trans_shape)}")

    def infer(self, Input, ROIs, Trans, *, no_trans=False, spatial_scale=1.0, output_dim=1,
              group_size=(1, 1), pooled_height=1, pooled_width=1, part_size=(1, 1),
              sample_per_part=1, trans_std=0.1):
        self._check(Input.shape, Trans.shape, no_trans, output_dim, group_size, pooled_height,
                    pooled_width, part_size, sample_per_part)
        spec = self._spec(Input, ROIs, output_dim, pooled_height, pooled_width)
        return {"Output": spec, "TopCount": spec}

    def _samples(self, Input, ROIs, Trans, lod, no_trans, spatial_scale, output_dim,
                 group_size, ph, pw, part_size, spp, trans_std):
        """Yield, per (roi, i, j): image, channels [D], trans slots, and per sample the
        (h, w) positions [D, S] with their validity."""
        N, C, H, W = Input.shape
        bid = roi_batch_ids(self.type, ROIs.shape[0], (lod or {}).get("ROIs"), None, N)
        gh, gw = group_size
        n_cls = 1 if no_trans else Trans.shape[1] // 2
        each = output_dim if no_trans else output_dim // n_cls
        ctop = np.arange(output_dim)
        cls = np.minimum(ctop // max(each, 1), n_cls - 1)
        t = (np.arange(spp * spp) // spp, np.arange(spp * spp) % spp)      # (ih, iw)
        for r in range(ROIs.shape[0]):
            g = _DPSGeom(ROIs[r], spatial_scale, ph, pw)
            for i in range(ph):
                for j in range(pw):
                    part_h = int(np.floor(i / ph * part_size[0]))
                    part_w = int(np.floor(j / pw * part_size[1]))
                    if no_trans:
                        tx = ty = np.zeros(output_dim)
                    else:
                        # the geometry is in float64 (the scalars below are)
                        tx = Trans[r, cls * 2, part_h, part_w].astype(np.float64) * trans_std
                        ty = Trans[r, cls * 2 + 1, part_h, part_w].astype(np.float64) * trans_std
                    ws = j * g.bw + g.x0 + tx * g.rw                       # [D]
                    hs = i * g.bh + g.y0 + ty * g.rh
                    w = ws[:, None] + t[1][None, :] * (g.bw / spp)         # [D, S]
                    h = hs[:, None] + t[0][None, :] * (g.bh / spp)
                    ok = (w >= -0.5) & (w <= W - 0.5) & (h >= -0.5) & (h <= H - 0.5)
                    w = np.clip(w, 0.0, W - 1.0)
                    h = np.clip(h, 0.0, H - 1.0)
                    gi = min(max(int(np.floor(i * gh / ph)), 0), gh - 1)
                    gj = min(max(int(np.floor(j * gw / pw)), 0), gw - 1)
                    chan = (ctop * gh + gi) * gw + gj
                    yield r, bid[r], i, j, chan, cls, part_h, part_w, h, w, ok, g

    @staticmethod
    def _corners(img_c, h, w):
        x1, x2 = np.floor(w).astype(np.int64), np.ceil(w).astype(np.int64)
        y1, y2 = np.floor(h).astype(np.int64), np.ceil(h).astype(np.int64)
        dx, dy = w - x1, h - y1
        d = np.arange(img_c.shape[0])[:, None]
        return (x1, x2, y1, y2, dx, dy, img_c[d, y1, x1], img_c[d, y2, x1],
                img_c[d, y1, x2], img_c[d, y2, x2])

    def forward(self, Input, ROIs, Trans, lod=None, *, no_trans=False, spatial_scale=1.0,
                output_dim=1, group_size=[1, 1], pooled_height=1, pooled_width=1,
                part_size=[1, 1], sample_per_part=1, trans_std=0.1):
        self._check(Input.shape, Trans.shape, no_trans, output_dim, group_size, pooled_height,
                    pooled_width, part_size, sample_per_part)
        R = ROIs.shape[0]
        out = np.zeros((R, output_dim, pooled_height, pooled_width), Input.dtype)
        count = np.zeros_like(out)
        for r, b, i, j, chan, _, _, _, h, w, ok, _ in self._samples(
                Input, ROIs, Trans, lod, no_trans, spatial_scale, output_dim, group_size,
                pooled_height, pooled_width, part_size, sample_per_part, trans_std):
            _, _, _, _, dx, dy, v11, v12, v21, v22 = self._corners(Input[b][chan], h, w)
            val = ((1 - dx) * (1 - dy) * v11 + (1 - dx) * dy * v12 + dx * (1 - dy) * v21
                   + dx * dy * v22)
            n = ok.sum(axis=1)
            out[r, :, i, j] = np.where(n > 0, (val * ok).sum(axis=1) / np.maximum(n, 1), 0)
            count[r, :, i, j] = n
        return {"Output": out, "TopCount": count}

    def backward(self, Input, ROIs, Trans, TopCount, dOutput, dTopCount=None, lod=None, *,
                 no_trans=False, spatial_scale=1.0, output_dim=1, group_size=[1, 1],
                 pooled_height=1, pooled_width=1, part_size=[1, 1], sample_per_part=1,
                 trans_std=0.1):
        d_in = np.zeros(Input.shape, dOutput.dtype)
        d_tr = np.zeros(Trans.shape, dOutput.dtype)
        for r, b, i, j, chan, cls, part_h, part_w, h, w, ok, g in self._samples(
                Input, ROIs, Trans, lod, no_trans, spatial_scale, output_dim, group_size,
                pooled_height, pooled_width, part_size, sample_per_part, trans_std):
            n = ok.sum(axis=1)
            diff = np.where(n > 0, dOutput[r, :, i, j] / np.maximum(n, 1), 0.0)[:, None] * ok
            x1, x2, y1, y2, dx, dy, v11, v12, v21, v22 = self._corners(Input[b][chan], h, w)
            c = np.broadcast_to(chan[:, None], h.shape)
            for yy, xx, wt in ((y1, x1, (1 - dx) * (1 - dy)), (y2, x1, (1 - dx) * dy),
                               (y1, x2, dx * (1 - dy)), (y2, x2, dx * dy)):
                np.add.at(d_in[b], (c, yy, xx), diff * wt)
            if no_trans:
                continue
            gx = (v22 * dy + v21 * (1 - dy) - v12 * dy - v11 * (1 - dy)) * diff
            gy = (v22 * dx + v12 * (1 - dx) - v21 * dx - v11 * (1 - dx)) * diff
            np.add.at(d_tr, (r, cls * 2, part_h, part_w), gx.sum(axis=1) * trans_std * g.rw)
            np.add.at(d_tr, (r, cls * 2 + 1, part_h, part_w),
                      gy.sum(axis=1) * trans_std * g.rh)
        return {"Input": d_in, "Trans": d_tr}


# -- roi_perspective_transform --------------------------------------------------------------------
_EPS = 1e-4


def _perspective_matrix(tw: int, th: int, xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """fluid's get_transform_matrix: output (x, y) in [0, nw-1] x [0, nh-1] -> the quad, where
    nh = max(2, th) and nw keeps the quad's aspect ratio (clipped to [2, tw])."""
    x0, x1, x2, x3 = xs
    y0, y1, y2, y3 = ys
    lens = [np.hypot(x0 - x1, y0 - y1), np.hypot(x1 - x2, y1 - y2),
            np.hypot(x2 - x3, y2 - y3), np.hypot(x3 - x0, y3 - y0)]
    est_h, est_w = (lens[1] + lens[3]) / 2.0, (lens[0] + lens[2]) / 2.0
    nh = max(2, th)
    nw = int(_round_half_away(np.asarray(est_w * (nh - 1) / est_h))) + 1
    nw = max(2, min(nw, tw))
    dx1, dx2, dx3 = x1 - x2, x3 - x2, x0 - x1 + x2 - x3
    dy1, dy2, dy3 = y1 - y2, y3 - y2, y0 - y1 + y2 - y3
    m = np.zeros(9)
    den = dx1 * dy2 - dx2 * dy1 + 1e-5      # fluid's guard against a degenerate quad
    m[6] = (dx3 * dy2 - dx2 * dy3) / den / (nw - 1)
    m[7] = (dx1 * dy3 - dx3 * dy1) / den / (nh - 1)
    m[8] = 1.0
    m[3] = (y1 - y0 + m[6] * (nw - 1) * y1) / (nw - 1)
    m[4] = (y3 - y0 + m[7] * (nh - 1) * y3) / (nh - 1)
    m[5] = y0
    m[0] = (x1 - x0 + m[6] * (nw - 1) * x1) / (nw - 1)
    m[1] = (x3 - x0 + m[7] * (nh - 1) * x3) / (nh - 1)
    m[2] = x0
    return m


def _in_quad(x: np.ndarray, y: np.ndarray, xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """fluid's point-in-quadrilateral test (points on an edge count as inside, 1e-4
    tolerance; otherwise ray casting to the right)."""
    def gte(a, b):
        return (a > b) | (np.abs(a - b) < _EPS)

    on_edge = np.zeros(x.shape, bool)
    crossings = np.zeros(x.shape, np.int64)
    for i in range(4):
        x_s, y_s, x_e, y_e = xs[i], ys[i], xs[(i + 1) % 4], ys[(i + 1) % 4]
        if abs(y_s - y_e) < _EPS:
            on_edge |= ((np.abs(y - y_s) < _EPS) & (np.abs(y - y_e) < _EPS)
                        & gte(x, min(x_s, x_e)) & gte(max(x_s, x_e), x))
            continue
        ix = (y - y_s) * (x_e - x_s) / (y_e - y_s) + x_s
        on_edge |= (np.abs(ix - x) < _EPS) & gte(y, min(y_s, y_e)) & gte(max(y_s, y_e), y)
        spans = ~((y < min(y_s, y_e)) | (np.abs(y - min(y_s, y_e)) < _EPS)
                  | ((y - max(y_s, y_e)) > _EPS))
        on_edge |= spans & (np.abs(ix - x) < _EPS)
        crossings += (spans & ((ix - x) > _EPS)).astype(np.int64)
    return on_edge | (crossings % 2 == 1)


def _perspective_samples(roi: np.ndarray, spatial_scale: float, th: int, tw: int, H: int,
                         W: int):
    xs, ys = roi[0::2] * spatial_scale, roi[1::2] * spatial_scale
    m = _perspective_matrix(tw, th, xs, ys)
    ow, oh = np.meshgrid(np.arange(tw, dtype=np.float64), np.arange(th, dtype=np.float64))
    den = m[6] * ow + m[7] * oh + m[8]
    in_w = (m[0] * ow + m[1] * oh + m[2]) / den
    in_h = (m[3] * ow + m[4] * oh + m[5]) / den
    gte = lambda a, b: (a > b) | (np.abs(a - b) < _EPS)      # noqa: E731
    inside = _in_quad(in_w, in_h, xs, ys) & ~(gte(-0.5, in_w) | gte(in_w, W - 0.5)
                                              | gte(-0.5, in_h) | gte(in_h, H - 0.5))
    w = np.where(gte(0, in_w), 0.0, in_w)
    h = np.where(gte(0, in_h), 0.0, in_h)
    wf, hf = np.floor(w).astype(np.int64), np.floor(h).astype(np.int64)
    w_end, h_end = gte(wf, W - 1), gte(hf, H - 1)
    wf, hf = np.where(w_end, W - 1, wf), np.where(h_end, H - 1, hf)
    w, h = np.where(w_end, wf.astype(np.float64), w), np.where(h_end, hf.astype(np.float64), h)
    wc, hc = np.where(w_end, wf, wf + 1), np.where(h_end, hf, hf + 1)
    fw, fh = w - wf, h - hf
    # (row, col, weight) of the four taps; outside samples get weight 0
    taps = [(hf, wf, (1 - fw) * (1 - fh)), (hc, wf, (1 - fw) * fh), (hc, wc, fw * fh),
            (hf, wc, fw * (1 - fh))]
    taps = [(np.clip(r, 0, H - 1), np.clip(c, 0, W - 1), wt * inside) for r, c, wt in taps]
    return m, inside, taps


@register
class RoiPerspectiveTransform(_RoiBase):
    """Warp each quadrilateral ROI (x1, y1, ..., x4, y4: top-left, top-right, bottom-right,
    bottom-left, times ``spatial_scale``) to a ``transformed_height x transformed_width``
    rectangle: output pixel (y, x) reads X at the perspective map of (x, y) (fluid's
    get_transform_matrix) by bilinear interpolation when that point lies in the quad and the
    map, else 0 (Mask 0). TransformMatrix [R, 9] holds the maps; Out2InIdx / Out2InWeights
    [R*C*th*tw, 4] the taps. dX scatters the bilinear weights."""
    type = "roi_perspective_transform"
    inputs = ("X", "ROIs")
    outputs = ("Out", "Mask", "TransformMatrix", "Out2InIdx?", "Out2InWeights?")
    grad_uses = ("X", "ROIs")

    def make_grad(self, g, **attrs):
        """fluid's grad maker: X@GRAD only (the quadrilaterals get none)."""
        emit_grad_op(g, self.type, attrs, uses=self.grad_uses, out_grads=("Out",),
                     in_grads=("X",))

    def infer(self, X, ROIs, *, spatial_scale=1.0, transformed_height=1,
              transformed_width=1):
        _need(self.type, X.ndim == 4, f"X must be 4-D [N, C, H, W], got {list(X.shape)}")
        _need(self.type, ROIs.ndim == 2 and ROIs.shape[1] == 8,
              f"ROIs must be [num_rois, 8] (four corner points), got {list(ROIs.shape)}")
        _need(self.type, transformed_height > 0 and transformed_width > 0,
              f"transformed_height and transformed_width must be > 0, got "
              f"{transformed_height} and {transformed_width}")
        r, th, tw = ROIs.shape[0], transformed_height, transformed_width
        return {"Out": VarSpec([r, X.shape[1], th, tw], X.dtype, ROIs.lod_level),
                "Mask": VarSpec([r, 1, th, tw], "int32", ROIs.lod_level),
                "TransformMatrix": VarSpec([r, 9], X.dtype, ROIs.lod_level),
                "Out2InIdx": VarSpec([r * X.shape[1] * th * tw if r >= 0 and X.shape[1] >= 0
                                      else -1, 4], "int32"),
                "Out2InWeights": VarSpec([r * X.shape[1] * th * tw if r >= 0 and X.shape[1] >= 0
                                          else -1, 4], X.dtype)}

    def forward(self, X, ROIs, lod=None, *, spatial_scale=1.0, transformed_height=1,
                transformed_width=1):
        N, C, H, W = X.shape
        bid = roi_batch_ids(self.type, ROIs.shape[0], (lod or {}).get("ROIs"), None, N)
        th, tw = transformed_height, transformed_width
        R = ROIs.shape[0]
        out = np.zeros((R, C, th, tw), X.dtype)
        mask = np.zeros((R, 1, th, tw), np.int32)
        mats = np.zeros((R, 9), X.dtype)
        # fluid's intermediates: per output element the 4 flat input indices (-1: none) and
        # their weights
        idx = np.full((R, C, th, tw, 4), -1, np.int32)
        wts = np.zeros((R, C, th, tw, 4), X.dtype)
        chan = np.arange(C).reshape(C, 1, 1)
        for r in range(R):
            m, inside, taps = _perspective_samples(ROIs[r].astype(np.float64), spatial_scale,
                                                   th, tw, H, W)
            img = X[bid[r]]
            out[r] = sum(img[:, rr, cc] * wt for rr, cc, wt in taps)
            mask[r, 0] = inside
            mats[r] = m
            for k, (rr, cc, wt) in enumerate(taps):
                flat = ((bid[r] * C + chan) * H + rr) * W + cc
                idx[r, ..., k] = np.where(inside, flat, -1)
                wts[r, ..., k] = wt
        res: Dict[str, Any] = {"Out": out, "Mask": mask, "TransformMatrix": mats,
                               "Out2InIdx": idx.reshape(-1, 4),
                               "Out2InWeights": wts.reshape(-1, 4)}
        roi_lod = (lod or {}).get("ROIs")
        if roi_lod:
            res["lod"] = {"Out": roi_lod, "Mask": roi_lod, "TransformMatrix": roi_lod}
        return res

    def backward(self, X, ROIs, dOut, dMask=None, dTransformMatrix=None, dOut2InIdx=None,
                 dOut2InWeights=None, lod=None, *, spatial_scale=1.0, transformed_height=1,
                 transformed_width=1):
        N, C, H, W = X.shape
        bid = roi_batch_ids(self.type, ROIs.shape[0], (lod or {}).get("ROIs"), None, N)
        dx = np.zeros(X.shape, dOut.dtype)
        for r in range(ROIs.shape[0]):
            _, _, taps = _perspective_samples(ROIs[r].astype(np.float64), spatial_scale,
                                              transformed_height, transformed_width, H, W)
            for rr, cc, wt in taps:
                np.add.at(dx[bid[r]], (slice(None), rr, cc), dOut[r] * wt)
        return {"X": dx}
