"""``fluidlite/inference/rows.py``: which inputs of an op hold its output rows along an axis
(what ``slice_pushdown_pass`` cuts), each rule checked against running the op on cut inputs,
and every case a rule must refuse."""
from __future__ import annotations

import numpy as np
import pytest

import fluidlite as fluid
import fluidlite.inference  # noqa: F401  (registers the inference ops)
from fluidlite.core.registry import get_op_def
from fluidlite.inference.rows import ROW_RULES, row_inputs, row_output


def _op(type, inputs, attrs, shapes, out_shape, out_slot="Out", extra_outs=()):
    """One op in a fresh block: ``inputs`` {slot: name}, ``shapes`` {name: shape}."""
    block = fluid.Program().global_block()
    for n, shape in shapes.items():
        block.create_var(name=n, shape=shape, dtype="float32")
    outs = {out_slot: [block.create_var(name="out", shape=out_shape, dtype="float32").name]}
    for slot in extra_outs:
        outs[slot] = [block.create_var(name=slot.lower(), dtype="float32").name]
    op = block.append_op(type, {s: [n] for s, n in inputs.items()}, outs, attrs)
    return op, block


def _check_cut(op, block, axis, arrays, start=1, stop=2):
    """The op on inputs cut as ``row_inputs`` says equals its output cut along ``axis``."""
    cut = row_inputs(op, block, axis)
    d = get_op_def(op.type)
    attrs = {k: v for k, v in op.attrs.items() if k in d.attr_defaults}
    slots = [s.name for s in d.in_slots]
    whole = d.forward(*[arrays.get(s) for s in slots], **attrs)[row_output(op)]

    def part(a, ax):
        return a[(slice(None),) * ax + (slice(start, stop),)]
    parts = d.forward(*[part(arrays[s], cut[s]) if s in cut else arrays.get(s)
                        for s in slots], **attrs)[row_output(op)]
    np.testing.assert_allclose(parts, part(whole, axis), rtol=1e-6, atol=1e-6)
    return cut


rng = np.random.default_rng(0)


def _r(*shape):
    return rng.standard_normal(shape).astype("float32")


def test_row_inputs_of_each_rule_cut_the_rows_the_op_reads():
    x3 = _r(2, 5, 8)
    op, b = _op("fc", {"Input": "x", "W": "w", "Bias": "b"}, {"in_num_col_dims": 2},
                {"x": (2, 5, 8), "w": (8, 4), "b": (4,)}, (2, 5, 4))
    assert _check_cut(op, b, 1, {"Input": x3, "W": _r(8, 4), "Bias": _r(4)}) == {"Input": 1}
    assert row_inputs(op, b, 2) is None                     # W's columns
    op, b = _op("layer_norm", {"X": "x", "Scale": "s", "Bias": "b"}, {"begin_norm_axis": 2},
                {"x": (2, 5, 8), "s": (8,), "b": (8,)}, (2, 5, 8), "Y", ("Mean", "Variance"))
    assert _check_cut(op, b, 1, {"X": x3, "Scale": _r(8), "Bias": _r(8)}) == {"X": 1}
    assert row_inputs(op, b, 2) is None                     # a normalised axis
    op, b = _op("gelu", {"X": "x"}, {}, {"x": (2, 5, 8)}, (2, 5, 8))
    assert _check_cut(op, b, 2, {"X": x3}) == {"X": 2}
    op, b = _op("reshape2", {"X": "x"}, {"shape": [0, 0, 2, 4]}, {"x": (2, 5, 8)},
                (2, 5, 2, 4), extra_outs=("XShape",))
    assert _check_cut(op, b, 1, {"X": x3}) == {"X": 1}
    assert row_inputs(op, b, 2) is None                     # a regrouped axis
    op, b = _op("reshape2", {"X": "x"}, {"shape": [2, 0, 8]}, {"x": (2, 5, 8)}, (2, 5, 8),
                extra_outs=("XShape",))
    assert row_inputs(op, b, 1) is None                     # a dim before it not copied
    op, b = _op("transpose2", {"X": "x"}, {"axis": [0, 2, 1]}, {"x": (2, 5, 8)}, (2, 8, 5),
                extra_outs=("XShape",))
    assert _check_cut(op, b, 2, {"X": x3}) == {"X": 1}


@pytest.mark.parametrize("y_shape,axis_attr,want", [
    ((2, 5, 8), -1, {"X": 1, "Y": 1}),       # same shape: both cut
    ((1, 5, 8), -1, {"X": 1, "Y": 1}),
    ((2, 1, 8), -1, {"X": 1}),               # Y broadcasts over the axis: read whole
    ((8,), -1, {"X": 1}),                    # Y does not cover the axis
    ((5,), 1, {"X": 1, "Y": 0}),             # Y lined up from axis 1
    ((-1, 8), -1, None),                     # a free size might broadcast: undecided
])
def test_elementwise_operands_are_cut_where_they_hold_the_axis(y_shape, axis_attr, want):
    op, b = _op("elementwise_add", {"X": "x", "Y": "y"}, {"axis": axis_attr},
                {"x": (2, 5, 8), "y": y_shape}, (2, 5, 8))
    assert row_inputs(op, b, 1) == want
    if want is not None:
        y = _r(*[5 if d < 0 else d for d in y_shape])
        _check_cut(op, b, 1, {"X": _r(2, 5, 8), "Y": y})


def test_the_output_axis_size_decides_and_a_free_one_refuses():
    # X broadcast over the axis (Out takes Y's size): X read whole, Y cut
    op, b = _op("elementwise_mul", {"X": "x", "Y": "y"}, {"axis": -1},
                {"x": (2, 1, 8), "y": (2, 5, 8)}, (2, 5, 8))
    assert row_inputs(op, b, 1) == {"Y": 1}
    op, b = _op("elementwise_add", {"X": "x", "Y": "y"}, {"axis": -1},
                {"x": (2, -1, 8), "y": (2, -1, 8)}, (2, -1, 8))
    assert row_inputs(op, b, 1) is None


def test_attention_cuts_its_queries_only_under_a_broadcast_mask():
    shapes = {"q": (2, 3, 5, 4), "k": (2, 3, 7, 4), "v": (2, 3, 7, 6), "m": (2, 1, 1, 7)}
    arrays = {"Q": _r(2, 3, 5, 4), "K": _r(2, 3, 7, 4), "V": _r(2, 3, 7, 6),
              "Mask": _r(2, 1, 1, 7)}
    op, b = _op("scaled_dot_product_attention", {"Q": "q", "K": "k", "V": "v", "Mask": "m"},
                {"alpha": 0.5}, shapes, (2, 3, 5, 6))
    assert _check_cut(op, b, 2, arrays) == {"Q": 2}
    assert row_inputs(op, b, 1) is None                     # the heads: not taken
    op, b = _op("scaled_dot_product_attention", {"Q": "q", "K": "k", "V": "v", "Mask": "m"},
                {"alpha": 0.5}, dict(shapes, m=(2, 1, 5, 7)), (2, 3, 5, 6))
    assert row_inputs(op, b, 2) is None                     # a mask per query


def test_fused_fc_layernorm_cuts_x_and_y_before_both_its_axes():
    shapes = {"x": (2, 5, 8), "w": (8, 4), "b0": (4,), "y": (2, 5, 4), "s": (4,), "b1": (4,)}
    op, b = _op("fused_fc_elementwise_layernorm",
                {"X": "x", "W": "w", "Bias0": "b0", "Y": "y", "Scale": "s", "Bias1": "b1"},
                {"x_num_col_dims": 2, "begin_norm_axis": 2}, shapes, (2, 5, 4))
    arrays = {"X": _r(2, 5, 8), "W": _r(8, 4), "Bias0": _r(4), "Y": _r(2, 5, 4),
              "Scale": _r(4), "Bias1": _r(4)}
    assert _check_cut(op, b, 1, arrays) == {"X": 1, "Y": 1}
    assert row_inputs(op, b, 2) is None


def test_ops_without_a_rule_are_not_row_wise():
    op, b = _op("softmax", {"X": "x"}, {"axis": 1}, {"x": (2, 5, 8)}, (2, 5, 8))
    assert "softmax" not in ROW_RULES and row_inputs(op, b, 1) is None


def test_boundaries_each_rule_refuses():
    shapes = {"x": (2, 5, 8), "w": (8, 4), "b0": (4,), "y": (2, 5, 4), "s": (20,), "b1": (20,)}
    ins = {"X": "x", "W": "w", "Bias0": "b0", "Y": "y", "Scale": "s", "Bias1": "b1"}
    op, b = _op("fused_fc_elementwise_layernorm", ins,
                {"x_num_col_dims": 2, "begin_norm_axis": 1}, shapes, (2, 5, 4))
    assert row_inputs(op, b, 0) == {"X": 0, "Y": 0}
    assert row_inputs(op, b, 1) is None                     # normalised from axis 1
    op, b = _op("fused_fc_elementwise_layernorm", ins,
                {"x_num_col_dims": 1, "begin_norm_axis": 1},
                dict(shapes, x=(2, 40), w=(40, 4), s=(4,), b1=(4,), y=(2, 4)), (2, 4))
    assert row_inputs(op, b, 0) == {"X": 0, "Y": 0} and row_inputs(op, b, 1) is None
    op, b = _op("reshape2", {"X": "x", "Shape": "sh"}, {"shape": [0, 0, 2, 4]},
                {"x": (2, 5, 8), "sh": (4,)}, (2, 5, 2, 4), extra_outs=("XShape",))
    assert row_inputs(op, b, 1) is None                     # a run-time shape
    op, b = _op("reshape2", {"X": "x", "ShapeTensor": "st"}, {"shape": [0, 0, 2, 4]},
                {"x": (2, 5, 8), "st": (1,)}, (2, 5, 2, 4), extra_outs=("XShape",))
    assert row_inputs(op, b, 1) is None
    op, b = _op("reshape2", {"X": "x"}, {"shape": [0, 0, -1]}, {"x": (2, 5, 8)}, (2, 5, 8),
                extra_outs=("XShape",))
    assert row_inputs(op, b, 1) == {"X": 1} and row_inputs(op, b, 2) is None
    op, b = _op("reshape2", {"X": "x"}, {"shape": [0, 40]}, {"x": (2, 5, 8)}, (2, 40),
                extra_outs=("XShape",))
    assert row_inputs(op, b, 0) == {"X": 0} and row_inputs(op, b, 1) is None


@pytest.mark.parametrize("mask,want", [((5, 7), None), ((1, 7), {"Q": 2}), ((7,), {"Q": 2}),
                                       ((3, 5, 7), None), ((3, 1, 7), {"Q": 2})])
def test_attention_masks_of_lower_rank_line_up_from_the_right(mask, want):
    shapes = {"q": (2, 3, 5, 4), "k": (2, 3, 7, 4), "v": (2, 3, 7, 6), "m": mask}
    op, b = _op("scaled_dot_product_attention", {"Q": "q", "K": "k", "V": "v", "Mask": "m"},
                {"alpha": 0.5}, shapes, (2, 3, 5, 6))
    assert row_inputs(op, b, 2) == want


@pytest.mark.parametrize("x,y,attr,out,want", [
    ((2, 1, 8), (2, 1, 8), -1, (2, 1, 8), {"X": 1, "Y": 1}),    # an axis of size 1: cut
    ((2, 5, 8), (2, 5), 0, (2, 5, 8), {"X": 1, "Y": 1}),         # Y from axis 0
    ((2, 5, 8), (5, 8), 1, (2, 5, 8), {"X": 1, "Y": 0}),
    ((2, -1, 8), (8,), -1, (2, -1, 8), None),                    # Out's size unknown
])
def test_elementwise_alignment_and_sizes(x, y, attr, out, want):
    op, b = _op("elementwise_add", {"X": "x", "Y": "y"}, {"axis": attr}, {"x": x, "y": y}, out)
    assert row_inputs(op, b, 1) == want
