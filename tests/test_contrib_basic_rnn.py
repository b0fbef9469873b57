"""``fluid.contrib.layers`` basic_lstm / basic_gru / BasicLSTMUnit / BasicGRUUnit (fluid 1.8's
contrib/layers/rnn_impl.py) against a NumPy reference: gate order, forget_bias, batch_first,
bidirectional, sequence_length masking, init states, parameter names, gradients."""
from __future__ import annotations

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.contrib.layers import BasicGRUUnit, BasicLSTMUnit, basic_gru, basic_lstm


# -- NumPy reference ---------------------------------------------------------------------------
def _sig(x):
    return 1.0 / (1.0 + np.exp(-x))


def np_lstm_unit(x, h, c, w, b, forget_bias):
    i, j, f, o = np.split(np.concatenate([x, h], 1) @ w + b, 4, axis=1)
    c2 = c * _sig(f + forget_bias) + _sig(i) * np.tanh(j)
    return np.tanh(c2) * _sig(o), c2


def np_gru_unit(x, h, w_g, w_c, b_g, b_c):
    r, u = np.split(_sig(np.concatenate([x, h], 1) @ w_g + b_g), 2, axis=1)
    m = np.tanh(np.concatenate([x, r * h], 1) @ w_c + b_c)
    return u * h + (1 - u) * m


def np_basic_rnn(step, x, inits, params, L, H, lens, bidi, batch_first):
    """``step(x, states, params) -> new states``; the first state is the layer's output."""
    if batch_first:
        x = x.transpose(1, 0, 2)
    T, B, _ = x.shape
    D = 2 if bidi else 1
    inits = [s.reshape(L, D, B, H) for s in inits]
    mask = np.ones((T, B)) if lens is None else \
        (np.arange(T)[:, None] < lens[None, :]).astype("float64")

    def run(xs, ms, d):
        states = [[s[layer, d].astype("float64") for s in inits] for layer in range(L)]
        outs = []
        for t in range(T):
            inp = xs[t]
            for layer in range(L):
                new = step(inp, states[layer], params[d][layer])
                m = ms[t][:, None]
                states[layer] = [n * m + p * (1 - m) for n, p in zip(new, states[layer])]
                inp = states[layer][0]
            outs.append(inp)
        lasts = [np.stack([states[layer][k] for layer in range(L)]) for k in range(len(inits))]
        return np.stack(outs), lasts

    out, lasts = run(x, mask, 0)
    if bidi:
        out_b, lasts_b = run(x[::-1], mask[::-1], 1)
        out = np.concatenate([out, out_b[::-1]], 2)
        lasts = [np.stack([f, b], 1).reshape(L * 2, B, H) for f, b in zip(lasts, lasts_b)]
    if batch_first:
        out = out.transpose(1, 0, 2)
    return [out] + lasts


def _value(scope, name):
    return np.array(scope.find_var(name).get_tensor()).astype("float64")


# -- basic_lstm / basic_gru numerics -----------------------------------------------------------
B, T, I, H, L = 3, 4, 5, 6, 2
LENS = np.array([4, 2, 1], "int32")


def _build_and_run(kind, bidi, batch_first, with_init, with_lens, **kw):
    D = 2 if bidi else 1
    main, startup = fluid.Program(), fluid.Program()
    with fluid.unique_name.guard(), fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, T, I] if batch_first else [T, -1, I], "float32")
        h0 = fluid.data("h0", [L * D, -1, H], "float32") if with_init else None
        c0 = fluid.data("c0", [L * D, -1, H], "float32") if with_init else None
        sl = fluid.data("sl", [-1], "int32") if with_lens else None
        if kind == "lstm":
            outs = basic_lstm(x, h0, c0, H, num_layers=L, sequence_length=sl,
                              bidirectional=bidi, batch_first=batch_first, **kw)
        else:
            outs = basic_gru(x, h0, H, num_layers=L, sequence_length=sl, bidirectional=bidi,
                             batch_first=batch_first, **kw)
    rng = np.random.RandomState(7)
    feed = {"x": rng.randn(*((B, T, I) if batch_first else (T, B, I))).astype("float32")}
    if with_init:
        feed["h0"] = rng.randn(L * D, B, H).astype("float32")
        feed["c0"] = rng.randn(L * D, B, H).astype("float32")
    if with_lens:
        feed["sl"] = LENS
    scope = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(scope):
        exe.run(startup)
        feed = {k: v for k, v in feed.items() if k in main.global_block().vars}
        got = exe.run(main, feed=feed, fetch_list=list(outs))
    return main, scope, feed, got


@pytest.mark.parametrize("bidi", [False, True])
@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("with_init,with_lens", [(True, True), (False, False)])
def test_basic_lstm_matches_numpy(bidi, batch_first, with_init, with_lens):
    main, scope, feed, got = _build_and_run("lstm", bidi, batch_first, with_init, with_lens,
                                            forget_bias=0.5)
    D = 2 if bidi else 1
    params = [[(_value(scope, f"basic_lstm_{tag}{i}/BasicLSTMUnit_0.w_0"),
                _value(scope, f"basic_lstm_{tag}{i}/BasicLSTMUnit_0.b_0")) for i in range(L)]
              for tag in ("layers_", "reverse_layers_")[:D]]
    zeros = np.zeros((L * D, B, H))
    want = np_basic_rnn(lambda x, s, p: np_lstm_unit(x, s[0], s[1], p[0], p[1], 0.5),
                        feed["x"].astype("float64"),
                        [feed.get("h0", zeros), feed.get("c0", zeros)], params, L, H,
                        LENS if with_lens else None, bidi, batch_first)
    assert [g.shape for g in got] == [w.shape for w in want]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("bidi", [False, True])
@pytest.mark.parametrize("batch_first", [True, False])
def test_basic_gru_matches_numpy(bidi, batch_first):
    main, scope, feed, got = _build_and_run("gru", bidi, batch_first, True, True)
    D = 2 if bidi else 1
    params = [[tuple(_value(scope, f"basic_gru_{tag}{i}/BasicGRUUnit_0.{p}")
                     for p in ("w_0", "w_1", "b_0", "b_1")) for i in range(L)]
              for tag in ("layers_", "reverse_layers_")[:D]]
    want = np_basic_rnn(lambda x, s, p: [np_gru_unit(x, s[0], *p)],
                        feed["x"].astype("float64"), [feed["h0"]], params, L, H, LENS, bidi,
                        batch_first)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_masked_steps_keep_the_last_real_state():
    """last_hidden is the state after each sequence's own last step, not the padded end."""
    _, _, feed, (out, last_h, _) = _build_and_run("lstm", False, True, False, True)
    for b, n in enumerate(LENS):
        np.testing.assert_allclose(last_h[-1, b], out[b, n - 1], rtol=1e-6)
        np.testing.assert_allclose(out[b, n:], np.broadcast_to(out[b, n - 1], out[b, n:].shape),
                                   rtol=1e-6)


# -- parameters --------------------------------------------------------------------------------
def test_parameter_names_shapes_and_initializers_are_fluid_18s():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.unique_name.guard(), fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, T, I], "float32")
        basic_lstm(x, None, None, H, num_layers=2, bidirectional=True)
        basic_gru(x, None, H)
    shapes = {p.name: list(p.shape) for p in main.all_parameters()}
    assert shapes == {
        "basic_lstm_layers_0/BasicLSTMUnit_0.w_0": [I + H, 4 * H],
        "basic_lstm_layers_0/BasicLSTMUnit_0.b_0": [4 * H],
        "basic_lstm_layers_1/BasicLSTMUnit_0.w_0": [2 * H, 4 * H],
        "basic_lstm_layers_1/BasicLSTMUnit_0.b_0": [4 * H],
        "basic_lstm_reverse_layers_0/BasicLSTMUnit_0.w_0": [I + H, 4 * H],
        "basic_lstm_reverse_layers_0/BasicLSTMUnit_0.b_0": [4 * H],
        "basic_lstm_reverse_layers_1/BasicLSTMUnit_0.w_0": [2 * H, 4 * H],
        "basic_lstm_reverse_layers_1/BasicLSTMUnit_0.b_0": [4 * H],
        "basic_gru_layers_0/BasicGRUUnit_0.w_0": [I + H, 2 * H],
        "basic_gru_layers_0/BasicGRUUnit_0.w_1": [I + H, H],
        "basic_gru_layers_0/BasicGRUUnit_0.b_0": [2 * H],
        "basic_gru_layers_0/BasicGRUUnit_0.b_1": [H],
    }
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        fluid.Executor(fluid.CPUPlace()).run(startup)
        assert not np.any(_value(scope, "basic_lstm_reverse_layers_1/BasicLSTMUnit_0.b_0"))
        w = _value(scope, "basic_lstm_layers_0/BasicLSTMUnit_0.w_0")
        limit = np.sqrt(6.0 / (I + H + 4 * H))                     # Xavier uniform
        assert np.abs(w).max() <= limit and np.abs(w).max() > limit / 2


def test_named_attrs_get_fluids_suffixes():
    main, startup = fluid.Program(), fluid.Program()
    init = fluid.initializer.Constant(0.1)
    with fluid.unique_name.guard(), fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, T, I], "float32")
        basic_lstm(x, None, None, H, bidirectional=True,
                   param_attr=fluid.ParamAttr(name="lw", initializer=init),
                   bias_attr=fluid.ParamAttr(name="lb"))
        basic_gru(x, None, H, param_attr=fluid.ParamAttr(name="gw"),
                  bias_attr=fluid.ParamAttr(name="gb"))
    names = sorted(p.name for p in main.all_parameters())
    assert names == sorted(["lw_fw_w_0", "lb_fw_b_0", "lw_bw_w_0", "lb_bw_b_0",
                            "gw_fw_w_0_gate", "gw_fw_w_0_candidate", "gb_fw_b_0_gate",
                            "gb_fw_b_0_candidate"])


def test_backward_biases_take_bias_attr():
    """fluid 1.8 gave the backward direction's biases param_attr (fixed here): with a
    uniform-initialised param_attr the backward biases still start at zero."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.unique_name.guard(), fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, T, I], "float32")
        basic_lstm(x, None, None, H, bidirectional=True, param_attr=fluid.ParamAttr(
            initializer=fluid.initializer.Uniform(-0.1, 0.1)))
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        fluid.Executor(fluid.CPUPlace()).run(startup)
        assert not np.any(_value(scope, "basic_lstm_reverse_layers_0/BasicLSTMUnit_0.b_0"))
        assert np.any(_value(scope, "basic_lstm_reverse_layers_0/BasicLSTMUnit_0.w_0"))


# -- the units ---------------------------------------------------------------------------------
def test_units_in_a_static_program_match_numpy():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.unique_name.guard(), fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, I], "float32")
        h = fluid.data("h", [-1, H], "float32")
        c = fluid.data("c", [-1, H], "float32")
        lstm = BasicLSTMUnit("lstm", H, forget_bias=2.0)
        new_h, new_c = lstm(x, h, c)
        gru = BasicGRUUnit("gru", H, bias_attr=fluid.ParamAttr(
            initializer=fluid.initializer.Uniform(-1, 1)))
        g = gru(x, h)
    rng = np.random.RandomState(3)
    feed = {k: rng.randn(B, n).astype("float32") for k, n in (("x", I), ("h", H), ("c", H))}
    scope = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(scope):
        exe.run(startup)
        got = exe.run(main, feed=feed, fetch_list=[new_h, new_c, g])
        w, b = _value(scope, "lstm/BasicLSTMUnit_0.w_0"), _value(scope, "lstm/BasicLSTMUnit_0.b_0")
        gp = [_value(scope, f"gru/BasicGRUUnit_0.{p}") for p in ("w_0", "w_1", "b_0", "b_1")]
    want_h, want_c = np_lstm_unit(feed["x"], feed["h"], feed["c"], w, b, 2.0)
    np.testing.assert_allclose(got[0], want_h, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[1], want_c, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[2], np_gru_unit(feed["x"], feed["h"], *gp), rtol=1e-5,
                               atol=1e-6)


def test_units_apply_the_given_activations():
    """fluid 1.8's BasicLSTMUnit ignored gate_activation / activation (fixed here)."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.unique_name.guard(), fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, I], "float32")
        h = fluid.data("h", [-1, H], "float32")
        c = fluid.data("c", [-1, H], "float32")
        new_h, new_c = BasicLSTMUnit("u", H, gate_activation=fluid.layers.relu,
                                     activation=fluid.layers.softsign, forget_bias=0.0)(x, h, c)
    rng = np.random.RandomState(4)
    feed = {k: rng.randn(B, n).astype("float32") for k, n in (("x", I), ("h", H), ("c", H))}
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        exe = fluid.Executor(fluid.CPUPlace())
        exe.run(startup)
        got_h, got_c = exe.run(main, feed=feed, fetch_list=[new_h, new_c])
        w, b = _value(scope, "u/BasicLSTMUnit_0.w_0"), _value(scope, "u/BasicLSTMUnit_0.b_0")
    relu, softsign = (lambda v: np.maximum(v, 0)), (lambda v: v / (1 + np.abs(v)))
    i, j, f, o = np.split(np.concatenate([feed["x"], feed["h"]], 1) @ w + b, 4, axis=1)
    want_c = feed["c"] * relu(f) + relu(i) * softsign(j)
    np.testing.assert_allclose(got_c, want_c, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_h, softsign(want_c) * relu(o), rtol=1e-5, atol=1e-6)


def test_units_are_dygraph_layers():
    with fluid.dygraph.guard(fluid.CPUPlace()):
        class Model(fluid.dygraph.Layer):
            def __init__(self):
                super().__init__()
                self.cell = BasicLSTMUnit("cell", H)

            def forward(self, x, h, c):
                return self.cell(x, h, c)

        model = Model()
        rng = np.random.RandomState(5)
        x, h, c = (fluid.dygraph.to_variable(rng.randn(B, n).astype("float32"))
                   for n in (I, H, H))
        new_h, new_c = model(x, h, c)
        params = model.parameters()
        assert sorted(p.name for p in params) == ["cell/BasicLSTMUnit_0.b_0",
                                                  "cell/BasicLSTMUnit_0.w_0"]
        w, b = (p.numpy().astype("float64") for p in (model.cell._weight, model.cell._bias))
        want_h, want_c = np_lstm_unit(x.numpy(), h.numpy(), c.numpy(), w, b, 1.0)
        np.testing.assert_allclose(new_h.numpy(), want_h, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(new_c.numpy(), want_c, rtol=1e-5, atol=1e-6)
        loss = fluid.layers.reduce_mean(new_h)
        loss.backward()
        assert model.cell._weight.gradient() is not None
        gru = BasicGRUUnit("g", H)
        assert gru(x, h).shape == [B, H]
        assert len(gru.parameters()) == 4


# -- training ----------------------------------------------------------------------------------
def test_gradient_matches_finite_differences():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.unique_name.guard(), fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 3, 2], "float32")
        sl = fluid.data("sl", [-1], "int64")
        out, h, c = basic_lstm(x, None, None, 3, num_layers=2, sequence_length=sl)
        loss = fluid.layers.reduce_sum(fluid.layers.square(out)) + fluid.layers.reduce_sum(c)
        grads = fluid.backward.append_backward(loss)
    wname = "basic_lstm_layers_0/BasicLSTMUnit_0.w_0"
    (grad_var,) = [g for p, g in grads if p.name == wname]
    rng = np.random.RandomState(6)
    feed = {"x": rng.randn(2, 3, 2).astype("float32"), "sl": np.array([3, 2], "int64")}
    scope = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(scope):
        exe.run(startup)
        test_prog = main.clone(for_test=True)
        analytic = exe.run(main, feed=feed, fetch_list=[grad_var])[0]
        tensor = scope.find_var(wname).get_tensor()
        w0 = np.array(tensor).copy()
        eps = 1e-2
        for idx in [(0, 0), (1, 5), (4, 11)]:
            vals = []
            for sign in (1, -1):
                w = w0.copy()
                w[idx] += sign * eps
                tensor.set(w, fluid.CPUPlace())
                vals.append(exe.run(test_prog, feed=feed, fetch_list=[loss])[0].item())
            tensor.set(w0, fluid.CPUPlace())
            numeric = (vals[0] - vals[1]) / (2 * eps)
            assert abs(numeric - analytic[idx]) < 2e-2 * max(1.0, abs(numeric)), idx


def test_ptb_style_language_model_trains():
    """The model zoo's PTB LM shape: embedding -> basic_lstm (init states fed, forget_bias 0,
    dropout) -> fc -> softmax loss, trained with Adam; the loss goes down."""
    vocab, emb, hidden, layers_, steps = 20, 8, 8, 2, 5
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 1
    with fluid.unique_name.guard(), fluid.program_guard(main, startup):
        words = fluid.data("words", [-1, steps], "int64")
        target = fluid.data("target", [-1, steps, 1], "int64")
        h0 = fluid.data("h0", [layers_, -1, hidden], "float32")
        c0 = fluid.data("c0", [layers_, -1, hidden], "float32")
        x = fluid.embedding(words, size=[vocab, emb])
        attr = fluid.ParamAttr(initializer=fluid.initializer.Uniform(-0.1, 0.1))
        out, last_h, last_c = basic_lstm(x, h0, c0, hidden, num_layers=layers_,
                                         dropout_prob=0.1, param_attr=attr, forget_bias=0.0)
        logits = fluid.layers.fc(fluid.layers.reshape(out, [-1, hidden]), vocab)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(
            logits, fluid.layers.reshape(target, [-1, 1])))
        fluid.optimizer.Adam(learning_rate=0.05).minimize(loss)
    rng = np.random.RandomState(0)
    seq = np.arange(steps + 1)[None, :] + rng.randint(0, vocab, (16, 1))
    feed = {"words": (seq[:, :-1] % vocab).astype("int64"),
            "target": (seq[:, 1:] % vocab).astype("int64")[:, :, None],
            "h0": np.zeros((layers_, 16, hidden), "float32"),
            "c0": np.zeros((layers_, 16, hidden), "float32")}
    scope = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(scope):
        exe.run(startup)
        losses = [exe.run(main, feed=feed, fetch_list=[loss])[0].item() for _ in range(30)]
        hs = exe.run(main, feed=feed, fetch_list=[last_h])[0]
    assert losses[-1] < 0.5 * losses[0], losses
    assert hs.shape == (layers_, 16, hidden)


# -- errors ------------------------------------------------------------------------------------
def test_argument_errors():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, T, I], "float32")
        with pytest.raises(ValueError, match="input must be 3-D"):
            basic_lstm(fluid.data("x2", [-1, I], "float32"), None, None, H)
        with pytest.raises(TypeError, match="input must be a Variable"):
            basic_gru(np.zeros((B, T, I)), None, H)
        with pytest.raises((ValueError, TypeError), match="hidden_size"):
            basic_gru(x, None, 0)
        with pytest.raises((ValueError, TypeError), match="num_layers"):
            basic_lstm(x, None, None, H, num_layers=0)
        with pytest.raises(ValueError, match="last dimension of the input"):
            BasicGRUUnit("u", H)(fluid.data("x3", [-1, -1], "float32"),
                                 fluid.data("h3", [-1, H], "float32"))
    with fluid.dygraph.guard(fluid.CPUPlace()):
        xv = fluid.dygraph.to_variable(np.zeros((B, T, I), "float32"))
        with pytest.raises(RuntimeError, match="in dygraph mode call BasicLSTMUnit"):
            basic_lstm(xv, None, None, H)
