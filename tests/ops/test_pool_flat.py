"""pool2d on flat phase planes (``pool._flat_fwd`` / ``_flat_bwd``, big maps with overlapping
windows): every geometry against a per-window float64 loop, the same values as the ``_Canvas``
kernels (bits, in float16/32/64, with ties, NaN and infinities), blocks of rows cut anywhere,
one or two threads, and the op choosing the route by size and window overlap."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.ops import pool as P

from .test_pool_phases import _reference

CASES = [  # H, W, ksize, strides, paddings [t, b, l, r], ceil_mode
    (7, 8, (3, 3), (2, 2), (1, 1, 1, 1), False),
    (9, 7, (3, 2), (3, 2), (1, 0, 2, 1), False),
    (2, 1, (3, 3), (3, 2), (1, 1, 1, 1), True),
    (5, 9, (4, 2), (1, 3), (2, 1, 0, 1), False),          # strided along one axis only
    (6, 6, (3, 3), (1, 1), (1, 1, 1, 1), False),          # stride 1: one plane
    (8, 5, (2, 3), (1, 2), (0, 1, 1, 0), True),
    (11, 11, (3, 3), (2, 2), (0, 0, 0, 0), True),         # AlexNet's 3x3 / 2, ceil_mode
    (3, 4, (2, 2), (1, 1), (2, 2, 2, 2), False),          # corner windows without cells
]


@pytest.fixture
def blocks(monkeypatch):
    """Blocks of 3 rows at most: parts and blocks cut the rows unevenly."""
    def set_block(L):
        monkeypatch.setattr(P, "_FLAT_BLOCK", 3 * L)
    return set_block


def _block_rows(g):
    return g.oh * P.Phases(g).Wq


@pytest.mark.parametrize("pooling_type", ["max", "avg"])
@pytest.mark.parametrize("exclusive", [True, False])
@pytest.mark.parametrize("H,W,k,s,p,ceil", CASES)
def test_flat_planes_equal_a_window_loop(H, W, k, s, p, ceil, pooling_type, exclusive, blocks):
    rng = np.random.default_rng(H * 100 + W)
    x = np.round(rng.standard_normal((2, 5, H, W)) * 2)     # ties: the first maximum wins
    g = P._geom(x, list(k), list(s), list(p), False, ceil, "EXPLICIT")
    blocks(_block_rows(g))
    dout = rng.standard_normal((2, 5, g.oh, g.ow))
    want, want_dx = _reference(x, g, pooling_type, exclusive, dout)
    got = P._flat_fwd(x, g, pooling_type, exclusive)
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13)
    dx = P._flat_bwd(x, got, dout, g, pooling_type, exclusive)
    assert dx.shape == x.shape and dx.dtype == x.dtype
    np.testing.assert_allclose(dx, want_dx, rtol=1e-13, atol=1e-13)


def _specials(x, rng):
    flat = x.reshape(-1)
    idx = rng.choice(flat.size, 12, replace=False)
    flat[idx[:4]], flat[idx[4:8]], flat[idx[8:]] = np.nan, np.inf, -np.inf
    return x


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("pooling_type", ["max", "avg"])
@pytest.mark.parametrize("H,W,k,s,p,ceil", CASES)
def test_flat_planes_give_the_canvas_bits(H, W, k, s, p, ceil, pooling_type, dtype, blocks):
    rng = np.random.default_rng(7 * H + W)
    x = np.round(rng.standard_normal((3, 4, H, W)) * 3).astype(dtype)
    if H * W >= 12:
        x = _specials(x, rng)
    g = P._geom(x, list(k), list(s), list(p), False, ceil, "EXPLICIT")
    blocks(_block_rows(g))
    want = P._pool_fwd(x, g, pooling_type, True)
    got = P._flat_fwd(x, g, pooling_type, True)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, want)
    dout = rng.standard_normal(want.shape).astype(dtype)
    np.testing.assert_array_equal(P._flat_bwd(x, want, dout, g, pooling_type, True),
                                  P._pool_bwd(x, want, dout, g, pooling_type, True))


@pytest.mark.parametrize("pooling_type", ["max", "avg"])
def test_one_or_two_threads_give_the_same_bits(pooling_type, blocks):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 7, 13, 12)).astype(np.float32)
    g = P._geom(x, [3, 3], [2, 2], [1, 1], False, False, "EXPLICIT")
    blocks(_block_rows(g))
    dout = rng.standard_normal((4, 7, g.oh, g.ow)).astype(np.float32)
    runs = []
    for n in (1, 2):
        fluid.core.set_num_threads(n)
        try:
            y = P._flat_fwd(x, g, pooling_type, True)
            runs.append((y, P._flat_bwd(x, y, dout, g, pooling_type, True)))
        finally:
            fluid.core.set_num_threads(1)
    for a, b in zip(*runs):
        np.testing.assert_array_equal(a, b)


def test_the_op_takes_flat_planes_for_big_maps_with_overlapping_windows(monkeypatch):
    calls = []
    for name in ("_flat_fwd", "_flat_bwd"):
        real = getattr(P, name)
        monkeypatch.setattr(P, name, lambda *a, _r=real, _n=name, **k: calls.append(_n) or _r(*a, **k))
    op = P.Pool2D()
    x = np.random.default_rng(0).standard_normal((2, 64, 48, 48)).astype(np.float32)   # 294912
    assert x.size >= P._FLAT_MIN

    def run(**kw):
        calls.clear()
        y = op.forward(x, **kw)["Out"]
        op.backward(x, y, np.ones_like(y), **kw)
        return list(calls)

    assert run(pooling_type="max", ksize=[3, 3], strides=[2, 2], paddings=[1, 1]) == \
        ["_flat_fwd", "_flat_bwd"]
    assert run(pooling_type="avg", ksize=[3, 3], strides=[1, 1], paddings=[1, 1]) == \
        ["_flat_fwd", "_flat_bwd"]
    assert run(pooling_type="max", ksize=[2, 2], strides=[2, 2], paddings=[0, 0]) == []
    assert run(pooling_type="avg", ksize=[1, 1], global_pooling=True) == []   # one window
    small = x[:, :8]
    calls.clear()
    op.forward(small, pooling_type="max", ksize=[3, 3], strides=[2, 2], paddings=[1, 1])
    assert calls == []
    xi = (x * 10).astype(np.int64)       # not float: the canvas kernels (their own errors)
    assert not P._flat(xi, P._geom(xi, [3, 3], [2, 2], [1, 1], False, False, "EXPLICIT"))


@pytest.mark.parametrize("H,W,k,s,flat", [
    (3, 1, (2, 1), (1, 1), True),       # two rows of windows overlapping along H only
    (1, 3, (1, 2), (1, 1), True),       # ... along W only
    (4, 1, (2, 1), (2, 1), False),      # disjoint
    (2, 2, (2, 2), (1, 1), False),      # one window
])
def test_flat_route_needs_overlapping_windows(H, W, k, s, flat, monkeypatch):
    x = np.zeros((1, 1, H, W), np.float32)
    g = P._geom(x, list(k), list(s), [0, 0], False, False, "EXPLICIT")
    monkeypatch.setattr(P, "_FLAT_MIN", x.size)         # size >= _FLAT_MIN counts
    assert P._flat(x, g) is flat
    monkeypatch.setattr(P, "_FLAT_MIN", x.size + 1)
    assert not P._flat(x, g)


def test_nhwc_and_the_flat_route_agree_with_nchw():
    op = P.Pool2D()
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 40, 40, 96)).astype(np.float32)       # NHWC, 307200
    kw = dict(pooling_type="max", ksize=[3, 3], strides=[2, 2], paddings=[1, 1])
    y = op.forward(x, data_format="NHWC", **kw)["Out"]
    xc = np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    yc = op.forward(xc, **kw)["Out"]
    np.testing.assert_array_equal(y, yc.transpose(0, 2, 3, 1))
    dout = rng.standard_normal(y.shape).astype(np.float32)
    dx = op.backward(x, y, dout, data_format="NHWC", **kw)["X"]
    dxc = op.backward(xc, yc, np.ascontiguousarray(dout.transpose(0, 3, 1, 2)), **kw)["X"]
    np.testing.assert_array_equal(dx, dxc.transpose(0, 2, 3, 1))
    g = P._geom(xc, [3, 3], [2, 2], [1, 1], False, False, "EXPLICIT")
    np.testing.assert_array_equal(dxc, P._pool_bwd(xc, yc, np.ascontiguousarray(
        dout.transpose(0, 3, 1, 2)), g, "max", True))
