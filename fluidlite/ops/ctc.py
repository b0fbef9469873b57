"""``warpctc``: the CTC loss over LoD sequences (fluid's warp-ctc op, in NumPy).

Loss[s] = -log p(Label_s | Logits_s), p summing the softmax probabilities of every alignment
that collapses (merge repeats, drop ``blank``) to the label. The alpha / beta recursions run in
log space over time steps for all sequences at once (padded to [S, T, ...]); the gradient is
softmax - occupancy (Graves 2006), divided by the sequence length with ``norm_by_times``.

An infeasible sequence -- a label needing more steps than the input has, ``U + repeats > T``
(each repeated label needs a blank between its copies) -- gets loss 0 and a zero gradient, as
warp-ctc's ``cost_and_grad_kernel`` returns early for it (fluid 1.8 and Paddle 2.6).

Padded form (fluid 1.8, ``LogitsLength`` and ``LabelLength`` given): Logits is time-major
[max_T, B, C], Label [B, max_U] (or [B, max_U, 1]); the valid steps are gathered into the LoD
layout and dLogits scattered back (zero past each length).
"""
from __future__ import annotations

from typing import Any, Tuple

import numpy as np

from ..core.registry import OpDef, VarSpec, register
from .crf import _lse
from .sequence import _lengths, _off, _pad_index

_NEG = -1e30


def _unpad(Logits: np.ndarray, Label: np.ndarray, LogitsLength: Any, LabelLength: Any,
           lod: Any) -> Tuple[np.ndarray, np.ndarray, Any, Any]:
    """The padded form as LoD input: (flat logits, flat labels, lod, flat positions of the
    valid steps in the batch-major [B * max_T] grid); LoD input passes through."""
    if LogitsLength is None and LabelLength is None:
        return Logits, Label, lod, None
    if LogitsLength is None or LabelLength is None:
        raise ValueError("warpctc: LogitsLength and LabelLength must be given together")
    if Logits.ndim != 3:
        raise ValueError(f"warpctc: with LogitsLength, Logits must be [max_logit_length, "
                         f"batch_size, num_classes + 1], got {list(Logits.shape)}")
    tmax, b, c = Logits.shape
    if Label.ndim not in (2, 3) or Label.shape[0] != b:
        raise ValueError(f"warpctc: with LabelLength, Label must be [batch_size, "
                         f"max_label_length] with batch_size {b}, got {list(Label.shape)}")
    T = _lengths("warpctc", LogitsLength, "LogitsLength", b, tmax)
    U = _lengths("warpctc", LabelLength, "LabelLength", b, Label.shape[1])
    if T.size and T.min() < 1:
        raise ValueError(f"warpctc: every LogitsLength must be >= 1, got {T.tolist()}")
    tidx = _pad_index(T, tmax)
    flat = Logits.transpose(1, 0, 2).reshape(b * tmax, c)[tidx]
    labels = Label.reshape(b * Label.shape[1])[_pad_index(U, Label.shape[1])]
    offs = lambda n: (tuple(int(v) for v in np.concatenate([[0], np.cumsum(n)])),)  # noqa
    return flat, labels, {"Logits": offs(T), "Label": offs(U)}, tidx


def _setup(Logits: np.ndarray, Label: np.ndarray, lod: Any, blank: int) -> Tuple[Any, ...]:
    lod = lod or {}
    toff = _off("warpctc", lod.get("Logits"), "Logits")
    uoff = _off("warpctc", lod.get("Label"), "Label")
    T, U = np.diff(toff), np.diff(uoff)
    if T.size != U.size:
        raise ValueError("warpctc: Logits and Label must have the same number of sequences")
    S, C = T.size, Logits.shape[1]
    tmax, umax = int(T.max(initial=1)), int(U.max(initial=0))
    tidx = _pad_index(T, tmax)
    x = np.full((S * tmax, C), 0.0)
    x[tidx] = Logits
    x = x.reshape(S, tmax, C)
    lp = x - _lse(x, axis=2)[..., None]                      # log softmax
    lab = np.full(S * max(umax, 1), blank, np.int64)
    lab[_pad_index(U, max(umax, 1))] = Label.reshape(-1)
    lab = lab.reshape(S, -1)[:, :umax]
    ext = np.full((S, 2 * umax + 1), blank, np.int64)        # l' = blank l1 blank l2 ... blank
    ext[:, 1::2] = lab
    L = 2 * U + 1
    pos = np.arange(ext.shape[1])
    skip = np.zeros_like(ext, bool)                          # may jump from s - 2 to s
    skip[:, 2:] = (ext[:, 2:] != blank) & (ext[:, 2:] != ext[:, :-2])
    valid = pos[None] < L[:, None]
    emit = np.take_along_axis(lp, np.broadcast_to(ext[:, None, :], (S, tmax, ext.shape[1])), 2)
    # warp-ctc skips a sequence whose U labels plus repeats do not fit in its T steps
    repeats = ((lab[:, 1:] == lab[:, :-1]) &
               (np.arange(1, max(umax, 1))[None, :] < U[:, None])).sum(axis=1)
    feasible = U + repeats <= T
    return T, L, lp, ext, skip, valid, emit, tidx, feasible


def _shift(a: np.ndarray, k: int) -> np.ndarray:
    out = np.full_like(a, _NEG)
    out[:, k:] = a[:, :-k] if k else a
    return out


def _alpha(T, L, emit, skip, valid):
    S, tmax, P = emit.shape
    alpha = np.full((S, tmax, P), _NEG)
    a0 = np.full((S, P), _NEG)
    a0[:, 0] = emit[:, 0, 0]
    if P > 1:
        a0[:, 1] = np.where(L > 1, emit[:, 0, 1], _NEG)
    alpha[:, 0] = np.where(valid, a0, _NEG)
    for t in range(1, tmax):
        prev = alpha[:, t - 1]
        stay = np.logaddexp(prev, _shift(prev, 1))
        stay = np.where(skip, np.logaddexp(stay, _shift(prev, 2)), stay)
        nxt = np.where(valid, stay + emit[:, t], _NEG)
        alpha[:, t] = np.where((t < T)[:, None], nxt, prev)
    return alpha


def _log_p(T, L, alpha):
    rows = np.arange(T.size)
    last = alpha[rows, T - 1]
    end = np.take_along_axis(last, (L - 1)[:, None], 1)[:, 0]
    before = np.where(L > 1, np.take_along_axis(last, np.maximum(L - 2, 0)[:, None], 1)[:, 0],
                      _NEG)
    return np.logaddexp(end, before)


@register
class Warpctc(OpDef):
    """Loss[s] = -log p(Label_s | softmax(Logits_s)) under CTC with ``blank``; dLogits =
    softmax - occupancy per class (divided by the sequence length with ``norm_by_times``);
    loss 0 and no gradient for a label the input cannot represent (warp-ctc's rule)."""
    type, inputs, outputs = "warpctc", ("Logits", "Label", "LogitsLength?", "LabelLength?"), \
        ("WarpCTCGrad?", "Loss")
    grad_uses = ("Logits", "Label", "LogitsLength", "LabelLength")
    lod_aware = True

    def infer(self, Logits, Label, LogitsLength, LabelLength):
        if (LogitsLength is None) != (LabelLength is None):
            raise ValueError("warpctc: LogitsLength and LabelLength must be given together")
        if LogitsLength is not None and Logits.ndim != 3:
            raise ValueError(f"warpctc: with LogitsLength, Logits must be [max_logit_length, "
                             f"batch_size, num_classes + 1], got {list(Logits.shape)}")
        return {"Loss": VarSpec((-1, 1), Logits.dtype), "WarpCTCGrad": Logits}

    def forward(self, Logits, Label, LogitsLength=None, LabelLength=None, lod=None, *,
                blank=0, norm_by_times=False):
        flat, labels, lod, _ = _unpad(Logits, Label, LogitsLength, LabelLength, lod)
        T, L, lp, ext, skip, valid, emit, tidx, feasible = _setup(flat, labels, lod, blank)
        nll = -_log_p(T, L, _alpha(T, L, emit, skip, valid))
        loss = np.where(feasible, nll, nll.dtype.type(0))
        return {"Loss": loss.reshape(-1, 1).astype(Logits.dtype),
                "WarpCTCGrad": np.zeros_like(Logits)}

    def backward(self, Logits, Label, LogitsLength=None, LabelLength=None, dWarpCTCGrad=None,
                 dLoss=None, lod=None, *, blank=0, norm_by_times=False):
        flat, labels, lod, scatter = _unpad(Logits, Label, LogitsLength, LabelLength, lod)
        grad = self._grad(flat, labels, lod, dLoss, blank, norm_by_times)
        if scatter is None:
            return {"Logits": grad}
        tmax, b, c = Logits.shape
        out = np.zeros((b * tmax, c), grad.dtype)
        out[scatter] = grad
        return {"Logits": out.reshape(b, tmax, c).transpose(1, 0, 2)}

    @staticmethod
    def _grad(Logits, Label, lod, dLoss, blank, norm_by_times):
        T, L, lp, ext, skip, valid, emit, tidx, feasible = _setup(Logits, Label, lod, blank)
        S, tmax, P = emit.shape
        alpha = _alpha(T, L, emit, skip, valid)
        logp = _log_p(T, L, alpha)
        beta = np.full_like(alpha, _NEG)
        pos = np.arange(P)[None]
        init = np.where((pos == (L - 1)[:, None]) | (pos == (L - 2)[:, None]), 0.0, _NEG)
        nskip = np.zeros_like(skip)                          # may jump from s + 2 back to s
        nskip[:, :-2] = skip[:, 2:]
        for t in range(tmax - 1, -1, -1):
            if t + 1 < tmax:
                nb = beta[:, t + 1] + emit[:, t + 1]
                rec = np.logaddexp(nb, _shift(nb[:, ::-1], 1)[:, ::-1])
                rec = np.where(nskip, np.logaddexp(rec, _shift(nb[:, ::-1], 2)[:, ::-1]), rec)
            else:
                rec = np.full((S, P), _NEG)
            cur = np.where((t == T - 1)[:, None], init, np.where((t < T - 1)[:, None], rec,
                                                                  _NEG))
            beta[:, t] = np.where(valid, cur, _NEG)
        occ = np.exp(np.minimum(alpha + beta - logp[:, None, None], 0.0))
        occ *= (np.arange(tmax)[None, :] < T[:, None])[..., None]
        grad = np.exp(lp) * (np.arange(tmax)[None, :] < T[:, None])[..., None]
        np.add.at(grad, (np.arange(S)[:, None, None], np.arange(tmax)[None, :, None],
                         np.broadcast_to(ext[:, None, :], occ.shape)), -occ)
        g = np.ones(S) if dLoss is None else dLoss.reshape(-1)
        scale = g / T if norm_by_times else g
        scale = np.where(feasible, scale, scale.dtype.type(0))   # warp-ctc: none for those
        grad *= scale[:, None, None]
        return grad.reshape(S * tmax, -1)[tidx].astype(Logits.dtype, copy=False)
