"""pool2d with strides > 1 reads and writes its canvas as stride phases (``pool._Canvas``):
every geometry -- strides 2 and 3, paddings that do and do not fold onto a stride, maps
smaller than a stride, ceil_mode, windows without input cells -- against a per-window float64
loop (fluid's windows: clipped to the input; max pooling's gradient to the first maximum in
row-major order)."""
import itertools

import numpy as np
import pytest

from fluidlite.ops import pool as P


def _windows(g):
    for y, x in itertools.product(range(g.oh), range(g.ow)):
        h0, w0 = y * g.sh - g.pt, x * g.sw - g.pl
        yield y, x, h0, w0


def _reference(x, g, pooling_type, exclusive, dout):
    N, C = x.shape[:2]
    out = np.zeros((N, C, g.oh, g.ow))
    dx = np.zeros(x.shape)
    for y, x0, h0, w0 in _windows(g):
        rows = [h for h in range(h0, h0 + g.kh) if 0 <= h < g.H]
        cols = [w for w in range(w0, w0 + g.kw) if 0 <= w < g.W]
        for n, c in itertools.product(range(N), range(C)):
            cells = [(h, w) for h in rows for w in cols]
            if pooling_type == "max":
                if not cells:
                    out[n, c, y, x0] = -P._FLT_MAX
                    continue
                best = max(x[n, c, h, w] for h, w in cells)
                out[n, c, y, x0] = best
                h, w = next(hw for hw in cells if x[n, c, hw[0], hw[1]] == best)
                dx[n, c, h, w] += dout[n, c, y, x0]
            else:
                # fluid's signed cell count: 0 / 0 = NaN, 0 / negative = -0 (no cell)
                count = ((min(h0 + g.kh, g.H) - max(h0, 0)) * (min(w0 + g.kw, g.W) - max(w0, 0))
                         if exclusive else g.kh * g.kw)
                with np.errstate(invalid="ignore", divide="ignore"):
                    out[n, c, y, x0] = np.float64(sum(x[n, c, h, w] for h, w in cells)) / count
                for h, w in cells:
                    dx[n, c, h, w] += dout[n, c, y, x0] / count
    return out, dx


CASES = [  # H, W, ksize, strides, paddings [t, b, l, r], ceil_mode
    (7, 8, (3, 3), (2, 2), (1, 1, 1, 1), False),
    (9, 7, (3, 2), (3, 2), (1, 0, 2, 1), False),
    (8, 10, (2, 3), (3, 3), (2, 2, 1, 1), True),
    (1, 1, (2, 2), (2, 2), (1, 0, 1, 0), False),          # a map smaller than the stride
    (2, 1, (3, 3), (3, 2), (1, 1, 1, 1), True),
    (6, 5, (2, 2), (2, 3), (0, 0, 0, 0), True),           # disjoint windows
    (5, 9, (4, 2), (1, 3), (2, 1, 0, 1), False),          # strided along one axis only
]


@pytest.mark.parametrize("pooling_type", ["max", "avg"])
@pytest.mark.parametrize("exclusive", [True, False])
@pytest.mark.parametrize("H,W,k,s,p,ceil", CASES)
def test_phased_canvas_equals_a_window_loop(H, W, k, s, p, ceil, pooling_type, exclusive):
    rng = np.random.default_rng(H * 100 + W)
    x = np.round(rng.standard_normal((2, 3, H, W)) * 2)     # ties: the first maximum wins
    g = P._geom(x, list(k), list(s), list(p), False, ceil, "EXPLICIT")
    assert (g.sh, g.sw) != (1, 1)
    dout = rng.standard_normal((2, 3, g.oh, g.ow))
    want, want_dx = _reference(x, g, pooling_type, exclusive, dout)
    got = P._pool_fwd(x, g, pooling_type, exclusive)
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13)
    dx = P._pool_bwd(x, got, dout, g, pooling_type, exclusive)
    assert dx.shape == x.shape and dx.dtype == x.dtype
    np.testing.assert_allclose(dx, want_dx, rtol=1e-13, atol=1e-13)
