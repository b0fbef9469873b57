"""Truth-testing a dygraph tensor as fluid 1.8's ``VarBase.__nonzero__`` does: one element,
true when it is > 0 (tests/real/zoo18_dygraph.py: the sentiment nets' ``if label:``)."""
import numpy as np
import pytest

import fluidlite as fluid


@pytest.mark.parametrize("value,dtype,want", [
    (1, "int64", True), (0, "int64", False), (-1, "int64", False), (0.5, "float32", True),
    (-0.5, "float32", False), (0.0, "float32", False), (True, "bool", True),
    (False, "bool", False)])
def test_one_element_tensor_is_true_when_positive(value, dtype, want):
    with fluid.dygraph.guard():
        t = fluid.dygraph.to_variable(np.array([[value]], dtype=dtype))
        assert bool(t) is want
        assert (True if t else False) is want


def test_several_elements_are_refused():
    with fluid.dygraph.guard():
        t = fluid.dygraph.to_variable(np.array([[1], [0]], dtype="int64"))
        with pytest.raises(ValueError, match="more than one element"):
            bool(t)
