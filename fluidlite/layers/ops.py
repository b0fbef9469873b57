"""Layers for the activation, elementwise, comparison, logical, ``cast`` and ``scale`` ops
(fluid 1.8 signatures and output names: ``relu_0.tmp_0``, ``elementwise_add_0.tmp_0``, ...)."""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Sequence, Union

import numpy as np

from ..core import shape as S
from ..core.dtypes import FLOATS, INTS, VarType, convert_dtype, convert_np_dtype_to_dtype_
from ..core.ir import Variable
from ..core.registry import get_op_def
from ..pipeline.feeder import check_variable_and_dtype
from ..layer_helper import LayerHelper, check_int, is_int, is_number
from .layer_function_generator import generate_activation_fn

_ACTIVATIONS = ["relu", "sigmoid", "tanh", "exp", "log", "sqrt", "rsqrt", "square", "abs",
                "sign", "reciprocal", "softplus", "softsign", "logsigmoid", "sin", "cos",
                "floor", "ceil", "round"]
_ELEMENTWISE = ["elementwise_add", "elementwise_sub", "elementwise_mul", "elementwise_div",
                "elementwise_max", "elementwise_min", "elementwise_pow", "elementwise_mod",
                "elementwise_floordiv"]
_COMPARE = ["less_than", "less_equal", "greater_than", "greater_equal", "equal", "not_equal"]
_LOGICAL = ["logical_and", "logical_or", "logical_xor", "logical_not"]

__all__ = (_ACTIVATIONS + ["softmax", "leaky_relu", "elu", "gelu", "pow", "relu6",
                           "hard_sigmoid", "swish"]
           + _ELEMENTWISE + _COMPARE + _LOGICAL + ["cast", "scale"])

_FLOAT_NAMES = sorted(convert_dtype(t) for t in FLOATS)
_NUMBER_NAMES = sorted(convert_dtype(t) for t in FLOATS | INTS)


def _check(x: Any, arg: str, layer: str, dtypes: Optional[Sequence[str]] = None) -> None:
    """fluid's ``check_variable_and_dtype``: a TypeError naming the layer, the argument, what
    was expected and what was received."""
    if not isinstance(x, Variable):
        raise TypeError(f"The type of '{arg}' in {layer} must be Variable, but received "
                        f"{type(x).__name__}. Create it with fluid.data / fluid.layers.* or "
                        f"fluid.layers.assign(numpy_array).")
    if dtypes is not None and x.dtype is not None and convert_dtype(x.dtype) not in dtypes:
        hint = "float32" if "float32" in dtypes else dtypes[0]
        raise TypeError(f"The data type of '{arg}' in {layer} must be one of {list(dtypes)}, but "
                        f"received {convert_dtype(x.dtype)}. Cast it first, e.g. "
                        f"fluid.layers.cast({arg}, '{hint}').")


def _act_dtypes(op_type: str) -> Sequence[str]:
    return _NUMBER_NAMES if getattr(get_op_def(op_type), "int_ok", False) else _FLOAT_NAMES


# -- activations ---------------------------------------------------------------------------------
def _activation(op_type: str) -> Callable[..., Variable]:
    fn = generate_activation_fn(op_type)
    dtypes = _act_dtypes(op_type)

    def layer(x: Variable, name: Optional[str] = None) -> Variable:
        _check(x, "x", op_type, dtypes)
        return fn(x, name=name)

    layer.__name__ = layer.__qualname__ = op_type
    layer.__doc__ = f"``{op_type}`` op: {fn.__doc__}"
    return layer


for _t in _ACTIVATIONS:
    globals()[_t] = _activation(_t)
_sign = globals()["sign"]


def sign(x: Any, name: Optional[str] = None) -> Variable:  # noqa: F811
    """Out = sign(x) elementwise; ``x`` a float Variable or a numpy array (assigned to a
    constant first, as fluid 1.8)."""
    if isinstance(x, np.ndarray):
        from .tensor import assign
        x = assign(x)
    return _sign(x, name)


def _act_with_attrs(op_type: str, x: Variable, name: Optional[str], **attrs: Any) -> Variable:
    _check(x, "x", op_type, _act_dtypes(op_type))
    return generate_activation_fn(op_type)(x, name=name, **attrs)


def _float(layer: str, arg: str, value: Any) -> float:
    if not is_number(value):
        raise TypeError(f"{layer}: '{arg}' must be a float (a Python or numpy number), but "
                        f"received {value!r} of type {type(value).__name__}")
    return float(value)


def softmax(input: Variable, use_cudnn: bool = False, name: Optional[str] = None,
            axis: int = -1) -> Variable:
    """Softmax along ``axis``: exp(x - max) / sum(exp(x - max))."""
    return _act_with_attrs("softmax", input, name, axis=check_int(axis, "axis", "softmax"),
                           use_cudnn=bool(use_cudnn))


def leaky_relu(x: Variable, alpha: float = 0.02, name: Optional[str] = None) -> Variable:
    """x if x > 0 else alpha * x."""
    return _act_with_attrs("leaky_relu", x, name, alpha=_float("leaky_relu", "alpha", alpha))


def elu(x: Variable, alpha: float = 1.0, name: Optional[str] = None) -> Variable:
    """x if x > 0 else alpha * (exp(x) - 1)."""
    return _act_with_attrs("elu", x, name, alpha=_float("elu", "alpha", alpha))


def gelu(x: Variable, approximate: bool = False) -> Variable:
    """0.5 x (1 + erf(x / sqrt 2)); ``approximate``: the tanh form."""
    return _act_with_attrs("gelu", x, None, approximate=bool(approximate))


def pow(x: Variable, factor: Union[float, Variable] = 1.0,
        name: Optional[str] = None) -> Variable:
    """x ** factor; ``factor`` a Python number or a 1-element float32 Variable (op input
    ``FactorTensor``, no gradient to it). For an elementwise tensor exponent use
    ``elementwise_pow``."""
    if not isinstance(factor, Variable):
        return _act_with_attrs("pow", x, name, factor=_float("pow", "factor", factor))
    check_variable_and_dtype(x, "x", ["float32", "float64"], "pow")
    check_variable_and_dtype(factor, "factor", ["float32"], "pow")
    if factor.shape and S.numel(factor.shape) not in (1, -1):
        raise ValueError(f"pow: factor '{factor.name}' must hold one element, but its shape is "
                         f"{list(factor.shape)}; use fluid.layers.elementwise_pow for an "
                         f"elementwise exponent")
    helper = LayerHelper("pow", name=name)
    out = helper.create_variable_for_type_inference(x.dtype) if name is None else \
        helper.create_variable(name=name, dtype=x.dtype, persistable=False)
    helper.append_op(type="pow", inputs={"X": x, "FactorTensor": factor}, outputs={"Out": out})
    return out


def relu6(x: Variable, threshold: float = 6.0, name: Optional[str] = None) -> Variable:
    """min(max(x, 0), threshold)."""
    return _act_with_attrs("relu6", x, name, threshold=_float("relu6", "threshold", threshold))


def hard_sigmoid(x: Variable, slope: float = 0.2, offset: float = 0.5,
                 name: Optional[str] = None) -> Variable:
    """clip(slope * x + offset, 0, 1)."""
    return _act_with_attrs("hard_sigmoid", x, name,
                           slope=_float("hard_sigmoid", "slope", slope),
                           offset=_float("hard_sigmoid", "offset", offset))


def swish(x: Variable, beta: float = 1.0, name: Optional[str] = None) -> Variable:
    """x * sigmoid(beta * x)."""
    return _act_with_attrs("swish", x, name, beta=_float("swish", "beta", beta))


# -- elementwise binary ops ----------------------------------------------------------------------
def _out_var(helper: LayerHelper, name: Optional[str], dtype: Any) -> Variable:
    """fluid: ``name`` names the output itself; otherwise ``<layer>_N.tmp_M``."""
    if name is None:
        return helper.create_variable_for_type_inference(dtype=dtype)
    return helper.create_variable(name=name, dtype=dtype, persistable=False)


def _elementwise(op_type: str) -> Callable[..., Variable]:
    def layer(x: Variable, y: Variable, axis: int = -1, act: Any = None,
              name: Optional[str] = None) -> Variable:
        _check(x, "x", op_type, _NUMBER_NAMES)
        _check(y, "y", op_type, _NUMBER_NAMES)
        if not is_int(axis):
            raise TypeError(f"{op_type}: axis must be an int (a Python or numpy integer), but "
                            f"received {axis!r} of type {type(axis).__name__}")
        axis = int(axis)
        helper = LayerHelper(op_type, x=x, y=y, axis=axis, act=act, name=name)
        out = _out_var(helper, name, x.dtype)
        helper.append_op(type=op_type, inputs={"X": x, "Y": y}, outputs={"Out": out},
                         attrs={"axis": axis})
        return helper.append_activation(out)

    layer.__name__ = layer.__qualname__ = op_type
    layer.__doc__ = (f"``{op_type}`` with fluid 1.x broadcasting: y (trailing 1s trimmed) lines "
                     f"up with x's dims from ``axis`` (-1: the last dims). "
                     f"{get_op_def(op_type).__doc__}")
    return layer


for _t in _ELEMENTWISE:
    globals()[_t] = _elementwise(_t)


def scale(x: Variable, scale: Union[float, Variable] = 1.0, bias: float = 0.0,
          bias_after_scale: bool = True, act: Any = None, name: Optional[str] = None) -> Variable:
    """scale * x + bias (``bias_after_scale``) or scale * (x + bias); ``scale`` may be a
    1-element Variable."""
    _check(x, "x", "scale", _NUMBER_NAMES)
    inputs: Dict[str, Any] = {"X": [x]}
    attrs: Dict[str, Any] = {"bias": _float("scale", "bias", bias),
                             "bias_after_scale": bool(bias_after_scale)}
    if isinstance(scale, Variable):
        inputs["ScaleTensor"] = [scale]
    else:
        attrs["scale"] = _float("scale", "scale", scale)
    helper = LayerHelper("scale", x=x, act=act, name=name)
    out = _out_var(helper, name, x.dtype)
    helper.append_op(type="scale", inputs=inputs, outputs={"Out": out}, attrs=attrs)
    return helper.append_activation(out)


# -- comparisons and logic ----------------------------------------------------------------------
def _compare(op_type: str, with_force_cpu: bool) -> Callable[..., Variable]:
    dtypes = _NUMBER_NAMES + (["bool"] if op_type in ("equal", "not_equal") else [])

    def build(x: Variable, y: Variable, force_cpu: Optional[bool], cond: Optional[Variable]
              ) -> Variable:
        _check(x, "x", op_type, dtypes)
        _check(y, "y", op_type, dtypes)
        if cond is not None and not isinstance(cond, Variable):
            raise TypeError(f"{op_type}: cond must be a Variable, but received "
                            f"{type(cond).__name__}")
        helper = LayerHelper(op_type)
        if cond is None:
            cond = helper.create_variable_for_type_inference(dtype="bool", stop_gradient=True)
        attrs = {} if force_cpu is None else {"force_cpu": bool(force_cpu)}
        helper.append_op(type=op_type, inputs={"X": [x], "Y": [y]}, outputs={"Out": [cond]},
                         attrs=attrs)
        return cond

    if with_force_cpu:
        def layer(x: Variable, y: Variable, force_cpu: Optional[bool] = None,
                  cond: Optional[Variable] = None) -> Variable:
            return build(x, y, force_cpu, cond)
    else:
        def layer(x: Variable, y: Variable, cond: Optional[Variable] = None) -> Variable:
            return build(x, y, None, cond)

    layer.__name__ = layer.__qualname__ = op_type
    layer.__doc__ = (f"{get_op_def(op_type).__doc__} Elementwise, bool result (stop_gradient); "
                     f"``cond``: an existing bool Variable to write.")
    return layer


for _t in _COMPARE:
    globals()[_t] = _compare(_t, with_force_cpu=_t == "less_than")


def _logical(op_type: str, binary: bool) -> Callable[..., Variable]:
    def build(x: Variable, y: Optional[Variable], out: Optional[Variable],
              name: Optional[str]) -> Variable:
        _check(x, "x", op_type, ["bool"])
        if binary:
            _check(y, "y", op_type, ["bool"])
        if out is not None and not isinstance(out, Variable):
            raise TypeError(f"{op_type}: out must be a Variable, but received "
                            f"{type(out).__name__}")
        helper = LayerHelper(op_type, name=name)
        if out is None:
            out = _out_var(helper, name, VarType.BOOL)
        inputs = {"X": [x], "Y": [y]} if binary else {"X": [x]}
        helper.append_op(type=op_type, inputs=inputs, outputs={"Out": [out]})
        return out

    if binary:
        def layer(x: Variable, y: Variable, out: Optional[Variable] = None,
                  name: Optional[str] = None) -> Variable:
            return build(x, y, out, name)
    else:
        def layer(x: Variable, out: Optional[Variable] = None,  # type: ignore[misc]
                  name: Optional[str] = None) -> Variable:
            return build(x, None, out, name)

    layer.__name__ = layer.__qualname__ = op_type
    layer.__doc__ = f"{get_op_def(op_type).__doc__} On bool Variables."
    return layer


for _t in _LOGICAL:
    globals()[_t] = _logical(_t, binary=_t != "logical_not")


def cast(x: Variable, dtype: Any) -> Variable:
    """x converted to ``dtype`` (op ``cast``; gradients flow only between float types)."""
    _check(x, "x", "cast", _NUMBER_NAMES + ["bool"])
    try:
        dtype = convert_np_dtype_to_dtype_(dtype)
    except (TypeError, ValueError, KeyError):
        raise TypeError(f"cast: dtype must be a data type such as 'float32' or 'int64', but "
                        f"received {dtype!r}") from None
    helper = LayerHelper("cast")
    out = helper.create_variable_for_type_inference(dtype=dtype)
    helper.append_op(type="cast", inputs={"X": [x]}, outputs={"Out": [out]},
                     attrs={"in_dtype": x.dtype, "out_dtype": out.dtype})
    return out


del _t
