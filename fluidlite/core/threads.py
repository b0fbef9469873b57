"""Intra-op parallelism: a kernel's independent items on a small thread pool, BLAS on one
thread.

NumPy runs each loop on one core (releasing the GIL inside it) and OpenBLAS threads only its
own GEMMs, whose worker threads then spin for a while waiting for the next one, competing for
the cores with everything NumPy does in between. So fluidlite does the threading itself: a
kernel that can cut its work into independent items (the image blocks of a convolution, the
channel halves of batch norm, the row halves of a large GEMM) hands them to ``parallel``, and
the calling thread and ``get_num_threads() - 1`` pool threads take the items in order.
Between parallel calls the pool threads sleep on events; while a compiled plan runs and
calls keep coming they spin instead (``hot``: the hand-off then takes microseconds).

This is opt-in, as fluid's math-library threads were (``paddle_num_threads`` 1): by default
(one thread) the items run one after another on the calling thread and BLAS keeps its own
threads. On the 2-core machine measured (``docs/benchmarks.md``, 2026-11-30) two threads
train convolution nets in 0.76-0.78x the time of one (ResNet-18, ResNet-50) and use less CPU
(no BLAS thread spins between GEMMs); models of medium GEMMs run about as fast or up to 1.09x
slower (BERT-mini, an LSTM, DeepFM: the pool's hand-off costs tens of microseconds a call,
more than OpenBLAS's own spinning threads). With
``fluid.core.set_num_threads(n)``, n >= 2 (or ``FLUIDLITE_NUM_THREADS``), and ``threadpoolctl``
installed, fluidlite's next compiled run, dygraph guard or parallel call holds BLAS to one
thread (``hold``), process-wide -- as fluid held its math library to
``FLAGS_paddle_num_threads`` -- so that the items are the only threads: NumPy products
elsewhere in the process then run on one BLAS thread; ``set_num_threads(1)`` gives BLAS its
threads back. (Switching BLAS's count around every run instead is not an option: OpenBLAS then
gives concurrent callers other bits than a sequential run. ``blas_threads``, the mode an
inference predictor picks for small runs, switches it around one run at a time, under a lock.)

Determinism: how work is cut into items depends on the shapes only, which thread runs an item
never changes what it computes, ``parallel`` hands results to ``sink`` strictly in item order
(a reduction over items adds in one fixed order), and while held every GEMM runs on one BLAS
thread (OpenBLAS's results change with its own thread count). So every thread count from 2 on
gives the same bits; with one thread, large GEMMs are not cut and run on BLAS's own threads.

``using(n)`` overrides the count for the calling thread; the process count is
``set_num_threads``'s, else ``FLUIDLITE_NUM_THREADS``, else 1.
"""
from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import threading
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

__all__ = ["get_num_threads", "set_num_threads", "set_blas_threads", "set_math_threads",
           "using", "blas_threads", "parallel", "parallel_ranges", "even_ranges", "hold", "hot",
           "splitting", "blas_available", "shutdown", "POOL_PREFIX", "BLAS_THREADS"]

_log = logging.getLogger(__name__)

POOL_PREFIX = "fluidlite-op"      # the pool threads' names (they live as long as the process)

_lock = threading.Lock()          # guards everything below
_tls = threading.local()          # .threads: ``using`` override; .busy: inside an item
_blas: List[Any] = []             # [threadpoolctl lib controllers] once probed
_blas_before: List[int] = []      # [BLAS's thread count before ``hold``]
_setting: List[int] = []          # [count] once set or derived
_held: List[bool] = [False]
_pool: Dict[int, List["_Helper"]] = {}    # the helpers of n threads, by n


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


def hold() -> None:
    """With two threads or more, hold BLAS to one thread from now on (module docstring; cheap
    once done, a no-op with one thread)."""
    if _held[0] or get_num_threads() < 2:
        return
    with _lock:
        if not _held[0]:
            _blas_before[:] = [_blas_threads()]      # what set_num_threads(1) gives back
            for c in _controllers():
                c.set_num_threads(1)
            _held[0] = True


def _release() -> None:
    """Give BLAS back the thread count it had before ``hold`` (under ``_lock``)."""
    if _held[0]:
        for c in _controllers():
            c.set_num_threads(_blas_before[0])
        _held[0] = False


def set_blas_threads(n: int) -> None:
    """Set BLAS's own thread count, process-wide (a predictor's
    ``cpu_math_library_num_threads``, as Paddle's predictor sets its math library's threads).
    While BLAS is held (two fluidlite threads or more) the count is what ``set_num_threads(1)``
    gives back. Nothing happens without ``threadpoolctl``."""
    n = _checked(n, "set_blas_threads")
    with _lock:
        if _held[0]:
            _blas_before[:] = [n]
        else:
            for c in _controllers():
                c.set_num_threads(n)


def set_math_threads(n: int) -> None:
    """Compute on ``n`` threads in all, process-wide (a predictor's
    ``cpu_math_library_num_threads``, as Paddle's predictor set its math library's threads):
    from 2 on, ``set_num_threads(n)`` (BLAS held to one thread per part at the next run);
    1, one fluidlite thread and BLAS on one thread.

    Why not BLAS's own threads under one fluidlite thread: OpenBLAS's worker spins between
    GEMMs, and on the 2-core machine measured the NumPy passes next to it ran up to 1.6x
    slower in some processes (MobileNetV2 inference at batch 16: 250 or 420 ms by process,
    180-240 ms on two fluidlite threads; docs/benchmarks.md, 2026-11-30).

    Args:
        n: threads, >= 1.

    Example:
        >>> from fluidlite.core import threads
        >>> threads.set_math_threads(1)
        >>> threads.get_num_threads()
        1
    """
    n = _checked(n, "set_math_threads")
    set_num_threads(n)
    if n == 1:
        set_blas_threads(1)


def splitting() -> bool:
    """Whether kernels should cut their GEMMs into parallel parts: two threads or more, and
    not inside a ``parallel`` item (whose nested parts would run one after another: a GEMM
    cut in row blocks there packs its other operand once per block). With two threads or
    more every item runs as one, so the cuts still depend on the shapes only."""
    return get_num_threads() >= 2 and not getattr(_tls, "busy", False)


def get_num_threads() -> int:
    """The intra-op thread count of the calling thread (module docstring: ``using`` >
    ``set_num_threads`` > ``FLUIDLITE_NUM_THREADS`` > 1)."""
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
                    n = 1
                _setting.append(n)
    return _setting[0]


def _checked(n: Any, what: str) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"{what}: the thread count must be an int >= 1, got {n!r}")
    return n


def set_num_threads(n: int) -> None:
    """Use ``n`` threads for the kernels' parallel parts, process-wide (fluid's
    ``fluid.core.set_num_threads``: the CPU math threads). From 2 on, BLAS is held to one
    thread per part at the next run; 1 gives BLAS its own threads back (module docstring).

    Args:
        n: threads, >= 1. Every n >= 2 gives the same bits.

    On a machine of several cores, ``n`` = the cores trains convolution nets faster than the
    default (module docstring).

    Example:
        >>> import fluidlite as fluid
        >>> fluid.core.set_num_threads(1)      # the default: BLAS threads its own GEMMs
    """
    n = _checked(n, "set_num_threads")
    with _lock:
        _setting[:] = [n]
        if n < 2:
            _release()


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


# -- BLAS's own threads for a run ----------------------------------------------------------
# A pool hand-off costs the item that a pool thread takes some 35-40 us on the 2-vCPU guest
# measured (the thread wakes from its spin lock at once, then waits for the GIL the caller
# holds until its first NumPy loop, and a thread waiting for the GIL sleeps), and two threads
# taking turns at the GIL between short NumPy calls run them no faster than one (64K-element
# passes: 1.0-1.3x on two threads). OpenBLAS's worker threads wait in C, without the GIL. A
# model whose parallel work is all products of a few hundred rows and short passes -- BERT-mini
# at batch 1, an LSTM tagger -- therefore runs faster with its kernels on one thread and BLAS
# threading its GEMMs (0.87-0.91x the time), a model of large maps slower (ResNet-50 at batch
# 1: 1.05x, BERT-mini at batch 16: 1.17x). ``blas_threads`` is that mode for one run.
BLAS_THREADS = 2                  # BLAS's threads in ``blas_threads`` (fixed: see there)
_blas_run_lock = threading.Lock()  # one ``blas_threads`` block at a time in the process


@contextlib.contextmanager
def blas_threads() -> Iterator[None]:
    """Within the block the calling thread's kernels run their items one after another on
    it (``using(1)``: no pool hand-offs, no spinning pool threads) and BLAS threads its own
    GEMMs on ``BLAS_THREADS`` threads, process-wide; when the block ends BLAS gets back the
    count it had (held to one when fluidlite has two threads or more: ``hold`` first).

    One such block runs at a time in the process (another caller waits), so the GEMMs of one
    are never concurrent with another's (OpenBLAS could then change their bits). The count is
    fixed, not the process's thread count, so that every count from 2 gives the same bits
    here too (OpenBLAS's results may follow its own thread count). NumPy products that other
    threads make meanwhile also run on BLAS's threads. Without ``threadpoolctl`` only
    ``using(1)`` applies; with threadpoolctl 3.6 or later, only the Python thread that first
    set BLAS's count can change it (from another, BLAS keeps the count it has).

    Example:
        >>> import numpy as np
        >>> from fluidlite.core import threads
        >>> with threads.blas_threads():
        ...     y = np.ones((256, 256), np.float32) @ np.ones((256, 256), np.float32)
        >>> float(y[0, 0])
        256.0
    """
    hold()          # (the process's BLAS state after the block: what any run leaves)
    with _blas_run_lock:
        with _lock:
            before = [c.get_num_threads() for c in _controllers()]
            for c in _controllers():
                c.set_num_threads(BLAS_THREADS)
        try:
            with using(1):
                yield
        finally:
            with _lock:
                for c, n in zip(_controllers(), before):
                    c.set_num_threads(n or 1)


# -- spinning hand-offs ---------------------------------------------------------------------
# Waking a thread that sleeps on an event costs tens of microseconds on the 2-core VM
# measured (a futex wake of an idle virtual CPU), each way: a parallel call paid 60-110 us
# more than its items' work, more than halving a 100 us product saves. While a compiled plan
# runs (``hot``), the pool threads wait for work by spinning on a glibc spin lock through
# ctypes -- in C, without the GIL, with the CPU's pause instruction -- and a caller waits for
# the pool's items the same way: a hand-off and its answer took 3 us instead of 60
# (predictor runs at batch 1 on two threads: 0.90-0.94x the time; training steps 0.90-1.0x).
# A spinning thread also costs the other cores some speed (NumPy passes ran 1.15x slower next
# to one), so the threads spin only while parallel calls come: ``_SPIN_IDLE`` seconds after
# the last one a watchdog thread sends them back to sleep (``_doze``) until the next. They
# never spin with more threads than the process has cores, nor between runs, nor without
# glibc's spin locks (or with ``FLUIDLITE_SPIN=0``): then they sleep on events.
def _spin_functions() -> Optional[Tuple[Any, Any, Any]]:
    """(pthread_spin_init, pthread_spin_lock, pthread_spin_unlock) of the C library, or None
    (turned off, or not there)."""
    if os.environ.get("FLUIDLITE_SPIN", "").strip() == "0":
        return None
    try:
        libc = ctypes.CDLL(None)
        fns = (libc.pthread_spin_init, libc.pthread_spin_lock, libc.pthread_spin_unlock)
    except (OSError, AttributeError, TypeError):    # (TypeError: Windows' CDLL(None))
        return None
    for f in fns:
        f.argtypes = [ctypes.c_void_p] + ([ctypes.c_int] if f is fns[0] else [])
        f.restype = ctypes.c_int
    return fns


def _cores() -> int:
    """The cores this process may run on (probed once)."""
    if not _cores_seen:
        try:
            _cores_seen.append(len(os.sched_getaffinity(0)))
        except (AttributeError, OSError):
            _cores_seen.append(os.cpu_count() or 1)
    return _cores_seen[0]


_cores_seen: List[int] = []


_SPIN = _spin_functions()
_SPIN_IDLE = 0.002                # seconds without a parallel call before spinners sleep
_hot = [0]                        # compiled plans running (``hot``), under ``_lock``
_doze = [False]                   # the watchdog sent the spinners to sleep
_last_call = [0.0]                # time.perf_counter() of the last parallel call
_watch: List[threading.Thread] = []
_watch_event = threading.Event()  # wakes the watchdog: spinning may have started again


def _spin_now() -> bool:
    """Whether pool threads should spin now (read without the lock: a stale answer only
    costs a slow hand-off or a short spin, see ``_Helper._loop``)."""
    return _hot[0] > 0 and not _doze[0]


def _ring_all() -> None:
    """Wake every spinning pool thread (it finds no job and checks ``_spin_now`` again)."""
    with _lock:
        pools = list(_pool.values())
    for pool in pools:
        for h in pool:
            if h.bell is not None:
                h.bell.ring()           # (a stale ring is harmless: one empty turn)


def _watchdog() -> None:
    """Send the spinners to sleep once no parallel call came for ``_SPIN_IDLE`` seconds."""
    while True:
        _watch_event.wait()
        _watch_event.clear()
        while _spin_now():
            left = _last_call[0] + _SPIN_IDLE - time.perf_counter()
            if left > 0:
                time.sleep(left)
                continue
            _doze[0] = True
            _ring_all()


def _called() -> None:
    """A parallel call: note the time, and wake spinning up again if it dozed."""
    _last_call[0] = time.perf_counter()
    if _doze[0]:
        _doze[0] = False
        _watch_event.set()


class _Bell:
    """A binary semaphore on a spin lock: the word is locked while no signal is pending;
    ``ring`` unlocks it, ``wait`` spins (GIL released) until it is unlocked and locks it
    again, taking the signal. A second ring before the wait is the same signal."""
    __slots__ = ("word", "addr")

    def __init__(self) -> None:
        assert _SPIN is not None
        self.word = ctypes.c_int(0)
        self.addr = ctypes.addressof(self.word)
        _SPIN[0](self.addr, 0)
        _SPIN[1](self.addr)             # locked: no signal yet

    def ring(self) -> None:
        _SPIN[2](self.addr)

    def wait(self) -> None:
        _SPIN[1](self.addr)


class _HotRegion:
    """``hot``'s context manager: per-thread nesting depth (a plan's loops run sub-plans,
    each a nested region: only the outermost one counts, for a few hundred nanoseconds)."""
    __slots__ = ()

    def __enter__(self) -> None:
        depth = getattr(_tls, "hot", 0)
        if depth:
            _tls.hot = depth + 1
            return
        counts = _SPIN is not None and 2 <= get_num_threads() <= _cores() and blas_available()
        if counts:
            with _lock:
                if not _watch:          # (first: a thread that cannot start changes nothing)
                    watch = threading.Thread(target=_watchdog, daemon=True,
                                             name=POOL_PREFIX + "_watch")
                    watch.start()
                    _watch.append(watch)
                _hot[0] += 1
                if _hot[0] == 1:
                    _doze[0] = True     # spinning starts with the first parallel call
        _tls.hot_counts = counts
        _tls.hot = 1

    def __exit__(self, *exc: Any) -> None:
        depth = getattr(_tls, "hot", 0) - 1
        if depth < 0:                   # (a forked child leaving its parent's region)
            return
        _tls.hot = depth
        if depth or not _tls.hot_counts:
            return
        with _lock:
            _hot[0] -= 1
            last = _hot[0] <= 0
        if last:
            _ring_all()                 # a spinning helper wakes, finds no job, sleeps


_HOT = _HotRegion()


def hot() -> _HotRegion:
    """A context manager: within it (a compiled plan's run), pool threads between items spin
    instead of sleeping while parallel calls keep coming (section comment); when the last
    such region in the process ends, they go back to sleep. No effect with one thread, more
    threads than cores, or without spin locks.

    Example:
        >>> from fluidlite.core import threads
        >>> with threads.hot():
        ...     pass                      # parallel calls here hand off in microseconds
    """
    return _HOT


def _done_bell() -> "_Bell":
    """The calling thread's bell for the end of its parallel calls' pool items."""
    bell = getattr(_tls, "done", None)
    if bell is None:
        bell = _tls.done = _Bell()
    return bell


class _Helper:
    """A pool thread: it waits on its own event (or, while a plan runs, its bell: see
    ``hot``) until a ``parallel`` call hands it the call's ``_Run`` (``assign``), then takes
    items with the caller. An event and a lock per thread, not ``concurrent.futures``: on the
    2-core machine measured a hand-off and its answer took 25 us through ``threading.Event``
    against 61 us through ``ThreadPoolExecutor.submit`` and ``Future.result``, and a training
    step makes some 300 parallel calls."""

    def __init__(self, name: str) -> None:
        self.lock = threading.Lock()        # guards job and stop
        self.wake = threading.Event()
        self.bell = _Bell() if _SPIN is not None else None
        self.spinning = False               # waiting on the bell (not the event)
        self.job: Optional[_Run] = None
        self.stop = False
        self.thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self.thread.start()

    def assign(self, run: "_Run") -> None:
        with self.lock:
            self.job = run                  # (a job not yet taken is replaced: its caller
        if self.spinning:                   # runs its items itself)
            self.bell.ring()
        else:
            self.wake.set()

    def _loop(self) -> None:
        while True:
            if self.bell is not None and _spin_now():
                self.spinning = True
                # (checked again after the flag: whoever ends the spinning -- ``hot``'s exit,
                # the watchdog, ``close`` -- sets its state first and rings after, so either
                # this sees it or the wait returns at once)
                if _spin_now() and not self.stop:
                    self.bell.wait()
                self.spinning = False
            else:
                self.wake.wait()
                self.wake.clear()
            with self.lock:                 # (read after the wake: no hand-off is lost)
                run, self.job = self.job, None
                if self.stop:
                    return
            if run is not None:
                run.help()
                run = None              # (the call's closures hold its arrays: let them go)

    def close(self) -> None:
        with self.lock:
            self.stop = True
        self.wake.set()
        if self.bell is not None:
            self.bell.ring()
        self.thread.join()


def _helpers(workers: int) -> List[_Helper]:
    """The ``workers - 1`` pool threads a call on ``workers`` threads shares its items with
    (started on first use, then kept)."""
    with _lock:
        pool = _pool.get(workers)
        if pool is None:
            pool = _pool[workers] = [_Helper(f"{POOL_PREFIX}_{workers}_{k}")
                                     for k in range(workers - 1)]
        return pool


def shutdown() -> None:
    """Stop the pool threads (they start on the first parallel call and otherwise live as
    long as the process)."""
    with _lock:
        pools = list(_pool.values())
        _pool.clear()
    for pool in pools:
        for h in pool:
            h.close()


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
    hold()
    workers = min(get_num_threads(), n)
    if workers < 2 or getattr(_tls, "busy", False) or not blas_available():
        for i in range(n):
            r = fn(i)
            if sink is not None:
                sink(i, r)
        return
    _called()
    _Run(fn, n, sink).go(workers)


def parallel_ranges(fn: Callable[[int, int], Any], n: int, parts: int = 2) -> None:
    """``fn(lo, hi)`` over ``parts`` fixed slices of ``range(n)`` (cut at ``n * i // parts``;
    empty ones skipped) as ``parallel`` items; each slice must write its own outputs.

    Example:
        >>> import numpy as np
        >>> from fluidlite.core.threads import parallel_ranges
        >>> x, out = np.arange(5.0), np.empty(5)
        >>> parallel_ranges(lambda lo, hi: np.negative(x[lo:hi], out=out[lo:hi]), 5)
        >>> out.tolist()
        [-0.0, -1.0, -2.0, -3.0, -4.0]
    """
    cuts = [n * i // parts for i in range(parts + 1)]
    spans = [(lo, hi) for lo, hi in zip(cuts[:-1], cuts[1:]) if hi > lo]
    parallel(lambda k: fn(*spans[k]), len(spans))


def even_ranges(n: int, most: int, least: int = 2) -> List[Tuple[int, int]]:
    """``range(n)`` cut into the fewest slices of at most ``most`` items (and at least
    ``least`` slices), their count, when above one, rounded up to an even number (but never
    more slices than items), the sizes differing by one at most: two threads taking the
    slices in turn get equal shares (three equal blocks leave one thread idle for a third of
    the call). The cut depends on ``n``, ``most`` and ``least`` alone, never on the thread
    count.

    Example:
        >>> from fluidlite.core.threads import even_ranges
        >>> even_ranges(32, 11)
        [(0, 8), (8, 16), (16, 24), (24, 32)]
        >>> even_ranges(5, 4)
        [(0, 2), (2, 5)]
    """
    if n <= 0:
        return []
    count = max(least, -(-n // max(1, most)))
    count = min(n, count + count % 2 if count > 1 else count)
    cuts = [n * i // count for i in range(count + 1)]
    return list(zip(cuts[:-1], cuts[1:]))


class _Run:
    """One ``parallel`` call: items handed out in order, results sunk in order."""

    def __init__(self, fn: Callable[[int], Any], n: int,
                 sink: Optional[Callable[[int, Any], None]]) -> None:
        self.fn, self.n, self.sink = fn, n, sink
        self.next = 0                       # next item to hand out
        self.due = 0                        # next item to sink
        self.done: Dict[int, Any] = {}      # finished, not yet sunk
        self.error: Optional[BaseException] = None
        self.lock = threading.Lock()        # hand-out, errors, helpers
        self.sink_lock = threading.Lock()   # sink order
        self.active = 0                     # helpers inside ``work``
        self.closed = False                 # the caller is done: no helper may join now
        # what the last helper to leave a closed run signals: the caller's bell while a plan
        # runs (see ``hot``), else an event
        self.idle: Any = _done_bell() if _SPIN is not None and _spin_now() else \
            threading.Event()

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

    def help(self) -> None:
        """A pool thread's share: ``work``, unless the caller has already finished."""
        with self.lock:
            if self.closed:             # a helper that comes late has nothing left to do
                return
            self.active += 1
        try:
            self.work()
        finally:
            with self.lock:
                self.active -= 1
                last = not self.active and self.closed
            if last:
                if isinstance(self.idle, _Bell):
                    self.idle.ring()
                else:
                    self.idle.set()

    def go(self, workers: int) -> None:
        for h in _helpers(workers):
            h.assign(self)
        self.work()
        with self.lock:
            self.closed = True
            waiting = self.active > 0
        if waiting:                     # the items the helpers took are still running
            self.idle.wait()            # (a bell: spinning, GIL released; or an event)
        if self.error is not None:
            raise self.error


def _after_fork_in_child() -> None:
    """A forked child has none of the parent's pool threads (and maybe a lock a parent thread
    held): start afresh."""
    global _lock
    _lock = threading.Lock()
    _pool.clear()
    _hot[0] = 0
    _watch.clear()
    for key in ("done", "hot", "hot_counts"):
        _tls.__dict__.pop(key, None)


os.register_at_fork(after_in_child=_after_fork_in_child)
