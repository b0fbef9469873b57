"""``Program.lint()``: structural invariants of a Program, checked without running it.

* every op input is produced by an earlier op, is a data/fed var, or is persistable;
* every op output names a declared variable, and var names match their keys;
* every op's type is registered and its slots match the op definition;
* a sub-block (an op's Block attribute) has that op's block as parent, and is checked in
  place: its ops may read what the enclosing blocks computed before the op (a grad block also
  what its forward block computed).
"""
from __future__ import annotations

from typing import List, Set

from . import control_flow as _cf, names, registry
from .dtypes import VarType
from .ir import provide


def lint_program(program) -> None:
    """Raise ValueError listing every problem found in ``program``."""
    problems: List[str] = []
    for b in program.blocks:
        for name, v in b.vars.items():
            if v.name != name:
                problems.append(f"block {b.idx}: var key '{name}' != var.name '{v.name}'")
        if b.idx > 0 and not 0 <= b.parent_idx < len(program.blocks):
            problems.append(f"block {b.idx}: parent_idx {b.parent_idx} is not a block")
    linted: Set[int] = set()
    _lint_block(program.global_block(), set(), problems, linted)
    for b in program.blocks:          # blocks no op owns (still checked on their own)
        if b.idx not in linted:
            _lint_block(b, set(), problems, linted)
    if problems:
        raise ValueError("Program.lint found %d problem(s):\n  " % len(problems)
                         + "\n  ".join(problems))


def _lint_block(b, produced: Set[str], problems: List[str], linted: Set[int]) -> None:
    """Check ``b``'s ops in order; ``produced``: names with a value when the block starts (what
    enclosing blocks computed before the op owning it)."""
    linted.add(b.idx)
    produced = set(produced)
    for i, op in enumerate(b.ops):
        where = f"block {b.idx} op #{i} '{op.type}'"
        if not registry.has_op(op.type):
            problems.append(f"{where}: op type is not registered")
            continue
        d = registry.get_op_def(op.type)
        for kind, slots, table in (("input", d.in_slots, op.inputs),
                                   ("output", d.out_slots, op.outputs)):
            known = {s.name: s for s in slots}
            for key, args in table.items():
                if key not in known:
                    problems.append(f"{where}: unknown {kind} slot '{key}'")
                elif len(args) > 1 and not known[key].duplicable:
                    problems.append(f"{where}: {kind} slot '{key}' takes one var, has "
                                    f"{len(args)}")
            for s in slots:
                if not s.dispensable and not table.get(s.name):
                    problems.append(f"{where}: missing {kind} slot '{s.name}'")
        for n in op.input_arg_names:
            if n == names.EMPTY_VAR_NAME or n in produced:
                continue
            v = b._find_var_recursive(n)
            if v is None:
                problems.append(f"{where}: input '{n}' is not declared")
            elif not (v.persistable or v.is_data or v.type != VarType.LOD_TENSOR):
                problems.append(f"{where}: input '{n}' is used before any op produces "
                                f"it and is neither fed data nor persistable")
        for sub in _cf.sub_blocks(op):
            if sub.parent_idx != b.idx:
                problems.append(f"{where}: its sub-block {sub.idx} has parent_idx "
                                f"{sub.parent_idx}, not {b.idx}")
            if sub.idx in linted or sub is b:
                continue
            inner = produced | set(op.input_arg_names)
            fwd = sub.forward_block_idx
            if 0 <= fwd < len(b.program.blocks):   # a grad block reads the forward values
                fb = b.program.blocks[fwd]
                inner |= {n for o in _cf.walk_ops(fb) for n in o.output_arg_names}
                inner |= {n for n in sub.vars if _cf.SSA_TAG in n}
                inner |= set(op.attrs.get("block_in_grads", []))
            _lint_block(sub, inner, problems, linted)
        for n in op.output_arg_names:
            if n != names.EMPTY_VAR_NAME and b._find_var_recursive(n) is None:
                problems.append(f"{where}: output '{n}' is not declared")
            produced.add(n)


provide("lint", lint_program)
