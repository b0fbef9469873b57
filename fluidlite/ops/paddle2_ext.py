"""More ops Paddle 2.x exports hold that fluid 1.8 lacked (``paddle.jit.save`` /
``paddle.static.save_inference_model`` of PaddleClas / OCR / Detection / NLP models), with
Paddle 2.6's slots, attributes and numbers (tests/ops/test_paddle_oracle.py runs each in
Paddle 2.6 too):

* elementwise math: ``tan``, ``sinh``, ``cosh``, ``asinh``, ``acosh``, ``atanh``, ``log2``,
  ``log10``, ``expm1``, ``trunc``, ``erfinv``, ``celu``, ``logit``, ``atan2``, ``lerp``;
* ``reduce_amax`` / ``reduce_amin`` (the gradient shared evenly by tied extremes),
  ``cumprod``, ``diagonal``;
* index ops: ``take_along_axis``, ``put_along_axis`` (assign / add), ``index_add``,
  ``repeat_interleave``, ``set_value`` (what ``x[1:, ::2] = v`` in a to-static function
  writes);
* layout: ``channel_shuffle``, ``pixel_unshuffle``;
* ``viterbi_decode`` (``paddle.text.viterbi_decode``: PaddleNLP's CRF taggers).

Gradients are ``backward`` rules registered as ``<type>_grad`` with Paddle's slot names.
"""
from __future__ import annotations

import math
from typing import Any, List, Sequence, Tuple

import numpy as np

from ..core.dtypes import FLOATS, VarType
from ..core.registry import OpDef, VarSpec, register
from .activation import _Act, erf_numpy
from .broadcast import reduce_to
from .reduce import _Reduce, _axes as _reduce_axes
from .tensor import norm_axis


class _Unary(_Act):
    double_grad = None        # first order only, as Paddle's


def _unary(op_type: str, doc: str, f: Any, grad: Any, uses: str = "X") -> type:
    """A float elementwise op: Out = f(X), dX = grad(X or Out, dOut)."""
    if uses == "X":
        def backward(self: Any, X: np.ndarray, dOut: np.ndarray) -> dict:
            return {"X": grad(X, dOut)}
    else:
        def backward(self: Any, Out: np.ndarray, dOut: np.ndarray) -> dict:  # type: ignore
            return {"X": grad(Out, dOut)}

    attrs = {"__doc__": doc, "type": op_type, "f": staticmethod(f), "grad_uses": (uses,),
             "backward": backward}
    return register(type(op_type.title().replace("_", ""), (_Unary,), attrs))


_LN2, _LN10 = math.log(2.0), math.log(10.0)
_unary("tan", "Out = tan(X);  dX = dOut * (1 + Out^2).", np.tan,
       lambda out, d: d * (1 + out * out), uses="Out")
_unary("sinh", "Out = sinh(X);  dX = dOut * cosh(X).", np.sinh, lambda x, d: d * np.cosh(x))
_unary("cosh", "Out = cosh(X);  dX = dOut * sinh(X).", np.cosh, lambda x, d: d * np.sinh(x))
_unary("asinh", "Out = asinh(X);  dX = dOut / sqrt(X^2 + 1).", np.arcsinh,
       lambda x, d: d / np.sqrt(x * x + 1))
_unary("acosh", "Out = acosh(X);  dX = dOut / sqrt(X^2 - 1).", np.arccosh,
       lambda x, d: d / np.sqrt(x * x - 1))
_unary("atanh", "Out = atanh(X);  dX = dOut / (1 - X^2).", np.arctanh,
       lambda x, d: d / (1 - x * x))
_unary("log2", "Out = log2(X);  dX = dOut / (X ln 2).", np.log2,
       lambda x, d: d / (x * x.dtype.type(_LN2)))
_unary("log10", "Out = log10(X);  dX = dOut / (X ln 10).", np.log10,
       lambda x, d: d / (x * x.dtype.type(_LN10)))
_unary("expm1", "Out = exp(X) - 1;  dX = dOut * (Out + 1).", np.expm1,
       lambda out, d: d * (out + 1), uses="Out")


@register
class Trunc(_Unary):
    """Out = X rounded toward zero;  dX = 0 (Paddle's trunc_grad)."""
    type = "trunc"
    f = staticmethod(np.trunc)

    def backward(self, X, dOut):
        return {"X": np.zeros_like(dOut)}


def erfinv_numpy(y: np.ndarray) -> np.ndarray:
    """The inverse of erf on (-1, 1) (+-inf at +-1, NaN outside): Giles' single-precision
    approximation refined by two Newton steps on erf in float64."""
    y64 = np.asarray(y, np.float64)
    w = -np.log(np.maximum((1.0 - y64) * (1.0 + y64), 1e-300))
    small = w < 5.0
    ws, wl = w - 2.5, np.sqrt(w) - 3.0
    ps = np.polyval([2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06,
                     0.00021858087, -0.00125372503, -0.00417768164, 0.246640727, 1.50140941], ws)
    pl = np.polyval([-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844,
                     0.00573950773, -0.0076224613, 0.00943887047, 1.00167406, 2.83297682], wl)
    x = np.where(small, ps, pl) * y64
    with np.errstate(divide="ignore", invalid="ignore"):      # (at +-1: replaced below)
        for _ in range(2):
            err = erf_numpy(x) - y64
            x = x - err / (2.0 / math.sqrt(math.pi) * np.exp(-x * x))
    x = np.where(np.abs(y64) == 1.0, np.copysign(np.inf, y64), x)
    return np.where(np.abs(y64) > 1.0, np.nan, x).astype(np.asarray(y).dtype, copy=False)


@register
class Erfinv(_Unary):
    """Out = erfinv(X);  dX = dOut * sqrt(pi) / 2 * exp(Out^2)."""
    type = "erfinv"
    f = staticmethod(erfinv_numpy)
    grad_uses = ("Out",)

    def backward(self, Out, dOut):
        return {"X": dOut * (Out.dtype.type(math.sqrt(math.pi) / 2) * np.exp(Out * Out))}


@register
class Celu(_Unary):
    """Out = max(0, X) + min(0, alpha (exp(X / alpha) - 1));
    dX = dOut * (1 if X > 0 else exp(X / alpha))."""
    type = "celu"

    @staticmethod
    def f(x, alpha=1.0):
        a = x.dtype.type(np.float32(alpha))     # a FLOAT attribute: 32 bits, as in Paddle
        return np.where(x > 0, x, a * np.expm1(np.minimum(x, 0) / a))

    def infer(self, X, *, alpha=1.0):
        if alpha == 0:
            raise ValueError("celu: alpha must not be 0")
        return super().infer(X)

    def forward(self, X, *, alpha=1.0):
        return {"Out": self.f(X, alpha)}

    def backward(self, X, dOut, *, alpha=1.0):
        a = X.dtype.type(np.float32(alpha))
        return {"X": dOut * np.where(X > 0, 1, np.exp(np.minimum(X, 0) / a))}


@register
class Logit(_Unary):
    """Out = ln(x / (1 - x)), x = X clipped to [eps, 1 - eps] when eps > 0;
    dX = dOut / (X (1 - X)) inside [eps, 1 - eps], 0 outside (eps = 0 too, as Paddle 2.6)."""
    type = "logit"

    @staticmethod
    def f(x, eps=1e-6):
        if eps > 0:                   # (eps a FLOAT attribute: 32 bits, as in Paddle)
            e = x.dtype.type(np.float32(eps))
            x = np.clip(x, e, x.dtype.type(1) - e)     # 1 - e in X's dtype, as Paddle's T
        return np.log(x / (1 - x))

    def forward(self, X, *, eps=1e-6):
        return {"Out": self.f(X, eps)}

    def backward(self, X, dOut, *, eps=1e-6):
        # Paddle's rule for every eps, 0 included: 0 outside [eps, 1 - eps] (with eps = 0,
        # where Out is NaN); the division is not warned about at the 0s and 1s it skips
        e = X.dtype.type(np.float32(eps))
        inside = (X >= e) & (X <= X.dtype.type(1) - e)
        with np.errstate(divide="ignore", invalid="ignore"):
            g = dOut / (X * (1 - X))
        return {"X": np.where(inside, g, g.dtype.type(0)).astype(dOut.dtype)}


@register
class Atan2(OpDef):
    """Out = atan2(X1, X2) (numpy broadcasting);  dX1 = dOut X2 / (X1^2 + X2^2),
    dX2 = -dOut X1 / (X1^2 + X2^2), summed over broadcast dims."""
    type, inputs, outputs = "atan2", ("X1", "X2"), ("Out",)

    def infer(self, X1, X2):
        shapes = [tuple(s.shape) for s in (X1, X2)]
        shape = (-1,) * max(map(len, shapes)) if any(-1 in s for s in shapes) else \
            np.broadcast_shapes(*shapes)
        return {"Out": VarSpec(shape, X1.dtype if X1.dtype in FLOATS else VarType.FP64)}

    def forward(self, X1, X2):
        dt = X1.dtype if X1.dtype.kind == "f" else np.float64
        return {"Out": np.arctan2(X1.astype(dt, copy=False), X2.astype(dt, copy=False))}

    def backward(self, X1, X2, dOut):
        r = X1 * X1 + X2 * X2
        return {"X1": reduce_to(dOut * X2 / r, X1.shape).astype(X1.dtype, copy=False),
                "X2": reduce_to(-dOut * X1 / r, X2.shape).astype(X2.dtype, copy=False)}


@register
class Lerp(OpDef):
    """Out = X + Weight (Y - X) (numpy broadcasting);  dX = dOut (1 - Weight),
    dY = dOut Weight, dWeight = dOut (Y - X), each summed over its broadcast dims."""
    type, inputs, outputs = "lerp", ("X", "Y", "Weight"), ("Out",)

    def infer(self, X, Y, Weight):
        shapes = [tuple(s.shape) for s in (X, Y, Weight)]
        if any(-1 in s for s in shapes):
            n = max(len(s) for s in shapes)
            return {"Out": VarSpec((-1,) * n, X.dtype)}
        return {"Out": VarSpec(np.broadcast_shapes(*shapes), X.dtype)}

    def forward(self, X, Y, Weight):
        return {"Out": (X + Weight * (Y - X)).astype(X.dtype, copy=False)}

    def backward(self, X, Y, Weight, dOut):
        return {"X": reduce_to(dOut * (1 - Weight), X.shape),
                "Y": reduce_to(dOut * Weight, Y.shape),
                "Weight": reduce_to(dOut * (Y - X), Weight.shape)}


# -- reductions and scans ---------------------------------------------------------------------
class _ReduceShared(_Reduce):
    """reduce_max / reduce_min's forward; dX = dOut / (number of tied extremes) at each of
    them (Paddle 2.x's amax / amin; fluid's max / min give every tie the whole dOut)."""
    grad_uses = ("X", "Out")

    def backward(self, X, Out, dOut, *, dim=[0], keep_dim=False, reduce_all=False):
        mask = X == self._expand(X, Out, dim, reduce_all)
        axes = _reduce_axes(self.type, X.ndim, dim, reduce_all)
        count = mask.sum(axis=axes, keepdims=True).astype(dOut.dtype)
        return {"X": (self._expand(X, dOut, dim, reduce_all) * mask / count)
                .astype(dOut.dtype, copy=False)}


@register
class ReduceAmax(_ReduceShared):
    """Out = max of X over ``dim``; dX = dOut / (number of maxima) at every maximum."""
    type = "reduce_amax"
    _np = staticmethod(np.max)


@register
class ReduceAmin(_ReduceShared):
    """Out = min of X over ``dim``; dX = dOut / (number of minima) at every minimum."""
    type = "reduce_amin"
    _np = staticmethod(np.min)


@register
class Cumprod(OpDef):
    """Out[..., i, ...] = prod_{k <= i} X[..., k, ...] along ``dim``;
    dX_i = prod_{k < i} X_k * S_i with S_i = dOut_i + X_{i+1} S_{i+1} (exact with zeros)."""
    type, inputs, outputs = "cumprod", ("X",), ("Out",)

    def infer(self, X, *, dim=-1):
        if X.shape:
            norm_axis(self.type, dim, len(X.shape), "dim")
        return {"Out": X}

    def forward(self, X, *, dim=-1):
        if X.ndim == 0:
            return {"Out": X.copy()}
        return {"Out": np.cumprod(X, axis=norm_axis(self.type, dim, X.ndim, "dim"))}

    def backward(self, X, dOut, *, dim=-1):
        if X.ndim == 0:
            return {"X": dOut.copy()}
        a = norm_axis(self.type, dim, X.ndim, "dim")
        x, d = np.moveaxis(X, a, -1), np.moveaxis(dOut, a, -1)
        n = x.shape[-1]
        s = np.empty_like(d)
        if n:
            s[..., n - 1] = d[..., n - 1]
        for i in range(n - 2, -1, -1):
            s[..., i] = d[..., i] + x[..., i + 1] * s[..., i + 1]
        before = np.concatenate([np.ones_like(x[..., :1]), np.cumprod(x[..., :-1], axis=-1)],
                                axis=-1) if n else x
        return {"X": np.moveaxis(before * s, -1, a)}


@register
class Diagonal(OpDef):
    """Out = the ``offset`` diagonal of the (axis1, axis2) planes of Input, as a last dim
    (``np.diagonal``);  dInput = dOut on that diagonal, 0 elsewhere."""
    type, inputs, outputs = "diagonal", ("Input",), ("Out",)

    def _axes(self, rank: int, axis1: int, axis2: int) -> Tuple[int, int]:
        a = norm_axis(self.type, axis1, rank, "axis1")
        b = norm_axis(self.type, axis2, rank, "axis2")
        if a == b:
            raise ValueError(f"diagonal: axis1 and axis2 must differ, both are {a}")
        return a, b

    def infer(self, Input, *, offset=0, axis1=0, axis2=1):
        a, b = self._axes(len(Input.shape), axis1, axis2)
        n, m = Input.shape[a], Input.shape[b]
        k = -1 if -1 in (n, m) else max(0, min(n + min(offset, 0), m - max(offset, 0)))
        rest = [d for i, d in enumerate(Input.shape) if i not in (a, b)]
        return {"Out": VarSpec(rest + [k], Input.dtype)}

    def forward(self, Input, *, offset=0, axis1=0, axis2=1):
        a, b = self._axes(Input.ndim, axis1, axis2)
        return {"Out": np.diagonal(Input, offset, a, b).copy()}

    def backward(self, Input, dOut, *, offset=0, axis1=0, axis2=1):
        a, b = self._axes(Input.ndim, axis1, axis2)
        dx = np.zeros(Input.shape, dOut.dtype)
        view = np.diagonal(dx, offset, a, b)
        view.setflags(write=True)
        view[...] = dOut
        return {"Input": dx}


# -- index ops --------------------------------------------------------------------------------
def _checked_index(op: str, index: np.ndarray, size: int) -> np.ndarray:
    idx = np.asarray(index).astype(np.int64, copy=False)
    if idx.size and (idx.min() < -size or idx.max() >= size):
        raise ValueError(f"{op}: index values must be in [{-size}, {size}), but received "
                         f"[{int(idx.min())}, {int(idx.max())}]")
    return np.where(idx < 0, idx + size, idx)


def _along(op: str, shape: Sequence[int], index: Any, axis: int) -> Tuple[int, tuple]:
    """The coordinates an along-axis op reads / writes: Index's own coordinates, with Index's
    values along ``axis`` (Index may be smaller than X on the other dims)."""
    a = norm_axis(op, axis, len(shape), "Axis")
    idx = _checked_index(op, np.asarray(index), shape[a])
    if idx.ndim != len(shape) or any(i != a and n > m for i, (n, m) in
                                     enumerate(zip(idx.shape, shape))):
        raise ValueError(f"{op}: Index {list(idx.shape)} must have X's rank and fit inside X "
                         f"{list(shape)} on every dim but Axis {a}")
    grids = list(np.indices(idx.shape, sparse=True))
    grids[a] = idx
    return a, tuple(grids)


@register
class TakeAlongAxis(OpDef):
    """Result[c] = Input[c with c[Axis] = Index[c]] for every coordinate c of Index (Paddle's
    op: Index may be smaller than Input on the other dims);  dInput = dResult added back at
    the places taken."""
    type, inputs, outputs = "take_along_axis", ("Input", "Index"), ("Result",)
    grad_uses = ("Input", "Index")

    def infer(self, Input, Index, *, Axis=0):
        norm_axis(self.type, Axis, len(Input.shape), "Axis")
        if len(Index.shape) != len(Input.shape):
            raise ValueError(f"take_along_axis: Index must have the rank of Input "
                             f"({len(Input.shape)}), but its shape is {list(Index.shape)}")
        return {"Result": VarSpec(Index.shape, Input.dtype)}

    def forward(self, Input, Index, *, Axis=0):
        _, where = _along(self.type, Input.shape, Index, Axis)
        return {"Result": Input[where]}

    def backward(self, Input, Index, dResult, *, Axis=0):
        _, where = _along(self.type, Input.shape, Index, Axis)
        g = np.zeros(Input.shape, dResult.dtype)
        np.add.at(g, where, dResult)
        return {"Input": g}


@register
class PutAlongAxis(OpDef):
    """Result = Input with Value put along ``Axis`` at Index: ``Reduce`` "assign" (the last
    write wins) or "add" (added to Input's value, or to 0 without ``Include_self``).
    dInput = dResult (zero where assigned, or with "add" and no Include_self);
    dValue = dResult taken at Index."""
    type, inputs, outputs = "put_along_axis", ("Input", "Index", "Value"), ("Result",)
    grad_uses = ("Input", "Index", "Value")

    def infer(self, Input, Index, Value, *, Axis=0, Reduce="assign", Include_self=True):
        norm_axis(self.type, Axis, len(Input.shape), "Axis")
        self._mode(Reduce)
        return {"Result": Input}

    @staticmethod
    def _mode(reduce: str) -> str:
        if reduce not in ("assign", "add"):
            raise ValueError(f"put_along_axis: Reduce {reduce!r} is not supported by fluidlite "
                             f"(use 'assign' or 'add')")
        return reduce

    def _where(self, Input, Index, Value, Axis):
        a, where = _along(self.type, Input.shape, Index, Axis)
        return a, where, np.broadcast_to(Value, np.shape(Index))

    def forward(self, Input, Index, Value, *, Axis=0, Reduce="assign", Include_self=True):
        mode = self._mode(Reduce)
        _, where, value = self._where(Input, Index, Value, Axis)
        out = Input.copy()
        if mode == "assign":
            out[where] = value
        else:
            if not Include_self:
                out[where] = 0
            np.add.at(out, where, value.astype(out.dtype, copy=False))
        return {"Result": out}

    def backward(self, Input, Index, Value, dResult, *, Axis=0, Reduce="assign",
                 Include_self=True):
        mode = self._mode(Reduce)
        _, where, value = self._where(Input, Index, Value, Axis)
        dx = dResult.copy()
        if mode == "assign" or not Include_self:
            dx[where] = 0
        return {"Input": dx, "Value": reduce_to(dResult[where], np.shape(Value))}


@register
class IndexAdd(OpDef):
    """Out = X with AddValue added at Index (1-D) along ``axis`` (repeats add up);
    dX = dOut, dAddValue = dOut taken at Index along ``axis``."""
    type, inputs, outputs = "index_add", ("X", "Index", "AddValue"), ("Out",)
    grad_uses = ("Index", "AddValue")

    def infer(self, X, Index, AddValue, *, axis=0):
        norm_axis(self.type, axis, len(X.shape), "axis")
        return {"Out": X}

    def forward(self, X, Index, AddValue, *, axis=0):
        a = norm_axis(self.type, axis, X.ndim, "axis")
        idx = _checked_index(self.type, np.asarray(Index).reshape(-1), X.shape[a])
        out = X.copy()
        sl = [slice(None)] * X.ndim
        sl[a] = idx
        np.add.at(out, tuple(sl), AddValue.astype(X.dtype, copy=False))
        return {"Out": out}

    def backward(self, Index, AddValue, dOut, *, axis=0):
        a = norm_axis(self.type, axis, dOut.ndim, "axis")
        idx = _checked_index(self.type, np.asarray(Index).reshape(-1), dOut.shape[a])
        return {"X": dOut.copy(),
                "AddValue": np.take(dOut, idx, axis=a).reshape(AddValue.shape)}


@register
class RepeatInterleave(OpDef):
    """Out = np.repeat(X, repeats, axis=dim): ``RepeatsTensor`` (one count per element along
    ``dim``) or the int ``Repeats``;  dX = dOut summed over each element's copies."""
    type, inputs, outputs = "repeat_interleave", ("X", "RepeatsTensor?"), ("Out",)
    grad_uses = ("X", "RepeatsTensor")

    def infer(self, X, RepeatsTensor=None, *, Repeats=0, dim=0):
        a = norm_axis(self.type, dim, len(X.shape), "dim")
        n = X.shape[a] * Repeats if RepeatsTensor is None and X.shape[a] >= 0 else -1
        return {"Out": X.with_(shape=tuple(n if i == a else d for i, d in enumerate(X.shape)))}

    def _counts(self, X, RepeatsTensor, Repeats, dim):
        a = norm_axis(self.type, dim, X.ndim, "dim")
        if RepeatsTensor is None:
            if Repeats < 0:
                raise ValueError(f"repeat_interleave: Repeats must be >= 0, got {Repeats}")
            return a, np.full(X.shape[a], int(Repeats), np.int64)
        r = np.asarray(RepeatsTensor).reshape(-1).astype(np.int64)
        if r.size != X.shape[a] or (r < 0).any():
            raise ValueError(f"repeat_interleave: RepeatsTensor must hold {X.shape[a]} counts "
                             f">= 0 (the size of dim {a}), but received {r.tolist()}")
        return a, r

    def forward(self, X, RepeatsTensor=None, *, Repeats=0, dim=0):
        a, r = self._counts(X, RepeatsTensor, Repeats, dim)
        return {"Out": np.repeat(X, r, axis=a)}

    def backward(self, X, RepeatsTensor, dOut, *, Repeats=0, dim=0):
        a, r = self._counts(X, RepeatsTensor, Repeats, dim)
        owner = np.repeat(np.arange(X.shape[a]), r)
        g = np.zeros(X.shape, dOut.dtype)
        sl = [slice(None)] * X.ndim
        sl[a] = owner
        np.add.at(g, tuple(sl), dOut)
        return {"X": g}


# -- set_value: assignment to a slice ---------------------------------------------------------
_SET_VALUE_LISTS = {VarType.BOOL: "bool_values", VarType.INT32: "int32_values",
                    VarType.INT64: "int64_values", VarType.FP32: "fp32_values",
                    VarType.FP64: "fp64_values"}


def _ints(tensors: Any, attr: Sequence[int]) -> List[int]:
    if tensors:
        return [int(np.asarray(t).reshape(-1)[0]) for t in tensors]
    return [int(v) for v in attr]


@register
class SetValue(OpDef):
    """Out = Input with ``Input[slices] = value``: per entry of ``axes`` the python slice
    ``starts:ends:steps`` (or the ``*TensorList`` inputs); the value is ``ValueTensor`` or the
    ``values`` attribute (Paddle <= 2.5: ``<dtype>_values``) shaped ``shape``, broadcast to the
    slice (``decrease_axes``: dims indexed by an int, absent from the value; ``none_axes``:
    extra 1-dims of the value). dInput = dOut with the slice zeroed; dValueTensor = dOut's
    slice summed to the value's shape."""
    type = "set_value"
    inputs = ("Input", "ValueTensor?", "StartsTensorList*?", "EndsTensorList*?",
              "StepsTensorList*?")
    outputs = ("Out",)
    grad_uses = ("Input", "ValueTensor", "StartsTensorList", "EndsTensorList",
                 "StepsTensorList")
    extra_attrs = {"dtype": int(VarType.FP32)}

    def infer(self, Input, ValueTensor=None, StartsTensorList=None, EndsTensorList=None,
              StepsTensorList=None):
        return {"Out": Input}

    def _slices(self, shape, axes, starts, ends, steps) -> Tuple[slice, ...]:
        if not len(axes) == len(starts) == len(ends) == len(steps):
            raise ValueError(f"set_value: axes {list(axes)}, starts {starts}, ends {ends} and "
                             f"steps {steps} must have one entry per axis")
        sl = [slice(None)] * len(shape)
        for a, s, e, st in zip(axes, starts, ends, steps):
            a = norm_axis(self.type, int(a), len(shape), "axes entry")
            if st == 0:
                raise ValueError("set_value: a step must not be 0")
            sl[a] = slice(s, e, st)
        return tuple(sl)

    def _value(self, Input, ValueTensor, attrs) -> np.ndarray:
        if ValueTensor is not None:
            return np.asarray(ValueTensor)
        vals = attrs.get("values") or []
        if not len(vals):
            for key in _SET_VALUE_LISTS.values():
                if attrs.get(key):
                    vals = attrs[key]
                    break
        shape = [int(d) for d in attrs.get("shape") or [len(vals)]]
        return np.asarray(vals, Input.dtype).reshape(shape)

    def _target(self, Input, ValueTensor, lists, attrs) -> Tuple[Tuple[slice, ...], List[int]]:
        starts = _ints(lists[0], attrs.get("starts", []))
        ends = _ints(lists[1], attrs.get("ends", []))
        steps = _ints(lists[2], attrs.get("steps", [])) or [1] * len(starts)
        sl = self._slices(Input.shape, attrs.get("axes", []), starts, ends, steps)
        region = list(Input[sl].shape)
        dec = {norm_axis(self.type, int(a), Input.ndim, "decrease_axes entry")
               for a in attrs.get("decrease_axes", [])}
        return sl, [d for i, d in enumerate(region) if i not in dec]

    def _fit(self, value: np.ndarray, region: Sequence[int], full: Sequence[int],
             none_axes: Sequence[int]) -> np.ndarray:
        v = value
        if none_axes and v.ndim > len(region):
            keep = [i for i in range(v.ndim) if i not in {int(a) % v.ndim for a in none_axes}]
            v = v.reshape([v.shape[i] for i in keep])
        while v.ndim > len(region) and v.shape[0] == 1:
            v = v.reshape(v.shape[1:])
        try:
            return np.broadcast_to(v, region).reshape(full)
        except ValueError:
            raise ValueError(f"set_value: a value of shape {list(value.shape)} cannot be "
                             f"assigned to a slice of shape {list(region)}") from None

    def forward(self, Input, ValueTensor=None, StartsTensorList=None, EndsTensorList=None,
                StepsTensorList=None, *, axes=[], starts=[], ends=[], steps=[],
                decrease_axes=[], none_axes=[], shape=[], values=[], bool_values=[],
                int32_values=[], int64_values=[], fp32_values=[], fp64_values=[]):
        attrs = dict(locals())
        lists = (StartsTensorList, EndsTensorList, StepsTensorList)
        sl, region = self._target(Input, ValueTensor, lists, attrs)
        out = Input.copy()
        value = self._value(Input, ValueTensor, attrs)
        out[sl] = self._fit(value, region, out[sl].shape, attrs.get("none_axes", []))
        return {"Out": out}

    def backward(self, Input, ValueTensor, StartsTensorList, EndsTensorList, StepsTensorList,
                 dOut, *, axes=[], starts=[], ends=[], steps=[], decrease_axes=[],
                 none_axes=[], shape=[], values=[], bool_values=[], int32_values=[],
                 int64_values=[], fp32_values=[], fp64_values=[]):
        attrs = dict(locals())
        lists = (StartsTensorList, EndsTensorList, StepsTensorList)
        sl, region = self._target(Input, ValueTensor, lists, attrs)
        dx = dOut.copy()
        part = dOut[sl].reshape(region)
        dx[sl] = 0
        res = {"Input": dx}
        if ValueTensor is not None:
            v = np.asarray(ValueTensor)
            g = part
            while g.ndim > v.ndim:
                g = g.sum(axis=0)
            res["ValueTensor"] = reduce_to(g, v.shape) if g.shape != v.shape else g.copy()
        return res


# -- layout -----------------------------------------------------------------------------------
def _nchw(op: str, data_format: str) -> bool:
    if data_format not in ("NCHW", "NHWC"):
        raise ValueError(f"{op}: data_format must be 'NCHW' or 'NHWC', got {data_format!r}")
    return data_format == "NCHW"


@register
class ChannelShuffle(OpDef):
    """Out = the channels of X [N, C, H, W] regrouped: channel g*(C/groups) + k goes to
    k*groups + g (ShuffleNet);  dX = the inverse shuffle of dOut."""
    type, inputs, outputs = "channel_shuffle", ("X",), ("Out",)
    grad_uses = ()

    def infer(self, X, *, groups=1, data_format="NCHW"):
        c = X.shape[1 if _nchw(self.type, data_format) else 3]
        if groups <= 0 or (c > 0 and c % groups):
            raise ValueError(f"channel_shuffle: the {c} channels must be divisible by groups "
                             f"({groups})")
        return {"Out": X}

    @staticmethod
    def _shuffle(x: np.ndarray, groups: int, nchw: bool) -> np.ndarray:
        if not nchw:
            x = x.transpose(0, 3, 1, 2)
        n, c, h, w = x.shape
        y = x.reshape(n, groups, c // groups, h, w).transpose(0, 2, 1, 3, 4).reshape(n, c, h, w)
        return np.ascontiguousarray(y if nchw else y.transpose(0, 2, 3, 1))

    def forward(self, X, *, groups=1, data_format="NCHW"):
        return {"Out": self._shuffle(X, groups, _nchw(self.type, data_format))}

    def backward(self, dOut, *, groups=1, data_format="NCHW"):
        nchw = _nchw(self.type, data_format)
        c = dOut.shape[1 if nchw else 3]
        return {"X": self._shuffle(dOut, c // groups, nchw)}


@register
class PixelUnshuffle(OpDef):
    """Out [N, C r^2, H/r, W/r]: each r x r block of X's pixels becomes r^2 channels (the
    inverse of pixel_shuffle);  dX = pixel_shuffle of dOut."""
    type, inputs, outputs = "pixel_unshuffle", ("X",), ("Out",)
    grad_uses = ()

    def infer(self, X, *, downscale_factor=1, data_format="NCHW"):
        r = downscale_factor
        n, c, h, w = X.shape if _nchw(self.type, data_format) else \
            (X.shape[0], X.shape[3], X.shape[1], X.shape[2])
        if r <= 0 or (h > 0 and h % r) or (w > 0 and w % r):
            raise ValueError(f"pixel_unshuffle: height {h} and width {w} must be divisible by "
                             f"downscale_factor ({r})")
        dims = (c * r * r if c > 0 else -1, h // r if h > 0 else -1, w // r if w > 0 else -1)
        shape = (n,) + dims if _nchw(self.type, data_format) else (n, dims[1], dims[2], dims[0])
        return {"Out": X.with_(shape=shape)}

    @staticmethod
    def _unshuffle(x: np.ndarray, r: int) -> np.ndarray:
        n, c, h, w = x.shape
        return x.reshape(n, c, h // r, r, w // r, r).transpose(0, 1, 3, 5, 2, 4) \
            .reshape(n, c * r * r, h // r, w // r)

    @staticmethod
    def _shuffle(x: np.ndarray, r: int) -> np.ndarray:
        n, c, h, w = x.shape
        return x.reshape(n, c // (r * r), r, r, h, w).transpose(0, 1, 4, 2, 5, 3) \
            .reshape(n, c // (r * r), h * r, w * r)

    def forward(self, X, *, downscale_factor=1, data_format="NCHW"):
        if _nchw(self.type, data_format):
            return {"Out": np.ascontiguousarray(self._unshuffle(X, downscale_factor))}
        y = self._unshuffle(X.transpose(0, 3, 1, 2), downscale_factor)
        return {"Out": np.ascontiguousarray(y.transpose(0, 2, 3, 1))}

    def backward(self, dOut, *, downscale_factor=1, data_format="NCHW"):
        if _nchw(self.type, data_format):
            return {"X": np.ascontiguousarray(self._shuffle(dOut, downscale_factor))}
        y = self._shuffle(dOut.transpose(0, 3, 1, 2), downscale_factor)
        return {"X": np.ascontiguousarray(y.transpose(0, 2, 3, 1))}


# -- viterbi_decode ---------------------------------------------------------------------------
@register
class ViterbiDecode(OpDef):
    """The best tag path of each sequence under emission scores Input [B, T, N] and
    Transition [N, N] (Transition[i, j]: from tag i to tag j), over its first Length[b] steps:
    Scores [B] the path's total, Path [B, max(Length)] (int64, 0 past a sequence's end).
    ``include_bos_eos_tag``: Transition's last row is added at step 0 (the start tag's) and
    its second-to-last row after a sequence's last step (Paddle 2.6's kernel splits those two
    rows off as the start and stop transitions). Ties: the first tag."""
    type, inputs, outputs = "viterbi_decode", ("Input", "Transition", "Length"), \
        ("Scores", "Path")
    no_grad = True

    def infer(self, Input, Transition, Length, *, include_bos_eos_tag=True):
        if len(Input.shape) != 3 or len(Transition.shape) != 2:
            raise ValueError(f"viterbi_decode: Input must be [batch, steps, tags] and "
                             f"Transition [tags, tags], got {list(Input.shape)} and "
                             f"{list(Transition.shape)}")
        return {"Scores": VarSpec((Input.shape[0],), Input.dtype),
                "Path": VarSpec((Input.shape[0], -1), VarType.INT64)}

    def forward(self, Input, Transition, Length, *, include_bos_eos_tag=True):
        B, T, N = Input.shape
        if Transition.shape != (N, N):
            raise ValueError(f"viterbi_decode: Transition must be [{N}, {N}], got "
                             f"{list(Transition.shape)}")
        lengths = np.asarray(Length).reshape(-1).astype(np.int64)
        if lengths.size != B or (lengths < 0).any() or (lengths > T).any():
            raise ValueError(f"viterbi_decode: Length must hold {B} values in [0, {T}], got "
                             f"{lengths.tolist()}")
        x, trans = Input.astype(np.float64), Transition.astype(np.float64)
        steps = int(lengths.max()) if B else 0
        alpha = x[:, 0] + (trans[N - 1][None, :] if include_bos_eos_tag else 0.0)
        back = np.zeros((max(steps, 1), B, N), np.int64)
        for t in range(1, steps):
            cand = alpha[:, :, None] + trans[None]            # [B, from, to]
            best = cand.argmax(axis=1)
            new = np.take_along_axis(cand, best[:, None, :], 1)[:, 0] + x[:, t]
            live = (t < lengths)[:, None]
            alpha = np.where(live, new, alpha)
            back[t] = best
        if include_bos_eos_tag:
            alpha = alpha + trans[N - 2][None, :]
        last = alpha.argmax(axis=1)
        path = np.zeros((B, steps), np.int64)
        for b in range(B):
            n = int(lengths[b])
            if n == 0:
                continue
            tag = int(last[b])
            path[b, n - 1] = tag
            for t in range(n - 1, 0, -1):
                tag = int(back[t, b, tag])
                path[b, t - 1] = tag
        scores = alpha.max(axis=1) if N else np.zeros(B)
        return {"Scores": scores.astype(Input.dtype), "Path": path}
