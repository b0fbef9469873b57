"""fluid 1.8's remaining loss ops: hinge_loss, modified_huber_loss, bce_loss, nll_loss and
squared_l2_distance, with fluid's OpMaker slots and attributes and its kernels' arithmetic
(bce_loss clamps the logs at -100 and its gradient's denominator at 1e-12, as fluid).

Labels get no gradient (fluid's grad makers emit only the listed input gradients).
"""
from __future__ import annotations

import numpy as np

from ..core import shape as S
from ..core.dtypes import FLOATS, INTS, convert_dtype
from ..core.registry import OpDef, VarSpec, register
from .tensor import emit_grad_op


def _need(op: str, cond: bool, msg: str) -> None:
    if not cond:
        raise ValueError(f"{op}: {msg}")


def _same(a: VarSpec, b: VarSpec) -> bool:
    return len(a.shape) == len(b.shape) and all(S.dims_match(x, y)
                                                for x, y in zip(a.shape, b.shape))


def _float(op: str, slot: str, spec: VarSpec) -> None:
    _need(op, spec.dtype in FLOATS,
          f"{slot} must be a float tensor, but it is {convert_dtype(spec.dtype)}")


def _column(op: str, slot: str, spec: VarSpec) -> None:
    _need(op, len(spec.shape) == 2 and spec.shape[1] in (1, -1),
          f"{slot} must be [batch_size, 1], but its shape is {list(spec.shape)}")


@register
class HingeLoss(OpDef):
    """Loss = max(1 - Logits * (2 Labels - 1), 0) (labels 0 / 1, as fluid);
    dLogits = -dLoss * (2 Labels - 1) where Logits * (2 Labels - 1) < 1, else 0."""
    type, inputs, outputs = "hinge_loss", ("Logits", "Labels"), ("Loss",)

    def infer(self, Logits, Labels):
        _need(self.type, _same(Logits, Labels),
              f"Logits and Labels must have the same shape, but received Logits "
              f"{list(Logits.shape)} and Labels {list(Labels.shape)}")
        _column(self.type, "Logits", Logits)
        _float(self.type, "Logits", Logits)
        return {"Loss": VarSpec((Logits.shape[0], 1), Logits.dtype, Logits.lod_level)}

    def forward(self, Logits, Labels):
        t = Logits.dtype.type
        y = t(2) * Labels.astype(Logits.dtype, copy=False) - t(1)
        return {"Loss": np.maximum(t(1) - Logits * y, t(0))}

    def backward(self, Logits, Labels, dLoss):
        t = Logits.dtype.type
        y = t(2) * Labels.astype(Logits.dtype, copy=False) - t(1)
        return {"Logits": (dLoss * ((Logits * y) < t(1)) * -y).astype(Logits.dtype,
                                                                      copy=False)}

    def make_grad(self, g, **attrs):
        emit_grad_op(g, self.type, attrs, uses=("Logits", "Labels"), out_grads=("Loss",),
                     in_grads=("Logits",))


@register
class ModifiedHuberLoss(OpDef):
    """IntermediateVal = X * (2 Y - 1);  Out = -4 v (v < -1), (1 - v)^2 (-1 <= v < 1), 0;
    dX = dOut * (-4 (2Y - 1), -2 (1 - v)(2Y - 1), 0) on the same pieces (fluid's kernel)."""
    type, inputs, outputs = "modified_huber_loss", ("X", "Y"), ("IntermediateVal", "Out")
    grad_uses = ("Y", "IntermediateVal")

    def infer(self, X, Y):
        _need(self.type, _same(X, Y), f"X and Y must have the same shape, but received X "
                                      f"{list(X.shape)} and Y {list(Y.shape)}")
        _column(self.type, "X", X)
        _float(self.type, "X", X)
        return {"IntermediateVal": X, "Out": X}

    def forward(self, X, Y):
        t = X.dtype.type
        v = X * (t(2) * Y.astype(X.dtype, copy=False) - t(1))
        out = np.where(v < t(-1), t(-4) * v, np.where(v < t(1), (t(1) - v) * (t(1) - v), t(0)))
        return {"IntermediateVal": v, "Out": out.astype(X.dtype, copy=False)}

    def backward(self, Y, IntermediateVal, dIntermediateVal=None, dOut=None):
        v = IntermediateVal
        t = v.dtype.type
        y = t(2) * Y.astype(v.dtype, copy=False) - t(1)
        g = np.where(v < t(-1), t(-4) * y, np.where(v < t(1), t(-2) * (t(1) - v) * y, t(0)))
        return {"X": (g * dOut).astype(v.dtype, copy=False)}

    def make_grad(self, g, **attrs):
        emit_grad_op(g, self.type, attrs, uses=("Y", "IntermediateVal"), out_grads=("Out",),
                     in_grads=("X",))


@register
class BCELoss(OpDef):
    """Out = (Label - 1) max(log(1 - X), -100) - Label max(log(X), -100) (fluid's kernel: the
    logs clamped at -100, so X = 0 or 1 costs at most 100);
    dX = dOut (X - Label) / max((1 - X) X, 1e-12)."""
    type, inputs, outputs = "bce_loss", ("X", "Label"), ("Out",)

    def infer(self, X, Label):
        _need(self.type, len(X.shape) == len(Label.shape),
              f"X and Label must have the same rank, but received X {list(X.shape)} and "
              f"Label {list(Label.shape)}")
        _need(self.type, _same(X, Label),
              f"X and Label must have the same shape, but received X {list(X.shape)} and "
              f"Label {list(Label.shape)}")
        _float(self.type, "X", X)
        return {"Out": X}

    def forward(self, X, Label):
        if X.size and (X.min() < 0 or X.max() > 1):
            raise ValueError("bce_loss: Illegal input, input must be in [0, 1] (probabilities, "
                             "e.g. the output of a sigmoid)")
        t = X.dtype.type
        with np.errstate(divide="ignore"):
            log_x = np.maximum(np.log(X), t(-100))
            log_1mx = np.maximum(np.log(t(1) - X), t(-100))
        lab = Label.astype(X.dtype, copy=False)
        return {"Out": ((lab - t(1)) * log_1mx - lab * log_x).astype(X.dtype, copy=False)}

    def backward(self, X, Label, dOut):
        t = X.dtype.type
        den = np.maximum((t(1) - X) * X, t(1e-12))
        return {"X": (dOut * ((X - Label.astype(X.dtype, copy=False)) / den)).astype(
            X.dtype, copy=False)}

    def make_grad(self, g, **attrs):
        emit_grad_op(g, self.type, attrs, uses=("X", "Label"), out_grads=("Out",),
                     in_grads=("X",))


_NLL_REDUCTIONS = ("none", "mean", "sum")


@register
class NLLLoss(OpDef):
    """Negative log likelihood of log-probabilities X [N, C] (or [N, C, H, W]) at int64 Label
    [N] (or [N, H, W]), weighted by Weight[label] (default 1; ``ignore_index`` rows count 0):
    Out = -w X[label] per entry (``none``), their sum (``sum``) or sum / Total_weight
    (``mean``, unchanged when Total_weight is 0); Total_weight = the sum of the weights used.
    dX = -dOut w at the label (divided by Total_weight for ``mean``)."""
    type, inputs, outputs = "nll_loss", ("X", "Label", "Weight?"), ("Out", "Total_weight")
    grad_uses = ("X", "Label", "Weight", "Total_weight")

    def infer(self, X, Label, Weight=None, *, ignore_index=-100, reduction="mean"):
        _need(self.type, reduction in _NLL_REDUCTIONS,
              f"reduction must be one of {list(_NLL_REDUCTIONS)}, got {reduction!r}")
        _need(self.type, len(X.shape) in (2, 4),
              f"X must be 2-D [N, C] or 4-D [N, C, H, W], got {list(X.shape)}")
        _float(self.type, "X", X)
        _need(self.type, Label.dtype in INTS,
              f"Label must be an int64 tensor, but it is {convert_dtype(Label.dtype)}")
        want = (X.shape[0],) if len(X.shape) == 2 else (X.shape[0],) + tuple(X.shape[2:])
        _need(self.type, len(Label.shape) == len(want) and all(
            S.dims_match(a, b) for a, b in zip(Label.shape, want)),
            f"Label must be {list(want)} for X {list(X.shape)}, got {list(Label.shape)}")
        if Weight is not None:
            _need(self.type, len(Weight.shape) == 1 and S.dims_match(Weight.shape[0],
                                                                     X.shape[1]),
                  f"Weight must be [C] = [{X.shape[1]}], got {list(Weight.shape)}")
        out = VarSpec(Label.shape if reduction == "none" else (1,), X.dtype)
        return {"Out": out, "Total_weight": VarSpec((1,), X.dtype)}

    @staticmethod
    def _gather(X, Label, Weight, ignore_index):
        """(X at the labels, the weights) as [N, ...] arrays (0 where ignored)."""
        c = X.shape[1]
        lab = Label.astype(np.int64, copy=False)
        ign = lab == ignore_index
        bad = ~ign & ((lab < 0) | (lab >= c))
        if bad.any():
            raise ValueError(f"nll_loss: label {int(lab[bad].reshape(-1)[0])} is out of range "
                             f"[0, {c})")
        safe = np.where(ign, 0, lab)
        xl = np.take_along_axis(X, np.expand_dims(safe, 1), axis=1)[:, 0]
        t = X.dtype.type
        w = np.ones(lab.shape, X.dtype) if Weight is None else \
            Weight.astype(X.dtype, copy=False)[safe]
        return np.where(ign, t(0), xl), np.where(ign, t(0), w), safe, ign

    def forward(self, X, Label, Weight=None, *, ignore_index=-100, reduction="mean"):
        xl, w, _, ign = self._gather(X, Label, Weight, ignore_index)
        if reduction == "none":          # (an ignored entry is +0, as fluid writes it)
            return {"Out": np.where(ign, X.dtype.type(0), -xl * w).astype(X.dtype, copy=False),
                    "Total_weight": np.zeros(1, X.dtype)}
        total = np.sum(w, dtype=X.dtype)
        out = -np.sum(xl * w, dtype=X.dtype)
        if reduction == "mean" and total != 0:
            out = out / total
        return {"Out": np.array([out], X.dtype), "Total_weight": np.array([total], X.dtype)}

    def backward(self, X, Label, Weight, Total_weight, dOut, dTotal_weight=None, *,
                 ignore_index=-100, reduction="mean"):
        _, w, safe, ign = self._gather(X, Label, Weight, ignore_index)
        t = X.dtype.type
        if reduction == "none":
            g = -dOut.astype(X.dtype, copy=False) * w
        else:
            g = -dOut.reshape(-1)[0] * w
            total = Total_weight.reshape(-1)[0]
            if reduction == "mean" and total != 0:
                g = g / total
        g = np.where(ign, t(0), g).astype(X.dtype, copy=False)
        dx = np.zeros(X.shape, X.dtype)
        np.put_along_axis(dx, np.expand_dims(safe, 1), np.expand_dims(g, 1), axis=1)
        return {"X": dx}

    def make_grad(self, g, **attrs):
        emit_grad_op(g, self.type, attrs, uses=self.grad_uses, out_grads=("Out",),
                     in_grads=("X",))


@register
class SquaredL2Distance(OpDef):
    """sub_result = X - Y (rows flattened; Y may have 1 row, broadcast), Out[n] =
    sum(sub_result[n]^2) as [N, 1];  dX = 2 dOut sub_result, dY = -dX (summed over the rows
    when Y has one row)."""
    type, inputs, outputs = "squared_l2_distance", ("X", "Y"), ("sub_result", "Out")
    grad_uses = ("X", "Y", "sub_result")

    def infer(self, X, Y):
        _need(self.type, len(X.shape) == len(Y.shape),
              f"X and Y must have the same rank, got {list(X.shape)} and {list(Y.shape)}")
        _need(self.type, len(X.shape) >= 2, f"the rank must be at least 2, got {len(X.shape)}")
        known = all(d >= 0 for d in X.shape[1:] + Y.shape[1:])
        cols = int(np.prod(X.shape[1:])) if known else -1
        if known:
            _need(self.type, cols == int(np.prod(Y.shape[1:])),
                  f"X {list(X.shape)} and Y {list(Y.shape)} must have the same size past the "
                  f"first dim")
        _need(self.type, Y.shape[0] in (1, -1) or S.dims_match(X.shape[0], Y.shape[0]),
              f"the first dim of Y must be 1 or X's, got {list(Y.shape)} for X "
              f"{list(X.shape)}")
        return {"sub_result": VarSpec((X.shape[0], cols), X.dtype),
                "Out": VarSpec((X.shape[0], 1), X.dtype, X.lod_level)}

    def forward(self, X, Y):
        n = X.shape[0]
        x = X.reshape(n, -1)
        y = Y.reshape(Y.shape[0], -1)
        sub = x - y
        return {"sub_result": sub, "Out": np.sum(sub * sub, axis=1, keepdims=True,
                                                 dtype=X.dtype)}

    def backward(self, X, Y, sub_result, dsub_result=None, dOut=None):
        # fluid's kernel: dX = 2 dOut * sub_result, dY = -dX (column sums for a 1-row Y);
        # X and Y are read for their shapes only
        gm = sub_result.dtype.type(2) * dOut.reshape(-1, 1) * sub_result
        dy = -gm if Y.shape[0] == gm.shape[0] else -gm.sum(axis=0)
        return {"X": gm.reshape(X.shape), "Y": np.ascontiguousarray(dy).reshape(Y.shape)}

    def make_grad(self, g, **attrs):
        emit_grad_op(g, self.type, attrs, uses=("X", "Y", "sub_result"), out_grads=("Out",),
                     in_grads=("X", "Y"))
