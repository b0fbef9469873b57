"""``OpDef.lower_grad``: fast paths of generated grad ops (``mul_grad`` for 2-D operands,
``elementwise_add_grad`` for a bias) return exactly what the backward rule returns, are bound
by ``<type>_grad``'s ``bind`` only where they apply, and are what the static plan and the
dygraph engine call."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import dygraph
from fluidlite.core.registry import VarSpec, get_op_def

RNG = np.random.default_rng(0)


def _r(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def _same(got, want):
    assert set(got) == set(want)
    for k in want:
        assert got[k].dtype == want[k].dtype and got[k].shape == want[k].shape
        np.testing.assert_array_equal(got[k], want[k])


@pytest.mark.parametrize("wanted", [{"X", "Y"}, {"Y"}, {"X"}])
def test_mul_grad_fast_path_is_the_backward_rule(wanted):
    mul = get_op_def("mul")
    X, Y, dO = _r(5, 4), _r(4, 3), _r(5, 3)
    specs = [VarSpec((-1, 4), X.dtype), VarSpec(Y.shape, Y.dtype), VarSpec((-1, 3), X.dtype)]
    fast = mul.lower_grad(specs, {"x_num_col_dims": 1, "y_num_col_dims": 1}, frozenset(wanted))
    assert fast is not None
    _same(fast(X, Y, dO), mul.backward(X, Y, dO, wanted=frozenset(wanted)))


def test_mul_grad_fast_path_only_where_it_applies():
    mul = get_op_def("mul")
    f32, f16 = np.dtype(np.float32), np.dtype(np.float16)
    both = frozenset({"X", "Y"})
    two = [VarSpec((5, 4), f32), VarSpec((4, 3), f32), VarSpec((5, 3), f32)]
    assert mul.lower_grad([VarSpec((5, 2, 2), f32)] + two[1:], {}, both) is None   # 3-D X
    assert mul.lower_grad(two, {"x_num_col_dims": 1, "y_num_col_dims": 2}, both) is None
    assert mul.lower_grad([VarSpec((5, 4), f16)] + two[1:], {}, both) is None      # float16
    assert mul.lower_grad([None] + two[1:], {}, both) is None                      # unknown
    grad = get_op_def("mul_grad")
    fast = grad.bind(two, {}, frozenset({"X@GRAD", "Y@GRAD"}))
    generic = grad.bind([None] * 3, {}, frozenset({"X@GRAD", "Y@GRAD"}))
    assert getattr(fast.fn, "__name__", "") == "<lambda>"
    assert getattr(generic.fn, "__name__", "") != "<lambda>"     # the backward rule
    X, Y, dO = _r(5, 4), _r(4, 3), _r(5, 3)
    _same(fast.fn(X, Y, dO), generic.fn(X, Y, dO))


@pytest.mark.parametrize("axis", [-1, 1])
@pytest.mark.parametrize("wanted", [{"X", "Y"}, {"Y"}])
def test_bias_add_grad_fast_path_is_the_backward_rule(axis, wanted):
    add = get_op_def("elementwise_add")
    X, b, dO = _r(6, 3), _r(3), _r(6, 3)
    specs = [VarSpec((-1, 3), X.dtype), VarSpec((3,), X.dtype), VarSpec((-1, 3), X.dtype)]
    fast = add.lower_grad(specs, {"axis": axis}, frozenset(wanted))
    assert fast is not None
    got, want = fast(X, b, dO), add.backward(X, b, dO, wanted=frozenset(wanted), axis=axis)
    _same(got, want)
    if "X" in wanted:
        assert got["X"] is dO and want["X"] is dO           # dX is dOut itself in both


def test_bias_add_grad_fast_path_only_where_it_applies():
    add = get_op_def("elementwise_add")
    f = np.dtype(np.float32)
    both = frozenset({"X", "Y"})
    assert add.lower_grad([VarSpec((6, 3), f), VarSpec((1,), f), None], {}, both) is None
    assert add.lower_grad([VarSpec((6, 3), f), VarSpec((6,), f), None], {"axis": 0},
                          both) is None
    assert add.lower_grad([VarSpec((2, 6, 3), f), VarSpec((3,), f), None], {}, both) is None
    assert add.lower_grad([VarSpec((6, -1), f), VarSpec((-1,), f), None], {}, both) is None
    assert add.lower_grad([VarSpec((6, 3), f), VarSpec((3,), f), None], {},
                          frozenset({"X"})) is None


def _mlp_grads_static(x, w, b):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        xv = fluid.data("x", [-1, 4], "float32")
        h = fluid.layers.fc(xv, 3, param_attr=fluid.ParamAttr(name="w"),
                            bias_attr=fluid.ParamAttr(name="b"))
        loss = fluid.layers.mean(h * h)
        fluid.backward.append_backward(loss)
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    scope.var("w").get_tensor().set(w, fluid.CPUPlace())
    scope.var("b").get_tensor().set(b, fluid.CPUPlace())
    types = [op.type for op in main.global_block().ops]
    assert "mul_grad" in types and "elementwise_add_grad" in types
    return exe.run(main, feed={"x": x}, fetch_list=["w@GRAD", "b@GRAD"], scope=scope)


def test_static_and_dygraph_fc_gradients_through_the_fast_paths():
    x, w, b = _r(5, 4), _r(4, 3), _r(3)
    gw, gb = _mlp_grads_static(x, w, b)
    h = x @ w + b
    dh = 2 * h / h.size
    np.testing.assert_allclose(gw, x.T @ dh, rtol=1e-5)
    np.testing.assert_allclose(gb, dh.sum(0), rtol=1e-5)
    with dygraph.guard():
        fc = dygraph.Linear(4, 3)
        fc.weight.set_value(w)
        fc.bias.set_value(b)
        out = fc(dygraph.to_variable(x))
        fluid.layers.mean(out * out).backward()
        np.testing.assert_array_equal(fc.weight.gradient(), gw)
        np.testing.assert_array_equal(fc.bias.gradient(), gb)


_SWCE_ATTRS = {"soft_label": False, "ignore_index": -100, "numeric_stable_mode": True,
               "axis": -1}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", ["plain", "ignored", "in-range ignore", "inf logit"])
def test_softmax_cross_entropy_fast_paths_are_forward_and_backward(dtype, case):
    op = get_op_def("softmax_with_cross_entropy")
    x, lab = _r(7, 5, dtype=dtype), RNG.integers(0, 5, (7, 1)).astype(np.int64)
    attrs = dict(_SWCE_ATTRS)
    if case == "ignored":
        lab[2, 0] = -100                            # an ignored row: the general path
    elif case == "in-range ignore":
        attrs["ignore_index"] = 3
    elif case == "inf logit":
        x[1, lab[1, 0]] = -np.inf                   # loss +inf -> fluid's 1e20
    specs = [VarSpec((-1, 5), x.dtype), VarSpec((-1, 1), lab.dtype)]
    fast = op.lower(specs, attrs)
    assert fast is not None
    with np.errstate(invalid="ignore"):
        want = op.forward(x, lab, **attrs)
        _same(fast(x, lab), want)
    dl = _r(7, 1, dtype=dtype)
    gfast = op.lower_grad([specs[1], specs[0], None, VarSpec((-1, 1), x.dtype)], attrs,
                          frozenset({"Logits"}))
    _same(gfast(lab, want["Softmax"], None, dl),
          op.backward(lab, want["Softmax"], dl, **attrs))


def test_softmax_cross_entropy_fast_paths_only_where_they_apply():
    op = get_op_def("softmax_with_cross_entropy")
    f32, i64 = np.dtype(np.float32), np.dtype(np.int64)
    two = [VarSpec((4, 5), f32), VarSpec((4, 1), i64)]
    assert op.lower(two, dict(_SWCE_ATTRS, soft_label=True)) is None
    assert op.lower([VarSpec((2, 4, 5), f32), VarSpec((2, 4, 1), i64)], _SWCE_ATTRS) is None
    assert op.lower([two[0], VarSpec((4, 1), np.dtype(np.int32))], _SWCE_ATTRS) is None
    assert op.lower([VarSpec((4, 5), np.dtype(np.float16)), two[1]], _SWCE_ATTRS) is None
    assert op.lower_grad([two[1], two[0], None, VarSpec((4, 1), f32)], _SWCE_ATTRS,
                         frozenset({"Logits", "Label"})) is None
    fast = op.lower(two, _SWCE_ATTRS)
    with pytest.raises(ValueError, match="label 9 is out of range"):
        fast(_r(4, 5), np.array([[0], [9], [1], [2]], np.int64))     # named as forward does
    grad = get_op_def("softmax_with_cross_entropy_grad")
    bound = grad.bind([two[1], two[0], None, VarSpec((4, 1), f32)], _SWCE_ATTRS,
                      frozenset({"Logits@GRAD"}))
    assert bound.fn.__name__ == "fast"


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_relu_fast_paths_are_forward_and_backward(dtype):
    relu = get_op_def("relu")
    x = np.array([[-1.5, -0.0, 0.0, np.nan], [2.0, np.inf, -np.inf, 1e-30]], dtype)
    spec = [VarSpec((-1, 4), np.dtype(dtype))]
    fast = relu.lower(spec, {})
    out = relu.forward(x)["Out"]
    got = fast(x)
    assert got.dtype == out.dtype
    np.testing.assert_array_equal(got, out)
    assert np.signbit(got).tolist() == np.signbit(out).tolist()
    d = _r(2, 4, dtype=dtype)
    gfast = relu.lower_grad(spec * 2, {}, frozenset({"X"}))
    _same(gfast(out, d), relu.backward(out, d))
    # integer tensors keep the generic kernels
    assert relu.lower_grad([VarSpec((3,), np.dtype(np.int32))] * 2, {}, frozenset({"X"})) is None
    ints = relu.lower([VarSpec((3,), np.dtype(np.int32))], {})
    assert ints(np.array([-2, 0, 3], np.int32)).dtype == np.int32


_ADAM_ATTRS = {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8, "lazy_mode": False,
               "min_row_size_to_use_multithread": 1000}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_adam_fast_path_is_forward_bit_for_bit(dtype):
    adam = get_op_def("adam")
    fast = adam.lower([VarSpec((8, 5), np.dtype(dtype))] + [None] * 8, _ADAM_ATTRS)
    assert fast is not None
    rng = np.random.default_rng(5)
    for _ in range(30):                     # gradients from tiny to large, many step counts
        P = rng.standard_normal((8, 5)).astype(dtype)
        G = (rng.standard_normal((8, 5)) * 10 ** rng.uniform(-8, 3)).astype(dtype)
        M1 = (rng.standard_normal((8, 5)) * 0.1).astype(dtype)
        M2 = (np.abs(rng.standard_normal((8, 5))) * 0.01).astype(dtype)
        lr = np.array([10 ** rng.uniform(-5, -1)], dtype)
        b1p = np.array([0.9 ** rng.integers(1, 50)], dtype)
        b2p = np.array([0.999 ** rng.integers(1, 5000)], dtype)
        _same(fast(P, G, lr, M1, M2, b1p, b2p, None, None),
              adam.forward(P, G, lr, M1, M2, b1p, b2p, **_ADAM_ATTRS))


def test_adam_fast_path_only_where_it_applies():
    adam = get_op_def("adam")
    f32 = np.dtype(np.float32)
    p = VarSpec((4,), f32)
    assert adam.lower([p] + [None] * 6 + [VarSpec((1,), f32), None], _ADAM_ATTRS) is None
    assert adam.lower([VarSpec((4,), np.dtype(np.int64))] + [None] * 8, _ADAM_ATTRS) is None
    fast = adam.lower([p] + [None] * 8, _ADAM_ATTRS)
    args = [_r(4), _r(4), np.array([0.01], np.float32), _r(4), np.abs(_r(4)),
            np.array([0.9], np.float64), np.array([0.999], np.float32)]   # a float64 pow
    _same(fast(*args, None, None), adam.forward(*args, **_ADAM_ATTRS))
    args[5] = np.array([0.9, 0.9], np.float32)[:1].reshape(1, 1)           # not [1]
    _same(fast(*args, None, None), adam.forward(*args, **_ADAM_ATTRS))


def test_products_two_d_by_dot_batched_by_matmul():
    mul, matmul = get_op_def("mul"), get_op_def("matmul")
    f32 = np.dtype(np.float32)
    two = [VarSpec((5, 4), f32), VarSpec((4, 3), f32)]
    X, Y = _r(5, 4), _r(4, 3)
    np.testing.assert_array_equal(mul.lower(two, {})(X, Y), mul.forward(X, Y)["Out"])
    np.testing.assert_array_equal(matmul.lower(two, {})(X, Y), np.matmul(X, Y))
    batched = [VarSpec((2, 5, 4), f32), VarSpec((2, 4, 3), f32)]
    A, B = _r(2, 5, 4), _r(2, 4, 3)
    got = matmul.lower(batched, {})(A, B)
    assert got.shape == (2, 5, 3)
    np.testing.assert_array_equal(got, matmul.forward(A, B)["Out"])
