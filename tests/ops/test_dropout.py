"""dropout: both implementations in train and test mode, fixed seeds, numeric gradients, the
layer (seed -> fix_seed, clone(for_test=True) -> is_test)."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.testing import OpTest


def keep_mask(seed, shape, p):
    """The mask a fixed-seed dropout op draws (the executor reseeds with ``seed`` every run)."""
    return np.random.default_rng(seed).random(shape, dtype=np.float32) >= p


class TestDropout(OpTest):
    op_type = "dropout"

    def setup_method(self, *_):
        x = self.rand(4, 6)
        m = keep_mask(7, x.shape, 0.3)
        self.inputs = {"X": x}
        self.attrs = {"dropout_prob": 0.3, "fix_seed": True, "seed": 7}
        self.outputs = {"Out": x * m, "Mask": m.astype("uint8")}

    def test_downgrade_in_infer_train(self):
        assert 0 < self.outputs["Mask"].sum() < self.outputs["Mask"].size
        self.check_infer()
        self.check_output()
        self.check_grad(["X"], "Out")

    def test_upscale_in_train(self):
        x, m = self.inputs["X"], self.outputs["Mask"]
        self.attrs = dict(self.attrs, dropout_implementation="upscale_in_train")
        self.outputs = {"Out": x * m / 0.7, "Mask": m}
        self.check_output()
        self.check_grad(["X"], "Out")

    @pytest.mark.parametrize("impl,factor", [("downgrade_in_infer", 0.7),
                                             ("upscale_in_train", 1.0)])
    def test_inference(self, impl, factor):
        x = self.inputs["X"]
        self.attrs = {"dropout_prob": 0.3, "is_test": True, "dropout_implementation": impl}
        self.outputs = {"Out": x * factor}
        self.check_output()
        self.check_grad(["X"], "Out")

    @pytest.mark.parametrize("p", [0.0, 1.0])
    def test_extreme_probabilities(self, p):
        x = self.inputs["X"]
        for impl in ("downgrade_in_infer", "upscale_in_train"):
            self.attrs = {"dropout_prob": p, "dropout_implementation": impl}
            self.outputs = {"Out": x * (1.0 - p), "Mask": np.full(x.shape, 1 - p, "uint8")}
            self.check_output()

    def test_bad_attrs(self):
        self.attrs = {"dropout_prob": 1.5}
        with pytest.raises(ValueError, match=r"dropout_prob must be in \[0, 1\]"):
            self.check_infer()
        self.attrs = {"dropout_implementation": "scale"}
        with pytest.raises(ValueError, match="dropout_implementation must be one of"):
            self.check_infer()


class TestDropoutLayer:
    def _run(self, prog, x, n=1):
        exe = fluid.Executor(fluid.CPUPlace())
        return [exe.run(prog, feed={"x": x}, fetch_list=[prog.global_block().ops[0]
                                                         .output("Out")[0]])[0]
                for _ in range(n)]

    def test_seed_fixes_the_mask(self):
        x = fluid.data("x", [None, 50], "float32")
        fluid.layers.dropout(x, 0.5, seed=3)
        op = fluid.default_main_program().global_block().ops[0]
        assert op.attr("fix_seed") is True and op.attr("seed") == 3
        assert op.output("Mask")[0].startswith("dropout_0.tmp")
        xv = np.ones((4, 50), "float32")
        a, b = self._run(fluid.default_main_program(), xv, 2)
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, keep_mask(3, xv.shape, 0.5).astype("float32"))

    def test_unseeded_masks_vary_per_step_but_are_reproducible(self):
        def masks():
            prog = fluid.Program()
            prog.random_seed = 11
            with fluid.program_guard(prog, fluid.Program()):
                x = fluid.data("x", [None, 200], "float32")
                fluid.layers.dropout(x, 0.25)
            assert prog.global_block().ops[0].attr("fix_seed") is False
            return self._run(prog, np.ones((5, 200), "float32"), 2)

        a1, a2 = masks()
        b1, b2 = masks()
        assert not np.array_equal(a1, a2)
        np.testing.assert_array_equal(a1, b1)
        np.testing.assert_array_equal(a2, b2)
        assert abs(a1.mean() - 0.75) < 0.03      # keep ratio 1 - p

    def test_clone_for_test_switches_to_inference(self):
        x = fluid.data("x", [None, 8], "float32")
        y = fluid.layers.dropout(x, 0.4, dropout_implementation="upscale_in_train")
        h = fluid.layers.dropout(x, 0.4)
        test_prog = fluid.default_main_program().clone(for_test=True)
        assert [op.attr("is_test") for op in test_prog.global_block().ops] == [True, True]
        xv = np.random.default_rng(0).standard_normal((3, 8)).astype("float32")
        a, b = fluid.Executor(fluid.CPUPlace()).run(test_prog, feed={"x": xv},
                                                    fetch_list=[y.name, h.name])
        np.testing.assert_array_equal(a, xv)
        np.testing.assert_allclose(b, xv * 0.6, rtol=1e-6)

    def test_gradient_uses_the_mask(self):
        x = fluid.data("x", [None, 30], "float32")
        x.stop_gradient = False
        y = fluid.layers.dropout(x, 0.5, seed=5, dropout_implementation="upscale_in_train")
        loss = fluid.layers.mean(y)
        gx, = fluid.gradients([loss], [x])
        xv = np.ones((2, 30), "float32")
        out, g = fluid.Executor(fluid.CPUPlace()).run(feed={"x": xv}, fetch_list=[y, gx])
        np.testing.assert_allclose(g, (out > 0) * 2.0 / 60, rtol=1e-6)
        types = [op.type for op in fluid.default_main_program().global_block().ops]
        assert "dropout_grad" in types and "fill_zeros_like" not in types

    def test_bad_probability(self):
        x = fluid.data("x", [None, 8], "float32")
        with pytest.raises(ValueError, match="dropout_prob must be a float"):
            fluid.layers.dropout(x, 2)
