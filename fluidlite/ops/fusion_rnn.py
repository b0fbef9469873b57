"""fluid 1.8's fused recurrent inference ops (paddle/fluid/operators/fused/ and
attention_lstm_op.cc): ``fusion_lstm``, ``fused_embedding_fc_lstm``, ``fusion_gru`` and
``attention_lstm``. fluid's inference passes (fc_lstm_fuse_pass, embedding_fc_lstm_fuse_pass,
fc_gru_fuse_pass) write them; fluid registers no gradient for any of them (EmptyGradOpMaker
or none), so neither does fluidlite.

Each computes what its unfused chain computes, with the recurrences of ``ops/rnn_core.py``
(fluid's clipped activations, as its jit LSTM/GRU kernels): ``fusion_lstm`` is fc + ``lstm``
(XX = X @ WeightX + Bias[:4D], gates ``[c~, i, f, o]``, peepholes Bias[4D:7D]);
``fused_embedding_fc_lstm`` reads XX as rows of Embeddings (which already hold the fc and its
bias) by Ids; ``fusion_gru`` is fc + ``gru`` (gates ``[u, r, c~]``, WeightH holding W_ur then
W_c in memory). fluid's ``use_seq`` chooses between its per-sequence and batched CPU code
paths, which compute the same numbers; fluidlite has one path and keeps the attribute.
"""
from __future__ import annotations

from typing import Any, Dict, Optional

import numpy as np

from ..core.registry import OpDef, VarSpec, register
from .rnn_core import (_LSTMCfg, _Schedule, _act, _check_init, _gru_batch, _gru_weights,
                       _lstm_forward)


def _seq_lod(op: str, lod: Any, slot: str, rows: int) -> Any:
    x = (lod or {}).get(slot)
    if not x:
        raise ValueError(f"{op}: input {slot} has no LoD; feed a LoDTensor "
                         f"(fluid.create_lod_tensor(data, lengths, place)) to a variable "
                         f"declared with lod_level >= 1")
    return x


def _check_h0c0(op: str, H0: Any, C0: Any) -> None:
    if (H0 is None) != (C0 is None):
        raise ValueError(f"{op}: H0 and C0 must be given together (fluid: \"Input(Cell) and "
                         f"Input(Hidden) of LSTM should not be null at the same time\")")


def _lstm_run(op: str, XX: np.ndarray, lod: Any, slot: str, H0: Any, C0: Any,
              WeightH: np.ndarray, Bias: np.ndarray, attrs: Dict[str, Any]
              ) -> Dict[str, Any]:
    """fluid's fused LSTM recurrence over the projected rows ``XX`` [T, 4D] (bias already
    added): Hidden and Cell in XX's row order, sharing the ``slot`` input's LoD."""
    D = WeightH.shape[0]
    cfg = _LSTMCfg(op, D, Bias, attrs["use_peepholes"], attrs["gate_activation"],
                   attrs["cell_activation"], attrs["candidate_activation"], clipped=True)
    x_lod = _seq_lod(op, lod, slot, XX.shape[0])
    sch = _Schedule(op, x_lod, XX.shape[0], attrs["is_reverse"])
    _check_init(op, "H0", H0, sch.n_seq, D)
    _check_init(op, "C0", C0, sch.n_seq, D)
    fw = _lstm_forward(XX, sch.rows, sch.sort(H0, D, XX.dtype), sch.sort(C0, D, XX.dtype),
                       WeightH, cfg)
    return {"Hidden": fw["h"], "Cell": fw["c"], "XX": XX,
            "lod": {"Hidden": x_lod, "Cell": x_lod, "XX": x_lod}}


def _infer_lstm(op: str, rows: int, dtype: Any, lvl: int, D: int, Bias: Any,
                use_peepholes: bool) -> Dict[str, VarSpec]:
    want = 7 * D if use_peepholes else 4 * D
    if Bias.ndim != 2 or Bias.shape[0] != 1 or (Bias.shape[1] >= 0 and Bias.shape[1] != want):
        raise ValueError(f"{op}: Bias must be [1, {want}] (4D, plus 3D peephole weights when "
                         f"use_peepholes), got {list(Bias.shape)}")
    spec = VarSpec((rows, D), dtype, lvl)
    return {"Hidden": spec, "Cell": spec, "XX": VarSpec((rows, 4 * D), dtype, lvl)}


def _check_weight_h(op: str, WeightH: Any, gates: int) -> int:
    D = WeightH.shape[0]
    if WeightH.ndim != 2 or (D >= 0 and WeightH.shape[1] >= 0 and WeightH.shape[1] != gates * D):
        raise ValueError(f"{op}: WeightH must be [D, {gates}D], got {list(WeightH.shape)}")
    return D


_LSTM_DEFAULTS = dict(use_peepholes=True, is_reverse=False, use_seq=True,
                      gate_activation="sigmoid", cell_activation="tanh",
                      candidate_activation="tanh")


@register
class FusionLSTM(OpDef):
    """fluid's ``fusion_lstm`` (fc + lstm): XX = X @ WeightX + Bias[:, :4D], then fluid's
    ``lstm`` recurrence with WeightH [D, 4D] (gates ``[c~, i, f, o]``; peepholes Bias[:, 4D:]
    when use_peepholes). Hidden, Cell [T, D] keep X's LoD. Inference only (no gradient)."""
    type = "fusion_lstm"
    inputs = ("X", "WeightX", "WeightH", "Bias", "H0?", "C0?")
    outputs = ("Hidden", "Cell", "XX?", "BatchedInput?", "BatchedHidden?", "BatchedCell?",
               "ReorderedH0?", "ReorderedC0?", "CheckedCell?")
    lod_aware = True
    no_grad = True

    def infer(self, X, WeightX, WeightH, Bias, H0, C0, *, use_peepholes=True):
        D = _check_weight_h(self.type, WeightH, 4)
        if X.ndim != 2 or WeightX.ndim != 2 or (
                X.shape[1] >= 0 and WeightX.shape[0] >= 0 and WeightX.shape[0] != X.shape[1]):
            raise ValueError(f"{self.type}: X must be [T, M] and WeightX [M, 4D], got X "
                             f"{list(X.shape)} and WeightX {list(WeightX.shape)}")
        if WeightX.shape[1] >= 0 and WeightX.shape[1] != 4 * D:
            raise ValueError(f"{self.type}: WeightX must be [M, 4D] = [M, {4 * D}], got "
                             f"{list(WeightX.shape)}")
        return _infer_lstm(self.type, X.shape[0], X.dtype, X.lod_level, D, Bias, use_peepholes)

    def forward(self, X, WeightX, WeightH, Bias, H0=None, C0=None, lod=None, *,
                use_peepholes=True, is_reverse=False, use_seq=True, gate_activation="sigmoid",
                cell_activation="tanh", candidate_activation="tanh"):
        _check_h0c0(self.type, H0, C0)
        D4 = 4 * WeightH.shape[0]
        XX = (X @ WeightX + Bias.reshape(-1)[:D4]).astype(X.dtype, copy=False)
        attrs = dict(use_peepholes=use_peepholes, is_reverse=is_reverse,
                     gate_activation=gate_activation, cell_activation=cell_activation,
                     candidate_activation=candidate_activation)
        return _lstm_run(self.type, XX, lod, "X", H0, C0, WeightH, Bias, attrs)


@register
class FusedEmbeddingFCLSTM(OpDef):
    """fluid's ``fused_embedding_fc_lstm`` (lookup_table + fc + lstm): Embeddings [V, 4D] hold
    each word's fc output *including* the fc and gate biases, so XX = Embeddings[Ids] (Ids
    [T, 1] int64, each in [0, V)); then fluid's ``lstm`` recurrence with WeightH [D, 4D]
    (Bias [1, 4D] is not added again; with use_peepholes its [4D:7D] part holds the peepholes).
    Hidden, Cell [T, D] keep Ids' LoD. Inference only (no gradient)."""
    type = "fused_embedding_fc_lstm"
    inputs = ("Ids", "Embeddings", "WeightH", "Bias", "H0?", "C0?")
    outputs = ("Hidden", "Cell", "XX?", "BatchedInput?", "BatchedHidden?", "BatchedCell?",
               "ReorderedH0?", "ReorderedC0?")
    lod_aware = True
    no_grad = True

    def infer(self, Ids, Embeddings, WeightH, Bias, H0, C0, *, use_peepholes=True):
        D = _check_weight_h(self.type, WeightH, 4)
        if Embeddings.ndim != 2 or (Embeddings.shape[1] >= 0 and Embeddings.shape[1] != 4 * D):
            raise ValueError(f"{self.type}: Embeddings must be [V, 4D] = [V, {4 * D}], got "
                             f"{list(Embeddings.shape)}")
        return _infer_lstm(self.type, Ids.shape[0], Embeddings.dtype, Ids.lod_level, D, Bias,
                           use_peepholes)

    def forward(self, Ids, Embeddings, WeightH, Bias, H0=None, C0=None, lod=None, *,
                use_peepholes=True, is_reverse=False, use_seq=True, gate_activation="sigmoid",
                cell_activation="tanh", candidate_activation="tanh"):
        _check_h0c0(self.type, H0, C0)
        ids = np.asarray(Ids).reshape(-1).astype(np.int64, copy=False)
        bad = (ids < 0) | (ids >= Embeddings.shape[0])
        if bad.any():
            raise ValueError(f"{self.type}: Ids must lie in [0, {Embeddings.shape[0]}) (the rows "
                             f"of Embeddings), got {int(ids[bad][0])}")
        attrs = dict(use_peepholes=use_peepholes, is_reverse=is_reverse,
                     gate_activation=gate_activation, cell_activation=cell_activation,
                     candidate_activation=candidate_activation)
        return _lstm_run(self.type, Embeddings[ids], lod, "Ids", H0, C0, WeightH, Bias, attrs)


@register
class FusionGRU(OpDef):
    """fluid's ``fusion_gru`` (fc + gru): XX = X @ WeightX + Bias (Bias [1, 3D] optional),
    then fluid's ``gru`` recurrence with WeightH [D, 3D] (W_ur [D, 2D] then W_c [D, D] in
    memory): u, r = act_g(xx_ur + h W_ur), c = act(xx_c + (r*h) W_c), h' = u*c + (1-u)*h.
    Hidden [T, D] keeps X's LoD. Inference only (no gradient)."""
    type = "fusion_gru"
    inputs = ("X", "H0?", "WeightX", "WeightH", "Bias?")
    outputs = ("ReorderedH0?", "XX?", "BatchedInput?", "BatchedOut?", "Hidden")
    lod_aware = True
    no_grad = True

    def infer(self, X, H0, WeightX, WeightH, Bias):
        D = _check_weight_h(self.type, WeightH, 3)
        if X.ndim != 2 or WeightX.ndim != 2 or (
                WeightX.shape[1] >= 0 and WeightX.shape[1] != 3 * D) or (
                X.shape[1] >= 0 and WeightX.shape[0] >= 0 and WeightX.shape[0] != X.shape[1]):
            raise ValueError(f"{self.type}: X must be [T, M] and WeightX [M, 3D] = "
                             f"[{X.shape[1]}, {3 * D}], got X {list(X.shape)} and WeightX "
                             f"{list(WeightX.shape)}")
        rows, lvl = X.shape[0], X.lod_level
        return {"Hidden": VarSpec((rows, D), X.dtype, lvl),
                "XX": VarSpec((rows, 3 * D), X.dtype, lvl)}

    def forward(self, X, H0, WeightX, WeightH, Bias, lod=None, *, activation="tanh",
                gate_activation="sigmoid", is_reverse=False, use_seq=True):
        D = WeightH.shape[0]
        XX = X @ WeightX
        if Bias is not None:
            XX = XX + Bias.reshape(1, -1)
        XX = XX.astype(X.dtype, copy=False)
        x_lod = _seq_lod(self.type, lod, "X", X.shape[0])
        sch = _Schedule(self.type, x_lod, X.shape[0], is_reverse)
        _check_init(self.type, "H0", H0, sch.n_seq, D)
        Wg, Wc = _gru_weights(self.type, WeightH)
        act = _act(self.type, activation, "activation", clipped=True)[0]
        gact = _act(self.type, gate_activation, "gate_activation", clipped=True)[0]
        perm = sch.batch_order()
        Hb = _gru_batch(XX[perm], sch.bounds(), sch.sort(H0, D, X.dtype), Wg, Wc, act, gact,
                        False)[2]
        Hid = np.empty_like(Hb)
        Hid[perm] = Hb
        return {"Hidden": Hid, "XX": XX, "lod": {"Hidden": x_lod, "XX": x_lod}}


def _relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, x.dtype.type(0))


@register
class AttentionLSTM(OpDef):
    """fluid's ``attention_lstm``: per sequence and step, attention scores over the sequence's
    rows e_j = relu(x_j W[:M] + AttentionBias + c_prev W[M:]) (AttentionWeight W [M + D, 1]),
    then, when AttentionScalar is given, e_j = relu(e_j * AttentionScalar +
    AttentionScalarBias); a = softmax(e) over the sequence; the LSTM input is x~ = sum_j a_j x_j;
    g = [h_prev, x~] @ LSTMWeight + LSTMBias (LSTMWeight [D + M, 4D], h_prev's rows first; no
    h_prev term without H0 at the first step), gates ``[f, i, o, c~]``:
    c = act_g(g_f) * c_prev + act_g(g_i) * act_cand(g_c), h = act_g(g_o) * act_cell(c).
    C0 [N, D] is required, H0 optional. Hidden, Cell [T, D] keep X's LoD. Inference only."""
    type = "attention_lstm"
    inputs = ("X", "C0", "H0?", "AttentionWeight", "AttentionBias?", "AttentionScalar?",
              "AttentionScalarBias?", "LSTMWeight", "LSTMBias")
    outputs = ("Hidden", "Cell", "AttentionedX?", "AttentionFCOut?", "LSTMX?", "LSTMOUT?")
    lod_aware = True
    no_grad = True

    def infer(self, X, C0, H0, AttentionWeight, AttentionBias, AttentionScalar,
              AttentionScalarBias, LSTMWeight, LSTMBias):
        if X.ndim != 2 or LSTMWeight.ndim != 2:
            raise ValueError(f"{self.type}: X must be [T, M] and LSTMWeight [D + M, 4D], got "
                             f"{list(X.shape)} and {list(LSTMWeight.shape)}")
        D = LSTMWeight.shape[1] // 4
        M = X.shape[1]
        if M >= 0 and LSTMWeight.shape[0] >= 0 and LSTMWeight.shape[0] != D + M:
            raise ValueError(f"{self.type}: LSTMWeight must be [D + M, 4D] = [{D + M}, "
                             f"{4 * D}], got {list(LSTMWeight.shape)}")
        if M >= 0 and tuple(AttentionWeight.shape) not in ((M + D, 1),):
            raise ValueError(f"{self.type}: AttentionWeight must be [M + D, 1] = [{M + D}, 1], "
                             f"got {list(AttentionWeight.shape)}")
        spec = VarSpec((X.shape[0], D), X.dtype, X.lod_level)
        return {"Hidden": spec, "Cell": spec,
                "AttentionedX": VarSpec((X.shape[0], 1), X.dtype)}

    def forward(self, X, C0, H0, AttentionWeight, AttentionBias, AttentionScalar,
                AttentionScalarBias, LSTMWeight, LSTMBias, lod=None, *,
                gate_activation="sigmoid", cell_activation="tanh",
                candidate_activation="tanh"):
        x_lod = _seq_lod(self.type, lod, "X", X.shape[0])
        off = np.asarray(x_lod[-1], np.int64)
        M, D = X.shape[1], LSTMWeight.shape[1] // 4
        _check_init(self.type, "C0", C0, off.size - 1, D)
        _check_init(self.type, "H0", H0, off.size - 1, D)
        gact = _act(self.type, gate_activation, "gate_activation", clipped=True)[0]
        cact = _act(self.type, cell_activation, "cell_activation", clipped=True)[0]
        kact = _act(self.type, candidate_activation, "candidate_activation", clipped=True)[0]
        aw = AttentionWeight.reshape(-1)
        atted = X @ aw[:M].reshape(M, 1)
        if AttentionBias is not None:
            atted = atted + AttentionBias.reshape(-1)[0]
        atted = atted.astype(X.dtype, copy=False)
        Hid = np.zeros((X.shape[0], D), X.dtype)
        Cel = np.zeros((X.shape[0], D), X.dtype)
        for i in range(off.size - 1):
            a, b = int(off[i]), int(off[i + 1])
            c = C0[i].reshape(1, D)
            h: Optional[np.ndarray] = H0[i].reshape(1, D) if H0 is not None else None
            for t in range(a, b):
                e = self._scores(atted[a:b, 0], c, aw[M:], AttentionScalar, AttentionScalarBias)
                g = (e.reshape(1, -1) @ X[a:b]) @ LSTMWeight[D:]
                if h is not None:
                    g = g + h @ LSTMWeight[:D]
                g = g + LSTMBias.reshape(1, -1)
                f, ig, o = gact(g[:, :D]), gact(g[:, D:2 * D]), gact(g[:, 2 * D:3 * D])
                c = f * c + ig * kact(g[:, 3 * D:])
                h = o * cact(c)
                Cel[t], Hid[t] = c[0], h[0]
        return {"Hidden": Hid, "Cell": Cel, "AttentionedX": atted,
                "lod": {"Hidden": x_lod, "Cell": x_lod}}

    @staticmethod
    def _scores(atted: np.ndarray, c: np.ndarray, wc: np.ndarray, scalar: Any,
                scalar_bias: Any) -> np.ndarray:
        """softmax over the sequence of the (scaled) relu attention scores (fluid's order)."""
        e = _relu(atted + (c.reshape(-1) @ wc).astype(atted.dtype))
        if scalar is not None:
            e = e * scalar.reshape(-1)[0]
            if scalar_bias is not None:
                e = e + scalar_bias.reshape(-1)[0]
            e = _relu(e)
        e = np.exp(e - e.max())
        return (e / e.sum()).astype(atted.dtype, copy=False)
