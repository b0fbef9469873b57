"""Tensor layers: creation (fill_constant, zeros, ones, assign, create_parameter, ...), reshaping
(reshape, transpose, squeeze, unsqueeze, flatten), joining (concat, split, stack, sums),
indexing (slice, strided_slice, gather), expand, shape, argmax/argmin."""
from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple, Union

import numpy as np

from ..core import shape as S
from ..core.dtypes import convert_np_dtype_to_dtype_
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
_NUM = ["float16", "float32", "float64", "int32", "int64"]
_INT = ["int32", "int64"]


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
    """An empty Variable of ``dtype`` (filled later, e.g. by ``assign`` or ``sums(out=)``)."""
    helper = LayerHelper("create_tensor", name=name)
    return helper.create_variable(name=helper.name, dtype=convert_np_dtype_to_dtype_(dtype),
                                  persistable=persistable)


def create_parameter(shape: Sequence[int], dtype: Any, name: Optional[str] = None,
                     attr: Optional[ParamAttr] = None, is_bias: bool = False,
                     default_initializer: Any = None) -> Variable:
    """A trainable Parameter (initialized in the startup program)."""
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
    """A global-block variable filled with ``value`` by a fill_constant in the startup program."""
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


def fill_constant(shape: Any, dtype: Any, value: Union[int, float, Variable],
                  force_cpu: bool = False, out: Optional[Variable] = None) -> Variable:
    """``out = full(shape, value, dtype)`` (op ``fill_constant``; not differentiable). ``shape``
    is a list of ints and/or 1-element int Variables, or one 1-D int Variable; ``value`` a
    number or a 1-element Variable (op input ``ValueTensor``, read at run time)."""
    check_type(shape, "shape", (list, tuple, Variable), "fill_constant")
    attr_shape, tensor, tensors = _ints_or_tensors(shape, "shape", "fill_constant")
    check_dtype(dtype, "dtype", ["bool", "float16", "float32", "float64", "int32", "int64",
                                 "uint8", "int8", "int16"], "fill_constant")
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
                            "value": float(value), "force_cpu": force_cpu})
    out.stop_gradient = True
    return out


def zeros(shape: Sequence[int], dtype: Any, force_cpu: bool = False) -> Variable:
    return fill_constant(shape, dtype, 0.0, force_cpu)


def ones(shape: Sequence[int], dtype: Any, force_cpu: bool = False) -> Variable:
    return fill_constant(shape, dtype, 1.0, force_cpu)


def zeros_like(x: Variable, out: Optional[Variable] = None) -> Variable:
    """Zeros shaped and typed like ``x`` (op ``fill_zeros_like``)."""
    check_variable_and_dtype(x, "x", _ALL, "zeros_like")
    helper = LayerHelper("zeros_like")
    if out is None:
        out = helper.create_variable_for_type_inference(dtype=x.dtype)
    helper.append_op(type="fill_zeros_like", inputs={"X": [x]}, outputs={"Out": [out]})
    out.stop_gradient = True
    return out


def ones_like(x: Variable, out: Optional[Variable] = None) -> Variable:
    """Ones shaped and typed like ``x`` (op ``fill_any_like``)."""
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
    into ``output`` (a new Variable when None)."""
    helper = LayerHelper("assign")
    check_type(input, "input", (Variable, np.ndarray, np.generic, list, tuple, float, int, bool),
               "assign")
    if output is not None:
        check_type(output, "output", Variable, "assign")
    if isinstance(input, Variable):
        if output is None:
            output = helper.create_variable_for_type_inference(dtype=input.dtype)
        helper.append_op(type="assign", inputs={"X": [input]}, outputs={"Out": [output]})
        return output
    arr = np.asarray(input)
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
    """Elementwise sum of a list of Variables (op ``sum``)."""
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
    all other dims must match."""
    check_type(input, "input", (list, tuple, Variable), "concat")
    xs = [input] if isinstance(input, Variable) else list(input)
    for i, x in enumerate(xs):
        check_variable_and_dtype(x, f"input[{i}]", _ALL, "concat")
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
    be an int Variable of shape [1]. Returns a list."""
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
        attrs = {"axis": dim}
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
    """Stack same-shaped Variables along a new ``axis`` (op ``stack``, output slot Y)."""
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
    (results are identical)."""
    check_variable_and_dtype(x, "x", _ALL, "reshape")
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
    """Permute dims (op ``transpose2``)."""
    check_variable_and_dtype(x, "x", _ALL, "transpose")
    perm = _int_list(perm, "perm", "transpose")
    if len(perm) != len(x.shape):
        raise ValueError(f"transpose: perm {perm} must have one entry per dim of x (shape "
                         f"{list(x.shape)}); expected a permutation of 0..{len(x.shape) - 1}")
    helper = LayerHelper("transpose", name=name)
    return _with_xshape("transpose2", helper, x, {"X": x}, {"axis": perm})


def squeeze(input: Variable, axes: Sequence[int], name: Optional[str] = None) -> Variable:
    """Remove the listed size-1 dims (op ``squeeze2``)."""
    check_variable_and_dtype(input, "input", _ALL, "squeeze")
    axes = _int_list(axes, "axes", "squeeze")
    helper = LayerHelper("squeeze", name=name)
    return _with_xshape("squeeze2", helper, input, {"X": input}, {"axes": axes})


def unsqueeze(input: Variable, axes: Union[int, Sequence[int], Variable],
              name: Optional[str] = None) -> Variable:
    """Insert size-1 dims at ``axes`` (op ``unsqueeze2``)."""
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
    """Flatten to 2-D ``[prod(shape[:axis]), prod(shape[axis:])]`` (op ``flatten2``)."""
    check_variable_and_dtype(x, "x", _ALL, "flatten")
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
    ``ends`` may hold ints and/or int Variables, or be one int Variable."""
    return _slice_op("slice", input, axes, starts=starts, ends=ends)


def strided_slice(input: Variable, axes: Sequence[int], starts: Any, ends: Any,
                  strides: Any) -> Variable:
    """``input[starts:ends:strides]`` along ``axes`` (op ``strided_slice``)."""
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
    """Rows of ``input`` picked by ``index`` (int, 1-D or [N, 1]) (op ``gather``)."""
    check_variable_and_dtype(input, "input", _ALL, "gather")
    check_variable_and_dtype(index, "index", _INT, "gather")
    helper = LayerHelper("gather")
    out = helper.create_variable_for_type_inference(dtype=input.dtype)
    helper.append_op(type="gather", inputs={"X": input, "Index": index}, outputs={"Out": out},
                     attrs={"overwrite": overwrite})
    return out


def expand(x: Variable, expand_times: Any, name: Optional[str] = None) -> Variable:
    """Tile ``x`` ``expand_times[i]`` times along dim i (op ``expand``)."""
    check_variable_and_dtype(x, "x", _ALL, "expand")
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
    """The int32 shape of ``input`` at run time (op ``shape``)."""
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
    """int64 index of the largest entry along ``axis`` (the axis is removed)."""
    return _arg("arg_max", "argmax", x, axis)


def argmin(x: Variable, axis: int = 0) -> Variable:
    """int64 index of the smallest entry along ``axis`` (the axis is removed)."""
    return _arg("arg_min", "argmin", x, axis)
