"""Shape-inference helpers shared by op definitions. ``-1`` is an unknown dimension."""
from __future__ import annotations

from typing import Optional, Sequence, Tuple


Shape = Tuple[int, ...]


def dims_match(a: int, b: int) -> bool:
    """Two static dims are compatible when equal or either is unknown (-1)."""
    return a == b or a < 0 or b < 0


def known(a: int, b: int) -> int:
    """The more informative of two compatible dims."""
    return a if a >= 0 else b


def numel(shape: Sequence[int]) -> int:
    """Product of dims; -1 if any dim is unknown."""
    n = 1
    for d in shape:
        if d < 0:
            return -1
        n *= d
    return n


def reduce_shape(shape: Shape, dim: Optional[Sequence[int]], keep_dim: bool,
                 reduce_all: bool = False) -> Shape:
    """Shape after reducing ``dim`` (None / reduce_all: every dim -> ``[1]`` as in fluid)."""
    rank = len(shape)
    if reduce_all or dim is None or len(dim) == 0:
        return tuple([1] * rank) if keep_dim else (1,)
    axes = {d + rank if d < 0 else d for d in dim}
    for a in axes:
        if not 0 <= a < rank:
            raise ValueError(f"reduce dim {a} is out of range for shape {tuple(shape)}")
    out = tuple(1 if i in axes else d for i, d in enumerate(shape)) if keep_dim else \
        tuple(d for i, d in enumerate(shape) if i not in axes)
    return out or (1,)
