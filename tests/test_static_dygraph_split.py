"""The passes below dygraph reach its implementations through ``core.mode`` (they never import
``fluidlite.dygraph``), and build their sub-blocks and step counters with the rewrite verbs
(``rewrite.conditional``, ``rewrite.step_counter``) that ``fluid.layers`` uses too."""
from __future__ import annotations

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import dygraph
from fluidlite.core import mode, names, rewrite
from fluidlite.core.ir import OpRole


def test_mode_finds_what_dygraph_registered_and_says_when_nothing_is():
    for name in ("clip", "to_variable", "guard", "optimizer.minimize", "optimizer.backward",
                 "optimizer.apply_gradients", "optimizer.state_dict", "optimizer.set_dict",
                 "optimizer.dpsgd_minimize"):
        assert callable(mode.implementation(name))
    with pytest.raises(RuntimeError, match="no dygraph implementation of 'nope'"):
        mode.implementation("nope")


def test_is_tensor_tells_dygraph_tensors_from_static_variables():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [-1, 2], "float32")
    with dygraph.guard():
        t = dygraph.to_variable(np.ones(2, np.float32))
        p = dygraph.Linear(2, 2).weight
    assert mode.is_tensor(t) and mode.is_tensor(p)
    assert not mode.is_tensor(x) and not mode.is_tensor(np.ones(2)) and not mode.is_tensor(None)


def test_tensor_flags_are_variables_properties_without_a_program_to_bump():
    with dygraph.guard():
        t = dygraph.to_variable(np.ones(2, np.float32))
        t.stop_gradient = False
        t.persistable = 1
        assert t.stop_gradient is False and t.persistable is True
        assert type(t).stop_gradient is fluid.Variable.stop_gradient


def _programs(build):
    main, startup = fluid.Program(), fluid.Program()
    with names.guard(), fluid.program_guard(main, startup):
        out = build()
    return main, startup, out


def test_step_counter_is_what_autoincreased_step_counter_builds():
    a = _programs(lambda: fluid.layers.autoincreased_step_counter("c", begin=3, step=2))
    b = _programs(lambda: rewrite.step_counter(fluid.default_main_program(),
                                               fluid.default_startup_program(), "c", 3, 2))
    assert str(a[0]) == str(b[0]) and str(a[1]) == str(b[1])
    main, startup, counter = b
    assert [op.type for op in main.global_block().ops] == ["increment"]
    # a second call returns the same counter and adds nothing
    with fluid.program_guard(main, startup):
        again = rewrite.step_counter(main, startup, "c")
    assert again is counter and len(main.global_block().ops) == 1
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    seen = [int(exe.run(main, fetch_list=[counter], scope=scope)[0][0]) for _ in range(3)]
    assert seen == [4, 6, 8]          # begin - 1 + step, then every step


def test_autoincreased_step_counter_says_it_is_static_only():
    with dygraph.guard():
        with pytest.raises(RuntimeError, match="cannot be used in dygraph mode"):
            fluid.layers.autoincreased_step_counter()


def _cond_program():
    def build():
        x = fluid.data("x", [1], "float32")
        flag = fluid.data("flag", [1], "bool")
        out = fluid.layers.fill_constant([1], "float32", 0.0)
        with rewrite.conditional(flag):
            rewrite.append(fluid.default_main_program().current_block(), "scale",
                           {"X": x}, {"Out": out}, {"scale": 2.0})
        return out
    return _programs(build)


def test_conditional_runs_its_block_only_when_the_condition_holds():
    main, startup, out = _cond_program()
    ops = main.global_block().ops
    assert ops[-1].type == "conditional_block"
    assert ops[-1].input("Cond") == ["flag"] and ops[-1].output("Out") == [out.name]
    assert out.name in ops[-1].input("Input")      # it had a value: kept when skipped
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    for flag, want in ((True, 6.0), (False, 0.0)):
        got = exe.run(main, feed={"x": np.array([3.0], np.float32),
                                  "flag": np.array([flag])}, fetch_list=[out])[0]
        assert float(got[0]) == want


def test_conditional_is_one_build_transaction():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        flag = fluid.data("flag", [1], "bool")
        before = (len(main.blocks), len(main.global_block().ops), dict(main.global_block().vars))
        with pytest.raises(ValueError):
            with rewrite.conditional(flag):
                rewrite.append(main.current_block(), "scale", {"X": "missing"}, {"Out": "y"})
        assert (len(main.blocks), len(main.global_block().ops),
                dict(main.global_block().vars)) == before
        assert main.current_block_idx == 0


def test_lookahead_keeps_fluid_switch_ops():
    def build():
        x = fluid.data("x", [-1, 2], "float32")
        loss = fluid.layers.mean(fluid.layers.fc(x, 1))
        fluid.optimizer.LookaheadOptimizer(fluid.optimizer.SGD(0.1), k=2).minimize(loss)
    main, _, _ = _programs(build)
    tail = [op.type for op in main.global_block().ops[-4:]]
    assert tail == ["equal", "logical_not", "conditional_block", "conditional_block"]
    case, default = main.global_block().ops[-2:]
    assert case.input("Cond") == [main.global_block().ops[-4].output("Out")[0]]
    assert default.input("Cond") == main.global_block().ops[-3].output("Out")
    assert not default.attr("sub_block").ops and case.attr("sub_block").ops
    assert all(op.attr("op_role") == int(OpRole.Optimize)
               for op in main.global_block().ops[-4:])


def test_local_sgd_averages_in_a_conditional_block_every_k_steps():
    from fluidlite.distributed import local_sgd

    def build():
        x = fluid.data("x", [-1, 2], "float32")
        loss = fluid.layers.mean(fluid.layers.fc(x, 1))
        fluid.optimizer.SGD(0.1).minimize(loss)
        main = fluid.default_main_program()
        local_sgd.apply(main, fluid.default_startup_program(),
                        main.global_block().all_parameters(), 0, 2, k_steps=3, begin_step=2)
        return main
    main, _, _ = _programs(build)
    types = [op.type for op in main.global_block().ops]
    i = types.index("increment")
    assert types[i:] == ["increment", "fill_constant", "fill_constant", "elementwise_mod",
                         "equal", "fill_constant", "less_equal", "logical_or",
                         "conditional_block"]
    sub = main.global_block().ops[-1].attr("sub_block")
    assert [op.type for op in sub.ops[:5]] == ["elementwise_sub", "c_allreduce_sum", "scale",
                                                "elementwise_sub", "assign"]


def test_loss_scaler_scale_is_fluid_layers_scale():
    from fluidlite import amp
    a = _programs(lambda: fluid.layers.scale(fluid.data("x", [-1, 2], "float32"), 8.0))
    b = _programs(lambda: amp.StaticLossScaler(8.0).scale(fluid.data("x", [-1, 2], "float32")))
    assert str(a[0]) == str(b[0])
    with pytest.raises(TypeError, match="data type of 'x' in scale"):
        _programs(lambda: amp.StaticLossScaler(8.0).scale(fluid.data("b", [1], "bool")))
    with dygraph.guard():
        t = dygraph.to_variable(np.array([1.5], np.float32))
        assert amp.StaticLossScaler(4.0).scale(t).numpy().tolist() == [6.0]


def test_fluid_dygraph_jit_still_has_fluid_names():
    from fluidlite.dygraph import jit
    assert jit.TracedLayer is dygraph.TracedLayer
    assert jit.declarative is dygraph.declarative and jit.to_static is dygraph.to_static
    assert jit.ProgramTranslator is dygraph.ProgramTranslator
