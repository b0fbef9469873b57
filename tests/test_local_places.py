"""``with_data_parallel`` on several CPU places in one process (fluid 1.8's CPU_NUM): one feed
dict per place (or one dict split), gradients averaged, fetches merged along dim 0."""
import numpy as np
import pytest

import fluidlite as fluid

RNG = np.random.default_rng(0)
X = RNG.normal(size=(8, 4)).astype("float32")
Y = RNG.normal(size=(8, 1)).astype("float32")


def build(opt="adam", clip=None):
    main, start = fluid.Program(), fluid.Program()
    main.random_seed = start.random_seed = 3
    with fluid.program_guard(main, start):
        x = fluid.data("x", [None, 4], "float32")
        y = fluid.data("y", [None, 1], "float32")
        h = fluid.layers.fc(x, 8, act="tanh")
        loss = fluid.layers.mean(fluid.layers.square_error_cost(fluid.layers.fc(h, 1), y))
        lr = fluid.layers.exponential_decay(0.1, 2, 0.5)
        o = fluid.optimizer.Adam(lr, grad_clip=clip) if opt == "adam" else \
            fluid.optimizer.Momentum(lr, 0.9, grad_clip=clip,
                                     regularization=fluid.regularizer.L2Decay(0.01))
        o.minimize(loss)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(start, scope=scope)
    return main, exe, scope, loss, lr


def params(main, scope):
    return [np.array(scope.find_var(p.name).get_tensor())
            for p in main.global_block().all_parameters()]


@pytest.mark.parametrize("opt,clip", [("adam", None), ("momentum", None),
                                      ("adam", fluid.clip.GradientClipByGlobalNorm(0.5))])
def test_two_places_equal_one_step_on_the_whole_batch(opt, clip):
    main, exe, scope, loss, lr = build(opt, clip)
    for _ in range(3):
        (whole,) = exe.run(main, feed={"x": X, "y": Y}, fetch_list=[loss], scope=scope)
    want = params(main, scope)
    main2, exe2, scope2, loss2, lr2 = build(opt, clip)
    compiled = fluid.CompiledProgram(main2).with_data_parallel(loss_name=loss2.name,
                                                               places=[0, 1])
    for step in range(3):
        feed = [{"x": X[:4], "y": Y[:4]}, {"x": X[4:], "y": Y[4:]}] if step % 2 else \
            {"x": X, "y": Y}                           # a list per place, or one dict split
        got_loss, got_lr = exe2.run(compiled, feed=feed, fetch_list=[loss2, lr2], scope=scope2)
        assert got_loss.shape == (2,) and got_lr.shape == (1,)
    np.testing.assert_allclose(got_loss.mean(), whole[0], rtol=1e-5)
    for a, b in zip(params(main2, scope2), want):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=1e-6)


def test_cpu_num_sets_the_places_and_return_merged_false(monkeypatch):
    monkeypatch.setenv("CPU_NUM", "4")
    main, exe, scope, loss, lr = build()
    compiled = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name)
    assert compiled._local_places == 4
    per_place = exe.run(compiled, feed={"x": X, "y": Y}, fetch_list=[loss], scope=scope,
                        return_merged=False)[0]
    assert len(per_place) == 4 and all(v.shape == (1,) for v in per_place)
    with pytest.raises(ValueError, match="feed a list of 4 dicts"):
        exe.run(compiled, feed=[{"x": X, "y": Y}] * 2, fetch_list=[loss], scope=scope)
    with pytest.raises(ValueError, match="fewer than the 4 places"):
        exe.run(compiled, feed={"x": X[:3], "y": Y[:3]}, fetch_list=[loss], scope=scope)


def test_plain_program_rejects_a_feed_list_and_says_how():
    main, exe, scope, loss, lr = build()
    with pytest.raises(ValueError, match="Not compiled with data parallel.*with_data_parallel"):
        exe.run(main, feed=[{"x": X, "y": Y}] * 2, fetch_list=[loss], scope=scope)
    one = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name)
    assert one._local_places == 1               # CPU_NUM unset: one place, as before
    exe.run(one, feed=[{"x": X, "y": Y}], fetch_list=[loss], scope=scope)


def test_a_single_place_counts_as_one_place():
    """fluid 1.8 wraps a lone place in a list (``with_data_parallel(places=fluid.CPUPlace())``,
    as its op tests call it): one place, the plain step's numbers."""
    main, exe, scope, loss, lr = build()
    (whole,) = exe.run(main, feed={"x": X, "y": Y}, fetch_list=[loss], scope=scope)
    main2, exe2, scope2, loss2, lr2 = build()
    compiled = fluid.CompiledProgram(main2).with_data_parallel(loss_name=loss2.name,
                                                               places=fluid.CPUPlace())
    (got,) = exe2.run(compiled, feed={"x": X, "y": Y}, fetch_list=[loss2], scope=scope2)
    np.testing.assert_allclose(np.asarray(got).reshape(-1), whole, rtol=1e-6)
