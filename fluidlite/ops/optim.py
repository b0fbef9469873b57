"""Optimizer update ops (fluid 1.8 kernels). Not differentiable; pure functions of their inputs.

Every op reads ``Param`` (and its accumulators) and returns new arrays for ``ParamOut`` and the
``*Out`` slots; the optimizer wires the outputs to the same variables as the inputs, so the
executor commits them to the scope once the whole step succeeded. ``LearningRate`` is a [1]
array of the parameter's dtype (float32 normally): it is used as an array, never turned into a
Python or float64 scalar, so float32 parameters stay float32.

In-place variants (used by plan-time fusion, ``executor/fusion.py``): every elementwise update op
also defines ``update_in_place(ins, scale, attrs)``, which writes ``Param`` and the accumulators
named in ``state_slots`` into their own buffers and returns only the remaining (small) outputs.
It performs the same floating-point operations, in the same order and dtypes, as ``forward`` on
the gradient ``Grad * scale`` (``scale`` = the global-norm clip factor, or ``None``), so the two
agree bit for bit. Large arrays are processed in chunks of ``CHUNK`` elements through per-thread
scratch buffers: no parameter-sized temporary, no allocation per step, and nothing shared between
threads. Norms (``lars_momentum``, ``lamb``) are accumulated in float64 (``sum_squares``), so a
finite parameter or gradient never overflows to an infinite norm.
"""
from __future__ import annotations

import math
import threading
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

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


CHUNK = 1 << 17        # elements per pass of an in-place update (measured: 2^16..2^18 best)
_tls = threading.local()


def scratch(dtype: Any, count: int, tag: str = "") -> List[np.ndarray]:
    """``count`` scratch buffers of ``CHUNK`` elements of ``dtype``, private to this thread and
    to ``tag`` (reused across calls: a kernel must not hold them across another kernel's call
    that uses the same tag)."""
    try:
        pool = _tls.pool
    except AttributeError:
        pool = _tls.pool = {}
    key = (dtype, tag)
    bufs = pool.get(key)
    if bufs is None or len(bufs) < count or bufs[0].size < CHUNK:
        bufs = pool[key] = [np.empty(CHUNK, dtype) for _ in range(max(count, 3))]
    return bufs


def sum_squares(x: np.ndarray, scale: Any = None) -> float:
    """sum((x * scale)^2) accumulated in float64 over ``CHUNK``-element pieces (so it is the same
    number whether ``x`` is passed whole or scaled on the fly), as a Python float."""
    flat = x.reshape(-1)
    n = flat.size
    # always through the same (aligned) buffer: BLAS may round differently at other offsets
    buf64 = scratch(np.float64, 1, "sum_squares")[0]
    tmp = scratch(x.dtype, 2, "sum_squares")[1] if scale is not None else None
    total = 0.0
    for a in range(0, n, CHUNK):
        b = min(a + CHUNK, n)
        piece = flat[a:b]
        if scale is not None:
            piece = np.multiply(piece, scale, out=tmp[:b - a])
        v = buf64[:b - a]
        np.copyto(v, piece)
        total += float(np.dot(v, v))
    return total


def _consts(dtype: np.dtype, *values: Any) -> List[np.ndarray]:
    """Python-float constants as 0-d arrays of ``dtype``: the value NumPy would use (a Python
    float operand is rounded to the array's dtype), but ~2x cheaper per ufunc call."""
    return [np.asarray(v, dtype) for v in values]


def _chunked(ins: Dict[str, np.ndarray], states: Sequence[str], scale: Any, ntmp: int,
             body: Callable[..., None]) -> None:
    """Call ``body(p, g, states, tmps)`` on aligned flat chunks of Param, Grad (times
    ``scale``) and the ``states`` arrays; ``tmps`` are ``ntmp`` scratch chunks."""
    p, g = ins["Param"], ins["Grad"]
    if scale is not None:
        scale = np.asarray(scale)      # 0-d arrays dispatch ~2x faster than scalars
    bufs = scratch(p.dtype, ntmp + 1)
    n = p.size
    if n <= CHUNK:                      # one piece, in the arrays' own shape
        shape = p.shape
        if scale is not None:
            g = np.multiply(g, scale, out=bufs[0][:n].reshape(shape))
        body(p, g, [ins[s] for s in states],
             [t[:n].reshape(shape) for t in bufs[1:ntmp + 1]])
        return
    p, g = p.reshape(-1), g.reshape(-1)
    st = [ins[s].reshape(-1) for s in states]
    for a in range(0, n, CHUNK):
        b = min(a + CHUNK, n)
        m = b - a
        gc = g[a:b]
        if scale is not None:
            gc = np.multiply(gc, scale, out=bufs[0][:m])
        body(p[a:b], gc, [s[a:b] for s in st], [t[:m] for t in bufs[1:ntmp + 1]])


class _Update(OpDef):
    no_grad = True
    # (input slot, output slot) pairs updated elementwise in place by ``update_in_place``
    state_slots: Tuple[Tuple[str, str], ...] = ()

    def update_in_place(self, ins: Dict[str, np.ndarray], scale: Any,
                        attrs: Dict[str, Any]) -> Dict[str, np.ndarray]:
        """Write ParamOut into Param and every ``state_slots`` output into its input, computing
        exactly what ``forward`` computes for ``Grad * scale``; return the other outputs.
        The caller guarantees Param and the states are C-contiguous, writeable, distinct and of
        Param's shape and dtype, and Grad has Param's shape and dtype."""
        raise NotImplementedError(f"{self.type} has no in-place update")


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

    def update_in_place(self, ins, scale, attrs):
        lr = ins["LearningRate"].reshape(())

        def body(p, g, st, t):
            np.subtract(p, np.multiply(g, lr, out=t[0]), out=p)
        _chunked(ins, (), scale, 1, body)
        return {}


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

    state_slots = (("Velocity", "VelocityOut"),)

    def update_in_place(self, ins, scale, attrs):
        lr = ins["LearningRate"].reshape(())
        mu, nesterov = attrs.get("mu", 0.0), attrs.get("use_nesterov", False)
        mu, = _consts(ins["Param"].dtype, mu)

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
        _chunked(ins, ("Velocity",), scale, 1, body)
        return {}


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
        _chunked(ins, ("Velocity",), scale, 1, body)
        return {}


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

    state_slots = (("Moment", "MomentOut"),)

    def update_in_place(self, ins, scale, attrs):
        lr, eps = ins["LearningRate"].reshape(()), attrs.get("epsilon", 1.0e-6)
        eps, = _consts(ins["Param"].dtype, eps)

        def body(p, g, st, t):
            m, = st
            np.add(m, np.multiply(g, g, out=t[0]), out=m)
            _adagrad_step(p, g, m, lr, eps, t)
        _chunked(ins, ("Moment",), scale, 2, body)
        return {}


def _adagrad_step(p, g, m, lr, eps, t) -> None:
    """p -= lr * g / (sqrt(m) + eps), as ``Param - LearningRate * Grad / (...)`` rounds it."""
    np.sqrt(m, out=t[0])
    np.add(t[0], eps, out=t[0])
    np.multiply(g, lr, out=t[1])
    np.divide(t[1], t[0], out=t[1])
    np.subtract(p, t[1], out=p)


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

    state_slots = (("Moment", "MomentOut"),)

    def update_in_place(self, ins, scale, attrs):
        lr, eps = ins["LearningRate"].reshape(()), attrs.get("epsilon", 1.0e-6)
        decay = attrs.get("decay", 0.95)
        eps, decay, one_decay = _consts(ins["Param"].dtype, eps, decay, 1.0 - decay)

        def body(p, g, st, t):
            m, = st
            np.multiply(m, decay, out=m)
            np.multiply(g, g, out=t[0])
            np.multiply(t[0], one_decay, out=t[0])
            np.add(m, t[0], out=m)
            _adagrad_step(p, g, m, lr, eps, t)
        _chunked(ins, ("Moment",), scale, 2, body)
        return {}


@register
class Adam(_Update):
    """Moment1Out = b1*M1 + (1-b1)*G;  Moment2Out = b2*M2 + (1-b2)*G^2;
    lr_t = lr * sqrt(1 - Beta2Pow) / (1 - Beta1Pow);
    ParamOut = Param - lr_t * Moment1Out / (sqrt(Moment2Out) + epsilon * sqrt(1 - Beta2Pow));
    Beta1PowOut = Beta1Pow * b1, Beta2PowOut = Beta2Pow * b2.
    ``Beta1Tensor`` / ``Beta2Tensor`` ([1]), when given, override the ``beta1`` / ``beta2``
    attrs."""
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

    state_slots = (("Moment1", "Moment1Out"), ("Moment2", "Moment2Out"))

    def update_in_place(self, ins, scale, attrs):
        b1t, b2t = ins.get("Beta1Tensor"), ins.get("Beta2Tensor")
        b1 = b1t.reshape(()) if b1t is not None else attrs.get("beta1", 0.9)
        b2 = b2t.reshape(()) if b2t is not None else attrs.get("beta2", 0.999)
        b1p, b2p = ins["Beta1Pow"], ins["Beta2Pow"]
        eps = attrs.get("epsilon", 1.0e-8)
        if b1p.shape == b2p.shape == ins["LearningRate"].shape == (1,) \
                and b1p.dtype == b2p.dtype == ins["LearningRate"].dtype:
            # the [1]-array arithmetic of ``forward`` on scalars of the same dtype (a
            # correctly rounded double sqrt rounds to the same float32 as a float32 sqrt)
            s1, s2, lr = b1p[0], b2p[0], ins["LearningRate"][0]
            c2 = s2.dtype.type(math.sqrt(1.0 - s2))
            lr_t, eps_t = np.asarray(lr * c2 / (1.0 - s1)), np.asarray(eps * c2)
            pows = {"Beta1PowOut": np.array([s1 * b1]), "Beta2PowOut": np.array([s2 * b2])}
        else:
            c2 = np.sqrt(1.0 - b2p)
            lr_t = (ins["LearningRate"] * c2 / (1.0 - b1p)).reshape(())
            eps_t = (eps * c2).reshape(())
            pows = {"Beta1PowOut": b1p * b1, "Beta2PowOut": b2p * b2}
        b1, b2, one_b1, one_b2 = _consts(ins["Param"].dtype, b1, b2, 1.0 - b1, 1.0 - b2)

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
        _chunked(ins, ("Moment1", "Moment2"), scale, 1, body)
        return pows


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

    state_slots = (("Moment", "MomentOut"), ("InfNorm", "InfNormOut"))

    def update_in_place(self, ins, scale, attrs):
        b1, b2 = attrs.get("beta1", 0.9), attrs.get("beta2", 0.999)
        eps = attrs.get("epsilon", 1.0e-8)
        lr_t = (ins["LearningRate"] / (1.0 - ins["Beta1Pow"])).reshape(())
        b1, b2, one_b1, eps = _consts(ins["Param"].dtype, b1, b2, 1.0 - b1, eps)

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
        _chunked(ins, ("Moment", "InfNorm"), scale, 1, body)
        return {}


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
        _chunked(ins, ("AvgSquaredGrad", "AvgSquaredUpdate"), scale, 2, body)
        return {}


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

    state_slots = (("Moment", "MomentOut"), ("MeanSquare", "MeanSquareOut"),
                   ("MeanGrad", "MeanGradOut"))

    def update_in_place(self, ins, scale, attrs):
        eps, decay = attrs.get("epsilon", 1.0e-10), attrs.get("decay", 0.9)
        momentum, centered = attrs.get("momentum", 0.0), attrs.get("centered", False)
        lr = ins["LearningRate"].reshape(())
        eps, decay, one_decay, momentum = _consts(ins["Param"].dtype, eps, decay, 1.0 - decay,
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
        _chunked(ins, states, scale, 2, body)
        return {}


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

    state_slots = (("SquaredAccumulator", "SquaredAccumOut"),
                   ("LinearAccumulator", "LinearAccumOut"))

    def update_in_place(self, ins, scale, attrs):
        l1, l2 = attrs.get("l1", 0.0), attrs.get("l2", 0.0)
        lr_power = attrs.get("lr_power", -0.5)
        lr = ins["LearningRate"].reshape(())
        keep = scratch(np.bool_, 1)[0]

        def powed(x, out):
            return np.sqrt(x, out=out) if lr_power == -0.5 else np.power(x, -lr_power, out=out)

        def body(p, g, st, t):
            n, z = st
            t0, t1 = t
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
            np.divide(t0, t1, out=t0)                           # shrunk
            mask = np.greater(np.abs(z, out=t1), l1, out=keep[:p.size].reshape(p.shape))
            p[...] = 0
            np.copyto(p, t0, where=mask)
        _chunked(ins, ("SquaredAccumulator", "LinearAccumulator"), scale, 2, body)
        return {}


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
        _chunked(ins, ("Moment1", "Moment2"), scale, 2, moments)
        # sum_squares(r) over the whole r sums the same CHUNK-sized pieces in the same order
        coef = ins["LearningRate"] * self._trust(ins["Param"], sum_squares(ins["Param"]),
                                                 r_sq[0])
        coef = coef.reshape(())

        def apply(p, g, st, t):                     # pass 2: recompute r, update P
            r = ratio(p, st[0], st[1], t)
            np.subtract(p, np.multiply(r, coef, out=r), out=p)
        _chunked(ins, ("Moment1", "Moment2"), None, 2, apply)
        return {}


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
