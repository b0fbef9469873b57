"""Feature-map ops of fluid 1.8's vision layers: rearrangements (``pixel_shuffle``,
``space_to_depth``, ``shuffle_channel``, ``temporal_shift``, ``unfold``), per-channel maps
(``affine_channel``, ``lrn``), sampling grids (``affine_grid``, ``grid_sampler``), products
(``fsp``, ``cos_sim``, ``bilinear_tensor_product``), ``add_position_encoding`` and the
non-differentiable ``similarity_focus`` and ``mean_iou``.

Rearrangements are exact index permutations (reshape/transpose, or a precomputed flat index), so
their gradients are the inverse permutations.
"""
from __future__ import annotations

from typing import Any, List, Sequence, Tuple

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ..core.registry import OpDef, VarSpec, register
from .conv import c_div


def _need(op: str, cond: bool, msg: str) -> None:
    if not cond:
        raise ValueError(f"{op}: {msg}")


def _nchw(op: str, X: Any, data_format: str = "NCHW") -> bool:
    """Checks a 4-D input; returns True for NHWC."""
    _need(op, len(X.shape) == 4, f"X must be 4-D, got shape {list(X.shape)}")
    if data_format not in ("NCHW", "NHWC", "AnyLayout"):
        raise ValueError(f"{op}: data_format must be 'NCHW' or 'NHWC', got {data_format!r}")
    return data_format == "NHWC"


# -- rearrangements -------------------------------------------------------------------------------
@register
class PixelShuffle(OpDef):
    """Out[n, c, h*r + i, w*r + j] = X[n, c*r*r + i*r + j, h, w] (r = upscale_factor);
    dX is the inverse rearrangement of dOut."""
    type, inputs, outputs = "pixel_shuffle", ("X",), ("Out",)
    grad_uses = ()

    def infer(self, X, *, upscale_factor=1, data_format="NCHW"):
        last = _nchw(self.type, X, data_format)
        r = upscale_factor
        _need(self.type, r >= 1, f"upscale_factor must be >= 1, got {r}")
        N, C, H, W = (X.shape[0], X.shape[3], X.shape[1], X.shape[2]) if last else X.shape
        _need(self.type, C < 0 or C % (r * r) == 0,
              f"the channel count {C} must be divisible by upscale_factor**2 = {r * r}")
        c, h, w = (C // (r * r) if C >= 0 else -1), (H * r if H >= 0 else -1), \
            (W * r if W >= 0 else -1)
        return {"Out": VarSpec([N, h, w, c] if last else [N, c, h, w], X.dtype)}

    def forward(self, X, *, upscale_factor=1, data_format="NCHW"):
        last = _nchw(self.type, X, data_format)
        x = X.transpose(0, 3, 1, 2) if last else X
        N, C, H, W = x.shape
        r = upscale_factor
        _need(self.type, C % (r * r) == 0,
              f"the channel count {C} must be divisible by upscale_factor**2 = {r * r}")
        out = x.reshape(N, C // (r * r), r, r, H, W).transpose(0, 1, 4, 2, 5, 3)
        out = out.reshape(N, C // (r * r), H * r, W * r)
        return {"Out": np.ascontiguousarray(out.transpose(0, 2, 3, 1) if last else out)}

    def backward(self, dOut, *, upscale_factor=1, data_format="NCHW"):
        last = _nchw(self.type, dOut, data_format)
        d = dOut.transpose(0, 3, 1, 2) if last else dOut
        N, c, Hr, Wr = d.shape
        r = upscale_factor
        dx = d.reshape(N, c, Hr // r, r, Wr // r, r).transpose(0, 1, 3, 5, 2, 4)
        dx = dx.reshape(N, c * r * r, Hr // r, Wr // r)
        return {"X": np.ascontiguousarray(dx.transpose(0, 2, 3, 1) if last else dx)}


def _space_to_depth_index(shape: Sequence[int], bs: int) -> np.ndarray:
    """fluid's (darknet ``reorg``) map: input flat index -> output flat index. The input
    ``[B, C, H, W]`` cell (b, k, j, i) goes to ``w2 + W*bs*(h2 + H*bs*(c2 + C/bs²*b))`` with
    ``c2 = k % (C/bs²)``, ``o = k // (C/bs²)``, ``w2 = i*bs + o % bs``, ``h2 = j*bs + o // bs``."""
    B, C, H, W = shape
    out_c = C // (bs * bs)
    b, k, j, i = np.meshgrid(np.arange(B), np.arange(C), np.arange(H), np.arange(W),
                             indexing="ij")
    c2, off = k % out_c, k // out_c
    w2, h2 = i * bs + off % bs, j * bs + off // bs
    return (w2 + W * bs * (h2 + H * bs * (c2 + out_c * b))).reshape(-1)


@register
class SpaceToDepth(OpDef):
    """Out (shape [B, C*bs², H/bs, W/bs]) is fluid's reorg permutation of X: flat
    ``Out[f(idx)] = X[idx]`` with f from ``_space_to_depth_index``; dX = dOut[f]."""
    type, inputs, outputs = "space_to_depth", ("X",), ("Out",)
    grad_uses = ("X",)

    @staticmethod
    def _check(op: str, shape: Sequence[int], bs: int) -> None:
        _need(op, len(shape) == 4, f"X must be 4-D [N, C, H, W], got shape {list(shape)}")
        _need(op, bs > 1, f"blocksize must be > 1, got {bs}")
        B, C, H, W = shape
        _need(op, H < 0 or H % bs == 0, f"the height {H} must be divisible by blocksize {bs}")
        _need(op, W < 0 or W % bs == 0, f"the width {W} must be divisible by blocksize {bs}")
        _need(op, C < 0 or C % (bs * bs) == 0,
              f"the channel count {C} must be divisible by blocksize**2 = {bs * bs} (the "
              f"rearrangement is a permutation only then)")

    def infer(self, X, *, blocksize=2):
        self._check(self.type, X.shape, blocksize)
        B, C, H, W = X.shape
        f = lambda v, m: v * m if v >= 0 else -1       # noqa: E731
        return {"Out": VarSpec([B, f(C, blocksize * blocksize),
                                H // blocksize if H >= 0 else -1,
                                W // blocksize if W >= 0 else -1], X.dtype)}

    def forward(self, X, *, blocksize=2):
        self._check(self.type, X.shape, blocksize)
        B, C, H, W = X.shape
        out = np.empty(X.size, X.dtype)
        out[_space_to_depth_index(X.shape, blocksize)] = X.reshape(-1)
        return {"Out": out.reshape(B, C * blocksize ** 2, H // blocksize, W // blocksize)}

    def backward(self, X, dOut, *, blocksize=2):
        idx = _space_to_depth_index(X.shape, blocksize)
        return {"X": dOut.reshape(-1)[idx].reshape(X.shape)}


@register
class ShuffleChannel(OpDef):
    """Out = X viewed as [N, group, C/group, H, W], axes 1 and 2 swapped (ShuffleNet);
    dX the inverse shuffle."""
    type, inputs, outputs = "shuffle_channel", ("X",), ("Out",)
    grad_uses = ()

    def infer(self, X, *, group=1):
        _need(self.type, X.ndim == 4, f"X must be 4-D, got shape {list(X.shape)}")
        _need(self.type, group >= 1, f"group must be >= 1, got {group}")
        _need(self.type, X.shape[1] < 0 or X.shape[1] % group == 0,
              f"the channel count {X.shape[1]} must be divisible by group {group}")
        return {"Out": X}

    def forward(self, X, *, group=1):
        N, C, H, W = X.shape
        _need(self.type, C % group == 0,
              f"the channel count {C} must be divisible by group {group}")
        out = X.reshape(N, group, C // group, H, W).transpose(0, 2, 1, 3, 4)
        return {"Out": np.ascontiguousarray(out).reshape(X.shape)}

    def backward(self, dOut, *, group=1):
        N, C, H, W = dOut.shape
        dx = dOut.reshape(N, C // group, group, H, W).transpose(0, 2, 1, 3, 4)
        return {"X": np.ascontiguousarray(dx).reshape(dOut.shape)}


def _temporal(x: np.ndarray, seg_num: int, shift_ratio: float, sign: int) -> np.ndarray:
    NT, C = x.shape[:2]
    v = x.reshape((NT // seg_num, seg_num) + x.shape[1:])
    out = np.zeros_like(v)
    c1, c2 = int(C * shift_ratio), int(C * 2 * shift_ratio)
    # channels [0, c1) read time t - 1 (forward; the gradient reads t + 1), [c1, c2) read t + 1
    if sign > 0:
        out[:, 1:, :c1] = v[:, :-1, :c1]
        out[:, :-1, c1:c2] = v[:, 1:, c1:c2]
    else:
        out[:, :-1, :c1] = v[:, 1:, :c1]
        out[:, 1:, c1:c2] = v[:, :-1, c1:c2]
    out[:, :, c2:] = v[:, :, c2:]
    return out.reshape(x.shape)


@register
class TemporalShift(OpDef):
    """X is [N*T, C, H, W] (T = seg_num). With c1 = int(C*shift_ratio),
    c2 = int(2*C*shift_ratio): channels [0, c1) take frame t-1, [c1, c2) frame t+1 (zero past
    the ends), the rest stay; dX shifts dOut back."""
    type, inputs, outputs = "temporal_shift", ("X",), ("Out",)
    grad_uses = ()

    def infer(self, X, *, seg_num=1, shift_ratio=0.25):
        _need(self.type, X.ndim == 4, f"X must be 4-D [N*T, C, H, W], got shape "
                                      f"{list(X.shape)}")
        _need(self.type, seg_num >= 1, f"seg_num must be >= 1, got {seg_num}")
        _need(self.type, 0.0 < shift_ratio < 0.5,
              f"shift_ratio must be in (0, 0.5), got {shift_ratio}")
        _need(self.type, X.shape[0] < 0 or X.shape[0] % seg_num == 0,
              f"the batch {X.shape[0]} must be divisible by seg_num {seg_num}")
        return {"Out": X}

    def forward(self, X, *, seg_num=1, shift_ratio=0.25):
        _need(self.type, X.shape[0] % seg_num == 0,
              f"the batch {X.shape[0]} must be divisible by seg_num {seg_num}")
        return {"Out": _temporal(X, seg_num, shift_ratio, 1)}

    def backward(self, dOut, *, seg_num=1, shift_ratio=0.25):
        return {"X": _temporal(dOut, seg_num, shift_ratio, -1)}


def _unfold_geom(op: str, shape, kernel_sizes, strides, paddings, dilations):
    _need(op, len(shape) == 4, f"X must be 4-D [N, C, H, W], got shape {list(shape)}")
    for name, v in (("kernel_sizes", kernel_sizes), ("strides", strides),
                    ("dilations", dilations)):
        _need(op, len(v) == 2 and min(v) >= 1, f"{name} must be 2 positive ints, got {list(v)}")
    _need(op, len(paddings) == 4 and min(paddings) >= 0,
          f"paddings must be 4 non-negative ints [top, left, bottom, right], got "
          f"{list(paddings)}")
    H, W = shape[2:]
    # fluid's CalcOutputSize: C++ int division (truncated toward zero)
    oh = c_div(H + paddings[0] + paddings[2] - (dilations[0] * (kernel_sizes[0] - 1) + 1),
               strides[0]) + 1 if H >= 0 else -1
    ow = c_div(W + paddings[1] + paddings[3] - (dilations[1] * (kernel_sizes[1] - 1) + 1),
               strides[1]) + 1 if W >= 0 else -1
    _need(op, (H < 0 or oh > 0) and (W < 0 or ow > 0),
          f"the sliding blocks would be empty (input {list(shape)}, kernel "
          f"{list(kernel_sizes)}, paddings {list(paddings)}, strides {list(strides)}, "
          f"dilations {list(dilations)})")
    return oh, ow


def _unfold_ends(shape, oh: int, ow: int, kernel_sizes, strides, paddings, dilations):
    """Bottom/right padding of the canvas: the attrs', or more when the truncating output
    size lets the last block reach past it (fluid's im2col reads zeros there)."""
    reach = [(o - 1) * s + d * (k - 1) + 1
             for o, s, d, k in zip((oh, ow), strides, dilations, kernel_sizes)]
    return (max(paddings[2], reach[0] - shape[2] - paddings[0]),
            max(paddings[3], reach[1] - shape[3] - paddings[1]))


@register
class Unfold(OpDef):
    """im2col: Y[n, (c*kh + i)*kw + j, y*ow + x] = Xpad[n, c, y*sh + i*dh, x*sw + j*dw] with
    paddings [top, left, bottom, right]; dX is col2im (the sum over overlapping blocks)."""
    type, inputs, outputs = "unfold", ("X",), ("Y",)
    grad_uses = ("X",)

    def infer(self, X, *, kernel_sizes=(), strides=(1, 1), paddings=(0, 0, 0, 0),
              dilations=(1, 1)):
        oh, ow = _unfold_geom(self.type, X.shape, kernel_sizes, strides, paddings, dilations)
        C = X.shape[1]
        L = oh * ow if oh >= 0 and ow >= 0 else -1
        return {"Y": VarSpec([X.shape[0], C * kernel_sizes[0] * kernel_sizes[1] if C >= 0
                              else -1, L], X.dtype)}

    def forward(self, X, *, kernel_sizes=[], strides=[1, 1], paddings=[0, 0, 0, 0],
                dilations=[1, 1]):
        oh, ow = _unfold_geom(self.type, X.shape, kernel_sizes, strides, paddings, dilations)
        bottom, right = _unfold_ends(X.shape, oh, ow, kernel_sizes, strides, paddings, dilations)
        xp = np.pad(X, [(0, 0), (0, 0), (paddings[0], bottom), (paddings[1], right)])
        N, C = X.shape[:2]
        kh, kw = kernel_sizes
        s = xp.strides
        view = as_strided(xp, (N, C, kh, kw, oh, ow),
                          (s[0], s[1], dilations[0] * s[2], dilations[1] * s[3],
                           strides[0] * s[2], strides[1] * s[3]), writeable=False)
        return {"Y": view.reshape(N, C * kh * kw, oh * ow)}

    def backward(self, X, dY, *, kernel_sizes=[], strides=[1, 1], paddings=[0, 0, 0, 0],
                 dilations=[1, 1]):
        oh, ow = _unfold_geom(self.type, X.shape, kernel_sizes, strides, paddings, dilations)
        N, C, H, W = X.shape
        kh, kw = kernel_sizes
        cols = dY.reshape(N, C, kh, kw, oh, ow)
        bottom, right = _unfold_ends(X.shape, oh, ow, kernel_sizes, strides, paddings, dilations)
        buf = np.zeros((N, C, H + paddings[0] + bottom, W + paddings[1] + right), dY.dtype)
        for i in range(kh):
            for j in range(kw):
                hs, ws = i * dilations[0], j * dilations[1]
                buf[:, :, hs:hs + strides[0] * (oh - 1) + 1:strides[0],
                    ws:ws + strides[1] * (ow - 1) + 1:strides[1]] += cols[:, :, i, j]
        return {"X": np.ascontiguousarray(buf[:, :, paddings[0]:paddings[0] + H,
                                              paddings[1]:paddings[1] + W])}


# -- per-channel maps -----------------------------------------------------------------------------
def _channel_shape(ndim: int, axis: int) -> List[int]:
    shape = [1] * ndim
    shape[axis] = -1
    return shape


@register
class AffineChannel(OpDef):
    """Out = X * Scale[c] + Bias[c] on the channel axis (1 for NCHW, last for NHWC);
    dX = dOut * Scale, dScale = sum(dOut * X), dBias = sum(dOut) over the other axes."""
    type, inputs, outputs = "affine_channel", ("X", "Scale", "Bias"), ("Out",)

    def _axis(self, ndim: int, data_layout: str) -> int:
        _need(self.type, ndim >= 2, f"X must have rank >= 2, got {ndim}")
        if data_layout not in ("NCHW", "NHWC", "AnyLayout"):
            raise ValueError(f"{self.type}: data_layout must be 'NCHW' or 'NHWC', got "
                             f"{data_layout!r}")
        return ndim - 1 if data_layout == "NHWC" else 1

    def infer(self, X, Scale, Bias, *, data_layout="NCHW"):
        a = self._axis(X.ndim, data_layout)
        C = X.shape[a]
        for name, s in (("Scale", Scale), ("Bias", Bias)):
            _need(self.type, s.ndim == 1 and (C < 0 or s.shape[0] in (C, -1)),
                  f"{name} must be 1-D with {C} (channel) elements, got shape {list(s.shape)}")
        return {"Out": X}

    def forward(self, X, Scale, Bias, *, data_layout="NCHW"):
        sh = _channel_shape(X.ndim, self._axis(X.ndim, data_layout))
        return {"Out": X * Scale.reshape(sh) + Bias.reshape(sh)}

    def backward(self, X, Scale, Bias, dOut, *, data_layout="NCHW"):
        a = self._axis(X.ndim, data_layout)
        other = tuple(i for i in range(X.ndim) if i != a)
        return {"X": dOut * Scale.reshape(_channel_shape(X.ndim, a)),
                "Scale": (dOut * X).sum(axis=other).astype(Scale.dtype, copy=False),
                "Bias": dOut.sum(axis=other).astype(Bias.dtype, copy=False)}


def _window_sum(a: np.ndarray, lo: int, hi: int, axis: int) -> np.ndarray:
    """s[c] = sum of a[c + lo .. c + hi] (clipped to the axis) along ``axis``."""
    n = a.shape[axis]
    cs = np.cumsum(a, axis=axis)
    zero = np.zeros_like(np.take(cs, [0], axis=axis))
    cs = np.concatenate([zero, cs], axis=axis)         # cs[k] = sum a[:k]
    c = np.arange(n)
    top = np.clip(c + hi + 1, 0, n)
    bottom = np.clip(c + lo, 0, n)
    return np.take(cs, top, axis=axis) - np.take(cs, bottom, axis=axis)


@register
class LRN(OpDef):
    """Local response normalization across channels: with pre = (n-1)//2,
    MidOut[c] = k + alpha * sum_{c' = c-pre}^{c-pre+n-1} X[c']^2, Out = X * MidOut^(-beta);
    dX[c] = dOut[c] MidOut[c]^(-beta)
    - 2 alpha beta X[c] sum_{c' whose window holds c} dOut[c'] X[c'] MidOut[c']^(-beta-1)."""
    type, inputs, outputs = "lrn", ("X",), ("Out", "MidOut")
    grad_uses = ("X", "MidOut")

    def _axis(self, ndim: int, data_format: str) -> int:
        _need(self.type, ndim == 4, f"X must be 4-D, got {ndim}-D")
        if data_format not in ("NCHW", "NHWC", "AnyLayout"):
            raise ValueError(f"{self.type}: data_format must be 'NCHW' or 'NHWC', got "
                             f"{data_format!r}")
        return 3 if data_format == "NHWC" else 1

    def infer(self, X, *, n=5, k=2.0, alpha=0.0001, beta=0.75, data_format="AnyLayout"):
        self._axis(X.ndim, data_format)
        _need(self.type, n >= 1, f"n must be >= 1, got {n}")
        return {"Out": X, "MidOut": X}

    def forward(self, X, *, n=5, k=2.0, alpha=0.0001, beta=0.75, data_format="AnyLayout"):
        a = self._axis(X.ndim, data_format)
        pre = (n - 1) // 2
        mid = k + alpha * _window_sum(X * X, -pre, n - 1 - pre, a)
        return {"Out": X * mid ** (-beta), "MidOut": mid.astype(X.dtype, copy=False)}

    def backward(self, X, MidOut, dOut, dMidOut=None, *, n=5, k=2.0, alpha=0.0001, beta=0.75,
                 data_format="AnyLayout"):
        a = self._axis(X.ndim, data_format)
        pre = (n - 1) // 2
        t = dOut * X * MidOut ** (-beta - 1)
        # c lies in the window of c' when c' in [c + pre - n + 1, c + pre]
        s = _window_sum(t, pre - n + 1, pre, a)
        return {"X": dOut * MidOut ** (-beta) - 2.0 * alpha * beta * X * s}


# -- sampling grids -------------------------------------------------------------------------------
def _base_grid(h: int, w: int, dtype, align_corners: bool = True) -> np.ndarray:
    """[h, w, 3] of (x, y, 1) with x, y on linspace(-1, 1) -- the pixel centres when not
    ``align_corners`` (Paddle 2.x: linspace scaled by (n - 1) / n)."""
    def axis(n: int) -> np.ndarray:
        if n <= 1:
            return np.array([-1.0 if align_corners else 0.0])
        v = np.linspace(-1.0, 1.0, n)
        return v if align_corners else v * ((n - 1) / n)
    ys, xs = axis(h), axis(w)
    gx, gy = np.meshgrid(xs, ys)
    return np.stack([gx, gy, np.ones_like(gx)], axis=-1).astype(dtype)


@register
class AffineGrid(OpDef):
    """Output[n, y, x] = Theta[n] @ (x_s, y_s, 1) with (x_s, y_s) on linspace(-1, 1) over the
    output's width/height (``output_shape`` attr or the ``OutputShape`` tensor, [N, C, H, W]);
    dTheta[n] = sum_{y,x} dOutput[n, y, x]^T (x_s, y_s, 1). ``align_corners=False`` (Paddle
    2.x) puts (x_s, y_s) on the pixel centres: linspace(-1, 1) * (n - 1) / n."""
    type, inputs, outputs = "affine_grid", ("Theta", "OutputShape?"), ("Output",)
    grad_uses = ("Theta", "OutputShape")

    def infer(self, Theta, OutputShape=None, *, output_shape=(), align_corners=True):
        _need(self.type, Theta.ndim == 3 and tuple(Theta.shape[1:]) == (2, 3),
              f"Theta must be [N, 2, 3], got shape {list(Theta.shape)}")
        if OutputShape is None:
            _need(self.type, len(output_shape) == 4,
                  f"output_shape must be [N, C, H, W], got {list(output_shape)}")
            h, w = int(output_shape[2]), int(output_shape[3])
        else:
            h = w = -1
        return {"Output": VarSpec([Theta.shape[0], h, w, 2], Theta.dtype)}

    def _hw(self, OutputShape, output_shape) -> Tuple[int, int]:
        shape = [int(v) for v in (np.asarray(OutputShape).reshape(-1) if OutputShape is not None
                                  else output_shape)]
        _need(self.type, len(shape) == 4 and min(shape[2:]) > 0,
              f"the output shape must be [N, C, H, W] with H, W > 0, got {shape}")
        return shape[2], shape[3]

    def forward(self, Theta, OutputShape=None, *, output_shape=[], align_corners=True):
        h, w = self._hw(OutputShape, output_shape)
        base = _base_grid(h, w, Theta.dtype, align_corners)
        return {"Output": np.einsum("hwk,njk->nhwj", base, Theta)}

    def backward(self, Theta, OutputShape, dOutput, *, output_shape=[], align_corners=True):
        h, w = self._hw(OutputShape, output_shape)
        base = _base_grid(h, w, dOutput.dtype, align_corners)
        return {"Theta": np.einsum("nhwj,hwk->njk", dOutput, base)}


def _source(g: np.ndarray, n: int, align_corners: bool, padding_mode: str) -> tuple:
    """One grid coordinate (in [-1, 1]) -> the source pixel coordinate along a side of ``n``
    pixels and its derivative by the grid value (Paddle's ``Unnormalize`` then ``Clip``):
    align corners maps -1 / 1 to the first / last pixel centre, otherwise to the outer
    edges; ``border`` clamps into the map, ``reflection`` mirrors at the edges (then clamps)."""
    top = n - 1
    if align_corners:
        u, du = (g + 1.0) * (top / 2.0), np.full(g.shape, top / 2.0)
    else:
        u, du = (g + 1.0) * (n / 2.0) - 0.5, np.full(g.shape, n / 2.0)
    if padding_mode == "reflection":
        span = 2.0 * top if align_corners else 2.0 * n
        if span == 0:
            return np.zeros_like(u), np.zeros_like(u)
        a = u if align_corners else u + 0.5
        sign = np.where(a < 0, -1.0, 1.0)
        a = np.abs(a)
        extra = a - np.floor(a / span) * span
        flip = extra > span - extra
        u = np.where(flip, span - extra, extra) - (0.0 if align_corners else 0.5)
        du = du * sign * np.where(flip, -1.0, 1.0)
        padding_mode = "border"                 # (then clamped, as Paddle does)
    if padding_mode == "border":
        inside = (u > 0) & (u < top)
        u, du = np.clip(u, 0, top), np.where(inside, du, 0.0)
    return u, du


@register
class GridSampler(OpDef):
    """Sampling of X [N, C, H, W] at Grid [N, Ho, Wo, 2] ((x, y) in [-1, 1]). fluid 1.8: bilinear,
    ``align_corners`` (x_s = (x + 1)(W - 1)/2), corners outside X read 0 (``zeros``); Paddle 2.x
    adds ``align_corners=False`` (x_s = (x + 1) W/2 - 1/2), ``padding_mode`` ``border`` /
    ``reflection`` (coordinates clamped / mirrored into X) and ``mode`` ``nearest`` (the pixel
    at the rounded coordinate, halves away from zero). dX scatters the weights; dGrid =
    dOut . dSample/d(x_s, y_s) * dx_s/dx (0 for ``nearest``)."""
    type, inputs, outputs = "grid_sampler", ("X", "Grid"), ("Output",)
    extra_attrs = {"use_cudnn": False}

    def infer(self, X, Grid, *, align_corners=True, mode="bilinear", padding_mode="zeros"):
        _need(self.type, X.ndim == 4, f"X must be 4-D [N, C, H, W], got {list(X.shape)}")
        _need(self.type, Grid.ndim == 4 and Grid.shape[3] == 2,
              f"Grid must be [N, H, W, 2], got {list(Grid.shape)}")
        self._modes(mode, padding_mode)
        return {"Output": VarSpec([X.shape[0], X.shape[1], Grid.shape[1], Grid.shape[2]],
                                  X.dtype)}

    def _modes(self, mode: str, padding_mode: str) -> None:
        _need(self.type, mode in ("bilinear", "nearest"),
              f"mode must be 'bilinear' or 'nearest', got {mode!r}")
        _need(self.type, padding_mode in ("zeros", "border", "reflection"),
              f"padding_mode must be 'zeros', 'border' or 'reflection', got {padding_mode!r}")

    def _corners(self, X, Grid, align_corners, mode, padding_mode):
        """Per corner read: (dx, dy, weight along x, along y, in X, column, row), and the
        coordinates' derivatives by the grid values."""
        self._modes(mode, padding_mode)
        N, C, H, W = X.shape
        g = Grid.astype(np.float64)
        x, dxg = _source(g[..., 0], W, align_corners, padding_mode)
        y, dyg = _source(g[..., 1], H, align_corners, padding_mode)
        if mode == "nearest":
            xi, yi = np.sign(x) * np.floor(np.abs(x) + 0.5), np.sign(y) * np.floor(np.abs(y) + 0.5)
            reads = [(0, 0, np.ones_like(x), np.ones_like(y), xi, yi)]
        else:
            x0, y0 = np.floor(x), np.floor(y)
            reads = [(dx, dy, (x - x0) if dx else (x0 + 1 - x), (y - y0) if dy else (y0 + 1 - y),
                      x0 + dx, y0 + dy) for dy in (0, 1) for dx in (0, 1)]
        out = []
        for dx, dy, wx, wy, xi, yi in reads:
            ok = (xi >= 0) & (xi <= W - 1) & (yi >= 0) & (yi <= H - 1)
            out.append((dx, dy, wx, wy, ok, np.clip(xi, 0, W - 1).astype(np.int64),
                        np.clip(yi, 0, H - 1).astype(np.int64)))
        return out, dxg, dyg

    def forward(self, X, Grid, *, align_corners=True, mode="bilinear", padding_mode="zeros"):
        N = X.shape[0]
        n = np.arange(N)[:, None, None]
        out = np.zeros((N, X.shape[1]) + Grid.shape[1:3], X.dtype)
        reads, _, _ = self._corners(X, Grid, align_corners, mode, padding_mode)
        for _, _, wx, wy, ok, xc, yc in reads:
            v = X[n, :, yc, xc]                              # [N, Ho, Wo, C]
            out += np.moveaxis(v * (wx * wy * ok)[..., None], -1, 1).astype(X.dtype)
        return {"Output": out}

    def backward(self, X, Grid, dOutput, *, align_corners=True, mode="bilinear",
                 padding_mode="zeros"):
        N, C, H, W = X.shape
        n = np.arange(N)[:, None, None]
        dX = np.zeros_like(X)
        dgx = np.zeros(Grid.shape[:3], np.float64)
        dgy = np.zeros(Grid.shape[:3], np.float64)
        g = np.moveaxis(dOutput, 1, -1)                       # [N, Ho, Wo, C]
        reads, dxg, dyg = self._corners(X, Grid, align_corners, mode, padding_mode)
        for dx, dy, wx, wy, ok, xc, yc in reads:
            # the advanced indices (n, yc, xc) come first: the values are [N, Ho, Wo, C]
            np.add.at(dX, (n, slice(None), yc, xc), g * (wx * wy * ok)[..., None])
            if mode == "nearest":
                continue
            gv = (g * (X[n, :, yc, xc] * ok[..., None])).sum(axis=-1)
            dgx += gv * wy * (1.0 if dx else -1.0)
            dgy += gv * wx * (1.0 if dy else -1.0)
        dGrid = np.stack([dgx * dxg, dgy * dyg], axis=-1)
        return {"X": dX, "Grid": dGrid.astype(Grid.dtype, copy=False)}


# -- products -------------------------------------------------------------------------------------
@register
class FSP(OpDef):
    """Out[n] = X[n] (C1 x HW) @ Y[n]^T (HW x C2) / (H*W) (the FSP matrix of two feature maps
    of equal size); dX = dOut @ Y / HW, dY = dOut^T @ X / HW."""
    type, inputs, outputs = "fsp", ("X", "Y"), ("Out",)

    def infer(self, X, Y):
        _need(self.type, X.ndim == 4 and Y.ndim == 4,
              f"X and Y must be 4-D, got {list(X.shape)} and {list(Y.shape)}")
        _need(self.type, all(a < 0 or b < 0 or a == b for a, b in zip(X.shape[2:], Y.shape[2:])),
              f"X and Y must have the same height and width, got {list(X.shape)} and "
              f"{list(Y.shape)}")
        return {"Out": VarSpec([X.shape[0], X.shape[1], Y.shape[1]], X.dtype)}

    def forward(self, X, Y):
        N, C1, H, W = X.shape
        return {"Out": X.reshape(N, C1, -1) @ Y.reshape(N, Y.shape[1], -1).transpose(0, 2, 1)
                / (H * W)}

    def backward(self, X, Y, dOut):
        N, C1, H, W = X.shape
        hw = H * W
        dx = dOut @ Y.reshape(N, Y.shape[1], -1) / hw
        dy = dOut.transpose(0, 2, 1) @ X.reshape(N, C1, -1) / hw
        return {"X": dx.reshape(X.shape), "Y": dy.reshape(Y.shape)}


@register
class CosSim(OpDef):
    """Out[i] = <X[i], Y[i]> / (|X[i]| |Y[i]|) over the flattened trailing dims (Y may have one
    row, broadcast to every row of X); XNorm, YNorm the row norms. dX[i] = dOut[i] (Y/(|X||Y|)
    - Out X/|X|^2); dY likewise (summed over rows when Y is broadcast)."""
    type, inputs, outputs = "cos_sim", ("X", "Y"), ("Out", "XNorm", "YNorm")
    grad_uses = ("X", "Y", "Out", "XNorm", "YNorm")

    def infer(self, X, Y):
        _need(self.type, X.ndim == Y.ndim and X.ndim >= 2,
              f"X and Y must have the same rank >= 2, got {list(X.shape)} and {list(Y.shape)}")
        _need(self.type, all(a < 0 or b < 0 or a == b for a, b in zip(X.shape[1:], Y.shape[1:])),
              f"X and Y must have the same trailing dims, got {list(X.shape)} and "
              f"{list(Y.shape)}")
        _need(self.type, Y.shape[0] in (1, X.shape[0], -1) or X.shape[0] < 0,
              f"Y must have 1 row or as many rows as X, got {list(Y.shape)} for X "
              f"{list(X.shape)}")
        return {"Out": VarSpec([X.shape[0], 1], X.dtype, X.lod_level),
                "XNorm": VarSpec([X.shape[0], 1], X.dtype),
                "YNorm": VarSpec([Y.shape[0], 1], X.dtype)}

    def forward(self, X, Y):
        _need(self.type, Y.shape[0] in (1, X.shape[0]),
              f"Y must have 1 row or as many rows as X ({X.shape[0]}), got {Y.shape[0]}")
        x, y = X.reshape(X.shape[0], -1), Y.reshape(Y.shape[0], -1)
        xn = np.sqrt((x * x).sum(axis=1, keepdims=True))
        yn = np.sqrt((y * y).sum(axis=1, keepdims=True))
        out = (x * y).sum(axis=1, keepdims=True) / (xn * yn)
        return {"Out": out, "XNorm": xn, "YNorm": yn}

    def backward(self, X, Y, Out, XNorm, YNorm, dOut, dXNorm=None, dYNorm=None):
        x, y = X.reshape(X.shape[0], -1), Y.reshape(Y.shape[0], -1)
        dx = dOut * (y / (XNorm * YNorm) - Out * x / (XNorm * XNorm))
        dy = dOut * (x / (XNorm * YNorm) - Out * y / (YNorm * YNorm))
        if Y.shape[0] == 1 and X.shape[0] != 1:
            dy = dy.sum(axis=0, keepdims=True)
        return {"X": dx.reshape(X.shape), "Y": dy.reshape(Y.shape)}


@register
class BilinearTensorProduct(OpDef):
    """Out[b, k] = X[b] @ Weight[k] @ Y[b]^T + Bias[0, k];
    dX = sum_k dOut[:, k] (Y W_k^T), dY = sum_k dOut[:, k] (X W_k), dW_k = X^T diag(dOut_k) Y,
    dBias = sum_b dOut."""
    type, inputs, outputs = "bilinear_tensor_product", ("X", "Y", "Weight", "Bias?"), ("Out",)

    def infer(self, X, Y, Weight, Bias=None):
        _need(self.type, X.ndim == 2 and Y.ndim == 2,
              f"X and Y must be 2-D, got {list(X.shape)} and {list(Y.shape)}")
        _need(self.type, Weight.ndim == 3, f"Weight must be 3-D [size, M, N], got "
                                           f"{list(Weight.shape)}")
        _need(self.type, X.shape[1] in (-1, Weight.shape[1]) and Y.shape[1] in
              (-1, Weight.shape[2]),
              f"X {list(X.shape)} and Y {list(Y.shape)} do not match Weight "
              f"{list(Weight.shape)} ([size, X width, Y width])")
        if Bias is not None:
            _need(self.type, tuple(Bias.shape) == (1, Weight.shape[0]),
                  f"Bias must be [1, {Weight.shape[0]}], got {list(Bias.shape)}")
        return {"Out": VarSpec([X.shape[0], Weight.shape[0]], X.dtype)}

    def forward(self, X, Y, Weight, Bias=None):
        out = np.einsum("bm,kmn,bn->bk", X, Weight, Y, optimize=True)
        return {"Out": out + Bias if Bias is not None else out}

    def backward(self, X, Y, Weight, Bias, dOut):
        grads = {"X": np.einsum("bk,kmn,bn->bm", dOut, Weight, Y, optimize=True),
                 "Y": np.einsum("bk,kmn,bm->bn", dOut, Weight, X, optimize=True),
                 "Weight": np.einsum("bk,bm,bn->kmn", dOut, X, Y, optimize=True)}
        if Bias is not None:
            grads["Bias"] = dOut.sum(axis=0, keepdims=True)
        return grads


def _position_table(length: int, size: int) -> np.ndarray:
    """[length, size]: sin(p / 10000^(i/(half-1))) in the first half, cos in the second."""
    half = size // 2
    p = np.arange(length, dtype=np.float64)[:, None]
    i = np.arange(half, dtype=np.float64)[None, :]
    val = p / np.power(10000.0, i / (half - 1)) if half > 1 else p / 10000.0
    return np.concatenate([np.sin(val), np.cos(val)], axis=1)


@register
class AddPositionEncoding(OpDef):
    """Out[b, p, :] = alpha * X[b, p, :] + beta * PE[p, :], PE the sinusoid table of
    ``_position_table`` (X is [batch, length, size], size even); dX = alpha * dOut. As in
    fluid, X may instead be a LoD tensor [total, size] of lod_level 1: p is then each row's
    position within its sequence, and Out keeps X's LoD."""
    type, inputs, outputs = "add_position_encoding", ("X",), ("Out",)
    grad_uses = ()
    lod_aware = True

    def infer(self, X, *, alpha=1.0, beta=1.0):
        _need(self.type, X.ndim == 3 or (X.ndim == 2 and X.lod_level > 0),
              f"X must be 3-D [batch, length, size], or a 2-D LoD tensor [total, size] of "
              f"lod_level 1, got shape {list(X.shape)} with lod_level {X.lod_level}")
        _need(self.type, X.shape[-1] < 0 or X.shape[-1] % 2 == 0,
              f"the encoding size {X.shape[-1]} must be even")
        return {"Out": X}

    def forward(self, X, lod=None, *, alpha=1.0, beta=1.0):
        _need(self.type, X.shape[-1] % 2 == 0, f"the encoding size {X.shape[-1]} must be even")
        a, b = X.dtype.type(alpha), X.dtype.type(beta)
        if X.ndim == 3:
            pe = _position_table(X.shape[1], X.shape[2]).astype(X.dtype)
            return {"Out": a * X + b * pe[None]}
        x_lod = (lod or {}).get("X")
        _need(self.type, X.ndim == 2 and bool(x_lod),
              f"X must be [batch, length, size], or [total, size] with a LoD, got shape "
              f"{list(X.shape)} {'with' if x_lod else 'without'} a LoD")
        off = np.asarray(x_lod[0], dtype=np.int64)
        lengths = np.diff(off)
        pos = np.arange(X.shape[0], dtype=np.int64) - np.repeat(off[:-1], lengths)
        pe = _position_table(int(lengths.max()) if lengths.size else 0, X.shape[1])
        return {"Out": a * X + b * pe.astype(X.dtype)[pos], "lod": {"Out": x_lod}}

    def backward(self, dOut, lod=None, *, alpha=1.0, beta=1.0):
        return {"X": dOut.dtype.type(alpha) * dOut}


# -- not differentiable ---------------------------------------------------------------------------
@register
class SimilarityFocus(OpDef):
    """For each batch item and each index i of ``indexes``, take the 2-D slice of X at position
    i of ``axis`` (1, 2 or 3); repeatedly pick its largest element whose row and column are
    both unused until every row or column is used, and set Out to 1 at the picked (row, col)
    for every position of ``axis``. Out is the union over ``indexes`` (0/1, X's shape)."""
    type, inputs, outputs = "similarity_focus", ("X",), ("Out",)
    no_grad = True

    def infer(self, X, *, axis=1, indexes=()):
        _need(self.type, X.ndim == 4, f"X must be 4-D, got shape {list(X.shape)}")
        _need(self.type, axis in (1, 2, 3), f"axis must be 1, 2 or 3, got {axis}")
        _need(self.type, len(indexes) > 0, "indexes must not be empty")
        return {"Out": X}

    def forward(self, X, *, axis=1, indexes=[]):
        _need(self.type, axis in (1, 2, 3), f"axis must be 1, 2 or 3, got {axis}")
        for i in indexes:
            _need(self.type, 0 <= i < X.shape[axis],
                  f"index {i} is out of range for axis {axis} of size {X.shape[axis]}")
        xt = np.moveaxis(X, axis, 1)                 # [B, A, R, C]
        out = np.zeros(xt.shape, X.dtype)
        for b in range(X.shape[0]):
            mask = np.zeros(xt.shape[2:], bool)
            for i in indexes:
                sl = xt[b, i]
                order = np.argsort(-sl, axis=None, kind="stable")
                rows_used = np.zeros(sl.shape[0], bool)
                cols_used = np.zeros(sl.shape[1], bool)
                need = min(sl.shape)
                for flat in order:
                    r, c = divmod(int(flat), sl.shape[1])
                    if rows_used[r] or cols_used[c]:
                        continue
                    rows_used[r] = cols_used[c] = True
                    mask[r, c] = True
                    need -= 1
                    if need == 0:
                        break
            out[b][:, mask] = 1
        return {"Out": np.ascontiguousarray(np.moveaxis(out, 1, axis))}


@register
class MeanIou(OpDef):
    """Per class c: correct[c] = #(pred == label == c), wrong[c] = #(label == c != pred) +
    #(pred == c != label) (plus the ``InWrongs`` / ``InCorrects`` accumulators);
    OutMeanIou = mean over classes with correct + wrong > 0 of correct / (correct + wrong)
    (plus ``InMeanIous``)."""
    type = "mean_iou"
    inputs = ("Predictions", "Labels", "InMeanIou*?", "InWrongs*?", "InCorrects*?")
    outputs = ("OutMeanIou", "OutWrong", "OutCorrect")
    no_grad = True

    def infer(self, Predictions, Labels, InMeanIou=None, InWrongs=None, InCorrects=None, *,
              num_classes=2):
        _need(self.type, num_classes >= 1, f"num_classes must be >= 1, got {num_classes}")
        return {"OutMeanIou": VarSpec([1], "float32"),
                "OutWrong": VarSpec([num_classes], "int32"),
                "OutCorrect": VarSpec([num_classes], "int32")}

    def forward(self, Predictions, Labels, InMeanIou=None, InWrongs=None, InCorrects=None, *,
                num_classes=2):
        p = np.asarray(Predictions).reshape(-1).astype(np.int64)
        t = np.asarray(Labels).reshape(-1).astype(np.int64)
        _need(self.type, p.size == t.size,
              f"Predictions ({p.size} values) and Labels ({t.size}) must have the same size")
        bad = (p < 0) | (p >= num_classes) | (t < 0) | (t >= num_classes)
        _need(self.type, not bad.any(),
              f"class ids must lie in [0, {num_classes}), got predictions in "
              f"[{p.min() if p.size else 0}, {p.max() if p.size else 0}] and labels in "
              f"[{t.min() if t.size else 0}, {t.max() if t.size else 0}]")
        hit = p == t
        correct = np.bincount(p[hit], minlength=num_classes)
        wrong = (np.bincount(p[~hit], minlength=num_classes)
                 + np.bincount(t[~hit], minlength=num_classes))
        for w in InWrongs or []:
            wrong = wrong + np.asarray(w).reshape(-1)
        for c in InCorrects or []:
            correct = correct + np.asarray(c).reshape(-1)
        denom = correct + wrong
        valid = denom > 0
        iou = (correct[valid] / denom[valid]).sum() / max(int(valid.sum()), 1)
        for m in InMeanIou or []:
            iou += float(np.asarray(m).reshape(-1)[0])
        return {"OutMeanIou": np.array([iou], np.float32),
                "OutWrong": wrong.astype(np.int32), "OutCorrect": correct.astype(np.int32)}
