"""Reductions: mean and reduce_{sum,mean,max,min}. fluid reduces to shape [1], never [].

First-order gradients are fused kernels (``<type>_grad``); their second-order rules
(``double_grad``) are compositions: the gradient of ``dX = broadcast(dOut)`` w.r.t. dOut is the
same reduction of ddX, so every order is differentiable.
"""
from __future__ import annotations

from typing import Optional, Sequence, Tuple

import numpy as np

from ..core import shape as S
from ..core.names import live
from ..core.registry import OpDef, VarSpec, register
from .tensor import norm_axis


def _mean(x: np.ndarray) -> np.ndarray:
    """np.mean(x, dtype=x.dtype) as a [1] array: the same pairwise sum and division, without
    np.mean's Python-level wrapper (4x cheaper on small tensors). The divisor is a scalar of the
    sum's dtype, so NumPy 1 and 2 divide alike. The mean of an empty tensor is NaN (as fluid)."""
    if x.size == 0:
        return np.full((1,), np.nan, dtype=x.dtype)
    s = np.add.reduce(x, axis=None)
    return np.array([s / s.dtype.type(x.size)], dtype=x.dtype)


@register
class Mean(OpDef):
    """Out = mean(X) with shape [1];  dX = dOut / numel(X) broadcast to X's shape."""
    type, inputs, outputs = "mean", ("X",), ("Out",)

    def infer(self, X):
        return {"Out": VarSpec((1,), X.dtype)}

    def forward(self, X):
        return {"Out": _mean(X)}

    def lower(self, in_specs, attrs):
        return _mean

    def backward(self, X, dOut):
        # np.full's own two steps (empty + an unsafe-casting fill) without its Python wrapper
        # (a scalar of dOut's dtype divided by a Python int: the 0-d array division's value,
        # without a ufunc call)
        dx = np.empty(X.shape, X.dtype)
        g = dOut.reshape(-1)[0]
        dx.fill(g / g.dtype.type(max(X.size, 1)))
        return {"X": dx}

    def double_grad(self, g, **attrs):
        """mean_grad is linear in dOut:  d(dOut) = mean(ddX)."""
        dd, target = live(g.output_grad("X@GRAD")), g.input_grad("Out@GRAD")
        if dd is not None and target is not None:
            g.append("mean", {"X": dd}, {"Out": target})


def _axes(op_type: str, rank: int, dim: Sequence[int],
          reduce_all: bool) -> Optional[Tuple[int, ...]]:
    """Normalized reduce axes; None means every axis. Every entry of ``dim`` is checked even
    when ``reduce_all`` is set (as fluid's ReduceOp::InferShape does): fluid's layers set
    reduce_all when ``len(dim) == rank``, so ``dim=[0, 5]`` on a rank-2 input must not silently
    reduce everything."""
    if rank == 0:
        return None
    axes = {norm_axis(op_type, int(d), rank, "dim") for d in dim}
    if reduce_all or not axes or len(axes) == rank:
        return None
    return tuple(sorted(axes))


class _Reduce(OpDef):
    inputs, outputs = ("X",), ("Out",)
    extra_attrs = {"in_dtype": -1, "out_dtype": -1, "use_mkldnn": False}
    _np = staticmethod(np.sum)

    def infer(self, X, *, dim=(0,), keep_dim=False, reduce_all=False):
        axes = _axes(self.type, len(X.shape), dim, reduce_all)
        shape = S.reduce_shape(X.shape, axes, keep_dim, axes is None)
        return {"Out": VarSpec(shape, X.dtype)}

    def _reduce(self, X, dim, keep_dim, reduce_all):
        axes = _axes(self.type, X.ndim, dim, reduce_all)
        out = self._kernel(X, axes, keep_dim)
        if axes is None and not keep_dim or out.ndim == 0:
            out = out.reshape(1)
        return out

    def _kernel(self, X, axes, keep_dim):
        return self._np(X, axis=axes, keepdims=keep_dim)

    def forward(self, X, *, dim=[0], keep_dim=False, reduce_all=False):
        return {"Out": self._reduce(X, dim, keep_dim, reduce_all)}

    def lower(self, in_specs, attrs):
        dim, keep, rall = attrs.get("dim", [0]), attrs.get("keep_dim", False), \
            attrs.get("reduce_all", False)
        return lambda x: self._reduce(x, dim, keep, rall)

    @staticmethod
    def _expand(X, dOut, dim, reduce_all):
        """dOut reshaped so that it broadcasts against X."""
        axes = _axes("reduce", X.ndim, dim, reduce_all)
        if axes is None:
            return dOut.reshape((1,) * X.ndim)
        shape = list(X.shape)
        for a in axes:
            shape[a] = 1
        return dOut.reshape(shape)


def _slices_pay(X: np.ndarray, axis: int) -> bool:
    """Whether ``_sum_slices`` beats ``np.sum`` over ``axis``: a middle axis of at most 256
    with at most 32 elements after it and 256 or more before it. NumPy then walks the output in
    rows of those few inner elements, one inner loop per row and summed element, where
    whole-slice adds run long loops: DeepFM's sum over 39 fields of [512, 39, 16] takes 0.26
    ms against 0.52, [4096, 10, 8] 0.38 against 1.13."""
    if X.dtype not in (np.float32, np.float64) or not 0 < axis < X.ndim - 1:
        return False
    inner = int(np.prod(X.shape[axis + 1:]))
    outer = X.size // max(X.shape[axis] * inner, 1)
    return 2 <= X.shape[axis] <= 256 and 2 <= inner <= 32 and outer >= 256


def _sum_slices(X: np.ndarray, axis: int) -> np.ndarray:
    """sum over ``axis`` as whole-slice adds in index order: each output element adds its
    inputs one after another from the first, as ``np.sum`` over a middle axis does (the same
    bits), on NumPy 1 and 2 alike."""
    lead = (slice(None),) * axis
    out = X[lead + (0,)].copy()
    for i in range(1, X.shape[axis]):
        np.add(out, X[lead + (i,)], out=out)
    return out


@register
class ReduceSum(_Reduce):
    """Out = sum(X, dim);  dX = broadcast(dOut) to X's shape."""
    type = "reduce_sum"
    grad_uses = ("X",)

    def _kernel(self, X, axes, keep_dim):
        if axes is not None and len(axes) == 1 and _slices_pay(X, axes[0]):
            out = _sum_slices(X, axes[0])
            return np.expand_dims(out, axes[0]) if keep_dim else out
        return np.sum(X, axis=axes, keepdims=keep_dim, dtype=X.dtype)

    def backward(self, X, dOut, *, dim=[0], keep_dim=False, reduce_all=False):
        return {"X": np.broadcast_to(self._expand(X, dOut, dim, reduce_all), X.shape).copy()}

    def double_grad(self, g, **attrs):
        """reduce_sum_grad is linear in dOut:  d(dOut) = reduce_sum(ddX)."""
        dd, target = live(g.output_grad("X@GRAD")), g.input_grad("Out@GRAD")
        if dd is not None and target is not None:
            g.append("reduce_sum", {"X": dd}, {"Out": target}, attrs)


@register
class ReduceMean(_Reduce):
    """Out = mean(X, dim);  dX = broadcast(dOut) / (number of reduced elements)."""
    type = "reduce_mean"
    grad_uses = ("X",)

    def _kernel(self, X, axes, keep_dim):
        out = np.mean(X, axis=axes, keepdims=keep_dim, dtype=X.dtype)
        return np.asarray(out, dtype=X.dtype)

    def backward(self, X, dOut, *, dim=[0], keep_dim=False, reduce_all=False):
        d = self._expand(X, dOut, dim, reduce_all)
        n = max(X.size // max(d.size, 1), 1)
        return {"X": np.broadcast_to(d / dOut.dtype.type(n), X.shape).astype(dOut.dtype)}

    def double_grad(self, g, **attrs):
        """reduce_mean_grad is linear in dOut:  d(dOut) = reduce_mean(ddX)."""
        dd, target = live(g.output_grad("X@GRAD")), g.input_grad("Out@GRAD")
        if dd is not None and target is not None:
            g.append("reduce_mean", {"X": dd}, {"Out": target}, attrs)


class _ReduceExtremum(_Reduce):
    """dX = dOut where X equals the extremum (every tied entry gets it, as fluid)."""
    grad_uses = ("X", "Out")

    def backward(self, X, Out, dOut, *, dim=[0], keep_dim=False, reduce_all=False):
        mask = X == self._expand(X, Out, dim, reduce_all)
        return {"X": (self._expand(X, dOut, dim, reduce_all) * mask).astype(dOut.dtype)}

    def double_grad(self, g, **attrs):
        """<type>_grad is linear in dOut:  d(dOut) = sum over the reduced dims of ddX * mask,
        computed by ``<type>_grad_grad`` (whose own gradient is ``<type>_grad`` again)."""
        dd, target = live(g.output_grad("X@GRAD")), g.input_grad("Out@GRAD")
        if dd is not None and target is not None:
            g.append(self.forward_def.type + "_grad_grad",
                     {"X": g.input("X"), "Out": g.input("Out"), "DDX": dd},
                     {"DDOut": target}, attrs)


@register
class ReduceMax(_ReduceExtremum):
    """Out = max(X, dim);  dX = dOut * (X == Out)."""
    type = "reduce_max"
    _np = staticmethod(np.max)


@register
class ReduceMin(_ReduceExtremum):
    """Out = min(X, dim);  dX = dOut * (X == Out)."""
    type = "reduce_min"
    _np = staticmethod(np.min)


class _ExtremumGradGrad(OpDef):
    """DDOut = sum over the reduced dims of DDX * (X == Out) (the adjoint of <type>_grad in
    dOut); its gradient w.r.t. DDX is ``<type>_grad(X, Out, dDDOut)``."""
    inputs, outputs = ("X", "Out", "DDX"), ("DDOut",)
    extra_attrs = _Reduce.extra_attrs

    def infer(self, X, Out, DDX, **_):
        return {"DDOut": Out}

    def forward(self, X, Out, DDX, *, dim=[0], keep_dim=False, reduce_all=False):
        mask = X == _Reduce._expand(X, Out, dim, reduce_all)
        axes = _axes(self.type, X.ndim, dim, reduce_all)
        out = np.sum(DDX * mask, axis=axes, keepdims=True, dtype=DDX.dtype)
        return {"DDOut": out.reshape(Out.shape)}

    def make_grad(self, g, **attrs):
        target = g.input_grad("DDX")
        if target is not None:
            g.append(self.type[:-len("_grad_grad")] + "_grad",
                     {"X": g.input("X"), "Out": g.input("Out"),
                      "Out@GRAD": g.output_grad("DDOut")}, {"X@GRAD": target}, attrs)


@register
class ReduceMaxGradGrad(_ExtremumGradGrad):
    """DDOut = sum_dim(DDX * (X == Out)): the second-order term of reduce_max."""
    type = "reduce_max_grad_grad"


@register
class ReduceMinGradGrad(_ExtremumGradGrad):
    """DDOut = sum_dim(DDX * (X == Out)): the second-order term of reduce_min."""
    type = "reduce_min_grad_grad"
