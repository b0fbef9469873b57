"""Tests written from the sampled mutation run of ``fluidlite/ops/vision.py`` (issue 28,
docs/mutation.md): build-time shapes with zero and unknown dims and the smallest legal
attributes (factor, group, seg_num, n, num_classes 1), unfold with asymmetric paddings and its
stride-1 gradient, 2-D affine_channel, lrn's defaults and NHWC layout, affine_grid of height
2, cos_sim with a broadcast Y, add_position_encoding of size 2 / of no sequence, mean_iou's
accumulators and its mean over the classes present, and the messages naming each op.
References: float64 loops written here from fluid 1.8's definitions, central differences and
exact finite differences of the linear ops."""
import numpy as np
import pytest

from fluidlite.core.registry import VarSpec, get_op_def


def op(name):
    return get_op_def(name)


def linear_grad(forward, x, dout):
    """J^T dout of a forward linear in x, by exact unit perturbations."""
    base = forward(np.zeros_like(x))
    g = np.zeros_like(x)
    for k in range(x.size):
        e = np.zeros_like(x)
        e.reshape(-1)[k] = 1.0
        g.reshape(-1)[k] = np.sum((forward(e) - base) * dout)
    return g


def numeric_grad(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for k in range(x.size):
        e = np.zeros_like(x)
        e.reshape(-1)[k] = eps
        g.reshape(-1)[k] = (f(x + e) - f(x - e)) / (2 * eps)
    return g


# -- rearrangements -------------------------------------------------------------------------------
def test_pixel_shuffle_shapes_messages_and_default_factor():
    ps = op("pixel_shuffle")
    assert list(ps.infer(VarSpec([1, 8, 0, 3], "float32"), upscale_factor=2)["Out"].shape) == \
        [1, 2, 0, 6]
    assert list(ps.infer(VarSpec([1, 8, -1, 3], "float32"), upscale_factor=2)["Out"].shape) == \
        [1, 2, -1, 6]
    with pytest.raises(ValueError, match="pixel_shuffle: upscale_factor must be >= 1, got 0"):
        ps.infer(VarSpec([1, 8, 2, 3], "float32"), upscale_factor=0)
    with pytest.raises(ValueError, match=r"pixel_shuffle: the channel count 6 must be "
                                         r"divisible by upscale_factor\*\*2 = 4"):
        ps.forward(np.zeros((1, 6, 2, 2)), upscale_factor=2)
    d = np.arange(12.0).reshape(1, 3, 2, 2)
    np.testing.assert_array_equal(ps.backward(d)["X"], d)        # factor 1: identity


def test_space_to_depth_messages_name_the_op():
    sd = op("space_to_depth")
    with pytest.raises(ValueError, match="space_to_depth: blocksize must be > 1"):
        sd.infer(VarSpec([1, 4, 4, 4], "float32"), blocksize=1)
    with pytest.raises(ValueError, match="space_to_depth: the width 3 must be divisible"):
        sd.infer(VarSpec([1, 4, 4, 3], "float32"), blocksize=2)
    with pytest.raises(ValueError, match=r"space_to_depth: the channel count 3 must be "
                                         r"divisible by blocksize\*\*2 = 4"):
        sd.infer(VarSpec([1, 3, 4, 4], "float32"), blocksize=2)


def test_group_and_segment_counts_of_one_are_allowed():
    x = VarSpec([4, 3, 2, 2], "float32")
    assert list(op("shuffle_channel").infer(x, group=1)["Out"].shape) == [4, 3, 2, 2]
    assert list(op("temporal_shift").infer(x, seg_num=1)["Out"].shape) == [4, 3, 2, 2]
    assert set(op("lrn").infer(x, n=1)) == {"Out", "MidOut"}
    spec = op("mean_iou").infer(VarSpec([6], "int32"), VarSpec([6], "int32"), num_classes=1)
    assert set(spec) == {"OutMeanIou", "OutWrong", "OutCorrect"}
    assert list(spec["OutCorrect"].shape) == [1]


# -- unfold ---------------------------------------------------------------------------------------
def ref_unfold(x, k, s, p, d):
    """Y[n, (c*kh + i)*kw + j, y*ow + x] = X[n, c, y*sh + i*dh - top, x*sw + j*dw - left]
    (0 outside X), with fluid's output size."""
    N, C, H, W = x.shape
    # C++ int division (toward zero): a kernel longer than the padded input by less than a
    # stride still gives one block, which reads zeros past the canvas
    oh = int((H + p[0] + p[2] - (d[0] * (k[0] - 1) + 1)) / s[0]) + 1
    ow = int((W + p[1] + p[3] - (d[1] * (k[1] - 1) + 1)) / s[1]) + 1
    y = np.zeros((N, C * k[0] * k[1], oh * ow))
    for c in range(C):
        for i in range(k[0]):
            for j in range(k[1]):
                for yy in range(oh):
                    for xx in range(ow):
                        h, w = yy * s[0] + i * d[0] - p[0], xx * s[1] + j * d[1] - p[1]
                        if 0 <= h < H and 0 <= w < W:
                            y[:, (c * k[0] + i) * k[1] + j, yy * ow + xx] = x[:, c, h, w]
    return y


@pytest.mark.parametrize("shape,k,s,p,d", [
    ((2, 2, 5, 7), [2, 3], [2, 3], [1, 2, 0, 3], [1, 1]),
    ((2, 2, 5, 7), [3, 2], [1, 1], [0, 1, 2, 0], [2, 1]),
    ((1, 2, 3, 2), [3, 3], [2, 2], [0, 0, 1, 0], [1, 1]),      # one block past the right
])
def test_unfold_with_asymmetric_paddings_and_its_gradient(shape, k, s, p, d):
    rng = np.random.default_rng(21)
    x = rng.uniform(1, 2, shape)
    attrs = dict(kernel_sizes=k, strides=s, paddings=p, dilations=d)
    got = op("unfold").forward(x, **attrs)["Y"]
    np.testing.assert_array_equal(got, ref_unfold(x, k, s, p, d))
    dout = rng.uniform(-1, 1, got.shape)
    want = linear_grad(lambda v: op("unfold").forward(v, **attrs)["Y"], x, dout)
    np.testing.assert_allclose(op("unfold").backward(x, dout, **attrs)["X"], want,
                               rtol=1e-12, atol=1e-12)


def test_unfold_build_time_shapes_and_messages():
    uf = op("unfold")
    spec = uf.infer(VarSpec([1, 2, 0, 3], "float32"), kernel_sizes=[1, 1], paddings=[1, 0, 1, 0])
    assert list(spec["Y"].shape) == [1, 2, 6]                  # 2 x 3 blocks from the padding
    spec = uf.infer(VarSpec([1, 2, 3, 0], "float32"), kernel_sizes=[1, 1], paddings=[0, 1, 0, 1])
    assert list(spec["Y"].shape) == [1, 2, 6]
    spec = uf.infer(VarSpec([1, 2, -1, 3], "float32"), kernel_sizes=[1, 1])
    assert list(spec["Y"].shape) == [1, 2, -1]
    with pytest.raises(ValueError, match="unfold: the sliding blocks would be empty"):
        uf.infer(VarSpec([1, 2, 0, 3], "float32"), kernel_sizes=[1, 1])
    for name in ("strides", "dilations"):
        with pytest.raises(ValueError, match=f"unfold: {name} must be 2 positive ints"):
            uf.infer(VarSpec([1, 2, 4, 4], "float32"), kernel_sizes=[1, 1], **{name: [0, 1]})
    with pytest.raises(ValueError, match="unfold: paddings must be 4 non-negative ints"):
        uf.infer(VarSpec([1, 2, 4, 4], "float32"), kernel_sizes=[1, 1], paddings=[0, 0])


# -- affine_channel / lrn -------------------------------------------------------------------------
def test_affine_channel_of_a_2d_input():
    x = np.arange(6.0).reshape(2, 3)
    s, b = np.array([1.0, 2.0, 3.0]), np.array([0.5, 0.0, -1.0])
    np.testing.assert_array_equal(op("affine_channel").forward(x, s, b)["Out"], x * s + b)


def ref_lrn(x, n=5, k=2.0, alpha=1e-4, beta=0.75):
    C = x.shape[1]
    pre = (n - 1) // 2
    mid = np.full(x.shape, k)
    for c in range(C):
        for cc in range(max(0, c - pre), min(C, c - pre + n)):
            mid[:, c] += alpha * x[:, cc] ** 2
    return x * mid ** (-beta), mid


def test_lrn_defaults_nhwc_and_gradient():
    rng = np.random.default_rng(23)
    x = rng.uniform(-30, 30, (2, 7, 2, 3))                    # large: alpha's term is visible
    got = op("lrn").forward(x)
    out, mid = ref_lrn(x)
    np.testing.assert_allclose(got["Out"], out, rtol=1e-12)
    np.testing.assert_allclose(got["MidOut"], mid, rtol=1e-12)
    nhwc = op("lrn").forward(x.transpose(0, 2, 3, 1), data_format="NHWC")["Out"]
    np.testing.assert_allclose(nhwc, out.transpose(0, 2, 3, 1), rtol=1e-12)
    dout = rng.uniform(-1, 1, x.shape)
    dx = op("lrn").backward(x, got["MidOut"], dout)["X"]
    want = numeric_grad(lambda v: np.sum(ref_lrn(v)[0] * dout), x)
    np.testing.assert_allclose(dx, want, rtol=1e-6, atol=1e-9)


# -- affine_grid ----------------------------------------------------------------------------------
def test_affine_grid_of_height_two_and_its_checks():
    theta = np.array([[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]])
    got = op("affine_grid").forward(theta, output_shape=[1, 1, 2, 3])["Output"]
    want = np.zeros((1, 2, 3, 2))
    for yi, ys in enumerate([-1.0, 1.0]):
        for xi, xs in enumerate([-1.0, 0.0, 1.0]):
            want[0, yi, xi] = theta[0] @ [xs, ys, 1.0]
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert op("affine_grid").forward(theta, output_shape=[1, 1, 1, 3])["Output"].shape == \
        (1, 1, 3, 2)
    with pytest.raises(ValueError, match=r"affine_grid: Theta must be \[N, 2, 3\], got shape "
                                         r"\[1, 3, 3\]"):
        op("affine_grid").infer(VarSpec([1, 3, 3], "float32"), output_shape=[1, 1, 2, 3])


# -- fsp / cos_sim / bilinear_tensor_product ------------------------------------------------------
def test_fsp_build_time_checks():
    fsp = op("fsp")
    out = fsp.infer(VarSpec([2, 3, -1, 4], "float32"), VarSpec([2, 5, 6, 4], "float32"))["Out"]
    assert list(out.shape) == [2, 3, 5]
    with pytest.raises(ValueError, match="fsp: X and Y must have the same height and width"):
        fsp.infer(VarSpec([2, 3, 3, 4], "float32"), VarSpec([2, 5, 0, 4], "float32"))
    with pytest.raises(ValueError, match="fsp: X and Y must be 4-D, got"):
        fsp.infer(VarSpec([2, 3, 4], "float32"), VarSpec([2, 5, 3, 4], "float32"))


def test_cos_sim_broadcast_y_gradient_and_spec():
    rng = np.random.default_rng(29)
    x, y = rng.uniform(-1, 1, (2, 3)), rng.uniform(-1, 1, (1, 3))
    cs = op("cos_sim")
    fwd = cs.forward(x, y)
    dout = rng.uniform(-1, 1, (2, 1))
    got = cs.backward(x, y, fwd["Out"], fwd["XNorm"], fwd["YNorm"], dout)
    f = lambda a, b: np.sum(cs.forward(a, b)["Out"] * dout)  # noqa: E731
    np.testing.assert_allclose(got["X"], numeric_grad(lambda v: f(v, y), x), rtol=1e-6)
    np.testing.assert_allclose(got["Y"], numeric_grad(lambda v: f(x, v), y), rtol=1e-6)
    spec = cs.infer(VarSpec([3, 4], "float32", 1), VarSpec([-1, 4], "float32"))
    assert spec["Out"].lod_level == 1 and list(spec["Out"].shape) == [3, 1]


def test_bilinear_tensor_product_build_time_checks():
    bt = op("bilinear_tensor_product")
    w = VarSpec([5, 3, 4], "float32")
    out = bt.infer(VarSpec([2, 3], "float32"), VarSpec([2, -1], "float32"), w)["Out"]
    assert list(out.shape) == [2, 5]
    with pytest.raises(ValueError, match=r"bilinear_tensor_product: X \[2, 3\] and Y \[2, 5\] "
                                         r"do not match Weight"):
        bt.infer(VarSpec([2, 3], "float32"), VarSpec([2, 5], "float32"), w)


# -- add_position_encoding ------------------------------------------------------------------------
def test_add_position_encoding_size_two_no_sequence_and_defaults():
    ape = op("add_position_encoding")
    x = np.zeros((1, 3, 2))
    got = ape.forward(x)["Out"]
    p = np.arange(3.0)
    np.testing.assert_allclose(got[0], np.stack([np.sin(p / 10000.0), np.cos(p / 10000.0)], 1),
                               rtol=1e-12)
    empty = ape.forward(np.zeros((0, 4)), lod={"X": ((0,),)})
    assert empty["Out"].shape == (0, 4)
    d = np.arange(8.0).reshape(1, 2, 4)
    np.testing.assert_array_equal(ape.backward(d)["X"], d)        # alpha 1 by default
    with pytest.raises(ValueError, match="add_position_encoding: the encoding size 5 must be"):
        ape.forward(np.zeros((1, 4, 5)))
    with pytest.raises(ValueError, match="add_position_encoding: X must be 3-D"):
        ape.infer(VarSpec([4, 6], "float32"))


def test_similarity_focus_output_slot():
    assert set(op("similarity_focus").infer(VarSpec([1, 2, 3, 3], "float32"),
                                            indexes=[0])) == {"Out"}


# -- mean_iou -------------------------------------------------------------------------------------
def test_mean_iou_over_present_classes_and_accumulators():
    mi = op("mean_iou")
    pred, label = np.zeros(4, np.int32), np.zeros(4, np.int32)
    got = mi.forward(pred, label, num_classes=2)
    assert got["OutMeanIou"][0] == pytest.approx(1.0)        # only class 0 is present
    pred = np.array([0, 1, 1, 0, 2], np.int32)
    label = np.array([0, 1, 0, 2, 2], np.int32)
    in_wrong, in_correct = [np.array([1, 0, 2], np.int32)], [np.array([3, 1, 0], np.int32)]
    got = mi.forward(pred, label, [np.array([0.25], np.float32)], in_wrong, in_correct,
                     num_classes=3)
    correct = np.array([1, 1, 1]) + in_correct[0]
    wrong = np.array([2, 1, 1]) + in_wrong[0]      # label-side + prediction-side misses
    np.testing.assert_array_equal(got["OutCorrect"], correct)
    np.testing.assert_array_equal(got["OutWrong"], wrong)
    assert got["OutMeanIou"][0] == pytest.approx(np.mean(correct / (correct + wrong)) + 0.25,
                                                 rel=1e-6)


# -- second sample (seed 40) ----------------------------------------------------------------------
def test_more_messages_name_the_op_and_the_right_dim():
    with pytest.raises(ValueError, match="shuffle_channel: X must be 4-D"):
        op("shuffle_channel").infer(VarSpec([2, 6, 3], "float32"), group=2)
    with pytest.raises(ValueError, match="shuffle_channel: the channel count 6 must be "
                                         "divisible by group 4"):
        op("shuffle_channel").infer(VarSpec([2, 6, 3, 5], "float32"), group=4)
    with pytest.raises(ValueError, match="temporal_shift: the batch 5 must be divisible by "
                                         "seg_num 2"):
        op("temporal_shift").infer(VarSpec([5, 4, 3, 3], "float32"), seg_num=2)
    with pytest.raises(ValueError, match="unfold: kernel_sizes must be 2 positive ints"):
        op("unfold").forward(np.zeros((1, 1, 3, 3)), kernel_sizes=[0, 1])
    with pytest.raises(ValueError, match="affine_channel: Bias must be 1-D with 2"):
        op("affine_channel").infer(VarSpec([1, 2, 3, 3], "float32"), VarSpec([2], "float32"),
                                   VarSpec([3], "float32"))
    with pytest.raises(ValueError, match="affine_channel: Scale must be 1-D with 0"):
        op("affine_channel").infer(VarSpec([1, 0, 3, 3], "float32"), VarSpec([3], "float32"),
                                   VarSpec([3], "float32"))
    with pytest.raises(ValueError, match="cos_sim: X and Y must have the same trailing dims"):
        op("cos_sim").infer(VarSpec([3, 4], "float32"), VarSpec([3, 0], "float32"))
    with pytest.raises(ValueError, match="cos_sim: Y must have 1 row or as many rows as X"):
        op("cos_sim").infer(VarSpec([3, 4], "float32"), VarSpec([2, 4], "float32"))
    with pytest.raises(ValueError, match="add_position_encoding: X must be"):
        op("add_position_encoding").forward(np.zeros((3, 4)))
    spec = op("unfold").infer(VarSpec([1, 2, 3, -1], "float32"), kernel_sizes=[1, 1])
    assert list(spec["Y"].shape) == [1, 2, -1]


def test_affine_channel_gradient_defaults_and_dtype():
    rng = np.random.default_rng(47)
    x = rng.uniform(-1, 1, (2, 3, 2, 2)).astype(np.float32)
    s, b = np.float32([1.5, -2.0, 0.5]), np.float32([0.1, 0.2, 0.3])
    d = rng.uniform(-1, 1, x.shape).astype(np.float32)
    g = op("affine_channel").backward(x, s, b, d)               # data_layout NCHW by default
    assert g["Scale"].dtype == np.float32 and g["Bias"].dtype == np.float32
    np.testing.assert_allclose(g["Scale"], (d * x).sum(axis=(0, 2, 3)), rtol=1e-5)
    np.testing.assert_allclose(g["X"], d * s.reshape(1, 3, 1, 1), rtol=1e-6)


@pytest.mark.parametrize("xs,ys", [((2, 1), (1, 1)), ((2, 2, 3), (1, 2, 3))])
def test_cos_sim_broadcast_y_gradient_shapes(xs, ys):
    rng = np.random.default_rng(53)
    x, y = rng.uniform(0.5, 1, xs), rng.uniform(0.5, 1, ys)
    cs = op("cos_sim")
    fwd = cs.forward(x, y)
    dout = rng.uniform(-1, 1, (xs[0], 1))
    got = cs.backward(x, y, fwd["Out"], fwd["XNorm"], fwd["YNorm"], dout)
    f = lambda a, b: np.sum(cs.forward(a, b)["Out"] * dout)  # noqa: E731
    assert got["Y"].shape == ys
    np.testing.assert_allclose(got["Y"], numeric_grad(lambda v: f(x, v), y), rtol=1e-6,
                               atol=1e-9)


# -- third sample (seed 41) -----------------------------------------------------------------------
def test_third_sample_shapes_and_messages():
    sd = op("space_to_depth")
    assert list(sd.infer(VarSpec([1, -1, 4, 4], "float32"))["Out"].shape) == [1, -1, 2, 2]
    assert list(sd.infer(VarSpec([1, 4, 0, 4], "float32"))["Out"].shape) == [1, 16, 0, 2]
    with pytest.raises(ValueError, match=r"temporal_shift: shift_ratio must be in \(0, 0.5\)"):
        op("temporal_shift").infer(VarSpec([4, 4, 3, 3], "float32"), seg_num=2, shift_ratio=0.5)
    assert list(op("unfold").infer(VarSpec([1, 0, 4, 4], "float32"),
                                   kernel_sizes=[2, 2])["Y"].shape) == [1, 0, 9]
    with pytest.raises(ValueError, match="affine_channel: X must have rank >= 2"):
        op("affine_channel").infer(VarSpec([3], "float32"), VarSpec([3], "float32"),
                                   VarSpec([3], "float32"))
    assert op("affine_channel").infer(VarSpec([1, 3, 2, 2], "float32"), VarSpec([-1], "float32"),
                                      VarSpec([3], "float32"))["Out"].shape == (1, 3, 2, 2)
    bt, w = op("bilinear_tensor_product"), VarSpec([5, 3, 4], "float32")
    with pytest.raises(ValueError, match="bilinear_tensor_product: X and Y must be 2-D"):
        bt.infer(VarSpec([2, 3], "float32"), VarSpec([2, 4, 1], "float32"), w)
    with pytest.raises(ValueError, match=r"bilinear_tensor_product: Bias must be \[1, 5\]"):
        bt.infer(VarSpec([2, 3], "float32"), VarSpec([2, 4], "float32"), w,
                 VarSpec([1, 3], "float32"))
    sf = op("similarity_focus")
    with pytest.raises(ValueError, match="similarity_focus: X must be 4-D"):
        sf.infer(VarSpec([2, 3, 3], "float32"), indexes=[0])
    with pytest.raises(ValueError, match="similarity_focus: indexes must not be empty"):
        sf.infer(VarSpec([1, 2, 3, 3], "float32"), indexes=[])
    with pytest.raises(ValueError, match="mean_iou: num_classes must be >= 1, got 0"):
        op("mean_iou").infer(VarSpec([4], "int32"), VarSpec([4], "int32"), num_classes=0)


# -- fourth sample (seed 42) ----------------------------------------------------------------------
def test_fourth_sample_shapes_and_messages():
    assert list(op("space_to_depth").infer(VarSpec([1, 0, 4, 4], "float32"))["Out"].shape) == \
        [1, 0, 2, 2]
    with pytest.raises(ValueError, match="lrn: X must be 4-D, got 3-D"):
        op("lrn").infer(VarSpec([2, 3, 4], "float32"))
    out = op("grid_sampler").infer(VarSpec([2, 3, 5, 6], "float32"),
                                   VarSpec([2, 4, 7, 2], "float32"))["Output"]
    assert list(out.shape) == [2, 3, 4, 7]
    with pytest.raises(ValueError, match="cos_sim: Y must have 1 row or as many rows as X"):
        op("cos_sim").infer(VarSpec([0, 4], "float32"), VarSpec([2, 4], "float32"))
    bt = op("bilinear_tensor_product")
    with pytest.raises(ValueError, match=r"bilinear_tensor_product: Weight must be 3-D"):
        bt.infer(VarSpec([2, 3], "float32"), VarSpec([2, 4], "float32"),
                 VarSpec([5, 12], "float32"))
    out = bt.infer(VarSpec([2, -1], "float32"), VarSpec([2, 4], "float32"),
                   VarSpec([5, 3, 4], "float32"))["Out"]
    assert list(out.shape) == [2, 5]
