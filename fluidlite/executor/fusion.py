"""Plan-time fusion: cheaper kernels for common op sequences; the Program is never changed.

``fuse(ops, block, fetch_names, feed_names)`` returns the plan's op list with fusable sequences
replaced by ``FusedOp``s, each one kernel call with the inputs and outputs of the ops it covers:

* **All-reduce + scale** (the data-parallel averaging): ``c_allreduce_sum`` or
  ``c_allreduce_wait`` followed by ``scale(1/nranks)`` of the same gradient becomes
  ``fused(c_allreduce_*+scale)``, scaling the reduction's own result buffer in place. The
  blocking sum reduces in the gradient's buffer itself (``MPI_IN_PLACE``) when the plan proves
  that buffer fresh and unread by anything else (``OpDef.fresh_outputs`` / ``passes_through``).
* **Global norm** (``GradientClipByGlobalNorm``): the N ``squared_l2_norm`` + ``sum`` + ``sqrt``
  [+ ``check_finite_norm``] + ``fill_constant`` + ``elementwise_max`` + ``elementwise_div``
  [+ ``cast``] chain becomes ``fused(global_norm)``. Each squared norm is the
  ``squared_l2_norm`` op's own kernel when its output is float64 (so fused and unfused agree
  bit for bit); a float32 chain is accumulated in float64 instead (overflow-safe, rounded to the
  chain's dtype at the end). The rest of the chain is the same IEEE operations on scalars.
* **Clip scale**: ``elementwise_mul(G, scale) -> G'`` whose only reader is an update op is folded
  into that update; other such multiplies (e.g. followed by a regularizer's ``sum``) become
  ``fused(clip_scale)``. When the clip's scale is float64 and cast to the gradient's dtype, the
  kernel multiplies by the cast value (what the unfused ops do), except when the scale is below
  the dtype's smallest normal number: then the product is formed in float64 and rounded once,
  so any finite gradient is clipped correctly.
* **Updates**: every optimizer update op (sgd, momentum, lars_momentum, adam, adamax, adagrad,
  decayed_adagrad, adadelta, rmsprop, ftrl, lamb) with the same type, slots and clip scale
  becomes one ``fused(<type>)`` / ``fused(elementwise_mul+<type>)`` call for all parameters,
  which writes each parameter and its accumulators in their own buffers
  (``update_in_place`` of each update op, ``ops/inplace.py``: the same operations as the unfused
  kernel, chunked through per-thread scratch buffers). Only ``sgd`` with a folded clip scale rounds
  differently: it forms ``lr * scale`` first (two passes over G instead of three), which
  changes the update by at most one float32 rounding of ``lr * scale * G``.

In-place writes happen only in the plan's *commit tail*: an update group is written in place
only when every step after it is an update group or a ``scale``/``increment`` op (what
Adamax's beta-power update and step counters are), all of which cannot fail on validated
shapes. Every op that can fail has run before, so a failing step leaves the scope untouched.
Within a group, members that cannot be updated in place (a fed name, a read-only or non-contiguous
buffer, a view, a shape or dtype mismatch) are computed out of place first, before any in-place
write, so an error there also changes nothing. Fed names are never written in place.

Kernels hold no Program, Block or Operator (only names, dtypes and attrs); scratch memory is
per thread (``ops.inplace.scratch``), so two threads may run one plan on different scopes.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple

import numpy as np

from ..core import registry, rewrite
from ..core.dtypes import to_numpy_dtype
from ..core.ir import Block, OpArgs, Operator
from ..core.registry import OpDef, Slot
from ..ops import inplace

_UPDATE_OPS = frozenset({"sgd", "momentum", "lars_momentum", "adam", "adamax", "adagrad",
                         "decayed_adagrad", "adadelta", "rmsprop", "ftrl", "lamb"})
_TAIL_OK = frozenset({"scale", "increment"})    # may follow in-place updates: cannot fail
# issue 13: the guard's commits (amp/guard.py; a 0/1 mask, validated shapes) cannot fail either
_TAIL_OK = _TAIL_OK | {"select_input"}
_SMALL = 1 << 20      # sgd: up to this size one temporary beats scratch chunks (measured)
# below this many elements an update is cheaper out of place (the unfused ops: no scratch or
# group bookkeeping per call, hot fresh temporaries); measured in whole training steps of
# momentum/adam: out of place wins at 4096 elements, in place from ~10^5 (2x for adam).
# sgd keeps every parameter in its group (its group kernel is leaner than separate ops)
_INPLACE_MIN = 1 << 14


class FusedOp(OpArgs):
    """Stands in for the ops it covers inside a Plan (duck-types ``Operator`` for the plan)."""

    def __init__(self, opdef: "OpDef", ops: Sequence[Any], inputs: Dict[str, List[str]],
                 outputs: Dict[str, List[str]]) -> None:
        self.opdef, self.covered = opdef, [c for o in ops for c in getattr(o, "covered", [o])]
        self.type = opdef.type
        self.inputs, self.outputs = inputs, outputs
        self.attrs = dict(self.covered[-1].attrs)


class _Member(OpArgs):
    """An update op (or ``elementwise_mul`` + update) waiting to be grouped."""

    def __init__(self, op: Operator, covered: List[Any], inputs: Dict[str, List[str]],
                 cast_scale: bool) -> None:
        self.op, self.covered, self.type = op, covered, op.type
        self.inputs, self.outputs, self.attrs = inputs, dict(op.outputs), op.attrs
        self.cast_scale = cast_scale
        # issue 13 (fold_skip): the select_input ops folded into this member, and for each
        # output slot the input slot whose value it keeps when the step is skipped
        self.selects: List[Any] = []
        self.skip_src: Dict[str, str] = {}


class _FusedDef(OpDef):
    """A plan-time kernel: slots per instance, no attrs (everything is bound at plan time)."""
    attr_defaults: Dict[str, Any] = {}

    def __init__(self, type_: str, inputs: Sequence[str], outputs: Sequence[str]) -> None:
        self.type = type_
        self.in_slots = tuple(Slot.parse(s) for s in inputs)
        self.out_slots = tuple(Slot.parse(s) for s in outputs)


# -- the clip's scale ---------------------------------------------------------------------------
def grad_scale(s: np.ndarray, dtype: np.dtype) -> Any:
    """The factor to multiply a ``dtype`` gradient by: ``s`` itself when it already has that
    dtype; the cast value (as the unfused ``cast``) when that is a normal number or zero;
    otherwise ``s`` in float64, so the product is formed in float64 and rounded once."""
    if s.dtype == dtype:
        return s.reshape(-1)[0]
    v = s.item()
    if dtype.kind == "f" and 0 < abs(v) < _tiny(dtype):
        return np.float64(v)
    return dtype.type(v)


_TINY: Dict[np.dtype, float] = {}


def _tiny(dtype: np.dtype) -> float:
    t = _TINY.get(dtype)
    if t is None:
        t = _TINY[dtype] = float(np.finfo(dtype).tiny)
    return t


def _scaled(g: np.ndarray, s: Any) -> np.ndarray:
    if s.dtype == g.dtype:
        return g * s
    return np.multiply(g, s, dtype=np.promote_types(g.dtype, s.dtype)).astype(g.dtype, copy=False)


class _ClipScale(_FusedDef):
    """Out = X * Scale (see ``grad_scale``): an ``elementwise_mul`` by the clip's scale."""

    def __init__(self) -> None:
        super().__init__("fused(clip_scale)", ("X", "Scale"), ("Out",))

    def lower(self, in_specs: Sequence[Any], attrs: Dict[str, Any]) -> Callable:
        return lambda x, s: _scaled(x, grad_scale(s, x.dtype))

    def forward(self, X: np.ndarray, Scale: np.ndarray) -> Dict[str, np.ndarray]:
        return {"Out": self.lower((), {})(X, Scale)}


# -- global norm --------------------------------------------------------------------------------
class _GlobalNorm(_FusedDef):
    """Norm = sqrt(sum_i squared_l2_norm(X_i)); Scale = c / max(c, Norm); ScaleCast = Scale cast
    to the gradients' dtype. Raises like ``check_finite_norm`` when asked to.

    ``square`` holds the ``squared_l2_norm`` kernels of a float64 chain (then every step below
    is the unfused ops' IEEE double arithmetic, on Python floats); ``None`` for a float32 chain,
    which is computed in float64 here and rounded to ``dtype`` at the end."""

    def __init__(self, square: Optional[List[Callable]], dtype: np.dtype, clip_norm: float,
                 cast_to: Optional[np.dtype], check: Optional[List[str]],
                 outputs: Sequence[str]) -> None:
        super().__init__("fused(global_norm)", ("X*",), outputs)
        from ..ops.clip import _squared_l2_norm
        if square is not None and all(f is _squared_l2_norm for f in square):
            square = None       # that kernel is sum_squares: the same floats, one errstate
        self.square, self.dtype, self.cast_to, self.check = square, dtype, cast_to, check
        self.limit = float(dtype.type(clip_norm))
        self.emit = tuple(outputs)

    def values(self, X: Sequence[np.ndarray]) -> Tuple[float, float]:
        """(global norm, scale) as Python floats (exact in the chain's float64)."""
        if self.square is not None:
            squares = [f(x) for f, x in zip(self.square, X)]
            terms = [sq.item() for sq in squares]
        else:       # Python floats; arrays only for check_finite_norm's message
            terms = inplace.sum_squares_many(X)
        total = terms[0]
        for sq in terms[1:]:        # left to right, as the unfused sum op
            total += sq
        norm = math.sqrt(total)
        if self.check is not None and not math.isfinite(norm):
            if self.square is None:
                squares = [np.array([t]) for t in terms]
            registry.get_op_def("check_finite_norm").forward(
                np.array([norm], self.dtype), squares, grad_names=self.check)
        limit = self.limit
        scale = limit / (norm if norm > limit or norm != norm else limit)   # NaN propagates
        return norm, scale

    def _array(self, slot: str, norm: float, scale: float) -> np.ndarray:
        if slot == "Norm":
            return np.array([norm], self.dtype)
        return np.array([scale], self.dtype if slot == "Scale" else self.cast_to)

    def forward(self, X: Sequence[np.ndarray]) -> Dict[str, np.ndarray]:
        norm, scale = self.values(X)
        return {k: self._array(k, norm, scale) for k in self.emit}

    def lower(self, in_specs: Sequence[Any], attrs: Dict[str, Any]) -> Optional[Callable]:
        if len(self.emit) != 1:         # both outputs: forward's dict
            return None
        key = self.emit[0]
        dtype = {"Norm": self.dtype, "Scale": self.dtype}.get(key, self.cast_to)
        pick = 0 if key == "Norm" else 1
        return lambda xs: np.array([self.values(xs)[pick]], dtype)


# -- all-reduce + 1/nranks ----------------------------------------------------------------------
class _ReduceScale(_FusedDef):
    """Out = scale * allreduce_sum(X) (``c_allreduce_sum`` + ``scale``), or scale * the result
    of a ``c_allreduce_wait`` Request: the data-parallel pass's averaging of a gradient. The
    reduction's result is a fresh buffer of the communicator's, so it is scaled in place: one
    pass over the gradient instead of a copy (the same float multiply as the ``scale`` op).
    ``inplace`` (the plan proved X -- for the wait, the X its ``c_allreduce_start`` took -- a
    fresh buffer nothing else reads: ``_Fuser._owned``): the reduction itself runs in X's
    buffer (``MPI_IN_PLACE``; for a request, when the shared-memory window reduces it at the
    wait). Otherwise,
    alone (one process) the reduction returns X itself, which is then scaled out of place."""

    def __init__(self, wait: bool, ring_id: int, scale: float, inplace: bool = False) -> None:
        super().__init__("fused(c_allreduce_%s+scale)" % ("wait" if wait else "sum"),
                         ("Request",) if wait else ("X",), ("Out",))
        self.wait, self.ring_id, self.scale, self.inplace = wait, ring_id, scale, inplace

    def lower(self, in_specs: Sequence[Any], attrs: Dict[str, Any]) -> Callable:
        from ..distributed import comm        # run-time import: executor/ is below distributed/
        ring, scale, wait, inplace = self.ring_id, self.scale, self.wait, self.inplace

        def run(x: Any) -> np.ndarray:
            if wait:
                owned = not x.done                 # in flight: its result buffer is its own
                if owned and scale != 1.0:
                    return x.wait(scale=x.x.dtype.type(scale), inplace=inplace)
                y = x.wait(inplace=inplace)
            elif scale != 1.0:              # the reduction scales its own result buffer
                return comm.get(ring).allreduce(x, inplace=inplace, scale=x.dtype.type(scale))
            else:
                y = comm.get(ring).allreduce(x, inplace=inplace)
                owned = inplace or y is not x
            s = y.dtype.type(scale)
            if scale == 1.0:
                return y if owned else y.copy()
            return np.multiply(y, s, out=y) if owned else y * s
        return run

    def forward(self, **ins: Any) -> Dict[str, np.ndarray]:
        return {"Out": self.lower((), {})(ins["Request" if self.wait else "X"])}


# -- update groups ------------------------------------------------------------------------------
class _UpdateGroup(_FusedDef):
    """One optimizer update op for many parameters, in place where allowed (module docstring)."""

    def __init__(self, op_type: str, in_slots: Sequence[str], out_slots: Sequence[str],
                 attrs: Sequence[Dict[str, Any]], inplace: Sequence[bool], scaled: bool,
                 skip_src: Optional[Dict[str, str]] = None) -> None:
        name = f"fused(elementwise_mul+{op_type})" if scaled else f"fused({op_type})"
        super().__init__(name, [s + "*" for s in in_slots] + (["Scale"] if scaled else []) +
                         (["Skip"] if skip_src else []),     # issue 13: see fold_skip
                         [s + "*" for s in out_slots])
        # issue 13: with a Skip mask of 1 the group writes nothing: each output slot gets the
        # input column it would have updated (``skip_src``: output slot -> input slot)
        self.skip_cols = {o: list(in_slots).index(i) for o, i in (skip_src or {}).items()}
        self.update = registry.get_op_def(op_type)
        self.slot_names = tuple(in_slots)
        self.out_names = tuple(out_slots)
        self.attrs_list = [dict(a) for a in attrs]
        self.inplace = list(inplace)
        if op_type == "rmsprop" and "MeanGrad" not in in_slots:   # forward raises: let it
            self.inplace = [ok and not a.get("centered", False)
                            for ok, a in zip(self.inplace, self.attrs_list)]
        self.all_inplace = all(self.inplace)
        self.scaled = scaled
        self.fold_lr = self.sgd = op_type == "sgd"
        states = self.update.state_slots
        self.state_in = tuple(i for i, _ in states if i in in_slots)
        self.state_out = {i: o for i, o in states if i in in_slots}
        self.all_out = tuple(out_slots)
        self.grad_idx = self.slot_names.index("Grad")
        pos = {n: j for j, n in enumerate(self.slot_names)}
        self.arg_idx = [pos.get(sl.name) for sl in self.update.in_slots]   # forward's order
        self.arg_grad = [sl.name for sl in self.update.in_slots].index("Grad")
        self.write_idx = (0,) + tuple(self.slot_names.index(s) for s in self.state_in)
        assert self.slot_names[0] == "Param"

    def forward(self, *cols: Any) -> Dict[str, List[np.ndarray]]:
        k = len(self.slot_names)
        if self.skip_cols and int(np.asarray(cols[-1]).reshape(-1)[0]) == 1:   # issue 13
            return {o: list(cols[j]) for o, j in self.skip_cols.items()}
        scale = cols[k] if self.scaled else None
        if self.sgd:
            done = self._sgd(cols[0], cols[1], cols[2], scale)
            if done is not None:
                return {"ParamOut": done}
        rows = list(zip(*cols[:k]))
        fast = [ok and row[0].size >= _INPLACE_MIN and self._can_write(row)
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
        results: List[Any] = [None] * len(rows)
        names_ = self.slot_names
        scales: Dict[Any, Any] = {}                # the clip factor per dtype, once per call
        for i, row in enumerate(rows):             # out of place first: errors before effects
            if not fast[i]:
                results[i] = self._out_of_place(row, scale, scales, self.attrs_list[i])
        for i, row in enumerate(rows):
            if fast[i]:
                results[i] = self._in_place(dict(zip(names_, row)), scale, scales,
                                            self.attrs_list[i])
        return {o: [r[o] for r in results] for o in self.all_out}

    def _sgd(self, params: List[np.ndarray], lrs: List[np.ndarray], grads: List[np.ndarray],
             scale: Optional[np.ndarray]) -> Optional[List[np.ndarray]]:
        """All-in-place sgd without the generic machinery (small models pay per call):
        p -= c * g with c = lr, or lr * scale rounded once (see ``_lr_times_scale``).
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
                    or g.shape != p.shape or g.dtype != dt or dt.kind != "f"):
                return None
            if p.size > _SMALL:
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
                        c = np.asarray(_lr_times_scale(lr, grad_scale(scale, dt), dt))
                    coef[key] = c
                last_lr, last_dt = lr, dt
            if p.size <= _SMALL:        # a fresh temporary is hot in cache: cheaper than scratch
                np.subtract(p, np.multiply(g, c, dtype=inplace.wide(g, c)), out=p)
            else:
                self.update.update_in_place({"Param": p, "Grad": g, "LearningRate": c}, None,
                                            {})
        return params

    def _reserve(self, dtypes: Set[np.dtype]) -> None:
        """Allocate this thread's scratch before the first in-place write (a MemoryError then
        changes nothing)."""
        for dt in dtypes:
            inplace.scratch(dt, 3)
            if self.update.type in ("lars_momentum", "lamb"):
                inplace.scratch(np.float64, 2, "sum_squares")
                inplace.scratch(dt, 2, "sum_squares")
        if self.update.type == "ftrl":
            inplace.scratch(np.bool_, 1)

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
                      cache: Dict[Any, Any], attrs: Dict[str, Any]) -> Dict[str, np.ndarray]:
        """The unfused kernel on ``Grad * scale``: new arrays, nothing written."""
        args = [row[j] if j is not None else None for j in self.arg_idx]
        if scale is not None:
            g = args[self.arg_grad]
            s = cache.get(g.dtype)
            if s is None:
                s = cache[g.dtype] = grad_scale(scale, g.dtype)
            args[self.arg_grad] = _scaled(g, s)
        return self.update.forward(*args, **attrs)

    def _in_place(self, ins: Dict[str, np.ndarray], scale: Optional[np.ndarray],
                  cache: Dict[Any, Any], attrs: Dict[str, Any]) -> Dict[str, np.ndarray]:
        p = ins["Param"]
        s = None
        if scale is not None:
            s = cache.get(p.dtype)
            if s is None:
                s = cache[p.dtype] = grad_scale(scale, p.dtype)
        if s is not None and self.fold_lr:       # sgd: p -= (lr * s) * g, two passes over g
            lr = ins["LearningRate"]
            key = (id(lr), p.dtype)
            c = cache.get(key)
            if c is None:
                c = cache[key] = _lr_times_scale(lr, s, p.dtype)
            ins["LearningRate"] = c
            s = None
        out = self.update.update_in_place(ins, s, attrs)
        out["ParamOut"] = p
        for i, o in self.state_out.items():
            out[o] = ins.get(i)
        return out


def _lr_times_scale(lr: np.ndarray, s: Any, dtype: np.dtype) -> Any:
    """``lr * s`` rounded once to ``dtype`` (kept in float64 when that is subnormal)."""
    c = lr.item() * float(s)
    c32 = dtype.type(c)
    f = float(c32)
    if f == 0 or not math.isfinite(f) or abs(f) >= _tiny(dtype):
        return c32
    return np.float64(c)


# -- the pass -----------------------------------------------------------------------------------
def fuse(ops: Sequence[Operator], block: Block, fetch_names: Iterable[str] = (),
         feed_names: Optional[Iterable[str]] = None) -> List[Any]:
    """Return the plan's op list with fusable sequences replaced by ``FusedOp``s.

    ``fetch_names`` stay materialised; ``feed_names`` are never updated in place. (Called as
    ``fuse(ops, block, protected)`` by older plans: ``protected`` is then both.)
    """
    fetch = set(fetch_names)
    feed = set(fetch) if feed_names is None else set(feed_names)
    f = _Fuser(list(ops), block, fetch, feed)
    f.fuse_reduce_scale()
    f.fold_clip_scale()
    f.fuse_global_norm()
    f.fold_skip()                   # issue 13: updates committed by the guard's selects
    f.group_updates()
    f.mark_tail()
    return f.ops


class _Fuser:
    def __init__(self, ops: List[Any], block: Block, fetch: Set[str], feed: Set[str]) -> None:
        self.ops, self.block, self.fetch, self.feed = ops, block, fetch, feed

    # helpers
    def var(self, name: str) -> Any:
        return self.block._find_var_recursive(name)

    def persistable(self, name: str) -> bool:
        v = self.var(name)
        return v is None or bool(v.persistable)

    def dtype(self, name: str) -> Optional[np.dtype]:
        v = self.var(name)
        if v is None or v.dtype is None:
            return None
        try:
            return np.dtype(to_numpy_dtype(v.dtype))
        except (KeyError, TypeError, ValueError):
            return None

    def private(self, name: str) -> bool:
        """A temporary nobody outside the plan can see."""
        return name not in self.fetch and name not in self.feed and not self.persistable(name)

    def pre_cast(self, y: str, x_dtype: Optional[np.dtype],
                 uses: rewrite.Uses) -> Tuple[str, bool]:
        """The clip scale behind ``y``: the float64 input of a ``cast`` to ``x_dtype``."""
        j = uses.producer(y)
        op = self.ops[j] if j is not None else None
        if (op is not None and getattr(op, "type", None) == "cast" and x_dtype is not None
                and self.dtype(y) == x_dtype and self.dtype(op.inputs["X"][0]) == np.float64):
            return op.inputs["X"][0], True
        return y, False

    # 0. (issue 17) the data-parallel averaging: all-reduce then scale, in place
    def _owned(self, x: str, i: int, last: int, allowed: Set[int]) -> bool:
        """Whether op ``i`` may reduce ``x`` in its own buffer: ``x`` is a private temporary
        whose last writer before ``i`` declares that output fresh (``OpDef.fresh_outputs``: a
        new buffer aliasing nothing), and no op from that writer to ``last`` reads it except
        the ops in ``allowed``."""
        if not self.private(x):
            return False
        ops = self.ops
        allowed = set(allowed)
        j = i
        while True:
            j = next((k for k in range(j - 1, -1, -1) if x in ops[k].output_arg_names), None)
            if j is None or isinstance(ops[j], (FusedOp, _Member)):
                return False
            try:
                opdef = registry.get_op_def(ops[j].type)
            except (KeyError, ValueError):
                return False
            slots = [s for s, names_ in ops[j].outputs.items() if x in names_]
            through = [opdef.passes_through.get(s) for s in slots]
            if not slots or not all(t is not None and ops[j].outputs[s] == ops[j].inputs.get(t)
                                    for s, t in zip(slots, through)):
                break
            allowed.add(j)          # returns x's own array under the same name: look further
        fresh = opdef.fresh_outputs
        if not slots or any(s not in fresh for s in slots) or \
                sum(n == x for n in ops[j].output_arg_names) != 1:
            return False
        return not any(x in ops[k].input_arg_names
                       for k in range(j + 1, last + 1) if k not in allowed)

    def fuse_reduce_scale(self) -> None:
        out: List[Any] = []
        ops = self.ops
        i = 0
        while i < len(ops):
            op, nxt = ops[i], ops[i + 1] if i + 1 < len(ops) else None
            if (op.type in ("c_allreduce_sum", "c_allreduce_wait") and nxt is not None
                    and nxt.type == "scale" and not nxt.inputs.get("ScaleTensor")
                    and not nxt.attrs.get("bias", 0.0)):
                r, o = op.outputs["Out"][0], nxt.outputs["Out"][0]
                dt = self.dtype(r)
                # the unscaled sum must be dead after the scale: overwritten by it, or a
                # temporary nobody else reads
                dead = o == r or (self.private(r) and
                                  not any(r in later.input_arg_names for later in ops[i + 2:]))
                if (nxt.inputs["X"] == [r] and dead and dt is not None and dt.kind == "f"
                        and self.dtype(o) == dt):
                    wait = op.type == "c_allreduce_wait"
                    slot = "Request" if wait else "X"
                    x = op.inputs[slot][0]
                    # in place: the blocking all-reduce (MPI_IN_PLACE or the shared-memory
                    # window), and a request the shared-memory window reduces at its wait
                    # (``AllReduceRequest.wait``); never Open MPI's non-blocking in-place
                    # all-reduce (measured on config D: slower than into a new buffer)
                    if wait:
                        k = next((j for j in range(i - 1, -1, -1)
                                  if x in ops[j].output_arg_names), None)
                        start = ops[k] if k is not None else None
                        inplace = (start is not None and start.type == "c_allreduce_start"
                                   and start.outputs["Request"] == [x]
                                   and start.inputs["X"] == [r]
                                   and self._owned(r, k, i, {k}))
                    else:
                        inplace = r == x and self._owned(x, i, i, {i})
                    kernel = _ReduceScale(wait, op.attrs.get("ring_id", 0),
                                          float(nxt.attrs.get("scale", 1.0)), inplace)
                    out.append(FusedOp(kernel, [op, nxt], {slot: list(op.inputs[slot])},
                                       {"Out": list(nxt.outputs["Out"])}))
                    i += 2
                    continue
            out.append(op)
            i += 1
        self.ops = out

    # 1. clip multiplies folded into updates (or made ``fused(clip_scale)``)
    def fold_clip_scale(self) -> None:
        uses = rewrite.Uses(self.ops)
        drop: Set[int] = set()
        for i, op in enumerate(self.ops):
            if op.type not in _UPDATE_OPS:
                continue
            g = op.inputs.get("Grad", [None])[0]
            j = uses.producer(g)
            mul = self.ops[j] if j is not None and j < i else None
            inputs = {k: list(v) for k, v in op.inputs.items()}
            covered: List[Any] = [op]
            cast = False
            if (mul is not None and mul.type == "elementwise_mul" and uses.reader_count(g) == 1
                    and self.private(g) and self._scalar_scale(mul)
                    and not self._written_between(mul.input_arg_names, j, i)):
                scale, cast = self.pre_cast(mul.inputs["Y"][0], self.dtype(g), uses)
                inputs["Grad"] = list(mul.inputs["X"])
                inputs["Scale"] = [scale]
                covered = [mul, op]
                drop.add(j)
            self.ops[i] = _Member(op, covered, inputs, cast)
        for j, op in enumerate(self.ops):          # multiplies that stay: tiny-scale safe
            if (j not in drop and op.type == "elementwise_mul" and self._scalar_scale(op)):
                x = op.inputs["X"][0]
                scale, cast = self.pre_cast(op.inputs["Y"][0], self.dtype(x), uses)
                if cast:
                    self.ops[j] = FusedOp(_ClipScale(), [op], {"X": [x], "Scale": [scale]},
                                          dict(op.outputs))
        self.ops = [op for k, op in enumerate(self.ops) if k not in drop]
        readers = rewrite.Uses(self.ops).readers
        self.ops = [op for op in self.ops if not (     # casts nobody reads any more
            op.type == "cast" and all(self.private(n) and n not in readers
                                      for n in op.output_arg_names))]

    def _scalar_scale(self, mul: Any) -> bool:
        """``elementwise_mul(X, Y) -> Out`` with a one-element Y of X's dtype (and Out's): a pure
        rescaling of X."""
        y, x = self.var(mul.inputs["Y"][0]), self.var(mul.inputs["X"][0])
        dt = self.dtype(mul.inputs["X"][0])
        return (y is not None and x is not None and tuple(y.shape) == (1,)
                and mul.attrs.get("axis", -1) in (-1, len(x.shape) - 1, 0)
                and dt is not None and dt.kind == "f" and self.dtype(mul.inputs["Y"][0]) == dt
                and self.dtype(mul.outputs["Out"][0]) == dt)

    def _kernel(self, op_type: str, x: str) -> Callable:
        """The plan's callable for a single-input, single-output ``op_type`` reading ``x``."""
        opdef = registry.get_op_def(op_type)
        v = self.var(x)
        bound = opdef.bind([v.spec if v is not None else None], {}, frozenset({"Out"}))
        fn = bound.fn
        return fn if bound.single else (lambda a: fn(a)["Out"])

    def _written_between(self, names_: Iterable[str], a: int, b: int) -> bool:
        watch = set(names_)
        return any(watch.intersection(op.output_arg_names) for op in self.ops[a + 1:b])

    # 1b. (issue 13) the skip-on-overflow / gradient-merge guard (amp/guard.py) renames every
    # output of an update op to a temporary committed by ``select_input([tmp, S], Mask) -> S``
    # at the end of the block. When every output of a member is committed that way (each
    # temporary read only by its select, ``S`` the matching input, one mask computed before
    # the member, nothing else touching ``S`` in between), the member writes ``S`` itself and
    # its group returns the inputs unchanged when the mask is 1: in place again, selects gone.
    def fold_skip(self) -> None:
        uses = rewrite.Uses(self.ops)
        drop: Set[int] = set()
        for i, m in enumerate(self.ops):
            if not isinstance(m, _Member) or not m.outputs:
                continue
            found = self._skip_selects(i, m, uses)
            if found is None:
                continue
            outputs, src, sels, mask = found
            m.outputs, m.skip_src = outputs, src
            m.inputs = dict(m.inputs, Skip=[mask])
            m.selects = [self.ops[j] for j in sels]
            drop.update(sels)
        self.ops = [op for k, op in enumerate(self.ops) if k not in drop]

    def _skip_selects(self, i: int, m: _Member, uses: rewrite.Uses) -> Optional[tuple]:
        by_name = {n: slot for slot, ns in m.inputs.items() for n in ns}
        outputs: Dict[str, List[str]] = {}
        src: Dict[str, str] = {}
        sels: List[int] = []
        masks: Set[str] = set()
        for slot, ns in m.outputs.items():
            if len(ns) != 1:
                return None
            tmp = ns[0]
            readers = uses.readers.get(tmp, [])
            if len(readers) != 1 or uses.producers.get(tmp) != [i] or not self.private(tmp):
                return None
            j = readers[0]
            sel = self.ops[j]
            if getattr(sel, "type", None) != "select_input" or j < i:
                return None
            x, out = sel.inputs.get("X", []), sel.outputs.get("Out", [])
            if len(x) != 2 or x[0] != tmp or len(out) != 1 or x[1] != out[0] or \
                    out[0] not in by_name or by_name[out[0]] in ("Grad", "Scale", "Skip"):
                return None
            state = out[0]
            touched = [k for k in uses.readers.get(state, []) + uses.producers.get(state, [])
                       if i < k < j]
            if touched:
                return None
            outputs[slot], src[slot] = [state], by_name[state]
            sels.append(j)
            masks.update(sel.inputs.get("Mask", []))
        if len(masks) != 1:
            return None
        mask = next(iter(masks))
        made = uses.producer(mask)
        if made is None or made > i:
            return None
        return outputs, src, sels, mask

    # 2. the global-norm chain
    def fuse_global_norm(self) -> None:
        for k in range(len(self.ops) - 1, -1, -1):
            if k < len(self.ops) and self.ops[k].type == "elementwise_div":
                self._try_norm(k)

    def _try_norm(self, d_idx: int) -> None:
        ops = self.ops
        uses = rewrite.Uses(ops)
        readers = uses.readers

        def prod(name: str, type_: str) -> Optional[int]:
            j = uses.producer(name)
            return j if j is not None and getattr(ops[j], "type", None) == type_ else None

        div = ops[d_idx]
        limit = div.inputs["X"][0]
        m_idx = prod(div.inputs["Y"][0], "elementwise_max")
        f_idx = prod(limit, "fill_constant")
        if m_idx is None or f_idx is None or ops[m_idx].inputs["X"] != [limit]:
            return
        fill = ops[f_idx]
        if any(fill.inputs.values()) or list(fill.attrs.get("shape", [])) != [1]:
            return
        checked = ops[m_idx].inputs["Y"][0]
        c_idx = prod(checked, "check_finite_norm")
        norm = ops[c_idx].inputs["X"][0] if c_idx is not None else checked
        s_idx = prod(norm, "sqrt")
        u_idx = prod(ops[s_idx].inputs["X"][0], "sum") if s_idx is not None else None
        if u_idx is None:
            return
        squares = ops[u_idx].inputs["X"]
        q_idx = [prod(n, "squared_l2_norm") for n in squares]
        if not squares or any(q is None for q in q_idx):
            return
        if c_idx is not None and ops[c_idx].inputs.get("Norms", []) != squares:
            return
        scale = div.outputs["Out"][0]
        k_idx = next((r for r in readers.get(scale, []) if ops[r].type == "cast"), None)
        chain = set(q_idx) | {u_idx, s_idx, f_idx, m_idx, d_idx}
        chain |= {c_idx} if c_idx is not None else set()
        chain |= {k_idx} if k_idx is not None else set()
        internal = list(squares) + [ops[u_idx].outputs["Out"][0], limit,
                                    ops[m_idx].outputs["Out"][0]]
        internal += [checked] if c_idx is not None else []
        for n in internal:
            if not self.private(n) or any(r not in chain for r in readers.get(n, [])):
                return
        grads = [ops[q].inputs["X"][0] for q in q_idx]
        anchor = max(chain)
        outs: Dict[str, List[str]] = {}
        named = [("Norm", norm), ("Scale", scale)]
        if k_idx is not None:
            named.append(("ScaleCast", ops[k_idx].outputs["Out"][0]))
        for slot, n in named:
            outside = [r for r in readers.get(n, []) if r not in chain]
            if any(r < anchor for r in outside):
                return
            if outside or not self.private(n):
                outs[slot] = [n]
        if not outs:
            outs["Scale"] = [scale]
        for i in range(min(chain), anchor):        # the chain moves to ``anchor``
            if i not in chain and set(grads).intersection(ops[i].output_arg_names):
                return
        dtypes = {self.dtype(n) for n in list(squares) + [
            ops[u_idx].outputs["Out"][0], norm, limit, ops[m_idx].outputs["Out"][0], scale]}
        if len(dtypes) != 1 or next(iter(dtypes)) not in (np.float32, np.float64):
            return
        dtype = next(iter(dtypes))
        square = None
        if dtype == np.float64:                 # the op's own kernels: bit-identical
            square = [self._kernel("squared_l2_norm", g) for g in grads]
        cast_to = self.dtype(ops[k_idx].outputs["Out"][0]) if k_idx is not None else None
        check = list(ops[c_idx].attrs.get("grad_names", [])) if c_idx is not None else None
        opdef = _GlobalNorm(square, dtype, float(fill.attrs.get("value", 0.0)), cast_to, check,
                            list(outs))
        covered = [ops[i] for i in sorted(chain)]
        fused = FusedOp(opdef, covered, {"X": grads}, outs)
        self.ops = [fused if i == anchor else op for i, op in enumerate(ops)
                    if i not in chain or i == anchor]

    # 3. update groups
    def group_updates(self) -> None:
        ops = self.ops
        groups: Dict[tuple, List[int]] = {}
        for i, op in enumerate(ops):
            if isinstance(op, _Member):
                key = (op.type, tuple(sorted(k for k, v in op.inputs.items() if v)),
                       tuple(sorted(k for k, v in op.outputs.items() if v)),
                       tuple(op.inputs.get("Scale", [])), op.cast_scale,
                       tuple(op.inputs.get("Skip", [])),      # issue 13: one mask per group
                       tuple(sorted(op.skip_src.items())))
                groups.setdefault(key, []).append(i)
        placed: Dict[int, List[int]] = {}     # anchor -> member indices
        for members in groups.values():
            current = [members[-1]]
            for i in reversed(members[:-1]):
                if self._can_sink(i, max(current)):
                    current.insert(0, i)
                else:
                    placed[max(current)] = current
                    current = [i]
            placed[max(current)] = current
        out: List[Any] = []
        member_of = {i for ms in placed.values() for i in ms}
        for i, op in enumerate(ops):
            if i in placed:
                members = [ops[k] for k in placed[i]]
                big = [m for m in members if m.type == "sgd" or not self._small(m)]
                for m in members:           # small ones: their own (cheaper) unfused ops
                    if m not in big:
                        out.extend(self._restore(m))
                if big:
                    out.append(self._group(big))
            elif i not in member_of:
                out.append(op)
        self.ops = out

    def _small(self, m: _Member) -> bool:
        """A parameter of fewer than ``_INPLACE_MIN`` elements (by its declared shape)."""
        v = self.var(m.inputs["Param"][0])
        shape = tuple(getattr(v, "shape", ()) or ())
        return bool(shape) and all(d >= 0 for d in shape) and \
            int(np.prod(shape)) < _INPLACE_MIN

    @staticmethod
    def _restore(m: _Member) -> List[Any]:
        """The member's own ops: [the clip's multiply,] the update op (out of place)."""
        out: List[Any] = []
        if len(m.covered) == 2:
            mul = m.covered[0]
            if m.cast_scale:            # read the float64 scale: tiny-scale safe, no cast op
                out.append(FusedOp(_ClipScale(), [mul], {"X": list(mul.inputs["X"]),
                                                         "Scale": list(m.inputs["Scale"])},
                                   dict(mul.outputs)))
            else:
                out.append(mul)
        out.append(m.op)
        out.extend(m.selects)           # issue 13: the guard's commits, right after the update
        return out

    def _can_sink(self, i: int, anchor: int) -> bool:
        """Can member ``i`` move down to ``anchor`` past everything in between?"""
        op = self.ops[i]
        reads, writes = set(op.input_arg_names), set(op.output_arg_names)
        for k in range(i + 1, anchor + 1):
            other = self.ops[k]
            if writes.intersection(other.input_arg_names) or \
                    (reads | writes).intersection(other.output_arg_names):
                return False
        return True

    def _group(self, members: List[_Member]) -> FusedOp:
        first = members[0]
        update = registry.get_op_def(first.type)
        in_slots = [s.name for s in update.in_slots if first.inputs.get(s.name)]
        out_slots = [s.name for s in update.out_slots if first.outputs.get(s.name)]
        scaled = bool(first.inputs.get("Scale"))
        inputs = {s: [m.inputs[s][0] for m in members] for s in in_slots}
        outputs = {s: [m.outputs[s][0] for m in members] for s in out_slots}
        if scaled:
            inputs["Scale"] = list(first.inputs["Scale"])
        if first.skip_src:              # issue 13: see fold_skip
            inputs["Skip"] = list(first.inputs["Skip"])
        attrs = [update.kernel_attrs(m.attrs) for m in members]
        inplace = [self._may_write(m, update) for m in members]
        opdef = _UpdateGroup(first.type, in_slots, out_slots, attrs, inplace, scaled,
                             first.skip_src or None)
        covered = [c for m in members for c in m.covered]
        return FusedOp(opdef, covered, inputs, outputs)

    def _may_write(self, m: _Member, update: OpDef) -> bool:
        pairs = [("Param", "ParamOut")] + [p for p in update.state_slots if m.inputs.get(p[0])]
        for i, o in pairs:
            src, dst = m.inputs.get(i), m.outputs.get(o)
            if not src or not dst or src != dst or src[0] in self.feed:
                return False
            v = self.var(src[0])
            if v is None or not v.persistable:
                return False
        grad = m.inputs["Grad"][0]
        return grad not in {n for i, _ in pairs for n in m.inputs.get(i, [])}

    # 4. the commit tail
    def mark_tail(self) -> None:
        safe = True
        for op in reversed(self.ops):
            if isinstance(getattr(op, "opdef", None), _UpdateGroup):
                if not safe:
                    op.opdef.inplace = [False] * len(op.opdef.inplace)
            elif op.type not in _TAIL_OK:
                safe = False
