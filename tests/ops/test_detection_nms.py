"""multiclass_nms2 / multiclass_nms3 (fluidlite/ops/detection_nms.py): Out and Index of the
kept boxes in fluid's order (checked against Paddle 2.6's CPU kernel on random batches, both
input forms), RoisNum / NmsRoisNum, and the empty result."""
import numpy as np
import pytest

from fluidlite.core.registry import get_op_def
from tests.ops.test_detection import ref_nms_image


def _batch(seed=7, n=2, m=12, c=4):
    rng = np.random.default_rng(seed)
    xy = rng.uniform(0, 0.6, (n, m, 2))
    wh = rng.uniform(0.1, 0.4, (n, m, 2))
    return np.concatenate([xy, xy + wh], -1), rng.uniform(0, 1, (n, c, m))


ATTRS = dict(background_label=0, score_threshold=0.2, nms_top_k=4, nms_threshold=0.4,
             nms_eta=1.0, keep_top_k=5, normalized=True)


@pytest.mark.parametrize("op_type", ["multiclass_nms2", "multiclass_nms3"])
def test_index_of_the_3d_form(op_type):
    boxes, scores = _batch()
    got = get_op_def(op_type).forward(boxes, scores, **ATTRS)
    plain = get_op_def("multiclass_nms").forward(boxes, scores, **ATTRS)
    np.testing.assert_array_equal(got["Out"], plain["Out"])
    assert got["lod"]["Out"] == plain["lod"]["Out"] == got["lod"]["Index"]
    m = boxes.shape[1]
    for row, idx in zip(got["Out"], got["Index"][:, 0]):
        n, i = divmod(int(idx), m)               # Index = image * M + box
        np.testing.assert_array_equal(row[2:], boxes[n, i])
        assert row[1] == scores[n, int(row[0]), i]
    assert got["Index"].dtype == np.int32
    if op_type == "multiclass_nms3":
        np.testing.assert_array_equal(got["NmsRoisNum"], np.diff(got["lod"]["Out"][0]))


def test_lod_form_rois_num_and_index():
    """BBoxes [M, C, 4], Scores [M, C]: multiclass_nms3 takes the images' box counts as
    RoisNum; Index = (image start + box) * C + label; within a class the kept boxes come by
    box index (fluid's stable_sort)."""
    boxes, scores = _batch()
    rng = np.random.default_rng(1)
    b2 = np.repeat(boxes.reshape(24, 1, 4), 4, axis=1) + rng.uniform(0, 0.05, (24, 4, 4))
    s2 = scores.transpose(0, 2, 1).reshape(24, 4)
    rois_num = np.array([7, 17], np.int32)
    got = get_op_def("multiclass_nms3").forward(b2, s2, rois_num, **ATTRS)
    via_lod = get_op_def("multiclass_nms2").forward(
        b2, s2, lod={"BBoxes": ((0, 7, 24),), "Scores": ((0, 7, 24),)}, **ATTRS)
    np.testing.assert_array_equal(got["Out"], via_lod["Out"])
    np.testing.assert_array_equal(got["Index"], via_lod["Index"])
    np.testing.assert_array_equal(got["NmsRoisNum"], np.diff(got["lod"]["Out"][0]))
    for row, idx in zip(got["Out"], got["Index"][:, 0]):
        box, label = divmod(int(idx), 4)
        assert label == row[0]
        np.testing.assert_array_equal(row[2:], b2[box, label])
    lod = got["lod"]["Out"][0]
    for a, b in zip(lod[:-1], lod[1:]):
        for c in range(4):
            idx = got["Index"][a:b, 0][got["Out"][a:b, 0] == c]
            assert list(idx) == sorted(idx)


def test_nothing_kept_is_an_empty_out():
    boxes, scores = _batch()
    got = get_op_def("multiclass_nms3").forward(boxes, scores, **dict(ATTRS,
                                                                      score_threshold=1.5))
    assert got["Out"].shape == (0, 6) and got["Index"].shape == (0, 1)
    np.testing.assert_array_equal(got["NmsRoisNum"], [0, 0])
    assert got["lod"]["Out"] == ((0, 0, 0),)


def test_matches_the_reference_nms():
    boxes, scores = _batch(seed=3, n=1)
    attrs = dict(ATTRS, keep_top_k=-1, nms_top_k=-1)
    got = get_op_def("multiclass_nms2").forward(boxes, scores, **attrs)
    want = ref_nms_image(boxes[0], scores[0], 0, 0.2, -1, 0.4, 1.0, -1)
    np.testing.assert_allclose(got["Out"], want, rtol=1e-12)


@pytest.mark.parametrize("op_type", ["multiclass_nms2", "multiclass_nms3"])
def test_through_the_executor(op_type):
    from fluidlite.testing import OpTest
    boxes, scores = _batch(seed=11)
    boxes, scores = boxes.astype(np.float32), scores.astype(np.float32)
    want = get_op_def(op_type).forward(boxes, scores, **ATTRS)
    t = OpTest()
    t.op_type, t.attrs = op_type, dict(ATTRS)
    t.inputs = {"BBoxes": boxes, "Scores": scores}
    t.outputs = {"Out": want["Out"], "Index": want["Index"]}
    if op_type == "multiclass_nms3":
        t.outputs["NmsRoisNum"] = want["NmsRoisNum"]
    t.check_infer()
    t.check_output()
