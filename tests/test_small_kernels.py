"""The small-tensor fast paths of the loss, norm, update and mean kernels equal the general
computations they replace, bit for bit (the references below are those computations, written
out): one-reduction label validation, flat gather/scatter of the labelled logits, the one-piece
``sum_squares``, the global norm on Python floats, the lean sgd group and mean_grad's fill."""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from fluidlite.core import registry
from fluidlite.executor import fusion
from fluidlite.ops import inplace, loss as L

SWCE = registry.get_op_def("softmax_with_cross_entropy")


# -- references: the general computations -------------------------------------------------------
def ref_hard_labels(label, n_class, ignore_index):
    """The two-reduction check + general path (the previous ``_hard_labels``)."""
    lo, hi = label.min(initial=0), label.max(initial=0)
    if 0 <= lo and hi < n_class and not lo <= ignore_index <= hi:
        return label, None
    ign = label == ignore_index
    bad = (label < 0) | (label >= n_class)
    bad &= ~ign
    if bad.any():
        raise ValueError("bad label")
    if ign.any():
        return np.where(ign, 0, label), ign
    return label, None


def ref_swce(x, label, ignore_index=-100, axis=-1):
    """Hard-label softmax_with_cross_entropy forward and backward with take_along_axis and
    2-D fancy indexing (dLoss = 1/rows): fluid's SoftmaxFunctor (shifted logits clipped at
    -64, times the reciprocal of their sum) and -TolerableValue(log(p[label])). The row max
    is ``fmax``'s and the row sum einsum's, as fluid_softmax computes them (the bits)."""
    last = axis in (-1, x.ndim - 1)
    xm = x if last else np.moveaxis(x, axis, -1)
    lab = label if last else np.moveaxis(label, axis, -1)
    z = xm - np.fmax.reduce(xm, axis=-1, keepdims=True)
    z = np.maximum(z, z.dtype.type(-64))
    sm = np.exp(z)
    sm *= np.reciprocal(np.einsum("...i->...", sm)[..., None])
    idx, ign = ref_hard_labels(lab, xm.shape[-1], ignore_index)
    with np.errstate(divide="ignore", invalid="ignore"):
        loss = L._tolerable(-np.log(np.take_along_axis(sm, idx, axis=-1)))
    if ign is not None:
        loss[ign] = 0
    dl = np.full(loss.shape, 1.0 / max(loss.size, 1), x.dtype)
    c = sm.shape[-1]
    dx = (sm * dl).reshape(-1, c)
    dx[np.arange(dx.shape[0]), idx.reshape(-1)] -= dl.reshape(-1)
    if ign is not None:
        dx[ign.reshape(-1)] = 0
    dx = dx.reshape(sm.shape)
    if not last:
        sm, loss = np.moveaxis(sm, -1, axis), np.moveaxis(loss, -1, axis)
        dx, dl = np.moveaxis(dx, -1, axis), np.moveaxis(dl, -1, axis)
    return sm, loss, dl, dx


def ref_sum_squares(x):
    """The chunked loop of ``sum_squares``: a float32 piece by a float32 dot unless that is not
    finite or below ``_TINY``, anything else in float64 through the scratch buffer."""
    flat = x.reshape(-1)
    buf = inplace.scratch(np.float64, 1, "sum_squares")[0]
    total = 0.0
    for a in range(0, flat.size, inplace.CHUNK):
        b = min(a + inplace.CHUNK, flat.size)
        if flat.dtype == np.float32:
            with np.errstate(over="ignore", invalid="ignore"):
                s = float(np.dot(flat[a:b], flat[a:b]))
            if inplace._TINY <= s < math.inf:
                total += s
                continue
        v = buf[:b - a]
        np.copyto(v, flat[a:b])
        total += float(np.dot(v, v))
    return total


def same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    assert a.tobytes() == b.tobytes()


# -- softmax_with_cross_entropy -------------------------------------------------------------------
def _logits(shape, dtype, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype) * 3


CASES = [  # (logits shape, axis, ignore_index, label dtype)
    ((16, 10), -1, -100, np.int64),
    ((16, 10), -1, 3, np.int64),         # in-range ignore_index, some rows ignored
    ((16, 10), -1, 7, np.int32),
    ((1, 1), -1, -100, np.int64),
    ((4, 5, 6), -1, -100, np.int64),     # 3-D
    ((4, 5, 6), -1, 2, np.uint8),
    ((4, 5, 6), 1, -100, np.int64),      # class axis in the middle
    ((4, 5, 6), 0, 1, np.int64),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,axis,ignore,ldt", CASES)
def test_swce_hard_labels_match_general_path(dtype, shape, axis, ignore, ldt):
    x = _logits(shape, dtype)
    a = axis % len(shape)
    lshape = tuple(1 if i == a else d for i, d in enumerate(shape))
    label = np.random.default_rng(1).integers(0, shape[a], lshape).astype(ldt)
    if 0 <= ignore < shape[a]:
        label.reshape(-1)[::3] = ignore
    sm, loss, dl, dx = ref_swce(x, label, ignore, axis)
    out = SWCE.forward(x, label, ignore_index=ignore, axis=axis)
    same(out["Softmax"], sm)
    same(out["Loss"], loss)
    got = SWCE.backward(label, out["Softmax"], dl, ignore_index=ignore, axis=axis)
    same(got["Logits"], dx)


def test_swce_ignore_index_equal_to_negative_labels():
    x = _logits((8, 5), np.float32)
    label = np.array([[0], [-100], [4], [-100], [1], [2], [3], [0]], np.int64)
    sm, loss, dl, dx = ref_swce(x, label, -100)
    out = SWCE.forward(x, label)
    same(out["Loss"], loss)
    assert out["Loss"][1, 0] == 0 and out["Loss"][3, 0] == 0
    same(SWCE.backward(label, out["Softmax"], dl)["Logits"], dx)


def test_swce_non_finite_logits_match_general_path():
    x = _logits((6, 4), np.float32)
    x[0, 1] = -np.inf        # the labelled logit: loss 64 + log(sum) (fluid's ValueClip)
    x[1, :] = np.inf         # NaN row
    x[2, 3] = np.nan
    x[3, :] = -np.inf
    label = np.array([[1], [0], [2], [0], [3], [1]], np.int64)
    with np.errstate(invalid="ignore"):
        sm, loss, dl, dx = ref_swce(x, label)
        out = SWCE.forward(x, label)
        got = SWCE.backward(label, out["Softmax"], dl)["Logits"]
    same(out["Softmax"], sm)
    same(out["Loss"], loss)
    assert 64 < out["Loss"][0, 0] < 70
    same(got, dx)


@pytest.mark.parametrize("bad", [-1, 10, -100])
def test_swce_bad_label_raises_before_any_result(bad):
    x = _logits((4, 10), np.float32)
    label = np.array([[1], [2], [bad], [3]], np.int64)
    ignore = -100 if bad != -100 else 5
    with pytest.raises(ValueError, match=f"label {bad} is out of range"):
        SWCE.forward(x, label, ignore_index=ignore)
    with pytest.raises(ValueError, match=f"label {bad} is out of range"):
        SWCE.backward(label, x, np.ones((4, 1), np.float32), ignore_index=ignore)


@pytest.mark.parametrize("ldt", [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint64])
def test_all_valid_one_reduction_agrees_with_min_max(ldt):
    rng = np.random.default_rng(2)
    info = np.iinfo(ldt)
    for n_class in (1, 5, 127):
        for ignore in (-100, 0, 3, n_class):
            for _ in range(20):
                lab = rng.integers(max(info.min, -3), min(info.max, n_class + 2), (7, 1),
                                   dtype=ldt)
                lo, hi = lab.min(), lab.max()
                want = bool(lo >= 0 and hi < n_class and not (lab.astype(np.int64) == ignore).any())
                if L._all_valid(lab, n_class, ignore):
                    assert want
                elif not (0 <= ignore < n_class):
                    assert not want     # outside the class range it decides exactly
    assert not L._all_valid(np.zeros((0, 1), np.int64), 3, -100)     # empty: general path


def test_swce_soft_labels_unchanged():
    x = _logits((5, 4), np.float64)
    lab = np.random.default_rng(3).random((5, 4))
    lab /= lab.sum(-1, keepdims=True)
    out = SWCE.forward(x, lab, soft_label=True)
    z = np.maximum(x - np.fmax.reduce(x, -1, keepdims=True), -64.0)
    p = np.exp(z)
    p *= np.reciprocal(np.einsum("ij->i", p)[:, None])     # (fluid_softmax's row sums)
    same(out["Loss"], np.sum(lab * L._tolerable(-np.log(p)), -1, keepdims=True,
                             dtype=x.dtype))


# -- global norm ----------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [0, 1, 17, 4096, inplace.CHUNK - 1, inplace.CHUNK,
                               inplace.CHUNK + 1, 2 * inplace.CHUNK + 5])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sum_squares_one_piece_equals_chunked_loop(n, dtype):
    x = np.random.default_rng(n).standard_normal(n).astype(dtype)
    assert inplace.sum_squares(x) == ref_sum_squares(x)
    if n:
        x[n // 2] = np.inf
        assert inplace.sum_squares(x) == math.inf
        x[0] = np.nan
        assert math.isnan(inplace.sum_squares(x))


@pytest.mark.parametrize("case", ["plain", "overflow", "tiny", "nan", "float64", "many",
                                  "big", "strided"])
def test_sum_squares_many_is_sum_squares_of_each(case):
    rng = np.random.default_rng(7)
    xs = [rng.standard_normal(s).astype(np.float32) for s in [(64, 64), (64,), (10,), (1,)]]
    if case == "overflow":
        xs[1][3] = 3e38                 # a float32 dot overflows: redone in float64
    elif case == "tiny":
        xs[2][:] = 1e-25                # squares underflow in float32: redone in float64
    elif case == "nan":
        xs[0][1, 1] = np.nan
    elif case == "float64":
        xs[3] = xs[3].astype(np.float64)
    elif case == "many":
        xs = xs * 3                     # more than a few: one errstate for all
    elif case == "big":
        xs.append(rng.standard_normal(inplace.CHUNK + 3).astype(np.float32))
    elif case == "strided":
        xs[0] = xs[0][:, ::2]
    with warnings.catch_warnings():
        warnings.simplefilter("error")      # no floating-point warning escapes
        got = inplace.sum_squares_many(xs)
    want = [inplace.sum_squares(x) for x in xs]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g == w or (math.isnan(g) and math.isnan(w))


def test_global_norm_values_on_floats():
    rng = np.random.default_rng(4)
    xs = [rng.standard_normal(s).astype(np.float32) for s in [(64, 64), (64,), (10,), (1,)]]
    gn = fusion._GlobalNorm(None, np.dtype(np.float32), 1.0, None, None, ["Scale"])
    total = ref_sum_squares(xs[0])
    for x in xs[1:]:
        total += ref_sum_squares(x)
    norm = math.sqrt(total)
    assert gn.values(xs) == (norm, 1.0 / max(norm, 1.0))
    # an infinite norm still reaches check_finite_norm with one [1] array per gradient
    xs[2][3] = np.inf
    checked = fusion._GlobalNorm(None, np.dtype(np.float32), 1.0, None, ["a", "b", "c", "d"],
                                 ["Scale"])
    with pytest.raises(FloatingPointError, match=r"non-finite gradients: c \(squared norm inf"):
        checked.values(xs)


# -- sgd group --------------------------------------------------------------------------------
@pytest.mark.parametrize("scaled", [False, True])
def test_sgd_group_at_the_size_threshold(scaled):
    rng = np.random.default_rng(5)
    sizes = [fusion._SMALL, fusion._SMALL + 1, 10, 1]
    ps = [rng.standard_normal(n).astype(np.float32) for n in sizes]
    ps.append(rng.standard_normal(7))                  # a float64 parameter, same lr
    gs = [rng.standard_normal(p.shape).astype(p.dtype) for p in ps]
    lr = np.array([0.01], np.float32)
    lr2 = np.array([0.5], np.float32)
    lrs = [lr, lr, lr2, lr, lr]
    scale = np.array([0.37], np.float32)
    want = []
    for p, g, r in zip(ps, gs, lrs):
        if scaled:
            c = fusion._lr_times_scale(r, fusion.grad_scale(scale, p.dtype), p.dtype)
            want.append(p - g * np.asarray(c))
        else:
            want.append(p - g * r.reshape(()))
    slots = ["Param", "LearningRate", "Grad"]
    grp = fusion._UpdateGroup("sgd", slots, ["ParamOut"], [{}] * 5, [True] * 5, scaled)
    cols = (ps, lrs, gs) + ((scale,) if scaled else ())
    out = grp.forward(*cols)["ParamOut"]
    for o, p, w in zip(out, ps, want):
        assert o is p
        same(o, w)


# -- mean_grad ------------------------------------------------------------------------------------
@pytest.mark.parametrize("xdt,ddt", [(np.float32, np.float32), (np.float64, np.float64),
                                     (np.float32, np.float64), (np.float16, np.float16)])
def test_mean_grad_fill_equals_np_full(xdt, ddt):
    mean = registry.get_op_def("mean")
    for shape in [(16, 10), (3,), (0, 4), ()]:
        x = np.zeros(shape, xdt)
        for d in (1.0, np.inf, np.nan, 3e-39):
            dout = np.array([d], ddt)
            with np.errstate(over="ignore", under="ignore"):
                want = np.full(shape, dout.reshape(()) / max(x.size, 1), dtype=xdt)
                same(mean.backward(x, dout)["X"], want)
