"""Comparison and logical ops: boolean outputs, fluid 1.x ``axis`` broadcasting, not
differentiable (``no_grad``: a comparison's result is piecewise constant)."""
from __future__ import annotations

import numpy as np

from ..core.dtypes import VarType, convert_dtype
from ..core.registry import OpDef, VarSpec, register
from .broadcast import aligned_y_to_x, broadcast_shape, numpy_compatible


def fluid_equal(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """fluid's ``EqualFunctor``: floats are equal when |a - b| < 1e-8 (the difference taken in
    their dtype, compared as a double), an infinity only to itself (Paddle 2.x; fluid 1.8's
    inf - inf made them unequal) and NaN to nothing; other dtypes compare exactly."""
    if a.dtype.kind not in "fc" and b.dtype.kind not in "fc":
        return np.equal(a, b)
    with np.errstate(invalid="ignore", over="ignore"):
        near = np.abs(np.subtract(a, b).astype(np.float64, copy=False)) < 1e-8
    return np.where(np.isinf(a) | np.isinf(b), np.equal(a, b), near)


def fluid_not_equal(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``not fluid_equal(a, b)``."""
    return ~fluid_equal(a, b)


class _Compare(OpDef):
    """``Out = X <cmp> Y`` (bool), broadcast as the elementwise ops."""
    inputs, outputs = ("X", "Y"), ("Out",)
    extra_attrs = {"force_cpu": False}
    no_grad = True
    fn = staticmethod(np.less)
    same_dtype = True

    def infer(self, X, Y, *, axis=-1):
        if self.same_dtype and X.dtype != Y.dtype:
            raise ValueError(f"X and Y must have the same data type, but X is "
                             f"{convert_dtype(X.dtype)} and Y is {convert_dtype(Y.dtype)}; cast "
                             f"one of them, e.g. fluid.layers.cast(y, '{convert_dtype(X.dtype)}')")
        return {"Out": VarSpec(broadcast_shape(X.shape, Y.shape, axis), VarType.BOOL,
                               X.lod_level)}

    def forward(self, X, Y, *, axis=-1):
        return {"Out": self.fn(*aligned_y_to_x(X, Y, axis))}

    def lower(self, in_specs, attrs):
        axis, fn = attrs.get("axis", -1), self.fn
        x, y = in_specs
        if x is not None and y is not None and numpy_compatible(x.shape, y.shape, axis):
            return fn
        return lambda a, b: fn(*aligned_y_to_x(a, b, axis))


@register
class LessThan(_Compare):
    """Out = X < Y."""
    type, fn = "less_than", staticmethod(np.less)


@register
class LessEqual(_Compare):
    """Out = X <= Y."""
    type, fn = "less_equal", staticmethod(np.less_equal)


@register
class GreaterThan(_Compare):
    """Out = X > Y."""
    type, fn = "greater_than", staticmethod(np.greater)


@register
class GreaterEqual(_Compare):
    """Out = X >= Y."""
    type, fn = "greater_equal", staticmethod(np.greater_equal)


@register
class Equal(_Compare):
    """Out = X == Y (floats: |X - Y| < 1e-8, ``fluid_equal``)."""
    type, fn = "equal", staticmethod(fluid_equal)


@register
class NotEqual(_Compare):
    """Out = X != Y (floats: not |X - Y| < 1e-8, ``fluid_equal``)."""
    type, fn = "not_equal", staticmethod(fluid_not_equal)


@register
class EqualReduce(_Compare):
    """Out = [all(X == Y)] (bool, shape [1]; floats compared as ``fluid_equal``), Y broadcast
    onto X as the elementwise ops (fluid 1.8's ``equal_reduce``; Y may not have more dims than
    X)."""
    type = "equal_reduce"
    extra_attrs = {}

    def infer(self, X, Y, *, axis=-1):
        if len(Y.shape) > len(X.shape):
            raise ValueError(f"equal_reduce: Y (shape {list(Y.shape)}) may not have more "
                             f"dimensions than X (shape {list(X.shape)})")
        super().infer(X, Y, axis=axis)
        return {"Out": VarSpec((1,), VarType.BOOL, X.lod_level)}

    def forward(self, X, Y, *, axis=-1):
        return {"Out": np.array([bool(np.all(fluid_equal(*aligned_y_to_x(X, Y, axis))))])}

    def lower(self, in_specs, attrs):
        return None


class _Logical(_Compare):
    """``Out = X <op> Y`` on truth values (bool output; nonzero counts as True)."""
    extra_attrs = {}
    same_dtype = False


@register
class LogicalAnd(_Logical):
    """Out = X and Y."""
    type, fn = "logical_and", staticmethod(np.logical_and)


@register
class LogicalOr(_Logical):
    """Out = X or Y."""
    type, fn = "logical_or", staticmethod(np.logical_or)


@register
class LogicalXor(_Logical):
    """Out = X xor Y."""
    type, fn = "logical_xor", staticmethod(np.logical_xor)


@register
class LogicalNot(OpDef):
    """Out = not X."""
    type, inputs, outputs = "logical_not", ("X",), ("Out",)
    no_grad = True

    def infer(self, X):
        return {"Out": X.with_(dtype=VarType.BOOL)}

    def forward(self, X):
        return {"Out": np.logical_not(X)}

    def lower(self, in_specs, attrs):
        return np.logical_not
