"""lookup_table / lookup_table_v2: gathering, padding_idx, dense scatter-add gradients, id
checks; the embedding layer (fluid.layers.embedding and fluid.embedding), shared tables."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.testing import OpTest


class TestLookupTable(OpTest):
    op_type = "lookup_table"

    def setup_method(self, *_):
        w = self.rand(6, 3)
        ids = np.array([[[1], [4]], [[1], [0]], [[5], [4]]], "int64")      # [3, 2, 1]; repeats
        self.inputs = {"W": w, "Ids": ids}
        self.attrs = {}
        self.outputs = {"Out": w[ids[..., 0]]}

    def test_all(self):
        self.check_infer()
        self.check_output()
        self.check_grad(["W"], "Out")

    def test_padding_idx(self):
        w, ids = self.inputs["W"], self.inputs["Ids"]
        out = w[ids[..., 0]]
        out[ids[..., 0] == 4] = 0
        self.attrs = {"padding_idx": 4}
        self.outputs = {"Out": out}
        self.check_output()
        self.check_grad(["W"], "Out")
        from fluidlite.core.registry import get_op_def
        dw = get_op_def("lookup_table").backward(w, ids, np.ones((3, 2, 3)), padding_idx=4)["W"]
        np.testing.assert_array_equal(dw[:, 0], [1, 2, 0, 0, 0, 1])    # row 4 gets nothing

    def test_out_of_range_id(self):
        self.inputs = dict(self.inputs, Ids=np.array([[2], [6]], "int64"))
        self.outputs = {"Out": np.zeros((2, 3))}
        with pytest.raises(ValueError, match=r"id 6 is out of range \[0, 6\)"):
            self.check_output()

    def test_ids_must_be_int_with_trailing_1(self):
        self.inputs = dict(self.inputs, Ids=np.array([[2.0]]))
        with pytest.raises(ValueError, match="Ids must be an int64"):
            self.check_infer()
        self.inputs = dict(self.inputs, Ids=np.array([[2, 3]], "int64"))
        with pytest.raises(ValueError, match="last dim of Ids must be 1"):
            self.check_infer()


class TestLookupTableV2(OpTest):
    op_type = "lookup_table_v2"

    def test_all(self):
        w = self.rand(5, 2)
        ids = np.array([[0, 3, 3], [4, 1, 0]], "int64")
        self.inputs = {"W": w, "Ids": ids}
        self.attrs = {"padding_idx": 0}
        out = w[ids]
        out[ids == 0] = 0
        self.outputs = {"Out": out}
        self.check_infer()
        self.check_output()
        self.check_grad(["W"], "Out")


class TestEmbeddingLayer:
    def test_layers_embedding_and_fluid_embedding(self):
        ids = fluid.data("ids", [None, 1], "int64")
        seq = fluid.data("seq", [None, 5], "int64")
        a = fluid.layers.embedding(ids, size=[10, 4], padding_idx=-1, is_sparse=True)
        b = fluid.embedding(seq, size=[10, 4])
        assert a.shape == (-1, 4) and b.shape == (-1, 5, 4)
        ops = fluid.default_main_program().global_block().ops
        assert [op.type for op in ops] == ["lookup_table", "lookup_table_v2"]
        assert ops[0].attr("padding_idx") == 9 and ops[0].attr("is_sparse") is True
        assert ops[1].attr("padding_idx") == -1
        w = fluid.default_main_program().global_block().var("embedding_0.w_0")
        assert w.shape == (10, 4)
        init = fluid.default_startup_program().global_block().ops[0]
        assert init.type == "uniform_random"      # Xavier
        exe = fluid.Executor(fluid.CPUPlace())
        exe.run(fluid.default_startup_program())
        iv = np.array([[3], [9]], "int64")
        sv = np.arange(10, dtype="int64").reshape(2, 5)
        av, bv = exe.run(feed={"ids": iv, "seq": sv}, fetch_list=[a, b])
        table = np.array(fluid.global_scope().find_var("embedding_0.w_0").get_tensor())
        np.testing.assert_array_equal(av, [table[3], np.zeros(4)])
        np.testing.assert_array_equal(bv, np.array(fluid.global_scope().find_var(
            "embedding_1.w_0").get_tensor())[sv])

    def test_shared_table_gets_summed_dense_gradients(self):
        words = [fluid.data(f"w{i}", [None, 1], "int64") for i in range(3)]
        embs = [fluid.embedding(w, size=[7, 2], param_attr="shared_w") for w in words]
        params = fluid.default_main_program().global_block().all_parameters()
        assert [p.name for p in params] == ["shared_w"]
        loss = fluid.layers.mean(fluid.layers.concat(embs, axis=1))
        (p, g), = fluid.backward.append_backward(loss)
        exe = fluid.Executor(fluid.CPUPlace())
        exe.run(fluid.default_startup_program())
        feed = {"w0": np.array([[1], [2]], "int64"), "w1": np.array([[1], [1]], "int64"),
                "w2": np.array([[6], [2]], "int64")}
        gv, = exe.run(feed=feed, fetch_list=[g])
        counts = np.bincount(np.concatenate([v.ravel() for v in feed.values()]), minlength=7)
        np.testing.assert_allclose(gv, np.repeat(counts[:, None], 2, 1) / 12.0, rtol=1e-6)

    def test_errors(self):
        f = fluid.data("f", [None, 1], "float32")
        with pytest.raises(TypeError, match="must hold int64 ids"):
            fluid.layers.embedding(f, size=[3, 2])
        i = fluid.data("i", [None, 1], "int64")
        with pytest.raises(ValueError, match="padding_idx must be in"):
            fluid.layers.embedding(i, size=[3, 2], padding_idx=3)
        with pytest.raises(ValueError, match="size must be two positive ints"):
            fluid.layers.embedding(i, size=[3])
