"""Tests written from mutation testing (issue 28, docs/mutation.md) for ``fluidlite/ops/conv.py``:
the build-time checks of conv2d / conv2d_transpose (ranks, channels, groups, strides,
dilations, layouts) with their exact messages, in NCHW and NHWC. The expected channel
arithmetic is fluid 1.8's (conv_op.cc / conv_transpose_op.cc InferShape): conv2d's Filter is
[C_out, C_in / groups, kh, kw], conv2d_transpose's is [C_in, C_out / groups, kh, kw]."""
import re

import numpy as np
import pytest

from fluidlite.core.registry import VarSpec, get_op_def


def _infer(op, x, w, **attrs):
    return get_op_def(op).infer(VarSpec(list(x), np.float32), VarSpec(list(w), np.float32),
                                **attrs)


def _refused(op, x, w, msg, **attrs):
    with pytest.raises(ValueError, match="^" + re.escape(msg) + "$"):
        _infer(op, x, w, **attrs)


@pytest.mark.parametrize("op", ["conv2d", "conv2d_transpose"])
def test_ranks_and_groups_are_checked_with_the_layout_named(op):
    _refused(op, (2, 3, 8), (3, 3, 3, 3), f"{op}: Input must be 4-D (NCHW), got shape [2, 3, 8]")
    _refused(op, (2, 8, 3), (3, 3, 3, 3), f"{op}: Input must be 4-D (NHWC), got shape [2, 8, 3]",
             data_format="NHWC")
    _refused(op, (2, 3, 8, 8), (3, 3, 3), f"{op}: Filter must be 4-D, got shape [3, 3, 3]")
    _refused(op, (2, 3, 8, 8), (3, 3, 3, 3), f"{op}: groups must be >= 1, got 0", groups=0)


def test_conv2d_channels_must_match_filter_times_groups():
    _refused("conv2d", (2, 3, 8, 8), (4, 2, 3, 3),
             "conv2d: Input has 3 channels but Filter [4, 2, 3, 3] with groups=1 expects 2 "
             "(Filter is [C_out, C_in/groups, kh, kw])")
    _refused("conv2d", (2, 8, 8, 6), (4, 2, 3, 3),
             "conv2d: Input has 6 channels but Filter [4, 2, 3, 3] with groups=2 expects 4 "
             "(Filter is [C_out, C_in/groups, kh, kw])", groups=2, data_format="NHWC")
    _refused("conv2d", (2, 6, 8, 8), (5, 2, 3, 3),
             "conv2d: number of filters 5 not divisible by groups 3", groups=3)
    # channels last: C is the last dim; groups 3 with Filter [6, 2, ...] takes 6 channels
    out = _infer("conv2d", (2, 8, 8, 6), (6, 2, 3, 3), groups=3, data_format="NHWC")
    assert list(out["Output"].shape) == [2, 6, 6, 6]
    # an unknown channel count is accepted (checked when the data arrives)
    out = _infer("conv2d", (-1, -1, 8, 8), (4, 3, 3, 3))
    assert list(out["Output"].shape) == [-1, 4, 6, 6]


def test_conv2d_transpose_channels_must_match_the_filters_first_dim():
    _refused("conv2d_transpose", (2, 3, 8, 8), (4, 2, 3, 3),
             "conv2d_transpose: Input has 3 channels but Filter [4, 2, 3, 3] expects 4 "
             "(Filter is [C_in, C_out/groups, kh, kw])")
    _refused("conv2d_transpose", (2, 8, 8, 3), (4, 2, 3, 3),
             "conv2d_transpose: Input has 3 channels but Filter [4, 2, 3, 3] expects 4 "
             "(Filter is [C_in, C_out/groups, kh, kw])", data_format="NHWC")
    _refused("conv2d_transpose", (2, 5, 8, 8), (5, 2, 3, 3),
             "conv2d_transpose: input channels 5 not divisible by groups 2", groups=2)
    out = _infer("conv2d_transpose", (2, 4, 5, 5), (4, 3, 3, 3), groups=2)
    assert list(out["Output"].shape) == [2, 6, 7, 7]          # C_out = 3 * groups
    out = _infer("conv2d_transpose", (2, 5, 5, 4), (4, 3, 3, 3), groups=2, data_format="NHWC")
    assert list(out["Output"].shape) == [2, 7, 7, 6]


@pytest.mark.parametrize("op", ["conv2d", "conv2d_transpose"])
@pytest.mark.parametrize("name,bad,msg", [
    ("strides", [1], "strides must have 2 values, got [1]"),
    ("strides", [1, 0], "every value of strides must be >= 1, got [1, 0]"),
    ("dilations", [0, 1], "every value of dilations must be >= 1, got [0, 1]"),
    ("dilations", [1, 1, 1], "dilations must have 2 values, got [1, 1, 1]")])
def test_strides_and_dilations_are_checked(op, name, bad, msg):
    _refused(op, (2, 3, 8, 8), (3, 3, 3, 3), f"{op}: {msg}", **{name: bad})


@pytest.mark.parametrize("op", ["conv2d", "conv2d_transpose"])
def test_an_unknown_data_format_is_refused(op):
    _refused(op, (2, 3, 8, 8), (3, 3, 3, 3), "data_format must be 'NCHW' or 'NHWC', got 'NCWH'",
             data_format="NCWH")
    # fluid's AnyLayout is NCHW
    out = _infer(op, (2, 3, 8, 8), (3, 3, 3, 3), data_format="AnyLayout")
    assert list(out["Output"].shape)[:2] == [2, 3]


# -- the blocked kernels: batches whose im2col columns exceed the cache budget -------------------
def _ref_conv(x, w, stride, pad, groups):
    """Direct float64 convolution, dX and dW (sums over the kernel offsets) for checking."""
    x = x.astype(np.float64)
    w = w.astype(np.float64)
    n, c, h, wd = x.shape
    f, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh = (h + 2 * pad - kh) // stride + 1
    ow = (wd + 2 * pad - kw) // stride + 1
    fg = f // groups
    y = np.zeros((n, f, oh, ow))
    for g in range(groups):
        xs, fs = slice(g * cg, (g + 1) * cg), slice(g * fg, (g + 1) * fg)
        for i in range(kh):
            for j in range(kw):
                win = xp[:, xs, i:i + stride * (oh - 1) + 1:stride,
                         j:j + stride * (ow - 1) + 1:stride]
                y[:, fs] += np.einsum("fc,nchw->nfhw", w[fs, :, i, j], win)
    return y, xp, oh, ow


def _ref_grads(x, w, dy, stride, pad, groups):
    _, xp, oh, ow = _ref_conv(x, w, stride, pad, groups)
    f, cg, kh, kw = w.shape
    fg = f // groups
    dxp = np.zeros_like(xp)
    dw = np.zeros(w.shape)
    dy = dy.astype(np.float64)
    for g in range(groups):
        xs, fs = slice(g * cg, (g + 1) * cg), slice(g * fg, (g + 1) * fg)
        for i in range(kh):
            for j in range(kw):
                sl = (slice(None), xs, slice(i, i + stride * (oh - 1) + 1, stride),
                      slice(j, j + stride * (ow - 1) + 1, stride))
                dxp[sl] += np.einsum("fc,nfhw->nchw", w[fs, :, i, j].astype(np.float64),
                                     dy[:, fs])
                dw[fs, :, i, j] = np.einsum("nfhw,nchw->fc", dy[:, fs], xp[sl])
    h, wd = x.shape[2:]
    return dxp[:, :, pad:pad + h, pad:pad + wd], dw


@pytest.mark.parametrize("n,c,hw,f,groups,stride", [
    (5, 16, 64, 8, 1, 1),        # wide maps: batch-second columns, 3 blocks of 2 images
    (3, 384, 14, 4, 1, 1),       # narrow maps: batch-last columns, one image per block
    (4, 64, 80, 8, 2, 2)])       # grouped, strided
def test_blocked_convolution_and_gradients_match_a_direct_float64_reference(n, c, hw, f, groups,
                                                                           stride):
    from fluidlite.ops import conv as C
    rng = np.random.default_rng(n * c)
    x = rng.normal(size=(n, c, hw, hw)).astype(np.float32)
    w = rng.normal(size=(f, c // groups, 3, 3)).astype(np.float32)
    attrs = dict(strides=[stride, stride], paddings=[1, 1], groups=groups, dilations=[1, 1])
    g = C._conv_geom(x, w, attrs["strides"], attrs["paddings"], attrs["dilations"],
                     "EXPLICIT", groups)
    assert len(C._batch_blocks(c, g, n)) > 1           # the blocked path is what is tested
    y = get_op_def("conv2d").forward(x, w, **attrs)["Output"]
    want, _, oh, ow = _ref_conv(x, w, stride, 1, groups)
    assert y.dtype == np.float32 and y.shape == want.shape
    np.testing.assert_allclose(y, want, rtol=2e-4, atol=2e-3)
    dy = rng.normal(size=want.shape).astype(np.float32)
    got = get_op_def("conv2d_grad").forward(x, w, dy, **attrs)
    dx, dw = _ref_grads(x, w, dy, stride, 1, groups)
    np.testing.assert_allclose(got["Input@GRAD"], dx, rtol=2e-4, atol=2e-3)
    np.testing.assert_allclose(got["Filter@GRAD"], dw, rtol=2e-4, atol=2e-2)
