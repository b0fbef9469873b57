"""``fluid.dygraph.Layer`` and the containers ``Sequential``, ``LayerList``, ``ParameterList``
(fluid 1.8 semantics: parameters named by the layer's ``full_name()``, e.g. ``linear_0.w_0``)."""
from __future__ import annotations

import collections
import copy
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from ..core import mode as _mode
from ..core import names
from ..layer_helper import LayerHelper
from ..param_attr import ParamAttr
from .tensor import ParamBase, VarBase

__all__ = ["Layer", "Sequential", "LayerList", "ParameterList"]


def _camel_to_snake(name: str) -> str:
    out = []
    for i, ch in enumerate(name):
        if ch.isupper() and i and not name[i - 1].isupper():
            out.append("_")
        out.append(ch.lower())
    return "".join(out)


class _HookHandle:
    """Returned by ``register_forward_*_hook``; ``remove()`` unregisters the hook."""

    def __init__(self, hooks: "collections.OrderedDict[int, Callable]", key: int) -> None:
        self._hooks, self._key = hooks, key

    def remove(self) -> None:
        self._hooks.pop(self._key, None)


class LayerObjectHelper(LayerHelper):
    """fluid 1.8's ``Layer._helper`` (``dygraph/layer_object_helper.py``): a LayerHelper whose
    input, parameter-attribute and activation methods take their arguments explicitly, as
    ``forward`` code written for fluid 1.8 calls them, e.g.
    ``self._helper.iter_inputs_and_params(input, self._param_attr)``.

    Args:
        name (str): the layer's full name (parameters are named after it).
    Returns:
        LayerObjectHelper: the helper.
    Raises:
        TypeError: ``name`` is not a non-empty str.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> with fluid.dygraph.guard():
        ...     layer = fluid.dygraph.Layer("demo")
        ...     x = fluid.dygraph.to_variable(np.ones((2, 3), "float32"))
        ...     [type(a).__name__ for _, a in layer._helper.iter_inputs_and_params([x, x])]
        ['ParamAttr', 'ParamAttr']
    """

    def __init__(self, name: str) -> None:
        super().__init__(name, name=name)

    def _multiple_input(self, inputs_in: Any) -> List[Any]:
        inputs = list(inputs_in) if isinstance(inputs_in, (list, tuple)) else [inputs_in]
        return [VarBase(np.asarray(i)) if isinstance(i, np.ndarray) else i for i in inputs]

    def _input(self, inputs_in: Any) -> Any:
        inputs = self._multiple_input(inputs_in)
        if len(inputs) != 1:
            raise ValueError(f"{self.layer_type} layer only takes one input, but received "
                             f"{len(inputs)}")
        return inputs[0]

    def _multiple_param_attr(self, length: int, param_attr_in: Any = None) -> List[Any]:
        attrs = [param_attr_in] if isinstance(param_attr_in, ParamAttr) else param_attr_in
        if len(attrs) not in (1, length):
            raise ValueError(f"parameter number mismatch in {self.name}: {len(attrs)} "
                             f"param_attr for {length} inputs (give 1 or {length})")
        if len(attrs) == 1 and length != 1:
            attrs = [copy.deepcopy(attrs[0]) for _ in range(length)]
        return list(attrs)

    def iter_inputs_and_params(self, inputs_in: Any = None,  # type: ignore[override]
                               param_attr_in: Any = None) -> Iterator[Tuple[Any, Any]]:
        """Each input with its ParamAttr (one attr is copied for every input)."""
        attr = ParamAttr._to_attr(param_attr_in)
        if isinstance(attr, bool):
            raise ValueError(f"Param_attr should not be False in {self.name}")
        inputs = self._multiple_input(inputs_in if inputs_in is not None else [])
        yield from zip(inputs, self._multiple_param_attr(len(inputs), attr))

    def input_dtype(self, inputs_in: Any = None) -> Any:  # type: ignore[override]
        """The inputs' common dtype (ValueError when they differ)."""
        dtype = None
        for each in self._multiple_input(inputs_in if inputs_in is not None else []):
            if dtype is None:
                dtype = each.dtype
            elif dtype != each.dtype:
                raise ValueError(f"Data Type mismatch: {dtype} to {each.dtype} in {self.name}")
        return dtype

    def append_activation(self, input_var: Any, act: Any = None,  # type: ignore[override]
                          use_cudnn: Optional[bool] = None,
                          use_mkl_dnn: Optional[bool] = None) -> Any:
        """``act`` (an op type such as ``'relu'``) applied to ``input_var``; None: unchanged."""
        if act is None:
            return input_var
        if not isinstance(act, str):
            raise TypeError(f"{act!r} should be unicode or str in {self.name}")
        attrs: Dict[str, Any] = {}
        if use_cudnn:
            attrs["use_cudnn"] = True
        if use_mkl_dnn:
            attrs["use_mkldnn"] = True
        out = self.create_variable_for_type_inference(dtype=input_var.dtype)
        self.append_op(type=act, inputs={"X": [input_var]}, outputs={"Out": [out]},
                       attrs=attrs)
        return out

    def is_instance(self, param: Any, cls: type) -> None:  # type: ignore[override]
        """TypeError unless ``param`` is a ``cls``."""
        if not isinstance(param, cls):
            raise TypeError(f"The input {param!r} parameter of method {self.layer_type} must "
                            f"be {cls.__name__}, in layer {self.name}")


class Layer:
    """Base class of dygraph layers: holds parameters, sublayers and buffers, builds its
    parameters with ``create_parameter`` (named ``<full_name>.w_N`` / ``.b_N``) and runs
    ``forward`` on ``__call__`` (with forward pre/post hooks).

    Args:
        name_scope (str | None): the prefix of ``full_name()`` and so of the parameters' names
            (default: the class name in snake case, e.g. ``my_layer``).
        dtype (str, default "float32"): the default dtype of the layer's parameters.
    Returns:
        Layer: the layer; calling it runs the pre-hooks, ``forward(*inputs, **kwargs)`` and the
        post-hooks, and returns ``forward``'s (possibly hook-replaced) result.
    Raises:
        NotImplementedError: the layer is called but its class does not define ``forward``.
        TypeError: a registered parameter attribute is assigned something other than a
            Parameter or None.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> class MLP(fluid.dygraph.Layer):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.hidden = fluid.dygraph.Linear(4, 8, act="relu")
        ...         self.out = fluid.dygraph.Linear(8, 2)
        ...     def forward(self, x):
        ...         return self.out(self.hidden(x))
        >>> with fluid.dygraph.guard():
        ...     net = MLP()
        ...     y = net(fluid.dygraph.to_variable(np.ones((3, 4), "float32")))
        ...     print(y.shape, len(net.parameters()))
        [3, 2] 4
    """

    def __init__(self, name_scope: Optional[str] = None, dtype: Any = "float32") -> None:
        self.training = True
        self._built = False
        if name_scope is None:
            name_scope = _camel_to_snake(type(self).__name__)
        self._full_name = names.generate(name_scope)
        self._helper = LayerObjectHelper(self._full_name)
        self._dtype = dtype
        self._parameters: "collections.OrderedDict[str, ParamBase]" = collections.OrderedDict()
        self._sub_layers: "collections.OrderedDict[str, Layer]" = collections.OrderedDict()
        self._buffers: "collections.OrderedDict[str, VarBase]" = collections.OrderedDict()
        self._forward_pre_hooks: "collections.OrderedDict[int, Callable]" = \
            collections.OrderedDict()
        self._forward_post_hooks: "collections.OrderedDict[int, Callable]" = \
            collections.OrderedDict()
        self._hook_id = 0

    # -- modes and names --------------------------------------------------------------------
    def train(self) -> "Layer":
        """Training mode for this layer and its sublayers (dropout drops, batch norm updates).

        Args:
            None: this method takes no arguments.
        Returns:
            Layer: ``self``, with ``training = True`` on it and every sublayer.
        Raises:
            None: this method does not raise.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> with fluid.dygraph.guard():
            ...     net = fluid.dygraph.Dropout(p=0.5)
            ...     _ = net.eval()
            ...     _ = net.train()
            ...     print(net.training)
            True
        """
        for layer in self.sublayers(include_sublayers=True) + [self]:
            layer.training = True
        if _mode.tracer is not None:    # fluid 1.8: also the tracer's mode (layers.dropout)
            _mode.tracer.train_mode = True
        return self

    def eval(self) -> "Layer":
        """Inference mode for this layer and its sublayers.

        Args:
            None: this method takes no arguments.
        Returns:
            Layer: ``self``, with ``training = False`` on it and every sublayer.
        Raises:
            None: this method does not raise.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> with fluid.dygraph.guard():
            ...     net = fluid.dygraph.Sequential(fluid.dygraph.Linear(2, 2), fluid.dygraph.Dropout(p=0.5))
            ...     _ = net.eval()                  # dropout scales instead of dropping
            ...     print(net.training)
            False
        """
        for layer in self.sublayers(include_sublayers=True) + [self]:
            layer.training = False
        if _mode.tracer is not None:    # fluid 1.8: also the tracer's mode (layers.dropout)
            _mode.tracer.train_mode = False
        return self

    def full_name(self) -> str:
        """The layer's unique name (``linear_0``), the prefix of its parameters' names.

        Args:
            None: this method takes no arguments.
        Returns:
            str: the layer's unique name, e.g. ``linear_0``.
        Raises:
            None: this accessor does not raise.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> with fluid.dygraph.guard():
            ...     fc = fluid.dygraph.Linear(2, 2)
            ...     print(fc.full_name().startswith("linear"))
            True
        """
        return self._full_name

    # -- parameters -------------------------------------------------------------------------
    def create_parameter(self, shape: Sequence[int], attr: Any = None, dtype: Any = "float32",
                         is_bias: bool = False, default_initializer: Any = None) -> ParamBase:
        """A new parameter named ``<full_name>.w_N`` (``.b_N`` for biases) unless ``attr``
        names it, initialised now (``attr``/``default_initializer``, else Xavier / zero).

        Args:
            shape (list of int): the shape.
            attr (ParamAttr | str | None): name, initializer, regularizer, learning rate.
            dtype (str, default "float32"): the dtype.
            is_bias (bool, default False): a bias (zeros by default).
            default_initializer (Initializer | None): used when ``attr`` names none.
        Returns:
            Parameter: the new parameter (not yet registered: assign it to an attribute).
        Raises:
            ValueError: a dim of ``shape`` is not a positive int.
            TypeError: ``attr`` is not a ParamAttr, name, Initializer, regularizer, bool or None, or
                ``dtype`` is unknown.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> with fluid.dygraph.guard():
            ...     net = fluid.dygraph.Layer()
            ...     w = net.create_parameter([2, 2], dtype="float32",
            ...                              default_initializer=fluid.initializer.Constant(0.5))
            ...     print(w.shape, w.numpy()[0])
            [2, 2] [0.5 0.5]
        """
        if isinstance(attr, ParamAttr) and attr.name == "":
            attr.name = None
        return self._helper.create_parameter(attr, shape, dtype, is_bias, default_initializer)

    def create_variable(self, name: Optional[str] = None, persistable: Optional[bool] = None,
                        dtype: Any = None, type: Any = None) -> VarBase:
        """An empty tensor named ``<full_name>.<name>`` (or ``<full_name>.tmp_N``).

        Args:
            name (str | None): the suffix of the name (``<full_name>.<name>``); None: a generated
                ``<full_name>.tmp_N``.
            persistable (bool | None): whether the tensor is persistable (None: False).
            dtype (str | None): the tensor's dtype.
            type (VarType | None): accepted for fluid's signature (a dense tensor is created).
        Returns:
            VarBase: an empty dygraph tensor (no value yet).
        Raises:
            None: this method does not raise.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> with fluid.dygraph.guard():
            ...     net = fluid.dygraph.Layer()
            ...     v = net.create_variable(dtype="float32", persistable=False)
            ...     print(v.dtype == fluid.core.VarDesc.VarType.FP32)
            True
        """
        name = f"{self._full_name}.{name}" if name else names.generate(self._full_name + ".tmp")
        return VarBase(None, name=name, persistable=bool(persistable), dtype=dtype)

    def add_parameter(self, name: str, parameter: Optional[ParamBase]) -> Optional[ParamBase]:
        """Register ``parameter`` under ``name`` (listed by ``parameters()``/``state_dict``).

        Args:
            name (str): the attribute name.
            parameter (Parameter | None): the parameter.
        Returns:
            Parameter | None: ``parameter``.
        Raises:
            KeyError: ``name`` contains ``'.'``.
            TypeError: ``parameter`` is neither None nor a dygraph parameter.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> with fluid.dygraph.guard():
            ...     net = fluid.dygraph.Layer()
            ...     w = net.create_parameter([3], dtype="float32")
            ...     _ = net.add_parameter("scale", w)
            ...     print([name for name, _ in net.named_parameters()])
            ['scale']
        """
        if "." in name:
            raise KeyError(f"add_parameter: the name {name!r} must not contain '.'")
        if parameter is not None and not isinstance(parameter, ParamBase):
            raise TypeError(f"add_parameter: {name!r} must be a dygraph parameter (ParamBase), "
                            f"but received {type(parameter).__name__}")
        self._parameters[name] = parameter
        return parameter

    def add_sublayer(self, name: str, sublayer: "Layer") -> "Layer":
        """Register ``sublayer`` under ``name``.

        Args:
            name (str): the attribute name.
            sublayer (Layer): the layer.
        Returns:
            Layer: ``sublayer``.
        Raises:
            TypeError: ``sublayer`` is not a Layer.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> with fluid.dygraph.guard():
            ...     net = fluid.dygraph.Layer()
            ...     fc = net.add_sublayer("fc", fluid.dygraph.Linear(2, 2))
            ...     print(net.fc is fc, len(net.parameters()))
            True 2
        """
        if not isinstance(sublayer, Layer):
            raise TypeError(f"add_sublayer: {name!r} must be a Layer, but received "
                            f"{type(sublayer).__name__}")
        self._sub_layers[name] = sublayer
        return sublayer

    def register_buffer(self, name: str, variable: VarBase, persistable: bool = True) -> None:
        """A non-trainable tensor saved in ``state_dict`` (when persistable)."""
        variable._persistable = persistable
        self._buffers[name] = variable

    def parameters(self, include_sublayers: bool = True) -> List[ParamBase]:
        """Every parameter of this layer (and its sublayers), each once, in creation order.

        Args:
            include_sublayers (bool, default True): include the sublayers' parameters.
        Returns:
            list: the Parameters.
        Raises:
            None: this accessor does not raise.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> with fluid.dygraph.guard():
            ...     fc = fluid.dygraph.Linear(3, 2)
            ...     print([p.shape for p in fc.parameters()])
            [[3, 2], [2]]
        """
        return [p for _, p in self.named_parameters(include_sublayers=include_sublayers)]

    def named_parameters(self, prefix: str = "", include_sublayers: bool = True
                         ) -> Iterator[Tuple[str, ParamBase]]:
        """``(name, parameter)`` for this layer's parameters and its sublayers', with dotted
        names (the keys ``state_dict`` uses).

        Args:
            prefix (str, default ""): prefix of the names.
            include_sublayers (bool, default True): include the sublayers' parameters.
        Returns:
            iterator: ``(name, parameter)`` pairs.
        Raises:
            None: this accessor does not raise.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> with fluid.dygraph.guard():
            ...     net = fluid.dygraph.Sequential(fluid.dygraph.Linear(2, 3))
            ...     print([(name, p.shape) for name, p in net.named_parameters()])
            [('0.weight', [2, 3]), ('0.bias', [3])]
        """
        seen = set()
        layers = [(prefix, self)]
        if include_sublayers:
            layers += list(self.named_sublayers(prefix=prefix))
        for lp, layer in layers:
            for key, p in layer._parameters.items():
                if p is None or id(p) in seen:
                    continue
                seen.add(id(p))
                yield (lp + "." + key if lp else key), p

    def sublayers(self, include_sublayers: bool = True) -> List["Layer"]:
        """Every sublayer, depth first (``include_sublayers=False``: direct children only).

        Args:
            include_sublayers (bool, default True): all descendants (else the direct children).
        Returns:
            list: the layers.
        Raises:
            None: this accessor does not raise.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> with fluid.dygraph.guard():
            ...     net = fluid.dygraph.Sequential(fluid.dygraph.Linear(2, 3), fluid.dygraph.Linear(3, 1))
            ...     print([type(layer).__name__ for layer in net.sublayers()])
            ['Linear', 'Linear']
        """
        return [layer for _, layer in self.named_sublayers(include_sublayers=include_sublayers)]

    def named_sublayers(self, prefix: str = "", include_sublayers: bool = True,
                        include_self: bool = False, layers_set: Optional[set] = None
                        ) -> Iterator[Tuple[str, "Layer"]]:
        """``(name, layer)`` for every sublayer, depth first, with dotted names.

        Args:
            prefix (str, default ""): prefix of the names.
            include_sublayers (bool, default True): all descendants (else the direct children).
            include_self (bool, default False): start with ``("", self)``.
            layers_set (set | None): layers already listed (skipped).
        Returns:
            iterator: ``(name, layer)`` pairs.
        Raises:
            None: this accessor does not raise.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> with fluid.dygraph.guard():
            ...     net = fluid.dygraph.Sequential(fluid.dygraph.Linear(2, 3), fluid.dygraph.Linear(3, 1))
            ...     print([name for name, _ in net.named_sublayers()])
            ['0', '1']
        """
        if layers_set is None:
            layers_set = set()
        if include_self and self not in layers_set:
            layers_set.add(self)
            yield prefix, self
        for key, layer in self._sub_layers.items():
            if layer is None or layer in layers_set:
                continue
            layers_set.add(layer)
            p = prefix + "." + key if prefix else key
            yield p, layer
            if include_sublayers:
                yield from layer.named_sublayers(prefix=p, include_sublayers=True,
                                                 layers_set=layers_set)

    def children(self) -> Iterator["Layer"]:
        return iter(self._sub_layers.values())

    def clear_gradients(self) -> None:
        """``clear_gradient()`` on every parameter.

        Args:
            None: this method takes no arguments.
        Returns:
            None: every parameter's gradient is cleared.
        Raises:
            None: this method does not raise.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> with fluid.dygraph.guard():
            ...     fc = fluid.dygraph.Linear(2, 1)
            ...     fluid.layers.mean(fc(fluid.dygraph.to_variable(np.ones((1, 2), "float32")))).backward()
            ...     fc.clear_gradients()
            ...     print(fc.weight.gradient())
            None
        """
        for p in self.parameters():
            p.clear_gradient()

    # -- state ------------------------------------------------------------------------------
    def state_dict(self, destination: Optional[Dict[str, Any]] = None,
                   include_sublayers: bool = True, structured_name_prefix: str = ""
                   ) -> "collections.OrderedDict[str, VarBase]":
        """``{structured name: tensor}`` of the parameters and persistable buffers
        (``fc1.weight``); ``save_dygraph`` writes it to ``.pdparams``.

        Args:
            destination (dict | None): fill this dict instead of a new one.
            include_sublayers (bool, default True): include the sublayers' parameters and buffers.
            structured_name_prefix (str, default ""): prefix of the keys.
        Returns:
            OrderedDict: ``{structured name: tensor}`` (what ``save_dygraph`` writes).
        Raises:
            None: this accessor does not raise.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> with fluid.dygraph.guard():
            ...     fc = fluid.dygraph.Linear(3, 2)
            ...     print(sorted((k, v.shape) for k, v in fc.state_dict().items()))
            [('bias', [2]), ('weight', [3, 2])]
        """
        out = collections.OrderedDict() if destination is None else destination
        for key, p in self._parameters.items():
            if p is not None:
                out[structured_name_prefix + key] = p
        for key, b in self._buffers.items():
            if b is not None and b._persistable:
                out[structured_name_prefix + key] = b
        if include_sublayers:
            for key, layer in self._sub_layers.items():
                if layer is not None:
                    layer.state_dict(out, True, structured_name_prefix + key + ".")
        return out

    def set_dict(self, stat_dict: Dict[str, Any], include_sublayers: bool = True,
                 use_structured_name: bool = True) -> None:
        """Load values saved by ``state_dict`` (keys: structured names, or the parameters' own
        names with ``use_structured_name=False``). A missing key or a shape mismatch raises
        before anything is written.

        Args:
            stat_dict (dict): ``{name: array or tensor}``, e.g. from ``load_dygraph``.
            include_sublayers (bool, default True): load the sublayers' entries too.
            use_structured_name (bool, default True): keys are structured names (else parameter
                names).
        Returns:
            None: the values are written into the parameters and buffers.
        Raises:
            ValueError: a key is missing from ``stat_dict`` or a value's shape differs from its
                parameter's (raised before anything is written).

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> with fluid.dygraph.guard():
            ...     a, b = fluid.dygraph.Linear(2, 2), fluid.dygraph.Linear(2, 2)
            ...     b.load_dict(a.state_dict())
            ...     print(np.array_equal(a.weight.numpy(), b.weight.numpy()))
            True
        """
        own = self.state_dict(include_sublayers=include_sublayers)
        plan = []
        for key, t in own.items():
            k = key if use_structured_name else t.name
            if k not in stat_dict:
                raise ValueError(f"set_dict: no value for {k!r} (parameter '{t.name}') in the "
                                 f"state dict")
            v = stat_dict[k]
            arr = np.asarray(v.numpy() if isinstance(v, VarBase) else v)
            if list(arr.shape) != t.shape:
                raise ValueError(f"set_dict: {k!r} has shape {list(arr.shape)} in the state "
                                 f"dict but {t.shape} in the layer")
            plan.append((t, arr))
        for t, arr in plan:
            t.set_value(arr)

    load_dict = set_dict
    set_state_dict = set_dict

    # -- hooks and calling ------------------------------------------------------------------
    def register_forward_pre_hook(self, hook: Callable) -> _HookHandle:
        """``hook(layer, inputs)`` runs before ``forward``; a non-None result replaces the
        inputs.

        Args:
            hook (callable): ``hook(layer, inputs)``; a non-None result replaces the inputs.
        Returns:
            handle: ``handle.remove()`` unregisters the hook.
        Raises:
            None: registering does not raise (errors of the hook propagate when the layer is
                called).

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> with fluid.dygraph.guard():
            ...     fc = fluid.dygraph.Linear(2, 2)
            ...     seen = []
            ...     handle = fc.register_forward_pre_hook(lambda layer, inputs: seen.append(inputs[0].shape))
            ...     _ = fc(fluid.dygraph.to_variable(np.ones((3, 2), "float32")))
            ...     handle.remove()
            ...     print(seen)
            [[3, 2]]
        """
        self._hook_id += 1
        self._forward_pre_hooks[self._hook_id] = hook
        return _HookHandle(self._forward_pre_hooks, self._hook_id)

    def register_forward_post_hook(self, hook: Callable) -> _HookHandle:
        """``hook(layer, inputs, outputs)`` runs after ``forward``; a non-None result replaces
        the outputs.

        Args:
            hook (callable): ``hook(layer, inputs, output)``; a non-None result replaces the output.
        Returns:
            handle: ``handle.remove()`` unregisters the hook.
        Raises:
            None: registering does not raise (errors of the hook propagate when the layer is
                called).

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> with fluid.dygraph.guard():
            ...     fc = fluid.dygraph.Linear(2, 2)
            ...     def double(layer, inputs, output):
            ...         return output * 2
            ...     handle = fc.register_forward_post_hook(double)
            ...     x = fluid.dygraph.to_variable(np.ones((1, 2), "float32"))
            ...     hooked = fc(x).numpy()
            ...     handle.remove()
            ...     print(np.allclose(hooked, 2 * fc(x).numpy()))
            True
        """
        self._hook_id += 1
        self._forward_post_hooks[self._hook_id] = hook
        return _HookHandle(self._forward_post_hooks, self._hook_id)

    def __call__(self, *inputs: Any, **kwargs: Any) -> Any:
        if self._forward_pre_hooks:
            for hook in list(self._forward_pre_hooks.values()):
                res = hook(self, inputs)
                if res is not None:
                    inputs = res if isinstance(res, tuple) else (res,)
        if not getattr(self, "_built", True):
            # fluid 1.8: a layer creates what depends on its first inputs' shapes here
            self._build_once(*inputs, **kwargs)
            self._built = True
        outputs = self.forward(*inputs, **kwargs)
        if self._forward_post_hooks:
            for hook in list(self._forward_post_hooks.values()):
                res = hook(self, inputs, outputs)
                if res is not None:
                    outputs = res
        return outputs

    def _build_once(self, *inputs: Any, **kwargs: Any) -> None:
        """fluid 1.8's hook run once, before the first ``forward``, with the same arguments:
        subclasses create the parameters whose shapes depend on the first inputs there. The
        base layer creates nothing."""

    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        """The layer's computation; subclasses override it, and calling the layer runs it (with
        the forward pre/post hooks around it).

        Args:
            *inputs: the layer's inputs (usually dygraph tensors), as passed to the call.
            **kwargs: keyword inputs, as passed to the call.
        Returns:
            Any: what the subclass computes (usually a tensor or a tuple of tensors).
        Raises:
            NotImplementedError: the subclass does not override ``forward``.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> with fluid.dygraph.guard():
            ...     class Double(fluid.dygraph.Layer):
            ...         def forward(self, x):                 # what calling the layer runs
            ...             return x * 2
            ...     print(Double()(fluid.dygraph.to_variable(np.array([1.5], "float32"))).numpy())
            [3.]
        """
        raise NotImplementedError(f"{type(self).__name__} must define forward()")

    # -- attribute registration -------------------------------------------------------------
    def __setattr__(self, name: str, value: Any) -> None:
        d = self.__dict__
        if isinstance(value, ParamBase) and "_parameters" in d:
            self._parameters[name] = value
            d.pop(name, None)
            return
        if isinstance(value, Layer) and "_sub_layers" in d:
            self._sub_layers[name] = value
            d.pop(name, None)
            return
        if "_parameters" in d and name in self._parameters:
            if value is not None:       # fluid's check: a parameter stays a parameter
                raise TypeError(f"assignment to parameter '{name}' should be of type Parameter "
                                f"or None, but got '{type(value).__name__}'")
            self._parameters[name] = None
            return
        object.__setattr__(self, name, value)

    def __getattr__(self, name: str) -> Any:
        d = self.__dict__
        if "_parameters" in d and name in d["_parameters"]:
            return d["_parameters"][name]
        if "_sub_layers" in d and name in d["_sub_layers"]:
            return d["_sub_layers"][name]
        if "_buffers" in d and name in d["_buffers"]:
            return d["_buffers"][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name: str) -> None:
        for table in ("_parameters", "_sub_layers", "_buffers"):
            if name in self.__dict__.get(table, {}):
                del self.__dict__[table][name]
                return
        object.__delattr__(self, name)

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__}("]
        for key, layer in self._sub_layers.items():
            lines.append(f"  ({key}): " + repr(layer).replace("\n", "\n  "))
        lines.append(")")
        return "\n".join(lines) if len(lines) > 2 else f"{type(self).__name__}()"


class Sequential(Layer):
    """Calls its sublayers in order: ``Sequential(Linear(4, 8), ReLU())`` or with
    ``(name, layer)`` pairs.

    Args:
        layers (Layer | tuple): the layers to call in order, or ``(name, layer)`` pairs.
    Returns:
        Sequential: a Layer; calling it with ``input`` returns the last layer's output.
    Raises:
        TypeError: an item is not a Layer (or a pair's second item is not).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> with fluid.dygraph.guard():
        ...     net = fluid.dygraph.Sequential(fluid.dygraph.Linear(4, 8, act="relu"),
        ...                                    fluid.dygraph.Linear(8, 2))
        ...     print(net(fluid.dygraph.to_variable(np.ones((3, 4), "float32"))).shape,
        ...           len(net.parameters()))
        [3, 2] 4
    """

    def __init__(self, *layers: Any) -> None:
        super().__init__()
        if len(layers) > 0 and isinstance(layers[0], tuple):
            for name, layer in layers:
                self.add_sublayer(name, layer)
        else:
            for i, layer in enumerate(layers):
                self.add_sublayer(str(i), layer)

    def __getitem__(self, idx: Any) -> Layer:
        """``seq[i]`` (position) or ``seq["name"]`` (a ``(name, layer)`` pair's name, as fluid
        1.8's ``self._sub_layers[str(name)]``)."""
        if isinstance(idx, str):
            if idx not in self._sub_layers:
                raise KeyError(f"Sequential has no sublayer named {idx!r}; its sublayers are "
                               f"{list(self._sub_layers)}")
            return self._sub_layers[idx]
        return list(self._sub_layers.values())[idx]

    def __len__(self) -> int:
        return len(self._sub_layers)

    def forward(self, input: Any) -> Any:
        for layer in self._sub_layers.values():
            input = layer(input)
        return input


class LayerList(Layer):
    """A list of sublayers (registered, so their parameters are listed).

    Args:
        sublayers (list of Layer | None): the layers, registered as ``"0"``, ``"1"``, ...
    Returns:
        LayerList: a Layer holding the list (index it, iterate it, ``append``, ``extend``); it
        has no ``forward`` of its own.
    Raises:
        TypeError: an item is not a Layer.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> with fluid.dygraph.guard():
        ...     layers = fluid.dygraph.LayerList([fluid.dygraph.Linear(4, 4) for _ in range(3)])
        ...     x = fluid.dygraph.to_variable(np.ones((1, 4), "float32"))
        ...     for layer in layers:
        ...         x = layer(x)
        ...     print(len(layers), x.shape, len(layers.parameters()))
        3 [1, 4] 6
    """

    def __init__(self, sublayers: Optional[Sequence[Layer]] = None) -> None:
        super().__init__()
        for i, layer in enumerate(sublayers or []):
            self.add_sublayer(str(i), layer)

    def __getitem__(self, idx: int) -> Layer:
        return list(self._sub_layers.values())[idx]

    def __setitem__(self, idx: int, sublayer: Layer) -> None:
        self._sub_layers[str(idx)] = sublayer

    def __len__(self) -> int:
        return len(self._sub_layers)

    def __iter__(self) -> Iterator[Layer]:
        return iter(list(self._sub_layers.values()))

    def append(self, sublayer: Layer) -> "LayerList":
        self.add_sublayer(str(len(self)), sublayer)
        return self

    def extend(self, sublayers: Sequence[Layer]) -> "LayerList":
        for layer in sublayers:
            self.append(layer)
        return self

    def insert(self, index: int, sublayer: Layer) -> None:
        """Insert ``sublayer`` before position ``index`` (fluid 1.8: ``0 <= index < len``);
        the later sublayers move up one name (``"3"`` becomes ``"4"``, ...).

        Args:
            index (int): the position the new sublayer takes.
            sublayer (Layer): the layer to insert.
        Raises:
            TypeError: ``index`` is not an int or ``sublayer`` not a Layer.
            IndexError: ``index`` is outside ``[0, len(self))``.

        Example:
            >>> import fluidlite as fluid
            >>> with fluid.dygraph.guard():
            ...     linears = fluid.dygraph.LayerList(
            ...         [fluid.dygraph.Linear(2, 2) for _ in range(3)])
            ...     another = fluid.dygraph.Linear(2, 2)
            ...     linears.insert(1, another)
            ...     print(linears[1] is another, len(linears))
            True 4
        """
        if isinstance(index, bool) or not isinstance(index, int):
            raise TypeError(f"LayerList.insert: index must be an int, but received "
                            f"{type(index).__name__}")
        if not 0 <= index < len(self._sub_layers):
            raise IndexError(f"LayerList.insert: index must be in [0, {len(self._sub_layers)}), "
                             f"but received {index}")
        if not isinstance(sublayer, Layer):
            raise TypeError(f"LayerList.insert: sublayer must be a Layer, but received "
                            f"{type(sublayer).__name__}")
        for i in range(len(self._sub_layers), index, -1):
            self._sub_layers[str(i)] = self._sub_layers[str(i - 1)]
        self._sub_layers[str(index)] = sublayer


class ParameterList(Layer):
    """A list of parameters (registered, so ``parameters()`` lists them).

    Args:
        parameters (list of Parameter | None): the parameters, registered as ``"0"``, ``"1"``,
            ...
    Returns:
        ParameterList: a Layer holding the list (index it, iterate it, ``append``); it has no
        ``forward`` of its own.
    Raises:
        TypeError: an item is not a dygraph parameter.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> with fluid.dygraph.guard():
        ...     class Net(fluid.dygraph.Layer):
        ...         def __init__(self):
        ...             super().__init__()
        ...             self.ws = fluid.dygraph.ParameterList(
        ...                 [self.create_parameter([2, 2], dtype="float32") for _ in range(3)])
        ...     print(len(Net().parameters()))
        3
    """

    def __init__(self, parameters: Optional[Sequence[ParamBase]] = None) -> None:
        super().__init__()
        for i, p in enumerate(parameters or []):
            self.add_parameter(str(i), p)

    def __getitem__(self, idx: int) -> ParamBase:
        return list(self._parameters.values())[idx]

    def __setitem__(self, idx: int, param: ParamBase) -> None:
        self._parameters[str(idx)] = param

    def __len__(self) -> int:
        return len(self._parameters)

    def __iter__(self) -> Iterator[ParamBase]:
        return iter(list(self._parameters.values()))

    def append(self, parameter: ParamBase) -> "ParameterList":
        self.add_parameter(str(len(self)), parameter)
        return self
