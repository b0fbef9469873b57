"""The clip's multiply, ``elementwise_mul(G, scale) -> G'`` by the global-norm clip factor.

``CLIP_MUL`` is the multiply itself: a one-element scale of G's dtype (so a pure rescaling of
G), possibly the ``cast`` of the clip's float64 scale (``cast``, kept: other multiplies may read
it). A multiply whose only reader is an update op is folded into that update
(``update_group.MEMBERS``); the others with a float64 scale become ``fused(clip_scale)``
(``PATTERN``: the kernel reads the float64 value, tiny-scale safe, ``kernels/scale.py``), after
which the casts nobody reads any more are dropped (``DEAD_CASTS``).
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from ..kernels.scale import ClipScale
from ..matcher import Context, FusedOp, Match, P, Pattern, Rewrite


def scalar_scale(mul: Any, cx: Context) -> bool:
    """``elementwise_mul(X, Y) -> Out`` with a one-element Y of X's dtype (and Out's): a pure
    rescaling of X."""
    y, x = cx.var(mul.inputs["Y"][0]), cx.var(mul.inputs["X"][0])
    dt = cx.dtype(mul.inputs["X"][0])
    return (y is not None and x is not None and tuple(y.shape) == (1,)
            and mul.attrs.get("axis", -1) in (-1, len(x.shape) - 1, 0)
            and dt is not None and dt.kind == "f" and cx.dtype(mul.inputs["Y"][0]) == dt
            and cx.dtype(mul.outputs["Out"][0]) == dt)


def from_float64(cast: Any, cx: Context) -> bool:
    return cx.dtype(cast.inputs["X"][0]) == np.float64


# the float64 clip scale cast to the gradient's dtype: bound if present, never removed
# (``scalar_scale`` already says the cast's output has the gradient's dtype)
F64_SCALE = P("cast", name="cast", where=from_float64, optional=True, keep=True)
# elementwise_mul(G, scale) by a one-element scale of G's dtype
CLIP_MUL = P("elementwise_mul", name="clip", where=scalar_scale, src={"Y": F64_SCALE})


def clip_inputs(m: Match) -> tuple:
    """(the gradient, the scale to read, whether that is the float64 value before the cast)."""
    mul, cast = m["clip"], m["cast"]
    scale = cast.inputs["X"][0] if cast is not None else mul.inputs["Y"][0]
    return mul.inputs["X"][0], scale, cast is not None


def _clip_scale(m: Match, cx: Context) -> Optional[Rewrite]:
    x, scale, cast = clip_inputs(m)
    if not cast:                # the unfused multiply is exactly right
        return None
    mul = m["clip"]
    return m.replace(FusedOp(ClipScale(), [mul], {"X": [x], "Scale": [scale]},
                             dict(mul.outputs)))


def _unread(cast: Any, cx: Context) -> bool:
    return all(cx.private(n) and not cx.readers(n) for n in cast.output_arg_names)


PATTERN = Pattern("clip_scale", CLIP_MUL, _clip_scale)
DEAD_CASTS = Pattern("dead_cast", P("cast", where=_unread), lambda m, cx: m.remove())
