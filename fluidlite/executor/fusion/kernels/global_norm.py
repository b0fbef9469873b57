"""``fused(global_norm)``: ``GradientClipByGlobalNorm``'s chain as one kernel.

Each squared norm is the ``squared_l2_norm`` op's own kernel when the chain is float64 (so fused
and unfused agree bit for bit); a float32 chain is accumulated in float64 instead
(overflow-safe, rounded to the chain's dtype at the end). The rest of the chain is the same IEEE
operations on scalars.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ....core import registry
from ....ops import inplace
from ....ops.clip import _squared_l2_norm
from ..matcher import FusedDef


class GlobalNorm(FusedDef):
    """Norm = sqrt(sum_i squared_l2_norm(X_i)); Scale = c / max(c, Norm); ScaleCast = Scale cast
    to the gradients' dtype. Raises like ``check_finite_norm`` when asked to.

    ``square`` holds the ``squared_l2_norm`` kernels of a float64 chain (then every step below
    is the unfused ops' IEEE double arithmetic, on Python floats); ``None`` for a float32 chain,
    which is computed in float64 here and rounded to ``dtype`` at the end."""

    def __init__(self, square: Optional[List[Callable]], dtype: np.dtype, clip_norm: float,
                 cast_to: Optional[np.dtype], check: Optional[List[str]],
                 outputs: Sequence[str]) -> None:
        super().__init__("fused(global_norm)", ("X*",), outputs)
        if square is not None and all(f is _squared_l2_norm for f in square):
            square = None       # that kernel is sum_squares: the same floats, one errstate
        self.square, self.dtype, self.cast_to, self.check = square, dtype, cast_to, check
        self.limit = float(dtype.type(clip_norm))
        self.emit = tuple(outputs)

    def values(self, X: Sequence[np.ndarray]) -> Tuple[float, float]:
        """(global norm, scale) as Python floats (exact in the chain's float64)."""
        if self.square is not None:
            squares = [f(x) for f, x in zip(self.square, X)]
            terms = [sq.item() for sq in squares]
        else:       # Python floats; arrays only for check_finite_norm's message
            terms = inplace.sum_squares_many(X)
        total = terms[0]
        for sq in terms[1:]:        # left to right, as the unfused sum op
            total += sq
        norm = math.sqrt(total)
        if self.check is not None and not math.isfinite(norm):
            if self.square is None:
                squares = [np.array([t]) for t in terms]
            registry.get_op_def("check_finite_norm").forward(
                np.array([norm], self.dtype), squares, grad_names=self.check)
        limit = self.limit
        scale = limit / (norm if norm > limit or norm != norm else limit)   # NaN propagates
        return norm, scale

    def _array(self, slot: str, norm: float, scale: float) -> np.ndarray:
        if slot == "Norm":
            return np.array([norm], self.dtype)
        return np.array([scale], self.dtype if slot == "Scale" else self.cast_to)

    def forward(self, X: Sequence[np.ndarray]) -> Dict[str, np.ndarray]:
        norm, scale = self.values(X)
        return {k: self._array(k, norm, scale) for k in self.emit}

    def lower(self, in_specs: Sequence[Any], attrs: Dict[str, Any]) -> Optional[Callable]:
        if len(self.emit) != 1:         # both outputs: forward's dict
            return None
        key = self.emit[0]
        dtype = {"Norm": self.dtype, "Scale": self.dtype}.get(key, self.cast_to)
        pick = 0 if key == "Norm" else 1
        return lambda xs: np.array([self.values(xs)[pick]], dtype)
