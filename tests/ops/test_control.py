"""Control-style ops: increment (and its layer)."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.testing import OpTest


class TestIncrement(OpTest):
    op_type = "increment"

    def setup_method(self, *_):
        self.inputs = {"X": np.array([5], "int64")}
        self.attrs = {"step": 2.0}
        self.outputs = {"Out": np.array([7], "int64")}

    def test_all(self):
        self.check_infer()
        self.check_output()

    def test_float_counter(self):
        self.inputs = {"X": np.array([0.5], "float32")}
        self.outputs = {"Out": np.array([2.5], "float32")}
        self.check_output()

    def test_rejects_more_than_one_element(self):
        self.inputs = {"X": np.zeros([2], "int64")}
        with pytest.raises(ValueError, match="exactly one element"):
            self.check_infer()


def test_increment_layer_in_place_and_copy():
    counter = fluid.layers.create_global_var([1], 0, "int64", persistable=True, name="c") \
        if hasattr(fluid.layers, "create_global_var") else None
    block = fluid.default_main_program().global_block()
    if counter is None:
        counter = block.create_var(name="c", shape=[1], dtype="int64", persistable=True)
        fluid.default_startup_program().global_block().create_var(
            name="c", shape=[1], dtype="int64", persistable=True,
            initializer=fluid.initializer.Constant(0))
    same = fluid.layers.increment(counter, value=1.0, in_place=True)
    other = fluid.layers.increment(counter, value=10.0, in_place=False)
    assert same is counter and other.name != counter.name
    exe = fluid.Executor()
    exe.run(fluid.default_startup_program())
    for step in (1, 2):
        c, o = exe.run(fetch_list=[counter, other])
        assert c.tolist() == [step] and o.tolist() == [step + 10]
        assert c.dtype == np.int64
