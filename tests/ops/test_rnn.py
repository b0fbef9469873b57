"""Recurrent ops: forward against per-sequence, per-step NumPy references (plain loops, written
from the formulas), LoD of the outputs, numeric float64 gradient checks through several steps,
and clear errors. LoD ops (lstm, lstmp, gru) are static-only, as in fluid 1.8 (so their
gradient tests go through ``lod_grad_case`` rather than the OpTest harness that the dygraph
suite re-runs); gru_unit, lstm_unit and cudnn_lstm are OpTests."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core.registry import VarSpec, get_op_def
from fluidlite.ops.rnn_unit import cudnn_lstm_weight_size
from fluidlite.testing import OpTest, assert_grads_close, numeric_grad

LENS = [3, 1, 0, 4, 2]         # unsorted lengths, an empty sequence, ties broken by order


def sig(x):
    return 1 / (1 + np.exp(-x))


ACT = {"sigmoid": sig, "tanh": np.tanh, "relu": lambda x: np.maximum(x, 0),
       "identity": lambda x: x}


def rand(*shape, seed=0, scale=0.5):
    return np.random.default_rng(seed).uniform(-scale, scale, shape)


def seqs(x, lens):
    return np.split(x, np.cumsum(lens)[:-1])


# -- references -------------------------------------------------------------------------------
def ref_lstm(x, lens, w, b, h0=None, c0=None, peep=True, reverse=False, gate="sigmoid",
             cell="tanh", cand="tanh", proj_w=None, proj_act="tanh", cell_clip=0.0,
             proj_clip=0.0):
    """Per-sequence loop. Returns (hidden or projection, cell) in input row order."""
    D = w.shape[1] // 4
    P = w.shape[0]
    b = b.reshape(-1)
    outs, cells = [], []
    for k, s in enumerate(seqs(x, lens)):
        rec = np.zeros(P) if h0 is None else h0[k]
        c = np.zeros(D) if c0 is None else c0[k]
        o_seq, c_seq = [None] * len(s), [None] * len(s)
        steps = range(len(s) - 1, -1, -1) if reverse else range(len(s))
        for t in steps:
            g = s[t] + rec @ w + b[:4 * D]
            gc, gi, gf, go = np.split(g, 4)
            if peep:
                gi = gi + c * b[4 * D:5 * D]
                gf = gf + c * b[5 * D:6 * D]
            i, f, cnd = ACT[gate](gi), ACT[gate](gf), ACT[cand](gc)
            c = f * c + i * cnd
            if cell_clip:
                c = np.clip(c, -cell_clip, cell_clip)
            if peep:
                go = go + c * b[6 * D:]
            h = ACT[gate](go) * ACT[cell](c)
            if proj_w is not None:
                h = ACT[proj_act](h @ proj_w)
                if proj_clip:
                    h = np.clip(h, -proj_clip, proj_clip)
            rec = h
            o_seq[t], c_seq[t] = h, c
        outs += o_seq
        cells += c_seq
    return np.array(outs).reshape(-1, P), np.array(cells).reshape(-1, D)


def ref_gru_step(x, h, w, act="tanh", gate="sigmoid", origin=False):
    D = h.shape[-1]
    flat = w.reshape(-1)
    wg, wc = flat[:2 * D * D].reshape(D, 2 * D), flat[2 * D * D:].reshape(D, D)
    u = ACT[gate](x[..., :D] + h @ wg[:, :D])
    r = ACT[gate](x[..., D:2 * D] + h @ wg[:, D:])
    c = ACT[act](x[..., 2 * D:] + (r * h) @ wc)
    hn = u * h + (1 - u) * c if origin else (1 - u) * h + u * c
    return u, r, c, r * h, hn


def ref_gru(x, lens, w, b, h0=None, reverse=False, origin=False, act="tanh", gate="sigmoid"):
    D = w.shape[0]
    out = []
    for k, s in enumerate(seqs(x + b.reshape(-1), lens)):
        h = np.zeros(D) if h0 is None else h0[k]
        o = [None] * len(s)
        for t in (range(len(s) - 1, -1, -1) if reverse else range(len(s))):
            h = ref_gru_step(s[t], h, w, act, gate, origin)[-1]
            o[t] = h
        out += o
    return np.array(out).reshape(-1, D)


# -- running LoD ops --------------------------------------------------------------------------
def build(op_type, inputs, attrs, outs):
    """One-op program; ``inputs``: slot -> array, or (array, lens) for the LoD input."""
    prog = fluid.Program()
    block = prog.global_block()
    feed, in_vars = {}, {}
    for slot, v in inputs.items():
        arr, lens = v if isinstance(v, tuple) else (v, None)
        name = slot.lower()
        in_vars[slot] = block.create_var(name=name, shape=arr.shape, dtype=arr.dtype,
                                         is_data=True, lod_level=1 if lens else 0,
                                         stop_gradient=False)
        feed[name] = fluid.create_lod_tensor(arr, [lens], fluid.CPUPlace()) if lens else arr
    opdef = get_op_def(op_type)
    out_vars = {s.name: block.create_var(name=s.name.lower() + "_out") for s in opdef.out_slots
                if s.name in outs or not s.dispensable}
    with fluid.program_guard(prog, fluid.Program()):
        block.append_op(op_type, in_vars, out_vars, dict(attrs))
    return prog, feed, out_vars


def run(op_type, inputs, attrs, outs, return_numpy=True):
    prog, feed, out_vars = build(op_type, inputs, attrs, outs)
    return fluid.Executor().run(prog, feed=feed, fetch_list=[out_vars[o] for o in outs],
                                scope=fluid.Scope(), return_numpy=return_numpy)


def check_grad(op_type, inputs, attrs, outs, wrt, tol=5e-3, delta=1e-4):
    """Analytic gradient of sum_k sum(out_k * P_k) (fixed random P_k) w.r.t. each input in
    ``wrt`` vs central differences, float64."""
    prog, feed, out_vars = build(op_type, inputs, attrs, outs)
    exe = fluid.Executor()
    shapes = [np.asarray(a).shape for a in exe.run(prog, feed=feed, scope=fluid.Scope(),
                                                    fetch_list=[out_vars[o] for o in outs])]
    with fluid.program_guard(prog, fluid.Program()):
        terms = []
        for k, (o, shape) in enumerate(zip(outs, shapes)):
            p = fluid.data(name=f"proj{k}", shape=list(shape), dtype="float64")
            feed[p.name] = rand(*shape, seed=10 + k, scale=1.0)
            terms.append(fluid.layers.reduce_sum(fluid.layers.elementwise_mul(out_vars[o], p)))
        loss = fluid.layers.sums(terms) if len(terms) > 1 else terms[0]
        xs = [prog.global_block().var(w.lower()) for w in wrt]
        grads = fluid.gradients(loss, xs)
    analytic = exe.run(prog, feed=feed, fetch_list=grads, scope=fluid.Scope())
    for w, a in zip(wrt, analytic):
        arr, lens = inputs[w] if isinstance(inputs[w], tuple) else (inputs[w], None)

        def f(fd, key=w.lower(), lens=lens):
            fd = dict(feed, **fd)
            if lens:
                fd[key] = fluid.create_lod_tensor(fd[key], [lens], fluid.CPUPlace())
            return float(np.asarray(exe.run(prog, feed=fd, fetch_list=[loss],
                                            scope=fluid.Scope())[0]).reshape(-1)[0])

        numeric = numeric_grad(f, {w.lower(): arr}, w.lower(), delta)
        assert_grads_close(a, numeric, tol, f"{op_type} d{w}")


def lod_grad_case(op_type, inputs, attrs, outs, wrt):
    check_grad(op_type, inputs, attrs, outs, wrt)


# -- lstm -------------------------------------------------------------------------------------
def lstm_inputs(D=3, lens=LENS, peep=True, init=True, seed=0):
    T, N = sum(lens), len(lens)
    ins = {"Input": (rand(T, 4 * D, seed=seed), lens), "Weight": rand(D, 4 * D, seed=seed + 1),
           "Bias": rand(1, (7 if peep else 4) * D, seed=seed + 2)}
    if init:
        ins["H0"] = rand(N, D, seed=seed + 3)
        ins["C0"] = rand(N, D, seed=seed + 4)
    return ins


@pytest.mark.parametrize("peep,reverse,acts", [
    (True, False, ("sigmoid", "tanh", "tanh")),
    (False, True, ("sigmoid", "tanh", "tanh")),
    (True, True, ("sigmoid", "relu", "identity")),
])
def test_lstm_forward(peep, reverse, acts):
    ins = lstm_inputs(peep=peep)
    attrs = dict(use_peepholes=peep, is_reverse=reverse, gate_activation=acts[0],
                 cell_activation=acts[1], candidate_activation=acts[2])
    hid, cell = run("lstm", ins, attrs, ["Hidden", "Cell"], return_numpy=False)
    rh, rc = ref_lstm(ins["Input"][0], LENS, ins["Weight"], ins["Bias"], ins["H0"], ins["C0"],
                      peep, reverse, *acts)
    np.testing.assert_allclose(np.asarray(hid), rh, atol=1e-10)
    np.testing.assert_allclose(np.asarray(cell), rc, atol=1e-10)
    assert hid.recursive_sequence_lengths() == [LENS]


def test_lstm_without_initial_state_and_bias():
    ins = lstm_inputs(init=False)
    del ins["Bias"]
    hid, = run("lstm", ins, {"use_peepholes": False}, ["Hidden"])
    rh, _ = ref_lstm(ins["Input"][0], LENS, ins["Weight"], np.zeros(12), peep=False)
    np.testing.assert_allclose(hid, rh, atol=1e-10)


@pytest.mark.parametrize("peep,reverse", [(True, False), (False, True)])
def test_lstm_grad(peep, reverse):
    ins = lstm_inputs(D=2, lens=[3, 1, 2], peep=peep)
    lod_grad_case("lstm", ins, {"use_peepholes": peep, "is_reverse": reverse},
                  ["Hidden", "Cell"], ["Input", "Weight", "Bias", "H0", "C0"])


def test_lstm_errors():
    ins = lstm_inputs()
    ins["Input"] = ins["Input"][0]            # no LoD
    with pytest.raises(ValueError, match="lstm: Input has no LoD"):
        run("lstm", ins, {}, ["Hidden"])
    ins = lstm_inputs()
    ins["H0"] = rand(2, 3)
    with pytest.raises(ValueError, match=r"lstm: H0 must be \[5, 3\]"):
        run("lstm", ins, {}, ["Hidden"])
    ins = lstm_inputs()
    with pytest.raises(ValueError, match="gate_activation must be one of"):
        run("lstm", ins, {"gate_activation": "softplus"}, ["Hidden"])
    ins = lstm_inputs()
    ins["Input"] = (rand(sum(LENS), 8), LENS)
    with pytest.raises(ValueError, match="Input width must be 4 \\* D = 12"):
        build("lstm", ins, {}, ["Hidden"])


# -- lstmp ------------------------------------------------------------------------------------
def lstmp_inputs(D=3, P=2, lens=LENS, peep=True, seed=0):
    T, N = sum(lens), len(lens)
    return {"Input": (rand(T, 4 * D, seed=seed), lens), "Weight": rand(P, 4 * D, seed=seed + 1),
            "ProjWeight": rand(D, P, seed=seed + 5), "Bias": rand(1, (7 if peep else 4) * D,
                                                                  seed=seed + 2),
            "H0": rand(N, P, seed=seed + 3), "C0": rand(N, D, seed=seed + 4)}


@pytest.mark.parametrize("peep,reverse,clip", [(True, False, 0.0), (False, True, 0.0),
                                               (True, False, 0.3)])
def test_lstmp_forward(peep, reverse, clip):
    ins = lstmp_inputs(peep=peep)
    attrs = dict(use_peepholes=peep, is_reverse=reverse, cell_clip=clip, proj_clip=clip / 2,
                 proj_activation="tanh")
    proj, cell = run("lstmp", ins, attrs, ["Projection", "Cell"], return_numpy=False)
    rp, rc = ref_lstm(ins["Input"][0], LENS, ins["Weight"], ins["Bias"], ins["H0"], ins["C0"],
                      peep, reverse, proj_w=ins["ProjWeight"], cell_clip=clip,
                      proj_clip=clip / 2)
    np.testing.assert_allclose(np.asarray(proj), rp, atol=1e-10)
    np.testing.assert_allclose(np.asarray(cell), rc, atol=1e-10)
    assert proj.recursive_sequence_lengths() == [LENS]


def test_lstmp_grad():
    ins = lstmp_inputs(D=2, P=2, lens=[2, 3])
    lod_grad_case("lstmp", ins, {"is_reverse": True}, ["Projection", "Cell"],
                  ["Input", "Weight", "ProjWeight", "Bias", "H0", "C0"])


# -- gru --------------------------------------------------------------------------------------
def gru_inputs(D=3, lens=LENS, seed=0):
    return {"Input": (rand(sum(lens), 3 * D, seed=seed), lens),
            "H0": rand(len(lens), D, seed=seed + 1), "Weight": rand(D, 3 * D, seed=seed + 2),
            "Bias": rand(1, 3 * D, seed=seed + 3)}


@pytest.mark.parametrize("reverse,origin", [(False, False), (True, True), (True, False)])
def test_gru_forward(reverse, origin):
    ins = gru_inputs()
    hid, = run("gru", ins, {"is_reverse": reverse, "origin_mode": origin}, ["Hidden"],
               return_numpy=False)
    ref = ref_gru(ins["Input"][0], LENS, ins["Weight"], ins["Bias"], ins["H0"], reverse, origin)
    np.testing.assert_allclose(np.asarray(hid), ref, atol=1e-10)
    assert hid.recursive_sequence_lengths() == [LENS]


def test_gru_weight_layout_is_fluids_memory_split():
    """W_ur is the first 2*D*D elements of the buffer, not the first 2D columns."""
    ins = gru_inputs(D=2, lens=[1])
    ins["H0"] = np.ones((1, 2))
    ins["Bias"] = np.zeros((1, 6))
    ins["Input"] = (np.zeros((1, 6)), [1])
    w = np.arange(12.0).reshape(2, 6) / 10
    ins["Weight"] = w
    hid, = run("gru", ins, {}, ["Hidden"])
    u = sig(np.ones(2) @ w.reshape(-1)[:8].reshape(2, 4)[:, :2])
    r = sig(np.ones(2) @ w.reshape(-1)[:8].reshape(2, 4)[:, 2:])
    c = np.tanh((r * 1.0) @ w.reshape(-1)[8:].reshape(2, 2))
    np.testing.assert_allclose(hid[0], (1 - u) + u * c, atol=1e-12)


@pytest.mark.parametrize("reverse", [False, True])
def test_gru_intermediates_are_in_fluids_batch_layout(reverse):
    """fluid's gru writes BatchGate / BatchResetHiddenPrev / BatchHidden through
    sequence2batch: step 0's rows of the sequences sorted longest first, then step 1's, ...;
    BatchHidden is the new h (what fluid's gru_grad reads back)."""
    ins = gru_inputs()
    x, w, b, h0 = ins["Input"][0], ins["Weight"], ins["Bias"], ins["H0"]
    gate, rh, bh = run("gru", ins, {"is_reverse": reverse},
                       ["BatchGate", "BatchResetHiddenPrev", "BatchHidden"])
    off = np.concatenate([[0], np.cumsum(LENS)])
    order = sorted((k for k in range(len(LENS)) if LENS[k]), key=lambda k: -LENS[k])
    h = {k: h0[k] for k in order}
    want_g, want_rh, want_h = [], [], []
    for t in range(max(LENS)):
        for k in [k for k in order if LENS[k] > t]:
            row = off[k + 1] - 1 - t if reverse else off[k] + t
            u, r, c, rhk, hn = ref_gru_step(x[row] + b.reshape(-1), h[k], w)
            want_g.append(np.concatenate([u, r, c]))
            want_rh.append(rhk)
            want_h.append(hn)
            h[k] = hn
    np.testing.assert_allclose(gate, want_g, atol=1e-12)
    np.testing.assert_allclose(rh, want_rh, atol=1e-12)
    np.testing.assert_allclose(bh, want_h, atol=1e-12)


@pytest.mark.parametrize("origin", [False, True])
def test_gru_grad(origin):
    ins = gru_inputs(D=2, lens=[3, 1, 2])
    lod_grad_case("gru", ins, {"origin_mode": origin, "is_reverse": origin}, ["Hidden"],
                  ["Input", "H0", "Weight", "Bias"])


def test_gru_errors():
    ins = gru_inputs()
    ins["Weight"] = rand(3, 6)
    with pytest.raises(ValueError, match=r"gru: Weight must be \[D, 3D\]"):
        build("gru", ins, {}, ["Hidden"])


# -- gru_unit ---------------------------------------------------------------------------------
class TestGRUUnit(OpTest):
    op_type = "gru_unit"

    def _setup(self, origin, act=2, gate=1):
        N, D = 4, 3
        x, h = rand(N, 3 * D, seed=1), rand(N, D, seed=2)
        w, b = rand(D, 3 * D, seed=3), rand(1, 3 * D, seed=4)
        names = {0: "identity", 1: "sigmoid", 2: "tanh", 3: "relu"}
        u, r, c, rh, hn = ref_gru_step(x + b, h, w, names[act], names[gate], origin)
        self.inputs = {"Input": x, "HiddenPrev": h, "Weight": w, "Bias": b}
        self.attrs = {"origin_mode": origin, "activation": act, "gate_activation": gate}
        self.outputs = {"Gate": np.concatenate([u, r, c], 1), "ResetHiddenPrev": rh,
                        "Hidden": hn}

    @pytest.mark.parametrize("origin", [False, True])
    def test_gru_unit(self, origin):
        self._setup(origin)
        self.check_infer()
        self.check_output(atol=1e-10)
        self.check_grad(["Input", "HiddenPrev", "Weight", "Bias"], "Hidden", weighted=True)

    def test_gru_unit_identity_candidate(self):
        self._setup(False, act=0)
        self.check_output(atol=1e-10)
        self.check_grad(["Input", "HiddenPrev", "Weight"], "Hidden", weighted=True)


# -- lstm_unit --------------------------------------------------------------------------------
class TestLSTMUnit(OpTest):
    op_type = "lstm_unit"

    @pytest.mark.parametrize("forget_bias", [0.0, 0.7])
    def test_lstm_unit(self, forget_bias):
        x, c_prev = rand(3, 8, seed=5, scale=1.0), rand(3, 2, seed=6, scale=1.0)
        i, f, o, g = (x[:, :2], x[:, 2:4], x[:, 4:6], x[:, 6:])
        c = sig(f + forget_bias) * c_prev + sig(i) * np.tanh(g)
        self.inputs = {"X": x, "C_prev": c_prev}
        self.attrs = {"forget_bias": forget_bias}
        self.outputs = {"C": c, "H": sig(o) * np.tanh(c)}
        self.check_infer()
        self.check_output(atol=1e-12)
        self.check_grad(["X", "C_prev"], ["C", "H"], weighted=True)


# -- cudnn_lstm -------------------------------------------------------------------------------
def ref_cudnn_lstm(x, h0, c0, w, H, L, bidi):
    """Plain loops over layers, directions and steps; weights sliced from the flat buffer in
    the documented order (all W_ih/W_hh, then all b_ih/b_hh; gates i, f, c, o)."""
    T, B, I = x.shape
    dirs = 2 if bidi else 1
    pos = 0
    mats = {}
    for l in range(L):
        inp = I if l == 0 else H * dirs
        for d in range(dirs):
            mats[l, d, "ih"] = w[pos:pos + 4 * H * inp].reshape(4 * H, inp)
            pos += 4 * H * inp
            mats[l, d, "hh"] = w[pos:pos + 4 * H * H].reshape(4 * H, H)
            pos += 4 * H * H
    for l in range(L):
        for d in range(dirs):
            mats[l, d, "bih"] = w[pos:pos + 4 * H]
            mats[l, d, "bhh"] = w[pos + 4 * H:pos + 8 * H]
            pos += 8 * H
    assert pos == w.size
    last_h, last_c = np.zeros_like(h0), np.zeros_like(c0)
    inp = x
    for l in range(L):
        outs = []
        for d in range(dirs):
            k = l * dirs + d
            h, c = h0[k], c0[k]
            out = [None] * T
            for t in (range(T - 1, -1, -1) if d else range(T)):
                g = inp[t] @ mats[l, d, "ih"].T + mats[l, d, "bih"] + h @ mats[l, d, "hh"].T \
                    + mats[l, d, "bhh"]
                i, f, cc, o = np.split(g, 4, axis=1)
                c = sig(f) * c + sig(i) * np.tanh(cc)
                h = sig(o) * np.tanh(c)
                out[t] = h
            last_h[k], last_c[k] = h, c
            outs.append(np.stack(out))
        inp = np.concatenate(outs, axis=2)
    return inp, last_h, last_c


class TestCudnnLSTM(OpTest):
    op_type = "cudnn_lstm"

    def _setup(self, L, bidi, T=3, B=2, I=3, H=2):
        dirs = 2 if bidi else 1
        n = cudnn_lstm_weight_size(I, H, L, bidi)
        x, w = rand(T, B, I, seed=1, scale=1.0), rand(n, seed=2)
        h0, c0 = rand(L * dirs, B, H, seed=3), rand(L * dirs, B, H, seed=4)
        out, lh, lc = ref_cudnn_lstm(x, h0, c0, w, H, L, bidi)
        self.inputs = {"Input": x, "InitH": h0, "InitC": c0, "W": w}
        self.attrs = {"is_bidirec": bidi, "input_size": I, "hidden_size": H,
                      "num_layers": L, "dropout_prob": 0.0}
        self.outputs = {"Out": out, "LastH": lh, "LastC": lc}

    @pytest.mark.parametrize("L,bidi", [(1, False), (2, True)])
    def test_cudnn_lstm(self, L, bidi):
        self._setup(L, bidi)
        self.check_infer()
        self.check_output(atol=1e-10)
        self.check_grad(["Input", "InitH", "InitC", "W"], ["Out", "LastH", "LastC"],
                        weighted=True)

    def test_weight_size_matches_fluid_formula(self):
        # fluid 1.8 layers.lstm: per layer (in*H + H*H)*4 (*2 bidirectional) + 8H (*2)
        I, H, L = 5, 4, 3
        want = sum(((I if l == 0 else 2 * H) * H * 4 + H * H * 4) * 2 + H * 8 * 2
                   for l in range(L))
        assert cudnn_lstm_weight_size(I, H, L, True) == want

    def test_single_layer_matches_fluid_unittest_layout(self):
        """fluid's own test_lstm_cudnn_op reference: W_i W_f W_c W_o, R_i .. R_o, then b."""
        T, B, H = 2, 3, 2
        x, w = rand(T, B, H, seed=7), rand(cudnn_lstm_weight_size(H, H, 1, False), seed=8)
        blocks = [w[k * H * H:(k + 1) * H * H].reshape(H, H).T for k in range(8)]
        bs = [w[8 * H * H + k * H:8 * H * H + (k + 1) * H] for k in range(8)]
        h = c = np.zeros((B, H))
        for t in range(T):
            gi = sig(x[t] @ blocks[0] + h @ blocks[4] + bs[0] + bs[4])
            gf = sig(x[t] @ blocks[1] + h @ blocks[5] + bs[1] + bs[5])
            gc = np.tanh(x[t] @ blocks[2] + h @ blocks[6] + bs[2] + bs[6])
            go = sig(x[t] @ blocks[3] + h @ blocks[7] + bs[3] + bs[7])
            c = gi * gc + gf * c
            h = go * np.tanh(c)
        self.inputs = {"Input": x, "InitH": np.zeros((1, B, H)), "InitC": np.zeros((1, B, H)),
                       "W": w}
        self.attrs = {"input_size": H, "hidden_size": H, "num_layers": 1}
        self.outputs = {"LastH": h[None], "LastC": c[None]}
        self.check_output(atol=1e-10)

    def test_dropout_between_layers(self):
        self._setup(2, False)
        self.attrs["dropout_prob"] = 0.5
        prog, feed, outs, _ = self._build()
        exe = fluid.Executor()
        out, = exe.run(prog, feed=feed, fetch_list=[outs["Out"]], scope=fluid.Scope())
        assert not np.allclose(out, self.outputs["Out"])        # layer 0's output was dropped
        self.attrs["is_test"] = True
        prog, feed, outs, _ = self._build()
        out, = exe.run(prog, feed=feed, fetch_list=[outs["Out"]], scope=fluid.Scope())
        np.testing.assert_allclose(out, self.outputs["Out"], atol=1e-10)

    def test_bad_weight_size(self):
        self._setup(1, False)
        self.inputs["W"] = self.inputs["W"][:-1]
        with pytest.raises(ValueError, match="cudnn_lstm: W must hold"):
            self._build()


# -- fluid's clipped activations (issue 29) -------------------------------------------------------
def test_gru_and_lstm_use_fluids_clipped_activations():
    """fluid's gru / lstm kernels use math/detail/activation_functions.h: sigmoid of x
    clipped to [-40, 13] (a saturated gate is 0.99999774, not 1) and tanh as 2 / (1 +
    exp(min(-2x, 40))) - 1. Paddle 2.6 (CPU, same inputs) gives these Hidden values."""
    f = np.float32
    inp = np.linspace(-60, 60, 18).reshape(3, 6).astype(f)
    w = np.full((2, 6), 0.1, f)
    hid, gate = run("gru", {"Input": (inp, [3]), "Weight": w, "Bias": np.zeros((1, 6), f)},
                    {}, ["Hidden", "BatchGate"])
    np.testing.assert_allclose(hid.ravel(), [-4.2483541e-18, -4.2483541e-18, 2.1676037e-08,
                                             2.5210245e-05, 0.99999774, 0.99999774], rtol=1e-5)
    assert gate[2, 0] == f(1) / (f(1) + np.exp(f(-13)))        # the clipped update gate
    inp = np.linspace(-60, 60, 24).reshape(3, 8).astype(f)
    hid, cell = run("lstm", {"Input": (inp, [3]), "Weight": np.full((2, 8), 0.1, f),
                             "Bias": np.zeros((1, 14), f)}, {"use_peepholes": True},
                    ["Hidden", "Cell"])
    np.testing.assert_allclose(hid.ravel(), [0.0, 0.0, -3.9901212e-04, -6.8473399e-02,
                                             0.76142383, 0.73125219], rtol=2e-6, atol=1e-30)
    np.testing.assert_allclose(cell.ravel()[:2], [-4.2483541e-18, -4.2483541e-18], rtol=1e-5)


def test_lstm_refuses_an_input_of_rank_other_than_2():
    # fluid 1.8's LSTMOp::InferShape: "Input(X)'s rank must be 2" (a [5, 2, 8] input was
    # read by its last dim and accepted)
    w, b = VarSpec((2, 8), "float32"), VarSpec((1, 8), "float32")
    with pytest.raises(ValueError, match=r"lstm: Input\(X\)'s rank must be 2.*\[5, 2, 8\]"):
        get_op_def("lstm").infer(VarSpec((5, 2, 8), "float32"), None, None, w, b)
    assert get_op_def("lstm").infer(VarSpec((5, 8), "float32"), None, None, w, b)[
        "Hidden"].shape == (5, 2)


def test_schedule_is_the_per_step_definition():
    """``_Schedule`` builds every step at once; it must equal the definition step by step:
    step t runs the sorted sequences longer than t (a prefix, ties in input order), row
    off + t (off + len - 1 - t reversed); ``bounds`` cut ``batch_order`` into those rows."""
    from fluidlite.ops.rnn_core import _Schedule
    rng = np.random.default_rng(5)
    for _ in range(400):
        lens = rng.integers(0, 6, int(rng.integers(0, 7)))
        off = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
        order = np.argsort(-lens, kind="stable")
        for reverse in (False, True):
            sch = _Schedule("gru", [off.tolist()], int(off[-1]), reverse)
            want = []
            for t in range(int(lens.max()) if lens.size else 0):
                s = np.array([k for k in order if lens[k] > t], np.int64)
                want.append(off[s] + (lens[s] - 1 - t if reverse else t))
            assert np.array_equal(sch.order, order) and len(sch.rows) == len(want)
            for got, w in zip(sch.rows, want):
                assert got.dtype == np.int64 and np.array_equal(got, w)
            flat = sch.batch_order()
            assert np.array_equal(flat, np.concatenate(want) if want else np.zeros(0))
            assert [flat[a:b].tolist() for a, b in sch.bounds()] == [w.tolist() for w in want]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gru_runs_gru_units_operations_bit_for_bit(dtype):
    """The batch-layout recurrence (``_gru_batch``, in place) against ``_gru_step`` (the
    gru_unit kernel: fresh arrays, rows gathered per step): the same operations in the same
    order, so the same bits, for every activation, both modes, H0 and bias or not."""
    from fluidlite.ops import rnn_core
    op = get_op_def("gru")
    rng = np.random.default_rng(6)
    acts = [("tanh", "sigmoid"), ("relu", "sigmoid"), ("identity", "tanh"), ("sigmoid", "relu")]
    for D, lens in ((128, [16]), (5, [3, 5, 1, 5]), (3, [2, 0, 2])):
        off = np.concatenate([[0], np.cumsum(lens)]).tolist()
        R = off[-1]
        for (act, gact), reverse, origin, h0, bias in zip(
                acts * 2, [False, True] * 4, [False, False, True, True] * 2,
                [None, 1] * 4, [1, 1, None, None] * 2):
            x = (rng.standard_normal((R, 3 * D)) * 3).astype(dtype)
            w = (rng.standard_normal((D, 3 * D)) * 0.5).astype(dtype)
            b = rng.standard_normal((1, 3 * D)).astype(dtype) if bias else None
            H0 = rng.standard_normal((len(lens), D)).astype(dtype) if h0 else None
            got = op.forward(x, H0, w, b, {"Input": [off]}, activation=act,
                             gate_activation=gact, is_reverse=reverse, origin_mode=origin)
            sch = rnn_core._Schedule("gru", [off], R, reverse)
            Wg, Wc = rnn_core._gru_weights("gru", w)
            f = rnn_core._act("gru", act, "activation", clipped=True)[0]
            g = rnn_core._act("gru", gact, "gate_activation", clipped=True)[0]
            X = x + b if b is not None else x
            h = sch.sort(H0, D, x.dtype)
            want = {k: np.zeros((R, n * D), dtype) for k, n in (("Hidden", 1), ("gate", 3),
                                                                  ("rh", 1))}
            for r in sch.rows:
                u, rr, c, rh, hn = rnn_core._gru_step(X[r], h[:r.size], Wg, Wc, f, g, origin)
                want["Hidden"][r], want["rh"][r] = hn, rh
                want["gate"][r] = np.concatenate([u, rr, c], axis=1)
                h[:r.size] = hn
            perm = sch.batch_order()
            with np.errstate(all="ignore"):
                for key, ref in (("Hidden", want["Hidden"]), ("BatchGate", want["gate"][perm]),
                                 ("BatchResetHiddenPrev", want["rh"][perm]),
                                 ("BatchHidden", want["Hidden"][perm])):
                    assert got[key].dtype == np.dtype(dtype)
                    np.testing.assert_array_equal(got[key], ref, err_msg=key)


def _lstm_steps(G, rows, rec0, c0, W, cfg, ProjW):
    """The LSTM recurrence as the formulas read, a step at a time: rows gathered, fresh
    arrays (the reference ``_lstm_forward``'s in-place batch layout must equal bit for bit)."""
    D, R = cfg.D, G.shape[0]
    rec, c = rec0.copy(), c0.copy()
    out = {k: np.zeros((R, w), G.dtype) for k, w in (("h", D), ("c", D), ("gates", 4 * D),
                                                       ("r", rec.shape[1]))}
    gf, cf, kf, pf = cfg.gate[0], cfg.cell[0], cfg.cand[0], cfg.proj[0]
    for r in rows:
        n = r.size
        g = G[r] + rec[:n] @ W
        cp = c[:n]
        gc, gi, gfo, go = g[:, :D], g[:, D:2 * D], g[:, 2 * D:3 * D], g[:, 3 * D:]
        if cfg.peep is not None:
            gi, gfo = gi + cp * cfg.peep[0], gfo + cp * cfg.peep[1]
        cand, i, f = kf(gc), gf(gi), gf(gfo)
        cn = f * cp + i * cand
        if cfg.cell_clip > 0:
            cn = np.clip(cn, -cfg.cell_clip, cfg.cell_clip)
        if cfg.peep is not None:
            go = go + cn * cfg.peep[2]
        o = gf(go)
        h = o * cf(cn)
        out["h"][r], out["c"][r] = h, cn
        out["gates"][r] = np.concatenate([cand, i, f, o], axis=1)
        c[:n] = cn
        if ProjW is not None:
            p = pf(h @ ProjW)
            if cfg.proj_clip > 0:
                p = np.clip(p, -cfg.proj_clip, cfg.proj_clip)
            out["r"][r] = rec[:n] = p
        else:
            rec[:n] = h
    if ProjW is None:
        del out["r"]
    return out


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_lstm_recurrence_is_the_formulas_bit_for_bit(dtype):
    """``_lstm_forward`` (in place, batch layout, gate blocks copied apart) against
    ``_lstm_steps``: peepholes, cell and projection clips, every activation, D = 1."""
    from fluidlite.ops import rnn_core
    rng = np.random.default_rng(7)
    acts = [("sigmoid", "tanh", "tanh"), ("sigmoid", "relu", "identity"),
            ("tanh", "sigmoid", "relu")]
    for case in range(24):
        D = (1, 6, 64)[case % 3]
        lens = ([16], [3, 5, 1, 5, 0], [2, 2])[case // 3 % 3]
        peep, reverse = bool(case % 2), bool(case // 2 % 2)
        proj = (None, "tanh", "identity")[case % 3 if case % 4 else 0]
        gate, cell, cand = acts[case % 3]
        R, P = sum(lens), 4 if proj else D
        off = np.concatenate([[0], np.cumsum(lens)]).tolist()
        G = (rng.standard_normal((R, 4 * D)) * 2).astype(dtype)
        W = (rng.standard_normal((P, 4 * D)) * 0.5).astype(dtype)
        bias = rng.standard_normal((1, 7 * D if peep else 4 * D)).astype(dtype)
        ProjW = (rng.standard_normal((D, P)) * 0.5).astype(dtype) if proj else None
        cfg = rnn_core._LSTMCfg("lstmp", D, bias, peep, gate, cell, cand,
                                proj_activation=proj or "identity", cell_clip=0.7 * (case % 2),
                                proj_clip=0.5 * (case % 3 == 1), clipped=True)
        sch = rnn_core._Schedule("lstmp", [off], R, reverse)
        r0 = rng.standard_normal((len(lens), P)).astype(dtype)
        c0 = rng.standard_normal((len(lens), D)).astype(dtype)
        with np.errstate(all="ignore"):
            got = rnn_core._lstm_forward(G, sch.rows, r0, c0, W, cfg, ProjW)
            want = _lstm_steps(G, sch.rows, r0, c0, W, cfg, ProjW)
        assert sorted(got) == sorted(want)
        for key in want:
            assert got[key].dtype == np.dtype(dtype), key
            np.testing.assert_array_equal(got[key], want[key], err_msg=f"{key} case {case}")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("stride", [1, 2, 4, 8])
def test_in_place_clipped_activations_on_strided_views(dtype, stride):
    """The in-place clipped sigmoid and tanh of a column view (every stride; NumPy 2.4.6's
    in-place negative wrote wrong values at 16 and 64 bytes' stride) equal the fresh ones
    bit for bit, and leave the other columns alone."""
    from fluidlite.ops import rnn_core
    rng = np.random.default_rng(8)
    for fresh, in_place in ((rnn_core._sigmoid_clipped, rnn_core._sigmoid_clipped_),
                            (rnn_core._tanh_clipped, rnn_core._tanh_clipped_)):
        x = (rng.standard_normal((9, stride)) * 20).astype(dtype)
        x[0, 0], x[1, 0] = np.inf, -np.inf
        before = x.copy()
        with np.errstate(all="ignore"):
            want = fresh(x[:, :1].copy())
            in_place(x[:, :1])
        np.testing.assert_array_equal(x[:, :1], want)
        np.testing.assert_array_equal(x[:, 1:], before[:, 1:])
