"""Optimizer update ops, adaptive per-element step family: ``adagrad``, ``decayed_adagrad``,
``adadelta``, ``rmsprop``, ``ftrl`` (fluid 1.8 kernels; conventions in ``optim.py``)."""
from __future__ import annotations


import numpy as np

from ..core.registry import register
from .inplace import Update, check_like, check_scalar, chunked, consts


@register
class Adagrad(Update):
    """MomentOut = Moment + Grad^2;  ParamOut = Param - lr * Grad / (sqrt(MomentOut) + epsilon)."""
    type = "adagrad"
    inputs = ("Param", "Grad", "Moment", "LearningRate")
    outputs = ("ParamOut", "MomentOut")

    def sparse_rows_only(self, attrs):
        """fluid 1.8's SparseAdagradFunctor: a SelectedRows Grad updates its (merged) rows
        only -- the others' zero gradient would change nothing, so this equals dense."""
        return True

    def infer(self, Param, Grad, Moment, LearningRate):
        check_like("adagrad", "Param", Param, Grad=Grad, Moment=Moment)
        check_scalar("adagrad", LearningRate=LearningRate)
        return {"ParamOut": Param, "MomentOut": Moment}

    def forward(self, Param, Grad, Moment, LearningRate, *, epsilon=1.0e-6):
        m = Moment + Grad * Grad
        return {"ParamOut": Param - LearningRate * Grad / (np.sqrt(m) + epsilon),
                "MomentOut": m}

    state_slots = (("Moment", "MomentOut"),)

    def update_in_place(self, ins, scale, attrs):
        lr, eps = ins["LearningRate"].reshape(()), attrs.get("epsilon", 1.0e-6)
        eps, = consts(ins["Param"].dtype, eps)

        def body(p, g, st, t):
            m, = st
            np.add(m, np.multiply(g, g, out=t[0]), out=m)
            _adagrad_step(p, g, m, lr, eps, t)
        chunked(ins, ("Moment",), scale, 2, body)
        return {}


def _adagrad_step(p, g, m, lr, eps, t) -> None:
    """p -= lr * g / (sqrt(m) + eps), as ``Param - LearningRate * Grad / (...)`` rounds it."""
    np.sqrt(m, out=t[0])
    np.add(t[0], eps, out=t[0])
    np.multiply(g, lr, out=t[1])
    np.divide(t[1], t[0], out=t[1])
    np.subtract(p, t[1], out=p)


@register
class DecayedAdagrad(Update):
    """MomentOut = decay * Moment + (1 - decay) * Grad^2;
    ParamOut = Param - lr * Grad / (sqrt(MomentOut) + epsilon)."""
    type = "decayed_adagrad"
    sparse_elementwise = True    # see ops/inplace.py (sparse gradients)
    inputs = ("Param", "Grad", "Moment", "LearningRate")
    outputs = ("ParamOut", "MomentOut")

    def infer(self, Param, Grad, Moment, LearningRate):
        check_like("decayed_adagrad", "Param", Param, Grad=Grad, Moment=Moment)
        check_scalar("decayed_adagrad", LearningRate=LearningRate)
        return {"ParamOut": Param, "MomentOut": Moment}

    def forward(self, Param, Grad, Moment, LearningRate, *, decay=0.95, epsilon=1.0e-6):
        m = decay * Moment + (1.0 - decay) * (Grad * Grad)
        return {"ParamOut": Param - LearningRate * Grad / (np.sqrt(m) + epsilon),
                "MomentOut": m}

    state_slots = (("Moment", "MomentOut"),)

    def update_in_place(self, ins, scale, attrs):
        lr, eps = ins["LearningRate"].reshape(()), attrs.get("epsilon", 1.0e-6)
        decay = attrs.get("decay", 0.95)
        eps, decay, one_decay = consts(ins["Param"].dtype, eps, decay, 1.0 - decay)

        def body(p, g, st, t):
            m, = st
            np.multiply(m, decay, out=m)
            np.multiply(g, g, out=t[0])
            np.multiply(t[0], one_decay, out=t[0])
            np.add(m, t[0], out=m)
            _adagrad_step(p, g, m, lr, eps, t)
        chunked(ins, ("Moment",), scale, 2, body)
        return {}


@register
class Adadelta(Update):
    """AvgSquaredGradOut = rho*Eg + (1-rho)*G^2;
    update = -sqrt((AvgSquaredUpdate + eps) / (AvgSquaredGradOut + eps)) * G;
    AvgSquaredUpdateOut = rho*Edx + (1-rho)*update^2;  ParamOut = Param + lr * update.
    ``LearningRate`` is optional (fluid 1.8 had no such input: ParamOut = Param + update)."""
    type = "adadelta"
    sparse_elementwise = True    # see ops/inplace.py (sparse gradients)
    inputs = ("Param", "Grad", "AvgSquaredGrad", "AvgSquaredUpdate", "LearningRate?")
    outputs = ("ParamOut", "AvgSquaredGradOut", "AvgSquaredUpdateOut")

    def infer(self, Param, Grad, AvgSquaredGrad, AvgSquaredUpdate, LearningRate):
        check_like("adadelta", "Param", Param, Grad=Grad, AvgSquaredGrad=AvgSquaredGrad,
                    AvgSquaredUpdate=AvgSquaredUpdate)
        check_scalar("adadelta", LearningRate=LearningRate)
        return {"ParamOut": Param, "AvgSquaredGradOut": AvgSquaredGrad,
                "AvgSquaredUpdateOut": AvgSquaredUpdate}

    def forward(self, Param, Grad, AvgSquaredGrad, AvgSquaredUpdate, LearningRate=None, *,
                rho=0.95, epsilon=1.0e-6):
        eg = rho * AvgSquaredGrad + (1.0 - rho) * (Grad * Grad)
        update = -np.sqrt((AvgSquaredUpdate + epsilon) / (eg + epsilon)) * Grad
        edx = rho * AvgSquaredUpdate + (1.0 - rho) * (update * update)
        step = update if LearningRate is None else LearningRate * update
        return {"ParamOut": Param + step, "AvgSquaredGradOut": eg, "AvgSquaredUpdateOut": edx}

    state_slots = (("AvgSquaredGrad", "AvgSquaredGradOut"),
                   ("AvgSquaredUpdate", "AvgSquaredUpdateOut"))

    def update_in_place(self, ins, scale, attrs):
        rho, eps = attrs.get("rho", 0.95), attrs.get("epsilon", 1.0e-6)
        lr = ins.get("LearningRate")
        lr = lr.reshape(()) if lr is not None else None

        def body(p, g, st, t):
            eg, edx = st
            t0, t1 = t
            np.multiply(eg, rho, out=eg)
            np.multiply(g, g, out=t0)
            np.add(eg, np.multiply(t0, 1.0 - rho, out=t0), out=eg)
            np.add(edx, eps, out=t0)
            np.divide(t0, np.add(eg, eps, out=t1), out=t0)
            np.sqrt(t0, out=t0)
            np.negative(t0, out=t0)
            np.multiply(t0, g, out=t0)                       # update
            np.multiply(edx, rho, out=edx)
            np.multiply(t0, t0, out=t1)
            np.add(edx, np.multiply(t1, 1.0 - rho, out=t1), out=edx)
            if lr is not None:
                np.multiply(t0, lr, out=t0)
            np.add(p, t0, out=p)
        chunked(ins, ("AvgSquaredGrad", "AvgSquaredUpdate"), scale, 2, body)
        return {}


@register
class Rmsprop(Update):
    """MeanSquareOut = decay*MS + (1-decay)*G^2;
    centered: MeanGradOut = decay*MG + (1-decay)*G,
              MomentOut = momentum*Moment + lr*G / sqrt(MeanSquareOut - MeanGradOut^2 + epsilon);
    else:     MomentOut = momentum*Moment + lr*G / sqrt(MeanSquareOut + epsilon);
    ParamOut = Param - MomentOut."""
    type = "rmsprop"
    sparse_elementwise = True    # see ops/inplace.py (sparse gradients)
    inputs = ("Param", "MeanSquare", "MeanGrad?", "LearningRate", "Grad", "Moment")
    outputs = ("ParamOut", "MomentOut", "MeanSquareOut", "MeanGradOut?")
    in_place_needs = (("centered", "MeanGrad"),)

    def infer(self, Param, MeanSquare, MeanGrad, LearningRate, Grad, Moment):
        check_like("rmsprop", "Param", Param, Grad=Grad, MeanSquare=MeanSquare, Moment=Moment,
                    MeanGrad=MeanGrad)
        check_scalar("rmsprop", LearningRate=LearningRate)
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

    state_slots = (("Moment", "MomentOut"), ("MeanSquare", "MeanSquareOut"),
                   ("MeanGrad", "MeanGradOut"))

    def update_in_place(self, ins, scale, attrs):
        eps, decay = attrs.get("epsilon", 1.0e-10), attrs.get("decay", 0.9)
        momentum, centered = attrs.get("momentum", 0.0), attrs.get("centered", False)
        lr = ins["LearningRate"].reshape(())
        eps, decay, one_decay, momentum = consts(ins["Param"].dtype, eps, decay, 1.0 - decay,
                                                  momentum)
        states = ("Moment", "MeanSquare") + (("MeanGrad",) if centered else ())
        if centered and ins.get("MeanGrad") is None:
            raise ValueError("rmsprop: centered=True needs the MeanGrad input")

        def body(p, g, st, t):
            mom, ms = st[0], st[1]
            t0, t1 = t
            np.multiply(ms, decay, out=ms)
            np.multiply(g, g, out=t0)
            np.add(ms, np.multiply(t0, one_decay, out=t0), out=ms)
            if centered:
                mg = st[2]
                np.multiply(mg, decay, out=mg)
                np.add(mg, np.multiply(g, one_decay, out=t0), out=mg)
                np.subtract(ms, np.multiply(mg, mg, out=t0), out=t0)
                np.add(t0, eps, out=t0)
            else:
                np.add(ms, eps, out=t0)
            np.sqrt(t0, out=t0)
            np.multiply(g, lr, out=t1)
            np.divide(t1, t0, out=t1)
            np.multiply(mom, momentum, out=mom)
            np.add(mom, t1, out=mom)
            np.subtract(p, mom, out=p)
        chunked(ins, states, scale, 2, body)
        return {}


@register
class Ftrl(Update):
    """n' = n + G^2;  sigma = (n'^-lr_power - n^-lr_power) / lr;  z' = z + G - sigma * P;
    ParamOut = (l1 * sign(z') - z') / (n'^-lr_power / lr + 2 * l2) where |z'| > l1, else 0;
    SquaredAccumOut = n', LinearAccumOut = z'. (lr_power = -0.5 uses sqrt.)"""
    type = "ftrl"
    sparse_elementwise = True    # see ops/inplace.py (sparse gradients)
    inputs = ("Param", "SquaredAccumulator", "LinearAccumulator", "Grad", "LearningRate")
    outputs = ("ParamOut", "SquaredAccumOut", "LinearAccumOut")
    in_place_scratch = ((None, 3, ""), (np.bool_, 1, ""))

    def infer(self, Param, SquaredAccumulator, LinearAccumulator, Grad, LearningRate):
        check_like("ftrl", "Param", Param, Grad=Grad, SquaredAccumulator=SquaredAccumulator,
                    LinearAccumulator=LinearAccumulator)
        check_scalar("ftrl", LearningRate=LearningRate)
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
        # 0/0 where a coordinate has seen no gradient yet (l2 = 0): masked out just below
        with np.errstate(invalid="ignore", divide="ignore"):
            shrunk = (l1 * np.sign(z) - z) / (pow_new / LearningRate + 2.0 * l2)
        p = np.where(np.abs(z) > l1, shrunk, np.zeros((), dtype=Param.dtype)).astype(
            Param.dtype, copy=False)
        return {"ParamOut": p, "SquaredAccumOut": n_new, "LinearAccumOut": z}

    state_slots = (("SquaredAccumulator", "SquaredAccumOut"),
                   ("LinearAccumulator", "LinearAccumOut"))

    def update_in_place(self, ins, scale, attrs):
        l1, l2 = attrs.get("l1", 0.0), attrs.get("l2", 0.0)
        lr_power = attrs.get("lr_power", -0.5)
        lr = ins["LearningRate"].reshape(())

        def powed(x, out):
            return np.sqrt(x, out=out) if lr_power == -0.5 else np.power(x, -lr_power, out=out)

        def body(p, g, st, t):
            n, z = st
            t0, t1, keep = t
            powed(n, t0)                                        # pow_old
            np.add(n, np.multiply(g, g, out=t1), out=n)         # n_new
            powed(n, t1)                                        # pow_new
            np.subtract(t1, t0, out=t0)
            np.divide(t0, lr, out=t0)
            np.multiply(t0, p, out=t0)
            np.add(z, g, out=z)
            np.subtract(z, t0, out=z)                           # z
            np.sign(z, out=t0)
            np.multiply(t0, l1, out=t0)
            np.subtract(t0, z, out=t0)
            np.divide(t1, lr, out=t1)
            np.add(t1, 2.0 * l2, out=t1)
            with np.errstate(invalid="ignore", divide="ignore"):    # 0/0: masked below
                np.divide(t0, t1, out=t0)                       # shrunk
            mask = np.greater(np.abs(z, out=t1), l1, out=keep)
            p[...] = 0
            np.copyto(p, t0, where=mask)
        chunked(ins, ("SquaredAccumulator", "LinearAccumulator"), scale, 2, body, (np.bool_,))
        return {}
