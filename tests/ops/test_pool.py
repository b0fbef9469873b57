"""pool2d: max/avg, paddings, ceil_mode, exclusive, global pooling, NHWC, SAME; numeric
gradients; the pool2d layer."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core.registry import get_op_def
from fluidlite.testing import OpTest


def ref_pool(x, k, s, pads=(0, 0, 0, 0), ptype="max", ceil=False, exclusive=True):
    """fluid's window rule, one output cell at a time: a window starts at o*s - pad_before and
    is clipped to the input; exclusive averages divide by the clipped size, else by kh*kw."""
    N, C, H, W = x.shape
    extra = [s[i] - 1 if ceil else 0 for i in range(2)]
    oh = (H + pads[0] + pads[1] - k[0] + extra[0]) // s[0] + 1
    ow = (W + pads[2] + pads[3] - k[1] + extra[1]) // s[1] + 1
    out = np.zeros((N, C, oh, ow))
    for i in range(oh):
        for j in range(ow):
            hs, ws = i * s[0] - pads[0], j * s[1] - pads[2]
            he, we = min(hs + k[0], H), min(ws + k[1], W)
            hs, ws = max(hs, 0), max(ws, 0)
            win = x[:, :, hs:he, ws:we]
            if ptype == "max":
                out[:, :, i, j] = win.max(axis=(2, 3))
            else:
                div = (he - hs) * (we - ws) if exclusive else k[0] * k[1]
                out[:, :, i, j] = win.sum(axis=(2, 3)) / div
    return out


class TestPool2D(OpTest):
    op_type = "pool2d"

    def setup_method(self, *_):
        x = self.rand(2, 3, 6, 6)
        self.inputs = {"X": x}
        self.attrs = {"pooling_type": "max", "ksize": [2, 2], "strides": [2, 2]}
        self.outputs = {"Out": ref_pool(x, (2, 2), (2, 2))}

    def test_max(self):
        self.check_infer()
        self.check_output()
        self.check_grad(["X"], "Out")

    def test_avg_overlapping_padded(self):
        x = self.inputs["X"]
        self.attrs = {"pooling_type": "avg", "ksize": [3, 3], "strides": [2, 1],
                      "paddings": [1, 1]}
        self.outputs = {"Out": ref_pool(x, (3, 3), (2, 1), (1, 1, 1, 1), "avg")}
        self.check_infer()
        self.check_output()
        self.check_grad(["X"], "Out")

    def test_avg_not_exclusive(self):
        x = self.inputs["X"]
        self.attrs = {"pooling_type": "avg", "ksize": [3, 3], "strides": [2, 2],
                      "paddings": [1, 1], "exclusive": False}
        self.outputs = {"Out": ref_pool(x, (3, 3), (2, 2), (1, 1, 1, 1), "avg",
                                        exclusive=False)}
        self.check_output()
        self.check_grad(["X"], "Out")

    def test_max_overlapping_padded_ceil_mode(self):
        x = self.rand(2, 2, 7, 7, seed=3)
        self.inputs = {"X": x}
        self.attrs = {"pooling_type": "max", "ksize": [3, 3], "strides": [2, 2],
                      "paddings": [1, 0, 1, 0], "ceil_mode": True}
        self.outputs = {"Out": ref_pool(x, (3, 3), (2, 2), (1, 0, 1, 0), ceil=True)}
        assert self.outputs["Out"].shape == (2, 2, 4, 4)
        self.check_infer()
        self.check_output()
        self.check_grad(["X"], "Out")

    def test_avg_ceil_mode(self):
        x = self.rand(1, 2, 5, 5)
        self.inputs = {"X": x}
        self.attrs = {"pooling_type": "avg", "ksize": [2, 2], "strides": [2, 2],
                      "ceil_mode": True}
        self.outputs = {"Out": ref_pool(x, (2, 2), (2, 2), ptype="avg", ceil=True)}
        self.check_infer()
        self.check_output()
        self.check_grad(["X"], "Out")

    @pytest.mark.parametrize("ptype", ["max", "avg"])
    def test_global(self, ptype):
        x = self.inputs["X"]
        self.attrs = {"pooling_type": ptype, "ksize": [1, 1], "global_pooling": True}
        red = x.max(axis=(2, 3)) if ptype == "max" else x.mean(axis=(2, 3))
        self.outputs = {"Out": red[:, :, None, None]}
        self.check_infer()
        self.check_output()
        self.check_grad(["X"], "Out")

    def test_nhwc(self):
        x = self.rand(2, 6, 5, 3)
        self.inputs = {"X": x}
        self.attrs = {"pooling_type": "max", "ksize": [3, 2], "strides": [2, 2],
                      "data_format": "NHWC"}
        ref = ref_pool(x.transpose(0, 3, 1, 2), (3, 2), (2, 2))
        self.outputs = {"Out": ref.transpose(0, 2, 3, 1)}
        self.check_infer()
        self.check_output()
        self.check_grad(["X"], "Out")

    def test_same_padding(self):
        x = self.rand(1, 1, 5, 5)
        self.inputs = {"X": x}
        self.attrs = {"pooling_type": "avg", "ksize": [2, 2], "strides": [2, 2],
                      "padding_algorithm": "SAME"}
        self.outputs = {"Out": ref_pool(x, (2, 2), (2, 2), (0, 1, 0, 1), "avg")}
        self.check_infer()
        self.check_output()

    def test_max_gradient_goes_to_the_first_maximum(self):
        from fluidlite.core.registry import get_op_def
        x = np.zeros((1, 1, 2, 2))     # four tied maxima
        dx = get_op_def("pool2d").backward(x, np.zeros((1, 1, 1, 1)), np.ones((1, 1, 1, 1)),
                                           ksize=[2, 2], strides=[2, 2])["X"]
        np.testing.assert_array_equal(dx, [[[[1.0, 0.0], [0.0, 0.0]]]])

    def test_bad_attrs(self):
        self.attrs = {"pooling_type": "min", "ksize": [2, 2]}
        with pytest.raises(ValueError, match="pooling_type must be 'max' or 'avg'"):
            self.check_infer()
        # adaptive=True is supported now (tests/ops/test_conv3d.py::TestAdaptivePool2D)


class TestPool2DLayer:
    def test_shapes_and_attrs(self):
        x = fluid.data("x", [None, 3, 8, 8], "float32")
        y = fluid.layers.pool2d(x, pool_size=2, pool_stride=2)
        z = fluid.layers.pool2d(x, pool_size=3, pool_type="avg", pool_stride=2, pool_padding=1,
                                ceil_mode=True, exclusive=False)
        g = fluid.layers.pool2d(x, pool_type="avg", global_pooling=True)
        assert y.shape == (-1, 3, 4, 4) and z.shape == (-1, 3, 5, 5) and g.shape == (-1, 3, 1, 1)
        op = fluid.default_main_program().global_block().ops[1]
        assert op.attr("ksize") == [3, 3] and op.attr("exclusive") is False
        assert op.attr("ceil_mode") is True and op.attr("paddings") == [1, 1]
        exe = fluid.Executor(fluid.CPUPlace())
        xv = np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype("float32")
        a, b, c = exe.run(feed={"x": xv}, fetch_list=[y, z, g])
        np.testing.assert_allclose(a, ref_pool(xv, (2, 2), (2, 2)), rtol=1e-6)
        np.testing.assert_allclose(b, ref_pool(xv, (3, 3), (2, 2), (1, 1, 1, 1), "avg", True,
                                               False), rtol=1e-5)
        np.testing.assert_allclose(c[:, :, 0, 0], xv.mean(axis=(2, 3)), rtol=1e-5)
        assert a.dtype == np.float32

    def test_errors(self):
        x = fluid.data("x", [None, 3, 8, 8], "float32")
        with pytest.raises(ValueError, match="pool_size must be passed"):
            fluid.layers.pool2d(x)
        with pytest.raises(ValueError, match="Unknown|unknown pool_type"):
            fluid.layers.pool2d(x, 2, pool_type="sum")
        # fluid 1.8 refuses ceil_mode with 'VALID' (pool2d and pool3d), not with 'SAME'
        with pytest.raises(ValueError, match=r"pool2d: when Attr\(pool_padding\) is \"VALID\", "
                                             r"Attr\(ceil_mode\) must be False"):
            fluid.layers.pool2d(x, 2, pool_padding="VALID", ceil_mode=True)
        with pytest.raises(ValueError, match=r"pool3d: when .*\"VALID\".*ceil_mode"):
            fluid.layers.pool3d(fluid.data("v", [None, 3, 4, 4, 4], "float32"), 2,
                                pool_padding="VALID", ceil_mode=True)

    def test_same_padding_with_ceil_mode(self):
        """'SAME' with ceil_mode: Paddle's PoolOutputSize over the SAME paddings, which rounds
        up where the window is narrower than the stride (8 rows, 1x1 window, stride 2: 5 rows,
        not ceil(8 / 2) = 4). Shapes as Paddle 2.6 gives them."""
        xv = (np.arange(2 * 3 * 8 * 7, dtype="float32") % 11).reshape(2, 3, 8, 7)
        x = fluid.data("x", [2, 3, 8, 7], "float32")
        outs = [fluid.layers.pool2d(x, k, t, s, pool_padding="SAME", ceil_mode=True)
                for k, s, t in ((1, 2, "max"), (3, 2, "avg"), (2, 3, "max"))]
        assert [o.shape for o in outs] == [(2, 3, 5, 4), (2, 3, 4, 4), (2, 3, 3, 3)]
        got = fluid.Executor(fluid.CPUPlace()).run(fluid.default_main_program(),
                                                   feed={"x": xv}, fetch_list=outs)
        np.testing.assert_array_equal(got[0][:, :, :4], xv[:, :, ::2, ::2])


# -- fluid's C++ integer arithmetic (issue 29) ----------------------------------------------------
FLT_MAX = float(np.finfo(np.float32).max)


def ref_pool_cpp(x, k, s, pads=(0, 0, 0, 0), ptype="max", ceil=False, exclusive=True):
    """fluid 1.8's PoolOutputSize and Pool2dFunctor loops, literally: C++ int division
    (truncation toward zero), max starting from -FLT_MAX, exclusive averages divided by the
    signed ``(hend - hstart) * (wend - wstart)``."""
    def trunc_div(a, b):
        return int(a / b)
    N, C, H, W = x.shape
    extra = [s[i] - 1 if ceil else 0 for i in range(2)]
    oh = trunc_div(H + pads[0] + pads[1] - k[0] + extra[0], s[0]) + 1
    ow = trunc_div(W + pads[2] + pads[3] - k[1] + extra[1], s[1]) + 1
    out = np.zeros((N, C, oh, ow))
    for i in range(oh):
        for j in range(ow):
            hs, ws = i * s[0] - pads[0], j * s[1] - pads[2]
            he, we = min(hs + k[0], H), min(ws + k[1], W)
            hs, ws = max(hs, 0), max(ws, 0)
            win = x[:, :, hs:max(he, hs), ws:max(we, ws)]
            if ptype == "max":
                out[:, :, i, j] = np.maximum(win.max(axis=(2, 3), initial=-np.inf), -FLT_MAX)
            else:
                div = (he - hs) * (we - ws) if exclusive else k[0] * k[1]
                with np.errstate(invalid="ignore"):
                    out[:, :, i, j] = win.sum(axis=(2, 3)) / np.float64(div)
    return out


class TestPool2DCppArithmetic(OpTest):
    """Output sizes and the windows past the input as fluid computes them (checked against
    Paddle 2.6's pool2d on CPU: same shapes, -3.4028235e+38, NaN and -0.0 included)."""
    op_type = "pool2d"

    def _run(self, x, ptype, k, s, pads=(0, 0), ceil=False, exclusive=True, grad=True):
        self.inputs = {"X": x}
        self.attrs = {"pooling_type": ptype, "ksize": list(k), "strides": list(s),
                      "paddings": list(pads), "ceil_mode": ceil, "exclusive": exclusive}
        p4 = pads if len(pads) == 4 else (pads[0], pads[0], pads[1], pads[1])
        self.outputs = {"Out": ref_pool_cpp(x, k, s, p4, ptype, ceil, exclusive)}
        self.check_infer()
        self.check_output()
        if grad:
            self.check_grad(["X"], "Out")

    def test_one_row_map_two_by_two_stride_two(self):
        # (1 - 2) / 2 + 1 = 1 in C++ (Python's floor gave 0: a build error)
        x = np.arange(10.0).reshape(1, 2, 1, 5)
        self._run(x, "max", (2, 2), (2, 2))
        np.testing.assert_array_equal(self.outputs["Out"], [[[[1, 3]], [[6, 8]]]])   # Paddle
        self._run(x, "avg", (2, 2), (2, 2))
        np.testing.assert_array_equal(self.outputs["Out"], [[[[0.5, 2.5]], [[5.5, 7.5]]]])

    def test_window_larger_than_the_map(self):
        x = self.rand(1, 2, 6, 6, seed=4)
        self._run(x, "max", (7, 7), (2, 2))     # (6 - 7) / 2 + 1 = 1: the whole map
        assert self.outputs["Out"].shape == (1, 2, 1, 1)
        np.testing.assert_allclose(self.outputs["Out"][..., 0, 0], x.max(axis=(2, 3)))
        self._run(x, "avg", (7, 7), (2, 2))
        self._run(x, "avg", (7, 7), (2, 2), exclusive=False)    # fluid 1.8: / 49

    def test_empty_windows(self):
        # ceil_mode: the third window starts at 6 > 4; padding 2 >= ksize 2: corner windows
        # hold no input cell. Paddle 2.6 gives -FLT_MAX (max), -0.0 and NaN (exclusive avg).
        # (no numeric gradient check through a -FLT_MAX output: sum(out * R) is ~1e38)
        x = np.array([[[[-3.0, -2.0, -1.0, 0.0, 1.0]]]])
        self._run(x, "max", (1, 1), (3, 3), ceil=True, grad=False)
        np.testing.assert_array_equal(self.outputs["Out"], [[[[-3.0, 0.0, -FLT_MAX]]]])
        from fluidlite.core.registry import get_op_def
        dx = get_op_def("pool2d").backward(x, self.outputs["Out"], np.ones((1, 1, 1, 3)),
                                           **self.attrs)["X"]
        np.testing.assert_array_equal(dx, [[[[1.0, 0.0, 0.0, 1.0, 0.0]]]])     # as Paddle
        self._run(x, "avg", (1, 1), (3, 3), ceil=True)
        assert np.signbit(self.outputs["Out"][0, 0, 0, 2])           # 0 / -1 = -0.0
        x = self.rand(1, 1, 3, 3, seed=5)
        self._run(x, "max", (2, 2), (1, 1), (2, 2), grad=False)
        assert self.outputs["Out"][0, 0, 0, 0] == -FLT_MAX
        self._run(x, "avg", (2, 2), (1, 1), (2, 2), grad=False)
        assert np.isnan(self.outputs["Out"][0, 0, 0, 0])              # 0 / 0
        x = self.rand(1, 1, 3, 4, seed=6)
        self._run(x, "avg", (2, 3), (2, 2), (0, 3, 1, 0), grad=False)

    def test_executor_matches_the_cpp_loops_bit_for_bit(self):
        x = np.array([[[[-3.0, -2.0, -1.0, 0.0, 1.0]]]], "float32")
        main = fluid.Program()
        with fluid.program_guard(main, fluid.Program()):
            xv = fluid.data("x", [1, 1, 1, 5], "float32")
            a = fluid.layers.pool2d(xv, pool_size=1, pool_stride=3, ceil_mode=True)
            b = fluid.layers.pool2d(xv, pool_size=1, pool_type="avg", pool_stride=3,
                                    ceil_mode=True)
        got_a, got_b = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": x},
                                                            fetch_list=[a, b])
        assert got_a.dtype == np.float32 and got_a[0, 0, 0, 2] == np.float32(-FLT_MAX)
        assert got_b[0, 0, 0, 2] == 0 and np.signbit(got_b[0, 0, 0, 2])

    def test_still_an_error_when_cpp_gives_zero(self):
        self.inputs = {"X": self.rand(1, 1, 6, 6)}
        self.attrs = {"pooling_type": "max", "ksize": [7, 7], "strides": [1, 1]}
        self.outputs = {"Out": np.zeros((1, 1, 1, 1))}
        with pytest.raises(ValueError, match=r"output size \[0, 0\] is not positive"):
            self.check_infer()


def test_float16_max_pool_floor_is_minus_inf_without_a_warning():
    """fluid's MaxPool starts from -FLT_MAX, which is -inf in float16: an all -inf window gives
    -inf, and no overflow RuntimeWarning reaches the user."""
    import warnings
    x = np.full((1, 1, 2, 2), -np.inf, np.float16)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = get_op_def("pool2d").forward(x, pooling_type="max", ksize=[2, 2],
                                           strides=[2, 2])["Out"]
    assert out.dtype == np.float16 and out.shape == (1, 1, 1, 1) and out[0, 0, 0, 0] == -np.inf
    x32 = x.astype(np.float32)
    out32 = get_op_def("pool2d").forward(x32, pooling_type="max", ksize=[2, 2],
                                         strides=[2, 2])["Out"]
    assert out32[0, 0, 0, 0] == -np.finfo(np.float32).max
