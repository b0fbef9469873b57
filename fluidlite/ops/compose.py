"""A small toolkit for writing gradient rules as compositions of differentiable ops.

``double_grad`` / ``make_grad`` rules built with ``Compose`` and ``Sym`` emit ordinary ops through
the GradBuilder, so the gradient of a gradient is itself differentiable (any order).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from ..core.dtypes import VarType
from ..core.names import live  # noqa: F401  (re-exported for rule authors)
from .broadcast import Shape, operand_axes


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


def sum_into(c: Compose, terms: List[Tuple[str, Dict[str, Any], Dict[str, Any]]],
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
