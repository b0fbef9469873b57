"""Loss-scaling ops: ``check_finite_and_unscale``, ``update_loss_scaling`` (Paddle's names, slots
and attributes) and ``select_input`` (Paddle's selector, used to commit or drop a step's state).

Together they implement dynamic loss scaling (``fluid.contrib.mixed_precision``):

* ``check_finite_and_unscale(X*, Scale) -> Out*, FoundInfinite``: ``Out_i = X_i / Scale`` and
  ``FoundInfinite = [any X_i has a NaN/Inf]`` (bool, [1]). When something is not finite, Paddle
  leaves ``Out`` unspecified; here it is zeros (deterministic, and what the gradients become
  after ``update_loss_scaling`` anyway).
* ``update_loss_scaling(X*, FoundInfinite, PrevLossScaling, InGoodSteps, InBadSteps)
  -> Out*, LossScaling, OutGoodSteps, OutBadSteps``: ``Out_i`` is ``X_i``, or zeros on an
  overflow; the scale follows Paddle's rule: on an overflow ``good = 0``, ``bad += 1`` and when
  ``bad == decr_every_n_nan_or_inf`` the scale becomes ``max(scale * decr_ratio, 1)`` and
  ``bad = 0``; on a finite step ``bad = 0``, ``good += 1`` and when
  ``good == incr_every_n_steps`` the scale becomes ``scale * incr_ratio`` (kept when that
  overflows) and ``good = 0``. ``stop_update=True`` only zeroes ``Out`` on an overflow.
* ``select_input(X*, Mask) -> Out``: ``Out = X[Mask]`` (``Mask`` an int32 [1]); the AMP and
  gradient-merge passes use it to keep (``Mask = 1``: the old value) or commit (``Mask = 0``)
  the new value of every piece of optimizer state (``amp/guard.py``).

None of them is differentiable (they run after the backward pass).
"""
from __future__ import annotations

from typing import Any, List, Sequence

import numpy as np

from ..core.dtypes import VarType
from ..core.registry import OpDef, VarSpec, register
from ..core.selected_rows import SelectedRows


def _scalar(arr: np.ndarray, slot: str, op: str) -> Any:
    a = np.asarray(arr)
    if a.size != 1:
        raise ValueError(f"{op}: input {slot} must hold exactly one element, but it has shape "
                         f"{list(a.shape)}")
    return a.reshape(-1)[0]


def _one(spec: Any, dtype: Any = None) -> VarSpec:
    """A [1] spec (of ``spec``'s dtype unless ``dtype`` is given)."""
    return VarSpec((1,), dtype if dtype is not None else spec.dtype)


def any_nonfinite(arrays: Sequence[np.ndarray]) -> bool:
    """True when some element of some array is NaN or +-Inf (integer arrays never are)."""
    for a in arrays:
        a = a.value if type(a) is SelectedRows else np.asarray(a)   # a sparse grad: its rows
        if a.dtype.kind in "fc" and a.size and not np.isfinite(a).all():
            return True
    return False


def _zeros_like(x: Any) -> Any:
    """Zeros shaped like ``x``; a SelectedRows keeps its rows (zero values), as fluid's."""
    if type(x) is SelectedRows:
        return x.with_value(np.zeros_like(x.value))
    return np.zeros_like(x)


def _out_types(in_types: Any, attrs: Any) -> Any:
    """Each Out_i has X_i's var type (a sparse gradient stays SelectedRows)."""
    return {"Out": [t if t == VarType.SELECTED_ROWS else VarType.LOD_TENSOR
                    for t in in_types.get("X", [])]}


@register
class CheckFiniteAndUnscale(OpDef):
    """Out_i = X_i / Scale and FoundInfinite = [some X_i is not finite]; on an overflow every
    Out_i is zeros (see the module docstring)."""
    type, inputs, outputs = "check_finite_and_unscale", ("X*", "Scale"), ("Out*", "FoundInfinite")
    no_grad = True
    var_types = staticmethod(_out_types)

    def infer(self, X, Scale):
        return {"Out": list(X), "FoundInfinite": _one(Scale, VarType.BOOL)}

    def forward(self, X, Scale):
        s = _scalar(Scale, "Scale", self.type)
        found = any_nonfinite(X)
        if found:
            out = [_zeros_like(x) for x in X]
        else:
            # X * (1 / Scale) as Paddle's kernel does, in X's dtype
            out = [x * x.dtype.type(1.0 / float(s)) for x in X]
        return {"Out": out, "FoundInfinite": np.array([found])}


@register
class UpdateLossScaling(OpDef):
    """Dynamic loss-scale update and gradient zeroing on overflow (see the module docstring)."""
    type = "update_loss_scaling"
    inputs = ("X*", "FoundInfinite", "PrevLossScaling", "InGoodSteps", "InBadSteps")
    outputs = ("Out*", "LossScaling", "OutGoodSteps", "OutBadSteps")
    no_grad = True
    var_types = staticmethod(_out_types)

    def infer(self, X, FoundInfinite, PrevLossScaling, InGoodSteps, InBadSteps, *,
              incr_ratio=2.0, decr_ratio=0.8):
        self._check_ratios(incr_ratio, decr_ratio)
        return {"Out": list(X), "LossScaling": _one(PrevLossScaling),
                "OutGoodSteps": _one(InGoodSteps), "OutBadSteps": _one(InBadSteps)}

    def _check_ratios(self, incr_ratio: float, decr_ratio: float) -> None:
        if not incr_ratio > 1.0:
            raise ValueError(f"update_loss_scaling: 'incr_ratio' should be greater than 1, but "
                             f"received {incr_ratio}")
        if not 0.0 < decr_ratio < 1.0:
            raise ValueError(f"update_loss_scaling: 'decr_ratio' should be between 0 and 1, but "
                             f"received {decr_ratio}")

    def forward(self, X, FoundInfinite, PrevLossScaling, InGoodSteps, InBadSteps, *,
                incr_every_n_steps=1000, decr_every_n_nan_or_inf=2, incr_ratio=2.0,
                decr_ratio=0.8, stop_update=False):
        self._check_ratios(incr_ratio, decr_ratio)
        found = bool(_scalar(FoundInfinite, "FoundInfinite", self.type))
        out: List[np.ndarray] = [_zeros_like(x) for x in X] if found else list(X)
        prev = np.asarray(PrevLossScaling)
        good = int(_scalar(InGoodSteps, "InGoodSteps", self.type))
        bad = int(_scalar(InBadSteps, "InBadSteps", self.type))
        scale = prev.reshape(-1)[0]
        if not stop_update:
            if found:
                good, bad = 0, bad + 1
                if bad == decr_every_n_nan_or_inf:
                    new = scale * prev.dtype.type(decr_ratio)
                    scale = prev.dtype.type(1) if new < 1 else new
                    bad = 0
            else:
                good, bad = good + 1, 0
                if good == incr_every_n_steps:
                    with np.errstate(over="ignore"):     # an overflow keeps the scale
                        new = scale * prev.dtype.type(incr_ratio)
                    scale = new if np.isfinite(new) else scale
                    good = 0
        return {"Out": out,
                "LossScaling": np.array([scale], prev.dtype),
                "OutGoodSteps": np.array([good], np.asarray(InGoodSteps).dtype),
                "OutBadSteps": np.array([bad], np.asarray(InBadSteps).dtype)}


@register
class SelectInput(OpDef):
    """Out = X[Mask] (``Mask``: an integer [1] in ``[0, len(X))``); the value is passed through
    unchanged (no copy)."""
    type, inputs, outputs = "select_input", ("X*", "Mask"), ("Out",)
    no_grad = True
    # issue 13: the guard's commits (a 0/1 mask, validated shapes) may follow in-place updates
    infallible = True

    def infer(self, X, Mask):
        if not X:
            raise ValueError("select_input: input X must hold at least one variable")
        return {"Out": X[0]}

    def forward(self, X, Mask):
        i = _scalar(Mask, "Mask", self.type)
        if not 0 <= int(i) < len(X):
            raise ValueError(f"select_input: Mask must be in [0, {len(X)}), but received {i}")
        return {"Out": X[int(i)]}

