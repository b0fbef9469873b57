"""Reductions: mean and reduce_{sum,mean,max,min}. fluid reduces to shape [1], never []."""
from __future__ import annotations

import numpy as np

from ..core.registry import OpDef, VarSpec, register


@register
class Mean(OpDef):
    """Out = mean(X) with shape [1];  dX = dOut / numel(X) broadcast to X's shape."""
    type, inputs, outputs = "mean", ("X",), ("Out",)

    def infer(self, X):
        return {"Out": VarSpec((1,), X.dtype)}

    def forward(self, X):
        return {"Out": np.mean(X, dtype=X.dtype).reshape(1)}

    def lower(self, in_specs, attrs):
        return lambda x: np.mean(x, dtype=x.dtype).reshape(1)

    def backward(self, X, dOut):
        return {"X": np.full(X.shape, dOut.reshape(()) / max(X.size, 1), dtype=X.dtype)}
