"""Mutation-round tests for fluidlite/ops/selected_rows.py (split_selected_rows; the merge /
get_tensor ops are covered by tests/ops/test_selected_rows.py).

Reference: fluid 1.8's split_selected_rows_op.h written as a loop: ``GetSectionIndex`` (the
block of a row: the last block whose start is <= the row), the rows of block k renumbered from
its start, in X's order, with their values, each Out of height ``height_sections[k]``; a dense
X is all its rows. dX: each row takes its block's Out gradient row (the op's documented rule).
"""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core.registry import get_op_def
from fluidlite.core.selected_rows import SelectedRows

OP = get_op_def("split_selected_rows")


def ref_split(rows, value, sections):
    starts = np.concatenate([[0], np.cumsum(sections)[:-1]])
    outs = [([], []) for _ in sections]
    for r, v in zip(rows, value):
        k = max(i for i, s in enumerate(starts) if s <= r)
        outs[k][0].append(r - starts[k])
        outs[k][1].append(v)
    return outs


@pytest.mark.parametrize("sections", [[4, 3, 5], [12], [1, 1, 10], [6, 0, 6]])
def test_split_selected_rows_against_fluids_loop(sections):
    rng = np.random.default_rng(len(sections))
    rows = np.array([11, 0, 4, 6, 3, 7, 4, 9], np.int64)
    value = rng.normal(size=(8, 2)).astype("float32")
    outs = OP.forward(SelectedRows(rows, value, 12), height_sections=sections)["Out"]
    want = ref_split(rows, value, sections)
    assert len(outs) == len(sections)
    for o, (r, v), h in zip(outs, want, sections):
        assert type(o) is SelectedRows and o.height == h
        assert o.rows.tolist() == r
        np.testing.assert_array_equal(o.value, np.array(v, "float32").reshape(-1, 2))
        assert o.value.dtype == np.float32
    # gradient: each X row gets its row of its block's gradient
    douts = [SelectedRows(o.rows, np.full(o.value.shape, k + 1.0, "float32"), o.height)
             for k, o in enumerate(outs)]
    dx = OP.backward(SelectedRows(rows, value, 12), douts, height_sections=sections)["X"]
    starts = np.concatenate([[0], np.cumsum(sections)[:-1]])
    block = [max(i for i, s in enumerate(starts) if s <= r) for r in rows]
    assert type(dx) is SelectedRows and dx.rows.tolist() == rows.tolist() and dx.height == 12
    np.testing.assert_array_equal(dx.value[:, 0], np.array(block) + 1.0)
    assert dx.value.dtype == np.float32


def test_dense_x_is_all_its_rows():
    x = np.arange(10.0).reshape(5, 2)
    outs = OP.forward(x, height_sections=[2, 3])["Out"]
    assert outs[0].rows.tolist() == [0, 1] and outs[1].rows.tolist() == [0, 1, 2]
    np.testing.assert_array_equal(outs[1].value, x[2:])
    assert [o.height for o in outs] == [2, 3]
    dx = OP.backward(x, [np.ones((2, 2)), None], height_sections=[2, 3])["X"]
    assert type(dx) is np.ndarray and dx.shape == (5, 2) and dx.dtype == np.float64
    np.testing.assert_array_equal(dx, [[1, 1], [1, 1], [0, 0], [0, 0], [0, 0]])
    dx = OP.backward(x, [np.ones((2, 2)), np.full((3, 2), 2.0)], height_sections=[2, 3])["X"]
    np.testing.assert_array_equal(dx[:, 1], [1, 1, 2, 2, 2])


@pytest.mark.parametrize("rows, msg", [
    ([3, 12], r"each row of X must be < its height 12, got rows \[3, 12\]"),
    ([-1, 2], r"each row of X must be < its height 12, got rows \[-1, 2\]"),
])
def test_rows_outside_the_height(rows, msg):
    with pytest.raises(ValueError, match="^split_selected_rows: " + msg + "$"):
        OP.forward(SelectedRows(np.array(rows), np.zeros((2, 1)), 12), height_sections=[6, 6])


def test_row_past_the_last_block():
    with pytest.raises(ValueError, match=r"^split_selected_rows: row 9 is past block 1 "
                                         r"\(start 4, height 5\)$"):
        OP.forward(SelectedRows(np.array([1, 9]), np.zeros((2, 1)), 12), height_sections=[4, 5])


def test_inference_and_var_types():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [12, 3], "float64")
        block = main.global_block()
        outs = [block.create_var(name=f"ssr_{k}") for k in range(2)]
        block.append_op("split_selected_rows", {"X": x}, {"Out": outs},
                        {"height_sections": [5, 7]})
        assert [tuple(o.shape) for o in outs] == [(5, 3), (7, 3)]
        assert all(o.dtype == fluid.core.VarDesc.VarType.FP64 for o in outs)
        assert all(o.type == fluid.core.VarDesc.VarType.SELECTED_ROWS for o in outs)
        with pytest.raises(ValueError, match=r"split_selected_rows: height_sections must list "
                                             r"the height of every output, got \[\]"):
            block.append_op("split_selected_rows", {"X": x},
                            {"Out": [block.create_var(name="ssr_bad")]}, {"height_sections": []})
