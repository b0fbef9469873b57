"""Control flow: While loops, tensor arrays, sub-blocks in the IR and the compiled plan."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core.dtypes import VarType

L = fluid.layers


def _run(main, startup, feed, fetch):
    exe = fluid.Executor()
    exe.run(startup)
    return exe.run(main, feed=feed, fetch_list=fetch), exe


def _rnn_program(steps=5, shape=(4, 3)):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", list(shape), "float32")
        W = L.create_parameter([shape[1], shape[1]], "float32", name="W")
        h = L.assign(x)
        i = L.fill_constant([1], "int64", 0)
        n = L.fill_constant([1], "int64", steps)
        arr = L.create_array("float32")
        c = L.less_than(i, n)
        loop = L.While(c)
        with loop.block():
            hn = L.tanh(L.elementwise_add(L.matmul(h, W), x))
            L.assign(hn, h)
            L.array_write(hn, i, array=arr)
            L.increment(i)
            L.less_than(i, n, cond=c)
        length = L.array_length(arr)
    return main, startup, dict(x=x, W=W, h=h, i=i, arr=arr, length=length, loop=loop)


def test_while_with_array_matches_numpy_loop():
    main, startup, v = _rnn_program()
    with fluid.program_guard(main, startup):
        third = L.array_read(v["arr"], L.fill_constant([1], "int64", 2))
    xv = np.random.RandomState(0).rand(4, 3).astype("float32")
    (h, n, third, i), _ = _run(main, startup, {"x": xv},
                               [v["h"], v["length"], third, v["i"]])
    W = np.array(fluid.global_scope().find_var("W").get_tensor())
    ref, hs = xv, []
    for _ in range(5):
        ref = np.tanh(ref @ W + xv)
        hs.append(ref)
    np.testing.assert_allclose(h, ref, rtol=1e-6)
    np.testing.assert_allclose(third, hs[2], rtol=1e-6)
    assert n.tolist() == [5] and i.tolist() == [5]


def test_while_ir_blocks_and_print():
    main, startup, v = _rnn_program()
    assert main.num_blocks == 2
    sub = main.block(1)
    assert sub.parent_idx == 0 and main.current_block_idx == 0
    wop = [op for op in main.global_block().ops if op.type == "while"][0]
    assert wop.attr("sub_block") is sub
    assert set(wop.output("Out")) == {v["h"].name, v["arr"].name, v["i"].name,
                                      wop.input("Condition")[0]}
    assert v["W"].name in wop.input("X") and v["x"].name in wop.input("X")
    # a variable declared in block 0 is found from block 1
    assert sub._var_recursive(v["W"].name) is v["W"]
    text = str(main)
    assert "{ // block 1" in text and "sub_block = block[1]" in text
    main.lint()


def test_while_zero_iterations_keeps_values():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [2], "float32")
        h = L.assign(x)
        i = L.fill_constant([1], "int64", 3)
        n = L.fill_constant([1], "int64", 3)
        c = L.less_than(i, n)
        loop = L.While(c)
        with loop.block():
            L.assign(L.scale(h, 2.0), h)
            L.increment(i)
            L.less_than(i, n, cond=c)
    (hv,), _ = _run(main, startup, {"x": np.array([1.0, 2.0], "float32")}, [h])
    assert hv.tolist() == [1.0, 2.0]


def test_nested_while():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        acc = L.fill_constant([1], "float32", 0.0)
        i = L.fill_constant([1], "int64", 0)
        n = L.fill_constant([1], "int64", 3)
        c1 = L.less_than(i, n)
        outer = L.While(c1)
        with outer.block():
            j = L.fill_constant([1], "int64", 0)
            c2 = L.less_than(j, i)
            inner = L.While(c2)
            with inner.block():
                L.assign(L.elementwise_add(acc, L.cast(j, "float32")), acc)
                L.increment(j)
                L.less_than(j, i, cond=c2)
            L.increment(i)
            L.less_than(i, n, cond=c1)
    (a,), _ = _run(main, startup, {}, [acc])
    assert a.tolist() == [0 + 0 + 1]        # i=1: j=0; i=2: j=0,1
    assert main.num_blocks == 3 and main.block(2).parent_idx == 1


def test_while_clone_and_serialize_round_trip():
    main, startup, v = _rnn_program()
    xv = np.random.RandomState(1).rand(4, 3).astype("float32")
    (ref,), exe = _run(main, startup, {"x": xv}, [v["h"]])
    for prog in (main.clone(), main.clone(for_test=True),
                 fluid.Program.from_dict(main.to_dict())):
        wop = [op for op in prog.global_block().ops if op.type == "while"][0]
        assert wop.attr("sub_block") is prog.block(1)
        assert str(prog).replace("is_test = True", "is_test = False") == str(main)
        got, = exe.run(prog, feed={"x": xv}, fetch_list=[v["h"].name])
        np.testing.assert_array_equal(got, ref)


def test_while_paddle_format_round_trip():
    from fluidlite.formats.paddle import program as pf
    main, startup, v = _rnn_program()
    back = pf.program_from_bytes(pf.program_to_bytes(main))
    assert back.num_blocks == 2 and back.block(1).parent_idx == 0
    wop = [op for op in back.global_block().ops if op.type == "while"][0]
    assert wop.attr("sub_block") is back.block(1)
    xv = np.random.RandomState(1).rand(4, 3).astype("float32")
    (ref,), exe = _run(main, startup, {"x": xv}, [v["h"]])
    got, = exe.run(back, feed={"x": xv}, fetch_list=[v["h"].name])
    np.testing.assert_array_equal(got, ref)


def test_while_error_names_op_block_and_iteration():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        i = L.fill_constant([1], "int64", 0)
        n = L.fill_constant([1], "int64", 5)
        arr = L.create_array("float32")
        L.array_write(L.fill_constant([2], "float32", 1.0), i, array=arr)
        c = L.less_than(i, n)
        loop = L.While(c)
        with loop.block():
            L.array_read(arr, i)      # past the end from iteration 1 on
            L.increment(i)
            L.less_than(i, n, cond=c)
    exe = fluid.Executor()
    exe.run(startup)
    with pytest.raises(IndexError) as e:
        exe.run(main)
    msg = str(e.value)
    assert "read_from_array" in msg and "block 1" in msg and "iteration 1" in msg
    assert "index 1 is out of range" in msg and arr.name in msg


def test_while_condition_must_be_bool_scalar():
    x = fluid.data("x", [3], "float32")
    with pytest.raises(TypeError, match="cond"):
        L.While(x)
    c = L.less_than(x, x)
    with pytest.raises(TypeError, match=r"cond '.*' must be a bool scalar.*\[3\]"):
        L.While(c)


def test_while_body_must_update_condition():
    i = L.fill_constant([1], "int64", 0)
    n = L.fill_constant([1], "int64", 5)
    c = L.less_than(i, n)
    loop = L.While(c)
    with pytest.raises(ValueError, match="never updates the condition"):
        with loop.block():
            L.increment(i)


def test_loop_variable_shape_change_is_an_error():
    h = L.fill_constant([2, 3], "float32", 1.0)
    i = L.fill_constant([1], "int64", 0)
    n = L.fill_constant([1], "int64", 5)
    c = L.less_than(i, n)
    loop = L.While(c)
    with pytest.raises(ValueError, match=rf"loop variable '{h.name}' changes.*\[2, 3\].*"
                                         r"\[2, 6\]"):
        with loop.block():
            L.assign(L.concat([h, h], axis=1), h)
            L.less_than(i, n, cond=c)
    assert list(h.shape) == [2, 3]


def test_array_ops_and_errors():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        a = L.fill_constant([2, 3], "float32", 1.0)
        b = L.fill_constant([2, 2], "float32", 2.0)
        i0 = L.fill_constant([1], "int64", 0)
        i1 = L.fill_constant([1], "int64", 1)
        arr = L.array_write(a, i0)
        L.array_write(b, i1, array=arr)
        out, idx = L.tensor_array_to_tensor(arr, axis=1)
        n = L.array_length(arr)
        with pytest.raises(TypeError, match="array_read: array must be a tensor array"):
            L.array_read(a, i0)
        with pytest.raises(TypeError, match="i"):
            L.array_read(arr, L.fill_constant([1], "float32", 0))
    (o, ix, nv), _ = _run(main, startup, {}, [out, idx, n])
    np.testing.assert_array_equal(o, np.concatenate([np.ones((2, 3)), 2 * np.ones((2, 2))], 1))
    assert ix.tolist() == [3, 2] and nv.tolist() == [2]
    assert arr.type == VarType.LOD_TENSOR_ARRAY


# -- branches -----------------------------------------------------------------------------------
def _cond_program(true_fn, false_fn):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [3], "float64")
        x.stop_gradient = False
        p = fluid.data("p", [1], "bool")
        out = L.cond(p, lambda: true_fn(x), lambda: false_fn(x))
        g, = fluid.backward.gradients(L.reduce_sum(out), [x])
    main.lint()
    return main, x, p, out, g


def test_cond_runs_taken_branch_and_its_gradient_only():
    main, x, p, out, g = _cond_program(lambda x: L.scale(L.square(x), 2.0), L.sin)
    exe = fluid.Executor()
    xv = np.array([1.0, 2.0, 3.0])
    o, gv = exe.run(main, feed={"x": xv, "p": np.array([True])}, fetch_list=[out, g])
    np.testing.assert_allclose(o, 2 * xv ** 2)
    np.testing.assert_allclose(gv, 4 * xv)
    o, gv = exe.run(main, feed={"x": xv, "p": np.array([False])}, fetch_list=[out, g])
    np.testing.assert_allclose(o, np.sin(xv))
    np.testing.assert_allclose(gv, np.cos(xv))
    assert sum(op.type == "conditional_block" for op in main.global_block().ops) == 2


def test_cond_branches_must_match():
    x = fluid.data("x", [3], "float32")
    p = fluid.data("p", [1], "bool")
    before = str(fluid.default_main_program())
    with pytest.raises(ValueError, match="true_fn returns Variable .* while false_fn returns "
                                         "tuple of 2"):
        L.cond(p, lambda: x, lambda: (x, x))
    with pytest.raises(ValueError, match="true_fn returns non-None while false_fn returns None"):
        L.cond(p, lambda: x, lambda: None)
    assert str(fluid.default_main_program()) == before      # atomic: nothing left behind
    # fluid 1.8 checks only the structure: shapes may differ (the output is declared with the
    # false branch's, select_input's inputs[0]); tests/test_fluid18_doc_fixes.py runs it
    assert L.cond(p, lambda: x, lambda: L.concat([x, x])).shape == (6,)
    with pytest.raises(TypeError, match="pred"):
        L.cond(x, lambda: x, lambda: x)


def test_cond_branches_of_different_dtypes_merge_into_the_common_dtype():
    # fluid 1.8 declared the false branch's dtype and handed on whichever branch ran (its
    # documented cond example fetches int32 [[1 1]] from an output declared float32); here
    # both values are cast to the dtype that holds both, and the output has that dtype
    x = fluid.data("x", [3], "float32")
    p = fluid.data("p", [1], "bool")
    x.stop_gradient = False
    with pytest.warns(UserWarning, match="output 0 is int64 in true_fn and float32 in false_fn; "
                                         "both are cast to float32"):
        a, b = L.cond(p, lambda: (L.cast(x, "int64"), L.fill_constant([2], "bool", True)),
                      lambda: (L.scale(x, 0.5), L.fill_constant([2], "int32", 7)))
    assert a.dtype == VarType.FP32 and b.dtype == VarType.INT32
    g, = fluid.gradients([L.reduce_sum(a)], [x])
    exe = fluid.Executor()
    xv = np.array([1.5, -2.5, 3.0], "float32")
    for taken, want_a, want_b, want_g in (
            (True, [1.0, -2.0, 3.0], [1, 1], [0.0, 0.0, 0.0]),  # cast to int: no gradient
            (False, [0.75, -1.25, 1.5], [7, 7], [0.5, 0.5, 0.5])):
        av, bv, gv = exe.run(feed={"x": xv, "p": np.array([taken])}, fetch_list=[a, b, g])
        assert av.dtype == np.float32 and bv.dtype == np.int32, taken
        assert av.tolist() == want_a and bv.tolist() == want_b and gv.tolist() == want_g


@pytest.mark.parametrize("t,f,want", [("int32", "float32", "float32"),
                                      ("float16", "int64", "float16"),
                                      ("float64", "float32", "float64"),
                                      ("bool", "uint8", "uint8"),
                                      ("uint8", "int8", "int16"),
                                      ("int64", "int32", "int64")])
def test_cond_common_dtype_is_order_free(t, f, want):
    from fluidlite.layers.control_flow import _common_dtype
    assert _common_dtype(t, f) == np.dtype(want) == _common_dtype(f, t)


def test_case_and_switch_case_of_mixed_dtypes_run_fluid18_documented_example():
    # fluid 1.8's layers.case docstring: res_1 from fn_1 (float32 [[1. 1.]]), res_2 from fn_3
    # (int32 [3 3 3]); the merged outputs are float32 here, with the same values
    fn_1 = lambda: L.fill_constant(shape=[1, 2], dtype="float32", value=1)  # noqa: E731
    fn_2 = lambda: L.fill_constant(shape=[2, 2], dtype="int32", value=2)    # noqa: E731
    fn_3 = lambda: L.fill_constant(shape=[3], dtype="int32", value=3)       # noqa: E731
    x = L.fill_constant(shape=[1], dtype="float32", value=0.3)
    y = L.fill_constant(shape=[1], dtype="float32", value=0.1)
    z = L.fill_constant(shape=[1], dtype="float32", value=0.2)
    with pytest.warns(UserWarning, match="cast to float32"):
        out_1 = L.case(pred_fn_pairs=[(L.less_than(z, x), fn_1), (L.less_than(x, y), fn_2)],
                       default=fn_3)
    out_2 = L.case(pred_fn_pairs=[(L.less_than(x, y), fn_2), (L.equal(x, y), fn_3)])
    with pytest.warns(UserWarning, match="cast to float32"):
        out_3 = L.switch_case(L.fill_constant([1], "int32", 2), [fn_1, fn_2, fn_3])
    res_1, res_2, res_3 = fluid.Executor().run(fetch_list=[out_1, out_2, out_3])
    assert res_1.dtype == np.float32 and res_1.tolist() == [[1.0, 1.0]]
    assert res_2.dtype == np.int32 and res_2.tolist() == [3, 3, 3]
    assert res_3.dtype == np.float32 and res_3.tolist() == [3.0, 3.0, 3.0]


def test_cond_nested_structure():
    x = fluid.data("x", [2], "float32")
    p = L.fill_constant([1], "bool", True)
    out = L.cond(p, lambda: {"a": x, "b": [L.scale(x, 2.0)]},
                 lambda: {"a": L.scale(x, 3.0), "b": [x]})
    exe = fluid.Executor()
    a, b = exe.run(feed={"x": np.array([1.0, 2.0], "float32")}, fetch_list=[out["a"],
                                                                           out["b"][0]])
    assert a.tolist() == [1.0, 2.0] and b.tolist() == [2.0, 4.0]


def test_case_and_switch_case():
    x = fluid.data("x", [1], "float32")
    one, two = L.fill_constant([1], "float32", 1.0), L.fill_constant([1], "float32", 2.0)
    out = L.case([(L.less_than(x, one), lambda: L.fill_constant([1], "float32", 10.0)),
                  (L.less_than(x, two), lambda: L.fill_constant([1], "float32", 20.0))],
                 default=lambda: L.fill_constant([1], "float32", 30.0))
    idx = fluid.data("idx", [1], "int64")
    sw = L.switch_case(idx, {1: lambda: L.fill_constant([1], "float32", 1.0),
                             3: lambda: L.fill_constant([1], "float32", 3.0)},
                       default=lambda: L.fill_constant([1], "float32", -1.0))
    sw2 = L.switch_case(idx, [lambda: L.fill_constant([1], "float32", 0.0),
                              lambda: L.fill_constant([1], "float32", 1.0)])
    exe = fluid.Executor()
    got = []
    for xv, iv in ((0.5, 1), (1.5, 3), (2.5, 7), (2.5, 0)):
        got.append([float(v[0]) for v in exe.run(
            feed={"x": np.array([xv], "float32"), "idx": np.array([iv])},
            fetch_list=[out, sw, sw2])])
    assert got == [[10, 1, 1], [20, 3, 1], [30, -1, 1], [30, -1, 0]]


def test_switch_piecewise():
    x = fluid.data("x", [1], "float32")
    res = L.create_global_var([1], 0.0, "float32", persistable=True, name="res")
    with L.Switch() as s:
        with s.case(L.less_than(x, L.fill_constant([1], "float32", 1.0))):
            L.assign(L.fill_constant([1], "float32", 1.0), res)
        with s.case(L.less_than(x, L.fill_constant([1], "float32", 2.0))):
            L.assign(L.fill_constant([1], "float32", 2.0), res)
        with s.default():
            L.assign(L.fill_constant([1], "float32", 3.0), res)
    exe = fluid.Executor()
    exe.run(fluid.default_startup_program())
    vals = [float(exe.run(feed={"x": np.array([v], "float32")}, fetch_list=[res])[0][0])
            for v in (0.0, 1.5, 5.0)]
    assert vals == [1.0, 2.0, 3.0]
    with pytest.raises(ValueError, match="inside"):
        L.Switch().case(L.less_than(x, x))


def test_while_loop_layer():
    i = L.fill_constant([1], "int64", 0)
    s = L.fill_constant([1], "float32", 0.0)
    ten = L.fill_constant([1], "int64", 10)
    i_out, s_out = L.while_loop(lambda i, s: L.less_than(i, ten),
                                lambda i, s: [L.increment(i, in_place=False),
                                              L.elementwise_add(s, L.cast(i, "float32"))],
                                [i, s])
    exe = fluid.Executor()
    iv, sv = exe.run(fetch_list=[i_out, s_out])
    assert iv.tolist() == [10] and sv.tolist() == [45.0]
    with pytest.raises(ValueError, match="same arity"):
        L.while_loop(lambda i, s: L.less_than(i, ten), lambda i, s: [i], [i, s])


def test_while_loop_body_may_return_another_loop_variable():
    """``(a, b) = (a + b, a)``: every output reads the loop variables' values from before the
    step (1.8 assigned the outputs in order, so ``b`` got the new ``a``)."""
    def fib(a, b, n):
        i = L.fill_constant([1], "int64", 0)
        return L.while_loop(lambda i, a, b: L.less_than(i, n),
                            lambda i, a, b: [L.increment(i, in_place=False),
                                             L.elementwise_add(a, b), a], [i, a, b])

    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [1], "float32")
        x.stop_gradient = False
        n = fluid.data("n", [1], "int64")
        zero = L.fill_constant([1], "float32", 0.0)
        zero.stop_gradient = False      # a loop variable: gradients flow through it (as fluid)
        _, a, b = fib(x, zero, n)
        loss = L.reduce_sum(a * 2.0 + b)
        (dx,) = fluid.gradients([loss], [x])
    exe = fluid.Executor()
    exe.run(startup)
    for steps in range(7):
        got = exe.run(main, feed={"x": np.array([1.0], "float32"),
                                  "n": np.array([steps], "int64")}, fetch_list=[a, b, dx])
        f = [1.0, 0.0]          # (a, b) after k steps: (F(k+1), F(k)), linear in x
        for _ in range(steps):
            f = [f[0] + f[1], f[0]]
        assert got[0].tolist() == [f[0]] and got[1].tolist() == [f[1]]
        assert got[2].tolist() == [2.0 * f[0] + f[1]]
    with fluid.dygraph.guard():
        x = fluid.dygraph.to_variable(np.array([1.0], "float32"))
        zero = fluid.dygraph.to_variable(np.array([0.0], "float32"))
        n = fluid.dygraph.to_variable(np.array([6], "int64"))
        _, a, b = fib(x, zero, n)
        assert (a.numpy().tolist(), b.numpy().tolist()) == ([13.0], [8.0])


def test_dygraph_control_flow_runs_in_python():
    with fluid.dygraph.guard():
        x = fluid.dygraph.to_variable(np.array([1.0, 2.0], "float32"))
        p = fluid.dygraph.to_variable(np.array([False]))
        out = L.cond(p, lambda: L.scale(x, 2.0), lambda: L.scale(x, 3.0))
        assert out.numpy().tolist() == [3.0, 6.0]
        i = fluid.dygraph.to_variable(np.array([0], "int64"))
        ten = fluid.dygraph.to_variable(np.array([4], "int64"))
        i_out, = L.while_loop(lambda i: L.less_than(i, ten),
                              lambda i: [L.increment(i, in_place=False)], [i])
        assert i_out.numpy().tolist() == [4]
        arr = L.create_array("float32")
        L.array_write(x, fluid.dygraph.to_variable(np.array([0], "int64")), array=arr)
        assert isinstance(arr, list) and L.array_length(arr).numpy().tolist() == [1]
        idx = fluid.dygraph.to_variable(np.array([1], "int64"))
        assert L.switch_case(idx, [lambda: x, lambda: L.scale(x, 5.0)]).numpy().tolist() \
            == [5.0, 10.0]
        with pytest.raises(RuntimeError, match="While .* dygraph mode; use a Python while"):
            L.While(p)


def test_assert_and_is_empty():
    x = fluid.data("x", [-1], "float32")
    L.Assert(L.logical_not(L.is_empty(x)), [x])
    y = L.scale(x, 2.0)
    exe = fluid.Executor()
    assert exe.run(feed={"x": np.array([1.0], "float32")}, fetch_list=[y])[0].tolist() == [2.0]
    with pytest.raises(ValueError, match="Assert failed"):
        exe.run(feed={"x": np.zeros((0,), "float32")}, fetch_list=[y])


def test_viz_draws_sub_blocks_as_clusters_attached_to_their_op():
    import json
    import fluidlite.viz as viz
    main, startup, v = _rnn_program()
    with fluid.program_guard(main, startup):
        fluid.backward.append_backward(L.mean(v["h"]))
    owners = {int(b): o for b, o in json.loads(
        viz.to_networkx(main, sub_blocks=True).graph["fl_sub_block_owners"]).items()}
    wop = [i for i, op in enumerate(main.global_block().ops) if op.type == "while"][0]
    gop = [i for i, op in enumerate(main.global_block().ops) if op.type == "while_grad"][0]
    assert owners == {1: f"op:0:{wop}", 2: f"op:0:{gop}"}
    dot = viz.to_dot(main)
    assert 'subgraph "cluster_block_1"' in dot and 'subgraph "cluster_block_2"' in dot
    assert f'"op:0:{wop}" -> "op:1:0" [lhead="cluster_block_1"' in dot
    doc = viz.to_node_link(main)
    blocks = {n["id"]: n["fl_block"] for n in doc["nodes"]}
    assert blocks["op:1:0"] == 1 and blocks["var:tanh_0.tmp_0"] == 1
    assert json.loads(doc["graph"]["fl_sub_block_owners"])["1"] == f"op:0:{wop}"
    # block 0 alone when asked
    assert "op:1:0" not in viz.to_networkx(main)


def test_nested_while_viz_clusters_nest():
    import fluidlite.viz as viz
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        i = L.fill_constant([1], "int64", 0)
        n = L.fill_constant([1], "int64", 2)
        c1 = L.less_than(i, n)
        outer = L.While(c1)
        with outer.block():
            j = L.fill_constant([1], "int64", 0)
            c2 = L.less_than(j, n)
            inner = L.While(c2)
            with inner.block():
                L.increment(j)
                L.less_than(j, n, cond=c2)
            L.increment(i)
            L.less_than(i, n, cond=c1)
    dot = viz.to_dot(main)
    outer_at = dot.index('subgraph "cluster_block_1"')
    inner_at = dot.index('subgraph "cluster_block_2"')
    assert outer_at < inner_at and dot[outer_at:inner_at].count("}") == 0


def test_loop_variable_may_change_its_shape_at_run_time():
    """fluid 1.8's WhileOp (and Paddle 2.6's, which gives [5, 2] here) lets a loop variable
    change its shape between iterations -- the transformer's fast_decode grows its ids from
    batch to batch * beam rows; fluidlite used to refuse it at run time."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 2], "float32")
        h = L.assign(x)
        i = L.fill_constant([1], "int64", 0)
        n = L.fill_constant([1], "int64", 3)
        c = L.less_than(i, n)
        loop = L.While(c)
        with loop.block():
            # rows grow each iteration: the declared shape [-1, 2] cannot tell at build time
            L.assign(L.concat([h, L.slice(h, axes=[0], starts=[0], ends=[1])], axis=0), h)
            L.increment(i)
            L.less_than(i, n, cond=c)
    exe = fluid.Executor()
    xs = np.arange(4, dtype="float32").reshape(2, 2)
    (got,) = exe.run(main, feed={"x": xs}, fetch_list=[h])
    np.testing.assert_array_equal(got, np.concatenate([xs, xs[:1], xs[:1], xs[:1]]))


def test_failed_loop_body_leaves_program_unchanged():
    main = fluid.default_main_program()
    i = L.fill_constant([1], "int64", 0)
    n = L.fill_constant([1], "int64", 5)
    c = L.less_than(i, n)
    before = (main.num_blocks, str(main))
    loop = L.While(c)
    with pytest.raises(ZeroDivisionError):
        with loop.block():
            L.increment(i)
            1 / 0
    assert (main.num_blocks, str(main)) == before and main.current_block_idx == 0
    with pytest.raises(ValueError, match="Incompatible"):
        L.cond(c, lambda: i, lambda: (i, i))
    assert (main.num_blocks, str(main)) == before


def test_backward_program_round_trips_and_prunes():
    from fluidlite.formats.paddle import program as pf
    main, startup, v = _rnn_program()
    with fluid.program_guard(main, startup):
        loss = L.mean(v["h"])
        fluid.optimizer.SGD(0.1).minimize(loss)
    main.lint()
    xv = np.random.RandomState(2).rand(4, 3).astype("float32")
    exe = fluid.Executor()
    copies = [fluid.Program.from_dict(main.to_dict()), pf.program_from_bytes(
        pf.program_to_bytes(main)), main.clone()]
    results = []
    for prog in [main] + copies:
        scope = fluid.Scope()
        exe.run(startup, scope=scope)
        results.append([exe.run(prog, feed={"x": xv}, fetch_list=[loss.name], scope=scope)[0]
                        for _ in range(3)])
        gb = [b for b in prog.blocks if b.forward_block_idx >= 0]
        assert len(gb) == 1 and gb[0].forward_block_idx == 1
    for prog in (main, copies[0], copies[2]):     # (Paddle's format keeps no is_data flag)
        prog.lint()
    for r in results[1:]:
        np.testing.assert_array_equal(np.array(r), np.array(results[0]))
    assert results[0][2] < results[0][0]          # SGD through the loop lowers the loss
    pruned = main._prune_with_input(["x"], [v["h"]])
    assert [op.type for op in pruned.global_block().ops].count("while") == 1
    assert not any(op.type.endswith("_grad") for op in pruned.global_block().ops)
    exe.run(startup)
    got, = exe.run(pruned, feed={"x": xv}, fetch_list=[v["h"].name])
    assert got.shape == (4, 3)


def test_inference_model_with_a_loop(tmp_path):
    main, startup, v = _rnn_program()
    exe = fluid.Executor()
    exe.run(startup)
    xv = np.random.RandomState(4).rand(4, 3).astype("float32")
    ref, = exe.run(main, feed={"x": xv}, fetch_list=[v["h"]])
    fluid.io.save_inference_model(str(tmp_path), ["x"], [v["h"]], exe, main_program=main)
    prog, feeds, fetches = fluid.io.load_inference_model(str(tmp_path), exe)
    assert prog.num_blocks >= 2
    got, = exe.run(prog, feed={feeds[0]: xv}, fetch_list=fetches)
    np.testing.assert_allclose(got, ref, rtol=1e-6)


def test_lr_schedules_use_switch_blocks_as_fluid():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        pw = L.piecewise_decay([2, 4], [1.0, 0.5, 0.1])
        warm = L.linear_lr_warmup(0.3, 3, 0.0, 0.3)
        poly = L.polynomial_decay(1.0, 2, end_learning_rate=0.0, power=1.0, cycle=True)
    types = [op.type for op in main.global_block().ops]
    assert types.count("conditional_block") == 3 + 2 + 1      # cases + defaults, one cycle
    from fluidlite.core.ir import OpRole
    assert {op.attr("op_role") for b in main.blocks[1:] for op in b.ops} == {OpRole.LRSched}
    main.lint()
    exe = fluid.Executor()
    exe.run(startup)
    got = [[float(v[0]) for v in exe.run(main, fetch_list=[pw, warm, poly])]
           for _ in range(6)]
    np.testing.assert_allclose([g[0] for g in got], [1.0, 1.0, 0.5, 0.5, 0.1, 0.1])
    np.testing.assert_allclose([g[1] for g in got], [0.0, 0.1, 0.2, 0.3, 0.3, 0.3], rtol=1e-6)
    # cycle: t=0 -> decay over 2 steps (ceil(0/2) replaced by 1), t=2 -> 1-2/2, t=3 -> 1-3/4
    np.testing.assert_allclose([g[2] for g in got], [1.0, 0.5, 0.0, 0.25, 0.0, 1 / 6],
                               rtol=1e-6, atol=1e-7)


# -- tensor arrays keep the LoD of their elements ------------------------------------------------
def _lod_arrays_program(through_loop):
    """x (2 sequences) and y (3 sequences) written to an array (through a While copying each
    element when ``through_loop``), read back and sequence-pooled: the pools only come out
    right when every element kept its own LoD."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, 2], "float64", lod_level=1)
        y = fluid.data("y", [None, 2], "float64", lod_level=1)
        zero = L.fill_constant([1], "int64", 0)
        one = L.fill_constant([1], "int64", 1)
        arr = L.array_write(x, zero)
        L.array_write(y, one, arr)
        if through_loop:
            out = L.create_array("float64")
            i = L.fill_constant([1], "int64", 0)
            n = L.array_length(arr)
            c = L.less_than(i, n)
            loop = L.While(c)
            with loop.block():
                L.array_write(L.scale(L.array_read(arr, i), 2.0), i, out)
                L.increment(i, in_place=True)
                L.less_than(i, n, cond=c)
            arr = out
        rx, ry = L.array_read(arr, zero), L.array_read(arr, one)
        px, py = L.sequence_pool(rx, "sum"), L.sequence_pool(ry, "sum")
    return main, startup, rx, ry, px, py


@pytest.mark.parametrize("through_loop", [False, True])
def test_tensor_array_elements_keep_their_lod(through_loop):
    main, startup, rx, ry, px, py = _lod_arrays_program(through_loop)
    xv = np.arange(10, dtype="float64").reshape(5, 2)
    yv = np.arange(12, dtype="float64").reshape(6, 2) * -1
    feed = {"x": fluid.create_lod_tensor(xv, [[2, 3]], fluid.CPUPlace()),
            "y": fluid.create_lod_tensor(yv, [[1, 1, 4]], fluid.CPUPlace())}
    exe = fluid.Executor()
    exe.run(startup)
    gx, gy, gpx, gpy = exe.run(main, feed=feed, fetch_list=[rx, ry, px, py],
                               return_numpy=False)
    k = 2.0 if through_loop else 1.0
    assert gx.recursive_sequence_lengths() == [[2, 3]]
    assert gy.recursive_sequence_lengths() == [[1, 1, 4]]
    np.testing.assert_allclose(np.asarray(gpx), k * np.stack([xv[:2].sum(0), xv[2:].sum(0)]))
    np.testing.assert_allclose(np.asarray(gpy), k * np.stack([yv[:1].sum(0), yv[1:2].sum(0),
                                                              yv[2:].sum(0)]))


def test_tensor_array_lod_gradient():
    """The gradient through write / read of a LoD element (sequence_pool after the read)."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, 2], "float64", lod_level=1)
        x.stop_gradient = False
        arr = L.array_write(L.scale(x, 3.0), L.fill_constant([1], "int64", 1))
        r = L.array_read(arr, L.fill_constant([1], "int64", 1))
        loss = L.reduce_sum(L.square(L.sequence_pool(r, "sum")))
        g, = fluid.gradients(loss, [x])
    xv = np.random.default_rng(1).uniform(-1, 1, (5, 2))
    feed = {"x": fluid.create_lod_tensor(xv, [[3, 2]], fluid.CPUPlace())}
    exe = fluid.Executor()
    exe.run(startup)
    got, = exe.run(main, feed=feed, fetch_list=[g])
    seg = np.repeat([0, 1], [3, 2])
    pooled = np.stack([3 * xv[:3].sum(0), 3 * xv[3:].sum(0)])
    np.testing.assert_allclose(got, 2 * pooled[seg] * 3)
