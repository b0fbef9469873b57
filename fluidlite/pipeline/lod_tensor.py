"""``fluid.create_lod_tensor`` and ``fluid.create_random_int_lodtensor``.

A LoDTensor is a numpy array plus level-of-detail metadata (sequence offsets); the executor
keeps the lod of fed tensors (``return_numpy=False`` hands it back) and ops that do not read
lod ignore it.
"""
from __future__ import annotations

from typing import Any, List, Optional, Sequence

import numpy as np

from ..core.scope import LoDTensor

__all__ = ["create_lod_tensor", "create_random_int_lodtensor"]


def _check_lens(recursive_seq_lens: Any) -> List[List[int]]:
    """Lengths given as any nested sequence (lists, tuples, numpy arrays such as
    ``numpy.asarray([[1]])``) as a list of lists of ints."""
    if isinstance(recursive_seq_lens, np.ndarray) and recursive_seq_lens.ndim == 2:
        recursive_seq_lens = list(recursive_seq_lens)
    if not isinstance(recursive_seq_lens, (list, tuple)) or not all(
            isinstance(level, (list, tuple, np.ndarray)) and np.ndim(level) == 1
            for level in recursive_seq_lens):
        raise TypeError(f"recursive_seq_lens must be a list of lists of sequence lengths, e.g. "
                        f"[[2, 3]], got {recursive_seq_lens!r}")
    out = []
    for level in recursive_seq_lens:
        lens = [int(n) for n in level]
        if any(n < 0 for n in lens):
            raise ValueError(f"sequence lengths must be non-negative, got {list(level)}")
        out.append(lens)
    for upper, lower in zip(out[:-1], out[1:]):
        if sum(upper) != len(lower):
            raise ValueError(f"the provided recursive_seq_lens {out} is invalid: level lengths "
                             f"{upper} sum to {sum(upper)}, but the next level has "
                             f"{len(lower)} sequences")
    return out


def create_lod_tensor(data: Any, recursive_seq_lens: Sequence[Sequence[int]],
                      place: Any = None) -> LoDTensor:
    """A LoDTensor from ``data`` (numpy array, LoDTensor, or a list of sequences) and sequence
    lengths, e.g. ``create_lod_tensor(np.arange(5).reshape(5, 1), [[2, 3]], place)``.

    A list of sequences of ints (``[[1, 2, 3], [4, 5]]`` with ``[[3, 2]]``) becomes an int64
    tensor of shape ``[total, 1]`` (word ids); sequences of floats give float32. The last level's
    lengths must sum to ``data.shape[0]``.

    Args:
        data (numpy.ndarray | list | LoDTensor): the rows of all sequences, concatenated (a
            list of lists of ids is converted to an int64 column).
        recursive_seq_lens (list of lists of int): the sequence lengths per LoD level.
        place (Place | None): accepted for fluid's signature.
    Returns:
        LoDTensor: the data with its LoD.

    Raises:
        TypeError: ``data`` is not a numpy array, list or LoDTensor, or ``recursive_seq_lens`` is
            not a list of 1-D levels.
        ValueError: a length is negative, a level's lengths do not sum to the next level's number of
            sequences, or the last level does not match the data (list lengths or rows).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> t = fluid.create_lod_tensor(np.arange(5, dtype="int64").reshape(5, 1), [[2, 3]],
        ...                             fluid.CPUPlace())
        >>> t.recursive_sequence_lengths(), t.lod(), t.shape()
        ([[2, 3]], [[0, 2, 5]], [5, 1])
    """
    lens = _check_lens(recursive_seq_lens)
    if isinstance(data, LoDTensor):
        return create_lod_tensor(np.array(data), lens, place)
    if isinstance(data, list):
        seqs = [list(np.asarray(s).reshape(-1)) if np.ndim(s) else [s] for s in data]
        got = [len(s) for s in seqs]
        if not lens or got != lens[-1]:
            raise ValueError(f"data and recursive_seq_lens do not match: the sequences have "
                             f"lengths {got}, recursive_seq_lens is {lens}")
        flat = [v for s in seqs for v in s]
        is_int = all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in flat)
        arr = np.asarray(flat, dtype=np.int64 if is_int else np.float32).reshape(-1, 1)
        return _make(arr, lens)
    if isinstance(data, np.ndarray):
        return _make(data, lens)
    raise TypeError(f"data should be either a LoDTensor, a Numpy array or a list, got "
                    f"{type(data).__name__}")


def _make(arr: np.ndarray, lens: List[List[int]]) -> LoDTensor:
    t = LoDTensor()
    t.set(arr)
    t.set_recursive_sequence_lengths(lens)
    if not t.has_valid_recursive_sequence_lengths():
        rows = arr.shape[0] if arr.ndim else 0
        raise ValueError(f"the provided recursive_seq_lens {lens} is invalid for data of shape "
                         f"{list(arr.shape)}: the last level must sum to {rows} (the number of "
                         f"rows)")
    return t


def create_random_int_lodtensor(recursive_seq_lens: Sequence[Sequence[int]],
                                base_shape: Sequence[int], place: Any = None, low: int = 0,
                                high: int = 1, seed: Optional[int] = None) -> LoDTensor:
    """A LoDTensor of random int64 values in ``[low, high]`` with shape
    ``[sum(last level lengths)] + base_shape`` (``seed`` makes it reproducible).

    Args:
        recursive_seq_lens (list[list[int]]): the sequence lengths per LoD level (at least one
            level).
        base_shape (list[int]): the shape of one row; the tensor is ``[sum(last level)] +
            base_shape``.
        place (Place | None): accepted for fluid's signature (everything is on the CPU). Default
            None.
        low (int): the smallest value. Default 0.
        high (int): the largest value (inclusive). Default 1.
        seed (int | None): seed of the generator; None draws fresh values. Default None.

    Returns:
        LoDTensor: int64 values in ``[low, high]`` with the given LoD.

    Raises:
        TypeError: ``recursive_seq_lens`` is not a list of 1-D levels.
        ValueError: ``recursive_seq_lens`` is empty or invalid (negative lengths, levels that do not
            chain), or ``low > high``.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> t = fluid.create_random_int_lodtensor([[2, 3]], base_shape=[1], place=fluid.CPUPlace(),
        ...                                       low=0, high=9)
        >>> t.shape(), t.recursive_sequence_lengths()
        ([5, 1], [[2, 3]])
    """
    lens = _check_lens(recursive_seq_lens)
    if not lens:
        raise ValueError("recursive_seq_lens must have at least one level")
    if low > high:
        raise ValueError(f"low ({low}) must not exceed high ({high})")
    shape = [sum(lens[-1])] + [int(d) for d in base_shape]
    data = np.random.default_rng(seed).integers(low, high, size=shape, endpoint=True)
    return create_lod_tensor(data.astype(np.int64), lens, place)
