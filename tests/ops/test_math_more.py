"""fluid 1.8's l1_norm, minus, frobenius_norm, fill, unbind, conv_shift and fc
(fluidlite/ops/math_more.py) against NumPy references of fluid's kernels (Paddle 2.6 agrees on
l1_norm, minus, frobenius_norm, unbind and fc), numeric float64 gradients, errors."""
import math

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core.dtypes import VarType
from fluidlite.core.registry import VarSpec, get_op_def
from fluidlite.testing import OpTest


def _t(op_type, inputs, outputs, attrs=None):
    t = OpTest()
    t.op_type, t.inputs, t.outputs, t.attrs = op_type, inputs, outputs, attrs or {}
    t.check_infer()
    t.check_output()
    return t


def test_l1_norm():
    x = OpTest.rand(3, 4, avoid=0.0)
    t = _t("l1_norm", {"X": x}, {"Out": np.array([np.abs(x).sum()])})
    t.check_grad(["X"], "Out")


def test_minus_and_its_scale_grad_ops():
    x, y = OpTest.rand(3, 4, seed=1), OpTest.rand(3, 4, seed=2)
    t = _t("minus", {"X": x, "Y": y}, {"Out": x - y})
    t.check_grad(["X", "Y"], "Out")
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        a = fluid.data("a", [3, 4], "float32")
        b = fluid.data("b", [3, 4], "float32")
        a.stop_gradient = b.stop_gradient = False
        out = main.global_block().create_var(name="m", dtype="float32")
        main.global_block().append_op("minus", {"X": a, "Y": b}, {"Out": out})
        fluid.gradients([fluid.layers.reduce_sum(out)], [a, b])
    scales = [op.attr("scale") for op in main.global_block().ops if op.type == "scale"]
    assert sorted(scales) == [-1.0, 1.0]        # fluid's MinusGradDescMaker


@pytest.mark.parametrize("dim,keep,all_", [([1, 2], False, False), ([0], True, False),
                                           ([0], False, True)])
def test_frobenius_norm(dim, keep, all_):
    x = OpTest.rand(2, 3, 4)
    axes = None if all_ else tuple(dim)
    out = np.sqrt((x ** 2).sum(axis=axes, keepdims=keep))
    t = _t("frobenius_norm", {"X": x}, {"Out": out.reshape(1) if all_ else out},
           {"dim": dim, "keep_dim": keep, "reduce_all": all_})
    t.check_grad(["X"], "Out")


def test_frobenius_norm_zero_gradient_guard():
    """fluid's grad kernel divides by Out + 1e-12: a zero slice gets gradient 0, not NaN."""
    x = np.zeros((2, 3))
    d = get_op_def("frobenius_norm")
    out = d.forward(x, dim=[1])["Out"]
    g = d.backward(x, out, np.ones(2), dim=[1])["X"]
    np.testing.assert_array_equal(g, np.zeros((2, 3)))


def test_fill():
    vals = [1.5, 2.7, -3.2, 4.0, 5.0, 6.9]
    for dtype, want in ((VarType.FP32, np.array(vals, np.float32)),
                        (VarType.FP64, np.array(vals, np.float32).astype(np.float64)),
                        (VarType.INT32, np.array([1, 2, -3, 4, 5, 6], np.int32)),
                        (VarType.INT64, np.array([1, 2, -3, 4, 5, 6], np.int64)),
                        (VarType.BOOL, np.ones(6, bool))):
        _t("fill", {}, {"Out": want.reshape(2, 3)},
           {"value": vals, "shape": [2, 3], "dtype": dtype})
    with pytest.raises(ValueError, match="needs 6"):
        get_op_def("fill").forward(value=[1.0], shape=[2, 3])


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_unbind(axis):
    x = OpTest.rand(2, 3, 4)
    n = x.shape[axis]
    t = OpTest()
    t.op_type, t.inputs, t.attrs = "unbind", {"X": x}, {"axis": axis}
    t.outputs = {"Out": [(f"o{i}", np.take(x, i, axis=axis)) for i in range(n)]}
    t.check_infer()
    t.check_output()
    t.check_grad(["X"], "Out")


def test_unbind_grad_with_unused_pieces():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [3, 2], "float64")
        x.stop_gradient = False
        block = main.global_block()
        outs = [block.create_var(name=f"p{i}", dtype="float64") for i in range(3)]
        block.append_op("unbind", {"X": x}, {"Out": outs}, {"axis": 0})
        gx, = fluid.gradients([fluid.layers.reduce_sum(outs[1])], [x])
    g, = fluid.Executor().run(main, feed={"x": np.ones((3, 2))}, fetch_list=[gx])
    np.testing.assert_array_equal(g, [[0, 0], [1, 1], [0, 0]])


def ref_conv_shift(x, y):
    m, n = x.shape[1], y.shape[1]
    out = np.zeros_like(x)
    for i in range(m):
        for j in range(n):
            out[:, i] += x[:, (i + j - (n - 1) // 2) % m] * y[:, j]
    return out


def test_conv_shift():
    x, y = OpTest.rand(3, 7, seed=3), OpTest.rand(3, 3, seed=4)
    t = _t("conv_shift", {"X": x, "Y": y}, {"Out": ref_conv_shift(x, y)})
    t.check_grad(["X", "Y"], "Out")
    d = get_op_def("conv_shift")
    with pytest.raises(ValueError, match="must be odd"):
        d.infer(VarSpec([3, 7], "float32"), VarSpec([3, 4], "float32"))
    with pytest.raises(ValueError, match="must not exceed"):
        d.infer(VarSpec([3, 3], "float32"), VarSpec([3, 5], "float32"))


def _gelu64(z, approximate):
    if approximate:
        return 0.5 * z * (1 + np.tanh(np.sqrt(2 / np.pi) * (z + 0.044715 * z ** 3)))
    return 0.5 * z * (1 + np.vectorize(math.erf)(z / math.sqrt(2)))


@pytest.mark.parametrize("act,pad,ncol", [("", False, 1), ("relu", False, 2), ("relu", True, 1),
                                          ("gelu_erf", False, 2), ("gelu_tanh", True, 1)])
def test_fc(act, pad, ncol):
    # (the GELU forms: Paddle's oneDNN fc, what fc_act_mkldnn_fuse_pass makes; their gradient
    # is the GELU's slope at the recomputed pre-activation)
    x = OpTest.rand(2, 3, 4, seed=5)
    k = 12 if ncol == 1 else 4
    w = OpTest.rand(k + 4 * pad, 5 + 4 * pad, seed=6)
    b = OpTest.rand(5, seed=7)
    wu = w[:k, :5]
    ref = x.reshape(-1, k) @ wu + b
    if act == "relu":
        ref = np.maximum(ref, 0)
    elif act:
        ref = _gelu64(ref, act == "gelu_tanh")
    lead = x.shape[:ncol]
    t = _t("fc", {"Input": x, "W": w, "Bias": b}, {"Out": ref.reshape(lead + (5,))},
           {"in_num_col_dims": ncol, "activation_type": act, "padding_weights": pad})
    t.check_grad(["Input", "W", "Bias"], "Out")
    with pytest.raises(ValueError, match="must equal W's rows"):
        get_op_def("fc").infer(VarSpec([2, 7], "float32"), VarSpec([6, 5], "float32"))
    with pytest.raises(ValueError, match="activation_type must be one of '', 'relu', "
                                         "'gelu_erf', 'gelu_tanh', got 'gelu'"):
        get_op_def("fc").infer(VarSpec([2, 6], "float32"), VarSpec([6, 5], "float32"),
                               activation_type="gelu")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("act", ["gelu_erf", "gelu_tanh"])
@pytest.mark.parametrize("rows,nthreads", [(3, 2), (700, 1), (700, 2), (40, 2)])
def test_fc_gelu_is_fc_then_the_gelu_op_bit_for_bit(dtype, act, rows, nthreads):
    # a product whole (3 rows; 700 on one thread), in row parts (700 rows on two threads) or in
    # column parts (40 rows, 1024 columns): the GELU on each block as its GEMM part makes it
    # gives the gelu op's bits, through forward, the plan's fast path and a flattened Input
    from fluidlite.core import threads
    from fluidlite.core.dtypes import convert_np_dtype_to_dtype_
    fc, gelu = get_op_def("fc"), get_op_def("gelu")
    rng = np.random.default_rng(rows)
    k, n = (192, 1024) if rows == 40 else (96, 160)
    x = rng.standard_normal((rows, k)).astype(dtype)
    w = (rng.standard_normal((k, n)) * 0.3).astype(dtype)
    b = rng.standard_normal(n).astype(dtype)
    vt = convert_np_dtype_to_dtype_(np.dtype(dtype))
    fast = fc.lower([VarSpec(x.shape, vt), VarSpec(w.shape, vt), VarSpec(b.shape, vt)],
                    {"activation_type": act})
    with threads.using(nthreads):
        want = gelu.forward(fc.forward(x, w, b)["Out"], approximate=act == "gelu_tanh")["Out"]
        got = fc.forward(x, w, b, activation_type=act)["Out"]
        flat = fc.forward(x.reshape(rows, 4, -1), w, b, in_num_col_dims=1,
                          activation_type=act)["Out"]
        quick = fast(x, w, b)
    for g in (got, flat, quick):
        assert g.dtype == want.dtype and np.array_equal(g, want)
    ref = _gelu64(x.astype(np.float64) @ w.astype(np.float64) + b, act == "gelu_tanh")
    np.testing.assert_allclose(got, ref, rtol=1e-5 if dtype == "float32" else 1e-12,
                               atol=1e-5 if dtype == "float32" else 1e-12)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("act", ["", "relu"])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("rows", [3, 700])        # one block; over _GEMM_MIN (an epilogue)
def test_fc_fast_path_gives_forwards_bits(dtype, act, bias, rows):
    from fluidlite.core.registry import VarSpec, get_op_def
    from fluidlite.core.dtypes import convert_np_dtype_to_dtype_
    fc = get_op_def("fc")
    rng = np.random.default_rng(rows)
    x = rng.standard_normal((rows, 96)).astype(dtype)
    w = rng.standard_normal((96, 128)).astype(dtype)
    b = rng.standard_normal(128).astype(dtype) if bias else None
    vt = convert_np_dtype_to_dtype_(np.dtype(dtype))
    specs = [VarSpec(x.shape, vt), VarSpec(w.shape, vt), VarSpec(b.shape, vt) if bias else None]
    fast = fc.lower(specs, {"activation_type": act})
    want = fc.forward(x, w, b, activation_type=act)["Out"]
    got = fast(x, w, b)
    assert got.dtype == want.dtype and np.array_equal(got, want)
    ref = x.astype(np.float64) @ w.astype(np.float64) + (b if bias else 0)
    np.testing.assert_allclose(got, np.maximum(ref, 0) if act else ref,
                               rtol=1e-4 if dtype == "float32" else 1e-12, atol=1e-4)
    # what the fast path does not take: flattened inputs, padded weights, float16, a 2-D bias
    f16 = convert_np_dtype_to_dtype_(np.dtype("float16"))
    for bad, attrs in ((specs[:0] + [VarSpec((rows, 4, 24), vt)] + specs[1:], {}),
                       (specs, {"padding_weights": True}),
                       (specs, {"in_num_col_dims": 2}),
                       ([VarSpec(x.shape, f16), VarSpec(w.shape, f16), None], {}),
                       (specs[:2] + [VarSpec((1, 128), vt)], {}),
                       (specs, {"activation_type": "tanh"})):
        assert fc.lower(bad, dict(attrs, activation_type=attrs.get("activation_type", act))) \
            is None
