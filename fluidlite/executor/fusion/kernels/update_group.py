"""``fused(<update>)`` / ``fused(elementwise_mul+<update>)``: one optimizer update op (an
``ops.inplace.Update`` with an ``update_in_place``) for many parameters, in place where allowed.

Each parameter and its accumulators (the op's ``state_slots``) are written in their own buffers
by the op's ``update_in_place``: the same operations as the unfused kernel, chunked through
per-thread scratch buffers (reserved first, ``in_place_scratch``). Members that cannot be
updated in place (a fed name, a read-only or non-contiguous buffer, a view, a shape or dtype
mismatch, a parameter under ``inplace_min`` elements, an input the op's ``in_place_needs``
names missing) are computed out of place first, before any in-place write, so an error there
changes nothing. An op declaring ``plain_descent`` (sgd) has a leaner path: ``p -= c * g`` with
``c = lr * scale`` rounded once, which changes the update by at most one float32 rounding of
``lr * scale * G`` against the unfused ops (two passes over G instead of three).

A group with ``decays`` (issue 31) stands for fluid's L2 decay ops too: each member's update
sees ``Grad * scale + Param * coeff``, made chunk by chunk (``inplace.L2_DECAY``) from the
Param the chunk has before its update -- the unfused ``scale`` and ``sum``, bit for bit -- and
out of place through those ops' own kernels.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Set

import numpy as np

from ....core import registry
from ....core.selected_rows import SelectedRows
from ....ops import inplace
from ..matcher import FusedDef
from .scale import grad_scale, lr_times_scale, scaled

SMALL = 1 << 20       # plain descent: up to this size one temporary beats scratch chunks (measured)
# below this many elements an update is cheaper out of place (the unfused ops: no scratch or
# group bookkeeping per call, hot fresh temporaries); measured in whole training steps of
# momentum/adam: out of place wins at 4096 elements, in place from ~10^5 (2x for adam).
# plain descent keeps every parameter in its group (its group kernel is leaner than separate ops)
INPLACE_MIN = 1 << 14


class UpdateGroup(FusedDef):
    """One optimizer update op for many parameters, in place where allowed (module docstring).

    ``inplace[k]``: member k may be written in place (the plan proved its buffers are the
    scope's own and not fed); ``skip_src`` (issue 13): with a ``Skip`` mask of 1 the group writes
    nothing and each output slot returns the input slot it names."""

    writes_in_place = True

    def __init__(self, op_type: str, in_slots: Sequence[str], out_slots: Sequence[str],
                 attrs: Sequence[Dict[str, Any]], inplace: Sequence[bool], scaled: bool,
                 skip_src: Optional[Dict[str, str]] = None,
                 inplace_min: int = INPLACE_MIN,
                 decays: Optional[Sequence[float]] = None) -> None:
        name = "+".join((["elementwise_mul"] if scaled else []) +
                        (["l2_decay"] if decays is not None else []) + [op_type])
        name = f"fused({name})"
        super().__init__(name, [s + "*" for s in in_slots] + (["Scale"] if scaled else []) +
                         (["Skip"] if skip_src else []),     # issue 13: see guard_skip
                         [s + "*" for s in out_slots])
        self.skip_cols = {o: list(in_slots).index(i) for o, i in (skip_src or {}).items()}
        self.update = registry.get_op_def(op_type)
        self.slot_names = tuple(in_slots)
        self.attrs_list = [dict(a) for a in attrs]
        self.inplace = [ok and all(not a.get(attr, False) or slot in in_slots   # forward raises:
                                   for attr, slot in self.update.in_place_needs)   # let it
                        for ok, a in zip(inplace, self.attrs_list)]
        self.all_inplace = all(self.inplace)
        self.scaled = scaled
        # issue 31: per member, the coefficient of the L2 decay folded in (fluid's ``scale`` of
        # Param and ``sum`` with the gradient): Grad is the gradient before the decay
        self.decays = list(decays) if decays is not None else None
        self.inplace_min = inplace_min
        self.plain = self.update.plain_descent
        states = self.update.state_slots
        self.state_out = {i: o for i, o in states if i in in_slots}
        self.all_out = tuple(out_slots)
        self.grad_idx = self.slot_names.index("Grad")
        pos = {n: j for j, n in enumerate(self.slot_names)}
        self.arg_idx = [pos.get(sl.name) for sl in self.update.in_slots]   # forward's order
        self.arg_grad = [sl.name for sl in self.update.in_slots].index("Grad")
        self.write_idx = (0,) + tuple(self.slot_names.index(i) for i, _ in states
                                      if i in in_slots)
        assert self.slot_names[0] == "Param"

    def keep_out_of_place(self) -> None:
        self.inplace = [False] * len(self.inplace)
        self.all_inplace = False

    def forward(self, *cols: Any) -> Dict[str, List[np.ndarray]]:
        k = len(self.slot_names)
        if self.skip_cols and int(np.asarray(cols[-1]).reshape(-1)[0]) == 1:   # issue 13
            return {o: list(cols[j]) for o, j in self.skip_cols.items()}
        scale = cols[k] if self.scaled else None
        if self.plain:
            done = self._descend(cols[0], cols[1], cols[2], scale)
            if done is not None:
                return {"ParamOut": done}
        rows = list(zip(*cols[:k]))
        fast = self._fast_rows(rows)
        results: List[Any] = [None] * len(rows)
        names_ = self.slot_names
        scales: Dict[Any, Any] = {}                # the clip factor per dtype, once per call
        decays = self.decays or [None] * len(rows)
        for i, row in enumerate(rows):             # out of place first: errors before effects
            if not fast[i]:
                results[i] = self._out_of_place(row, scale, scales, self.attrs_list[i],
                                                decays[i])
        for i, row in enumerate(rows):
            if fast[i]:
                ins = dict(zip(names_, row))
                if decays[i] is not None:
                    ins[inplace.L2_DECAY] = np.asarray(row[0].dtype.type(decays[i]))
                results[i] = self._in_place(ins, scale, scales, self.attrs_list[i])
        return {o: [r[o] for r in results] for o in self.all_out}

    def _fast_rows(self, rows: List[Sequence[Any]]) -> List[bool]:
        """Which members run in place this call (scratch reserved for them)."""
        fast = [ok and row[0].size >= self.inplace_min and self._can_write(row)
                and (self.decays is None or type(row[self.grad_idx]) is not SelectedRows)
                for row, ok in zip(rows, self.inplace)]
        n_fast = sum(fast)
        if n_fast:
            self._reserve({row[0].dtype for row, ok in zip(rows, fast) if ok})
        ids = [id(row[j]) for row, ok in zip(rows, fast) if ok for j in self.write_idx
               if row[j] is not None] if n_fast > 1 else []
        if len(set(ids)) != len(ids):              # one buffer must never be written twice
            seen: Set[int] = set()
            for i, row in enumerate(rows):
                if fast[i]:
                    mine = [id(row[j]) for j in self.write_idx if row[j] is not None]
                    fast[i] = seen.isdisjoint(mine)
                    seen.update(mine)
        return fast

    def _descend(self, params: List[np.ndarray], lrs: List[np.ndarray], grads: List[np.ndarray],
                 scale: Optional[np.ndarray]) -> Optional[List[np.ndarray]]:
        """All-in-place plain descent without the generic machinery (small models pay per
        call): p -= c * g with c = lr, or lr * scale rounded once (see ``lr_times_scale``).
        ``None`` (nothing written) when some parameter cannot be updated in place."""
        # one pass of checks (this kernel runs every step of small models: its Python
        # overhead is most of its cost there)
        if not self.all_inplace:
            return None
        big = False
        for p, g in zip(params, grads):
            flags = p.flags
            dt = p.dtype
            if (p.base is not None or not flags.c_contiguous or not flags.writeable
                    or type(g) is SelectedRows or g.shape != p.shape or g.dtype != dt
                    or dt.kind != "f"):
                return None
            if p.size > SMALL:
                big = True
        if len(set(map(id, params))) != len(params):
            return None
        if big:
            self._reserve({p.dtype for p in params})
        coef: Dict[Any, Any] = {}
        last_lr = last_dt = c = None    # usually one lr and one dtype: skip the dict lookup
        for p, lr, g in zip(params, lrs, grads):
            dt = p.dtype
            if lr is not last_lr or dt is not last_dt:
                key = (id(lr), dt)
                c = coef.get(key)
                if c is None:
                    if scale is None:
                        c = lr.reshape(())
                    else:            # a 0-d array: cheaper per ufunc call than a scalar
                        c = np.asarray(lr_times_scale(lr, grad_scale(scale, dt), dt))
                    coef[key] = c
                last_lr, last_dt = lr, dt
            if p.size <= SMALL:         # a fresh temporary is hot in cache: cheaper than scratch
                np.subtract(p, np.multiply(g, c, dtype=inplace.wide(g, c)), out=p)
            else:
                self.update.update_in_place({"Param": p, "Grad": g, "LearningRate": c}, None,
                                            {})
        return params

    def _reserve(self, dtypes: Set[np.dtype]) -> None:
        """Allocate this thread's scratch before the first in-place write (a MemoryError then
        changes nothing): what the update op declares it takes (``in_place_scratch``)."""
        for dt in dtypes:
            for want, count, tag in self.update.in_place_scratch:
                inplace.reserve(dt if want is None else want, count, tag)
            if self.decays is not None:
                for part in range(inplace.PARTS):
                    inplace.decay_scratch(dt, part)

    def _can_write(self, row: Sequence[Any]) -> bool:
        p, g = row[0], row[self.grad_idx]
        if g.shape != p.shape or g.dtype != p.dtype or p.dtype.kind != "f":
            return False
        for j in self.write_idx:
            a = row[j]
            if a is None:
                continue
            flags = a.flags
            if (a.base is not None or not flags.c_contiguous or not flags.writeable
                    or a.shape != p.shape or a.dtype != p.dtype):
                return False
        return True

    def _out_of_place(self, row: Sequence[Any], scale: Optional[np.ndarray],
                      cache: Dict[Any, Any], attrs: Dict[str, Any],
                      decay: Optional[float] = None) -> Dict[str, np.ndarray]:
        """The unfused kernels on ``Grad * scale`` (plus the L2 decay term of ``decay``: the
        ``scale`` and ``sum`` ops' own kernels): new arrays, nothing written."""
        args = [row[j] if j is not None else None for j in self.arg_idx]
        g = args[self.arg_grad]
        if scale is not None:
            if type(g) is SelectedRows:
                g = g * grad_scale(scale, g.dtype)
            else:
                s = cache.get(g.dtype)
                if s is None:
                    s = cache[g.dtype] = grad_scale(scale, g.dtype)
                g = scaled(g, s)
        if decay is not None:
            term = registry.get_op_def("scale").forward(row[0], scale=decay)["Out"]
            g = registry.get_op_def("sum").forward([g, term])["Out"]
        args[self.arg_grad] = g
        if type(g) is SelectedRows:                 # a sparse gradient (ops/inplace.py)
            names_ = [sl.name for sl in self.update.in_slots]
            return self.update.sparse_forward(dict(zip(names_, args)), attrs)
        return self.update.forward(*args, **attrs)

    def _in_place(self, ins: Dict[str, np.ndarray], scale: Optional[np.ndarray],
                  cache: Dict[Any, Any], attrs: Dict[str, Any]) -> Dict[str, np.ndarray]:
        p = ins["Param"]
        s = None
        if scale is not None:
            s = cache.get(p.dtype)
            if s is None:
                s = cache[p.dtype] = grad_scale(scale, p.dtype)
        if s is not None and self.plain:      # p -= (lr * s) * g: two passes over g
            lr = ins["LearningRate"]
            key = (id(lr), p.dtype)
            c = cache.get(key)
            if c is None:
                c = cache[key] = lr_times_scale(lr, s, p.dtype)
            ins["LearningRate"] = c
            s = None
        if type(ins["Grad"]) is SelectedRows:       # its rows only (ops/inplace.py)
            out = self.update.sparse_in_place(ins, s, attrs)
        else:
            out = self.update.update_in_place(ins, s, attrs)
        out["ParamOut"] = p
        for i, o in self.state_out.items():
            out[o] = ins.get(i)
        return out
