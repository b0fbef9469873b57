"""The gradients of the slices of one tensor, summed: one scatter (``kernels/slice_grads.py``).

``SUM``: ``sum(Input@GRAD_1, ..., Input@GRAD_T)``, every input the ``Input@GRAD`` of a
``slice_grad`` of one Input with a static window (no start or end tensors) and of one float
dtype, each read by the sum alone, becomes ``fused(slice_grads)`` at the sum's position,
reading Input (its shape) and the slices' Out@GRAD (which nothing may write in between); the
``slice_grad``s go.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from ..kernels.slice_grads import WINDOW_ATTRS, SliceGradSum
from ..matcher import Context, FusedOp, Match, P, Pattern, Rewrite

_DYNAMIC = ("StartsTensor", "EndsTensor", "StartsTensorList", "EndsTensorList")


def _static_window(op: Any, cx: Context) -> bool:
    """A slice_grad whose window is its attrs alone, of a float Input and Out@GRAD."""
    if any(op.inputs.get(s) for s in _DYNAMIC) or not op.inputs.get("Input") \
            or not op.inputs.get("Out@GRAD"):
        return False
    dts = {cx.dtype(op.inputs["Input"][0]), cx.dtype(op.inputs["Out@GRAD"][0])}
    return len(dts) == 1 and next(iter(dts)) in (np.float16, np.float32, np.float64)


def _build(m: Match, cx: Context) -> Optional[Rewrite]:
    total, grads, at = m["sum"], m["grads"], m.root
    if len(grads) < 2 or len({g.inputs["Input"][0] for g in grads}) != 1:
        return None
    source = grads[0].inputs["Input"][0]
    douts = []
    for name, g, pos in zip(total.inputs["X"], grads, m.pos["grads"]):
        if g.outputs.get("Input@GRAD") != [name]:
            return None
        d = g.inputs["Out@GRAD"][0]
        if cx.written_between((source, d), pos, at):
            return None
        douts.append(d)
    op = FusedOp(SliceGradSum([{k: g.attrs.get(k, []) for k in WINDOW_ATTRS} for g in grads]),
                 [*grads, total], {"Input": [source], "OutGrad": douts},
                 {"Out": list(total.outputs["Out"])})
    return m.replace(op)


SUM = Pattern("slice_grads",
              P("sum", name="sum", each={"X": P("slice_grad", name="grads", internal=True,
                                                where=_static_window)}),
              _build)
