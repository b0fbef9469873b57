"""The Program IR: ``Program`` > ``Block`` > (``Variable`` | ``Parameter``, ``Operator``).
(``Variable`` and ``Parameter`` live in ``core/variable.py`` and are re-exported here.)

Mirrors fluid's Python framework objects, minus the C++ desc layer: an Operator holds slot ->
variable-name lists and an attr dict. Every mutation goes through a Block method (or a setter)
that bumps ``program.version``, which is what the executor keys its plan cache on.
"""
from __future__ import annotations

import contextlib
import copy
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Union

from . import names, registry
from .dtypes import VarType, convert_np_dtype_to_dtype_
from .callstack import creation_site, user_callstack  # noqa: F401  (re-exported)
from .errors import InvalidArgument
from .registry import VarSpec
from .variable import Parameter, Variable, _journal, _restore_dict  # noqa: F401  (re-exported)

# Program methods whose implementation lives above the IR: serialization (fluidlite/formats) and
# pruning / linting (core/prune.py, core/lint.py). Each provider registers itself when imported
# (``fluidlite`` imports them all), so the IR imports none of them.
_SERVICES: Dict[str, Callable[..., Any]] = {}


def provide(name: str, fn: Callable[..., Any]) -> None:
    """Register ``fn`` as the implementation of the Program service ``name`` (e.g. ``"to_dict"``,
    ``"prune"``); a later registration replaces an earlier one."""
    _SERVICES[name] = fn


def _service(name: str) -> Callable[..., Any]:
    fn = _SERVICES.get(name)
    if fn is None:
        raise RuntimeError(f"Program service '{name}' is not available: import fluidlite (it "
                           f"registers the file formats, pruning and lint) before using it")
    return fn


class OpRole:
    """fluid's ``core.op_proto_and_checker_maker.OpRole`` bit values."""

    Forward = 0x0
    Backward = 0x1
    Optimize = 0x2
    RPC = 0x4
    Dist = 0x8
    LRSched = 0x10
    Collective = 0x20
    Loss = 0x100
    NotSpecified = 0x1000


# -- Operator ---------------------------------------------------------------------------------
class OpArgs:
    """``input_arg_names`` / ``output_arg_names`` over ``inputs`` / ``outputs`` (slot -> names):
    shared by ``Operator`` and every op-like view (backward's, the plan's fused ops, ONNX's)."""

    inputs: Dict[str, List[str]]
    outputs: Dict[str, List[str]]

    @property
    def input_arg_names(self) -> List[str]:
        return [n for v in self.inputs.values() for n in v]

    @property
    def output_arg_names(self) -> List[str]:
        return [n for v in self.outputs.values() for n in v]


class _TrackedList(list):
    """A slot's variable names: any change is a change of the op's program (see ``_Tracked``)."""

    __slots__ = ("_op",)

    def __init__(self, op: "Operator", items: Any = ()) -> None:
        super().__init__(items)
        self._op = op

    def _changed(self) -> None:
        self._op._will_change(self, list(self))

    def __setitem__(self, i: Any, v: Any) -> None:
        self._changed()
        super().__setitem__(i, v)

    def __delitem__(self, i: Any) -> None:
        self._changed()
        super().__delitem__(i)

    def __iadd__(self, other: Any) -> "_TrackedList":
        self._changed()
        return super().__iadd__(other)

    def __reduce_ex__(self, protocol: Any) -> Any:     # copies are plain lists
        return (list, (list(self),))


def _tracked_mutator(name: str) -> Callable[..., Any]:
    base = getattr(list, name)

    def mutate(self: _TrackedList, *args: Any) -> Any:
        self._changed()
        return base(self, *args)
    mutate.__name__ = name
    return mutate


for _m in ("append", "extend", "insert", "remove", "pop", "clear", "sort", "reverse"):
    setattr(_TrackedList, _m, _tracked_mutator(_m))


class _Tracked(dict):
    """An op's ``inputs`` / ``outputs`` / ``attrs``: a dict whose every change (``op.attrs[k] =
    v``, ``del``, ``update``, ..., and the slot lists' own changes) bumps the program's
    ``version`` -- so a cached plan never runs a stale op -- and is journaled inside a
    transaction, so a failed build undoes it (torch.fx keeps its records current the same
    way). ``slots``: values are slot lists, kept as ``_TrackedList``."""

    __slots__ = ("_op", "_slots")

    def __init__(self, op: "Operator", items: Dict[str, Any], slots: bool) -> None:
        super().__init__()
        self._op, self._slots = op, slots
        for k, v in items.items():
            dict.__setitem__(self, k, self._wrap(v))

    def _wrap(self, v: Any) -> Any:
        return _TrackedList(self._op, v) if self._slots else v

    def __setitem__(self, k: str, v: Any) -> None:
        self._op._will_change(self, dict(self))
        dict.__setitem__(self, k, self._wrap(v))

    def __delitem__(self, k: str) -> None:
        self._op._will_change(self, dict(self))
        dict.__delitem__(self, k)

    def pop(self, *args: Any) -> Any:
        self._op._will_change(self, dict(self))
        return dict.pop(self, *args)

    def popitem(self) -> Any:
        self._op._will_change(self, dict(self))
        return dict.popitem(self)

    def clear(self) -> None:
        self._op._will_change(self, dict(self))
        dict.clear(self)

    def update(self, *args: Any, **kw: Any) -> None:
        self._op._will_change(self, dict(self))
        for k, v in dict(*args, **kw).items():
            dict.__setitem__(self, k, self._wrap(v))

    def setdefault(self, k: str, default: Any = None) -> Any:
        if k not in self:
            self[k] = default
        return dict.__getitem__(self, k)

    def __reduce_ex__(self, protocol: Any) -> Any:     # copies are plain dicts
        return (dict, (dict(self),))


class Operator(OpArgs):
    """One op: ``type``, slot -> variable-name lists for inputs and outputs, and attrs.

    ``inputs``, ``outputs`` and ``attrs`` report every change to the program (its ``version``
    moves, so executors recompile; inside a transaction the change is undone on failure),
    however it is made: ``_set_attr``, ``op.attrs[k] = v``, or editing a slot's list."""

    def __init__(self, block: "Block", type: str, inputs: Dict[str, List[str]],
                 outputs: Dict[str, List[str]], attrs: Dict[str, Any]) -> None:
        self.block, self.type = block, type
        self._inputs = _Tracked(self, inputs, slots=True)
        self._outputs = _Tracked(self, outputs, slots=True)
        self._attrs = _Tracked(self, attrs, slots=False)

    @property
    def inputs(self) -> Dict[str, List[str]]:
        return self._inputs

    @inputs.setter
    def inputs(self, value: Dict[str, List[str]]) -> None:
        self._inputs.clear()
        self._inputs.update(value)

    @property
    def outputs(self) -> Dict[str, List[str]]:
        return self._outputs

    @outputs.setter
    def outputs(self, value: Dict[str, List[str]]) -> None:
        self._outputs.clear()
        self._outputs.update(value)

    @property
    def attrs(self) -> Dict[str, Any]:
        return self._attrs

    @attrs.setter
    def attrs(self, value: Dict[str, Any]) -> None:
        self._attrs.clear()
        self._attrs.update(value)

    def _will_change(self, container: Any, before: Any) -> None:
        """``container`` (one of this op's dicts or slot lists, now holding ``before``) is
        about to change: journal how to put it back, and bump the program's version."""
        program = self.block.program
        if program._journal is not None:
            if isinstance(container, dict):
                _journal(program, lambda: (dict.clear(container),
                                           dict.update(container, before)))
            else:
                _journal(program, lambda: list.__setitem__(container, slice(None), before))
        program._bump()

    @property
    def idx(self) -> int:
        for i, op in enumerate(self.block.ops):
            if op is self:
                return i
        raise ValueError("Can't find op itself in it's block. It could be a bug of Paddle.")

    @property
    def desc(self) -> "Operator":
        return self

    def input(self, name: str) -> List[str]:
        return list(self.inputs.get(name, []))

    def output(self, name: str) -> List[str]:
        return list(self.outputs.get(name, []))

    @property
    def input_names(self) -> List[str]:
        return list(self.inputs)

    @property
    def output_names(self) -> List[str]:
        return list(self.outputs)


    def attr(self, name: str) -> Any:
        return self.attrs.get(name)

    def has_attr(self, name: str) -> bool:
        return name in self.attrs

    @property
    def attr_names(self) -> List[str]:
        return sorted(self.attrs)

    def all_attrs(self) -> Dict[str, Any]:
        return dict(self.attrs)


    def _set_attr(self, name: str, value: Any) -> None:
        self.attrs[name] = value

    def _remove_attr(self, name: str) -> None:
        if name in self.attrs:
            del self.attrs[name]

    def _rename_input(self, old: str, new: str) -> None:
        for v in self.inputs.values():
            if old in v:
                v[:] = [new if n == old else n for n in v]

    def _rename_output(self, old: str, new: str) -> None:
        for v in self.outputs.values():
            if old in v:
                v[:] = [new if n == old else n for n in v]

    def to_string(self, throw_on_error: bool = False) -> str:
        fmt = lambda d: ", ".join(f"{k}={v}" for k, v in d.items())
        attrs = ", ".join(f"{k} = {_fmt_attr(self.attrs[k])}" for k in sorted(self.attrs)
                          if k != "op_callstack")
        sep = ", " if attrs else ""
        return (f"{{{fmt(self.outputs)}}} = {self.type}(inputs={{{fmt(self.inputs)}}}"
                f"{sep}{attrs})")

    def __str__(self) -> str:
        return self.to_string()

    __repr__ = __str__


def _fmt_attr(v: Any) -> str:
    if isinstance(v, Block):            # fluid prints a block attribute by its index
        return f"block[{v.idx}]"
    if isinstance(v, list) and v and all(isinstance(b, Block) for b in v):
        return "[" + ", ".join(f"block[{b.idx}]" for b in v) + "]"
    if isinstance(v, VarType):
        return str(int(v))
    if isinstance(v, float):
        return repr(v)
    return str(v)


# -- Block ------------------------------------------------------------------------------------
_Arg = Union[None, str, Variable, Sequence[Union[str, Variable]]]


class Block:
    """An ordered list of ops plus the variables they use."""

    def __init__(self, program: "Program", idx: int, parent_idx: int = -1) -> None:
        self.program, self.idx, self.parent_idx = program, idx, parent_idx
        self.forward_block_idx = -1
        self.vars: Dict[str, Variable] = {}
        self.ops: List[Operator] = []

    # -- variables ------------------------------------------------------------------------
    def var(self, name: str) -> Variable:
        if not isinstance(name, str):
            raise TypeError(f"var require string as parameter, but get {type(name)} instead.")
        v = self.vars.get(name)
        if v is None:
            raise ValueError(f"var {name} not in this block")
        return v

    def has_var(self, name: str) -> bool:
        return name in self.vars

    def _find_var_recursive(self, name: str) -> Optional[Variable]:
        block: Optional[Block] = self
        while block is not None:
            v = block.vars.get(name)
            if v is not None:
                return v
            block = self.program.blocks[block.parent_idx] if block.parent_idx >= 0 else None
        return None

    def _var_recursive(self, name: str) -> Variable:
        v = self._find_var_recursive(name)
        if v is None:
            raise ValueError(f"Var {name} is not found recursively")
        return v

    def create_var(self, **kwargs: Any) -> Variable:
        """Create a Variable, or return the existing one of that name (conflicts raise)."""
        initializer = kwargs.pop("initializer", None)
        name = kwargs.get("name")
        if name is not None and name in self.vars:
            old = self.vars[name]
            _check_redeclare(old, kwargs)
            var = old
        else:
            var = Variable(self, **kwargs)
            self.vars[var.name] = var
            self.program._bump()
            _journal(self.program, lambda n=var.name: self.vars.pop(n))
        if initializer is not None:
            initializer(var, self)
        return var

    def create_parameter(self, shape: Sequence[int], dtype: Any, **kwargs: Any) -> Parameter:
        """Create a Parameter in the global block (running ``initializer`` if given)."""
        glob = self.program.global_block()
        initializer = kwargs.pop("initializer", None)
        name = kwargs.get("name") or names.generate("_generated_param")
        kwargs["name"] = name
        existed = name in glob.vars
        if existed:
            param = glob.vars[name]
            if not isinstance(param, Parameter):
                raise ValueError(f"Variable {name} already exists and is not a Parameter")
            # fluid 1.8 rebuilt the Parameter from the new arguments: attributes given now
            # (e.g. need_clip=False, a regularizer) replace the earlier ones
            given = {k: kwargs[k] for k in Parameter._PY_ATTRS if k in kwargs}
            if given:
                old = {k: getattr(param, k) for k in given}
                param.__dict__.update(given)
                _journal(self.program, lambda: param.__dict__.update(old))
        else:
            param = Parameter(glob, shape, dtype, **kwargs)
            glob.vars[name] = param
            self.program._bump()
            _journal(self.program, lambda: glob.vars.pop(name))
        if initializer is not None:
            # a parameter created just now has no init op yet: scanning the block's ops for
            # every new parameter made building an N-layer model O(N^2)
            init_ops = [op for op in glob.ops if name in op.output_arg_names] if existed else []
            if len(init_ops) > 1:
                raise RuntimeError(f"param {name} is inited by multiple init ops {init_ops}")
            if not init_ops:
                initializer(param, glob)
        return param

    def all_parameters(self) -> List[Parameter]:
        return [v for v in self.vars.values() if isinstance(v, Parameter)]


    def _remove_var(self, name: str) -> None:
        self._journal_vars()
        self.vars.pop(name, None)
        self.program._bump()

    def _rename_var(self, old: str, new: str) -> Variable:
        if old not in self.vars:
            raise ValueError(f"var {old} is not in current block")
        self._journal_vars()
        var = self.vars.pop(old)
        var._name = new
        self.vars[new] = var
        for op in self.ops:
            op._rename_input(old, new)
            op._rename_output(old, new)
        self.program._bump()
        return var

    def _journal_vars(self) -> None:
        # removals and renames reorder the dict: keep its whole order (rare, O(vars))
        if self.program._journal is not None:
            saved = list(self.vars.items())
            _journal(self.program, lambda: _restore_dict(self.vars, saved))

    def _clone_variable(self, var: Variable, force_persistable: bool = True) -> Variable:
        return self.create_var(name=var.name, shape=var.shape, dtype=var.dtype, type=var.type,
                               lod_level=var.lod_level,
                               persistable=True if force_persistable else var.persistable,
                               is_data=var.is_data)

    # -- ops ------------------------------------------------------------------------------
    def append_op(self, type: Optional[str] = None, inputs: Optional[Dict[str, _Arg]] = None,
                  outputs: Optional[Dict[str, _Arg]] = None,
                  attrs: Optional[Dict[str, Any]] = None, stop_gradient: bool = False) -> Operator:
        """Validate against the op definition, run shape inference, append; returns the op."""
        if type is None:        # fluid 1.8's Operator: a ValueError, not Python's TypeError
            raise ValueError("`type` to initialized an Operator can not be None.")
        op = self._make_op(type, inputs, outputs, attrs)
        self.ops.append(op)
        self.program._bump()
        _journal(self.program, self.ops.pop)
        return op

    def _insert_op(self, index: int, type: str, inputs: Optional[Dict[str, _Arg]] = None,
                   outputs: Optional[Dict[str, _Arg]] = None,
                   attrs: Optional[Dict[str, Any]] = None, **_: Any) -> Operator:
        op = self._make_op(type, inputs, outputs, attrs)
        self.ops.insert(index, op)
        self.program._bump()
        if self.program._journal is not None:
            _journal(self.program, lambda ops=self.ops: ops.remove(op))
        return op

    def _prepend_op(self, type: str, inputs: Optional[Dict[str, _Arg]] = None,
                    outputs: Optional[Dict[str, _Arg]] = None,
                    attrs: Optional[Dict[str, Any]] = None, **_: Any) -> Operator:
        return self._insert_op(0, type, inputs, outputs, attrs)

    def _remove_op(self, index: int, end: Optional[int] = None) -> None:
        span = slice(index, index + 1 if end is None else end)
        if self.program._journal is not None:
            ops, start, removed = self.ops, span.indices(len(self.ops))[0], self.ops[span]

            def undo() -> None:
                ops[start:start] = removed
            _journal(self.program, undo)
        del self.ops[span]
        self.program._bump()


    def _make_op(self, type: str, inputs: Optional[Dict[str, _Arg]],
                 outputs: Optional[Dict[str, _Arg]], attrs: Optional[Dict[str, Any]]) -> Operator:
        # grad ops arrive with their forward op's callstack: keep it, skip the stack walk
        callstack = (attrs or {}).get("op_callstack") or user_callstack()
        try:
            opdef = registry.get_op_def(type)
            ins = self._normalize_args(type, "Input", opdef.in_slots, inputs or {})
            outs = self._normalize_args(type, "Output", opdef.out_slots, outputs or {}, create=True)
            attrs = opdef.check_attrs(dict(attrs or {}))
        except (TypeError, ValueError) as e:
            raise type_of(e)(f"{e}\n  (op '{type}' created at {creation_site(callstack)})") \
                from None
        prog = self.program
        attrs.setdefault("op_role", prog._current_role)
        if prog._op_role_var:
            attrs.setdefault("op_role_var", list(prog._op_role_var))
        attrs.setdefault("op_namescope", names.current_name_scope())
        attrs.setdefault("op_callstack", callstack)
        attrs.setdefault("op_device", "")
        op = Operator(self, type, ins, outs, attrs)
        self._infer(opdef, op)
        for slot_names in outs.values():
            for n in slot_names:
                v = self._find_var_recursive(n)
                if v is not None:
                    v.op = op
        return op

    def _normalize_args(self, op_type: str, kind: str, slots: Sequence[registry.Slot],
                        args: Dict[str, _Arg], create: bool = False) -> Dict[str, List[str]]:
        known = {s.name: s for s in slots}
        out: Dict[str, List[str]] = {}
        for key, value in args.items():
            if key not in known:
                raise ValueError(f"op '{op_type}' has no {kind.lower()} slot '{key}'; its "
                                 f"{kind.lower()} slots are {list(known)}")
            items = value if isinstance(value, (list, tuple)) else [value]
            slot_names = []
            for item in items:
                if isinstance(item, Variable):
                    slot_names.append(item.name)
                elif isinstance(item, str):
                    slot_names.append(item)
                    if create and item != names.EMPTY_VAR_NAME and \
                            self._find_var_recursive(item) is None:
                        self.create_var(name=item)
                elif item is None:
                    continue
                else:
                    raise TypeError(f"op '{op_type}': {kind.lower()} '{key}' must be a Variable "
                                    f"or a variable name, but received {type(item).__name__}")
            if len(slot_names) > 1 and not known[key].duplicable:
                raise ValueError(f"{kind} {key} expects only one {kind.lower()}, but "
                                 f"{len(slot_names)} are given.")
            if slot_names or known[key].duplicable:
                out[key] = slot_names
        for s in slots:
            if not s.dispensable and s.name not in out:
                raise ValueError(f"{kind} {s.name} not found: op '{op_type}' requires "
                                 f"{kind.lower()} slot '{s.name}'")
        return out

    def infer_shapes(self, shapes: Dict[str, Sequence[int]]) -> None:
        """Give the variables named in ``shapes`` those shapes and re-run every op's shape
        inference in program order, so that what the ops declare follows (an inference
        program's feeds given the concrete sizes of a run: ``inference.predictor``).

        Args:
            shapes: {variable name: shape} (-1 for a dim left free).

        Raises:
            ValueError: a name is not a variable of this block, the block's program has
                sub-blocks (their ops would keep the shapes they had), or an op's shape
                inference rejects the new shapes (the message names the op).

        Example:
            >>> import fluidlite as fluid
            >>> main = fluid.Program()
            >>> with fluid.program_guard(main):
            ...     x = fluid.data("x", [-1, 3, -1, -1])
            ...     y = fluid.layers.pool2d(x, 2, pool_stride=2)
            >>> main.global_block().infer_shapes({"x": [-1, 3, 8, 8]})
            >>> main.global_block().var(y.name).shape
            (-1, 3, 4, 4)
        """
        if len(self.program.blocks) > 1:
            raise ValueError(f"infer_shapes: the program has {len(self.program.blocks)} blocks; "
                             f"only a program of one block can be re-inferred")
        for name, shape in shapes.items():
            var = self.vars.get(name)
            if var is None:
                raise ValueError(f"infer_shapes: '{name}' is not a variable of block "
                                 f"{self.idx}")
            var._set_spec(VarSpec([int(d) for d in shape], var.spec.dtype, var.lod_level))
        for op in self.ops:
            if registry.has_op(op.type):
                self._infer(registry.get_op_def(op.type), op)

    def _infer(self, opdef: registry.OpDef, op: Operator) -> None:
        specs = []
        for s in opdef.in_slots:
            arg_names = op.inputs.get(s.name)
            if not arg_names:
                specs.append([] if s.duplicable else None)
                continue
            vs = [None if n == names.EMPTY_VAR_NAME else self._spec_of(op, n) for n in arg_names]
            specs.append(vs if s.duplicable else vs[0])
        kernel_attrs = {k: v for k, v in op.attrs.items() if k not in registry.COMMON_ATTRS}
        try:
            result = opdef.run_infer(specs, kernel_attrs)
        except (ValueError, TypeError, IndexError, AssertionError) as e:
            shown = ", ".join(
                f"{s.name}={_fmt_specs(sp)}" for s, sp in zip(opdef.in_slots, specs) if sp)
            # (an InvalidArgument stays one: also fluid's core.EnforceNotMet)
            kind = InvalidArgument if isinstance(e, InvalidArgument) else ValueError
            raise kind(f"op '{op.type}' shape inference failed: {e}\n  inputs: {shown}\n"
                       f"  (created at {creation_site(op.attrs.get('op_callstack'))})") \
                from None
        for slot, spec in (result or {}).items():
            for n, sp in zip(op.outputs.get(slot, []), spec if isinstance(spec, list) else [spec]):
                if n == names.EMPTY_VAR_NAME or sp is None:
                    continue
                var = self._find_var_recursive(n)
                if var is not None:
                    var._set_spec(sp)
        if type(opdef).var_types is not registry.OpDef.var_types:
            self._infer_var_types(opdef, op, kernel_attrs)

    def _infer_var_types(self, opdef: registry.OpDef, op: Operator,
                         kernel_attrs: Dict[str, Any]) -> None:
        """fluid's InferVarType: set the VarType the op declares for its outputs (a sparse
        gradient is SELECTED_ROWS, ``core/selected_rows.py``)."""
        in_types = {slot: [getattr(self._find_var_recursive(n), "type", None) for n in ns]
                    for slot, ns in op.inputs.items()}
        for slot, vtype in opdef.var_types(in_types, kernel_attrs).items():
            outs = op.outputs.get(slot, [])
            for n, t in zip(outs, vtype if isinstance(vtype, list) else [vtype] * len(outs)):
                var = self._find_var_recursive(n) if n != names.EMPTY_VAR_NAME else None
                if var is not None:
                    var.type = t

    def _spec_of(self, op: Operator, name: str) -> VarSpec:
        var = self._find_var_recursive(name)
        if var is None:
            raise ValueError(f"op '{op.type}': input variable '{name}' does not exist in block "
                             f"{self.idx}\n  (created at "
                             f"{creation_site(op.attrs.get('op_callstack'))})")
        return var.spec

    def to_string(self, throw_on_error: bool = False, with_details: bool = False) -> str:
        lines = [f"{{ // block {self.idx}"]
        lines += ["    " + v.to_string(throw_on_error, with_details) for v in self.vars.values()]
        lines.append("")
        lines += ["    " + op.to_string(throw_on_error) for op in self.ops]
        lines.append("}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.to_string()


def type_of(e: Exception) -> type:
    return TypeError if isinstance(e, TypeError) else ValueError


def _fmt_specs(sp: Any) -> str:
    if isinstance(sp, list):
        return "[" + ", ".join(_fmt_specs(s) for s in sp) + "]"
    if sp is None:
        return "None"
    return f"{list(sp.shape)} {sp.dtype.name.lower()}"


def _check_redeclare(old: Variable, kw: Dict[str, Any]) -> None:
    checks = [("shape", lambda v: tuple(-1 if d is None else int(d) for d in v)),
              ("dtype", convert_np_dtype_to_dtype_), ("type", lambda v: v),
              ("lod_level", lambda v: v or 0), ("persistable", bool)]
    for key, norm in checks:
        new = kw.get(key)
        if new is None or (key == "shape" and not old.shape):
            continue
        prev = getattr(old, key)
        if prev is not None and norm(new) != prev:
            raise ValueError(f"Variable {old.name} has been created before. The previous {key} "
                             f"is {prev}; the new {key} is {norm(new)}. They are not matched.")


# -- Program ----------------------------------------------------------------------------------
# the random_seed a new Program starts with: fluid 1.8's framework.global_prog_seed, set by
# Program.global_seed
_global_prog_seed = 0


class Program:
    """A list of Blocks (block 0 is the global block) plus the state layers read while building.

    Args:
        None: the constructor takes no arguments.

    Returns:
        Program: an empty program holding one (global) block.

    Raises:
        None: the constructor does not raise.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 4])
        ...     y = fluid.layers.fc(x, size=2)
        >>> [op.type for op in main.global_block().ops]
        ['mul', 'elementwise_add']
        >>> [op.type for op in startup.global_block().ops]   # the parameters' initializers
        ['fill_constant', 'uniform_random']
    """

    _journal: Optional[List[Callable[[], Any]]] = None   # undo log of an active atomic()
    _version_high = 0                                      # the highest version ever given

    def __init__(self) -> None:
        self._journal = None
        self.blocks: List[Block] = [Block(self, 0)]
        self.current_block_idx = 0
        self._seed = _global_prog_seed      # fluid 1.8: Program.global_seed sets it
        self._version = 0
        self._current_role = OpRole.Forward
        self._op_role_var: List[str] = []
        self._appending_grad_times = 0
        self._is_distributed = False

    # -- version ------------------------------------------------------------------------
    def _bump(self) -> None:
        # never reuse a number: a rollback (core.atomic) puts an older version back, and a plan
        # cached at a version seen inside the rolled-back transaction must not match new edits
        self._version_high = max(self._version_high, self._version) + 1
        self._version = self._version_high

    @property
    def version(self) -> int:
        """Changes on every mutation (to a number never used before, even after a rollback by
        ``core.atomic`` restored an older one); the executor's plan cache is keyed on it."""
        return self._version

    # -- blocks / vars --------------------------------------------------------------------
    def global_block(self) -> Block:
        """Block 0, where layers add their ops unless a control-flow layer opened a sub-block.

        Args:
            None: this method takes no arguments.

        Returns:
            Block: block 0.

        Raises:
            None: this accessor does not raise.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main = fluid.Program()
            >>> with fluid.program_guard(main):
            ...     x = fluid.data("x", [-1, 3])
            >>> block = main.global_block()
            >>> block.idx, block.var("x").shape
            (0, (-1, 3))
        """
        return self.blocks[0]

    def block(self, index: int) -> Block:
        """Block number ``index`` (0 is the global block).

        Args:
            index (int): the block number, 0 <= index < ``num_blocks`` (negative numbers count from
                the end, as list indices do).

        Returns:
            Block: that block.

        Raises:
            IndexError: ``index`` is out of range.
            TypeError: ``index`` is not an int.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main = fluid.Program()
            >>> main.block(0) is main.global_block()
            True
        """
        return self.blocks[index]

    def current_block(self) -> Block:
        """The block layers append to now: the global block, or the sub-block a control-flow
        layer (``While``, ``cond``, ...) has open.

        Args:
            None: this method takes no arguments.

        Returns:
            Block: the block with index ``current_block_idx``.

        Raises:
            None: this accessor does not raise.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     print(main.current_block().idx)
            0
        """
        return self.blocks[self.current_block_idx]

    @property
    def num_blocks(self) -> int:
        return len(self.blocks)

    def _create_block(self, parent_idx: Optional[int] = None) -> Block:
        parent = self.current_block_idx if parent_idx is None else parent_idx
        block = Block(self, len(self.blocks), parent)
        self.blocks.append(block)
        self.current_block_idx = block.idx
        self._bump()
        _journal(self, self.blocks.pop)
        return block

    def _rollback(self) -> None:
        self.current_block_idx = self.current_block().parent_idx

    def list_vars(self) -> Iterator[Variable]:
        """Iterate over every variable of every block (block 0 first).

        Args:
            None: this method takes no arguments.

        Returns:
            Iterator[Variable]: every variable, block by block, in each block's creation order.

        Raises:
            None: this method does not raise (changing the blocks while iterating raises
                RuntimeError from the dict iteration).

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup), fluid.unique_name.guard():
            ...     x = fluid.data("x", [-1, 3])
            ...     y = fluid.layers.fc(x, size=2)
            >>> sorted(v.name for v in main.list_vars())
            ['fc_0.b_0', 'fc_0.tmp_0', 'fc_0.tmp_1', 'fc_0.w_0', 'x']
        """
        for block in self.blocks:
            yield from block.vars.values()

    def all_parameters(self) -> List[Parameter]:
        """Every Parameter of every block, in block order.

        Args:
            None: this method takes no arguments.

        Returns:
            list[Parameter]: the parameters of every block, in block order.

        Raises:
            None: this method does not raise.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup), fluid.unique_name.guard():
            ...     y = fluid.layers.fc(fluid.data("x", [-1, 3]), size=2)
            >>> [(p.name, p.shape) for p in main.all_parameters()]
            [('fc_0.w_0', (3, 2)), ('fc_0.b_0', (2,))]
        """
        return [p for b in self.blocks for p in b.all_parameters()]

    @property
    def random_seed(self) -> int:
        return self._seed

    @random_seed.setter
    def random_seed(self, seed: int) -> None:
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise ValueError("Seed must be a integer.")
        self._seed = seed
        self._bump()

    def global_seed(self, seed: int = 0) -> None:
        """Set this program's ``random_seed`` and the seed every Program created afterwards
        starts with (fluid 1.8's module-level ``global_prog_seed``; the default is 0).

        Args:
            seed (int): the seed.
        Raises:
            ValueError: ``seed`` is not an int.

        Example:
            >>> import fluidlite as fluid
            >>> fluid.Program().global_seed(102)
            >>> fluid.Program().random_seed
            102
            >>> fluid.Program().global_seed(0)       # back to fluid's default
        """
        global _global_prog_seed
        self.random_seed = seed         # validates before the global changes
        _global_prog_seed = seed

    # -- role guards used by passes -------------------------------------------------------
    @property
    def _op_role(self) -> int:
        return self._current_role

    @_op_role.setter
    def _op_role(self, role: int) -> None:
        self._current_role = role

    @contextlib.contextmanager
    def _role_guard(self, role: int, role_var: Sequence[str] = ()) -> Iterator[None]:
        old = self._current_role, self._op_role_var
        self._current_role, self._op_role_var = role, list(role_var)
        try:
            yield
        finally:
            self._current_role, self._op_role_var = old

    def _optimized_guard(self, param_and_grads: Sequence[Any]) -> Any:
        role_var = [v.name if isinstance(v, Variable) else v for v in param_and_grads
                    if v is not None]
        return self._role_guard(OpRole.Optimize, role_var)

    def _lr_schedule_guard(self, is_with_opt: bool = False) -> Any:
        role = OpRole.LRSched | (OpRole.Optimize if is_with_opt else 0)
        return self._role_guard(role)

    def _backward_role_guard(self) -> Any:
        return self._role_guard(OpRole.Backward)

    # -- copies ---------------------------------------------------------------------------
    def clone(self, for_test: bool = False) -> "Program":
        """Deep copy. ``for_test``: drop backward/optimize ops and set ``is_test`` attrs.

        Args:
            for_test (bool, default False): switch ops to inference mode (dropout, batch norm) for
                evaluation; clone before ``minimize`` to get a forward-only program.
        Returns:
            Program: an independent copy (same variable names, so it runs on the same scope).

        Raises:
            None: this method does not raise.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     x = fluid.data("x", [-1, 3])
            ...     y = fluid.layers.dropout(fluid.layers.fc(x, 2), dropout_prob=0.5)
            >>> test_program = main.clone(for_test=True)     # dropout switched to inference mode
            >>> [op.attr("is_test") for op in test_program.global_block().ops if op.type == "dropout"]
            [True]
        """
        p = Program()
        p._seed, p._appending_grad_times = self._seed, self._appending_grad_times
        p.blocks = []
        for b in self.blocks:
            nb = Block(p, b.idx, b.parent_idx)
            nb.forward_block_idx = b.forward_block_idx
            for name, v in b.vars.items():
                nv = copy.copy(v)
                nv.__dict__ = dict(v.__dict__)
                if isinstance(v, Parameter):
                    nv.optimize_attr = copy.copy(v.optimize_attr)
                nv.block, nv.op = nb, None
                nb.vars[name] = nv
            for op in b.ops:
                attrs = {k: (list(v) if isinstance(v, list) else v) for k, v in op.attrs.items()}
                nop = Operator(nb, op.type, {k: list(v) for k, v in op.inputs.items()},
                               {k: list(v) for k, v in op.outputs.items()}, attrs)
                nb.ops.append(nop)
            p.blocks.append(nb)
        for nb in p.blocks:                 # block attributes point into the copy
            for op in nb.ops:
                for k, v in op.attrs.items():
                    if isinstance(v, Block):
                        op.attrs[k] = p.blocks[v.idx]
                    elif isinstance(v, list) and v and all(isinstance(x, Block) for x in v):
                        op.attrs[k] = [p.blocks[x.idx] for x in v]
        if for_test:
            p._strip_for_test()
        p._relink()
        p.current_block_idx = 0
        p._version = 0
        return p

    def _relink(self) -> None:
        """Point every variable's ``op`` at the last op writing it (after ops were copied,
        loaded or removed wholesale); variables no op writes get ``op = None``."""
        for b in self.blocks:
            for v in b.vars.values():
                v.op = None
        for b in self.blocks:
            for op in b.ops:
                for n in op.output_arg_names:
                    v = b._find_var_recursive(n)
                    if v is not None:
                        v.op = op

    def _strip_for_test(self) -> None:
        drop = OpRole.Backward | OpRole.Optimize
        for b in self.blocks:
            b.ops = [op for op in b.ops if not (int(op.attrs.get("op_role", 0)) & drop)]
            for op in b.ops:
                if "is_test" in op.attrs:
                    op.attrs["is_test"] = True
            used = {n for op in b.ops for n in op.input_arg_names + op.output_arg_names}
            for name in [n for n, v in b.vars.items()
                         if n not in used and names.GRAD_SUFFIX in n and not v.persistable]:
                del b.vars[name]

    # -- checks and printing --------------------------------------------------------------
    def lint(self) -> "Program":
        """Check invariants; raise ValueError listing every problem found, else return self.
        See ``fluidlite.core.lint.lint_program`` for the checks."""
        _service("lint")(self)
        return self

    def to_string(self, throw_on_error: bool = False, with_details: bool = False) -> str:
        """The program as text, one block after another (``print(program)`` shows the same):
        variables with shape and dtype, then ops with their inputs, outputs and attributes.

        Args:
            throw_on_error (bool): fluid's flag to raise on unset fields; unused (every field has a
                value). Default False.
            with_details (bool): also print each variable's ``stop_gradient`` / error clip (and
                parameter attributes). Default False.

        Returns:
            str: the text of every block, joined by newlines.

        Raises:
            None: this method does not raise.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     x = fluid.data("x", [-1, 2])
            ...     y = fluid.layers.relu(x)
            >>> text = main.to_string(throw_on_error=True)
            >>> "relu" in text and "x" in text
            True
        """
        return "\n".join(b.to_string(throw_on_error, with_details) for b in self.blocks)

    def _to_readable_code(self, skip_op_callstack: bool = True) -> str:
        return self.to_string()

    # -- serialization and pruning: provided by fluidlite/formats and core/prune.py -----------
    def to_dict(self) -> Dict[str, Any]:
        return _service("to_dict")(self)

    @staticmethod
    def from_dict(data: Dict[str, Any]) -> "Program":
        return _service("from_dict")(data)

    @staticmethod
    def parse_from_string(binary_str: Union[bytes, str]) -> "Program":
        return _service("parse_from_string")(binary_str)

    @property
    def desc(self) -> Any:
        return _service("desc")(self)

    def _prune(self, targets: Any) -> "Program":
        return _service("prune")(self, targets)

    def _prune_with_input(self, feeded_var_names: Sequence[str], targets: Any) -> "Program":
        return _service("prune_with_input")(self, feeded_var_names, targets)

    def _inference_optimize(self, prune_read_op: bool = True) -> "Program":
        return _service("inference_optimize")(self, prune_read_op)

    def __str__(self) -> str:
        return self.to_string()

    def __repr__(self) -> str:
        return (f"<Program blocks={len(self.blocks)} ops={len(self.global_block().ops)} "
                f"vars={len(self.global_block().vars)} version={self._version}>")


# -- global programs --------------------------------------------------------------------------
_main_program_ = Program()
_startup_program_ = Program()


def default_main_program() -> Program:
    """The program layers currently append their ops to (the one ``program_guard`` set, else
    the process-wide default).

    Args:
        None: this function takes no arguments.

    Returns:
        Program: the current main program.

    Raises:
        None: this function does not raise.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main = fluid.Program()
        >>> with fluid.program_guard(main):
        ...     inside = fluid.default_main_program()
        >>> inside is main, fluid.default_main_program() is main
        (True, False)
    """
    return _main_program_


def default_startup_program() -> Program:
    """The program that ``program_guard`` (or nothing) made the default startup program:
    layers append their parameters' initializers to it; run it once before training.

    Args:
        None: this function takes no arguments.

    Returns:
        Program: the current startup program.

    Raises:
        None: this function does not raise.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     y = fluid.layers.fc(fluid.data("x", [-1, 3]), size=2)
        ...     ops = [op.type for op in fluid.default_startup_program().global_block().ops]
        >>> sorted(ops)          # the initializers of fc's weight and bias
        ['fill_constant', 'uniform_random']
    """
    return _startup_program_


def switch_main_program(program: Program) -> Program:
    global _main_program_
    prev, _main_program_ = _main_program_, program
    return prev


def switch_startup_program(program: Program) -> Program:
    global _startup_program_
    prev, _startup_program_ = _startup_program_, program
    return prev


@contextlib.contextmanager
def program_guard(main_program: Program,
                  startup_program: Optional[Program] = None) -> Iterator[None]:
    """Make ``main_program`` (and ``startup_program`` when given) the defaults in the block.

    Args:
        main_program (Program): where layers append their ops inside the block.
        startup_program (Program | None): where parameters' initializers go (default: leave
            the current startup program).

    Returns:
        contextmanager: a context manager yielding None; the previous default programs are
        restored on exit, also when the block raises.

    Raises:
        TypeError: ``main_program`` is not a Program, or ``startup_program`` is neither None nor a
            Program.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 3])
        ...     y = fluid.layers.scale(x, scale=2.0)
        >>> fluid.default_main_program() is main     # only inside the block
        False
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> exe.run(main, feed={"x": np.ones((1, 3), "float32")}, fetch_list=[y])[0]
        array([[2., 2., 2.]], dtype=float32)
    """
    if not isinstance(main_program, Program):
        raise TypeError("main_program should be Program")
    if startup_program is not None and not isinstance(startup_program, Program):
        raise TypeError("startup_program should be Program")
    main_program = switch_main_program(main_program)
    if startup_program is not None:
        startup_program = switch_startup_program(startup_program)
    try:
        yield
    finally:
        switch_main_program(main_program)
        if startup_program is not None:
            switch_startup_program(startup_program)
