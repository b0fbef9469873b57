"""Linear-chain CRF over LoD sequences: ``linear_chain_crf`` (negative log-likelihood) and
``crf_decoding`` (Viterbi).

``Transition`` is fluid's ``[D + 2, D]`` parameter: row 0 the start weights, row 1 the end
weights, rows 2.. the tag-to-tag matrix ``W[i, j]`` (tag i followed by tag j). The sequences are
padded to ``[S, L, D]`` once, and the recursions run over time steps for all sequences at once
(a loop over the L positions, never over sequences).

Both ops also take fluid 1.8's padded form: ``Length`` given, Emission is [B, L, D] and Label
[B, L] or [B, L, 1]; the valid rows are gathered into the LoD layout, computed as above, and the
results (Alpha, EmissionExps, dEmission, ViterbiPath [B, L]) scattered back, zero past each
length. An empty sequence costs 0 (fluid) and decodes to nothing.
"""
from __future__ import annotations

from typing import Any, Tuple

import numpy as np

from ..core.dtypes import VarType
from ..core.registry import OpDef, VarSpec, register
from .sequence import _off, _pad_index, _unpad_rows


def _lse(x: np.ndarray, axis: int) -> np.ndarray:
    m = np.max(x, axis=axis, keepdims=True)
    return np.squeeze(m, axis) + np.log(np.sum(np.exp(x - m), axis=axis))


def _padded(E: np.ndarray, off: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray,
                                                      np.ndarray]:
    """Emissions as [S, L, D], the valid mask [S, L], lengths and flat row positions."""
    lens = np.diff(off)
    width = max(int(lens.max(initial=1)), 1)
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
    Alpha holds fluid's per-step forward variables normalized to sum 1, EmissionExps
    exp(E - row max), TransitionExps exp(Transition).
    Gradients from the forward-backward marginals: dE = p(y_t = j) - [y_t = j], dTransition the
    expected minus the observed start / end / pair counts (times dLogLikelihood)."""
    type = "linear_chain_crf"
    inputs = ("Emission", "Transition", "Label", "Length?")
    outputs = ("Alpha?", "EmissionExps?", "TransitionExps?", "LogLikelihood")
    # Paddle's LinearChainCRFGradMaker also passes the forward's Alpha / EmissionExps /
    # TransitionExps (its kernel reads them); this backward recomputes what it needs
    grad_uses = ("Emission", "Transition", "Label", "Length", "Alpha", "EmissionExps",
                 "TransitionExps")
    lod_aware = True

    def infer(self, Emission, Transition, Label, Length):
        padded = Length is not None
        if Emission.ndim != (3 if padded else 2) or Transition.ndim != 2:
            raise ValueError("linear_chain_crf: Emission must be [N, D] (LoD) or [B, L, D] "
                             f"(with Length), Transition [D + 2, D]; got Emission "
                             f"{list(Emission.shape)}, Transition {list(Transition.shape)}")
        d = Emission.shape[-1]
        if d >= 0 and tuple(Transition.shape) != (d + 2, d):
            raise ValueError(f"linear_chain_crf: Transition must be [{d + 2}, {d}], got "
                             f"{list(Transition.shape)}")
        if padded and len(Label.shape) not in (2, 3):
            raise ValueError(f"linear_chain_crf: with Length, Label must be [B, L] or "
                             f"[B, L, 1], got {list(Label.shape)}")
        return {"Alpha": Emission, "EmissionExps": Emission, "TransitionExps": Transition,
                "LogLikelihood": VarSpec((-1, 1), Emission.dtype)}

    def _setup(self, Emission: np.ndarray, Label: np.ndarray, Length: Any, lod: Any
               ) -> Tuple[Any, ...]:
        """(P, mask, lens, idx, y, scatter): ``scatter`` is None for LoD input, else the flat
        positions of the valid rows in the [B * L] grid of the padded input."""
        scatter = None
        if Length is not None:
            if Emission.ndim != 3:
                raise ValueError(f"linear_chain_crf: with Length, Emission must be [B, L, D], "
                                 f"got {list(Emission.shape)}")
            if Label.shape[:2] != Emission.shape[:2]:
                raise ValueError(f"linear_chain_crf: Label {list(Label.shape)} must be "
                                 f"[B, L] or [B, L, 1] like Emission {list(Emission.shape)}")
            Emission, elod, scatter = _unpad_rows(self.type, Emission, Length, "Length")
            Label = Label.reshape(-1)[scatter]
            off = np.asarray(elod[0], np.int64)
        else:
            off = _off(self.type, (lod or {}).get("Emission"), "Emission")
        P, mask, lens, idx = _padded(Emission, off)
        y = _labels(Label, idx, mask.shape)
        if y.size and (y.min() < 0 or y.max() >= Emission.shape[1]):
            raise ValueError(f"linear_chain_crf: labels must lie in [0, {Emission.shape[1]})")
        return P, mask, lens, idx, y, scatter

    @staticmethod
    def _gold(P: np.ndarray, mask: np.ndarray, lens: np.ndarray, y: np.ndarray,
              T: np.ndarray) -> np.ndarray:
        S = P.shape[0]
        rows = np.arange(S)
        emit = (np.take_along_axis(P, y[..., None], 2)[..., 0] * mask).sum(1)
        pair = (T[2:][y[:, :-1], y[:, 1:]] * mask[:, 1:]).sum(1)
        return emit + pair + T[0][y[:, 0]] + T[1][y[rows, np.maximum(lens - 1, 0)]]

    @staticmethod
    def _scatter(rows: np.ndarray, scatter: Any, like: np.ndarray) -> np.ndarray:
        """Valid rows back into the padded layout of ``like`` (zeros elsewhere)."""
        if scatter is None:
            return rows
        out = np.zeros((like.shape[0] * like.shape[1],) + rows.shape[1:], rows.dtype)
        out[scatter] = rows
        return out.reshape(like.shape[:2] + rows.shape[1:])

    def forward(self, Emission, Transition, Label, Length=None, lod=None):
        P, mask, lens, idx, y, scatter = self._setup(Emission, Label, Length, lod)
        T = Transition
        alpha = _forward(P, mask, T[0], T[2:])
        last = np.maximum(lens - 1, 0)
        log_z = _lse(alpha[np.arange(P.shape[0]), last] + T[1], axis=1)
        nll = log_z - self._gold(P, mask, lens, y, T)
        nll = np.where(lens > 0, nll, nll.dtype.type(0))
        # fluid's Alpha output: each step's forward variables normalized to sum 1 (its
        # kernel's NormalizeL1 of exp-space alpha), not the log-space alpha computed here
        norm = np.exp(alpha - _lse(alpha, axis=2)[..., None])
        flat_alpha = norm.reshape(-1, P.shape[2])[idx].astype(Emission.dtype, copy=False)
        # fluid's kernel: exp(E - row max) of every row, the padding rows of a padded
        # Emission included
        exps = np.exp(Emission - Emission.max(-1, keepdims=True))
        out = {"Alpha": self._scatter(flat_alpha, scatter, Emission),
               "LogLikelihood": nll.reshape(-1, 1).astype(Emission.dtype),
               "EmissionExps": exps, "TransitionExps": np.exp(Transition)}
        emission_lod = (lod or {}).get("Emission")
        if scatter is None and emission_lod:        # Alpha, EmissionExps: Emission's rows
            out["lod"] = {"Alpha": emission_lod, "EmissionExps": emission_lod}
        return out

    def backward(self, Emission, Transition, Label, Length=None, Alpha=None,
                 EmissionExps=None, TransitionExps=None, dAlpha=None,
                 dEmissionExps=None, dTransitionExps=None, dLogLikelihood=None, lod=None):
        P, mask, lens, idx, y, scatter = self._setup(Emission, Label, Length, lod)
        T, W = Transition, Transition[2:]
        S, L, D = P.shape
        rows = np.arange(S)
        g = np.ones(S) if dLogLikelihood is None else dLogLikelihood.reshape(-1)
        g = g * (lens > 0)                       # an empty sequence's cost is the constant 0
        alpha = _forward(P, mask, T[0], W)
        last = np.maximum(lens - 1, 0)
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
        dE = self._scatter(dP.reshape(-1, D)[idx], scatter, Emission)
        return {"Emission": dE.astype(Emission.dtype, copy=False),
                "Transition": dT.astype(Transition.dtype, copy=False)}


@register
class CrfDecoding(OpDef):
    """ViterbiPath = the highest-scoring tag sequence of each sequence (int64, one row per
    step, Emission's LoD); with Label, 1 where the path equals the label and 0 elsewhere.
    Padded form (``Length``): Emission [B, L, D], ViterbiPath [B, L], 0 past each length."""
    type = "crf_decoding"
    inputs = ("Emission", "Transition", "Label?", "Length?")
    outputs = ("ViterbiPath",)
    no_grad = True
    lod_aware = True

    def infer(self, Emission, Transition, Label, Length):
        if Length is not None:
            if Emission.ndim != 3:
                raise ValueError(f"crf_decoding: with Length, Emission must be [B, L, D], got "
                                 f"{list(Emission.shape)}")
            return {"ViterbiPath": VarSpec(tuple(Emission.shape[:2]), VarType.INT64)}
        return {"ViterbiPath": VarSpec((-1, 1), VarType.INT64, Emission.lod_level)}

    def forward(self, Emission, Transition, Label=None, Length=None, lod=None):
        scatter, shape = None, Emission.shape
        if Length is not None:
            if Emission.ndim != 3:
                raise ValueError(f"crf_decoding: with Length, Emission must be [B, L, D], got "
                                 f"{list(Emission.shape)}")
            if Label is not None and Label.shape[:2] != shape[:2]:
                raise ValueError(f"crf_decoding: Label {list(Label.shape)} must be [B, L] or "
                                 f"[B, L, 1] like Emission {list(shape)}")
            Emission, full, scatter = _unpad_rows(self.type, Emission, Length, "Length")
            if Label is not None:
                Label = Label.reshape(-1)[scatter]
        else:
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
        # past a sequence's end a step maps each tag to itself, so that backtracking from
        # the last step reaches each sequence's last step with its best final tag (two NumPy
        # calls a step; per-sequence end tests each step took five more)
        back = np.where(mask[:, :, None], back, np.arange(D))
        rows = np.arange(S)
        path = np.empty((S, L), np.int64)
        cur = (score + Transition[1]).argmax(1)
        for t in range(L - 1, 0, -1):
            path[:, t] = cur
            cur = back[rows, t, cur]
        path[:, 0] = cur
        out = path.reshape(-1)[idx].reshape(-1, 1)
        if Label is not None:
            out = (out == Label.reshape(-1, 1)).astype(np.int64)
        if scatter is not None:
            grid = np.zeros(shape[0] * shape[1], np.int64)
            grid[scatter] = out.reshape(-1)
            return {"ViterbiPath": grid.reshape(shape[:2])}
        return {"ViterbiPath": out, "lod": {"ViterbiPath": full}}
