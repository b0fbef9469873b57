"""Tests written from the mutation run of ``fluidlite/ops/fused_elemwise.py`` (issue 28, round
11): fused_elemwise_activation's functor_list check, fluid's default attributes (scale 0,
save_intermediate_out false), shape inference (dtypes and LoD levels of Out and
IntermediateOut, either operand the larger one), the dtype check, and the gradients with an
IntermediateOut@GRAD (against central differences of sum(dOut * Out + dInter * Inter)).

References: fluid 1.8's fused_elemwise_activation_op.{cc,h} (the functor pairs it accepts,
IntermediateOut = the inner function's value, its OpMaker defaults scale 0 and
save_intermediate_out false) and central differences in float64."""
import numpy as np
import pytest

from fluidlite.core.dtypes import VarType
from fluidlite.core.registry import VarSpec, get_op_def

OP = get_op_def("fused_elemwise_activation")


def test_functor_list_check():
    for fl in (["relu", "tanh"], ["elementwise_add", "elementwise_mul"], ["relu"],
               ["elementwise_sub", "relu"]):
        with pytest.raises(ValueError, match=r"^fused_elemwise_activation: functor_list must be "
                                             r"\[unary, binary\] or \[binary, unary\]"):
            OP.infer(VarSpec((2, 3), "float32"), VarSpec((2, 3), "float32"), functor_list=fl)


def test_defaults():
    x, y = np.ones((2, 3)), np.full((2, 3), 2.0)
    got = OP.forward(x, y, functor_list=["scale", "elementwise_add"])
    assert list(got) == ["Out"] and (got["Out"] == 0).all()          # scale 0
    spec = OP.infer(VarSpec((2, 3), "float64"), VarSpec((2, 3), "float64"),
                    functor_list=["scale", "elementwise_add"])
    assert list(spec) == ["Out"]


def test_infer_dtypes_and_lod():
    x1, y0 = VarSpec((4, 3), "float64", 1), VarSpec((4, 3), "float64", 0)
    spec = OP.infer(x1, y0, functor_list=["relu", "elementwise_add"],
                    save_intermediate_out=True)
    assert (spec["Out"].shape, spec["Out"].dtype, spec["Out"].lod_level) == \
        ((4, 3), VarType.FP64, 1)
    assert (spec["IntermediateOut"].shape, spec["IntermediateOut"].dtype,
            spec["IntermediateOut"].lod_level) == ((4, 3), VarType.FP64, 1)
    spec = OP.infer(x1, VarSpec((3,), "float64", 2), functor_list=["elementwise_mul", "tanh"],
                    save_intermediate_out=True)
    assert spec["Out"].lod_level == 1
    assert (spec["IntermediateOut"].shape, spec["IntermediateOut"].dtype,
            spec["IntermediateOut"].lod_level) == ((3,), VarType.FP64, 2)
    spec = OP.infer(VarSpec((3,), "float32", 0), VarSpec((4, 3), "float32", 1),
                    functor_list=["relu", "elementwise_add"])
    assert spec["Out"].shape == (4, 3) and spec["Out"].lod_level == 1
    assert spec["Out"].dtype == VarType.FP32
    with pytest.raises(ValueError, match=r"^fused_elemwise_activation: X and Y must have the "
                                         r"same dtype, got "):
        OP.infer(VarSpec((4, 3), "float32"), y0, functor_list=["relu", "elementwise_add"])


@pytest.mark.parametrize("fl", [["tanh", "elementwise_mul"], ["elementwise_add", "sigmoid"],
                                ["scale", "elementwise_mul"]])
def test_grad_with_intermediate_out_grad(fl):
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    attrs = dict(functor_list=fl, scale=0.7, save_intermediate_out=True)
    d_out, d_inter = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))

    def loss(a, b):
        r = OP.forward(a, b, **attrs)
        return float((r["Out"] * d_out).sum() + (r["IntermediateOut"] * d_inter).sum())
    g = OP.backward(x, y, d_out, d_inter, **attrs)
    eps = 1e-6
    for name, arr in (("X", x), ("Y", y)):
        num = np.zeros_like(arr)
        for i in np.ndindex(arr.shape):
            hi, lo = arr.copy(), arr.copy()
            hi[i] += eps
            lo[i] -= eps
            num[i] = ((loss(hi, y) - loss(lo, y)) if name == "X" else
                      (loss(x, hi) - loss(x, lo))) / (2 * eps)
        np.testing.assert_allclose(g[name], num, rtol=1e-6, atol=1e-8, err_msg=name)


def test_intermediate_out_dtype_float32():
    x = VarSpec((4, 3), "float32")
    for fl in (["relu", "elementwise_add"], ["elementwise_mul", "tanh"]):
        spec = OP.infer(x, x, functor_list=fl, save_intermediate_out=True)
        assert spec["IntermediateOut"].dtype == VarType.FP32
        assert spec["Out"].dtype == VarType.FP32
