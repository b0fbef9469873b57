"""Depthwise convolutions of small maps as banded GEMMs (``_conv_kernels._band_*``): forward,
input gradient (the scatter form and, for stride 1, the forward of dY with the filter turned)
and filter gradient against a direct float64 convolution and its adjoint, for tiles that
split output rows (with padded last tiles), channel multipliers, strides, dilations and
uneven paddings; operands with NaN / Inf take the tap kernels, so non-finite values spoil
exactly the pixels fluid's kernel does."""
import numpy as np
import pytest

from fluidlite.ops import _conv_kernels as K
from tests.ops.test_depthwise_flat import _direct, _geom

CASES = [  # N, C, m, H, W, kernel, pads (t, b, l, r), dilation, strides
    (2, 3, 1, 14, 14, (3, 3), (1, 1, 1, 1), 1, (1, 1)),
    (1, 4, 1, 7, 7, (3, 3), (1, 1, 1, 1), 1, (1, 1)),
    (2, 2, 1, 28, 28, (3, 3), (1, 1, 1, 1), 1, (2, 2)),
    (1, 2, 3, 9, 31, (3, 3), (2, 0, 1, 2), 2, (1, 1)),      # 29 columns: a padded last tile
    (3, 2, 2, 10, 12, (5, 3), (0, 0, 0, 0), 1, (1, 1)),
    (2, 3, 1, 13, 9, (3, 5), (1, 2, 2, 1), 1, (3, 2)),
    (1, 2, 1, 9, 10, (2, 2), (3, 0, 0, 0), 1, (1, 1)),      # padding past the kernel's reach
    (2, 2, 1, 5, 40, (1, 7), (0, 0, 3, 3), 2, (1, 1)),
    (1, 2, 1, 70, 66, (3, 3), (1, 1, 1, 1), 1, (2, 2)),     # a big map: strided forward only
    (2, 3, 1, 11, 13, (3, 3), (0, 2, 2, 1), 1, (1, 1)),     # stride 1, uneven: dX as a forward
    (1, 2, 1, 12, 12, (3, 3), (2, 1, 0, 3), 2, (1, 1)),
]


def _direct_grads(x, w, g, dy):
    """float64 dX, dW of ``_direct`` by its adjoint, tap by tap."""
    N, C = x.shape[:2]
    m = w.shape[0] // C
    dxp = np.zeros((N, C, g.Hp, g.Wp))
    xp = np.zeros((N, C, g.Hp, g.Wp))
    xp[:, :, g.pt:g.pt + g.H, g.pl:g.pl + g.W] = x
    dw = np.zeros(w.shape)
    for f in range(C * m):
        c = f // m
        for i in range(g.kh):
            for j in range(g.kw):
                rows = slice(i * g.dh, i * g.dh + g.sh * (g.oh - 1) + 1, g.sh)
                cols = slice(j * g.dw, j * g.dw + g.sw * (g.ow - 1) + 1, g.sw)
                dxp[:, c, rows, cols] += w[f, 0, i, j] * dy[:, f]
                dw[f, 0, i, j] = np.sum(xp[:, c, rows, cols] * dy[:, f])
    return dxp[:, :, g.pt:g.pt + g.H, g.pl:g.pl + g.W], dw


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("N,C,m,H,W,k,pads,dil,strides", CASES)
def test_band_kernels_equal_a_direct_convolution(N, C, m, H, W, k, pads, dil, strides, dtype):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((N, C, H, W)).astype(dtype)
    w = rng.standard_normal((C * m, 1) + k).astype(dtype)
    g = _geom(x, w, pads, dil, strides)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    y = K._band_fwd(x, w, g)            # (a big strided map's forward takes the phase planes)
    assert K._use_band(g, x.dtype) or g.oh * g.ow > K._BAND_MAX
    for out in (y, K.depthwise_fwd(x, w, g)):
        assert out.dtype == dtype and out.shape == (N, C * m, g.oh, g.ow)
        np.testing.assert_allclose(out, _direct(x64, w64, g), rtol=tol, atol=tol)
    dy = rng.standard_normal(y.shape).astype(dtype)
    ref_dx, ref_dw = _direct_grads(x64, w64, g, dy.astype(np.float64))
    for dx in (K._band_dx(dy, w, g, C), K.depthwise_dx(dy, w, g, C)):
        assert dx.dtype == dtype and dx.shape == x.shape
        np.testing.assert_allclose(dx, ref_dx, rtol=tol, atol=tol)
    for dw in (K._band_dw(x, dy, g, w.shape), K.depthwise_dw(x, dy, g, w.shape)):
        assert dw.dtype == dtype and dw.shape == w.shape
        np.testing.assert_allclose(dw, ref_dw, rtol=tol, atol=tol * np.abs(ref_dw).max())


@pytest.mark.parametrize("budget", [1, 1 << 30])       # a block per channel / one block
@pytest.mark.parametrize("tile", [1, 2, 5, 16])
def test_any_tile_width_and_channel_block_gives_the_same_numbers(tile, budget, monkeypatch):
    monkeypatch.setattr(K, "_BAND_TILE", tile)
    monkeypatch.setattr(K, "_BAND_BUDGET", budget)
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((2, 3, 11, 13)), rng.standard_normal((6, 1, 3, 3))
    g = _geom(x, w, (1, 1, 1, 1), 1, (2, 1))
    b = K._Band(g)
    assert b.nt * b.tw >= g.ow > (b.nt - 1) * b.tw
    dy = rng.standard_normal((2, 6, g.oh, g.ow))
    ref_dx, ref_dw = _direct_grads(x, w, g, dy)
    np.testing.assert_allclose(K._band_fwd(x, w, g), _direct(x, w, g), atol=1e-12)
    np.testing.assert_allclose(K._band_dx(dy, w, g, 3), ref_dx, atol=1e-12)
    np.testing.assert_allclose(K._band_dw(x, dy, g, w.shape), ref_dw, atol=1e-11)


def _without_band(fn, monkeypatch):
    with monkeypatch.context() as mp:
        mp.setattr(K, "_BAND_MAX", -1)
        return fn()


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_operands_spoil_what_fluids_kernel_spoils(bad, monkeypatch):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 2, 14, 29)).astype(np.float32)
    w = rng.standard_normal((2, 1, 3, 3)).astype(np.float32)
    g = _geom(x, w, (1, 1, 1, 1), 1)
    dy = rng.standard_normal((1, 2, g.oh, g.ow)).astype(np.float32)
    xb, wb, dyb = x.copy(), w.copy(), dy.copy()
    xb[0, 0, 5, 20], wb[0, 0, 2, 2], dyb[0, 1, 3, 3] = bad, bad, bad
    assert K._use_band(g, xb.dtype) and not K._finite(xb) and not K._finite(dy, wb)
    for call in (lambda: K.depthwise_fwd(xb, w, g), lambda: K.depthwise_dx(dy, wb, g, 2),
                 lambda: K.depthwise_dx(dyb, w, g, 2), lambda: K.depthwise_dw(xb, dy, g, w.shape)):
        np.testing.assert_array_equal(np.isfinite(call()),
                                      np.isfinite(_without_band(call, monkeypatch)))
    # a NaN input pixel reaches its 3x3 neighbourhood only, not its whole tile of 29 pixels
    y = K.depthwise_fwd(xb, w, g)
    assert (~np.isfinite(y[0, 0])).sum() == 9 and np.isfinite(y[0, 1]).all()


def test_adjoint_of_the_forward():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 4, 12, 12))
    w = rng.standard_normal((8, 1, 3, 3))
    g = _geom(x, w, (1, 0, 2, 1), 1, (2, 1))
    dy = rng.standard_normal((2, 8, g.oh, g.ow))
    lhs = np.sum(K._band_dx(dy, w, g, 4) * x)
    rhs = np.sum(dy * K._band_fwd(x, w, g))
    assert abs(lhs - rhs) <= 1e-12 * np.abs(dy).sum() * np.abs(x).max() * 9


@pytest.mark.parametrize("n_threads", [1, 2])
def test_band_blocks_cover_the_channels_once(monkeypatch, n_threads):
    """On the pool's threads the blocks keep within ``_BAND_BUDGET_PARTS``, on one thread
    within ``_BAND_BUDGET`` (the other budget is set to what would break the sizes)."""
    from fluidlite.core import threads
    used, other = (("_BAND_BUDGET_PARTS", "_BAND_BUDGET") if n_threads > 1 else
                   ("_BAND_BUDGET", "_BAND_BUDGET_PARTS"))
    monkeypatch.setattr(K, other, 10 ** 9)
    monkeypatch.setattr(K, "_BAND_SPLIT_MIN", 0)               # (its own test below)
    for C, per, budget in ((7, 10, 25), (7, 10, 1), (7, 10, 10 ** 6), (1, 5, 3), (64, 3, 100)):
        monkeypatch.setattr(K, used, budget)
        with threads.using(n_threads):
            blocks = K._band_chunks(C, per)
        assert [c for lo, hi in blocks for c in range(lo, hi)] == list(range(C))
        sizes = [hi - lo for lo, hi in blocks]
        assert max(sizes) <= max(1, budget // per) and max(sizes) - min(sizes) <= 1
        # at least two blocks, an even count (two threads share them) unless one a channel
        assert len(blocks) >= min(C, K._PARTS) and (len(blocks) % 2 == 0 or len(blocks) == C)
        assert all(isinstance(v, int) for b in blocks for v in b)


@pytest.mark.parametrize("n_threads", [1, 2])
def test_a_layer_of_few_rows_is_one_block(n_threads):
    """Under ``_BAND_SPLIT_MIN`` bytes of rows a layer is one block (a call on the pool costs
    more than halving such a layer saves); from it on, at least ``_PARTS``."""
    from fluidlite.core import threads
    C = 384
    with threads.using(n_threads):
        assert K._band_chunks(C, (K._BAND_SPLIT_MIN - 1) // C) == [(0, C)]
        blocks = K._band_chunks(C, -(-K._BAND_SPLIT_MIN // C))
    assert len(blocks) >= K._PARTS and blocks[0][0] == 0 and blocks[-1][1] == C


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_band_matrices_keep_the_operands_dtype(dtype):
    """float32 stays float32 in every matrix the GEMMs read (no silent float64 products)."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3, 9, 20)).astype(dtype)
    w = rng.standard_normal((6, 1, 3, 3)).astype(dtype)
    g = _geom(x, w, (1, 1, 1, 1), 1)
    b = K._Band(g)
    dy = rng.standard_normal((2, 6, g.oh, g.ow)).astype(dtype)
    assert b.canvas(x, g).dtype == dtype and b.canvas(x, g).shape == (3, 2, g.Hp, b.Wq)
    rows, band, drows = b.rows(x, g), b.filt(w, g, 3), b.dy_rows(dy, g, 3)
    assert rows.dtype == band.dtype == drows.dtype == dtype
    assert rows.shape == (3, 2 * g.oh * b.nt, b.K) and band.shape == (3, b.K, 2 * b.tw)
    assert drows.shape == (3, 2 * g.oh * b.nt, 2 * b.tw)
    # every tile's span lies inside the canvas (the rows are a view of it, never past its end)
    assert (b.nt - 1) * b.tw * g.sw + b.span <= b.Wq


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_a_non_finite_block_alone_takes_the_tap_kernels(bad, monkeypatch):
    """The band kernels check each block of channels' operands: with a block per channel,
    the channel holding a NaN / Inf gets the tap kernels' values (what fluid spoils) and
    every other channel the band's, bit for bit those of a run without the bad value."""
    monkeypatch.setattr(K, "_BAND_BUDGET", 1)                  # a block per channel,
    monkeypatch.setattr(K, "_BAND_BUDGET_PARTS", 1)            # on any thread count
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 3, 12, 14)).astype(np.float32)
    w = rng.standard_normal((6, 1, 3, 3)).astype(np.float32)
    g = _geom(x, w, (1, 1, 1, 1), 1)
    dy = rng.standard_normal((2, 6, g.oh, g.ow)).astype(np.float32)
    xb, dyb = x.copy(), dy.copy()
    xb[1, 1, 4, 7], dyb[0, 3, 2, 5] = bad, bad                # channel 1 (filters 2, 3)
    one = slice(1, 2)                           # channel 1 alone, through the tap kernels
    runs = [
        (K.depthwise_fwd(xb, w, g), K.depthwise_fwd(x, w, g),
         K._taps_fwd(xb[:, one], w[2:4], g), 1),
        (K.depthwise_dx(dyb, w, g, 3), K.depthwise_dx(dy, w, g, 3),
         K._taps_dx(dyb[:, 2:4], w[2:4], g, 1), 0),
        (K.depthwise_dw(xb, dy, g, w.shape), K.depthwise_dw(x, dy, g, w.shape),
         K._taps_dw(xb[:, one], dy[:, 2:4], g, (2, 1, 3, 3)), None),
        (K.depthwise_dw(x, dyb, g, w.shape), K.depthwise_dw(x, dy, g, w.shape),
         K._taps_dw(x[:, one], dyb[:, 2:4], g, (2, 1, 3, 3)), None),
    ]
    for got, clean, taps, axis in runs:
        if axis is None:                        # dW [6, 1, 3, 3]: filters 2, 3 are channel 1
            np.testing.assert_array_equal(got[2:4], taps)
            np.testing.assert_array_equal(got[np.r_[0:2, 4:6]], clean[np.r_[0:2, 4:6]])
            assert not np.isfinite(got[2:4]).all()
            continue
        per = got.shape[1] // 3                 # maps per channel: m for Y, 1 for dX
        np.testing.assert_array_equal(got[:, per:2 * per], taps)
        good_c = np.r_[0:per, 2 * per:3 * per]
        np.testing.assert_array_equal(got[:, good_c], clean[:, good_c])
        assert not np.isfinite(got[:, per:2 * per]).all()


def test_a_non_finite_filter_never_reaches_a_pixel_through_the_padded_tile_columns():
    """Strided input gradient of a 38-wide map: the last tile's spare output column (zeros in
    dY) sits over the map's last input column at tap 0. A NaN at tap 0 must not reach that
    pixel through 0 * NaN, as fluid's kernel never reads the missing output there."""
    rng = np.random.default_rng(7)
    w = rng.standard_normal((2, 1, 3, 3)).astype(np.float32)
    w[0, 0, 1, 0] = np.nan
    x = np.zeros((1, 2, 9, 38), np.float32)
    g = _geom(x, w, (1, 1, 1, 1), 1, (2, 2))
    b = K._Band(g)
    assert b.nt * b.tw > g.ow and K._use_band(g, x.dtype) and K._turned(g, w, 2) is None
    dy = rng.standard_normal((1, 2, g.oh, g.ow)).astype(np.float32)
    want = np.isfinite(K._taps_dx(dy, w, g, 2))
    assert want[0, 0, :, 37].all()                  # fluid: no NaN in the last column
    np.testing.assert_array_equal(np.isfinite(K.depthwise_dx(dy, w, g, 2)), want)


def test_an_infinite_input_never_reaches_a_filter_gradient_through_the_padded_tile_columns():
    """A 17-wide map: the last tile's spare output column (zeros in dY) reads the map's last
    input column at tap 0. An Inf there must leave dW's tap 0 finite (fluid never reads it
    at tap 0), not NaN through 0 * Inf."""
    rng = np.random.default_rng(8)
    x = rng.standard_normal((1, 2, 9, 17)).astype(np.float32)
    x[0, 0, 3, 16] = np.inf
    w = rng.standard_normal((2, 1, 3, 3)).astype(np.float32)
    g = _geom(x, w, (1, 1, 1, 1), 1)
    b = K._Band(g)
    assert b.nt * b.tw > g.ow and K._use_band(g, x.dtype)
    dy = np.abs(rng.standard_normal((1, 2, g.oh, g.ow))).astype(np.float32) + 0.1
    want = K._taps_dw(x, dy, g, w.shape)
    assert np.isfinite(want[0, 0, :, 0]).all() and np.isinf(want[0, 0, :, 2]).any()
    got = K.depthwise_dw(x, dy, g, w.shape)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    ok = np.isfinite(want)
    np.testing.assert_allclose(got[ok], want[ok], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("H,banded", [(14, True), (16, True), (17, False), (28, False)])
def test_the_filter_gradient_runs_banded_on_maps_of_at_most_256_pixels(H, banded, monkeypatch):
    calls = []
    real = K._band_dw
    monkeypatch.setattr(K, "_band_dw", lambda *a: calls.append(1) or real(*a))
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3, H, H)).astype(np.float32)
    w = rng.standard_normal((3, 1, 3, 3)).astype(np.float32)
    g = _geom(x, w, (1, 1, 1, 1), 1)
    dy = rng.standard_normal((2, 3, g.oh, g.ow)).astype(np.float32)
    dw = K.depthwise_dw(x, dy, g, w.shape)
    assert bool(calls) is banded
    _, ref = _direct_grads(x.astype(np.float64), w.astype(np.float64), g, dy.astype(np.float64))
    np.testing.assert_allclose(dw, ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())


@pytest.mark.parametrize("N,C,H,dtype,kernel", [
    (1, 3, 14, np.float32, "last"),     # one 14x14 map: 196 output pixels in the batch
    (1, 20, 14, np.float32, "last"),    # ... whatever its channels (the batch's pixels count)
    (2, 3, 14, np.float32, "band"),     # 392
    (1, 3, 16, np.float32, "flat"),     # 256 pixels: the taps, and 16x16 is no longer small
    (5, 3, 8, np.float32, "last"),      # 8 wide: the taps at any batch
    (5, 3, 9, np.float32, "band"),      # 9 wide, 405 pixels
    (2, 3, 33, np.float32, "flat"),     # past the banded kernel's 1024 pixels
    (2, 3, 14, np.float16, "last"),     # no band in float16
])
def test_the_forward_kernel_by_map_width_and_batch(N, C, H, dtype, kernel, monkeypatch):
    """Banded GEMMs from 9 output columns and more than ``_LAST_PIXELS`` output pixels in
    the batch; the rows-last taps on narrower maps and smaller batches of small maps; the
    phase planes on maps of 256 pixels and more."""
    calls = []
    for name in ("_band_fwd", "_depthwise_fwd_last", "_depthwise_fwd_flat"):
        real = getattr(K, name)
        monkeypatch.setattr(K, name, lambda *a, _n=name, _f=real, **k: calls.append(_n)
                            or _f(*a, **k))
    rng = np.random.default_rng(5)
    x = rng.standard_normal((N, C, H, H)).astype(dtype)
    w = rng.standard_normal((C, 1, 3, 3)).astype(dtype)
    g = _geom(x, w, (1, 1, 1, 1), 1)
    y = K.depthwise_fwd(x, w, g)
    names = {"band": "_band_fwd", "last": "_depthwise_fwd_last", "flat": "_depthwise_fwd_flat"}
    assert calls == [names[kernel]]
    tol = 2e-2 if dtype == np.float16 else 1e-5
    np.testing.assert_allclose(y, _direct(x.astype(np.float64), w.astype(np.float64), g),
                               rtol=tol, atol=tol)


@pytest.mark.parametrize("strides", [(1, 1), (2, 2)])
def test_the_rows_last_forward_has_the_bits_of_float32_taps(strides):
    """Each output pixel is the float32 sum of its taps' float32 products in tap order,
    whatever the parts and blocks (two filters per channel, a strided map)."""
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 5, 11, 11)).astype(np.float32)
    w = rng.standard_normal((10, 1, 3, 3)).astype(np.float32)
    g = _geom(x, w, (1, 1, 1, 1), 1, strides)
    xp = np.zeros((2, 5, g.Hp, g.Wp), np.float32)
    xp[:, :, 1:12, 1:12] = x
    want = np.empty((2, 10, g.oh, g.ow), np.float32)
    for f in range(10):
        taps = [xp[:, f // 2, i:i + g.sh * (g.oh - 1) + 1:g.sh, j:j + g.sw * (g.ow - 1) + 1:g.sw]
                * w[f, 0, i, j] for i in range(3) for j in range(3)]
        acc = taps[0]
        for t in taps[1:]:
            acc = acc + t
        want[:, f] = acc
    np.testing.assert_array_equal(K._depthwise_fwd_last(x, w, g), want)
