"""Tests written from the sampled mutation run of ``fluidlite/ops/yolo_loss.py`` (issue 28,
docs/mutation.md): which ground truths count (fluid's ``LessEqualZero``: w or h below 1e-6;
exactly 1e-6 counts), invalid rows before valid ones, the ignore boundary with a non-square
ground truth, ``scale_x_y`` in the predicted boxes, an image without ground-truth rows, two
ground truths in one cell (the gradient of the summed terms), fluid's attribute defaults and
the build-time checks. References: float64 loops written here from yolov3_loss_op.h and
central differences of the loss."""
import numpy as np
import pytest

from fluidlite.core.registry import VarSpec, get_op_def

OP = get_op_def("yolov3_loss")


def sig(v):
    return 1.0 / (1.0 + np.exp(-v))


def iou_center(a, b):
    ix = min(a[0] + a[2] / 2, b[0] + b[2] / 2) - max(a[0] - a[2] / 2, b[0] - b[2] / 2)
    iy = min(a[1] + a[3] / 2, b[1] + b[3] / 2) - max(a[1] - a[3] / 2, b[1] - b[3] / 2)
    inter = 0.0 if ix < 0 or iy < 0 else ix * iy
    return inter / (a[2] * a[3] + b[2] * b[3] - inter)


def ref_ignore_mask(x, gt, anchors, mask, cls, ignore, ds, scale):
    """-1 where a predicted box's best IoU with a valid ground truth exceeds ``ignore``
    (yolov3_loss_op.h; the boxes use scale_x_y: (l + sigmoid(tx) * s - (s - 1) / 2) / H)."""
    n, _, h, w = x.shape
    xs = x.reshape(n, len(mask), 5 + cls, h, w)
    bias = -0.5 * (scale - 1.0)
    out = np.zeros((n, len(mask), h, w))
    for i in range(n):
        for j, a in enumerate(mask):
            for k in range(h):
                for l in range(w):
                    p = [(l + sig(xs[i, j, 0, k, l]) * scale + bias) / h,
                         (k + sig(xs[i, j, 1, k, l]) * scale + bias) / h,
                         np.exp(xs[i, j, 2, k, l]) * anchors[2 * a] / (ds * h),
                         np.exp(xs[i, j, 3, k, l]) * anchors[2 * a + 1] / (ds * h)]
                    ious = [iou_center(p, g) for g in gt[i] if g[2] >= 1e-6 and g[3] >= 1e-6]
                    if ious and max(ious) > ignore:
                        out[i, j, k, l] = -1.0
    return out


def run(x, gt, label, **attrs):
    return OP.forward(x, gt, label, **{"use_label_smooth": True, "scale_x_y": 1.0,
                                       "ignore_thresh": 0.7, **attrs})


def test_a_ground_truth_of_width_exactly_1e_minus_6_counts():
    """fluid skips a ground truth only when w < 1e-6 or h < 1e-6 (LessEqualZero)."""
    x = np.zeros((1, 3 * 6, 2, 2))
    gt = np.array([[[0.3, 0.3, 1e-6, 0.2], [0.6, 0.6, 0.2, 1e-6], [0.5, 0.5, 9e-7, 0.2]]])
    got = run(x, gt, np.zeros((1, 3), np.int32), anchors=[4, 8, 8, 4, 8, 8],
              anchor_mask=[0, 1, 2], class_num=1, downsample_ratio=16)
    match = got["GTMatchMask"][0]
    assert match[0] >= 0 and match[1] >= 0 and match[2] == -1
    # Paddle 2.6.2's paddle.vision.ops.yolo_loss on this input (both 1e-6 boxes counted)
    np.testing.assert_allclose(got["Loss"], [63.0860829], rtol=1e-8)


def test_both_sides_must_be_positive_and_invalid_rows_do_not_stop_the_scan():
    x = np.zeros((1, 2 * 6, 4, 4))
    gt = np.array([[[0.3, 0.3, 0.2, 0.0], [0.3, 0.3, 0.0, 0.2], [0.0, 0.0, 0.0, 0.0],
                    [0.6, 0.6, 0.25, 0.25]]])
    got = run(x, gt, np.zeros((1, 4), np.int32), anchors=[8, 8, 16, 16], anchor_mask=[0, 1],
              class_num=1, downsample_ratio=16)
    np.testing.assert_array_equal(got["GTMatchMask"], [[-1, -1, -1, 1]])
    # a ground truth whose best anchor is outside the mask does not stop the scan either
    gt2 = np.array([[[0.3, 0.3, 0.9, 0.9], [0.6, 0.6, 0.25, 0.25]]])
    got2 = run(x, gt2, np.zeros((1, 2), np.int32), anchors=[8, 8, 16, 16, 60, 60],
               anchor_mask=[0, 1], class_num=1, downsample_ratio=16)
    np.testing.assert_array_equal(got2["GTMatchMask"], [[-1, 1]])
    assert got2["ObjectnessMask"][0, 1, 2, 2] == 1.0
    # the valid one (16 x 16 pixels: anchor 1) is a positive at cell (2, 2)
    assert got["ObjectnessMask"][0, 1, 2, 2] == 1.0


def test_ignore_boundary_with_a_non_square_ground_truth():
    """X = 0 puts every predicted box at its cell centre with the anchor's size: anchor 1
    (16 x 8 px, 0.5 x 0.25) at cell (0, 0) against the ground truth 0.25 x 0.125 at the same
    centre: IoU = 0.03125 / 0.125 = 0.25 exactly. Its best anchor by shape is anchor 0 (not
    in the mask), so no positive hides the ignore mask."""
    x = np.zeros((1, 1 * 6, 2, 2))
    gt = np.array([[[0.25, 0.25, 0.25, 0.125]]])
    attrs = dict(anchors=[8, 8, 16, 8], anchor_mask=[1], class_num=1, downsample_ratio=16)
    assert iou_center([0.25, 0.25, 0.5, 0.25], gt[0, 0]) == 0.25
    got = run(x, gt, np.zeros((1, 1), np.int32), ignore_thresh=0.25, **attrs)
    np.testing.assert_array_equal(got["ObjectnessMask"], np.zeros((1, 1, 2, 2)))
    assert got["GTMatchMask"][0, 0] == -1
    got = run(x, gt, np.zeros((1, 1), np.int32), ignore_thresh=0.24, **attrs)
    np.testing.assert_array_equal(got["ObjectnessMask"][0, 0], [[-1, 0], [0, 0]])


def test_scale_x_y_moves_the_predicted_boxes():
    rng = np.random.default_rng(31)
    anchors, mask, cls = [10, 14, 20, 20, 90, 80], [1], 2
    x = rng.uniform(-2, 2, (2, 1 * (5 + cls), 4, 4))
    # ground truths whose best anchor is not in the mask: the mask is the ignore mask alone
    gt = np.array([[[0.3, 0.4, 0.3, 0.3], [0.7, 0.6, 0.5, 0.45]],
                   [[0.5, 0.5, 0.35, 0.3], [0.2, 0.8, 0.3, 0.35]]])
    label = np.zeros((2, 2), np.int32)
    for ignore in (0.1, 0.15, 0.25):
        masks = []
        for scale in (1.0, 1.6):
            got = run(x, gt, label, anchors=anchors, anchor_mask=mask, class_num=cls,
                      ignore_thresh=ignore, downsample_ratio=8, scale_x_y=scale)
            assert (got["GTMatchMask"] == -1).all()
            want = ref_ignore_mask(x, gt, anchors, mask, cls, ignore, 8, scale)
            np.testing.assert_array_equal(got["ObjectnessMask"], want)
            masks.append(want)
        assert not np.array_equal(masks[0], masks[1])


def test_an_image_without_ground_truth_rows_learns_background_only():
    rng = np.random.default_rng(37)
    x = rng.uniform(-2, 2, (1, 2 * 6, 3, 3))
    got = run(x, np.zeros((1, 0, 4)), np.zeros((1, 0), np.int32), anchors=[8, 8, 16, 16],
              anchor_mask=[0, 1], class_num=1, downsample_ratio=8)
    obj = x.reshape(1, 2, 6, 3, 3)[:, :, 4]
    np.testing.assert_allclose(got["Loss"], [np.sum(np.log1p(np.exp(obj)))], rtol=1e-12)
    assert got["GTMatchMask"].shape == (1, 0)
    np.testing.assert_array_equal(got["ObjectnessMask"], 0)


def test_two_ground_truths_in_one_cell_gradient_is_the_derivative_of_the_loss():
    rng = np.random.default_rng(41)
    attrs = dict(anchors=[8, 8, 16, 16], anchor_mask=[0, 1], class_num=2, ignore_thresh=0.7,
                 downsample_ratio=8, use_label_smooth=True, scale_x_y=1.0)
    x = rng.uniform(-1, 1, (1, 2 * 7, 4, 4))
    # both in cell (1, 1) with anchor 0 (about 8 x 8 px); different labels and offsets;
    # the cell's tw below and th above both targets (each sign of the L1 terms)
    gt = np.array([[[0.30, 0.32, 0.26, 0.24], [0.36, 0.34, 0.22, 0.27]]])
    x[0, 2, 1, 1], x[0, 3, 1, 1] = -0.8, 0.9
    label = np.array([[0, 1]], np.int32)
    score = np.array([[0.8, 0.6]])
    fwd = OP.forward(x, gt, label, score, **attrs)
    np.testing.assert_array_equal(fwd["GTMatchMask"], [[0, 0]])
    dloss = np.array([0.7])
    got = OP.backward(x, gt, label, score, dloss, **attrs)["X"]
    num = np.zeros_like(x)
    eps = 1e-6
    for k in range(x.size):
        e = np.zeros_like(x)
        e.reshape(-1)[k] = eps
        lp = OP.forward(x + e, gt, label, score, **attrs)["Loss"]
        lm = OP.forward(x - e, gt, label, score, **attrs)["Loss"]
        num.reshape(-1)[k] = np.sum((lp - lm) * dloss) / (2 * eps)
    np.testing.assert_allclose(got, num, rtol=1e-5, atol=1e-8)


def test_fluid_defaults_label_smoothing_and_unit_scale():
    """fluid 1.8's defaults: use_label_smooth True, scale_x_y 1.0 (checked against calls
    that pass them, and shown to matter: other values change the loss)."""
    rng = np.random.default_rng(31)
    x = rng.uniform(-2, 2, (2, 1 * 7, 4, 4))
    gt = np.array([[[0.3, 0.4, 0.3, 0.3], [0.7, 0.6, 0.5, 0.45]],
                   [[0.5, 0.5, 0.35, 0.3], [0.2, 0.8, 0.3, 0.35]]])
    label = np.array([[1, 0], [0, 1]], np.int32)
    base = dict(anchors=[10, 14, 20, 20, 90, 80], anchor_mask=[0, 1], class_num=2,
                downsample_ratio=8, ignore_thresh=0.15)
    x = np.concatenate([x, rng.uniform(-2, 2, x.shape)], axis=1)        # two masked anchors
    default = OP.forward(x, gt, label, **base)["Loss"]
    explicit = OP.forward(x, gt, label, use_label_smooth=True, scale_x_y=1.0, **base)["Loss"]
    np.testing.assert_array_equal(default, explicit)
    for other in (dict(use_label_smooth=False), dict(scale_x_y=1.6)):
        changed = OP.forward(x, gt, label, **{"use_label_smooth": True, "scale_x_y": 1.0,
                                              **other}, **base)["Loss"]
        assert not np.allclose(default, changed), other


@pytest.mark.parametrize("x_shape,anchors,mask,cls,match", [
    ([1, 14, 4, 4], [8], [0], 2, "yolov3_loss: anchors must hold"),
    ([1, 14, 4, 4], [], [0], 2, "yolov3_loss: anchors must hold"),
    ([1, 14, 4], [8, 8], [0], 2, "yolov3_loss: X must be 4-D"),
    ([1, 0, 4, 4], [8, 8], [0], 2, r"yolov3_loss: the channel count of X \(0\)"),
    ([1, 14, 4, 4], [8, 8, 16, 16], [], 2, "yolov3_loss: anchor_mask must index the 2"),
    ([1, 14, 4, 4], [8, 8, 16, 16], [2], 2, "yolov3_loss: anchor_mask must index the 2"),
    ([1, 5, 4, 4], [8, 8], [0], 0, "yolov3_loss: class_num must be > 0, got 0"),
    ([1, 12, 4, 4], [8, 8, 16, 16], [0, 1], 2,
     r"yolov3_loss: the channel count of X \(12\) must be len\(anchor_mask\) \* \(5 \+ "
     r"class_num\) = 14"),
    ([1, 14, 4, -1], [8, 8, 16, 16], [0, 1], 2, "yolov3_loss: X must have equal height"),
    ([1, 14, 0, 3], [8, 8, 16, 16], [0, 1], 2, "yolov3_loss: X must have equal height"),
])
def test_build_time_checks(x_shape, anchors, mask, cls, match):
    with pytest.raises(ValueError, match=match):
        OP.infer(VarSpec(x_shape, "float32"), VarSpec([1, 3, 4], "float32"),
                 VarSpec([1, 3], "int32"), anchors=anchors, anchor_mask=mask, class_num=cls)


def test_build_time_ground_truth_checks_and_one_class():
    x = VarSpec([1, 6, 4, 4], "float32")
    spec = OP.infer(x, VarSpec([1, 3, 4], "float32"), VarSpec([1, 3], "int32"),
                    anchors=[8, 8], anchor_mask=[0], class_num=1)
    assert list(spec["GTMatchMask"].shape) == [1, 3]
    with pytest.raises(ValueError, match=r"yolov3_loss: GTBox must be \[N, B, 4\], got"):
        OP.infer(x, VarSpec([1, 3, 5], "float32"), VarSpec([1, 3], "int32"), anchors=[8, 8],
                 anchor_mask=[0], class_num=1)
    with pytest.raises(ValueError, match=r"yolov3_loss: GTLabel must be \[N, B\], got"):
        OP.infer(x, VarSpec([1, 3, 4], "float32"), VarSpec([3], "int32"), anchors=[8, 8],
                 anchor_mask=[0], class_num=1)


def test_default_ignore_threshold_is_0_7():
    """X = 0: anchor 1 (16 px = 0.5) predicts the box (0.25, 0.25, 0.5, 0.5) at cell (0, 0);
    the ground truth 0.47 wide at the same centre has IoU 0.8836 with it (> 0.7: ignored) and
    its best anchor by shape is anchor 0 (15 px), outside the mask."""
    x = np.zeros((1, 6, 2, 2))
    gt = np.array([[[0.25, 0.25, 0.47, 0.47]]])
    attrs = dict(anchors=[15, 15, 16, 16], anchor_mask=[1], class_num=1, downsample_ratio=16)
    assert iou_center([0.25, 0.25, 0.5, 0.5], gt[0, 0]) > 0.7
    got = OP.forward(x, gt, np.zeros((1, 1), np.int32), **attrs)
    np.testing.assert_array_equal(got["ObjectnessMask"][0, 0], [[-1, 0], [0, 0]])
    assert got["GTMatchMask"][0, 0] == -1
