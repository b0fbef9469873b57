"""``Program.lint()``: structural invariants of a Program, checked without running it.

* every op input is produced by an earlier op, is a data/fed var, or is persistable;
* every op output names a declared variable, and var names match their keys;
* every op's type is registered and its slots match the op definition.
"""
from __future__ import annotations

from typing import List

from . import names, registry
from .dtypes import VarType


def lint_program(program) -> None:
    """Raise ValueError listing every problem found in ``program``."""
    problems: List[str] = []
    for b in program.blocks:
        for name, v in b.vars.items():
            if v.name != name:
                problems.append(f"block {b.idx}: var key '{name}' != var.name '{v.name}'")
        produced: set = set()
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
            for n in op.output_arg_names:
                if n != names.EMPTY_VAR_NAME and b._find_var_recursive(n) is None:
                    problems.append(f"{where}: output '{n}' is not declared")
                produced.add(n)
    if problems:
        raise ValueError("Program.lint found %d problem(s):\n  " % len(problems)
                         + "\n  ".join(problems))
