"""The block tree of a program read from a file: checked before anything walks it.

A file from elsewhere can declare blocks whose parents form a cycle, or an op whose sub-block is
its own block or an ancestor: variable lookup (which walks parents) would never end, and the
executor would recurse until Python gives up. Both readers (Paddle's protobuf, fluidlite's JSON)
accept exactly the shape fluid itself writes: block 0 is the root (parent -1), every other
block's parent comes before it (so the parents form a tree rooted at block 0), nesting is at
most ``MAX_DEPTH`` deep, and an op's sub-block is a block nested inside the op's own block.
The ``feed`` and ``fetch`` ops that mark an inference program's targets are checked here too:
each names exactly one variable (``load_inference_model`` and the executor index it) and has
a non-negative integer ``col``.
"""
from __future__ import annotations

from typing import Any, Callable, List

__all__ = ["MAX_DEPTH", "check_parent", "check_tree"]

MAX_DEPTH = 64      # nesting of sub-blocks; real programs stay under ten


def check_parent(bi: int, parent: int, fail: Callable[[str], Exception]) -> None:
    """Block ``bi`` may have parent ``parent``: -1 for block 0, an earlier block otherwise."""
    ok = parent == -1 if bi == 0 else 0 <= parent < bi
    if not ok:
        want = "-1 (block 0 is the root)" if bi == 0 else f"an earlier block, 0..{bi - 1}"
        raise fail(f"block {bi} has parent_idx {parent}; expected {want}, so that the blocks "
                   f"form a tree rooted at block 0")


def check_tree(program: Any, fail: Callable[[str], Exception]) -> None:
    """The depth bound, the sub-block references and the feed / fetch ops of ``program``
    (parents already checked with ``check_parent``)."""
    depth: List[int] = []
    for b in program.blocks:
        depth.append(0 if b.parent_idx < 0 else depth[b.parent_idx] + 1)
        if depth[-1] > MAX_DEPTH:
            raise fail(f"block {b.idx} is nested {depth[-1]} deep; at most {MAX_DEPTH} levels "
                       f"of sub-blocks are accepted")
    for b in program.blocks:
        for oi, op in enumerate(b.ops):
            for name, value in op.attrs.items():
                subs = value if isinstance(value, list) else [value]
                for s in subs:
                    if type(s).__name__ != "Block" or not hasattr(s, "parent_idx"):
                        continue
                    if not _inside(program, s.idx, b.idx):
                        raise fail(f"op #{oi} '{op.type}' of block {b.idx}: attribute "
                                   f"'{name}' names block {s.idx}, which is not nested "
                                   f"inside block {b.idx} (its own block or an ancestor "
                                   f"would make the op run itself)")
    _check_feed_fetch(program, fail)


# op type -> (kind of slot, slot) naming the variable the op feeds or fetches
_TARGET_SLOTS = {"feed": ("outputs", "Out"), "fetch": ("inputs", "X")}


def _check_feed_fetch(program: Any, fail: Callable[[str], Exception]) -> None:
    """Every feed op writes exactly one variable and every fetch op reads exactly one, at an
    integer ``col`` >= 0 (fluid's ``load_inference_model`` takes ``op.output("Out")[0]``)."""
    for b in program.blocks:
        for oi, op in enumerate(b.ops):
            if op.type not in _TARGET_SLOTS:
                continue
            kind, slot = _TARGET_SLOTS[op.type]
            args = getattr(op, kind).get(slot, [])
            if len(args) != 1:
                raise fail(f"op #{oi} '{op.type}' of block {b.idx}: slot '{slot}' names "
                           f"{len(args)} variables {list(args)[:4]}; a {op.type} op names "
                           f"exactly one")
            col = op.attrs.get("col", 0)
            if type(col) is not int or col < 0:
                raise fail(f"op #{oi} '{op.type}' of block {b.idx}: attribute 'col' is "
                           f"{col!r}; expected an integer >= 0")


def _inside(program: Any, sub: int, owner: int) -> bool:
    """Block ``sub`` is a strict descendant of block ``owner``."""
    i = program.blocks[sub].parent_idx
    while i >= 0:
        if i == owner:
            return True
        i = program.blocks[i].parent_idx
    return False
