"""Elementwise binary ops with fluid 1.x ``axis`` broadcasting, and ``scale``.

fluid broadcasting: Y's shape (trailing 1s trimmed) equals a contiguous slice of X's shape that
starts at ``axis`` (-1: right-aligned). The kernels reshape Y so numpy broadcasting applies, and
the gradient of the smaller operand is summed back to its shape.
"""
from __future__ import annotations

from typing import Tuple

import numpy as np

from ..core import shape as S
from ..core.registry import OpDef, VarSpec, register


def align(x_ndim: int, y: np.ndarray, axis: int) -> np.ndarray:
    """Reshape ``y`` so it broadcasts against an ``x_ndim``-d array per fluid's ``axis`` rule."""
    if y.ndim == x_ndim:
        return y
    if axis == -1:
        axis = x_ndim - y.ndim
    shape = list(y.shape)
    while shape and shape[-1] == 1 and len(shape) + axis > x_ndim:
        shape.pop()
    return y.reshape([1] * axis + shape + [1] * (x_ndim - axis - len(shape)))


def reduce_to(grad: np.ndarray, shape: Tuple[int, ...]) -> np.ndarray:
    """Sum ``grad`` over the dims that were broadcast to produce it; reshape to ``shape``."""
    if grad.shape == tuple(shape):
        return grad
    target = [1] * (grad.ndim - len(shape)) + list(shape) if len(shape) <= grad.ndim else shape
    axes = tuple(i for i, (g, t) in enumerate(zip(grad.shape, target)) if t == 1 and g != 1)
    if axes:
        grad = grad.sum(axis=axes, keepdims=True)
    return grad.reshape(shape)


def aligned_y_to_x(x: np.ndarray, y: np.ndarray, axis: int) -> Tuple[np.ndarray, np.ndarray]:
    """(x, y) reshaped so numpy broadcasting implements fluid's rule (either may be larger)."""
    if y.ndim > x.ndim:
        return align(y.ndim, x, axis), y
    return x, align(x.ndim, y, axis)


class _Binary(OpDef):
    """Shared slots/inference for ``Out = f(X, Y)`` with fluid broadcasting."""
    inputs, outputs = ("X", "Y"), ("Out",)
    extra_attrs = {"use_mkldnn": False, "x_data_format": "", "y_data_format": ""}

    def infer(self, X, Y, *, axis=-1):
        return {"Out": VarSpec(S.broadcast_shape(X.shape, Y.shape, axis), X.dtype, X.lod_level)}

    @staticmethod
    def _plain(in_specs, axis: int) -> bool:
        """True when numpy's own broadcasting already matches fluid's rule (fast path)."""
        x, y = in_specs
        if x is None or y is None or len(y.shape) > len(x.shape):
            return False
        return axis == -1 or axis == len(x.shape) - len(y.shape)


@register
class ElementwiseAdd(_Binary):
    """Out = X + Y;  dX = dOut, dY = reduce(dOut)."""
    type = "elementwise_add"
    grad_uses = ("X", "Y")

    def forward(self, X, Y, *, axis=-1):
        x, y = aligned_y_to_x(X, Y, axis)
        return {"Out": x + y}

    def lower(self, in_specs, attrs):
        return np.add if self._plain(in_specs, attrs.get("axis", -1)) else None

    def backward(self, X, Y, dOut, *, axis=-1):
        return {"X": reduce_to(dOut, X.shape), "Y": reduce_to(dOut, Y.shape)}


@register
class Scale(OpDef):
    """Out = scale * X + bias (bias_after_scale) or scale * (X + bias);  dX = scale * dOut."""
    type, inputs, outputs = "scale", ("X",), ("Out",)

    def infer(self, X):
        return {"Out": X}

    def forward(self, X, *, scale=1.0, bias=0.0, bias_after_scale=True):
        if bias_after_scale:
            out = X * X.dtype.type(scale) + X.dtype.type(bias) if bias else X * X.dtype.type(scale)
        else:
            out = (X + X.dtype.type(bias)) * X.dtype.type(scale)
        return {"Out": out.astype(X.dtype, copy=False)}

    def make_grad(self, g, *, scale=1.0, bias=0.0, bias_after_scale=True):
        g.append("scale", {"X": g.output_grad("Out")}, {"Out": g.input_grad("X")},
                 scale=scale, bias=0.0)
