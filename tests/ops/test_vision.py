"""Vision ops: resizing (bilinear/nearest/trilinear interp), and the feature-map ops of
fluidlite/ops/vision.py -- forward against loop references written from fluid's formulas,
numeric float64 gradients, and argument errors."""
import numpy as np
import pytest

from fluidlite.core.registry import get_op_def
from fluidlite.ops import interp
from fluidlite.testing import OpTest


# -- interpolation: per-pixel references of fluid's index rule ------------------------------------
def _ratio(n_in, n_out, align_corners):
    if n_out <= 1:
        return 0.0
    return (n_in - 1) / (n_out - 1) if align_corners else n_in / n_out


def _linear_src(k, n_in, ratio, align_corners, align_mode):
    flag = align_mode == 0 and not align_corners
    lo = int(ratio * (k + 0.5) - 0.5) if flag else int(ratio * k)
    lo = max(lo, 0)
    hi = lo + (1 if lo < n_in - 1 else 0)
    src = max(ratio * (k + 0.5) - 0.5, 0.0)
    d = src - lo if flag else ratio * k - lo
    return lo, hi, d


def ref_bilinear(x, oh, ow, align_corners=True, align_mode=1):
    N, C, H, W = x.shape
    rh, rw = _ratio(H, oh, align_corners), _ratio(W, ow, align_corners)
    out = np.zeros((N, C, oh, ow))
    for i in range(oh):
        yn, ys, dn = _linear_src(i, H, rh, align_corners, align_mode)
        for j in range(ow):
            xw, xe, dw = _linear_src(j, W, rw, align_corners, align_mode)
            out[:, :, i, j] = (x[:, :, yn, xw] * (1 - dn) * (1 - dw)
                               + x[:, :, ys, xw] * dn * (1 - dw)
                               + x[:, :, yn, xe] * (1 - dn) * dw
                               + x[:, :, ys, xe] * dn * dw)
    return out


def ref_nearest(x, oh, ow, align_corners=True):
    N, C, H, W = x.shape
    rh, rw = _ratio(H, oh, align_corners), _ratio(W, ow, align_corners)
    out = np.zeros((N, C, oh, ow), x.dtype)
    for i in range(oh):
        yi = int(rh * i + 0.5) if align_corners else int(rh * i)
        for j in range(ow):
            xj = int(rw * j + 0.5) if align_corners else int(rw * j)
            out[:, :, i, j] = x[:, :, yi, xj]
    return out


def ref_trilinear(x, od, oh, ow, align_corners=True, align_mode=1):
    N, C, D, H, W = x.shape
    r = [_ratio(D, od, align_corners), _ratio(H, oh, align_corners),
         _ratio(W, ow, align_corners)]
    out = np.zeros((N, C, od, oh, ow))
    for a in range(od):
        d0, d1, dd = _linear_src(a, D, r[0], align_corners, align_mode)
        for i in range(oh):
            h0, h1, dh = _linear_src(i, H, r[1], align_corners, align_mode)
            for j in range(ow):
                w0, w1, dw = _linear_src(j, W, r[2], align_corners, align_mode)
                acc = 0.0
                for (zi, wz) in ((d0, 1 - dd), (d1, dd)):
                    for (yi, wy) in ((h0, 1 - dh), (h1, dh)):
                        for (xi, wx) in ((w0, 1 - dw), (w1, dw)):
                            acc = acc + x[:, :, zi, yi, xi] * wz * wy * wx
                out[:, :, a, i, j] = acc
    return out


class TestBilinearInterp(OpTest):
    op_type = "bilinear_interp"

    @pytest.mark.parametrize("align_corners,align_mode", [(True, 1), (False, 0), (False, 1)])
    def test_upsample(self, align_corners, align_mode):
        x = self.rand(2, 3, 4, 5)
        self.inputs = {"X": x}
        self.attrs = {"out_h": 7, "out_w": 3, "interp_method": "bilinear",
                      "align_corners": align_corners, "align_mode": align_mode}
        self.outputs = {"Out": ref_bilinear(x, 7, 3, align_corners, align_mode)}
        self.check_infer()
        self.check_output()
        self.check_grad(["X"], "Out", weighted=True)

    def test_scale_and_nhwc(self):
        x = self.rand(1, 3, 4, 2)
        self.inputs = {"X": np.ascontiguousarray(x.transpose(0, 2, 3, 1))}
        self.attrs = {"scale": 1.5, "interp_method": "bilinear", "align_corners": False,
                      "align_mode": 0, "data_layout": "NHWC"}
        self.outputs = {"Out": ref_bilinear(x, 6, 3, False, 0).transpose(0, 2, 3, 1)}
        self.check_infer()
        self.check_output()
        self.check_grad(["X"], "Out", weighted=True)

    def test_out_size_tensor_wins(self):
        x = self.rand(1, 2, 3, 3)
        self.inputs = {"X": x, "OutSize": np.array([5, 4], np.int32)}
        self.attrs = {"out_h": 2, "out_w": 2, "interp_method": "bilinear"}
        self.outputs = {"Out": ref_bilinear(x, 5, 4)}
        self.check_output()
        self.check_grad(["X"], "Out")

    def test_size_tensor_list(self):
        x = self.rand(1, 2, 3, 3)
        self.inputs = {"X": x, "SizeTensor": [("sh", np.array([2], np.int32)),
                                              ("sw", np.array([6], np.int32))]}
        self.attrs = {"out_h": 4, "out_w": 4, "interp_method": "bilinear"}
        self.outputs = {"Out": ref_bilinear(x, 2, 6)}
        self.check_output()


class TestNearestInterp(OpTest):
    op_type = "nearest_interp"

    @pytest.mark.parametrize("align_corners", [True, False])
    def test_resize(self, align_corners):
        x = self.rand(2, 2, 5, 4)
        self.inputs = {"X": x}
        self.attrs = {"out_h": 8, "out_w": 3, "interp_method": "nearest",
                      "align_corners": align_corners}
        self.outputs = {"Out": ref_nearest(x, 8, 3, align_corners)}
        self.check_infer()
        self.check_output()
        self.check_grad(["X"], "Out", weighted=True)

    def test_uint8_exact(self):
        x = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(1, 2, 3, 3)
        self.inputs = {"X": x}
        self.attrs = {"scale": 2.0, "interp_method": "nearest", "align_corners": False}
        self.outputs = {"Out": ref_nearest(x, 6, 6, False)}
        self.check_output(atol=0)


class TestTrilinearInterp(OpTest):
    op_type = "trilinear_interp"

    @pytest.mark.parametrize("align_corners,align_mode", [(True, 1), (False, 0)])
    def test_resize(self, align_corners, align_mode):
        x = self.rand(1, 2, 3, 2, 3)
        self.inputs = {"X": x}
        self.attrs = {"out_d": 4, "out_h": 3, "out_w": 2, "interp_method": "trilinear",
                      "align_corners": align_corners, "align_mode": align_mode}
        self.outputs = {"Out": ref_trilinear(x, 4, 3, 2, align_corners, align_mode)}
        self.check_infer()
        self.check_output()
        self.check_grad(["X"], "Out", weighted=True)


def test_interp_errors():
    from fluidlite.core.registry import get_op_def
    d = get_op_def("bilinear_interp")
    x = np.zeros((1, 1, 2, 2))
    with pytest.raises(ValueError, match="4-D"):
        d.forward(np.zeros((1, 2, 2)), out_h=2, out_w=2)
    with pytest.raises(ValueError, match="align_mode"):
        d.forward(x, out_h=2, out_w=2, align_mode=3)
    with pytest.raises(ValueError, match="positive"):
        d.forward(x)
    with pytest.raises(ValueError, match="data_layout"):
        d.forward(x, out_h=2, out_w=2, data_layout="NCDHW")


# -- rearrangements -------------------------------------------------------------------------------
class TestPixelShuffle(OpTest):
    op_type = "pixel_shuffle"

    def test_nchw(self):
        x = self.rand(2, 8, 2, 3)
        r = 2
        ref = np.zeros((2, 2, 4, 6))
        for c in range(2):
            for i in range(r):
                for j in range(r):
                    ref[:, c, i::r, j::r] = x[:, c * r * r + i * r + j]
        self.inputs, self.attrs, self.outputs = {"X": x}, {"upscale_factor": r}, {"Out": ref}
        self.check_infer()
        self.check_output()
        self.check_grad(["X"], "Out", weighted=True)

    def test_nhwc(self):
        x = self.rand(1, 9, 2, 2)
        ref = np.zeros((1, 1, 6, 6))
        for i in range(3):
            for j in range(3):
                ref[:, 0, i::3, j::3] = x[:, i * 3 + j]
        self.inputs = {"X": np.ascontiguousarray(x.transpose(0, 2, 3, 1))}
        self.attrs = {"upscale_factor": 3, "data_format": "NHWC"}
        self.outputs = {"Out": ref.transpose(0, 2, 3, 1)}
        self.check_infer()
        self.check_output()
        self.check_grad(["X"], "Out", weighted=True)


def ref_space_to_depth(x, bs):
    """fluid's kernel, one flat index at a time."""
    B, C, H, W = x.shape
    out = np.zeros(x.size, x.dtype)
    flat = x.reshape(-1)
    out_c = C // (bs * bs)
    for idx in range(x.size):
        b, rem = divmod(idx, C * H * W)
        k, rem = divmod(rem, H * W)
        j, i = divmod(rem, W)
        c2, off = k % out_c, k // out_c
        w2, h2 = i * bs + off % bs, j * bs + off // bs
        out[w2 + W * bs * (h2 + H * bs * (c2 + out_c * b))] = flat[idx]
    return out.reshape(B, C * bs * bs, H // bs, W // bs)


class TestSpaceToDepth(OpTest):
    op_type = "space_to_depth"

    def test_reorg(self):
        x = self.rand(2, 4, 4, 6)
        self.inputs, self.attrs = {"X": x}, {"blocksize": 2}
        self.outputs = {"Out": ref_space_to_depth(x, 2)}
        self.check_infer()
        self.check_output()
        self.check_grad(["X"], "Out", weighted=True)


class TestShuffleChannel(OpTest):
    op_type = "shuffle_channel"

    def test_shuffle(self):
        x = self.rand(2, 6, 2, 2)
        ref = np.stack([x[:, g * 3 + i] for i in range(3) for g in range(2)], axis=1)
        self.inputs, self.attrs, self.outputs = {"X": x}, {"group": 2}, {"Out": ref}
        self.check_infer()
        self.check_output()
        self.check_grad(["X"], "Out", weighted=True)


class TestTemporalShift(OpTest):
    op_type = "temporal_shift"

    def test_shift(self):
        x = self.rand(6, 8, 2, 2)         # N=2, T=3
        ref = np.zeros_like(x)
        T, C = 3, 8
        c1, c2 = int(C * 0.25), int(C * 0.5)
        for n in range(2):
            for t in range(T):
                for c in range(C):
                    src = t - 1 if c < c1 else (t + 1 if c < c2 else t)
                    if 0 <= src < T:
                        ref[n * T + t, c] = x[n * T + src, c]
        self.inputs, self.attrs = {"X": x}, {"seg_num": 3, "shift_ratio": 0.25}
        self.outputs = {"Out": ref}
        self.check_infer()
        self.check_output()
        self.check_grad(["X"], "Out", weighted=True)


class TestUnfold(OpTest):
    op_type = "unfold"

    def test_unfold(self):
        x = self.rand(2, 2, 4, 5)
        k, s, p, d = (2, 3), (1, 2), (1, 0, 0, 1), (2, 1)   # p = [top, left, bottom, right]
        xp = np.pad(x, [(0, 0), (0, 0), (p[0], p[2]), (p[1], p[3])])
        oh = (4 + 1 - (d[0] * (k[0] - 1) + 1)) // s[0] + 1
        ow = (5 + 1 - (d[1] * (k[1] - 1) + 1)) // s[1] + 1
        ref = np.zeros((2, 2 * 6, oh * ow))
        for c in range(2):
            for i in range(k[0]):
                for j in range(k[1]):
                    for y in range(oh):
                        for xx in range(ow):
                            ref[:, (c * k[0] + i) * k[1] + j, y * ow + xx] = \
                                xp[:, c, y * s[0] + i * d[0], xx * s[1] + j * d[1]]
        self.inputs = {"X": x}
        self.attrs = {"kernel_sizes": list(k), "strides": list(s), "paddings": list(p),
                      "dilations": list(d)}
        self.outputs = {"Y": ref}
        self.check_infer()
        self.check_output()
        self.check_grad(["X"], "Y", weighted=True)


# -- per-channel maps -----------------------------------------------------------------------------
class TestAffineChannel(OpTest):
    op_type = "affine_channel"

    @pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
    def test_affine(self, layout):
        x = self.rand(2, 3, 4, 3)
        sc, b = self.rand(3, seed=1), self.rand(3, seed=2)
        sh = (1, 3, 1, 1) if layout == "NCHW" else (1, 1, 1, 3)
        self.inputs = {"X": x, "Scale": sc, "Bias": b}
        self.attrs = {"data_layout": layout}
        self.outputs = {"Out": x * sc.reshape(sh) + b.reshape(sh)}
        self.check_infer()
        self.check_output()
        self.check_grad(["X", "Scale", "Bias"], "Out", weighted=True)


class TestLRN(OpTest):
    op_type = "lrn"

    @pytest.mark.parametrize("n", [5, 4])
    def test_lrn(self, n):
        x = self.rand(2, 6, 2, 3)
        k, alpha, beta = 1.0, 0.1, 0.75
        pre = (n - 1) // 2
        mid = np.zeros_like(x)
        for c in range(6):
            lo, hi = max(c - pre, 0), min(c - pre + n - 1, 5)
            mid[:, c] = k + alpha * (x[:, lo:hi + 1] ** 2).sum(axis=1)
        self.inputs = {"X": x}
        self.attrs = {"n": n, "k": k, "alpha": alpha, "beta": beta}
        self.outputs = {"Out": x / mid ** beta, "MidOut": mid}
        self.check_infer()
        self.check_output()
        self.check_grad(["X"], "Out", weighted=True)


# -- sampling grids -------------------------------------------------------------------------------
class TestAffineGrid(OpTest):
    op_type = "affine_grid"

    def test_grid(self):
        theta = self.rand(2, 2, 3)
        H, W = 3, 4
        ref = np.zeros((2, H, W, 2))
        for n in range(2):
            for i in range(H):
                for j in range(W):
                    p = np.array([-1 + 2 * j / (W - 1), -1 + 2 * i / (H - 1), 1.0])
                    ref[n, i, j] = theta[n] @ p
        self.inputs = {"Theta": theta}
        self.attrs = {"output_shape": [2, 5, H, W]}
        self.outputs = {"Output": ref}
        self.check_infer()
        self.check_output()
        self.check_grad(["Theta"], "Output", weighted=True)
        self.inputs = {"Theta": theta, "OutputShape": np.array([2, 5, H, W], np.int32)}
        self.attrs = {}
        self.check_output()


def ref_grid_sample(x, grid):
    N, C, H, W = x.shape
    out = np.zeros((N, C) + grid.shape[1:3])
    for n in range(N):
        for i in range(grid.shape[1]):
            for j in range(grid.shape[2]):
                gx = (grid[n, i, j, 0] + 1) * (W - 1) / 2
                gy = (grid[n, i, j, 1] + 1) * (H - 1) / 2
                x0, y0 = int(np.floor(gx)), int(np.floor(gy))
                for yy, wy in ((y0, y0 + 1 - gy), (y0 + 1, gy - y0)):
                    for xx, wx in ((x0, x0 + 1 - gx), (x0 + 1, gx - x0)):
                        if 0 <= yy < H and 0 <= xx < W:
                            out[n, :, i, j] += x[n, :, yy, xx] * wx * wy
    return out


class TestGridSampler(OpTest):
    op_type = "grid_sampler"

    def test_sample(self):
        x = self.rand(2, 3, 4, 5)
        # keep sample points off integer pixel positions (the bilinear kinks)
        grid = self.rand(2, 3, 2, 2, low=-1.15, high=1.15, seed=3)
        self.inputs = {"X": x, "Grid": grid}
        self.outputs = {"Output": ref_grid_sample(x, grid)}
        self.check_infer()
        self.check_output()
        self.check_grad(["X", "Grid"], "Output", weighted=True, delta=1e-5)


# -- products -------------------------------------------------------------------------------------
class TestFSP(OpTest):
    op_type = "fsp"

    def test_fsp(self):
        x, y = self.rand(2, 3, 4, 5), self.rand(2, 2, 4, 5, seed=1)
        ref = np.einsum("nahw,nbhw->nab", x, y) / 20
        self.inputs, self.outputs = {"X": x, "Y": y}, {"Out": ref}
        self.check_infer()
        self.check_output()
        self.check_grad(["X", "Y"], "Out", weighted=True)


class TestCosSim(OpTest):
    op_type = "cos_sim"

    @pytest.mark.parametrize("rows_y", [4, 1])
    def test_cos(self, rows_y):
        x, y = self.rand(4, 5), self.rand(rows_y, 5, seed=1)
        xn = np.linalg.norm(x, axis=1, keepdims=True)
        yn = np.linalg.norm(y, axis=1, keepdims=True)
        self.inputs = {"X": x, "Y": y}
        self.outputs = {"Out": (x * y).sum(axis=1, keepdims=True) / (xn * yn), "XNorm": xn,
                        "YNorm": yn}
        self.check_infer()
        self.check_output()
        self.check_grad(["X", "Y"], "Out", weighted=True)


class TestBilinearTensorProduct(OpTest):
    op_type = "bilinear_tensor_product"

    def test_btp(self):
        x, y = self.rand(3, 4), self.rand(3, 5, seed=1)
        w, b = self.rand(2, 4, 5, seed=2), self.rand(1, 2, seed=3)
        ref = np.stack([np.diag(x @ w[k] @ y.T) for k in range(2)], axis=1) + b
        self.inputs = {"X": x, "Y": y, "Weight": w, "Bias": b}
        self.outputs = {"Out": ref}
        self.check_infer()
        self.check_output()
        self.check_grad(["X", "Y", "Weight", "Bias"], "Out", weighted=True)


class TestAddPositionEncoding(OpTest):
    op_type = "add_position_encoding"

    def test_encoding(self):
        x = self.rand(2, 5, 6)
        alpha, beta = 0.5, 2.0
        ref = np.zeros_like(x)
        half = 3
        for p in range(5):
            for k in range(half):
                val = p / 10000.0 ** (k / (half - 1))
                ref[:, p, k] = alpha * x[:, p, k] + beta * np.sin(val)
                ref[:, p, half + k] = alpha * x[:, p, half + k] + beta * np.cos(val)
        self.inputs, self.attrs = {"X": x}, {"alpha": alpha, "beta": beta}
        self.outputs = {"Out": ref}
        self.check_infer()
        self.check_output()
        self.check_grad(["X"], "Out", weighted=True)


def test_add_position_encoding_of_a_lod_tensor_counts_positions_per_sequence():
    # fluid 1.8 accepts X = [total, size] with lod_level 1: the position restarts at 0 in
    # every sequence, and Out keeps X's LoD; dX = alpha * dOut
    import fluidlite as fluid
    x = OpTest.rand(7, 4)
    lengths = [3, 0, 4]
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        xv = fluid.data("x", [-1, 4], "float64", lod_level=1)
        xv.stop_gradient = False
        out = fluid.layers.add_position_encoding(xv, alpha=0.5, beta=2.0)
        dx = fluid.gradients([fluid.layers.reduce_sum(out * 3.0)], [xv])[0]
    got, g = fluid.Executor(fluid.CPUPlace()).run(
        main, feed={"x": fluid.create_lod_tensor(x, [lengths], fluid.CPUPlace())},
        fetch_list=[out, dx], return_numpy=False)
    pos = [0, 1, 2, 0, 1, 2, 3]
    ref = np.empty_like(x)
    for r, p in enumerate(pos):
        for k in range(2):
            val = p / 10000.0 ** (k / 1.0)
            ref[r, k] = 0.5 * x[r, k] + 2.0 * np.sin(val)
            ref[r, 2 + k] = 0.5 * x[r, 2 + k] + 2.0 * np.cos(val)
    np.testing.assert_allclose(np.array(got), ref, rtol=1e-12)
    assert got.recursive_sequence_lengths() == [lengths]
    np.testing.assert_allclose(np.array(g), np.full_like(x, 1.5))


# -- not differentiable ---------------------------------------------------------------------------
def test_similarity_focus_doc_example():
    """The example of fluid's documentation (axis=1, indexes=[0])."""
    from fluidlite.core.registry import get_op_def
    x = np.array([[[[0.8, 0.1], [0.4, 0.5]], [[0.9, 0.7], [0.9, 0.9]],
                   [[0.8, 0.9], [0.1, 0.2]]],
                  [[[0.2, 0.5], [0.3, 0.4]], [[0.9, 0.7], [0.8, 0.4]],
                   [[0.0, 0.2], [0.4, 0.7]]]])
    out = get_op_def("similarity_focus").forward(x, axis=1, indexes=[0])["Out"]
    exp0 = np.array([[1.0, 0.0], [0.0, 1.0]])
    exp1 = np.array([[0.0, 1.0], [1.0, 0.0]])
    np.testing.assert_array_equal(out[0], np.broadcast_to(exp0, (3, 2, 2)))
    np.testing.assert_array_equal(out[1], np.broadcast_to(exp1, (3, 2, 2)))
    both = get_op_def("similarity_focus").forward(x, axis=1, indexes=[0, 2])["Out"]
    # index 2 of item 0: max 0.9 at (0, 1), then (1, 0) -> union with index 0 is all ones
    np.testing.assert_array_equal(both[0], np.ones((3, 2, 2)))
    with pytest.raises(ValueError, match="out of range"):
        get_op_def("similarity_focus").forward(x, axis=1, indexes=[3])


def test_mean_iou():
    from fluidlite.core.registry import get_op_def
    pred = np.array([0, 1, 1, 2, 2, 2], np.int32)
    label = np.array([0, 1, 2, 2, 0, 2], np.int32)
    got = get_op_def("mean_iou").forward(pred, label, num_classes=4)
    correct = np.array([1, 1, 2, 0])
    wrong = np.array([1, 1, 2, 0])      # class 0: label 0 predicted 2; class 2: both sides
    np.testing.assert_array_equal(got["OutCorrect"], correct)
    np.testing.assert_array_equal(got["OutWrong"], wrong)
    np.testing.assert_allclose(got["OutMeanIou"], [(1 / 2 + 1 / 2 + 2 / 4) / 3], rtol=1e-6)
    with pytest.raises(ValueError, match=r"class ids must lie in \[0, 2\)"):
        get_op_def("mean_iou").forward(pred, label, num_classes=2)


def test_feature_map_errors():
    from fluidlite.core.registry import get_op_def
    with pytest.raises(ValueError, match="divisible by upscale_factor"):
        get_op_def("pixel_shuffle").forward(np.zeros((1, 3, 2, 2)), upscale_factor=2)
    with pytest.raises(ValueError, match="blocksize"):
        get_op_def("space_to_depth").forward(np.zeros((1, 4, 3, 4)), blocksize=2)
    with pytest.raises(ValueError, match="divisible by group"):
        get_op_def("shuffle_channel").forward(np.zeros((1, 3, 2, 2)), group=2)
    with pytest.raises(ValueError, match="seg_num"):
        get_op_def("temporal_shift").forward(np.zeros((5, 4, 2, 2)), seg_num=2)
    with pytest.raises(ValueError, match="kernel_sizes"):
        get_op_def("unfold").forward(np.zeros((1, 1, 3, 3)), kernel_sizes=[2])
    with pytest.raises(ValueError, match="Y must have 1 row"):
        get_op_def("cos_sim").forward(np.zeros((3, 2)), np.zeros((2, 2)))
    with pytest.raises(ValueError, match="even"):
        get_op_def("add_position_encoding").forward(np.zeros((1, 2, 3)))
    with pytest.raises(ValueError, match="output shape"):
        get_op_def("affine_grid").forward(np.zeros((1, 2, 3)), output_shape=[1, 1, 0, 2])


# -- normalizations (fluidlite/ops/vision_norm.py) ------------------------------------------------
def ref_group_norm(x, groups, scale, bias, eps):
    N, C = x.shape[:2]
    xg = x.reshape(N, groups, -1)
    mean = xg.mean(axis=2)
    var = xg.var(axis=2)
    y = ((xg - mean[..., None]) / np.sqrt(var[..., None] + eps)).reshape(x.shape)
    sh = (1, C) + (1,) * (x.ndim - 2)
    return y * scale.reshape(sh) + bias.reshape(sh), mean, var


class TestGroupNorm(OpTest):
    op_type = "group_norm"

    def test_nchw(self):
        x = self.rand(2, 6, 3, 2)
        sc, b = self.rand(6, seed=1), self.rand(6, seed=2)
        y, m, v = ref_group_norm(x, 3, sc, b, 1e-5)
        self.inputs = {"X": x, "Scale": sc, "Bias": b}
        self.attrs = {"groups": 3, "epsilon": 1e-5}
        self.outputs = {"Y": y, "Mean": m, "Variance": v}
        self.check_infer()
        self.check_output()
        self.check_grad(["X", "Scale", "Bias"], "Y", weighted=True)

    def test_nhwc_without_affine(self):
        x = self.rand(2, 3, 2, 4)
        y, m, v = ref_group_norm(x.transpose(0, 3, 1, 2), 2, np.ones(4), np.zeros(4), 1e-5)
        self.inputs = {"X": x}
        self.attrs = {"groups": 2, "data_layout": "NHWC"}
        self.outputs = {"Y": y.transpose(0, 2, 3, 1), "Mean": m, "Variance": v}
        self.check_infer()
        self.check_output()
        self.check_grad(["X"], "Y", weighted=True)


class TestInstanceNorm(OpTest):
    op_type = "instance_norm"

    def test_instance(self):
        x = self.rand(2, 3, 4, 2)
        sc, b = self.rand(3, seed=1), self.rand(3, seed=2)
        xg = x.reshape(2, 3, -1)
        mean, var = xg.mean(axis=2), xg.var(axis=2)
        y = ((xg - mean[..., None]) / np.sqrt(var[..., None] + 1e-5)).reshape(x.shape)
        self.inputs = {"X": x, "Scale": sc, "Bias": b}
        self.attrs = {"epsilon": 1e-5}
        self.outputs = {"Y": y * sc.reshape(1, 3, 1, 1) + b.reshape(1, 3, 1, 1),
                        "SavedMean": mean.reshape(-1),
                        "SavedVariance": 1 / np.sqrt(var.reshape(-1) + 1e-5)}
        self.check_infer()
        self.check_output()
        self.check_grad(["X", "Scale", "Bias"], "Y", weighted=True)


class TestSpectralNorm(OpTest):
    op_type = "spectral_norm"

    @pytest.mark.parametrize("dim,iters", [(0, 3), (1, 2)])
    def test_forward(self, dim, iters):
        w = self.rand(3, 4, 2)
        h = w.shape[dim]
        u, v = self.rand(h, seed=1), self.rand(24 // h, seed=2)
        mat = np.moveaxis(w, dim, 0).reshape(h, -1)
        uu, vv = u, v
        for _ in range(iters):
            vv = mat.T @ uu
            vv = vv / (np.linalg.norm(vv) + 1e-12)
            uu = mat @ vv
            uu = uu / (np.linalg.norm(uu) + 1e-12)
        sigma = uu @ mat @ vv
        self.inputs = {"Weight": w, "U": u, "V": v}
        self.attrs = {"dim": dim, "power_iters": iters, "eps": 1e-12}
        self.outputs = {"Out": w / sigma}
        self.check_infer()
        self.check_output()
        # many iterations converge sigma to the top singular value
        self.attrs = dict(self.attrs, power_iters=200)
        self.outputs = {"Out": w / np.linalg.svd(mat, compute_uv=False)[0]}
        self.check_output()

    def test_grad_with_fixed_vectors(self):
        """power_iters=0: u, v are the given vectors, so the rule's 'u, v constant' is exact."""
        w = self.rand(3, 4)
        self.inputs = {"Weight": w, "U": self.rand(3, seed=1), "V": self.rand(4, seed=2)}
        self.attrs = {"dim": 0, "power_iters": 0}
        self.outputs = {"Out": w / (self.inputs["U"] @ w @ self.inputs["V"])}
        self.check_output()
        self.check_grad(["Weight"], "Out", weighted=True)


class TestDataNorm(OpTest):
    op_type = "data_norm"

    def test_data_norm(self):
        x = self.rand(5, 3)
        size = np.array([10.0, 20.0, 30.0])
        bsum = self.rand(3, seed=1) * 10
        sq = np.array([5.0, 8.0, 9.0])
        means, scales = bsum / size, np.sqrt(size / sq)
        self.inputs = {"X": x, "BatchSize": size, "BatchSum": bsum, "BatchSquareSum": sq}
        self.attrs = {"epsilon": 1e-4}
        self.outputs = {"Y": (x - means) * scales, "Means": means, "Scales": scales}
        self.check_infer()
        self.check_output()
        self.check_grad(["X"], "Y", weighted=True)

    def test_statistics_gradients(self):
        from fluidlite.core.registry import get_op_def
        x = self.rand(5, 3)
        size, bsum, sq = np.full(3, 10.0), np.arange(3.0), np.full(3, 4.0)
        g = get_op_def("data_norm").backward(x, size, bsum, sq, np.ones_like(x), epsilon=0.5)
        np.testing.assert_array_equal(g["BatchSize"], np.full(3, 5.0))
        np.testing.assert_allclose(g["BatchSum"], x.sum(axis=0))
        np.testing.assert_allclose(g["BatchSquareSum"],
                                   ((x - bsum / size) ** 2).sum(axis=0) + 5 * 0.5)

    def test_slot_dim_skips_slots_never_shown(self):
        """fluid 1.8's slot_dim: X joins slots of slot_dim values whose first is the show
        count; a slot with show 0 normalizes to zeros and is left out of the statistics."""
        x = self.rand(3, 4)
        x[1, 0] = 0.0                          # row 1, slot 0 not shown
        size, bsum, sq = np.full(4, 10.0), self.rand(4, seed=2), np.full(4, 4.0)
        means, scales = bsum / size, np.sqrt(size / sq)
        y = (x - means) * scales
        y[1, :2] = 0.0
        self.inputs = {"X": x, "BatchSize": size, "BatchSum": bsum, "BatchSquareSum": sq}
        self.attrs = {"epsilon": 1e-4, "slot_dim": 2}
        self.outputs = {"Y": y, "Means": means, "Scales": scales}
        self.check_output()
        from fluidlite.core.registry import get_op_def
        g = get_op_def("data_norm").backward(x, size, bsum, sq, np.ones_like(x), epsilon=0.5,
                                             slot_dim=2)
        # fluid's kernel: dX = dY * Scales in every slot, shown or not
        np.testing.assert_allclose(g["X"], np.ones_like(x) * scales)
        shown = np.array([[1, 1, 1, 1], [0, 0, 1, 1], [1, 1, 1, 1]], bool)
        c = shown.sum(0)
        np.testing.assert_array_equal(g["BatchSize"], np.ones(4))
        np.testing.assert_allclose(g["BatchSum"], (x * shown).sum(0) / c)
        np.testing.assert_allclose(g["BatchSquareSum"],
                                   (((x - means) ** 2) * shown).sum(0) / c + c * 0.5)
        self.inputs["X"] = self.rand(3, 4, seed=5) + 2.0       # every slot shown
        self.outputs["Y"] = (self.inputs["X"] - means) * scales
        self.check_grad(["X"], "Y", weighted=True)


def test_norm_errors():
    from fluidlite.core.registry import VarSpec, get_op_def
    with pytest.raises(ValueError, match="divisible by groups"):
        get_op_def("group_norm").forward(np.zeros((1, 5, 2, 2)), groups=2)
    with pytest.raises(ValueError, match="epsilon"):
        get_op_def("instance_norm").infer(VarSpec([1, 2, 3], "float32"), epsilon=0.5)
    with pytest.raises(ValueError, match="U must be"):
        get_op_def("spectral_norm").infer(VarSpec([3, 4], "float32"), VarSpec([4], "float32"),
                                          VarSpec([4], "float32"))


class TestInplaceABN(OpTest):
    op_type = "inplace_abn"

    @pytest.mark.parametrize("act,alpha", [("leaky_relu", 0.1), ("elu", 1.0), ("identity", 1.0)])
    def test_abn(self, act, alpha):
        x = self.rand(3, 2, 2, 2, avoid=0.0)
        sc, b = self.rand(2, seed=1, low=0.5, high=1.5), self.rand(2, seed=2)
        mean, var = np.zeros(2), np.ones(2)
        mu = x.mean(axis=(0, 2, 3))
        v = x.var(axis=(0, 2, 3))
        y = (x - mu.reshape(1, 2, 1, 1)) / np.sqrt(v.reshape(1, 2, 1, 1) + 1e-5)
        y = y * sc.reshape(1, 2, 1, 1) + b.reshape(1, 2, 1, 1)
        if act == "leaky_relu":
            y = np.where(y > 0, y, alpha * y)
        elif act == "elu":
            y = np.where(y > 0, y, alpha * (np.exp(np.minimum(y, 0)) - 1))
        self.inputs = {"X": x, "Scale": sc, "Bias": b, "Mean": mean, "Variance": var}
        self.attrs = {"activation": act, "alpha": alpha, "epsilon": 1e-5}
        self.outputs = {"Y": y, "SavedMean": mu, "SavedVariance": 1 / np.sqrt(v + 1e-5),
                        "MeanOut": 0.9 * mean + 0.1 * mu, "VarianceOut": 0.9 * var + 0.1 * v}
        self.check_infer()
        self.check_output()
        self.check_grad(["X", "Scale", "Bias"], "Y", weighted=True)


# -- fluid's C++ arithmetic (issue 29): values of Paddle 2.6's CPU kernels -----------------------
def test_interp_scale_is_a_float32_product():
    """``static_cast<int>(in * scale)`` with a float ``scale``: 30 * 2.1f = 62.999998 -> 62
    (a double product gives 63.000000000000004 -> 63); Paddle 2.6: [62, 94] and [63, 42]."""
    from fluidlite.core.registry import VarSpec, get_op_def
    d = get_op_def("bilinear_interp")
    attrs = {"scale": 2.1, "interp_method": "bilinear", "align_corners": False,
             "align_mode": 0}
    assert d.infer(VarSpec([1, 1, 30, 45], "float32"), **attrs)["Out"].shape == (1, 1, 62, 94)
    assert d.forward(np.zeros((1, 1, 30, 45)), **attrs)["Out"].shape == (1, 1, 62, 94)
    n = get_op_def("nearest_interp")
    got = n.forward(np.zeros((1, 1, 45, 30)), scale=1.4, interp_method="nearest",
                    align_corners=False)["Out"]
    assert got.shape == (1, 1, 63, 42)


class TestInterpFloat32Weights(OpTest):
    """fluid computes ratios and weights in float (``ratio * k`` float32, the weights float32):
    resizing 7 columns to 5 weighs by 1.39999998..., not 1.4, whatever the input dtype."""
    op_type = "bilinear_interp"

    def test_values(self):
        x = np.arange(14.0).reshape(1, 1, 2, 7)
        self.inputs = {"X": x}
        self.attrs = {"out_h": 3, "out_w": 5, "interp_method": "bilinear",
                      "align_corners": False, "align_mode": 1}
        f = np.float32
        row = [f(0), f(7) / f(5), f(2) * (f(7) / f(5)), f(3) * (f(7) / f(5)),
               f(4) * (f(7) / f(5))]
        self.outputs = {"Out": np.array([[0.0, 1.39999998, 2.79999995, 4.19999981, 5.5999999],
                                         [4.66666681, 6.06666678, 7.46666676, 8.86666662,
                                          10.26666671],
                                         [7.0, 8.39999998, 9.79999995, 11.19999981,
                                          12.5999999]])[None, None]}     # Paddle 2.6
        self.check_infer()
        self.check_output(atol=1e-8, rtol=1e-8)
        got = get_op("bilinear_interp").forward(x, **self.attrs)["Out"]
        np.testing.assert_array_equal(got[0, 0, 0], np.array(row, np.float64))
        self.check_grad(["X"], "Out")


def get_op(op_type):
    from fluidlite.core.registry import get_op_def
    return get_op_def(op_type)


class TestUnfoldTruncatedOutputSize(OpTest):
    """(2 - 3) / 2 + 1 = 1 block row in C++ (Paddle 2.6 unfold: same values); the block
    reaches past the input, where fluid's im2col reads zeros."""
    op_type = "unfold"

    def test_unfold(self):
        x = self.rand(1, 2, 2, 5)
        self.inputs = {"X": x}
        self.attrs = {"kernel_sizes": [3, 2], "strides": [2, 2], "paddings": [0, 0, 0, 0],
                      "dilations": [1, 1]}
        xp = np.pad(x, [(0, 0), (0, 0), (0, 1), (0, 0)])       # the row past the input
        ref = np.zeros((1, 2 * 6, 2))
        for c in range(2):
            for i in range(3):
                for j in range(2):
                    for xx in range(2):
                        ref[:, (c * 3 + i) * 2 + j, xx] = xp[:, c, i, xx * 2 + j]
        self.outputs = {"Y": ref}
        self.check_infer()
        self.check_output()
        self.check_grad(["X"], "Y")


def test_spectral_norm_u_v_get_no_gradient():
    """fluid's grad maker writes Weight@GRAD only (before: KeyError 'U')."""
    from tests.ops.test_roi import grads_with_everything_requested
    w = OpTest.rand(3, 4)
    got = grads_with_everything_requested(
        "spectral_norm", {"Weight": w, "U": OpTest.rand(3, seed=1), "V": OpTest.rand(4, seed=2)},
        {"dim": 0, "power_iters": 1}, "Out")
    assert got["U"] is None and got["V"] is None and got["Weight"].shape == w.shape


def _cubic_weights(t, a=-0.75):
    def c1(x):
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def c2(x):
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return [c2(t + 1), c1(t), c1(1 - t), c2(2 - t)]


def ref_bicubic(x, oh, ow, align_corners):
    """fluid's BicubicInterpolation, one output pixel at a time."""
    n, c, h, w = x.shape

    def src(k, n_in, n_out):
        if align_corners:
            r = np.float32(n_in - 1) / np.float32(n_out - 1) if n_out > 1 else np.float32(0)
            return float(r * np.float32(k))
        r = np.float32(n_in) / np.float32(n_out) if n_out > 1 else np.float32(0)
        return float(r) * (k + 0.5) - 0.5

    out = np.zeros((n, c, oh, ow))
    for i in range(oh):
        y = src(i, h, oh)
        y0 = int(np.floor(y))
        wy = _cubic_weights(y - y0)
        for j in range(ow):
            xx = src(j, w, ow)
            x0 = int(np.floor(xx))
            wx = _cubic_weights(xx - x0)
            acc = 0.0
            for a in range(4):
                for b in range(4):
                    yi = min(max(y0 - 1 + a, 0), h - 1)
                    xi = min(max(x0 - 1 + b, 0), w - 1)
                    acc = acc + wy[a] * wx[b] * x[:, :, yi, xi]
            out[:, :, i, j] = acc
    return out


class TestBicubicInterp(OpTest):
    """fluid 1.8's bicubic_interp (Paddle 2.6's CPU kernel: the same values to 1e-9)."""
    op_type = "bicubic_interp"

    @pytest.mark.parametrize("align_corners", [True, False])
    @pytest.mark.parametrize("h,w,oh,ow", [(4, 5, 7, 3), (6, 6, 12, 13), (3, 8, 2, 1)])
    def test_bicubic(self, align_corners, h, w, oh, ow):
        x = self.rand(2, 3, h, w)
        self.inputs = {"X": x}
        self.attrs = {"out_h": oh, "out_w": ow, "interp_method": "bicubic",
                      "align_corners": align_corners}
        self.outputs = {"Out": ref_bicubic(x, oh, ow, align_corners)}
        self.check_infer()
        self.check_output(atol=1e-9, rtol=1e-9)
        self.check_grad(["X"], "Out")



@pytest.mark.parametrize("shape,k,layout", [((1, 16, 80, 80), 2, "NCHW"),
                                            ((2, 40, 40, 24), 2, "NHWC"),
                                            ((1, 8, 60, 50), 3, "NCHW"),
                                            ((1, 2, 6, 5), 2, "NCHW")])      # small: a gather
@pytest.mark.parametrize("dtype", [np.float32, np.uint8])
def test_nearest_integer_upsampling_copies_the_gather(monkeypatch, shape, k, layout, dtype):
    """An integer up-sampling without corner alignment runs as k phase copies per axis
    (``interp._nearest_axis``, from 64K output elements): the gather's values exactly."""
    x = np.random.default_rng(0).uniform(0, 200, shape).astype(dtype)
    hw = (1, 2) if layout == "NHWC" else (2, 3)
    want = x
    for a in hw:
        want = np.take(want, np.arange(shape[a] * k) // k, axis=a)
    gathers = []
    take = np.take
    monkeypatch.setattr(np, "take", lambda *a, **kw: gathers.append(1) or take(*a, **kw))
    out = get_op_def("nearest_interp").forward(
        x, out_h=shape[hw[0]] * k, out_w=shape[hw[1]] * k, align_corners=False,
        data_layout=layout)["Out"]
    np.testing.assert_array_equal(out, want)
    assert out.dtype == dtype and out.flags.c_contiguous
    big = x.size * k >= interp._NEAREST_COPIES_MIN
    assert len(gathers) == (0 if big else 2)


def test_nearest_axis_gathers_other_indices():
    x = np.arange(200 * 300, dtype=np.float32).reshape(200, 300)     # above the copies' bound
    for idx in (np.arange(600) // 2, np.r_[np.arange(599) // 2, 299], np.r_[np.arange(600) // 2, 0],
                np.repeat(np.arange(300)[::-1], 2), np.arange(300) * 0, np.arange(900) // 3,
                np.arange(300)):
        np.testing.assert_array_equal(interp._nearest_axis(x, idx, 1), np.take(x, idx, axis=1))
    empty = np.zeros((3, 0), np.float32)
    assert interp._nearest_axis(empty, np.zeros(0, np.int64), 1).shape == (3, 0)
