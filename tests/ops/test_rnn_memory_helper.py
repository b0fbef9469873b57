"""rnn_memory_helper (ops/control_flow.py): Out is a copy of X with its LoD, the float64
numeric gradient with a random upstream gradient, and zeros when Out gets no gradient."""
import numpy as np

from fluidlite.core.registry import get_op_def
from fluidlite.testing import OpTest


class TestRnnMemoryHelper(OpTest):
    op_type = "rnn_memory_helper"

    def setup_method(self, *_):
        self.x = self.rand(3, 4, seed=2)
        self.inputs = {"X": self.x}
        self.outputs = {"Out": self.x}

    def test_output_is_a_copy(self):
        self.check_output(atol=0, rtol=0)
        out = get_op_def(self.op_type).forward(self.x)["Out"]
        assert out is not self.x and np.array_equal(out, self.x)

    def test_grad(self):
        self.check_grad(["X"], "Out")

    def test_no_upstream_gradient_gives_zeros(self):
        g = get_op_def(self.op_type).backward(self.x, self.x, None)["X"]
        assert g.shape == self.x.shape and not g.any()
