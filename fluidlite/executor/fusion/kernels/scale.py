"""The clip's scale: how a gradient is multiplied by the global-norm clip factor, and the
``fused(clip_scale)`` kernel (an ``elementwise_mul`` by that factor).

When the clip's scale is float64 and cast to the gradient's dtype, a kernel multiplies by the
cast value (what the unfused ops do), except when the scale is below the dtype's smallest normal
number: then the product is formed in float64 and rounded once, so any finite gradient is
clipped correctly.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Dict, Sequence

import numpy as np

from ..matcher import FusedDef


def grad_scale(s: np.ndarray, dtype: np.dtype) -> Any:
    """The factor to multiply a ``dtype`` gradient by: ``s`` itself when it already has that
    dtype; the cast value (as the unfused ``cast``) when that is a normal number or zero;
    otherwise ``s`` in float64, so the product is formed in float64 and rounded once."""
    if s.dtype == dtype:
        return s.reshape(-1)[0]
    v = s.item()
    if dtype.kind == "f" and 0 < abs(v) < tiny(dtype):
        return np.float64(v)
    return dtype.type(v)


_TINY: Dict[np.dtype, float] = {}


def tiny(dtype: np.dtype) -> float:
    """The smallest normal number of ``dtype`` (cached: ``np.finfo`` is slow per call)."""
    t = _TINY.get(dtype)
    if t is None:
        t = _TINY[dtype] = float(np.finfo(dtype).tiny)
    return t


def scaled(g: np.ndarray, s: Any) -> np.ndarray:
    """``g * s`` in ``g``'s dtype (``s`` from ``grad_scale``: a float64 ``s`` is applied in
    float64 and rounded once)."""
    if s.dtype == g.dtype:
        return g * s
    return np.multiply(g, s, dtype=np.promote_types(g.dtype, s.dtype)).astype(g.dtype, copy=False)


def lr_times_scale(lr: np.ndarray, s: Any, dtype: np.dtype) -> Any:
    """``lr * s`` rounded once to ``dtype`` (kept in float64 when that is subnormal)."""
    c = lr.item() * float(s)
    c32 = dtype.type(c)
    f = float(c32)
    if f == 0 or not math.isfinite(f) or abs(f) >= tiny(dtype):
        return c32
    return np.float64(c)


class ClipScale(FusedDef):
    """Out = X * Scale (see ``grad_scale``): an ``elementwise_mul`` by the clip's scale."""

    def __init__(self) -> None:
        super().__init__("fused(clip_scale)", ("X", "Scale"), ("Out",))

    def lower(self, in_specs: Sequence[Any], attrs: Dict[str, Any]) -> Callable:
        return lambda x, s: scaled(x, grad_scale(s, x.dtype))

    def forward(self, X: np.ndarray, Scale: np.ndarray) -> Dict[str, np.ndarray]:
        return {"Out": self.lower((), {})(X, Scale)}
