"""Recurrent ops over LoD batches (fluid 1.8 names, slots and weight layouts): ``lstm``
(dynamic_lstm), ``lstmp`` and ``gru`` (dynamic_gru). The single-step ops and ``cudnn_lstm`` live
in ``ops/rnn_unit.py``, the shared recurrences in ``ops/rnn_core.py``.

Sequences run the way fluid's batched kernels run them: sorted by length (longest first, ties
in input order), so at step t the sequences still running are a prefix of the sorted batch and
one matrix product per step serves all of them. Every kernel keeps what its gradient needs
(activated gates, cells) in its intermediate outputs, in the input's row order; the gradient is
back-propagation through time over the same schedule, in reverse.

Gate layouts (as fluid): ``lstm``/``lstmp`` columns are ``[candidate, input, forget, output]``
and the bias is ``[b_c, b_i, b_f, b_o]`` plus the peepholes ``[W_ic, W_fc, W_oc]`` when
``use_peepholes``; ``gru`` columns are ``[update, reset, candidate]`` and its ``Weight`` buffer
holds ``W_ur`` ([D, 2D]) followed by ``W_c`` ([D, D]) *in memory* (not as column blocks).
"""
from __future__ import annotations


import numpy as np

from ..core.registry import OpDef, VarSpec, register
from .rnn_core import (_LSTMCfg, _Schedule, _act, _check_init, _gru_batch, _gru_step_grad,
                       _gru_weight_grad, _gru_weights, _infer_hidden_size, _lod_out,
                       _lstm_backward, _lstm_forward, _lstm_input_grads)

_LSTM_ATTRS = dict(use_peepholes=True, is_reverse=False, gate_activation="sigmoid",
                   cell_activation="tanh", candidate_activation="tanh")


@register
class LSTM(OpDef):
    """fluid's ``lstm`` (dynamic_lstm) over a LoD batch; Input [T, 4D] holds the projected
    inputs ``[x_c, x_i, x_f, x_o]`` (fc applied by the caller). Per sequence and step:
    i = act_g(x_i + h W_ih + c_prev w_ic + b_i), f = act_g(x_f + h W_fh + c_prev w_fc + b_f),
    c~ = act_c(x_c + h W_ch + b_c), c = f*c_prev + i*c~, o = act_g(x_o + h W_oh + c w_oc + b_o),
    h = o * act_h(c) (peepholes w_* only with use_peepholes; ``is_reverse`` runs each sequence
    from its end). Hidden and Cell keep Input's LoD. Gradient: back-propagation through time."""
    type = "lstm"
    inputs = ("Input", "H0?", "C0?", "Weight", "Bias?")
    outputs = ("Hidden", "Cell", "BatchGate?", "BatchCellPreAct?")
    grad_uses = ("Input", "H0", "C0", "Weight", "Bias", "Hidden", "Cell", "BatchGate")
    lod_aware = True

    def infer(self, Input, H0, C0, Weight, Bias, *, use_peepholes=True):
        if len(Input.shape) != 2:         # fluid 1.8's LSTMOp::InferShape
            raise ValueError(f"{self.type}: Input(X)'s rank must be 2 ([T, 4 * D] rows of a "
                             f"LoD batch), got shape {list(Input.shape)}")
        D = _infer_hidden_size(self.type, Input, Weight, 4,
                               " (the size passed to dynamic_lstm)")
        rows = Input.shape[0]
        spec = VarSpec((rows, D), Input.dtype, Input.lod_level)
        return {"Hidden": spec, "Cell": spec,
                "BatchGate": VarSpec((rows, 4 * D), Input.dtype, Input.lod_level),
                "BatchCellPreAct": spec}

    def _setup(self, Input, H0, C0, Weight, Bias, lod, attrs):
        D = Weight.shape[0]
        cfg = _LSTMCfg(self.type, D, Bias, attrs["use_peepholes"], attrs["gate_activation"],
                       attrs["cell_activation"], attrs["candidate_activation"],
                       clipped=True)     # fluid's activation_functions.h (clipped)
        sch = _Schedule(self.type, (lod or {}).get("Input"), Input.shape[0], attrs["is_reverse"])
        _check_init(self.type, "H0", H0, sch.n_seq, D)
        _check_init(self.type, "C0", C0, sch.n_seq, D)
        G = Input + Bias.reshape(-1)[:4 * D] if Bias is not None else Input
        return cfg, sch, G, sch.sort(H0, D, Input.dtype), sch.sort(C0, D, Input.dtype)

    def forward(self, Input, H0, C0, Weight, Bias, lod=None, *, use_peepholes=True,
                is_reverse=False, gate_activation="sigmoid", cell_activation="tanh",
                candidate_activation="tanh"):
        attrs = dict(use_peepholes=use_peepholes, is_reverse=is_reverse,
                     gate_activation=gate_activation, cell_activation=cell_activation,
                     candidate_activation=candidate_activation)
        cfg, sch, G, h0, c0 = self._setup(Input, H0, C0, Weight, Bias, lod, attrs)
        fw = _lstm_forward(G, sch.rows, h0, c0, Weight, cfg)
        return {"Hidden": fw["h"], "Cell": fw["c"], "BatchGate": fw["gates"],
                "BatchCellPreAct": fw["c"],
                "lod": _lod_out(lod, "Hidden", "Cell", "BatchGate", "BatchCellPreAct")}

    def backward(self, Input, H0, C0, Weight, Bias, Hidden, Cell, BatchGate, dHidden, dCell,
                 dBatchGate=None, dBatchCellPreAct=None, lod=None, **attrs):
        attrs = {**_LSTM_ATTRS, **attrs}
        cfg, sch, G, h0, c0 = self._setup(Input, H0, C0, Weight, Bias, lod, attrs)
        if BatchGate is None:
            fw = _lstm_forward(G, sch.rows, h0, c0, Weight, cfg)
        else:
            fw = {"h": Hidden, "c": Cell, "gates": BatchGate}
        bw = _lstm_backward(G, sch.rows, h0, c0, Weight, cfg, fw, dHidden, dCell)
        out = {"Input": bw["dG"], "Weight": bw["dW"].astype(Weight.dtype, copy=False)}
        return _lstm_input_grads(out, bw, sch, H0, C0, Bias)


@register
class LSTMP(OpDef):
    """fluid's ``lstmp``: an LSTM whose recurrent state is the projection
    r = act_p(h @ ProjWeight) (clipped to +-proj_clip when > 0) instead of h; the cell is
    clipped to +-cell_clip (when > 0) before its activation and carried clipped. Weight
    [P, 4D] multiplies r_prev, ProjWeight [D, P]; H0 is r_0 [N, P], C0 [N, D]. Projection
    ([T, P]) and Cell keep Input's LoD. Gradient: BPTT (zero through clipped entries)."""
    type = "lstmp"
    inputs = ("Input", "H0?", "C0?", "Weight", "ProjWeight", "Bias?")
    outputs = ("Projection", "Cell", "BatchGate?", "BatchCellPreAct?", "BatchHidden?")
    grad_uses = ("Input", "H0", "C0", "Weight", "ProjWeight", "Bias", "Projection", "Cell",
                 "BatchGate", "BatchHidden")
    lod_aware = True

    def infer(self, Input, H0, C0, Weight, ProjWeight, Bias):
        if ProjWeight.ndim != 2 or Weight.ndim != 2:
            raise ValueError("lstmp: Weight and ProjWeight must be 2-D")
        D, P = ProjWeight.shape
        if Weight.shape != (P, 4 * D):
            raise ValueError(f"lstmp: Weight must be [P, 4D] = [{P}, {4 * D}] (ProjWeight is "
                             f"[D, P] = {list(ProjWeight.shape)}), got {list(Weight.shape)}")
        if Input.shape[-1] >= 0 and Input.shape[-1] != 4 * D:
            raise ValueError(f"lstmp: Input width must be 4 * D = {4 * D}, got "
                             f"{Input.shape[-1]}")
        rows, lvl = Input.shape[0], Input.lod_level
        return {"Projection": VarSpec((rows, P), Input.dtype, lvl),
                "Cell": VarSpec((rows, D), Input.dtype, lvl),
                "BatchGate": VarSpec((rows, 4 * D), Input.dtype, lvl),
                "BatchCellPreAct": VarSpec((rows, D), Input.dtype, lvl),
                "BatchHidden": VarSpec((rows, D), Input.dtype, lvl)}

    def _setup(self, Input, H0, C0, ProjWeight, Bias, lod, attrs):
        D, P = ProjWeight.shape
        cfg = _LSTMCfg(self.type, D, Bias, attrs["use_peepholes"], attrs["gate_activation"],
                       attrs["cell_activation"], attrs["candidate_activation"],
                       attrs["proj_activation"], attrs["cell_clip"], attrs["proj_clip"],
                       clipped=True)     # the cell's, as lstm; the projection's: Eigen's
        sch = _Schedule(self.type, (lod or {}).get("Input"), Input.shape[0], attrs["is_reverse"])
        _check_init(self.type, "H0", H0, sch.n_seq, P)
        _check_init(self.type, "C0", C0, sch.n_seq, D)
        G = Input + Bias.reshape(-1)[:4 * D] if Bias is not None else Input
        return cfg, sch, G, sch.sort(H0, P, Input.dtype), sch.sort(C0, D, Input.dtype)

    def forward(self, Input, H0, C0, Weight, ProjWeight, Bias, lod=None, *, use_peepholes=True,
                is_reverse=False, cell_clip=0.0, proj_clip=0.0, gate_activation="sigmoid",
                cell_activation="tanh", candidate_activation="tanh", proj_activation="tanh"):
        attrs = dict(use_peepholes=use_peepholes, is_reverse=is_reverse, cell_clip=cell_clip,
                     proj_clip=proj_clip, gate_activation=gate_activation,
                     cell_activation=cell_activation, candidate_activation=candidate_activation,
                     proj_activation=proj_activation)
        cfg, sch, G, r0, c0 = self._setup(Input, H0, C0, ProjWeight, Bias, lod, attrs)
        fw = _lstm_forward(G, sch.rows, r0, c0, Weight, cfg, ProjWeight)
        return {"Projection": fw["r"], "Cell": fw["c"], "BatchGate": fw["gates"],
                "BatchCellPreAct": fw["c"], "BatchHidden": fw["h"],
                "lod": _lod_out(lod, "Projection", "Cell", "BatchGate", "BatchCellPreAct",
                                "BatchHidden")}

    def backward(self, Input, H0, C0, Weight, ProjWeight, Bias, Projection, Cell, BatchGate,
                 BatchHidden, dProjection, dCell, dBatchGate=None, dBatchCellPreAct=None,
                 dBatchHidden=None, lod=None, **attrs):
        attrs = {**self.attr_defaults, **attrs}
        cfg, sch, G, r0, c0 = self._setup(Input, H0, C0, ProjWeight, Bias, lod, attrs)
        if BatchGate is None or BatchHidden is None:
            fw = _lstm_forward(G, sch.rows, r0, c0, Weight, cfg, ProjWeight)
        else:
            fw = {"h": BatchHidden, "c": Cell, "gates": BatchGate, "r": Projection}
        bw = _lstm_backward(G, sch.rows, r0, c0, Weight, cfg, fw, dProjection, dCell,
                            ProjWeight)
        out = {"Input": bw["dG"], "Weight": bw["dW"], "ProjWeight": bw["dProjW"]}
        return _lstm_input_grads(out, bw, sch, H0, C0, Bias)


@register
class GRU(OpDef):
    """fluid's ``gru`` (dynamic_gru) over a LoD batch; Input [T, 3D] holds the projected inputs
    ``[x_u, x_r, x_c]``. Per step: u = act_g(x_u + h W_u + b_u), r = act_g(x_r + h W_r + b_r),
    c = act(x_c + (r*h) W_c + b_c), h' = (1-u)*h + u*c, or u*h + (1-u)*c with origin_mode.
    Hidden keeps Input's LoD. The intermediate outputs are in fluid's *batch* layout (the
    rows of step 0 of every sequence, sorted longest first, then those of step 1, ...; what
    fluid's sequence2batch gives and its gru_grad reads), without LoD: BatchGate holds the
    activated [u, r, c], BatchResetHiddenPrev r*h_prev, BatchHidden the new h. Gradient: BPTT."""
    type = "gru"
    inputs = ("Input", "H0?", "Weight", "Bias?")
    outputs = ("BatchGate?", "BatchResetHiddenPrev?", "BatchHidden?", "Hidden")
    grad_uses = ("Input", "H0", "Weight", "Bias", "BatchGate", "BatchResetHiddenPrev",
                 "BatchHidden")
    lod_aware = True

    def infer(self, Input, H0, Weight, Bias):
        D = _infer_hidden_size(self.type, Input, Weight, 3, " (D = size of dynamic_gru)")
        rows, lvl = Input.shape[0], Input.lod_level
        spec = VarSpec((rows, D), Input.dtype)
        return {"Hidden": VarSpec((rows, D), Input.dtype, lvl),
                "BatchGate": VarSpec((rows, 3 * D), Input.dtype),
                "BatchResetHiddenPrev": spec, "BatchHidden": spec}

    def _setup(self, Input, H0, Weight, Bias, lod, activation, gate_activation, is_reverse):
        D = Weight.shape[0]
        Wg, Wc = _gru_weights(self.type, Weight)
        sch = _Schedule(self.type, (lod or {}).get("Input"), Input.shape[0], is_reverse)
        _check_init(self.type, "H0", H0, sch.n_seq, D)
        X = Input + Bias.reshape(1, -1) if Bias is not None else Input
        return (Wg, Wc, sch, X, sch.sort(H0, D, Input.dtype),     # fluid's clipped acts
                _act(self.type, activation, "activation", clipped=True),
                _act(self.type, gate_activation, "gate_activation", clipped=True))

    def forward(self, Input, H0, Weight, Bias, lod=None, *, activation="tanh",
                gate_activation="sigmoid", is_reverse=False, origin_mode=False):
        Wg, Wc, sch, _, h, act, gact = self._setup(Input, H0, Weight, None, lod, activation,
                                                   gate_activation, is_reverse)
        perm = sch.batch_order()
        Xb = Input[perm]                    # the batch layout: each step's rows contiguous
        if Bias is not None:
            Xb += Bias.reshape(1, -1)
        gates, RH, Hb = _gru_batch(Xb, sch.bounds(), h, Wg, Wc, act[0], gact[0], origin_mode)
        Hid = np.empty_like(Hb)
        Hid[perm] = Hb
        return {"Hidden": Hid, "BatchGate": gates, "BatchResetHiddenPrev": RH,
                "BatchHidden": Hb, "lod": _lod_out(lod, "Hidden")}

    def backward(self, Input, H0, Weight, Bias, BatchGate, BatchResetHiddenPrev, BatchHidden,
                 dBatchGate, dBatchResetHiddenPrev, dBatchHidden, dHidden, lod=None, *,
                 activation="tanh", gate_activation="sigmoid", is_reverse=False,
                 origin_mode=False):
        if BatchGate is None or BatchResetHiddenPrev is None or BatchHidden is None:
            fw = self.forward(Input, H0, Weight, Bias, lod, activation=activation,
                              gate_activation=gate_activation, is_reverse=is_reverse,
                              origin_mode=origin_mode)
            BatchGate, BatchResetHiddenPrev = fw["BatchGate"], fw["BatchResetHiddenPrev"]
            BatchHidden = fw["BatchHidden"]
        Wg, Wc, sch, X, h0, act, gact = self._setup(Input, H0, Weight, Bias, lod, activation,
                                                    gate_activation, is_reverse)
        # back to Input's row order; h_prev of step t is the new h of step t - 1 (h0 at t = 0)
        perm = sch.batch_order()
        BatchGate, BatchResetHiddenPrev, Hid = (
            sch.unbatch(a, perm) for a in (BatchGate, BatchResetHiddenPrev, BatchHidden))
        BatchHidden = np.empty_like(Hid)
        for t, r in enumerate(sch.rows):
            BatchHidden[r] = h0[:r.size] if t == 0 else Hid[sch.rows[t - 1][:r.size]]
        dX = np.zeros_like(X)
        dh_s = np.zeros_like(h0)
        for t in range(len(sch.rows) - 1, -1, -1):
            r = sch.rows[t]
            n = r.size
            dh = dh_s[:n] + dHidden[r] if dHidden is not None else dh_s[:n]
            dX[r], dh_s[:n] = _gru_step_grad(dh, BatchHidden[r], BatchGate[r],
                                             BatchResetHiddenPrev[r], Wg, Wc, act[1], gact[1],
                                             origin_mode)
        out = {"Input": dX,
               "Weight": _gru_weight_grad(BatchHidden, BatchResetHiddenPrev, dX, Weight)}
        if H0 is not None:
            out["H0"] = sch.unsort(dh_s)
        if Bias is not None:
            out["Bias"] = dX.sum(0).reshape(Bias.shape)
        return out
