"""LocalSGD: every rank updates its parameters locally; every ``k_steps`` steps the parameters
(not the gradients) are averaged across ranks.

fluid 1.8's semantics (``fluid.transpiler.collective.LocalSGD``): each parameter ``p`` has a
persistable snapshot ``p@SNAPSHOT`` (the parameters as of the last averaging; set in the
startup program after the broadcast from rank 0, so ranks start identical). An averaging step,
appended after the update ops (Optimize role), is per parameter::

    p = elementwise_sub(p@SNAPSHOT, p)     # delta: how far this rank moved since the snapshot
    p = c_allreduce_sum(p)                 # sum of the ranks' deltas
    p = scale(p, 1/nranks)                 # the mean delta
    p = elementwise_sub(p@SNAPSHOT, p)     # snapshot - mean delta = mean of the ranks' params
    p@SNAPSHOT = assign(p)

With ``k_steps > 1`` (fleet's ``DistributedStrategy.local_sgd_steps``) a persistable int64
counter ``@LOCAL_SGD_STEP@`` counts the steps and the averaging ops run in a
``conditional_block`` taken when ``step % k_steps == 0`` or ``step <= begin_step`` (fleet's
``local_sgd_is_warm_steps``: averaging every step while warming up). After an averaging step
every rank holds the same parameters. With ``k_steps = 1`` and plain SGD the averaged parameter
is ``p - lr * mean(g)``: gradient averaging (up to float rounding of the deltas).
"""
from __future__ import annotations

from typing import List, Sequence

from ..core import rewrite
from ..core.dtypes import VarType
from ..core.ir import Block, OpRole, Parameter, Program, Variable, program_guard
from . import data_parallel

__all__ = ["apply", "SNAPSHOT_SUFFIX", "STEP_VAR"]

SNAPSHOT_SUFFIX = "@SNAPSHOT"
STEP_VAR = "@LOCAL_SGD_STEP@"
_SCOPE = "local_sgd"


def _check(k_steps: int, begin_step: int) -> None:
    if isinstance(k_steps, bool) or not isinstance(k_steps, int) or k_steps < 1:
        raise ValueError(f"LocalSGD: local_sgd_steps (k_steps) must be an int >= 1, got "
                         f"{k_steps!r}")
    if isinstance(begin_step, bool) or not isinstance(begin_step, int) or begin_step < 0:
        raise ValueError(f"LocalSGD: local_sgd_is_warm_steps (begin_step) must be an int >= 0, "
                         f"got {begin_step!r}")


def _int64(block: Block, value: int) -> Variable:
    """A [1] int64 constant (``fill_constant``, as ``layers.fill_constant`` appends it)."""
    out = rewrite.op(block, "fill_constant", dtype="int64", attrs={
        "shape": [1], "dtype": VarType.INT64, "value": float(value), "force_cpu": False})
    out.stop_gradient = True
    return out


def _compare(block: Block, op_type: str, x: Variable, y: Variable) -> Variable:
    """A bool comparison (``equal`` / ``less_equal``, as the layers append it)."""
    out = rewrite.tmp(block, op_type, VarType.BOOL)
    out.stop_gradient = True
    return rewrite.op(block, op_type, out=out, X=x, Y=y)


def _averaging_step(block: Block, step: Variable, k_steps: int, begin_step: int) -> Variable:
    """The bool [1] condition of an averaging step: ``step % k_steps == 0``, or
    ``step <= begin_step`` while warming up (``begin_step > 0``)."""
    k = _int64(block, k_steps)
    zero = _int64(block, 0)
    pred = _compare(block, "equal", rewrite.op(block, "elementwise_mod", X=step, Y=k,
                                               attrs={"axis": -1}), zero)
    if begin_step > 0:
        warm = _compare(block, "less_equal", step, _int64(block, begin_step))
        pred = rewrite.op(block, "logical_or", X=pred, Y=warm)
    return pred


def apply(main: Program, startup: Program, params: Sequence[Parameter], rank: int,
          nranks: int, k_steps: int = 1, begin_step: int = 0, nrings: int = 1) -> List[Variable]:
    """Rewrite ``main`` (which already has its update ops) and ``startup`` for LocalSGD (see
    the module docstring): communicator setup, broadcast from rank 0 and snapshots in
    ``startup``; the (conditional) averaging appended to ``main``. Returns the snapshot
    variables of ``main``."""
    _check(k_steps, begin_step)
    if nrings < 1:
        raise ValueError(f"LocalSGD: nrings must be >= 1, got {nrings}")
    params = [p for p in params if not getattr(p, "distributed", False)]
    if not params:
        raise ValueError("LocalSGD: the program has no trainable parameter to average")
    data_parallel.insert_broadcast(startup, params, rank, nranks, nrings)
    sblock, block = startup.global_block(), main.global_block()
    snaps = []
    with rewrite.role(startup, OpRole.Forward, name_scope=_SCOPE):
        for p in params:
            sp = sblock.vars.get(p.name)
            if sp is None:
                raise ValueError(f"LocalSGD: parameter '{p.name}' is not initialised by the "
                                 f"startup program")
            ssnap = sblock.create_var(name=p.name + SNAPSHOT_SUFFIX, shape=p.shape,
                                      dtype=p.dtype, persistable=True, stop_gradient=True)
            rewrite.append(sblock, "assign", {"X": sp}, {"Out": ssnap})
    for p in params:
        snaps.append(block.create_var(name=p.name + SNAPSHOT_SUFFIX, shape=p.shape,
                                      dtype=p.dtype, persistable=True, stop_gradient=True))

    def average() -> None:
        cur = main.current_block()
        for i, (p, snap) in enumerate(zip(params, snaps)):
            with rewrite.role(main, OpRole.Optimize, [p, snap]):
                rewrite.append(cur, "elementwise_sub", {"X": snap, "Y": p}, {"Out": p})
                rewrite.append(cur, "c_allreduce_sum", {"X": p}, {"Out": p},
                               {"ring_id": i % nrings})
                rewrite.append(cur, "scale", {"X": p}, {"Out": p}, {"scale": 1.0 / nranks})
                rewrite.append(cur, "elementwise_sub", {"X": snap, "Y": p}, {"Out": p})
                rewrite.append(cur, "assign", {"X": p}, {"Out": snap})

    with rewrite.role(main, OpRole.Optimize, name_scope=_SCOPE):
        if k_steps == 1:
            average()
            return snaps
        step = rewrite.global_var(main, startup, STEP_VAR, [1], 0, "int64")
        rewrite.append(block, "increment", {"X": step}, {"Out": step}, {"step": 1.0})
        # (the block's build transaction covers the default startup program: this one)
        with program_guard(main, startup), \
                rewrite.conditional(_averaging_step(block, step, k_steps, begin_step), main):
            average()
    return snaps
