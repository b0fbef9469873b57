"""Tests written from mutation testing (issue 28, docs/mutation.md) for ``fluidlite/backward.py``:
recompute (``append_backward(checkpoints=...)``) with several segments and a value that crosses
a segment boundary. What recompute promises: the same gradients as without checkpoints, and a
backward pass that reads a segment's intermediates only as recomputed copies, each replayed
right before the gradients of its own segment; random ops are never replayed.
The reference gradients come from the same network built without checkpoints."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.backward import append_backward
from fluidlite.core.ir import OpRole

L = fluid.layers


def _net(dropout=False):
    """x -> 7 tanh layers, checkpoints after layers 2, 4 and 6; layer 3's output also feeds
    layer 6 (it crosses from the first recomputed segment into the second)."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 3])
        h = {0: x}
        for i in range(1, 8):
            inp = L.elementwise_add(h[i - 1], h[3]) if i == 6 else h[i - 1]
            h[i] = L.fc(inp, 3, act="tanh")
            if dropout and i == 3:
                h[i] = L.dropout(h[i], 0.0, dropout_implementation="upscale_in_train")
        loss = L.mean(h[7])
    return main, startup, h, loss


def _producers(ops):
    return {n: k for k, op in enumerate(ops) for n in op.output_arg_names}


def _run(main, startup, fetch, xv):
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    return exe.run(main, feed={"x": xv}, fetch_list=fetch, scope=scope)


def _with_checkpoints(dropout=False):
    main, startup, h, loss = _net(dropout)
    n_fwd = len(main.global_block().ops)
    with fluid.program_guard(main, startup):
        pg, _ = append_backward(loss, checkpoints=[h[2], h[4], h[6]])
    return main, startup, h, pg, n_fwd


def test_several_segments_give_the_gradients_of_the_plain_backward():
    ref_main, ref_startup, _, ref_loss = _net()
    with fluid.program_guard(ref_main, ref_startup):
        ref_pg = append_backward(ref_loss)
    main, startup, _, pg, _ = _with_checkpoints()
    assert [p.name for p, _ in pg] == [p.name for p, _ in ref_pg]
    xv = np.random.default_rng(4).normal(size=(5, 3)).astype("float32")
    got = _run(main, startup, [g for _, g in pg], xv)
    want = _run(ref_main, ref_startup, [g for _, g in ref_pg], xv)
    for (p, _), a, b in zip(pg, got, want):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7, err_msg=p.name)


def _segment_locals(main, h, n_fwd):
    """Per recomputed segment (between consecutive checkpoints), the forward variables its ops
    write that are used only inside it (not the checkpoints, not h[3])."""
    fwd = main.global_block().ops[:n_fwd]
    prod = _producers(fwd)
    bounds = [prod[h[2].name], prod[h[4].name], prod[h[6].name]]
    out = []
    for a, b in zip(bounds, bounds[1:]):
        names = {n for op in fwd[a + 1:b + 1] for n in op.output_arg_names}
        used_outside = {n for k, op in enumerate(fwd) if not a < k <= b
                        for n in op.input_arg_names}
        out.append(sorted(n for n in names - used_outside
                          if n not in (h[4].name, h[6].name)))
    return out


def test_the_backward_reads_a_segments_intermediates_only_as_recomputed_copies():
    main, _, h, _, n_fwd = _with_checkpoints()
    ops = main.global_block().ops
    bwd = ops[n_fwd:]
    read = {n for op in bwd for n in op.input_arg_names}
    segments = _segment_locals(main, h, n_fwd)
    assert all(segments), segments
    first_use = {}
    for k, op in enumerate(bwd):
        for n in op.input_arg_names:
            first_use.setdefault(n, k)
    writer = _producers(bwd)
    for names in segments:
        for n in names:
            assert n not in read, f"the backward reads the original {n}"
            copies = [c for c in writer if c.startswith(n + ".subprog_")]
            assert len(copies) == 1, (n, copies)
            replay = bwd[writer[copies[0]]]
            assert replay.type == ops[_producers(ops[:n_fwd])[n]].type
            assert replay.attr("op_role") == OpRole.Backward
            assert "op_role_var" not in replay.attrs
            # a copy no gradient needs (an add feeding a held tanh) may go unread
            assert writer[copies[0]] < first_use.get(copies[0], len(bwd))
    # the value crossing into the second segment is held (kept from the forward pass, never
    # replayed) and read under its own name
    assert h[3].name in read
    assert not any(c.startswith(h[3].name + ".subprog_") for c in writer)


def test_segments_are_replayed_last_first_each_right_before_its_gradients():
    main, _, h, _, n_fwd = _with_checkpoints()
    bwd = main.global_block().ops[n_fwd:]
    writer = _producers(bwd)
    first, second = _segment_locals(main, h, n_fwd)

    def replay_span(names):
        ks = [writer[c] for c in writer for n in names if c.startswith(n + ".subprog_")]
        return min(ks), max(ks)
    a1, b1 = replay_span(first)
    a2, b2 = replay_span(second)
    assert b2 < a1, "the second segment's replay must come first (the backward runs backwards)"
    # between the second segment's replay and the first's, the second segment's gradient ops
    grads_between = [op.type for op in bwd[b2 + 1:a1]]
    assert grads_between and all(t.endswith("_grad") or t in ("sum", "fill_constant",
                                                               "fill_zeros_like")
                                 for t in grads_between), grads_between
    # no gradient op of the first segment runs before its replay
    names1 = set(first)
    for op in bwd[:a1]:
        assert not any(n.split(".subprog_")[0] in names1 and ".subprog_" in n
                       for n in op.input_arg_names), op.type


def test_a_dropout_without_a_seed_inside_a_segment_is_never_replayed():
    main, _, h, _, n_fwd = _with_checkpoints(dropout=True)
    ops = main.global_block().ops
    drop = next(op for op in ops[:n_fwd] if op.type == "dropout")
    assert not drop.input("Seed")
    bwd = ops[n_fwd:]
    assert "dropout" not in [op.type for op in bwd]
    read = {n for op in bwd for n in op.input_arg_names}
    assert drop.output("Mask")[0] in read                   # its mask is held, not redrawn
    assert not any(n.startswith(drop.output("Out")[0] + ".subprog_") for n in read)


@pytest.mark.parametrize("ckpt", [[1], [2, 3]])
def test_checkpoints_at_neighbouring_or_first_layers_replay_nothing_there(ckpt):
    # a checkpoint produced by the first op, or two checkpoints with nothing between them,
    # leave no segment to recompute there; gradients are unchanged
    main, startup, h, loss = _net()
    n_fwd = len(main.global_block().ops)
    fwd = main.global_block().ops[:n_fwd]
    first = fwd[0].output_arg_names[0]
    names = [first] if ckpt == [1] else [h[2].name, fwd[_producers(fwd)[h[2].name] + 1]
                                          .output_arg_names[0]]
    with fluid.program_guard(main, startup):
        pg, _ = append_backward(loss, checkpoints=names)
    bwd = main.global_block().ops[n_fwd:]
    assert not any(".subprog_" in n for op in bwd for n in op.output_arg_names)
    ref_main, ref_startup, _, ref_loss = _net()
    with fluid.program_guard(ref_main, ref_startup):
        ref_pg = append_backward(ref_loss)
    xv = np.random.default_rng(5).normal(size=(2, 3)).astype("float32")
    for a, b in zip(_run(main, startup, [g for _, g in pg], xv),
                    _run(ref_main, ref_startup, [g for _, g in ref_pg], xv)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


# -- argument errors: fluid 1.8's check_type wording ("The type of '<arg>' in <api> must be
# <expected>, but received <type>. ") -------------------------------------------------------
def _small():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 3])
        h = L.fc(x, 2, act="tanh")
        loss = L.mean(h)
    return main, startup, x, h, loss


def _type_msg(arg, expected, value, api="fluid.backward.append_backward"):
    import re
    return "^" + re.escape(f"The type of '{arg}' in {api} must be {expected}, but received "
                           f"{type(value)}. ") + "$"


@pytest.mark.parametrize("kwarg,bad,arg,expected", [
    ("callbacks", 3, "callbacks", "<class 'list'>"),
    ("checkpoints", "h", "checkpoints", "<class 'list'>"),
    ("checkpoints", [3], "checkpoints[0]", "(Variable, str)"),
    ("parameter_list", [3.5], "parameter_list[0]", "(Variable, str)")])
def test_append_backward_argument_types_are_refused_as_fluid_words_it(kwarg, bad, arg, expected):
    main, startup, _, _, loss = _small()
    value = bad[0] if isinstance(bad, list) else bad
    with fluid.program_guard(main, startup), pytest.raises(TypeError) as e:
        append_backward(loss, **{kwarg: bad})
    assert e.match(_type_msg(arg, expected, value))
    assert len(main.global_block().ops) == 3 + 1        # fc (mul, add, tanh) + mean: unchanged


def test_a_loss_that_is_no_variable_is_refused_as_fluid_words_it():
    with pytest.raises(TypeError) as e:
        append_backward("loss")
    assert e.match(_type_msg("loss", str(fluid.framework.Variable), "loss"))


@pytest.mark.parametrize("kwarg", ["parameter_list", "checkpoints"])
def test_variables_of_another_program_are_refused_naming_argument_and_variable(kwarg):
    main, startup, _, _, loss = _small()
    _, _, _, other_h, _ = _small()
    with fluid.program_guard(main, startup), pytest.raises(ValueError) as e:
        append_backward(loss, **{kwarg: [other_h]})
    assert str(e.value).startswith(f"fluid.backward.append_backward: {kwarg}[0] "
                                   f"'{other_h.name}' belongs to a different Program")


def test_an_integer_loss_is_refused_naming_it_and_its_dtype():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, 3], "int64")
        loss = L.reduce_sum(x)
        with pytest.raises(TypeError, match=rf"^fluid\.backward\.append_backward: the loss "
                                            rf"'{loss.name}' is int64, but a loss must be "
                                            r"float16, float32 or float64"):
            append_backward(loss)


def test_a_loss_of_more_than_one_element_is_refused_whatever_its_last_dim():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [2, 1])
        loss = L.scale(x, 2.0)                              # 2 elements, last dim 1
        with pytest.raises(ValueError, match=r"loss\.shape should be \(1L,\), but the current "
                                             r"loss\.shape is \(2, 1\)"):
            append_backward(loss)


def test_gradients_refuses_bad_target_gradients_as_fluid_words_it():
    main, startup, x, h, _ = _small()
    with fluid.program_guard(main, startup), pytest.raises(TypeError) as e:
        fluid.backward.gradients([h], [x], target_gradients=3)
    assert e.match(_type_msg("target_gradients", "(Variable, list, tuple, None)", 3,
                             api="fluid.backward.gradients"))


def test_calc_gradient_passes_target_gradients_and_no_grad_set_through():
    # d(sum(w * h))/dx with upstream weights w, against 2 * x for h = x * x
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [2, 3])
        x.stop_gradient = False
        h = L.elementwise_mul(x, x)
        w = fluid.data("w", [2, 3])
        g = fluid.backward.calc_gradient(h, x, target_gradients=w)
        assert fluid.backward.calc_gradient(h, x, no_grad_set={x.name}) is None
    xv = np.arange(6, dtype="float32").reshape(2, 3) - 2
    wv = np.random.default_rng(7).normal(size=(2, 3)).astype("float32")
    out, = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": xv, "w": wv}, fetch_list=[g])
    np.testing.assert_allclose(out, 2 * xv * wv, rtol=1e-6)


def test_differentiating_an_inference_while_is_refused_with_the_fix():
    # a While built with is_test=True keeps no per-iteration values: fluid cannot run its
    # gradient either; the error says how to build it instead
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [1, 3])
        x.stop_gradient = False
        acc = L.scale(x, 1.0)
        i = L.fill_constant([1], "int64", 0)
        n = L.fill_constant([1], "int64", 2)
        cond = L.less_than(i, n)
        w = L.While(cond, is_test=True)
        with w.block():
            L.assign(L.scale(acc, 2.0), acc)
            L.increment(i, in_place=True)
            L.less_than(i, n, cond=cond)
        loss = L.mean(acc)
        with pytest.raises(ValueError, match=r"^cannot differentiate a While built with "
                                             r"is_test=True \(an inference loop keeps no "
                                             r"per-iteration values\); build it with "
                                             r"is_test=False$"):
            append_backward(loss)


# -- fourth round (docs/mutation.md): gradients()' argument errors in fluid 1.8's check_type
# wording, the program left unchanged ------------------------------------------------------------
_GAPI = "fluid.backward.gradients"


def _unchanged_after(main, fn, exc):
    version, n_ops = main.version, len(main.global_block().ops)
    with pytest.raises(exc) as e:
        fn()
    assert main.version == version and len(main.global_block().ops) == n_ops
    return e


@pytest.mark.parametrize("args,arg,expected,value", [
    ((3, "X"), "targets", "(Variable, list, tuple)", 3),
    (("H", {"x"}), "inputs", "(Variable, list, tuple)", {"x"}),
    ((["H", 2.5], "X"), "targets[1]", "Variable", 2.5),
    (("H", ["X", None]), "inputs[1]", "Variable", None)])
def test_gradients_argument_types_are_refused_as_fluid_words_it(args, arg, expected, value):
    main, _, x, h, _ = _small()
    sub = {"H": h, "X": x}
    real = [sub.get(a, a) if isinstance(a, str) else
            [sub.get(b, b) if isinstance(b, str) else b for b in a] if isinstance(a, list)
            else a for a in args]
    e = _unchanged_after(main, lambda: fluid.backward.gradients(*real), TypeError)
    assert e.match(_type_msg(arg, expected, value, api=_GAPI))


@pytest.mark.parametrize("tgs,value", [([3], 3), ([None, "k"], "k")])
def test_a_target_gradient_that_is_no_variable_is_refused(tgs, value):
    # every entry is checked, also after a None (which means: ones)
    main, _, x, h, loss = _small()
    e = _unchanged_after(main, lambda: fluid.backward.gradients([h, loss][:len(tgs)], [x],
                                                                 target_gradients=tgs),
                         TypeError)
    assert e.match(_type_msg("target_gradients", "Variable or None", value, api=_GAPI))


def test_a_target_gradient_of_the_wrong_shape_after_a_none_is_refused():
    main, _, x, h, loss = _small()
    with fluid.program_guard(main):
        bad = fluid.data("bad", [4, 4])
    with pytest.raises(ValueError, match=rf"^The shapes of target and grad are different: "
                                         rf"{h.name} bad "):
        fluid.backward.gradients([loss, h], [x], target_gradients=[None, bad])


def test_an_empty_target_gradients_list_means_ones():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [2, 3], "float64")
        x.stop_gradient = False
        y = L.elementwise_mul(x, x)
        g, = fluid.backward.gradients(y, x, target_gradients=[])
    xv = np.arange(6.0).reshape(2, 3) - 2
    out, = fluid.Executor().run(main, feed={"x": xv}, fetch_list=[g])
    np.testing.assert_allclose(out, 2 * xv)


def _in_a_sub_block(main, x):
    """A variable computed inside a conditional block of ``main`` (another block, same
    program)."""
    with fluid.program_guard(main):
        cond = L.fill_constant([1], "bool", True)
        out = {}

        def branch():
            out["v"] = L.scale(x, 2.0)
            return out["v"]
        L.cond(cond, branch, lambda: L.scale(x, 3.0))
    assert out["v"].block is not main.global_block()
    return out["v"]


def test_targets_or_target_gradients_of_another_block_are_refused():
    main, _, x, h, _ = _small()
    inner = _in_a_sub_block(main, h)
    with pytest.raises(ValueError, match="^all targets must be in the same block$"):
        fluid.backward.gradients([h, inner], [x])
    with pytest.raises(ValueError, match="^all targets must be in the same block$"):
        fluid.backward.gradients([h], [x], target_gradients=[inner])


def test_an_input_of_another_program_is_named_with_the_api():
    main, _, x, h, _ = _small()
    _, _, other_x, _, _ = _small()
    with pytest.raises(ValueError) as e:
        fluid.backward.gradients([h], [x, other_x])
    assert str(e.value).startswith(f"{_GAPI}: inputs[1] '{other_x.name}' belongs to a "
                                   f"different Program")


def test_a_stop_gradient_input_is_reported_with_the_fix(caplog):
    main, _, x, h, _ = _small()
    assert x.stop_gradient
    with caplog.at_level("WARNING", logger="fluidlite"):
        assert fluid.backward.gradients([h], [x]) == [None]
    assert [r.getMessage() for r in caplog.records] == [
        f"fluid.gradients: input '{x.name}' has stop_gradient=True, so its gradient is None; "
        f"set {x.name}.stop_gradient = False to differentiate w.r.t. it"]


def test_parameter_list_of_a_wrong_type_names_the_type_received():
    main, startup, _, _, loss = _small()
    with fluid.program_guard(main, startup), pytest.raises(TypeError) as e:
        append_backward(loss, parameter_list=3)
    assert str(e.value) == ("The type of parameter_list argument must be list or tuple or set, "
                            "but received <class 'int'>.")


# -- the loss ----------------------------------------------------------------------------------
def test_a_loss_no_op_computes_is_refused_naming_it_and_the_fix():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [1])
        L.mean(x)
    with pytest.raises(ValueError) as e:
        append_backward(x)
    assert str(e.value) == ("fluid.backward.append_backward: loss 'x' is not computed by any "
                            "op of its program (block 0); it must be the output of an op, "
                            "e.g. loss = fluid.layers.mean(cost)")


def test_an_empty_loss_is_refused_like_any_loss_of_more_than_one_element():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [0, 3])
        loss = L.scale(x, 2.0)
        with pytest.raises(ValueError, match=r"^The loss\.shape should be \(1L,\), but the "
                                             r"current loss\.shape is \(0, 3\)"):
            append_backward(loss)


@pytest.mark.parametrize("after", [0, 1])
def test_a_loss_whose_op_pointer_is_lost_is_found_by_name_at_the_start_of_the_block(after):
    # the loss is the output of the block's first op, with (after=1) an unrelated op after it
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [2, 3], "float64")
        x.stop_gradient = False
        loss = L.mean(x)
        for _ in range(after):
            L.scale(x, 2.0)
    loss.op = None
    pg = append_backward(loss, parameter_list=[x])
    assert [p.name for p, _ in pg] == ["x"]
    g, = fluid.Executor().run(main, feed={"x": np.ones((2, 3))}, fetch_list=[pg[0][1]])
    np.testing.assert_allclose(g, np.full((2, 3), 1 / 6))


def test_a_0d_loss_is_seeded_with_its_own_shape_so_gradients_keep_their_shapes():
    # Paddle 2.x seeds a 0-d loss with shape []: a gradient has the shape of its variable
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [], "float64")
        x.stop_gradient = False
        loss = L.scale(x, 3.0)
        (_, gx), = append_backward(loss, parameter_list=[x])
    assert tuple(main.global_block().var(loss.name + "@GRAD").shape) == ()
    assert tuple(gx.shape) == ()
    out, = fluid.Executor().run(main, feed={"x": np.array(2.0)}, fetch_list=[gx])
    assert np.shape(out) == () and float(out) == 3.0


# -- ops without a gradient rule ---------------------------------------------------------------
@pytest.fixture
def temp_ops():
    from fluidlite.core import registry
    added = []

    def add(cls):
        registry.register(cls)
        added.extend([cls.type, cls.type + "_grad"])
        return cls

    yield add
    for t in added:
        registry._REGISTRY.pop(t, None)


def _plain_op(add, name, with_backward):
    from fluidlite.core.registry import OpDef

    class Op(OpDef):
        type, inputs, outputs = name, ("X",), ("Out",)

        def infer(self, X):
            return {"Out": X}

        def forward(self, X):
            return {"Out": X * X}
    if with_backward:
        Op.backward = lambda self, X, dOut: {"X": 2 * X * dOut}
    Op.__doc__ = f"Out = X^2 (test-only op{'' if with_backward else ' without gradient'})"
    return add(Op)


def test_every_op_without_a_gradient_rule_is_named_in_one_error(temp_ops):
    _plain_op(temp_ops, "test_nograd_a", False)
    _plain_op(temp_ops, "test_nograd_b", False)
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [2], "float64")
        x.stop_gradient = False
        block = main.global_block()
        a, b = block.create_var(name="a"), block.create_var(name="b")
        block.append_op("test_nograd_a", {"X": x}, {"Out": a})
        block.append_op("test_nograd_b", {"X": a}, {"Out": b})
        loss = L.mean(b)
    with pytest.raises(ValueError) as e:
        append_backward(loss, parameter_list=[x])
    assert str(e.value) == ("cannot differentiate through op(s) 'test_nograd_a', "
                            "'test_nograd_b': no gradient rule is registered. Mark the inputs "
                            "that need no gradient with stop_gradient=True or pass them in "
                            "no_grad_set to cut the path.")


def test_a_grad_op_without_a_second_order_rule_is_named_with_the_hint(temp_ops):
    _plain_op(temp_ops, "test_first_only", True)
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [2], "float64")
        x.stop_gradient = False
        y = main.global_block().create_var(name="y")
        main.global_block().append_op("test_first_only", {"X": x}, {"Out": y})
        dx, = fluid.backward.gradients([y], [x])
        with pytest.raises(ValueError) as e:
            fluid.backward.gradients([dx], [x])
    assert str(e.value) == (
        "cannot differentiate through op(s) 'test_first_only_grad': no gradient rule is "
        "registered (a gradient op: its forward op's class can define `double_grad` for "
        "higher order). Mark the inputs that need no gradient with stop_gradient=True or pass "
        "them in no_grad_set to cut the path.")


def test_the_float_output_of_a_non_differentiable_op_is_no_gradient_source():
    # iou_similarity has no gradient: the ops after it get no grad ops, although its output
    # is a float variable no op of the path writes
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [3, 4], "float32")
        x.stop_gradient = False
        z = L.iou_similarity(x, x)
        loss = L.mean(L.scale(z, 2.0))
        n_fwd = len(main.global_block().ops)
        assert append_backward(loss, parameter_list=[x]) == []
    assert [op.type for op in main.global_block().ops[n_fwd:]] == ["fill_constant"]


# -- accumulation ------------------------------------------------------------------------------
def test_a_gradient_written_twice_by_one_multi_output_grad_op_slot_is_accumulated():
    # concat's grad writes [x@GRAD, y@GRAD] in one slot; y@GRAD is already written by the
    # square's grad: d/dy of sum(concat(x, y)^2 / 2) + sum(y^3) = y + 3 y^2
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [2, 3], "float64")
        y = fluid.data("y", [2, 3], "float64")
        x.stop_gradient = y.stop_gradient = False
        c = L.concat([x, y], axis=0)
        loss = L.elementwise_add(L.scale(L.reduce_sum(L.square(c)), 0.5),
                                 L.reduce_sum(L.elementwise_mul(L.square(y), y)))
        gx, gy = fluid.backward.gradients(loss, [x, y])
    rng = np.random.default_rng(11)
    xv, yv = rng.normal(size=(2, 3)), rng.normal(size=(2, 3))
    a, b = fluid.Executor().run(main, feed={"x": xv, "y": yv}, fetch_list=[gx, gy])
    np.testing.assert_allclose(a, xv, rtol=1e-12)
    np.testing.assert_allclose(b, yv + 3 * yv ** 2, rtol=1e-12)


# -- control flow: the grad block, arrays, missing records --------------------------------------
def _array_loop(lod_level=0, times_x=False):
    """``acc`` through 2 iterations of ``acc = 2 tanh(acc)`` (``2 tanh(acc * x)`` with
    ``times_x``), each written into ``arr`` (a tensor array the loss never reads, so its
    gradient is all zero); ``x`` may be an LoD input."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 3], "float64", lod_level=lod_level)
        x.stop_gradient = False
        arr = L.create_array("float64")
        i = L.fill_constant([1], "int64", 0)
        n = L.fill_constant([1], "int64", 2)
        acc = L.scale(x, 1.0)
        c = L.less_than(i, n)
        loop = L.While(c)
        with loop.block():
            h = L.tanh(L.elementwise_mul(acc, x) if times_x else acc)
            L.array_write(h, i, array=arr)
            L.assign(L.scale(h, 2.0), acc)
            L.increment(i, in_place=True)
            L.less_than(i, n, cond=c)
        loss = L.mean(acc)
    return main, startup, x, arr, i, loss


def test_a_loop_output_array_nothing_reads_gets_a_zero_gradient_and_array_type():
    main, _, x, arr, i, loss = _array_loop()
    before = set(main.global_block().vars)
    with fluid.program_guard(main):
        gx, = fluid.backward.gradients(loss, [x])
    blk = main.global_block()
    # the pass declares gradients only; the array's is zero-filled once, as an array
    added = set(blk.vars) - before
    assert added and all(isinstance(n, str) and "@GRAD" in n for n in added), added
    zero_fills = [op for op in blk.ops if op.type == "sum_tensor_array" and not op.input("X")]
    assert [op.output("Out") for op in zero_fills] == [[arr.name + "@GRAD"]]
    assert blk.var(arr.name + "@GRAD").type == fluid.core.VarType.LOD_TENSOR_ARRAY
    # no gradient for the integer counter, inside or outside the loop
    assert not any(n.startswith(i.name) and "@GRAD" in n for b in main.blocks for n in b.vars)
    xv = np.random.default_rng(3).normal(size=(2, 3))
    got, = fluid.Executor().run(main, feed={"x": xv}, fetch_list=[gx])
    t1 = np.tanh(xv)
    t2 = np.tanh(2 * t1)
    np.testing.assert_allclose(got, (2 * (1 - t2 ** 2)) * (2 * (1 - t1 ** 2)) / xv.size,
                               rtol=1e-12)


def test_the_grad_block_declares_its_variables_like_their_forward_counterparts():
    main, _, x, _, _, loss = _array_loop(lod_level=1, times_x=True)
    with fluid.program_guard(main):
        fluid.backward.gradients(loss, [x])
        # building goes on in the global block after the pass created the grad block
        after = L.scale(loss, 1.0)
    assert main.current_block_idx == 0 and after.block is main.global_block()
    grad_blocks = [b for b in main.blocks if b.forward_block_idx >= 0]
    assert len(grad_blocks) == 1
    gb = grad_blocks[0]
    fwd = main.block(gb.forward_block_idx)
    checked = 0
    for name, v in gb.vars.items():
        base = name.split("@SSA@")[0].split("@GRAD")[0]
        like = fwd._find_var_recursive(base)
        assert like is not None, name
        # a forward variable of an enclosing block (x, a parameter) is read from there
        assert "@GRAD" in name or fwd._find_var_recursive(name) is None or \
            name in fwd.vars, f"{name}: a variable of an enclosing block declared again"
        want_type = like.type
        assert (tuple(v.shape), v.dtype, v.lod_level, v.type) == \
               (tuple(like.shape), like.dtype, like.lod_level, want_type), name
        checked += "@GRAD" not in name
    assert checked >= 4         # SSA versions (counter, condition) and the body's locals
    assert any(v.lod_level == 1 for v in gb.vars.values())


def _strip_records(op_type):
    """A loop (or a branch) whose op lost its StepScopes (Scope) output."""
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [2, 3], "float64")
        x.stop_gradient = False
        if op_type == "while":
            i = L.fill_constant([1], "int64", 0)
            n = L.fill_constant([1], "int64", 2)
            acc = L.scale(x, 1.0)
            c = L.less_than(i, n)
            loop = L.While(c)
            with loop.block():
                L.assign(L.tanh(acc), acc)
                L.increment(i, in_place=True)
                L.less_than(i, n, cond=c)
            out = acc
        else:
            out = L.cond(L.fill_constant([1], "bool", True), lambda: L.tanh(x),
                         lambda: L.scale(x, 2.0))
        loss = L.mean(out)
    for op in main.global_block().ops:
        if op.type == op_type:
            op.outputs.pop("StepScopes" if op_type == "while" else "Scope")
    return main, x, loss


@pytest.mark.parametrize("op_type,slot", [("while", "StepScopes"),
                                          ("conditional_block", "Scope")])
def test_a_block_op_without_its_records_output_cannot_be_differentiated(op_type, slot):
    main, x, loss = _strip_records(op_type)
    with pytest.raises(ValueError) as e:
        fluid.backward.gradients(loss, [x])
    assert str(e.value) == (f"{op_type}: the op has no {slot} output, so its iterations "
                            f"cannot be recorded for the gradient")


def test_a_stop_gradient_variable_inside_a_loop_body_cuts_the_gradient():
    # body: t = tanh(acc) with stop_gradient; acc = acc * 2 + t: d acc_n / d x = 2^n
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [2, 3], "float64")
        x.stop_gradient = False
        i = L.fill_constant([1], "int64", 0)
        n = L.fill_constant([1], "int64", 3)
        acc = L.scale(x, 1.0)
        c = L.less_than(i, n)
        loop = L.While(c)
        with loop.block():
            t = L.tanh(acc)
            t.stop_gradient = True
            L.assign(L.elementwise_add(L.scale(acc, 2.0), t), acc)
            L.increment(i, in_place=True)
            L.less_than(i, n, cond=c)
        loss = L.reduce_sum(acc)
        gx, = fluid.backward.gradients(loss, [x])
    got, = fluid.Executor().run(main, feed={"x": np.ones((2, 3))}, fetch_list=[gx])
    np.testing.assert_allclose(got, np.full((2, 3), 8.0))


def test_a_loop_input_in_no_grad_set_gets_no_gradient_ops_in_the_body():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [2, 3], "float64")
        y = fluid.data("y", [2, 3], "float64")
        x.stop_gradient = y.stop_gradient = False
        i = L.fill_constant([1], "int64", 0)
        n = L.fill_constant([1], "int64", 2)
        acc = L.scale(x, 1.0)
        c = L.less_than(i, n)
        loop = L.While(c)
        with loop.block():
            L.assign(L.elementwise_mul(acc, y), acc)
            L.increment(i, in_place=True)
            L.less_than(i, n, cond=c)
        loss = L.reduce_sum(acc)
        gx, gy = fluid.backward.gradients(loss, [x, y], no_grad_set={"y"})
    assert gy is None
    written = {n for b in main.blocks for op in b.ops for n in op.output_arg_names}
    assert not any(n.startswith("y@") for n in written), sorted(written)
    xv, yv = np.ones((2, 3)), np.full((2, 3), 1.5)
    got, = fluid.Executor().run(main, feed={"x": xv, "y": yv}, fetch_list=[gx])
    np.testing.assert_allclose(got, yv ** 2)


# -- recompute: where segments start and end, their names, what is held --------------------------
def _chain(n, reshape_at=(), cross=None):
    """x -> n tanh fc layers (h[1..n]); ``reshape_at``: layers followed by a reshape (an op with a
    second, private output: XShape); ``cross=(a, b)``: layer b also adds h[a]."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [-1, 3])
        h = {0: x}
        for i in range(1, n + 1):
            inp = L.elementwise_add(h[i - 1], h[cross[0]]) if cross and i == cross[1] \
                else h[i - 1]
            h[i] = L.fc(inp, 3, act="tanh")
            if i in reshape_at:
                h[i] = L.reshape(h[i], [-1, 3])
        loss = L.mean(h[n])
    return main, startup, h, loss


def _recompute(main, startup, loss, ckpts):
    n_fwd = len(main.global_block().ops)
    with fluid.program_guard(main, startup):
        pg, _ = append_backward(loss, checkpoints=ckpts)
    ops = main.global_block().ops
    copies = {n: op for op in ops[n_fwd:] for n in op.output_arg_names if ".subprog_" in n}
    return pg, ops[:n_fwd], copies


def _grads_equal_plain(main, startup, pg, n, **kw):
    ref_main, ref_startup, _, ref_loss = _chain(n, **kw)
    with fluid.program_guard(ref_main, ref_startup):
        ref_pg = append_backward(ref_loss)
    xv = np.random.default_rng(8).normal(size=(4, 3)).astype("float32")
    for a, b in zip(_run(main, startup, [g for _, g in pg], xv),
                    _run(ref_main, ref_startup, [g for _, g in ref_pg], xv)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_segments_are_numbered_from_the_last_as_fluid_does():
    # fluid 1.8 (_append_backward_ops_with_checkpoints_) enumerates the segments in reverse:
    # the last segment's copies are <name>.subprog_0, the one before .subprog_1, ...
    main, startup, h, loss = _chain(8)
    pg, fwd, copies = _recompute(main, startup, loss, [h[2], h[4], h[6], h[8]])
    prod = _producers(fwd)
    seg_of = {}
    for k, (a, b) in enumerate([(2, 4), (4, 6), (6, 8)]):
        for idx in range(prod[h[a].name] + 1, prod[h[b].name] + 1):
            for name in fwd[idx].output_arg_names:
                seg_of[name] = k
    assert copies
    for c in copies:
        orig, suffix = c.split(".subprog_")
        assert int(suffix) == 2 - seg_of[orig], c
    assert {int(c.split(".subprog_")[1]) for c in copies} == {0, 1, 2}
    _grads_equal_plain(main, startup, pg, 8)


def test_a_single_checkpoint_two_ops_in_recomputes_the_first_op():
    main, startup, h, loss = _chain(3)
    ops = main.global_block().ops
    assert [op.type for op in ops[:3]] == ["mul", "elementwise_add", "tanh"]
    pg, fwd, copies = _recompute(main, startup, loss, [ops[1].output("Out")[0]])
    assert {c.split(".subprog_")[0] for c in copies} == {fwd[0].output("Out")[0]}
    assert copies[fwd[0].output("Out")[0] + ".subprog_0"].type == "mul"
    _grads_equal_plain(main, startup, pg, 3)


def test_checkpoints_two_ops_apart_recompute_the_op_between():
    main, startup, h, loss = _chain(3)
    ops = main.global_block().ops
    mul_out, add_out, tanh_out = (ops[k].output("Out")[0] for k in range(3))
    pg, _, copies = _recompute(main, startup, loss, [mul_out, tanh_out])
    assert set(copies) == {add_out + ".subprog_0"}
    _grads_equal_plain(main, startup, pg, 3)


def _xshapes(fwd):
    return {op.output("XShape")[0] for op in fwd if op.type == "reshape2"}


@pytest.mark.parametrize("where", ["first", "neighbour", "after_last"])
def test_nothing_outside_the_segments_is_replayed(where):
    # an op with a private second output (reshape2's XShape) as the first op, as a checkpoint
    # right after another one, or right after the only checkpoint: never replayed
    if where == "first":
        main, startup = fluid.Program(), fluid.Program()
        with fluid.program_guard(main, startup), fluid.unique_name.guard():
            x = fluid.data("x", [-1, 3])
            x.stop_gradient = False
            r = L.reshape(x, [-1, 3])
            loss = L.mean(L.fc(L.fc(r, 3, act="tanh"), 3, act="tanh"))
        ckpts = [r]
    elif where == "neighbour":
        main, startup, h, loss = _chain(4, reshape_at=(2,))
        prod = _producers(main.global_block().ops)
        tanh2 = main.global_block().ops[prod[h[2].name]].input("X")[0]
        ckpts = [tanh2, h[2]]                     # h[2] is the reshape right after tanh2
    else:
        main, startup, h, loss = _chain(4, reshape_at=(3,))
        prod = _producers(main.global_block().ops)
        ckpts = [main.global_block().ops[prod[h[3].name]].input("X")[0]]
    pg, fwd, copies = _recompute(main, startup, loss, ckpts)
    assert not (_xshapes(fwd) & {c.split(".subprog_")[0] for c in copies}), sorted(copies)
    assert "reshape2" not in {op.type for op in copies.values()}


def test_a_value_of_a_later_segment_read_after_the_last_checkpoint_is_held():
    # h[4] lies in the second segment (h[3], h[5]] and is read again by layer 6, after the last
    # checkpoint: it is kept from the forward pass, not recomputed
    main, startup, h, loss = _chain(6, cross=(4, 6))
    pg, fwd, copies = _recompute(main, startup, loss, [h[1], h[3], h[5]])
    assert copies
    assert not any(c.startswith(h[4].name + ".subprog_") for c in copies)
    bwd_reads = {n for op in main.global_block().ops[len(fwd):] for n in op.input_arg_names}
    assert h[4].name in bwd_reads
    _grads_equal_plain(main, startup, pg, 6, cross=(4, 6))


def test_recomputed_copies_are_declared_like_their_originals():
    main, startup, h, loss = _chain(5)
    _, _, copies = _recompute(main, startup, loss, [h[1], h[3], h[5]])
    blk = main.global_block()
    assert copies
    for c in copies:
        v, orig = blk.var(c), blk.var(c.split(".subprog_")[0])
        assert (tuple(v.shape), v.dtype, v.lod_level) == \
               (tuple(orig.shape), orig.dtype, orig.lod_level), c
