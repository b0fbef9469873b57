"""In-place update machinery shared by the optimizer ops (``optim*.py``) and plan-time fusion.

Every elementwise update op defines ``update_in_place(ins, scale, attrs)``, which writes
``Param`` and the accumulators named in ``state_slots`` into their own buffers and returns only
the remaining (small) outputs. It performs the same floating-point operations, in the same order
and dtypes, as ``forward`` on the gradient ``Grad * scale`` (``scale`` = the global-norm clip
factor, or ``None``), so the two agree bit for bit. Large arrays are processed in chunks of
``CHUNK`` elements through per-thread scratch buffers (``scratch``): no parameter-sized
temporary, no allocation per step, and nothing shared between threads; with two fluidlite
threads or more (``core.threads``) a large array's chunks are cut into ``PARTS`` fixed ranges
run as parallel items, each through its own scratch set (the update is elementwise: the bits
never depend on the threads). ``sum_squares`` is the
one sum of squares (norms of ``squared_l2_norm``, ``clip_by_norm``, ``lars_momentum``, ``lamb``),
accumulated in float64: a finite float32 tensor never overflows to an infinite norm.
"""
from __future__ import annotations

import threading
from typing import (AbstractSet, Any, Callable, Dict, List, Mapping, Optional, Sequence,
                    Tuple)

import numpy as np

from ..core import shape as S
from ..core import threads
from ..core.dtypes import VarType
from ..core.registry import Binding, OpDef, VarSpec
from ..core.selected_rows import SelectedRows

def check_like(op: str, ref_slot: str, ref: VarSpec, **others: VarSpec) -> None:
    for slot, spec in others.items():
        if spec is None:
            continue
        if len(spec.shape) != len(ref.shape) or not all(
                S.dims_match(a, b) for a, b in zip(spec.shape, ref.shape)):
            raise ValueError(f"{op}: {slot} shape {list(spec.shape)} must equal {ref_slot} shape "
                             f"{list(ref.shape)}")


def check_scalar(op: str, **slots: VarSpec) -> None:
    for slot, spec in slots.items():
        if spec is not None and S.numel(spec.shape) not in (1, -1):
            raise ValueError(f"{op}: {slot} must hold exactly one element (shape [1]), but its "
                             f"shape is {list(spec.shape)}")


# the ``ins`` key of a folded L2 decay's coefficient (``chunked``); also the tag of its scratch
L2_DECAY = "@l2_decay"
CHUNK = 1 << 17        # elements per pass of an in-place update (measured: 2^16..2^18 best)
PARTS = 2              # chunk ranges of a large update run in parallel (``chunked``)
_tls = threading.local()


def scratch(dtype: Any, count: int, tag: str = "", part: int = 0) -> List[np.ndarray]:
    """``count`` scratch buffers of ``CHUNK`` elements of ``dtype``, private to this thread,
    to ``tag`` and to ``part`` (the chunk range of ``chunked`` they serve; reused across calls:
    a kernel must not hold them across another kernel's call that uses the same tag)."""
    try:
        pool = _tls.pool
    except AttributeError:
        pool = _tls.pool = {}
    key = (dtype, tag, part)
    bufs = pool.get(key)
    if bufs is None or len(bufs) < count or bufs[0].size < CHUNK:
        bufs = pool[key] = [np.empty(CHUNK, dtype) for _ in range(max(count, 3))]
    return bufs


def sum_squares(x: np.ndarray, scale: Any = None) -> float:
    """sum((x * scale)^2) over ``CHUNK``-element pieces, the pieces' sums added in float64 (so it
    is the same number whether ``x`` is passed whole or scaled on the fly), as a Python float.

    A float32 piece is summed by a float32 BLAS dot (relative error ~1e-7 on a piece; ~5x faster
    than a float64 copy) and again in float64 when that sum overflows, is NaN or is below
    ``_TINY`` (where squares may underflow), so a finite tensor never gets an infinite norm nor
    a tiny one a zero norm; other dtypes are summed in float64."""
    with np.errstate(over="ignore", invalid="ignore"):     # an overflow is redone in float64
        return _sum_squares(x, scale)


def sum_squares_many(xs: Sequence[np.ndarray]) -> List[float]:
    """``[sum_squares(x) for x in xs]`` (under one ``np.errstate``: small tensors pay per call).
    A few small float32 tensors (a small model's gradients) are summed by ``np.vdot``, the
    same BLAS dot as ``_sum_squares``'s but raising no floating-point warnings, so no
    ``np.errstate`` is needed (which costs as much as three dots); any other case, or a sum
    that must be redone in float64, takes the general path."""
    if len(xs) <= _FEW:
        out = []
        for x in xs:
            if x.dtype != _F32 or x.size > CHUNK:
                break
            flat = x.reshape(-1)
            s = float(_vdot(flat, flat))
            if not _TINY <= s < _INF:
                break
            out.append(s)
        else:
            return out
    with np.errstate(over="ignore", invalid="ignore"):
        return [_sum_squares(x, None) for x in xs]


_FEW = 8
_F32 = np.dtype(np.float32)
_vdot = np.vdot


def _sum_squares(x: np.ndarray, scale: Any) -> float:
    flat = x.reshape(-1)
    n = flat.size
    f32 = flat.dtype == np.float32
    if n <= CHUNK and scale is None:
        # one piece (what the loop below does for it, minus its per-call overhead: small
        # gradients pay mostly for that); ``v.dot`` is ``np.dot`` without the dispatch layer
        if f32:
            s = float(flat.dot(flat))
            if _TINY <= s < _INF:
                return s
        # always through the same (aligned) buffer: BLAS may round differently at other offsets
        v = scratch(np.float64, 1, "sum_squares")[0][:n]
        v[...] = flat
        return float(v.dot(v))
    tmp = scratch(x.dtype, 2, "sum_squares")[1] if scale is not None else None
    total = 0.0
    for a in range(0, n, CHUNK):
        b = min(a + CHUNK, n)
        piece = flat[a:b]
        if scale is not None:
            piece = np.multiply(piece, scale, out=tmp[:b - a], dtype=wide(piece, scale))
        if f32:
            s = float(piece.dot(piece))
            if _TINY <= s < _INF:
                total += s
                continue
        v = scratch(np.float64, 1, "sum_squares")[0][:b - a]
        np.copyto(v, piece)
        total += float(v.dot(v))
    return total


_INF = float("inf")
# below this a float32 piece's squares may have lost bits to underflow (squares of |x| < 1.1e-19
# are subnormal): it is summed again in float64
_TINY = 2.0 ** -60


def consts(dtype: np.dtype, *values: Any) -> List[np.ndarray]:
    """Python-float constants as 0-d arrays of ``dtype``: the value NumPy would use (a Python
    float operand is rounded to the array's dtype), but ~2x cheaper per ufunc call."""
    return [np.asarray(v, dtype) for v in values]


def wide(x: np.ndarray, s: Any) -> np.dtype:
    """The dtype ``x * s`` is formed in when ``s`` is a 0-d array or NumPy scalar: the wider of
    the two (NumPy 2's rule). Passed as ``dtype=`` so NumPy 1's value-based promotion, which
    would round ``s`` to ``x``'s dtype first, computes the same bits."""
    return np.promote_types(x.dtype, s.dtype)


def chunked(ins: Dict[str, np.ndarray], states: Sequence[str], scale: Any, ntmp: int,
            body: Callable[..., None], extra: Sequence[Any] = (), ordered: bool = False) -> None:
    """Call ``body(p, g, states, tmps)`` on aligned flat chunks of Param, Grad (times
    ``scale``) and the ``states`` arrays; ``tmps`` are ``ntmp`` scratch chunks of Param's dtype
    followed by one scratch chunk of each dtype in ``extra``.

    An array of two chunks or more is cut into ``PARTS`` ranges of whole chunks that run as
    ``core.threads`` items when two threads or more are set; every part takes its scratch
    (``scratch(..., part=k)``) here on the calling thread, so ``body`` must use only what it
    is handed. ``ordered``: ``body`` adds something up over the chunks (LAMB's norm), so they
    run one after another, in order, on the calling thread.

    ``ins[L2_DECAY]`` (a 0-d array of Param's dtype, set by a fused group for an op declaring
    ``folds_l2_decay``): the gradient ``body`` sees is ``Grad * scale + Param * coeff``, made
    per chunk before ``body`` writes Param -- the bits of fluid's L2 decay ops (``scale`` of
    Param by the coefficient, then ``sum`` of the gradient and that), which the fused group
    replaces."""
    p, g = ins["Param"], ins["Grad"]
    if scale is not None:
        scale = np.asarray(scale)      # 0-d arrays dispatch ~2x faster than scalars
    decay = ins.get(L2_DECAY)
    n = p.size
    if n <= CHUNK:                      # one piece, in the arrays' own shape
        bufs = _part_scratch(p.dtype, ntmp, extra, 0)
        shape = p.shape
        if scale is not None:
            g = np.multiply(g, scale, out=bufs[0][:n].reshape(shape), dtype=wide(g, scale))
        if decay is not None:
            g = _decayed(p, g, decay, bufs[0][:n].reshape(shape), decay_scratch(p.dtype, 0))
        body(p, g, [ins[s] for s in states], [t[:n].reshape(shape) for t in bufs[1:]])
        return
    p, g = p.reshape(-1), g.reshape(-1)
    st = [ins[s].reshape(-1) for s in states]
    count = -(-n // CHUNK)
    parts = PARTS if threads.splitting() and not ordered else 1
    sets = [_part_scratch(p.dtype, ntmp, extra, k) for k in range(parts)]
    dsets = [decay_scratch(p.dtype, k) for k in range(parts)] if decay is not None else None

    def run(k: int) -> None:
        bufs = sets[k]
        for c in range(count * k // parts, count * (k + 1) // parts):
            a, b = c * CHUNK, min(c * CHUNK + CHUNK, n)
            m = b - a
            gc = g[a:b]
            if scale is not None:
                gc = np.multiply(gc, scale, out=bufs[0][:m], dtype=wide(gc, scale))
            if decay is not None:
                gc = _decayed(p[a:b], gc, decay, bufs[0][:m], dsets[k][:m])
            body(p[a:b], gc, [s[a:b] for s in st], [t[:m] for t in bufs[1:]])
    if parts == 1:
        run(0)
    else:
        threads.parallel(run, parts)


def decay_scratch(dtype: Any, part: int) -> np.ndarray:
    """The scratch chunk of part ``part`` that ``chunked`` makes a folded L2 decay's term in
    (taken on the calling thread, like the part's other scratch)."""
    return scratch(dtype, 1, L2_DECAY, part)[0]


def _decayed(p: np.ndarray, g: np.ndarray, decay: np.ndarray, out: np.ndarray,
             buf: np.ndarray) -> np.ndarray:
    """``g + p * decay`` into ``out`` (which may be ``g``), the term made in ``buf`` (flat,
    at least ``p.size`` elements): fluid's ``scale`` then ``sum``, in their order."""
    d = np.multiply(p, decay, out=buf[:p.size].reshape(p.shape))
    return np.add(g, d, out=out)


def _part_scratch(dtype: np.dtype, ntmp: int, extra: Sequence[Any],
                  part: int) -> List[np.ndarray]:
    """The scratch of one ``chunked`` part: the scale's chunk, ``ntmp`` temporaries, then one
    chunk per ``extra`` dtype (distinct buffers, also where dtypes repeat)."""
    need = {dtype: ntmp + 1}
    picks = []
    for dt in extra:
        k = need.get(dt, 0)
        picks.append((dt, k))
        need[dt] = k + 1
    sets = {dt: scratch(dt, n, part=part) for dt, n in need.items()}
    return sets[dtype][:ntmp + 1] + [sets[dt][k] for dt, k in picks]


def reserve(dtype: np.dtype, count: int, tag: str = "") -> None:
    """Allocate this thread's scratch of ``count`` buffers for every part ``chunked`` may use
    (the untagged buffers; a tagged set serves one call at a time), so that a MemoryError comes
    before an update writes anything."""
    for part in range(PARTS if not tag else 1):
        scratch(dtype, count, tag, part)


class Update(OpDef):
    no_grad = True
    # (input slot, output slot) pairs updated elementwise in place by ``update_in_place``
    state_slots: Tuple[Tuple[str, str], ...] = ()
    # the per-thread scratch ``update_in_place`` takes, as ``scratch`` arguments (dtype None:
    # the parameter's): reserved by a fused update group before its first in-place write, so
    # running out of memory changes nothing
    in_place_scratch: Tuple[Tuple[Any, int, str], ...] = ((None, 3, ""),)
    # (attr, input slot): with the attr set, ``forward`` raises without that input, so such a
    # member of a fused group runs out of place (its error before any in-place write)
    in_place_needs: Tuple[Tuple[str, str], ...] = ()
    # ParamOut = Param - LearningRate * Grad and nothing else: a fused group folds the clip
    # scale into the rate and updates every parameter, however small, in the group
    plain_descent: bool = False
    # ``update_in_place`` hands its ``ins`` to ``chunked`` and reads Grad nowhere else, so a
    # fused group may fold fluid's L2 decay ops (scale + sum) into it (``L2_DECAY``)
    folds_l2_decay: bool = False

    # -- sparse gradients (a SelectedRows Grad: ``core/selected_rows.py``) --------------------
    # the update is elementwise (no norm over the whole tensor, unlike lars and lamb): a
    # sparse gradient's rows can be updated apart from the others (``sparse_in_place``)
    sparse_elementwise: bool = False

    def sparse_rows_only(self, attrs: Mapping[str, Any]) -> bool:
        """Whether fluid 1.8's kernel for a SelectedRows gradient updates only the gradient's
        rows (sgd, adagrad, adam's lazy_mode). Otherwise (momentum, rmsprop, adam, ...) it
        updates every row, the missing ones with a zero gradient: exactly the dense update."""
        return False

    def bind(self, in_specs: Any, attrs: Mapping[str, Any],
             outputs_present: AbstractSet[str]) -> Binding:
        """The dense binding; for a Grad declared SELECTED_ROWS (``in_specs.var_type``, the
        plan's) one that sends a SelectedRows gradient to ``sparse_forward``."""
        b = super().bind(in_specs, attrs, outputs_present)
        slots = [s.name for s in self.in_slots]
        var_type = getattr(in_specs, "var_type", None)
        if "Grad" not in slots or var_type is None or \
                var_type("Grad") != VarType.SELECTED_ROWS:
            return b
        gi, kw, dense, single = slots.index("Grad"), self.kernel_attrs(attrs), b.fn, b.single
        key, n = self.out_slots[0].name, len(slots)

        def run(*args: Any) -> Any:
            if type(args[gi]) is not SelectedRows:
                return dense(*args)
            # after the inputs, the previous values of the ``reads_outputs`` slots
            out = self.sparse_forward(dict(zip(slots, args)), kw,
                                      dict(zip(self.reads_outputs, args[n:])))
            return out[key] if single else out
        return Binding(run, single, b.result_keys)

    def sparse_forward(self, ins: Dict[str, Any], attrs: Mapping[str, Any],
                       previous: Optional[Mapping[str, Any]] = None) -> Dict[str, np.ndarray]:
        """``forward`` for a SelectedRows Grad, out of place (new arrays, nothing written).

        A rows-only update writes the gradient's rows of each output; its other rows are
        those of the output's previous value (``previous``: output slot -> array, for the ops
        reading them, ``reads_outputs``) when that is an array of the input's shape and dtype
        -- fluid 1.8's kernels write only those rows into the output's buffer, which keeps
        its earlier contents (the same buffer as the input's when ParamOut is Param) -- and
        otherwise a copy of the input's."""
        if not self.sparse_rows_only(attrs):
            return self.forward(**dict(ins, Grad=ins["Grad"].to_dense()), **attrs)
        dest = {}
        for i, o in self._row_pairs(ins):
            old = (previous or {}).get(o)
            keep = (isinstance(old, np.ndarray) and old.shape == ins[i].shape
                    and old.dtype == ins[i].dtype)
            dest[i] = old.copy() if keep else ins[i].copy()
        return self._row_update(ins, attrs, dest)

    def sparse_in_place(self, ins: Dict[str, Any], scale: Any,
                        attrs: Mapping[str, Any]) -> Dict[str, np.ndarray]:
        """``update_in_place`` for a SelectedRows Grad (times ``scale``): a rows-only update
        writes just the gradient's rows of Param and the states (time and memory grow with
        the rows); the others run the dense update on the densified gradient."""
        g = ins["Grad"]
        if scale is not None:
            s = np.asarray(scale)
            g = g.with_value(np.multiply(g.value, s, dtype=wide(g.value, s))
                             .astype(g.dtype, copy=False))
        if self.sparse_rows_only(attrs):
            return self._row_update(dict(ins, Grad=g), attrs)
        if not self.sparse_elementwise:
            return self.update_in_place(dict(ins, Grad=g.to_dense()), None, dict(attrs))
        # every row moves (fluid 1.8's kernels: missing rows have a zero gradient), but no
        # table-sized gradient is made: the gradient's rows are computed first on copies, then
        # the whole table is updated in place with a zero gradient (a zero-stride view, no
        # memory) and the rows are written back -- the dense update, bit for bit
        m = g.merged()
        rows, pairs = m.rows, self._row_pairs(ins)
        sub = dict(ins, Grad=m.value)
        for i, _ in pairs:
            sub[i] = ins[i][rows]
        done = self.forward(**sub, **attrs)
        zero = np.broadcast_to(np.zeros((), g.dtype), ins["Param"].shape)
        rest = self.update_in_place(dict(ins, Grad=zero), None, dict(attrs))
        for i, o in pairs:
            ins[i][rows] = done[o]
        return rest

    def _row_pairs(self, ins: Dict[str, Any]) -> List[Tuple[str, str]]:
        return [("Param", "ParamOut")] + [p for p in self.state_slots
                                          if ins.get(p[0]) is not None]

    def _row_update(self, ins: Dict[str, Any], attrs: Mapping[str, Any],
                    dest: Optional[Mapping[str, np.ndarray]] = None) -> Dict[str, Any]:
        """``forward`` on the gradient's merged rows of Param and the states (the same
        per-element arithmetic as the dense kernel), written into those rows of ``dest``'s
        arrays (input slot -> array; default: ``ins``' own arrays, in place); returns every
        output."""
        g = ins["Grad"].merged()
        rows, pairs = g.rows, self._row_pairs(ins)
        sub = dict(ins, Grad=g.value)
        for i, _ in pairs:
            sub[i] = ins[i][rows]
        out = dict(self.forward(**sub, **attrs))
        for i, o in pairs:
            target = ins[i] if dest is None else dest[i]
            target[rows] = out[o]
            out[o] = target
        return out

    def update_in_place(self, ins: Dict[str, np.ndarray], scale: Any,
                        attrs: Dict[str, Any]) -> Dict[str, np.ndarray]:
        """Write ParamOut into Param and every ``state_slots`` output into its input, computing
        exactly what ``forward`` computes for ``Grad * scale``; return the other outputs.
        The caller guarantees Param and the states are C-contiguous, writeable, distinct and of
        Param's shape and dtype, and Grad has Param's shape and dtype."""
        raise NotImplementedError(f"{self.type} has no in-place update")
