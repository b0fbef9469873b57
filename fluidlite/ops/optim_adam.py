"""Optimizer update ops, Adam family: ``adam``, ``adamax``, ``lamb`` (fluid 1.8 kernels;
conventions in ``optim.py``)."""
from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from ..core.dtypes import FLOATS, to_numpy_dtype
from ..core.registry import register
from .inplace import Update, check_like, check_scalar, chunked, consts, sum_squares


@register
class Adam(Update):
    """Moment1Out = b1*M1 + (1-b1)*G;  Moment2Out = b2*M2 + (1-b2)*G^2;
    lr_t = lr * sqrt(1 - Beta2Pow) / (1 - Beta1Pow);
    ParamOut = Param - lr_t * Moment1Out / (sqrt(Moment2Out) + epsilon * sqrt(1 - Beta2Pow));
    Beta1PowOut = Beta1Pow * b1, Beta2PowOut = Beta2Pow * b2.
    ``Beta1Tensor`` / ``Beta2Tensor`` ([1]), when given, override the ``beta1`` / ``beta2``
    attrs.

    A SelectedRows Grad with ``lazy_mode`` updates only the gradient's rows of ParamOut,
    Moment1Out and Moment2Out; their other rows keep the outputs' previous values (fluid 1.8
    writes those rows into the output buffers; ParamOut is normally Param itself), or copy
    the inputs' when an output has no value of that shape yet. Without ``lazy_mode`` every row
    is updated, the missing ones with a zero gradient (the dense update)."""
    type = "adam"
    sparse_elementwise = True    # see ops/inplace.py (sparse gradients)
    folds_l2_decay = True
    inputs = ("Param", "Grad", "LearningRate", "Moment1", "Moment2", "Beta1Pow", "Beta2Pow",
              "Beta1Tensor?", "Beta2Tensor?")
    outputs = ("ParamOut", "Moment1Out", "Moment2Out", "Beta1PowOut?", "Beta2PowOut?")
    # the lazy sparse update keeps the outputs' rows it does not update (sparse_forward)
    reads_outputs = ("ParamOut", "Moment1Out", "Moment2Out")

    def sparse_rows_only(self, attrs):
        """fluid 1.8: with ``lazy_mode`` a SelectedRows Grad updates the moments and params of
        its (merged) rows only; without it every row, missing rows with a zero gradient (their
        moments decay), which is the dense update."""
        return bool(attrs.get("lazy_mode", False))

    def infer(self, Param, Grad, LearningRate, Moment1, Moment2, Beta1Pow, Beta2Pow,
              Beta1Tensor, Beta2Tensor):
        check_like("adam", "Param", Param, Grad=Grad, Moment1=Moment1, Moment2=Moment2)
        check_scalar("adam", LearningRate=LearningRate, Beta1Pow=Beta1Pow, Beta2Pow=Beta2Pow,
                      Beta1Tensor=Beta1Tensor, Beta2Tensor=Beta2Tensor)
        return {"ParamOut": Param, "Moment1Out": Moment1, "Moment2Out": Moment2,
                "Beta1PowOut": Beta1Pow, "Beta2PowOut": Beta2Pow}

    def forward(self, Param, Grad, LearningRate, Moment1, Moment2, Beta1Pow, Beta2Pow,
                Beta1Tensor=None, Beta2Tensor=None, ParamOut=None, Moment1Out=None,
                Moment2Out=None, *, beta1=0.9, beta2=0.999, epsilon=1.0e-8, lazy_mode=False,
                min_row_size_to_use_multithread=1000):
        # ParamOut, Moment1Out, Moment2Out: the outputs' previous values (reads_outputs); a
        # dense Grad rewrites every element, so only the lazy sparse update uses them
        # a Python float beta: 1 - beta in double, rounded once by the product (NumPy 1 and 2
        # alike); a beta tensor: 1 - beta in its own dtype
        b1 = Beta1Tensor.reshape(()) if Beta1Tensor is not None else beta1
        b2 = Beta2Tensor.reshape(()) if Beta2Tensor is not None else beta2
        one1 = b1.dtype.type(1) if Beta1Tensor is not None else 1.0
        one2 = b2.dtype.type(1) if Beta2Tensor is not None else 1.0
        m1 = b1 * Moment1 + (one1 - b1) * Grad
        m2 = b2 * Moment2 + (one2 - b2) * (Grad * Grad)
        c2 = np.sqrt(1.0 - Beta2Pow)
        lr_t = LearningRate * c2 / (1.0 - Beta1Pow)
        p = Param - lr_t * (m1 / (np.sqrt(m2) + epsilon * c2))
        return {"ParamOut": p, "Moment1Out": m1, "Moment2Out": m2,
                "Beta1PowOut": Beta1Pow * b1, "Beta2PowOut": Beta2Pow * b2}

    state_slots = (("Moment1", "Moment1Out"), ("Moment2", "Moment2Out"))

    def lower(self, in_specs, attrs):
        """``forward`` for float parameters with [1] learning rate and beta powers of their
        dtype and no beta tensors (every Adam update fluid's optimizer builds): the [1]-array
        arithmetic on scalars of that dtype (as ``update_in_place``), the elementwise
        arithmetic with 0-d constants -- the same operations in the same order, so the same
        bits, in fewer and cheaper NumPy calls (a small model pays per call)."""
        p, b1t, b2t = in_specs[0], in_specs[7], in_specs[8]
        if p is None or b1t is not None or b2t is not None or p.dtype not in FLOATS:
            return None
        dtype = to_numpy_dtype(p.dtype)
        general = functools.partial(self.forward, **attrs)
        b1, b2 = attrs.get("beta1", 0.9), attrs.get("beta2", 0.999)
        eps = attrs.get("epsilon", 1.0e-8)
        k1, k2, one_b1, one_b2 = consts(dtype, b1, b2, 1.0 - b1, 1.0 - b2)
        sqrt, array = np.sqrt, np.array

        def fast(Param, Grad, LearningRate, Moment1, Moment2, Beta1Pow, Beta2Pow,
                 Beta1Tensor=None, Beta2Tensor=None, *previous):
            # previous: the outputs' old values (reads_outputs), unused by a dense update
            if (Param.dtype != dtype or Beta1Tensor is not None or Beta2Tensor is not None
                    or LearningRate.shape != (1,) or Beta1Pow.shape != (1,)
                    or Beta2Pow.shape != (1,) or LearningRate.dtype != dtype
                    or Beta1Pow.dtype != dtype or Beta2Pow.dtype != dtype):
                return general(Param, Grad, LearningRate, Moment1, Moment2, Beta1Pow,
                               Beta2Pow, Beta1Tensor, Beta2Tensor)
            s1, s2 = Beta1Pow[0], Beta2Pow[0]
            lr_t, eps_t = _corrected(LearningRate[0], s1, s2, eps)
            m1 = k1 * Moment1 + one_b1 * Grad
            m2 = k2 * Moment2 + one_b2 * (Grad * Grad)
            out = Param - lr_t * (m1 / (sqrt(m2) + eps_t))
            return {"ParamOut": out, "Moment1Out": m1, "Moment2Out": m2,
                    "Beta1PowOut": array([s1 * k1]), "Beta2PowOut": array([s2 * k2])}
        return fast

    def update_in_place(self, ins, scale, attrs):
        b1t, b2t = ins.get("Beta1Tensor"), ins.get("Beta2Tensor")
        b1 = b1t.reshape(()) if b1t is not None else attrs.get("beta1", 0.9)
        b2 = b2t.reshape(()) if b2t is not None else attrs.get("beta2", 0.999)
        b1p, b2p = ins["Beta1Pow"], ins["Beta2Pow"]
        eps = attrs.get("epsilon", 1.0e-8)
        if b1p.shape == b2p.shape == ins["LearningRate"].shape == (1,) \
                and b1p.dtype == b2p.dtype == ins["LearningRate"].dtype:
            s1, s2 = b1p[0], b2p[0]
            lr_t, eps_t = _corrected(ins["LearningRate"][0], s1, s2, eps)
            t = s1.dtype.type               # [1]-array * beta == scalar * beta of its dtype
            pows = {"Beta1PowOut": np.array([s1 * t(b1)]), "Beta2PowOut": np.array([s2 * t(b2)])}
        else:
            c2 = np.sqrt(1.0 - b2p)
            lr_t = (ins["LearningRate"] * c2 / (1.0 - b1p)).reshape(())
            eps_t = (eps * c2).reshape(())
            pows = {"Beta1PowOut": b1p * b1, "Beta2PowOut": b2p * b2}
        b1, b2, one_b1, one_b2 = consts(ins["Param"].dtype, b1, b2, 1.0 - b1, 1.0 - b2)

        def body(p, g, st, t):
            m1, m2 = st
            t0 = t[0]
            np.multiply(m1, b1, out=m1)
            np.add(m1, np.multiply(g, one_b1, out=t0), out=m1)
            np.multiply(m2, b2, out=m2)
            np.multiply(g, g, out=t0)
            np.add(m2, np.multiply(t0, one_b2, out=t0), out=m2)
            np.sqrt(m2, out=t0)
            np.add(t0, eps_t, out=t0)
            np.divide(m1, t0, out=t0)
            np.subtract(p, np.multiply(t0, lr_t, out=t0), out=p)
        chunked(ins, ("Moment1", "Moment2"), scale, 1, body)
        return pows


def _corrected(lr: Any, s1: Any, s2: Any, eps: float) -> Any:
    """Adam's bias-corrected rate and epsilon, ``lr * c2 / (1 - s1)`` and ``eps * c2`` with
    ``c2 = sqrt(1 - s2)``, as 0-d arrays: ``forward``'s [1]-array arithmetic done on scalars of
    the same dtype (a correctly rounded double sqrt rounds to the same float as a float sqrt)."""
    t = s2.dtype.type                # every operand a scalar of one dtype: NumPy 1 and 2 agree
    c2 = t(math.sqrt(t(1) - s2))
    return np.asarray(lr * c2 / (t(1) - s1)), np.asarray(t(eps) * c2)


@register
class Adamax(Update):
    """MomentOut = b1*M + (1-b1)*G;  InfNormOut = max(b2*InfNorm + epsilon, |G|);
    ParamOut = Param - lr / (1 - Beta1Pow) * MomentOut / InfNormOut (Beta1Pow is advanced by a
    separate ``scale`` op, as in fluid)."""
    type = "adamax"
    sparse_elementwise = True    # see ops/inplace.py (sparse gradients)
    inputs = ("Param", "Grad", "LearningRate", "Moment", "InfNorm", "Beta1Pow")
    outputs = ("ParamOut", "MomentOut", "InfNormOut")

    def infer(self, Param, Grad, LearningRate, Moment, InfNorm, Beta1Pow):
        check_like("adamax", "Param", Param, Grad=Grad, Moment=Moment, InfNorm=InfNorm)
        check_scalar("adamax", LearningRate=LearningRate, Beta1Pow=Beta1Pow)
        return {"ParamOut": Param, "MomentOut": Moment, "InfNormOut": InfNorm}

    def forward(self, Param, Grad, LearningRate, Moment, InfNorm, Beta1Pow, *, beta1=0.9,
                beta2=0.999, epsilon=1.0e-8):
        m = beta1 * Moment + (1.0 - beta1) * Grad
        u = np.maximum(beta2 * InfNorm + epsilon, np.abs(Grad))
        lr_t = LearningRate / (1.0 - Beta1Pow)
        return {"ParamOut": Param - lr_t * (m / u), "MomentOut": m, "InfNormOut": u}

    state_slots = (("Moment", "MomentOut"), ("InfNorm", "InfNormOut"))

    def update_in_place(self, ins, scale, attrs):
        b1, b2 = attrs.get("beta1", 0.9), attrs.get("beta2", 0.999)
        eps = attrs.get("epsilon", 1.0e-8)
        lr_t = (ins["LearningRate"] / (1.0 - ins["Beta1Pow"])).reshape(())
        b1, b2, one_b1, eps = consts(ins["Param"].dtype, b1, b2, 1.0 - b1, eps)

        def body(p, g, st, t):
            m, u = st
            t0 = t[0]
            np.multiply(m, b1, out=m)
            np.add(m, np.multiply(g, one_b1, out=t0), out=m)
            np.multiply(u, b2, out=u)
            np.add(u, eps, out=u)
            np.maximum(u, np.abs(g, out=t0), out=u)
            np.divide(m, u, out=t0)
            np.subtract(p, np.multiply(t0, lr_t, out=t0), out=p)
        chunked(ins, ("Moment", "InfNorm"), scale, 1, body)
        return {}


@register
class Lamb(Update):
    """Moment1Out = b1*M1 + (1-b1)*G;  Moment2Out = b2*M2 + (1-b2)*G^2 (no bias correction, as
    fluid 1.8);  r = Moment1Out / (sqrt(Moment2Out) + epsilon) + weight_decay * P;
    trust = |P| / |r| when both are > 0 else 1;  ParamOut = P - lr * trust * r."""
    type = "lamb"
    inputs = ("Param", "Grad", "LearningRate", "Moment1", "Moment2", "Beta1Pow", "Beta2Pow")
    outputs = ("ParamOut", "Moment1Out", "Moment2Out")
    in_place_scratch = ((None, 3, ""), (np.float64, 2, "sum_squares"), (None, 2, "sum_squares"))

    def infer(self, Param, Grad, LearningRate, Moment1, Moment2, Beta1Pow, Beta2Pow):
        check_like("lamb", "Param", Param, Grad=Grad, Moment1=Moment1, Moment2=Moment2)
        check_scalar("lamb", LearningRate=LearningRate, Beta1Pow=Beta1Pow, Beta2Pow=Beta2Pow)
        return {"ParamOut": Param, "Moment1Out": Moment1, "Moment2Out": Moment2}

    def forward(self, Param, Grad, LearningRate, Moment1, Moment2, Beta1Pow, Beta2Pow, *,
                weight_decay=0.01, beta1=0.9, beta2=0.999, epsilon=1.0e-6):
        m1 = beta1 * Moment1 + (1.0 - beta1) * Grad
        m2 = beta2 * Moment2 + (1.0 - beta2) * (Grad * Grad)
        r = m1 / (np.sqrt(m2) + epsilon) + weight_decay * Param
        trust = self._trust(Param, sum_squares(Param), sum_squares(r))
        return {"ParamOut": Param - LearningRate * trust * r, "Moment1Out": m1,
                "Moment2Out": m2}

    @staticmethod
    def _trust(param: np.ndarray, p_sq: float, r_sq: float) -> Any:
        """|P| / |r| from float64 sums of squares (1 when either is 0), in Param's dtype."""
        p_norm, r_norm = np.sqrt(p_sq), np.sqrt(r_sq)
        return param.dtype.type(p_norm / r_norm) if p_norm > 0 and r_norm > 0 \
            else param.dtype.type(1)

    state_slots = (("Moment1", "Moment1Out"), ("Moment2", "Moment2Out"))

    def update_in_place(self, ins, scale, attrs):
        b1, b2 = attrs.get("beta1", 0.9), attrs.get("beta2", 0.999)
        eps, wd = attrs.get("epsilon", 1.0e-6), attrs.get("weight_decay", 0.01)
        r_sq = [0.0]

        def ratio(p, m1, m2, t):
            """r = m1 / (sqrt(m2) + eps) + wd * p into t[0]."""
            np.sqrt(m2, out=t[0])
            np.add(t[0], eps, out=t[0])
            np.divide(m1, t[0], out=t[0])
            np.add(t[0], np.multiply(p, wd, out=t[1]), out=t[0])
            return t[0]

        def moments(p, g, st, t):                  # pass 1: moments, |r|^2
            m1, m2 = st
            np.multiply(m1, b1, out=m1)
            np.add(m1, np.multiply(g, 1.0 - b1, out=t[0]), out=m1)
            np.multiply(m2, b2, out=m2)
            np.multiply(g, g, out=t[0])
            np.add(m2, np.multiply(t[0], 1.0 - b2, out=t[0]), out=m2)
            r_sq[0] += sum_squares(ratio(p, m1, m2, t))
        chunked(ins, ("Moment1", "Moment2"), scale, 2, moments, ordered=True)
        # sum_squares(r) over the whole r sums the same CHUNK-sized pieces in the same order
        coef = ins["LearningRate"] * self._trust(ins["Param"], sum_squares(ins["Param"]),
                                                 r_sq[0])
        coef = coef.reshape(())

        def apply(p, g, st, t):                     # pass 2: recompute r, update P
            r = ratio(p, st[0], st[1], t)
            np.subtract(p, np.multiply(r, coef, out=r), out=p)
        chunked(ins, ("Moment1", "Moment2"), None, 2, apply)
        return {}
