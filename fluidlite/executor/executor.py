"""``Executor``: validate feeds, fetch (or compile) the cached plan, run it against a Scope."""
from __future__ import annotations

import collections
import contextlib
import logging
import threading
import weakref
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..core import lod as _lod      # LoD of feeds and fetches (core/lod.py)
from ..core import readers as _readers  # started non-iterable DataLoaders (core/readers.py)
from ..core import scope as scope_mod
from ..core.ir import Operator, OpRole, Program, Variable, default_main_program
from ..core.memory import tune_malloc
from ..core.scope import CUDAPlace, LoDTensor, Scope
from ..core.selected_rows import SelectedRows
from .. import profiler
from .plan import Plan, check_feed_keys

_log = logging.getLogger("fluidlite")
_warned_cuda = False


class _Bound:
    """A plan resolved against one scope: its variable holders and random streams there."""

    __slots__ = ("epoch", "reads", "writes", "streams")

    def __init__(self, epoch: int, reads: List[Any], streams: List[np.random.Generator]):
        self.epoch, self.reads, self.streams = epoch, reads, streams
        self.writes: Optional[List[Any]] = None     # resolved after the first successful run


class _ScopeCell:
    """A scope holder seen as a cell (``_value``), for ``Executor._runner``."""

    __slots__ = ("holder",)

    def __init__(self, holder: Any) -> None:
        self.holder = holder

    @property
    def _value(self) -> Optional[np.ndarray]:
        return self.holder.get_array()

    @_value.setter
    def _value(self, array: np.ndarray) -> None:
        self.holder.set_array(array)


class Executor:
    """Runs Programs on a place (always the CPU).

    Plans are cached per program identity, program version, feed names and fetch names (so a
    program changed after a run is recompiled). The cache holds at most ``cache_size`` plans
    (least recently used dropped first) and never keeps a program alive: the plans of a
    collected program are released.

    **Threads.** One Executor may be shared by any number of threads, each running on its own
    ``Scope`` (the same program included): compiling and caching plans is locked, a compiled
    plan is immutable (fused updates use per-thread scratch), and all state a run changes
    belongs to its scope — the persistables, and the random streams of ops such as dropout,
    which the executor keeps per (plan, scope). Each thread's results are exactly those it
    gets running alone. Not supported: one scope used by two threads at once (nor a parent
    scope whose variables a run writes), and changing a program while another thread runs it.
    ``last_profile`` is the latest profiled run of any thread.

    Args:
        place (Place | None): accepted for fluid's signature (``CPUPlace()``,
            ``CUDAPlace(0)``); everything runs on the CPU.

    Returns:
        Executor: an executor with an empty plan cache; ``run`` executes programs.

    Raises:
        None: the constructor does not raise (any ``place`` is accepted).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 2])
        ...     w = fluid.layers.create_parameter([2, 1], "float32",
        ...         default_initializer=fluid.initializer.Constant(0.5))
        ...     y = fluid.layers.matmul(x, w)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)                      # initialise the parameter
        >>> exe.run(main, feed={"x": np.array([[1, 2]], "float32")}, fetch_list=[y])
        [array([[1.5]], dtype=float32)]
    """

    cache_size: int = 64

    def __init__(self, place: Any = None) -> None:
        tune_malloc()       # once per process: recycle large buffers (core/memory.py says why)
        self.place = place if place is not None else scope_mod.CPUPlace()
        self._closed = False
        self.last_profile: Optional[profiler.Profile] = None
        self._lock = threading.Lock()
        # (id(program), program.version, feed names, fetch names) -> Plan, in LRU order
        self._plans: "collections.OrderedDict[tuple, Plan]" = collections.OrderedDict()
        self._watched: Dict[int, weakref.finalize] = {}   # id(program) -> its finalizer
        self._dead: List[int] = []          # ids of collected programs not yet purged
        # use_prune: (id(program), version, feeds, fetches, optimize op indices) -> pruned
        self._pruned_programs: "collections.OrderedDict[tuple, Program]" = \
            collections.OrderedDict()
        self._bound: "weakref.WeakKeyDictionary[Scope, weakref.WeakKeyDictionary]" = \
            weakref.WeakKeyDictionary()     # scope -> {plan: _Bound}

    def close(self) -> None:
        """Release the executor's compiled plans; it must not run programs afterwards (fluid 1.8's
        ``close``).

        Args:
            None: this method takes no arguments.

        Returns:
            None.

        Raises:
            None: this method does not raise; a later ``run`` raises RuntimeError.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> exe = fluid.Executor(fluid.CPUPlace())
            >>> exe.close()                  # releases the compiled plans; the executor is done
        """
        self._closed = True
        with self._lock:
            self._plans.clear()
            for fin in self._watched.values():
                fin.detach()
            self._watched.clear()
            self._bound = weakref.WeakKeyDictionary()

    def run(self, program: Any = None, feed: Any = None, fetch_list: Any = None,
            feed_var_name: str = "feed", fetch_var_name: str = "fetch",
            scope: Optional[Scope] = None, return_numpy: bool = True,
            use_program_cache: bool = False, return_merged: bool = True,
            use_prune: bool = False, profile: bool = False) -> List[Any]:
        """Run block 0 of ``program`` (default: the default main program).

        ``feed`` maps variable names to arrays; ``fetch_list`` holds Variables or names. Returns
        the fetched values in order (numpy arrays, or LoDTensors when ``return_numpy=False``).
        Feeds are validated and parameters checked before any op runs; persistables are written
        to ``scope`` only after the whole step succeeded. Feeding a persistable (e.g. a
        parameter) overrides it with a copy of the fed array: the caller's array is never
        written. ``profile=True`` times every op of this run into ``self.last_profile`` (a
        ``fluidlite.profiler.Profile``: ``print(exe.last_profile.report())`` shows the table)
        and prints nothing; ``with fluid.profiler.profiler("CPU"):`` prints the report of the
        runs inside it when the block ends.

        Args:
            program (Program | CompiledProgram | None): what to run (default: the default main
                program).
            feed (dict | None): ``{name: numpy array | LoDTensor}`` for the program's data
                variables; checked for names, shapes and dtypes before anything runs.
            fetch_list (list | None): Variables or names whose values to return.
            feed_var_name (str, default "feed"): fluid's feed variable name.
            fetch_var_name (str, default "fetch"): fluid's fetch variable name.
            scope (Scope | None): where persistables live (default: the global scope).
            return_numpy (bool, default True): NumPy arrays; ``False`` returns LoDTensors with
                their LoD.
            use_program_cache (bool, default False): accepted; compiled plans are always cached.
            return_merged (bool, default True): accepted for fluid's signature.
            use_prune (bool, default False): run only the ops the fetches need.
            profile (bool, default False): time this run into ``exe.last_profile``.
        Returns:
            list: one value per ``fetch_list`` entry.
        Raises:
            ValueError: an unknown feed or fetch name, a feed of the wrong shape or dtype; the
                message names the variable and the fix.
            RuntimeError: an uninitialized persistable (run the startup program first).

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     x = fluid.data("x", [-1, 3])
            ...     s = fluid.layers.reduce_sum(x)
            >>> exe = fluid.Executor(fluid.CPUPlace())
            >>> out, = exe.run(main, feed={"x": np.arange(6, dtype="float32").reshape(2, 3)},
            ...                fetch_list=[s])
            >>> out
            array([15.], dtype=float32)
            >>> exe.run(main, feed={"x": np.ones((1, 3), "float32")}, fetch_list=[s.name],
            ...         return_numpy=True)[0]
            array([3.], dtype=float32)
        """
        if self._closed:
            raise RuntimeError("Attempted to use a closed Executor")
        self._warn_cuda()
        if program is None:
            program = default_main_program()
        if getattr(program, "_local_places", 1) > 1:        # data parallel on CPU places
            from . import places
            scope = scope if scope is not None else scope_mod.global_scope()
            return places.run(self, program, feed, _normalize_fetch(fetch_list), scope,
                              return_numpy, return_merged)
        program = getattr(program, "_program", program)     # CompiledProgram
        if not isinstance(program, Program):
            raise TypeError("Executor requires Program as its Parameter. But you passed in "
                            f"{type(program)}")
        feed = _normalize_feed(feed)
        if _readers.ACTIVE:             # a started non-iterable reader feeds this program
            feed = _readers.next_feed(program, feed)
        fetch_names = _normalize_fetch(fetch_list)
        if use_prune:                   # fluid 1.8: run only what the fetches need
            program = self._pruned(program, tuple(feed), tuple(fetch_names),
                                   _optimize_ops(fetch_list))
        scope = scope if scope is not None else scope_mod.global_scope()
        plan = self._plan(program, tuple(feed), tuple(fetch_names))
        if not plan.steps and not fetch_names:
            _log.warning("There are no operators in the program to be executed. If you pass "
                         "Program manually, please use fluid.program_guard to ensure the current "
                         "Program is being used.")
        arrays, lods = plan.check_feeds(feed.values())
        if lods and plan.uses_lod:      # fed LoD travels with the array (core/lod.py)
            arrays = [_lod.attach(a, _lod.normalize(lods.get(n)))
                      for n, a in zip(plan.feed_names, arrays)]
        bound = self._resolve(plan, scope)
        persist = Scope.get_arrays(bound.reads)
        if any(a is None for a in persist):
            raise _uninitialized([n for n, a in zip(plan.persist_reads, persist) if a is None])
        if plan.uses_lod:   # issue 16: persistable LoD state (detection_map accumulators)
            persist = [_lod.attach(a, _lod.normalize(h._tensor._lod)) if h._tensor._lod else a
                       for h, a in zip(bound.reads, persist)]
        fetched, written = self._execute(plan, arrays, persist, bound, profile)
        return self._commit(plan, scope, bound, fetched, written, lods, return_numpy)

    def _execute(self, plan: Plan, arrays: List[Any], persist: List[Any], bound: _Bound,
                 profile: bool) -> Tuple[tuple, tuple]:
        """``plan.run`` (timed per op when profiling): (fetched, written). A failed run leaves
        the random streams as they were, like the persistables."""
        saved = [g.bit_generator.state for g in bound.streams] if bound.streams else None
        try:
            active = profiler.active()
            if not profile and active is None:
                return plan.run(arrays, persist, bound.streams)
            times = [0.0] * len(plan.steps)
            result = plan.run_profiled(arrays, persist, times, bound.streams)
            if profile:
                prof = profiler.Profile()
                prof.add_run(plan.step_types, times, plan.steps)
                self.last_profile = prof
            if active is not None:
                active.add_run(plan.step_types, times, plan.steps)
            return result
        except BaseException:
            for g, state in zip(bound.streams, saved or ()):
                g.bit_generator.state = state
            raise

    def _commit(self, plan: Plan, scope: Scope, bound: _Bound, fetched: Sequence[Any],
                written: Sequence[Any], lods: Dict[str, Any], return_numpy: bool) -> List[Any]:
        """After a successful step: write the persistables to ``scope`` and return the fetched
        values as ``run`` documents them."""
        fetch_lods = None
        written_lods = None
        if plan.uses_lod:               # plain arrays out, their LoD kept apart (core/lod.py)
            fetch_lods = [_lod.lod_of(a) for a in fetched]
            written_lods = [_lod.lod_of(a) for a in written]
            fetched, written = _lod.strip_all(fetched), _lod.strip_all(written)
        if bound.writes is None:
            bound.writes = [scope.find_var(n) or scope.var(n) for n in plan.write_names]
        Scope.set_arrays(bound.writes, written)
        for h, lod in zip(bound.writes, written_lods or ()):
            if lod is not None:         # issue 16: an op-given LoD of a persistable is kept
                h._tensor._lod = [list(level) for level in lod]
        _lod.drop_stale(bound.writes, written, written_lods, plan.write_names,  # issue 15:
                        plan.persist_reads)     # a LoD the op did not give is dropped (lod.py)
        results = [arr.copy() if copy and isinstance(arr, np.ndarray) else arr
                   for arr, copy in zip(fetched, plan.fetch_copies)]  # never hand out scope buffers
        if not return_numpy:
            results = [arr if type(arr) is SelectedRows else LoDTensor(arr, lods.get(n))
                       for n, arr in zip(plan.fetch_names, results)]   # a sparse gradient
            for t, lod in zip(results, fetch_lods or ()):
                if lod is not None:     # the LoD an op's rule gave the fetched value
                    t.set_lod(lod)
        return results

    # -- fluid.dataset (issue 15): the loop lives in fluidlite/dataset.py ---------------------
    def train_from_dataset(self, program: Any = None, dataset: Any = None,
                           scope: Optional[Scope] = None, thread: int = 0, debug: bool = False,
                           fetch_list: Any = None, fetch_info: Any = None,
                           print_period: int = 100, fetch_handler: Any = None) -> None:
        """Run ``program`` once per batch of ``dataset`` (``fluid.dataset``); every
        ``print_period`` batches the ``fetch_list`` values are written as fluid's trainer did.

        Args:
            program (Program | CompiledProgram | None): the program to run; None runs the default
                main program. Default None.
            dataset (DatasetBase): a ``fluid.dataset`` dataset (configured with ``set_use_var``,
                ``set_filelist``, ...; an InMemoryDataset loaded).
            scope (Scope | None): where the variables live; None uses the global scope. Default
                None.
            thread (int): fluid's trainer thread count; unused (the dataset's ``set_thread`` sets
                the parsing threads). Default 0.
            debug (bool): as fluid's trainer in debug mode, time every op and print the
                per-op report (``fluid.profiler``'s) to stdout at the end. Default False.
            fetch_list (list[Variable] | None): variables printed every ``print_period`` batches.
                Default None.
            fetch_info (list[str] | None): the labels printed for ``fetch_list`` (one each); None
                uses the variables' names. Default None.
            print_period (int): batches between two printed lines. Default 100.
            fetch_handler (FetchHandler | None): an object whose ``handler(dict)`` receives
                ``{label: value}`` instead of the printed line. Default None.

        Returns:
            None.

        Raises:
            RuntimeError: ``dataset`` is None, an InMemoryDataset was not loaded, or a run fails
                (e.g. an uninitialized parameter: run the startup program first).
            TypeError: ``dataset`` is not a ``fluid.dataset`` dataset.
            ValueError: ``fetch_info`` does not name each fetched variable, ``set_use_var`` was not
                called, or a data line is malformed.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> import os, tempfile
            >>> path = os.path.join(tempfile.mkdtemp(), "part-0")
            >>> with open(path, "w") as f:
            ...     for line in ["2 1.0 2.0", "2 3.0 4.0"]:
            ...         print(line, file=f)
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup), fluid.unique_name.guard():
            ...     x = fluid.data("x", [-1, 2], "float32")
            ...     loss = fluid.layers.mean(fluid.layers.fc(x, size=1))
            ...     _ = fluid.optimizer.SGD(0.01).minimize(loss)
            >>> dataset = fluid.dataset.DatasetFactory().create_dataset("QueueDataset")
            >>> dataset.set_use_var([x])
            >>> dataset.set_batch_size(1)
            >>> dataset.set_filelist([path])
            >>> exe = fluid.Executor(fluid.CPUPlace())
            >>> _ = exe.run(startup)
            >>> exe.train_from_dataset(main, dataset)       # one pass over the files
        """
        with _debug_profile(debug):
            _dataset_of(dataset)._run(self, program, scope, fetch_list, fetch_info,
                                      print_period, fetch_handler, train=True)

    def infer_from_dataset(self, program: Any = None, dataset: Any = None,
                           scope: Optional[Scope] = None, thread: int = 0, debug: bool = False,
                           fetch_list: Any = None, fetch_info: Any = None,
                           print_period: int = 100, fetch_handler: Any = None) -> None:
        """Like ``train_from_dataset`` on ``program.clone(for_test=True)``: no update.

        Args:
            program (Program | CompiledProgram | None): the program to run (cloned for test); None
                runs the default main program. Default None.
            dataset (DatasetBase): a ``fluid.dataset`` dataset, configured and (InMemoryDataset)
                loaded.
            scope (Scope | None): where the variables live; None uses the global scope. Default
                None.
            thread (int): fluid's trainer thread count; unused. Default 0.
            debug (bool): time every op and print the per-op report at the end. Default
                False.
            fetch_list (list[Variable] | None): variables printed every ``print_period`` batches.
                Default None.
            fetch_info (list[str] | None): the labels printed for ``fetch_list``; None uses the
                variables' names. Default None.
            print_period (int): batches between two printed lines. Default 100.
            fetch_handler (FetchHandler | None): receives ``{label: value}`` instead of the printed
                line. Default None.

        Returns:
            None.

        Raises:
            RuntimeError: ``dataset`` is None, an InMemoryDataset was not loaded, or a run fails.
            TypeError: ``dataset`` is not a ``fluid.dataset`` dataset.
            ValueError: ``fetch_info`` does not name each fetched variable, ``set_use_var`` was not
                called, or a data line is malformed.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> import os, tempfile
            >>> path = os.path.join(tempfile.mkdtemp(), "part-0")
            >>> with open(path, "w") as f:
            ...     for line in ["1 1.0", "1 2.0"]:
            ...         print(line, file=f)
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup), fluid.unique_name.guard():
            ...     x = fluid.data("x", [-1, 1], "float32")
            ...     doubled = fluid.layers.scale(x, 2.0)
            >>> dataset = fluid.dataset.DatasetFactory().create_dataset("QueueDataset")
            >>> dataset.set_use_var([x])
            >>> dataset.set_batch_size(2)
            >>> dataset.set_filelist([path])
            >>> exe = fluid.Executor(fluid.CPUPlace())
            >>> exe.infer_from_dataset(main, dataset, fetch_list=[doubled], print_period=1)
            batch: 1, scale_0.tmp_0: 2.0 4.0
        """
        with _debug_profile(debug):
            _dataset_of(dataset)._run(self, program, scope, fetch_list, fetch_info,
                                      print_period, fetch_handler, train=False)

    # -- use_prune ---------------------------------------------------------------------------
    def _pruned(self, program: Program, feed_names: Tuple[str, ...],
                fetch_names: Tuple[str, ...], optimize_ops: List[Operator]) -> Program:
        """``program`` pruned to the fetches and the selected optimize ops, fed variables being
        cut points (``Program._prune_with_input``); cached like plans, so a pruned program is
        built once per (program version, feeds, targets) and its plan cached as usual."""
        if not fetch_names and not optimize_ops:
            raise ValueError("use_prune=True needs targets: fetch_list names no Variable and no "
                             "optimize op (pass the fetch targets, or minimize()'s result to "
                             "run the optimizer).")
        key = (id(program), program.version, feed_names, fetch_names,
               tuple(op.idx for op in optimize_ops))
        with self._lock:
            pruned = self._pruned_programs.get(key)
            if pruned is not None:
                self._pruned_programs.move_to_end(key)
                return pruned
        pruned = program._prune_with_input(list(feed_names), list(fetch_names) + optimize_ops)
        with self._lock:
            for k in [k for k in self._pruned_programs if k[0] == key[0] and k[1] != key[1]]:
                del self._pruned_programs[k]    # an older version of the program never runs
            self._pruned_programs[key] = pruned
            while len(self._pruned_programs) > self.cache_size:
                self._pruned_programs.popitem(last=False)
        return pruned

    def _runner(self, program: Program, feed_names: Sequence[str],
                fetch_names: Sequence[str], scope: Scope, trusted: bool = False,
                cells: Optional[Dict[str, Any]] = None) -> Callable[[Sequence[Any]], List[Any]]:
        """``run`` reduced to its core, for a caller that runs one program every step with the
        same feeds, fetches and scope (dygraph step replay): the plan and the scope's holders
        are resolved once; each call checks the feeds (arrays in ``feed_names`` order), runs
        the plan, writes the persistables back and returns the fetched arrays (copied where
        ``run`` copies them). A failed call leaves the persistables and the random streams as
        they were. ``run(feeds, own_streams)``: the plan's random ops draw from
        ``own_streams`` (one generator per stream, ``run.stream_count`` of them, in program
        order; the same generator may be given for several) instead of the scope's streams --
        dygraph replay gives the tracer's generator, so dropout draws what the eager ops would
        have. Programs using LoD are not supported (ValueError). ``trusted``: the caller
        passes C-contiguous arrays of exactly the fed variables' shapes and dtypes, so the
        feed checks are skipped. ``cells``: persistables held outside the scope, by name: the
        plan reads each from ``cell._value`` and stores its new array there (the dygraph
        tensors a replayed step shares with the eager side); the others live in ``scope``."""
        plan = self._plan(program, tuple(feed_names), tuple(fetch_names))
        if plan.uses_lod:
            raise ValueError("Executor._runner: the program uses LoD; use run()")
        bound = self._resolve(plan, scope)
        cells = cells or {}

        def cell(name: str, holder: Any) -> Any:
            c = cells.get(name)
            return c if c is not None else _ScopeCell(holder)
        reads = [cell(n, h) for n, h in zip(plan.persist_reads, bound.reads)]
        if any(c._value is None for c in reads):
            raise _uninitialized([n for n, c in zip(plan.persist_reads, reads)
                                  if c._value is None])
        writes = [cell(n, scope.find_var(n) or scope.var(n)) for n in plan.write_names]
        streams = bound.streams
        copies = list(plan.fetch_copies)
        any_copy = any(copies)
        check = None if trusted else plan.check_feeds

        def run(feeds: Sequence[Any],
                own_streams: Optional[Sequence[np.random.Generator]] = None) -> List[Any]:
            arrays = feeds if check is None else check(feeds)[0]
            gens = streams
            if own_streams is not None:
                if len(own_streams) != len(streams):
                    raise ValueError(f"Executor._runner: the plan has {len(streams)} random "
                                     f"stream(s), {len(own_streams)} generator(s) given")
                gens = own_streams
            saved = [g.bit_generator.state for g in gens] if gens else None
            try:
                active = profiler.active()
                if active is None:
                    fetched, written = plan.run(arrays, [c._value for c in reads], gens)
                else:                       # (a replayed dygraph step under the profiler)
                    times = [0.0] * len(plan.steps)
                    fetched, written = plan.run_profiled(arrays, [c._value for c in reads],
                                                         times, gens)
                    active.add_run(plan.step_types, times, plan.steps)
            except BaseException:
                for g, state in zip(gens, saved or ()):
                    g.bit_generator.state = state
                raise
            for c, a in zip(writes, written):
                c._value = a
            if any_copy:
                return [a.copy() if c and isinstance(a, np.ndarray) else a
                        for a, c in zip(fetched, copies)]
            return list(fetched)
        run.stream_count = len(streams)     # type: ignore[attr-defined]
        return run

    # -- plan cache --------------------------------------------------------------------------
    def cached_plans(self, program: Optional[Program] = None) -> List[Plan]:
        """The cached plans (of ``program`` only, when given), least recently used first;
        ``print(plan)`` shows a plan's generated source."""
        with self._lock:
            return [p for k, p in self._plans.items() if program is None or k[0] == id(program)]

    def _plan(self, program: Program, feed_names: Tuple[str, ...],
              fetch_names: Tuple[str, ...]) -> Plan:
        key = (id(program), program.version, feed_names, fetch_names)
        with self._lock:
            if self._dead:
                self._purge()
            plan = self._plans.get(key)
            if plan is not None:
                self._plans.move_to_end(key)
                return plan
            # compile under the lock: one compile at a time, and never two plans for one key
            plan = Plan(program, 0, feed_names, fetch_names)
            pid = id(program)
            if pid not in self._watched:
                self._watched[pid] = weakref.finalize(program, _program_collected,
                                                      weakref.ref(self), pid)
            for k in [k for k in self._plans if k[0] == pid and k[1] != key[1]]:
                del self._plans[k]      # plans of an older version of this program never run
            self._plans[key] = plan
            while len(self._plans) > self.cache_size:
                old, _ = self._plans.popitem(last=False)
                if not any(k[0] == old[0] for k in self._plans):
                    self._watched.pop(old[0]).detach()
            return plan

    def _purge(self) -> None:
        """Drop the plans of collected programs (caller holds the lock)."""
        dead = set()
        while self._dead:                # list.pop is atomic: a finalizer may append meanwhile
            dead.add(self._dead.pop())
        for k in [k for k in self._plans if k[0] in dead]:
            del self._plans[k]
        for k in [k for k in self._pruned_programs if k[0] in dead]:
            del self._pruned_programs[k]
        for pid in dead:
            self._watched.pop(pid, None)

    def _forget_program(self, pid: int) -> None:
        # runs when a program is collected, possibly inside a locked section of this thread
        # (gc): then only note it, the next cache access purges
        self._dead.append(pid)
        if self._lock.acquire(blocking=False):
            try:
                self._purge()
            finally:
                self._lock.release()

    def _resolve(self, plan: Plan, scope: Scope) -> _Bound:
        """The plan's holders (and random streams) in ``scope``; looked up again only after a
        scope gained or lost a variable."""
        per_scope = self._bound.get(scope)
        bound = per_scope.get(plan) if per_scope is not None else None
        epoch = Scope.epoch()
        if bound is not None and bound.epoch == epoch:
            return bound
        reads = [scope.find_var(n) for n in plan.persist_reads]
        if any(h is None for h in reads):
            raise _uninitialized([n for n, h in zip(plan.persist_reads, reads) if h is None])
        streams = bound.streams if bound is not None else plan.new_streams()
        new = _Bound(epoch, reads, streams)
        with self._lock:
            per_scope = self._bound.get(scope)
            if per_scope is None:
                per_scope = self._bound[scope] = weakref.WeakKeyDictionary()
            per_scope[plan] = new
        return new

    def _warn_cuda(self) -> None:
        global _warned_cuda
        if isinstance(self.place, CUDAPlace) and not _warned_cuda:
            _warned_cuda = True
            _log.warning("fluidlite runs on the CPU only; %r is accepted and the program runs "
                         "on the CPU.", self.place)


def _uninitialized(missing: List[str]) -> RuntimeError:
    return RuntimeError(
        f"Persistable variable(s) {missing} are not initialized in the scope. Run the startup "
        f"program first (exe.run(fluid.default_startup_program())), or load them "
        f"(fluid.io.load_persistables) before running this program.")


def _program_collected(exe_ref: "weakref.ref[Executor]", pid: int) -> None:
    exe = exe_ref()
    if exe is not None:
        exe._forget_program(pid)


def _normalize_feed(feed: Any) -> Dict[str, Any]:
    if feed is None:
        return {}
    if isinstance(feed, (list, tuple)):
        if len(feed) != 1:      # (a data-parallel CompiledProgram on N places takes N)
            raise ValueError("Not compiled with data parallel: feed a single dict (or compile "
                             "with fluid.CompiledProgram(program).with_data_parallel() and "
                             "set CPU_NUM to the number of feed dicts)")
        feed = feed[0]
    if not isinstance(feed, dict):
        raise TypeError(f"feed requires dict as its Parameter. But you passed in {type(feed)}")
    check_feed_keys(feed)
    return dict(feed)


def _is_minimize_result(item: Any) -> bool:
    """``(optimize_ops, params_grads)`` as ``Optimizer.minimize`` returns it."""
    return (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], list)
            and all(isinstance(op, Operator) for op in item[0]))


def _optimize_ops(fetch_list: Any) -> List[Operator]:
    """The optimize ops named in ``fetch_list`` (bare, in a list, or as minimize()'s result):
    with ``use_prune`` they select which optimizer runs (fluid 1.8)."""
    if fetch_list is None or isinstance(fetch_list, (Variable, str)):
        return []
    found: List[Operator] = []
    for item in fetch_list:
        items = item[0] if _is_minimize_result(item) else \
            item if isinstance(item, list) else [item]
        for op in items:
            if isinstance(op, Operator):
                if not int(op.attrs.get("op_role", 0)) & OpRole.Optimize:
                    raise TypeError(f"The operator '{op.type}' in fetch_list is not an optimize "
                                    f"op; only an optimizer's ops can be fetch targets.")
                found.append(op)
    return found


def _normalize_fetch(fetch_list: Any) -> List[str]:
    if fetch_list is None:
        return []
    if isinstance(fetch_list, (Variable, str)):
        fetch_list = [fetch_list]
    out: List[str] = []

    def walk(items: Sequence[Any], where: str) -> None:
        for i, item in enumerate(items):
            if isinstance(item, Variable):
                out.append(item.name)
            elif isinstance(item, str):
                out.append(item)
            elif _is_minimize_result(item):
                continue   # optimize ops: targets of use_prune, nothing to fetch
            elif isinstance(item, (list, tuple)):
                walk(item, f"{where}[{i}]")
            elif isinstance(item, Operator) and where != "fetch_list":
                continue   # a list of optimize ops: targets of use_prune, nothing to fetch
            else:          # None included: a silently dropped entry shifts every result after it
                raise TypeError(f"Require {where}[{i}] 's type shall be one of (Variable, "
                                f"str), but received {type(item).__name__}.")

    walk(list(fetch_list), "fetch_list")
    return out


def _fetch_var(name: str, scope: Optional[Scope] = None, return_numpy: bool = True) -> Any:
    """Read a persistable variable's value from ``scope`` (default: the global scope)."""
    scope = scope if scope is not None else scope_mod.global_scope()
    var = scope.find_var(name)
    assert var is not None and var.is_initialized(), (
        f"Cannot find {name} in scope. Perhaps you need to make the variable persistable by "
        f"using var.persistable = True in your program.")
    t = var.get_tensor()
    return np.array(t) if return_numpy else t


def _dataset_of(dataset: Any) -> Any:
    """``dataset`` checked for the interface ``train_from_dataset`` uses (a ``fluid.dataset``
    dataset runs its own loop through ``_run``; the executor knows no dataset class)."""
    if dataset is None:
        raise RuntimeError("dataset is needed and should be initialized")
    if not callable(getattr(dataset, "_run", None)):
        raise TypeError(f"train_from_dataset: expected a fluid.dataset dataset (from "
                        f"fluid.DatasetFactory().create_dataset(...)), received "
                        f"{type(dataset).__name__}")
    return dataset


def _debug_profile(debug: bool) -> Any:
    """``train_from_dataset(debug=True)``: the runs inside are profiled and the report is
    printed when they end (a profiler the user already started keeps collecting instead)."""
    if not debug or profiler.active() is not None:
        return contextlib.nullcontext()
    return profiler.profiler("CPU", sorted_key="total")
