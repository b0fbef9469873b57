"""Tests written from the mutation run of fluidlite/executor/executor.py (issue 28).

They pin what fluid 1.8's Executor does with its arguments (feed / fetch forms, errors and their
wording), ``_runner`` (the dygraph step replay's core), the plan cache (LRU, versions, collected
programs), ``use_prune``, ``close``, ``_fetch_var`` and the dataset entry points. References are
float64 NumPy values computed in the test. Every test builds its own programs and scopes, so the
file can run twice in one process (mutmut's clean run).
"""
import gc
import logging
import os

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.executor import executor as ex_mod


def _affine(w0=0.5, b0=0.25):
    """y = x @ w + b with a [2, 1] parameter and a [1] bias; loss = mean(y)."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [-1, 2], "float32")
        w = fluid.layers.create_parameter([2, 1], "float32", name="w",
                                          default_initializer=fluid.initializer.Constant(w0))
        b = fluid.layers.create_parameter([1], "float32", name="b",
                                          default_initializer=fluid.initializer.Constant(b0))
        y = fluid.layers.elementwise_add(fluid.layers.matmul(x, w), b)
        loss = fluid.layers.mean(y)
    return main, startup, x, y, loss


def _ref(x, w0=0.5, b0=0.25):
    return np.asarray(x, np.float64) @ np.full((2, 1), w0) + b0


X = np.array([[1.0, 2.0], [3.0, -4.0]], np.float32)


def _ready(w0=0.5, b0=0.25):
    main, startup, x, y, loss = _affine(w0, b0)
    scope = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    return exe, scope, main, startup, x, y, loss


# -- feed and fetch forms ------------------------------------------------------------------
def test_feed_as_a_one_element_list_is_the_dict_and_longer_lists_are_refused():
    exe, scope, main, _, x, y, _ = _ready()
    got = exe.run(main, feed=[{"x": X}], fetch_list=[y], scope=scope)[0]
    np.testing.assert_allclose(got, _ref(X), rtol=1e-6)
    got = exe.run(main, feed=({"x": X},), fetch_list=[y], scope=scope)[0]
    np.testing.assert_allclose(got, _ref(X), rtol=1e-6)
    with pytest.raises(ValueError) as e:
        exe.run(main, feed=[{"x": X}, {"x": X}], fetch_list=[y], scope=scope)
    assert str(e.value) == ("Not compiled with data parallel: feed a single dict (or compile "
                            "with fluid.CompiledProgram(program).with_data_parallel() and "
                            "set CPU_NUM to the number of feed dicts)")
    with pytest.raises(ValueError, match="Not compiled with data parallel"):
        exe.run(main, feed=[], fetch_list=[y], scope=scope)
    with pytest.raises(TypeError) as e:
        exe.run(main, feed=X, fetch_list=[y], scope=scope)
    assert str(e.value) == ("feed requires dict as its Parameter. But you passed in "
                            "<class 'numpy.ndarray'>")


def test_fetch_forms_names_variables_nesting_and_a_single_target():
    exe, scope, main, _, x, y, loss = _ready()
    ref = _ref(X)
    got = exe.run(main, feed={"x": X}, fetch_list=y, scope=scope)
    assert len(got) == 1
    np.testing.assert_allclose(got[0], ref, rtol=1e-6)
    got = exe.run(main, feed={"x": X}, fetch_list=y.name, scope=scope)
    assert len(got) == 1
    np.testing.assert_allclose(got[0], ref, rtol=1e-6)
    got = exe.run(main, feed={"x": X}, fetch_list=[loss.name, [y, (loss,)]], scope=scope)
    assert len(got) == 3
    np.testing.assert_allclose(got[0].reshape(()), ref.mean(), rtol=1e-6)
    np.testing.assert_allclose(got[1], ref, rtol=1e-6)
    np.testing.assert_allclose(got[2].reshape(()), ref.mean(), rtol=1e-6)
    assert exe.run(main, feed={"x": X}, fetch_list=None, scope=scope) == []


def test_a_bad_fetch_entry_names_its_position_and_type():
    exe, scope, main, _, x, y, loss = _ready()
    with pytest.raises(TypeError, match=r"Require fetch_list\[1\] 's type shall be one of "
                                        r"\(Variable, str\), but received NoneType\."):
        exe.run(main, feed={"x": X}, fetch_list=[y, None], scope=scope)
    with pytest.raises(TypeError, match=r"fetch_list\[0\]\[1\] 's type .* received int"):
        exe.run(main, feed={"x": X}, fetch_list=[[y, 3]], scope=scope)
    op = main.global_block().ops[0]
    with pytest.raises(TypeError, match=r"fetch_list\[0\] 's type .* received Operator"):
        exe.run(main, feed={"x": X}, fetch_list=[op], scope=scope)


def test_minimize_result_in_fetch_list_is_not_fetched_and_selects_the_optimizer_with_prune():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [-1, 2], "float32")
        w = fluid.layers.create_parameter([2, 1], "float32", name="w",
                                          default_initializer=fluid.initializer.Constant(0.5))
        y = fluid.layers.matmul(x, w)
        loss = fluid.layers.mean(y)
        result = fluid.optimizer.SGD(0.1).minimize(loss)
    scope = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    x64 = X.astype(np.float64)
    # d mean(x @ w) / dw = mean of x's rows
    grad = x64.mean(axis=0).reshape(2, 1)
    got = exe.run(main, feed={"x": X}, fetch_list=[result, loss], scope=scope)
    assert len(got) == 1                            # the minimize result is skipped, not the end
    np.testing.assert_allclose(got[0].reshape(()), (x64 @ np.full((2, 1), 0.5)).mean(),
                               rtol=1e-6)
    w1 = 0.5 - 0.1 * grad
    np.testing.assert_allclose(np.array(scope.find_var("w").get_tensor()), w1, rtol=1e-6)
    # use_prune with only the loss: no update
    got = exe.run(main, feed={"x": X}, fetch_list=[loss], scope=scope, use_prune=True)
    np.testing.assert_allclose(got[0].reshape(()), (x64 @ w1).mean(), rtol=1e-6)
    np.testing.assert_allclose(np.array(scope.find_var("w").get_tensor()), w1, rtol=1e-6)
    # use_prune with the minimize result: the update runs, nothing is fetched
    got = exe.run(main, feed={"x": X}, fetch_list=[result], scope=scope, use_prune=True)
    assert got == []
    np.testing.assert_allclose(np.array(scope.find_var("w").get_tensor()), w1 - 0.1 * grad,
                               rtol=1e-6)
    # the optimize ops as a bare list
    got = exe.run(main, feed={"x": X}, fetch_list=[result[0], loss], scope=scope,
                  use_prune=True)
    assert len(got) == 1                            # the ops are skipped, the loss fetched
    np.testing.assert_allclose(got[0].reshape(()), (x64 @ (w1 - 0.1 * grad)).mean(),
                               rtol=1e-6)
    np.testing.assert_allclose(np.array(scope.find_var("w").get_tensor()), w1 - 0.2 * grad,
                               rtol=1e-6)
    assert ex_mod._optimize_ops(loss) == [] and ex_mod._optimize_ops("x") == []
    assert ex_mod._optimize_ops(None) == []
    assert ex_mod._optimize_ops([result]) == result[0]
    assert ex_mod._optimize_ops(result[0]) == result[0]
    assert ex_mod._optimize_ops([result[0][0]]) == [result[0][0]]


def test_use_prune_errors_and_its_cache():
    exe, scope, main, _, x, y, loss = _ready()
    with pytest.raises(ValueError) as e:
        exe.run(main, feed={"x": X}, fetch_list=[], scope=scope, use_prune=True)
    assert str(e.value) == ("use_prune=True needs targets: fetch_list names no Variable and no "
                            "optimize op (pass the fetch targets, or minimize()'s result to "
                            "run the optimizer).")
    mul = [op for op in main.global_block().ops if op.type != "feed"][0]
    with pytest.raises(TypeError, match=f"The operator '{mul.type}' in fetch_list is not an "
                                        "optimize op"):
        exe.run(main, feed={"x": X}, fetch_list=[[mul]], scope=scope, use_prune=True)
    first = exe._pruned(main, ("x",), (y.name,), [])
    assert exe._pruned(main, ("x",), (y.name,), []) is first
    other = exe._pruned(main, ("x",), (loss.name,), [])
    assert other is not first
    assert len(exe._pruned_programs) == 2
    # the LRU order: a hit moves the key to the end
    exe._pruned(main, ("x",), (y.name,), [])
    assert list(exe._pruned_programs.values())[-1] is first
    # a new version of the program drops the pruned copies of the older one
    with fluid.program_guard(main):
        fluid.layers.scale(y, 2.0)
    exe._pruned(main, ("x",), (y.name,), [])
    assert len(exe._pruned_programs) == 1
    # the cache is bounded
    exe.cache_size = 1
    exe._pruned(main, ("x",), (loss.name,), [])
    assert len(exe._pruned_programs) == 1
    assert list(exe._pruned_programs)[0][3] == (loss.name,)     # the oldest one dropped
    got = exe.run(main, feed={"x": X}, fetch_list=[y], scope=scope, use_prune=True)
    np.testing.assert_allclose(got[0], _ref(X), rtol=1e-6)


# -- the plan cache ----------------------------------------------------------------------------
def test_plan_cache_reuses_orders_and_bounds_its_plans():
    exe, scope, main, _, x, y, loss = _ready()
    exe.run(main, feed={"x": X}, fetch_list=[y], scope=scope)
    exe.run(main, feed={"x": X}, fetch_list=[loss], scope=scope)
    plans = exe.cached_plans(main)
    assert len(plans) == 2
    exe.run(main, feed={"x": X}, fetch_list=[y], scope=scope)
    assert exe.cached_plans(main) == [plans[1], plans[0]]      # y's plan used last
    assert len(exe.cached_plans(main)) == 2
    exe.cache_size = 1
    m2, s2, x2, y2, _ = _affine()
    exe.run(s2, scope=scope)
    exe.run(m2, feed={"x": X}, fetch_list=[y2], scope=scope)
    assert exe.cached_plans(main) == []
    assert len(exe.cached_plans()) == 1
    assert id(main) not in exe._watched and id(m2) in exe._watched
    assert id(s2) not in exe._watched


def test_a_changed_program_drops_its_old_plans():
    exe, scope, main, _, x, y, loss = _ready()
    exe.run(main, feed={"x": X}, fetch_list=[y], scope=scope)
    exe.run(main, feed={"x": X}, fetch_list=[loss], scope=scope)
    with fluid.program_guard(main):
        z = fluid.layers.scale(y, 3.0)
    got = exe.run(main, feed={"x": X}, fetch_list=[z], scope=scope)[0]
    np.testing.assert_allclose(got, 3 * _ref(X), rtol=1e-6)
    assert len(exe.cached_plans(main)) == 1


def test_plans_of_a_collected_program_are_released():
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    keep, s_keep, _, y_keep, _ = _affine()
    exe.run(s_keep, scope=scope)
    exe.run(keep, feed={"x": X}, fetch_list=[y_keep], scope=scope)

    def once():
        main, startup, x, y, _ = _affine()
        exe.run(main, feed={"x": X}, fetch_list=[y], scope=scope)
        exe._pruned(main, ("x",), (y.name,), [])
        return id(main)
    pid = once()
    gc.collect()
    # the finalizer purged (lock free) or noted the program
    with exe._lock:
        if exe._dead:
            exe._purge()
    assert all(k[0] != pid for k in exe._plans)
    assert all(k[0] != pid for k in exe._pruned_programs)
    assert pid not in exe._watched
    assert exe._dead == []
    assert len(exe.cached_plans(keep)) == 1 and id(keep) in exe._watched


def test_a_program_collected_while_the_lock_is_held_is_purged_on_the_next_run():
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    keep, s_keep, _, y_keep, _ = _affine()
    exe.run(s_keep, scope=scope)
    main, startup, x, y, _ = _affine()
    exe.run(main, feed={"x": X}, fetch_list=[y], scope=scope)
    pid = id(main)
    with exe._lock:
        ex_mod._program_collected(__import__("weakref").ref(exe), pid)
        assert exe._dead == [pid]            # could not take the lock: only noted
        assert any(k[0] == pid for k in exe._plans)
    exe.run(keep, feed={"x": X}, fetch_list=[y_keep], scope=scope)
    assert exe._dead == []
    assert all(k[0] != pid for k in exe._plans) and pid not in exe._watched
    # unlocked: purged at once
    exe._forget_program(id(keep))
    assert all(k[0] != id(keep) for k in exe._plans) and exe._dead == []
    assert id(keep) not in exe._watched
    # a collected executor: nothing happens
    import weakref

    class Gone:
        pass
    g = Gone()
    ref = weakref.ref(g)
    del g
    gc.collect()
    ex_mod._program_collected(ref, 1)


def test_close_releases_plans_and_refuses_further_runs():
    exe, scope, main, _, x, y, _ = _ready()
    exe.run(main, feed={"x": X}, fetch_list=[y], scope=scope)
    assert exe.cached_plans()
    exe.close()
    assert exe.cached_plans() == [] and exe._watched == {}
    assert len(exe._bound) == 0
    with pytest.raises(RuntimeError) as e:
        exe.run(main, feed={"x": X}, fetch_list=[y], scope=scope)
    assert str(e.value) == "Attempted to use a closed Executor"


def test_run_refuses_a_non_program_and_runs_a_compiled_program():
    exe, scope, main, _, x, y, _ = _ready()
    with pytest.raises(TypeError) as e:
        exe.run("main", feed={"x": X}, fetch_list=[y], scope=scope)
    assert str(e.value) == ("Executor requires Program as its Parameter. But you passed in "
                            "<class 'str'>")
    got = exe.run(fluid.CompiledProgram(main), feed={"x": X}, fetch_list=[y], scope=scope)[0]
    np.testing.assert_allclose(got, _ref(X), rtol=1e-6)


def test_uninitialized_persistables_are_named():
    main, startup, x, y, _ = _affine()
    exe = fluid.Executor(fluid.CPUPlace())
    with pytest.raises(RuntimeError, match=r"Persistable variable\(s\) \[.*'w'.*\] are not "
                                           r"initialized in the scope\. Run the startup"):
        exe.run(main, feed={"x": X}, fetch_list=[y], scope=fluid.Scope())
    scope = fluid.Scope()
    scope.var("w")
    scope.var("b")
    with pytest.raises(RuntimeError) as e:
        exe.run(main, feed={"x": X}, fetch_list=[y], scope=scope)
    assert str(e.value).startswith("Persistable variable(s) ['w', 'b'] are not initialized")
    exe.run(startup, scope=scope)                   # both initialized now
    fluid.Scope  # noqa: B018
    s2 = fluid.Scope()
    exe.run(startup, scope=s2)
    s3 = fluid.Scope()
    s3.var("w").get_tensor().set(np.full((2, 1), 0.5, np.float32), fluid.CPUPlace())
    s3.var("b")
    with pytest.raises(RuntimeError) as e:
        exe.run(main, feed={"x": X}, fetch_list=[y], scope=s3)
    assert str(e.value) == (
        "Persistable variable(s) ['b'] are not initialized in the scope. Run the startup "
        "program first (exe.run(fluid.default_startup_program())), or load them "
        "(fluid.io.load_persistables) before running this program.")


def test_an_empty_program_warns(caplog):
    exe = fluid.Executor(fluid.CPUPlace())
    with caplog.at_level(logging.WARNING, logger="fluidlite"):
        assert exe.run(fluid.Program(), scope=fluid.Scope()) == []
    msgs = [r.getMessage() for r in caplog.records]
    assert msgs == ["There are no operators in the program to be executed. If you pass "
                    "Program manually, please use fluid.program_guard to ensure the current "
                    "Program is being used."]
    caplog.clear()
    exe, scope, main, _, x, y, _ = _ready()
    with caplog.at_level(logging.WARNING, logger="fluidlite"):
        assert exe.run(main, feed={"x": X}, scope=scope) == []     # ops, no fetch: no warning
    assert caplog.records == []


def test_cuda_place_warns_once_per_process(caplog, monkeypatch):
    monkeypatch.setattr(ex_mod, "_warned_cuda", False)
    exe, scope, main, _, x, y, _ = _ready()
    exe.place = fluid.CUDAPlace(0)
    with caplog.at_level(logging.WARNING, logger="fluidlite"):
        got = exe.run(main, feed={"x": X}, fetch_list=[y], scope=scope)[0]
        exe.run(main, feed={"x": X}, fetch_list=[y], scope=scope)
    np.testing.assert_allclose(got, _ref(X), rtol=1e-6)
    msgs = [r.getMessage() for r in caplog.records]
    assert msgs == ["fluidlite runs on the CPU only; %r is accepted and the program runs on "
                    "the CPU." % (fluid.CUDAPlace(0),)]
    assert ex_mod._warned_cuda is True
    caplog.clear()
    monkeypatch.setattr(ex_mod, "_warned_cuda", False)
    exe.place = fluid.CPUPlace()
    with caplog.at_level(logging.WARNING, logger="fluidlite"):
        exe.run(main, feed={"x": X}, fetch_list=[y], scope=scope)
    assert "runs on the CPU only" not in caplog.text
    assert ex_mod._warned_cuda is False
    assert isinstance(fluid.Executor().place, fluid.CPUPlace)


def test_return_numpy_false_gives_lod_tensors():
    exe, scope, main, _, x, y, _ = _ready()
    t = exe.run(main, feed={"x": X}, fetch_list=[y], scope=scope, return_numpy=False)[0]
    assert isinstance(t, fluid.LoDTensor)
    np.testing.assert_allclose(np.array(t), _ref(X), rtol=1e-6)


def test_fetched_values_are_copies_of_the_persistables():
    exe, scope, main, _, x, y, _ = _ready()
    w = main.global_block().var("w")
    got = exe.run(main, feed={"x": X}, fetch_list=[w], scope=scope)[0]
    got[...] = 7
    np.testing.assert_allclose(np.array(scope.find_var("w").get_tensor()), 0.5)
    # _runner copies like run
    run = exe._runner(main, ["x"], ["w"], scope)
    out = run([X])[0]
    out[...] = 9
    np.testing.assert_allclose(np.array(scope.find_var("w").get_tensor()), 0.5)


# -- _fetch_var ------------------------------------------------------------------------------------
def test_fetch_var_reads_a_persistable_and_asserts_on_a_missing_one():
    exe, scope, main, _, x, y, _ = _ready(w0=1.5)
    a = ex_mod._fetch_var("w", scope)
    assert isinstance(a, np.ndarray)
    np.testing.assert_allclose(a, np.full((2, 1), 1.5))
    t = ex_mod._fetch_var("w", scope, return_numpy=False)
    assert not isinstance(t, np.ndarray)
    np.testing.assert_allclose(np.array(t), np.full((2, 1), 1.5))
    with pytest.raises(AssertionError, match="Cannot find nope in scope"):
        ex_mod._fetch_var("nope", scope)
    scope.var("empty")
    with pytest.raises(AssertionError, match="Cannot find empty in scope"):
        ex_mod._fetch_var("empty", scope)
    with fluid.scope_guard(scope):
        np.testing.assert_allclose(ex_mod._fetch_var("b"), [0.25])


# -- _runner (dygraph step replay) --------------------------------------------------------------
def _sgd_program():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [2, 2], "float32")
        w = fluid.layers.create_parameter([2, 1], "float32", name="w",
                                          default_initializer=fluid.initializer.Constant(0.5))
        y = fluid.layers.matmul(x, w)
        loss = fluid.layers.mean(y)
        fluid.optimizer.SGD(0.1).minimize(loss)
    return main, startup, loss


def test_runner_matches_run_and_writes_the_persistables():
    main, startup, loss = _sgd_program()
    exe = fluid.Executor(fluid.CPUPlace())
    s1, s2 = fluid.Scope(), fluid.Scope()
    exe.run(startup, scope=s1)
    exe.run(startup, scope=s2)
    run = exe._runner(main, ["x"], [loss.name, "w"], s2)
    w = np.full((2, 1), 0.5)
    grad = X.astype(np.float64).mean(axis=0).reshape(2, 1)
    for step in range(3):
        a = exe.run(main, feed={"x": X}, fetch_list=[loss, "w"], scope=s1)
        b = run([X])
        assert len(b) == 2
        np.testing.assert_allclose(b[0].reshape(()), (X.astype(np.float64) @ w).mean(),
                                   rtol=1e-6)
        w = w - 0.1 * grad
        np.testing.assert_allclose(b[1], w, rtol=1e-6)
        for u, v in zip(a, b):
            np.testing.assert_array_equal(u, v)
    np.testing.assert_allclose(np.array(s2.find_var("w").get_tensor()), w, rtol=1e-6)
    # checked feeds: a wrong shape is refused; trusted skips the check
    with pytest.raises(ValueError):
        run([np.zeros((3, 2), np.float32)])
    trusted = exe._runner(main, ["x"], [loss.name], s2, trusted=True)
    np.testing.assert_allclose(trusted([X])[0].reshape(()), (X.astype(np.float64) @ w).mean(),
                               rtol=1e-6)


def test_runner_cells_hold_persistables_outside_the_scope():
    main, startup, loss = _sgd_program()
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)

    class Cell:
        def __init__(self, v):
            self._value = v
    cell = Cell(np.full((2, 1), 2.0, np.float32))
    run = exe._runner(main, ["x"], [loss.name], scope, cells={"w": cell})
    out = run([X])[0]
    np.testing.assert_allclose(out.reshape(()), (X.astype(np.float64) @ np.full((2, 1), 2.0))
                               .mean(), rtol=1e-6)
    grad = X.astype(np.float64).mean(axis=0).reshape(2, 1)
    np.testing.assert_allclose(cell._value, 2.0 - 0.1 * grad, rtol=1e-6)
    np.testing.assert_allclose(np.array(scope.find_var("w").get_tensor()), 0.5)  # untouched
    empty = Cell(None)
    with pytest.raises(RuntimeError, match=r"\['w'\] are not initialized"):
        exe._runner(main, ["x"], [loss.name], scope, cells={"w": empty})


def test_runner_refuses_uninitialized_and_lod_programs():
    main, startup, loss = _sgd_program()
    exe = fluid.Executor(fluid.CPUPlace())
    with pytest.raises(RuntimeError, match="not initialized"):
        exe._runner(main, ["x"], [loss.name], fluid.Scope())
    m, s = fluid.Program(), fluid.Program()
    with fluid.program_guard(m, s), fluid.unique_name.guard():
        seq = fluid.data("seq", [-1, 1], "float32", lod_level=1)
        pooled = fluid.layers.sequence_pool(seq, "sum")
    with pytest.raises(ValueError) as e:
        exe._runner(m, ["seq"], [pooled.name], fluid.Scope())
    assert str(e.value) == "Executor._runner: the program uses LoD; use run()"


def test_runner_failure_restores_random_streams_and_persistables():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [4, 3], "float32")
        w = fluid.layers.create_parameter([3, 3], "float32", name="w",
                                          default_initializer=fluid.initializer.Constant(1.0))
        d = fluid.layers.dropout(x, 0.5)                # consumes the stream, then matmul fails
        loss = fluid.layers.mean(fluid.layers.matmul(d, w))
        fluid.optimizer.SGD(0.1).minimize(loss)
    exe = fluid.Executor(fluid.CPUPlace())
    s1, s2 = fluid.Scope(), fluid.Scope()
    exe.run(startup, scope=s1)
    exe.run(startup, scope=s2)
    xs = np.arange(12, dtype=np.float32).reshape(4, 3)
    r1 = exe._runner(main, ["x"], [d.name], s1, trusted=True)
    r2 = exe._runner(main, ["x"], [d.name], s2, trusted=True)
    bad = np.zeros((4, 5), np.float32)              # trusted: the kernel itself fails
    with pytest.raises(Exception):
        r2([bad])
    np.testing.assert_allclose(np.array(s2.find_var("w").get_tensor()), 1.0)
    a, b = r1([xs])[0], r2([xs])[0]
    np.testing.assert_array_equal(a, b)             # same stream position despite the failure


def test_run_failure_restores_random_streams():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [-1, 3], "float32")
        d = fluid.layers.dropout(x, 0.5)
        y = fluid.layers.reshape(d, [2, 6])         # fails for 3 rows
    exe = fluid.Executor(fluid.CPUPlace())
    s1, s2 = fluid.Scope(), fluid.Scope()
    xs = np.ones((4, 3), np.float32)
    with pytest.raises(Exception):
        exe.run(main, feed={"x": np.ones((3, 3), np.float32)}, fetch_list=[y], scope=s2)
    a = exe.run(main, feed={"x": xs}, fetch_list=[y], scope=s1)[0]
    b = exe.run(main, feed={"x": xs}, fetch_list=[y], scope=s2)[0]
    np.testing.assert_array_equal(a, b)


def test_profile_records_every_step():
    exe, scope, main, _, x, y, _ = _ready()
    assert exe.last_profile is None
    got = exe.run(main, feed={"x": X}, fetch_list=[y], scope=scope, profile=True)[0]
    np.testing.assert_allclose(got, _ref(X), rtol=1e-6)
    assert exe.last_profile is not None
    report = exe.last_profile.report()
    assert "matmul" in report or "mul" in report
    prof = exe.last_profile
    exe.run(main, feed={"x": X}, fetch_list=[y], scope=scope)
    assert exe.last_profile is prof


# -- datasets -------------------------------------------------------------------------------------
def test_dataset_entry_points_check_the_dataset(tmp_path, capsys):
    with pytest.raises(RuntimeError) as e:
        fluid.Executor().train_from_dataset(fluid.Program(), None)
    assert str(e.value) == "dataset is needed and should be initialized"
    with pytest.raises(RuntimeError, match="dataset is needed"):
        fluid.Executor().infer_from_dataset(fluid.Program(), None)
    with pytest.raises(TypeError, match=r"train_from_dataset: expected a fluid.dataset dataset "
                                        r".*received list"):
        fluid.Executor().train_from_dataset(fluid.Program(), [])

    class NotCallable:
        _run = 3
    with pytest.raises(TypeError, match="received NotCallable"):
        ex_mod._dataset_of(NotCallable())


def test_train_and_infer_from_dataset_run_the_program(tmp_path, capsys):
    path = os.path.join(str(tmp_path), "part-0")
    with open(path, "w") as f:
        for line in ["1 1.0", "1 2.0"]:
            print(line, file=f)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [-1, 1], "float32")
        w = fluid.layers.create_parameter([1, 1], "float32", name="w",
                                          default_initializer=fluid.initializer.Constant(1.0))
        y = fluid.layers.matmul(x, w)
        loss = fluid.layers.mean(y)
        fluid.optimizer.SGD(0.5).minimize(loss)
    dataset = fluid.dataset.DatasetFactory().create_dataset("QueueDataset")
    dataset.set_use_var([x])
    dataset.set_batch_size(2)
    dataset.set_filelist([path])
    scope = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    with fluid.scope_guard(scope):
        exe.infer_from_dataset(main, dataset, fetch_list=[y], print_period=1)
    out = capsys.readouterr().out
    assert "1.0 2.0" in out
    np.testing.assert_allclose(np.array(scope.find_var("w").get_tensor()), 1.0)  # no update
    with fluid.scope_guard(scope):
        exe.train_from_dataset(main, dataset)
    # one batch of [1, 2]: d mean(x w)/dw = 1.5
    np.testing.assert_allclose(np.array(scope.find_var("w").get_tensor()), 1.0 - 0.5 * 1.5,
                               rtol=1e-6)


def test_dropout_masks_differ_between_runs_and_repeat_in_a_fresh_scope():
    """The random streams belong to (plan, scope) and advance run to run."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [-1, 64], "float32")
        d = fluid.layers.dropout(x, 0.5)
    exe = fluid.Executor(fluid.CPUPlace())
    xs = np.ones((4, 64), np.float32)
    s1, s2 = fluid.Scope(), fluid.Scope()
    a1 = exe.run(main, feed={"x": xs}, fetch_list=[d], scope=s1)[0]
    a2 = exe.run(main, feed={"x": xs}, fetch_list=[d], scope=s1)[0]
    s1.var("new_variable")                          # a new scope epoch: holders looked up again
    a3 = exe.run(main, feed={"x": xs}, fetch_list=[d], scope=s1)[0]
    b1 = exe.run(main, feed={"x": xs}, fetch_list=[d], scope=s2)[0]
    b2 = exe.run(main, feed={"x": xs}, fetch_list=[d], scope=s2)[0]
    assert not np.array_equal(a1, a2) and not np.array_equal(a2, a3)
    assert not np.array_equal(a1, a3)
    np.testing.assert_array_equal(a1, b1)
    np.testing.assert_array_equal(a2, b2)
    # _runner shares the scope's streams with run()
    run = exe._runner(main, ["x"], [d.name], s2)
    c3 = run([xs])[0]
    b4 = exe.run(main, feed={"x": xs}, fetch_list=[d], scope=s2)[0]
    np.testing.assert_array_equal(c3, a3)
    assert not np.array_equal(b4, c3)


def test_runner_creates_written_persistables_missing_from_the_scope():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [2, 2], "float32")
        acc = fluid.layers.create_global_var([2, 2], 0.0, "float32", persistable=True,
                                             name="acc")
        fluid.layers.assign(fluid.layers.scale(x, 2.0), acc)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    run = exe._runner(main, ["x"], [], scope)
    run([X])
    np.testing.assert_allclose(np.array(scope.find_var("acc").get_tensor()), 2 * X)
    s2 = fluid.Scope()
    exe.run(main, feed={"x": X}, scope=s2)
    np.testing.assert_allclose(np.array(s2.find_var("acc").get_tensor()), 2 * X)


def test_two_plans_on_one_scope_keep_their_own_random_streams():
    """Alternating two fetch sets (two plans) on one scope: each plan's dropout stream advances
    as if it ran alone (a plan resolving must not drop the other plan's streams)."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [-1, 64], "float32")
        d = fluid.layers.dropout(x, 0.5)
        s = fluid.layers.scale(d, 1.0)
    exe = fluid.Executor(fluid.CPUPlace())
    xs = np.ones((4, 64), np.float32)
    alone = fluid.Scope()
    ref = [exe.run(main, feed={"x": xs}, fetch_list=[d], scope=alone)[0] for _ in range(3)]
    mixed = fluid.Scope()
    got = []
    for _ in range(3):
        got.append(exe.run(main, feed={"x": xs}, fetch_list=[d], scope=mixed)[0])
        exe.run(main, feed={"x": xs}, fetch_list=[s], scope=mixed)
    for a, b in zip(ref, got):
        np.testing.assert_array_equal(a, b)


def test_a_profiled_run_draws_from_the_scope_streams():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [-1, 64], "float32")
        d = fluid.layers.dropout(x, 0.5)
    exe = fluid.Executor(fluid.CPUPlace())
    xs = np.ones((4, 64), np.float32)
    s1, s2 = fluid.Scope(), fluid.Scope()
    plain = [exe.run(main, feed={"x": xs}, fetch_list=[d], scope=s1)[0] for _ in range(2)]
    prof = [exe.run(main, feed={"x": xs}, fetch_list=[d], scope=s2, profile=True)[0]
            for _ in range(2)]
    for a, b in zip(plain, prof):
        np.testing.assert_array_equal(a, b)
