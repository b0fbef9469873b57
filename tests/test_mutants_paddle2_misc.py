"""Tests written from mutation testing (issue 28, docs/mutation.md, round 11) for
``fluidlite/ops/paddle2_misc.py`` (small Paddle 2.x ops): every op's shape / dtype inference
(unknown -1 dims, broadcasting, keepdim, 0-D inputs), the attribute defaults (Paddle 2.6's),
fill_diagonal's offsets and wrapping, isclose's tolerance tensors and defaults, the bitwise
ops' accepted dtypes and message, kthvalue / mode on other axes, with keepdim and on 0-D
inputs, bincount's weights and minlength, searchsorted on 3-D sequences, nms's IoU with
x / y mixed, unique_consecutive along an axis, and logcumsumexp (values and gradients on
3-D inputs along every axis, -inf entries, inputs of magnitude > 709, empty axes).

References: the real Paddle 2.6.2 (its numbers quoted in comments, obtained with
/tmp/paddle-venv: fill_diagonal_, isclose, bincount, searchsorted, vision.ops.nms,
unique_consecutive, tril / triu_indices, logcumsumexp and its gradient), a float64
logcumsumexp written here (each prefix's log-sum-exp shifted by that prefix's own max) with
central differences for its gradient, and NumPy (np.tril_indices, np.fmax, loops; a stable
Python sort for kthvalue's ties)."""
import warnings

import numpy as np
import pytest

from fluidlite.core.dtypes import VarType
from fluidlite.core.registry import VarSpec, get_op_def

F32, F64, I32, I64, BOOL = VarType.FP32, VarType.FP64, VarType.INT32, VarType.INT64, \
    VarType.BOOL
LOWEST = np.finfo(np.float64).min


def spec(shape, dtype=F64):
    return VarSpec(tuple(shape), dtype)


def op(t):
    return get_op_def(t)


# -- pass-throughs and fills ----------------------------------------------------------------
def test_pass_through_inference_and_defaults():
    x = spec((2, -1), F32)
    for t in ("share_data", "memcpy_d2h", "memcpy_h2d"):
        assert op(t).infer(x) == {"Out": x}
    assert op("depend").infer(x, [spec((3,))]) == {"Out": x}
    a = np.arange(6.0).reshape(2, 3)
    for t in ("memcpy_d2h", "memcpy_h2d"):
        out = op(t).forward(a)["Out"]
        assert out is not a and (out == a).all()
        assert op(t).backward(a)["X"] is a
        assert (op(t).forward(a, dst_place_type=1)["Out"] == a).all()


def test_fill_any_default_value_dtype_and_gradient():
    fa = op("fill_any")
    assert fa.infer(spec((2, -1), I32)) == {"Out": spec((2, -1), I32)}
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    out = fa.forward(x)["Out"]                         # Paddle's default value: 0
    assert out.dtype == np.int32 and out.tolist() == [[0, 0, 0], [0, 0, 0]]
    out = fa.forward(x.astype(np.float32), value=1.5)["Out"]
    assert out.dtype == np.float32 and (out == 1.5).all()
    g = fa.backward(x, np.ones((2, 3), np.float32))["X"]
    assert g.dtype == np.float32 and not g.any()


# Paddle 2.6: paddle.zeros(shape).fill_diagonal_(1.0, offset, wrap), argwhere of the ones
FILL_DIAGONAL_PADDLE = [
    ((7, 3), 0, True, [[0, 0], [1, 1], [2, 2], [4, 0], [5, 1], [6, 2]]),
    ((7, 3), 1, True, [[0, 1], [1, 2], [4, 1], [5, 2]]),
    ((7, 3), -1, True, [[1, 0], [2, 1], [5, 0], [6, 1]]),
    ((7, 3), 1, False, [[0, 1], [1, 2]]),
    ((3, 5), 2, False, [[0, 2], [1, 3], [2, 4]]),
    ((3, 5), -2, False, [[2, 0]]),
    ((3, 5), 1, True, [[0, 1], [1, 2], [2, 3]]),
    ((5, 5), -1, True, [[1, 0], [2, 1], [3, 2], [4, 3]]),
]


@pytest.mark.parametrize("shape,offset,wrap,want", FILL_DIAGONAL_PADDLE)
def test_fill_diagonal_offsets_and_wrap_as_paddle(shape, offset, wrap, want):
    fd = op("fill_diagonal")
    out = fd.forward(np.zeros(shape), value=1.0, offset=offset, wrap=wrap)["Out"]
    assert np.argwhere(out == 1.0).tolist() == want
    g = fd.backward(np.zeros(shape), np.ones(shape), value=1.0, offset=offset, wrap=wrap)["X"]
    assert np.argwhere(g == 0).tolist() == want and (g[g != 0] == 1).all()


def test_fill_diagonal_defaults_cubes_and_inference():
    fd = op("fill_diagonal")
    x = np.full((5, 2), 7.0)
    # defaults value=0, offset=0, wrap=False: only (0, 0) and (1, 1)
    assert np.argwhere(fd.forward(x)["Out"] == 0).tolist() == [[0, 0], [1, 1]]
    assert np.argwhere(fd.backward(x, x)["X"] == 0).tolist() == [[0, 0], [1, 1]]
    cube = fd.forward(np.zeros((2, 2, 2, 2)), value=1.0)["Out"]
    assert np.argwhere(cube == 1.0).tolist() == [[0, 0, 0, 0], [1, 1, 1, 1]]
    g = fd.backward(np.zeros((3, 3, 3)), np.ones((3, 3, 3)))["X"]
    assert np.argwhere(g == 0).tolist() == [[0, 0, 0], [1, 1, 1], [2, 2, 2]]
    assert fd.infer(spec((2, 3), F32)) == {"Out": spec((2, 3), F32)}
    assert fd.infer(spec((3, 3, 3))) == {"Out": spec((3, 3, 3))}
    with pytest.raises(ValueError) as e:
        fd.infer(spec((2, 2, 3)))
    assert str(e.value) == ("fill_diagonal: a tensor of more than 2 dims must have equal "
                            "dims, got [2, 2, 3]")


# -- comparisons ------------------------------------------------------------------------------
@pytest.mark.parametrize("t,dtype", [("isclose", BOOL), ("elementwise_fmax", F32),
                                     ("elementwise_fmin", F32)])
def test_binary_inference_broadcast_and_unknown_dims(t, dtype):
    assert op(t).infer(spec((2, 1, 4), F32), spec((3, 1), F32)) == \
        {"Out": spec((2, 3, 4), dtype)}
    assert op(t).infer(spec((-1, 4), F32), spec((3, 2, 4), F32)) == \
        {"Out": spec((-1, -1, -1), dtype)}
    assert op(t).infer(spec((4,), F32), spec((2, -1), F32)) == {"Out": spec((-1, -1), dtype)}


def test_isclose_defaults_and_tolerance_tensors():
    ic = op("isclose")
    a = np.array([1.0, 1.0, 0.0, 100.0, 1e-9])
    b = np.array([1.0 + 9e-6, 1.0 + 2e-5, 5e-9, 100.0 + 2e-3, 0.0])
    # Paddle 2.6, paddle.isclose(a, b) (rtol 1e-05, atol 1e-08): [T, F, T, F, T]
    assert ic.forward(a, b)["Out"].tolist() == [True, False, True, False, True]
    # Paddle 2.6: NaN against NaN is not close by default (equal_nan=False)
    assert ic.forward(np.array([np.nan, 1.0]), np.array([np.nan, np.nan]))["Out"].tolist() \
        == [False, False]
    nan = ic.forward(np.array([np.nan, 1.0, np.nan]), np.array([np.nan, np.nan, 1.0]),
                     equal_nan=True)["Out"]
    assert nan.tolist() == [True, False, False]
    x, y = np.array([1.0, 2.0]), np.array([1.05, 2.3])
    assert ic.forward(x, y, np.array([[0.1]]))["Out"].tolist() == [True, False]
    assert ic.forward(x, y, None, np.array([0.2]))["Out"].tolist() == [True, False]
    assert ic.forward(x, y, None, np.array([0.2]), atol="0.5")["Out"].tolist() == \
        [True, False]
    assert ic.forward(x, y, rtol="0.2", atol="0.0")["Out"].tolist() == [True, True]
    with warnings.catch_warnings():
        warnings.simplefilter("error")                  # inf - inf: no RuntimeWarning
        got = ic.forward(np.array([np.inf, -np.inf]), np.array([np.inf, np.inf]))["Out"]
    assert got.dtype == np.bool_ and got.tolist() == [True, True]


def test_fmax_fmin_gradients_ties_nan_broadcast_and_float32():
    x = np.array([[1.0, np.nan, 3.0], [2.0, 5.0, np.nan]], np.float32)
    y = np.array([1.0, 4.0, np.nan], np.float32)
    d = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], np.float32)
    for t, pick in (("elementwise_fmax", np.fmax), ("elementwise_fmin", np.fmin)):
        out = op(t).forward(x, y)["Out"]
        np.testing.assert_array_equal(out, pick(x, y))
        g = op(t).backward(x, y, d)
        assert g["X"].dtype == np.float32 and g["Y"].dtype == np.float32
        # X wins ties, and where Y is NaN; Y takes the rest (X NaN included); Y's summed
        # over the broadcast rows
        take_x = (np.greater_equal if t == "elementwise_fmax" else np.less_equal)(x, y) | \
            np.isnan(y)
        np.testing.assert_array_equal(g["X"], np.where(take_x, d, 0))
        np.testing.assert_array_equal(g["Y"], np.where(take_x, 0, d).sum(0))
    g = op("elementwise_fmax").backward(x, y, d)
    assert g["X"].tolist() == [[1.0, 0.0, 3.0], [4.0, 5.0, 6.0]]
    assert g["Y"].tolist() == [0.0, 2.0, 0.0]


@pytest.mark.parametrize("dtype", [BOOL, VarType.UINT8, VarType.INT8, VarType.INT16, I32,
                                   I64])
def test_bitwise_accepts_bool_and_integers(dtype):
    for t in ("bitwise_and", "bitwise_or", "bitwise_xor"):
        assert op(t).infer(spec((2, 1), dtype), spec((3,), dtype)) == \
            {"Out": spec((2, 3), dtype)}
        assert op(t).infer(spec((-1, 3), dtype), spec((3,), dtype)) == \
            {"Out": spec((-1, -1), dtype)}
    assert op("bitwise_not").infer(spec((-1, 3), dtype)) == {"Out": spec((-1, 3), dtype)}


def test_bitwise_values_dtypes_and_errors():
    a = np.array([[5, -3], [12, 0]], np.int8)
    b = np.array([3, 6], np.int8)
    for t, f in (("bitwise_and", np.bitwise_and), ("bitwise_or", np.bitwise_or),
                 ("bitwise_xor", np.bitwise_xor)):
        out = op(t).forward(a, b)["Out"]
        assert out.dtype == np.int8 and out.tolist() == f(a, b).tolist()
    out = op("bitwise_not").forward(np.array([True, False]))["Out"]
    assert out.tolist() == [False, True]
    for t, args in (("bitwise_or", (spec((2,), F64), spec((2,), F64))),
                    ("bitwise_not", (spec((2,), VarType.FP16),))):
        with pytest.raises(ValueError) as e:
            op(t).infer(*args)
        want = "fp64" if t == "bitwise_or" else "fp16"        # (VarType names)
        assert str(e.value) == f"{t}: X must be a bool or integer tensor, got {want}"


# -- kthvalue / mode --------------------------------------------------------------------------
@pytest.mark.parametrize("t", ["kthvalue", "mode"])
def test_select_inference(t):
    x = spec((2, 3, 4), F32)
    assert op(t).infer(x) == {"Out": spec((2, 3), F32), "Indices": spec((2, 3), I64)}
    assert op(t).infer(x, axis=1, keepdim=True) == \
        {"Out": spec((2, 1, 4), F32), "Indices": spec((2, 1, 4), I64)}
    assert op(t).infer(x, axis=-3) == {"Out": spec((3, 4), F32), "Indices": spec((3, 4), I64)}
    assert op(t).infer(spec((), F32)) == {"Out": spec((), F32), "Indices": spec((), I64)}
    with pytest.raises(ValueError, match=t):
        op(t).infer(x, axis=3)


@pytest.mark.parametrize("t", ["kthvalue", "mode"])
def test_select_zero_d_inputs(t):
    x = np.array(2.5, np.float32)
    res = op(t).forward(x)
    assert res["Out"].dtype == np.float32 and res["Out"].shape == () and res["Out"] == 2.5
    assert res["Indices"].dtype == np.int64 and res["Indices"].shape == () and \
        res["Indices"] == 0
    g = op(t).backward(x, res["Indices"], np.array(3.0, np.float32))["X"]
    assert g.shape == () and g == 3.0


def test_kthvalue_defaults_bounds_axes_and_keepdim():
    kv = op("kthvalue")
    x = np.array([[3.0, 1.0, 2.0], [0.5, 4.0, -1.0]], np.float32)
    res = kv.forward(x)                                 # k = 1, the last axis, no keepdim
    assert res["Out"].dtype == np.float32 and res["Out"].tolist() == [1.0, -1.0]
    assert res["Indices"].tolist() == [1, 2]
    res = kv.forward(x, k=3)                            # k = the size of the axis
    assert res["Out"].tolist() == [3.0, 4.0] and res["Indices"].tolist() == [0, 1]
    res = kv.forward(x, k=2, axis=0, keepdim=True)
    assert res["Out"].tolist() == [[3.0, 4.0, 2.0]] and res["Indices"].tolist() == [[0, 1, 0]]
    with pytest.raises(ValueError) as e:
        kv.forward(x, k=0)
    assert str(e.value) == "kthvalue: k must be in [1, 3] (the size of axis 1), got 0"
    with pytest.raises(ValueError, match=r"k must be in \[1, 2\] \(the size of axis 0\)"):
        kv.forward(x, k=3, axis=0)
    # the gradient lands at Indices, with and without keepdim, along axis 0 and 1
    x3 = np.random.default_rng(5).permutation(24).reshape(2, 3, 4).astype(np.float64)
    for axis, keep in ((0, True), (1, False), (-1, True)):
        res = kv.forward(x3, k=2, axis=axis, keepdim=keep)
        d = np.arange(1.0, 1 + res["Out"].size).reshape(res["Out"].shape)
        g = kv.backward(x3, res["Indices"], d, k=2, axis=axis, keepdim=keep)["X"]
        want = np.zeros(x3.shape)
        a = axis % 3
        for idx in np.ndindex(*res["Out"].shape):
            pos = list(idx)
            if not keep:
                pos.insert(a, 0)
            src = list(pos)
            src[a] = int(res["Indices"][idx])
            assert x3[tuple(src)] == np.sort(np.moveaxis(x3, a, -1), -1)[
                tuple(p for i, p in enumerate(src) if i != a)][1]        # the 2nd smallest
            want[tuple(src)] += d[idx]
        np.testing.assert_array_equal(g, want)


def test_kthvalue_ties_follow_a_stable_sort():
    # many ties in a long row: the index is the k-th of a stable sort (Python's sorted on
    # (value, position)), NumPy's default quicksort is not stable beyond 16 items
    rng = np.random.default_rng(11)
    x = rng.integers(0, 3, (2, 40)).astype(np.float64)
    for k in (1, 7, 20, 33, 40):
        res = op("kthvalue").forward(x, k=k)
        for r in range(2):
            i = sorted(range(40), key=lambda j: (x[r, j], j))[k - 1]
            assert res["Indices"][r] == i and res["Out"][r] == x[r, i]


def test_mode_axes_keepdim_dtype_and_gradient():
    md = op("mode")
    x = np.array([[[3, 1, 2, 1, 2], [5, 5, 4, 4, 4]], [[0, 0, 9, 9, 9], [7, 8, 9, 7, 8]]],
                 np.int32)
    res = md.forward(x)
    # (Paddle 2.6 on the first two rows: values [1, 4], indices [3, 4])
    assert res["Out"].dtype == np.int32 and res["Out"].tolist() == [[1, 4], [9, 7]]
    assert res["Indices"].dtype == np.int64 and res["Indices"].tolist() == [[3, 4], [4, 3]]
    res = md.forward(x, axis=0, keepdim=True)
    assert res["Out"].shape == (1, 2, 5) and res["Indices"].shape == (1, 2, 5)
    assert res["Out"][0, 0].tolist() == [0, 0, 2, 1, 2]
    res = md.forward(x.astype(np.float64), axis=1)
    assert res["Out"].tolist() == [[3, 1, 2, 1, 2], [0, 0, 9, 7, 8]]
    assert res["Indices"].tolist() == [[0, 0, 0, 0, 0], [0, 0, 1, 1, 1]]
    d = np.arange(10.0).reshape(2, 5)
    g = md.backward(x.astype(np.float64), res["Indices"], d, axis=1)["X"]
    want = np.zeros(x.shape)
    for b in range(2):
        for c in range(5):
            want[b, res["Indices"][b, c], c] = d[b, c]
    np.testing.assert_array_equal(g, want)
    res = md.forward(x.astype(np.float64), axis=1, keepdim=True)
    g2 = md.backward(x.astype(np.float64), res["Indices"], d[:, None, :], axis=1,
                     keepdim=True)["X"]
    np.testing.assert_array_equal(g2, want)


# -- bincount / searchsorted / nms ------------------------------------------------------------
def test_bincount_weights_minlength_and_inference():
    bc = op("bincount")
    assert bc.infer(spec((4,), I64), spec((4,), F32)) == {"Out": spec((-1,), F32)}
    assert bc.infer(spec((4,), I32)) == {"Out": spec((-1,), I64)}
    x = np.array([0, 2, 2, 5])
    out = bc.forward(x, np.array([0.5, 1.0, 2.0, 3.0], np.float32))["Out"]
    # Paddle 2.6: [0.5, 0.0, 3.0, 0.0, 0.0, 3.0], float32
    assert out.dtype == np.float32 and out.tolist() == [0.5, 0.0, 3.0, 0.0, 0.0, 3.0]
    out = bc.forward(x, np.array([1, 2, 3, 4], np.int32), minlength=8)["Out"]
    assert out.dtype == np.int32 and out.tolist() == [1, 0, 5, 0, 0, 4, 0, 0]
    assert bc.forward(np.array([], np.int64))["Out"].tolist() == []        # Paddle 2.6: []
    assert bc.forward(np.array([], np.int64), minlength=-2)["Out"].tolist() == []
    assert bc.forward(np.array([1], np.int64), minlength=3)["Out"].tolist() == [0, 1, 0]
    with pytest.raises(ValueError) as e:
        bc.forward(np.array([3, -2, 1]))
    assert str(e.value) == "bincount: X must not be negative, but holds -2"


def test_searchsorted_defaults_shapes_and_errors():
    ss = op("searchsorted")
    assert ss.infer(spec((2, 4)), spec((2, 3))) == {"Out": spec((2, 3), I64)}
    assert ss.infer(spec((4,)), spec((-1, 3)), out_int32=True) == {"Out": spec((-1, 3), I32)}
    s, v = np.array([1.0, 2.0, 2.0, 5.0]), np.array([[2.0, 0.0], [5.0, 6.0]])
    # Paddle 2.6: left [[1, 0], [3, 4]], right [[3, 0], [4, 4]]
    out = ss.forward(s, v)["Out"]
    assert out.dtype == np.int64 and out.tolist() == [[1, 0], [3, 4]]
    assert ss.forward(s, v, right=True)["Out"].tolist() == [[3, 0], [4, 4]]
    s3 = np.array([[[1.0, 3.0, 5.0], [2.0, 4.0, 6.0]], [[0.0, 0.0, 1.0], [1.0, 1.0, 1.0]]])
    v3 = np.array([[[3.0, 6.0], [1.0, 4.0]], [[0.0, 2.0], [1.0, 0.5]]])
    out = ss.forward(s3, v3)["Out"]
    assert out.shape == (2, 2, 2) and out.tolist() == [[[1, 3], [0, 1]], [[0, 3], [0, 0]]]
    assert ss.forward(s3, v3, out_int32=True)["Out"].dtype == np.int32
    with pytest.raises(ValueError) as e:
        ss.forward(s3, v3[:1])
    assert str(e.value) == ("searchsorted: SortedSequence [2, 2, 3] and Values [1, 2, 2] must "
                            "agree on all dims but the last")
    with pytest.raises(ValueError, match="must agree"):
        ss.forward(s3, np.zeros((2, 3, 2)))


def test_nms_default_threshold_iou_and_dtype():
    nms = op("nms")
    assert nms.infer(spec((5, 4), F32)) == {"KeepBoxesIdxs": spec((-1,), I64)}
    assert nms.infer(spec((5, 4), F32), iou_threshold=0.9) == \
        {"KeepBoxesIdxs": spec((-1,), I64)}
    boxes = np.array([[0, 0, 10, 10], [0, 0, 10, 5], [0, 5, 10, 10], [20, 20, 30, 30],
                      [20, 20, 30, 30]], np.float32)
    # Paddle 2.6: nms(boxes) (threshold 0.3) keeps [0, 3]; nms(boxes, 0.5) [0, 1, 2, 3]
    keep = nms.forward(boxes)["KeepBoxesIdxs"]
    assert keep.dtype == np.int64 and keep.tolist() == [0, 3]
    assert nms.forward(boxes, iou_threshold=0.5)["KeepBoxesIdxs"].tolist() == [0, 1, 2, 3]
    # IoU exactly at the threshold is kept (greater suppresses): 50 / 100 = 0.5
    assert nms.forward(boxes[:2], iou_threshold=0.5)["KeepBoxesIdxs"].tolist() == [0, 1]
    # x and y differ: box 1 overlaps box 0 in x (4 of 10) and in y (all 3): IoU 12 / 48
    b = np.array([[1, 2, 11, 5], [7, 2, 17, 5], [2, 20, 4, 22]], np.float64)
    assert nms.forward(b, iou_threshold=0.24)["KeepBoxesIdxs"].tolist() == [0, 2]
    assert nms.forward(b, iou_threshold=0.26)["KeepBoxesIdxs"].tolist() == [0, 1, 2]
    # boxes of no area (union 0) never suppress
    z = np.array([[3, 3, 3, 3], [3, 3, 3, 3]], np.float64)
    assert nms.forward(z, iou_threshold=0.0)["KeepBoxesIdxs"].tolist() == [0, 1]
    assert nms.forward(np.zeros((0, 4)))["KeepBoxesIdxs"].dtype == np.int64


# -- unique_consecutive / tril_indices / triu_indices -----------------------------------------
def test_unique_consecutive_axes_dtypes_and_inference():
    uc = op("unique_consecutive")
    x2 = np.array([[1, 1, 2], [1, 1, 2], [3, 3, 3], [1, 1, 2]])
    res = uc.forward(x2, return_inverse=True, return_counts=True, axis=[0])
    # Paddle 2.6: [[1, 1, 2], [3, 3, 3], [1, 1, 2]], [0, 0, 1, 2], [2, 1, 1]
    assert res["Out"].tolist() == [[1, 1, 2], [3, 3, 3], [1, 1, 2]]
    assert res["Index"].tolist() == [0, 0, 1, 2] and res["Counts"].tolist() == [2, 1, 1]
    res = uc.forward(x2, return_inverse=True, return_counts=True, axis=[-1], dtype=int(I32))
    # Paddle 2.6 (dtype int32): [[1, 2], [1, 2], [3, 3], [1, 2]], [0, 0, 1], [2, 1]
    assert res["Out"].tolist() == [[1, 2], [1, 2], [3, 3], [1, 2]]
    assert res["Index"].dtype == np.int32 and res["Index"].tolist() == [0, 0, 1]
    assert res["Counts"].dtype == np.int32 and res["Counts"].tolist() == [2, 1]
    res = uc.forward(np.array([7]))                     # Paddle 2.6: [7], [0], [1]
    assert res["Out"].tolist() == [7] and res["Index"].tolist() == [0] and \
        res["Counts"].tolist() == [1]
    res = uc.forward(np.array([[4, 4], [4, 5]]))        # flattened by default
    assert res["Out"].tolist() == [4, 5] and res["Counts"].dtype == np.int64
    assert res["Index"].tolist() == [0, 0, 0, 1] and res["Counts"].tolist() == [3, 1]
    assert uc.infer(spec((2, 3), I32)) == {"Out": spec((-1,), I32), "Index": spec((-1,), I64),
                                           "Counts": spec((-1,), I64)}
    assert uc.infer(spec((2, 3, 4), I32), axis=[-2], dtype=int(I32)) == \
        {"Out": spec((2, -1, 4), I32), "Index": spec((3,), I32), "Counts": spec((-1,), I32)}
    with pytest.raises(ValueError, match="unique_consecutive"):
        uc.infer(spec((2, 3), I32), axis=[2])
    with pytest.raises(ValueError, match="unique_consecutive"):
        uc.forward(x2, axis=[2])


def test_tri_indices_defaults_dtypes_and_inference():
    tl, tu = op("tril_indices"), op("triu_indices")
    assert tl.forward()["out"].shape == (2, 0) and tu.forward()["out"].shape == (2, 0)
    # Paddle 2.6: tril_indices(3, 3) and triu_indices(3, 4)
    assert tl.forward(rows=3, cols=3)["out"].tolist() == [[0, 1, 1, 2, 2, 2],
                                                          [0, 0, 1, 0, 1, 2]]
    got = tu.forward(row=3, col=4)["out"]
    assert got.dtype == np.int64 and got.tolist() == [[0, 0, 0, 0, 1, 1, 1, 2, 2],
                                                      [0, 1, 2, 3, 1, 2, 3, 2, 3]]
    assert tl.infer() == {"out": spec((2, 0), I64)}
    assert tu.infer() == {"out": spec((2, 0), I64)}
    assert tl.infer(rows=4, cols=2, offset=-1, dtype=int(I32)) == {"out": spec((2, 5), I32)}
    assert tu.infer(row=4, col=2, offset=1) == {"out": spec((2, 1), I64)}
    assert tu.infer(row=3, col=4, dtype=int(I32)) == {"out": spec((2, 9), I32)}
    for r, c, k in ((4, 2, -1), (2, 5, 2), (3, 3, 0)):
        np.testing.assert_array_equal(tl.forward(rows=r, cols=c, offset=k)["out"],
                                      np.stack(np.tril_indices(r, k, c)))
        np.testing.assert_array_equal(tu.forward(row=r, col=c, offset=k)["out"],
                                      np.stack(np.triu_indices(r, k, c)))


# -- logcumsumexp ---------------------------------------------------------------------------
def _lcse(x, axis, exclusive, reverse, empty=LOWEST):
    """logcumsumexp in float64: each prefix's log-sum-exp shifted by the prefix's own max
    (reverse: suffixes; exclusive: without the element itself, ``empty`` for none)."""
    xm = np.moveaxis(np.asarray(x, np.float64), axis, -1)
    n = xm.shape[-1]
    out = np.empty(xm.shape)
    for i in range(n):
        part = xm[..., i:] if reverse else xm[..., :i + 1]
        if exclusive:
            part = part[..., 1:] if reverse else part[..., :-1]
        if part.shape[-1] == 0:
            out[..., i] = empty
            continue
        m = part.max(-1, keepdims=True)
        out[..., i] = np.log(np.exp(part - m).sum(-1)) + m[..., 0]
    return np.moveaxis(out, -1, axis)


def _lcse_grad(x, axis, exclusive, reverse, d, h=1e-4):
    """d sum(logcumsumexp(x) * d) / dx by central differences (the outputs subtracted before
    the weighted sum: values near -1000 lose no digits; the empty sums are constants)."""
    g = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        out = []
        for sgn in (1, -1):
            xp = x.copy()
            xp[idx] += sgn * h
            out.append(_lcse(xp, axis, exclusive, reverse, empty=0.0))
        g[idx] = ((out[0] - out[1]) * d).sum() / (2 * h)
    return g


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("exclusive,reverse", [(False, False), (True, False), (False, True),
                                               (True, True)])
def test_logcumsumexp_on_every_axis(axis, exclusive, reverse):
    rng = np.random.default_rng(3)
    x = rng.uniform(-3, 3, (3, 4, 5))
    x[1] -= 1000.0                        # rows of very different size: no shared max
    d = rng.standard_normal(x.shape)
    lc = op("logcumsumexp")
    attrs = dict(axis=axis, exclusive=exclusive, reverse=reverse)
    out = lc.forward(x, **attrs)["Out"]
    np.testing.assert_allclose(out, _lcse(x, axis, exclusive, reverse), rtol=1e-12)
    np.testing.assert_allclose(lc.backward(x, out, d, **attrs)["X"],
                               _lcse_grad(x, axis, exclusive, reverse, d), rtol=1e-6,
                               atol=1e-7)


def test_logcumsumexp_defaults_flatten_and_inference():
    lc = op("logcumsumexp")
    x = np.random.default_rng(4).uniform(-2, 2, (2, 3))
    d = np.random.default_rng(5).standard_normal(6)
    out = lc.forward(x, flatten=True)["Out"]
    assert out.shape == (6,)
    np.testing.assert_allclose(out, _lcse(x.reshape(-1), 0, False, False), rtol=1e-12)
    dx = lc.backward(x, out, d, flatten=True)["X"]
    assert dx.shape == (2, 3)
    np.testing.assert_allclose(dx.reshape(-1),
                               _lcse_grad(x.reshape(-1), 0, False, False, d), rtol=1e-6)
    # defaults: the last axis, inclusive, forward
    d2 = d.reshape(2, 3)
    np.testing.assert_allclose(lc.forward(x)["Out"], _lcse(x, 1, False, False), rtol=1e-12)
    np.testing.assert_allclose(lc.backward(x, lc.forward(x)["Out"], d2)["X"],
                               _lcse_grad(x, 1, False, False, d2), rtol=1e-6)
    assert lc.infer(spec((2, 3), F32)) == {"Out": spec((2, 3), F32)}
    assert lc.infer(spec((2, 3), F32), flatten=True) == {"Out": spec((6,), F32)}
    assert lc.infer(spec((-1, 3)), flatten=True) == {"Out": spec((-1,))}
    assert lc.infer(spec((2, 3)), axis=0, exclusive=True, reverse=True) == {"Out": spec((2, 3))}


def test_logcumsumexp_paddle_edge_values():
    lc = op("logcumsumexp")
    # Paddle 2.6 (values and the gradient of sum(Out)): tiny terms before a large one,
    # -inf entries (an empty sum is the lowest float), inputs beyond exp's range
    x = np.array([[-800.0, -800.0, -1e9, 3.0]])
    out = lc.forward(x)["Out"]
    np.testing.assert_allclose(out, [[-800.0, -799.3068528194401, -799.3068528194401, 3.0]],
                               rtol=1e-15)
    np.testing.assert_allclose(lc.backward(x, out, np.ones_like(x))["X"],
                               [[2.0, 1.0, 0.0, 1.0]], rtol=1e-12)
    x = np.array([[0.5, -np.inf, 1.0], [-np.inf, -np.inf, 2.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = lc.forward(x)["Out"]
        dx = lc.backward(x, out, np.ones_like(x))["X"]
    np.testing.assert_allclose(out, [[0.5, 0.5, 1.4740769841801067], [LOWEST, LOWEST, 2.0]],
                               rtol=1e-15)
    np.testing.assert_allclose(dx, [[2.377540668798145, 0.0, 0.6224593312018546],
                                    [0.0, 0.0, 1.0]], rtol=1e-12)
    out = lc.forward(x, reverse=True, exclusive=True)["Out"]
    np.testing.assert_allclose(out, [[1.0, 1.0, LOWEST], [2.0, 2.0, LOWEST]], rtol=1e-15)
    dx = lc.backward(x, out, np.ones_like(x), reverse=True, exclusive=True)["X"]
    np.testing.assert_allclose(dx, [[0.0, 0.0, 2.0], [0.0, 0.0, 2.0]], rtol=1e-12)
    out = lc.forward(x.astype(np.float32))["Out"]
    assert out.dtype == np.float32 and out[1, 0] == np.finfo(np.float32).min
    x = np.array([[800.0, 800.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = lc.forward(x)["Out"]
        dx = lc.backward(x, out, np.ones_like(x))["X"]
    np.testing.assert_allclose(out, [[800.0, 800.6931471805599]], rtol=1e-15)
    np.testing.assert_allclose(dx, [[1.5, 0.5]], rtol=1e-12)


def test_logcumsumexp_float32_and_empty_axes():
    lc = op("logcumsumexp")
    x = np.random.default_rng(6).uniform(-2, 2, (2, 3)).astype(np.float32)
    for ex in (False, True):
        out = lc.forward(x, exclusive=ex)["Out"]
        dx = lc.backward(x, out, np.ones_like(x), exclusive=ex)["X"]
        assert out.dtype == np.float32 and dx.dtype == np.float32
    for shape, axis in (((2, 0), 1), ((0, 3), 0), ((0, 3), 1)):
        e = np.zeros(shape)
        for ex in (False, True):
            for rev in (False, True):
                attrs = dict(axis=axis, exclusive=ex, reverse=rev)
                out = lc.forward(e, **attrs)["Out"]
                assert out.shape == shape
                assert lc.backward(e, out, e, **attrs)["X"].shape == shape


# -- the survivors of the fresh run (round 11, second pass) --------------------------------
def test_axis_messages_name_the_op():
    x = np.zeros((2, 3))
    for t, call in (("kthvalue", lambda: op("kthvalue").forward(x, axis=2)),
                    ("mode", lambda: op("mode").forward(x, axis=-3)),
                    ("kthvalue", lambda: op("kthvalue").backward(x, np.zeros(2, np.int64),
                                                                 np.zeros(2), axis=2)),
                    ("logcumsumexp", lambda: op("logcumsumexp").forward(x, axis=2))):
        with pytest.raises(ValueError) as e:
            call()
        ax = "-3" if t == "mode" else "2"
        assert str(e.value) == (f"{t}: axis {ax} is out of range for input of rank 2 "
                                f"(valid: -2..1)")


def test_kthvalue_keeps_other_unit_dims_and_float32_gradient():
    kv = op("kthvalue")
    x = np.array([[[3.0, 1.0, 2.0]]], np.float32)              # [1, 1, 3]
    res = kv.forward(x, k=2)
    assert res["Out"].shape == (1, 1) and res["Indices"].shape == (1, 1)
    assert res["Out"].tolist() == [[2.0]] and res["Indices"].tolist() == [[2]]
    g = kv.backward(x, res["Indices"], np.ones((1, 1), np.float32), k=2)["X"]
    assert g.dtype == np.float32 and g.tolist() == [[[0.0, 0.0, 1.0]]]


def test_searchsorted_rows_of_another_length():
    s = np.array([[[1.0, 3.0, 5.0], [2.0, 4.0, 6.0]], [[0.0, 0.0, 1.0], [1.0, 1.0, 1.0]]])
    v = np.array([[[3.0], [7.0]], [[0.0], [1.0]]])          # one value per row
    out = op("searchsorted").forward(s, v)["Out"]
    assert out.tolist() == [[[1], [3]], [[0], [0]]]
    assert op("searchsorted").forward(s, v, right=True)["Out"].tolist() == \
        [[[2], [3]], [[2], [3]]]


def test_nms_overlap_details():
    nms = op("nms")
    # box 1 starts at x = 0 and y = 0, box 0 at x = 5, y = 0: IoU 50 / 150
    b = np.array([[5.0, 0.0, 15.0, 10.0], [0.0, 0.0, 10.0, 10.0]])
    assert nms.forward(b, iou_threshold=0.4)["KeepBoxesIdxs"].tolist() == [0, 1]
    assert nms.forward(b, iou_threshold=0.3)["KeepBoxesIdxs"].tolist() == [0]
    # apart in x, overlapping in y (and the other way round): no intersection at all
    for b in (np.array([[0.0, 0.0, 2.0, 5.0], [3.0, 1.0, 6.0, 4.0]]),
              np.array([[0.0, 0.0, 5.0, 2.0], [1.0, 3.0, 4.0, 6.0]])):
        assert nms.forward(b, iou_threshold=0.0)["KeepBoxesIdxs"].tolist() == [0, 1]
    # boxes of less than unit area suppress each other too
    b = np.array([[0.0, 0.0, 0.5, 0.5], [0.0, 0.0, 0.5, 0.5]])
    assert nms.forward(b, iou_threshold=0.5)["KeepBoxesIdxs"].tolist() == [0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")                      # 0 / 0 never computed
        z = np.array([[3.0, 3.0, 3.0, 3.0], [3.0, 3.0, 3.0, 3.0]])
        assert nms.forward(z, iou_threshold=0.1)["KeepBoxesIdxs"].tolist() == [0, 1]


def test_unique_consecutive_two_equal_items_and_1d_exclusive_scan():
    res = op("unique_consecutive").forward(np.array([5, 5]))
    assert res["Out"].tolist() == [5] and res["Counts"].tolist() == [2]
    assert res["Index"].tolist() == [0, 0]
    lc = op("logcumsumexp")
    x = np.array([0.5, -1.0, 2.0])
    out = lc.forward(x, exclusive=True)["Out"]
    np.testing.assert_allclose(out, _lcse(x, 0, True, False), rtol=1e-15)


def test_logcumsumexp_gradient_with_zero_upstream_entries():
    lc = op("logcumsumexp")
    x = np.array([[0.3, -1.2, 2.0, 0.7]])
    d = np.array([[0.0, 1.5, 0.0, -2.0]])
    for ex in (False, True):
        out = lc.forward(x, exclusive=ex)["Out"]
        with warnings.catch_warnings():
            warnings.simplefilter("error")                  # no log(0)
            g = lc.backward(x, out, d, exclusive=ex)["X"]
        np.testing.assert_allclose(g, _lcse_grad(x, 1, ex, False, d), rtol=1e-6, atol=1e-9)
