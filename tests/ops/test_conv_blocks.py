"""conv2d's im2col routines run the batch in blocks whose columns fit the cache
(``_batch_blocks``): forward, input gradient and filter gradient over several blocks equal a
direct float64 convolution (``sliding_window_view`` + einsum, no im2col), for every geometry
the blocks meet (strides, dilations, groups, uneven padding, a partial last block)."""
import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view

from fluidlite.core.registry import get_op_def
from fluidlite.ops import _conv_kernels as K
from fluidlite.ops import conv as C

CONV, GRAD = get_op_def("conv2d"), get_op_def("conv2d_grad")


def _direct(x, w, stride, pads, dil, groups):
    """float64 reference: Y[n, f] = sum_{c in group(f), i, j} W[f, c, i, j] Xpad[n, c, ...]."""
    x = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pads[0], pads[1]), (pads[2], pads[3])))
    F, Cg, kh, kw = w.shape
    win = sliding_window_view(x, ((kh - 1) * dil[0] + 1, (kw - 1) * dil[1] + 1), axis=(2, 3))
    win = win[:, :, ::stride[0], ::stride[1], ::dil[0], ::dil[1]]      # [N, C, oh, ow, kh, kw]
    fg = F // groups
    outs = [np.einsum("ncyxij,fcij->nfyx", win[:, g * Cg:(g + 1) * Cg],
                      w[g * fg:(g + 1) * fg].astype(np.float64)) for g in range(groups)]
    return np.concatenate(outs, axis=1)


def _grads(x, w, dy, stride, pads, dil, groups):
    """float64 reference gradients: the reference convolution is linear in x and in w, so
    dX and dW are its adjoints, taken exactly through einsum on basis probes."""
    dx = np.zeros(x.shape)
    for idx in np.ndindex(*x.shape[1:]):           # one probe per input position (small x)
        e = np.zeros((1,) + x.shape[1:])
        e[(0,) + idx] = 1
        col = _direct(e, w, stride, pads, dil, groups)[0]
        dx[(slice(None),) + idx] = np.einsum("nfyx,fyx->n", dy.astype(np.float64), col)
    dw = np.zeros(w.shape)
    for idx in np.ndindex(*w.shape):
        e = np.zeros(w.shape)
        e[idx] = 1
        dw[idx] = np.sum(_direct(x, e, stride, pads, dil, groups) * dy)
    return dx, dw


@pytest.mark.parametrize("stride,pads,dil,groups", [
    ((1, 1), (1, 1, 1, 1), (1, 1), 1),
    ((2, 1), (0, 1, 2, 0), (1, 1), 1),
    ((1, 2), (1, 1, 0, 1), (2, 1), 2),
])
def test_blocked_conv_equals_a_direct_convolution(monkeypatch, stride, pads, dil, groups):
    monkeypatch.setattr(C, "_COLS_BUDGET", 1)       # one image per block
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 4, 7, 6))           # 5 blocks, float64: exact to rounding
    w = rng.standard_normal((6, 4 // groups, 3, 2))
    attrs = dict(strides=list(stride), paddings=list(pads), dilations=list(dil), groups=groups)
    assert len(C._batch_blocks(4, C._conv_geom(x, w, attrs["strides"], attrs["paddings"],
                                               attrs["dilations"], "EXPLICIT", groups), 5)) == 5
    y = CONV.forward(x, w, **attrs)["Output"]
    want = _direct(x, w, stride, pads, dil, groups)
    assert y.shape == want.shape and y.dtype == np.float64
    np.testing.assert_allclose(y, want, rtol=1e-12, atol=1e-12)
    dy = rng.standard_normal(y.shape)
    got = GRAD.forward(x, w, dy, **attrs)
    dx, dw = _grads(x, w, dy, stride, pads, dil, groups)
    np.testing.assert_allclose(got["Input@GRAD"], dx, rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(got["Filter@GRAD"], dw, rtol=1e-11, atol=1e-11)


def test_blocks_of_a_real_layer_in_float32():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((5, 64, 32, 32)).astype(np.float32)    # 2.4 MB of columns each
    w = (rng.standard_normal((16, 64, 3, 3)) * 0.1).astype(np.float32)
    attrs = dict(strides=[1, 1], paddings=[1, 1], dilations=[1, 1], groups=1)
    g = C._conv_geom(x, w, [1, 1], [1, 1], [1, 1], "EXPLICIT", 1)
    assert C._batch_blocks(64, g, 5) == [(0, 1), (1, 2), (2, 3), (3, 5)]   # two at most, even
    y = CONV.forward(x, w, **attrs)["Output"]
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, _direct(x, w, (1, 1), (1, 1, 1, 1), (1, 1), 1),
                               rtol=1e-4, atol=1e-4)
    dy = rng.standard_normal(y.shape).astype(np.float32)
    got = GRAD.forward(x, w, dy, **attrs)
    # dW = sum_n dY[n] (x) X[n]: the float64 sum over the same windows
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    win = sliding_window_view(xp, (3, 3), axis=(2, 3))               # [N, C, 32, 32, 3, 3]
    dw = np.einsum("nfyx,ncyxij->fcij", dy.astype(np.float64), win)
    assert got["Filter@GRAD"].dtype == np.float32
    np.testing.assert_allclose(got["Filter@GRAD"], dw, rtol=1e-4, atol=2e-3)
    # dX: the transposed convolution, by the same windows' adjoint on each image
    dx = got["Input@GRAD"]
    assert dx.shape == x.shape and dx.dtype == np.float32
    probe = rng.standard_normal(x.shape)
    lhs = np.sum(dx.astype(np.float64) * probe)          # <dX, p> = <dY, conv(p)>
    rhs = np.sum(dy.astype(np.float64) * _direct(probe, w, (1, 1), (1, 1, 1, 1), (1, 1), 1))
    assert abs(lhs - rhs) <= 1e-4 * abs(rhs) + 1e-2


@pytest.mark.parametrize("least", [1, C._STRIDED_BL_MIN])
def test_strided_columns_in_either_layout_equal_a_direct_convolution(monkeypatch, least):
    """A strided layer with narrow outputs, two images a block: batch-second columns by
    default (batch-last copies would move runs of two elements), batch-last when forced; both
    give a direct convolution's forward and gradients."""
    monkeypatch.setattr(C, "_STRIDED_BL_MIN", least)
    monkeypatch.setattr(C, "_COLS_BUDGET", 2 * 8 * 9 * 4 * 4 * 4)    # two images per block
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 8, 7, 7))
    w = rng.standard_normal((5, 8, 3, 3))
    attrs = dict(strides=[2, 2], paddings=[1, 1], dilations=[1, 1], groups=1)
    g = C._conv_geom(x, w, [2, 2], [1, 1], [1, 1], "EXPLICIT", 1)
    assert C._batch_blocks(8, g, 4) == [(0, 2), (2, 4)]
    assert C._batch_last(g, 2) == (least == 1)
    y = CONV.forward(x, w, **attrs)["Output"]
    np.testing.assert_allclose(y, _direct(x, w, (2, 2), (1, 1, 1, 1), (1, 1), 1),
                               rtol=1e-12, atol=1e-12)
    dy = rng.standard_normal(y.shape)
    got = GRAD.forward(x, w, dy, **attrs)
    dx, dw = _grads(x, w, dy, (2, 2), (1, 1, 1, 1), (1, 1), 1)
    np.testing.assert_allclose(got["Input@GRAD"], dx, rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(got["Filter@GRAD"], dw, rtol=1e-11, atol=1e-11)


def test_column_layout_rule():
    """Narrow outputs go batch-last from two images at stride 1, from ``_STRIDED_BL_MIN``
    when the windows are strided; wide outputs never."""
    x, w = np.zeros((1, 4, 16, 16)), np.zeros((4, 4, 3, 3))
    s1 = C._conv_geom(x, w, [1, 1], [1, 1], [1, 1], "EXPLICIT", 1)       # ow 16
    s1n = C._conv_geom(x[..., :8, :8], w, [1, 1], [1, 1], [1, 1], "EXPLICIT", 1)   # ow 8
    s2 = C._conv_geom(x, w, [2, 2], [1, 1], [1, 1], "EXPLICIT", 1)       # ow 8
    assert not C._batch_last(s1, 64)
    assert C._batch_last(s1n, 2) and not C._batch_last(s1n, 1)
    assert not C._batch_last(s2, C._STRIDED_BL_MIN - 1) and C._batch_last(s2, C._STRIDED_BL_MIN)


def test_a_1x1_filter_never_takes_the_batch_last_columns():
    """A 1x1 filter's columns are the maps themselves: batch-second at any width, stride and
    batch (a 3x3 filter on the same narrow map goes batch-last)."""
    x = np.zeros((1, 4, 7, 7))
    for stride in ([1, 1], [2, 2]):
        g1 = C._conv_geom(x, np.zeros((4, 4, 1, 1)), stride, [0, 0], [1, 1], "EXPLICIT", 1)
        assert not C._batch_last(g1, 64)
    g3 = C._conv_geom(x, np.zeros((4, 4, 3, 3)), [1, 1], [1, 1], [1, 1], "EXPLICIT", 1)
    assert C._batch_last(g3, 64)


@pytest.mark.parametrize("shape,w_shape,n,want", [
    ((7, 7), (160, 576), 8, True),      # MobileNetV2's 576 -> 160: filter rereads 2.2x the copies
    ((7, 7), (320, 960), 8, False),     # 960 -> 320: 4.3x
    ((7, 7), (1280, 320), 1, True),     # one image: no rereads at all
    ((16, 8), (2048, 2048), 64, True),  # 128 output pixels: always per image
    ((1, 127), (8, 8), 2, True),
    ((1, 2), (64, 32), 2, False),       # 2048 rereads against 3 * 2 * 96 * 2 = 1152 copies
    ((1, 2), (64, 32), 1, True),
])
def test_pointwise_rule_weighs_filter_rereads_against_layout_copies(shape, w_shape, n, want):
    g = C._geom(shape, (1, 1), (1, 1), (0, 0), (1, 1), "EXPLICIT", 1)
    assert K.use_pointwise(g, w_shape + (1, 1), n) is want


@pytest.mark.parametrize("x_shape,w_shape,stride", [
    ((2, 32, 1, 2), (64, 32, 1, 1), (1, 1)),      # stride 1: the maps copied whole
    ((3, 32, 3, 3), (64, 32, 1, 1), (2, 2)),      # stride 2: sampled, then copied
])
def test_1x1_columns_over_the_batch_equal_a_direct_convolution(x_shape, w_shape, stride):
    """A 1x1 convolution whose filter is big against its maps runs as one GEMM over the
    batch-second columns (not per image): output and gradients against the float64 direct
    convolution."""
    rng = np.random.default_rng(5)
    x, w = rng.standard_normal(x_shape), rng.standard_normal(w_shape)
    attrs = dict(strides=list(stride), paddings=[0, 0], dilations=[1, 1], groups=1)
    g = C._conv_geom(x, w, attrs["strides"], [0, 0], [1, 1], "EXPLICIT", 1)
    assert C._kind(x.shape[0], x.shape[1], w.shape, g, x.dtype) == ""
    assert not C._batch_last(g, x.shape[0])
    y = CONV.forward(x, w, **attrs)["Output"]
    np.testing.assert_allclose(y, _direct(x, w, stride, (0, 0, 0, 0), (1, 1), 1),
                               rtol=1e-12, atol=1e-12)
    dy = rng.standard_normal(y.shape)
    got = GRAD.forward(x, w, dy, **attrs)
    dx, dw = _grads(x, w, dy, stride, (0, 0, 0, 0), (1, 1), 1)
    np.testing.assert_allclose(got["Input@GRAD"], dx, rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(got["Filter@GRAD"], dw, rtol=1e-11, atol=1e-11)
