"""The tracer: runs one op at a time through its registered ``OpDef`` and records what backward
needs (fluid 1.8's ``Tracer.trace_op``).

For each call: the op's definition checks the attrs; the first call with a given op type, attrs
and input shapes/dtypes also runs ``infer`` (validation, as the static ``append_op`` does) and
asks ``OpDef.bind`` for the kernel -- the same callable the static executor's plan calls --
which is then cached under that key, so a training step pays one dict lookup per op for it.
When the op is differentiable and one of its inputs needs a gradient, an autograd ``Node``
keeps the inputs, the output arrays and (weakly) the output tensors; ``autograd.py`` turns it
into the op's gradient ops (its ``<type>_grad`` kernel or ``make_grad`` composition).
"""
from __future__ import annotations

import itertools
import time
import weakref
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .. import profiler as _profiler
from ..core import registry
from ..core.ir import Variable, default_main_program
from ..core.callstack import creation_site, user_callstack
from ..core.registry import VarSpec
from .tensor import ParamBase, VarBase

__all__ = ["Tracer", "Node"]

_CACHE_LIMIT = 8192
# an attr holding more values than this (assign_value's data: a NumpyArrayInitializer's weights)
# keeps its call out of the kernel cache: the key would copy every value into a tuple that the
# cache keeps for the process's life (1.2 GB for ResNet-18's weights), to speed up a call made
# once
_MAX_KEY_VALUES = 1024
_SKIP_ATTRS = frozenset(registry.COMMON_ATTRS)
# (op type, attrs, input shapes/dtypes, outputs) -> bound kernel; shared by every tracer (a new
# guard keeps the warm cache)
_KERNELS: Dict[Any, Tuple[Any, ...]] = {}
_OPS = registry._REGISTRY


_DIFF: Dict[str, bool] = {}
_ENTRY_IDS = itertools.count()
_EMPTY: Dict[str, Any] = {}
# op type -> (opdef, ((in slot, duplicable), ...), ((out slot, duplicable), ...), uses_rng,
# differentiable): what trace_op reads of the definition, as plain tuples
_META: Dict[str, Tuple[Any, ...]] = {}


def _meta(op_type: str) -> Tuple[Any, ...]:
    opdef = _OPS.get(op_type) or registry.get_op_def(op_type)
    meta = (opdef, tuple((s.name, bool(s.duplicable)) for s in opdef.in_slots),
            tuple((s.name, bool(s.duplicable)) for s in opdef.out_slots), bool(opdef.uses_rng),
            _differentiable(opdef))
    _META[op_type] = meta
    return meta


def _differentiable(opdef: registry.OpDef) -> bool:
    d = _DIFF.get(opdef.type)
    if d is None:
        d = _DIFF[opdef.type] = opdef.differentiable
    return d


def _freeze(v: Any) -> Any:
    """A hashable stand-in for an attr value (lists become tuples)."""
    if isinstance(v, (list, tuple)):
        return tuple(_freeze(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, _freeze(x)) for k, x in v.items()))
    if isinstance(v, np.ndarray):
        return (v.dtype.str, v.shape, v.tobytes())
    try:
        hash(v)
        return (type(v), v)
    except TypeError:
        return repr(v)


def _bad_input(op_type: str, slot: str, value: Any) -> TypeError:
    if isinstance(value, Variable):
        return TypeError(f"op '{op_type}': input {slot} is the static Variable '{value.name}', "
                         f"which cannot be used in dygraph mode; create tensors with "
                         f"fluid.dygraph.to_variable(ndarray) inside the guard")
    return TypeError(f"op '{op_type}': input {slot} must be a dygraph tensor (VarBase), but "
                     f"received {type(value).__name__}")


def _gather(op_type: str, slot: str, duplicable: bool, v: Any, in_vars: List[Any],
            in_arrays: List[Any], sig: List[Any], versions: List[Any]) -> bool:
    """``trace_op``'s input slot ``slot`` when it is not one tensor with a value: absent
    (None), a list of tensors (duplicable), a one-tensor list, or something to refuse. Appends
    its entries to the lists; returns whether one of its tensors needs a gradient."""
    if v is None or (isinstance(v, (list, tuple)) and not v):
        in_vars.append(None)
        in_arrays.append(None)
        sig.append(None)
        return False
    requires = False
    if duplicable:
        vs = list(v) if isinstance(v, (list, tuple)) else [v]
        arrs = []
        for x in vs:
            if not isinstance(x, VarBase):
                raise _bad_input(op_type, slot, x)
            arrs.append(x._array())
            requires = requires or not x._stop_gradient
        in_vars.append(vs)
        in_arrays.append(arrs)
        sig.append(tuple((a.shape, a.dtype.char) for a in arrs))
        return requires
    if isinstance(v, (list, tuple)):
        if len(v) != 1:
            raise ValueError(f"op '{op_type}': input {slot} takes one tensor, but received "
                             f"{len(v)}")
        v = v[0]
    if not isinstance(v, VarBase):
        raise _bad_input(op_type, slot, v)
    a = v._array()
    if not v._stop_gradient:
        requires = True
        if v.__class__ is ParamBase:
            versions.append((v, v._version))
    in_vars.append(v)
    in_arrays.append(a)
    sig.append((a.shape, a.dtype.char))
    return requires


def _given_outputs(out_slots: Sequence[Tuple[str, bool]], outputs: Dict[str, Any]
                   ) -> Tuple[List[Any], List[str]]:
    """``trace_op``'s output tensors per output slot (None: not asked for; one tensor for a
    slot that is not duplicable) and the names of the slots asked for."""
    out_vars: List[Any] = []
    present = []
    for name, duplicable in out_slots:
        v = outputs.get(name)
        if v is None or (v.__class__ is list or v.__class__ is tuple) and not v:
            out_vars.append(None)
            continue
        if not duplicable and (v.__class__ is list or v.__class__ is tuple):
            v = v[0]
        out_vars.append(v)
        present.append(name)
    return out_vars, present


def _frozen_key(op_type: str, attrs: Dict[str, Any], sig: Sequence[Any],
                outputs: Sequence[str], skip: Any = frozenset()) -> Optional[Tuple[Any, ...]]:
    """The kernel cache key when ``attrs`` holds unhashable values (lists): ``_freeze``'s
    stand-ins for them, the attrs in ``skip`` left out. None (not to be cached) when an attr
    holds more than ``_MAX_KEY_VALUES`` values."""
    for x in attrs.values():
        if (x.__class__ is list or x.__class__ is tuple or x.__class__ is np.ndarray) and \
                len(x) > _MAX_KEY_VALUES:
            return None
    return (op_type, tuple((k, _freeze(x)) for k, x in attrs.items() if k not in skip),
            tuple(sig), tuple(outputs))


def _at_user_line(e: Exception, op_type: str) -> Exception:
    """``e`` again, saying which user line ran the op (like a static op's op_callstack)."""
    return e.__class__(f"{e}\n  (dygraph op '{op_type}' run at "
                       f"{creation_site(user_callstack())})")


class _Call:
    """One op as a layer called it (the arguments ``trace_op`` received): what step replay
    records (replay.py)."""

    __slots__ = ("type", "inputs", "outputs", "attrs", "stop_gradient", "has_grad")

    def __init__(self, type: str, inputs: Any, outputs: Any, attrs: Any, stop_gradient: bool,
                 has_grad: bool) -> None:
        self.type, self.inputs, self.outputs, self.attrs = type, inputs, outputs, attrs
        self.stop_gradient, self.has_grad = stop_gradient, has_grad


class _NoReplay:
    """The replayer before replay.py installs its own (``install_replayer``): no step is being
    replayed (``active``) or recorded (``tape``)."""

    active = None
    tape = None


# step replay (replay.py) builds on the tracer -- it compiles and re-runs traced ops -- so it
# is not imported here: it installs its replayer on import (the dygraph package imports it)
_replayer: Any = _NoReplay()


def install_replayer(replayer: Any) -> None:
    """Make ``replayer`` every tracer's step replayer (``Tracer._replay``: read per op, with
    ``active``, ``tape`` and ``record(call)``), existing tracers included."""
    global _replayer
    _replayer = replayer
    _DEFAULT._replay = replayer
    from ..core import mode
    if mode.tracer is not None:
        mode.tracer._replay = replayer


class Node:
    """One recorded op: what its gradient rule needs (see the module docstring)."""

    __slots__ = ("opdef", "attrs", "key", "in_vars", "in_arrays", "out_refs", "out_arrays",
                 "seq", "released", "versions", "__weakref__")

    def __init__(self, opdef: registry.OpDef, attrs: Dict[str, Any], key: Any,
                 in_vars: List[Any], in_arrays: List[Any], out_refs: List[Any],
                 out_arrays: List[Any], seq: int, versions: Optional[List[Any]] = None
                 ) -> None:
        self.opdef, self.attrs, self.key = opdef, attrs, key
        self.in_vars, self.in_arrays = in_vars, in_arrays        # per forward input slot
        self.out_refs, self.out_arrays = out_refs, out_arrays    # per forward output slot
        self.seq, self.released = seq, False
        # (parameter, its _version) for parameter inputs: backward refuses to use a value an
        # optimizer has since updated in place
        self.versions = versions if versions is not None else [
            (v, v._version) for v in in_vars if type(v) is ParamBase]

    def release(self) -> None:
        self.released = True
        self.in_vars = self.in_arrays = self.out_arrays = self.out_refs = None


class Tracer:
    """Executes ops eagerly (see the module docstring). ``has_grad``: record autograd nodes
    (``no_grad`` turns it off); ``train_mode``: what ``Layer.train()/eval()`` default to."""

    def __init__(self, seed: Optional[int] = None) -> None:
        self.has_grad = True
        self.train_mode = True
        self.recorder: Optional[List[Any]] = None      # TracedLayer.trace's op record
        self._seq = itertools.count()
        self._cache = _KERNELS
        self._program_seed = default_main_program().random_seed
        self.seed(seed)
        self._replay = _replayer            # step replay (replay.py)

    def seed(self, seed: Optional[int]) -> None:
        """Reseed the generator random ops (``seed=0`` attrs) draw from."""
        self._rng_seed = None if not seed else int(seed)
        self._rng: Optional[np.random.Generator] = None

    @property
    def rng(self) -> np.random.Generator:
        if self._rng is None:
            self._rng = np.random.default_rng(self._rng_seed)
        return self._rng

    # -- running one op ---------------------------------------------------------------------
    def trace_op(self, type: str, inputs: Optional[Dict[str, Any]] = None,
                 outputs: Optional[Dict[str, Any]] = None,
                 attrs: Optional[Dict[str, Any]] = None, stop_gradient: bool = False) -> None:
        """Run op ``type`` on the tensors of ``inputs`` and write the results into the tensors
        of ``outputs`` (slot -> tensor or list of tensors, fluid's ``append_op`` arguments)."""
        # the hot path of dygraph: the common cases are inline, the rare ones in helpers
        rp = self._replay
        step = rp.active
        if step is not None and self.recorder is None:      # a replayed step (replay.py)
            # the next op's matcher marks the outputs pending (replay._matcher)
            i = step.i
            if i < step.n and not step.backward and \
                    step.match[i](step, type, inputs, outputs, attrs, stop_gradient,
                                  self.has_grad):
                return
            step.materialize()
        meta = _META.get(type)
        if meta is None or meta[0] is not _OPS.get(type):    # (re-registered op: refresh)
            meta = _meta(type)
        opdef, in_slots, out_slots, uses_rng, diff = meta
        inputs = inputs or _EMPTY
        outputs = outputs or _EMPTY
        attrs = attrs or _EMPTY
        in_vars: List[Any] = []
        in_arrays: List[Any] = []
        sig: List[Any] = []
        versions: List[Any] = []
        requires = False
        for name, duplicable in in_slots:
            v = inputs.get(name)
            cls = v.__class__
            if cls is VarBase or cls is ParamBase:
                a = v._value
                if a is not None:       # the common case, without the checks of _gather
                    if not v._stop_gradient:
                        requires = True
                        if cls is ParamBase:
                            versions.append((v, v._version))
                    in_vars.append([v] if duplicable else v)
                    in_arrays.append([a] if duplicable else a)
                    sig.append(((a.shape, a.dtype.char),) if duplicable
                               else (a.shape, a.dtype.char))
                    continue
            if _gather(type, name, duplicable, v, in_vars, in_arrays, sig, versions):
                requires = True
        out_vars, present = _given_outputs(out_slots, outputs)
        try:
            key = (type, tuple(attrs.items()), tuple(sig), tuple(present))
            entry = self._cache.get(key)
        except TypeError:               # list-valued attrs: a hashable stand-in
            key = _frozen_key(type, attrs, sig, present, _SKIP_ATTRS)
            entry = None if key is None else self._cache.get(key)
        try:
            if entry is None:
                entry = self._cached_entry(key, opdef, type, attrs, in_arrays, present)
            fn, single, result_keys, checked, eid = entry
            prof = _profiler._active
            if prof is None:
                res = fn(*in_arrays, rng=self._rng_for(checked)) if uses_rng else fn(*in_arrays)
            else:
                t0 = time.perf_counter()
                res = fn(*in_arrays, rng=self._rng_for(checked)) if uses_rng else fn(*in_arrays)
                prof.add_op(type, time.perf_counter() - t0)
        except (TypeError, ValueError, IndexError, FloatingPointError) as e:
            raise _at_user_line(e, type) from None
        if self.recorder is not None:
            self._record(type, in_slots, in_vars, out_slots, out_vars, checked)
        record = requires and diff and self.has_grad and not stop_gradient
        out_arrays, out_refs, written = self._write_outputs(
            type, out_slots, out_vars, res, None if single else res, result_keys, record)
        node = Node(opdef, checked, eid, in_vars, in_arrays, out_refs, out_arrays,
                    next(self._seq), versions) if record else None
        for x in written:               # (a parameter keeps its own flags)
            if x.__class__ is not ParamBase:
                x._node = node
                x._stop_gradient = not record
        if rp.tape is not None:             # an eager step replay.py may compile (recorded
            if self.recorder is None:       # once the outputs hold their values and flags)
                rp.record(_Call(type, inputs, outputs, attrs, stop_gradient, self.has_grad))
            else:
                rp.tape = None

    def _write_outputs(self, op_type: str, out_slots: Sequence[Tuple[str, bool]],
                       out_vars: List[Any], value: Any, results: Optional[Dict[str, Any]],
                       result_keys: Dict[str, str], record: bool
                       ) -> Tuple[List[Any], Optional[List[Any]], List[Any]]:
        """Write the kernel's result into the output tensors: ``value`` (the array of a
        single-output kernel) when ``results`` is None, else ``results`` by key. Returns the
        arrays per output slot, weak references to the tensors when ``record`` (for the
        autograd node) and the tensors written."""
        out_arrays: List[Any] = []
        out_refs: Optional[List[Any]] = [] if record else None
        written: List[Any] = []
        for (name, duplicable), v in zip(out_slots, out_vars):
            if v is None:
                out_arrays.append(None)
                if out_refs is not None:
                    out_refs.append(None)
                continue
            val = value if results is None else results.get(result_keys.get(name, name))
            if duplicable:
                out_arrays.append(self._write_list(v, val, op_type, name, written, out_refs))
                continue
            if v.__class__ is VarBase and val.__class__ is np.ndarray:
                v._value = val          # the common case of _write
            else:
                self._write(v, val, op_type, name)
            written.append(v)
            out_arrays.append(val)
            if out_refs is not None:
                out_refs.append(weakref.ref(v))
        return out_arrays, out_refs, written

    # -- trace_op's rare cases ----------------------------------------------------------------
    def _cached_entry(self, key: Any, opdef: registry.OpDef, op_type: str,
                      attrs: Dict[str, Any], in_arrays: Sequence[Any],
                      present: Sequence[str]) -> Tuple[Any, ...]:
        """A cache miss: ``_prepare`` the entry and keep it under ``key`` (not kept when
        ``key`` is None: see ``_frozen_key``)."""
        entry = self._prepare(opdef, op_type, attrs, in_arrays, present)
        if key is None:
            return entry
        if len(self._cache) >= _CACHE_LIMIT:
            self._cache.clear()
        self._cache[key] = entry
        return entry

    def random_stream(self) -> np.random.Generator:
        """The generator a random op without a fixed seed draws from now (step replay runs
        a compiled step's random ops on it, in the order the eager ops would draw)."""
        return self._rng_for({})

    def _rng_for(self, checked: Dict[str, Any]) -> np.random.Generator:
        """The generator a random op draws from: its own for a fixed nonzero ``seed`` attr,
        else the tracer's (reseeded when ``program.random_seed`` changed inside the guard)."""
        program_seed = default_main_program().random_seed
        if program_seed != self._program_seed:   # `program.random_seed = n` in guard
            self._program_seed = program_seed
            self.seed(program_seed)
        seed = int(checked.get("seed", 0) or 0)
        return (np.random.default_rng(seed) if seed and checked.get("fix_seed", True)
                else self.rng)

    def _record(self, op_type: str, in_slots: Sequence[Tuple[str, bool]], in_vars: List[Any],
                out_slots: Sequence[Tuple[str, bool]], out_vars: List[Any],
                checked: Dict[str, Any]) -> None:
        """Append the op to ``recorder`` (``TracedLayer.trace``): type, slot -> tensors, attrs."""
        self.recorder.append((
            op_type, {s: list(v) if isinstance(v, list) else [v]
                      for (s, _), v in zip(in_slots, in_vars) if v is not None},
            {s: list(v) if isinstance(v, (list, tuple)) else [v]
             for (s, _), v in zip(out_slots, out_vars) if v is not None}, checked))

    def _write_list(self, v: Any, val: Any, op_type: str, slot: str, written: List[Any],
                    out_refs: Optional[List[Any]]) -> List[Any]:
        """Write a duplicable output slot's values into its tensors (``out_refs``: also keep
        weak references to them for the autograd node); returns the values."""
        vs = list(v) if isinstance(v, (list, tuple)) else [v]
        vals = list(val) if val is not None else [None] * len(vs)
        for x, a in zip(vs, vals):
            self._write(x, a, op_type, slot)
            written.append(x)
        if out_refs is not None:
            out_refs.append([weakref.ref(x) for x in vs])
        return vals

    def layer_op(self, op_type: str, inputs: Dict[str, Any], out_slots: Sequence[str],
                 attrs: Optional[Dict[str, Any]], hint: str) -> List[VarBase]:
        """A ``fluid.layers`` function's one op, without the ``LayerHelper`` (fluid 1.8's
        ``core.ops`` path in dygraph mode): a new tensor per slot of ``out_slots`` (named
        ``<hint>_N`` on first use), filled by ``trace_op``; returns them in that order."""
        outputs = {}
        for slot in out_slots:
            t = outputs[slot] = VarBase(None, None, False)
            t._hint = hint
        self.trace_op(op_type, inputs, outputs, attrs)
        return list(outputs.values())

    @staticmethod
    def _write(var: Any, value: Any, op_type: str, slot: str) -> None:
        if not isinstance(var, VarBase):
            raise _bad_input(op_type, slot, var)
        if value is not None and not isinstance(value, np.ndarray):
            value = np.asarray(value)
        var._value = value

    def _prepare(self, opdef: registry.OpDef, op_type: str, attrs: Dict[str, Any],
                 in_arrays: Sequence[Any], present: Sequence[str]) -> Tuple[Any, ...]:
        """Check attrs, validate with ``infer`` and bind the kernel (once per cache key)."""
        checked = opdef.check_attrs(dict(attrs))
        specs = [None if a is None else
                 [VarSpec(x.shape, x.dtype) for x in a] if isinstance(a, list)
                 else VarSpec(a.shape, a.dtype) for a in in_arrays]
        try:
            opdef.run_infer(specs, checked)
        except NotImplementedError:         # an op without shape inference: kernel decides
            pass
        binding = opdef.bind(specs, checked, frozenset(present))
        kernel_attrs = {k: v for k, v in checked.items() if k not in _SKIP_ATTRS}
        # eid: a small never-reused id of this (op, attrs, shapes) entry; autograd keys its
        # own caches by it (hashing the full key again per backward op would cost more)
        return (binding.fn, binding.single, dict(binding.result_keys), kernel_attrs,
                next(_ENTRY_IDS))

    # -- tensors and parameters -------------------------------------------------------------
    def new_var(self, name: Optional[str] = None, dtype: Any = None,
                persistable: bool = False, stop_gradient: bool = False,
                shape: Optional[Sequence[int]] = None, hint: Optional[str] = None) -> VarBase:
        """An empty tensor; without ``name`` it is named ``names.generate(hint)`` on first use
        (``<layer>.tmp_N``), so unnamed temporaries cost no name generation."""
        t = VarBase(None, name, stop_gradient, persistable, shape, dtype)
        if hint is not None:
            t._hint = hint
        return t

    def create_parameter(self, attr: Any, shape: Sequence[int], dtype: Any, type: Any = None,
                         stop_gradient: bool = False) -> ParamBase:
        """A ``ParamBase`` named ``attr.name``, filled now by ``attr.initializer``."""
        from .tensor import EAGER_BLOCK
        param = ParamBase(shape, dtype, **attr._to_kwargs(with_initializer=True))
        if stop_gradient:
            param._stop_gradient = True
        has_grad, self.has_grad = self.has_grad, False
        try:
            attr.initializer(param, EAGER_BLOCK)
        finally:
            self.has_grad = has_grad
        return param

    def init_var(self, var: VarBase, initializer: Any) -> VarBase:
        """Fill ``var`` with ``initializer`` now (``LayerHelper.set_variable_initializer``)."""
        from .tensor import EAGER_BLOCK
        has_grad, self.has_grad = self.has_grad, False
        try:
            initializer(var, EAGER_BLOCK)
        finally:
            self.has_grad = has_grad
        return var


def kernel_entry(op_type: str, attrs: Optional[Dict[str, Any]], in_arrays: Sequence[Any],
                 outputs: Sequence[str]) -> Tuple[Any, bool, Dict[str, str]]:
    """``(fn, single, result_keys)``: op ``op_type``'s bound kernel for these input arrays (one
    per input slot of its definition, in order; None for an absent slot) -- the binding
    ``kernel`` calls, from the shared cache. Autograd keeps it per grad step."""
    meta = _META.get(op_type)
    if meta is None or meta[0] is not _OPS.get(op_type):
        meta = _meta(op_type)
    attrs = attrs or _EMPTY
    sig = [None if a is None else
           tuple((x.shape, x.dtype.char) for x in a) if a.__class__ is list else
           (a.shape, a.dtype.char) for a in in_arrays]
    try:
        key = (op_type, tuple(attrs.items()), tuple(sig), tuple(outputs))
        entry = _KERNELS.get(key)
    except TypeError:                   # list-valued attrs: a hashable stand-in
        key = _frozen_key(op_type, attrs, sig, outputs)
        entry = None if key is None else _KERNELS.get(key)
    if entry is None:
        entry = _DEFAULT._prepare(meta[0], op_type, attrs, list(in_arrays), outputs)
        if key is not None:
            _KERNELS[key] = entry
    return entry[0], entry[1], entry[2]


def kernel(op_type: str, attrs: Optional[Dict[str, Any]] = None,
           outputs: Sequence[str] = ("Out",), **inputs: Any) -> Any:
    """Call op ``op_type``'s bound kernel (the one ``trace_op`` and the static plan use) on
    NumPy arrays: no tensors, no autograd record. Returns the array of the single output slot
    in ``outputs``, else ``{slot: array}``. For the dygraph optimizer and clips, whose results
    never need gradients. Random ops are not supported here."""
    meta = _META.get(op_type)
    if meta is None or meta[0] is not _OPS.get(op_type):
        meta = _meta(op_type)
    in_arrays = [inputs.get(name) for name, _ in meta[1]]
    fn, single, result_keys = kernel_entry(op_type, attrs, in_arrays, outputs)
    res = fn(*in_arrays)
    if single:
        return res
    if len(outputs) == 1:
        return res[result_keys.get(outputs[0], outputs[0])]
    return {o: res.get(result_keys.get(o, o)) for o in outputs}


def eager(op_type: str, attrs: Optional[Dict[str, Any]] = None, out_slot: str = "Out",
          **inputs: Any) -> VarBase:
    """Run one op now on tensors or arrays (arrays are wrapped, no gradient recorded unless a
    tensor input needs one) and return its ``out_slot`` output. Used by the dygraph optimizer
    and clips, so they compute with the same kernels as the static passes."""
    from ..core import mode
    tracer = mode.tracer if mode.tracer is not None else _DEFAULT
    ins = {}
    for k, v in inputs.items():
        if isinstance(v, (list, tuple)):
            ins[k] = [x if isinstance(x, VarBase) else VarBase(np.asarray(x)) for x in v]
        elif v is not None:
            ins[k] = v if isinstance(v, VarBase) else VarBase(np.asarray(v))
    out = VarBase(None)
    tracer.trace_op(op_type, ins, {out_slot: out}, attrs or {})
    return out


_DEFAULT = Tracer()
