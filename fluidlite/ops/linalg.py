"""Matrix products: ``mul`` (fluid's flattening matmul, used by fc) and ``matmul``."""
from __future__ import annotations

import numpy as np

from ..core import shape as S
from ..core.registry import OpDef, VarSpec, register


@register
class Mul(OpDef):
    """Out = flatten(X, x_num_col_dims) @ flatten(Y, y_num_col_dims), reshaped to
    ``X.shape[:xk] + Y.shape[yk:]``;  dX = dOut @ Y^T, dY = X^T @ dOut (in the 2-D views)."""
    type, inputs, outputs = "mul", ("X", "Y"), ("Out",)
    extra_attrs = {"use_mkldnn": False, "scale_x": 1.0, "scale_y": [1.0], "scale_out": 1.0,
                   "force_fp32_output": False}

    def infer(self, X, Y, *, x_num_col_dims=1, y_num_col_dims=1):
        if not 0 < x_num_col_dims < len(X.shape) or not 0 < y_num_col_dims < len(Y.shape):
            raise ValueError(f"x_num_col_dims={x_num_col_dims} / y_num_col_dims="
                             f"{y_num_col_dims} out of range for X {list(X.shape)}, "
                             f"Y {list(Y.shape)}")
        k1 = S.numel(X.shape[x_num_col_dims:])
        k2 = S.numel(Y.shape[:y_num_col_dims])
        if not S.dims_match(k1, k2):
            raise ValueError(f"X's flattened width {k1} (shape {list(X.shape)}, x_num_col_dims="
                             f"{x_num_col_dims}) != Y's flattened height {k2} (shape "
                             f"{list(Y.shape)}, y_num_col_dims={y_num_col_dims})")
        return {"Out": VarSpec(X.shape[:x_num_col_dims] + Y.shape[y_num_col_dims:], X.dtype)}

    def forward(self, X, Y, *, x_num_col_dims=1, y_num_col_dims=1):
        x2 = X.reshape(int(np.prod(X.shape[:x_num_col_dims])), -1)
        y2 = Y.reshape(int(np.prod(Y.shape[:y_num_col_dims])), -1)
        out = x2 @ y2
        return {"Out": out.reshape(X.shape[:x_num_col_dims] + Y.shape[y_num_col_dims:])}

    def lower(self, in_specs, attrs):
        x, y = in_specs
        if len(x.shape) == 2 and len(y.shape) == 2:
            return np.matmul
        return None

    def backward(self, X, Y, dOut, *, x_num_col_dims=1, y_num_col_dims=1):
        x2 = X.reshape(int(np.prod(X.shape[:x_num_col_dims])), -1)
        y2 = Y.reshape(int(np.prod(Y.shape[:y_num_col_dims])), -1)
        d2 = dOut.reshape(x2.shape[0], y2.shape[1])
        return {"X": (d2 @ y2.T).reshape(X.shape), "Y": (x2.T @ d2).reshape(Y.shape)}
