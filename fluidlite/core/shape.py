"""Shape-inference helpers shared by op definitions. ``-1`` is an unknown dimension."""
from __future__ import annotations

from typing import Optional, Sequence, Tuple

from .registry import VarSpec

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


def fluid_broadcast_axis(x: Shape, y: Shape, axis: int) -> Tuple[int, Shape]:
    """fluid 1.x elementwise broadcasting: Y (trailing 1s trimmed) must match a contiguous slice
    of X starting at ``axis`` (``-1``: right-aligned). Returns ``(axis, trimmed_y)``.

    When Y has more dims than X the roles swap (fluid allows it); callers handle that case.
    """
    if axis == -1 or axis is None:
        axis = len(x) - len(y)
    y_trim = tuple(y)
    while len(y_trim) > 0 and y_trim[-1] == 1 and len(y_trim) + axis > len(x):
        y_trim = y_trim[:-1]
    if axis < 0 or axis + len(y_trim) > len(x):
        raise ValueError(f"broadcast axis {axis} is out of range for X shape {tuple(x)} and "
                         f"Y shape {tuple(y)}")
    for i, d in enumerate(y_trim):
        xd = x[axis + i]
        if not (dims_match(xd, d) or d == 1):
            raise ValueError(f"Y shape {tuple(y)} does not match X shape {tuple(x)} at axis "
                             f"{axis} (dim {axis + i}: {xd} vs {d})")
    return axis, y_trim


def broadcast_shape(x: Shape, y: Shape, axis: int = -1) -> Shape:
    """Output shape of a fluid elementwise op: X's shape (or Y's when Y has more dims)."""
    if len(y) > len(x):
        fluid_broadcast_axis(y, x, axis)
        return tuple(y)
    fluid_broadcast_axis(x, y, axis)
    if len(x) == len(y):   # equal rank: numpy-style, either side may be 1
        return tuple(known(a, b) if a != 1 else b for a, b in zip(x, y))
    return tuple(x)


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


def flatten_to_2d(shape: Shape, num_col_dims: int) -> Tuple[int, int]:
    """``[prod(shape[:k]), prod(shape[k:])]`` with -1 propagation (fluid's mul flattening)."""
    return numel(shape[:num_col_dims]), numel(shape[num_col_dims:])


def same_as(spec: VarSpec) -> VarSpec:
    return spec
