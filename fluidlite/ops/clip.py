"""Clipping ops: ``clip``, ``clip_by_norm``, ``squared_l2_norm`` and ``check_finite_norm``.

``check_finite_norm`` is fluidlite's own (not a fluid op): the run-time guard behind
``GradientClipByGlobalNorm(..., error_if_nonfinite=True)``. It raises before any update op ran,
and the executor commits persistables only after a successful step, so parameters stay as they
were.
"""
from __future__ import annotations

import math

import numpy as np

from ..core.registry import OpDef, VarSpec, register


@register
class Clip(OpDef):
    """Out = min(max(X, min), max);  dX = dOut * (min < X < max)."""
    type, inputs, outputs = "clip", ("X",), ("Out",)
    grad_uses = ("X",)

    def infer(self, X, *, min=0.0, max=0.0):
        if min > max:
            raise ValueError(f"clip: max should be greater than or equal to min, but received "
                             f"min = {min}, max = {max}")
        return {"Out": X}

    def forward(self, X, *, min=0.0, max=0.0):
        return {"Out": self._fn(min, max)(X)}

    def lower(self, in_specs, attrs):
        return self._fn(attrs.get("min", 0.0), attrs.get("max", 0.0))

    @staticmethod
    def _fn(lo: float, hi: float):
        if lo > hi:
            raise ValueError(f"clip: max should be greater than or equal to min, but received "
                             f"min = {lo}, max = {hi}")
        return lambda x: np.clip(x, lo, hi)

    def backward(self, X, dOut, *, min=0.0, max=0.0):
        return {"X": dOut * ((X > min) & (X < max))}


def _l2(x: np.ndarray) -> np.ndarray:
    """sqrt(sum(x^2)) as a scalar of x's dtype."""
    return np.sqrt(np.vdot(x, x))


@register
class ClipByNorm(OpDef):
    """n = ||X||_2;  Out = X if n <= max_norm else X * max_norm / n;
    dX = dOut if n <= max_norm else (max_norm / n) * (dOut - X * <X, dOut> / n^2)."""
    type, inputs, outputs = "clip_by_norm", ("X",), ("Out",)
    grad_uses = ("X",)

    def infer(self, X, *, max_norm=1.0):
        if not max_norm > 0:
            raise ValueError(f"clip_by_norm: max_norm should be greater than 0, but received "
                             f"max_norm = {max_norm}")
        return {"Out": X}

    def forward(self, X, *, max_norm=1.0):
        n = _l2(X)
        if n <= max_norm:
            return {"Out": X.copy()}
        return {"Out": X * (X.dtype.type(max_norm) / n)}

    def backward(self, X, dOut, *, max_norm=1.0):
        n = _l2(X)
        if n <= max_norm:
            return {"X": dOut}
        s = X.dtype.type(max_norm) / n
        return {"X": s * (dOut - X * (np.vdot(X, dOut) / (n * n)))}


@register
class SquaredL2Norm(OpDef):
    """Out = sum(X^2) with shape [1];  dX = 2 * X * dOut."""
    type, inputs, outputs = "squared_l2_norm", ("X",), ("Out",)
    grad_uses = ("X",)

    def infer(self, X):
        return {"Out": VarSpec((1,), X.dtype)}

    def forward(self, X):
        return {"Out": np.vdot(X, X).reshape(1)}

    def lower(self, in_specs, attrs):
        return lambda x: np.vdot(x, x).reshape(1)

    def backward(self, X, dOut):
        return {"X": X * (2 * dOut.reshape(()))}


@register
class CheckFiniteNorm(OpDef):
    """Out = X (a global norm, [1]); raises FloatingPointError when X is NaN/Inf, naming every
    gradient of ``grad_names`` whose squared norm (the matching entry of ``Norms``) is NaN/Inf."""
    type, inputs, outputs = "check_finite_norm", ("X", "Norms*"), ("Out",)
    no_grad = True

    def infer(self, X, Norms):
        return {"Out": X}

    def forward(self, X, Norms, *, grad_names=[]):
        value = float(X.reshape(-1)[0])
        if math.isfinite(value):
            return {"Out": X}
        bad = []
        for i, sq in enumerate(Norms):
            v = float(np.reshape(sq, -1)[0])
            if not math.isfinite(v):
                name = grad_names[i] if i < len(grad_names) else f"#{i}"
                bad.append(f"{name} (squared norm {v})")
        listed = ", ".join(bad) if bad else "(none individually; the sum overflowed)"
        raise FloatingPointError(
            f"GradientClipByGlobalNorm(error_if_nonfinite=True): the global gradient norm is "
            f"{value}; non-finite gradients: {listed}. No parameter "
            f"was updated in this step. Check the inputs and the loss of this batch, or lower the "
            f"learning rate; pass error_if_nonfinite=False to GradientClipByGlobalNorm to let "
            f"training continue anyway")
