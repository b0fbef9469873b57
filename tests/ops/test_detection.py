"""Detection ops (fluidlite/ops/detection.py): forward against loop references written from
fluid's kernels, LoD handling, and argument errors. None is differentiable in fluid."""
import numpy as np
import fluidlite as fluid
import pytest

from fluidlite.core.registry import VarSpec, get_op_def
from fluidlite.testing import OpTest


def op(name):
    return get_op_def(name)


# -- priors ---------------------------------------------------------------------------------------
def ref_prior_box(fh, fw, ih, iw, min_sizes, max_sizes, ars, flip, clip, step, offset, order):
    ex = [1.0]
    for a in ars:
        if all(abs(a - e) >= 1e-6 for e in ex):
            ex.append(a)
            if flip:
                ex.append(1 / a)
    sw, sh = (iw / fw, ih / fh) if step == (0, 0) else step
    out = []
    for h in range(fh):
        for w in range(fw):
            cx, cy = (w + offset) * sw, (h + offset) * sh
            cell = []
            for s, mn in enumerate(min_sizes):
                def box(bw, bh):
                    cell.append([(cx - bw) / iw, (cy - bh) / ih, (cx + bw) / iw, (cy + bh) / ih])
                if order:
                    box(mn / 2, mn / 2)
                    if max_sizes:
                        m = np.sqrt(mn * max_sizes[s]) / 2
                        box(m, m)
                    for a in ex:
                        if abs(a - 1) >= 1e-6:
                            box(mn * np.sqrt(a) / 2, mn / np.sqrt(a) / 2)
                else:
                    for a in ex:
                        box(mn * np.sqrt(a) / 2, mn / np.sqrt(a) / 2)
                    if max_sizes:
                        m = np.sqrt(mn * max_sizes[s]) / 2
                        box(m, m)
            out.append(cell)
    b = np.array(out).reshape(fh, fw, -1, 4)
    return np.clip(b, 0, 1) if clip else b


class TestPriorBox(OpTest):
    op_type = "prior_box"

    @pytest.mark.parametrize("order,flip,clip", [(False, True, True), (True, True, False),
                                                 (False, False, False)])
    def test_priors(self, order, flip, clip):
        feat, img = np.zeros((1, 2, 3, 4)), np.zeros((1, 3, 30, 40))
        var = [0.1, 0.1, 0.2, 0.2]
        self.inputs = {"Input": feat, "Image": img}
        self.attrs = {"min_sizes": [8.0, 16.0], "max_sizes": [12.0, 24.0],
                      "aspect_ratios": [2.0, 0.5, 2.0], "variances": var, "flip": flip,
                      "clip": clip, "offset": 0.5, "min_max_aspect_ratios_order": order}
        boxes = ref_prior_box(3, 4, 30, 40, [8, 16], [12, 24], [2.0, 0.5, 2.0], flip, clip,
                              (0, 0), 0.5, order)
        self.outputs = {"Boxes": boxes, "Variances": np.broadcast_to(var, boxes.shape)}
        self.check_infer()
        self.check_output()

    def test_steps(self):
        feat, img = np.zeros((1, 2, 2, 2)), np.zeros((1, 3, 20, 20))
        self.inputs = {"Input": feat, "Image": img}
        self.attrs = {"min_sizes": [4.0], "variances": [0.1, 0.1, 0.2, 0.2], "step_w": 6.0,
                      "step_h": 7.0, "offset": 0.0, "aspect_ratios": [1.0], "clip": False}
        boxes = ref_prior_box(2, 2, 20, 20, [4.0], [], [1.0], False, False, (6.0, 7.0), 0.0,
                              False)
        self.outputs = {"Boxes": boxes, "Variances": np.broadcast_to([0.1, 0.1, 0.2, 0.2],
                                                                     boxes.shape)}
        self.check_output()


def test_prior_box_defaults_are_fluids():
    # fluid 1.8's PriorBoxOpMaker / DensityPriorBoxOpMaker: flip and clip default to true
    assert op("prior_box").attr_defaults["flip"] is True
    assert op("prior_box").attr_defaults["clip"] is True
    assert op("density_prior_box").attr_defaults["clip"] is True
    feat, img = np.zeros((1, 2, 2, 2)), np.zeros((1, 3, 20, 20))
    boxes = op("prior_box").forward(feat, img, min_sizes=[30.0], aspect_ratios=[2.0],
                                    variances=[0.1] * 4)["Boxes"]
    assert boxes.shape == (2, 2, 3, 4)                  # 1, 2 and the flipped 1/2
    assert boxes.min() == 0.0 and boxes.max() == 1.0    # clipped to the image


def test_prior_box_errors():
    feat, img = VarSpec([1, 2, 3, 4], "float32"), VarSpec([1, 3, 30, 40], "float32")
    with pytest.raises(ValueError, match="max size must be greater"):
        op("prior_box").infer(feat, img, min_sizes=[8.0], max_sizes=[4.0],
                              variances=[0.1] * 4)
    with pytest.raises(ValueError, match="min_sizes"):
        op("prior_box").infer(feat, img, min_sizes=[], variances=[0.1] * 4)
    with pytest.raises(ValueError, match="variances"):
        op("prior_box").infer(feat, img, min_sizes=[8.0], variances=[0.1])


def test_density_prior_box():
    feat, img = np.zeros((1, 2, 2, 3)), np.zeros((1, 3, 16, 24))
    attrs = dict(variances=[0.1, 0.1, 0.2, 0.2], densities=[2, 1], fixed_sizes=[6.0, 10.0],
                 fixed_ratios=[1.0, 2.0], offset=0.5)
    out = op("density_prior_box").forward(feat, img, **attrs)
    step = 8
    ref = []
    for h in range(2):
        for w in range(3):
            cx, cy = (w + 0.5) * 8, (h + 0.5) * 8
            for size, d in ((6.0, 2), (10.0, 1)):
                shift = step // d
                for r in (1.0, 2.0):
                    bw, bh = size * np.sqrt(r), size / np.sqrt(r)
                    for di in range(d):
                        for dj in range(d):
                            x = cx - step / 2 + shift / 2 + dj * shift
                            y = cy - step / 2 + shift / 2 + di * shift
                            ref.append([max((x - bw / 2) / 24, 0), max((y - bh / 2) / 16, 0),
                                        min((x + bw / 2) / 24, 1), min((y + bh / 2) / 16, 1)])
    ref = np.array(ref).reshape(2, 3, 10, 4)
    np.testing.assert_allclose(out["Boxes"], ref, rtol=1e-6)
    assert out["Variances"].shape == (2, 3, 10, 4)
    flat = op("density_prior_box").forward(feat, img, flatten_to_2d=True, **attrs)
    np.testing.assert_allclose(flat["Boxes"], ref.reshape(-1, 4), rtol=1e-6)
    spec = op("density_prior_box").infer(VarSpec(feat.shape, "float32"),
                                         VarSpec(img.shape, "float32"), flatten_to_2d=True,
                                         **attrs)
    assert spec["Boxes"].shape == (60, 4)


def test_anchor_generator():
    feat = np.zeros((1, 2, 2, 3))
    out = op("anchor_generator").forward(feat, anchor_sizes=[32.0, 64.0],
                                         aspect_ratios=[0.5, 1.0], variances=[0.1, 0.1, 0.2,
                                                                              0.2],
                                         stride=[16.0, 16.0], offset=0.5)
    ref = []
    for h in range(2):
        for w in range(3):
            xc, yc = w * 16 + 0.5 * 15, h * 16 + 0.5 * 15
            for ar in (0.5, 1.0):
                bw = round(np.sqrt(256 / ar))
                bh = round(bw * ar)
                for s in (32.0, 64.0):
                    aw, ah = s / 16 * bw, s / 16 * bh
                    ref.append([xc - 0.5 * (aw - 1), yc - 0.5 * (ah - 1), xc + 0.5 * (aw - 1),
                                yc + 0.5 * (ah - 1)])
    np.testing.assert_allclose(out["Anchors"], np.array(ref).reshape(2, 3, 4, 4), rtol=1e-6)
    with pytest.raises(ValueError, match="stride"):
        op("anchor_generator").forward(feat, anchor_sizes=[32.0], aspect_ratios=[1.0],
                                       variances=[0.1] * 4, stride=[16.0])


# -- box arithmetic -------------------------------------------------------------------------------
def ref_encode(prior, var, target, normalized):
    e = 0 if normalized else 1
    out = np.zeros((target.shape[0], prior.shape[0], 4))
    for i, t in enumerate(target):
        for j, p in enumerate(prior):
            pw, ph = p[2] - p[0] + e, p[3] - p[1] + e
            px, py = p[0] + pw / 2, p[1] + ph / 2
            tw, th = t[2] - t[0] + e, t[3] - t[1] + e
            tx, ty = (t[0] + t[2]) / 2, (t[1] + t[3]) / 2
            out[i, j] = np.array([(tx - px) / pw, (ty - py) / ph, np.log(tw / pw),
                                  np.log(th / ph)]) / var[j]
    return out


def ref_decode(prior, var, target, normalized, axis):
    e = 0 if normalized else 1
    out = np.zeros(target.shape)
    for i in range(target.shape[0]):
        for j in range(target.shape[1]):
            k = j if axis == 0 else i
            p, v, t = prior[k], var[k], target[i, j]
            pw, ph = p[2] - p[0] + e, p[3] - p[1] + e
            px, py = p[0] + pw / 2, p[1] + ph / 2
            cx, cy = v[0] * t[0] * pw + px, v[1] * t[1] * ph + py
            w, h = np.exp(v[2] * t[2]) * pw, np.exp(v[3] * t[3]) * ph
            out[i, j] = [cx - w / 2, cy - h / 2, cx + w / 2 - e, cy + h / 2 - e]
    return out


def boxes(n, seed, scale=1.0):
    rng = np.random.default_rng(seed)
    xy = rng.uniform(0, 0.5, (n, 2))
    wh = rng.uniform(0.1, 0.5, (n, 2))
    return np.concatenate([xy, xy + wh], axis=1) * scale


class TestBoxCoder(OpTest):
    op_type = "box_coder"

    @pytest.mark.parametrize("normalized", [True, False])
    def test_encode(self, normalized):
        prior, target = boxes(5, 0, 10.0), boxes(3, 1, 10.0)
        var = np.random.default_rng(2).uniform(0.1, 0.3, (5, 4))
        self.inputs = {"PriorBox": prior, "PriorBoxVar": var, "TargetBox": target}
        self.attrs = {"code_type": "encode_center_size", "box_normalized": normalized}
        self.outputs = {"OutputBox": ref_encode(prior, var, target, normalized)}
        self.check_infer()
        self.check_output()

    @pytest.mark.parametrize("axis", [0, 1])
    def test_decode_with_attr_variance(self, axis):
        prior = boxes(4, 0)
        target = np.random.default_rng(3).uniform(-1, 1, (4, 4, 4))
        var = [0.1, 0.1, 0.2, 0.2]
        self.inputs = {"PriorBox": prior, "TargetBox": target}
        self.attrs = {"code_type": "decode_center_size", "axis": axis, "variance": var}
        self.outputs = {"OutputBox": ref_decode(prior, np.tile(var, (4, 1)), target, True,
                                                axis)}
        self.check_infer()
        self.check_output()

    def test_roundtrip(self):
        prior, target = boxes(6, 4), boxes(2, 5)
        var = np.full((6, 4), 0.5)
        enc = op("box_coder").forward(prior, var, target)["OutputBox"]
        dec = op("box_coder").forward(prior, var, enc, code_type="decode_center_size")
        np.testing.assert_allclose(dec["OutputBox"], np.repeat(target[:, None], 6, axis=1),
                                   rtol=1e-6, atol=1e-9)

    def test_errors(self):
        p, t = VarSpec([5, 4], "float32"), VarSpec([3, 4], "float32")
        with pytest.raises(ValueError, match="code_type"):
            op("box_coder").infer(p, None, t, code_type="encode")
        with pytest.raises(ValueError, match=r"\[N, M, 4\] to decode"):
            op("box_coder").infer(p, None, t, code_type="decode_center_size")


def ref_iou(a, b, normalized=True):
    e = 0 if normalized else 1
    out = np.zeros((len(a), len(b)))
    for i, x in enumerate(a):
        for j, y in enumerate(b):
            iw = max(min(x[2], y[2]) - max(x[0], y[0]) + e, 0)
            ih = max(min(x[3], y[3]) - max(x[1], y[1]) + e, 0)
            inter = iw * ih
            ua = (x[2] - x[0] + e) * (x[3] - x[1] + e) + (y[2] - y[0] + e) * (y[3] - y[1] + e)
            out[i, j] = inter / (ua - inter)
    return out


class TestIouSimilarity(OpTest):
    op_type = "iou_similarity"

    @pytest.mark.parametrize("normalized", [True, False])
    def test_iou(self, normalized):
        a, b = boxes(4, 0, 20.0), boxes(3, 1, 20.0)
        self.inputs = {"X": a, "Y": b}
        self.attrs = {"box_normalized": normalized}
        self.outputs = {"Out": ref_iou(a, b, normalized)}
        self.check_infer()
        self.check_output()


def test_box_clip_by_lod():
    b = np.array([[-5, -5, 50, 50], [10, 10, 20, 30], [-1, 2, 300, 400]], np.float32)
    info = np.array([[40, 60, 2.0], [100, 100, 1.0]], np.float32)
    out = op("box_clip").forward(b, info, lod={"Input": ((0, 2, 3),), "ImInfo": None})
    np.testing.assert_array_equal(out["Output"], [[0, 0, 29, 19], [10, 10, 20, 19],
                                                  [0, 2, 99, 99]])
    assert out["lod"] == {"Output": ((0, 2, 3),)}


# -- matching -------------------------------------------------------------------------------------
def ref_bipartite(dist, match_type="bipartite", thr=0.5):
    rows, cols = dist.shape
    idx, best = -np.ones(cols, int), np.zeros(cols)
    pool = list(range(rows))
    while pool:
        mi, mr, md = -1, -1, -1.0
        for j in range(cols):
            if idx[j] != -1:
                continue
            for m in pool:
                if dist[m, j] < 1e-6:
                    continue
                if dist[m, j] > md:
                    mi, mr, md = j, m, dist[m, j]
        if mi == -1:
            break
        idx[mi], best[mi] = mr, md
        pool.remove(mr)
    if match_type == "per_prediction":
        for j in range(cols):
            if idx[j] != -1:
                continue
            mr, md = -1, -1.0
            for i in range(rows):
                d = dist[i, j]
                if d < 1e-6:
                    continue
                if d >= thr and d > md:
                    mr, md = i, d
            if mr != -1:
                idx[j], best[j] = mr, md
    return idx, best


@pytest.mark.parametrize("match_type", ["bipartite", "per_prediction"])
def test_bipartite_match(match_type):
    rng = np.random.default_rng(0)
    dist = rng.uniform(0, 1, (5, 7))
    dist[dist < 0.2] = 0.0
    got = op("bipartite_match").forward(dist, lod={"DistMat": ((0, 2, 5),)},
                                        match_type=match_type, dist_threshold=0.4)
    for k, (a, b) in enumerate(((0, 2), (2, 5))):
        idx, best = ref_bipartite(dist[a:b], match_type, 0.4)
        np.testing.assert_array_equal(got["ColToRowMatchIndices"][k], idx)
        np.testing.assert_allclose(got["ColToRowMatchDist"][k], best)
    assert got["ColToRowMatchIndices"].dtype == np.int32


def test_target_assign():
    x = np.arange(3 * 2 * 2, dtype=np.float32).reshape(3, 2, 2)      # rows, P=2, K=2
    match = np.array([[1, -1, 0], [-1, 0, -1]], np.int32)
    neg = np.array([[1], [2]], np.int32)
    got = op("target_assign").forward(x, match, neg, lod={"X": ((0, 2, 3),),
                                                         "NegIndices": ((0, 1, 2),),
                                                         "MatchIndices": None},
                                      mismatch_value=-7)
    ref = np.full((2, 3, 2), -7.0)
    ref[0, 0] = x[1, 0]
    ref[0, 2] = x[0, 0]                # j % P = 0
    ref[1, 1] = x[2, 1]
    w = np.array([[1, 1, 1], [0, 1, 1]], np.float32)[..., None]       # negatives weigh 1
    np.testing.assert_array_equal(got["Out"], ref)
    np.testing.assert_array_equal(got["OutWeight"], w)


# -- NMS ------------------------------------------------------------------------------------------
def ref_nms_image(bboxes, scores, bg, sthr, top_k, nthr, eta, keep_top_k, normalized=True):
    """fluid's MultiClassNMS for one image, with a per-box IoU written independently."""
    res = {}
    for c in range(scores.shape[0]):
        if c == bg:
            continue
        cand = [(scores[c, i], i) for i in range(scores.shape[1]) if scores[c, i] > sthr]
        cand.sort(key=lambda t: -t[0])
        if top_k > -1:
            cand = cand[:top_k]
        kept, thr = [], nthr
        for s, i in cand:
            if all(ref_iou(bboxes[i:i + 1], bboxes[k:k + 1], normalized)[0, 0] <= thr
                   for k in kept):
                kept.append(i)
                if eta < 1 and thr > 0.5:
                    thr *= eta
        res[c] = kept
    total = sum(len(v) for v in res.values())
    if keep_top_k > -1 and total > keep_top_k:
        pairs = sorted(((scores[c, i], c, i) for c, v in res.items() for i in v),
                       key=lambda t: -t[0])[:keep_top_k]
        res = {}
        for s, c, i in pairs:
            res.setdefault(c, []).append(i)
    rows = []
    for c in sorted(res):
        for i in res[c]:
            rows.append([c, scores[c, i], *bboxes[i]])
    return np.array(rows).reshape(-1, 6)


@pytest.mark.parametrize("keep_top_k,eta", [(-1, 1.0), (5, 1.0), (-1, 0.7)])
def test_multiclass_nms(keep_top_k, eta):
    rng = np.random.default_rng(1)
    n, m, c = 2, 12, 3
    bb = np.stack([boxes(m, s) for s in range(n)])
    sc = rng.uniform(0, 1, (n, c, m))
    got = op("multiclass_nms").forward(bb, sc, background_label=0, score_threshold=0.2,
                                       nms_top_k=8, nms_threshold=0.4, nms_eta=eta,
                                       keep_top_k=keep_top_k, normalized=True)
    refs = [ref_nms_image(bb[i], sc[i], 0, 0.2, 8, 0.4, eta, keep_top_k) for i in range(n)]
    np.testing.assert_allclose(got["Out"], np.concatenate(refs), rtol=1e-6)
    counts = [len(r) for r in refs]
    assert got["lod"] == {"Out": ((0, counts[0], counts[0] + counts[1]),)}


def test_multiclass_nms_empty_and_lod_form():
    bb = boxes(4, 0)[None]
    sc = np.full((1, 2, 4), 0.01)
    got = op("multiclass_nms").forward(bb, sc, score_threshold=0.5)
    np.testing.assert_array_equal(got["Out"], [[-1]])
    # the LoD form: BBoxes [M, C, 4], Scores [M, C], images by LoD
    m = 5
    per_class = np.stack([boxes(m, 3), boxes(m, 4)], axis=1)           # [M, 2, 4]
    scores = np.random.default_rng(5).uniform(0, 1, (m, 2))
    got = op("multiclass_nms").forward(per_class, scores, lod={"Scores": ((0, 2, 5),),
                                                               "BBoxes": ((0, 2, 5),)},
                                       background_label=-1, score_threshold=0.1,
                                       nms_threshold=0.5)
    rows = []
    for a, b in ((0, 2), (2, 5)):
        for c in range(2):
            r = ref_nms_image(per_class[a:b, c], scores[a:b, c][None], -1, 0.1, -1, 0.5, 1.0,
                              -1)
            r[:, 0] = c
            # fluid's LoD form lists a class's kept boxes by box index (stable_sort of the
            # indices; Paddle 2.6 agrees), not by score
            pos = [int(np.nonzero((per_class[a:b, c] == row[2:]).all(axis=1))[0][0])
                   for row in r]
            rows.append(r[np.argsort(pos, kind="stable")])
    np.testing.assert_allclose(got["Out"], np.concatenate(rows), rtol=1e-6)


# -- YOLO -----------------------------------------------------------------------------------------
def ref_yolo_box(x, img_size, anchors, class_num, conf_thresh, ds, clip, scale=1.0):
    n, _, h, w = x.shape
    an = len(anchors) // 2
    sig = lambda v: 1 / (1 + np.exp(-v))          # noqa: E731
    boxes_ = np.zeros((n, an * h * w, 4))
    scores = np.zeros((n, an * h * w, class_num))
    xs = x.reshape(n, an, 5 + class_num, h, w)
    bias = -0.5 * (scale - 1)
    for i in range(n):
        ih, iw = img_size[i]
        for a in range(an):
            for k in range(h):
                for l in range(w):
                    conf = sig(xs[i, a, 4, k, l])
                    if conf < conf_thresh:
                        continue
                    # x over the grid's width (Paddle 2.6's kernel; 1.8 used h for both)
                    cx = (l + sig(xs[i, a, 0, k, l]) * scale + bias) * iw / w
                    cy = (k + sig(xs[i, a, 1, k, l]) * scale + bias) * ih / h
                    bw = np.exp(xs[i, a, 2, k, l]) * anchors[2 * a] * iw / (ds * w)
                    bh = np.exp(xs[i, a, 3, k, l]) * anchors[2 * a + 1] * ih / (ds * h)
                    b = [cx - bw / 2, cy - bh / 2, cx + bw / 2, cy + bh / 2]
                    if clip:
                        b = [max(b[0], 0), max(b[1], 0), min(b[2], iw - 1), min(b[3], ih - 1)]
                    idx = a * h * w + k * w + l
                    boxes_[i, idx] = b
                    scores[i, idx] = conf * sig(xs[i, a, 5:, k, l])
    return boxes_, scores


class TestYoloBox(OpTest):
    op_type = "yolo_box"

    @pytest.mark.parametrize("clip,scale", [(True, 1.0), (False, 1.2)])
    def test_boxes(self, clip, scale):
        anchors = [10, 13, 16, 30]
        x = self.rand(2, 2 * (5 + 3), 3, 3, low=-2, high=2)
        size = np.array([[96, 128], [64, 64]], np.int32)
        b, s = ref_yolo_box(x, size, anchors, 3, 0.4, 32, clip, scale)
        self.inputs = {"X": x, "ImgSize": size}
        self.attrs = {"anchors": anchors, "class_num": 3, "conf_thresh": 0.4,
                      "downsample_ratio": 32, "clip_bbox": clip, "scale_x_y": scale}
        self.outputs = {"Boxes": b, "Scores": s}
        self.check_infer()
        self.check_output()

    def test_errors(self):
        with pytest.raises(ValueError, match="anchor_num"):
            op("yolo_box").infer(VarSpec([1, 10, 3, 3], "float32"), VarSpec([1, 2], "int32"),
                                 anchors=[1, 2], class_num=3)
        with pytest.raises(ValueError, match="pairs"):
            op("yolo_box").infer(VarSpec([1, 8, 3, 3], "float32"), VarSpec([1, 2], "int32"),
                                 anchors=[1, 2, 3], class_num=3)


# -- yolov3_loss ----------------------------------------------------------------------------------
def _sig(v):
    return 1 / (1 + np.exp(-v))


def _sce(x, t):
    return max(x, 0) - x * t + np.log(1 + np.exp(-abs(x)))


def _iou_c(a, b):
    ax1, ax2, ay1, ay2 = a[0] - a[2] / 2, a[0] + a[2] / 2, a[1] - a[3] / 2, a[1] + a[3] / 2
    bx1, bx2, by1, by2 = b[0] - b[2] / 2, b[0] + b[2] / 2, b[1] - b[3] / 2, b[1] + b[3] / 2
    iw, ih = min(ax2, bx2) - max(ax1, bx1), min(ay2, by2) - max(ay1, by1)
    inter = 0.0 if iw < 0 or ih < 0 else iw * ih
    return inter / (a[2] * a[3] + b[2] * b[3] - inter)


def ref_yolov3_loss(x, gtbox, gtlabel, gtscore, anchors, mask, cls, ignore, ds, smooth):
    """fluid's kernel, one cell and one ground truth at a time."""
    n, _, h, w = x.shape
    m_num = len(mask)
    xs = x.reshape(n, m_num, 5 + cls, h, w)
    size = ds * h
    pos, neg = (1 - min(1 / cls, 1 / 40), min(1 / cls, 1 / 40)) if smooth else (1.0, 0.0)
    loss = np.zeros(n)
    obj = np.zeros((n, m_num, h, w))
    match = np.zeros(gtlabel.shape, np.int32)
    for i in range(n):
        for j in range(m_num):
            for k in range(h):
                for l in range(w):
                    a = mask[j]
                    pred = [(l + _sig(xs[i, j, 0, k, l])) / h, (k + _sig(xs[i, j, 1, k, l])) / h,
                            np.exp(xs[i, j, 2, k, l]) * anchors[2 * a] / size,
                            np.exp(xs[i, j, 3, k, l]) * anchors[2 * a + 1] / size]
                    best = 0.0
                    for t in range(gtbox.shape[1]):
                        g = gtbox[i, t]
                        if g[2] <= 1e-6 or g[3] <= 1e-6:
                            continue
                        best = max(best, _iou_c(pred, g))
                    if best > ignore:
                        obj[i, j, k, l] = -1
        for t in range(gtbox.shape[1]):
            g = gtbox[i, t]
            if g[2] <= 1e-6 or g[3] <= 1e-6:
                match[i, t] = -1
                continue
            best, best_n = 0.0, 0
            for a in range(len(anchors) // 2):
                v = _iou_c([0, 0, anchors[2 * a] / size, anchors[2 * a + 1] / size],
                           [0, 0, g[2], g[3]])
                if v > best:
                    best, best_n = v, a
            mi = mask.index(best_n) if best_n in mask else -1
            match[i, t] = mi
            if mi < 0:
                continue
            gi, gj = int(g[0] * w), int(g[1] * h)
            sc = gtscore[i, t]
            bs = (2 - g[2] * g[3]) * sc
            cell = xs[i, mi, :, gj, gi]
            loss[i] += bs * (_sce(cell[0], g[0] * h - gi) + _sce(cell[1], g[1] * h - gj)
                             + abs(np.log(g[2] * size / anchors[2 * best_n]) - cell[2])
                             + abs(np.log(g[3] * size / anchors[2 * best_n + 1]) - cell[3]))
            obj[i, mi, gj, gi] = sc
            for c in range(cls):
                loss[i] += sc * _sce(cell[5 + c], pos if c == gtlabel[i, t] else neg)
        for j in range(m_num):
            for k in range(h):
                for l in range(w):
                    o = obj[i, j, k, l]
                    if o > 1e-5:
                        loss[i] += _sce(xs[i, j, 4, k, l], 1.0) * o
                    elif o > -0.5:
                        loss[i] += _sce(xs[i, j, 4, k, l], 0.0)
    return loss, obj, match


class TestYolov3Loss(OpTest):
    op_type = "yolov3_loss"

    @pytest.mark.parametrize("smooth,with_score", [(True, False), (False, True)])
    def test_loss(self, smooth, with_score):
        anchors = [10, 13, 16, 30, 33, 23, 30, 61, 62, 45, 59, 119]
        mask = [0, 1]
        cls = 3
        x = self.rand(2, len(mask) * (5 + cls), 4, 4, low=-1.5, high=1.5)
        gt = np.array([[[0.3, 0.4, 0.08, 0.12], [0.7, 0.6, 0.25, 0.3], [0.5, 0.5, 0.0, 0.0]],
                       [[0.12, 0.81, 0.1, 0.2], [0.55, 0.35, 0.15, 0.1],
                        [0.5, 0.5, 0.9, 0.95]]])
        label = np.array([[0, 2, 1], [1, 1, 0]], np.int32)
        score = np.array([[0.9, 0.6, 1.0], [1.0, 0.7, 0.8]]) if with_score else np.ones((2, 3))
        loss, obj, match = ref_yolov3_loss(x, gt, label, score, anchors, mask, cls, 0.2, 8,
                                           smooth)
        # not trivial: positives, an unmatched gt, a gt outside the mask, ignored cells
        assert (match >= 0).sum() >= 3 and (match == -1).sum() >= 2 and (obj == -1).any()
        self.inputs = {"X": x, "GTBox": gt, "GTLabel": label}
        if with_score:
            self.inputs["GTScore"] = score
        self.attrs = {"anchors": anchors, "anchor_mask": mask, "class_num": cls,
                      "ignore_thresh": 0.2, "downsample_ratio": 8,
                      "use_label_smooth": smooth}
        self.outputs = {"Loss": loss, "ObjectnessMask": obj, "GTMatchMask": match}
        self.check_infer()
        self.check_output()
        if with_score:          # one numeric gradient check (512 inputs) keeps this fast
            self.check_grad(["X"], "Loss", weighted=True)

    def test_errors(self):
        with pytest.raises(ValueError, match="anchor_mask"):
            op("yolov3_loss").infer(VarSpec([1, 16, 2, 2], "float32"),
                                    VarSpec([1, 3, 4], "float32"), VarSpec([1, 3], "int32"),
                                    anchors=[1, 2, 3, 4], anchor_mask=[2], class_num=3)
        with pytest.raises(ValueError, match="channel count"):
            op("yolov3_loss").infer(VarSpec([1, 15, 2, 2], "float32"),
                                    VarSpec([1, 3, 4], "float32"), VarSpec([1, 3], "int32"),
                                    anchors=[1, 2, 3, 4], anchor_mask=[0, 1], class_num=3)


# -- R-CNN proposals (fluidlite/ops/rcnn.py) ------------------------------------------------------
def ref_generate_proposals(scores, deltas, info, anchors, var, pre, post, thr, min_size):
    rois, probs = [], []
    a, v = anchors.reshape(-1, 4), var.reshape(-1, 4)
    for i in range(scores.shape[0]):
        sc = scores[i].transpose(1, 2, 0).reshape(-1)
        d = deltas[i].transpose(1, 2, 0).reshape(-1, 4)
        order = sorted(range(sc.size), key=lambda k: -sc[k])[:pre]
        props = []
        for k in order:
            aw, ah = a[k, 2] - a[k, 0] + 1, a[k, 3] - a[k, 1] + 1
            ax, ay = a[k, 0] + aw / 2, a[k, 1] + ah / 2
            cx, cy = v[k, 0] * d[k, 0] * aw + ax, v[k, 1] * d[k, 1] * ah + ay
            w = np.exp(min(v[k, 2] * d[k, 2], np.log(1000 / 16))) * aw
            h = np.exp(min(v[k, 3] * d[k, 3], np.log(1000 / 16))) * ah
            b = [cx - w / 2, cy - h / 2, cx + w / 2 - 1, cy + h / 2 - 1]
            b = [min(max(b[0], 0), info[i, 1] - 1), min(max(b[1], 0), info[i, 0] - 1),
                 min(max(b[2], 0), info[i, 1] - 1), min(max(b[3], 0), info[i, 0] - 1)]
            ws, hs = b[2] - b[0] + 1, b[3] - b[1] + 1
            ms = max(min_size, 1.0)
            if ((b[2] - b[0]) / info[i, 2] + 1 >= ms and (b[3] - b[1]) / info[i, 2] + 1 >= ms
                    and b[0] + ws / 2 <= info[i, 1] and b[1] + hs / 2 <= info[i, 0]):
                props.append((sc[k], b))
        kept = []
        for s, b in props:                          # already in descending score order
            if all(ref_iou(np.array([b]), np.array([kb]), False)[0, 0] <= thr
                   for _, kb in kept):
                kept.append((s, b))
        kept = kept[:post]
        rois.append(np.array([b for _, b in kept]).reshape(-1, 4))
        probs.append(np.array([s for s, _ in kept]).reshape(-1, 1))
    return rois, probs


def test_generate_proposals():
    rng = np.random.default_rng(2)
    n, A, H, W = 2, 3, 4, 4
    anchors = op("anchor_generator").forward(np.zeros((1, 1, H, W)), anchor_sizes=[16, 32, 64],
                                             aspect_ratios=[1.0], variances=[1.0] * 4,
                                             stride=[8.0, 8.0])
    scores = rng.uniform(0, 1, (n, A, H, W))
    deltas = rng.uniform(-0.5, 0.5, (n, 4 * A, H, W))
    info = np.array([[32, 32, 1.0], [28, 30, 2.0]])
    var = np.full(anchors["Anchors"].shape, 0.5)
    got = op("generate_proposals").forward(scores, deltas, info, anchors["Anchors"], var,
                                           pre_nms_topN=30, post_nms_topN=8, nms_thresh=0.5,
                                           min_size=3.0)
    rois, probs = ref_generate_proposals(scores, deltas, info, anchors["Anchors"], var, 30, 8,
                                         0.5, 3.0)
    np.testing.assert_allclose(got["RpnRois"], np.concatenate(rois), rtol=1e-6)
    np.testing.assert_allclose(got["RpnRoiProbs"], np.concatenate(probs), rtol=1e-6)
    assert got["lod"]["RpnRois"] == ((0, len(rois[0]), len(rois[0]) + len(rois[1])),)
    # fluid 1.8's RpnRoisLod output: each image's end offset, int64
    assert got["RpnRoisLod"].dtype == np.int64
    assert got["RpnRoisLod"].tolist() == [len(rois[0]), len(rois[0]) + len(rois[1])]


def test_distribute_and_collect_fpn_proposals():
    rois = np.array([[0, 0, 10, 10], [0, 0, 100, 120], [5, 5, 300, 260], [0, 0, 30, 40],
                     [1, 1, 500, 500]], np.float64)
    got = op("distribute_fpn_proposals").forward(rois, lod={"FpnRois": ((0, 3, 5),)},
                                                 min_level=2, max_level=5, refer_level=4,
                                                 refer_scale=224)
    levels = []
    for r in rois:
        scale = np.sqrt((r[2] - r[0] + 1) * (r[3] - r[1] + 1))
        levels.append(int(min(5, max(2, np.floor(np.log2(scale / 224 + 1e-6) + 4)))))
    flat = np.concatenate(got["MultiFpnRois"])
    np.testing.assert_array_equal(flat[got["RestoreIndex"][:, 0]], rois)
    for k, lvl in enumerate(range(2, 6)):
        want = [i for i in range(5) if levels[i] == lvl]
        np.testing.assert_array_equal(got["MultiFpnRois"][k], rois[want])
        c0 = sum(1 for i in want if i < 3)
        assert got["MultiFpnRois"][k].lod == ((0, c0, len(want)),)
    # collect: the 3 best over both levels and images, regrouped by image
    r1, r2 = rois[:3], rois[3:]
    s1, s2 = np.array([[0.9], [0.1], [0.5]]), np.array([[0.8], [0.3]])
    col = op("collect_fpn_proposals").forward(
        [r1, r2], [s1, s2], lod={"MultiLevelRois": [((0, 2, 3),), ((0, 1, 2),)],
                                 "MultiLevelScores": [None, None]}, post_nms_topN=3)
    # scores 0.9 (img 0), 0.8 (r2 row 0 -> img 0), 0.5 (r1 row 2 -> img 1)
    np.testing.assert_array_equal(col["FpnRois"], [r1[0], r2[0], r1[2]])
    assert col["lod"]["FpnRois"] == ((0, 2, 3),)


def test_box_decoder_and_assign():
    rng = np.random.default_rng(3)
    prior = boxes(4, 0, 50.0)
    var = np.array([0.1, 0.1, 0.2, 0.2])
    target = rng.uniform(-1, 1, (4, 3 * 4)) * 3
    score = rng.uniform(0, 1, (4, 3))
    score[2] = [0.9, -2.0, -3.0]          # no class above 0 beats -1: keep the prior
    got = op("box_decoder_and_assign").forward(prior, var, target, score, box_clip=1.0)
    for i in range(4):
        pw, ph = prior[i, 2] - prior[i, 0] + 1, prior[i, 3] - prior[i, 1] + 1
        px, py = prior[i, 0] + pw / 2, prior[i, 1] + ph / 2
        dec = []
        for j in range(3):
            t = target[i, 4 * j:4 * j + 4]
            cx, cy = var[0] * t[0] * pw + px, var[1] * t[1] * ph + py
            w, h = np.exp(min(var[2] * t[2], 1.0)) * pw, np.exp(min(var[3] * t[3], 1.0)) * ph
            dec.append([cx - w / 2, cy - h / 2, cx + w / 2 - 1, cy + h / 2 - 1])
        np.testing.assert_allclose(got["DecodeBox"][i], np.concatenate(dec), rtol=1e-6)
        best, best_j = -1, -1
        for j in range(1, 3):
            if score[i, j] > best:
                best, best_j = score[i, j], j
        exp = dec[best_j] if best_j > 0 else prior[i]
        np.testing.assert_allclose(got["OutputAssignBox"][i], exp, rtol=1e-6)


def test_box_decoder_and_assign_layer_runs_float32_through_the_executor():
    """The layer's program keeps float32 end to end (the plan checks every output's dtype)."""
    rng = np.random.default_rng(5)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        prior = fluid.data("prior", [4, 4], "float32")
        pvar = fluid.data("pvar", [4], "float32")
        target = fluid.data("target", [4, 12], "float32")
        score = fluid.data("score", [4, 3], "float32")
        dec, assign = fluid.layers.box_decoder_and_assign(prior, pvar, target, score, 1.0)
    feed = {"prior": boxes(4, 0, 50.0).astype("float32"),
            "pvar": np.array([0.1, 0.1, 0.2, 0.2], "float32"),
            "target": (rng.uniform(-1, 1, (4, 12)) * 3).astype("float32"),
            "score": rng.uniform(0, 1, (4, 3)).astype("float32")}
    got_dec, got_assign = fluid.Executor().run(main, feed=feed, fetch_list=[dec, assign])
    want = op("box_decoder_and_assign").forward(*[feed[k].astype(np.float64) for k in
                                                  ("prior", "pvar", "target", "score")],
                                                box_clip=1.0)
    assert got_dec.dtype == got_assign.dtype == np.float32
    np.testing.assert_allclose(got_dec, want["DecodeBox"], rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(got_assign, want["OutputAssignBox"], rtol=1e-5, atol=1e-4)


def test_polygon_box_transform():
    x = np.random.default_rng(4).uniform(0, 1, (1, 4, 2, 3))
    out = op("polygon_box_transform").forward(x)["Output"]
    for c in range(4):
        for h in range(2):
            for w in range(3):
                exp = (4 * w if c % 2 == 0 else 4 * h) - x[0, c, h, w]
                assert abs(out[0, c, h, w] - exp) < 1e-12
    with pytest.raises(ValueError, match="even"):
        op("polygon_box_transform").forward(np.zeros((1, 3, 2, 2)))


# -- detection_map --------------------------------------------------------------------------------
def ref_map(dets, gts, overlap=0.5, difficult_eval=True, ap="integral", bg=0):
    """VOC-style mAP written out plainly: dets / gts are per-image lists of rows
    (label, score, box) / (label, difficult, box)."""
    pos, tp, fp = {}, {}, {}
    for det, gt in zip(dets, gts):
        for c in set(int(g[0]) for g in gt):
            n = sum(1 for g in gt if int(g[0]) == c and (difficult_eval or not g[1]))
            if n:
                pos[c] = pos.get(c, 0) + n
        for c in set(int(d[0]) for d in det):
            mine = [g for g in gt if int(g[0]) == c]
            rows = sorted([d for d in det if int(d[0]) == c], key=lambda d: -d[1])
            seen = [False] * len(mine)
            for d in rows:
                box = np.clip(d[2:6], 0, 1)
                best, bj = -1.0, -1
                for j, g in enumerate(mine):
                    o = ref_iou(box[None], np.asarray(g[2:6])[None])[0, 0]
                    if o > best:
                        best, bj = o, j
                if mine and best > overlap:
                    if difficult_eval or not mine[bj][1]:
                        tp.setdefault(c, []).append((d[1], 0 if seen[bj] else 1))
                        fp.setdefault(c, []).append((d[1], 1 if seen[bj] else 0))
                        seen[bj] = True
                else:
                    tp.setdefault(c, []).append((d[1], 0))
                    fp.setdefault(c, []).append((d[1], 1))
    aps = []
    for c in sorted(pos):
        if c == bg or c not in tp:
            continue
        order = sorted(range(len(tp[c])), key=lambda i: -tp[c][i][0])
        t = np.cumsum([tp[c][i][1] for i in order])
        f = np.cumsum([fp[c][i][1] for i in order])
        prec, rec = t / (t + f), t / pos[c]
        if ap == "integral":
            a, prev = 0.0, 0.0
            for p, r in zip(prec, rec):
                if abs(r - prev) > 1e-6:
                    a += p * abs(r - prev)
                prev = r
        else:                      # 11 points: max precision at recall >= t
            a = sum(max([p for p, r in zip(prec, rec) if r >= th] or [0])
                    for th in np.arange(11) / 10) / 11
        aps.append(a)
    return float(np.mean(aps)) if aps else 0.0


def _map_case(seed):
    rng = np.random.default_rng(seed)
    dets, gts = [], []
    for _ in range(2):
        g = [[rng.integers(1, 3), rng.integers(0, 2), *boxes(1, rng.integers(100))[0]]
             for _ in range(3)]
        d = []
        for row in g:
            jitter = np.asarray(row[2:]) + rng.uniform(-0.05, 0.05, 4)
            d.append([row[0], rng.uniform(0.3, 1.0), *jitter])
        d.append([1, rng.uniform(0, 1), *boxes(1, rng.integers(100))[0]])
        gts.append(np.array(g, np.float64))
        dets.append(np.array(d, np.float64))
    return dets, gts


@pytest.mark.parametrize("ap,difficult", [("integral", True), ("11point", False)])
def test_detection_map(ap, difficult):
    dets, gts = _map_case(3)
    det, gt = np.concatenate(dets), np.concatenate(gts)
    lod = {"DetectRes": ((0, len(dets[0]), len(det)),), "Label": ((0, 3, 6),)}
    got = op("detection_map").forward(det, gt, lod=lod, overlap_threshold=0.5,
                                      evaluate_difficult=difficult, ap_type=ap, class_num=3)
    np.testing.assert_allclose(got["MAP"], [ref_map(dets, gts, 0.5, difficult, ap)],
                               rtol=1e-5)
    # feeding the state back (HasState=1) with the same batch equals one batch of both
    state_lod = dict(lod, TruePos=got["AccumTruePos"].lod, FalsePos=got["AccumFalsePos"].lod)
    again = op("detection_map").forward(det, gt, np.array([1], np.int32), got["AccumPosCount"],
                                        np.asarray(got["AccumTruePos"]),
                                        np.asarray(got["AccumFalsePos"]), lod=state_lod,
                                        overlap_threshold=0.5, evaluate_difficult=difficult,
                                        ap_type=ap, class_num=3)
    np.testing.assert_allclose(again["MAP"], [ref_map(dets * 2, gts * 2, 0.5, difficult, ap)],
                               rtol=1e-5)
    assert again["AccumPosCount"].sum() == 2 * got["AccumPosCount"].sum()


def test_detection_map_counts_a_class_without_detections():
    """fluid 1.8 (test_detection_map_op's ...WithClassNoTP): class 2 has a ground truth but
    no detection, so its AP is 0 and the mean over classes 1 and 2 is 0.5."""
    gt = np.array([[2, 0, 0.3, 0.3, 0.6, 0.5], [1, 0, 0.7, 0.1, 0.9, 0.3]])
    det = np.array([[1, 0.2, 0.8, 0.1, 1.0, 0.3]])
    got = op("detection_map").forward(det, gt, lod={"DetectRes": ((0, 1),),
                                                    "Label": ((0, 2),)},
                                      overlap_threshold=0.3, evaluate_difficult=True,
                                      ap_type="11point", class_num=3)
    np.testing.assert_allclose(got["MAP"], [0.5])


def ref_locality_aware_nms(bboxes, scores, bg, sthr, top_k, nthr, keep_top_k):
    rows = []
    for c in range(scores.shape[0]):
        if c == bg:
            continue
        b, s = bboxes.copy(), scores[c].copy()
        skip = [True] * len(s)
        index = -1
        for i in range(len(s)):
            if index > -1:
                o = ref_iou(b[i:i + 1], b[index:index + 1])[0, 0]
                if o > nthr:
                    b[index] = (b[i] * s[i] + b[index] * s[index]) / (s[i] + s[index])
                    s[index] += s[i]
                else:
                    skip[index] = False
                    index = i
            else:
                index = i
        if index > -1:
            skip[index] = False
        cand = sorted([(s[i], i) for i in range(len(s)) if s[i] > sthr and not skip[i]],
                      key=lambda t: -t[0])
        if top_k > -1:
            cand = cand[:top_k]
        kept = []
        for _, i in cand:
            if all(ref_iou(b[i:i + 1], b[k:k + 1])[0, 0] <= nthr for k in kept):
                kept.append(i)
        rows += [[c, s[i], *b[i]] for i in kept]
    if keep_top_k > -1 and len(rows) > keep_top_k:
        top = sorted(range(len(rows)), key=lambda k: -rows[k][1])[:keep_top_k]
        rows = sorted((rows[k] for k in top), key=lambda r: r[0])
    return np.array(rows).reshape(-1, 6)


@pytest.mark.parametrize("keep_top_k", [-1, 4])
def test_locality_aware_nms(keep_top_k):
    rng = np.random.default_rng(6)
    base = boxes(5, 1)
    # runs of near-duplicate boxes, as a text detector emits them
    bb = np.repeat(base, 3, axis=0) + rng.uniform(-0.01, 0.01, (15, 4))
    sc = rng.uniform(0, 1, (1, 2, 15))
    got = op("locality_aware_nms").forward(bb[None], sc, background_label=-1,
                                           score_threshold=0.1, nms_top_k=10,
                                           nms_threshold=0.5, keep_top_k=keep_top_k)
    ref = ref_locality_aware_nms(bb, sc[0], -1, 0.1, 10, 0.5, keep_top_k)
    np.testing.assert_allclose(got["Out"], ref, rtol=1e-6)
    assert got["Out"].shape[0] < 15 * 2 and got["lod"]["Out"] == ((0, len(ref)),)
    with pytest.raises(ValueError, match="must be 4 or a polygon's 8, 16, 24 or 32"):
        op("locality_aware_nms").infer(VarSpec([1, 5, 6], "float32"),
                                       VarSpec([1, 2, 5], "float32"))


def ref_retinanet_output(bbs, scs, ancs, info, sthr, top_k, nthr, keep):
    out = []
    for n in range(scs[0].shape[0]):
        h, w, scale = info[n]
        ih, iw = round(h / scale), round(w / scale)
        preds = {}
        for lvl, (bb, sc, an) in enumerate(zip(bbs, scs, ancs)):
            flat = sc[n].reshape(-1)
            thr = sthr if lvl < len(scs) - 1 else 0.0
            cand = sorted([(flat[i], i) for i in range(flat.size) if flat[i] > thr],
                          key=lambda t: -t[0])[:top_k]
            C = sc.shape[2]
            for s, i in cand:
                a, c = divmod(i, C)
                x = an[a]
                aw, ah = x[2] - x[0] + 1, x[3] - x[1] + 1
                d = bb[n, a]
                cx, cy = d[0] * aw + x[0] + aw / 2, d[1] * ah + x[1] + ah / 2
                bw, bh = np.exp(d[2]) * aw, np.exp(d[3]) * ah
                box = np.array([cx - bw / 2, cy - bh / 2, cx + bw / 2 - 1, cy + bh / 2 - 1])
                box = box / scale
                box[0::2] = np.clip(box[0::2], 0, iw - 1)
                box[1::2] = np.clip(box[1::2], 0, ih - 1)
                preds.setdefault(c, []).append((s, box))
        dets = []
        for c in sorted(preds):
            rows = sorted(preds[c], key=lambda t: -t[0])
            kept = []
            for s, b in rows:
                ok = True
                for _, kb in kept:
                    apart = kb[0] > b[2] or kb[2] < b[0] or kb[1] > b[3] or kb[3] < b[1]
                    if not apart and ref_iou(b[None], kb[None], False)[0, 0] > nthr:
                        ok = False
                        break
                if ok:
                    kept.append((s, b))
            dets += [(s, c, b) for s, b in kept]
        dets = sorted(dets, key=lambda t: -t[0])[:keep]
        out.append(np.array([[c + 1, s, *b] for s, c, b in dets]).reshape(-1, 6))
    return out


def test_retinanet_detection_output():
    rng = np.random.default_rng(9)
    anchors = [op("anchor_generator").forward(np.zeros((1, 1, s, s)), anchor_sizes=[a],
                                              aspect_ratios=[0.5, 1.0], variances=[1.0] * 4,
                                              stride=[64 / s] * 2)["Anchors"].reshape(-1, 4)
               for s, a in ((4, 16.0), (2, 40.0))]
    bbs = [rng.uniform(-0.3, 0.3, (2, len(a), 4)) for a in anchors]
    scs = [rng.uniform(0, 1, (2, len(a), 3)) for a in anchors]
    info = np.array([[64, 64, 1.0], [60, 50, 0.5]])
    got = op("retinanet_detection_output").forward(bbs, scs, anchors, info,
                                                   score_threshold=0.3, nms_top_k=12,
                                                   nms_threshold=0.4, keep_top_k=9)
    ref = ref_retinanet_output(bbs, scs, anchors, info, 0.3, 12, 0.4, 9)
    np.testing.assert_allclose(got["Out"], np.concatenate(ref), rtol=1e-6)
    assert got["lod"]["Out"] == ((0, len(ref[0]), len(ref[0]) + len(ref[1])),)


def ref_rpn_assign(anchors, gt, crowd, info, batch, straddle, pos, neg, fg_frac):
    """One image, use_random=False, written from the rule: candidates in anchor order."""
    h, w, scale = info
    inside = [i for i, a in enumerate(anchors) if a[0] >= -straddle and a[1] >= -straddle
              and a[2] < w + straddle and a[3] < h + straddle]
    g = np.array([b for b, c in zip(gt, crowd) if c == 0]) * scale
    an = anchors[inside]
    ov = ref_iou(an, g, False)
    amax, aarg, gmax = ov.max(1), ov.argmax(1), ov.max(0)
    cand = []
    for r in range(len(an)):
        if any(abs(ov[r, j] - gmax[j]) < 1e-5 for j in range(len(g))) or amax[r] >= pos:
            cand.append(r)
    fg = cand[:int(fg_frac * batch)]
    lab = {r: 1 for r in fg}
    bg = [r for r in range(len(an)) if amax[r] < neg][:batch - len(fg)]
    fake = []
    for r in bg:
        if lab.get(r) == 1:
            fake.append(fg[0])
        lab[r] = 0
    fg_rows = sorted(r for r, v in lab.items() if v == 1)
    bg_rows = sorted(r for r, v in lab.items() if v == 0)
    loc_rows = fake + fg_rows
    deltas = []
    for r in loc_rows:
        e, t = an[r], g[aarg[r]]
        ew, eh, tw, th = e[2] - e[0] + 1, e[3] - e[1] + 1, t[2] - t[0] + 1, t[3] - t[1] + 1
        deltas.append([(t[0] + tw / 2 - e[0] - ew / 2) / ew, (t[1] + th / 2 - e[1] - eh / 2) / eh,
                       np.log(tw / ew), np.log(th / eh)])
    ins = np.array(inside)
    return (ins[loc_rows], np.concatenate([ins[fg_rows], ins[bg_rows]]),
            [1] * len(fg_rows) + [0] * len(bg_rows), np.array(deltas).reshape(-1, 4),
            [0] * len(fake) + [1] * len(fg_rows))


def test_rpn_target_assign_deterministic():
    anchors = op("anchor_generator").forward(np.zeros((1, 1, 4, 4)), anchor_sizes=[16, 32],
                                             aspect_ratios=[0.5, 1.0], variances=[1.0] * 4,
                                             stride=[8.0, 8.0])["Anchors"].reshape(-1, 4)
    gt = np.array([[2, 3, 14, 18], [10, 8, 30, 28], [0, 0, 31, 31], [5, 5, 9, 9]], np.float64)
    crowd = np.array([0, 0, 1, 0], np.int32)
    info = np.array([[32, 32, 1.0], [32, 32, 1.0]])
    got = op("rpn_target_assign").forward(anchors, gt, crowd, info,
                                          lod={"GtBoxes": ((0, 3, 4),),
                                               "IsCrowd": ((0, 3, 4),)},
                                          rpn_batch_size_per_im=12, rpn_straddle_thresh=0.0,
                                          rpn_positive_overlap=0.5, rpn_negative_overlap=0.2,
                                          rpn_fg_fraction=0.25, use_random=False)
    m = anchors.shape[0]
    refs = [ref_rpn_assign(anchors, gt[:3], crowd[:3], info[0], 12, 0.0, 0.5, 0.2, 0.25),
            ref_rpn_assign(anchors, gt[3:], crowd[3:], info[1], 12, 0.0, 0.5, 0.2, 0.25)]
    np.testing.assert_array_equal(got["LocationIndex"],
                                  np.concatenate([refs[0][0], refs[1][0] + m]))
    np.testing.assert_array_equal(got["ScoreIndex"],
                                  np.concatenate([refs[0][1], refs[1][1] + m]))
    np.testing.assert_array_equal(got["TargetLabel"][:, 0], refs[0][2] + refs[1][2])
    np.testing.assert_allclose(got["TargetBBox"], np.concatenate([refs[0][3], refs[1][3]]),
                               rtol=1e-6)
    np.testing.assert_array_equal(got["BBoxInsideWeight"][:, 0], refs[0][4] + refs[1][4])
    assert (got["TargetLabel"] == 1).sum() <= 2 * 3 and len(got["ScoreIndex"]) <= 24


def test_retinanet_target_assign():
    anchors = op("anchor_generator").forward(np.zeros((1, 1, 4, 4)), anchor_sizes=[16],
                                             aspect_ratios=[1.0], variances=[1.0] * 4,
                                             stride=[8.0, 8.0])["Anchors"].reshape(-1, 4)
    gt = np.array([[2, 3, 14, 18], [10, 8, 30, 28], [0, 0, 31, 31]], np.float64)
    labels = np.array([[3], [1], [2]], np.int32)
    crowd = np.array([[0], [0], [1]], np.int32)
    info = np.array([[32, 32, 1.0]])
    got = op("retinanet_target_assign").forward(anchors, gt, labels, crowd, info,
                                                positive_overlap=0.5, negative_overlap=0.3)
    g = gt[:2]
    ov = ref_iou(anchors, g, False)
    amax, aarg, gmax = ov.max(1), ov.argmax(1), ov.max(0)
    fg = [r for r in range(16) if amax[r] >= 0.5 or
          any(abs(ov[r, j] - gmax[j]) < 1e-5 for j in range(2))]
    bg = [r for r in range(16) if amax[r] < 0.3]
    fake = [fg[0] for r in bg if r in fg]
    fg_real = [r for r in fg if r not in bg]
    np.testing.assert_array_equal(got["LocationIndex"], fake + fg_real)
    np.testing.assert_array_equal(got["ScoreIndex"], fg_real + bg)
    np.testing.assert_array_equal(got["TargetLabel"][:, 0],
                                  [labels[aarg[r], 0] for r in fg_real] + [0] * len(bg))
    np.testing.assert_array_equal(got["ForegroundNumber"], [[len(fake) + len(fg_real) + 1]])
    assert got["TargetBBox"].shape == (len(fake) + len(fg_real), 4)


def test_generate_proposal_labels():
    rois = np.array([[0, 0, 20, 20], [5, 5, 30, 30], [40, 40, 60, 60], [1, 1, 21, 22],
                     [50, 0, 70, 15], [0, 30, 10, 60]], np.float64) * 2.0     # scale 2
    gt = np.array([[0, 0, 20, 21], [40, 38, 62, 60], [45, 0, 70, 20]], np.float64)
    cls = np.array([[3], [1], [2]], np.int32)
    crowd = np.array([[0], [0], [1]], np.int32)
    info = np.array([[128, 128, 2.0]])
    got = op("generate_proposal_labels").forward(
        rois, cls, crowd, gt, info, lod={"RpnRois": ((0, 6),), "GtClasses": ((0, 3),),
                                         "IsCrowd": ((0, 3),), "GtBoxes": ((0, 3),)},
        batch_size_per_im=6, fg_fraction=0.5, fg_thresh=0.5, bg_thresh_hi=0.5,
        bg_thresh_lo=0.0, class_nums=4, use_random=False)
    boxes = np.concatenate([gt, rois / 2.0])
    ov = ref_iou(boxes, gt, False)
    best = ov.max(1)
    best[2] = -1.0                                    # the crowd ground-truth row
    fg = [r for r in range(len(boxes)) if best[r] >= 0.5][:3]       # fluid: >= fg_thresh
    bg = [r for r in range(len(boxes)) if 0 <= best[r] < 0.5][:6 - len(fg)]
    np.testing.assert_allclose(got["Rois"], boxes[fg + bg] * 2.0)
    lab = [cls[int(np.argmax(ov[r])), 0] for r in fg] + [0] * len(bg)
    np.testing.assert_array_equal(got["LabelsInt32"][:, 0], lab)
    for k, r in enumerate(fg):
        e, t = boxes[r], gt[int(np.argmax(ov[r]))]
        ew, eh, tw, th = e[2] - e[0] + 1, e[3] - e[1] + 1, t[2] - t[0] + 1, t[3] - t[1] + 1
        d = np.array([(t[0] + tw / 2 - e[0] - ew / 2) / ew, (t[1] + th / 2 - e[1] - eh / 2) / eh,
                      np.log(tw / ew), np.log(th / eh)]) / [0.1, 0.1, 0.2, 0.2]
        c = 4 * lab[k]
        np.testing.assert_allclose(got["BboxTargets"][k, c:c + 4], d, rtol=1e-6, atol=1e-9)
        assert got["BboxInsideWeights"][k].sum() == 4
    assert got["BboxTargets"][len(fg):].sum() == 0
    assert got["lod"]["Rois"] == ((0, len(fg) + len(bg)),)


def test_generate_proposal_labels_cascade():
    """fluid 1.8's cascade mode: RpnRois starts with the ground truths at image scale (not
    divided by the scale, the crowd rule applies to them), rows of non-positive size
    (x2 - x1 + 1 <= 0) are skipped, a best IoU equal to fg_thresh is foreground, and every
    foreground / background row is kept."""
    gt = np.array([[0, 0, 20, 21], [40, 38, 62, 60]], np.float64)
    props = np.array([[0, 0, 40, 42], [80, 76, 124, 120], [10, 10, 8, 30],
                      [200, 200, 240, 240]], np.float64)          # at scale 2
    rpn = np.concatenate([gt, props])
    cls, crowd = np.array([[3], [1]], np.int32), np.array([[0], [1]], np.int32)
    got = op("generate_proposal_labels").forward(
        rpn, cls, crowd, gt, np.array([[128, 128, 2.0]]),
        lod={"RpnRois": ((0, 6),), "GtClasses": ((0, 2),), "IsCrowd": ((0, 2),),
             "GtBoxes": ((0, 2),)},
        batch_size_per_im=2, fg_fraction=0.5, fg_thresh=1.0, bg_thresh_hi=1.0,
        bg_thresh_lo=0.0, class_nums=4, use_random=False, is_cascade_rcnn=True)
    boxes = np.concatenate([gt, props / 2.0])
    # fg: gt row 0 (IoU exactly 1.0 = fg_thresh), scaled proposals 0 and 1 (IoU 1 with
    # gt 0 and 1); bg: the far box; the crowd row 1 and the inverted row 4 are dropped
    np.testing.assert_allclose(got["Rois"], boxes[[0, 2, 3, 5]] * 2.0)
    np.testing.assert_array_equal(got["LabelsInt32"][:, 0], [3, 3, 1, 0])


# -- generate_mask_labels -------------------------------------------------------------------------
def test_poly_to_mask_matches_pixel_centres():
    from fluidlite.ops.mask_labels import poly_to_mask
    rect = poly_to_mask([1, 1, 6, 1, 6, 5, 1, 5], 8, 8)
    ref = np.zeros((8, 8), np.uint8)
    ref[1:5, 1:6] = 1                      # pixel centres (x + .5, y + .5) inside the box
    np.testing.assert_array_equal(rect, ref)
    tri = poly_to_mask([0, 0, 7, 0, 0, 7], 8, 8)
    np.testing.assert_array_equal(tri, tri.T)            # symmetric in x and y
    assert tri[0, 0] == 1 and tri[7, 7] == 0 and 20 <= tri.sum() <= 28
    np.testing.assert_array_equal(poly_to_mask([2, 2, 2, 2, 5, 2, 5, 6, 2, 6], 8, 8)[2:6, 2:5],
                                  np.ones((4, 3), np.uint8))       # a repeated point is fine


def test_generate_mask_labels():
    from fluidlite.ops.mask_labels import polys_to_mask_wrt_box
    # image 0: two ground truths (the second is crowd); image 1: no foreground roi
    segms = np.array([[2, 2], [10, 2], [10, 8], [2, 8],            # gt 0, one polygon
                      [20, 20], [30, 20], [30, 30]], np.float64)   # gt 1 (crowd)
    segm_lod = ((0, 2, 3), (0, 1, 2, 3), (0, 4, 7, 7))
    cls = np.array([[2], [1], [1]], np.int32)
    crowd = np.array([[0], [1], [0]], np.int32)
    rois = np.array([[0, 0, 12, 10], [4, 4, 20, 16], [1, 1, 3, 3], [5, 5, 9, 9]], np.float64)
    labels = np.array([[2], [0], [0], [0]], np.int32)
    info = np.array([[32, 32, 2.0], [32, 32, 1.0]])
    got = op("generate_mask_labels").forward(
        info, cls, crowd, segms, rois, labels,
        lod={"GtSegms": segm_lod, "GtClasses": ((0, 2, 3),), "IsCrowd": ((0, 2, 3),),
             "Rois": ((0, 2, 4),), "LabelsInt32": ((0, 2, 4),)},
        num_classes=3, resolution=4)
    np.testing.assert_array_equal(got["RoiHasMaskInt32"][:, 0], [0, 0])
    np.testing.assert_allclose(got["MaskRois"], [rois[0], rois[2]])
    m = got["MaskInt32"]
    assert m.shape == (2, 3 * 16) and (m[1] == -1).all()
    exp = polys_to_mask_wrt_box([segms[:4].reshape(-1)], rois[0] / 2.0, 4)
    np.testing.assert_array_equal(m[0, 32:48], exp.reshape(-1))
    assert (m[0, :32] == -1).all() and exp.sum() > 0
    assert got["lod"]["MaskInt32"] == ((0, 1, 2),)


def test_yolov3_loss_ground_truth_gets_no_gradient():
    """fluid's grad maker writes X@GRAD only: GTBox / GTScore requiring a gradient get none
    (before: KeyError 'GTBox' in yolov3_loss_grad)."""
    from tests.ops.test_roi import grads_with_everything_requested
    x = OpTest.rand(1, 2 * 8, 4, 4, low=-1.5, high=1.5)
    gt = np.array([[[0.3, 0.4, 0.08, 0.12], [0.7, 0.6, 0.25, 0.3]]])
    got = grads_with_everything_requested(
        "yolov3_loss", {"X": x, "GTBox": gt, "GTLabel": np.array([[0, 2]], np.int32),
                        "GTScore": np.array([[0.9, 0.6]])},
        {"anchors": [10, 13, 16, 30, 33, 23], "anchor_mask": [0, 1], "class_num": 3,
         "downsample_ratio": 8}, "Loss")
    assert got["GTBox"] is None and got["GTScore"] is None
    assert got["X"].shape == x.shape and np.abs(got["X"]).sum() > 0
