"""fluid 1.8's padded (non-LoD) forms of the sequence ops: ``Length`` / ``SeqLength`` /
``InputLength`` / ``HypsLength`` / ``LogitsLength`` inputs. Each padded result must equal the LoD
result on the same sequences (itself checked against per-sequence references elsewhere), padded
positions must be zero, gradients must pass numeric checks, and bad lengths give clear errors."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core.registry import get_op_def
from tests.ops.test_sequence import check_grad, run

LENS = [2, 0, 3, 1]          # an empty sequence included: fluid's padded ops allow it
RNG = np.random.default_rng(11)


def pad(flat, lens, width=None, value=0):
    """Concatenated sequences [N, ...] -> [B, width, ...] (``value`` past each length)."""
    width = max(lens) if width is None else width
    out = np.full((len(lens), width) + flat.shape[1:], value, flat.dtype)
    start = 0
    for b, n in enumerate(lens):
        out[b, :n] = flat[start:start + n]
        start += n
    return out


def lengths(lens):
    return (np.asarray(lens, np.int64), None)


# -- linear_chain_crf / crf_decoding ----------------------------------------------------------
D = 3


def _crf_data(lens=LENS):
    n = sum(lens)
    return (RNG.uniform(-1, 1, (n, D)), RNG.uniform(-1, 1, (D + 2, D)),
            RNG.integers(0, D, (n, 1)).astype(np.int64))


def test_linear_chain_crf_padded_equals_lod():
    e, t, y = _crf_data([2, 3, 1])
    lod_ll, lod_alpha = run("linear_chain_crf", {"Emission": (e, [2, 3, 1]),
                                                 "Transition": (t, None),
                                                 "Label": (y, [2, 3, 1])},
                            outs=("LogLikelihood", "Alpha"))
    e4, t4, y4 = _crf_data()
    ll, alpha = run("linear_chain_crf", {"Emission": (pad(e4, LENS, 4), None),
                                         "Transition": (t4, None),
                                         "Label": (pad(y4, LENS, 4), None),
                                         "Length": lengths(LENS)},
                    outs=("LogLikelihood", "Alpha"))
    ref, ref_alpha = run("linear_chain_crf", {"Emission": (e4, LENS), "Transition": (t4, None),
                                              "Label": (y4, LENS)},
                         outs=("LogLikelihood", "Alpha"))
    np.testing.assert_allclose(np.array(ll), np.array(ref), rtol=1e-10)
    assert np.array(ll)[1, 0] == 0.0                      # an empty sequence costs 0 (fluid)
    alpha = np.array(alpha)
    assert alpha.shape == (4, 4, D)
    np.testing.assert_allclose(alpha.reshape(-1, D)[pad(np.arange(sum(LENS))[:, None] + 1,
                                                        LENS, 4).reshape(-1) > 0],
                               np.array(ref_alpha))
    assert not alpha[0, 2:].any() and not alpha[1].any()  # zero past each length
    assert np.array(lod_ll).shape == (3, 1)


@pytest.mark.parametrize("slot", ["Emission", "Transition"])
def test_linear_chain_crf_padded_grad(slot):
    e, t, y = _crf_data()
    check_grad("linear_chain_crf", {"Emission": (pad(e, LENS, 4), None), "Transition": (t, None),
                                    "Label": (pad(y, LENS, 4)[..., 0], None),
                                    "Length": lengths(LENS)}, slot, out="LogLikelihood")


def test_crf_decoding_padded_equals_lod():
    e, t, y = _crf_data()
    ref, = run("crf_decoding", {"Emission": (e, LENS), "Transition": (t, None)},
               outs=("ViterbiPath",), lod_levels={"Emission": 1})
    path, = run("crf_decoding", {"Emission": (pad(e, LENS, 4), None), "Transition": (t, None),
                                 "Length": lengths(LENS)}, outs=("ViterbiPath",))
    path = np.array(path)
    assert path.shape == (4, 4) and path.dtype == np.int64
    np.testing.assert_array_equal(path, pad(np.array(ref), LENS, 4)[..., 0])
    ok, = run("crf_decoding", {"Emission": (pad(e, LENS, 4), None), "Transition": (t, None),
                               "Label": (pad(np.array(ref), LENS, 4, value=7), None),
                               "Length": lengths(LENS)}, outs=("ViterbiPath",))
    np.testing.assert_array_equal(np.array(ok), pad(np.ones((sum(LENS), 1), np.int64), LENS,
                                                    4)[..., 0])


def test_crf_layers_padded_train_and_decode():
    """The layers' padded form: a tagger learns tag = word % 3 from [B, L] data + length."""
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start):
        words = fluid.data("w", [None, 5], "int64")
        tags = fluid.data("t", [None, 5], "int64")
        length = fluid.data("len", [None], "int64")
        emb = fluid.layers.embedding(words, size=[9, 3],
                                     param_attr=fluid.ParamAttr(
                                         initializer=fluid.initializer.Constant(0.0)))
        cost = fluid.layers.linear_chain_crf(emb, tags, param_attr=fluid.ParamAttr(name="crfw"),
                                             length=length)
        loss = fluid.layers.mean(cost)
        path = fluid.layers.crf_decoding(emb, param_attr=fluid.ParamAttr(name="crfw"),
                                         length=length)
        fluid.optimizer.SGD(0.5).minimize(loss)
    rng = np.random.default_rng(0)
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(start, scope=scope)
    for _ in range(40):
        w = rng.integers(0, 9, (8, 5))
        lens = rng.integers(1, 6, 8)
        exe.run(main, feed={"w": w, "t": w % 3, "len": lens}, fetch_list=[loss], scope=scope)
    w = rng.integers(0, 9, (8, 5))
    lens = rng.integers(1, 6, 8)
    got, = exe.run(main.clone(for_test=True), feed={"w": w, "t": w % 3, "len": lens},
                   fetch_list=[path], scope=scope)
    valid = np.arange(5)[None] < lens[:, None]
    assert got.shape == (8, 5)
    np.testing.assert_array_equal(got[valid], (w % 3)[valid])
    assert not got[~valid].any()


def test_crf_padded_errors():
    e, t, y = _crf_data()
    with pytest.raises(ValueError, match=r"Length must have one length per sequence \(4"):
        run("linear_chain_crf", {"Emission": (pad(e, LENS, 4), None), "Transition": (t, None),
                                 "Label": (pad(y, LENS, 4), None),
                                 "Length": lengths([1, 2])}, outs=("LogLikelihood",))
    with pytest.raises(ValueError, match=r"every Length must lie in \[0, 4\]"):
        run("crf_decoding", {"Emission": (pad(e, LENS, 4), None), "Transition": (t, None),
                             "Length": lengths([1, 5, 0, 0])}, outs=("ViterbiPath",))
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x2 = fluid.data("x2", [None, 3], "float32")
        x3 = fluid.data("x3", [None, 4, 3], "float32")
        lab = fluid.data("lab", [None, 4], "int64")
        ln = fluid.data("ln", [None], "int64")
        with pytest.raises(ValueError, match=r"input must be \[B, L, D\] \(padded, with length"):
            fluid.layers.linear_chain_crf(x2, lab, length=ln)
        with pytest.raises(TypeError, match="length must be int64, got"):
            fluid.layers.linear_chain_crf(x3, lab, length=fluid.data("l32", [None], "int32"))
        with pytest.raises(TypeError, match="length must be a Variable"):
            fluid.layers.crf_decoding(x3, "w", length=[1, 2])


# -- warpctc ----------------------------------------------------------------------------------
C = 4
T_LENS, U_LENS = [3, 4, 1, 2], [2, 1, 1, 0]


def _ctc_data():
    logits = RNG.uniform(-1, 1, (sum(T_LENS), C))
    labels = RNG.integers(1, C, (sum(U_LENS), 1)).astype(np.int32)
    return logits, labels


def _time_major(logits, width=5):
    return pad(logits, T_LENS, width).transpose(1, 0, 2).copy()


@pytest.mark.parametrize("norm", [False, True])
def test_warpctc_padded_equals_lod(norm):
    logits, labels = _ctc_data()
    ref, = run("warpctc", {"Logits": (logits, T_LENS), "Label": (labels, U_LENS)},
               attrs={"norm_by_times": norm}, outs=("Loss",))
    got, = run("warpctc", {"Logits": (_time_major(logits), None),
                           "Label": (pad(labels, U_LENS, 3)[..., 0], None),
                           "LogitsLength": lengths(T_LENS), "LabelLength": lengths(U_LENS)},
               attrs={"norm_by_times": norm}, outs=("Loss",))
    assert np.array(got).shape == (4, 1)
    np.testing.assert_allclose(np.array(got), np.array(ref), rtol=1e-10)


def test_warpctc_padded_grad():
    logits, labels = _ctc_data()
    check_grad("warpctc", {"Logits": (_time_major(logits), None),
                           "Label": (pad(labels, U_LENS, 3)[..., 0], None),
                           "LogitsLength": lengths(T_LENS), "LabelLength": lengths(U_LENS)},
               "Logits", out="Loss")


def test_warpctc_padded_grad_is_zero_past_length_and_norm_by_times():
    """dLogits is zero past each length; norm_by_times divides sequence b's gradient (not its
    loss, as fluid) by its length."""
    logits, labels = _ctc_data()
    grads = []
    for norm in (False, True):
        main, start = fluid.Program(), fluid.Program()
        with fluid.program_guard(main, start):
            x = fluid.data("x", [5, 4, C], "float64")
            x.stop_gradient = False
            y = fluid.data("y", [4, 3], "int32")
            tl, ul = fluid.data("tl", [4], "int64"), fluid.data("ul", [4], "int64")
            loss = fluid.layers.reduce_sum(fluid.layers.warpctc(
                x, y, norm_by_times=norm, input_length=tl, label_length=ul))
            g, = fluid.gradients(loss, [x])
        grads.append(fluid.Executor().run(
            main, feed={"x": _time_major(logits), "y": pad(labels, U_LENS, 3)[..., 0],
                        "tl": np.array(T_LENS), "ul": np.array(U_LENS)},
            fetch_list=[g], scope=fluid.Scope())[0])
    valid = np.arange(5)[:, None] < np.array(T_LENS)[None]
    assert grads[0].shape == (5, 4, C) and not grads[0][~valid].any() and grads[0][valid].any()
    np.testing.assert_allclose(grads[1], grads[0] / np.array(T_LENS)[None, :, None])


def test_warpctc_padded_errors():
    logits, labels = _ctc_data()
    with pytest.raises(ValueError, match=r"every LabelLength must lie in \[0, 3\]"):
        run("warpctc", {"Logits": (_time_major(logits), None),
                        "Label": (pad(labels, U_LENS, 3)[..., 0], None),
                        "LogitsLength": lengths(T_LENS), "LabelLength": lengths([2, 1, 1, 4])},
            outs=("Loss",))
    with pytest.raises(ValueError, match=r"every LogitsLength must be >= 1"):
        run("warpctc", {"Logits": (_time_major(logits), None),
                        "Label": (pad(labels, U_LENS, 3)[..., 0], None),
                        "LogitsLength": lengths([3, 0, 1, 2]), "LabelLength": lengths(U_LENS)},
            outs=("Loss",))
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.data("x", [5, 4, C], "float32")
        y = fluid.data("y", [4, 3], "int32")
        tl = fluid.data("tl", [4], "int64")
        with pytest.raises(ValueError, match="input_length and label_length must be given "
                                             "together"):
            fluid.layers.warpctc(x, y, input_length=tl)
        with pytest.raises(TypeError, match="label_length must be int64"):
            fluid.layers.warpctc(x, y, input_length=tl,
                                 label_length=fluid.data("ul", [4], "float32"))


# -- ctc_greedy_decoder (ctc_align) -----------------------------------------------------------
def _ref_greedy(ids, blank):
    out, prev = [], None
    for v in ids:
        if v != blank and v != prev:
            out.append(v)
        prev = v
    return out


def test_ctc_align_padded_equals_lod():
    ids = RNG.integers(0, 3, (sum(T_LENS), 1)).astype(np.int64)
    ref, = run("ctc_align", {"Input": (ids, T_LENS)}, attrs={"blank": 0}, outs=("Output",))
    out, out_len = run("ctc_align", {"Input": (pad(ids, T_LENS, 5)[..., 0], None),
                                     "InputLength": lengths(T_LENS)},
                       attrs={"blank": 0, "padding_value": -1},
                       outs=("Output", "OutputLength"))
    rlens = ref.recursive_sequence_lengths()[0]
    np.testing.assert_array_equal(np.array(out_len).ravel(), rlens)
    np.testing.assert_array_equal(np.array(out), pad(np.array(ref), rlens, 5, value=-1)[..., 0])
    start = 0
    for n, m in zip(T_LENS, rlens):          # per-sequence reference
        assert _ref_greedy(ids[start:start + n, 0].tolist(), 0) == np.array(out)[
            T_LENS.index(n), :m].tolist()
        start += n


def test_ctc_greedy_decoder_padded_layer():
    probs = RNG.uniform(0, 1, (4, 5, C)).astype("float32")
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [None, 5, C], "float32")
        ln = fluid.data("ln", [None, 1], "int64")
        out, out_len = fluid.layers.ctc_greedy_decoder(x, blank=0, input_length=ln,
                                                       padding_value=9)
    got, got_len = fluid.Executor().run(main, feed={"x": probs,
                                                    "ln": np.array(T_LENS)[:, None]},
                                        fetch_list=[out, out_len], scope=fluid.Scope())
    assert got.shape == (4, 5) and got_len.shape == (4, 1)
    for b, n in enumerate(T_LENS):
        want = _ref_greedy(probs[b, :n].argmax(1).tolist(), 0)
        assert got_len[b, 0] == len(want)
        assert got[b].tolist() == want + [9] * (5 - len(want))
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        with pytest.raises(ValueError, match=r"input must be padded \[batch, max_len"):
            fluid.layers.ctc_greedy_decoder(fluid.data("x2", [None, C], "float32"), 0,
                                            input_length=fluid.data("l", [None], "int64"))


# -- edit_distance ----------------------------------------------------------------------------
def _lev(a, b):
    d = np.arange(len(b) + 1)
    for i, x in enumerate(a, 1):
        prev, d[0] = d.copy(), i
        for j, y in enumerate(b, 1):
            d[j] = min(prev[j] + 1, d[j - 1] + 1, prev[j - 1] + (x != y))
    return d[-1]


@pytest.mark.parametrize("normalized", [False, True])
def test_edit_distance_padded_equals_lod(normalized):
    hl, rl = [3, 0, 2, 4], [2, 1, 3, 4]
    hyps = RNG.integers(0, 3, (sum(hl), 1)).astype(np.int64)
    refs = RNG.integers(0, 3, (sum(rl), 1)).astype(np.int64)
    ref, num = run("edit_distance", {"Hyps": (hyps, hl), "Refs": (refs, rl)},
                   attrs={"normalized": normalized}, outs=("Out", "SequenceNum"))
    got, gnum = run("edit_distance", {"Hyps": (pad(hyps, hl, 5, value=7)[..., 0], None),
                                      "Refs": (pad(refs, rl, 4, value=8), None),
                                      "HypsLength": lengths(hl), "RefsLength": lengths(rl)},
                    attrs={"normalized": normalized}, outs=("Out", "SequenceNum"))
    np.testing.assert_allclose(np.array(got), np.array(ref))
    assert np.array(gnum).tolist() == [4]
    hs, rs = np.split(hyps[:, 0], np.cumsum(hl)[:-1]), np.split(refs[:, 0], np.cumsum(rl)[:-1])
    want = [_lev(list(h), list(r)) / (len(r) if normalized else 1) for h, r in zip(hs, rs)]
    np.testing.assert_allclose(np.array(got).ravel(), want, rtol=1e-6)


def test_edit_distance_padded_layer_and_errors():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        h, r = fluid.data("h", [None, 4], "int64"), fluid.data("r", [None, 4], "int64")
        hl, rl = fluid.data("hl", [None], "int64"), fluid.data("rl", [None], "int64")
        dist, num = fluid.layers.edit_distance(h, r, normalized=False, input_length=hl,
                                               label_length=rl)
        with pytest.raises(ValueError, match="input_length and label_length must be given"):
            fluid.layers.edit_distance(h, r, input_length=hl)
        with pytest.raises(TypeError, match="input_length must be a Variable"):
            fluid.layers.edit_distance(h, r, input_length=[1], label_length=rl)
    got, n = fluid.Executor().run(main, feed={"h": np.array([[1, 2, 3, 0], [4, 4, 0, 0]]),
                                              "r": np.array([[1, 3, 0, 0], [4, 5, 6, 0]]),
                                              "hl": np.array([3, 2]), "rl": np.array([2, 3])},
                                  fetch_list=[dist, num], scope=fluid.Scope())
    assert got.ravel().tolist() == [1.0, 2.0] and n.tolist() == [2]
    with pytest.raises(ValueError, match=r"edit_distance: every RefsLength must lie in \[0, 4\]"):
        fluid.Executor().run(main, feed={"h": np.zeros((2, 4), np.int64),
                                         "r": np.zeros((2, 4), np.int64),
                                         "hl": np.array([3, 2]), "rl": np.array([2, 5])},
                             fetch_list=[dist], scope=fluid.Scope())


# -- chunk_eval -------------------------------------------------------------------------------
@pytest.mark.parametrize("scheme,types", [("IOB", 2), ("IOBES", 2), ("plain", 3)])
def test_chunk_eval_padded_equals_lod(scheme, types):
    lens = [5, 0, 3, 6]
    ntag = {"IOB": 2, "IOBES": 4, "plain": 1}[scheme]
    hi = ntag * types + 1
    inf = RNG.integers(0, hi, (sum(lens), 1)).astype(np.int64)
    lab = RNG.integers(0, hi, (sum(lens), 1)).astype(np.int64)
    outs = ("Precision", "Recall", "F1-Score", "NumInferChunks", "NumLabelChunks",
            "NumCorrectChunks")
    attrs = {"num_chunk_types": types, "chunk_scheme": scheme}
    ref = run("chunk_eval", {"Inference": (inf, lens), "Label": (lab, lens)}, attrs=attrs,
              outs=outs)
    got = run("chunk_eval", {"Inference": (pad(inf, lens, 7, value=1)[..., 0], None),
                             "Label": (pad(lab, lens, 7, value=0)[..., 0], None),
                             "SeqLength": lengths(lens)}, attrs=attrs, outs=outs)
    for g, r in zip(got, ref):
        np.testing.assert_allclose(np.array(g), np.array(r))
    assert np.array(ref[4])[0] > 0


def test_chunk_eval_padded_layer_and_errors():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        inf, lab = fluid.data("i", [None, 4], "int64"), fluid.data("l", [None, 4], "int64")
        sl = fluid.data("sl", [None], "int64")
        res = fluid.layers.chunk_eval(inf, lab, "IOB", 2, seq_length=sl)
        with pytest.raises(TypeError, match="seq_length must be int64"):
            fluid.layers.chunk_eval(inf, lab, "IOB", 2,
                                    seq_length=fluid.data("s32", [None], "int32"))
    # B-0 I-0 | B-1 ; label chunks: B-0 I-0 (match) | B-1 I-1 (different end)
    feed = {"i": np.array([[0, 1, 4, 2], [2, 4, 0, 0]]), "l": np.array([[0, 1, 4, 2],
                                                                       [2, 3, 0, 1]]),
            "sl": np.array([3, 2])}
    p, r, f1, ni, nl, nc = fluid.Executor().run(main, feed=feed, fetch_list=list(res),
                                                scope=fluid.Scope())
    assert (ni.tolist(), nl.tolist(), nc.tolist()) == ([2], [2], [1])
    with pytest.raises(ValueError, match=r"chunk_eval: SeqLength must have one length per "
                                         r"sequence \(2"):
        fluid.Executor().run(main, feed=dict(feed, sl=np.array([3, 2, 1])), fetch_list=[res[0]],
                             scope=fluid.Scope())


# -- edit_distance's ignored_tokens (sequence_erase) ------------------------------------------
def test_sequence_erase_per_sequence():
    lens = [4, 2, 0, 3]
    x = np.array([[1], [3], [2], [3], [3], [3], [5], [0], [3]], np.int64)
    out, = run("sequence_erase", {"X": (x, lens)}, {"tokens": [3, 0]})
    assert np.array(out).ravel().tolist() == [1, 2, 5]
    assert out.recursive_sequence_lengths() == [[2, 0, 0, 1]]
    # a 2-level LoD keeps its upper level; only the last one shrinks (fluid)
    two = get_op_def("sequence_erase").forward(
        x, lod={"X": ((0, 1, 4), (0, 4, 6, 6, 9))}, tokens=[3, 0])
    assert two["lod"]["Out"] == ((0, 1, 4), (0, 2, 2, 2, 3))


def test_edit_distance_ignored_tokens():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        h = fluid.data("h", [None, 1], "int64", lod_level=1)
        r = fluid.data("r", [None, 1], "int64", lod_level=1)
        dist, _ = fluid.layers.edit_distance(h, r, normalized=False, ignored_tokens=[0, 9])
        with pytest.raises(ValueError, match="ignored_tokens works on LoD input only"):
            fluid.layers.edit_distance(h, r, ignored_tokens=[0],
                                       input_length=fluid.data("a", [None], "int64"),
                                       label_length=fluid.data("b", [None], "int64"))
    hyp = [[1, 0, 2, 9], [4, 4]]
    ref = [[1, 2], [0, 4, 5]]
    lt = lambda seqs: fluid.create_lod_tensor(                           # noqa: E731
        np.array(sum(seqs, []), np.int64).reshape(-1, 1), [[len(s) for s in seqs]],
        fluid.CPUPlace())
    got, = fluid.Executor().run(main, feed={"h": lt(hyp), "r": lt(ref)}, fetch_list=[dist],
                                scope=fluid.Scope())
    want = [_lev([t for t in a if t not in (0, 9)], [t for t in b if t not in (0, 9)])
            for a, b in zip(hyp, ref)]
    assert got.ravel().tolist() == want == [0, 1]


def test_fluid_doc_example_padded_crf():
    """fluid 1.8's documented padded example: fc(num_flatten_dims=2) emissions [-1, 10, 10],
    label [-1, 10, 1], length [-1, 1]; crf_decoding shares the 'crfw' parameter."""
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start):
        input_data2 = fluid.data(name="input_data2", shape=[-1, 10, 10], dtype="float32")
        label2 = fluid.data(name="label2", shape=[-1, 10, 1], dtype="int64")
        label_length = fluid.data(name="length", shape=[-1, 1], dtype="int64")
        emission2 = fluid.layers.fc(input=input_data2, size=10, num_flatten_dims=2)
        crf_cost2 = fluid.layers.linear_chain_crf(
            input=emission2, label=label2, length=label_length,
            param_attr=fluid.ParamAttr(name="crfw", learning_rate=0.01))
        path = fluid.layers.crf_decoding(input=emission2, length=label_length,
                                         param_attr=fluid.ParamAttr(name="crfw"))
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(start, scope=scope)
    rng = np.random.default_rng(1)
    lens = np.array([[3], [10], [1]])
    feed = {"input_data2": rng.random((3, 10, 10), "float32"),
            "label2": rng.integers(0, 10, (3, 10, 1)), "length": lens}
    cost, p, emis = exe.run(main, feed=feed, fetch_list=[crf_cost2, path, emission2],
                            scope=scope)
    assert cost.shape == (3, 1) and p.shape == (3, 10) and not p[0, 3:].any()
    flat = np.concatenate([emis[b, :n] for b, n in enumerate(lens.ravel())])
    trans = np.array(scope.find_var("crfw").get_tensor())
    ref, = run("linear_chain_crf", {"Emission": (flat.astype(np.float64), lens.ravel().tolist()),
                                    "Transition": (trans.astype(np.float64), None),
                                    "Label": (np.concatenate([feed["label2"][b, :n] for b, n in
                                                              enumerate(lens.ravel())]),
                                              lens.ravel().tolist())},
               outs=("LogLikelihood",))
    np.testing.assert_allclose(cost, np.array(ref), rtol=1e-5)
