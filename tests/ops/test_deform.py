"""deformable_conv / deformable_conv_v1 (fluidlite/ops/deform.py): forward against a per-tap
loop reference of fluid's bilinear rule, numeric float64 gradients for Input, Offset, Mask and
Filter, argument errors."""
import numpy as np
import pytest

from fluidlite.core.registry import VarSpec, get_op_def
from fluidlite.testing import OpTest


def bilinear(img, h, w):
    H, W = img.shape
    if h <= -1 or h >= H or w <= -1 or w >= W:
        return 0.0
    hl, wl = int(np.floor(h)), int(np.floor(w))
    lh, lw = h - hl, w - wl
    v = 0.0
    for dy, wy in ((0, 1 - lh), (1, lh)):
        for dx, wx in ((0, 1 - lw), (1, lw)):
            y, x = hl + dy, wl + dx
            if 0 <= y <= H - 1 and 0 <= x <= W - 1:
                v += wy * wx * img[y, x]
    return v


def ref_deform(x, off, mask, w, s, p, d, groups, dg):
    N, C, H, W = x.shape
    F, Cg, kh, kw = w.shape
    oh, ow = off.shape[2:]
    K = kh * kw
    out = np.zeros((N, F, oh, ow))
    cpg = C // dg
    for n in range(N):
        cols = np.zeros((C, K, oh, ow))
        for c in range(C):
            g = c // cpg
            for k in range(K):
                i, j = divmod(k, kw)
                for y in range(oh):
                    for xx in range(ow):
                        h = y * s[0] - p[0] + i * d[0] + off[n, 2 * (g * K + k), y, xx]
                        ww = xx * s[1] - p[1] + j * d[1] + off[n, 2 * (g * K + k) + 1, y, xx]
                        v = bilinear(x[n, c], h, ww)
                        if mask is not None:
                            v *= mask[n, g * K + k, y, xx]
                        cols[c, k, y, xx] = v
        fg = F // groups
        for f in range(F):
            gg = f // fg
            out[n, f] = np.einsum("ck,ckyx->yx", w[f].reshape(Cg, K),
                                  cols[gg * Cg:(gg + 1) * Cg])
    return out


class TestDeformableConv(OpTest):
    op_type = "deformable_conv"

    @pytest.mark.parametrize("s,p,d,groups,dg", [((1, 1), (1, 1), (1, 1), 1, 1),
                                                 ((2, 1), (1, 0), (1, 2), 2, 2)])
    def test_dcn_v2(self, s, p, d, groups, dg):
        x = self.rand(2, 4, 5, 5)
        w = self.rand(4, 4 // groups, 2, 3, seed=1)
        oh = (5 + 2 * p[0] - (d[0] * 1 + 1)) // s[0] + 1
        ow = (5 + 2 * p[1] - (d[1] * 2 + 1)) // s[1] + 1
        off = self.rand(2, 2 * dg * 6, oh, ow, low=-1.3, high=1.3, seed=2)
        mask = self.rand(2, dg * 6, oh, ow, low=0.1, high=1.0, seed=3)
        self.inputs = {"Input": x, "Offset": off, "Mask": mask, "Filter": w}
        self.attrs = {"strides": list(s), "paddings": list(p), "dilations": list(d),
                      "groups": groups, "deformable_groups": dg}
        self.outputs = {"Output": ref_deform(x, off, mask, w, s, p, d, groups, dg)}
        self.check_infer()
        self.check_output()
        self.check_grad(["Input", "Offset", "Mask", "Filter"], "Output", weighted=True,
                        delta=1e-4)


class TestDeformableConvV1(OpTest):
    op_type = "deformable_conv_v1"

    def test_dcn_v1(self):
        x = self.rand(1, 2, 4, 4)
        w = self.rand(3, 2, 2, 2, seed=1)
        off = self.rand(1, 8, 3, 3, low=-0.9, high=0.9, seed=2)
        self.inputs = {"Input": x, "Offset": off, "Filter": w}
        self.outputs = {"Output": ref_deform(x, off, None, w, (1, 1), (0, 0), (1, 1), 1, 1)}
        self.check_infer()
        self.check_output()
        self.check_grad(["Input", "Offset", "Filter"], "Output", weighted=True, delta=1e-4)


def test_deformable_conv_errors():
    d = get_op_def("deformable_conv")
    x, w = VarSpec([1, 4, 5, 5], "float32"), VarSpec([2, 4, 3, 3], "float32")
    with pytest.raises(ValueError, match="Offset must be"):
        d.infer(x, VarSpec([1, 9, 3, 3], "float32"), VarSpec([1, 9, 3, 3], "float32"), w)
    with pytest.raises(ValueError, match="Mask must be"):
        d.infer(x, VarSpec([1, 18, 3, 3], "float32"), VarSpec([1, 8, 3, 3], "float32"), w)
    with pytest.raises(ValueError, match="deformable_groups"):
        d.infer(x, VarSpec([1, 54, 3, 3], "float32"), VarSpec([1, 27, 3, 3], "float32"), w,
                deformable_groups=3)


class TestDeformableConvTruncatedOutputSize(OpTest):
    """fluid's ConvOutputSize in C++: (2 - 3) / 2 + 1 = 1 output row, not 0 (Paddle 2.6's
    deformable_conv: the same values)."""
    op_type = "deformable_conv"

    def test_one_output_row(self):
        x = self.rand(1, 2, 2, 5)
        w = self.rand(3, 2, 3, 3, seed=1)
        off = self.rand(1, 18, 1, 2, low=-0.9, high=0.9, seed=2)
        mask = self.rand(1, 9, 1, 2, low=0.1, high=1.0, seed=3)
        self.inputs = {"Input": x, "Offset": off, "Mask": mask, "Filter": w}
        self.attrs = {"strides": [2, 2], "paddings": [0, 0], "dilations": [1, 1],
                      "groups": 1, "deformable_groups": 1}
        self.outputs = {"Output": ref_deform(x, off, mask, w, (2, 2), (0, 0), (1, 1), 1, 1)}
        assert self.outputs["Output"].shape == (1, 3, 1, 2)
        self.check_infer()
        self.check_output()
        self.check_grad(["Input", "Offset", "Mask", "Filter"], "Output", delta=1e-4)
