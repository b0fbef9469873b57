"""Tests written from mutation testing (issue 28, docs/mutation.md) for ``fluidlite/ops/clip.py``:
the boundaries of ``clip`` and its gradient, ``clip_by_norm`` at and beyond ``max_norm`` (also
where the factor is subnormal), overflow-free norms, ``squared_l2_norm``'s dtypes and gradient
at extreme scales, and ``check_finite_norm``'s report. References are float64 / exact-integer
NumPy or Python computed here, and central differences for gradients."""
import math

import numpy as np
import pytest

from fluidlite.core.dtypes import convert_dtype
from fluidlite.core.registry import VarSpec, get_op_def

CLIP, CBN = get_op_def("clip"), get_op_def("clip_by_norm")
SQ, CHECK = get_op_def("squared_l2_norm"), get_op_def("check_finite_norm")


def _rand(shape, dtype="float64", seed=0, lo=-2.0, hi=2.0):
    return np.random.default_rng(seed).uniform(lo, hi, shape).astype(dtype)


# -- clip -------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int32", "int64"])
def test_clip_forward_and_lowered_kernel_agree_with_the_definition(dtype):
    x = np.array([[-5, -1, 0, 1, 2, 7]], dtype)
    lo, hi = -1.0, 2.0
    want = np.array([[-1, -1, 0, 1, 2, 2]], dtype)       # min(max(x, lo), hi)
    for got in (CLIP.forward(x, min=lo, max=hi)["Out"],
                CLIP.lower([VarSpec(x.shape, dtype)], {"min": lo, "max": hi})(x)):
        assert got.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(got, want)


def test_clip_bounds_beyond_float16_become_its_infinities():
    x = np.array([-60000, -1, 3, 60000], np.float16)
    got = CLIP.forward(x, min=-1e10, max=1e10)["Out"]      # nothing to clip: float16's range
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, x)
    got = CLIP.forward(x, min=0.5, max=1e10)["Out"]
    np.testing.assert_array_equal(got, np.array([0.5, 0.5, 3, 60000], np.float16))


def test_clip_with_equal_bounds_is_constant_and_min_above_max_is_refused():
    x = _rand((3, 4))
    np.testing.assert_array_equal(CLIP.forward(x, min=0.25, max=0.25)["Out"],
                                  np.full_like(x, 0.25))
    msg = r"^clip: max should be greater than or equal to min, but received min = 1.0, max = -1.0$"
    with pytest.raises(ValueError, match=msg):
        CLIP.infer(VarSpec(x.shape, "float64"), min=1.0, max=-1.0)
    with pytest.raises(ValueError, match=msg):
        CLIP.lower([VarSpec(x.shape, "float64")], {"min": 1.0, "max": -1.0})
    assert CLIP.infer(VarSpec((3, 4), "float32"), min=0.0, max=1.0)["Out"].shape == (3, 4)


def test_clip_gradient_passes_strictly_inside_the_bounds_only():
    # fluid's clip_grad: dX = dOut where min < X < max, 0 at and beyond the bounds
    x = np.array([-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0])
    d = _rand(x.shape, seed=3) + 3.0                      # all non-zero
    got = CLIP.backward(x, d, min=-1.0, max=1.0)["X"]
    np.testing.assert_array_equal(got, np.where((x > -1) & (x < 1), d, 0.0))
    inner = np.array([-0.9, 0.3, 0.9])                    # away from the kinks: the derivative
    eps = 1e-6
    fd = (CLIP.forward(inner + eps, min=-1.0, max=1.0)["Out"]
          - CLIP.forward(inner - eps, min=-1.0, max=1.0)["Out"]) / (2 * eps)
    np.testing.assert_allclose(CLIP.backward(inner, np.ones(3), min=-1.0, max=1.0)["X"], fd)


# -- norms ------------------------------------------------------------------------------------
@pytest.mark.parametrize("x,want", [
    (np.array([3e200, 4e200]), 5e200),               # the squares overflow float64
    (np.array([3e-200, 4e-200]), 5e-200),            # the squares underflow to 0
    (np.array([0.0, 0.0]), 0.0), (np.zeros(0), 0.0),
    (np.array([3.0, 4.0], np.float16), 5.0),
    (np.array([60000.0, 60000.0], np.float16), 60000.0 * math.sqrt(2)),   # squares > f16 max
    (np.array([1.5e38, 2e38], np.float32), 2.5e38)])
def test_clip_by_norm_uses_an_overflow_free_norm(x, want):
    # max_norm above the norm: unchanged; below: scaled to exactly max_norm's length
    big = CBN.forward(x, max_norm=want * 2 if want else 1.0)["Out"]
    np.testing.assert_array_equal(big, x)
    if want:
        half = CBN.forward(x, max_norm=want / 2)["Out"]
        assert half.dtype == x.dtype
        np.testing.assert_allclose(half.astype(np.float64), x.astype(np.float64) / 2,
                                   rtol=2e-3 if x.dtype == np.float16 else 1e-6)


def test_clip_by_norm_at_exactly_max_norm_is_the_identity_and_a_copy():
    x = np.array([3.0, 4.0])
    out = CBN.forward(x, max_norm=5.0)["Out"]
    np.testing.assert_array_equal(out, x)
    out[0] = 100.0                                         # the op's output is not its input
    assert x[0] == 3.0
    np.testing.assert_array_equal(CBN.backward(x, np.array([1.0, -2.0]), max_norm=5.0)["X"],
                                  [1.0, -2.0])


def test_clip_by_norm_with_a_subnormal_factor_keeps_the_direction():
    # ||x|| = 2.5e38 in float32 and max_norm 1e-6: max_norm / n = 4e-45 is subnormal in float32,
    # so x * k would lose every digit; the result must still be x / n * max_norm
    x = np.array([1.5e38, -2e38], np.float32)
    got = CBN.forward(x, max_norm=1e-6)["Out"]
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, [0.6e-6, -0.8e-6], rtol=1e-6)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")     # inf * 0 and the NaN, as fluid
def test_clip_by_norm_nan_and_inf_follow_fluids_kernel():
    out = CBN.forward(np.array([1.0, np.nan]), max_norm=1.0)["Out"]
    assert np.isnan(out).all()
    out = CBN.forward(np.array([1.0, np.inf]), max_norm=1.0)["Out"]
    assert out[0] == 0.0 and np.isnan(out[1])


def test_clip_by_norm_gradient_matches_central_differences():
    x = _rand((3, 4), seed=5)
    d = _rand((3, 4), seed=6)
    mx = 0.5 * float(np.linalg.norm(x))
    got = CBN.backward(x, d, max_norm=mx)["X"]
    eps = 1e-6
    fd = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = eps
        fd[i] = np.sum(d * (CBN.forward(x + e, max_norm=mx)["Out"]
                            - CBN.forward(x - e, max_norm=mx)["Out"])) / (2 * eps)
    np.testing.assert_allclose(got, fd, rtol=1e-6, atol=1e-8)
    assert CBN.backward(x.astype(np.float32), d.astype(np.float32),
                        max_norm=mx)["X"].dtype == np.float32


def test_clip_by_norm_refuses_bad_max_norm_and_integer_inputs():
    with pytest.raises(ValueError, match=r"^clip_by_norm: max_norm should be greater than 0, "
                                         r"but received max_norm = 0.0$"):
        CBN.infer(VarSpec((2,), "float32"), max_norm=0.0)
    with pytest.raises(ValueError, match=r"^clip_by_norm: X must be float16, float32 or "
                                         r"float64, got int64$"):
        CBN.infer(VarSpec((2,), "int64"), max_norm=1.0)
    assert CBN.infer(VarSpec((2, 3), "float16"), max_norm=1.0)["Out"].shape == (2, 3)


# -- squared_l2_norm --------------------------------------------------------------------------
def test_squared_l2_norm_dtypes_and_values():
    for dt in ("float16", "float32", "float64"):
        spec = SQ.infer(VarSpec((3, 4), dt))["Out"]
        assert spec.shape == (1,) and convert_dtype(spec.dtype) == "float64"
    spec = SQ.infer(VarSpec((3, 4), "int64"))["Out"]
    assert spec.shape == (1,) and convert_dtype(spec.dtype) == "int64"
    xi = np.array([[1, -2], [3, 4]], np.int64)
    for got in (SQ.forward(xi)["Out"], SQ.lower([VarSpec((2, 2), "int64")], {})(xi)):
        assert got.dtype == np.int64 and got.tolist() == [30]
    xf = np.array([60000.0, 60000.0], np.float16)             # sum of squares > float16 max
    got = SQ.forward(xf)["Out"]
    assert got.dtype == np.float64 and got.shape == (1,) and got[0] == 2 * 60000.0 ** 2


@pytest.mark.parametrize("x,dout,want", [
    (np.array([1e-4, -2e-4], np.float16), 1e5, [20.0, -40.0]),    # 2 * dOut beyond float16
    (np.array([1e4, -2e4], np.float16), 1e-8, [2e-4, -4e-4]),     # 2 * dOut below its tiny
    (np.array([1.5, -2.0], np.float32), 0.25, [0.75, -1.0])])
# no RuntimeWarning either (pytest.ini / -W error would fail the test): _times once compared
# abs(k) with float16's finfo.max, which NumPy 2 did by casting k = 2e5 to float16 and warned
@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_squared_l2_norm_gradient_is_right_where_the_product_is_representable(x, dout, want):
    got = SQ.backward(x, np.array([dout]))["X"]
    assert got.dtype == x.dtype
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=2e-3)


# -- check_finite_norm ------------------------------------------------------------------------
def test_check_finite_norm_passes_a_finite_norm_through():
    x = np.array([2.5])
    assert CHECK.forward(x, [np.array([6.25])], grad_names=["w@GRAD"])["Out"] is x
    assert CHECK.infer(VarSpec((1,), "float64"), [])["Out"].shape == (1,)


def test_check_finite_norm_names_each_non_finite_gradient():
    norms = [np.array([1.0]), np.array([np.inf]), np.array([np.nan])]
    with pytest.raises(FloatingPointError) as e:
        CHECK.forward(np.array([np.inf]), norms, grad_names=["a@GRAD", "b@GRAD"])
    msg = str(e.value)
    assert "the global gradient norm is inf" in msg
    assert "non-finite gradients: b@GRAD (squared norm inf), #2 (squared norm nan)." in msg
    assert "a@GRAD" not in msg and "No parameter was updated" in msg
    with pytest.raises(FloatingPointError, match=r"norm is nan; non-finite gradients: "
                                                 r"\(none individually; the sum overflowed\)"):
        CHECK.forward(np.array([np.nan]), [np.array([1.0])], grad_names=["a@GRAD"])


@pytest.mark.parametrize("x", [np.array([3e200, 4e200]), np.array([3e-200, 4e-200]),
                               np.array([60000.0, 60000.0], np.float16)])
def test_norms_that_over_or_underflow_on_the_way_warn_nothing(x):
    # the overflow / underflow of the squares is handled (rescaled or accumulated in float64),
    # so the user sees no RuntimeWarning for a finite input
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        n = float(np.sqrt(np.sum(x.astype(np.float64) ** 2))) if x.dtype != np.float64 else \
            float(np.hypot(*x))
        CBN.forward(x, max_norm=n / 2)
        CBN.backward(x, np.ones_like(x), max_norm=n / 2)
        CLIP.forward(x, min=-1e10, max=1e10)                # a bound beyond float16's range


# -- integer clip: fluid's static_cast<T>(attr) bounds (issue 28) ------------------------------
@pytest.mark.parametrize("dtype", ["int32", "int64", "uint8"])
def test_integer_clip_truncates_its_bounds_toward_zero_and_keeps_the_dtype(dtype):
    # fluid's ClipKernel<int>: min_ = static_cast<int>(attr min), a C++ truncation toward zero:
    # -2.7 -> -2 and 3.9 -> 3 (not floor / ceil); for uint8 a negative bound is held at 0
    x = np.arange(-5, 6).astype(dtype) if dtype != "uint8" else np.arange(0, 8, dtype=dtype)
    lo, hi = (-2, 3) if dtype != "uint8" else (0, 3)
    want = np.array([min(max(int(v), lo), hi) for v in x], dtype)
    spec = VarSpec(x.shape, dtype)
    for got in (CLIP.forward(x, min=-2.7, max=3.9)["Out"],
                CLIP.lower([spec], {"min": -2.7, "max": 3.9})(x)):
        assert got.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(got, want)
    d = _rand(x.shape, seed=11) + 3.0
    got = CLIP.backward(x, d, min=-2.7, max=3.9)["X"]
    np.testing.assert_array_equal(got, np.where((x.astype(np.int64) > lo) &
                                                (x.astype(np.int64) < hi), d, 0.0))


def test_integer_clip_bounds_beyond_the_range_clip_nothing():
    x = np.array([np.iinfo(np.int32).min, -7, 0, 7, np.iinfo(np.int32).max], np.int32)
    for lo, hi in ((-1e10, 1e10), (-math.inf, math.inf)):
        got = CLIP.forward(x, min=lo, max=hi)["Out"]
        assert got.dtype == np.int32
        np.testing.assert_array_equal(got, x)
    got = CLIP.forward(x, min=-math.inf, max=5.5)["Out"]
    np.testing.assert_array_equal(got, [np.iinfo(np.int32).min, -7, 0, 5, 5])
    got = CLIP.forward(x, min=-5.5, max=math.inf)["Out"]
    np.testing.assert_array_equal(got, [-5, -5, 0, 7, np.iinfo(np.int32).max])


def test_integer_clip_refuses_a_nan_bound_and_clip_refuses_bool():
    with pytest.raises(ValueError, match=r"^clip: a NaN bound \(min = nan, max = 1.0\) cannot "
                                         r"clip an integer tensor \(int64\)$"):
        CLIP.forward(np.arange(3), min=math.nan, max=1.0)
    with pytest.raises(ValueError, match=r"^clip: X must be a float or integer tensor, got "
                                         r"bool$"):
        CLIP.forward(np.array([True, False]), min=0.0, max=1.0)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_float_clip_gradient_uses_the_bounds_in_xs_dtype(dtype):
    # fluid's ClipGradFunctor compares y with static_cast<T>(min): a value equal to the bound
    # rounded to T is *at* the bound (gradient 0) even though it differs from the float64 bound
    lo = 0.1
    x = np.array([lo, 0.5, 0.9], dtype)
    got = CLIP.backward(x, np.ones(3, dtype), min=lo, max=0.9)["X"]
    np.testing.assert_array_equal(got, [0.0, 1.0, 0.0])


# -- SelectedRows (fluid 1.8: merged, then the values processed) -----------------------------
def _sparse():
    from fluidlite.core.selected_rows import SelectedRows
    rows = [4, 1, 4]
    value = np.array([[0.5, -3.0], [2.0, 0.25], [1.0, -1.0]])
    dense = np.zeros((6, 2))
    np.add.at(dense, rows, value)                          # fluid's MergeAdd, independently
    return SelectedRows(rows, value, 6), dense


def test_var_types_follow_x_sparse_or_dense():
    from fluidlite.core.dtypes import VarType
    for op in (CLIP, CBN):
        assert op.var_types({"X": [VarType.SELECTED_ROWS]}, {}) == {
            "Out": VarType.SELECTED_ROWS}
        assert op.var_types({"X": [VarType.LOD_TENSOR]}, {}) == {"Out": VarType.LOD_TENSOR}
        assert op.var_types({}, {}) == {"Out": VarType.LOD_TENSOR}


def test_clip_of_selected_rows_merges_then_clips_the_values():
    sr, dense = _sparse()
    for got in (CLIP.forward(sr, min=-1.5, max=1.2)["Out"],
                CLIP.lower([VarSpec((6, 2), "float64")], {"min": -1.5, "max": 1.2})(sr)):
        assert type(got) is type(sr) and got.height == 6
        assert got.rows.tolist() == [1, 4]
        np.testing.assert_array_equal(got.value, np.minimum(np.maximum(dense[[1, 4]], -1.5),
                                                            1.2))


def test_clip_by_norm_of_selected_rows_scales_the_merged_values():
    sr, dense = _sparse()
    n = float(np.sqrt(np.sum(dense ** 2)))                 # the merged rows' norm
    got = CBN.forward(sr, max_norm=0.5)["Out"]
    assert type(got) is type(sr) and got.height == 6 and got.rows.tolist() == [1, 4]
    np.testing.assert_allclose(got.value, dense[[1, 4]] * (0.5 / n), rtol=1e-14)


def test_squared_l2_norm_of_selected_rows_is_that_of_the_merged_rows():
    sr, dense = _sparse()
    want = float(np.sum(dense ** 2))           # (0.5+1)^2 + 9 + 1 + ... : duplicates summed
    for got in (SQ.forward(sr)["Out"], SQ.lower([VarSpec((6, 2), "float64")], {})(sr)):
        assert got.shape == (1,) and got[0] == pytest.approx(want, rel=1e-15)


# -- exact float64 results: fluid's formulas --------------------------------------------------
@pytest.mark.parametrize("a,b,max_norm", [(13, 8, 0.1), (12, 7, 0.1), (6, 5, 0.1),
                                          (13 * 64, 8 * 64, 0.1)])
def test_clip_by_norm_float64_is_fluids_formula_bit_for_bit(a, b, max_norm):
    # fluid's ClipByNormKernel: x_norm = sqrt(sum(x^2)); Out = x * (max_norm / x_norm) when
    # x_norm > max_norm. Dyadic x: the squares and their sum are exact, so the reference is the
    # correctly rounded sqrt of one number, whatever the summation order.
    x = np.array([a / 64, -b / 64])
    n = math.sqrt((a * a + b * b) / 4096)
    got = CBN.forward(x, max_norm=max_norm)["Out"]
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, x * (max_norm / n))


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_squared_l2_norm_gradient_is_fluids_2_dout_x_in_xs_dtype(dtype):
    # fluid's SquaredL2NormGradKernel computes in T: dX = 2 * dOut * X with dOut a T, i.e. the
    # factor 2 * dOut is rounded to T, then the product is rounded once
    x = _rand((400,), dtype, seed=21, lo=-3, hi=3)
    t = np.dtype(dtype).type
    for dout in (0.3, -1.7, 1e-3):
        got = SQ.backward(x, np.array([dout]))["X"]
        assert got.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(got, (t(2) * t(dout)) * x)
    zero = SQ.backward(x, np.array([0.0]))["X"]
    assert zero.dtype == np.dtype(dtype) and not zero.any()


def test_times_beyond_float16_warns_nothing_under_error_filters():
    import warnings
    x = np.array([1e-4, -2e-4, 0.0], np.float16)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = SQ.backward(x, np.array([1e5]))["X"]           # k = 2e5 > float16 max
    np.testing.assert_allclose(got.astype(np.float64), [20.0, -40.0, 0.0], rtol=2e-3)
