"""What a compiled plan remembers of its steps, shared by the code generators (``plan.py`` for
straight-line ops, ``blocks.py`` for ops owning a sub-block) without importing each other."""
from __future__ import annotations

from typing import NamedTuple, Optional, Sequence, Tuple


class StepInfo(NamedTuple):
    """What a plan remembers of one step (an op, or a fused group) for reports and errors."""

    type: str                                # op type, or the fused kernel's name
    ops: Tuple[Tuple[str, int], ...]         # (type, block position) of each op it covers
    callstack: Optional[Sequence[str]]       # ``op_callstack`` of the first covered op
    inputs: Tuple[Tuple[str, str], ...]      # (variable name, local) of each input read
    block: int = 0                           # the block holding the op(s)
    # enclosing loops, outermost first: (iteration-counter local, "op #i of block b")
    loops: Tuple[Tuple[str, str], ...] = ()
