"""fluid 1.8's tree-based deep model ops (ops/tdm.py): ``tdm_child`` against the tree table
read by hand, ``tdm_sampler``'s layer-by-layer positives, distinct negatives, labels, masks
and padding, and their argument errors. Neither op has a gradient in fluid."""
import numpy as np
import pytest

from fluidlite.core.dtypes import VarType
from tests.ops.test_fusion_ops import run_multi as run

# node: (item_id, layer_id, ancestor_id, child_0, child_1); nodes 3..6 are leaves (items)
TREE = np.array([[0, 0, 0, 1, 2], [0, 1, 0, 3, 4], [0, 1, 0, 5, 6], [7, 2, 1, 0, 0],
                 [8, 2, 1, 0, 0], [9, 2, 2, 0, 0], [0, 2, 2, 0, 0]], np.int64)


def test_tdm_child():
    x = np.array([[0, 1], [2, 3]], np.int32)
    child, mask = run("tdm_child", {"X": x, "TreeInfo": TREE}, {"child_nums": 2},
                      outs=("Child", "LeafMask"))
    np.testing.assert_array_equal(np.asarray(child), [[[0, 0], [3, 4]], [[5, 6], [0, 0]]])
    # node 6 has item_id 0: not an item
    np.testing.assert_array_equal(np.asarray(mask), [[[0, 0], [1, 1]], [[1, 0], [0, 0]]])
    assert np.asarray(child).dtype == np.int32
    child = run("tdm_child", {"X": x, "TreeInfo": TREE},
                {"child_nums": 2, "dtype": int(VarType.INT64)}, outs=("Child",))
    assert np.asarray(child).dtype == np.int64
    with pytest.raises(ValueError, match=r"tdm_child: the ids of X must lie in \[0, 7\)"):
        run("tdm_child", {"X": x + 7, "TreeInfo": TREE}, {"child_nums": 2}, outs=("Child",))


TRAVEL = np.array([[1, 3], [1, 4], [2, 5], [2, 0]], np.int64)     # item -> its path
LAYER = np.array([[1], [2], [3], [4], [5], [6]], np.int64)
OFFSETS = [0, 2, 6]


def test_tdm_sampler():
    x = np.array([[0], [2], [3]], np.int64)
    attrs = {"neg_samples_num_list": [1, 2], "layer_offset_lod": OFFSETS,
             "output_positive": True}
    out, label, mask = run("tdm_sampler", {"X": x, "Travel": TRAVEL, "Layer": LAYER}, attrs,
                           outs=("Out", "Labels", "Mask"))
    out, label, mask = map(np.asarray, (out, label, mask))
    assert out.shape == (3, 5) and out.dtype == np.int32
    for row, item in zip(range(3), x[:, 0]):
        path = TRAVEL[item]
        assert out[row, 0] == path[0] and label[row].tolist()[:2] == [1, 0]
        assert out[row, 1] in {1, 2} - {path[0]}          # the other layer-0 node
        if path[1] == 0:                                   # padding: zeros, masked out
            assert out[row, 2:].tolist() == [0, 0, 0] and mask[row, 2:].tolist() == [0, 0, 0]
        else:
            negs = out[row, 3:].tolist()
            assert out[row, 2] == path[1] and label[row, 2] == 1
            assert len(set(negs)) == 2 and set(negs) <= {3, 4, 5, 6} - {path[1]}
            assert mask[row].tolist() == [1] * 5
    with pytest.raises(ValueError, match="layer 0 has 2 nodes, so at most 1 negatives"):
        run("tdm_sampler", {"X": x, "Travel": TRAVEL, "Layer": LAYER},
            dict(attrs, neg_samples_num_list=[2, 2]), outs=("Out", "Labels", "Mask"))
