"""fluid.gradients / calc_gradient: seeds, target_gradients, None for unrelated inputs,
repeated and higher-order use on one program, errors (program left unchanged); and the
gradient-check harness itself (check_grad / check_double_grad catch wrong rules)."""
import logging

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.backward import calc_gradient, gradients
from fluidlite.core import registry
from fluidlite.core.ir import OpRole
from fluidlite.core.registry import OpDef, register
from fluidlite.testing import OpTest, check_double_grad, check_grad, numeric_grad

L = fluid.layers


def run(prog, feed, fetch):
    return fluid.Executor().run(prog, feed=feed, fetch_list=fetch, scope=fluid.Scope())


def data(name, shape, dtype="float64"):
    v = fluid.data(name, shape, dtype)
    v.stop_gradient = False
    return v


XV = np.array([[0.3, -1.2, 0.7], [1.5, 0.1, -0.4]])


def test_public_names():
    assert fluid.gradients is gradients
    assert fluid.backward.gradients is gradients and fluid.backward.calc_gradient is calc_gradient


def test_basic_list_aligned_with_inputs_and_seed():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x, y, z = data("x", [2, 3]), data("y", [2, 3]), data("z", [2, 3])
        out = L.elementwise_mul(L.square(x), y)
        n_fwd = len(main.global_block().ops)
        gx, gy, gz = fluid.gradients(out, [x, y, z])
    assert gz is None
    assert (gx.name, gy.name) == ("x@GRAD", "y@GRAD")
    seed = main.global_block().ops[n_fwd]
    assert seed.type == "fill_any_like" and seed.input("X") == [out.name]
    assert seed.attr("value") == 1.0 and seed.attr("op_role") == OpRole.Backward
    assert seed.output("Out") == [out.name + "@GRAD"]
    assert main.global_block().var(out.name + "@GRAD").shape == (2, 3)
    yv = XV[::-1] + 2
    a, b = run(main, {"x": XV, "y": yv}, [gx, gy])
    np.testing.assert_allclose(a, 2 * XV * yv)
    np.testing.assert_allclose(b, XV ** 2)


def test_calc_gradient_single_input_returns_a_variable():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = data("x", [2, 3])
        g = calc_gradient(L.exp(x), x)
        gl = calc_gradient(L.exp(x), [x])
    assert isinstance(g, fluid.Variable) and isinstance(gl, list) and len(gl) == 1


def test_stop_gradient_input_gets_none_and_a_warning(caplog):
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [2, 3], "float64")          # stop_gradient=True, as fluid
        with caplog.at_level(logging.WARNING, logger="fluidlite"):
            g, = fluid.gradients(L.exp(x), x)
    assert g is None
    assert "x.stop_gradient = False" in caplog.text


def test_no_grad_set_gives_none_silently(caplog):
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x, y = data("x", [2]), data("y", [2])
        with caplog.at_level(logging.WARNING, logger="fluidlite"):
            gx, gy = fluid.gradients(L.elementwise_mul(x, y), [x, y], no_grad_set=[y])
    assert gy is None and gx is not None and not caplog.records
    with pytest.raises(TypeError, match="no_grad_set should be set or list or tuple"):
        fluid.gradients(x, x, no_grad_set="y")


def test_target_gradients_scale_the_result():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = data("x", [2, 3])
        w = fluid.data("w", [2, 3], "float64")
        n_fwd = len(main.global_block().ops) + 1
        out = L.sin(x)
        g, = fluid.gradients([out], [x], target_gradients=[w])
    seed = main.global_block().ops[n_fwd]
    assert seed.type == "assign" and seed.input("X") == ["w"]
    wv = np.arange(6.0).reshape(2, 3)
    got, = run(main, {"x": XV, "w": wv}, [g])
    np.testing.assert_allclose(got, wv * np.cos(XV))


def test_target_gradients_none_entries_and_several_targets_accumulate():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = data("x", [2, 3])
        a = L.square(x)
        b = L.scale(a, scale=3.0)                 # b depends on a: a@GRAD = 1 + 3
        w = fluid.data("w", [2, 3], "float64")
        g, = fluid.gradients([a, b], [x], target_gradients=[None, w])
    ops = main.global_block().ops
    sums = [op for op in ops if op.type == "sum"]
    assert len(sums) == 1 and sums[0].output("Out") == [a.name + "@GRAD"]
    wv = np.full((2, 3), 2.0)
    got, = run(main, {"x": XV, "w": wv}, [g])
    np.testing.assert_allclose(got, (1 + 3 * wv) * 2 * XV)


def test_gradient_with_respect_to_an_intermediate():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = data("x", [2, 3])
        h = L.tanh(x)
        out = L.reduce_sum(L.square(h))
        gh, gx = fluid.gradients(out, [h, x])
    hv, gxv, ghv = run(main, {"x": XV}, [h, gx, gh])
    np.testing.assert_allclose(ghv, 2 * hv)
    np.testing.assert_allclose(gxv, 2 * hv * (1 - hv ** 2))


def test_target_that_is_an_input():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = data("x", [2, 3])
        g, = fluid.gradients(x, x)
    got, = run(main, {"x": XV}, [g])
    np.testing.assert_array_equal(got, np.ones((2, 3)))


def test_parameters_that_are_not_inputs_get_no_gradient_ops():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = data("x", [2, 3])
        out = L.mean(L.fc(x, 2))
        n_fwd = len(main.global_block().ops)
        g, = fluid.gradients(out, x)
    written = {n for op in main.global_block().ops[n_fwd:] for n in op.output_arg_names}
    assert not any(n.startswith("fc_0.w_0") or n.startswith("fc_0.b_0") for n in written)
    assert g.name == "x@GRAD"


def test_repeated_calls_on_one_program_get_fresh_names():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = data("x", [2, 3])
        out = L.exp(L.scale(x, scale=2.0))
        g1, = fluid.gradients(out, x)
        g2, = fluid.gradients(out, x)
        g3, = fluid.gradients(L.mean(out), x)
    assert (g1.name, g2.name, g3.name) == ("x@GRAD", "x@GRAD_0", "x@GRAD_1")
    assert main._appending_grad_times == 3
    a, b, c = run(main, {"x": XV}, [g1, g2, g3])
    np.testing.assert_allclose(a, 2 * np.exp(2 * XV))
    np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(c, a / 6)
    main.lint()


# -- higher order ---------------------------------------------------------------------------------
def test_second_and_third_derivative_of_exp_and_tanh():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = data("x", [2, 3])
        y = L.tanh(x)
        d1, = fluid.gradients(y, x)
        d2, = fluid.gradients(d1, x)
        e = L.exp(x)
        e1, = fluid.gradients(e, x)
        e2, = fluid.gradients(e1, x)
        e3, = fluid.gradients(e2, x)
    assert d2.name == "x@GRAD_0"
    t = np.tanh(XV)
    a, b, c1, c2, c3 = run(main, {"x": XV}, [d1, d2, e1, e2, e3])
    np.testing.assert_allclose(a, 1 - t ** 2)
    np.testing.assert_allclose(b, -2 * t * (1 - t ** 2))
    for c in (c1, c2, c3):
        np.testing.assert_allclose(c, np.exp(XV))
    main.lint()


def test_grad_of_grad_names_and_shapes():
    """The forward var of ``h@GRAD@GRAD`` is ``h@GRAD`` (a gradient of the first pass)."""
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = data("x", [2, 3])
        w = data("w", [3, 4])
        h = L.mul(x, w)                             # [2, 4]
        loss = L.mean(L.tanh(h))
        gx, = fluid.gradients(loss, x)
        pen = L.reduce_sum(L.square(gx))
        n1 = len(main.global_block().ops)
        gw, = fluid.gradients(pen, w)
    block = main.global_block()
    new_out = {n for op in block.ops[n1:] for n in op.output_arg_names}
    assert h.name + "@GRAD@GRAD" in new_out
    assert block.var(h.name + "@GRAD@GRAD").shape == (2, 4)
    assert block.var(gx.name + "@GRAD").shape == (2, 3)
    assert gw.name == "w@GRAD" and gw.shape == (3, 4)
    assert all(op.attr("op_role") == OpRole.Backward for op in block.ops[n1:])


def test_gradient_penalty_with_respect_to_weights_matches_numeric():
    """d/dW ||dL/dx||^2 for L = mean(tanh(x W + b)) (the WGAN-GP pattern)."""
    rng = np.random.default_rng(3)
    feed = {"x": rng.normal(size=(2, 3)), "w": rng.normal(size=(3, 4)) * 0.7,
            "b": rng.normal(size=(4,)) * 0.1}
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x, w, b = data("x", [2, 3]), data("w", [3, 4]), data("b", [4])
        loss = L.mean(L.tanh(L.elementwise_add(L.mul(x, w), b)))
        gx, = fluid.gradients(loss, x)
        pen = L.reduce_sum(L.square(gx))
        fwd = main.clone()
        gw, gb, gx2 = fluid.gradients(pen, [w, b, x])
    got = run(main, feed, [gw, gb, gx2])

    def f(fd):
        return float(run(fwd, fd, [pen.name])[0].reshape(-1)[0])

    for name, g in zip(("w", "b", "x"), got):
        num = numeric_grad(f, feed, name, 1e-5)
        np.testing.assert_allclose(g, num, rtol=1e-5, atol=1e-8, err_msg=name)


def test_second_order_through_softmax_and_matmul_matches_numeric():
    rng = np.random.default_rng(4)
    feed = {"x": rng.normal(size=(2, 3)), "w": rng.normal(size=(3, 3))}
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x, w = data("x", [2, 3]), data("w", [3, 3])
        p = L.softmax(L.matmul(x, w))
        loss = L.reduce_mean(L.elementwise_mul(p, p))
        gx, = fluid.gradients(loss, x)
        pen = L.reduce_sum(L.elementwise_mul(gx, gx))
        fwd = main.clone()
        gw, = fluid.gradients(pen, w)
    got, = run(main, feed, [gw])
    num = numeric_grad(lambda fd: float(run(fwd, fd, [pen.name])[0].reshape(-1)[0]), feed,
                       "w", 1e-5)
    np.testing.assert_allclose(got, num, rtol=1e-5, atol=1e-9)


def test_second_order_input_that_only_shapes_the_first_gradient_is_none_or_zero():
    """d/dx of d(mean(x + c))/dx: the first gradient is a constant."""
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = data("x", [2, 3])
        g, = fluid.gradients(L.mean(L.scale(x, scale=2.0)), x)
        gg, = fluid.gradients(L.reduce_sum(g), x)
    if gg is not None:
        got, = run(main, {"x": XV}, [gg])
        np.testing.assert_array_equal(got, np.zeros((2, 3)))


# -- errors ---------------------------------------------------------------------------------------
def _unchanged(main, fn, exc, match):
    version, n_ops = main.version, len(main.global_block().ops)
    with pytest.raises(exc, match=match):
        fn()
    assert main.version == version and len(main.global_block().ops) == n_ops
    assert main._appending_grad_times == 0


@pytest.fixture
def net():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = data("x", [2, 3])
        y = L.exp(x)
        z = L.mean(y)
    return main, x, y, z


def test_error_target_gradients_count(net):
    main, x, y, z = net
    w = main.global_block().create_var(name="w", shape=[2, 3], dtype="float64")
    _unchanged(main, lambda: fluid.gradients([y, z], x, target_gradients=[w]), ValueError,
               "^Should have the same number of target_gradients as targets$")


def test_error_target_gradients_shape(net):
    main, x, y, _ = net
    w = main.global_block().create_var(name="w", shape=[3, 2], dtype="float64")
    _unchanged(main, lambda: fluid.gradients(y, x, target_gradients=w), ValueError,
               r"^The shapes of target and grad are different: exp_0.tmp_0 w \(target shape "
               r"\[2, 3\], grad shape \[3, 2\]\)")


def test_error_target_gradients_from_another_block_or_program(net):
    main, x, y, _ = net
    other = fluid.Program()
    w = other.global_block().create_var(name="w", shape=[2, 3], dtype="float64")
    _unchanged(main, lambda: fluid.gradients(y, x, target_gradients=[w]), ValueError,
               "all targets must be in the same block")


def test_error_types(net):
    main, x, y, _ = net
    _unchanged(main, lambda: fluid.gradients("y", x), TypeError, "targets")
    _unchanged(main, lambda: fluid.gradients(y, [x, 1]), TypeError, r"inputs\[1\]")
    _unchanged(main, lambda: fluid.gradients(y, []), ValueError, "'inputs' is empty")
    _unchanged(main, lambda: fluid.gradients(y, x, target_gradients=3), TypeError,
               "target_gradients")
    _unchanged(main, lambda: fluid.gradients(y, x, no_grad_set=[1]), TypeError,
               "no_grad_set's member")


def test_error_inputs_from_another_program(net):
    main, x, y, _ = net
    other = fluid.Program()
    with fluid.program_guard(other, fluid.Program()):
        x2 = data("x", [2, 3])
    _unchanged(main, lambda: fluid.gradients(y, x2), ValueError,
               r"inputs\[0\] 'x' belongs to a different Program")


# -- the gradient-check harness (fluidlite.testing) ------------------------------------------------
R = OpTest.rand


@pytest.fixture
def temp_ops():
    """Register test-only ops for one test and remove them afterwards."""
    added = []

    def add(cls):
        register(cls)
        added.extend([cls.type, cls.type + "_grad"])
        return cls

    yield add
    for t in added:
        registry._REGISTRY.pop(t, None)


def _cube_op(add, dx_factor=3.0, ddx_factor=6.0):
    class Cube(OpDef):
        """Out = X^3;  dX = 3 X^2 dOut (test-only op; factors injectable to test the checks)."""
        type, inputs, outputs = "test_cube", ("X",), ("Out",)

        def infer(self, X):
            return {"Out": X}

        def forward(self, X):
            return {"Out": X ** 3}

        def backward(self, X, dOut):
            return {"X": dx_factor * X * X * dOut}

        def double_grad(self, g):
            """d(dX)/dX = 6 X dOut ddX, d(dX)/d(dOut) = 3 X^2 ddX."""
            x, dout, ddx = g.input("X"), g.input("Out@GRAD"), g.output_grad("X@GRAD")
            if g.input_grad("X") is not None:
                t = g.tmp()
                g.append("elementwise_mul", {"X": x, "Y": dout}, {"Out": t})
                t2 = g.tmp()
                g.append("elementwise_mul", {"X": t, "Y": ddx}, {"Out": t2})
                g.append("scale", {"X": t2}, {"Out": g.input_grad("X")}, scale=ddx_factor)
            if g.input_grad("Out@GRAD") is not None:
                t = g.tmp()
                g.append("elementwise_mul", {"X": x, "Y": x}, {"Out": t})
                t2 = g.tmp()
                g.append("elementwise_mul", {"X": t, "Y": ddx}, {"Out": t2})
                g.append("scale", {"X": t2}, {"Out": g.input_grad("Out@GRAD")}, scale=3.0)

    return add(Cube)


def test_harness_accepts_correct_rules(temp_ops):
    _cube_op(temp_ops)
    x = R(3, 4, seed=1)
    t = OpTest()
    t.op_type, t.inputs, t.attrs, t.outputs = "test_cube", {"X": x}, {}, {"Out": x ** 3}
    t.check_output()
    t.check_grad(["X"], "Out")
    t.check_double_grad(["X"], "Out")


def test_check_grad_catches_a_wrong_backward(temp_ops):
    _cube_op(temp_ops, dx_factor=3.1)
    with pytest.raises(AssertionError, match="test_cube: dx: max relative error"):
        check_grad("test_cube", {"X": R(3, 4, seed=1)}, "Out")


def test_check_double_grad_catches_a_wrong_double_grad(temp_ops):
    _cube_op(temp_ops, ddx_factor=3.0)
    check_grad("test_cube", {"X": R(3, 4, seed=1)}, "Out")      # first order is fine
    with pytest.raises(AssertionError, match="test_cube: second-order dx"):
        check_double_grad("test_cube", {"X": R(3, 4, seed=1)}, "Out")


def test_second_order_needs_a_rule_on_the_grad_op(temp_ops):
    class NoDouble(OpDef):
        """Out = X^2;  dX = 2 X dOut (test-only op without a double_grad rule)."""
        type, inputs, outputs = "test_no_double", ("X",), ("Out",)

        def infer(self, X):
            return {"Out": X}

        def forward(self, X):
            return {"Out": X * X}

        def backward(self, X, dOut):
            return {"X": 2 * X * dOut}

    temp_ops(NoDouble)
    with pytest.raises(ValueError, match="'test_no_double_grad'.*double_grad"):
        check_double_grad("test_no_double", {"X": R(2, 3)}, "Out")


# second-order checks of the op families issue 3 names (the owners' own tests go further)
SECOND_ORDER = [
    ("elementwise_add", {"X": R(3, 4, seed=1), "Y": R(4, seed=2)}, {}),
    ("elementwise_sub", {"X": R(3, 4, seed=1), "Y": R(3, 4, seed=2)}, {}),
    ("elementwise_mul", {"X": R(3, 4, seed=1), "Y": R(4, seed=2)}, {}),
    ("elementwise_div", {"X": R(3, 4, seed=1), "Y": R(3, 4, low=0.5, high=2.0, seed=2)}, {}),
    ("tanh", {"X": R(3, 4, seed=3)}, {}),
    ("sigmoid", {"X": R(3, 4, seed=3)}, {}),
    ("relu", {"X": R(3, 4, avoid=0.0, seed=3)}, {}),
    ("softmax", {"X": R(2, 5, seed=3)}, {"axis": -1}),
    ("mul", {"X": R(3, 4, seed=4), "Y": R(4, 2, seed=5)}, {}),
    ("matmul", {"X": R(3, 4, seed=4), "Y": R(2, 4, seed=5)}, {"transpose_Y": True}),
    ("mean", {"X": R(3, 4, seed=6)}, {}),
    ("reduce_sum", {"X": R(3, 4, seed=6)}, {"dim": [1]}),
    ("reduce_mean", {"X": R(3, 4, seed=6)}, {"dim": [0]}),
    ("square", {"X": R(3, 4, seed=7)}, {}),
    ("sqrt", {"X": R(3, 4, low=0.5, high=2.0, seed=7)}, {}),
    ("exp", {"X": R(3, 4, seed=7)}, {}),
    ("log", {"X": R(3, 4, low=0.5, high=2.0, seed=7)}, {}),
]


@pytest.mark.parametrize("op_type,inputs,attrs", SECOND_ORDER, ids=[c[0] for c in SECOND_ORDER])
def test_second_order_of_named_op_families(op_type, inputs, attrs):
    check_double_grad(op_type, inputs, "Out", attrs=attrs)


def test_second_order_prunes_grad_ops_on_zero_gradients():
    """A gradient penalty through matmul + reduce_sum: grad ops whose incoming gradients are
    all absent (zero) are pruned and absent partials are left out of sums, so the program holds
    no fill_zeros_like; the result still matches central differences."""
    from fluidlite.testing import assert_grads_close, numeric_grad
    L = fluid.layers
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [2, 3], "float64")
        w = fluid.data("w", [3, 4], "float64")
        x.stop_gradient = w.stop_gradient = False
        h = L.matmul(x, w)
        loss = L.reduce_sum(L.matmul(h, h, transpose_y=True))
        (g,) = fluid.gradients(loss, x)
        pen = L.mean(L.matmul(g, g, transpose_y=True))
        fwd = main.clone()
        (gw,) = fluid.gradients(pen, w)
    assert "fill_zeros_like" not in [op.type for op in main.global_block().ops]
    exe = fluid.Executor(fluid.CPUPlace())
    feed = {"x": np.array([[1., 2., 3.], [0.5, -1, 2]]),
            "w": np.arange(12.).reshape(3, 4) / 10 - 0.5}
    (got,) = exe.run(main, feed=feed, fetch_list=[gw], scope=fluid.Scope())
    num = numeric_grad(lambda fd: float(exe.run(fwd, feed=fd, fetch_list=[pen],
                                                scope=fluid.Scope())[0][0]), feed, "w", 1e-4)
    assert_grads_close(got, num, 1e-5, "d penalty / dw")
