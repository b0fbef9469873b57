"""OpTest cases for fluidlite/ops/math_extra.py (cumsum, logsumexp, log_softmax, reduce_prod,
reduce_all/any, isfinite/isinf/isnan, size, kron, dot, bmm, cross, trace, addmm, allclose, dist)
against NumPy, numeric float64 gradients, bad arguments, and the fluid 1.8 math layers."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core.dtypes import VarType
from fluidlite.testing import OpTest

L = fluid.layers


def _op(op_type, inputs, outputs, attrs=None, grad=None, out="Out", **kw):
    t = OpTest()
    t.op_type, t.inputs, t.outputs, t.attrs = op_type, inputs, outputs, attrs or {}
    t.check_infer()
    t.check_output(**kw)
    if grad:
        t.check_grad(grad, out)
    return t


def _np_cumsum(x, axis, exclusive, reverse):
    if reverse:
        x = np.flip(x, axis)
    out = np.cumsum(x, axis)
    if exclusive:
        out = out - x
    return np.flip(out, axis) if reverse else out


@pytest.mark.parametrize("axis,exclusive,reverse", [(-1, False, False), (0, True, False),
                                                    (1, False, True), (-2, True, True)])
def test_cumsum_op(axis, exclusive, reverse):
    x = OpTest.rand(3, 4, 2, seed=1)
    _op("cumsum", {"X": x}, {"Out": _np_cumsum(x, axis, exclusive, reverse)},
        {"axis": axis, "exclusive": exclusive, "reverse": reverse}, grad=["X"])


def test_cumsum_flatten_op():
    x = OpTest.rand(3, 4, seed=2)
    _op("cumsum", {"X": x}, {"Out": np.cumsum(x)}, {"flatten": True}, grad=["X"])


@pytest.mark.parametrize("axis,keepdim,reduce_all", [([1], False, False), ([0, 2], True, False),
                                                     ([0], False, True)])
def test_logsumexp_op(axis, keepdim, reduce_all):
    x = OpTest.rand(2, 3, 4, low=-3, high=3, seed=3)
    ax = None if reduce_all else tuple(axis)
    ref = np.log(np.sum(np.exp(x), axis=ax, keepdims=keepdim))
    _op("logsumexp", {"X": x}, {"Out": np.reshape(ref, (1,)) if ref.ndim == 0 else ref},
        {"axis": axis, "keepdim": keepdim, "reduce_all": reduce_all}, grad=["X"])


def test_logsumexp_does_not_overflow():
    from fluidlite.core.registry import get_op_def
    x = np.array([[1000.0, 1000.0], [-1000.0, -1000.0], [-np.inf, -np.inf]], dtype="float32")
    out = get_op_def("logsumexp").forward(x, axis=[1])["Out"]
    np.testing.assert_allclose(out[:2], [1000 + np.log(2), -1000 + np.log(2)], rtol=1e-6)
    assert out[2] == -np.inf and out.dtype == np.float32


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_log_softmax_op(axis):
    x = OpTest.rand(3, 4, 2, low=-3, high=3, seed=4)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    _op("log_softmax", {"X": x}, {"Out": np.log(e / e.sum(axis=axis, keepdims=True))},
        {"axis": axis}, grad=["X"])


@pytest.mark.parametrize("dim,keep,rall", [([1], False, False), ([0, 2], True, False),
                                           ([0], False, True)])
def test_reduce_prod_op(dim, keep, rall):
    x = OpTest.rand(2, 3, 4, low=0.5, high=1.5, seed=5)
    ax = None if rall else tuple(dim)
    ref = np.prod(x, axis=ax, keepdims=keep)
    _op("reduce_prod", {"X": x}, {"Out": ref.reshape(1) if ref.ndim == 0 else ref},
        {"dim": dim, "keep_dim": keep, "reduce_all": rall}, grad=["X"])


def test_reduce_prod_gradient_with_zeros_is_exact():
    from fluidlite.core.registry import get_op_def
    x = np.array([[0.0, 2.0, 3.0], [0.0, 0.0, 5.0], [1.0, 2.0, 4.0]])
    g = get_op_def("reduce_prod").backward(x, np.ones(3), dim=[1])["X"]
    np.testing.assert_array_equal(g, [[6, 0, 0], [0, 0, 0], [8, 4, 2]])


def test_reduce_all_any_ops():
    x = np.array([[True, False, True], [True, True, True]])
    _op("reduce_all", {"X": x}, {"Out": np.array([False, True])}, {"dim": [1]})
    _op("reduce_any", {"X": x}, {"Out": np.array([True, True, True])}, {"dim": [0]})
    _op("reduce_all", {"X": x}, {"Out": np.array([False])}, {"reduce_all": True})
    _op("reduce_any", {"X": x}, {"Out": np.array([[True]])}, {"dim": [0, 1], "keep_dim": True})


@pytest.mark.parametrize("vals,finite,inf,nan", [
    ([1.0, 2.0], True, False, False), ([1.0, np.inf], False, True, False),
    ([np.nan, 2.0], False, False, True), ([-np.inf, np.nan], False, True, True)])
def test_isfinite_isinf_isnan_ops(vals, finite, inf, nan):
    x = np.array(vals, dtype="float32").reshape(1, 2)
    _op("isfinite", {"X": x}, {"Out": np.array([finite])})
    _op("isinf", {"X": x}, {"Out": np.array([inf])})
    _op("isnan", {"X": x}, {"Out": np.array([nan])})


def test_size_op():
    _op("size", {"Input": np.zeros((3, 4, 5))}, {"Out": np.array([60], dtype="int64")})


@pytest.mark.parametrize("xs,ys", [((2, 3), (3, 2)), ((2,), (2, 3)), ((2, 1, 2), (3, 2))])
def test_kron_op(xs, ys):
    x, y = OpTest.rand(*xs, seed=6), OpTest.rand(*ys, seed=7)
    _op("kron", {"X": x, "Y": y}, {"Out": np.kron(x, y)}, grad=["X", "Y"])


@pytest.mark.parametrize("shape", [(5,), (3, 4)])
def test_dot_op(shape):
    x, y = OpTest.rand(*shape, seed=8), OpTest.rand(*shape, seed=9)
    _op("dot", {"X": x, "Y": y}, {"Out": (x * y).sum(-1, keepdims=True)}, grad=["X", "Y"])


def test_bmm_op():
    x, y = OpTest.rand(2, 3, 4, seed=10), OpTest.rand(2, 4, 5, seed=11)
    _op("bmm", {"X": x, "Y": y}, {"Out": x @ y}, grad=["X", "Y"])


@pytest.mark.parametrize("shape,dim,axis", [((4, 3), 9, 1), ((3, 2), 0, 0), ((2, 3, 3), -1, 2)])
def test_cross_op(shape, dim, axis):
    x, y = OpTest.rand(*shape, seed=12), OpTest.rand(*shape, seed=13)
    _op("cross", {"X": x, "Y": y}, {"Out": np.cross(x, y, axis=axis)}, {"dim": dim},
        grad=["X", "Y"])


@pytest.mark.parametrize("shape,offset,d1,d2", [((3, 4), 0, 0, 1), ((3, 4), 1, 0, 1),
                                                ((2, 3, 4), -1, 2, 1), ((4, 3), -2, 0, 1)])
def test_trace_op(shape, offset, d1, d2):
    x = OpTest.rand(*shape, seed=14)
    ref = np.trace(x, offset=offset, axis1=d1, axis2=d2)
    _op("trace", {"Input": x}, {"Out": np.reshape(ref, (1,)) if np.ndim(ref) == 0 else ref},
        {"offset": offset, "dim1": d1, "dim2": d2}, grad=["Input"])


@pytest.mark.parametrize("ishape", [(3, 5), (5,), (1, 5)])
def test_addmm_op(ishape):
    i, x, y = OpTest.rand(*ishape, seed=15), OpTest.rand(3, 4, seed=16), OpTest.rand(4, 5, seed=17)
    _op("addmm", {"Input": i, "X": x, "Y": y}, {"Out": 0.5 * i + 2.0 * (x @ y)},
        {"Alpha": 2.0, "Beta": 0.5}, grad=["Input", "X", "Y"])


def test_allclose_op():
    a = np.array([1.0, 2.0, np.nan])
    _op("allclose", {"Input": a, "Other": a + 1e-9}, {"Out": np.array([False])})
    _op("allclose", {"Input": a, "Other": a + 1e-9}, {"Out": np.array([True])},
        {"equal_nan": True})
    _op("allclose", {"Input": a[:2], "Other": a[:2] * 1.01}, {"Out": np.array([True])},
        {"rtol": 0.02, "atol": 0.0})


@pytest.mark.parametrize("p", [2.0, 1.0, 3.0, float("inf"), float("-inf"), 0.0])
def test_dist_op(p):
    x, y = OpTest.rand(2, 3, seed=18), OpTest.rand(3, seed=19)
    z = np.abs(x - y).ravel()
    ref = {0.0: np.count_nonzero(z), float("inf"): z.max(), float("-inf"): z.min()}.get(
        p, (z ** p).sum() ** (1 / p) if p else 0)
    t = _op("dist", {"X": x, "Y": y}, {"Out": np.array([ref])}, {"p": p})
    if p != 0.0:
        t.check_grad(["X", "Y"], "Out")


# -- bad arguments -----------------------------------------------------------------------------
def _build(fn):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        return fn()


@pytest.mark.parametrize("fn,err,match", [
    (lambda: L.bmm(fluid.data("a", [2, 3, 4]), fluid.data("b", [2, 5, 4])), ValueError,
     "must agree on B and K"),
    (lambda: L.dot(fluid.data("a", [2, 3]), fluid.data("b", [3])), ValueError,
     "same shape"),
    (lambda: L.cross(fluid.data("a", [2, 4]), fluid.data("b", [2, 4])), ValueError,
     "no axis of size 3"),
    (lambda: L.cross(fluid.data("a", [3, 4]), fluid.data("b", [3, 4]), dim=1), ValueError,
     "must have size 3"),
    (lambda: L.trace(fluid.data("a", [3])), ValueError, "at least 2 dims"),
    (lambda: L.trace(fluid.data("a", [3, 3]), dim1=1, dim2=-1), ValueError,
     "must be different"),
    (lambda: L.addmm(fluid.data("i", [4, 4]), fluid.data("a", [2, 3]), fluid.data("b", [3, 5])),
     ValueError, "must broadcast to"),
    (lambda: L.reduce_all(fluid.data("a", [2, 3])), TypeError,
     "The data type of 'input' in reduce_all"),
    (lambda: L.reduce_prod(fluid.data("a", [2, 3]), dim=[0, 5]), ValueError, "out of range"),
    (lambda: L.cumsum(fluid.data("a", [2, 3]), axis=2), ValueError, "axis 2 is out of range"),
    (lambda: L.cumsum(fluid.data("a", [2, 3]), axis=1.5), TypeError, "axis must be an int"),
    (lambda: L.logsumexp(fluid.data("a", [2, 3], dtype="int64")), TypeError,
     "The data type of 'x' in logsumexp"),
    (lambda: L.log_softmax(fluid.data("a", [2, 3]), axis=3), ValueError, "out of range"),
    (lambda: L.t(fluid.data("a", [2, 3, 4])), ValueError, r"N <= 2"),
    (lambda: L.clamp(fluid.data("a", [2, 3])), ValueError, "at least one of min and max"),
    (lambda: L.clamp(fluid.data("a", [2, 3]), min=2.0, max=1.0), ValueError,
     "must not be greater"),
    (lambda: L.allclose(fluid.data("a", [2, 3]), np.ones((2, 3))), TypeError,
     "The type of 'other' in allclose must be Variable"),
    (lambda: L.sum([]), ValueError, "non-empty list"),
    (lambda: L.dist(fluid.data("a", [2, 3]), fluid.data("b", [4])), ValueError,
     "cannot be broadcast"),
    (lambda: L.addcmul(fluid.data("a", [2]), fluid.data("b", [2]), fluid.data("c", [2]),
                       value="x"), TypeError, "'value' in addcmul must be float"),
])
def test_bad_arguments(fn, err, match):
    with pytest.raises(err, match=match):
        _build(fn)


# -- layers, run end to end ------------------------------------------------------------------------
def test_math_layers_run_static_and_match_numpy():
    rng = np.random.default_rng(0)
    a_np = rng.uniform(0.5, 1.5, (3, 4)).astype("float32")
    b_np = rng.uniform(-1, 1, (3, 4)).astype("float32")
    v_np = rng.uniform(-1, 1, (4, 3)).astype("float32")
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        a, b = fluid.data("a", [3, 4]), fluid.data("b", [3, 4])
        v = fluid.data("v", [4, 3])
        outs = [L.cumsum(a, axis=0, exclusive=True), L.logsumexp(a, dim=1),
                L.log_softmax(b), L.reduce_prod(a, dim=0, keep_dim=True),
                L.reduce_all(L.greater_than(a, b)), L.reduce_any(L.greater_than(b, a), dim=1),
                L.isfinite(a), L.has_inf(a), L.has_nan(a), L.sum([a, b]), L.sum(a),
                L.rank(a), L.size(a), L.clamp(b, min=-0.5), L.kron(a, b), L.dot(a, b),
                L.bmm(L.unsqueeze(a, [0]), L.unsqueeze(v, [0])), L.trace(a, offset=1),
                L.addmm(L.reduce_sum(v, dim=0), a, v), L.addcmul(a, b, b, value=0.5), L.t(a),
                L.allclose(a, a), L.dist(a, b, p=1), L.elementwise_equal(a, a)]
    got = fluid.Executor(fluid.CPUPlace()).run(
        main, feed={"a": a_np, "b": b_np, "v": v_np}, fetch_list=outs, scope=fluid.Scope())
    e = np.exp(b_np - b_np.max(1, keepdims=True))
    want = [np.cumsum(a_np, 0) - a_np, np.log(np.exp(a_np).sum(1)),
            np.log(e / e.sum(1, keepdims=True)), a_np.prod(0, keepdims=True),
            [bool((a_np > b_np).all())], (b_np > a_np).any(1), [True], [False], [False],
            a_np + b_np, a_np, [2], [12], np.maximum(b_np, -0.5), np.kron(a_np, b_np),
            (a_np * b_np).sum(1, keepdims=True), (a_np @ v_np)[None],
            [np.trace(a_np, offset=1)], v_np.sum(0) + a_np @ v_np, a_np + 0.5 * b_np * b_np,
            a_np.T, [True], [np.abs(a_np - b_np).sum()], np.ones((3, 4), bool)]
    for i, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_allclose(np.asarray(g, dtype="float64"), np.asarray(w, "float64"),
                                   rtol=1e-5, atol=1e-5, err_msg=f"output {i}")
    types = {op.type for op in main.global_block().ops}
    assert {"cumsum", "logsumexp", "log_softmax", "reduce_prod", "reduce_all", "reduce_any",
            "isfinite", "isinf", "isnan", "sum", "size", "clip", "kron", "dot", "bmm", "trace",
            "addmm", "transpose2", "allclose", "dist", "equal"} <= types
    assert outs[11].dtype == VarType.INT32 and outs[12].dtype == VarType.INT64
    assert outs[6].dtype == VarType.BOOL and outs[6].shape == (1,)


def test_math_layers_in_dygraph():
    x_np = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype="float32")
    with fluid.dygraph.guard():
        x = fluid.dygraph.to_variable(x_np)
        np.testing.assert_allclose(L.cumsum(x, axis=1, reverse=True).numpy(),
                                   [[6, 5, 3], [15, 11, 6]])
        np.testing.assert_allclose(L.logsumexp(x, dim=[0, 1]).numpy(),
                                   [np.log(np.exp(x_np).sum())], rtol=1e-6)
        np.testing.assert_allclose(L.reduce_prod(x).numpy(), [720.0])
        assert L.has_nan(x).numpy().tolist() == [False]
        np.testing.assert_allclose(L.cross(x, x + 1.0, dim=1).numpy(),
                                   np.cross(x_np, x_np + 1.0, axis=1))
        assert L.size(x).numpy().tolist() == [6]
        v = fluid.dygraph.to_variable(np.arange(3, dtype="float32"))
        assert L.t(v) is v                       # a vector is its own transpose, as fluid


# -- float32 end to end: forward, backward and gradient dtypes ----------------------------------
F32_LAYERS = [
    ("acos", lambda x: L.acos(L.scale(x, 0.5))), ("asin", lambda x: L.asin(L.scale(x, 0.5))),
    ("atan", L.atan), ("tanh_shrink", L.tanh_shrink), ("erf", L.erf),
    ("log1p", lambda x: L.log1p(L.abs(x))), ("hard_shrink", L.hard_shrink),
    ("softshrink", L.softshrink), ("thresholded_relu", lambda x: L.thresholded_relu(x, 0.1)),
    ("brelu", lambda x: L.brelu(x, -0.5, 0.5)), ("soft_relu", L.soft_relu), ("selu", L.selu),
    ("stanh", L.stanh), ("hard_swish", L.hard_swish),
    ("maxout", lambda x: L.maxout(L.reshape(x, [2, 4, 1, 3]), groups=2)),
    ("prelu", lambda x: L.prelu(x, "all")), ("cumsum", lambda x: L.cumsum(x, axis=0)),
    ("logsumexp", lambda x: L.logsumexp(x, dim=1)), ("log_softmax", L.log_softmax),
    ("reduce_prod", lambda x: L.reduce_prod(x, dim=1)), ("kron", lambda x: L.kron(x, x)),
    ("dot", lambda x: L.dot(x, x)), ("bmm", lambda x: L.bmm(L.unsqueeze(x, [0]),
                                                            L.unsqueeze(L.t(x), [0]))),
    ("cross", lambda x: L.cross(L.slice(x, [1], [0], [3]), L.slice(x, [1], [3], [6]))),
    ("trace", lambda x: L.trace(x)),
    ("addmm", lambda x: L.addmm(x, x, L.matmul(L.t(x), x), alpha=0.5, beta=2.0)),
    ("addcmul", lambda x: L.addcmul(x, x, x, 0.5)), ("dist", lambda x: L.dist(x, L.exp(x))),
    ("clamp", lambda x: L.clamp(x, -0.5, 0.5)),
]


@pytest.mark.parametrize("name,build", F32_LAYERS, ids=[n for n, _ in F32_LAYERS])
def test_float32_layer_forward_and_backward_stay_float32(name, build):
    x_np = np.random.default_rng(3).uniform(-1, 1, (2, 12)).astype("float32")
    x_np = np.where(np.abs(x_np) < 0.05, 0.3, x_np).astype("float32")
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [2, 12] if name not in ("addmm", "trace", "bmm", "cross", "dot")
                       else [2, 6])
        x.stop_gradient = False
        out = build(x)
        loss = L.mean(out)
        g = fluid.backward.gradients([loss], [x])[0]
    feed = {"x": x_np if x.shape[1] == 12 else x_np[:, :6].copy()}
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(fluid.Scope()):
        exe.run(startup)
        o, gx = exe.run(main, feed=feed, fetch_list=[out, g])
    assert o.dtype == np.float32 and gx.dtype == np.float32, (o.dtype, gx.dtype)
    assert gx.shape == feed["x"].shape and np.isfinite(gx).all()


def test_log_softmax_value_clip():
    """fluid's LogSoftmaxFunctor clips the shifted logits at -64 (Paddle 2.6: -64 exactly)."""
    from fluidlite.core.registry import get_op_def
    x = np.array([[0.0, 100.0, -50.0, 3.0], [200.0, -300.0, 0.5, 1.0]], np.float32)
    out = get_op_def("log_softmax").forward(x)["Out"]
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, [[-64.0, 0.0, -64.0, -64.0], [0.0, -64.0, -64.0, -64.0]])
    t = OpTest()
    t.op_type, t.attrs = "log_softmax", {"axis": 1}
    x = OpTest.rand(2, 5, seed=1) * 3
    x[0, 0] = 70.0
    t.inputs = {"X": x}
    z = np.maximum(x - x.max(1, keepdims=True), -64)
    t.outputs = {"Out": z - np.log(np.exp(z).sum(1, keepdims=True))}
    t.check_output(atol=0, rtol=1e-12)
    # (the gradient is fluid's dOut - exp(Out) sum(dOut), blind to the clip, as fluid's)
    d = get_op_def("log_softmax").backward(t.outputs["Out"], np.ones((2, 5)), axis=1)["X"]
    np.testing.assert_allclose(d, 1 - np.exp(t.outputs["Out"]) * 5)
