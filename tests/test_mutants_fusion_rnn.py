"""Tests written from mutation testing (issue 28, docs/mutation.md) for
``fluidlite/ops/fusion_rnn.py``: fusion_lstm, fused_embedding_fc_lstm, fusion_gru and
attention_lstm, their kernels called directly with their LoD, against the float64
per-sequence LSTM / GRU loops of tests/ops/test_rnn.py (written from fluid 1.8's lstm / gru
kernels) and an attention-LSTM loop written here from attention_lstm_op.cc -- every
activation, reversed sequences, empty sequences, initial states, the XX / AttentionedX
outputs, float32 kept -- and their build-time rules and error messages."""
import re

import numpy as np
import pytest

from fluidlite.core.dtypes import VarType
from fluidlite.core.registry import VarSpec, get_op_def
from tests.ops.test_rnn import ACT, ref_gru, ref_lstm

LENS = [3, 1, 0, 4, 2]


def op(name):
    return get_op_def(name)


def offsets(lens):
    return tuple(int(v) for v in np.concatenate([[0], np.cumsum(list(lens))]))


def rand(shape, seed=0, scale=0.5):
    return np.random.default_rng(seed).uniform(-scale, scale, shape)


def spec(shape, dtype="float32", lod_level=0):
    return VarSpec(shape, dtype, lod_level)


LOD = {"X": (offsets(LENS),)}


# -- fusion_lstm ------------------------------------------------------------------------------
@pytest.mark.parametrize("peep,reverse,acts", [
    (True, False, ("sigmoid", "tanh", "tanh")), (False, True, ("sigmoid", "tanh", "tanh")),
    (True, True, ("tanh", "relu", "identity")), (False, False, ("relu", "identity", "sigmoid"))])
@pytest.mark.parametrize("init", [False, True])
def test_fusion_lstm_against_fc_then_an_lstm_loop(peep, reverse, acts, init):
    M, D, T = 4, 3, sum(LENS)
    x, wx, wh = rand((T, M), 1), rand((M, 4 * D), 2), rand((D, 4 * D), 3)
    bias = rand((1, (7 if peep else 4) * D), 4)
    h0 = rand((5, D), 5) if init else None
    c0 = rand((5, D), 6) if init else None
    gate, cell, cand = acts
    got = op("fusion_lstm").forward(x, wx, wh, bias, h0, c0, lod=LOD, use_peepholes=peep,
                                    is_reverse=reverse, gate_activation=gate,
                                    cell_activation=cell, candidate_activation=cand)
    want_h, want_c = ref_lstm(x @ wx, LENS, wh, bias, h0, c0, peep=peep, reverse=reverse,
                              gate=gate, cell=cell, cand=cand)
    np.testing.assert_allclose(got["Hidden"], want_h, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got["Cell"], want_c, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got["XX"], x @ wx + bias[:, :4 * D], rtol=1e-12, atol=1e-12)
    assert got["lod"] == {"Hidden": LOD["X"], "Cell": LOD["X"], "XX": LOD["X"]}


def test_fusion_lstm_defaults_and_float32():
    M, D, T = 2, 2, sum(LENS)
    x, wx, wh = rand((T, M), 1), rand((M, 4 * D), 2), rand((D, 4 * D), 3)
    bias = rand((1, 7 * D), 4)
    got = op("fusion_lstm").forward(x, wx, wh, bias, lod=LOD)    # peepholes, sigmoid / tanh
    want_h, want_c = ref_lstm(x @ wx, LENS, wh, bias, peep=True)
    np.testing.assert_allclose(got["Hidden"], want_h, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got["Cell"], want_c, rtol=1e-10, atol=1e-12)
    f32 = [a.astype(np.float32) for a in (x, wx, wh, bias)]
    got = op("fusion_lstm").forward(*f32, lod=LOD)
    assert {got[k].dtype for k in ("Hidden", "Cell", "XX")} == {np.dtype(np.float32)}
    np.testing.assert_allclose(got["Hidden"], want_h, rtol=1e-4, atol=1e-5)


def test_fusion_lstm_kernel_errors():
    M, D, T = 2, 2, sum(LENS)
    x, wx, wh, b = rand((T, M), 1), rand((M, 4 * D), 2), rand((D, 4 * D), 3), rand((1, 7 * D))
    msg = ("fusion_lstm: H0 and C0 must be given together (fluid: \"Input(Cell) and "
           "Input(Hidden) of LSTM should not be null at the same time\")")
    for h0, c0 in ((rand((5, D)), None), (None, rand((5, D)))):
        with pytest.raises(ValueError, match=re.escape(msg)):
            op("fusion_lstm").forward(x, wx, wh, b, h0, c0, lod=LOD)
    with pytest.raises(ValueError, match=re.escape(
            "fusion_lstm: input X has no LoD; feed a LoDTensor")):
        op("fusion_lstm").forward(x, wx, wh, b)
    with pytest.raises(ValueError, match=re.escape(
            "fusion_lstm: H0 must be [5, 2] (one row per sequence of Input), got [4, 2]")):
        op("fusion_lstm").forward(x, wx, wh, b, rand((4, D)), rand((5, D)), lod=LOD)
    with pytest.raises(ValueError, match=re.escape(
            "fusion_lstm: C0 must be [5, 2] (one row per sequence of Input), got [5, 3]")):
        op("fusion_lstm").forward(x, wx, wh, b, rand((5, D)), rand((5, 3)), lod=LOD)


def test_fusion_lstm_infer():
    infer = op("fusion_lstm").infer
    x = spec([-1, 5], "float64", 1)
    got = infer(x, spec([5, 12]), spec([3, 12]), spec([1, 21]), None, None)
    h = VarSpec((-1, 3), VarType.FP64, 1)
    assert got == {"Hidden": h, "Cell": h, "XX": VarSpec((-1, 12), VarType.FP64, 1)}
    got = infer(spec([9, 5], "float32", 2), spec([5, 12]), spec([3, 12]), spec([1, 12]), None,
                None, use_peepholes=False)
    assert got["Hidden"] == VarSpec((9, 3), VarType.FP32, 2)
    assert got["XX"] == VarSpec((9, 12), VarType.FP32, 2)
    # unknown dims are accepted
    assert infer(spec([-1, -1], lod_level=1), spec([-1, 12]), spec([3, 12]), spec([1, -1]),
                 None, None)["XX"].shape == (-1, 12)
    m = "fusion_lstm: "
    with pytest.raises(ValueError, match=re.escape(m + "WeightH must be [D, 4D], got [3, 9]")):
        infer(x, spec([5, 12]), spec([3, 9]), spec([1, 21]), None, None)
    with pytest.raises(ValueError, match=re.escape(m + "WeightH must be [D, 4D], got [3]")):
        infer(x, spec([5, 12]), spec([3]), spec([1, 21]), None, None)
    for xs, wxs in (([-1, 5, 1], [5, 12]), ([-1, 5], [5, 12, 1]), ([-1, 5], [4, 12])):
        with pytest.raises(ValueError, match=re.escape(
                m + f"X must be [T, M] and WeightX [M, 4D], got X {xs} and WeightX {wxs}")):
            infer(spec(xs, lod_level=1), spec(wxs), spec([3, 12]), spec([1, 21]), None, None)
    with pytest.raises(ValueError, match=re.escape(
            m + "WeightX must be [M, 4D] = [M, 12], got [5, 16]")):
        infer(x, spec([5, 16]), spec([3, 12]), spec([1, 21]), None, None)
    for b, peep, want in (([1, 12], True, 21), ([1, 21], False, 12), ([2, 21], True, 21),
                          ([21], True, 21)):
        with pytest.raises(ValueError, match=re.escape(
                m + f"Bias must be [1, {want}] (4D, plus 3D peephole weights when "
                f"use_peepholes), got {b}")):
            infer(x, spec([5, 12]), spec([3, 12]), spec(b), None, None, use_peepholes=peep)


# -- fused_embedding_fc_lstm ------------------------------------------------------------------
@pytest.mark.parametrize("peep,reverse", [(False, False), (True, True)])
def test_fused_embedding_fc_lstm_against_an_lstm_loop(peep, reverse):
    D, V, T = 2, 7, sum(LENS)
    emb, wh = rand((V, 4 * D), 1), rand((D, 4 * D), 2)
    bias = rand((1, (7 if peep else 4) * D), 3)
    ids = np.random.default_rng(4).integers(0, V, (T, 1))
    ids[0, 0], ids[-1, 0] = 0, V - 1
    h0, c0 = rand((5, D), 5), rand((5, D), 6)
    lod = {"Ids": (offsets(LENS),)}
    got = op("fused_embedding_fc_lstm").forward(ids, emb, wh, bias, h0, c0, lod=lod,
                                                use_peepholes=peep, is_reverse=reverse,
                                                gate_activation="tanh", cell_activation="relu",
                                                candidate_activation="sigmoid")
    # Embeddings already hold the fc bias: ref_lstm adds Bias[:4D], so take it out first
    want_h, want_c = ref_lstm(emb[ids[:, 0]] - bias[0, :4 * D], LENS, wh, bias, h0, c0,
                              peep=peep, reverse=reverse, gate="tanh", cell="relu",
                              cand="sigmoid")
    np.testing.assert_allclose(got["Hidden"], want_h, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got["Cell"], want_c, rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(got["XX"], emb[ids[:, 0]])
    assert got["lod"]["Hidden"] == lod["Ids"] and got["lod"]["Cell"] == lod["Ids"]


def test_fused_embedding_fc_lstm_errors_and_infer():
    D, V = 2, 7
    emb, wh, b = rand((V, 4 * D), 1), rand((D, 4 * D), 2), rand((1, 7 * D), 3)
    f = op("fused_embedding_fc_lstm").forward
    lod = {"Ids": ((0, 2, 3),)}
    for ids, first in (([[1], [7], [9]], 7), ([[1], [-1], [9]], -1)):
        with pytest.raises(ValueError, match=re.escape(
                f"fused_embedding_fc_lstm: Ids must lie in [0, 7) (the rows of Embeddings), got "
                f"{first}")):
            f(np.array(ids), emb, wh, b, lod=lod)
    with pytest.raises(ValueError, match=re.escape("fused_embedding_fc_lstm: H0 and C0 must be "
                                                   "given together")):
        f(np.array([[1], [2], [3]]), emb, wh, b, None, rand((2, D)), lod=lod)
    with pytest.raises(ValueError, match=re.escape("fused_embedding_fc_lstm: input Ids has no "
                                                   "LoD")):
        f(np.array([[1], [2], [3]]), emb, wh, b, lod={"X": ((0, 3),)})
    infer = op("fused_embedding_fc_lstm").infer
    ids = spec([-1, 1], "int64", 1)
    got = infer(ids, spec([V, 8], "float64"), spec([2, 8]), spec([1, 14]), None, None)
    h = VarSpec((-1, 2), VarType.FP64, 1)
    assert got == {"Hidden": h, "Cell": h, "XX": VarSpec((-1, 8), VarType.FP64, 1)}
    assert infer(ids, spec([V, -1]), spec([2, 8]), spec([1, 8]), None, None,
                 use_peepholes=False)["Hidden"] == VarSpec((-1, 2), VarType.FP32, 1)
    m = "fused_embedding_fc_lstm: "
    for e in ([V, 6], [V * 8]):
        with pytest.raises(ValueError, match=re.escape(
                m + f"Embeddings must be [V, 4D] = [V, 8], got {e}")):
            infer(ids, spec(e), spec([2, 8]), spec([1, 14]), None, None)
    with pytest.raises(ValueError, match=re.escape(m + "WeightH must be [D, 4D], got [2, 6]")):
        infer(ids, spec([V, 8]), spec([2, 6]), spec([1, 14]), None, None)
    with pytest.raises(ValueError, match=re.escape(m + "Bias must be [1, 8]")):
        infer(ids, spec([V, 8]), spec([2, 8]), spec([1, 14]), None, None, use_peepholes=False)


# -- fusion_gru -------------------------------------------------------------------------------
@pytest.mark.parametrize("reverse,h0,bias,acts", [
    (False, True, True, ("tanh", "sigmoid")), (True, False, False, ("tanh", "sigmoid")),
    (True, True, False, ("relu", "tanh")), (False, False, True, ("identity", "relu"))])
def test_fusion_gru_against_fc_then_a_gru_loop(reverse, h0, bias, acts):
    M, D, T = 4, 3, sum(LENS)
    x, wx, wh = rand((T, M), 1), rand((M, 3 * D), 2), rand((D, 3 * D), 3)
    b = rand((1, 3 * D), 4) if bias else None
    h = rand((5, D), 5) if h0 else None
    got = op("fusion_gru").forward(x, h, wx, wh, b, lod=LOD, activation=acts[0],
                                   gate_activation=acts[1], is_reverse=reverse)
    want = ref_gru(x @ wx, LENS, wh, b if bias else np.zeros(3 * D), h, reverse=reverse,
                   act=acts[0], gate=acts[1])
    np.testing.assert_allclose(got["Hidden"], want, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got["XX"], x @ wx + (b if bias else 0), rtol=1e-12, atol=1e-12)
    assert got["lod"] == {"Hidden": LOD["X"], "XX": LOD["X"]}


def test_fusion_gru_defaults_float32_and_errors():
    M, D, T = 2, 2, sum(LENS)
    x, wx, wh = rand((T, M), 1), rand((M, 3 * D), 2), rand((D, 3 * D), 3)
    got = op("fusion_gru").forward(x, None, wx, wh, None, lod=LOD)
    np.testing.assert_allclose(got["Hidden"], ref_gru(x @ wx, LENS, wh, np.zeros(3 * D)),
                               rtol=1e-10, atol=1e-12)
    got = op("fusion_gru").forward(*(a.astype(np.float32) for a in (x,)), None,
                                   wx.astype(np.float32), wh.astype(np.float32), None, lod=LOD)
    assert got["Hidden"].dtype == np.float32 and got["XX"].dtype == np.float32
    with pytest.raises(ValueError, match=re.escape("fusion_gru: input X has no LoD")):
        op("fusion_gru").forward(x, None, wx, wh, None)
    with pytest.raises(ValueError, match=re.escape(
            "fusion_gru: H0 must be [5, 2] (one row per sequence of Input), got [5, 3]")):
        op("fusion_gru").forward(x, rand((5, 3)), wx, wh, None, lod=LOD)
    with pytest.raises(ValueError, match=re.escape(
            "fusion_gru: attribute gate_activation must be one of")):
        op("fusion_gru").forward(x, None, wx, wh, None, lod=LOD, gate_activation="gelu")
    with pytest.raises(ValueError, match=re.escape(
            "fusion_gru: attribute activation must be one of")):
        op("fusion_gru").forward(x, None, wx, wh, None, lod=LOD, activation="softmax")


def test_fusion_gru_infer():
    infer = op("fusion_gru").infer
    got = infer(spec([-1, 4], "float64", 1), None, spec([4, 9]), spec([3, 9]), None)
    assert got == {"Hidden": VarSpec((-1, 3), VarType.FP64, 1),
                   "XX": VarSpec((-1, 9), VarType.FP64, 1)}
    assert infer(spec([7, -1], "float32", 2), None, spec([4, 9]), spec([3, 9]),
                 spec([1, 9]))["Hidden"] == VarSpec((7, 3), VarType.FP32, 2)
    assert infer(spec([-1, 4], lod_level=1), None, spec([-1, 9]), spec([3, 9]),
                 None)["XX"].shape == (-1, 9)
    m = "fusion_gru: "
    with pytest.raises(ValueError, match=re.escape(m + "WeightH must be [D, 3D], got [3, 12]")):
        infer(spec([-1, 4], lod_level=1), None, spec([4, 9]), spec([3, 12]), None)
    for xs, wxs in (([-1, 4, 1], [4, 9]), ([-1, 4], [4, 9, 1]), ([-1, 4], [4, 12]),
                    ([-1, 4], [5, 9])):
        with pytest.raises(ValueError, match=re.escape(
                m + f"X must be [T, M] and WeightX [M, 3D] = [4, 9], got X {xs} and WeightX "
                f"{wxs}")):
            infer(spec(xs, lod_level=1), None, spec(wxs), spec([3, 9]), None)


# -- attention_lstm ---------------------------------------------------------------------------
def ref_attention_lstm(x, lens, c0, h0, aw, ab, sc, sb, lw, lb, gate="sigmoid", cell="tanh",
                       cand="tanh"):
    """attention_lstm_op.cc per sequence and step: relu(x W_x + b + c_prev W_c), then
    relu(e * scalar + scalar_bias) when the scalar is given, softmax over the sequence, the
    attention-pooled x, the LSTM step with gates [f, i, o, c~] (no h_prev term at the first
    step without H0)."""
    M, D = x.shape[1], lw.shape[1] // 4
    hs, cs, at = [], [], 0
    for k, n in enumerate(lens):
        xs, c, h = x[at:at + n], c0[k], (None if h0 is None else h0[k])
        for _ in range(n):
            e = np.array([xs[j] @ aw[:M, 0] + (ab[0, 0] if ab is not None else 0)
                          + c @ aw[M:, 0] for j in range(n)])
            e = np.maximum(e, 0)
            if sc is not None:
                e = np.maximum(e * sc[0, 0] + (sb[0, 0] if sb is not None else 0), 0)
            a = np.exp(e - e.max())
            a = a / a.sum()
            g = (a @ xs) @ lw[D:] + lb.reshape(-1)
            if h is not None:
                g = g + h @ lw[:D]
            f, i, o, cd = (g[q * D:(q + 1) * D] for q in range(4))
            c = ACT[gate](f) * c + ACT[gate](i) * ACT[cand](cd)
            h = ACT[gate](o) * ACT[cell](c)
            hs.append(h)
            cs.append(c)
        at += n
    return np.array(hs).reshape(-1, D), np.array(cs).reshape(-1, D)


@pytest.mark.parametrize("with_h0,with_bias,scalar,acts", [
    (True, True, "both", ("sigmoid", "tanh", "tanh")),
    (False, False, None, ("sigmoid", "tanh", "tanh")),
    (True, False, "scalar", ("tanh", "relu", "identity")),
    (False, True, "both", ("relu", "identity", "sigmoid"))])
def test_attention_lstm_against_a_loop(with_h0, with_bias, scalar, acts):
    M, D, lens = 3, 2, [2, 0, 3, 1]
    T = sum(lens)
    x, c0 = rand((T, M), 1, 1.0), rand((4, D), 2, 1.0)
    h0 = rand((4, D), 3, 1.0) if with_h0 else None
    aw = rand((M + D, 1), 4, 1.0)
    ab = np.array([[0.3]]) if with_bias else None
    sc = np.array([[1.7]]) if scalar else None
    sb = np.array([[-0.2]]) if scalar == "both" else None
    lw, lb = rand((D + M, 4 * D), 8, 1.0), rand((1, 4 * D), 9, 1.0)
    lod = {"X": (offsets(lens),)}
    got = op("attention_lstm").forward(x, c0, h0, aw, ab, sc, sb, lw, lb, lod=lod,
                                       gate_activation=acts[0], cell_activation=acts[1],
                                       candidate_activation=acts[2])
    want_h, want_c = ref_attention_lstm(x, lens, c0, h0, aw, ab, sc, sb, lw, lb, *acts)
    np.testing.assert_allclose(got["Hidden"], want_h, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got["Cell"], want_c, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got["AttentionedX"],
                               x @ aw[:M] + (0.3 if with_bias else 0), rtol=1e-12)
    assert got["lod"] == {"Hidden": lod["X"], "Cell": lod["X"]}


def test_attention_lstm_defaults_float32_and_errors():
    M, D, lens = 2, 2, [3, 2]
    x, c0 = rand((5, M), 1, 1.0), rand((2, D), 2, 1.0)
    aw, lw, lb = rand((M + D, 1), 3, 1.0), rand((D + M, 4 * D), 4, 1.0), rand((1, 4 * D), 5)
    lod = {"X": (offsets(lens),)}
    f = op("attention_lstm").forward
    got = f(x, c0, None, aw, None, None, None, lw, lb, lod=lod)
    want_h, want_c = ref_attention_lstm(x, lens, c0, None, aw, None, None, None, lw, lb)
    np.testing.assert_allclose(got["Hidden"], want_h, rtol=1e-10, atol=1e-12)
    got = f(*(a.astype(np.float32) for a in (x, c0)), None, aw.astype(np.float32), None, None,
            None, lw.astype(np.float32), lb.astype(np.float32), lod=lod)
    assert {got[k].dtype for k in ("Hidden", "Cell", "AttentionedX")} == {np.dtype(np.float32)}
    np.testing.assert_allclose(got["Hidden"], want_h, rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match=re.escape("attention_lstm: input X has no LoD")):
        f(x, c0, None, aw, None, None, None, lw, lb)
    with pytest.raises(ValueError, match=re.escape(
            "attention_lstm: C0 must be [2, 2] (one row per sequence of Input), got [3, 2]")):
        f(x, rand((3, D)), None, aw, None, None, None, lw, lb, lod=lod)
    with pytest.raises(ValueError, match=re.escape(
            "attention_lstm: H0 must be [2, 2] (one row per sequence of Input), got [2, 3]")):
        f(x, c0, rand((2, 3)), aw, None, None, None, lw, lb, lod=lod)
    for attr in ("gate_activation", "cell_activation", "candidate_activation"):
        with pytest.raises(ValueError, match=re.escape(
                f"attention_lstm: attribute {attr} must be one of")):
            f(x, c0, None, aw, None, None, None, lw, lb, lod=lod, **{attr: "elu"})


def test_attention_lstm_infer():
    infer = op("attention_lstm").infer
    x = spec([-1, 3], "float64", 1)
    got = infer(x, spec([-1, 2]), None, spec([5, 1]), None, None, None, spec([5, 8]),
                spec([1, 8]))
    h = VarSpec((-1, 2), VarType.FP64, 1)
    assert got == {"Hidden": h, "Cell": h, "AttentionedX": VarSpec((-1, 1), VarType.FP64)}
    assert infer(spec([6, -1], "float32", 2), spec([-1, 2]), None, spec([9, 1]), None, None,
                 None, spec([5, 8]), spec([1, 8]))["Hidden"] == VarSpec((6, 2), VarType.FP32, 2)
    m = "attention_lstm: "
    for xs, ws in (([-1, 3, 1], [5, 8]), ([-1, 3], [5, 8, 1])):
        with pytest.raises(ValueError, match=re.escape(
                m + f"X must be [T, M] and LSTMWeight [D + M, 4D], got {xs} and {ws}")):
            infer(spec(xs, lod_level=1), spec([-1, 2]), None, spec([5, 1]), None, None, None,
                  spec(ws), spec([1, 8]))
    with pytest.raises(ValueError, match=re.escape(
            m + "LSTMWeight must be [D + M, 4D] = [5, 8], got [4, 8]")):
        infer(x, spec([-1, 2]), None, spec([5, 1]), None, None, None, spec([4, 8]),
              spec([1, 8]))
    for aw in ([5], [4, 1], [5, 2], [1, 5]):
        with pytest.raises(ValueError, match=re.escape(
                m + f"AttentionWeight must be [M + D, 1] = [5, 1], got {aw}")):
            infer(x, spec([-1, 2]), None, spec(aw), None, None, None, spec([5, 8]),
                  spec([1, 8]))


# -- second pass: the survivors of the first rerun ---------------------------------------------
def clipped_sigmoid(x):
    """fluid's sigmoid in the fused kernels (jit refer VSigmoid, activation_functions.h):
    the input clipped to [SIGMOID_THRESHOLD_MIN, SIGMOID_THRESHOLD_MAX] = [-40, 13]."""
    return 1 / (1 + np.exp(-np.clip(x, -40.0, 13.0)))


@pytest.fixture
def fluid_sigmoid(monkeypatch):
    """The LSTM / GRU references of tests/ops/test_rnn.py with fluid's clipped sigmoid."""
    monkeypatch.setitem(ACT, "sigmoid", clipped_sigmoid)


def test_fusion_lstm_saturated_gates_use_fluids_clipped_sigmoid(fluid_sigmoid):
    """Pre-activations far beyond 13: a saturated gate is 1 / (1 + e^-13), not 1 (a
    difference of 2e-6 that the cell state accumulates)."""
    M, D, T = 3, 2, sum(LENS)
    x, wx, wh = rand((T, M), 1, 1.0), rand((M, 4 * D), 2, 30.0), rand((D, 4 * D), 3, 0.5)
    bias = rand((1, 7 * D), 4, 0.5)
    got = op("fusion_lstm").forward(x, wx, wh, bias, lod=LOD, gate_activation="sigmoid",
                                    cell_activation="identity",
                                    candidate_activation="identity")
    want_h, want_c = ref_lstm(x @ wx, LENS, wh, bias, peep=True, gate="sigmoid",
                              cell="identity", cand="identity")
    assert np.abs(x @ wx).max() > 20
    np.testing.assert_allclose(got["Cell"], want_c, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got["Hidden"], want_h, rtol=1e-12, atol=1e-12)


def test_fusion_gru_saturated_activations_use_fluids_clipped_sigmoid(fluid_sigmoid):
    M, D, T = 3, 2, sum(LENS)
    x, wx, wh = rand((T, M), 1, 1.0), rand((M, 3 * D), 2, 30.0), rand((D, 3 * D), 3, 0.5)
    got = op("fusion_gru").forward(x, None, wx, wh, None, lod=LOD, activation="sigmoid",
                                   gate_activation="sigmoid")
    want = ref_gru(x @ wx, LENS, wh, np.zeros(3 * D), act="sigmoid", gate="sigmoid")
    np.testing.assert_allclose(got["Hidden"], want, rtol=1e-12, atol=1e-12)
    # the update gate alone saturated, the candidate not
    wu = wx * np.array([1.0] * (2 * D) + [0.0] * D)
    got = op("fusion_gru").forward(x, None, wu, wh, None, lod=LOD, activation="identity",
                                   gate_activation="sigmoid")
    want = ref_gru(x @ wu, LENS, wh, np.zeros(3 * D), act="identity", gate="sigmoid")
    np.testing.assert_allclose(got["Hidden"], want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("slot", ["gate_activation", "cell_activation",
                                  "candidate_activation"])
def test_attention_lstm_saturated_activations_use_fluids_clipped_sigmoid(slot, fluid_sigmoid):
    M, D, lens = 2, 2, [3, 2]
    x, c0 = rand((5, M), 1, 1.0), rand((2, D), 2, 20.0)
    aw = rand((M + D, 1), 3, 1.0)
    lw, lb = rand((D + M, 4 * D), 4, 30.0), rand((1, 4 * D), 5, 1.0)
    acts = {"gate_activation": "identity", "cell_activation": "identity",
            "candidate_activation": "identity", slot: "sigmoid"}
    got = op("attention_lstm").forward(x, c0, None, aw, None, None, None, lw, lb,
                                       lod={"X": (offsets(lens),)}, **acts)
    want_h, want_c = ref_attention_lstm(x, lens, c0, None, aw, None, None, None, lw, lb,
                                        acts["gate_activation"], acts["cell_activation"],
                                        acts["candidate_activation"])
    np.testing.assert_allclose(got["Cell"], want_c, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got["Hidden"], want_h, rtol=1e-12, atol=1e-12)


def test_attention_lstm_softmax_is_shifted_by_its_maximum():
    """fluid's attention_lstm subtracts the maximum score before exp: scores of several
    hundred give a finite softmax (the unshifted exp overflows)."""
    M, D, lens = 2, 2, [3, 2]
    x, c0 = rand((5, M), 1, 1.0) + 2, rand((2, D), 2, 1.0)
    aw = np.full((M + D, 1), 150.0)
    lw, lb = rand((D + M, 4 * D), 4, 0.5), rand((1, 4 * D), 5, 0.5)
    lod = {"X": (offsets(lens),)}
    with np.errstate(over="raise", invalid="raise"):
        got = op("attention_lstm").forward(x, c0, None, aw, None, None, None, lw, lb, lod=lod)
    want_h, want_c = ref_attention_lstm(x, lens, c0, None, aw, None, None, None, lw, lb)
    assert np.isfinite(got["Hidden"]).all()
    np.testing.assert_allclose(got["Hidden"], want_h, rtol=1e-10, atol=1e-12)


def test_kernel_errors_name_the_fused_op():
    M, D, T = 2, 2, sum(LENS)
    x, wx, wh, b = rand((T, M), 1), rand((M, 4 * D), 2), rand((D, 4 * D), 3), rand((1, 7 * D))
    with pytest.raises(ValueError, match=re.escape(
            "fusion_lstm: attribute gate_activation must be one of")):
        op("fusion_lstm").forward(x, wx, wh, b, lod=LOD, gate_activation="gelu")
    with pytest.raises(ValueError, match=re.escape(
            "fusion_lstm: the LoD of Input covers 10 rows but Input has 9")):
        op("fusion_lstm").forward(x[:9], wx, wh, b, lod=LOD)
    with pytest.raises(ValueError, match=re.escape(
            "fusion_gru: the LoD of Input covers 10 rows but Input has 9")):
        op("fusion_gru").forward(x[:9], None, rand((M, 3 * D)), rand((D, 3 * D)), None,
                                 lod=LOD)
    with pytest.raises(ValueError, match=re.escape(
            "fusion_gru: Weight must be [D, 3D], got [2, 5]")):
        op("fusion_gru").forward(x, None, rand((M, 5)), rand((D, 5)), None, lod=LOD)


def test_fused_embedding_fc_lstm_runs_forward_by_default():
    D, V, T = 2, 5, sum(LENS)
    emb, wh, bias = rand((V, 4 * D), 1), rand((D, 4 * D), 2), rand((1, 4 * D), 3)
    ids = np.random.default_rng(4).integers(0, V, (T, 1))
    got = op("fused_embedding_fc_lstm").forward(ids, emb, wh, bias,
                                                lod={"Ids": (offsets(LENS),)},
                                                use_peepholes=False)
    want_h, _ = ref_lstm(emb[ids[:, 0]] - bias[0], LENS, wh, bias, peep=False)
    np.testing.assert_allclose(got["Hidden"], want_h, rtol=1e-10, atol=1e-12)


def test_infer_accepts_unknown_dims_and_declares_the_input_dtype():
    lstm = op("fusion_lstm").infer
    assert lstm(spec([-1, 5], lod_level=1), spec([-1, 12]), spec([3, 12]), spec([1, 21]),
                None, None)["Hidden"].shape == (-1, 3)
    att = op("attention_lstm").infer
    got = att(spec([-1, 3], "float32", 1), spec([-1, 2]), None, spec([5, 1]), None, None,
              None, spec([-1, 8]), spec([1, 8]))
    assert got["AttentionedX"] == VarSpec((-1, 1), VarType.FP32)
    gru = op("fusion_gru").infer
    got = gru(spec([7, 4], "float32", 2), None, spec([4, 9]), spec([3, 9]), None)
    assert got["XX"] == VarSpec((7, 9), VarType.FP32, 2)


@pytest.mark.parametrize("name,args,msg", [
    ("fusion_lstm", ([-1, 0], [3, 12], [3, 12], [1, 21]), "X must be [T, M] and WeightX"),
    ("fusion_lstm", ([-1, 5], [0, 12], [3, 12], [1, 21]), "X must be [T, M] and WeightX"),
    ("fusion_lstm", ([-1, 5], [5, 0], [3, 12], [1, 21]), "WeightX must be [M, 4D] = [M, 12]"),
    ("fusion_lstm", ([-1, 5], [5, 12], [0, 4], [1, 21]), "WeightH must be [D, 4D], got [0, 4]"),
    ("fusion_lstm", ([-1, 5], [5, 12], [3, 0], [1, 21]), "WeightH must be [D, 4D], got [3, 0]"),
    ("fusion_lstm", ([-1, 5], [5, 12], [3, 12], [1, 0]), "Bias must be [1, 21]"),
    ("fused_embedding_fc_lstm", ([-1, 1], [7, 0], [2, 8], [1, 14]),
     "Embeddings must be [V, 4D] = [V, 8], got [7, 0]"),
    ("fusion_gru", ([-1, 4], [4, 0], [3, 9]), "X must be [T, M] and WeightX [M, 3D]"),
    ("fusion_gru", ([-1, 0], [4, 9], [3, 9]), "X must be [T, M] and WeightX [M, 3D]"),
    ("fusion_gru", ([-1, 4], [0, 9], [3, 9]), "X must be [T, M] and WeightX [M, 3D]"),
    ("attention_lstm", ([-1, 0], [5, 1], [5, 8]), "LSTMWeight must be [D + M, 4D] = [2, 8]"),
    ("attention_lstm", ([-1, 3], [5, 1], [0, 8]), "LSTMWeight must be [D + M, 4D] = [5, 8]"),
    ("attention_lstm", ([-1, 0], [3, 1], [2, 8]), "AttentionWeight must be [M + D, 1] = [2, 1]"),
])
def test_infer_checks_zero_sized_dims(name, args, msg):
    infer = op(name).infer
    if name in ("fusion_lstm", "fused_embedding_fc_lstm"):
        x, w1, wh, b = args
        dt = "int64" if "embedding" in name else "float32"
        call = lambda: infer(spec(x, dt, 1), spec(w1), spec(wh), spec(b), None, None)  # noqa
    elif name == "fusion_gru":
        x, wx, wh = args
        call = lambda: infer(spec(x, lod_level=1), None, spec(wx), spec(wh), None)  # noqa: E731
    else:
        x, aw, lw = args
        call = lambda: infer(spec(x, lod_level=1), spec([-1, 2]), None, spec(aw), None,  # noqa
                             None, None, spec(lw), spec([1, 8]))
    with pytest.raises(ValueError, match=re.escape(f"{name}: {msg}")):
        call()
