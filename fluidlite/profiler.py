"""Per-op timing, the way fluid's profiler reported it: every ``Executor.run``, and in
dygraph mode every eager op, every node of the eager backward pass (as ``<type>_grad``) and
every replayed step's plan.

    with fluid.profiler.profiler("CPU", sorted_key="total") as prof:
        for _ in range(10):
            exe.run(main, feed=..., fetch_list=[loss])
    # on leaving the block the report is printed to stdout, as fluid's profiler printed it;
    # prof.report() gives the same text again

``stop_profiler`` (which the context manager calls) prints the report. One profiled run
without a context: ``exe.run(..., profile=True)`` keeps its timings in ``exe.last_profile``
and prints nothing; ``print(exe.last_profile.report())`` shows them. Times are wall-clock
seconds measured around each op's kernel call inside the compiled plan.
"""
from __future__ import annotations

import contextlib
import logging
import threading
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

from .formats.serialize import atomic_write

__all__ = ["Profile", "profiler", "start_profiler", "stop_profiler", "reset_profiler"]

_log = logging.getLogger("fluidlite.profiler")
_SORT_KEYS = (None, "calls", "total", "max", "min", "ave")
_TRACER_OPTIONS = ("Default", "OpDetail", "AllOpDetail")
_active: Optional["Profile"] = None


class _Stat:
    __slots__ = ("calls", "total", "min", "max")

    def __init__(self) -> None:
        self.calls, self.total, self.min, self.max = 0, 0.0, float("inf"), 0.0

    def add(self, t: float) -> None:
        self.calls += 1
        self.total += t
        self.min = min(self.min, t)
        self.max = max(self.max, t)

    @property
    def ave(self) -> float:
        return self.total / self.calls if self.calls else 0.0


class Profile:
    """Accumulated per-op-type and per-op timings over one or more executor runs."""

    def __init__(self) -> None:
        self.by_type: Dict[str, _Stat] = {}
        self.by_op: Dict[Tuple[Any, str], _Stat] = {}    # (plan step or "dygraph", type)
        # per op of the Program: (block index, op index in that block) -> its time per run
        self.by_pos: Dict[Tuple[int, int], _Stat] = {}
        self.runs = 0
        self._lock = threading.Lock()      # runs of several threads may report at once

    def add_run(self, op_types: Sequence[str], times: Sequence[float],
                steps: Optional[Sequence[Any]] = None) -> None:
        """Add one run: ``times[i]`` seconds spent in step ``i`` of type ``op_types[i]``.

        ``steps`` (the plan's ``StepInfo`` records, optional) also files each step's time under
        the Program position of the op(s) it ran, in ``by_pos[(block index, op index)]``. A
        fused step covers several ops: its time is split evenly between them."""
        with self._lock:
            self.runs += 1
            for i, (t, dt) in enumerate(zip(op_types, times)):
                self.by_type.setdefault(t, _Stat()).add(dt)
                self.by_op.setdefault((i, t), _Stat()).add(dt)
            for st, dt in zip(steps or (), times):
                ops = [pos for _, pos in st.ops if pos >= 0]
                for pos in ops:
                    self.by_pos.setdefault((int(st.block), pos), _Stat()).add(dt / len(ops))

    def add_op(self, op_type: str, seconds: float) -> None:
        """Add one op run outside a compiled plan: an eager dygraph op (``op_type``) or a
        node of the eager backward pass (``<type>_grad``). Filed by type, and among the
        slowest ops as ``dygraph <type>``."""
        with self._lock:
            self.by_type.setdefault(op_type, _Stat()).add(seconds)
            self.by_op.setdefault(("dygraph", op_type), _Stat()).add(seconds)

    def report(self, sorted_key: Optional[str] = "total", top: int = 20) -> str:
        """Two tables (by op type, and the ``top`` slowest ops) with calls / total / min / max /
        average in milliseconds and each row's share of the total."""
        if sorted_key not in _SORT_KEYS:
            raise ValueError(f"sorted_key must be one of {_SORT_KEYS}, got {sorted_key!r}")
        key = sorted_key or "total"
        with self._lock:
            by_type, by_op, runs = list(self.by_type.items()), list(self.by_op.items()), self.runs
        spent = sum(s.total for _, s in by_type)
        grand = spent or 1.0          # the ratios' denominator; the header shows what was spent

        def table(title: str, rows: List[Tuple[str, _Stat]]) -> List[str]:
            rows = sorted(rows, key=lambda r: getattr(r[1], key), reverse=True)
            out = [f"{title}", f"{'Event':<32}{'Calls':>7}{'Total ms':>11}{'Min ms':>10}"
                   f"{'Max ms':>10}{'Ave ms':>10}{'Ratio':>8}"]
            for name, s in rows:
                out.append(f"{name[:32]:<32}{s.calls:>7}{s.total * 1e3:>11.3f}"
                           f"{s.min * 1e3:>10.4f}{s.max * 1e3:>10.4f}{s.ave * 1e3:>10.4f}"
                           f"{s.total / grand:>8.3f}")
            return out

        lines = [f"------------------------->  Profiling Report  <------------------------- "
                 f"({runs} run(s), total {spent * 1e3:.3f} ms)"]
        lines += table("By op type:", by_type)
        lines.append("")
        ops = [(f"#{i} {t}" if isinstance(i, int) else f"{i} {t}", s) for (i, t), s in by_op]
        lines += table(f"Slowest ops (top {top}):", ops)[:top + 2]
        return "\n".join(lines)


def _check_state(state: str) -> None:
    if state not in ("CPU", "GPU", "All"):
        raise ValueError("The state must be 'CPU' or 'GPU' or 'All'.")


def start_profiler(state: str = "CPU", tracer_option: str = "Default") -> None:
    """Start collecting per-op timings for every ``Executor.run`` and, in dygraph mode, every
    eager op, eager backward node and replayed step (module docstring).

    Args:
        state (str): ``"CPU"``, ``"GPU"`` or ``"All"`` (all three time the CPU kernels here).
            Default ``"CPU"``.
        tracer_option (str): fluid's tracer detail level: ``"Default"``, ``"OpDetail"`` or
            ``"AllOpDetail"``. fluid split an op's time into compute, data transform and
            shape inference events; here an op is its kernel call (shapes are inferred once
            at plan time, data is never transformed), so the three levels give the same
            report. Default ``"Default"``.

    Returns:
        None.

    Raises:
        ValueError: ``state`` is not ``"CPU"``, ``"GPU"`` or ``"All"``, or ``tracer_option``
            is not one of fluid's three levels.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     y = fluid.layers.relu(fluid.data("x", [-1, 2]))
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> fluid.profiler.start_profiler("CPU")
        >>> _ = exe.run(main, feed={"x": np.ones((1, 2), "float32")}, fetch_list=[y])
        >>> prof = fluid.profiler.stop_profiler()    # doctest: +ELLIPSIS
        ------------------------->  Profiling Report  <------------------------- (1 run(s), ...
        By op type:
        ...relu...
    """
    global _active
    _check_state(state)
    if tracer_option not in _TRACER_OPTIONS:
        raise ValueError(f"tracer_option must be one of {_TRACER_OPTIONS}, got "
                         f"{tracer_option!r}")
    _active = Profile()


def reset_profiler() -> None:
    """Discard the timings collected so far; profiling continues.

    Args:
        None: this function takes no arguments.

    Returns:
        None.

    Raises:
        None: this function does not raise (without a running profiler it does nothing).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> fluid.profiler.start_profiler("CPU")
        >>> fluid.profiler.reset_profiler()          # drop what was collected so far
        >>> prof = fluid.profiler.stop_profiler()    # doctest: +ELLIPSIS
        ------------------------->  Profiling Report  <------------------------- (0 run(s), ...
    """
    global _active
    if _active is not None:
        _active = Profile()


def stop_profiler(sorted_key: Optional[str] = None,
                  profile_path: Optional[str] = None) -> Optional[Profile]:
    """Stop collecting, print the report to stdout (as fluid's profiler did) and write it to
    ``profile_path`` when given.

    Args:
        sorted_key: row order of the report: ``calls``, ``total`` (default), ``max``, ``min``
            or ``ave``.
        profile_path: also write the report (text) to this file.

    Returns:
        The ``Profile`` collected since ``start_profiler``, or None when none was running.

    Raises:
        ValueError: ``sorted_key`` is not None, ``"calls"``, ``"total"``, ``"max"``, ``"min"`` or
            ``"ave"`` (profiling has stopped by then).
        OSError: ``profile_path`` cannot be written.

    Example:
        >>> import fluidlite as fluid
        >>> fluid.profiler.start_profiler("CPU")
        >>> prof = fluid.profiler.stop_profiler()    # doctest: +ELLIPSIS
        ------------------------->  Profiling Report  <------------------------- (0 run(s), ...
    """
    global _active
    prof, _active = _active, None
    if prof is None:
        return None
    text = prof.report(sorted_key)
    if profile_path:
        atomic_write(profile_path, (text + "\n").encode("utf-8"))
    # printing is the documented behaviour (fluid printed its table when profiling ended); the
    # logger gets it too, for applications that collect logs instead of stdout
    print(text, flush=True)
    _log.debug("%s", text)
    return prof


@contextlib.contextmanager
def profiler(state: str = "CPU", sorted_key: Optional[str] = None,
             profile_path: Optional[str] = None,
             tracer_option: str = "Default") -> Iterator[Profile]:
    """Context manager: profile every ``Executor.run`` (and dygraph op) inside the block; on
    leaving it, print the report to stdout (and write it to ``profile_path`` when given), as
    fluid did.

    Args:
        state: ``CPU``, ``GPU`` or ``All`` (all profile the CPU kernels here).
        sorted_key: row order of the report: ``calls``, ``total``, ``max``, ``min``, ``ave``.
        profile_path: also write the report to this file.
        tracer_option: ``Default``, ``OpDetail`` or ``AllOpDetail`` (the same report here:
            see ``start_profiler``).

    Returns:
        contextmanager: a context manager yielding the ``Profile`` being collected.

    Raises:
        ValueError: ``sorted_key``, ``state`` or ``tracer_option`` is not one of the accepted
            values (raised on entering the block).
        OSError: ``profile_path`` cannot be written (on leaving the block).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 3])
        ...     y = fluid.layers.reduce_sum(fluid.layers.relu(x))
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> with fluid.profiler.profiler("CPU", sorted_key="total"):   # doctest: +ELLIPSIS
        ...     _ = exe.run(main, feed={"x": np.ones((2, 3), "float32")}, fetch_list=[y])
        -----...
        ...relu...
    """
    if sorted_key not in _SORT_KEYS:
        raise ValueError(f"sorted_key must be one of {_SORT_KEYS}, got {sorted_key!r}")
    start_profiler(state, tracer_option)
    prof = _active
    try:
        yield prof
    finally:
        stop_profiler(sorted_key, profile_path)


def active() -> Optional[Profile]:
    return _active


# -- issue 16: fluid 1.8's cuda_profiler --------------------------------------------------------
__all__ += ["cuda_profiler"]

#: nvprof's default counters in fluid 1.8 (written to its config file)
NVPROF_CONFIG = ["gpustarttimestamp", "gpuendtimestamp", "gridsize3d", "threadblocksize",
                 "streamid", "enableonstart 0", "conckerneltrace"]


@contextlib.contextmanager
def cuda_profiler(output_file: str, output_mode: Optional[str] = None,
                  config: Optional[Sequence[str]] = None) -> Iterator[Profile]:
    """fluid 1.8's nvprof wrapper, on the CPU: fluidlite has no CUDA kernels, so this profiles
    what runs instead -- every op of the executor runs inside the block, as ``profiler('CPU')``
    -- and on exit writes the per-op-type timings to ``output_file`` in nvprof's two text
    layouts: ``output_mode='csv'`` (default) a header ``Event,Calls,Total(ms),Min(ms),Max(ms),
    Ave(ms)`` and one row per op type; ``'kvp'`` one line of ``key=value`` pairs per op type.
    ``config`` (nvprof's counter list, default ``NVPROF_CONFIG``) is accepted and checked but
    selects no GPU counters here. ValueError for another ``output_mode``, as fluid.

    Args:
        output_file (str): the file the per-op-type timings are written to on exit.
        output_mode (str | None): ``"csv"`` or ``"kvp"``; None means ``"csv"``. Default None.
        config (Sequence[str] | None): nvprof option strings; None means ``NVPROF_CONFIG``. Checked,
            selects no counters here. Default None.

    Returns:
        contextmanager: a context manager yielding the ``Profile`` being collected.

    Raises:
        ValueError: ``output_mode`` is not ``"csv"`` / ``"kvp"`` (on entering the block).
        TypeError: ``config`` is a str or holds a non-str item (on entering the block).
        OSError: ``output_file`` cannot be written (on leaving the block).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> import os, tempfile
        >>> out = os.path.join(tempfile.mkdtemp(), "cuda_profile.txt")
        >>> with fluid.profiler.cuda_profiler(out):     # no GPU here: there is nothing to profile
        ...     pass
    """
    global _active
    if output_mode is None:
        output_mode = "csv"
    if output_mode not in ("kvp", "csv"):
        raise ValueError(f"The output mode must be 'kvp' or 'csv', but received "
                         f"{output_mode!r}.")
    config = NVPROF_CONFIG if config is None else config
    if isinstance(config, str) or not all(isinstance(c, str) for c in config):
        raise TypeError(f"cuda_profiler: config must be a list of nvprof option strings, but "
                        f"received {config!r}")
    previous, prof = _active, Profile()
    _active = prof
    try:
        yield prof
    finally:
        _active = previous
        rows = sorted(prof.by_type.items(), key=lambda r: r[1].total, reverse=True)
        if output_mode == "csv":
            lines = ["Event,Calls,Total(ms),Min(ms),Max(ms),Ave(ms)"]
            lines += [f"{name},{st.calls},{st.total * 1e3:.6f},{st.min * 1e3:.6f},"
                      f"{st.max * 1e3:.6f},{st.ave * 1e3:.6f}" for name, st in rows]
        else:
            lines = [f"Event={name} Calls={st.calls} Total(ms)={st.total * 1e3:.6f} "
                     f"Min(ms)={st.min * 1e3:.6f} Max(ms)={st.max * 1e3:.6f} "
                     f"Ave(ms)={st.ave * 1e3:.6f}" for name, st in rows]
        atomic_write(output_file, ("\n".join(lines) + "\n").encode("utf-8"))
