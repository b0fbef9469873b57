"""``Executor``: validate feeds, fetch (or compile) the cached plan, run it against a Scope."""
from __future__ import annotations

import logging
import weakref
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..core import scope as scope_mod
from ..core.dtypes import to_numpy_dtype
from ..core.ir import Program, Variable, default_main_program
from ..core.scope import CUDAPlace, LoDTensor, Scope
from .. import profiler
from .plan import Plan

_log = logging.getLogger("fluidlite")
_warned_cuda = False


class Executor:
    """Runs Programs on a place (always the CPU). Plans are cached per program identity, program
    version, feed names and fetch names, so a program changed after a run is recompiled."""

    def __init__(self, place: Any = None) -> None:
        self.place = place if place is not None else scope_mod.CPUPlace()
        self._closed = False
        self.last_profile: Optional[profiler.Profile] = None
        self._cache: "weakref.WeakKeyDictionary[Program, Dict[tuple, Plan]]" = \
            weakref.WeakKeyDictionary()

    def close(self) -> None:
        self._closed = True
        self._cache.clear()

    def run(self, program: Any = None, feed: Any = None, fetch_list: Any = None,
            feed_var_name: str = "feed", fetch_var_name: str = "fetch",
            scope: Optional[Scope] = None, return_numpy: bool = True,
            use_program_cache: bool = False, return_merged: bool = True,
            use_prune: bool = False, profile: bool = False) -> List[Any]:
        """Run block 0 of ``program`` (default: the default main program).

        ``feed`` maps variable names to arrays; ``fetch_list`` holds Variables or names. Returns
        the fetched values in order (numpy arrays, or LoDTensors when ``return_numpy=False``).
        Feeds are validated and parameters checked before any op runs; persistables are written
        to ``scope`` only after the whole step succeeded. ``profile=True`` times every op; the
        result is in ``self.last_profile`` (see ``fluidlite.profiler``).
        """
        if self._closed:
            raise RuntimeError("Attempted to use a closed Executor")
        self._warn_cuda()
        if program is None:
            program = default_main_program()
        program = getattr(program, "_program", program)     # CompiledProgram
        if not isinstance(program, Program):
            raise TypeError("Executor requires Program as its Parameter. But you passed in "
                            f"{type(program)}")
        feed = _normalize_feed(feed)
        fetch_names = _normalize_fetch(fetch_list)
        scope = scope if scope is not None else scope_mod.global_scope()
        plan = self._plan(program, tuple(feed), tuple(fetch_names))
        if not plan.ops and not fetch_names:
            _log.warning("There are no operators in the program to be executed. If you pass "
                         "Program manually, please use fluid.program_guard to ensure the current "
                         "Program is being used.")
        arrays, lods = _check_feed(plan, feed)
        holders = plan.holders.get(scope)
        if holders is None:
            holders = [scope.find_var(n) for n in plan.persist_reads]
            if all(h is not None for h in holders):
                plan.holders[scope] = holders      # holders are stable once created
        persist = [None if h is None else h._tensor._array for h in holders]
        if any(a is None for a in persist):
            missing = [n for n, a in zip(plan.persist_reads, persist) if a is None]
            raise RuntimeError(
                f"Persistable variable(s) {missing} are not initialized in the scope. Run the "
                f"startup program first (exe.run(fluid.default_startup_program())), or load "
                f"them (fluid.io.load_persistables) before running this program.")
        active = profiler.active()
        if profile or active is not None:
            times = [0.0] * len(plan.ops)
            fetched, written = plan.run_profiled(arrays, persist, times)
            op_types = [op.type for op in plan.ops]
            if profile:
                self.last_profile = profiler.Profile()
                self.last_profile.add_run(op_types, times)
            if active is not None:
                active.add_run(op_types, times)
        else:
            fetched, written = plan.run(arrays, persist)
        targets = plan.write_holders.get(scope)
        if targets is None:
            targets = plan.write_holders[scope] = [
                scope.find_var(n) or scope.var(n) for n in plan.write_names]
        for h, arr in zip(targets, written):
            h._tensor._array = arr
        results = [arr.copy() if copy and isinstance(arr, np.ndarray) else arr
                   for arr, copy in zip(fetched, plan.fetch_copies)]  # never hand out scope buffers
        if not return_numpy:
            results = [LoDTensor(arr, lods.get(n)) for n, arr in zip(plan.fetch_names, results)]
        return results

    def _plan(self, program: Program, feed_names: Tuple[str, ...],
              fetch_names: Tuple[str, ...]) -> Plan:
        plans = self._cache.get(program)
        if plans is None or plans.get("__version__") != program.version:
            plans = {"__version__": program.version}
            self._cache[program] = plans
        key = (feed_names, fetch_names)
        plan = plans.get(key)
        if plan is None:
            plan = plans[key] = Plan(program, 0, feed_names, fetch_names)
        return plan

    def _warn_cuda(self) -> None:
        global _warned_cuda
        if isinstance(self.place, CUDAPlace) and not _warned_cuda:
            _warned_cuda = True
            _log.warning("fluidlite runs on the CPU only; %r is accepted and the program runs "
                         "on the CPU.", self.place)


def _check_feed(plan: Plan, feed: Dict[str, Any]) -> Tuple[List[np.ndarray], Dict]:
    """Validate fed values against the plan's feed specs (dtype exactly, shape with -1 = any)."""
    arrays, lods = [], {}
    for (name, value), (var, want, shape) in zip(feed.items(), plan.feed_specs):
        lod = None
        if type(value) is not np.ndarray:
            if isinstance(value, LoDTensor):
                lod = value.lod() or None
                value = np.asarray(value)
            elif isinstance(value, np.ndarray):
                pass
            else:
                value = _to_array(name, value, var)
        if want is not None and value.dtype != want:
            raise ValueError(
                f"The data type of fed Variable '{name}' must be '{want.name}', but received "
                f"'{value.dtype.name}'. Convert the array before feeding: "
                f"feed={{'{name}': array.astype('{want.name}')}}")
        if shape and (len(shape) != value.ndim or lod is not None or any(
                w >= 0 and w != g for w, g in zip(shape, value.shape))):
            _check_shape(name, var, value.shape, has_lod=lod is not None)
        if lod:
            lods[name] = lod
        arrays.append(value)
    return arrays, lods


def _check_shape(name: str, var: Variable, got: Tuple[int, ...], has_lod: bool) -> None:
    want = var.shape
    ok = len(want) == len(got) and all(
        w < 0 or w == g or (i == 0 and has_lod) for i, (w, g) in enumerate(zip(want, got)))
    if not ok:
        raise ValueError(
            f"The fed Variable '{name}' should have dimensions = {len(want)}, shape = "
            f"{list(want)}, but received fed shape {list(got)}. Reshape the array to match "
            f"(-1 matches any size), e.g. array.reshape({_suggest(want, got)})")


def _suggest(want: Tuple[int, ...], got: Tuple[int, ...]) -> str:
    fixed = [d for d in want if d >= 0]
    return ", ".join(str(d) if d >= 0 else "-1" for d in want) if fixed else str(list(got))


def _to_array(name: str, value: Any, var: Variable) -> np.ndarray:
    dtype = to_numpy_dtype(var.dtype) if var.dtype is not None else None
    if isinstance(value, (int, float, bool, np.number, list, tuple)):
        try:
            return np.array(value, dtype=dtype)
        except ValueError:
            raise TypeError(f"The fed data of '{name}' is a ragged nested list; use "
                            f"fluid.create_lod_tensor to feed variable-length data") from None
    raise TypeError(f"Convert data of type {type(value)} to Tensor is not supported "
                    f"(feeding '{name}')")


def _normalize_feed(feed: Any) -> Dict[str, Any]:
    if feed is None:
        return {}
    if isinstance(feed, (list, tuple)):
        if len(feed) != 1:
            raise ValueError("Not compiled with data parallel: feed a single dict")
        feed = feed[0]
    if not isinstance(feed, dict):
        raise TypeError(f"feed requires dict as its Parameter. But you passed in {type(feed)}")
    return {(k.name if isinstance(k, Variable) else k): v for k, v in feed.items()}


def _normalize_fetch(fetch_list: Any) -> List[str]:
    if fetch_list is None:
        return []
    if isinstance(fetch_list, (Variable, str)):
        fetch_list = [fetch_list]
    out: List[str] = []

    def walk(items: Sequence[Any], top: bool) -> None:
        for i, item in enumerate(items):
            if isinstance(item, Variable):
                out.append(item.name)
            elif isinstance(item, str):
                out.append(item)
            elif isinstance(item, (list, tuple)):
                walk(item, False)
            elif item is None or not top:
                continue   # e.g. the (optimize_ops, params_grads) tuple's operators
            else:
                raise TypeError(f"Require fetch_list[{i}] 's type shall be one of (Variable, "
                                f"str), but received {type(item).__name__}.")

    walk(list(fetch_list), True)
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
