"""The op contract: one ``OpDef`` subclass per op: slots, attrs, inference, kernel, gradient.

Writing an op (see docs/guides/extending.md, "Writing an op")::

    @register
    class Relu(OpDef):
        '''Out = max(X, 0);  dX = dOut * (Out > 0).'''
        type, inputs, outputs = "relu", ("X",), ("Out",)
        grad_uses = ("Out",)                       # relu_grad reads Out (and Out@GRAD)

        def infer(self, X):            return {"Out": X}
        def forward(self, X):          return {"Out": np.maximum(X, 0)}
        def backward(self, Out, dOut): return {"X": dOut * (Out > 0)}

* **Slots** are fluid's names. A trailing ``*`` marks a duplicable slot (a list of variables), a
  trailing ``?`` a dispensable one (may be absent: the kernel then receives ``None``).
* **Attrs** are the keyword-only parameters of ``forward``; their defaults are the attr defaults
  and fix the accepted type (bool, int, float, str, list, dtype; ``None`` accepts anything).
  ``extra_attrs`` lists attrs that are stored but never reach the kernel (``use_cudnn``...).
* ``infer(**input VarSpecs, **attrs it names) -> {slot: VarSpec | [VarSpec]}`` runs when the op is
  appended; it raises ``ValueError`` on a shape mismatch. A slot it omits keeps the var's spec.
* ``forward(*input arrays in slot order, **attrs) -> {slot: ndarray | [ndarray]}`` is the kernel:
  a pure function of its inputs (never mutates them, no global RNG). Ops with ``uses_rng = True``
  also receive ``rng`` (a ``numpy.random.Generator`` supplied by the executor).
* ``lower(self, in_specs, attrs) -> callable | None`` (optional) returns a positional fast path
  the executor calls instead of ``forward``: ``f(*arrays) -> ndarray`` for a single-output op,
  ``f(*arrays) -> {slot: ndarray}`` (what ``forward`` returns, bit for bit) for an op with
  several output slots.
* ``bind(self, in_specs, attrs, outputs_present) -> Binding(fn, single, result_keys)`` is the one
  method the compiled plan asks for the callable it calls (``in_specs``: a ``VarSpec``, list or
  ``None`` per input slot; ``attrs``: the op's attrs, unfiltered; ``outputs_present``: the output
  slots that name at least one variable). ``fn(*arrays in slot order)`` returns the one output
  array when ``single``, else a dict; output slot ``s`` is read from key ``result_keys.get(s, s)``
  (a list for duplicable slots). Ops with ``uses_rng`` are also called with ``rng=`` (the plan
  supplies the generator, see ``executor/plan.py``). The default uses ``lower`` when it gives
  a fast path and ``functools.partial(forward, **kernel attrs)`` otherwise; generated
  ``<type>_grad`` defs override it to call the backward rule directly. Override it only when an
  op needs a different calling convention (plan-time fused ops implement ``lower``/``forward``).
* **Gradient**, one of:
  - ``backward(self, <grad_uses...>, d<Out>..., **attrs) -> {input slot: grad}``: the registry
    registers ``<type>_grad`` with inputs ``grad_uses + <Out>@GRAD`` and outputs ``<X>@GRAD``.
    A returned grad must already have the input's shape (reduce broadcasts yourself).
  - ``make_grad(self, g: GradBuilder, **attrs)``: append existing ops (a composition).
  - ``no_grad = True``: not differentiable (said explicitly).
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
import warnings
from typing import (AbstractSet, Any, Callable, ClassVar, Dict, Iterable, List, Mapping,
                    NamedTuple, Optional, Sequence, Tuple, Type, TypeVar, Union)

import numpy as np

from . import names
from .callstack import user_stacklevel
from .dtypes import VarType, convert_np_dtype_to_dtype_

_INFER_PARAMS: Dict[type, Optional[frozenset]] = {}   # OpDef class -> attrs its infer accepts

# attrs every op may carry; set by the framework, never passed to kernels
COMMON_ATTRS = ("op_role", "op_role_var", "op_namescope", "op_callstack", "op_device")


@dataclasses.dataclass(frozen=True)
class VarSpec:
    """Static description of a tensor: shape (``-1`` = unknown, e.g. the batch dim) and dtype."""

    shape: Tuple[int, ...]
    dtype: VarType
    lod_level: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))
        object.__setattr__(self, "dtype", convert_np_dtype_to_dtype_(self.dtype))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def with_(self, shape: Optional[Sequence[int]] = None, dtype: Any = None) -> "VarSpec":
        return VarSpec(self.shape if shape is None else tuple(shape),
                       self.dtype if dtype is None else dtype, self.lod_level)


@dataclasses.dataclass(frozen=True)
class Slot:
    name: str
    duplicable: bool = False
    dispensable: bool = False

    @classmethod
    def parse(cls, spec: str) -> "Slot":
        name = spec.rstrip("*?")
        tail = spec[len(name):]
        return cls(name, "*" in tail, "?" in tail)


class Binding(NamedTuple):
    """What ``OpDef.bind`` returns: the callable the plan calls and how to read its result."""

    fn: Callable[..., Any]
    single: bool                            # fn returns the one output array itself
    result_keys: Mapping[str, str] = {}     # output slot -> key of fn's result dict


@dataclasses.dataclass
class OpDesc:
    """A plain op description (what a grad maker emits before it is appended to a block)."""

    type: str
    inputs: Dict[str, List[str]]
    outputs: Dict[str, List[str]]
    attrs: Dict[str, Any]



class UnknownAttributeWarning(UserWarning):
    """An op was given an attribute it does not declare; the attribute was dropped (fluid
    1.8 dropped such attributes silently)."""

class OpDef:
    """Base class of every op definition (see module docstring)."""

    type: ClassVar[str] = ""
    inputs: ClassVar[Tuple[str, ...]] = ()
    outputs: ClassVar[Tuple[str, ...]] = ()
    grad_uses: ClassVar[Optional[Tuple[str, ...]]] = None   # None: all forward inputs
    grad_like: ClassVar[Dict[str, str]] = {}     # input slot -> grad_uses slot with its spec
    # the input slots whose gradients the generated grad op writes (Paddle's grad maker sets
    # only these ``<slot>@GRAD`` outputs, e.g. sequence_expand_as: X, never Y); None: all
    grad_outputs: ClassVar[Optional[Tuple[str, ...]]] = None
    no_grad: ClassVar[bool] = False
    uses_rng: ClassVar[bool] = False
    extra_attrs: ClassVar[Dict[str, Any]] = {}
    # output slots whose arrays are always fresh: C-contiguous buffers shared with no input and
    # no other output, so the plan may hand them to a consumer that writes in place (the
    # data-parallel all-reduce); ``fresh_grads``: the same for the generated ``<type>_grad``'s
    # ``<slot>@GRAD`` outputs. tests/test_fresh_outputs.py checks every declaration.
    fresh_outputs: ClassVar[Tuple[str, ...]] = ()
    fresh_grads: ClassVar[Tuple[str, ...]] = ()
    # input slots the kernel reads only for their shape and dtype, never their values (fluid's
    # NoNeedBufferVars): the plan may bind a placeholder of that shape there (a fused forward
    # that never makes the array, executor/fusion/patterns/linear_act.py); ``grad_shape_only``:
    # the same for the generated ``<type>_grad``'s inputs. tests/test_fusion_linear_act.py
    # checks every declaration.
    shape_only_inputs: ClassVar[Tuple[str, ...]] = ()
    grad_shape_only: ClassVar[Tuple[str, ...]] = ()
    # the gradient is cheaper from a value the forward makes anyway (GELU's erf and exp):
    # ``forward_saving`` returns forward's outputs and that value, ``backward_saved(saved,
    # *grad inputs)`` the gradient ``backward`` gives, bit for bit. The plan pairs such an op
    # with its ``<type>_grad`` (executor/fusion/patterns/saved_grad.py);
    # tests/test_fusion_saved_grad.py checks every declaration.
    saves_for_grad: ClassVar[bool] = False
    # output slot -> input slot whose arrays it returns unchanged (the same objects, in order):
    # ownership passes through such an op (c_sync_calc_stream between a gradient and its
    # all-reduce)
    passes_through: ClassVar[Dict[str, str]] = {}
    # -- what the executor reads instead of knowing op types (docs/guides/extending.md) --------
    # the plan generates nothing for the op: the executor binds feeds and fetches itself
    plan_skip: ClassVar[bool] = False
    # without inputs and writing no persistable, the op's value is a compile-time constant:
    # the plan calls the kernel once when compiling and binds the result
    foldable: ClassVar[bool] = False
    # the kernel cannot raise on inputs of their declared shapes and dtypes, so the op may run
    # after fused in-place updates (the plan's commit tail, executor/fusion/matcher.py)
    infallible: ClassVar[bool] = False
    # the op owns ``attrs['sub_block']`` and has no kernel: the plan generates the block inline
    # (executor/blocks.py; the op class declares how, see ops/control_flow.py's ``_BlockOp``)
    sub_block_op: ClassVar[bool] = False
    # output slots whose previous value the kernel receives after its inputs (write_to_array)
    reads_outputs: ClassVar[Tuple[str, ...]] = ()
    # filled in by @register
    in_slots: ClassVar[Tuple[Slot, ...]] = ()
    out_slots: ClassVar[Tuple[Slot, ...]] = ()
    attr_defaults: ClassVar[Dict[str, Any]] = {}
    forward_def: ClassVar[Optional["OpDef"]] = None          # set on generated <type>_grad defs

    def infer(self, *specs: Any, **attrs: Any) -> Dict[str, Any]:
        raise NotImplementedError(f"op {self.type!r} defines no shape inference")

    def forward(self, *arrays: Any, **attrs: Any) -> Dict[str, Any]:
        raise NotImplementedError(f"op {self.type!r} defines no kernel")

    def run_infer(self, specs: Sequence[Any], attrs: Dict[str, Any]) -> Dict[str, Any]:
        """Call ``infer`` with the input specs and the attrs its signature names."""
        cls = type(self)
        if cls not in _INFER_PARAMS:
            params = inspect.signature(cls.infer).parameters.values()
            _INFER_PARAMS[cls] = (
                None if any(p.kind is p.VAR_KEYWORD for p in params)
                else frozenset(p.name for p in params if p.kind is p.KEYWORD_ONLY))
        accepted = _INFER_PARAMS[cls]
        kw = attrs if accepted is None else {k: v for k, v in attrs.items() if k in accepted}
        return self.infer(*specs, **kw)

    def lower(self, in_specs: Sequence[Any], attrs: Dict[str, Any]) -> Optional[Callable]:
        return None

    # fluid's InferVarType: the VarType of output variables that are not plain LoD tensors
    # (e.g. a sparse embedding's SELECTED_ROWS gradient). Called when the op is appended, only
    # for classes overriding it; ``in_types`` maps each input slot to its variables' types.
    def var_types(self, in_types: Mapping[str, List[Any]],
                  attrs: Mapping[str, Any]) -> Dict[str, Any]:
        return {}

    def grad_var_types(self, in_types: Mapping[str, List[Any]],
                       attrs: Mapping[str, Any]) -> Dict[str, Any]:
        """``var_types`` of the generated ``<type>_grad`` op (keys ``<slot>@GRAD``)."""
        return {}

    def lower_grad(self, in_specs: Sequence[Any], attrs: Dict[str, Any],
                   wanted: AbstractSet[str]) -> Optional[Callable]:
        """A fast path for this op's generated ``<type>_grad`` op, as ``lower`` is for
        ``forward``: given the grad op's input specs (``grad_uses`` then the output gradients;
        an entry may be None when unknown) and the kernel attrs, a callable taking those
        inputs positionally and returning ``{input slot: gradient}`` for the slots in
        ``wanted`` -- the same arrays ``backward`` returns, bit for bit -- or None (the
        backward rule runs)."""
        return None

    def kernel_attrs(self, attrs: Mapping[str, Any]) -> Dict[str, Any]:
        """The attrs ``forward`` takes (framework and extra attrs removed)."""
        return {k: v for k, v in attrs.items() if k in self.attr_defaults and k not in COMMON_ATTRS}

    def bind(self, in_specs: Sequence[Any], attrs: Mapping[str, Any],
             outputs_present: AbstractSet[str]) -> Binding:
        """The callable the plan calls for this op (see the module docstring).

        ``lower``'s fast path when it gives one (never for random ops: they take ``rng``; for
        a single-output op only when that output is wanted); otherwise ``forward`` with the
        kernel attrs bound.
        """
        kw = self.kernel_attrs(attrs)
        single = (len(self.out_slots) == 1 and not self.out_slots[0].duplicable
                  and self.out_slots[0].name in outputs_present)
        if (single or len(self.out_slots) > 1) and not self.uses_rng:
            fast = self.lower(in_specs, kw)
            if fast is not None:
                return Binding(fast, single)
        return Binding(functools.partial(self.forward, **kw) if kw else self.forward, False)

    # -- gradient ---------------------------------------------------------------------------
    @property
    def differentiable(self) -> bool:
        return not self.no_grad and (self.has_backward() or self.has_make_grad())

    @classmethod
    def has_backward(cls) -> bool:
        return cls.backward is not OpDef.backward

    @classmethod
    def has_make_grad(cls) -> bool:
        return cls.make_grad is not OpDef.make_grad

    def backward(self, *args: Any, **attrs: Any) -> Dict[str, Any]:  # pragma: no cover
        raise NotImplementedError

    def make_grad(self, g: "GradBuilder", **attrs: Any) -> None:  # pragma: no cover
        raise NotImplementedError

    def forward_saving(self, *arrays: Any, **attrs: Any) -> Tuple[Dict[str, Any], Any]:
        """``forward``'s outputs and the value ``backward_saved`` reads (``saves_for_grad``;
        this default saves nothing)."""
        return self.forward(*arrays, **attrs), None

    def backward_saved(self, saved: Any, *arrays: Any, **attrs: Any) -> Dict[str, Any]:
        """``backward`` given what ``forward_saving`` saved (this default ignores it)."""
        return self.backward(*arrays, **attrs)

    def grad_op_descs(self, g: "GradBuilder") -> List[OpDesc]:
        """The grad ops for one forward op (Paddle's GradOpMaker)."""
        if self.no_grad:
            return []
        attrs = g.kernel_attrs()
        if self.has_make_grad():
            self.make_grad(g, **attrs)
        elif self.has_backward():
            uses = self.grad_uses if self.grad_uses is not None else tuple(
                s.name for s in self.in_slots)
            inputs = {}
            for slot in uses:
                names_ = g.input(slot) if slot in self._in_names() else g.output(slot)
                if names_ is not None:
                    inputs[slot] = _as_list(names_)
            for s in self.out_slots:
                grads = g.output_grad(s.name)
                if grads is not None:
                    inputs[s.name + names.GRAD_SUFFIX] = _as_list(grads)
            outputs = {}
            for s in self.in_slots:
                if self.grad_outputs is not None and s.name not in self.grad_outputs:
                    continue
                grads = g.input_grad(s.name)
                if grads is not None:
                    outputs[s.name + names.GRAD_SUFFIX] = _as_list(grads)
            g.append(self.type + "_grad", inputs, outputs, attrs)
        return g.ops

    @classmethod
    def _in_names(cls) -> Tuple[str, ...]:
        return tuple(s.name for s in cls.in_slots)

    # -- attrs ------------------------------------------------------------------------------
    def check_attrs(self, attrs: Dict[str, Any]) -> Dict[str, Any]:
        """Fill defaults, reject ill-typed attrs, drop (with an ``UnknownAttributeWarning``)
        attrs the op does not declare -- fluid 1.8 copied only its OpProto's attributes into
        an op and ignored the rest, and scripts of its model zoo rely on that; the warning
        makes a misspelt name visible. Returns the normalized dict."""
        out: Dict[str, Any] = {}
        for key, value in attrs.items():
            if key in COMMON_ATTRS:
                out[key] = value
                continue
            if key in self.attr_defaults:
                default = self.attr_defaults[key]
            elif key in self.extra_attrs:
                default = self.extra_attrs[key]
            else:
                known = sorted(self.attr_defaults) + sorted(self.extra_attrs)
                warnings.warn(f"op '{self.type}' has no attribute '{key}' (its attributes are "
                              f"{known}): ignored, as fluid ignored attributes its ops do not "
                              f"declare; if you meant one of those, fix the spelling",
                              UnknownAttributeWarning, stacklevel=user_stacklevel())
                continue
            out[key] = _coerce_attr(self.type, key, value, default)
        for key, default in self.attr_defaults.items():
            out.setdefault(key, _copy_default(default))
        return out


def _copy_default(value: Any) -> Any:
    return list(value) if isinstance(value, (list, tuple)) else value


def _coerce_attr(op_type: str, key: str, value: Any, default: Any) -> Any:
    def bad(expected: str) -> TypeError:
        return TypeError(f"op '{op_type}': attribute '{key}' expects {expected}, "
                         f"but received {value!r} of type {type(value).__name__}")

    if default is None or value is None:
        return value
    if isinstance(default, VarType):
        try:
            return convert_np_dtype_to_dtype_(value)
        except (TypeError, ValueError, KeyError):
            raise bad("a data type") from None
    if isinstance(default, (bool, np.bool_)):
        if not isinstance(value, (bool, np.bool_)):
            raise bad("bool")
        return bool(value)
    if isinstance(default, int):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            raise bad("int")
        return int(value)
    if isinstance(default, float):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number)):
            raise bad("float")
        if isinstance(value, (int, np.integer)) and abs(int(value)) > 2 ** 53:
            return int(value)       # a float would round it (fill_constant of a big int64)
        return float(value)
    if isinstance(default, str):
        if not isinstance(value, str):
            raise bad("str")
        return value
    if isinstance(default, (list, tuple)):
        if isinstance(value, np.ndarray):
            value = value.tolist()
        if not isinstance(value, (list, tuple)):
            raise bad("a list")
        return list(value)
    return value


def _as_list(x: Union[str, Sequence[str]]) -> List[str]:
    return [x] if isinstance(x, str) else list(x)


_OpT = TypeVar("_OpT", bound=Type["OpDef"])


# -- registration -----------------------------------------------------------------------------
_REGISTRY: Dict[str, OpDef] = {}


def register(cls: _OpT) -> _OpT:
    """Class decorator: validate the definition, read attrs from ``forward``'s signature, and
    register it (plus a generated ``<type>_grad`` def when it defines ``backward``)."""
    if not cls.type:
        raise ValueError(f"{cls.__name__} has no op type")
    if cls.type in _REGISTRY:
        raise ValueError(f"op '{cls.type}' is registered twice")
    cls.in_slots = tuple(Slot.parse(s) for s in cls.inputs)
    cls.out_slots = tuple(Slot.parse(s) for s in cls.outputs)
    if cls.forward is not OpDef.forward:
        sig = inspect.signature(cls.forward)
        cls.attr_defaults = {
            p.name: p.default for p in sig.parameters.values()
            if p.kind is p.KEYWORD_ONLY and p.name != "rng"}
    else:
        cls.attr_defaults = dict(getattr(cls, "attr_defaults", {}))
    _REGISTRY[cls.type] = cls()
    if cls.has_backward() and not cls.no_grad and cls.type + "_grad" not in _REGISTRY:
        _register_grad_def(cls)
    return cls


def _register_grad_def(fwd: Type["OpDef"]) -> None:
    fwd_def: OpDef = _REGISTRY[fwd.type]
    uses = fwd.grad_uses if fwd.grad_uses is not None else fwd._in_names()
    slots = {s.name: s for s in fwd.in_slots + fwd.out_slots}
    ins = tuple(u + ("*" if slots[u].duplicable else "") + "?" for u in uses)
    ins += tuple(s.name + names.GRAD_SUFFIX + ("*" if s.duplicable else "") + "?"
                 for s in fwd.out_slots)
    outs = tuple(s.name + names.GRAD_SUFFIX + ("*" if s.duplicable else "") + "?"
                 for s in fwd.in_slots
                 if fwd.grad_outputs is None or s.name in fwd.grad_outputs)
    out_slot_names = [s.name for s in fwd.out_slots]
    # a backward rule may take ``wanted`` (the input slots whose gradients are consumed) to
    # skip work for gradients nobody reads, e.g. mul_grad's dX when X is fed data
    takes_wanted = "wanted" in inspect.signature(fwd.backward).parameters
    in_names = [Slot.parse(x).name for x in ins]
    like = dict(fwd.grad_like)    # e.g. {"X": "Out"} for shape-keeping unary ops ...
    like.update((s.name, s.name) for s in fwd.in_slots if s.name in uses)  # ... X itself wins
    arg_keys = tuple(uses) + tuple("d" + o for o in out_slot_names)
    # when backward's leading positional parameters are exactly arg_keys, the plan calls it
    # directly (positionally) instead of through a keyword mapping
    params = [p for p in inspect.signature(fwd.backward).parameters.values()][1:]
    positional = [p.name for p in params if p.kind is p.POSITIONAL_OR_KEYWORD]
    direct = tuple(positional[:len(arg_keys)]) == arg_keys
    # backward() returns {"X": dX}; output slot "X@GRAD" is read from key "X"
    result_keys = {s.name + names.GRAD_SUFFIX: s.name for s in fwd.in_slots}

    def call_backward(*arrays: Any, **attrs: Any) -> Dict[str, Any]:
        return fwd_def.backward(**dict(zip(arg_keys, arrays)), **attrs)

    rule = fwd_def.backward if direct else call_backward

    class GradDef(OpDef):
        __doc__ = f"Gradient of '{fwd.type}' (generated from its backward rule)."
        type = fwd.type + "_grad"
        inputs, outputs = ins, outs
        forward_def = fwd_def
        extra_attrs = dict(fwd.extra_attrs)
        fresh_outputs = tuple(s + names.GRAD_SUFFIX for s in fwd.fresh_grads)
        shape_only_inputs = tuple(fwd.grad_shape_only)

        def infer(self, *specs: Any, **attrs: Any) -> Dict[str, Any]:
            # <X>@GRAD is shaped like X: read X's spec from the grad op's own inputs (the backward
            # pass also creates grad vars this way; this types temporaries that higher-order
            # compositions write through grad ops)
            got = dict(zip(in_names, specs))
            return {k + names.GRAD_SUFFIX: got[v] for k, v in like.items()
                    if isinstance(got.get(v), (VarSpec, list))}

        def bind(self, in_specs: Sequence[Any], attrs: Mapping[str, Any],
                 outputs_present: AbstractSet[str]) -> Binding:
            """Call the backward rule itself and read its ``{input slot: grad}`` dict; a rule
            taking ``wanted`` is told which input gradients are written (the others are
            skipped)."""
            kw = self.kernel_attrs(attrs)
            wanted = frozenset(s[:-len(names.GRAD_SUFFIX)] for s in outputs_present)
            fast = fwd_def.lower_grad(in_specs, kw, wanted)
            if fast is not None:
                return Binding(fast, False, result_keys)
            if takes_wanted:
                kw["wanted"] = wanted
            return Binding(functools.partial(rule, **kw) if kw else rule, False, result_keys)

        def forward(self, *arrays: Any, wanted: Any = None, **attrs: Any) -> Dict[str, Any]:
            if takes_wanted:
                attrs["wanted"] = wanted
            return {k + names.GRAD_SUFFIX: v
                    for k, v in call_backward(*arrays, **attrs).items()}

    GradDef.__name__ = GradDef.__qualname__ = fwd.__name__ + "Grad"
    if fwd.grad_var_types is not OpDef.grad_var_types:     # e.g. a sparse W@GRAD
        GradDef.var_types = lambda self, in_types, attrs: fwd_def.grad_var_types(in_types, attrs)
    double = getattr(fwd, "double_grad", None)
    if double is not None:            # optional higher-order rule for the generated grad op
        GradDef.make_grad = double
    GradDef.attr_defaults = {}
    GradDef.in_slots = tuple(Slot.parse(s) for s in ins)
    GradDef.out_slots = tuple(Slot.parse(s) for s in outs)
    inst = GradDef()
    inst.attr_defaults = dict(fwd_def.attr_defaults)
    _REGISTRY[GradDef.type] = inst


def get_op_def(op_type: str) -> OpDef:
    """The registered definition of ``op_type``; ValueError as fluid when unknown."""
    try:
        return _REGISTRY[op_type]
    except KeyError:
        import difflib
        close = difflib.get_close_matches(op_type, _REGISTRY, n=3)
        hint = f" Did you mean {close}?" if close else ""
        raise ValueError(f'Operator "{op_type}" has not been registered.{hint}') from None


def has_op(op_type: str) -> bool:
    return op_type in _REGISTRY


def all_op_types() -> List[str]:
    return sorted(_REGISTRY)


# -- gradient builder -------------------------------------------------------------------------
class GradBuilder:
    """What a grad maker sees of one forward op; collects the grad ``OpDesc``s it emits.

    ``input_grad(slot)`` returns the names to write (``X@GRAD``; ``@EMPTY@`` for entries that need
    no gradient), or None when no entry of the slot needs one. ``output_grad(slot)`` returns the
    incoming gradient names (the backward pass guarantees they exist).
    """

    def __init__(self, op: Any, no_grad_names: Iterable[str] = (),
                 tmp_prefix: Optional[str] = None,
                 grad_name: Optional[Callable[[str], str]] = None) -> None:
        self.op = op
        self.no_grad = set(no_grad_names)
        self.ops: List[OpDesc] = []
        self._tmp_prefix = tmp_prefix or op.type + "_grad"
        # forward var name -> its gradient's name in this backward pass (``x@GRAD``, or a
        # unique ``x@GRAD_0`` when a previous pass already owns ``x@GRAD``)
        self._grad_name = grad_name or names.grad_var_name

    def input(self, slot: str) -> Any:
        return self._one_or_list(slot, self.op.inputs)

    def output(self, slot: str) -> Any:
        return self._one_or_list(slot, self.op.outputs)

    def output_grad(self, slot: str) -> Any:
        names_ = self.op.outputs.get(slot)
        if not names_:
            return None
        return self._shape_like(slot, [self._grad_name(n) for n in names_], self.op.outputs)

    def input_grad(self, slot: str) -> Any:
        names_ = self.op.inputs.get(slot)
        if not names_ or all(n in self.no_grad for n in names_):
            return None
        grads = [names.EMPTY_VAR_NAME if n in self.no_grad else self._grad_name(n)
                 for n in names_]
        return self._shape_like(slot, grads, self.op.inputs)

    def attr(self, name: str) -> Any:
        return self.op.attr(name)

    def kernel_attrs(self) -> Dict[str, Any]:
        return {k: v for k, v in self.op.all_attrs().items() if k not in COMMON_ATTRS}

    def tmp(self, hint: str = "tmp") -> str:
        return names.generate(f"{self._tmp_prefix}.{hint}")

    def append(self, type: str, inputs: Optional[Dict[str, Any]] = None,
               outputs: Optional[Dict[str, Any]] = None, attrs: Optional[Dict[str, Any]] = None,
               **kw_attrs: Any) -> None:
        attrs = dict(attrs or {}, **kw_attrs)
        norm = lambda d: {k: _as_list(v) for k, v in (d or {}).items() if v is not None}
        self.ops.append(OpDesc(type, norm(inputs), norm(outputs), attrs))

    def _one_or_list(self, slot: str, table: Dict[str, List[str]]) -> Any:
        names_ = table.get(slot)
        if not names_:
            return None
        return self._shape_like(slot, list(names_), table)

    def _shape_like(self, slot: str, values: List[str], table: Dict[str, List[str]]) -> Any:
        d = get_op_def(self.op.type)
        slots = {s.name: s for s in d.in_slots + d.out_slots}
        if slot in slots and slots[slot].duplicable:
            return values
        return values[0]
