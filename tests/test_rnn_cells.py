"""Cell API (GRUCell, LSTMCell, rnn, birnn) and decoding (BasicDecoder with the three helpers,
BeamSearchDecoder, dynamic_decode): values against NumPy loops written from fluid's formulas,
static programs (StaticRNN / While) equal to dygraph Python loops, numeric float64 gradients
through several steps, and argument errors."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.testing import assert_grads_close, numeric_grad

L = fluid.layers
B, T, D, H, V = 2, 4, 3, 5, 7


def sig(x):
    return 1 / (1 + np.exp(-x))


def rand(*shape, seed=0, scale=0.5):
    return np.random.default_rng(seed).uniform(-scale, scale, shape)


def init(arr):
    return fluid.ParamAttr(initializer=fluid.initializer.NumpyArrayInitializer(arr))


def np_attr(name, arr):
    return fluid.ParamAttr(name=name, initializer=fluid.initializer.NumpyArrayInitializer(arr))


GRU_W = [rand(D + H, 2 * H, seed=1), rand(D + H, H, seed=2), rand(2 * H, seed=3),
         rand(H, seed=4)]
LSTM_W = [rand(D + H, 4 * H, seed=5), rand(4 * H, seed=6)]


def ref_gru_cell(x, h, w=GRU_W):
    g = sig(np.concatenate([x, h], 1) @ w[0] + w[2])
    r, u = g[:, :H], g[:, H:]
    c = np.tanh(np.concatenate([x, r * h], 1) @ w[1] + w[3])
    return u * h + (1 - u) * c


def ref_lstm_cell(x, h, c, w=LSTM_W, forget_bias=1.0):
    g = np.concatenate([x, h], 1) @ w[0] + w[1]
    i, j, f, o = np.split(g, 4, axis=1)
    c = c * sig(f + forget_bias) + sig(i) * np.tanh(j)
    return np.tanh(c) * sig(o), c


def ref_rnn(step, x, states, lens=None, reverse=False):
    """x [B, T, D]; step(x_t, states) -> (out, new_states) with NumPy arrays."""
    outs = [None] * x.shape[1]
    steps = range(x.shape[1] - 1, -1, -1) if reverse else range(x.shape[1])
    for t in steps:
        out, new = step(x[:, t], states)
        if lens is not None:
            keep = (t < lens)[:, None]
            new = [np.where(keep, n, s) for n, s in zip(new, states)]
        states = new
        outs[t] = out
    return np.stack(outs, 1), states


# -- cells ------------------------------------------------------------------------------------
def _gru_params_named():
    # GRUCell(param_attr named "g_w") creates g_w_gate / g_w_candidate, g_b_gate / g_b_candidate
    return {"g_w_gate": GRU_W[0], "g_w_candidate": GRU_W[1], "g_b_gate": GRU_W[2],
            "g_b_candidate": GRU_W[3]}


def _set_params(scope, values):
    for name, arr in values.items():
        scope.find_var(name).get_tensor().set(np.asarray(arr, "float32"), fluid.CPUPlace())


def test_cell_parameter_names_follow_fluid():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [None, D])
        g = L.GRUCell(H)
        lc = L.LSTMCell(H)
        g(x, g.get_initial_states(x))
        g(x, g.get_initial_states(x))                # second call reuses the parameters
        lc(x, lc.get_initial_states(x))
    params = {p.name: tuple(p.shape) for p in main.global_block().all_parameters()}
    assert params == {"GRUCell_0.w_0": (D + H, 2 * H), "GRUCell_0.w_1": (D + H, H),
                      "GRUCell_0.b_0": (2 * H,), "GRUCell_0.b_1": (H,),
                      "LSTMCell_0.w_0": (D + H, 4 * H), "LSTMCell_0.b_0": (4 * H,)}


def _rnn_program(kind, reverse, with_lens, dtype="float32"):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, T, D], dtype=dtype)
        lens = fluid.data("lens", [None], dtype="int64") if with_lens else None
        if kind == "gru":
            cell = L.GRUCell(H, param_attr=fluid.ParamAttr(name="g_w"),
                             bias_attr=fluid.ParamAttr(name="g_b"), dtype=dtype)
        else:
            cell = L.LSTMCell(H, param_attr=fluid.ParamAttr(name="l_w"),
                              bias_attr=fluid.ParamAttr(name="l_b"), forget_bias=0.5,
                              dtype=dtype)
        out, final = L.rnn(cell, x, sequence_length=lens, is_reverse=reverse)
    return main, startup, x, out, final


@pytest.mark.parametrize("kind,reverse,with_lens", [("gru", False, False), ("lstm", True, True),
                                                   ("gru", True, True)])
def test_rnn_static_and_dygraph_match_numpy(kind, reverse, with_lens):
    xv = rand(B, T, D, seed=9, scale=1.0).astype("float32")
    lv = np.array([T, 2], "int64")
    if kind == "gru":
        params = _gru_params_named()
        step = lambda x, s: (lambda h: (h, [h]))(ref_gru_cell(x, s[0]))
        states = [np.zeros((B, H))]
    else:
        params = {"l_w": LSTM_W[0], "l_b": LSTM_W[1]}
        step = lambda x, s: (lambda hc: (hc[0], list(hc)))(
            ref_lstm_cell(x, s[0], s[1], forget_bias=0.5))
        states = [np.zeros((B, H)), np.zeros((B, H))]
    ref_out, ref_final = ref_rnn(step, xv.astype(np.float64), states,
                                 lv if with_lens else None, reverse)
    main, startup, x, out, final = _rnn_program(kind, reverse, with_lens)
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    _set_params(scope, params)
    feed = {"x": xv, "lens": lv} if with_lens else {"x": xv}
    got = exe.run(main, feed=feed, fetch_list=[out] + list(np.atleast_1d(final)), scope=scope)
    np.testing.assert_allclose(got[0], ref_out, atol=1e-5)
    for g, r in zip(got[1:], ref_final):
        np.testing.assert_allclose(g, r, atol=1e-5)
    # the same through dygraph's Python loop
    with fluid.dygraph.guard():
        if kind == "gru":
            # parameters are created by the first call; then set to the reference values
            cell = L.GRUCell(H)
            xs = fluid.dygraph.to_variable(xv)
            cell(xs[:, 0], cell.get_initial_states(xs))
            for p, arr in zip(cell.parameters(), GRU_W):
                p.set_value(arr.astype("float32"))
        else:
            cell = L.LSTMCell(H, forget_bias=0.5)
            xs = fluid.dygraph.to_variable(xv)
            cell(xs[:, 0], cell.get_initial_states(xs))
            for p, arr in zip(cell.parameters(), LSTM_W):
                p.set_value(arr.astype("float32"))
        lens = fluid.dygraph.to_variable(lv) if with_lens else None
        out_d, fin_d = L.rnn(cell, xs, sequence_length=lens, is_reverse=reverse)
        np.testing.assert_allclose(out_d.numpy(), ref_out, atol=1e-5)


def test_rnn_gradient_through_steps_is_numeric():
    """float64: d loss / d (x, cell weights) of a 4-step LSTM rnn via StaticRNN's while_grad
    against central differences."""
    main, startup, x, out, final = _rnn_program("lstm", False, False, dtype="float64")
    with fluid.program_guard(main, startup):
        x.stop_gradient = False
        proj = fluid.data("proj", [None, T, H], dtype="float64")
        loss = L.reduce_sum(L.elementwise_mul(out, proj)) + L.reduce_sum(final[1])
        w = main.global_block().var("l_w")
        gx, gw = fluid.gradients(loss, [x, w])
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    feed = {"x": rand(B, T, D, seed=3, scale=1.0), "proj": rand(B, T, H, seed=4, scale=1.0)}
    ax, aw = exe.run(main, feed=feed, fetch_list=[gx, gw], scope=scope)
    wv = np.array(scope.find_var("l_w").get_tensor())

    def f(fd):
        scope.find_var("l_w").get_tensor().set(fd["l_w"], fluid.CPUPlace())
        return float(exe.run(main, feed={k: fd[k] for k in ("x", "proj")}, fetch_list=[loss],
                             scope=scope)[0].reshape(-1)[0])

    base = dict(feed, l_w=wv)
    assert_grads_close(ax, numeric_grad(f, base, "x", 1e-5), 1e-4, "rnn dx")
    small = dict(base)
    assert_grads_close(aw, numeric_grad(f, small, "l_w", 1e-5), 1e-4, "rnn dW")


def test_birnn_concatenates_forward_and_reversed():
    xv = rand(B, T, D, seed=2, scale=1.0).astype("float32")
    with fluid.dygraph.guard():
        xs = fluid.dygraph.to_variable(xv)
        fw, bw = L.GRUCell(H), L.GRUCell(H)
        out, (ffw, fbw) = L.birnn(fw, bw, xs)
        o_fw, s_fw = L.rnn(fw, xs)
        o_bw, s_bw = L.rnn(bw, xs, is_reverse=True)
        np.testing.assert_allclose(out.numpy(), np.concatenate([o_fw.numpy(), o_bw.numpy()], -1),
                                   atol=1e-6)
        np.testing.assert_allclose(fbw.numpy(), s_bw.numpy(), atol=1e-6)
        assert list(out.shape) == [B, T, 2 * H]


def test_rnn_errors():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [None, T, D])
        with pytest.raises(TypeError, match="rnn: cell must be an RNNCell"):
            L.rnn("gru", x)
        with pytest.raises(ValueError, match="get_initial_states|structures differ"):
            class Bad(L.RNNCell):
                def call(self, inputs, states):
                    return inputs, [states, states]

                @property
                def state_shape(self):
                    return [D]
            L.rnn(Bad(), x)
    with pytest.raises(ValueError, match="LSTMCell: states must be"):
        with fluid.dygraph.guard():
            L.LSTMCell(H)(fluid.dygraph.to_variable(np.zeros((1, D), "float32")),
                          fluid.dygraph.to_variable(np.zeros((1, H), "float32")))


# -- decoding ---------------------------------------------------------------------------------
EMB = rand(V, D, seed=11, scale=1.0)
OUT_W = rand(H, V, seed=12, scale=2.0)


def log_softmax(z):
    z = z - z.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def ref_greedy(h0, start, end, max_step):
    h, tok = h0, np.full(h0.shape[0], start)
    ids, finished = [], np.zeros(h0.shape[0], bool)
    lengths = np.zeros(h0.shape[0], int)
    for t in range(max_step + 1):
        h = ref_gru_cell(EMB[tok], h)
        tok = (h @ OUT_W).argmax(-1)
        ids.append(tok)
        lengths += ~finished
        finished = finished | (tok == end)
        if finished.all():
            break
    return np.stack(ids, 1), lengths


def ref_beam(h0, start, end, K, max_step):
    Bn = h0.shape[0]
    h = np.repeat(h0[:, None], K, 1)
    log_probs = np.tile([0.0] + [-1e9] * (K - 1), (Bn, 1))
    finished = np.zeros((Bn, K), bool)
    tok = np.full((Bn, K), start)
    toks, parents = [], []
    noend = np.full(V, -1e9)
    noend[end] = 0
    for t in range(max_step + 1):
        hn = ref_gru_cell(EMB[tok.reshape(-1)], h.reshape(Bn * K, H)).reshape(Bn, K, H)
        lp = log_softmax(hn @ OUT_W)
        lp = np.where(finished[..., None], noend, lp)
        total = (lp + log_probs[..., None]).reshape(Bn, K * V)
        idx = np.argsort(-total, axis=1, kind="stable")[:, :K]
        beam, tok = idx // V, idx % V
        log_probs = np.take_along_axis(total, idx, 1)
        h = np.take_along_axis(hn, beam[..., None], 1)
        finished = np.take_along_axis(finished, beam, 1) | (tok == end)
        toks.append(tok)
        parents.append(beam)
        if finished.all():
            break
    toks, parents = np.stack(toks), np.stack(parents)      # [time, batch, beam]
    out = np.zeros_like(toks)
    for b in range(Bn):
        for k in range(K):
            p = k
            for t in range(len(toks) - 1, -1, -1):
                out[t, b, k] = toks[t, b, p]
                p = parents[t, b, p]
    return out.transpose(1, 0, 2), log_probs


def _decoder_program(kind, max_step=5, K=3, **decode_kw):
    """A GRU decoder (greedy or beam) over the fixed EMB / OUT_W weights; ``decode_kw`` go to
    ``dynamic_decode``. Returns (main, startup, outputs, final states, lengths)."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        h0 = fluid.data("h0", [None, H])
        cell = L.GRUCell(H, param_attr=fluid.ParamAttr(name="g_w"),
                         bias_attr=fluid.ParamAttr(name="g_b"))
        emb = lambda ids: fluid.embedding(ids, [V, D], param_attr=np_attr("emb", EMB))  # noqa
        out_fn = lambda h: L.fc(h, V, num_flatten_dims=len(h.shape) - 1,  # noqa: E731
                                param_attr=np_attr("out_w", OUT_W), bias_attr=False)
        if kind == "beam":
            dec = L.BeamSearchDecoder(cell, start_token=0, end_token=1, beam_size=K,
                                      embedding_fn=emb, output_fn=out_fn)
        else:
            start = L.fill_constant_batch_size_like(h0, [-1], "int64", 0)
            helper = L.GreedyEmbeddingHelper(emb, start, end_token=1)
            dec = L.BasicDecoder(cell, helper, output_fn=out_fn)
        outputs, states, lengths = L.dynamic_decode(dec, inits=h0, max_step_num=max_step,
                                                    return_length=True,
                                                    **decode_kw)
    return main, startup, outputs, states, lengths


@pytest.mark.parametrize("kind", ["greedy", "beam"])
def test_decoders_static_match_numpy(kind):
    h0 = rand(3, H, seed=21, scale=1.5).astype("float32")
    main, startup, outputs, states, lengths = _decoder_program(kind)
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    _set_params(scope, _gru_params_named())
    if kind == "beam":
        ids, = exe.run(main, feed={"h0": h0}, fetch_list=[outputs], scope=scope)
        ref, _ = ref_beam(h0.astype(np.float64), 0, 1, 3, 5)
        np.testing.assert_array_equal(ids, ref)
    else:
        ids, lens = exe.run(main, feed={"h0": h0}, fetch_list=[outputs.sample_ids, lengths],
                            scope=scope)
        ref, ref_len = ref_greedy(h0.astype(np.float64), 0, 1, 5)
        np.testing.assert_array_equal(ids, ref)
        np.testing.assert_array_equal(lens, ref_len)


def test_beam_search_dygraph_equals_static():
    h0 = rand(2, H, seed=5, scale=1.5).astype("float32")
    main, startup, outputs, _, _ = _decoder_program("beam", max_step=4, K=2)
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    _set_params(scope, _gru_params_named())
    static_ids, = exe.run(main, feed={"h0": h0}, fetch_list=[outputs], scope=scope)
    with fluid.dygraph.guard():
        cell = L.GRUCell(H)
        hv = fluid.dygraph.to_variable(h0)
        emb = fluid.dygraph.Embedding([V, D], param_attr=init(EMB))
        out_fn = fluid.dygraph.Linear(H, V, param_attr=init(OUT_W), bias_attr=False)
        cell(emb(fluid.dygraph.to_variable(np.zeros([2], "int64"))), hv)
        for p, arr in zip(cell.parameters(), GRU_W):
            p.set_value(arr.astype("float32"))
        dec = L.BeamSearchDecoder(cell, 0, 1, 2, embedding_fn=emb, output_fn=out_fn)
        ids, _ = L.dynamic_decode(dec, inits=hv, max_step_num=4)
        np.testing.assert_array_equal(ids.numpy(), static_ids)


def test_training_helper_decoding_equals_rnn():
    """Teacher forcing through BasicDecoder + TrainingHelper is the rnn over the inputs."""
    xv = rand(B, T, D, seed=8, scale=1.0).astype("float32")
    with fluid.dygraph.guard():
        xs = fluid.dygraph.to_variable(xv)
        cell = L.GRUCell(H)
        lens = fluid.dygraph.to_variable(np.array([T, T], "int64"))
        dec = L.BasicDecoder(cell, L.TrainingHelper(xs, lens))
        outs, _, lengths = L.dynamic_decode(dec, inits=cell.get_initial_states(xs),
                                             return_length=True)
        ref, _ = L.rnn(cell, xs)
        np.testing.assert_allclose(outs.cell_outputs.numpy(), ref.numpy(), atol=1e-6)
        np.testing.assert_array_equal(lengths.numpy(), [T, T])
        np.testing.assert_array_equal(outs.sample_ids.numpy(), ref.numpy().argmax(-1))


def test_sample_embedding_helper_is_seeded():
    with fluid.dygraph.guard():
        cell = L.GRUCell(H)
        emb = fluid.dygraph.Embedding([V, D])
        out_fn = fluid.dygraph.Linear(H, V)
        h0 = fluid.dygraph.to_variable(np.zeros((4, H), "float32"))
        start = fluid.dygraph.to_variable(np.zeros([4], "int64"))
        runs = []
        for _ in range(2):
            helper = L.SampleEmbeddingHelper(emb, start, end_token=1, seed=7,
                                             softmax_temperature=2.0)
            outs, _ = L.dynamic_decode(L.BasicDecoder(cell, helper, output_fn=out_fn),
                                          inits=h0, max_step_num=3)
            runs.append(outs.sample_ids.numpy())
        np.testing.assert_array_equal(runs[0], runs[1])
        assert ((runs[0] >= 0) & (runs[0] < V)).all()
    with pytest.raises(ValueError, match="softmax_temperature must be > 0"):
        with fluid.dygraph.guard():
            L.SampleEmbeddingHelper(emb, start, 1, softmax_temperature=0.0)


def test_tile_beam_merge_with_batch():
    with fluid.dygraph.guard():
        x = fluid.dygraph.to_variable(np.arange(6, dtype="float32").reshape(2, 3))
        y = L.BeamSearchDecoder.tile_beam_merge_with_batch(x, 2).numpy()
        np.testing.assert_array_equal(y, np.repeat(np.arange(6).reshape(2, 3), 2, 0))


def test_dynamic_decode_errors():
    with pytest.raises(TypeError, match="dynamic_decode: decoder must be a Decoder"):
        L.dynamic_decode("beam")
    with pytest.raises(TypeError, match="BeamSearchDecoder: beam_size must be an int"):
        L.BeamSearchDecoder(L.GRUCell(H), 0, 1, 2.5)


def test_impute_finished_freezes_final_states():
    """With impute_finished the final state of a sequence is the one it ended with."""
    h0 = rand(3, H, seed=21, scale=1.5).astype("float32")
    main, startup, _, final, lengths = _decoder_program("greedy", impute_finished=True,
                                                        is_test=True)
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    _set_params(scope, _gru_params_named())
    fin, lens = exe.run(main, feed={"h0": h0}, fetch_list=[final, lengths], scope=scope)
    # NumPy: run greedily, keep each row's state from the step it finished at
    h, tok = h0.astype(np.float64), np.zeros(3, int)
    done = np.zeros(3, bool)
    for t in range(6):
        hn = ref_gru_cell(EMB[tok], h)
        h = np.where(done[:, None], h, hn)
        tok = (hn @ OUT_W).argmax(-1)
        done = done | (tok == 1)
        if done.all():
            break
    np.testing.assert_allclose(fin, h, atol=1e-5)
    _, ref_len = ref_greedy(h0.astype(np.float64), 0, 1, 5)
    np.testing.assert_array_equal(lens, ref_len)


def test_dynamic_decode_gradient_is_numeric():
    """float64 teacher-forced decoding (While over loop-carried states): d loss / d (inputs,
    initial state) against central differences."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, T, D], dtype="float64")
        h0 = fluid.data("h0", [None, H], dtype="float64")
        lens = fluid.data("lens", [None], dtype="int64")
        proj = fluid.data("proj", [None, T, H], dtype="float64")
        x.stop_gradient = h0.stop_gradient = False
        cell = L.GRUCell(H, dtype="float64")
        dec = L.BasicDecoder(cell, L.TrainingHelper(x, lens))
        outs, final = L.dynamic_decode(dec, inits=h0, impute_finished=True)
        loss = L.reduce_sum(L.elementwise_mul(outs.cell_outputs, proj)) + L.reduce_sum(final)
        gx, gh = fluid.gradients(loss, [x, h0])
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    feed = {"x": rand(B, T, D, seed=1, scale=1.0), "h0": rand(B, H, seed=2, scale=1.0),
            "lens": np.array([T, T], "int64"), "proj": rand(B, T, H, seed=3, scale=1.0)}
    ax, ah = exe.run(main, feed=feed, fetch_list=[gx, gh], scope=scope)

    def f(fd):
        return float(exe.run(main, feed=fd, fetch_list=[loss], scope=scope)[0].reshape(-1)[0])

    assert_grads_close(ax, numeric_grad(f, dict(feed), "x", 1e-6), 1e-5, "dynamic_decode dx")
    assert_grads_close(ah, numeric_grad(f, dict(feed), "h0", 1e-6), 1e-5, "dynamic_decode dh0")
