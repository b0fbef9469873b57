"""Shared kernels of the recurrent ops (``ops/rnn.py``, ``ops/rnn_unit.py``): activations
with their derivatives, the LoD step schedule, and the LSTM / GRU recurrences with their
back-propagation through time. No op is registered here."""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

# -- activations: f(x) and f'(x) expressed through y = f(x) -----------------------------------


def _one(x: np.ndarray) -> Any:
    return x.dtype.type(1) if x.dtype.kind == "f" else 1.0


def _sigmoid(x: np.ndarray) -> np.ndarray:
    """fluid's Eigen sigmoid, 1 / (1 + exp(-x)) (an overflowing exp gives the limit 0)."""
    one = _one(x)
    with np.errstate(over="ignore"):
        return one / (one + np.exp(-x))


# fluid's math/detail/activation_functions.h, the activations of its lstm / lstmp / gru
# kernels: sigmoid of x clipped to [SIGMOID_THRESHOLD_MIN, MAX] = [-40, 13], and tanh as
# 2 / (1 + exp(-2x)) - 1 with -2x clipped at EXP_MAX_INPUT = 40 (so a saturated gate is
# 0.99999774, not 1, and tanh(x) bottoms out at 2 / (1 + e^40) - 1)
_SIGMOID_MIN, _SIGMOID_MAX, _EXP_MAX_INPUT = -40.0, 13.0, 40.0


def _sigmoid_clipped(x: np.ndarray) -> np.ndarray:
    one, t = _one(x), x.dtype.type if x.dtype.kind == "f" else float
    return one / (one + np.exp(-np.clip(x, t(_SIGMOID_MIN), t(_SIGMOID_MAX))))


def _tanh_clipped(x: np.ndarray) -> np.ndarray:
    t = x.dtype.type if x.dtype.kind == "f" else float
    e = np.exp(np.minimum(x * t(-2), t(_EXP_MAX_INPUT)))
    # ``(2.0 / (1.0 + exp(tmp))) - 1.0``: double literals, so the rest is double arithmetic
    return (2.0 / (1.0 + e.astype(np.float64)) - 1.0).astype(x.dtype, copy=False)


def _sigmoid_clipped_(x: np.ndarray) -> None:
    """``_sigmoid_clipped`` of a float array in place: the same operations in the same order,
    so the same bits, in five calls that allocate nothing (a GRU step's gates)."""
    t = x.dtype.type
    np.maximum(x, t(_SIGMOID_MIN), out=x)       # np.clip's lower then upper bound; nan stays
    np.minimum(x, t(_SIGMOID_MAX), out=x)
    # x (-1), not np.negative: NumPy 2.4.6's negative writes wrong values into an output of
    # 16 (4-byte items) or 64 bytes' stride, such as a column view of a [n, 4] float32
    # block; the product is the same number (exact)
    np.multiply(x, t(-1), out=x)
    np.exp(x, out=x)
    x += t(1)
    np.divide(t(1), x, out=x)


def _tanh_clipped_(x: np.ndarray) -> None:
    """``_tanh_clipped`` of a float array in place (its operations, so its bits)."""
    t = x.dtype.type
    np.multiply(x, t(-2), out=x)
    np.minimum(x, t(_EXP_MAX_INPUT), out=x)
    np.exp(x, out=x)
    d = np.add(x, np.float64(1.0), dtype=np.float64)     # 1.0 + exp(..) in double
    np.divide(np.float64(2.0), d, out=d)
    # - 1.0 in double, rounded to x's dtype as it is written (astype's rounding)
    np.subtract(d, np.float64(1.0), out=x, casting="same_kind")


_ACTS: Dict[str, Tuple[Callable, Callable]] = {
    "sigmoid": (_sigmoid, lambda y: y * (1.0 - y)),
    "tanh": (np.tanh, lambda y: 1.0 - y * y),
    "relu": (lambda x: np.maximum(x, 0), lambda y: (y > 0).astype(y.dtype)),
    "identity": (lambda x: x, lambda y: np.ones_like(y)),
}
_ACTS["linear"] = _ACTS[""] = _ACTS["identity"]
_CLIPPED_ACTS = dict(_ACTS, sigmoid=(_sigmoid_clipped, _ACTS["sigmoid"][1]),
                     tanh=(_tanh_clipped, _ACTS["tanh"][1]))
# gru_unit stores its activations as ints (fluid's enum)
_ACT_CODES = {0: "identity", 1: "sigmoid", 2: "tanh", 3: "relu"}




def _relu_(x: np.ndarray) -> None:
    np.maximum(x, x.dtype.type(0), out=x)


# f -> the same f in place, for the clipped activations the recurrent kernels run per step
_IN_PLACE: Dict[Callable, Callable[[np.ndarray], None]] = {
    _sigmoid_clipped: _sigmoid_clipped_, _tanh_clipped: _tanh_clipped_,
    _ACTS["relu"][0]: _relu_, _ACTS["identity"][0]: lambda x: None}


def _act(op: str, name: Any, attr: str, clipped: bool = False) -> Tuple[Callable, Callable]:
    """(f, f' through y = f(x)); ``clipped``: fluid's activation_functions.h versions (the
    lstm, lstmp and gru kernels), else the Eigen ones (gru_unit, projections, cudnn_lstm)."""
    if isinstance(name, (int, np.integer)) and not isinstance(name, bool):
        name = _ACT_CODES.get(int(name), name)
    if name not in _ACTS:
        raise ValueError(f"{op}: attribute {attr} must be one of "
                         f"['sigmoid', 'tanh', 'relu', 'identity'], got {name!r}")
    return (_CLIPPED_ACTS if clipped else _ACTS)[name]


# -- LoD schedule -------------------------------------------------------------------------------


class _Schedule:
    """Steps of a LoD batch: ``order`` sorts sequences by length (desc, stable); ``rows[t]`` are
    the input rows of step t of the sorted sequences still running (a prefix of ``order``)."""

    def __init__(self, op: str, lod: Any, n_rows: int, reverse: bool) -> None:
        if not lod:
            raise ValueError(f"{op}: Input has no LoD; feed a LoDTensor "
                             f"(fluid.create_lod_tensor(data, lengths, place)) to a variable "
                             f"declared with lod_level >= 1")
        off = np.asarray(lod[-1], np.int64)
        if off[-1] != n_rows:
            raise ValueError(f"{op}: the LoD of Input covers {off[-1]} rows but Input has "
                             f"{n_rows}")
        lens = np.diff(off)
        self.order = np.argsort(-lens, kind="stable")
        self.n_seq = lens.size
        slens = lens[self.order]
        steps = int(slens[0]) if slens.size else 0
        # all steps at once (a Python loop of NumPy calls per step took a fifth of a GRU's
        # time on one sequence): (t, k) for each sorted sequence k still running at step t,
        # in step-major order -- fluid's batch layout. counts[t] = #(slens > t)
        counts = np.searchsorted(-slens, -np.arange(steps), side="left")
        ends = np.cumsum(counts)
        t = np.repeat(np.arange(steps), counts)
        k = np.arange(t.size) - np.repeat(ends - counts, counts)
        seq = self.order[k]
        self._flat = off[seq] + (lens[seq] - 1 - t if reverse else t)
        ends = ends.tolist()
        self._bounds = list(zip([0] + ends[:-1], ends))
        self.rows: List[np.ndarray] = [self._flat[a:b] for a, b in self._bounds]

    def sort(self, x: Optional[np.ndarray], width: int, dtype: Any) -> np.ndarray:
        """Initial states (one row per sequence) in sorted order; zeros when absent."""
        if x is None:
            return np.zeros((self.n_seq, width), dtype)
        return np.array(x[self.order], dtype=dtype)

    def bounds(self) -> List[Tuple[int, int]]:
        """``(start, end)`` of each step's rows in fluid's batch layout (``batch_order``)."""
        return self._bounds

    def batch_order(self) -> np.ndarray:
        """Input row of each row of fluid's batch layout (step 0's rows, then step 1's, ...)."""
        return self._flat

    @staticmethod
    def unbatch(x: np.ndarray, perm: np.ndarray) -> np.ndarray:
        """Rows of a batch-layout array ``x`` back in Input's row order."""
        out = np.empty_like(x)
        out[perm] = x
        return out

    def unsort(self, x: np.ndarray) -> np.ndarray:
        out = np.empty_like(x)
        out[self.order] = x
        return out


def _check_init(op: str, slot: str, x: Optional[np.ndarray], n_seq: int, width: int) -> None:
    if x is not None and (x.ndim != 2 or x.shape != (n_seq, width)):
        raise ValueError(f"{op}: {slot} must be [{n_seq}, {width}] (one row per sequence of "
                         f"Input), got {list(x.shape)}")


def _infer_hidden_size(op: str, Input: Any, Weight: Any, gates: int, hint: str = "") -> int:
    """D of an ``lstm`` (``gates`` = 4) / ``gru`` / ``gru_unit`` (3) op at build time: checks
    Weight is [D, gates * D] and that Input's width (when known) is gates * D (``hint`` is
    appended to that message)."""
    D = Weight.shape[0]
    if Weight.ndim != 2 or Weight.shape[1] != gates * D:
        raise ValueError(f"{op}: Weight must be [D, {gates}D], got {list(Weight.shape)}")
    if Input.shape[-1] >= 0 and Input.shape[-1] != gates * D:
        raise ValueError(f"{op}: Input width must be {gates} * D = {gates * D}{hint}, got "
                         f"{Input.shape[-1]}")
    return D


# -- LSTM core (lstm, lstmp, cudnn_lstm) -----------------------------------------------------------


class _LSTMCfg:
    def __init__(self, op: str, D: int, Bias: Optional[np.ndarray], use_peepholes: bool,
                 gate_activation: Any, cell_activation: Any, candidate_activation: Any,
                 proj_activation: Any = "identity", cell_clip: float = 0.0,
                 proj_clip: float = 0.0, clipped: bool = False) -> None:
        self.D = D
        self.gate = _act(op, gate_activation, "gate_activation", clipped)
        self.cell = _act(op, cell_activation, "cell_activation", clipped)
        self.cand = _act(op, candidate_activation, "candidate_activation", clipped)
        self.proj = _act(op, proj_activation, "proj_activation")
        self.cell_clip, self.proj_clip = float(cell_clip or 0.0), float(proj_clip or 0.0)
        self.peep = None
        if Bias is not None:
            b = Bias.reshape(-1)
            want = 7 * D if use_peepholes else 4 * D
            if b.size != want:
                raise ValueError(f"{op}: Bias must have {want} elements ([1, {want}] with "
                                 f"use_peepholes={use_peepholes}), got {list(Bias.shape)}")
            if use_peepholes:
                self.peep = (b[4 * D:5 * D], b[5 * D:6 * D], b[6 * D:7 * D])


def _in_place(f: Callable) -> Callable[[np.ndarray], None]:
    """``f`` applied in place: its ``_IN_PLACE`` version, else ``x[...] = f(x)``."""
    fn = _IN_PLACE.get(f)
    if fn is not None:
        return fn

    def apply(x: np.ndarray) -> None:
        x[...] = f(x)
    return apply


def _lstm_forward(G: np.ndarray, rows: Sequence[np.ndarray], rec0: np.ndarray, c0: np.ndarray,
                  W: np.ndarray, cfg: _LSTMCfg, ProjW: Optional[np.ndarray] = None
                  ) -> Dict[str, np.ndarray]:
    """Run the recurrence. ``G`` [R, 4D]: input projections (bias included) by row; ``rec0``
    and ``c0``: sorted initial recurrent state (h, or r for lstmp) and cell. Returns per row:
    ``h``, ``c`` (clipped), ``gates`` (activated, [c~, i, f, o]) and ``r`` for lstmp.

    The plain formulas' operations in their order, so their bits, written in place into
    contiguous rows of batch-layout arrays (a step's h_prev and c_prev are the previous
    step's first rows: the sequences still running are a prefix) and scattered back to
    ``G``'s row order at the end. The gates' column blocks are copied apart once a step, so
    that every other operand is contiguous (a column block of several rows costs NumPy an
    iterator per call): 0.6-0.9x the time of per-step gathers and fresh arrays."""
    D, R = cfg.D, G.shape[0]
    perm = np.concatenate(rows) if len(rows) else np.zeros(0, np.int64)
    dt = G.dtype
    Gb = G[perm]
    GC, GIF, GO = (np.empty((R, k * D), dt) for k in (1, 2, 1))
    Hb, Cb = np.empty((R, D), dt), np.empty((R, D), dt)
    Pb = np.empty((R, rec0.shape[1]), dt) if ProjW is not None else None
    gf, cf, kf = (_in_place(a[0]) for a in (cfg.gate, cfg.cell, cfg.cand))
    pf = _in_place(cfg.proj[0])
    n0 = rows[0].size if len(rows) else 0
    g4, t = np.empty((n0, 4 * D), dt), np.empty((n0, D), dt)      # scratch
    peep = cfg.peep
    rec, c, s = rec0, c0, 0
    for r in rows:
        n = r.size
        e = s + n
        rec, cp, tn, g = rec[:n], c[:n], t[:n], g4[:n]
        np.matmul(rec, W, out=g)
        g += Gb[s:e]
        gc, gif, go = GC[s:e], GIF[s:e], GO[s:e]
        np.copyto(gc, g[:, :D])
        np.copyto(gif, g[:, D:3 * D])
        np.copyto(go, g[:, 3 * D:])
        gi, gfo = gif[:, :D], gif[:, D:]
        if peep is not None:
            gi += np.multiply(cp, peep[0], out=tn)
            gfo += np.multiply(cp, peep[1], out=tn)
        kf(gc)
        gf(gif)                             # i and f in one pass
        cn = Cb[s:e]
        np.multiply(gfo, cp, out=cn)
        cn += np.multiply(gi, gc, out=tn)
        if cfg.cell_clip > 0:
            np.maximum(cn, dt.type(-cfg.cell_clip), out=cn)
            np.minimum(cn, dt.type(cfg.cell_clip), out=cn)
        if peep is not None:
            go += np.multiply(cn, peep[2], out=tn)
        gf(go)
        h = Hb[s:e]
        np.copyto(tn, cn)
        cf(tn)
        np.multiply(go, tn, out=h)
        if ProjW is not None:
            p = Pb[s:e]
            np.matmul(h, ProjW, out=p)
            pf(p)
            if cfg.proj_clip > 0:
                np.maximum(p, dt.type(-cfg.proj_clip), out=p)
                np.minimum(p, dt.type(cfg.proj_clip), out=p)
            rec = p
        else:
            rec = h
        c, s = cn, e
    out = {}
    for key, a in (("h", Hb), ("c", Cb), ("gates", np.concatenate([GC, GIF, GO], axis=1)),
                   ("r", Pb)):
        if a is not None:
            out[key] = np.empty_like(a)
            out[key][perm] = a
    return out


def _lstm_backward(G: np.ndarray, rows: Sequence[np.ndarray], rec0: np.ndarray, c0: np.ndarray,
                   W: np.ndarray, cfg: _LSTMCfg, fw: Dict[str, np.ndarray],
                   dRec: Optional[np.ndarray], dCell: Optional[np.ndarray],
                   ProjW: Optional[np.ndarray] = None) -> Dict[str, Any]:
    """BPTT of ``_lstm_forward``: gradients of the projections ``dG`` [R, 4D], of ``W``, the
    peepholes, ``ProjW`` and of the (sorted) initial states."""
    D, R = cfg.D, G.shape[0]
    H, C, gates = fw["h"], fw["c"], fw["gates"]
    Rec = fw["r"] if ProjW is not None else H
    drec_s = np.zeros_like(rec0)
    dc_s = np.zeros_like(c0)
    dG = np.zeros((R, 4 * D), G.dtype)
    RecPrev = np.zeros((R, rec0.shape[1]), G.dtype)
    dPre = np.zeros((R, rec0.shape[1]), G.dtype) if ProjW is not None else None
    dpeep = [np.zeros(D, G.dtype) for _ in range(3)] if cfg.peep is not None else None
    gd, cf, cd, kd, pd = cfg.gate[1], cfg.cell[0], cfg.cell[1], cfg.cand[1], cfg.proj[1]
    for t in range(len(rows) - 1, -1, -1):
        r = rows[t]
        n = r.size
        if t > 0:
            prev = rows[t - 1][:n]
            c_prev, rec_prev = C[prev], Rec[prev]
        else:
            c_prev, rec_prev = c0[:n], rec0[:n]
        RecPrev[r] = rec_prev
        drec = drec_s[:n].copy()
        if dRec is not None:
            drec += dRec[r]
        if ProjW is not None:
            p = Rec[r]
            dp = drec * pd(p)
            if cfg.proj_clip > 0:
                dp = dp * (np.abs(p) < cfg.proj_clip)
            dPre[r] = dp
            dh = dp @ ProjW.T
        else:
            dh = drec
        cn = C[r]
        g = gates[r]
        cand, i, f, o = g[:, :D], g[:, D:2 * D], g[:, 2 * D:3 * D], g[:, 3 * D:]
        hc = cf(cn)
        dgo = dh * hc * gd(o)
        dc = dc_s[:n] + dh * o * cd(hc)
        if dCell is not None:
            dc = dc + dCell[r]
        if cfg.peep is not None:
            dc = dc + dgo * cfg.peep[2]
            dpeep[2] += (dgo * cn).sum(0)
        if cfg.cell_clip > 0:
            dc = dc * (np.abs(cn) < cfg.cell_clip)
        dgi = dc * cand * gd(i)
        dgf = dc * c_prev * gd(f)
        dgc = dc * i * kd(cand)
        dc_prev = dc * f
        if cfg.peep is not None:
            dc_prev = dc_prev + dgi * cfg.peep[0] + dgf * cfg.peep[1]
            dpeep[0] += (dgi * c_prev).sum(0)
            dpeep[1] += (dgf * c_prev).sum(0)
        dg = np.concatenate([dgc, dgi, dgf, dgo], axis=1)
        dG[r] = dg
        drec_s[:n] = dg @ W.T
        dc_s[:n] = dc_prev
    out = {"dG": dG, "dW": RecPrev.T @ dG, "drec0": drec_s, "dc0": dc_s, "dpeep": dpeep}
    if ProjW is not None:
        out["dProjW"] = H.T @ dPre
    return out


def _bias_grad(dG: np.ndarray, dpeep: Optional[List[np.ndarray]], Bias: np.ndarray
               ) -> np.ndarray:
    parts = [dG.sum(0)] + (list(dpeep) if dpeep is not None else [])
    return np.concatenate(parts).reshape(Bias.shape).astype(Bias.dtype, copy=False)


def _lstm_input_grads(out: Dict[str, np.ndarray], bw: Dict[str, Any], sch: _Schedule,
                      H0: Optional[np.ndarray], C0: Optional[np.ndarray],
                      Bias: Optional[np.ndarray]) -> Dict[str, np.ndarray]:
    """Add to ``out`` the gradients of the optional inputs of ``lstm`` / ``lstmp`` present:
    H0 and C0 (back in Input's sequence order) and Bias (gates, then the peepholes)."""
    if H0 is not None:
        out["H0"] = sch.unsort(bw["drec0"])
    if C0 is not None:
        out["C0"] = sch.unsort(bw["dc0"])
    if Bias is not None:
        out["Bias"] = _bias_grad(bw["dG"], bw["dpeep"], Bias)
    return out


def _lod_out(lod: Any, *slots: str) -> Dict[str, Any]:
    x = (lod or {}).get("Input")
    return {s: x for s in slots}



# -- GRU core (gru, gru_unit) ---------------------------------------------------------------------


def _gru_weights(op: str, W: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """fluid's GRU weight buffer: W_ur [D, 2D] then W_c [D, D], contiguous in memory."""
    D = W.shape[0]
    if W.shape != (D, 3 * D):
        raise ValueError(f"{op}: Weight must be [D, 3D], got {list(W.shape)}")
    flat = W.reshape(-1)
    return flat[:2 * D * D].reshape(D, 2 * D), flat[2 * D * D:].reshape(D, D)


def _gru_step(x: np.ndarray, hp: np.ndarray, Wg: np.ndarray, Wc: np.ndarray, act: Callable,
              gact: Callable, origin: bool) -> Tuple[np.ndarray, ...]:
    D = hp.shape[1]
    ur = gact(x[:, :2 * D] + hp @ Wg)
    u, r = ur[:, :D], ur[:, D:]
    rh = r * hp
    c = act(x[:, 2 * D:] + rh @ Wc)
    h = u * hp + (1 - u) * c if origin else (1 - u) * hp + u * c
    return u, r, c, rh, h


def _gru_batch(Xb: np.ndarray, bounds: Sequence[Tuple[int, int]], h0: np.ndarray,
               Wg: np.ndarray, Wc: np.ndarray, act: Callable, gact: Callable, origin: bool
               ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The GRU recurrence over rows in fluid's batch layout (``Xb``: the projected inputs,
    bias included; ``bounds``: each step's rows, ``_Schedule.bounds``; ``h0``: the sorted
    initial state). Returns the batch-layout ``(gates [u, r, c], r * h_prev, h)``.

    ``_gru_step``'s operations in its order, so its bits, written into the outputs' rows in
    place: a step's rows are contiguous there and its h_prev is the previous step's first
    rows (the sequences still running are a prefix), so a step makes ~20 NumPy calls and no
    gathers (0.6-0.9x the time of ``_gru_step``'s loop; at one sequence a step is all call
    overhead). [u, r] and c are kept apart, so that every operand is contiguous (NumPy takes
    its fast path: a column block of several rows costs an iterator per call) and joined
    into the gates once at the end."""
    R, D = Xb.shape[0], Wg.shape[0]
    one = Xb.dtype.type(1)
    UR, C = np.empty((R, 2 * D), Xb.dtype), np.empty((R, D), Xb.dtype)
    RH = np.empty((R, D), Xb.dtype)
    H = np.empty((R, D), Xb.dtype)
    gact_, act_ = _in_place(gact), _in_place(act)
    scratch = np.empty((bounds[0][1] if bounds else 0, D), Xb.dtype)     # (step 0: the most)
    hp = h0
    for s, e in bounds:
        n = e - s
        hp = hp[:n]
        ur, c = UR[s:e], C[s:e]
        np.matmul(hp, Wg, out=ur)
        ur += Xb[s:e, :2 * D]
        gact_(ur)
        u = ur[:, :D]
        rh = RH[s:e]
        np.multiply(ur[:, D:], hp, out=rh)
        np.matmul(rh, Wc, out=c)
        c += Xb[s:e, 2 * D:]
        act_(c)
        h, t = H[s:e], scratch[:n]
        if origin:                          # u * h_prev + (1 - u) * c
            np.multiply(u, hp, out=h)
            np.subtract(one, u, out=t)
            t *= c
        else:                               # (1 - u) * h_prev + u * c
            np.subtract(one, u, out=h)
            h *= hp
            np.multiply(u, c, out=t)
        h += t
        hp = h
    return np.concatenate([UR, C], axis=1), RH, H


def _gru_step_grad(dh: np.ndarray, hp: np.ndarray, gate: np.ndarray, rh: np.ndarray,
                   Wg: np.ndarray, Wc: np.ndarray, dact: Callable, dgact: Callable,
                   origin: bool) -> Tuple[np.ndarray, np.ndarray]:
    """(d pre-activations [n, 3D] = d of Input rows, d h_prev)."""
    D = hp.shape[1]
    u, r, c = gate[:, :D], gate[:, D:2 * D], gate[:, 2 * D:]
    if origin:
        du, dc, dhp = dh * (hp - c), dh * (1 - u), dh * u
    else:
        du, dc, dhp = dh * (c - hp), dh * u, dh * (1 - u)
    dgc = dc * dact(c)
    drh = dgc @ Wc.T
    dhp = dhp + drh * r
    dgur = np.concatenate([du * dgact(u), drh * hp * dgact(r)], axis=1)
    dhp = dhp + dgur @ Wg.T
    return np.concatenate([dgur, dgc], axis=1), dhp


def _gru_weight_grad(Hp: np.ndarray, RH: np.ndarray, dX: np.ndarray, W: np.ndarray
                     ) -> np.ndarray:
    D = W.shape[0]
    dWg = Hp.T @ dX[:, :2 * D]
    dWc = RH.T @ dX[:, 2 * D:]
    return np.concatenate([dWg.reshape(-1), dWc.reshape(-1)]).reshape(W.shape).astype(
        W.dtype, copy=False)
