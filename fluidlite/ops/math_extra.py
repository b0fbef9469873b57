"""Math ops of fluid 1.8 beyond the basic set: cumsum, logsumexp, log_softmax, reduce_prod,
reduce_all/any, isfinite/isinf/isnan, size, kron, dot, bmm, cross, trace, addmm, allclose, dist.

Reductions to "everything" give shape [1], never [] (fluid has no 0-d tensors). The boolean and
counting ops (reduce_all/any, isfinite/isinf/isnan, size, allclose) are not differentiable.
"""
from __future__ import annotations

from typing import Sequence, Tuple

import numpy as np

from ..core import shape as S
from ..core.dtypes import FLOATS, VarType, convert_dtype
from ..core.registry import OpDef, VarSpec, register
from .reduce import _Reduce, _axes
from .tensor import norm_axis


def _float_input(op_type: str, slot: str, spec: VarSpec) -> None:
    if spec.dtype not in FLOATS:
        raise ValueError(f"{op_type}: {slot} must be a float tensor, but it is "
                         f"{convert_dtype(spec.dtype)}")


def _np_broadcast(op_type: str, a: Sequence[int], b: Sequence[int]) -> Tuple[int, ...]:
    """NumPy's broadcast of two static shapes (-1: unknown); ValueError naming the op."""
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + tuple(a), (1,) * (n - len(b)) + tuple(b)
    out = []
    for x, y in zip(a, b):
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        elif x < 0 or y < 0:
            out.append(max(x, y))
        else:
            raise ValueError(f"{op_type}: shapes {list(a)} and {list(b)} cannot be broadcast "
                             f"together (dims must be equal or 1)")
    return tuple(out)


def _unbroadcast(g: np.ndarray, shape: Sequence[int]) -> np.ndarray:
    """Sum ``g`` over the dims NumPy broadcasting added to an operand of ``shape``."""
    shape = tuple(shape)
    lead = g.ndim - len(shape)
    if lead:
        g = g.sum(axis=tuple(range(lead)))
    axes = tuple(i for i, s in enumerate(shape) if s == 1 and g.shape[i] != 1)
    return (g.sum(axis=axes, keepdims=True) if axes else g).reshape(shape)


def _as_one(x: np.ndarray) -> np.ndarray:
    """fluid has no 0-d tensors: a scalar result becomes shape [1]."""
    return x.reshape(1) if np.ndim(x) == 0 else x


# -- cumsum --------------------------------------------------------------------------------------
def _cumsum(x: np.ndarray, axis: int, exclusive: bool, reverse: bool) -> np.ndarray:
    if reverse:
        x = np.flip(x, axis)
    out = np.cumsum(x, axis=axis, dtype=x.dtype)
    if exclusive:       # shift by one along axis, a zero first: sum of the *previous* entries
        out = np.concatenate([np.zeros_like(np.take(out, [0], axis=axis)),
                              np.take(out, np.arange(out.shape[axis] - 1), axis=axis)], axis)
    return np.flip(out, axis) if reverse else out


@register
class Cumsum(OpDef):
    """Out[i] = sum of X[j] for j <= i along ``axis`` (``exclusive``: j < i; ``reverse``: from
    the end; ``flatten``: over X flattened to 1-D);  dX = the same cumsum of dOut with the
    direction reversed."""
    type, inputs, outputs = "cumsum", ("X",), ("Out",)

    def infer(self, X, *, axis=-1, exclusive=False, reverse=False, flatten=False):
        if flatten:
            return {"Out": X.with_(shape=(S.numel(X.shape),))}
        norm_axis("cumsum", axis, max(len(X.shape), 1))
        return {"Out": X}

    def forward(self, X, *, axis=-1, exclusive=False, reverse=False, flatten=False):
        if flatten:
            return {"Out": _cumsum(X.reshape(-1), 0, exclusive, reverse)}
        a = norm_axis("cumsum", axis, max(X.ndim, 1))
        return {"Out": _cumsum(X, a, exclusive, reverse)}

    def backward(self, X, dOut, *, axis=-1, exclusive=False, reverse=False, flatten=False):
        if flatten:
            return {"X": _cumsum(dOut.reshape(-1), 0, exclusive, not reverse).reshape(X.shape)}
        a = norm_axis("cumsum", axis, max(X.ndim, 1))
        return {"X": _cumsum(dOut, a, exclusive, not reverse)}


# -- logsumexp and log_softmax ------------------------------------------------------------------
@register
class Logsumexp(OpDef):
    """Out = log(sum(exp(X), axis)) computed as m + log(sum(exp(X - m))) with m the max (no
    overflow);  dX = dOut * exp(X - Out) (broadcast back over the reduced axes)."""
    type, inputs, outputs = "logsumexp", ("X",), ("Out",)
    grad_uses = ("X", "Out")

    def infer(self, X, *, axis=[0], keepdim=False, reduce_all=False):
        _float_input("logsumexp", "X", X)
        axes = _axes("logsumexp", len(X.shape), axis, reduce_all)
        return {"Out": X.with_(shape=S.reduce_shape(X.shape, axes, keepdim, axes is None))}

    def forward(self, X, *, axis=[0], keepdim=False, reduce_all=False):
        axes = _axes("logsumexp", X.ndim, axis, reduce_all)
        m = np.max(X, axis=axes, keepdims=True)
        m = np.where(np.isfinite(m), m, m.dtype.type(0))   # all -inf (or inf) rows: no shift
        with np.errstate(divide="ignore"):
            out = np.log(np.sum(np.exp(X - m), axis=axes, keepdims=True)) + m
        out = out.astype(X.dtype, copy=False)
        if not keepdim:
            out = out.reshape(S.reduce_shape(X.shape, axes, False, axes is None))
        return {"Out": out}

    def backward(self, X, Out, dOut, *, axis=[0], keepdim=False, reduce_all=False):
        axes = _axes("logsumexp", X.ndim, axis, reduce_all)
        kept = S.reduce_shape(X.shape, axes, True, axes is None)
        return {"X": (np.exp(X - Out.reshape(kept)) * dOut.reshape(kept)).astype(X.dtype)}


@register
class LogSoftmax(OpDef):
    """Out = z - log(sum(exp(z), axis)) with z = max(X - max(X, axis), -64) (fluid's
    LogSoftmaxFunctor and its ValueClip: Out >= -64 - log(n));
    dX = dOut - exp(Out) * sum(dOut, axis)."""
    type, inputs, outputs = "log_softmax", ("X",), ("Out",)
    grad_uses = ("Out",)
    grad_like = {"X": "Out"}

    def infer(self, X, *, axis=-1):
        _float_input("log_softmax", "X", X)
        norm_axis("log_softmax", axis, max(len(X.shape), 1))
        return {"Out": X}

    def forward(self, X, *, axis=-1):
        z = X - np.max(X, axis=axis, keepdims=True)
        np.maximum(z, z.dtype.type(-64), out=z)         # fluid's ValueClip
        return {"Out": z - np.log(np.sum(np.exp(z), axis=axis, keepdims=True))}

    def backward(self, Out, dOut, *, axis=-1):
        return {"X": dOut - np.exp(Out) * np.sum(dOut, axis=axis, keepdims=True)}


# -- more reductions -----------------------------------------------------------------------------
@register
class ReduceProd(_Reduce):
    """Out = prod(X, dim);  dX = dOut * (product of the other reduced entries) -- computed from
    prefix and suffix products, so zeros in X give the exact gradient (not dOut * Out / X)."""
    type = "reduce_prod"
    grad_uses = ("X",)
    _np = staticmethod(np.prod)

    def _kernel(self, X, axes, keep_dim):
        return np.prod(X, axis=axes, keepdims=keep_dim, dtype=X.dtype)

    def backward(self, X, dOut, *, dim=[0], keep_dim=False, reduce_all=False):
        axes = _axes("reduce_prod", X.ndim, dim, reduce_all)
        axes = tuple(range(X.ndim)) if axes is None else axes
        k = len(axes)
        moved = np.moveaxis(X, axes, tuple(range(X.ndim - k, X.ndim)))
        flat = moved.reshape(moved.shape[:X.ndim - k] + (-1,))
        ones = np.ones(flat.shape[:-1] + (1,), dtype=X.dtype)
        left = np.cumprod(np.concatenate([ones, flat[..., :-1]], -1), -1)
        right = np.flip(np.cumprod(np.concatenate([ones, np.flip(flat, -1)[..., :-1]], -1),
                                   -1), -1)
        d = self._expand(X, dOut, dim, reduce_all)
        d = np.moveaxis(d, axes, tuple(range(X.ndim - k, X.ndim)))
        g = (left * right).reshape(moved.shape) * d
        return {"X": np.moveaxis(g, tuple(range(X.ndim - k, X.ndim)), axes).astype(X.dtype)}


class _ReduceBool(_Reduce):
    no_grad = True

    def infer(self, X, *, dim=(0,), keep_dim=False, reduce_all=False):
        if X.dtype != VarType.BOOL:
            raise ValueError(f"{self.type}: X must be a bool tensor, but it is "
                             f"{convert_dtype(X.dtype)}; compare first (e.g. x > 0) or cast "
                             f"to bool")
        return super().infer(X, dim=dim, keep_dim=keep_dim, reduce_all=reduce_all)


@register
class ReduceAll(_ReduceBool):
    """Out = logical AND of X over ``dim`` (bool). Not differentiable."""
    type = "reduce_all"
    _np = staticmethod(np.all)


@register
class ReduceAny(_ReduceBool):
    """Out = logical OR of X over ``dim`` (bool). Not differentiable."""
    type = "reduce_any"
    _np = staticmethod(np.any)


# -- checks over a whole tensor -----------------------------------------------------------------
class _WholeCheck(OpDef):
    inputs, outputs = ("X",), ("Out",)
    no_grad = True

    def infer(self, X):
        return {"Out": VarSpec((1,), VarType.BOOL)}

    def forward(self, X):
        x = np.asarray(X)
        if x.dtype.kind not in "fc":     # integers are always finite
            return {"Out": np.array([self.type == "isfinite"])}
        return {"Out": np.array([bool(self._test(x))])}


@register
class IsFinite(_WholeCheck):
    """Out = [True] when every entry of X is finite (no inf, no nan), else [False]."""
    type = "isfinite"
    _test = staticmethod(lambda x: np.isfinite(x).all())


@register
class IsInf(_WholeCheck):
    """Out = [True] when any entry of X is +-inf."""
    type = "isinf"
    _test = staticmethod(lambda x: np.isinf(x).any())


@register
class IsNan(_WholeCheck):
    """Out = [True] when any entry of X is nan."""
    type = "isnan"
    _test = staticmethod(lambda x: np.isnan(x).any())


@register
class Size(OpDef):
    """Out = [number of elements of Input] (int64). Not differentiable."""
    type, inputs, outputs = "size", ("Input",), ("Out",)
    no_grad = True

    def infer(self, Input):
        return {"Out": VarSpec((1,), VarType.INT64)}

    def forward(self, Input):
        return {"Out": np.array([np.size(Input)], dtype=np.int64)}


# -- products ------------------------------------------------------------------------------------
def _kron_ranks(x: Sequence[int], y: Sequence[int]) -> Tuple[Tuple[int, ...], Tuple[int, ...]]:
    n = max(len(x), len(y))
    return (1,) * (n - len(x)) + tuple(x), (1,) * (n - len(y)) + tuple(y)


@register
class Kron(OpDef):
    """Out = kron(X, Y): Out[i * dY + j] = X[i] * Y[j] per dim (ranks padded with leading 1s);
    dX[i] = sum_j dOut[i * dY + j] Y[j], dY[j] = sum_i dOut[i * dY + j] X[i]."""
    type, inputs, outputs = "kron", ("X", "Y"), ("Out",)

    def infer(self, X, Y):
        xs, ys = _kron_ranks(X.shape, Y.shape)
        return {"Out": X.with_(shape=[a * b if a >= 0 and b >= 0 else -1
                                      for a, b in zip(xs, ys)])}

    def forward(self, X, Y):
        return {"Out": np.kron(X, Y).astype(np.result_type(X, Y), copy=False)}

    def backward(self, X, Y, dOut):
        xs, ys = _kron_ranks(X.shape, Y.shape)
        n = len(xs)
        inter = tuple(v for p in zip(xs, ys) for v in p)        # (x0, y0, x1, y1, ...)
        d = dOut.reshape(inter)
        xb = X.reshape(xs).reshape(tuple(v for a in xs for v in (a, 1)))
        yb = Y.reshape(ys).reshape(tuple(v for b in ys for v in (1, b)))
        dx = (d * yb).sum(axis=tuple(range(1, 2 * n, 2))).reshape(X.shape)
        dy = (d * xb).sum(axis=tuple(range(0, 2 * n, 2))).reshape(Y.shape)
        return {"X": dx.astype(X.dtype, copy=False), "Y": dy.astype(Y.dtype, copy=False)}


@register
class Dot(OpDef):
    """Out = sum(X * Y, last axis) with the last dim kept as 1 (1-D: shape [1]; 2-D [N, D]:
    [N, 1]);  dX = dOut * Y, dY = dOut * X."""
    type, inputs, outputs = "dot", ("X", "Y"), ("Out",)

    def infer(self, X, Y):
        if len(X.shape) not in (1, 2) or len(X.shape) != len(Y.shape) or not all(
                S.dims_match(a, b) for a, b in zip(X.shape, Y.shape)):
            raise ValueError(f"dot: X and Y must be 1-D or 2-D tensors of the same shape, but "
                             f"received X {list(X.shape)} and Y {list(Y.shape)}")
        return {"Out": X.with_(shape=tuple(X.shape[:-1]) + (1,))}

    def forward(self, X, Y):
        return {"Out": np.sum(X * Y, axis=-1, keepdims=True)}

    def backward(self, X, Y, dOut):
        return {"X": dOut * Y, "Y": dOut * X}


@register
class Bmm(OpDef):
    """Out[b] = X[b] @ Y[b] for X [B, M, K], Y [B, K, N];  dX = dOut @ Y^T, dY = X^T @ dOut."""
    type, inputs, outputs = "bmm", ("X", "Y"), ("Out",)

    def infer(self, X, Y):
        if len(X.shape) != 3 or len(Y.shape) != 3:
            raise ValueError(f"bmm: X and Y must be 3-D tensors, but received X "
                             f"{list(X.shape)} and Y {list(Y.shape)}")
        if not S.dims_match(X.shape[0], Y.shape[0]) or not S.dims_match(X.shape[2],
                                                                         Y.shape[1]):
            raise ValueError(f"bmm: X [B, M, K] and Y [B, K, N] must agree on B and K, but "
                             f"received X {list(X.shape)} and Y {list(Y.shape)}")
        return {"Out": X.with_(shape=(S.known(X.shape[0], Y.shape[0]), X.shape[1],
                                      Y.shape[2]))}

    def forward(self, X, Y):
        return {"Out": np.matmul(X, Y)}

    def backward(self, X, Y, dOut):
        return {"X": np.matmul(dOut, Y.transpose(0, 2, 1)),
                "Y": np.matmul(X.transpose(0, 2, 1), dOut)}


_CROSS_DEFAULT = 9    # fluid's kDefaultDim: "the first axis of size 3"


def _cross_axis(shape: Sequence[int], dim: int) -> int:
    if dim == _CROSS_DEFAULT:
        for i, d in enumerate(shape):
            if d == 3:
                return i
        raise ValueError(f"cross: no axis of size 3 in input shape {list(shape)}; pass dim")
    a = norm_axis("cross", dim, len(shape), "dim")
    if shape[a] not in (3, -1):
        raise ValueError(f"cross: dim {dim} of input shape {list(shape)} must have size 3, but "
                         f"it is {shape[a]}")
    return a


@register
class Cross(OpDef):
    """Out = X x Y (the 3-vector cross product along ``dim``; default: the first axis of size
    3);  dX = Y x dOut, dY = dOut x X."""
    type, inputs, outputs = "cross", ("X", "Y"), ("Out",)

    def infer(self, X, Y, *, dim=_CROSS_DEFAULT):
        if len(X.shape) != len(Y.shape) or not all(S.dims_match(a, b)
                                                   for a, b in zip(X.shape, Y.shape)):
            raise ValueError(f"cross: X and Y must have the same shape, but received X "
                             f"{list(X.shape)} and Y {list(Y.shape)}")
        _cross_axis(X.shape, dim)
        return {"Out": X}

    def forward(self, X, Y, *, dim=_CROSS_DEFAULT):
        a = _cross_axis(X.shape, dim)
        return {"Out": np.cross(X, Y, axis=a)}

    def backward(self, X, Y, dOut, *, dim=_CROSS_DEFAULT):
        a = _cross_axis(X.shape, dim)
        return {"X": np.cross(Y, dOut, axis=a), "Y": np.cross(dOut, X, axis=a)}


def _trace_axes(op_type: str, rank: int, dim1: int, dim2: int) -> Tuple[int, int]:
    if rank < 2:
        raise ValueError(f"{op_type}: the input must have at least 2 dims, but it has {rank}")
    a, b = norm_axis(op_type, dim1, rank, "dim1"), norm_axis(op_type, dim2, rank, "dim2")
    if a == b:
        raise ValueError(f"{op_type}: dim1 and dim2 must be different axes, but both are {a}")
    return a, b


@register
class Trace(OpDef):
    """Out = sum of the ``offset`` diagonal of the (dim1, dim2) planes of Input (those two dims
    removed; a matrix gives [1]);  dInput = dOut on that diagonal, 0 elsewhere."""
    type, inputs, outputs = "trace", ("Input",), ("Out",)

    def infer(self, Input, *, offset=0, dim1=0, dim2=1):
        a, b = _trace_axes("trace", len(Input.shape), dim1, dim2)
        shape = [d for i, d in enumerate(Input.shape) if i not in (a, b)]
        return {"Out": Input.with_(shape=shape or [1])}

    def forward(self, Input, *, offset=0, dim1=0, dim2=1):
        a, b = _trace_axes("trace", Input.ndim, dim1, dim2)
        return {"Out": _as_one(np.trace(Input, offset=offset, axis1=a, axis2=b)
                               ).astype(Input.dtype, copy=False)}

    def backward(self, Input, dOut, *, offset=0, dim1=0, dim2=1):
        a, b = _trace_axes("trace", Input.ndim, dim1, dim2)
        eye = np.eye(Input.shape[a], Input.shape[b], k=offset, dtype=Input.dtype)
        shape = [1] * Input.ndim
        shape[a], shape[b] = Input.shape[a], Input.shape[b]
        eye = eye.reshape(shape) if a < b else eye.T.reshape(shape)
        d = dOut.reshape([1 if i in (a, b) else n for i, n in enumerate(Input.shape)])
        return {"Input": (eye * d).astype(Input.dtype, copy=False)}


@register
class Addmm(OpDef):
    """Out = Beta * Input + Alpha * (X @ Y), Input broadcast to [M, N];
    dInput = Beta * dOut (summed to Input's shape), dX = Alpha dOut @ Y^T,
    dY = Alpha X^T @ dOut."""
    type, inputs, outputs = "addmm", ("Input", "X", "Y"), ("Out",)

    def infer(self, Input, X, Y, *, Alpha=1.0, Beta=1.0):
        if len(X.shape) != 2 or len(Y.shape) != 2 or not S.dims_match(X.shape[1], Y.shape[0]):
            raise ValueError(f"addmm: X [M, K] and Y [K, N] must be matrices with matching K, "
                             f"but received X {list(X.shape)} and Y {list(Y.shape)}")
        out = (X.shape[0], Y.shape[1])
        try:
            ok = len(Input.shape) <= 2 and _np_broadcast("addmm", Input.shape, out) == out
        except ValueError:
            ok = False
        if not ok:
            raise ValueError(f"addmm: Input must broadcast to [M, N] = {list(out)}, but its "
                             f"shape is {list(Input.shape)}")
        return {"Out": X.with_(shape=out)}

    def forward(self, Input, X, Y, *, Alpha=1.0, Beta=1.0):
        out = np.matmul(X, Y) * X.dtype.type(Alpha) + Input * X.dtype.type(Beta)
        return {"Out": out.astype(X.dtype, copy=False)}

    def backward(self, Input, X, Y, dOut, *, Alpha=1.0, Beta=1.0):
        a = dOut.dtype.type(Alpha)
        return {"Input": _unbroadcast(dOut * dOut.dtype.type(Beta), Input.shape),
                "X": np.matmul(dOut, Y.T) * a, "Y": np.matmul(X.T, dOut) * a}


# -- comparisons and distances ------------------------------------------------------------------
@register
class Allclose(OpDef):
    """Out = [all(|Input - Other| <= atol + rtol * |Other|)] (nan equal to nan when
    ``equal_nan``). Not differentiable."""
    type, inputs, outputs = "allclose", ("Input", "Other"), ("Out",)
    no_grad = True

    def infer(self, Input, Other, *, rtol=1e-5, atol=1e-8, equal_nan=False):
        _np_broadcast("allclose", Input.shape, Other.shape)
        return {"Out": VarSpec((1,), VarType.BOOL)}

    def forward(self, Input, Other, *, rtol=1e-5, atol=1e-8, equal_nan=False):
        ok = np.isclose(Input, Other, rtol=rtol, atol=atol, equal_nan=equal_nan)
        return {"Out": np.array([bool(np.all(ok))])}


@register
class Dist(OpDef):
    """Out = [||X - Y||_p] over all entries of the broadcast difference z (p = 0: number of
    nonzeros; inf / -inf: max / min |z|);  dX = dOut * dnorm/dz summed to X's shape,
    dY = -(the same) summed to Y's shape (zero for p = 0)."""
    type, inputs, outputs = "dist", ("X", "Y"), ("Out",)
    grad_uses = ("X", "Y", "Out")

    def infer(self, X, Y, *, p=2.0):
        _np_broadcast("dist", X.shape, Y.shape)
        return {"Out": X.with_(shape=(1,))}

    def forward(self, X, Y, *, p=2.0):
        z = np.abs(X - Y)
        if p == 0:
            r = np.count_nonzero(z)
        elif np.isinf(p):
            r = z.max() if p > 0 else z.min()
        else:
            t = z.dtype.type
            r = np.sum(z ** t(p)) ** (t(1) / t(p))
        return {"Out": np.array([r], dtype=X.dtype)}

    def backward(self, X, Y, Out, dOut, *, p=2.0):
        z = X - Y
        n = Out.reshape(())
        if p == 0 or n == 0:
            g = np.zeros_like(z)
        elif np.isinf(p):
            g = np.sign(z) * (np.abs(z) == n)
        else:
            g = np.sign(z) * np.abs(z) ** (p - 1) / n ** (p - 1)
        g = g * dOut.reshape(())
        return {"X": _unbroadcast(g, X.shape).astype(X.dtype, copy=False),
                "Y": _unbroadcast(-g, Y.shape).astype(Y.dtype, copy=False)}

