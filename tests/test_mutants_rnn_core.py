"""Tests written from the mutation run of ``fluidlite/ops/rnn_core.py`` (issue 28, round 10,
docs/mutation.md): the shared LSTM / GRU recurrences that ``lstm``, ``lstmp``, ``gru`` and the
fused RNN ops run.

* the back-propagation of ``lstmp``'s ``cell_clip`` and ``proj_clip`` when they bite: fluid
  1.8's lstm_kernel.h zeroes the whole state gradient where ``|c| >= cell_clip`` and
  lstmp_op.h's ``_ClipGradFunctor`` passes the projection gradient only where
  ``-proj_clip < r < proj_clip`` -- checked against float64 central differences of the op's
  own forward (the clipped points are flat there), with clips below 1;
* an empty batch (a LoD with no sequences, or only empty ones): outputs and gradients are
  empty / zero, no crash;
* the batch layout (``BatchGate`` ...) of many sequences of tied lengths: the sequences are
  sorted by length, ties kept in input order (the documented stable order; fluid's
  sequence2batch used ``std::sort``, whose tie order is unspecified);
* the build-time width check of ``Input`` when its row count is unknown (-1).

References: central differences in float64, a per-sequence float64 GRU loop written from
fluid 1.8's gru formulas (tests/ops/test_rnn.py's ``ref_gru_step``), Python's stable
``sorted``."""
import numpy as np
import pytest

from fluidlite.core.dtypes import VarType
from fluidlite.core.registry import VarSpec, get_op_def
from tests.ops.test_rnn import ref_gru_step

F64 = VarType.FP64


def _numeric(f, arrays, name, delta=1e-6):
    """Central differences of the scalar ``f(arrays)`` w.r.t. ``arrays[name]``."""
    base = arrays[name]
    out = np.zeros_like(base)
    for idx in np.ndindex(base.shape):
        old = base[idx]
        base[idx] = old + delta
        hi = f(arrays)
        base[idx] = old - delta
        lo = f(arrays)
        base[idx] = old
        out[idx] = (hi - lo) / (2 * delta)
    return out


# -- lstmp: clips that bite, in the backward pass ----------------------------------------------
LSTMP_LOD = ((0, 3, 4, 6),)
LSTMP_SLOTS = ("Input", "H0", "C0", "Weight", "ProjWeight", "Bias")


def _lstmp_case(seed):
    rng = np.random.default_rng(seed)
    D, P, T, N = 3, 2, 6, 3
    return {"Input": rng.uniform(-1.5, 1.5, (T, 4 * D)), "H0": rng.uniform(-0.3, 0.3, (N, P)),
            "C0": rng.uniform(-0.6, 0.6, (N, D)), "Weight": rng.uniform(-1, 1, (P, 4 * D)),
            "ProjWeight": rng.uniform(-2, 2, (D, P)), "Bias": rng.uniform(-1, 1, (1, 7 * D))}


@pytest.mark.parametrize("reverse", [False, True])
def test_lstmp_gradients_through_biting_cell_and_projection_clips(reverse):
    attrs = dict(cell_clip=0.3, proj_clip=0.2, is_reverse=reverse)
    lstmp = get_op_def("lstmp")
    ins = _lstmp_case(1)
    rng = np.random.default_rng(2)

    def fwd(a):
        return lstmp.forward(*(a[s] for s in LSTMP_SLOTS), lod={"Input": LSTMP_LOD}, **attrs)

    out = fwd(ins)
    proj, cell = out["Projection"], out["Cell"]
    # both clips bite somewhere and leave other entries free, none sits near a clip boundary
    for v, clip in ((cell, 0.3), (proj, 0.2)):
        at = np.isclose(np.abs(v), clip, rtol=0, atol=1e-12)
        assert at.any() and (~at).any()
        assert np.all(at | (np.abs(np.abs(v) - clip) > 1e-4))
    wp, wc = rng.standard_normal(proj.shape), rng.standard_normal(cell.shape)

    def loss(a):
        o = fwd(a)
        return float((o["Projection"] * wp).sum() + (o["Cell"] * wc).sum())

    grads = lstmp.backward(*(ins[s] for s in LSTMP_SLOTS), proj, cell, out["BatchGate"],
                           out["BatchHidden"], wp, wc, lod={"Input": LSTMP_LOD}, **attrs)
    for s in LSTMP_SLOTS:
        want = _numeric(loss, ins, s)
        np.testing.assert_allclose(grads[s], want, rtol=1e-6, atol=1e-7, err_msg=s)


# -- empty batches -----------------------------------------------------------------------------
@pytest.mark.parametrize("offsets", [(0,), (0, 0, 0)])
def test_lstm_and_gru_of_a_batch_without_steps(offsets):
    D, n_seq = 2, len(offsets) - 1
    lod = {"Input": (offsets,)}
    rng = np.random.default_rng(3)
    lstm, gru = get_op_def("lstm"), get_op_def("gru")
    x4, w4 = np.zeros((0, 4 * D)), rng.standard_normal((D, 4 * D))
    b4 = rng.standard_normal((1, 7 * D))
    h0, c0 = rng.standard_normal((n_seq, D)), rng.standard_normal((n_seq, D))
    out = lstm.forward(x4, h0, c0, w4, b4, lod=lod)
    for slot, width in (("Hidden", D), ("Cell", D), ("BatchGate", 4 * D)):
        assert out[slot].shape == (0, width) and out[slot].dtype == np.float64
    g = lstm.backward(x4, h0, c0, w4, b4, out["Hidden"], out["Cell"], out["BatchGate"],
                      np.zeros((0, D)), np.zeros((0, D)), lod=lod)
    assert g["Input"].shape == (0, 4 * D)
    for s, arr in (("Weight", w4), ("Bias", b4), ("H0", h0), ("C0", c0)):
        assert g[s].shape == arr.shape and not g[s].any(), s

    x3, w3, b3 = np.zeros((0, 3 * D)), rng.standard_normal((D, 3 * D)), np.ones((1, 3 * D))
    out = gru.forward(x3, h0, w3, b3, lod=lod)
    for slot, width in (("Hidden", D), ("BatchGate", 3 * D), ("BatchResetHiddenPrev", D),
                        ("BatchHidden", D)):
        assert out[slot].shape == (0, width) and out[slot].dtype == np.float64
    g = gru.backward(x3, h0, w3, b3, out["BatchGate"], out["BatchResetHiddenPrev"],
                     out["BatchHidden"], None, None, None, np.zeros((0, D)), lod=lod)
    assert g["Input"].shape == (0, 3 * D)
    for s, arr in (("Weight", w3), ("Bias", b3), ("H0", h0)):
        assert g[s].shape == arr.shape and not g[s].any(), s


# -- the batch layout with tied lengths --------------------------------------------------------
def test_gru_batch_layout_keeps_tied_sequences_in_input_order():
    """40 sequences of lengths 1..3 (many ties): BatchGate's rows are step 0 of the sequences
    sorted longest first, ties in input order, then step 1, ... (an unstable sort would
    permute the tied sequences' rows)."""
    rng = np.random.default_rng(4)
    D = 2
    lens = [int(v) for v in rng.integers(1, 4, 40)]
    off = np.concatenate([[0], np.cumsum(lens)])
    x = rng.uniform(-1, 1, (off[-1], 3 * D))
    h0, w = rng.uniform(-1, 1, (40, D)), rng.uniform(-1, 1, (D, 3 * D))
    out = get_op_def("gru").forward(x, h0, w, None, lod={"Input": (tuple(off),)})
    order = sorted(range(40), key=lambda k: -lens[k])       # stable: ties in input order
    h = {k: h0[k] for k in order}
    want_gate, want_hidden = [], []
    for t in range(max(lens)):
        for k in (k for k in order if lens[k] > t):
            u, r, c, _, hn = ref_gru_step(x[off[k] + t], h[k], w)
            want_gate.append(np.concatenate([u, r, c]))
            want_hidden.append(hn)
            h[k] = hn
    np.testing.assert_allclose(out["BatchGate"], want_gate, rtol=0, atol=1e-12)
    np.testing.assert_allclose(out["BatchHidden"], want_hidden, rtol=0, atol=1e-12)


# -- build-time checks -------------------------------------------------------------------------
@pytest.mark.parametrize("op,gates,hint", [
    ("lstm", 4, r" \(the size passed to dynamic_lstm\)"),
    ("gru", 3, r" \(D = size of dynamic_gru\)"),
])
@pytest.mark.parametrize("width", [10, 0])
def test_input_width_is_checked_when_the_row_count_is_unknown(op, gates, hint, width):
    opdef = get_op_def(op)
    x = VarSpec((-1, width), F64, 1)
    w = VarSpec((2, gates * 2), F64)
    args = (x, None, None, w, None) if op == "lstm" else (x, None, w, None)
    with pytest.raises(ValueError, match=rf"^{op}: Input width must be {gates} \* D = "
                                         rf"{gates * 2}{hint}, got {width}$"):
        opdef.infer(*args)
    ok = VarSpec((-1, gates * 2), F64, 1)
    spec = opdef.infer(*((ok,) + args[1:]))["Hidden"]
    assert spec.shape == (-1, 2)


# -- float32 stays float32 ---------------------------------------------------------------------
def test_lstmp_float32_outputs_and_gradients_stay_float32():
    lstmp = get_op_def("lstmp")
    ins = {k: v.astype(np.float32) for k, v in _lstmp_case(5).items()}
    args = [ins[s] for s in LSTMP_SLOTS]
    out = lstmp.forward(*args, lod={"Input": LSTMP_LOD}, cell_clip=0.3, proj_clip=0.2)
    for slot in ("Projection", "Cell", "BatchGate", "BatchHidden"):
        assert out[slot].dtype == np.float32, slot
    ref = lstmp.forward(*(a.astype(np.float64) for a in args), lod={"Input": LSTMP_LOD},
                        cell_clip=0.3, proj_clip=0.2)
    np.testing.assert_allclose(out["Projection"], ref["Projection"], rtol=0, atol=1e-5)
    rng = np.random.default_rng(6)
    dp = rng.standard_normal(out["Projection"].shape).astype(np.float32)
    dc = rng.standard_normal(out["Cell"].shape).astype(np.float32)
    g = lstmp.backward(*args, out["Projection"], out["Cell"], out["BatchGate"],
                       out["BatchHidden"], dp, dc, lod={"Input": LSTMP_LOD}, cell_clip=0.3,
                       proj_clip=0.2)
    for s in LSTMP_SLOTS:
        assert g[s].dtype == np.float32, s


# -- activation names and the bias size, checked naming the attribute ---------------------------
@pytest.mark.parametrize("attr", ["gate_activation", "cell_activation",
                                  "candidate_activation", "proj_activation"])
def test_lstmp_bad_activation_names_the_attribute(attr):
    ins = _lstmp_case(7)
    with pytest.raises(ValueError, match=rf"^lstmp: attribute {attr} must be one of \['sigmoid', "
                                         rf"'tanh', 'relu', 'identity'\], got 'softsign'$"):
        get_op_def("lstmp").forward(*(ins[s] for s in LSTMP_SLOTS), lod={"Input": LSTMP_LOD},
                                    **{attr: "softsign"})


@pytest.mark.parametrize("peep,size", [(True, 12), (False, 21)])
def test_lstm_bias_of_the_wrong_size_is_named(peep, size):
    D = 3
    rng = np.random.default_rng(8)
    x, w = rng.standard_normal((6, 4 * D)), rng.standard_normal((D, 4 * D))
    want = 7 * D if peep else 4 * D
    with pytest.raises(ValueError, match=rf"^lstm: Bias must have {want} elements \(\[1, {want}\] "
                                         rf"with use_peepholes={peep}\), got \[1, {size}\]$"):
        get_op_def("lstm").forward(x, None, None, w, np.zeros((1, size)),
                                   lod={"Input": LSTMP_LOD}, use_peepholes=peep)


# -- the Eigen (unclipped) sigmoid of gru_unit and cudnn_lstm ---------------------------------
def _eigen_sig(x):
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-x))


def test_gru_unit_gates_use_the_unclipped_sigmoid_without_overflow_warnings():
    """fluid 1.8's gru_unit_op.h applies activation_op.h's SigmoidFunctor (Eigen, no clamp):
    a gate input of 20 gives 1 - 2e-9, not the lstm / gru kernels' clamped 1 - 2.3e-6; an
    input of -800 overflows exp silently to a gate of 0."""
    D = 2
    x = np.array([[20.0, -800.0, 15.0, -20.0, 0.3, -0.2]])
    h = np.array([[0.5, -0.25]])
    w = np.zeros((D, 3 * D))
    b = np.zeros((1, 3 * D))
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = get_op_def("gru_unit").forward(x, h, w, b)
    u, r = _eigen_sig(x[:, :D]), _eigen_sig(x[:, D:2 * D])
    c = np.tanh(x[:, 2 * D:])
    np.testing.assert_allclose(out["Hidden"], (1 - u) * h + u * c, rtol=0, atol=1e-15)
    np.testing.assert_allclose(out["Gate"][:, :2 * D], np.concatenate([u, r], 1), rtol=0,
                               atol=1e-15)


def test_cudnn_lstm_gates_use_the_unclipped_sigmoid():
    """cudnn_lstm follows cuDNN / PyTorch: plain sigmoid gates (tests/ops/test_rnn.py's
    reference), here with gate inputs far past the lstm kernels' clamp at 13."""
    from fluidlite.ops.rnn_unit import cudnn_lstm_weight_size
    from tests.ops.test_rnn import ref_cudnn_lstm
    T, B, I, H = 2, 2, 2, 2
    rng = np.random.default_rng(9)
    w = rng.uniform(-1, 1, cudnn_lstm_weight_size(I, H, 1, False)) * 10
    x = rng.uniform(-3, 3, (T, B, I))
    h0, c0 = rng.uniform(-1, 1, (1, B, H)), rng.uniform(-1, 1, (1, B, H))
    out = get_op_def("cudnn_lstm").forward(x, h0, c0, w, hidden_size=H, input_size=I,
                                            num_layers=1, is_bidirec=False, dropout_prob=0.0)
    with np.errstate(over="ignore"):
        want, lh, lc = ref_cudnn_lstm(x, h0, c0, w, H, 1, False)
    np.testing.assert_allclose(out["Out"], want, rtol=0, atol=1e-13)
    np.testing.assert_allclose(out["LastC"], lc, rtol=0, atol=1e-13)


def test_gru_unit_width_message_has_no_hint():
    gru_unit = get_op_def("gru_unit")
    w, h = VarSpec((2, 6), F64), VarSpec((-1, 2), F64)
    with pytest.raises(ValueError, match=r"^gru_unit: Input width must be 3 \* D = 6, got 5$"):
        gru_unit.infer(VarSpec((-1, 5), F64), h, w, None)
    assert gru_unit.infer(VarSpec((-1, 6), F64), h, w, None)["Hidden"].shape == (-1, 2)
