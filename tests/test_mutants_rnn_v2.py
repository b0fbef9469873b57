"""Tests written from mutation testing (issue 28, docs/mutation.md) for
``fluidlite/ops/rnn_v2.py`` (Paddle 2.x's ``rnn`` op): its kernel called directly -- the
inter-layer dropout multipliers kept in Reserve, is_test, the gradient with only some of
dOut / dState given (central differences of the op's own float64 forward, random upstream
weights), SequenceLength as [B] or [B, 1] --, against the per-sample reference loop of
tests/ops/test_rnn_v2.py; its build-time specs, the seed convention and every message."""
import re

import numpy as np
import pytest

from fluidlite.core.dtypes import VarType
from fluidlite.core.registry import VarSpec, get_op_def
from tests.ops.test_rnn_v2 import GATES, make_weights, ref_rnn

RNN = get_op_def("rnn")


def spec(shape, dtype="float32"):
    return VarSpec(shape, dtype)


def case(mode, L=2, bidi=True, T=3, B=2, I=3, H=2, seed=1):
    rng = np.random.default_rng(seed)
    dirs = 2 if bidi else 1
    x = rng.uniform(-1, 1, (T, B, I))
    pre = [rng.uniform(-0.5, 0.5, (L * dirs, B, H))]
    if mode == "LSTM":
        pre.append(rng.uniform(-0.5, 0.5, (L * dirs, B, H)))
    attrs = dict(mode=mode, hidden_size=H, num_layers=L, is_bidirec=bidi, input_size=I)
    return x, pre, make_weights(mode, I, H, L, bidi, seed), attrs


# -- forward: dropout, Reserve, is_test -------------------------------------------------------
@pytest.mark.parametrize("mode", ["GRU", "LSTM"])
def test_dropout_multipliers_are_kept_in_reserve_and_applied_between_layers(mode):
    x, pre, ws, attrs = case(mode, L=3, bidi=True)
    got = RNN.forward(x, pre, ws, None, rng=np.random.default_rng(7), dropout_prob=0.4,
                      **attrs)
    drops = got["Reserve"].reshape(2, 3, 2, 4)               # [L-1, T, B, dirs*H]
    vals = set(np.round(np.unique(drops), 12).tolist())
    assert vals == {0.0, round(1 / 0.6, 12)}
    assert got["Reserve"].dtype == x.dtype
    # the reference, layer by layer, with the kept multipliers applied to each layer's output
    n = 2
    out = x
    last_h, last_c = [], []
    for l in range(3):
        lw = [ws[2 * (l * n + d) + j] for d in range(n) for j in range(2)] + \
             [ws[4 * 3 + 2 * (l * n + d) + j] for d in range(n) for j in range(2)]
        h0 = pre[0][l * n:(l + 1) * n]
        c0 = pre[1][l * n:(l + 1) * n] if mode == "LSTM" else None
        out, lh, lc = ref_rnn(mode, out, h0, c0, lw, 2, 1, True)
        last_h.append(lh)
        last_c.append(lc)
        if l < 2:
            out = out * drops[l]
    np.testing.assert_allclose(got["Out"], out, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got["State"][0], np.concatenate(last_h), rtol=1e-12, atol=1e-12)
    if mode == "LSTM":
        np.testing.assert_allclose(got["State"][1], np.concatenate(last_c), rtol=1e-12,
                                   atol=1e-12)
    assert got["DropoutState"].dtype == np.uint8 and got["DropoutState"].size == 0


@pytest.mark.parametrize("kw", [dict(is_test=True), dict(dropout_prob=0.0), dict()])
def test_no_dropout_in_test_mode_or_without_a_probability(kw):
    x, pre, ws, attrs = case("RNN_RELU", L=2, bidi=False)
    kw = dict({"dropout_prob": 0.5}, **kw) if kw.get("is_test") else kw
    got = RNN.forward(x, pre, ws, None, rng=np.random.default_rng(0), **attrs, **kw)
    want, lh, _ = ref_rnn("RNN_RELU", x, pre[0], None, ws, 2, 2, False)
    np.testing.assert_allclose(got["Out"], want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got["State"][0], lh, rtol=1e-12, atol=1e-12)
    assert got["Reserve"].shape == (0,) and got["Reserve"].dtype == x.dtype
    assert len(got["State"]) == 1


def test_a_single_layer_never_drops_and_dropout_one_zeroes_the_next_layers_input():
    x, pre, ws, attrs = case("RNN_TANH", L=1, bidi=True)
    got = RNN.forward(x, pre, ws, None, rng=None, dropout_prob=0.9, **attrs)
    np.testing.assert_allclose(got["Out"], ref_rnn("RNN_TANH", x, pre[0], None, ws, 2, 1,
                                                   True)[0], rtol=1e-12, atol=1e-12)
    assert got["Reserve"].size == 0
    x, pre, ws, attrs = case("GRU", L=2, bidi=False)
    got = RNN.forward(x, pre, ws, None, rng=np.random.default_rng(1), dropout_prob=1.0, **attrs)
    assert got["Reserve"].shape == (3 * 2 * 2,) and not got["Reserve"].any()
    l2 = [ws[2], ws[3], ws[6], ws[7]]
    want, _, _ = ref_rnn("GRU", np.zeros((3, 2, 2)), pre[0][1:], None, l2, 2, 1, False)
    np.testing.assert_allclose(got["Out"], want, rtol=1e-12, atol=1e-12)


def test_float32_is_kept_everywhere():
    x, pre, ws, attrs = case("LSTM", L=2, bidi=True)
    f = lambda a: a.astype(np.float32)                               # noqa: E731
    x, pre, ws = f(x), [f(p) for p in pre], [f(w) for w in ws]
    got = RNN.forward(x, pre, ws, np.array([3, 1]), rng=np.random.default_rng(0),
                      dropout_prob=0.5, **attrs)
    assert got["Out"].dtype == np.float32 and got["Reserve"].dtype == np.float32
    assert all(s.dtype == np.float32 for s in got["State"])
    g = RNN.backward(x, pre, ws, np.array([3, 1]), got["Reserve"], got["Out"], got["State"],
                     **attrs, dropout_prob=0.5)
    assert g["Input"].dtype == np.float32
    assert all(p.dtype == np.float32 for p in g["PreState"])
    assert all(w.dtype == np.float32 for w in g["WeightList"])


def test_sequence_length_as_a_column():
    x, pre, ws, attrs = case("LSTM", L=1, bidi=True, B=3)
    got = RNN.forward(x, pre, ws, np.array([[3], [1], [2]]), rng=None, **attrs)
    want, lh, lc = ref_rnn("LSTM", x, pre[0], pre[1], ws, 2, 1, True, lens=[3, 1, 2])
    np.testing.assert_allclose(got["Out"], want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got["State"][1], lc, rtol=1e-12, atol=1e-12)


# -- backward with partial upstream gradients -------------------------------------------------
def _numeric(fn, arr, eps=1e-6):
    g = np.zeros_like(arr)
    for i in np.ndindex(arr.shape):
        old = arr[i]
        arr[i] = old + eps
        up = fn()
        arr[i] = old - eps
        down = fn()
        arr[i] = old
        g[i] = (up - down) / (2 * eps)
    return g


@pytest.mark.parametrize("mode,which", [("LSTM", "out"), ("LSTM", "h"), ("LSTM", "c"),
                                        ("GRU", "h"), ("RNN_TANH", "out"), ("RNN_RELU", "h")])
@pytest.mark.parametrize("lens", [None, [3, 1]])
def test_gradient_with_only_some_upstream_gradients(mode, which, lens):
    """dOut or one entry of dState given alone (the others None): the gradient of
    sum(that output * P) against central differences of the forward (float64)."""
    x, pre, ws, attrs = case(mode, L=2, bidi=True)
    sl = None if lens is None else np.array(lens)
    rng = np.random.default_rng(3)
    fwd = RNN.forward(x, pre, ws, sl, rng=None, **attrs)
    key = {"out": ("Out", None), "h": ("State", 0), "c": ("State", 1)}[which]
    target = fwd[key[0]] if key[1] is None else fwd[key[0]][key[1]]
    P = rng.standard_normal(target.shape)

    def loss():
        o = RNN.forward(x, pre, ws, sl, rng=None, **attrs)
        t = o[key[0]] if key[1] is None else o[key[0]][key[1]]
        return float((t * P).sum())

    dOut = P if which == "out" else None
    dState = None
    if which != "out":
        dState = [None] * len(pre)
        dState[key[1]] = P
    g = RNN.backward(x, pre, ws, sl, np.zeros(0), dOut, dState, **attrs)
    np.testing.assert_allclose(g["Input"], _numeric(loss, x), rtol=1e-5, atol=1e-7)
    for k, p in enumerate(pre):
        np.testing.assert_allclose(g["PreState"][k], _numeric(loss, p), rtol=1e-5, atol=1e-7)
    for k in (1, 2, 8 + 3, 8 + 6):          # W_hh l0, W_ih l1 d0, b_hh l0 d1, b_ih l1 d1
        np.testing.assert_allclose(g["WeightList"][k], _numeric(loss, ws[k]), rtol=1e-5,
                                   atol=1e-7)


def test_gradient_through_dropout_uses_the_reserve():
    x, pre, ws, attrs = case("RNN_TANH", L=2, bidi=False)
    fwd = RNN.forward(x, pre, ws, None, rng=np.random.default_rng(5), dropout_prob=0.5,
                      **attrs)
    reserve = fwd["Reserve"]
    assert (reserve == 0).any() and (reserve != 0).any()
    P = np.random.default_rng(6).standard_normal(fwd["Out"].shape)
    drops = reserve.reshape(1, 3, 2, 2)

    def loss():                      # the forward with the same multipliers, by the reference
        o1, _, _ = ref_rnn("RNN_TANH", x, pre[0][:1], None, [ws[0], ws[1], ws[4], ws[5]], 2,
                           1, False)
        o2, _, _ = ref_rnn("RNN_TANH", o1 * drops[0], pre[0][1:], None,
                           [ws[2], ws[3], ws[6], ws[7]], 2, 1, False)
        return float((o2 * P).sum())

    g = RNN.backward(x, pre, ws, None, reserve, P, None, dropout_prob=0.5, **attrs)
    np.testing.assert_allclose(g["Input"], _numeric(loss, x), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(g["WeightList"][0], _numeric(loss, ws[0]), rtol=1e-5, atol=1e-7)


# -- build time, attributes, errors -----------------------------------------------------------
@pytest.mark.parametrize("mode", sorted(GATES))
def test_infer_specs(mode):
    n_state = 2 if mode == "LSTM" else 1
    got = RNN.infer(spec([5, -1, 3], "float64"), [spec([4, -1, 6])] * n_state,
                    [spec([1])] * 16, None, mode=mode, hidden_size=6, num_layers=2,
                    is_bidirec=True)
    st = VarSpec((4, -1, 6), VarType.FP64)
    assert got == {"Out": VarSpec((5, -1, 12), VarType.FP64), "State": [st] * n_state,
                   "Reserve": VarSpec((-1,), VarType.FP64),
                   "DropoutState": VarSpec((-1,), VarType.UINT8)}
    got = RNN.infer(spec([5, 2, 3]), [spec([1, 2, 4])] * n_state, [spec([1])] * 4, None,
                    mode=mode, hidden_size=4)
    assert got["Out"] == VarSpec((5, 2, 4), VarType.FP32)
    assert got["State"] == [VarSpec((1, 2, 4), VarType.FP32)] * n_state


def test_infer_and_forward_errors():
    msg = "rnn: Input must be 3-D [seq_len, batch, input_size], got [5, 3]"
    with pytest.raises(ValueError, match=re.escape(msg)):
        RNN.infer(spec([5, 3]), [spec([1, 5, 2])], [spec([1])] * 4, None, mode="GRU")
    with pytest.raises(ValueError, match=re.escape(
            "rnn: attribute mode must be one of ['GRU', 'LSTM', 'RNN_RELU', 'RNN_TANH'], got "
            "'lstm'")):
        RNN.infer(spec([5, 2, 3]), [spec([1])] * 2, [spec([1])] * 4, None, mode="lstm")
    with pytest.raises(ValueError, match=re.escape(
            "rnn: PreState must hold 2 tensor(s) for mode 'LSTM' ([h0, c0]), got 1")):
        RNN.infer(spec([5, 2, 3]), [spec([1])], [spec([1])] * 4, None)      # LSTM default
    with pytest.raises(ValueError, match=re.escape(
            "rnn: PreState must hold 1 tensor(s) for mode 'GRU' ([h0]), got 2")):
        RNN.infer(spec([5, 2, 3]), [spec([1])] * 2, [spec([1])] * 4, None, mode="GRU")
    with pytest.raises(ValueError, match=re.escape(
            "rnn: WeightList must hold 4 * num_layers * dirs = 24 tensors, got 16")):
        RNN.infer(spec([5, 2, 3]), [spec([1])], [spec([1])] * 16, None, mode="RNN_TANH",
                  num_layers=3, is_bidirec=True)
    x, pre, ws, attrs = case("LSTM", L=2, bidi=True)
    with pytest.raises(ValueError, match=re.escape(
            "rnn: PreState[1] must be [4, 2, 2] (num_layers * dirs, batch, hidden_size), got "
            "[4, 2, 3]")):
        RNN.forward(x, [pre[0], np.zeros((4, 2, 3))], ws, None, rng=None, **attrs)
    with pytest.raises(ValueError, match=re.escape(
            "rnn: PreState[0] must be [4, 2, 2] (num_layers * dirs, batch, hidden_size), got "
            "[2, 2, 2]")):
        RNN.forward(x, [pre[0][:2], pre[1]], ws, None, rng=None, **attrs)
    bad = list(ws)
    bad[6] = ws[6][:, :3]                           # layer 1, direction 1: W_ih [8, 4]
    with pytest.raises(ValueError, match=re.escape(
            "rnn: WeightList[6], [7] (layer 1 direction 1) must be [8, 4] and [8, 2], got "
            "[8, 3] and [8, 2]")):
        RNN.forward(x, pre, bad, None, rng=None, **attrs)
    with pytest.raises(ValueError, match=re.escape(
            "rnn: SequenceLength must be [batch] = [2], got [2, 2]")):
        RNN.forward(x, pre, ws, np.ones((2, 2), np.int64), rng=None, **attrs)
    with pytest.raises(ValueError, match=re.escape("rnn: SequenceLength must be [batch] = [2], "
                                                   "got [3]")):
        RNN.backward(x, pre, ws, np.ones(3, np.int64), None, None, None, **attrs)


def test_seed_minus_one_means_not_fixed():
    base = dict(mode="GRU", hidden_size=2, num_layers=1, is_bidirec=False, input_size=3,
                dropout_prob=0.0, is_test=False)
    assert RNN.check_attrs(dict(base, seed=-1))["seed"] == 0
    assert RNN.check_attrs(dict(base, seed=-7))["seed"] == 0
    assert RNN.check_attrs(dict(base, seed=5))["seed"] == 5
    assert RNN.check_attrs(dict(base, seed=0))["seed"] == 0


def test_float32_gradients_without_some_upstream_gradients():
    x, pre, ws, attrs = case("LSTM", L=2, bidi=False)
    f = lambda a: a.astype(np.float32)                               # noqa: E731
    x, pre, ws = f(x), [f(p) for p in pre], [f(w) for w in ws]
    out = RNN.forward(x, pre, ws, None, rng=None, **attrs)
    for dOut, dState in ((None, [out["State"][0], None]), (out["Out"], None),
                         (None, [None, out["State"][1]])):
        g = RNN.backward(x, pre, ws, None, None, dOut, dState, **attrs)
        assert g["Input"].dtype == np.float32
        assert all(p.dtype == np.float32 for p in g["PreState"])
        assert all(w.dtype == np.float32 for w in g["WeightList"])
    # dropout 1 while training: float32 zeros multipliers
    got = RNN.forward(x, pre, ws, None, rng=np.random.default_rng(0), dropout_prob=1.0,
                      **attrs)
    assert got["Reserve"].dtype == np.float32 and got["Out"].dtype == np.float32


def test_lstm_gradient_with_a_single_state_gradient():
    """dState holding only dh (a list of one entry) for LSTM: dc starts at zero."""
    x, pre, ws, attrs = case("LSTM", L=1, bidi=True)
    out = RNN.forward(x, pre, ws, None, rng=None, **attrs)
    P = np.random.default_rng(2).standard_normal(out["State"][0].shape)
    one = RNN.backward(x, pre, ws, None, None, None, [P], **attrs)
    two = RNN.backward(x, pre, ws, None, None, None, [P, None], **attrs)
    np.testing.assert_allclose(one["Input"], two["Input"], rtol=1e-14)
    np.testing.assert_allclose(one["PreState"][1], two["PreState"][1], rtol=1e-14)
    assert np.abs(one["Input"]).max() > 0
