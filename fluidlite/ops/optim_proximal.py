"""fluid 1.8's proximal update ops, ``proximal_gd`` and ``proximal_adagrad`` (forward-backward
splitting with an l1 / l2 proximal step; fluid has no optimizer class for them: programs call
the ops). Not differentiable; pure functions of their inputs, in the parameter's dtype.

    prox = Param - lr * Grad                          (proximal_gd)
    MomentOut = Moment + Grad^2; prox = Param - lr * Grad / sqrt(MomentOut)   (proximal_adagrad)
    ParamOut = sign(prox) * max(|prox| - lr * l1, 0) / (1 + lr * l2)    if l1 > 0
             = prox / (1 + lr * l2)                                       otherwise
"""
from __future__ import annotations

import numpy as np

from ..core.registry import OpDef, register
from .inplace import check_like, check_scalar


def _prox(prox: np.ndarray, lr: np.ndarray, l1: float, l2: float) -> np.ndarray:
    t = prox.dtype.type
    lr = lr.reshape(()).astype(prox.dtype, copy=False)
    den = t(1) + lr * t(l2)
    if l1 > 0:
        return np.sign(prox) * np.maximum(np.abs(prox) - lr * t(l1), t(0)) / den
    return prox / den


@register
class ProximalGD(OpDef):
    """ParamOut = prox_{lr l1, lr l2}(Param - LearningRate * Grad) (module docstring)."""
    type = "proximal_gd"
    inputs, outputs = ("Param", "Grad", "LearningRate"), ("ParamOut",)
    no_grad = True

    def infer(self, Param, Grad, LearningRate, *, l1=0.0, l2=0.0):
        check_like(self.type, "Param", Param, Grad=Grad)
        check_scalar(self.type, LearningRate=LearningRate)
        return {"ParamOut": Param}

    def forward(self, Param, Grad, LearningRate, *, l1=0.0, l2=0.0):
        lr = LearningRate.reshape(()).astype(Param.dtype, copy=False)
        return {"ParamOut": _prox(Param - lr * Grad, LearningRate, l1, l2).astype(
            Param.dtype, copy=False)}


@register
class ProximalAdagrad(OpDef):
    """MomentOut = Moment + Grad^2; ParamOut = prox(Param - LearningRate * Grad /
    sqrt(MomentOut)) (module docstring; no epsilon, as fluid's kernel)."""
    type = "proximal_adagrad"
    inputs = ("Param", "Moment", "Grad", "LearningRate")
    outputs = ("ParamOut", "MomentOut")
    no_grad = True

    def infer(self, Param, Moment, Grad, LearningRate, *, l1=0.0, l2=0.0):
        check_like(self.type, "Param", Param, Grad=Grad, Moment=Moment)
        check_scalar(self.type, LearningRate=LearningRate)
        return {"ParamOut": Param, "MomentOut": Moment}

    def forward(self, Param, Moment, Grad, LearningRate, *, l1=0.0, l2=0.0):
        m = Moment + Grad * Grad
        lr = LearningRate.reshape(()).astype(Param.dtype, copy=False)
        with np.errstate(divide="ignore", invalid="ignore"):     # 0 / 0: NaN, as fluid
            prox = Param - Grad * lr / np.sqrt(m)
        return {"ParamOut": _prox(prox, LearningRate, l1, l2).astype(Param.dtype, copy=False),
                "MomentOut": m}
