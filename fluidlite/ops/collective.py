"""Collective ops (Paddle's ``c_*`` names, slots and attrs): all-reduce, broadcast, all-gather,
reduce-scatter, stream syncs and communicator setup.

``ring_id`` selects the communicator (``fluidlite.distributed.comm``: ring 0 is the MPI world,
other rings are created by ``c_comm_init``). Kernels hand contiguous NumPy buffers to mpi4py
(no pickling); outside an MPI launch every collective is the identity, so a program carrying
them runs unchanged in one process. ``c_sync_calc_stream`` / ``c_sync_comm_stream`` order CUDA
streams in Paddle; on the CPU they pass their inputs through.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional

import numpy as np

from ..core.registry import OpDef, VarSpec, register
from ..core.selected_rows import SelectedRows

# The communicators live above the ops (fluidlite/distributed/comm.py), which registers them
# with ``provide_backend`` when imported. The package root names how to import it on first use
# (``set_backend_loader``), so a program with collectives runs without importing it by hand.
_BACKEND: Dict[str, Any] = {}
_LOADER: Dict[str, Callable[[], Any]] = {}


def provide_backend(get: Callable[[int], Any], init_ring: Callable[..., Any],
                    request_type: type) -> None:
    """Register the communicators: ``get(ring_id)`` returns ring ``ring_id``'s communicator,
    ``init_ring(ring_id, nranks, rank)`` creates it, ``request_type`` is what
    ``c_allreduce_start`` returns."""
    _BACKEND.update(get=get, init_ring=init_ring, request_type=request_type)


def set_backend_loader(load: Callable[[], Any]) -> None:
    """``load()`` imports the module that calls ``provide_backend``."""
    _LOADER["load"] = load


def backend(name: str) -> Any:
    """The registered ``get`` / ``init_ring`` / ``request_type``, loading the backend first."""
    if not _BACKEND and "load" in _LOADER:
        _LOADER["load"]()
    if not _BACKEND:
        raise RuntimeError("collective ops need the communicators of fluidlite.distributed; "
                           "import fluidlite (or fluidlite.distributed) before running them")
    return _BACKEND[name]


def _comm(ring_id: int) -> Any:
    return backend("get")(ring_id)


def sparse_allreduce(comm: Any, x: SelectedRows) -> SelectedRows:
    """The sum over ranks of a SelectedRows gradient: every rank's rows and values gathered
    (each padded to the longest, then cut back) and concatenated in rank order -- the rows
    stay unmerged, as fluid's sparse all-reduce; memory grows with the rows, not the table."""
    if getattr(comm, "mpi_comm", None) is None or getattr(comm, "size", 1) == 1:
        return x
    n = x.rows.size
    counts = comm.allgather(np.array([n], np.int64))
    top = int(counts.max())
    rows = np.zeros(top, np.int64)
    rows[:n] = x.rows
    vals = np.zeros((top,) + x.value.shape[1:], x.value.dtype)
    vals[:n] = x.value
    all_rows = comm.allgather(rows).reshape(-1, top)
    all_vals = comm.allgather(vals).reshape((-1, top) + x.value.shape[1:])
    keep = [slice(0, int(c)) for c in counts]
    return SelectedRows(np.concatenate([r[k] for r, k in zip(all_rows, keep)]),
                        np.concatenate([v[k] for v, k in zip(all_vals, keep)]), x.height)


class _AllReduce(OpDef):
    """Out = reduce_<op>(X over every rank of ring ``ring_id``)."""
    inputs, outputs = ("X",), ("Out",)
    no_grad = True
    reduce: str = "sum"
    extra_attrs = {"use_model_parallel": False}

    def infer(self, X):
        return {"Out": X}

    def forward(self, X, *, ring_id=0, use_calc_stream=False):
        if type(X) is SelectedRows and self.reduce == "sum":
            return {"Out": sparse_allreduce(_comm(ring_id), X)}
        return {"Out": _comm(ring_id).allreduce(X, self.reduce)}


@register
class CAllReduceSum(_AllReduce):
    """Out = sum over ranks of X;  dX = c_allreduce_sum(dOut) (Paddle's grad maker)."""
    type = "c_allreduce_sum"
    no_grad = False

    def make_grad(self, g, **attrs):
        g.append("c_allreduce_sum", {"X": g.output_grad("Out")}, {"Out": g.input_grad("X")},
                 ring_id=attrs.get("ring_id", 0), use_calc_stream=attrs.get(
                     "use_calc_stream", False))


@register
class CAllReduceMax(_AllReduce):
    """Out = element-wise max over ranks of X (not differentiable, as in Paddle)."""
    type, reduce = "c_allreduce_max", "max"


@register
class CAllReduceMin(_AllReduce):
    """Out = element-wise min over ranks of X (not differentiable, as in Paddle)."""
    type, reduce = "c_allreduce_min", "min"


@register
class CAllReduceProd(_AllReduce):
    """Out = element-wise product over ranks of X (not differentiable, as in Paddle)."""
    type, reduce = "c_allreduce_prod", "prod"


@register
class CAllReduceStart(OpDef):
    """Request = a non-blocking reduction (``reduce_type``: sum/max/min/prod) of X over every
    rank of ring ``ring_id``, started now (``MPI_Iallreduce``); ``c_allreduce_wait`` reading
    Request gives the result. Between the two, X must not be written and other ops run while
    the message travels (the data-parallel pass starts a bucket right after the backward op
    writing its last gradient). Request holds the in-flight request object (a RAW variable,
    never a tensor). Alone, the request is complete at once and its result is X."""
    type, inputs, outputs = "c_allreduce_start", ("X",), ("Request",)
    no_grad = True

    def infer(self, X, *, reduce_type="sum"):
        if reduce_type not in _REDUCE_TYPES:
            raise ValueError(f"c_allreduce_start: attribute reduce_type must be one of "
                             f"{list(_REDUCE_TYPES)}, got {reduce_type!r}")
        return {"Request": X}

    def forward(self, X, *, ring_id=0, reduce_type="sum"):
        return {"Request": _comm(ring_id).iallreduce(X, reduce_type)}


@register
class CAllReduceWait(OpDef):
    """Out = the result of the reduction ``Request`` (``c_allreduce_start``'s output): waits
    for it to complete, under the collective timeout (``FLUIDLITE_COLLECTIVE_TIMEOUT``) as the
    blocking collectives. ``ring_id`` names the ring for readers of the program."""
    type, inputs, outputs = "c_allreduce_wait", ("Request",), ("Out",)
    no_grad = True

    def infer(self, Request):
        return {"Out": Request}

    def forward(self, Request, *, ring_id=0):
        if not isinstance(Request, backend("request_type")):
            raise TypeError(f"c_allreduce_wait: input Request must be the request written by "
                            f"c_allreduce_start, got {type(Request).__name__}")
        return {"Out": Request.wait()}


_REDUCE_TYPES = ("sum", "max", "min", "prod")


@register
class CBroadcast(OpDef):
    """Out = X of rank ``root`` (every rank gets root's values)."""
    type, inputs, outputs = "c_broadcast", ("X",), ("Out",)
    no_grad = True

    def infer(self, X):
        return {"Out": X}

    def forward(self, X, *, ring_id=0, root=0, use_calc_stream=False):
        return {"Out": _comm(ring_id).broadcast(X, root)}


def _need_axis0(op: str, X: VarSpec) -> None:
    # gather / scatter work along dim 0 (fluid 1.8's InferShape sets dim[0]); a 0-d X has none
    if not X.shape:
        raise ValueError(f"{op}: X must have at least one dimension (the ranks' pieces are "
                         f"joined along dim 0), got a 0-d tensor; reshape it to [1]")


@register
class CAllGather(OpDef):
    """Out = concat([X of rank 0, ..., X of rank nranks-1], axis=0)."""
    type, inputs, outputs = "c_allgather", ("X",), ("Out",)
    no_grad = True

    def infer(self, X, *, nranks=1):
        if nranks < 1:
            raise ValueError(f"c_allgather: nranks must be >= 1, got {nranks}")
        _need_axis0("c_allgather", X)
        d0 = X.shape[0] * nranks if X.shape[0] >= 0 else -1
        return {"Out": X.with_(shape=(d0,) + X.shape[1:])}

    def forward(self, X, *, ring_id=0, nranks=1, use_calc_stream=False):
        comm = _comm(ring_id)
        _check_nranks("c_allgather", nranks, comm.size)
        return {"Out": comm.allgather(X)}


@register
class CReduceScatter(OpDef):
    """Out = block ``rank`` of sum over ranks of X, X split into ``nranks`` blocks on axis 0."""
    type, inputs, outputs = "c_reducescatter", ("X",), ("Out",)
    no_grad = True

    def infer(self, X, *, nranks=1):
        if nranks < 1:
            raise ValueError(f"c_reducescatter: nranks must be >= 1, got {nranks}")
        _need_axis0("c_reducescatter", X)
        d0 = X.shape[0]
        if d0 >= 0 and d0 % nranks:
            raise ValueError(f"c_reducescatter: the first dimension of X {list(X.shape)} must "
                             f"be divisible by nranks={nranks}")
        return {"Out": X.with_(shape=((d0 // nranks) if d0 >= 0 else -1,) + X.shape[1:])}

    def forward(self, X, *, ring_id=0, nranks=1, use_calc_stream=False):
        comm = _comm(ring_id)
        _check_nranks("c_reducescatter", nranks, comm.size)
        return {"Out": comm.reducescatter(X)}


@register
class CSyncCalcStream(OpDef):
    """Out = X (orders the compute stream before communication in Paddle; nothing on CPU)."""
    type, inputs, outputs = "c_sync_calc_stream", ("X",), ("Out",)
    no_grad = True
    passes_through = {"Out": "X"}

    def infer(self, X):
        return {"Out": X}

    def forward(self, X):
        return {"Out": X}


@register
class CSyncCommStream(OpDef):
    """Out = X (waits for ring ``ring_id``'s communication in Paddle; MPI collectives here have
    completed when their op returns)."""
    type, inputs, outputs = "c_sync_comm_stream", ("X*",), ("Out*",)
    no_grad = True
    passes_through = {"Out": "X"}

    def infer(self, X):
        return {"Out": list(X)}

    def forward(self, X, *, ring_id=0):
        return {"Out": list(X)}


@register
class CGenNCCLId(OpDef):
    """Out = the ring's id (Paddle exchanges a NCCL unique id over ``endpoint``s; MPI needs no
    rendezvous, so Out is the 1-element int64 array [rank])."""
    type, inputs, outputs = "c_gen_nccl_id", (), ("Out",)
    no_grad = True

    def infer(self):
        return {"Out": VarSpec((1,), "int64")}

    def forward(self, *, rank=0, endpoint="", other_endpoints=[]):
        return {"Out": np.array([rank], dtype=np.int64)}


@register
class CCommInit(OpDef):
    """Create the communicator of ring ``ring_id`` (a duplicate of the MPI world, checked to
    have ``nranks`` processes with this one at ``rank``); X is ``c_gen_nccl_id``'s output."""
    type, inputs, outputs = "c_comm_init", ("X?",), ()
    no_grad = True

    def infer(self, X=None):
        return {}

    def forward(self, X=None, *, nranks=0, rank=-1, ring_id=0, device_id=-1):
        backend("init_ring")(ring_id, nranks, rank)
        return {}


def _check_nranks(op: str, nranks: int, size: int) -> None:
    if nranks != size and size > 1:
        raise ValueError(f"{op}: attribute nranks={nranks} but the ring has {size} ranks")
