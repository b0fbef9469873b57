"""Control-style tensor ops used by step counters and schedules: ``increment``."""
from __future__ import annotations

from ..core import shape as S
from ..core.registry import OpDef, register


@register
class Increment(OpDef):
    """Out = X + step (X holds one element; dtype kept, e.g. an int64 step counter)."""
    type, inputs, outputs = "increment", ("X",), ("Out",)
    no_grad = True
    infallible = True       # one element plus a number: may follow in-place updates

    def infer(self, X):
        if S.numel(X.shape) not in (1, -1):
            raise ValueError(f"increment: X must hold exactly one element, but its shape is "
                             f"{list(X.shape)}")
        return {"Out": X}

    def forward(self, X, *, step=1.0):
        return {"Out": X + X.dtype.type(step)}

    def lower(self, in_specs, attrs):
        step = attrs.get("step", 1.0)
        return lambda x: x + x.dtype.type(step)
