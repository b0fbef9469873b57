"""fluid 1.8's ``fused_elemwise_activation``: an elementwise binary op (``elementwise_add``,
``elementwise_mul``) fused with a unary one (``scale``, ``relu``, ``tanh``, ``sigmoid``).

``functor_list = [f0, f1]`` names the composition, outermost first:

* ``[unary, binary]``: ``Out = unary(binary(X, Y))``, ``IntermediateOut = binary(X, Y)``;
* ``[binary, unary]``: ``Out = binary(X, unary(Y))``, ``IntermediateOut = unary(Y)``.

The binary op broadcasts as the elementwise ops do (``axis``; either operand may be the
smaller one); ``scale`` is the ``scale`` functor's factor. ``IntermediateOut`` is written only
when ``save_intermediate_out``. Gradients flow to X and Y (and from ``IntermediateOut@GRAD``
when it is given).
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Sequence, Tuple

import numpy as np

from ..core.registry import OpDef, VarSpec, register
from .activation import relu_to
from .broadcast import aligned_y_to_x, broadcast_shape, operand_axes, reduce_to

_BINARY = ("elementwise_add", "elementwise_mul")
_UNARY = ("scale", "relu", "tanh", "sigmoid")


def _compound(functor_list: Sequence[str]) -> Tuple[bool, str, str]:
    """(unary_outside, unary, binary) of ``functor_list``."""
    fl = list(functor_list)
    if len(fl) == 2 and fl[0] in _UNARY and fl[1] in _BINARY:
        return True, fl[0], fl[1]
    if len(fl) == 2 and fl[0] in _BINARY and fl[1] in _UNARY:
        return False, fl[1], fl[0]
    raise ValueError(f"fused_elemwise_activation: functor_list must be [unary, binary] or "
                     f"[binary, unary] with binary in {list(_BINARY)} and unary in "
                     f"{list(_UNARY)}, got {fl!r}")


def _unary(name: str, v: np.ndarray, scale: float) -> np.ndarray:
    t = v.dtype.type
    if name == "scale":
        return v * t(scale)
    if name == "relu":
        return np.maximum(v, t(0))
    if name == "tanh":
        return np.tanh(v)
    return t(1) / (t(1) + np.exp(-v))


# the unaries applied in place on a fresh binary result (the same values as ``_unary``)
_IN_PLACE = {"relu": relu_to, "tanh": lambda v, out: np.tanh(v, out=out)}


def _unary_grad(name: str, u: np.ndarray, d: np.ndarray, scale: float) -> np.ndarray:
    """d(unary)/dv * d, from the unary's output ``u``."""
    t = d.dtype.type
    if name == "scale":
        return d * t(scale)
    if name == "relu":
        return d * (u > 0).astype(d.dtype)
    if name == "tanh":
        return d * (t(1) - u * u)
    return d * u * (t(1) - u)


def _binary(name: str, a: np.ndarray, b: np.ndarray, axis: int) -> np.ndarray:
    a2, b2 = aligned_y_to_x(a, b, axis)
    return a2 + b2 if name == "elementwise_add" else a2 * b2


def _binary_grad(name: str, a: np.ndarray, b: np.ndarray, d: np.ndarray, axis: int
                 ) -> Tuple[np.ndarray, np.ndarray]:
    """(da, db) of ``binary(a, b)`` given the Out-shaped upstream gradient ``d``."""
    ax_a, ax_b = operand_axes(a.ndim, b.ndim, axis)
    if name == "elementwise_add":
        return reduce_to(d, a.shape, ax_a), reduce_to(d, b.shape, ax_b)
    a2, b2 = aligned_y_to_x(a, b, axis)
    return reduce_to(d * b2, a.shape, ax_a), reduce_to(d * a2, b.shape, ax_b)


@register
class FusedElemwiseActivation(OpDef):
    """See the module docstring."""
    type = "fused_elemwise_activation"
    inputs, outputs = ("X", "Y"), ("Out", "IntermediateOut?")
    grad_uses = ("X", "Y")

    def infer(self, X, Y, *, axis=-1, scale=0.0, save_intermediate_out=False,
              functor_list=()):
        outside, _, _ = _compound(functor_list)
        if X.dtype != Y.dtype:
            raise ValueError(f"fused_elemwise_activation: X and Y must have the same dtype, "
                             f"got {X.dtype} and {Y.dtype}")
        out = broadcast_shape(X.shape, Y.shape, axis)
        lod = X.lod_level if len(X.shape) >= len(Y.shape) else Y.lod_level
        res = {"Out": VarSpec(out, X.dtype, lod)}
        if save_intermediate_out:
            res["IntermediateOut"] = VarSpec(out if outside else Y.shape, X.dtype,
                                             lod if outside else Y.lod_level)
        return res

    def forward(self, X, Y, *, axis=-1, scale=0.0, save_intermediate_out=False,
                functor_list=()):
        outside, unary, binary = _compound(functor_list)
        if outside:
            inter = _binary(binary, X, Y, axis)
            # (0-d operands sum to a NumPy scalar, which has no buffer to write into)
            if save_intermediate_out or unary not in _IN_PLACE or inter.dtype.kind != "f" \
                    or not isinstance(inter, np.ndarray):
                out = _unary(unary, inter, scale)
            else:           # (a fresh array no one else sees: one allocation and pass less)
                out = _IN_PLACE[unary](inter, inter)
        else:
            inter = _unary(unary, Y, scale)
            out = _binary(binary, X, inter, axis)
        res: Dict[str, Any] = {"Out": out}
        if save_intermediate_out:
            res["IntermediateOut"] = inter
        return res

    def backward(self, X, Y, dOut, dIntermediateOut: Optional[np.ndarray] = None, *,
                 axis=-1, scale=0.0, save_intermediate_out=False, functor_list=()):
        outside, unary, binary = _compound(functor_list)
        if outside:
            inter = _binary(binary, X, Y, axis)
            d_inter = _unary_grad(unary, _unary(unary, inter, scale), dOut, scale)
            if dIntermediateOut is not None:
                d_inter = d_inter + dIntermediateOut
            dX, dY = _binary_grad(binary, X, Y, d_inter, axis)
        else:
            inter = _unary(unary, Y, scale)
            dX, d_inter = _binary_grad(binary, X, inter, dOut, axis)
            if dIntermediateOut is not None:
                d_inter = d_inter + dIntermediateOut
            dY = _unary_grad(unary, inter, d_inter, scale)
        return {"X": dX.astype(X.dtype, copy=False), "Y": dY.astype(Y.dtype, copy=False)}
