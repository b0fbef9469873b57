"""Hypothesis properties of the three gradient clips, run through the Executor, for finite float32
gradients of any magnitude (up to float32's limits): the clip never lets a norm exceed its bound,
never changes a direction, and never mistakes a large finite gradient for a non-finite one."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import fluidlite as fluid

F32 = np.finfo(np.float32)
# finite float32 values of every magnitude: tiny, ordinary, and near float32's largest
ELEMS = st.one_of(
    st.floats(-1e3, 1e3, width=32),
    st.floats(-float(F32.max), float(F32.max), width=32),
    st.sampled_from([float(F32.max), -float(F32.max), float(np.float32(1e38)),
                     float(np.float32(-3e38)), float(np.float32(1e-30)), 0.0]))
GRADS = st.lists(hnp.arrays(np.float32, st.integers(1, 6), elements=ELEMS), min_size=1,
                 max_size=3)
NORMS = st.sampled_from([1e-3, 0.5, 1.0, 5.0, 1e6])
SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def _run_clip(clip, grads):
    """Apply ``clip`` to (param, grad) pairs whose grads are fed; return the clipped arrays."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        block = main.global_block()
        pairs, feed = [], {}
        for i, g in enumerate(grads):
            p = block.create_parameter(name=f"p{i}", shape=list(g.shape), dtype="float32")
            gv = fluid.data(name=f"g{i}", shape=list(g.shape), dtype="float32")
            pairs.append((p, gv))
            feed[gv.name] = g
        out = clip(pairs)
    exe = fluid.Executor(fluid.CPUPlace())
    return exe.run(main, feed=feed, fetch_list=[g for _, g in out], scope=fluid.Scope())


def _norm(xs):
    return np.sqrt(sum(float(np.sum(np.square(x.astype(np.float64)))) for x in xs))


def _same_direction(a, b):
    """``b`` is a non-negative multiple of ``a`` (elementwise signs agree, cosine ~ 1)."""
    a64, b64 = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    na, nb = np.linalg.norm(a64), np.linalg.norm(b64)
    if na == 0 or nb == 0:
        return nb == 0 or na == 0
    return np.dot(a64, b64) / (na * nb) >= 1 - 1e-6


@SETTINGS
@given(GRADS, NORMS)
def test_global_norm_clip_bound_and_direction(grads, clip_norm):
    clip = fluid.clip.GradientClipByGlobalNorm(clip_norm, error_if_nonfinite=True)
    out = _run_clip(clip, grads)      # error_if_nonfinite: raises if a finite norm looked inf
    assert all(np.isfinite(o).all() for o in out)
    total = _norm(grads)
    assert _norm(out) <= clip_norm * (1 + 1e-6) or _norm(out) <= total * (1 + 1e-6)
    if total <= clip_norm:
        for g, o in zip(grads, out):
            np.testing.assert_array_equal(o, g)
    # one common factor for all gradients: the joint direction is unchanged
    assert _same_direction(np.concatenate([g.ravel() for g in grads]),
                           np.concatenate([o.ravel() for o in out]))


@SETTINGS
@given(GRADS, NORMS)
def test_norm_clip_bound_and_direction(grads, clip_norm):
    out = _run_clip(fluid.clip.GradientClipByNorm(clip_norm), grads)
    for g, o in zip(grads, out):
        assert np.isfinite(o).all()
        assert _norm([o]) <= max(clip_norm, _norm([g])) * (1 + 1e-6)
        assert _norm([o]) <= clip_norm * (1 + 1e-6) or _norm([g]) <= clip_norm
        assert _same_direction(g, o)


@SETTINGS
@given(GRADS, st.floats(float(np.float32(1e-3)), float(F32.max), width=32))
def test_value_clip_bounds_every_element(grads, bound):
    out = _run_clip(fluid.clip.GradientClipByValue(float(bound)), grads)
    for g, o in zip(grads, out):
        assert (np.abs(o) <= np.float32(bound)).all()
        np.testing.assert_array_equal(o, np.clip(g, -np.float32(bound), np.float32(bound)))


@pytest.mark.parametrize("scale", [1e18, 1e20, 1e30, 3e38])
def test_large_finite_gradients_still_update(scale):
    """The reported bug: above ~1.8e19 the float32 squared norm overflowed, the scale became 0
    and the update was silently skipped."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data(name="x", shape=[-1, 2], dtype="float32")
        w = fluid.layers.create_parameter([2, 1], "float32", name="w",
                                          default_initializer=fluid.initializer.Constant(0.0))
        loss = fluid.layers.mean(fluid.layers.matmul(x, w))
        clip = fluid.clip.GradientClipByGlobalNorm(1.0, error_if_nonfinite=True)
        fluid.optimizer.SGD(1.0, grad_clip=clip).minimize(loss)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    feed = {"x": np.array([[scale, scale]], np.float32)}
    norm, = exe.run(main, feed=feed, fetch_list=[clip.global_norm], scope=scope)
    np.testing.assert_allclose(norm, [scale * np.sqrt(2)], rtol=1e-6)
    w_new = np.array(scope.find_var("w").get_tensor())
    np.testing.assert_allclose(w_new, -np.full((2, 1), 1 / np.sqrt(2)), rtol=1e-5)
