"""fluid 1.x elementwise broadcasting, shared by the elementwise and comparison ops.

The operand with fewer dims (normally Y) has its trailing 1s trimmed and is lined up with the
other operand's dims starting at ``axis`` (-1: right-aligned); inside that window each pair of
dims must be equal or one of them 1. Out has the larger rank; each dim is the non-1 one of the
pair. Kernels reshape the smaller operand (a view, ``align``) so that numpy broadcasting applies;
gradients are summed back to each operand's shape (``reduce_to``).

With ``axis == -1`` this is exactly numpy's broadcasting, which is what Paddle 2.x programs mean
by ``axis=-1`` (``X [3, 1] + Y [1, 4] -> [3, 4]``, Y with more dims than X, both operands
broadcast): right-aligning the trimmed shape and padding it with 1s on both sides gives numpy's
left-padded shape, equal ranks keep their shapes, and either operand may be the larger one. So
``.pdmodel`` files need no separate rule (tests/ops/test_elementwise.py checks the equivalence,
forward and gradients).
"""
from __future__ import annotations

import functools
import math
from typing import Callable, Optional, Sequence, Tuple

import numpy as np

from ..core import threads

Shape = Tuple[int, ...]


def aligned_shape(ndim: int, shape: Sequence[int], axis: int = -1) -> Shape:
    """``shape`` (of the operand with fewer or equally many dims) padded with 1s to ``ndim``
    dims: its trailing 1s trimmed, placed at ``axis`` (-1: right-aligned), as fluid 1.8 does.
    Equal ranks with ``axis`` -1/0 keep the shape (numpy's rule). Raises ValueError when the
    operand does not fit."""
    shape = tuple(shape)
    if len(shape) > ndim or (len(shape) == ndim and axis in (-1, 0, None)):
        return shape
    if axis is None or axis == -1:
        axis = ndim - len(shape)
    trimmed = shape
    while trimmed and trimmed[-1] == 1:
        trimmed = trimmed[:-1]
    if axis < 0 or axis + len(trimmed) > ndim:
        if len(shape) == ndim:
            return shape             # equal ranks: fluid ignores ``axis`` (same-shape case)
        raise ValueError(f"axis={axis} is out of range: the lower-rank operand's shape "
                         f"{list(shape)} (trailing 1s trimmed: {list(trimmed)}) must fit inside "
                         f"{ndim} dims starting at axis; use axis in [0, "
                         f"{ndim - len(trimmed)}] or -1")
    return (1,) * axis + trimmed + (1,) * (ndim - axis - len(trimmed))


def numpy_compatible(x: Sequence[int], y: Sequence[int], axis: int = -1) -> bool:
    """True when numpy's own (right-aligned) broadcasting already implements fluid's rule for
    these shapes, so kernels can skip the reshape."""
    x, y = tuple(x), tuple(y)
    big, small = (x, y) if len(x) >= len(y) else (y, x)
    try:
        return aligned_shape(len(big), small, axis) == \
            (1,) * (len(big) - len(small)) + small
    except ValueError:
        return False


def broadcast_shape(x: Sequence[int], y: Sequence[int], axis: int = -1) -> Shape:
    """Out shape of a fluid elementwise op on shapes ``x``, ``y`` (``-1``: unknown dim).

    Raises ValueError naming both shapes when a dim pair is neither equal nor contains a 1.
    """
    x, y = tuple(x), tuple(y)
    big, small = (x, y) if len(x) >= len(y) else (y, x)
    try:
        aligned = aligned_shape(len(big), small, axis)
    except ValueError as e:
        raise ValueError(f"X shape {list(x)} and Y shape {list(y)} cannot be broadcast: {e}") \
            from None
    out = []
    for i, (a, b) in enumerate(zip(big, aligned)):
        if a == b or b == 1:
            out.append(a)
        elif a == 1:
            out.append(b)
        elif a < 0 or b < 0:
            out.append(a if b < 0 else b)
        else:
            raise ValueError(
                f"X shape {list(x)} and Y shape {list(y)} cannot be broadcast with axis={axis}: "
                f"dim {i} is {a} vs {b} (the smaller operand is aligned as {list(aligned)}; "
                f"dims must be equal or 1). Pass the axis where Y's dims start in X, or reshape "
                f"the operands.")
    return tuple(out)


def align(x_ndim: int, y: np.ndarray, axis: int = -1) -> np.ndarray:
    """Reshape ``y`` (a view) so it broadcasts against an ``x_ndim``-d array per fluid's rule."""
    if y.ndim > x_ndim:
        return y
    shape = aligned_shape(x_ndim, y.shape, axis)
    return y if shape == y.shape else y.reshape(shape)


def aligned_y_to_x(x: np.ndarray, y: np.ndarray, axis: int = -1
                   ) -> Tuple[np.ndarray, np.ndarray]:
    """(x, y) reshaped so that numpy broadcasting implements fluid's rule (either may be larger;
    with equal ranks Y is the one placed at ``axis``)."""
    if x.ndim >= y.ndim:
        return x, align(x.ndim, y, axis)
    return align(y.ndim, x, axis), y


def operand_axes(x_ndim: int, y_ndim: int, axis: int = -1) -> Tuple[int, int]:
    """The ``axis`` to use for X and for Y when combining each with an Out-shaped array: only
    the operand that fluid places at ``axis`` (Y, or X when it has fewer dims) uses it; the
    other one already has Out's rank and is never moved (-1)."""
    return (-1, axis) if x_ndim >= y_ndim else (axis, -1)


def reduce_to(grad: np.ndarray, shape: Sequence[int], axis: int = -1) -> np.ndarray:
    """Sum ``grad`` (Out-shaped) over the dims that were broadcast from an operand of ``shape``
    placed at ``axis``; returns an array of ``shape`` (``grad`` itself when nothing to do)."""
    shape = tuple(shape)
    if grad.shape == shape:
        return grad
    axes = _sum_axes(grad.shape, shape, axis)
    out = grad.sum(axis=axes) if axes else grad
    return out if out.shape == shape else out.reshape(shape)


@functools.lru_cache(maxsize=4096)
def _sum_axes(gshape: Shape, shape: Shape, axis: int) -> Tuple[int, ...]:
    target = aligned_shape(len(gshape), shape, axis)
    return tuple(i for i, (g, t) in enumerate(zip(gshape, target)) if t == 1 and g != 1)


LONG_RUN = 256      # a channel's run of contiguous elements from which vectors broadcast as is


def channel_vector(v: np.ndarray, shape: Sequence[int], ch: int) -> np.ndarray:
    """The per-channel vector ``v`` [C] shaped to broadcast against an array of ``shape`` whose
    channel axis is ``ch``. When the channels' runs are short (the dims after ``ch`` hold
    fewer than ``LONG_RUN`` elements: a 4x4 or 7x7 map) ``v`` comes repeated over the run,
    ``[C, *map]``, so that NumPy loops over whole rows of C x map elements instead of runs of
    16 or 49 (batch norm of a [32, 512, 4, 4] map ran 2x PyTorch's time); otherwise it is
    ``v`` reshaped to ``[1, C, 1, 1]``-style. The same value reaches every element either way,
    so an elementwise op gives the same bits.

    Example:
        >>> import numpy as np
        >>> from fluidlite.ops.broadcast import channel_vector
        >>> channel_vector(np.arange(2.0), (8, 2, 2, 2), 1).tolist()
        [[[0.0, 0.0], [0.0, 0.0]], [[1.0, 1.0], [1.0, 1.0]]]
        >>> channel_vector(np.arange(2.0), (8, 2, 16, 16), 1).shape
        (1, 2, 1, 1)
    """
    inner = int(math.prod(shape[ch + 1:]))
    if ch + 1 == len(shape) or inner >= LONG_RUN:
        return v.reshape(tuple(v.shape[0] if a == ch else 1 for a in range(len(shape))))
    return np.repeat(v, inner).reshape(tuple(shape[ch:]))


# -- NumPy's buffered loops ---------------------------------------------------------------------
# An elementwise ufunc whose operands' contiguous runs are shorter than NumPy's ufunc buffer
# (8192 elements by default) while one operand repeats along them (a per-channel vector over
# 28x28 or 56x56 maps, a per-row mean over rows of 256) is not looped run by run: NumPy's
# iterator gathers the operands into its buffer to give the loop longer inner runs, a copy
# that made these ops 1.5-2.3x slower than the same op against a scalar (NumPy 1.26 and 2.4;
# an in-place per-channel multiply of a [8, 64, 56, 56] map: 2.8 -> 1.3 ms). With the smallest
# buffer NumPy accepts, the runs are longer than the buffer and are looped as they are.
# Elementwise results do not depend on the buffer; reductions may (NumPy 1.x reduces in
# buffer-sized chunks), so only elementwise work runs inside ``whole_runs``.
_SMALLEST_BUFFER = 16
# Switching costs two ``np.setbufsize`` calls (2-5 us: NumPy keeps the buffer size in a
# context variable), paid on every entry. Below this many elements a pass is too short to win
# that back: on a 2-core AMD EPYC (NumPy 2.4.6), x - mean over [N, run] float32 took 0.89-1.55x
# its buffered time at 64K elements (runs 256-3136) and 0.69-1.22x at 128K, 0.53-1.25x at 256K
# -- BERT-mini's [128, 256] layer norms at batch 1 ran 1.6x slower switched.
_SWITCH_MIN = 1 << 17


def buffered_run(run: int) -> bool:
    """Whether a broadcast operand repeating along runs of ``run`` contiguous elements goes
    through NumPy's ufunc buffer: ``LONG_RUN <= run <`` the buffer size. The condition of
    ``whole_runs`` without the size, for plans made before the arrays exist."""
    return LONG_RUN <= run < np.getbufsize()


class whole_runs:
    """``with whole_runs(run, size):`` NumPy's ufunc buffer at its smallest on this thread for
    the elementwise ops inside, when ``run`` -- the contiguous elements along which a
    broadcast operand repeats -- is at least ``LONG_RUN`` and shorter than the buffer (see
    above) and the ops inside pass over at least ``_SWITCH_MIN`` elements (``size``: what
    the switch's cost is spread over); a no-op otherwise. Never put a reduction inside: NumPy
    1.x sums in buffer-sized chunks, so its bits would change.

    Example:
        >>> import numpy as np
        >>> from fluidlite.ops.broadcast import whole_runs
        >>> x, mean = np.ones((64, 3136), np.float32), np.ones((64, 1), np.float32)
        >>> with whole_runs(3136, x.size):
        ...     xc = x - mean
        >>> float(xc.sum())
        0.0
    """
    __slots__ = ("_on", "_old")

    def __init__(self, run: int, size: int) -> None:
        self._on = size >= _SWITCH_MIN and buffered_run(run)
        self._old = 0

    @property
    def active(self) -> bool:
        """Whether entering switches the buffer (the run is in the slow range)."""
        return self._on

    def __enter__(self) -> "whole_runs":
        if self._on:
            self._old = np.setbufsize(_SMALLEST_BUFFER)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._on:
            np.setbufsize(self._old)


def channel_run(shape: Sequence[int], ch: int) -> int:
    """The contiguous elements of one channel's run in an array of ``shape`` whose channel
    axis is ``ch`` (the product of the dims after it)."""
    return int(math.prod(shape[ch + 1:]))


def repeat_run(a: Sequence[int], b: Sequence[int]) -> int:
    """The contiguous elements along which one of two NumPy-broadcast operands of shapes ``a``
    and ``b`` repeats: the product of the other's trailing dims where it has 1s (a [C, 1, 1]
    bias over [N, C, H, W]: H * W); 0 when both vary along the last dim, negative when a dim
    that counts is unknown (-1).

    Example:
        >>> from fluidlite.ops.broadcast import repeat_run
        >>> repeat_run((8, 64, 28, 28), (64, 1, 1)), repeat_run((8, 256), (256,))
        (784, 0)
    """
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + tuple(a), (1,) * (n - len(b)) + tuple(b)
    for big, small in ((a, b), (b, a)):
        run = 1
        for d, s in zip(reversed(big), reversed(small)):
            if s != 1:
                break
            run *= d
        if run != 1:
            return run
    return 0


PARTS_MIN = 1 << 19     # elements from which ``in_parts`` cuts an op in two (262K: no gain)


def in_parts(fn: Callable[..., np.ndarray], a: np.ndarray, b: np.ndarray,
             out: Optional[np.ndarray] = None) -> np.ndarray:
    """``fn(a, b, out=out)`` -- an elementwise arithmetic ufunc (add, subtract, multiply,
    divide) -- of two C-contiguous float ndarrays of one shape and dtype as two parallel halves
    of their elements on ``core.threads``' pool: every element is computed alike, so the bits
    are one call's. One call when the arrays are smaller than ``PARTS_MIN`` elements or differ
    in shape, dtype or layout, or with one thread. (A residual connection's add and a
    gradient's sum of [8, 256, 56, 56] maps ran on one core while the other waited.)

    Example:
        >>> import numpy as np
        >>> from fluidlite.ops.broadcast import in_parts
        >>> in_parts(np.add, np.ones(4), np.ones(4)).tolist()
        [2.0, 2.0, 2.0, 2.0]
    """
    if (type(a) is not np.ndarray or type(b) is not np.ndarray      # (a SelectedRows X)
            or a.size < PARTS_MIN or a.shape != b.shape or a.dtype != b.dtype or a.dtype.kind != "f"
            or not (a.flags.c_contiguous and b.flags.c_contiguous)
            or (out is not None and (out.shape != a.shape or out.dtype != a.dtype
                                     or not out.flags.c_contiguous))
            or not threads.splitting()):
        return fn(a, b) if out is None else fn(a, b, out=out)
    res = np.empty(a.shape, a.dtype) if out is None else out
    af, bf, of = a.reshape(-1), b.reshape(-1), res.reshape(-1)
    threads.parallel_ranges(lambda lo, hi: fn(af[lo:hi], bf[lo:hi], out=of[lo:hi]), of.size)
    return res
