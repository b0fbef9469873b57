"""A ``while_grad`` and its grad block in Paddle's form (writer) and back (reader).

fluidlite's grad block of a ``while`` names the value an outer variable has at each point of
an iteration by its SSA version (``i@SSA@6``: ``i`` after op #6 of the body, core/
control_flow.py) and its ``while_grad`` says which inner names carry the incoming gradients
(``block_in_grads``). Paddle 2.6 (like fluid 1.8) keeps no versions: its ``while_grad``

* links each outer ``Out@GRAD[j]`` into the step scope under ``original_output_grad[j]``
  (the two lists must have the same length: "The number of original output gradient names
  does not match the number of backward input gradient names" otherwise);
* runs the grad block in the step scope of each iteration, last first, where a loop counter
  updated in place (``increment(X=i, Out=i)``: Paddle copies no variable an op of the body both
  reads and writes) is the outer variable itself, so Paddle's backward undoes each increment
  with an ``increment`` of the opposite step where the body's grad ops need the earlier value.

The writer does the same: every read of a version of such a counter becomes a read of the
counter, with ``increment`` ops (step +-s) inserted before it to bring the counter to that
version, and after the block's last op back to the iteration's start (the end value of the
iteration before). The inserted ops carry ``fluidlite_form = "while_grad_step"`` and every
renamed op ``fluidlite_ssa`` (``slot:position:version`` per renamed argument), so the reader
restores fluidlite's block exactly; Paddle ignores both attributes.

A grad block reading other versions (a variable the body rewrites with another op, or two
versions in one op) has no Paddle form: it is written as it is (fluidlite reads it back
exactly), and a logged warning says Paddle cannot run that loop's gradient.
"""
from __future__ import annotations

import logging
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ...core.control_flow import SSA_TAG, base_name

_log = logging.getLogger("fluidlite")

FORM_ATTR = "fluidlite_form"        # program.py's _FLUIDLITE_FORM
STEP_FORM = "while_grad_step"
SSA_ATTR = "fluidlite_ssa"
EMPTY = "@EMPTY@"

_Op = Tuple[str, Dict[str, List[str]], Dict[str, List[str]], Dict[str, Any]]


def while_grad_attrs(inputs: Dict[str, List[str]], attrs: Dict[str, Any]) -> Dict[str, Any]:
    """A ``while_grad``'s attrs with Paddle's ``original_output_grad``: for each ``Out@GRAD``
    argument the grad block's name of that gradient (``block_in_grads``; ``@EMPTY@`` where
    there is none, which Paddle skips as it skips the empty outer name)."""
    inner = list(attrs.get("block_in_grads") or [])
    outer = inputs.get("Out@GRAD", [])
    if len(inner) != len(outer):
        return attrs
    return dict(attrs, original_output_grad=[n or EMPTY for n in inner])


def while_grad_from_paddle(attrs: Dict[str, Any]) -> None:
    """Reader: drop (in place) the ``original_output_grad`` ``while_grad_attrs`` derived from
    fluidlite's ``block_in_grads``; a file of Paddle's own keeps its value."""
    inner = attrs.get("block_in_grads")
    if inner and attrs.get("original_output_grad") == [n or EMPTY for n in inner]:
        del attrs["original_output_grad"]


def _counters(fwd: Any, ops: Sequence[_Op]) -> Tuple[Dict[str, List[Tuple[str, float]]],
                                                      List[str]]:
    """The outer variables the grad block reads that the body updates only by in-place
    ``increment`` -> [(version, step)] in body order (version 0 = the name itself, step 0),
    and the variables whose versions it reads but the body writes otherwise (no Paddle form).
    An outer variable the body rewrites otherwise and the grad block reads only as it was
    when the iteration started needs nothing: Paddle keeps that value in the step scope."""
    # (a gradient's name may carry a version, x@SSA@8@GRAD: Paddle links it by name through
    # original_output_grad)
    reads = {a for _, ins, _, _ in ops for args in ins.values() for a in args
             if "@GRAD" not in a}
    versioned = {base_name(a) for a in reads if SSA_TAG in a}
    body_writes = {n for op in fwd.ops for n in op.output_arg_names if n not in fwd.vars}
    chains: Dict[str, List[Tuple[str, float]]] = {}
    bad = []
    for v in sorted(versioned | (body_writes & reads)):
        chain = [(v, 0.0)]
        for k, op in enumerate(fwd.ops):
            if v not in op.output_arg_names:
                continue
            if op.type != "increment" or op.inputs.get("X") != [v] or \
                    op.outputs.get("Out") != [v] or v in fwd.vars:
                chain = []
                break
            chain.append((f"{v}{SSA_TAG}{k}", float(op.attrs.get("step", 1.0))))
        if chain:
            chains[v] = chain
        elif v in versioned:
            bad.append(v)
    written = {base_name(a) for _, _, outs, _ in ops for args in outs.values() for a in args}
    bad += sorted(v for v in chains if v in written)
    return {v: c for v, c in chains.items() if v not in bad}, bad


def _steps(v: str, chain: List[Tuple[str, float]], cur: int, want: int,
           role: Dict[str, Any]) -> List[_Op]:
    """``increment`` ops moving counter ``v`` from version ``cur`` to version ``want``."""
    out = []
    attrs = dict(role, **{FORM_ATTR: STEP_FORM})
    while cur > want:                       # undo the increment that made version cur
        out.append(("increment", {"X": [v]}, {"Out": [v]}, dict(attrs, step=-chain[cur][1])))
        cur -= 1
    while cur < want:
        cur += 1
        out.append(("increment", {"X": [v]}, {"Out": [v]}, dict(attrs, step=chain[cur][1])))
    return out


def paddle_grad_block(grad_block: Any, ops: List[_Op]) -> List[_Op]:
    """The ops to write for ``grad_block`` (the grad block of a ``while``; ``ops`` as the
    writer would write them) in Paddle's form (see the module docstring)."""
    fwd = grad_block.program.blocks[grad_block.forward_block_idx]
    chains, bad = _counters(fwd, ops)
    if bad:
        _log.warning(
            "block %d (the grad block of the While loop of block %d): it reads a value %r "
            "takes part-way through an iteration, and the loop body writes %r other than by "
            "an in-place increment. Paddle's while_grad has no name for such a value, so the "
            "file is written in fluidlite's form: fluidlite reads and runs it, Paddle cannot "
            "run its backward pass. To export it to Paddle, write each value the loop "
            "computes into a new variable instead of overwriting %r inside the loop.",
            grad_block.idx, fwd.idx, bad[0], bad[0], bad[0])
        return ops
    if not chains:
        return ops
    index = {name: (v, j) for v, chain in chains.items() for j, (name, _) in enumerate(chain)}
    cur = {v: len(chain) - 1 for v, chain in chains.items()}   # each step starts at the end
    out: List[_Op] = []
    role: Dict[str, Any] = {}
    for op_type, ins, outs, attrs in ops:
        role = {k: a for k, a in attrs.items() if k == "op_role"}
        want: Dict[str, int] = {}
        renamed, new_ins = [], {}
        for slot, args in ins.items():
            new_ins[slot] = list(args)
            for pos, a in enumerate(args):
                if a not in index:
                    continue
                v, j = index[a]
                if want.setdefault(v, j) != j:
                    _log.warning("block %d: the gradient op '%s' reads two values of %r, "
                                 "which Paddle's while_grad cannot express: written in "
                                 "fluidlite's form (Paddle cannot run its backward pass)",
                                 grad_block.idx, op_type, v)
                    return ops
                if a != v:
                    new_ins[slot][pos] = v
                    renamed.append(f"{slot}:{pos}:{a}")
        for v, j in sorted(want.items()):
            out += _steps(v, chains[v], cur[v], j, role)
            cur[v] = j
        if renamed:
            attrs = dict(attrs, **{SSA_ATTR: renamed})
        out.append((op_type, new_ins, outs, attrs))
    for v in sorted(chains):
        out += _steps(v, chains[v], cur[v], 0, role)
    return out


def from_paddle(inputs: Dict[str, List[str]], attrs: Dict[str, Any]
                ) -> Optional[Dict[str, List[str]]]:
    """Reader: None for an op ``paddle_grad_block`` inserted (drop it); else the inputs with
    the versions it renamed restored (``attrs`` loses ``SSA_ATTR``, in place)."""
    if attrs.get(FORM_ATTR) == STEP_FORM:
        return None
    renamed = attrs.pop(SSA_ATTR, None)
    if not renamed:
        return inputs
    inputs = {k: list(v) for k, v in inputs.items()}
    for entry in renamed:
        slot, pos, name = str(entry).split(":", 2)
        args = inputs.get(slot, [])
        if not pos.isdigit() or int(pos) >= len(args):
            raise ValueError(f"attribute {SSA_ATTR} entry {entry!r} names argument {pos} of "
                             f"slot {slot!r}, which has {len(args)}")
        args[int(pos)] = name
    return inputs


def forward_locals(program: Any, block: Any) -> frozenset:
    """For the grad block of a ``while_grad``: the names its forward block (the loop body)
    declares, which fluidlite's grad block declares again and the writer leaves out --
    Paddle reads them from the step scope of the iteration, and a declaration in the grad
    block gives it an empty variable there instead ("Tensor holds no memory"). Empty for any
    other block."""
    if block.forward_block_idx == -1 or not any(
            op.type == "while_grad" and op.attrs.get("sub_block") is block
            for blk in program.blocks for op in blk.ops):
        return frozenset()
    return frozenset(program.blocks[block.forward_block_idx].vars)


def redeclare_forward_locals(program: Any, block: Any, names: Sequence[str],
                             declared: Any) -> None:
    """Reader: declare in grad ``block`` each of ``names`` (its ops' arguments) that neither
    it nor an ancestor declares (``declared(name)``) but its forward block does -- as
    fluidlite's backward declares them (what ``forward_locals`` left out)."""
    if block.forward_block_idx == -1 or block.forward_block_idx >= len(program.blocks):
        return
    fwd = program.blocks[block.forward_block_idx]
    added = []
    for n in names:
        like = fwd.vars.get(n)
        if like is None or n in block.vars or declared(n):
            continue
        block.create_var(name=n, shape=like.shape, dtype=like.dtype,
                         lod_level=like.lod_level, type=like.type)
        added.append(n)
    if added:               # fluidlite's order: the SSA versions, these, then the gradients
        order = [n for n in block.vars if SSA_TAG in n and "@GRAD" not in n] + added
        order += [n for n in block.vars if n not in set(order)]
        block.vars = {n: block.vars[n] for n in order}
