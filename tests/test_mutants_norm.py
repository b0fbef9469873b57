"""Tests written from mutation testing (issue 28, docs/mutation.md) for ``fluidlite/ops/norm.py``:
batch_norm's defaults (training mode, epsilon 1e-5), its test-mode formula with an epsilon large
enough to see, ``MomentumTensor``, the batch_norm_grad defaults and its global-statistics
gradient, layer_norm's shape inference with unknown dims, and the error messages (they name the
op and the slot). References are float64 NumPy formulas of fluid's kernels."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core.registry import VarSpec, get_op_def

BN, BNG, LN = get_op_def("batch_norm"), get_op_def("batch_norm_grad"), get_op_def("layer_norm")


def _data(seed=0, shape=(3, 4, 2, 5)):
    rng = np.random.default_rng(seed)
    c = shape[1]
    return (rng.standard_normal(shape) * 2 + 1, rng.uniform(0.5, 2, c), rng.standard_normal(c),
            rng.standard_normal(c), rng.uniform(0.01, 0.1, c))


def test_batch_norm_defaults_are_fluids_training_mode_with_epsilon_1e_5():
    x, scale, bias, mean, var = _data()
    out = BN.forward(x, scale, bias, mean, var)
    mu = x.mean(axis=(0, 2, 3))
    v = x.var(axis=(0, 2, 3))
    inv = 1 / np.sqrt(v + 1e-5)
    ref = (x - mu[None, :, None, None]) * (scale * inv)[None, :, None, None] \
        + bias[None, :, None, None]
    np.testing.assert_allclose(out["Y"], ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(out["MeanOut"], 0.9 * mean + 0.1 * mu, rtol=1e-12)
    np.testing.assert_allclose(out["VarianceOut"], 0.9 * var + 0.1 * v, rtol=1e-12)
    np.testing.assert_allclose(out["SavedVariance"], inv, rtol=1e-12)


@pytest.mark.parametrize("flags", [{"is_test": True}, {"use_global_stats": True}])
def test_batch_norm_with_running_statistics_adds_epsilon_to_the_variance(flags):
    x, scale, bias, mean, var = _data(1)
    out = BN.forward(x, scale, bias, mean, var, epsilon=0.5, **flags)
    inv = 1 / np.sqrt(var + 0.5)
    ref = (x - mean[None, :, None, None]) * (scale * inv)[None, :, None, None] \
        + bias[None, :, None, None]
    np.testing.assert_allclose(out["Y"], ref, rtol=1e-12, atol=1e-12)
    assert out["MeanOut"] is mean and out["VarianceOut"] is var
    np.testing.assert_allclose(out["SavedVariance"], inv, rtol=1e-12)


def test_trainable_statistics_use_the_batch_even_in_test_mode():
    x, scale, bias, mean, var = _data(2)
    a = BN.forward(x, scale, bias, mean, var, is_test=True, trainable_statistics=True)
    b = BN.forward(x, scale, bias, mean, var)
    np.testing.assert_array_equal(a["Y"], b["Y"])


def test_momentum_tensor_overrides_the_momentum_attribute():
    x, scale, bias, mean, var = _data(3)
    out = BN.forward(x, scale, bias, mean, var, np.array([0.25]), momentum=0.9)
    mu = x.mean(axis=(0, 2, 3))
    np.testing.assert_allclose(out["MeanOut"], 0.25 * mean + 0.75 * mu, rtol=1e-12)


def test_batch_norm_grad_defaults_use_the_batch_statistics():
    x, scale, bias, mean, var = _data(4)
    fwd = BN.forward(x, scale, bias, mean, var)
    dy = np.random.default_rng(5).standard_normal(x.shape)
    g = BNG.forward(x, scale, fwd["SavedMean"], fwd["SavedVariance"], dy)
    m = x.size // x.shape[1]
    xh = (x - fwd["SavedMean"][None, :, None, None]) * fwd["SavedVariance"][None, :, None, None]
    db, ds = dy.sum(axis=(0, 2, 3)), (dy * xh).sum(axis=(0, 2, 3))
    ref = (scale * fwd["SavedVariance"])[None, :, None, None] * (
        dy - db[None, :, None, None] / m - xh * ds[None, :, None, None] / m)
    # read the lazy outputs in both orders: the shared cache must give the same values
    np.testing.assert_allclose(g["X@GRAD"], ref, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(g["Scale@GRAD"], ds, rtol=1e-12)
    np.testing.assert_allclose(g["Bias@GRAD"], db, rtol=1e-12)
    g2 = BNG.forward(x, scale, fwd["SavedMean"], fwd["SavedVariance"], dy)
    np.testing.assert_allclose(g2["Scale@GRAD"], ds, rtol=1e-12)
    np.testing.assert_allclose(g2["Bias@GRAD"], db, rtol=1e-12)
    np.testing.assert_allclose(g2["X@GRAD"], ref, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("flags", [{"is_test": True}, {"use_global_stats": True}])
def test_batch_norm_grad_with_global_statistics_is_a_per_channel_scale(flags):
    x, scale, bias, mean, var = _data(6)
    inv = 1 / np.sqrt(var + 1e-5)
    dy = np.random.default_rng(7).standard_normal(x.shape)
    g = BNG.forward(x, scale, mean, inv, dy, **flags)
    np.testing.assert_allclose(g["X@GRAD"], dy * (scale * inv)[None, :, None, None],
                               rtol=1e-12)


def test_batch_norm_nhwc_and_anylayout():
    x, scale, bias, mean, var = _data(8)
    nchw = BN.forward(x, scale, bias, mean, var)["Y"]
    nhwc = BN.forward(x.transpose(0, 2, 3, 1), scale, bias, mean, var, data_layout="NHWC")["Y"]
    np.testing.assert_allclose(nhwc.transpose(0, 3, 1, 2), nchw, rtol=1e-12, atol=1e-12)
    anyl = BN.forward(x, scale, bias, mean, var, data_layout="AnyLayout")["Y"]
    np.testing.assert_array_equal(anyl, nchw)


@pytest.mark.parametrize("slot", ["Scale", "Bias", "Mean", "Variance"])
def test_a_statistic_of_the_wrong_length_is_named(slot):
    specs = {s: VarSpec((4,), "float32") for s in ("Scale", "Bias", "Mean", "Variance")}
    specs[slot] = VarSpec((3,), "float32")
    with pytest.raises(ValueError, match=rf"batch_norm: {slot} must have shape \[4\]"):
        BN.infer(VarSpec((-1, 4, 8, 8), "float32"), specs["Scale"], specs["Bias"],
                 specs["Mean"], specs["Variance"])


def test_an_unknown_layout_is_named():
    x, scale, bias, mean, var = _data()
    with pytest.raises(ValueError, match=r"batch_norm: data_layout must be 'NCHW' or 'NHWC', "
                                         r"got 'nchw'"):
        BN.forward(x, scale, bias, mean, var, data_layout="nchw")
    with pytest.raises(ValueError, match=r"batch_norm_grad: data_layout must be"):
        BNG.forward(x, scale, mean, var, x, data_layout="NWHC")


@pytest.mark.parametrize("shape,axis,left,right", [
    ((-1, 3, 4), 1, -1, 12), ((-1, 3, 4), 2, -1, 4), ((2, -1, 4), 1, 2, -1),
    ((2, 3, -1), 2, 6, -1), ((2, 3, 4), 1, 2, 12), ((5, 0, 3), 2, 0, 3)])
def test_layer_norm_infers_row_counts_with_unknown_dims(shape, axis, left, right):
    scale = VarSpec((right,), "float32") if right >= 0 else None
    out = LN.infer(VarSpec(shape, "float32"), scale, None, begin_norm_axis=axis)
    assert out["Mean"].shape == (left,) and out["Variance"].shape == (left,)
    assert out["Y"].shape == tuple(shape)


@pytest.mark.parametrize("axis", [0, 3, -1])
def test_layer_norm_refuses_a_begin_axis_outside_one_to_rank_minus_one(axis):
    with pytest.raises(ValueError, match=r"layer_norm: begin_norm_axis must be in \[1, 2\] for "
                                         r"X of shape \[2, 3, 4\]"):
        LN.infer(VarSpec((2, 3, 4), "float32"), None, None, begin_norm_axis=axis)


@pytest.mark.parametrize("slot", ["Scale", "Bias"])
def test_layer_norm_names_a_wrong_scale_or_bias(slot):
    bad = VarSpec((5,), "float32")
    args = (bad, None) if slot == "Scale" else (None, bad)
    with pytest.raises(ValueError, match=rf"layer_norm: {slot} must have shape \[12\]"):
        LN.infer(VarSpec((2, 3, 4), "float32"), *args, begin_norm_axis=1)
