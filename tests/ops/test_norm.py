"""batch_norm, layer_norm, norm (l2_normalize): NumPy references, numeric gradients (including
a randomly weighted loss, since mean(normalized) has a trivial gradient), train/test modes,
in-place running statistics and the layers."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.testing import OpTest, check_grad


def weighted_grad_check(op_type, inputs, attrs, out_slot, out_slots, wrt, max_rel=5e-3):
    """Gradient check of mean(flatten(out) @ r) for a fixed random r (fluidlite.testing)."""
    check_grad(op_type, inputs, out_slot, attrs=attrs, inputs_to_check=wrt,
               max_relative_error=max_rel, weighted=True)


def ref_bn(x, scale, bias, mean, var, eps=1e-5, momentum=0.9, axis=1):
    axes = tuple(a for a in range(x.ndim) if a != axis)
    shape = [x.shape[axis] if a == axis else 1 for a in range(x.ndim)]
    mu, v = x.mean(axis=axes), x.var(axis=axes)
    y = (x - mu.reshape(shape)) / np.sqrt(v.reshape(shape) + eps) * scale.reshape(shape) \
        + bias.reshape(shape)
    return {"Y": y, "MeanOut": mean * momentum + mu * (1 - momentum),
            "VarianceOut": var * momentum + v * (1 - momentum), "SavedMean": mu,
            "SavedVariance": 1 / np.sqrt(v + eps)}


BN_OUTS = ["Y", "MeanOut", "VarianceOut", "SavedMean", "SavedVariance"]


class TestBatchNorm(OpTest):
    op_type = "batch_norm"

    def setup_method(self, *_):
        x = self.rand(3, 2, 3, 2, low=-2, high=3)
        self.stats = dict(Scale=self.rand(2, low=0.5, high=1.5, seed=1),
                          Bias=self.rand(2, seed=2), Mean=self.rand(2, seed=3),
                          Variance=self.rand(2, low=0.5, high=2.0, seed=4))
        self.inputs = dict(X=x, **self.stats)
        self.attrs = {"momentum": 0.8, "epsilon": 1e-5}
        self.outputs = ref_bn(x, *[self.stats[k] for k in ("Scale", "Bias", "Mean", "Variance")],
                              momentum=0.8)

    def test_train(self):
        self.check_infer()
        self.check_output()
        self.check_grad(["X", "Scale", "Bias"], "Y")

    def test_train_weighted_gradient(self):
        weighted_grad_check("batch_norm", self.inputs, self.attrs, "Y", BN_OUTS,
                            ["X", "Scale", "Bias"])

    @pytest.mark.parametrize("flag", ["is_test", "use_global_stats"])
    def test_global_statistics(self, flag):
        s = self.stats
        x = self.inputs["X"]
        inv = 1 / np.sqrt(s["Variance"] + 1e-5)

        def b4(v):
            return v.reshape(1, 2, 1, 1)

        y = (x - b4(s["Mean"])) * b4(inv * s["Scale"]) + b4(s["Bias"])
        self.attrs = {flag: True, "epsilon": 1e-5}
        self.outputs = {"Y": y, "MeanOut": s["Mean"], "VarianceOut": s["Variance"]}
        self.check_output()
        weighted_grad_check("batch_norm", self.inputs, self.attrs, "Y", BN_OUTS,
                            ["X", "Scale", "Bias"])

    def test_trainable_statistics_uses_the_batch_in_test_mode(self):
        self.attrs = dict(self.attrs, is_test=True, trainable_statistics=True)
        self.check_output()

    def test_nhwc_and_2d(self):
        x = self.rand(4, 3, 2, 2, seed=5)
        st = {k: np.resize(v, 2) for k, v in self.stats.items()}
        self.inputs = dict(X=x, **st)
        self.attrs = {"data_layout": "NHWC", "momentum": 0.9}
        self.outputs = ref_bn(x, *[st[k] for k in ("Scale", "Bias", "Mean", "Variance")],
                              axis=3)
        self.check_infer()
        self.check_output()
        weighted_grad_check("batch_norm", self.inputs, self.attrs, "Y", BN_OUTS, ["X", "Scale"])
        x2 = self.rand(5, 2, seed=6)
        self.inputs = dict(X=x2, **self.stats)
        self.attrs = {}
        self.outputs = ref_bn(x2, *[self.stats[k] for k in ("Scale", "Bias", "Mean", "Variance")])
        self.check_output()
        self.check_grad(["X", "Scale", "Bias"], "Y")

    def test_float32_stays_float32(self):
        self.inputs = {k: v.astype("float32") for k, v in self.inputs.items()}
        self.outputs = {k: v.astype("float32") for k, v in self.outputs.items()}
        self.check_output(atol=1e-5, rtol=1e-4)
        from fluidlite.core.registry import get_op_def
        res = get_op_def("batch_norm").forward(*self.inputs.values(), momentum=0.8)
        assert all(res[k].dtype == np.float32 for k in BN_OUTS)

    def test_shape_mismatch(self):
        self.inputs = dict(self.inputs, Scale=self.rand(3))
        with pytest.raises(ValueError, match=r"Scale must have shape \[2\]"):
            self.check_infer()


class TestLayerNorm(OpTest):
    op_type = "layer_norm"

    def setup_method(self, *_):
        x = self.rand(3, 2, 4, low=-2, high=2)
        scale, bias = self.rand(8, low=0.5, high=1.5, seed=1), self.rand(8, seed=2)
        rows = x.reshape(3, 8)
        mu, var = rows.mean(1), rows.var(1)
        y = (rows - mu[:, None]) / np.sqrt(var[:, None] + 1e-5) * scale + bias
        self.inputs = {"X": x, "Scale": scale, "Bias": bias}
        self.attrs = {"begin_norm_axis": 1, "epsilon": 1e-5}
        self.outputs = {"Y": y.reshape(x.shape), "Mean": mu, "Variance": var}

    def test_all(self):
        self.check_infer()
        self.check_output()
        self.check_grad(["X", "Scale", "Bias"], "Y")
        weighted_grad_check("layer_norm", self.inputs, self.attrs, "Y",
                            ["Y", "Mean", "Variance"], ["X", "Scale", "Bias"])

    def test_without_scale_and_bias_axis_2(self):
        x = self.inputs["X"]
        rows = x.reshape(6, 4)
        mu, var = rows.mean(1), rows.var(1)
        self.inputs = {"X": x}
        self.attrs = {"begin_norm_axis": 2}
        self.outputs = {"Y": ((rows - mu[:, None]) / np.sqrt(var[:, None] + 1e-5)).reshape(
            x.shape), "Mean": mu, "Variance": var}
        self.check_infer()
        self.check_output()
        weighted_grad_check("layer_norm", self.inputs, self.attrs, "Y",
                            ["Y", "Mean", "Variance"], ["X"])

    def test_bad_axis(self):
        self.attrs = {"begin_norm_axis": 3}
        with pytest.raises(ValueError, match="begin_norm_axis must be in"):
            self.check_infer()


class TestNorm(OpTest):
    op_type = "norm"

    def setup_method(self, *_):
        x = self.rand(3, 4, 2)
        n = np.sqrt((x ** 2).sum(axis=1, keepdims=True) + 1e-10)
        self.inputs = {"X": x}
        self.attrs = {"axis": 1, "epsilon": 1e-10}
        self.outputs = {"Out": x / n, "Norm": n}

    def test_all(self):
        self.check_infer()
        self.check_output()
        self.check_grad(["X"], "Out")
        weighted_grad_check("norm", self.inputs, self.attrs, "Out", ["Out", "Norm"], ["X"])

    def test_negative_axis(self):
        x = self.inputs["X"]
        n = np.sqrt((x ** 2).sum(axis=-1, keepdims=True) + 1e-10)
        self.attrs = {"axis": -1}
        self.outputs = {"Out": x / n, "Norm": n}
        self.check_infer()
        self.check_output()


class TestBatchNormLayer:
    def _net(self, **kw):
        x = fluid.data("x", [None, 3, 4, 4], "float32")
        y = fluid.layers.batch_norm(x, **kw)
        return x, y

    def test_parameters(self):
        _, y = self._net(act="relu")
        block = fluid.default_main_program().global_block()
        names = [p.name for p in block.all_parameters()]
        assert names == ["batch_norm_0.w_0", "batch_norm_0.b_0", "batch_norm_0.w_1",
                         "batch_norm_0.w_2"]
        mean, var = block.var("batch_norm_0.w_1"), block.var("batch_norm_0.w_2")
        assert not mean.trainable and not var.trainable and mean.persistable
        assert mean.stop_gradient and var.stop_gradient
        op = block.ops[0]
        assert op.type == "batch_norm" and op.attr("is_test") is False
        assert op.output("MeanOut") == ["batch_norm_0.w_1"]
        assert op.output("VarianceOut") == ["batch_norm_0.w_2"]
        assert block.ops[1].type == "relu"
        init = {op.output_arg_names[0]: (op.type, op.attr("value"))
                for op in fluid.default_startup_program().global_block().ops}
        assert init["batch_norm_0.w_0"] == ("fill_constant", 1.0)
        assert init["batch_norm_0.w_1"] == ("fill_constant", 0.0)
        assert init["batch_norm_0.w_2"] == ("fill_constant", 1.0)

    def test_names_and_moving_stats_in_place(self):
        x, y = self._net(momentum=0.5, moving_mean_name="mm", moving_variance_name="mv")
        loss = fluid.layers.mean(y)
        params_grads = fluid.backward.append_backward(loss)
        assert sorted(p.name for p, _ in params_grads) == ["batch_norm_0.b_0",
                                                           "batch_norm_0.w_0"]
        test_prog = fluid.default_main_program().clone(for_test=True)
        exe = fluid.Executor(fluid.CPUPlace())
        exe.run(fluid.default_startup_program())
        xv = np.random.default_rng(0).uniform(1, 3, (4, 3, 4, 4)).astype("float32")
        scope = fluid.global_scope()
        exe.run(feed={"x": xv}, fetch_list=[loss])
        mm = np.array(scope.find_var("mm").get_tensor())
        mv = np.array(scope.find_var("mv").get_tensor())
        np.testing.assert_allclose(mm, 0.5 * xv.mean(axis=(0, 2, 3)), rtol=1e-5)
        np.testing.assert_allclose(mv, 0.5 + 0.5 * xv.var(axis=(0, 2, 3)), rtol=1e-5)
        # the test program normalizes with the running statistics and leaves them alone
        out, = exe.run(test_prog, feed={"x": xv}, fetch_list=[y.name])
        ref = (xv - mm.reshape(1, 3, 1, 1)) / np.sqrt(mv.reshape(1, 3, 1, 1) + 1e-5)
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5)
        np.testing.assert_array_equal(np.array(scope.find_var("mm").get_tensor()), mm)
        assert [op.attr("is_test") for op in test_prog.global_block().ops
                if op.type == "batch_norm"] == [True]

    def test_errors(self):
        x = fluid.data("x", [None, 3, 4, 4], "float32")
        with pytest.raises(ValueError, match="bias_attr should not be False"):
            fluid.layers.batch_norm(x, bias_attr=False)
        with pytest.raises(ValueError, match="unsupported data_layout"):
            fluid.layers.batch_norm(x, data_layout="NCWH")
        with pytest.raises(TypeError, match="must be float16/32/64"):
            fluid.layers.batch_norm(fluid.data("i", [None, 3], "int64"))

    def test_nhwc_layer(self):
        x = fluid.data("x", [None, 4, 4, 5], "float32")
        fluid.layers.batch_norm(x, data_layout="NHWC")
        assert fluid.default_main_program().global_block().var("batch_norm_0.w_0").shape == (5,)


class TestLayerNormAndL2NormalizeLayers:
    def test_layer_norm(self):
        x = fluid.data("x", [None, 3, 4], "float32")
        y = fluid.layers.layer_norm(x, begin_norm_axis=1, act="relu")
        block = fluid.default_main_program().global_block()
        assert block.var("layer_norm_0.w_0").shape == (12,)
        assert block.var("layer_norm_0.b_0").shape == (12,)
        exe = fluid.Executor(fluid.CPUPlace())
        exe.run(fluid.default_startup_program())
        xv = np.random.default_rng(0).standard_normal((2, 3, 4)).astype("float32")
        out, = exe.run(feed={"x": xv}, fetch_list=[y])
        rows = xv.reshape(2, 12)
        ref = (rows - rows.mean(1, keepdims=True)) / np.sqrt(rows.var(1, keepdims=True) + 1e-5)
        np.testing.assert_allclose(out, np.maximum(ref, 0).reshape(xv.shape), atol=1e-5)
        z = fluid.layers.layer_norm(x, scale=False, shift=False, begin_norm_axis=2)
        assert [op.input_names for op in block.ops if op.type == "layer_norm"][-1] == ["X"]
        assert z.shape == (-1, 3, 4)

    def test_l2_normalize(self):
        x = fluid.data("x", [None, 3], "float32")
        y = fluid.layers.l2_normalize(x, axis=1)
        v = fluid.data("v", [3], "float32")
        w = fluid.layers.l2_normalize(v, axis=1)      # 1-D input: axis 0
        exe = fluid.Executor(fluid.CPUPlace())
        xv = np.array([[3.0, 4.0, 0.0], [1.0, 1.0, 1.0]], "float32")
        a, b = exe.run(feed={"x": xv, "v": xv[0]}, fetch_list=[y, w])
        np.testing.assert_allclose(a, xv / np.linalg.norm(xv, axis=1, keepdims=True), rtol=1e-6)
        np.testing.assert_allclose(b, [0.6, 0.8, 0.0], rtol=1e-6)
        assert fluid.default_main_program().global_block().ops[0].type == "norm"
