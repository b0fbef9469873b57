"""Tests written from the mutation run of ``fluidlite/ops/unary.py`` (issue 28, round 10): the
parts of the elementwise math ops the activation tests did not reach -- ``pow`` with a run-time
exponent (``FactorTensor``) forward and backward (also through the Executor's lowered kernels),
its second-order refusal, fluid 1.8's integer ``pow`` kernels, and ``abs``'s gradient at 0.

References: fluid 1.8's ``PowFunctor<T>`` (``x.pow(static_cast<T>(factor))``: for int32 /
int64 the exponent is truncated to an integer and ``std::pow``'s result truncated back),
``AbsGradFunctor`` (``dx = dout * sign(x)``, 0 at x = 0), the derivatives f x^(f-1) and
x^f ln x (what PyTorch's pow backward computes) in float64 NumPy, central differences
(``OpTest.check_grad``)."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core.registry import get_op_def
from fluidlite.testing import OpTest


def _pow_with_tensor(x, factor_tensor, factor_attr):
    t = OpTest()
    t.op_type = "pow"
    t.inputs = {"X": x, "FactorTensor": factor_tensor}
    t.attrs = {"factor": factor_attr}
    t.outputs = {"Out": np.power(x, float(factor_tensor.reshape(-1)[0]))}
    return t


def test_pow_reads_the_run_time_exponent_not_the_attribute():
    """fluid 1.8's pow: a FactorTensor wins over the factor attribute (through the Executor,
    whose lowered kernels must not fall back to the attribute either)."""
    x = OpTest.rand(3, 4, low=0.5, high=2.0, seed=3)
    t = _pow_with_tensor(x, np.array([3.0]), 1.0)
    t.check_infer()
    t.check_output(atol=1e-12, rtol=1e-12)
    out = get_op_def("pow").forward(x, np.array([[2.5]], np.float32), factor=7.0)["Out"]
    np.testing.assert_allclose(out, x ** 2.5, rtol=1e-12)


def test_pow_refuses_a_factor_tensor_of_several_elements():
    """fluid 1.8's PowKernel enforces ``factor.size() == 1`` ("The shape of factor(tensor) must
    be [1] rather than ..."); reading the first element of a longer tensor hid a wrong feed."""
    x = OpTest.rand(2, 2, low=0.5, high=2.0, seed=7)
    d = get_op_def("pow")
    for bad in (np.array([2.0, 3.0]), np.zeros((0,)), np.ones((2, 2))):
        with pytest.raises(ValueError, match=r"pow: the shape of factor\(tensor\) must be \[1\] "
                                             rf"rather than \{list(bad.shape)}"):
            d.forward(x, bad, factor=1.0)
        with pytest.raises(ValueError, match=r"must be \[1\] rather than"):
            d.backward(x, bad, np.ones_like(x), factor=1.0)


def test_pow_gradients_with_a_run_time_exponent_against_formulas_and_differences():
    x = OpTest.rand(2, 5, low=0.5, high=2.0, seed=4)
    f = np.array([2.5])
    d_out = np.random.default_rng(5).uniform(-1, 1, x.shape)
    got = get_op_def("pow").backward(x, f, d_out, factor=1.0)
    # d(x^f)/dx = f x^(f-1), d(x^f)/df = x^f ln x (PyTorch's pow backward agrees)
    np.testing.assert_allclose(got["X"], d_out * 2.5 * x ** 1.5, rtol=1e-12)
    assert got["FactorTensor"].shape == (1,) and got["FactorTensor"].dtype == np.float64
    np.testing.assert_allclose(got["FactorTensor"], [np.sum(d_out * x ** 2.5 * np.log(x))],
                               rtol=1e-12)
    # through append_backward and the Executor, both inputs, against central differences
    t = _pow_with_tensor(x, f, 1.0)
    t.check_grad(["X", "FactorTensor"], "Out")
    t.check_grad(["FactorTensor"], "Out", no_grad_set={"X"})


def test_pow_grad_of_x_alone_with_a_run_time_exponent():
    x = OpTest.rand(3, 3, low=0.5, high=2.0, seed=6)
    _pow_with_tensor(x, np.array([-1.5]), 2.0).check_grad(["X"], "Out")


def test_pow_second_order_needs_a_constant_exponent():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [2, 3], "float32")
        x.stop_gradient = False
        f = fluid.layers.fill_constant([1], "float32", 2.0)
        y = fluid.layers.pow(x, factor=f)
        gx, = fluid.gradients([fluid.layers.reduce_sum(y)], [x])
        with pytest.raises(ValueError, match=r"pow: a second-order gradient needs a constant "
                                             r"exponent; pass factor as a Python number \(not "
                                             r"a Variable\) to differentiate twice"):
            fluid.gradients([fluid.layers.reduce_sum(gx)], [x])
    # a constant exponent differentiates twice: d2/dx2 x^3 = 6x
    main2 = fluid.Program()
    with fluid.program_guard(main2, fluid.Program()):
        x = fluid.data("x", [2, 3], "float64")
        x.stop_gradient = False
        y = fluid.layers.pow(x, factor=3.0)
        gx, = fluid.gradients([fluid.layers.reduce_sum(y)], [x])
        ggx, = fluid.gradients([fluid.layers.reduce_sum(gx)], [x])
    xv = OpTest.rand(2, 3, seed=7)
    res, = fluid.Executor(fluid.CPUPlace()).run(main2, feed={"x": xv}, fetch_list=[ggx])
    np.testing.assert_allclose(res, 6 * xv, rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("factor,expected", [
    # fluid 1.8: static_cast<int>(factor) (truncation toward zero), std::pow, cast back
    (2.7, lambda x: x * x),
    (3.0, lambda x: x * x * x),
    (0.0, lambda x: np.ones_like(x)),
    (-1.5, lambda x: np.array([int(1 / v) for v in x.reshape(-1)]).reshape(x.shape)),
    (-2.0, lambda x: np.array([int(1 / (v * v)) for v in x.reshape(-1)]).reshape(x.shape)),
])
def test_integer_pow_is_fluids_truncating_kernel(dtype, factor, expected):
    x = np.array([[-3, -2, -1], [1, 2, 5]], dtype)
    out = get_op_def("pow").forward(x, factor=factor)["Out"]
    assert out.dtype == dtype
    np.testing.assert_array_equal(out, expected(x.astype(np.int64)))
    # the same through a program (the lowered kernel) and the layer
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        xv = fluid.data("x", [2, 3], np.dtype(dtype).name)
        y = fluid.layers.pow(xv, factor=factor)
    res, = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": x}, fetch_list=[y])
    assert res.dtype == dtype
    np.testing.assert_array_equal(res, out)


def test_integer_pow_with_a_run_time_exponent():
    x = np.array([2, 3, -4], np.int64)
    out = get_op_def("pow").forward(x, np.array([2.9], np.float32), factor=1.0)["Out"]
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out, [4, 9, 16])


def test_pow_without_a_factor_attribute_is_fluids_default_one():
    """PowOpMaker's default factor is 1.0: an op appended without it is the identity, and its
    gradient passes dOut through."""
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [2, 3], "float64")
        x.stop_gradient = False
        out = main.global_block().create_var(name="p", dtype="float64")
        main.global_block().append_op("pow", {"X": x}, {"Out": out})
        w = fluid.data("w", [2, 3], "float64")
        gx, = fluid.gradients([fluid.layers.reduce_sum(out * w)], [x])
    xv, wv = OpTest.rand(2, 3, seed=8), OpTest.rand(2, 3, seed=9)
    o, g = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": xv, "w": wv},
                                                fetch_list=[out, gx])
    np.testing.assert_array_equal(o, xv)
    np.testing.assert_allclose(g, wv, rtol=1e-15)


def test_abs_gradient_is_zero_at_zero():
    """fluid's AbsGradFunctor: dx = dout * sign(x), so 0 at x = 0 (not NaN)."""
    x = np.array([-2.0, 0.0, 3.0, -0.0])
    d = np.array([0.5, 7.0, -1.5, 2.0])
    g = get_op_def("abs").backward(x, d)["X"]
    np.testing.assert_array_equal(g, [-0.5, 0.0, -1.5, 0.0])


def test_exponent_gradient_keeps_the_exponents_dtype():
    """fluid's layer takes a float32 FactorTensor also for a float64 X: its gradient is a
    float32 [1] tensor (the sum is formed in X's dtype, float64)."""
    x = np.array([[0.5, 1.5], [2.0, 3.0]])
    f = np.array([1.5], np.float32)
    d_out = np.array([[1.0, -2.0], [0.5, 0.25]])
    got = get_op_def("pow").backward(x, f, d_out, factor=1.0)["FactorTensor"]
    assert got.dtype == np.float32 and got.shape == (1,)
    want = np.sum(d_out * x ** 1.5 * np.log(x))
    np.testing.assert_allclose(got, [want], rtol=1e-6)
