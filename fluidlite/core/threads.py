"""Intra-op parallelism: a kernel's independent items on a small thread pool, with the BLAS
library held to its share of the cores meanwhile.

NumPy runs each loop on one core (releasing the GIL inside it) and OpenBLAS threads only its
own GEMMs, so a convolution's layout copies and Winograd transforms, batch norm and ReLU ran on
one core of two. A kernel that can cut its work into independent items (the image blocks of a
convolution, the channels of batch norm, the halves of an elementwise pass) hands them to
``parallel``: the calling thread and ``get_num_threads() - 1`` pool threads take the items in
order, each item's GEMMs running on ``blas_threads // workers`` BLAS threads so that the cores
are not oversubscribed (``threadpoolctl`` sets the count at run time; without it the items run
one after another, as they would with one thread).

Determinism: which thread runs an item never changes what it computes, and ``parallel`` hands
the items' results to ``sink`` strictly in item order, so a reduction over items adds in one
fixed order: results are bit-identical for every thread count.

The thread count follows fluid: ``fluid.core.set_num_threads(n)`` (fluid 1.8's
``platform::SetNumThreads``: the math library's threads) sets it for the process, also setting
BLAS's own count; ``using(n)`` overrides it for the calling thread (a predictor's
``cpu_math_library_num_threads``); the default is ``FLUIDLITE_NUM_THREADS`` or else BLAS's
thread count at first use (``OPENBLAS_NUM_THREADS`` / ``OMP_NUM_THREADS``, else the cores).
"""
from __future__ import annotations

import contextlib
import logging
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Dict, Iterator, List, Optional

__all__ = ["get_num_threads", "set_num_threads", "using", "parallel", "blas_available",
           "shutdown", "POOL_PREFIX"]

POOL_PREFIX = "fluidlite-op"      # the pool threads' names (they live as long as the process)

_log = logging.getLogger(__name__)

_lock = threading.Lock()          # guards everything below
_tls = threading.local()          # .threads: ``using`` override; .busy: inside an item
_blas: List[Any] = []             # [threadpoolctl lib controllers] once probed
_setting: List[int] = []          # [count] once set or derived
_pool: Dict[int, ThreadPoolExecutor] = {}
_region = {"depth": 0, "saved": None}   # nested / concurrent regions share one BLAS change


def _controllers() -> List[Any]:
    """threadpoolctl's controllers of the BLAS libraries NumPy loaded ([] without it)."""
    if not _blas:
        try:
            import threadpoolctl
        except ImportError:
            _blas.append([])
        else:
            ctl = threadpoolctl.ThreadpoolController().select(user_api="blas")
            _blas.append(list(ctl.lib_controllers))
    return _blas[0]


def blas_available() -> bool:
    """Whether BLAS's thread count can be set at run time (``threadpoolctl`` is installed and
    found the BLAS library); without it ``parallel`` runs items on the calling thread."""
    return bool(_controllers())


def _blas_threads() -> int:
    libs = _controllers()
    return max((int(c.get_num_threads() or 1) for c in libs), default=1)


def get_num_threads() -> int:
    """The intra-op thread count of the calling thread (module docstring: ``using`` >
    ``set_num_threads`` > ``FLUIDLITE_NUM_THREADS`` > BLAS's count at first use)."""
    own = getattr(_tls, "threads", None)
    if own is not None:
        return own
    if not _setting:
        with _lock:
            if not _setting:
                env = os.environ.get("FLUIDLITE_NUM_THREADS", "").strip()
                if env:
                    try:
                        n = int(env)
                    except ValueError:
                        raise ValueError(f"FLUIDLITE_NUM_THREADS must be an integer >= 1, got "
                                         f"{env!r}") from None
                    if n < 1:
                        raise ValueError(f"FLUIDLITE_NUM_THREADS must be >= 1, got {n}")
                else:
                    n = _blas_threads()
                _setting.append(n)
    return _setting[0]


def _checked(n: Any, what: str) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"{what}: the thread count must be an int >= 1, got {n!r}")
    return n


def set_num_threads(n: int) -> None:
    """Use ``n`` threads for the kernels' parallel parts and for BLAS (fluid's
    ``fluid.core.set_num_threads``: the CPU math library's threads), process-wide.

    Args:
        n: threads, >= 1. Results do not depend on it (module docstring).

    Example:
        >>> import fluidlite as fluid
        >>> fluid.core.set_num_threads(1)      # one core: no pool, single-threaded BLAS
    """
    n = _checked(n, "set_num_threads")
    with _lock:
        _setting[:] = [n]
        if _region["depth"] == 0:
            for c in _controllers():
                c.set_num_threads(n)
        else:       # restored to n when the running regions end
            _region["saved"] = n


@contextlib.contextmanager
def using(n: Optional[int]) -> Iterator[None]:
    """Within the block, the calling thread's kernels use ``n`` threads (None: the process
    setting). Other threads are not affected.

    Example:
        >>> from fluidlite.core import threads
        >>> with threads.using(1):
        ...     pass                      # kernels called here run their items one by one
    """
    if n is not None:
        n = _checked(n, "using")
    old = getattr(_tls, "threads", None)
    _tls.threads = n
    try:
        yield
    finally:
        _tls.threads = old


def _enter(workers: int) -> None:
    """The first of the running regions gives each worker its share of BLAS's threads."""
    with _lock:
        if _region["depth"] == 0:
            total = _blas_threads()
            _region["saved"] = total
            for c in _controllers():
                c.set_num_threads(max(1, total // workers))
        _region["depth"] += 1


def _leave() -> None:
    with _lock:
        _region["depth"] -= 1
        if _region["depth"] == 0:
            for c in _controllers():
                c.set_num_threads(_region["saved"])


def _executor(workers: int) -> ThreadPoolExecutor:
    with _lock:
        pool = _pool.get(workers)
        if pool is None:
            pool = _pool[workers] = ThreadPoolExecutor(max_workers=workers - 1,
                                                       thread_name_prefix=POOL_PREFIX)
        return pool


def shutdown() -> None:
    """Stop the pool threads (they start on the first parallel call and otherwise live as
    long as the process)."""
    with _lock:
        pools = list(_pool.values())
        _pool.clear()
    for p in pools:
        p.shutdown(wait=True)


def parallel(fn: Callable[[int], Any], n: int,
             sink: Optional[Callable[[int, Any], None]] = None) -> None:
    """Run ``fn(i)`` for ``i in range(n)``; ``sink(i, fn(i))`` is called for every item in
    increasing ``i`` (one call at a time), whichever thread ran it.

    Items must write disjoint outputs (or return their results for ``sink``). With one thread,
    inside another item, or without run-time BLAS control, the items run here in order. The
    first exception an item raises stops the hand-out of further items and is re-raised here
    after the running items finish.

    Example:
        >>> import numpy as np
        >>> from fluidlite.core.threads import parallel
        >>> x, out = np.arange(8.0), np.empty(8)
        >>> parallel(lambda i: np.square(x[4 * i:4 * i + 4], out=out[4 * i:4 * i + 4]), 2)
        >>> float(out[7])
        49.0
    """
    workers = min(get_num_threads(), n)
    if workers < 2 or getattr(_tls, "busy", False) or not blas_available():
        for i in range(n):
            r = fn(i)
            if sink is not None:
                sink(i, r)
        return
    _Run(fn, n, sink).go(workers)


class _Run:
    """One ``parallel`` call: items handed out in order, results sunk in order."""

    def __init__(self, fn: Callable[[int], Any], n: int,
                 sink: Optional[Callable[[int, Any], None]]) -> None:
        self.fn, self.n, self.sink = fn, n, sink
        self.next = 0                       # next item to hand out
        self.due = 0                        # next item to sink
        self.done: Dict[int, Any] = {}      # finished, not yet sunk
        self.error: Optional[BaseException] = None
        self.lock = threading.Lock()        # hand-out and errors
        self.sink_lock = threading.Lock()   # sink order

    def _take(self) -> Optional[int]:
        with self.lock:
            if self.error is not None or self.next >= self.n:
                return None
            self.next += 1
            return self.next - 1

    def _sink(self, i: int, result: Any) -> None:
        with self.sink_lock:
            self.done[i] = result
            while self.due in self.done:
                self.sink(self.due, self.done.pop(self.due))
                self.due += 1

    def work(self) -> None:
        _tls.busy = True
        try:
            while True:
                i = self._take()
                if i is None:
                    return
                r = self.fn(i)
                if self.sink is not None:
                    self._sink(i, r)
        except BaseException as e:      # noqa: B902 -- handed to the caller, re-raised there
            with self.lock:
                if self.error is None:
                    self.error = e
        finally:
            _tls.busy = False

    def go(self, workers: int) -> None:
        pool = _executor(workers)
        _enter(workers)
        try:
            futures = [pool.submit(self.work) for _ in range(workers - 1)]
            self.work()
            for f in futures:
                f.result()
        finally:
            _leave()
        if self.error is not None:
            raise self.error
