"""shuffle_batch (ops/random_extra.py) and split_ids / merge_ids (ops/distributed_ids.py):
the row permutation and its recorded index, seeding through Seed / SeedOut, the float64 numeric
gradient of shuffle_batch with a random upstream gradient, id sharding of dense and
SelectedRows ids, and merge_ids restoring the original id order."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core.registry import get_op_def
from fluidlite.core.selected_rows import SelectedRows
from fluidlite.testing import OpTest
from tests.ops.test_fusion_ops import run_multi as run


class TestShuffleBatch(OpTest):
    op_type = "shuffle_batch"

    def setup_method(self, *_):
        self.x = self.rand(3, 4, 5, seed=1)
        got = get_op_def(self.op_type).forward(self.x, np.array([7], "int64"))
        self.idx = got["ShuffleIdx"]
        self.inputs = {"X": self.x, "Seed": np.array([7], "int64")}
        out = np.empty((12, 5))
        out[self.idx] = self.x.reshape(12, 5)
        self.outputs = {"Out": out.reshape(3, 4, 5), "ShuffleIdx": self.idx}

    def test_output(self):
        assert sorted(self.idx.tolist()) == list(range(12)) and self.idx.dtype == np.int64
        assert self.idx.tolist() != list(range(12))
        self.check_output(atol=0, rtol=0)

    def test_grad(self):
        self.check_grad(["X"], "Out")

    def test_seed_chain_and_startup_seed(self):
        op = get_op_def(self.op_type)
        first = op.forward(self.x, None, startup_seed=7)
        assert np.array_equal(first["ShuffleIdx"], self.idx)     # Seed 7 == startup_seed 7
        again = op.forward(self.x, first["SeedOut"])
        assert first["SeedOut"].shape == (1,) and first["SeedOut"].dtype == np.int64
        assert not np.array_equal(again["ShuffleIdx"], first["ShuffleIdx"])


def test_split_ids_dense_and_selected_rows():
    ids = [("a", np.array([[7], [2], [9], [2]], "int64"), None),
           ("b", np.array([[3], [6]], "int64"), None)]
    prog, block = fluid.Program(), None
    block = prog.global_block()
    ins = [block.create_var(name=n, shape=a.shape, dtype="int64", is_data=True)
           for n, a, _ in ids]
    outs = [block.create_var(name=f"o{k}") for k in range(3)]
    block.append_op("split_ids", {"Ids": ins}, {"Out": outs}, {})
    res = fluid.Executor().run(prog, feed={n: a for n, a, _ in ids}, fetch_list=outs,
                               scope=fluid.Scope())
    # de-duplicated, sorted, by id % 3
    assert [r.reshape(-1).tolist() for r in res] == [[3, 6, 9], [7], [2]]
    sr = SelectedRows([0, 5, 7, 4, 9], np.arange(10, dtype="float32").reshape(5, 2), 20)
    got = get_op_def("split_ids").forward([sr], n_out=3)["Out"]
    assert [g.rows.tolist() for g in got] == [[0, 9], [7, 4], [5]]
    np.testing.assert_array_equal(got[1].value, [[4, 5], [6, 7]])
    assert all(g.height == 20 for g in got)


def test_merge_ids_restores_order_and_lod():
    ids = np.array([[1], [2], [3], [4], [5], [6], [3]], "int64")
    rows = [np.array([[3], [6]], "int64"), np.array([[1], [4]], "int64"),
            np.array([[2], [5]], "int64")]
    xs = [np.array([[0.3, 0.3], [0.6, 0.6]], "float32"),
          np.array([[0.1, 0.1], [0.4, 0.4]], "float32"),
          np.array([[0.2, 0.2], [0.5, 0.5]], "float32")]
    out = run("merge_ids", {"Ids": [("ids", ids, [3, 4])],
                            "Rows": [(f"r{k}", r, None) for k, r in enumerate(rows)],
                            "X": [(f"x{k}", x, None) for k, x in enumerate(xs)]}, {})
    np.testing.assert_allclose(np.asarray(out)[:, 0], ids[:, 0] / 10.0, rtol=1e-6)
    assert out.recursive_sequence_lengths() == [[3, 4]]
    with pytest.raises(ValueError, match="id 8 of Ids\\[0\\] is in none of the Rows"):
        get_op_def("merge_ids").forward([np.array([[8]])], rows, xs)


def test_contrib_layer_shuffle_batch():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 3], "float32")
        out = fluid.contrib.layers.shuffle_batch(x, seed=5)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    xv = np.arange(30, dtype="float32").reshape(10, 3)
    a = exe.run(main, feed={"x": xv}, fetch_list=[out])[0]
    b = exe.run(main, feed={"x": xv}, fetch_list=[out])[0]
    assert sorted(a[:, 0].tolist()) == xv[:, 0].tolist()
    assert not np.array_equal(a, b)              # the persistable seed advanced


def test_ref_by_trainer_id_and_fake_init():
    xs = [np.full((2, 2), k, "float32") for k in range(3)]
    out = run("ref_by_trainer_id", {"X": [(f"x{k}", x, None) for k, x in enumerate(xs)],
                                    "TrainerId": np.array([2], "int64")}, {})
    np.testing.assert_array_equal(np.asarray(out), xs[2])
    with pytest.raises(ValueError, match="TrainerId 3 must index one of the 3"):
        get_op_def("ref_by_trainer_id").forward(xs, np.array([3], "int64"))
    got = get_op_def("fake_init").forward(shape=[4, 7])["Out"]
    assert got.shape == (4, 7) and got.dtype == np.float32
    assert get_op_def("ref_by_trainer_id").no_grad and get_op_def("fake_init").no_grad


def test_merge_lod_tensor_infer_is_merge_without_gradient():
    x = np.arange(6, dtype="float32").reshape(6, 1)
    mask = np.array([[True], [False], [True]])
    t, f = np.array([[1.0], [2.0]], "float32"), np.array([[3.0]], "float32")
    plain = get_op_def("merge_lod_tensor").forward(x, mask, t, f)
    infer = get_op_def("merge_lod_tensor_infer").forward(x, mask, t, f)
    np.testing.assert_array_equal(np.asarray(infer["Out"]), np.asarray(plain["Out"]))
    assert get_op_def("merge_lod_tensor_infer").no_grad


def test_merge_lod_tensor_infer_in_a_program():
    x = np.arange(3, dtype="float32").reshape(3, 1)
    mask = np.array([[True], [False], [True]])
    t, f = np.array([[1.0], [2.0]], "float32"), np.array([[3.0]], "float32")
    out = run("merge_lod_tensor_infer", {"X": x, "Mask": mask, "InTrue": t, "InFalse": f}, {})
    np.testing.assert_array_equal(np.asarray(out).ravel(), [1.0, 3.0, 2.0])
