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
