"""Tests written from the mutation run of ``fluidlite/ops/_conv_kernels.py`` (issue 28, round
10, docs/mutation.md): the depthwise and 1x1 kernels behind ``conv2d`` / ``depthwise_conv2d``.

* float32 depthwise convolutions on each of the kernels' layouts -- rows last (small maps),
  strided rows, flat stride-phase planes (stride 1 forward; the input gradient of stride 1 or
  of big maps, here with a width stride of 3 and a left padding of 1, whose phases do not
  fold onto each other) -- with the default block size and with one that leaves a partial
  last block in each part: the output and the input gradient are float32 and equal, bit for
  bit, a direct float32 loop that adds the taps in (i, j) order (the module's determinism
  promise: every kernel does the same operations per element in the same order; the one
  exception, the rows-last input gradient of a map split into several blocks of output rows,
  adds the blocks' sums in turn), and are
  close to a float64 direct convolution (tests/ops/test_conv.py's ``ref_conv``); the filter
  gradient is float32 and close to its float64 definition;
* the 1x1 GEMM-per-image route: a (1, 2) stride (height unstrided, width strided) against the
  direct convolution and the adjoint formulas dX[n] = W^T dY[n] (scattered to the strided
  positions), dW = sum_n dY[n] X[n]^T; float32 stays float32 in all three; float16 multiplies
  in float32 and rounds once (``linalg._mm``): Y and dX within one float16 ulp of the float64
  result (dW adds the images' float16 products).
"""
import numpy as np
import pytest

from fluidlite.core.registry import get_op_def
from fluidlite.ops import _conv_kernels as K
from fluidlite.ops import conv as CV
from tests.ops.test_conv import ref_conv

# (N, C, m, H, W, kernel, strides, paddings [t, b, l, r], dilations, layout)
DEPTHWISE = [
    (2, 3, 2, 9, 9, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), "last"),
    (2, 3, 1, 11, 8, (3, 2), (2, 1), (2, 0, 1, 1), (2, 1), "last"),
    (2, 3, 2, 40, 36, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), "rows"),
    (2, 3, 2, 20, 18, (3, 3), (1, 1), (1, 2, 0, 1), (1, 2), "flat"),
    (2, 3, 1, 100, 150, (3, 3), (2, 3), (1, 1, 1, 1), (1, 1), "rows+flat dx"),
    (3, 2, 1, 10, 10, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), "last"),       # 2 channels
]


def _attrs(C, s, p, d):
    return {"strides": list(s), "paddings": list(p), "dilations": list(d), "groups": C}


def _padded(x, g):
    N, C = x.shape[:2]
    xp = np.zeros((N, C, g.Hp, g.Wp), x.dtype)
    xp[:, :, g.pt:g.pt + g.H, g.pl:g.pl + g.W] = x
    return xp


def _view(a, g, i, j):
    return a[:, i * g.dh:i * g.dh + g.sh * (g.oh - 1) + 1:g.sh,
             j * g.dw:j * g.dw + g.sw * (g.ow - 1) + 1:g.sw]


def _direct_fwd(x, w, g):
    """Y[n, f] = sum over the taps (i, j) in order of W[f, 0, i, j] * Xpad[n, f // m, tap],
    each product rounded, then added, in x's dtype."""
    C, m = x.shape[1], w.shape[0] // x.shape[1]
    xp = _padded(x, g)
    y = np.empty((x.shape[0], w.shape[0], g.oh, g.ow), x.dtype)
    for f in range(w.shape[0]):
        for i in range(g.kh):
            for j in range(g.kw):
                t = _view(xp[:, f // m], g, i, j) * w[f, 0, i, j]
                if i == 0 and j == 0:
                    y[:, f] = t
                else:
                    y[:, f] += t
    return y


def _direct_dx(dy, w, g, C):
    """dXpad[n, c, tap(i, j)] += sum_k W[c*m + k, 0, i, j] dY[n, c*m + k] (k in order), the
    taps in (i, j) order; then cropped."""
    N, m = dy.shape[0], w.shape[0] // C
    dxp = np.zeros((N, C, g.Hp, g.Wp), dy.dtype)
    for c in range(C):
        for i in range(g.kh):
            for j in range(g.kw):
                t = dy[:, c * m] * w[c * m, 0, i, j]
                for k in range(1, m):
                    t += dy[:, c * m + k] * w[c * m + k, 0, i, j]
                v = _view(dxp[:, c], g, i, j)
                v += t
    return dxp[:, :, g.pt:g.pt + g.H, g.pl:g.pl + g.W]


def _direct_dw(x, dy, g, m):
    xp = _padded(x.astype(np.float64), g)
    dw = np.zeros((dy.shape[1], 1, g.kh, g.kw))
    for f in range(dy.shape[1]):
        for i in range(g.kh):
            for j in range(g.kw):
                dw[f, 0, i, j] = (_view(xp[:, f // m], g, i, j) * dy[:, f]).sum()
    return dw


def _partial_block(g, layout, rows_per_part):
    """A ``_BLOCK`` that gives blocks of 2 rows (rows-first kernels) or 2 output rows
    (rows-last kernels): each part of 3 rows / each odd map height ends on a partial block."""
    if layout == "last":
        return 2 * g.ow * rows_per_part
    wq = -(-g.Wp // g.sw)                     # the flat planes' width
    return 2 * max(g.oh * g.ow, g.oh * wq)


@pytest.mark.parametrize("blocks", ["default", "partial"])
@pytest.mark.parametrize("case", DEPTHWISE, ids=[c[-1] + str(k) for k, c in enumerate(DEPTHWISE)])
def test_float32_depthwise_is_the_direct_loop_bit_for_bit(case, blocks, monkeypatch):
    N, C, m, H, W, k, s, p, d, layout = case
    monkeypatch.setattr(K, "_BAND_MAX", -1)     # the tap kernels (the bands: test_conv_band.py)
    rng = np.random.default_rng(11)
    x = rng.standard_normal((N, C, H, W)).astype(np.float32)
    w = rng.standard_normal((C * m, 1) + k).astype(np.float32)
    g = CV._conv_geom(x, w, list(s), list(p), list(d), "EXPLICIT", C)
    assert K.use_depthwise(x.shape, w.shape, C)
    assert (g.oh * g.ow < K._ROWS_LAST_MAX) == (layout == "last")
    if blocks == "partial":
        monkeypatch.setattr(K, "_BLOCK", _partial_block(g, layout, N * C // 2))
    attrs = _attrs(C, s, p, d)
    y = get_op_def("depthwise_conv2d").forward(x, w, **attrs)["Output"]
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y, _direct_fwd(x, w, g))
    np.testing.assert_allclose(y, ref_conv(x.astype(np.float64), w.astype(np.float64), s, p, d,
                                           C), rtol=1e-5, atol=1e-5)
    dy = rng.standard_normal(y.shape).astype(np.float32)
    grads = get_op_def("depthwise_conv2d_grad").forward(x, w, dy, **attrs)
    dx, dw = grads["Input@GRAD"], grads["Filter@GRAD"]
    assert dx.dtype == np.float32 and dw.dtype == np.float32
    if not (layout == "last" and blocks == "partial"):
        # (rows last, the output rows of a map in several blocks: each block adds its taps
        # in order, so a cell gets the blocks' sums one after the other -- still the same
        # bits on any machine and thread count, but not the whole map's tap order)
        np.testing.assert_array_equal(dx, _direct_dx(dy, w, g, C))
    np.testing.assert_allclose(dx, _direct_dx(dy.astype(np.float64), w.astype(np.float64), g, C),
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(dw, _direct_dw(x, dy.astype(np.float64), g, m), rtol=1e-4,
                               atol=1e-3)


# -- 1x1 ---------------------------------------------------------------------------------------
def _pointwise_ref(x, w, dy, s):
    """float64: Y = W X at the strided pixels, dX[n] = W^T dY[n] scattered back, dW."""
    x, w, dy = (a.astype(np.float64) for a in (x, w, dy))
    wm = w[:, :, 0, 0]
    xs = x[:, :, ::s[0], ::s[1]]
    y = np.einsum("fc,nchw->nfhw", wm, xs)
    dx = np.zeros_like(x)
    dx[:, :, ::s[0], ::s[1]] = np.einsum("fc,nfhw->nchw", wm, dy)
    dw = np.einsum("nfhw,nchw->fc", dy, xs)[:, :, None, None]
    return y, dx, dw


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("strides", [(1, 2), (1, 1), (2, 2)])
def test_pointwise_route_values_and_dtypes(strides, dtype):
    rng = np.random.default_rng(12)
    x = rng.standard_normal((2, 3, 16, 17)).astype(dtype)
    w = rng.standard_normal((4, 3, 1, 1)).astype(dtype)
    g = CV._conv_geom(x, w, list(strides), [0, 0], [1, 1], "EXPLICIT", 1)
    if strides != (2, 2):
        assert K.use_pointwise(g, w.shape)
    y = get_op_def("conv2d").forward(x, w, strides=list(strides))["Output"]
    dy = rng.standard_normal(y.shape).astype(dtype)
    grads = get_op_def("conv2d_grad").forward(x, w, dy, strides=list(strides))
    ry, rdx, rdw = _pointwise_ref(x, w, dy, strides)
    tol = 1e-12 if dtype == np.float64 else 2e-5
    for got, want in ((y, ry), (grads["Input@GRAD"], rdx), (grads["Filter@GRAD"], rdw)):
        assert got.dtype == dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    np.testing.assert_allclose(y, ref_conv(x.astype(np.float64), w.astype(np.float64), strides),
                               rtol=tol, atol=tol)


@pytest.mark.parametrize("strides,hw", [((1, 1), (16, 16)), ((2, 2), (24, 25))])
def test_pointwise_float16_multiplies_in_float32_and_rounds_once(strides, hw):
    rng = np.random.default_rng(13)
    x = rng.standard_normal((2, 64) + hw).astype(np.float16)
    w = (rng.standard_normal((8, 64, 1, 1)) / 8).astype(np.float16)
    g = CV._conv_geom(x, w, list(strides), [0, 0], [1, 1], "EXPLICIT", 1)
    assert K.use_pointwise(g, w.shape)
    y = get_op_def("conv2d").forward(x, w, strides=list(strides))["Output"]
    dy = (rng.standard_normal(y.shape) / 4).astype(np.float16)
    grads = get_op_def("conv2d_grad").forward(x, w, dy, strides=list(strides))
    ry, rdx, rdw = _pointwise_ref(x, w, dy, strides)
    for got, want in ((y, ry), (grads["Input@GRAD"], rdx)):
        assert got.dtype == np.float16 and got.shape == want.shape
        want16 = want.astype(np.float16)
        ulp = np.spacing(np.abs(want16)).astype(np.float64)
        assert np.all(np.abs(got.astype(np.float64) - want16) <= ulp)
    # dW: each image's product rounded to float16, then the images added in float16
    dw = grads["Filter@GRAD"]
    assert dw.dtype == np.float16 and dw.shape == rdw.shape
    np.testing.assert_allclose(dw.astype(np.float64), rdw, rtol=3e-3, atol=3e-3)


@pytest.mark.parametrize("pads", [(1, 0, 0, 0), (0, 1, 0, 0), (0, 0, 1, 0), (0, 0, 0, 1),
                                  (0, 0, 0, 0)])
def test_one_sided_paddings_on_the_rows_first_kernels(pads):
    """A 20x20 map (rows first) with stride 2 (the strided-rows forward) and each single
    padding: output and both gradients against the float64 direct convolution."""
    rng = np.random.default_rng(14)
    x, w = rng.standard_normal((2, 2, 40, 38)), rng.standard_normal((2, 1, 3, 3))
    attrs = _attrs(2, (2, 2), pads, (1, 1))
    g = CV._conv_geom(x, w, [2, 2], list(pads), [1, 1], "EXPLICIT", 2)
    assert g.oh * g.ow >= K._ROWS_LAST_MAX
    y = get_op_def("depthwise_conv2d").forward(x, w, **attrs)["Output"]
    np.testing.assert_allclose(y, ref_conv(x, w, (2, 2), pads, (1, 1), 2), rtol=1e-12,
                               atol=1e-12)
    dy = rng.standard_normal(y.shape)
    grads = get_op_def("depthwise_conv2d_grad").forward(x, w, dy, **attrs)
    np.testing.assert_allclose(grads["Input@GRAD"], _direct_dx(dy, w, g, 2), rtol=1e-12,
                               atol=1e-12)
    np.testing.assert_allclose(grads["Filter@GRAD"], _direct_dw(x, dy, g, 1), rtol=1e-12,
                               atol=1e-12)


def test_pointwise_threshold_is_at_least_128_output_pixels():
    """``use_pointwise``: 1x1, groups 1, no padding, and at least ``_POINTWISE_MIN`` (128)
    output pixels -- or a filter whose rereads (F*C*(n-1)) are at most
    ``_POINTWISE_FILTER_READS`` (3) times the layout copies (n*(C+F)*pixels)."""
    for hw, want in (((8, 16), True), ((1, 127), False), ((1, 128), True)):
        g = CV._geom(hw, (1, 1), (1, 1), (0, 0), (1, 1), "EXPLICIT", 1)
        assert K.use_pointwise(g, (2000, 2000, 1, 1), 8) is want, hw
    g = CV._geom((1, 1), (1, 1), (1, 1), (0, 0), (1, 1), "EXPLICIT", 1)
    # at the bound: 8 * 8 * 3 = 192 rereads == 3 * 4 * 16 * 1 copies; one filter more is over
    assert K.use_pointwise(g, (8, 8, 1, 1), 4)
    assert not K.use_pointwise(g, (9, 8, 1, 1), 4)      # 216 > 3 * 4 * 17 = 204
    assert K.use_pointwise(g, (900, 800, 1, 1), 1)      # one image: nothing reread


