"""Compile a Block once into a ``Plan``: a generated Python function that calls bound kernels.

The plan resolves every variable to a local of the generated function (one local per assignment,
so the code is in SSA form), binds each op's attrs into its kernel, and ``del``s a temporary right
after its last use (fluid's eager deletion). Per step the executor only gathers feeds and
persistables, calls the function, and writes persistables back — after the whole step
succeeded, so a failed run leaves the scope untouched. ``print(plan)`` shows the source.
"""
from __future__ import annotations

import functools
import itertools
import linecache
import weakref
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..core import names, registry
from ..core.dtypes import VarType, to_numpy_dtype
from ..core.errors import EnforceNotMet
from ..core.ir import Block, Operator, Program, creation_site
from ..core.registry import COMMON_ATTRS
from .fusion import fuse

_SKIP_OPS = frozenset({"feed", "fetch"})
_FOLDABLE = frozenset({"fill_constant", "assign_value"})
ENABLE_FUSION = True     # plan-time fusion (executor/fusion.py); off only to debug or compare
_plan_ids = itertools.count()


class Plan:
    """A compiled block: ``run(feed_arrays, persist_arrays) -> (fetches, writebacks)``."""

    def __init__(self, program: Program, block_idx: int, feed_names: Sequence[str],
                 fetch_names: Sequence[str]) -> None:
        self.program_version = program.version
        self.feed_names = tuple(feed_names)
        self.fetch_names = tuple(fetch_names)
        block = program.block(block_idx)
        self.block_idx = block_idx
        self._block_pos = {id(op): i for i, op in enumerate(block.ops)}   # for error messages
        ops = [op for op in block.ops if op.type not in _SKIP_OPS]
        self.ops: List[Any] = fuse(ops, block, set(self.fetch_names)) if ENABLE_FUSION else ops
        self.persist_reads: List[str] = []      # read from the scope before the step
        self.write_names: List[str] = []        # persistables written back after the step
        self.kernels: List[Callable] = []
        self.holders: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # scope -> vars
        self._line_maps: Dict[str, Dict[int, int]] = {}    # filename -> line -> op index
        self._op_inputs: List[List[Tuple[str, str]]] = []  # per op: (var name, local)
        self.feed_specs = [_feed_spec(block, n) for n in self.feed_names]
        self.write_holders: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
        self.filename = f"<fluidlite-plan-{next(_plan_ids)}>"
        self._profiled_fn: Optional[Callable] = None
        self._consts: set = set()                 # locals bound to folded constants
        self.source = self._generate(program, block)
        code = compile(self.source, self.filename, "exec")
        ns: Dict[str, Any] = {}
        exec(code, ns)
        self._fn = ns["__plan"]
        persistent = set(self.persist_reads) | set(self.write_names)
        self.fetch_copies = tuple(n in persistent or self._fetch_locals[i] in self._consts
                                  for i, n in enumerate(self.fetch_names))
        # tracebacks through the plan show its source; forget it when the plan goes away
        linecache.cache[self.filename] = (len(self.source), None,
                                          self.source.splitlines(True), self.filename)
        weakref.finalize(self, linecache.cache.pop, self.filename, None)

    # -- code generation --------------------------------------------------------------------
    def _generate(self, program: Program, block: Block) -> str:
        local: Dict[str, str] = {}              # var name -> current local
        counter = itertools.count()
        body: List[Tuple[Optional[int], str]] = []   # (op index or None, line)
        last_use: Dict[str, int] = {}           # local -> index into body after which it dies
        keep: set = set()

        def new_local() -> str:
            return f"t{next(counter)}"

        for i, n in enumerate(self.feed_names):
            local[n] = new_local()
            body.append((None, f"{local[n]} = F[{i}]"))

        def read(name: str, op_idx: int, op: Operator) -> str:
            if name == names.EMPTY_VAR_NAME:
                return "None"
            if name not in local:
                var = block._find_var_recursive(name)
                if var is not None and var.persistable:
                    local[name] = new_local()
                    body.append((None, f"{local[name]} = P[{len(self.persist_reads)}]"))
                    self.persist_reads.append(name)
                else:
                    first = getattr(op, "covered", [op])[0]
                    raise ValueError(_missing_input_message(
                        name, first, self._block_pos.get(id(first), op_idx), var))
            return local[name]

        for op_idx, op in enumerate(self.ops):
            opdef = getattr(op, "opdef", None) or registry.get_op_def(op.type)
            args, used = [], []
            for slot in opdef.in_slots:
                arg_names = op.inputs.get(slot.name)
                if slot.duplicable:
                    locs = [read(n, op_idx, op) for n in (arg_names or [])]
                    args.append("[" + ", ".join(locs) + "]")
                    used += [(n, l) for n, l in zip(arg_names or [], locs)]
                elif arg_names:
                    loc = read(arg_names[0], op_idx, op)
                    args.append(loc)
                    used.append((arg_names[0], loc))
                else:
                    args.append("None")
            self._op_inputs.append(used)
            if self._foldable(block, op, opdef):    # constant: evaluate once, at compile time
                result = opdef.forward(**{k: v for k, v in op.attrs.items()
                                          if k in opdef.attr_defaults})
                for slot in opdef.out_slots:
                    for n in op.outputs.get(slot.name, []):
                        k = f"k{len(self.kernels)}"
                        self.kernels.append(result[slot.name])
                        local[n] = new_local()
                        self._consts.add(local[n])
                        body.append((op_idx, f"{local[n]} = {k}"))
                        last_use.setdefault(local[n], len(body) - 1)
                continue
            kernel, single = self._bind(program, block, op, opdef, op_idx)
            k = f"k{len(self.kernels)}"
            self.kernels.append(kernel)
            call = f"{k}({', '.join(args)})"
            outs: List[Tuple[str, str]] = []   # (var name, local)
            if single:
                n = op.outputs[opdef.out_slots[0].name][0]
                loc = new_local()
                body.append((op_idx, f"{loc} = {call}"))
                outs.append((n, loc))
            else:
                body.append((op_idx, f"_r = {call}"))
                for slot in opdef.out_slots:
                    arg_names = [n for n in op.outputs.get(slot.name, [])]
                    if not arg_names or all(n == names.EMPTY_VAR_NAME for n in arg_names):
                        continue
                    locs = [new_local() if n != names.EMPTY_VAR_NAME else "_" for n in arg_names]
                    lhs = ", ".join(locs) + ("," if slot.duplicable else "")
                    key = getattr(opdef, "result_keys", {}).get(slot.name, slot.name)
                    body.append((op_idx, f"{lhs} = _r[{key!r}]"))
                    outs += [(n, l) for n, l in zip(arg_names, locs) if l != "_"]
            for _, loc in used:
                last_use[loc] = len(body) - 1
            for n, loc in outs:
                local[n] = loc
                last_use.setdefault(loc, len(body) - 1)

        fetch_locals = []
        for n in self.fetch_names:
            if n not in local:
                var = block._find_var_recursive(n)
                if var is None:
                    import difflib
                    close = difflib.get_close_matches(n, list(block.vars), n=5, cutoff=0.5)
                    raise ValueError(f"Cannot fetch '{n}': no such variable in the program. "
                                     f"Closest existing names: {close}")
                if not var.persistable:
                    raise ValueError(f"fetch variable '{n}' is neither fed nor computed by the "
                                     f"program, and it is not persistable; fetch a variable "
                                     f"that an op of the program writes")
                local[n] = new_local()
                body.append((None, f"{local[n]} = P[{len(self.persist_reads)}]"))
                self.persist_reads.append(n)
            fetch_locals.append(local[n])
            keep.add(local[n])
        write_locals = []
        read_locals = {n: f"P[{i}]" for i, n in enumerate(self.persist_reads)}
        initial = {}
        for _, text in body:
            lhs, _, rhs = text.partition(" = ")
            if rhs.startswith("P["):
                initial[lhs] = rhs
        for n, loc in local.items():
            var = block._find_var_recursive(n)
            if var is None or not var.persistable or (
                    n in read_locals and initial.get(loc) == read_locals[n]):
                continue
            self.write_names.append(n)
            write_locals.append(loc)
            keep.add(loc)

        # eager deletion of dead temporaries
        dies: Dict[int, List[str]] = {}
        for loc, idx in last_use.items():
            if loc not in keep:
                dies.setdefault(idx, []).append(loc)
        tup = lambda xs: "(" + "".join(x + ", " for x in xs) + ")"
        self._body, self._dies, self._fetch_locals = body, dies, fetch_locals
        self._ret = f"    return {tup(fetch_locals)}, {tup(write_locals)}"
        return self._emit(profile=False)

    def _emit(self, profile: bool) -> str:
        """Source of the plan function; ``profile`` adds a timer around every op."""
        line_to_op = self._line_maps.setdefault(
            self.filename + ("-profiled" if profile else ""), {})
        lines = ["def __plan(F, P, K, T, _pc):" if profile else "def __plan(F, P, K):"]
        if self.kernels:
            lines.append("    " + ", ".join(f"k{i}" for i in range(len(self.kernels)))
                         + ", = K")
        body = self._body
        for idx, (op_idx, text) in enumerate(body):
            starts = op_idx is not None and (idx == 0 or body[idx - 1][0] != op_idx)
            ends = op_idx is not None and (idx + 1 == len(body) or body[idx + 1][0] != op_idx)
            if profile and starts:
                lines.append("    _t = _pc()")
            lines.append("    " + text)
            if op_idx is not None:
                line_to_op[len(lines)] = op_idx
            if profile and ends:
                lines.append(f"    T[{op_idx}] += _pc() - _t")
            if idx in self._dies:
                lines.append("    del " + ", ".join(sorted(self._dies[idx])))
        lines.append(self._ret)
        return "\n".join(lines) + "\n"

    def run_profiled(self, feeds: Sequence[np.ndarray], persist: Sequence[np.ndarray],
                     times: List[float]) -> Tuple[tuple, tuple]:
        """Like ``run`` but adds each op's wall time (seconds) into ``times[op_index]``."""
        if self._profiled_fn is None:
            ns: Dict[str, Any] = {}
            exec(compile(self._emit(profile=True), self.filename + "-profiled", "exec"), ns)
            self._profiled_fn = ns["__plan"]
        import time
        try:
            return self._profiled_fn(feeds, persist, self.kernels, times, time.perf_counter)
        except Exception as e:
            raise self._annotate(e) from e

    @staticmethod
    def _foldable(block: Block, op: Any, opdef: registry.OpDef) -> bool:
        """No inputs, not random, not writing a persistable: a compile-time constant."""
        if op.type not in _FOLDABLE or op.inputs and any(op.inputs.values()):
            return False
        return not any(getattr(block._find_var_recursive(n), "persistable", True)
                       for n in op.output_arg_names)

    def _bind(self, program: Program, block: Block, op: Operator, opdef: registry.OpDef,
              op_idx: int) -> Tuple[Callable, bool]:
        attrs = {k: v for k, v in op.attrs.items()
                 if k not in COMMON_ATTRS and k in opdef.attr_defaults}
        if getattr(opdef, "wants_outputs", False):   # generated grad op: skip unread grads
            attrs["_wanted"] = frozenset(
                slot[:-len(names.GRAD_SUFFIX)] for slot, arg_names in op.outputs.items()
                if any(n != names.EMPTY_VAR_NAME for n in arg_names))
        out_slots = [s for s in opdef.out_slots if op.outputs.get(s.name)]
        single = (len(opdef.out_slots) == 1 and not opdef.out_slots[0].duplicable
                  and len(out_slots) == 1)
        if single and not opdef.uses_rng:
            specs = [_spec_or_none(block, op.inputs.get(s.name)) for s in opdef.in_slots]
            fast = opdef.lower(specs, attrs)
            if fast is not None:
                return fast, True
        direct = getattr(opdef, "direct_backward", None)     # generated grad def: the rule
        if direct is not None:
            attrs = dict(attrs)
            wanted = attrs.pop("_wanted", None)
            if opdef.wants_outputs:
                attrs["wanted"] = wanted
            raw = direct
        else:
            raw = getattr(opdef, "raw_forward", opdef.forward)   # grad defs: raw dict
        fn = functools.partial(raw, **attrs) if attrs else raw
        if opdef.uses_rng:
            fn = _rng_kernel(opdef, attrs, program.random_seed, block.idx, op_idx)
        if single:
            slot = getattr(opdef, "result_keys", {}).get(opdef.out_slots[0].name,
                                                         opdef.out_slots[0].name)
            inner = fn
            fn = lambda *a: inner(*a)[slot]
        return fn, single

    # -- execution --------------------------------------------------------------------------
    def run(self, feeds: Sequence[np.ndarray], persist: Sequence[np.ndarray]) -> Tuple[tuple, tuple]:
        try:
            return self._fn(feeds, persist, self.kernels)
        except Exception as e:  # re-raise naming the op and the user's line
            raise self._annotate(e) from e

    def _annotate(self, e: Exception) -> Exception:
        tb, frame_tb = e.__traceback__, None
        while tb is not None:
            if tb.tb_frame.f_code.co_filename in self._line_maps:
                frame_tb = tb
            tb = tb.tb_next
        line_map = self._line_maps.get(frame_tb.tb_frame.f_code.co_filename, {}) \
            if frame_tb is not None else {}
        if frame_tb is None or frame_tb.tb_lineno not in line_map:
            return e
        op_idx = line_map[frame_tb.tb_lineno]
        op = self.ops[op_idx]
        covered = getattr(op, "covered", [op])          # a fused step names its first op
        where = f"op #{self._block_pos.get(id(covered[0]), '?')} of block {self.block_idx}"
        if len(covered) > 1:
            where += " (fused with " + ", ".join(o.type for o in covered[1:]) + ")"
            op = covered[0]
        f_locals = frame_tb.tb_frame.f_locals
        shapes = []
        for n, loc in self._op_inputs[op_idx]:
            val = f_locals.get(loc)
            desc = f"{list(val.shape)} {val.dtype}" if isinstance(val, np.ndarray) else "?"
            shapes.append(f"{n}: {desc}")
        msg = (f"Error in op '{op.type}' ({where}) while running: "
               f"{type(e).__name__}: {e}\n  inputs: {', '.join(shapes) or '(none)'}\n"
               f"  op created at:\n    {creation_site(op.attrs.get('op_callstack'))}")
        cls = type(e) if type(e) in (ValueError, TypeError, ArithmeticError, ZeroDivisionError,
                                     FloatingPointError, IndexError, OverflowError) \
            else EnforceNotMet
        new = cls(msg)
        new.op_type = op.type                              # type: ignore[attr-defined]
        new.op_index = self._block_pos.get(id(op))        # type: ignore[attr-defined]
        return new

    def __str__(self) -> str:
        return self.source


def _feed_spec(block: Block, name: str) -> Tuple[Any, Any, Tuple[int, ...]]:
    """(var, required numpy dtype or None, declared shape) of a fed variable."""
    var = block._find_var_recursive(name)
    if var is None:
        import difflib
        close = difflib.get_close_matches(name, list(block.vars), n=3)
        raise ValueError(f"The fed variable '{name}' is not declared in the program. Closest "
                         f"names: {close}. Feed only variables created with fluid.data / "
                         f"fluid.layers.data.")
    want = None
    if var.dtype is not None and var.type == VarType.LOD_TENSOR:
        want = to_numpy_dtype(var.dtype)
    return var, want, tuple(var.shape)


def _spec_or_none(block: Block, arg_names: Optional[List[str]]) -> Any:
    if not arg_names:
        return None
    specs = []
    for n in arg_names:
        v = block._find_var_recursive(n)
        specs.append(v.spec if v is not None else None)
    return specs if len(specs) > 1 else specs[0]


def _rng_kernel(opdef: registry.OpDef, attrs: Dict[str, Any], program_seed: int, block_idx: int,
                op_idx: int) -> Callable:
    """Random ops: a fixed ``seed`` attr reseeds every call (fluid); otherwise one generator per
    op, seeded from the program's ``random_seed`` and the op's position (deterministic)."""
    seed = int(attrs.get("seed", 0) or 0)
    fixed = seed != 0 and attrs.get("fix_seed", True)
    fwd = functools.partial(opdef.forward, **attrs)
    if fixed:
        return lambda *a: fwd(*a, rng=np.random.default_rng(seed))
    gen = np.random.default_rng([program_seed, block_idx, op_idx])
    return lambda *a: fwd(*a, rng=gen)


def _missing_input_message(name: str, op: Operator, op_idx: int, var: Any) -> str:
    where = f"op '{op.type}' (op #{op_idx}, created at {creation_site(op.attrs.get('op_callstack'))})"
    if var is not None and var.is_data:
        return (f"Need feed data for variable '{name}': {where} reads it. Pass it in the feed "
                f"dict, e.g. exe.run(feed={{'{name}': array}}, ...)")
    return (f"variable '{name}' read by {where} is not fed, not produced by an earlier op, and "
            f"not persistable")
