"""Linear-chain CRF over LoD sequences: ``linear_chain_crf`` (negative log-likelihood) and
``crf_decoding`` (Viterbi).

``Transition`` is fluid's ``[D + 2, D]`` parameter: row 0 the start weights, row 1 the end
weights, rows 2.. the tag-to-tag matrix ``W[i, j]`` (tag i followed by tag j). The sequences are
padded to ``[S, L, D]`` once, and the recursions run over time steps for all sequences at once
(a loop over the L positions, never over sequences).
"""
from __future__ import annotations

from typing import Any, Tuple

import numpy as np

from ..core.dtypes import VarType
from ..core.registry import OpDef, VarSpec, register
from .sequence import _off, _pad_index


def _lse(x: np.ndarray, axis: int) -> np.ndarray:
    m = np.max(x, axis=axis, keepdims=True)
    return np.squeeze(m, axis) + np.log(np.sum(np.exp(x - m), axis=axis))


def _padded(E: np.ndarray, off: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray,
                                                      np.ndarray]:
    """Emissions as [S, L, D], the valid mask [S, L], lengths and flat row positions."""
    lens = np.diff(off)
    if lens.size and lens.min() < 1:
        raise ValueError("linear_chain_crf: every sequence needs at least one step")
    width = int(lens.max(initial=1))
    idx = _pad_index(lens, width)
    P = np.zeros((lens.size * width, E.shape[1]), E.dtype)
    P[idx] = E
    mask = np.zeros(lens.size * width, bool)
    mask[idx] = True
    return P.reshape(lens.size, width, -1), mask.reshape(lens.size, width), lens, idx


def _forward(P: np.ndarray, mask: np.ndarray, start: np.ndarray, W: np.ndarray) -> np.ndarray:
    """log alpha [S, L, D]; positions past a sequence's end repeat its last alpha."""
    S, L, D = P.shape
    alpha = np.empty_like(P)
    alpha[:, 0] = start + P[:, 0]
    for t in range(1, L):
        nxt = _lse(alpha[:, t - 1, :, None] + W[None], axis=1) + P[:, t]
        alpha[:, t] = np.where(mask[:, t, None], nxt, alpha[:, t - 1])
    return alpha


def _labels(Label: np.ndarray, idx: np.ndarray, shape: Tuple[int, int]) -> np.ndarray:
    y = np.zeros(shape[0] * shape[1], np.int64)
    y[idx] = Label.reshape(-1)
    return y.reshape(shape)


@register
class LinearChainCrf(OpDef):
    """LogLikelihood[s] = log Z_s - score_s(Label): the negative log-likelihood of each
    sequence's tags, score = start[y_0] + sum_t E[t, y_t] + sum_t W[y_{t-1}, y_t] + end[y_last].
    Gradients from the forward-backward marginals: dE = p(y_t = j) - [y_t = j], dTransition the
    expected minus the observed start / end / pair counts (times dLogLikelihood)."""
    type = "linear_chain_crf"
    inputs = ("Emission", "Transition", "Label")
    outputs = ("Alpha?", "EmissionExps?", "TransitionExps?", "LogLikelihood")
    grad_uses = ("Emission", "Transition", "Label")
    lod_aware = True

    def infer(self, Emission, Transition, Label):
        if Emission.ndim != 2 or Transition.ndim != 2:
            raise ValueError("linear_chain_crf: Emission must be [N, D], Transition [D + 2, D]")
        d = Emission.shape[1]
        if d >= 0 and tuple(Transition.shape) != (d + 2, d):
            raise ValueError(f"linear_chain_crf: Transition must be [{d + 2}, {d}], got "
                             f"{list(Transition.shape)}")
        return {"Alpha": Emission, "EmissionExps": Emission, "TransitionExps": Transition,
                "LogLikelihood": VarSpec((-1, 1), Emission.dtype)}

    def _setup(self, Emission: np.ndarray, Label: np.ndarray, lod: Any) -> Tuple[Any, ...]:
        off = _off(self.type, (lod or {}).get("Emission"), "Emission")
        P, mask, lens, idx = _padded(Emission, off)
        y = _labels(Label, idx, mask.shape)
        if y.size and (y.min() < 0 or y.max() >= Emission.shape[1]):
            raise ValueError(f"linear_chain_crf: labels must lie in [0, {Emission.shape[1]})")
        return P, mask, lens, idx, y

    @staticmethod
    def _gold(P: np.ndarray, mask: np.ndarray, lens: np.ndarray, y: np.ndarray,
              T: np.ndarray) -> np.ndarray:
        S = P.shape[0]
        rows = np.arange(S)
        emit = (np.take_along_axis(P, y[..., None], 2)[..., 0] * mask).sum(1)
        pair = (T[2:][y[:, :-1], y[:, 1:]] * mask[:, 1:]).sum(1)
        return emit + pair + T[0][y[:, 0]] + T[1][y[rows, lens - 1]]

    def forward(self, Emission, Transition, Label, lod=None):
        P, mask, lens, idx, y = self._setup(Emission, Label, lod)
        T = Transition
        alpha = _forward(P, mask, T[0], T[2:])
        log_z = _lse(alpha[np.arange(P.shape[0]), lens - 1] + T[1], axis=1)
        nll = log_z - self._gold(P, mask, lens, y, T)
        flat_alpha = alpha.reshape(-1, P.shape[2])[idx]
        return {"Alpha": flat_alpha, "LogLikelihood": nll.reshape(-1, 1).astype(Emission.dtype),
                "EmissionExps": np.exp(Emission - Emission.max(1, keepdims=True)),
                "TransitionExps": np.exp(Transition)}

    def backward(self, Emission, Transition, Label, dAlpha=None, dEmissionExps=None,
                 dTransitionExps=None, dLogLikelihood=None, lod=None):
        P, mask, lens, idx, y = self._setup(Emission, Label, lod)
        T, W = Transition, Transition[2:]
        S, L, D = P.shape
        rows = np.arange(S)
        g = np.ones(S) if dLogLikelihood is None else dLogLikelihood.reshape(-1)
        alpha = _forward(P, mask, T[0], W)
        last = lens - 1
        log_z = _lse(alpha[rows, last] + T[1], axis=1)
        beta = np.zeros_like(P)
        beta[rows, last] = T[1]
        for t in range(L - 2, -1, -1):
            nxt = _lse(W[None] + (P[:, t + 1] + beta[:, t + 1])[:, None, :], axis=2)
            beta[:, t] = np.where((t < last)[:, None], nxt, beta[:, t])
        marg = np.exp(alpha + beta - log_z[:, None, None]) * mask[..., None]
        onehot = np.eye(D)[y] * mask[..., None]
        dP = (marg - onehot) * g[:, None, None]
        dT = np.zeros_like(T)
        dT[0] = ((marg[:, 0] - onehot[:, 0]) * g[:, None]).sum(0)
        dT[1] = ((marg[rows, last] - onehot[rows, last]) * g[:, None]).sum(0)
        if L > 1:
            pair = np.exp(alpha[:, :-1, :, None] + W[None, None] +
                          (P[:, 1:] + beta[:, 1:])[:, :, None, :] - log_z[:, None, None, None])
            pair *= (mask[:, 1:] * g[:, None])[..., None, None]
            counts = np.zeros((S, L - 1, D, D))
            s_i, t_i = np.nonzero(mask[:, 1:])
            counts[s_i, t_i, y[:, :-1][s_i, t_i], y[:, 1:][s_i, t_i]] = g[s_i]
            dT[2:] = (pair - counts).sum((0, 1))
        dE = dP.reshape(-1, D)[idx]
        return {"Emission": dE.astype(Emission.dtype, copy=False),
                "Transition": dT.astype(Transition.dtype, copy=False)}


@register
class CrfDecoding(OpDef):
    """ViterbiPath = the highest-scoring tag sequence of each sequence (int64, one row per
    step, Emission's LoD); with Label, 1 where the path equals the label and 0 elsewhere."""
    type = "crf_decoding"
    inputs = ("Emission", "Transition", "Label?")
    outputs = ("ViterbiPath",)
    no_grad = True
    lod_aware = True

    def infer(self, Emission, Transition, Label):
        return {"ViterbiPath": VarSpec((-1, 1), VarType.INT64, Emission.lod_level)}

    def forward(self, Emission, Transition, Label=None, lod=None):
        full = (lod or {}).get("Emission")
        off = _off(self.type, full, "Emission")
        P, mask, lens, idx = _padded(Emission, off)
        S, L, D = P.shape
        W = Transition[2:]
        score = Transition[0] + P[:, 0]
        back = np.zeros((S, L, D), np.int64)
        for t in range(1, L):
            cand = score[:, :, None] + W[None]
            back[:, t] = cand.argmax(1)
            nxt = cand.max(1) + P[:, t]
            score = np.where(mask[:, t, None], nxt, score)
        rows = np.arange(S)
        path = np.zeros((S, L), np.int64)
        cur = (score + Transition[1]).argmax(1)
        for t in range(L - 1, -1, -1):
            at_end = t == lens - 1
            beyond = t > lens - 1
            cur = np.where(at_end, (score + Transition[1]).argmax(1), cur)
            path[:, t] = np.where(beyond, 0, cur)
            if t > 0:
                cur = np.where(beyond, cur, back[rows, t, cur])
        out = path.reshape(-1)[idx].reshape(-1, 1)
        if Label is not None:
            out = (out == Label.reshape(-1, 1)).astype(np.int64)
        return {"ViterbiPath": out, "lod": {"ViterbiPath": full}}

