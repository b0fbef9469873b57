"""What ``fc_act_mkldnn_fuse_pass``, ``fc_elementwise_layernorm_fuse_pass`` and
``slice_pushdown_pass`` take and what they leave, one condition at a time, on hand-made blocks
(``tests/test_inference_kernels.py`` runs them on saved models against the unoptimised
program)."""
from __future__ import annotations

import numpy as np
import pytest

import fluidlite as fluid
import fluidlite.inference  # noqa: F401  (registers the inference ops)
from fluidlite.inference.passes import (PassContext, fc_act_mkldnn_fuse_pass,
                                        fc_elementwise_layernorm_fuse_pass,
                                        slice_pushdown_pass)


class _Block:
    """A program being written by hand: ``v(name, shape)`` declares, ``op(...)`` appends."""

    def __init__(self):
        self.main = fluid.Program()
        self.block = self.main.global_block()

    def v(self, name, shape, persistable=False, dtype="float32"):
        if name not in self.block.vars:
            self.block.create_var(name=name, shape=shape, dtype=dtype, persistable=persistable)
        return name

    def op(self, type, inputs, outputs, attrs=None):
        return self.block.append_op(type, {k: v if isinstance(v, list) else [v]
                                           for k, v in inputs.items()},
                                    {k: v if isinstance(v, list) else [v]
                                     for k, v in outputs.items()}, attrs or {})

    def run(self, pass_, protected=()):
        count = pass_(PassContext(self.main, None, None, set(protected)))
        return count, [o for o in self.block.ops]


# -- fc_elementwise_layernorm_fuse_pass --------------------------------------------------------
def _fc_add_ln(case):
    b = _Block()
    rank2 = case == "rank 2"
    lead = [-1] if rank2 else [-1, 5]
    if case == "norm over two equal axes":      # [-1, 4, 4]: a width of 4 x 4, W's 4 columns
        lead = [-1, 4]
    b.v("x", lead + [8])
    b.v("w", [12, 8] if case == "padded weights" else [8, 4],
        persistable=case != "W not persistable")

    b.v("b0", [4], persistable=True)
    b.v("res", lead + [4] if case != "broadcast residual" else [4])
    for n in ("s", "b1"):            # (a norm over two axes: of 5 x 4 elements)
        b.v(n, {"norm over two axes": [20], "norm over two equal axes": [16]}.get(case, [4]),
            persistable=not (case == "norm bias not persistable" and n == "b1"
                             or case == "scale not persistable" and n == "s"))
    for n in ("h", "sum", "y"):
        b.v(n, lead + [4])
    b.v("mean", [-1])
    b.v("var", [-1])
    fc_in = {"Input": "x", "W": "w"}
    if case != "no bias":
        fc_in["Bias"] = "b0"
    fc_attrs = {"in_num_col_dims": len(lead), "padding_weights": False,
                "activation_type": "relu" if case == "relu" else ""}
    if case == "padded weights":
        fc_attrs["padding_weights"] = True
    b.op("fc", fc_in, {"Out": "h"}, fc_attrs)
    if case == "fc output read twice":
        b.v("h2", lead + [4])
        b.op("relu", {"X": "h"}, {"Out": "h2"})
    add_in = {"X": "h", "Y": "res"} if case == "fc output as X" else \
        {"X": "h", "Y": "h"} if case == "fc output twice" else {"X": "res", "Y": "h"}
    b.op("elementwise_add", add_in, {"Out": "sum"}, {"axis": -1})
    if case == "sum read twice":
        b.v("s2", lead + [4])
        b.op("relu", {"X": "sum"}, {"Out": "s2"})
    if case == "not a norm":
        b.op("relu", {"X": "sum"}, {"Out": "y"})
        return b
    ln_in = {"X": "sum"}
    if case != "no scale":
        ln_in["Scale"] = "s"
    if case != "no norm bias":
        ln_in["Bias"] = "b1"
    eps = {"epsilon 0": 0.0, "epsilon 1e-3": 1e-3, "epsilon too large": 2e-3,
           "epsilon 1e-4": 1e-4}.get(case, 1e-5)
    axis = 1 if case in ("rank 2", "norm over two axes") else 2
    if case in ("norm over two axes", "norm over two equal axes"):
        axis = 1
    b.op("layer_norm", ln_in, {"Y": "y", "Mean": "mean", "Variance": "var"},
         {"epsilon": eps, "begin_norm_axis": axis})
    if case in ("mean read", "variance read"):
        b.v("stat", [-1])
        b.op("scale", {"X": "mean" if case == "mean read" else "var"}, {"Out": "stat"})
    return b


@pytest.mark.parametrize("case,fused", [
    ("plain", 1), ("fc output as X", 1), ("rank 2", 1), ("relu", 1), ("epsilon 0", 1),
    ("epsilon 1e-3", 1), ("epsilon 1e-4", 1), ("mean read", 1), ("variance read", 1),
    ("mean fetched", 1), ("padded weights", 0), ("W not persistable", 0), ("no bias", 0),
    ("fc output read twice", 0), ("fc output twice", 0), ("broadcast residual", 0),
    ("sum read twice", 0), ("not a norm", 0), ("no scale", 0),
    ("norm bias not persistable", 0), ("norm over two axes", 0), ("epsilon too large", 0),
    ("norm over two equal axes", 0), ("no norm bias", 0), ("scale not persistable", 0),
    ("fc output fetched", 0), ("sum fetched", 0)])
def test_fc_elementwise_layernorm_fuse_pass_cases(case, fused):
    b = _fc_add_ln(case)
    protected = {"x", "y", "res"} | {"mean fetched": {"mean"}, "fc output fetched": {"h"},
                                     "sum fetched": {"sum"}}.get(case, set())
    count, ops = b.run(fc_elementwise_layernorm_fuse_pass, protected)
    assert count == fused
    types = [o.type for o in ops]
    if not fused:
        assert "fused_fc_elementwise_layernorm" not in types
        return
    op = ops[0]
    assert op.type == "fused_fc_elementwise_layernorm" and types[1:] in ([], ["scale"])
    assert op.input("X") == ["x"] and op.input("W") == ["w"] and op.input("Bias0") == ["b0"]
    assert op.input("Y") == ["res"] and op.input("Scale") == ["s"] and op.input("Bias1") == ["b1"]
    assert op.output("Out") == ["y"]
    kept = {"mean read": "Mean", "mean fetched": "Mean", "variance read": "Variance"}.get(case)
    for slot, name in (("Mean", "mean"), ("Variance", "var")):
        want = [name] if slot == kept else []
        assert (op.output(slot) if slot in op.output_names else []) == want, slot
    assert op.attr("activation_type") == ("relu" if case == "relu" else "")
    assert op.attr("x_num_col_dims") == (1 if case == "rank 2" else 2)
    assert op.attr("begin_norm_axis") == (1 if case == "rank 2" else 2)
    assert op.attr("epsilon") == pytest.approx({"epsilon 0": 0.0, "epsilon 1e-3": 1e-3,
                                                "epsilon 1e-4": 1e-4}.get(case, 1e-5))


# -- fc_act_mkldnn_fuse_pass -------------------------------------------------------------------
@pytest.mark.parametrize("case,fused", [
    ("erf", 1), ("tanh", 1), ("relu fc", 0), ("fc output read twice", 0), ("not a gelu", 0),
    ("fetched", 0), ("float64 weights", 0)])
def test_fc_act_mkldnn_fuse_pass_cases(case, fused):
    b = _Block()
    b.v("x", [-1, 8])
    b.v("w", [8, 4], True, "float64" if case == "float64 weights" else "float32")
    b.v("bias", [4], True)
    b.v("h", [-1, 4])
    b.v("g", [-1, 4])
    b.op("fc", {"Input": "x", "W": "w", "Bias": "bias"}, {"Out": "h"},
         {"in_num_col_dims": 1, "activation_type": "relu" if case == "relu fc" else ""})
    if case == "fc output read twice":
        b.v("h2", [-1, 4])
        b.op("scale", {"X": "h"}, {"Out": "h2"})
    b.op("tanh" if case == "not a gelu" else "gelu", {"X": "h"}, {"Out": "g"},
         {} if case == "not a gelu" else {"approximate": case == "tanh"})
    count, ops = b.run(fc_act_mkldnn_fuse_pass, {"x", "g"} | ({"h"} if case == "fetched"
                                                               else set()))
    assert count == fused
    if fused:
        assert [o.type for o in ops] == ["fc"] and ops[0].output("Out") == ["g"]
        assert ops[0].attr("activation_type") == ("gelu_tanh" if case == "tanh"
                                                  else "gelu_erf")
        assert ops[0].input("Bias") == ["bias"] and ops[0].attr("in_num_col_dims") == 1
    else:
        assert "gelu" in [o.type for o in ops] or case == "not a gelu"


# -- slice_pushdown_pass -----------------------------------------------------------------------
def test_slice_pushdown_cuts_both_inputs_before_the_op():
    # two distinct inputs cut: both slices come before the op that reads them
    b = _Block()
    for n in ("a", "c", "s"):
        b.v(n, [-1, 6, 8])
    b.v("out", [-1, 2, 8])
    b.op("elementwise_add", {"X": "a", "Y": "c"}, {"Out": "s"}, {"axis": -1})
    b.op("slice", {"Input": "s"}, {"Out": "out"}, {"axes": [1], "starts": [1], "ends": [3]})
    count, ops = b.run(slice_pushdown_pass, {"a", "c", "out"})
    assert count == 1 and [o.type for o in ops] == ["slice", "slice", "elementwise_add"]
    assert [o.input("Input") for o in ops[:2]] == [["a"], ["c"]]
    assert ops[2].input("X") == ops[0].output("Out") and ops[2].input("Y") == ops[1].output("Out")
    assert ops[2].output("Out") == ["out"]
    for o in ops[:2]:
        assert (o.attr("axes"), o.attr("starts"), o.attr("ends")) == ([1], [1], [3])
        assert o.attr("decrease_axis") == [] and o.output("Out")[0].startswith("slice")
        assert b.block.var(o.output("Out")[0]).shape == (-1, 2, 8)
        assert b.block.var(o.output("Out")[0]).dtype == b.block.var("a").dtype


def _slices(case):
    b = _Block()
    b.v("x", [-1, 6, 8])
    b.v("r", [-1, 6, 8])
    b.op("relu", {"X": "x"}, {"Out": "r"})
    bounds = [([1], [0], [1]), {"other starts": ([1], [1], [1]), "other ends": ([1], [0], [2]),
                                "other axis": ([2], [0], [1])}.get(case, ([1], [0], [1]))]
    if case == "other starts":          # [0:2] and [1:2]: only the starts differ
        bounds = [([1], [0], [2]), ([1], [1], [2])]
    outs = []
    for i, (axes, starts, ends) in enumerate(bounds):
        dropped = case == "decrease_axis" and i == 0
        rows = ends[0] - starts[0]
        o = b.v(f"c{i}", [-1, 8] if dropped else [-1, rows, 8] if axes == [1] else [-1, 6, 1])
        attrs = {"axes": axes, "starts": starts, "ends": ends}
        if dropped:
            attrs["decrease_axis"] = [1]
        b.op("slice", {"Input": "r"}, {"Out": o}, attrs)
        outs.append(o)
    b.v("t", list(b.block.var(outs[1]).shape))
    b.op("scale", {"X": outs[1]}, {"Out": "t"})
    return b, outs


@pytest.mark.parametrize("case", ["same", "other starts", "other ends", "other axis",
                                  "decrease_axis", "duplicate fetched"])
def test_equal_slices_merge_and_others_do_not(case):
    b, outs = _slices(case)
    protected = {"x", outs[0], "t"} | ({outs[1]} if case == "duplicate fetched" else set())
    count, ops = b.run(slice_pushdown_pass, protected)
    types = [o.type for o in ops]
    if case == "same":          # merged, then the one slice moved above the relu
        assert count == 2 and types == ["slice", "relu", "scale"]
        assert ops[2].input("X") == [outs[0]] and ops[1].output("Out") == [outs[0]]
    else:
        assert count == 0 and types == ["relu", "slice", "slice", "scale"]


@pytest.mark.parametrize("case", ["plain", "persistable", "fetched", "written twice",
                                  "other output of the op read", "other output fetched",
                                  "no rule", "negative axis", "tensor bounds",
                                  "sequence output"])
def test_slice_pushdown_cases(case):
    b = _Block()
    b.v("x", [-1, 6, 8])
    b.v("r", [-1, 6, 8], persistable=case == "persistable")
    b.v("out", [-1, 1, 8])
    if case in ("other output of the op read", "other output fetched"):
        for n, s in (("s", [8]), ("bb", [8])):
            b.v(n, s, True)
        b.v("mean", [-1])
        b.v("var", [-1])
        b.v("m2", [-1])
        b.op("layer_norm", {"X": "x", "Scale": "s", "Bias": "bb"},
             {"Y": "r", "Mean": "mean", "Variance": "var"}, {"begin_norm_axis": 2})
        if case == "other output of the op read":
            b.op("scale", {"X": "mean"}, {"Out": "m2"})
    else:
        b.op("softmax" if case == "no rule" else "relu", {"X": "x"}, {"Out": "r"})
    if case == "written twice":
        b.op("relu", {"X": "r"}, {"Out": "r"})
    if case == "sequence output":
        b.block.vars["r"].lod_level = 1
    attrs = {"axes": [-2 if case == "negative axis" else 1], "starts": [0], "ends": [1]}
    ins = {"Input": "r"}
    if case == "tensor bounds":
        b.v("st", [1], dtype="int32")
        ins["StartsTensor"] = "st"
    b.op("slice", ins, {"Out": "out"}, attrs)
    protected = {"x", "out"} | {"fetched": {"r"}, "other output fetched": {"mean"}}.get(
        case, set())
    count, ops = b.run(slice_pushdown_pass, protected)
    moved = case in ("plain", "negative axis")
    assert count == int(moved)
    if moved:
        assert [o.type for o in ops] == ["slice", "relu"]
        assert ops[0].input("Input") == ["x"] and ops[0].attr("axes") == [1]
        assert ops[1].output("Out") == ["out"]
    else:
        assert ops[-1].type == "slice" and ops[-1].input("Input") == ["r"]


def test_slice_pushdown_runs_to_the_same_values():
    # the block above, run: the moved slice reads the input, the relu makes the kept rows
    b = _Block()
    b.v("x", [-1, 6, 8])
    b.v("r", [-1, 6, 8])
    b.v("out", [-1, 2, 8])
    b.op("relu", {"X": "x"}, {"Out": "r"})
    b.op("slice", {"Input": "r"}, {"Out": "out"}, {"axes": [1], "starts": [-3], "ends": [-1]})
    x = np.random.default_rng(0).standard_normal((2, 6, 8)).astype("float32")
    exe = fluid.Executor(fluid.CPUPlace())
    want = exe.run(b.main, feed={"x": x}, fetch_list=["out"])[0]
    assert b.run(slice_pushdown_pass, {"x", "out"})[0] == 1
    got = exe.run(b.main, feed={"x": x}, fetch_list=["out"])[0]
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, np.maximum(x[:, 3:5], 0))


def test_a_slice_of_another_output_of_the_op_stays():
    # a slice of the norm's Mean (not its rows' output, Y) is not the norm's to cut
    b = _Block()
    b.v("x", [-1, 6, 8])
    for n in ("s", "bb"):
        b.v(n, [8], True)
    b.v("y", [-1, 6, 8])
    b.v("mean", [-1])
    b.v("var", [-1])
    b.v("m1", [1])
    b.op("layer_norm", {"X": "x", "Scale": "s", "Bias": "bb"},
         {"Y": "y", "Mean": "mean", "Variance": "var"}, {"begin_norm_axis": 2})
    b.op("slice", {"Input": "mean"}, {"Out": "m1"}, {"axes": [0], "starts": [0], "ends": [1]})
    count, ops = b.run(slice_pushdown_pass, {"x", "y", "m1"})
    assert count == 0 and [o.type for o in ops] == ["layer_norm", "slice"]


# -- conv2d_fusion_layout_transfer_pass: which ops may go to NHWC (``_nhwc_kind``) ---------------
def _conv_case(case):
    b = _Block()
    dtype = "float16" if case == "float16" else "float32"
    b.v("x", [-1, 8, 8, 4] if case == "NHWC" else
        [-1, 4, -1, 8] if case == "free height" else [-1, 4, 8, 8], dtype=dtype)
    one = case in ("1x1", "1x1 AnyLayout")
    b.v("w", [6, 4, 1, 1] if one else [4, 1, 3, 3], persistable=case != "W not persistable",
        dtype=dtype)
    b.v("y", [-1, 8, 8, 4] if case == "NHWC" else [-1, 6 if one else 4, 8, 8], dtype=dtype)
    if case == "LoD output":
        b.block.var("y").lod_level = 1
    inputs = {"Input": "x", "Filter": "w"}
    if case == "Winograd tiles":
        inputs["FilterTiles"] = b.v("t", [16, 4, 1], persistable=True)
    if case == "banded":
        inputs["FilterBand"] = b.v("band", [4, 30, 8], persistable=True)
    if case.startswith("residual"):
        inputs["ResidualData"] = b.v("r", [-1, 4, 8, 8])
    attrs = {"groups": 1 if one else 4, "paddings": [0, 0] if one else [1, 1],
             "data_format": {"NHWC": "NHWC", "1x1 AnyLayout": "AnyLayout"}.get(case, "NCHW")}
    b.op("relu" if case == "not a convolution" else "conv2d_fusion",
         {"X": "x"} if case == "not a convolution" else inputs,
         {"Out": "y"} if case == "not a convolution" else {"Output": "y"},
         {} if case == "not a convolution" else attrs)
    if case == "written twice":
        b.op("relu", {"X": "x"}, {"Out": "y"})
    return b


@pytest.mark.parametrize("case,kind", [
    ("depthwise", "depthwise"), ("1x1", "pointwise"), ("1x1 AnyLayout", "pointwise"),
    ("residual", "depthwise"), ("NHWC", ""), ("Winograd tiles", ""), ("banded", ""),
    ("W not persistable", ""),
    ("free height", ""), ("LoD output", ""), ("written twice", ""),
    ("float16", ""), ("not a convolution", ""), ("input in a sub-block", ""),
    ("output in a sub-block", ""), ("residual in a sub-block", ""),
    ("residual undeclared", "")])
def test_which_convolutions_may_go_channels_last(case, kind):
    from fluidlite.core import rewrite
    from fluidlite.inference.passes import _nhwc_kind
    b = _conv_case(case)
    skip = {"input in a sub-block": {"x"}, "output in a sub-block": {"y"},
            "residual in a sub-block": {"r"}}.get(case, set())
    if case == "residual undeclared":
        b.block.vars.pop("r")
    op = b.block.ops[0]
    assert _nhwc_kind(rewrite.Uses(b.block), b.block, op, skip) == kind
