"""``fluid.layers.mean`` raises fluid 1.8's TypeError for an integer input (1.8's
test_mean_op.py error case); float16 is taken."""
import pytest

import fluidlite as fluid

L = fluid.layers


def test_mean_of_an_integer_input_is_a_type_error():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.data("x", [12, 10], "int32")
        with pytest.raises(TypeError, match=r"'x' in mean must be .*float.*received int32"):
            L.mean(x)
        assert L.mean(fluid.data("h", [12, 10], "float16")).dtype == \
            fluid.core.VarDesc.VarType.FP16
