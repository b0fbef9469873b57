"""fluidlite/ops/_winograd.py: Winograd F(2x2, 3x3) for 3x3 stride-1 convolutions.

Every case first asserts that conv.py dispatches it to the Winograd kernels, then checks the
op's output against the direct convolution of test_conv.py and its gradients against float64
central differences (random upstream gradients), in each layout: one block, blocks of one
image, and batch-innermost blocks."""
import re

import numpy as np
import pytest

from fluidlite.ops import _winograd as WG
from fluidlite.ops import conv
from fluidlite.testing import OpTest
from tests.ops.test_conv import ref_conv, ref_conv_transpose

# (N, C, F, H, W, paddings [t, b, l, r]): odd and even maps, no / asymmetric / wide padding
CASES = [
    (2, 16, 17, 5, 5, (1, 1, 1, 1)),
    (1, 16, 16, 6, 7, (0, 0, 0, 0)),
    (3, 17, 16, 7, 4, (2, 1, 0, 2)),
    (2, 16, 16, 5, 11, (1, 1, 1, 1)),     # 6 tile columns: spare-column planes when batch-second
    (2, 16, 16, 6, 5, (1, 0, 0, 1)),      # top and left paddings of different parity
]


@pytest.fixture(autouse=True)
def _small_maps(monkeypatch):
    """The cases here are small enough to check numerically: let them take Winograd (the
    tile threshold has its own test)."""
    monkeypatch.setattr(WG, "_MIN_TILES", 1)


@pytest.fixture(params=["one_block", "blocks_of_one", "batch_last_blocks"])
def layout(request, monkeypatch):
    """The layouts of ``_blocks``: the whole batch in one channel-major block (maps narrower
    than 24 run batch-innermost), one image per block (batch-second; spare-column planes from
    4 tile columns), and batch-innermost blocks of two."""
    if request.param == "blocks_of_one":
        monkeypatch.setattr(WG, "_BUDGET", 1)
    if request.param == "batch_last_blocks":
        monkeypatch.setattr(WG, "_NARROW", 1 << 10)
        monkeypatch.setattr(WG, "_BUDGET", 2 * 16 * 17 * 4 * 7 * 8)   # two images of <= 8x12
    return request.param


def _geom(H, W, pads, k=3, stride=1, dil=1, groups=1):
    return conv._geom((H, W), (k, k), (stride, stride), list(pads), (dil, dil), "EXPLICIT",
                      groups)


class TestWinogradConv(OpTest):
    op_type = "conv2d"

    @pytest.mark.parametrize("case", CASES)
    def test_output_and_gradients(self, case, layout):
        N, C, F, H, W, p = case
        assert conv._kind(N, C, (F, C, 3, 3), _geom(H, W, p), np.dtype("float64")) == "winograd"
        x, w = self.rand(N, C, H, W), self.rand(F, C, 3, 3, seed=1)
        self.inputs = {"Input": x, "Filter": w}
        self.attrs = {"paddings": list(p)}
        self.outputs = {"Output": ref_conv(x, w, pads=p)}
        self.check_output(atol=1e-12, rtol=1e-12)
        self.check_grad(["Input", "Filter"], "Output")

    def test_same_padding_nhwc(self):
        x, w = self.rand(2, 5, 6, 16), self.rand(16, 16, 3, 3, seed=1)
        self.inputs = {"Input": x, "Filter": w}
        self.attrs = {"padding_algorithm": "SAME", "data_format": "NHWC"}
        ref = ref_conv(x.transpose(0, 3, 1, 2), w, pads=(1, 1, 1, 1))
        self.outputs = {"Output": ref.transpose(0, 2, 3, 1)}
        self.check_output(atol=1e-12, rtol=1e-12)
        self.check_grad(["Input", "Filter"], "Output")


class TestWinogradTranspose(OpTest):
    """conv2d_transpose runs the convolution's input gradient as its forward."""
    op_type = "conv2d_transpose"

    def test_output_and_gradients(self, layout):
        x, w = self.rand(2, 16, 5, 6), self.rand(16, 16, 3, 3, seed=1)
        g = _geom(5, 6, (1, 1, 1, 1))             # the convolution whose adjoint this is
        assert conv._kind(2, 16, w.shape, g, x.dtype) == "winograd"
        self.inputs = {"Input": x, "Filter": w}
        self.attrs = {"paddings": [1, 1]}
        self.outputs = {"Output": ref_conv_transpose(x, w, pads=(1, 1, 1, 1))}
        self.check_output(atol=1e-12, rtol=1e-12)
        self.check_grad(["Input", "Filter"], "Output")


def test_float32_close_to_float64_direct():
    """Winograd's transforms add a few roundings: float32 stays within 1e-5 of the exact
    float64 convolution, forward and both gradients, on a ResNet-like layer."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 32, 12, 12))
    w = rng.standard_normal((32, 32, 3, 3)) * 0.1
    dy = rng.standard_normal((4, 32, 12, 12))
    g = _geom(12, 12, (1, 1, 1, 1))
    f32 = [a.astype(np.float32) for a in (x, w, dy)]
    got = [WG.winograd_fwd(f32[0], f32[1], g), WG.winograd_dx(f32[2], f32[1], g),
           WG.winograd_dw(f32[0], f32[2], g, w.shape)]
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    dw = np.stack([np.stack([np.einsum("nkhw,nchw->kc", dy, xp[:, :, i:i + 12, j:j + 12])
                             for j in range(3)], -1) for i in range(3)], -2)
    want = [ref_conv(x, w, pads=(1, 1, 1, 1)), ref_conv_transpose(dy, w, pads=(1, 1, 1, 1)), dw]
    for a, b in zip(got, want):
        assert a.dtype == np.float32
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-5 * np.abs(b).max())


def test_deterministic():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((5, 16, 9, 9)).astype(np.float32)
    w = rng.standard_normal((16, 16, 3, 3)).astype(np.float32)
    g = _geom(9, 9, (1, 1, 1, 1))
    a, b = WG.winograd_dw(x, x, g, w.shape), WG.winograd_dw(x, x, g, w.shape)
    assert a.tobytes() == b.tobytes()
    assert WG.winograd_fwd(x, w, g).tobytes() == WG.winograd_fwd(x, w, g).tobytes()


@pytest.mark.parametrize("what, C, F, geom, dtype", [
    ("stride 2", 16, 16, dict(stride=2), "float32"),
    ("dilation 2", 16, 16, dict(dil=2), "float32"),
    ("groups 2", 16, 16, dict(groups=2), "float32"),
    ("5x5 kernel", 16, 16, dict(k=5), "float32"),
    ("8 input channels", 8, 16, {}, "float32"),
    ("8 filters", 16, 8, {}, "float32"),
    ("float16", 16, 16, {}, "float16"),
])
def test_not_dispatched(what, C, F, geom, dtype):
    """Shapes Winograd F(2x2, 3x3) does not cover, or where im2col's one GEMM is faster,
    stay on the im2col route."""
    k = geom.get("k", 3)
    g = _geom(9, 9, (1, 1, 1, 1), **geom)
    assert conv._kind(8, C, (F, C // geom.get("groups", 1), k, k), g, np.dtype(dtype)) != \
        "winograd", what


def test_transposed_canvas_larger_than_output_not_dispatched():
    """A transposed convolution asked for a bigger output than the stride-1 conv implies
    has padded rows no output reads: the im2col route handles them."""
    g = conv._Geom(3, 3, 1, 1, 1, 1, 1, 2, 1, 1, 6, 6, 5, 6, 1)     # Hp = 9 != oh + 2
    assert not WG.use_winograd(g, 8, 16, 16, np.dtype("float32"))


def test_tile_threshold(monkeypatch):
    """Too few output tiles over the batch to pay for the filter's transform: im2col."""
    monkeypatch.setattr(WG, "_MIN_TILES", 48)
    deep = _geom(7, 7, (1, 1, 1, 1))                  # ResNet-50's last stage: 49 pixels
    assert not WG.use_winograd(deep, 1, 512, 512, np.dtype("float32"))
    assert WG.use_winograd(deep, 4, 512, 512, np.dtype("float32"))
    assert WG.use_winograd(_geom(14, 14, (1, 1, 1, 1)), 1, 256, 256, np.dtype("float32"))
    # the boundary: 4 * 48 output pixels over the batch
    assert WG.use_winograd(_geom(16, 12, (1, 1, 1, 1)), 1, 16, 16, np.dtype("float32"))
    assert not WG.use_winograd(_geom(1, 191, (1, 1, 1, 1)), 1, 16, 16, np.dtype("float32"))


@pytest.mark.parametrize("N, C, oh, ow, itemsize", [
    (32, 64, 32, 32, 4), (8, 512, 7, 7, 4), (3, 16, 5, 9, 8), (1, 256, 14, 14, 4),
    (16, 64, 56, 56, 4), (512, 16, 8, 8, 4), (4, 16, 16, 16, 4), (32, 256, 8, 8, 4),
    (3, 16, 4, 4, 4), (4, 16, 23, 23, 4), (4, 16, 24, 24, 4), (32, 128, 16, 16, 4)])
def test_blocks_contract(N, C, oh, ow, itemsize):
    """``_blocks`` covers the batch in order with tiles of ceil(oh/2) x ceil(ow/2) in as few
    blocks as keep 16 x C x tiles (plus the spare column) within ``_BUDGET`` (at least one
    image each), rounded up to an even count (two threads share them) but never more than
    the images; the blocks' sizes differ by one image at most; the batch innermost exactly
    for narrow maps of several images, and the spare tile column exactly for batch-second
    plane rows of at least 4 tile columns."""
    g = conv._Geom(3, 3, 1, 1, 1, 1, 1, 1, 1, 1, oh, ow, oh, ow, 1)
    blocks = WG._blocks(g, N, C, itemsize)
    th, tw = -(-oh // 2), -(-ow // 2)
    per_image = 16 * C * th * (tw + 1) * itemsize
    fit = max(1, min(N, WG._BUDGET // per_image))
    fewest = -(-N // fit)
    assert len(blocks) == min(N, max(2, fewest + fewest % 2))
    sizes = [pl.b for _, pl in blocks]
    assert max(sizes) <= fit and max(sizes) - min(sizes) <= 1 and sum(sizes) == N
    assert [lo for lo, _ in blocks] == list(np.cumsum([0] + sizes[:-1]))
    for lo, pl in blocks:
        assert (pl.th, pl.tw) == (th, tw)
        assert pl.bl == (ow < 24 and pl.b > 1)
        assert pl.wide == (not pl.bl and tw >= 4)
        assert (pl.u, pl.nb) == ((pl.b, 1) if pl.bl else (1, pl.b))
        assert pl.wc == (tw + 1 if pl.wide else tw) * pl.u


def test_float32_stays_float32_inside():
    """The transforms and products of a float32 convolution run in float32 (a float64
    temporary would double the memory traffic the kernels are built to save)."""
    rng = np.random.default_rng(6)
    x = rng.standard_normal((1, 16, 9, 9)).astype(np.float32)
    w = rng.standard_normal((16, 16, 3, 3)).astype(np.float32)
    g = _geom(9, 9, (1, 1, 1, 1))
    [(_, pl)] = WG._blocks(g, 1, 16, 4)
    assert WG.filter_tiles(w).dtype == np.float32
    assert WG._gg(np.float32).dtype == np.float32
    assert WG._input_tiles(x, pl, (1, 1)).dtype == np.float32
    assert WG._grad_tiles(x, pl).dtype == np.float32


def test_program_reading_only_the_filter_gradient(monkeypatch):
    """A first layer (the image needs no gradient): conv2d_grad is bound with Filter@GRAD
    alone, and Winograd's filter gradient equals the im2col route's."""
    import fluidlite as fluid
    rng = np.random.default_rng(8)
    img = rng.standard_normal((2, 16, 8, 8)).astype(np.float32)

    def filter_grad():
        main, startup = fluid.Program(), fluid.Program()
        with fluid.program_guard(main, startup):
            x = fluid.data("x", [-1, 16, 8, 8])
            y = fluid.layers.conv2d(x, 16, 3, padding=1, bias_attr=False,
                                    param_attr=fluid.initializer.Constant(0.01))
            loss = fluid.layers.reduce_sum(fluid.layers.square(y))
            (_, grad), = fluid.backward.append_backward(loss)
        exe = fluid.Executor(fluid.CPUPlace())
        scope = fluid.Scope()
        exe.run(startup, scope=scope)
        ops = [op.type for op in main.global_block().ops]
        assert "conv2d_grad" in ops and not main.global_block().has_var("x@GRAD")
        return exe.run(main, feed={"x": img}, fetch_list=[grad], scope=scope)[0]

    got = filter_grad()
    monkeypatch.setattr(WG, "MIN_CHANNELS", 1 << 30)
    want = filter_grad()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


@pytest.mark.parametrize("bad", ["shape", "dtype"])
def test_filter_tiles_of_another_shape_or_dtype_are_refused(bad):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 16, 10, 10)).astype("float32")
    w = rng.standard_normal((16, 16, 3, 3)).astype("float32")
    g = _geom(10, 10, (1, 1, 1, 1))
    u = WG.filter_tiles(w)
    y, tiles = WG.winograd_fwd_tiles(x, w, g, u)
    np.testing.assert_array_equal(y, WG.winograd_fwd(x, w, g))
    assert WG.tiles_fit(tiles, x, g)
    u = u[:, :8] if bad == "shape" else u.astype("float64")
    want = "float32 [16, 8, 16]" if bad == "shape" else "float64 [16, 16, 16]"
    with pytest.raises(ValueError, match=r"filter tiles must be float32 \[16, 16, 16\] .*got "
                       + re.escape(want)):
        WG.winograd_fwd_tiles(x, w, g, u)


class _NanEmpty:
    """numpy, except that ``empty`` fills its arrays with NaN: a kernel that reads an entry
    it never wrote (a spare tile column left unset) shows it in its results."""

    def __getattr__(self, name):
        return getattr(np, name)

    @staticmethod
    def empty(shape, dtype=float, *args, **kwargs):
        return np.full(shape, np.nan, dtype, *args, **kwargs)


@pytest.mark.parametrize("N, H, W", [(1, 12, 14), (3, 9, 10), (2, 6, 30), (4, 7, 5)])
def test_no_unwritten_entry_is_read(monkeypatch, layout, N, H, W):
    """Forward, tiles and both gradients with every scratch array NaN until written: the same
    values as with ``np.empty``'s (finite, here) memory. The spare tile columns of the
    batch-second planes are made from the neighbouring plane's entries or zeroed; their dY is
    zero, so a NaN there would reach dW as 0 * NaN."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal((N, 16, H, W))
    w = rng.standard_normal((16, 16, 3, 3))
    dy = rng.standard_normal((N, 16, H, W))
    g = _geom(H, W, (1, 1, 1, 1))
    y, tiles = WG.winograd_fwd_tiles(x, w, g)
    dx, dw = WG.winograd_grads(dy, g, w, x)
    monkeypatch.setattr(WG, "np", _NanEmpty())
    y2, tiles2 = WG.winograd_fwd_tiles(x, w, g)
    dx2, dw2 = WG.winograd_grads(dy, g, w, x)
    dw3 = WG.winograd_grads(dy, g, x=x, tiles=tiles2)[1]
    for a, b in ((y, y2), (dx, dx2), (dw, dw2), (dw, dw3)):
        assert np.isfinite(b).all()
        np.testing.assert_array_equal(a, b)
    assert all(np.isfinite(t).all() for t in tiles2)
