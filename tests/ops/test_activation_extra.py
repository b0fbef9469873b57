"""OpTest cases for fluidlite/ops/activation_extra.py: acos/asin/atan, tanh_shrink, erf, log1p,
the shrink family, thresholded_relu, brelu, soft_relu, selu, stanh, hard_swish, prelu, maxout
(forward against NumPy, numeric float64 gradients, bad attributes), and their layers."""
import math

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.ops.activation_extra import hard_swish_to
from fluidlite.testing import OpTest

SELU_S, SELU_A = 1.0507009873554805, 1.6732632423543772


def _away(x, *kinks):
    """Move entries within 0.05 of a kink 0.1 away from it (central differences stay smooth)."""
    for k in kinks:
        x = np.where(np.abs(x - k) < 0.05, k + 0.1 * np.sign(x - k + 1e-12), x)
    return x


X = OpTest.rand(3, 5, low=-2.0, high=2.0)
UNIT = OpTest.rand(3, 5, low=-0.9, high=0.9)
WIDE = OpTest.rand(4, 6, low=-8.0, high=8.0, seed=3)


def _hswish(x, t=6.0, s=6.0, o=3.0):
    return x * np.minimum(np.maximum(x + o, 0), t) / s


# op type, attrs, input, NumPy reference
CASES = [
    ("acos", {}, UNIT, np.arccos),
    ("asin", {}, UNIT, np.arcsin),
    ("atan", {}, X, np.arctan),
    ("tanh_shrink", {}, X, lambda x: x - np.tanh(x)),
    ("erf", {}, X, np.vectorize(math.erf)),
    ("log1p", {}, OpTest.rand(3, 5, low=-0.5, high=3.0), np.log1p),
    ("hard_shrink", {}, _away(X, -0.5, 0.5), lambda x: np.where(np.abs(x) > 0.5, x, 0)),
    ("hard_shrink", {"threshold": 1.2}, _away(X, -1.2, 1.2),
     lambda x: np.where(np.abs(x) > 1.2, x, 0)),
    ("softshrink", {}, _away(X, -0.5, 0.5),
     lambda x: np.where(x > 0.5, x - 0.5, np.where(x < -0.5, x + 0.5, 0))),
    ("softshrink", {"lambda": 1.0}, _away(X, -1.0, 1.0),
     lambda x: np.where(x > 1, x - 1, np.where(x < -1, x + 1, 0))),
    ("thresholded_relu", {}, _away(X, 1.0), lambda x: np.where(x > 1.0, x, 0)),
    ("thresholded_relu", {"threshold": -0.3}, _away(X, -0.3), lambda x: np.where(x > -0.3, x, 0)),
    ("brelu", {}, _away(OpTest.rand(3, 5, low=-3, high=30), 0.0, 24.0),
     lambda x: np.clip(x, 0, 24)),
    ("brelu", {"t_min": -1.0, "t_max": 1.0}, _away(X, -1.0, 1.0), lambda x: np.clip(x, -1, 1)),
    ("soft_relu", {}, X, lambda x: np.log1p(np.exp(x))),
    ("soft_relu", {"threshold": 1.5}, _away(X, -1.5, 1.5),
     lambda x: np.log1p(np.exp(np.clip(x, -1.5, 1.5)))),
    ("selu", {}, _away(X, 0.0), lambda x: SELU_S * np.where(x > 0, x, SELU_A * (np.exp(x) - 1))),
    ("selu", {"scale": 2.0, "alpha": 0.5}, _away(X, 0.0),
     lambda x: 2.0 * np.where(x > 0, x, 0.5 * (np.exp(x) - 1))),
    ("stanh", {}, X, lambda x: 1.7159 * np.tanh(0.67 * x)),
    ("stanh", {"scale_a": 2.0, "scale_b": 0.5}, X, lambda x: 0.5 * np.tanh(2.0 * x)),
    ("hard_swish", {}, _away(WIDE, -3.0, 3.0), _hswish),
    ("hard_swish", {"threshold": 2.0, "scale": 4.0, "offset": 1.0}, _away(X, -1.0, 1.0),
     lambda x: _hswish(x, 2.0, 4.0, 1.0)),
]
IDS = [f"{c[0]}-{i}" for i, c in enumerate(CASES)]


@pytest.mark.parametrize("op_type,attrs,x,ref", CASES, ids=IDS)
def test_activation_extra_op(op_type, attrs, x, ref):
    t = OpTest()
    t.op_type, t.inputs, t.attrs, t.outputs = op_type, {"X": x}, attrs, {"Out": ref(x)}
    t.check_infer()
    t.check_output(atol=1e-7, rtol=1e-6)
    t.check_grad(["X"], "Out", max_relative_error=0.005)


@pytest.mark.parametrize("op_type,attrs,x,ref", CASES, ids=IDS)
def test_float32_stays_float32(op_type, attrs, x, ref):
    t = OpTest()
    t.op_type, t.attrs = op_type, attrs
    x32 = x.astype("float32")
    t.inputs, t.outputs = {"X": x32}, {"Out": ref(x).astype("float32")}
    prog, feed, outs, _ = t._build()
    got = fluid.Executor(fluid.CPUPlace()).run(prog, feed=feed, fetch_list=[outs["Out"].name],
                                               scope=fluid.Scope())[0]
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, ref(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode,ashape", [("all", (1,)), ("channel", (1, 3, 1, 1)),
                                         ("element", (1, 3, 2, 2))])
def test_prelu_op(mode, ashape):
    x = OpTest.rand(2, 3, 2, 2, avoid=0.0, seed=1)
    alpha = OpTest.rand(*ashape, low=0.1, high=0.5, seed=2)
    a = alpha.reshape((1,) * 4) if mode == "all" else alpha.reshape((1,) + x.shape[1:]) \
        if mode == "element" else alpha.reshape(1, 3, 1, 1)
    t = OpTest()
    t.op_type, t.attrs = "prelu", {"mode": mode}
    t.inputs = {"X": x, "Alpha": alpha}
    t.outputs = {"Out": np.where(x > 0, x, a * x)}
    t.check_infer()
    t.check_output()
    t.check_grad(["X", "Alpha"], "Out")


@pytest.mark.parametrize("axis", [1, -1, 3])
def test_maxout_op(axis):
    rng = np.random.default_rng(0)
    if axis == 1:
        x = rng.permutation(2 * 6 * 2 * 3).reshape(2, 6, 2, 3) / 10.0   # no ties
        ref = x.reshape(2, 3, 2, 2, 3).max(axis=2)
    else:
        x = rng.permutation(2 * 2 * 3 * 6).reshape(2, 2, 3, 6) / 10.0
        ref = x.reshape(2, 2, 3, 3, 2).max(axis=4)
    t = OpTest()
    t.op_type, t.attrs = "maxout", {"groups": 2, "axis": axis}
    t.inputs, t.outputs = {"X": x}, {"Out": ref}
    t.check_infer()
    t.check_output()
    t.check_grad(["X"], "Out")


def _build(fn):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        return fn(main)


def test_bad_attributes_are_refused():
    def bad_brelu(main):
        x = fluid.data("x", [2, 3])
        return main.global_block().append_op("brelu", {"X": x}, {"Out": x},
                                             {"t_min": 2.0, "t_max": 1.0})
    with pytest.raises(ValueError, match=r"brelu: t_min \(2.0\) must not be greater"):
        _build(bad_brelu)
    with pytest.raises(ValueError, match="divisible by groups"):
        _build(lambda m: fluid.layers.maxout(fluid.data("x", [2, 5, 3, 3]), groups=2))
    with pytest.raises(ValueError, match="maxout: axis must be 1"):
        _build(lambda m: fluid.layers.maxout(fluid.data("x", [2, 4, 3, 3]), groups=2, axis=2))
    with pytest.raises(ValueError, match="4-D"):
        _build(lambda m: fluid.layers.maxout(fluid.data("x", [2, 4]), groups=2))
    with pytest.raises(ValueError, match="mode must be one of 'all', 'channel', 'element'"):
        _build(lambda m: fluid.layers.prelu(fluid.data("x", [2, 4, 3, 3]), mode="chan"))
    with pytest.raises(TypeError, match="The type of 'x' in hard_swish must be Variable"):
        fluid.layers.hard_swish(np.ones((2, 2)))
    with pytest.raises(TypeError, match="The data type of 'x' in erf must be"):
        _build(lambda m: fluid.layers.erf(fluid.data("x", [2, 3], dtype="int64")))
    with pytest.raises(TypeError, match="stanh: 'scale_a' must be a float"):
        _build(lambda m: fluid.layers.stanh(fluid.data("x", [2, 3]), scale_a="big"))
    with pytest.raises(TypeError, match="op 'softshrink': attribute 'lambda' expects float"):
        _build(lambda m: fluid.layers.softshrink(fluid.data("x", [2, 3]), alpha=[1]))


def test_layers_build_fluid_ops_and_run():
    _away(OpTest.rand(2, 4, 3, 3, low=-3, high=3, dtype="float32"), 0.0)

    def net(main):
        x = fluid.data("x", [-1, 4, 3, 3])
        L = fluid.layers
        outs = [L.acos(L.clip(x, -0.9, 0.9)), L.asin(L.clip(x, -0.9, 0.9)), L.atan(x),
                L.tanh_shrink(x), L.erf(x), L.log1p(L.abs(x)),
                L.hard_shrink(x, threshold=0.7), L.softshrink(x, alpha=0.3),
                L.thresholded_relu(x, threshold=0.2), L.brelu(x, t_min=-1.0, t_max=2.0),
                L.soft_relu(x, threshold=2.0), L.selu(x), L.stanh(x), L.hard_swish(x),
                L.maxout(x, groups=2), L.prelu(x, mode="channel")]
        return main, outs

    main, outs = _build(net)
    types = [op.type for op in main.global_block().ops]
    for t in ("acos", "asin", "atan", "tanh_shrink", "erf", "log1p", "hard_shrink",
              "softshrink", "thresholded_relu", "brelu", "soft_relu", "selu", "stanh",
              "hard_swish", "maxout", "prelu"):
        assert t in types
    ops = {op.type: op for op in main.global_block().ops}
    assert ops["softshrink"].attr("lambda") == pytest.approx(0.3)
    assert ops["hard_shrink"].attr("threshold") == pytest.approx(0.7)
    assert ops["brelu"].attr("t_min") == -1.0 and ops["brelu"].attr("t_max") == 2.0
    assert outs[-2].shape == (-1, 2, 3, 3)
    assert outs[-1].name.startswith("prelu_")
    alpha = [p for p in main.global_block().all_parameters() if p.name.startswith("prelu")][0]
    assert tuple(alpha.shape) == (1, 4, 1, 1)


def test_prelu_layer_trains_its_alpha_from_025():
    x_np = OpTest.rand(4, 3, avoid=0.0, dtype="float32", seed=5)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 3])
        y = fluid.layers.prelu(x, mode="all")
        loss = fluid.layers.mean(y)
        fluid.optimizer.SGD(1.0).minimize(loss)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(startup)
        out, = exe.run(main, feed={"x": x_np}, fetch_list=[y])
        np.testing.assert_allclose(out, np.where(x_np > 0, x_np, 0.25 * x_np), rtol=1e-6)
        alpha = np.array(scope.find_var("prelu_0.w_0").get_tensor())
    expect = 0.25 - np.where(x_np <= 0, x_np, 0).sum() / x_np.size
    np.testing.assert_allclose(alpha, [expect], rtol=1e-5)


def test_layers_in_dygraph_match_static_kernels():
    x_np = OpTest.rand(2, 4, 2, 2, low=-3, high=3, dtype="float32", avoid=0.0, seed=9)
    with fluid.dygraph.guard():
        x = fluid.dygraph.to_variable(x_np)
        np.testing.assert_allclose(fluid.layers.hard_swish(x).numpy(), _hswish(x_np), rtol=1e-6)
        np.testing.assert_allclose(fluid.layers.softshrink(x, 0.5).numpy(),
                                   np.where(x_np > 0.5, x_np - 0.5,
                                            np.where(x_np < -0.5, x_np + 0.5, 0)), rtol=1e-6)
        m = fluid.layers.maxout(x, groups=2)
        np.testing.assert_allclose(m.numpy(), x_np.reshape(2, 2, 2, 2, 2).max(axis=2))
        p = fluid.layers.prelu(x, mode="element")
        np.testing.assert_allclose(p.numpy(), np.where(x_np > 0, x_np, 0.25 * x_np), rtol=1e-6)


def test_new_activations_work_as_act_of_fc():
    x_np = OpTest.rand(2, 4, dtype="float32", seed=4)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 4])
        w = fluid.ParamAttr(initializer=fluid.initializer.Constant(0.5))
        outs = [fluid.layers.fc(x, 3, param_attr=w, bias_attr=False, act=a)
                for a in ("hard_swish", "selu", {"type": "softshrink", "lambda": 0.2})]
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(fluid.Scope()):
        exe.run(startup)
        hs, se, ss = exe.run(main, feed={"x": x_np}, fetch_list=outs)
    z = np.repeat(x_np.sum(1, keepdims=True) * 0.5, 3, axis=1)
    np.testing.assert_allclose(hs, _hswish(z), rtol=1e-6)
    np.testing.assert_allclose(se, SELU_S * np.where(z > 0, z, SELU_A * np.expm1(z)), rtol=1e-6)
    np.testing.assert_allclose(ss, np.where(z > 0.2, z - 0.2, np.where(z < -0.2, z + 0.2, 0)),
                               rtol=1e-6)
    assert [op.type for op in main.global_block().ops].count("softshrink") == 1


def test_thresholded_relu_is_x_times_mask():
    """fluid's functor: Out = (X > threshold) * X, so negative X below the threshold gives
    -0.0 (Paddle 2.6: [-0, -0, 0, 0, 3])."""
    from fluidlite.core.registry import get_op_def
    out = get_op_def("thresholded_relu").forward(np.array([-2.0, -0.0, 0.0, 1.0, 3.0]),
                                                 threshold=1.0)["Out"]
    np.testing.assert_array_equal(out, [0.0, 0.0, 0.0, 0.0, 3.0])
    assert np.signbit(out[:2]).all() and not np.signbit(out[2:]).any()


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_hard_swish_to_is_fluids_formula_bit_for_bit(dtype):
    """``hard_swish_to`` (the op's kernel and conv2d_fusion's epilogue) against the formula
    in fluid's order with np.maximum / np.minimum: the same bits, nan, infinities and signed
    zeros included, in place or not, default and other attrs."""
    x = (np.random.default_rng(0).standard_normal(70001) * 5).astype(dtype)
    x[:7] = [np.nan, -0.0, 0.0, -3.0, np.inf, -np.inf, 6.0]
    for threshold, scale, offset in ((6.0, 6.0, 3.0), (4.0, 5.0, 2.5)):
        typ = x.dtype.type
        with np.errstate(invalid="ignore"):
            t = np.minimum(np.maximum(x + typ(offset), typ(0)), typ(threshold))
            want = x * t / typ(scale)
            got = hard_swish_to(x, np.empty_like(x), threshold, scale, offset)
            y = x.copy()
            same = hard_swish_to(y, y, threshold, scale, offset)
        assert got.dtype == dtype and same is y
        for a in (got, y):
            np.testing.assert_array_equal(a, want)
            np.testing.assert_array_equal(np.signbit(a), np.signbit(want))
    # fluid's defaults (threshold 6, scale 6, offset 3): what conv2d_fusion's epilogue runs
    defaults = hard_swish_to(x, np.empty_like(x))
    with np.errstate(invalid="ignore"):
        want = x * np.minimum(np.maximum(x + x.dtype.type(3), 0), x.dtype.type(6)) \
            / x.dtype.type(6)
    np.testing.assert_array_equal(defaults, want)
