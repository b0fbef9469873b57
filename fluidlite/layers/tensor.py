"""Tensor layers: creation (fill_constant, zeros, ones, assign, create_parameter, ...), reshaping
(reshape, transpose, squeeze, unsqueeze, flatten), joining (concat, split, stack, sums),
indexing (slice, strided_slice, gather), expand, shape, argmax/argmin."""
from __future__ import annotations

import warnings
from typing import Any, List, Optional, Sequence, Tuple, Union

import numpy as np

from ..core import mode as _mode
from ..core import shape as S
from ..core.dtypes import VarType, convert_np_dtype_to_dtype_, to_numpy_dtype
from ..core.ir import Variable
from ..pipeline.feeder import check_dtype, check_type, check_variable_and_dtype, convert_dtype
from ..initializer import Constant
from ..ops.tensor import assign_value_attrs
from ..layer_helper import LayerHelper, check_int, check_number, is_int
from ..param_attr import ParamAttr

__all__ = ["create_tensor", "create_parameter", "create_global_var", "fill_constant", "zeros",
           "ones", "zeros_like", "ones_like", "assign", "sums", "concat", "split", "reshape",
           "transpose", "squeeze", "unsqueeze", "flatten", "stack", "slice", "strided_slice",
           "gather", "expand", "shape", "argmax", "argmin"]

_ALL = ["bool", "float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8"]
_NUM = ["float16", "float32", "float64", "int32", "int64"]   # fluid 1.8's concat, transpose
_INT = ["int32", "int64"]
_FILL = ["bool", "float16", "float32", "float64", "int32", "int64"]     # fluid 1.8's zeros


def _static_or_all(fluid18: List[str]) -> List[str]:
    """``fluid18`` (a fluid 1.8 static layer's dtype list) in a static program, every dtype
    in dygraph mode (fluid 1.8's dygraph layers checked none)."""
    return fluid18 if _mode.tracer is None else _ALL


def _int_list(value: Any, name: str, layer: str) -> List[int]:
    check_type(value, name, (list, tuple), layer)
    for v in value:
        if not is_int(v):
            raise TypeError(f"The elements of '{name}' in {layer} must be int, but received "
                            f"{type(v).__name__} ({v!r})")
    return [int(v) for v in value]


def _ints_or_tensors(value: Any, name: str, layer: str
                     ) -> Tuple[List[int], Optional[Variable], List[Variable]]:
    """(attr values, 1-D tensor, list of 1-element tensors) for args fluid lets be a list of
    ints, a list mixing ints and Variables, or one Variable. Unknown entries become -1."""
    if isinstance(value, Variable):
        check_dtype(value.dtype, name, _INT, layer)
        return [], value, []
    check_type(value, name, (list, tuple, Variable), layer)
    if not any(isinstance(v, Variable) for v in value):
        return _int_list(value, name, layer), None, []
    attrs, tensors = [], []
    for v in value:
        if isinstance(v, Variable):
            check_dtype(v.dtype, f"{name} element", _INT, layer)
            attrs.append(-1)
            tensors.append(v)
        else:
            attrs.append(int(v))
            tensors.append(fill_constant([1], "int32", int(v), force_cpu=True))
    return attrs, None, tensors


# -- creation ---------------------------------------------------------------------------------
def create_tensor(dtype: Any, name: Optional[str] = None, persistable: bool = False) -> Variable:
    """An empty Variable of ``dtype`` (filled later, e.g. by ``assign`` or ``sums(out=)``).

    Args:
        dtype (str | numpy dtype): the dtype.
        name (str | None): the variable's name.
        persistable (bool, default False): keep the value across runs.
    Returns:
        Variable: an empty variable for other layers (``assign``, ``fill_constant(out=)``) to
        write.
    Raises:
        TypeError: ``dtype`` is not a data type (the error also subclasses ValueError).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     t = fluid.layers.create_tensor(dtype="float32")
        ...     _ = fluid.layers.assign(np.array([1.5, 2.5], "float32"), output=t)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> exe.run(main, fetch_list=[t])[0]
        array([1.5, 2.5], dtype=float32)
    """
    helper = LayerHelper("create_tensor", name=name)
    return helper.create_variable(name=helper.name, dtype=convert_np_dtype_to_dtype_(dtype),
                                  persistable=persistable)


def create_parameter(shape: Sequence[int], dtype: Any, name: Optional[str] = None,
                     attr: Optional[ParamAttr] = None, is_bias: bool = False,
                     default_initializer: Any = None) -> Variable:
    """A trainable Parameter (initialized in the startup program).

    Args:
        shape (list of int): the parameter's shape.
        dtype (str | numpy dtype): its dtype.
        name (str | None): its name (default: a generated one).
        attr (ParamAttr | None): name, initializer, regularizer, learning rate, trainable.
        is_bias (bool, default False): a bias (initialized to 0 by default, else Xavier).
        default_initializer (Initializer | None): the initializer when ``attr`` names none.
    Returns:
        Variable: the Parameter (initialized when the startup program runs).
    Raises:
        TypeError: ``shape`` is not a list/tuple/ndarray of ints, ``dtype`` is not a supported
            dtype, or ``attr`` is not a ParamAttr or None.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     w = fluid.layers.create_parameter(shape=[2, 2], dtype="float32", name="w",
        ...         default_initializer=fluid.initializer.Constant(1.0))
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> fluid.global_scope().find_var("w").get_tensor().__array__()
        array([[1., 1.],
               [1., 1.]], dtype=float32)
    """
    check_type(shape, "shape", (list, tuple, np.ndarray), "create_parameter")
    for d in shape:
        check_type(d, "shape element", (int, np.integer), "create_parameter")
    check_dtype(dtype, "dtype", ["float16", "float32", "float64", "int8", "int16", "int32",
                                 "int64", "uint8"], "create_parameter")
    check_type(attr, "attr", (type(None), ParamAttr), "create_parameter")
    helper = LayerHelper("create_parameter", name=name)
    if attr is None:
        attr = ParamAttr(name=name)
    return helper.create_parameter(attr, list(shape), convert_dtype(dtype), is_bias,
                                   default_initializer)


def create_global_var(shape: Sequence[int], value: float, dtype: Any, persistable: bool = False,
                      force_cpu: bool = False, name: Optional[str] = None) -> Variable:
    """A global-block variable filled with ``value`` by a fill_constant in the startup program.

    Args:
        shape (list of int): the shape.
        value (float): the initial value (set by the startup program).
        dtype (str | numpy dtype): the dtype.
        persistable (bool, default False): keep the value across runs (e.g. a counter).
        force_cpu (bool, default False): accepted for fluid's signature.
        name (str | None): the variable's name.
    Returns:
        Variable: the global variable.
    Raises:
        TypeError: ``shape`` is not a list/tuple/ndarray of ints, ``dtype`` is not a supported
            dtype, or ``value`` is not a number.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     out = fluid.layers.create_global_var(shape=[2], value=1.5, dtype="float32", persistable=True)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> exe.run(main, fetch_list=[out])[0]
        array([1.5, 1.5], dtype=float32)
    """
    check_type(shape, "shape", (list, tuple, np.ndarray), "create_global_var")
    for d in shape:
        check_type(d, "shape element", (int, np.integer), "create_global_var")
    check_dtype(dtype, "dtype", _ALL, "create_global_var")
    if not isinstance(value, (bool, np.bool_)):      # True/False fill bool variables
        value = check_number(value, "value", "create_global_var")
    helper = LayerHelper("global_var", name=name)
    var = helper.create_global_variable(dtype=dtype, shape=list(shape), persistable=persistable,
                                        name=name, stop_gradient=True)
    helper.set_variable_initializer(var, initializer=Constant(value=value, force_cpu=force_cpu))
    return var


def _fill_value(value: Any, dtype: Any) -> Union[int, float]:
    """fill_constant's ``value`` attribute: a float, as fluid's FLOAT attribute, except for an
    integer dtype beyond 2^53, where a float would round (fluid 1.8 kept those exact in
    ``str_value``; the Paddle writer spells it again from this value)."""
    if np.dtype(to_numpy_dtype(convert_np_dtype_to_dtype_(dtype))).kind in "iu" and \
            isinstance(value, (int, np.integer)) and abs(int(value)) > 2 ** 53:
        return int(value)
    return float(value)


def fill_constant(shape: Any, dtype: Any, value: Union[int, float, Variable],
                  force_cpu: bool = False, out: Optional[Variable] = None) -> Variable:
    """``out = full(shape, value, dtype)`` (op ``fill_constant``; not differentiable). ``shape``
    is a list of ints and/or 1-element int Variables, or one 1-D int Variable; ``value`` a
    number or a 1-element Variable (op input ``ValueTensor``, read at run time).

    Args:
        shape (list | tuple | Variable): the shape (ints and/or 1-element int Variables, or an
            int Variable).
        dtype (str | numpy dtype): the output's dtype.
        value (int | float | Variable): the fill value (a ``[1]`` Variable is read at run time).
        force_cpu (bool, default False): accepted for fluid's signature.
        out (Variable | None): an existing variable to write instead of a new one.
    Returns:
        Variable: the filled tensor (``stop_gradient=True``).
    Raises:
        TypeError: ``shape`` is not a list/tuple/Variable (or holds a non-int entry, or a
            non-int32/int64 Variable), ``dtype`` is not supported, ``value`` is not a number,
            bool or Variable, or ``out`` does not have ``dtype``.
        ValueError: a Variable ``value`` holds more than one element, or a dim of ``shape`` is
            negative (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     c = fluid.layers.fill_constant(shape=[2, 2], dtype="int64", value=7)
        >>> fluid.Executor(fluid.CPUPlace()).run(main, fetch_list=[c])[0]
        array([[7, 7],
               [7, 7]])
    """
    check_type(shape, "shape", (list, tuple, Variable), "fill_constant")
    attr_shape, tensor, tensors = _ints_or_tensors(shape, "shape", "fill_constant")
    check_dtype(dtype, "dtype", _static_or_all(_FILL), "fill_constant")
    check_type(value, "value", (bool, int, float, np.number, Variable), "fill_constant")
    value_tensor = None
    if isinstance(value, Variable):
        if S.numel(value.shape) not in (1, -1):
            raise ValueError(f"fill_constant: a Variable value must hold one element, but "
                             f"'{value.name}' has shape {list(value.shape)}")
        value_tensor, value = value, 0.0
    helper = LayerHelper("fill_constant")
    if out is None:
        out = helper.create_variable_for_type_inference(dtype=dtype)
    else:
        check_variable_and_dtype(out, "out", [convert_dtype(dtype)], "fill_constant")
    inputs: dict = {} if value_tensor is None else {"ValueTensor": value_tensor}
    if tensor is not None:
        inputs["ShapeTensor"] = tensor
    elif tensors:
        inputs["ShapeTensorList"] = tensors
    helper.append_op(type="fill_constant", inputs=inputs, outputs={"Out": [out]},
                     attrs={"shape": attr_shape, "dtype": convert_np_dtype_to_dtype_(dtype),
                            "value": _fill_value(value, dtype), "force_cpu": force_cpu})
    out.stop_gradient = True
    return out


def zeros(shape: Sequence[int], dtype: Any, force_cpu: bool = False) -> Variable:
    """A tensor of ``shape`` filled with 0 in ``dtype`` (op ``fill_constant``; not differentiable).

    Args:
        shape (list|tuple): the output shape, ints >= 0 (or a 1-D int Variable of them).
        dtype (str|np.dtype): the output dtype, e.g. ``"float32"``, ``"int64"``, ``"bool"``.
        force_cpu (bool): kept for fluid's signature (everything runs on the CPU). Default
            False.

    Returns:
        Variable: a tensor of ``shape`` and ``dtype``, every element 0.

    Raises:
        TypeError: ``shape`` is not a list, tuple or Variable, or holds a non-int; ``dtype`` is
            not a known dtype.
        ValueError: a dimension of ``shape`` is negative.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     out = fluid.layers.zeros(shape=[2, 2], dtype="float32")
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> exe.run(main, fetch_list=[out])[0]
        array([[0., 0.],
               [0., 0.]], dtype=float32)
    """
    check_dtype(dtype, "dtype", _static_or_all(_FILL), "zeros")
    return fill_constant(shape, dtype, 0.0, force_cpu)


def ones(shape: Sequence[int], dtype: Any, force_cpu: bool = False) -> Variable:
    """A tensor of ``shape`` filled with 1 in ``dtype`` (op ``fill_constant``; not differentiable).

    Args:
        shape (list|tuple): the output shape, ints >= 0 (or a 1-D int Variable of them).
        dtype (str|np.dtype): the output dtype, e.g. ``"float32"``, ``"int64"``, ``"bool"``.
        force_cpu (bool): kept for fluid's signature (everything runs on the CPU). Default
            False.

    Returns:
        Variable: a tensor of ``shape`` and ``dtype``, every element 1.

    Raises:
        TypeError: ``shape`` is not a list, tuple or Variable, or holds a non-int; ``dtype`` is
            not a known dtype.
        ValueError: a dimension of ``shape`` is negative.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     out = fluid.layers.ones(shape=[2, 2], dtype="int64")
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> exe.run(main, fetch_list=[out])[0]
        array([[1, 1],
               [1, 1]])
    """
    return fill_constant(shape, dtype, 1.0, force_cpu)


def zeros_like(x: Variable, out: Optional[Variable] = None) -> Variable:
    """Zeros shaped and typed like ``x`` (op ``fill_zeros_like``).

    Args:
        x (Variable): the shape and dtype to copy.
        out (Variable | None): an existing variable to write.
    Returns:
        Variable: zeros like ``x``.
    Raises:
        TypeError: ``x`` is not a Variable (of bool, float16/32/64, int8/16/32/64 or uint8), or
            ``out`` is not a Variable.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     out = fluid.layers.zeros_like(fluid.layers.ones(shape=[2], dtype="float32"))
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> exe.run(main, fetch_list=[out])[0]
        array([0., 0.], dtype=float32)
    """
    check_variable_and_dtype(x, "x", _ALL, "zeros_like")
    helper = LayerHelper("zeros_like")
    if out is None:
        out = helper.create_variable_for_type_inference(dtype=x.dtype)
    helper.append_op(type="fill_zeros_like", inputs={"X": [x]}, outputs={"Out": [out]})
    out.stop_gradient = True
    return out


def ones_like(x: Variable, out: Optional[Variable] = None) -> Variable:
    """Ones shaped and typed like ``x`` (op ``fill_any_like``).

    Args:
        x (Variable): the shape and dtype to copy.
        out (Variable | None): an existing variable to write.
    Returns:
        Variable: ones like ``x``.
    Raises:
        TypeError: ``x`` is not a Variable (of bool, float16/32/64, int8/16/32/64 or uint8), or
            ``out`` is not a Variable.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     out = fluid.layers.ones_like(fluid.layers.zeros(shape=[2], dtype="float32"))
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> exe.run(main, fetch_list=[out])[0]
        array([1., 1.], dtype=float32)
    """
    check_variable_and_dtype(x, "x", _ALL, "ones_like")
    helper = LayerHelper("ones_like")
    if out is None:
        out = helper.create_variable_for_type_inference(dtype=x.dtype)
    helper.append_op(type="fill_any_like", inputs={"X": [x]}, outputs={"Out": [out]},
                     attrs={"value": 1.0})
    out.stop_gradient = True
    return out


def assign(input: Any, output: Optional[Variable] = None) -> Variable:
    """Copy a Variable (op ``assign``) or a numpy array / list / scalar (op ``assign_value``)
    into ``output`` (a new Variable when None).

    Args:
        input (Variable | numpy.ndarray | list | number): what to copy.
        output (Variable | None): an existing variable to write instead of a new one.
    Returns:
        Variable: the copy.
    Raises:
        TypeError: ``input`` is not a Variable, numpy array/scalar, list, tuple or number, is
            a ragged nested list, its dtype is unsupported, or ``output`` is not a Variable.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     c = fluid.layers.assign(np.array([[1, 2], [3, 4]], "int32"))
        >>> fluid.Executor(fluid.CPUPlace()).run(main, fetch_list=[c])[0]
        array([[1, 2],
               [3, 4]], dtype=int32)
    """
    helper = LayerHelper("assign")
    check_type(input, "input", (Variable, np.ndarray, np.generic, list, tuple, float, int, bool),
               "assign")
    if output is not None:
        check_type(output, "output", Variable, "assign")
    if isinstance(input, Variable):
        check_dtype(input.dtype, "input", _static_or_all(_FILL), "assign")
        if output is None:
            output = helper.create_variable_for_type_inference(dtype=input.dtype)
        helper.append_op(type="assign", inputs={"X": [input]}, outputs={"Out": [output]})
        return output
    try:
        with warnings.catch_warnings():     # NumPy 1.x warns before making an object array
            warnings.simplefilter("ignore", getattr(np, "VisibleDeprecationWarning", Warning))
            arr = np.asarray(input)
    except ValueError:          # NumPy >= 1.24 refuses ragged nested lists itself
        arr = np.empty(0, dtype=object)
    if arr.dtype == np.float64 and not isinstance(input, np.ndarray):
        arr = arr.astype(np.float32)       # Python floats: fluid's default float32
    if arr.dtype == object:
        raise TypeError("assign: a ragged nested list cannot be converted to a tensor; pass a "
                        "numpy array")
    check_dtype(arr.dtype, "input", _ALL, "assign")
    if output is None:
        output = helper.create_variable_for_type_inference(dtype=arr.dtype)
    helper.append_op(type="assign_value", outputs={"Out": [output]},
                     attrs=assign_value_attrs(arr))
    return output


def sums(input: Union[Variable, Sequence[Variable]], out: Optional[Variable] = None) -> Variable:
    """Elementwise sum of a list of Variables (op ``sum``).

    Args:
        input (Variable | list of Variable): same-shaped tensors.
        out (Variable | None): an existing variable to write.
    Returns:
        Variable: their elementwise sum.
    Raises:
        TypeError: ``input`` is not a Variable or a list/tuple of Variables, or an entry is not
            float16/32/64, int32 or int64, or ``out`` is not a Variable.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [2, 3], "float32")
        ...     y = fluid.data("y", [2, 3], "float32")
        ...     out = fluid.layers.sums([x, y])
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.arange(6, dtype="float32").reshape(2, 3), "y": np.full((2, 3), 2.0, "float32")}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res.round(4)
        array([[2., 3., 4.],
               [5., 6., 7.]], dtype=float32)
    """
    helper = LayerHelper("sum")
    xs = list(input) if isinstance(input, (list, tuple)) else [input]
    check_type(input, "input", (Variable, list, tuple), "sums")
    for i, x in enumerate(xs):
        check_variable_and_dtype(x, f"input[{i}]", _NUM, "sums")
    if out is None:
        out = helper.create_variable_for_type_inference(dtype=xs[0].dtype)
    helper.append_op(type="sum", inputs={"X": xs}, outputs={"Out": out},
                     attrs={"use_mkldnn": False})
    return out


# -- joining / splitting ------------------------------------------------------------------------
def concat(input: Sequence[Variable], axis: Union[int, Variable] = 0,
           name: Optional[str] = None) -> Variable:
    """Concatenate along ``axis`` (an int, or an int Variable of shape [1] read at run time);
    all other dims must match.

    Args:
        input (list of Variable): tensors whose dims match except on ``axis``.
        axis (int | Variable, default 0): the axis (negative counts from the end).
        name (str | None): name prefix of the output.
    Returns:
        Variable: the concatenation.
    Raises:
        TypeError: ``input`` is not a Variable or list/tuple of Variables, or ``axis`` is not an
            int (or an int32/int64 Variable).
        ValueError: ``axis`` is out of range, or the shapes differ outside ``axis``
            (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     a = fluid.data("a", [-1, 2])
        ...     b = fluid.data("b", [-1, 3])
        ...     c = fluid.layers.concat([a, b], axis=1)
        >>> c.shape
        (-1, 5)
    """
    check_type(input, "input", (list, tuple, Variable), "concat")
    if isinstance(input, Variable) and input.type == VarType.LOD_TENSOR_ARRAY:
        # fluid 1.8: the entries of a tensor array, joined by tensor_array_to_tensor
        helper = LayerHelper("concat", name=name)
        out = helper.create_variable_for_type_inference(dtype=input.dtype)
        index = helper.create_variable_for_type_inference(dtype="int32")
        helper.append_op(type="tensor_array_to_tensor", inputs={"X": [input]},
                         outputs={"Out": [out], "OutIndex": [index]},
                         attrs={"axis": check_int(axis, "axis", "concat"), "use_stack": False})
        return out
    xs = [input] if isinstance(input, Variable) else list(input)
    for i, x in enumerate(xs):
        check_variable_and_dtype(x, f"input[{i}]", _static_or_all(_NUM), "concat")
    inputs: dict = {"X": xs}
    if isinstance(axis, Variable):        # fluid 1.8: the AxisTensor input
        check_dtype(axis.dtype, "axis", _INT, "concat")
        axis.stop_gradient = True
        inputs["AxisTensor"] = axis
        attrs: dict = {}
    else:
        attrs = {"axis": check_int(axis, "axis", "concat")}
    helper = LayerHelper("concat", name=name)
    out = helper.create_variable_for_type_inference(dtype=xs[0].dtype)
    helper.append_op(type="concat", inputs=inputs, outputs={"Out": [out]}, attrs=attrs)
    return out


def split(input: Variable, num_or_sections: Union[int, Sequence[Any]],
          dim: Union[int, Variable] = -1, name: Optional[str] = None) -> List[Variable]:
    """Split along ``dim`` into ``num_or_sections`` equal pieces, or pieces of the listed sizes
    (one may be -1; entries may be int Variables of shape [1], read at run time). ``dim`` may
    be an int Variable of shape [1]. Returns a list.

    Args:
        input (Variable): the input.
        num_or_sections (int | list): the number of equal pieces, or the piece sizes (one may
            be -1: the rest).
        dim (int | Variable, default -1): the axis to split.
        name (str | None): name prefix of the outputs.
    Returns:
        list of Variable: the pieces, in order.
    Raises:
        TypeError: ``input`` is not a Variable, ``num_or_sections`` is not an int, list or tuple
            (of ints / int Variables), or ``dim`` is not an int (or int Variable).
        ValueError: ``dim`` is out of range, ``num_or_sections < 1``, or the dim's size is not
            divisible by ``num`` / does not match the sum of the sections (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 6])
        ...     a, b = fluid.layers.split(x, num_or_sections=2, dim=1)
        ...     p, q, r = fluid.layers.split(x, num_or_sections=[1, 2, -1], dim=1)
        >>> a.shape, p.shape, q.shape, r.shape
        ((-1, 3), (-1, 1), (-1, 2), (-1, 3))
    """
    check_variable_and_dtype(input, "input", _ALL, "split")
    if not is_int(num_or_sections):
        check_type(num_or_sections, "num_or_sections", (int, list, tuple), "split")
    helper = LayerHelper("split", name=name)
    rank = len(input.shape)
    inputs: dict = {"X": input}
    if isinstance(dim, Variable):          # fluid 1.8: the AxisTensor input
        check_dtype(dim.dtype, "dim", _INT, "split")
        dim.stop_gradient = True
        inputs["AxisTensor"] = dim
        attrs: dict = {"axis": 0}
    else:
        dim = check_int(dim, "dim", "split")
        if not -rank <= dim < rank:
            raise ValueError(f"split: dim {dim} is out of range for input of shape "
                             f"{list(input.shape)}")
        # fluid 1.8 writes the axis normalized (rank + dim for dim < 0); Paddle 2.6's split
        # kernel refuses a negative axis in a saved program
        attrs = {"axis": dim + rank if dim < 0 else dim}
    if is_int(num_or_sections):
        num = int(num_or_sections)
        if num < 1:
            raise ValueError(f"split: num_or_sections must be positive, got {num}")
        attrs["num"] = num
    elif any(isinstance(s, Variable) for s in num_or_sections):
        sections, _, tensors = _ints_or_tensors(list(num_or_sections), "num_or_sections",
                                                "split")
        num, attrs["sections"] = len(sections), sections
        inputs["SectionsTensorList"] = tensors
    else:
        sections = _int_list(num_or_sections, "num_or_sections", "split")
        num, attrs["sections"] = len(sections), sections
    outs = [helper.create_variable_for_type_inference(dtype=input.dtype) for _ in range(num)]
    helper.append_op(type="split", inputs=inputs, outputs={"Out": outs}, attrs=attrs)
    return outs


def stack(x: Union[Variable, Sequence[Variable]], axis: int = 0) -> Variable:
    """Stack same-shaped Variables along a new ``axis`` (op ``stack``, output slot Y).

    Args:
        x (Variable | list of Variable): same-shaped tensors.
        axis (int, default 0): the position of the new axis.
    Returns:
        Variable: the stacked tensor, one more dim.
    Raises:
        TypeError: ``x`` is not a Variable or a list/tuple of Variables, or ``axis`` is not an int.
        ValueError: the inputs' shapes differ, or ``axis`` is outside ``[-(rank+1), rank]``
            (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     a = fluid.data("a", [-1, 3])
        ...     b = fluid.data("b", [-1, 3])
        ...     s = fluid.layers.stack([a, b], axis=1)
        >>> s.shape
        (-1, 2, 3)
    """
    xs = [x] if isinstance(x, Variable) else list(x) if isinstance(x, (list, tuple)) else None
    if xs is None:
        check_type(x, "x", (Variable, list, tuple), "stack")
    for i, v in enumerate(xs):
        check_variable_and_dtype(v, f"x[{i}]", _ALL, "stack")
    axis = check_int(axis, "axis", "stack")
    helper = LayerHelper("stack")
    out = helper.create_variable_for_type_inference(dtype=xs[0].dtype)
    helper.append_op(type="stack", inputs={"X": xs}, outputs={"Y": out}, attrs={"axis": axis})
    return out


# -- reshaping ------------------------------------------------------------------------------
def _with_xshape(op_type: str, helper: LayerHelper, x: Variable, inputs: dict, attrs: dict
                 ) -> Variable:
    out = helper.create_variable_for_type_inference(dtype=x.dtype)
    x_shape = helper.create_variable_for_type_inference(dtype=x.dtype)
    helper.append_op(type=op_type, inputs=inputs, outputs={"Out": out, "XShape": x_shape},
                     attrs=attrs)
    return out


def reshape(x: Variable, shape: Any, actual_shape: Optional[Variable] = None, act: Any = None,
            inplace: bool = False, name: Optional[str] = None) -> Variable:
    """Reshape (op ``reshape2``): 0 copies the input dim, one -1 is inferred. ``shape`` may be
    a list (ints and/or 1-element int Variables) or an int Variable; ``actual_shape`` (a
    Variable) overrides it at run time. ``inplace`` only saves memory in fluid and is ignored
    (results are identical).

    Args:
        x (Variable): the input.
        shape (list | tuple | Variable): the new shape; 0 copies the input's dim, one -1 is
            inferred.
        actual_shape (Variable | None): an int tensor overriding ``shape`` at run time.
        act (str | None): activation applied to the result.
        inplace (bool, default False): accepted (results are identical).
        name (str | None): name prefix of the output.
    Returns:
        Variable: the reshaped tensor (same data and dtype).
    Raises:
        TypeError: ``x`` is not a Variable, ``shape`` is not a list/tuple/Variable of ints (or
            int32/int64 Variables), or ``actual_shape`` is not an int Variable or None.
        ValueError: ``shape`` has more than one -1, or its element count differs from ``x``'s
            (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 2, 3])
        ...     y = fluid.layers.reshape(x, shape=[0, -1])     # 0 copies the batch dim
        >>> y.shape
        (-1, 6)
    """
    check_variable_and_dtype(x, "x", _ALL, "reshape")   # bool too: the while conversion
    check_type(actual_shape, "actual_shape", (Variable, type(None)), "reshape")
    helper = LayerHelper("reshape2", act=act, name=name)
    attrs, tensor, tensors = _ints_or_tensors(shape, "shape", "reshape")
    inputs: dict = {"X": x}
    if tensor is not None:
        inputs["Shape"] = tensor
    elif tensors:
        inputs["ShapeTensor"] = tensors
    if actual_shape is not None:
        check_dtype(actual_shape.dtype, "actual_shape", _INT, "reshape")
        inputs["Shape"] = actual_shape
    out = _with_xshape("reshape2", helper, x, inputs, {"shape": attrs})
    return helper.append_activation(out)


def transpose(x: Variable, perm: Sequence[int], name: Optional[str] = None) -> Variable:
    """Permute dims (op ``transpose2``).

    Args:
        x (Variable): the input.
        perm (list of int): the new order of the dims.
        name (str | None): name prefix of the output.
    Returns:
        Variable: ``x`` with its dims permuted.
    Raises:
        TypeError: ``x`` is not a Variable, or ``perm`` is not a list/tuple of ints.
        ValueError: ``perm`` is not a permutation of ``0..rank-1`` (wrong length or repeats).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 2, 3])
        ...     y = fluid.layers.transpose(x, perm=[0, 2, 1])
        >>> y.shape
        (-1, 3, 2)
    """
    check_variable_and_dtype(x, "x", _static_or_all(_NUM), "transpose")
    perm = _int_list(perm, "perm", "transpose")
    if len(perm) != len(x.shape):
        raise ValueError(f"transpose: perm {perm} must have one entry per dim of x (shape "
                         f"{list(x.shape)}); expected a permutation of 0..{len(x.shape) - 1}")
    helper = LayerHelper("transpose", name=name)
    return _with_xshape("transpose2", helper, x, {"X": x}, {"axis": perm})


def squeeze(input: Variable, axes: Sequence[int], name: Optional[str] = None) -> Variable:
    """Remove the listed size-1 dims (op ``squeeze2``).

    Args:
        input (Variable): the input.
        axes (list of int): the size-1 dims to remove.
        name (str | None): name prefix of the output.
    Returns:
        Variable: the squeezed tensor.
    Raises:
        TypeError: ``input`` is not a Variable, or ``axes`` is not a list/tuple of ints.
        ValueError: an entry of ``axes`` is out of range (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 1, 3, 1])
        ...     y = fluid.layers.squeeze(x, axes=[1, 3])
        >>> y.shape
        (-1, 3)
    """
    check_variable_and_dtype(input, "input", _ALL, "squeeze")
    axes = _int_list(axes, "axes", "squeeze")
    helper = LayerHelper("squeeze", name=name)
    return _with_xshape("squeeze2", helper, input, {"X": input}, {"axes": axes})


def unsqueeze(input: Variable, axes: Union[int, Sequence[int], Variable],
              name: Optional[str] = None) -> Variable:
    """Insert size-1 dims at ``axes`` (op ``unsqueeze2``).

    Args:
        input (Variable): the input.
        axes (int | list of int | Variable): where the new size-1 dims go (positions in the
            output).
        name (str | None): name prefix of the output.
    Returns:
        Variable: the tensor with the new dims.
    Raises:
        TypeError: ``input`` is not a Variable, or ``axes`` is not an int, list/tuple or int
            Variable.
        ValueError: an entry of ``axes`` is out of range for the output rank (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 3])
        ...     y = fluid.layers.unsqueeze(x, axes=[1])
        >>> y.shape
        (-1, 1, 3)
    """
    check_variable_and_dtype(input, "input", _ALL, "unsqueeze")
    if is_int(axes):
        axes = [int(axes)]
    attrs, tensor, tensors = _ints_or_tensors(axes, "axes", "unsqueeze")
    inputs: dict = {"X": input}
    if tensor is not None:
        inputs["AxesTensor"] = tensor
    elif tensors:
        inputs["AxesTensorList"] = tensors
    helper = LayerHelper("unsqueeze", name=name)
    return _with_xshape("unsqueeze2", helper, input, inputs,
                        {"axes": attrs if tensor is None and not tensors else []})


def flatten(x: Variable, axis: int = 1, name: Optional[str] = None) -> Variable:
    """Flatten to 2-D ``[prod(shape[:axis]), prod(shape[axis:])]`` (op ``flatten2``).

    Args:
        x (Variable): the input.
        axis (int, default 1): the dims before it form the rows, the rest the columns.
        name (str | None): name prefix of the output.
    Returns:
        Variable: 2-D ``[prod(shape[:axis]), prod(shape[axis:])]``.
    Raises:
        TypeError: ``x`` is not a Variable.
        ValueError: ``axis`` is not an int in ``[0, rank(x)]``.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 2, 3, 4], "float32")
        ...     out = fluid.layers.flatten(x, axis=2)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> res, = exe.run(main, feed={"x": np.ones((5, 2, 3, 4), "float32")}, fetch_list=[out])
        >>> res.shape
        (10, 12)
    """
    check_variable_and_dtype(x, "x", _static_or_all(
        ["float32", "float64", "int8", "int32", "int64"]), "flatten")    # fluid 1.8's list
    if not is_int(axis) or not 0 <= axis <= len(x.shape):
        raise ValueError(f"flatten: the axis should be a int, and in range [0, rank(x)] = "
                         f"[0, {len(x.shape)}], but received {axis!r}")
    helper = LayerHelper("flatten", name=name)
    return _with_xshape("flatten2", helper, x, {"X": x}, {"axis": int(axis)})


# -- indexing -------------------------------------------------------------------------------
def _slice_inputs(layer: str, inputs: dict, attrs: dict, key: str, value: Any, slot: str) -> None:
    vals, tensor, tensors = _ints_or_tensors(value, key, layer)
    if tensor is not None:
        inputs[slot + "Tensor"] = tensor
        attrs[key] = []
    elif tensors:
        inputs[slot + "TensorList"] = tensors
        attrs[key] = vals
    else:
        attrs[key] = vals


def slice(input: Variable, axes: Sequence[int], starts: Any, ends: Any) -> Variable:
    """``input[starts:ends]`` along ``axes`` with fluid clamping (op ``slice``). ``starts`` and
    ``ends`` may hold ints and/or int Variables, or be one int Variable.

    Args:
        input (Variable): the input.
        axes (list of int): the axes sliced.
        starts (list | Variable): start per axis (negative counts from the end).
        ends (list | Variable): end per axis (exclusive; clipped to the dim).
    Returns:
        Variable: the slice.
    Raises:
        TypeError: ``input`` is not a Variable, ``axes`` is not a list/tuple of ints, or
            ``starts``/``ends`` are not ints or int32/int64 Variables.
        ValueError: ``axes``, ``starts`` and ``ends`` differ in length, or an axis is out of
            range (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [2, 3], "float32")
        ...     out = fluid.layers.slice(x, axes=[1], starts=[1], ends=[3])
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.arange(6, dtype="float32").reshape(2, 3)}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res
        array([[1., 2.],
               [4., 5.]], dtype=float32)
    """
    return _slice_op("slice", input, axes, starts=starts, ends=ends)


def strided_slice(input: Variable, axes: Sequence[int], starts: Any, ends: Any,
                  strides: Any) -> Variable:
    """``input[starts:ends:strides]`` along ``axes`` (op ``strided_slice``).

    Args:
        input (Variable): the input.
        axes (list of int): the axes sliced.
        starts (list | Variable): start per axis.
        ends (list | Variable): end per axis (exclusive).
        strides (list | Variable): step per axis (negative steps go backwards).
    Returns:
        Variable: the slice.
    Raises:
        TypeError: ``input`` is not a Variable, ``axes`` is not a list/tuple of ints, or
            ``starts``/``ends``/``strides`` are not ints or int32/int64 Variables.
        ValueError: the lists differ in length, an axis is out of range, or a stride is 0
            (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [2, 3], "float32")
        ...     out = fluid.layers.strided_slice(x, axes=[1], starts=[0], ends=[3], strides=[2])
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.arange(6, dtype="float32").reshape(2, 3)}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res
        array([[0., 2.],
               [3., 5.]], dtype=float32)
    """
    return _slice_op("strided_slice", input, axes, starts=starts, ends=ends, strides=strides)


def _slice_op(op_type: str, input: Variable, axes: Sequence[int], **bounds: Any) -> Variable:
    """The ``op_type`` op (slice / strided_slice) over ``axes``; each of ``bounds`` (``starts``,
    ``ends``, ``strides``, in that order) becomes its attr or its ``Starts``/``Ends``/``Strides``
    tensor input(s), as ``_slice_inputs`` decides."""
    check_variable_and_dtype(input, "input", _ALL, op_type)
    axes = _int_list(axes, "axes", op_type)
    helper = LayerHelper(op_type)
    inputs: dict = {"Input": input}
    attrs: dict = {"axes": axes}
    for key, value in bounds.items():
        _slice_inputs(op_type, inputs, attrs, key, value, key.capitalize())
    attrs["infer_flags"] = [1] * len(axes)
    out = helper.create_variable_for_type_inference(dtype=input.dtype)
    helper.append_op(type=op_type, inputs=inputs, outputs={"Out": out}, attrs=attrs)
    return out


def gather(input: Variable, index: Variable, overwrite: bool = True) -> Variable:
    """Rows of ``input`` picked by ``index`` (int, 1-D or [N, 1]) (op ``gather``).

    Args:
        input (Variable): the source.
        index (Variable): 1-D int indices into ``input``'s first dim.
        overwrite (bool, default True): fluid's gradient mode for repeated indices.
    Returns:
        Variable: ``input[index]``.
    Raises:
        TypeError: ``input`` is not a Variable, ``index`` is not an int32/int64 Variable, or
            ``overwrite`` is not a bool.
        ValueError: ``index`` is not 1-D or ``[N, 1]`` (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [2, 3], "float32")
        ...     idx = fluid.data("idx", [-1], "int64")
        ...     out = fluid.layers.gather(x, idx)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.arange(6, dtype="float32").reshape(2, 3), "idx": np.array([1, 0, 1], "int64")}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res
        array([[3., 4., 5.],
               [0., 1., 2.],
               [3., 4., 5.]], dtype=float32)
    """
    check_variable_and_dtype(input, "input", _ALL, "gather")
    check_variable_and_dtype(index, "index", _INT, "gather")
    helper = LayerHelper("gather")
    out = helper.create_variable_for_type_inference(dtype=input.dtype)
    helper.append_op(type="gather", inputs={"X": input, "Index": index}, outputs={"Out": out},
                     attrs={"overwrite": overwrite})
    return out


def expand(x: Variable, expand_times: Any, name: Optional[str] = None) -> Variable:
    """Tile ``x`` ``expand_times[i]`` times along dim i (op ``expand``).

    Args:
        x (Variable): the input.
        expand_times (list | tuple | Variable): how many times to tile each dim.
        name (str | None): name prefix of the output.
    Returns:
        Variable: ``x`` tiled.
    Raises:
        TypeError: ``x`` is not a Variable, or ``expand_times`` is not a list/tuple of ints
            (or int32/int64 Variables) or an int Variable.
        ValueError: ``expand_times`` does not have one positive entry per dim of ``x``
            (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [1, 2], "float32")
        ...     out = fluid.layers.expand(x, expand_times=[2, 2])
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> res, = exe.run(main, feed={"x": np.array([[1, 2]], "float32")}, fetch_list=[out])
        >>> res
        array([[1., 2., 1., 2.],
               [1., 2., 1., 2.]], dtype=float32)
    """
    check_variable_and_dtype(x, "x", _static_or_all(["bool", "float32", "float64", "int32",
                                                     "int64"]), "expand")
    helper = LayerHelper("expand", name=name)
    times, tensor, tensors = _ints_or_tensors(expand_times, "expand_times", "expand")
    inputs: dict = {"X": x}
    if tensor is not None:
        inputs["ExpandTimes"] = tensor
    elif tensors:
        inputs["expand_times_tensor"] = tensors
    out = helper.create_variable_for_type_inference(dtype=x.dtype)
    helper.append_op(type="expand", inputs=inputs, outputs={"Out": out},
                     attrs={"expand_times": times if tensor is None and not tensors else []})
    return out


def shape(input: Variable) -> Variable:
    """The int32 shape of ``input`` at run time (op ``shape``).

    Args:
        input (Variable): the tensor.
    Returns:
        Variable: int32 ``[rank]``, its run-time shape.
    Raises:
        TypeError: ``input`` is not a Variable.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 3], "float32")
        ...     out = fluid.layers.shape(x)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> res, = exe.run(main, feed={"x": np.ones((4, 3), "float32")}, fetch_list=[out])
        >>> res
        array([4, 3], dtype=int32)
    """
    check_variable_and_dtype(input, "input", _ALL, "shape")
    helper = LayerHelper("shape")
    out = helper.create_variable_for_type_inference(dtype="int32")
    helper.append_op(type="shape", inputs={"Input": input}, outputs={"Out": out})
    out.stop_gradient = True
    return out


def _arg(op_type: str, layer: str, x: Variable, axis: int) -> Variable:
    check_variable_and_dtype(x, "x", ["float16", "float32", "float64", "int8", "int16",
                                      "int32", "int64", "uint8"], layer)   # 1.8 lists int8
    axis = check_int(axis, "axis", layer)
    helper = LayerHelper(op_type)
    out = helper.create_variable_for_type_inference("int64")
    helper.append_op(type=op_type, inputs={"X": x}, outputs={"Out": [out]},
                     attrs={"axis": axis})
    out.stop_gradient = True
    return out


def argmax(x: Variable, axis: int = 0) -> Variable:
    """int64 index of the largest entry along ``axis`` (the axis is removed).

    Args:
        x (Variable): the input.
        axis (int, default 0): the axis searched (removed from the output).
    Returns:
        Variable: int64 indices.

    Raises:
        TypeError: ``x`` is not a Variable, or ``axis`` is not an int.
        ValueError: ``axis`` is out of range for ``x``'s rank.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 3])
        ...     i = fluid.layers.argmax(x, axis=1)
        >>> fluid.Executor(fluid.CPUPlace()).run(
        ...     main, feed={"x": np.array([[1, 5, 2], [7, 0, 1]], "float32")}, fetch_list=[i])[0]
        array([1, 0])
    """
    return _arg("arg_max", "argmax", x, axis)


def argmin(x: Variable, axis: int = 0) -> Variable:
    """int64 index of the smallest entry along ``axis`` (the axis is removed).

    Args:
        x (Variable): the input.
        axis (int, default 0): the axis searched (removed from the output).
    Returns:
        Variable: int64 indices.

    Raises:
        TypeError: ``x`` is not a Variable, or ``axis`` is not an int.
        ValueError: ``axis`` is out of range for ``x``'s rank.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [2, 3], "float32")
        ...     out = fluid.layers.argmin(x, axis=1)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.arange(6, dtype="float32").reshape(2, 3)}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res
        array([0, 0])
    """
    return _arg("arg_min", "argmin", x, axis)
