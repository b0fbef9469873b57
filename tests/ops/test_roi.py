"""ROI ops (fluidlite/ops/roi.py): roi_align, roi_pool, psroi_pool against per-sample loop
references written from fluid's kernels, numeric float64 gradients, ROI-to-image mapping by
RoisLod and by LoD, and argument errors."""
import numpy as np
import pytest

from fluidlite.core.registry import VarSpec, get_op_def
from fluidlite.testing import OpTest


def c_round(v):
    return np.sign(v) * np.floor(abs(v) + 0.5)


def bilinear(img, y, x):
    """fluid's roi_align sample of img [C, H, W] at (y, x)."""
    C, H, W = img.shape
    if y < -1.0 or y > H or x < -1.0 or x > W:
        return np.zeros(C)
    y, x = max(y, 0.0), max(x, 0.0)
    yl, xl = int(y), int(x)
    if yl >= H - 1:
        yh = yl = H - 1
        y = float(yl)
    else:
        yh = yl + 1
    if xl >= W - 1:
        xh = xl = W - 1
        x = float(xl)
    else:
        xh = xl + 1
    ly, lx = y - yl, x - xl
    hy, hx = 1 - ly, 1 - lx
    return (hy * hx * img[:, yl, xl] + hy * lx * img[:, yl, xh] + ly * hx * img[:, yh, xl]
            + ly * lx * img[:, yh, xh])


def ref_roi_align(x, rois, bid, scale, ph, pw, ratio):
    out = np.zeros((len(rois), x.shape[1], ph, pw))
    for r, roi in enumerate(rois):
        x1, y1, x2, y2 = roi * scale
        rw, rh = max(x2 - x1, 1.0), max(y2 - y1, 1.0)
        bh, bw = rh / ph, rw / pw
        gh = ratio if ratio > 0 else int(np.ceil(rh / ph))
        gw = ratio if ratio > 0 else int(np.ceil(rw / pw))
        for i in range(ph):
            for j in range(pw):
                acc = 0.0
                for iy in range(gh):
                    yy = y1 + i * bh + (iy + 0.5) * bh / gh
                    for ix in range(gw):
                        xx = x1 + j * bw + (ix + 0.5) * bw / gw
                        acc = acc + bilinear(x[bid[r]], yy, xx)
                out[r, :, i, j] = acc / (gh * gw)
    return out


ROIS = np.array([[0.5, 0.8, 5.2, 4.1], [2.3, 1.1, 7.7, 5.9], [-1.2, 3.3, 2.6, 9.4],
                 [4.0, 4.0, 4.5, 4.4]])
LOD = np.array([0, 2, 4], np.int32)          # ROIs 0-1 -> image 0, 2-3 -> image 1


class TestRoiAlign(OpTest):
    op_type = "roi_align"

    @pytest.mark.parametrize("scale,ratio", [(1.0, 2), (0.5, -1)])
    def test_align(self, scale, ratio):
        x = self.rand(2, 3, 6, 7)
        self.inputs = {"X": x, "ROIs": ROIS, "RoisLod": LOD}
        self.attrs = {"spatial_scale": scale, "pooled_height": 2, "pooled_width": 3,
                      "sampling_ratio": ratio}
        self.outputs = {"Out": ref_roi_align(x, ROIS, [0, 0, 1, 1], scale, 2, 3, ratio)}
        self.check_infer()
        self.check_output()
        self.check_grad(["X"], "Out", weighted=True)

    def test_lod_maps_rois(self):
        x = self.rand(2, 2, 5, 5)
        out = get_op_def("roi_align").forward(x, ROIS, lod={"ROIs": ((0, 1, 4),)},
                                              pooled_height=2, pooled_width=2,
                                              sampling_ratio=2)["Out"]
        np.testing.assert_allclose(out, ref_roi_align(x, ROIS, [0, 1, 1, 1], 1.0, 2, 2, 2))


def ref_roi_pool(x, rois, bid, scale, ph, pw):
    R, (_N, C, H, W) = len(rois), x.shape
    out = np.zeros((R, C, ph, pw))
    arg = -np.ones((R, C, ph, pw), np.int64)
    for r, roi in enumerate(rois):
        x1, y1, x2, y2 = (c_round(v * scale) for v in roi)
        rh, rw = max(y2 - y1 + 1, 1), max(x2 - x1 + 1, 1)
        bh, bw = rh / ph, rw / pw
        for i in range(ph):
            for j in range(pw):
                hs = int(min(max(np.floor(i * bh) + y1, 0), H))
                he = int(min(max(np.ceil((i + 1) * bh) + y1, 0), H))
                ws = int(min(max(np.floor(j * bw) + x1, 0), W))
                we = int(min(max(np.ceil((j + 1) * bw) + x1, 0), W))
                if he <= hs or we <= ws:
                    continue
                for c in range(C):
                    best, where = -np.inf, -1
                    for h in range(hs, he):
                        for w in range(ws, we):
                            if x[bid[r], c, h, w] > best:
                                best, where = x[bid[r], c, h, w], h * W + w
                    out[r, c, i, j], arg[r, c, i, j] = best, where
    return out, arg


class TestRoiPool(OpTest):
    op_type = "roi_pool"

    def test_pool(self):
        n = 2 * 3 * 6 * 7
        x = np.random.default_rng(0).permutation(n).reshape(2, 3, 6, 7) * 0.01
        self.inputs = {"X": x, "ROIs": ROIS, "RoisLod": LOD}
        self.attrs = {"spatial_scale": 1.0, "pooled_height": 2, "pooled_width": 2}
        out, arg = ref_roi_pool(x, ROIS, [0, 0, 1, 1], 1.0, 2, 2)
        self.outputs = {"Out": out, "Argmax": arg}
        self.check_infer()
        self.check_output()
        self.check_grad(["X"], "Out", weighted=True)


def ref_psroi(x, rois, bid, oc, scale, ph, pw):
    N, C, H, W = x.shape
    out = np.zeros((len(rois), oc, ph, pw))
    for r, roi in enumerate(rois):
        rr = [c_round(v) for v in roi]
        x1, y1 = rr[0] * scale, rr[1] * scale
        x2, y2 = (rr[2] + 1) * scale, (rr[3] + 1) * scale
        rh, rw = max(y2 - y1, 0.1), max(x2 - x1, 0.1)
        bh, bw = rh / ph, rw / pw
        for c in range(oc):
            for i in range(ph):
                for j in range(pw):
                    hs = int(min(max(np.floor(bh * i + y1), 0), H))
                    he = int(min(max(np.ceil(bh * (i + 1) + y1), 0), H))
                    ws = int(min(max(np.floor(bw * j + x1), 0), W))
                    we = int(min(max(np.ceil(bw * (j + 1) + x1), 0), W))
                    if he <= hs or we <= ws:
                        continue
                    ch = (c * ph + i) * pw + j
                    out[r, c, i, j] = x[bid[r], ch, hs:he, ws:we].mean()
    return out


class TestPsroiPool(OpTest):
    op_type = "psroi_pool"

    def test_psroi(self):
        x = self.rand(1, 2 * 2 * 3, 6, 7)
        self.inputs = {"X": x, "ROIs": ROIS}
        self.attrs = {"output_channels": 2, "spatial_scale": 0.8, "pooled_height": 2,
                      "pooled_width": 3}
        self.outputs = {"Out": ref_psroi(x, ROIS, [0] * 4, 2, 0.8, 2, 3)}
        self.check_infer()
        self.check_output()
        self.check_grad(["X"], "Out", weighted=True)


def test_roi_errors():
    x, rois = VarSpec([1, 6, 4, 4], "float32"), VarSpec([3, 4], "float32")
    with pytest.raises(ValueError, match="output_channels"):
        get_op_def("psroi_pool").infer(x, rois, output_channels=2, pooled_height=2,
                                       pooled_width=2)
    with pytest.raises(ValueError, match="ROIs must be"):
        get_op_def("roi_align").infer(x, VarSpec([3, 5], "float32"))
    with pytest.raises(ValueError, match="pooled_height"):
        get_op_def("roi_pool").infer(x, rois, pooled_height=0)
    with pytest.raises(ValueError, match="does not cover"):
        get_op_def("roi_align").forward(np.zeros((2, 1, 4, 4)), np.zeros((3, 4)),
                                        RoisLod=np.array([0, 1, 2]))


def ref_prroi(x, rois, bid, scale, ph, pw, steps=400):
    """Numerical integration (midpoint rule, fine grid) of fluid's bilinear interpolant with
    zero outside the map, per channel (fluid 1.8's prroi_pool is not position-sensitive)."""
    N, C, H, W = x.shape

    def interp(img, yy, xx):
        y0, x0 = np.floor(yy).astype(int), np.floor(xx).astype(int)
        val = 0.0
        for dy in (0, 1):
            for dx in (0, 1):
                yi, xi = y0 + dy, x0 + dx
                wgt = (1 - np.abs(yy - yi)) * (1 - np.abs(xx - xi))
                ok = (yi >= 0) & (yi < H) & (xi >= 0) & (xi < W)
                val = val + np.where(ok, img[np.clip(yi, 0, H - 1), np.clip(xi, 0, W - 1)], 0) \
                    * wgt
        return val

    out = np.zeros((len(rois), C, ph, pw))
    for r, roi in enumerate(rois):
        x1, y1, x2, y2 = roi * scale
        bw, bh = max(x2 - x1, 0) / pw, max(y2 - y1, 0) / ph
        for c in range(C):
            for i in range(ph):
                for j in range(pw):
                    if bw * bh == 0:
                        continue
                    t = (np.arange(steps) + 0.5) / steps
                    yy = (y1 + i * bh + t * bh)[:, None]
                    xx = (x1 + j * bw + t * bw)[None, :]
                    img = x[bid[r], c]
                    out[r, c, i, j] = interp(img, yy, xx).mean()
    return out


class TestPrroiPool(OpTest):
    op_type = "prroi_pool"

    def test_prroi(self):
        x = self.rand(2, 3, 5, 6)
        rois = np.array([[0.3, 0.7, 4.2, 3.9], [-0.5, 1.2, 6.3, 5.8], [2.0, 2.0, 2.0, 3.0]])
        self.inputs = {"X": x, "ROIs": rois, "BatchRoINums": np.array([1, 2], np.int64)}
        self.attrs = {"spatial_scale": 0.9, "pooled_height": 2, "pooled_width": 3}
        self.outputs = {"Out": ref_prroi(x, rois, [0, 1, 1], 0.9, 2, 3)}
        self.check_infer()
        self.check_output(atol=2e-5, rtol=1e-4)
        self.check_grad(["X"], "Out", weighted=True)

    def test_roi_gradient(self):
        """fluid's prroi_pool also differentiates the boxes (PRROIPoolGradMaker writes
        ROIs@GRAD): the exact derivative of the bin integrals / bin area w.r.t. the corners
        (boxes kept off pixel centres and with positive area, where it is smooth)."""
        x = self.rand(2, 2, 5, 6, seed=3)
        rois = np.array([[0.3, 0.7, 4.2, 3.9], [-0.45, 1.2, 6.3, 5.85], [1.1, 2.2, 2.6, 3.3]])
        self.inputs = {"X": x, "ROIs": rois, "BatchRoINums": np.array([1, 2], np.int64)}
        self.attrs = {"spatial_scale": 0.9, "pooled_height": 2, "pooled_width": 2}
        self.outputs = {"Out": ref_prroi(x, rois, [0, 1, 1], 0.9, 2, 2)}
        self.check_grad(["X", "ROIs"], "Out", weighted=True, delta=1e-5)


def ref_deform_psroi(x, rois, trans, no_trans, scale, out_dim, group, ph, pw, part, spp, std):
    N, C, H, W = x.shape
    out = np.zeros((len(rois), out_dim, ph, pw))
    n_cls = 1 if no_trans else trans.shape[1] // 2
    each = out_dim if no_trans else out_dim // n_cls
    for n, roi in enumerate(rois):
        r = [c_round(v) for v in roi]
        x0, y0 = r[0] * scale - 0.5, r[1] * scale - 0.5
        rw = max((r[2] + 1) * scale - 0.5 - x0, 0.1)
        rh = max((r[3] + 1) * scale - 0.5 - y0, 0.1)
        bw, bh = rw / pw, rh / ph
        for c in range(out_dim):
            cls = c // each
            for i in range(ph):
                for j in range(pw):
                    pi, pj = int(np.floor(i / ph * part[0])), int(np.floor(j / pw * part[1]))
                    tx = 0 if no_trans else trans[n, 2 * cls, pi, pj] * std
                    ty = 0 if no_trans else trans[n, 2 * cls + 1, pi, pj] * std
                    ws, hs = j * bw + x0 + tx * rw, i * bh + y0 + ty * rh
                    gi = min(max(int(np.floor(i * group[0] / ph)), 0), group[0] - 1)
                    gj = min(max(int(np.floor(j * group[1] / pw)), 0), group[1] - 1)
                    ch = (c * group[0] + gi) * group[1] + gj
                    acc, cnt = 0.0, 0
                    for ih in range(spp):
                        for iw in range(spp):
                            w, h = ws + iw * bw / spp, hs + ih * bh / spp
                            if w < -0.5 or w > W - 0.5 or h < -0.5 or h > H - 0.5:
                                continue
                            w, h = min(max(w, 0), W - 1), min(max(h, 0), H - 1)
                            x1, x2 = int(np.floor(w)), int(np.ceil(w))
                            y1, y2 = int(np.floor(h)), int(np.ceil(h))
                            ddx, ddy = w - x1, h - y1
                            img = x[0, ch]
                            acc += ((1 - ddx) * (1 - ddy) * img[y1, x1] + (1 - ddx) * ddy
                                    * img[y2, x1] + ddx * (1 - ddy) * img[y1, x2]
                                    + ddx * ddy * img[y2, x2])
                            cnt += 1
                    out[n, c, i, j] = acc / cnt if cnt else 0.0
    return out


class TestDeformablePsroiPooling(OpTest):
    op_type = "deformable_psroi_pooling"

    @pytest.mark.parametrize("no_trans,group", [(False, (2, 2)), (True, (1, 1))])
    def test_pool(self, no_trans, group):
        out_dim = 2
        x = self.rand(1, out_dim * group[0] * group[1], 8, 9)
        rois = np.array([[1.2, 1.4, 5.6, 6.2], [2.0, 1.0, 6.3, 5.4]])
        trans = self.rand(2, 2, 2, 2, low=-0.3, high=0.3, seed=4)     # one class
        self.inputs = {"Input": x, "ROIs": rois, "Trans": trans}
        self.attrs = {"no_trans": no_trans, "spatial_scale": 1.0, "output_dim": out_dim,
                      "group_size": list(group), "pooled_height": 2, "pooled_width": 2,
                      "part_size": [2, 2], "sample_per_part": 2, "trans_std": 0.1}
        ref = ref_deform_psroi(x, rois, trans, no_trans, 1.0, out_dim, group, 2, 2, (2, 2), 2,
                               0.1)
        self.outputs = {"Output": ref}
        self.check_infer()
        self.check_output(no_check_set=["TopCount"])
        self.check_grad(["Input"] if no_trans else ["Input", "Trans"], "Output",
                        weighted=True, delta=1e-4)


def ref_perspective(x, rois, th, tw, scale):
    """fluid's roi_perspective_transform, one output pixel at a time (scalar code)."""
    N, C, H, W = x.shape
    E = 1e-4
    gte = lambda a, b: a > b or abs(a - b) < E          # noqa: E731
    out = np.zeros((len(rois), C, th, tw))
    mask = np.zeros((len(rois), 1, th, tw), np.int32)
    for n, roi in enumerate(rois):
        xs, ys = roi[0::2] * scale, roi[1::2] * scale
        L = [np.hypot(xs[k] - xs[(k + 1) % 4], ys[k] - ys[(k + 1) % 4]) for k in range(4)]
        nh = max(2, th)
        nw = max(2, min(int(c_round(((L[0] + L[2]) / 2) * (nh - 1) / ((L[1] + L[3]) / 2))) + 1,
                        tw))
        dx1, dx2, dx3 = xs[1] - xs[2], xs[3] - xs[2], xs[0] - xs[1] + xs[2] - xs[3]
        dy1, dy2, dy3 = ys[1] - ys[2], ys[3] - ys[2], ys[0] - ys[1] + ys[2] - ys[3]
        m6 = (dx3 * dy2 - dx2 * dy3) / (dx1 * dy2 - dx2 * dy1) / (nw - 1)
        m7 = (dx1 * dy3 - dx3 * dy1) / (dx1 * dy2 - dx2 * dy1) / (nh - 1)
        m = [(xs[1] - xs[0] + m6 * (nw - 1) * xs[1]) / (nw - 1),
             (xs[3] - xs[0] + m7 * (nh - 1) * xs[3]) / (nh - 1), xs[0],
             (ys[1] - ys[0] + m6 * (nw - 1) * ys[1]) / (nw - 1),
             (ys[3] - ys[0] + m7 * (nh - 1) * ys[3]) / (nh - 1), ys[0], m6, m7, 1.0]

        def in_quad(px, py):
            for k in range(4):
                x_s, y_s, x_e, y_e = xs[k], ys[k], xs[(k + 1) % 4], ys[(k + 1) % 4]
                if abs(y_s - y_e) < E:
                    if (abs(py - y_s) < E and abs(py - y_e) < E and gte(px, min(x_s, x_e))
                            and gte(max(x_s, x_e), px)):
                        return True
                else:
                    ix = (py - y_s) * (x_e - x_s) / (y_e - y_s) + x_s
                    if abs(ix - px) < E and gte(py, min(y_s, y_e)) and gte(max(y_s, y_e), py):
                        return True
            cross = 0
            for k in range(4):
                x_s, y_s, x_e, y_e = xs[k], ys[k], xs[(k + 1) % 4], ys[(k + 1) % 4]
                if abs(y_s - y_e) < E:
                    continue
                if (py < min(y_s, y_e) or abs(py - min(y_s, y_e)) < E
                        or py - max(y_s, y_e) > E):
                    continue
                ix = (py - y_s) * (x_e - x_s) / (y_e - y_s) + x_s
                if abs(ix - px) < E:
                    return True
                if ix - px > E:
                    cross += 1
            return cross % 2 == 1

        for oh in range(th):
            for ow in range(tw):
                d = m[6] * ow + m[7] * oh + m[8]
                iw, ih = (m[0] * ow + m[1] * oh + m[2]) / d, (m[3] * ow + m[4] * oh + m[5]) / d
                if not in_quad(iw, ih) or gte(-0.5, iw) or gte(iw, W - 0.5) or \
                        gte(-0.5, ih) or gte(ih, H - 0.5):
                    continue
                iw, ih = (0.0 if gte(0, iw) else iw), (0.0 if gte(0, ih) else ih)
                wf, hf = int(np.floor(iw)), int(np.floor(ih))
                if gte(wf, W - 1):
                    wf = wc = W - 1
                    iw = float(wf)
                else:
                    wc = wf + 1
                if gte(hf, H - 1):
                    hf = hc = H - 1
                    ih = float(hf)
                else:
                    hc = hf + 1
                a, b = iw - wf, ih - hf
                img = x[0]
                out[n, :, oh, ow] = ((1 - a) * (1 - b) * img[:, hf, wf] + (1 - a) * b
                                     * img[:, hc, wf] + a * b * img[:, hc, wc]
                                     + a * (1 - b) * img[:, hf, wc])
                mask[n, 0, oh, ow] = 1
    return out, mask


class TestRoiPerspectiveTransform(OpTest):
    op_type = "roi_perspective_transform"

    def test_warp(self):
        x = self.rand(1, 2, 8, 9)
        rois = np.array([[1.1, 1.3, 6.7, 0.8, 7.2, 6.1, 0.6, 5.5],
                         [2.0, 2.0, 5.0, 2.0, 5.0, 6.0, 2.0, 6.0]])
        out, mask = ref_perspective(x, rois, 4, 5, 1.0)
        self.inputs = {"X": x, "ROIs": rois}
        self.attrs = {"transformed_height": 4, "transformed_width": 5, "spatial_scale": 1.0}
        self.outputs = {"Out": out, "Mask": mask}
        self.check_infer()
        self.check_output()
        assert mask.sum() > 10
        self.check_grad(["X"], "Out", weighted=True)


# -- grads of inputs fluid does not differentiate (issue 29) --------------------------------------
def grads_with_everything_requested(op_type, inputs, attrs, out_slot):
    """One-op program whose every float input requires a gradient (ROIs produced by a
    trainable layer, say); returns {input slot: its gradient or None}, run by the Executor."""
    import fluidlite as fluid
    main = fluid.Program()
    block = main.global_block()
    feed, ins = {}, {}
    for slot, arr in inputs.items():
        v = block.create_var(name=slot.lower(), shape=arr.shape, dtype=arr.dtype, is_data=True,
                             stop_gradient=arr.dtype.kind != "f")
        feed[v.name], ins[slot] = arr, v
    opdef = get_op_def(op_type)
    outs = {s.name: block.create_var(name=s.name.lower() + "_out") for s in opdef.out_slots
            if not s.dispensable}
    with fluid.program_guard(main, fluid.Program()):
        block.append_op(op_type, ins, outs, dict(attrs))
        floats = [s for s, a in inputs.items() if a.dtype.kind == "f"]
        grads = fluid.gradients([fluid.layers.reduce_sum(outs[out_slot])],
                                [ins[s] for s in floats])
    fetch = [g for g in grads if g is not None]
    vals = iter(fluid.Executor(fluid.CPUPlace()).run(main, feed=feed, fetch_list=fetch))
    return {s: (next(vals) if g is not None else None) for s, g in zip(floats, grads)}


@pytest.mark.parametrize("op_type,inputs,attrs,out_slot,differentiated", [
    ("roi_align", {"X": OpTest.rand(1, 2, 6, 7), "ROIs": np.array([[0.5, 1.0, 4.5, 5.0]])},
     {"pooled_height": 2, "pooled_width": 2}, "Out", {"X"}),
    ("roi_pool", {"X": OpTest.rand(1, 2, 6, 7), "ROIs": np.array([[0.5, 1.0, 4.5, 5.0]])},
     {"pooled_height": 2, "pooled_width": 2}, "Out", {"X"}),
    ("psroi_pool", {"X": OpTest.rand(1, 8, 6, 7), "ROIs": np.array([[0.5, 1.0, 4.5, 5.0]])},
     {"output_channels": 2, "pooled_height": 2, "pooled_width": 2}, "Out", {"X"}),
    ("prroi_pool", {"X": OpTest.rand(1, 2, 6, 7), "ROIs": np.array([[0.5, 1.1, 4.5, 5.2]])},
     {"pooled_height": 2, "pooled_width": 2}, "Out", {"X", "ROIs"}),
    ("deformable_psroi_pooling", {"Input": OpTest.rand(1, 8, 8, 9),
                                  "ROIs": np.array([[1.2, 1.4, 5.6, 6.2]]),
                                  "Trans": OpTest.rand(1, 2, 2, 2, low=-0.3, high=0.3)},
     {"output_dim": 2, "group_size": [2, 2], "pooled_height": 2, "pooled_width": 2,
      "part_size": [2, 2], "sample_per_part": 2}, "Output", {"Input", "Trans"}),
    ("roi_perspective_transform", {"X": OpTest.rand(1, 2, 8, 9),
                                   "ROIs": np.array([[1.1, 1.3, 6.7, 0.8, 7.2, 6.1, 0.6, 5.5]])},
     {"transformed_height": 4, "transformed_width": 5}, "Out", {"X"}),
])
def test_box_inputs_get_fluids_gradients(op_type, inputs, attrs, out_slot, differentiated):
    """fluid's grad makers write X@GRAD only (prroi_pool also ROIs@GRAD, deformable psroi
    pooling Trans@GRAD): a ROIs variable that requires a gradient gets none -- before, the
    grad op asked its backward for a ROIs gradient it never computes (KeyError 'ROIs')."""
    got = grads_with_everything_requested(op_type, inputs, attrs, out_slot)
    assert {s for s, g in got.items() if g is not None} == differentiated
    for s in differentiated:
        assert got[s].shape == inputs[s].shape and np.isfinite(got[s]).all()
