"""Search and metric ops: top_k, arg_max, arg_min, accuracy."""
from __future__ import annotations

import numpy as np

from ..core import shape as S
from ..core.dtypes import VarType, to_numpy_dtype
from ..core.names import live
from ..core.registry import OpDef, VarSpec, register
from .tensor import emit_grad_op, norm_axis


def topk_indices(X: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k largest entries along the last axis, largest first (ties: lower index
    first)."""
    n = X.shape[-1]
    if k < n and n > 64 and not np.isnan(X).any():
        # the k-th largest value of each row; of the entries equal to it only the lowest
        # indices are taken (argpartition alone may pick any of the tied ones)
        kth = np.take_along_axis(X, np.argpartition(-X, k - 1, axis=-1)[..., k - 1:k],
                                 axis=-1)
        above, tied = X > kth, X == kth
        room = k - above.sum(axis=-1, keepdims=True)
        chosen = above | (tied & (np.cumsum(tied, axis=-1) <= room))
        part = np.nonzero(chosen)[-1].reshape(X.shape[:-1] + (k,))   # k per row, in order
        vals = np.take_along_axis(X, part, axis=-1)
        order = np.lexsort((part, -vals), axis=-1)   # value desc, then index asc
        return np.take_along_axis(part, order, axis=-1)
    return np.argsort(-X, axis=-1, kind="stable")[..., :k]


@register
class TopK(OpDef):
    """Out, Indices = the k largest entries of X along the last dim (sorted, largest first) and
    their int64 positions;  dX = dOut scattered to Indices."""
    type, inputs, outputs = "top_k", ("X", "K?"), ("Out", "Indices")

    def infer(self, X, K, *, k=1):
        if not X.shape:
            raise ValueError("top_k: X must have at least one dim")
        if K is None:
            if k < 1:
                raise ValueError(f"top_k: k must be >= 1, got {k}")
            if X.shape[-1] >= 0 and k > X.shape[-1]:
                raise ValueError(f"top_k: k={k} exceeds the last dim of X (shape "
                                 f"{list(X.shape)})")
        shape = tuple(X.shape[:-1]) + ((k,) if K is None else (-1,))
        return {"Out": VarSpec(shape, X.dtype, X.lod_level),
                "Indices": VarSpec(shape, VarType.INT64, X.lod_level)}

    def forward(self, X, K, *, k=1):
        if K is not None:
            k = int(np.asarray(K).reshape(-1)[0])
        if not 1 <= k <= X.shape[-1]:
            raise ValueError(f"top_k: k={k} must be in [1, {X.shape[-1]}] for X of shape "
                             f"{list(X.shape)}")
        idx = topk_indices(X, k)
        return {"Out": np.take_along_axis(X, idx, axis=-1), "Indices": idx.astype(np.int64)}

    grad_uses = ("X", "Indices")

    def backward(self, X, Indices, dOut, dIndices=None, *, k=1):
        dx = np.zeros(X.shape, dtype=dOut.dtype)
        np.put_along_axis(dx, Indices, dOut, axis=-1)
        return {"X": dx}

    def make_grad(self, g, **attrs):
        emit_grad_op(g, "top_k", attrs, uses=("X", "Indices"))

    def double_grad(self, g, **attrs):
        """top_k_grad is linear in dOut:  d(dOut) = ddX at Indices (a top_k of ddX would pick
        different entries, so use take-along via a gather of the flat rows)."""
        dd, target = live(g.output_grad("X@GRAD")), g.input_grad("Out@GRAD")
        if dd is not None and target is not None:
            g.append("take_along_axis_last", {"X": dd, "Index": g.input("Indices")},
                     {"Out": target})


@register
class TakeAlongLastAxis(OpDef):
    """Out = take_along_axis(X, Index, -1) (used for top_k's second-order gradient);
    dX = dOut scattered to Index."""
    type, inputs, outputs = "take_along_axis_last", ("X", "Index"), ("Out",)

    def infer(self, X, Index):
        return {"Out": VarSpec(Index.shape, X.dtype)}

    def forward(self, X, Index):
        return {"Out": np.take_along_axis(X, Index, axis=-1)}

    def backward(self, X, Index, dOut):
        n = X.shape[-1]
        dx = np.zeros((int(np.prod(X.shape[:-1])), n), dtype=dOut.dtype)
        idx = Index.reshape(dx.shape[0], -1)
        rows = np.arange(dx.shape[0])[:, None]
        np.add.at(dx, (rows, idx), dOut.reshape(idx.shape))   # repeated indices accumulate
        return {"X": dx.reshape(X.shape)}

    def make_grad(self, g, **attrs):
        emit_grad_op(g, self.type, attrs, uses=("X", "Index"))

    def double_grad(self, g, **attrs):
        dd, target = live(g.output_grad("X@GRAD")), g.input_grad("Out@GRAD")
        if dd is not None and target is not None:
            g.append("take_along_axis_last", {"X": dd, "Index": g.input("Index")},
                     {"Out": target})


class _ArgExtremum(OpDef):
    inputs, outputs = ("X",), ("Out",)
    no_grad = True

    def infer(self, X, *, axis=0, keepdims=False, dtype=-1, flatten=False):
        if flatten:
            shape = (1,)
        else:
            a = norm_axis(self.type, axis, len(X.shape))
            shape = tuple(1 if i == a else d for i, d in enumerate(X.shape)) if keepdims else \
                tuple(d for i, d in enumerate(X.shape) if i != a)
        out_dtype = VarType.INT64 if dtype in (-1, None) else dtype
        return {"Out": VarSpec(shape or (1,), out_dtype)}

    def forward(self, X, *, axis=0, keepdims=False, dtype=-1, flatten=False):
        dt = np.int64 if dtype in (-1, None) else to_numpy_dtype(dtype)
        if flatten:
            return {"Out": np.asarray([self._fn(X.reshape(-1))], dtype=dt)}
        out = self._fn(X, axis=axis)
        if keepdims:
            out = np.expand_dims(out, axis)
        out = np.asarray(out, dtype=dt)
        return {"Out": out.reshape(1) if out.ndim == 0 else out}


@register
class ArgMax(_ArgExtremum):
    """Out = int64 index of the largest entry along ``axis`` (first on ties; not
    differentiable)."""
    type = "arg_max"
    _fn = staticmethod(np.argmax)


@register
class ArgMin(_ArgExtremum):
    """Out = int64 index of the smallest entry along ``axis`` (first on ties; not
    differentiable)."""
    type = "arg_min"
    _fn = staticmethod(np.argmin)


@register
class Accuracy(OpDef):
    """Correct = #rows whose Label is among the top-k Indices, Total = #rows,
    Accuracy = Correct / Total (float32 [1]; int32 counts; not differentiable)."""
    type, inputs, outputs = "accuracy", ("Out", "Indices", "Label"), \
        ("Accuracy", "Correct", "Total")
    no_grad = True

    def infer(self, Out, Indices, Label):
        if len(Label.shape) != 2 or Label.shape[1] not in (1, -1):
            raise ValueError(f"accuracy: Label must have shape [N, 1], got {list(Label.shape)}")
        if not S.dims_match(Indices.shape[0], Label.shape[0]):
            raise ValueError(f"accuracy: Indices {list(Indices.shape)} and Label "
                             f"{list(Label.shape)} must have the same number of rows")
        return {"Accuracy": VarSpec((1,), VarType.FP32), "Correct": VarSpec((1,), VarType.INT32),
                "Total": VarSpec((1,), VarType.INT32)}

    def forward(self, Out, Indices, Label):
        n = Indices.shape[0]
        if n and Label.min() < 0:           # fluid 1.8's AccuracyKernel enforces this
            raise ValueError(f"accuracy: labels must be >= 0, got {int(Label.min())}")
        correct = int(np.count_nonzero((Indices == Label.reshape(n, 1)).any(axis=1))) if n else 0
        acc = np.asarray([correct / n if n else 0.0], dtype=np.float32)
        return {"Accuracy": acc, "Correct": np.asarray([correct], np.int32),
                "Total": np.asarray([n], np.int32)}
