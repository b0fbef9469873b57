"""Tests written from the mutation run of ``fluidlite/ops/rnn.py`` (issue 28, docs/mutation.md):
the build-time checks, messages and output specs of ``lstm`` / ``lstmp`` / ``gru``, ``lstmp``
with clips that bite and gate pre-activations past fluid's sigmoid clamp, the LoD of every
output, the initial-state checks, and the defaults. References: a per-sequence float64 loop
written here from fluid 1.8's formulas (dynamic_lstmp's docs; gate columns [c, i, f, o], bias
[b_c, b_i, b_f, b_o, w_ic, w_fc, w_oc]) and its activation_functions.h (sigmoid's input
clamped to [-40, 13])."""
import numpy as np
import pytest

from fluidlite.core.dtypes import VarType
from fluidlite.core.registry import VarSpec, get_op_def

F64 = VarType.FP64


def _sig(x):                      # fluid's activation_functions.h: input clamped to [-40, 13]
    return 1.0 / (1.0 + np.exp(-np.clip(x, -40.0, 13.0)))


def _lstmp_ref(x, lens, w, pw, b, r0, c0, peep=True, reverse=False, cell_clip=0.0,
               proj_clip=0.0):
    """lstmp; lstm when ``pw`` is None (the recurrent state is h)."""
    D = w.shape[1] // 4
    b = b.reshape(-1)
    proj, cells, at = [None] * len(x), [None] * len(x), 0
    for k, n in enumerate(lens):
        r, c = r0[k].copy(), c0[k].copy()
        steps = range(at + n - 1, at - 1, -1) if reverse else range(at, at + n)
        for t in steps:
            g = x[t] + r @ w + b[:4 * D]
            gc, gi, gf, go = g[:D], g[D:2 * D], g[2 * D:3 * D], g[3 * D:]
            if peep:
                gi, gf = gi + c * b[4 * D:5 * D], gf + c * b[5 * D:6 * D]
            c = _sig(gf) * c + _sig(gi) * np.tanh(gc)
            if cell_clip > 0:
                c = np.clip(c, -cell_clip, cell_clip)
            if peep:
                go = go + c * b[6 * D:]
            h = _sig(go) * np.tanh(c)
            r = h if pw is None else np.tanh(h @ pw)
            if proj_clip > 0:
                r = np.clip(r, -proj_clip, proj_clip)
            proj[t], cells[t] = r, c
        at += n
    return np.array(proj), np.array(cells)


LENS = [3, 1, 2]
LOD = ((0, 3, 4, 6),)


def _lstmp_inputs(D=3, P=2, scale=1.0, seed=0):
    rng = np.random.default_rng(seed)
    T, N = sum(LENS), len(LENS)
    x = rng.uniform(-1, 1, (T, 4 * D)) * scale
    return dict(Input=x, H0=rng.uniform(-1, 1, (N, P)), C0=rng.uniform(-1, 1, (N, D)),
                Weight=rng.uniform(-1, 1, (P, 4 * D)), ProjWeight=rng.uniform(-2, 2, (D, P)),
                Bias=rng.uniform(-1, 1, (1, 7 * D)))


def _run_lstmp(ins, **attrs):
    return get_op_def("lstmp").forward(ins["Input"], ins["H0"], ins["C0"], ins["Weight"],
                                       ins["ProjWeight"], ins["Bias"], lod={"Input": LOD},
                                       **attrs)


@pytest.mark.parametrize("reverse", [False, True])
def test_lstmp_with_biting_clips_and_saturated_gates(reverse):
    ins = _lstmp_inputs(scale=20.0)          # gate inputs far past sigmoid's clamp at 13
    out = _run_lstmp(ins, is_reverse=reverse, cell_clip=0.3, proj_clip=0.05)
    rp, rc = _lstmp_ref(ins["Input"], LENS, ins["Weight"], ins["ProjWeight"], ins["Bias"],
                        ins["H0"], ins["C0"], reverse=reverse, cell_clip=0.3, proj_clip=0.05)
    assert np.abs(rc).max() == pytest.approx(0.3) and np.abs(rp).max() == pytest.approx(0.05)
    np.testing.assert_allclose(out["Projection"], rp, rtol=0, atol=1e-13)
    np.testing.assert_allclose(out["Cell"], rc, rtol=0, atol=1e-13)
    for slot in ("Projection", "Cell", "BatchGate", "BatchCellPreAct", "BatchHidden"):
        assert out["lod"][slot] == LOD


def test_lstmp_defaults_are_fluids():
    # dynamic_lstmp: peepholes on, forward order, no clips, sigmoid / tanh / tanh / tanh
    ins = _lstmp_inputs(scale=8.0, seed=1)
    out = _run_lstmp(ins)
    rp, rc = _lstmp_ref(ins["Input"], LENS, ins["Weight"], ins["ProjWeight"], ins["Bias"],
                        ins["H0"], ins["C0"])
    assert np.abs(rc).max() > 1.0               # a cell_clip of 1 would have changed it
    np.testing.assert_allclose(out["Projection"], rp, rtol=0, atol=1e-13)
    np.testing.assert_allclose(out["Cell"], rc, rtol=0, atol=1e-13)
    d = get_op_def("lstmp").attr_defaults
    assert (d["use_peepholes"], d["is_reverse"], d["cell_clip"], d["proj_clip"]) == \
        (True, False, 0.0, 0.0)


def test_lstmp_gradient_defaults_match_the_forward_defaults():
    ins = _lstmp_inputs(scale=3.0, seed=2)
    lstmp = get_op_def("lstmp")
    fw = _run_lstmp(ins)
    rng = np.random.default_rng(3)
    dp, dc = rng.standard_normal(fw["Projection"].shape), rng.standard_normal(fw["Cell"].shape)
    args = (ins["Input"], ins["H0"], ins["C0"], ins["Weight"], ins["ProjWeight"], ins["Bias"],
            fw["Projection"], fw["Cell"], fw["BatchGate"], fw["BatchHidden"], dp, dc)
    got = lstmp.backward(*args, lod={"Input": LOD})
    want = lstmp.backward(*args, lod={"Input": LOD}, use_peepholes=True, is_reverse=False,
                          cell_clip=0.0, proj_clip=0.0, gate_activation="sigmoid",
                          cell_activation="tanh", candidate_activation="tanh",
                          proj_activation="tanh")
    assert set(got) == set(want)
    for k in want:
        np.testing.assert_array_equal(got[k], want[k])
    # recomputing the forward (no intermediate outputs) gives the same gradients
    args2 = args[:8] + (None, None) + args[10:]
    again = lstmp.backward(*args2, lod={"Input": LOD})
    for k in want:
        np.testing.assert_allclose(again[k], want[k], rtol=1e-12, atol=1e-12)


def test_lstmp_initial_state_checks_name_the_slot():
    ins = _lstmp_inputs()
    bad = dict(ins, H0=np.zeros((3, 3)))
    with pytest.raises(ValueError, match=r"^lstmp: H0 must be \[3, 2\] \(one row per sequence of "
                                         r"Input\), got \[3, 3\]$"):
        _run_lstmp(bad)
    bad = dict(ins, C0=np.zeros((2, 3)))
    with pytest.raises(ValueError, match=r"^lstmp: C0 must be \[3, 3\] \(one row per sequence of "
                                         r"Input\), got \[2, 3\]$"):
        _run_lstmp(bad)
    with pytest.raises(ValueError, match=r"^lstmp: Input has no LoD"):
        get_op_def("lstmp").forward(ins["Input"], None, None, ins["Weight"], ins["ProjWeight"],
                                    None)
    # no initial states and no bias: zeros
    out = get_op_def("lstmp").forward(ins["Input"], None, None, ins["Weight"],
                                      ins["ProjWeight"], None, lod={"Input": LOD},
                                      use_peepholes=False)
    rp, _ = _lstmp_ref(ins["Input"], LENS, ins["Weight"], ins["ProjWeight"], np.zeros(7 * 3),
                       np.zeros((3, 2)), np.zeros((3, 3)), peep=False)
    np.testing.assert_allclose(out["Projection"], rp, rtol=0, atol=1e-13)


def test_lstmp_infer_checks_and_specs():
    lstmp = get_op_def("lstmp")
    x = VarSpec((6, 12), F64, 1)
    w, pw = VarSpec((2, 12), F64), VarSpec((3, 2), F64)
    out = lstmp.infer(x, None, None, w, pw, None)
    assert out == {"Projection": VarSpec((6, 2), F64, 1), "Cell": VarSpec((6, 3), F64, 1),
                   "BatchGate": VarSpec((6, 12), F64, 1),
                   "BatchCellPreAct": VarSpec((6, 3), F64, 1),
                   "BatchHidden": VarSpec((6, 3), F64, 1)}
    assert lstmp.infer(VarSpec((-1, -1), F64, 1), None, None, w, pw, None)["Cell"].shape == \
        (-1, 3)
    msg = r"^lstmp: Weight and ProjWeight must be 2-D$"
    with pytest.raises(ValueError, match=msg):
        lstmp.infer(x, None, None, w, VarSpec((6,), F64), None)
    with pytest.raises(ValueError, match=msg):
        lstmp.infer(x, None, None, VarSpec((24,), F64), pw, None)
    with pytest.raises(ValueError, match=r"^lstmp: Weight must be \[P, 4D\] = \[2, 12\] "
                                         r"\(ProjWeight is \[D, P\] = \[3, 2\]\), got \[2, 8\]$"):
        lstmp.infer(x, None, None, VarSpec((2, 8), F64), pw, None)
    with pytest.raises(ValueError, match=r"^lstmp: Input width must be 4 \* D = 12, got 8$"):
        lstmp.infer(VarSpec((6, 8), F64, 1), None, None, w, pw, None)


def test_lstmp_gradient_recomputes_when_either_intermediate_is_missing():
    ins = _lstmp_inputs(scale=2.0, seed=4)
    lstmp = get_op_def("lstmp")
    fw = _run_lstmp(ins, is_reverse=True)
    rng = np.random.default_rng(5)
    dp, dc = rng.standard_normal(fw["Projection"].shape), rng.standard_normal(fw["Cell"].shape)
    head = (ins["Input"], ins["H0"], ins["C0"], ins["Weight"], ins["ProjWeight"], ins["Bias"],
            fw["Projection"], fw["Cell"])
    want = lstmp.backward(*head, fw["BatchGate"], fw["BatchHidden"], dp, dc,
                          lod={"Input": LOD}, is_reverse=True)
    for gate, hidden in [(None, fw["BatchHidden"]), (fw["BatchGate"], None)]:
        got = lstmp.backward(*head, gate, hidden, dp, dc, lod={"Input": LOD}, is_reverse=True)
        for k in want:
            np.testing.assert_allclose(got[k], want[k], rtol=1e-12, atol=1e-12)


# -- lstm ---------------------------------------------------------------------------------------
def test_lstm_defaults_checks_and_specs():
    lstm = get_op_def("lstm")
    ins = _lstmp_inputs(scale=8.0, seed=6)
    D = 3
    w = np.random.default_rng(7).uniform(-1, 1, (D, 4 * D))
    h0 = np.random.default_rng(8).uniform(-1, 1, (3, D))
    out = lstm.forward(ins["Input"], h0, ins["C0"], w, ins["Bias"], lod={"Input": LOD})
    rh, rc = _lstmp_ref(ins["Input"], LENS, w, None, ins["Bias"], h0, ins["C0"])
    np.testing.assert_allclose(out["Hidden"], rh, rtol=0, atol=1e-13)
    np.testing.assert_allclose(out["Cell"], rc, rtol=0, atol=1e-13)
    assert out["lod"] == {k: LOD for k in ("Hidden", "Cell", "BatchGate", "BatchCellPreAct")}
    with pytest.raises(ValueError, match=r"^lstm: C0 must be \[3, 3\] \(one row per sequence of "
                                         r"Input\), got \[3, 2\]$"):
        lstm.forward(ins["Input"], h0, np.zeros((3, 2)), w, ins["Bias"], lod={"Input": LOD})
    x = VarSpec((6, 12), F64, 1)
    spec = VarSpec((6, 3), F64, 1)
    assert lstm.infer(x, None, None, VarSpec((3, 12), F64), None) == \
        {"Hidden": spec, "Cell": spec, "BatchGate": VarSpec((6, 12), F64, 1),
         "BatchCellPreAct": spec}
    with pytest.raises(ValueError, match=r"^lstm: Input width must be 4 \* D = 12 \(the size "
                                         r"passed to dynamic_lstm\), got 8$"):
        lstm.infer(VarSpec((6, 8), F64, 1), None, None, VarSpec((3, 12), F64), None)
    with pytest.raises(ValueError, match=r"^lstm: Weight must be \[D, 4D\], got \[3, 8\]$"):
        lstm.infer(x, None, None, VarSpec((3, 8), F64), None)


# -- gru ----------------------------------------------------------------------------------------
def _gru_ref(x, lens, w, b, h0, act, reverse=False, origin=False):
    """fluid's gru: u, r = sigmoid(x_ur + h W_ur + b_ur), c = act(x_c + (r h) W_c + b_c),
    h' = (1 - u) h + u c (u h + (1 - u) c with origin_mode); W_ur [D, 2D] then W_c [D, D]
    contiguous in the [D, 3D] buffer."""
    D = w.shape[0]
    flat = w.reshape(-1)
    w_ur, w_c = flat[:2 * D * D].reshape(D, 2 * D), flat[2 * D * D:].reshape(D, D)
    b = b.reshape(-1)
    out, at = [None] * len(x), 0
    for k, n in enumerate(lens):
        h = h0[k].copy()
        steps = range(at + n - 1, at - 1, -1) if reverse else range(at, at + n)
        for t in steps:
            g = x[t] + b
            ur = _sig(g[:2 * D] + h @ w_ur)
            u, r = ur[:D], ur[D:]
            c = act(g[2 * D:] + (r * h) @ w_c)
            h = u * h + (1 - u) * c if origin else (1 - u) * h + u * c
            out[t] = h
        at += n
    return np.array(out)


def _gru_inputs(scale=1.0, seed=0, D=2):
    rng = np.random.default_rng(seed)
    return (rng.uniform(-1, 1, (sum(LENS), 3 * D)) * scale, rng.uniform(-1, 1, (3, D)),
            rng.uniform(-1, 1, (D, 3 * D)), rng.uniform(-1, 1, (1, 3 * D)))


def test_gru_defaults_and_a_saturated_sigmoid_activation():
    gru = get_op_def("gru")
    x, h0, w, b = _gru_inputs(scale=30.0, seed=1)
    out = gru.forward(x, h0, w, b, lod={"Input": LOD})
    np.testing.assert_allclose(out["Hidden"], _gru_ref(x, LENS, w, b, h0, np.tanh),
                               rtol=0, atol=1e-13)
    assert out["lod"] == {"Hidden": LOD}
    # activation "sigmoid" is clamped like the gates (fluid's activation_functions.h)
    out = gru.forward(x, h0, w, b, lod={"Input": LOD}, activation="sigmoid", origin_mode=True,
                      is_reverse=True)
    np.testing.assert_allclose(out["Hidden"],
                               _gru_ref(x, LENS, w, b, h0, _sig, reverse=True, origin=True),
                               rtol=0, atol=1e-13)
    # no bias, no initial state
    out = gru.forward(x / 30, None, w, None, lod={"Input": LOD})
    np.testing.assert_allclose(out["Hidden"], _gru_ref(x / 30, LENS, w, np.zeros(6),
                                                       np.zeros((3, 2)), np.tanh),
                               rtol=0, atol=1e-13)


def test_gru_gradient_defaults_and_recomputation():
    gru = get_op_def("gru")
    x, h0, w, b = _gru_inputs(seed=2)
    d = np.random.default_rng(3).standard_normal((sum(LENS), 2))
    for attrs in ({}, {"activation": "relu", "gate_activation": "tanh", "is_reverse": True,
                       "origin_mode": True}):
        fw = gru.forward(x, h0, w, b, lod={"Input": LOD}, **attrs)
        inter = [fw["BatchGate"], fw["BatchResetHiddenPrev"], fw["BatchHidden"]]
        want = gru.backward(x, h0, w, b, *inter, None, None, None, d, lod={"Input": LOD},
                            **attrs)
        if not attrs:
            full = gru.backward(x, h0, w, b, *inter, None, None, None, d, lod={"Input": LOD},
                                activation="tanh", gate_activation="sigmoid",
                                is_reverse=False, origin_mode=False)
            for k in full:
                np.testing.assert_array_equal(want[k], full[k])
        for miss in range(3):
            part = list(inter)
            part[miss] = None
            got = gru.backward(x, h0, w, b, *part, None, None, None, d, lod={"Input": LOD},
                               **attrs)
            for k in want:
                np.testing.assert_allclose(got[k], want[k], rtol=1e-12, atol=1e-12)


def test_gru_checks_and_specs():
    gru = get_op_def("gru")
    x, h0, w, b = _gru_inputs()
    with pytest.raises(ValueError, match=r"^gru: H0 must be \[3, 2\] \(one row per sequence of "
                                         r"Input\), got \[2, 2\]$"):
        gru.forward(x, h0[:2], w, b, lod={"Input": LOD})
    for attr in ("activation", "gate_activation"):
        with pytest.raises(ValueError, match=rf"^gru: attribute {attr} must be one of "
                                             r"\['sigmoid', 'tanh', 'relu', 'identity'\], "
                                             r"got 'softsign'$"):
            gru.forward(x, h0, w, b, lod={"Input": LOD}, **{attr: "softsign"})
    with pytest.raises(ValueError, match=r"^gru: Weight must be \[D, 3D\], got \[2, 4\]$"):
        gru.forward(x[:, :4], h0, w[:, :4], None, lod={"Input": LOD})
    with pytest.raises(ValueError, match=r"^gru: Input has no LoD"):
        gru.forward(x, h0, w, b)
    spec = gru.infer(VarSpec((5, 6), F64, 1), None, VarSpec((2, 6), F64), None)
    assert spec == {"Hidden": VarSpec((5, 2), F64, 1), "BatchGate": VarSpec((5, 6), F64),
                    "BatchResetHiddenPrev": VarSpec((5, 2), F64),
                    "BatchHidden": VarSpec((5, 2), F64)}
    with pytest.raises(ValueError, match=r"^gru: Input width must be 3 \* D = 6 \(D = size of "
                                         r"dynamic_gru\), got 4$"):
        gru.infer(VarSpec((6, 4), F64, 1), None, VarSpec((2, 6), F64), None)


def test_gru_without_an_upstream_gradient_gives_zeros():
    gru = get_op_def("gru")
    x, h0, w, b = _gru_inputs(seed=4)
    fw = gru.forward(x, h0, w, b, lod={"Input": LOD})
    g = gru.backward(x, h0, w, b, fw["BatchGate"], fw["BatchResetHiddenPrev"],
                     fw["BatchHidden"], None, None, None, None, lod={"Input": LOD})
    for k in ("Input", "Weight", "H0", "Bias"):
        assert not g[k].any()


def test_lstmp_float32_specs_and_a_projection_past_1_without_clip():
    lstmp = get_op_def("lstmp")
    F32 = VarType.FP32
    out = lstmp.infer(VarSpec((-1, 12), F32, 1), None, None, VarSpec((2, 12), F32),
                      VarSpec((3, 2), F32), None)
    assert {k: v.dtype for k, v in out.items()} == {k: F32 for k in out}
    # rows unknown, width wrong: still refused
    with pytest.raises(ValueError, match=r"^lstmp: Input width must be 4 \* D = 12, got 8$"):
        lstmp.infer(VarSpec((-1, 8), F32, 1), None, None, VarSpec((2, 12), F32),
                    VarSpec((3, 2), F32), None)
    # an identity projection is not clipped unless proj_clip > 0 (the default is 0)
    ins = _lstmp_inputs(scale=4.0, seed=9)
    ins["ProjWeight"] = ins["ProjWeight"] * 5
    out = _run_lstmp(ins, proj_activation="identity")
    assert np.abs(out["Projection"]).max() > 1.0


@pytest.mark.parametrize("name", ["lstm", "lstmp"])
def test_lstm_activation_names_are_checked_naming_the_op(name):
    ins = _lstmp_inputs()
    w = ins["Weight"] if name == "lstmp" else np.zeros((3, 12))
    args = (ins["Input"], None, None, w) + ((ins["ProjWeight"],) if name == "lstmp" else ()) + \
        (None,)
    with pytest.raises(ValueError, match=rf"^{name}: attribute gate_activation must be one of "
                                         r"\['sigmoid', 'tanh', 'relu', 'identity'\], got "
                                         r"'softsign'$"):
        get_op_def(name).forward(*args, lod={"Input": LOD}, gate_activation="softsign")
