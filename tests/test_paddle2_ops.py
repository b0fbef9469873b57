"""Ops added for Paddle 2.x programs (issue 18, fluidlite/ops/paddle2.py): forward against NumPy,
numeric gradients in float64, and clear errors."""
import numpy as np
import pytest

from fluidlite.core.registry import VarSpec, get_op_def
from fluidlite.testing import OpTest, check_double_grad, check_grad


class TestFlattenContiguousRange(OpTest):
    op_type = "flatten_contiguous_range"

    @pytest.mark.parametrize("start,stop,want", [(1, 2, (2, 12, 5)), (0, -1, (120,)),
                                                 (-2, -1, (2, 3, 20)), (2, 2, (2, 3, 4, 5))])
    def test_forward_and_grad(self, start, stop, want):
        x = self.rand(2, 3, 4, 5)
        self.inputs, self.attrs = {"X": x}, {"start_axis": start, "stop_axis": stop}
        self.outputs = {"Out": x.reshape(want)}
        self.check_infer()
        self.check_output()
        self.check_grad(["X"], "Out")

    def test_double_grad(self):
        check_double_grad(self.op_type, {"X": self.rand(2, 3, 4)}, "Out",
                          attrs={"start_axis": 0, "stop_axis": 1})

    def test_zero_d_and_bad_range(self):
        d = get_op_def(self.op_type)
        assert d.forward(np.float32(3.0).reshape(()))["Out"].shape == (1,)
        with pytest.raises(ValueError, match="start_axis .* must not be after stop_axis"):
            d.infer(VarSpec((2, 3, 4), 5, 0), start_axis=2, stop_axis=1)

    def test_unknown_batch_dim(self):
        out = get_op_def(self.op_type).infer(VarSpec((-1, 3, 4), 5, 0), start_axis=1,
                                             stop_axis=2)["Out"]
        assert out.shape == (-1, 12)


class TestExpandV2(OpTest):
    op_type = "expand_v2"

    @pytest.mark.parametrize("xs,shape,want", [((3, 1), [2, 3, 4], (2, 3, 4)),
                                               ((3, 1), [-1, 5], (3, 5)),
                                               ((1,), [4], (4,))])
    def test_forward_and_grad(self, xs, shape, want):
        x = self.rand(*xs)
        self.inputs, self.attrs = {"X": x}, {"shape": shape}
        self.outputs = {"Out": np.broadcast_to(x, want).copy()}
        self.check_infer()
        self.check_output()
        self.check_grad(["X"], "Out", weighted=True)

    def test_shape_tensor(self):
        x = self.rand(3, 1)
        out = get_op_def(self.op_type).forward(x, np.array([3, 6], np.int32))["Out"]
        np.testing.assert_array_equal(out, np.broadcast_to(x, (3, 6)))

    def test_errors(self):
        d = get_op_def(self.op_type)
        with pytest.raises(ValueError, match="X's dim 0 is 3, which cannot be expanded to 4"):
            d.infer(VarSpec((3, 1), 5, 0), shape=[4, 2])
        with pytest.raises(ValueError, match="fewer dims than X"):
            d.infer(VarSpec((3, 1), 5, 0), shape=[3])
        with pytest.raises(ValueError, match="only X's own dims may be -1"):
            d.infer(VarSpec((3, 1), 5, 0), shape=[-1, 3, 1])


class TestTile(OpTest):
    op_type = "tile"

    @pytest.mark.parametrize("xs,reps", [((2, 3), [2, 1]), ((2, 3), [3]), ((3,), [2, 2]),
                                         ((2, 1, 3), [1, 4, 2])])
    def test_forward_and_grad(self, xs, reps):
        x = self.rand(*xs)
        self.inputs, self.attrs = {"X": x}, {"repeat_times": reps}
        self.outputs = {"Out": np.tile(x, reps)}
        self.check_infer()
        self.check_output()
        self.check_grad(["X"], "Out", weighted=True)

    def test_negative_repeat(self):
        with pytest.raises(ValueError, match=r"repeat_times \[-1\] must be >= 0"):
            get_op_def(self.op_type).infer(VarSpec((2,), 5, 0), repeat_times=[-1])


class TestWhere(OpTest):
    op_type = "where"

    @pytest.mark.parametrize("cs,xs,ys", [((3, 4), (3, 4), (3, 4)), ((3, 4), (3, 1), (4,)),
                                          ((1, 4), (3, 4), (3, 4))])
    def test_forward_and_grad(self, cs, xs, ys):
        rng = np.random.default_rng(1)
        c = rng.random(cs) > 0.5
        x, y = self.rand(*xs, seed=2), self.rand(*ys, seed=3)
        self.inputs = {"Condition": c, "X": x, "Y": y}
        self.outputs = {"Out": np.where(c, x, y)}
        self.check_infer()
        self.check_output()
        self.check_grad(["X", "Y"], "Out", weighted=True)

    def test_dtype_mismatch(self):
        with pytest.raises(ValueError, match="same data type"):
            get_op_def(self.op_type).infer(VarSpec((2,), 0, 0), VarSpec((2,), 5, 0),
                                           VarSpec((2,), 6, 0))


class TestTopKV2(OpTest):
    op_type = "top_k_v2"

    @pytest.mark.parametrize("axis,largest", [(-1, True), (0, True), (1, False)])
    def test_forward_and_grad(self, axis, largest):
        x = np.random.default_rng(0).permutation(60).reshape(3, 4, 5).astype("float64") / 7
        k = 2
        order = np.argsort(-x if largest else x, axis=axis, kind="stable")
        idx = np.take(order, np.arange(k), axis=axis)
        self.inputs, self.attrs = {"X": x}, {"k": k, "axis": axis, "largest": largest}
        self.outputs = {"Out": np.take_along_axis(x, idx, axis=axis), "Indices": idx}
        self.check_infer()
        self.check_output()
        self.check_grad(["X"], "Out", weighted=True)

    def test_k_too_large(self):
        with pytest.raises(ValueError, match="k=9 exceeds dim 1"):
            get_op_def(self.op_type).infer(VarSpec((3, 4), 5, 0), None, k=9, axis=1)


class TestPNorm(OpTest):
    op_type = "p_norm"

    @pytest.mark.parametrize("p", [2.0, 1.0, 3.0, float("inf"), float("-inf")])
    @pytest.mark.parametrize("axis,keepdim", [(-1, False), (0, True)])
    def test_forward_and_grad(self, p, axis, keepdim):
        # no ties in |x| (the inf-norm gradient picks one entry)
        x = np.random.default_rng(0).permutation(12).reshape(3, 4).astype("float64") / 5 - 1.05
        if np.isinf(p):
            want = (np.abs(x).max if p > 0 else np.abs(x).min)(axis=axis, keepdims=keepdim)
        else:
            want = np.linalg.norm(x, ord=p, axis=axis, keepdims=keepdim)
        self.inputs = {"X": x}
        self.attrs = {"porder": p, "axis": axis, "keepdim": keepdim}
        self.outputs = {"Out": want}
        self.check_infer()
        self.check_output()
        self.check_grad(["X"], "Out", weighted=True)

    def test_asvector_and_zero_order(self):
        x = self.rand(2, 3)
        d = get_op_def(self.op_type)
        out = d.forward(x, porder=2.0, asvector=True)["Out"]
        assert out.shape == () and np.isclose(out, np.sqrt((x ** 2).sum()))
        x[0, 0] = 0.0
        assert d.forward(x, porder=0.0, axis=1)["Out"].tolist() == [2.0, 3.0]
        check_grad("p_norm", {"X": self.rand(2, 3)}, "Out", attrs={"asvector": True})


@pytest.mark.parametrize("op,fn", [("isfinite_v2", np.isfinite), ("isnan_v2", np.isnan),
                                   ("isinf_v2", np.isinf)])
def test_elementwise_tests(op, fn):
    x = np.array([[1.0, np.nan], [np.inf, -np.inf]])
    t = OpTest()
    t.op_type, t.inputs, t.outputs = op, {"X": x}, {"Out": fn(x)}
    t.check_infer()
    t.check_output()
    assert get_op_def(op).no_grad


class TestMish(OpTest):
    op_type = "mish"

    @pytest.mark.parametrize("threshold", [20.0, 0.5, 0.0])
    def test_forward_and_grad(self, threshold):
        # fluid 1.8's mish_op.h CalcSoftplus: x past t, exp(x) below -t, log1p(exp(x))
        # between (t > 0; t <= 0: always the last)
        x = self.rand(3, 4, low=-3, high=3, avoid=threshold)
        if threshold > 0:
            x = np.where(np.abs(x + threshold) < 1e-3, x + 0.01, x)    # off the -t kink
            sp = np.where(x > threshold, x, np.where(x < -threshold, np.exp(x),
                                                     np.log1p(np.exp(x))))
        else:
            sp = np.log1p(np.exp(x))
        self.inputs, self.attrs = {"X": x}, {"threshold": threshold}
        self.outputs = {"Out": x * np.tanh(sp)}
        self.check_infer()
        self.check_output()
        self.check_grad(["X"], "Out", weighted=True)


class TestDiagV2(OpTest):
    op_type = "diag_v2"

    @pytest.mark.parametrize("offset", [0, 1, -2])
    def test_vector_to_matrix(self, offset):
        x = self.rand(3)
        want = np.diag(x, offset)
        want[want == 0] = 0.5
        self.inputs, self.attrs = {"X": x}, {"offset": offset, "padding_value": 0.5}
        self.outputs = {"Out": want}
        self.check_infer()
        self.check_output()
        self.check_grad(["X"], "Out", weighted=True)

    @pytest.mark.parametrize("offset", [0, 2, -1])
    def test_matrix_diagonal(self, offset):
        x = self.rand(3, 4)
        self.inputs, self.attrs = {"X": x}, {"offset": offset}
        self.outputs = {"Out": np.diagonal(x, offset).copy()}
        self.check_infer()
        self.check_output()
        self.check_grad(["X"], "Out", weighted=True)

    def test_rank_error(self):
        with pytest.raises(ValueError, match=r"X must be 1-D or 2-D, got shape \[2, 2, 2\]"):
            get_op_def(self.op_type).infer(VarSpec((2, 2, 2), 5, 0))


class TestPad3d(OpTest):
    op_type = "pad3d"

    @pytest.mark.parametrize("mode,np_mode", [("constant", "constant"), ("reflect", "reflect"),
                                              ("replicate", "edge"), ("circular", "wrap")])
    @pytest.mark.parametrize("fmt", ["NCDHW", "NDHWC"])
    def test_forward_and_grad(self, mode, np_mode, fmt):
        x = self.rand(1, 2, 2, 3, 3)
        pads = [1, 2, 0, 1, 1, 0]             # W (left, right), H (top, bottom), D (front, back)
        width = [(1, 0), (0, 1), (1, 2)]     # D, H, W
        spec = [(0, 0), (0, 0)] + width if fmt == "NCDHW" else \
            [(0, 0)] + width + [(0, 0)]
        kw = {"constant_values": 0.5} if mode == "constant" else {}
        self.inputs = {"X": x}
        self.attrs = {"paddings": pads, "mode": mode, "value": 0.5, "data_format": fmt}
        self.outputs = {"Out": np.pad(x, spec, mode=np_mode, **kw)}
        self.check_infer()
        self.check_output()
        self.check_grad(["X"], "Out", weighted=True)

    def test_errors(self):
        d = get_op_def(self.op_type)
        with pytest.raises(ValueError, match=r"X must be 5-D, got shape \[2, 3\]"):
            d.infer(VarSpec((2, 3), 5, 0), None, paddings=[0] * 6)
        with pytest.raises(ValueError, match="mode must be one of"):
            d.infer(VarSpec((1, 1, 1, 1, 1), 5, 0), None, paddings=[0] * 6, mode="mirror")
        with pytest.raises(ValueError, match=r"reflect padding \(3, 0\) must be smaller"):
            d.forward(np.zeros((1, 1, 1, 1, 3)), paddings=[3, 0, 0, 0, 0, 0], mode="reflect")
        with pytest.raises(ValueError, match="6 non-negative ints"):
            d.forward(np.zeros((1, 1, 1, 1, 3)), paddings=[1, 1])


def test_mish_layer_as_fluid18_with_its_documented_threshold_rules():
    import fluidlite as fluid
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 3], "float32")
        outs = [fluid.layers.mish(x), fluid.layers.mish(x, threshold=0.5),
                fluid.layers.mish(x, threshold=None)]
        with pytest.raises(TypeError, match="float32.*float64.*int32"):
            fluid.layers.mish(fluid.data("i", [-1, 3], "int32"))
        with pytest.raises(TypeError, match="threshold"):
            fluid.layers.mish(x, threshold="1")
        with pytest.raises(TypeError):
            fluid.layers.mish(0.1, 20)
    assert [op.attr("threshold") for op in main.global_block().ops if op.type == "mish"] == \
        [20.0, 0.5, -1.0]
    xs = np.array([[-2.0, 0.25, 1.0]], "float32")
    got = fluid.Executor().run(main, feed={"x": xs}, fetch_list=outs)
    exact = xs * np.tanh(np.log1p(np.exp(xs)))
    np.testing.assert_allclose(got[0], exact, rtol=1e-6)
    np.testing.assert_allclose(got[2], exact, rtol=1e-6)
    # threshold 0.5: 1.0 > t -> x * tanh(x); -2 < -t -> x * tanh(exp(x))
    np.testing.assert_allclose(got[1], [[-2 * np.tanh(np.exp(-2.0)), exact[0, 1],
                                         np.tanh(1.0)]], rtol=1e-6)
