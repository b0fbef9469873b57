"""fluid 1.8's fused inference ops (ops/fusion_rnn.py, ops/fusion_seq.py) against the unfused
ops they replace (run through fluidlite's own ``lstm`` / ``gru`` / ``sequence_conv`` ops) or
NumPy references written from the formulas; their LoD and argument errors. fluid registers no
gradient for these ops (inference only), so there is no gradient check."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core.registry import get_op_def

from tests.ops.test_rnn import build, rand, run

LENS = [3, 1, 4, 2]


def _xl(rows, width, seed=0, lens=LENS):
    return (rand(rows, width, seed=seed), lens)


# -- fusion_lstm / fused_embedding_fc_lstm / fusion_gru ----------------------------------------
@pytest.mark.parametrize("peep,reverse,init", [(False, False, False), (True, True, True),
                                               (True, False, False)])
def test_fusion_lstm_is_fc_then_lstm(peep, reverse, init):
    M, D, T = 5, 3, sum(LENS)
    x, wx, wh = rand(T, M, seed=1), rand(M, 4 * D, seed=2), rand(D, 4 * D, seed=3)
    bias = rand(1, (7 if peep else 4) * D, seed=4)
    attrs = {"use_peepholes": peep, "is_reverse": reverse}
    ins = {"X": (x, LENS), "WeightX": wx, "WeightH": wh, "Bias": bias}
    ref_in = {"Input": (x @ wx, LENS), "Weight": wh, "Bias": bias}
    if init:
        ins["H0"] = ref_in["H0"] = rand(len(LENS), D, seed=5)
        ins["C0"] = ref_in["C0"] = rand(len(LENS), D, seed=6)
    hid, cell = run("fusion_lstm", ins, attrs, ["Hidden", "Cell"], return_numpy=False)
    want_h, want_c = run("lstm", ref_in, attrs, ["Hidden", "Cell"])
    np.testing.assert_allclose(np.asarray(hid), want_h, atol=1e-12)
    np.testing.assert_allclose(np.asarray(cell), want_c, atol=1e-12)
    assert hid.recursive_sequence_lengths() == [LENS]


def test_fused_embedding_fc_lstm_reads_rows_of_the_fc_embeddings():
    D, V, T = 2, 7, sum(LENS)
    emb, wh, bias = rand(V, 4 * D, seed=1), rand(D, 4 * D, seed=2), rand(1, 4 * D, seed=3)
    ids = np.random.default_rng(0).integers(0, V, (T, 1)).astype("int64")
    hid, = run("fused_embedding_fc_lstm", {"Ids": (ids, LENS), "Embeddings": emb,
                                           "WeightH": wh, "Bias": bias},
               {"use_peepholes": False}, ["Hidden"])
    # Bias is not added again: Embeddings already hold it (fluid's embedding_fc_lstm_fuse_pass)
    want, = run("lstm", {"Input": (emb[ids[:, 0]] - bias, LENS), "Weight": wh, "Bias": bias},
                {"use_peepholes": False}, ["Hidden"])
    np.testing.assert_allclose(hid, want, atol=1e-12)
    with pytest.raises(ValueError, match=r"Ids must lie in \[0, 7\)"):
        run("fused_embedding_fc_lstm", {"Ids": (ids + V, LENS), "Embeddings": emb,
                                        "WeightH": wh, "Bias": bias},
            {"use_peepholes": False}, ["Hidden"])


@pytest.mark.parametrize("reverse,with_h0,with_bias", [(False, True, True), (True, False, False)])
def test_fusion_gru_is_fc_then_gru(reverse, with_h0, with_bias):
    M, D, T = 4, 3, sum(LENS)
    x, wx, wh, b = rand(T, M, seed=1), rand(M, 3 * D, seed=2), rand(D, 3 * D, seed=3), \
        rand(1, 3 * D, seed=4)
    ins = {"X": (x, LENS), "WeightX": wx, "WeightH": wh}
    ref = {"Input": (x @ wx + (b if with_bias else 0), LENS), "Weight": wh}
    if with_bias:
        ins["Bias"] = b
    if with_h0:
        ins["H0"] = ref["H0"] = rand(len(LENS), D, seed=5)
    hid, = run("fusion_gru", ins, {"is_reverse": reverse}, ["Hidden"])
    want, = run("gru", ref, {"is_reverse": reverse}, ["Hidden"])
    np.testing.assert_allclose(hid, want, atol=1e-12)


def test_fusion_lstm_shape_errors():
    with pytest.raises(ValueError, match=r"fusion_lstm: Bias must be \[1, 21\]"):
        build("fusion_lstm", {"X": _xl(10, 5), "WeightX": rand(5, 12), "WeightH": rand(3, 12),
                              "Bias": rand(1, 12)}, {"use_peepholes": True}, ["Hidden"])
    with pytest.raises(ValueError, match=r"fusion_gru: WeightH must be \[D, 3D\]"):
        build("fusion_gru", {"X": _xl(10, 5), "WeightX": rand(5, 9), "WeightH": rand(3, 6)},
              {}, ["Hidden"])


def _sig(x):
    return 1 / (1 + np.exp(-x))


def test_attention_lstm_against_the_formula():
    M, D, lens = 3, 2, [2, 3]
    T = sum(lens)
    x, c0, h0 = rand(T, M, seed=1), rand(2, D, seed=2), rand(2, D, seed=3)
    aw, ab, asc, asb = rand(M + D, 1, seed=4), rand(1, 1, seed=5), rand(1, 1, seed=6), \
        rand(1, 1, seed=7)
    lw, lb = rand(D + M, 4 * D, seed=8), rand(1, 4 * D, seed=9)
    hid, cell = run("attention_lstm", {"X": (x, lens), "C0": c0, "H0": h0,
                                       "AttentionWeight": aw, "AttentionBias": ab,
                                       "AttentionScalar": asc, "AttentionScalarBias": asb,
                                       "LSTMWeight": lw, "LSTMBias": lb}, {},
                    ["Hidden", "Cell"])
    want_h, want_c, start = [], [], 0
    for k, n in enumerate(lens):
        xs, c, h = x[start:start + n], c0[k], h0[k]
        for _ in range(n):
            e = np.maximum(np.concatenate([xs, np.tile(c, (n, 1))], 1) @ aw + ab, 0)
            e = np.maximum(e * asc + asb, 0).reshape(-1)
            a = np.exp(e - e.max()) / np.exp(e - e.max()).sum()
            g = np.concatenate([h, a @ xs]) @ lw + lb.reshape(-1)
            f, i, o, cand = np.split(g, 4)
            c = _sig(f) * c + _sig(i) * np.tanh(cand)
            h = _sig(o) * np.tanh(c)
            want_h.append(h)
            want_c.append(c)
        start += n
    np.testing.assert_allclose(hid, want_h, atol=1e-12)
    np.testing.assert_allclose(cell, want_c, atol=1e-12)


# -- sequence fusions ---------------------------------------------------------------------------
def run_multi(op_type, inputs, attrs, outs=("Out",)):
    """One-op program whose slots may be duplicable: slot -> array, (array, lens) or a list of
    (name, array, lens-or-None); returns the first output as a LoDTensor."""
    prog = fluid.Program()
    block = prog.global_block()
    feed, in_vars = {}, {}
    for slot, v in inputs.items():
        entries = v if isinstance(v, list) else [(slot.lower(), *(
            v if isinstance(v, tuple) else (v, None)))]
        vs = []
        for name, arr, lens in entries:
            vs.append(block.create_var(name=name, shape=arr.shape, dtype=arr.dtype,
                                       is_data=True, lod_level=1 if lens else 0))
            feed[name] = fluid.create_lod_tensor(arr, [lens], fluid.CPUPlace()) if lens else arr
        in_vars[slot] = vs if isinstance(v, list) else vs[0]
    slots = get_op_def(op_type).out_slots
    out_vars = {o: block.create_var(name=o.lower() + "_out") for o in outs}
    out_vars.update({sl.name: block.create_var(name=sl.name.lower() + "_out") for sl in slots
                     if sl.name not in out_vars and not sl.dispensable and not sl.duplicable})
    with fluid.program_guard(prog, fluid.Program()):
        block.append_op(op_type, in_vars, out_vars, dict(attrs))
    res = fluid.Executor().run(prog, feed=feed, fetch_list=[out_vars[o] for o in outs],
                               scope=fluid.Scope(), return_numpy=False)
    return res[0] if len(outs) == 1 else res


def _pool(x, lens, kind):
    out = []
    for s in np.split(x, np.cumsum(lens)[:-1]):
        v = s.sum(0)
        out.append(v / len(s) if kind == "AVERAGE" else v / np.sqrt(len(s)) if kind == "SQRT"
                   else v)
    return np.array(out)


@pytest.mark.parametrize("kind", ["SUM", "AVERAGE", "SQRT"])
def test_fusion_seqpool_concat_and_cvm(kind):
    w = 4
    x0, x1 = rand(sum(LENS), w, seed=1, scale=1) + 1, rand(6, w, seed=2, scale=1) + 1
    lens1 = [1, 2, 2, 1]
    got = run_multi("fusion_seqpool_concat", {"X": [("a", x0, LENS), ("b", x1, lens1)]},
                  {"pooltype": kind})
    want = np.concatenate([_pool(x0, LENS, kind), _pool(x1, lens1, kind)], 1)
    np.testing.assert_allclose(np.asarray(got), want, atol=1e-12)
    assert got.recursive_sequence_lengths() == [[1, 1, 1, 1]]
    got = run_multi("fusion_seqpool_cvm_concat", {"X": [("a", x0, LENS), ("b", x1, lens1)],
                                                "CVM": np.ones((4, 2))}, {"pooltype": kind})
    for k, (x, lens) in enumerate([(x0, LENS), (x1, lens1)]):
        p = _pool(x, lens, kind)
        show = np.log(p[:, 0] + 1)
        part = np.asarray(got)[:, k * w:(k + 1) * w]
        np.testing.assert_allclose(part[:, 0], show, atol=1e-12)
        np.testing.assert_allclose(part[:, 1], np.log(p[:, 1] + 1) - show, atol=1e-12)
        np.testing.assert_allclose(part[:, 2:], p[:, 2:], atol=1e-12)


def test_fusion_seqexpand_concat_fc():
    lens, D = [2, 3], 4
    x0, x1, x2 = rand(5, 3, seed=1), rand(2, 2, seed=2), rand(2, 1, seed=3)
    w, b = rand(6, D, seed=4), rand(1, D, seed=5)
    got = run_multi("fusion_seqexpand_concat_fc",
                    {"X": [("x0", x0, lens), ("x1", x1, [1, 1]), ("x2", x2, [1, 1])],
                     "FCWeight": w, "FCBias": b}, {"fc_activation": "tanh"})
    full = np.concatenate([x0, np.repeat(x1, lens, 0), np.repeat(x2, lens, 0)], 1)
    np.testing.assert_allclose(np.asarray(got), np.tanh(full @ w + b), atol=1e-12)
    assert got.recursive_sequence_lengths() == [lens]


def test_fusion_seqconv_eltadd_relu_is_sequence_conv_plus_bias_relu():
    x, filt, b = rand(sum(LENS), 3, seed=1), rand(9, 2, seed=2), rand(1, 2, seed=3)
    attrs = {"contextLength": 3, "contextStart": -1}
    got = run_multi("fusion_seqconv_eltadd_relu", {"X": (x, LENS), "Filter": filt, "Bias": b},
                    attrs)
    conv, = run("sequence_conv", {"X": (x, LENS), "Filter": filt}, attrs, ["Out"])
    np.testing.assert_allclose(np.asarray(got), np.maximum(conv + b, 0), atol=1e-12)
    assert got.recursive_sequence_lengths() == [LENS]


def test_fusion_repeated_fc_relu_and_squared_mat_sub():
    x, ws, bs = rand(3, 4, seed=1), [rand(4, 5, seed=2), rand(5, 2, seed=3)], \
        [rand(1, 5, seed=4), rand(1, 2, seed=5)]
    out, relu0 = run_multi("fusion_repeated_fc_relu",
                           {"X": x, "W": [("w0", ws[0], None), ("w1", ws[1], None)],
                            "Bias": [("b0", bs[0], None), ("b1", bs[1], None)]}, {},
                           outs=("Out", "ReluOut"))
    y0 = np.maximum(x @ ws[0] + bs[0], 0)
    np.testing.assert_allclose(np.asarray(relu0[0]) if isinstance(relu0, list) else
                               np.asarray(relu0), y0, atol=1e-12)
    np.testing.assert_allclose(np.asarray(out), np.maximum(y0 @ ws[1] + bs[1], 0), atol=1e-12)
    a, c = rand(3, 4, seed=6), rand(4, 2, seed=7)
    got = run_multi("fusion_squared_mat_sub", {"X": a, "Y": c}, {"scalar": -0.5})
    np.testing.assert_allclose(np.asarray(got), ((a @ c) ** 2 - (a * a) @ (c * c)) * -0.5,
                               atol=1e-12)


def test_sequence_fusion_errors():
    with pytest.raises(ValueError, match="fusion_seqpool_concat: only axis=1 is supported"):
        run_multi("fusion_seqpool_concat", {"X": [("a", rand(4, 2), [4])]}, {"axis": 0})
    with pytest.raises(ValueError, match="fusion_seqpool_cvm_concat: only use_cvm=True"):
        run_multi("fusion_seqpool_cvm_concat", {"X": [("a", rand(4, 2), [4])],
                                                "CVM": rand(1, 2)}, {"use_cvm": False})
    with pytest.raises(ValueError, match="every X must hold the same number of sequences"):
        run_multi("fusion_seqpool_concat", {"X": [("a", rand(4, 2), [4]),
                                                  ("b", rand(4, 2), [2, 2])]}, {})


def test_fused_embedding_seq_pool_and_its_table_gradient():
    """Per sequence, the sum over its rows of the rows' k looked-up embeddings side by side;
    padding_idx contributes zeros; dW accumulates dOut's slices (float64 numeric check)."""
    from tests.ops.test_rnn import check_grad
    w = rand(6, 3, seed=1)
    ids = np.array([[4, 3], [4, 3], [2, 1], [5, 1]], np.int64).reshape(4, 2, 1)
    out = run_multi("fused_embedding_seq_pool", {"W": w, "Ids": (ids, [3, 1])}, {})
    want = np.stack([np.concatenate([w[4] + w[4] + w[2], w[3] + w[3] + w[1]]),
                     np.concatenate([w[5], w[1]])])
    np.testing.assert_allclose(np.asarray(out), want, atol=1e-12)
    pad = run_multi("fused_embedding_seq_pool", {"W": w, "Ids": (ids, [3, 1])},
                    {"padding_idx": 3})
    want[0, 3:] = w[1]
    np.testing.assert_allclose(np.asarray(pad), want, atol=1e-12)
    check_grad("fused_embedding_seq_pool", {"W": w, "Ids": (ids, [3, 1])},
               {"padding_idx": 4}, ["Out"], ["W"])
    with pytest.raises(ValueError, match="only combiner='sum' is supported"):
        run_multi("fused_embedding_seq_pool", {"W": w, "Ids": (ids, [3, 1])},
                  {"combiner": "mean"})


def test_paddle_version_module():
    """``import paddle.version`` (fluid 1.8's generated module): fluidlite is no MKL build."""
    from fluidlite.paddle_compat import version
    assert (version.full_version, version.major, version.minor) == ("1.8.5", "1", "8")
    assert version.mkl() == "OFF" == version.with_mkl
