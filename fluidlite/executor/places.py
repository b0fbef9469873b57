"""Data parallel over several CPU places in one process: fluid 1.8's
``CompiledProgram.with_data_parallel`` with ``CPU_NUM`` > 1 (or ``places=[...]``).

Each place runs the forward and backward ops on its own part of the batch — one feed dict per
place, or one dict split evenly along dim 0 — and the gradients are averaged, as fluid's
all-reduce with ``GradientScaleStrategy.CoeffNumDevice`` does; the optimize and learning-rate
ops then run once on the averaged gradients. A step therefore equals one step on the whole batch
when the loss is a mean over equal parts. Places run one after another (NumPy releases no
useful parallelism here; across processes use MPI, ``fluidlite.distributed``).

State written by the forward pass (batch-norm running statistics) is per place in fluid; here
the scope keeps place 0's, as fluid's fetch and save did. Fetched values of the forward/backward
part are merged along dim 0 (``return_merged=True``: a [1] loss becomes [places]) or returned
per place; values the update writes (parameters, the learning rate) are fetched once.
"""
from __future__ import annotations

from typing import Any, Dict, List, Sequence, Tuple

import numpy as np

from ..core import rewrite
from ..core.ir import OpRole, Program
from ..core.scope import LoDTensor, Scope
from .plan import check_feed_keys

_APPLY_ROLES = OpRole.Optimize | OpRole.LRSched


def split_program(program: Program) -> Tuple[Program, Program, List[str]]:
    """(compute, apply, gradient names): ``compute`` holds block 0's forward/backward ops,
    ``apply`` the optimize and learning-rate ops; the gradients are what ``apply`` reads of
    what ``compute`` writes."""
    ops = program.global_block().ops
    is_apply = [bool(int(op.attrs.get("op_role", 0)) & _APPLY_ROLES) for op in ops]
    compute, apply = program.clone(), program.clone()
    for prog, drop in ((compute, is_apply), (apply, [not a for a in is_apply])):
        block = prog.global_block()
        for i in reversed([i for i, d in enumerate(drop) if d]):
            rewrite.remove_ops(block, i)
    block = program.global_block()
    written = {n for op, a in zip(ops, is_apply) if not a for n in op.output_arg_names}
    grads: List[str] = []
    for op, a in zip(ops, is_apply):
        if a:
            for n in op.input_arg_names:
                var = block._find_var_recursive(n)
                if n in written and n not in grads and var is not None and not var.persistable:
                    grads.append(n)
    return compute, apply, grads


def place_feeds(feed: Any, places: int, partial: bool = False) -> List[Dict[str, Any]]:
    """One feed dict per place: a list of ``places`` dicts as given, or one dict whose arrays
    are split evenly along dim 0 (each place gets at least one row). ``partial`` (an
    inference program): a list of 1..places dicts runs on that many places, as fluid 1.8's
    partial feed (a DataLoader's last step with drop_last=False)."""
    if isinstance(feed, (list, tuple)):
        if not all(isinstance(f, dict) for f in feed) or not (
                len(feed) == places or partial and 0 < len(feed) < places):
            upto = f"1 to {places}" if partial else f"{places}"
            raise ValueError(f"with_data_parallel runs on {places} places: feed a list of "
                             f"{upto} dicts (one per place) or one dict to split, but "
                             f"received a {type(feed).__name__} of {len(feed)} item(s)"
                             + ("" if partial or len(feed) > places else
                                "; a training program needs a batch on every place (fluid "
                                "1.8: drop_last=False of a DataLoader is not supported for "
                                "training, set drop_last=True)"))
        for f in feed:
            check_feed_keys(f)
        return [dict(f) for f in feed]
    if feed is None:
        return [{} for _ in range(places)]
    if not isinstance(feed, dict):
        raise TypeError(f"feed requires dict as its Parameter. But you passed in {type(feed)}")
    check_feed_keys(feed)
    parts: List[Dict[str, Any]] = [{} for _ in range(places)]
    for name, value in feed.items():
        if isinstance(value, LoDTensor) and value.lod():
            raise ValueError(f"with_data_parallel on {places} places cannot split the LoD "
                             f"tensor fed to '{name}'; feed a list of {places} dicts instead")
        arr = np.asarray(value)
        if arr.ndim == 0 or arr.shape[0] < places:
            raise ValueError(f"The fed data of '{name}' has batch size "
                             f"{arr.shape[0] if arr.ndim else 0}, fewer than the {places} "
                             f"places of with_data_parallel: feed at least {places} rows, or "
                             f"set CPU_NUM lower")
        for part, chunk in zip(parts, np.array_split(arr, places)):
            part[name] = chunk
    return parts


def run(executor: Any, compiled: Any, feed: Any, fetch_names: Sequence[str], scope: Scope,
        return_numpy: bool, return_merged: bool) -> List[Any]:
    """One data-parallel step of ``compiled`` on ``compiled._local_places`` places."""
    compute, apply, grads = compiled._split()
    apply_block = apply.global_block()
    feeds = place_feeds(feed, compiled._local_places,
                        partial=not grads and not apply_block.ops)
    places = len(feeds)
    late = [n for n in fetch_names if apply_block._find_var_recursive(n) is not None and
            any(n in op.output_arg_names for op in apply_block.ops)]
    early = [n for n in fetch_names if n not in late]
    writes = _persistables_written(compute)
    scopes = [_place_scope(compiled, scope, k, writes) if k else scope for k in range(places)]
    saved = _snapshot(scopes, writes)
    streams = _stream_states(executor, scopes)
    results: List[List[Any]] = []
    summed: List[Any] = []
    try:        # all-or-nothing: each run commits its own scope, so undo them on a failure
        for place_feed, run_scope in zip(feeds, scopes):
            out = executor.run(compute, feed=place_feed, fetch_list=early + grads,
                               scope=run_scope, return_numpy=True)
            results.append(out[:len(early)])
            got = out[len(early):]
            summed = got if not summed else [a + b for a, b in zip(summed, got)]
        inv = 1.0 / places
        grad_feed = {n: (g * g.dtype.type(inv)).astype(g.dtype, copy=False)
                     for n, g in zip(grads, summed)}
        late_values = executor.run(apply, feed=grad_feed, fetch_list=late, scope=scope,
                                   return_numpy=True) if apply_block.ops else []
    except BaseException:
        _restore(saved)
        for gen, state in streams:      # the dropout streams of the places that ran
            gen.bit_generator.state = state
        raise
    by_name = dict(zip(late, late_values))
    merged: List[Any] = []
    for i, n in enumerate(early):
        per_place = [r[i] for r in results]
        merged.append(np.concatenate([np.atleast_1d(v) for v in per_place])
                      if return_merged else per_place)
    by_name.update(zip(early, merged))
    values = [by_name[n] for n in fetch_names]
    if not return_numpy:
        values = [LoDTensor(v) if isinstance(v, np.ndarray) else v for v in values]
    return values


def _place_scope(compiled: Any, scope: Scope, k: int, writes: Sequence[str]) -> Scope:
    """Place k's scope (k >= 1): a child of ``scope`` that reads the parameters from it and
    keeps its own copy of the state the forward pass writes (batch-norm statistics) and its own
    random streams, as a fluid device does; made once per (scope, place)."""
    per_scope = compiled._place_scopes.setdefault(scope, {})
    place = per_scope.get(k)
    if place is None:
        place = per_scope[k] = Scope(scope)
        for n in writes:
            held = scope.find_var(n)
            if held is not None and held.is_initialized():
                place.var(n).set(np.array(held.get_tensor()))
    return place


def _snapshot(scopes: Sequence[Scope], names: Sequence[str]) -> List[Tuple[Any, Any, Any]]:
    """The arrays (and LoD) the compute runs may replace, per place scope: references, not
    copies -- a run commits new arrays to the scope, it never writes the old ones."""
    out = []
    for sc in scopes:
        for n in names:
            holder = sc.find_var(n)
            if holder is not None:
                out.append((holder, holder.get_array(), holder._tensor._lod))
    return out


def _stream_states(executor: Any, scopes: Sequence[Scope]) -> List[Tuple[Any, Any]]:
    """The state of every random stream the executor keeps for plans on ``scopes`` (the
    executor's own per-(scope, plan) records)."""
    out = []
    for sc in scopes:
        for bound in list(executor._bound.get(sc, {}).values()):
            out.extend((g, g.bit_generator.state) for g in bound.streams)
    return out


def _restore(saved: Sequence[Tuple[Any, Any, Any]]) -> None:
    for holder, array, lod in saved:
        holder.set_array(array)
        holder._tensor._lod = lod


def _persistables_written(program: Program) -> List[str]:
    block = program.global_block()
    out = []
    for op in block.ops:
        for n in op.output_arg_names:
            var = block._find_var_recursive(n)
            if var is not None and var.persistable and n not in out:
                out.append(n)
    return out
