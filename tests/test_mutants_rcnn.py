"""Tests written from the sampled mutation run of ``fluidlite/ops/rcnn.py`` (issue 28,
docs/mutation.md): generate_proposals' adaptive NMS, default threshold, min-size rule at an
image scale other than 1 and per-coordinate variances; the FPN level of ROIs not at the
origin, of inverted ROIs and at a level boundary; the pixel IoU, the straddle boundary, the
background boundary, sampling and empty images of rpn_target_assign; retinanet_target_assign
across images; retinanet_detection_output's nms_top_k -1 and adaptive NMS;
generate_proposal_labels' pixel IoU, class-agnostic targets, images without ground truths and
width-1 cascade rows; the build-time specs and messages of every op. References: values worked
out by hand or float64 loops written here from fluid 1.8's kernels (generate_proposals_op.cc,
distribute_fpn_proposals_op.h, rpn_target_assign_op.cc, bbox_util.h)."""
import numpy as np
import pytest

from fluidlite.core.registry import VarSpec, get_op_def
from fluidlite.ops.rcnn import _pixel_jaccard, _subsample


def op(name):
    return get_op_def(name)


def pixel_iou(a, b):
    iw = min(a[2], b[2]) - max(a[0], b[0]) + 1
    ih = min(a[3], b[3]) - max(a[1], b[1]) + 1
    if iw <= 0 or ih <= 0:
        return 0.0
    inter = iw * ih
    area = lambda r: (r[2] - r[0] + 1) * (r[3] - r[1] + 1)  # noqa: E731
    return inter / (area(a) + area(b) - inter)


def ref_nms(boxes, scores, thresh, eta):
    """fluid's NMS with the adaptive threshold (multiplied by eta after a kept box while > 0.5)."""
    order = sorted(range(len(scores)), key=lambda i: -scores[i])
    kept, thr = [], thresh
    for i in order:
        if all(pixel_iou(boxes[i], boxes[k]) <= thr for k in kept):
            kept.append(i)
            if eta < 1 and thr > 0.5:
                thr *= eta
    return kept


# -- generate_proposals ---------------------------------------------------------------------------
def proposals(anchors, scores, info, var=None, **attrs):
    """generate_proposals over one image whose deltas are 0 (the boxes are the anchors)."""
    a = np.asarray(anchors, np.float64).reshape(1, 1, -1, 4)
    n = a.shape[2]
    sc = np.asarray(scores, np.float64).reshape(1, n, 1, 1)
    deltas = np.zeros((1, 4 * n, 1, 1))
    v = np.ones_like(a) if var is None else var
    return op("generate_proposals").forward(sc, deltas, np.asarray([info], np.float64), a, v,
                                            **attrs)


# IoU(b0, b1) = 0.85: suppressed once the threshold 0.9 has become 0.9 * 0.9 = 0.81
CHAIN = [[0, 0, 99, 99], [0, 0, 99, 84], [200, 200, 299, 299]]
CHAIN_SCORES = [0.9, 0.8, 0.7]


def test_generate_proposals_adaptive_nms_multiplies_the_threshold():
    for eta, n_kept in ((0.9, 2), (1.0, 3)):
        got = proposals(CHAIN, CHAIN_SCORES, [400, 400, 1.0], nms_thresh=0.9, eta=eta,
                        min_size=1.0)
        keep = ref_nms(CHAIN, CHAIN_SCORES, 0.9, eta)
        assert len(keep) == n_kept
        np.testing.assert_array_equal(got["RpnRois"], np.asarray(CHAIN, float)[keep])


def test_generate_proposals_default_nms_threshold_is_one_half():
    boxes = [[0, 0, 99, 99], [0, 0, 99, 59], [0, 0, 99, 39]]     # IoU 0.6 and 0.4 with b0
    got = proposals(boxes, [0.9, 0.8, 0.7], [400, 400, 1.0])
    np.testing.assert_array_equal(got["RpnRois"], np.asarray(boxes, float)[[0, 2]])


def test_generate_proposals_min_size_is_measured_at_the_original_scale():
    """FilterBoxes: (x2 - x1) / im_scale + 1 >= min_size for width and height."""
    boxes = [[0, 0, 19, 39], [0, 50, 39, 69], [100, 100, 139, 139]]
    got = proposals(boxes, [0.9, 0.8, 0.7], [400, 400, 2.0], nms_thresh=0.7, min_size=16.0)
    # widths at scale 1: 10.5 x 20.5, 20.5 x 10.5, 20.5 x 20.5: only the last is kept
    np.testing.assert_array_equal(got["RpnRois"], [[100, 100, 139, 139]])


def test_generate_proposals_decodes_each_coordinate_with_its_own_variance():
    anchors = np.array([[10.0, 20.0, 49.0, 79.0]])
    var = np.array([[0.1, 0.2, 0.3, 0.4]])
    deltas = np.array([0.5, -0.4, 0.3, -0.2])
    got = op("generate_proposals").forward(
        np.ones((1, 1, 1, 1)), deltas.reshape(1, 4, 1, 1), np.array([[400.0, 400.0, 1.0]]),
        anchors.reshape(1, 1, 1, 4), var.reshape(1, 1, 1, 4), min_size=1.0)["RpnRois"]
    aw, ah = 40.0, 60.0
    cx, cy = 0.1 * 0.5 * aw + 10 + aw / 2, 0.2 * -0.4 * ah + 20 + ah / 2
    w, h = np.exp(0.3 * 0.3) * aw, np.exp(0.4 * -0.2) * ah
    np.testing.assert_allclose(got, [[cx - w / 2, cy - h / 2, cx + w / 2 - 1, cy + h / 2 - 1]],
                               rtol=1e-12)


def test_generate_proposals_build_time_spec():
    sc, dl = VarSpec([2, 3, 4, 4], "float32"), VarSpec([2, -1, 4, 4], "float32")
    anc = VarSpec([4, 4, 3, 4], "float32")
    spec = op("generate_proposals").infer(sc, dl, VarSpec([2, 3], "float32"), anc,
                                          VarSpec([4, 5, 3, 4], "float32"))
    assert set(spec) == {"RpnRois", "RpnRoiProbs", "RpnRoisLod"}
    assert list(spec["RpnRoiProbs"].shape) == [-1, 1] and spec["RpnRoiProbs"].lod_level == 1
    assert list(spec["RpnRoisLod"].shape) == [2]


# -- FPN ------------------------------------------------------------------------------------------
def ref_level(r, lo=2, hi=5, refer_level=4, refer_scale=224):
    if r[2] < r[0] or r[3] < r[1]:
        area = 0.0                                     # fluid's BBoxArea of an inverted box
    else:
        area = (r[2] - r[0] + 1) * (r[3] - r[1] + 1)
    with np.errstate(divide="ignore"):
        lvl = np.floor(np.log2(np.sqrt(area) / refer_scale + 1e-6) + refer_level)
    return int(min(hi, max(lo, lvl)))


def test_distribute_fpn_proposals_levels_off_the_origin_inverted_and_at_a_boundary():
    rois = np.array([[300, 300, 523, 523],       # 224 wide: exactly level 4
                     [100, 100, 150, 150],       # small box away from the origin
                     [600, 600, 100, 100],       # inverted: area 0, lowest level
                     [50, 60, 161, 171]], np.float64)
    got = op("distribute_fpn_proposals").forward(rois, min_level=2, max_level=5,
                                                 refer_level=4, refer_scale=224)
    want = [ref_level(r) for r in rois]
    assert want == [4, 2, 2, 3]
    for k, level in enumerate(range(2, 6)):
        np.testing.assert_array_equal(got["MultiFpnRois"][k],
                                      rois[[i for i in range(4) if want[i] == level]])
    assert got["RestoreIndex"].dtype == np.int32


def test_fpn_build_time_checks():
    with pytest.raises(ValueError, match="distribute_fpn_proposals: FpnRois must be"):
        op("distribute_fpn_proposals").infer(VarSpec([5, 5], "float32"))
    r, s = VarSpec([5, 4], "float32"), VarSpec([5, 1], "float32")
    with pytest.raises(ValueError, match="collect_fpn_proposals: 2 levels of ROIs but 1 of"
                                         " scores"):
        op("collect_fpn_proposals").infer([r, r], [s])


# -- box_decoder_and_assign / polygon_box_transform ------------------------------------------------
def test_box_decoder_and_assign_build_time_checks_and_spec():
    bd = op("box_decoder_and_assign")
    p, v = VarSpec([3, 4], "float32"), VarSpec([4], "float32")
    t = VarSpec([3, 8], "float32", 1)
    spec = bd.infer(p, v, t, VarSpec([3, 2], "float32"))
    assert spec["OutputAssignBox"].lod_level == 1 and spec["DecodeBox"].lod_level == 1
    with pytest.raises(ValueError, match="box_decoder_and_assign: PriorBox must be"):
        bd.infer(VarSpec([3, 5], "float32"), v, t, VarSpec([3, 2], "float32"))
    for target, score in (([3, 8], [3, 2, 1]), ([3, 0], [3, 2]), ([3, 8], [3, 3])):
        with pytest.raises(ValueError, match="box_decoder_and_assign: TargetBox must be"):
            bd.infer(p, v, VarSpec(target, "float32"), VarSpec(score, "float32"))


def test_polygon_box_transform_build_time_checks_and_spec():
    pb = op("polygon_box_transform")
    assert set(pb.infer(VarSpec([1, 4, 5, 6], "float32"))) == {"Output"}
    with pytest.raises(ValueError, match="polygon_box_transform: the channel count 3 must"):
        pb.infer(VarSpec([1, 3, 5, 6], "float32"))
    with pytest.raises(ValueError, match="polygon_box_transform: Input must be 4-D"):
        pb.forward(np.zeros((1, 3, 2, 2)))


# -- retinanet_detection_output -------------------------------------------------------------------
def test_pixel_jaccard_of_boxes_sharing_an_edge_row():
    a = np.array([[0.0, 0.0, 4.0, 4.0]])
    b = np.array([[0.0, 4.0, 4.0, 8.0], [4.0, 0.0, 8.0, 4.0], [0.0, 5.0, 4.0, 8.0]])
    np.testing.assert_allclose(_pixel_jaccard(a, b), [[pixel_iou(a[0], r) for r in b]])
    assert _pixel_jaccard(a, b)[0, 0] == pytest.approx(5.0 / 45.0)
    # half a pixel apart in x (or y): fluid's JaccardOverlap calls them apart (0), although
    # their +1-pixel intersection is positive
    far = np.array([[4.5, 0.0, 8.0, 4.0], [0.0, 4.5, 4.0, 8.0], [-4.0, 0.0, -0.5, 4.0]])
    np.testing.assert_array_equal(_pixel_jaccard(a, far), [[0.0, 0.0, 0.0]])


def retinanet(boxes, scores, **attrs):
    """One level, one image, deltas 0 (boxes = anchors), scale 1, one class."""
    a = np.asarray(boxes, np.float64)
    s = np.asarray(scores, np.float64).reshape(1, -1, 1)
    return op("retinanet_detection_output").forward(
        [np.zeros((1, len(a), 4))], [s], [a], np.array([[1000.0, 1000.0, 1.0]]), **attrs)


def test_retinanet_detection_output_nms_top_k_minus_one_keeps_every_candidate():
    boxes = [[0, 0, 9, 9], [20, 20, 29, 29], [40, 40, 49, 49]]
    got = retinanet(boxes, [0.9, 0.8, 0.7], nms_top_k=-1, score_threshold=0.05)["Out"]
    np.testing.assert_allclose(got[:, 1], [0.9, 0.8, 0.7])


def test_retinanet_detection_output_adaptive_nms():
    for eta in (0.9, 1.0):
        got = retinanet(CHAIN, CHAIN_SCORES, nms_threshold=0.9, nms_eta=eta)["Out"]
        keep = ref_nms(CHAIN, CHAIN_SCORES, 0.9, eta)
        np.testing.assert_allclose(got[:, 2:], np.asarray(CHAIN, float)[keep])
        np.testing.assert_allclose(got[:, 0], 1)


def test_retinanet_detection_output_build_time_checks_and_spec():
    rd = op("retinanet_detection_output")
    b, s, a = VarSpec([1, 5, 4], "float32"), VarSpec([1, 5, 2], "float32"), VarSpec([5, 4],
                                                                                       "float32")
    out = rd.infer([b], [s], [a], VarSpec([1, 3], "float32"))["Out"]
    assert list(out.shape) == [-1, 6] and out.lod_level == 1
    with pytest.raises(ValueError, match="retinanet_detection_output: each level needs"):
        rd.infer([b], [VarSpec([5, 2], "float32")], [a], VarSpec([1, 3], "float32"))


# -- rpn_target_assign ----------------------------------------------------------------------------
def rpn(anchors, gt, info, lod=None, crowd=None, **attrs):
    attrs = {"rpn_straddle_thresh": 0.0, "rpn_positive_overlap": 0.7,
             "rpn_negative_overlap": 0.3, "rpn_fg_fraction": 0.5,
             "rpn_batch_size_per_im": 256, "use_random": False, **attrs}
    gt = np.asarray(gt, np.float64).reshape(-1, 4)
    crowd = np.zeros((len(gt), 1), np.int32) if crowd is None else crowd
    lod = lod or {}
    return op("rpn_target_assign").forward(np.asarray(anchors, np.float64), gt, crowd,
                                           np.asarray(info, np.float64), lod=lod, **attrs)


def test_rpn_target_assign_background_boundary_and_the_origin_anchor():
    gt = [[0, 0, 9, 2]]                        # 30 pixels
    # a0 = the ground truth (fg, x1 = 0 is inside with straddle 0); a1 has pixel IoU exactly
    # 0.3 = rpn_negative_overlap (ignored, not background); a2 is far (background)
    anchors = [[0, 0, 9, 2], [0, 0, 9, 9], [50, 50, 59, 59]]
    got = rpn(anchors, gt, [[100, 100, 1.0]])
    np.testing.assert_array_equal(got["LocationIndex"], [0])
    np.testing.assert_array_equal(got["ScoreIndex"], [0, 2])
    np.testing.assert_array_equal(got["TargetLabel"][:, 0], [1, 0])


def test_rpn_target_assign_uses_pixel_iou():
    gt = [[0, 0, 9, 9]]
    # pixel IoU 81 / 100 = 0.81 (fg at 0.8); without the +1 it would be 64 / 81 = 0.79
    anchors = [[0, 0, 9, 9], [1, 1, 9, 9], [60, 60, 69, 69]]
    got = rpn(anchors, gt, [[100, 100, 1.0]], rpn_positive_overlap=0.8)
    assert pixel_iou(anchors[1], gt[0]) == pytest.approx(0.81)
    np.testing.assert_array_equal(got["LocationIndex"], [0, 1])


def test_rpn_target_assign_single_anchor_and_no_ground_truth_and_all_outside():
    got = rpn([[0, 0, 9, 9]], [[0, 0, 9, 9]], [[100, 100, 1.0]])
    np.testing.assert_array_equal(got["LocationIndex"], [0])       # one anchor, matched
    np.testing.assert_array_equal(got["ScoreIndex"], [0])
    np.testing.assert_array_equal(got["TargetLabel"][:, 0], [1])
    np.testing.assert_array_equal(got["BBoxInsideWeight"], np.ones((1, 4)))
    # an image whose only ground truth is crowd: every anchor is background
    got = rpn([[0, 0, 9, 9], [20, 20, 29, 29]], [[0, 0, 9, 9]], [[100, 100, 1.0]],
              crowd=np.array([[1]], np.int32))
    assert got["LocationIndex"].size == 0
    np.testing.assert_array_equal(got["ScoreIndex"], [0, 1])
    np.testing.assert_array_equal(got["TargetLabel"][:, 0], [0, 0])
    # no anchor inside the image
    got = rpn([[-5, 0, 9, 9], [20, 20, 229, 29]], [[0, 0, 9, 9]], [[100, 100, 1.0]])
    assert got["LocationIndex"].size == 0 and got["ScoreIndex"].size == 0
    assert got["TargetBBox"].shape == (0, 4)


def test_rpn_target_assign_without_lod_reads_every_ground_truth_row():
    gt = [[20 * k, 20 * k, 20 * k + 9, 20 * k + 9] for k in range(5)]     # 5 rows, no LoD
    anchors = gt + [[0, 80, 9, 89]]
    got = rpn(anchors, gt, [[100, 100, 1.0]])
    np.testing.assert_array_equal(got["LocationIndex"], [0, 1, 2, 3, 4])
    np.testing.assert_array_equal(got["ScoreIndex"], [0, 1, 2, 3, 4, 5])


def test_rpn_target_assign_samples_the_batch():
    gt = [[0, 0, 9, 9]]
    anchors = [[0, 0, 9, 9], [1, 1, 9, 9], [0, 0, 8, 9]] + \
        [[20 + 10 * k, 50, 29 + 10 * k, 59] for k in range(6)]
    got = rpn(anchors, gt, [[100, 100, 1.0]], rpn_positive_overlap=0.8,
              rpn_batch_size_per_im=4, rpn_fg_fraction=0.5)
    # the first 2 foregrounds, then 4 - 2 = 2 backgrounds (the first ones)
    np.testing.assert_array_equal(got["LocationIndex"], [0, 1])
    np.testing.assert_array_equal(got["ScoreIndex"], [0, 1, 3, 4])
    for _ in range(3):
        got = rpn(anchors, gt, [[100, 100, 1.0]], rpn_positive_overlap=0.8,
                  rpn_batch_size_per_im=4, rpn_fg_fraction=0.5, use_random=True)
        fg, score = got["LocationIndex"], got["ScoreIndex"]
        assert len(fg) == 2 and set(fg) <= {0, 1, 2}
        assert len(score) == 4 and set(score[2:]) <= set(range(3, 9))


def test_rpn_target_assign_of_no_image_and_message():
    got = rpn([[0, 0, 9, 9]], np.zeros((0, 4)), np.zeros((0, 3)),
              lod={"GtBoxes": ((0,),), "IsCrowd": ((0,),)}, crowd=np.zeros((0, 1), np.int32))
    assert got["LocationIndex"].shape == (0,) and got["TargetLabel"].shape == (0, 1)
    assert got["TargetBBox"].shape == (0, 4) and got["BBoxInsideWeight"].shape == (0, 4)
    with pytest.raises(ValueError, match="rpn_target_assign: Anchor must be"):
        op("rpn_target_assign").infer(VarSpec([5, 5], "float32"), VarSpec([2, 4], "float32"),
                                      VarSpec([2, 1], "int32"), VarSpec([1, 3], "float32"))


# -- retinanet_target_assign ----------------------------------------------------------------------
def test_retinanet_target_assign_two_images_offsets_and_shapes():
    anchors = np.array([[0, 0, 9, 9], [30, 30, 39, 39], [60, 60, 69, 69]], np.float64)
    gt = np.array([[0, 0, 9, 9], [60, 60, 69, 69]], np.float64)
    labels = np.array([[4], [2]], np.int32)
    crowd = np.zeros((2, 1), np.int32)
    lod = {"GtBoxes": ((0, 1, 2),), "GtLabels": ((0, 1, 2),), "IsCrowd": ((0, 1, 2),)}
    got = op("retinanet_target_assign").forward(anchors, gt, labels, crowd,
                                                np.array([[100, 100, 1.0]] * 2), lod=lod)
    np.testing.assert_array_equal(got["LocationIndex"], [0, 3 + 2])
    np.testing.assert_array_equal(got["ScoreIndex"], [0, 1, 2, 3 + 2, 3 + 0, 3 + 1])
    np.testing.assert_array_equal(got["TargetLabel"][:, 0], [4, 0, 0, 2, 0, 0])
    assert got["BBoxInsideWeight"].shape == (2, 4)
    np.testing.assert_array_equal(got["ForegroundNumber"], [[2], [2]])
    # an image without ground truths: no foreground, every anchor background
    got = op("retinanet_target_assign").forward(
        anchors, gt[:1], labels[:1], np.ones((1, 1), np.int32), np.array([[100, 100, 1.0]]))
    assert got["LocationIndex"].size == 0
    np.testing.assert_array_equal(got["TargetLabel"][:, 0], [0, 0, 0])
    assert got["BBoxInsideWeight"].shape == (0, 4) and got["TargetBBox"].shape == (0, 4)


def test_retinanet_target_assign_spec_and_no_image():
    spec = op("retinanet_target_assign").infer(*(VarSpec([3, 4], "float32"),) * 5)
    assert list(spec["LocationIndex"].shape) == [-1] and list(spec["TargetBBox"].shape) == [-1, 4]
    got = op("retinanet_target_assign").forward(
        np.zeros((3, 4)), np.zeros((0, 4)), np.zeros((0, 1), np.int32),
        np.zeros((0, 1), np.int32), np.zeros((0, 3)),
        lod={"GtBoxes": ((0,),), "GtLabels": ((0,),), "IsCrowd": ((0,),)})
    assert got["ScoreIndex"].shape == (0,) and got["BBoxInsideWeight"].shape == (0, 4)


# -- generate_proposal_labels ---------------------------------------------------------------------
def labels(rois, gt, cls, **attrs):
    attrs = {"batch_size_per_im": 8, "fg_fraction": 0.5, "fg_thresh": 0.5,
             "bg_thresh_hi": 0.5, "class_nums": 3, "use_random": False, **attrs}
    n = len(gt)
    return op("generate_proposal_labels").forward(
        np.asarray(rois, np.float64).reshape(-1, 4), np.asarray(cls, np.int32).reshape(-1, 1),
        np.zeros((n, 1), np.int32), np.asarray(gt, np.float64).reshape(-1, 4),
        np.array([[200, 200, 1.0]]), **attrs)


def test_generate_proposal_labels_pixel_iou_and_default_bg_thresh_lo():
    gt = [[0, 0, 9, 9]]
    # pixel IoU 0.81 (>= fg 0.8); without +1 it is 0.79; the far ROI has IoU 0 >= 0.0
    rois = [[1, 1, 9, 9], [100, 100, 109, 109]]
    got = labels(rois, gt, [2], fg_thresh=0.8)
    np.testing.assert_array_equal(got["LabelsInt32"][:, 0], [2, 2, 0])
    np.testing.assert_allclose(got["Rois"], [gt[0], rois[0], rois[1]])


def test_generate_proposal_labels_class_agnostic_targets_use_column_block_one():
    gt = [[0, 0, 9, 9]]
    got = labels([[0, 0, 9, 8]], gt, [2], is_cls_agnostic=True, batch_size_per_im=4)
    tgt, inside = got["BboxTargets"], got["BboxInsideWeights"]
    assert tgt.shape == (2, 12)
    np.testing.assert_array_equal(inside[:, 4:8], 1.0)
    assert inside[:, 8:].sum() == 0 and inside[:, :4].sum() == 0
    # the ROI [0, 0, 9, 8] against gt: dy = 0.5 / 9, dh = log(10 / 9), weights 0.1 / 0.2
    np.testing.assert_allclose(tgt[1, 4:8], [0, 0.5 / 9 / 0.1, 0, np.log(10 / 9) / 0.2],
                               atol=1e-12)


def test_generate_proposal_labels_image_without_ground_truth():
    got = labels([[0, 0, 9, 9], [20, 20, 29, 29]], np.zeros((0, 4)), np.zeros((0,)))
    np.testing.assert_array_equal(got["LabelsInt32"][:, 0], [0, 0])
    assert got["BboxTargets"].shape == (2, 12) and got["BboxTargets"].sum() == 0


def test_generate_proposal_labels_cascade_keeps_width_one_rows():
    gt = [[0, 0, 9, 9]]
    rpn = [[0, 0, 9, 9], [5, 5, 5, 14], [50, 50, 49, 60],    # width 1; width 0 (skipped)
           [5, 5, 9, 4]]                                       # height 0 (skipped)
    got = labels(rpn, gt, [1], is_cascade_rcnn=True, fg_thresh=0.5, bg_thresh_lo=0.0)
    np.testing.assert_allclose(got["Rois"], [rpn[0], rpn[1]])
    np.testing.assert_array_equal(got["LabelsInt32"][:, 0], [1, 0])


def test_generate_proposal_labels_spec_and_no_image():
    r = VarSpec([5, 4], "float32")
    spec = op("generate_proposal_labels").infer(r, VarSpec([2, 1], "int32"),
                                                VarSpec([2, 1], "int32"), r,
                                                VarSpec([1, 3], "float32"), class_nums=3)
    for k in ("BboxTargets", "BboxInsideWeights", "BboxOutsideWeights"):
        assert list(spec[k].shape) == [-1, 12] and spec[k].lod_level == 1, k
    assert list(spec["LabelsInt32"].shape) == [-1, 1]
    got = op("generate_proposal_labels").forward(
        np.zeros((0, 4)), np.zeros((0, 1), np.int32), np.zeros((0, 1), np.int32),
        np.zeros((0, 4)), np.zeros((0, 3)),
        lod={"RpnRois": ((0,),), "GtClasses": ((0,),), "IsCrowd": ((0,),), "GtBoxes": ((0,),)})
    assert got["Rois"].shape == (0, 4) and got["LabelsInt32"].shape == (0, 1)
    assert got["BboxTargets"].shape == (0, 4)


# -- second sample (seed 40) ----------------------------------------------------------------------
def test_generate_proposals_keeps_an_overlap_equal_to_the_threshold_and_empty_images():
    boxes = [[0, 0, 9, 9], [0, 0, 9, 4]]                       # pixel IoU 50 / 100 = 0.5
    got = proposals(boxes, [0.9, 0.8], [400, 400, 1.0], nms_thresh=0.5, min_size=1.0)
    np.testing.assert_array_equal(got["RpnRois"], np.asarray(boxes, float))
    # nothing survives the min-size filter: one zero box with score 0 (fluid's kernel)
    got = proposals(boxes, [0.9, 0.8], [400, 400, 1.0], min_size=50.0)
    np.testing.assert_array_equal(got["RpnRois"], np.zeros((1, 4)))
    np.testing.assert_array_equal(got["RpnRoiProbs"], np.zeros((1, 1)))
    with pytest.raises(ValueError, match="generate_proposals: Anchors and Variances must end"):
        op("generate_proposals").infer(VarSpec([1, 3, 4, 4], "float32"),
                                       VarSpec([1, 12, 4, 4], "float32"),
                                       VarSpec([1, 3], "float32"), VarSpec([4, 4, 3, 5], "float32"),
                                       VarSpec([4, 4, 3, 4], "float32"))


def test_distribute_fpn_proposals_clips_to_the_top_level_and_its_spec():
    rois = np.array([[0.0, 0.0, 2000.0, 2000.0], [0.0, 0.0, 10.0, 10.0]])
    got = op("distribute_fpn_proposals").forward(rois, min_level=2, max_level=5,
                                                 refer_level=4, refer_scale=224)
    np.testing.assert_array_equal(got["MultiFpnRois"][3], rois[:1])       # level 5
    np.testing.assert_array_equal(got["MultiFpnRois"][0], rois[1:])       # level 2
    np.testing.assert_array_equal(got["RestoreIndex"][:, 0], [1, 0])
    spec = op("distribute_fpn_proposals").infer(VarSpec([5, 4], "float32"), min_level=2,
                                                max_level=5)
    assert len(spec["MultiFpnRois"]) == 4
    assert all(list(s.shape) == [-1, 4] and s.lod_level == 1 for s in spec["MultiFpnRois"])


def test_box_decoder_and_assign_with_one_class_keeps_the_prior():
    prior = np.array([[0.0, 0.0, 9.0, 9.0], [5.0, 5.0, 14.0, 19.0]])
    got = op("box_decoder_and_assign").forward(prior, np.array([0.1, 0.1, 0.2, 0.2]),
                                               np.zeros((2, 4)), np.ones((2, 1)))
    np.testing.assert_array_equal(got["OutputAssignBox"], prior)
    spec = op("box_decoder_and_assign").infer(VarSpec([3, 4], "float32"),
                                              VarSpec([4], "float32"),
                                              VarSpec([3, -1], "float32"),
                                              VarSpec([3, 2], "float32"))
    assert list(spec["DecodeBox"].shape) == [3, -1]


def test_retinanet_detection_output_last_level_threshold_is_zero():
    """retinanet_detection_output_op.cc: 'For the highest level, we take the threshold 0.0'."""
    boxes = [[0, 0, 9, 9], [20, 20, 29, 29]]
    got = retinanet(boxes, [0.9, 0.01], score_threshold=0.05)["Out"]
    np.testing.assert_allclose(got[:, 1], [0.9, 0.01])
    # on a lower level the threshold applies: the same scores on level 0 of two levels
    a = np.asarray(boxes, np.float64)
    two = op("retinanet_detection_output").forward(
        [np.zeros((1, 2, 4)), np.zeros((1, 1, 4))],
        [np.array([0.9, 0.01]).reshape(1, 2, 1), np.array([0.5]).reshape(1, 1, 1)],
        [a, np.array([[50.0, 50.0, 59.0, 59.0]])], np.array([[1000.0, 1000.0, 1.0]]),
        score_threshold=0.05)["Out"]
    np.testing.assert_allclose(two[:, 1], [0.9, 0.5])
    with pytest.raises(ValueError, match="retinanet_detection_output: BBoxes, Scores and"):
        op("retinanet_detection_output").infer([], [], [], VarSpec([1, 3], "float32"))


def test_subsample_draws_uniformly():
    """use_random keeps a uniform random subset (reservoir sampling): over 4000 draws of 2 of
    10 candidates each is kept about 800 times, the ones past the first two included."""
    rng = np.random.default_rng(0)
    counts = np.zeros(10)
    for _ in range(4000):
        for i in _subsample(list(range(10)), 2, True, rng):
            counts[i] += 1
    assert counts.sum() == 8000
    np.testing.assert_allclose(counts, 800, atol=120)


def test_rpn_target_assign_default_straddle_threshold_is_zero():
    anchors = np.array([[-0.5, 0.0, 9.0, 9.0], [0.0, 0.0, 9.0, 9.0], [50, 50, 59, 59]],
                       np.float64)
    got = op("rpn_target_assign").forward(anchors, np.array([[0.0, 0.0, 9.0, 9.0]]),
                                          np.zeros((1, 1), np.int32),
                                          np.array([[100.0, 100.0, 1.0]]), use_random=False)
    # the anchor at x1 = -0.5 straddles the image: ignored
    np.testing.assert_array_equal(got["LocationIndex"], [1])
    np.testing.assert_array_equal(got["ScoreIndex"], [1, 2])


def test_retinanet_target_assign_full_spec_without_lod_and_no_image():
    spec = op("retinanet_target_assign").infer(*(VarSpec([3, 4], "float32"),) * 5)
    want = {"LocationIndex": [-1], "ScoreIndex": [-1], "TargetLabel": [-1, 1],
            "TargetBBox": [-1, 4], "BBoxInsideWeight": [-1, 4], "ForegroundNumber": [-1, 1]}
    assert {k: list(v.shape) for k, v in spec.items()} == want
    gt = np.array([[20.0 * k, 20.0 * k, 20.0 * k + 9, 20.0 * k + 9] for k in range(5)])
    anchors = np.concatenate([gt, [[0.0, 80.0, 9.0, 89.0]]])
    got = op("retinanet_target_assign").forward(
        anchors, gt, np.arange(1, 6, dtype=np.int32).reshape(-1, 1), np.zeros((5, 1), np.int32),
        np.array([[100.0, 100.0, 1.0]]))
    np.testing.assert_array_equal(got["LocationIndex"], [0, 1, 2, 3, 4])
    np.testing.assert_array_equal(got["TargetLabel"][:, 0], [1, 2, 3, 4, 5, 0])
    got = op("retinanet_target_assign").forward(
        np.zeros((3, 4)), np.zeros((0, 4)), np.zeros((0, 1), np.int32),
        np.zeros((0, 1), np.int32), np.zeros((0, 3)),
        lod={"GtBoxes": ((0,),), "GtLabels": ((0,),), "IsCrowd": ((0,),)})
    assert got["LocationIndex"].shape == (0,)


def test_generate_proposal_labels_defaults_random_backgrounds_and_empty_image():
    gt = [[0, 0, 9, 9]]
    spec = op("generate_proposal_labels").infer(*(VarSpec([2, 4], "float32"),) * 5,
                                                class_nums=1)
    assert "Rois" in spec and list(spec["BboxTargets"].shape) == [-1, 4]
    # default bg_thresh_hi 0.5: IoU 0.81 is neither foreground (fg_thresh 0.9) nor background
    got = op("generate_proposal_labels").forward(
        np.array([[1.0, 1.0, 9.0, 9.0]]), np.array([[1]], np.int32), np.zeros((1, 1), np.int32),
        np.array(gt, np.float64), np.array([[100.0, 100.0, 1.0]]), fg_thresh=0.9,
        use_random=False, class_nums=2)
    np.testing.assert_allclose(got["Rois"], gt)                # the ground truth only
    # random backgrounds: 2 of 10 candidates, not always the first two
    rois = np.array([[50.0 + 5 * k, 50.0, 54.0 + 5 * k, 54.0] for k in range(10)])
    seen = set()
    for _ in range(30):
        got = labels(rois, gt, [1], batch_size_per_im=3, fg_fraction=0.34, use_random=True)
        seen |= {tuple(r) for r in got["Rois"][1:]}
    assert len(seen) > 2
    # an image with neither ground truths nor ROIs
    got = labels(np.zeros((0, 4)), np.zeros((0, 4)), np.zeros((0,)))
    assert got["Rois"].shape == (0, 4) and got["lod"]["Rois"] == ((0, 0),)


# -- third sample (seed 41) -----------------------------------------------------------------------
def test_generate_proposals_pre_nms_top_one_min_size_boundary_and_lod():
    boxes = [[0, 0, 15, 15], [40, 40, 79, 79], [100, 100, 139, 139]]
    got = proposals(boxes, [0.5, 0.9, 0.7], [400, 400, 1.0], pre_nms_topN=1, min_size=1.0)
    np.testing.assert_array_equal(got["RpnRois"], [boxes[1]])
    # 16 x 16 pixels at min_size 16 is kept ((x2 - x1) / scale + 1 >= min_size)
    got = proposals(boxes[:1], [0.5], [400, 400, 1.0], min_size=16.0)
    np.testing.assert_array_equal(got["RpnRois"], [boxes[0]])
    assert got["lod"] == {"RpnRois": ((0, 1),), "RpnRoiProbs": ((0, 1),)}


def test_collect_fpn_proposals_keeps_images_without_selected_rois_and_spec():
    r = np.array([[0, 0, 5, 5], [0, 0, 6, 6], [1, 1, 9, 9]], np.float64)
    s = np.array([[0.9], [0.8], [0.1]])
    col = op("collect_fpn_proposals").forward([r], [s], lod={"MultiLevelRois": [((0, 2, 3),)]},
                                              post_nms_topN=2)
    np.testing.assert_array_equal(col["FpnRois"], r[:2])
    assert col["lod"]["FpnRois"] == ((0, 2, 2),)                 # image 1 kept, empty
    spec = op("collect_fpn_proposals").infer([VarSpec([3, 4], "float32")],
                                             [VarSpec([3, 1], "float32")])
    assert list(spec["FpnRois"].shape) == [-1, 4] and spec["FpnRois"].lod_level == 1


def test_rpn_target_assign_default_fg_fraction_random_backgrounds_and_spec():
    gt = np.array([[0.0, 0.0, 9.0, 9.0]])
    anchors = np.array([[0, 0, 9, 9], [1, 1, 9, 9], [0, 0, 8, 9], [0, 0, 9, 8]] +
                       [[10 * k, 60, 10 * k + 9, 69] for k in range(8)], np.float64)
    got = op("rpn_target_assign").forward(anchors, gt, np.zeros((1, 1), np.int32),
                                          np.array([[100.0, 100.0, 1.0]]),
                                          rpn_batch_size_per_im=4, rpn_positive_overlap=0.8,
                                          use_random=False)
    # fluid's default rpn_fg_fraction 0.25: int(0.25 * 4) = 1 foreground, 3 backgrounds
    np.testing.assert_array_equal(got["LocationIndex"], [0])
    np.testing.assert_array_equal(got["ScoreIndex"], [0, 4, 5, 6])
    seen = set()
    for _ in range(30):
        got = op("rpn_target_assign").forward(anchors, gt, np.zeros((1, 1), np.int32),
                                              np.array([[100.0, 100.0, 1.0]]),
                                              rpn_batch_size_per_im=4, rpn_positive_overlap=0.8)
        seen |= set(got["ScoreIndex"][1:].tolist())
    assert seen > {4, 5, 6}                  # random backgrounds reach beyond the first three
    spec = op("rpn_target_assign").infer(VarSpec([5, 4], "float32"), VarSpec([2, 4], "float32"),
                                         VarSpec([2, 1], "int32"), VarSpec([1, 3], "float32"))
    assert list(spec["LocationIndex"].shape) == [-1] and list(spec["ScoreIndex"].shape) == [-1]


def test_retinanet_target_assign_rank_check():
    v = VarSpec([3, 4], "float32")
    with pytest.raises(ValueError, match="retinanet_target_assign: Anchor, GtBoxes, GtLabels "
                                         "and ImInfo must be 2-D"):
        op("retinanet_target_assign").infer(VarSpec([3, 4, 1], "float32"), v, v, v, v)


# -- fourth sample (seed 42) ----------------------------------------------------------------------
def test_fourth_sample_boundaries_defaults_and_specs():
    # a ROI one pixel high (y2 == y1) still has an area: (w + 1) * 1
    rois = np.array([[0.0, 5.0, 99999.0, 5.0]])
    got = op("distribute_fpn_proposals").forward(rois, min_level=2, max_level=5,
                                                 refer_level=4, refer_scale=224)
    level = int(np.floor(np.log2(np.sqrt(100000.0) / 224 + 1e-6) + 4))
    assert level == 4
    np.testing.assert_array_equal(got["MultiFpnRois"][level - 2], rois)
    # post_nms_topN 0 keeps nothing
    col = op("collect_fpn_proposals").forward([rois], [np.array([[0.5]])], post_nms_topN=0)
    assert col["FpnRois"].shape == (0, 4)
    spec = op("box_decoder_and_assign").infer(VarSpec([3, 4], "float32"),
                                              VarSpec([4], "float32"),
                                              VarSpec([3, 8], "float32"),
                                              VarSpec([3, 2], "float32"))
    assert list(spec["OutputAssignBox"].shape) == [3, 4]


def test_retinanet_detection_output_default_threshold_and_equal_overlap():
    a0 = np.array([[0.0, 0.0, 9.0, 9.0], [20.0, 20.0, 29.0, 29.0]])
    got = op("retinanet_detection_output").forward(
        [np.zeros((1, 2, 4)), np.zeros((1, 1, 4))],
        [np.array([0.04, 0.06]).reshape(1, 2, 1), np.array([0.5]).reshape(1, 1, 1)],
        [a0, np.array([[50.0, 50.0, 59.0, 59.0]])], np.array([[1000.0, 1000.0, 1.0]]))["Out"]
    # fluid's default score_threshold 0.05 drops 0.04 on the lower level
    np.testing.assert_allclose(got[:, 1], [0.5, 0.06])
    # pixel IoU exactly 0.5 = nms_threshold: kept (overlap > threshold suppresses)
    got = retinanet([[0, 0, 9, 9], [0, 0, 9, 4]], [0.9, 0.8], nms_threshold=0.5)["Out"]
    np.testing.assert_allclose(got[:, 1], [0.9, 0.8])


def test_rpn_target_assign_positive_straddle_threshold():
    anchors = np.array([[0.0, 0.0, 9.0, 9.0], [95.0, 0.0, 102.0, 9.0], [0, 50, 9, 59]],
                       np.float64)
    got = rpn(anchors, [[0.0, 0.0, 9.0, 9.0]], [[100, 100, 1.0]], rpn_straddle_thresh=5.0)
    # anchor 1 reaches x2 = 102 < 100 + 5: inside, a background
    np.testing.assert_array_equal(got["ScoreIndex"], [0, 1, 2])


def test_generate_proposal_labels_default_fg_thresh_and_class_count():
    gt = np.array([[0.0, 0.0, 9.0, 9.0]])
    roi = np.array([[0.0, 0.0, 9.0, 3.0]])                    # pixel IoU 0.4 >= 0.25
    got = op("generate_proposal_labels").forward(
        roi, np.array([[1]], np.int32), np.zeros((1, 1), np.int32), gt,
        np.array([[100.0, 100.0, 1.0]]), use_random=False, class_nums=2)
    np.testing.assert_array_equal(got["LabelsInt32"][:, 0], [1, 1])
    # class_nums 1 (background only, class ids 0): 4 target columns
    got = op("generate_proposal_labels").forward(
        roi, np.array([[0]], np.int32), np.zeros((1, 1), np.int32), gt,
        np.array([[100.0, 100.0, 1.0]]), use_random=False)
    assert got["BboxTargets"].shape == (2, 4)
