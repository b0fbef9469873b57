"""fluid.layers recurrent layers on the rnn ops: parameter names and shapes as fluid 1.8, values
against the op references of tests/ops/test_rnn.py, training, dygraph where fluid 1.8 allowed
it, and argument errors naming the argument."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.ops.rnn_unit import cudnn_lstm_weight_size as cudnn_size
from tests.ops.test_rnn import ref_cudnn_lstm, ref_gru, ref_gru_step, ref_lstm, sig

L = fluid.layers
LENS = [2, 4, 1]


def params(prog):
    return {p.name: tuple(p.shape) for p in prog.global_block().all_parameters()}


def lod(x, lens=LENS):
    return fluid.create_lod_tensor(x, [lens], fluid.CPUPlace())


def run(main, startup, feed, fetch):
    exe = fluid.Executor()
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    out = exe.run(main, feed=feed, fetch_list=fetch, scope=scope)
    return out, scope


def test_dynamic_lstm_lstmp_gru_parameters_and_values():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, 8], dtype="float64", lod_level=1)
        h, c = L.dynamic_lstm(x, size=8, dtype="float64", is_reverse=True)
        p, pc = L.dynamic_lstmp(x, size=8, proj_size=3, dtype="float64", use_peepholes=False)
        g = L.dynamic_gru(L.slice(x, [1], [0], [6]), size=2, origin_mode=True)
    assert params(main) == {"lstm_0.w_0": (2, 8), "lstm_0.b_0": (1, 14),
                            "lstmp_0.w_0": (3, 8), "lstmp_0.w_1": (2, 3), "lstmp_0.b_0": (1, 8),
                            "gru_0.w_0": (2, 6), "gru_0.b_0": (1, 6)}
    xv = np.random.default_rng(0).uniform(-1, 1, (7, 8))
    (hv, cv, pv, gv), scope = run(main, startup, {"x": lod(xv)}, [h, c, p, g])
    P = {n: np.asarray(scope.find_var(n).get_tensor()) for n in params(main)}
    rh, rc = ref_lstm(xv, LENS, P["lstm_0.w_0"], P["lstm_0.b_0"], reverse=True)
    np.testing.assert_allclose(hv, rh, atol=1e-10)
    np.testing.assert_allclose(cv, rc, atol=1e-10)
    rp, _ = ref_lstm(xv, LENS, P["lstmp_0.w_0"], P["lstmp_0.b_0"], peep=False,
                     proj_w=P["lstmp_0.w_1"])
    np.testing.assert_allclose(pv, rp, atol=1e-10)
    np.testing.assert_allclose(gv, ref_gru(xv[:, :6], LENS, P["gru_0.w_0"], P["gru_0.b_0"],
                                           origin=True), atol=1e-10)


def test_lstm_classifier_trains_on_lod_batches():
    """Sequence label = sign of the sum of the first feature: an LSTM + last step learns it."""
    rng = np.random.default_rng(1)
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 3
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, 2], lod_level=1)
        y = fluid.data("y", [None, 1], dtype="int64")
        h, _ = L.dynamic_lstm(L.fc(x, 16), size=16)
        g = L.dynamic_gru(L.fc(x, 12), size=4)
        feat = L.concat([L.sequence_last_step(h), L.sequence_last_step(g)], axis=1)
        loss = L.mean(L.softmax_with_cross_entropy(L.fc(feat, 2), y))
        fluid.optimizer.Adam(0.05).minimize(loss)
    exe = fluid.Executor()
    exe.run(startup)
    losses = []
    for step in range(40):
        lens = rng.integers(1, 5, 8).tolist()
        xv = rng.uniform(-1, 1, (sum(lens), 2)).astype("float32")
        yv = np.array([[int(s[:, 0].sum() > 0)] for s in np.split(xv, np.cumsum(lens)[:-1])])
        losses.append(exe.run(main, feed={"x": lod(xv, lens), "y": yv},
                              fetch_list=[loss])[0].item())
    assert np.mean(losses[-5:]) < 0.6 * np.mean(losses[:5])


def test_gru_unit_and_lstm_unit_static_and_dygraph_agree():
    rng = np.random.default_rng(2)
    xv, hv = rng.uniform(-1, 1, (3, 9)), rng.uniform(-1, 1, (3, 3))
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, 9], dtype="float64")
        hp = fluid.data("h", [None, 3], dtype="float64")
        h, rh, gate = L.gru_unit(x, hp, size=9, activation="relu", origin_mode=True)
        lh, lc = L.lstm_unit(x, hp, hp, forget_bias=1.0)
    assert params(main) == {"gru_unit_0.w_0": (3, 9), "gru_unit_0.b_0": (1, 9),
                            "fc_0.w_0": (12, 12), "fc_0.b_0": (12,)}
    (h_s, lh_s, lc_s), scope = run(main, startup, {"x": xv, "h": hv}, [h, lh, lc])
    P = {n: np.asarray(scope.find_var(n).get_tensor()) for n in params(main)}
    ref = ref_gru_step(xv + P["gru_unit_0.b_0"], hv, P["gru_unit_0.w_0"], act="relu",
                       origin=True)[-1]
    np.testing.assert_allclose(h_s, ref, atol=1e-10)
    g = np.concatenate([xv, hv], 1) @ P["fc_0.w_0"] + P["fc_0.b_0"]
    c = sig(g[:, 3:6] + 1.0) * hv + sig(g[:, :3]) * np.tanh(g[:, 9:])
    np.testing.assert_allclose(lc_s, c, atol=1e-10)
    np.testing.assert_allclose(lh_s, sig(g[:, 6:9]) * np.tanh(c), atol=1e-10)
    with fluid.dygraph.guard():
        h2, _, _ = L.gru_unit(fluid.dygraph.to_variable(xv), fluid.dygraph.to_variable(hv),
                              size=9, activation="relu", origin_mode=True,
                              param_attr=fluid.ParamAttr(initializer=fluid.initializer.
                                                         NumpyArrayInitializer(
                                                             P["gru_unit_0.w_0"])),
                              bias_attr=fluid.ParamAttr(initializer=fluid.initializer.
                                                        NumpyArrayInitializer(
                                                            P["gru_unit_0.b_0"])))
        np.testing.assert_allclose(h2.numpy(), ref, atol=1e-10)


@pytest.mark.parametrize("bidi,layers", [(False, 1), (True, 2)])
def test_lstm_layer_matches_reference_and_trains(bidi, layers):
    T, B, I, H = 4, 3, 5, 6
    dirs = 2 if bidi else 1
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [T, B, I], dtype="float64")
        h0 = L.fill_constant([layers * dirs, B, H], "float64", 0.1)
        out, lh, lc = L.lstm(x, h0, h0, max_len=T, hidden_size=H, num_layers=layers,
                             is_bidirec=bidi)
        loss = L.mean(out) + L.mean(lh)
        fluid.optimizer.SGD(0.5).minimize(loss)
    (w,) = [n for n in params(main)]
    assert w == "cudnn_lstm_0.w_0" and out.shape == (T, B, dirs * H)
    xv = np.random.default_rng(3).uniform(-1, 1, (T, B, I))
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    wv = np.array(scope.find_var(w).get_tensor())
    o, l1 = exe.run(main, feed={"x": xv}, fetch_list=[out, loss], scope=scope)
    init = np.full((layers * dirs, B, H), 0.1)
    ro, rh, _ = ref_cudnn_lstm(xv, init, init, wv, H, layers, bidi)
    np.testing.assert_allclose(o, ro, atol=1e-10)
    l2, = exe.run(main, feed={"x": xv}, fetch_list=[loss], scope=scope)
    assert l2 < l1


@pytest.mark.parametrize("call,err,pattern", [
    (lambda x, h: L.dynamic_lstm(x, size=6), ValueError, r"dynamic_lstm: size must be 4 \* hidden"),
    (lambda x, h: L.dynamic_lstm(x, size=8, bias_attr=False), ValueError, "bias_attr"),
    (lambda x, h: L.dynamic_lstm(x, size=8, h_0=h), ValueError,
     r"dynamic_lstm: h_0 must be \[batch_size, 2\]"),
    (lambda x, h: L.dynamic_lstm(x, size=8, cell_activation="gelu"), ValueError,
     "dynamic_lstm: cell_activation must be one of"),
    (lambda x, h: L.dynamic_gru(x, size=3), ValueError,
     r"dynamic_gru: input width must be 3 \* size = 9"),
    (lambda x, h: L.dynamic_lstmp(x, 8, 2, cell_clip=-1.0), ValueError, "cell_clip should not"),
    (lambda x, h: L.gru_unit(h, h, size=9), ValueError, "gru_unit: input width must equal"),
    (lambda x, h: L.lstm(x, h, h, 4, 3, 1), ValueError, "lstm: input must be a 3-D tensor"),
    (lambda x, h: L.lstm_unit("x", h, h), TypeError, "lstm_unit: x_t must be a Variable"),
])
def test_argument_errors(call, err, pattern):
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [None, 8], lod_level=1)
        h = fluid.data("h", [None, 3])
        n_ops = len(main.global_block().ops)
        with pytest.raises(err, match=pattern):
            call(x, h)
        assert len(main.global_block().ops) == n_ops


@pytest.mark.parametrize("layer,kwargs", [
    ("dynamic_lstm", dict(size=8)), ("dynamic_lstmp", dict(size=8, proj_size=4)),
    ("dynamic_gru", dict(size=2))])
@pytest.mark.parametrize("bad", ["h_0", "c_0"])
def test_initial_states_must_be_float_before_any_shape_check(layer, kwargs, bad):
    """fluid 1.8's test_{lstm,lstmp,gru}_op: an int32 initial state is a TypeError, raised
    before the (here also wrong) width of the other state is looked at."""
    if layer == "dynamic_gru" and bad == "c_0":
        pytest.skip("dynamic_gru has no c_0")
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        width = 6 if layer == "dynamic_gru" else 8
        x = fluid.data("x", [None, width], lod_level=1)
        wrong = fluid.data("wrong", [None, 7], "float32")        # no layer's width
        states = {"h_0": wrong, "c_0": wrong} if layer != "dynamic_gru" else {"h_0": wrong}
        states[bad] = fluid.data("s", [None, 7], "int32")
        with pytest.raises(TypeError, match=f"{layer}: {bad} must be float32 or float64, "
                                            f"but received int32"):
            getattr(L, layer)(x, **kwargs, **states)



def test_lod_layers_are_static_only_as_in_fluid():
    with fluid.dygraph.guard():
        x = fluid.dygraph.to_variable(np.zeros((3, 8), "float32"))
        with pytest.raises(AssertionError, match="instead of dynamic_lstm in dygraph mode"):
            L.dynamic_lstm(x, size=8)


def test_lstm_layer_in_dygraph_matches_reference_and_has_gradients():
    T, B, I, H = 3, 2, 4, 3
    xv = np.random.default_rng(5).uniform(-1, 1, (T, B, I))
    with fluid.dygraph.guard():
        x = fluid.dygraph.to_variable(xv)
        x.stop_gradient = False
        h0 = fluid.dygraph.to_variable(np.zeros((2, B, H)))
        out, lh, lc = L.lstm(x, h0, h0, max_len=T, hidden_size=H, num_layers=1,
                             is_bidirec=True)
        loss = L.mean(out)
        loss.backward()
        assert x.gradient() is not None and np.abs(x.gradient()).sum() > 0
    # the same weights through the reference (the layer's one parameter)
    with fluid.dygraph.guard():
        w = np.random.default_rng(6).uniform(-0.5, 0.5, cudnn_size(I, H, 1, True))
        out, lh, lc = L.lstm(fluid.dygraph.to_variable(xv),
                             fluid.dygraph.to_variable(np.zeros((2, B, H))),
                             fluid.dygraph.to_variable(np.zeros((2, B, H))), max_len=T,
                             hidden_size=H, num_layers=1, is_bidirec=True,
                             default_initializer=fluid.initializer.NumpyArrayInitializer(w))
        ro, rh, rc = ref_cudnn_lstm(xv, np.zeros((2, B, H)), np.zeros((2, B, H)), w, H, 1, True)
        np.testing.assert_allclose(out.numpy(), ro, atol=1e-10)
        np.testing.assert_allclose(lc.numpy(), rc, atol=1e-10)
