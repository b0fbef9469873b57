"""``clip_grad_value_`` / ``clip_grad_norm_`` (PyTorch's and Paddle 2's names): clip the
accumulated gradients of dygraph parameters in place, with the same kernels as the static clips
(``clip``; the float64 ``squared_l2_norm`` for the 2-norm, so huge gradients do not overflow)."""
from __future__ import annotations

import math
from typing import Any, Iterable, Union

import numpy as np

from ..dygraph.tensor import VarBase
from ..dygraph.tracer import eager

__all__ = ["clip_grad_value_", "clip_grad_norm_"]


def _params(parameters: Any) -> list:
    if isinstance(parameters, VarBase):
        return [parameters]
    return [p for p in parameters if isinstance(p, VarBase) and p._grad is not None]


def clip_grad_value_(parameters: Union[VarBase, Iterable[VarBase]], clip_value: float) -> None:
    """Clip every gradient element into ``[-clip_value, clip_value]`` (in place)."""
    c = float(clip_value)
    if not c >= 0:
        raise ValueError(f"clip_grad_value_: clip_value must be >= 0, got {clip_value}")
    for p in _params(parameters):
        p._grad = eager("clip", {"min": -c, "max": c}, X=p._grad)._value


def clip_grad_norm_(parameters: Union[VarBase, Iterable[VarBase]], max_norm: float,
                    norm_type: float = 2.0, error_if_nonfinite: bool = False) -> VarBase:
    """Scale all gradients by ``max_norm / (total_norm + 1e-6)`` when that is below 1, where
    ``total_norm`` is the ``norm_type``-norm of all gradients together (``inf``: the largest
    absolute value). Returns ``total_norm`` (a float32 tensor). ``error_if_nonfinite``: raise
    ``RuntimeError`` when it is NaN/inf instead of scaling."""
    params = _params(parameters)
    norm_type = float(norm_type)
    if not params:
        return VarBase(np.array(0.0, np.float32))
    grads = [p._grad for p in params]
    if norm_type == math.inf:
        total = max(float(np.max(np.abs(g))) if g.size else 0.0 for g in grads)
    elif norm_type == 2.0:
        total = math.sqrt(sum(float(eager("squared_l2_norm", X=g)._value.reshape(-1)[0])
                              for g in grads))
    else:
        total = float(sum(np.sum(np.abs(g.astype(np.float64)) ** norm_type) for g in grads)
                      ** (1.0 / norm_type))
    if error_if_nonfinite and not math.isfinite(total):
        raise RuntimeError(f"The total norm of order {norm_type} for gradients from "
                           f"`parameters` is non-finite, so it cannot be clipped. To disable "
                           f"this error and scale the gradients by the non-finite norm anyway, "
                           f"set `error_if_nonfinite=False`")
    coef = float(max_norm) / (total + 1e-6)
    if coef < 1.0:
        for p in params:
            p._grad = eager("scale", {"scale": coef}, X=p._grad)._value
    return VarBase(np.array(total, np.float32))
