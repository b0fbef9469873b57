"""float32 erf and GELU run over cache-sized blocks (``_ERF_BLOCK``): arrays spanning several
blocks, a partial last block and non-contiguous inputs give the float64 formulas' values
within float32 rounding, in the input's shape and dtype."""
import math

import numpy as np
import pytest

from fluidlite.ops import activation as A

N = 2 * A._ERF_BLOCK + 123          # two full blocks and a partial one


def _bits(a):
    return np.ascontiguousarray(a).view(np.uint32)


def _erf64(x):
    return np.vectorize(math.erf)(x.astype(np.float64))


def test_erf_over_blocks_matches_math_erf():
    x = np.random.default_rng(0).uniform(-5, 5, N).astype(np.float32)
    x[[0, A._ERF_BLOCK, N - 1]] = [np.nan, np.inf, -np.inf]
    got = A.erf_fast(x)
    assert got.dtype == np.float32 and got.shape == x.shape
    want = _erf64(x)
    assert np.isnan(got[0]) and got[A._ERF_BLOCK] == 1 and got[N - 1] == -1
    np.testing.assert_allclose(got[1:-1], want[1:-1], atol=2e-7, rtol=0)


@pytest.mark.parametrize("contiguous", [True, False])
def test_gelu_forward_and_gradient_over_blocks(contiguous):
    rng = np.random.default_rng(1)
    base = rng.standard_normal((N, 2)).astype(np.float32) * 3
    x = np.ascontiguousarray(base[:, 0]) if contiguous else base[:, 0]   # strided view
    dout = rng.standard_normal(N).astype(np.float32)
    g = A.Gelu()
    out = g.forward(x)["Out"]
    dx = g.backward(x, dout)["X"]
    assert out.dtype == dx.dtype == np.float32 and out.shape == dx.shape == (N,)
    x64 = x.astype(np.float64)
    cdf = 0.5 * (1 + _erf64(x64 / math.sqrt(2)))
    np.testing.assert_allclose(out, x64 * cdf, atol=3e-6, rtol=1e-6)
    pdf = np.exp(-0.5 * x64 * x64) / math.sqrt(2 * math.pi)
    np.testing.assert_allclose(dx, dout * (cdf + x64 * pdf), atol=3e-6, rtol=1e-6)


def test_gelu_float32_within_3e_7_of_float64_and_its_limits():
    # GELU(x) = max(x, 0) + d(x), d = -|x| 0.5 erfc(|x| / sqrt 2) a line on each bucket of
    # float32 bits: on a dense grid within 3e-7 of the float64 formula (forward and
    # gradient); +inf gives inf and a gradient of 1, -inf 0 and 0 (the limits), nan stays nan
    x64 = np.linspace(-12, 12, 480001)
    x = x64.astype(np.float32)
    x64 = x.astype(np.float64)
    dout = np.cos(x64).astype(np.float32)
    g = A.Gelu()
    cdf = 0.5 * (1 + _erf64(x64 / math.sqrt(2)))
    np.testing.assert_allclose(g.forward(x)["Out"], x64 * cdf, atol=3e-7, rtol=0)
    pdf = np.exp(-0.5 * x64 * x64) / math.sqrt(2 * math.pi)
    np.testing.assert_allclose(g.backward(x, dout)["X"], dout * (cdf + x64 * pdf),
                               atol=3e-7, rtol=0)
    special = np.float32([np.inf, -np.inf, np.nan, 0.0, -0.0])
    with np.errstate(invalid="ignore"):
        out = g.forward(special)["Out"]
        dx = g.backward(special, np.ones(5, np.float32))["X"]
        saved_out, slope = g.forward_saving(special)
    np.testing.assert_array_equal(out[[0, 1, 3, 4]], [np.inf, 0, 0, 0])
    np.testing.assert_array_equal(dx[[0, 1, 3, 4]], [1, 0, 0.5, 0.5])   # fluid's 0.5 at +-0
    assert np.isnan(out[2]) and np.isnan(dx[2])
    assert np.array_equal(saved_out["Out"], out, equal_nan=True)
    assert np.array_equal(slope, dx, equal_nan=True)


@pytest.mark.parametrize("lo, hi, rtol", [(-2, 0, 5e-6), (-3, -2, 5e-5), (-4, -3, 3e-4),
                                          (-6, -4, 1e-3), (-12, -6, 5e-3)])
def test_gelu_float32_negative_tail_keeps_a_relative_accuracy(lo, hi, rtol):
    # GELU(x) for x << 0 is tiny: fluid's float32 x (1 + erf) form loses it (4e-3 relative at
    # x = -4, 0.6 at -5); the erfc form keeps it to the fit's documented bounds
    x = np.linspace(lo, hi, 20001).astype(np.float32)[:-1]
    x64 = x.astype(np.float64)
    want = x64 * 0.5 * np.vectorize(math.erfc)(-x64 / math.sqrt(2))    # no cancellation
    got = A.Gelu().forward(x)["Out"].astype(np.float64)
    assert np.abs(got / want - 1).max() < rtol


def test_gelu_clip_on_numpy_1_path_gives_np_clip_values_and_the_same_bits(monkeypatch):
    # NumPy 1's np.clip is slow, so _clip_to bounds there with maximum / minimum against
    # constant arrays: the values of np.clip (nan kept, -0.0 kept), hence GELU's bits
    x = (np.random.default_rng(6).standard_normal(3000) * 40).astype(np.float32)
    x[:5] = [np.nan, np.inf, -np.inf, -0.0, 1e30]
    out = np.empty_like(x)
    monkeypatch.setattr(A, "_CLIP_FAST", False)
    got = A._clip_to(x, -64.0, 64.0, out)
    assert got is out
    want = np.clip(x, np.float32(-64), np.float32(64))
    assert np.array_equal(_bits(got[1:]), _bits(want[1:])) and np.isnan(got[0])
    slow = A.Gelu().forward_saving(x)
    monkeypatch.setattr(A, "_CLIP_FAST", True)
    fast = A.Gelu().forward_saving(x)
    assert np.array_equal(_bits(slow[0]["Out"]), _bits(fast[0]["Out"]))
    assert np.array_equal(_bits(slow[1]), _bits(fast[1]))


def test_gelu_tables_cover_tiny_and_wide_inputs_and_bucket_edges():
    """Below 2^-30 GELU is x / 2 and GELU' 0.5 (to float32), from 16 on x and 1 (or 0 and 0
    for x <= -16); the buckets on both sides of those edges and of a power of two agree with
    float64 (forward and slope, both signs)."""
    f = np.float32
    edges = [A._GELU_TINY, A._GELU_WIDE, 1.0, 0.5, 3.0]
    near = [np.nextafter(f(e), f(0)) for e in edges] + [f(e) for e in edges]
    x = np.array(near + [-v for v in near] + [1e-38, 1e-20, 20.0, 1e30, -20.0, -1e30], f)
    g = A.Gelu()
    out, slope = g.forward_saving(x)
    x64 = x.astype(np.float64)
    cdf = 0.5 * np.vectorize(math.erfc)(-x64 / math.sqrt(2))
    pdf = np.exp(-0.5 * x64 * x64) / math.sqrt(2 * math.pi)
    np.testing.assert_allclose(out["Out"], x64 * cdf, rtol=0, atol=3e-7)
    tiny = np.abs(x64) < 1e-6                         # GELU(x) = x / 2 to float32 there
    np.testing.assert_allclose(out["Out"][tiny], x64[tiny] * cdf[tiny], rtol=1e-7, atol=0)
    np.testing.assert_allclose(slope, cdf + x64 * pdf, rtol=0, atol=2e-7)
    want = np.array([x[-6] / f(2), x[-5] / f(2), 20, x[-3], 0, 0], f)
    np.testing.assert_array_equal(out["Out"][-6:], want)
    np.testing.assert_array_equal(slope[-4:], [1, 1, 0, 0])


@pytest.mark.parametrize("take_fast", [False, True])
def test_gelu_gathers_the_same_lines_either_way(take_fast, monkeypatch):
    """np.take's clip mode (NumPy 1.26 on) and integer-array indexing (1.23-1.25, where take
    is slow) gather the same table rows: the same bits."""
    x = (np.random.default_rng(7).standard_normal(5000) * 4).astype(np.float32)
    d = np.random.default_rng(8).standard_normal(5000).astype(np.float32)
    g = A.Gelu()
    want = g.forward(x)["Out"], g.backward(x, d)["X"], g.forward_saving(x)[1]
    monkeypatch.setattr(A, "_TAKE_FAST", take_fast)
    got = g.forward(x)["Out"], g.backward(x, d)["X"], g.forward_saving(x)[1]
    for a, b in zip(got, want):
        assert np.array_equal(_bits(a), _bits(b))


def test_gelu_table_is_made_once_and_is_the_same_every_time():
    """The lines come from math.erfc / math.exp in float64: remaking a table gives its bits."""
    for slope in (False, True):
        table = A._gelu_table(slope)
        assert A._gelu_table(slope) is table
        assert table.shape == (1 << (32 - A._GELU_SHIFT), 2) and table.dtype == np.float32
        assert np.array_equal(_bits(A._make_gelu_table(slope)), _bits(table))


def test_gelu_tables_are_made_on_first_use_one_per_kind(monkeypatch):
    # from an empty cache: each kind (the lines of d, of the slope) is made once, on its first
    # use, and kept; the two differ
    made = []
    real = A._make_gelu_table
    monkeypatch.setattr(A, "_gelu_tables", {})
    monkeypatch.setattr(A, "_make_gelu_table", lambda slope: (made.append(slope),
                                                              real(slope))[1])
    first = [A._gelu_table(s) for s in (False, True)]
    again = [A._gelu_table(s) for s in (True, False, True)]
    assert made == [False, True] and again == [first[1], first[0], first[1]]
    assert all(t is not None and t.dtype == np.float32 for t in first)
    assert not np.array_equal(first[0], first[1])
    assert np.array_equal(_bits(first[1]), _bits(real(True)))


@pytest.mark.parametrize("dtype,approximate,layout", [
    ("float32", False, "contiguous"), ("float32", False, "in place"),
    ("float32", False, "columns"), ("float64", False, "contiguous"),
    ("float32", True, "in place"), ("float32", False, "into columns"),
    ("float32", None, "contiguous")])
def test_gelu_to_gives_the_gelu_ops_bits(dtype, approximate, layout):
    # what fc's epilogue applies to each block of its product: a float32 block through the
    # table in _ERF_BLOCK pieces (over a partial last piece), a column block (strided) and
    # other dtypes or the tanh form by the op's formula -- the gelu op's bits either way
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((N // 64, 64)) * 3).astype(dtype)
    x[0, :4] = [np.nan, np.inf, -np.inf, -0.0]
    want = A.Gelu.f(x, bool(approximate))
    if approximate is None:                 # the default: the erf form
        out = A.gelu_to(x, np.empty_like(x))
    elif layout == "into columns":          # a contiguous block into a column block
        wide = np.zeros((x.shape[0], 2 * x.shape[1]), x.dtype)
        out = wide[:, :x.shape[1]]          # (no flat view of it exists)
        A.gelu_to(x, out, approximate)
        assert not wide[:, x.shape[1]:].any()
    elif layout == "columns":
        block = x.copy()[:, 8:40]
        out = np.empty_like(block)
        A.gelu_to(block, out, approximate)
        want = want[:, 8:40]
    elif layout == "in place":
        out = x.copy()
        assert A.gelu_to(out, out, approximate) is out
    else:
        out = np.full_like(x, 5.0)
        assert A.gelu_to(x, out, approximate) is out
    assert out.dtype == want.dtype
    np.testing.assert_array_equal(np.ascontiguousarray(out).view(np.uint8),
                                  np.ascontiguousarray(want).view(np.uint8))
