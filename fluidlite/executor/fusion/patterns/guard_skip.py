"""Issue 13: update ops committed by the skip-on-overflow / gradient-merge guard join their
group again.

The guard (``amp/guard.py``) renames every output of an update op to a temporary committed by
``select_input([tmp, S], Mask) -> S`` at the end of the block. When every output of a member is
committed that way (each temporary read only by its select, ``S`` the matching input, one mask
computed before the member, nothing else touching ``S`` in between), the member writes ``S``
itself and its group returns the inputs unchanged when the mask is 1: in place again, the
selects gone.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Set, Tuple

from ..matcher import Context, Match, P, Pattern, Rewrite
from .update_group import Member, is_member

# select_input([X0, X1], Mask) -> Out with Out == X1: keeps X1 when the mask says so
_COMMIT = P("select_input")
_NOT_STATES = ("Grad", "Scale", "Skip")     # inputs a member never commits to


def _has_outputs(op: Any, cx: Context) -> bool:
    return is_member(op, cx) and bool(op.outputs)


def _fold(m: Match, cx: Context) -> Optional[Rewrite]:
    member, i = m["member"], m.root
    found = _commits(i, member, cx)
    if found is None:
        return None
    outputs, src, sels, mask = found
    new = Member(member.op, dict(member.inputs, Skip=[mask]), member.cast_scale,
                 member.clip, member.decay_ops)
    new.outputs, new.skip_src = outputs, src
    new.selects = [cx.ops[j] for j in sels]
    return m.replace(new, also=sels)


def _commits(i: int, m: Member, cx: Context
             ) -> Optional[Tuple[Dict[str, List[str]], Dict[str, str], List[int], str]]:
    """(the member's outputs renamed to the committed names, output slot -> the input slot
    it keeps on a skip, the selects' positions, the mask), or None."""
    by_name = {n: slot for slot, ns in m.inputs.items() for n in ns}
    outputs: Dict[str, List[str]] = {}
    src: Dict[str, str] = {}
    sels: List[int] = []
    masks: Set[str] = set()
    for slot, ns in m.outputs.items():
        j = _commit_of(i, ns, by_name, cx)
        if j is None:
            return None
        sel = cx.ops[j]
        state = sel.outputs["Out"][0]
        outputs[slot], src[slot] = [state], by_name[state]
        sels.append(j)
        masks.update(sel.inputs.get("Mask", []))
    if len(masks) != 1:
        return None
    mask = next(iter(masks))
    made = cx.uses.producer(mask)
    if made is None or made > i:
        return None
    return outputs, src, sels, mask


def _commit_of(i: int, ns: List[str], by_name: Dict[str, str], cx: Context) -> Optional[int]:
    """Position of the select committing the member's output ``ns`` (one temporary) to one of
    the member's state inputs, nothing touching that state in between; or None."""
    if len(ns) != 1:
        return None
    tmp = ns[0]
    readers = cx.readers(tmp)
    if len(readers) != 1 or cx.uses.producers.get(tmp) != [i] or not cx.private(tmp):
        return None
    j = readers[0]
    sel = cx.ops[j]
    if j < i or cx.matches(_COMMIT, j) is None:
        return None
    x, out = sel.inputs.get("X", []), sel.outputs.get("Out", [])
    if len(x) != 2 or x[0] != tmp or len(out) != 1 or x[1] != out[0] or \
            out[0] not in by_name or by_name[out[0]] in _NOT_STATES:
        return None
    state = out[0]
    uses = cx.uses
    if any(i < k < j for k in uses.readers.get(state, []) + uses.producers.get(state, [])):
        return None
    return j


PATTERN = Pattern("guard_skip", P(name="member", where=_has_outputs), _fold)
