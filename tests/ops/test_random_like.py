"""fill_constant_batch_size_like and the *_random_batch_size_like ops; the random layers."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core.dtypes import VarType
from fluidlite.testing import OpTest


class TestFillConstantBatchSizeLike(OpTest):
    op_type = "fill_constant_batch_size_like"

    def test_all(self):
        self.inputs = {"Input": self.rand(5, 3)}
        self.attrs = {"shape": [-1, 4], "value": 2.5, "dtype": VarType.FP32}
        self.outputs = {"Out": np.full((5, 4), 2.5, "float32")}
        self.check_infer()
        self.check_output()

    def test_dim_indices_and_int_dtype(self):
        self.inputs = {"Input": self.rand(2, 6)}
        self.attrs = {"shape": [3, 1, 7], "value": 1.0, "dtype": VarType.INT64,
                      "input_dim_idx": 1, "output_dim_idx": 2}
        self.outputs = {"Out": np.ones((3, 1, 6), "int64")}
        self.check_infer()
        self.check_output()

    def test_bad_index(self):
        self.inputs = {"Input": self.rand(2, 6)}
        self.attrs = {"shape": [3], "output_dim_idx": 1}
        with pytest.raises(ValueError, match="output_dim_idx 1 is out of range"):
            self.check_infer()


def test_fill_constant_batch_size_like_counts_the_sequences_of_a_lod_input():
    """fill_constant_batch_size_like_op.h: with a LoD Input and input_dim_idx 0, the batch is
    the number of sequences of its last LoD level, not its rows; other dims keep the rows."""
    place = fluid.CPUPlace()
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 3], "float32", lod_level=2)
        by_seq = fluid.layers.fill_constant_batch_size_like(x, [-1, 4], "float32", 1.5)
        by_col = fluid.layers.fill_constant_batch_size_like(x, [2, -1], "int64", 7,
                                                            input_dim_idx=1,
                                                            output_dim_idx=1)
    exe = fluid.Executor(place)
    seq = fluid.create_lod_tensor(np.zeros((6, 3), "float32"), [[1, 2], [2, 1, 3]], place)
    a, b = exe.run(main, feed={"x": seq}, fetch_list=[by_seq, by_col])
    np.testing.assert_array_equal(a, np.full((3, 4), 1.5, "float32"))
    np.testing.assert_array_equal(b, np.full((2, 3), 7, "int64"))
    a, = exe.run(main, feed={"x": np.zeros((5, 3), "float32")}, fetch_list=[by_seq])
    assert a.shape == (5, 4)                  # no LoD: the rows


class TestUniformRandomBatchSizeLike(OpTest):
    op_type = "uniform_random_batch_size_like"

    def test_all(self):
        self.inputs = {"Input": self.rand(4, 2)}
        self.attrs = {"shape": [-1, 3], "min": 2.0, "max": 3.0, "seed": 9}
        ref = np.random.default_rng(9).uniform(2.0, 3.0, (4, 3)).astype("float32")
        self.outputs = {"Out": ref}
        self.check_infer()
        self.check_output()


class TestGaussianRandomBatchSizeLike(OpTest):
    op_type = "gaussian_random_batch_size_like"

    def test_all(self):
        self.inputs = {"Input": self.rand(3, 2)}
        self.attrs = {"shape": [5, -1], "output_dim_idx": 1, "mean": 1.0, "std": 0.5,
                      "seed": 4}
        ref = np.random.default_rng(4).normal(1.0, 0.5, (5, 3)).astype("float32")
        self.outputs = {"Out": ref}
        self.check_infer()
        self.check_output()


class TestRandomLayers:
    def test_uniform_and_gaussian_random(self):
        u = fluid.layers.uniform_random([400, 50], min=-2.0, max=-1.0)
        g = fluid.layers.gaussian_random([400, 50], mean=3.0, std=0.5, dtype="float64")
        s = fluid.layers.uniform_random([3], seed=12)
        exe = fluid.Executor(fluid.CPUPlace())
        u1, g1, s1 = exe.run(fetch_list=[u, g, s])
        u2, g2, s2 = exe.run(fetch_list=[u, g, s])
        assert u1.shape == (400, 50) and u1.dtype == np.float32 and g1.dtype == np.float64
        assert -2.0 <= u1.min() and u1.max() < -1.0 and abs(u1.mean() + 1.5) < 0.01
        assert abs(g1.mean() - 3.0) < 0.01 and abs(g1.std() - 0.5) < 0.01
        assert not np.array_equal(u1, u2)          # a fresh draw each run ...
        np.testing.assert_array_equal(s1, s2)      # ... unless the seed is fixed

    def test_batch_size_like_layers(self):
        x = fluid.data("x", [None, 7], "float32")
        c = fluid.layers.fill_constant_batch_size_like(x, shape=[1, 3], dtype="int64", value=4)
        u = fluid.layers.uniform_random_batch_size_like(x, [1, 2], min=0.0, max=1.0)
        g = fluid.layers.gaussian_random_batch_size_like(x, [1, 2, 2], std=2.0)
        assert c.shape == (-1, 3) and u.shape == (-1, 2) and g.shape == (-1, 2, 2)
        assert c.stop_gradient
        cv, uv, gv = fluid.Executor(fluid.CPUPlace()).run(
            feed={"x": np.zeros((6, 7), "float32")}, fetch_list=[c, u, g])
        np.testing.assert_array_equal(cv, np.full((6, 3), 4))
        assert cv.dtype == np.int64 and uv.shape == (6, 2) and gv.shape == (6, 2, 2)

    def test_bad_shape(self):
        with pytest.raises(ValueError, match="non-empty list"):
            fluid.layers.uniform_random([])
        with pytest.raises(ValueError, match="must not exceed max"):
            fluid.layers.uniform_random([2], min=1.0, max=0.0)
