"""Book chapter 1, fit_a_line: linear regression on 13 housing-like features with SGD."""
import numpy as np

import fluidlite as fluid

from ._util import assert_decreases, batches, reload_and_compare


def housing(n=256, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (n, 13)).astype("float32")
    w = rng.uniform(-2, 2, (13, 1)).astype("float32")
    y = x @ w + 3.0 + rng.normal(0, 0.05, (n, 1)).astype("float32")
    return x, y.astype("float32")


def test_fit_a_line(tmp_path):
    x = fluid.data(name="x", shape=[None, 13], dtype="float32")
    y = fluid.data(name="y", shape=[None, 1], dtype="float32")
    y_predict = fluid.layers.fc(input=x, size=1, act=None)
    cost = fluid.layers.square_error_cost(input=y_predict, label=y)
    avg_loss = fluid.layers.mean(cost)
    main_program = fluid.default_main_program()
    test_program = main_program.clone(for_test=True)
    sgd_optimizer = fluid.optimizer.SGD(learning_rate=0.1)
    sgd_optimizer.minimize(avg_loss)

    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(fluid.default_startup_program())
    xs, ys = housing()
    losses = []
    for bx, by in batches([xs, ys], 32, 200):
        losses.append(exe.run(main_program, feed={"x": bx, "y": by}, fetch_list=[avg_loss])[0])
    assert_decreases(losses, factor=0.01)
    test_loss, = exe.run(test_program, feed={"x": xs, "y": ys}, fetch_list=[avg_loss])
    assert test_loss[0] < 0.05 * float(np.asarray(losses[0])[0])
    assert [op.type for op in test_program.global_block().ops] == [
        "mul", "elementwise_add", "elementwise_sub", "square", "mean"]

    feed = {"x": xs[:8]}
    got, = reload_and_compare(str(tmp_path / "fit_a_line.inference.model"), ["x"],
                              [y_predict], exe, main_program, feed, test_program,
                              extra_feed={"y": ys[:8]})
    assert got.shape == (8, 1)
    np.testing.assert_allclose(got, ys[:8], atol=0.3)
