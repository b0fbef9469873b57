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
