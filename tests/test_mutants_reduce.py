"""Tests written from mutation testing (issue 28, docs/mutation.md) for ``fluidlite/ops/reduce.py``:
Paddle 2.6's attribute defaults (dim [0], keep_dim False, reduce_all False) in every entry point,
dtype preservation, axis errors naming the op, and ``mean`` on one and on no elements.
References are NumPy float64 computed here."""
import numpy as np
import pytest

from fluidlite.core.registry import VarSpec, get_op_def

REDUCES = {"reduce_sum": np.sum, "reduce_mean": np.mean, "reduce_max": np.max,
           "reduce_min": np.min}


def x345(dtype="float32", seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, (3, 4, 5)).astype(dtype)


@pytest.mark.parametrize("op", sorted(REDUCES))
def test_reduce_defaults_are_paddles(op):
    """No attribute: reduce axis 0, drop it (Paddle's op defaults)."""
    opdef, x = get_op_def(op), x345()
    want = REDUCES[op](x.astype(np.float64), axis=0)
    np.testing.assert_allclose(opdef.forward(x)["Out"], want, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(opdef.lower([VarSpec(x.shape, "float32")], {})(x), want,
                               rtol=1e-6, atol=1e-7)
    assert opdef.infer(VarSpec(x.shape, "float32"))["Out"].shape == (4, 5)


@pytest.mark.parametrize("op", ["reduce_sum", "reduce_mean"])
def test_linear_reduce_grads_with_default_attrs(op):
    opdef, x = get_op_def(op), x345()
    d = np.random.default_rng(1).uniform(-1, 1, (4, 5)).astype("float32")
    scale = 1.0 if op == "reduce_sum" else 1.0 / 3
    got = opdef.backward(x, d)["X"]
    np.testing.assert_allclose(got, np.broadcast_to(d * scale, x.shape), rtol=1e-6)
    assert got.dtype == np.float32


@pytest.mark.parametrize("op", ["reduce_max", "reduce_min"])
def test_extremum_grad_with_default_attrs(op):
    opdef, x = get_op_def(op), x345()
    out = REDUCES[op](x, axis=0)
    d = np.random.default_rng(1).uniform(-1, 1, (4, 5)).astype("float32")
    got = opdef.backward(x, out, d)["X"]
    want = np.where(x == out[None], d[None], 0.0)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert got.dtype == np.float32


@pytest.mark.parametrize("op", ["reduce_sum", "reduce_max", "reduce_min"])
def test_integer_reductions_keep_the_dtype(op):
    x = (x345(seed=2) * 100).astype("int32")
    for attrs in ({}, {"dim": [1, 2]}, {"reduce_all": True}, {"dim": [0], "keep_dim": True}):
        out = get_op_def(op).forward(x, **attrs)["Out"]
        assert out.dtype == np.int32, attrs
        axes = None if attrs.get("reduce_all") else tuple(attrs.get("dim", [0]))
        want = REDUCES[op](x.astype(np.int64), axis=axes, keepdims=attrs.get("keep_dim", False))
        np.testing.assert_array_equal(out, np.reshape(want, out.shape))


def test_reduce_all_and_full_dim_give_shape_1():
    x = x345()
    for attrs in ({"reduce_all": True}, {"dim": [0, 1, 2]}, {"dim": []}):
        out = get_op_def("reduce_sum").forward(x, **attrs)["Out"]
        assert out.shape == (1,), attrs
        np.testing.assert_allclose(out, [x.astype(np.float64).sum()], rtol=1e-5)
        assert get_op_def("reduce_sum").infer(VarSpec(x.shape, "float32"), **attrs)["Out"] \
            .shape == (1,)
    kept = get_op_def("reduce_sum").forward(x, reduce_all=True, keep_dim=True)["Out"]
    assert kept.shape == (1, 1, 1)


@pytest.mark.parametrize("op", sorted(REDUCES))
def test_reduce_axis_error_names_the_op(op):
    with pytest.raises(ValueError, match=op):
        get_op_def(op).forward(x345(), dim=[3])
    with pytest.raises(ValueError, match=op):
        get_op_def(op).infer(VarSpec((3, 4, 5), "float32"), dim=[-4])


def test_reduce_mean_float16_accumulates_in_float16():
    """fluid's reduce_mean kernel for float16 stays float16 (dtype preserved)."""
    x = x345("float16")
    out = get_op_def("reduce_mean").forward(x, dim=[1])["Out"]
    assert out.dtype == np.float16
    np.testing.assert_allclose(out.astype(np.float64), x.astype(np.float64).mean(1), atol=2e-3)
    g = get_op_def("reduce_mean").backward(x, out, dim=[1])["X"]
    assert g.dtype == np.float16 and g.shape == x.shape


def test_mean_of_one_and_of_no_element():
    mean = get_op_def("mean")
    one = np.array([[2.5]], "float32")
    np.testing.assert_array_equal(mean.forward(one)["Out"], [2.5])
    np.testing.assert_array_equal(mean.backward(one, np.array([3.0], "float32"))["X"], [[3.0]])
    empty = np.zeros((0, 3), "float64")
    out = mean.forward(empty)["Out"]
    assert out.shape == (1,) and out.dtype == np.float64 and np.isnan(out[0])
    assert mean.backward(empty, np.array([1.0]))["X"].shape == (0, 3)
    x = x345("float16")
    out = mean.forward(x)["Out"]
    assert out.dtype == np.float16 and out.shape == (1,)
    np.testing.assert_allclose(float(out[0]), x.astype(np.float64).mean(), atol=1e-3)


# -- second order: the gradient of reduce_*_grad with respect to its upstream gradient --------
def _double(op, attrs, xv, cv, wv):
    """h = d/dc sum(w * d/dx sum(c * reduce(x))): differentiates the reduce op's grad op
    through its upstream gradient c (the op's double_grad)."""
    import fluidlite as fluid
    L = fluid.layers
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", list(xv.shape), "float64")
        c = fluid.data("c", list(cv.shape), "float64")
        w = fluid.data("w", list(wv.shape), "float64")
        x.stop_gradient = c.stop_gradient = False
        y = getattr(L, op)(x, **attrs)
        s = L.reduce_sum(L.elementwise_mul(y, c))
        g, = fluid.gradients([s], [x])
        h, = fluid.gradients([L.reduce_sum(L.elementwise_mul(g, w))], [c])
    out, = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": xv, "c": cv, "w": wv},
                                                fetch_list=[h])
    return out


@pytest.mark.parametrize("op", ["reduce_sum", "reduce_mean", "reduce_max", "reduce_min"])
@pytest.mark.parametrize("keep_dim", [False, True])
def test_reduce_double_grads_against_closed_forms(op, keep_dim):
    rng = np.random.default_rng(11)
    xv = rng.permutation(12).reshape(3, 4).astype("float64")     # distinct: one arg-extremum
    wv = rng.normal(size=(3, 4))
    cv = rng.normal(size=(3, 1) if keep_dim else (3,))
    got = _double(op, {"dim": [1], "keep_dim": keep_dim}, xv, cv, wv)
    if op == "reduce_sum":
        want = wv.sum(axis=1)                       # dX = c broadcast: d/dc sum(w * c) per row
    elif op == "reduce_mean":
        want = wv.sum(axis=1) / 4
    else:
        pick = (np.argmax if op == "reduce_max" else np.argmin)(xv, axis=1)
        want = wv[np.arange(3), pick]               # dX = c at the extremum, 0 elsewhere
    np.testing.assert_allclose(got.reshape(-1), want, rtol=1e-10)
    assert got.shape == cv.shape


@pytest.mark.parametrize("op", ["reduce_sum", "reduce_mean", "reduce_max"])
def test_reduce_all_double_grad(op):
    rng = np.random.default_rng(12)
    xv = rng.permutation(6).reshape(2, 3).astype("float64")
    wv = rng.normal(size=(2, 3))
    got = _double(op, {"dim": None}, xv, np.array([0.7]), wv)
    want = {"reduce_sum": wv.sum(), "reduce_mean": wv.mean(),
            "reduce_max": wv.reshape(-1)[np.argmax(xv)]}[op]
    np.testing.assert_allclose(got.reshape(-1), [want], rtol=1e-10)


def test_mean_double_grad_against_the_closed_form():
    """h = d/dc sum(w * d/dx (c * mean(x))) = sum(w) / numel(x): the ``mean`` op's double_grad
    (mean_grad is linear in its upstream gradient)."""
    import fluidlite as fluid
    L = fluid.layers
    rng = np.random.default_rng(13)
    xv, wv, cv = rng.normal(size=(3, 4)), rng.normal(size=(3, 4)), np.array([0.3])
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [3, 4], "float64")
        c = fluid.data("c", [1], "float64")
        w = fluid.data("w", [3, 4], "float64")
        x.stop_gradient = c.stop_gradient = False
        s = L.reduce_sum(L.elementwise_mul(L.mean(x), c))
        g, = fluid.gradients([s], [x])
        h, = fluid.gradients([L.reduce_sum(L.elementwise_mul(g, w))], [c])
    gv, hv = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": xv, "c": cv, "w": wv},
                                                  fetch_list=[g, h])
    np.testing.assert_allclose(gv, np.full((3, 4), 0.3 / 12), rtol=1e-12)
    assert hv.shape == (1,)
    np.testing.assert_allclose(hv, [wv.sum() / 12], rtol=1e-10)


def test_mean_of_no_element_keeps_the_dtype():
    for dt in ("float16", "float32", "float64"):
        out = get_op_def("mean").forward(np.zeros((0, 3), dt))["Out"]
        assert out.dtype == np.dtype(dt) and out.shape == (1,) and np.isnan(out[0])


def test_reduce_mean_grad_over_a_size_one_axis_is_the_upstream_gradient():
    """n = numel(X) / numel(Out) = 1: dX = dOut (the divisor is not clamped above 1)."""
    op = get_op_def("reduce_mean")
    x = np.arange(3, dtype=np.float64).reshape(3, 1)
    d = np.array([0.5, -1.0, 2.0])
    got = op.backward(x, d, dim=[1], keep_dim=False, reduce_all=False)["X"]
    np.testing.assert_array_equal(got, d.reshape(3, 1))
    got = op.backward(np.ones((1,)), np.array([4.0]), dim=[0], keep_dim=False,
                      reduce_all=False)["X"]
    np.testing.assert_array_equal(got, [4.0])


@pytest.mark.parametrize("keep_dim", [False, True])
def test_reduce_of_a_0d_tensor_is_shape_1(keep_dim):
    out = get_op_def("reduce_sum").forward(np.float32(2.5) * np.ones((), np.float32),
                                           dim=[0], keep_dim=keep_dim, reduce_all=False)["Out"]
    assert out.shape == (1,) and out[0] == np.float32(2.5)


@pytest.mark.parametrize("op", ["reduce_max_grad_grad", "reduce_min_grad_grad"])
def test_extremum_grad_grad_with_default_attrs(op):
    """DDOut = sum over dim (default [0], keep_dim False, reduce_all False) of DDX where X is the
    extremum."""
    rng = np.random.default_rng(14)
    x = rng.permutation(12).reshape(3, 4).astype("float64")
    out = x.max(0) if op == "reduce_max_grad_grad" else x.min(0)
    ddx = rng.normal(size=(3, 4))
    got = get_op_def(op).forward(x, out, ddx)["DDOut"]
    pick = (np.argmax if op == "reduce_max_grad_grad" else np.argmin)(x, axis=0)
    np.testing.assert_allclose(got, ddx[pick, np.arange(4)], rtol=1e-12)
    assert got.shape == (4,)
