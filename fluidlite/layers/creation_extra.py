"""fluid 1.8's remaining creation and random layers: ``range``, ``arange``, ``linspace``,
``diag``, ``diag_embed``, ``eye``, ``tril``, ``triu``, ``meshgrid``, ``full``, ``full_like``,
``randint``, ``randn``, ``randperm``, ``random_crop``, ``sampling_id`` and ``hash``. The ops are
in ops/creation_extra.py, random_extra.py, hash.py and manip_extra.py (meshgrid, tril_triu,
diag_embed).

Random layers are deterministic like every random op here: ``seed=0`` draws from the program's
stream (``Program.random_seed``), a non-zero seed gives the same numbers on every run."""
from __future__ import annotations

from typing import Any, List, Optional, Sequence, Union

import numpy as np

from ..core import mode as _mode
from ..core.dtypes import convert_np_dtype_to_dtype_
from ..core.ir import Variable
from ..core.registry import VarSpec
from ..pipeline.feeder import check_dtype, check_type, check_variable_and_dtype, convert_dtype
from ..initializer import Constant
from ..layer_helper import LayerHelper, check_int, check_number, is_int, is_number
from ..ops.creation_extra import range_size
from .ops import cast
from .tensor import _ints_or_tensors, assign, expand, fill_constant, reshape

__all__ = ["range", "arange", "linspace", "diag", "diag_embed", "eye", "tril", "triu",
           "meshgrid", "full", "full_like", "randint", "randn", "randperm", "random_crop",
           "sampling_id", "hash"]

_FLOAT = ["float32", "float64"]
_INT = ["int32", "int64"]


def _set_static_shape(var: Variable, shape: Sequence[int]) -> None:
    """Record a length the op's inference cannot see (it only sees tensors) but the layer
    knows from its Python arguments; dygraph tensors carry their real shape anyway."""
    if _mode.tracer is None:
        var._set_spec(VarSpec(tuple(shape), var.dtype, var.lod_level))


def _as_tensor(value: Any, name: str, layer: str, dtype: str) -> Variable:
    """A 1-element tensor of ``dtype`` from a Python number or a Variable (cast if needed)."""
    if isinstance(value, Variable):
        return value if convert_dtype(value.dtype) == dtype else cast(value, dtype)
    check_number(value, name, layer)
    return fill_constant([1], dtype, value)


def _output(helper: LayerHelper, out: Optional[Variable], dtype: Any, layer: str) -> Variable:
    if out is None:
        return helper.create_variable_for_type_inference(dtype=dtype)
    check_variable_and_dtype(out, "out", [convert_dtype(dtype)], layer)
    return out


# -- sequences and matrices -----------------------------------------------------------------------
def range(start: Any, end: Any, step: Any, dtype: Any) -> Variable:
    """``[start, start + step, ...)`` up to (excluding) ``end`` (op ``range``). ``start``,
    ``end`` and ``step`` are numbers or 1-element Variables (cast to ``dtype``); with numbers
    the length is known at build time (fluid 1.8 declares [-1]).

    Args:
        start (number | Variable): the first value.
        end (number | Variable): the bound (exclusive).
        step (number | Variable): the step.
        dtype (str | numpy dtype): the dtype.
    Returns:
        Variable: 1-D ``[start, start + step, ...]`` below ``end``.
    Raises:
        TypeError: ``dtype`` is not float32/float64/int32/int64, or a non-Variable ``start``/
            ``end``/``step`` is not a number.
        ValueError: with numbers, ``step`` is 0 or points away from ``end``.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     out = fluid.layers.range(0, 10, 3, "int64")
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> exe.run(main, fetch_list=[out])[0]
        array([0, 3, 6, 9])
    """
    check_dtype(dtype, "dtype", _FLOAT + _INT, "range")
    dtype = convert_dtype(dtype)
    helper = LayerHelper("range")
    known = all(is_number(v) for v in (start, end, step))
    if known:
        n = range_size(start, end, step)      # fluid's step checks, at build time
    ins = [_as_tensor(v, k, "range", dtype) for k, v in
           (("start", start), ("end", end), ("step", step))]
    out = helper.create_variable_for_type_inference(dtype=dtype)
    helper.append_op(type="range", inputs={"Start": ins[0], "End": ins[1], "Step": ins[2]},
                     outputs={"Out": [out]})
    if known:
        _set_static_shape(out, [n])
    out.stop_gradient = True
    return out


def arange(start: Any, end: Any, step: Any = 1, dtype: Any = None,
           name: Optional[str] = None) -> Variable:
    """``range`` with fluid 1.8's defaults: ``step=1`` and ``dtype`` float32 when None.

    Args:
        start (number | Variable): the first value.
        end (number | Variable): the bound (exclusive).
        step (number | Variable, default 1): the step.
        dtype (str | None): the dtype.
        name (str | None): name prefix of the output.
    Returns:
        Variable: 1-D ``[start, start + step, ...]`` below ``end``.
    Raises:
        TypeError: ``dtype`` is not float32/float64/int32/int64, or a non-Variable ``start``/
            ``end``/``step`` is not a number.
        ValueError: with numbers, ``step`` is 0 or points away from ``end``.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     out = fluid.layers.arange(0, 5, 2, "int64")
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> exe.run(main, fetch_list=[out])[0]
        array([0, 2, 4])
    """
    return range(start, end, step, "float32" if dtype is None else dtype)


def linspace(start: Any, stop: Any, num: Union[int, Variable], dtype: Any) -> Variable:
    """``num`` evenly spaced values from ``start`` to ``stop`` inclusive (op ``linspace``);
    ``start``/``stop`` are numbers or 1-element Variables, ``num`` an int or int32 Variable.

    Args:
        start (number | Variable): the first value.
        stop (number | Variable): the last value.
        num (int | Variable): the number of values.
        dtype (str | numpy dtype): the dtype.
    Returns:
        Variable: 1-D, ``num`` evenly spaced values.
    Raises:
        TypeError: ``dtype`` is not float32/float64, a non-Variable ``start``/``stop`` is not a
            number, or ``num`` is neither an int nor an int32/int64 Variable.
        ValueError: an int ``num`` is < 1.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     out = fluid.layers.linspace(0, 1, 5, "float32")
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> exe.run(main, fetch_list=[out])[0]
        array([0.  , 0.25, 0.5 , 0.75, 1.  ], dtype=float32)
    """
    check_dtype(dtype, "dtype", _FLOAT, "linspace")
    dtype = convert_dtype(dtype)
    helper = LayerHelper("linspace")
    t_start = _as_tensor(start, "start", "linspace", dtype)
    t_stop = _as_tensor(stop, "stop", "linspace", dtype)
    if isinstance(num, Variable):
        check_dtype(num.dtype, "num", _INT, "linspace")
        t_num = num
    else:
        num = check_int(num, "num", "linspace", minimum=1)
        t_num = fill_constant([1], "int32", num)
    out = helper.create_variable_for_type_inference(dtype=dtype)
    helper.append_op(type="linspace", inputs={"Start": t_start, "Stop": t_stop, "Num": t_num},
                     outputs={"Out": [out]}, attrs={"dtype": convert_np_dtype_to_dtype_(dtype)})
    if not isinstance(num, Variable):
        _set_static_shape(out, [num])
    out.stop_gradient = True
    return out


def diag(diagonal: Union[Variable, np.ndarray]) -> Variable:
    """The square matrix with ``diagonal`` (a 1-D Variable or ndarray) on its diagonal (op
    ``diag``).

    Args:
        diagonal (Variable | numpy.ndarray): the 1-D diagonal.
    Returns:
        Variable: the square matrix with it on the diagonal.
    Raises:
        TypeError: ``diagonal`` is not a Variable or ndarray of float32/float64/int32/int64.
        ValueError: ``diagonal`` is not 1-D (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     d = fluid.layers.diag(np.array([1, 2, 3], "float32"))
        >>> fluid.Executor(fluid.CPUPlace()).run(main, fetch_list=[d])[0]
        array([[1., 0., 0.],
               [0., 2., 0.],
               [0., 0., 3.]], dtype=float32)
    """
    check_type(diagonal, "diagonal", (Variable, np.ndarray), "diag")
    check_dtype(diagonal.dtype, "diagonal", _FLOAT + _INT, "diag")
    if not isinstance(diagonal, Variable):
        diagonal = assign(diagonal)
    helper = LayerHelper("diag")
    out = helper.create_variable_for_type_inference(dtype=diagonal.dtype)
    helper.append_op(type="diag", inputs={"Diagonal": [diagonal]}, outputs={"Out": [out]})
    out.stop_gradient = True
    return out


def diag_embed(input: Union[Variable, np.ndarray], offset: int = 0, dim1: int = -2,
               dim2: int = -1) -> Variable:
    """A tensor whose diagonals (offset ``offset``) in the plane of dims ``dim1`` and ``dim2``
    hold the last dim of ``input``, zeros elsewhere (op ``diag_embed``).

    Args:
        input (Variable | numpy.ndarray): ``[..., K]`` diagonals.
        offset (int, default 0): which diagonal (positive: above the main one).
        dim1 (int, default -2): the first matrix dim of the output.
        dim2 (int, default -1): the second matrix dim of the output.
    Returns:
        Variable: matrices with ``input`` on the chosen diagonal.
    Raises:
        TypeError: ``input`` is not a Variable or ndarray of float32/float64/int32/int64, or
            ``offset``/``dim1``/``dim2`` is not an int.
        ValueError: ``dim1``/``dim2`` is outside ``[-(rank+1), rank+1)``, or both name the same dim.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 2])
        ...     out = fluid.layers.diag_embed(x)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> exe.run(main, feed={"x": np.array([[1, 2]], "float32")}, fetch_list=[out])[0]
        array([[[1., 0.],
                [0., 2.]]], dtype=float32)
    """
    check_type(input, "input", (Variable, np.ndarray), "diag_embed")
    check_dtype(input.dtype, "input", _FLOAT + _INT, "diag_embed")
    if not isinstance(input, Variable):
        input = assign(input)
    offset = check_int(offset, "offset", "diag_embed")
    dim1, dim2 = check_int(dim1, "dim1", "diag_embed"), check_int(dim2, "dim2", "diag_embed")
    rank = len(input.shape) + 1
    for arg, d in (("dim1", dim1), ("dim2", dim2)):
        if not -rank <= d < rank:
            raise ValueError(f"diag_embed: {arg} ({d}) must be in [{-rank}, {rank}) for an "
                             f"input of rank {rank - 1}")
    if dim1 % rank == dim2 % rank:
        raise ValueError(f"diag_embed: dim1 ({dim1}) and dim2 ({dim2}) must name different dims")
    helper = LayerHelper("diag_embed")
    out = helper.create_variable_for_type_inference(dtype=input.dtype)
    helper.append_op(type="diag_embed", inputs={"Input": [input]}, outputs={"Out": [out]},
                     attrs={"offset": offset, "dim1": dim1, "dim2": dim2})
    return out


def _tril_triu(layer: str, input: Variable, diagonal: int, name: Optional[str]) -> Variable:
    check_variable_and_dtype(input, "input", ["bool"] + _FLOAT + _INT, layer)
    # fluid 1.8's messages and order (its test_tril_triu_op.py matches them), with what was
    # received
    if len(input.shape) < 2:
        raise ValueError(f"input shape in {layer} must be at least 2-D, but its shape is "
                         f"{list(input.shape)}")
    if not isinstance(diagonal, (int, np.integer)):
        raise TypeError(f"diagonal in {layer} must be a python Int, but received "
                        f"{diagonal!r} of type {type(diagonal).__name__}")
    helper = LayerHelper("tril_triu", name=name)
    out = helper.create_variable_for_type_inference(dtype=input.dtype)
    helper.append_op(type="tril_triu", inputs={"X": input}, outputs={"Out": out},
                     attrs={"diagonal": check_int(diagonal, "diagonal", layer),
                            "lower": layer == "tril"})
    return out


def tril(input: Variable, diagonal: int = 0, name: Optional[str] = None) -> Variable:
    """``input`` with the entries above its ``diagonal``-th diagonal (last two dims) zeroed
    (op ``tril_triu``).

    Args:
        input (Variable): a matrix (or batch of matrices).
        diagonal (int, default 0): keep entries up to this diagonal (above the main one when
            positive).
        name (str | None): name prefix of the output.
    Returns:
        Variable: the lower triangle, zeros elsewhere.
    Raises:
        TypeError: ``input`` is not a Variable of bool/float32/float64/int32/int64, or
            ``diagonal`` is not an int.
        ValueError: ``input`` has fewer than 2 dims.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [3, 3], "float32")
        ...     out = fluid.layers.tril(x)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> res, = exe.run(main, feed={"x": np.ones((3, 3), "float32")}, fetch_list=[out])
        >>> res
        array([[1., 0., 0.],
               [1., 1., 0.],
               [1., 1., 1.]], dtype=float32)
    """
    return _tril_triu("tril", input, diagonal, name)


def triu(input: Variable, diagonal: int = 0, name: Optional[str] = None) -> Variable:
    """``input`` with the entries below its ``diagonal``-th diagonal (last two dims) zeroed
    (op ``tril_triu``).

    Args:
        input (Variable): a matrix (or batch of matrices).
        diagonal (int, default 0): keep entries from this diagonal on.
        name (str | None): name prefix of the output.
    Returns:
        Variable: the upper triangle, zeros elsewhere.
    Raises:
        TypeError: ``input`` is not a Variable of bool/float32/float64/int32/int64, or
            ``diagonal`` is not an int.
        ValueError: ``input`` has fewer than 2 dims.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [3, 3], "float32")
        ...     out = fluid.layers.triu(x, diagonal=1)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> res, = exe.run(main, feed={"x": np.ones((3, 3), "float32")}, fetch_list=[out])
        >>> res
        array([[0., 1., 1.],
               [0., 0., 1.],
               [0., 0., 0.]], dtype=float32)
    """
    return _tril_triu("triu", input, diagonal, name)


def eye(num_rows: int, num_columns: Optional[int] = None,
        batch_shape: Optional[List[int]] = None, dtype: Any = "float32") -> Variable:
    """The ``[num_rows, num_columns]`` identity (op ``eye``), repeated over ``batch_shape``
    leading dims when given.

    Args:
        num_rows (int): rows.
        num_columns (int | None): columns (default ``num_rows``).
        batch_shape (list of int | None): leading batch dims.
        dtype (str, default "float32"): the dtype.
    Returns:
        Variable: the identity matrix (batch).
    Raises:
        TypeError: ``num_rows``/``num_columns`` is not a non-negative int, ``batch_shape`` is not
            a list of positive ints, or ``dtype`` is not float16/32/64, int32 or int64.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     out = fluid.layers.eye(2, num_columns=3, dtype="float32")
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> exe.run(main, fetch_list=[out])[0]
        array([[1., 0., 0.],
               [0., 1., 0.]], dtype=float32)
    """
    if not is_int(num_rows) or num_rows < 0:
        raise TypeError(f"eye: num_rows should be a non-negative int, but received "
                        f"{num_rows!r}")
    if num_columns is None:
        num_columns = num_rows
    elif not is_int(num_columns) or num_columns < 0:
        raise TypeError(f"eye: num_columns should be a non-negative int, but received "
                        f"{num_columns!r}")
    check_dtype(dtype, "dtype", ["float16"] + _FLOAT + _INT, "eye")
    helper = LayerHelper("eye")
    out = helper.create_variable_for_type_inference(dtype=dtype)
    helper.append_op(type="eye", outputs={"Out": [out]},
                     attrs={"num_rows": int(num_rows), "num_columns": int(num_columns),
                            "dtype": convert_np_dtype_to_dtype_(dtype)})
    out.stop_gradient = True
    if batch_shape is not None:
        if not isinstance(batch_shape, (list, tuple)):
            raise TypeError(f"eye: batch_shape should be a list, but received "
                            f"{type(batch_shape).__name__}")
        for v in batch_shape:
            if not is_int(v) or v <= 0:
                raise TypeError(f"eye: batch_shape should be a list of positive ints, but "
                                f"received {list(batch_shape)}")
        batch = [int(v) for v in batch_shape]
        out = reshape(out, [1] * len(batch) + [int(num_rows), int(num_columns)])
        out = expand(out, batch + [1, 1])
        out.stop_gradient = True
    return out


def meshgrid(input: Union[Sequence[Variable], Variable], *args: Variable,
             name: Optional[str] = None) -> List[Variable]:
    """k 1-D Variables of sizes N1..Nk -> k grids of shape [N1, ..., Nk] ("ij" indexing; op
    ``meshgrid``): a list as fluid 1.8 documents it, or the Variables as separate arguments
    (``meshgrid(x, y)``, the later spelling).

    Args:
        input (list | tuple | Variable): the 1-D Variables (float32/float64/int32/int64), as a
            list, or the first of them when they are passed separately.
        *args (Variable): further 1-D Variables (the ``meshgrid(x, y)`` spelling).
        name (str | None): name prefix of the outputs.
    Returns:
        list of Variable: k grids, each of shape ``[N1, ..., Nk]`` and its input's dtype; grid i
        repeats input i along dim i.
    Raises:
        TypeError: ``input`` is not a list/tuple (or a Variable followed by more), or an
            input is not a float32/float64/int32/int64 Variable.
        ValueError: an input is not 1-D (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     out = (fluid.layers.meshgrid([fluid.layers.assign(np.array([1, 2], "float32")), fluid.layers.assign(np.array([3, 4, 5], "float32"))]))[0]
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> exe.run(main, fetch_list=[out])[0]
        array([[1., 1., 1.],
               [2., 2., 2.]], dtype=float32)
    """
    # fluid 1.8 takes a list; the separate-argument spelling needs at least two Variables
    check_type(input, "input", (list, tuple, Variable) if args else (list, tuple), "meshgrid")
    xs = [input] if isinstance(input, Variable) else list(input)
    xs += list(args)
    for i, x in enumerate(xs):
        check_variable_and_dtype(x, f"input[{i}]", _FLOAT + _INT, "meshgrid")
    helper = LayerHelper("meshgrid", name=name)
    outs = [helper.create_variable_for_type_inference(dtype=x.dtype) for x in xs]
    helper.append_op(type="meshgrid", inputs={"X": xs}, outputs={"Out": outs})
    return outs


def full(shape: Any, fill_value: Any, out: Optional[Variable] = None, dtype: Any = None,
         device: Optional[str] = None, stop_gradient: bool = True,
         name: Optional[str] = None) -> Variable:
    """A tensor of ``shape`` filled with ``fill_value`` (dtype float32 when None) (op
    ``fill_constant``; ``shape`` and ``fill_value`` as ``fill_constant`` accepts them).

    Args:
        shape (list | tuple | Variable): the shape.
        fill_value (number | Variable): the value.
        out (Variable | None): an existing variable to write.
        dtype (str | None): the dtype (default float32).
        device (str | None): accepted for the 2.0 signature.
        stop_gradient (bool, default True): the output's ``stop_gradient``.
        name (str | None): name prefix of the output.
    Returns:
        Variable: the filled tensor.
    Raises:
        TypeError: ``shape``, ``fill_value`` or ``dtype`` is not accepted by ``fill_constant``
            (see there), or ``out`` does not have ``dtype``.
        ValueError: a Variable ``fill_value`` holds more than one element, or a dim of ``shape``
            is negative (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     out = fluid.layers.full(shape=[2], fill_value=7.5, dtype="float32")
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> exe.run(main, fetch_list=[out])[0]
        array([7.5, 7.5], dtype=float32)
    """
    dtype = "float32" if dtype is None else dtype
    out = fill_constant(shape, dtype, fill_value, out=out)
    out.stop_gradient = stop_gradient
    return out


def full_like(input: Variable, fill_value: Any, out: Optional[Variable] = None,
              dtype: Any = None, device: Optional[str] = None, stop_gradient: bool = True,
              name: Optional[str] = None) -> Variable:
    """A tensor shaped like ``input`` filled with ``fill_value`` (dtype: input's unless given)
    (op ``fill_any_like``).

    Args:
        input (Variable): the shape (and default dtype) to copy.
        fill_value (number | Variable): the value.
        out (Variable | None): an existing variable to write.
        dtype (str | None): the dtype (default ``input``'s).
        device (str | None): accepted for the 2.0 signature.
        stop_gradient (bool, default True): the output's ``stop_gradient``.
        name (str | None): name prefix of the output.
    Returns:
        Variable: the filled tensor.
    Raises:
        TypeError: ``input`` is not a Variable of bool/float16/32/64/int32/int64, ``fill_value``
            is not a number or bool, ``dtype`` is not one of those dtypes, or ``out`` is not a
            Variable of ``dtype``.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     out = fluid.layers.full_like(fluid.layers.zeros(shape=[2], dtype="float32"), 3.0)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> exe.run(main, fetch_list=[out])[0]
        array([3., 3.], dtype=float32)
    """
    check_variable_and_dtype(input, "input", ["bool", "float16"] + _FLOAT + _INT, "full_like")
    check_type(fill_value, "fill_value", (bool, int, float, np.number), "full_like")
    if dtype is None:
        dtype = input.dtype
    else:
        check_dtype(dtype, "dtype", ["bool", "float16"] + _FLOAT + _INT, "full_like")
    helper = LayerHelper("full_like", name=name)
    out = _output(helper, out, dtype, "full_like")
    helper.append_op(type="fill_any_like", inputs={"X": [input]}, outputs={"Out": [out]},
                     attrs={"value": float(fill_value),
                            "dtype": int(convert_np_dtype_to_dtype_(dtype))})
    out.stop_gradient = stop_gradient
    return out


# -- random -------------------------------------------------------------------------------------
def randint(low: int, high: Optional[int] = None, shape: Any = None,
            out: Optional[Variable] = None, dtype: Any = None, device: Optional[str] = None,
            stop_gradient: bool = False, seed: int = 0, name: Optional[str] = None) -> Variable:
    """Uniform random integers in ``[low, high)`` (``[0, low)`` when ``high`` is None) of
    ``shape`` (ints and/or int Variables, or a 1-D int Variable; default [1]) (op
    ``randint``).

    Args:
        low (int): the lower bound (the upper one when ``high`` is None, with 0 as lower).
        high (int | None): the upper bound (exclusive).
        shape (list | tuple | Variable | None): the shape (default ``[1]``).
        out (Variable | None): an existing variable to write.
        dtype (str | None): int32 or int64 (default int64).
        device (str | None): accepted for the 2.0 signature.
        stop_gradient (bool, default False): the output's ``stop_gradient``.
        seed (int, default 0): a fixed seed; 0 draws from the program's random stream.
        name (str | None): name prefix of the output.
    Returns:
        Variable: random integers in ``[low, high)``.
    Raises:
        TypeError: ``low``/``high``/``seed`` is not an int, ``shape`` is not a list/tuple of ints
            (or int32/int64 Variables) or an int Variable, ``dtype`` is not int32/int64, or
            ``out`` is not a Variable of ``dtype``.
        ValueError: ``high <= low`` (with ``high`` None: ``low <= 0``).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     out = fluid.layers.randint(0, 5, shape=[10], seed=1)
        >>> res, = fluid.Executor(fluid.CPUPlace()).run(main, fetch_list=[out])
        >>> res.shape, bool(((res >= 0) & (res < 5)).all())
        ((10,), True)
    """
    low = check_int(low, "low", "randint")
    if high is None:
        low, high = 0, low
    high = check_int(high, "high", "randint")
    if high <= low:
        raise ValueError(f"randint: low ({low}) must be less than high ({high})")
    if shape is None:
        shape = [1]
    check_type(shape, "shape", (list, tuple, Variable), "randint")
    dtype = "int64" if dtype is None else dtype
    check_dtype(dtype, "dtype", _INT, "randint")
    attrs_shape, tensor, tensors = _ints_or_tensors(shape, "shape", "randint")
    inputs: dict = {}
    if tensor is not None:
        inputs["ShapeTensor"] = tensor
    elif tensors:
        inputs["ShapeTensorList"] = tensors
    helper = LayerHelper("randint", name=name)
    out = _output(helper, out, dtype, "randint")
    helper.append_op(type="randint", inputs=inputs, outputs={"Out": out},
                     attrs={"shape": attrs_shape, "low": low, "high": high,
                            "seed": check_int(seed, "seed", "randint"),
                            "dtype": convert_np_dtype_to_dtype_(dtype)})
    out.stop_gradient = stop_gradient
    return out


def randn(shape: Sequence[int], out: Optional[Variable] = None, dtype: Any = None,
          device: Optional[str] = None, stop_gradient: bool = True,
          name: Optional[str] = None) -> Variable:
    """Standard normal samples of ``shape`` (op ``gaussian_random`` with mean 0, std 1).

    Args:
        shape (list of int): the shape.
        out (Variable | None): an existing variable to write.
        dtype (str | None): the dtype (default float32).
        device (str | None): accepted for the 2.0 signature.
        stop_gradient (bool, default True): the output's ``stop_gradient``.
        name (str | None): name prefix of the output.
    Returns:
        Variable: standard normal samples.
    Raises:
        TypeError: ``shape`` is not a list/tuple of ints, ``dtype`` is not float32/float64, or
            ``out`` is not a Variable of ``dtype``.
        ValueError: a dim of ``shape`` is negative.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     out = fluid.layers.randn([3, 4])
        >>> res, = fluid.Executor(fluid.CPUPlace()).run(main, fetch_list=[out])
        >>> res.shape, res.dtype
        ((3, 4), dtype('float32'))
    """
    check_type(shape, "shape", (list, tuple), "randn")
    shape = [check_int(d, f"shape[{i}]", "randn", minimum=0) for i, d in enumerate(shape)]
    dtype = "float32" if dtype is None else dtype
    check_dtype(dtype, "dtype", _FLOAT, "randn")
    helper = LayerHelper("randn", name=name)
    out = _output(helper, out, dtype, "randn")
    helper.append_op(type="gaussian_random", outputs={"Out": out},
                     attrs={"shape": shape, "mean": 0.0, "std": 1.0, "seed": 0,
                            "dtype": convert_np_dtype_to_dtype_(dtype)})
    out.stop_gradient = stop_gradient
    return out


def randperm(n: int, out: Optional[Variable] = None, dtype: Any = "int64",
             device: Optional[str] = None, stop_gradient: bool = True,
             seed: int = 0) -> Variable:
    """A random permutation of ``0 .. n-1`` (op ``randperm``).

    Args:
        n (int): the permutation's length.
        out (Variable | None): an existing variable to write.
        dtype (str, default "int64"): the dtype.
        device (str | None): accepted for the 2.0 signature.
        stop_gradient (bool, default True): the output's ``stop_gradient``.
        seed (int, default 0): a fixed seed; 0 draws from the program's random stream.
    Returns:
        Variable: a random permutation of ``0 .. n - 1``.
    Raises:
        TypeError: ``n``/``seed`` is not an int, ``dtype`` is not float32/float64/int32/int64, or
            ``out`` is not a Variable of ``dtype``.
        ValueError: ``n < 1``.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     out = fluid.layers.randperm(5, seed=1)
        >>> res, = fluid.Executor(fluid.CPUPlace()).run(main, fetch_list=[out])
        >>> sorted(res.tolist())
        [0, 1, 2, 3, 4]
    """
    n = check_int(n, "n", "randperm", minimum=1)
    check_dtype(dtype, "dtype", _FLOAT + _INT, "randperm")
    helper = LayerHelper("randperm")
    out = _output(helper, out, dtype, "randperm")
    helper.append_op(type="randperm", outputs={"Out": out},
                     attrs={"n": n, "dtype": convert_np_dtype_to_dtype_(dtype),
                            "seed": check_int(seed, "seed", "randperm")})
    out.stop_gradient = stop_gradient
    return out


def random_crop(x: Variable, shape: Sequence[int], seed: Union[int, Variable, None] = None
                ) -> Variable:
    """Crop the trailing ``len(shape)`` dims of ``x`` to ``shape`` at a random offset per
    instance (op ``random_crop``). An int ``seed`` starts a persistable int64 seed variable
    (set by the startup program, advanced by every run); a Variable is used as that state;
    None draws from the program's random stream.

    Args:
        x (Variable): ``[..., d1, ..., dk]`` of uint8/int16/int32/int64/float32/float64.
        shape (list | tuple of int): the k trailing dims of the crop, each in ``[1, d_i]``.
        seed (int | Variable | None): an int starts a persistable int64 seed variable; an int64
            Variable is used as that state (advanced by every run); None uses the program's
            random stream. Default None.
    Returns:
        Variable: ``x.shape[:-k] + shape``, ``x``'s dtype.
    Raises:
        TypeError: ``x`` is not a Variable of a listed dtype, ``shape`` is not a list/tuple of
            ints, or a Variable ``seed`` is not int64.
        ValueError: a dim of ``shape`` is < 1 or larger than ``x``'s, ``shape`` names more dims
            than ``x`` has (shape inference), or ``seed`` is neither an int, a Variable nor None.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 1, 4, 4])
        ...     out = fluid.layers.random_crop(x, shape=[1, 2, 2], seed=1)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> exe.run(main, feed={"x": np.ones((3, 1, 4, 4), "float32")}, fetch_list=[out])[0].shape
        (3, 1, 2, 2)
    """
    check_variable_and_dtype(x, "x", ["uint8", "int16", "int32", "int64"] + _FLOAT,
                             "random_crop")
    check_type(shape, "shape", (list, tuple), "random_crop")
    shape = [check_int(d, f"shape[{i}]", "random_crop", minimum=1) for i, d in enumerate(shape)]
    helper = LayerHelper("random_crop")
    inputs: dict = {"X": x}
    outputs: dict = {}
    attrs: dict = {"shape": shape}
    if is_int(seed):
        attrs["startup_seed"] = int(seed)
        state = helper.create_global_variable(name=helper.name + ".seed", dtype="int64",
                                              shape=[1], persistable=True, stop_gradient=True)
        helper.set_variable_initializer(state, Constant(value=int(seed)))
        seed = state
    elif seed is not None and not isinstance(seed, Variable):
        raise ValueError(f"random_crop: 'seed' must be a Variable or an int, but received "
                         f"{type(seed).__name__}")
    if seed is not None:
        check_dtype(seed.dtype, "seed", ["int64"], "random_crop")
        inputs["Seed"] = seed
        outputs["SeedOut"] = seed
    out = helper.create_variable_for_type_inference(dtype=x.dtype)
    outputs["Out"] = out
    helper.append_op(type="random_crop", inputs=inputs, outputs=outputs, attrs=attrs)
    return out


def sampling_id(x: Variable, min: float = 0.0, max: float = 1.0, seed: int = 0,
                dtype: Any = "float32") -> Variable:
    """One int64 id per row of the probabilities ``x``, sampled by walking the row's
    cumulative sum with ``r ~ U[min, max)`` (op ``sampling_id``; fluid's kernel writes int64
    whatever ``dtype`` says, and so does this one).

    Args:
        x (Variable): probabilities ``[N, K]`` (float), each row summing to about 1.
        min (float): the lower end of the uniform draw. Default 0.0.
        max (float): the upper end of the uniform draw. Default 1.0.
        seed (int): the op's random seed. Default 0.
        dtype (str): kept for fluid's signature (a float or int dtype); the ids are int64.
            Default ``"float32"``.

    Returns:
        Variable: ``[N]`` int64, the sampled column of each row.

    Raises:
        TypeError: ``x`` is not a float Variable, ``min``/``max`` is not a number, ``seed`` is
            not an int or ``dtype`` is not a known dtype.
        ValueError: ``min > max``.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     probs = fluid.data("probs", [-1, 3])
        ...     ids = fluid.layers.sampling_id(probs, seed=1)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> exe.run(main, feed={"probs": np.array([[0, 1, 0], [0, 0, 1]], "float32")}, fetch_list=[ids])[0]
        array([1, 2])
    """
    check_variable_and_dtype(x, "x", _FLOAT, "sampling_id")
    lo = check_number(min, "min", "sampling_id")
    hi = check_number(max, "max", "sampling_id")
    if lo > hi:
        raise ValueError(f"sampling_id: min ({lo}) must not exceed max ({hi})")
    check_dtype(dtype, "dtype", _FLOAT + _INT, "sampling_id")
    helper = LayerHelper("sampling_id")
    out = helper.create_variable_for_type_inference(dtype="int64")
    helper.append_op(type="sampling_id", inputs={"X": x}, outputs={"Out": out},
                     attrs={"min": lo, "max": hi, "seed": check_int(seed, "seed",
                                                                    "sampling_id")})
    out.stop_gradient = True
    return out


def hash(input: Variable, hash_size: int, num_hash: int = 1,
         name: Optional[str] = None) -> Variable:
    """``num_hash`` XXH64 hashes of each row of the int ``input`` ([N, last_dim]), modulo
    ``hash_size``: shape [N, num_hash, 1] (op ``hash``; ids match fluid's).

    Args:
        input (Variable): int ids ``[N, 1]``.
        hash_size (int): the hash range.
        num_hash (int, default 1): hashes per id.
        name (str | None): name prefix of the output.
    Returns:
        Variable: ``[N, num_hash, 1]`` ids in ``[0, hash_size)`` (fluid's xxHash values).
    Raises:
        TypeError: ``input`` is not an int32/int64 Variable, or ``hash_size``/``num_hash`` is not
            an int.
        ValueError: ``hash_size`` or ``num_hash`` is < 1, or ``input`` is not 2-D
            (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     ids = fluid.data("ids", [-1, 1], "int64")
        ...     h = fluid.layers.hash(ids, hash_size=1000, num_hash=2)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> out, = exe.run(main, feed={"ids": np.array([[1], [2]], "int64")}, fetch_list=[h])
        >>> out.shape, bool(((out >= 0) & (out < 1000)).all())
        ((2, 2, 1), True)
    """
    check_variable_and_dtype(input, "input", _INT, "hash")
    hash_size = check_int(hash_size, "hash_size", "hash", minimum=1)
    num_hash = check_int(num_hash, "num_hash", "hash", minimum=1)
    helper = LayerHelper("hash", name=name)
    out = helper.create_variable_for_type_inference(dtype=input.dtype)
    helper.append_op(type="hash", inputs={"X": input}, outputs={"Out": out},
                     attrs={"num_hash": num_hash, "mod_by": hash_size})
    out.stop_gradient = True
    return out

