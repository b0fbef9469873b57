"""``cast``: dtype conversion. Differentiable only between float types (the gradient is cast
back); a cast from or to an integer/bool type passes no gradient, as in fluid."""
from __future__ import annotations

from ..core.dtypes import FLOATS, VarType, convert_np_dtype_to_dtype_, to_numpy_dtype
from ..core.registry import OpDef, register


@register
class Cast(OpDef):
    """Out = X.astype(out_dtype) (float -> int truncates toward zero, nonzero -> True);
    dX = cast(dOut, in_dtype) when both types are float, otherwise no gradient."""
    type, inputs, outputs = "cast", ("X",), ("Out",)
    extra_attrs = {"use_mkldnn": False}

    def infer(self, X, *, out_dtype=VarType.FP32):
        return {"Out": X.with_(dtype=out_dtype)}

    def forward(self, X, *, in_dtype=VarType.FP32, out_dtype=VarType.FP32):
        return {"Out": X.astype(to_numpy_dtype(out_dtype))}

    def lower(self, in_specs, attrs):
        dt = to_numpy_dtype(attrs.get("out_dtype", VarType.FP32))
        return lambda x: x.astype(dt)

    @staticmethod
    def differentiable_between(in_dtype: object, out_dtype: object) -> bool:
        """True when a gradient flows through the cast: float -> float only."""
        return (convert_np_dtype_to_dtype_(in_dtype) in FLOATS and
                convert_np_dtype_to_dtype_(out_dtype) in FLOATS)

    def make_grad(self, g, *, in_dtype=VarType.FP32, out_dtype=VarType.FP32, **_):
        """float -> float: dX = cast(dOut) back to X's type; otherwise nothing is emitted (the
        gradient stops here: integer and bool values carry no gradient)."""
        x = g.input("X")
        var = g.op.block._find_var_recursive(x)
        src = var.dtype if var is not None and var.dtype is not None else in_dtype
        target = g.input_grad("X")
        if target is None or not self.differentiable_between(src, out_dtype):
            return
        g.append("cast", {"X": g.output_grad("Out")}, {"Out": target},
                 in_dtype=convert_np_dtype_to_dtype_(out_dtype),
                 out_dtype=convert_np_dtype_to_dtype_(src))
