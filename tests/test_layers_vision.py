"""Vision layers (fluidlite/layers/vision.py) through real programs: fluid 1.8 signatures,
attributes, shapes, values against the op references, and argument errors."""
import numpy as np
import pytest

import fluidlite as fluid
from tests.ops.test_conv3d import ref_conv3d, ref_conv3d_transpose, ref_pool3d
from tests.ops.test_vision import ref_bilinear, ref_nearest, ref_trilinear

L = fluid.layers


def run(main, startup, feed, fetch):
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    return exe.run(main, feed=feed, fetch_list=fetch, scope=scope), scope


def test_resize_layers():
    rng = np.random.default_rng(0)
    xv = rng.uniform(size=(2, 3, 4, 6)).astype("float32")
    vv = rng.uniform(size=(1, 2, 3, 4, 2)).astype("float32")
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, 3, 4, 6], "float32")
        v = fluid.data("v", [None, 2, 3, 4, 2], "float32")
        size = fluid.data("size", [2], "int32")
        a = L.resize_bilinear(x, out_shape=[5, 7])
        b = L.resize_nearest(x, scale=2.0, align_corners=False)
        c = L.image_resize(x, out_shape=[3, 3], resample="BILINEAR", align_corners=False,
                           align_mode=0)
        d = L.resize_trilinear(v, out_shape=[2, 5, 3])
        e = L.image_resize_short(x, 8)
        f = L.interpolate(x, out_shape=[2, 2], resample="NEAREST")
        g = L.resize_bilinear(x, out_shape=size)
        dim = L.fill_constant([1], "int32", 5)
        h = L.resize_bilinear(x, out_shape=[dim, 4])
        nhwc = L.resize_bilinear(x, out_shape=[3, 12], data_format="NHWC")
        sc = L.fill_constant([1], "float32", 1.5)
        i = L.resize_nearest(x, scale=sc)
    assert a.shape == (-1, 3, 5, 7) and b.shape == (-1, 3, 8, 12)
    assert e.shape == (-1, 3, 8, 12) and d.shape == (-1, 2, 2, 5, 3)
    assert g.shape == (-1, 3, -1, -1) and h.shape == (-1, 3, -1, 4)
    assert nhwc.shape == (-1, 3, 12, 6) and i.shape == (-1, 3, -1, -1)
    ops = {op.type: op for op in main.global_block().ops}
    assert ops["bilinear_interp"].attr("align_corners") is True
    assert ops["trilinear_interp"].attr("out_d") == 2
    (ra, rb, rc, rd, re, rf, rg, rh, rn, ri), _ = run(
        main, startup, {"x": xv, "v": vv, "size": np.array([6, 2], np.int32)},
        [a, b, c, d, e, f, g, h, nhwc, i])
    x64 = xv.astype(np.float64)
    np.testing.assert_allclose(ra, ref_bilinear(x64, 5, 7), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(rb, ref_nearest(x64, 8, 12, False), rtol=1e-6)
    np.testing.assert_allclose(rc, ref_bilinear(x64, 3, 3, False, 0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(rd, ref_trilinear(vv.astype(np.float64), 2, 5, 3), rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(re, ref_bilinear(x64, 8, 12), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(rf, ref_nearest(x64, 2, 2), rtol=1e-6)
    np.testing.assert_allclose(rg, ref_bilinear(x64, 6, 2), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(rh, ref_bilinear(x64, 5, 4), rtol=1e-5, atol=1e-6)
    # NHWC: the input [2, 3, 4, 6] is read as N=2, H=3, W=4, C=6
    ref = ref_bilinear(x64.transpose(0, 3, 1, 2), 3, 12).transpose(0, 2, 3, 1)
    np.testing.assert_allclose(rn, ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ri, ref_nearest(x64, 6, 9), rtol=1e-6)


def test_resize_errors():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.data("x", [None, 3, 4, 6], "float32")
        with pytest.raises(ValueError, match="resample"):
            L.image_resize(x, [2, 2], resample="CUBIC")
        with pytest.raises(ValueError, match="out_shape and scale"):
            L.resize_bilinear(x)
        with pytest.raises(ValueError, match="out_shape length should be 2"):
            L.resize_bilinear(x, out_shape=[2, 2, 2])
        with pytest.raises(ValueError, match="TRILINEAR"):
            L.resize_trilinear(x, out_shape=[2, 2, 2])
        with pytest.raises(TypeError, match="align_corners"):
            L.resize_bilinear(x, [2, 2], align_corners=1)
        with pytest.raises(ValueError, match="align_mode"):
            L.resize_bilinear(x, [2, 2], align_mode=2)
        with pytest.raises(ValueError, match="greater than zero"):
            L.resize_nearest(x, scale=-1.0)
        with pytest.raises(ValueError, match="data_format"):
            L.resize_bilinear(x, [2, 2], data_format="NCDHW")
        with pytest.raises(TypeError, match="input"):
            L.resize_bilinear(np.zeros((1, 1, 2, 2)), [2, 2])


def test_conv3d_and_pool3d_layers():
    rng = np.random.default_rng(1)
    xv = rng.uniform(-1, 1, size=(2, 2, 4, 5, 4)).astype("float32")
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, 2, 4, 5, 4], "float32")
        y = L.conv3d(x, num_filters=4, filter_size=3, padding=1, groups=2, act="relu",
                     bias_attr=False)
        t = L.conv3d_transpose(x, num_filters=3, filter_size=2, stride=2)
        t2 = L.conv3d_transpose(x, num_filters=2, output_size=[6, 7, 6])
        p = L.pool3d(x, pool_size=2, pool_type="avg", pool_stride=2)
        gp = L.pool3d(x, pool_type="max", global_pooling=True)
        a2 = L.adaptive_pool2d(L.reshape(x, [-1, 8, 5, 4]), pool_size=[2, 3], pool_type="avg")
        a3, mask = L.adaptive_pool3d(x, pool_size=2, require_index=True)
    params = {p_.name: p_ for p_ in main.all_parameters()}
    shapes = sorted(tuple(v.shape) for v in params.values())
    assert (4, 1, 3, 3, 3) in shapes and (2, 3, 2, 2, 2) in shapes and (2, 2, 3, 3, 3) in shapes
    assert y.shape == (-1, 4, 4, 5, 4) and t.shape == (-1, 3, 8, 10, 8)
    assert t2.shape == (-1, 2, 6, 7, 6) and p.shape == (-1, 2, 2, 2, 2)
    assert gp.shape == (-1, 2, 1, 1, 1) and a2.shape == (-1, 8, 2, 3)
    assert a3.shape == (-1, 2, 2, 2, 2) and mask.dtype == "int32"
    (ry, rt, rp, rgp, ra2, ra3), scope = run(main, startup, {"x": xv},
                                             [y, t, p, gp, a2, a3])
    conv_w = [v for v in params.values() if tuple(v.shape) == (4, 1, 3, 3, 3)][0]
    wv = np.asarray(scope.find_var(conv_w.name).get_tensor()).astype(np.float64)
    x64 = xv.astype(np.float64)
    np.testing.assert_allclose(ry, np.maximum(ref_conv3d(x64, wv, p=(1, 1, 1), groups=2), 0),
                               rtol=1e-4, atol=1e-5)
    tw = [v for v in params.values() if tuple(v.shape) == (2, 3, 2, 2, 2)][0]
    twv = np.asarray(scope.find_var(tw.name).get_tensor()).astype(np.float64)
    tb = [v for v in params.values() if tuple(v.shape) == (3,)][0]
    tbv = np.asarray(scope.find_var(tb.name).get_tensor()).astype(np.float64)
    np.testing.assert_allclose(rt, ref_conv3d_transpose(x64, twv, (2, 2, 2))
                               + tbv.reshape(1, 3, 1, 1, 1), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(rp, ref_pool3d(x64, (2, 2, 2), (2, 2, 2), ptype="avg"),
                               rtol=1e-5)
    np.testing.assert_allclose(rgp, x64.max(axis=(2, 3, 4), keepdims=True), rtol=1e-6)
    np.testing.assert_allclose(ra2, ref_pool3d(x64.reshape(2, 8, 5, 4), (2, 3), None, ptype="avg",
                                               adaptive=True), rtol=1e-5)
    np.testing.assert_allclose(ra3, ref_pool3d(x64, (2, 2, 2), None, adaptive=True), rtol=1e-6)


def test_conv3d_pool3d_errors():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.data("x", [None, 4, 4, 4, 4], "float32")
        with pytest.raises(ValueError, match="groups"):
            L.conv3d(x, 3, 3, groups=3)
        with pytest.raises(ValueError, match="5-D"):
            L.conv3d(fluid.data("y", [None, 4, 4, 4], "float32"), 3, 3)
        with pytest.raises(ValueError, match="data_format"):
            L.conv3d(x, 2, 3, data_format="NCHW")
        with pytest.raises(ValueError, match="output_size must be set"):
            L.conv3d_transpose(x, 2)
        with pytest.raises(ValueError, match="pool_type"):
            L.pool3d(x, 2, pool_type="min")
        with pytest.raises(ValueError, match="pool_size must be passed"):
            L.pool3d(x)
        with pytest.raises(ValueError, match="require_index"):
            L.adaptive_pool3d(x, 2, pool_type="avg", require_index=True)
        with pytest.raises(ValueError, match="4-D"):
            L.adaptive_pool2d(x, 2)


def test_conv3d_trains():
    """A conv3d -> pool3d -> fc net learns (the gradient flows through every new op)."""
    rng = np.random.default_rng(2)
    xv = rng.uniform(-1, 1, size=(8, 1, 4, 4, 4)).astype("float32")
    yv = (xv.mean(axis=(1, 2, 3, 4)) > 0).astype("int64").reshape(-1, 1)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, 1, 4, 4, 4], "float32")
        label = fluid.data("label", [None, 1], "int64")
        h = L.conv3d(x, 4, 3, padding=1, act="relu")
        h = L.pool3d(h, 2, "avg", 2)
        h = L.resize_trilinear(h, out_shape=[3, 3, 3])
        logits = L.fc(h, 2)
        loss = L.mean(L.softmax_with_cross_entropy(logits, label))
        fluid.optimizer.Adam(0.05).minimize(loss)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    losses = [float(exe.run(main, feed={"x": xv, "label": yv}, fetch_list=[loss],
                            scope=scope)[0][0]) for _ in range(30)]
    assert losses[-1] < 0.5 * losses[0]


def test_feature_map_layers():
    from tests.ops.test_vision import ref_grid_sample, ref_space_to_depth
    rng = np.random.default_rng(3)
    xv = rng.uniform(-1, 1, (2, 8, 4, 4)).astype("float32")
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [2, 8, 4, 4], "float32")
        ps = L.pixel_shuffle(x, 2)
        sd = L.space_to_depth(x, 2)
        sc = L.shuffle_channel(x, 4)
        ts = L.temporal_shift(x, seg_num=2, shift_ratio=0.25)
        uf = L.unfold(x, [2, 2], strides=2)
        uf2 = L.unfold(x, kernel_size=3, paddings=1, dilation=1)
        const = fluid.initializer.Constant
        scale = L.create_parameter([8], "float32", default_initializer=const(2.0))
        bias = L.create_parameter([8], "float32", default_initializer=const(1.0))
        ac = L.affine_channel(x, scale, bias, act="relu")
        lr = L.lrn(x, n=3, k=1.0, alpha=0.5, beta=0.75)
        theta = L.assign(np.array([[[1, 0, 0], [0, 1, 0]]] * 2, np.float32))
        grid = L.affine_grid(theta, [2, 8, 4, 4])
        gs = L.grid_sampler(x, grid)
        fsp = L.fsp_matrix(x, x)
        cs = L.cos_sim(L.reshape(x, [2, -1]), L.reshape(x, [2, -1]))
        ape = L.add_position_encoding(L.reshape(x, [2, 8, 16]), alpha=1.0, beta=0.0)
        sf = L.similarity_focus(x, axis=1, indexes=[0])
    assert ps.shape == (2, 2, 8, 8) and sd.shape == (2, 32, 2, 2) and uf.shape == (2, 32, 4)
    assert uf2.shape == (2, 72, 16) and grid.shape == (2, 4, 4, 2) and fsp.shape == (2, 8, 8)
    got, _ = run(main, startup, {"x": xv}, [ps, sd, sc, ts, uf, ac, lr, gs, fsp, cs, ape, sf])
    x64 = xv.astype(np.float64)
    np.testing.assert_allclose(got[0][:, 0, 0::2, 1::2], x64[:, 1])      # c*4 + i*2 + j
    np.testing.assert_array_equal(got[1], ref_space_to_depth(xv, 2))
    np.testing.assert_array_equal(got[2][:, 1], xv[:, 2])                 # [4, 2] transposed
    np.testing.assert_array_equal(got[3][1, :2], xv[0, :2])               # t=1 takes t=0
    np.testing.assert_array_equal(got[3][0, 2:4], xv[1, 2:4])             # t=0 takes t=1
    np.testing.assert_array_equal(got[4][:, 0, 0], xv[:, 0, 0, 0])
    np.testing.assert_allclose(got[5], np.maximum(2 * xv + 1, 0), rtol=1e-6)
    mid = np.stack([1.0 + 0.5 * (x64[:, max(c - 1, 0):c + 2] ** 2).sum(axis=1)
                    for c in range(8)], axis=1)                          # n=3: c-1 .. c+1
    np.testing.assert_allclose(got[6], x64 / mid ** 0.75, rtol=1e-5)
    np.testing.assert_allclose(got[7], ref_grid_sample(x64, np.asarray(
        np.tile(_identity_grid(4, 4), (2, 1, 1, 1)))), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[7], xv, rtol=1e-5, atol=1e-6)         # identity sampling
    np.testing.assert_allclose(got[8], np.einsum("nahw,nbhw->nab", x64, x64) / 16, rtol=1e-5)
    np.testing.assert_allclose(got[9], np.ones((2, 1)), rtol=1e-6)
    np.testing.assert_allclose(got[10], xv.reshape(2, 8, 16), rtol=1e-6)
    assert set(np.unique(got[11])) <= {0.0, 1.0} and got[11][:, 0].sum() == 2 * 4


def _identity_grid(h, w):
    ys, xs = np.linspace(-1, 1, h), np.linspace(-1, 1, w)
    gx, gy = np.meshgrid(xs, ys)
    return np.stack([gx, gy], axis=-1)[None]


def test_norm_and_product_layers_train():
    rng = np.random.default_rng(4)
    xv = rng.uniform(-1, 1, (6, 4, 3, 3)).astype("float32")
    yv = rng.integers(0, 2, (6, 1)).astype("int64")
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, 4, 3, 3], "float32")
        label = fluid.data("label", [None, 1], "int64")
        h = L.group_norm(x, groups=2, act="relu")
        h = L.instance_norm(h)
        flat = L.reshape(h, [-1, 36])
        w = L.create_parameter([36, 5], "float32")
        sn = L.spectral_norm(w, dim=1, power_iters=3)
        feats = L.matmul(flat, sn)
        dn = L.data_norm(feats)
        bt = L.bilinear_tensor_product(dn, dn, size=2)
        loss = L.mean(L.softmax_with_cross_entropy(bt, label))
        fluid.optimizer.Adam(0.05, parameter_list=None).minimize(loss)
    params = {p.name: tuple(p.shape) for p in main.all_parameters()}
    assert sorted(v for k, v in params.items() if k.startswith("group_norm")) == [(4,), (4,)]
    assert sorted(v for k, v in params.items() if k.startswith("spectral_norm")) == [(5,), (36,)]
    assert {k.split(".")[-1] for k in params if k.startswith("data_norm")} == \
        {"batch_size", "batch_sum", "batch_square_sum"}
    assert params[[k for k in params if k.startswith("bilinear_tensor_product") and
                   k.endswith("w_0")][0]] == (2, 5, 5)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    first = exe.run(main, feed={"x": xv, "label": yv}, fetch_list=[loss], scope=scope)[0]
    for _ in range(20):
        last = exe.run(main, feed={"x": xv, "label": yv}, fetch_list=[loss], scope=scope)[0]
    assert np.isfinite(last).all() and last[0] < first[0]


def test_mean_iou_layer_and_errors():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        p = fluid.data("p", [None], "int32")
        t = fluid.data("t", [None], "int32")
        iou, wrong, correct = L.mean_iou(p, t, 3)
        with pytest.raises(TypeError, match="Predictions"):
            L.mean_iou(fluid.data("f", [None], "float32"), t, 3)
        xx = fluid.data("xx", [2, 3, 4, 4], "float32")
        with pytest.raises(ValueError, match="divisible by groups"):
            L.group_norm(xx, groups=2)
        with pytest.raises(ValueError, match="axis must be 1, 2 or 3"):
            L.similarity_focus(xx, axis=0, indexes=[0])
        with pytest.raises(ValueError, match="dim must be in"):
            L.spectral_norm(L.create_parameter([3, 4], "float32"), dim=2)
        with pytest.raises(ValueError, match="dimension size of the input must be 4"):
            L.lrn(fluid.data("l3", [2, 3, 4], "float32"))
        with pytest.raises(TypeError, match="scale"):
            L.affine_channel(xx, None, None)
        with pytest.raises(TypeError, match="kernel_sizes"):
            L.unfold(xx)
    (ri, rw, rc), _ = run(main, startup, {"p": np.array([0, 1, 2, 2], np.int32),
                                         "t": np.array([0, 1, 1, 2], np.int32)},
                          [iou, wrong, correct])
    np.testing.assert_array_equal(rc, [1, 1, 1])
    np.testing.assert_array_equal(rw, [0, 1, 1])
    np.testing.assert_allclose(ri, [(1 + 0.5 + 0.5) / 3], rtol=1e-6)


def test_roi_layers_with_lod_rois():
    from tests.ops.test_roi import ROIS, ref_psroi, ref_roi_align, ref_roi_pool
    rng = np.random.default_rng(5)
    xv = rng.permutation(2 * 12 * 6 * 7).reshape(2, 12, 6, 7).astype("float32") * 0.01
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, 12, 6, 7], "float32")
        x.stop_gradient = False
        rois = fluid.data("rois", [None, 4], "float32", lod_level=1)
        ra = L.roi_align(x, rois, 2, 3, 0.5, 2)
        rp = L.roi_pool(x, rois, 2, 2)
        ps = L.psroi_pool(x, rois, 3, 1.0, 2, 2)
        pr = L.prroi_pool(x, rois, 0.5, 2, 2)
        loss = L.mean(ra) + L.mean(rp) + L.mean(ps) + L.mean(pr)
        fluid.backward.append_backward(loss, parameter_list=[])
    assert ra.shape == (-1, 12, 2, 3) and ps.shape == (-1, 3, 2, 2)
    assert pr.shape == (-1, 12, 2, 2)            # fluid 1.8: prroi_pool keeps the channels
    rt = fluid.create_lod_tensor(ROIS.astype("float32"), [[1, 3]], fluid.CPUPlace())
    (a, p, s, q, gx), _ = run(main, startup, {"x": xv, "rois": rt},
                              [ra, rp, ps, pr, "x@GRAD"])
    bid = [0, 1, 1, 1]
    x64 = xv.astype(np.float64)
    np.testing.assert_allclose(a, ref_roi_align(x64, ROIS.astype("float32"), bid, 0.5, 2, 3, 2),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(p, ref_roi_pool(x64, ROIS.astype("float32"), bid, 1.0, 2, 2)[0],
                               rtol=1e-6)
    np.testing.assert_allclose(s, ref_psroi(x64, ROIS.astype("float32"), bid, 3, 1.0, 2, 2),
                               rtol=1e-5)
    from tests.ops.test_roi import ref_prroi
    np.testing.assert_allclose(q, ref_prroi(x64, ROIS.astype("float32"), bid, 0.5, 2, 2),
                               rtol=1e-3, atol=1e-4)
    assert gx.shape == xv.shape and np.abs(gx).sum() > 0
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.data("x", [None, 12, 6, 7], "float32")
        rois = fluid.data("rois", [None, 4], "float32", lod_level=1)
        with pytest.raises(ValueError, match="pooled_height"):
            L.roi_align(x, rois, 0, 2)
        with pytest.raises(TypeError, match="rois"):
            L.roi_pool(x, fluid.data("ri", [None, 4], "int32"))


def test_inplace_abn_layer_matches_batch_norm_then_activation():
    xv = np.random.default_rng(9).uniform(-1, 1, (4, 3, 2, 2)).astype("float32")

    def build(fused):
        main, startup = fluid.Program(), fluid.Program()
        with fluid.program_guard(main, startup):
            x = fluid.data("x", [None, 3, 2, 2], "float32")
            if fused:
                y = L.inplace_abn(x, act="leaky_relu", act_alpha=0.2, moving_mean_name="mm",
                                  moving_variance_name="mv")
            else:
                y = L.leaky_relu(L.batch_norm(x, moving_mean_name="mm",
                                              moving_variance_name="mv"), alpha=0.2)
            loss = L.mean(y * y)
            fluid.optimizer.SGD(0.1).minimize(loss)
        return main, startup, y

    results = []
    for fused in (True, False):
        main, startup, y = build(fused)
        exe = fluid.Executor(fluid.CPUPlace())
        scope = fluid.Scope()
        exe.run(startup, scope=scope)
        for _ in range(3):
            out = exe.run(main, feed={"x": xv}, fetch_list=[y, "mm", "mv"], scope=scope)
        params = sorted(p.name for p in main.all_parameters() if p.trainable)
        out += [np.asarray(scope.find_var(n).get_tensor()) for n in params]
        results.append(out)
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert [op.type for op in build(True)[0].global_block().ops].count("inplace_abn") == 1
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.data("x", [None, 3, 2, 2], "float32")
        with pytest.raises(ValueError, match="act must be"):
            L.inplace_abn(x, act="relu")


def test_deformable_conv_layer_zero_offsets_equal_conv2d():
    """With zero offsets and a unit mask, DCN is an ordinary convolution."""
    from tests.ops.test_deform import ref_deform
    rng = np.random.default_rng(11)
    xv = rng.uniform(-1, 1, (2, 4, 5, 5)).astype("float32")
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, 4, 5, 5], "float32")
        off = fluid.data("off", [None, 18, 5, 5], "float32")
        mask = fluid.data("mask", [None, 9, 5, 5], "float32")
        w_attr = fluid.ParamAttr(name="dcn_w")
        dcn = L.deformable_conv(x, off, mask, 3, 3, padding=1, param_attr=w_attr,
                                bias_attr=False)
        conv = L.conv2d(x, 3, 3, padding=1, param_attr=w_attr, bias_attr=False)
        v1 = L.deformable_conv(x, off, None, 3, 3, padding=1, param_attr=w_attr,
                               bias_attr=False, modulated=False)
        loss = L.mean(dcn)
        fluid.backward.append_backward(loss)
    assert dcn.shape == (-1, 3, 5, 5)
    types = [op.type for op in main.global_block().ops]
    assert "deformable_conv" in types and "deformable_conv_v1" in types
    offv = rng.uniform(-0.5, 0.5, (2, 18, 5, 5)).astype("float32")
    feed = {"x": xv, "off": np.zeros_like(offv), "mask": np.ones((2, 9, 5, 5), "float32")}
    (a, b, c), scope = run(main, startup, feed, [dcn, conv, v1])
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(c, b, rtol=1e-4, atol=1e-5)
    feed["off"] = offv
    (a, gw), scope = run(main, startup, feed, [dcn, "dcn_w@GRAD"])
    w = np.asarray(scope.find_var("dcn_w").get_tensor()).astype(np.float64)
    ref = ref_deform(xv.astype(np.float64), offv.astype(np.float64), np.ones((2, 9, 5, 5)), w,
                     (1, 1), (1, 1), (1, 1), 1, 1)
    np.testing.assert_allclose(a, ref, rtol=1e-4, atol=1e-5)
    assert gw.shape == w.shape and np.abs(gw).sum() > 0
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.data("x", [None, 4, 5, 5], "float32")
        off = fluid.data("off", [None, 18, 5, 5], "float32")
        with pytest.raises(TypeError, match="mask"):
            L.deformable_conv(x, off, None, 3, 3)


def test_deformable_roi_pooling_layer():
    from tests.ops.test_roi import ref_deform_psroi
    rng = np.random.default_rng(14)
    xv = rng.uniform(-1, 1, (1, 8, 8, 9)).astype("float32")
    roi_v = np.array([[1.2, 1.4, 5.6, 6.2], [2.0, 1.0, 6.3, 5.4]], "float32")
    tr_v = rng.uniform(-0.3, 0.3, (2, 2, 2, 2)).astype("float32")
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, 8, 8, 9], "float32")
        rois = fluid.data("rois", [None, 4], "float32", lod_level=1)
        trans = fluid.data("trans", [None, 2, 2, 2], "float32")
        out = L.deformable_roi_pooling(x, rois, trans, pooled_height=2, pooled_width=2,
                                       sample_per_part=2, group_size=[2, 2],
                                       position_sensitive=True)
    assert out.shape == (-1, 2, 2, 2)
    place = fluid.CPUPlace()
    (got,), _ = run(main, startup, {"x": xv, "rois": fluid.create_lod_tensor(roi_v, [[2]],
                                                                             place),
                                    "trans": tr_v}, [out])
    ref = ref_deform_psroi(xv.astype(np.float64), roi_v.astype(np.float64),
                           tr_v.astype(np.float64), False, 1.0, 2, (2, 2), 2, 2, (2, 2), 2, 0.1)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)
