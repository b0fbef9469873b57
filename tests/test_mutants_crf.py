"""Tests written from the mutation run of ``fluidlite/ops/crf.py`` (issue 28, docs/mutation.md):
``crf_decoding``'s Viterbi path and ``linear_chain_crf``'s negative log-likelihood over batches
of unequal lengths (start and end weights that matter, the padded form with zeros past each
length, a Label compared with the path), their build-time specs and messages. References: every
tag sequence enumerated and scored in the test (start[y_0] + sum_t E[t, y_t] +
sum_t W[y_{t-1}, y_t] + end[y_last], Transition = [start; end; W] as fluid 1.8's
linear_chain_crf_op.h), float64."""
import itertools

import numpy as np
import pytest

from fluidlite.core.dtypes import VarType
from fluidlite.core.registry import VarSpec, get_op_def

DEC = get_op_def("crf_decoding")
CRF = get_op_def("linear_chain_crf")
LENS = [3, 1, 4, 2]
D = 3


def _lod(lens):
    return (tuple(int(v) for v in np.concatenate([[0], np.cumsum(lens)])),)


def _score(e, t, path):
    s = t[0, path[0]] + t[1, path[-1]] + sum(e[k, y] for k, y in enumerate(path))
    return s + sum(t[2 + a, b] for a, b in zip(path[:-1], path[1:]))


def _best(e, t):
    paths = list(itertools.product(range(e.shape[1]), repeat=e.shape[0]))
    return max(paths, key=lambda p: _score(e, t, p))


def _nll(e, t, label):
    if not len(e):
        return 0.0
    scores = [_score(e, t, p) for p in itertools.product(range(e.shape[1]), repeat=len(e))]
    m = max(scores)
    return m + np.log(sum(np.exp(s - m) for s in scores)) - _score(e, t, list(label))


def _data(seed, lens=LENS):
    rng = np.random.default_rng(seed)
    e = rng.uniform(-1, 1, (sum(lens), D))
    t = rng.uniform(-2, 2, (D + 2, D))
    y = rng.integers(0, D, (sum(lens), 1))
    return e, t, y


def _split(a, lens):
    return np.split(a, np.cumsum(lens)[:-1])


@pytest.mark.parametrize("seed", range(6))
def test_crf_decoding_is_the_best_path_per_sequence(seed):
    e, t, y = _data(seed)
    res = DEC.forward(e, t, lod={"Emission": _lod(LENS)})
    want = np.concatenate([_best(es, t) for es in _split(e, LENS)])
    assert res["ViterbiPath"].dtype == np.int64
    np.testing.assert_array_equal(res["ViterbiPath"][:, 0], want)
    assert res["lod"] == {"ViterbiPath": _lod(LENS)}
    # with Label: 1 where the path has the label's tag
    res = DEC.forward(e, t, y, lod={"Emission": _lod(LENS)})
    np.testing.assert_array_equal(res["ViterbiPath"][:, 0], (want == y[:, 0]).astype(np.int64))
    # the padded form: [B, L], 0 past each length
    B, L = len(LENS), max(LENS)
    pad = np.zeros((B, L, D))
    lab = np.zeros((B, L), np.int64)
    for k, (es, ys) in enumerate(zip(_split(e, LENS), _split(y, LENS))):
        pad[k, :len(es)] = es
        lab[k, :len(es)] = ys[:, 0]
    got = DEC.forward(pad, t, None, np.array(LENS, np.int64))["ViterbiPath"]
    assert got.shape == (B, L)
    for k, ws in enumerate(_split(want, LENS)):
        np.testing.assert_array_equal(got[k, :len(ws)], ws)
        assert not got[k, len(ws):].any()
    got = DEC.forward(pad, t, lab, np.array(LENS, np.int64))["ViterbiPath"]
    for k, (ws, ys) in enumerate(zip(_split(want, LENS), _split(y, LENS))):
        np.testing.assert_array_equal(got[k, :len(ws)], ws == ys[:, 0])
        assert not got[k, len(ws):].any()


def test_crf_decoding_checks_and_specs():
    e, t, y = _data(0)
    with pytest.raises(ValueError, match=r"^crf_decoding: input Emission has no LoD"):
        DEC.forward(e, t)
    with pytest.raises(ValueError, match=r"^crf_decoding: with Length, Emission must be "
                                         r"\[B, L, D\], got \[10, 3\]$"):
        DEC.forward(e, t, None, np.array(LENS))
    pad = np.zeros((4, 4, D))
    with pytest.raises(ValueError, match=r"^crf_decoding: Label \[4, 3\] must be \[B, L\] or "
                                         r"\[B, L, 1\] like Emission \[4, 4, 3\]$"):
        DEC.forward(pad, t, np.zeros((4, 3), np.int64), np.array(LENS))
    with pytest.raises(ValueError, match=r"^crf_decoding: every Length must lie in \[0, 4\]"):
        DEC.forward(pad, t, None, np.array([5, 1, 1, 1]))
    spec = DEC.infer(VarSpec((4, 5, D), VarType.FP32), VarSpec((D + 2, D), VarType.FP32), None,
                     VarSpec((4,), VarType.INT64))
    assert spec == {"ViterbiPath": VarSpec((4, 5), VarType.INT64)}
    spec = DEC.infer(VarSpec((-1, D), VarType.FP32, 1), VarSpec((D + 2, D), VarType.FP32),
                     None, None)
    assert spec == {"ViterbiPath": VarSpec((-1, 1), VarType.INT64, 1)}
    with pytest.raises(ValueError, match=r"^crf_decoding: with Length, Emission must be "
                                         r"\[B, L, D\], got \[10, 3\]$"):
        DEC.infer(VarSpec((10, D), VarType.FP32), VarSpec((D + 2, D), VarType.FP32), None,
                  VarSpec((4,), VarType.INT64))


@pytest.mark.parametrize("seed", range(3))
def test_linear_chain_crf_nll_of_unequal_lengths_and_an_empty_sequence(seed):
    lens = [3, 0, 4, 1]
    e, t, y = _data(seed, lens)
    res = CRF.forward(e, t, y, lod={"Emission": _lod(lens)})
    want = [_nll(es, t, ys[:, 0]) for es, ys in zip(_split(e, lens), _split(y, lens))]
    np.testing.assert_allclose(res["LogLikelihood"][:, 0], want, rtol=1e-10, atol=1e-12)
    assert res["LogLikelihood"].shape == (4, 1)
    # the padded form gives the same costs
    B, L = len(lens), max(lens)
    pad, lab = np.zeros((B, L, D)), np.zeros((B, L), np.int64)
    for k, (es, ys) in enumerate(zip(_split(e, lens), _split(y, lens))):
        pad[k, :len(es)], lab[k, :len(es)] = es, ys[:, 0]
    got = CRF.forward(pad, t, lab, np.array(lens, np.int64))["LogLikelihood"]
    np.testing.assert_allclose(got[:, 0], want, rtol=1e-10, atol=1e-12)


def test_linear_chain_crf_gradient_against_central_differences():
    lens = [3, 1, 2]
    e, t, y = _data(7, lens)
    lod = {"Emission": _lod(lens)}
    w = np.random.default_rng(8).uniform(0.5, 1.5, (3, 1))

    def f(e_, t_):
        return float((CRF.forward(e_, t_, y, lod=lod)["LogLikelihood"] * w).sum())

    g = CRF.backward(e, t, y, lod=lod, dLogLikelihood=w)
    for arr, key in ((e, "Emission"), (t, "Transition")):
        num = np.zeros_like(arr)
        for idx in np.ndindex(arr.shape):
            old = arr[idx]
            arr[idx] = old + 1e-6
            hi = f(e, t)
            arr[idx] = old - 1e-6
            lo = f(e, t)
            arr[idx] = old
            num[idx] = (hi - lo) / 2e-6
        np.testing.assert_allclose(g[key], num, rtol=1e-6, atol=1e-7)


def test_linear_chain_crf_gradient_of_pairs_when_the_longest_sequence_has_two_steps():
    lens = [2, 1]
    e, t, y = _data(9, lens)
    lod = {"Emission": _lod(lens)}
    g = CRF.backward(e, t, y, lod=lod)                 # no upstream gradient: ones
    np.testing.assert_array_equal(
        g["Transition"], CRF.backward(e, t, y, lod=lod, dLogLikelihood=np.ones((2, 1)))
        ["Transition"])
    num = np.zeros_like(t)
    for idx in np.ndindex(t.shape):
        old = t[idx]
        t[idx] = old + 1e-6
        hi = CRF.forward(e, t, y, lod=lod)["LogLikelihood"].sum()
        t[idx] = old - 1e-6
        lo = CRF.forward(e, t, y, lod=lod)["LogLikelihood"].sum()
        t[idx] = old
        num[idx] = (hi - lo) / 2e-6
    assert np.abs(num[2:]).max() > 1e-3             # the pair weights do matter here
    np.testing.assert_allclose(g["Transition"], num, rtol=1e-6, atol=1e-7)


def test_linear_chain_crf_is_stable_for_sequences_far_apart_in_scale():
    # the NLL does not change when every emission of a sequence moves by a constant; a
    # log-sum-exp shifted by the batch's max instead of each row's would underflow
    lens = [3, 2]
    e, t, y = _data(10, lens)
    lod = {"Emission": _lod(lens)}
    base = CRF.forward(e, t, y, lod=lod)["LogLikelihood"]
    far = e.copy()
    far[3:] -= 900.0
    got = CRF.forward(far, t, y, lod=lod)["LogLikelihood"]
    np.testing.assert_allclose(got, base, rtol=1e-9, atol=1e-9)
    g = CRF.backward(far, t, y, lod=lod)
    assert np.isfinite(g["Emission"]).all() and np.isfinite(g["Transition"]).all()


def test_linear_chain_crf_checks_and_specs():
    e, t, y = _data(0, [2, 2])
    lod = {"Emission": _lod([2, 2])}
    with pytest.raises(ValueError, match=r"^linear_chain_crf: input Emission has no LoD"):
        CRF.forward(e, t, y)
    for bad, ok in (([[-1]], False), ([[D]], False), ([[D - 1]], True)):
        lab = y.copy()
        lab[1] = bad[0]
        if ok:
            CRF.forward(e, t, lab, lod=lod)
        else:
            with pytest.raises(ValueError, match=r"^linear_chain_crf: labels must lie in "
                                                 r"\[0, 3\)$"):
                CRF.forward(e, t, lab, lod=lod)
    pad = np.zeros((2, 2, D))
    with pytest.raises(ValueError, match=r"^linear_chain_crf: with Length, Emission must be "
                                         r"\[B, L, D\], got \[4, 3\]$"):
        CRF.forward(e, t, y, np.array([2, 2]))
    with pytest.raises(ValueError, match=r"^linear_chain_crf: Label \[2, 3\] must be \[B, L\] "
                                         r"or \[B, L, 1\] like Emission \[2, 2, 3\]$"):
        CRF.forward(pad, t, np.zeros((2, 3), np.int64), np.array([2, 2]))
    with pytest.raises(ValueError, match=r"^linear_chain_crf: every Length must lie in "):
        CRF.forward(pad, t, np.zeros((2, 2), np.int64), np.array([3, 2]))
    res = CRF.forward(pad, t, np.zeros((2, 2), np.int64), np.array([2, 1]))
    assert "lod" not in res                  # the padded form's outputs have no LoD
    F32 = VarType.FP32
    em, tr = VarSpec((-1, D), F32, 1), VarSpec((D + 2, D), F32)
    out = CRF.infer(em, tr, VarSpec((-1, 1), VarType.INT64, 1), None)
    assert out == {"Alpha": em, "EmissionExps": em, "TransitionExps": tr,
                   "LogLikelihood": VarSpec((-1, 1), F32)}
    msg = (r"^linear_chain_crf: Emission must be \[N, D\] \(LoD\) or \[B, L, D\] \(with "
           r"Length\), Transition \[D \+ 2, D\]; got Emission \[{}\], Transition \[{}\]$")
    with pytest.raises(ValueError, match=msg.format("4, 3, 1", "5, 3")):
        CRF.infer(VarSpec((4, D, 1), F32), tr, None, None)
    with pytest.raises(ValueError, match=msg.format("4, 3", "15")):
        CRF.infer(VarSpec((4, D), F32), VarSpec((15,), F32), None, None)
    with pytest.raises(ValueError, match=r"^linear_chain_crf: Transition must be \[5, 3\], got "
                                         r"\[4, 3\]$"):
        CRF.infer(em, VarSpec((4, D), F32), None, None)
    with pytest.raises(ValueError, match=r"^linear_chain_crf: with Length, Label must be \[B, L\] "
                                         r"or \[B, L, 1\], got \[8\]$"):
        CRF.infer(VarSpec((2, 4, D), F32), tr, VarSpec((8,), VarType.INT64),
                  VarSpec((2,), VarType.INT64))
