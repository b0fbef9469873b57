"""append_backward: program structure (op order, names, roles, annotations), pruning,
accumulation, callbacks, repeated passes, recompute, errors (program left unchanged)."""
import logging

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import backward
from fluidlite.backward import append_backward
from fluidlite.core import registry
from fluidlite.core.ir import OpRole
from fluidlite.core.registry import OpDef, OpDesc, register

L = fluid.layers


def run(prog, feed, fetch, startup=None):
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    if startup is not None:
        exe.run(startup, scope=scope)
    return exe.run(prog, feed=feed, fetch_list=fetch, scope=scope)


def types(prog, start=0):
    return [op.type for op in prog.global_block().ops[start:]]


def mlp(width=3, hidden=4, act="relu"):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, width])
        h = L.fc(x, hidden, act=act)
        y = L.fc(h, 2)
        loss = L.mean(y)
    return main, startup, x, loss


@pytest.fixture
def temp_ops():
    """Register test-only ops for one test and remove them afterwards (keeps the global
    registry, and so the op-coverage meta-test, clean)."""
    added = []

    def add(cls):
        register(cls)
        added.extend([cls.type, cls.type + "_grad"])
        return cls

    yield add
    for t in added:
        registry._REGISTRY.pop(t, None)


# -- structure ---------------------------------------------------------------------------------
def test_mlp_structure_roles_and_annotations():
    main, _, _, loss = mlp()
    n_fwd = len(main.global_block().ops)
    with fluid.program_guard(main):
        pg = append_backward(loss)
    block = main.global_block()
    assert types(main, n_fwd) == ["fill_constant", "mean_grad", "elementwise_add_grad",
                                  "mul_grad", "relu_grad", "elementwise_add_grad", "mul_grad"]
    seed = block.ops[n_fwd]
    assert seed.output("Out") == [loss.name + "@GRAD"]
    assert seed.attr("shape") == [1] and seed.attr("value") == 1.0
    assert seed.attr("dtype") == loss.dtype and seed.attr("force_cpu") is False
    assert seed.attr("op_role") == OpRole.Backward | OpRole.Loss == 257
    assert loss.op.attr("op_role") == OpRole.Forward | OpRole.Loss == 256
    assert all(op.attr("op_role") == OpRole.Backward for op in block.ops[n_fwd + 1:])
    assert all(op.attr("op_role") == 0 for op in block.ops[:n_fwd - 1])
    assert [(p.name, g.name) for p, g in pg] == [
        ("fc_0.w_0", "fc_0.w_0@GRAD"), ("fc_0.b_0", "fc_0.b_0@GRAD"),
        ("fc_1.w_0", "fc_1.w_0@GRAD"), ("fc_1.b_0", "fc_1.b_0@GRAD")]
    for p, g in pg:
        assert g.op.attr("op_role_var") == [p.name, g.name]
        assert g.name in g.op.output_arg_names
        assert g.shape == p.shape and g.dtype == p.dtype
    # data x has stop_gradient=True: its mul_grad computes only the weight gradient
    first_mul_grad = block.ops[-1]
    assert "X@GRAD" not in first_mul_grad.outputs
    assert not block.has_var("x@GRAD")
    assert main._appending_grad_times == 1
    main.lint()


def test_grad_ops_carry_the_forward_op_callstack():
    main, _, _, loss = mlp()
    with fluid.program_guard(main):
        append_backward(loss)
    relu = next(op for op in main.global_block().ops if op.type == "relu")
    relu_grad = next(op for op in main.global_block().ops if op.type == "relu_grad")
    assert relu_grad.attr("op_callstack") == relu.attr("op_callstack")
    assert any("mlp" in line for line in relu_grad.attr("op_callstack"))


def test_gradient_values_of_mlp_match_numpy():
    main, startup, _, loss = mlp(act="tanh")
    with fluid.program_guard(main, startup):
        pg = append_backward(loss)
    xv = np.random.default_rng(0).normal(size=(5, 3)).astype("float32")
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    w0, b0, w1, b1 = (np.array(scope.find_var(n).get_tensor()) for n in
                      ("fc_0.w_0", "fc_0.b_0", "fc_1.w_0", "fc_1.b_0"))
    got = exe.run(main, feed={"x": xv}, fetch_list=[g for _, g in pg], scope=scope)
    h = np.tanh(xv @ w0 + b0)
    dy = np.full((5, 2), 1 / 10, dtype="float32")
    dh = dy @ w1.T * (1 - h * h)
    want = [xv.T @ dh, dh.sum(0), h.T @ dy, dy.sum(0)]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


# -- pruning -------------------------------------------------------------------------------------
def test_only_ops_on_a_path_to_the_loss_get_grad_ops():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [None, 3])
        side = L.fc(x, 2)                       # does not lead to the loss
        h = L.fc(x, 2)
        loss = L.mean(h)
        L.mean(side)                            # an op after the loss
        n_fwd = len(main.global_block().ops)
        pg = append_backward(loss)
    assert [p.name for p, _ in pg] == ["fc_1.w_0", "fc_1.b_0"]
    grads = {n for op in main.global_block().ops[n_fwd:] for n in op.output_arg_names}
    assert not any(n.startswith("fc_0") for n in grads)
    assert types(main, n_fwd) == ["fill_constant", "mean_grad", "elementwise_add_grad",
                                  "mul_grad"]


def test_stop_gradient_on_an_intermediate_cuts_the_graph():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [None, 3])
        h = L.fc(x, 4, act="relu")
        h.stop_gradient = True
        loss = L.mean(L.fc(h, 2))
        pg = append_backward(loss)
    assert [p.name for p, _ in pg] == ["fc_1.w_0", "fc_1.b_0"]
    assert not main.global_block().has_var(h.name + "@GRAD")
    assert "relu_grad" not in types(main)


@pytest.mark.parametrize("by_name", [False, True])
def test_no_grad_set_prunes(by_name):
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [None, 3])
        h = L.fc(x, 4, act="relu")
        loss = L.mean(L.fc(h, 2))
        w0 = main.global_block().var("fc_0.w_0")
        pg = append_backward(loss, no_grad_set={"fc_0.w_0"} if by_name else [w0])
    assert [p.name for p, _ in pg] == ["fc_0.b_0", "fc_1.w_0", "fc_1.b_0"]
    assert not main.global_block().has_var("fc_0.w_0@GRAD")


def test_no_grad_set_wins_over_parameter_list_and_non_trainable_listed_params_get_grads():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [None, 3])
        y = L.fc(x, 2, param_attr=fluid.ParamAttr(name="w", trainable=False),
                 bias_attr=fluid.ParamAttr(name="b"))
        loss = L.mean(y)
        w = main.global_block().var("w")
        pg = append_backward(loss, parameter_list=[w, "b"], no_grad_set=["b"])
    assert [(p.name, g.name) for p, g in pg] == [("w", "w@GRAD")]


def test_default_parameter_list_skips_non_trainable_params():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [None, 3])
        loss = L.mean(L.fc(x, 2, param_attr=fluid.ParamAttr(name="w", trainable=False)))
        pg = append_backward(loss)
    assert [p.name for p, _ in pg] == ["fc_0.b_0"]
    assert main.global_block().has_var("w@GRAD")     # computed (on the path), not returned


def test_data_input_gets_a_gradient_when_stop_gradient_is_false():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [None, 3])
        x.stop_gradient = False
        loss = L.mean(L.scale(x, scale=3.0))
        pg = append_backward(loss, parameter_list=[x])
    assert [(p.name, g.name) for p, g in pg] == [("x", "x@GRAD")]
    gx, = run(main, {"x": np.ones((2, 3), "float32")}, [pg[0][1]])
    np.testing.assert_allclose(gx, np.full((2, 3), 0.5), rtol=1e-6)


def test_non_differentiable_op_stops_the_walk():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [None, 3])
        x.stop_gradient = False
        idx = L.argmax(x, axis=1)
        f = L.cast(idx, "float32")
        loss = L.mean(L.elementwise_add(L.reduce_sum(x), f))
        pg = append_backward(loss, parameter_list=[x])
    assert "arg_max_grad" not in types(main)
    gx, = run(main, {"x": np.arange(6, dtype="float32").reshape(2, 3)}, [pg[0][1]])
    np.testing.assert_allclose(gx, np.ones((2, 3)))     # d mean(sum(x) + f) / dx, f constant


# -- accumulation ------------------------------------------------------------------------------
def test_variable_used_twice_gets_renamed_partials_and_one_sum():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [2, 3])
        x.stop_gradient = False
        a = L.relu(x)
        b = L.scale(x, scale=2.0)
        loss = L.mean(L.elementwise_add(a, b))
        n_fwd = len(main.global_block().ops)
        pg = append_backward(loss, parameter_list=["x"])
    ops = main.global_block().ops[n_fwd:]
    writers = {op.type: op.output_arg_names for op in ops}
    assert writers["scale"] == ["x@GRAD@RENAME@0"]
    assert writers["relu_grad"] == ["x@GRAD@RENAME@1"]
    sums = [op for op in ops if op.type == "sum"]
    assert len(sums) == 1
    assert sums[0].input("X") == ["x@GRAD@RENAME@0", "x@GRAD@RENAME@1"]
    assert sums[0].output("Out") == ["x@GRAD"] and sums[0].attr("use_mkldnn") is False
    assert ops[-1] is sums[0]                     # nothing reads x@GRAD: sum at the end
    assert pg[0][1].name == "x@GRAD" and pg[0][1].op is sums[0]
    xv = np.array([[-1, 2, 3], [4, -5, 6]], "float32")
    gx, = run(main, {"x": xv}, ["x@GRAD"])
    np.testing.assert_allclose(gx, ((xv > 0) + 2.0) / 6, rtol=1e-6)
    assert main.global_block().var("x@GRAD@RENAME@0").shape == (2, 3)


def test_sum_is_inserted_before_the_first_reader():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [2, 3])
        x.stop_gradient = False
        h = L.tanh(x)
        loss = L.mean(L.elementwise_add(L.square(h), L.exp(h)))
        n_fwd = len(main.global_block().ops)
        append_backward(loss, parameter_list=["x"])
    t = types(main, n_fwd)
    assert t.index("sum") == t.index("tanh_grad") - 1
    s = main.global_block().ops[n_fwd + t.index("sum")]
    assert s.output("Out") == [h.name + "@GRAD"]
    xv = np.linspace(-1, 1, 6).reshape(2, 3).astype("float32")
    gx, = run(main, {"x": xv}, ["x@GRAD"])
    th = np.tanh(xv)
    np.testing.assert_allclose(gx, (2 * th + np.exp(th)) * (1 - th ** 2) / 6, rtol=1e-5)


def test_same_variable_twice_in_one_op():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [3])
        x.stop_gradient = False
        loss = L.reduce_sum(L.elementwise_mul(x, x))
        n_fwd = len(main.global_block().ops)
        append_backward(loss, parameter_list=["x"])
    ops = main.global_block().ops[n_fwd:]
    mg = next(op for op in ops if op.type.startswith("elementwise_mul"))
    assert sorted(mg.output_arg_names) == ["x@GRAD@RENAME@0", "x@GRAD@RENAME@1"]
    gx, = run(main, {"x": np.array([1, -2, 3], "float32")}, ["x@GRAD"])
    np.testing.assert_allclose(gx, [2, -4, 6])


def test_accumulate_write_after_read_starts_a_new_sum():
    """A gradient written again after it was read (in-place forward overwrite) starts a new
    accumulation instead of renaming the already-consumed writer."""
    gn = backward._GradNames(fluid.Program().global_block())
    g = gn("a")
    d = [OpDesc("w1", {}, {"Out": [g]}, {}), OpDesc("w2", {}, {"Out": [g]}, {}),
         OpDesc("r", {"X": [g]}, {"Out": ["t"]}, {}), OpDesc("w3", {}, {"Out": [g]}, {}),
         OpDesc("w4", {}, {"Out": [g]}, {})]
    out = backward._accumulate(d, gn)
    assert [x.type for x in out] == ["w1", "w2", "sum", "r", "w3", "w4", "sum"]
    assert out[0].outputs["Out"] == ["a@GRAD@RENAME@0"]
    assert out[1].outputs["Out"] == ["a@GRAD@RENAME@1"]
    assert out[2].inputs["X"] == ["a@GRAD@RENAME@0", "a@GRAD@RENAME@1"]
    assert out[4].outputs["Out"] == ["a@GRAD@RENAME@2"]
    assert out[5].outputs["Out"] == ["a@GRAD@RENAME@3"]
    assert out[6].inputs["X"] == ["a@GRAD@RENAME@2", "a@GRAD@RENAME@3"]
    assert out[6].outputs["Out"] == ["a@GRAD"]


def test_accumulate_skips_in_place_grad_updates_and_forward_names():
    gn = backward._GradNames(fluid.Program().global_block())
    g = gn("a")
    d = [OpDesc("w1", {}, {"Out": [g]}, {}), OpDesc("clip", {"X": [g]}, {"Out": [g]}, {}),
         OpDesc("f", {}, {"Out": ["tmp"]}, {}), OpDesc("f", {}, {"Out": ["tmp"]}, {})]
    out = backward._accumulate(d, gn)
    assert [x.type for x in out] == ["w1", "clip", "f", "f"]
    assert out[0].outputs["Out"] == [g] and out[3].outputs["Out"] == ["tmp"]


def test_forward_var_of_grad_names():
    main = fluid.Program()
    block = main.global_block()
    for n in ("a", "a@GRAD", "a@GRAD_0"):
        block.create_var(name=n, shape=[2], dtype="float32")
    fv = backward._forward_var
    assert fv(block, "a@GRAD").name == "a"
    assert fv(block, "a@GRAD@RENAME@3").name == "a"
    assert fv(block, "a@GRAD@GRAD").name == "a@GRAD"
    assert fv(block, "a@GRAD@GRAD@RENAME@0").name == "a@GRAD"
    assert fv(block, "a@GRAD_0@GRAD").name == "a@GRAD_0"
    assert fv(block, "a@GRAD_7", {"a@GRAD_7": "a"}).name == "a"
    assert fv(block, "b@GRAD") is None


# -- fill_zeros_like, missing rules, rollback ---------------------------------------------------
def _two_out_op(add, with_backward=True):
    class TwoOut(OpDef):
        """A = 2 X, B = 3 X;  dX = 2 dA + 3 dB (test-only op)."""
        type, inputs, outputs = "test_two_out", ("X",), ("A", "B")

        def infer(self, X):
            return {"A": X, "B": X}

        def forward(self, X):
            return {"A": 2 * X, "B": 3 * X}

    if with_backward:
        def backward_(self, X, dA, dB):
            return {"X": 2 * dA + 3 * dB}
        TwoOut.backward = backward_
    return add(TwoOut)


def test_fill_zeros_like_for_an_unused_output(temp_ops):
    _two_out_op(temp_ops)
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [2, 2])
        x.stop_gradient = False
        block = main.global_block()
        a, b = block.create_var(name="a"), block.create_var(name="b")
        block.append_op("test_two_out", {"X": x}, {"A": a, "B": b})
        loss = L.mean(a)
        n_fwd = len(block.ops)
        seen = []
        append_backward(loss, parameter_list=[x],
                        callbacks=[lambda block, context: seen.append(
                            context["__current_op_desc__"].type)])
    assert seen == ["mean_grad", "fill_zeros_like", "test_two_out_grad"]
    assert types(main, n_fwd) == ["fill_constant", "mean_grad", "fill_zeros_like",
                                  "test_two_out_grad"]
    fz = block.ops[n_fwd + 2]
    assert fz.input("X") == ["b"] and fz.output("Out") == ["b@GRAD"]
    assert fz.attr("op_role") == OpRole.Backward
    assert block.var("b@GRAD").shape == (2, 2)
    gx, = run(main, {"x": np.ones((2, 2), "float32")}, ["x@GRAD"])
    np.testing.assert_allclose(gx, np.full((2, 2), 0.5))


def test_op_without_gradient_rule_is_a_clear_error_and_nothing_is_appended(temp_ops):
    _two_out_op(temp_ops, with_backward=False)
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [2, 2])
        x.stop_gradient = False
        block = main.global_block()
        a, b = block.create_var(name="a"), block.create_var(name="b")
        block.append_op("test_two_out", {"X": x}, {"A": a, "B": b})
        loss = L.mean(a)
    version, n_ops, n_vars = main.version, len(block.ops), len(block.vars)
    with pytest.raises(ValueError, match="cannot differentiate through op.*'test_two_out'"):
        append_backward(loss, parameter_list=[x])
    assert (main.version, len(block.ops), len(block.vars)) == (version, n_ops, n_vars)
    assert loss.op.attr("op_role") == 0
    # cutting the path makes it fine
    x.stop_gradient = True
    assert append_backward(loss) == []


def test_failure_while_appending_rolls_back(temp_ops):
    class BadGrad(OpDef):
        """Out = X; its grad maker emits an op with an unknown slot (test-only op)."""
        type, inputs, outputs = "test_bad_grad", ("X",), ("Out",)

        def infer(self, X):
            return {"Out": X}

        def forward(self, X):
            return {"Out": X}

        def make_grad(self, g):
            g.append("scale", {"X": g.output_grad("Out"), "Nope": g.input("X")},
                     {"Out": g.input_grad("X")})

    temp_ops(BadGrad)
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [2])
        x.stop_gradient = False
        block = main.global_block()
        y = block.create_var(name="y")
        block.append_op("test_bad_grad", {"X": x}, {"Out": y})
        loss = L.mean(L.relu(y))
    ops, vars_ = list(block.ops), set(block.vars)
    with pytest.raises(ValueError, match="no input slot 'Nope'"):
        append_backward(loss, parameter_list=[x])
    assert block.ops == ops and set(block.vars) == vars_
    assert loss.op.attr("op_role") == 0 and main._appending_grad_times == 0


# -- callbacks -----------------------------------------------------------------------------------
def test_callbacks_are_called_after_each_grad_op_with_context():
    main, _, _, loss = mlp()
    calls = []

    def cb(block, context):
        op = context["__current_op_desc__"]
        assert block.ops[-1] is op
        calls.append((op.type, dict(context)))

    n_fwd = len(main.global_block().ops)
    with fluid.program_guard(main):
        append_backward(loss, callbacks=[cb])
    assert [c[0] for c in calls] == types(main, n_fwd + 1)   # every grad op, not the seed
    ctx = calls[-1][1]
    assert ctx["fc_0.w_0@GRAD"] == "fc_0.w_0"
    assert ctx[loss.name + "@GRAD"] == loss.name
    assert ctx["fc_0.tmp_2@GRAD"] == "fc_0.tmp_2"


def test_callback_may_append_ops_that_rewrite_the_gradient():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [3])
        x.stop_gradient = False
        loss = L.mean(L.scale(x, scale=4.0))

    def double_x_grad(block, context):
        op = context["__current_op_desc__"]
        for n in op.output_arg_names:
            if context.get(n) == "x":
                block.append_op("scale", {"X": n}, {"Out": n}, {"scale": 2.0})

    with fluid.program_guard(main):
        pg = append_backward(loss, parameter_list=[x], callbacks=[double_x_grad])
    assert types(main)[-2:] == ["scale", "scale"]
    assert main.global_block().ops[-1].attr("op_role") == OpRole.Backward
    assert pg[0][1].op is main.global_block().ops[-1]      # last writer gets op_role_var
    gx, = run(main, {"x": np.ones(3, "float32")}, [pg[0][1]])
    np.testing.assert_allclose(gx, np.full(3, 8 / 3), rtol=1e-6)


def test_error_clip_callback_through_optimizer_backward():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [None, 3])
        h = L.fc(x, 2)
        h.error_clip = fluid.clip.ErrorClipByValue(max=1e-3)
        loss = L.mean(L.scale(h, scale=100.0))
        fluid.optimizer.SGD(0.1).backward(loss)
    ops = main.global_block().ops
    i = next(i for i, op in enumerate(ops) if op.type == "scale" and op.attr("op_role") == 1)
    assert ops[i + 1].type == "clip" and ops[i + 1].output("Out") == [h.name + "@GRAD"]


# -- parameter_list ------------------------------------------------------------------------------
def test_parameter_list_by_variable_and_name_keeps_order():
    main, _, _, loss = mlp()
    w1 = main.global_block().var("fc_1.w_0")
    with fluid.program_guard(main):
        pg = append_backward(loss, parameter_list=[w1, "fc_0.b_0"])
    assert [p.name for p, _ in pg] == ["fc_1.w_0", "fc_0.b_0"]
    assert "fc_0.w_0@GRAD" in main.global_block().vars     # still computed, not returned


def test_duplicate_parameter_list_entries_are_returned_once():
    main, _, _, loss = mlp()
    with fluid.program_guard(main):
        pg = append_backward(loss, parameter_list=["fc_0.w_0", "fc_0.w_0",
                                                   main.global_block().var("fc_0.w_0")])
    assert [p.name for p, _ in pg] == ["fc_0.w_0"]
    assert pg[0][1].op.attr("op_role_var") == ["fc_0.w_0", "fc_0.w_0@GRAD"]


def test_grad_builders_see_only_their_ops_no_grad_inputs(monkeypatch):
    """Regression: the per-op no-grad set is restricted to the op's inputs, so the pass stays
    linear however many stop_gradient variables the program has."""
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        for i in range(50):
            fluid.data(f"unused_{i}", [2])          # stop_gradient=True, unrelated
        x = fluid.data("x", [None, 3])
        h = x
        for _ in range(5):
            h = L.fc(h, 3, act="relu")
        loss = L.mean(h)
    sizes = []
    real = backward.GradBuilder

    def spy(op, no_grad_names=(), *a, **kw):
        sizes.append((len(set(no_grad_names)), len(op.input_arg_names)))
        return real(op, no_grad_names, *a, **kw)

    monkeypatch.setattr(backward, "GradBuilder", spy)
    with fluid.program_guard(main):
        append_backward(loss)
    assert sizes and all(n <= k for n, k in sizes)


# -- repeated passes -----------------------------------------------------------------------------
def test_second_call_renames_grads_and_returns_the_new_ones():
    main, startup, _, loss = mlp()
    with fluid.program_guard(main, startup):
        pg1 = append_backward(loss)
        n = len(main.global_block().ops)
        pg2 = append_backward(loss)
    assert [g.name for _, g in pg2] == ["fc_0.w_0@GRAD_0", "fc_0.b_0@GRAD_0",
                                        "fc_1.w_0@GRAD_0", "fc_1.b_0@GRAD_0"]
    new_ops = main.global_block().ops[n:]
    assert new_ops[0].output("Out") == [loss.name + "@GRAD_0"]
    written = {x for op in new_ops for x in op.output_arg_names}
    assert not written & {x for op in main.global_block().ops[:n] for x in op.output_arg_names}
    assert main._appending_grad_times == 2
    for p, g in pg2:
        assert g.op in new_ops and g.op.attr("op_role_var") == [p.name, g.name]
    xv = np.random.default_rng(1).normal(size=(4, 3)).astype("float32")
    got = run(main, {"x": xv}, [g for _, g in pg1 + pg2], startup)
    for a, b in zip(got[:4], got[4:]):
        np.testing.assert_array_equal(a, b)
    main.lint()


def test_second_call_with_a_different_loss_accumulates_separately():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, 3])
        h = L.fc(x, 2, bias_attr=False)
        loss1 = L.mean(h)
        loss2 = L.mean(L.square(h))
        pg1 = append_backward(loss1)
        pg2 = append_backward(loss2)
    xv = np.array([[1, 2, 3]], "float32")
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    w = np.array(scope.find_var("fc_0.w_0").get_tensor())
    g1, g2 = exe.run(main, feed={"x": xv}, fetch_list=[pg1[0][1], pg2[0][1]], scope=scope)
    np.testing.assert_allclose(g1, xv.T @ np.full((1, 2), 0.5), rtol=1e-5)
    np.testing.assert_allclose(g2, xv.T @ (xv @ w), rtol=1e-5)


# -- misc semantics ------------------------------------------------------------------------------
def test_loss_op_found_by_name_when_the_op_pointer_is_lost():
    main, _, _, loss = mlp()
    test_prog = main.clone()
    loss_c = test_prog.global_block().var(loss.name)
    loss_c.op = None
    with fluid.program_guard(test_prog):
        pg = append_backward(loss_c)
    assert len(pg) == 4 and loss_c.op.type == "mean"


def test_loss_of_shape_1x1_is_seeded_with_its_shape():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [2, 3])
        x.stop_gradient = False
        loss = L.reduce_sum(x, dim=[0, 1], keep_dim=True)
        assert loss.shape == (1, 1)
        append_backward(loss, parameter_list=[x])
    seed = next(op for op in main.global_block().ops if op.type == "fill_constant")
    assert seed.attr("shape") == [1, 1]
    gx, = run(main, {"x": np.ones((2, 3), "float32")}, ["x@GRAD"])
    np.testing.assert_allclose(gx, np.ones((2, 3)))


def test_loss_built_after_a_minimize_still_reaches_the_parameters():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, 3])
        h = L.fc(x, 2)
        fluid.optimizer.SGD(0.1).minimize(L.mean(h))
        loss2 = L.mean(L.square(L.fc(x, 2, param_attr=fluid.ParamAttr(name="fc_0.w_0"),
                                     bias_attr=fluid.ParamAttr(name="fc_0.b_0"))))
        pg = append_backward(loss2)
    assert [(p.name, g.name) for p, g in pg] == [("fc_0.w_0", "fc_0.w_0@GRAD_0"),
                                                 ("fc_0.b_0", "fc_0.b_0@GRAD_0")]


def test_backward_in_optimizer_minimize_trains():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, 3])
        y = fluid.data("y", [None, 1])
        cost = L.square_error_cost(L.fc(x, 1), y)
        loss = L.mean(cost)
        fluid.optimizer.SGD(0.1).minimize(loss)
    rng = np.random.default_rng(0)
    xv = rng.normal(size=(16, 3)).astype("float32")
    yv = (xv @ np.array([[1.0], [-2.0], [0.5]]) + 0.3).astype("float32")
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    losses = [exe.run(main, feed={"x": xv, "y": yv}, fetch_list=[loss], scope=scope)[0][0]
              for _ in range(60)]
    assert losses[-1] < 0.01 * losses[0]


# -- recompute (checkpoints) ---------------------------------------------------------------------
def _deep(n=4):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 3])
        hs, h = [], x
        for _ in range(n):
            h = L.fc(h, 3, act="tanh")
            hs.append(h)
        loss = L.mean(h)
    return main, startup, hs, loss


def test_checkpoints_recompute_segments_with_identical_gradients():
    ref_main, ref_startup, _, ref_loss = _deep()
    with fluid.program_guard(ref_main, ref_startup):
        ref_pg = append_backward(ref_loss)
    main, startup, hs, loss = _deep()
    n_fwd = len(main.global_block().ops)
    with fluid.program_guard(main, startup):
        pg, ckpt_names = append_backward(loss, checkpoints=[hs[1], hs[2].name])
    assert ckpt_names == [hs[1].name, hs[2].name]
    bwd = main.global_block().ops[n_fwd:]
    recomputed = [op for op in bwd if op.type in ("mul", "elementwise_add", "tanh")]
    # the segment between the checkpoints (minus the op producing the held checkpoint) is
    # recomputed into renamed vars, which its grad ops read
    assert [op.type for op in recomputed] == ["mul", "elementwise_add"]
    assert all(op.attr("op_role") == OpRole.Backward for op in recomputed)
    assert recomputed[0].input("X") == [hs[1].name]
    renamed = recomputed[0].output("Out")[0]
    assert renamed.endswith(".subprog_0")
    readers = [op for op in bwd if renamed in op.input_arg_names]
    assert {op.type for op in readers} == {"elementwise_add", "elementwise_add_grad"}
    xv = np.random.default_rng(2).normal(size=(2, 3)).astype("float32")
    got = run(main, {"x": xv}, [g for _, g in pg], startup)
    want = run(ref_main, {"x": xv}, [g for _, g in ref_pg], ref_startup)
    assert [p.name for p, _ in pg] == [p.name for p, _ in ref_pg]
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_single_checkpoint_recomputes_the_prefix():
    main, startup, hs, loss = _deep(3)
    n_fwd = len(main.global_block().ops)
    with fluid.program_guard(main, startup):
        pg, _ = append_backward(loss, checkpoints=[hs[1]])
    bwd_types = types(main, n_fwd)
    assert bwd_types.count("tanh") == 1 and bwd_types.count("mul") == 2
    assert len(pg) == 6


def test_checkpoints_type_errors():
    main, _, hs, loss = _deep(2)
    with pytest.raises(TypeError, match="checkpoints"):
        append_backward(loss, checkpoints=hs[0])
    with pytest.raises(TypeError, match=r"checkpoints\[0\]"):
        append_backward(loss, checkpoints=[3])
    assert main._appending_grad_times == 0


# -- errors: clear, and the program is unchanged ------------------------------------------------
@pytest.fixture
def prog_and_loss():
    main, _, x, loss = mlp()
    return main, loss


def _unchanged(main, fn, exc, match):
    version = main.version
    n_ops, n_vars = len(main.global_block().ops), len(main.global_block().vars)
    with pytest.raises(exc, match=match):
        fn()
    assert main.version == version
    assert (len(main.global_block().ops), len(main.global_block().vars)) == (n_ops, n_vars)
    assert main._appending_grad_times == 0


def test_error_non_variable_loss(prog_and_loss):
    main, loss = prog_and_loss
    _unchanged(main, lambda: append_backward([loss]), TypeError,
               r"The type of 'loss' in fluid.backward.append_backward must be")
    _unchanged(main, lambda: append_backward(np.ones(1)), TypeError, "ndarray")


def test_error_non_scalar_loss(prog_and_loss):
    main, _ = prog_and_loss
    h = main.global_block().var("fc_1.tmp_1")
    _unchanged(main, lambda: append_backward(h), ValueError,
               r"loss.shape should be \(1L,\), but the current loss.shape is \(-1, 2\)\. "
               r"Maybe that you should call fluid.layers.mean")


def test_error_loss_not_computed_by_an_op():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [1])
        L.mean(x)
    _unchanged(main, lambda: append_backward(x), ValueError,
               "'x' is not computed by any op of its program")


def test_error_loss_from_another_program(prog_and_loss):
    main, loss = prog_and_loss
    other, _, _, other_loss = mlp()
    stray = main.global_block().create_var(name="stray", shape=[1], dtype="float32")
    stray.op = other_loss.op
    _unchanged(main, lambda: append_backward(stray), ValueError,
               "computed by an op of a different Program")


def test_error_parameter_from_another_program(prog_and_loss):
    main, loss = prog_and_loss
    other, _, _, _ = mlp()
    w = other.global_block().all_parameters()[0]
    _unchanged(main, lambda: append_backward(loss, parameter_list=[w]), ValueError,
               "belongs to a different Program")


def test_error_parameter_list_types(prog_and_loss):
    main, loss = prog_and_loss
    _unchanged(main, lambda: append_backward(loss, parameter_list="fc_0.w_0"), TypeError,
               "The type of parameter_list argument must be list or tuple or set")
    _unchanged(main, lambda: append_backward(loss, parameter_list=[1.5]), TypeError,
               r"parameter_list\[0\]")
    _unchanged(main, lambda: append_backward(loss, parameter_list=["nope"]), ValueError,
               "no variable of that name")


def test_error_no_grad_set_types(prog_and_loss):
    main, loss = prog_and_loss
    _unchanged(main, lambda: append_backward(loss, no_grad_set="fc_0.w_0"), TypeError,
               r"The type of no_grad_set should be set or list or tuple, but received "
               r"<class 'str'>")
    _unchanged(main, lambda: append_backward(loss, no_grad_set={1}), TypeError,
               r"The type of no_grad_set's member must be paddle.fluid.Variable or str, but "
               r"received <class 'int'>")


def test_error_callbacks(prog_and_loss):
    main, loss = prog_and_loss
    _unchanged(main, lambda: append_backward(loss, callbacks=[print, 3]), ValueError,
               "^'callback' must be a callable object.$")
    _unchanged(main, lambda: append_backward(loss, callbacks=print), TypeError, "callbacks")


def test_errors_then_success_on_the_same_program(prog_and_loss):
    main, loss = prog_and_loss
    with pytest.raises(ValueError):
        append_backward(loss, callbacks=[None])
    with fluid.program_guard(main):
        pg = append_backward(loss)
    assert [g.name for _, g in pg][0] == "fc_0.w_0@GRAD"    # no leftovers from the failure


def test_no_print_and_no_warning_for_a_plain_pass(prog_and_loss, caplog, capsys):
    main, loss = prog_and_loss
    with caplog.at_level(logging.DEBUG, logger="fluidlite"), fluid.program_guard(main):
        append_backward(loss)
    assert capsys.readouterr().out == "" and not caplog.records


def test_integer_variables_never_get_gradients():
    """Ids computed from a parameter (float -> cast -> int64) lie on a path from a trainable
    parameter to the loss, yet an integer variable has no derivative: no grad is requested."""
    x = fluid.data("x", [4, 2])
    w = fluid.layers.create_parameter([2, 1], "float32", name="w",
                                      default_initializer=fluid.initializer.Constant(1.0))
    ids = fluid.layers.cast(fluid.layers.matmul(x, w), "int64")        # [4, 1] int64
    emb = fluid.layers.embedding(ids, size=[6, 3])
    loss = fluid.layers.mean(emb)
    params_grads = fluid.backward.append_backward(loss)
    block = fluid.default_main_program().global_block()
    assert [p.name for p, _ in params_grads] == ["embedding_0.w_0"]
    assert not any(n.startswith(ids.name + "@GRAD") for n in block.vars)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(fluid.default_startup_program())
    feed = {"x": np.array([[0, 1], [1, 1], [2, 0], [2, 3]], dtype="float32")}
    (g,) = exe.run(feed=feed, fetch_list=[params_grads[0][1]])
    assert g.shape == (6, 3) and np.isclose(g.sum(), 1.0)
