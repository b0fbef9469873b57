"""Mutation-round tests for fluidlite/ops/tdm.py (tdm_child, tdm_sampler): their inference
(shapes [X..., child_nums] and [N, sum_l (neg_l + output_positive)] of ``dtype``, as fluid's
tdm_child_op.cc / tdm_sampler_op.cc InferShape) and the ops' checks and messages; tdm_child's
values on a hand-built tree.
"""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core.registry import get_op_def
from tests.test_mutants_optim_extra import _prog as _one_op

VT = fluid.core.VarDesc.VarType


def _prog(op_type, ins, outs, attrs):
    """One ``op_type`` op on ``fluid.data`` inputs (tests/test_mutants_optim_extra.py's)."""
    return _one_op(op_type, ins, attrs, outs)


SAMPLER_IN = {"X": ([4, 1], "int64"), "Travel": ([10, 2], "int64"), "Layer": ([6, 1], "int64")}


@pytest.mark.parametrize("positive, width", [(True, 5), (False, 3)])
def test_sampler_inference(positive, width):
    out = _prog("tdm_sampler", SAMPLER_IN, ["Out", "Labels", "Mask"],
                {"neg_samples_num_list": [1, 2], "layer_offset_lod": [0, 2, 6],
                 "output_positive": positive, "dtype": int(VT.INT64)})
    for s in ("Out", "Labels", "Mask"):
        assert tuple(out[s].shape) == (4, width) and out[s].dtype == VT.INT64


@pytest.mark.parametrize("ins, attrs, msg", [
    ({}, {"neg_samples_num_list": [1, 2], "layer_offset_lod": [0, 2]},
     r"layer_offset_lod must hold one offset more than neg_samples_num_list has layers \(2\), "
     r"got \[0, 2\]"),
    ({}, {"neg_samples_num_list": [2, 2], "layer_offset_lod": [0, 2, 6]},
     "layer 0 has 2 nodes, so at most 1 negatives can be drawn, got 2"),
    ({}, {"neg_samples_num_list": [-1, 2], "layer_offset_lod": [0, 2, 6]},
     "layer 0 has 2 nodes, so at most 1 negatives can be drawn, got -1"),
    ({"X": ([4, 2], "int64")}, {"neg_samples_num_list": [1, 2], "layer_offset_lod": [0, 2, 6]},
     r"X must be \[N, 1\] \(one item id per row\), got \[4, 2\]"),
    ({"X": ([4], "int64")}, {"neg_samples_num_list": [1, 2], "layer_offset_lod": [0, 2, 6]},
     r"X must be \[N, 1\] \(one item id per row\), got \[4\]"),
    ({}, {"neg_samples_num_list": [1, 2], "layer_offset_lod": [0, 2, 6], "dtype": 5},
     r"dtype must be int32 \(2\) or int64 \(3\), got 5"),
])
def test_sampler_inference_errors(ins, attrs, msg):
    full = dict(SAMPLER_IN)
    full.update(ins)
    with pytest.raises(ValueError, match="tdm_sampler: " + msg):
        _prog("tdm_sampler", full, ["Out", "Labels", "Mask"], attrs)


def test_sampler_id_out_of_range():
    with pytest.raises(ValueError, match=r"^tdm_sampler: the ids of X must lie in \[0, 3\) "
                                         r"\(Travel's rows\)$"):
        get_op_def("tdm_sampler").forward(np.array([[3]]), np.ones((3, 1), "int64"),
                                          np.ones((2, 1), "int64"),
                                          rng=np.random.default_rng(0),
                                          neg_samples_num_list=[1], layer_offset_lod=[0, 2])


# node: (item_id, layer_id, ancestor_id, child1, child2); node 0 is padding
TREE = np.array([[0, 0, 0, 0, 0],
                 [0, 1, 0, 2, 3],      # node 1: children 2, 3
                 [7, 2, 1, 0, 0],      # node 2: a leaf (item 7)
                 [0, 2, 1, 4, 0],      # node 3: one child, node 4
                 [9, 3, 3, 0, 0]], "int64")


def test_child_values_and_inference():
    got = get_op_def("tdm_child").forward(np.array([[1], [3], [2], [0]]), TREE, child_nums=2,
                                          dtype=int(VT.INT64))
    assert got["Child"].tolist() == [[[2, 3]], [[4, 0]], [[0, 0]], [[0, 0]]]
    assert got["LeafMask"].tolist() == [[[1, 0]], [[1, 0]], [[0, 0]], [[0, 0]]]
    assert got["Child"].dtype == got["LeafMask"].dtype == np.int64
    out = _prog("tdm_child", {"X": ([4, 1], "int64"), "TreeInfo": ([5, 5], "int64")},
                ["Child", "LeafMask"], {"child_nums": 2})
    for s in ("Child", "LeafMask"):
        assert tuple(out[s].shape) == (4, 1, 2) and out[s].dtype == VT.INT32


@pytest.mark.parametrize("child_nums, tree, msg", [
    (0, [5, 5], "child_nums must be > 0, got 0"),
    (2, [5], r"TreeInfo must be 2-D \[node_nums, 3 \+ child_nums\], got \[5\]"),
])
def test_child_inference_errors(child_nums, tree, msg):
    with pytest.raises(ValueError, match="tdm_child: " + msg):
        _prog("tdm_child", {"X": ([4, 1], "int64"), "TreeInfo": (tree, "int64")},
              ["Child", "LeafMask"], {"child_nums": child_nums})


def test_child_forward_errors():
    d = get_op_def("tdm_child")
    for bad in (5, -1):
        with pytest.raises(ValueError, match=rf"^tdm_child: the ids of X must lie in \[0, 5\) "
                                             rf"\(TreeInfo's rows\), got {bad}$"):
            d.forward(np.array([[1], [bad]]), TREE, child_nums=2)
    with pytest.raises(ValueError, match=r"^tdm_child: TreeInfo needs 3 \+ child_nums = 6 "
                                         r"columns, got 5$"):
        d.forward(np.array([[1]]), TREE, child_nums=3)
