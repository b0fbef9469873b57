"""Every optimizer's update ops as one in-place kernel over all parameters.

Two steps of the pipeline (``patterns/__init__.py``):

* ``MEMBERS``: each update op -- an op whose definition has an in-place update
  (``ops.inplace.Update`` subclasses overriding ``update_in_place``) -- becomes a ``Member``,
  with the clip's multiply folded in when the multiply's only reader is the update
  (``clip_scale.CLIP_MUL``): its input ``Scale`` is then the clip's scale, read in float64
  before the cast when there is one (``cast_scale``).
* ``GROUPS``: members of the same op type, slots, clip scale and skip mask that can move down
  together become one ``fused(<type>)`` / ``fused(elementwise_mul+<type>)`` call
  (``kernels/update_group.py``) at the last of them. Members of parameters under
  ``options["inplace_min"]`` elements keep their own (cheaper) unfused ops, except for an op
  declaring ``plain_descent``. A member is written in place only when every state it updates
  is a persistable it reads under the same name and nothing fed.
"""
from __future__ import annotations

from typing import Any, Dict, Hashable, List

import numpy as np

from ....core.ir import OpArgs, Operator
from ....core.registry import OpDef
from ....ops.inplace import Update
from ..kernels.scale import ClipScale
from ..kernels.update_group import UpdateGroup
from ..matcher import Context, FusedOp, GroupPattern, Match, P, Pattern, Rewrite
from .clip_scale import CLIP_MUL, clip_inputs


class Member(OpArgs):
    """An update op (or clip multiply + update) waiting to be grouped."""

    def __init__(self, op: Operator, covered: List[Any], inputs: Dict[str, List[str]],
                 cast_scale: bool) -> None:
        self.op, self.covered, self.type = op, covered, op.type
        self.inputs, self.outputs, self.attrs = inputs, dict(op.outputs), op.attrs
        self.cast_scale = cast_scale
        # issue 13 (guard_skip.py): the select_input ops folded into this member, and for each
        # output slot the input slot whose value it keeps when the step is skipped
        self.selects: List[Any] = []
        self.skip_src: Dict[str, str] = {}


def has_in_place_update(op: Any, cx: Context) -> bool:
    """The op's definition updates its parameter and states in place (``ops/inplace.py``)."""
    d = cx.opdef(op)
    return isinstance(d, Update) and type(d).update_in_place is not Update.update_in_place


def is_member(op: Any, cx: Context) -> bool:
    return isinstance(op, Member)


def _member(m: Match, cx: Context) -> Rewrite:
    op = m["update"]
    inputs = {k: list(v) for k, v in op.inputs.items()}
    if m["clip"] is None:
        return m.replace(Member(op, [op], inputs, False))
    grad, scale, cast = clip_inputs(m)
    inputs["Grad"], inputs["Scale"] = [grad], [scale]
    return m.replace(Member(op, [m["clip"], op], inputs, cast))


MEMBERS = Pattern("update_member", P(name="update", where=has_in_place_update, src={
    "Grad": CLIP_MUL.but(optional=True, folded=True)}), _member)


# -- groups --------------------------------------------------------------------------------------
def _key(m: Member, cx: Context) -> Hashable:
    return (m.type, tuple(sorted(k for k, v in m.inputs.items() if v)),
            tuple(sorted(k for k, v in m.outputs.items() if v)),
            tuple(m.inputs.get("Scale", [])), m.cast_scale,
            tuple(m.inputs.get("Skip", [])),      # issue 13: one mask per group
            tuple(sorted(m.skip_src.items())))


def _build(members: List[Member], cx: Context) -> List[Any]:
    """The group kernel for the members worth it, the unfused ops for the others."""
    plain = cx.opdef(members[0]).plain_descent
    big = [m for m in members if plain or not _small(m, cx)]
    out: List[Any] = []
    for m in members:
        if m not in big:
            out.extend(_restore(m))
    if big:
        out.append(_group(big, cx))
    return out


def _small(m: Member, cx: Context) -> bool:
    """A parameter of fewer than ``inplace_min`` elements (by its declared shape)."""
    v = cx.var(m.inputs["Param"][0])
    shape = tuple(getattr(v, "shape", ()) or ())
    return bool(shape) and all(d >= 0 for d in shape) and \
        int(np.prod(shape)) < cx.options["inplace_min"]


def _restore(m: Member) -> List[Any]:
    """The member's own ops: [the clip's multiply,] the update op (out of place)."""
    out: List[Any] = []
    if len(m.covered) == 2:
        mul = m.covered[0]
        if m.cast_scale:            # read the float64 scale: tiny-scale safe, no cast op
            out.append(FusedOp(ClipScale(), [mul], {"X": list(mul.inputs["X"]),
                                                    "Scale": list(m.inputs["Scale"])},
                               dict(mul.outputs)))
        else:
            out.append(mul)
    out.append(m.op)
    out.extend(m.selects)           # issue 13: the guard's commits, right after the update
    return out


def _group(members: List[Member], cx: Context) -> FusedOp:
    first = members[0]
    update = cx.opdef(first)
    in_slots = [s.name for s in update.in_slots if first.inputs.get(s.name)]
    out_slots = [s.name for s in update.out_slots if first.outputs.get(s.name)]
    scaled = bool(first.inputs.get("Scale"))
    inputs = {s: [m.inputs[s][0] for m in members] for s in in_slots}
    outputs = {s: [m.outputs[s][0] for m in members] for s in out_slots}
    if scaled:
        inputs["Scale"] = list(first.inputs["Scale"])
    if first.skip_src:              # issue 13: see guard_skip.py
        inputs["Skip"] = list(first.inputs["Skip"])
    attrs = [update.kernel_attrs(m.attrs) for m in members]
    inplace = [_may_write(m, update, cx) for m in members]
    opdef = UpdateGroup(first.type, in_slots, out_slots, attrs, inplace, scaled,
                        first.skip_src or None, cx.options["inplace_min"])
    covered = [c for m in members for c in m.covered]
    return FusedOp(opdef, covered, inputs, outputs)


def _may_write(m: Member, update: OpDef, cx: Context) -> bool:
    pairs = [("Param", "ParamOut")] + [p for p in update.state_slots if m.inputs.get(p[0])]
    for i, o in pairs:
        src, dst = m.inputs.get(i), m.outputs.get(o)
        if not src or not dst or src != dst or src[0] in cx.feed:
            return False
        v = cx.var(src[0])
        if v is None or not v.persistable:
            return False
    grad = m.inputs["Grad"][0]
    return grad not in {n for i, _ in pairs for n in m.inputs.get(i, [])}


GROUPS = GroupPattern("update_group", P(where=is_member), _key, _build)

__all__ = ["GROUPS", "MEMBERS", "Member", "has_in_place_update", "is_member"]
