"""Mutation-round tests for fluidlite/ops/py_func.py.

Reference: fluid 1.8's py_func_op.cc / layers.py_func: the forward callable gets the X tensors
(LoDTensor) and returns the Out values (one, a tuple, or None); the grad op calls
backward_callable(X..., Out..., dOut...) with the ``skip_vars_in_backward_input`` left out, and
writes X@GRAD; a py_func without a backward callable has no gradient op.
"""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core.registry import get_op_def
from fluidlite.ops.py_func import get_callable, register_callable


def test_forward_returns_one_a_tuple_or_none():
    op = get_op_def("py_func")
    seen = []

    def fwd(a, b):
        seen.append((type(a).__name__, np.array(a).tolist(), np.array(b).tolist()))
        return np.array(a) + np.array(b), None, [1, 2]
    fid = register_callable(fwd)
    out = op.forward([np.array([1.0]), np.array([2.0])], forward_callable_id=fid)["Out"]
    assert seen == [("LoDTensor", [1.0], [2.0])]
    assert out[0].tolist() == [3.0] and out[1] is None and out[2].tolist() == [1, 2]
    assert isinstance(out[2], np.ndarray)
    one = register_callable(lambda: np.zeros(2))
    assert op.forward(None, forward_callable_id=one)["Out"][0].tolist() == [0.0, 0.0]
    none = register_callable(lambda x: None)
    assert op.forward([np.ones(1)], forward_callable_id=none) == {"Out": []}


@pytest.mark.parametrize("idx", [-1, 10 ** 9])
def test_unknown_callable(idx):
    with pytest.raises(ValueError, match=rf"^py_func: no Python callable with id {idx} is "
                                         r"registered in this process \(programs holding py_func "
                                         r"ops cannot be run in another process\)$"):
        get_callable("py_func", idx)
    with pytest.raises(ValueError, match=rf"^py_func: no Python callable with id {idx}"):
        get_op_def("py_func").forward([np.ones(1)], forward_callable_id=idx)


def test_callable_ids_are_consecutive_and_kept():
    f, g = (lambda: 1), (lambda: 2)
    a, b = register_callable(f), register_callable(g)
    assert b == a + 1 and get_callable("py_func", a) is f and get_callable("py_func", b) is g


@pytest.mark.parametrize("skip", ["none", "x", "out"])
def test_backward_gets_x_out_and_dout_minus_the_skipped(skip):
    calls = []

    def fwd(x):
        return np.array(x) * 3.0

    def bwd(*args):
        calls.append(len(args))
        dout = np.array(args[-1])
        return dout * 3.0

    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [2, 2], "float32")
        x.stop_gradient = False
        out = main.current_block().create_var(name="pf_out", dtype="float32", shape=[2, 2])
        skip_var = {"none": None, "x": x, "out": out}[skip]
        fluid.layers.py_func(fwd, x, out, backward_func=bwd, skip_vars_in_backward_input=skip_var)
        loss = fluid.layers.reduce_sum(out)
        fluid.backward.append_backward(loss)
    grads = [op for op in main.global_block().ops if op.type == "py_func"]
    assert len(grads) == 2
    gop = grads[1]
    assert gop.output("Out") == ["x@GRAD"]
    assert gop.attr("backward_callable_id") == -1 and gop.attr("backward_skip_vars") == []
    want_in = {"none": ["x", "pf_out"], "x": ["pf_out"], "out": ["x"]}[skip] + ["pf_out@GRAD"]
    assert gop.input("X") == want_in
    exe = fluid.Executor(fluid.CPUPlace())
    xv = np.ones((2, 2), "float32")
    o, gx = exe.run(main, feed={"x": xv}, fetch_list=[out, "x@GRAD"], scope=fluid.Scope())
    np.testing.assert_array_equal(o, xv * 3)
    np.testing.assert_array_equal(gx, np.full((2, 2), 3.0))
    assert calls == [len(want_in)]


def test_no_backward_callable_means_no_grad_op():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [2], "float32")
        x.stop_gradient = False
        y = fluid.layers.scale(x, 2.0)
        out = main.current_block().create_var(name="pf2_out", dtype="float32", shape=[2])
        fluid.layers.py_func(lambda v: np.array(v), y, out)
        fluid.backward.append_backward(fluid.layers.reduce_sum(fluid.layers.elementwise_add(out, y)))
    assert [op.type for op in main.global_block().ops].count("py_func") == 1
