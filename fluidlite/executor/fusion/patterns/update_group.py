"""Every optimizer's update ops as one in-place kernel over all parameters.

Two steps of the pipeline (``patterns/__init__.py``):

* ``MEMBERS``: each update op -- an op whose definition has an in-place update
  (``ops.inplace.Update`` subclasses overriding ``update_in_place``) -- becomes a ``Member``,
  with the clip's multiply folded in when the multiply's only reader is the update
  (``clip_scale.CLIP_MUL``): its input ``Scale`` is then the clip's scale, read in float64
  before the cast when there is one (``cast_scale``). For an op declaring
  ``folds_l2_decay``, fluid's L2 decay between the clip and the update -- ``scale(Param) ->
  D`` (no bias), ``sum([G', D]) -> G'`` -- is folded in as well (``decay``: the
  coefficient), the clip's multiply with it: the update reads the gradient before the decay
  and the decay's three passes over every parameter run in the update's cached chunks.
* ``GROUPS``: members of the same op type, slots, clip scale and skip mask that can move down
  together become one ``fused(<type>)`` / ``fused(elementwise_mul+<type>)`` call
  (``kernels/update_group.py``) at the last of them. Members of parameters under
  ``options["inplace_min"]`` elements keep their own (cheaper) unfused ops, except for an op
  declaring ``plain_descent``. A member is written in place only when every state it updates
  is a persistable it reads under the same name and nothing fed.
"""
from __future__ import annotations

from typing import Any, Dict, Hashable, List, Optional, Sequence

import numpy as np

from ....core.dtypes import VarType
from ....core.ir import OpArgs, Operator
from ....core.registry import OpDef
from ....ops.inplace import Update
from ..kernels.scale import ClipScale
from ..kernels.update_group import UpdateGroup
from ..matcher import Alt, Context, FusedOp, GroupPattern, Match, P, Pattern, Rewrite
from .clip_scale import CLIP_MUL, clip_inputs


class Member(OpArgs):
    """An update op (with the clip's multiply and the L2 decay's ``scale`` and ``sum``
    folded in, when they are) waiting to be grouped."""

    def __init__(self, op: Operator, inputs: Dict[str, List[str]], cast_scale: bool,
                 clip: Optional[Operator] = None, decay: Sequence[Operator] = ()) -> None:
        self.op, self.type, self.clip, self.decay_ops = op, op.type, clip, list(decay)
        self.covered = ([clip] if clip is not None else []) + self.decay_ops + [op]
        self.inputs, self.outputs, self.attrs = inputs, dict(op.outputs), op.attrs
        self.cast_scale = cast_scale
        self.decay: Optional[float] = float(decay[0].attrs.get("scale", 1.0)) if decay else None
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
    decay = None
    if m["decay"] is not None:
        decay = _decay_scale(m, cx)
        if decay is None:                   # the update alone (the sum and clip stay)
            return Rewrite(m.root, Member(op, inputs, False), frozenset())
        inputs["Grad"] = list(m["decay"].inputs["X"][:1])
    if m["clip"] is None:
        return m.replace(Member(op, inputs, False, decay=_ops(decay, m)),
                         also=_at(decay, m, cx))
    grad, scale, cast = clip_inputs(m)
    inputs["Grad"], inputs["Scale"] = [grad], [scale]
    return m.replace(Member(op, inputs, cast, m["clip"], _ops(decay, m)), also=_at(decay, m, cx))


def _ops(decay: Optional[Operator], m: Match) -> List[Operator]:
    return [decay, m["decay"]] if decay is not None else []


def _at(decay: Optional[Operator], m: Match, cx: Context) -> List[int]:
    """The L2 decay's ``scale`` op, which the match does not bind (it is the sum's second
    input): dropped with the others."""
    if decay is None:
        return []
    return [cx.producer(m["decay"].inputs["X"][1], m.pos["decay"])]


def _decay_scale(m: Match, cx: Context) -> Optional[Operator]:
    """The ``scale`` op of the L2 decay ``sum([G', D]) -> G'`` bound as ``decay`` when it can
    be folded into the update (else None): the op declares ``folds_l2_decay``; D is a
    bias-free ``scale`` of the update's own Param, read only by the sum; G' (the sum's first
    input, the clip's output when the clip matched) and the sum's output are private and read
    only by the sum and the update; a dense gradient; and nothing in between writes Param,
    the clip's inputs or what the sum reads."""
    upd, total, i, js = m["update"], m["decay"], m.root, m.pos["decay"]
    d = cx.opdef(upd)
    if not getattr(d, "folds_l2_decay", False) or getattr(d, "plain_descent", False):
        return None
    (g1, term), out = total.inputs["X"], total.outputs["Out"][0]
    k = cx.producer(term, js)
    param = upd.inputs["Param"][0]
    sc = cx.ops[k] if k is not None else None
    if sc is None or getattr(sc, "type", None) != "scale" or sc.inputs.get("ScaleTensor") \
            or sc.inputs.get("X") != [param] or sc.outputs.get("Out") != [term] \
            or float(sc.attrs.get("bias", 0.0)) != 0.0:
        return None
    pair = {js, i}
    if term in (g1, out) or not cx.private(term) or cx.readers(term) != [js] \
            or not all(cx.private(n) and set(cx.readers(n)) <= pair for n in (g1, out)) \
            or cx.written_between([param], k, i) or cx.written_between([g1], js, i) \
            or _sparse(cx, g1):
        return None
    clip = m["clip"]
    if clip is not None and cx.written_between(clip.input_arg_names, m.pos["clip"], i):
        return None
    return sc


def _sparse(cx: Context, name: str) -> bool:
    v = cx.var(name)
    return v is None or getattr(v, "type", None) == VarType.SELECTED_ROWS


# fluid's L2 decay: sum([G', scale(Param)]) -> G', G' the clip's output when there is a clip
DECAY_SUM = P("sum", name="decay", where=lambda op, cx: len(op.inputs.get("X") or []) == 2,
              src={"X": CLIP_MUL.but(optional=True)})
MEMBERS = Pattern("update_member", P(name="update", where=has_in_place_update, src={
    "Grad": Alt(DECAY_SUM, CLIP_MUL.but(folded=True), optional=True)}), _member)


# -- groups --------------------------------------------------------------------------------------
def _key(m: Member, cx: Context) -> Hashable:
    return (m.type, tuple(sorted(k for k, v in m.inputs.items() if v)),
            tuple(sorted(k for k, v in m.outputs.items() if v)),
            tuple(m.inputs.get("Scale", [])), m.cast_scale, m.decay is not None,
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
    if m.clip is not None:
        mul = m.clip
        if m.cast_scale:            # read the float64 scale: tiny-scale safe, no cast op
            out.append(FusedOp(ClipScale(), [mul], {"X": list(mul.inputs["X"]),
                                                    "Scale": list(m.inputs["Scale"])},
                               dict(mul.outputs)))
        else:
            out.append(mul)
    out.extend(m.decay_ops)         # the L2 decay's scale and sum
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
    decays = [m.decay for m in members] if first.decay is not None else None
    opdef = UpdateGroup(first.type, in_slots, out_slots, attrs, inplace, scaled,
                        first.skip_src or None, cx.options["inplace_min"], decays)
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
