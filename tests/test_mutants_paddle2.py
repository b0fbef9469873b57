"""Tests written from mutation testing (issue 28, docs/mutation.md) for ``fluidlite/ops/paddle2.py``:
the shape inference of the Paddle 2.x ops with unknown (-1), zero and run-time sizes, the dtype
and LoD level of their outputs, their defaults (Paddle 2.6's attribute defaults), boundaries
(k equal to the dim, a pad equal to the dim, mish exactly at its threshold), float32 kernels
keeping float32, and the exact error messages -- against NumPy loops and closed forms written
here and values of the real Paddle 2.6.2 quoted in comments."""
import warnings

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core.dtypes import VarType
from fluidlite.core.registry import VarSpec, get_op_def

F16, F32, F64 = VarType.FP16, VarType.FP32, VarType.FP64


def spec(shape, dtype=F32, lod=0):
    return VarSpec(tuple(shape), dtype, lod)


def _program_grad(op_type, inputs, attrs, out_shape, wrt="X", out_slot="Out", extra_out=()):
    """Run ``op_type`` in a program (feeds ``inputs``: {slot: array | [arrays]}) and take the
    gradient of sum(Out * W) for a fixed W with respect to ``wrt``; returns (Out, dX, the
    program)."""
    main, startup = fluid.Program(), fluid.Program()
    feed, ins = {}, {}
    with fluid.program_guard(main, startup):
        b = main.global_block()
        for slot, value in inputs.items():
            arrs = value if isinstance(value, list) else [value]
            names = []
            for i, a in enumerate(arrs):
                v = fluid.data(f"{slot.lower()}_{i}", list(a.shape), str(a.dtype))
                v.stop_gradient = slot != wrt
                feed[v.name] = a
                names.append(v)
            ins[slot] = names if isinstance(value, list) else names[0]
        out = b.create_var(name="out", dtype=inputs[wrt].dtype)
        outs = {out_slot: out}
        for slot in extra_out:
            outs[slot] = b.create_var(name=slot.lower(), dtype=inputs[wrt].dtype)
        b.append_op(type=op_type, inputs=ins, outputs=outs, attrs=attrs)
        w = np.random.default_rng(3).standard_normal(out_shape)
        wv = fluid.layers.assign(w.astype(inputs[wrt].dtype))
        loss = fluid.layers.reduce_sum(fluid.layers.elementwise_mul(out, wv))
        g, = fluid.gradients(loss, ins[wrt])
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    o, gx = exe.run(main, feed=feed, fetch_list=[out, g])
    return o, gx, w, main


# -- flatten_contiguous_range ---------------------------------------------------------------
FL = get_op_def("flatten_contiguous_range")


def test_flatten_keeps_dtype_and_lod_and_gives_xshape():
    for shape, want in (((), (1,)), ((2, 3, 4), (2, 12))):
        got = FL.infer(spec(shape, F16, 1), start_axis=1, stop_axis=2 if shape else 1)
        assert got["Out"] == VarSpec(want, F16, 1)
        assert got["XShape"] == VarSpec((0,) + shape, F16, 0)


def test_flatten_defaults_flatten_nothing_past_axis_one():
    # Paddle 2.6's flatten_contiguous_range defaults: start_axis 1, stop_axis 1
    x = np.arange(24.0).reshape(2, 3, 4)
    out = FL.forward(x)
    assert out["Out"].shape == (2, 3, 4) and set(out) == {"Out", "XShape"}
    assert FL.infer(spec((2, 3, 4)))["Out"].shape == (2, 3, 4)
    assert set(FL.forward(np.float32(2.0).reshape(()))) == {"Out", "XShape"}


def test_flatten_of_a_vector_and_its_axis_errors():
    v = np.arange(3.0)
    assert FL.forward(v, start_axis=0, stop_axis=-1)["Out"].shape == (3,)
    with pytest.raises(ValueError, match=r"^flatten_contiguous_range: start_axis 1 is out of "
                                         r"range for input of rank 1 \(valid: -1\.\.0\)$"):
        FL.forward(v, start_axis=1, stop_axis=0)
    with pytest.raises(ValueError, match=r"^flatten_contiguous_range: stop_axis 3 is out of "
                                         r"range for input of rank 3"):
        FL.infer(spec((2, 3, 4)), start_axis=0, stop_axis=3)
    with pytest.raises(ValueError, match=r"^flatten_contiguous_range: start_axis -4 is out"):
        FL.infer(spec((2, 3, 4)), start_axis=-4, stop_axis=1)


# -- expand_v2 --------------------------------------------------------------------------------
EX = get_op_def("expand_v2")


def test_expand_sizes_one_and_zero_and_the_refused_ones():
    x = np.arange(3.0).reshape(3, 1)
    assert EX.forward(x, shape=[3, 1])["Out"].shape == (3, 1)
    assert EX.forward(np.ones((1, 3)), shape=[0, 3])["Out"].shape == (0, 3)
    with pytest.raises(ValueError, match=r"^expand_v2: shape \[-2, 3\] has -2 at dim 0; "
                                         r"expected a size >= 0 or -1$"):
        EX.infer(spec((1, 3)), shape=[-2, 3])
    # a 0 dim of X cannot grow (Paddle 2.6: "vec_in_dims[i]:0 != expand_shape[i]:5")
    with pytest.raises(ValueError, match=r"^expand_v2: X's dim 0 is 0, which cannot be "
                                         r"expanded to 5 \(shape \[5, 3\]\); it must be 1 or 5$"):
        EX.infer(spec((0, 3)), shape=[5, 3])
    with pytest.raises(ValueError, match=r"X's dim 0 is 3, which cannot be expanded to 4 "
                                         r"\(shape \[2, 4, 1\]\)"):
        EX.infer(spec((3, 1)), shape=[2, 4, 1])


def test_expand_with_run_time_shapes_infers_unknown_dims():
    x = spec((3, 1), F16)
    assert EX.infer(x, spec((3,), VarType.INT32))["Out"] == VarSpec((-1, -1, -1), F16)
    assert EX.infer(x, spec((-1,), VarType.INT32))["Out"] == VarSpec((-1, -1), F16)
    assert EX.infer(x, spec((1,), VarType.INT32))["Out"] == VarSpec((-1, -1), F16)
    lst = [spec((1,), VarType.INT32)] * 4
    assert EX.infer(x, None, lst)["Out"] == VarSpec((-1,) * 4, F16)
    assert EX.infer(x, None, [], shape=[2, 3, 4])["Out"] == VarSpec((2, 3, 4), F16)
    xv = np.arange(3.0).reshape(3, 1)
    got = EX.forward(xv, None, [np.array([2], np.int32), np.array([3], np.int64),
                                np.array([5], np.int32)], shape=[9])["Out"]
    np.testing.assert_array_equal(got, np.broadcast_to(xv, (2, 3, 5)))


def test_expand_and_tile_grad_ops_carry_the_forward_attrs():
    x = np.arange(3.0).reshape(3, 1)
    for op, attrs, shape in (("expand_v2", {"shape": [2, 3, 4]}, (2, 3, 4)),
                             ("tile", {"repeat_times": [2, 1, 3]}, (2, 3, 3))):
        o, g, w, main = _program_grad(op, {"X": x}, attrs, shape)
        grad_op = [op_ for op_ in main.global_block().ops if op_.type == op + "_grad"]
        assert len(grad_op) == 1
        key = next(iter(attrs))
        assert grad_op[0].attr(key) == attrs[key]
        # dX: W summed over the copies of each X entry (a loop over Out's cells)
        ref = np.zeros_like(x)
        for idx in np.ndindex(*shape):
            ref[idx[-2] % 3, 0] += w[idx]
        np.testing.assert_allclose(g, ref, rtol=1e-13)


# -- tile -------------------------------------------------------------------------------------
TI = get_op_def("tile")


def test_tile_shape_inference_with_unknown_zero_and_run_time_repeats():
    assert TI.infer(spec((-1, 3), F16), repeat_times=[2, 2])["Out"] == VarSpec((-1, 6), F16)
    assert TI.infer(spec((0, 3)), repeat_times=[2, 2])["Out"].shape == (0, 6)
    assert TI.infer(spec((2, 3)), repeat_times=[0, 1])["Out"].shape == (0, 3)
    assert TI.infer(spec((2, 3), F16), spec((3,), VarType.INT32))["Out"] == VarSpec((-1, -1),
                                                                                    F16)
    lst = [spec((1,), VarType.INT32)] * 3
    assert TI.infer(spec((2, 3), F16), None, lst)["Out"] == VarSpec((-1, -1, -1), F16)
    assert TI.infer(spec((2, 3)), None, [], repeat_times=[2])["Out"].shape == (2, 6)
    with pytest.raises(ValueError, match=r"^tile: repeat_times \[1, -2\] must be >= 0$"):
        TI.infer(spec((2, 3)), repeat_times=[1, -2])


def test_tile_with_repeat_tensors_and_empty_inputs():
    x = np.arange(6.0).reshape(2, 3)
    got = TI.forward(x, np.array([2, 1, 2], np.int32), repeat_times=[5])["Out"]
    np.testing.assert_array_equal(got, np.tile(x, (2, 1, 2)))
    got = TI.forward(x, None, [np.array([3], np.int64), np.array([1], np.int32)],
                     repeat_times=[5])["Out"]
    np.testing.assert_array_equal(got, np.tile(x, (3, 1)))
    empty = np.zeros((0, 3))
    out = TI.forward(empty, repeat_times=[2, 2])["Out"]
    assert out.shape == (0, 6)
    assert TI.backward(empty, np.zeros((0, 6)), repeat_times=[2, 2])["X"].shape == (0, 3)


# -- where ------------------------------------------------------------------------------------
WH = get_op_def("where")


def test_where_infers_unknown_zero_and_one_dims():
    b = VarType.BOOL
    assert WH.infer(spec((-1, 3), b), spec((-1, 3)), spec((-1, 3)))["Out"].shape == (-1, 3)
    assert WH.infer(spec((-1, 3), b), spec((2, 3)), spec((3,)))["Out"].shape == (2, 3)
    assert WH.infer(spec((1, 3), b), spec((1, 3)), spec((1, 3)))["Out"].shape == (1, 3)
    assert WH.infer(spec((-1, 3), b), spec((1, 3)), spec((3,)))["Out"].shape == (-1, 3)
    # zero-sized inputs give a zero-sized Out (Paddle 2.6: where of [0, 3] inputs is [0, 3])
    assert WH.infer(spec((0, 3), b), spec((0, 3)), spec((0, 3)))["Out"].shape == (0, 3)
    assert WH.infer(spec((0, 3), b), spec((1, 3)), spec((3,)))["Out"].shape == (0, 3)
    assert WH.infer(spec((2, 3), b), spec((2, 3), F16, 1), spec((3,), F16))["Out"] == \
        VarSpec((2, 3), F16, 1)
    out = WH.forward(np.ones((0, 3), bool), np.ones((0, 3)), np.ones((0, 3)))["Out"]
    assert out.shape == (0, 3)


def test_where_broadcast_error_names_the_three_shapes():
    with pytest.raises(ValueError, match=r"^where: Condition \[2, 3\], X \[4\] and Y \[5, 1\] "
                                         r"cannot be broadcast together$"):
        WH.infer(spec((2, 3), VarType.BOOL), spec((4,)), spec((5, 1)))


def test_where_float32_gradients_stay_float32():
    c = np.array([[True, False, True]])
    x, y = np.ones((2, 3), np.float32), np.full((3,), 2.0, np.float32)
    d = np.arange(6, dtype=np.float32).reshape(2, 3)
    g = WH.backward(c, x, y, d)
    assert g["X"].dtype == np.float32 and g["Y"].dtype == np.float32
    np.testing.assert_array_equal(g["X"], [[0, 0, 2], [3, 0, 5]])
    np.testing.assert_array_equal(g["Y"], [0, 5, 0])


# -- top_k_v2 ---------------------------------------------------------------------------------
TK = get_op_def("top_k_v2")


def test_topk_shape_inference():
    i64 = VarType.INT64
    got = TK.infer(spec((), F16))
    assert got == {"Out": VarSpec((), F16), "Indices": VarSpec((), i64)}
    got = TK.infer(spec((5,), F16, 1))
    assert got == {"Out": VarSpec((1,), F16, 1), "Indices": VarSpec((1,), i64, 1)}
    got = TK.infer(spec((2, 5), F16, 1), k=5, axis=1)
    assert got["Out"] == VarSpec((2, 5), F16, 1)
    got = TK.infer(spec((2, 5), F16, 1), spec((1,), VarType.INT32), k=1, axis=0)
    assert got == {"Out": VarSpec((-1, 5), F16, 1), "Indices": VarSpec((-1, 5), i64, 1)}
    assert TK.infer(spec((-1, 5)), k=3, axis=0)["Out"].shape == (3, 5)
    with pytest.raises(ValueError, match=r"^top_k_v2: k must be >= 1, got 0$"):
        TK.infer(spec((2, 5)), k=0)
    with pytest.raises(ValueError, match=r"^top_k_v2: k=1 exceeds dim 0 of X \(shape \[0, 5\]\)"):
        TK.infer(spec((0, 5)), k=1, axis=0)
    with pytest.raises(ValueError, match=r"^top_k_v2: axis 2 is out of range for input of rank 2"):
        TK.infer(spec((2, 5)), axis=2)


def test_topk_defaults_k_and_range_and_k_tensor():
    x = np.array([[3.0, 9.0, 1.0, 9.0], [2.0, 0.0, 5.0, 4.0]])
    out = TK.forward(x)                         # Paddle 2.6: k=1, axis=-1, largest, sorted
    np.testing.assert_array_equal(out["Out"], [[9.0], [5.0]])
    np.testing.assert_array_equal(out["Indices"], [[1], [2]])
    out = TK.forward(x, np.array([4], np.int32), k=1)
    np.testing.assert_array_equal(out["Out"], [[9.0, 9.0, 3.0, 1.0], [5.0, 4.0, 2.0, 0.0]])
    np.testing.assert_array_equal(out["Indices"], [[1, 3, 0, 2], [2, 3, 0, 1]])
    assert out["Indices"].dtype == np.int64
    assert TK.forward(x, k=1, largest=False)["Out"].tolist() == [[1.0], [0.0]]
    with pytest.raises(ValueError, match=r"^top_k_v2: k=5 must be in \[1, 4\] for X of shape "
                                         r"\[2, 4\] along axis -1$"):
        TK.forward(x, k=5)
    with pytest.raises(ValueError, match=r"k=0 must be in \[1, 2\] for X of shape \[2, 4\] "
                                         r"along axis 0"):
        TK.forward(x, np.array([0], np.int64), axis=0)


def test_topk_ties_take_the_lower_index_first_also_for_bools():
    # the documented tie rule (a stable sort): many equal keys, more than a quicksort keeps
    x = np.array([1.0, 3.0, 2.0] * 30)
    got = TK.forward(x, k=30)["Indices"]
    np.testing.assert_array_equal(got, np.arange(1, 90, 3))
    got = TK.forward(x, k=30, largest=False)["Indices"]
    np.testing.assert_array_equal(got, np.arange(0, 90, 3))
    b = np.array([False, True, False, True, True])
    out = TK.forward(b, k=3)
    assert out["Out"].tolist() == [True, True, True] and out["Indices"].tolist() == [1, 3, 4]
    out = TK.forward(b, k=2, largest=False)
    assert out["Out"].tolist() == [False, False] and out["Indices"].tolist() == [0, 2]


def test_topk_zero_d_and_vector_gradients():
    out = TK.forward(np.float32(4.0).reshape(()))
    assert out["Out"].shape == () and out["Indices"].shape == () and \
        out["Indices"].dtype == np.int64 and out["Out"] == 4.0
    g = TK.backward(np.float32(4.0).reshape(()), out["Indices"], np.float32(2.5).reshape(()))
    assert g["X"].shape == () and g["X"].dtype == np.float32 and g["X"] == 2.5
    x = np.array([0.5, 3.0, -1.0, 2.0], np.float32)
    idx = np.array([1, 3])
    g = TK.backward(x, idx, np.array([10.0, 20.0], np.float32), k=2)
    assert g["X"].dtype == np.float32
    np.testing.assert_array_equal(g["X"], [0.0, 10.0, 0.0, 20.0])
    g = TK.backward(np.zeros((2, 3), np.float32), np.array([[2], [0]]),
                    np.array([[1.0], [2.0]], np.float32))
    np.testing.assert_array_equal(g["X"], [[0, 0, 1], [2, 0, 0]])       # default axis -1


# -- p_norm -----------------------------------------------------------------------------------
PN = get_op_def("p_norm")


def test_p_norm_shape_inference():
    assert PN.infer(spec((), F16))["Out"] == VarSpec((), F16)
    assert PN.infer(spec((2, 3), F16), asvector=True, keepdim=True)["Out"] == \
        VarSpec((1, 1), F16)
    assert PN.infer(spec((2, 3), F16), asvector=True)["Out"] == VarSpec((), F16)
    assert PN.infer(spec((2, 3)), axis=0)["Out"].shape == (3,)
    with pytest.raises(ValueError, match=r"^p_norm: axis 1 is out of range for input of rank 1"):
        PN.infer(spec((4,)), axis=1)
    with pytest.raises(ValueError, match=r"^p_norm: axis 1 is out of range for input of rank 1"):
        PN.forward(np.ones(4), axis=1)
    with pytest.raises(ValueError, match=r"^p_norm: axis -2 is out of range"):
        PN.backward(np.ones(4), np.ones(()), np.ones(()), axis=-2)


def test_p_norm_defaults_are_paddle_2_6s():
    # porder 2, axis -1, epsilon 1e-12, keepdim False, asvector False
    x = np.array([[3.0, 4.0], [0.06, 0.08]])
    out = PN.forward(x)["Out"]
    np.testing.assert_allclose(out, [5.0, 0.1], rtol=1e-15)
    g = PN.backward(x, out, np.ones(2))["X"]
    np.testing.assert_allclose(g, x / out[:, None], rtol=1e-14)     # small norms: eps unseen
    assert PN.infer(spec((2, 3)))["Out"].shape == (2,)


def test_p_norm_keepdim_zero_order_and_asvector():
    x = np.array([[0.0, 2.0, -1.0], [0.0, 0.0, 3.0]])
    got = PN.forward(x, porder=0.0, axis=1, keepdim=True)["Out"]
    assert got.shape == (2, 1) and got.tolist() == [[2.0], [1.0]]
    got = PN.forward(x, asvector=True, keepdim=True)["Out"]
    assert got.shape == (1, 1) and np.isclose(got[0, 0], np.sqrt(14.0))
    g = PN.backward(x, np.array([2.0, 1.0]), np.ones(2), porder=0.0, axis=1)
    assert set(g) == {"X"} and g["X"].shape == (2, 3) and not g["X"].any()


def test_p_norm_inf_gradient_at_zero_entries_and_float32():
    x = np.array([[0.0, -2.0, 1.0], [0.5, 0.0, 0.25]], np.float32)
    for p, want_out, picked in ((np.inf, [2.0, 0.5], [(0, 1), (1, 0)]),
                                (-np.inf, [0.0, 0.0], [(0, 0), (1, 1)])):
        out = PN.forward(x, porder=p, axis=1)["Out"]
        assert out.dtype == np.float32 and out.tolist() == want_out
        g = PN.backward(x, out, np.array([3.0, 5.0], np.float32), porder=p, axis=1)["X"]
        ref = np.zeros((2, 3), np.float32)
        for (i, j) in picked:
            ref[i, j] = np.float32([3.0, 5.0][i]) * np.sign(x[i, j])
        assert g.dtype == np.float32
        np.testing.assert_array_equal(g, ref)
    g = PN.backward(x, PN.forward(x, porder=3.0, axis=1)["Out"], np.ones(2, np.float32),
                    porder=3.0, axis=1)["X"]
    assert g.dtype == np.float32


# -- isfinite_v2 / isnan_v2 / isinf_v2, mish ---------------------------------------------------
@pytest.mark.parametrize("op", ["isfinite_v2", "isnan_v2", "isinf_v2"])
def test_elementwise_tests_keep_the_lod_level(op):
    assert get_op_def(op).infer(spec((2, 3), F16, 2))["Out"] == VarSpec((2, 3), VarType.BOOL, 2)


MI = get_op_def("mish")


def _mish_ref(x, t):
    """fluid 1.8's mish_op.h: softplus = x if x > t, exp(x) if x < -t, else log1p(exp(x))
    (t > 0), then x * tanh(softplus); written per element."""
    out = np.empty_like(x)
    for i, v in np.ndenumerate(x):
        if t > 0 and v > t:
            sp = v
        elif t > 0 and v < -t:
            sp = np.exp(v)
        else:
            sp = np.log1p(np.exp(v))
        out[i] = v * np.tanh(sp)
    return out


def test_mish_at_its_thresholds_and_its_default():
    x = np.array([0.5, -0.5, 0.6, -0.6, 0.0])
    np.testing.assert_allclose(MI.forward(x, threshold=0.5)["Out"], _mish_ref(x, 0.5),
                               rtol=1e-15)
    # the default threshold 20: 20.5 takes the linear piece, -20.5 the exp piece
    x = np.array([20.5, -20.5, 1.0])
    np.testing.assert_allclose(MI.forward(x)["Out"], _mish_ref(x, 20.0), rtol=1e-15)
    assert MI.forward(np.array([-20.5]))["Out"][0] != _mish_ref(np.array([-20.5]), 21.0)[0]
    assert MI.infer(spec((2, 3), F16, 1))["Out"] == VarSpec((2, 3), F16, 1)


def test_mish_gradient_at_its_thresholds_by_piece():
    # at x == t the middle piece's derivative (sigmoid) applies, past it the linear one's (1)
    t = 0.5
    x = np.array([0.5, -0.5, 0.6, -0.6])
    sp = np.log1p(np.exp(x))
    dsp = 1.0 / (1.0 + np.exp(-x))
    sp[2], dsp[2] = x[2], 1.0
    sp[3], dsp[3] = np.exp(x[3]), np.exp(x[3])
    th = np.tanh(sp)
    want = x * (1.0 - th * th) * dsp + th
    np.testing.assert_allclose(MI.backward(x, np.ones(4), threshold=t)["X"], want, rtol=1e-14)
    g = MI.backward(np.array([20.5, -20.5]), np.ones(2))["X"]        # default threshold 20
    np.testing.assert_allclose(g, [1.0, np.tanh(np.exp(-20.5)) - 20.5 * np.exp(-20.5)],
                               rtol=1e-12)
    g32 = MI.backward(x.astype(np.float32), np.ones(4, np.float32), threshold=t)["X"]
    assert g32.dtype == np.float32


def test_mish_of_a_huge_input_does_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = MI.forward(np.array([1000.0, -1000.0]))["Out"]
        g = MI.backward(np.array([1000.0, -1000.0]), np.ones(2))["X"]
    np.testing.assert_allclose(out, [1000.0, -0.0], atol=0)
    np.testing.assert_allclose(g, [1.0, 0.0], atol=1e-300)


# -- diag_v2 ----------------------------------------------------------------------------------
DG = get_op_def("diag_v2")


def test_diag_shape_inference():
    assert DG.infer(spec((-1,), F16))["Out"] == VarSpec((-1, -1), F16)
    assert DG.infer(spec((0,), F16), offset=2)["Out"] == VarSpec((2, 2), F16)
    assert DG.infer(spec((3,)))["Out"].shape == (3, 3)
    for shape in ((-1, 4), (3, -1)):
        assert DG.infer(spec(shape, F16), offset=1)["Out"] == VarSpec((-1,), F16)
    assert DG.infer(spec((0, 4)))["Out"].shape == (0,)
    assert DG.infer(spec((3, 0)))["Out"].shape == (0,)
    # Paddle 2.6: diag of a [3, 4] matrix at offset 4 or -3 is empty
    assert DG.infer(spec((3, 4)), offset=4)["Out"].shape == (0,)
    assert DG.infer(spec((3, 4)), offset=-3)["Out"].shape == (0,)
    assert DG.infer(spec((3, 4), F16), offset=1)["Out"] == VarSpec((3,), F16)


def test_diag_defaults_dtypes_and_offsets():
    x = np.array([1, 2], np.int32)
    out = DG.forward(x)["Out"]                    # offset 0, padding_value 0
    assert out.dtype == np.int32 and out.tolist() == [[1, 0], [0, 2]]
    out = DG.forward(x.astype(np.float32), offset=1, padding_value=0.5)["Out"]
    # Paddle 2.6.2: [[0.5, 1, 0.5], [0.5, 0.5, 2]... ] for ones; here with [1, 2]
    assert out.dtype == np.float32
    assert out.tolist() == [[0.5, 1.0, 0.5], [0.5, 0.5, 2.0], [0.5, 0.5, 0.5]]
    np.testing.assert_array_equal(DG.forward(np.arange(6.0).reshape(2, 3))["Out"], [0.0, 4.0])
    g = DG.backward(np.zeros(2), np.arange(4.0).reshape(2, 2))["X"]
    np.testing.assert_array_equal(g, [0.0, 3.0])
    with pytest.raises(ValueError, match=r"^diag_v2: X must be 1-D or 2-D, got shape "
                                         r"\[1, 1, 1\]$"):
        DG.forward(np.zeros((1, 1, 1)))


@pytest.mark.parametrize("offset", [2, -1, 0])
def test_diag_matrix_gradient_lands_on_its_diagonal(offset):
    x = np.zeros((3, 5), np.float32)
    n = len(np.diagonal(x, offset))
    d = np.arange(1.0, n + 1, dtype=np.float32)
    g = DG.backward(x, d, offset=offset)["X"]
    ref = np.zeros((3, 5), np.float32)
    for i in range(3):
        for j in range(5):
            if j - i == offset:
                ref[i, j] = d[min(i, j)]
    assert g.dtype == np.float32
    np.testing.assert_array_equal(g, ref)


# -- pad3d ------------------------------------------------------------------------------------
PD = get_op_def("pad3d")


def test_pad3d_shape_inference():
    got = PD.infer(spec((1, 2, 3, 4, 5), F16), spec((6,), VarType.INT32))["Out"]
    assert got == VarSpec((1, 2, -1, -1, -1), F16)
    got = PD.infer(spec((1, 2, 3, 4, 5), F16), spec((6,), VarType.INT32),
                   data_format="NDHWC")["Out"]
    assert got == VarSpec((1, -1, -1, -1, 5), F16)
    got = PD.infer(spec((-1, 2, -1, 0, 5), F16), paddings=[1, 2, 3, 4, 5, 6])["Out"]
    assert got == VarSpec((-1, 2, -1, 7, 8), F16)
    assert PD.infer(spec((1, 2, 3, 4, 5)))["Out"].shape == (1, 2, 3, 4, 5)
    got = PD.infer(spec((1, 3, 4, 5, 2)), paddings=[1, 0, 0, 2, 3, 0], data_format="ndhwc")
    assert got["Out"].shape == (1, 6, 6, 6, 2)
    with pytest.raises(ValueError, match=r"^pad3d: data_format must be 'NCDHW' or 'NDHWC', got "
                                         r"'NCHW'$"):
        PD.infer(spec((1, 1, 1, 1, 1)), data_format="NCHW")
    with pytest.raises(ValueError, match=r"^pad3d: mode must be one of \['circular', "
                                         r"'constant', 'reflect', 'replicate'\], got 'edge'$"):
        PD.infer(spec((1, 1, 1, 1, 1)), mode="edge")


def _pad_ref(x, pads, mode, value, channels_last=False):
    """A loop over the output cells of a 5-D X (pads [left, right, top, bottom, front,
    back]): each reads the input cell Paddle's pad3d_kernel.cc maps it to."""
    axes = (1, 2, 3) if channels_last else (2, 3, 4)
    dims = [x.shape[a] for a in axes]
    lo = [pads[4], pads[2], pads[0]]
    hi = [pads[5], pads[3], pads[1]]
    oshape = list(x.shape)
    for k, a in enumerate(axes):
        oshape[a] = dims[k] + lo[k] + hi[k]
    out = np.empty(oshape, x.dtype)
    for idx in np.ndindex(*oshape):
        src, const = list(idx), False
        for k, a in enumerate(axes):
            p, n = idx[a] - lo[k], dims[k]
            if mode == "constant":
                const |= not 0 <= p < n
            elif mode == "replicate":
                p = min(max(p, 0), n - 1)
            elif mode == "circular":
                p %= n
            else:
                while not 0 <= p < n:
                    p = -p if p < 0 else 2 * (n - 1) - p
            src[a] = p
        out[idx] = value if const else x[tuple(src)]
    return out


def test_pad3d_defaults_and_paddings_tensor():
    x = np.arange(24.0, dtype=np.float32).reshape(1, 2, 1, 3, 4)
    out = PD.forward(x)["Out"]            # Paddle 2.6: zero paddings, constant 0, NCDHW
    np.testing.assert_array_equal(out, x)
    pads = [2, 1, 0, 2, 1, 0]
    out = PD.forward(x, np.array(pads, np.int32), mode="constant", value=-1.5)["Out"]
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, _pad_ref(x, pads, "constant", -1.5))
    # the gradient with the Paddings tensor: the adjoint of the forward's cell map
    d = np.random.default_rng(0).standard_normal(out.shape).astype(np.float32)
    g = PD.backward(x, np.array(pads, np.int64), d, mode="constant")["X"]
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, d[:, :, 1:2, 0:3, 2:6], rtol=1e-6)
    g = PD.backward(x, None, d[:, :, :1, :3, :4])["X"]       # default: no padding
    np.testing.assert_array_equal(g, d[:, :, :1, :3, :4])


@pytest.mark.parametrize("mode", ["replicate", "circular", "reflect"])
def test_pad3d_size_one_dims_and_their_limits(mode):
    x = np.arange(2.0).reshape(1, 1, 1, 2, 1)
    pads = [0, 0, 1, 0, 0, 0] if mode == "reflect" else [2, 1, 0, 0, 0, 0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = PD.forward(x, paddings=pads, mode=mode)["Out"]
    np.testing.assert_array_equal(out, _pad_ref(x, pads, mode, 0.0))
    if mode == "replicate":
        # Paddle 2.6.2: [[0, 0, 0, 0], [1, 1, 1, 1]] for this X (circular too)
        assert out[0, 0, 0].tolist() == [[0.0] * 4, [1.0] * 4]


def test_pad3d_reflect_limits_and_empty_dims():
    x = np.arange(3.0).reshape(1, 1, 1, 1, 3)
    out = PD.forward(x, paddings=[2, 0, 0, 0, 0, 0], mode="reflect")["Out"]
    assert out.reshape(-1).tolist() == [2.0, 1.0, 0.0, 1.0, 2.0]       # Paddle 2.6.2
    # Paddle 2.6: "Expected in_width > pads[0], but received in_width:3 <= pads[0]:3"
    for pads in ([3, 0, 0, 0, 0, 0], [0, 3, 0, 0, 0, 0]):
        with pytest.raises(ValueError, match=r"^pad3d: reflect padding \(\d, \d\) must be "
                                             r"smaller than the dim it pads \(3\)$"):
            PD.forward(x, paddings=pads, mode="reflect")
    empty = np.zeros((1, 1, 2, 2, 0))
    out = PD.forward(empty, paddings=[1, 0, 0, 0, 0, 0], mode="constant", value=2.0)["Out"]
    assert out.shape == (1, 1, 2, 2, 1) and (out == 2.0).all()          # Paddle 2.6.2
    for mode in ("replicate", "circular"):
        for pads in ([1, 0, 0, 0, 0, 0], [0, 1, 0, 0, 0, 0]):
            with pytest.raises(ValueError, match=f"^pad3d: {mode} padding of an empty dim$"):
                PD.forward(empty, paddings=pads, mode=mode)


def test_pad3d_gradient_with_a_paddings_tensor_through_a_program():
    x = np.random.default_rng(1).standard_normal((1, 2, 2, 3, 3))
    pads = np.array([1, 2, 0, 1, 1, 0], np.int32)
    for mode in ("reflect", "replicate", "circular"):
        o, g, w, main = _program_grad("pad3d", {"X": x, "Paddings": pads},
                                      {"mode": mode, "paddings": [0] * 6}, (1, 2, 3, 4, 6))
        np.testing.assert_allclose(o, _pad_ref(x, pads.tolist(), mode, 0.0), rtol=1e-15)
        # dX[i] = sum of W over the output cells reading input cell i (cells tagged by index)
        tag = np.arange(x.size, dtype=np.float64).reshape(x.shape)
        src = _pad_ref(tag, pads.tolist(), mode, -1.0).astype(np.int64)
        ref = np.zeros(x.size)
        np.add.at(ref, src.reshape(-1), w.reshape(-1))
        np.testing.assert_allclose(g, ref.reshape(x.shape), rtol=1e-12)


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int64"])
def test_topk_largest_of_integers_at_their_limits(dtype):
    # -x wraps for unsigned ints and overflows at a signed minimum: the order must not
    info = np.iinfo(dtype)
    x = np.array([3, info.min, info.max, 0, info.min + 1, info.max], dtype)
    want = sorted(range(6), key=lambda i: (-int(x[i]), i))
    out = TK.forward(x, k=6)
    assert out["Indices"].tolist() == want and out["Out"].dtype == np.dtype(dtype)
    want = sorted(range(6), key=lambda i: (int(x[i]), i))[:2]
    assert TK.forward(x, k=2, largest=False)["Indices"].tolist() == want


def test_pad3d_constant_padding_of_an_empty_dim_has_an_empty_gradient():
    empty = np.zeros((1, 2, 0, 2, 1), np.float32)
    out = PD.forward(empty, paddings=[0, 0, 0, 1, 2, 0], value=1.5)["Out"]
    assert out.shape == (1, 2, 2, 3, 1) and out.dtype == np.float32 and (out == 1.5).all()
    g = PD.backward(empty, None, np.ones(out.shape, np.float32), paddings=[0, 0, 0, 1, 2, 0])
    assert g["X"].shape == (1, 2, 0, 2, 1) and g["X"].dtype == np.float32


def test_small_cases_left_by_the_second_run():
    with pytest.raises(ValueError, match=r"^top_k_v2: axis -3 is out of range for input of "
                                         r"rank 2"):
        TK.forward(np.zeros((2, 3)), axis=-3)
    # asvector with keepdim keeps X's rank also for a vector (Paddle 2.6: shape [1])
    got = PN.forward(np.array([3.0, 4.0]), asvector=True, keepdim=True)["Out"]
    assert got.shape == (1,) and got[0] == 5.0
    assert PN.forward(np.float64(-2.0).reshape(()), asvector=True, keepdim=True)["Out"].shape \
        == ()
    assert DG.infer(spec((-1,)), offset=2)["Out"].shape == (-1, -1)
    # a 0-d X expanded to the length-1 shape tensor: a 1-D Out
    assert EX.infer(spec(()), spec((1,), VarType.INT32))["Out"].shape == (-1,)
    x = np.ones((1, 1, 1, 1, 2), np.float32)
    out = PD.forward(x, paddings=[1, 0, 0, 0, 0, 0])["Out"]          # default value 0
    assert out.reshape(-1).tolist() == [0.0, 1.0, 1.0]
