"""fluid.op.Operator (fluidlite/op.py): one op run directly on a Scope's variables."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.op import Operator


def _scope(**arrays):
    scope = fluid.core.Scope()
    for name, value in arrays.items():
        arr, lod = value if isinstance(value, tuple) else (value, None)
        t = scope.var(name).get_tensor()
        t.set(arr, fluid.CPUPlace())
        if lod:
            t.set_recursive_sequence_lengths(lod)
    return scope


def test_run_reads_inputs_from_the_scope_and_writes_outputs_with_their_lod():
    x = np.arange(6, dtype="float32").reshape(3, 2)
    scope = _scope(x=(x, [[1, 2]]))
    op = Operator("scale", X="x", Out="y", scale=2.0, bias=1.0)
    assert op.type() == "scale" and op.input("X") == ["x"] and op.output("Out") == ["y"]
    assert op.attr("scale") == 2.0
    op.run(scope, fluid.CPUPlace())
    y = scope.find_var("y").get_tensor()
    np.testing.assert_array_equal(np.array(y), x * 2 + 1)
    assert y.recursive_sequence_lengths() == [[1, 2]]


def test_duplicable_slots_take_lists_of_names():
    a, b = np.ones((2, 2), "float64"), np.full((2, 2), 3.0)
    scope = _scope(a=a, b=b)
    Operator("sum", X=["a", "b"], Out="s").run(scope, fluid.CPUPlace())
    np.testing.assert_array_equal(np.array(scope.find_var("s").get_tensor()), a + b)


def test_an_uninitialized_input_and_an_unknown_op_are_refused():
    with pytest.raises(ValueError, match="input 'x' of slot 'X' is not initialized"):
        Operator("scale", X="x", Out="y").run(fluid.core.Scope(), fluid.CPUPlace())
    with pytest.raises(ValueError, match="not been registered"):
        Operator("no_such_op", X="x")
    with pytest.raises(TypeError, match="slot 'X' takes a variable name"):
        Operator("scale", X=3, Out="y")


def test_fluid18s_retired_rnn_op_factories_are_importable_and_say_they_are_retired():
    """fluid 1.8's fluid.op still exported RecurrentOp / DynamicRecurrentOp (its op tests
    import them) although the C++ classes behind them were gone: importing works, calling
    names the replacement."""
    from fluidlite.op import DynamicRecurrentOp, RecurrentOp
    with pytest.raises(AttributeError, match="fluid.layers.DynamicRNN"):
        DynamicRecurrentOp(inputs=["x"])
    with pytest.raises(AttributeError, match="fluid.layers.StaticRNN"):
        RecurrentOp()
