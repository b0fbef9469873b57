"""``LayerHelper``: what every layer function uses to create parameters, temporaries and ops,
plus the argument checks layer functions share (numpy scalars count as Python numbers)."""
from __future__ import annotations

import copy
import math
import numbers
from typing import Any, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from .core import mode as _mode, names, registry
from .core.dtypes import VarType, convert_np_dtype_to_dtype_, is_float
from .core.ir import (Operator, Parameter, Program, Variable, default_main_program,
                      default_startup_program)
from . import initializer as _initializer
from .param_attr import ParamAttr, WeightNormParamAttr

__all__ = ["LayerHelper", "is_int", "is_number", "check_int", "check_number", "check_act"]


# -- argument checks ----------------------------------------------------------------------------
def is_int(value: Any) -> bool:
    """A Python or numpy integer (``np.int64(3)``); bools are not ints here."""
    if value.__class__ is int:          # the common case, without the ABC check
        return True
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def is_number(value: Any) -> bool:
    """A Python or numpy real number (``np.float32(1.0)``, ``np.int64(3)``); not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def _received(value: Any) -> str:
    return f"{value!r} of type {type(value).__name__}"


def check_int(value: Any, arg: str, layer: str, minimum: Optional[int] = None) -> int:
    """``int(value)`` for a Python/numpy integer, else a TypeError naming the layer, the
    argument, what was expected and what was received; ``minimum``: ValueError below it."""
    if not is_int(value):
        raise TypeError(f"{layer}: {arg} must be an int (a Python or numpy integer), but "
                        f"received {_received(value)}")
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"{layer}: {arg} must be >= {minimum}, but received {value}")
    return value


def check_number(value: Any, arg: str, layer: str, positive: bool = False) -> float:
    """``float(value)`` for a Python/numpy real number, else a TypeError naming the layer, the
    argument and what was received; ``positive``: ValueError unless > 0."""
    if not is_number(value):
        raise TypeError(f"{layer}: {arg} must be a number (a Python or numpy int or float), "
                        f"but received {_received(value)}")
    value = float(value)
    if positive and not value > 0:
        raise ValueError(f"{layer}: {arg} must be > 0, but received {value}")
    return value


def check_finite(value: Any, arg: str, layer: str, positive: bool = False,
                 minimum: Optional[float] = None) -> float:
    """``check_number`` and finite (a NaN or infinite learning rate, decay or step count makes
    every parameter NaN), ``minimum``: ValueError below it."""
    v = check_number(value, arg, layer, positive)
    if not math.isfinite(v):
        raise ValueError(f"{layer}: {arg} must be a finite number, but received {value!r}")
    if minimum is not None and v < minimum:
        raise ValueError(f"{layer}: {arg} must be >= {minimum}, but received {value!r}")
    return v


def _is_activation(op_type: str) -> bool:
    if not registry.has_op(op_type):
        return False
    opdef = registry.get_op_def(op_type)
    return [s.name for s in opdef.in_slots if not s.dispensable] == ["X"] and \
        "Out" in [s.name for s in opdef.out_slots]


def check_act(act: Any, layer: str) -> None:
    """``act=`` must be None, the name of a registered one-input op with slots X -> Out (an
    activation such as 'relu') or a dict ``{'type': name, **attrs}`` naming one."""
    if act is None:
        return
    expected = ("None, an activation name such as 'relu', 'sigmoid', 'tanh' or 'softmax', or a "
                "dict {'type': 'leaky_relu', 'alpha': 0.1}")
    if isinstance(act, dict):
        act_type = act.get("type")
        if not isinstance(act_type, str):
            raise TypeError(f"{layer}: act={act!r} must have a 'type' entry naming the "
                            f"activation; expected {expected}")
    elif isinstance(act, str):
        act_type = act
    else:
        raise TypeError(f"{layer}: act must be {expected}, but received {_received(act)}")
    if not _is_activation(act_type):
        raise ValueError(f"{layer}: act={act_type!r} is not an activation (an op with one input "
                         f"X and output Out); expected {expected}")


def _dygraph_var_kwargs(kwargs: Any) -> Any:
    """The ``create_var`` arguments a dygraph tensor keeps (name, dtype, shape,
    stop_gradient)."""
    return {k: kwargs[k] for k in ("name", "dtype", "shape", "stop_gradient") if k in kwargs}


class LayerHelper:
    """Per-layer-call helper. ``name`` is ``unique_name(layer_type)`` unless ``name=`` is given:
    parameters become ``<name>.w_N`` / ``<name>.b_N``, temporaries ``<name>.tmp_N``."""

    def __init__(self, layer_type: str, **kwargs: Any) -> None:
        self.kwargs = kwargs
        self.layer_type = layer_type
        name = None
        if kwargs:
            # checked here, before the layer changes anything, so errors come first
            check_act(kwargs.get("act"), layer_type)
            for key in ("param_attr", "bias_attr"):
                if kwargs.get(key) is not None:
                    ParamAttr._to_attr(kwargs[key], f"{layer_type}: {key}")
            name = kwargs.get("name")
            if name is not None and (not isinstance(name, str) or not name):
                raise TypeError(f"{layer_type}: name must be a non-empty str or None, but "
                                f"received {_received(name)}")
        if name is None and _mode.tracer is not None:
            # dygraph: ``name`` is drawn when first read (``__getattr__``), as the outputs'
            # names are (``tmp_hint``): an eager step seldom reads either
            self._stem = self.tmp_hint = names.OpStem(layer_type)
            return
        self.name = name if name is not None else names.generate(layer_type)
        self.tmp_hint: Any = self.name + ".tmp"     # what dygraph temporaries are named after

    def __getattr__(self, attr: str) -> Any:
        # only reached for a missing attribute: a dygraph helper's ``name`` not read yet
        if attr == "name" and "_stem" in self.__dict__:
            self.name = self._stem.name
            return self.name
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{attr}'")

    @property
    def main_program(self) -> Program:
        return default_main_program()

    @property
    def startup_program(self) -> Program:
        return default_startup_program()

    def append_op(self, *args: Any, **kwargs: Any) -> Operator:
        if _mode.tracer is not None:        # dygraph: run the op now (fluid 1.8's trace_op)
            return _mode.tracer.trace_op(*args, **kwargs)
        return self.main_program.current_block().append_op(*args, **kwargs)

    # -- inputs -------------------------------------------------------------------------------
    def multiple_input(self, input_param_name: str = "input") -> List[Variable]:
        inputs = self.kwargs.get(input_param_name, [])
        inputs = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
        for x in inputs:
            if not isinstance(x, Variable):
                raise TypeError(f"{self.layer_type}: '{input_param_name}' must be a Variable or "
                                f"a list of Variables, but received {type(x).__name__}")
        if not inputs:
            raise ValueError(f"{self.layer_type}: '{input_param_name}' must be a Variable or a "
                             f"non-empty list of Variables, but received an empty list")
        return inputs

    def input(self, input_param_name: str = "input") -> Variable:
        inputs = self.multiple_input(input_param_name)
        if len(inputs) != 1:
            raise ValueError(f"{self.layer_type} layer only takes one input")
        return inputs[0]

    def input_dtype(self, input_param_name: str = "input") -> VarType:
        dtype = None
        for x in self.multiple_input(input_param_name):
            if dtype is None:
                dtype = x.dtype
            elif dtype != x.dtype:
                raise ValueError(f"{self.layer_type}: data types of the inputs differ "
                                 f"({dtype} vs {x.dtype})")
        return dtype

    @property
    def param_attr(self) -> Any:
        return ParamAttr._to_attr(self.kwargs.get("param_attr"))

    @property
    def bias_attr(self) -> Any:
        return ParamAttr._to_attr(self.kwargs.get("bias_attr"))

    def multiple_param_attr(self, length: int) -> List[Any]:
        attr = self.param_attr
        if isinstance(attr, ParamAttr):
            attr = [attr]
        if len(attr) != 1 and len(attr) != length:
            raise ValueError(f"{self.layer_type}: got {len(attr)} param_attrs for {length} "
                             f"inputs; pass one ParamAttr (shared settings) or a list of "
                             f"{length}, one per input")
        if len(attr) == 1 and length != 1:
            attr = [attr[0]] + [copy.deepcopy(attr[0]) for _ in range(length - 1)]
            for a in attr[1:]:      # one parameter per input: never share an explicit name
                if a.name is not None:
                    raise ValueError(f"{self.layer_type}: one named param_attr cannot be used "
                                     f"for {length} inputs; pass a list of ParamAttr")
        return attr

    def iter_inputs_and_params(self, input_param_name: str = "input"
                               ) -> Iterator[Tuple[Variable, Any]]:
        inputs = self.multiple_input(input_param_name)
        yield from zip(inputs, self.multiple_param_attr(len(inputs)))

    # -- variables ----------------------------------------------------------------------------
    def create_parameter(self, attr: Any, shape: Sequence[int], dtype: Any,
                         is_bias: bool = False, default_initializer: Any = None,
                         stop_gradient: bool = False,
                         type: VarType = VarType.LOD_TENSOR) -> Optional[Parameter]:
        """Create ``<name>.w_N`` (or ``.b_N``) in the main program and its initialized twin in
        the startup program. ``attr=False`` means no parameter (returns None). A parameter name
        that already exists is shared."""
        if attr is False:
            return None
        attr = copy.deepcopy(ParamAttr._to_attr(attr))
        shape = [int(d) for d in shape]
        for d in shape:
            if d <= 0:
                raise ValueError(f"Expected every dim's size to be larger than 0, but the size "
                                 f"of the parameter of {self.name} is {shape}")
        dtype = convert_np_dtype_to_dtype_(dtype)
        if attr.initializer is None:        # fluid.set_global_initializer outranks defaults
            default_initializer = _initializer.global_initializer(is_bias) or \
                default_initializer
        if default_initializer is None and attr.initializer is None:
            if not is_float(dtype):
                raise TypeError("Can not create parameter with default initializer when dtype "
                                "is not float type. Set default_initializer to fit the "
                                "parameter dtype!")
            if is_bias:
                attr._set_default_bias_initializer()
            else:
                attr._set_default_param_initializer()
        else:
            attr._set_default_initializer(default_initializer)
        if attr.name is None:
            attr.name = names.generate(".".join([self.name, "b" if is_bias else "w"]))
        if isinstance(attr, WeightNormParamAttr):
            return self._create_weight_normalize(attr, shape, dtype)
        if _mode.tracer is not None:        # dygraph: a ParamBase, initialised now
            if names.dygraph_parameter_name_checker(attr.name):
                raise ValueError(f"parameter name [{attr.name}] has already been used. In "
                                 f"dygraph mode, the name of parameter can't be same. Please "
                                 f"check the parameter attr value passed to "
                                 f"self.create_parameter or constructor of dygraph Layers")
            return _mode.tracer.create_parameter(attr, shape, dtype, type, stop_gradient)
        main_block = self.main_program.global_block()
        if attr.name in main_block.vars:
            existing = main_block.vars[attr.name]
            if list(existing.shape) != shape:
                raise ValueError(f"Parameter '{attr.name}' is shared but declared with shape "
                                 f"{shape} here and {list(existing.shape)} before")
            # as fluid 1.8: the attributes of this declaration (need_clip, regularizer, ...)
            # replace the earlier ones; the initializer stays the first one
            return main_block.create_parameter(shape=shape, dtype=dtype, type=type,
                                               **attr._to_kwargs())
        self.startup_program.global_block().create_parameter(
            shape=shape, dtype=dtype, type=type, **attr._to_kwargs(with_initializer=True))
        param = main_block.create_parameter(shape=shape, dtype=dtype, type=type,
                                            **attr._to_kwargs())
        if stop_gradient:
            param.stop_gradient = True
        return param

    def _create_weight_normalize(self, attr: "WeightNormParamAttr", shape: List[int],
                                 dtype: VarType) -> Variable:
        """fluid 1.8's weight normalization (Salimans & Kingma): parameters ``<name>_v`` (the
        shape asked for, initialised by the attr's initializer) and ``<name>_g`` (1 on every
        dim but ``attr.dim``, initialised in the startup program to ``||v||``), and in the
        main program ``w = v * (g / ||v||)`` with the norm over every dim except ``dim`` (all
        dims when None) -- so training updates g and v, and w has the initializer's values
        at step 0. Returns w (a variable of the main program, not a parameter)."""
        if _mode.tracer is not None:
            raise TypeError(f"WeightNormParamAttr ('{attr.name}') works in static graph mode, "
                            f"as in fluid 1.8: in dygraph the weight would be computed once, "
                            f"at creation; declare the layer in a Program instead")
        dim = attr.dim
        if dim is not None and not -len(shape) <= dim < len(shape):
            raise ValueError(f"WeightNormParamAttr: dim={dim} is out of range for a parameter "
                             f"of shape {shape}")
        dim = dim % len(shape) if dim is not None else None
        g_shape = [shape[i] if i == dim else 1 for i in range(len(shape))]
        g_attr, v_attr = copy.deepcopy(attr), copy.deepcopy(attr)
        g_attr.name, v_attr.name = attr.name + "_g", attr.name + "_v"
        startup = self.startup_program.global_block()
        g0 = startup.create_parameter(shape=g_shape, dtype=dtype, **g_attr._to_kwargs())
        v0 = startup.create_parameter(shape=shape, dtype=dtype,
                                      **v_attr._to_kwargs(with_initializer=True))
        _norm_except_dim(startup, v0, dim, out=g0)
        main = self.main_program.global_block()
        g = main.create_parameter(shape=g_shape, dtype=dtype, **g_attr._to_kwargs())
        v = main.create_parameter(shape=shape, dtype=dtype, **v_attr._to_kwargs())
        block = self.main_program.current_block()
        scale = _tmp(block, "weight_norm", dtype)
        block.append_op("elementwise_div", {"X": [g], "Y": [_norm_except_dim(block, v, dim)]},
                        {"Out": [scale]}, {"axis": -1})
        w = _tmp(block, "weight_norm", dtype)
        block.append_op("elementwise_mul", {"X": [v], "Y": [scale]}, {"Out": [w]},
                        {"axis": -1})
        return w

    def get_parameter(self, name: str) -> Parameter:
        param = self.main_program.global_block().var(name)
        if not isinstance(param, Parameter):
            raise ValueError(f"no Parameter name {name} found")
        return param

    def create_variable_for_type_inference(self, dtype: Any = None,
                                           stop_gradient: bool = False) -> Variable:
        """A fresh non-persistable ``<name>.tmp_N``; the op that writes it sets its shape."""
        if _mode.tracer is not None:        # dygraph: an empty tensor the traced op fills
            return _mode.tracer.new_var(None, dtype, stop_gradient=stop_gradient,
                                        hint=self.tmp_hint)   # named on first use
        return self.main_program.current_block().create_var(
            name=names.generate(".".join([self.name, "tmp"])), dtype=dtype,
            type=VarType.LOD_TENSOR, persistable=False, stop_gradient=stop_gradient)

    create_tmp_variable = create_variable_for_type_inference

    def create_variable(self, **kwargs: Any) -> Variable:
        if _mode.tracer is not None:        # dygraph: an empty tensor
            return _mode.tracer.new_var(**_dygraph_var_kwargs(kwargs))
        return self.main_program.current_block().create_var(**kwargs)

    def create_global_variable(self, persistable: bool = False, **kwargs: Any) -> Variable:
        if _mode.tracer is not None:        # dygraph: an empty tensor
            return _mode.tracer.new_var(persistable=persistable, **_dygraph_var_kwargs(kwargs))
        return self.main_program.global_block().create_var(persistable=persistable, **kwargs)

    def create_or_get_global_variable(self, name: str, *args: Any,
                                      **kwargs: Any) -> Tuple[Variable, bool]:
        block = self.main_program.global_block()
        if block.has_var(name):
            return block.var(name), False
        return self.create_global_variable(*args, name=name, **kwargs), True

    def set_variable_initializer(self, var: Variable, initializer: Any) -> Variable:
        """Declare ``var`` in the startup program too and append its init op there."""
        if _mode.tracer is not None:        # dygraph: fill it now
            return _mode.tracer.init_var(var, initializer)
        return self.startup_program.global_block().create_var(
            name=var.name, type=var.type, dtype=var.dtype, shape=var.shape,
            persistable=True, initializer=initializer)

    # -- common tails -------------------------------------------------------------------------
    def append_bias_op(self, input_var: Variable, dim_start: int = 1,
                       dim_end: Optional[int] = None) -> Variable:
        """``input + b`` with ``b`` of shape ``input.shape[dim_start:dim_end]`` (None if
        ``bias_attr=False``)."""
        bias_attr = self.bias_attr
        if not bias_attr:
            return input_var
        size = list(input_var.shape[dim_start:dim_end])
        b = self.create_parameter(attr=bias_attr, shape=size, dtype=input_var.dtype,
                                  is_bias=True)
        out = self.create_variable_for_type_inference(dtype=input_var.dtype)
        self.append_op(type="elementwise_add", inputs={"X": [input_var], "Y": [b]},
                       outputs={"Out": [out]}, attrs={"axis": dim_start})
        return out

    def append_activation(self, input_var: Variable) -> Variable:
        """Apply ``act=`` (a string such as ``'relu'`` or a dict ``{'type': ..., attrs}``)."""
        act = self.kwargs.get("act")
        if act is None:
            return input_var
        if isinstance(act, str):
            act = {"type": act}
        check_act(act, self.layer_type)
        act = dict(act)
        act_type = act.pop("type")
        out = self.create_variable_for_type_inference(dtype=input_var.dtype)
        self.append_op(type=act_type, inputs={"X": [input_var]}, outputs={"Out": [out]},
                       attrs=act)
        return out

    def is_instance(self, param_name: str, cls: type) -> None:
        param = self.kwargs.get(param_name)
        if not isinstance(param, cls):
            raise TypeError(f"The input {param_name} parameter of method {self.layer_type} "
                            f"must be {cls.__name__}")


def _tmp(block: Any, hint: str, dtype: VarType) -> Variable:
    return block.create_var(name=names.generate(f"{hint}.tmp"), dtype=dtype,
                            type=VarType.LOD_TENSOR, persistable=False)


def _norm_except_dim(block: Any, v: Variable, dim: Optional[int],
                     out: Optional[Variable] = None) -> Variable:
    """``(sum |v|^2 over every dim but dim) ^ 0.5``, dims kept (fluid's abs/pow/reduce_sum/pow
    sequence), written to ``out`` or a new temporary."""
    axes = [i for i in range(len(v.shape)) if i != dim]
    a, sq, total = (_tmp(block, "weight_norm", v.dtype) for _ in range(3))
    out = out if out is not None else _tmp(block, "weight_norm", v.dtype)
    block.append_op("abs", {"X": [v]}, {"Out": [a]})
    block.append_op("pow", {"X": [a]}, {"Out": [sq]}, {"factor": 2.0})
    block.append_op("reduce_sum", {"X": [sq]}, {"Out": [total]},
                    {"dim": axes, "keep_dim": True, "reduce_all": False})
    block.append_op("pow", {"X": [total]}, {"Out": [out]}, {"factor": 0.5})
    return out
