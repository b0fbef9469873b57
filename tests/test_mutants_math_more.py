"""Tests written from the mutation run of ``fluidlite/ops/math_more.py`` (issue 28, round 10):
float32 results keep float32 (l1_norm's gradient, conv_shift, fc), the build-time checks and
their messages (minus, frobenius_norm, fill, unbind, conv_shift, fc -- fluid 1.8's
InferShape), frobenius_norm's 1e-12 guard away from zero, fill's float attribute and zero-size
shapes, fc without Bias and with a [1, N] Bias.

References: fluid 1.8's C++ (``FrobeniusNormGradFunctor``: dX = X / (Out + 1e-12) * dOut;
``FillKernel``: the ``value`` attr is a ``std::vector<float>``, each entry static_cast to the
dtype; ``FCOp::InferShape``: rank(Input) > in_num_col_dims, Bias [N] or [1, N];
``ConvShiftOp::InferShape``: 2-D inputs, the same batch, Y's width odd and <= X's width),
float64 NumPy loops."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core.dtypes import VarType
from fluidlite.core.registry import VarSpec, get_op_def


def _f32(*shape, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)


def _run_infer(op_type, inputs, outputs, attrs=None):
    """The op appended to a program (fluid's InferShape runs there): its output variables."""
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        block = main.global_block()
        ins = {}
        for slot, spec in inputs.items():
            shape, dtype, lod = spec
            ins[slot] = block.create_var(name=slot.lower(), shape=shape, dtype=dtype,
                                         lod_level=lod)
        outs = {}
        for slot, n in outputs.items():
            outs[slot] = ([block.create_var(name=f"{slot.lower()}{i}") for i in range(n)]
                          if n else block.create_var(name=slot.lower() + "_out"))
        block.append_op(op_type, ins, outs, attrs or {})
    return outs


# -- l1_norm -----------------------------------------------------------------------------------
def test_l1_norm_keeps_float32():
    x = _f32(3, 4)
    x[0, 0] = 0.0
    d = get_op_def("l1_norm")
    out = d.forward(x)["Out"]
    assert out.dtype == np.float32 and out.shape == (1,)
    np.testing.assert_allclose(out, [np.abs(x.astype(np.float64)).sum()], rtol=1e-6)
    g = d.backward(x, np.array([2.5], np.float32))["X"]
    assert g.dtype == np.float32
    np.testing.assert_array_equal(g, np.sign(x) * np.float32(2.5))
    assert g[0, 0] == 0
    out_var = _run_infer("l1_norm", {"X": ((3, 4), "float32", 0)}, {"Out": 0})["Out"]
    assert out_var.dtype == VarType.FP32 and tuple(out_var.shape) == (1,)


# -- minus -------------------------------------------------------------------------------------
def test_minus_refuses_different_shapes_naming_them():
    d = get_op_def("minus")
    with pytest.raises(ValueError, match=r"minus: X and Y must have the same shape, but "
                                         r"received X \[2, 3\] and Y \[2, 3, 1\]"):
        d.infer(VarSpec((2, 3), "float32"), VarSpec((2, 3, 1), "float32"))
    with pytest.raises(ValueError, match=r"minus: .* X \[2, 3\] and Y \[2, 4\]"):
        d.infer(VarSpec((2, 3), "float32"), VarSpec((2, 4), "float32"))
    assert d.infer(VarSpec((-1, 3), "float32"), VarSpec((5, 3), "float32"))["Out"].shape \
        == (-1, 3)


# -- frobenius_norm ----------------------------------------------------------------------------
def test_frobenius_norm_gradient_guard_is_added_not_subtracted():
    """fluid's FrobeniusNormGradFunctor: X / (Out + 1e-12) * dOut, which matters for norms
    near 1e-12 (here Out = 5e-12: X / 6e-12)."""
    x = np.array([[3e-12, 4e-12], [3.0, 4.0]])
    d = get_op_def("frobenius_norm")
    out = d.forward(x, dim=[1], keep_dim=False, reduce_all=False)["Out"]
    np.testing.assert_allclose(out, [5e-12, 5.0], rtol=1e-12)
    dy = np.array([1.0, 2.0])
    g = d.backward(x, out, dy, dim=[1], keep_dim=False, reduce_all=False)["X"]
    ref = x / (out[:, None] + 1e-12) * dy[:, None]
    np.testing.assert_allclose(g, ref, rtol=1e-12)
    np.testing.assert_allclose(g[0], [0.5, 4 / 6], rtol=1e-9)


def test_frobenius_norm_keeps_float32():
    x = _f32(2, 3, seed=8)
    d = get_op_def("frobenius_norm")
    out = d.forward(x, dim=[1], keep_dim=False, reduce_all=False)["Out"]
    assert out.dtype == np.float32
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(out, np.sqrt((x64 ** 2).sum(1)), rtol=1e-6)
    dy = np.array([1.0, -2.0], np.float32)
    g = d.backward(x, out, dy, dim=[1], keep_dim=False, reduce_all=False)["X"]
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, x64 / np.sqrt((x64 ** 2).sum(1, keepdims=True)) * dy[:, None],
                               rtol=1e-5)


def test_frobenius_norm_refuses_integers_naming_the_dtype():
    with pytest.raises(ValueError, match=r"frobenius_norm: X must be a float tensor, but it "
                                         r"is int64"):
        get_op_def("frobenius_norm").infer(VarSpec((2, 3), "int64"), dim=[1])


# -- fill --------------------------------------------------------------------------------------
def test_fill_values_are_floats_first_as_fluids_vector_float_attr():
    """2.9999999 is 3.0f: fluid's FillKernel sees 3.0 and casts it to 3 (a float64 reading
    would give 2); float64 outputs hold the float32 value exactly."""
    d = get_op_def("fill")
    vals = [2.9999999, -1.0000001, 0.1]
    out = d.forward(value=vals, shape=[3], dtype=VarType.INT32)["Out"]
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, [3, -1, 0])
    out = d.forward(value=vals, shape=[3], dtype=VarType.FP64)["Out"]
    assert out.dtype == np.float64
    np.testing.assert_array_equal(out, np.array(vals, np.float32).astype(np.float64))


def test_fill_scalar_and_zero_size_shapes():
    d = get_op_def("fill")
    out = d.forward(value=[7.5], shape=[], dtype=VarType.FP32)["Out"]
    assert out.shape == () and out.dtype == np.float32 and float(out) == 7.5
    spec = d.infer(shape=[0, 3], dtype=VarType.FP32)["Out"]
    assert spec.shape == (0, 3)
    out = d.forward(value=[], shape=[0, 3], dtype=VarType.FP32)["Out"]
    assert out.shape == (0, 3)
    with pytest.raises(ValueError, match=r"fill: every dim of shape must be >= 0, got "
                                         r"\[2, -1\]"):
        d.infer(shape=[2, -1], dtype=VarType.FP32)
    with pytest.raises(ValueError, match=r"fill: value has 1 entries but shape \[2, 3\] needs "
                                         r"6"):
        d.forward(value=[1.0], shape=[2, 3], dtype=VarType.FP32)


# -- unbind ------------------------------------------------------------------------------------
def test_unbind_inference_keeps_dtype_and_lod_level():
    outs = _run_infer("unbind", {"X": ((3, 2, 4), "float32", 1)}, {"Out": 2}, {"axis": 1})
    for v in outs["Out"]:
        assert v.dtype == VarType.FP32 and tuple(v.shape) == (3, 4) and v.lod_level == 1
    specs = get_op_def("unbind").infer(VarSpec((3, 2), "int64", 2), axis=0)["Out"]
    assert len(specs) == 3
    assert all(s.dtype == VarType.INT64 and s.lod_level == 2 and s.shape == (2,)
               for s in specs)


def test_unbind_checks_name_the_op():
    d = get_op_def("unbind")
    with pytest.raises(ValueError, match=r"unbind: axis 2 is out of range for input of rank 2"):
        d.infer(VarSpec((3, 2), "float32"), axis=2)
    with pytest.raises(ValueError, match=r"unbind: the size of axis 0 must be known, X is "
                                         r"\[-1, 2\]"):
        d.infer(VarSpec((-1, 2), "float32"), axis=0)
    # a zero-size axis is known: no pieces
    assert d.infer(VarSpec((0, 2), "float32"), axis=0)["Out"] == []
    assert d.forward(np.zeros((0, 2)), axis=0)["Out"] == []


# -- conv_shift --------------------------------------------------------------------------------
def _ref_conv_shift(x, y):
    x, y = x.astype(np.float64), y.astype(np.float64)
    b, m = x.shape
    n = y.shape[1]
    out = np.zeros((b, m))
    for i in range(b):
        for j in range(m):
            for k in range(n):
                out[i, j] += x[i, (j + k - (n - 1) // 2) % m] * y[i, k]
    return out


def test_conv_shift_float32_and_equal_widths():
    x, y = _f32(2, 5, seed=1), _f32(2, 5, seed=2)       # N == M is allowed (fluid: LE)
    d = get_op_def("conv_shift")
    assert d.infer(VarSpec((2, 5), "float32"), VarSpec((2, 5), "float32"))["Out"].shape \
        == (2, 5)
    out = d.forward(x, y)["Out"]
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, _ref_conv_shift(x, y), rtol=1e-5, atol=1e-6)
    dout = _f32(2, 5, seed=3)
    g = d.backward(x, y, dout)
    assert g["X"].dtype == np.float32 and g["Y"].dtype == np.float32
    # the adjoint identity <dOut, conv(X, Y)> is linear in X and in Y
    dx_ref = np.zeros((2, 5))
    for i in range(5):
        e = np.zeros((2, 5), np.float32)
        e[:, i] = 1
        dx_ref[:, i] = (dout.astype(np.float64) * _ref_conv_shift(e, y)).sum(1)
    np.testing.assert_allclose(g["X"], dx_ref, rtol=1e-5, atol=1e-6)


def test_conv_shift_checks():
    d = get_op_def("conv_shift")
    s = lambda *shape: VarSpec(shape, "float32")
    with pytest.raises(ValueError, match=r"conv_shift: X and Y must be 2-D, got \[3, 7\] and "
                                         r"\[3, 3, 1\]"):
        d.infer(s(3, 7), s(3, 3, 1))
    with pytest.raises(ValueError, match=r"conv_shift: X and Y must be 2-D"):
        d.infer(s(3, 7, 1), s(3, 3))
    with pytest.raises(ValueError, match=r"conv_shift: X and Y must have the same batch size, "
                                         r"got \[3, 7\] and \[2, 3\]"):
        d.infer(s(3, 7), s(2, 3))
    with pytest.raises(ValueError, match=r"conv_shift: Y's width must be odd, got 0"):
        d.infer(s(3, 7), s(3, 0))
    with pytest.raises(ValueError, match=r"conv_shift: Y's width 1 must not exceed X's 0"):
        d.infer(s(3, 0), s(3, 1))
    d.infer(s(3, -1), s(3, 3))          # X's width unknown at build time
    d.infer(s(3, 7), s(3, -1))          # Y's width unknown


# -- fc ----------------------------------------------------------------------------------------
def test_fc_float32_without_bias_and_with_a_row_bias():
    x, w = _f32(2, 3, 4, seed=4), _f32(12, 5, seed=5)
    d = get_op_def("fc")
    out = d.forward(x, w, None, in_num_col_dims=1)["Out"]
    assert out.dtype == np.float32 and out.shape == (2, 5)
    ref = x.reshape(2, 12).astype(np.float64) @ w.astype(np.float64)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)
    b = _f32(1, 5, seed=6)                      # fluid's [1, N] Bias
    out = d.forward(x, w, b, in_num_col_dims=1, activation_type="relu")["Out"]
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, np.maximum(ref + b, 0), rtol=1e-5, atol=1e-6)
    dout = _f32(2, 5, seed=7)
    g = d.backward(x, w, b, out, dout, in_num_col_dims=1, activation_type="relu")
    assert {k: v.dtype for k, v in g.items()} == {"Input": np.float32, "W": np.float32,
                                                  "Bias": np.float32}
    assert g["Bias"].shape == (1, 5) and g["W"].shape == (12, 5) and g["Input"].shape == x.shape
    dd = dout.astype(np.float64) * (out > 0)
    np.testing.assert_allclose(g["Bias"], dd.sum(0, keepdims=True), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(g["W"], x.reshape(2, 12).astype(np.float64).T @ dd,
                               rtol=1e-5, atol=1e-6)
    g = d.backward(x, w, None, out, dout, in_num_col_dims=1)
    assert set(g) == {"Input", "W"}
    # through a program: no Bias, the output keeps Input's dtype and LoD level
    outs = _run_infer("fc", {"Input": ((-1, 12), "float32", 1), "W": ((12, 5), "float32", 0)},
                      {"Out": 0})
    v = outs["Out"]
    assert v.dtype == VarType.FP32 and tuple(v.shape) == (-1, 5) and v.lod_level == 1


def test_fc_checks():
    d = get_op_def("fc")
    s = lambda *shape: VarSpec(shape, "float32")
    with pytest.raises(ValueError, match=r"fc: activation_type must be one of '', 'relu', "
                                         r"'gelu_erf', 'gelu_tanh', got 'tanh'"):
        d.infer(s(2, 3), s(3, 4), activation_type="tanh")
    # fluid: rank(Input) > in_num_col_dims
    with pytest.raises(ValueError, match=r"fc: in_num_col_dims must be in \[1, 1\] \(Input's "
                                         r"rank 2 must be larger than it\), got 2"):
        d.infer(s(2, 3), s(3, 4), in_num_col_dims=2)
    with pytest.raises(ValueError, match=r"fc: in_num_col_dims must be in \[1, 2\] .*, got 3"):
        d.infer(s(2, 3, 4), s(4, 4), in_num_col_dims=3)
    # a 1-D Input: fluid's FCOp refuses it (rank 1 is not larger than in_num_col_dims 1)
    with pytest.raises(ValueError, match=r"fc: in_num_col_dims must be in \[1, 0\] \(Input's "
                                         r"rank 1 must be larger than it\), got 1"):
        d.infer(s(6), s(1, 4), in_num_col_dims=1)
    with pytest.raises(ValueError, match=r"fc: W must be 2-D, got \[3, 4, 1\]"):
        d.infer(s(2, 3), s(3, 4, 1))
    with pytest.raises(ValueError, match=r"fc: the flattened input width 0 \(Input \[2, 0\], "
                                         r"in_num_col_dims 1\) must equal W's rows 3"):
        d.infer(s(2, 0), s(3, 4))
    with pytest.raises(ValueError, match=r"fc: the flattened input width 3 .* W's rows 0"):
        d.infer(s(2, 3), s(0, 4))
    with pytest.raises(ValueError, match=r"fc: Bias must be \[4\] or \[1, 4\], got \[2, 4\]"):
        d.infer(s(2, 3), s(3, 4), s(2, 4))
    with pytest.raises(ValueError, match=r"fc: Bias must be \[4\] or \[1, 4\], got \[1, 5\]"):
        d.infer(s(2, 3), s(3, 4), s(1, 5))
    # unknown dims pass the build-time checks
    assert d.infer(s(2, -1), s(3, 4))["Out"].shape == (2, 4)
    assert d.infer(s(2, 3), s(3, 4), s(-1))["Out"].shape == (2, 4)
    assert d.infer(s(2, 3), s(3, 4), s(1, -1))["Out"].shape == (2, 4)
    assert d.infer(s(2, 3), s(3, 4), None)["Out"].shape == (2, 4)
