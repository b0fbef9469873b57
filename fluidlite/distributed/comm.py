"""Communicators: one per ``ring_id``, on MPI (Open MPI through mpi4py) or a single process.

Inside an MPI launch (``mpirun`` / ``python -m fluidlite.distributed.launch``: the environment
has ``OMPI_COMM_WORLD_SIZE``, ``PMI_SIZE`` or ``PMIX_RANK``) ring 0 is ``MPI.COMM_WORLD`` and
every other ring is a duplicate of it created by ``c_comm_init``. Outside one there is one
process and every collective is the identity, so the same script runs alone. mpi4py is
imported only inside a launch (importing it initialises MPI).

Hot-path collectives use mpi4py's buffer interface on contiguous NumPy arrays (upper-case
``Allreduce`` / ``Bcast`` / ...: Open MPI's tuned algorithms, no pickling). Each runs under a
bounded timeout (``FLUIDLITE_COLLECTIVE_TIMEOUT`` seconds, default 300): where MPI would wait
forever for a rank that stopped, a watchdog thread logs the collective and the waiting rank and
aborts the job. Any uncaught exception on a rank
aborts the whole job (``MPI_Abort``) after logging which rank failed, so the other ranks exit
promptly instead of hanging in their next collective; ``mpirun`` names the aborting rank too.
Both messages name the rank's host (``host_name``).

Large all-reduces go through a shared-memory window when every rank of the ring is on one node
(``_NodeWindow.create``: MPI and ``node_identity`` must agree); ``Communicator.shm_allreduce``
and ``shm_reason`` tell the decision, also logged at INFO on logger ``fluidlite``.
"""
from __future__ import annotations

import logging
import os
import socket
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Optional

import numpy as np

from ..ops import collective

__all__ = ["Communicator", "AllReduceRequest", "get", "init_ring", "world", "in_mpi_launch",
           "stats", "reset_stats", "host_name", "node_identity", "describe_hosts"]

_log = logging.getLogger("fluidlite")
_ENV_SIZE = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE")
_ENV_RANK = ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK")

_lock = threading.Lock()
_rings: Dict[int, "Communicator"] = {}
# time and bytes spent in hot-path collectives, for benchmarks and profiles
_stats: Dict[str, float] = {"calls": 0, "seconds": 0.0, "bytes": 0}


def _env_int(names: Any) -> Optional[int]:
    for n in names:
        v = os.environ.get(n)
        if v is not None and v.strip().lstrip("-").isdigit():
            return int(v)
    return None


def in_mpi_launch() -> bool:
    """True inside an MPI launch with more than one process (see the module docstring)."""
    size = _env_int(_ENV_SIZE)
    return size is not None and size > 1


def env_rank_size() -> "tuple[int, int]":
    """(rank, size) from the launcher's environment, without initialising MPI; (0, 1) alone."""
    if not in_mpi_launch():
        return 0, 1
    return _env_int(_ENV_RANK) or 0, _env_int(_ENV_SIZE) or 1


def timeout_seconds() -> float:
    try:
        return float(os.environ.get("FLUIDLITE_COLLECTIVE_TIMEOUT", "300"))
    except ValueError:
        return 300.0


def host_name() -> str:
    """This machine's host name (what error messages and ``Communicator.shm_reason`` call the
    host of a rank; Open MPI's ``MPI_Get_processor_name`` is the same name)."""
    return socket.gethostname() or "?"


def node_identity() -> str:
    """A string equal on two processes exactly when they are on one node for the
    shared-memory all-reduce: the running kernel (``/proc/sys/kernel/random/boot_id``: new on
    every machine and every boot, unlike host names, which clones and containers repeat), the
    mount namespace (the ``/dev/shm`` and ``/tmp`` a window's file lives in: a container has its
    own; ranks of one launch on one machine share theirs) and
    the network namespace (a container, or a namespace standing in for another machine as in
    tests/test_multihost.py, has its own: treating it as a machine keeps the decision the one
    real machines get). Without ``/proc`` (not Linux): the host name."""
    parts = []
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            parts.append(f.read().strip())
        for ns in ("mnt", "net"):
            parts.append(os.readlink(f"/proc/self/ns/{ns}"))     # e.g. "net:[4026531833]"
    except OSError:
        return "host:" + host_name()
    return " ".join(parts)


def describe_hosts(names: List[str], identities: List[str]) -> str:
    """Where the ranks run, from every rank's host name and ``node_identity`` (in rank order):
    ``"one host, n1"`` or ``"2 hosts: n1 (ranks 0-1), n2 (ranks 2-3)"`` (at most 8 hosts
    named; a host name two nodes share gets ``#k``)."""
    nodes: Dict[str, List[int]] = {}
    for r, ident in enumerate(identities):
        nodes.setdefault(ident, []).append(r)
    if len(nodes) == 1:
        return f"one host, {names[0]}"
    seen: Dict[str, int] = {}
    parts = []
    for ident, ranks in nodes.items():
        name = names[ranks[0]]
        seen[name] = seen.get(name, 0) + 1
        if seen[name] > 1:
            name = f"{name}#{seen[name]}"
        parts.append(f"{name} (rank{'s' if len(ranks) > 1 else ''} {_ranges(ranks)})")
    more = f", and {len(parts) - 8} more" if len(parts) > 8 else ""
    return f"{len(nodes)} hosts: " + ", ".join(parts[:8]) + more


def _ranges(ranks: List[int]) -> str:
    """[0, 1, 2, 5] -> "0-2, 5" (sorted input)."""
    runs: List[List[int]] = []
    for r in ranks:
        if runs and r == runs[-1][1] + 1:
            runs[-1][1] = r
        else:
            runs.append([r, r])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def stats() -> Dict[str, float]:
    """A copy of the hot-path collective counters: calls, seconds, bytes."""
    return dict(_stats)


def reset_stats() -> None:
    _stats.update(calls=0, seconds=0.0, bytes=0)


class Communicator:
    """One ring: ``rank``, ``size`` and the collectives the ``c_*`` kernels call. A
    single-process communicator (``mpi_comm is None``) returns its inputs unchanged."""

    def __init__(self, ring_id: int, mpi_comm: Any = None) -> None:
        self.ring_id = ring_id
        self.mpi_comm = mpi_comm
        self.rank = 0 if mpi_comm is None else mpi_comm.Get_rank()
        self.size = 1 if mpi_comm is None else mpi_comm.Get_size()
        # the shared-memory window of ``allreduce``: None until the first large all-reduce
        # decides, then a ``_NodeWindow`` or False (ranks on several machines, or turned off)
        self._shm: Any = None
        #: whether large all-reduces go through the shared-memory window: None until the first
        #: one (at least ``_SHM_MIN_BYTES``) decides, collectively, then True or False
        self.shm_allreduce: Optional[bool] = None
        #: why: "" until decided, then e.g. "on: the 2 ranks run on one host, n1" or "off: the 4
        #: ranks run on 2 hosts: n1 (ranks 0-1), n2 (ranks 2-3)" (``_NodeWindow.create``; also
        #: logged at INFO on logger "fluidlite")
        self.shm_reason = ""

    def __repr__(self) -> str:
        return f"Communicator(ring_id={self.ring_id}, rank={self.rank}, size={self.size})"

    # -- hot path: buffers, no pickling ----------------------------------------------------
    def allreduce(self, x: np.ndarray, op: str = "sum", inplace: bool = False,
                  scale: Any = None) -> np.ndarray:
        """Element-wise reduction (sum/max/min/prod) of ``x`` over every rank, times ``scale``
        when given (a scalar of ``x``'s dtype: one multiply of the reduced value): into a new
        array, or with ``inplace`` (the caller owns ``x`` exclusively) into ``x`` itself.

        When every rank of the ring is on this machine and ``x`` has at least
        ``_SHM_MIN_BYTES``, the reduction runs through an MPI-3 shared-memory window
        (``_NodeWindow``; ``FLUIDLITE_SHM_ALLREDUCE=0`` turns it off): measured 30-40% faster
        than Open MPI's shared-memory all-reduce on 6-23 MB. Otherwise Open MPI's ``Allreduce``
        (``MPI_IN_PLACE`` when ``inplace``). Alone, ``x`` itself (times ``scale``)."""
        if self.mpi_comm is None:
            if scale is None:
                return x
            return np.multiply(x, scale, out=x) if inplace else x * scale
        own = inplace and x.flags.c_contiguous and x.flags.writeable
        win = self._window(x)
        if win is not None:
            src = x if x.flags.c_contiguous else np.ascontiguousarray(x)
            out = x if own else np.empty_like(src)
            self._wait(lambda: win.allreduce(src, out, op, scale), f"c_allreduce_{op}", x)
            return out
        from mpi4py import MPI
        mpi_op = {"sum": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN, "prod": MPI.PROD}[op]
        if own:
            self._wait(lambda: self.mpi_comm.Allreduce(MPI.IN_PLACE, x, mpi_op),
                       f"c_allreduce_{op}", x)
            out = x
        else:
            x = np.ascontiguousarray(x)
            out = np.empty_like(x)
            self._wait(lambda: self.mpi_comm.Allreduce(x, out, mpi_op), f"c_allreduce_{op}", x)
        return out if scale is None else np.multiply(out, scale, out=out)

    def _window(self, x: np.ndarray) -> Optional["_NodeWindow"]:
        """This ring's shared-memory window when ``x`` should go through it (created on the
        first such call: every rank makes that call with the same size, so the collective
        creation matches), else None."""
        if x.nbytes < _SHM_MIN_BYTES or self._shm is False:
            return None
        if self._shm is None:
            self._shm = False
            if os.environ.get("FLUIDLITE_SHM_ALLREDUCE", "1") == "0":
                reason = "off: FLUIDLITE_SHM_ALLREDUCE=0"
            else:
                holder: List[Any] = []
                self._wait(lambda: holder.append(_NodeWindow.create(self.mpi_comm)),
                           "shared-memory window setup", None)
                win, reason = holder[0]
                self._shm = win or False
            self.shm_allreduce, self.shm_reason = bool(self._shm), reason
            _log.info("ring %d, rank %d: shared-memory all-reduce %s", self.ring_id, self.rank,
                      reason)
        return self._shm or None

    def iallreduce(self, x: np.ndarray, op: str = "sum") -> "AllReduceRequest":
        """Start a non-blocking reduction of ``x`` over every rank (``MPI_Iallreduce`` into a
        fresh buffer; where ``allreduce`` would use the shared-memory window and no progress
        thread runs, that reduction, deferred to the wait) and return its request;
        ``request.wait()`` gives the result. ``x`` must
        not be written until then (the request keeps a reference to it). Alone, the request
        is already complete and its result is ``x``."""
        if self.mpi_comm is None:
            return AllReduceRequest(self, op, x, x, None)
        win = self._window(x)       # (first: every rank decides on the window at one call)
        x = np.ascontiguousarray(x)
        if win is not None and not _progress.enabled:
            # no core to advance an MPI_Iallreduce: it would run in its Wait anyway, so the
            # (faster) shared-memory reduction runs there instead (its output buffer is
            # chosen then: see ``AllReduceRequest.wait``)
            _stats["bytes"] += x.nbytes
            return AllReduceRequest(self, op, x, None, _Deferred(win, x, op))
        out = np.empty_like(x)
        from mpi4py import MPI
        mpi_op = {"sum": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN, "prod": MPI.PROD}[op]
        t0 = time.perf_counter()
        req = self.mpi_comm.Iallreduce(x, out, mpi_op)
        _stats["seconds"] += time.perf_counter() - t0
        _stats["bytes"] += x.nbytes
        _progress.add(req)
        return AllReduceRequest(self, op, x, out, req)

    def broadcast(self, x: np.ndarray, root: int = 0) -> np.ndarray:
        """Rank ``root``'s ``x`` on every rank (shape and dtype must agree)."""
        if self.mpi_comm is None:
            return x
        self._check_root(root)
        buf = np.array(x, copy=True, order="C")
        self._wait(lambda: self.mpi_comm.Bcast(buf, root=root), "c_broadcast", buf)
        return buf

    def allgather(self, x: np.ndarray) -> np.ndarray:
        """Every rank's ``x`` concatenated along axis 0, in rank order."""
        if self.mpi_comm is None:
            return x
        x = np.ascontiguousarray(x)
        out = np.empty((self.size * x.shape[0],) + x.shape[1:], dtype=x.dtype) if x.ndim else \
            np.empty((self.size,), dtype=x.dtype)
        self._wait(lambda: self.mpi_comm.Allgather(x, out), "c_allgather", x)
        return out

    def reducescatter(self, x: np.ndarray) -> np.ndarray:
        """The sum over ranks of ``x``, split along axis 0 into ``size`` equal blocks: this
        rank's block."""
        if self.mpi_comm is None:
            return x
        from mpi4py import MPI
        x = np.ascontiguousarray(x)
        if x.ndim == 0 or x.shape[0] % self.size:
            raise ValueError(f"c_reducescatter: the first dimension of X {list(x.shape)} must "
                             f"be divisible by the number of ranks {self.size}")
        out = np.empty((x.shape[0] // self.size,) + x.shape[1:], dtype=x.dtype)
        self._wait(lambda: self.mpi_comm.Reduce_scatter_block(x, out, MPI.SUM),
                   "c_reducescatter", x)
        return out

    def barrier(self) -> None:
        if self.mpi_comm is not None:
            self._wait(self.mpi_comm.Barrier, "barrier", None)

    # -- setup time only (pickled objects) -------------------------------------------------
    def allgather_object(self, obj: Any) -> List[Any]:
        """Every rank's ``obj`` (pickled; for start-up checks, never per step)."""
        if self.mpi_comm is None:
            return [obj]
        out: List[Any] = []
        self._wait(lambda: out.extend(self.mpi_comm.allgather(obj)), "allgather_object", None)
        return out

    # -- internals ---------------------------------------------------------------------------
    def _check_root(self, root: int) -> None:
        if not 0 <= root < self.size:
            raise ValueError(f"c_broadcast: root {root} is not a rank of ring {self.ring_id} "
                             f"(ranks 0..{self.size - 1})")

    def _wait(self, call: Callable[[], Any], what: str, x: Optional[np.ndarray]) -> None:
        """Run a blocking collective (MPI's tuned algorithms) under the watchdog: if it has
        not returned after the timeout, the watchdog thread aborts the job (MPI's own wait
        has no bound)."""
        t0 = time.perf_counter()
        _watch["current"] = (time.monotonic() + timeout_seconds(), what, self)
        try:
            call()
        finally:
            _watch["current"] = None
        _stats["calls"] += 1
        _stats["seconds"] += time.perf_counter() - t0
        _stats["bytes"] += 0 if x is None else x.nbytes


_SHM_MIN_BYTES = 1 << 16     # below: Open MPI's algorithms (latency-bound sizes)
_SHM_CHUNK = 1 << 20         # bytes per rank per round (measured: 256 KB..4 MB alike; L2-sized)
_UFUNCS = {"sum": np.add, "max": np.maximum, "min": np.minimum, "prod": np.multiply}


class _NodeWindow:
    """All-reduce through one MPI-3 shared-memory window (``MPI_Win_allocate_shared``) of
    ``_SHM_CHUNK`` bytes per rank, for a ring whose ranks share one machine.

    ``x`` goes through in rounds of one chunk. In a round each of the N ranks owns a 1/N part
    of the chunk (the same slot region every round). A rank writes the parts it does not own
    into its slot; barrier; it reduces its own part -- its values and the other slots' in rank
    order (``v0 op v1 op ...``), times ``scale`` -- into the output and publishes the result in
    its slot; barrier; it copies the other parts' results from their owners' slots.

    Every element is reduced by exactly one rank, so all ranks get the same bits. The two
    barriers make reusing the slots safe: a rank's own region is read by the others until the
    next round's first barrier and rewritten after it; its other regions are read before the
    round's second barrier and rewritten after it.
    """

    def __init__(self, mpi_comm: Any, win: Any) -> None:
        self.comm, self.win = mpi_comm, win
        self.rank, self.size = mpi_comm.Get_rank(), mpi_comm.Get_size()
        self.slots = [np.frombuffer(win.Shared_query(k)[0], np.uint8, count=_SHM_CHUNK)
                      for k in range(self.size)]

    @classmethod
    def create(cls, mpi_comm: Any) -> "tuple[Optional[_NodeWindow], str]":
        """Collective over ``mpi_comm``: (a window, "on: ...") when all its ranks share this
        machine, else (None, "off: <why>").

        Both must agree that they do: MPI (``MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)``: Open
        MPI's view, one node per daemon) and the ranks' node identities (``node_identity``:
        boot id, network and mount namespaces), so a rank never maps memory it cannot share
        -- another kernel, another ``/dev/shm`` -- nor treats a container or network
        namespace that stands for another machine as this one."""
        from mpi4py import MPI
        ids = mpi_comm.allgather((node_identity(), host_name()))
        node = mpi_comm.Split_type(MPI.COMM_TYPE_SHARED)
        try:
            mpi_one_node = node.Get_size() == mpi_comm.Get_size()
        finally:
            node.Free()
        hosts = describe_hosts([h for _, h in ids], [i for i, _ in ids])
        n = mpi_comm.Get_size()
        if len({i for i, _ in ids}) > 1:
            return None, f"off: the {n} ranks run on {hosts}"
        if not mpi_one_node:
            return None, (f"off: MPI places the {n} ranks on more than one node "
                          f"(MPI_COMM_TYPE_SHARED), though all run on {hosts}")
        try:
            win = MPI.Win.Allocate_shared(_SHM_CHUNK, 1, comm=mpi_comm)
        except MPI.Exception as e:      # e.g. no room in /dev/shm: MPI's Allreduce still works
            _log.warning("shared-memory all-reduce unavailable (%s); using MPI_Allreduce", e)
            return None, f"off: MPI_Win_allocate_shared failed ({e})"
        return cls(mpi_comm, win), f"on: the {n} ranks run on {hosts}"

    def allreduce(self, x: np.ndarray, out: np.ndarray, op: str, scale: Any) -> None:
        """``out = scale * reduce(x)`` over the ranks (``out`` may be ``x``; both C-contiguous,
        same shape and dtype on every rank)."""
        fn = _UFUNCS[op]
        r, n_ranks, barrier = self.rank, self.size, self.comm.Barrier
        src, dst = x.reshape(-1), out.reshape(-1)
        in_place = out is x
        # every round gives rank k the same slot region [k * part, (k + 1) * part) (cut short
        # in the last round): a region another rank may still be reading is never rewritten
        part = min(_SHM_CHUNK // x.itemsize // n_ranks, -(-src.size // n_ranks))
        step = part * n_ranks
        slots = [sl[:step * x.itemsize].view(x.dtype) for sl in self.slots]
        for a in range(0, src.size, step):
            piece, res = src[a:a + step], dst[a:a + step]
            m = piece.size
            bounds = [min(k * part, m) for k in range(n_ranks + 1)]
            mine = slots[r]
            for k in range(n_ranks):
                if k != r:
                    mine[bounds[k]:bounds[k + 1]] = piece[bounds[k]:bounds[k + 1]]
            barrier()
            lo, hi = bounds[r], bounds[r + 1]
            target = res[lo:hi]
            own = piece[lo:hi]
            if in_place and r >= 2:         # the fold writes target before own's turn
                own = own.copy()
            vals = [own if k == r else slots[k][lo:hi] for k in range(n_ranks)]
            fn(vals[0], vals[1], out=target)
            for k in range(2, n_ranks):
                fn(target, vals[k], out=target)
            if scale is not None:
                np.multiply(target, scale, out=target)
            mine[lo:hi] = target
            barrier()
            for k in range(n_ranks):
                if k != r:
                    res[bounds[k]:bounds[k + 1]] = slots[k][bounds[k]:bounds[k + 1]]


class _Deferred:
    """The request of a deferred shared-memory all-reduce (``Communicator.iallreduce``)."""

    __slots__ = ("win", "x", "out", "op", "scale")

    def __init__(self, win: _NodeWindow, x: np.ndarray, op: str) -> None:
        self.win, self.x, self.op = win, x, op
        self.out: Optional[np.ndarray] = None       # None: a new buffer; else x itself
        self.scale: Any = None

    def Wait(self) -> None:             # noqa: N802 (mpi4py's Request spelling)
        if self.out is None:
            self.out = np.empty_like(self.x)
        self.win.allreduce(self.x, self.out, self.op, self.scale)


class AllReduceRequest:
    """An all-reduce in flight (``Communicator.iallreduce``): the value ``c_allreduce_start``
    writes into its ``Request`` variable and ``c_allreduce_wait`` consumes."""

    __slots__ = ("comm", "op", "x", "out", "req", "done")

    def __init__(self, comm: Communicator, op: str, x: np.ndarray, out: np.ndarray,
                 req: Any) -> None:
        self.comm, self.op, self.x, self.out, self.req = comm, op, x, out, req
        self.done = req is None

    def __repr__(self) -> str:
        state = "done" if self.done else "in flight"
        a = self.out if self.out is not None else self.x
        return (f"AllReduceRequest({self.op}, ring {self.comm.ring_id}, "
                f"{list(a.shape)} {a.dtype}, {state})")

    def wait(self, scale: Any = None, inplace: bool = False) -> np.ndarray:
        """Block until the reduction is complete (under the collective timeout, as the
        blocking collectives) and return the reduced array, times ``scale`` when given (a
        scalar of its dtype; ignored when the request is already complete). ``inplace``: the
        caller owns the input array exclusively, so a reduction still to run (the deferred
        shared-memory one) may write into it. Waiting twice returns the same array."""
        if not self.done:
            req = self.req
            _progress.discard(req)       # the progress thread no longer touches it
            deferred = isinstance(req, _Deferred)
            if deferred:
                req.scale = scale           # one pass: scaled as it is reduced
                if inplace and req.x.flags.writeable:
                    req.out = req.x
            self.comm._wait(req.Wait, f"c_allreduce_{self.op} (c_allreduce_wait)", None)
            if deferred:
                self.out, req.x, req.out = req.out, None, None
            elif scale is not None:
                np.multiply(self.out, scale, out=self.out)
            self.done, self.x = True, None
        return self.out


def _spare_cores() -> bool:
    """Whether this machine has a core beyond one per local rank. The progress thread needs
    CPU time of its own: when every core already runs a rank's NumPy kernels, its polling
    slows compute more than the overlap saves (bench/data_parallel.py, config D on 2 cores
    with 2 ranks: 37.9 -> 43.8 ms of compute per step for 2.8 ms less waiting)."""
    local = _env_int(("OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "MV2_COMM_WORLD_LOCAL_SIZE"))
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return cores > (local or 1)


class _Progress:
    """Requests in flight. Open MPI advances a non-blocking collective only inside MPI calls,
    so without help an ``MPI_Iallreduce`` started during backward would mostly run in its
    ``Wait``. A daemon thread (``FLUIDLITE_PROGRESS_THREAD``: 1 on, 0 off, ``auto`` -- the
    default -- on when this machine has more cores than ranks, see ``_spare_cores``) tests
    the pending requests every ``FLUIDLITE_PROGRESS_INTERVAL`` seconds (default 0.0005) so
    the transfer advances while the backward ops compute (NumPy and mpi4py release the GIL;
    mpi4py initialises MPI with ``MPI_THREAD_MULTIPLE``). It sleeps on a condition while
    nothing is in flight, and never touches a request the main thread is waiting for
    (``AllReduceRequest.wait`` takes it out of the list first, under the same lock).
    bench/data_parallel.py measures the overlap with and without it."""

    def __init__(self) -> None:
        self.pending: List[Any] = []
        self.cond = threading.Condition()
        self.thread: Optional[threading.Thread] = None
        setting = os.environ.get("FLUIDLITE_PROGRESS_THREAD", "auto")
        self.enabled = _spare_cores() if setting == "auto" else setting != "0"

    def add(self, req: Any) -> None:
        if not self.enabled:
            return
        with self.cond:
            self.pending.append(req)
            if self.thread is None:
                self.thread = threading.Thread(target=self._run, daemon=True,
                                               name="fluidlite-mpi-progress")
                self.thread.start()
            self.cond.notify()

    def discard(self, req: Any) -> None:
        if not self.enabled:
            return
        with self.cond:
            if req in self.pending:
                self.pending.remove(req)

    def _run(self) -> None:
        try:
            interval = float(os.environ.get("FLUIDLITE_PROGRESS_INTERVAL", "0.0005"))
        except ValueError:
            interval = 0.0005
        while True:
            with self.cond:
                while not self.pending:
                    self.cond.wait()
                reqs = list(self.pending)
            with self.cond:           # under the lock: never on a request being waited for
                for r in reqs:
                    if r in self.pending:
                        r.Test()      # a completed request stays pending: Wait returns at once
            time.sleep(interval)


_progress = _Progress()
_watch: Dict[str, Any] = {"current": None, "thread": None}


def _watchdog() -> None:
    """Daemon thread: abort every rank when a collective outlives its deadline."""
    while True:
        time.sleep(min(0.5, max(timeout_seconds() / 10, 0.05)))
        cur = _watch["current"]
        if cur is None or time.monotonic() < cur[0]:
            continue
        _, what, comm = cur
        host = host_name()
        _log.critical("%s on ring %d timed out on rank %d (host %s); aborting all ranks", what,
                      comm.ring_id, comm.rank, host)
        # stderr as well: the job is about to die, whatever logging's setup
        sys.stderr.write(f"fluidlite.distributed: {what} on ring {comm.ring_id}: rank "
                         f"{comm.rank} of {comm.size} waited {timeout_seconds():.0f} s "
                         f"(FLUIDLITE_COLLECTIVE_TIMEOUT) for the other ranks; one of them "
                         f"stopped or runs a different program; aborting all ranks (rank "
                         f"{comm.rank} runs on host {host})\n")
        sys.stderr.flush()
        from mpi4py import MPI
        MPI.COMM_WORLD.Abort(1)


def _abort_on_uncaught(rank: int, size: int) -> None:
    """Install a ``sys.excepthook`` that logs the failing rank and its host and aborts every
    rank."""
    previous = sys.excepthook
    host = host_name()

    def hook(tp: Any, value: Any, tb: Any) -> None:
        previous(tp, value, tb)
        # stderr, like the traceback above: the job is about to die, whatever logging's setup
        _log.critical("rank %d of %d (host %s) failed with %s; aborting all ranks", rank, size,
                      host, tp.__name__)
        sys.stderr.write(f"fluidlite.distributed: rank {rank} of {size} failed with "
                         f"{tp.__name__}: {value} (on host {host}); aborting all ranks\n")
        sys.stderr.flush()
        from mpi4py import MPI
        MPI.COMM_WORLD.Abort(1)

    sys.excepthook = hook


def world() -> Communicator:
    """Ring 0: ``MPI.COMM_WORLD`` inside a launch, a single-process communicator otherwise."""
    with _lock:
        comm = _rings.get(0)
        if comm is None:
            if in_mpi_launch():
                from mpi4py import MPI
                comm = Communicator(0, MPI.COMM_WORLD)
                _abort_on_uncaught(comm.rank, comm.size)
                _watch["thread"] = threading.Thread(target=_watchdog, daemon=True,
                                                    name="fluidlite-collective-watchdog")
                _watch["thread"].start()
            else:
                comm = Communicator(0)
            _rings[0] = comm
        return comm


def init_ring(ring_id: int, nranks: int = 0, rank: int = -1) -> Communicator:
    """Create ring ``ring_id`` (``c_comm_init``): a duplicate of the world communicator, so
    collectives on different rings never match each other. Idempotent per ring. ``nranks`` /
    ``rank`` (when given) must agree with the launch."""
    base = world()
    if nranks > 0 and nranks != base.size:
        raise ValueError(f"c_comm_init: ring {ring_id} declares nranks={nranks}, but this launch "
                         f"has {base.size} process(es); launch with -n {nranks}")
    if rank >= 0 and rank != base.rank:
        raise ValueError(f"c_comm_init: ring {ring_id} declares rank={rank}, but this process "
                         f"is rank {base.rank} of the launch")
    with _lock:
        comm = _rings.get(ring_id)
        if comm is None:
            comm = _rings[ring_id] = Communicator(
                ring_id, None if base.mpi_comm is None else base.mpi_comm.Dup())
        return comm


def get(ring_id: int = 0) -> Communicator:
    """The communicator of ``ring_id`` (ring 0 is created on first use; others by
    ``c_comm_init`` in the startup program)."""
    if ring_id == 0:
        return world()
    comm = _rings.get(ring_id)
    if comm is None:
        if world().mpi_comm is None:        # alone: every ring is the identity
            return init_ring(ring_id)
        raise RuntimeError(f"ring_id {ring_id} has no communicator: run the startup program "
                           f"(its c_comm_init creates ring {ring_id}) before the main program")
    return comm


collective.provide_backend(get, init_ring, AllReduceRequest)   # the c_* ops' communicators
