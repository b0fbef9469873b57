"""``concat`` passes its inputs' LoD on but makes none (``lod_passthrough``): a program that
concatenates plain tensors compiles without LoD tracking -- and a dygraph step of it is
replayed -- while LoD inputs still get their sequences joined."""
import numpy as np

import fluidlite as fluid
from fluidlite import dygraph
from fluidlite.dygraph import replay


def _plan_uses_lod(main, feed, fetch):
    exe = fluid.Executor(fluid.CPUPlace())
    out = exe.run(main, feed=feed, fetch_list=fetch, return_numpy=False)
    plan = exe._plan(main, tuple(sorted(feed)), tuple(v.name for v in fetch))
    return plan.uses_lod, out


def test_concat_of_plain_tensors_needs_no_lod_tracking():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        a, b = fluid.data("a", [-1, 2]), fluid.data("b", [-1, 3])
        out = fluid.layers.concat([a, b], axis=1)
    x, y = np.ones((4, 2), "float32"), np.zeros((4, 3), "float32")
    uses, (got,) = _plan_uses_lod(main, {"a": x, "b": y}, [out])
    assert not uses
    np.testing.assert_array_equal(np.asarray(got), np.concatenate([x, y], 1))


def test_concat_of_lod_inputs_still_joins_their_sequences():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        a = fluid.data("a", [-1, 2], lod_level=1)
        b = fluid.data("b", [-1, 2], lod_level=1)
        out = fluid.layers.concat([a, b], axis=0)
    place = fluid.CPUPlace()
    ta = fluid.create_lod_tensor(np.ones((3, 2), "float32"), [[1, 2]], place)
    tb = fluid.create_lod_tensor(np.zeros((4, 2), "float32"), [[4]], place)
    uses, (got,) = _plan_uses_lod(main, {"a": ta, "b": tb}, [out])
    assert uses
    assert got.lod() == [[0, 1, 3, 7]]


def test_a_dygraph_step_with_concat_is_replayed():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 3)).astype("float32")
    r = replay.REPLAYER
    r.reset()
    before = r.replayed
    with dygraph.guard():
        fc = dygraph.Linear(6, 1)
        opt = fluid.optimizer.SGD(0.1, parameter_list=fc.parameters())
        for _ in range(5):
            t = dygraph.to_variable(x)
            h = fluid.layers.concat([t, fluid.layers.tanh(t)], axis=1)
            loss = fluid.layers.mean(fc(h))
            loss.backward()
            opt.minimize(loss)
            opt.clear_gradients()
    assert r.replayed - before == 2         # steps 0-2 eager (recorded), 3 and 4 replayed
    r.reset()
