"""fluidlite.clip.clip_by_value / clip_by_global_norm (MindSpore's functional clipping, issue 13)
on dygraph tensors and static Variables: seeds 000/001, NumPy references, the ops and roles
they append, gradients through them, and the error paths."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import dygraph
from fluidlite.autograd import grad
from fluidlite.clip import GradientClipByGlobalNorm, clip_by_global_norm, clip_by_value
from fluidlite.core.ir import OpRole

SEED_W = np.array([[-0.1, -0.25, -0.1], [0.1, 0.25, 0.1]], "float32")
SEED_B = np.array([-0.5, 0.5], "float32")
CLIPPED_W = [[-0.1, -0.1, -0.1], [0.1, 0.1, 0.1]]
CLIPPED_B = [-0.1, 0.1]


def val(t):
    return np.asarray(t.numpy() if hasattr(t, "numpy") else t)


def run_static(build, feed):
    """Build with fluid.data inputs named after ``feed``; returns (program, fetched results)."""
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        ins = [fluid.data(n, list(a.shape), str(a.dtype)) for n, a in feed.items()]
        outs = build(*ins)
    flat = [o for o in (outs if isinstance(outs, (list, tuple)) else [outs])]
    res = fluid.Executor(fluid.CPUPlace()).run(main, feed=feed, fetch_list=flat)
    return main, res


def global_norm_ref(arrays, clip_norm):
    norm = np.sqrt(sum((np.asarray(a, "float64") ** 2).sum() for a in arrays))
    return [a * (clip_norm / max(norm, clip_norm)) for a in arrays], norm


# -- seeds 000/001 ----------------------------------------------------------------------------
def test_seed000_clip_by_value_of_the_gradient_tuple_dygraph():
    with dygraph.guard():
        grads = (dygraph.to_variable(SEED_W), dygraph.to_variable(SEED_B))
        w, b = clip_by_value(grads, clip_value_min=-0.1, clip_value_max=0.1)
        np.testing.assert_allclose(val(w), CLIPPED_W)
        np.testing.assert_allclose(val(b), CLIPPED_B)
        np.testing.assert_array_equal(val(grads[0]), SEED_W)          # inputs untouched


def test_seed000_clip_by_value_static():
    main, (w, b) = run_static(lambda w, b: clip_by_value((w, b), -0.1, 0.1),
                              {"w": SEED_W, "b": SEED_B})
    np.testing.assert_allclose(w, CLIPPED_W)
    np.testing.assert_allclose(b, CLIPPED_B)
    clips = [op for op in main.global_block().ops if op.type == "clip"]
    assert len(clips) == 2
    for op in clips:
        assert op.attr("op_role") == OpRole.Optimize
        assert "gradient_clip" in op.attr("op_namescope")
        assert op.attr("op_role_var") == [op.input("X")[0], op.output("Out")[0]]


def test_seed000_end_to_end_grad_then_clip():
    """The seed's network: Linear(3, 2) at zero, soft-label cross entropy; the weight
    gradients from grad(..., weights=...) clipped to [-0.1, 0.1] (fluid's [in, out] layout)."""
    data = np.array([[0.2, 0.5, 0.2]], "float32")
    label = np.array([[1.0, 0.0]], "float32")
    with dygraph.guard():
        dense = dygraph.Linear(3, 2, param_attr=fluid.initializer.Constant(0.0),
                               bias_attr=fluid.initializer.Constant(0.0))

        def forward_fn(x, y):
            logits = dense(x)
            loss = fluid.layers.reduce_mean(fluid.layers.softmax_with_cross_entropy(
                logits, y, soft_label=True))
            return loss, logits
        for jit in (False, True):
            grads, _ = grad(forward_fn, None, dense.parameters(), has_aux=True, jit=jit)(
                data, label)
            np.testing.assert_allclose(val(grads[0]), SEED_W.T, rtol=1e-6)
            np.testing.assert_allclose(val(grads[1]), SEED_B, rtol=1e-6)
            w, b = clip_by_value(grads, -0.1, 0.1)
            np.testing.assert_allclose(val(w), np.array(CLIPPED_W).T, rtol=1e-6)
            np.testing.assert_allclose(val(b), CLIPPED_B, rtol=1e-6)


# -- clip_by_value ----------------------------------------------------------------------------
def test_clip_by_value_one_sided_nested_structure_and_none():
    x = np.array([-2.0, -0.5, 0.5, 2.0], "float32")
    with dygraph.guard():
        t = dygraph.to_variable(x)
        out = clip_by_value([t, (t, None)], clip_value_max=1.0)
        assert isinstance(out, list) and isinstance(out[1], tuple) and out[1][1] is None
        np.testing.assert_array_equal(val(out[0]), np.minimum(x, 1.0))
        single = clip_by_value(t, clip_value_min=0.0)
        assert isinstance(single, dygraph.VarBase)
        np.testing.assert_array_equal(val(single), np.maximum(x, 0.0))
        arr = clip_by_value(x, -1.0, 1.0)                       # numpy: converted in dygraph
        np.testing.assert_array_equal(val(arr), np.clip(x, -1, 1))
    _, (lo,) = run_static(lambda a: [clip_by_value(a, clip_value_min=0.0)], {"a": x})
    np.testing.assert_array_equal(lo, np.maximum(x, 0.0))


def test_clip_by_value_gradient_float64():
    x = np.array([-2.0, -0.5, 0.25, 2.0])
    g = grad(lambda t: fluid.layers.reduce_sum(clip_by_value(t * 3, -1.0, 1.0)))(x)
    np.testing.assert_array_equal(val(g), [0.0, 0.0, 3.0, 0.0])


def test_clip_by_value_outside_the_guard_on_tensors():
    g = grad(lambda a, b: a * b, (0, 1))(np.float32(3.0), np.float32(-4.0))   # tensors
    lo, hi = clip_by_value(g, -2.0, 2.0)
    assert (float(lo), float(hi)) == (-2.0, 2.0)


# -- clip_by_global_norm ----------------------------------------------------------------------
@pytest.mark.parametrize("clip_norm", [0.5, 10.0])
def test_clip_by_global_norm_dygraph_and_static_match_numpy(clip_norm):
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(3, 4)).astype("float32"), rng.normal(size=5).astype("float32")
    ref, norm = global_norm_ref([a, b], clip_norm)
    with dygraph.guard():
        ca, cb = clip_by_global_norm((dygraph.to_variable(a), dygraph.to_variable(b)),
                                     clip_norm)
        assert val(ca).dtype == np.float32
        np.testing.assert_allclose(val(ca), ref[0], rtol=1e-6)
        np.testing.assert_allclose(val(cb), ref[1], rtol=1e-6)
    main, (sa, sb) = run_static(lambda a, b: clip_by_global_norm([a, b], clip_norm),
                                {"a": a, "b": b})
    np.testing.assert_allclose(sa, ref[0], rtol=1e-6)
    np.testing.assert_allclose(sb, ref[1], rtol=1e-6)
    if clip_norm > norm:
        np.testing.assert_array_equal(sa, a)                     # below the limit: unchanged
    ops = main.global_block().ops
    assert [op.type for op in ops] == [
        "squared_l2_norm", "squared_l2_norm", "sum", "sqrt", "fill_constant",
        "elementwise_max", "elementwise_div", "cast", "elementwise_mul", "elementwise_mul"]
    assert all(op.attr("op_role") == OpRole.Optimize for op in ops)
    assert all("gradient_clip" in op.attr("op_namescope") for op in ops)
    assert main.global_block().var(ops[0].output("Out")[0]).dtype == fluid.VarType.FP64
    # the norm is findable and fetchable as the clip classes' is
    norm_var = fluid.clip.get_global_norm(main)
    (got,) = fluid.Executor(fluid.CPUPlace()).run(main, feed={"a": a, "b": b},
                                                  fetch_list=[norm_var])
    np.testing.assert_allclose(got, [norm], rtol=1e-7)      # float32 dots, float64 sum


def test_clip_by_global_norm_same_numbers_as_the_gradient_clip_class():
    rng = np.random.default_rng(2)
    arrays = [rng.normal(size=(2, 3)).astype("float32"), rng.normal(size=3).astype("float32")]
    with dygraph.guard():
        lin = dygraph.Linear(2, 3)
        pairs = [(p, dygraph.to_variable(a)) for p, a in zip(lin.parameters(), arrays)]
        by_class = GradientClipByGlobalNorm(1.0)(pairs)
        functional = clip_by_global_norm([g for _, g in pairs], 1.0)
        for (_, c), f in zip(by_class, functional):
            np.testing.assert_array_equal(val(c), val(f))


def test_clip_by_global_norm_use_norm_and_nesting():
    a, b = np.full((2, 2), 3.0, "float32"), np.array([4.0], "float32")
    with dygraph.guard():
        ta, tb = dygraph.to_variable(a), dygraph.to_variable(b)
        out = clip_by_global_norm([ta, (tb, None)], clip_norm=1.0, use_norm=4.0)
        assert isinstance(out, list) and isinstance(out[1], tuple) and out[1][1] is None
        np.testing.assert_allclose(val(out[0]), a / 4.0)
        np.testing.assert_allclose(val(out[1][0]), b / 4.0)
        norm_t = dygraph.to_variable(np.array([0.5], "float64"))   # below clip_norm: unchanged
        np.testing.assert_array_equal(val(clip_by_global_norm(ta, 1.0, use_norm=norm_t)), a)
        assert clip_by_global_norm((None,), 1.0) == (None,)
    main, (sa, sb) = run_static(lambda a, b: clip_by_global_norm((a, b), 2.0, use_norm=8.0),
                                {"a": a, "b": b})
    np.testing.assert_allclose(sa, a / 4.0)
    np.testing.assert_allclose(sb, b / 4.0)


def test_clip_by_global_norm_gradient_float64():
    """d/dx sum(clip_by_global_norm(x)) against central differences (the clip is
    differentiable in dygraph: its ops are traced)."""
    rng = np.random.default_rng(4)
    x, y = rng.normal(size=(2, 3)), rng.normal(size=2)

    def f(a, b):
        ca, cb = clip_by_global_norm((a, b), 0.7)
        return fluid.layers.reduce_sum(ca * ca * 0 + ca) + fluid.layers.reduce_sum(cb)

    def ref(a, b):
        out, _ = global_norm_ref([a, b], 0.7)
        return out[0].sum() + out[1].sum()
    gx, gy = grad(f, (0, 1))(x, y)
    for i, got in enumerate((gx, gy)):
        args = [x.copy(), y.copy()]
        num = np.zeros_like(args[i])
        for idx in np.ndindex(*args[i].shape):
            hi = [a.copy() for a in args]
            lo = [a.copy() for a in args]
            hi[i][idx] += 1e-6
            lo[i][idx] -= 1e-6
            num[idx] = (ref(*hi) - ref(*lo)) / 2e-6
        np.testing.assert_allclose(val(got), num, rtol=1e-6, atol=1e-9)


def test_tensor_given_twice_and_float64():
    a = np.array([3.0, 4.0])                              # norm 5 (counted once)
    with dygraph.guard():
        t = dygraph.to_variable(a)
        x, y = clip_by_global_norm([t, t], 1.0)
        np.testing.assert_allclose(val(x), a / 5.0)
        assert val(x).dtype == np.float64 and x is not t
        np.testing.assert_array_equal(val(x), val(y))


# -- errors -----------------------------------------------------------------------------------
def test_clip_by_value_errors():
    with dygraph.guard():
        t = dygraph.to_variable(np.ones(2, "float32"))
        with pytest.raises(ValueError, match="clip_value_min and clip_value_max cannot both"):
            clip_by_value(t)
        with pytest.raises(ValueError, match=r"clip_value_min \(1.0\) must not be greater"):
            clip_by_value(t, 1.0, -1.0)
        with pytest.raises(ValueError, match="clip_value_max must be a number"):
            clip_by_value(t, 0.0, "1")
        with pytest.raises(TypeError, match=r"x\[1\] must be a tensor.*str"):
            clip_by_value((t, "g"), -1.0, 1.0)
    with pytest.raises(TypeError, match="numpy arrays are accepted in dygraph mode only"):
        clip_by_value(np.ones(2), -1.0, 1.0)


def test_clip_by_global_norm_errors():
    with dygraph.guard():
        t = dygraph.to_variable(np.ones(2, "float32"))
        with pytest.raises(ValueError, match="clip_norm must be > 0"):
            clip_by_global_norm(t, 0.0)
        with pytest.raises(ValueError, match="clip_norm must be a number"):
            clip_by_global_norm(t, None)
        with pytest.raises(ValueError, match="use_norm .* >= 0"):
            clip_by_global_norm(t, 1.0, use_norm=-1.0)
        with pytest.raises(TypeError, match=r"x\[0\] must be a tensor"):
            clip_by_global_norm([3], 1.0)
    main = fluid.Program()
    with fluid.program_guard(main):
        s = fluid.data("s", [2])
    with dygraph.guard():
        t = dygraph.to_variable(np.ones(2, "float32"))
        with pytest.raises(TypeError, match="mixes dygraph tensors and static Variables"):
            clip_by_global_norm([t, s], 1.0)
    other = fluid.Program()
    with fluid.program_guard(other):
        s2 = fluid.data("s2", [2])
    with pytest.raises(ValueError, match="different Programs"):
        clip_by_global_norm([s, s2], 1.0)
