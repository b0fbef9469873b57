"""Tests written from mutation testing (issue 28, docs/mutation.md) for ``fluidlite/ops/pool.py``
and ``fluidlite/ops/pool3d.py``: pool2d, pool3d and max_pool{2,3}d_with_index, forward and
backward, against a direct float64 loop over output cells written here from fluid 1.8's
pooling.cc (``Pool2dFunctor`` / ``Pool2dGradFunctor`` / ``MaxPool2dWithIndexFunctor`` and their
3-D forms) and pool_op.cc's ``PoolOutputSize`` / ``UpdatePadding``:

* fixed windows: ``start = o * stride - pad_before``, ``end = min(start + k, in)``, then
  ``start = max(start, 0)``; adaptive windows: ``[floor(o * in / out), ceil((o + 1) * in / out))``;
* max pooling starts from ``-FLT_MAX`` and keeps the first strictly greater cell (row-major):
  its gradient goes to the first cell equal to the output (the with-index ops: to ``Mask``);
* averages divide by ``prod(end - start)`` (exclusive or adaptive) or by ``prod(ksize)``;
  the gradient spreads ``dOut / divisor`` over the window's cells.

Inputs are small integers (many ties), upstream gradients random, so that a gradient sent to
the wrong maximum, a wrong divisor or a window one cell off shows."""
import itertools
import math
import re

import numpy as np
import pytest

from fluidlite.core.registry import VarSpec, get_op_def

FLT_MAX = float(np.finfo(np.float32).max)


def c_div(a, b):
    """C++ int division (truncates toward zero), as PoolOutputSize computes."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def geometry(size, k, s, pads, ceil=False, algorithm="EXPLICIT", global_pooling=False,
             adaptive=False):
    """Per axis, the list of (start, end) windows, fluid's way. ``pads``: (before, after) pairs."""
    n = len(size)
    if global_pooling:
        k, pads = list(size), [(0, 0)] * n
        if adaptive:            # fluid: ksize := input size, then adaptive outputs ksize
            return [[(o, o + 1) for o in range(size[i])] for i in range(n)], k
    if adaptive:
        return [[(math.floor(o * size[i] / k[i]), math.ceil((o + 1) * size[i] / k[i]))
                 for o in range(k[i])] for i in range(n)], k
    if algorithm == "SAME":
        pads = []
        for i in range(n):
            out = math.ceil(size[i] / s[i])
            total = max((out - 1) * s[i] + k[i] - size[i], 0)
            pads.append((total // 2, total - total // 2))
    elif algorithm == "VALID":
        pads = [(0, 0)] * n
    wins = []
    for i in range(n):
        if global_pooling:
            out = 1
        else:
            out = c_div(size[i] + sum(pads[i]) - k[i] + (s[i] - 1 if ceil else 0), s[i]) + 1
        axis = []
        for o in range(out):
            start = o * s[i] - pads[i][0]
            end = min(start + k[i], size[i])
            axis.append((max(start, 0), end))
        wins.append(axis)
    return wins, k


def ref_pool(x, dout, ptype, wins, k, exclusive=True, adaptive=False):
    """(Out, dX, Mask) of pooling x [N, C, *size] over the windows, one output cell at a time,
    in float64; Mask is the flat spatial index of the max (-1 when none is > -FLT_MAX)."""
    size = x.shape[2:]
    oshape = tuple(len(w) for w in wins)
    out = np.zeros(x.shape[:2] + oshape)
    mask = np.full(x.shape[:2] + oshape, -1, np.int64)
    dx = np.zeros(x.shape)
    for n, c in itertools.product(range(x.shape[0]), range(x.shape[1])):
        for o in itertools.product(*(range(d) for d in oshape)):
            ranges = [range(*wins[i][o[i]]) for i in range(len(o))]
            cells = list(itertools.product(*ranges))
            at = (n, c) + o
            if ptype == "max":
                best, where = -FLT_MAX, None
                for cell in cells:
                    if x[(n, c) + cell] > best:
                        best, where = x[(n, c) + cell], cell
                out[at] = best
                if where is not None:
                    mask[at] = np.ravel_multi_index(where, size)
                for cell in cells:          # the gradient: the first cell equal to Out
                    if x[(n, c) + cell] == best:
                        dx[(n, c) + cell] += dout[at]
                        break
            else:
                div = (np.prod([len(r) if r.stop >= r.start else r.stop - r.start
                                for r in ranges])
                       if exclusive or adaptive else np.prod(k))
                div = np.float64(div)
                total = np.float64(sum(x[(n, c) + cell] for cell in cells))
                with np.errstate(divide="ignore", invalid="ignore"):
                    out[at] = total / div
                for cell in cells:
                    dx[(n, c) + cell] += dout[at] / div
    return out, dx, mask


def ties(shape, seed=0):
    return np.random.default_rng(seed).integers(-3, 4, shape).astype(np.float64)


def run(op, x, dout_seed=1, **attrs):
    """Out and dX of ``op`` with a random upstream gradient (returned too)."""
    opdef = get_op_def(op)
    out = opdef.forward(x, **attrs)["Out"]
    dout = np.random.default_rng(dout_seed).standard_normal(out.shape)
    dx = opdef.backward(x, out, dout, **attrs)["X"]
    return out, dout, dx


# (size, ksize, strides, (before, after) paddings, ceil_mode, padding_algorithm)
GEOMS_2D = [
    ((6, 5), (2, 2), (2, 2), [(0, 0), (0, 0)], False, "EXPLICIT"),
    ((7, 6), (3, 2), (2, 1), [(1, 0), (0, 1)], False, "EXPLICIT"),
    ((6, 7), (2, 3), (2, 2), [(0, 1), (2, 0)], True, "EXPLICIT"),
    ((5, 5), (3, 3), (1, 2), [(1, 1), (1, 1)], True, "EXPLICIT"),
    ((7, 5), (3, 2), (3, 2), [(0, 0), (0, 0)], True, "EXPLICIT"),     # ceil adds a clipped window
    ((7, 6), (3, 4), (2, 3), [(0, 0), (0, 0)], False, "SAME"),
    ((7, 6), (3, 2), (2, 3), [(2, 2), (1, 1)], False, "VALID"),
    ((1, 4), (2, 2), (2, 2), [(0, 0), (0, 0)], False, "EXPLICIT"),     # C division: 1 row out
    ((4, 5), (4, 5), (1, 1), [(0, 0), (0, 0)], False, "EXPLICIT"),     # one window of all
    ((4, 6), (1, 2), (2, 3), [(0, 0), (0, 0)], False, "SAME"),         # SAME's total < 0 is 0
    ((6, 6), (3, 2), (2, 1), [(2, 2), (1, 1)], False, "VALID"),        # VALID drops every pad
    ((5, 5), (2, 2), (2, 2), [(0, 0), (2, 0)], False, "EXPLICIT"),     # left pad > last window
    ((5, 5), (2, 2), (2, 2), [(2, 0), (0, 0)], False, "EXPLICIT"),     # top pad > last window
]


@pytest.mark.parametrize("ptype,exclusive", [("max", True), ("avg", True), ("avg", False)])
@pytest.mark.parametrize("size,k,s,pads,ceil,algo", GEOMS_2D)
def test_pool2d_forward_and_backward_match_a_loop_over_windows(ptype, exclusive, size, k, s,
                                                               pads, ceil, algo):
    x = ties((2, 3) + size)
    # fluid's 4-value paddings are [top, bottom, left, right]
    attrs = dict(pooling_type=ptype, ksize=list(k), strides=list(s),
                 paddings=[pads[0][0], pads[0][1], pads[1][0], pads[1][1]], ceil_mode=ceil,
                 exclusive=exclusive, padding_algorithm=algo)
    out, dout, dx = run("pool2d", x, **attrs)
    wins, kk = geometry(size, k, s, pads, ceil, algo)
    want, want_dx, _ = ref_pool(x, dout, ptype, wins, kk, exclusive)
    np.testing.assert_allclose(out, want, rtol=1e-12, atol=0)
    np.testing.assert_allclose(dx, want_dx, rtol=1e-12, atol=1e-15)
    spec = get_op_def("pool2d").infer(VarSpec(list(x.shape), "float64"), **attrs)["Out"]
    assert list(spec.shape) == list(want.shape)


@pytest.mark.parametrize("ptype", ["max", "avg"])
def test_pool2d_nhwc_is_the_nchw_result_transposed(ptype):
    x = ties((2, 7, 6, 3), seed=3)
    attrs = dict(pooling_type=ptype, ksize=[3, 2], strides=[2, 1], paddings=[1, 0, 0, 1],
                 ceil_mode=True)
    out, dout, dx = run("pool2d", x, data_format="NHWC", **attrs)
    wins, k = geometry((7, 6), (3, 2), (2, 1), [(1, 0), (0, 1)], True)
    want, want_dx, _ = ref_pool(x.transpose(0, 3, 1, 2), dout.transpose(0, 3, 1, 2), ptype,
                                wins, k)
    np.testing.assert_allclose(out, want.transpose(0, 2, 3, 1), rtol=1e-12)
    np.testing.assert_allclose(dx, want_dx.transpose(0, 2, 3, 1), rtol=1e-12, atol=1e-15)
    assert out.flags.c_contiguous and dx.flags.c_contiguous
    spec = get_op_def("pool2d").infer(VarSpec([2, 7, 6, 3], "float64"), data_format="NHWC",
                                      **attrs)["Out"]
    assert list(spec.shape) == list(out.shape)


@pytest.mark.parametrize("ptype", ["max", "avg"])
@pytest.mark.parametrize("last", [False, True])
def test_pool2d_global_pooling_ignores_ksize_strides_and_paddings(ptype, last):
    x = ties((2, 3, 5, 4), seed=4)
    xin = x.transpose(0, 2, 3, 1) if last else x
    attrs = dict(pooling_type=ptype, ksize=[2, 2], strides=[3, 3], paddings=[1, 1],
                 global_pooling=True, data_format="NHWC" if last else "NCHW")
    out, dout, dx = run("pool2d", xin, **attrs)
    t = (lambda a: a.transpose(0, 3, 1, 2)) if last else (lambda a: a)
    wins, k = geometry((5, 4), (2, 2), (3, 3), [(1, 1), (1, 1)], global_pooling=True)
    want, want_dx, _ = ref_pool(x, t(dout), ptype, wins, k)
    np.testing.assert_allclose(t(out), want, rtol=1e-12)
    np.testing.assert_allclose(t(dx), want_dx, rtol=1e-12, atol=1e-15)
    spec = get_op_def("pool2d").infer(VarSpec(list(xin.shape), "float64"), **attrs)["Out"]
    assert list(spec.shape) == list(out.shape)


@pytest.mark.parametrize("ptype", ["max", "avg"])
@pytest.mark.parametrize("last", [False, True])
@pytest.mark.parametrize("osize", [(3, 2), (4, 5), (7, 3), (1, 5), "global"])
def test_pool2d_adaptive_windows(ptype, last, osize):
    """Adaptive averages divide by the window's cell count whatever ``exclusive`` says (fluid's
    ``exclusive || adaptive``); with global_pooling, fluid first sets ksize to the input size,
    so the output is the input (one window per cell)."""
    x = ties((2, 3, 7, 5), seed=5)
    xin = x.transpose(0, 2, 3, 1) if last else x
    glob = osize == "global"
    attrs = dict(pooling_type=ptype, ksize=[2, 2] if glob else list(osize), adaptive=True,
                 data_format="NHWC" if last else "NCHW", exclusive=False, global_pooling=glob)
    out, dout, dx = run("pool2d", xin, **attrs)
    t = (lambda a: a.transpose(0, 3, 1, 2)) if last else (lambda a: a)
    if glob:
        np.testing.assert_array_equal(out, xin)
        np.testing.assert_array_equal(dx, dout)
    wins, k = geometry((7, 5), (2, 2) if glob else osize, None, None, adaptive=True,
                       global_pooling=glob)
    want, want_dx, _ = ref_pool(x, t(dout), ptype, wins, k, adaptive=True)
    np.testing.assert_allclose(t(out), want, rtol=1e-12)
    np.testing.assert_allclose(t(dx), want_dx, rtol=1e-12, atol=1e-15)
    spec = get_op_def("pool2d").infer(VarSpec(list(xin.shape), "float32"), **attrs)["Out"]
    assert list(spec.shape) == list(out.shape) and spec.dtype == VarSpec((), "float32").dtype


def test_pool2d_windows_without_input_cells_give_fluids_values():
    """Paddings as large as the window: the first window holds no cell. fluid 1.8: max gives
    -FLT_MAX, exclusive avg 0 / 0 (NaN), neither sends gradient anywhere; ceil_mode past the
    input gives a negative cell count (0 / -n = -0)."""
    x = ties((1, 2, 4, 4), seed=6)
    pads = [(2, 0), (0, 0)]
    for ptype in ("max", "avg"):
        attrs = dict(pooling_type=ptype, ksize=[2, 2], strides=[2, 2], paddings=[2, 0, 0, 0])
        out, dout, dx = run("pool2d", x, **attrs)
        wins, k = geometry((4, 4), (2, 2), (2, 2), pads)
        want, want_dx, _ = ref_pool(x, dout, ptype, wins, k)
        np.testing.assert_array_equal(out, want)           # NaN == NaN here
        np.testing.assert_allclose(dx, want_dx, rtol=1e-12, atol=1e-15)
        assert np.isfinite(dx).all()
    assert out.dtype == np.float64
    # ceil_mode and 4 trailing pad rows: the last row's window starts past the input
    pads = [(0, 4), (0, 0)]
    attrs = dict(pooling_type="avg", ksize=[3, 2], strides=[4, 2], paddings=[0, 4, 0, 0],
                 ceil_mode=True)
    out, dout, dx = run("pool2d", x, **attrs)
    wins, k = geometry((4, 4), (3, 2), (4, 2), pads, ceil=True)
    want, want_dx, _ = ref_pool(x, dout, "avg", wins, k)
    assert out.shape == want.shape == (1, 2, 3, 2)
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(np.signbit(out), np.signbit(want))
    assert np.signbit(out[:, :, 2]).all()
    np.testing.assert_allclose(dx, want_dx, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_pool2d_max_of_an_empty_window_is_minus_flt_max_in_the_inputs_dtype(dtype):
    x = np.full((1, 1, 2, 2), -np.inf, dtype)
    x[0, 0, 1, 1] = 5
    out = get_op_def("pool2d").forward(x, pooling_type="max", ksize=[1, 1], strides=[1, 1])
    low = -np.inf if dtype == np.float16 else -FLT_MAX     # float16: -FLT_MAX rounds to -inf
    want = np.array([[[[low, low], [low, 5]]]], dtype)
    assert out["Out"].dtype == dtype
    np.testing.assert_array_equal(out["Out"], want)


def test_pool2d_float32_keeps_its_dtype_forward_and_backward():
    x = ties((2, 2, 5, 5), seed=7).astype(np.float32)
    for ptype in ("max", "avg"):
        out, dout, dx = run("pool2d", x, pooling_type=ptype, ksize=[3, 3], strides=[2, 2],
                            paddings=[1, 1])
        dout = dout.astype(np.float32)
        dx = get_op_def("pool2d").backward(x, out, dout, pooling_type=ptype, ksize=[3, 3],
                                           strides=[2, 2], paddings=[1, 1])["X"]
        assert out.dtype == dx.dtype == np.float32
        wins, k = geometry((5, 5), (3, 3), (2, 2), [(1, 1), (1, 1)])
        want, want_dx, _ = ref_pool(x.astype(np.float64), dout.astype(np.float64), ptype,
                                    wins, k)
        np.testing.assert_allclose(out, want, rtol=1e-6)
        np.testing.assert_allclose(dx, want_dx, rtol=1e-5, atol=1e-6)


def _refused(op, shape, msg, **attrs):
    with pytest.raises(ValueError, match="^" + re.escape(msg) + "$"):
        get_op_def(op).infer(VarSpec(list(shape), "float32"), **attrs)


def test_pool2d_build_time_checks_name_the_problem():
    _refused("pool2d", (2, 3, 8, 8), "pool2d: pooling_type must be 'max' or 'avg', got 'sum'",
             pooling_type="sum", ksize=[2, 2])
    _refused("pool2d", (2, 3, 8), "pool2d: X must be 4-D (NCHW), got shape [2, 3, 8]",
             ksize=[2, 2])
    _refused("pool2d", (2, 3, 8), "pool2d: X must be 4-D (NHWC), got shape [2, 3, 8]",
             ksize=[2, 2], data_format="NHWC")
    _refused("pool2d", (2, 3, 8, 8), "pool2d: data_format must be 'NCHW' or 'NHWC', got 'NCWH'",
             ksize=[2, 2], data_format="NCWH")
    _refused("pool2d", (2, 3, 8, 8), "pool2d: strides must be 2 positive ints, got [1, 0]",
             ksize=[2, 2], strides=[1, 0])
    _refused("pool2d", (2, 3, 8, 8), "pool2d: strides must be 2 positive ints, got [1]",
             ksize=[2, 2], strides=[1])
    _refused("pool2d", (2, 3, 8, 8), "pool2d: ksize must be 2 positive ints (or set "
             "global_pooling=True), got [0, 2]", ksize=[0, 2])
    _refused("pool2d", (2, 3, 8, 8), "pool2d: ksize must be 2 positive ints (or set "
             "global_pooling=True), got [2, 2, 2]", ksize=[2, 2, 2])
    _refused("pool2d", (2, 3, 8, 8), "pool2d: padding_algorithm must be 'EXPLICIT', 'SAME' or "
             "'VALID', got 'FULL'", ksize=[2, 2], padding_algorithm="FULL")
    _refused("pool2d", (2, 3, 3, 8), "pool2d: output size [0, 7] is not positive for input "
             "[2, 3, 3, 8], ksize [5, 2], strides [2, 1], paddings [0, 0, 0, 0]",
             ksize=[5, 2], strides=[2, 1])
    _refused("pool2d", (2, 3, 8, 3), "pool2d: output size [7, 0] is not positive for input "
             "[2, 3, 8, 3], ksize [2, 5], strides [1, 2], paddings [0, 0, 0, 0]",
             ksize=[2, 5], strides=[1, 2])


def test_pool2d_infer_with_unknown_dims_and_the_anylayout():
    infer = get_op_def("pool2d").infer
    out = infer(VarSpec([-1, 3, -1, 8], "float32"), ksize=[2, 2], strides=[2, 2])["Out"]
    assert list(out.shape) == [-1, 3, -1, 4]
    out = infer(VarSpec([-1, 8, 3, -1], "float32"), ksize=[2, 3], strides=[2, 1],
                data_format="NHWC", padding_algorithm="SAME")["Out"]
    assert list(out.shape) == [-1, 4, 3, -1]
    out = infer(VarSpec([2, 3, 8, 8], "float16"), ksize=[3, 3], data_format="AnyLayout")["Out"]
    assert list(out.shape) == [2, 3, 6, 6] and out.dtype == VarSpec((), "float16").dtype
    # an unknown dim with a too-large window is not refused at build time
    out = infer(VarSpec([2, 3, -1, 8], "float32"), ksize=[5, 2])["Out"]
    assert list(out.shape) == [2, 3, -1, 7]


def test_pool2d_kernels_refuse_what_infer_refuses():
    x = ties((1, 1, 3, 3))
    with pytest.raises(ValueError, match=re.escape("pool2d: empty output for input 3x3, ksize "
                                                   "[5, 2], strides [1, 1], paddings [0, 0, 0, "
                                                   "0]")):
        get_op_def("pool2d").forward(x, pooling_type="max", ksize=[5, 2])


# ---- pool3d and the with-index ops -------------------------------------------------------------

GEOMS_3D = [
    ((4, 5, 6), (2, 2, 2), (2, 2, 2), [(0, 0)] * 3, False, "EXPLICIT"),
    ((5, 4, 6), (3, 2, 3), (2, 1, 2), [(1, 0), (0, 1), (1, 1)], False, "EXPLICIT"),
    ((5, 6, 4), (2, 3, 2), (2, 2, 3), [(0, 1), (1, 0), (0, 0)], True, "EXPLICIT"),
    ((5, 6, 4), (2, 3, 3), (2, 2, 3), [(0, 0)] * 3, False, "SAME"),
    ((5, 6, 4), (2, 3, 2), (2, 2, 1), [(1, 1)] * 3, False, "VALID"),
    ((4, 5, 5), (1, 3, 2), (2, 1, 2), [(0, 0)] * 3, False, "SAME"),    # totals -1, 2 and 1
]


@pytest.mark.parametrize("ptype,exclusive", [("max", True), ("avg", True), ("avg", False)])
@pytest.mark.parametrize("size,k,s,pads,ceil,algo", GEOMS_3D)
def test_pool3d_forward_and_backward_match_a_loop_over_windows(ptype, exclusive, size, k, s,
                                                               pads, ceil, algo):
    x = ties((2, 2) + size, seed=8)
    attrs = dict(pooling_type=ptype, ksize=list(k), strides=list(s),
                 paddings=[v for p in pads for v in p], ceil_mode=ceil, exclusive=exclusive,
                 padding_algorithm=algo)
    out, dout, dx = run("pool3d", x, **attrs)
    wins, kk = geometry(size, k, s, pads, ceil, algo)
    want, want_dx, _ = ref_pool(x, dout, ptype, wins, kk, exclusive)
    np.testing.assert_allclose(out, want, rtol=1e-12, atol=0)
    np.testing.assert_allclose(dx, want_dx, rtol=1e-12, atol=1e-15)
    spec = get_op_def("pool3d").infer(VarSpec(list(x.shape), "float64"), **attrs)["Out"]
    assert list(spec.shape) == list(want.shape)


@pytest.mark.parametrize("ptype", ["max", "avg"])
@pytest.mark.parametrize("mode", ["adaptive", "global", "global+adaptive", "ndhwc"])
def test_pool3d_adaptive_global_and_channels_last(ptype, mode):
    x = ties((2, 3, 5, 4, 6), seed=9)
    size = (5, 4, 6)
    last = mode == "ndhwc"
    xin = np.moveaxis(x, 1, -1) if last else x
    attrs = dict(pooling_type=ptype, ksize=[3, 3, 4], strides=[2, 1, 2], paddings=[1, 0, 1],
                 adaptive="adaptive" in mode, global_pooling="global" in mode,
                 data_format="NDHWC" if last else "NCDHW")
    out, dout, dx = run("pool3d", xin, **attrs)
    t = (lambda a: np.moveaxis(a, -1, 1)) if last else (lambda a: a)
    wins, k = geometry(size, (3, 3, 4), (2, 1, 2), [(1, 1), (0, 0), (1, 1)],
                       global_pooling="global" in mode, adaptive="adaptive" in mode)
    want, want_dx, _ = ref_pool(x, t(dout), ptype, wins, k, adaptive="adaptive" in mode)
    np.testing.assert_allclose(t(out), want, rtol=1e-12)
    np.testing.assert_allclose(t(dx), want_dx, rtol=1e-12, atol=1e-15)
    assert out.flags.c_contiguous and dx.flags.c_contiguous
    spec = get_op_def("pool3d").infer(VarSpec(list(xin.shape), "float64"), **attrs)["Out"]
    assert list(spec.shape) == list(out.shape)


def test_pool3d_avg_of_integers_and_float32_keep_their_dtypes():
    x = ties((1, 2, 4, 4, 4), seed=10)
    attrs = dict(pooling_type="avg", ksize=[3, 3, 3], strides=[2, 2, 2], paddings=[1, 1, 1])
    wins, k = geometry((4, 4, 4), (3, 3, 3), (2, 2, 2), [(1, 1)] * 3)
    want, _, _ = ref_pool(x, np.zeros((1, 2, 2, 2, 2)), "avg", wins, k)
    out = get_op_def("pool3d").forward(x.astype(np.float32), **attrs)["Out"]
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, want, rtol=1e-6)
    out = get_op_def("pool3d").forward(x.astype(np.int32), **attrs)["Out"]
    assert out.dtype == np.int32                 # averaged in float64, cast back (truncated)
    np.testing.assert_array_equal(out, want.astype(np.int32))


def test_pool3d_windows_without_input_cells():
    x = ties((1, 2, 4, 3, 3), seed=11)
    pads = [(2, 0), (0, 0), (0, 0)]
    for ptype in ("max", "avg"):
        attrs = dict(pooling_type=ptype, ksize=[2, 2, 2], strides=[2, 1, 1],
                     paddings=[2, 0, 0, 0, 0, 0])
        out, dout, dx = run("pool3d", x, **attrs)
        wins, k = geometry((4, 3, 3), (2, 2, 2), (2, 1, 1), pads)
        want, want_dx, _ = ref_pool(x, dout, ptype, wins, k)
        np.testing.assert_array_equal(out, want)
        np.testing.assert_allclose(dx, want_dx, rtol=1e-12, atol=1e-15)
        assert np.isfinite(dx).all()


def test_pool3d_build_time_checks_name_the_problem():
    ok = dict(ksize=[2, 2, 2])
    _refused("pool3d", (1, 2, 4, 4, 4), "pool3d: pooling_type must be 'max' or 'avg', got "
             "'min'", pooling_type="min", **ok)
    _refused("pool3d", (1, 2, 4, 4), "pool3d: X must be 5-D (NCDHW), got shape [1, 2, 4, 4]",
             **ok)
    _refused("pool3d", (1, 2, 4, 4), "pool3d: X must be 5-D (NDHWC), got shape [1, 2, 4, 4]",
             data_format="NDHWC", **ok)
    _refused("pool3d", (1, 2, 4, 4, 4), "pool3d: data_format must be 'NCDHW' or 'NDHWC', got "
             "'NCHW'", data_format="NCHW", **ok)
    _refused("pool3d", (1, 2, 4, 4, 4), "pool3d: ksize and strides must have 3 values, got "
             "ksize [2, 2], strides [1, 1, 1]", ksize=[2, 2])
    _refused("pool3d", (1, 2, 4, 4, 4), "pool3d: ksize and strides must have 3 values, got "
             "ksize [2, 2, 2], strides [1, 1]", ksize=[2, 2, 2], strides=[1, 1])
    _refused("pool3d", (1, 2, 4, 4, 4), "pool3d: ksize and strides must be positive, got ksize "
             "[2, 0, 2], strides [1, 1, 1]", ksize=[2, 0, 2])
    _refused("pool3d", (1, 2, 4, 4, 4), "pool3d: ksize and strides must be positive, got ksize "
             "[2, 2, 2], strides [1, 0, 1]", ksize=[2, 2, 2], strides=[1, 0, 1])
    _refused("pool3d", (1, 2, 4, 4, 4), "pool3d: the adaptive output size (ksize) must be "
             "positive, got [2, 0, 2]", ksize=[2, 0, 2], adaptive=True)
    _refused("pool3d", (1, 2, 4, 4, 4), "pool3d: padding_algorithm must be 'EXPLICIT', 'SAME' "
             "or 'VALID', got 'same'", padding_algorithm="same", **ok)
    _refused("pool3d", (1, 2, 4, 4, 4), "pool3d: paddings must have 3 or 6 values, got [1, 1]",
             paddings=[1, 1], **ok)
    _refused("pool3d", (1, 2, 4, 2, 4), "pool3d: output size [3, 0, 3] is not positive for "
             "input [1, 2, 4, 2, 4], ksize [2, 3, 2], strides [1, 1, 1], paddings [0, 0, 0]",
             ksize=[2, 3, 2])
    # C division: (2 - 3) / 2 + 1 is 1, not refused
    out = get_op_def("pool3d").infer(VarSpec([1, 2, 4, 2, 4], "float32"), ksize=[2, 3, 2],
                                     strides=[1, 2, 1])["Out"]
    assert list(out.shape) == [1, 2, 3, 1, 3]
    # unknown dims stay unknown
    out = get_op_def("pool3d").infer(VarSpec([-1, 2, -1, 4, 4], "float32"), ksize=[2, 2, 2],
                                     strides=[2, 2, 2], padding_algorithm="SAME")["Out"]
    assert list(out.shape) == [-1, 2, -1, 2, 2]
    out = get_op_def("pool3d").infer(VarSpec([3, 4, 5, 6, 2], "float32"), ksize=[2, 2, 2],
                                     data_format="NDHWC", padding_algorithm="VALID",
                                     paddings=[1, 1, 1])["Out"]
    assert list(out.shape) == [3, 3, 4, 5, 2]


def test_pool_nd_kernels_refuse_an_empty_output():
    x = ties((1, 1, 2, 3, 3))
    with pytest.raises(ValueError, match=re.escape(
            "pool3d: output size [0, 2, 2] is not positive for input [1, 1, 2, 3, 3], ksize "
            "[3, 2, 2], strides [1, 1, 1], paddings [(0, 0), (0, 0), (0, 0)]")):
        get_op_def("pool3d").forward(x, pooling_type="max", ksize=[3, 2, 2])


@pytest.mark.parametrize("op,size,k,s,pads", [
    ("max_pool2d_with_index", (7, 6), (3, 2), (2, 2), [(1, 1), (0, 0)]),
    ("max_pool2d_with_index", (5, 6), (2, 3), (1, 2), [(0, 0), (1, 1)]),
    ("max_pool3d_with_index", (4, 5, 4), (2, 3, 2), (2, 1, 2), [(1, 1), (0, 0), (1, 1)]),
])
def test_max_pool_with_index_mask_and_gradient(op, size, k, s, pads):
    x = ties((2, 3) + size, seed=12)
    n = len(size)
    attrs = dict(ksize=list(k), strides=list(s), paddings=[p[0] for p in pads])
    opdef = get_op_def(op)
    res = opdef.forward(x, **attrs)
    wins, kk = geometry(size, k, s, pads)
    dout = np.random.default_rng(13).standard_normal(res["Out"].shape)
    want, want_dx, want_mask = ref_pool(x, dout, "max", wins, kk)
    np.testing.assert_array_equal(res["Out"], want)
    np.testing.assert_array_equal(res["Mask"], want_mask)
    assert res["Mask"].dtype == np.int32
    dx = opdef.backward(x, res["Mask"], dout, **attrs)["X"]
    np.testing.assert_allclose(dx, want_dx, rtol=1e-12, atol=1e-15)
    specs = opdef.infer(VarSpec(list(x.shape), "float64"), **attrs)
    assert list(specs["Out"].shape) == list(specs["Mask"].shape) == list(want.shape)
    assert specs["Mask"].dtype == VarSpec((), "int32").dtype
    assert specs["Out"].dtype == VarSpec((), "float64").dtype
    # strides and paddings default to 1 and 0
    res = opdef.forward(x, ksize=list(k))
    wins, kk = geometry(size, k, (1,) * n, [(0, 0)] * n)
    want, _, want_mask = ref_pool(x, np.zeros(x.shape), "max", wins, kk)
    np.testing.assert_array_equal(res["Out"], want)
    np.testing.assert_array_equal(res["Mask"], want_mask)
    assert list(opdef.infer(VarSpec(list(x.shape), "float64"), ksize=list(k))["Out"].shape) \
        == list(want.shape)


@pytest.mark.parametrize("op,size,osize", [("max_pool2d_with_index", (7, 5), (3, 2)),
                                           ("max_pool3d_with_index", (5, 4, 6), (2, 3, 4))])
def test_max_pool_with_index_adaptive(op, size, osize):
    x = ties((2, 2) + size, seed=14)
    opdef = get_op_def(op)
    res = opdef.forward(x, ksize=list(osize), adaptive=True)
    wins, k = geometry(size, osize, None, None, adaptive=True)
    dout = np.random.default_rng(15).standard_normal(res["Out"].shape)
    want, want_dx, want_mask = ref_pool(x, dout, "max", wins, k, adaptive=True)
    np.testing.assert_array_equal(res["Out"], want)
    np.testing.assert_array_equal(res["Mask"], want_mask)
    dx = opdef.backward(x, res["Mask"], dout, ksize=list(osize), adaptive=True)["X"]
    np.testing.assert_allclose(dx, want_dx, rtol=1e-12, atol=1e-15)


def test_max_pool_with_index_of_cells_at_or_below_minus_flt_max_has_mask_minus_one():
    """fluid keeps the max on ``max < x`` from -FLT_MAX: a window of cells <= -FLT_MAX keeps
    index -1 and gets no gradient; the other windows are unaffected."""
    x = np.array([[[[-np.inf, -FLT_MAX, 1.0, 2.0], [-np.inf, -np.inf, 2.0, 0.0]]]])
    opdef = get_op_def("max_pool2d_with_index")
    res = opdef.forward(x, ksize=[2, 2], strides=[2, 2])
    np.testing.assert_array_equal(res["Out"], [[[[-FLT_MAX, 2.0]]]])
    np.testing.assert_array_equal(res["Mask"], [[[[-1, 3]]]])
    dx = opdef.backward(x, res["Mask"], np.array([[[[5.0, 7.0]]]]), ksize=[2, 2],
                        strides=[2, 2])["X"]
    np.testing.assert_array_equal(dx, [[[[0, 0, 0, 7.0], [0, 0, 0, 0]]]])


def test_max_pool_with_index_rank_is_checked():
    for op, shape, rank in [("max_pool2d_with_index", (2, 3, 4), 4),
                            ("max_pool3d_with_index", (2, 3, 4, 4), 5)]:
        _refused(op, shape, f"{op}: X must be {rank}-D, got shape {list(shape)}",
                 ksize=[2] * (rank - 2))


def test_avg_pool_gradients_match_numeric_differences():
    """Central differences of sum(Out * dOut) in float64 (an oracle independent of the loop
    reference) for pool2d and pool3d averages with clipped windows."""
    rng = np.random.default_rng(16)
    cases = [("pool2d", (1, 2, 5, 4), dict(ksize=[3, 2], strides=[2, 1], paddings=[1, 0, 1, 1],
                                            ceil_mode=True)),
             ("pool2d", (1, 2, 5, 4), dict(ksize=[2, 3], adaptive=True)),
             ("pool3d", (1, 1, 3, 4, 3), dict(ksize=[2, 3, 2], strides=[1, 2, 2],
                                               paddings=[1, 0, 1], exclusive=False))]
    for op, shape, attrs in cases:
        attrs["pooling_type"] = "avg"
        x = rng.standard_normal(shape)
        opdef = get_op_def(op)
        out = opdef.forward(x, **attrs)["Out"]
        dout = rng.standard_normal(out.shape)
        dx = opdef.backward(x, out, dout, **attrs)["X"]
        num = np.zeros_like(x)
        for i in np.ndindex(x.shape):
            e = np.zeros_like(x)
            e[i] = 1e-6
            num[i] = ((opdef.forward(x + e, **attrs)["Out"] * dout).sum()
                      - (opdef.forward(x - e, **attrs)["Out"] * dout).sum()) / 2e-6
        np.testing.assert_allclose(dx, num, rtol=1e-6, atol=1e-8)


# ---- what the reruns of the surviving mutants asked for ----------------------------------------

def _no_warnings(fn, *args, **kw):
    """fn(*args, **kw), failing on any NumPy RuntimeWarning (0 / 0 of an empty window must be
    fluid's NaN silently, not a warning to the user)."""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return fn(*args, **kw)


@pytest.mark.parametrize("op,size,pads", [
    ("pool2d", (5, 5), [(2, 1), (1, 1)]),
    ("pool3d", (4, 5, 5), [(2, 1), (1, 1), (0, 0)])])
def test_empty_windows_are_silent_and_one_cell_windows_keep_their_gradient(op, size, pads):
    """Windows holding 0 cells (top padding), 1 cell (a corner) and more, exclusive averages:
    no RuntimeWarning forward or backward, also with a zero upstream gradient (0 / 0)."""
    n = len(size)
    x = ties((1, 2) + size, seed=20)
    attrs = dict(pooling_type="avg", ksize=[2] * n, strides=[2] * n,
                 paddings=[v for p in pads for v in p])
    opdef = get_op_def(op)
    out = _no_warnings(opdef.forward, x, **attrs)["Out"]
    wins, k = geometry(size, (2,) * n, (2,) * n, pads)
    dout = np.random.default_rng(21).standard_normal(out.shape)
    want, want_dx, _ = ref_pool(x, dout, "avg", wins, k)
    np.testing.assert_array_equal(out, want)
    assert np.isnan(out).any()                  # the empty windows
    dx = _no_warnings(opdef.backward, x, out, dout, **attrs)["X"]
    np.testing.assert_allclose(dx, want_dx, rtol=1e-12, atol=1e-15)
    dx = _no_warnings(opdef.backward, x, out, np.zeros_like(dout), **attrs)["X"]
    np.testing.assert_array_equal(dx, np.zeros(x.shape))
    for ptype in ("max",):
        attrs["pooling_type"] = ptype
        out = _no_warnings(opdef.forward, x, **attrs)["Out"]
        want, want_dx, _ = ref_pool(x, dout, ptype, wins, k)
        np.testing.assert_array_equal(out, want)
        dx = _no_warnings(opdef.backward, x, out, dout, **attrs)["X"]
        np.testing.assert_allclose(dx, want_dx, rtol=1e-12)


@pytest.mark.parametrize("op", ["pool2d", "pool3d"])
def test_max_gradient_of_an_infinite_maximum_next_to_the_padding(op):
    """A window whose maximum is +inf, the padding read before it: the gradient goes to the
    input cell, never to the padding (which is not a cell of the window in fluid)."""
    n = 2 if op == "pool2d" else 3
    x = ties((1, 1) + (4,) * n, seed=22)
    x[(0, 0) + (0,) * n] = np.inf
    x[(0, 0) + (3,) * n] = -np.inf
    attrs = dict(pooling_type="max", ksize=[2] * n, strides=[1] * n, paddings=[1] * n)
    out, dout, dx = run(op, x, **attrs)
    wins, k = geometry((4,) * n, (2,) * n, (1,) * n, [(1, 1)] * n)
    want, want_dx, _ = ref_pool(x, dout, "max", wins, k)
    np.testing.assert_array_equal(out, want)
    np.testing.assert_allclose(dx, want_dx, rtol=1e-12)


def test_the_kernels_defaults_are_fluids():
    """pooling_type max, strides 1, paddings 0, ceil_mode off, NCHW / NCDHW."""
    x = ties((1, 2, 5, 5), seed=23)
    out, dout, dx = run("pool2d", x, ksize=[2, 2])
    wins, k = geometry((5, 5), (2, 2), (1, 1), [(0, 0)] * 2)
    want, want_dx, _ = ref_pool(x, dout, "max", wins, k)
    np.testing.assert_array_equal(out, want)
    np.testing.assert_allclose(dx, want_dx, rtol=1e-12)
    out, dout, dx = run("pool2d", x, ksize=[2, 2], strides=[2, 2])
    assert out.shape == (1, 2, 2, 2)                    # no ceil_mode
    wins, k = geometry((5, 5), (2, 2), (2, 2), [(0, 0)] * 2)
    want, want_dx, _ = ref_pool(x, dout, "max", wins, k)
    np.testing.assert_allclose(dx, want_dx, rtol=1e-12)
    spec = get_op_def("pool2d").infer(VarSpec([1, 2, 5, 5], "float32"), ksize=[2, 2])["Out"]
    assert list(spec.shape) == [1, 2, 4, 4]
    x3 = ties((1, 2, 3, 5, 5), seed=24)
    out, dout, dx = run("pool3d", x3, ksize=[2, 2, 2], strides=[2, 2, 2])
    assert out.shape == (1, 2, 1, 2, 2)
    wins, k = geometry((3, 5, 5), (2,) * 3, (2,) * 3, [(0, 0)] * 3)
    want, want_dx, _ = ref_pool(x3, dout, "max", wins, k)
    np.testing.assert_array_equal(out, want)
    np.testing.assert_allclose(dx, want_dx, rtol=1e-12)
    spec = get_op_def("pool3d").infer(VarSpec([1, 2, 3, 5, 5], "float32"), ksize=[2, 2, 2],
                                      data_format="AnyLayout")["Out"]
    assert list(spec.shape) == [1, 2, 2, 4, 4] and spec.dtype == VarSpec((), "float32").dtype
    out = get_op_def("pool3d").forward(x3, ksize=[2, 2, 2], data_format="AnyLayout")["Out"]
    wins, k = geometry((3, 5, 5), (2,) * 3, (1,) * 3, [(0, 0)] * 3)
    np.testing.assert_array_equal(out, ref_pool(x3, np.zeros((1, 2, 2, 4, 4)), "max", wins,
                                                k)[0])


@pytest.mark.parametrize("op,n", [("pool2d", 2), ("pool3d", 3)])
def test_kernel_errors_name_the_op(op, n):
    x = ties((1, 1) + (4,) * n)
    opdef = get_op_def(op)
    out = np.zeros((1, 1) + (2,) * n)
    fmt = "NCHW' or 'NHWC" if n == 2 else "NCDHW' or 'NDHWC"
    for fn, args in ((opdef.forward, (x,)), (opdef.backward, (x, out, out))):
        with pytest.raises(ValueError, match=re.escape(
                f"{op}: data_format must be '{fmt}', got 'NWHC'")):
            fn(*args, ksize=[2] * n, data_format="NWHC")
        with pytest.raises(ValueError, match=re.escape(
                f"{op}: the adaptive output size (ksize) must be positive, got "
                f"{[0] + [2] * (n - 1)}")):
            fn(*args, ksize=[0] + [2] * (n - 1), adaptive=True)
        with pytest.raises(ValueError, match="^" + re.escape(op + ": ")):
            fn(*args, ksize=[0] + [2] * (n - 1))
    for name in ("max_pool2d_with_index", "max_pool3d_with_index"):
        m = 2 if "2d" in name else 3
        with pytest.raises(ValueError, match="^" + re.escape(
                f"{name}: ksize and strides must have {m} values, got ksize [2], strides "
                f"{[1] * m}") + "$"):
            get_op_def(name).infer(VarSpec([1, 1] + [4] * m, "float32"), ksize=[2])
        with pytest.raises(ValueError, match="^" + re.escape(f"{name}: ksize and strides must "
                                                             "be positive")):
            get_op_def(name).forward(ties((1, 1) + (4,) * m), ksize=[0] * m)


def test_same_padding_with_an_unknown_dim_still_pads_the_known_ones():
    out = get_op_def("pool3d").infer(VarSpec([1, 2, -1, 5, 5], "float32"), ksize=[2, 2, 2],
                                     strides=[2, 2, 2], padding_algorithm="SAME")["Out"]
    assert list(out.shape) == [1, 2, -1, 3, 3]
    out = get_op_def("pool2d").infer(VarSpec([1, 2, -1, 5], "float32"), ksize=[2, 2],
                                     strides=[2, 2], padding_algorithm="SAME")["Out"]
    assert list(out.shape) == [1, 2, -1, 3]


@pytest.mark.parametrize("ptype", ["max", "avg"])
@pytest.mark.parametrize("adaptive", [False, True])
def test_pool3d_float32_gradients_stay_float32(ptype, adaptive):
    x = ties((1, 2, 4, 5, 5), seed=25).astype(np.float32)
    attrs = dict(pooling_type=ptype, ksize=[2, 3, 2], strides=[2, 1, 2], paddings=[1, 0, 1],
                 adaptive=adaptive)
    opdef = get_op_def("pool3d")
    out = opdef.forward(x, **attrs)["Out"]
    dout = np.random.default_rng(26).standard_normal(out.shape).astype(np.float32)
    dx = opdef.backward(x, out, dout, **attrs)["X"]
    assert out.dtype == dx.dtype == np.float32
    if adaptive:
        wins, k = geometry((4, 5, 5), (2, 3, 2), None, None, adaptive=True)
    else:
        wins, k = geometry((4, 5, 5), (2, 3, 2), (2, 1, 2), [(1, 1), (0, 0), (1, 1)])
    want, want_dx, _ = ref_pool(x.astype(np.float64), dout.astype(np.float64), ptype, wins, k,
                                adaptive=adaptive)
    np.testing.assert_allclose(out, want, rtol=1e-6)
    np.testing.assert_allclose(dx, want_dx, rtol=1e-5, atol=1e-6)
    spec = opdef.infer(VarSpec([1, 2, 4, 5, 5], "float32"), **attrs)["Out"]
    assert spec.dtype == VarSpec((), "float32").dtype


@pytest.mark.parametrize("op,n", [("max_pool2d_with_index", 2), ("max_pool3d_with_index", 3)])
def test_max_pool_with_index_float32_and_global_infer(op, n):
    x = ties((2, 3) + (5,) * n, seed=27).astype(np.float32)
    opdef = get_op_def(op)
    res = opdef.forward(x, ksize=[2] * n, strides=[2] * n)
    dout = np.random.default_rng(28).standard_normal(res["Out"].shape).astype(np.float32)
    dx = opdef.backward(x, res["Mask"], dout, ksize=[2] * n, strides=[2] * n)["X"]
    assert res["Out"].dtype == dx.dtype == np.float32
    wins, k = geometry((5,) * n, (2,) * n, (2,) * n, [(0, 0)] * n)
    want, want_dx, _ = ref_pool(x.astype(np.float64), dout.astype(np.float64), "max", wins, k)
    np.testing.assert_allclose(dx, want_dx, rtol=1e-6)
    specs = opdef.infer(VarSpec(list(x.shape), "float32"), ksize=[2] * n)
    assert specs["Out"].dtype == VarSpec((), "float32").dtype
    specs = opdef.infer(VarSpec(list(x.shape), "float32"), ksize=[2] * n, global_pooling=True)
    assert list(specs["Out"].shape) == [2, 3] + [1] * n
    specs = opdef.infer(VarSpec(list(x.shape), "float32"), ksize=[2] * n, global_pooling=True,
                        adaptive=True)
    assert list(specs["Out"].shape) == list(x.shape)
