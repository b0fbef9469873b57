"""Activation ops: Out = f(X), gradients from Out or X."""
from __future__ import annotations

import numpy as np

from ..core.registry import OpDef, register


class _Unary(OpDef):
    inputs, outputs = ("X",), ("Out",)
    extra_attrs = {"use_mkldnn": False, "use_cudnn": False}

    def infer(self, X, **_):
        return {"Out": X}


@register
class Relu(_Unary):
    """Out = max(X, 0);  dX = dOut * (Out > 0)."""
    type = "relu"
    grad_uses = ("Out",)

    def forward(self, X):
        return {"Out": np.maximum(X, 0)}

    def lower(self, in_specs, attrs):
        return lambda x: np.maximum(x, 0)

    def backward(self, Out, dOut):
        return {"X": dOut * (Out > 0)}


@register
class Softmax(_Unary):
    """Out = exp(X - max) / sum(exp(X - max)) along axis;  dX = Out * (dOut - sum(dOut*Out))."""
    type = "softmax"
    grad_uses = ("Out",)
    extra_attrs = {"use_mkldnn": False, "use_cudnn": False, "data_format": "AnyLayout"}

    def forward(self, X, *, axis=-1):
        e = np.exp(X - X.max(axis=axis, keepdims=True))
        e /= e.sum(axis=axis, keepdims=True)
        return {"Out": e}

    def backward(self, Out, dOut, *, axis=-1):
        return {"X": Out * (dOut - (dOut * Out).sum(axis=axis, keepdims=True))}
