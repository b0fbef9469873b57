"""Tests written from the mutation run of ``fluidlite/ops/detection_nms.py`` (issue 28, round
11): multiclass_nms2 / multiclass_nms3 / matrix_nms with fluid's default attributes, the LoD
form with the LoD on either input or none, RoisNum checks, shape inference (shapes, dtypes, LoD
levels), the checks with their messages, and matrix_nms's thresholds (score_threshold and
post_threshold are strict), nms_top_k / keep_top_k of 0 and 1, a single candidate, images with
nothing kept, no image at all, and float32 boxes.

References: fluid 1.8's OpMakers (multiclass_nms_op.cc: background_label 0, nms_threshold 0.3,
nms_eta 1.0, normalized true; matrix_nms_op.cc: post_threshold 0, use_gaussian false,
gaussian_sigma 2, normalized true) and kernels (NMSMatrix: ``score > score_threshold``,
``decayed > post_threshold``, at most nms_top_k candidates); the matrix NMS decay written below
as a float64 loop over the candidate pairs (fluid's min_decay loop)."""
import numpy as np
import pytest

from fluidlite.core.dtypes import VarType
from fluidlite.core.registry import VarSpec, get_op_def

NMS2, NMS3, MNMS = (get_op_def(t) for t in ("multiclass_nms2", "multiclass_nms3",
                                            "matrix_nms"))


def _batch(seed=7, n=2, m=12, c=4):
    rng = np.random.default_rng(seed)
    xy = rng.uniform(0, 0.6, (n, m, 2))
    wh = rng.uniform(0.1, 0.4, (n, m, 2))
    return np.concatenate([xy, xy + wh], -1), rng.uniform(0, 1, (n, c, m))


REQUIRED = dict(score_threshold=0.1, nms_top_k=-1, keep_top_k=-1)
FLUID_DEFAULTS = dict(background_label=0, nms_threshold=0.3, nms_eta=1.0, normalized=True)


@pytest.mark.parametrize("op", [NMS2, NMS3])
def test_multiclass_defaults_are_fluids(op):
    boxes, scores = _batch()
    boxes = boxes * 10                      # pixel boxes: `normalized` changes the IoU
    got = op.forward(boxes, scores, **REQUIRED)
    want = op.forward(boxes, scores, **REQUIRED, **FLUID_DEFAULTS)
    for other in (dict(FLUID_DEFAULTS, background_label=1),
                  dict(FLUID_DEFAULTS, nms_threshold=0.6),
                  dict(FLUID_DEFAULTS, normalized=False)):
        assert op.forward(boxes, scores, **REQUIRED, **other)["Out"].shape != \
            want["Out"].shape or not np.array_equal(
                op.forward(boxes, scores, **REQUIRED, **other)["Out"], want["Out"]), other
    np.testing.assert_array_equal(got["Out"], want["Out"])
    np.testing.assert_array_equal(got["Index"], want["Index"])
    # (nms_eta only acts below 1 with a threshold above 0.5, so any eta >= 1 is the default's)
    # score_threshold: a box scored exactly at it is not a candidate (kept ones are above)
    assert (got["Out"][:, 1] > 0.1).all()


@pytest.mark.parametrize("op", [NMS2, NMS3])
def test_lod_form_lod_on_either_input_or_none(op):
    boxes, scores = _batch(m=10, c=3)
    b2 = np.repeat(boxes.reshape(20, 1, 4), 3, axis=1)
    s2 = scores.transpose(0, 2, 1).reshape(20, 3)
    attrs = dict(REQUIRED, **FLUID_DEFAULTS)
    lod = ((0, 6, 20),)
    a = op.forward(b2, s2, lod={"BBoxes": lod}, **attrs)
    b = op.forward(b2, s2, lod={"Scores": lod}, **attrs)
    both = op.forward(b2, s2, lod={"BBoxes": lod, "Scores": lod}, **attrs)
    for got in (a, b):
        np.testing.assert_array_equal(got["Out"], both["Out"])
        np.testing.assert_array_equal(got["Index"], both["Index"])
        assert got["lod"]["Out"] == both["lod"]["Out"] == got["lod"]["Index"]
    assert len(both["lod"]["Out"][0]) == 3
    # each image on its own (no LoD: one image) gives the same rows; Index is shifted by the
    # image's first row
    parts = [op.forward(b2[lo:hi], s2[lo:hi], **attrs) for lo, hi in ((0, 6), (6, 20))]
    np.testing.assert_array_equal(both["Out"], np.concatenate([p["Out"] for p in parts]))
    np.testing.assert_array_equal(both["Index"], np.concatenate(
        [parts[0]["Index"], parts[1]["Index"] + 6 * 3]))
    assert both["lod"]["Out"] == ((0, len(parts[0]["Out"]),
                                   len(parts[0]["Out"]) + len(parts[1]["Out"])),)
    one = op.forward(b2, s2, **attrs)                 # no LoD: one image of all 20 rows
    assert len(one["lod"]["Out"][0]) == 2 and one["lod"]["Out"][0][0] == 0
    assert one["Index"].max() >= 3 * 6                # rows of the second part are reached
    if op is NMS3:
        r = op.forward(b2, s2, np.array([6, 14], np.int32), **attrs)
        np.testing.assert_array_equal(r["Out"], both["Out"])
        np.testing.assert_array_equal(r["NmsRoisNum"], np.diff(both["lod"]["Out"][0]))
        assert r["NmsRoisNum"].dtype == np.int32
        r1 = op.forward(b2, s2, np.array([20], np.int32), **attrs)
        np.testing.assert_array_equal(r1["Out"], one["Out"])
        with pytest.raises(ValueError, match=r"^multiclass_nms3: RoisNum sums to 19 boxes but "
                                             r"Scores has 20 rows$"):
            op.forward(b2, s2, np.array([6, 13], np.int32), **attrs)


@pytest.mark.parametrize("op", [NMS2, NMS3])
def test_multiclass_infer_and_checks(op):
    args = (None,) if op is NMS3 else ()
    spec = op.infer(VarSpec((-1, 12, 4), "float32"), VarSpec((-1, 4, 12), "float32"), *args,
                    **REQUIRED)
    assert (spec["Out"].shape, spec["Out"].dtype, spec["Out"].lod_level) == \
        ((-1, 6), VarType.FP32, 1)
    assert (spec["Index"].shape, spec["Index"].dtype, spec["Index"].lod_level) == \
        ((-1, 1), VarType.INT32, 1)
    if op is NMS3:
        assert (spec["NmsRoisNum"].shape, spec["NmsRoisNum"].dtype) == ((-1,), VarType.INT32)
    op.infer(VarSpec((-1, 3, 4), "float64"), VarSpec((-1, 3), "float64"), *args, **REQUIRED)
    op.infer(VarSpec((-1, 3, -1), "float64"), VarSpec((-1, 3), "float64"), *args,
             nms_threshold=0.0, **REQUIRED)
    name = op.type
    for b, s, msg in (((2, 12, 4), (2, 4, 12, 1), r"Scores must be 2-D or 3-D, got "
                                                   r"\[2, 4, 12, 1\]"),
                      ((2, 12, 4), (12,), r"Scores must be 2-D or 3-D, got \[12\]"),
                      ((2, 12, 5), (2, 4, 12), r"BBoxes must be \[N, M, 4\] \(or \[M, C, 4\] "
                                               r"with 2-D Scores\), got \[2, 12, 5\]"),
                      ((2, 12, -2), (2, 4, 12), r"BBoxes must be .* got \[2, 12, -2\]"),
                      ((12, 4), (2, 4, 12), r"BBoxes must be .* got \[12, 4\]")):
        with pytest.raises(ValueError, match=rf"^{name}: {msg}$"):
            op.infer(VarSpec(b, "float32"), VarSpec(s, "float32"), *args, **REQUIRED)
    with pytest.raises(ValueError, match=rf"^{name}: nms_threshold must be >= 0, got -0.1$"):
        op.infer(VarSpec((2, 12, 4), "float32"), VarSpec((2, 4, 12), "float32"), *args,
                 nms_threshold=-0.1, **REQUIRED)
    boxes, scores = _batch()
    for bad in (boxes[:1], boxes[:, :11]):
        with pytest.raises(ValueError, match=rf"^{name}: BBoxes \[{bad.shape[0]}, "
                                             rf"{bad.shape[1]}, 4\] and Scores \[2, 4, 12\] "
                                             rf"disagree \(expected \[N, M, 4\] and "
                                             rf"\[N, C, M\]\)$"):
            op.forward(bad, scores, **REQUIRED)


def ref_matrix_nms_class(boxes, scores, score_threshold, post_threshold, top_k, gaussian,
                         sigma):
    """fluid 1.8's NMSMatrix for one class (normalized boxes), as a loop."""
    cand = [i for i in range(len(scores)) if scores[i] > score_threshold]
    cand.sort(key=lambda i: (-scores[i], i))
    if top_k > -1:
        cand = cand[:top_k]

    def iou(a, b):
        w = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
        h = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
        inter = w * h
        area = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
        return inter / area if area > 0 else 0.0
    n = len(cand)
    m = np.array([[iou(boxes[cand[j]], boxes[cand[i]]) if j < i else 0.0 for i in range(n)]
                  for j in range(n)]).reshape(n, n)
    max_iou = m.max(axis=0) if n else m
    kept = []
    for i in range(n):
        min_decay = 1.0
        for j in range(i):
            if gaussian:
                d = np.exp((max_iou[j] ** 2 - m[j, i] ** 2) * sigma)
            else:
                d = (1 - m[j, i]) / (1 - max_iou[j])
            min_decay = min(min_decay, d)
        ds = min_decay * scores[cand[i]]
        if ds > post_threshold:
            kept.append((cand[i], ds))
    return kept


MATRIX_DEFAULTS = dict(background_label=0, post_threshold=0.0, normalized=True,
                       use_gaussian=False, gaussian_sigma=2.0)


@pytest.mark.parametrize("gaussian", [False, True])
def test_matrix_nms_against_the_loop(gaussian):
    boxes, scores = _batch(seed=3, n=2, m=15, c=3)
    attrs = dict(MATRIX_DEFAULTS, score_threshold=0.2, post_threshold=0.15, nms_top_k=8,
                 keep_top_k=-1, use_gaussian=gaussian)
    got = MNMS.forward(boxes, scores, **attrs)
    rows, index = [], []
    for n in range(2):
        det = []
        for c in (1, 2):
            for i, ds in ref_matrix_nms_class(boxes[n], scores[n, c], 0.2, 0.15, 8, gaussian,
                                              2.0):
                det.append((ds, c, i))
        det.sort(key=lambda t: -t[0])
        rows += [[c, ds, *boxes[n, i]] for ds, c, i in det]
        index += [n * 15 + i for _, _, i in det]
    np.testing.assert_allclose(got["Out"], np.array(rows).reshape(-1, 6), rtol=1e-12)
    np.testing.assert_array_equal(got["Index"][:, 0], index)
    assert got["Index"].dtype == np.int32


def test_matrix_nms_defaults_thresholds_and_top_k():
    boxes, scores = _batch(seed=4, n=1, m=10, c=3)
    base = dict(score_threshold=0.1, nms_top_k=-1, keep_top_k=-1)
    got = MNMS.forward(boxes, scores, **base)
    want = MNMS.forward(boxes, scores, **base, **MATRIX_DEFAULTS)
    np.testing.assert_array_equal(got["Out"], want["Out"])
    for other in (dict(MATRIX_DEFAULTS, background_label=1),
                  dict(MATRIX_DEFAULTS, use_gaussian=True),
                  dict(MATRIX_DEFAULTS, post_threshold=0.5)):
        assert not np.array_equal(MNMS.forward(boxes, scores, **base, **other)["Out"],
                                  want["Out"]), other
    # score_threshold is strict: a score equal to it is no candidate
    s = scores.copy()
    s[0, 1, :] = 0.25
    got = MNMS.forward(boxes, s, **dict(base, score_threshold=0.25))
    assert not (got["Out"][:, 0] == 1).any()
    # nms_top_k: 1 candidate per class; keep_top_k 1 and 0
    got = MNMS.forward(boxes, scores, **dict(base, nms_top_k=1))
    assert sorted(got["Out"][:, 0].tolist()) == [1.0, 2.0]
    assert MNMS.forward(boxes, scores, **dict(base, keep_top_k=1))["Out"].shape == (1, 6)
    out = MNMS.forward(boxes, scores, **dict(base, keep_top_k=0))
    assert out["Out"].shape == (0, 6) and out["lod"]["Out"] == ((0, 0),)


def test_matrix_nms_single_candidate_and_post_threshold():
    boxes = np.array([[[0.0, 0.0, 0.5, 0.5], [0.5, 0.5, 1.0, 1.0]]])
    scores = np.array([[[0.9, 0.9], [0.3, 0.05]]])            # class 1: one candidate, 0.3
    kw = dict(score_threshold=0.1, nms_top_k=-1, keep_top_k=-1)
    assert MNMS.forward(boxes, scores, post_threshold=0.3, **kw)["Out"].shape == (0, 6)
    got = MNMS.forward(boxes, scores, post_threshold=0.29, **kw)
    np.testing.assert_allclose(got["Out"], [[1, 0.3, 0, 0, 0.5, 0.5]])


def test_matrix_nms_nothing_kept_no_image_float32_and_ties():
    kw = dict(score_threshold=0.1, nms_top_k=-1, keep_top_k=-1)
    boxes, scores = _batch(n=2, m=5, c=1)              # the only class is the background
    got = MNMS.forward(boxes.astype(np.float32), scores.astype(np.float32), **kw)
    assert got["Out"].shape == (0, 6) and got["Out"].dtype == np.float32
    assert got["Index"].shape == (0, 1) and got["Index"].dtype == np.int32
    assert got["lod"]["Out"] == ((0, 0, 0),) == got["lod"]["Index"]
    got = MNMS.forward(np.zeros((0, 5, 4), np.float32), np.zeros((0, 3, 5), np.float32), **kw)
    assert got["Out"].shape == (0, 6) and got["Index"].shape == (0, 1)
    assert got["Out"].dtype == np.float32
    assert got["Index"].dtype == np.int32 and got["lod"]["Out"] == ((0,),)
    # forty disjoint boxes with one score: kept in box order (a stable sort)
    xs = np.arange(40) * 2.0
    boxes = np.stack([xs, xs * 0, xs + 1, xs * 0 + 1], -1)[None] / 100
    scores = np.concatenate([np.zeros((1, 1, 40)), np.full((1, 1, 40), 0.5),
                             np.full((1, 1, 40), 0.5)], axis=1)
    got = MNMS.forward(boxes.astype(np.float32), scores.astype(np.float32), **kw)
    assert got["Out"].dtype == np.float32
    np.testing.assert_array_equal(got["Index"][:, 0], np.tile(np.arange(40), 2))
    np.testing.assert_array_equal(got["Out"][:, 0], np.repeat([1, 2], 40))


def test_matrix_nms_infer_and_checks():
    spec = MNMS.infer(VarSpec((-1, 10, 4), "float32"), VarSpec((-1, 3, 10), "float32"))
    assert (spec["Out"].shape, spec["Out"].dtype, spec["Out"].lod_level) == \
        ((-1, 6), VarType.FP32, 1)
    assert (spec["Index"].shape, spec["Index"].dtype, spec["Index"].lod_level) == \
        ((-1, 1), VarType.INT32, 1)
    spec = MNMS.infer(VarSpec((-1, 10, 5), "float64", 2), VarSpec((-1, 3, 10), "float64"))
    assert spec["Out"].shape == (-1, 7) and spec["Out"].lod_level == 2
    assert spec["Index"].lod_level == 2
    spec = MNMS.infer(VarSpec((-1, 10, -1), "float64"), VarSpec((-1, 3, 10), "float64"))
    assert spec["Out"].shape == (-1, -1)
    spec = MNMS.infer(VarSpec((), "float64"), VarSpec((-1, 3, 10), "float64"))
    assert spec["Out"].shape == (-1, -1)
    boxes, scores = _batch()
    kw = dict(score_threshold=0.1, nms_top_k=-1, keep_top_k=-1)
    with pytest.raises(ValueError, match=r"^matrix_nms: Scores must be 3-D \[N, C, M\], got "
                                         r"\[4, 12\]$"):
        MNMS.forward(boxes, scores[0], **kw)
    for bad in (boxes[..., :3], boxes[0]):
        with pytest.raises(ValueError, match=r"^matrix_nms: BBoxes must be 3-D \[N, M, 4\] "
                                             r"\(xmin, ymin, xmax, ymax\), got "):
            MNMS.forward(bad, scores, **kw)
    with pytest.raises(ValueError, match=r"^matrix_nms: BBoxes \[2, 11, 4\] and Scores "
                                         r"\[2, 4, 12\] disagree \(expected \[N, M, 4\] and "
                                         r"\[N, C, M\]\)$"):
        MNMS.forward(boxes[:, :11], scores, **kw)
