"""Single-step and cuDNN-style recurrent ops (fluid 1.8): ``gru_unit``, ``lstm_unit`` and
``cudnn_lstm`` (the op of ``layers.lstm``, with CPU semantics). Gate layouts: ``gru_unit`` as
``gru`` (see ``ops/rnn.py``), ``lstm_unit`` columns ``[i, f, o, g]``, ``cudnn_lstm`` cuDNN's
``[i, f, c, o]`` in one flat weight (``_cudnn_layout``)."""
from __future__ import annotations

from typing import Any, Dict, List, Tuple

import numpy as np

from ..core.registry import OpDef, VarSpec, register
from .rnn_core import (_LSTMCfg, _act, _gru_step, _gru_step_grad, _gru_weight_grad,
                       _gru_weights, _infer_hidden_size, _lstm_backward, _lstm_forward,
                       _sigmoid)


@register
class GRUUnit(OpDef):
    """One GRU step (fluid's ``gru_unit``): Input [N, 3D] = [x_u, x_r, x_c] projected,
    HiddenPrev [N, D]; u, r = act_g(x_ur + h W_ur + b_ur), c = act(x_c + (r*h) W_c + b_c),
    Hidden = (1-u)*h + u*c (u*h + (1-u)*c with origin_mode). Gate = [u, r, c],
    ResetHiddenPrev = r*h. ``activation`` / ``gate_activation`` are fluid's int codes
    (0 identity, 1 sigmoid, 2 tanh, 3 relu)."""
    type = "gru_unit"
    inputs = ("Input", "HiddenPrev", "Weight", "Bias?")
    outputs = ("Gate", "ResetHiddenPrev", "Hidden")
    grad_uses = ("Input", "HiddenPrev", "Weight", "Bias", "Gate", "ResetHiddenPrev")

    def infer(self, Input, HiddenPrev, Weight, Bias):
        D = _infer_hidden_size(self.type, Input, Weight, 3)
        if HiddenPrev.shape[-1] >= 0 and HiddenPrev.shape[-1] != D:
            raise ValueError(f"gru_unit: HiddenPrev must be [N, {D}], got "
                             f"{list(HiddenPrev.shape)}")
        n = Input.shape[0]
        return {"Gate": VarSpec((n, 3 * D), Input.dtype),
                "ResetHiddenPrev": VarSpec((n, D), Input.dtype),
                "Hidden": VarSpec((n, D), Input.dtype)}

    def forward(self, Input, HiddenPrev, Weight, Bias, *, activation=2, gate_activation=1,
                origin_mode=False):
        Wg, Wc = _gru_weights(self.type, Weight)
        X = Input + Bias.reshape(1, -1) if Bias is not None else Input
        u, r, c, rh, h = _gru_step(X, HiddenPrev, Wg, Wc,
                                   _act(self.type, activation, "activation")[0],
                                   _act(self.type, gate_activation, "gate_activation")[0],
                                   origin_mode)
        return {"Gate": np.concatenate([u, r, c], axis=1), "ResetHiddenPrev": rh, "Hidden": h}

    def backward(self, Input, HiddenPrev, Weight, Bias, Gate, ResetHiddenPrev, dGate,
                 dResetHiddenPrev, dHidden, *, activation=2, gate_activation=1,
                 origin_mode=False):
        Wg, Wc = _gru_weights(self.type, Weight)
        dh = dHidden if dHidden is not None else np.zeros_like(HiddenPrev)
        dX, dhp = _gru_step_grad(dh, HiddenPrev, Gate, ResetHiddenPrev, Wg, Wc,
                                 _act(self.type, activation, "activation")[1],
                                 _act(self.type, gate_activation, "gate_activation")[1],
                                 origin_mode)
        out = {"Input": dX, "HiddenPrev": dhp,
               "Weight": _gru_weight_grad(HiddenPrev, ResetHiddenPrev, dX, Weight)}
        if Bias is not None:
            out["Bias"] = dX.sum(0).reshape(Bias.shape)
        return out


@register
class LSTMUnit(OpDef):
    """One LSTM step (fluid's ``lstm_unit``): X [N, 4D] = [i, f, o, g] pre-activations,
    i, f, o = sigmoid(X_i), sigmoid(X_f + forget_bias), sigmoid(X_o), g = tanh(X_g);
    C = f * C_prev + i * g, H = o * tanh(C)."""
    type, inputs, outputs = "lstm_unit", ("X", "C_prev"), ("C", "H")
    grad_uses = ("X", "C_prev", "C")

    def infer(self, X, C_prev):
        D = C_prev.shape[-1]
        if X.ndim != 2 or C_prev.ndim != 2 or (D >= 0 and X.shape[-1] >= 0
                                               and X.shape[-1] != 4 * D):
            raise ValueError(f"lstm_unit: X must be [N, 4D] and C_prev [N, D], got X "
                             f"{list(X.shape)} and C_prev {list(C_prev.shape)}")
        return {"C": C_prev, "H": C_prev}

    @staticmethod
    def _gates(X, D, forget_bias):
        i = _sigmoid(X[:, :D])
        f = _sigmoid(X[:, D:2 * D] + forget_bias)
        o = _sigmoid(X[:, 2 * D:3 * D])
        g = np.tanh(X[:, 3 * D:])
        return i, f, o, g

    def forward(self, X, C_prev, *, forget_bias=0.0):
        i, f, o, g = self._gates(X, C_prev.shape[1], forget_bias)
        c = f * C_prev + i * g
        return {"C": c, "H": o * np.tanh(c)}

    def backward(self, X, C_prev, C, dC, dH, *, forget_bias=0.0):
        i, f, o, g = self._gates(X, C_prev.shape[1], forget_bias)
        tc = np.tanh(C)
        dc = dC.copy() if dC is not None else np.zeros_like(C)
        if dH is not None:
            dc += dH * o * (1 - tc * tc)
            do = dH * tc
        else:
            do = np.zeros_like(C)
        dX = np.concatenate([dc * g * i * (1 - i), dc * C_prev * f * (1 - f),
                             do * o * (1 - o), dc * i * (1 - g * g)], axis=1)
        return {"X": dX, "C_prev": dc * f}


# -- cudnn_lstm ---------------------------------------------------------------------------------

# fluid's column order [c, i, f, o] from cuDNN's [i, f, c, o] blocks
_CUDNN_TO_FLUID = (2, 0, 1, 3)


def _perm(H: int) -> np.ndarray:
    return np.concatenate([np.arange(k * H, (k + 1) * H) for k in _CUDNN_TO_FLUID])


def cudnn_lstm_weight_size(input_size: int, hidden_size: int, num_layers: int,
                           is_bidirec: bool) -> int:
    """Elements of the flat weight of ``cudnn_lstm`` (what ``layers.lstm`` creates)."""
    return sum(n for _, _, n in _cudnn_layout(input_size, hidden_size, num_layers,
                                                is_bidirec))


def _cudnn_layout(I: int, H: int, L: int, bidi: bool) -> List[Tuple[str, Tuple[int, ...], int]]:
    """(name, shape, size) of the pieces of the flat weight, in memory order: every W_ih
    ([4H, in]) and W_hh ([4H, H]) per layer and direction, then every b_ih, b_hh ([4H]) in
    the same order; gate blocks in cuDNN's order i, f, c, o."""
    dirs = 2 if bidi else 1
    mats, biases = [], []
    for l in range(L):
        inp = I if l == 0 else H * dirs
        for d in range(dirs):
            mats += [(f"w_ih_{l}_{d}", (4 * H, inp), 4 * H * inp),
                     (f"w_hh_{l}_{d}", (4 * H, H), 4 * H * H)]
            biases += [(f"b_ih_{l}_{d}", (4 * H,), 4 * H), (f"b_hh_{l}_{d}", (4 * H,), 4 * H)]
    return mats + biases


def _cudnn_unpack(W: np.ndarray, I: int, H: int, L: int, bidi: bool) -> Dict[str, np.ndarray]:
    out, pos = {}, 0
    for name, shape, n in _cudnn_layout(I, H, L, bidi):
        out[name] = W[pos:pos + n].reshape(shape)
        pos += n
    return out


@register
class CudnnLSTM(OpDef):
    """The op of ``layers.lstm`` (CPU semantics of cuDNN's LSTM): Input [T, B, I] time-major,
    InitH / InitC [L * dirs, B, H]; per layer and direction
    i, f, c~, o from x W_ih^T + b_ih + h W_hh^T + b_hh (cuDNN gate order i, f, c, o, sigmoid /
    tanh, no peepholes), c = f*c_prev + i*c~, h = o*tanh(c); the backward direction runs from
    the last step; a layer's input is the previous layer's [fwd, bwd] outputs, with dropout
    (upscale_in_train, masks kept in Reserve) between layers when training. W is one flat
    parameter (layout: ``_cudnn_layout``). Out [T, B, dirs * H]; LastH / LastC the final
    states. Gradient: BPTT through every layer."""
    type = "cudnn_lstm"
    inputs = ("Input", "InitH", "InitC", "W")
    outputs = ("Out", "LastH", "LastC", "Reserve?", "StateOut?")
    grad_uses = ("Input", "InitH", "InitC", "W", "Reserve")
    uses_rng = True

    def infer(self, Input, InitH, InitC, W, *, is_bidirec=False, input_size=10,
              hidden_size=100, num_layers=1):
        if Input.ndim != 3:
            raise ValueError(f"cudnn_lstm: Input must be 3-D [seq_len, batch, input_size], got "
                             f"{list(Input.shape)}")
        if Input.shape[2] >= 0 and Input.shape[2] != input_size:
            raise ValueError(f"cudnn_lstm: Input's last dimension {Input.shape[2]} != "
                             f"input_size {input_size}")
        dirs = 2 if is_bidirec else 1
        want = cudnn_lstm_weight_size(input_size, hidden_size, num_layers, is_bidirec)
        if W.shape and W.shape[0] >= 0 and int(np.prod(W.shape)) != want:
            raise ValueError(f"cudnn_lstm: W must hold {want} elements for input_size "
                             f"{input_size}, hidden_size {hidden_size}, num_layers {num_layers}, "
                             f"is_bidirec {is_bidirec}; got shape {list(W.shape)}")
        for slot, s in (("InitH", InitH), ("InitC", InitC)):
            if s.ndim != 3 or (s.shape[0] >= 0 and s.shape[0] != num_layers * dirs) or \
                    (s.shape[2] >= 0 and s.shape[2] != hidden_size):
                raise ValueError(f"cudnn_lstm: {slot} must be [num_layers * dirs = "
                                 f"{num_layers * dirs}, batch, {hidden_size}], got "
                                 f"{list(s.shape)}")
        T, B = Input.shape[:2]
        st = VarSpec((num_layers * dirs, B, hidden_size), Input.dtype)
        return {"Out": VarSpec((T, B, dirs * hidden_size), Input.dtype), "LastH": st,
                "LastC": st, "Reserve": VarSpec((-1,), Input.dtype),
                "StateOut": VarSpec((-1,), "uint8")}

    def check_attrs(self, attrs: Dict[str, Any]) -> Dict[str, Any]:
        # fluid's seed -1 means "not fixed"; the plan's convention for that is 0
        out = super().check_attrs(attrs)
        if out.get("seed", 0) < 0:
            out["seed"] = 0
        return out

    def _check(self, Input, InitH, W, input_size, hidden_size, num_layers, is_bidirec):
        T, B, I = Input.shape
        dirs = 2 if is_bidirec else 1
        if I != input_size:
            raise ValueError(f"cudnn_lstm: Input's last dimension {I} != input_size "
                             f"{input_size}")
        want = cudnn_lstm_weight_size(input_size, hidden_size, num_layers, is_bidirec)
        if W.size != want:
            raise ValueError(f"cudnn_lstm: W holds {W.size} elements, expected {want}")
        if InitH.shape != (num_layers * dirs, B, hidden_size):
            raise ValueError(f"cudnn_lstm: InitH/InitC must be "
                             f"{[num_layers * dirs, B, hidden_size]}, got {list(InitH.shape)}")

    @staticmethod
    def _run(Input, InitH, InitC, W, H, L, bidi, masks):
        """Forward through all layers; returns (out, lastH, lastC, per-layer caches)."""
        T, B, I = Input.shape
        dirs = 2 if bidi else 1
        P = _cudnn_unpack(W.reshape(-1), I, H, L, bidi)
        perm = _perm(H)
        cfg = _LSTMCfg("cudnn_lstm", H, None, False, "sigmoid", "tanh", "tanh")
        x = Input
        lastH, lastC = np.zeros_like(InitH), np.zeros_like(InitC)
        caches = []
        for l in range(L):
            outs, layer = [], []
            for d in range(dirs):
                k = l * dirs + d
                wih, whh = P[f"w_ih_{l}_{d}"], P[f"w_hh_{l}_{d}"]
                b = P[f"b_ih_{l}_{d}"] + P[f"b_hh_{l}_{d}"]
                # the width spelled out: -1 cannot be inferred with no time steps (T = 0)
                G = (x.reshape(T * B, x.shape[-1]) @ wih.T + b)[:, perm]
                Wr = whh.T[:, perm]
                steps = range(T - 1, -1, -1) if d else range(T)
                rows = [np.arange(t * B, (t + 1) * B) for t in steps]
                fw = _lstm_forward(G, rows, InitH[k], InitC[k], Wr, cfg)
                if T:
                    lastH[k], lastC[k] = fw["h"][rows[-1]], fw["c"][rows[-1]]
                else:
                    lastH[k], lastC[k] = InitH[k], InitC[k]
                outs.append(fw["h"].reshape(T, B, H))
                layer.append((x, G, rows, Wr, fw))
            y = np.concatenate(outs, axis=2) if dirs == 2 else outs[0]
            if l < L - 1 and masks is not None:
                y = y * masks[l]
            caches.append(layer)
            x = y
        return x, lastH, lastC, caches

    def forward(self, Input, InitH, InitC, W, *, rng=None, dropout_prob=0.0, is_bidirec=False,
                input_size=10, hidden_size=100, num_layers=1, is_test=False, seed=0):
        self._check(Input, InitH, W, input_size, hidden_size, num_layers, is_bidirec)
        T, B, _ = Input.shape
        dirs = 2 if is_bidirec else 1
        masks = None
        if dropout_prob > 0 and not is_test and num_layers > 1:
            keep = 1.0 - dropout_prob
            shape = (num_layers - 1, T, B, dirs * hidden_size)
            masks = ((rng.random(shape) < keep) / keep).astype(Input.dtype) if keep > 0 \
                else np.zeros(shape, Input.dtype)
        out, lh, lc, _ = self._run(Input, InitH, InitC, W, hidden_size, num_layers, is_bidirec,
                                   masks)
        reserve = masks.reshape(-1) if masks is not None else np.zeros(0, Input.dtype)
        return {"Out": out, "LastH": lh, "LastC": lc, "Reserve": reserve,
                "StateOut": np.zeros(0, np.uint8)}

    def backward(self, Input, InitH, InitC, W, Reserve, dOut, dLastH, dLastC, dReserve=None,
                 dStateOut=None, *, dropout_prob=0.0, is_bidirec=False, input_size=10,
                 hidden_size=100, num_layers=1, is_test=False, seed=0):
        T, B, I = Input.shape
        H, L, dirs = hidden_size, num_layers, 2 if is_bidirec else 1
        masks = None
        if Reserve is not None and Reserve.size:
            masks = Reserve.reshape(L - 1, T, B, dirs * H)
        _, _, _, caches = self._run(Input, InitH, InitC, W, H, L, is_bidirec, masks)
        perm = _perm(H)
        cfg = _LSTMCfg(self.type, H, None, False, "sigmoid", "tanh", "tanh")
        names = [n for n, _, _ in _cudnn_layout(I, H, L, is_bidirec)]
        grads = {n: None for n in names}
        dInitH, dInitC = np.zeros_like(InitH), np.zeros_like(InitC)
        dy = dOut if dOut is not None else np.zeros((T, B, dirs * H), Input.dtype)
        for l in range(L - 1, -1, -1):
            if l < L - 1 and masks is not None:
                dy = dy * masks[l]
            dx = None
            for d in range(dirs):
                k = l * dirs + d
                x, G, rows, Wr, fw = caches[l][d]
                dRec = dy[:, :, d * H:(d + 1) * H].reshape(T * B, H).copy()
                dCell = np.zeros((T * B, H), Input.dtype)
                if T:
                    if dLastH is not None:
                        dRec[rows[-1]] += dLastH[k]
                    if dLastC is not None:
                        dCell[rows[-1]] += dLastC[k]
                bw = _lstm_backward(G, rows, InitH[k], InitC[k], Wr, cfg, fw, dRec, dCell)
                if not T:
                    bw["drec0"] = dLastH[k] if dLastH is not None else np.zeros_like(InitH[k])
                    bw["dc0"] = dLastC[k] if dLastC is not None else np.zeros_like(InitC[k])
                dInitH[k], dInitC[k] = bw["drec0"], bw["dc0"]
                dGc = np.empty_like(bw["dG"])
                dGc[:, perm] = bw["dG"]                      # back to cuDNN's gate order
                dWr = np.empty_like(bw["dW"])
                dWr[:, perm] = bw["dW"]
                xf = x.reshape(T * B, x.shape[-1])
                wih = _cudnn_unpack(W.reshape(-1), I, H, L, is_bidirec)[f"w_ih_{l}_{d}"]
                grads[f"w_ih_{l}_{d}"] = dGc.T @ xf
                grads[f"w_hh_{l}_{d}"] = dWr.T
                grads[f"b_ih_{l}_{d}"] = grads[f"b_hh_{l}_{d}"] = dGc.sum(0)
                part = (dGc @ wih).reshape(x.shape)
                dx = part if dx is None else dx + part
            dy = dx
        dW = np.concatenate([grads[n].reshape(-1) for n in names]).reshape(W.shape)
        return {"Input": dy, "InitH": dInitH, "InitC": dInitC, "W": dW.astype(W.dtype)}
