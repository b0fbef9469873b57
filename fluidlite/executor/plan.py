"""Compile a Block once into a ``Plan``: a generated Python function that calls bound kernels.

The plan resolves every variable to a local of the generated function (one local per assignment,
so the code is in SSA form), asks each op's ``OpDef.bind`` for the callable to call (the plan
knows nothing about how an op computes), and ``del``s a temporary right after its last use
(fluid's eager deletion). Every generated line names its op (``t3 = k0(t0, t2)  # mul``);
``print(plan)`` shows the source. Per step the executor validates feeds (``Plan.check_feeds``),
gathers persistables, calls ``Plan.run`` and writes persistables back — after the whole step
succeeded, so a failed run leaves the scope untouched.

A plan is immutable once compiled and keeps no reference to its Program (only light
``StepInfo`` records for error messages), so one plan may run on many scopes from many threads
and a dropped program is freed. Random ops get their generator as the keyword ``rng``:

* a fixed ``seed`` attr (with ``fix_seed``) reseeds every call, as in fluid;
* an op whose outputs are all persistable (an initializer in a startup program) starts a fresh
  stream seeded from ``program.random_seed`` and its block position on every run, so re-running
  the startup program gives the same weights;
* any other random op (dropout, noise) continues one stream across runs. The stream is state of
  the run, not of the plan: the executor keeps one per (plan, scope) (``Plan.new_streams``).

The plan reads what it must know of an op from the op's definition, never from its type:
``plan_skip`` (generate nothing: the executor feeds and fetches itself), ``foldable`` (a
compile-time constant when it has no input and writes no persistable), ``reads_outputs``,
``uses_rng`` and ``sub_block_op``. Control flow: an op owning a sub-block (``while``,
``conditional_block`` and their grad ops) is generated inline by ``executor/blocks.py`` from
what its class declares -- a loop becomes a Python ``while`` over the body's lines, a branch an
``if``, a grad op a ``for`` over the iterations the forward loop recorded (only when the program
holds that grad op). Errors inside a body name the op, its block and the iteration
(``StepInfo.block`` / ``StepInfo.loops``).
"""
from __future__ import annotations

import collections.abc
import difflib
import itertools
import linecache
import logging
import os
import threading
import time
import weakref
from typing import (Any, Callable, Dict, Iterable, List, NamedTuple, Optional, Sequence, Set,
                    Tuple)

import numpy as np

from ..core import names, registry, threads
from ..core import lod as _lod      # LoD travels between kernels as LoDArray (core/lod.py)
from ..core.callstack import creation_site
from ..core.dtypes import VarType, to_numpy_dtype
from ..core.errors import EnforceNotMet
from ..core.ir import Block, Operator, Program, Variable
from ..core.scope import LoDTensor
from .fusion import fuse
from . import blocks as _blocks
from .records import StepInfo

_log = logging.getLogger("fluidlite")
_LOOSE_WARNED: Set[Tuple[str, str, Tuple[int, ...]]] = set()  # unchecked feeds already logged
ENABLE_FUSION = True     # plan-time fusion (executor/fusion/); off only to debug or compare
# Debug mode: every kernel output is checked against the dtype its variable declares (plans
# compiled while this is on carry one check line per output). The test suite turns it on
# (``FLUIDLITE_CHECK_DTYPES=1``), so an op whose kernel drifts from its shape inference -- for
# instance through NumPy 1.x's value-based scalar promotion -- fails on every NumPy line.
CHECK_DTYPES = os.environ.get("FLUIDLITE_CHECK_DTYPES", "0") not in ("", "0")
_plan_ids = itertools.count()
_free_plan_ids: List[int] = []      # ids of collected plans, reused (see _take_filename)


class DtypeDriftError(TypeError):
    """A kernel returned an array whose dtype is not the one its variable declares."""


def _check_dtype(value: Any, want: np.dtype, name: str) -> None:
    """``CHECK_DTYPES``: ``value`` (an op output bound to ``name``) must have dtype ``want``."""
    got = getattr(value, "dtype", None)
    if got is not None and got != want and isinstance(value, np.ndarray):
        raise DtypeDriftError(
            f"output '{name}' was computed as {got.name} but the program declares it "
            f"{want.name}: the op's kernel and its shape inference disagree (a kernel must "
            f"return exactly the declared dtype on NumPy 1.x and 2.x alike)")


_PLAN_GLOBALS = {"np": np, "_acc": _blocks.add_up,
                 "_ckd": _check_dtype}
_KEEP_ERROR_TYPES = (ValueError, TypeError, ArithmeticError, ZeroDivisionError,
                     FloatingPointError, IndexError, OverflowError)


class FeedSpec(NamedTuple):
    """A fed variable as declared in the program; ``check`` is the only feed validation."""

    name: str
    dtype: Optional[np.dtype]                # required dtype (None: any)
    shape: Tuple[int, ...]                   # declared shape, -1 matches any size
    persistable: bool
    # fluid checks only variables declared with need_check_feed (``fluid.data``); a variable of
    # ``fluid.layers.data`` takes what is fed, with one warning per mismatch
    strict: bool = True

    def check(self, value: Any) -> Tuple[np.ndarray, Optional[List[List[int]]]]:
        """The array to run with, and its LoD. Dtype must match exactly; a shape entry of -1
        matches any size. A fed persistable (e.g. a parameter) is copied: feeding overrides
        the variable for this run (and, as in fluid, in the scope afterwards), but the
        caller's array is never written by an update op."""
        lod = None
        if type(value) is not np.ndarray:
            if isinstance(value, LoDTensor):
                lod = value.lod() or None
                value = np.asarray(value)
            elif not isinstance(value, np.ndarray):
                value = self._to_array(value)
            else:
                value = self._plain(value)
        if not value.dtype.isnative:    # kernels and the dtype contract assume native order
            value = value.astype(value.dtype.newbyteorder("="))
        if value.ndim == 0:         # fluid feeds a scalar as a one-element tensor
            value = value.reshape(1)
        if not self.strict:
            return self._loose(value), lod
        if self.dtype is not None and value.dtype != self.dtype:
            raise ValueError(
                f"The data type of fed Variable '{self.name}' must be '{self.dtype.name}', but "
                f"received '{value.dtype.name}'. Convert the array before feeding: "
                f"feed={{'{self.name}': array.astype('{self.dtype.name}')}}")
        shape = self.shape
        if shape and lod is None and 0 < value.ndim < len(shape) and \
                all(d == 1 for d in shape[value.ndim:]):
            # fluid 1.8 compares only the fed tensor's own dims (DiffTensorShape): a [3] array
            # fed for [3, 1] passes; here it also gets the declared trailing 1s, so the
            # shapes the program inferred hold (docs/compatibility.md)
            value = value.reshape(value.shape + (1,) * (len(shape) - value.ndim))
        if shape and (len(shape) != value.ndim or lod is not None or any(
                w >= 0 and w != g for w, g in zip(shape, value.shape))):
            self._check_shape(value.shape, has_lod=lod is not None)
        if self.persistable:
            value = np.array(value, copy=True, order="C")
        return value, lod

    def _loose(self, value: np.ndarray) -> np.ndarray:
        """An unchecked feed runs as fed; a dtype or shape other than declared is logged once
        per (variable, dtype, shape)."""
        shape = self.shape
        bad_shape = shape and (len(shape) != value.ndim or any(
            w >= 0 and w != g for w, g in zip(shape[1:], value.shape[1:])))
        if (self.dtype is not None and value.dtype != self.dtype) or bad_shape:
            key = (self.name, value.dtype.str, value.shape[1:])
            if key not in _LOOSE_WARNED:
                _LOOSE_WARNED.add(key)
                _log.warning("The fed Variable '%s' is declared with shape %s and dtype %s but "
                             "received shape %s and dtype %s; it is not checked (its "
                             "need_check_feed is off: declared with fluid.layers.data, or so "
                             "saved in the model file it was loaded from), so the program runs "
                             "on the fed array and infers its shapes "
                             "from it. In a program you build, declare it with fluid.data to "
                             "have feeds checked.", self.name,
                             list(shape), self.dtype, list(value.shape), value.dtype)
        return np.array(value, copy=True, order="C") if self.persistable else value

    def _check_shape(self, got: Tuple[int, ...], has_lod: bool) -> None:
        want = self.shape
        ok = len(want) == len(got) and all(
            w < 0 or w == g or (i == 0 and has_lod) for i, (w, g) in enumerate(zip(want, got)))
        if not ok:
            fixed = [d for d in want if d >= 0]
            hint = ", ".join(str(d) if d >= 0 else "-1" for d in want) if fixed else str(list(got))
            raise ValueError(
                f"The fed Variable '{self.name}' should have dimensions = {len(want)}, shape = "
                f"{list(want)}, but received fed shape {list(got)}. Reshape the array to match "
                f"(-1 matches any size), e.g. array.reshape({hint})")

    def _plain(self, value: np.ndarray) -> np.ndarray:
        """An ndarray subclass as a plain ndarray: ``np.matrix`` keeps its 2-D values (its
        ``*`` and reductions would otherwise leak into kernels); a masked array is refused, as
        its mask would be dropped silently."""
        if isinstance(value, np.ma.MaskedArray):
            raise TypeError(f"The fed data of '{self.name}' is a numpy masked array; the mask "
                            f"would be ignored. Feed array.filled(fill_value) (or "
                            f"np.ma.getdata(array) to keep the masked entries' values)")
        return np.asarray(value)

    def _to_array(self, value: Any) -> np.ndarray:
        if isinstance(value, (int, float, bool, np.number, list, tuple)):
            try:                    # fluid converts builtins to the declared dtype
                return np.array(value, dtype=self.dtype)
            except ValueError:
                raise TypeError(f"The fed data of '{self.name}' is a ragged nested list; use "
                                f"fluid.create_lod_tensor to feed variable-length data") from None
        raise TypeError(f"Convert data of type {type(value)} to Tensor is not supported "
                        f"(feeding '{self.name}')")


class Plan:
    """A compiled block: ``run(feed_arrays, persist_arrays, streams) -> (fetches, writebacks)``.

    Public, read-only after construction: ``feed_specs`` (one ``FeedSpec`` per fed name, in
    order), ``persist_reads`` (persistables to pass as ``persist_arrays``), ``write_names``
    (persistables the step writes, in ``writebacks`` order), ``fetch_copies`` (which fetched
    values alias a scope buffer or a constant and must be copied before handing them out),
    ``steps`` (one ``StepInfo`` per kernel call) and ``source``.
    """

    def __init__(self, program: Program, block_idx: int, feed_names: Sequence[str],
                 fetch_names: Sequence[str]) -> None:
        block = program.block(block_idx)
        self.program_version = program.version
        self.block_idx = block_idx
        self.feed_names = tuple(feed_names)
        self.fetch_names = tuple(fetch_names)
        self.feed_specs = tuple(_feed_spec(block, n) for n in self.feed_names)
        ops = [op for op in block.ops if not registry.get_op_def(op.type).plan_skip]
        if ENABLE_FUSION:
            ops = _fuse(ops, block, self.fetch_names, self.feed_names)
        gen = _CodeGen(block, program.random_seed, program)
        gen.feeds(self.feed_names)
        for op in ops:
            gen.step(op)
        fetch_locals = gen.fetches(self.fetch_names)
        write_locals = gen.writebacks()
        self.persist_reads: Tuple[str, ...] = tuple(gen.persist_reads)
        self.write_names: Tuple[str, ...] = tuple(gen.write_names)
        # feeds whose first dim is the batch (declared -1): when all are empty, a step that
        # writes persistables is refused (check_feeds)
        self._batch_feeds: Tuple[int, ...] = tuple(
            i for i, s in enumerate(self.feed_specs)
            if s.shape and s.shape[0] < 0 and not s.persistable) if self.write_names else ()
        self.steps: Tuple[StepInfo, ...] = tuple(gen.steps)
        self.kernels: Tuple[Callable, ...] = tuple(gen.kernels)
        self.stream_seeds: Tuple[Tuple[int, ...], ...] = tuple(gen.stream_seeds)
        self.fetch_copies = tuple(n in gen.persist_local or n in gen.write_names
                                  or loc in gen.consts
                                  for n, loc in zip(self.fetch_names, fetch_locals))
        self._body = tuple(gen.body)
        self._dies = gen.deletions(set(fetch_locals) | set(write_locals))
        tup = lambda xs: "(" + "".join(x + ", " for x in xs) + ")"
        self._ret = f"    return {tup(fetch_locals)}, {tup(write_locals)}"
        self.filename = _take_filename(self)
        self._line_maps: Dict[str, Dict[int, int]] = {}    # filename -> line -> step index
        self._lock = threading.Lock()                      # guards the lazy profiled build
        self._profiled_fn: Optional[Callable] = None
        self.source = self._emit(profile=False)
        self._fn = self._compile(self.source, self.filename)
        self.uses_lod = gen.lod_on      # kernels are LoD-wrapped (core/lod.py)

    @property
    def step_types(self) -> List[str]:
        return [s.type for s in self.steps]

    def check_feeds(self, values: Iterable[Any]) -> Tuple[List[np.ndarray], Dict[str, Any]]:
        """Validate the fed values (in ``feed_names`` order) with ``FeedSpec.check``: the arrays
        to pass to ``run``, and the LoD of each fed LoDTensor that has one."""
        arrays, lods = [], {}
        for spec, value in zip(self.feed_specs, values):
            array, lod = spec.check(value)
            arrays.append(array)
            if lod:
                lods[spec.name] = lod
        if self._batch_feeds and all(arrays[i].shape[0] == 0 for i in self._batch_feeds):
            raise self._empty_batch_error(arrays)
        return arrays, lods

    def _empty_batch_error(self, arrays: Sequence[np.ndarray]) -> ValueError:
        """Every batch-sized feed has 0 rows and the step writes persistables: an update
        from no data (the mean loss is NaN, Adam would still advance its moments and beta
        powers, batch norm would average nothing into its statistics), refused before any op
        runs."""
        fed = ", ".join(f"'{self.feed_specs[i].name}' {list(arrays[i].shape)}"
                        for i in self._batch_feeds)
        state = ", ".join(repr(n) for n in self.write_names[:4])
        more = f" and {len(self.write_names) - 4} more" if len(self.write_names) > 4 else ""
        return ValueError(
            f"Empty batch: every batch-sized feed has 0 rows ({fed}), but this program writes "
            f"persistable state ({state}{more}), which a step on no data would change (the "
            f"mean loss of an empty batch is NaN; optimizer moments, beta powers and "
            f"batch-norm statistics would still be updated). Skip empty batches before "
            f"exe.run (e.g. `if len(batch) == 0: continue`), or run a program that updates "
            f"nothing (program.clone(for_test=True)) to evaluate one.")

    def new_streams(self) -> List[np.random.Generator]:
        """Fresh generators for the plan's continuing random streams (one per random op that
        writes temporaries); the executor keeps one list per scope and passes it to ``run``."""
        return [np.random.default_rng(list(seed)) for seed in self.stream_seeds]

    # -- source ------------------------------------------------------------------------------
    def _emit(self, profile: bool) -> str:
        """Source of the plan function; ``profile`` adds a timer around every step."""
        line_to_step: Dict[int, int] = {}
        lines = ["def __plan(F, P, K, S, T, _pc):" if profile else "def __plan(F, P, K, S):"]
        if self.kernels:
            lines.append("    " + ", ".join(f"k{i}" for i in range(len(self.kernels)))
                         + ", = K")
        body = self._body
        for idx, (step, text, depth) in enumerate(body):
            pad = "    " * (depth + 1)
            header = text.endswith(":")     # a loop / if header: its body times itself
            starts = step is not None and not header and (
                idx == 0 or body[idx - 1][0] != step or body[idx - 1][1].endswith(":"))
            ends = step is not None and not header and (
                idx + 1 == len(body) or body[idx + 1][0] != step or body[idx + 1][2] != depth)
            if profile and starts:
                lines.append(pad + "_t = _pc()")
            if text:
                lines.append(pad + text)
            if step is not None and text:
                line_to_step[len(lines)] = step
            if profile and ends:
                lines.append(pad + f"T[{step}] += _pc() - _t")
            if idx in self._dies:
                lines.append(pad + "del " + ", ".join(sorted(self._dies[idx])))
        lines.append(self._ret)
        self._line_maps[self.filename + ("-profiled" if profile else "")] = line_to_step
        return "\n".join(lines) + "\n"

    def _compile(self, source: str, filename: str) -> Callable:
        ns: Dict[str, Any] = dict(_PLAN_GLOBALS)
        exec(compile(source, filename, "exec"), ns)
        # tracebacks through the plan show its source (forgotten with the plan: _take_filename)
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        return ns.pop("__plan")    # leave no function <-> globals cycle: freed with the plan

    def __str__(self) -> str:
        return self.source

    # -- execution ---------------------------------------------------------------------------
    def run(self, feeds: Sequence[np.ndarray], persist: Sequence[np.ndarray],
            streams: Sequence[np.random.Generator] = ()) -> Tuple[tuple, tuple]:
        """Run one step. ``feeds`` follow ``feed_specs`` (already checked), ``persist`` follows
        ``persist_reads``, ``streams`` comes from ``new_streams`` (needed when
        ``stream_seeds`` is not empty). Returns (fetched values, written persistables)."""
        threads.hold()      # BLAS on one thread: the kernels' items are the only threads
        try:
            with threads.hot():     # pool threads spin between the kernels' parallel calls
                return self._fn(feeds, persist, self.kernels, streams)
        except Exception as e:  # re-raise naming the op and the user's line
            raise self._annotate(e) from e

    def run_profiled(self, feeds: Sequence[np.ndarray], persist: Sequence[np.ndarray],
                     times: List[float],
                     streams: Sequence[np.random.Generator] = ()) -> Tuple[tuple, tuple]:
        """Like ``run`` but adds each step's wall time (seconds) into ``times[step_index]``."""
        fn = self._profiled_fn
        if fn is None:
            with self._lock:
                if self._profiled_fn is None:
                    name = self.filename + "-profiled"
                    self._profiled_fn = self._compile(self._emit(profile=True), name)
                fn = self._profiled_fn
        threads.hold()
        try:
            with threads.hot():
                return fn(feeds, persist, self.kernels, streams, times, time.perf_counter)
        except Exception as e:
            raise self._annotate(e) from e

    def _annotate(self, e: Exception) -> Exception:
        tb, frame_tb = e.__traceback__, None
        while tb is not None:
            if tb.tb_frame.f_code.co_filename in self._line_maps:
                frame_tb = tb
            tb = tb.tb_next
        if frame_tb is None:
            return e
        line_map = self._line_maps[frame_tb.tb_frame.f_code.co_filename]
        if frame_tb.tb_lineno not in line_map:
            return e
        info = self.steps[line_map[frame_tb.tb_lineno]]
        op_type, pos = info.ops[0]                     # a fused step names its first op
        where = f"op #{pos} of block {info.block}"
        if len(info.ops) > 1:
            where += " (fused with " + ", ".join(t for t, _ in info.ops[1:]) + ")"
        f_locals = frame_tb.tb_frame.f_locals
        for counter, loop in info.loops:           # errors inside loops name the iteration
            where += f", iteration {f_locals.get(counter, '?')} of the while {loop}"
        shapes = []
        for n, loc in info.inputs:
            val = f_locals.get(loc)
            if isinstance(val, np.ndarray):
                desc = f"{list(val.shape)} {val.dtype}"
            elif isinstance(val, list):
                desc = f"tensor array of {len(val)} element(s)"
            else:
                desc = "?"
            shapes.append(f"{n}: {desc}")
        msg = (f"Error in op '{op_type}' ({where}) while running: "
               f"{type(e).__name__}: {e}\n  inputs: {', '.join(shapes) or '(none)'}\n"
               f"  op created at:\n    {creation_site(info.callstack)}")
        new = (type(e) if type(e) in _KEEP_ERROR_TYPES else EnforceNotMet)(msg)
        new.op_type = op_type                               # type: ignore[attr-defined]
        new.op_index = pos                                  # type: ignore[attr-defined]
        return new


# -- code generation (compile time only; nothing here outlives the Plan constructor) ---------
class _CodeGen:
    """Builds the body of one plan: ``body`` holds (step index or None, line) pairs."""

    def __init__(self, block: Block, random_seed: int, program: Optional[Program] = None) -> None:
        self.block = block
        self.cur_block = block                    # the block whose ops are being generated
        self.random_seed = int(random_seed or 0)
        self.block_pos = {id(op): i for i, op in enumerate(block.ops)}
        self.local: Dict[str, str] = {}           # var name -> its current local
        self._counter = itertools.count()
        self.body: List[Tuple[Optional[int], str, int]] = []   # (step, text, depth)
        self.depth = 0                            # nesting of generated loops / ifs
        self.def_at: Dict[str, int] = {}          # local -> body index where it is first bound
        self.loops: List[Tuple[str, str]] = []    # enclosing while loops (see StepInfo.loops)
        self.vlocal: Optional[Dict[str, str]] = None   # SSA version -> local (in a block body)
        self.version_table: Any = None            # SSA versions of the body being generated
        # sub-block ops: StepScopes name -> (versions the grad block reads, their locals)
        self.records: Dict[str, List[str]] = {}
        self.grad_of_scope: Dict[str, List[Operator]] = {}   # records -> the grad ops reading
        if program is not None:
            for b in program.blocks:
                if b is not block:
                    self.block_pos.update((id(op), i) for i, op in enumerate(b.ops))
                for op in b.ops:        # (an unknown op type fails when generated)
                    opdef = registry.get_op_def(op.type) if registry.has_op(op.type) else None
                    if opdef is not None and opdef.sub_block_op and opdef.block_backward:
                        for n in op.inputs.get(opdef.records_slot, []):
                            self.grad_of_scope.setdefault(n, []).append(op)
        self.last_use: Dict[str, int] = {}        # local -> body index after which it dies
        self.persist_reads: List[str] = []
        self.persist_local: Dict[str, str] = {}   # persistable -> the local read from P
        self.write_names: List[str] = []
        self.kernels: List[Any] = []
        self.consts: Set[str] = set()             # locals bound to folded constants
        self.stream_seeds: List[Tuple[int, ...]] = []
        self.steps: List[StepInfo] = []
        # LoD: a block that declares LoD wraps every kernel (core/lod.wrap_binding)
        self.lod_on = any(_lod.block_uses_lod(b)     # sub-blocks run in the same plan
                          for b in (program.blocks if program is not None else [block]))

    def _new_local(self) -> str:
        loc = f"t{next(self._counter)}"
        self.def_at[loc] = len(self.body)
        return loc

    def _kernel(self, fn: Any) -> str:
        self.kernels.append(fn)
        return f"k{len(self.kernels) - 1}"

    def _var(self, name: str) -> Any:
        return self.cur_block._find_var_recursive(name)

    def _emit(self, step: Optional[int], text: str) -> int:
        self.body.append((step, text, self.depth))
        return len(self.body) - 1

    def feeds(self, feed_names: Sequence[str]) -> None:
        for i, n in enumerate(feed_names):
            self.local[n] = self._new_local()
            self._emit(None, f"{self.local[n]} = F[{i}]")

    def _read_persistable(self, name: str) -> str:
        loc = self.local[name] = self.persist_local[name] = self._new_local()
        self._emit(None, f"{loc} = P[{len(self.persist_reads)}]")
        self.persist_reads.append(name)
        return loc

    def _init_rank(self, op: Any) -> Optional[int]:
        """How many initializer ops (no inputs, every output persistable) follow ``op`` in its
        block: its creation rank, as initializers are prepended."""
        ranks = getattr(self, "_init_ranks", None)
        if ranks is None:
            ranks, k = {}, 0
            for o in reversed(getattr(self, "cur_block", self.block).ops):
                outs = [n for n in o.output_arg_names if n != names.EMPTY_VAR_NAME]
                if outs and not any(n != names.EMPTY_VAR_NAME for n in o.input_arg_names) and \
                        all(getattr(self._var(n), "persistable", False) for n in outs):
                    ranks[id(o)], k = k, k + 1
            self._init_ranks = ranks
        return ranks.get(id(op))

    def _read(self, name: str, op: Any) -> str:
        if name == names.EMPTY_VAR_NAME:
            return "None"
        loc = self.local.get(name)
        if loc is not None:
            return loc
        var = self._var(name)
        if var is not None and var.persistable:
            return self._read_persistable(name)
        if var is not None and var.type == VarType.LOD_TENSOR_ARRAY:
            loc = self.local[name] = self._new_local()      # a declared array starts empty
            self._emit(None, f"{loc} = []")
            return loc
        first = getattr(op, "covered", [op])[0]
        raise ValueError(_missing_input_message(name, first, self.block_pos.get(id(first), -1),
                                                var))

    def _args(self, op: Any, opdef: registry.OpDef) -> Tuple[List[str], List[Tuple[str, str]]]:
        """Argument texts in slot order, and the (name, local) pairs they read."""
        args: List[str] = []
        used: List[Tuple[str, str]] = []
        for slot in opdef.in_slots:
            arg_names = op.inputs.get(slot.name) or []
            if slot.duplicable:
                locs = [self._read(n, op) for n in arg_names]
                args.append("[" + ", ".join(locs) + "]")
                used += zip(arg_names, locs)
            elif arg_names:
                args.append(self._read(arg_names[0], op))
                used.append((arg_names[0], args[-1]))
            else:
                args.append("None")
        return args, [(n, l) for n, l in used if l != "None"]

    def step(self, op: Any) -> None:
        """Generate the lines of one op (or fused group)."""
        opdef = getattr(op, "opdef", None) or registry.get_op_def(op.type)
        if opdef.sub_block_op:
            return _blocks.emit(self, op, opdef)
        covered = getattr(op, "covered", None) or [op]
        idx = len(self.steps)
        args, used = self._args(op, opdef)
        for slot in opdef.reads_outputs:                   # the kernel gets the old value
            prev = [n for n in op.outputs.get(slot, []) if n != names.EMPTY_VAR_NAME]
            loc = self.local.get(prev[0]) if prev else None
            if loc is None and prev and getattr(self._var(prev[0]), "persistable", False):
                loc = self._read_persistable(prev[0])
            args.append(loc or "None")
            if loc:
                used.append((prev[0], loc))
        present = set()                  # output slots naming at least one variable
        for slot in opdef.out_slots:
            if any(n != names.EMPTY_VAR_NAME for n in op.outputs.get(slot.name, ())):
                present.add(slot.name)
        binding = opdef.bind(_InSpecs(self.cur_block, op, opdef), op.attrs, present)
        if self.lod_on:                  # the op's LoD rule (core/lod.py)
            binding = _lod.wrap_binding(opdef, op.attrs, binding)
        pos = self.block_pos
        self.steps.append(StepInfo(op.type, tuple([(o.type, pos.get(id(o), -1)) for o in covered]),
                                   covered[0].attrs.get("op_callstack"), tuple(used),
                                   self.cur_block.idx, tuple(self.loops)))
        if self._foldable(op, opdef, args):
            outs = self._fold(idx, op, opdef, binding)
        else:
            fn, extra = self._random(op, opdef, binding.fn)
            call = f"{self._kernel(fn)}({', '.join(args + extra)})"
            outs = self._assign(idx, op, opdef, binding, present, call)
        if CHECK_DTYPES:
            self._dtype_checks(idx, outs)
        last = len(self.body) - 1
        for _, loc in used:
            self.last_use[loc] = last
        for n, loc in outs:
            self.local[n] = loc
            self.last_use.setdefault(loc, last)
        if self.vlocal is not None:          # inside a block body: name the SSA versions
            self.vlocal.update(_blocks.versions_of(self, op, outs))

    def _dtype_checks(self, idx: int, outs: List[Tuple[str, str]]) -> None:
        """``CHECK_DTYPES``: one check per dense-tensor output with a declared dtype."""
        for n, loc in outs:
            var = self._var(n)
            if var is None or var.dtype is None or var.type != VarType.LOD_TENSOR:
                continue
            want = np.dtype(to_numpy_dtype(var.dtype))
            self._emit(idx, f"_ckd({loc}, {self._kernel(want)}, {n!r})")

    def _foldable(self, op: Any, opdef: registry.OpDef, args: List[str]) -> bool:
        """A ``foldable`` op without inputs, not writing a persistable: a compile-time
        constant."""
        return (opdef.foldable and all(a == "None" or a == "[]" for a in args)
                and not any(getattr(self._var(n), "persistable", True)
                            for n in op.output_arg_names))

    def _fold(self, idx: int, op: Any, opdef: registry.OpDef,
              binding: registry.Binding) -> List[Tuple[str, str]]:
        result = binding.fn(*[[] if s.duplicable else None for s in opdef.in_slots])
        outs = []
        for slot in opdef.out_slots:
            value = result if binding.single else \
                result[binding.result_keys.get(slot.name, slot.name)]
            values = value if slot.duplicable else [value]
            for n, v in zip(op.outputs.get(slot.name, []), values):
                loc = self._new_local()
                self.consts.add(loc)
                self._emit(idx, f"{loc} = {self._kernel(v)}  # {op.type} (constant)")
                outs.append((n, loc))
        return outs

    def _random(self, op: Any, opdef: registry.OpDef,
                fn: Callable) -> Tuple[Callable, List[str]]:
        """Supply ``rng`` to a random op's kernel (rules in the module docstring)."""
        if not opdef.uses_rng:
            return fn, []
        seed = int(op.attrs.get("seed", 0) or 0)
        if seed != 0 and op.attrs.get("fix_seed", True):
            return (lambda *a: fn(*a, rng=np.random.default_rng(seed))), []
        key = (self.random_seed, self.cur_block.idx, self.block_pos.get(id(op), -1))
        outs = [n for n in op.output_arg_names if n != names.EMPTY_VAR_NAME]
        if outs and all(getattr(self._var(n), "persistable", False) for n in outs):
            # an initializer: seeded by its creation rank among the block's initializers (fluid
            # prepends them, so the k-th created is the k-th from the end) -- stable as a model
            # grows or ops are appended, and equal for two identically built programs
            rank = self._init_rank(op)
            if rank is not None:
                key = (self.random_seed, key[1], rank)
            return (lambda *a: fn(*a, rng=np.random.default_rng(list(key)))), []
        self.stream_seeds.append(key)
        return fn, [f"rng=S[{len(self.stream_seeds) - 1}]"]

    def _assign(self, idx: int, op: Any, opdef: registry.OpDef, binding: registry.Binding,
                present: Set[str], call: str) -> List[Tuple[str, str]]:
        """Emit ``call`` and bind its results to new locals; returns (name, local) pairs."""
        comment = f"  # {self.steps[idx].type}"
        slots = [s for s in opdef.out_slots if s.name in present]
        if binding.single:
            loc = self._new_local()
            self._emit(idx, f"{loc} = {call}{comment}")
            return [(op.outputs[slots[0].name][0], loc)]
        if not slots:
            self._emit(idx, f"{call}{comment}")
            return []
        outs: List[Tuple[str, str]] = []
        lines = []
        for slot in slots:
            arg_names = op.outputs[slot.name]
            locs = [self._new_local() if n != names.EMPTY_VAR_NAME else "_" for n in arg_names]
            lhs = ", ".join(locs) + ("," if slot.duplicable else "")
            lines.append((lhs, repr(binding.result_keys.get(slot.name, slot.name))))
            outs += [(n, l) for n, l in zip(arg_names, locs) if l != "_"]
        if len(lines) == 1:
            self._emit(idx, f"{lines[0][0]} = {call}[{lines[0][1]}]{comment}")
        else:
            self._emit(idx, f"_r = {call}{comment}")
            for lhs, key in lines:
                self._emit(idx, f"{lhs} = _r[{key}]")
        return outs

    def fetches(self, fetch_names: Sequence[str]) -> List[str]:
        locs = []
        for n in fetch_names:
            if n not in self.local:
                var = self._var(n)
                if var is None:
                    close = difflib.get_close_matches(n, list(self.block.vars), n=5, cutoff=0.5)
                    raise ValueError(f"Cannot fetch '{n}': no such variable in the program. "
                                     f"Closest existing names: {close}")
                if not var.persistable:
                    raise ValueError(f"fetch variable '{n}' is neither fed nor computed by the "
                                     f"program, and it is not persistable; fetch a variable "
                                     f"that an op of the program writes")
                self._read_persistable(n)
            locs.append(self.local[n])
        return locs

    def writebacks(self) -> List[str]:
        """Persistables whose final local is not the value read from the scope."""
        locs = []
        for n, loc in self.local.items():
            var = self._var(n)
            if var is None or not var.persistable or self.persist_local.get(n) == loc:
                continue
            self.write_names.append(n)
            locs.append(loc)
        return locs

    def deletions(self, keep: Set[str]) -> Dict[int, List[str]]:
        """Body index -> temporaries that die after it (eager deletion)."""
        dies: Dict[int, List[str]] = {}
        for loc, idx in self.last_use.items():
            if loc not in keep:
                dies.setdefault(idx, []).append(loc)
        return dies


def check_feed_keys(feed: Dict[Any, Any]) -> None:
    """Feed keys are variable names (``str``), as in fluid: a Variable, bytes or number key
    raises TypeError naming it and the fix."""
    for k in feed:
        if isinstance(k, str):
            continue
        if isinstance(k, Variable):
            raise TypeError(f"feed keys must be variable names (str), but the feed dict is keyed "
                            f"by the Variable '{k.name}' itself; write {{{k.name!r}: array}} "
                            f"(or {{var.name: array}})")
        raise TypeError(f"feed keys must be variable names (str), but the feed dict has the key "
                        f"{k!r} of type {type(k).__name__}; write {{'<variable name>': array}}")


def _take_filename(plan: "Plan") -> str:
    """A ``<fluidlite-plan-N>`` name for the plan's code, released when the plan is collected.

    CPython keeps every filename ever passed to ``compile`` for good, so the names of collected
    plans are reused: the number of distinct names is the number of plans alive at once.
    """
    try:
        n = _free_plan_ids.pop()            # atomic: threads may compile (different executors)
    except IndexError:
        n = next(_plan_ids)
    name = f"<fluidlite-plan-{n}>"
    weakref.finalize(plan, _release_filename, n, name)
    return name


def _release_filename(n: int, name: str) -> None:
    linecache.cache.pop(name, None)
    linecache.cache.pop(name + "-profiled", None)
    _free_plan_ids.append(n)


def _fuse(ops: List[Operator], block: Block, fetch_names: Sequence[str],
          feed_names: Sequence[str]) -> List[Any]:
    """``fusion.fuse``: fetched names stay materialised, fed names are never updated in
    place."""
    return fuse(ops, block, fetch_names=set(fetch_names), feed_names=set(feed_names))


def _feed_spec(block: Block, name: str) -> FeedSpec:
    var = block._find_var_recursive(name)
    if var is None:
        close = difflib.get_close_matches(name, list(block.vars), n=3)
        raise ValueError(f"The fed variable '{name}' is not declared in the program. Closest "
                         f"names: {close}. Feed only variables created with fluid.data / "
                         f"fluid.layers.data.")
    want = None
    if var.dtype is not None and var.type == VarType.LOD_TENSOR:
        want = np.dtype(to_numpy_dtype(var.dtype))
    strict = not (var.is_data and not var.need_check_feed)
    return FeedSpec(name, want, tuple(var.shape), bool(var.persistable), strict)


class _InSpecs(collections.abc.Sequence):
    """The ``in_specs`` handed to ``OpDef.bind``: per input slot a ``VarSpec``, a list of them
    (several variables) or None. Built on first access: most binds never look."""

    def __init__(self, block: Block, op: Any, opdef: registry.OpDef) -> None:
        self._block, self._op, self._slots = block, op, opdef.in_slots
        self._specs: Optional[List[Any]] = None

    def __len__(self) -> int:
        return len(self._slots)

    def var_type(self, slot: str) -> Any:
        """The VarType of input ``slot``'s first variable (None when absent): an update op
        binds its sparse path for a SELECTED_ROWS gradient (``ops/inplace.py``)."""
        arg_names = self._op.inputs.get(slot)
        v = self._block._find_var_recursive(arg_names[0]) if arg_names else None
        return getattr(v, "type", None)

    def output_count(self, slot: str) -> int:
        """How many variables the op's output ``slot`` names (``select_output``'s kernel)."""
        return len(self._op.outputs.get(slot, ()))

    def __getitem__(self, i: Any) -> Any:
        if self._specs is None:
            self._specs = [self._spec(self._op.inputs.get(s.name)) for s in self._slots]
        return self._specs[i]

    def _spec(self, arg_names: Optional[List[str]]) -> Any:
        if not arg_names:
            return None
        specs = []
        for n in arg_names:
            v = self._block._find_var_recursive(n)
            specs.append(v.spec if v is not None else None)
        return specs if len(specs) > 1 else specs[0]


def _missing_input_message(name: str, op: Operator, op_idx: int, var: Any) -> str:
    site = creation_site(op.attrs.get("op_callstack"))
    where = f"op '{op.type}' (op #{op_idx}, created at {site})"
    if var is not None and var.is_data:
        return (f"Need feed data for variable '{name}': {where} reads it. Pass it in the feed "
                f"dict, e.g. exe.run(feed={{'{name}': array}}, ...)")
    return (f"variable '{name}' read by {where} is not fed, not produced by an earlier op, and "
            f"not persistable")
