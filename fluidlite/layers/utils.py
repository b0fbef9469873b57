"""``fluid.layers.utils`` (fluid 1.8): nested-structure helpers and argument converters.

A *nested structure* is a leaf or a sequence of nested structures: lists, tuples (namedtuples
included) and dicts are sequences; strings, numbers, numpy arrays and Variables are leaves.
Dicts are walked in sorted key order, so a dict and its ``OrderedDict`` twin flatten alike.
``flatten`` / ``pack_sequence_as`` / ``map_structure`` are the three verbs the RNN and decoder
APIs use to carry states of any shape through a loop.

The module has no ``__all__``, as in fluid 1.8: ``fluid.layers`` re-exports every layer
module's ``__all__``, and ``utils.flatten`` must not replace the ``fluid.layers.flatten`` layer.
"""
from __future__ import annotations

import collections.abc as _abc
import copy as _copy
from typing import Any, Callable, Iterator, List, Sequence


def convert_to_list(value: Any, n: int, name: str, dtype: type = int) -> List[Any]:
    """``[value] * n`` for a single ``dtype`` value, else ``list(value)`` checked to hold
    ``n`` items that ``dtype`` can convert (fluid's stride / kernel-size argument normaliser).

    The items are returned as given (not converted), as in fluid 1.8.

    Args:
        value: a ``dtype`` value or an iterable of ``n`` of them.
        n: the length of the list to return.
        name: the argument's name, for the error messages ("stride", "filter_size").
        dtype: the element type (default ``int``).

    Returns:
        a list of ``n`` items.

    Raises:
        ValueError: ``value`` is neither a ``dtype`` nor an iterable, has another length than
            ``n``, or holds an item ``dtype`` cannot convert.

    Example:
        >>> from fluidlite.layers import utils
        >>> utils.convert_to_list(3, 2, "stride")
        [3, 3]
        >>> utils.convert_to_list((1, 2), 2, "stride")
        [1, 2]
    """
    if isinstance(value, dtype):
        return [value] * n
    try:
        items = list(value)
    except TypeError:
        raise ValueError(f"The {name}'s type must be list or tuple. Received: {value}") from None
    if len(items) != n:
        raise ValueError(f"The {name}'s length must be {n}. Received: {value}")
    for item in items:
        try:
            dtype(item)
        except (ValueError, TypeError):
            raise ValueError(f"The {name}'s type must be a list or tuple of {n} {dtype} . "
                             f"Received: {value} including element {item} of type "
                             f"{type(item)}") from None
    return items


def is_sequence(seq: Any) -> bool:
    """Whether ``seq`` is a sequence of a nested structure (a dict, or a
    ``collections.abc.Sequence`` that is not a string) rather than a leaf.

    Args:
        seq: any object.

    Returns:
        True for lists, tuples, namedtuples and dicts; False for strings, numbers, arrays and
        Variables.

    Example:
        >>> from fluidlite.layers import utils
        >>> utils.is_sequence([1, 2]), utils.is_sequence({"a": 1}), utils.is_sequence("ab")
        (True, True, False)
    """
    if isinstance(seq, dict):
        return True
    return isinstance(seq, _abc.Sequence) and not isinstance(seq, str)


def _sorted_keys(d: dict) -> List[Any]:
    try:
        return sorted(d)
    except TypeError:
        raise TypeError("nest only supports dicts with sortable keys.") from None


def _children(seq: Any) -> Iterator[Any]:
    # dicts by sorted key: flattening a dict and packing into its OrderedDict twin (or the
    # reverse) must agree whatever the insertion order
    if isinstance(seq, dict):
        for key in _sorted_keys(seq):
            yield seq[key]
    else:
        yield from seq


def _leaves(nest: Any) -> Iterator[Any]:
    for child in _children(nest):
        if is_sequence(child):
            yield from _leaves(child)
        else:
            yield child


def flatten(nest: Any) -> List[Any]:
    """The leaves of a nested structure, depth first (dicts in sorted key order); a leaf gives
    ``[nest]``.

    Args:
        nest: a nested structure or a leaf.

    Returns:
        the list of leaves.

    Example:
        >>> from fluidlite.layers import utils
        >>> utils.flatten([1, (2, {"b": 4, "a": 3})])
        [1, 2, 3, 4]
        >>> utils.flatten(5)
        [5]
    """
    if is_sequence(nest):
        return list(_leaves(nest))
    return [nest]


def _sequence_like(instance: Any, args: Sequence[Any]) -> Any:
    """A sequence of ``instance``'s type holding ``args`` (for a dict: ``args`` in sorted key
    order, the keys kept in ``instance``'s order)."""
    if isinstance(instance, dict):
        by_key = dict(zip(_sorted_keys(instance), args))
        return type(instance)((key, by_key[key]) for key in instance)
    if isinstance(instance, tuple) and hasattr(instance, "_fields") and \
            isinstance(instance._fields, _abc.Sequence) and \
            all(isinstance(f, str) for f in instance._fields):
        return type(instance)(*args)                     # a namedtuple takes fields positionally
    return type(instance)(args)


def _pack(structure: Any, flat: Sequence[Any], index: int) -> "tuple[int, List[Any]]":
    packed: List[Any] = []
    for child in _children(structure):
        if is_sequence(child):
            index, sub = _pack(child, flat, index)
            packed.append(_sequence_like(child, sub))
        else:
            packed.append(flat[index])
            index += 1
    return index, packed


def pack_sequence_as(structure: Any, flat_sequence: Sequence[Any]) -> Any:
    """Rebuild ``structure``'s shape from ``flat_sequence``: the inverse of ``flatten``,
    ``pack_sequence_as(s, flatten(s)) == s``.

    Args:
        structure: the nested structure (or leaf) whose shape to copy.
        flat_sequence: as many leaves as ``flatten(structure)`` has, in its order.

    Returns:
        a structure of the same types (lists, tuples, namedtuples, dicts) holding the new
        leaves; for a leaf ``structure``, ``flat_sequence[0]``.

    Raises:
        TypeError: ``flat_sequence`` is not a sequence.
        ValueError: the numbers of leaves differ.

    Example:
        >>> from fluidlite.layers import utils
        >>> utils.pack_sequence_as([1, (2, 3)], ["a", "b", "c"])
        ['a', ('b', 'c')]
    """
    if not is_sequence(flat_sequence):
        raise TypeError("flat_sequence must be a sequence")
    if not is_sequence(structure):
        if len(flat_sequence) != 1:
            raise ValueError(f"Structure is a scalar but len(flat_sequence) == "
                             f"{len(flat_sequence)} > 1")
        return flat_sequence[0]
    n = len(flatten(structure))
    if n != len(flat_sequence):
        raise ValueError(f"Could not pack sequence. Structure had {n} elements, but "
                         f"flat_sequence had {len(flat_sequence)} elements.  Structure: "
                         f"{structure}, flat_sequence: {flat_sequence}.")
    _, packed = _pack(structure, flat_sequence, 0)
    return _sequence_like(structure, packed)


def map_structure(func: Callable[..., Any], *structure: Any) -> Any:
    """``func`` applied leaf by leaf: the leaves of the result are
    ``func(leaf_1, ..., leaf_k)`` for the corresponding leaves of the k structures; the result
    has the shape of the first structure.

    Args:
        func: a function of as many arguments as structures are given.
        *structure: one or more nested structures with the same number of leaves.

    Returns:
        the mapped structure.

    Example:
        >>> from fluidlite.layers import utils
        >>> utils.map_structure(lambda a, b: a + b, [1, (2, 3)], [10, (20, 30)])
        [11, (22, 33)]
    """
    flats = [flatten(s) for s in structure]
    return pack_sequence_as(structure[0], [func(*leaves) for leaves in zip(*flats)])


def hold_mutable_vars(structure: Any) -> bool:
    """Whether one of ``structure``'s direct items is itself a sequence (a list, tuple or dict
    that code could mutate in place), i.e. the structure is nested more than one level.

    Args:
        structure: an iterable (a list of loop variables, say).

    Returns:
        True when an item is a sequence.

    Example:
        >>> from fluidlite.layers import utils
        >>> utils.hold_mutable_vars([1, 2]), utils.hold_mutable_vars([1, [2]])
        (False, True)
    """
    return any(is_sequence(s) for s in structure)


def copy_mutable_vars(structure: Any) -> Any:
    """A copy of ``structure`` with new containers at every level and the same leaves, so that
    mutating the copy's lists and dicts leaves the original's alone.

    Args:
        structure: a nested structure.

    Returns:
        the copied structure (the leaves are not copied).

    Example:
        >>> from fluidlite.layers import utils
        >>> s = [1, [2]]
        >>> c = utils.copy_mutable_vars(s)
        >>> c == s and c[1] is not s[1]
        True
    """
    return pack_sequence_as(structure, _copy.copy(flatten(structure)))


def _assert_same_structure(nest1: Any, nest2: Any, check_types: bool) -> None:
    seq1 = is_sequence(nest1)
    if seq1 != is_sequence(nest2):
        raise ValueError(f"The two structures don't have the same nested structure.\n\n"
                         f"First structure: {nest1}\n\nSecond structure: {nest2}.")
    if not seq1:
        return
    if check_types:
        if type(nest1) != type(nest2):
            raise TypeError(f"The two structures don't have the same sequence type. First "
                            f"structure has type {type(nest1)}, while second structure has "
                            f"type {type(nest2)}.")
        if isinstance(nest1, dict) and set(nest1) != set(nest2):
            raise ValueError(f"The two dictionaries don't have the same set of keys. First "
                             f"structure has keys {set(nest1)}, while second structure has "
                             f"keys {set(nest2)}.")
    for a, b in zip(list(_children(nest1)), list(_children(nest2))):
        _assert_same_structure(a, b, check_types)


def assert_same_structure(nest1: Any, nest2: Any, check_types: bool = True) -> None:
    """Raise unless the two structures nest alike: the same number of leaves, a sequence where
    the other has a sequence, and (``check_types``) the same container types and dict keys.

    Args:
        nest1: a nested structure.
        nest2: another one.
        check_types: also compare the container types (list vs tuple) and dict keys.

    Raises:
        ValueError: the leaf counts or the nesting differ (or the dict keys, with
            ``check_types``).
        TypeError: ``check_types`` and a container type differs.

    Example:
        >>> from fluidlite.layers import utils
        >>> utils.assert_same_structure([1, (2, 3)], ["a", ("b", "c")])
        >>> utils.assert_same_structure([1, 2], (1, 2), check_types=False)
    """
    n1 = len(flatten(nest1)) if is_sequence(nest1) else 1
    n2 = len(flatten(nest2)) if is_sequence(nest2) else 1
    if n1 != n2:
        raise ValueError(f"The two structures don't have the same number of elements.\n\n"
                         f"First structure ({n1} elements): {nest1}\n\n"
                         f"Second structure ({n2} elements): {nest2}")
    _assert_same_structure(nest1, nest2, check_types)
