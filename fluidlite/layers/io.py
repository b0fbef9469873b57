"""Input layers: ``fluid.data`` (checked feeds) and ``fluid.layers.data`` (append_batch_size)."""
from __future__ import annotations

from typing import Any, List, Optional, Sequence

import numpy as np

from ..core.dtypes import VarType
from ..core.ir import Variable, default_main_program

__all__ = ["data"]


def _check_name(name: Any, layer: str) -> None:
    if not isinstance(name, str):
        raise TypeError(f"The type of 'name' in {layer} must be str, but received "
                        f"{type(name).__name__} ({name!r}).")


def data(name: str, shape: Sequence[Optional[int]], append_batch_size: bool = True,
         dtype: Any = "float32", lod_level: int = 0, type: VarType = VarType.LOD_TENSOR,
         stop_gradient: bool = True) -> Variable:
    """``fluid.layers.data``: prepends a -1 batch dim unless ``append_batch_size=False`` or a dim
    is already None/-1. The variable is not gradient-tracked (``stop_gradient=True``).

    Args:
        name (str): the feed name.
        shape (list of int): the per-sample shape (the batch dim is prepended).
        append_batch_size (bool, default True): prepend the -1 batch dim.
        dtype (str | numpy dtype, default "float32"): the fed arrays' dtype.
        lod_level (int, default 0): > 0 for a LoD input.
        type (VarType, default LOD_TENSOR): the variable type.
        stop_gradient (bool, default True): no gradient flows into it.
    Returns:
        Variable: the input variable.
    Raises:
        TypeError: ``name`` is not a str, ``shape`` is not a sequence, or ``dtype`` is unknown.
        ValueError: a dim of ``shape`` is not an int (or None), or is below -1.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.layers.data(name="x", shape=[13], dtype="float32")   # batch dim added
        ...     y = fluid.layers.data(name="y", shape=[4, 1], append_batch_size=False)
        >>> x.shape, y.shape
        ((-1, 13), (4, 1))
    """
    _check_name(name, "data")
    shape = _shape_list(shape, f"fluid.layers.data '{name}'")
    if any(d < 0 for d in shape):
        append_batch_size = False
    if append_batch_size:
        shape = [-1] + shape
    return default_main_program().global_block().create_var(
        name=name, shape=shape, dtype=dtype, type=type, stop_gradient=stop_gradient,
        lod_level=lod_level, is_data=True, need_check_feed=False)


def _shape_list(shape: Any, what: str) -> List[int]:
    """``shape`` as a list of ints (None -> -1), checked (``_check_dims``)."""
    if not isinstance(shape, (list, tuple)):
        raise TypeError(f"{what}: shape must be a list or tuple of ints (None or -1 for a size "
                        f"given by the feed), but received {type(shape).__name__} {shape!r}; "
                        f"e.g. shape=[None, {shape!r}]" if isinstance(shape, int) else
                        f"{what}: shape must be a list or tuple of ints (None or -1 for a size "
                        f"given by the feed), but received {type(shape).__name__} {shape!r}")
    out = []
    for i, d in enumerate(shape):
        if d is None:
            out.append(-1)
        elif isinstance(d, (int, np.integer)) and not isinstance(d, bool):
            out.append(int(d))
        else:
            raise ValueError(f"{what}: shape[{i}] must be an int (or None), but received "
                             f"{type(d).__name__} {d!r}; shape = {list(shape)}")
    _check_dims(out, what)
    return out


def _check_dims(shape: Sequence[int], what: str) -> None:
    """Every dim is a size (>= 0) or -1 (any size); anything below -1 is a mistake."""
    for i, d in enumerate(shape):
        if d < -1:
            raise ValueError(f"{what}: shape[{i}] = {d}, but a dim is a size >= 0, or -1 "
                             f"(or None) for a size given by the feed; received shape "
                             f"{list(shape)}")


def fluid_data(name: str, shape: Sequence[Optional[int]], dtype: Any = "float32",
               lod_level: int = 0) -> Variable:
    """``fluid.data``: shape used verbatim (None -> -1); feeds are checked against it.

    Args:
        name (str): the feed name (``exe.run(feed={name: array})``).
        shape (list of int | None): the shape as fed; ``None`` or ``-1`` for a dimension that
            varies (the batch), checked against every feed.
        dtype (str | numpy dtype, default "float32"): the fed arrays' dtype.
        lod_level (int, default 0): > 0 for a LoD (variable-length sequence) input.
    Returns:
        Variable: the input variable (``stop_gradient=True``, ``is_data=True``).
    Raises:
        TypeError: ``name`` is not a str, ``shape`` is not a sequence, or ``dtype`` is unknown.
        ValueError: a dim of ``shape`` is not an int (or None), or is below -1.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     image = fluid.data(name="image", shape=[None, 1, 28, 28], dtype="float32")
        ...     label = fluid.data(name="label", shape=[None, 1], dtype="int64")
        >>> image.shape, label.dtype == fluid.core.VarDesc.VarType.INT64
        ((-1, 1, 28, 28), True)
    """
    _check_name(name, "data")
    shape = _shape_list(shape, f"fluid.data '{name}'")
    return default_main_program().global_block().create_var(
        name=name, shape=shape, dtype=dtype, type=VarType.LOD_TENSOR, stop_gradient=True,
        lod_level=lod_level, is_data=True, need_check_feed=True)
