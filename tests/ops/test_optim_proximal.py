"""proximal_gd and proximal_adagrad (fluidlite/ops/optim_proximal.py) against NumPy
references of fluid's kernels (Paddle 2.6's proximal_gd gives the same float32 values)."""
import numpy as np
import pytest

from fluidlite.testing import OpTest


def _prox(prox, lr, l1, l2):
    if l1 > 0:
        return np.sign(prox) * np.maximum(np.abs(prox) - lr * l1, 0) / (1 + lr * l2)
    return prox / (1 + lr * l2)


@pytest.mark.parametrize("l1,l2", [(0.0, 0.0), (0.05, 0.0), (0.1, 0.3), (0.0, 0.2)])
def test_proximal_gd(l1, l2):
    p, g = OpTest.rand(3, 4, seed=1), OpTest.rand(3, 4, seed=2)
    p[0, 0], g[0, 0] = 0.001, 0.0           # |prox| below lr * l1
    lr = np.array([0.1])
    t = OpTest()
    t.op_type, t.attrs = "proximal_gd", {"l1": l1, "l2": l2}
    t.inputs = {"Param": p, "Grad": g, "LearningRate": lr}
    t.outputs = {"ParamOut": _prox(p - 0.1 * g, 0.1, l1, l2)}
    t.check_infer()
    t.check_output(atol=0, rtol=1e-12)
    if l1 > 0:              # the l1 step sets the small entries to exactly 0
        assert (t.outputs["ParamOut"] == 0).any()


@pytest.mark.parametrize("l1,l2", [(0.0, 0.0), (0.05, 0.1)])
def test_proximal_adagrad(l1, l2):
    p, g = OpTest.rand(3, 4, seed=1), OpTest.rand(3, 4, seed=2)
    m = OpTest.rand(3, 4, low=0.1, high=1.0, seed=3)
    lr = np.array([0.1])
    m_out = m + g * g
    t = OpTest()
    t.op_type, t.attrs = "proximal_adagrad", {"l1": l1, "l2": l2}
    t.inputs = {"Param": p, "Moment": m, "Grad": g, "LearningRate": lr}
    t.outputs = {"ParamOut": _prox(p - g * 0.1 / np.sqrt(m_out), 0.1, l1, l2),
                 "MomentOut": m_out}
    t.check_infer()
    t.check_output(atol=0, rtol=1e-12)


def test_proximal_keeps_float32():
    from fluidlite.core.registry import get_op_def
    p = np.ones((2, 2), np.float32)
    out = get_op_def("proximal_gd").forward(p, p, np.array([0.1], np.float32), l1=0.01,
                                            l2=0.1)["ParamOut"]
    assert out.dtype == np.float32
