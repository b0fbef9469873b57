"""Elementwise binary ops with fluid 1.x ``axis`` broadcasting, and ``scale``.

Broadcasting follows fluid 1.8's ``axis`` rule (see ``broadcast.py``).

Gradients: fused ``<type>_grad`` kernels for first order (mod and floordiv are not
differentiable). For higher order every grad op has a ``double_grad`` rule: a composition of
differentiable ops, so ``fluid.gradients`` can be applied to gradients again, to any order.
Inside a ``double_grad``, ``g`` views the grad op (``g.input('Out@GRAD')`` is dOut,
``g.output_grad('X@GRAD')`` the incoming ddX).
"""
from __future__ import annotations

import math
from typing import Any, Callable, Tuple

import numpy as np

from ..core.dtypes import VarType, convert_dtype, to_numpy_dtype
from ..core.registry import OpDef, VarSpec, register
from .broadcast import (  # noqa: F401
    align,
    aligned_shape,
    aligned_y_to_x,
    broadcast_shape,
    buffered_run,
    in_parts,
    numpy_compatible,
    operand_axes,
    reduce_to,
    repeat_run,
    whole_runs,
)
from .compose import Compose, Sym, live, reduce_into, spread_into, sum_into  # noqa: F401

Shape = Tuple[int, ...]


# -- the ops ------------------------------------------------------------------------------------
def _var_type_of_x(in_types: Any) -> Any:
    sparse = (in_types.get("X") or [None])[0] == VarType.SELECTED_ROWS
    return {"Out": VarType.SELECTED_ROWS if sparse else VarType.LOD_TENSOR}


class _Binary(OpDef):
    """Shared slots, inference and kernels for ``Out = f(X, Y)`` with fluid broadcasting."""
    inputs, outputs = ("X", "Y"), ("Out",)
    extra_attrs = {"use_mkldnn": False, "x_data_format": "", "y_data_format": ""}
    fn: Callable[[np.ndarray, np.ndarray], np.ndarray] = staticmethod(np.add)

    def infer(self, X, Y, *, axis=-1):
        if X.dtype != Y.dtype:
            raise ValueError(f"X and Y must have the same data type, but X is "
                             f"{convert_dtype(X.dtype)} and Y is {convert_dtype(Y.dtype)}; cast "
                             f"one of them, e.g. fluid.layers.cast(y, '{convert_dtype(X.dtype)}')")
        return {"Out": VarSpec(broadcast_shape(X.shape, Y.shape, axis), X.dtype, X.lod_level)}

    def kernel(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return self.fn(x, y)

    def forward(self, X, Y, *, axis=-1):
        x, y = aligned_y_to_x(X, Y, axis)
        if x.shape == y.shape and type(self).kernel is _Binary.kernel and self.fn in _IN_PARTS:
            return {"Out": in_parts(self.fn, x, y)}
        size = max(math.prod(x.shape), math.prod(y.shape))     # (X may be SelectedRows)
        with whole_runs(repeat_run(x.shape, y.shape), size):   # a per-channel Y on NCHW maps
            return {"Out": self.kernel(x, y)}

    def lower(self, in_specs, attrs):
        axis = attrs.get("axis", -1)
        k = self.fn if type(self).kernel is _Binary.kernel else self.kernel
        x, y = in_specs
        if x is None or y is None:
            return lambda a, b: self.forward(a, b, axis=axis)["Out"]
        if len(x.shape) >= len(y.shape):
            run = repeat_run(x.shape, aligned_shape(len(x.shape), y.shape, axis))
        else:
            run = repeat_run(aligned_shape(len(y.shape), x.shape, axis), y.shape)
        if run < 0 or buffered_run(run):        # (run decided at run time / known)
            return lambda a, b: self.forward(a, b, axis=axis)["Out"]
        if not numpy_compatible(x.shape, y.shape, axis):   # (equal shapes too: [2, 1] +
            return lambda a, b: k(*aligned_y_to_x(a, b, axis))   # [2, 1] at axis 1 is [2, 2])
        if tuple(x.shape) == tuple(y.shape) and k is self.fn and self.fn in _IN_PARTS:
            return lambda a, b: in_parts(k, a, b)   # (large maps: two parallel halves)
        return k              # numpy's own broadcasting already is fluid's rule


_IN_PARTS = (np.add, np.subtract, np.multiply, np.divide)    # what ``in_parts`` may cut


class _Linear(_Binary):
    """add/sub: dX = reduce(dOut), dY = ±reduce(dOut); the grad op is linear in dOut."""
    grad_uses = ("X", "Y")
    grad_shape_only = ("X", "Y")     # the gradient reads dOut; X and Y give only the shapes
    sign = 1.0

    def double_grad(self, g, *, axis=-1, **_):
        """d(dOut) = broadcast(ddX) ± broadcast(ddY); X and Y get no second-order gradient."""
        target = g.input_grad("Out@GRAD")
        if target is None:
            return
        c = Compose(g)
        sub = self.forward_def.sign < 0
        ddx, ddy = live(g.output_grad("X@GRAD")), live(g.output_grad("Y@GRAD"))
        x, y, dout = g.input("X"), g.input("Y"), g.input("Out@GRAD")
        ax, ay = c.axes(x, y, axis)
        if ddx and ddy:
            c("elementwise_sub" if sub else "elementwise_add", {"X": ddx, "Y": ddy}, target,
              axis=axis)
        elif ddx:
            spread_into(c, ddx, x, dout, target, ax)
        elif ddy:
            spread_into(c, ddy, y, dout, target, ay, negate=sub)


@register
class ElementwiseAdd(_Linear):
    """Out = X + Y;  dX = reduce(dOut), dY = reduce(dOut)."""
    type = "elementwise_add"
    fn = staticmethod(np.add)

    def backward(self, X, Y, dOut, wanted=None, *, axis=-1):
        ax, ay = operand_axes(X.ndim, Y.ndim, axis)
        out = {}
        if wanted is None or "X" in wanted:
            out["X"] = reduce_to(dOut, X.shape, ax)
        if wanted is None or "Y" in wanted:
            out["Y"] = reduce_to(dOut, Y.shape, ay)
        return out

    def lower_grad(self, in_specs, attrs, wanted):
        """A bias ``[C]`` added to ``[N, C]`` on its last axis: dX is dOut itself and dY its
        column sums, as ``backward`` computes them (without the shape bookkeeping)."""
        x, y = in_specs[0], in_specs[1]
        if (x is None or y is None or len(x.shape) != 2 or len(y.shape) != 1
                or attrs.get("axis", -1) not in (-1, 1) or x.shape[1] != y.shape[0]
                or x.shape[1] < 0):
            return None
        col_sums = np.add.reduce       # (ndarray.sum's reduction, without its wrapper)
        if wanted == {"X", "Y"}:
            return lambda X, Y, dOut: {"X": dOut, "Y": col_sums(dOut, 0)}
        if wanted == {"Y"}:
            return lambda X, Y, dOut: {"Y": col_sums(dOut, 0)}
        return None


@register
class ElementwiseSub(_Linear):
    """Out = X - Y;  dX = reduce(dOut), dY = -reduce(dOut)."""
    type = "elementwise_sub"
    fn = staticmethod(np.subtract)
    sign = -1.0

    def backward(self, X, Y, dOut, wanted=None, *, axis=-1):
        ax, ay = operand_axes(X.ndim, Y.ndim, axis)
        out = {}
        if wanted is None or "X" in wanted:
            out["X"] = reduce_to(dOut, X.shape, ax)
        if wanted is None or "Y" in wanted:
            out["Y"] = -reduce_to(dOut, Y.shape, ay)
        return out


@register
class ElementwiseMul(_Binary):
    """Out = X * Y;  dX = reduce(dOut * Y), dY = reduce(dOut * X)."""
    type = "elementwise_mul"
    fn = staticmethod(np.multiply)
    grad_uses = ("X", "Y")

    def var_types(self, in_types, attrs):
        """A SelectedRows X times a one-element Y (the clip's scale) stays SelectedRows."""
        return _var_type_of_x(in_types)

    def backward(self, X, Y, dOut, wanted=None, *, axis=-1):
        x, y = aligned_y_to_x(X, Y, axis)
        ax, ay = operand_axes(X.ndim, Y.ndim, axis)
        out = {}
        if wanted is None or "X" in wanted:
            out["X"] = reduce_to(dOut * y, X.shape, ax)
        if wanted is None or "Y" in wanted:
            out["Y"] = reduce_to(dOut * x, Y.shape, ay)
        return out

    def double_grad(self, g, *, axis=-1, **_):
        """d(dOut) = ddX*Y + X*ddY;  dX = reduce(dOut*ddY);  dY = reduce(dOut*ddX)."""
        c = Compose(g)
        x, y, dout = g.input("X"), g.input("Y"), g.input("Out@GRAD")
        ddx, ddy = live(g.output_grad("X@GRAD")), live(g.output_grad("Y@GRAD"))
        t_dout, t_x, t_y = g.input_grad("Out@GRAD"), g.input_grad("X"), g.input_grad("Y")
        if t_dout:
            terms = []
            if ddx:
                terms.append(("elementwise_mul", {"X": ddx, "Y": y}, {"axis": axis}))
            if ddy:
                terms.append(("elementwise_mul", {"X": x, "Y": ddy}, {"axis": axis}))
            sum_into(c, terms, t_dout)
        ax, ay = c.axes(x, y, axis)
        if t_x and ddy:
            v = c("elementwise_mul", {"X": dout, "Y": ddy}, axis=ay)
            reduce_into(c, v, x, y, dout, t_x, axis, "X")
        if t_y and ddx:
            v = c("elementwise_mul", {"X": dout, "Y": ddx}, axis=ax)
            reduce_into(c, v, y, x, dout, t_y, axis, "Y")


def _trunc_div(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """C-style integer division (rounds toward zero), as fluid's integer elementwise_div."""
    return (x - np.fmod(x, y)) // y


@register
class ElementwiseDiv(_Binary):
    """Out = X / Y (integers: truncated toward zero, as C);  dX = reduce(dOut / Y),
    dY = reduce(-dOut * Out / Y)."""
    type = "elementwise_div"
    grad_uses = ("X", "Y", "Out")

    def kernel(self, x, y):
        if x.dtype.kind in "iu":
            return _trunc_div(x, y)
        return np.divide(x, y)

    def backward(self, X, Y, Out, dOut, wanted=None, *, axis=-1):
        x, y = aligned_y_to_x(X, Y, axis)
        ax, ay = operand_axes(X.ndim, Y.ndim, axis)
        dx = dOut / y
        out = {}
        if wanted is None or "X" in wanted:
            out["X"] = reduce_to(dx, X.shape, ax)
        if wanted is None or "Y" in wanted:
            dy = dx * Out
            np.negative(dy, out=dy)
            out["Y"] = reduce_to(dy, Y.shape, ay)
        return out

    def double_grad(self, g, *, axis=-1, **_):
        """With D = (ddX - ddY*Out) / Y:  d(dOut) = D;  dOut_ = -dOut*ddY/Y (for Out);
        dY = reduce(-dOut * D / Y)."""
        c = Compose(g)
        x, y, out, dout = g.input("X"), g.input("Y"), g.input("Out"), g.input("Out@GRAD")
        ddx, ddy = live(g.output_grad("X@GRAD")), live(g.output_grad("Y@GRAD"))
        t_dout, t_y, t_out = g.input_grad("Out@GRAD"), g.input_grad("Y"), g.input_grad("Out")
        ay = c.axes(x, y, axis)[1]        # Out-shaped (X slot) with a Y-shaped operand
        if (t_dout or t_y) and (ddx or ddy):
            a = c("elementwise_div", {"X": ddx, "Y": y}, axis=axis) if ddx else None
            b = None
            if ddy:
                b = c("elementwise_mul", {"X": out, "Y": ddy}, axis=ay)
                b = c("elementwise_div", {"X": b, "Y": y}, axis=ay)
            if a and b:
                d = c("elementwise_sub", {"X": a, "Y": b})
            else:
                d = a or c("scale", {"X": b}, scale=-1.0)
            if t_dout:
                c("scale", {"X": d}, t_dout, scale=1.0)
            if t_y:
                u = c("elementwise_mul", {"X": dout, "Y": d})
                u = c("elementwise_div", {"X": u, "Y": y}, axis=ay)
                u = c("scale", {"X": u}, scale=-1.0)
                reduce_into(c, u, y, x, dout, t_y, axis, "Y")
        if t_out and ddy:
            m = c("elementwise_mul", {"X": dout, "Y": ddy}, axis=ay)
            m = c("elementwise_div", {"X": m, "Y": y}, axis=ay)
            c("scale", {"X": m}, t_out, scale=-1.0)


class _Select(_Binary):
    """max/min: the gradient goes to the selected operand (``x_wins`` picks X)."""
    grad_uses = ("X", "Y")
    x_wins = ""          # comparison op type: dX = dOut * (X cmp Y)
    y_wins = ""          # dY = dOut * (X cmp' Y)

    def backward(self, X, Y, dOut, wanted=None, *, axis=-1):
        x, y = aligned_y_to_x(X, Y, axis)
        ax, ay = operand_axes(X.ndim, Y.ndim, axis)
        mask = self._mask(x, y)
        out = {}
        # products with the mask, not selects: a NaN/Inf in dOut reaches both operands' sums
        # as fluid's dOut * (X > Y) does (and a bool product is cheaper than np.where)
        if wanted is None or "X" in wanted:
            out["X"] = reduce_to(dOut * mask, X.shape, ax)
        if wanted is None or "Y" in wanted:
            out["Y"] = reduce_to(dOut * ~mask, Y.shape, ay)
        return out

    def double_grad(self, g, *, axis=-1, **_):
        """d(dOut) = ddX*(X wins) + ddY*(Y wins); X and Y get no second-order gradient."""
        target = g.input_grad("Out@GRAD")
        if target is None:
            return
        fwd = self.forward_def
        c = Compose(g)
        x, y = g.input("X"), g.input("Y")
        dtype = c.dtype(x)
        terms = []
        for dd, cmp, ax in ((live(g.output_grad("X@GRAD")), fwd.x_wins, c.axes(x, y, axis)[0]),
                            (live(g.output_grad("Y@GRAD")), fwd.y_wins, c.axes(x, y, axis)[1])):
            if dd:
                m = c(cmp, {"X": x, "Y": y}, axis=axis)
                m = c("cast", {"X": m}, in_dtype=VarType.BOOL, out_dtype=dtype)
                terms.append(("elementwise_mul", {"X": m, "Y": dd}, {"axis": ax}))
        sum_into(c, terms, target)


@register
class ElementwiseMax(_Select):
    """Out = max(X, Y);  dX = reduce(dOut * (X > Y)), dY = reduce(dOut * (X <= Y))."""
    type = "elementwise_max"
    fn = staticmethod(np.maximum)
    x_wins, y_wins = "greater_than", "less_equal"

    @staticmethod
    def _mask(x, y):
        return x > y


@register
class ElementwiseMin(_Select):
    """Out = min(X, Y);  dX = reduce(dOut * (X < Y)), dY = reduce(dOut * (X >= Y))."""
    type = "elementwise_min"
    fn = staticmethod(np.minimum)
    x_wins, y_wins = "less_than", "greater_equal"

    @staticmethod
    def _mask(x, y):
        return x < y


@register
class ElementwisePow(_Binary):
    """Out = X ** Y;  dX = reduce(dOut * Y * X**(Y-1)), dY = reduce(dOut * Out * log(X)).

    The gradient is a composition of differentiable ops (so every order works)."""
    type = "elementwise_pow"
    fn = staticmethod(np.power)

    def make_grad(self, g, *, axis=-1, **_):
        c = Compose(g)
        x, y, out, dout = g.input("X"), g.input("Y"), g.output("Out"), g.output_grad("Out")
        t_x, t_y = g.input_grad("X"), g.input_grad("Y")
        ax, ay = c.axes(x, y, axis)
        if t_x:
            ym1 = c("scale", {"X": y}, scale=1.0, bias=-1.0)
            p = c("elementwise_pow", {"X": x, "Y": ym1}, axis=axis)
            q = c("elementwise_mul", {"X": p, "Y": y}, axis=ay)
            v = c("elementwise_mul", {"X": dout, "Y": q})
            reduce_into(c, v, x, y, out, t_x, axis, "X")
        if t_y:
            lx = c("log", {"X": x})
            w = c("elementwise_mul", {"X": dout, "Y": out})
            v = c("elementwise_mul", {"X": w, "Y": lx}, axis=ax)
            reduce_into(c, v, y, x, out, t_y, axis, "Y")


@register
class ElementwiseMod(_Binary):
    """Out = X mod Y with the sign of Y (Python's ``%``, fluid's ModFunctor). Not
    differentiable."""
    type = "elementwise_mod"
    fn = staticmethod(np.mod)
    no_grad = True


@register
class ElementwiseFloordiv(_Binary):
    """Out = floor(X / Y) (Python's ``//``). Not differentiable."""
    type = "elementwise_floordiv"
    fn = staticmethod(np.floor_divide)
    no_grad = True


@register
class Scale(OpDef):
    """Out = scale * X + bias (bias_after_scale) or scale * (X + bias), ``scale`` from the
    1-element ScaleTensor when given;  dX = scale * dOut (itself a ``scale`` op, so every order
    works). Integer X: scale and bias are cast to X's type, as fluid."""
    type, inputs, outputs = "scale", ("X", "ScaleTensor?"), ("Out",)
    infallible = True       # elementwise on validated shapes: may follow in-place updates

    def infer(self, X, ScaleTensor):
        return {"Out": X}

    def var_types(self, in_types, attrs):
        """fluid scales a SelectedRows X's values: Out stays SelectedRows."""
        return _var_type_of_x(in_types)

    def forward(self, X, ScaleTensor=None, *, scale=1.0, bias=0.0, bias_after_scale=True):
        if ScaleTensor is not None:
            scale = ScaleTensor.reshape(-1)[0].item()
        return {"Out": self._fn(X.dtype.type, scale, bias, bias_after_scale)(X)}

    @staticmethod
    def _fn(cast: Callable, scale: float, bias: float, after: bool) -> Callable:
        s, b = cast(scale), cast(bias)
        if not bias:
            return (lambda x, *_: x.copy()) if scale == 1.0 else (lambda x, *_: x * s)
        if after:
            return (lambda x, *_: x + b) if scale == 1.0 else (lambda x, *_: x * s + b)
        return lambda x, *_: (x + b) * s

    def lower(self, in_specs, attrs):
        x, st = in_specs
        if x is None or st is not None:
            return None
        return self._fn(to_numpy_dtype(x.dtype).type, attrs.get("scale", 1.0),
                        attrs.get("bias", 0.0), attrs.get("bias_after_scale", True))

    def make_grad(self, g, *, scale=1.0, bias=0.0, bias_after_scale=True, **_):
        if g.input_grad("X"):
            ins = {"X": g.output_grad("Out")}
            if g.input("ScaleTensor"):
                ins["ScaleTensor"] = g.input("ScaleTensor")
            g.append("scale", ins, {"Out": g.input_grad("X")}, scale=scale, bias=0.0)

