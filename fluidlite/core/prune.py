"""Program pruning for inference: fluid's ``Program._prune``, ``_prune_with_input`` and
``_inference_optimize``. Each returns a new Program; the original is never modified.

* ``prune_with_input(program, feeds, targets)`` keeps only the ops of block 0 that the targets
  depend on, treating fed variables as cut points (the ops producing them are dropped), and
  drops every variable no kept op, target or sub-block refers to. Existing ``feed``/``fetch``
  ops are dropped.
* ``inference_optimize(program)`` sets ``is_test=True`` on every op that has the attr and
  removes reader ops (``prune_read_op``).
"""
from __future__ import annotations

from typing import Any, List, Sequence, Set

from . import names
from .dtypes import VarType
from .ir import Block, Operator, Variable, provide

__all__ = ["prune", "prune_with_input", "inference_optimize"]

_READER_OPS = frozenset({"read", "create_py_reader", "create_double_buffer_reader"})


def _target_names(targets: Any) -> "tuple[List[str], List[Any]]":
    if not isinstance(targets, (list, tuple)):
        targets = [targets]
    var_names, ops = [], []
    for t in targets:
        if isinstance(t, Variable):
            var_names.append(t.name)
        elif isinstance(t, str):
            var_names.append(t)
        elif isinstance(t, Operator):
            ops.append(t)
        else:
            raise ValueError(f"All targets of Program._prune_with_input() can only be Variable "
                             f"or Operator, but received {type(t)}.")
    return var_names, ops


def _sub_block_inputs(program: Any, op: Any, seen: Set[int]) -> Set[str]:
    """Every variable name read or written inside the sub-blocks an op refers to."""
    out: Set[str] = set()
    for value in op.attrs.values():
        blocks = value if isinstance(value, list) else [value]
        for b in blocks:
            if isinstance(b, Block) and b.idx not in seen:
                seen.add(b.idx)
                for sub_op in b.ops:
                    out.update(sub_op.input_arg_names)
                    out.update(sub_op.output_arg_names)
                    out |= _sub_block_inputs(program, sub_op, seen)
    return out


def prune_with_input(program: Any, feeded_var_names: Sequence[str], targets: Any) -> Any:
    """A copy of ``program`` holding only what computing ``targets`` from the feeds needs."""
    if isinstance(feeded_var_names, str):
        feeded_var_names = [feeded_var_names]
    if not isinstance(feeded_var_names, (list, tuple, set)):
        raise ValueError(f"feeded_var_names of Program._prune_with_input() must be a list of "
                         f"str, but received {type(feeded_var_names)}.")
    for n in feeded_var_names:
        if not isinstance(n, str):
            raise ValueError(f"All feeded_var_names of Program._prune_with_input() can only be "
                             f"str, but received {type(n)}.")
    target_vars, target_ops = _target_names(targets)
    block0 = program.global_block()
    for n in list(target_vars) + list(feeded_var_names):
        if block0._find_var_recursive(n) is None:
            raise ValueError(f"Program._prune_with_input(): variable '{n}' is not in the "
                             f"program's global block")
    target_op_ids = set()
    for op in target_ops:
        if op.block is not block0:
            raise ValueError(f"target op '{op.type}' does not belong to this program's global "
                             f"block")
        target_op_ids.add(op.idx)
    p = program.clone()
    block = p.global_block()
    feeds = set(feeded_var_names)
    needed: Set[str] = set(target_vars)
    kept = []
    seen_blocks: Set[int] = set()
    for i in range(len(block.ops) - 1, -1, -1):
        op = block.ops[i]
        if op.type in ("feed", "fetch"):
            continue
        outs = [n for n in op.output_arg_names if n != names.EMPTY_VAR_NAME]
        if i in target_op_ids or any(n in needed and n not in feeds for n in outs):
            kept.append(op)
            needed.update(n for n in op.input_arg_names if n not in feeds)
            needed |= _sub_block_inputs(p, op, seen_blocks)
    kept.reverse()
    block.ops = kept
    used = set(target_vars)
    for op in kept:
        used.update(op.input_arg_names)
        used.update(op.output_arg_names)
    used |= needed
    for b in p.blocks[1:]:
        for op in b.ops:
            used.update(op.input_arg_names)
            used.update(op.output_arg_names)
    block.vars = {n: v for n, v in block.vars.items() if n in used}
    p._relink()
    p._bump()
    return p


def prune(program: Any, targets: Any) -> Any:
    """``Program._prune(targets)``: ``prune_with_input`` with no feeds."""
    return prune_with_input(program, [], targets)


def inference_optimize(program: Any, prune_read_op: bool = True) -> Any:
    """A copy with ``is_test=True`` on every op that has the attr (dropout, batch_norm, ...)
    and, with ``prune_read_op``, without reader ops and READER variables."""
    p = program.clone()
    for b in p.blocks:
        if prune_read_op:
            b.ops = [op for op in b.ops if op.type not in _READER_OPS]
            b.vars = {n: v for n, v in b.vars.items() if v.type != VarType.READER}
        for op in b.ops:
            if "is_test" in op.attrs:
                op.attrs["is_test"] = True
    p._relink()
    p._bump()
    return p


provide("prune", prune)
provide("prune_with_input", prune_with_input)
provide("inference_optimize", inference_optimize)
