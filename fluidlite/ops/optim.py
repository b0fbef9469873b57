"""Optimizer update ops (fluid 1.8 kernels). Not differentiable; pure functions of their inputs.

Every op reads ``Param`` (and its accumulators) and returns new arrays for ``ParamOut`` and the
``*Out`` slots; the optimizer wires the outputs to the same variables as the inputs, so the
executor commits them to the scope once the whole step succeeded. ``LearningRate`` is a [1]
array of the parameter's dtype (float32 normally): it is used as an array, never turned into a
Python or float64 scalar, so float32 parameters stay float32.
"""
from __future__ import annotations

from typing import Dict

import numpy as np

from ..core import shape as S
from ..core.registry import OpDef, VarSpec, register


def _check_like(op: str, ref_slot: str, ref: VarSpec, **others: VarSpec) -> None:
    for slot, spec in others.items():
        if spec is None:
            continue
        if len(spec.shape) != len(ref.shape) or not all(
                S.dims_match(a, b) for a, b in zip(spec.shape, ref.shape)):
            raise ValueError(f"{op}: {slot} shape {list(spec.shape)} must equal {ref_slot} shape "
                             f"{list(ref.shape)}")


def _check_scalar(op: str, **slots: VarSpec) -> None:
    for slot, spec in slots.items():
        if spec is not None and S.numel(spec.shape) not in (1, -1):
            raise ValueError(f"{op}: {slot} must hold exactly one element (shape [1]), but its "
                             f"shape is {list(spec.shape)}")


class _Update(OpDef):
    no_grad = True


@register
class Sgd(_Update):
    """ParamOut = Param - LearningRate * Grad."""
    type, inputs, outputs = "sgd", ("Param", "LearningRate", "Grad"), ("ParamOut",)

    def infer(self, Param, LearningRate, Grad):
        _check_like("sgd", "Param", Param, Grad=Grad)
        _check_scalar("sgd", LearningRate=LearningRate)
        return {"ParamOut": Param}

    def forward(self, Param, LearningRate, Grad):
        return {"ParamOut": Param - LearningRate * Grad}

    def lower(self, in_specs, attrs):
        return lambda p, lr, g: p - lr * g


@register
class Momentum(_Update):
    """VelocityOut = mu * Velocity + Grad;
    ParamOut = Param - (Grad + mu * VelocityOut) * lr (use_nesterov) or Param - lr * VelocityOut."""
    type = "momentum"
    inputs = ("Param", "Grad", "Velocity", "LearningRate")
    outputs = ("ParamOut", "VelocityOut")

    def infer(self, Param, Grad, Velocity, LearningRate):
        _check_like("momentum", "Param", Param, Grad=Grad, Velocity=Velocity)
        _check_scalar("momentum", LearningRate=LearningRate)
        return {"ParamOut": Param, "VelocityOut": Velocity}

    def forward(self, Param, Grad, Velocity, LearningRate, *, mu=0.0, use_nesterov=False):
        v = Velocity * mu + Grad
        if use_nesterov:
            p = Param - (Grad + v * mu) * LearningRate
        else:
            p = Param - LearningRate * v
        return {"ParamOut": p, "VelocityOut": v}


@register
class LarsMomentum(_Update):
    """local_lr = lr * lars_coeff * |P| / (|G| + lars_weight_decay * |P|) (lr when a norm is 0);
    VelocityOut = mu * Velocity + local_lr * (Grad + lars_weight_decay * Param);
    ParamOut = Param - VelocityOut."""
    type = "lars_momentum"
    inputs = ("Param", "Grad", "Velocity", "LearningRate")
    outputs = ("ParamOut", "VelocityOut")

    def infer(self, Param, Grad, Velocity, LearningRate):
        _check_like("lars_momentum", "Param", Param, Grad=Grad, Velocity=Velocity)
        _check_scalar("lars_momentum", LearningRate=LearningRate)
        return {"ParamOut": Param, "VelocityOut": Velocity}

    def forward(self, Param, Grad, Velocity, LearningRate, *, mu=0.0, lars_coeff=0.001,
                lars_weight_decay=0.0005):
        p_norm = np.sqrt(np.vdot(Param, Param)).astype(Param.dtype)
        g_norm = np.sqrt(np.vdot(Grad, Grad)).astype(Param.dtype)
        local_lr = LearningRate
        if p_norm > 0 and g_norm > 0:
            local_lr = LearningRate * lars_coeff * p_norm / (g_norm + lars_weight_decay * p_norm)
        v = Velocity * mu + local_lr * (Grad + lars_weight_decay * Param)
        return {"ParamOut": Param - v, "VelocityOut": v}


@register
class Adagrad(_Update):
    """MomentOut = Moment + Grad^2;  ParamOut = Param - lr * Grad / (sqrt(MomentOut) + epsilon)."""
    type = "adagrad"
    inputs = ("Param", "Grad", "Moment", "LearningRate")
    outputs = ("ParamOut", "MomentOut")

    def infer(self, Param, Grad, Moment, LearningRate):
        _check_like("adagrad", "Param", Param, Grad=Grad, Moment=Moment)
        _check_scalar("adagrad", LearningRate=LearningRate)
        return {"ParamOut": Param, "MomentOut": Moment}

    def forward(self, Param, Grad, Moment, LearningRate, *, epsilon=1.0e-6):
        m = Moment + Grad * Grad
        return {"ParamOut": Param - LearningRate * Grad / (np.sqrt(m) + epsilon),
                "MomentOut": m}


@register
class DecayedAdagrad(_Update):
    """MomentOut = decay * Moment + (1 - decay) * Grad^2;
    ParamOut = Param - lr * Grad / (sqrt(MomentOut) + epsilon)."""
    type = "decayed_adagrad"
    inputs = ("Param", "Grad", "Moment", "LearningRate")
    outputs = ("ParamOut", "MomentOut")

    def infer(self, Param, Grad, Moment, LearningRate):
        _check_like("decayed_adagrad", "Param", Param, Grad=Grad, Moment=Moment)
        _check_scalar("decayed_adagrad", LearningRate=LearningRate)
        return {"ParamOut": Param, "MomentOut": Moment}

    def forward(self, Param, Grad, Moment, LearningRate, *, decay=0.95, epsilon=1.0e-6):
        m = decay * Moment + (1.0 - decay) * (Grad * Grad)
        return {"ParamOut": Param - LearningRate * Grad / (np.sqrt(m) + epsilon),
                "MomentOut": m}


@register
class Adam(_Update):
    """Moment1Out = b1*M1 + (1-b1)*G;  Moment2Out = b2*M2 + (1-b2)*G^2;
    lr_t = lr * sqrt(1 - Beta2Pow) / (1 - Beta1Pow);
    ParamOut = Param - lr_t * Moment1Out / (sqrt(Moment2Out) + epsilon * sqrt(1 - Beta2Pow));
    Beta1PowOut = Beta1Pow * b1, Beta2PowOut = Beta2Pow * b2.
    ``Beta1Tensor`` / ``Beta2Tensor`` ([1]), when given, override the ``beta1`` / ``beta2`` attrs."""
    type = "adam"
    inputs = ("Param", "Grad", "LearningRate", "Moment1", "Moment2", "Beta1Pow", "Beta2Pow",
              "Beta1Tensor?", "Beta2Tensor?")
    outputs = ("ParamOut", "Moment1Out", "Moment2Out", "Beta1PowOut?", "Beta2PowOut?")

    def infer(self, Param, Grad, LearningRate, Moment1, Moment2, Beta1Pow, Beta2Pow,
              Beta1Tensor, Beta2Tensor):
        _check_like("adam", "Param", Param, Grad=Grad, Moment1=Moment1, Moment2=Moment2)
        _check_scalar("adam", LearningRate=LearningRate, Beta1Pow=Beta1Pow, Beta2Pow=Beta2Pow,
                      Beta1Tensor=Beta1Tensor, Beta2Tensor=Beta2Tensor)
        return {"ParamOut": Param, "Moment1Out": Moment1, "Moment2Out": Moment2,
                "Beta1PowOut": Beta1Pow, "Beta2PowOut": Beta2Pow}

    def forward(self, Param, Grad, LearningRate, Moment1, Moment2, Beta1Pow, Beta2Pow,
                Beta1Tensor=None, Beta2Tensor=None, *, beta1=0.9, beta2=0.999, epsilon=1.0e-8,
                lazy_mode=False, min_row_size_to_use_multithread=1000):
        b1 = Beta1Tensor.reshape(()) if Beta1Tensor is not None else beta1
        b2 = Beta2Tensor.reshape(()) if Beta2Tensor is not None else beta2
        m1 = b1 * Moment1 + (1.0 - b1) * Grad
        m2 = b2 * Moment2 + (1.0 - b2) * (Grad * Grad)
        c2 = np.sqrt(1.0 - Beta2Pow)
        lr_t = LearningRate * c2 / (1.0 - Beta1Pow)
        p = Param - lr_t * (m1 / (np.sqrt(m2) + epsilon * c2))
        return {"ParamOut": p, "Moment1Out": m1, "Moment2Out": m2,
                "Beta1PowOut": Beta1Pow * b1, "Beta2PowOut": Beta2Pow * b2}


@register
class Adamax(_Update):
    """MomentOut = b1*M + (1-b1)*G;  InfNormOut = max(b2*InfNorm + epsilon, |G|);
    ParamOut = Param - lr / (1 - Beta1Pow) * MomentOut / InfNormOut (Beta1Pow is advanced by a
    separate ``scale`` op, as in fluid)."""
    type = "adamax"
    inputs = ("Param", "Grad", "LearningRate", "Moment", "InfNorm", "Beta1Pow")
    outputs = ("ParamOut", "MomentOut", "InfNormOut")

    def infer(self, Param, Grad, LearningRate, Moment, InfNorm, Beta1Pow):
        _check_like("adamax", "Param", Param, Grad=Grad, Moment=Moment, InfNorm=InfNorm)
        _check_scalar("adamax", LearningRate=LearningRate, Beta1Pow=Beta1Pow)
        return {"ParamOut": Param, "MomentOut": Moment, "InfNormOut": InfNorm}

    def forward(self, Param, Grad, LearningRate, Moment, InfNorm, Beta1Pow, *, beta1=0.9,
                beta2=0.999, epsilon=1.0e-8):
        m = beta1 * Moment + (1.0 - beta1) * Grad
        u = np.maximum(beta2 * InfNorm + epsilon, np.abs(Grad))
        lr_t = LearningRate / (1.0 - Beta1Pow)
        return {"ParamOut": Param - lr_t * (m / u), "MomentOut": m, "InfNormOut": u}


@register
class Adadelta(_Update):
    """AvgSquaredGradOut = rho*Eg + (1-rho)*G^2;
    update = -sqrt((AvgSquaredUpdate + eps) / (AvgSquaredGradOut + eps)) * G;
    AvgSquaredUpdateOut = rho*Edx + (1-rho)*update^2;  ParamOut = Param + lr * update.
    ``LearningRate`` is optional (fluid 1.8 had no such input: ParamOut = Param + update)."""
    type = "adadelta"
    inputs = ("Param", "Grad", "AvgSquaredGrad", "AvgSquaredUpdate", "LearningRate?")
    outputs = ("ParamOut", "AvgSquaredGradOut", "AvgSquaredUpdateOut")

    def infer(self, Param, Grad, AvgSquaredGrad, AvgSquaredUpdate, LearningRate):
        _check_like("adadelta", "Param", Param, Grad=Grad, AvgSquaredGrad=AvgSquaredGrad,
                    AvgSquaredUpdate=AvgSquaredUpdate)
        _check_scalar("adadelta", LearningRate=LearningRate)
        return {"ParamOut": Param, "AvgSquaredGradOut": AvgSquaredGrad,
                "AvgSquaredUpdateOut": AvgSquaredUpdate}

    def forward(self, Param, Grad, AvgSquaredGrad, AvgSquaredUpdate, LearningRate=None, *,
                rho=0.95, epsilon=1.0e-6):
        eg = rho * AvgSquaredGrad + (1.0 - rho) * (Grad * Grad)
        update = -np.sqrt((AvgSquaredUpdate + epsilon) / (eg + epsilon)) * Grad
        edx = rho * AvgSquaredUpdate + (1.0 - rho) * (update * update)
        step = update if LearningRate is None else LearningRate * update
        return {"ParamOut": Param + step, "AvgSquaredGradOut": eg, "AvgSquaredUpdateOut": edx}


@register
class Rmsprop(_Update):
    """MeanSquareOut = decay*MS + (1-decay)*G^2;
    centered: MeanGradOut = decay*MG + (1-decay)*G,
              MomentOut = momentum*Moment + lr*G / sqrt(MeanSquareOut - MeanGradOut^2 + epsilon);
    else:     MomentOut = momentum*Moment + lr*G / sqrt(MeanSquareOut + epsilon);
    ParamOut = Param - MomentOut."""
    type = "rmsprop"
    inputs = ("Param", "MeanSquare", "MeanGrad?", "LearningRate", "Grad", "Moment")
    outputs = ("ParamOut", "MomentOut", "MeanSquareOut", "MeanGradOut?")

    def infer(self, Param, MeanSquare, MeanGrad, LearningRate, Grad, Moment):
        _check_like("rmsprop", "Param", Param, Grad=Grad, MeanSquare=MeanSquare, Moment=Moment,
                    MeanGrad=MeanGrad)
        _check_scalar("rmsprop", LearningRate=LearningRate)
        return {"ParamOut": Param, "MomentOut": Moment, "MeanSquareOut": MeanSquare,
                "MeanGradOut": MeanGrad if MeanGrad is not None else MeanSquare}

    def forward(self, Param, MeanSquare, MeanGrad, LearningRate, Grad, Moment, *,
                epsilon=1.0e-10, decay=0.9, momentum=0.0, centered=False):
        ms = decay * MeanSquare + (1.0 - decay) * (Grad * Grad)
        if centered:
            if MeanGrad is None:
                raise ValueError("rmsprop: centered=True needs the MeanGrad input")
            mg = decay * MeanGrad + (1.0 - decay) * Grad
            denom = np.sqrt(ms - mg * mg + epsilon)
        else:
            mg = MeanGrad
            denom = np.sqrt(ms + epsilon)
        mom = momentum * Moment + LearningRate * Grad / denom
        out = {"ParamOut": Param - mom, "MomentOut": mom, "MeanSquareOut": ms}
        if mg is not None:
            out["MeanGradOut"] = mg
        return out


@register
class Ftrl(_Update):
    """n' = n + G^2;  sigma = (n'^-lr_power - n^-lr_power) / lr;  z' = z + G - sigma * P;
    ParamOut = (l1 * sign(z') - z') / (n'^-lr_power / lr + 2 * l2) where |z'| > l1, else 0;
    SquaredAccumOut = n', LinearAccumOut = z'. (lr_power = -0.5 uses sqrt.)"""
    type = "ftrl"
    inputs = ("Param", "SquaredAccumulator", "LinearAccumulator", "Grad", "LearningRate")
    outputs = ("ParamOut", "SquaredAccumOut", "LinearAccumOut")

    def infer(self, Param, SquaredAccumulator, LinearAccumulator, Grad, LearningRate):
        _check_like("ftrl", "Param", Param, Grad=Grad, SquaredAccumulator=SquaredAccumulator,
                    LinearAccumulator=LinearAccumulator)
        _check_scalar("ftrl", LearningRate=LearningRate)
        return {"ParamOut": Param, "SquaredAccumOut": SquaredAccumulator,
                "LinearAccumOut": LinearAccumulator}

    def forward(self, Param, SquaredAccumulator, LinearAccumulator, Grad, LearningRate, *,
                l1=0.0, l2=0.0, lr_power=-0.5):
        n = SquaredAccumulator
        n_new = n + Grad * Grad
        if lr_power == -0.5:
            pow_new, pow_old = np.sqrt(n_new), np.sqrt(n)
        else:
            pow_new, pow_old = n_new ** -lr_power, n ** -lr_power
        z = LinearAccumulator + Grad - (pow_new - pow_old) / LearningRate * Param
        shrunk = (l1 * np.sign(z) - z) / (pow_new / LearningRate + 2.0 * l2)
        p = np.where(np.abs(z) > l1, shrunk, np.zeros((), dtype=Param.dtype)).astype(
            Param.dtype, copy=False)
        return {"ParamOut": p, "SquaredAccumOut": n_new, "LinearAccumOut": z}


@register
class Lamb(_Update):
    """Moment1Out = b1*M1 + (1-b1)*G;  Moment2Out = b2*M2 + (1-b2)*G^2 (no bias correction, as
    fluid 1.8);  r = Moment1Out / (sqrt(Moment2Out) + epsilon) + weight_decay * P;
    trust = |P| / |r| when both are > 0 else 1;  ParamOut = P - lr * trust * r."""
    type = "lamb"
    inputs = ("Param", "Grad", "LearningRate", "Moment1", "Moment2", "Beta1Pow", "Beta2Pow")
    outputs = ("ParamOut", "Moment1Out", "Moment2Out")

    def infer(self, Param, Grad, LearningRate, Moment1, Moment2, Beta1Pow, Beta2Pow):
        _check_like("lamb", "Param", Param, Grad=Grad, Moment1=Moment1, Moment2=Moment2)
        _check_scalar("lamb", LearningRate=LearningRate, Beta1Pow=Beta1Pow, Beta2Pow=Beta2Pow)
        return {"ParamOut": Param, "Moment1Out": Moment1, "Moment2Out": Moment2}

    def forward(self, Param, Grad, LearningRate, Moment1, Moment2, Beta1Pow, Beta2Pow, *,
                weight_decay=0.01, beta1=0.9, beta2=0.999, epsilon=1.0e-6):
        m1 = beta1 * Moment1 + (1.0 - beta1) * Grad
        m2 = beta2 * Moment2 + (1.0 - beta2) * (Grad * Grad)
        r = m1 / (np.sqrt(m2) + epsilon) + weight_decay * Param
        p_norm = np.sqrt(np.vdot(Param, Param))
        r_norm = np.sqrt(np.vdot(r, r))
        trust = (p_norm / r_norm).astype(Param.dtype) if p_norm > 0 and r_norm > 0 \
            else Param.dtype.type(1)
        return {"ParamOut": Param - LearningRate * trust * r, "Moment1Out": m1,
                "Moment2Out": m2}


_MAX_NUM_ACCUMULATES = 16384   # fluid's kMaxNumAccumulates (precision guard for sum_1)


@register
class AverageAccumulates(_Update):
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
        _check_like("average_accumulates", "param", param, in_sum_1=in_sum_1,
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
