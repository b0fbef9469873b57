"""Tests written from mutation testing (issue 28, docs/mutation.md) for
``fluidlite/ops/activation.py``: the two erf implementations behind GELU against Python's
``math.erf`` over the whole line (float64: ~1e-15; float32: ~1e-7 absolute), their special
values, and their dtypes. Mutants of the Chebyshev tables or the minimax coefficients move the
error by orders of magnitude, which these bounds catch."""
import math

import numpy as np
import pytest

from fluidlite.ops import activation
from fluidlite.ops.activation import erf_fast, erf_numpy

@pytest.fixture(autouse=True)
def _fresh_erf_tables():
    """The float64 erf's Chebyshev tables are built on first use and cached: rebuild them for
    each test, so the tests check the building too (not a table cached by an earlier test)."""
    activation._ERF_COEF.clear()
    yield


_GRID = np.concatenate([np.linspace(-7.0, 7.0, 20001), [0.0, 1e-300, -1e-300, 1e-8, -3e-7,
                                                      0.25, 0.999999, 1.0, 1.000001, 3.999,
                                                      4.0, 4.001, 5.999, 6.0, 6.001, 30.0]])
_REF = np.array([math.erf(v) for v in _GRID])


def test_float64_erf_matches_math_erf_to_a_few_ulps_everywhere():
    got = erf_numpy(_GRID)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, _REF, rtol=4e-15, atol=4e-16)


def test_float64_erf_keeps_relative_accuracy_near_zero():
    x = np.array([1e-300, -1e-300, 1e-20, 3e-9, -2e-5, 0.01, 0.2])
    ref = np.array([math.erf(v) for v in x])
    np.testing.assert_allclose(erf_numpy(x), ref, rtol=4e-15, atol=0)


def test_float32_erf_is_within_two_ulps_of_one():
    x = _GRID.astype(np.float32)
    ref = np.array([math.erf(float(v)) for v in x])
    got = erf_fast(x)
    assert got.dtype == np.float32
    err = np.abs(got.astype(np.float64) - ref)
    assert err.max() < 1.2e-7, (err.max(), x[err.argmax()])
    small = np.abs(x) < 0.5                 # near 0 the error is relative (x P(x^2) + x)
    rel = err[small] / np.maximum(np.abs(ref[small]), 1e-30)
    assert rel.max() < 3e-7


@pytest.mark.parametrize("erf,dtype", [(erf_fast, np.float16), (erf_fast, np.float32),
                                       (erf_numpy, np.float16), (erf_numpy, np.float32),
                                       (erf_numpy, np.float64)])
def test_special_values_and_dtypes(erf, dtype):
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 2.0, -2.0], dtype)
    got = erf(x)
    assert got.dtype == dtype and got.shape == x.shape
    assert np.isnan(got[0]) and got[1] == 1 and got[2] == -1 and got[3] == 0
    assert np.signbit(got[4])                       # erf(-0) = -0
    assert got[5] == -got[6]
    np.testing.assert_allclose(float(got[5]), math.erf(2.0), rtol=1e-3 if dtype == np.float16
                               else 2e-7)


def test_shapes_and_integer_inputs():
    x = np.arange(-3, 3).reshape(2, 3)
    got = erf_numpy(x)
    assert got.dtype == np.float64 and got.shape == (2, 3)
    np.testing.assert_allclose(got.ravel(), [math.erf(v) for v in range(-3, 3)], rtol=1e-15)
    assert erf_fast(np.float32(0.5)).shape == ()


# -- second round: the kernels called directly (forward / backward, not the lowered path) ------
from fluidlite.core.dtypes import VarType                                  # noqa: E402
from fluidlite.core.registry import VarSpec, get_op_def                    # noqa: E402

_X = np.array([-9.0, -3.0, -2.5, -1.0, -0.3, 0.0, 0.4, 1.0, 2.0, 2.6, 5.0, 7.5])


def _sig(x):
    return 1.0 / (1.0 + np.exp(-x))


def _gelu(x):
    return np.array([0.5 * v * (1.0 + math.erf(v / math.sqrt(2.0))) for v in x])


def _gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


# fluid 1.8's attribute defaults (activation_op.cc): leaky_relu alpha 0.02, relu6 threshold 6,
# hard_sigmoid slope 0.2 / offset 0.5, elu alpha 1, swish beta 1, gelu approximate False
_DEFAULTS = {
    "leaky_relu": lambda x: np.where(x > 0, x, 0.02 * x),
    "relu6": lambda x: np.clip(x, 0.0, 6.0),
    "hard_sigmoid": lambda x: np.clip(0.2 * x + 0.5, 0.0, 1.0),
    "elu": lambda x: np.where(x > 0, x, np.exp(x) - 1.0),
    "swish": lambda x: x * _sig(x),
    "gelu": _gelu,
    "softmax": lambda x: np.exp(x - x.max()) / np.exp(x - x.max()).sum(),
}


@pytest.mark.parametrize("op", sorted(_DEFAULTS))
def test_forward_without_attributes_uses_fluids_defaults(op):
    got = get_op_def(op).forward(_X.copy())["Out"]
    np.testing.assert_allclose(got, _DEFAULTS[op](_X), rtol=1e-12, atol=1e-300)


_ATTRS = {
    "leaky_relu": ({"alpha": 0.3}, lambda x: np.where(x > 0, x, 0.3 * x),
                   lambda x: np.where(x >= 0, 1.0, 0.3)),
    "relu6": ({"threshold": 2.0}, lambda x: np.clip(x, 0.0, 2.0),
              lambda x: ((x > 0) & (x < 2.0)).astype(float)),
    "hard_sigmoid": ({"slope": 0.3, "offset": 0.4}, lambda x: np.clip(0.3 * x + 0.4, 0, 1),
                     lambda x: 0.3 * ((0.3 * x + 0.4 > 0) & (0.3 * x + 0.4 < 1))),
    "elu": ({"alpha": 0.5}, lambda x: np.where(x > 0, x, 0.5 * np.expm1(x)),
            lambda x: np.where(x > 0, 1.0, 0.5 * np.exp(x))),     # fluid: x <= 0 -> alpha e^x
    "swish": ({"beta": 2.0}, lambda x: x * _sig(2.0 * x),
              lambda x: _sig(2 * x) + 2.0 * x * _sig(2 * x) * (1 - _sig(2 * x))),
    "gelu": ({"approximate": True}, _gelu_tanh, None),
}


@pytest.mark.parametrize("op", sorted(_ATTRS))
def test_forward_and_backward_with_attributes_against_float64_formulas(op):
    attrs, f, df = _ATTRS[op]
    d = get_op_def(op)
    np.testing.assert_allclose(d.forward(_X.copy(), **attrs)["Out"], f(_X), rtol=1e-12)
    if df is None:
        return
    dout = np.random.default_rng(3).uniform(0.5, 2.0, _X.shape)
    use = d.forward(_X.copy(), **attrs)["Out"] if d.grad_uses == ("Out",) else _X.copy()
    got = d.backward(use, dout, **attrs)["X"]
    np.testing.assert_allclose(got, dout * df(_X), rtol=1e-12)
    # and the same without attributes, with fluid's defaults
    base = d.backward(d.forward(_X.copy())["Out"] if d.grad_uses == ("Out",) else _X.copy(),
                      dout)["X"]
    defaults = {"leaky_relu": lambda x: np.where(x >= 0, 1.0, 0.02),
                "relu6": lambda x: ((x > 0) & (x < 6.0)).astype(float),
                "hard_sigmoid": lambda x: 0.2 * ((0.2 * x + 0.5 > 0) & (0.2 * x + 0.5 < 1)),
                "elu": lambda x: np.where(x > 0, 1.0, np.exp(x)),
                "swish": lambda x: _sig(x) + x * _sig(x) * (1 - _sig(x))}
    np.testing.assert_allclose(base, dout * defaults[op](_X), rtol=1e-12)


def test_hard_sigmoid_gradient_is_zero_where_the_output_is_clipped_at_0_or_1():
    hs = get_op_def("hard_sigmoid")
    out = np.array([0.0, 1.0, 0.5, 1.0, 0.0])        # Out exactly at the clip bounds
    dout = np.array([1.5, -2.0, 3.0, 0.7, 0.1])
    np.testing.assert_array_equal(hs.backward(out, dout)["X"], [0.0, 0.0, 3.0 * 0.2, 0.0, 0.0])


def test_elu_gradient_at_zero_is_alpha_times_dout_as_fluid():
    got = get_op_def("elu").backward(np.array([0.0, -0.0]), np.array([2.0, 2.0]),
                                     alpha=0.5)["X"]
    np.testing.assert_array_equal(got, [1.0, 1.0])


def test_gelu_and_swish_and_softmax_forward_pass_their_attributes():
    x = _X.reshape(3, 4)
    np.testing.assert_allclose(get_op_def("gelu").forward(x.copy(), approximate=True)["Out"],
                               _gelu_tanh(x), rtol=1e-12)
    sm = get_op_def("softmax").forward(x.copy(), axis=0)["Out"]
    e = np.exp(x - x.max(axis=0))
    np.testing.assert_allclose(sm, e / e.sum(axis=0), rtol=1e-12)


def test_softmax_axis_range():
    sm = get_op_def("softmax")
    spec = VarSpec((2, 3), VarType.FP32)
    assert sm.infer(spec, axis=-2)["Out"] == spec and sm.infer(spec, axis=1)["Out"] == spec
    with pytest.raises(ValueError, match=r"softmax: axis 1 is out of range for input of rank 1 "
                                         r"\(valid: -1\.\.0\); use -1 for the last dim"):
        sm.infer(VarSpec((5,), VarType.FP32), axis=1)
    with pytest.raises(ValueError, match=r"axis -3 is out of range for input of rank 2 "
                                         r"\(valid: -2\.\.1\)"):
        sm.infer(spec, axis=-3)


def test_sigmoid_of_very_negative_inputs_is_zero_without_an_overflow_warning():
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = get_op_def("sigmoid").forward(np.array([-1000.0, 0.0, 1000.0]))["Out"]
    np.testing.assert_array_equal(got, [0.0, 0.5, 1.0])


@pytest.mark.skipif(np.finfo(np.longdouble).eps >= np.finfo(np.float64).eps,
                    reason="long double is float64 here")
def test_float64_erf_keeps_a_long_double_dtype():
    x = np.array([-0.5, 0.1, 2.0], np.longdouble)
    got = erf_numpy(x)
    assert got.dtype == np.longdouble
    np.testing.assert_allclose(got.astype(np.float64), [math.erf(v) for v in (-0.5, 0.1, 2.0)],
                               rtol=4e-15)
