"""The channels-last (NHWC) forward kernels (``ops/_conv_last.py``, ``conv._conv_fwd_cols_last``):
which kernel runs, their values against a float64 reference computed by the NCHW kernels, their
bits across thread counts and with the filter laid out ahead, and the epilogue's blocks."""
from __future__ import annotations

import numpy as np
import pytest

import fluidlite.inference  # noqa: F401  (registers conv2d_fusion and channels_last_filter)
from fluidlite.core import threads
from fluidlite.core.registry import VarSpec, get_op_def
from fluidlite.core.dtypes import VarType
from fluidlite.ops import _conv_last, _conv_kernels
from fluidlite.ops.conv import (_geom, channels_last_filter, channels_last_filter_shape,
                                channels_last_kernel, conv2d_forward)


def _reference(x, w, s, p, d, groups):
    """float64 NCHW conv2d of the NHWC ``x``, returned NHWC."""
    y = get_op_def("conv2d").forward(x.transpose(0, 3, 1, 2).astype(np.float64),
                                      w.astype(np.float64), strides=[s[0], s[1]],
                                      paddings=list(p), groups=groups,
                                      dilations=[d[0], d[1]])["Output"]
    return y.transpose(0, 2, 3, 1)


# (N, H, W, C, F, kernel, strides, paddings (t, b, l, r), dilations, groups) -> kind
CASES = [
    ((1, 9, 11, 8, 8, 3, (1, 1), (1, 1, 1, 1), (1, 1), 8), "depthwise"),
    ((2, 9, 11, 8, 8, 3, (2, 2), (1, 1, 1, 1), (1, 1), 8), "depthwise"),
    ((2, 10, 7, 6, 6, 3, (2, 1), (0, 2, 1, 0), (1, 1), 6), "depthwise"),
    ((1, 12, 12, 5, 5, 5, (1, 1), (2, 2, 2, 2), (2, 1), 5), "depthwise"),
    ((3, 7, 6, 4, 4, (2, 3), (1, 2), (1, 0, 0, 2), (1, 2), 4), "depthwise"),
    ((3, 6, 6, 4, 7, 1, (1, 1), (0, 0, 0, 0), (1, 1), 1), "pointwise"),
    ((2, 9, 9, 4, 7, 1, (2, 2), (0, 0, 0, 0), (1, 1), 1), "pointwise"),
    ((2, 9, 8, 3, 5, 3, (2, 2), (1, 1, 1, 1), (1, 1), 1), "im2col"),
    ((1, 9, 8, 4, 5, (3, 2), (1, 1), (1, 0, 1, 1), (1, 2), 1), "im2col"),
    ((2, 9, 8, 4, 6, 3, (2, 2), (0, 1, 1, 0), (1, 1), 2), ""),     # grouped: NCHW kernels
    ((2, 9, 8, 4, 8, 3, (1, 1), (1, 1, 1, 1), (1, 1), 4), ""),     # 2 filters per channel
]


def _case(case, dtype, rng):
    (N, H, W, C, F, k, s, p, d, groups), kind = case
    kh, kw = (k, k) if isinstance(k, int) else k
    x = rng.standard_normal((N, H, W, C)).astype(dtype)
    w = rng.standard_normal((F, C // groups, kh, kw)).astype(dtype)
    return x, w, s, p, d, groups, kind


@pytest.mark.parametrize("case", CASES, ids=[f"{c[1] or 'nchw'}-{i}" for i, c in
                                              enumerate(CASES)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nhwc_forward_matches_float64_nchw(case, dtype):
    x, w, s, p, d, groups, kind = _case(case, dtype, np.random.default_rng(0))
    assert channels_last_kernel(x.shape, w.shape, np.dtype(dtype), s, p, "EXPLICIT", groups,
                                d, "NHWC") == kind
    got = conv2d_forward(x, w, s, p, "EXPLICIT", groups, d, "NHWC")
    want = _reference(x, w, s, p, d, groups)
    assert got.dtype == dtype and got.shape == want.shape and got.flags.c_contiguous
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max())


def test_nhwc_forward_accepts_a_transposed_view():
    # what a transpose2 into an NHWC group hands the kernels: a view of the NCHW array
    rng = np.random.default_rng(1)
    for case in CASES[:9]:
        x, w, s, p, d, groups, _ = _case(case, np.float32, rng)
        view = np.ascontiguousarray(x.transpose(0, 3, 1, 2)).transpose(0, 2, 3, 1)
        np.testing.assert_array_equal(conv2d_forward(view, w, s, p, "EXPLICIT", groups, d,
                                                     "NHWC"),
                                      conv2d_forward(x, w, s, p, "EXPLICIT", groups, d, "NHWC"))


# shapes that take every path of the kernels' parts and blocks
PARTS = [
    ((1, 80, 80, 64), 3, 64, 1),        # depthwise: two parts of two blocks of rows
    ((2, 60, 60, 48), 3, 48, 1),        # ... parts that meet between images
    ((3, 2, 64, 384), 3, 384, 1),       # ... a part that ends one row into an image
    ((1, 160, 160, 64), 3, 64, 2),      # strided depthwise: blocks of rows
    ((2, 70, 70, 64), 1, 1, 1),         # 1x1: one product in the GEMM's row parts
    ((4, 64, 64, 16), 1, 1, 1),         # 1x1: blocks of the batch's pixel rows
    ((1, 7, 7, 320), 1, 1, 1),          # 1x1 of few pixels: the GEMM's column parts
    ((1, 64, 64, 3), 3, 1, 1),          # im2col
]


@pytest.mark.parametrize("shape, k, groups, stride", PARTS)
def test_bits_follow_neither_threads_nor_a_filter_laid_out_ahead(shape, k, groups, stride):
    rng = np.random.default_rng(2)
    x = rng.standard_normal(shape).astype(np.float32)
    F = shape[3] if groups > 1 else 40
    w = rng.standard_normal((F, shape[3] // groups, k, k)).astype(np.float32)
    s, p, d = (stride, stride), (k // 2,) * 4, (1, 1)
    laid = channels_last_filter(w, (-1,) + shape[1:], s, p, "EXPLICIT", groups, d)
    assert laid.shape == channels_last_filter_shape(w.shape, np.float32, (-1,) + shape[1:], s,
                                                    p, "EXPLICIT", groups, d)
    runs = {}
    for t in (1, 2, 3):
        with threads.using(t):
            runs[t] = conv2d_forward(x, w, s, p, "EXPLICIT", groups, d, "NHWC")
            np.testing.assert_array_equal(
                conv2d_forward(x, w, s, p, "EXPLICIT", groups, d, "NHWC", filter_last=laid),
                runs[t])
    # the einsum's bits follow no thread count; a GEMM's are linalg._gemm's: the same for every
    # count from two (its cut is fixed), one thread runs it whole (another BLAS may sum it in
    # another order: NumPy 1.23's OpenBLAS does)
    np.testing.assert_array_equal(runs[3], runs[2])
    if groups > 1:
        np.testing.assert_array_equal(runs[1], runs[2])
    for r in runs.values():
        np.testing.assert_allclose(r, _reference(x, w, s, p, d, groups), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("shape, k, groups, stride", PARTS + [((2, 9, 9, 8), 3, 8, 1),
                                                              ((2, 30, 30, 3), 3, 1, 1)])
def test_the_epilogue_sees_every_row_once_as_it_is_made(shape, k, groups, stride):
    rng = np.random.default_rng(3)
    x = rng.standard_normal(shape).astype(np.float32)
    F = shape[3] if groups > 1 else 40
    w = rng.standard_normal((F, shape[3] // groups, k, k)).astype(np.float32)
    s = (stride, stride)
    for t in (1, 2):
        with threads.using(t):
            plain = conv2d_forward(x, w, s, (k // 2,) * 4, "EXPLICIT", groups, (1, 1), "NHWC")
        seen = np.zeros(plain.reshape(-1, F).shape, np.int64)

        def epilogue(block, where):
            assert block.shape == seen[where].shape
            np.testing.assert_array_equal(block, plain.reshape(-1, F)[where])  # made already
            seen[where] += 1
            block *= 2
        with threads.using(t):
            got = conv2d_forward(x, w, s, (k // 2,) * 4, "EXPLICIT", groups, (1, 1), "NHWC",
                                 epilogue=epilogue)
        assert (seen == 1).all()
        np.testing.assert_array_equal(got, plain * 2)


def test_which_kernel_runs():
    def kind(x_shape, w_shape, dtype=np.float32, s=(1, 1), p=(0, 0), g=1, d=(1, 1),
             fmt="NHWC"):
        return channels_last_kernel(x_shape, w_shape, np.dtype(dtype), s, p, "EXPLICIT", g, d,
                                    fmt)
    assert kind((1, 8, 8, 4), (6, 4, 1, 1)) == "pointwise"
    assert kind((1, 8, 8, 4), (6, 4, 1, 1), fmt="NCHW") == ""
    assert kind((1, 8, 8, 4), (6, 4, 1, 1), np.float16) == ""          # no float16 kernels
    assert kind((1, 8, 8, 4), (6, 4, 1, 1), p=(1, 1)) == "im2col"      # a padded 1x1
    assert kind((1, 8, 8, 4), (4, 1, 3, 3), p=(1, 1), g=4) == "depthwise"
    assert kind((1, 8, 8, 1), (1, 1, 3, 3), p=(1, 1), g=1) == "im2col"   # one channel: dense
    # the Winograd shapes and the stride-1 tap kernel's keep the NCHW kernels
    assert kind((1, 8, 8, 16), (16, 16, 3, 3), p=(1, 1)) == ""
    assert kind((1, 8, 8, 16), (16, 16, 3, 3), p=(1, 1), s=(2, 2)) == "im2col"
    assert kind((1, 8, 8, 8), (16, 8, 3, 3), p=(1, 1)) == "im2col"
    g = _geom((64, 64), (3, 3), (1, 1), (1, 1), (1, 1), "EXPLICIT", 1)
    taps = _conv_kernels.use_taps(g, 64, 8, np.float32)
    assert (kind((1, 64, 64, 64), (8, 64, 3, 3), p=(1, 1)) == "") == taps
    assert _conv_last.channels_last_kind(4, (4, 1, 3, 3), g._replace(groups=4), np.int32) == ""
    assert kind((1, 1, 1, 4), (6, 4, 1, 1)) == "pointwise"             # a one-pixel map
    assert kind((1, 8, 8, 4), (4, 1, 3)) == ""                         # not a 2-D filter
    assert kind((1, -1, 8, 4), (6, 4, 1, 1)) == kind((1, 8, 8, 4, 1), (6, 4, 1, 1)) == ""


def test_float16_keeps_the_nchw_kernels():
    # no channels-last kernel for float16: NHWC gives the NCHW kernel's bits, transposed
    rng = np.random.default_rng(5)
    for w_shape, groups in (((6, 1, 3, 3), 6), ((4, 6, 1, 1), 1)):
        x = rng.standard_normal((2, 6, 9, 9)).astype(np.float16)
        w = rng.standard_normal(w_shape).astype(np.float16)
        p = (w_shape[2] // 2,) * 4
        want = conv2d_forward(x, w, (1, 1), p, "EXPLICIT", groups, (1, 1), "NCHW")
        got = conv2d_forward(np.ascontiguousarray(x.transpose(0, 2, 3, 1)), w, (1, 1), p,
                             "EXPLICIT", groups, (1, 1), "NHWC")
        np.testing.assert_array_equal(got, want.transpose(0, 2, 3, 1))
    assert channels_last_filter_shape((4, 4, 1, 1), np.float32, (1, 1, 1, 4), (1, 1), (0, 0),
                                      "EXPLICIT", 1, (1, 1)) == (4, 4)
    with pytest.raises(ValueError, match="no channels-last kernel runs for the filter float16"):
        channels_last_filter_shape((4, 4, 1, 1), np.float16, (1, 8, 8, 4), (1, 1), (0, 0),
                                   "EXPLICIT", 1, (1, 1))


def test_a_laid_filter_for_no_kernel_is_refused():
    with pytest.raises(ValueError, match=r"no channels-last kernel runs for the filter "
                                         r"float32 \[4, 2, 3, 3\] \(groups 2\)"):
        channels_last_filter(np.ones((4, 2, 3, 3), np.float32), (1, 8, 8, 4), (1, 1), (1, 1),
                             "EXPLICIT", 2, (1, 1))
    with pytest.raises(ValueError, match=r"on an NHWC input \[1, -1, 8, 4\]"):
        channels_last_filter_shape((4, 4, 1, 1), np.float32, (1, -1, 8, 4), (1, 1), (0, 0),
                                   "EXPLICIT", 1, (1, 1))
    with pytest.raises(ValueError, match=r"no channels-last kernel named 'winograd'"):
        _conv_last.conv_last_fwd(np.ones((1, 4, 4, 2), np.float32),
                                 np.ones((2, 2, 3, 3), np.float32), None, "winograd")


def test_laid_filter_layouts():
    w = np.arange(2 * 3 * 3, dtype=np.float32).reshape(2, 1, 3, 3)
    g1 = _geom((5, 4), (3, 3), (1, 1), (1, 1), (1, 1), "EXPLICIT", 2)
    t = channels_last_filter(w, (1, 5, 4, 2), (1, 1), (1, 1), "EXPLICIT", 2, (1, 1))
    assert t.shape == (3, 3, g1.ow * 2)
    # tap (i, j) of output column x and channel c at q = x*C + c: the filter tiled along the row
    for i in range(3):
        for j in range(3):
            np.testing.assert_array_equal(t[i, j].reshape(g1.ow, 2), np.tile(w[:, 0, i, j],
                                                                              (g1.ow, 1)))
    t2 = channels_last_filter(w, (1, 5, 4, 2), (2, 2), (1, 1), "EXPLICIT", 2, (1, 1))
    np.testing.assert_array_equal(t2, w[:, 0].transpose(1, 2, 0))
    w1 = np.arange(12, dtype=np.float32).reshape(3, 4, 1, 1)
    np.testing.assert_array_equal(
        channels_last_filter(w1, (1, 5, 4, 4), (1, 1), (0, 0), "EXPLICIT", 1, (1, 1)),
        w1[:, :, 0, 0].T)
    assert channels_last_filter(w1, (1, 5, 4, 4), (1, 1), (0, 0), "EXPLICIT", 1,
                                (1, 1)).flags.c_contiguous


def test_conv2d_fusion_checks_its_laid_filter():
    fusion = get_op_def("conv2d_fusion")
    x = VarSpec((-1, 8, 8, 4), VarType.FP32)
    w = VarSpec((4, 1, 3, 3), VarType.FP32)
    attrs = dict(paddings=[1, 1], groups=4, data_format="NHWC")
    ok = VarSpec((3, 3, 32), VarType.FP32)
    assert fusion.run_infer([x, w, None, None, None, None, ok], attrs)["Output"].shape == \
        (-1, 8, 8, 4)
    with pytest.raises(ValueError, match=r"FilterLast must be the filter laid out"):
        fusion.run_infer([VarSpec(x.shape, VarType.FP16), VarSpec(w.shape, VarType.FP16), None,
                          None, None, None, VarSpec((3, 3, 32), VarType.FP16)], attrs)
    for bad, attrs_ in ((VarSpec((3, 3, 4), VarType.FP32), attrs),
                        (VarSpec((3, 3, 32), VarType.FP64), attrs),
                        (ok, dict(attrs, data_format="NCHW"))):
        with pytest.raises(ValueError, match=r"FilterLast must be the filter laid out"):
            fusion.run_infer([x, w, None, None, None, None, bad], attrs_)


def test_channels_last_filter_op():
    op = get_op_def("channels_last_filter")
    w = np.random.default_rng(4).standard_normal((6, 1, 3, 3)).astype(np.float32)
    attrs = dict(input_shape=[-1, 10, 10, 6], strides=[2, 2], paddings=[1, 1], groups=6)
    spec = op.run_infer([VarSpec(w.shape, VarType.FP32)], attrs)["Out"]
    out = op.forward(w, **attrs)["Out"]
    assert tuple(spec.shape) == out.shape == (3, 3, 6) and spec.dtype == VarType.FP32
    for bad in (VarSpec((6, 2, 3, 3), VarType.FP32), VarSpec(w.shape, VarType.FP16)):
        with pytest.raises(ValueError, match="no channels-last kernel"):
            op.run_infer([bad], attrs)


@pytest.mark.parametrize("F", [8, 96])          # a bias tiled in runs of pixels, and not
@pytest.mark.parametrize("bias, act", [(True, "relu6"), (False, "identity"), (True, "identity")])
def test_conv2d_fusion_channels_last_epilogue(F, bias, act):
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 33, 31, 8)).astype(np.float32)
    w = rng.standard_normal((F, 8, 1, 1)).astype(np.float32)
    b = rng.standard_normal(F).astype(np.float32) if bias else None
    r = rng.standard_normal((2, 33, 31, F)).astype(np.float32)
    want = conv2d_forward(x, w, (1, 1), (0, 0), "EXPLICIT", 1, (1, 1), "NHWC")
    if b is not None:
        want = want + b
    want = want + r
    if act == "relu6":
        want = np.clip(want, np.float32(0), np.float32(6))
    got = get_op_def("conv2d_fusion").forward(x, w, b, None, None, r, data_format="NHWC",
                                              activation=act)["Output"]
    np.testing.assert_array_equal(got, want)


def test_conv2d_fusion_float16_nhwc_runs_the_nchw_kernels_epilogue():
    # no channels-last kernel for float16: the NCHW epilogue, the residual seen as NCHW
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 6, 9, 9)).astype(np.float16)
    w = rng.standard_normal((6, 1, 3, 3)).astype(np.float16)
    b = rng.standard_normal(6).astype(np.float16)
    r = rng.standard_normal((2, 6, 9, 9)).astype(np.float16)
    fusion = get_op_def("conv2d_fusion")
    kw = dict(paddings=[1, 1], groups=6, activation="relu")
    want = fusion.forward(x, w, b, None, None, r, **kw)["Output"]
    got = fusion.forward(np.ascontiguousarray(x.transpose(0, 2, 3, 1)), w, b, None, None,
                         np.ascontiguousarray(r.transpose(0, 2, 3, 1)), data_format="NHWC",
                         **kw)["Output"]
    np.testing.assert_array_equal(got, want.transpose(0, 2, 3, 1))


class _Poisoned:
    """NumPy, but ``empty`` hands out arrays full of NaN: a kernel that reads memory it never
    wrote (a padding column of a canvas) makes NaNs instead of passing by luck on zero pages."""

    def __getattr__(self, name):
        return getattr(np, name)

    @staticmethod
    def empty(shape, dtype=float):
        return np.full(shape, np.nan, dtype)


@pytest.mark.parametrize("case", [c for c in CASES if c[1] == "depthwise"])
def test_depthwise_reads_no_unwritten_memory(case, monkeypatch):
    monkeypatch.setattr(_conv_last, "np", _Poisoned())
    x, w, s, p, d, groups, kind = _case(case, np.float32, np.random.default_rng(1))
    got = conv2d_forward(x, w, s, p, "EXPLICIT", groups, d, "NHWC")
    want = _reference(x, w, s, p, d, groups)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


# (N, H, W, C, kernel, strides, paddings (t, b, l, r), dilations): small maps whose blocks
# hold whole images (``_depthwise_images``), some with windows on more padding than image
IMAGES = [
    ((6, 2, 24, 16), 5, (1, 1), (2, 2, 2, 2), (1, 1)),      # an SE net's 5x5 on 2 rows
    ((5, 3, 10, 8), 5, (1, 1), (2, 2, 2, 2), (1, 1)),
    ((4, 5, 6, 8), 3, (2, 2), (1, 1, 1, 1), (1, 1)),        # strided both ways
    ((3, 6, 6, 8), 3, (1, 1), (2, 2, 2, 2), (2, 2)),        # dilated
    ((2, 3, 5, 8), 5, (2, 1), (3, 1, 2, 2), (1, 1)),        # uneven padding
    ((3, 5, 5, 8), 3, (1, 1), (4, 4, 1, 1), (1, 1)),        # rows that read padding only
    ((4, 1, 8, 8), 3, (1, 1), (1, 1, 1, 1), (1, 1)),        # one row
    ((5, 4, 9, 8), 3, (1, 1), (0, 0, 1, 1), (1, 1)),        # no row padding: one run
    ((3, 5, 5, 8), 3, (1, 2), (4, 4, 1, 1), (1, 1)),        # ... and strided along the row
    ((3, 9, 9, 8), 3, (3, 3), (1, 1, 1, 1), (1, 1)),        # the last image row never read
]


def _same_bits_and_values(runs, want, x, w, s, p, d):
    """Each thread count's output (``runs``) has ``want``'s bits, and ``want`` float64's
    values."""
    for t, got in runs.items():
        np.testing.assert_array_equal(got, want, err_msg=f"{t} thread(s)")
    np.testing.assert_allclose(want, _reference(x, w, s, p, d, x.shape[3]), rtol=1e-5,
                               atol=1e-5)


@pytest.mark.parametrize("shape, k, s, p, d", IMAGES)
@pytest.mark.parametrize("skip_min", [0, 1 << 15, 1 << 40])
@pytest.mark.parametrize("block", [None, 2])
def test_depthwise_images_give_the_per_image_bits(shape, k, s, p, d, skip_min, block,
                                                  monkeypatch):
    """Blocks of whole images (all of them, or two at a time: a part's last block may hold
    fewer), with and without the padding rows' taps skipped, against the image-by-image path
    (the same products summed in the same order) and float64."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((shape[3], 1, k, k)).astype(np.float32)
    monkeypatch.setattr(_conv_last, "_SKIP_MIN", skip_min)
    if block is not None:
        ow = (shape[2] + p[2] + p[3] - d[1] * (k - 1) - 1) // s[1] + 1
        oh = (shape[1] + p[0] + p[1] - d[0] * (k - 1) - 1) // s[0] + 1
        monkeypatch.setattr(_conv_last, "_BLOCK", block * oh * ow * shape[3])
    runs = {}
    for t in (1, 2):
        with threads.using(t):
            runs[t] = conv2d_forward(x, w, s, p, "EXPLICIT", shape[3], d, "NHWC")
    monkeypatch.setattr(_conv_last, "_IMAGES_MIN", 1 << 40)
    alone = conv2d_forward(x, w, s, p, "EXPLICIT", shape[3], d, "NHWC")
    _same_bits_and_values(runs, alone, x, w, s, p, d)


@pytest.mark.parametrize("shape, k, s, p, d", IMAGES)
@pytest.mark.parametrize("block", [None, 1, 2])
def test_depthwise_rows_skip_padding_rows_with_the_same_bits(shape, k, s, p, d, block,
                                                              monkeypatch):
    """One image goes by blocks of output rows (all of them, one or two at a time), each
    block's taps leaving out the filter rows that meet only padding: the bits of taking every
    tap, on one thread or two, and float64's values."""
    rng = np.random.default_rng(6)
    x = rng.standard_normal((1,) + shape[1:]).astype(np.float32)
    w = rng.standard_normal((shape[3], 1, k, k)).astype(np.float32)
    if block is not None:
        ow = (shape[2] + p[2] + p[3] - d[1] * (k - 1) - 1) // s[1] + 1
        monkeypatch.setattr(_conv_last, "_BLOCK", block * ow * shape[3])
    calls = []
    real = _conv_last._image_taps
    monkeypatch.setattr(_conv_last, "_image_taps",
                        lambda *a: calls.append(a[-1]) or real(*a))
    monkeypatch.setattr(_conv_last, "_SKIP_MIN", 0)
    runs = {}
    for t in (1, 2):
        with threads.using(t):
            runs[t] = conv2d_forward(x, w, s, p, "EXPLICIT", shape[3], d, "NHWC")
    skipped = any(i1 - i0 < k for r in calls for _, _, i0, i1 in r)
    monkeypatch.setattr(_conv_last, "_SKIP_MIN", 1 << 40)
    whole = conv2d_forward(x, w, s, p, "EXPLICIT", shape[3], d, "NHWC")
    _same_bits_and_values(runs, whole, x, w, s, p, d)
    assert skipped == (p[0] + p[1] > 0)         # (every case with row padding reads it)


@pytest.mark.parametrize("N", [1, 2])
def test_depthwise_strips_give_every_block_to_the_epilogue(N, monkeypatch):
    """Blocks of one output row each (one image, or two whose maps are too big for whole
    images per block): the epilogue sees every block of rows once, where its rows are."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((N, 5, 6, 8)).astype(np.float32)
    w = rng.standard_normal((8, 1, 3, 3)).astype(np.float32)
    bias = rng.standard_normal(8).astype(np.float32)
    monkeypatch.setattr(_conv_last, "_BLOCK", 6 * 8)           # one output row a block
    seen = []

    def epilogue(block, where):
        seen.append(where[0])
        block += bias
    y = conv2d_forward(x, w, (1, 1), (1, 1, 1, 1), "EXPLICIT", 8, (1, 1), "NHWC",
                       epilogue=epilogue)
    plain = conv2d_forward(x, w, (1, 1), (1, 1, 1, 1), "EXPLICIT", 8, (1, 1), "NHWC")
    np.testing.assert_array_equal(y, plain + bias)
    assert sorted((r.start, r.stop) for r in seen) == [(6 * i, 6 * i + 6) for i in range(5 * N)]


def test_depthwise_strips_skip_padding_where_they_run_alone(monkeypatch):
    """One image's strips take the row runs where the parts run on this thread alone -- a
    layer the size of the direction classifier's 5x5 ones, on any thread count; a larger one
    on one thread -- and one einsum per strip where two threads share the parts (each
    further call's end would wait for the GIL)."""
    calls = []
    real = _conv_last._image_taps
    monkeypatch.setattr(_conv_last, "_image_taps", lambda *a: calls.append(a[-1]) or real(*a))
    rng = np.random.default_rng(8)

    def run(shape, t):
        calls.clear()
        x = rng.standard_normal(shape).astype(np.float32)
        w = rng.standard_normal((shape[3], 1, 5, 5)).astype(np.float32)
        with threads.using(t):
            conv2d_forward(x, w, (1, 1), (2, 2, 2, 2), "EXPLICIT", shape[3], (1, 1), "NHWC")
        return [r for r in calls]
    for t in (1, 2):
        runs = run((1, 2, 96, 200), t)           # 38400 outputs: one part, on this thread
        assert runs and all(r is not None for r in runs)
        assert any(i1 - i0 < 5 for r in runs for _, _, i0, i1 in r)
    assert all(r is not None for r in run((1, 40, 40, 96), 1))
    runs = run((1, 40, 40, 96), 2)               # 153600 outputs: two parts on two threads
    assert runs and all(r is None for r in runs)


def test_depthwise_images_are_taken_and_skip_padding_rows(monkeypatch):
    """The path runs for batches of small maps, not for one image; its runs leave out the
    filter rows that fall on padding, so a non-finite weight there no longer meets it."""
    calls = []
    real = _conv_last._depthwise_images
    monkeypatch.setattr(_conv_last, "_depthwise_images",
                        lambda *a: calls.append(a[-1]) or real(*a))
    rng = np.random.default_rng(5)
    w = rng.standard_normal((16, 1, 5, 5)).astype(np.float32)
    x = rng.standard_normal((6, 2, 24, 16)).astype(np.float32)
    conv2d_forward(x[:1], w, (1, 1), (2, 2, 2, 2), "EXPLICIT", 16, (1, 1), "NHWC")
    assert calls == []
    g = _geom((2, 24), (5, 5), (1, 1), (2, 2, 2, 2), (1, 1), "EXPLICIT", 16)
    # row 0 reads image rows through filter rows 2:4, row 1 through 1:3
    assert _conv_last._image_runs(g, 1 << 20) == ((0, 1, 2, 4), (1, 2, 1, 3))
    assert _conv_last._image_runs(g, 1) == ((0, 2, 0, 5),)     # too little skipped: one run
    # a block of rows: counted from its first row, and the threshold read at each call
    assert _conv_last._image_runs(g, 1 << 20, 1, 2) == ((0, 1, 1, 3),)
    monkeypatch.setattr(_conv_last, "_SKIP_MIN", 1 << 40)
    assert _conv_last._image_runs(g, 1 << 20) == ((0, 2, 0, 5),)
    monkeypatch.setattr(_conv_last, "_SKIP_MIN", 1 << 15)
    w[:, 0, 0, :] = np.inf                  # filter row 0 only ever meets padding here
    y = conv2d_forward(x, w, (1, 1), (2, 2, 2, 2), "EXPLICIT", 16, (1, 1), "NHWC")
    assert len(calls) == 1 and np.isfinite(y).all()
    monkeypatch.setattr(_conv_last, "_SKIP_MIN", 0)    # (one image this small: one run)
    one = conv2d_forward(x[:1], w, (1, 1), (2, 2, 2, 2), "EXPLICIT", 16, (1, 1), "NHWC")
    np.testing.assert_array_equal(one, y[:1])         # one image: by rows, the same runs
    w[:, 0, 0, :] = 0
    np.testing.assert_allclose(y, _reference(x, w, (1, 1), (2, 2, 2, 2), (1, 1), 16),
                               rtol=1e-5, atol=1e-5)
