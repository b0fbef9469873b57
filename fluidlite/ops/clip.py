"""Clipping ops: ``clip``, ``clip_by_norm``, ``squared_l2_norm`` and ``check_finite_norm``.

Norms are overflow-safe: sums of squares accumulate in float64 (``squared_l2_norm`` returns
float64), so a finite float16/float32 gradient of any magnitude has a finite norm and is clipped
correctly; only a real NaN/Inf in the input makes a norm non-finite.

``check_finite_norm`` is fluidlite's own (not a fluid op): the run-time guard behind
``GradientClipByGlobalNorm(..., error_if_nonfinite=True)``. It raises before any update op ran,
and the executor commits persistables only after a successful step, so parameters stay as they
were.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..core.dtypes import FLOATS, VarType, convert_dtype
from ..core.registry import OpDef, VarSpec, register
from ..core.selected_rows import SelectedRows
from .inplace import sum_squares


def _var_type_of_x(in_types: Any) -> Any:
    sparse = (in_types.get("X") or [None])[0] == VarType.SELECTED_ROWS
    return {"Out": VarType.SELECTED_ROWS if sparse else VarType.LOD_TENSOR}


@register
class Clip(OpDef):
    """Out = min(max(X, min), max);  dX = dOut * (min < X < max)."""
    type, inputs, outputs = "clip", ("X",), ("Out",)
    grad_uses = ("X",)

    # the attrs always reach infer / lower / backward filled with forward's defaults (the
    # registry's attr_defaults), so only forward declares defaults
    def infer(self, X, *, min, max):
        if min > max:
            raise ValueError(f"clip: max should be greater than or equal to min, but received "
                             f"min = {min}, max = {max}")
        return {"Out": X}

    def forward(self, X, *, min=0.0, max=0.0):
        return {"Out": self._fn(min, max)(X)}

    def var_types(self, in_types, attrs):
        """fluid 1.8: a SelectedRows X is merged and its values clipped (Out SelectedRows)."""
        return _var_type_of_x(in_types)

    def lower(self, in_specs, attrs):
        return self._fn(attrs["min"], attrs["max"])

    @staticmethod
    def _fn(lo: float, hi: float):
        if lo > hi:
            raise ValueError(f"clip: max should be greater than or equal to min, but received "
                             f"min = {lo}, max = {hi}")
        bounds: dict = {}

        def clip(x: np.ndarray) -> np.ndarray:
            if type(x) is SelectedRows:     # fluid: the merged rows' values
                m = x.merged()
                return m.with_value(clip(m.value))
            b = bounds.get(x.dtype)
            if b is None:
                b = bounds[x.dtype] = _bounds(x.dtype, lo, hi)
            return np.clip(x, *b)
        return clip

    def backward(self, X, dOut, *, min, max):
        lo, hi = _bounds(X.dtype, min, max)
        return {"X": dOut * ((X > lo) & (X < hi))}


def _bounds(dtype: np.dtype, lo: float, hi: float) -> tuple:
    """clip's bounds as scalars of X's dtype, fluid's ``static_cast<T>(attr)``, so NumPy 1 and 2
    compare alike and the result keeps X's dtype: a float bound beyond a float dtype's range is
    its infinity; for an integer dtype a bound is truncated toward zero (C++'s float-to-int
    conversion) and held to the dtype's range (where C++ is undefined)."""
    if dtype.kind == "f":
        with np.errstate(over="ignore"):
            return tuple(np.array([lo, hi]).astype(dtype))
    if dtype.kind not in ("i", "u"):     # fluid registers float and integer kernels only
        raise ValueError(f"clip: X must be a float or integer tensor, got {dtype}")
    info = np.iinfo(dtype)
    out = []
    for v in (lo, hi):
        if math.isnan(v):
            raise ValueError(f"clip: a NaN bound (min = {lo}, max = {hi}) cannot clip an "
                             f"integer tensor ({dtype})")
        # held to the range first (+-inf too), then truncated
        out.append(dtype.type(math.trunc(min(max(v, info.min), info.max))))
    return tuple(out)


def _sumsq64(x: np.ndarray) -> float:
    """sum(x**2) accumulated in float64 (``inplace.sum_squares``, the one implementation: float32
    dots over pieces of 2^17 elements, redone in float64 where one overflows, so a finite
    tensor's norm is finite; one float32 ``np.vdot`` over 4M elements would err by ~4e-5)."""
    return sum_squares(x)


def _norm64(x: np.ndarray) -> float:
    """||x||_2 as a Python float, overflow-free: float16/32 inputs via the float64 sum of
    squares; a float64 input whose squares overflow (or underflow to 0) is rescaled by its
    largest magnitude first, as BLAS nrm2 does. NaN/Inf in x give NaN/Inf."""
    s = _sumsq64(x)         # (sum_squares raises no floating-point warning)
    if x.dtype != np.float64 or 1e-280 < s < math.inf or math.isnan(s):
        return math.sqrt(s)
    m = float(np.max(np.abs(x), initial=0.0))
    if m == 0.0 or not math.isfinite(m):
        return m
    return m * math.sqrt(_sumsq64(x / m))


def _times(x: np.ndarray, k: float) -> np.ndarray:
    """x * k in x's dtype. The multiply runs in x's dtype when k is a normal number of that
    dtype (k rounded to it first, as fluid's kernel, whose factor is a T); otherwise (k
    underflows or overflows it, or is 0, Inf or NaN, where both ways agree) in float64, cast
    back, so the product is right whenever it is representable. The range test compares
    Python floats: comparing k with a float16 ``finfo.max`` would cast k to float16 and warn
    of an overflow on NumPy 2."""
    fi = np.finfo(x.dtype)
    if float(fi.tiny) <= abs(k) <= float(fi.max):
        return x * x.dtype.type(k)
    return (x.astype(np.float64) * k).astype(x.dtype)


@register
class ClipByNorm(OpDef):
    """n = ||X||_2 (computed in float64);  Out = X if n <= max_norm else X * max_norm / n;
    dX = dOut if n <= max_norm else (max_norm / n) * (dOut - X * <X, dOut> / n^2).
    Out keeps X's dtype and is right for any finite X. As fluid's kernel, a NaN in X makes the
    factor max_norm / n NaN (Out all NaN) and an Inf makes it 0 (NaN at the Inf, 0 elsewhere)."""
    type, inputs, outputs = "clip_by_norm", ("X",), ("Out",)
    grad_uses = ("X",)

    def infer(self, X, *, max_norm):
        if not max_norm > 0:
            raise ValueError(f"clip_by_norm: max_norm should be greater than 0, but received "
                             f"max_norm = {max_norm}")
        if X.dtype not in FLOATS:   # fluid registers float kernels only
            raise ValueError(f"clip_by_norm: X must be float16, float32 or float64, got "
                             f"{convert_dtype(X.dtype)}")
        return {"Out": X}

    def var_types(self, in_types, attrs):
        """fluid 1.8: a SelectedRows X is merged, the norm and scaling act on its values."""
        return _var_type_of_x(in_types)

    def forward(self, X, *, max_norm=1.0):
        if type(X) is SelectedRows:
            m = X.merged()
            return {"Out": m.with_value(self.forward(m.value, max_norm=max_norm)["Out"])}
        n = _norm64(X)
        if n <= max_norm:
            return {"Out": X.copy()}
        k = max_norm / n        # < 1 here; fluid: Out = X * (max_norm / n) in X's dtype
        if k >= float(np.finfo(X.dtype).tiny):
            return {"Out": X * X.dtype.type(k)}
        # k is subnormal in X's dtype (a huge n): X / n first, so nothing under- or overflows.
        # (k is also 0 for an Inf in X and NaN for a NaN: this path gives the same NaN / 0.)
        return {"Out": (X.astype(np.float64) / n * max_norm).astype(X.dtype)}

    def backward(self, X, dOut, *, max_norm):
        n = _norm64(X)
        if n <= max_norm:
            return {"X": dOut}
        # in float64 with the unit vector u = X / n, so no intermediate over- or underflows:
        # dX = (max_norm / n) * (dOut - u * <u, dOut>)
        u = X.astype(np.float64) / n
        d = dOut.astype(np.float64)
        c = float(np.vdot(u, d))          # <u, dOut> over all elements
        return {"X": ((max_norm / n) * (d - u * c)).astype(dOut.dtype)}


@register
class SquaredL2Norm(OpDef):
    """Out = sum(X^2) with shape [1], float64 for floating X (accumulated in float64, so a finite
    float16/float32 X never overflows it);  dX = 2 * X * dOut in X's dtype."""
    type, inputs, outputs = "squared_l2_norm", ("X",), ("Out",)
    grad_uses = ("X",)

    def infer(self, X):
        return {"Out": VarSpec((1,), VarType.FP64 if X.dtype in FLOATS else X.dtype)}

    def forward(self, X):
        return {"Out": _squared_l2_norm(X)}

    def lower(self, in_specs, attrs):
        return _squared_l2_norm

    def backward(self, X, dOut):
        return {"X": _times(X, 2.0 * float(dOut.item()))}      # dOut: [1]


def _squared_l2_norm(x: np.ndarray) -> np.ndarray:
    if type(x) is SelectedRows:         # a sparse gradient: its merged rows' values
        x = x.merged().value
    if x.dtype.kind != "f":
        return np.vdot(x, x).reshape(1)
    return np.array([_sumsq64(x)])


@register
class CheckFiniteNorm(OpDef):
    """Out = X (a global norm, [1]); raises FloatingPointError when X is NaN/Inf, naming every
    gradient of ``grad_names`` whose squared norm (the matching entry of ``Norms``) is NaN/Inf."""
    type, inputs, outputs = "check_finite_norm", ("X", "Norms*"), ("Out",)
    no_grad = True

    def infer(self, X, Norms):
        return {"Out": X}

    def forward(self, X, Norms, *, grad_names=[]):
        value = float(X.item())                 # X: the [1] global norm
        if math.isfinite(value):
            return {"Out": X}
        bad = []
        for i, sq in enumerate(Norms):
            v = float(np.asarray(sq).item())    # each a [1] squared norm
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
