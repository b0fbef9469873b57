"""The gradient of an op before a While loop that reads the loop's counter (an array entry
written at ``i`` before the loop increments ``i``): fluid's grad block undoes the counter's
increments, so after ``while_grad`` the counter holds its pre-loop value again; fluidlite
restores it from a copy taken before the loop (backward.py, ``_counters_read_before``)."""
import numpy as np

import fluidlite as fluid

L = fluid.layers


def _build():
    x = fluid.data("x", [None, 3, 4], "float64")
    steps = L.unstack(x, axis=1)
    i = L.fill_constant([1], "int64", 0)
    inputs = L.array_write(steps[0], i)
    for t in (1, 2):
        L.array_write(steps[t], L.fill_constant([1], "int64", t), array=inputs)
    mem = L.array_write(L.fc(steps[0], 5, act="tanh", param_attr="w0", bias_attr=False), i)
    n = L.fill_constant([1], "int64", 3)
    cond = L.less_than(i, n)
    loop = L.While(cond)
    with loop.block():
        h = L.fc(L.concat([L.array_read(inputs, i), L.array_read(mem, i)], axis=1), 5,
                 act="tanh", param_attr="w1", bias_attr=False)
        L.increment(i, in_place=True)
        L.array_write(h, i, array=mem)
        L.less_than(i, n, cond=cond)
    loss = L.reduce_sum(L.array_read(mem, n) * L.array_read(mem, n))
    fluid.backward.append_backward(loss)
    return loss, i


def test_gradient_through_an_entry_written_before_the_loop():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        loss, i = _build()
    ops = [op.type for op in main.global_block().ops]
    # the copy before the loop, the restore right after while_grad
    assert ops[ops.index("while") - 1] == "assign"
    assert ops[ops.index("while_grad") + 1] == "assign"
    rng = np.random.RandomState(5)
    xv = rng.uniform(-1, 1, (2, 3, 4))
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    g0, g1, i_after = exe.run(main, feed={"x": xv}, fetch_list=["w0@GRAD", "w1@GRAD", i],
                              scope=scope)
    assert i_after.tolist() == [0]          # as fluid's decrements leave it
    for name, got in (("w0", g0), ("w1", g1)):
        t = scope.find_var(name).get_tensor()
        w = np.array(t)
        want = np.zeros_like(w)
        for idx in np.ndindex(*w.shape):
            total = 0.0
            for sign in (1, -1):
                w2 = w.copy()
                w2[idx] += sign * 1e-6
                t.set(w2, fluid.CPUPlace())
                (lv,) = exe.run(main, feed={"x": xv}, fetch_list=[loss], scope=scope)
                total += sign * float(np.asarray(lv).reshape(-1)[0])
            want[idx] = total / 2e-6
        t.set(w, fluid.CPUPlace())
        assert np.abs(want).max() > 1e-3, name     # the entry before the loop matters
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8, err_msg=name)
