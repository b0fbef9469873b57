"""``merge_selected_rows`` / ``get_tensor_from_selected_rows``: on a sparse embedding's
SelectedRows gradient as in fluid; on dense tensors copies (the identity gradient, LoD kept);
argument errors."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.testing import OpTest


class TestMergeSelectedRows(OpTest):
    op_type = "merge_selected_rows"

    def test_all(self):
        x = self.rand(5, 3)
        self.inputs, self.outputs = {"X": x}, {"Out": x}
        self.check_infer()
        self.check_output(atol=0, rtol=0)
        self.check_grad(["X"], "Out", weighted=True)


class TestGetTensorFromSelectedRows(OpTest):
    op_type = "get_tensor_from_selected_rows"

    def test_all(self):
        x = self.rand(4, 2, 3, seed=1)
        self.inputs, self.outputs = {"X": x}, {"Out": x}
        self.check_infer()
        self.check_output(atol=0, rtol=0)
        self.check_grad(["X"], "Out", weighted=True)


@pytest.mark.parametrize("layer", ["merge_selected_rows", "get_tensor_from_selected_rows"])
def test_layers_copy_dense_input_and_keep_lod(layer):
    prog = fluid.Program()
    with fluid.program_guard(prog, fluid.Program()):
        x = fluid.data("x", [-1, 2], "float32", lod_level=1)
        y = getattr(fluid.layers, layer)(x, name="picked")
    op = prog.global_block().ops[-1]
    assert op.type == layer and op.output("Out") == [y.name]
    assert y.name.startswith("picked") and y.dtype == x.dtype
    xv = np.arange(10, dtype="float32").reshape(5, 2)
    out, = fluid.Executor().run(
        prog, feed={"x": fluid.create_lod_tensor(xv, [[2, 3]], fluid.CPUPlace())},
        fetch_list=[y], scope=fluid.Scope(), return_numpy=False)
    np.testing.assert_array_equal(np.array(out), xv)
    assert out.lod() == [[0, 2, 5]]


def test_fluid_example_chain_on_a_sparse_gradient():
    """fluid's documented chain merge_selected_rows -> get_tensor_from_selected_rows applied
    to a sparse embedding's SelectedRows gradient: the duplicated rows summed, rows sorted,
    and the value tensor of the merged rows."""
    prog, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(prog, start):
        ids = fluid.data("ids", [-1, 1], "int64")
        emb = fluid.layers.embedding(ids, size=[6, 2], is_sparse=True)
        loss = fluid.layers.reduce_sum(emb)
        grad, = fluid.gradients(loss, [prog.global_block().all_parameters()[0]])
        merged = fluid.layers.merge_selected_rows(grad)
        z = fluid.layers.get_tensor_from_selected_rows(merged)
    VT = fluid.core.VarDesc.VarType
    assert (grad.type, merged.type, z.type) == (VT.SELECTED_ROWS, VT.SELECTED_ROWS,
                                                VT.LOD_TENSOR)
    exe = fluid.Executor()
    scope = fluid.Scope()
    exe.run(start, scope=scope)
    g, m, zv = exe.run(prog, feed={"ids": np.array([[2], [0], [2]], "int64")},
                       fetch_list=[grad, merged, z], scope=scope)
    assert g.rows.tolist() == [2, 0, 2] and g.height == 6     # one row per id, in order
    assert m.rows.tolist() == [0, 2] and m.height == 6
    np.testing.assert_array_equal(zv, [[1, 1], [2, 2]])       # row 2 twice: summed
    want = np.zeros((6, 2))
    want[0], want[2] = 1, 2
    np.testing.assert_array_equal(np.asarray(g), want)        # the dense tensor it stands for


@pytest.mark.parametrize("layer", ["merge_selected_rows", "get_tensor_from_selected_rows"])
def test_layers_reject_non_variables(layer):
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        with pytest.raises(TypeError, match=f"'x' in {layer} must be Variable, but received "
                                            f"ndarray"):
            getattr(fluid.layers, layer)(np.ones((2, 2)))
        with pytest.raises(TypeError, match="name must be a non-empty str"):
            getattr(fluid.layers, layer)(fluid.data("x", [2], "float32"), name=3)


@pytest.mark.parametrize("rows", [
    np.array([5, 1, 5, 0, 1, 5], np.int64),
    np.array([-3, 2, -3, 7, 2], np.int64),               # negative keys: floor division
    np.random.default_rng(1).integers(0, 1_000_000, 20_000).astype(np.int64),
    np.random.default_rng(2).integers(0, 50, 300).astype(np.int32),
    np.array([2**61, -2**61, 2**61, 3], np.int64),         # keys would overflow: fallback
    np.array([-2**62, 5, -2**62, 0], np.int64),            # ... through the negative rows
    np.array([], np.int64),                                # nothing to merge
    np.array([9], np.int64),
])
def test_merge_rows_orders_equal_rows_by_position(rows):
    # merge_rows sums equal rows in the order they came (a stable sort), whatever sort it
    # uses: the sums of a stable argsort + reduceat bit for bit, and the float64 sums
    from fluidlite.core.selected_rows import merge_rows
    rng = np.random.default_rng(3)
    value = rng.standard_normal((rows.size, 3)).astype(np.float32)
    got_rows, got = merge_rows(rows, value)
    order = np.argsort(rows, kind="stable")
    uniq, starts = np.unique(rows[order], return_index=True)
    want = np.add.reduceat(value[order], starts, axis=0) if rows.size else value
    assert got_rows.dtype == rows.dtype and np.array_equal(got_rows, uniq)
    assert got.dtype == np.float32 and np.array_equal(got, want)
    dense = np.zeros((uniq.size, 3))
    np.add.at(dense, np.searchsorted(uniq, rows), value.astype(np.float64))
    np.testing.assert_allclose(got, dense, rtol=1e-5, atol=1e-5)


def test_merge_rows_reuses_a_sort_only_for_equal_rows():
    # the per-thread memo of the last rows' sort: equal rows (another array) reuse it, rows
    # changed in place or of another dtype do not, and what it hands out cannot be written
    from fluidlite.core.selected_rows import merge_rows
    rng = np.random.default_rng(4)
    rows = rng.integers(0, 40, 500).astype(np.int64)
    a, b = rng.standard_normal((500, 4)), rng.standard_normal((500, 1))

    def want(r, v):
        order = np.argsort(r, kind="stable")
        uniq, starts = np.unique(r[order], return_index=True)
        return uniq, np.add.reduceat(v[order], starts, axis=0)

    first = merge_rows(rows, a)
    again = merge_rows(rows.copy(), b)              # DeepFM's second table: the same ids
    for got, (u, s) in ((first, want(rows, a)), (again, want(rows, b))):
        assert np.array_equal(got[0], u) and np.array_equal(got[1], s)
    rows[::7] = 39 - rows[::7]                       # the caller reuses its buffer
    got = merge_rows(rows, a)
    u, s = want(rows, a)
    assert np.array_equal(got[0], u) and np.array_equal(got[1], s)
    got = merge_rows(rows.astype(np.int32), a)
    assert got[0].dtype == np.int32 and np.array_equal(got[0], u)
    with pytest.raises(ValueError, match="read-only"):
        got[0][0] = 5
