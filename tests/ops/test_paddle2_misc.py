"""ops/paddle2_misc.py: small Paddle 2.x ops (their values against Paddle 2.6 are in
tests/ops/test_paddle_oracle.py). Here: numeric gradients with random upstream weights, the
values a reference written here gives, the edge rules and the errors."""
import numpy as np
import pytest

from fluidlite.core.registry import VarSpec, get_op_def
from fluidlite.testing import OpTest

RNG = np.random.default_rng(41)


def _check(op_type, inputs, attrs, out_slot, grads, **kw):
    op = get_op_def(op_type)
    args = [inputs.get(s.name) for s in op.in_slots]
    res = op.forward(*args, **attrs)

    class T(OpTest):
        pass
    T.op_type, T.inputs, T.attrs = op_type, inputs, attrs
    T.outputs = {out_slot: res[out_slot]}
    T().check_output(atol=1e-12, rtol=1e-12)
    if grads:
        T().check_grad(grads, out_slot, **kw)
    return res


def test_pass_throughs_copy_and_pass_the_gradient():
    x = RNG.uniform(-1, 1, (2, 3))
    for t in ("share_data", "memcpy_d2h", "memcpy_h2d"):
        out = _check(t, {"X": x}, {}, "Out", ["X"])["Out"]
        assert out is not x and (out == x).all()
    res = _check("depend", {"X": x, "Dep": [("d0", RNG.uniform(size=2))]}, {}, "Out", ["X"])
    assert (res["Out"] == x).all()


def test_fills():
    x = RNG.uniform(-1, 1, (3, 4))
    out = _check("fill_any", {"X": x}, {"value": 2.5}, "Out", ["X"], allow_zero_grad=True)
    assert (out["Out"] == 2.5).all()
    out = _check("fill_diagonal", {"X": RNG.uniform(-1, 1, (7, 3))},
                 {"value": 9.0, "offset": 0, "wrap": True}, "Out", ["X"])["Out"]
    assert [tuple(p) for p in np.argwhere(out == 9.0)] == \
        [(0, 0), (1, 1), (2, 2), (4, 0), (5, 1), (6, 2)]               # numpy's wrap
    cube = get_op_def("fill_diagonal").forward(np.zeros((3, 3, 3)), value=1.0)["Out"]
    assert np.argwhere(cube == 1.0).tolist() == [[0, 0, 0], [1, 1, 1], [2, 2, 2]]
    with pytest.raises(ValueError, match="must have equal dims"):
        get_op_def("fill_diagonal").infer(VarSpec((2, 3, 3), "float32"))


def test_comparisons_and_bitwise():
    got = get_op_def("isclose").forward(np.array([1.0, np.nan, np.inf, 2.0, -np.inf]),
                                        np.array([1.000001, np.nan, np.inf, 2.1, np.inf]),
                                        equal_nan=True)["Out"]
    # -inf against inf: |a - b| = inf <= atol + rtol * inf, close in Paddle 2.6 (its rule)
    assert got.tolist() == [True, True, True, False, True]
    r = _check("isclose", {"Input": np.array([1.0, np.nan]), "Other": np.array([1.0, np.nan]),
                           "Rtol": np.array([0.1])}, {"equal_nan": False}, "Out", [])
    assert r["Out"].tolist() == [True, False]
    x, y = RNG.uniform(-1, 1, (3, 4)), RNG.uniform(-1, 1, (4,))
    x[0, 0], y[1] = np.nan, np.nan
    for t, f in (("elementwise_fmax", np.fmax), ("elementwise_fmin", np.fmin)):
        out = get_op_def(t).forward(x, y)["Out"]
        np.testing.assert_array_equal(out, f(x, y))
        _check(t, {"X": RNG.uniform(-1, 1, (3, 4)), "Y": RNG.uniform(-1, 1, (4,))}, {},
               "Out", ["X", "Y"])
    a = np.array([[5, -3], [12, 0]], np.int32)
    b = np.array([[3, 6], [-1, 7]], np.int32)
    for t, f in (("bitwise_and", np.bitwise_and), ("bitwise_or", np.bitwise_or),
                 ("bitwise_xor", np.bitwise_xor)):
        assert _check(t, {"X": a, "Y": b}, {}, "Out", [])["Out"].tolist() == f(a, b).tolist()
    assert _check("bitwise_not", {"X": a}, {}, "Out", [])["Out"].tolist() == (~a).tolist()
    with pytest.raises(ValueError, match="bitwise_and: X must be a bool or integer tensor"):
        get_op_def("bitwise_and").infer(VarSpec((2,), "float32"), VarSpec((2,), "float32"))


def test_selections():
    x = RNG.permutation(24).reshape(2, 3, 4) * 0.1
    res = _check("kthvalue", {"X": x}, {"k": 2, "axis": 1, "keepdim": False}, "Out", ["X"])
    np.testing.assert_array_equal(res["Out"], np.sort(x, axis=1)[:, 1])
    assert (np.take_along_axis(x, res["Indices"][:, None], 1)[:, 0] == res["Out"]).all()
    with pytest.raises(ValueError, match="k must be in \\[1, 3\\]"):
        get_op_def("kthvalue").forward(x, k=4, axis=1)
    rows = np.array([[1.0, 2.0, 2.0, 3.0, 3.0], [4.0, 4.0, 1.0, 1.0, 0.0],
                     [5.0, 5.0, 5.0, 2.0, 2.0]])
    res = get_op_def("mode").forward(rows, axis=1)
    assert res["Out"].tolist() == [2.0, 1.0, 5.0] and res["Indices"].tolist() == [2, 3, 2]
    g = get_op_def("mode").backward(rows, res["Indices"], np.array([1.0, 2.0, 3.0]), axis=1)
    assert np.argwhere(g["X"]).tolist() == [[0, 2], [1, 3], [2, 2]]
    # all values distinct: the mode is the smallest; a small change keeps it so
    _check("mode", {"X": RNG.permutation(12).reshape(3, 4) * 0.1}, {"axis": 1}, "Out", ["X"])
    assert _check("bincount", {"X": np.array([1, 3, 3, 0, 7], np.int64)}, {"minlength": 9},
                  "Out", [])["Out"].tolist() == [1, 1, 0, 2, 0, 0, 0, 1, 0]
    with pytest.raises(ValueError, match="bincount: X must not be negative"):
        get_op_def("bincount").forward(np.array([1, -1]))
    got = _check("searchsorted", {"SortedSequence": np.array([[1.0, 2.0, 2.0, 5.0],
                                                              [0.0, 1.0, 1.0, 1.0]]),
                                  "Values": np.array([[2.0, 6.0], [1.0, -1.0]])},
                 {"out_int32": True, "right": True}, "Out", [])["Out"]
    assert got.dtype == np.int32 and got.tolist() == [[3, 4], [4, 0]]
    boxes = np.array([[0, 0, 10, 10], [1, 1, 10, 10], [20, 20, 30, 30], [0, 0, 9, 11]], float)
    keep = _check("nms", {"Boxes": boxes}, {"iou_threshold": 0.5}, "KeepBoxesIdxs", [])
    assert keep["KeepBoxesIdxs"].tolist() == [0, 2]       # IoU(0, 1) = 0.81, (0, 3) = 0.83
    res = _check("unique_consecutive", {"X": np.array([1, 1, 2, 2, 2, 1, 3, 3])},
                 {"return_inverse": True, "return_counts": True}, "Out", [])
    assert res["Out"].tolist() == [1, 2, 1, 3] and res["Counts"].tolist() == [2, 3, 1, 2]
    assert res["Index"].tolist() == [0, 0, 1, 1, 1, 2, 3, 3]
    tril = _check("tril_indices", {}, {"rows": 3, "cols": 4, "offset": 1, "dtype": 3}, "out",
                  [])["out"]
    assert tril.tolist() == [list(v) for v in np.tril_indices(3, 1, 4)]
    triu = _check("triu_indices", {}, {"row": 4, "col": 3, "offset": -1, "dtype": 2}, "out",
                  [])["out"]
    assert triu.dtype == np.int32 and triu.tolist() == [list(v) for v in
                                                         np.triu_indices(4, -1, 3)]


@pytest.mark.parametrize("exclusive,reverse", [(False, False), (True, False), (False, True),
                                               (True, True)])
def test_logcumsumexp(exclusive, reverse):
    x = RNG.uniform(-2, 2, (2, 5))
    op = get_op_def("logcumsumexp")
    attrs = {"axis": 1, "exclusive": exclusive, "reverse": reverse}
    # (an exclusive scan's empty sum is the lowest float: central differences of a sum holding
    # it lose every digit, so its gradient is checked against the inclusive one's, shifted)
    res = _check("logcumsumexp", {"X": x}, attrs, "Out", [] if exclusive else ["X"])["Out"]
    if exclusive:
        d = RNG.uniform(-1, 1, x.shape)
        shifted = np.concatenate([d[:, 1:], np.zeros((2, 1))], 1) if not reverse else \
            np.concatenate([np.zeros((2, 1)), d[:, :-1]], 1)
        inc = dict(attrs, exclusive=False)
        want = op.backward(x, op.forward(x, **inc)["Out"], shifted, **inc)["X"]
        np.testing.assert_allclose(op.backward(x, res, d, **attrs)["X"], want, rtol=1e-12)
    xs = x[:, ::-1] if reverse else x
    ref = np.log(np.cumsum(np.exp(xs), axis=1))
    if exclusive:
        ref = np.concatenate([np.full((2, 1), np.finfo(np.float64).min), ref[:, :-1]], 1)
    np.testing.assert_allclose(res, ref[:, ::-1] if reverse else ref, rtol=1e-12)
    big = get_op_def("logcumsumexp").forward(np.array([1000.0, 1000.0]))["Out"]
    np.testing.assert_allclose(big, [1000.0, 1000.0 + np.log(2.0)])      # no overflow


def test_quantize_and_dequantize_linear():
    """(Paddle 2.6's own numbers, both round types: tests/ops/test_paddle_oracle.py)"""
    x = np.array([[0.3, -1.2, 2.5, -3.0]], np.float32)
    s = np.array([1.5], np.float32)
    q = _check("quantize_linear", {"X": x, "Scale": s}, {"quant_axis": -1, "round_type": 0},
               "Y", [])["Y"]
    assert q.dtype == np.float32 and q.tolist() == [[25.0, -102.0, 127.0, -128.0]]
    q1 = get_op_def("quantize_linear").forward(x, s, quant_axis=-1, round_type=1)["Y"]
    assert q1.tolist() == [[25.0, -102.0, 127.0, -127.0]]          # clipped to s first
    d = _check("dequantize_linear", {"X": q, "Scale": s}, {"quant_axis": -1}, "Y", [])["Y"]
    np.testing.assert_allclose(d, q * 1.5 / 127, rtol=1e-6)
    per = get_op_def("quantize_linear").forward(
        np.ones((2, 3), np.float32), np.array([1.0, 2.0, 4.0], np.float32), quant_axis=1)["Y"]
    assert per[0].tolist() == [127.0, 64.0, 32.0]            # 63.5 -> 64, 31.75 -> 32
    assert get_op_def("quantize_linear").forward(x, s, only_observer=True)["Y"].tolist() == \
        x.tolist()
    with pytest.raises(ValueError, match="ZeroPoint must be 0"):
        get_op_def("quantize_linear").forward(x, s, np.ones(1, np.float32), quant_axis=-1)
    with pytest.raises(ValueError, match="only inference programs \\(is_test=True\\)"):
        get_op_def("quantize_linear").infer(VarSpec((1, 4), "float32"),
                                            VarSpec((1,), "float32"), is_test=False)
    with pytest.raises(ValueError, match="one value per index of dim 1"):
        get_op_def("dequantize_linear").forward(x, s, quant_axis=1)


def test_mutation_gaps_inference_sides_and_axes():
    """Kills the first mutation sample's real survivors: inferred specs, searchsorted's left
    side, nms on boxes whose x and y differ, mode with keepdim, unique_consecutive's axis."""
    i64 = "int64"
    assert get_op_def("fill_any").infer(VarSpec((2, 3), "float32"))["Out"] == \
        VarSpec((2, 3), "float32")
    assert get_op_def("bincount").infer(VarSpec((5,), i64))["Out"] == VarSpec((-1,), i64)
    uc = get_op_def("unique_consecutive").infer(VarSpec((2, 3), i64), axis=[1], dtype=2)
    assert uc == {"Out": VarSpec((2, -1), i64), "Index": VarSpec((3,), "int32"),
                  "Counts": VarSpec((-1,), "int32")}
    uc = get_op_def("unique_consecutive").infer(VarSpec((2, 3), i64))
    assert uc["Index"] == VarSpec((-1,), i64) and uc["Counts"] == VarSpec((-1,), i64)
    assert get_op_def("tril_indices").infer(rows=3, cols=3, offset=0) == \
        {"out": VarSpec((2, 6), i64)}
    ts = get_op_def("triangular_solve").infer(VarSpec((2, 3, 3), "float64"),
                                              VarSpec((3, 2), "float64"))
    assert ts == {"Out": VarSpec((2, 3, 2), "float64")}
    md = get_op_def("multi_dot").infer([VarSpec((2, 4), "float64"), VarSpec((4, 3), "float64"),
                                        VarSpec((3, 5), "float64")])
    assert md == {"Out": VarSpec((2, 5), "float64")}
    seq = np.array([1.0, 2.0, 2.0, 5.0])
    left = _check("searchsorted", {"SortedSequence": seq, "Values": np.array([2.0, 0.0, 9.0])},
                  {"right": False}, "Out", [])["Out"]
    assert left.dtype == np.int64 and left.tolist() == [1, 0, 4]
    boxes = np.array([[0, 0, 10, 4], [6, 0, 16, 4], [0, 5, 10, 9]], float)
    keep = _check("nms", {"Boxes": boxes}, {"iou_threshold": 0.3}, "KeepBoxesIdxs", [])
    assert keep["KeepBoxesIdxs"].tolist() == [0, 1, 2]      # IoU(0, 1) = 16 / 64 = 0.25
    keep = get_op_def("nms").forward(boxes, iou_threshold=0.2)["KeepBoxesIdxs"]
    assert keep.tolist() == [0, 2]
    res = get_op_def("mode").forward(np.array([[3.0, 1.0, 3.0], [2.0, 2.0, 0.0]]), axis=1,
                                     keepdim=True)
    assert res["Out"].tolist() == [[3.0], [2.0]] and res["Indices"].tolist() == [[2], [1]]
    res = _check("unique_consecutive", {"X": np.array([[1, 1, 2, 2], [3, 3, 4, 5]])},
                 {"axis": [1], "return_inverse": True, "return_counts": True}, "Out", [])
    assert res["Out"].tolist() == [[1, 2, 2], [3, 4, 5]] and res["Counts"].tolist() == [2, 1, 1]
