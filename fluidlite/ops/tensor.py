"""Tensor creation and plumbing: fill_constant, assign, sum (gradient accumulation), ..."""
from __future__ import annotations

import numpy as np

from ..core.dtypes import VarType, to_numpy_dtype
from ..core.registry import OpDef, VarSpec, register


@register
class FillConstant(OpDef):
    """Out = full(shape, value, dtype)."""
    type, inputs, outputs = "fill_constant", (), ("Out",)
    no_grad = True
    extra_attrs = {"str_value": "", "force_cpu": False}

    def infer(self, *, shape=(), dtype=VarType.FP32):
        return {"Out": VarSpec(shape, dtype)}

    def forward(self, *, shape=[], dtype=VarType.FP32, value=0.0):
        return {"Out": np.full(shape, value, dtype=to_numpy_dtype(dtype))}


@register
class AssignValue(OpDef):
    """Out = array(values).reshape(shape)."""
    type, inputs, outputs = "assign_value", (), ("Out",)
    no_grad = True

    def infer(self, *, shape=(), dtype=VarType.FP32):
        return {"Out": VarSpec(shape, dtype)}

    def forward(self, *, shape=[], dtype=VarType.FP32, values=[]):
        return {"Out": np.asarray(values, dtype=to_numpy_dtype(dtype)).reshape(shape)}


@register
class FillAnyLike(OpDef):
    """Out = full_like(X, value) (dtype: X's unless ``dtype`` >= 0)."""
    type, inputs, outputs = "fill_any_like", ("X",), ("Out",)
    no_grad = True

    def infer(self, X, *, dtype=-1):
        return {"Out": X if dtype < 0 else X.with_(dtype=dtype)}

    def forward(self, X, *, value=0.0, dtype=-1):
        dt = X.dtype if dtype < 0 else to_numpy_dtype(dtype)
        return {"Out": np.full(X.shape, value, dtype=dt)}


@register
class FillZerosLike(OpDef):
    """Out = zeros_like(X)."""
    type, inputs, outputs = "fill_zeros_like", ("X",), ("Out",)
    no_grad = True

    def infer(self, X):
        return {"Out": X}

    def forward(self, X):
        return {"Out": np.zeros_like(X)}


@register
class Assign(OpDef):
    """Out = copy(X);  dX = dOut."""
    type, inputs, outputs = "assign", ("X",), ("Out",)

    def infer(self, X):
        return {"Out": X}

    def forward(self, X):
        return {"Out": np.array(X, copy=True)}

    def make_grad(self, g):
        g.append("assign", {"X": g.output_grad("Out")}, {"Out": g.input_grad("X")})


@register
class Sum(OpDef):
    """Out = X[0] + X[1] + ...;  dX[i] = dOut. Also accumulates repeated gradients."""
    type, inputs, outputs = "sum", ("X*",), ("Out",)
    extra_attrs = {"use_mkldnn": False}

    def infer(self, X):
        return {"Out": X[0]}

    def forward(self, X):
        if len(X) == 1:
            return {"Out": np.array(X[0], copy=True)}
        out = np.add(X[0], X[1])
        for x in X[2:]:
            np.add(out, x, out=out)
        return {"Out": out}

    def lower(self, in_specs, attrs):
        if in_specs and len(in_specs) == 2 and in_specs[0].shape == in_specs[1].shape:
            return lambda xs: np.add(xs[0], xs[1])
        return None

    def make_grad(self, g):
        for x, dx in zip(g.input("X"), g.input_grad("X") or []):
            if dx != "@EMPTY@":
                g.append("assign", {"X": g.output_grad("Out")}, {"Out": dx})


@register
class Feed(OpDef):
    """Marks a fed variable (in saved inference programs); the executor binds feeds itself."""
    type, inputs, outputs = "feed", ("X?",), ("Out",)
    no_grad = True

    def infer(self, X, *, col=0):
        return {}

    def forward(self, X, *, col=0):
        raise RuntimeError("feed ops are bound by the executor, not run")


@register
class Fetch(OpDef):
    """Marks a fetch target (in saved inference programs); the executor returns it itself."""
    type, inputs, outputs = "fetch", ("X",), ("Out?",)
    no_grad = True

    def infer(self, X, *, col=0):
        return {}

    def forward(self, X, *, col=0):
        raise RuntimeError("fetch ops are bound by the executor, not run")
