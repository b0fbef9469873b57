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


def _adam_reference(p, m1, m2, g, lr, b1p, b2p, b1, b2, eps):
    """fluidlite's Adam formula (ops/optim_adam.py) in float64, for a dense gradient."""
    m1 = b1 * m1 + (1 - b1) * g
    m2 = b2 * m2 + (1 - b2) * g * g
    c2 = np.sqrt(1 - b2p)
    return p - lr * c2 / (1 - b1p) * m1 / (np.sqrt(m2) + eps * c2), m1, m2


@pytest.mark.parametrize("lazy_mode", [True, False])
@pytest.mark.parametrize("separate_outputs", [True, False])
def test_sparse_adam_against_the_dense_update(lazy_mode, separate_outputs):
    """fluid 1.8's adam on a SelectedRows Grad (duplicated rows merged first), float64.
    Without lazy_mode: exactly the dense update on the densified gradient. With it: only the
    gradient's rows move; the outputs' other rows keep what the outputs held (fluid writes
    the rows into the output buffers: test_adam_op.py's TestSparseAdamOp), which is the
    input itself when ParamOut is Param."""
    rng = np.random.RandomState(7)
    height, width, rows = 9, 5, [6, 1, 6, 3]
    b1, b2, eps = 0.78, 0.836, 1e-4
    p, m1 = rng.randn(height, width), rng.randn(height, width)
    m2 = rng.rand(height, width) + 0.1
    value = rng.randn(len(rows), width)
    lr, b1p, b2p = np.array([0.3]), np.array([b1 ** 3]), np.array([b2 ** 3])
    scope, place = fluid.core.Scope(), fluid.CPUPlace()
    for name, arr in (("Param", p), ("Moment1", m1), ("Moment2", m2), ("LearningRate", lr),
                      ("Beta1Pow", b1p), ("Beta2Pow", b2p)):
        scope.var(name).get_tensor().set(arr.copy(), place)
    _sparse(scope, "Grad", rows, value, height)
    outs = {"ParamOut": "Param", "Moment1Out": "Moment1", "Moment2Out": "Moment2"}
    before = {}
    if separate_outputs:            # outputs with earlier contents of their own
        outs = {k: k for k in outs}
        for k in outs:
            before[k] = rng.randn(height, width)
            scope.var(k).get_tensor().set(before[k].copy(), place)
    Operator("adam", Param="Param", Grad="Grad", LearningRate="LearningRate",
             Moment1="Moment1", Moment2="Moment2", Beta1Pow="Beta1Pow", Beta2Pow="Beta2Pow",
             Beta1PowOut="Beta1PowOut", Beta2PowOut="Beta2PowOut", beta1=b1, beta2=b2,
             epsilon=eps, lazy_mode=lazy_mode, **outs).run(scope, place)
    dense = np.zeros((height, width))
    np.add.at(dense, rows, value)
    want = dict(zip(("ParamOut", "Moment1Out", "Moment2Out"),
                    _adam_reference(p, m1, m2, dense, lr, b1p, b2p, b1, b2, eps)))
    touched = sorted(set(rows))
    untouched = [r for r in range(height) if r not in touched]
    olds = {"ParamOut": p, "Moment1Out": m1, "Moment2Out": m2}
    for slot, var in outs.items():
        got = np.array(scope.find_var(var).get_tensor())
        assert got.dtype == np.float64
        np.testing.assert_allclose(got[touched], want[slot][touched], rtol=1e-12, atol=1e-12)
        if not lazy_mode:           # missing rows: a zero gradient, as the dense kernel
            np.testing.assert_allclose(got[untouched], want[slot][untouched], rtol=1e-12,
                                       atol=1e-12)
        else:                       # left as the output held them
            keep = before[slot] if separate_outputs else olds[slot]
            np.testing.assert_array_equal(got[untouched], keep[untouched])
    np.testing.assert_allclose(np.array(scope.find_var("Beta1PowOut").get_tensor()), b1p * b1)


def test_lazy_sparse_adam_into_fresh_outputs_copies_the_other_rows():
    """An output with no value yet (nothing to keep) gets the input's untouched rows."""
    scope, place = fluid.core.Scope(), fluid.CPUPlace()
    p = np.arange(12, dtype="float64").reshape(4, 3)
    for name, arr in (("P", p), ("M1", np.zeros((4, 3))), ("M2", np.zeros((4, 3))),
                      ("LR", np.array([0.1])), ("B1P", np.array([0.9])),
                      ("B2P", np.array([0.999]))):
        scope.var(name).get_tensor().set(arr, place)
    _sparse(scope, "G", [2], np.ones((1, 3)), 4)
    Operator("adam", Param="P", Grad="G", LearningRate="LR", Moment1="M1", Moment2="M2",
             Beta1Pow="B1P", Beta2Pow="B2P", ParamOut="PO", Moment1Out="M1O",
             Moment2Out="M2O", lazy_mode=True).run(scope, place)
    got = np.array(scope.find_var("PO").get_tensor())
    np.testing.assert_array_equal(got[[0, 1, 3]], p[[0, 1, 3]])
    assert np.all(got[2] < p[2])                       # a positive gradient: moved down
