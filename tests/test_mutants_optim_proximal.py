"""Tests written from the mutation run of ``fluidlite/ops/optim_proximal.py`` (issue 28, round
11): proximal_gd / proximal_adagrad with fluid's default l1 = l2 = 0, float32 updates computed
in float32 with a float64 LearningRate (exactly as a float32 loop), and the shape checks with
their messages.

References: fluid 1.8's proximal_gd_op.{cc,h} and proximal_adagrad_op.{cc,h} (prox = Param -
lr * Grad [/ sqrt(Moment + Grad^2)]; ParamOut = sign(prox) max(|prox| - lr l1, 0) / (1 + lr l2)
when l1 > 0, else prox / (1 + lr l2); all in the parameter's type T; l1, l2 default 0;
InferShape: Grad (and Moment) of Param's shape, LearningRate of one element), written below as
float32 NumPy arithmetic."""
import numpy as np
import pytest

from fluidlite.core.registry import VarSpec, get_op_def

GD, ADA = get_op_def("proximal_gd"), get_op_def("proximal_adagrad")
F = np.float32


def data(seed=0, n=2000):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(n).astype(F), rng.standard_normal(n).astype(F),
            rng.uniform(0.1, 2, n).astype(F))


def prox_f32(prox, lr, l1, l2):
    lr = F(lr)
    if l1 > 0:
        return np.sign(prox) * np.maximum(np.abs(prox) - lr * F(l1), F(0)) / (F(1) + lr * F(l2))
    return prox / (F(1) + lr * F(l2))


@pytest.mark.parametrize("l1,l2", [(None, None), (0.0, 0.3), (0.05, 0.3)])
def test_proximal_gd_in_float32(l1, l2):
    p, g, _ = data()
    lr = np.array([0.1], np.float64)
    kw = {} if l1 is None else {"l1": l1, "l2": l2}
    out = GD.forward(p, g, lr, **kw)["ParamOut"]
    assert out.dtype == F
    want = prox_f32(p - F(0.1) * g, 0.1, l1 or 0.0, l2 or 0.0)
    np.testing.assert_array_equal(out, want)
    if l1 is None:                              # fluid's defaults: plain gradient descent
        np.testing.assert_array_equal(out, p - F(0.1) * g)


@pytest.mark.parametrize("l1,l2", [(None, None), (0.0, 0.3), (0.05, 0.3)])
def test_proximal_adagrad_in_float32(l1, l2):
    p, g, m = data(1)
    lr = np.array([0.1], np.float64)
    kw = {} if l1 is None else {"l1": l1, "l2": l2}
    got = ADA.forward(p, m, g, lr, **kw)
    m2 = m + g * g
    assert got["ParamOut"].dtype == F and got["MomentOut"].dtype == F
    np.testing.assert_array_equal(got["MomentOut"], m2)
    want = prox_f32(p - g * F(0.1) / np.sqrt(m2), 0.1, l1 or 0.0, l2 or 0.0)
    np.testing.assert_array_equal(got["ParamOut"], want)


def test_shape_checks():
    p, s = VarSpec((3, 4), "float32"), VarSpec((1,), "float32")
    bad = VarSpec((4, 3), "float32")
    GD.infer(p, p, s)
    assert ADA.infer(p, p, p, s) == {"ParamOut": p, "MomentOut": p}
    with pytest.raises(ValueError, match=r"^proximal_gd: Grad shape \[4, 3\] must equal Param "
                                         r"shape \[3, 4\]$"):
        GD.infer(p, bad, s)
    for args, slot in (((p, p, bad, s), "Grad"), ((p, bad, p, s), "Moment")):
        with pytest.raises(ValueError, match=rf"^proximal_adagrad: {slot} shape \[4, 3\] must "
                                             rf"equal Param shape \[3, 4\]$"):
            ADA.infer(*args)
    for op, args in ((GD, (p, p)), (ADA, (p, p, p))):
        with pytest.raises(ValueError, match=rf"^{op.type}: LearningRate must hold exactly one "
                                             rf"element \(shape \[1\]\), but its shape is "
                                             rf"\[2\]$"):
            op.infer(*args, VarSpec((2,), "float32"))
