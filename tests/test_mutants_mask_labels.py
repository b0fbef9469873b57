"""Tests written from mutation testing (issue 28, docs/mutation.md) for
``fluidlite/ops/mask_labels.py``: the polygon rasterizer against masks of pycocotools 2.0.11
(``frPyObjects`` + ``decode``, quoted below as column-major run lengths, as COCO stores them),
and ``generate_mask_labels`` against fluid 1.8's generate_mask_labels_op.cc: foreground ROIs
matched to the ground truth box they overlap most (areas with +1, crowd and class 0 left out),
each class's block of MaskInt32, the first background ROI when an image has no foreground,
images without ROIs, the LoD, dtypes and the error messages."""
import numpy as np
import pytest

from fluidlite.core.dtypes import VarType
from fluidlite.core.registry import VarSpec, get_op_def
from fluidlite.ops.mask_labels import poly_to_mask, polys_to_mask_wrt_box

OP = get_op_def("generate_mask_labels")


def _decode(counts, h, w):
    """COCO's uncompressed RLE: alternating runs of 0s and 1s, column by column."""
    flat, pos, val = np.zeros(h * w, np.uint8), 0, 0
    for c in counts:
        flat[pos:pos + c] = val
        pos += c
        val = 1 - val
    return flat.reshape(w, h).T


# (polygon, h, w, pycocotools 2.0.11's mask as run lengths)
COCO = [
    ([1, 1, 6, 1, 6, 5, 1, 5], 8, 8,
     [9, 4, 4, 4, 4, 4, 4, 4, 4, 4, 19]),
    ([0, 0, 7, 0, 0, 7], 8, 8,
     [0, 6, 2, 5, 3, 4, 4, 3, 5, 2, 6, 1, 23]),
    ([2, 2, 2, 2, 5, 2, 5, 6, 2, 6], 8, 8,
     [18, 4, 4, 4, 4, 4, 26]),
    ([0.3, 6.7, 3.2, 0.4, 6.9, 5.5], 9, 7,
     [6, 1, 6, 3, 4, 4, 4, 5, 5, 4, 6, 3, 8, 1, 3]),
    ([6.5, 1.2, 1.1, 2.3, 2.0, 7.8, 5.9, 6.1], 10, 8,
     [12, 2, 8, 6, 4, 5, 5, 5, 4, 5, 5, 1, 18]),
    ([-2.0, -1.0, 12.0, 3.0, 4.0, 11.0], 8, 9,
     [0, 4, 4, 6, 2, 8, 1, 7, 1, 7, 1, 7, 1, 7, 2, 5, 3, 4, 2]),
    ([3.0, 0.0, 3.0, 9.0, 4.0, 9.0, 4.0, 0.0], 10, 10,
     [30, 9, 61]),
    ([0.0, 4.0, 9.0, 4.0, 9.0, 5.0, 0.0, 5.0], 10, 10,
     [4, 1, 9, 1, 9, 1, 9, 1, 9, 1, 9, 1, 9, 1, 9, 1, 9, 1, 15]),
    ([1.0, 1.0, 8.0, 2.0, 2.0, 8.0, 7.5, 7.5, 1.5, 4.5], 10, 10,
     [11, 3, 7, 4, 2, 1, 3, 7, 3, 4, 1, 2, 4, 2, 3, 1, 4, 1, 4, 1, 32]),
    ([5.0, 5.0, 5.0, 5.0, 5.0, 5.0], 8, 8,
     [64]),
]


@pytest.mark.parametrize("xy,h,w,counts", COCO)
def test_poly_to_mask_is_cocos(xy, h, w, counts):
    got = poly_to_mask(xy, h, w)
    assert got.dtype == np.uint8 and got.shape == (h, w)
    np.testing.assert_array_equal(got, _decode(counts, h, w))


# (polygons, box, resolution, pycocotools' union of the polygons mapped into the box frame
# with fluid's Polys2MaskWrtBox rule (p - box_min) * M / max(box size, 1))
BOXED = [
    ([[2.0, 2.0, 10.0, 2.0, 10.0, 8.0, 2.0, 8.0]],
     [0.0, 0.0, 12.0, 10.0], 6, [7, 4, 2, 4, 2, 4, 2, 4, 7]),
    ([[1.0, 1.0, 5.0, 1.5, 3.0, 6.0], [6.0, 6.0, 9.0, 6.0, 9.0, 9.5]],
     [0.5, 0.5, 10.0, 10.0], 7, [0, 1, 7, 2, 5, 2, 22, 2, 8]),
    ([[3.0, 3.0, 3.6, 3.0, 3.6, 3.4, 3.0, 3.4]],
     [3.0, 3.0, 3.5, 3.2], 5, [0, 2, 3, 2, 3, 2, 13]),
    ([[2.0, 5.0, 8.0, 4.5, 6.0, 9.0, 2.5, 8.0]],
     [1.5, 3.0, 7.0, 11.0], 5, [6, 2, 3, 2, 3, 3, 2, 2, 2]),
]


@pytest.mark.parametrize("polys,box,m,counts", BOXED)
def test_polys_to_mask_wrt_box_is_cocos_union(polys, box, m, counts):
    got = polys_to_mask_wrt_box(polys, box, m)
    np.testing.assert_array_equal(got, _decode(counts, m, m))


def _iou_plus_one(a, b):
    """fluid's BboxOverlaps: pixel boxes, areas (x2 - x1 + 1) * (y2 - y1 + 1)."""
    a, b = [float(v) for v in a], [float(v) for v in b]
    iw = min(a[2], b[2]) - max(a[0], b[0]) + 1
    ih = min(a[3], b[3]) - max(a[1], b[1]) + 1
    if iw <= 0 or ih <= 0:
        return 0.0
    inter = iw * ih
    area = lambda r: (r[2] - r[0] + 1) * (r[3] - r[1] + 1)        # noqa: E731
    return inter / (area(a) + area(b) - inter)


def _inputs():
    sq = [[2, 2], [10, 2], [10, 8], [2, 8]]
    tri = [[40, 40], [50, 40], [50, 50]]
    segms = np.array(sq + tri + tri                                   # gt 0, 1 (crowd), 2 (bg)
                     + [[20, 20], [30, 20], [30, 30]] + [[24, 32], [28, 32], [28, 36]]  # gt 3
                     + sq + sq, np.float32)                            # image 1, image 3
    lod = {"GtSegms": ((0, 4, 5, 5, 6), (0, 1, 2, 3, 5, 6, 7), (0, 4, 7, 10, 13, 16, 20, 24)),
           "GtClasses": ((0, 4, 5, 5, 6),), "IsCrowd": ((0, 4, 5, 5, 6),),
           "Rois": ((0, 5, 8, 8, 10),), "LabelsInt32": ((0, 5, 8, 8, 10),)}
    cls = np.array([[2], [1], [0], [3], [1], [1]], np.int32)
    crowd = np.array([[0], [1], [0], [0], [0], [1]], np.int32)
    rois = np.array([[4, 4, 20, 16], [1, 1, 5, 5], [40, 40, 60, 72], [0, 0, 4, 4],
                     [6, 6, 9, 9],                                     # image 0 (scale 2)
                     [1, 2, 3, 4], [5, 6, 7, 8], [9, 9, 12, 12],       # image 1: no foreground
                     [2, 2, 6, 6], [3, 3, 7, 7]], np.float32)          # image 3: only crowd
    labels = np.array([[2], [0], [3], [1], [-1], [-1], [0], [0], [1], [0]], np.int32)
    info = np.array([[64, 64, 2.0], [32, 32, 1.0], [32, 32, 1.0], [32, 32, 1.0]], np.float32)
    return (info, cls, crowd, segms, rois, labels), lod


def test_generate_mask_labels_matches_fluids_sampling():
    args, lod = _inputs()
    got = OP.forward(*args, lod=lod, num_classes=4, resolution=4)
    info, cls, crowd, segms, rois, labels = args
    # image 0: foreground rois 0, 2, 3 (label > 0; -1 is ignored), matched by overlap with
    # the boxes of the non-crowd, class > 0 ground truths 0 ([2, 2, 10, 8]) and 3
    boxes = {0: [2, 2, 10, 8], 3: [20, 20, 30, 36]}
    polys = {0: [segms[0:4].reshape(-1)], 3: [segms[10:13].reshape(-1), segms[13:16].reshape(-1)]}
    want_rows = []
    for r in (0, 2, 3):
        roi = rois[r] / 2.0
        best = max(boxes, key=lambda g: (_iou_plus_one(roi, boxes[g]), -g))
        c = int(labels[r, 0])
        row = np.full(4 * 16, -1, np.int32)
        row[c * 16:(c + 1) * 16] = polys_to_mask_wrt_box(polys[best], roi, 4).reshape(-1)
        want_rows.append(row)
    assert [max(boxes, key=lambda g: _iou_plus_one(rois[r] / 2.0, boxes[g])) for r in (0, 2, 3)] \
        == [0, 3, 0]
    # image 1 (no foreground) and image 3 (foreground, but only crowd ground truth): the first
    # background roi (label 0, not the ignored -1) with an all -1 target; image 2: no rois
    want_rows += [np.full(64, -1, np.int32)] * 2
    np.testing.assert_array_equal(got["RoiHasMaskInt32"], [[0], [2], [3], [1], [1]])
    np.testing.assert_array_equal(got["MaskRois"], rois[[0, 2, 3, 6, 9]])
    assert got["MaskRois"].dtype == np.float32 and got["RoiHasMaskInt32"].dtype == np.int32
    assert got["MaskInt32"].dtype == np.int32
    np.testing.assert_array_equal(got["MaskInt32"], np.stack(want_rows))
    assert (want_rows[0] == 1).any() and (want_rows[1] == 1).any()
    for slot in ("MaskRois", "RoiHasMaskInt32", "MaskInt32"):
        assert got["lod"][slot] == ((0, 3, 4, 4, 5),)


def test_generate_mask_labels_of_images_without_any_mask():
    args, lod = _inputs()
    info, cls, crowd, segms, rois, labels = args
    only = {k: ((0, 0),) if k != "GtSegms" else ((0, 0), (0,), (0,)) for k in lod}
    got = OP.forward(info[:1], cls[:0], crowd[:0], segms[:0], rois[:0], labels[:0],
                     lod=dict(only, Rois=((0, 0),), LabelsInt32=((0, 0),)),
                     num_classes=2, resolution=3)
    assert got["MaskRois"].shape == (0, 4) and got["RoiHasMaskInt32"].shape == (0, 1)
    assert got["MaskInt32"].shape == (0, 18) and got["lod"]["MaskInt32"] == ((0, 0),)


def test_generate_mask_labels_shapes_and_messages():
    r = VarSpec((-1, 4), VarType.FP32, 1)
    i32 = VarSpec((-1, 1), VarType.INT32, 1)
    got = OP.infer(VarSpec((2, 3), VarType.FP32), i32, i32, VarSpec((-1, 2), VarType.FP32, 3),
                   r, i32, num_classes=3, resolution=5)
    assert got == {"MaskRois": VarSpec((-1, 4), VarType.FP32, 1),
                   "RoiHasMaskInt32": VarSpec((-1, 1), VarType.INT32, 1),
                   "MaskInt32": VarSpec((-1, 75), VarType.INT32, 1)}
    assert OP.infer(None, None, None, None, VarSpec((-1, 4), VarType.FP64, 1), None,
                    num_classes=1, resolution=1)["MaskRois"].dtype == VarType.FP64
    for nc, res in ((0, 14), (2, 0)):
        with pytest.raises(ValueError, match=rf"^generate_mask_labels: num_classes and resolution "
                                             rf"must be >= 1, got {nc} and {res}$"):
            OP.infer(None, None, None, None, r, None, num_classes=nc, resolution=res)
    args, lod = _inputs()
    for bad in (None, ((0, 4, 5, 5, 6), (0, 1, 2, 3, 5, 6, 7))):
        lod2 = dict(lod, GtSegms=bad) if bad else {k: v for k, v in lod.items()
                                                   if k != "GtSegms"}
        with pytest.raises(ValueError, match=r"^generate_mask_labels: GtSegms needs a 3-level "
                                             r"LoD \(images -> ground truths -> polygons -> "
                                             r"points\), got "):
            OP.forward(*args, lod=lod2, num_classes=4, resolution=4)
    with pytest.raises(ValueError, match="GtSegms needs a 3-level LoD"):
        OP.forward(*args, num_classes=4, resolution=4)


# 60 random polygons (seeded: 3 to 6 vertices in [-2, 13], every 4th with integer vertices,
# every 10th an up-right 45-degree edge) and pycocotools 2.0.11's masks of them
RANDOM = [([12.0, -1.0, 8.0, 12.0, 5.0, 3.0, 7.0, 9.0, -0.0, -0.0], 10, 5,
      [0, 1, 9, 2, 8, 3, 7, 4, 6, 6, 4]),
     ([-1.4, -1.3, 2.8, 1.2, 9.6, 10.0, 0.6, 0.1, 3.6, 5.9], 7, 9,
      [0, 1, 6, 1, 1, 1, 5, 1, 7, 1, 7, 1, 16, 1, 14]),
     ([4.5, 3.4, 2.1, 7.3, 2.0, 4.3, 5.7, 2.6], 8, 11, [20, 3, 5, 1, 59]),
     ([1.6, 2.0, 1.4, 2.4, 8.6, 0.2, 7.3, 5.5], 10, 7, [32, 1, 8, 3, 7, 3, 7, 4, 5]),
     ([3.0, 3.0, -0.0, 6.0, 7.0, 0.0, -1.0, 5.0, 4.0, 0.0, -0.0, 13.0], 6, 7,
      [10, 1, 2, 3, 2, 3, 21]),
     ([0.0, 7.0, 7.0, 0.0, 7.0, 7.0], 9, 9, [6, 1, 7, 2, 6, 3, 5, 4, 4, 5, 3, 6, 2, 7, 20]),
     ([11.2, -0.7, 11.9, 6.8, 2.7, 9.5, -0.2, 0.1], 10, 6,
      [0, 2, 8, 5, 5, 8, 2, 9, 1, 9, 1, 9, 1]),
     ([10.3, 12.2, 2.0, 4.4, 2.7, 12.1, 12.2, 9.7, -1.5, 1.5], 7, 11,
      [10, 1, 7, 3, 4, 3, 5, 2, 6, 1, 6, 1, 28]),
     ([-0.0, 13.0, 0.0, -1.0, 6.0, 1.0, 3.0, 3.0], 9, 9, [0, 17, 1, 5, 4, 3, 7, 1, 43]),
     ([7.1, 10.5, 5.0, 8.2, 8.9, 4.8, -0.2, 11.3], 11, 8,
      [21, 1, 9, 2, 9, 2, 8, 3, 7, 1, 1, 2, 10, 1, 11]),
     ([5.1, 7.9, 9.3, 4.7, 1.7, 9.9, 10.9, 1.8, 2.4, 1.3, -1.4, 3.2], 7, 7,
      [2, 2, 5, 3, 3, 5, 2, 6, 1, 6, 2, 5, 2, 4, 1]),
     ([11.3, 3.0, 8.6, 5.8, 9.4, 1.1, 1.6, -0.2, 7.7, 6.7, 10.3, 0.6], 10, 7,
      [20, 1, 9, 2, 8, 3, 8, 3, 7, 4, 5]),
     ([12.0, 4.0, -0.0, 8.0, 12.0, 12.0], 11, 5, [18, 1, 10, 2, 9, 2, 8, 3, 2]),
     ([11.3, 12.0, 1.1, 12.6, 0.2, -1.0, -1.0, 2.6], 5, 7, [3, 1, 5, 1, 25]),
     ([6.7, 7.1, 12.1, 1.7, 5.1, -0.6, 2.3, 5.7, 12.5, 10.3, 8.8, 7.1], 7, 5, [19, 1, 4, 3, 2, 6]),
     ([0.0, 7.0, 7.0, 0.0, 7.0, 7.0], 9, 9, [6, 1, 7, 2, 6, 3, 5, 4, 4, 5, 3, 6, 2, 7, 20]),
     ([3.0, 13.0, 3.0, 7.0, 3.0, 13.0, 8.0, 12.0], 11, 8, [88]),
     ([7.4, -0.3, 8.2, 8.6, 10.6, 7.7, 7.9, 3.0, 6.1, 5.7, 13.0, 6.6], 6, 11,
      [41, 2, 3, 2, 1, 3, 4, 4, 3, 3]),
     ([2.2, 6.5, 9.0, 12.2, -1.8, 8.1, 9.9, 0.5], 11, 5,
      [7, 2, 8, 3, 7, 1, 1, 3, 6, 1, 2, 2, 5, 1, 3, 2, 1]),
     ([0.5, 4.0, 3.3, 10.6, 12.0, -0.7], 8, 11,
      [12, 2, 5, 5, 3, 5, 2, 6, 2, 6, 2, 4, 3, 4, 4, 3, 4, 3, 5, 1, 7]),
     ([10.0, 7.0, 10.0, 4.0, 1.0, 4.0, 2.0, 1.0], 6, 11,
      [8, 2, 3, 3, 4, 2, 5, 1, 18, 1, 5, 2, 4, 2, 6]),
     ([1.6, -1.8, 5.7, 1.3, 11.1, 4.6, -1.0, -1.5], 8, 9, [24, 1, 7, 1, 8, 1, 16, 1, 13]),
     ([5.0, 9.4, 5.6, 1.5, 4.1, 11.9], 6, 11, [32, 1, 33]),
     ([8.2, 12.5, 9.0, 4.5, 6.9, 4.7], 6, 8, [47, 1]),
     ([6.0, 0.0, 11.0, 7.0, 8.0, 8.0, 12.0, 9.0, 3.0, -2.0, 4.0, -2.0], 5, 6, [25, 1, 4]),
     ([0.0, 7.0, 7.0, 0.0, 7.0, 7.0], 9, 9, [6, 1, 7, 2, 6, 3, 5, 4, 4, 5, 3, 6, 2, 7, 20]),
     ([8.9, 3.7, 5.6, -0.4, 11.1, 9.5, -1.5, 3.8], 10, 5, [4, 1, 9, 1, 9, 2, 8, 2, 8, 2, 4]),
     ([10.2, 7.5, 7.9, -1.0, 3.3, 3.0, 4.0, 10.4], 5, 11, [18, 1, 3, 3, 1, 14, 1, 4, 10]),
     ([0.0, 9.0, -2.0, 6.0, 8.0, -1.0, 7.0, 10.0, 6.0, -0.0], 5, 7,
      [4, 1, 4, 1, 3, 2, 2, 2, 11, 5]),
     ([-0.6, 8.4, 5.7, 7.6, -1.0, 11.3, 10.7, 2.9], 10, 9,
      [17, 1, 9, 1, 8, 3, 7, 1, 9, 1, 8, 1, 18, 1, 5]),
     ([2.4, 0.2, 11.4, 1.2, 11.3, 1.6, 6.4, 5.6, 6.0, 5.0], 10, 5, [30, 2, 8, 3, 7]),
     ([9.3, 0.2, 6.3, 8.8, 0.9, -0.3, 0.7, 9.1], 11, 7, [12, 7, 5, 5, 8, 2, 10, 1, 9, 3, 7, 5, 3]),
     ([6.0, 2.0, -0.0, 7.0, 11.0, 8.0, -1.0, 13.0], 9, 5,
      [15, 1, 7, 2, 1, 1, 4, 2, 1, 2, 3, 1, 3, 2]),
     ([8.1, 8.4, 1.7, 8.7, 9.6, 7.6, 4.5, 1.2], 11, 5, [52, 1, 2]),
     ([12.3, -1.0, 4.0, 12.6, 9.8, 4.1], 7, 7, [49]),
     ([0.0, 7.0, 7.0, 0.0, 7.0, 7.0], 9, 9, [6, 1, 7, 2, 6, 3, 5, 4, 4, 5, 3, 6, 2, 7, 20]),
     ([-1.0, 4.0, -0.0, -2.0, 2.0, -0.0, 3.0, 2.0], 6, 5, [0, 3, 3, 3, 4, 1, 16]),
     ([0.1, 3.7, 1.5, 7.6, 8.2, 10.3, 3.8, -1.4, 9.8, -1.5, 11.9, 3.8], 11, 5,
      [4, 1, 10, 3, 8, 4, 7, 4, 3, 1, 3, 5, 2]),
     ([-1.4, -0.0, 8.5, 7.6, -2.0, 7.3, 4.4, -1.8, 2.0, 6.1, 4.2, 0.3], 5, 8,
      [0, 1, 3, 3, 1, 3, 2, 1, 2, 1, 2, 1, 4, 1, 15]),
     ([6.5, 4.1, 2.7, 1.4, 4.5, 12.3], 8, 7, [26, 4, 5, 5, 3, 5, 4, 1, 3]),
     ([4.0, 2.0, -0.0, 2.0, 9.0, 7.0], 6, 10, [8, 1, 5, 1, 5, 2, 4, 2, 5, 2, 5, 2, 5, 1, 12]),
     ([0.8, -0.4, 3.6, 10.9, 5.9, 10.5, 5.1, 11.6], 5, 5, [14, 1, 10]),
     ([3.0, 7.2, -0.4, 4.4, 9.4, 5.4, 10.7, 5.5, -0.6, 9.3, 12.1, 11.8], 10, 5,
      [4, 1, 4, 1, 5, 1, 3, 1, 5, 2, 1, 2, 5, 2, 1, 2, 5, 5]),
     ([12.7, 12.5, 4.3, 2.1, 3.3, 11.6, 3.9, 10.2, 0.7, 7.0], 9, 8,
      [16, 1, 9, 1, 8, 1, 2, 7, 3, 6, 5, 4, 6, 3]),
     ([12.0, 3.0, 1.0, 8.0, 9.0, 9.0, 9.0, 2.0, 11.0, 7.0, 9.0, 11.0], 7, 9,
      [34, 1, 6, 1, 5, 2, 5, 2, 5, 2]),
     ([0.0, 7.0, 7.0, 0.0, 7.0, 7.0], 9, 9, [6, 1, 7, 2, 6, 3, 5, 4, 4, 5, 3, 6, 2, 7, 20]),
     ([0.1, 12.6, 2.6, 10.7, 1.3, 6.4, 4.4, 11.4, 0.5, 7.6, 9.0, 5.1], 11, 6,
      [17, 2, 10, 1, 1, 1, 8, 3, 7, 3, 8, 2, 3]),
     ([1.4, -0.5, 7.0, 5.0, 9.5, 3.5, 10.5, -2.0, 9.1, 11.0, 7.3, 7.8], 11, 7,
      [46, 2, 10, 2, 10, 2, 5]),
     ([11.0, 2.0, 3.0, -2.0, -1.0, 8.0, -2.0, 9.0, 6.0, 8.0], 9, 6,
      [5, 4, 2, 15, 1, 8, 1, 8, 1, 8, 1]),
     ([-0.9, 10.5, 4.4, 10.7, 0.6, 7.6, -1.5, 3.1], 5, 11, [55]),
     ([9.7, 8.2, 8.7, 9.7, 11.5, -0.4, 4.4, -0.2], 7, 6, [35, 2, 5]),
     ([8.5, 7.2, -1.9, -0.5, 2.5, 6.9, 10.2, 7.0], 5, 9, [1, 2, 4, 3, 3, 2, 3, 2, 4, 1, 20]),
     ([9.0, 3.0, 5.0, 10.0, 12.0, -2.0, 4.0, 8.0, 4.0, 5.0], 5, 7, [29, 1, 4, 1]),
     ([10.0, 1.4, -0.8, 3.0, -0.1, 12.8, 9.4, -0.7, 10.5, 8.3, 7.8, 11.9], 6, 10,
      [3, 3, 3, 3, 3, 3, 2, 4, 2, 4, 2, 3, 3, 1, 10, 1, 4, 1, 3, 2]),
     ([10.9, -0.2, 3.8, 10.4, 3.8, 8.5], 10, 6, [48, 1, 7, 2, 2]),
     ([0.0, 7.0, 7.0, 0.0, 7.0, 7.0], 9, 9, [6, 1, 7, 2, 6, 3, 5, 4, 4, 5, 3, 6, 2, 7, 20]),
     ([9.0, 11.0, 10.0, 1.0, -0.0, 0.0, 5.0, -2.0], 8, 9, [40, 1, 8, 2, 6, 5, 3, 7]),
     ([10.3, 2.2, -1.9, 5.5, -1.4, 12.7, 9.7, 1.6, 11.2, 2.3, 8.8, 4.5], 8, 5,
      [5, 3, 5, 3, 4, 4, 4, 4, 4, 3, 1]),
     ([8.5, 5.9, 1.7, 10.1, 12.1, 9.9, 2.8, 4.7, 5.6, 1.2], 10, 10,
      [34, 1, 4, 1, 3, 3, 2, 2, 1, 5, 2, 2, 3, 7, 4, 6, 8, 2, 8, 2]),
     ([-1.7, 1.5, 4.8, 6.4, 1.0, 5.7], 5, 6, [3, 2, 4, 1, 20])]


def test_poly_to_mask_is_cocos_on_random_polygons():
    for xy, h, w, counts in RANDOM:
        np.testing.assert_array_equal(poly_to_mask(xy, h, w), _decode(counts, h, w),
                                      err_msg=str(xy))


def test_generate_mask_labels_picks_by_exact_boxes_and_skips_class_zero():
    """One image (no LoD for GtClasses / Rois: one sequence), scale 1. Ground truths: B a
    decoy square x [0, 10] y [19, 30] (class 1), C a class-0 triangle far away, A the target
    triangle (class 2) whose polygon box is [0, 20, 10, 30]. ROIs: A's box (IoU 1 with A,
    0.92 with B), a one-pixel ROI at (2, 27) (inside A's box only: 1/121 with +1 areas, 0
    for all without them), C's box (label 1: overlaps no usable ground truth, so the first,
    B, is taken), a background ROI and a last foreground ROI far from everything."""
    b = [[0, 19], [10, 19], [10, 30], [0, 30]]
    c = [[30, 0], [40, 0], [30, 10]]
    a = [[4, 20], [10, 20], [0, 30]]
    segms = np.array(b + c + a, np.float64)
    lod = {"GtSegms": ((0, 3), (0, 1, 2, 3), (0, 4, 7, 10))}
    cls = np.array([[1], [0], [2]], np.int32)
    crowd = np.zeros((3, 1), np.int32)
    rois = np.array([[0, 20, 10, 30], [2, 27, 2, 27], [30, 0, 40, 10], [50, 50, 60, 60],
                     [70, 70, 80, 80]], float)                   # 5 rows: not Rois' 4 columns
    labels = np.array([[2], [1], [1], [0], [1]], np.int32)
    got = OP.forward(np.array([[64, 64, 1.0]]), cls, crowd, segms, rois, labels, lod=lod,
                     num_classes=3, resolution=5)
    boxes = {0: [0, 19, 10, 30], 2: [0, 20, 10, 30]}          # usable: B and A
    polys = {0: [segms[0:4].reshape(-1)], 2: [segms[7:10].reshape(-1)]}
    want = []
    for r in (0, 1, 2, 4):
        best = max(boxes, key=lambda g: (_iou_plus_one(rois[r], boxes[g]), -g))
        row = np.full(75, -1, np.int32)
        lab = int(labels[r, 0])
        row[lab * 25:(lab + 1) * 25] = polys_to_mask_wrt_box(polys[best], rois[r], 5).ravel()
        want.append(row)
    assert [max(boxes, key=lambda g: (_iou_plus_one(rois[r], boxes[g]), -g))
            for r in (0, 1, 2, 4)] == [2, 2, 0, 0]
    np.testing.assert_array_equal(got["RoiHasMaskInt32"], [[0], [1], [2], [4]])
    np.testing.assert_array_equal(got["MaskInt32"], np.stack(want))
    assert got["MaskRois"].dtype == np.float64 and got["lod"]["MaskRois"] == ((0, 4),)
    # the three masks differ from what the decoy or the class-0 triangle would give
    assert not np.array_equal(want[0][50:], polys_to_mask_wrt_box(polys[0], rois[0], 5).ravel())
    assert not np.array_equal(want[1][25:50],
                              polys_to_mask_wrt_box(polys[0], rois[1], 5).ravel())
    assert not np.array_equal(want[2][25:50],
                              polys_to_mask_wrt_box([segms[4:7].reshape(-1)], rois[2], 5).ravel())


def test_generate_mask_labels_reads_each_polygon_boxes_right_edge():
    """The decoy B ([0, 2, 9, 9], a square: its box is the same read any way) comes first; A's
    box is [0, 2, 10, 9], so the ROI on it matches A (IoU 1) over B (90 / 99). Reading A's
    right edge from its y values (9) or from every third coordinate (2) would tie with or lose
    to B, and B's mask would be taken."""
    b = [[0, 2], [9, 2], [9, 9], [0, 9]]
    a = [[0, 2], [10, 2], [0, 9]]
    segms = np.array(b + a, np.float64)
    lod = {"GtSegms": ((0, 2), (0, 1, 2), (0, 4, 7))}
    rois = np.array([[0, 2, 10, 9]], np.float64)
    got = OP.forward(np.array([[32, 32, 1.0]]), np.array([[1], [1]], np.int32),
                     np.zeros((2, 1), np.int32), segms, rois, np.array([[1]], np.int32),
                     lod=lod, num_classes=2, resolution=4)
    assert _iou_plus_one(rois[0], [0, 2, 9, 9]) == 90 / 99
    want = polys_to_mask_wrt_box([segms[4:7].reshape(-1)], rois[0], 4).ravel()
    assert not np.array_equal(want, polys_to_mask_wrt_box([segms[:4].reshape(-1)], rois[0],
                                                          4).ravel())
    np.testing.assert_array_equal(got["MaskInt32"][0, 16:], want)
