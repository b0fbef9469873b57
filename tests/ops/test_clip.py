"""Clipping ops: clip, clip_by_norm, squared_l2_norm (differentiable) and check_finite_norm."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.testing import OpTest


class TestClip(OpTest):
    op_type = "clip"

    def setup_method(self, *_):
        x = self.rand(4, 5, low=-2, high=2)
        # keep values away from the kinks at min and max for the numeric gradient
        for kink in (-0.7, 0.8):
            close = np.abs(x - kink) < 0.05
            x[close] = kink + 0.1
        self.inputs = {"X": x}
        self.attrs = {"min": -0.7, "max": 0.8}
        self.outputs = {"Out": np.clip(x, -0.7, 0.8)}

    def test_all(self):
        self.check_infer()
        self.check_output()
        self.check_grad(["X"], "Out")

    def test_float32_kept(self):
        self.inputs = {"X": self.inputs["X"].astype("float32")}
        self.outputs = {"Out": self.outputs["Out"].astype("float32")}
        self.check_output()

    def test_min_greater_than_max_is_rejected(self):
        self.attrs = {"min": 1.0, "max": -1.0}
        with pytest.raises(ValueError, match="max should be greater than or equal to min"):
            self.check_output()


class TestClipByNorm(OpTest):
    op_type = "clip_by_norm"

    def setup_method(self, *_):
        x = self.rand(3, 4, seed=1)
        self.inputs = {"X": x}
        self.attrs = {"max_norm": 1.0}
        n = np.linalg.norm(x)
        assert n > 1.0
        self.outputs = {"Out": x * (1.0 / n)}

    def test_all(self):
        self.check_infer()
        self.check_output()
        self.check_grad(["X"], "Out")

    def test_below_the_norm_passes_through(self):
        self.attrs = {"max_norm": 100.0}
        self.outputs = {"Out": self.inputs["X"]}
        self.check_output()
        self.check_grad(["X"], "Out")

    def test_max_norm_must_be_positive(self):
        self.attrs = {"max_norm": 0.0}
        with pytest.raises(ValueError, match="max_norm should be greater than 0"):
            self.check_infer()


class TestSquaredL2Norm(OpTest):
    op_type = "squared_l2_norm"

    def setup_method(self, *_):
        x = self.rand(3, 5, seed=2)
        self.inputs = {"X": x}
        self.outputs = {"Out": np.array([np.sum(x * x)])}

    def test_all(self):
        self.check_infer()
        self.check_output()
        self.check_grad(["X"], "Out")

    def test_float32_input_gives_a_float64_sum(self):
        x = np.array([[3e19, 4e19], [1.0, -2.0]], "float32")
        self.inputs = {"X": x}
        self.outputs = {"Out": np.array([np.sum(x.astype("float64") ** 2)])}
        self.check_infer()
        self.check_output(rtol=1e-14, atol=0)


class TestCheckFiniteNorm(OpTest):
    op_type = "check_finite_norm"

    def setup_method(self, *_):
        a, b = np.array([4.0], "float32"), np.array([5.0], "float32")
        self.inputs = {"X": np.array([3.0], "float32"), "Norms": [("a", a), ("b", b)]}
        self.attrs = {"grad_names": ["w@GRAD", "b@GRAD"]}
        self.outputs = {"Out": np.array([3.0], "float32")}

    def test_finite_passes_through(self):
        self.check_infer()
        self.check_output()

    def test_nonfinite_raises_naming_the_gradients(self):
        self.inputs = {"X": np.array([np.nan], "float32"),
                       "Norms": [("a", np.array([np.inf], "float32")),
                                 ("b", np.array([1.0], "float32"))]}
        with pytest.raises(FloatingPointError) as e:
            self.check_output()
        msg = str(e.value)
        assert "w@GRAD" in msg and "b@GRAD" not in msg and "No parameter was updated" in msg

    def test_float64_norms_accepted(self):
        """squared_l2_norm's output is float64: a huge finite norm passes, NaN is reported."""
        big = np.array([1e60])
        self.inputs = {"X": np.array([1e30]), "Norms": [("a", big), ("b", big)]}
        self.outputs = {"Out": np.array([1e30])}
        self.check_infer()
        self.check_output()
        self.inputs = {"X": np.array([np.nan]),
                       "Norms": [("a", big), ("b", np.array([np.nan]))]}
        with pytest.raises(FloatingPointError, match=r"b@GRAD \(squared norm nan\)"):
            self.check_output()


def test_clip_layers():
    x = fluid.data("x", [-1, 3], "float32")
    y = fluid.layers.clip(x, min=-0.5, max=0.5)
    z = fluid.layers.clip_by_norm(x, max_norm=1.0)
    assert y.shape == (-1, 3) and z.shape == (-1, 3)
    ops = [op.type for op in fluid.default_main_program().global_block().ops]
    assert ops == ["clip", "clip_by_norm"]
    xv = np.array([[3.0, -4.0, 0.2]], "float32")
    yv, zv = fluid.Executor().run(feed={"x": xv}, fetch_list=[y, z])
    np.testing.assert_allclose(yv, np.clip(xv, -0.5, 0.5))
    np.testing.assert_allclose(zv, xv / np.linalg.norm(xv), rtol=1e-6)
    assert yv.dtype == np.float32 and zv.dtype == np.float32
    with pytest.raises(TypeError, match="clip: x must be a Variable"):
        fluid.layers.clip(xv, -1.0, 1.0)
