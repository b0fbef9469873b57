"""Optimizer update ops (fluid 1.8 kernels), first-order family: ``sgd``, ``momentum``,
``lars_momentum``, and ModelAverage's ``average_accumulates``. Not differentiable; pure
functions of their inputs.

Every op reads ``Param`` (and its accumulators) and returns new arrays for ``ParamOut`` and the
``*Out`` slots; the optimizer wires the outputs to the same variables as the inputs, so the
executor commits them to the scope once the whole step succeeded. ``LearningRate`` is a [1]
array of the parameter's dtype (float32 normally): it is used as an array, never turned into a
Python or float64 scalar, so float32 parameters stay float32. The adaptive families are in
``optim_adagrad.py`` and ``optim_adam.py``; the in-place variants used by plan-time fusion
(``update_in_place``) are described in ``inplace.py``.
"""
from __future__ import annotations

from typing import Dict

import numpy as np

from ..core.registry import register
from .inplace import Update, check_like, check_scalar, chunked, consts, sum_squares, wide


@register
class Sgd(Update):
    """ParamOut = Param - LearningRate * Grad."""
    type, inputs, outputs = "sgd", ("Param", "LearningRate", "Grad"), ("ParamOut",)
    plain_descent = True

    def sparse_rows_only(self, attrs):
        """fluid 1.8: a SelectedRows Grad updates its rows only (the others have a zero
        gradient: the same result as dense)."""
        return True

    def infer(self, Param, LearningRate, Grad):
        check_like("sgd", "Param", Param, Grad=Grad)
        check_scalar("sgd", LearningRate=LearningRate)
        return {"ParamOut": Param}

    def forward(self, Param, LearningRate, Grad):
        return {"ParamOut": Param - LearningRate * Grad}

    def lower(self, in_specs, attrs):
        return lambda p, lr, g: p - lr * g

    def update_in_place(self, ins, scale, attrs):
        lr = ins["LearningRate"].reshape(())
        dt = wide(ins["Param"], lr)     # a float64 rate (a fused tiny clip scale) stays float64

        def body(p, g, st, t):
            np.subtract(p, np.multiply(g, lr, out=t[0], dtype=dt), out=p)
        chunked(ins, (), scale, 1, body)
        return {}


@register
class Momentum(Update):
    """VelocityOut = mu * Velocity + Grad;
    ParamOut = Param - (Grad + mu * VelocityOut) * lr (use_nesterov) or Param - lr * VelocityOut."""
    type = "momentum"
    sparse_elementwise = True    # see ops/inplace.py (sparse gradients)
    folds_l2_decay = True
    inputs = ("Param", "Grad", "Velocity", "LearningRate")
    outputs = ("ParamOut", "VelocityOut")

    def infer(self, Param, Grad, Velocity, LearningRate):
        check_like("momentum", "Param", Param, Grad=Grad, Velocity=Velocity)
        check_scalar("momentum", LearningRate=LearningRate)
        return {"ParamOut": Param, "VelocityOut": Velocity}

    def forward(self, Param, Grad, Velocity, LearningRate, *, mu=0.0, use_nesterov=False):
        v = Velocity * mu + Grad
        if use_nesterov:
            p = Param - (Grad + v * mu) * LearningRate
        else:
            p = Param - LearningRate * v
        return {"ParamOut": p, "VelocityOut": v}

    state_slots = (("Velocity", "VelocityOut"),)

    def update_in_place(self, ins, scale, attrs):
        lr = ins["LearningRate"].reshape(())
        mu, nesterov = attrs.get("mu", 0.0), attrs.get("use_nesterov", False)
        mu, = consts(ins["Param"].dtype, mu)

        def body(p, g, st, t):
            v, = st
            np.multiply(v, mu, out=v)
            np.add(v, g, out=v)
            if nesterov:
                np.multiply(v, mu, out=t[0])
                np.add(g, t[0], out=t[0])
                np.multiply(t[0], lr, out=t[0])
            else:
                np.multiply(v, lr, out=t[0])
            np.subtract(p, t[0], out=p)
        chunked(ins, ("Velocity",), scale, 1, body)
        return {}


@register
class LarsMomentum(Update):
    """local_lr = lr * lars_coeff * |P| / (|G| + lars_weight_decay * |P|) (lr when a norm is 0);
    VelocityOut = mu * Velocity + local_lr * (Grad + lars_weight_decay * Param);
    ParamOut = Param - VelocityOut."""
    type = "lars_momentum"
    inputs = ("Param", "Grad", "Velocity", "LearningRate")
    outputs = ("ParamOut", "VelocityOut")
    in_place_scratch = ((None, 3, ""), (np.float64, 2, "sum_squares"), (None, 2, "sum_squares"))

    def infer(self, Param, Grad, Velocity, LearningRate):
        check_like("lars_momentum", "Param", Param, Grad=Grad, Velocity=Velocity)
        check_scalar("lars_momentum", LearningRate=LearningRate)
        return {"ParamOut": Param, "VelocityOut": Velocity}

    def forward(self, Param, Grad, Velocity, LearningRate, *, mu=0.0, lars_coeff=0.001,
                lars_weight_decay=0.0005):
        local_lr = self._local_lr(Param, sum_squares(Param), sum_squares(Grad), LearningRate,
                                  lars_coeff, lars_weight_decay)
        v = Velocity * mu + local_lr * (Grad + lars_weight_decay * Param)
        return {"ParamOut": Param - v, "VelocityOut": v}

    @staticmethod
    def _local_lr(param: np.ndarray, p_sq: float, g_sq: float, lr: np.ndarray, coeff: float,
                  decay: float) -> np.ndarray:
        """The norms and their ratio in float64 (no overflow for any finite input); the local
        learning rate is rounded once to Param's dtype."""
        p_norm, g_norm = np.sqrt(p_sq), np.sqrt(g_sq)
        if not (p_norm > 0 and g_norm > 0):
            return lr
        ratio = coeff * p_norm / (g_norm + decay * p_norm)
        return (lr.astype(np.float64) * ratio).astype(param.dtype)

    state_slots = (("Velocity", "VelocityOut"),)

    def update_in_place(self, ins, scale, attrs):
        mu = attrs.get("mu", 0.0)
        coeff, decay = attrs.get("lars_coeff", 0.001), attrs.get("lars_weight_decay", 0.0005)
        local_lr = self._local_lr(ins["Param"], sum_squares(ins["Param"]),
                                  sum_squares(ins["Grad"], scale), ins["LearningRate"], coeff,
                                  decay).reshape(())

        def body(p, g, st, t):
            v, = st
            np.multiply(p, decay, out=t[0])
            np.add(g, t[0], out=t[0])
            np.multiply(t[0], local_lr, out=t[0])
            np.multiply(v, mu, out=v)
            np.add(v, t[0], out=v)
            np.subtract(p, v, out=p)
        chunked(ins, ("Velocity",), scale, 1, body)
        return {}


_MAX_NUM_ACCUMULATES = 16384   # fluid's kMaxNumAccumulates (precision guard for sum_1)


@register
class AverageAccumulates(Update):
    """ModelAverage's running sums. Sequential semantics (fluid's kernel updates its outputs in
    place and the optimizer aliases every in_* with its out_*, so each step sees the previous
    step's result):  num_updates += 1; num_accumulates += 1; sum_1 += param;
    every 16384 updates (precision guard): sum_2 += sum_1, sum_1 = 0;
    when num_accumulates >= min_average_window and >= min(max_average_window,
    num_updates * average_window): sum_3 = sum_1 + sum_2, sum_1 = sum_2 = 0,
    old_num_accumulates = num_accumulates, num_accumulates = 0.
    So (sum_1 + sum_2 + sum_3) / (num_accumulates + old_num_accumulates) is the window mean."""
    type = "average_accumulates"
    inputs = ("param", "in_sum_1", "in_sum_2", "in_sum_3", "in_num_accumulates",
              "in_old_num_accumulates", "in_num_updates")
    outputs = ("out_sum_1", "out_sum_2", "out_sum_3", "out_num_accumulates",
               "out_old_num_accumulates", "out_num_updates")

    def infer(self, param, in_sum_1, in_sum_2, in_sum_3, in_num_accumulates,
              in_old_num_accumulates, in_num_updates):
        check_like("average_accumulates", "param", param, in_sum_1=in_sum_1,
                    in_sum_2=in_sum_2, in_sum_3=in_sum_3)
        return {"out_sum_1": in_sum_1, "out_sum_2": in_sum_2, "out_sum_3": in_sum_3,
                "out_num_accumulates": in_num_accumulates,
                "out_old_num_accumulates": in_old_num_accumulates,
                "out_num_updates": in_num_updates}

    def forward(self, param, in_sum_1, in_sum_2, in_sum_3, in_num_accumulates,
                in_old_num_accumulates, in_num_updates, *, average_window=0.0,
                max_average_window=10000, min_average_window=10000) -> Dict[str, np.ndarray]:
        if min_average_window > max_average_window:
            raise ValueError(f"average_accumulates: min_average_window ({min_average_window}) "
                             f"must be <= max_average_window ({max_average_window})")
        num_updates = int(in_num_updates.reshape(-1)[0]) + 1
        num_acc = int(in_num_accumulates.reshape(-1)[0]) + 1
        old_num = int(in_old_num_accumulates.reshape(-1)[0])
        s1, s2, s3 = in_sum_1 + param, in_sum_2, in_sum_3
        if num_updates % _MAX_NUM_ACCUMULATES == 0:
            s2 = s2 + s1
            s1 = np.zeros_like(in_sum_1)
        if num_acc >= min_average_window and \
                num_acc >= min(max_average_window, num_updates * average_window):
            s3 = s1 + s2
            s1, s2 = np.zeros_like(in_sum_1), np.zeros_like(in_sum_2)
            old_num, num_acc = num_acc, 0
        counter = lambda v, like: np.full(like.shape, v, dtype=like.dtype)
        return {"out_sum_1": s1, "out_sum_2": s2, "out_sum_3": s3,
                "out_num_accumulates": counter(num_acc, in_num_accumulates),
                "out_old_num_accumulates": counter(old_num, in_old_num_accumulates),
                "out_num_updates": counter(num_updates, in_num_updates)}
