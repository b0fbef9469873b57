"""Tests written from the mutation run of ``fluidlite/ops/search.py`` (issue 28,
docs/mutation.md): the build-time checks of match_matrix_tensor, var_conv_2d and
sequence_topk_avg_pooling with their exact messages and the specs they declare, the run-time
LoD checks, fluid 1.8's attribute defaults, float32 kept, and the kernels on geometries the
OpTests do not reach (even kernels, strides larger than the map, one-pixel maps, ties and rows
shorter than k) -- against per-sample loops written here from the ops' formulas
(match_matrix_tensor_op.cc, var_conv_2d_op.cc, sequence_topk_avg_pooling_op.h) and numeric
gradients."""
import numpy as np
import pytest

from fluidlite.core.dtypes import VarType
from fluidlite.core.registry import VarSpec, get_op_def
from tests.ops.test_rnn import check_grad
from tests.ops.test_search import _var_conv_ref as _conv_ref

F16, F32, F64 = VarType.FP16, VarType.FP32, VarType.FP64


def _spec(shape, dtype=F32, lod=0):
    return VarSpec(tuple(shape), dtype, lod)


def _off(lens):
    return [list(np.concatenate([[0], np.cumsum(lens)]).astype(int))]


def _err(op, *args, **attrs):
    with pytest.raises(ValueError) as e:
        get_op_def(op).infer(*args, **attrs)
    return str(e.value)


# -- match_matrix_tensor --------------------------------------------------------------------------
def test_match_matrix_tensor_build_time_checks_and_specs():
    d = get_op_def("match_matrix_tensor")
    out = d.infer(_spec((5, 3), F16, 1), _spec((4, 3), F16, 1), _spec((3, 2, 3), F16), dim_t=2)
    assert tuple(out["Out"].shape) == (-1, 1) and out["Out"].dtype == F16
    assert out["Out"].lod_level == 1
    assert tuple(out["Tmp"].shape) == (-1, 1) and out["Tmp"].dtype == F16
    assert out["Tmp"].lod_level == 0
    # unknown dims are accepted; dim_t defaults to 1 (fluid 1.8)
    d.infer(_spec((5, -1)), _spec((4, 3)), _spec((3, 1, 3)))
    d.infer(_spec((5, 3)), _spec((4, 3)), _spec((-1, 1, -1)))
    d.infer(_spec((5, 3)), _spec((4, 3)), _spec((3, -1, 3)), dim_t=4)
    d.infer(_spec((5, 0)), _spec((4, 0)), _spec((0, 2, 0)), dim_t=2)
    for x, y, w, t in (((5, 3, 1), (4, 3), (3, 2, 3), 2), ((5, 3), (4,), (3, 2, 3), 2),
                       ((5, 3), (4, 3), (3, 6), 2), ((5, 3), (4, 3), (2, 2, 3), 2),
                       ((5, 3), (4, 3), (3, 2, 2), 2), ((5, 3), (4, 3), (3, 2, 3), 1),
                       ((5, 3), (4, 3), (3, 1, 3), 2), ((5, 0), (4, 0), (1, 2, 0), 2),
                       ((5, 3), (4, 3), (3, 0, 3), 2)):
        h = x[-1]
        assert _err("match_matrix_tensor", _spec(x), _spec(y), _spec(w), dim_t=t) == (
            f"match_matrix_tensor: X [M, h], Y [N, h] and W [h, dim_t, h] = [{h}, {t}, {h}] "
            f"expected, got X {list(x)}, Y {list(y)}, W {list(w)}")
    d.infer(_spec((5, 3)), _spec((4, 3)), _spec((3, 1, 3)))       # the default dim_t


def _mmt_ref(x, xl, y, yl, w):
    t = w.shape[1]
    out, xs, ys = [], np.split(x, np.cumsum(xl)[:-1]), np.split(y, np.cumsum(yl)[:-1])
    for xi, yi in zip(xs, ys):
        o = np.zeros((t, len(xi), len(yi)))
        for tt in range(t):
            for a in range(len(xi)):
                for b in range(len(yi)):
                    o[tt, a, b] = sum(xi[a, k] * w[k, tt, l] * yi[b, l]
                                      for k in range(w.shape[0]) for l in range(w.shape[2]))
        out.append(o.reshape(-1))
    return np.concatenate(out)


def test_match_matrix_tensor_kernel_dtype_default_and_lod_checks():
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((3, 2)), rng.standard_normal((5, 2))
    w = rng.standard_normal((2, 1, 2))
    d = get_op_def("match_matrix_tensor")
    lod = {"X": _off([2, 1]), "Y": _off([1, 4])}
    res = d.forward(x, y, w, lod=lod)                                  # dim_t 1 by default
    assert res["Out"].shape == (6, 1) and res["Tmp"].shape == (6, 1)
    np.testing.assert_allclose(res["Out"].reshape(-1), _mmt_ref(x, [2, 1], y, [1, 4], w))
    assert [list(v) for v in res["lod"]["Out"]] == [[0, 2, 6]]
    np.testing.assert_allclose(res["Tmp"].reshape(-1), (x @ w.reshape(2, 2)).reshape(-1))
    r32 = d.forward(x.astype(np.float32), y.astype(np.float32), w.astype(np.float32), lod=lod)
    assert r32["Out"].dtype == np.float32 and r32["Tmp"].dtype == np.float32
    g = d.backward(x, y, w, np.ones((6, 1)), lod=lod)
    assert g["X"].shape == x.shape and g["Y"].shape == y.shape and g["W"].shape == w.shape
    g32 = d.backward(x.astype(np.float32), y.astype(np.float32), w.astype(np.float32),
                     np.ones((6, 1), np.float32), lod=lod)
    assert g32["X"].dtype == np.float32 and g32["W"].dtype == np.float32
    with pytest.raises(ValueError) as e:
        d.forward(x, y, w, lod={"Y": _off([1, 4])})
    assert str(e.value) == ("match_matrix_tensor: input X has no LoD; feed a LoDTensor "
                            "(fluid.create_lod_tensor(data, lengths, place))")
    with pytest.raises(ValueError) as e:
        d.backward(x, y, w, np.ones((6, 1)), lod={"X": _off([2, 1])})
    assert str(e.value).startswith("match_matrix_tensor: input Y has no LoD")
    with pytest.raises(ValueError) as e:
        d.forward(x, y, w, lod={"X": _off([3]), "Y": _off([1, 4])})
    assert str(e.value) == ("match_matrix_tensor: X and Y must hold the same number of "
                            "sequences, got 1 and 2")


def test_match_matrix_tensor_gradient_with_tmp_upstream():
    rng = np.random.default_rng(1)
    # three pairs of different sizes: each reads its own slice of dOut
    check_grad("match_matrix_tensor", {"X": (rng.uniform(-1, 1, (4, 2)), [2, 1, 1]),
                                       "Y": (rng.uniform(-1, 1, (6, 2)), [1, 2, 3]),
                                       "W": rng.uniform(-1, 1, (2, 3, 2))}, {"dim_t": 3},
               ["Out", "Tmp"], ["X", "Y", "W"])


# -- var_conv_2d ----------------------------------------------------------------------------------
def test_var_conv_2d_build_time_checks_and_specs():
    d = get_op_def("var_conv_2d")
    attrs = dict(InputChannel=2, OutputChannel=3, KernelH=3, KernelW=2, StrideH=1, StrideW=2)
    row, col = _spec((5, 2), F32, 1), _spec((4, 2), F32, 1)
    out = d.infer(_spec((40, 1), F16, 1), row, col, _spec((3, 12), F16), **attrs)
    for slot in ("Out", "Col"):
        assert tuple(out[slot].shape) == (-1, 1) and out[slot].dtype == F16
        assert out[slot].lod_level == 1
    d.infer(_spec((40, 1)), row, col, _spec((-1, 12)), **attrs)
    d.infer(_spec((40, 1)), row, col, _spec((3, -1)), **attrs)
    d.infer(_spec((40, 1)), row, col, _spec((1, 1)))                  # all defaults are 1
    for k in attrs:
        assert _err("var_conv_2d", _spec((40, 1)), row, col, _spec((3, 12)),
                    **dict(attrs, **{k: 0})) == (
            "var_conv_2d: strides, kernel sizes and channel counts must be >= 1")
    for w in ((3, 12, 1), (12,), (2, 12), (3, 6)):
        assert _err("var_conv_2d", _spec((40, 1)), row, col, _spec(w), **attrs) == (
            f"var_conv_2d: W must be [OutputChannel, InputChannel * KernelH * KernelW] = "
            f"[3, 12], got {list(w)}")


@pytest.mark.parametrize("rows,cols,k,s", [
    ((2, 1, 3), (3, 1, 4), (2, 4), (1, 1)),       # even kernels
    ((2, 3), (3, 2), (3, 3), (3, 4)),             # strides past the map
    ((2, 0, 1), (3, 2, 0), (3, 1), (1, 2)),       # maps with no pixels
    ((1,), (1,), (1, 1), (2, 2)),
])
def test_var_conv_2d_against_loops(rows, cols, k, s):
    ci, co = 2, 3
    rng = np.random.default_rng(2)
    sizes = [r * c * ci for r, c in zip(rows, cols)]
    x = rng.standard_normal((sum(sizes), 1))
    w = rng.standard_normal((co, ci * k[0] * k[1]))
    lod = {"X": _off(sizes), "ROW": _off(rows), "COLUMN": _off(cols)}
    attrs = dict(InputChannel=ci, OutputChannel=co, KernelH=k[0], KernelW=k[1], StrideH=s[0],
                 StrideW=s[1])
    d = get_op_def("var_conv_2d")
    res = d.forward(x, None, None, w, lod=lod, **attrs)
    flat, start, want_o, want_c = x.reshape(-1), 0, [], []
    for r, c in zip(rows, cols):
        img = flat[start:start + ci * r * c].reshape(ci, r, c)
        start += ci * r * c
        o, cc = _conv_ref(img, k[0], k[1], s[0], s[1], w)
        want_o.append(o)
        want_c.append(cc)
    np.testing.assert_allclose(res["Out"].reshape(-1), np.concatenate(want_o), atol=1e-12)
    np.testing.assert_allclose(res["Col"].reshape(-1), np.concatenate(want_c), atol=1e-12)
    assert res["Out"].shape[1] == 1 and res["Col"].shape[1] == 1
    assert [list(v) for v in res["lod"]["Out"]] == _off([len(o) for o in want_o])
    assert [list(v) for v in res["lod"]["Col"]] == _off([len(c) for c in want_c])
    r32 = d.forward(x.astype(np.float32), None, None, w.astype(np.float32), lod=lod, **attrs)
    assert r32["Out"].dtype == np.float32 and r32["Col"].dtype == np.float32
    # the gradient against the adjoint of the loops: <dOut, conv(X)> is linear in X and W
    g = rng.standard_normal((res["Out"].shape[0], 1))
    grads = d.backward(x, None, None, w, g, lod=lod, **attrs)
    eps = 1e-6
    for slot, arr in (("X", x), ("W", w)):
        num = np.zeros(arr.size)
        for j in range(arr.size):
            a1, a2 = arr.copy().reshape(-1), arr.copy().reshape(-1)
            a1[j] += eps
            a2[j] -= eps
            args = {"X": x, "W": w}
            args[slot] = a1.reshape(arr.shape)
            f1 = float(g.reshape(-1) @ d.forward(args["X"], None, None, args["W"], lod=lod,
                                                 **attrs)["Out"].reshape(-1))
            args[slot] = a2.reshape(arr.shape)
            f2 = float(g.reshape(-1) @ d.forward(args["X"], None, None, args["W"], lod=lod,
                                                 **attrs)["Out"].reshape(-1))
            num[j] = (f1 - f2) / (2 * eps)
        np.testing.assert_allclose(grads[slot].reshape(-1), num, atol=1e-6)
        assert grads[slot].shape == arr.shape


def test_var_conv_2d_lod_checks():
    d = get_op_def("var_conv_2d")
    attrs = dict(InputChannel=1, OutputChannel=1)
    x, w = np.zeros((7, 1)), np.ones((1, 1))
    with pytest.raises(ValueError) as e:
        d.forward(x, None, None, w, lod={"X": _off([6, 1]), "ROW": _off([2, 1]),
                                         "COLUMN": _off([3])}, **attrs)
    assert str(e.value) == ("var_conv_2d: X, ROW and COLUMN must hold the same number of "
                            "sequences, got 2, 2 and 1")
    with pytest.raises(ValueError) as e:
        d.forward(x, None, None, w, lod={"X": _off([5, 2]), "ROW": _off([2, 1]),
                                         "COLUMN": _off([3, 2])}, **attrs)
    assert str(e.value) == ("var_conv_2d: sequence 0 of X must hold ROW length * COLUMN "
                            "length * channels = 2 * 3 * 1 = 6 values, got 5")
    with pytest.raises(ValueError) as e:
        d.backward(x, None, None, w, np.zeros((7, 1)),
                   lod={"X": _off([6, 1]), "ROW": _off([2, 1])}, **attrs)
    assert str(e.value).startswith("var_conv_2d: input COLUMN has no LoD")


# -- sequence_topk_avg_pooling --------------------------------------------------------------------
def test_topk_avg_pooling_build_time_checks_and_specs():
    d = get_op_def("sequence_topk_avg_pooling")
    x, row, col = _spec((40, 1), F16, 1), _spec((5, 2), F32, 1), _spec((4, 2), F32, 1)
    out = d.infer(x, row, col, topks=[1, 3, 5], channel_num=2)
    assert tuple(out["Out"].shape) == (-1, 6) and out["Out"].dtype == F16
    assert out["Out"].lod_level == 1
    assert tuple(out["pos"].shape) == (-1,) and out["pos"].dtype == VarType.INT32
    assert out["pos"].lod_level == 0
    d.infer(x, row, col, topks=[1], channel_num=1)
    for topks in ([], [0, 2], [2, 1], [3, -1]):
        assert _err("sequence_topk_avg_pooling", x, row, col, topks=topks, channel_num=1) == (
            f"sequence_topk_avg_pooling: topks must be increasing positive ints, got "
            f"{list(topks)}")
    assert _err("sequence_topk_avg_pooling", x, row, col, topks=[1], channel_num=0) == (
        "sequence_topk_avg_pooling: channel_num must be >= 1, got 0")


def _topk_ref(x, rows, cols, ch, topks):
    """Per sample, row and channel: sort the row descending (ties: the later column first, as
    fluid's sort), the mean of the first k for each k (a short row: its sum / k), the columns
    picked (-1 past the row's end)."""
    kmax, out, pos, start = topks[-1], [], [], 0
    for r, c in zip(rows, cols):
        m = x[start:start + ch * r * c].reshape(ch, r, c)
        start += ch * r * c
        for i in range(r):
            vals = []
            for z in range(ch):
                order = sorted(range(c), key=lambda j: (-m[z, i, j], -j))
                vals += [sum(m[z, i, j] for j in order[:k]) / k for k in topks]
                pos += order[:kmax] + [-1] * (kmax - min(c, kmax))
            out.append(vals)
    return np.array(out).reshape(-1, len(topks) * ch), np.array(pos, np.int32)


@pytest.mark.parametrize("rows,cols,topks", [
    ((2, 1, 3), (4, 2, 1), [1, 3]),       # rows shorter than k, three samples
    ((1, 0, 2), (3, 2, 5), [2, 4, 5]),    # a sample without rows
    ((2,), (3,), [1]),
])
def test_topk_avg_pooling_against_loops(rows, cols, topks):
    ch = 2
    sizes = [r * c * ch for r, c in zip(rows, cols)]
    rng = np.random.default_rng(3)
    x = rng.integers(0, 4, sum(sizes)).astype(np.float64)    # many ties
    lod = {"X": _off(sizes), "ROW": _off(rows), "COLUMN": _off(cols)}
    d = get_op_def("sequence_topk_avg_pooling")
    res = d.forward(x.reshape(-1, 1), None, None, lod=lod, topks=topks, channel_num=ch)
    want, want_pos = _topk_ref(x, rows, cols, ch, topks)
    np.testing.assert_allclose(res["Out"], want, atol=1e-12)
    np.testing.assert_array_equal(res["pos"], want_pos)
    assert res["pos"].dtype == np.int32
    assert [list(v) for v in res["lod"]["Out"]] == _off(rows)
    r32 = d.forward(x.reshape(-1, 1).astype(np.float32), None, None, lod=lod, topks=topks,
                    channel_num=ch)
    assert r32["Out"].dtype == np.float32
    # dX[picked] += dOut / k for every k whose top-k holds the pick
    g = rng.standard_normal(want.shape)
    dx = d.backward(x.reshape(-1, 1), None, None, res["pos"], g, lod=lod, topks=topks,
                    channel_num=ch)["X"]
    ref, start, at = np.zeros(x.size), 0, 0
    for r, c in zip(rows, cols):
        for i in range(r):
            for z in range(ch):
                p = want_pos[(at * ch + z) * topks[-1]:(at * ch + z + 1) * topks[-1]]
                for n, k in enumerate(topks):
                    for j in p[:k]:
                        if j >= 0:
                            ref[start + (z * r + i) * c + int(j)] += g[at, z * len(topks) + n] / k
            at += 1
        start += ch * r * c
    np.testing.assert_allclose(dx.reshape(-1), ref, atol=1e-12)
    assert dx.shape == (x.size, 1)


def test_topk_avg_pooling_lod_checks_and_defaults():
    d = get_op_def("sequence_topk_avg_pooling")
    x = np.array([[3.0], [1.0], [2.0]])
    lod = {"X": _off([3]), "ROW": _off([1]), "COLUMN": _off([3])}
    res = d.forward(x, None, None, lod=lod)           # topks [1], one channel
    assert res["Out"].tolist() == [[3.0]] and res["pos"].tolist() == [0]
    with pytest.raises(ValueError) as e:
        d.forward(x, None, None, lod={"X": _off([3]), "ROW": _off([1]),
                                      "COLUMN": _off([2])}, topks=[1], channel_num=1)
    assert str(e.value) == ("sequence_topk_avg_pooling: sequence 0 of X must hold ROW length * "
                            "COLUMN length * channels = 1 * 2 * 1 = 2 values, got 3")
    with pytest.raises(ValueError) as e:
        d.backward(x, None, None, np.zeros(1, np.int32), np.zeros((1, 1)),
                   lod={"X": _off([3]), "COLUMN": _off([3])}, topks=[1], channel_num=1)
    assert str(e.value).startswith("sequence_topk_avg_pooling: input ROW has no LoD")


def test_a_batch_without_sequences():
    lod0 = {"X": [[0]], "Y": [[0]], "ROW": [[0]], "COLUMN": [[0]]}
    x32 = np.zeros((0, 1), np.float32)
    res = get_op_def("match_matrix_tensor").forward(np.zeros((0, 2), np.float32),
                                                    np.zeros((0, 2), np.float32),
                                                    np.ones((2, 3, 2), np.float32), lod=lod0,
                                                    dim_t=3)
    assert res["Out"].shape == (0, 1) and res["Out"].dtype == np.float32
    res = get_op_def("var_conv_2d").forward(x32, None, None, np.ones((2, 1), np.float32),
                                            lod=lod0, OutputChannel=2)
    for slot in ("Out", "Col"):
        assert res[slot].shape == (0, 1) and res[slot].dtype == np.float32, slot
    res = get_op_def("sequence_topk_avg_pooling").forward(x32, None, None, lod=lod0,
                                                          topks=[1, 2], channel_num=3)
    assert res["Out"].shape == (0, 6) and res["Out"].dtype == np.float32
    assert res["pos"].shape == (0,) and res["pos"].dtype == np.int32


def test_var_conv_2d_defaults_and_zero_sized_filters():
    # fluid 1.8's var_conv_2d attributes all default to 1: a 1x1 convolution, one channel
    d = get_op_def("var_conv_2d")
    x = np.arange(1.0, 7.0).reshape(6, 1)
    lod = {"X": _off([6]), "ROW": _off([2]), "COLUMN": _off([3])}
    res = d.forward(x, None, None, np.array([[2.0]]), lod=lod)
    np.testing.assert_array_equal(res["Out"], 2 * x)
    np.testing.assert_array_equal(res["Col"], x)
    assert [list(v) for v in res["lod"]["Out"]] == [[0, 6]]
    g = d.backward(x, None, None, np.array([[2.0]]), np.ones((6, 1)), lod=lod)
    np.testing.assert_array_equal(g["X"], np.full((6, 1), 2.0))
    np.testing.assert_array_equal(g["W"], [[21.0]])
    assert _err("var_conv_2d", _spec((6, 1)), _spec((2, 1)), _spec((3, 1)), _spec((0, 12)),
                InputChannel=2, OutputChannel=3, KernelH=3, KernelW=2) == (
        "var_conv_2d: W must be [OutputChannel, InputChannel * KernelH * KernelW] = [3, 12], "
        "got [0, 12]")


def test_topk_avg_pooling_gradient_keeps_float32_and_default_channel():
    d = get_op_def("sequence_topk_avg_pooling")
    x = np.array([[3.0], [1.0], [2.0]], np.float32)
    lod = {"X": _off([3]), "ROW": _off([1]), "COLUMN": _off([3])}
    res = d.forward(x, None, None, lod=lod, topks=[2])
    dx = d.backward(x, None, None, res["pos"], np.ones((1, 1), np.float32), lod=lod,
                    topks=[2])["X"]
    assert dx.dtype == np.float32 and dx.reshape(-1).tolist() == [0.5, 0.0, 0.5]
