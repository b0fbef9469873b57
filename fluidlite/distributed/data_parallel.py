"""The data-parallel pass: all-reduce every gradient, broadcast parameters at start-up.

Where the ops go (the clip ordering is the point of the pass)::

    forward ... backward                    (each rank: its shard of the batch, mean loss)
    c_sync_calc_stream(g) -> g              Backward role, op_role_var [p, g]
    c_allreduce_sum(g) -> g                 Backward role (fluid's collective transpiler)
    scale(g, 1/nranks) -> g                 Backward role: g is now the mean over ranks
    c_sync_comm_stream(grads) -> grads      Backward role
    clip / regularization / update          Optimize role: every rank sees the same averaged
                                            gradients, so GradientClipByGlobalNorm computes the
                                            global norm of the averaged gradients everywhere

That is the blocking mode (``overlap=False``; fleet's ``DistributedStrategy.overlap_allreduce``
/ ``BuildStrategy.overlap_allreduce`` = False). The default overlaps communication with
backward: buckets are formed in the order backward produces the gradients, and::

    ... backward op writing the last gradient of bucket k
    [reshape2 + concat: pack bucket k]      Backward role
    c_allreduce_start(bucket k) -> req_k    MPI_Iallreduce starts; backward goes on
    ... the rest of backward (more starts)
    c_allreduce_wait(req_k) -> bucket k     right before the first op reading its gradients
    scale(bucket k, 1/nranks)  [split + reshape2: unpack]
    clip / regularization / update

Same arithmetic, same numbers (the 2-rank tests compare both modes bit for bit).

In the startup program, after the initializers: ``c_gen_nccl_id`` + ``c_comm_init`` per ring,
then ``c_broadcast(p, root=0)`` for every parameter, so the ranks start identical whatever their
seeds. With ``nrings > 1`` the gradients alternate between rings as in fluid.

``apply`` runs between ``Optimizer.backward`` and ``Optimizer._apply_optimize`` (fleet's
``minimize``); ``insert_before_optimize`` does the same on a program that already has its
optimizer ops (``CompiledProgram.with_data_parallel``). Before inserting anything, the ranks
exchange the list of gradients (names, shapes, dtypes) and every rank raises on the first
difference, so mismatched programs fail at build time instead of deadlocking later.
"""
from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

from ..core import rewrite
from ..core.dtypes import VarType, to_numpy_dtype
from ..core.ir import OpRole, Parameter, Program, Variable
from . import comm as comm_mod

__all__ = ["apply", "insert_allreduce", "insert_broadcast", "insert_before_optimize",
           "check_same_gradients"]

Pairs = List[Tuple[Parameter, Optional[Variable]]]
_SCOPE = "data_parallel"


def _signature(pairs: Sequence[Tuple[Any, Any]]) -> List[Tuple[str, str, Tuple[int, ...], str]]:
    return [(p.name, g.name, tuple(g.shape or ()), str(g.dtype)) for p, g in pairs]


def check_same_gradients(pairs: Sequence[Tuple[Any, Any]],
                         comm: Optional[comm_mod.Communicator] = None) -> None:
    """Raise ValueError on every rank unless all ranks have the same gradients (names, shapes,
    dtypes, order), naming the first difference. A no-op in one process."""
    comm = comm or comm_mod.world()
    if comm.size == 1:
        return
    sigs = comm.allgather_object(_signature(pairs))
    ref = sigs[0]
    for r, sig in enumerate(sigs[1:], start=1):
        if sig == ref:
            continue
        if len(sig) != len(ref):
            head = (f"rank 0 has {len(ref)} gradients, rank {r} has {len(sig)}")
        else:
            head = "the gradients differ"
        for i in range(max(len(sig), len(ref))):
            a = ref[i] if i < len(ref) else None
            b = sig[i] if i < len(sig) else None
            if a != b:
                raise ValueError(
                    f"data parallel: the ranks built different programs ({head}); first "
                    f"difference at gradient #{i}: rank 0 has {_fmt(a)}, rank {r} has "
                    f"{_fmt(b)}. Every rank must build the same program.")


def _fmt(entry: Any) -> str:
    if entry is None:
        return "nothing"
    p, g, shape, dtype = entry
    return f"{g} ({dtype}{list(shape)}, parameter {p})"


SMALL_GRAD_BYTES = 1 << 20     # gradients below this size are packed into buckets
BUCKET_BYTES = 32 << 20        # fluid's fuse_grad_size_in_MB default


def _itemsize(g: Variable) -> int:
    return np.dtype(to_numpy_dtype(g.dtype)).itemsize


def _nbytes(g: Variable) -> Optional[int]:
    shape = list(g.shape or ())
    if not shape or any(d is None or d < 0 for d in shape):
        return None
    n = 1
    for d in shape:
        n *= int(d)
    return n * _itemsize(g)


def _buckets(live: Pairs, bucket_bytes: int) -> List[Pairs]:
    """Consecutive small gradients of one dtype packed up to ``bucket_bytes``; every other
    gradient alone (a list of one)."""
    out: List[Pairs] = []
    cur: Pairs = []
    size = 0
    for p, g in live:
        nb = _nbytes(g) if bucket_bytes > 0 else None
        small = nb is not None and nb < min(SMALL_GRAD_BYTES, bucket_bytes)
        if cur and (not small or g.dtype != cur[0][1].dtype or size + nb > bucket_bytes):
            out.append(cur)
            cur, size = [], 0
        if small:
            cur.append((p, g))
            size += nb
        else:
            out.append([(p, g)])
    if cur:
        out.append(cur)
    return out


OVERLAP = True     # the default mode of the pass (fleet, with_data_parallel, GradAllReduce)


def insert_allreduce(program: Program, params_grads: Pairs, nranks: int, nrings: int = 1,
                     index: Optional[int] = None, bucket_bytes: int = 0,
                     overlap: Optional[bool] = None) -> Pairs:
    """All-reduce (sum) and scale by ``1/nranks`` every gradient of ``params_grads`` in place;
    returns the same pairs.

    With ``bucket_bytes > 0`` consecutive gradients smaller than ``SMALL_GRAD_BYTES`` are packed
    (``reshape2`` to 1-D, ``concat``) into buckets of at most ``bucket_bytes``, reduced and
    scaled as one buffer, and unpacked (``split``, ``reshape2``) into the same gradient
    variables: one all-reduce per bucket instead of one per gradient (latency), while large
    gradients are reduced in place (no copy).

    Blocking mode (``overlap=False``): the ops (``c_allreduce_sum`` + ``scale`` per bucket) are
    appended to the global block, or inserted at ``index`` (after the backward ops).

    Overlap mode (``overlap=True``, the default ``OVERLAP``): buckets are formed in the order
    the backward pass produces the gradients; each bucket's ``c_allreduce_start`` is inserted
    right after the op writing its last gradient, so the reduction travels while the rest of
    backward computes, and its ``c_allreduce_wait`` + ``scale`` (+ unpacking) right before the
    first op reading one of its gradients (the clip/regularization/update, or the end of the
    block / ``index`` when nothing reads them yet). The arithmetic is the blocking mode's."""
    block = program.global_block()
    live = [(p, g) for p, g in params_grads if g is not None]
    if not live:
        return params_grads
    # sparse (SELECTED_ROWS) gradients: their rows and values gathered from every rank by a
    # blocking c_allreduce_sum of their own (ops/collective.py), never packed into a bucket
    sparse = [(p, g) for p, g in live if g.type == VarType.SELECTED_ROWS]
    if sparse:
        live = [(p, g) for p, g in live if g.type != VarType.SELECTED_ROWS]
        before = len(block.ops)
        if live:
            insert_allreduce(program, live, nranks, nrings, index, bucket_bytes, overlap)
        at = None if index is None else index + len(block.ops) - before
        _insert_blocking(program, sparse, nranks, nrings, at, 0)
        return params_grads
    if overlap is None:
        overlap = OVERLAP
    if overlap:
        _insert_overlapped(program, live, nranks, nrings, index, bucket_bytes)
        return params_grads
    _insert_blocking(program, live, nranks, nrings, index, bucket_bytes)
    return params_grads


def _insert_blocking(program: Program, live: Pairs, nranks: int, nrings: int,
                     index: Optional[int], bucket_bytes: int) -> None:
    """Blocking mode of ``insert_allreduce`` (see there)."""
    block = program.global_block()
    pos = [len(block.ops) if index is None else index]

    def put(type_: str, inputs: Any, outputs: Any, attrs: Any) -> None:
        if index is None:
            rewrite.append(block, type_, inputs, outputs, attrs)
        else:
            rewrite.insert(block, pos[0], type_, inputs, outputs, attrs)
        pos[0] += 1

    with rewrite.role(program, OpRole.Backward, name_scope=_SCOPE):
        for k, bucket in enumerate(_buckets(live, bucket_bytes)):
            role_var = [v for pair in bucket for v in pair]
            with rewrite.role(program, OpRole.Backward, role_var):
                if k == 0:
                    put("c_sync_calc_stream", {"X": bucket[0][1]}, {"Out": bucket[0][1]}, {})
                fused = _pack(block, bucket, put)
                put("c_allreduce_sum", {"X": fused}, {"Out": fused}, {"ring_id": k % nrings})
                put("scale", {"X": fused}, {"Out": fused}, {"scale": 1.0 / nranks})
                _unpack(block, bucket, fused, put)
        grads = [g for _, g in live]
        for ring in range(nrings):
            put("c_sync_comm_stream", {"X": grads}, {"Out": grads}, {"ring_id": ring})


def _pack(block: Any, bucket: Pairs, put: Any) -> Variable:
    """The buffer reduced for ``bucket``: its gradient itself, or the concatenation of the
    flattened gradients."""
    if len(bucket) == 1:
        return bucket[0][1]
    dtype = bucket[0][1].dtype
    flats = []
    for _, g in bucket:
        flat = rewrite.tmp(block, "reshape2", dtype)
        put("reshape2", {"X": g}, {"Out": flat, "XShape": rewrite.tmp(block, "reshape2", dtype)},
            {"shape": [-1]})
        flats.append(flat)
    fused = rewrite.tmp(block, "coalesced_grad", dtype)
    put("concat", {"X": flats}, {"Out": fused}, {"axis": 0})
    return fused


def _unpack(block: Any, bucket: Pairs, fused: Variable, put: Any) -> None:
    """Write the reduced buffer back into the bucket's gradient variables."""
    if len(bucket) == 1:
        return
    dtype = bucket[0][1].dtype
    parts = [rewrite.tmp(block, "split", dtype) for _ in bucket]
    put("split", {"X": fused}, {"Out": parts},
        {"sections": [_nbytes(g) // _itemsize(g) for _, g in bucket], "axis": 0})
    for part, (_, g) in zip(parts, bucket):
        put("reshape2", {"X": part}, {"Out": g, "XShape": rewrite.tmp(block, "reshape2", dtype)},
            {"shape": list(g.shape)})


def _insert_overlapped(program: Program, live: Pairs, nranks: int, nrings: int,
                       index: Optional[int], bucket_bytes: int) -> None:
    """Overlap mode of ``insert_allreduce`` (see there)."""
    block = program.global_block()
    end = len(block.ops) if index is None else index
    uses = rewrite.Uses(block)
    made = {}
    for p, g in live:
        found = [i for i in uses.producers.get(g.name, ()) if i < end]
        made[g.name] = found[-1] if found else end - 1     # not written here: start at end
    # buckets in production order: the first bucket is ready first
    order = sorted(live, key=lambda pg: made[pg[1].name])
    plan = []                                    # (position, group, bucket number, bucket)
    for k, bucket in enumerate(_buckets(order, bucket_bytes)):
        ready = max(made[g.name] for _, g in bucket) + 1
        readers = [i for _, g in bucket for i in uses.readers.get(g.name, ()) if i >= ready]
        plan.append((ready, 0, k, bucket))
        plan.append((min(readers + [end]), 1, k, bucket))
    # insert in position order (starts before waits at one position); each inserted op
    # shifts what follows by one
    shift = [0]
    fused_of = {}
    with rewrite.role(program, OpRole.Backward, name_scope=_SCOPE):
        for at, group, k, bucket in sorted(plan, key=lambda e: (e[0], e[1], e[2])):
            at_now = at + shift[0]
            cursor = [at_now]

            def put(type_: str, inputs: Any, outputs: Any, attrs: Any) -> None:
                rewrite.insert(block, cursor[0], type_, inputs, outputs, attrs)
                cursor[0] += 1
                shift[0] += 1

            ring = k % nrings
            with rewrite.role(program, OpRole.Backward, [v for pair in bucket for v in pair]):
                if group == 0:
                    fused = fused_of[k] = _pack(block, bucket, put)
                    req = block.create_var(name=rewrite.tmp_name("allreduce_request"),
                                           type=VarType.RAW, persistable=False)
                    fused_of[k, "req"] = req
                    put("c_allreduce_start", {"X": fused}, {"Request": req},
                        {"ring_id": ring, "reduce_type": "sum"})
                else:
                    fused = fused_of[k]
                    put("c_allreduce_wait", {"Request": fused_of[k, "req"]}, {"Out": fused},
                        {"ring_id": ring})
                    put("scale", {"X": fused}, {"Out": fused}, {"scale": 1.0 / nranks})
                    _unpack(block, bucket, fused, put)


def insert_broadcast(startup: Program, params: Sequence[Variable], rank: int, nranks: int,
                     nrings: int = 1) -> None:
    """Append to ``startup``: the communicator setup of every ring and a broadcast of every
    parameter from rank 0 (Forward role, as fluid's transpiler)."""
    block = startup.global_block()
    with rewrite.role(startup, OpRole.Forward, name_scope=_SCOPE):
        for ring in range(nrings):
            nccl_id = block.create_var(name=rewrite.tmp_name("nccl_id"), dtype="int64",
                                       shape=[1], type=VarType.RAW, persistable=False)
            rewrite.append(block, "c_gen_nccl_id", {}, {"Out": nccl_id}, {"rank": rank})
            rewrite.append(block, "c_comm_init", {"X": nccl_id}, {},
                           {"nranks": nranks, "rank": rank, "ring_id": ring})
        svars = []
        for p in params:
            sp = block.vars.get(p.name)
            if sp is None:           # a parameter initialised elsewhere (e.g. loaded): skip
                continue
            rewrite.append(block, "c_broadcast", {"X": sp}, {"Out": sp},
                           {"ring_id": 0, "root": 0})
            svars.append(sp)
        if svars:
            rewrite.append(block, "c_sync_comm_stream", {"X": svars}, {"Out": svars},
                           {"ring_id": 0})


def apply(main: Program, startup: Program, params_grads: Pairs, nrings: int = 1,
          comm: Optional[comm_mod.Communicator] = None, bucket_bytes: int = BUCKET_BYTES,
          overlap: Optional[bool] = None) -> Pairs:
    """The whole pass for fleet's ``minimize``: check the ranks agree, all-reduce the
    gradients (appended after backward) and broadcast the parameters in ``startup``."""
    comm = comm or comm_mod.world()
    if nrings < 1:
        raise ValueError(f"data parallel: nrings (nccl_comm_num) must be >= 1, got {nrings}")
    live = [(p, g) for p, g in params_grads if g is not None]
    check_same_gradients(live, comm)
    out = insert_allreduce(main, params_grads, comm.size, nrings, bucket_bytes=bucket_bytes,
                           overlap=overlap)
    insert_broadcast(startup, [p for p, _ in live], comm.rank, comm.size, nrings)
    return out


def _role(op: Any) -> int:
    return int(op.attrs.get("op_role", 0) or 0)


def insert_before_optimize(main: Program, comm: Optional[comm_mod.Communicator] = None,
                           bucket_bytes: int = BUCKET_BYTES, nrings: int = 1,
                           overlap: Optional[bool] = None) -> Pairs:
    """The all-reduce part of the pass on a program that already has its optimizer: every
    trainable parameter ``p`` whose gradient ``p@GRAD`` a Backward-role op writes is paired with
    it, and the ops are inserted right after the last Backward-role op (before clip,
    regularization and update). Returns the pairs, sorted by parameter name."""
    comm = comm or comm_mod.world()
    block = main.global_block()
    last_backward = -1
    written = set()
    for i, op in enumerate(block.ops):
        role = _role(op)
        if role & OpRole.Backward and not role & OpRole.Optimize:
            last_backward = i
            written.update(op.output_arg_names)
    pairs: Pairs = [(p, block.vars[p.name + "@GRAD"]) for p in block.all_parameters()
                    if p.trainable and p.name + "@GRAD" in written]
    if last_backward < 0 or not pairs:
        raise ValueError("with_data_parallel: the program has no backward pass (call "
                         "optimizer.minimize(loss) before compiling it)")
    pairs.sort(key=lambda pg: pg[0].name)
    check_same_gradients(pairs, comm)
    insert_allreduce(main, pairs, comm.size, nrings, index=last_backward + 1,
                     bucket_bytes=bucket_bytes, overlap=overlap)
    return pairs
