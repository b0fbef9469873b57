"""A forward op and its grad op sharing work (``kernels/saved_grad.py``).

``SAVED``: a ``<type>_grad`` whose forward definition declares ``saves_for_grad`` is paired
with the forward op it differentiates -- the last ``<type>`` before it reading the same
inputs (``grad_uses``) with the same kernel attrs, nothing in between writing them. The
forward becomes ``fused(<type>+saved)``, which also writes the saved value into a variable of
the plan alone (``<Out>@SAVED<block>.<position>``), and the grad op ``fused(saved+<type>_grad)``
reading it. Exact (the unfused ops' bits), so also in the dygraph step replay's plans.
"""
from __future__ import annotations

from typing import Any, Optional

from ..kernels.saved_grad import SAVED, SavedForward, SavedGrad
from ..matcher import Context, FusedOp, Match, P, Pattern, Rewrite


def _saving_grad(op: Any, cx: Context) -> bool:
    fwd = getattr(cx.opdef(op), "forward_def", None)
    return fwd is not None and fwd.saves_for_grad


def _build(m: Match, cx: Context) -> Optional[Rewrite]:
    grad, at = m["grad"], m.root
    gdef = cx.opdef(grad)
    fdef = gdef.forward_def
    # the inputs both read (an optional one absent from both, as layer_norm's Scale, is not
    # compared: ``op.inputs.get`` of it is empty too)
    uses = {s.name: list(grad.inputs.get(s.name) or ()) for s in fdef.in_slots
            if any(g.name == s.name for g in gdef.in_slots)}
    read = [n for ns in uses.values() for n in ns]
    if not read:
        return None
    kw = fdef.kernel_attrs(grad.attrs)
    for j in reversed(cx.readers(read[0])):
        op = cx.ops[j]
        if j >= at or getattr(op, "type", None) != fdef.type:
            continue
        writes = op.output_arg_names
        if (all(list(op.inputs.get(s) or ()) == ns for s, ns in uses.items())
                and fdef.kernel_attrs(op.attrs) == kw and writes
                and not set(writes).intersection(read)
                and not cx.written_between(read, j, at)):
            break
    else:
        return None
    saved = f"{writes[0]}@SAVED{cx.block.idx}.{j}"
    outputs = {k: list(v) for k, v in op.outputs.items()}
    outputs[SAVED] = [saved]
    fwd = FusedOp(SavedForward(fdef, op.attrs), [op],
                  {k: list(v) for k, v in op.inputs.items()}, outputs)
    inputs = {k: list(v) for k, v in grad.inputs.items()}
    inputs[SAVED] = [saved]
    bwd = FusedOp(SavedGrad(gdef, grad.attrs), [grad], inputs,
                  {k: list(v) for k, v in grad.outputs.items()})
    return Rewrite(j, fwd, frozenset(), ((at, bwd),))


SAVED_GRAD = Pattern("saved_grad", P(name="grad", where=_saving_grad), _build)
