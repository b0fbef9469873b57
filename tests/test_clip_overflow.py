"""Overflow-safe norms (issue 11): ``squared_l2_norm`` sums float32 pieces with float32 dots, adds
the pieces in float64 (redoing a piece in float64 when its float32 sum overflows or is tiny) and
returns float64;
``clip_by_norm`` computes its norm in float64 and scales correctly for any finite input, with
hypothesis properties over float32 values of any magnitude (up to +-3.4e38, down to subnormals),
all run through the real Executor."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import fluidlite as fluid
from fluidlite.core.ir import Program, program_guard

F32_MAX = float(np.finfo(np.float32).max)
EXE = fluid.Executor(fluid.CPUPlace())


def _one_op(op_type, dtype="float32", attrs=None, with_grad=False):
    """(program, x var, out var, x@GRAD var or None): ``op_type`` on a fed 1-D ``x``."""
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = fluid.data("x", [-1], dtype)
        x.stop_gradient = not with_grad
        block = main.global_block()
        out = block.create_var(name="out")
        block.append_op(op_type, {"X": x}, {"Out": out}, dict(attrs or {}))
        grad = None
        if with_grad:
            loss = fluid.layers.reduce_sum(out)
            grad = fluid.backward.gradients([loss], [x])[0]
    return main, x, out, grad


def _run(prog, fetch, x):
    return EXE.run(prog, feed={"x": x}, fetch_list=fetch, scope=fluid.Scope())


# float32 values of every magnitude: hypothesis' width-32 floats include +-3.4e38, subnormals
# and zeros; the mixed-scale strategy adds arrays whose entries all sit at one huge/tiny scale.
_f32 = st.floats(width=32, allow_nan=False, allow_infinity=False)
_any = hnp.arrays(np.float32, st.integers(1, 40), elements=_f32)
_scaled = st.builds(
    lambda a, e: (a.astype(np.float64) * 10.0 ** e).clip(-F32_MAX, F32_MAX).astype(np.float32),
    hnp.arrays(np.float32, st.integers(1, 40), elements=st.floats(-1, 1, width=32)),
    st.integers(-44, 38))
_arrays = st.one_of(_any, _scaled)


def _norm(a):
    a = np.asarray(a, np.float64)
    m = np.max(np.abs(a)) if a.size else 0.0
    return 0.0 if m == 0 else m * np.sqrt(np.sum((a / m) ** 2))


SQ_PROG = _one_op("squared_l2_norm")


@settings(max_examples=60, deadline=None)
@given(x=_arrays)
def test_property_squared_l2_norm_is_the_float64_sum(x):
    main, _, out, _ = SQ_PROG
    got, = _run(main, [out], x)
    want = np.sum(x.astype(np.float64) ** 2)
    assert got.dtype == np.float64 and got.shape == (1,)
    assert np.isfinite(got[0])
    # a float32 dot's rounding (a few ulps of float32); exact where it is redone in float64
    np.testing.assert_allclose(got[0], want, rtol=1e-6, atol=0)


@pytest.mark.parametrize("scale", [1e-30, 1e-12, 1.0, 1e18, 3e38])
def test_squared_l2_norm_of_a_large_tensor_at_any_scale(scale):
    """Several float32 pieces (2^17 elements each): finite, close to the float64 sum, and the
    same number whether computed whole or through the fused scaled path."""
    from fluidlite.ops.inplace import CHUNK, sum_squares
    rng = np.random.default_rng(0)
    x = (rng.uniform(-1, 1, 3 * CHUNK + 5) * scale).astype(np.float32)
    want = np.sum(x.astype(np.float64) ** 2)
    got = sum_squares(x)
    assert np.isfinite(got) and got > 0
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert sum_squares(x, np.float32(1.0)) == got


@settings(max_examples=60, deadline=None)
@given(x=_arrays, max_norm=st.one_of(st.floats(1e-30, 1e30), st.sampled_from([1.0, 5.0])))
def test_property_clip_by_norm_any_magnitude(x, max_norm):
    main, _, out, _ = _one_op("clip_by_norm", attrs={"max_norm": max_norm})
    got, = _run(main, [out], x)
    assert got.dtype == np.float32 and got.shape == x.shape and np.isfinite(got).all()
    n, m = _norm(x), _norm(got)
    if n <= max_norm:
        assert np.array_equal(got, x)
        return
    assert m <= max_norm * (1 + 1e-6)
    assert m >= max_norm * (1 - 1e-5)         # it is scaled to the limit, not to zero
    cos = np.dot(got / m, x.astype(np.float64) / n)
    assert cos == pytest.approx(1.0, abs=1e-6)


@pytest.mark.parametrize("value", [3.0e38, 1.0e20, 2.0e19])
def test_large_finite_float32_is_clipped_not_zeroed(value):
    """The issue's case: float32 squares overflow above ~1.8e19; the clip must still scale."""
    x = np.array([value, -value, value / 2], np.float32)
    sq_main, _, sq_out, _ = SQ_PROG
    sq, = _run(sq_main, [sq_out], x)
    x64 = x.astype(np.float64)
    assert np.isfinite(sq[0]) and sq[0] == pytest.approx(np.sum(x64 * x64), rel=1e-14)
    main, _, out, _ = _one_op("clip_by_norm", attrs={"max_norm": 1.0})
    got, = _run(main, [out], x)
    np.testing.assert_allclose(got, x64 / np.sqrt(np.sum(x64 * x64)), rtol=1e-6)


def test_tiny_max_norm_with_huge_input_scales_in_float64():
    """max_norm / n is subnormal in float32 here: the product is formed in float64."""
    x = np.array([3e38, 3e38, 1e30], np.float32)
    main, _, out, _ = _one_op("clip_by_norm", attrs={"max_norm": 1e-30})
    got, = _run(main, [out], x)
    np.testing.assert_allclose(got, [1e-30 / np.sqrt(2)] * 2 + [1e-30 * 1e30 / (3e38 * 2 ** .5)],
                               rtol=1e-5)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_squared_l2_norm_is_float64_for_every_float_dtype(dtype):
    main, _, out, grad = _one_op("squared_l2_norm", dtype=dtype, with_grad=True)
    assert out.dtype == fluid.core.VarDesc.VarType.FP64 or str(out.dtype).endswith("FP64")
    assert grad.dtype == main.global_block().var("x").dtype
    x = np.array([3.0, -4.0], dtype)
    got, g = _run(main, [out, grad], x)
    assert got.dtype == np.float64 and got[0] == 25.0
    assert g.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(g, 2 * x)


def test_squared_l2_norm_grad_of_huge_values_is_right_where_representable():
    """dX = 2 * X * dOut in X's dtype: a dOut outside float32's range still gives a correct dX."""
    main, _, out, grad = _one_op("squared_l2_norm", with_grad=True)
    x = np.array([1e-30, 2e-30], np.float32)
    g, = _run(main, [grad], x)
    np.testing.assert_allclose(g, 2 * x, rtol=1e-6)


def test_clip_by_norm_grad_of_huge_input_is_finite_and_right():
    """d/dX sum(clip_by_norm(X)) for a float32 X whose squares overflow float32."""
    x = np.array([3e38, -1e38, 2e38], np.float32)
    main, _, out, grad = _one_op("clip_by_norm", attrs={"max_norm": 1.0}, with_grad=True)
    g, = _run(main, [grad], x)
    x64 = x.astype(np.float64)
    n = np.linalg.norm(x64)
    u = x64 / n
    want = (1.0 / n) * (np.ones(3) - u * u.sum())
    assert g.dtype == np.float32 and np.isfinite(g).all()
    np.testing.assert_allclose(g, want, rtol=1e-5)


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")   # inf * 0, as intended
def test_clip_by_norm_nonfinite_input_propagates():
    """fluid's kernel: the factor max_norm / n is NaN for a NaN input and 0 for an Inf one, so
    Out is NaN everywhere, resp. NaN at the Inf entries (Inf * 0) and 0 elsewhere."""
    main, _, out, _ = _one_op("clip_by_norm", attrs={"max_norm": 1.0})
    got, = _run(main, [out], np.array([np.nan, 1.0, 2.0], np.float32))
    assert np.isnan(got).all()
    got, = _run(main, [out], np.array([np.inf, 1.0, 2.0], np.float32))
    assert np.isnan(got[0]) and (got[1:] == 0).all()
    sq_main, _, sq_out, _ = SQ_PROG
    assert np.isnan(_run(sq_main, [sq_out], np.array([np.nan, 1], np.float32))[0][0])
    assert _run(sq_main, [sq_out], np.array([-np.inf, 1], np.float32))[0][0] == np.inf


def test_clip_by_norm_rejects_integer_input():
    with pytest.raises(ValueError, match="clip_by_norm: X must be float16, float32 or float64"):
        _one_op("clip_by_norm", dtype="int64")


def test_float64_input_beyond_float64_squares_is_rescaled():
    main, _, out, _ = _one_op("clip_by_norm", dtype="float64", attrs={"max_norm": 2.0})
    got, = _run(main, [out], np.array([1e300, -1e300, 1e300, 1e300]))
    np.testing.assert_allclose(got, [1.0, -1.0, 1.0, 1.0], rtol=1e-12)


@pytest.mark.parametrize("size", [8192, 131072, 131073, 300_007])
def test_squared_l2_norm_chunked_sum_matches_float64(size):
    """Arrays beyond one float64 scratch chunk: the chunked sum equals the float64 reference."""
    rng = np.random.default_rng(size)
    x = (rng.standard_normal(size) * 10.0 ** rng.integers(-30, 38, size)).astype(np.float32)
    x[::997] = F32_MAX
    main, _, out, _ = SQ_PROG
    got, = _run(main, [out], x)
    x64 = x.astype(np.float64)
    assert np.isfinite(got[0])
    np.testing.assert_allclose(got[0], np.dot(x64, x64), rtol=1e-13)
    cb_main, _, cb_out, _ = _one_op("clip_by_norm", attrs={"max_norm": 3.0})
    clipped, = _run(cb_main, [cb_out], x)
    assert _norm(clipped) == pytest.approx(3.0, rel=1e-6)
