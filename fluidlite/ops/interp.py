"""Image resizing: ``bilinear_interp``, ``nearest_interp``, ``bicubic_interp`` and
``trilinear_interp`` (fluid 1.8's interpolate ops, NCHW/NHWC and NCDHW/NDHWC), and
``linear_interp`` (Paddle 2.x's 1-D resize, NCW/NWC).

Every method fluid implements is separable: along each spatial axis an output index ``k`` reads
one or two input indices with fixed weights. So the op builds one small ``[out, in]`` weight
matrix per axis and applies them with ``tensordot`` (one BLAS call per axis, no per-pixel loop);
the input gradient applies the transposed matrices.

fluid's index rule per axis (``in`` input size, ``out`` output size)::

    ratio = 0                       if out <= 1
          = (in - 1) / (out - 1)    if align_corners
          = in / out                otherwise
    nearest:  src = int(ratio * k + 0.5) if align_corners else int(ratio * k)
    linear:   with align_flag = (align_mode == 0 and not align_corners)
              lo = max(int(ratio * (k + 0.5) - 0.5) if align_flag else int(ratio * k), 0)
              hi = lo + (lo < in - 1)
              d  = max(ratio * (k + 0.5) - 0.5, 0) - lo   if align_flag
                 = ratio * k - lo                         otherwise
              out[k] = (1 - d) * x[lo] + d * x[hi]

Bicubic reads 4 taps per axis (``_bicubic_matrix``: fluid's cubic convolution, A = -0.75,
taps clamped to the input). The output size comes, highest priority first, from
``SizeTensor`` (a list of 1-element int tensors), ``OutSize`` (a 1-D int tensor), a positive
scale (the ``Scale`` tensor, else the ``scale`` attr: ``out = int(in * scale)`` with a float32
product), then the ``out_d`` / ``out_h`` / ``out_w`` attrs.
"""
from __future__ import annotations

from typing import Any, List, Sequence

import numpy as np

from ..core.registry import OpDef, VarSpec, register

__all__ = ["interp_matrix", "resize", "resize_taps"]


def _scaled(size: int, scale: float) -> int:
    """fluid's ``static_cast<int>(in * scale)``: a float32 product (``scale`` is a float attr
    or a float tensor), truncated."""
    return int(np.float32(size) * np.float32(scale))


_CUBIC_A = -0.75          # fluid's cubic convolution coefficient (Keys, as OpenCV)


def _bicubic_matrix(n_in: int, n_out: int, ratio: Any, rk: np.ndarray,
                    align_corners: bool) -> np.ndarray:
    """fluid's BicubicInterpolation along one axis: source position ``ratio * k``
    (align_corners) or ``ratio * (k + 0.5) - 0.5``, the 4 taps floor(pos) - 1 .. + 2 clamped
    to the input, weighted by the cubic convolution kernel with A = -0.75."""
    k = np.arange(n_out)
    pos = rk.astype(np.float64) if align_corners else np.float64(ratio) * (k + 0.5) - 0.5
    base = np.floor(pos).astype(np.int64)
    t = pos - base
    a = _CUBIC_A

    def conv1(x):           # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def conv2(x):           # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    weights = (conv2(t + 1.0), conv1(t), conv1(1.0 - t), conv2(2.0 - t))
    m = np.zeros((n_out, n_in))
    for i, w in enumerate(weights):
        np.add.at(m, (k, np.clip(base - 1 + i, 0, n_in - 1)), w)
    return m


def interp_matrix(n_in: int, n_out: int, method: str, align_corners: bool,
                  align_mode: int) -> np.ndarray:
    """The ``[n_out, n_in]`` weights of one axis (see the module docstring), with fluid's C++
    number types: ``ratio`` and ``ratio * k`` are float32, ``ratio * (k + 0.5) - 0.5`` is a
    double (0.5 is a double literal) and the weights ``d``, ``1 - d`` are float32, so the
    indices and weights are fluid's bit for bit (weights like 1.4 -> 1.39999998)."""
    f32 = np.float32
    ratio = f32(0)
    if n_out > 1:
        ratio = f32(n_in - 1) / f32(n_out - 1) if align_corners else f32(n_in) / f32(n_out)
    k = np.arange(n_out)
    rk = ratio * k.astype(f32)                                   # float * int: float
    m = np.zeros((n_out, n_in))
    rows = np.arange(n_out)
    if method == "nearest":
        src = (rk.astype(np.float64) + 0.5 if align_corners else rk).astype(np.int64)
        m[rows, np.minimum(src, n_in - 1)] = 1.0
        return m
    if method == "bicubic":
        return _bicubic_matrix(n_in, n_out, ratio, rk, align_corners)
    flag = align_mode == 0 and not align_corners
    centre = np.float64(ratio) * (k + 0.5) - 0.5                 # double
    lo = np.maximum((centre if flag else rk).astype(np.int64), 0)   # int() truncates
    lo = np.minimum(lo, n_in - 1)
    hi = lo + (lo < n_in - 1)
    d = (np.maximum(centre.astype(f32), f32(0)) if flag else rk) - lo.astype(f32)
    np.add.at(m, (rows, lo), (f32(1) - d).astype(np.float64))
    np.add.at(m, (rows, hi), d.astype(np.float64))
    return m


def resize(x: np.ndarray, mats: Sequence[np.ndarray], axes: Sequence[int]) -> np.ndarray:
    """Apply the per-axis matrices ``mats`` (``[out, in]``) along ``axes`` of ``x`` (dense;
    used for gradients and by the pooling ops)."""
    out = x
    for m, a in zip(mats, axes):
        out = np.moveaxis(np.tensordot(m, out, axes=([1], [a])), 0, a)
    return out


def resize_taps(x: np.ndarray, mats: Sequence[np.ndarray], axes: Sequence[int]) -> np.ndarray:
    """``resize`` for interpolation matrices, which have at most two non-zeros per row: along
    each axis, two gathers and a weighted sum (O(output) work instead of a dense product)."""
    out = x
    for m, a in zip(mats, axes):
        lo = m.argmax(axis=1)
        rows = np.arange(m.shape[0])
        w_lo = m[rows, lo]
        rest = m.copy()
        rest[rows, lo] = 0.0
        hi = rest.argmax(axis=1)
        w_hi = rest[rows, hi]
        shape = [1] * out.ndim
        shape[a] = -1
        w_lo = w_lo.astype(out.dtype).reshape(shape)
        w_hi = w_hi.astype(out.dtype).reshape(shape)
        out = np.take(out, lo, axis=a) * w_lo + np.take(out, hi, axis=a) * w_hi
    return out


_NEAREST_COPIES_MIN = 1 << 16     # output elements below which the check costs more than it saves


def _nearest_axis(x: np.ndarray, idx: np.ndarray, axis: int) -> np.ndarray:
    """``np.take(x, idx, axis)``; where ``idx`` repeats each index k >= 2 times in order (an
    integer up-sampling without corner alignment: an FPN's 2x), k copies of ``x`` into the
    phases of the output along ``axis`` instead -- the same values; a copy whose source runs
    along the row where the gather fetches element by element (96 channels 80x80 -> 160x160:
    1.4 against 2.8 ms for both axes)."""
    n = x.shape[axis]
    k = len(idx) // n if n else 0
    if k < 2 or len(idx) != k * n or x.size * k < _NEAREST_COPIES_MIN \
            or not np.array_equal(idx, np.arange(len(idx)) // k):
        return np.take(x, idx, axis=axis)
    out = np.empty(x.shape[:axis] + (n, k) + x.shape[axis + 1:], x.dtype)
    for j in range(k):
        np.copyto(out[(slice(None),) * (axis + 1) + (j,)], x)
    return out.reshape(x.shape[:axis] + (n * k,) + x.shape[axis + 1:])


_LAYOUTS = {3: ({"NCW": False, "NWC": True, "NCHW": False, "NHWC": True, "AnyLayout": False},
                "NCW or NWC"),
            4: ({"NCHW": False, "NHWC": True, "AnyLayout": False}, "NCHW or NHWC"),
            5: ({"NCDHW": False, "NDHWC": True, "NCHW": False, "NHWC": True,
                 "AnyLayout": False}, "NCDHW or NDHWC")}


def _spatial_axes(op: str, ndim: int, data_layout: str) -> List[int]:
    table, names_ = _LAYOUTS.get(ndim, ({}, ""))
    if ndim not in _LAYOUTS:
        raise ValueError(f"{op}: X must be 3-D (linear), 4-D (bilinear/nearest) or 5-D "
                         f"(trilinear), got {ndim}-D")
    if data_layout not in table:
        raise ValueError(f"{op}: data_layout must be {names_} for a {ndim}-D input, got "
                         f"{data_layout!r}")
    n = ndim - 2
    return list(range(1, 1 + n)) if table[data_layout] else list(range(2, 2 + n))


class _Interp(OpDef):
    inputs = ("X", "OutSize?", "SizeTensor*?", "Scale?")
    outputs = ("Out",)
    grad_uses = ("X", "OutSize", "SizeTensor", "Scale")
    method = ""
    rank = 4
    extra_attrs = {"use_mkldnn": False}

    def _attr_sizes(self, out_d: int, out_h: int, out_w: int) -> List[int]:
        return {3: [out_w], 4: [out_h, out_w]}.get(self.rank, [out_d, out_h, out_w])

    def _check(self, X_ndim: int, interp_method: str, align_mode: int) -> None:
        if X_ndim != self.rank:
            raise ValueError(f"{self.type}: X must be {self.rank}-D, got {X_ndim}-D")
        if interp_method != self.method:
            raise ValueError(f"{self.type}: interp_method must be {self.method!r}, got "
                             f"{interp_method!r}")
        if align_mode not in (0, 1):
            raise ValueError(f"{self.type}: align_mode must be 0 or 1, got {align_mode}")

    def infer(self, X, OutSize=None, SizeTensor=None, Scale=None, *, data_layout="NCHW",
              out_d=0, out_h=0, out_w=0, scale=0.0, interp_method="", align_corners=True,
              align_mode=1):
        self._check(X.ndim, interp_method or self.method, align_mode)
        axes = _spatial_axes(self.type, X.ndim, data_layout)
        shape = list(X.shape)
        if SizeTensor:          # fluid keeps the attr sizes (-1 where a tensor decides)
            sizes = [v if v > 0 else -1 for v in self._attr_sizes(out_d, out_h, out_w)]
        elif Scale is not None:
            sizes = [-1] * len(axes)
        elif scale > 0:
            sizes = [_scaled(shape[a], scale) if shape[a] > 0 else -1 for a in axes]
        else:
            sizes = self._attr_sizes(out_d, out_h, out_w)
            if OutSize is None and any(s <= 0 for s in sizes):
                raise ValueError(f"{self.type}: the output size {sizes} must be positive "
                                 f"(set out_h/out_w, a scale > 0, OutSize or SizeTensor)")
        for a, s in zip(axes, sizes):
            shape[a] = s if s > 0 else -1
        return {"Out": VarSpec(shape, X.dtype, X.lod_level)}

    def _sizes(self, X, OutSize, SizeTensor, Scale, axes, out_d, out_h, out_w,
               scale) -> List[int]:
        if Scale is not None:
            scale = float(np.asarray(Scale).reshape(-1)[0])
        sizes = self._attr_sizes(out_d, out_h, out_w)
        if scale > 0:
            sizes = [_scaled(X.shape[a], scale) for a in axes]
        if OutSize is not None:
            sizes = [int(v) for v in np.asarray(OutSize).reshape(-1)]
        if SizeTensor:
            sizes = [int(np.asarray(t).reshape(-1)[0]) for t in SizeTensor]
        if len(sizes) != len(axes) or any(s <= 0 for s in sizes):
            raise ValueError(f"{self.type}: the output size must be {len(axes)} positive "
                             f"values, got {sizes}")
        return sizes

    def _mats(self, X, OutSize, SizeTensor, Scale, attrs) -> Any:
        self._check(X.ndim, attrs["interp_method"] or self.method, attrs["align_mode"])
        axes = _spatial_axes(self.type, X.ndim, attrs["data_layout"])
        sizes = self._sizes(X, OutSize, SizeTensor, Scale, axes, attrs["out_d"],
                            attrs["out_h"], attrs["out_w"], attrs["scale"])
        mats = [interp_matrix(X.shape[a], s, self.method, attrs["align_corners"],
                              attrs["align_mode"]) for a, s in zip(axes, sizes)]
        return mats, axes

    def forward(self, X, OutSize=None, SizeTensor=None, Scale=None, *, data_layout="NCHW",
                out_d=0, out_h=0, out_w=0, scale=0.0, interp_method="", align_corners=True,
                align_mode=1):
        mats, axes = self._mats(X, OutSize, SizeTensor, Scale, dict(
            data_layout=data_layout, out_d=out_d, out_h=out_h, out_w=out_w, scale=scale,
            interp_method=interp_method, align_corners=align_corners, align_mode=align_mode))
        if self.method == "nearest":       # a gather: exact for every dtype (uint8 too)
            out = X
            for m, a in zip(mats, axes):
                out = _nearest_axis(out, m.argmax(axis=1), a)
            return {"Out": np.ascontiguousarray(out)}
        work = X if X.dtype.kind == "f" else X.astype(np.float64)
        if self.method == "bicubic":        # 4 taps per output: the dense per-axis product
            out = resize(work, [m.astype(work.dtype) for m in mats], axes)
        else:
            out = resize_taps(work, mats, axes)
        return {"Out": np.ascontiguousarray(out.astype(X.dtype, copy=False))}

    def backward(self, X, OutSize, SizeTensor, Scale, dOut, *, data_layout="NCHW", out_d=0,
                 out_h=0, out_w=0, scale=0.0, interp_method="", align_corners=True,
                 align_mode=1):
        mats, axes = self._mats(X, OutSize, SizeTensor, Scale, dict(
            data_layout=data_layout, out_d=out_d, out_h=out_h, out_w=out_w, scale=scale,
            interp_method=interp_method, align_corners=align_corners, align_mode=align_mode))
        dx = resize(dOut, [m.T.astype(dOut.dtype) for m in mats], axes)
        return {"X": np.ascontiguousarray(dx)}


@register
class BilinearInterp(_Interp):
    """Bilinear resize of the H and W axes (fluid's index rule, module docstring);
    dX = the transposed interpolation applied to dOut."""
    type, method = "bilinear_interp", "bilinear"


@register
class NearestInterp(_Interp):
    """Nearest-neighbour resize of H and W (``align_corners`` rounds, else truncates);
    dX scatters dOut back to the source pixels."""
    type, method = "nearest_interp", "nearest"


@register
class BicubicInterp(_Interp):
    """Bicubic resize of H and W (fluid 1.8's ``bicubic_interp``: 4 x 4 taps clamped to the
    map, cubic convolution with A = -0.75; ``align_corners`` maps corners to corners, else
    half-pixel centres; ``align_mode`` is not used); dX = the transposed resize of dOut."""
    type, method = "bicubic_interp", "bicubic"


@register
class TrilinearInterp(_Interp):
    """Trilinear resize of the D, H and W axes of a 5-D input (bilinear's rule on 3 axes);
    dX = the transposed interpolation applied to dOut."""
    type, method, rank = "trilinear_interp", "trilinear", 5


@register
class LinearInterp(_Interp):
    """Linear resize of the W axis of a 3-D input (Paddle 2.x's ``linear_interp_v2``, which
    the program reader maps here; bilinear's rule on one axis, NCW or NWC);
    dX = the transposed interpolation applied to dOut."""
    type, method, rank = "linear_interp", "linear", 3
