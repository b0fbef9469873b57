"""Tests written from the mutation run of ``fluidlite/ops/conv3d.py`` (issue 28,
docs/mutation.md): fluid 1.8's attribute defaults (conv_op.cc: strides / dilations {1, 1, 1},
paddings {0, 0, 0}, padding_algorithm EXPLICIT, groups 1, data_format NCDHW), SAME (dilation
forced to 1, ceil(in / s) windows) and VALID (paddings ignored), fluid's truncated output size
(C++ int division: the last window reads zeros past the end), unknown dims at build time,
conv3d_transpose's output_size range, channel-last layouts with groups and dilations (float64
numeric gradients), float32 kept, and every error message. References: the direct loops of
``tests/ops/test_conv3d.py`` (``ref_conv3d``, ``ref_conv3d_transpose``) on explicitly padded
inputs."""
import numpy as np
import pytest

from fluidlite.core.registry import VarSpec, get_op_def
from fluidlite.testing import OpTest
from tests.ops.test_conv3d import ref_conv3d, ref_conv3d_transpose

C3, T3 = "conv3d", "conv3d_transpose"


def spec(*shape, dtype="float32"):
    return VarSpec(list(shape), dtype)


def rand(*shape, seed=0):
    return OpTest.rand(*shape, seed=seed)


def pad3(x, pads):
    """Zero-pad the three spatial dims of an NCDHW array by (before, after) pairs."""
    return np.pad(x, [(0, 0), (0, 0)] + [tuple(p) for p in pads])


# -- defaults, SAME, VALID, truncation ----------------------------------------------------------
def test_conv3d_attribute_defaults_are_fluids():
    x, w = rand(2, 2, 4, 3, 5), rand(3, 2, 2, 2, 3, seed=1)
    d = get_op_def(C3)
    np.testing.assert_allclose(d.forward(x, w)["Output"], ref_conv3d(x, w), rtol=1e-12)
    assert list(d.infer(spec(2, 2, 4, 3, 5), spec(3, 2, 2, 2, 3))["Output"].shape) == \
        [2, 3, 3, 2, 3]
    dy = rand(2, 3, 3, 2, 3, seed=2)
    implicit = get_op_def("conv3d_grad").forward(x, w, dy)
    explicit = get_op_def("conv3d_grad").forward(
        x, w, dy, strides=[1, 1, 1], paddings=[0, 0, 0], padding_algorithm="EXPLICIT",
        groups=1, dilations=[1, 1, 1], data_format="NCDHW")
    for slot in ("Input@GRAD", "Filter@GRAD"):
        np.testing.assert_array_equal(implicit[slot], explicit[slot])


def test_conv3d_transpose_attribute_defaults_are_fluids():
    x, w = rand(1, 2, 3, 2, 3), rand(2, 3, 2, 3, 2, seed=1)
    d = get_op_def(T3)
    np.testing.assert_allclose(d.forward(x, w)["Output"], ref_conv3d_transpose(x, w), rtol=1e-12)
    assert list(d.infer(spec(1, 2, 3, 2, 3), spec(2, 3, 2, 3, 2))["Output"].shape) == \
        [1, 3, 4, 4, 4]
    dy = rand(1, 3, 4, 4, 4, seed=2)
    implicit = get_op_def("conv3d_transpose_grad").forward(x, w, dy)
    explicit = get_op_def("conv3d_transpose_grad").forward(
        x, w, dy, output_size=[], strides=[1, 1, 1], paddings=[0, 0, 0],
        padding_algorithm="EXPLICIT", groups=1, dilations=[1, 1, 1], data_format="NCDHW")
    for slot in ("Input@GRAD", "Filter@GRAD"):
        np.testing.assert_array_equal(implicit[slot], explicit[slot])


def test_same_pads_for_ceil_windows_and_forces_dilation_one():
    """fluid's UpdatePaddingAndDilation: SAME pads each axis by max((ceil(n/s) - 1) * s + k - n,
    0), the smaller half first, and sets the dilations to 1."""
    x, w = rand(1, 2, 5, 6, 4), rand(2, 2, 3, 2, 3, seed=1)
    s = [2, 3, 1]
    out = get_op_def(C3).forward(x, w, strides=s, paddings=[7, 7, 7], dilations=[2, 3, 2],
                                 padding_algorithm="SAME")["Output"]
    pads = []
    for n, st, k in zip((5, 6, 4), s, (3, 2, 3)):
        total = max((-(-n // st) - 1) * st + k - n, 0)
        pads.append((total // 2, total - total // 2))
    assert pads == [(1, 1), (0, 0), (1, 1)]
    ref = ref_conv3d(pad3(x, pads), w, s=s)
    assert out.shape == ref.shape == (1, 2, 3, 2, 4)
    np.testing.assert_allclose(out, ref, rtol=1e-12)
    spec_out = get_op_def(C3).infer(spec(1, 2, 5, 6, 4), spec(2, 2, 3, 2, 3), strides=s,
                                    paddings=[7, 7, 7], dilations=[2, 3, 2],
                                    padding_algorithm="SAME")["Output"]
    assert list(spec_out.shape) == [1, 2, 3, 2, 4]


def test_valid_ignores_the_paddings_and_keeps_the_dilations():
    x, w = rand(1, 1, 6, 5, 5), rand(1, 1, 2, 2, 2, seed=1)
    out = get_op_def(C3).forward(x, w, paddings=[1, 2, 3], dilations=[2, 1, 3],
                                 padding_algorithm="VALID")["Output"]
    ref = ref_conv3d(x, w, d=(2, 1, 3))
    assert out.shape == ref.shape == (1, 1, 4, 4, 2)
    np.testing.assert_allclose(out, ref, rtol=1e-12)


def test_a_truncated_output_size_reads_zeros_past_the_end():
    """(2 + 0 - 3) / 2 + 1 = 1 in C++ (0 with floor division): one window, which reads a zero
    past the input; fluid's im2col does the same. Gradients crop that cell away."""
    x, w = rand(1, 2, 2, 4, 3), rand(2, 2, 3, 2, 1, seed=1)
    d = get_op_def(C3)
    out = d.forward(x, w, strides=[2, 1, 1])["Output"]
    ref = ref_conv3d(pad3(x, [(0, 1), (0, 0), (0, 0)]), w, s=(2, 1, 1))
    assert out.shape == ref.shape == (1, 2, 1, 3, 3)
    np.testing.assert_allclose(out, ref, rtol=1e-12)
    assert list(d.infer(spec(1, 2, 2, 4, 3), spec(2, 2, 3, 2, 1),
                        strides=[2, 1, 1])["Output"].shape) == [1, 2, 1, 3, 3]
    dy = rand(*out.shape, seed=3)
    g = get_op_def("conv3d_grad").forward(x, w, dy, strides=[2, 1, 1])
    assert g["Input@GRAD"].shape == x.shape and g["Filter@GRAD"].shape == w.shape
    # adjoint identity on the padded copy: <conv(x), dy> = <x, dX>, <conv(x), dy> = <w, dW>
    lhs = float((ref * dy).sum())
    np.testing.assert_allclose(float((x * g["Input@GRAD"]).sum()), lhs, rtol=1e-12)
    np.testing.assert_allclose(float((w * g["Filter@GRAD"]).sum()), lhs, rtol=1e-12)


# -- layouts, groups, dilations, gradients -------------------------------------------------------
class TestConv3DChannelLastGroupsDilations(OpTest):
    op_type = C3

    def test_ndhwc(self):
        x = self.rand(2, 4, 5, 3, 4, seed=1)                 # NCDHW
        w = self.rand(4, 2, 2, 2, 1, seed=2)
        s, p, d = (1, 2, 1), (1, 0, 1), (2, 1, 1)
        ref = ref_conv3d(x, w, s, p, d, groups=2)
        self.inputs = {"Input": np.ascontiguousarray(np.moveaxis(x, 1, -1)), "Filter": w}
        self.attrs = {"strides": list(s), "paddings": list(p), "dilations": list(d),
                      "groups": 2, "data_format": "NDHWC"}
        self.outputs = {"Output": np.moveaxis(ref, 1, -1)}
        self.check_infer()
        self.check_output()
        self.check_grad(["Input", "Filter"], "Output")


class TestConv3DTransposeChannelLastGroupsDilations(OpTest):
    op_type = T3

    def test_ndhwc(self):
        x = self.rand(1, 4, 2, 3, 2, seed=1)
        w = self.rand(4, 1, 2, 2, 3, seed=2)
        s, p, d = (2, 1, 1), (0, 1, 1), (1, 2, 1)
        ref = ref_conv3d_transpose(x, w, s, p, d, groups=2)
        self.inputs = {"Input": np.ascontiguousarray(np.moveaxis(x, 1, -1)), "Filter": w}
        self.attrs = {"strides": list(s), "paddings": list(p), "dilations": list(d),
                      "groups": 2, "data_format": "NDHWC"}
        self.outputs = {"Output": np.moveaxis(ref, 1, -1)}
        self.check_infer()
        self.check_output()
        self.check_grad(["Input", "Filter"], "Output")


@pytest.mark.parametrize("op", [C3, T3])
def test_float32_is_kept_by_the_output_and_both_gradients(op):
    x = rand(1, 2, 3, 3, 3).astype(np.float32)
    w = rand(2, 2, 2, 2, 2, seed=1).astype(np.float32)
    d = get_op_def(op)
    out = d.forward(x, w)["Output"]
    assert out.dtype == np.float32
    assert d.infer(spec(1, 2, 3, 3, 3), spec(2, 2, 2, 2, 2))["Output"].dtype == np.float32
    g = get_op_def(op + "_grad").forward(x, w, np.ones_like(out))
    assert g["Input@GRAD"].dtype == np.float32 and g["Filter@GRAD"].dtype == np.float32


# -- conv3d_transpose's output_size ----------------------------------------------------------------
def test_transpose_output_size_accepts_natural_to_natural_plus_stride_minus_one():
    """fluid: output_size in [natural, natural + stride - 1] per axis; the extra cells are
    read by no input cell (zeros beyond the natural output)."""
    x, w = rand(1, 2, 2, 3, 2), rand(2, 1, 3, 2, 2, seed=1)
    d = get_op_def(T3)
    s = [2, 3, 1]
    natural = ref_conv3d_transpose(x, w, s)
    assert natural.shape[2:] == (5, 8, 3)
    for extra in ([0, 0, 0], [1, 2, 0]):
        size = [n + e for n, e in zip(natural.shape[2:], extra)]
        out = d.forward(x, w, strides=s, output_size=size)["Output"]
        ref = np.zeros((1, 1, *size))
        ref[:, :, :5, :8, :3] = natural
        np.testing.assert_allclose(out, ref, rtol=1e-12)
        assert list(d.infer(spec(1, 2, 2, 3, 2), spec(2, 1, 3, 2, 2), strides=s,
                            output_size=size)["Output"].shape) == [1, 1] + size
    for bad, axis, lo, hi in (([7, 8, 3], 0, 5, 6), ([5, 11, 3], 1, 8, 10),
                              ([5, 8, 4], 2, 3, 3), ([4, 8, 3], 0, 5, 6)):
        with pytest.raises(ValueError) as e:
            d.forward(x, w, strides=s, output_size=bad)
        assert str(e.value) == (f"{T3}: output_size {bad} is not reachable from input "
                                f"[2, 3, 2]: along axis {axis} it must lie in [{lo}, {hi}]")
    with pytest.raises(ValueError) as e:
        d.forward(x, w, strides=s, output_size=[5, 8])
    assert str(e.value) == f"{T3}: output_size must have 3 values, got [5, 8]"


def test_transpose_unknown_dims_keep_output_size_or_are_unknown():
    d = get_op_def(T3)
    out = d.infer(spec(-1, 2, -1, 3, 2), spec(2, 1, 3, 2, 2))["Output"]
    assert list(out.shape) == [-1, 1, -1, -1, -1]
    out = d.infer(spec(1, 2, 2, -1, 2), spec(2, 1, 3, 2, 2), output_size=[5, 9, 3])["Output"]
    assert list(out.shape) == [1, 1, 5, 9, 3]
    out = d.infer(spec(1, 2, -1, 3, 2), spec(2, 1, 3, 2, 2),
                  data_format="NDHWC")["Output"]
    assert list(out.shape) == [1, -1, -1, -1, 1]


def test_transpose_same_and_valid():
    x, w = rand(1, 1, 3, 2, 4), rand(1, 2, 2, 3, 3, seed=1)
    d = get_op_def(T3)
    valid = d.forward(x, w, strides=[2, 1, 1], paddings=[1, 1, 1],
                      padding_algorithm="VALID")["Output"]
    np.testing.assert_allclose(valid, ref_conv3d_transpose(x, w, (2, 1, 1)), rtol=1e-12)
    assert list(d.infer(spec(1, 1, 3, 2, 4), spec(1, 2, 2, 3, 3), strides=[2, 1, 1],
                        paddings=[1, 1, 1], padding_algorithm="VALID")["Output"].shape) == \
        list(valid.shape)
    # SAME (dilations forced to 1): the paddings of ceil(in / s) windows of the input --
    # totals 1, 2, 2 here, the smaller half first -- cropped from the full transposed output
    same = d.forward(x, w, strides=[2, 1, 1], dilations=[2, 2, 2], paddings=[5, 5, 5],
                     padding_algorithm="SAME")["Output"]
    full = ref_conv3d_transpose(x, w, (2, 1, 1))
    assert full.shape == (1, 2, 6, 4, 6)
    np.testing.assert_allclose(same, full[:, :, 0:5, 1:3, 1:5], rtol=1e-12)
    assert list(d.infer(spec(1, 1, 3, 2, 4), spec(1, 2, 2, 3, 3), strides=[2, 1, 1],
                        dilations=[2, 2, 2], padding_algorithm="SAME")["Output"].shape) == \
        [1, 2, 5, 2, 4]


# -- build-time and run-time errors ----------------------------------------------------------------
@pytest.mark.parametrize("op", [C3, T3])
@pytest.mark.parametrize("attrs, msg", [
    ({"data_format": "NCWH"}, "data_format must be 'NCDHW' or 'NDHWC' (or fluid's 'NCHW' / "
                              "'NHWC' for channel-first / channel-last), got 'NCWH'"),
    ({"strides": [1, 1]}, "strides must have 3 values, got [1, 1]"),
    ({"dilations": [1, 1, 1, 1]}, "dilations must have 3 values, got [1, 1, 1, 1]"),
    ({"strides": [1, 0, 1]}, "every value of strides must be >= 1, got [1, 0, 1]"),
    ({"dilations": [1, 1, -1]}, "every value of dilations must be >= 1, got [1, 1, -1]"),
    ({"paddings": [1, 1]}, "paddings must have 3 or 6 values, got [1, 1]"),
    ({"padding_algorithm": "FULL"}, "padding_algorithm must be 'EXPLICIT', 'SAME' or 'VALID', "
                                    "got 'FULL'"),
])
def test_attribute_errors_name_the_op_and_the_value(op, attrs, msg):
    with pytest.raises(ValueError) as e:
        get_op_def(op).infer(spec(1, 2, 4, 4, 4), spec(2, 2, 2, 2, 2), **attrs)
    assert str(e.value) == f"{op}: {msg}"


def test_conv3d_empty_outputs_are_refused_at_build_time_and_run_time():
    d = get_op_def(C3)
    with pytest.raises(ValueError) as e:
        d.infer(spec(1, 2, 4, 1, 4), spec(2, 2, 2, 3, 2))
    assert str(e.value) == (f"{C3}: output size [3, -1, 3] is not positive for input "
                            f"[1, 2, 4, 1, 4], filter [2, 2, 2, 3, 2], paddings [(0, 0), (0, 0), "
                            f"(0, 0)], strides [1, 1, 1], dilations [1, 1, 1]")
    # one axis of size 0 alone (the others fine) is refused too
    with pytest.raises(ValueError, match="is not positive"):
        d.infer(spec(1, 2, 4, 4, 1), spec(2, 2, 1, 1, 2), paddings=[0, 0, 0])
    # unknown sizes are not checked
    out = d.infer(spec(1, 2, -1, 4, 4), spec(2, 2, 2, 2, 2))["Output"]
    assert list(out.shape) == [1, 2, -1, 3, 3]
    with pytest.raises(ValueError) as e:
        d.forward(np.zeros((1, 2, 4, 1, 4)), np.zeros((2, 2, 2, 3, 2)))
    assert str(e.value) == (f"{C3}: the output of the convolution would be empty: input "
                            f"[4, 1, 4], kernel [2, 3, 2], paddings [(0, 0), (0, 0), (0, 0)], "
                            f"strides [1, 1, 1], dilations [1, 1, 1]")


def test_transpose_non_positive_output_is_refused():
    d = get_op_def(T3)
    with pytest.raises(ValueError) as e:
        d.forward(np.zeros((1, 1, 1, 2, 2)), np.zeros((1, 1, 1, 1, 1)), paddings=[1, 0, 0])
    assert str(e.value) == (f"{T3}: the output size [-1, 2, 2] must be positive (input "
                            f"[1, 2, 2], kernel [1, 1, 1], paddings [(1, 1), (0, 0), (0, 0)])")


def test_a_zero_sized_axis_is_refused_with_its_size():
    with pytest.raises(ValueError) as e:
        get_op_def(C3).infer(spec(1, 2, 4, 4, 0), spec(2, 2, 1, 1, 1))
    assert str(e.value) == (f"{C3}: output size [4, 4, 0] is not positive for input "
                            f"[1, 2, 4, 4, 0], filter [2, 2, 1, 1, 1], paddings [(0, 0), (0, 0), "
                            f"(0, 0)], strides [1, 1, 1], dilations [1, 1, 1]")


def test_before_only_paddings_on_every_axis():
    """Six paddings [front, back, top, bottom, left, right] = [1, 0, 1, 0, 1, 0]."""
    x, w = rand(1, 2, 3, 4, 3), rand(2, 2, 2, 2, 2, seed=1)
    out = get_op_def(C3).forward(x, w, paddings=[1, 0, 1, 0, 1, 0])["Output"]
    ref = ref_conv3d(pad3(x, [(1, 0), (1, 0), (1, 0)]), w)
    assert out.shape == ref.shape == (1, 2, 3, 4, 3)
    np.testing.assert_allclose(out, ref, rtol=1e-12)


def test_the_gradient_ops_name_themselves_in_layout_errors():
    x, w = np.zeros((1, 2, 3, 3, 3)), np.zeros((2, 2, 1, 1, 1))
    for op in ("conv3d_grad", "conv3d_transpose_grad"):
        with pytest.raises(ValueError) as e:
            get_op_def(op).forward(x, w, np.zeros((1, 2, 3, 3, 3)), data_format="NCWH")
        assert str(e.value).startswith(f"{op}: data_format must be 'NCDHW' or 'NDHWC'")


def test_transpose_output_of_size_zero_and_one():
    d = get_op_def(T3)
    one = d.forward(np.full((1, 1, 1, 1, 1), 2.0), np.full((1, 3, 1, 1, 1), 1.5))["Output"]
    np.testing.assert_array_equal(one, np.full((1, 3, 1, 1, 1), 3.0))
    with pytest.raises(ValueError) as e:
        d.forward(np.zeros((1, 1, 1, 2, 2)), np.zeros((1, 1, 1, 1, 1)),
                  paddings=[1, 0, 0, 0, 0, 0])
    assert str(e.value) == (f"{T3}: the output size [0, 2, 2] must be positive (input "
                            f"[1, 2, 2], kernel [1, 1, 1], paddings [(1, 0), (0, 0), (0, 0)])")


class TestConv3DTransposeOutputSizeGradient(OpTest):
    """conv3d_transpose_grad gets output_size: dOutput is the larger, output_size shape."""
    op_type = T3

    def test_output_size_one_larger(self):
        x, w = self.rand(1, 2, 2, 2, 3, seed=1), self.rand(2, 2, 2, 3, 2, seed=2)
        s = (2, 2, 1)
        natural = ref_conv3d_transpose(x, w, s)
        assert natural.shape == (1, 2, 4, 5, 4)
        ref = np.zeros((1, 2, 5, 6, 4))
        ref[:, :, :4, :5, :] = natural
        self.inputs = {"Input": x, "Filter": w}
        self.attrs = {"strides": list(s), "output_size": [5, 6, 4]}
        self.outputs = {"Output": ref}
        self.check_infer()
        self.check_output()
        self.check_grad(["Input", "Filter"], "Output")


def test_same_with_an_unknown_depth_still_pads_the_other_axes():
    """An unknown dim is skipped, not the axes after it; an axis whose SAME total is 0 (kernel
    1, stride 1) gets no padding."""
    out = get_op_def(C3).infer(spec(1, 2, -1, 5, 7), spec(2, 2, 3, 1, 2), strides=[1, 1, 2],
                               padding_algorithm="SAME")["Output"]
    assert list(out.shape) == [1, 2, -1, 5, 4]
    x, w = rand(1, 2, 3, 5, 7), rand(2, 2, 3, 1, 2, seed=1)
    got = get_op_def(C3).forward(x, w, strides=[1, 1, 2], padding_algorithm="SAME")["Output"]
    # totals: depth 2 -> (1, 1); height 0; width max(3 * 2 + 2 - 7, 0) = 1 -> (0, 1)
    ref = ref_conv3d(pad3(x, [(1, 1), (0, 0), (0, 1)]), w, s=(1, 1, 2))
    assert got.shape == ref.shape == (1, 2, 3, 5, 4)
    np.testing.assert_allclose(got, ref, rtol=1e-12)


def test_transpose_same_with_a_zero_total_axis():
    x, w = rand(1, 1, 3, 2, 4), rand(1, 2, 1, 3, 3, seed=1)
    d = get_op_def(T3)
    same = d.forward(x, w, padding_algorithm="SAME")["Output"]
    full = ref_conv3d_transpose(x, w)                      # depth: kernel 1, total 0
    np.testing.assert_allclose(same, full[:, :, :, 1:3, 1:5], rtol=1e-12)
    assert same.shape == (1, 2, 3, 2, 4)


@pytest.mark.parametrize("pads", [[0, 1, 0, 1, 0, 1], [2, 0, 1, 0, 0, 0]])
def test_asymmetric_paddings_forward_and_gradients(pads):
    x, w = rand(1, 2, 3, 4, 3), rand(2, 2, 2, 2, 2, seed=1)
    pairs = [(pads[0], pads[1]), (pads[2], pads[3]), (pads[4], pads[5])]
    ref = ref_conv3d(pad3(x, pairs), w)
    out = get_op_def(C3).forward(x, w, paddings=pads)["Output"]
    np.testing.assert_allclose(out, ref, rtol=1e-12)
    dy = rand(*ref.shape, seed=2)
    g = get_op_def("conv3d_grad").forward(x, w, dy, paddings=pads)
    lhs = float((ref * dy).sum())
    np.testing.assert_allclose(float((x * g["Input@GRAD"]).sum()), lhs, rtol=1e-12)
    np.testing.assert_allclose(float((w * g["Filter@GRAD"]).sum()), lhs, rtol=1e-12)
    # dInput cell by cell: the direct definition's adjoint, one cell at a time
    probe = np.zeros_like(x)
    probe[0, 1, 2, 3, 0] = 1.0
    np.testing.assert_allclose(g["Input@GRAD"][0, 1, 2, 3, 0],
                               float((ref_conv3d(pad3(probe, pairs), w) * dy).sum()), rtol=1e-12)


def test_run_time_and_gradient_messages_name_their_op():
    x, w = np.zeros((1, 2, 3, 3, 3)), np.zeros((2, 2, 1, 1, 1))
    for op in (C3, T3):
        with pytest.raises(ValueError) as e:
            get_op_def(op).forward(x, w, data_format="NCWH")
        assert str(e.value).startswith(f"{op}: data_format must be")
        with pytest.raises(ValueError) as e:
            get_op_def(op).forward(x, w, padding_algorithm="FULL")
        assert str(e.value).startswith(f"{op}: padding_algorithm must be")
    with pytest.raises(ValueError) as e:
        get_op_def("conv3d_grad").forward(x, np.zeros((2, 2, 5, 1, 1)), x)
    assert str(e.value).startswith("conv3d_grad: the output of the convolution would be empty")
    with pytest.raises(ValueError) as e:
        get_op_def("conv3d_transpose_grad").forward(x, w, x, paddings=[2, 2, 0])
    assert str(e.value).startswith("conv3d_transpose_grad: the output size [-1, -1, 3] must be")
    with pytest.raises(ValueError) as e:
        get_op_def(C3).infer(spec(1, 3, 3, 3, 3), spec(2, 2, 1, 1, 1))
    assert str(e.value).startswith(f"{C3}: Input has 3 channels")
    with pytest.raises(ValueError) as e:
        get_op_def(T3).infer(spec(1, 3, 3, 3, 3), spec(2, 2, 1, 1, 1))
    assert str(e.value).startswith(f"{T3}: Input has 3 channels")
