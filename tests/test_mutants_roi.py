"""Tests written from the sampled mutation run of ``fluidlite/ops/roi.py`` (issue 28,
docs/mutation.md): roi_align's sample at exactly -1, roi_pool and psroi_pool with a
``spatial_scale`` other than 1 and ROIs partly outside the map, psroi_pool's LoD and checks,
prroi_pool's box gradient alone, deformable_psroi_pooling's geometry (scale, edges, classes of
Trans, TopCount) and roi_perspective_transform's masks, taps, LoD and gradient. References:
float64 loops written here from fluid 1.8's kernels (roi_align_op.h, roi_pool_op.h,
psroi_pool_op.h, deformable_psroi_pooling_op.h) and exact finite differences of the (linear)
forward passes."""
import math

import numpy as np
import pytest

from fluidlite.core.registry import VarSpec, get_op_def


def op(name):
    return get_op_def(name)


def rnd(v):
    """C's round (halves away from zero)."""
    return math.floor(v + 0.5) if v >= 0 else -math.floor(-v + 0.5)


def linear_grad(forward, x, dout):
    """J^T dout of a forward linear in x, by exact unit perturbations."""
    base = forward(np.zeros_like(x))
    g = np.zeros_like(x)
    flat = g.reshape(-1)
    for k in range(x.size):
        e = np.zeros_like(x)
        e.reshape(-1)[k] = 1.0
        flat[k] = np.sum((forward(e) - base) * dout)
    return g


# -- roi_align ------------------------------------------------------------------------------------
def test_roi_align_sample_at_exactly_minus_one_reads_the_border():
    """roi_align_op.h: a sample is dropped only when y < -1 or x < -1; at -1 it clamps to 0."""
    # random (not linear) values: an average of rows 0.5 and 1.5 would not give row 1
    x = np.random.default_rng(71).uniform(-1, 1, (1, 2, 3, 4))
    rois = np.array([[-3.0, 0.0, 1.0, 2.0]])          # x sample -3 + 4 / 2 = -1, y sample 1
    got = op("roi_align").forward(x, rois, pooled_height=1, pooled_width=1,
                                  sampling_ratio=1)["Out"]
    np.testing.assert_array_equal(got[0, :, 0, 0], x[0, :, 1, 0])


def test_roi_specs_accept_one_by_one_bins_and_name_the_op():
    X, R = VarSpec([1, 2, 5, 5], "float32"), VarSpec([3, 4], "float32")
    for name in ("roi_align", "roi_pool"):
        assert list(op(name).infer(X, R, pooled_height=1, pooled_width=1)["Out"].shape) == \
            [3, 2, 1, 1]
    with pytest.raises(ValueError, match="roi_align: ROIs must be"):
        op("roi_align").infer(X, VarSpec([3, 5], "float32"))


# -- roi_pool -------------------------------------------------------------------------------------
def ref_roi_pool(x, rois, scale, ph, pw):
    R, (N, C, H, W) = len(rois), x.shape
    out, arg = np.zeros((R, C, ph, pw)), np.full((R, C, ph, pw), -1)
    for r, roi in enumerate(rois):
        x1, y1, x2, y2 = (rnd(v * scale) for v in roi)
        rh, rw = max(y2 - y1 + 1, 1), max(x2 - x1 + 1, 1)
        bh, bw = rh / ph, rw / pw
        for i in range(ph):
            for j in range(pw):
                hs = min(max(math.floor(i * bh) + y1, 0), H)
                he = min(max(math.ceil((i + 1) * bh) + y1, 0), H)
                ws = min(max(math.floor(j * bw) + x1, 0), W)
                we = min(max(math.ceil((j + 1) * bw) + x1, 0), W)
                for c in range(C):
                    best, where = -np.inf, -1
                    for h in range(hs, he):
                        for w in range(ws, we):
                            if x[0, c, h, w] > best:
                                best, where = x[0, c, h, w], h * W + w
                    if where >= 0:
                        out[r, c, i, j], arg[r, c, i, j] = best, where
    return out, arg


def test_roi_pool_scales_the_rois():
    x = np.random.default_rng(3).permutation(2 * 8 * 8).reshape(1, 2, 8, 8).astype(np.float64)
    rois = np.array([[2.0, 4.0, 11.0, 13.0], [-6.0, 0.0, 5.0, 3.0]])
    got = op("roi_pool").forward(x, rois, spatial_scale=0.5, pooled_height=2, pooled_width=3)
    out, arg = ref_roi_pool(x, rois, 0.5, 2, 3)
    np.testing.assert_array_equal(got["Out"], out)
    np.testing.assert_array_equal(got["Argmax"], arg)


def test_roi_pool_backward_checks_the_lod_naming_the_op():
    x, rois = np.zeros((1, 1, 4, 4)), np.array([[0.0, 0.0, 1.0, 1.0]])
    arg, d = np.zeros((1, 1, 1, 1), np.int64), np.ones((1, 1, 1, 1))
    with pytest.raises(ValueError, match="roi_pool: the ROIs' LoD"):
        op("roi_pool").backward(x, rois, None, None, arg, d, lod={"ROIs": ((0, 2),)})


# -- psroi_pool -----------------------------------------------------------------------------------
def ref_psroi(x, rois, bids, oc, scale, ph, pw):
    H, W = x.shape[2:]
    out = np.zeros((len(rois), oc, ph, pw))
    for r, roi in enumerate(rois):
        x1, y1 = rnd(roi[0]) * scale, rnd(roi[1]) * scale
        x2, y2 = (rnd(roi[2]) + 1.0) * scale, (rnd(roi[3]) + 1.0) * scale
        rh, rw = max(y2 - y1, 0.1), max(x2 - x1, 0.1)
        bh, bw = rh / ph, rw / pw
        for i in range(ph):
            for j in range(pw):
                hs = min(max(math.floor(bh * i + y1), 0), H)
                he = min(max(math.ceil(bh * (i + 1) + y1), 0), H)
                ws = min(max(math.floor(bw * j + x1), 0), W)
                we = min(max(math.ceil(bw * (j + 1) + x1), 0), W)
                if he <= hs or we <= ws:
                    continue
                for c in range(oc):
                    win = x[bids[r], (c * ph + i) * pw + j, hs:he, ws:we]
                    out[r, c, i, j] = win.sum() / ((he - hs) * (we - ws))
    return out


def test_psroi_pool_small_scale_lod_and_partly_outside_rois():
    rng = np.random.default_rng(5)
    x = rng.uniform(-1, 1, (2, 2 * 2 * 2, 6, 6))
    # a ROI 1.0 pixel wide after the scale (its last bin ends at ceil(2.0), not ceil(2.1));
    # one sticking out on the left (its first bin column is empty); three ROIs, two images
    rois = np.array([[10.0, 10.0, 19.0, 29.0], [-30.0, 0.0, 9.0, 9.0], [0.0, 0.0, 50.0, 50.0],
                     [0.0, -30.0, 30.0, 20.0]])         # above the map: clipped row starts
    lod = {"ROIs": ((0, 2, 4),)}
    attrs = dict(output_channels=2, spatial_scale=0.1, pooled_height=2, pooled_width=2)
    got = op("psroi_pool").forward(x, rois, lod=lod, **attrs)["Out"]
    np.testing.assert_allclose(got, ref_psroi(x, rois, [0, 0, 1, 1], 2, 0.1, 2, 2), rtol=1e-12)
    dout = rng.uniform(-1, 1, got.shape)
    want = linear_grad(lambda v: op("psroi_pool").forward(v, rois, lod=lod, **attrs)["Out"],
                       x, dout)
    np.testing.assert_allclose(op("psroi_pool").backward(x, rois, None, dout, lod=lod, **attrs)["X"],
                               want, rtol=1e-10, atol=1e-12)


def test_psroi_pool_defaults_and_checks():
    x = np.arange(16, dtype=np.float64).reshape(1, 1, 4, 4)
    got = op("psroi_pool").forward(x, np.array([[0.0, 0.0, 1.0, 1.0]]))["Out"]
    np.testing.assert_allclose(got, [[[[x[0, 0, :2, :2].mean()]]]])
    R = VarSpec([3, 4], "float32")
    with pytest.raises(ValueError, match=r"psroi_pool: the input channels \(0\) must equal "
                                         r"output_channels \* pooled_height \* pooled_width = 8"):
        op("psroi_pool").infer(VarSpec([1, 0, 4, 4], "float32"), R, output_channels=2,
                               pooled_height=2, pooled_width=2)


# -- prroi_pool -----------------------------------------------------------------------------------
def test_prroi_pool_box_gradient_alone():
    rng = np.random.default_rng(9)
    x = rng.uniform(-1, 1, (1, 2, 5, 6))
    rois = np.array([[0.7, 1.2, 4.1, 3.9]])
    attrs = dict(spatial_scale=1.0, pooled_height=2, pooled_width=2)
    dout = rng.uniform(-1, 1, (1, 2, 2, 2))
    got = op("prroi_pool").backward(x, rois, None, dout, wanted=("ROIs",), **attrs)
    assert "ROIs" in got
    eps, num = 1e-6, np.zeros(4)
    for k in range(4):
        e = np.zeros_like(rois)
        e[0, k] = eps
        f = lambda r: np.sum(op("prroi_pool").forward(x, r, **attrs)["Out"] * dout)  # noqa
        num[k] = (f(rois + e) - f(rois - e)) / (2 * eps)
    np.testing.assert_allclose(got["ROIs"][0], num, rtol=1e-5, atol=1e-8)
    out = op("prroi_pool").forward(x, rois)["Out"]                   # default 1 x 1 bins
    assert out.shape == (1, 2, 1, 1)


# -- deformable_psroi_pooling ---------------------------------------------------------------------
def ref_deformable(x, rois, trans, no_trans, scale, od, group, ph, pw, part, spp, std):
    """deformable_psroi_pooling_op.h's forward, one image."""
    H, W = x.shape[2:]
    out, cnt = np.zeros((len(rois), od, ph, pw)), np.zeros((len(rois), od, ph, pw))
    n_cls = 1 if no_trans else trans.shape[1] // 2
    each = od if no_trans else od // n_cls
    for r, roi in enumerate(rois):
        sw, sh = rnd(roi[0]) * scale - 0.5, rnd(roi[1]) * scale - 0.5
        rw = max((rnd(roi[2]) + 1.0) * scale - 0.5 - sw, 0.1)
        rh = max((rnd(roi[3]) + 1.0) * scale - 0.5 - sh, 0.1)
        bw, bh = rw / pw, rh / ph
        for c in range(od):
            cls = min(c // each, n_cls - 1)
            for i in range(ph):
                for j in range(pw):
                    p_h, p_w = math.floor(i / ph * part[0]), math.floor(j / pw * part[1])
                    tx = 0.0 if no_trans else trans[r, 2 * cls, p_h, p_w] * std
                    ty = 0.0 if no_trans else trans[r, 2 * cls + 1, p_h, p_w] * std
                    w0, h0 = j * bw + sw + tx * rw, i * bh + sh + ty * rh
                    gi = min(max(math.floor(i * group[0] / ph), 0), group[0] - 1)
                    gj = min(max(math.floor(j * group[1] / pw), 0), group[1] - 1)
                    ch = (c * group[0] + gi) * group[1] + gj
                    s, n = 0.0, 0
                    for ih in range(spp):
                        for iw in range(spp):
                            w, h = w0 + iw * bw / spp, h0 + ih * bh / spp
                            if w < -0.5 or w > W - 0.5 or h < -0.5 or h > H - 0.5:
                                continue
                            w, h = min(max(w, 0.0), W - 1.0), min(max(h, 0.0), H - 1.0)
                            x1, x2, y1, y2 = (math.floor(w), math.ceil(w), math.floor(h),
                                              math.ceil(h))
                            dx, dy = w - x1, h - y1
                            img = x[0, ch]
                            s += ((1 - dx) * (1 - dy) * img[y1, x1] + (1 - dx) * dy * img[y2, x1]
                                  + dx * (1 - dy) * img[y1, x2] + dx * dy * img[y2, x2])
                            n += 1
                    out[r, c, i, j] = s / n if n else 0.0
                    cnt[r, c, i, j] = n
    return out, cnt


@pytest.mark.parametrize("case", ["scaled", "edges", "classes", "one_sample"])
def test_deformable_psroi_pooling_against_the_kernel_loop(case):
    rng = np.random.default_rng(13)
    attrs = dict(no_trans=False, spatial_scale=1.0, output_dim=2, group_size=[1, 1],
                 pooled_height=2, pooled_width=2, part_size=[2, 2], sample_per_part=2,
                 trans_std=0.1)
    rois = np.array([[1.0, 1.0, 5.0, 6.0]])
    if case == "scaled":           # samples beyond the map when the scale is inverted
        attrs.update(spatial_scale=0.5, no_trans=True)
        rois = np.array([[2.0, 2.0, 9.0, 9.0]])
    elif case == "edges":          # samples at h = -1.5 (dropped), in [-0.5, 0) and in
        # (H - 1, H - 0.5] (clamped), and a ROI outside the map (no sample: 0)
        attrs.update(no_trans=True, sample_per_part=4)
        rois = np.array([[0.0, -1.0, 4.0, 4.0], [0.0, 0.0, 3.0, 2.0], [0.0, 4.0, 3.0, 8.0],
                         [20.0, 20.0, 24.0, 24.0],
                         [4.0, 0.0, 11.0, 3.0]])          # samples at w = 6.5 and 7.5
    elif case == "classes":        # 2 classes in Trans, 3 output channels, odd part size
        attrs.update(output_dim=3, part_size=[3, 3], pooled_height=3, pooled_width=3)
    else:                          # one sample per bin: counts of 1 keep their value
        attrs.update(sample_per_part=1, no_trans=True)
    n_cls = 2 if case == "classes" else 1
    x = rng.uniform(-1, 1, (1, attrs["output_dim"], 8, 8))
    trans = rng.uniform(-1, 1, (len(rois), 2 * n_cls, attrs["part_size"][0],
                                attrs["part_size"][1]))
    got = op("deformable_psroi_pooling").forward(x, rois, trans, **attrs)
    out, cnt = ref_deformable(x, rois, trans, attrs["no_trans"], attrs["spatial_scale"],
                              attrs["output_dim"], attrs["group_size"], attrs["pooled_height"],
                              attrs["pooled_width"], attrs["part_size"],
                              attrs["sample_per_part"], attrs["trans_std"])
    np.testing.assert_allclose(got["Output"], out, rtol=1e-12, atol=1e-14)
    np.testing.assert_array_equal(got["TopCount"], cnt)


def test_deformable_psroi_pooling_sample_per_part_message():
    with pytest.raises(ValueError, match="deformable_psroi_pooling: sample_per_part must be "
                                         ">= 1, got 0"):
        op("deformable_psroi_pooling").infer(VarSpec([1, 1, 4, 4], "float32"),
                                             VarSpec([1, 4], "float32"),
                                             VarSpec([1, 2, 1, 1], "float32"),
                                             sample_per_part=0)


# -- roi_perspective_transform --------------------------------------------------------------------
def test_roi_perspective_transform_masks_rows_below_the_map():
    """A rectangle quad 4 wide and 8 high maps output (x, y) to input (x, y): rows 0..3 read
    X, rows 4..7 (y > H - 0.5) are outside the map."""
    x = np.arange(1 * 2 * 4 * 4, dtype=np.float64).reshape(1, 2, 4, 4)
    quad = np.array([[0.0, 0.0, 3.0, 0.0, 3.0, 7.0, 0.0, 7.0]])
    got = op("roi_perspective_transform").forward(x, quad, transformed_height=8,
                                                  transformed_width=4)
    np.testing.assert_array_equal(got["Mask"][0, 0], [[1] * 4] * 4 + [[0] * 4] * 4)
    np.testing.assert_allclose(got["Out"][0, :, :4], x[0], atol=1e-9)
    np.testing.assert_array_equal(got["Out"][0, :, 4:], 0)


def test_roi_perspective_transform_taps_lod_and_gradient_over_two_images():
    rng = np.random.default_rng(17)
    x = rng.uniform(-1, 1, (2, 2, 5, 6))
    quads = np.array([[0.5, 0.2, 4.6, 0.8, 4.1, 3.9, 0.2, 3.5],
                      [1.0, 1.0, 5.0, 0.5, 5.2, 4.4, 0.8, 4.0]])
    lod = {"ROIs": ((0, 1, 2),)}
    attrs = dict(transformed_height=3, transformed_width=4)
    got = op("roi_perspective_transform").forward(x, quads, lod=lod, **attrs)
    assert got["lod"] == {"Out": lod["ROIs"], "Mask": lod["ROIs"],
                          "TransformMatrix": lod["ROIs"]}
    idx, wts = got["Out2InIdx"], got["Out2InWeights"]
    flat = x.reshape(-1)
    via_taps = np.where(idx >= 0, flat[np.maximum(idx, 0)] * wts, 0.0).sum(axis=1)
    np.testing.assert_allclose(via_taps, got["Out"].reshape(-1), rtol=1e-12, atol=1e-12)
    # the second quad reads image 1 only
    alone = op("roi_perspective_transform").forward(x[1:], quads[1:], **attrs)["Out"]
    np.testing.assert_allclose(got["Out"][1], alone[0], rtol=1e-12)
    dout = rng.uniform(-1, 1, got["Out"].shape)
    want = linear_grad(lambda v: op("roi_perspective_transform").forward(
        v, quads, lod=lod, **attrs)["Out"], x, dout)
    np.testing.assert_allclose(op("roi_perspective_transform").backward(
        x, quads, dout, lod=lod, **attrs)["X"], want, rtol=1e-10, atol=1e-12)


def test_roi_perspective_transform_build_time_checks_and_spec():
    rp = op("roi_perspective_transform")
    X, R = VarSpec([1, 2, 5, 6], "float32"), VarSpec([3, 8], "float32", 1)
    assert rp.infer(X, R, transformed_height=2, transformed_width=3)["Out"].lod_level == 1
    with pytest.raises(ValueError, match="roi_perspective_transform: X must be 4-D"):
        rp.infer(VarSpec([2, 5, 6], "float32"), R)
    with pytest.raises(ValueError, match="roi_perspective_transform: ROIs must be"):
        rp.infer(X, VarSpec([3, 4], "float32"))
    with pytest.raises(ValueError, match="transformed_height and transformed_width must be > 0"):
        rp.infer(X, R, transformed_height=0, transformed_width=3)


# -- second sample (seed 40) ----------------------------------------------------------------------
def test_roi_lod_checks_name_the_op_and_count_images():
    x, rois = np.zeros((1, 1, 4, 4)), np.array([[0.0, 0.0, 1.0, 1.0], [1.0, 1.0, 2.0, 2.0]])
    with pytest.raises(ValueError, match="roi_pool: the ROIs' LoD has 2 images but the input "
                                         "batch has 1"):
        op("roi_pool").forward(x, rois, lod={"ROIs": ((0, 1, 2),)})
    with pytest.raises(ValueError, match=r"psroi_pool: the input channels \(1\) must equal "
                                         r"output_channels \* pooled_height \* pooled_width = 8"):
        op("psroi_pool").forward(x, rois, output_channels=2, pooled_height=2, pooled_width=2)
    with pytest.raises(ValueError, match=r"deformable_psroi_pooling: Input has 1 channels but "
                                         r"output_dim \* group_size = 8"):
        op("deformable_psroi_pooling").forward(x, rois, np.zeros((2, 2, 1, 1)), output_dim=2,
                                               group_size=[2, 2])
    spec = op("deformable_psroi_pooling").infer(VarSpec([1, 1, 4, 4], "float32"),
                                                VarSpec([2, 4], "float32"),
                                                VarSpec([2, 2, 1, 1], "float32"))
    assert set(spec) == {"Output", "TopCount"}


def test_roi_align_gradient_over_two_images():
    rng = np.random.default_rng(19)
    x = rng.uniform(-1, 1, (2, 2, 5, 5))
    rois = np.array([[0.5, 0.5, 3.2, 3.7], [1.0, 0.2, 4.1, 2.9]])
    lod = {"ROIs": ((0, 1, 2),)}
    attrs = dict(pooled_height=2, pooled_width=2, sampling_ratio=2)
    dout = rng.uniform(-1, 1, (2, 2, 2, 2))
    want = linear_grad(lambda v: op("roi_align").forward(v, rois, lod=lod, **attrs)["Out"],
                       x, dout)
    got = op("roi_align").backward(x, rois, None, None, dout, lod=lod, **attrs)["X"]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_float32_gradients_stay_float32():
    rng = np.random.default_rng(23)
    x = rng.uniform(-1, 1, (1, 1, 6, 6)).astype(np.float32)
    rois = np.array([[0.0, 0.0, 4.0, 4.0]], np.float32)
    trans = np.zeros((1, 2, 1, 1), np.float32)
    d = np.ones((1, 1, 1, 1), np.float32)
    fwd = op("deformable_psroi_pooling").forward(x, rois, trans)
    g = op("deformable_psroi_pooling").backward(x, rois, trans, fwd["TopCount"], d)
    assert g["Input"].dtype == np.float32 and g["Trans"].dtype == np.float32
    quad = np.array([[0.0, 0.0, 4.0, 0.0, 4.0, 4.0, 0.0, 4.0]], np.float32)
    g = op("roi_perspective_transform").backward(x, quad, np.ones((1, 1, 2, 2), np.float32),
                                                 transformed_height=2, transformed_width=2)
    assert g["X"].dtype == np.float32


def test_roi_perspective_transform_width_two_and_columns_right_of_the_map():
    x = np.arange(1 * 1 * 4 * 4, dtype=np.float64).reshape(1, 1, 4, 4)
    # a 4 x 4 square warped to 2 columns: output x 0 and 1 read input columns 0 and 3
    sq = np.array([[0.0, 0.0, 3.0, 0.0, 3.0, 3.0, 0.0, 3.0]])
    got = op("roi_perspective_transform").forward(x, sq, transformed_height=4,
                                                  transformed_width=2)
    np.testing.assert_allclose(got["Out"][0, 0], x[0, 0][:, [0, 3]], atol=1e-9)
    # a quad 8 wide over a map 4 wide: columns x >= 3.5 are outside
    wide = np.array([[0.0, 0.0, 7.0, 0.0, 7.0, 3.0, 0.0, 3.0]])
    got = op("roi_perspective_transform").forward(x, wide, transformed_height=4,
                                                  transformed_width=8)
    np.testing.assert_array_equal(got["Mask"][0, 0], [[1] * 4 + [0] * 4] * 4)
    spec = op("roi_perspective_transform").infer(VarSpec([1, 2, -1, 6], "float32"),
                                                 VarSpec([3, 8], "float32"),
                                                 transformed_height=2, transformed_width=3)
    assert list(spec["Out2InWeights"].shape) == [36, 4]
    assert list(spec["Out2InIdx"].shape) == [36, 4]


# -- third sample (seed 41) -----------------------------------------------------------------------
def test_roi_pool_gradient_through_a_program_keeps_its_attributes():
    """The grad op gets the forward's attributes (2 x 2 bins, scale 0.5), not the defaults."""
    from tests.ops.test_roi import grads_with_everything_requested
    rng = np.random.default_rng(61)
    x = rng.permutation(2 * 6 * 7).reshape(1, 2, 6, 7).astype(np.float64)
    rois = np.array([[1.0, 2.0, 9.0, 10.0]])
    attrs = {"pooled_height": 2, "pooled_width": 2, "spatial_scale": 0.5}
    got = grads_with_everything_requested("roi_pool", {"X": x, "ROIs": rois}, attrs, "Out")
    want = linear_grad(lambda v: op("roi_pool").forward(x + 1e-3 * v, rois, **attrs)["Out"]
                       * 1e3, np.zeros_like(x), np.ones((1, 2, 2, 2)))
    np.testing.assert_allclose(got["X"], want, atol=1e-6)


def test_prroi_pool_gradient_over_two_images():
    rng = np.random.default_rng(67)
    x = rng.uniform(-1, 1, (2, 2, 5, 6))
    rois = np.array([[0.7, 1.2, 4.1, 3.9], [1.1, 0.3, 3.6, 4.2]])
    lod = {"ROIs": ((0, 1, 2),)}
    attrs = dict(pooled_height=2, pooled_width=2)
    dout = rng.uniform(-1, 1, (2, 2, 2, 2))
    want = linear_grad(lambda v: op("prroi_pool").forward(v, rois, lod=lod, **attrs)["Out"],
                       x, dout)
    got = op("prroi_pool").backward(x, rois, None, dout, lod=lod, **attrs)["X"]
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_roi_perspective_transform_height_two_and_unknown_or_zero_rois():
    x = np.arange(16, dtype=np.float64).reshape(1, 1, 4, 4)
    sq = np.array([[0.0, 0.0, 3.0, 0.0, 3.0, 3.0, 0.0, 3.0]])
    got = op("roi_perspective_transform").forward(x, sq, transformed_height=2,
                                                  transformed_width=2)["Out"]
    np.testing.assert_allclose(got[0, 0], [[0.0, 3.0], [12.0, 15.0]], atol=1e-9)
    rp = op("roi_perspective_transform")
    X = VarSpec([1, 2, 5, 6], "float32")
    for r, n in ((-1, -1), (0, 0)):
        spec = rp.infer(X, VarSpec([r, 8], "float32", 1), transformed_height=2,
                        transformed_width=3)
        assert list(spec["Out2InWeights"].shape) == [n, 4]
        assert list(spec["Out2InIdx"].shape) == [n, 4]
        assert spec["Mask"].lod_level == 1


# -- fourth sample (seed 42) ----------------------------------------------------------------------
def test_fourth_sample_messages():
    dp = op("deformable_psroi_pooling")
    x, r = VarSpec([1, 1, 4, 4], "float32"), VarSpec([2, 4], "float32")
    with pytest.raises(ValueError, match="deformable_psroi_pooling: part_size must be 2 "
                                         "positive ints"):
        dp.infer(x, r, VarSpec([2, 2, 1, 1], "float32"), part_size=[0, 1])
    with pytest.raises(ValueError, match=r"deformable_psroi_pooling: Trans must be "
                                         r"\[num_rois, 2\*num_classes, part_h, part_w\]"):
        dp.infer(x, r, VarSpec([2, 3, 1, 1], "float32"))
    with pytest.raises(ValueError, match="roi_perspective_transform: the ROIs' LoD"):
        op("roi_perspective_transform").backward(
            np.zeros((1, 1, 4, 4)), np.zeros((1, 8)), np.zeros((1, 1, 1, 1)),
            lod={"ROIs": ((0, 2),)})
