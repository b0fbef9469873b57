"""Eager autograd: the seeds' PyTorch-style examples (seeds 003/004) and the tensor API."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import dygraph
from fluidlite.core import mode


def leaf(value, dtype="float32"):
    t = dygraph.to_variable(np.array(value, dtype=dtype))
    t.stop_gradient = False
    return t


@pytest.fixture(autouse=True)
def dy():
    with dygraph.guard():
        yield
    assert mode.tracer is None


def test_seed003_tensor_backward_x2_plus_y():
    x, y = leaf(1.0), leaf(2.0)
    assert x.gradient() is None and x.grad is None       # None before backward
    z = x ** 2 + y
    assert float(z) == 3.0
    z.backward()
    assert x.gradient() == 2.0 and y.gradient() == 1.0
    assert float(x.grad) == 2.0 and float(y.grad) == 1.0


def test_seed003_autograd_backward_and_grad():
    x, y = leaf(1.0), leaf(2.0)
    fluid.autograd.backward(x ** 2 + y)
    assert (x.gradient(), y.gradient()) == (2.0, 1.0)
    x, y = leaf(1.0), leaf(2.0)
    (gx,) = dygraph.grad(x ** 2 + y, x)
    (gy,) = dygraph.grad(x ** 2 + y, [y])
    assert float(gx) == 2.0 and float(gy) == 1.0
    assert x.gradient() is None                          # grad() never touches .gradient()


def test_x_x_y_gives_12_and_4():
    x, y = leaf(2.0), leaf(3.0)
    z = x * x * y
    z.backward()
    assert x.gradient() == 12.0 and y.gradient() == 4.0


def test_no_grad_outputs_stop_gradient():
    x, y = leaf(1.0), leaf(2.0)
    assert (x ** 2 + y).stop_gradient is False
    with dygraph.no_grad():
        z = x ** 2 + y
    assert z.stop_gradient is True and z._node is None

    @dygraph.no_grad
    def f(a):
        return a * 3

    @dygraph.no_grad()
    def g(a):
        return a * 3
    assert f(x).stop_gradient and g(x).stop_gradient
    assert (x * 3).stop_gradient is False                # restored after the decorator


def test_retain_graph_accumulates_and_freed_graph_raises():
    x = leaf(2.0)
    z = x * x
    z.backward(retain_graph=True)
    z.backward()
    assert x.gradient() == 8.0                            # 4 + 4
    with pytest.raises(RuntimeError, match="retain_graph=True"):
        z.backward()
    x.clear_gradient()
    assert x.gradient() is None


def test_gradients_accumulate_until_cleared():
    x = leaf([1.0, 2.0])
    for _ in range(3):
        fluid.layers.reduce_sum(x * x).backward()
    np.testing.assert_allclose(x.gradient(), [6.0, 12.0])


def test_create_graph_second_derivative_of_cube():
    x = leaf(2.0)
    y = x * x * x
    (dx,) = dygraph.grad(y, x, create_graph=True)
    assert float(dx) == 12.0 and dx.stop_gradient is False
    (ddx,) = dygraph.grad(dx, x)
    assert float(ddx) == 12.0                             # d2(x^3)/dx2 = 6x
    x2 = leaf(2.0)
    (d1,) = dygraph.grad(x2 ** 3, x2, create_graph=True)
    d1.backward()
    assert x2.gradient() == 12.0


def test_grad_outputs_allow_unused_and_no_grad_vars():
    x, y = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    z = x * y
    (gx,) = dygraph.grad(z, x, grad_outputs=[np.array([1.0, 10.0], "float32")],
                         retain_graph=True)
    np.testing.assert_allclose(gx.numpy(), [3.0, 40.0])
    w = leaf(1.0)
    with pytest.raises(RuntimeError, match="not used"):
        dygraph.grad(fluid.layers.reduce_sum(z), [x, w], retain_graph=True)
    gx, gw = dygraph.grad(fluid.layers.reduce_sum(z), [x, w], allow_unused=True,
                          retain_graph=True)
    assert gw is None
    # blocking y: x's gradient through x*y*y... still flows from x
    (gx,) = dygraph.grad(fluid.layers.reduce_sum(z * x), [x], no_grad_vars=[y])
    np.testing.assert_allclose(gx.numpy(), 2 * np.array([1.0, 2.0]) * [3.0, 4.0])


def test_non_scalar_backward_starts_from_ones_as_fluid18():
    # fluid 1.8's imperative engine fills the initial gradient with ones of the output's
    # shape (BasicEngine::Init), so backward() of a non-scalar is the gradient of its sum
    x = leaf([1.0, 2.0])
    y = x * x * 2
    y.backward()
    np.testing.assert_allclose(x.gradient(), [4.0, 8.0])
    x.clear_gradient()
    y = x * 2
    y.backward(grad_tensor=np.array([1.0, 3.0], "float32"))
    np.testing.assert_allclose(x.gradient(), [2.0, 6.0])
    (gx,) = dygraph.grad(x * x, [x])
    np.testing.assert_allclose(gx.numpy(), [2.0, 4.0])


def test_stop_gradient_semantics():
    a = dygraph.to_variable(np.ones(3, "float32"))
    assert a.stop_gradient is True
    b = a * 2
    assert b.stop_gradient is True and b._node is None     # nothing needs a gradient
    lin = dygraph.Linear(3, 2)
    assert all(not p.stop_gradient for p in lin.parameters())
    c = lin(dygraph.to_variable(np.ones((1, 3), "float32")))
    assert c.stop_gradient is False
    d = c.detach()
    assert d.stop_gradient and d._node is None
    np.testing.assert_array_equal(d.numpy(), c.numpy())


def test_tensor_api():
    t = dygraph.to_variable(np.arange(6, dtype="float32").reshape(2, 3), name="t")
    assert t.name == "t" and t.shape == [2, 3] and t.dtype == fluid.VarType.FP32
    np.testing.assert_array_equal(np.asarray(t), np.arange(6).reshape(2, 3))
    np.testing.assert_array_equal(t[1].numpy(), [3, 4, 5])
    np.testing.assert_array_equal(t[:, 1:].numpy(), [[1, 2], [4, 5]])
    assert t.astype("int64").dtype == fluid.VarType.INT64
    assert ((t > 2).numpy() == (np.arange(6).reshape(2, 3) > 2)).all()
    np.testing.assert_array_equal((-t + 1).numpy(), 1 - np.arange(6).reshape(2, 3))
    np.testing.assert_allclose((2 / (t + 1)).numpy(), 2 / (np.arange(6).reshape(2, 3) + 1),
                               rtol=1e-6)
    t.set_value(np.ones((2, 3)))
    assert t.numpy().dtype == np.float32 and t.numpy().sum() == 6
    with pytest.raises(ValueError, match="shape"):
        t.set_value(np.ones(4))
    assert "shape=[2, 3]" in repr(t) and "float32" in repr(t)
    assert len(t) == 2 and t.size == 6


def test_bad_inputs_have_clear_errors():
    with pytest.raises(TypeError, match="object array"):
        dygraph.to_variable(np.array([[1], [1, 2]], dtype=object))
    main = fluid.Program()
    with fluid.program_guard(main):
        static = fluid.data("s", [-1, 3])
    with pytest.raises(TypeError, match="static Variable 's'"):
        fluid.layers.relu(static)


def test_dygraph_tensor_in_static_program_is_refused():
    t = dygraph.to_variable(np.ones(3, "float32"), name="dyt")
    with dygraph.guard():
        pass
    mode.tracer, saved = None, mode.tracer
    try:
        with pytest.raises((TypeError, ValueError), match="dyt"):
            fluid.layers.relu(t)
    finally:
        mode.tracer = saved


def test_seeded_guards_are_bit_identical():
    def run():
        with dygraph.guard():
            fluid.default_main_program().random_seed = 90
            lin = dygraph.Linear(4, 3)
            x = fluid.layers.uniform_random([2, 4])
            return lin.weight.numpy().copy(), x.numpy().copy()
    (w1, x1), (w2, x2) = run(), run()
    np.testing.assert_array_equal(w1, w2)
    np.testing.assert_array_equal(x1, x2)
    dygraph.seed(5)
    try:
        a = run()
    finally:
        dygraph.base._seed = None
    np.testing.assert_array_equal(a[0], w1)             # the program seed wins in the guard


def test_backward_after_in_place_update_is_refused():
    lin = dygraph.Linear(3, 1)
    opt = fluid.optimizer.SGD(0.1, parameter_list=lin.parameters())
    loss = fluid.layers.reduce_sum(lin(dygraph.to_variable(np.ones((2, 3), "float32"))))
    loss.backward(retain_graph=True)
    w = lin.weight.numpy()
    opt.minimize(loss)
    assert not np.array_equal(w, lin.weight.numpy())     # numpy() was a copy
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def test_fluid17_backward_strategy_is_accepted():
    x = leaf(3.0)
    strategy = dygraph.BackwardStrategy()
    strategy.sort_sum_gradient = True
    (x * x).backward(strategy)
    assert x.gradient() == 6.0


def test_intermediate_tensors_get_their_gradient():
    x = leaf([1.0, 2.0])
    y = x * 2
    z = fluid.layers.reduce_sum(y * y)
    z.backward()
    np.testing.assert_allclose(y.gradient(), 2 * y.numpy())
    np.testing.assert_allclose(x.gradient(), 8 * x.numpy())
