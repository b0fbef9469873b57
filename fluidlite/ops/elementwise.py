"""Elementwise binary ops with fluid 1.x ``axis`` broadcasting, and ``scale``.

Broadcasting (fluid 1.8): the operand with fewer dims (normally Y) has its trailing 1s trimmed
and is lined up with the other operand's dims starting at ``axis`` (-1: right-aligned); inside
that window each pair of dims must be equal or one of them 1. Out has the larger rank; each dim
is the non-1 one of the pair. Kernels reshape the smaller operand (a view, ``align``) so that
numpy broadcasting applies; gradients are summed back to each operand's shape (``reduce_to``).

Gradients: fused ``<type>_grad`` kernels for first order (mod and floordiv are not
differentiable). For higher order every grad op has a ``double_grad`` rule: a composition of
differentiable ops, so ``fluid.gradients`` can be applied to gradients again, to any order.
Inside a ``double_grad``, ``g`` views the grad op (``g.input('Out@GRAD')`` is dOut,
``g.output_grad('X@GRAD')`` the incoming ddX).
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..core import names
from ..core.dtypes import VarType, convert_dtype, to_numpy_dtype
from ..core.registry import OpDef, VarSpec, register

Shape = Tuple[int, ...]


# -- broadcasting -------------------------------------------------------------------------------
def aligned_shape(ndim: int, shape: Sequence[int], axis: int = -1) -> Shape:
    """``shape`` (of the operand with fewer or equally many dims) padded with 1s to ``ndim``
    dims: its trailing 1s trimmed, placed at ``axis`` (-1: right-aligned), as fluid 1.8 does.
    Equal ranks with ``axis`` -1/0 keep the shape (numpy's rule). Raises ValueError when the
    operand does not fit."""
    shape = tuple(shape)
    if len(shape) > ndim or (len(shape) == ndim and axis in (-1, 0, None)):
        return shape
    if axis is None or axis == -1:
        axis = ndim - len(shape)
    trimmed = shape
    while trimmed and trimmed[-1] == 1:
        trimmed = trimmed[:-1]
    if axis < 0 or axis + len(trimmed) > ndim:
        if len(shape) == ndim:
            return shape             # equal ranks: fluid ignores ``axis`` (same-shape case)
        raise ValueError(f"axis={axis} is out of range: the lower-rank operand's shape "
                         f"{list(shape)} (trailing 1s trimmed: {list(trimmed)}) must fit inside "
                         f"{ndim} dims starting at axis; use axis in [0, "
                         f"{ndim - len(trimmed)}] or -1")
    return (1,) * axis + trimmed + (1,) * (ndim - axis - len(trimmed))


def numpy_compatible(x: Sequence[int], y: Sequence[int], axis: int = -1) -> bool:
    """True when numpy's own (right-aligned) broadcasting already implements fluid's rule for
    these shapes, so kernels can skip the reshape."""
    x, y = tuple(x), tuple(y)
    big, small = (x, y) if len(x) >= len(y) else (y, x)
    try:
        return aligned_shape(len(big), small, axis) == \
            (1,) * (len(big) - len(small)) + small
    except ValueError:
        return False


def broadcast_shape(x: Sequence[int], y: Sequence[int], axis: int = -1) -> Shape:
    """Out shape of a fluid elementwise op on shapes ``x``, ``y`` (``-1``: unknown dim).

    Raises ValueError naming both shapes when a dim pair is neither equal nor contains a 1.
    """
    x, y = tuple(x), tuple(y)
    big, small = (x, y) if len(x) >= len(y) else (y, x)
    try:
        aligned = aligned_shape(len(big), small, axis)
    except ValueError as e:
        raise ValueError(f"X shape {list(x)} and Y shape {list(y)} cannot be broadcast: {e}") \
            from None
    out = []
    for i, (a, b) in enumerate(zip(big, aligned)):
        if a == b or b == 1:
            out.append(a)
        elif a == 1:
            out.append(b)
        elif a < 0 or b < 0:
            out.append(a if b < 0 else b)
        else:
            raise ValueError(
                f"X shape {list(x)} and Y shape {list(y)} cannot be broadcast with axis={axis}: "
                f"dim {i} is {a} vs {b} (the smaller operand is aligned as {list(aligned)}; "
                f"dims must be equal or 1). Pass the axis where Y's dims start in X, or reshape "
                f"the operands.")
    return tuple(out)


def align(x_ndim: int, y: np.ndarray, axis: int = -1) -> np.ndarray:
    """Reshape ``y`` (a view) so it broadcasts against an ``x_ndim``-d array per fluid's rule."""
    if y.ndim > x_ndim:
        return y
    shape = aligned_shape(x_ndim, y.shape, axis)
    return y if shape == y.shape else y.reshape(shape)


def aligned_y_to_x(x: np.ndarray, y: np.ndarray, axis: int = -1
                   ) -> Tuple[np.ndarray, np.ndarray]:
    """(x, y) reshaped so that numpy broadcasting implements fluid's rule (either may be larger;
    with equal ranks Y is the one placed at ``axis``)."""
    if x.ndim >= y.ndim:
        return x, align(x.ndim, y, axis)
    return align(y.ndim, x, axis), y


def operand_axes(x_ndim: int, y_ndim: int, axis: int = -1) -> Tuple[int, int]:
    """The ``axis`` to use for X and for Y when combining each with an Out-shaped array: only
    the operand that fluid places at ``axis`` (Y, or X when it has fewer dims) uses it; the
    other one already has Out's rank and is never moved (-1)."""
    return (-1, axis) if x_ndim >= y_ndim else (axis, -1)


def reduce_to(grad: np.ndarray, shape: Sequence[int], axis: int = -1) -> np.ndarray:
    """Sum ``grad`` (Out-shaped) over the dims that were broadcast from an operand of ``shape``
    placed at ``axis``; returns an array of ``shape`` (``grad`` itself when nothing to do)."""
    shape = tuple(shape)
    if grad.shape == shape:
        return grad
    axes = _sum_axes(grad.shape, shape, axis)
    out = grad.sum(axis=axes) if axes else grad
    return out if out.shape == shape else out.reshape(shape)


@functools.lru_cache(maxsize=4096)
def _sum_axes(gshape: Shape, shape: Shape, axis: int) -> Tuple[int, ...]:
    target = aligned_shape(len(gshape), shape, axis)
    return tuple(i for i, (g, t) in enumerate(zip(gshape, target)) if t == 1 and g != 1)


# -- composing gradient ops ---------------------------------------------------------------------
def live(name: Any) -> Optional[str]:
    """None for an absent or ``@EMPTY@`` gradient name."""
    if name is None or name == names.EMPTY_VAR_NAME:
        return None
    return name


class Compose:
    """Appends ops from a grad maker: ``c("elementwise_mul", {"X": a, "Y": b}, axis=1)`` writes a
    fresh temporary (or ``out``) through output slot ``out_slot`` and returns its name."""

    def __init__(self, g: Any) -> None:
        self.g = g

    def __call__(self, op_type: str, inputs: Dict[str, Any], out: Optional[str] = None,
                 out_slot: str = "Out", **attrs: Any) -> str:
        out = out or self.g.tmp(op_type)
        self.g.append(op_type, inputs, {out_slot: out}, attrs)
        return out

    def axes(self, x: str, y: str, axis: int) -> Tuple[int, int]:
        """``operand_axes`` for the variables ``x`` and ``y``."""
        return operand_axes(len(self.shape(x)), len(self.shape(y)), axis)

    def shape(self, name: str) -> Optional[Shape]:
        var = self.g.op.block._find_var_recursive(name)
        return tuple(var.shape) if var is not None else None

    def dtype(self, name: str) -> VarType:
        return self.g.op.block._find_var_recursive(name).dtype

    def var(self, name: str) -> "Sym":
        return Sym(self, name=name)

    def node(self, op_type: str, inputs: Dict[str, Any], out_slot: str = "Out",
             **attrs: Any) -> "Sym":
        return Sym(self, op=op_type, ins=inputs, out_slot=out_slot, attrs=attrs)


class Sym:
    """A lazily emitted formula over same-shaped variables, for writing gradient compositions
    readably: ``(p * (1.0 - 2.0 * out)).into(target)``. ``+ - * /`` between Syms become
    elementwise ops; with Python numbers they fold into ``scale``; ``s.apply("tanh")`` applies a
    unary op. Nothing is appended until ``into``/``emit``; the root op writes the target."""

    def __init__(self, c: Compose, name: Optional[str] = None, op: Optional[str] = None,
                 ins: Optional[Dict[str, Any]] = None, out_slot: str = "Out",
                 attrs: Optional[Dict[str, Any]] = None) -> None:
        self.c, self.name, self.op = c, name, op
        self.ins, self.out_slot, self.attrs = ins or {}, out_slot, attrs or {}

    # -- construction ---------------------------------------------------------------------
    def _scale(self, s: float, b: float = 0.0) -> "Sym":
        if self.op == "scale" and self.name is None and self.attrs.get("bias_after_scale", True):
            s0, b0 = self.attrs.get("scale", 1.0), self.attrs.get("bias", 0.0)
            return Sym(self.c, op="scale", ins=self.ins, attrs={"scale": s * s0,
                                                                 "bias": s * b0 + b})
        return Sym(self.c, op="scale", ins={"X": self}, attrs={"scale": float(s),
                                                               "bias": float(b)})

    def _bin(self, op: str, other: "Sym") -> "Sym":
        return Sym(self.c, op=op, ins={"X": self, "Y": other})

    def __add__(self, o: Any) -> "Sym":
        return self._bin("elementwise_add", o) if isinstance(o, Sym) else self._scale(1.0, o)

    __radd__ = __add__

    def __sub__(self, o: Any) -> "Sym":
        return self._bin("elementwise_sub", o) if isinstance(o, Sym) else self._scale(1.0, -o)

    def __rsub__(self, o: Any) -> "Sym":
        return self._scale(-1.0, o)

    def __mul__(self, o: Any) -> "Sym":
        return self._bin("elementwise_mul", o) if isinstance(o, Sym) else self._scale(o)

    __rmul__ = __mul__

    def __truediv__(self, o: Any) -> "Sym":
        return self._bin("elementwise_div", o) if isinstance(o, Sym) else self._scale(1.0 / o)

    def __neg__(self) -> "Sym":
        return self._scale(-1.0)

    def apply(self, op_type: str, **attrs: Any) -> "Sym":
        """A unary op ``X -> Out`` applied to this formula."""
        return Sym(self.c, op=op_type, ins={"X": self}, attrs=attrs)

    # -- emission -------------------------------------------------------------------------
    def emit(self, out: Optional[str] = None) -> str:
        """Append the ops; returns the name holding the value (``out`` when given)."""
        if self.op is None:
            if out is None:
                return self.name
            return self.c("scale", {"X": self.name}, out, scale=1.0)
        if self.name is not None and out is None:
            return self.name          # shared subexpression, already emitted
        ins = {k: (v.emit() if isinstance(v, Sym) else v) for k, v in self.ins.items()}
        name = self.c(self.op, ins, out, out_slot=self.out_slot, **self.attrs)
        if out is None:
            self.name = name
        return name

    def into(self, out: Optional[str]) -> None:
        """Write the formula into ``out`` (nothing when ``out`` is None: not requested)."""
        if out is not None:
            self.emit(out)


def _into(c: Compose, terms: List[Tuple[str, Dict[str, Any], Dict[str, Any]]],
          out: Optional[str]) -> Optional[str]:
    """Emit ``sum(terms)`` (each ``(op_type, inputs, attrs)``, all Out-shaped); the last op writes
    ``out`` directly when given. Returns the name holding the sum."""
    if not terms:
        return None
    if len(terms) == 1:
        t, ins, at = terms[0]
        return c(t, ins, out, **at)
    parts = [c(t, ins, **at) for t, ins, at in terms]
    return c("sum", {"X": parts}, out)


def reduce_into(c: Compose, src: str, operand: str, other: str, out_like: str, out: str,
                axis: int, slot: str) -> None:
    """``out = reduce_to(src, shape(operand))``: ``src`` is Out-shaped; ``slot`` says whether
    ``operand`` is the op's X or Y (``other`` is the other one). Uses ``elementwise_add_grad``
    (itself differentiable) when a reduction is needed."""
    if c.shape(operand) == c.shape(out_like):
        c("scale", {"X": src}, out, scale=1.0)
        return
    x, y = (operand, other) if slot == "X" else (other, operand)
    c("elementwise_add_grad", {"X": x, "Y": y, "Out@GRAD": src}, out, out_slot=slot + "@GRAD",
      axis=axis)


def spread_into(c: Compose, src: str, operand: str, out_like: str, out: Optional[str],
                axis: int, negate: bool = False) -> str:
    """``out = ±broadcast(src)``: ``src`` shaped like ``operand`` broadcast to ``out_like``'s
    shape (the transpose of ``reduce_into``); ``axis`` is the operand's (``operand_axes``)."""
    if c.shape(operand) == c.shape(out_like):
        return c("scale", {"X": src}, out, scale=-1.0 if negate else 1.0)
    zeros = c("fill_zeros_like", {"X": out_like})
    return c("elementwise_sub" if negate else "elementwise_add", {"X": zeros, "Y": src}, out,
             axis=axis)


# -- the ops ------------------------------------------------------------------------------------
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
        return {"Out": self.kernel(*aligned_y_to_x(X, Y, axis))}

    def lower(self, in_specs, attrs):
        axis = attrs.get("axis", -1)
        k = self.fn if type(self).kernel is _Binary.kernel else self.kernel
        x, y = in_specs
        if x is not None and y is not None and numpy_compatible(x.shape, y.shape, axis):
            return k          # numpy's own broadcasting already is fluid's rule
        return lambda a, b: k(*aligned_y_to_x(a, b, axis))


class _Linear(_Binary):
    """add/sub: dX = reduce(dOut), dY = ±reduce(dOut); the grad op is linear in dOut."""
    grad_uses = ("X", "Y")
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
            _into(c, terms, t_dout)
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
        if wanted is None or "X" in wanted:
            out["X"] = reduce_to(np.where(mask, dOut, 0), X.shape, ax)
        if wanted is None or "Y" in wanted:
            out["Y"] = reduce_to(np.where(mask, 0, dOut), Y.shape, ay)
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
        _into(c, terms, target)


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

    def infer(self, X, ScaleTensor):
        return {"Out": X}

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

