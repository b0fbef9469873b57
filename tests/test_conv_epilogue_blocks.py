"""``conv.conv2d_forward``'s epilogue (an inference ``conv2d_fusion``'s bias, residual and
activation) runs on the blocks each kernel makes, in the thread that made them: every output
element exactly once, with the bits of applying it to the whole output afterwards -- on every
kernel (depthwise phase planes, banded and rows-last, Winograd, im2col in one block and in
several, 1x1), with row blocks that start and end inside an image, channel multipliers,
strides, non-finite inputs and one or two threads."""
from __future__ import annotations

import numpy as np
import pytest

from fluidlite.core import threads
from fluidlite.core.registry import get_op_def
from fluidlite.inference import ops as _inference_ops  # noqa: F401  (registers conv2d_fusion)
from fluidlite.ops import _conv_kernels as K
from fluidlite.ops import conv, linalg

# name: (x shape, filter shape, stride, padding, groups, dtype, the kernel that must run)
CASES = {
    # 33x33 outputs (> the banded kernel's 1024 pixels): phase planes; blocks of rows that
    # span images and start mid-image (C = 5, ~113 rows a block)
    "depthwise_planes": ((40, 5, 33, 33), (5, 1, 3, 3), 1, 1, 5, "float32", "flat"),
    "depthwise_planes_m2": ((6, 4, 34, 34), (8, 1, 3, 3), 1, 1, 4, "float32", "flat"),
    "depthwise_planes_s2": ((5, 3, 70, 66), (3, 1, 3, 3), 2, 1, 3, "float32", "flat"),
    "depthwise_band": ((3, 6, 14, 14), (6, 1, 3, 3), 1, 1, 6, "float32", "band"),
    "depthwise_band_m2": ((3, 3, 20, 20), (6, 1, 3, 3), 2, 1, 3, "float64", "band"),
    # rows last: float16 (no band), one small map, maps at most LAST_WIDTH wide
    "depthwise_rows_last": ((2, 6, 9, 9), (6, 1, 3, 3), 1, 1, 6, "float16", "last"),
    "depthwise_rows_last_one": ((1, 6, 14, 14), (6, 1, 3, 3), 1, 1, 6, "float32", "last"),
    "depthwise_rows_last_m2": ((5, 3, 9, 9), (6, 1, 3, 3), 2, 1, 3, "float32", "last"),
    "winograd": ((5, 16, 12, 10), (16, 16, 3, 3), 1, 1, 1, "float32", "winograd"),
    "im2col": ((3, 4, 9, 9), (5, 4, 3, 3), 2, 1, 1, "float32", ""),
    "im2col_one_block": ((3, 4, 9, 9), (5, 4, 3, 3), 1, 1, 1, "float32", ""),
    # one image: the GEMM's product is the output; its parts (two threads) are the blocks
    "im2col_one_image": ((1, 4, 9, 9), (6, 4, 3, 3), 2, 1, 1, "float32", ""),
    "im2col_grouped": ((4, 6, 8, 8), (6, 3, 3, 3), 1, 1, 2, "float64", ""),
    "pointwise": ((3, 5, 16, 12), (7, 5, 1, 1), 1, 0, 1, "float32", "pointwise"),
}


def _geom(x, w, stride, pad, groups):
    return conv._conv_geom(x, w, [stride, stride], [pad, pad], [1, 1], "EXPLICIT", groups)


def _case(name, rng):
    xs, ws, stride, pad, groups, dtype, path = CASES[name]
    x = rng.standard_normal(xs).astype(dtype)
    w = (rng.standard_normal(ws) * 0.3).astype(dtype)
    g = _geom(x, w, stride, pad, groups)
    kind = conv._kind(x.shape[0], x.shape[1], w.shape, g, x.dtype)
    if path in ("flat", "band", "last"):
        assert kind == "depthwise"
        band = K._band_forward(x.shape[0], g, x.dtype)
        assert band == (path == "band")
        if not band:
            assert (g.oh * g.ow < K._ROWS_LAST_MAX) == (path == "last")
    else:
        assert kind == path
    return x, w, (stride, pad, groups)


def _forward(x, w, geo, epilogue=None):
    stride, pad, groups = geo
    return conv.conv2d_forward(x, w, [stride, stride], [pad, pad], "EXPLICIT", groups,
                               [1, 1], "NCHW", epilogue=epilogue)


@pytest.fixture(params=[1, 2], ids=["1thread", "2threads"])
def nthreads(request, monkeypatch):
    """One thread, or two with the tap kernels' rows cut in two parts however small."""
    if request.param > 1:
        monkeypatch.setattr(K, "_COPY_MIN", 0)
    with threads.using(request.param):
        yield request.param


def _small_blocks(name, monkeypatch):
    """im2col in blocks of one image, the banded kernel in blocks of one channel, one image's
    GEMM cut in parts however small (the other cases' blocks come from their shapes)."""
    if name != "im2col_one_block":
        monkeypatch.setattr(conv, "_COLS_BUDGET", 1200)
    monkeypatch.setattr(linalg, "_GEMM_MIN", 0)
    monkeypatch.setattr(linalg, "_GEMM_ROWS", 1)
    monkeypatch.setattr(K, "_BAND_BUDGET", 1)
    monkeypatch.setattr(K, "_BAND_BUDGET_PARTS", 1)


@pytest.mark.parametrize("name", sorted(CASES))
def test_epilogue_visits_every_element_once(name, nthreads, monkeypatch):
    """An epilogue adding 1 gives plain + 1 exactly: no element skipped or visited twice;
    every ``where`` indexes Y3 = Y as [N, F, oh*ow] and names the block it is given, never
    an empty one; the kernels that make blocks hand over each one."""
    _small_blocks(name, monkeypatch)
    x, w, geo = _case(name, np.random.default_rng(0))
    plain = _forward(x, w, geo)
    seen = []

    def add_one(block, where):
        assert block.size > 0
        seen.append((where, block.shape))
        block += block.dtype.type(1)

    got = _forward(x, w, geo, add_one)
    assert got.dtype == plain.dtype and got.shape == plain.shape
    np.testing.assert_array_equal(got, plain + plain.dtype.type(1))
    y3 = got.reshape(got.shape[0], got.shape[1], -1)
    count = np.zeros(y3.shape, np.int64)
    for where, shape in seen:
        assert y3[where].shape == shape         # ``block`` is Y3[where]
        count[where] += 1
    np.testing.assert_array_equal(count, 1)
    if name == "im2col_one_block":              # its block is the whole batch
        assert seen == [((slice(0, x.shape[0]),), y3.shape)]
    elif name == "im2col_one_image":            # the GEMM's parts on two threads
        assert len(seen) == (2 if nthreads > 1 else 1)
    else:                                       # really in blocks, not on the whole
        assert seen != [((), y3.shape)]


@pytest.mark.parametrize("name", sorted(CASES))
def test_fused_bias_residual_act_bits_of_whole_output(name, nthreads, monkeypatch):
    """conv2d_fusion's bias + residual + relu6 in blocks: the bits of conv2d, then the three
    ops over the whole output."""
    _small_blocks(name, monkeypatch)
    rng = np.random.default_rng(1)
    x, w, (stride, pad, groups) = _case(name, rng)
    attrs = dict(strides=[stride, stride], paddings=[pad, pad], groups=groups)
    y = get_op_def("conv2d").forward(x, w, **attrs)["Output"]
    b = rng.standard_normal(y.shape[1]).astype(x.dtype)
    r = (rng.standard_normal(y.shape) * 4).astype(x.dtype)
    want = y + b.reshape(-1, 1, 1)
    want += r
    want = np.clip(want, x.dtype.type(0), x.dtype.type(6))
    got = get_op_def("conv2d_fusion").forward(x, w, b, ResidualData=r, activation="relu6",
                                              **attrs)["Output"]
    np.testing.assert_array_equal(got, want)


def test_non_finite_block_of_the_band_kernel_keeps_its_epilogue(nthreads):
    """A block of channels with an Inf takes the tap kernels inside the banded kernel: its
    epilogue still runs, once, on that block."""
    x, w, geo = _case("depthwise_band", np.random.default_rng(2))
    x[1, 4, 3, 3] = np.inf
    plain = _forward(x, w, geo)
    got = _forward(x, w, geo, lambda block, where: np.add(block, 1, out=block))
    np.testing.assert_array_equal(got, plain + np.float32(1))
    assert np.isinf(got[1, 4]).any() and np.isfinite(got[0]).all()
