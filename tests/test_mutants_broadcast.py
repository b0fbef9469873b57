"""Tests written from the mutation run of ``fluidlite/ops/broadcast.py`` (issue 28, round 11):
fluid's elementwise broadcasting helpers on their own -- unknown (-1) and zero-size dims in
``broadcast_shape``, when NumPy's right-aligned broadcasting already implements fluid's rule
(``numpy_compatible``), a lower-rank operand that does not fit (the message users see), a
shape with more dims than the target, and which operand an ``axis`` moves.

References: fluid 1.8's elementwise_op_function.h (GetBroadcastDimsArrays: trailing 1s of Y
trimmed, Y placed at ``axis`` in X, -1 = right-aligned; a pair of dims must be equal or one of
them 1; an unknown dim takes the other one's size) and NumPy's broadcasting rule."""
import numpy as np
import pytest

from fluidlite.ops.broadcast import (aligned_shape, broadcast_shape, numpy_compatible,
                                     operand_axes)


def test_broadcast_shape_unknown_and_zero_dims():
    assert broadcast_shape((-1, 3), (4, 3)) == (4, 3)
    assert broadcast_shape((4, 3), (-1, 3)) == (4, 3)
    assert broadcast_shape((-1, 3), (-1, 3)) == (-1, 3)
    assert broadcast_shape((-1, 3), (0, 3)) == (0, 3)
    assert broadcast_shape((0, 3), (1, 3)) == (0, 3)
    for x, y in (((0, 3), (5, 3)), ((5, 3), (0, 3))):
        with pytest.raises(ValueError, match=r"dim 0 is 0 vs 5|dim 0 is 5 vs 0"):
            broadcast_shape(x, y)


def test_numpy_compatible():
    assert numpy_compatible((2, 3, 4), (3, 4))
    assert numpy_compatible((2, 3, 4), (4,), -1)
    assert not numpy_compatible((2, 3, 4), (2, 3), 0)
    assert numpy_compatible((2, 3, 4), (2, 3, 4), 0)
    assert not numpy_compatible((2, 3, 4), (3,), 5)          # does not fit: not compatible
    # the verdict agrees with NumPy on every fitting case it claims
    x = np.zeros((2, 3, 4))
    for y, axis in (((3, 4), -1), ((3, 4), 1), ((4,), 2), ((1, 4), 1)):
        if numpy_compatible(x.shape, y, axis):
            assert np.broadcast_shapes(x.shape, y) == broadcast_shape(x.shape, y, axis)


def test_aligned_shape_edges_and_message():
    assert aligned_shape(2, (3, 4, 5)) == (3, 4, 5)          # more dims: left as it is
    assert aligned_shape(3, (3, 1), 1) == (1, 3, 1)
    with pytest.raises(ValueError, match=r"^axis=2 is out of range: the lower-rank operand's "
                                         r"shape \[3, 4\] \(trailing 1s trimmed: \[3, 4\]\) must "
                                         r"fit inside 3 dims starting at axis; use axis in "
                                         r"\[0, 1\] or -1$"):
        aligned_shape(3, (3, 4), 2)


def test_operand_axes():
    assert operand_axes(3, 2, 1) == (-1, 1)
    assert operand_axes(3, 3, 0) == (-1, 0)
    assert operand_axes(2, 3, 1) == (1, -1)
