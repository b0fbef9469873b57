"""Depthwise convolutions run on flat stride-phase planes (``_depthwise_fwd_flat`` /
``_depthwise_dx_flat``: each tap one contiguous slice per row): the same numbers as the
strided row kernels -- bit for bit forward -- and as a direct float64 convolution, for
strides, channel multipliers, dilations, uneven and zero paddings; non-finite weights spoil
only what they touch."""
import numpy as np
import pytest

from fluidlite.ops import _conv_kernels as K
from fluidlite.ops import conv as CV

CASES = [  # N, C, m, H, W, kernel, pads (t, b, l, r), dilation, strides
    (2, 3, 1, 20, 18, (3, 3), (1, 1, 1, 1), 1, (1, 1)),
    (1, 2, 3, 17, 23, (3, 3), (2, 0, 1, 2), 2, (1, 1)),
    (3, 4, 2, 21, 20, (5, 3), (0, 0, 0, 0), 1, (1, 1)),
    (2, 5, 1, 31, 9, (3, 5), (1, 2, 2, 1), 1, (1, 1)),
    (2, 2, 1, 20, 19, (3, 3), (3, 0, 0, 3), 1, (1, 1)),   # padding past the kernel's reach
    (2, 3, 1, 40, 38, (3, 3), (1, 1, 1, 1), 1, (2, 2)),
    (1, 2, 2, 41, 37, (3, 3), (0, 1, 1, 0), 1, (2, 2)),
    (2, 2, 1, 55, 50, (5, 5), (2, 2, 2, 2), 2, (3, 2)),
    (1, 3, 1, 33, 20, (3, 3), (1, 1, 0, 2), 1, (2, 1)),
]


def _geom(x, w, pads, dil, strides=(1, 1)):
    return CV._conv_geom(x, w, list(strides), list(pads), [dil, dil], "EXPLICIT", x.shape[1])



def _padded_rows(x, g):
    """``x`` [N, C, H, W] zero-padded as rows [N*C, Hp, Wp]."""
    N, C = x.shape[:2]
    buf = np.zeros((N * C, g.Hp, g.Wp), x.dtype)
    buf[:, g.pt:g.pt + g.H, g.pl:g.pl + g.W] = x.reshape(N * C, g.H, g.W)
    return buf


def _rows_dx(dy, w, g, C):
    """The input gradient scattered tap by tap through strided views of each padded row (the
    kernel the phase planes replaced): the flat kernel must give its values."""
    N, m = dy.shape[0], dy.shape[1] // C
    dyr = np.ascontiguousarray(dy).reshape(N * C, m, g.oh, g.ow)
    wr = K._rows_weights(w, C, N)
    dxp = np.zeros((N * C, g.Hp, g.Wp), dy.dtype)
    for i in range(g.kh):
        for j in range(g.kw):
            t = dyr[:, 0] * wr[0, i, j]
            for k in range(1, m):
                t += dyr[:, k] * wr[k, i, j]
            view = K._tap(dxp, g, i, j)
            view += t
    return dxp.reshape(N, C, g.Hp, g.Wp)[:, :, g.pt:g.pt + g.H, g.pl:g.pl + g.W]


def _rows_fwd(x, w, g):
    """The forward by strided taps over each padded row (blocks of rows), the reference the
    flat phase-plane kernel must equal bit for bit: per output element the same products
    added in the same order."""
    N, C = x.shape[:2]
    m = w.shape[0] // C
    xp = _padded_rows(x, g)
    wr = K._rows_weights(w, C, N)
    y = np.empty((N * C, m, g.oh, g.ow), x.dtype)
    rb = max(1, K._BLOCK // (g.oh * g.ow))
    tmp = np.empty((min(rb, N * C), g.oh, g.ow), x.dtype)
    for r0 in range(0, N * C, rb):
        r1 = min(N * C, r0 + rb)
        t, src = tmp[:r1 - r0], xp[r0:r1]
        for k in range(m):
            out = y[r0:r1, k]
            for i in range(g.kh):
                for j in range(g.kw):
                    wij = wr[k, i, j, r0:r1]
                    if i == 0 and j == 0:
                        np.multiply(K._tap(src, g, i, j), wij, out=out)
                    else:
                        np.multiply(K._tap(src, g, i, j), wij, out=t)
                        out += t
    return y.reshape(N, C * m, g.oh, g.ow)

def _direct(x, w, g):
    """float64 Y[n, c*m+k] = sum_{i,j} W[c*m+k, 0, i, j] Xpad[n, c, y + i*dh, x + j*dw]."""
    N, C = x.shape[:2]
    m = w.shape[0] // C
    xp = np.zeros((N, C, g.Hp, g.Wp))
    xp[:, :, g.pt:g.pt + g.H, g.pl:g.pl + g.W] = x
    y = np.zeros((N, C * m, g.oh, g.ow))
    for f in range(C * m):
        c = f // m
        for i in range(g.kh):
            for j in range(g.kw):
                y[:, f] += w[f, 0, i, j] * xp[:, c, i * g.dh:i * g.dh + g.sh * (g.oh - 1) + 1:g.sh,
                                              j * g.dw:j * g.dw + g.sw * (g.ow - 1) + 1:g.sw]
    return y


@pytest.mark.parametrize("N,C,m,H,W,k,pads,dil,strides", CASES)
def test_flat_planes_equal_the_strided_rows_and_a_direct_convolution(N, C, m, H, W, k, pads,
                                                                     dil, strides, monkeypatch):
    monkeypatch.setattr(K, "_BAND_MAX", -1)     # the tap kernels (tests/ops/test_conv_band.py)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((N, C, H, W)).astype(np.float32)
    w = rng.standard_normal((C * m, 1) + k).astype(np.float32)
    g = _geom(x, w, pads, dil, strides)
    assert g.oh * g.ow >= K._ROWS_LAST_MAX          # the rows-first layout applies
    y = K._depthwise_fwd_flat(x, w, g)
    np.testing.assert_array_equal(y, _rows_fwd(x, w, g))
    np.testing.assert_array_equal(K.depthwise_fwd(x, w, g), y)      # whichever one runs
    np.testing.assert_allclose(y, _direct(x.astype(np.float64), w.astype(np.float64), g),
                               rtol=1e-5, atol=1e-5)
    dy = rng.standard_normal(y.shape).astype(np.float32)
    dx = K._depthwise_dx_flat(dy, w, g, C)
    assert dx.shape == x.shape and dx.dtype == np.float32
    np.testing.assert_allclose(K.depthwise_dx(dy, w, g, C), dx, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(dx, _rows_dx(dy, w, g, C), rtol=1e-6, atol=1e-6)
    # the adjoint: <dX, p> = <dY, conv(p)> in float64
    probe = rng.standard_normal(x.shape)
    lhs = np.sum(dx.astype(np.float64) * probe)
    rhs = np.sum(dy.astype(np.float64) * _direct(probe, w.astype(np.float64), g))
    assert abs(lhs - rhs) <= 1e-5 * (abs(rhs) + np.abs(dy).sum())


def test_a_non_finite_weight_spoils_only_the_pixels_its_tap_reaches():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 2, 18, 18)).astype(np.float32)
    w = rng.standard_normal((2, 1, 3, 3)).astype(np.float32)
    w[0, 0, 2, 2] = np.nan                          # bottom-right tap of channel 0
    g = _geom(x, w, (1, 1, 1, 1), 1)
    dy = rng.standard_normal((1, 2, g.oh, g.ow)).astype(np.float32)
    dx = K._depthwise_dx_flat(dy, w, g, 2)
    # NaN * dY reaches the inputs that tap reads (rows and columns 1..17 of channel 0), and
    # nothing else: not the first row or column, which only the dropped columns would wrap to
    np.testing.assert_array_equal(np.isnan(dx), np.isnan(_rows_dx(dy, w, g, 2)))
    # the dispatcher too: a non-finite filter is never run turned as a forward (its taps
    # would also multiply the turned forward's padding)
    assert K._turned(g, w, 2) is None and K._turned(g, np.nan_to_num(w), 2) is not None
    np.testing.assert_array_equal(np.isnan(K.depthwise_dx(dy, w, g, 2)), np.isnan(dx))
    assert np.isnan(dx[0, 0, 1:, 1:]).all() and not np.isnan(dx[0, 0, 0]).any() and \
        not np.isnan(dx[0, 0, :, 0]).any() and not np.isnan(dx[0, 1]).any()


def _operands(seed, N, C, m, H, W, k, pads, dil, strides):
    """float32 X, W, the geometry and a dY of one case."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((N, C, H, W)).astype(np.float32)
    w = rng.standard_normal((C * m, 1) + k).astype(np.float32)
    g = _geom(x, w, pads, dil, strides)
    return x, w, g, rng.standard_normal((N, C * m, g.oh, g.ow)).astype(np.float32)


@pytest.mark.parametrize("N,C,m,H,W,k,pads,dil,strides", [CASES[0], CASES[5], CASES[7]])
def test_copies_in_parallel_parts_give_the_one_thread_bits(N, C, m, H, W, k, pads, dil,
                                                           strides, monkeypatch):
    """The flat kernels and the padded row sums, each part making the phase planes or padded
    rows of its own blocks, and the padded rows copied in two parts (every copy cut:
    ``_COPY_MIN`` 0), give on two threads exactly the one-thread results."""
    from fluidlite.core import threads
    monkeypatch.setattr(K, "_BAND_MAX", -1)
    x, w, g, dy = _operands(1, N, C, m, H, W, k, pads, dil, strides)
    runs = []
    for n, copy_min in ((1, 1 << 40), (2, 0)):
        monkeypatch.setattr(K, "_COPY_MIN", copy_min)
        with threads.using(n):
            runs.append((K._depthwise_fwd_flat(x, w, g), _rows_fwd(x, w, g),
                         K._depthwise_dx_flat(dy, w, g, C), K._depthwise_sums(x, dy, g, m)))
    for a, b in zip(*runs):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("N,C,m,H,W,k,pads,dil,strides", [CASES[0], CASES[2], CASES[3], CASES[5]])
def test_blocks_of_rows_reusing_their_parts_buffers_give_the_bits_of_one_block(
        N, C, m, H, W, k, pads, dil, strides, monkeypatch):
    """Each part makes the phase planes (or padded rows) of one block of rows at a time in a
    buffer it reuses: with blocks of 2 rows (and a shorter last one) the results are those of
    one block per part -- no cell of an earlier block's padding or planes leaks into the next."""
    monkeypatch.setattr(K, "_BAND_MAX", -1)
    x, w, g, dy = _operands(5, N, C, m, H, W, k, pads, dil, strides)

    def run():
        return (K._depthwise_fwd_flat(x, w, g), K._depthwise_dx_flat(dy, w, g, C),
                K._depthwise_sums(x, dy, g, m))
    whole = run()
    wide = -(-g.Wp // g.sw)
    monkeypatch.setattr(K, "_BLOCK", 2 * g.oh * max(wide, g.ow))     # 2 rows a block
    assert N * C >= 5                                               # several blocks, one short
    for a, b in zip(whole, run()):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("strides,turned", [((1, 1), True), ((2, 2), False)])
def test_the_input_gradient_of_bigger_maps_runs_on_phase_planes(strides, turned, monkeypatch):
    """Stride 1 with a finite filter: the forward on dY with the filter turned; any other
    stride: the flat scatter (from 256 output pixels up; the rows-last kernel below)."""
    monkeypatch.setattr(K, "_BAND_MAX", -1)
    calls = []
    for name in ("_depthwise_fwd_flat", "_depthwise_dx_flat", "_depthwise_dx_last"):
        real = getattr(K, name)
        monkeypatch.setattr(K, name, lambda *a, _r=real, _n=name: calls.append(_n) or _r(*a))
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 3, 34, 34)).astype(np.float32)
    w = rng.standard_normal((3, 1, 3, 3)).astype(np.float32)
    g = _geom(x, w, (1, 1, 1, 1), 1, strides)
    assert g.oh * g.ow >= K._ROWS_LAST_MAX
    dy = rng.standard_normal((2, 3, g.oh, g.ow)).astype(np.float32)
    dx = K.depthwise_dx(dy, w, g, 3)
    assert calls == ["_depthwise_fwd_flat" if turned else "_depthwise_dx_flat"]
    np.testing.assert_allclose(dx, _rows_dx(dy, w, g, 3), rtol=1e-5, atol=1e-5)
    calls.clear()                               # a small map: rows last
    g16 = _geom(x[:, :, :16, :15], w, (1, 1, 1, 1), 1, strides)
    assert g16.oh * g16.ow < K._ROWS_LAST_MAX
    K.depthwise_dx(rng.standard_normal((2, 3, g16.oh, g16.ow)).astype(np.float32), w, g16, 3)
    assert calls == ["_depthwise_dx_last"]


def _strided_sums(x, dy, g, m):
    """The filter gradient's row sums by strided taps over each padded row (float64)."""
    N, C = x.shape[:2]
    out = np.empty((m, g.kh, g.kw, N * C))
    K._padded_sums(x.reshape(N * C, g.H, g.W).astype(np.float64),
                   dy.reshape(N * C, m, g.oh, g.ow).astype(np.float64), g, m, out)
    return out


# a stride-1 map of at least ``_SUMS_PADDED_OW`` columns: its filter gradient sums padded rows
WIDE = (2, 2, 2, 7, 52, (3, 3), (1, 1, 1, 1), 1, (1, 1))


@pytest.mark.parametrize("N,C,m,H,W,k,pads,dil,strides", CASES + [WIDE])
def test_filter_gradient_sums_on_phase_planes_equal_strided_taps(N, C, m, H, W, k, pads, dil,
                                                                 strides, monkeypatch):
    """Each tap one contiguous dot per row over the phase planes and dY laid out Wq wide (or,
    on wide stride-1 maps, strided taps over the padded rows): the row sums of strided taps
    over the padded rows (float64), and the filter gradient of a direct convolution by the
    adjoint identity <dY, conv(X, W')> = <dW, W'>."""
    x, w, g, dy = _operands(9, N, C, m, H, W, k, pads, dil, strides)
    padded = []
    real = K._padded_sums
    monkeypatch.setattr(K, "_padded_sums", lambda *a: padded.append(1) or real(*a))
    sums = K._depthwise_sums(x, dy, g, m)
    wide = strides == (1, 1) and g.ow >= K._SUMS_PADDED_OW
    assert bool(padded) == wide
    monkeypatch.setattr(K, "_padded_sums", real)
    want = _strided_sums(x, dy, g, m)
    # (tolerances as Python floats: no NumPy-version-dependent scalar promotion)
    scale = float(np.abs(x).max()) * float(np.abs(dy).reshape(N * C, -1).sum(axis=1).max())
    np.testing.assert_allclose(sums, want, rtol=0, atol=1e-6 * scale)
    dw = K._taps_dw(x, dy, g, w.shape)
    probe = np.random.default_rng(10).standard_normal(w.shape)
    lhs = float((dy.astype(np.float64) * _direct(x.astype(np.float64), probe, g)).sum())
    bound = 1e-5 * float(np.abs(dy).sum()) * float(np.abs(x).max()) * float(np.abs(probe).sum())
    assert abs(float((dw.astype(np.float64) * probe).sum()) - lhs) <= bound


def test_a_non_finite_block_of_rows_sums_only_the_cells_fluid_reads(monkeypatch):
    """The flat taps read the planes' cells past each output row times dY's zeros: a block
    with an Inf takes the strided taps instead, so the Inf reaches exactly the filter taps
    whose window covers it (fluid's result); the other blocks keep the flat sums' values."""
    x, w, g, dy = _operands(11, 2, 3, 1, 20, 18, (3, 3), (1, 1, 1, 1), 1, (1, 1))
    monkeypatch.setattr(K, "_BLOCK", 2 * g.oh * (g.Wp + 1))       # blocks of 2 rows
    clean = K._depthwise_sums(x, dy, g, 1)
    x[0, 1, 0, 0] = np.inf             # row 1 (image 0, channel 1): its left and top edge
    sums = K._depthwise_sums(x, dy, g, 1)
    want = _strided_sums(x, dy, g, 1)
    np.testing.assert_array_equal(np.isinf(sums) | np.isnan(sums),
                                  np.isinf(want) | np.isnan(want))
    hit = ~np.isfinite(want[0, :, :, 1])
    assert hit.any() and not hit.all()     # taps (1..2, 1..2) reach pixel (0, 0), (0, *) do not
    others = [r for r in range(6) if r not in (0, 1)]   # rows outside the non-finite block
    np.testing.assert_array_equal(sums[..., others], clean[..., others])
    np.testing.assert_allclose(sums[0, :, :, 0], want[0, :, :, 0], rtol=1e-5, atol=1e-5)
