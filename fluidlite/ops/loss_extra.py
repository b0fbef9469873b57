"""Loss ops of fluid 1.8 beyond cross entropy: huber_loss, smooth_l1_loss, log_loss,
kldiv_loss, margin_rank_loss, rank_loss, bpr_loss, sigmoid_focal_loss,
teacher_student_sigmoid_loss and center_loss (which also updates the class centers).

Labels and weights get no gradient (as fluid's grad makers, which only emit the gradients
listed in each ``make_grad``).
"""
from __future__ import annotations

import numpy as np

from ..core import shape as S
from ..core.dtypes import FLOATS, INTS, convert_dtype
from ..core.registry import OpDef, VarSpec, register
from .loss import _tolerable
from .tensor import emit_grad_op

_FLT_MIN = np.finfo(np.float32).tiny      # fluid's FLT_MIN guard inside log(p)


def _same_shape(op_type: str, a: str, A: VarSpec, b: str, B: VarSpec) -> None:
    if len(A.shape) != len(B.shape) or not all(S.dims_match(x, y)
                                               for x, y in zip(A.shape, B.shape)):
        raise ValueError(f"{op_type}: {a} and {b} must have the same shape, but received "
                         f"{a} {list(A.shape)} and {b} {list(B.shape)}")


def _float(op_type: str, slot: str, A: VarSpec) -> None:
    if A.dtype not in FLOATS:
        raise ValueError(f"{op_type}: {slot} must be a float tensor, but it is "
                         f"{convert_dtype(A.dtype)}")


def _softplus(x: np.ndarray) -> np.ndarray:
    """log(1 + exp(x)) without overflow."""
    return np.logaddexp(0, x)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return np.exp(-np.logaddexp(0, -x))


# -- regression ----------------------------------------------------------------------------------
@register
class HuberLoss(OpDef):
    """Residual = Y - X;  Out = 0.5 r^2 if |r| <= delta else delta (|r| - 0.5 delta);
    dX = -dOut * clip(r, -delta, delta), dY = dOut * clip(r, -delta, delta)."""
    type, inputs, outputs = "huber_loss", ("X", "Y"), ("Out", "Residual")
    grad_uses = ("Residual",)

    def infer(self, X, Y, *, delta=1.0):
        _same_shape("huber_loss", "X", X, "Y", Y)
        _float("huber_loss", "X", X)
        return {"Out": X, "Residual": X}

    def forward(self, X, Y, *, delta=1.0):
        r = Y - X
        a = np.abs(r)
        d = X.dtype.type(delta)
        half = X.dtype.type(0.5)
        out = np.where(a <= d, half * r * r, d * (a - half * d))
        return {"Out": out.astype(X.dtype, copy=False), "Residual": r}

    def backward(self, Residual, dOut, dResidual=None, *, delta=1.0):
        g = np.clip(Residual, -delta, delta) * dOut
        return {"X": -g, "Y": g}

    def make_grad(self, g, **attrs):
        emit_grad_op(g, self.type, attrs, uses=("Residual",), out_grads=("Out",),
                     in_grads=("X", "Y"))


@register
class SmoothL1Loss(OpDef):
    """Diff = (X - Y) * InsideWeight;  Out[n] = sum over the non-batch dims of
    OutsideWeight * f(Diff), f(d) = 0.5 (sigma d)^2 if |d| < 1/sigma^2 else |d| - 0.5/sigma^2;
    dX = dOut * OutsideWeight * f'(Diff) * InsideWeight, dY = -dX (weights default to 1)."""
    type, inputs = "smooth_l1_loss", ("X", "Y", "InsideWeight?", "OutsideWeight?")
    outputs = ("Diff", "Out")
    grad_uses = ("InsideWeight", "OutsideWeight", "Diff")

    def infer(self, X, Y, InsideWeight=None, OutsideWeight=None, *, sigma=1.0):
        _same_shape("smooth_l1_loss", "X", X, "Y", Y)
        _float("smooth_l1_loss", "X", X)
        if len(X.shape) < 2:
            raise ValueError(f"smooth_l1_loss: X must have at least 2 dims (batch first), but "
                             f"its shape is {list(X.shape)}")
        for name, w in (("InsideWeight", InsideWeight), ("OutsideWeight", OutsideWeight)):
            if w is not None:
                _same_shape("smooth_l1_loss", "X", X, name, w)
        return {"Diff": X, "Out": X.with_(shape=(X.shape[0], 1))}

    def forward(self, X, Y, InsideWeight=None, OutsideWeight=None, *, sigma=1.0):
        diff = X - Y
        if InsideWeight is not None:
            diff = diff * InsideWeight
        s2 = X.dtype.type(sigma * sigma)
        a = np.abs(diff)
        one, half = X.dtype.type(1), X.dtype.type(0.5)
        e = np.where(a < one / s2, half * diff * diff * s2, a - half / s2)
        if OutsideWeight is not None:
            e = e * OutsideWeight
        out = e.reshape(X.shape[0], -1).sum(axis=1, keepdims=True)
        return {"Diff": diff.astype(X.dtype, copy=False), "Out": out.astype(X.dtype,
                                                                           copy=False)}

    def backward(self, InsideWeight, OutsideWeight, Diff, dDiff, dOut, *, sigma=1.0):
        s2 = sigma * sigma
        d = np.where(np.abs(Diff) < 1 / s2, Diff * s2, np.sign(Diff))
        if OutsideWeight is not None:
            d = d * OutsideWeight
        if InsideWeight is not None:
            d = d * InsideWeight
        gx = (d * dOut.reshape((-1,) + (1,) * (Diff.ndim - 1))).astype(Diff.dtype, copy=False)
        return {"X": gx, "Y": -gx}

    def make_grad(self, g, **attrs):
        emit_grad_op(g, self.type, attrs, uses=self.grad_uses, out_grads=("Out",),
                     in_grads=("X", "Y"))


# -- classification / probabilities --------------------------------------------------------------
@register
class LogLoss(OpDef):
    """Loss = -Labels log(Predicted + eps) - (1 - Labels) log(1 - Predicted + eps);
    dPredicted = dLoss * (-Labels / (P + eps) + (1 - Labels) / (1 - P + eps))."""
    type, inputs, outputs = "log_loss", ("Predicted", "Labels"), ("Loss",)

    def infer(self, Predicted, Labels, *, epsilon=1e-4):
        _same_shape("log_loss", "Predicted", Predicted, "Labels", Labels)
        _float("log_loss", "Predicted", Predicted)
        if len(Predicted.shape) != 2 or Predicted.shape[1] not in (1, -1):
            raise ValueError(f"log_loss: Predicted must have shape [N, 1], but it is "
                             f"{list(Predicted.shape)}")
        return {"Loss": Predicted}

    def forward(self, Predicted, Labels, *, epsilon=1e-4):
        e = Predicted.dtype.type(epsilon)
        loss = -Labels * np.log(Predicted + e) - (1 - Labels) * np.log(1 - Predicted + e)
        return {"Loss": loss.astype(Predicted.dtype, copy=False)}

    def backward(self, Predicted, Labels, dLoss, *, epsilon=1e-4):
        d = -Labels / (Predicted + epsilon) + (1 - Labels) / (1 - Predicted + epsilon)
        return {"Predicted": (dLoss * d).astype(Predicted.dtype, copy=False)}

    def make_grad(self, g, **attrs):
        emit_grad_op(g, self.type, attrs, uses=("Predicted", "Labels"), out_grads=("Loss",),
                     in_grads=("Predicted",))


_REDUCTIONS = ("none", "batchmean", "mean", "sum")


@register
class KldivLoss(OpDef):
    """l = Target (log Target - X) where Target > 0, else 0; Loss = l (``none``), sum(l)
    (``sum``), mean(l) (``mean``) or sum(l) / N (``batchmean``, N = X.shape[0]);
    dX = -Target * dLoss (masked and scaled the same way)."""
    type, inputs, outputs = "kldiv_loss", ("X", "Target"), ("Loss",)

    def infer(self, X, Target, *, reduction="mean"):
        if reduction not in _REDUCTIONS:
            raise ValueError(f"kldiv_loss: reduction must be one of {list(_REDUCTIONS)}, but "
                             f"received {reduction!r}")
        _same_shape("kldiv_loss", "X", X, "Target", Target)
        _float("kldiv_loss", "X", X)
        return {"Loss": X if reduction == "none" else X.with_(shape=(1,))}

    def forward(self, X, Target, *, reduction="mean"):
        pos = Target > 0
        with np.errstate(divide="ignore", invalid="ignore"):
            t = Target.dtype.type
            l = np.where(pos, Target * (np.log(np.where(pos, Target, t(1))) - X), t(0))
        l = l.astype(X.dtype, copy=False)
        if reduction == "none":
            return {"Loss": l}
        total = l.sum(dtype=X.dtype)
        t = X.dtype.type                 # divisors of the sum's dtype: NumPy 1 and 2 agree
        if reduction == "mean":
            total = total / t(max(l.size, 1))
        elif reduction == "batchmean":
            total = total / t(max(X.shape[0], 1)) if X.ndim else total
        return {"Loss": np.array([total], dtype=X.dtype)}

    def backward(self, X, Target, dLoss, *, reduction="mean"):
        g = np.where(Target > 0, -Target, Target.dtype.type(0)) * (
            dLoss if reduction == "none" else dLoss.reshape(()))
        if reduction == "mean":
            g = g / max(X.size, 1)
        elif reduction == "batchmean" and X.ndim:
            g = g / max(X.shape[0], 1)
        return {"X": g.astype(X.dtype, copy=False)}

    def make_grad(self, g, **attrs):
        emit_grad_op(g, self.type, attrs, uses=("X", "Target"), out_grads=("Loss",),
                     in_grads=("X",))


@register
class MarginRankLoss(OpDef):
    """Out = max(0, -Label (X1 - X2) + margin), Activated = (Out > 0);
    dX1 = -dOut * Label * Activated, dX2 = dOut * Label * Activated."""
    type, inputs, outputs = "margin_rank_loss", ("Label", "X1", "X2"), ("Out", "Activated")
    grad_uses = ("Label", "Activated")

    def infer(self, Label, X1, X2, *, margin=0.0):
        _same_shape("margin_rank_loss", "X1", X1, "X2", X2)
        _same_shape("margin_rank_loss", "Label", Label, "X1", X1)
        _float("margin_rank_loss", "X1", X1)
        return {"Out": X1, "Activated": X1}

    def forward(self, Label, X1, X2, *, margin=0.0):
        v = -Label * (X1 - X2) + X1.dtype.type(margin)
        out = np.maximum(v, 0).astype(X1.dtype, copy=False)
        return {"Out": out, "Activated": (v > 0).astype(X1.dtype)}

    def backward(self, Label, Activated, dOut, dActivated=None, *, margin=0.0):
        g = dOut * Label * Activated
        return {"X1": -g, "X2": g}

    def make_grad(self, g, **attrs):
        emit_grad_op(g, self.type, attrs, uses=("Label", "Activated"), out_grads=("Out",),
                     in_grads=("X1", "X2"))


@register
class RankLoss(OpDef):
    """o = Left - Right;  Out = log(1 + exp(o)) - Label o (RankNet, fluid's formula: +inf
    once exp(o) overflows, as fluid);  dLeft = dOut (sigmoid(o) - Label), dRight = -dLeft."""
    type, inputs, outputs = "rank_loss", ("Label", "Left", "Right"), ("Out",)

    def infer(self, Label, Left, Right):
        # fluid's RankLossOp: each of Label, Left, Right is [N] or [N, 1] (the kernel works on
        # them flattened), their first dims agree, and Out has Label's shape
        for slot, spec in (("Label", Label), ("Left", Left), ("Right", Right)):
            if spec.ndim not in (1, 2) or (spec.ndim == 2 and spec.shape[1] not in (1, -1)):
                raise ValueError(f"rank_loss: {slot} must be [N] or [N, 1], but received "
                                 f"{slot} {list(spec.shape)}")
        for slot, spec in (("Left", Left), ("Right", Right)):
            if not S.dims_match(Label.shape[0], spec.shape[0]):
                raise ValueError(f"rank_loss: Label and {slot} must have the same first dim, "
                                 f"but received Label {list(Label.shape)} and {slot} "
                                 f"{list(spec.shape)}")
        _float("rank_loss", "Left", Left)
        return {"Out": VarSpec(Label.shape, Left.dtype, Left.lod_level)}

    def forward(self, Label, Left, Right):
        # fluid's kernel, literally, on the flattened inputs: log(1 + exp(o)) (no guard: +inf
        # once exp(o) overflows, as fluid) - Label * o
        o = Left.reshape(-1) - Right.reshape(-1)
        one = o.dtype.type(1)
        with np.errstate(over="ignore"):
            sp = np.log(one + np.exp(o))
        out = sp - Label.reshape(-1) * o
        return {"Out": out.reshape(Label.shape).astype(Left.dtype, copy=False)}

    def backward(self, Label, Left, Right, dOut):
        # fluid: dLeft = dOut * (1 / (1 + exp(Right - Left)) - Label), dRight = -dLeft
        one = Left.dtype.type(1)
        with np.errstate(over="ignore"):
            sig = one / (one + np.exp(Right.reshape(-1) - Left.reshape(-1)))
        g = dOut.reshape(-1) * (sig - Label.reshape(-1))
        return {"Left": g.reshape(Left.shape).astype(Left.dtype, copy=False),
                "Right": (-g).reshape(Right.shape).astype(Left.dtype, copy=False)}

    def make_grad(self, g, **attrs):
        emit_grad_op(g, self.type, attrs, uses=("Label", "Left", "Right"), out_grads=("Out",),
                     in_grads=("Left", "Right"))


def _int_labels(op_type: str, X: VarSpec, Label: VarSpec) -> None:
    if Label.dtype not in INTS:
        raise ValueError(f"{op_type}: Label must be an integer tensor (class indices), but it "
                         f"is {convert_dtype(Label.dtype)}")
    if len(Label.shape) != len(X.shape) or Label.shape[-1] not in (1, -1) or not all(
            S.dims_match(a, b) for a, b in zip(X.shape[:-1], Label.shape[:-1])):
        raise ValueError(f"{op_type}: Label must have X's shape with last dim 1, but received "
                         f"X {list(X.shape)} and Label {list(Label.shape)}")


def _check_range(op_type: str, label: np.ndarray, n: int) -> None:
    bad = (label < 0) | (label >= n)
    if bad.any():
        raise ValueError(f"{op_type}: label {label[bad].reshape(-1)[0]} is out of range "
                         f"[0, {n})")


@register
class BprLoss(OpDef):
    """Y[i] = -1/(C-1) sum_{j != l_i} log(sigmoid(X[i, l_i] - X[i, j])) (Bayesian
    personalised ranking, l_i = Label[i]), as fluid computes it: log(1 + exp(.)) with
    TolerableValue on the exp (1e20 for an overflow);  dX[i, j] = dY sigmoid(X[i,j] -
    X[i,l]) / (C-1) for j != l, dX[i, l] = minus their sum."""
    type, inputs, outputs = "bpr_loss", ("X", "Label"), ("Y",)

    def infer(self, X, Label):
        _float("bpr_loss", "X", X)
        _int_labels("bpr_loss", X, Label)
        return {"Y": X.with_(shape=tuple(X.shape[:-1]) + (1,))}

    @staticmethod
    def _parts(X, Label):
        c = X.shape[-1]
        x = X.reshape(-1, c)
        lab = Label.reshape(-1)
        _check_range("bpr_loss", lab, c)
        pos = x[np.arange(x.shape[0]), lab][:, None]
        other = np.ones_like(x, dtype=bool)
        other[np.arange(x.shape[0]), lab] = False
        return x, lab, pos, other, c

    def forward(self, X, Label):
        # fluid's kernel: Y = -sum_j TV(-log(1 + TV(exp(x_j - x_l)))) / (C - 1), TolerableValue
        # turning an overflowing exp into 1e20 (so a term is at most log(1 + 1e20) = 46.05)
        x, lab, pos, other, c = self._parts(X, Label)
        one = x.dtype.type(1)
        with np.errstate(over="ignore"):
            e = _tolerable(np.exp(x - pos))
        terms = _tolerable(-np.log(one + e))
        terms = np.where(other, terms, terms.dtype.type(0))
        y = -terms.sum(axis=1) / x.dtype.type(c - 1)
        return {"Y": y.reshape(X.shape[:-1] + (1,)).astype(X.dtype, copy=False)}

    def backward(self, X, Label, dY):
        # fluid: g_j = -dY / ((C - 1) (1 + TV(exp(x_l - x_j)))); dX_l += g_j, dX_j -= g_j
        x, lab, pos, other, c = self._parts(X, Label)
        one = x.dtype.type(1)
        with np.errstate(over="ignore"):
            den = x.dtype.type(c - 1) * (one + _tolerable(np.exp(pos - x)))
        g = dY.reshape(-1, 1).astype(x.dtype, copy=False) / den
        g = np.where(other, g, g.dtype.type(0))
        g[np.arange(x.shape[0]), lab] = -g.sum(axis=1)
        return {"X": g.reshape(X.shape).astype(X.dtype, copy=False)}

    def make_grad(self, g, **attrs):
        emit_grad_op(g, self.type, attrs, uses=("X", "Label"), out_grads=("Y",),
                     in_grads=("X",))


@register
class SigmoidFocalLoss(OpDef):
    """Focal loss on logits X [N, C] with Label [N, 1] in 0..C (0: background, -1: ignored)
    and FgNum [1] (foreground count, at least 1): for class d, p = sigmoid(X),
    Out = -[Label == d+1] alpha/fg (1-p)^gamma log p
          - [Label != d+1, Label != -1] (1-alpha)/fg p^gamma log(1-p);
    dX the derivative of that (FgNum and Label get none)."""
    type, inputs, outputs = "sigmoid_focal_loss", ("X", "Label", "FgNum"), ("Out",)

    def infer(self, X, Label, FgNum, *, gamma=2.0, alpha=0.25):
        _float("sigmoid_focal_loss", "X", X)
        if len(X.shape) != 2:
            raise ValueError(f"sigmoid_focal_loss: X must be [N, C], but its shape is "
                             f"{list(X.shape)}")
        _int_labels("sigmoid_focal_loss", X, Label)
        if FgNum.dtype not in INTS:
            raise ValueError(f"sigmoid_focal_loss: FgNum must be an int32 tensor of shape [1], "
                             f"but it is {convert_dtype(FgNum.dtype)}")
        return {"Out": X}

    @staticmethod
    def _parts(X, Label, FgNum, alpha):
        n, c = X.shape
        g = Label.reshape(n, 1)
        d = np.arange(c).reshape(1, c)
        c_pos = (g == d + 1).astype(X.dtype)
        c_neg = ((g != -1) & (g != d + 1)).astype(X.dtype)
        fg = max(int(np.asarray(FgNum).reshape(-1)[0]), 1)
        p = _sigmoid(X)
        log_p = np.log(np.maximum(p, _FLT_MIN))
        log_1mp = -X * (X >= 0) - np.log1p(np.exp(X - 2 * X * (X >= 0)))   # log(1 - p)
        return c_pos * (alpha / fg), c_neg * ((1 - alpha) / fg), p, log_p, log_1mp

    def forward(self, X, Label, FgNum, *, gamma=2.0, alpha=0.25):
        s_pos, s_neg, p, log_p, log_1mp = self._parts(X, Label, FgNum, alpha)
        out = -s_pos * (1 - p) ** gamma * log_p - s_neg * p ** gamma * log_1mp
        return {"Out": out.astype(X.dtype, copy=False)}

    def backward(self, X, Label, FgNum, dOut, *, gamma=2.0, alpha=0.25):
        s_pos, s_neg, p, log_p, log_1mp = self._parts(X, Label, FgNum, alpha)
        t_pos = (1 - p) ** gamma * (1 - p - p * gamma * log_p)
        t_neg = p ** gamma * (log_1mp * (1 - p) * gamma - p)
        return {"X": ((-s_pos * t_pos - s_neg * t_neg) * dOut).astype(X.dtype, copy=False)}

    def make_grad(self, g, **attrs):
        emit_grad_op(g, self.type, attrs, uses=("X", "Label", "FgNum"), out_grads=("Out",),
                     in_grads=("X",))


@register
class TeacherStudentSigmoidLoss(OpDef):
    """Per row (x = X, z = Label, sp(x) = log(1 + exp(x))): z < -1: sp(x); -1 <= z < 0:
    sp(x) - x; 0 <= z < 1: 2 sp(x) - x z; z >= 1: 2 sp(x) - x z (click plus teacher score
    z - 1);  dX = dY (sigmoid(x) [, -1] or 2 sigmoid(x) - z), with sigmoid evaluated at x
    clipped to the bounds and 0 outside them (fluid's kernel)."""
    type, inputs, outputs = "teacher_student_sigmoid_loss", ("X", "Label"), ("Y",)

    def infer(self, X, Label, *, soft_max_up_bound=15.0, soft_max_lower_bound=-15.0):
        _float("teacher_student_sigmoid_loss", "X", X)
        _same_shape("teacher_student_sigmoid_loss", "X", X, "Label", Label)
        if len(X.shape) != 2 or X.shape[1] not in (1, -1):
            raise ValueError(f"teacher_student_sigmoid_loss: X must have shape [N, 1], but it "
                             f"is {list(X.shape)}")
        return {"Y": X}

    def forward(self, X, Label, *, soft_max_up_bound=15.0, soft_max_lower_bound=-15.0):
        sp = _softplus(X)
        z = Label
        y = np.where(z < -1, sp, np.where(z < 0, sp - X, np.where(z < 1, 2 * sp - X * z,
                                                                  2 * sp - X * z)))
        return {"Y": y.astype(X.dtype, copy=False)}

    def backward(self, X, Label, dY, *, soft_max_up_bound=15.0, soft_max_lower_bound=-15.0):
        s = np.clip(X, soft_max_lower_bound, soft_max_up_bound)
        p = _sigmoid(s)
        z = Label
        d = np.where(z < -1, p, np.where(z < 0, p - 1, 2 * p - z))
        d = np.where((s >= soft_max_up_bound) | (s <= soft_max_lower_bound), d.dtype.type(0), d)
        return {"X": (d * dY).astype(X.dtype, copy=False)}

    def make_grad(self, g, **attrs):
        emit_grad_op(g, self.type, attrs, uses=("X", "Label"), out_grads=("Y",),
                     in_grads=("X",))


@register
class CenterLoss(OpDef):
    """SampleCenterDiff = X - Centers[Label];  Loss = 0.5 ||X - Centers[Label]||^2 per row;
    with ``need_update``, CentersOut[k] = Centers[k] + alpha / (1 + n_k) * sum over the rows
    of class k of their diff (alpha = CenterUpdateRate[0], n_k the class's row count);
    dX = dLoss * SampleCenterDiff (the centers get no gradient: they are updated here)."""
    type = "center_loss"
    inputs = ("X", "Label", "Centers", "CenterUpdateRate")
    outputs = ("SampleCenterDiff", "Loss", "CentersOut")
    grad_uses = ("SampleCenterDiff",)

    def infer(self, X, Label, Centers, CenterUpdateRate, *, cluster_num=1, need_update=True):
        _float("center_loss", "X", X)
        if len(X.shape) != 2 or len(Centers.shape) != 2 or not S.dims_match(X.shape[1],
                                                                            Centers.shape[1]):
            raise ValueError(f"center_loss: X [N, D] and Centers [num_classes, D] must agree on "
                             f"D, but received X {list(X.shape)} and Centers "
                             f"{list(Centers.shape)}")
        if Centers.shape[0] not in (cluster_num, -1):
            raise ValueError(f"center_loss: Centers has {Centers.shape[0]} rows but cluster_num "
                             f"is {cluster_num}")
        # fluid 1.8's kernel reads Label as N flat ids: [N] or [N, 1]
        if len(Label.shape) == 1 and Label.dtype in INTS:
            if not S.dims_match(Label.shape[0], X.shape[0]):
                raise ValueError(f"center_loss: Label [N] must have one id per row of X, but "
                                 f"received X {list(X.shape)} and Label {list(Label.shape)}")
        else:
            _int_labels("center_loss", X, Label)
        return {"SampleCenterDiff": X, "Loss": X.with_(shape=(X.shape[0], 1)),
                "CentersOut": Centers}

    def forward(self, X, Label, Centers, CenterUpdateRate, *, cluster_num=1, need_update=True):
        lab = Label.reshape(-1)
        _check_range("center_loss", lab, Centers.shape[0])
        diff = X - Centers[lab]
        loss = 0.5 * np.sum(diff * diff, axis=1, keepdims=True)
        centers = Centers.copy()
        if need_update:
            acc = np.zeros_like(Centers)
            np.add.at(acc, lab, diff)
            count = 1 + np.bincount(lab, minlength=Centers.shape[0])[:, None]
            alpha = np.asarray(CenterUpdateRate).reshape(-1)[0]
            centers += (acc * (alpha / count)).astype(Centers.dtype, copy=False)
        return {"SampleCenterDiff": diff, "Loss": loss.astype(X.dtype, copy=False),
                "CentersOut": centers}

    def backward(self, SampleCenterDiff, dSampleCenterDiff, dLoss, dCentersOut, *,
                 cluster_num=1, need_update=True):
        return {"X": (SampleCenterDiff * dLoss.reshape(-1, 1)).astype(SampleCenterDiff.dtype,
                                                                      copy=False)}

    def make_grad(self, g, **attrs):
        emit_grad_op(g, self.type, attrs, uses=("SampleCenterDiff",), out_grads=("Loss",),
                     in_grads=("X",))
