"""Issue 17: the data-parallel averaging, an all-reduce followed by ``scale(1/nranks)`` of the
same gradient, as one kernel (``kernels/reduce_scale.py``) that scales the reduction's own result
buffer in place.

``c_allreduce_sum`` or ``c_allreduce_wait`` right before a plain ``scale`` (no ScaleTensor, no
bias) reading its result, a float result the scale keeps the dtype of, and the unscaled sum dead
after the scale (overwritten by it, or a temporary nobody else reads). The blocking sum reduces
in the gradient's buffer itself (``MPI_IN_PLACE``) when the plan proves that buffer *owned*:
fresh and unread by anything else (``OpDef.fresh_outputs`` / ``passes_through``); a wait does
when its ``c_allreduce_start`` took such a buffer (the shared-memory window reduces it at the
wait). Never Open MPI's non-blocking in-place all-reduce (measured on config D: slower than
into a new buffer).
"""
from __future__ import annotations

from typing import Any, Optional, Set

from ....core.dtypes import VarType
from ..kernels.reduce_scale import ReduceScale
from ..matcher import Context, FusedOp, Match, P, Pattern, Rewrite


def _plain_scale(op: Any, cx: Context) -> bool:
    return not op.inputs.get("ScaleTensor") and not op.attrs.get("bias", 0.0)


# the reductions, by the input slot they reduce: a tensor (blocking) or a request in flight
_REDUCES = {"c_allreduce_sum": "X", "c_allreduce_wait": "Request"}
_START = P("c_allreduce_start", name="start", optional=True, keep=True)
ROOT = P("scale", name="scale", where=_plain_scale, src={
    "X": P(*_REDUCES, name="reduce", adjacent=True, src={"Request": _START})})


def _build(m: Match, cx: Context) -> Optional[Rewrite]:
    op, scale, i = m["reduce"], m["scale"], m.pos["reduce"]
    r, o = op.outputs["Out"][0], scale.outputs["Out"][0]
    dt = cx.dtype(r)
    if getattr(cx.var(r), "type", None) == VarType.SELECTED_ROWS:
        return None             # a sparse gradient: gathered rows, the ops' own kernels
    # the unscaled sum must be dead after the scale: overwritten by it, or a temporary nobody
    # else reads
    dead = o == r or (cx.private(r) and all(k <= m.root for k in cx.readers(r)))
    if not dead or dt is None or dt.kind != "f" or cx.dtype(o) != dt:
        return None
    slot = _REDUCES[op.type]
    wait = slot == "Request"
    x = op.inputs[slot][0]
    if wait:
        start, k = m["start"], m.pos.get("start")
        inplace = (start is not None and start.outputs["Request"] == [x]
                   and start.inputs["X"] == [r] and _owned(cx, r, k, i, {k}))
    else:
        inplace = r == x and _owned(cx, x, i, i, {i})
    kernel = ReduceScale(wait, op.attrs.get("ring_id", 0), float(scale.attrs.get("scale", 1.0)),
                         inplace)
    return m.replace(FusedOp(kernel, [op, scale], {slot: list(op.inputs[slot])},
                             {"Out": list(scale.outputs["Out"])}))


def _owned(cx: Context, x: str, i: int, last: int, allowed: Set[int]) -> bool:
    """Whether op ``i`` may reduce ``x`` in its own buffer: ``x`` is a private temporary
    whose last writer before ``i`` declares that output fresh (``OpDef.fresh_outputs``: a
    new buffer aliasing nothing), and no op from that writer to ``last`` reads it except
    the ops in ``allowed``."""
    if not cx.private(x):
        return False
    ops = cx.ops
    allowed = set(allowed)
    j = i
    while True:
        j = next((k for k in range(j - 1, -1, -1) if x in ops[k].output_arg_names), None)
        if j is None or hasattr(ops[j], "covered"):     # a fused op: nothing declared
            return False
        opdef = cx.opdef(ops[j])
        if opdef is None:
            return False
        slots = [s for s, names_ in ops[j].outputs.items() if x in names_]
        through = [opdef.passes_through.get(s) for s in slots]
        if not slots or not all(t is not None and ops[j].outputs[s] == ops[j].inputs.get(t)
                                for s, t in zip(slots, through)):
            break
        allowed.add(j)          # returns x's own array under the same name: look further
    fresh = opdef.fresh_outputs
    if not slots or any(s not in fresh for s in slots) or \
            sum(n == x for n in ops[j].output_arg_names) != 1:
        return False
    return not any(x in ops[k].input_arg_names
                   for k in range(j + 1, last + 1) if k not in allowed)


PATTERN = Pattern("allreduce_scale", ROOT, _build)
