"""fluidlite/ops/_conv_kernels.py: the depthwise kernels (rows-first and rows-last layouts,
channel multipliers, strides / dilations / asymmetric paddings, NHWC, the transposed conv) and
the 1x1 GEMM-per-image path, each against the direct reference of test_conv.py with float64
numeric gradients; results independent of the thread count and of the block size."""
import numpy as np
import pytest

from fluidlite.core import threads as TH
from fluidlite.core.registry import get_op_def
from fluidlite.ops import _conv_kernels as K
from fluidlite.ops import conv
from fluidlite.testing import OpTest
from tests.ops.test_conv import ref_conv, ref_conv_transpose

# (C, multiplier, H, W, kernel, strides, paddings [t, b, l, r], dilations)
DEPTHWISE = [
    (3, 1, 6, 7, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),
    (2, 2, 7, 6, (3, 2), (2, 1), (1, 2, 0, 1), (1, 2)),
    (4, 3, 8, 8, (2, 3), (3, 2), (0, 0, 2, 1), (2, 1)),
    (2, 1, 5, 9, (1, 1), (2, 2), (0, 0, 0, 0), (1, 1)),
]


@pytest.fixture(autouse=True)
def _no_pool_left():
    """Tests that switch the threads on stop them again: no test after these sees them."""
    yield
    TH.shutdown()



@pytest.fixture(params=["band", "band_tiles", "rows_last", "rows_first",
                        "rows_first_small_blocks"])
def layout(request, monkeypatch):
    """The depthwise kernels' layouts: banded GEMMs (one tile per output row, or tiles of 2
    pixels), rows last, rows first; the last forces many partial row blocks."""
    if request.param == "band_tiles":
        monkeypatch.setattr(K, "_BAND_TILE", 2)
    if not request.param.startswith("band"):
        monkeypatch.setattr(K, "_BAND_MAX", -1)
    if request.param not in ("rows_last", "band", "band_tiles"):
        monkeypatch.setattr(K, "_ROWS_LAST_MAX", 0)
    if request.param == "rows_first_small_blocks":
        monkeypatch.setattr(K, "_BLOCK", 7)
    return request.param


class TestDepthwiseKernels(OpTest):
    op_type = "depthwise_conv2d"

    @pytest.mark.parametrize("case", DEPTHWISE)
    def test_output_and_gradients(self, case, layout):
        C, m, H, W, k, s, p, d = case
        x, w = self.rand(2, C, H, W), self.rand(C * m, 1, *k, seed=1)
        self.inputs = {"Input": x, "Filter": w}
        self.attrs = {"strides": list(s), "paddings": list(p), "dilations": list(d),
                      "groups": C}
        self.outputs = {"Output": ref_conv(x, w, s, p, d, C)}
        self.check_output()
        self.check_grad(["Input", "Filter"], "Output")

    def test_conv2d_with_groups_equal_channels_nhwc(self, layout):
        self.op_type = "conv2d"
        x, w = self.rand(2, 5, 6, 3), self.rand(6, 1, 3, 3, seed=1)
        self.inputs = {"Input": x, "Filter": w}
        self.attrs = {"paddings": [1, 0], "groups": 3, "data_format": "NHWC"}
        ref = ref_conv(x.transpose(0, 3, 1, 2), w, pads=(1, 1, 0, 0), groups=3)
        self.outputs = {"Output": ref.transpose(0, 2, 3, 1)}
        self.check_output()
        self.check_grad(["Input", "Filter"], "Output")

    def test_transposed_depthwise(self, layout):
        self.op_type = "depthwise_conv2d_transpose"
        x, w = self.rand(2, 3, 4, 3), self.rand(3, 1, 3, 3, seed=1)
        self.inputs = {"Input": x, "Filter": w}
        self.attrs = {"strides": [2, 1], "paddings": [1, 1], "groups": 3}
        self.outputs = {"Output": ref_conv_transpose(x, w, (2, 1), (1, 1, 1, 1), groups=3)}
        self.check_output()
        self.check_grad(["Input", "Filter"], "Output")


class TestPointwiseKernels(OpTest):
    op_type = "conv2d"

    @pytest.mark.parametrize("strides", [(1, 1), (2, 2), (2, 1), (3, 2)])
    def test_output_and_gradients(self, strides, monkeypatch):
        monkeypatch.setattr(K, "_POINTWISE_MIN", 1)
        x, w = self.rand(3, 4, 5, 7), self.rand(2, 4, 1, 1, seed=1)
        g = conv._geom((5, 7), (1, 1), strides, (0, 0), (1, 1), "EXPLICIT", 1)
        assert K.use_pointwise(g, w.shape)
        self.inputs = {"Input": x, "Filter": w}
        self.attrs = {"strides": list(strides)}
        self.outputs = {"Output": ref_conv(x, w, strides)}
        self.check_output()
        self.check_grad(["Input", "Filter"], "Output")

    def test_default_threshold_on_a_16x16_map(self):
        x, w = self.rand(2, 3, 16, 16), self.rand(4, 3, 1, 1, seed=1)
        g = conv._geom((16, 16), (1, 1), (1, 1), (0, 0), (1, 1), "EXPLICIT", 1)
        assert K.use_pointwise(g, w.shape)
        self.inputs = {"Input": x, "Filter": w}
        self.attrs = {}
        self.outputs = {"Output": ref_conv(x, w)}
        self.check_output()
        self.check_grad(["Input", "Filter"], "Output")

    def test_padded_or_grouped_1x1_is_not_pointwise(self):
        g = conv._geom((16, 16), (1, 1), (1, 1), (1, 1), (1, 1), "EXPLICIT", 1)
        assert not K.use_pointwise(g, (4, 3, 1, 1))
        g = conv._geom((16, 16), (1, 1), (1, 1), (0, 0), (1, 1), "EXPLICIT", 2)
        assert not K.use_pointwise(g, (4, 2, 1, 1))


@pytest.mark.parametrize("hw", [(7, 7), (20, 20)])      # rows last / rows first
def test_results_do_not_depend_on_threads(hw, monkeypatch):
    monkeypatch.setattr(K, "_COPY_MIN", 0)      # two parts on two threads, however small
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 6) + hw).astype(np.float32)
    w = rng.standard_normal((12, 1, 3, 3)).astype(np.float32)
    dy = rng.standard_normal((4, 12) + hw).astype(np.float32)
    attrs = {"paddings": [1, 1], "groups": 6}
    runs = []
    for threads in (1, 2, 2):
        with TH.using(threads):
            y = get_op_def("depthwise_conv2d").forward(x, w, **attrs)["Output"]
            grads = get_op_def("depthwise_conv2d_grad").forward(x, w, dy, **attrs)
        runs.append([y, grads["Input@GRAD"], grads["Filter@GRAD"]])
    for run in runs[1:]:
        for a, b in zip(runs[0], run):
            assert a.dtype == np.float32 and np.array_equal(a, b)


def test_tap_kernels_cut_their_rows_only_when_the_calls_are_long(monkeypatch):
    """The rows-last and phase-plane kernels run their rows as two parts on two threads from
    ``_COPY_MIN`` elements of their largest array on, and as one call below it (their NumPy
    calls would be too short to pay for the GIL's hand-offs); the same bits either way."""
    calls = []
    real = TH.parallel_ranges
    monkeypatch.setattr(TH, "parallel_ranges",
                        lambda fn, n, parts=2: (calls.append((n, parts)), real(fn, n, parts)))
    rng = np.random.default_rng(8)
    for hw, kernel in (((7, 7), K._depthwise_fwd_last), ((20, 20), K._depthwise_fwd_flat)):
        x = rng.standard_normal((2, 6) + hw).astype(np.float32)
        w = rng.standard_normal((6, 1, 3, 3)).astype(np.float32)
        g = conv._geom(hw, (3, 3), (1, 1), [1, 1], (1, 1), "EXPLICIT", 6)
        y_size = 2 * 6 * g.oh * g.ow
        for n_threads, copy_min, parts in ((2, y_size, [(12, 2)]), (2, y_size + 1, []),
                                           (1, y_size + 1, [])):
            monkeypatch.setattr(K, "_COPY_MIN", copy_min)
            calls.clear()
            with TH.using(n_threads):
                y = kernel(x, w, g)
            assert calls == parts, (hw, n_threads, copy_min)
            np.testing.assert_array_equal(y, K._depthwise_fwd_last(x, w, g))


def test_depthwise_float32_matches_float64():
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((2, 4, 18, 18)), rng.standard_normal((8, 1, 3, 3))
    attrs = {"strides": [2, 2], "paddings": [1, 1], "groups": 4}
    op = get_op_def("depthwise_conv2d")
    y64 = op.forward(x, w, **attrs)["Output"]
    y32 = op.forward(x.astype(np.float32), w.astype(np.float32), **attrs)["Output"]
    assert y32.dtype == np.float32
    np.testing.assert_allclose(y32, y64, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("wide", [False, True])          # batch-last / batch-second columns
def test_threaded_im2col_copies_and_col2im_are_exact(wide, monkeypatch):
    monkeypatch.setattr(K, "_COPY_MIN", 1)               # every copy split over the parts
    rng = np.random.default_rng(5)
    hw = (9, 18) if wide else (6, 7)
    x, w = rng.standard_normal((3, 4) + hw), rng.standard_normal((5, 4, 3, 3))
    attrs = {"strides": [1, 2], "paddings": [1, 0, 2, 1], "dilations": [2, 1]}
    y = get_op_def("conv2d").forward(x, w, **attrs)["Output"]
    ref = ref_conv(x, w, (1, 2), (1, 0, 2, 1), (2, 1))
    # float64 sums in another order: within 1e-12 of each element or 1e-13 of the largest (an
    # output of 3.7e-3 was 7e-15 off on an Intel Xeon with NumPy 1.23.5's OpenBLAS)
    np.testing.assert_allclose(y, ref, rtol=1e-12, atol=1e-13 * np.abs(ref).max())
    dy = rng.standard_normal(y.shape)
    runs = []
    for threads in (1, 2):
        with TH.using(threads):
            g = get_op_def("conv2d_grad").forward(x, w, dy, **attrs)
            runs.append((get_op_def("conv2d").forward(x, w, **attrs)["Output"],
                         g["Input@GRAD"], g["Filter@GRAD"]))
    for a, b in zip(*runs):
        assert np.array_equal(a, b)
    np.testing.assert_array_equal(runs[0][0], y)
    check = OpTest()
    check.op_type = "conv2d"
    check.inputs, check.attrs = {"Input": x, "Filter": w}, attrs
    check.outputs = {"Output": y}
    check.check_grad(["Input", "Filter"], "Output")


# (N, C, F, H, W, kernel, paddings [t, b, l, r], dilations)
TAPS = [
    (2, 3, 4, 7, 9, (3, 3), (1, 1, 1, 1), (1, 1)),
    (1, 2, 3, 8, 6, (2, 3), (0, 1, 2, 0), (1, 1)),
    (2, 4, 2, 9, 8, (3, 2), (2, 0, 1, 3), (2, 3)),
    (1, 3, 5, 10, 10, (5, 5), (2, 2, 2, 2), (1, 1)),
    (1, 2, 2, 5, 12, (3, 3), (0, 0, 0, 0), (1, 2)),
]


@pytest.fixture
def taps_everywhere(monkeypatch):
    """The taps kernel on every stride-1 map, in strips of 3 output rows (a partial last
    strip in most cases)."""
    monkeypatch.setattr(K, "_TAPS_MIN_PIXELS", 1)
    monkeypatch.setattr(K, "_TAPS_MIN_CHANNELS", 1)
    monkeypatch.setattr(K, "_TAPS_ROWS", 3)


class TestTapsKernel(OpTest):
    op_type = "conv2d"

    @pytest.mark.parametrize("case", TAPS)
    def test_output_and_gradients(self, case, taps_everywhere):
        N, C, F, H, W, k, p, d = case
        g = conv._geom((H, W), k, (1, 1), p, d, "EXPLICIT", 1)
        assert K.use_taps(g, C, F, np.float64)
        x, w = self.rand(N, C, H, W), self.rand(F, C, *k, seed=1)
        self.inputs = {"Input": x, "Filter": w}
        self.attrs = {"paddings": list(p), "dilations": list(d)}
        self.outputs = {"Output": ref_conv(x, w, (1, 1), p, d)}
        self.check_output()
        self.check_grad(["Input", "Filter"], "Output")


def test_taps_run_from_a_128x128_map_of_16_channels_or_56x56_with_few_channels():
    rng = np.random.default_rng(6)

    def geom(h, w, k=(3, 3), s=(1, 1), groups=1):
        return conv._geom((h, w), k, s, (1, 1), (1, 1), "EXPLICIT", groups)
    assert K.use_taps(geom(128, 128), 16, 64, np.float32)
    assert K.use_taps(geom(64, 256), 64, 64, np.float64)
    assert not K.use_taps(geom(127, 129), 64, 64, np.float32)       # 16383 pixels
    assert K.use_taps(geom(127, 129), 64, 32, np.float32)            # few output channels
    assert K.use_taps(geom(56, 56), 32, 128, np.float32)
    assert not K.use_taps(geom(56, 56), 33, 33, np.float32)
    assert not K.use_taps(geom(55, 57), 32, 32, np.float32)          # 3135 pixels
    assert not K.use_taps(geom(128, 128), 15, 64, np.float32)
    assert not K.use_taps(geom(128, 128), 16, 64, np.float16)
    assert not K.use_taps(geom(256, 256, s=(2, 1)), 16, 64, np.float32)
    assert not K.use_taps(geom(128, 128, groups=2), 16, 64, np.float32)
    assert not K.use_taps(conv._geom((128, 128), (1, 1), (1, 1), (1, 1), (1, 1), "EXPLICIT",
                                     1), 16, 64, np.float32)     # one tap (padded 1x1)
    assert K.use_taps(conv._geom((128, 128), (1, 2), (1, 1), (0, 0), (1, 1), "EXPLICIT", 1),
                      16, 64, np.float32)
    wider = geom(128, 128)._replace(pr=2)       # a canvas past the filter's reach
    assert not K.use_taps(wider, 16, 64, np.float32)
    # the op at the default thresholds, float32 against the float64 reference
    x = rng.standard_normal((1, 16, 128, 128)).astype(np.float32)
    w = rng.standard_normal((8, 16, 3, 3)).astype(np.float32)
    y = get_op_def("conv2d").forward(x, w, paddings=[1, 1])["Output"]
    ref = ref_conv(x.astype(np.float64), w.astype(np.float64), (1, 1), (1, 1, 1, 1))
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())


def test_taps_do_not_depend_on_the_threads(taps_everywhere):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 5, 11, 13)).astype(np.float32)
    w = rng.standard_normal((6, 5, 3, 3)).astype(np.float32)
    runs = []
    for threads in (2, 3, 2):
        with TH.using(threads):
            runs.append(get_op_def("conv2d").forward(x, w, paddings=[1, 1])["Output"])
    for y in runs[1:]:
        assert np.array_equal(y, runs[0])


def test_taps_epilogue_adds_bias_residual_and_activation_per_strip(taps_everywhere):
    from fluidlite.inference.ops import Conv2DFusion
    rng = np.random.default_rng(8)
    x = rng.standard_normal((2, 3, 7, 8))
    w = rng.standard_normal((4, 3, 3, 3))
    b = rng.standard_normal(4)
    res = rng.standard_normal((2, 4, 7, 8))
    out = Conv2DFusion().forward(x, w, b, ResidualData=res, paddings=[1, 1],
                                 activation="relu")["Output"]
    want = np.maximum(ref_conv(x, w, (1, 1), (1, 1, 1, 1)) + b[:, None, None] + res, 0)
    np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-12)


def test_taps_epilogue_sees_each_output_element_once(taps_everywhere):
    # the strips' blocks must tile the output: with two threads a block reaching into a
    # later strip would apply the epilogue to elements another thread already finished
    rng = np.random.default_rng(9)
    x, w = rng.standard_normal((2, 3, 10, 7)), rng.standard_normal((4, 3, 3, 3))
    seen = np.zeros((2, 4, 10 * 7), np.int64)
    shapes = []

    def count(block, where):
        seen[where] += 1
        shapes.append(block.shape)
    y = conv.conv2d_forward(x, w, [1, 1], [1, 1], "EXPLICIT", 1, [1, 1], "NCHW",
                            epilogue=count)
    assert (seen == 1).all()
    assert sorted(shapes) == [(4, 7)] * 2 + [(4, 21)] * 6      # 3 + 3 + 3 + 1 rows, 2 images
    np.testing.assert_allclose(y, ref_conv(x, w, (1, 1), (1, 1, 1, 1)), rtol=1e-12, atol=1e-12)


def test_geometry_is_memoised_and_the_same_for_every_spelling_of_its_arguments():
    # lists, tuples and NumPy ints name one geometry (one cache entry, plain ints in it);
    # the geometry of padding "SAME" and a 2-value padding are worked out as before
    g = conv._geom((14, 14), (3, 3), [2, 2], [1, 1], [1, 1], "EXPLICIT", 8)
    again = conv._geom(np.array([14, 14]), [np.int64(3), 3], (2, 2), (1, 1), (1, 1),
                       "EXPLICIT", np.int32(8))
    assert again is g
    assert all(type(v) is int for v in g)
    assert (g.oh, g.ow, g.pt, g.pb, g.pl, g.pr) == (7, 7, 1, 1, 1, 1)
    assert conv._geom((14, 14), (3, 3), [2, 2], [0, 1, 0, 1], [1, 1], "EXPLICIT", 8) \
        == g._replace(pt=0, pl=0, oh=7, ow=7)
    same = conv._geom((15, 15), (3, 3), [2, 2], [0, 0], [1, 1], "SAME", 1)
    assert (same.oh, same.pt, same.pb) == (8, 1, 1)


def test_an_empty_convolution_output_is_refused_every_time():
    for _ in range(2):      # (an error is not memoised as a geometry)
        with pytest.raises(ValueError, match="would be empty"):
            conv._geom((2, 2), (5, 5), [1, 1], [0, 0], [1, 1], "EXPLICIT", 1)


# (N, H, W, kernel, strides, paddings [t, b, l, r], dilations): strided windows read the padded
# input split in phases (``conv._padded``); kernels longer and shorter than their stride, a
# dilated axis next to a strided one, paddings on one side only
IM2COL = [
    (1, 11, 12, (7, 7), (2, 2), (3, 3, 3, 3), (1, 1)),
    (2, 9, 10, (3, 2), (3, 2), (0, 2, 1, 0), (1, 1)),
    (1, 8, 9, (1, 2), (2, 3), (1, 0, 0, 2), (1, 1)),
    (3, 10, 7, (3, 3), (2, 1), (1, 1, 2, 2), (1, 2)),
    (2, 12, 12, (2, 3), (2, 2), (0, 0, 0, 0), (2, 1)),
    (13, 9, 11, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1)),
    (2, 6, 7, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),
    (1, 11, 13, (5, 4), (3, 3), (1, 2, 2, 1), (1, 1)),      # stride 3: phases 0, 1, 2
    (1, 9, 10, (3, 3), (2, 1), (0, 0, 0, 0), (1, 1)),       # no padding, phases on one axis
    (1, 9, 10, (3, 3), (1, 2), (0, 0, 0, 0), (1, 1)),
    (1, 8, 9, (3, 3), (1, 1), (1, 0, 0, 0), (1, 1)),        # one side padded
    (1, 8, 9, (3, 3), (1, 1), (0, 0, 1, 0), (1, 1)),
    (1, 8, 9, (3, 3), (1, 1), (0, 0, 0, 1), (1, 1)),
    (4, 5, 20, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1)),       # more images than output rows
]


@pytest.mark.parametrize("phased", [False, True], ids=["plain", "phases"])
@pytest.mark.parametrize("parts", [False, True], ids=["whole", "parts"])
@pytest.mark.parametrize("case", IM2COL)
def test_im2col_columns_are_the_padded_windows(case, parts, phased, monkeypatch):
    """Every column entry is the padded input at its window's pixel: C[c, i, j, n, y, x] =
    Xp[n, c, sh*y + dh*i, sw*x + dw*j] (in the layout ``_batch_last`` picks), copied whole or
    in parts of the output rows on two threads, from the padded input as it is or split in
    phases (forced on for every undilated strided window)."""
    N, H, W, k, s, p, d = case
    if parts:
        monkeypatch.setattr(K, "_COPY_MIN", 1)
    if phased:
        monkeypatch.setattr(conv, "_PHASE_MIN_WIDTH", 0)
        monkeypatch.setattr(conv, "_PHASE_MIN_TAPS", 0)
    rng = np.random.default_rng(3)
    C = 3
    x = rng.standard_normal((N, C, H, W))
    g = conv._geom((H, W), k, s, list(p), d, "EXPLICIT", 1)
    split = phased and d == (1, 1) and s != (1, 1)
    assert conv._phases(g) == (s if split else (1, 1))
    bl = conv._batch_last(g, N)
    assert bl == (IM2COL.index(case) in (3, 5, 6))      # both column layouts are checked
    xp = np.pad(x, ((0, 0), (0, 0), (g.pt, g.pb), (g.pl, g.pr)))
    want = np.empty((C, g.kh, g.kw, N, g.oh, g.ow))
    for i in range(g.kh):
        for j in range(g.kw):
            want[:, i, j] = xp[:, :, g.dh * i:g.dh * i + g.sh * (g.oh - 1) + 1:g.sh,
                               g.dw * j:g.dw * j + g.sw * (g.ow - 1) + 1:g.sw].transpose(1, 0, 2, 3)
    if bl:
        want = want.transpose(0, 1, 2, 4, 5, 3)
    with TH.using(2 if parts else 1):
        got = conv._im2col(x, g, bl)
    np.testing.assert_array_equal(got, want.reshape(C * g.kh * g.kw, -1))


def test_im2col_splits_in_phases_only_long_rows_of_many_taps():
    """The ResNet stem (7x7 stride 2, 112 output columns) reads phases; 3x3 windows (2.25
    taps a phase class), 5x5 ones on 28 output columns, and dilated ones do not."""
    def phases(hw, k, s, d=(1, 1), pad=None):
        pad = [k // 2] * 2 if pad is None else pad
        return conv._phases(conv._geom((hw, hw), (k, k), (s, s), pad, d, "EXPLICIT", 1))
    assert phases(224, 7, 2) == (2, 2)
    assert phases(224, 5, 2) == (2, 2)
    assert phases(128, 4, 2, pad=[1, 1]) == (2, 2)      # 4 taps a class, 64 columns: the edge
    assert phases(126, 4, 2, pad=[1, 1]) == (1, 1)      # 63 columns
    assert phases(224, 3, 2) == (1, 1)
    assert phases(56, 5, 2) == (1, 1)
    assert phases(224, 7, 2, (2, 2)) == (1, 1)
    assert phases(224, 7, 1) == (1, 1)
    rect = [conv._phases(conv._geom((128, 128), (3, 3), s, [1, 1], (1, 1), "EXPLICIT", 1))
            for s in ((2, 1), (1, 2), (1, 1))]
    assert rect == [(2, 1), (1, 2), (1, 1)]     # 9 taps >= 4 a class of two; 128 / 64 columns
