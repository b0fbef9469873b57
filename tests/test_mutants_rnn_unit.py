"""Tests written from the mutation run of ``fluidlite/ops/rnn_unit.py`` (issue 28,
docs/mutation.md): ``gru_unit`` / ``lstm_unit`` build-time checks and messages, their defaults
(fluid 1.8: gru_unit activation 2 = tanh, gate_activation 1 = sigmoid, origin_mode False;
lstm_unit forget_bias 0), gradients without one of the upstream gradients, and the messages
of a bad activation code. References: one-step float64 formulas written here (lstm_unit_op.h:
columns [i, f, o, g]; gru_unit_op.h) and central differences."""
import numpy as np
import pytest

from fluidlite.core.dtypes import VarType
from fluidlite.core.registry import VarSpec, get_op_def

F64 = VarType.FP64
GRU = get_op_def("gru_unit")
LSTM = get_op_def("lstm_unit")


def _sig(x):
    return 1.0 / (1.0 + np.exp(-x))


def _gru_inputs(seed=0, N=3, D=2):
    rng = np.random.default_rng(seed)
    return (rng.uniform(-1, 1, (N, 3 * D)), rng.uniform(-1, 1, (N, D)),
            rng.uniform(-1, 1, (D, 3 * D)), rng.uniform(-1, 1, (1, 3 * D)))


def _gru_ref(x, h, w, b):
    """fluid's gru_unit with its defaults: u, r = sigmoid(x_ur + b_ur + h W_ur),
    c = tanh(x_c + b_c + (r h) W_c), Hidden = (1 - u) h + u c."""
    D = h.shape[1]
    flat = w.reshape(-1)
    w_ur, w_c = flat[:2 * D * D].reshape(D, 2 * D), flat[2 * D * D:].reshape(D, D)
    g = x + b
    ur = _sig(g[:, :2 * D] + h @ w_ur)
    u, r = ur[:, :D], ur[:, D:]
    c = np.tanh(g[:, 2 * D:] + (r * h) @ w_c)
    return (1 - u) * h + u * c


def test_gru_unit_defaults_forward_and_backward():
    x, h, w, b = _gru_inputs()
    out = GRU.forward(x, h, w, b)
    np.testing.assert_allclose(out["Hidden"], _gru_ref(x, h, w, b), rtol=0, atol=1e-14)
    d = np.random.default_rng(1).standard_normal(h.shape)
    args = (x, h, w, b, out["Gate"], out["ResetHiddenPrev"], None, None, d)
    got = GRU.backward(*args)
    want = GRU.backward(*args, activation=2, gate_activation=1, origin_mode=False)
    for k in want:
        np.testing.assert_array_equal(got[k], want[k])
    # dHidden against central differences of the default forward
    num = np.zeros_like(h)
    for idx in np.ndindex(h.shape):
        old = h[idx]
        h[idx] = old + 1e-6
        hi = (_gru_ref(x, h, w, b) * d).sum()
        h[idx] = old - 1e-6
        lo = (_gru_ref(x, h, w, b) * d).sum()
        h[idx] = old
        num[idx] = (hi - lo) / 2e-6
    np.testing.assert_allclose(got["HiddenPrev"], num, rtol=1e-6, atol=1e-8)
    # no upstream gradient: zeros
    g = GRU.backward(x, h, w, b, out["Gate"], out["ResetHiddenPrev"], None, None, None)
    for k in ("Input", "HiddenPrev", "Weight", "Bias"):
        assert g[k].shape == {"Input": x, "HiddenPrev": h, "Weight": w, "Bias": b}[k].shape
        assert not g[k].any()


@pytest.mark.parametrize("attr", ["activation", "gate_activation"])
def test_gru_unit_gradient_names_a_bad_activation_code(attr):
    x, h, w, b = _gru_inputs()
    out = GRU.forward(x, h, w, b)
    with pytest.raises(ValueError, match=rf"^gru_unit: attribute {attr} must be one of "
                                         r"\['sigmoid', 'tanh', 'relu', 'identity'\], got 7$"):
        GRU.backward(x, h, w, b, out["Gate"], out["ResetHiddenPrev"], None, None, h,
                     **{attr: 7})
    with pytest.raises(ValueError, match=r"^gru_unit: Weight must be \[D, 3D\], got \[2, 4\]$"):
        GRU.backward(x, h, w[:, :4], b, out["Gate"], out["ResetHiddenPrev"], None, None, h)
    with pytest.raises(ValueError, match=rf"^gru_unit: attribute {attr} must be one of "
                                         r"\['sigmoid', 'tanh', 'relu', 'identity'\], got 7$"):
        GRU.forward(x, h, w, b, **{attr: 7})
    with pytest.raises(ValueError, match=r"^gru_unit: Weight must be \[D, 3D\], got \[2, 4\]$"):
        GRU.forward(x, h, w[:, :4], b)


def test_gru_unit_infer_checks_and_specs():
    x, hp, w = VarSpec((-1, 6), F64), VarSpec((-1, 2), F64), VarSpec((2, 6), F64)
    out = GRU.infer(x, hp, w, None)
    assert out == {"Gate": VarSpec((-1, 6), F64), "ResetHiddenPrev": VarSpec((-1, 2), F64),
                   "Hidden": VarSpec((-1, 2), F64)}
    assert GRU.infer(x, VarSpec((-1, -1), F64), w, None)["Hidden"].shape == (-1, 2)
    with pytest.raises(ValueError, match=r"^gru_unit: HiddenPrev must be \[N, 2\], got "
                                         r"\[-1, 3\]$"):
        GRU.infer(x, VarSpec((-1, 3), F64), w, None)
    with pytest.raises(ValueError, match=r"^gru_unit: Weight must be \[D, 3D\], got \[2, 4\]$"):
        GRU.infer(x, hp, VarSpec((2, 4), F64), None)


def _lstm_ref(x, c_prev, forget_bias=0.0):
    D = c_prev.shape[1]
    i, f = _sig(x[:, :D]), _sig(x[:, D:2 * D] + forget_bias)
    o, g = _sig(x[:, 2 * D:3 * D]), np.tanh(x[:, 3 * D:])
    c = f * c_prev + i * g
    return c, o * np.tanh(c)


def test_lstm_unit_defaults_and_partial_upstream_gradients():
    rng = np.random.default_rng(2)
    x, c0 = rng.uniform(-1, 1, (3, 8)), rng.uniform(-1, 1, (3, 2))
    out = LSTM.forward(x, c0)
    c, h = _lstm_ref(x, c0)
    np.testing.assert_allclose(out["C"], c, rtol=0, atol=1e-14)
    np.testing.assert_allclose(out["H"], h, rtol=0, atol=1e-14)
    dc, dh = rng.standard_normal(c.shape), rng.standard_normal(c.shape)
    got = LSTM.backward(x, c0, out["C"], dc, dh)
    want = LSTM.backward(x, c0, out["C"], dc, dh, forget_bias=0.0)
    for k in want:
        np.testing.assert_array_equal(got[k], want[k])
    zero = np.zeros_like(c)
    for a, b in (((None, dh), (zero, dh)), ((dc, None), (dc, zero))):
        g1, g2 = LSTM.backward(x, c0, out["C"], *a), LSTM.backward(x, c0, out["C"], *b)
        for k in g2:
            np.testing.assert_array_equal(g1[k], g2[k])
    # dX against central differences of H only (dC absent)
    num = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        old = x[idx]
        x[idx] = old + 1e-6
        hi = (_lstm_ref(x, c0)[1] * dh).sum()
        x[idx] = old - 1e-6
        lo = (_lstm_ref(x, c0)[1] * dh).sum()
        x[idx] = old
        num[idx] = (hi - lo) / 2e-6
    np.testing.assert_allclose(LSTM.backward(x, c0, out["C"], None, dh)["X"], num,
                               rtol=1e-6, atol=1e-8)


def test_lstm_unit_infer_checks_each_condition():
    ok = LSTM.infer(VarSpec((-1, 8), F64), VarSpec((-1, 2), F64))
    assert ok == {"C": VarSpec((-1, 2), F64), "H": VarSpec((-1, 2), F64)}
    assert LSTM.infer(VarSpec((3, -1), F64), VarSpec((3, 2), F64))["H"].shape == (3, 2)
    for xs, cs in (((3, 8, 1), (3, 2)), ((3, 8), (6,)), ((-1, 6), (-1, 2)), ((3, 6), (3, 2))):
        with pytest.raises(ValueError, match=r"^lstm_unit: X must be \[N, 4D\] and C_prev "
                                             rf"\[N, D\], got X \[{', '.join(map(str, xs))}\] "
                                             rf"and C_prev \[{', '.join(map(str, cs))}\]$"):
            LSTM.infer(VarSpec(xs, F64), VarSpec(cs, F64))


# -- cudnn_lstm ---------------------------------------------------------------------------------
CUDNN = get_op_def("cudnn_lstm")


def _cudnn_inputs(T=2, B=2, I=2, H=2, L=2, bidi=False, seed=0, dtype=np.float64):
    from fluidlite.ops.rnn_unit import cudnn_lstm_weight_size
    rng = np.random.default_rng(seed)
    dirs = 2 if bidi else 1
    n = cudnn_lstm_weight_size(I, H, L, bidi)
    return (rng.uniform(-1, 1, (T, B, I)).astype(dtype),
            rng.uniform(-1, 1, (L * dirs, B, H)).astype(dtype),
            rng.uniform(-1, 1, (L * dirs, B, H)).astype(dtype),
            rng.uniform(-0.5, 0.5, n).astype(dtype))


@pytest.mark.parametrize("bidi", [False, True])
def test_cudnn_lstm_dropout_gradient_uses_the_forward_masks(bidi):
    x, h0, c0, w = _cudnn_inputs(bidi=bidi, L=3)
    attrs = dict(dropout_prob=0.4, is_bidirec=bidi, input_size=2, hidden_size=2, num_layers=3)
    run = lambda x_: CUDNN.forward(x_, h0, c0, w, rng=np.random.default_rng(11), **attrs)  # noqa
    fw = run(x)
    assert fw["Reserve"].size == 2 * 2 * 2 * (4 if bidi else 2)    # (L-1) x T x B x dirs H
    assert (fw["Reserve"] == 0).any()
    d = np.random.default_rng(12).standard_normal(fw["Out"].shape)
    g = CUDNN.backward(x, h0, c0, w, fw["Reserve"], d, None, None, **attrs)
    num = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        old = x[idx]
        x[idx] = old + 1e-6
        hi = (run(x)["Out"] * d).sum()
        x[idx] = old - 1e-6
        lo = (run(x)["Out"] * d).sum()
        x[idx] = old
        num[idx] = (hi - lo) / 2e-6
    np.testing.assert_allclose(g["Input"], num, rtol=1e-6, atol=1e-8)


def test_cudnn_lstm_gradient_without_dout_and_of_zero_steps():
    x, h0, c0, w = _cudnn_inputs(L=1)
    attrs = dict(input_size=2, hidden_size=2, num_layers=1)
    dh = np.random.default_rng(1).standard_normal(h0.shape)
    a = CUDNN.backward(x, h0, c0, w, None, None, dh, None, **attrs)
    b = CUDNN.backward(x, h0, c0, w, None, np.zeros((2, 2, 2)), dh, np.zeros_like(c0), **attrs)
    for k in b:
        np.testing.assert_array_equal(a[k], b[k])
    # no time steps: the final states are the initial ones, and so are their gradients
    e = np.zeros((0, 2, 2))
    fw = CUDNN.forward(e, h0, c0, w, **attrs)
    np.testing.assert_array_equal(fw["LastH"], h0)
    np.testing.assert_array_equal(fw["LastC"], c0)
    dc = np.random.default_rng(2).standard_normal(c0.shape)
    g = CUDNN.backward(e, h0, c0, w, None, None, dh, dc, **attrs)
    np.testing.assert_array_equal(g["InitH"], dh)
    np.testing.assert_array_equal(g["InitC"], dc)
    assert g["Input"].shape == (0, 2, 2) and not g["W"].any()
    g = CUDNN.backward(e, h0, c0, w, None, None, None, None, **attrs)
    assert g["InitH"].shape == h0.shape and not g["InitH"].any() and not g["InitC"].any()


def test_cudnn_lstm_defaults_and_dtypes():
    # fluid 1.8's layers.lstm op defaults: input_size 10, hidden_size 100, one layer, one
    # direction, no dropout
    x, h0, c0, w = _cudnn_inputs(T=1, B=1, I=10, H=100, L=1, dtype=np.float32)
    fw = CUDNN.forward(x, h0, c0, w)
    explicit = dict(dropout_prob=0.0, is_bidirec=False, input_size=10, hidden_size=100,
                    num_layers=1, is_test=False, seed=0)
    fw2 = CUDNN.forward(x, h0, c0, w, **explicit)
    np.testing.assert_array_equal(fw["Out"], fw2["Out"])
    d = np.ones_like(fw["Out"])
    g = CUDNN.backward(x, h0, c0, w, fw["Reserve"], d, None, None)
    g2 = CUDNN.backward(x, h0, c0, w, fw["Reserve"], d, None, None, **explicit)
    for k in g2:
        np.testing.assert_array_equal(g[k], g2[k])
        assert g[k].dtype == np.float32



def test_cudnn_lstm_dropout_masks_reserve_and_state_out():
    x, h0, c0, w = _cudnn_inputs(T=3, B=4, I=2, H=2, L=2, dtype=np.float32)
    attrs = dict(input_size=2, hidden_size=2, num_layers=2)
    fw = CUDNN.forward(x, h0, c0, w, rng=np.random.default_rng(3), dropout_prob=0.4, **attrs)
    r = fw["Reserve"]
    # upscale_in_train: kept entries are 1 / (1 - p), dropped ones 0; one mask between layers
    assert r.dtype == np.float32 and r.shape == (1 * 3 * 4 * 2,)
    np.testing.assert_allclose(np.unique(r), [0.0, 1 / 0.6], rtol=1e-6)
    assert fw["StateOut"].dtype == np.uint8 and fw["StateOut"].shape == (0,)
    # every unit dropped: the second layer sees zeros, no division by zero
    with np.errstate(all="raise"):
        fw1 = CUDNN.forward(x, h0, c0, w, rng=np.random.default_rng(3), dropout_prob=1.0, **attrs)
    assert fw1["Reserve"].shape == r.shape and not fw1["Reserve"].any()
    assert fw1["Reserve"].dtype == np.float32
    zero_in = CUDNN.forward(np.zeros_like(x), h0, c0, w, **dict(attrs, num_layers=2))
    assert np.isfinite(fw1["Out"]).all() and zero_in["Out"].shape == fw1["Out"].shape
    # no dropout: p = 0, inference, or a single layer
    for kw in (dict(dropout_prob=0.0), dict(dropout_prob=0.4, is_test=True)):
        got = CUDNN.forward(x, h0, c0, w, rng=np.random.default_rng(3), **kw, **attrs)
        assert got["Reserve"].shape == (0,) and got["Reserve"].dtype == np.float32
    w1 = _cudnn_inputs(T=3, B=4, I=2, H=2, L=1, dtype=np.float32)[3]
    got = CUDNN.forward(x, h0[:1], c0[:1], w1, rng=np.random.default_rng(3), dropout_prob=0.4,
                        input_size=2, hidden_size=2, num_layers=1)
    assert got["Reserve"].size == 0


def test_cudnn_lstm_seed_minus_one_means_not_fixed():
    assert CUDNN.check_attrs({"seed": -1})["seed"] == 0
    assert CUDNN.check_attrs({"seed": 7})["seed"] == 7
    assert CUDNN.check_attrs({})["seed"] == 0


def test_cudnn_lstm_checks_name_what_is_wrong():
    F32 = VarType.FP32
    from fluidlite.ops.rnn_unit import cudnn_lstm_weight_size
    n = cudnn_lstm_weight_size(3, 2, 2, True)
    ok = dict(is_bidirec=True, input_size=3, hidden_size=2, num_layers=2)
    x, w, st = VarSpec((5, 4, 3), F32), VarSpec((n,), F32), VarSpec((4, 4, 2), F32)
    out = CUDNN.infer(x, st, st, w, **ok)
    assert out == {"Out": VarSpec((5, 4, 4), F32), "LastH": VarSpec((4, 4, 2), F32),
                   "LastC": VarSpec((4, 4, 2), F32), "Reserve": VarSpec((-1,), F32),
                   "StateOut": VarSpec((-1,), VarType.UINT8)}
    unknown = VarSpec((-1, -1, -1), F32)
    assert CUDNN.infer(VarSpec((-1, -1, 3), F32), unknown, unknown, VarSpec((-1,), F32),
                       **ok)["Out"].shape == (-1, -1, 4)
    with pytest.raises(ValueError, match=r"^cudnn_lstm: Input must be 3-D \[seq_len, batch, "
                                         r"input_size\], got \[5, 3\]$"):
        CUDNN.infer(VarSpec((5, 3), F32), st, st, w, **ok)
    with pytest.raises(ValueError, match=r"^cudnn_lstm: Input's last dimension 2 != input_size "
                                         r"3$"):
        CUDNN.infer(VarSpec((5, 4, 2), F32), st, st, w, **ok)
    for slot, bad in (("InitH", (2, 4, 2)), ("InitC", (4, 4, 3)), ("InitH", (4, 2)),
                      ("InitC", (2, -1, 2))):
        specs = {"InitH": st, "InitC": st}
        specs[slot] = VarSpec(bad, F32)
        with pytest.raises(ValueError, match=rf"^cudnn_lstm: {slot} must be \[num_layers \* dirs "
                                             rf"= 4, batch, 2\], got \[{', '.join(map(str, bad))}"
                                             r"\]$"):
            CUDNN.infer(x, specs["InitH"], specs["InitC"], w, **ok)
    xs, h0, c0, wv = _cudnn_inputs(T=2, B=3, I=3, H=2, L=2, bidi=True)
    with pytest.raises(ValueError, match=r"^cudnn_lstm: Input's last dimension 3 != input_size "
                                         r"4$"):
        CUDNN.forward(xs, h0, c0, wv, **dict(ok, input_size=4))
    with pytest.raises(ValueError, match=rf"^cudnn_lstm: W holds {n - 1} elements, expected "
                                         rf"{n}$"):
        CUDNN.forward(xs, h0, c0, wv[:-1], **ok)
    with pytest.raises(ValueError, match=r"^cudnn_lstm: InitH/InitC must be \[4, 3, 2\], got "
                                         r"\[2, 3, 2\]$"):
        CUDNN.forward(xs, h0[:2], c0, wv, **ok)


def test_cudnn_lstm_float32_gradients_without_dout_or_dlastc():
    x, h0, c0, w = _cudnn_inputs(T=2, B=2, I=2, H=2, L=1, dtype=np.float32)
    attrs = dict(input_size=2, hidden_size=2, num_layers=1)
    dh = np.ones_like(h0)
    g = CUDNN.backward(x, h0, c0, w, None, None, dh, None, **attrs)
    for k in ("Input", "InitH", "InitC", "W"):
        assert g[k].dtype == np.float32, k
