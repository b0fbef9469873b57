"""Polygon boxes in the NMS ops (fluidlite/ops/detection.py, fluid's poly_util): polygon IoU
against rectangle IoU and against a rasterized overlap of non-convex polygons, and
locality_aware_nms / multiclass_nms on 8-coordinate boxes (fluid 1.8's 4-point EAST case)."""
import numpy as np
import pytest

from fluidlite.core.registry import get_op_def
from fluidlite.ops.detection import jaccard_matrix, poly_iou_matrix, poly_overlap_area


def _rect_poly(r, ccw=True):
    x1, y1, x2, y2 = r
    pts = [x1, y1, x2, y1, x2, y2, x1, y2]
    return pts if ccw else [x1, y1, x1, y2, x2, y2, x2, y1]


def test_rectangles_match_box_iou_either_orientation():
    rng = np.random.default_rng(0)
    xy = rng.uniform(0, 1, (8, 2))
    rects = np.concatenate([xy, xy + rng.uniform(0.2, 0.8, (8, 2))], 1)
    polys = np.array([_rect_poly(r, ccw=i % 2 == 0) for i, r in enumerate(rects)])
    np.testing.assert_allclose(poly_iou_matrix(polys, polys),
                               jaccard_matrix(rects, rects, True), rtol=1e-12, atol=1e-15)


def _inside(poly, pts):
    """Even-odd point-in-polygon test of pts [k, 2]."""
    x, y = pts[:, 0], pts[:, 1]
    inside = np.zeros(len(pts), bool)
    for (x1, y1), (x2, y2) in zip(poly, np.roll(poly, -1, axis=0)):
        cross = (y1 > y) != (y2 > y)
        with np.errstate(divide="ignore", invalid="ignore"):
            xi = x1 + (y - y1) * (x2 - x1) / (y2 - y1)
        inside ^= cross & (x < xi)
    return inside


def test_non_convex_overlap_matches_rasterization():
    ell = np.array([[0, 0], [4, 0], [4, 1], [1, 1], [1, 4], [0, 4]], float)    # an L
    tri = np.array([[0.5, 0.5], [3.5, 0.5], [0.5, 3.5]], float)
    g = (np.arange(2000) + 0.5) / 2000 * 4
    pts = np.stack(np.meshgrid(g, g), -1).reshape(-1, 2)
    expect = (_inside(ell, pts) & _inside(tri, pts)).mean() * 16
    assert poly_overlap_area(ell, tri) == pytest.approx(expect, abs=2e-3)
    assert poly_overlap_area(ell, tri[::-1]) == pytest.approx(poly_overlap_area(ell, tri))
    assert poly_overlap_area(ell, ell + 10) == 0.0


@pytest.mark.parametrize("op_type", ["locality_aware_nms", "multiclass_nms"])
def test_polygon_nms_equals_rectangle_nms(op_type):
    rng = np.random.default_rng(3)
    xy = rng.uniform(0, 0.6, (12, 2))
    rects = np.concatenate([xy, xy + rng.uniform(0.1, 0.4, (12, 2))], 1)
    rects = np.repeat(rects, 2, axis=0) + rng.uniform(-0.01, 0.01, (24, 4))
    polys = np.array([_rect_poly(r) for r in rects])
    scores = rng.uniform(0, 1, (1, 2, 24))
    attrs = dict(background_label=-1, score_threshold=0.1, nms_top_k=20,
                 nms_threshold=0.4, keep_top_k=15, normalized=True)
    got = get_op_def(op_type).forward(polys[None], scores, **attrs)
    ref = get_op_def(op_type).forward(rects[None], scores, **attrs)
    assert got["Out"].shape == (ref["Out"].shape[0], 10)
    np.testing.assert_allclose(got["Out"][:, :2], ref["Out"][:, :2], rtol=1e-9)
    np.testing.assert_allclose(got["Out"][:, [2, 3, 6, 7]], ref["Out"][:, 2:], rtol=1e-9)
    assert got["lod"] == ref["lod"]
