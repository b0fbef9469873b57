"""fluid 1.8's ``spp`` (spatial pyramid pooling) and ``unpool`` (max unpooling by the indices
of ``max_pool2d_with_index``), NCHW, with fluid's slots, attributes and kernel arithmetic."""
from __future__ import annotations

import math
from typing import List, Tuple

import numpy as np

from ..core.dtypes import INTS, convert_dtype
from ..core.registry import OpDef, VarSpec, register
from .conv import c_div
from .pool import _geom, _pool_bwd, _pool_fwd
from .tensor import emit_grad_op


def _need(op: str, cond: bool, msg: str) -> None:
    if not cond:
        raise ValueError(f"{op}: {msg}")


def _spp_levels(h: int, w: int, pyramid_height: int) -> List[Tuple[int, List[int], List[int]]]:
    """Per level p: (bins = 2^p, kernel = strides = ceil(size / bins), paddings =
    (kernel * bins - size + 1) / 2), fluid's SppKernel arithmetic."""
    levels = []
    for p in range(pyramid_height):
        bins = 2 ** p
        kh, kw = math.ceil(h / bins), math.ceil(w / bins)
        pads = [c_div(kh * bins - h + 1, 2), c_div(kw * bins - w + 1, 2)]
        levels.append((bins, [kh, kw], pads))
    return levels


@register
class Spp(OpDef):
    """Spatial pyramid pooling: for level p < pyramid_height, X [N, C, H, W] is max- or
    (exclusive) avg-pooled into 2^p x 2^p bins (kernel = stride = ceil(size / 2^p), padding
    (kernel * 2^p - size + 1) / 2), each flattened to [N, C * 4^p]; Out concatenates the
    levels: [N, C * (4^H - 1) / 3]. dX sums the levels' pool2d gradients."""
    type, inputs, outputs = "spp", ("X",), ("Out",)
    grad_uses = ("X", "Out")

    def infer(self, X, *, pyramid_height=1, pooling_type="max"):
        _need(self.type, X.ndim == 4, f"X must be 4-D [N, C, H, W], got {list(X.shape)}")
        _need(self.type, pyramid_height >= 1,
              f"pyramid_height must be >= 1, got {pyramid_height}")
        _need(self.type, pooling_type in ("max", "avg"),
              f"pooling_type must be 'max' or 'avg', got {pooling_type!r}")
        c = X.shape[1]
        width = c * (4 ** pyramid_height - 1) // 3 if c >= 0 else -1
        return {"Out": VarSpec((X.shape[0], width), X.dtype)}

    def _geoms(self, X, pyramid_height):
        h, w = X.shape[2:]
        out = []
        for bins, k, p in _spp_levels(h, w, pyramid_height):
            g = _geom(X, k, k, p, False, False, "EXPLICIT")
            _need(self.type, (g.oh, g.ow) == (bins, bins),
                  f"level {len(out)} pools {h}x{w} into {g.oh}x{g.ow} bins, not {bins}x{bins}")
            out.append(g)
        return out

    def forward(self, X, *, pyramid_height=1, pooling_type="max"):
        n = X.shape[0]
        parts = [_pool_fwd(X, g, pooling_type, True).reshape(n, -1)
                 for g in self._geoms(X, pyramid_height)]
        return {"Out": np.concatenate(parts, axis=1)}

    def backward(self, X, Out, dOut, *, pyramid_height=1, pooling_type="max"):
        n, c = X.shape[:2]
        dx = np.zeros(X.shape, dOut.dtype)
        at = 0
        for g in self._geoms(X, pyramid_height):
            width = c * g.oh * g.ow
            shape = (n, c, g.oh, g.ow)
            out = np.ascontiguousarray(Out[:, at:at + width]).reshape(shape)
            d = np.ascontiguousarray(dOut[:, at:at + width]).reshape(shape)
            dx += _pool_bwd(X, out, d, g, pooling_type, True)
            at += width
        return {"X": dx}


def _unpool_size(size: int, k: int, s: int, p: int) -> int:
    return -1 if size < 0 else (size - 1) * s - 2 * p + k


@register
class Unpool(OpDef):
    """Max unpooling: Out [N, C, (H-1)*s - 2p + k, ...] is zero but for Out[n, c].flat[
    Indices[n, c, i, j]] = X[n, c, i, j] (Indices: flat positions in the output map, as
    ``max_pool2d_with_index``'s Mask); dX = dOut gathered at Indices."""
    type, inputs, outputs = "unpool", ("X", "Indices"), ("Out",)
    grad_uses = ("X", "Indices")

    def infer(self, X, Indices, *, unpooling_type="max", ksize=(), strides=(1, 1),
              paddings=(0, 0)):
        _need(self.type, X.ndim == 4, f"X must be 4-D [N, C, H, W], got {list(X.shape)}")
        _need(self.type, unpooling_type == "max",
              f"unpooling_type must be 'max', got {unpooling_type!r}")
        _need(self.type, len(ksize) == 2 and len(strides) == 2 and len(paddings) == 2,
              f"ksize, strides and paddings must have 2 values, got {list(ksize)}, "
              f"{list(strides)}, {list(paddings)}")
        _need(self.type, Indices.dtype in INTS,
              f"Indices must be an int32 tensor, but it is {convert_dtype(Indices.dtype)}")
        _need(self.type, len(Indices.shape) == 4 and all(
            a == b or a < 0 or b < 0 for a, b in zip(Indices.shape, X.shape)),
            f"Indices {list(Indices.shape)} must have X's shape {list(X.shape)}")
        out = [_unpool_size(X.shape[2 + i], ksize[i], strides[i], paddings[i]) for i in (0, 1)]
        return {"Out": VarSpec(list(X.shape[:2]) + out, X.dtype)}

    def forward(self, X, Indices, *, unpooling_type="max", ksize=[], strides=[1, 1],
                paddings=[0, 0]):
        n, c, h, w = X.shape
        oh, ow = (_unpool_size(X.shape[2 + i], ksize[i], strides[i], paddings[i])
                  for i in (0, 1))
        idx = Indices.reshape(n * c, h * w).astype(np.int64, copy=False)
        _need(self.type, idx.size == 0 or (idx.min() >= 0 and idx.max() < oh * ow),
              f"an index lies outside the {oh}x{ow} output map")
        out = np.zeros((n * c, oh * ow), X.dtype)
        np.put_along_axis(out, idx, X.reshape(n * c, h * w), axis=1)
        return {"Out": out.reshape(n, c, oh, ow)}

    def backward(self, X, Indices, dOut, *, unpooling_type="max", ksize=[], strides=[1, 1],
                 paddings=[0, 0]):
        n, c, h, w = X.shape
        idx = Indices.reshape(n * c, h * w).astype(np.int64, copy=False)
        d = dOut.reshape(n * c, -1)
        return {"X": np.take_along_axis(d, idx, axis=1).reshape(X.shape)}

    def make_grad(self, g, **attrs):
        emit_grad_op(g, self.type, attrs, uses=("X", "Indices"), out_grads=("Out",),
                     in_grads=("X",))
