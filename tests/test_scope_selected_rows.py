"""fluid 1.8's ``scope.var(name).get_selected_rows()`` (core/scope.py's SelectedRowsView) and
``fluid.op.Operator`` running ops on SelectedRows variables: sparse inputs reach the kernel as
``SelectedRows`` with fluid's ``[height, D]`` dims, sparse outputs come back with rows and
height, a variable with no rows counts as empty, and ``LoDTensor._set_dims``."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core.selected_rows import SelectedRows
from fluidlite.op import Operator
from fluidlite.testing import OpTest


def _sparse(scope, name, rows, value, height):
    sr = scope.var(name).get_selected_rows()
    sr.set_rows(rows)
    sr.set_height(height)
    sr.get_tensor().set(value, fluid.CPUPlace())
    return sr


def test_scale_keeps_rows_and_height_and_runs_in_place():
    scope = fluid.core.Scope()
    value = np.arange(6, dtype="float32").reshape(3, 2)
    _sparse(scope, "x", [0, 4, 7], value, 10)
    out = scope.var("out").get_selected_rows()
    Operator("scale", X="x", Out="out", scale=2.0).run(scope, fluid.CPUPlace())
    assert out.rows() == [0, 4, 7] and out.height() == 10
    np.testing.assert_array_equal(np.array(out.get_tensor()), value * 2)
    Operator("scale", X="x", Out="x", scale=3.0).run(scope, fluid.CPUPlace())
    x = scope.find_var("x").get_selected_rows()
    assert x.rows() == [0, 4, 7]
    np.testing.assert_array_equal(np.array(x.get_tensor()), value * 3)


def test_sparse_sgd_updates_only_the_rows():
    scope = fluid.core.Scope()
    place = fluid.CPUPlace()
    scope.var("p").get_tensor().set(np.ones((5, 2), "float32"), place)
    scope.var("lr").get_tensor().set(np.array([0.5], "float32"), place)
    _sparse(scope, "g", [1, 3], np.full((2, 2), 2.0, "float32"), 5)
    Operator("sgd", Param="p", Grad="g", LearningRate="lr", ParamOut="p").run(scope, place)
    np.testing.assert_array_equal(np.array(scope.find_var("p").get_tensor())[:, 0],
                                  [1, 0, 1, 0, 1])


def test_empty_rows_and_executor_written_values():
    scope = fluid.core.Scope()
    holder = scope.var("w")
    _sparse(scope, "w", [], np.ones((4, 3), "float32"), 6)
    assert holder.selected_rows().value.shape == (0, 3)
    holder.set_array(SelectedRows([2, 2], np.ones((2, 3), "float32"), 6))
    view = holder.get_selected_rows()
    assert view.rows() == [2, 2] and view.height() == 6 and view.numel() == 6
    with pytest.raises(ValueError, match="holds no SelectedRows"):
        scope.var("dense").get_tensor().set(np.ones(2, "float32"), fluid.CPUPlace()) or \
            scope.find_var("dense").selected_rows()


def test_set_dims():
    t = fluid.LoDTensor()
    t.set(np.arange(6, dtype="int64"), fluid.CPUPlace())
    t._set_dims([3, 2])
    assert np.array(t).tolist() == [[0, 1], [2, 3], [4, 5]]
    t._set_dims([4])
    assert np.array(t).dtype == np.int64 and np.array(t).shape == (4,)
    with pytest.raises(ValueError, match=">= 0"):
        t._set_dims([-1, 2])


def test_split_selected_rows_and_its_sum_gradient():
    scope = fluid.core.Scope()
    value = np.arange(10, dtype="float32").reshape(5, 2)
    _sparse(scope, "x", [0, 5, 7, 4, 20], value, 21)
    outs = [f"o{k}" for k in range(5)]
    Operator("split_selected_rows", X="x", Out=outs,
             height_sections=[5, 5, 5, 5, 3]).run(scope, fluid.CPUPlace())
    got = [scope.find_var(n).get_selected_rows() for n in outs]
    assert [g.rows() for g in got] == [[0, 4], [0, 2], [], [], [0]]
    assert [g.height() for g in got] == [5, 5, 5, 5, 3]
    np.testing.assert_array_equal(np.array(got[1].get_tensor()), value[[1, 2]])
    from fluidlite.core.registry import get_op_def
    with pytest.raises(ValueError, match="must be < its height 21"):
        get_op_def("split_selected_rows").forward(
            SelectedRows([21], np.ones((1, 2), "float32"), 21), height_sections=[21])
    # dX: every row gets its block's gradient back (the true derivative; fluid's grad maker
    # sums the blocks' gradients)
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("xd", [4, 2], "float32")
        x.stop_gradient = False
        block = main.global_block()
        parts = [block.create_var(name=f"p{k}", dtype="float32") for k in range(2)]
        block.append_op("split_selected_rows", {"X": x}, {"Out": parts},
                        {"height_sections": [2, 2]})
        dense = [fluid.layers.get_tensor_from_selected_rows(p) for p in parts]
        loss = fluid.layers.reduce_sum(fluid.layers.concat(dense, axis=0) * 3.0)
        fluid.backward.append_backward(loss, parameter_list=["xd"])
    g, = fluid.Executor().run(main, feed={"xd": np.ones((4, 2), "float32")},
                              fetch_list=["xd@GRAD"], scope=fluid.Scope())
    np.testing.assert_array_equal(np.asarray(g), np.full((4, 2), 3.0))


class TestSplitSelectedRowsGrad(OpTest):
    op_type = "split_selected_rows"

    def test_numeric_gradient(self):
        x = self.rand(6, 3, seed=4)
        self.inputs = {"X": x}
        self.attrs = {"height_sections": [2, 3, 1]}
        self.outputs = {"Out": [("o0", x[:2]), ("o1", x[2:5]), ("o2", x[5:])]}
        self.check_output(atol=0, rtol=0)
        self.check_grad(["X"], ["Out"])
