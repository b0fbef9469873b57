"""More indexing ops of fluid 1.8: where_index, scatter, gather_nd / scatter_nd_add, multiplex,
index_select, index_sample, masked_select and shard_index (argsort and unique are in
sort_unique.py)."""
from __future__ import annotations

import numpy as np

from ..core.dtypes import VarType
from ..core.names import live
from ..core.registry import OpDef, VarSpec, register
from .tensor import emit_grad_op, norm_axis

_INTS = (VarType.INT32, VarType.INT64)


def _check_int_input(op_type: str, slot: str, spec: VarSpec) -> None:
    if spec.dtype not in _INTS:
        raise ValueError(f"{op_type}: {slot} must be int32 or int64, but received "
                         f"{spec.dtype}")


# -- where (the op behind layers.where) ---------------------------------------------------------
@register
class WhereIndex(OpDef):
    """Out = int64 coordinates of the true (non-zero) entries of Condition, one row each, in
    row-major order: shape [K, rank(Condition)]."""
    type, inputs, outputs = "where_index", ("Condition",), ("Out",)
    no_grad = True

    def infer(self, Condition):
        return {"Out": VarSpec((-1, len(Condition.shape)), VarType.INT64)}

    def forward(self, Condition):
        return {"Out": np.argwhere(Condition).astype(np.int64).reshape(-1, Condition.ndim)}


# -- scatter ----------------------------------------------------------------------------------
def _ids(Ids: np.ndarray) -> np.ndarray:
    return np.asarray(Ids).reshape(-1).astype(np.int64)


def _last_writer(ids: np.ndarray) -> np.ndarray:
    """Mask of the updates that survive an overwriting scatter (the last one per index)."""
    keep = np.zeros(len(ids), dtype=bool)
    _, first_in_reverse = np.unique(ids[::-1], return_index=True)
    keep[len(ids) - 1 - first_in_reverse] = True
    return keep


@register
class Scatter(OpDef):
    """Out = X with rows Ids replaced by Updates (``overwrite``: a repeated index keeps its last
    update; otherwise the rows are zeroed, then every update is added);
    dX = dOut with the written rows zeroed, dUpdates[j] = dOut[Ids[j]] (0 for an update that
    was overwritten)."""
    type, inputs, outputs = "scatter", ("X", "Ids", "Updates"), ("Out",)
    grad_uses = ("Ids", "Updates")

    def infer(self, X, Ids, Updates, *, overwrite=True):
        _check_int_input("scatter", "Ids", Ids)
        if len(Ids.shape) > 2 or len(Ids.shape) == 2 and Ids.shape[1] not in (1, -1):
            raise ValueError(f"scatter: Ids must be 1-D (or [N, 1]), but its shape is "
                             f"{list(Ids.shape)}")
        if len(Updates.shape) != len(X.shape) or any(
                a >= 0 and b >= 0 and a != b for a, b in zip(X.shape[1:], Updates.shape[1:])):
            raise ValueError(f"scatter: Updates must have X's shape except for the first dim, "
                             f"but X has {list(X.shape)} and Updates {list(Updates.shape)}")
        n, m = Ids.shape[0], Updates.shape[0]
        if n >= 0 and m >= 0 and n != m:
            raise ValueError(f"scatter: Updates must have one row per index: Ids has {n} "
                             f"entries, Updates {m} rows")
        return {"Out": X}

    @staticmethod
    def _rows(Ids, n):
        """Ids as row numbers, each checked to lie in ``[0, n)``: a negative id is an error, as
        in Paddle's kernel, never NumPy's wrap-around."""
        ids = _ids(Ids)
        if ids.size and (ids.min() < 0 or ids.max() >= n):
            bad = int(ids[(ids < 0) | (ids >= n)][0])
            raise IndexError(f"scatter: Ids holds {bad}, out of range for X with {n} rows "
                             f"(ids must lie in [0, {n}); they do not wrap around)")
        return ids

    def forward(self, X, Ids, Updates, *, overwrite=True):
        ids, out = self._rows(Ids, X.shape[0]), np.array(X, copy=True)
        if overwrite:
            keep = _last_writer(ids)
            out[ids[keep]] = Updates[keep]
        else:
            out[ids] = 0
            np.add.at(out, ids, Updates)
        return {"Out": out}

    def backward(self, Ids, Updates, dOut, *, overwrite=True):
        ids = self._rows(Ids, dOut.shape[0])
        dx = np.array(dOut, copy=True)
        dx[ids] = 0
        du = dOut[ids]
        if overwrite:
            du = du * _last_writer(ids).reshape((-1,) + (1,) * (du.ndim - 1))
        return {"X": dx, "Updates": du.astype(Updates.dtype, copy=False)}

    def make_grad(self, g, **attrs):
        emit_grad_op(g, "scatter", attrs, uses=self.grad_uses, in_grads=("X", "Updates"))

    def double_grad(self, g, **attrs):
        """Out is linear in (X, Updates), so the grad op's gradient w.r.t. Out@GRAD is the same
        scatter of (ddX, ddUpdates)."""
        target = g.input_grad("Out@GRAD")
        ddx, ddu = live(g.output_grad("X@GRAD")), live(g.output_grad("Updates@GRAD"))
        if target is None or (ddx is None and ddu is None):
            return
        g.append("scatter", {"X": _or_zeros(g, ddx, g.input("Out@GRAD")), "Ids": g.input("Ids"),
                             "Updates": _or_zeros(g, ddu, g.input("Updates"))},
                 {"Out": target}, attrs)


def _in_range(op: str, what: str, index: np.ndarray, n: int) -> None:
    """Every entry of ``index`` in ``[0, n)``: fluid's kernels (and Paddle's) raise for a
    negative index, where NumPy indexing would silently wrap it around."""
    if index.size and (index.min() < 0 or index.max() >= n):
        bad = int(index[(index < 0) | (index >= n)].flat[0])
        raise IndexError(f"{op}: Index holds {bad}, outside [0, {n}) ({what}); indices do not "
                         f"wrap around")


def _nd_index(op: str, Index: np.ndarray, shape):
    """The coordinates of Index's last dim, one array per leading dim of ``shape``, each
    checked to lie inside that dim."""
    coords = tuple(np.moveaxis(np.asarray(Index).astype(np.int64), -1, 0))
    for axis, c in enumerate(coords):
        _in_range(op, f"dim {axis} of X", c, shape[axis])
    return coords


def _or_zeros(g, name, like):
    """``name`` when it is a live gradient, else a fresh zeros tensor shaped like ``like``."""
    if name is not None:
        return name
    z = g.tmp("zeros")
    g.append("fill_zeros_like", {"X": like}, {"Out": z})
    return z


def _forward_on_ddx(g, op_type: str, index_slot: str, attrs, out: str = "Out") -> None:
    """Second order of a gather-like op: d(<out>@GRAD) = op(ddX, <index_slot>)."""
    dd, target = live(g.output_grad("X@GRAD")), g.input_grad(out + "@GRAD")
    if dd is not None and target is not None:
        g.append(op_type, {"X": dd, index_slot: g.input(index_slot)}, {out: target}, attrs)


class _GatherByIndex(OpDef):
    """Gradient rules of an op gathering entries of X by its ``Index`` input (gather_nd,
    index_select, index_sample): the grad op is the op's own ``backward`` (a scatter-add of
    dOut), linear in Out@GRAD, so its gradient is the op applied to ddX."""

    def make_grad(self, g, **attrs):
        emit_grad_op(g, self.type, attrs, uses=self.grad_uses)

    def double_grad(self, g, **attrs):
        _forward_on_ddx(g, self.forward_def.type, "Index", attrs)


@register
class GatherNd(_GatherByIndex):
    """Out[i...] = X[Index[i..., :]] (the last dim of Index indexes X's leading dims): shape
    Index.shape[:-1] + X.shape[Index.shape[-1]:];  dX = scatter-add of dOut into zeros."""
    type, inputs, outputs = "gather_nd", ("X", "Index"), ("Out",)
    grad_uses = ("X", "Index")

    def infer(self, X, Index):
        _check_int_input("gather_nd", "Index", Index)
        k = Index.shape[-1] if Index.shape else -1
        if k > len(X.shape):
            raise ValueError(f"gather_nd: the last dim of Index ({k}) must not exceed the rank "
                             f"of X ({len(X.shape)}); X has shape {list(X.shape)}")
        rest = X.shape[k:] if k >= 0 else ()
        return {"Out": VarSpec(tuple(Index.shape[:-1]) + tuple(rest), X.dtype)}

    def forward(self, X, Index):
        if np.shape(Index)[-1] == 0:    # an empty index names all of X: one copy per index row
            return {"Out": np.array(np.broadcast_to(X, np.shape(Index)[:-1] + X.shape))}
        return {"Out": np.array(X[_nd_index("gather_nd", Index, X.shape)])}

    def backward(self, X, Index, dOut):
        if np.shape(Index)[-1] == 0:    # every copy of X sends its gradient back to all of X
            return {"X": dOut.reshape((-1,) + X.shape).sum(axis=0, dtype=dOut.dtype)}
        dx = np.zeros(X.shape, dtype=dOut.dtype)
        np.add.at(dx, _nd_index("gather_nd_grad", Index, X.shape), dOut)
        return {"X": dx}


@register
class ScatterNdAdd(OpDef):
    """Out = X, then Out[Index[i..., :]] += Updates[i...] for every i (repeats add up; an
    Index whose last dim is 0 names all of X, so every Updates[i...] adds to the whole);
    dX = dOut, dUpdates = gather_nd(dOut, Index)."""
    type, inputs, outputs = "scatter_nd_add", ("X", "Index", "Updates"), ("Out",)
    grad_uses = ("Index",)

    def infer(self, X, Index, Updates):
        _check_int_input("scatter_nd_add", "Index", Index)
        k = Index.shape[-1] if Index.shape else -1
        if k > len(X.shape):
            raise ValueError(f"scatter_nd_add: the last dim of Index ({k}) must not exceed the "
                             f"rank of X ({len(X.shape)})")
        want = tuple(Index.shape[:-1]) + tuple(X.shape[k:] if k >= 0 else ())
        if k >= 0 and (len(want) != len(Updates.shape) or any(
                a >= 0 and b >= 0 and a != b for a, b in zip(want, Updates.shape))):
            raise ValueError(f"scatter_nd_add: Updates must have shape Index.shape[:-1] + "
                             f"X.shape[Index.shape[-1]:] = {list(want)}, but received "
                             f"{list(Updates.shape)}")
        return {"Out": X}

    def forward(self, X, Index, Updates):
        out = np.array(X, copy=True)
        if np.shape(Index)[-1] == 0:        # an empty index names all of X: every update adds
            out += Updates.reshape((-1,) + X.shape).sum(axis=0, dtype=X.dtype)
            return {"Out": out}
        np.add.at(out, _nd_index("scatter_nd_add", Index, X.shape), Updates)
        return {"Out": out}

    def backward(self, Index, dOut):
        if np.shape(Index)[-1] == 0:
            lead = tuple(np.shape(Index)[:-1])
            return {"X": np.array(dOut, copy=True),
                    "Updates": np.array(np.broadcast_to(dOut, lead + dOut.shape))}
        index = _nd_index("scatter_nd_add_grad", Index, dOut.shape)
        return {"X": np.array(dOut, copy=True), "Updates": np.array(dOut[index])}

    def make_grad(self, g, **attrs):
        emit_grad_op(g, "scatter_nd_add", attrs, uses=self.grad_uses,
                     in_grads=("X", "Updates"))

    def double_grad(self, g, **attrs):
        """d(Out@GRAD) = scatter_nd_add(ddX, Index, ddUpdates) (Out is linear in both)."""
        target = g.input_grad("Out@GRAD")
        ddx, ddu = live(g.output_grad("X@GRAD")), live(g.output_grad("Updates@GRAD"))
        if target is None or (ddx is None and ddu is None):
            return
        if ddu is None:
            g.append("assign", {"X": ddx}, {"Out": target})
            return
        g.append("scatter_nd_add", {"X": _or_zeros(g, ddx, g.input("Out@GRAD")),
                                    "Index": g.input("Index"), "Updates": ddu},
                 {"Out": target}, attrs)


# -- picking ----------------------------------------------------------------------------------
@register
class Multiplex(OpDef):
    """Out[i] = X[Ids[i]][i] (Ids: int [N, 1] choosing a candidate per row);
    dX[k][i] = dOut[i] where Ids[i] == k, else 0."""
    type, inputs, outputs = "multiplex", ("Ids", "X*"), ("Out",)
    grad_uses = ("Ids", "X")

    def infer(self, Ids, X):
        _check_int_input("multiplex", "Ids", Ids)
        if len(X) < 2:
            raise ValueError(f"multiplex: X must hold at least 2 candidate tensors, but "
                             f"received {len(X)}")
        for i, x in enumerate(X[1:], 1):
            if x.shape != X[0].shape:
                raise ValueError(f"multiplex: all candidates must have the same shape, but "
                                 f"X[0] has {list(X[0].shape)} and X[{i}] {list(x.shape)}")
        return {"Out": X[0]}

    def forward(self, Ids, X):
        ids = _ids(Ids)
        if ids.size and (ids.min() < 0 or ids.max() >= len(X)):
            raise ValueError(f"multiplex: Ids must lie in [0, {len(X)}), but received "
                             f"{ids.tolist()}")
        stacked = np.stack(X)
        return {"Out": stacked[ids, np.arange(len(ids))]}

    def backward(self, Ids, X, dOut):
        ids = _ids(Ids)
        shape = (-1,) + (1,) * (dOut.ndim - 1)
        return {"X": [dOut * (ids == k).reshape(shape) for k in range(len(X))]}

    def make_grad(self, g, **attrs):
        emit_grad_op(g, "multiplex", attrs, uses=self.grad_uses)

    def double_grad(self, g, **attrs):
        """d(Out@GRAD) = multiplex(ddX, Ids) (zeros for candidates without a ddX)."""
        target, dds = g.input_grad("Out@GRAD"), g.output_grad("X@GRAD")
        if target is None or not dds or all(live(d) is None for d in dds):
            return
        parts = [_or_zeros(g, live(d), x) for d, x in zip(dds, g.input("X"))]
        g.append("multiplex", {"X": parts, "Ids": g.input("Ids")}, {"Out": target}, attrs)


@register
class IndexSelect(_GatherByIndex):
    """Out = take(X, Index, axis=dim) (Index 1-D int);  dX = dOut added back at Index."""
    type, inputs, outputs = "index_select", ("X", "Index"), ("Out",)
    grad_uses = ("X", "Index")

    def infer(self, X, Index, *, dim=0):
        _check_int_input("index_select", "Index", Index)
        if len(Index.shape) != 1:
            raise ValueError(f"index_select: Index must be 1-D, but its shape is "
                             f"{list(Index.shape)}")
        a = norm_axis("index_select", dim, len(X.shape), "dim")
        out = list(X.shape)
        out[a] = Index.shape[0]
        return {"Out": VarSpec(out, X.dtype)}

    @staticmethod
    def _index(X, Index, dim):
        """The axis and Index's entries, each checked to lie inside that dim (fluid's kernel
        refuses the others; np.take would wrap a negative one around)."""
        a = norm_axis("index_select", dim, X.ndim, "dim")
        ids = _ids(Index)
        _in_range("index_select", f"dim {a} of X", ids, X.shape[a])
        return a, ids

    def forward(self, X, Index, *, dim=0):
        a, ids = self._index(X, Index, dim)
        return {"Out": np.take(X, ids, axis=a)}

    def backward(self, X, Index, dOut, *, dim=0):
        a, ids = self._index(X, Index, dim)
        dx = np.zeros(X.shape, dtype=dOut.dtype)
        idx = [slice(None)] * X.ndim
        idx[a] = ids
        np.add.at(dx, tuple(idx), dOut)
        return {"X": dx}


@register
class IndexSample(_GatherByIndex):
    """Out[i, j] = X[i, Index[i, j]] (X: [B, N], Index: int [B, K]);  dX adds dOut back."""
    type, inputs, outputs = "index_sample", ("X", "Index"), ("Out",)
    grad_uses = ("X", "Index")

    def infer(self, X, Index):
        _check_int_input("index_sample", "Index", Index)
        if len(X.shape) != 2 or len(Index.shape) != 2:
            raise ValueError(f"index_sample: X and Index must be 2-D, but received shapes "
                             f"{list(X.shape)} and {list(Index.shape)}")
        if X.shape[0] >= 0 and Index.shape[0] >= 0 and X.shape[0] != Index.shape[0]:
            raise ValueError(f"index_sample: X and Index must have the same first dim, but "
                             f"received {X.shape[0]} and {Index.shape[0]}")
        return {"Out": VarSpec(Index.shape, X.dtype)}

    def forward(self, X, Index):
        index = Index.astype(np.int64)
        _in_range("index_sample", "the columns of X", index, X.shape[1])
        return {"Out": np.take_along_axis(X, index, axis=1)}

    def backward(self, X, Index, dOut):
        dx = np.zeros(X.shape, dtype=dOut.dtype)
        rows = np.arange(X.shape[0])[:, None]
        np.add.at(dx, (np.broadcast_to(rows, Index.shape), Index.astype(np.int64)), dOut)
        return {"X": dx}


@register
class MaskedSelect(OpDef):
    """Y = the entries of X where Mask (broadcast to X's shape) is true, as a 1-D tensor in
    row-major order;  dX = dY written back at those entries, 0 elsewhere."""
    type, inputs, outputs = "masked_select", ("X", "Mask"), ("Y",)
    grad_uses = ("X", "Mask")

    def infer(self, X, Mask):
        if Mask.dtype != VarType.BOOL:
            raise ValueError(f"masked_select: Mask must be bool, but received {Mask.dtype}")
        try:
            np.broadcast_shapes(tuple(max(d, 1) for d in X.shape),
                                tuple(max(d, 1) for d in Mask.shape))
        except ValueError:
            raise ValueError(f"masked_select: Mask of shape {list(Mask.shape)} cannot be "
                             f"broadcast to X of shape {list(X.shape)}") from None
        return {"Y": VarSpec((-1,), X.dtype)}

    def forward(self, X, Mask):
        return {"Y": X[np.broadcast_to(Mask, X.shape)]}

    def backward(self, X, Mask, dY):
        dx = np.zeros(X.shape, dtype=dY.dtype)
        dx[np.broadcast_to(Mask, X.shape)] = dY
        return {"X": dx}

    def make_grad(self, g, **attrs):
        emit_grad_op(g, "masked_select", attrs, uses=self.grad_uses, out_grads=("Y",))

    def double_grad(self, g, **attrs):
        """The grad op writes Y@GRAD back at the mask (linear): its gradient selects ddX."""
        _forward_on_ddx(g, "masked_select", "Mask", attrs, out="Y")


# -- sharding -----------------------------------------------------------------------------------
@register
class ShardIndex(OpDef):
    """With shard_size = ceil(index_num / nshards): Out = X - shard_id * shard_size where
    X // shard_size == shard_id, else ``ignore_value`` (X: int, last dim 1)."""
    type, inputs, outputs = "shard_index", ("X",), ("Out",)
    no_grad = True

    @staticmethod
    def _check(index_num, nshards, shard_id):
        if index_num <= 0:
            raise ValueError(f"shard_index: index_num must be > 0, but received {index_num}")
        if nshards <= 0:
            raise ValueError(f"shard_index: nshards must be > 0, but received {nshards}")
        if not 0 <= shard_id < nshards:
            raise ValueError(f"shard_index: shard_id must be in [0, nshards) = [0, {nshards}), "
                             f"but received {shard_id}")

    def infer(self, X, *, index_num=0, nshards=0, shard_id=0):
        _check_int_input("shard_index", "X", X)
        if not X.shape or X.shape[-1] not in (1, -1):
            raise ValueError(f"shard_index: the last dim of X must be 1, but X has shape "
                             f"{list(X.shape)}")
        self._check(index_num, nshards, shard_id)
        return {"Out": X}

    def forward(self, X, *, index_num=0, nshards=0, shard_id=0, ignore_value=-1):
        self._check(index_num, nshards, shard_id)
        if X.size and (X.min() < 0 or X.max() >= index_num):
            raise ValueError(f"shard_index: every entry of X must lie in [0, index_num) = "
                             f"[0, {index_num}), but received values in [{X.min()}, "
                             f"{X.max()}]")
        size = (index_num + nshards - 1) // nshards
        mine = X // size == shard_id
        t = X.dtype.type
        return {"Out": np.where(mine, X - t(shard_id * size), t(ignore_value))}
