"""Tests written from mutation testing (issue 28, docs/mutation.md, round 11) for
``fluidlite/ops/paddle2_ext.py`` (Paddle 2.x ops of exported models): erfinv in its tails
and in float32, celu / logit defaults and their gradients at the clip edges, atan2's
inference and integer inputs, lerp / amax / amin in float32 and over several dims,
set_value's tensor-list bounds, default steps and messages, its value gradient, and
viterbi_decode's argument checks, zero lengths and dtypes.

References: the real Paddle 2.6.2 (numbers quoted in comments, obtained with
/tmp/paddle-venv: erfinv, celu, logit with eps 0 / 1e-6 / 0.2 and its gradient, atan2 of
int32), NumPy (slicing for set_value, loops), math identities (erf(erfinv(y)) = y)."""
import itertools
import math
import warnings

import numpy as np
import pytest

from fluidlite.core.dtypes import VarType
from fluidlite.core.registry import VarSpec, get_op_def
from fluidlite.ops.activation import erf_numpy

F32, F64, I32, I64 = VarType.FP32, VarType.FP64, VarType.INT32, VarType.INT64


def spec(shape, dtype=F64):
    return VarSpec(tuple(shape), dtype)


def op(t):
    return get_op_def(t)


# -- elementwise --------------------------------------------------------------------------
def test_erfinv_tails_float32_and_edges():
    y = np.array([0.999, 0.99999, -0.9999999, 0.5, -0.2, 0.0])
    got = op("erfinv").forward(y)["Out"]
    # Paddle 2.6: [2.3267537655135464, 3.1234132743398733, -3.766562581638471,
    #              0.4769362762044699, ...]
    np.testing.assert_allclose(got[:4], [2.3267537655135464, 3.1234132743398733,
                                         -3.766562581638471, 0.4769362762044699], rtol=1e-9)
    np.testing.assert_allclose(erf_numpy(got), y, rtol=1e-14, atol=1e-16)   # erf(erfinv y)
    y32 = y.astype(np.float32)
    got32 = op("erfinv").forward(y32)["Out"]
    assert got32.dtype == np.float32
    # computed in float64 from the float32 values, then rounded once
    np.testing.assert_array_equal(got32, op("erfinv").forward(y32.astype(np.float64))["Out"]
                                  .astype(np.float32))
    edge = op("erfinv").forward(np.array([1.0, -1.0, 1.5, -2.0]))["Out"]
    assert edge[0] == np.inf and edge[1] == -np.inf and np.isnan(edge[2:]).all()


def test_celu_default_alpha_zero_and_message():
    c = op("celu")
    x = np.array([-2.0, -0.5, 0.0, 0.7])
    # Paddle 2.6, celu(x) (alpha 1): [-0.8646647167633873, -0.3934693402873666, 0.0, 0.7],
    # gradient of sum: [0.1353352832366127, 0.6065306597126334, 1.0, 1.0]
    np.testing.assert_allclose(c.forward(x)["Out"],
                               [-0.8646647167633873, -0.3934693402873666, 0.0, 0.7],
                               rtol=1e-15)
    np.testing.assert_allclose(c.backward(x, np.ones(4))["X"],
                               [0.1353352832366127, 0.6065306597126334, 1.0, 1.0], rtol=1e-15)
    np.testing.assert_allclose(c.forward(x, alpha=2.0)["Out"][:2], 2 * np.expm1(x[:2] / 2),
                               rtol=1e-15)
    assert c.infer(spec((2, 3), F32)) == {"Out": spec((2, 3), F32)}
    with pytest.raises(ValueError) as e:
        c.infer(spec((2, 3), F32), alpha=0.0)
    assert str(e.value) == "celu: alpha must not be 0"


# Paddle 2.6: paddle.logit(x, eps) and the gradient of sum(out)
LOGIT_X = np.array([-0.5, 0.0, 1e-6, 0.3, 1.0 - 1e-6, 1.0, 1.5])
LOGIT_PADDLE = {
    1e-6: ([-13.815509560488534, -13.815509560488534, -13.815509557963773, -0.8472978603872034,
            13.815509557935018, 13.815509560488534, 13.815509560488534],
           [0.0, 0.0, 1000001.0000010001, 4.761904761904762, 1000000.9999722443, 0.0, 0.0]),
    0.2: ([-1.3862943424934393] * 3 + [-0.8472978603872034] + [1.386294342493439] * 3,
          [0.0, 0.0, 0.0, 4.761904761904762, 0.0, 0.0, 0.0]),
}


@pytest.mark.parametrize("eps", [1e-6, 0.2, None])
def test_logit_clip_edges_and_gradient_as_paddle(eps):
    lg = op("logit")
    attrs = {} if eps is None else {"eps": eps}              # None: the default, 1e-6
    out, grad = LOGIT_PADDLE[1e-6 if eps is None else eps]
    np.testing.assert_allclose(lg.forward(LOGIT_X, **attrs)["Out"], out, rtol=1e-7)
    np.testing.assert_allclose(lg.backward(LOGIT_X, np.ones(7), **attrs)["X"], grad,
                               rtol=1e-7)


def test_logit_without_eps_and_float32():
    lg = op("logit")
    x = np.array([0.0, 0.3, 1.0])
    with np.errstate(divide="ignore"):
        out = lg.forward(x, eps=0.0)["Out"]
        g = lg.backward(x, np.ones(3), eps=0.0)["X"]
    # Paddle 2.6 (eps 0): -inf, -0.8472978603872034, inf; gradient inf, 4.76..., inf
    assert out[0] == -np.inf and out[2] == np.inf
    np.testing.assert_allclose(out[1], -0.8472978603872034, rtol=1e-15)
    assert g[0] == np.inf and g[2] == np.inf
    np.testing.assert_allclose(g[1], 4.761904761904762, rtol=1e-15)


def test_logit_gradient_outside_the_unit_interval_is_zero():
    # Paddle 2.6, logit(x, eps=0) with x = [-0.5, 1.5]: Out NaN, gradient [0, 0] (its rule:
    # 0 outside [eps, 1 - eps] for every eps); no warning for the 0s and 1s with eps > 0
    lg = op("logit")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert lg.backward(np.array([-0.5, 1.5]), np.ones(2), eps=0.0)["X"].tolist() == \
            [0.0, 0.0]
        assert lg.backward(np.array([0.0, 1.0]), np.ones(2))["X"].tolist() == [0.0, 0.0]
        assert np.isinf(lg.backward(np.array([0.0]), np.ones(1), eps=0.0)["X"]).all()
    x32 = np.array([0.2, 0.5], np.float32)
    g32 = lg.backward(x32, np.ones(2, np.float32))["X"]
    assert lg.forward(x32)["Out"].dtype == np.float32 and g32.dtype == np.float32


def test_atan2_inference_integers_and_gradient_dtypes():
    a = op("atan2")
    assert a.infer(spec((2, 1), F32), spec((3,), F32)) == {"Out": spec((2, 3), F32)}
    assert a.infer(spec((2, 1), I32), spec((3,), I32)) == {"Out": spec((2, 3), F64)}
    assert a.infer(spec((-1, 3), I64), spec((3,), I64)) == {"Out": spec((-1, -1), F64)}
    assert a.infer(spec((3,), F64), spec((2, -1), F64)) == {"Out": spec((-1, -1), F64)}
    # Paddle 2.6: atan2 of int32 [1, -2], [3, 4] -> float64 [0.32175055146217346,
    # -0.46364760398864746] (float32 digits: fluidlite computes in float64)
    out = a.forward(np.array([1, -2], np.int32), np.array([3, 4], np.int32))["Out"]
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, [0.32175055146217346, -0.46364760398864746], rtol=1e-7)
    np.testing.assert_allclose(out, [math.atan2(1, 3), math.atan2(-2, 4)], rtol=1e-15)
    x1 = np.array([[0.5], [-1.5]], np.float32)
    x2 = np.array([1.0, -2.0, 0.25], np.float32)
    out = a.forward(x1, x2)["Out"]
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, np.arctan2(x1.astype(np.float64), x2), rtol=1e-6)
    g = a.backward(x1, x2, np.ones((2, 3), np.float32))
    assert g["X1"].dtype == np.float32 and g["X2"].dtype == np.float32
    r = x1.astype(np.float64) ** 2 + x2.astype(np.float64) ** 2
    np.testing.assert_allclose(g["X1"], (x2 / r).sum(1, keepdims=True), rtol=1e-6)
    np.testing.assert_allclose(g["X2"], (-x1 / r).sum(0), rtol=1e-6)


def test_lerp_keeps_float32():
    x = np.array([1.0, 2.0], np.float32)
    out = op("lerp").forward(x, np.array([3.0, -2.0], np.float32),
                             np.array([0.25], np.float32))["Out"]
    assert out.dtype == np.float32 and out.tolist() == [1.5, 1.0]


@pytest.mark.parametrize("t,pick", [("reduce_amax", np.max), ("reduce_amin", np.min)])
def test_amax_amin_share_ties_over_dims_and_all(t, pick):
    x = np.array([[[1.0, 3.0], [3.0, 0.0]], [[2.0, 2.0], [-1.0, 2.0]]], np.float32)
    r = op(t)
    for kw, axes in ((dict(dim=[0, 2]), (0, 2)), (dict(dim=[-1], keep_dim=True), (2,)),
                     (dict(reduce_all=True), (0, 1, 2)), (dict(dim=[1]), (1,))):
        out = r.forward(x, **kw)["Out"]
        d = np.arange(1.0, 1 + out.size, dtype=np.float32).reshape(out.shape)
        g = r.backward(x, out, d, **kw)["X"]
        assert g.dtype == np.float32 and g.shape == x.shape
        # the reference: every extreme of a group gets dOut / (size of its tie)
        ext = pick(x, axis=axes, keepdims=True)
        dk = d.reshape(ext.shape)
        mask = x == ext
        want = np.where(mask, dk / mask.sum(axis=axes, keepdims=True), 0)
        np.testing.assert_allclose(g, want, rtol=1e-6)


# -- set_value ----------------------------------------------------------------------------
def test_set_value_tensor_lists_default_steps_and_gradient():
    sv = op("set_value")
    x = np.arange(20.0).reshape(4, 5)
    t = lambda v: np.array([v], np.int64)                      # noqa: E731
    # bounds from StartsTensorList / EndsTensorList / StepsTensorList (the attrs ignored)
    out = sv.forward(x, np.array([-1.0]), [t(1), t(0)], [t(4), t(5)], [t(2), t(3)],
                     axes=[0, 1], starts=[0, 0], ends=[1, 1], steps=[1, 1])["Out"]
    want = x.copy()
    want[1:4:2, 0:5:3] = -1.0
    np.testing.assert_array_equal(out, want)
    # steps absent: 1 on every axis
    out = sv.forward(x, np.array([[7.0]]), axes=[0, 1], starts=[1, 2], ends=[3, 4])["Out"]
    want = x.copy()
    want[1:3, 2:4] = 7.0
    np.testing.assert_array_equal(out, want)
    # values attribute: the Input's dtype
    xi = np.arange(6, dtype=np.int32).reshape(2, 3)
    out = sv.forward(xi, axes=[1], starts=[0], ends=[2], steps=[1], shape=[1],
                     int32_values=[9])["Out"]
    assert out.dtype == np.int32 and out.tolist() == [[9, 9, 2], [9, 9, 5]]
    # the value's gradient: dOut's slice summed over the dims the value was broadcast on
    v = np.array([[1.0, 2.0]])
    d = np.arange(20.0).reshape(4, 5) + 1
    g = sv.backward(x, v, None, None, None, d, axes=[0, 1], starts=[0, 1], ends=[3, 5],
                    steps=[1, 2])
    assert g["ValueTensor"].shape == (1, 2)
    np.testing.assert_array_equal(g["ValueTensor"], d[0:3, 1:5:2].sum(0, keepdims=True))
    want = d.copy()
    want[0:3, 1:5:2] = 0
    np.testing.assert_array_equal(g["Input"], want)
    g = sv.backward(x, np.array([1.0, 2.0]), None, None, None, d, axes=[0, 1],
                    starts=[0, 1], ends=[3, 5], steps=[1, 2])["ValueTensor"]
    np.testing.assert_array_equal(g, d[0:3, 1:5:2].sum(0))       # a [2] value: rows summed
    gv = sv.backward(x, np.ones((3, 2)), [t(0), t(1)], [t(3), t(5)], [t(1), t(2)], d,
                     axes=[0, 1], starts=[9, 9], ends=[9, 9], steps=[1, 1])["ValueTensor"]
    np.testing.assert_array_equal(gv, d[0:3, 1:5:2])


def test_set_value_errors():
    sv = op("set_value")
    x = np.zeros((3, 4))
    assert sv.infer(spec((3, -1), F32)) == {"Out": spec((3, -1), F32)}
    with pytest.raises(ValueError) as e:
        sv.forward(x, np.ones(1), axes=[0, 1], starts=[0], ends=[1, 2], steps=[1, 1])
    assert str(e.value) == ("set_value: axes [0, 1], starts [0], ends [1, 2] and steps "
                            "[1, 1] must have one entry per axis")
    with pytest.raises(ValueError) as e:
        sv.forward(x, np.ones(1), axes=[1], starts=[0], ends=[2], steps=[0])
    assert str(e.value) == "set_value: a step must not be 0"
    with pytest.raises(ValueError, match="set_value.*axes entry"):
        sv.forward(x, np.ones(1), axes=[2], starts=[0], ends=[2], steps=[1])


# -- viterbi_decode -----------------------------------------------------------------------
def _best_paths(pot, trans, lengths, bos):
    """Enumeration of every tag sequence (the reference)."""
    n = pot.shape[2]
    scores, paths = [], []
    for b, L in enumerate(lengths):
        best, arg = -np.inf, ()
        for tags in itertools.product(range(n), repeat=int(L)):
            s = sum(pot[b, t, k] for t, k in enumerate(tags))
            s += sum(trans[tags[t - 1], tags[t]] for t in range(1, len(tags)))
            if bos and tags:
                s += trans[n - 1, tags[0]] + trans[n - 2, tags[-1]]
            if s > best + 1e-12:
                best, arg = s, tags
        scores.append(best if L else 0.0)
        paths.append(list(arg))
    return scores, paths


def test_viterbi_zero_lengths_float32_and_checks():
    vd = op("viterbi_decode")
    rng = np.random.default_rng(8)
    pot = rng.uniform(-1, 1, (4, 3, 3)).astype(np.float32)
    trans = rng.uniform(-1, 1, (3, 3)).astype(np.float32)
    lengths = np.array([2, 0, 3, 1], np.int64)
    res = vd.forward(pot, trans, lengths, include_bos_eos_tag=False)
    assert res["Scores"].dtype == np.float32 and res["Path"].dtype == np.int64
    assert res["Path"].shape == (4, 3)
    _, paths = _best_paths(pot.astype(np.float64), trans.astype(np.float64), lengths, False)
    for b, p in enumerate(paths):
        assert res["Path"][b, :len(p)].tolist() == p and not res["Path"][b, len(p):].any()
    res = vd.forward(pot, trans, lengths)                      # default: with bos / eos
    _, paths = _best_paths(pot.astype(np.float64), trans.astype(np.float64), lengths, True)
    for b, p in enumerate(paths):
        assert res["Path"][b, :len(p)].tolist() == p
    res = vd.forward(pot[:2], trans, np.array([0, 0]), include_bos_eos_tag=False)
    assert res["Path"].shape == (2, 0)
    res = vd.forward(pot[:0], trans, np.zeros(0, np.int64))
    assert res["Path"].shape == (0, 0) and res["Scores"].shape == (0,)
    assert vd.infer(spec((2, 5, 3), F32), spec((3, 3), F32), spec((2,), I64)) == \
        {"Scores": spec((2,), F32), "Path": spec((2, -1), I64)}
    with pytest.raises(ValueError) as e:
        vd.forward(pot, trans[:2], lengths)
    assert str(e.value) == "viterbi_decode: Transition must be [3, 3], got [2, 3]"
    for bad in ([2, 0, 3], [2, -1, 3, 1], [2, 0, 4, 1]):
        with pytest.raises(ValueError) as e:
            vd.forward(pot, trans, np.array(bad))
        assert str(e.value) == (f"viterbi_decode: Length must hold 4 values in [0, 3], got "
                                f"{bad}")
    with pytest.raises(ValueError, match=r"Input must be \[batch, steps, tags\]"):
        vd.infer(spec((5, 3), F32), spec((3, 3), F32), spec((2,), I64))


def test_viterbi_lengths_of_two_dims_and_int32():
    vd = op("viterbi_decode")
    rng = np.random.default_rng(9)
    pot, trans = rng.uniform(-1, 1, (3, 4, 3)), rng.uniform(-1, 1, (3, 3))
    lengths = np.array([[4], [2], [3]], np.int32)
    res = vd.forward(pot, trans, lengths)
    scores, paths = _best_paths(pot, trans, lengths.ravel(), True)
    np.testing.assert_allclose(res["Scores"], scores, rtol=1e-12)
    for b, p in enumerate(paths):
        assert res["Path"][b, :len(p)].tolist() == p
    assert math.isfinite(res["Scores"].sum())


# -- layout and diagonal ------------------------------------------------------------------
def _shuffle_ref(x, groups, nchw):
    """Out channel k*groups + g = X channel g*(C/groups) + k, by a loop."""
    c = x.shape[1 if nchw else 3]
    out = np.empty_like(x)
    for g in range(groups):
        for k in range(c // groups):
            src, dst = g * (c // groups) + k, k * groups + g
            if nchw:
                out[:, dst] = x[:, src]
            else:
                out[..., dst] = x[..., src]
    return out


@pytest.mark.parametrize("fmt", ["NCHW", "NHWC"])
def test_channel_shuffle_both_layouts_and_gradient(fmt):
    cs = op("channel_shuffle")
    nchw = fmt == "NCHW"
    x = np.random.default_rng(12).standard_normal((2, 6, 3, 4) if nchw else (2, 3, 4, 6))
    out = cs.forward(x, groups=3, data_format=fmt)["Out"]
    np.testing.assert_array_equal(out, _shuffle_ref(x, 3, nchw))
    d = np.random.default_rng(13).standard_normal(out.shape)
    g = cs.backward(d, groups=3, data_format=fmt)["X"]
    # the gradient is the adjoint: <Out(x), d> = <x, g> for every x (a permutation)
    np.testing.assert_allclose((out * d).sum(), (x * g).sum(), rtol=1e-12)
    np.testing.assert_array_equal(_shuffle_ref(g, 3, nchw), d)
    assert cs.infer(spec(x.shape, F32), groups=3, data_format=fmt) == \
        {"Out": spec(x.shape, F32)}
    # defaults: one group, NCHW -- the identity
    np.testing.assert_array_equal(cs.forward(x)["Out"], x)
    np.testing.assert_array_equal(cs.backward(d)["X"], d)


def test_diagonal_inference_defaults_and_float32_gradient():
    dg = op("diagonal")
    assert dg.infer(spec((3, 4, 5), F32)) == {"Out": spec((5, 3), F32)}
    for (n, m), off, k in (((3, 4), 1, 3), ((3, 4), -1, 2), ((3, 4), 5, 0), ((3, 4), -4, 0),
                           ((4, 3), 0, 3), ((-1, 4), 1, -1), ((3, -1), -2, -1)):
        assert dg.infer(spec((2, n, m)), offset=off, axis1=1, axis2=2) == \
            {"Out": spec((2, k))}, (n, m, off)
        if -1 not in (n, m):
            assert np.diagonal(np.zeros((2, n, m)), off, 1, 2).shape == (2, k)
    x = np.random.default_rng(14).standard_normal((3, 4, 2)).astype(np.float32)
    out = dg.forward(x)["Out"]
    np.testing.assert_array_equal(out, np.diagonal(x))
    d = np.ones(out.shape, np.float32)
    g = dg.backward(x, d)["Input"]
    assert g.dtype == np.float32 and g.shape == x.shape
    want = np.zeros(x.shape, np.float32)
    for i in range(3):
        want[i, i, :] = 1
    np.testing.assert_array_equal(g, want)
    with pytest.raises(ValueError) as e:
        dg.infer(spec((3, 4)), axis1=1, axis2=-1)
    assert str(e.value) == "diagonal: axis1 and axis2 must differ, both are 1"


def test_set_value_none_axes_leading_ones_and_decrease_axes():
    sv = op("set_value")
    x = np.zeros((4, 5))
    # x[:, None, 1:3] = v with v [4, 1, 2]: the None dim is dropped from the value
    v = np.arange(8.0).reshape(4, 1, 2)
    out = sv.forward(x, v, axes=[1], starts=[1], ends=[3], steps=[1], none_axes=[1])["Out"]
    want = x.copy()
    want[:, 1:3] = v[:, 0, :]
    np.testing.assert_array_equal(out, want)
    # a value with leading 1-dims: x[1:4, ::2] = v [1, 3, 3]
    v = np.arange(9.0).reshape(1, 3, 3)
    out = sv.forward(x, v, axes=[0, 1], starts=[1, 0], ends=[4, 5], steps=[1, 2])["Out"]
    want = x.copy()
    want[1:4, ::2] = v[0]
    np.testing.assert_array_equal(out, want)
    # decrease_axes: x[2, 1:4] = v [3] (the int-indexed dim is not in the value)
    v = np.array([1.0, 2.0, 3.0])
    out = sv.forward(x, v, axes=[0, 1], starts=[2, 1], ends=[3, 4], steps=[1, 1],
                     decrease_axes=[0])["Out"]
    want = x.copy()
    want[2, 1:4] = v
    np.testing.assert_array_equal(out, want)
    g = sv.backward(x, v, None, None, None, np.arange(20.0).reshape(4, 5), axes=[0, 1],
                    starts=[2, 1], ends=[3, 4], steps=[1, 1], decrease_axes=[0])
    assert g["ValueTensor"].tolist() == [11.0, 12.0, 13.0]


def test_layout_defaults_and_data_format_messages():
    pu, cs = op("pixel_unshuffle"), op("channel_shuffle")
    x = np.random.default_rng(15).standard_normal((1, 2, 4, 6))
    # defaults: downscale_factor 1, NCHW -- the identity both ways
    np.testing.assert_array_equal(pu.forward(x)["Out"], x)
    np.testing.assert_array_equal(pu.backward(x)["X"], x)
    # backward is the adjoint (pixel_shuffle) in both layouts
    for fmt, shape in (("NCHW", (1, 2, 4, 6)), ("NHWC", (1, 4, 6, 2))):
        xx = np.random.default_rng(16).standard_normal(shape)
        out = pu.forward(xx, downscale_factor=2, data_format=fmt)["Out"]
        d = np.random.default_rng(17).standard_normal(out.shape)
        g = pu.backward(d, downscale_factor=2, data_format=fmt)["X"]
        np.testing.assert_allclose((out * d).sum(), (xx * g).sum(), rtol=1e-12)
    for t, call in (("pixel_unshuffle", lambda f: pu.forward(x, data_format=f)),
                    ("pixel_unshuffle", lambda f: pu.backward(x, data_format=f)),
                    ("channel_shuffle", lambda f: cs.forward(x, data_format=f)),
                    ("channel_shuffle", lambda f: cs.backward(x, data_format=f))):
        with pytest.raises(ValueError) as e:
            call("NCDHW")
        assert str(e.value) == f"{t}: data_format must be 'NCHW' or 'NHWC', got 'NCDHW'"


# -- scans and index ops: 0-D inputs, inference, exact messages ---------------------------
def test_cumprod_zero_d_inference_and_messages():
    cp = op("cumprod")
    x = np.array(3.0)
    assert cp.forward(x)["Out"] == 3.0 and cp.forward(x)["Out"].shape == ()
    g = cp.backward(x, np.array(2.0))["X"]
    assert g.shape == () and g == 2.0
    assert cp.infer(spec((2, -1), F32), dim=-1) == {"Out": spec((2, -1), F32)}
    assert cp.infer(spec((), F32)) == {"Out": spec((), F32)}
    msg = "cumprod: dim 2 is out of range for input of rank 2 (valid: -2..1)"
    for call in (lambda: cp.infer(spec((2, 3)), dim=2),
                 lambda: cp.forward(np.zeros((2, 3)), dim=2),
                 lambda: cp.backward(np.zeros((2, 3)), np.zeros((2, 3)), dim=2)):
        with pytest.raises(ValueError) as e:
            call()
        assert str(e.value) == msg
    # a 1-D input: the product along its only dim (and its gradient, zeros included)
    v = np.array([2.0, 0.0, 3.0, -1.0])
    np.testing.assert_array_equal(cp.forward(v)["Out"], [2.0, 0.0, 0.0, -0.0])
    d = np.array([1.0, 2.0, 3.0, 4.0])
    # dOut_j * prod_{k <= j, k != i} x_k summed over j >= i
    want = [sum(d[j] * np.prod([v[k] for k in range(j + 1) if k != i]) for j in range(i, 4))
            for i in range(4)]
    np.testing.assert_allclose(cp.backward(v, d)["X"], want, rtol=1e-15)


def test_diagonal_axis_messages_and_defaults():
    dg = op("diagonal")
    x = np.arange(24.0).reshape(2, 3, 4)
    np.testing.assert_array_equal(dg.forward(x)["Out"], np.diagonal(x))
    g = dg.backward(x, np.ones((4, 2)))["Input"]
    assert g.shape == x.shape
    assert g.sum() == 8 and g[0, 0].tolist() == [1.0] * 4 and g[1, 1].tolist() == [1.0] * 4
    with pytest.raises(ValueError) as e:
        dg.forward(x, axis1=3)
    assert str(e.value) == "diagonal: axis1 3 is out of range for input of rank 3 (valid: -3..2)"
    with pytest.raises(ValueError) as e:
        dg.forward(x, axis1=0, axis2=-3)
    assert str(e.value) == "diagonal: axis1 and axis2 must differ, both are 0"


def test_index_add_messages_dtypes_and_gradient():
    ia = op("index_add")
    x = np.zeros((3, 2), np.float32)
    idx = np.array([[2], [0]], np.int64)                 # any shape: read flattened
    add = np.array([[1.5, 2.5], [0.5, 1.0]], np.float64)
    out = ia.forward(x, idx, add)["Out"]
    assert out.dtype == np.float32 and out.tolist() == [[0.5, 1.0], [0.0, 0.0], [1.5, 2.5]]
    d = np.arange(6.0).reshape(3, 2)
    g = ia.backward(idx, add, d)
    assert g["X"].tolist() == d.tolist() and g["AddValue"].tolist() == [[4.0, 5.0], [0.0, 1.0]]
    assert ia.infer(spec((3, -1), F32), spec((2,), I64), spec((2, -1), F32), axis=1) == \
        {"Out": spec((3, -1), F32)}
    msg = "index_add: axis 2 is out of range for input of rank 2 (valid: -2..1)"
    for call in (lambda: ia.infer(spec((3, 2)), spec((2,), I64), spec((2, 2)), axis=2),
                 lambda: ia.forward(x, idx, add, axis=2),
                 lambda: ia.backward(idx, add, d, axis=2)):
        with pytest.raises(ValueError) as e:
            call()
        assert str(e.value) == msg
    for call in (lambda: ia.forward(x, np.array([3]), add[:1]),
                 lambda: ia.backward(np.array([3]), add[:1], d)):
        with pytest.raises(ValueError) as e:
            call()
        assert str(e.value) == "index_add: index values must be in [-3, 3), but received [3, 3]"


def test_repeat_interleave_inference_and_gradient():
    ri = op("repeat_interleave")
    assert ri.infer(spec((2, 3), F32), Repeats=2, dim=1) == {"Out": spec((2, 6), F32)}
    assert ri.infer(spec((2, 3), F32), Repeats=2, dim=-2) == {"Out": spec((4, 3), F32)}
    assert ri.infer(spec((2, 0), F32), Repeats=2, dim=1) == {"Out": spec((2, 0), F32)}
    assert ri.infer(spec((-1, 3), F32), Repeats=2, dim=0) == {"Out": spec((-1, 3), F32)}
    assert ri.infer(spec((2, 3), F32), spec((3,), I64), dim=1) == {"Out": spec((2, -1), F32)}
    with pytest.raises(ValueError) as e:
        ri.infer(spec((2, 3)), Repeats=1, dim=2)
    assert str(e.value) == ("repeat_interleave: dim 2 is out of range for input of rank 2 "
                            "(valid: -2..1)")
    x = np.arange(6.0).reshape(2, 3)
    d = np.arange(12.0).reshape(2, 6)
    g = ri.backward(x, None, d.astype(np.float32), Repeats=2, dim=1)["X"]
    assert g.dtype == np.float32 and g.tolist() == [[1.0, 5.0, 9.0], [13.0, 17.0, 21.0]]
    with pytest.raises(ValueError) as e:
        ri.forward(x, Repeats=-1)
    assert str(e.value) == "repeat_interleave: Repeats must be >= 0, got -1"


def test_take_along_axis_messages_and_float32_gradient():
    ta = op("take_along_axis")
    x = np.arange(6.0).reshape(2, 3)
    idx = np.array([[2, 0]], np.int64)
    g = ta.backward(x, idx, np.ones((1, 2), np.float32), Axis=1)["Input"]
    assert g.dtype == np.float32 and g.tolist() == [[1.0, 0.0, 1.0], [0.0, 0.0, 0.0]]
    for call in (lambda: ta.forward(x, np.zeros((3, 3), np.int64), Axis=1),
                 lambda: ta.backward(x, np.zeros((3, 3), np.int64), np.ones((3, 3)), Axis=1)):
        with pytest.raises(ValueError) as e:
            call()
        assert str(e.value) == ("take_along_axis: Index [3, 3] must have X's rank and fit "
                                "inside X [2, 3] on every dim but Axis 1")


def test_lerp_inference():
    lp = op("lerp")
    assert lp.infer(spec((2, 1), F32), spec((3,), F32), spec((1,), F32)) == \
        {"Out": spec((2, 3), F32)}
    assert lp.infer(spec((2, 1), F32), spec((-1, 1, 3), F32), spec((1,), F32)) == \
        {"Out": spec((-1, -1, -1), F32)}


def test_pixel_unshuffle_and_channel_shuffle_inference():
    pu, cs = op("pixel_unshuffle"), op("channel_shuffle")
    assert pu.infer(spec((2, 3, 4, 6), F32), downscale_factor=2) == \
        {"Out": spec((2, 12, 2, 3), F32)}
    assert pu.infer(spec((2, 3, 4, 6), F32), downscale_factor=1) == \
        {"Out": spec((2, 3, 4, 6), F32)}
    assert pu.infer(spec((-1, -1, -1, 6)), downscale_factor=2) == {"Out": spec((-1, -1, -1, 3))}
    assert pu.infer(spec((-1, 3, 4, -1)), downscale_factor=2) == {"Out": spec((-1, 12, 2, -1))}
    assert pu.infer(spec((2, 4, 6, 3)), downscale_factor=2, data_format="NHWC") == \
        {"Out": spec((2, 2, 3, 12))}
    assert pu.infer(spec((2, -1, 6, -1)), downscale_factor=3, data_format="NHWC") == \
        {"Out": spec((2, -1, 2, -1))}
    for shape, r, h, w in (((1, 1, 3, 4), 2, 3, 4), ((1, 1, 4, 3), 2, 4, 3),
                           ((1, 1, 4, 4), 0, 4, 4), ((1, 1, 4, 4), -2, 4, 4)):
        with pytest.raises(ValueError) as e:
            pu.infer(spec(shape), downscale_factor=r)
        assert str(e.value) == (f"pixel_unshuffle: height {h} and width {w} must be divisible "
                                f"by downscale_factor ({r})")
    assert cs.infer(spec((2, 6, 3, 4)), groups=1) == {"Out": spec((2, 6, 3, 4))}
    assert cs.infer(spec((2, -1, 3, 4)), groups=4) == {"Out": spec((2, -1, 3, 4))}
    assert cs.infer(spec((2, 3, 4, 6)), groups=3, data_format="NHWC") == \
        {"Out": spec((2, 3, 4, 6))}
    for shape, groups, c, fmt in (((2, 6, 3, 4), 0, 6, "NCHW"), ((2, 6, 3, 4), -2, 6, "NCHW"),
                                  ((2, 1, 3, 4), 2, 1, "NCHW"), ((2, 3, 4, 6), 4, 6, "NHWC")):
        with pytest.raises(ValueError) as e:
            cs.infer(spec(shape), groups=groups, data_format=fmt)
        assert str(e.value) == (f"channel_shuffle: the {c} channels must be divisible by "
                                f"groups ({groups})")


def test_along_axis_negative_indices_and_messages():
    ta, pa = op("take_along_axis"), op("put_along_axis")
    x = np.arange(6.0).reshape(2, 3)
    idx = np.array([[-1, -3], [0, -2]], np.int64)            # -3 is the first of 3
    out = ta.forward(x, idx, Axis=1)["Result"]
    assert out.tolist() == [[2.0, 0.0], [3.0, 4.0]]
    res = pa.forward(x, idx, np.array([[9.0, 8.0], [7.0, 6.0]]), Axis=1)["Result"]
    assert res.tolist() == [[8.0, 1.0, 9.0], [7.0, 6.0, 5.0]]
    for bad, msg in ((np.array([[3]]), "index values must be in [-3, 3), but received [3, 3]"),
                     (np.array([[-4]]), "index values must be in [-3, 3), but received [-4, -4]"),
                     (np.array([0, 1]), "Index [2] must have X's rank and fit inside X [2, 3] "
                                        "on every dim but Axis 1")):
        with pytest.raises(ValueError) as e:
            ta.forward(x, bad, Axis=1)
        assert str(e.value) == "take_along_axis: " + msg
        with pytest.raises(ValueError) as e:
            pa.forward(x, bad, np.array(1.0), Axis=1)
        assert str(e.value) == "put_along_axis: " + msg
    with pytest.raises(ValueError) as e:
        ta.forward(x, idx, Axis=2)
    assert str(e.value) == ("take_along_axis: Axis 2 is out of range for input of rank 2 "
                            "(valid: -2..1)")


def test_put_along_axis_modes_defaults_and_inference():
    pa = op("put_along_axis")
    x = np.arange(6.0).reshape(2, 3)
    idx = np.array([[1, 1, 0]], np.int64)
    val = np.array([[10.0, 20.0, 30.0]])
    # defaults: Axis 0, assign
    assert pa.forward(x, idx, val)["Result"].tolist() == [[0.0, 1.0, 30.0],
                                                          [10.0, 20.0, 5.0]]
    got = pa.forward(x, idx, val, Reduce="add")["Result"]          # Include_self (default)
    assert got.tolist() == [[0.0, 1.0, 32.0], [13.0, 24.0, 5.0]]
    got = pa.forward(x, idx, val, Reduce="add", Include_self=False)["Result"]
    assert got.tolist() == [[0.0, 1.0, 30.0], [10.0, 20.0, 5.0]]
    d = np.arange(1.0, 7.0).reshape(2, 3)
    g = pa.backward(x, idx, val, d)                                # assign: dInput 0 there
    assert g["Input"].tolist() == [[1.0, 2.0, 0.0], [0.0, 0.0, 6.0]]
    assert g["Value"].tolist() == [[4.0, 5.0, 3.0]]
    g = pa.backward(x, idx, val, d, Reduce="add")
    assert g["Input"].tolist() == d.tolist() and g["Value"].tolist() == [[4.0, 5.0, 3.0]]
    g = pa.backward(x, idx, np.array(2.0), d, Reduce="add", Include_self=False)
    assert g["Input"].tolist() == [[1.0, 2.0, 0.0], [0.0, 0.0, 6.0]]
    assert g["Value"].shape == () and g["Value"] == 12.0          # a scalar value: summed
    assert pa.infer(spec((2, 3), F32), spec((1, 3), I64), spec((1, 3), F32)) == \
        {"Result": spec((2, 3), F32)}
    with pytest.raises(ValueError) as e:
        pa.infer(spec((2, 3)), spec((1, 3), I64), spec((1, 3)), Axis=-3)
    assert str(e.value) == ("put_along_axis: Axis -3 is out of range for input of rank 2 "
                            "(valid: -2..1)")


def test_take_along_axis_inference():
    ta = op("take_along_axis")
    assert ta.infer(spec((4, 5), F32), spec((2, 5), I64), Axis=0) == \
        {"Result": spec((2, 5), F32)}
    with pytest.raises(ValueError) as e:
        ta.infer(spec((4, 5), F32), spec((2,), I64), Axis=0)
    assert str(e.value) == ("take_along_axis: Index must have the rank of Input (2), but its "
                            "shape is [2]")


def test_repeat_interleave_counts_and_messages():
    ri = op("repeat_interleave")
    x = np.arange(6.0).reshape(2, 3)
    assert ri.forward(x, Repeats=0, dim=1)["Out"].shape == (2, 0)     # 0 copies is allowed
    assert ri.forward(x)["Out"].shape == (0, 3)                       # defaults: 0, dim 0
    assert ri.forward(x, Repeats=2)["Out"].tolist() == [[0.0, 1.0, 2.0]] * 2 + \
        [[3.0, 4.0, 5.0]] * 2
    out = ri.forward(x, np.array([[1], [0], [2]]), dim=1)["Out"]       # counts of any shape
    assert out.tolist() == [[0.0, 2.0, 2.0], [3.0, 5.0, 5.0]]
    for bad in (np.array([1, 2]), np.array([1, -1, 1])):
        with pytest.raises(ValueError) as e:
            ri.forward(x, bad, dim=1)
        assert str(e.value) == ("repeat_interleave: RepeatsTensor must hold 3 counts >= 0 (the "
                                f"size of dim 1), but received {bad.tolist()}")


def test_layout_inference_edges_and_messages():
    pu, cs = op("pixel_unshuffle"), op("channel_shuffle")
    assert pu.infer(spec((2, 1, 4, 6)), downscale_factor=2) == {"Out": spec((2, 4, 2, 3))}
    for shape in ((1, 1, 1, 4), (1, 1, 4, 1)):
        with pytest.raises(ValueError, match="must be divisible by downscale_factor"):
            pu.infer(spec(shape), downscale_factor=2)
    for call, t in ((lambda: pu.infer(spec((1, 1, 4, 4)), data_format="NDHWC"),
                     "pixel_unshuffle"),
                    (lambda: cs.infer(spec((1, 2, 4, 4)), data_format="NDHWC"),
                     "channel_shuffle")):
        with pytest.raises(ValueError) as e:
            call()
        assert str(e.value) == f"{t}: data_format must be 'NCHW' or 'NHWC', got 'NDHWC'"
    assert op("diagonal").infer(spec((3, 6)), offset=1) == {"Out": spec((3,))}
    with pytest.raises(ValueError) as e:
        op("set_value").forward(np.zeros((3, 4)), np.ones(1), axes=[2], starts=[0], ends=[2],
                                steps=[1])
    assert str(e.value) == ("set_value: axes entry 2 is out of range for input of rank 2 "
                            "(valid: -2..1)")
