"""fluid 1.8's remaining tensor manipulation layers: padding and cropping (``pad``, ``pad2d``,
``pad_constant_like``, ``crop``, ``crop_tensor``), ``unstack``, reversing and rolling (``flip``,
``reverse``, ``roll``), ``expand_as``, indexing (``where``, ``scatter``, ``scatter_nd``,
``scatter_nd_add``, ``gather_nd``, ``multiplex``, ``index_select``, ``index_sample``,
``masked_select``, ``nonzero``), sorting and uniqueness (``argsort``, ``unique``,
``unique_with_counts``), ``shard_index`` and ``label_smooth``. The ops are in ops/pad_crop.py,
manip_extra.py, index_extra.py and sort_unique.py."""
from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple, Union

from ..core.dtypes import convert_np_dtype_to_dtype_
from ..core.ir import Variable
from ..pipeline.feeder import check_dtype, check_type, check_variable_and_dtype, convert_dtype
from ..layer_helper import LayerHelper, check_int, check_number, is_int
from .tensor import _ints_or_tensors, zeros

__all__ = ["pad", "pad2d", "pad_constant_like", "crop", "crop_tensor", "unstack", "flip",
           "reverse", "roll", "expand_as", "where", "scatter", "scatter_nd", "scatter_nd_add",
           "gather_nd", "multiplex", "index_select", "index_sample", "masked_select", "argsort",
           "unique", "unique_with_counts", "shard_index", "nonzero", "label_smooth"]

_FLOAT = ["float16", "float32", "float64"]
_NUM = _FLOAT + ["int32", "int64"]
_ALL = ["bool"] + _NUM
_INT = ["int32", "int64"]


def _out(helper: LayerHelper, dtype: Any) -> Variable:
    return helper.create_variable_for_type_inference(dtype=dtype)


def _axes_arg(value: Any, name: str, layer: str) -> List[int]:
    """An int or a list/tuple of ints -> list of ints (TypeError naming the argument)."""
    if is_int(value):
        return [int(value)]
    check_type(value, name, (list, tuple), layer)
    return [check_int(v, f"{name}[{i}]", layer) for i, v in enumerate(value)]


def _check_axes(layer: str, axes: List[int], rank: int, name: str) -> None:
    for a in axes:
        if not -rank <= a < rank:
            raise ValueError(f"{layer}: {name} entry {a} is out of range for input of rank "
                             f"{rank}; expected values in [{-rank}, {rank})")
    if len({a % rank for a in axes}) != len(axes):
        raise ValueError(f"{layer}: {name} {axes} names an axis twice")


# -- padding ----------------------------------------------------------------------------------
def pad(x: Variable, paddings: Sequence[int], pad_value: float = 0.0,
        name: Optional[str] = None) -> Variable:
    """Pad every dim of ``x`` with the constant ``pad_value``: ``paddings[2i]`` values before
    and ``paddings[2i+1]`` after dim i (op ``pad``).

    Args:
        x (Variable): the input.
        paddings (list of int): ``[before_0, after_0, before_1, after_1, ...]``.
        pad_value (float, default 0.0): the fill value.
        name (str | None): name prefix of the output.
    Returns:
        Variable: the padded tensor.
    Raises:
        TypeError: ``x`` is not a float16/32/64/int32/int64 Variable, ``paddings`` is not a list
            of ints, or ``pad_value`` is not a number.
        ValueError: ``paddings`` does not have ``2 * rank(x)`` entries.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [1, 2], "float32")
        ...     out = fluid.layers.pad(x, paddings=[0, 1, 1, 0], pad_value=9.0)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> res, = exe.run(main, feed={"x": np.array([[1, 2]], "float32")}, fetch_list=[out])
        >>> res
        array([[9., 1., 2.],
               [9., 9., 9.]], dtype=float32)
    """
    check_variable_and_dtype(x, "x", _NUM, "pad")
    paddings = _axes_arg(paddings, "paddings", "pad")
    if len(paddings) != 2 * len(x.shape):
        raise ValueError(f"pad: paddings must have 2 * rank(x) = {2 * len(x.shape)} entries "
                         f"(before and after each dim), but received {paddings}")
    helper = LayerHelper("pad", name=name)
    out = _out(helper, x.dtype)
    helper.append_op(type="pad", inputs={"X": x}, outputs={"Out": out},
                     attrs={"paddings": paddings,
                            "pad_value": check_number(pad_value, "pad_value", "pad")})
    return out


def pad2d(input: Variable, paddings: Any = [0, 0, 0, 0], mode: str = "constant",
          pad_value: float = 0.0, data_format: str = "NCHW",
          name: Optional[str] = None) -> Variable:
    """Pad the H and W dims of a 4-D tensor by ``[top, bottom, left, right]`` (a list, or an
    int32 Variable of shape [4]); ``mode``: 'constant' (``pad_value``), 'reflect' or 'edge'
    (op ``pad2d``).

    Args:
        input (Variable): ``[N, C, H, W]`` (or NHWC) map.
        paddings (list | Variable, default [0, 0, 0, 0]): top, bottom, left, right.
        mode (str, default "constant"): ``"constant"``, ``"reflect"`` or ``"edge"``.
        pad_value (float, default 0.0): the fill value of ``"constant"``.
        data_format (str, default "NCHW"): the layout.
        name (str | None): name prefix of the output.
    Returns:
        Variable: the padded map.
    Raises:
        TypeError: ``input`` is not a float16/32/64/int32/int64 Variable, ``paddings`` is not a
            list of ints or an int32 Variable, or ``pad_value`` is not a number.
        ValueError: ``mode`` or ``data_format`` is not one of the listed values, or ``paddings``
            is not 4 non-negative ints (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [1, 1, 2, 2], "float32")
        ...     out = fluid.layers.pad2d(x, paddings=[1, 0, 0, 1])
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> res, = exe.run(main, feed={"x": np.ones((1, 1, 2, 2), "float32")}, fetch_list=[out])
        >>> res[0, 0]
        array([[0., 0., 0.],
               [1., 1., 0.],
               [1., 1., 0.]], dtype=float32)
    """
    check_variable_and_dtype(input, "input", _NUM, "pad2d")
    if mode not in ("constant", "reflect", "edge"):
        raise ValueError(f"pad2d: mode must be 'constant', 'reflect' or 'edge', but received "
                         f"{mode!r}")
    if data_format not in ("NCHW", "NHWC"):
        raise ValueError(f"pad2d: data_format must be 'NCHW' or 'NHWC', but received "
                         f"{data_format!r}")
    attrs = {"mode": mode, "pad_value": check_number(pad_value, "pad_value", "pad2d"),
             "data_format": data_format}
    inputs: dict = {"X": input}
    if isinstance(paddings, Variable):
        check_dtype(paddings.dtype, "paddings", ["int32"], "pad2d")
        inputs["Paddings"] = paddings
        attrs["paddings"] = []
    else:
        attrs["paddings"] = _axes_arg(paddings, "paddings", "pad2d")
    helper = LayerHelper("pad2d", name=name)
    out = _out(helper, input.dtype)
    helper.append_op(type="pad2d", inputs=inputs, outputs={"Out": out}, attrs=attrs)
    return out


def pad_constant_like(x: Variable, y: Variable, pad_value: float = 0.0,
                      name: Optional[str] = None) -> Variable:
    """``y`` padded at the end of every dim with ``pad_value`` up to ``x``'s shape (op
    ``pad_constant_like``; only ``y`` is differentiated).

    Args:
        x (Variable): the target shape.
        y (Variable): the tensor padded at the end of each dim to ``x``'s shape.
        pad_value (float, default 0.0): the fill value.
        name (str | None): name prefix of the output.
    Returns:
        Variable: ``y`` padded to ``x``'s shape.
    Raises:
        TypeError: ``x`` or ``y`` is not a float16/32/64/int32/int64 Variable, or ``pad_value`` is
            not a number.
        ValueError: ``y`` is larger than ``x`` in some dim, or the ranks differ (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [2, 3], "float32")
        ...     y = fluid.data("y", [1, 2], "float32")
        ...     out = fluid.layers.pad_constant_like(x, y, pad_value=-1.0)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.zeros((2, 3), "float32"), "y": np.ones((1, 2), "float32")}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res
        array([[ 1.,  1., -1.],
               [-1., -1., -1.]], dtype=float32)
    """
    check_variable_and_dtype(x, "x", _NUM, "pad_constant_like")
    check_variable_and_dtype(y, "y", _NUM, "pad_constant_like")
    helper = LayerHelper("pad_constant_like", name=name)
    out = _out(helper, y.dtype)
    helper.append_op(type="pad_constant_like", inputs={"X": x, "Y": y}, outputs={"Out": out},
                     attrs={"pad_value": check_number(pad_value, "pad_value",
                                                      "pad_constant_like")})
    return out


# -- cropping ---------------------------------------------------------------------------------
def crop(x: Variable, shape: Any = None, offsets: Any = None,
         name: Optional[str] = None) -> Variable:
    """``x[offsets : offsets + shape]`` (op ``crop``, deprecated in fluid 1.8 in favour of
    ``crop_tensor``): ``shape`` is a list of ints or a Variable whose *shape* is used;
    ``offsets`` a list of ints or an int Variable (default zeros).

    Args:
        x (Variable): the input.
        shape (list | Variable | None): the output's shape (a Variable: its shape).
        offsets (list | Variable | None): start per dim (default zeros).
        name (str | None): name prefix of the output.
    Returns:
        Variable: the cropped tensor.
    Raises:
        TypeError: ``x`` is not a float16/32/64/int32/int64 Variable, or ``offsets`` is not a list
            of ints or an int32/int64 Variable.
        ValueError: ``shape`` is not a list, tuple or Variable, or the crop window does not fit
            inside ``x`` (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [2, 3], "float32")
        ...     out = fluid.layers.crop(x, shape=[1, 2], offsets=[1, 1])
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.arange(6, dtype="float32").reshape(2, 3)}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res
        array([[4., 5.]], dtype=float32)
    """
    check_variable_and_dtype(x, "x", _NUM, "crop")
    if not isinstance(shape, (list, tuple, Variable)):
        raise ValueError(f"crop: shape should be a list, tuple or Variable, but received "
                         f"{type(shape).__name__}")
    inputs: dict = {"X": x}
    attrs: dict = {}
    if isinstance(shape, Variable):
        inputs["Y"] = shape
    else:
        attrs["shape"] = _axes_arg(shape, "shape", "crop")
    if offsets is None:
        offsets = [0] * len(x.shape)
    if isinstance(offsets, Variable):
        check_dtype(offsets.dtype, "offsets", _INT, "crop")
        inputs["Offsets"] = offsets
    else:
        attrs["offsets"] = _axes_arg(offsets, "offsets", "crop")
    helper = LayerHelper("crop", name=name)
    out = _out(helper, x.dtype)
    helper.append_op(type="crop", inputs=inputs, outputs={"Out": out}, attrs=attrs)
    return out


def crop_tensor(x: Variable, shape: Any = None, offsets: Any = None,
                name: Optional[str] = None) -> Variable:
    """``x[offsets : offsets + shape]`` (op ``crop_tensor``). ``shape`` and ``offsets`` are
    lists of ints and/or int32 Variables of shape [1], or 1-D int32 Variables; a -1 in
    ``shape`` keeps the rest of that dim; ``offsets`` defaults to zeros.

    Args:
        x (Variable): the input.
        shape (list | Variable | None): the output's shape (-1 keeps the rest of a dim).
        offsets (list | Variable | None): start per dim (default zeros).
        name (str | None): name prefix of the output.
    Returns:
        Variable: the cropped tensor.
    Raises:
        TypeError: ``x`` is not a float16/32/64/int32/int64 Variable, or ``shape``/``offsets`` is
            not a list/tuple of ints (or int32 Variables) or an int32 Variable.
        ValueError: ``shape``/``offsets`` do not have one entry per dim of ``x``, a ``shape`` entry
            is neither positive nor -1, an offset is negative, or the window does not fit
            inside ``x`` (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [2, 3], "float32")
        ...     out = fluid.layers.crop_tensor(x, shape=[2, 2], offsets=[0, 1])
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.arange(6, dtype="float32").reshape(2, 3)}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res
        array([[1., 2.],
               [4., 5.]], dtype=float32)
    """
    check_variable_and_dtype(x, "x", ["float32", "float64", "int32", "int64"], "crop_tensor")
    check_type(shape, "shape", (list, tuple, Variable), "crop_tensor")
    check_type(offsets, "offsets", (list, tuple, Variable, type(None)), "crop_tensor")
    rank = len(x.shape)
    inputs: dict = {"X": x}
    attrs: dict = {}
    if offsets is None:
        offsets = [0] * rank
    for arg, value, slot, list_slot in (("shape", shape, "Shape", "ShapeTensor"),
                                        ("offsets", offsets, "Offsets", "OffsetsTensor")):
        if isinstance(value, Variable):
            check_dtype(value.dtype, arg, ["int32"], "crop_tensor")
            value.stop_gradient = True
            inputs[slot] = value
            attrs[arg] = [-1] * rank if arg == "offsets" else []
            continue
        if len(value) != rank:
            raise ValueError(f"crop_tensor: {arg} must have one entry per dim of x (rank "
                             f"{rank}), but received {len(value)} entries")
        for i, v in enumerate(value):
            if isinstance(v, Variable):
                check_dtype(v.dtype, f"{arg}[{i}]", ["int32"], "crop_tensor")
                continue
            v = check_int(v, f"{arg}[{i}]", "crop_tensor")
            if arg == "shape" and (v == 0 or v < -1):
                raise ValueError(f"crop_tensor: every entry of shape must be positive or -1, "
                                 f"but shape[{i}] = {v}")
            if arg == "offsets" and v < 0:
                raise ValueError(f"crop_tensor: every entry of offsets must be >= 0, but "
                                 f"offsets[{i}] = {v}")
        vals, _, tensors = _ints_or_tensors(list(value), arg, "crop_tensor")
        attrs[arg] = vals
        if tensors:
            inputs[list_slot] = tensors
    helper = LayerHelper("crop_tensor", name=name)
    out = _out(helper, x.dtype)
    helper.append_op(type="crop_tensor", inputs=inputs, outputs={"Out": out}, attrs=attrs)
    return out


# -- unstack / flip / reverse / roll / expand_as ------------------------------------------------
def unstack(x: Variable, axis: int = 0, num: Optional[int] = None) -> List[Variable]:
    """Split ``x`` along ``axis`` into ``num`` tensors of rank ``rank(x) - 1`` (op
    ``unstack``); ``num`` defaults to ``x.shape[axis]``, which must then be known.

    Args:
        x (Variable): the input.
        axis (int, default 0): the axis removed.
        num (int | None): the axis size (needed when it is unknown).
    Returns:
        list of Variable: the slices along ``axis``.
    Raises:
        TypeError: ``x`` is not a Variable, or ``axis``/``num`` is not an int.
        ValueError: ``axis`` is out of range, ``num`` is negative, or ``num`` is None while the
            size of ``axis`` is unknown (-1).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [2, 3], "float32")
        ...     a, b = fluid.layers.unstack(x, axis=0)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.arange(6, dtype="float32").reshape(2, 3)}
        >>> res, = exe.run(main, feed=feed, fetch_list=[b])
        >>> res
        array([3., 4., 5.], dtype=float32)
    """
    check_variable_and_dtype(x, "x", _ALL, "unstack")
    axis = check_int(axis, "axis", "unstack")
    rank = len(x.shape)
    if not -rank <= axis < rank:
        raise ValueError(f"unstack: axis {axis} is out of range for x of rank {rank}; expected "
                         f"a value in [{-rank}, {rank})")
    if num is None:
        num = x.shape[axis]
        if num <= 0:
            raise ValueError(f"unstack: the size of axis {axis} of x (shape {list(x.shape)}) is "
                             f"unknown; pass num")
    num = check_int(num, "num", "unstack", minimum=0)
    helper = LayerHelper("unstack")
    outs = [_out(helper, x.dtype) for _ in range(num)]
    helper.append_op(type="unstack", inputs={"X": [x]}, outputs={"Y": outs},
                     attrs={"axis": axis, "num": num})
    return outs


def flip(input: Variable, dims: Sequence[int], name: Optional[str] = None) -> Variable:
    """Reverse ``input`` along every axis in ``dims`` (op ``flip``).

    Args:
        input (Variable): the input.
        dims (list of int): the axes reversed.
        name (str | None): name prefix of the output.
    Returns:
        Variable: the flipped tensor.
    Raises:
        TypeError: ``input`` is not a Variable, or ``dims`` is not a list/tuple of ints.
        ValueError: ``dims`` is empty, names an axis out of range, or names an axis twice.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [2, 3], "float32")
        ...     out = fluid.layers.flip(x, dims=[1])
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.arange(6, dtype="float32").reshape(2, 3)}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res
        array([[2., 1., 0.],
               [5., 4., 3.]], dtype=float32)
    """
    check_variable_and_dtype(input, "input", _ALL, "flip")
    check_type(dims, "dims", (list, tuple), "flip")
    if not dims:
        raise ValueError("flip: dims must name at least one axis, but received an empty list")
    dims = _axes_arg(dims, "dims", "flip")
    _check_axes("flip", dims, len(input.shape), "dims")
    helper = LayerHelper("flip", name=name)
    out = _out(helper, input.dtype)
    helper.append_op(type="flip", inputs={"X": input}, outputs={"Out": out},
                     attrs={"dims": dims})
    return out


def reverse(x: Variable, axis: Union[int, Sequence[int]]) -> Variable:
    """Reverse ``x`` along ``axis`` (an int or a list of ints) (op ``reverse``).

    Args:
        x (Variable): the input.
        axis (int | list of int): the axes reversed.
    Returns:
        Variable: the reversed tensor.
    Raises:
        TypeError: ``x`` is not a Variable of a numeric or bool dtype, or ``axis`` is not an int
            or a list/tuple of ints.
        ValueError: an entry of ``axis`` is out of range, or an axis is named twice.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [2, 3], "float32")
        ...     out = fluid.layers.reverse(x, axis=0)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.arange(6, dtype="float32").reshape(2, 3)}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res
        array([[3., 4., 5.],
               [0., 1., 2.]], dtype=float32)
    """
    check_variable_and_dtype(x, "x", _NUM + ["bool"], "reverse")
    axis = _axes_arg(axis, "axis", "reverse")
    _check_axes("reverse", axis, len(x.shape), "axis")
    helper = LayerHelper("reverse")
    out = _out(helper, x.dtype)
    helper.append_op(type="reverse", inputs={"X": [x]}, outputs={"Out": [out]},
                     attrs={"axis": axis})
    return out


def roll(input: Variable, shifts: Union[int, Sequence[int]],
         dims: Union[int, Sequence[int], None] = None) -> Variable:
    """Roll ``input`` by ``shifts`` along ``dims`` (elements leaving one end re-enter at the
    other); without ``dims`` the flattened tensor is rolled and reshaped back (op ``roll``).

    Args:
        input (Variable): the input.
        shifts (int | list of int): how far to roll.
        dims (int | list of int | None): the axes (None: the flattened input).
    Returns:
        Variable: the rolled tensor.
    Raises:
        TypeError: ``input`` is not a Variable, or ``shifts``/``dims`` is not an int or a
            list/tuple of ints.
        ValueError: ``shifts`` and ``dims`` differ in length (without ``dims``: ``shifts`` is not
            one value), or a dim is out of range or repeated.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [2, 3], "float32")
        ...     out = fluid.layers.roll(x, shifts=1, dims=1)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.arange(6, dtype="float32").reshape(2, 3)}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res
        array([[2., 0., 1.],
               [5., 3., 4.]], dtype=float32)
    """
    check_variable_and_dtype(input, "input", _ALL, "roll")
    shifts = _axes_arg(shifts, "shifts", "roll")
    dims = [] if dims is None else _axes_arg(dims, "dims", "roll")
    if dims and len(dims) != len(shifts):
        raise ValueError(f"roll: shifts {shifts} and dims {dims} must have the same length")
    if not dims and len(shifts) != 1:
        raise ValueError(f"roll: without dims, shifts must be one value, but received {shifts}")
    _check_axes("roll", dims, len(input.shape), "dims")
    helper = LayerHelper("roll")
    out = _out(helper, input.dtype)
    helper.append_op(type="roll", inputs={"X": [input]}, outputs={"Out": out},
                     attrs={"shifts": shifts, "dims": dims})
    return out


def expand_as(x: Variable, target_tensor: Variable, name: Optional[str] = None) -> Variable:
    """Tile ``x`` to ``target_tensor``'s shape; each target dim must be a multiple of x's
    (op ``expand_as``).

    Args:
        x (Variable): the input.
        target_tensor (Variable): a tensor whose shape ``x`` is tiled to (each dim a multiple).
        name (str | None): name prefix of the output.
    Returns:
        Variable: ``x`` tiled to ``target_tensor``'s shape.
    Raises:
        TypeError: ``x`` or ``target_tensor`` is not a Variable of bool/float32/float64/int32/int64.
        ValueError: ``target_tensor`` does not have ``x``'s rank, or a dim of it is not a multiple
            of ``x``'s (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [1, 2], "float32")
        ...     y = fluid.data("y", [3, 2], "float32")
        ...     out = fluid.layers.expand_as(x, y)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.array([[1, 2]], "float32"), "y": np.zeros((3, 2), "float32")}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res
        array([[1., 2.],
               [1., 2.],
               [1., 2.]], dtype=float32)
    """
    check_variable_and_dtype(x, "x", ["bool", "float32", "float64", "int32", "int64"],
                             "expand_as")
    check_variable_and_dtype(target_tensor, "target_tensor",
                             ["bool", "float32", "float64", "int32", "int64"], "expand_as")
    helper = LayerHelper("expand_as", name=name)
    out = _out(helper, x.dtype)
    helper.append_op(type="expand_as", inputs={"X": x, "target_tensor": target_tensor},
                     outputs={"Out": out})
    return out


# -- indexing -----------------------------------------------------------------------------------
def where(condition: Variable) -> Variable:
    """int64 coordinates ``[K, rank]`` of the true entries of bool ``condition`` (op
    ``where_index``).

    Args:
        condition (Variable): a bool tensor.
    Returns:
        Variable: int64 ``[count, rank]`` coordinates of the true entries.
    Raises:
        TypeError: ``condition`` is not a bool Variable.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     c = fluid.data("c", [-1], "bool")
        ...     out = fluid.layers.where(c)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> res, = exe.run(main, feed={"c": np.array([True, False, True])}, fetch_list=[out])
        >>> res
        array([[0],
               [2]])
    """
    check_variable_and_dtype(condition, "condition", ["bool"], "where")
    helper = LayerHelper("where_index")
    out = _out(helper, "int64")
    helper.append_op(type="where_index", inputs={"Condition": condition},
                     outputs={"Out": [out]})
    out.stop_gradient = True
    return out


def scatter(input: Variable, index: Variable, updates: Variable, name: Optional[str] = None,
            overwrite: bool = True) -> Variable:
    """``input`` with rows ``index`` replaced by ``updates`` (``overwrite=False``: the rows are
    zeroed, then the updates are added, so repeated indices accumulate) (op ``scatter``).

    Args:
        input (Variable): the tensor to update.
        index (Variable): 1-D int rows of ``input``.
        updates (Variable): the new rows, ``[len(index), ...]``.
        name (str | None): name prefix of the output.
        overwrite (bool, default True): replace the rows (else add, after zeroing them).
    Returns:
        Variable: a copy of ``input`` with the rows updated.
    Raises:
        TypeError: ``input``/``updates`` is not a float16/32/64/int32/int64 Variable, ``index`` is
            not an int32/int64 Variable, ``overwrite`` is not a bool, or ``updates`` does not
            have ``input``'s dtype.
        ValueError: ``updates`` does not have ``input``'s shape apart from the first dim
            (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [3, 2], "float32")
        ...     idx = fluid.data("idx", [-1], "int64")
        ...     upd = fluid.data("upd", [-1, 2], "float32")
        ...     out = fluid.layers.scatter(x, idx, upd)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.zeros((3, 2), "float32"), "idx": np.array([2, 0], "int64"), "upd": np.array([[1, 1], [2, 2]], "float32")}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res
        array([[2., 2.],
               [0., 0.],
               [1., 1.]], dtype=float32)
    """
    check_variable_and_dtype(input, "input", _NUM, "scatter")
    check_variable_and_dtype(index, "index", _INT, "scatter")
    check_variable_and_dtype(updates, "updates", _NUM, "scatter")
    check_type(overwrite, "overwrite", bool, "scatter")
    if updates.dtype != input.dtype:
        raise TypeError(f"scatter: updates must have the data type of input "
                        f"({convert_dtype(input.dtype)}), but received "
                        f"{convert_dtype(updates.dtype)}")
    helper = LayerHelper("scatter", name=name)
    out = _out(helper, input.dtype)
    helper.append_op(type="scatter", inputs={"X": input, "Ids": index, "Updates": updates},
                     outputs={"Out": out}, attrs={"overwrite": overwrite})
    return out


def scatter_nd_add(ref: Variable, index: Variable, updates: Variable,
                   name: Optional[str] = None) -> Variable:
    """``ref`` plus ``updates`` added at the positions ``index[..., :]`` (op
    ``scatter_nd_add``); repeated positions accumulate.

    Args:
        ref (Variable): the tensor to update.
        index (Variable): int ``[..., k]`` coordinates into ``ref``'s first ``k`` dims.
        updates (Variable): ``index.shape[:-1] + ref.shape[k:]``.
        name (str | None): name prefix of the output.
    Returns:
        Variable: a copy of ``ref`` with the updates added (repeated coordinates accumulate).
    Raises:
        TypeError: ``ref``/``updates`` is not a float16/32/64/int32/int64 Variable, or ``index``
            is not an int32/int64 Variable.
        ValueError: ``ref`` and ``updates`` differ in dtype, or ``updates`` does not have shape
            ``index.shape[:-1] + ref.shape[index.shape[-1]:]`` (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [3, 2], "float32")
        ...     idx = fluid.data("idx", [-1, 1], "int64")
        ...     upd = fluid.data("upd", [-1, 2], "float32")
        ...     out = fluid.layers.scatter_nd_add(x, idx, upd)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.zeros((3, 2), "float32"), "idx": np.array([[1], [1]], "int64"), "upd": np.array([[1, 2], [3, 4]], "float32")}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res
        array([[0., 0.],
               [4., 6.],
               [0., 0.]], dtype=float32)
    """
    check_variable_and_dtype(ref, "ref", _NUM, "scatter_nd_add")
    check_variable_and_dtype(index, "index", _INT, "scatter_nd_add")
    check_variable_and_dtype(updates, "updates", _NUM, "scatter_nd_add")
    if ref.dtype != updates.dtype:
        raise ValueError(f"scatter_nd_add: ref and updates must have the same data type, but "
                         f"received {convert_dtype(ref.dtype)} and "
                         f"{convert_dtype(updates.dtype)}")
    helper = LayerHelper("scatter_nd_add", name=name)
    out = _out(helper, ref.dtype)
    helper.append_op(type="scatter_nd_add",
                     inputs={"X": ref, "Index": index, "Updates": updates},
                     outputs={"Out": out})
    return out


def scatter_nd(index: Variable, updates: Variable, shape: Sequence[int],
               name: Optional[str] = None) -> Variable:
    """Zeros of ``shape`` with ``updates`` added at ``index`` (``scatter_nd_add`` on
    ``zeros(shape)``, as fluid composes it).

    Args:
        index (Variable): int ``[..., k]`` coordinates.
        updates (Variable): the values.
        shape (list of int): the output's shape.
        name (str | None): name prefix of the output.
    Returns:
        Variable: zeros of ``shape`` with the updates added.
    Raises:
        TypeError: ``updates`` is not a float16/32/64/int32/int64 Variable, ``shape`` is not a
            list/tuple, or ``index`` is not an int32/int64 Variable.
        ValueError: ``updates`` does not have shape ``index.shape[:-1] + shape[index.shape[-1]:]``
            (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     idx = fluid.data("idx", [-1, 1], "int64")
        ...     upd = fluid.data("upd", [-1], "float32")
        ...     out = fluid.layers.scatter_nd(idx, upd, shape=[5])
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"idx": np.array([[1], [3]], "int64"), "upd": np.array([9, 10], "float32")}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res
        array([ 0.,  9.,  0., 10.,  0.], dtype=float32)
    """
    check_variable_and_dtype(updates, "updates", _NUM, "scatter_nd")
    check_type(shape, "shape", (list, tuple), "scatter_nd")
    return scatter_nd_add(zeros(list(shape), updates.dtype), index, updates, name)


def gather_nd(input: Variable, index: Variable, name: Optional[str] = None) -> Variable:
    """``input[index[..., :]]``: the last dim of ``index`` indexes the leading dims of input;
    shape ``index.shape[:-1] + input.shape[index.shape[-1]:]`` (op ``gather_nd``).

    Args:
        input (Variable): the source.
        index (Variable): int ``[..., k]`` coordinates into ``input``'s first ``k`` dims.
        name (str | None): name prefix of the output.
    Returns:
        Variable: ``index.shape[:-1] + input.shape[k:]``.
    Raises:
        TypeError: ``input`` is not a Variable, or ``index`` is not an int32/int64 Variable.
        ValueError: the last dim of ``index`` exceeds the rank of ``input`` (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [2, 3], "float32")
        ...     idx = fluid.data("idx", [-1, 2], "int64")
        ...     out = fluid.layers.gather_nd(x, idx)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.arange(6, dtype="float32").reshape(2, 3), "idx": np.array([[0, 2], [1, 0]], "int64")}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res
        array([2., 3.], dtype=float32)
    """
    check_variable_and_dtype(input, "input", _ALL, "gather_nd")
    check_variable_and_dtype(index, "index", _INT, "gather_nd")
    helper = LayerHelper("gather_nd", name=name)
    out = _out(helper, input.dtype)
    helper.append_op(type="gather_nd", inputs={"X": input, "Index": index},
                     outputs={"Out": out})
    return out


def multiplex(inputs: Sequence[Variable], index: Variable) -> Variable:
    """Row i of the result is row i of ``inputs[index[i]]`` (``index``: int32 [N, 1]) (op
    ``multiplex``).

    Args:
        inputs (list of Variable): same-shaped candidates ``[N, ...]``.
        index (Variable): int32 ``[N, 1]``: which candidate each row comes from.
    Returns:
        Variable: row ``i`` of ``inputs[index[i]]``.
    Raises:
        TypeError: ``inputs`` is not a list/tuple of float16/32/64/int32/int64 Variables, or
            ``index`` is not an int32/int64 Variable.
        ValueError: ``inputs`` has fewer than 2 Variables, or their shapes differ
            (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [2, 3], "float32")
        ...     y = fluid.data("y", [2, 3], "float32")
        ...     ids = fluid.data("ids", [2, 1], "int32")
        ...     out = fluid.layers.multiplex([x, y], ids)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.arange(6, dtype="float32").reshape(2, 3), "y": np.full((2, 3), 2.0, "float32"), "ids": np.array([[1], [0]], "int32")}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res
        array([[2., 2., 2.],
               [3., 4., 5.]], dtype=float32)
    """
    check_type(inputs, "inputs", (list, tuple), "multiplex")
    if len(inputs) < 2:
        raise ValueError(f"multiplex: inputs should be a list of at least 2 Variables, but "
                         f"received {len(inputs)}")
    for i, x in enumerate(inputs):
        check_variable_and_dtype(x, f"inputs[{i}]", _NUM, "multiplex")
    check_variable_and_dtype(index, "index", _INT, "multiplex")
    helper = LayerHelper("multiplex")
    out = _out(helper, inputs[0].dtype)
    helper.append_op(type="multiplex", inputs={"X": list(inputs), "Ids": index},
                     outputs={"Out": [out]})
    return out


def index_select(input: Variable, index: Variable, dim: int = 0) -> Variable:
    """Entries of ``input`` at the 1-D int ``index`` along ``dim`` (op ``index_select``).

    Args:
        input (Variable): the source.
        index (Variable): 1-D int indices.
        dim (int, default 0): the axis indexed.
    Returns:
        Variable: ``input`` with ``dim`` reduced to the selected entries.
    Raises:
        TypeError: ``input`` is not a float16/32/64/int32/int64 Variable, ``index`` is not an
            int32/int64 Variable, or ``dim`` is not an int.
        ValueError: ``dim`` is out of range (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [2, 3], "float32")
        ...     idx = fluid.data("idx", [-1], "int64")
        ...     out = fluid.layers.index_select(x, idx, dim=1)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.arange(6, dtype="float32").reshape(2, 3), "idx": np.array([2, 0], "int64")}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res
        array([[2., 0.],
               [5., 3.]], dtype=float32)
    """
    check_variable_and_dtype(input, "input", _NUM, "index_select")
    check_variable_and_dtype(index, "index", _INT, "index_select")
    dim = check_int(dim, "dim", "index_select")
    helper = LayerHelper("index_select")
    out = _out(helper, input.dtype)
    helper.append_op(type="index_select", inputs={"X": input, "Index": index},
                     outputs={"Out": out}, attrs={"dim": dim})
    return out


def index_sample(x: Variable, index: Variable) -> Variable:
    """``out[i, j] = x[i, index[i, j]]`` for 2-D ``x`` and int ``index`` (op
    ``index_sample``).

    Args:
        x (Variable): ``[N, D]``.
        index (Variable): int ``[N, K]`` column indices per row.
    Returns:
        Variable: ``[N, K]``, ``x[i, index[i, j]]``.
    Raises:
        TypeError: ``x`` is not a float16/32/64/int32/int64 Variable, or ``index`` is not an
            int32/int64 Variable.
        ValueError: ``x`` and ``index`` are not 2-D or differ in their first dim
            (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [2, 3], "float32")
        ...     idx = fluid.data("idx", [2, 2], "int64")
        ...     out = fluid.layers.index_sample(x, idx)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.arange(6, dtype="float32").reshape(2, 3), "idx": np.array([[2, 0], [1, 1]], "int64")}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res
        array([[2., 0.],
               [4., 4.]], dtype=float32)
    """
    check_variable_and_dtype(x, "x", _NUM, "index_sample")
    check_variable_and_dtype(index, "index", _INT, "index_sample")
    helper = LayerHelper("index_sample")
    out = _out(helper, x.dtype)
    helper.append_op(type="index_sample", inputs={"X": x, "Index": index},
                     outputs={"Out": out})
    return out


def masked_select(input: Variable, mask: Variable) -> Variable:
    """The entries of ``input`` where the bool ``mask`` (broadcast to input's shape) is true,
    as a 1-D tensor (op ``masked_select``)."""
    check_variable_and_dtype(input, "input", _NUM, "masked_select")
    check_variable_and_dtype(mask, "mask", ["bool"], "masked_select")
    helper = LayerHelper("masked_select")
    out = _out(helper, input.dtype)
    helper.append_op(type="masked_select", inputs={"X": input, "Mask": mask},
                     outputs={"Y": out})
    return out


# -- sorting / uniqueness / sharding ------------------------------------------------------------
def argsort(input: Variable, axis: int = -1, descending: bool = False,
            name: Optional[str] = None) -> Tuple[Variable, Variable]:
    """``(sorted values, int64 indices)`` along ``axis`` (op ``argsort``; equal values keep
    their input order).

    Args:
        input (Variable): the input.
        axis (int, default -1): the axis sorted.
        descending (bool, default False): largest first.
        name (str | None): name prefix of the output.
    Returns:
        tuple: ``(sorted values, int64 indices)``.

    Raises:
        TypeError: ``input`` is not a numeric Variable, ``axis`` is not an int or
            ``descending`` not a bool.
        ValueError: ``axis`` is out of range for ``input``'s rank.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 4], "float32")
        ...     out, idx = fluid.layers.argsort(x, axis=1)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.array([[3.0, 1.0, 4.0, 1.5]], "float32")}
        >>> res, = exe.run(main, feed=feed, fetch_list=[idx])
        >>> res
        array([[1, 3, 0, 2]])
    """
    check_variable_and_dtype(input, "input", _NUM, "argsort")
    axis = check_int(axis, "axis", "argsort")
    check_type(descending, "descending", bool, "argsort")
    helper = LayerHelper("argsort", name=name)
    out = _out(helper, input.dtype)
    ids = _out(helper, "int64")
    helper.append_op(type="argsort", inputs={"X": input}, outputs={"Out": out, "Indices": ids},
                     attrs={"axis": axis, "descending": descending})
    ids.stop_gradient = True
    return out, ids


def _unique(layer: str, x: Variable, dtype: Any, with_counts: bool) -> Tuple[Variable, ...]:
    check_variable_and_dtype(x, "x", ["float32", "float64", "int32", "int64"], layer)
    check_dtype(dtype, "dtype", _INT, layer)
    if len(x.shape) != 1:
        raise ValueError(f"{layer}: x must be a 1-D tensor, but its shape is {list(x.shape)}")
    helper = LayerHelper(layer)
    out, index = _out(helper, x.dtype), _out(helper, dtype)
    outputs = {"Out": [out], "Index": [index]}
    if with_counts:
        outputs["Count"] = [_out(helper, dtype)]
    helper.append_op(type=layer, inputs={"X": x}, outputs=outputs,
                     attrs={"dtype": convert_np_dtype_to_dtype_(dtype)})
    result = tuple(v[0] for v in outputs.values())
    for v in result:
        v.stop_gradient = True
    return result


def unique(x: Variable, dtype: Any = "int32") -> Tuple[Variable, Variable]:
    """``(out, index)``: the distinct values of 1-D ``x`` in order of first appearance, and
    each entry's position in ``out`` (op ``unique``).

    Args:
        x (Variable): a 1-D tensor.
        dtype (str, default "int32"): the index dtype.
    Returns:
        tuple: ``(out, index)``: the unique values in order of first appearance, and for every
        element of ``x`` its position in ``out``.
    Raises:
        TypeError: ``x`` is not a float32/float64/int32/int64 Variable, or ``dtype`` is not
            int32/int64.
        ValueError: ``x`` is not 1-D.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1], "int64")
        ...     out, index = fluid.layers.unique(x)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> res, = exe.run(main, feed={"x": np.array([2, 3, 2, 1], "int64")}, fetch_list=[out])
        >>> res
        array([2, 3, 1])
    """
    return _unique("unique", x, dtype, False)


def unique_with_counts(x: Variable, dtype: Any = "int32"
                       ) -> Tuple[Variable, Variable, Variable]:
    """``(out, index, count)``: as ``unique`` plus how often each value occurs (op
    ``unique_with_counts``).

    Args:
        x (Variable): a 1-D tensor.
        dtype (str): the dtype of ``index`` and ``count``, ``"int32"`` or ``"int64"``.
            Default ``"int32"``.

    Returns:
        tuple(Variable, Variable, Variable): ``out``, the distinct values of ``x`` (1-D,
        ``x``'s dtype); ``index``, for each element of ``x`` its position in ``out`` (``x``'s
        length); ``count``, the occurrences of each value of ``out``.

    Raises:
        TypeError: ``x`` is not a Variable, or ``dtype`` is not int32/int64.
        ValueError: ``x`` is not 1-D.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1], "int64")
        ...     out, index, count = fluid.layers.unique_with_counts(x)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> res, = exe.run(main, feed={"x": np.array([2, 3, 2, 1], "int64")}, fetch_list=[count])
        >>> res
        array([2, 1, 1], dtype=int32)
    """
    return _unique("unique_with_counts", x, dtype, True)


def shard_index(input: Variable, index_num: int, nshards: int, shard_id: int,
                ignore_value: int = -1) -> Variable:
    """Ids of shard ``shard_id`` re-based to it, others set to ``ignore_value``; shards have
    ``ceil(index_num / nshards)`` ids (op ``shard_index``).

    Args:
        input (Variable): int ids ``[N, 1]``.
        index_num (int): the id range, split into ``nshards`` equal shards.
        nshards (int): the number of shards.
        shard_id (int): this shard.
        ignore_value (int, default -1): the output for ids of other shards.
    Returns:
        Variable: the id relative to the shard, or ``ignore_value``.
    Raises:
        TypeError: ``input`` is not an int32/int64 Variable, or ``index_num``/``nshards``/
            ``shard_id``/``ignore_value`` is not an int.
        ValueError: ``index_num`` or ``nshards`` is < 1, or ``shard_id`` is not in
            ``[0, nshards)``.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     ids = fluid.data("ids", [-1, 1], "int64")
        ...     out = fluid.layers.shard_index(ids, index_num=20, nshards=2, shard_id=1)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> exe.run(main, feed={"ids": np.array([[3], [12]], "int64")}, fetch_list=[out])[0].ravel()
        array([-1,  2])
    """
    check_variable_and_dtype(input, "input", _INT, "shard_index")
    index_num = check_int(index_num, "index_num", "shard_index", minimum=1)
    nshards = check_int(nshards, "nshards", "shard_index", minimum=1)
    shard_id = check_int(shard_id, "shard_id", "shard_index")
    if not 0 <= shard_id < nshards:
        raise ValueError(f"shard_index: shard_id ({shard_id}) should be in [0, {nshards})")
    helper = LayerHelper("shard_index")
    out = _out(helper, input.dtype)
    helper.append_op(type="shard_index", inputs={"X": [input]}, outputs={"Out": out},
                     attrs={"index_num": index_num, "nshards": nshards, "shard_id": shard_id,
                            "ignore_value": check_int(ignore_value, "ignore_value",
                                                      "shard_index")})
    out.stop_gradient = True
    return out


def nonzero(input: Variable, as_tuple: bool = False) -> Union[Variable, Tuple[Variable, ...]]:
    """int64 coordinates ``[z, rank]`` of the non-zero entries of ``input`` (op
    ``where_index``); ``as_tuple``: one ``[z, 1]`` column per dim instead, as fluid 1.8.

    Args:
        input (Variable): the tensor.
        as_tuple (bool, default False): one 1-D index tensor per dim instead of one matrix.
    Returns:
        Variable | tuple: int64 ``[count, rank]`` coordinates of the non-zero entries.
    Raises:
        TypeError: ``input`` is not a Variable, or ``as_tuple`` is not a bool.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [2, 2], "float32")
        ...     out = fluid.layers.nonzero(x)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.array([[0, 1], [2, 0]], "float32")}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res
        array([[0, 1],
               [1, 0]])
    """
    check_variable_and_dtype(input, "input", _ALL, "nonzero")
    check_type(as_tuple, "as_tuple", bool, "nonzero")
    helper = LayerHelper("where_index")
    out = _out(helper, "int64")
    helper.append_op(type="where_index", inputs={"Condition": [input]},
                     outputs={"Out": [out]})
    out.stop_gradient = True
    if not as_tuple:
        return out
    rank = len(input.shape)
    if rank == 1:
        return (out,)
    from .tensor import slice as _slice
    return tuple(_slice(out, axes=[1], starts=[i], ends=[i + 1]) for i in range(rank))


def label_smooth(label: Variable, prior_dist: Optional[Variable] = None,
                 epsilon: float = 0.1, dtype: Any = "float32",
                 name: Optional[str] = None) -> Variable:
    """``(1 - epsilon) * label + epsilon * prior_dist`` (uniform ``1 / K`` without a prior)
    for one-hot ``label`` [..., K] (op ``label_smooth``).

    Args:
        label (Variable): one-hot (or soft) labels ``[..., C]``.
        prior_dist (Variable | None): ``[1, C]`` prior (default uniform).
        epsilon (float, default 0.1): the smoothing weight.
        dtype (str, default "float32"): the output's dtype.
        name (str | None): name prefix of the output.
    Returns:
        Variable: ``(1 - epsilon) * label + epsilon * prior``.
    Raises:
        TypeError: ``label``/``prior_dist`` is not a float32/float64 Variable, ``epsilon`` is not
            a number, or ``dtype`` is not a data type.
        ValueError: ``epsilon`` is not in ``[0, 1]``, or ``prior_dist`` does not match the last
            dim of ``label`` (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     y = fluid.data("y", [-1, 3], "float32")
        ...     out = fluid.layers.label_smooth(y, epsilon=0.3)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> res, = exe.run(main, feed={"y": np.array([[0, 1, 0]], "float32")}, fetch_list=[out])
        >>> res.round(4)
        array([[0.1, 0.8, 0.1]], dtype=float32)
    """
    check_variable_and_dtype(label, "label", ["float32", "float64"], "label_smooth")
    epsilon = check_number(epsilon, "epsilon", "label_smooth")
    if not 0.0 <= epsilon <= 1.0:
        raise ValueError(f"label_smooth: the value of epsilon must be between 0 and 1, but "
                         f"received {epsilon}")
    inputs: dict = {"X": label}
    if prior_dist is not None:
        check_variable_and_dtype(prior_dist, "prior_dist", ["float32", "float64"],
                                 "label_smooth")
        inputs["PriorDist"] = prior_dist
    helper = LayerHelper("label_smooth", name=name)
    out = _out(helper, dtype)
    helper.append_op(type="label_smooth", inputs=inputs, outputs={"Out": out},
                     attrs={"epsilon": epsilon})
    return out
