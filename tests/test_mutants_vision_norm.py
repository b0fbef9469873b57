"""Tests written from mutation testing (issue 28, docs/mutation.md) for
``fluidlite/ops/vision_norm.py``: group_norm on 2-D / 3-D and channels-last inputs, instance,
spectral and data norm's shape rules and attribute ranges (fluid 1.8's checkers), epsilons
large enough to be seen, data_norm on 3-D / 4-D NCHW and NHWC inputs and its slot statistics
at their thresholds, inplace_abn's batch_norm attributes passed through -- against float64
loops written here, central differences (OpTest.check_grad) and fluid 1.8's defaults."""
import numpy as np
import pytest

from fluidlite.core.dtypes import VarType
from fluidlite.core.registry import VarSpec, get_op_def
from fluidlite.testing import check_grad

F16, F32, F64 = VarType.FP16, VarType.FP32, VarType.FP64
RNG = np.random.default_rng(40)


def spec(shape, dtype=F32, lod=0):
    return VarSpec(tuple(shape), dtype, lod)


def _u(*shape, low=-1.0, high=1.0):
    return RNG.uniform(low, high, shape)


# -- group_norm -------------------------------------------------------------------------------
GN = get_op_def("group_norm")


def _group_norm_ref(x, groups, scale, bias, eps, channels_last):
    """Per sample and group of channels: mean / biased variance over the group's channels and
    positions, a loop over the elements."""
    xc = np.moveaxis(x, -1, 1) if channels_last else x
    N, C = xc.shape[:2]
    per = C // groups
    y = np.empty_like(xc)
    mean, var = np.empty((N, groups)), np.empty((N, groups))
    for n in range(N):
        for g in range(groups):
            vals = xc[n, g * per:(g + 1) * per].ravel()
            m = sum(vals) / vals.size
            v = sum((a - m) ** 2 for a in vals) / vals.size
            mean[n, g], var[n, g] = m, v
            for c in range(g * per, (g + 1) * per):
                s = 1.0 if scale is None else scale[c]
                b = 0.0 if bias is None else bias[c]
                y[n, c] = (xc[n, c] - m) / np.sqrt(v + eps) * s + b
    return (np.moveaxis(y, 1, -1) if channels_last else y), mean, var


@pytest.mark.parametrize("shape,layout", [((2, 5, 4), "NHWC"), ((3, 6), "NCHW"),
                                          ((2, 4, 3, 2), "AnyLayout")])
def test_group_norm_on_other_ranks_and_layouts(shape, layout):
    x = _u(*shape)
    C = shape[-1] if layout == "NHWC" else shape[1]
    groups = 2 if C % 2 == 0 else 1
    sc, b = _u(C, low=0.5, high=1.5), _u(C)
    attrs = {"groups": groups, "epsilon": 0.5, "data_layout": layout}
    out = GN.forward(x, sc, b, **attrs)
    y, m, v = _group_norm_ref(x, groups, sc, b, 0.5, layout == "NHWC")
    np.testing.assert_allclose(out["Y"], y, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(out["Mean"], m, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(out["Variance"], v, rtol=1e-12)
    # epsilon 0.5 is far from 0: a gradient reading sqrt(var - eps) would be visible
    check_grad("group_norm", {"X": x, "Scale": sc, "Bias": b}, "Y", attrs=attrs,
               weighted=True)


def test_group_norm_defaults_are_one_group_nchw():
    x = _u(2, 3, 2, 2)
    out = GN.forward(x)
    y, m, v = _group_norm_ref(x, 1, None, None, 1e-5, False)
    np.testing.assert_allclose(out["Y"], y, rtol=1e-10, atol=1e-12)
    got = GN.backward(x, None, None, out["Mean"], out["Variance"], np.ones_like(x))
    assert set(got) == {"X"} and got["X"].shape == x.shape
    assert GN.infer(spec((2, 3, 2, 2)))["Mean"].shape == (2, 1)
    assert GN.infer(spec((2, 3, 2, 2), F16), groups=3)["Variance"] == VarSpec((2, 3), F16)


def test_group_norm_messages():
    with pytest.raises(ValueError, match=r"^group_norm: X must have rank >= 2, got 1$"):
        GN.infer(spec((4,)))
    assert GN.infer(spec((4, 2)), groups=2)["Y"].shape == (4, 2)
    with pytest.raises(ValueError, match=r"^group_norm: data_layout must be 'NCHW' or 'NHWC', "
                                         r"got 'NCDHW'$"):
        GN.infer(spec((2, 4, 2, 2)), data_layout="NCDHW")
    with pytest.raises(ValueError, match=r"^group_norm: groups must be >= 1, got 0$"):
        GN.infer(spec((2, 4, 2, 2)), groups=0)
    with pytest.raises(ValueError, match=r"^group_norm: the channel count 5 must be divisible "
                                         r"by groups 2$"):
        GN.infer(spec((2, 5, 2, 2)), groups=2)
    with pytest.raises(ValueError, match=r"^group_norm: the channel count 5 must be divisible "
                                         r"by groups 2$"):
        GN.forward(np.zeros((2, 3, 5)), groups=2, data_layout="NHWC")
    for name in ("Scale", "Bias"):
        kw = {name: spec((4,))}
        with pytest.raises(ValueError, match=rf"^group_norm: {name} must be \[6\], got \[4\]$"):
            GN.infer(spec((2, 6, 2)), groups=2, **kw)
        with pytest.raises(ValueError, match=rf"^group_norm: {name} must be \[0\], got \[4\]$"):
            GN.infer(spec((2, 0, 2)), groups=2, **kw)
        assert GN.infer(spec((2, -1, 2)), groups=2, **kw)["Y"].shape == (2, -1, 2)


# -- instance_norm ----------------------------------------------------------------------------
IN = get_op_def("instance_norm")


def test_instance_norm_ranks_epsilons_and_stat_sizes():
    for shape in ((3, 2), (1, 2, 2, 2, 2)):
        assert IN.infer(spec(shape))["Y"].shape == shape
    for shape in ((3,), (1, 1, 1, 1, 1, 1)):
        with pytest.raises(ValueError, match=rf"^instance_norm: X must have rank 2 to 5, got "
                                             rf"shape \[{', '.join(map(str, shape))}\]$"):
            IN.infer(spec(shape))
    for eps in (0.0, 0.001):                  # fluid 1.8's checker: 0 <= epsilon <= 0.001
        assert IN.infer(spec((2, 3)), epsilon=eps)["SavedMean"].shape == (6,)
    with pytest.raises(ValueError, match=r"^instance_norm: epsilon must be in \[0, 0\.001\], "
                                         r"got 0\.002$"):
        IN.infer(spec((2, 3)), epsilon=0.002)
    for shape, n in (((-1, 3, 4), -1), ((2, -1, 4), -1), ((0, 3, 4), 0), ((2, 3, 4), 6)):
        got = IN.infer(spec(shape, F16))
        assert got["SavedMean"] == VarSpec((n,), F16) and got["SavedVariance"] == VarSpec((n,),
                                                                                          F16)
    for name in ("Scale", "Bias"):
        with pytest.raises(ValueError, match=rf"^instance_norm: {name} must be \[3\], got "
                                             rf"\[2\]$"):
            IN.infer(spec((2, 3, 4)), **{name: spec((2,))})
        with pytest.raises(ValueError, match=rf"^instance_norm: {name} must be \[0\]"):
            IN.infer(spec((2, 0, 4)), **{name: spec((2,))})


def test_instance_norm_without_affine_and_its_default_epsilon():
    x = _u(2, 3, 5)
    out = IN.forward(x)
    m, v = x.mean(axis=2), x.var(axis=2)
    np.testing.assert_allclose(out["Y"], (x - m[..., None]) / np.sqrt(v[..., None] + 1e-5),
                               rtol=1e-12)
    np.testing.assert_allclose(out["SavedVariance"], 1 / np.sqrt(v.ravel() + 1e-5), rtol=1e-12)
    g = IN.backward(x, None, None, out["SavedMean"], out["SavedVariance"], np.ones_like(x))
    assert set(g) == {"X"}
    check_grad("instance_norm", {"X": x}, "Y", attrs={"epsilon": 0.001}, weighted=True)


# -- spectral_norm ----------------------------------------------------------------------------
SN = get_op_def("spectral_norm")


def _spectral_ref(w, u, v, dim, iters, eps):
    mat = np.moveaxis(w, dim, 0).reshape(w.shape[dim], -1)
    for _ in range(iters):
        v = mat.T @ u
        v = v / (np.sqrt((v * v).sum()) + eps)
        u = mat @ v
        u = u / (np.sqrt((u * u).sum()) + eps)
    return w / (u @ mat @ v)


@pytest.mark.parametrize("dim", [0, 1])
def test_spectral_norm_with_a_large_eps(dim):
    w = _u(3, 4, 2)
    u, v = _u(w.shape[dim]), _u(24 // w.shape[dim])
    out = SN.forward(w, u, v, dim=dim, power_iters=2, eps=0.5)["Out"]
    np.testing.assert_allclose(out, _spectral_ref(w, u, v, dim, 2, 0.5), rtol=1e-12)


def test_spectral_norm_defaults_are_fluids():
    # fluid 1.8's spectral_norm_op.cc: dim 0, power_iters 1, eps 1e-12
    w = _u(3, 4)
    u, v = _u(3), _u(4)
    np.testing.assert_allclose(SN.forward(w, u, v)["Out"], _spectral_ref(w, u, v, 0, 1, 1e-12),
                               rtol=1e-12)
    d = _u(3, 4)
    np.testing.assert_array_equal(SN.backward(w, u, v, d)["Weight"],
                                  SN.backward(w, u, v, d, dim=0, power_iters=1,
                                              eps=1e-12)["Weight"])
    assert SN.infer(spec((3, 4)), spec((3,)), spec((4,)))["Out"].shape == (3, 4)


def test_spectral_norm_shape_rules_and_messages():
    ok = SN.infer(spec((2, 1, 1, 1, 3)), spec((2,)), spec((3,)))
    assert ok["Out"].shape == (2, 1, 1, 1, 3)
    for shape in ((3,), (1,) * 6):
        with pytest.raises(ValueError, match=rf"^spectral_norm: Weight must have rank 2 to 5, "
                                             rf"got {len(shape)}$"):
            SN.infer(spec(shape), spec((1,)), spec((1,)))
    with pytest.raises(ValueError, match=r"^spectral_norm: dim must be in \[0, 2\], got 3$"):
        SN.infer(spec((2, 3, 4)), spec((2,)), spec((12,)), dim=3)
    with pytest.raises(ValueError, match=r"^spectral_norm: power_iters must be >= 0, got -1$"):
        SN.infer(spec((2, 3)), spec((2,)), spec((3,)), power_iters=-1)
    with pytest.raises(ValueError, match=r"^spectral_norm: eps must be > 0, got 0\.0$"):
        SN.infer(spec((2, 3)), spec((2,)), spec((3,)), eps=0.0)
    # unknown sizes (-1) are not checked; a 0 size is
    assert SN.infer(spec((-1, 3)), spec((5,)), spec((3,)))["Out"].shape == (-1, 3)
    assert SN.infer(spec((2, -1)), spec((2,)), spec((7,)))["Out"].shape == (2, -1)
    assert SN.infer(spec((2, 3)), spec((-1,)), spec((-1,)))["Out"].shape == (2, 3)
    assert SN.infer(spec((0, 3)), spec((0,)), spec((3,)))["Out"].shape == (0, 3)
    with pytest.raises(ValueError, match=r"^spectral_norm: U must be \[0\] \(the size of "
                                         r"Weight's dim 0\), got \[2\]$"):
        SN.infer(spec((0, 3)), spec((2,)), spec((3,)))
    with pytest.raises(ValueError, match=r"^spectral_norm: V must be \[0\], got \[2\]$"):
        SN.infer(spec((2, 0)), spec((2,)), spec((2,)))
    with pytest.raises(ValueError, match=r"^spectral_norm: V must be \[12\], got \[3, 4\]$"):
        SN.infer(spec((2, 3, 4)), spec((2,)), spec((3, 4)))


# -- data_norm --------------------------------------------------------------------------------
DN = get_op_def("data_norm")


def _stats(C, dtype=np.float64):
    size = np.full(C, 10.0, dtype) + np.arange(C, dtype=dtype)
    bsum = _u(C).astype(dtype) * 5
    sq = np.full(C, 4.0, dtype) + np.arange(C, dtype=dtype)
    return size, bsum, sq


@pytest.mark.parametrize("shape,layout", [((2, 3, 2, 2), "NCHW"), ((2, 2, 2, 3), "NHWC"),
                                          ((4, 3, 5), "AnyLayout"), ((3, 2, 3), "NHWC")])
def test_data_norm_on_images_per_channel(shape, layout):
    x = _u(*shape)
    caxis = x.ndim - 1 if layout == "NHWC" else 1
    C = shape[caxis]
    size, bsum, sq = _stats(C)
    out = DN.forward(x, size, bsum, sq, data_layout=layout)
    y = np.empty_like(x)
    for idx in np.ndindex(*shape):
        c = idx[caxis]
        y[idx] = (x[idx] - bsum[c] / size[c]) * np.sqrt(size[c] / sq[c])
    np.testing.assert_allclose(out["Y"], y, rtol=1e-14)
    d = _u(*shape)
    g = DN.backward(x, size, bsum, sq, d, data_layout=layout)
    ref = np.empty_like(d)
    for idx in np.ndindex(*shape):
        ref[idx] = d[idx] * np.sqrt(size[idx[caxis]] / sq[idx[caxis]])
    np.testing.assert_allclose(g["X"], ref, rtol=1e-14)
    rows = np.moveaxis(x, caxis, -1).reshape(-1, C)
    np.testing.assert_allclose(g["BatchSum"], rows.sum(axis=0), rtol=1e-13)
    assert DN.infer(spec(shape), *[spec((C,))] * 3, data_layout=layout)["Means"].shape == (C,)


def test_data_norm_shape_checks_and_defaults():
    with pytest.raises(ValueError, match=r"^data_norm: X must have rank >= 2, got 1$"):
        DN.infer(spec((3,)), *[spec((3,))] * 3)
    with pytest.raises(ValueError, match=r"^data_norm: data_layout must be 'NCHW' or 'NHWC', "
                                         r"got 'NDHWC'$"):
        DN.forward(np.zeros((2, 3)), np.ones(3), np.ones(3), np.ones(3), data_layout="NDHWC")
    names = ("BatchSize", "BatchSum", "BatchSquareSum")
    for i, name in enumerate(names):
        stats = [spec((4,))] * 3
        stats[i] = spec((3,))
        with pytest.raises(ValueError, match=rf"^data_norm: {name} must be \[4\], got \[3\]$"):
            DN.infer(spec((2, 4)), *stats)
        stats[i] = spec((4, 1))
        with pytest.raises(ValueError, match=rf"^data_norm: {name} must be \[4\], got "
                                             rf"\[4, 1\]$"):
            DN.infer(spec((2, 4)), *stats)
        stats = [spec((0,))] * 3
        stats[i] = spec((2,))
        with pytest.raises(ValueError, match=rf"^data_norm: {name} must be \[0\]"):
            DN.infer(spec((2, 0)), *stats)
    assert DN.infer(spec((2, -1)), *[spec((5,))] * 3)["Means"].shape == (-1,)
    got = DN.infer(spec((2, 3, 4), F16), *[spec((4,))] * 3, data_layout="NHWC")
    assert got["Scales"] == VarSpec((4,), F16)
    # fluid 1.8: epsilon 1e-4, NCHW, slot_dim -1
    x = _u(3, 2)
    size, bsum, sq = _stats(2)
    g = DN.backward(x, size, bsum, sq, np.ones_like(x))
    np.testing.assert_allclose(g["BatchSquareSum"],
                               ((x - bsum / size) ** 2).sum(axis=0) + 3 * 1e-4, rtol=1e-14)
    x4 = _u(2, 2, 3, 1)
    np.testing.assert_allclose(DN.forward(x4, size, bsum, sq)["Y"],
                               (x4 - (bsum / size)[:, None, None]) *
                               np.sqrt(size / sq)[:, None, None], rtol=1e-14)


def _slot_ref(x, size, bsum, sq, slot_dim, eps):
    """fluid 1.8's data_norm with slot_dim: a slot whose show (its first value) has
    |show| < 1e-7 gives zeros and is left out; the statistics' "gradients" are per-slot means
    over the rows that showed it (BatchSize 1), zeros for a slot no row showed."""
    N, C = x.shape
    means, scales = bsum / size, np.sqrt(size / sq)
    y = np.zeros_like(x)
    gsize, gsum, gsq = np.zeros(C), np.zeros(C), np.zeros(C)
    for j in range(C):
        start = j - j % slot_dim
        shown = [n for n in range(N) if abs(x[n, start]) >= np.float32(1e-7)]
        for n in shown:
            y[n, j] = (x[n, j] - means[j]) * scales[j]
        if shown:
            c = len(shown)
            gsize[j] = 1.0
            gsum[j] = sum(x[n, j] for n in shown) / c
            gsq[j] = sum((x[n, j] - means[j]) ** 2 for n in shown) / c + c * eps
    return y, gsize, gsum, gsq


@pytest.mark.parametrize("slot_dim", [1, 2, 3])
def test_data_norm_slots_at_the_show_threshold(slot_dim):
    x = _u(4, 6).astype(np.float32) + np.float32(2.0)
    t = np.float32(1e-7)
    shows = {0: [t, -t, np.float32(0.0), np.float32(5e-8)],       # at +-1e-7 shown
             slot_dim: [np.float32(0.0), np.float32(3.0), np.float32(0.0), np.float32(0.0)]}
    for col, vals in shows.items():
        if col < 6:
            x[:, col] = vals
    if 2 * slot_dim < 6:
        x[:, 2 * slot_dim] = 0.0                                       # a slot no row shows
    size, bsum, sq = _stats(6, np.float32)
    out = DN.forward(x, size, bsum, sq, slot_dim=slot_dim)
    g = DN.backward(x, size, bsum, sq, np.ones_like(x), epsilon=0.25, slot_dim=slot_dim)
    y, gsize, gsum, gsq = _slot_ref(x.astype(np.float64), size.astype(np.float64),
                                    bsum.astype(np.float64), sq.astype(np.float64), slot_dim,
                                    0.25)
    assert out["Y"].dtype == np.float32 and out["Means"].dtype == np.float32
    np.testing.assert_allclose(out["Y"], y, rtol=1e-6, atol=1e-6)
    for key, want in (("BatchSize", gsize), ("BatchSum", gsum), ("BatchSquareSum", gsq)):
        assert g[key].dtype == np.float32
        np.testing.assert_allclose(g[key], want, rtol=1e-5, atol=1e-6)
    assert g["X"].dtype == np.float32
    np.testing.assert_allclose(g["X"], np.broadcast_to(np.sqrt(size / sq), x.shape), rtol=1e-6)


def test_data_norm_slot_dim_zero_is_plain():
    x = np.array([[0.0, 1.0], [2.0, 0.0]])
    size, bsum, sq = _stats(2)
    y = DN.forward(x, size, bsum, sq, slot_dim=0)["Y"]
    np.testing.assert_allclose(y, (x - bsum / size) * np.sqrt(size / sq), rtol=1e-15)
    g = DN.backward(x, size, bsum, sq, np.ones_like(x), slot_dim=0)
    np.testing.assert_array_equal(g["BatchSize"], [2.0, 2.0])


# -- inplace_abn ------------------------------------------------------------------------------
AB = get_op_def("inplace_abn")
ABG = get_op_def("inplace_abn_grad")


def _bn_ref(x, sc, b, mean, var, momentum, eps, channels_last, global_stats):
    axes = tuple(i for i in range(x.ndim) if i != (x.ndim - 1 if channels_last else 1))
    shape = [1] * x.ndim
    shape[x.ndim - 1 if channels_last else 1] = -1
    mu, v = (mean, var) if global_stats else (x.mean(axis=axes), x.var(axis=axes))
    y = (x - mu.reshape(shape)) / np.sqrt(v.reshape(shape) + eps) * sc.reshape(shape) + \
        b.reshape(shape)
    return y, momentum * mean + (1 - momentum) * mu, momentum * var + (1 - momentum) * v


@pytest.mark.parametrize("attrs", [
    dict(data_layout="NHWC", epsilon=0.3, momentum=0.7),
    dict(is_test=True, epsilon=0.2),
    dict(use_global_stats=True, epsilon=0.2),
    dict(activation="", epsilon=0.25, momentum=0.5),
    dict(is_test=True, trainable_statistics=True, epsilon=0.2)])
def test_inplace_abn_passes_the_batch_norm_attributes(attrs):
    x = _u(3, 2, 2, 2)
    C = 2
    sc, b = _u(C, low=0.5, high=1.5), _u(C)
    mean, var = _u(C), _u(C, low=0.5, high=1.5)
    act = dict(attrs).get("activation", "leaky_relu")
    full = dict(attrs, activation=act, alpha=0.2)
    out = AB.forward(x, sc, b, mean, var, **full)
    # fluid 1.8's batch_norm: the running statistics with use_global_stats, or in a test
    # without trainable_statistics
    glob = (attrs.get("is_test", False) and not attrs.get("trainable_statistics", False)) \
        or attrs.get("use_global_stats", False)
    y, mo, vo = _bn_ref(x, sc, b, mean, var, attrs.get("momentum", 0.9), attrs["epsilon"],
                        attrs.get("data_layout") == "NHWC", glob)
    if act == "leaky_relu":
        y = np.where(y > 0, y, 0.2 * y)
    np.testing.assert_allclose(out["Y"], y, rtol=1e-12, atol=1e-14)
    if not glob:
        np.testing.assert_allclose(out["MeanOut"], mo, rtol=1e-12)
        np.testing.assert_allclose(out["VarianceOut"], vo, rtol=1e-12)
    if not glob and not attrs.get("is_test"):
        check_grad("inplace_abn", {"X": x, "Scale": sc, "Bias": b, "Mean": mean,
                                   "Variance": var}, "Y", attrs=full,
                   inputs_to_check=["X", "Scale", "Bias"], weighted=True)


def test_inplace_abn_momentum_tensor_and_defaults():
    x = _u(4, 3)
    sc, b, mean, var = np.ones(3), np.zeros(3), _u(3), _u(3, low=0.5, high=1.5)
    out = AB.forward(x, sc, b, mean, var, np.array([0.25]))
    y, mo, vo = _bn_ref(x, sc, b, mean, var, 0.25, 1e-5, False, False)
    np.testing.assert_allclose(out["MeanOut"], mo, rtol=1e-12)
    np.testing.assert_allclose(out["Y"], y, rtol=1e-10)        # identity, eps 1e-5: defaults
    assert AB.infer(spec((4, 3)), *[spec((3,))] * 4)["Y"].shape == (4, 3)


def test_inplace_abn_grad_at_y_exactly_zero_takes_the_negative_slope():
    x = _u(4, 2)
    sc = np.array([1.5, 0.5])
    bn = get_op_def("batch_norm").forward(x, sc, np.zeros(2), np.zeros(2), np.ones(2),
                                          epsilon=0.1)
    y = np.array([[0.0, 1.0], [-1.0, 0.0], [2.0, -0.5], [0.0, 0.0]])
    d = _u(4, 2)
    bng = get_op_def("batch_norm_grad")
    for act, slope in (("leaky_relu", np.where(y > 0, 1.0, 0.3)),
                       ("elu", np.where(y > 0, 1.0, y + 0.3))):
        got = ABG.forward(x, sc, y, bn["SavedMean"], bn["SavedVariance"], d, epsilon=0.1,
                          activation=act, alpha=0.3, data_layout="NHWC")
        want = bng.forward(x, sc, bn["SavedMean"], bn["SavedVariance"], d * slope,
                           epsilon=0.1, data_layout="NHWC")
        for k in want:
            np.testing.assert_allclose(got[k], want[k], rtol=1e-13, atol=1e-15)


def test_inplace_abn_activation_messages():
    msg = r"activation must be 'identity', 'leaky_relu' or 'elu', got 'relu'$"
    with pytest.raises(ValueError, match=r"^inplace_abn: " + msg):
        AB.infer(spec((2, 3)), *[spec((3,))] * 4, activation="relu")
    with pytest.raises(ValueError, match=r"^inplace_abn: " + msg):
        AB.forward(np.ones((2, 3)), *[np.ones(3)] * 4, activation="relu")
    with pytest.raises(ValueError, match=r"^inplace_abn_grad: " + msg):
        ABG.forward(*[np.ones((2, 3))] * 6, activation="relu")
    out = ABG.forward(np.ones((2, 3)), np.ones(3), np.ones((2, 3)), np.zeros(3), np.ones(3),
                      np.ones((2, 3)))        # default identity
    assert out["X@GRAD"].shape == (2, 3)


def test_small_cases_left_by_the_rerun():
    # inplace_abn's shape inference in NHWC reads the channels from the last dim
    got = AB.infer(spec((2, 3, 3, 5)), *[spec((5,))] * 4, data_layout="NHWC")
    assert got["Y"].shape == (2, 3, 3, 5) and got["MeanOut"].shape == (5,)
    # the momentum default 0.9 (fluid 1.8's batch_norm)
    x, mean, var = _u(4, 3), _u(3), _u(3, low=0.5, high=1.5)
    out = AB.forward(x, np.ones(3), np.zeros(3), mean, var)
    np.testing.assert_allclose(out["MeanOut"], 0.9 * mean + 0.1 * x.mean(axis=0), rtol=1e-12)
    # group_norm's gradient reads its epsilon (default 1e-5)
    x = _u(2, 4, 3)
    fw = GN.forward(x, groups=2)
    d = _u(2, 4, 3)
    np.testing.assert_array_equal(GN.backward(x, None, None, fw["Mean"], fw["Variance"], d,
                                              groups=2)["X"],
                                  GN.backward(x, None, None, fw["Mean"], fw["Variance"], d,
                                              groups=2, epsilon=1e-5)["X"])
    assert IN.infer(spec((2, 0, 4)))["SavedMean"].shape == (0,)
    # two unknown dims multiply to a positive number: still unknown
    assert SN.infer(spec((3, -1, -1)), spec((3,)), spec((5,)))["Out"].shape == (3, -1, -1)
