"""Tests written from the sampled mutation run of ``fluidlite/ops/detection.py`` (issue 28,
docs/mutation.md): the prior generators' automatic steps and zero-sized feature maps,
density_prior_box's integer shift and argument checks, box_coder's pixel decode, the pixel
Jaccard of boxes touching at an edge, box_clip of a 3-D input, polygon overlaps of concave
polygons, multiclass_nms / locality_aware_nms shapes, messages and empty results, and
mine_hard_examples' ``hard_example`` mode. References: float64 loops written here from fluid
1.8's kernels (density_prior_box_op.h, box_coder_op.h, nms_util.h, mine_hard_examples_op.cc)."""
import numpy as np
import pytest

from fluidlite.core.registry import VarSpec, get_op_def
from fluidlite.ops.detection import (box_overlap_matrix, jaccard_matrix, offsets_of,
                                     poly_iou_matrix, poly_overlap_area)

VAR = [0.1, 0.1, 0.2, 0.2]


def op(name):
    return get_op_def(name)


# -- priors ---------------------------------------------------------------------------------------
def ref_priors(fh, fw, ih, iw, sw, sh, half_sizes, offset=0.5):
    out = np.zeros((fh, fw, len(half_sizes), 4))
    for h in range(fh):
        for w in range(fw):
            cx, cy = (w + offset) * sw, (h + offset) * sh
            for p, (bw, bh) in enumerate(half_sizes):
                out[h, w, p] = [(cx - bw) / iw, (cy - bh) / ih, (cx + bw) / iw, (cy + bh) / ih]
    return out


def test_prior_box_computes_both_steps_when_only_step_h_is_zero():
    """fluid: ``if (step_w == 0 || step_h == 0)`` both steps are image / feature size."""
    feat, img = np.zeros((1, 2, 2, 3)), np.zeros((1, 3, 20, 30))
    got = op("prior_box").forward(feat, img, min_sizes=[4.0], aspect_ratios=[1.0],
                                  variances=VAR, step_w=6.0, step_h=0.0, flip=False,
                                  clip=False)["Boxes"]
    np.testing.assert_allclose(got, ref_priors(2, 3, 20, 30, 10.0, 10.0, [(2.0, 2.0)]),
                               rtol=1e-12)


def test_zero_sized_feature_maps_give_zero_priors_at_build_time():
    img = VarSpec([1, 3, 16, 24], "float32")
    attrs = dict(variances=VAR, densities=[1], fixed_sizes=[4.0], fixed_ratios=[1.0],
                 flatten_to_2d=True)
    for shape, n in (([1, 2, 0, 3], 0), ([1, 2, 3, 0], 0), ([1, 2, -1, 3], -1),
                     ([1, 2, 3, -1], -1), ([1, 2, 2, 3], 6)):
        spec = op("density_prior_box").infer(VarSpec(shape, "float32"), img, **attrs)
        assert list(spec["Boxes"].shape) == [n, 4], shape
    # yolo_box: anchors * H * W boxes per image, 0 for an empty map, -1 when unknown
    yolo = dict(anchors=[10, 13], class_num=2)
    for shape, n in (([1, 7, 2, 0], 0), ([1, 7, 0, 2], 0), ([1, 7, 2, -1], -1),
                     ([1, 7, 2, 3], 6)):
        spec = op("yolo_box").infer(VarSpec(shape, "float32"), VarSpec([1, 2], "int32"),
                                    **yolo)
        assert list(spec["Boxes"].shape) == [1, n, 4], shape
        assert list(spec["Scores"].shape) == [1, n, 2], shape


def ref_density(fh, fw, ih, iw, step, sizes, densities, ratios, offset=0.5):
    out = []
    for h in range(fh):
        for w in range(fw):
            cx, cy = (w + offset) * step, (h + offset) * step
            for size, d in zip(sizes, densities):
                shift = int(step) // d                       # C++ int / int
                for r in ratios:
                    bw, bh = size * np.sqrt(r), size / np.sqrt(r)
                    for di in range(d):
                        for dj in range(d):
                            x = cx - int(step) / 2.0 + shift / 2.0 + dj * shift
                            y = cy - int(step) / 2.0 + shift / 2.0 + di * shift
                            out.append([max((x - bw / 2) / iw, 0), max((y - bh / 2) / ih, 0),
                                        min((x + bw / 2) / iw, 1), min((y + bh / 2) / ih, 1)])
    return np.array(out).reshape(fh, fw, -1, 4)


def test_density_prior_box_shift_is_an_integer_division():
    """step 8 with density 3: fluid's ``shift = step_average / density`` is 2 (int), not 8/3."""
    feat, img = np.zeros((1, 2, 2, 2)), np.zeros((1, 3, 16, 16))
    got = op("density_prior_box").forward(feat, img, variances=VAR, densities=[3],
                                          fixed_sizes=[4.0], fixed_ratios=[1.0])["Boxes"]
    np.testing.assert_allclose(got, ref_density(2, 2, 16, 16, 8, [4.0], [3], [1.0]),
                               rtol=1e-12)


def test_density_prior_box_step_h_defaults_to_zero_so_steps_are_computed():
    """fluid's step_h default is 0.0: with only step_w given, both steps are automatic."""
    feat, img = np.zeros((1, 2, 2, 2)), np.zeros((1, 3, 16, 16))
    got = op("density_prior_box").forward(feat, img, variances=VAR, densities=[2],
                                          fixed_sizes=[4.0], fixed_ratios=[1.0],
                                          step_w=5.0)["Boxes"]
    np.testing.assert_allclose(got, ref_density(2, 2, 16, 16, 8, [4.0], [2], [1.0]),
                               rtol=1e-12)


@pytest.mark.parametrize("densities,sizes,ratios,match", [
    ([1, 2], [4.0], [1.0], "same length"),
    ([1], [4.0], [], "fixed_ratios must be non-empty"),
    ([0], [4.0], [1.0], "densities positive"),
])
def test_density_prior_box_argument_errors(densities, sizes, ratios, match):
    feat, img = VarSpec([1, 2, 2, 2], "float32"), VarSpec([1, 3, 16, 16], "float32")
    with pytest.raises(ValueError, match=f"density_prior_box: .*{match}"):
        op("density_prior_box").infer(feat, img, variances=VAR, densities=densities,
                                      fixed_sizes=sizes, fixed_ratios=ratios)


def test_anchor_generator_variances_error_names_the_op():
    with pytest.raises(ValueError, match="anchor_generator: variances must have 4 values"):
        op("anchor_generator").forward(np.zeros((1, 1, 2, 2)), anchor_sizes=[32.0],
                                       aspect_ratios=[1.0], variances=[0.1], stride=[8.0, 8.0])


# -- box arithmetic -------------------------------------------------------------------------------
def test_box_coder_decodes_pixel_boxes_with_the_plus_one_convention():
    """box_coder_op.h: pixel priors are x2 - x1 + 1 wide and the decoded x2 / y2 lose 1."""
    rng = np.random.default_rng(7)
    prior = np.array([[2.0, 3.0, 20.0, 15.0], [0.0, 0.0, 9.0, 9.0]])
    target = rng.uniform(-1, 1, (3, 2, 4))
    got = op("box_coder").forward(prior, None, target, code_type="decode_center_size",
                                  box_normalized=False, variance=VAR)["OutputBox"]
    want = np.zeros_like(target)
    for i in range(3):
        for j in range(2):
            p, t = prior[j], target[i, j]
            pw, ph = p[2] - p[0] + 1, p[3] - p[1] + 1
            px, py = p[0] + pw / 2, p[1] + ph / 2
            cx, cy = VAR[0] * t[0] * pw + px, VAR[1] * t[1] * ph + py
            w, h = np.exp(VAR[2] * t[2]) * pw, np.exp(VAR[3] * t[3]) * ph
            want[i, j] = [cx - w / 2, cy - h / 2, cx + w / 2 - 1, cy + h / 2 - 1]
    np.testing.assert_allclose(got, want, rtol=1e-12)


def ref_jaccard(a, b, normalized):
    """nms_util.h's JaccardOverlap."""
    if b[0] > a[2] or b[2] < a[0] or b[1] > a[3] or b[3] < a[1]:
        return 0.0
    norm = 0.0 if normalized else 1.0
    iw = min(a[2], b[2]) - max(a[0], b[0]) + norm
    ih = min(a[3], b[3]) - max(a[1], b[1]) + norm
    inter = iw * ih
    area = lambda r: 0.0 if r[2] < r[0] or r[3] < r[1] else \
        (r[2] - r[0] + norm) * (r[3] - r[1] + norm)  # noqa: E731
    return inter / (area(a) + area(b) - inter)


def test_pixel_jaccard_of_boxes_touching_at_an_edge_counts_the_shared_pixel_row():
    a = np.array([[0.0, 0.0, 4.0, 4.0]])
    # b starts on a's last row / column: one shared pixel row (column), not "apart"
    b = np.array([[0.0, 4.0, 4.0, 8.0], [4.0, 0.0, 8.0, 4.0], [0.0, 5.0, 4.0, 8.0]])
    for normalized in (False, True):
        want = [[ref_jaccard(a[0], r, normalized) for r in b]]
        np.testing.assert_allclose(jaccard_matrix(a, b, normalized), want, rtol=1e-12)
        np.testing.assert_allclose(box_overlap_matrix(a, b, normalized), want, rtol=1e-12)
    assert jaccard_matrix(a, b, False)[0, 0] == pytest.approx(5.0 / 45.0)


def test_box_clip_of_a_3d_input_clips_each_image_to_its_own_size():
    boxes = np.array([[[-5.0, -3.0, 50.0, 40.0]], [[-1.0, 2.0, 30.0, 90.0]]])
    info = np.array([[20.0, 30.0, 1.0], [40.0, 50.0, 2.0]])          # (h, w, scale)
    got = op("box_clip").forward(boxes, info)["Output"]
    want = boxes.copy()
    for i in range(2):
        h, w = np.round(info[i, 0] / info[i, 2]), np.round(info[i, 1] / info[i, 2])
        want[i, :, 0::2] = np.minimum(np.maximum(boxes[i, :, 0::2], 0), w - 1)
        want[i, :, 1::2] = np.minimum(np.maximum(boxes[i, :, 1::2], 0), h - 1)
    np.testing.assert_array_equal(got, want)
    assert not np.array_equal(got, boxes)


# -- matching -------------------------------------------------------------------------------------
def test_bipartite_match_output_slots_and_message():
    spec = op("bipartite_match").infer(VarSpec([3, 5], "float32"))
    assert set(spec) == {"ColToRowMatchIndices", "ColToRowMatchDist"}
    assert list(spec["ColToRowMatchDist"].shape) == [-1, 5]
    with pytest.raises(ValueError, match="bipartite_match: match_type must be"):
        op("bipartite_match").forward(np.zeros((2, 3)), match_type="greedy")


def test_target_assign_neg_indices_without_lod_form_one_instance():
    x = np.arange(2 * 3 * 2, dtype=np.float64).reshape(2, 3, 2)
    match = np.array([[1, -1, 0, -1]], np.int32)
    neg = np.array([[1], [3]], np.int32)
    got = op("target_assign").forward(x, match, neg, mismatch_value=-7)
    want = np.full((1, 4, 2), -7.0)
    want[0, 0], want[0, 2] = x[1, 0], x[0, 2 % 3]
    np.testing.assert_array_equal(got["Out"], want)
    np.testing.assert_array_equal(got["OutWeight"][0, :, 0], [1, 1, 1, 1])


# -- polygons -------------------------------------------------------------------------------------
# an L-shaped (concave) polygon listed from a vertex next to its reflex corner, so that the
# fan from vertex 0 has a clockwise (negative) triangle
L_SHAPE = np.array([[2, 1], [1, 1], [1, 2], [0, 2], [0, 0], [2, 0]], np.float64)


def square(x0, y0, x1, y1):
    return np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]], np.float64)


@pytest.mark.parametrize("other,area", [(square(0, 0, 2, 2), 3.0), (square(1, 1, 2, 2), 0.0),
                                        (square(0.5, 0.5, 1.5, 1.5), 0.75),
                                        (square(-1, -1, 0.5, 3), 1.0)])
def test_overlap_of_a_concave_polygon_with_squares(other, area):
    assert poly_overlap_area(L_SHAPE, other) == pytest.approx(area, abs=1e-12)
    assert poly_overlap_area(other, L_SHAPE) == pytest.approx(area, abs=1e-12)
    assert poly_overlap_area(L_SHAPE[::-1], other) == pytest.approx(area, abs=1e-12)


def test_polygon_iou_of_a_degenerate_polygon_is_zero_and_keeps_the_dtype():
    flat = np.array([[0, 0], [1, 1], [2, 2], [3, 3]], np.float64)     # zero area
    assert poly_overlap_area(flat, square(0, 0, 3, 3)) == 0.0
    a = np.concatenate([square(0, 0, 2, 2).reshape(1, 8), flat.reshape(1, 8)]).astype(np.float32)
    b = square(1, 0, 3, 2).reshape(1, 8).astype(np.float32)
    iou = poly_iou_matrix(a, b)
    assert iou.dtype == np.float32
    np.testing.assert_allclose(iou, [[2.0 / 6.0], [0.0]], rtol=1e-6)


# -- NMS ------------------------------------------------------------------------------------------
def test_multiclass_nms_build_time_shape_and_messages():
    sc = VarSpec([2, 3, 5], "float32")
    for box in (4, 8):
        out = op("multiclass_nms").infer(VarSpec([2, 5, box], "float32"), sc)["Out"]
        assert list(out.shape) == [-1, box + 2]
        assert out.lod_level == 1
    with pytest.raises(ValueError, match="multiclass_nms: Scores must be 2-D or 3-D"):
        op("multiclass_nms").infer(VarSpec([2, 5, 4], "float32"), VarSpec([5], "float32"))
    with pytest.raises(ValueError, match="multiclass_nms: BBoxes must be 3-D"):
        op("multiclass_nms").infer(VarSpec([2, 5, 5], "float32"), sc)
    with pytest.raises(ValueError, match="multiclass_nms: nms_threshold must be >= 0, got -0.1"):
        op("multiclass_nms").infer(VarSpec([2, 5, 4], "float32"), sc, nms_threshold=-0.1)


def test_multiclass_nms_without_detections_keeps_the_dtype():
    boxes = np.array([[[0, 0, 1, 1], [0, 0, 2, 2]]], np.float32)
    scores = np.full((1, 2, 2), 0.01, np.float32)
    got = op("multiclass_nms").forward(boxes, scores, score_threshold=0.5)
    assert got["Out"].dtype == np.float32
    np.testing.assert_array_equal(got["Out"], [[-1]])
    assert got["lod"] == {"Out": ((0, 1),)}


def test_yolo_box_rejects_x_without_channels():
    with pytest.raises(ValueError, match="yolo_box: the channel count of X \\(0\\)"):
        op("yolo_box").infer(VarSpec([1, 0, 2, 2], "float32"), VarSpec([1, 2], "int32"),
                             anchors=[10, 13], class_num=2)


def test_locality_aware_nms_build_time_shape():
    sc = VarSpec([1, 2, 3], "float32")
    out = op("locality_aware_nms").infer(VarSpec([1, 3, 4], "float32"), sc)["Out"]
    assert list(out.shape) == [-1, 6] and out.lod_level == 1
    out = op("locality_aware_nms").infer(VarSpec([1, 3, -1], "float32"), sc)["Out"]
    assert list(out.shape) == [-1, -1] and out.lod_level == 1


def test_locality_aware_nms_default_score_threshold_and_empty_result():
    boxes = np.array([[[0, 0, 1, 1], [5, 5, 6, 6]]], np.float64)
    scores = np.array([[[0.4, 0.3]]])
    # fluidlite's default score_threshold 0.0 keeps both (far apart: no merge, no suppression)
    got = op("locality_aware_nms").forward(boxes, scores)
    np.testing.assert_allclose(got["Out"], [[0, 0.4, 0, 0, 1, 1], [0, 0.3, 5, 5, 6, 6]])
    assert got["lod"] == {"Out": ((0, 2),)}
    got = op("locality_aware_nms").forward(boxes, scores, score_threshold=0.9)
    np.testing.assert_array_equal(got["Out"], [[-1]])
    assert got["lod"] == {"Out": ((0, 1),)}


# -- mine_hard_examples ---------------------------------------------------------------------------
def test_mine_hard_examples_build_time_checks_and_spec():
    cls, match = VarSpec([2, 5], "float32"), VarSpec([2, 5], "int32")
    for mining in ("max_negative", "hard_example"):
        spec = op("mine_hard_examples").infer(cls, None, match, cls, mining_type=mining)
        assert list(spec["NegIndices"].shape) == [-1, 1] and spec["NegIndices"].lod_level == 1
        assert list(spec["UpdatedMatchIndices"].shape) == [2, 5]
    with pytest.raises(ValueError, match="mine_hard_examples: mining_type must be 'max_negative'"
                                         " or 'hard_example', got 'x'"):
        op("mine_hard_examples").infer(cls, None, match, cls, mining_type="x")
    with pytest.raises(ValueError, match="mine_hard_examples: ClsLoss and MatchIndices must be"):
        op("mine_hard_examples").infer(VarSpec([10], "float32"), None, match, cls)


def ref_hard_example(cls, loc, match, sample_size):
    """mine_hard_examples_op.cc, kHardExample: every prior is eligible (loss = cls + loc);
    the sample_size largest are selected; matched priors not selected lose their match,
    unmatched selected ones are the negatives (ascending)."""
    negs, updated = [], match.copy()
    for n in range(match.shape[0]):
        loss = [(cls[n, m] + (loc[n, m] if loc is not None else 0.0), m)
                for m in range(match.shape[1])]
        loss.sort(key=lambda p: -p[0])                       # distinct losses: no ties
        sel = {m for _, m in loss[:min(sample_size, len(loss))]}
        neg = []
        for m in range(match.shape[1]):
            if match[n, m] > -1:
                if m not in sel:
                    updated[n, m] = -1
            elif m in sel:
                neg.append(m)
        negs.append(neg)
    return negs, updated


@pytest.mark.parametrize("with_loc", [True, False])
def test_mine_hard_examples_hard_example_mode(with_loc):
    rng = np.random.default_rng(11)
    cls = rng.permutation(12).reshape(2, 6).astype(np.float64) / 10.0
    loc = rng.permutation(12).reshape(2, 6).astype(np.float64) / 7.0 if with_loc else None
    match = np.array([[0, -1, 1, -1, -1, 2], [-1, 0, -1, -1, 1, -1]], np.int32)
    dist = rng.uniform(0, 1, (2, 6))
    got = op("mine_hard_examples").forward(cls, loc, match, dist, mining_type="hard_example",
                                           sample_size=3)
    negs, updated = ref_hard_example(cls, loc, match, 3)
    flat = [m for neg in negs for m in neg]
    np.testing.assert_array_equal(got["NegIndices"].reshape(-1), flat)
    assert got["NegIndices"].dtype == np.int32
    np.testing.assert_array_equal(got["UpdatedMatchIndices"], updated)
    assert got["lod"]["NegIndices"] == ((0, len(negs[0]), len(flat)),)


def test_mine_hard_examples_of_no_image_is_an_empty_int32_column():
    got = op("mine_hard_examples").forward(np.zeros((0, 4)), None, np.zeros((0, 4), np.int32),
                                           np.zeros((0, 4)))
    assert got["NegIndices"].shape == (0, 1) and got["NegIndices"].dtype == np.int32
    assert got["lod"]["NegIndices"] == ((0,),)


# -- second sample (seed 40) ----------------------------------------------------------------------
def test_offsets_of_composes_every_level_of_a_lod():
    assert offsets_of(((0, 2, 3), (0, 1, 3, 6)), 6).tolist() == [0, 3, 6]
    assert offsets_of(((0, 1, 2), (0, 2, 3), (0, 1, 2, 4)), 4).tolist() == [0, 2, 4]
    assert offsets_of(None, 5).tolist() == [0, 5]


def test_box_coder_encodes_without_any_variance():
    prior = np.array([[0.1, 0.2, 0.5, 0.6], [0.0, 0.0, 1.0, 0.5]])
    target = np.array([[0.2, 0.1, 0.4, 0.7]])
    got = op("box_coder").forward(prior, None, target)["OutputBox"]
    want = np.zeros((1, 2, 4))
    for j, p in enumerate(prior):
        pw, ph = p[2] - p[0], p[3] - p[1]
        px, py = p[0] + pw / 2, p[1] + ph / 2
        tw, th = 0.2, 0.6
        want[0, j] = [(0.3 - px) / pw, (0.4 - py) / ph, np.log(tw / pw), np.log(th / ph)]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_box_coder_and_iou_similarity_build_time_checks():
    p4 = VarSpec([3, 4], "float32")
    with pytest.raises(ValueError, match="box_coder: PriorBoxVar must be"):
        op("box_coder").infer(p4, VarSpec([3, 3], "float32"), VarSpec([2, 4], "float32"))
    with pytest.raises(ValueError, match=r"box_coder: variance must have 4 values, got \[0.1\]"):
        op("box_coder").infer(p4, None, VarSpec([2, 4], "float32"), variance=[0.1])
    with pytest.raises(ValueError, match="iou_similarity: X and Y must be"):
        op("iou_similarity").infer(p4, VarSpec([2, 5], "float32"))
    with pytest.raises(ValueError, match="target_assign: MatchIndices must be 2-D"):
        op("target_assign").infer(VarSpec([3, 2, 4], "float32"), VarSpec([6], "int32"))
    with pytest.raises(ValueError, match=r"yolo_box: .*anchor_num \* \(5 \+ class_num\) = 14"):
        op("yolo_box").infer(VarSpec([1, 8, 2, 2], "float32"), VarSpec([1, 2], "int32"),
                             anchors=[10, 13, 16, 30], class_num=2)


def test_box_clip_of_a_2d_input_without_lod_is_one_image():
    boxes = np.array([[-5.0, -3.0, 50.0, 40.0], [3.0, 4.0, 5.0, 6.0]])
    got = op("box_clip").forward(boxes, np.array([[20.0, 30.0, 1.0]]))["Output"]
    np.testing.assert_array_equal(got, [[0.0, 0.0, 29.0, 19.0], [3.0, 4.0, 5.0, 6.0]])


def test_bipartite_match_stops_when_only_zero_distances_are_left():
    dist = np.array([[0.5, 0.0, 0.0], [0.0, 0.0, 0.0]])
    got = op("bipartite_match").forward(dist)
    np.testing.assert_array_equal(got["ColToRowMatchIndices"], [[0, -1, -1]])
    np.testing.assert_allclose(got["ColToRowMatchDist"], [[0.5, 0.0, 0.0]])


def test_nms_keeps_a_box_whose_overlap_equals_the_threshold():
    """NMSFast keeps a box when overlap <= the threshold: IoU exactly 0.5 at 0.5 is kept."""
    boxes = np.array([[[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 1.0, 0.5], [0.0, 0.0, 1.0, 0.25]]])
    scores = np.array([[[0.0, 0.0, 0.0], [0.9, 0.8, 0.7]]])
    got = op("multiclass_nms").forward(boxes, scores, nms_threshold=0.5, score_threshold=0.1)
    # box 1 (IoU 0.5 with box 0) is kept, box 2 (IoU 0.5 with box 1) too, IoU 0.25 with box 0
    np.testing.assert_allclose(got["Out"][:, 1], [0.9, 0.8, 0.7])


def test_multiclass_nms_lod_form_reads_the_boxes_lod():
    """multiclass_nms_op.cc slices both inputs by BBoxes' LoD in the LoD form."""
    boxes = np.array([[[0, 0, 1, 1], [0, 0, 1, 1]], [[2, 2, 3, 3], [2, 2, 3, 3]],
                      [[5, 5, 6, 6], [5, 5, 6, 6]]], np.float64)           # [M, C, 4]
    scores = np.array([[0.0, 0.9], [0.0, 0.8], [0.0, 0.7]])                  # [M, C]
    got = op("multiclass_nms").forward(boxes, scores, lod={"BBoxes": ((0, 1, 3),)},
                                       score_threshold=0.1)
    assert got["lod"] == {"Out": ((0, 1, 3),)}
    np.testing.assert_allclose(got["Out"][:, 1], [0.9, 0.8, 0.7])


# -- third sample (seed 41) -----------------------------------------------------------------------
def test_more_build_time_messages_and_slots():
    with pytest.raises(ValueError, match="prior_box: Input and Image must be 4-D"):
        op("prior_box").infer(VarSpec([2, 3, 4], "float32"), VarSpec([1, 3, 30, 40], "float32"),
                              min_sizes=[8.0], variances=VAR)
    spec = op("box_clip").infer(VarSpec([5, 4], "float32", 1), VarSpec([2, 3], "float32"))
    assert set(spec) == {"Output"}
    with pytest.raises(ValueError, match=r"box_clip: ImInfo must be \[N, 3\]"):
        op("box_clip").infer(VarSpec([5, 4], "float32"), VarSpec([2, 2], "float32"))
    with pytest.raises(ValueError, match=r"target_assign: X must be 3-D \[rows, P, K\]"):
        op("target_assign").infer(VarSpec([3, 2], "float32"), VarSpec([1, 2], "int32"))


def test_jaccard_of_an_inverted_box_uses_area_zero():
    """nms_util.h: BBoxArea of a box with xmax < xmin is 0; the (negative x negative)
    intersection still enters: IoU = 1 / (16 + 0 - 1)."""
    a = np.array([[0.0, 0.0, 4.0, 4.0]])
    b = np.array([[3.0, 3.0, 2.0, 2.0]])
    np.testing.assert_allclose(jaccard_matrix(a, b, True), [[1.0 / 15.0]], rtol=1e-12)


def test_yolo_box_defaults_are_fluids():
    rng = np.random.default_rng(59)
    x = rng.uniform(-2, 2, (1, 2 * 6, 3, 3))
    img = np.array([[40, 50]], np.int32)
    attrs = dict(anchors=[10, 13, 30, 40], class_num=1, conf_thresh=0.0)
    default = op("yolo_box").forward(x, img, **attrs)
    explicit = op("yolo_box").forward(x, img, downsample_ratio=32, clip_bbox=True, **attrs)
    np.testing.assert_array_equal(default["Boxes"], explicit["Boxes"])
    for other in (dict(downsample_ratio=16), dict(clip_bbox=False)):
        changed = op("yolo_box").forward(x, img, **{"downsample_ratio": 32, "clip_bbox": True,
                                                    **other}, **attrs)
        assert not np.allclose(changed["Boxes"], default["Boxes"]), other


def test_mine_hard_examples_distance_threshold_is_strict():
    """mine_hard_examples_op.cc: a negative needs match_dist < neg_dist_threshold."""
    cls = np.array([[0.9, 0.8, 0.7, 0.1]])
    match = np.array([[0, -1, -1, -1]], np.int32)
    dist = np.array([[0.9, 0.5, 0.2, 0.1]])
    got = op("mine_hard_examples").forward(cls, None, match, dist, neg_pos_ratio=3.0,
                                           neg_dist_threshold=0.5)
    np.testing.assert_array_equal(got["NegIndices"][:, 0], [2, 3])


def test_locality_aware_nms_skips_only_the_background_class():
    boxes = np.array([[[0, 0, 1, 1], [5, 5, 6, 6]]], np.float64)
    scores = np.array([[[0.9, 0.8], [0.4, 0.3]]])                   # classes 0 and 1
    got = op("locality_aware_nms").forward(boxes, scores, background_label=0)
    np.testing.assert_allclose(got["Out"], [[1, 0.4, 0, 0, 1, 1], [1, 0.3, 5, 5, 6, 6]])


# -- fourth sample (seed 42) ----------------------------------------------------------------------
def test_fourth_sample_messages_defaults_and_boundaries():
    feat, img = VarSpec([1, 2, 3, 4], "float32"), VarSpec([1, 3, 30, 40], "float32")
    with pytest.raises(ValueError, match=r"prior_box: max_sizes must have as many values as "
                                         r"min_sizes \(2\), got \[12.0\]"):
        op("prior_box").infer(feat, img, min_sizes=[8.0, 16.0], max_sizes=[12.0], variances=VAR)
    with pytest.raises(ValueError, match="anchor_generator: Input must be 4-D"):
        op("anchor_generator").infer(VarSpec([1, 2, 3], "float32"), anchor_sizes=[32.0],
                                     aspect_ratios=[1.0], variances=VAR, stride=[8.0, 8.0])
    with pytest.raises(ValueError, match="yolo_box: anchors must hold"):
        op("yolo_box").infer(VarSpec([1, 7, 2, 2], "float32"), VarSpec([1, 2], "int32"),
                             anchors=[10], class_num=2)
    # iou_similarity's box_normalized defaults to True (no +1 on the sides)
    x, y = np.array([[0.0, 0.0, 2.0, 2.0]]), np.array([[1.0, 0.0, 3.0, 2.0]])
    np.testing.assert_allclose(op("iou_similarity").forward(x, y)["Out"], [[2.0 / 6.0]])
    # bipartite_match's dist_threshold defaults to 0.5: column 1's best row (0.6) matches
    dist = np.array([[0.9, 0.6]])
    got = op("bipartite_match").forward(dist, match_type="per_prediction")
    np.testing.assert_array_equal(got["ColToRowMatchIndices"], [[0, 0]])
    # mine_hard_examples' neg_pos_ratio defaults to 1: one positive, one negative
    got = op("mine_hard_examples").forward(np.array([[0.1, 0.9, 0.8, 0.7]]), None,
                                           np.array([[0, -1, -1, -1]], np.int32),
                                           np.zeros((1, 4)))
    np.testing.assert_array_equal(got["NegIndices"][:, 0], [1])


def test_jaccard_of_a_box_inverted_in_x_only_uses_area_zero():
    a = np.array([[0.0, 0.0, 4.0, 4.0]])
    b = np.array([[3.0, 1.0, 2.0, 3.0]])           # x2 < x1, y2 > y1: area 0 (BBoxArea)
    # intersection (2 - 3) * (3 - 1) = -2; union 16 + 0 + 2
    np.testing.assert_allclose(jaccard_matrix(a, b, True), [[-2.0 / 18.0]], rtol=1e-12)


def test_multiclass_nms_adaptive_threshold():
    boxes = np.array([[[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 1.0, 0.85], [2.0, 2.0, 3.0, 3.0]]])
    scores = np.array([[[0.0, 0.0, 0.0], [0.9, 0.8, 0.7]]])
    for eta, kept in ((0.9, [0.9, 0.7]), (1.0, [0.9, 0.8, 0.7])):
        got = op("multiclass_nms").forward(boxes, scores, nms_threshold=0.9, nms_eta=eta,
                                           score_threshold=0.1)
        np.testing.assert_allclose(got["Out"][:, 1], kept)
