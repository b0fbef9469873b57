"""matrix_nms (fluidlite/ops/detection_nms.py) against a loop-by-loop transcription of fluid
1.8's NMSMatrix / MultiClassMatrixNMS (linear and gaussian decay, post_threshold, top-ks,
pixel boxes), the empty result, and fluid.layers.matrix_nms's argument checks."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core.registry import get_op_def


def _iou(a, b, normalized):
    extra = 0.0 if normalized else 1.0
    if b[0] > a[2] or b[2] < a[0] or b[1] > a[3] or b[3] < a[1]:
        return 0.0
    iw = min(a[2], b[2]) - max(a[0], b[0]) + extra
    ih = min(a[3], b[3]) - max(a[1], b[1]) + extra
    inter = iw * ih
    area = lambda r: (r[2] - r[0] + extra) * (r[3] - r[1] + extra)  # noqa: E731
    return inter / (area(a) + area(b) - inter)


def _ref_image(boxes, scores, bg, thr, post, top_k, keep, normalized, gaussian, sigma):
    dets = []                                     # (score, label, box index)
    for c in range(scores.shape[0]):
        if c == bg:
            continue
        s = scores[c]
        perm = sorted((i for i in range(len(s)) if s[i] > thr), key=lambda i: -s[i])
        perm = perm[:top_k] if top_k > -1 else perm
        max_iou = [0.0] * len(perm)
        ious = {}
        for i in range(1, len(perm)):
            for j in range(i):
                ious[i, j] = _iou(boxes[perm[i]], boxes[perm[j]], normalized)
            max_iou[i] = max(ious[i, j] for j in range(i))
        for i in range(len(perm)):
            decay = 1.0
            for j in range(i):
                d = (np.exp((max_iou[j] ** 2 - ious[i, j] ** 2) * sigma) if gaussian
                     else (1 - ious[i, j]) / (1 - max_iou[j]))
                decay = min(decay, d)
            if decay * s[perm[i]] > post:
                dets.append((decay * s[perm[i]], c, perm[i]))
    dets = sorted(dets, key=lambda d: -d[0])
    return dets[:keep] if keep > -1 else dets


def _batch(seed, n=2, m=30, c=4, pixel=False):
    rng = np.random.default_rng(seed)
    scale = 50.0 if pixel else 1.0
    xy = rng.uniform(0, 0.6, (n, m, 2)) * scale
    wh = rng.uniform(0.1, 0.4, (n, m, 2)) * scale
    return np.concatenate([xy, xy + wh], -1), rng.uniform(0, 1, (n, c, m))


@pytest.mark.parametrize("gaussian,post,top_k,keep,pixel", [
    (False, 0.0, -1, -1, False), (True, 0.0, 10, 15, False), (False, 0.3, 12, 8, True),
    (True, 0.2, -1, 20, True)])
def test_matches_fluid_algorithm(gaussian, post, top_k, keep, pixel):
    boxes, scores = _batch(3, pixel=pixel)
    attrs = dict(background_label=0, score_threshold=0.1, post_threshold=post,
                 nms_top_k=top_k, keep_top_k=keep, normalized=not pixel,
                 use_gaussian=gaussian, gaussian_sigma=2.0)
    got = get_op_def("matrix_nms").forward(boxes, scores, **attrs)
    rows, index, counts = [], [], []
    for n in range(boxes.shape[0]):
        dets = _ref_image(boxes[n], scores[n], 0, 0.1, post, top_k, keep, not pixel,
                          gaussian, 2.0)
        rows += [[c, s, *boxes[n, i]] for s, c, i in dets]
        index += [n * boxes.shape[1] + i for _, _, i in dets]
        counts.append(len(dets))
    np.testing.assert_allclose(got["Out"], np.array(rows).reshape(-1, 6), rtol=1e-12)
    np.testing.assert_array_equal(got["Index"][:, 0], index)
    assert got["Index"].dtype == np.int32 and got["Out"].dtype == boxes.dtype
    assert got["lod"]["Out"] == got["lod"]["Index"] == (tuple(np.cumsum([0] + counts)),)


def test_nothing_kept_is_empty():
    boxes, scores = _batch(5)
    got = get_op_def("matrix_nms").forward(boxes.astype("float32"), scores.astype("float32"),
                                           score_threshold=0.01, post_threshold=2.0,
                                           nms_top_k=5, keep_top_k=5)
    assert got["Out"].shape == (0, 6) and got["Out"].dtype == np.float32
    assert got["Index"].shape == (0, 1) and got["lod"]["Out"] == ((0, 0, 0),)


def test_layer_runs_and_checks_argument_types():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        b = fluid.data("b", [2, 30, 4], "float64")
        s = fluid.data("s", [2, 4, 30], "float64")
        out, index = fluid.layers.matrix_nms(b, s, 0.1, 0.0, 10, 15, use_gaussian=True,
                                             return_index=True)
        with pytest.raises(TypeError, match="score_threshold"):
            fluid.layers.matrix_nms(b, s, 1, 0.0, 10, 15)
        with pytest.raises(TypeError, match="BBoxes"):
            fluid.layers.matrix_nms(np.zeros((2, 30, 4)), s, 0.1, 0.0, 10, 15)
    boxes, scores = _batch(3)
    res = fluid.Executor(fluid.CPUPlace()).run(main, feed={"b": boxes, "s": scores},
                                               fetch_list=[out, index])
    ref = get_op_def("matrix_nms").forward(boxes, scores, score_threshold=0.1, nms_top_k=10,
                                           keep_top_k=15, use_gaussian=True)
    np.testing.assert_array_equal(res[0], ref["Out"])
    np.testing.assert_array_equal(res[1], ref["Index"])


def test_wrong_ranks_raise_at_run_time():
    with pytest.raises(ValueError, match="BBoxes must be 3-D"):
        get_op_def("matrix_nms").forward(np.zeros((30, 4)), np.zeros((1, 2, 30)))
