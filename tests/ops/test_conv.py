"""conv2d, depthwise_conv2d, conv2d_transpose: kernels vs direct NumPy references, numeric
gradients, the lazy grad mapping, and the conv2d / conv2d_transpose layers."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core.registry import get_op_def
from fluidlite.testing import OpTest, check_grad


def ref_conv(x, w, strides=(1, 1), pads=(0, 0, 0, 0), dil=(1, 1), groups=1):
    """Direct convolution: a sum over kernel offsets of strided input slices (no im2col)."""
    N, C, H, W = x.shape
    F, Cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[1]), (pads[2], pads[3])))
    oh = (H + pads[0] + pads[1] - dil[0] * (kh - 1) - 1) // strides[0] + 1
    ow = (W + pads[2] + pads[3] - dil[1] * (kw - 1) - 1) // strides[1] + 1
    out = np.zeros((N, F, oh, ow))
    fg = F // groups
    for f in range(F):
        g = f // fg
        for i in range(kh):
            for j in range(kw):
                patch = xp[:, g * Cg:(g + 1) * Cg,
                           i * dil[0]:i * dil[0] + strides[0] * (oh - 1) + 1:strides[0],
                           j * dil[1]:j * dil[1] + strides[1] * (ow - 1) + 1:strides[1]]
                out[:, f] += np.einsum("nchw,c->nhw", patch, w[f, :, i, j])
    return out


def ref_conv_transpose(x, w, strides=(1, 1), pads=(0, 0, 0, 0), dil=(1, 1), groups=1,
                       out_hw=None):
    """Scatter every input pixel times the kernel into the (uncropped) output, then crop."""
    N, Cin, H, W = x.shape
    _, Fg, kh, kw = w.shape
    cg = Cin // groups
    nat = [(H - 1) * strides[0] - pads[0] - pads[1] + dil[0] * (kh - 1) + 1,
           (W - 1) * strides[1] - pads[2] - pads[3] + dil[1] * (kw - 1) + 1]
    out_hw = out_hw or nat
    full = np.zeros((N, Fg * groups, pads[0] + out_hw[0] + kh * dil[0] + H * strides[0],
                     pads[2] + out_hw[1] + kw * dil[1] + W * strides[1]))
    for c in range(Cin):
        g = c // cg
        for i in range(kh):
            for j in range(kw):
                full[:, g * Fg:(g + 1) * Fg,
                     i * dil[0]:i * dil[0] + strides[0] * (H - 1) + 1:strides[0],
                     j * dil[1]:j * dil[1] + strides[1] * (W - 1) + 1:strides[1]] += \
                    x[:, c, None] * w[c, :, i, j][None, :, None, None]
    return full[:, :, pads[0]:pads[0] + out_hw[0], pads[2]:pads[2] + out_hw[1]]


def weighted_grad_check(op_type, inputs, attrs, out_slot, out_slots, wrt, max_rel=5e-3):
    """Gradient check of mean(flatten(out) @ r) for a fixed random r (fluidlite.testing)."""
    check_grad(op_type, inputs, out_slot, attrs=attrs, inputs_to_check=wrt,
               max_relative_error=max_rel, weighted=True)


class TestConv2D(OpTest):
    op_type = "conv2d"

    def setup_method(self, *_):
        x, w = self.rand(2, 2, 5, 5), self.rand(3, 2, 3, 3, seed=1)
        self.inputs = {"Input": x, "Filter": w}
        self.attrs = {"strides": [1, 1], "paddings": [1, 1], "dilations": [1, 1], "groups": 1}
        self.outputs = {"Output": ref_conv(x, w, pads=(1, 1, 1, 1))}

    def test_all(self):
        self.check_infer()
        self.check_output()
        self.check_grad(["Input", "Filter"], "Output")

    def test_weighted_gradient(self):
        weighted_grad_check("conv2d", self.inputs, self.attrs, "Output", ["Output"],
                            ["Input", "Filter"])

    def test_stride_asymmetric_padding_dilation_groups(self):
        x, w = self.rand(2, 4, 7, 6), self.rand(4, 2, 3, 2, seed=1)
        self.inputs = {"Input": x, "Filter": w}
        self.attrs = {"strides": [2, 1], "paddings": [1, 2, 0, 1], "dilations": [2, 1],
                      "groups": 2}
        self.outputs = {"Output": ref_conv(x, w, (2, 1), (1, 2, 0, 1), (2, 1), 2)}
        self.check_infer()
        self.check_output()
        self.check_grad(["Input", "Filter"], "Output")

    def test_stride2_dilation2(self):
        x, w = self.rand(1, 2, 9, 9), self.rand(2, 2, 3, 3, seed=1)
        self.inputs = {"Input": x, "Filter": w}
        self.attrs = {"strides": [2, 2], "paddings": [2, 2], "dilations": [2, 2]}
        self.outputs = {"Output": ref_conv(x, w, (2, 2), (2, 2, 2, 2), (2, 2))}
        self.check_output()
        weighted_grad_check("conv2d", self.inputs, self.attrs, "Output", ["Output"],
                            ["Input", "Filter"])

    def test_wide_output_layout(self):
        # ow >= 16 takes the batch-second column layout (narrow outputs go batch-last)
        x, w = self.rand(2, 1, 9, 18), self.rand(2, 1, 3, 3, seed=1)
        self.inputs = {"Input": x, "Filter": w}
        self.attrs = {"paddings": [1, 1]}
        self.outputs = {"Output": ref_conv(x, w, pads=(1, 1, 1, 1))}
        self.check_output()
        self.check_grad(["Input", "Filter"], "Output")

    def test_nhwc(self):
        x, w = self.rand(2, 5, 4, 3), self.rand(2, 3, 3, 3, seed=1)
        self.inputs = {"Input": x, "Filter": w}
        self.attrs = {"paddings": [1, 0], "data_format": "NHWC"}
        ref = ref_conv(x.transpose(0, 3, 1, 2), w, pads=(1, 1, 0, 0))
        self.outputs = {"Output": ref.transpose(0, 2, 3, 1)}
        self.check_infer()
        self.check_output()
        self.check_grad(["Input", "Filter"], "Output")

    @pytest.mark.parametrize("algo,pads", [("SAME", (1, 1, 0, 1)), ("VALID", (0, 0, 0, 0))])
    def test_padding_algorithm(self, algo, pads):
        x, w = self.rand(1, 2, 6, 5), self.rand(2, 2, 3, 2, seed=1)
        self.inputs = {"Input": x, "Filter": w}
        self.attrs = {"paddings": [3, 3], "padding_algorithm": algo}
        self.outputs = {"Output": ref_conv(x, w, pads=pads)}
        self.check_infer()
        self.check_output()

    def test_float32_stays_float32(self):
        x, w = (a.astype("float32") for a in (self.inputs["Input"], self.inputs["Filter"]))
        self.inputs = {"Input": x, "Filter": w}
        self.outputs = {"Output": ref_conv(x, w, pads=(1, 1, 1, 1)).astype("float32")}
        self.check_output(atol=1e-5)
        out = get_op_def("conv2d").forward(x, w, paddings=[1, 1])["Output"]
        assert out.dtype == np.float32 and out.flags.c_contiguous

    def test_channel_mismatch_is_reported(self):
        self.inputs = {"Input": self.rand(1, 3, 5, 5), "Filter": self.rand(2, 2, 3, 3)}
        with pytest.raises(ValueError, match=r"Input has 3 channels but Filter \[2, 2, 3, 3\]"):
            self.check_infer()

    def test_empty_output_is_reported(self):
        self.inputs = {"Input": self.rand(1, 2, 2, 2), "Filter": self.rand(2, 2, 3, 3)}
        self.attrs = {}
        with pytest.raises(ValueError, match="output size"):
            self.check_infer()


class TestDepthwiseConv2D(OpTest):
    op_type = "depthwise_conv2d"

    def test_all(self):
        x, w = self.rand(2, 3, 5, 5), self.rand(6, 1, 3, 3, seed=1)
        self.inputs = {"Input": x, "Filter": w}
        self.attrs = {"paddings": [1, 1], "groups": 3}
        self.outputs = {"Output": ref_conv(x, w, pads=(1, 1, 1, 1), groups=3)}
        self.check_infer()
        self.check_output()
        self.check_grad(["Input", "Filter"], "Output")


class TestConv2DTranspose(OpTest):
    op_type = "conv2d_transpose"

    def setup_method(self, *_):
        x, w = self.rand(2, 3, 3, 4), self.rand(3, 2, 3, 3, seed=1)
        self.inputs = {"Input": x, "Filter": w}
        self.attrs = {"strides": [2, 2], "paddings": [1, 1]}
        self.outputs = {"Output": ref_conv_transpose(x, w, (2, 2), (1, 1, 1, 1))}

    def test_all(self):
        self.check_infer()
        self.check_output()
        self.check_grad(["Input", "Filter"], "Output")

    def test_weighted_gradient(self):
        weighted_grad_check("conv2d_transpose", self.inputs, self.attrs, "Output", ["Output"],
                            ["Input", "Filter"])

    def test_output_size_groups_dilation(self):
        x, w = self.rand(1, 4, 3, 3), self.rand(4, 1, 2, 3, seed=1)
        self.inputs = {"Input": x, "Filter": w}
        out_hw = [7, 9]     # natural size is [6, 9]; one extra row allowed by stride 2
        self.attrs = {"strides": [2, 2], "paddings": [0, 1, 0, 0], "dilations": [2, 2],
                      "groups": 2, "output_size": out_hw}
        self.outputs = {"Output": ref_conv_transpose(x, w, (2, 2), (0, 1, 0, 0), (2, 2), 2,
                                                     out_hw)}
        self.check_infer()
        self.check_output()
        self.check_grad(["Input", "Filter"], "Output")

    def test_stride1_nhwc(self):
        x, w = self.rand(1, 3, 4, 2), self.rand(2, 3, 2, 2, seed=1)
        self.inputs = {"Input": x, "Filter": w}
        self.attrs = {"data_format": "NHWC", "paddings": [1, 0]}
        ref = ref_conv_transpose(x.transpose(0, 3, 1, 2), w, pads=(1, 1, 0, 0))
        self.outputs = {"Output": ref.transpose(0, 2, 3, 1)}
        self.check_infer()
        self.check_output()
        self.check_grad(["Input", "Filter"], "Output")

    def test_unreachable_output_size(self):
        self.attrs = dict(self.attrs, output_size=[9, 9])
        with pytest.raises(ValueError, match="output_size .* is not reachable"):
            self.check_infer()


def test_grad_kernel_computes_only_requested_slots(monkeypatch):
    from fluidlite.ops import conv
    calls = []
    monkeypatch.setattr(conv, "_conv_dx", lambda *a: calls.append("dx"))
    x, w = OpTest.rand(2, 1, 6, 6), OpTest.rand(4, 1, 3, 3, seed=1)
    dy = np.ones((2, 4, 4, 4))
    res = get_op_def("conv2d_grad").forward(x, w, dy)
    dw = res["Filter@GRAD"]
    assert calls == [] and dw.shape == w.shape
    # dOutput = 1: every filter's gradient is the 4x4 box sum of the batch-summed image
    box = ref_conv(x.sum(axis=0, keepdims=True), np.ones((1, 1, 4, 4)))
    np.testing.assert_allclose(dw, np.broadcast_to(box, w.shape), rtol=1e-10)


def test_first_conv_of_a_network_gets_no_input_gradient():
    img = fluid.data("img", [None, 1, 6, 6], "float32")
    y = fluid.layers.conv2d(img, num_filters=2, filter_size=3)
    loss = fluid.layers.mean(y)
    fluid.backward.append_backward(loss)
    grad_ops = [op for op in fluid.default_main_program().global_block().ops
                if op.type == "conv2d_grad"]
    assert len(grad_ops) == 1
    assert grad_ops[0].output_names == ["Filter@GRAD"]


class TestConv2DLayer:
    def test_parameters_names_and_default_init(self):
        main, startup = fluid.default_main_program(), fluid.default_startup_program()
        main.random_seed = 5
        x = fluid.data("x", [None, 8, 10, 10], "float32")
        y = fluid.layers.conv2d(x, num_filters=16, filter_size=3, padding=1, act="relu")
        assert y.shape == (-1, 16, 10, 10)
        w = main.global_block().var("conv2d_0.w_0")
        b = main.global_block().var("conv2d_0.b_0")
        assert w.shape == (16, 8, 3, 3) and b.shape == (16,)
        init = [op for op in startup.global_block().ops if "conv2d_0.w_0" in op.output_arg_names]
        assert init[0].type == "gaussian_random"
        assert init[0].attr("std") == pytest.approx((2.0 / (3 * 3 * 8)) ** 0.5)
        types = [op.type for op in main.global_block().ops]
        assert types == ["conv2d", "elementwise_add", "relu"]
        add = main.global_block().ops[1]
        assert add.attr("axis") == 1
        exe = fluid.Executor(fluid.CPUPlace())
        exe.run(startup)
        xv = np.random.default_rng(0).standard_normal((2, 8, 10, 10)).astype("float32")
        out, = exe.run(main, feed={"x": xv}, fetch_list=[y])
        wv = np.array(fluid.global_scope().find_var("conv2d_0.w_0").get_tensor())
        assert abs(wv.std() - (2.0 / 72) ** 0.5) < 0.03
        np.testing.assert_allclose(out, np.maximum(ref_conv(xv, wv, pads=(1, 1, 1, 1)), 0),
                                   rtol=1e-4, atol=1e-4)

    def test_groups_stride_padding_forms_and_nhwc(self):
        x = fluid.data("x", [None, 4, 9, 9], "float32")
        y = fluid.layers.conv2d(x, 6, [3, 1], stride=2, padding=[1, 2, 0, 0], groups=2,
                                bias_attr=False)
        assert y.shape == (-1, 6, 5, 5)
        z = fluid.layers.conv2d(x, 4, 3, padding="SAME")
        assert z.shape == (-1, 4, 9, 9)
        v = fluid.layers.conv2d(x, 4, 3, padding=[[0, 0], [0, 0], [1, 1], [2, 2]])
        assert v.shape == (-1, 4, 9, 11)
        xh = fluid.data("xh", [None, 9, 9, 4], "float32")
        h = fluid.layers.conv2d(xh, 5, 3, data_format="NHWC")
        assert h.shape == (-1, 7, 7, 5)
        ops = fluid.default_main_program().global_block().ops
        assert ops[-1].type == "elementwise_add" and ops[-1].attr("axis") == 3

    def test_depthwise_when_cudnn_is_off(self):
        x = fluid.data("x", [None, 4, 6, 6], "float32")
        fluid.layers.conv2d(x, 8, 3, groups=4, use_cudnn=False)
        assert fluid.default_main_program().global_block().ops[0].type == "depthwise_conv2d"

    def test_bad_arguments(self):
        x = fluid.data("x", [None, 4, 6, 6], "float32")
        with pytest.raises(ValueError, match="divisible by groups"):
            fluid.layers.conv2d(x, 6, 3, groups=3)
        with pytest.raises(ValueError, match="must be 4-D"):
            fluid.layers.conv2d(fluid.data("f", [None, 4], "float32"), 2, 3)
        with pytest.raises(ValueError, match="'SAME' or 'VALID'"):
            fluid.layers.conv2d(x, 2, 3, padding="FULL")


class TestConv2DTransposeLayer:
    def test_filter_size_from_output_size(self):
        x = fluid.data("x", [None, 3, 7, 7], "float32")
        y = fluid.layers.conv2d_transpose(x, num_filters=2, output_size=14, padding=1, stride=2)
        w = fluid.default_main_program().global_block().var("conv2d_transpose_0.w_0")
        # k = (14 - (7 - 1) * 2 + 2 * 1 - 1) // 1 + 1 = 4
        assert w.shape == (3, 2, 4, 4) and y.shape == (-1, 2, 14, 14)

    def test_runs_and_matches_reference(self):
        x = fluid.data("x", [None, 2, 4, 4], "float32")
        y = fluid.layers.conv2d_transpose(x, 3, filter_size=3, stride=2, bias_attr=False,
                                          act="relu")
        assert y.shape == (-1, 3, 9, 9)
        exe = fluid.Executor(fluid.CPUPlace())
        exe.run(fluid.default_startup_program())
        xv = np.random.default_rng(0).standard_normal((2, 2, 4, 4)).astype("float32")
        out, = exe.run(feed={"x": xv}, fetch_list=[y])
        wv = np.array(fluid.global_scope().find_var("conv2d_transpose_0.w_0").get_tensor())
        ref = np.maximum(ref_conv_transpose(xv, wv, (2, 2)), 0)
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5)

    def test_needs_filter_or_output_size(self):
        x = fluid.data("x", [None, 2, 4, 4], "float32")
        with pytest.raises(ValueError, match="output_size must be set"):
            fluid.layers.conv2d_transpose(x, 3)


class TestNets:
    """fluid.nets compositions built on these layers."""

    def test_simple_img_conv_pool(self):
        x = fluid.data("x", [None, 1, 12, 12], "float32")
        y = fluid.nets.simple_img_conv_pool(x, num_filters=4, filter_size=3, pool_size=2,
                                            pool_stride=2, act="relu", conv_padding=1)
        assert y.shape == (-1, 4, 6, 6)
        ops = fluid.default_main_program().global_block().ops
        assert [op.type for op in ops] == ["conv2d", "elementwise_add", "relu", "pool2d"]

    def test_img_conv_group(self):
        x = fluid.data("x", [None, 3, 8, 8], "float32")
        y = fluid.nets.img_conv_group(x, conv_num_filter=[4, 6], pool_size=2, pool_stride=2,
                                      conv_act="relu", conv_with_batchnorm=[True, False],
                                      conv_batchnorm_drop_rate=[0.5, 0.0])
        assert y.shape == (-1, 6, 4, 4)
        types = [op.type for op in fluid.default_main_program().global_block().ops]
        assert types == ["conv2d", "elementwise_add", "batch_norm", "relu", "dropout",
                         "conv2d", "elementwise_add", "relu", "pool2d"]
        with pytest.raises(ValueError, match="conv_padding has 3 entries"):
            fluid.nets.img_conv_group(x, [4, 4], 2, conv_padding=[1, 1, 1])

    def test_glu_and_attention_values(self):
        x = fluid.data("x", [None, 6], "float32")
        q = fluid.data("q", [None, 3, 4], "float32")
        k = fluid.data("k", [None, 5, 4], "float32")
        v = fluid.data("v", [None, 5, 6], "float32")
        g = fluid.nets.glu(x, dim=-1)
        a1 = fluid.nets.scaled_dot_product_attention(q, k, v)
        a2 = fluid.nets.scaled_dot_product_attention(q, k, v, num_heads=2)
        rng = np.random.default_rng(0)
        feed = {n: rng.standard_normal(s).astype("float32")
                for n, s in (("x", (2, 6)), ("q", (2, 3, 4)), ("k", (2, 5, 4)), ("v", (2, 5, 6)))}
        gv, o1, o2 = fluid.Executor(fluid.CPUPlace()).run(feed=feed, fetch_list=[g, a1, a2])
        xv = feed["x"]
        np.testing.assert_allclose(gv, xv[:, :3] / (1 + np.exp(-xv[:, 3:])), rtol=1e-5)

        def attention(qv, kv, vv):
            s = qv @ kv.transpose(0, 2, 1) / np.sqrt(qv.shape[-1])
            w = np.exp(s - s.max(-1, keepdims=True))
            return (w / w.sum(-1, keepdims=True)) @ vv

        np.testing.assert_allclose(o1, attention(feed["q"], feed["k"], feed["v"]), rtol=1e-4,
                                   atol=1e-5)
        heads = [attention(feed["q"][..., 2 * h:2 * h + 2], feed["k"][..., 2 * h:2 * h + 2],
                           feed["v"][..., 3 * h:3 * h + 3]) for h in range(2)]
        np.testing.assert_allclose(o2, np.concatenate(heads, axis=-1), rtol=1e-4, atol=1e-5)


def test_window_larger_than_input_is_a_build_error():
    import fluidlite as fluid
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data(name="x", shape=[-1, 3, 8, 8], dtype="float32")
        before = (main.version, str(main), str(startup))
        with pytest.raises(ValueError, match=r"output size \[-11, -11\] is not positive"):
            fluid.layers.conv2d(x, num_filters=4, filter_size=20)
        with pytest.raises(ValueError, match=r"pool2d: output size .* is not positive"):
            fluid.layers.pool2d(x, pool_size=9)
        assert (main.version, str(main), str(startup)) == before


# -- fluid's C++ integer arithmetic (issue 29) ----------------------------------------------------
class TestConvTruncatedOutputSize(OpTest):
    """ConvOutputSize in C++: (2 - 3) / 2 + 1 = 1, not 0 (Python's floor): the window hangs
    past the input and fluid's im2col reads zeros there (Paddle 2.6: same values)."""

    @pytest.mark.parametrize("op_type,shape,f,strides,pads,dil,groups", [
        ("conv2d", (1, 2, 2, 2), (3, 2, 3, 3), (2, 2), (0, 0), (1, 1), 1),
        ("conv2d", (2, 2, 1, 5), (3, 2, 2, 2), (2, 2), (0, 0), (1, 1), 1),
        ("conv2d", (1, 2, 5, 5), (2, 2, 3, 3), (3, 3), (1, 1), (2, 2), 1),
        ("conv2d", (1, 2, 4, 3), (2, 2, 3, 3), (4, 4), (0, 1, 0, 0), (1, 1), 1),
        ("depthwise_conv2d", (1, 2, 2, 2), (2, 1, 3, 3), (2, 2), (0, 0), (1, 1), 2)])
    def test_conv(self, op_type, shape, f, strides, pads, dil, groups):
        self.op_type = op_type
        x, w = self.rand(*shape), self.rand(*f, seed=1)
        p4 = list(pads) if len(pads) == 4 else [pads[0], pads[0], pads[1], pads[1]]
        oh, ow = (int((n + p4[2 * i] + p4[2 * i + 1] - dil[i] * (f[2 + i] - 1) - 1) / strides[i])
                  + 1 for i, n in enumerate(shape[2:]))
        assert min(oh, ow) == 1
        # the reference: enough zero rows/cols after the input for the last window
        extra = [max((o - 1) * strides[i] + dil[i] * (f[2 + i] - 1) + 1
                     - (shape[2 + i] + p4[2 * i] + p4[2 * i + 1]), 0)
                 for i, o in enumerate((oh, ow))]
        ref = ref_conv(x, w, strides, (p4[0], p4[1] + extra[0], p4[2], p4[3] + extra[1]), dil,
                       groups)
        assert ref.shape[2:] == (oh, ow)
        self.inputs = {"Input": x, "Filter": w}
        self.attrs = {"strides": list(strides), "paddings": list(pads),
                      "dilations": list(dil), "groups": groups}
        self.outputs = {"Output": ref}
        self.check_infer()
        self.check_output()
        self.check_grad(["Input", "Filter"], "Output")

    def test_paddle_values(self):
        # Paddle 2.6: conv2d of arange(4) [1,1,2,2] with ones(3x3), stride 2 -> [[[[6.]]]]
        self.op_type = "conv2d"
        self.inputs = {"Input": np.arange(4.0).reshape(1, 1, 2, 2),
                       "Filter": np.ones((1, 1, 3, 3))}
        self.attrs = {"strides": [2, 2]}
        self.outputs = {"Output": np.array([[[[6.0]]]])}
        self.check_infer()
        self.check_output()


class TestDepthwiseConv2DTranspose(OpTest):
    """fluid 1.8's depthwise_conv2d_transpose: conv2d_transpose with groups == channels
    (Paddle 2.6: the same values and gradients)."""
    op_type = "depthwise_conv2d_transpose"

    def test_depthwise_transpose(self):
        x, w = self.rand(2, 3, 4, 5), self.rand(3, 1, 3, 3, seed=1)
        self.inputs = {"Input": x, "Filter": w}
        self.attrs = {"strides": [2, 2], "paddings": [1, 1], "groups": 3}
        self.outputs = {"Output": ref_conv_transpose(x, w, (2, 2), (1, 1, 1, 1), groups=3)}
        self.check_infer()
        self.check_output()
        self.check_grad(["Input", "Filter"], "Output")


@pytest.mark.parametrize("h,s,k", [(5, 2, 3), (7, 2, 5), (4, 2, 3), (3, 4, 2)])
def test_conv2d_transpose_same_padding_is_fluids(h, s, k):
    """padding_algorithm SAME pads as fluid's UpdatePaddingAndDilation does on the *input*:
    total = max((ceil(h / s) - 1) * s + k - h, 0), so input 5, stride 2, kernel 3 gives 9
    (Paddle 2.6: 9; it was 10 before), input 7, stride 2, kernel 5 gives 13."""
    x, w = OpTest.rand(1, 2, h, h), OpTest.rand(2, 3, k, k, seed=1)
    total = max((-(-h // s) - 1) * s + k - h, 0)
    p = (total // 2, total - total // 2)
    t = OpTest()
    t.op_type, t.inputs = "conv2d_transpose", {"Input": x, "Filter": w}
    t.attrs = {"strides": [s, s], "paddings": [0, 0], "padding_algorithm": "SAME",
               "dilations": [2, 2]}                     # (SAME resets the dilation to 1)
    t.outputs = {"Output": ref_conv_transpose(x, w, (s, s), (p[0], p[1], p[0], p[1]))}
    assert t.outputs["Output"].shape[2] == (h - 1) * s - total + k
    t.check_infer()
    t.check_output()
