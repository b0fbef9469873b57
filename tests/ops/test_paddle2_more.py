"""ops/paddle2_more.py and linear_interp (their values against Paddle 2.6 are in
tests/ops/test_paddle_oracle.py). Here: numeric gradients with random upstream weights in
float64, values from references written here (loops, the standard library's math, known
constants of the special functions), the edge rules and the errors."""
import math

import numpy as np
import pytest

from fluidlite.core.registry import VarSpec, get_op_def
from fluidlite.ops.paddle2_more import polygamma_numpy
from fluidlite.testing import OpTest

RNG = np.random.default_rng(4141)


def _check(op_type, inputs, attrs, out_slot, grads, **kw):
    op = get_op_def(op_type)
    args = [[a for _, a in v] if isinstance(v, list) else v
            for v in (inputs.get(s.name) for s in op.in_slots)]
    extra = {"rng": np.random.default_rng(0)} if op.uses_rng else {}
    res = op.forward(*args, **attrs, **extra)

    class T(OpTest):
        pass
    T.op_type, T.inputs, T.attrs = op_type, inputs, attrs
    T.outputs = {out_slot: res[out_slot]}
    T().check_output(atol=1e-12, rtol=1e-12)
    if grads:
        T().check_grad(grads, out_slot, **kw)
    return res


def _scan_reference(x, better):
    """The running extreme and its index, one element at a time (a later equal value and a
    NaN take over)."""
    out, idx = np.empty_like(x), np.zeros(x.shape, np.int64)
    for row in np.ndindex(x.shape[:-1]):
        cur, at = x[row][0], 0
        for i, e in enumerate(x[row]):
            if math.isnan(e) or (not math.isnan(cur) and better(e, cur)):
                cur, at = e, i
            out[row][i], idx[row][i] = cur, at
    return out, idx


@pytest.mark.parametrize("op,better", [("cummax", lambda a, b: a >= b),
                                       ("cummin", lambda a, b: a <= b)])
def test_cummax_cummin(op, better):
    x = np.array([[2.0, 1.0, 2.0, 5.0, np.nan, 7.0], [-1.0, -1.0, -3.0, 0.0, -3.0, 4.0]])
    res = get_op_def(op).forward(x, axis=1, dtype=3)
    want, idx = _scan_reference(x, better)
    np.testing.assert_array_equal(res["out"], want)
    np.testing.assert_array_equal(res["indices"], idx)
    assert res["indices"].dtype == np.int64
    xs = RNG.permutation(24).reshape(2, 3, 4).astype(np.float64)
    res = _check(op, {"x": xs}, {"axis": 1, "dtype": 2}, "out", ["x"])
    assert res["indices"].dtype == np.int32
    ref, ref_idx = _scan_reference(np.moveaxis(xs, 1, -1), better)
    np.testing.assert_array_equal(res["out"], np.moveaxis(ref, -1, 1))
    np.testing.assert_array_equal(res["indices"], np.moveaxis(ref_idx, -1, 1))
    _check(op, {"x": RNG.permutation(10).reshape(2, 5) * 0.1}, {"axis": -1, "dtype": 3},
           "out", ["x"])
    with pytest.raises(ValueError, match="int32 or int64"):
        get_op_def(op).infer(VarSpec((2,), "float32"), axis=0, dtype=5)


def test_equal_all_and_the_float_rule_of_equal():
    eq = get_op_def("equal_all").forward
    x = RNG.uniform(-1, 1, (2, 3))
    assert eq(x, x.copy())["Out"].item() is True and eq(x, x + 1e-9)["Out"].item() is True
    assert _check("equal_all", {"X": x, "Y": x + 1e-6}, {}, "Out", [])["Out"].item() is False
    assert eq(x, x + 1e-6)["Out"].item() is False and eq(x, x[:1])["Out"].item() is False
    assert eq(np.array([np.inf]), np.array([np.inf]))["Out"].item() is True
    assert eq(np.array([np.nan]), np.array([np.nan]))["Out"].item() is False
    assert eq(np.array([3], np.int64), np.array([3], np.int64))["Out"].shape == ()
    # fluid's equal / not_equal on floats: within 1e-8, infinities only to themselves
    a = np.array([0.1 + 0.2, 1.0, np.inf, np.inf, np.nan, 1e-3])
    b = np.array([0.3, 1.0 + 2e-8, np.inf, -np.inf, np.nan, 1e-3 + 5e-9])
    assert get_op_def("equal").forward(a, b)["Out"].tolist() == \
        [True, False, True, False, False, True]
    assert get_op_def("not_equal").forward(a, b)["Out"].tolist() == \
        [False, True, False, True, True, False]
    # float32: the difference is taken in float32 (1 + 2^-23 is the next float after 1)
    one = np.float32(1)
    assert get_op_def("equal").forward(np.array([one]),
                                       np.array([np.nextafter(one, np.float32(2))]))[
        "Out"].tolist() == [False]
    assert get_op_def("equal").forward(np.array([7]), np.array([7]))["Out"].tolist() == [True]
    assert get_op_def("equal_reduce").forward(a[:2], a[:2] + 1e-9)["Out"].tolist() == [True]


def test_heaviside_and_broadcast_tensors():
    x = np.array([[-1.5, 0.0, 2.0], [0.0, 3.0, -0.5]])
    y = RNG.uniform(-1, 1, (3,))
    res = _check("elementwise_heaviside", {"X": x, "Y": y}, {}, "Out", ["Y"])
    np.testing.assert_array_equal(res["Out"], [[0, y[1], 1], [y[0], 1, 0]])
    d = get_op_def("elementwise_heaviside").backward(x, y, np.ones((2, 3)))
    assert not d["X"].any() and d["Y"].tolist() == [1.0, 1.0, 0.0]
    f32 = get_op_def("elementwise_heaviside").forward(x.astype(np.float32),
                                                      y.astype(np.float32))["Out"]
    assert f32.dtype == np.float32
    xs = [RNG.uniform(-1, 1, (2, 1, 3)), RNG.uniform(-1, 1, (4, 1)), RNG.uniform(-1, 1, (3,))]
    op = get_op_def("broadcast_tensors")
    outs = op.forward(xs)["Out"]
    assert all(o.shape == (2, 4, 3) for o in outs)
    np.testing.assert_array_equal(outs[1][1, :, 2], xs[1][:, 0])
    douts = [RNG.uniform(-1, 1, (2, 4, 3)) for _ in xs]
    grads = op.backward(xs, douts)["X"]
    np.testing.assert_allclose(grads[0], douts[0].sum(1, keepdims=True))
    np.testing.assert_allclose(grads[1], douts[1].sum((0, 2))[:, None])
    np.testing.assert_allclose(grads[2], douts[2].sum((0, 1)))
    partial = op.backward(xs, [douts[0], None, douts[2]])["X"]      # Out[1] unused
    assert partial[1].shape == (4, 1) and not partial[1].any()
    np.testing.assert_allclose(partial[0], grads[0])
    spec = op.infer([VarSpec((-1, 1, 3), "float32"), VarSpec((4, 1), "float32")])["Out"]
    assert [s.shape for s in spec] == [(-1, 4, 3)] * 2
    with pytest.raises(ValueError, match="do not broadcast"):
        op.infer([VarSpec((2, 3), "float32"), VarSpec((4,), "float32")])


def test_lgamma_and_digamma_values():
    x = np.array([-2.5, -0.5, 0.1, 0.5, 1.0, 2.0, 7.3, 30.0, 150.0])
    got = get_op_def("lgamma").forward(x)["Out"]
    np.testing.assert_allclose(got, [math.lgamma(v) for v in x], rtol=1e-14)
    poles = get_op_def("lgamma").forward(np.array([0.0, -1.0, -4.0, np.inf, np.nan]))["Out"]
    assert np.isposinf(poles[:4]).all() and np.isnan(poles[4])
    euler = 0.5772156649015329
    psi = polygamma_numpy(np.array([1.0, 0.5, 2.0, 0.25]), 0)
    np.testing.assert_allclose(psi, [-euler, -euler - 2 * math.log(2), 1 - euler,
                                     -euler - math.pi / 2 - 3 * math.log(2)], rtol=1e-14)
    xs = np.concatenate([RNG.uniform(-8, -0.01, 30), RNG.uniform(0.01, 40, 30)])
    xs = xs[np.abs(xs - np.round(xs)) > 1e-3]
    np.testing.assert_allclose(polygamma_numpy(xs + 1, 0), polygamma_numpy(xs, 0) + 1 / xs,
                               rtol=1e-12, atol=1e-12)                   # recurrence
    np.testing.assert_allclose(polygamma_numpy(1 - xs, 0) - polygamma_numpy(xs, 0),
                               math.pi / np.tan(math.pi * xs), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(polygamma_numpy(np.array([1.0, 0.5]), 1),
                               [math.pi ** 2 / 6, math.pi ** 2 / 2], rtol=1e-14)
    np.testing.assert_allclose(polygamma_numpy(xs + 1, 1), polygamma_numpy(xs, 1) - 1 / xs ** 2,
                               rtol=1e-11, atol=1e-11)
    # digamma is the derivative of lgamma; trigamma that of digamma (central differences)
    h = 1e-6
    for order, f in ((0, lambda v: np.array([math.lgamma(a) for a in v])),
                     (1, lambda v: polygamma_numpy(v, 0))):
        num = (f(xs + h) - f(xs - h)) / (2 * h)
        np.testing.assert_allclose(polygamma_numpy(xs, order), num, rtol=1e-5, atol=1e-5)
    edge = polygamma_numpy(np.array([0.0, -2.0, np.inf, -np.inf, np.nan]), 0)
    assert np.isnan(edge[[0, 1, 3, 4]]).all() and np.isposinf(edge[2])
    assert get_op_def("digamma").forward(np.float32([1.0]))["Out"].dtype == np.float32
    with pytest.raises(ValueError, match="float tensor"):
        get_op_def("lgamma").infer(VarSpec((2,), "int64"))


def test_special_function_gradients():
    _check("lgamma", {"X": RNG.uniform(0.2, 6.0, (3, 4))}, {}, "Out", ["X"])
    _check("lgamma", {"X": np.array([-2.4, -1.7, -0.3])}, {}, "Out", ["X"])
    _check("digamma", {"X": RNG.uniform(0.3, 12.0, (2, 5))}, {}, "Out", ["X"])
    _check("digamma", {"X": np.array([-3.3, -0.6, 0.7, 11.0])}, {}, "Out", ["X"])


def test_logspace_and_histogram():
    op = get_op_def("logspace").forward
    out = op(np.array([0.5]), np.array([3.0]), np.array([6], np.int32), np.array([2.0]),
             dtype=6)["Out"]
    np.testing.assert_allclose(out, [2.0 ** (0.5 + 0.5 * i) for i in range(6)], rtol=1e-15)
    assert op(np.array([2.0]), np.array([9.0]), np.array([1]), np.array([10.0]),
              dtype=6)["Out"].tolist() == [100.0]
    ints = _check("logspace", {"Start": np.float32([1.0]), "Stop": np.float32([3.0]),
                               "Num": np.array([4], np.int32), "Base": np.float32([10.0])},
                  {"dtype": 3}, "Out", [])["Out"]
    assert ints.dtype == np.int64 and ints.tolist() == [10, 46, 215, 1000]
    assert op(np.array([0.0]), np.array([1.0]), np.array([0]), np.array([2.0]),
              dtype=5)["Out"].shape == (0,)
    with pytest.raises(ValueError, match="Num must be >= 0"):
        op(np.array([0.0]), np.array([1.0]), np.array([-1]), np.array([2.0]), dtype=5)
    with pytest.raises(ValueError, match="Base must hold one value"):
        op(np.array([0.0]), np.array([1.0]), np.array([3]), np.array([2.0, 3.0]), dtype=5)
    hist = get_op_def("histogram").forward
    x = np.array([-2.0, -1.0, 0.0, 0.4, 0.5, 1.0, 1.99, 2.0, 3.0])
    # bins of width 0.75 over [-1, 2]; -2 and 3 fall outside; 2 is in the last (closed) bin
    assert hist(x, bins=4, min=-1, max=2)["Out"].tolist() == [1, 2, 2, 2]
    assert _check("histogram", {"X": x}, {"bins": 4, "min": -1, "max": 2}, "Out", [])[
        "Out"].tolist() == [1, 2, 2, 2]
    assert hist(np.array([1.0, 2.0, 3.0, 4.0]), bins=3, min=0, max=0)["Out"].tolist() == \
        [1, 1, 2]
    assert hist(np.array([5.0, 5.0]), bins=2, min=0, max=0)["Out"].tolist() == [0, 2]
    with pytest.raises(ValueError, match="max"):
        get_op_def("histogram").infer(VarSpec((3,), "float32"), bins=2, min=3, max=1)


def test_nanmedian():
    x = np.array([[3.0, np.nan, 1.0, 2.0], [np.nan] * 4, [5.0, 1.0, 4.0, 2.0]])
    res = get_op_def("nanmedian").forward(x, axis=[1], keepdim=False)
    np.testing.assert_array_equal(res["Out"], [2.0, np.nan, 3.0])
    assert res["MedianIndex"].tolist() == [[3, 3], [-1, -1], [3, 2]]
    xs = RNG.permutation(30).reshape(2, 3, 5) * 0.1
    res = _check("nanmedian", {"X": xs}, {"axis": [0, 2], "keepdim": True}, "Out", ["X"])
    np.testing.assert_allclose(res["Out"].reshape(-1),
                               np.median(np.moveaxis(xs, 1, 0).reshape(3, -1), axis=1))
    res = _check("nanmedian", {"X": RNG.permutation(7) * 0.5 + 0.1}, {"axis": [],
                                                                       "keepdim": True},
                 "Out", ["X"])
    assert res["Out"].shape == (1,)
    assert get_op_def("nanmedian").forward(np.arange(4.0), axis=[], keepdim=False)[
        "Out"].shape == ()
    d = get_op_def("nanmedian").backward(x, get_op_def("nanmedian").forward(
        x, axis=[1], keepdim=False)["MedianIndex"], np.array([1.0, 1.0, 1.0]), axis=[1],
        keepdim=False)["X"]
    assert d.tolist() == [[0, 0, 0, 1], [0, 0, 0, 0], [0, 0, 0.5, 0.5]]


def test_fill_diagonal_tensor_and_index_put():
    x, y = RNG.uniform(-1, 1, (3, 4, 5)), RNG.uniform(-1, 1, (3, 4))
    res = _check("fill_diagonal_tensor", {"X": x, "Y": y},
                 {"offset": 1, "dim1": 1, "dim2": 2}, "Out", ["X"])
    want = x.copy()
    for b in range(3):
        for i in range(4):
            want[b, i, i + 1] = y[b, i]
    np.testing.assert_array_equal(res["Out"], want)
    with pytest.raises(ValueError, match="must hold the diagonal"):
        get_op_def("fill_diagonal_tensor").forward(x, y[:, :3], offset=1, dim1=1, dim2=2)
    with pytest.raises(ValueError, match="must differ"):
        get_op_def("fill_diagonal_tensor").infer(VarSpec((3, 3), "float32"),
                                                 VarSpec((3,), "float32"), dim1=1, dim2=-1)
    x = RNG.uniform(-1, 1, (4, 3))
    idx = [np.array([0, 2, -1]), np.array([1, 1, 0])]
    v = RNG.uniform(-1, 1, (3,))
    res = _check("index_put", {"x": x, "indices": [("i0", idx[0]), ("i1", idx[1])],
                               "value": v}, {"accumulate": False}, "out", ["x", "value"])
    want = x.copy()
    want[[0, 2, 3], [1, 1, 0]] = v
    np.testing.assert_array_equal(res["out"], want)
    rows = np.array([1, 1, 3])
    res = _check("index_put", {"x": x, "indices": [("i0", rows)], "value": v[:1]},
                 {"accumulate": True}, "out", ["x", "value"])
    want = x.copy()
    want[1] += 2 * v[0]
    want[3] += v[0]
    np.testing.assert_allclose(res["out"], want, rtol=1e-15)
    mask = x > 0
    res = get_op_def("index_put").forward(x, [mask], np.array([9.0]))["out"]
    np.testing.assert_array_equal(res, np.where(mask, 9.0, x))
    with pytest.raises(ValueError, match=r"indices\[0\] values must be in \[-4, 4\)"):
        get_op_def("index_put").forward(x, [np.array([4])], v[:1])


def test_renorm():
    x = RNG.uniform(-2, 2, (3, 4, 2))
    res = _check("renorm", {"X": x}, {"p": 2.0, "axis": 1, "max_norm": 1.5}, "Out", ["X"])
    for j in range(4):
        n = np.sqrt((x[:, j] ** 2).sum())
        want = x[:, j] * (1.5 / n if n > 1.5 else 1.0)
        np.testing.assert_allclose(res["Out"][:, j], want, rtol=1e-14)
    _check("renorm", {"X": RNG.uniform(-2, 2, (4, 3))}, {"p": 1.5, "axis": 0, "max_norm": 1.0},
           "Out", ["X"])
    with pytest.raises(ValueError, match="p must be > 0"):
        get_op_def("renorm").infer(VarSpec((2, 2), "float32"), p=0.0)


def test_fold_is_unfolds_adjoint():
    # <fold(X), Y> = <X, unfold(Y)> for the same geometry, and a block sum written out
    args = dict(kernel_sizes=[3, 2], strides=[2, 1], paddings=[1, 0, 1, 0], dilations=[1, 2])
    y = RNG.uniform(-1, 1, (2, 3, 5, 6))
    cols = get_op_def("unfold").forward(y, **args)["Y"]
    x = RNG.uniform(-1, 1, cols.shape)
    folded = get_op_def("fold").forward(x, output_sizes=[5, 6], **args)["Y"]
    assert folded.shape == y.shape
    np.testing.assert_allclose((folded * y).sum(), (x * cols).sum(), rtol=1e-12)
    _check("fold", {"X": x}, dict(output_sizes=[5, 6], **args), "Y", ["X"])
    ones = get_op_def("fold").forward(np.ones((1, 4, 4)), output_sizes=[3, 3],
                                      kernel_sizes=[2, 2], strides=[1, 1],
                                      paddings=[0, 0, 0, 0], dilations=[1, 1])["Y"]
    assert ones[0, 0].tolist() == [[1, 2, 1], [2, 4, 2], [1, 2, 1]]   # blocks covering a cell
    with pytest.raises(ValueError, match="X holds 5 blocks"):
        get_op_def("fold").infer(VarSpec((1, 4, 5), "float32"), output_sizes=[3, 3],
                                 kernel_sizes=[2, 2])


def test_rrelu_and_dropout_nd():
    x = RNG.uniform(-1, 1, (3, 5))
    res = _check("rrelu", {"X": x}, {"is_test": True, "lower": 0.1, "upper": 0.3}, "Out", ["X"])
    mid = float(np.float32(0.4) / np.float32(2))
    np.testing.assert_array_equal(res["Out"], np.where(x >= 0, x, x * mid))
    train = get_op_def("rrelu").forward(x, rng=np.random.default_rng(1), is_test=False,
                                        lower=0.1, upper=0.3)
    slopes = train["Noise"][x < 0]
    assert ((slopes >= 0.1) & (slopes <= 0.3)).all() and len(set(slopes.tolist())) > 1
    assert (train["Noise"][x >= 0] == 1).all()
    np.testing.assert_array_equal(train["Out"], x * train["Noise"])
    with pytest.raises(ValueError, match="lower <= upper"):
        get_op_def("rrelu").infer(VarSpec((2,), "float32"), lower=0.5, upper=0.2)
    op = get_op_def("dropout_nd")
    x = RNG.uniform(-1, 1, (4, 6, 3))
    res = op.forward(x, rng=np.random.default_rng(2), dropout_prob=0.5,
                     dropout_implementation="upscale_in_train", axis=[1])
    assert res["Mask"].shape == (1, 6, 1)
    kept = res["Mask"].reshape(-1).astype(bool)
    assert 0 < kept.sum() < 6
    np.testing.assert_array_equal(res["Out"][:, ~kept], 0)
    np.testing.assert_allclose(res["Out"][:, kept], 2 * x[:, kept], rtol=1e-15)
    again = op.forward(x, np.array([7], np.int32), rng=None, dropout_prob=0.5, axis=[0, 2])
    assert again["Mask"].shape == (4, 1, 3)
    np.testing.assert_array_equal(again["Mask"], op.forward(
        x, np.array([7], np.int32), rng=None, dropout_prob=0.5, axis=[0, 2])["Mask"])
    _check("dropout_nd", {"X": x}, {"dropout_prob": 0.3, "is_test": True, "axis": [1]}, "Out",
           ["X"])
    d = op.backward(res["Mask"], np.ones_like(x), dropout_prob=0.5,
                    dropout_implementation="upscale_in_train", axis=[1])["X"]
    np.testing.assert_array_equal(d, np.broadcast_to(res["Mask"] * 2.0, x.shape))


@pytest.mark.parametrize("layout,align", [("NCW", False), ("NWC", True)])
def test_linear_interp(layout, align):
    x = RNG.uniform(-1, 1, (2, 3, 5))
    attrs = dict(data_layout=layout, out_w=8, interp_method="linear", align_corners=align,
                 align_mode=0)
    res = _check("linear_interp", {"X": x}, attrs, "Out", ["X"])["Out"]
    w = x if layout == "NCW" else np.moveaxis(x, 1, -1)
    n_in = w.shape[-1]
    for k in range(8):                 # fluid's rule on one axis, written out
        ratio = (n_in - 1) / 7 if align else n_in / 8
        src = ratio * k if align else max(ratio * (k + 0.5) - 0.5, 0)
        lo = min(int(src), n_in - 1)
        hi = lo + (lo < n_in - 1)
        d = src - lo
        want = (1 - d) * w[..., lo] + d * w[..., hi]
        got = res[..., k] if layout == "NCW" else res[:, k, :]
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
