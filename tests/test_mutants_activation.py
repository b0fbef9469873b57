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
