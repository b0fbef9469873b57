"""Tests written from the mutation run of ``fluidlite/ops/deform.py`` (issue 28,
docs/mutation.md): fluid 1.8's sampling borders (deformable_conv_func.h: a point reads 0 unless
``h > -1 && h < H && w > -1 && w < W``; corners outside the map are not read; the offset
gradient ``DmcnGetCoordinateWeight`` is 0 at ``h <= -1`` / ``w <= -1``), non-finite inputs next
to the border, samples far outside the map, float32 kept by every output and gradient, the
OpMaker's attribute defaults (strides {1, 1}, paddings {0, 0}, dilations {1, 1}, groups 1,
deformable_groups 1), attributes reaching deformable_conv_v1's gradient op, and the build-time
checks with their messages. References: the per-tap loop of ``tests/ops/test_deform.py`` and a
float64 loop of fluid's coordinate weight written here."""
import math

import numpy as np
import pytest

from fluidlite.core.registry import VarSpec, get_op_def
from fluidlite.testing import OpTest
from tests.ops.test_deform import ref_deform

V2, V1 = "deformable_conv", "deformable_conv_v1"


def spec(*shape, dtype="float32"):
    return VarSpec(list(shape), dtype)


def coord_weight(img, h, w, axis):
    """fluid's DmcnGetCoordinateWeight: d(bilinear sample)/d(h) (axis 0) or d/d(w) (axis 1),
    0 outside (-1, H) x (-1, W); corners outside the map contribute nothing."""
    H, W = img.shape
    if h <= -1 or h >= H or w <= -1 or w >= W:
        return 0.0
    hl, wl = math.floor(h), math.floor(w)
    lh, lw = h - hl, w - wl
    total = 0.0
    for dy in (0, 1):
        for dx in (0, 1):
            y, x = hl + dy, wl + dx
            if not (0 <= y <= H - 1 and 0 <= x <= W - 1):
                continue
            if axis == 0:
                total += (1.0 if dy else -1.0) * (lw if dx else 1 - lw) * img[y, x]
            else:
                total += (1.0 if dx else -1.0) * (lh if dy else 1 - lh) * img[y, x]
    return total


# -- the borders of the sampled map ------------------------------------------------------------
def test_offset_gradient_is_zero_exactly_on_the_minus_one_border_as_fluid():
    """A 1x1 kernel, one channel: sample (y, x) reads Input at (y + dh, x + dw). Offsets put
    samples exactly at h = -1 or w = -1 (fluid: outside, value 0, offset gradient 0; the
    corner at 0 has weight 0 but a non-zero slope), at the integer points 0 and H - 1, and
    inside cells; dOffset against fluid's coordinate weight, Output against the loop."""
    H = W = 3
    x = np.arange(1.0, 10.0).reshape(1, 1, H, W) ** 1.5
    w = np.array([[[[1.7]]]])
    off = np.zeros((1, 2, H, W))
    off[0, 0, 0, :] = -1.0                    # row 0: h = -1 exactly
    off[0, 1, 1, :] = [-1.0, -2.0, -0.25]     # row 1: w = -1, -1, 1.75
    off[0, 0, 2, :] = [-0.5, 0.0, -2.0]       # row 2: h = 1.5, 2 (= H - 1), 0
    off[0, 1, 2, 2] = -3.0                    # (2, 2): w = -1
    dout = np.arange(1.0, 10.0).reshape(1, 1, H, W) / 7
    grads = get_op_def("deformable_conv_v1_grad").forward(x, off, w, dout)
    ref = np.zeros_like(off)
    for y in range(H):
        for xx in range(W):
            h, ww = y + off[0, 0, y, xx], xx + off[0, 1, y, xx]
            for axis in (0, 1):
                ref[0, axis, y, xx] = 1.7 * dout[0, 0, y, xx] * coord_weight(x[0, 0], h, ww, axis)
    assert not ref[0, :, 0, :].any() and ref[0, 0, 1, 0] == 0
    np.testing.assert_allclose(grads["Offset@GRAD"], ref, rtol=1e-12, atol=1e-12)
    out = get_op_def(V1).forward(x, off, w)["Output"]
    np.testing.assert_allclose(out, ref_deform(x, off, None, w, (1, 1), (0, 0), (1, 1), 1, 1),
                               rtol=1e-12)
    assert np.all(out[0, 0, 0] == 0)


def test_samples_far_outside_the_map_read_zero_and_get_no_gradient():
    x = OpTest.rand(1, 2, 4, 4, seed=5)
    w = OpTest.rand(3, 2, 2, 2, seed=6)
    off = OpTest.rand(1, 8, 3, 3, low=-0.4, high=0.4, seed=7)
    off[0, 0::2, 0, :] = -100.0              # h far above the map (every tap)
    off[0, 1::2, 1, :] = -57.5               # w far left of it
    off[0, 0::2, 2, 2] = 250.0               # h far below
    mask = OpTest.rand(1, 4, 3, 3, low=0.2, high=1.0, seed=8)
    out = get_op_def(V2).forward(x, off, mask, w)["Output"]
    ref = ref_deform(x, off, mask, w, (1, 1), (0, 0), (1, 1), 1, 1)
    np.testing.assert_allclose(out, ref, rtol=1e-10, atol=1e-12)
    assert np.all(out[0, :, 0, :] == 0) and np.all(out[0, :, 1, :] == 0)
    g = get_op_def("deformable_conv_grad").forward(x, off, mask, w, np.ones_like(out))
    assert np.all(g["Offset@GRAD"][0, :, 0:2, :] == 0) and np.all(g["Mask@GRAD"][0, :, :2] == 0)


def test_a_non_finite_input_is_not_read_by_samples_outside_its_cell():
    """fluid never reads a corner outside the map, nor any cell of a sample outside it: an
    inf in the first row gives inf (not NaN) where only an in-map corner reads it, and 0 for
    samples above the map (was NaN: the clamped gather times a 0 weight)."""
    x = np.arange(16.0).reshape(1, 1, 4, 4)
    x[0, 0, 0, :] = np.inf
    w = np.ones((1, 1, 1, 1))
    off = np.zeros((1, 2, 4, 4))
    off[0, 0, 2, :] = -3.5                   # row 2 samples h = -1.5: outside
    off[0, 0, 1, :] = -1.5                   # row 1 samples h = -0.5: corner -1 is not read
    off[0, 1, 1, :] = 0.25                   # (and w + 0.25: every corner read has a weight)
    with np.errstate(invalid="ignore"):
        out = get_op_def(V1).forward(x, off, w)["Output"]
        ref = ref_deform(x, off, None, w, (1, 1), (0, 0), (1, 1), 1, 1)
    np.testing.assert_array_equal(out, ref)
    assert np.all(out[0, 0, 2] == 0) and np.all(np.isposinf(out[0, 0, 1]))
    assert np.isposinf(out[0, 0, 0, 3])      # (0, 3): the corner (0, 4) is outside


# -- dtypes, defaults, attributes ----------------------------------------------------------------
def test_float32_is_kept_by_the_output_and_every_gradient():
    x = OpTest.rand(1, 2, 4, 4, dtype="float32", seed=1)
    w = OpTest.rand(2, 2, 2, 2, dtype="float32", seed=2)
    off = OpTest.rand(1, 8, 3, 3, low=-0.7, high=0.7, dtype="float32", seed=3)
    mask = OpTest.rand(1, 4, 3, 3, low=0.1, high=1.0, dtype="float32", seed=4)
    d = get_op_def(V2)
    assert d.infer(spec(1, 2, 4, 4), spec(1, 8, 3, 3), spec(1, 4, 3, 3),
                   spec(2, 2, 2, 2))["Output"].dtype == np.float32
    out = d.forward(x, off, mask, w)["Output"]
    assert out.dtype == np.float32
    ref = ref_deform(*(a.astype(np.float64) for a in (x, off, mask, w)), (1, 1), (0, 0),
                     (1, 1), 1, 1)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)
    g = get_op_def("deformable_conv_grad").forward(x, off, mask, w, np.ones_like(out))
    for slot in ("Input@GRAD", "Offset@GRAD", "Mask@GRAD", "Filter@GRAD"):
        assert g[slot].dtype == np.float32, slot
    g1 = get_op_def("deformable_conv_v1_grad").forward(x, off, w, np.ones_like(out))
    for slot in ("Input@GRAD", "Offset@GRAD", "Filter@GRAD"):
        assert g1[slot].dtype == np.float32, slot


FLUID_DEFAULTS = dict(strides=[1, 1], paddings=[0, 0], dilations=[1, 1], groups=1,
                      deformable_groups=1, im2col_step=64)


def test_attribute_defaults_are_fluids_in_every_op():
    x = OpTest.rand(1, 2, 4, 4, seed=11)
    w = OpTest.rand(2, 2, 2, 2, seed=12)
    off = OpTest.rand(1, 8, 3, 3, low=-0.7, high=0.7, seed=13)
    mask = OpTest.rand(1, 4, 3, 3, low=0.1, high=1.0, seed=14)
    ref2 = ref_deform(x, off, mask, w, (1, 1), (0, 0), (1, 1), 1, 1)
    ref1 = ref_deform(x, off, None, w, (1, 1), (0, 0), (1, 1), 1, 1)
    np.testing.assert_allclose(get_op_def(V2).forward(x, off, mask, w)["Output"], ref2, rtol=1e-12)
    np.testing.assert_allclose(get_op_def(V1).forward(x, off, w)["Output"], ref1, rtol=1e-12)
    assert list(get_op_def(V2).infer(spec(1, 2, 4, 4), spec(1, 8, 3, 3), spec(1, 4, 3, 3),
                                     spec(2, 2, 2, 2))["Output"].shape) == [1, 2, 3, 3]
    assert list(get_op_def(V1).infer(spec(1, 2, 4, 4), spec(1, 8, 3, 3),
                                     spec(2, 2, 2, 2))["Output"].shape) == [1, 2, 3, 3]
    dy = OpTest.rand(1, 2, 3, 3, seed=15)
    for op, ins in (("deformable_conv_grad", (x, off, mask, w, dy)),
                    ("deformable_conv_v1_grad", (x, off, w, dy))):
        implicit = get_op_def(op).forward(*ins)
        explicit = get_op_def(op).forward(*ins, **FLUID_DEFAULTS)
        assert set(implicit) == set(explicit)
        for slot in explicit:
            np.testing.assert_array_equal(implicit[slot], explicit[slot])


class TestV1GradientWithAttributes(OpTest):
    """deformable_conv_v1's gradient op gets the forward's attributes (stride 2, padding,
    dilation 2 along H with a 3-high kernel: the output height differs from dilation 1)."""
    op_type = V1

    def test_strided_dilated_padded(self):
        x = self.rand(1, 2, 7, 5, seed=21)
        w = self.rand(2, 2, 3, 2, seed=22)
        s, p, d = (2, 1), (1, 0), (2, 1)
        oh = (7 + 2 - (2 * 2 + 1)) // 2 + 1
        ow = (5 - 2) // 1 + 1
        assert (oh, ow) == (3, 4)
        off = self.rand(1, 12, oh, ow, low=-0.8, high=0.8, seed=23)
        self.inputs = {"Input": x, "Offset": off, "Filter": w}
        self.attrs = {"strides": list(s), "paddings": list(p), "dilations": list(d)}
        self.outputs = {"Output": ref_deform(x, off, None, w, s, p, d, 1, 1)}
        self.check_infer()
        self.check_output()
        self.check_grad(["Input", "Offset", "Filter"], "Output", delta=1e-4)


# -- build-time checks and their messages ---------------------------------------------------------
X, OFF, MASK, FLT = spec(1, 4, 5, 5), spec(1, 18, 3, 3), spec(1, 9, 3, 3), spec(2, 4, 3, 3)


@pytest.mark.parametrize("args, attrs, msg", [
    ((spec(4, 5, 5), OFF, MASK, FLT), {}, "Input must be 4-D (NCHW), got [4, 5, 5]"),
    ((X, OFF, MASK, spec(2, 4, 9)), {}, "Filter must be 4-D, got [2, 4, 9]"),
    ((X, OFF, MASK, FLT), {"strides": [1]}, "strides must have 2 values, got [1]"),
    ((X, OFF, MASK, FLT), {"paddings": [0, 0, 0]}, "paddings must have 2 values, got [0, 0, 0]"),
    ((X, OFF, MASK, FLT), {"dilations": [1]}, "dilations must have 2 values, got [1]"),
    ((X, OFF, MASK, FLT), {"groups": 0},
     "groups and deformable_groups must be >= 1, got 0 and 1"),
    ((X, OFF, MASK, FLT), {"deformable_groups": 0},
     "groups and deformable_groups must be >= 1, got 1 and 0"),
    ((X, OFF, MASK, spec(2, 4, 3, 3)), {"groups": 2},
     "Input has 4 channels; Filter [2, 4, 3, 3] with groups=2 expects 8, and "
     "deformable_groups=1 must divide it"),
    ((spec(1, 0, 5, 5), OFF, MASK, spec(2, 1, 3, 3)), {},
     "Input has 0 channels; Filter [2, 1, 3, 3] with groups=1 expects 1, and "
     "deformable_groups=1 must divide it"),
    ((spec(1, 4, 5, 5), OFF, MASK, spec(3, 2, 3, 3)), {"groups": 2},
     "the number of filters 3 must be divisible by groups 2"),
    ((X, spec(1, 9, 3, 3), MASK, spec(2, 4, 3, 2)), {},
     "Offset must be [N, 2*deformable_groups*kh*kw = 12, oh, ow], got [1, 9, 3, 3]"),
    ((X, OFF, MASK, FLT), {"deformable_groups": 2},
     "Offset must be [N, 2*deformable_groups*kh*kw = 36, oh, ow], got [1, 18, 3, 3]"),
    ((X, OFF, MASK, FLT), {"strides": [0, 1]},
     "every value of strides and dilations must be >= 1, got strides [0, 1], dilations [1, 1]"),
    ((X, OFF, MASK, FLT), {"dilations": [1, 0]},
     "every value of strides and dilations must be >= 1, got strides [1, 1], dilations [1, 0]"),
    ((spec(1, 4, 2, 5), OFF, MASK, FLT), {},
     "the output would be empty (input 2x5, kernel 3x3, paddings [0, 0], strides [1, 1], "
     "dilations [1, 1])"),
    ((spec(1, 4, 5, 2), OFF, MASK, FLT), {},
     "the output would be empty (input 5x2, kernel 3x3, paddings [0, 0], strides [1, 1], "
     "dilations [1, 1])"),
    ((spec(1, 4, 0, 5), OFF, MASK, FLT), {},
     "the output would be empty (input 0x5, kernel 3x3, paddings [0, 0], strides [1, 1], "
     "dilations [1, 1])"),
    ((spec(1, 4, 5, 0), OFF, MASK, FLT), {},
     "the output would be empty (input 5x0, kernel 3x3, paddings [0, 0], strides [1, 1], "
     "dilations [1, 1])"),
    ((X, OFF, spec(1, 8, 3, 3), FLT), {},
     "Mask must be [N, deformable_groups*kh*kw = 9, oh, ow], got [1, 8, 3, 3]"),
    ((X, OFF, spec(1, 9, 3), FLT), {},
     "Mask must be [N, deformable_groups*kh*kw = 9, oh, ow], got [1, 9, 3]"),
])
def test_build_time_errors_name_the_op_and_the_values(args, attrs, msg):
    with pytest.raises(ValueError) as e:
        get_op_def(V2).infer(*args, **attrs)
    assert str(e.value) == f"{V2}: {msg}"


def test_v1_errors_name_v1():
    with pytest.raises(ValueError) as e:
        get_op_def(V1).infer(spec(4, 5, 5), OFF, FLT)
    assert str(e.value) == f"{V1}: Input must be 4-D (NCHW), got [4, 5, 5]"


def test_run_time_offset_of_another_spatial_size_is_refused_with_both_sizes():
    x = np.zeros((1, 1, 5, 5))
    w = np.zeros((1, 1, 3, 3))
    with pytest.raises(ValueError) as e:
        get_op_def(V1).forward(x, np.zeros((1, 18, 3, 2)), w)
    assert str(e.value) == (f"{V1}: Offset's spatial size [3, 2] must be the output size "
                            f"[3, 3]")


def test_unknown_dims_are_accepted_at_build_time():
    d = get_op_def(V2)
    # Offset's and Mask's channels unknown
    out = d.infer(X, spec(1, -1, 3, 3), spec(1, -1, 3, 3), FLT)["Output"]
    assert list(out.shape) == [1, 2, 3, 3]
    # an unknown height or width: both output dims unknown
    for xs in (spec(1, 4, -1, 5), spec(1, 4, 5, -1), spec(-1, 4, -1, -1)):
        out = d.infer(xs, OFF, MASK, FLT)["Output"]
        assert list(out.shape) == [xs.shape[0], 2, -1, -1]
    # unknown channels skip the channel check
    out = d.infer(spec(1, -1, 5, 5), OFF, MASK, spec(2, 7, 3, 3))["Output"]
    assert list(out.shape) == [1, 2, 3, 3]
    # a known Offset channel count of 1 is not "unknown"
    with pytest.raises(ValueError, match="Offset must be"):
        d.infer(X, spec(1, 1, 3, 3), MASK, FLT)
    with pytest.raises(ValueError, match="Mask must be"):
        d.infer(X, OFF, spec(1, 1, 3, 3), FLT)
