"""``fluid.one_hot`` / ``fluid.embedding`` are the v2 ops (no trailing-1 dimension), unlike
``fluid.layers.one_hot`` / ``fluid.layers.embedding`` (fluid 1.8's ``fluid/input.py``)."""
import numpy as np
import pytest

import fluidlite as fluid


def test_one_hot_v2_vs_layers_one_hot():
    x = fluid.data("x", [None, 1], "int64")
    v2, v1 = fluid.one_hot(x, 4), fluid.layers.one_hot(x, 4)
    assert v2.shape == (-1, 1, 4) and v1.shape == (-1, 4)
    assert [op.type for op in fluid.default_main_program().global_block().ops] == \
        ["one_hot_v2", "one_hot"]
    exe = fluid.Executor(fluid.CPUPlace())
    a, b = exe.run(feed={"x": np.array([[1], [3]])}, fetch_list=[v2, v1])
    np.testing.assert_array_equal(a[:, 0], b)
    np.testing.assert_array_equal(b, np.eye(4, dtype="float32")[[1, 3]])


def test_embedding_v2_keeps_every_id_dimension():
    ids = fluid.data("ids", [None, 1], "int64")
    e2 = fluid.embedding(ids, [5, 3], param_attr="table", padding_idx=0)
    e1 = fluid.layers.embedding(ids, [5, 3], param_attr="table")
    assert e2.shape == (-1, 1, 3) and e1.shape == (-1, 3)
    ops = fluid.default_main_program().global_block().ops
    assert [op.type for op in ops] == ["lookup_table_v2", "lookup_table"]
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(fluid.default_startup_program())
    a, b = exe.run(feed={"ids": np.array([[0], [4]])}, fetch_list=[e2, e1])
    np.testing.assert_array_equal(a[0, 0], np.zeros(3))       # padding row
    np.testing.assert_array_equal(a[1, 0], b[1])


def test_bad_arguments_leave_the_program_untouched():
    x = fluid.data("x", [None], "float32")
    before = len(fluid.default_main_program().global_block().vars)
    with pytest.raises((TypeError, ValueError)):
        fluid.one_hot(x, 4)
    with pytest.raises((TypeError, ValueError)):
        fluid.embedding(x, [5, 3])
    assert len(fluid.default_main_program().global_block().vars) == before


@pytest.mark.parametrize("make", [
    lambda: fluid.data("x", [-2, 3], "float32"),
    lambda: fluid.layers.data("x", [3, -5], "float32"),
    lambda: fluid.layers.fill_constant([2, -1], "float32", 1.0),
])
def test_dims_below_minus_one_are_refused(make):
    """A dim is a size or -1 ('any'): -2 is a typo fluid refused, not an unknown size."""
    with pytest.raises(ValueError, match=r"shape\[\d\] = -\d|every dim of shape must be >= 0"):
        make()
