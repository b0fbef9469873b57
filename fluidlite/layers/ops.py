"""Layers for the activation, elementwise, comparison, logical, ``cast`` and ``scale`` ops
(fluid 1.8 signatures and output names: ``relu_0.tmp_0``, ``elementwise_add_0.tmp_0``, ...)."""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Sequence, Union

import numpy as np

from ..core import mode as _mode
from ..core import names
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
_POW_DTYPES = ["float16", "float32", "float64", "int32", "int64"]    # fluid 1.8's (+ float16)
_CAST_DTYPES = ["bool", "float16", "float32", "float64", "int32", "int64", "uint8"]


def _check(x: Any, arg: str, layer: str, dtypes: Optional[Sequence[str]] = None) -> None:
    """fluid's ``check_variable_and_dtype``: a TypeError naming the layer, the argument, what
    was expected and what was received."""
    if not isinstance(x, Variable):
        raise TypeError(f"The type of '{arg}' in {layer} must be Variable, but received "
                        f"{type(x).__name__}. Create it with fluid.data / fluid.layers.* or "
                        f"fluid.layers.assign(numpy_array).")
    if dtypes is None:
        return
    dt = x.dtype                # (a dygraph tensor's dtype is a property: read it once)
    if dt is not None and convert_dtype(dt) not in dtypes:
        hint = "float32" if "float32" in dtypes else dtypes[0]
        raise TypeError(f"The data type of '{arg}' in {layer} must be one of {list(dtypes)}, but "
                        f"received {convert_dtype(dt)}. Cast it first, e.g. "
                        f"fluid.layers.cast({arg}, '{hint}').")


def _act_dtypes(op_type: str) -> Sequence[str]:
    return _NUMBER_NAMES if getattr(get_op_def(op_type), "int_ok", False) else _FLOAT_NAMES


def _elementwise_dtypes() -> Sequence[str]:
    """fluid 1.8's elementwise layers: float16/32/64, int32, int64 in a static program."""
    return _POW_DTYPES if _mode.tracer is None else _NUMBER_NAMES


_ARGS = {
    "x": "x (Variable): the input.",
    "y": "y (Variable): the second operand, broadcast against ``x`` from ``axis``.",
    "axis": "axis (int, default -1): the dim of ``x`` where ``y``'s dims start (-1: the last).",
    "act": "act (str | None): activation applied to the result.",
    "name": "name (str | None): name prefix of the output.",
    "force_cpu": "force_cpu (bool | None): accepted for fluid's signature.",
    "y_same": "y (Variable): the second operand (broadcast against ``x``).",
    "cond": "cond (Variable | None): an existing bool variable to write the result to.",
    "out": "out (Variable | None): an existing bool variable to write the result to.",
}


def _example(call: str, feeds: str, dtype: str = "float32", out: str = "float32",
             params: Sequence[str] = ("x", "name")) -> str:
    """A generated layer's ``Args``, ``Returns`` and ``Example:`` sections: build ``call`` on
    data ``x`` (and ``y``) of ``dtype`` fed with ``feeds``, run it, show the result's shape and
    dtype."""
    names = ["x"] + (["y"] if "y" in call.replace("layers.", "") else [])
    datas = "\n".join(f"        ...     {n} = fluid.data('{n}', [-1, 3], '{dtype}')" for n in names)
    args = "\n".join(f"        {_ARGS[p]}" for p in params)
    kind = "bool" if out == "bool" else "``x``'s dtype"
    raises = ("        TypeError: ``x`` or ``y`` is not a Variable, or not of a dtype it takes.\n"
              "        ValueError: ``y``'s shape does not broadcast against ``x``'s."
              if "y" in names else
              "        TypeError: ``x`` is not a Variable, or not of a dtype the op takes.")
    return f"""

    Args:
{args}
    Returns:
        Variable: the result, elementwise: ``x``'s shape, {kind}.

    Raises:
{raises}

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
{datas}
        ...     out = fluid.layers.{call}
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> res, = exe.run(main, feed={feeds}, fetch_list=[out])
        >>> res.shape, res.dtype
        ((2, 3), dtype('{out}'))
    """


_FEED_X = "{'x': np.array([[0.1, 0.5, 0.9], [0.2, 0.4, 0.8]], 'float32')}"
_FEED_XY = ("{'x': np.array([[1, 2, 3], [4, 5, 6]], 'float32'), "
            "'y': np.array([[2, 2, 2], [3, 5, 7]], 'float32')}")
_FEED_BOOL = ("{'x': np.array([[True, False, True], [False, False, True]]), "
              "'y': np.array([[True, True, False], [False, True, True]])}")


def _eager(op_type: str, inputs: Dict[str, Variable], attrs: Dict[str, Any]) -> Variable:
    """A simple layer's op run now in dygraph mode, as fluid 1.8's layers call
    ``core.ops.<op>`` there: the output named as ``LayerHelper`` names it (``<op>_N.tmp_M``,
    both numbers drawn when the name is first read) and the op traced, without the helper's
    checks of arguments the layer does not take (an LSTM step's 400 activations and
    elementwise ops: a third of the time its dygraph forward spent in ``fluid.layers``)."""
    tracer = _mode.tracer
    # (no declared dtype: the op fills the tensor before anyone can read it, or a replayed
    # step declares the recorded one)
    out = tracer.new_var(None, None, hint=names.sole_stem(op_type))
    tracer.trace_op(op_type, inputs, {"Out": out}, attrs)
    return out


_NO_ATTRS: Dict[str, Any] = {}


# -- activations ---------------------------------------------------------------------------------
def _activation(op_type: str) -> Callable[..., Variable]:
    fn = generate_activation_fn(op_type)
    # fluid 1.8's activation layers take float tensors in a static program (its dygraph
    # layers checked nothing); the ops themselves also run on integers where int_ok
    eager_dtypes = _act_dtypes(op_type)

    def layer(x: Variable, name: Optional[str] = None) -> Variable:
        if _mode.tracer is None:
            _check(x, "x", op_type, _FLOAT_NAMES)
            return fn(x, name=name)
        _check(x, "x", op_type, eager_dtypes)
        if name is None:
            return _eager(op_type, {"X": x}, _NO_ATTRS)
        return fn(x, name=name)

    layer.__name__ = layer.__qualname__ = op_type
    layer.__doc__ = f"``{op_type}`` op: {fn.__doc__}" + _example(f"{op_type}(x)", _FEED_X)
    return layer


for _t in _ACTIVATIONS:
    globals()[_t] = _activation(_t)
_sign = globals()["sign"]


def sign(x: Any, name: Optional[str] = None) -> Variable:  # noqa: F811
    """Out = sign(x) elementwise; ``x`` a float Variable or a numpy array (assigned to a
    constant first, as fluid 1.8).

    Args:
        x (Variable): the input.
        name (str | None): name prefix of the output.
    Returns:
        Variable: same shape and dtype as ``x``.
    Raises:
        TypeError: ``x`` is neither a Variable nor a numpy array, or is not of a numeric dtype
            (float16/32/64, int8/16/32/64, uint8).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 3], "float32")
        ...     out = fluid.layers.sign(x)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.array([[-2.0, 0.0, 3.0]], "float32")}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res.round(4)
        array([[-1.,  0.,  1.]], dtype=float32)
    """
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
    """Softmax along ``axis``: exp(x - max) / sum(exp(x - max)).

    Args:
        input (Variable): float scores.
        use_cudnn (bool, default False): accepted for fluid's signature.
        name (str | None): name prefix of the output.
        axis (int, default -1): the axis normalized.
    Returns:
        Variable: probabilities summing to 1 along ``axis``, the input's shape.
    Raises:
        TypeError: ``input`` is not a float16/float32/float64 Variable, or ``axis`` is not an int.
        ValueError: ``axis`` is outside ``[-rank, rank)`` (from the op's shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 2])
        ...     p = fluid.layers.softmax(x)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> exe.run(main, feed={"x": np.array([[0, 0], [0, np.log(3)]], "float32")},
        ...         fetch_list=[p])[0]
        array([[0.5 , 0.5 ],
               [0.25, 0.75]], dtype=float32)
    """
    return _act_with_attrs("softmax", input, name, axis=check_int(axis, "axis", "softmax"),
                           use_cudnn=bool(use_cudnn))


def leaky_relu(x: Variable, alpha: float = 0.02, name: Optional[str] = None) -> Variable:
    """x if x > 0 else alpha * x.

    Args:
        x (Variable): the input.
        alpha (float, default 0.02): the slope for negative inputs.
        name (str | None): name prefix of the output.
    Returns:
        Variable: same shape and dtype.
    Raises:
        TypeError: ``x`` is not a float16/float32/float64 Variable, or ``alpha`` is not a number.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 3], "float32")
        ...     out = fluid.layers.leaky_relu(x)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.array([[-2.0, 0.0, 3.0]], "float32")}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res.round(4)
        array([[-0.04,  0.  ,  3.  ]], dtype=float32)
    """
    return _act_with_attrs("leaky_relu", x, name, alpha=_float("leaky_relu", "alpha", alpha))


def elu(x: Variable, alpha: float = 1.0, name: Optional[str] = None) -> Variable:
    """x if x > 0 else alpha * (exp(x) - 1).

    Args:
        x (Variable): the input.
        alpha (float, default 1.0): the negative saturation value.
        name (str | None): name prefix of the output.
    Returns:
        Variable: same shape and dtype.
    Raises:
        TypeError: ``x`` is not a float16/float32/float64 Variable, or ``alpha`` is not a number.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 3], "float32")
        ...     out = fluid.layers.elu(x)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.array([[-2.0, 0.0, 3.0]], "float32")}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res.round(4)
        array([[-0.8647,  0.    ,  3.    ]], dtype=float32)
    """
    return _act_with_attrs("elu", x, name, alpha=_float("elu", "alpha", alpha))


def gelu(x: Variable, approximate: bool = False) -> Variable:
    """0.5 x (1 + erf(x / sqrt 2)); ``approximate``: the tanh form.

    Args:
        x (Variable): the input.
        approximate (bool, default False): the tanh approximation.
    Returns:
        Variable: same shape and dtype.
    Raises:
        TypeError: ``x`` is not a float16/float32/float64 Variable.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 3], "float32")
        ...     out = fluid.layers.gelu(x)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.array([[-2.0, 0.0, 3.0]], "float32")}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res.round(4)
        array([[-0.0455,  0.    ,  2.996 ]], dtype=float32)
    """
    return _act_with_attrs("gelu", x, None, approximate=bool(approximate))


def pow(x: Variable, factor: Union[float, Variable] = 1.0,
        name: Optional[str] = None) -> Variable:
    """x ** factor; ``factor`` a Python number or a 1-element float32 Variable (op input
    ``FactorTensor``, no gradient to it). For an elementwise tensor exponent use
    ``elementwise_pow``.

    Args:
        x (Variable): the input: float16/32/64, or int32/int64 (then the exponent is
            ``int(factor)`` and the result keeps x's integer dtype, as fluid 1.8's kernels).
        factor (float | Variable, default 1.0): the exponent (a ``[1]`` Variable is read at run
            time).
        name (str | None): name prefix of the output.
    Returns:
        Variable: ``x ** factor``.
    Raises:
        TypeError: ``x`` is not a float16/32/64 or int32/int64 Variable, a number ``factor`` is
            not a number, or a Variable ``factor`` is not float32.
        ValueError: a Variable ``factor`` holds more than one element.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 3], "float32")
        ...     out = fluid.layers.pow(x, factor=2.0)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.array([[-2.0, 0.0, 3.0]], "float32")}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res.round(4)
        array([[4., 0., 9.]], dtype=float32)
    """
    _check(x, "x", "pow", _POW_DTYPES)
    if not isinstance(factor, Variable):
        return _act_with_attrs("pow", x, name, factor=_float("pow", "factor", factor))
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
    """min(max(x, 0), threshold).

    Args:
        x (Variable): the input.
        threshold (float, default 6.0): the upper bound.
        name (str | None): name prefix of the output.
    Returns:
        Variable: same shape and dtype as ``x``.
    Raises:
        TypeError: ``x`` is not a float16/float32/float64 Variable, or ``threshold`` is not a
            number.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 3], "float32")
        ...     out = fluid.layers.relu6(x)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.array([[-2.0, 0.0, 3.0]], "float32")}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res.round(4)
        array([[0., 0., 3.]], dtype=float32)
    """
    return _act_with_attrs("relu6", x, name, threshold=_float("relu6", "threshold", threshold))


def hard_sigmoid(x: Variable, slope: float = 0.2, offset: float = 0.5,
                 name: Optional[str] = None) -> Variable:
    """clip(slope * x + offset, 0, 1).

    Args:
        x (Variable): the input.
        slope (float, default 0.2): the slope.
        offset (float, default 0.5): the offset.
        name (str | None): name prefix of the output.
    Returns:
        Variable: same shape and dtype as ``x``.
    Raises:
        TypeError: ``x`` is not a float16/float32/float64 Variable, or ``slope`` or ``offset`` is
            not a number.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 3], "float32")
        ...     out = fluid.layers.hard_sigmoid(x)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.array([[-2.0, 0.0, 3.0]], "float32")}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res.round(4)
        array([[0.1, 0.5, 1. ]], dtype=float32)
    """
    return _act_with_attrs("hard_sigmoid", x, name,
                           slope=_float("hard_sigmoid", "slope", slope),
                           offset=_float("hard_sigmoid", "offset", offset))


def swish(x: Variable, beta: float = 1.0, name: Optional[str] = None) -> Variable:
    """x * sigmoid(beta * x).

    Args:
        x (Variable): the input.
        beta (float, default 1.0): ``x * sigmoid(beta * x)``.
        name (str | None): name prefix of the output.
    Returns:
        Variable: same shape and dtype as ``x``.
    Raises:
        TypeError: ``x`` is not a float16/float32/float64 Variable, or ``beta`` is not a number.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 3], "float32")
        ...     out = fluid.layers.swish(x)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.array([[-2.0, 0.0, 3.0]], "float32")}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res.round(4)
        array([[-0.2384,  0.    ,  2.8577]], dtype=float32)
    """
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
        dtypes = _elementwise_dtypes()
        _check(x, "x", op_type, dtypes)
        _check(y, "y", op_type, dtypes)
        if not is_int(axis):
            raise TypeError(f"{op_type}: axis must be an int (a Python or numpy integer), but "
                            f"received {axis!r} of type {type(axis).__name__}")
        axis = int(axis)
        if _mode.tracer is not None and act is None and name is None:
            return _eager(op_type, {"X": x, "Y": y}, {"axis": axis})
        helper = LayerHelper(op_type, x=x, y=y, axis=axis, act=act, name=name)
        out = _out_var(helper, name, x.dtype)
        helper.append_op(type=op_type, inputs={"X": x, "Y": y}, outputs={"Out": out},
                         attrs={"axis": axis})
        return helper.append_activation(out)

    layer.__name__ = layer.__qualname__ = op_type
    layer.__doc__ = (f"``{op_type}`` with fluid 1.x broadcasting: y (trailing 1s trimmed) lines "
                     f"up with x's dims from ``axis`` (-1: the last dims). "
                     f"{get_op_def(op_type).__doc__}" + _example(f"{op_type}(x, y)", _FEED_XY,
                                                        params=("x", "y", "axis", "act", "name")))
    return layer


for _t in _ELEMENTWISE:
    globals()[_t] = _elementwise(_t)


def scale(x: Variable, scale: Union[float, Variable] = 1.0, bias: float = 0.0,
          bias_after_scale: bool = True, act: Any = None, name: Optional[str] = None) -> Variable:
    """scale * x + bias (``bias_after_scale``) or scale * (x + bias); ``scale`` may be a
    1-element Variable.

    Args:
        x (Variable): the input.
        scale (float | Variable, default 1.0): the factor (a ``[1]`` Variable is read at run
            time).
        bias (float, default 0.0): the offset.
        bias_after_scale (bool, default True): ``scale * x + bias``; False: ``scale * (x + bias)``.
        act (str | None): activation applied to the result.
        name (str | None): name prefix of the output.
    Returns:
        Variable: same shape and dtype as ``x``.
    Raises:
        TypeError: ``x`` is not a Variable of a numeric dtype, or ``bias`` (or a non-Variable
            ``scale``) is not a number.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 2])
        ...     y = fluid.layers.scale(x, scale=2.0, bias=1.0)            # 2 * x + 1
        >>> fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": np.array([[1, 2]], "float32")},
        ...                                      fetch_list=[y])[0]
        array([[3., 5.]], dtype=float32)
    """
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
    # fluid 1.8's check_variable_and_dtype lists (control_flow.py); bool for equal/not_equal
    # is fluidlite's (Paddle 2.x's) addition
    dtypes = ["float32", "float64", "int32", "int64"] + (
        ["bool"] if op_type in ("equal", "not_equal") else [])

    def build(x: Variable, y: Variable, force_cpu: Optional[bool], cond: Optional[Variable]
              ) -> Variable:
        _check(x, "x", op_type, dtypes)
        _check(y, "y", op_type, dtypes)
        if cond is not None and not isinstance(cond, Variable):
            raise TypeError(f"{op_type}: cond must be a Variable, but received "
                            f"{type(cond).__name__}")
        if force_cpu is not None and not isinstance(force_cpu, bool):
            raise TypeError(f"{op_type}: force_cpu must be a bool, but received "
                            f"{type(force_cpu).__name__} ({force_cpu!r})")
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
                     f"``cond``: an existing bool Variable to write."
                     + _example(f"{op_type}(x, y)", _FEED_XY, out="bool",
                                params=("x", "y_same") + (("force_cpu",) if with_force_cpu else ())
                                + ("cond",)))
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
    layer.__doc__ = (f"{get_op_def(op_type).__doc__} On bool Variables."
                     + _example(f"{op_type}(x{', y' if binary else ''})",
                                _FEED_BOOL if binary else _FEED_BOOL.split(", 'y'")[0] + "}",
                                "bool", "bool",
                                params=("x",) + (("y_same",) if binary else ()) + ("out", "name")))
    return layer


for _t in _LOGICAL:
    globals()[_t] = _logical(_t, binary=_t != "logical_not")


def cast(x: Variable, dtype: Any) -> Variable:
    """x converted to ``dtype`` (op ``cast``; gradients flow only between float types).

    Args:
        x (Variable): the input.
        dtype (str | numpy dtype): the target dtype.
    Returns:
        Variable: ``x`` converted, same shape.
    Raises:
        TypeError: ``x`` is not a Variable of a numeric or bool dtype, or ``dtype`` is not a data
            type.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 2])
        ...     i = fluid.layers.cast(x, "int64")
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> exe.run(main, feed={"x": np.array([[1.7, -2.2]], "float32")}, fetch_list=[i])[0]
        array([[ 1, -2]])
    """
    static = _mode.tracer is None        # fluid 1.8's static lists; its dygraph checked none
    _check(x, "x", "cast", _CAST_DTYPES if static else _NUMBER_NAMES + ["bool"])
    try:
        dtype = convert_np_dtype_to_dtype_(dtype)
    except (TypeError, ValueError, KeyError):
        raise TypeError(f"cast: dtype must be a data type such as 'float32' or 'int64', but "
                        f"received {dtype!r}") from None
    if static and convert_dtype(dtype) not in _CAST_DTYPES:
        raise TypeError(f"The data type of 'dtype' in cast must be one of {_CAST_DTYPES}, but "
                        f"received {convert_dtype(dtype)}")
    helper = LayerHelper("cast")
    out = helper.create_variable_for_type_inference(dtype=dtype)
    helper.append_op(type="cast", inputs={"X": [x]}, outputs={"Out": [out]},
                     attrs={"in_dtype": x.dtype, "out_dtype": out.dtype})
    return out


del _t
