"""Elementwise math functions: abs, exp, log, sqrt, rsqrt, square, reciprocal, pow, sin, cos,
the rounding functions (zero gradient, as fluid's ZeroGradFunctor) and sign (not differentiable).

They share the activation ops' base (``_Act``): Out = f(X) with a fused first-order kernel and a
``double_grad`` composition for higher orders.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..core.registry import register
from .activation import _Act


@register
class Abs(_Act):
    """Out = |X|;  dX = dOut * sign(X)."""
    type, int_ok = "abs", True
    f = staticmethod(np.abs)

    def backward(self, X, dOut):
        return {"X": dOut * np.sign(X)}


@register
class Exp(_Act):
    """Out = exp(X);  dX = dOut * Out."""
    type, grad_uses = "exp", ("Out",)
    f = staticmethod(np.exp)

    def backward(self, Out, dOut):
        return {"X": dOut * Out}

    def second(self, c, out, p):
        return p


@register
class Log(_Act):
    """Out = ln(X);  dX = dOut / X."""
    type = "log"
    f = staticmethod(np.log)

    def backward(self, X, dOut):
        return {"X": dOut / X}

    def second(self, c, x, p):
        return -(p / x / x)


@register
class Sqrt(_Act):
    """Out = sqrt(X);  dX = 0.5 * dOut / Out."""
    type, grad_uses = "sqrt", ("Out",)
    f = staticmethod(np.sqrt)

    def backward(self, Out, dOut):
        return {"X": dOut * 0.5 / Out}

    def second(self, c, out, p):
        return -0.5 * (p / out / out)


@register
class Rsqrt(_Act):
    """Out = 1 / sqrt(X);  dX = -0.5 * dOut * Out^3."""
    type, grad_uses = "rsqrt", ("Out",)

    @staticmethod
    def f(x):
        out = np.sqrt(x)
        return np.reciprocal(out, out=out)

    def backward(self, Out, dOut):
        return {"X": dOut * (Out * Out * Out) * -0.5}

    def second(self, c, out, p):
        return -1.5 * (p * out * out)


@register
class Square(_Act):
    """Out = X^2;  dX = 2 * dOut * X."""
    type, int_ok = "square", True
    f = staticmethod(np.square)

    def backward(self, X, dOut):
        p = dOut * X                   # p + p == p * 2 exactly, with no Python float to promote
        return {"X": p + p}

    def second(self, c, x, p):
        return 2.0 * p


@register
class Reciprocal(_Act):
    """Out = 1 / X;  dX = -dOut * Out^2."""
    type, grad_uses = "reciprocal", ("Out",)
    f = staticmethod(np.reciprocal)

    def backward(self, Out, dOut):
        return {"X": -dOut * (Out * Out)}

    def second(self, c, out, p):
        return -2.0 * (p * out)


@register
class Pow(_Act):
    """Out = X^factor;  dX = dOut * factor * X^(factor - 1). ``factor`` comes from the
    1-element ``FactorTensor`` when given (fluid 1.8's ``pow(x, factor=Variable)``);
    dFactorTensor = sum(dOut * X^factor * ln X). On int32 / int64 ``X`` (fluid 1.8 has those
    kernels) the exponent is ``int(factor)`` and the result is truncated to X's dtype."""
    type, int_ok = "pow", True
    inputs = ("X", "FactorTensor?")
    grad_uses = ("X", "FactorTensor")

    @staticmethod
    def f(x, factor=1.0):
        if x.dtype.kind == "f":
            return np.power(x, factor)
        # fluid 1.8's integer kernels (PowFunctor<int> / <int64_t>): the exponent cast to the
        # integer type, std::pow's result truncated back to it
        e = int(factor)
        if e >= 0:
            return np.power(x, x.dtype.type(e))
        return np.trunc(np.power(x.astype(np.float64), np.float64(e))).astype(x.dtype)

    def infer(self, X, FactorTensor=None, **_):
        return super().infer(X)

    def forward(self, X, FactorTensor=None, *, factor=1.0):
        return {"Out": self.f(X, _factor(FactorTensor, factor))}

    def lower(self, in_specs, attrs):
        if in_specs[1] is not None:
            return None
        f = super().lower(in_specs, attrs)
        return lambda x, _absent_factor: f(x)

    def backward(self, X, FactorTensor, dOut, wanted=None, *, factor=1.0):
        f = _factor(FactorTensor, factor)
        grads = {"X": dOut * (np.power(X, f - 1.0) * f)}
        if FactorTensor is not None and (wanted is None or "FactorTensor" in wanted):
            # d(X^f)/df = X^f * ln(X) (fluid 1.8 gave the exponent no gradient)
            d = np.sum(dOut * np.power(X, f) * np.log(X))
            grads["FactorTensor"] = np.full(FactorTensor.shape, d, FactorTensor.dtype)
        elif wanted is not None and "FactorTensor" in wanted:
            grads["FactorTensor"] = None        # no exponent tensor: nothing to differentiate
        return grads

    def double_grad(self, g, **attrs):
        if g.input("FactorTensor"):
            raise ValueError("pow: a second-order gradient needs a constant exponent; pass "
                             "factor as a Python number (not a Variable) to differentiate twice")
        _Act.double_grad(self, g, **attrs)

    def second(self, c, x, p, factor=1.0):
        # factor * (factor-1) * X^(factor-2) * p == pow_grad[factor-1](X, factor * p)
        return c.node("pow_grad", {"X": x, "Out@GRAD": factor * p}, out_slot="X@GRAD",
                      factor=factor - 1.0)


def _factor(tensor: Optional[np.ndarray], factor: float) -> float:
    if tensor is None:
        return factor
    tensor = np.asarray(tensor)
    if tensor.size != 1:        # fluid 1.8's PowKernel enforces exactly one element
        raise ValueError(f"pow: the shape of factor(tensor) must be [1] rather than "
                         f"{list(tensor.shape)}")
    return float(tensor.reshape(-1)[0])


@register
class Sin(_Act):
    """Out = sin(X);  dX = dOut * cos(X)."""
    type = "sin"
    f = staticmethod(np.sin)

    def backward(self, X, dOut):
        return {"X": dOut * np.cos(X)}

    def second(self, c, x, p):
        return -(p * x.apply("sin"))


@register
class Cos(_Act):
    """Out = cos(X);  dX = -dOut * sin(X)."""
    type = "cos"
    f = staticmethod(np.cos)

    def backward(self, X, dOut):
        return {"X": -dOut * np.sin(X)}

    def second(self, c, x, p):
        return -(p * x.apply("cos"))


class _Round(_Act):
    int_ok = True

    def make_grad(self, g, **_):
        """dX = 0 (piecewise constant)."""
        if g.input_grad("X"):
            g.append("fill_zeros_like", {"X": g.input("X")}, {"Out": g.input_grad("X")})


@register
class Floor(_Round):
    """Out = floor(X);  dX = 0."""
    type = "floor"
    f = staticmethod(np.floor)


@register
class Ceil(_Round):
    """Out = ceil(X);  dX = 0."""
    type = "ceil"
    f = staticmethod(np.ceil)


@register
class Round(_Round):
    """Out = round(X), halves away from zero (C's round, as fluid);  dX = 0."""
    type = "round"

    @staticmethod
    def f(x):
        if x.dtype.kind != "f":
            return x.copy()
        r = np.floor(x)
        d = x - r                         # exact, in [0, 1)
        return r + ((d > 0.5) | ((d == 0.5) & (x > 0)))


@register
class Sign(_Act):
    """Out = sign(X) (-1, 0 or 1);  dX = 0 * dOut: fluid's SignGradMaker emits ``scale`` of
    Out@GRAD by 0.0 (so a NaN / inf upstream gradient gives NaN, as in fluid)."""
    type, int_ok = "sign", True
    f = staticmethod(np.sign)

    def make_grad(self, g, **_):
        if g.input_grad("X"):
            g.append("scale", {"X": g.output_grad("Out")}, {"Out": g.input_grad("X")},
                     scale=0.0)
