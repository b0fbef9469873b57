"""Deformable convolution: ``deformable_conv`` (v2, modulated by Mask) and
``deformable_conv_v1`` (no mask), fluid 1.8's ops (NCHW).

Kernel tap k = (i, j) of output (y, x) samples the input at
``h = y*sh - ph + i*dh + Offset[n, 2*(g*K + k)]``, ``w = x*sw - pw + j*dw + Offset[n, 2*(g*K+k)+1]``
(g the deformable group of the channel, K = kh*kw) with fluid's bilinear rule: a point with
h <= -1, h >= H, w <= -1 or w >= W reads 0, otherwise the in-range corners of its cell are
blended. The sample (times Mask[n, g*K + k] for v2) forms the im2col columns; Output is the
grouped GEMM of Filter with them. Everything is vectorised over (n, group, tap, position): four
corner gathers forward, four ``np.add.at`` scatters backward.

Gradients: dInput scatters the bilinear weights, dOffset is the derivative of the bilinear
blend in h and w, dMask the unmasked sample, dFilter the column GEMM.
"""
from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, Tuple

import numpy as np

from ..core.registry import OpDef, VarSpec, get_op_def, register
from .conv import LazyOutputs, c_div


def _need(op: str, cond: bool, msg: str) -> None:
    if not cond:
        raise ValueError(f"{op}: {msg}")


class _Samples(NamedTuple):
    corners: List[Tuple[np.ndarray, np.ndarray, np.ndarray, int, int]]   # hi, wi, w*valid
    lh: np.ndarray
    lw: np.ndarray
    inside: np.ndarray
    values: List[np.ndarray]            # per corner: the gathered input [N,dg,K,oh,ow,Cg]
    val: np.ndarray                     # the blended sample (before the mask)


def _out_size(op: str, H: int, W: int, kh: int, kw: int, strides, paddings, dilations):
    _need(op, min(strides) >= 1 and min(dilations) >= 1,   # 0 would divide by zero
          f"every value of strides and dilations must be >= 1, got strides {list(strides)}, "
          f"dilations {list(dilations)}")
    # fluid's ConvOutputSize: C++ int division (truncated toward zero)
    oh = c_div(H + 2 * paddings[0] - (dilations[0] * (kh - 1) + 1), strides[0]) + 1
    ow = c_div(W + 2 * paddings[1] - (dilations[1] * (kw - 1) + 1), strides[1]) + 1
    _need(op, oh > 0 and ow > 0, f"the output would be empty (input {H}x{W}, kernel "
                                 f"{kh}x{kw}, paddings {list(paddings)}, strides "
                                 f"{list(strides)}, dilations {list(dilations)})")
    return oh, ow


def _sample(x: np.ndarray, offset: np.ndarray, kh: int, kw: int, dg: int, strides, paddings,
            dilations) -> _Samples:
    N, C, H, W = x.shape
    K = kh * kw
    oh, ow = offset.shape[2], offset.shape[3]
    off = offset.reshape(N, dg, K, 2, oh, ow).astype(np.float64)
    ki, kj = np.arange(K) // kw, np.arange(K) % kw
    base_h = (np.arange(oh) * strides[0] - paddings[0])[None, None, None, :, None] + \
        (ki * dilations[0])[None, None, :, None, None]
    base_w = (np.arange(ow) * strides[1] - paddings[1])[None, None, None, None, :] + \
        (kj * dilations[1])[None, None, :, None, None]
    h = base_h + off[:, :, :, 0]
    w = base_w + off[:, :, :, 1]
    inside = (h > -1) & (h < H) & (w > -1) & (w < W)
    hl, wl = np.floor(h), np.floor(w)
    lh, lw = h - hl, w - wl
    xg = x.reshape(N, dg, C // dg, H, W)
    n_idx = np.arange(N).reshape(N, 1, 1, 1, 1)
    g_idx = np.arange(dg).reshape(1, dg, 1, 1, 1)
    corners, values = [], []
    val = 0.0
    for dy in (0, 1):
        for dx in (0, 1):
            hi, wi = (hl + dy).astype(np.int64), (wl + dx).astype(np.int64)
            valid = inside & (hi >= 0) & (hi <= H - 1) & (wi >= 0) & (wi <= W - 1)
            weight = (lh if dy else 1 - lh) * (lw if dx else 1 - lw) * valid
            hc, wc = np.clip(hi, 0, H - 1), np.clip(wi, 0, W - 1)
            # fluid reads no corner outside the map: a 0 there, not x * 0 (inf * 0 is NaN)
            v = np.where(valid[..., None], xg[n_idx, g_idx, :, hc, wc],
                         x.dtype.type(0))                              # [N,dg,K,oh,ow,Cg]
            corners.append((hc, wc, weight, dy, dx))
            values.append(v)
            val = val + v * weight[..., None]
    return _Samples(corners, lh, lw, inside, values, val)


def _cols(val: np.ndarray, mask: Any, N: int, C: int, K: int, L: int) -> np.ndarray:
    m = val if mask is None else val * mask[..., None]
    # [N, dg, K, oh, ow, Cg] -> [N, dg, Cg, K, oh, ow] -> [N, C*K, L]
    return np.ascontiguousarray(m.transpose(0, 1, 5, 2, 3, 4)).reshape(N, C * K, L)


class _DeformBase(OpDef):
    outputs = ("Output",)
    modulated = True

    def _geom(self, x_shape, off_shape, f_shape, strides, paddings, dilations, groups, dg):
        _need(self.type, len(x_shape) == 4, f"Input must be 4-D (NCHW), got {list(x_shape)}")
        _need(self.type, len(f_shape) == 4, f"Filter must be 4-D, got {list(f_shape)}")
        for name, v in (("strides", strides), ("paddings", paddings),
                        ("dilations", dilations)):
            _need(self.type, len(v) == 2, f"{name} must have 2 values, got {list(v)}")
        _need(self.type, groups >= 1 and dg >= 1,
              f"groups and deformable_groups must be >= 1, got {groups} and {dg}")
        N, C, H, W = x_shape
        F, Cg, kh, kw = f_shape
        _need(self.type, C < 0 or (C == Cg * groups and C % dg == 0),
              f"Input has {C} channels; Filter {list(f_shape)} with groups={groups} expects "
              f"{Cg * groups}, and deformable_groups={dg} must divide it")
        _need(self.type, F % groups == 0, f"the number of filters {F} must be divisible by "
                                          f"groups {groups}")
        _need(self.type, len(off_shape) == 4 and off_shape[1] in (-1, 2 * dg * kh * kw),
              f"Offset must be [N, 2*deformable_groups*kh*kw = {2 * dg * kh * kw}, oh, ow], "
              f"got {list(off_shape)}")
        if H < 0 or W < 0:
            return -1, -1
        return _out_size(self.type, H, W, kh, kw, strides, paddings, dilations)

    def _infer(self, Input, Offset, Mask, Filter, strides, paddings, dilations, groups, dg):
        oh, ow = self._geom(Input.shape, Offset.shape, Filter.shape, strides, paddings,
                            dilations, groups, dg)
        if Mask is not None:
            K = Filter.shape[2] * Filter.shape[3]
            _need(self.type, Mask.ndim == 4 and Mask.shape[1] in (-1, dg * K),
                  f"Mask must be [N, deformable_groups*kh*kw = {dg * K}, oh, ow], got "
                  f"{list(Mask.shape)}")
        return {"Output": VarSpec([Input.shape[0], Filter.shape[0], oh, ow], Input.dtype)}

    def _forward(self, Input, Offset, Mask, Filter, strides, paddings, dilations, groups, dg):
        oh, ow = self._geom(Input.shape, Offset.shape, Filter.shape, strides, paddings,
                            dilations, groups, dg)
        _need(self.type, tuple(Offset.shape[2:]) == (oh, ow),
              f"Offset's spatial size {list(Offset.shape[2:])} must be the output size "
              f"{[oh, ow]}")
        N, C = Input.shape[:2]
        F, _, kh, kw = Filter.shape
        K, L = kh * kw, oh * ow
        s = _sample(Input, Offset, kh, kw, dg, strides, paddings, dilations)
        mask = None if Mask is None else Mask.reshape(N, dg, K, oh, ow).astype(np.float64)
        cols = _cols(s.val, mask, N, C, K, L)
        wg = Filter.reshape(groups, F // groups, -1).astype(np.float64)
        out = np.einsum("gfr,ngrl->ngfl", wg, cols.reshape(N, groups, -1, L), optimize=True)
        return out.reshape(N, F, oh, ow).astype(Input.dtype), s, mask, cols

    def _backward(self, Input, Offset, Mask, Filter, dOutput, strides, paddings, dilations,
                  groups, dg) -> Dict[str, Any]:
        _, s, mask, cols = self._forward(Input, Offset, Mask, Filter, strides, paddings,
                                         dilations, groups, dg)
        N, C, H, W = Input.shape
        F, _, kh, kw = Filter.shape
        K = kh * kw
        oh, ow = dOutput.shape[2:]
        L = oh * ow
        dy = dOutput.reshape(N, groups, F // groups, L).astype(np.float64)
        wg = Filter.reshape(groups, F // groups, -1).astype(np.float64)

        def dfilter() -> np.ndarray:
            dw = np.einsum("ngfl,ngrl->gfr", dy, cols.reshape(N, groups, -1, L), optimize=True)
            return dw.reshape(Filter.shape).astype(Filter.dtype)

        cache: Dict[str, np.ndarray] = {}

        def dsample() -> np.ndarray:      # d loss / d (masked sample) as [N,dg,K,oh,ow,Cg]
            if "ds" not in cache:
                dcols = np.einsum("gfr,ngfl->ngrl", wg, dy, optimize=True)
                d = dcols.reshape(N, dg, C // dg, K, oh, ow).transpose(0, 1, 3, 4, 5, 2)
                cache["ds"] = d
            return cache["ds"]

        def dval() -> np.ndarray:
            return dsample() if mask is None else dsample() * mask[..., None]

        def dinput() -> np.ndarray:
            dxg = np.zeros((N, dg, C // dg, H, W))
            n_idx = np.arange(N).reshape(N, 1, 1, 1, 1)
            g_idx = np.arange(dg).reshape(1, dg, 1, 1, 1)
            dv = dval()
            for hc, wc, weight, _, _ in s.corners:
                np.add.at(dxg, (n_idx, g_idx, slice(None), hc, wc), dv * weight[..., None])
            return dxg.reshape(Input.shape).astype(Input.dtype)

        def doffset() -> np.ndarray:
            dv = dval()
            gh = np.zeros(s.lh.shape)
            gw = np.zeros(s.lh.shape)
            for (hc, wc, weight, ddy, ddx), v in zip(s.corners, s.values):
                proj = (dv * v).sum(axis=-1)
                gh += proj * (1.0 if ddy else -1.0) * (s.lw if ddx else 1 - s.lw)
                gw += proj * (1.0 if ddx else -1.0) * (s.lh if ddy else 1 - s.lh)
            g = np.stack([gh * s.inside, gw * s.inside], axis=3)    # [N,dg,K,2,oh,ow]
            return g.reshape(Offset.shape).astype(Offset.dtype)

        def dmask() -> np.ndarray:
            return (dsample() * s.val).sum(axis=-1).reshape(Mask.shape).astype(Mask.dtype)

        grads = {"Input@GRAD": dinput, "Offset@GRAD": doffset, "Filter@GRAD": dfilter}
        if Mask is not None:
            grads["Mask@GRAD"] = dmask
        return LazyOutputs(grads)


@register
class DeformableConv(_DeformBase):
    """Modulated deformable convolution (DCN v2): im2col samples at learned Offsets, scaled by
    Mask, then a grouped GEMM with Filter (module docstring); gradients for Input, Offset,
    Mask and Filter."""
    type = "deformable_conv"
    inputs = ("Input", "Offset", "Mask", "Filter")

    def infer(self, Input, Offset, Mask, Filter, *, strides=(1, 1), paddings=(0, 0),
              dilations=(1, 1), groups=1, deformable_groups=1, im2col_step=64):
        return self._infer(Input, Offset, Mask, Filter, strides, paddings, dilations, groups,
                           deformable_groups)

    def forward(self, Input, Offset, Mask, Filter, *, strides=[1, 1], paddings=[0, 0],
                dilations=[1, 1], groups=1, deformable_groups=1, im2col_step=64):
        return {"Output": self._forward(Input, Offset, Mask, Filter, strides, paddings,
                                        dilations, groups, deformable_groups)[0]}

    def make_grad(self, g, **attrs):
        g.append("deformable_conv_grad",
                 {"Input": g.input("Input"), "Offset": g.input("Offset"),
                  "Mask": g.input("Mask"), "Filter": g.input("Filter"),
                  "Output@GRAD": g.output_grad("Output")},
                 {"Input@GRAD": g.input_grad("Input"), "Offset@GRAD": g.input_grad("Offset"),
                  "Mask@GRAD": g.input_grad("Mask"), "Filter@GRAD": g.input_grad("Filter")},
                 attrs)


@register
class DeformableConvGrad(_DeformBase):
    """Gradient of deformable_conv (Input, Offset, Mask, Filter)."""
    type = "deformable_conv_grad"
    inputs = ("Input", "Offset", "Mask", "Filter", "Output@GRAD")
    outputs = ("Input@GRAD?", "Offset@GRAD?", "Mask@GRAD?", "Filter@GRAD?")
    no_grad = True

    def infer(self, *specs, **attrs):
        return {}

    def forward(self, Input, Offset, Mask, Filter, dOutput, *, strides=[1, 1],
                paddings=[0, 0], dilations=[1, 1], groups=1, deformable_groups=1,
                im2col_step=64):
        return self._backward(Input, Offset, Mask, Filter, dOutput, strides, paddings,
                              dilations, groups, deformable_groups)


@register
class DeformableConvV1(_DeformBase):
    """Deformable convolution v1: as deformable_conv without the Mask."""
    type = "deformable_conv_v1"
    inputs = ("Input", "Offset", "Filter")

    def infer(self, Input, Offset, Filter, *, strides=(1, 1), paddings=(0, 0),
              dilations=(1, 1), groups=1, deformable_groups=1, im2col_step=64):
        return self._infer(Input, Offset, None, Filter, strides, paddings, dilations, groups,
                           deformable_groups)

    def forward(self, Input, Offset, Filter, *, strides=[1, 1], paddings=[0, 0],
                dilations=[1, 1], groups=1, deformable_groups=1, im2col_step=64):
        return {"Output": self._forward(Input, Offset, None, Filter, strides, paddings,
                                        dilations, groups, deformable_groups)[0]}

    def make_grad(self, g, **attrs):
        g.append("deformable_conv_v1_grad",
                 {"Input": g.input("Input"), "Offset": g.input("Offset"),
                  "Filter": g.input("Filter"), "Output@GRAD": g.output_grad("Output")},
                 {"Input@GRAD": g.input_grad("Input"), "Offset@GRAD": g.input_grad("Offset"),
                  "Filter@GRAD": g.input_grad("Filter")}, attrs)


@register
class DeformableConvV1Grad(_DeformBase):
    """Gradient of deformable_conv_v1 (Input, Offset, Filter)."""
    type = "deformable_conv_v1_grad"
    inputs = ("Input", "Offset", "Filter", "Output@GRAD")
    outputs = ("Input@GRAD?", "Offset@GRAD?", "Filter@GRAD?")
    no_grad = True

    def infer(self, *specs, **attrs):
        return {}

    def forward(self, Input, Offset, Filter, dOutput, *, strides=[1, 1], paddings=[0, 0],
                dilations=[1, 1], groups=1, deformable_groups=1, im2col_step=64):
        return self._backward(Input, Offset, None, Filter, dOutput, strides, paddings,
                              dilations, groups, deformable_groups)


DeformableConvGrad.forward_def = get_op_def("deformable_conv")
DeformableConvV1Grad.forward_def = get_op_def("deformable_conv_v1")
