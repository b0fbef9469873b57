"""OpTest cases for fluidlite/ops/activation.py: every activation op (kernel, inference,
numeric gradient), float32 preservation, the numpy erf fallback, layers and error paths."""
import math

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core.registry import get_op_def
from fluidlite.ops.activation import erf_fast, erf_numpy
from fluidlite.testing import OpTest

X = OpTest.rand(3, 5, low=-2.0, high=2.0)
POS = OpTest.rand(3, 5, low=0.2, high=2.0)


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _erf(x):
    return np.vectorize(math.erf)(x)


def _away(x, *kinks):
    """Move entries within 0.05 of a kink 0.1 away from it (central differences stay smooth)."""
    for k in kinks:
        x = np.where(np.abs(x - k) < 0.05, k + 0.1 * np.sign(x - k + 1e-12), x)
    return x


# op type, attrs, input, NumPy reference, whether the op is differentiable
CASES = [
    ("relu", {}, OpTest.rand(3, 5, avoid=0.0), lambda x: np.maximum(x, 0), True),
    ("sigmoid", {}, X, _sigmoid, True),
    ("tanh", {}, X, np.tanh, True),
    ("leaky_relu", {}, OpTest.rand(3, 5, avoid=0.0), lambda x: np.where(x > 0, x, 0.02 * x),
     True),
    ("leaky_relu", {"alpha": 0.3}, OpTest.rand(3, 5, avoid=0.0),
     lambda x: np.where(x > 0, x, 0.3 * x), True),
    ("elu", {}, OpTest.rand(3, 5, avoid=0.0), lambda x: np.where(x > 0, x, np.exp(x) - 1), True),
    ("elu", {"alpha": 0.5}, OpTest.rand(3, 5, avoid=0.0),
     lambda x: np.where(x > 0, x, 0.5 * (np.exp(x) - 1)), True),
    ("gelu", {}, X, lambda x: 0.5 * x * (1 + _erf(x / np.sqrt(2))), True),
    ("gelu", {"approximate": True}, X,
     lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))), True),
    ("exp", {}, X, np.exp, True),
    ("log", {}, POS, np.log, True),
    ("sqrt", {}, POS, np.sqrt, True),
    ("rsqrt", {}, POS, lambda x: 1 / np.sqrt(x), True),
    ("square", {}, X, np.square, True),
    ("abs", {}, OpTest.rand(3, 5, avoid=0.0), np.abs, True),
    ("sign", {}, OpTest.rand(3, 5, avoid=0.0), np.sign, True),    # dX = 0 (fluid's scale 0)
    ("reciprocal", {}, POS, lambda x: 1 / x, True),
    ("pow", {"factor": 3.0}, X, lambda x: x ** 3, True),
    ("pow", {"factor": 0.5}, POS, np.sqrt, True),
    ("relu6", {}, _away(OpTest.rand(3, 5, low=-2, high=8), 0.0, 6.0),
     lambda x: np.clip(x, 0, 6), True),
    ("relu6", {"threshold": 1.5}, OpTest.rand(3, 5, low=-1, high=1.4, avoid=0.0),
     lambda x: np.clip(x, 0, 1.5), True),
    ("softplus", {}, X, lambda x: np.log1p(np.exp(x)), True),
    ("softsign", {}, OpTest.rand(3, 5, avoid=0.0), lambda x: x / (1 + np.abs(x)), True),
    ("hard_sigmoid", {}, OpTest.rand(3, 5, low=-2, high=2, avoid=0.0),
     lambda x: np.clip(0.2 * x + 0.5, 0, 1), True),
    ("hard_sigmoid", {"slope": 0.5, "offset": 0.2}, OpTest.rand(3, 5, low=-0.3, high=1.5),
     lambda x: np.clip(0.5 * x + 0.2, 0, 1), True),
    ("swish", {}, X, lambda x: x * _sigmoid(x), True),
    ("swish", {"beta": 2.0}, X, lambda x: x * _sigmoid(2 * x), True),
    ("logsigmoid", {}, X, lambda x: np.log(_sigmoid(x)), True),
    ("sin", {}, X, np.sin, True),
    ("cos", {}, X, np.cos, True),
    ("floor", {}, OpTest.rand(3, 5, low=-3, high=3), np.floor, True),
    ("ceil", {}, OpTest.rand(3, 5, low=-3, high=3), np.ceil, True),
    ("round", {}, OpTest.rand(3, 5, low=-3, high=3), np.round, True),
]
IDS = [f"{c[0]}-{i}" for i, c in enumerate(CASES)]


def _keep_off_integers(x):
    """For floor/ceil/round: stay 0.1 away from the jumps so central differences see 0."""
    frac = x - np.floor(x)
    x = np.where(np.abs(frac) < 0.1, x + 0.15, x)
    x = np.where(np.abs(frac - 0.5) < 0.1, x + 0.15, x)
    return np.where(np.abs(frac - 1) < 0.1, x - 0.15, x)


@pytest.mark.parametrize("op_type,attrs,x,ref,diff", CASES, ids=IDS)
def test_activation_op(op_type, attrs, x, ref, diff):
    if op_type in ("floor", "ceil", "round"):
        x = _keep_off_integers(x)
    t = OpTest()
    t.op_type, t.inputs, t.attrs, t.outputs = op_type, {"X": x}, attrs, {"Out": ref(x)}
    t.check_infer()
    t.check_output(atol=1e-7, rtol=1e-6)
    if diff:        # floor/ceil/round: a gradient of zero (fluid's rule) is the right answer
        t.check_grad(["X"], "Out", max_relative_error=0.005,
                     allow_zero_grad=op_type in ("floor", "ceil", "round", "sign"))
    else:
        assert get_op_def(op_type).no_grad


def test_softmax_op():
    for axis, shape in ((-1, (3, 5)), (1, (2, 3, 4)), (0, (4, 3))):
        x = OpTest.rand(*shape, low=-3, high=3)
        e = np.exp(x - x.max(axis=axis, keepdims=True))
        t = OpTest()
        t.op_type, t.inputs, t.attrs = "softmax", {"X": x}, {"axis": axis}
        t.outputs = {"Out": e / e.sum(axis=axis, keepdims=True)}
        t.check_infer()
        t.check_output()
        t.check_grad(["X"], "Out")


def test_round_halves_away_from_zero_as_c():
    out = get_op_def("round").forward(np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5,
                                                0.49999999999999994]))["Out"]
    np.testing.assert_array_equal(out, [-3, -2, -1, 1, 2, 3, 0])


def test_extreme_inputs_stay_finite():
    x = np.array([-1000.0, -50.0, 0.0, 50.0, 1000.0], dtype=np.float32)
    for op_type, ref in (("sigmoid", [0, 0, 0.5, 1, 1]), ("softplus", [0, 0, np.log(2), 50, 1000]),
                         ("logsigmoid", [-1000, -50, -np.log(2), 0, 0])):
        out = get_op_def(op_type).forward(x)["Out"]
        assert out.dtype == np.float32
        np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-6, err_msg=op_type)
    s = get_op_def("softmax").forward(np.array([[1000.0, 0.0, -1000.0]]))["Out"]
    e64 = np.exp(-64.0) / (1 + 2 * np.exp(-64.0))     # fluid's ValueClip at -64
    np.testing.assert_allclose(s, [[1, e64, e64]])


@pytest.mark.parametrize("op_type,attrs,x,ref,diff", CASES, ids=IDS)
def test_float32_stays_float32(op_type, attrs, x, ref, diff):
    """No hidden float64 upcast in the kernel, its lowered fast path, or the gradient."""
    opdef = get_op_def(op_type)
    x32 = x.astype(np.float32)
    assert opdef.forward(x32, **attrs)["Out"].dtype == np.float32
    spec = fluid.core.registry.VarSpec(x.shape, "float32")
    absent = [None] * (len(opdef.in_slots) - 1)     # optional inputs (pow's FactorTensor)
    fast = opdef.lower([spec] + absent, dict(attrs))
    if fast is not None:
        assert fast(x32, *absent).dtype == np.float32
    if diff and opdef.has_backward():
        uses = [x32 if u == "X" else opdef.forward(x32, **attrs)["Out"] if u == "Out" else None
                for u in opdef.grad_uses]
        d = opdef.backward(*uses, np.ones_like(x32), **attrs)["X"]
        assert d.dtype == np.float32, op_type


def test_erf_numpy_fallback_matches_math_erf():
    x = np.concatenate([np.linspace(-7, 7, 4001), np.geomspace(1e-300, 1, 50),
                        -np.geomspace(1e-300, 1, 50)])
    ref = np.array([math.erf(v) for v in x])
    got = erf_numpy(x)
    assert np.max(np.abs(got - ref) / np.maximum(np.abs(ref), 1e-300)) < 1e-14
    assert erf_numpy(x.astype(np.float32)).dtype == np.float32
    out = erf_numpy(np.array([np.nan, np.inf, -np.inf]))
    assert np.isnan(out[0]) and out[1] == 1 and out[2] == -1


def test_erf_fast_float32_is_within_1e7_of_math_erf():
    # dense where erf bends, geometric toward 0 (relative accuracy) and past the clamp at 4
    x = np.concatenate([np.linspace(-6, 6, 240001), np.geomspace(1e-38, 6, 2000),
                        -np.geomspace(1e-38, 6, 2000)]).astype(np.float32)
    x64 = x.astype(np.float64)
    ref = np.array([math.erf(v) for v in x64])
    got = erf_fast(x)
    assert got.dtype == np.float32
    err = np.abs(got.astype(np.float64) - ref)
    assert err.max() <= 1e-7, (err.max(), x[err.argmax()])
    assert np.max(err / np.maximum(np.abs(ref), 1e-38)) <= 1e-7
    np.testing.assert_array_equal(erf_fast(-x), -got)                     # odd
    out = erf_fast(np.array([np.nan, np.inf, -np.inf, 0.0, -0.0], np.float32))
    assert np.isnan(out[0]) and list(out[1:]) == [1, -1, 0, 0] and np.signbit(out[4])
    h = erf_numpy(np.float16([0.5, -2.0]))
    assert h.dtype == np.float16 and np.allclose(h, [math.erf(0.5), math.erf(-2.0)], atol=1e-3)


def test_gelu_float32_matches_the_float64_kernel():
    gelu = get_op_def("gelu")
    x64 = np.linspace(-9, 9, 20001)
    dout = np.cos(x64)
    x32, d32 = x64.astype(np.float32), dout.astype(np.float32)
    out32, out64 = gelu.forward(x32)["Out"], gelu.forward(x64)["Out"]
    assert out32.dtype == np.float32
    np.testing.assert_allclose(out32, out64, rtol=0, atol=1e-6)
    g32, g64 = gelu.backward(x32, d32)["X"], gelu.backward(x64, dout)["X"]
    assert g32.dtype == np.float32
    np.testing.assert_allclose(g32, g64, rtol=0, atol=1e-6)


def test_layers_build_the_ops_with_fluid_names_and_attrs():
    x = fluid.data("x", [None, 4], "float32")
    L = fluid.layers
    outs = [L.relu(x), L.sigmoid(x), L.tanh(x), L.exp(x), L.log(x), L.sqrt(x), L.rsqrt(x),
            L.square(x), L.abs(x), L.sign(x), L.reciprocal(x), L.softplus(x), L.softsign(x),
            L.logsigmoid(x), L.sin(x), L.cos(x), L.floor(x), L.ceil(x), L.round(x),
            L.leaky_relu(x, alpha=0.1), L.elu(x, alpha=0.5), L.gelu(x, approximate=True),
            L.pow(x, factor=2.0), L.relu6(x, threshold=3.0), L.hard_sigmoid(x, 0.3, 0.4),
            L.swish(x, beta=2.0), L.softmax(x, axis=1)]
    assert outs[0].name == "relu_0.tmp_0" and outs[-1].name == "softmax_0.tmp_0"
    assert all(o.shape == (-1, 4) and o.dtype == fluid.core.VarDesc.VarType.FP32 for o in outs)
    ops = fluid.default_main_program().global_block().ops
    attrs = {op.type: op.attrs for op in ops}
    assert attrs["leaky_relu"]["alpha"] == 0.1 and attrs["elu"]["alpha"] == 0.5
    assert attrs["gelu"]["approximate"] is True and attrs["pow"]["factor"] == 2.0
    assert attrs["relu6"]["threshold"] == 3.0 and attrs["swish"]["beta"] == 2.0
    assert (attrs["hard_sigmoid"]["slope"], attrs["hard_sigmoid"]["offset"]) == (0.3, 0.4)
    assert attrs["softmax"]["axis"] == 1
    named = L.tanh(x, name="act")
    assert named.name == "act.tmp_0"
    xv = np.linspace(0.1, 2, 8).reshape(2, 4).astype("float32")
    res = fluid.Executor(fluid.CPUPlace()).run(feed={"x": xv}, fetch_list=[outs[1], outs[-1]])
    np.testing.assert_allclose(res[0], _sigmoid(xv), rtol=1e-6)
    e = np.exp(xv - xv.max(1, keepdims=True))
    np.testing.assert_allclose(res[1], e / e.sum(1, keepdims=True), rtol=1e-6)


def test_layer_errors():
    x = fluid.data("x", [2, 3], "float32")
    i = fluid.data("i", [2, 3], "int64")
    with pytest.raises(TypeError, match="The data type of 'x' in sigmoid must be one of"):
        fluid.layers.sigmoid(i)
    with pytest.raises(TypeError, match="The type of 'x' in tanh must be Variable"):
        fluid.layers.tanh(np.ones((2, 3)))
    with pytest.raises(TypeError, match="leaky_relu: 'alpha' must be a float"):
        fluid.layers.leaky_relu(x, alpha="0.1")
    with pytest.raises(ValueError, match="must hold one element.*elementwise_pow"):
        fluid.layers.pow(x, factor=x)       # a 1-element Variable factor is fine (FactorTensor)
    n_ops = len(fluid.default_main_program().global_block().ops)
    with pytest.raises(ValueError, match=r"op 'softmax' shape inference failed: softmax: axis 2 "
                                         r"is out of range for input of rank 2 \(valid: -2\.\.1\)"):
        fluid.layers.softmax(x, axis=2)
    # fluid 1.8's relu layer takes floats in a static program (Paddle's TestReluOpError);
    # the relu op itself also runs on integers, and so does dygraph's layer
    with pytest.raises(TypeError, match="The data type of 'x' in relu must be one of"):
        fluid.layers.relu(i)
    assert len(fluid.default_main_program().global_block().ops) == n_ops
    block = fluid.default_main_program().global_block()
    out = block.create_var(name="relu_int_out")
    block.append_op("relu", {"X": i}, {"Out": out})
    assert out.dtype == fluid.core.VarDesc.VarType.INT64
    with fluid.dygraph.guard():
        got = fluid.layers.relu(fluid.dygraph.to_variable(np.array([-2, 3], "int64")))
        assert got.numpy().tolist() == [0, 3]


def test_op_rejects_integer_input_naming_the_op():
    block = fluid.default_main_program().global_block()
    i = fluid.data("i", [2, 3], "int64")
    out = block.create_var(name="o")
    with pytest.raises(ValueError, match=r"op 'exp' shape inference failed: X must be a float "
                                         r"tensor, but it is int64"):
        block.append_op("exp", {"X": i}, {"Out": out})


# -- fluid's functors at their guards and kinks (issue 29): Paddle 2.6 CPU values ----------------
def test_softmax_value_clip_and_gradient():
    """No probability below e^-64 of the row's largest (fluid's ValueClip), also for -inf
    logits; the gradient (dOut - sum(dOut * Out)) * Out stays finite."""
    x = np.array([[0.0, 100.0, -50.0, 3.0], [-np.inf, 0.0, 1.0, -1e30]], np.float32)
    out = get_op_def("softmax").forward(x)["Out"]
    assert out.dtype == np.float32
    np.testing.assert_allclose(out[0], [1.6038109e-28, 1.0, 1.6038109e-28, 1.6038109e-28],
                               rtol=1e-6)                                     # Paddle 2.6
    assert out[1, 0] == out[1, 3] > 0
    d = get_op_def("softmax").backward(out, np.ones_like(out))["X"]
    assert np.isfinite(d).all()
    t = OpTest()
    t.op_type, t.attrs = "softmax", {"axis": 0}
    x = OpTest.rand(3, 4, seed=2) * 3
    x[0, 1] = 80.0          # column 1: the other entries sit at the clip
    t.inputs = {"X": x}
    z = np.maximum(x - x.max(0, keepdims=True), -64)
    t.outputs = {"Out": np.exp(z) / np.exp(z).sum(0, keepdims=True)}
    t.check_output(atol=0, rtol=1e-12)


def test_leaky_relu_is_fluids_max_and_kink():
    """fluid 1.8: Out = max(X, alpha X); dX = dOut where X >= 0 (the kink at 0 passes dOut,
    as Paddle 2.6), alpha * dOut below."""
    d = get_op_def("leaky_relu")
    x = np.array([-2.0, -0.0, 0.0, 1.0, 3.0])
    np.testing.assert_array_equal(d.backward(x, np.ones(5), alpha=0.1)["X"],
                                  [0.1, 1.0, 1.0, 1.0, 1.0])
    np.testing.assert_array_equal(d.forward(x, alpha=0.1)["Out"], [-0.2, 0.0, 0.0, 1.0, 3.0])
    np.testing.assert_array_equal(d.forward(x, alpha=2.0)["Out"], [-2.0, 0.0, 0.0, 2.0, 6.0])
    t = OpTest()
    t.op_type, t.attrs = "leaky_relu", {"alpha": 0.3}
    t.inputs = {"X": OpTest.rand(3, 4, avoid=0.0)}
    t.outputs = {"Out": np.maximum(t.inputs["X"], 0.3 * t.inputs["X"])}
    t.check_output()
    t.check_grad(["X"], "Out")


def test_sign_gradient_is_fluids_scale_by_zero():
    """fluid's SignGradMaker: X@GRAD = scale(Out@GRAD, scale=0.0); a network through sign
    trains the other branch and gives sign's input a zero gradient (not a missing one)."""
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [2, 3], "float32")
        x.stop_gradient = False
        y = fluid.layers.reduce_sum(fluid.layers.sign(x) * x)
        gx, = fluid.gradients([y], [x])
    grad_ops = [op.type for op in main.global_block().ops if op.type == "scale"]
    assert grad_ops and any(op.attr("scale") == 0.0 for op in main.global_block().ops
                            if op.type == "scale")
    xv = np.array([[-2.0, 0.5, 0.0], [3.0, -0.1, 1.0]], np.float32)
    g, = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": xv}, fetch_list=[gx])
    np.testing.assert_array_equal(g, np.sign(xv))         # only the x factor's gradient
    with fluid.dygraph.guard():
        v = fluid.dygraph.to_variable(xv)
        v.stop_gradient = False
        fluid.layers.reduce_sum(fluid.layers.sign(v)).backward()
        np.testing.assert_array_equal(v.gradient(), np.zeros_like(xv))
