"""hierarchical_sigmoid against a per-sample walk of fluid's default tree, numeric gradients,
and a small classifier trained with fluid.layers.hsigmoid."""
import numpy as np

import fluidlite as fluid
from tests.ops.test_sequence import check_grad, run

RNG = np.random.default_rng(11)
C, D = 6, 4


def _ref(x, w, b, labels):
    out = []
    for xi, c in zip(x, labels.ravel()):
        code, loss, j = c + C, 0.0, 0
        while (code >> (j + 1)) > 0:
            node, bit = (code >> (j + 1)) - 1, (code >> j) & 1
            pre = np.clip(w[node] @ xi + b[node, 0], -40, 40)
            loss += np.log1p(np.exp(pre)) - bit * pre
            j += 1
        out.append(loss)
    return np.array(out).reshape(-1, 1)


def _inputs():
    x = RNG.uniform(-1, 1, (5, D))
    w = RNG.uniform(-1, 1, (C - 1, D))
    b = RNG.uniform(-1, 1, (C - 1, 1))
    y = np.array([[0], [5], [3], [1], [2]])
    return x, w, b, y


def test_hsigmoid_matches_tree_walk():
    x, w, b, y = _inputs()
    out, = run("hierarchical_sigmoid", {"X": (x, None), "W": (w, None), "Label": (y, None),
                                        "Bias": (b, None)}, {"num_classes": C})
    np.testing.assert_allclose(np.array(out), _ref(x, w, b, y), rtol=1e-6)


def test_hsigmoid_grads():
    x, w, b, y = _inputs()
    for slot in ("X", "W", "Bias"):
        check_grad("hierarchical_sigmoid", {"X": (x, None), "W": (w, None), "Label": (y, None),
                                            "Bias": (b, None)}, slot, {"num_classes": C})


def test_hsigmoid_layer_learns():
    main, start = fluid.Program(), fluid.Program()
    main.random_seed = start.random_seed = 4
    with fluid.program_guard(main, start):
        x = fluid.data("x", [-1, C], "float32")
        y = fluid.data("y", [-1, 1], "int64")
        loss = fluid.layers.mean(fluid.layers.hsigmoid(x, y, num_classes=C))
        fluid.optimizer.Adam(0.1).minimize(loss)
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(start, scope=scope)
    labels = np.arange(60) % C
    feed = {"x": np.eye(C, dtype="float32")[labels], "y": labels.reshape(-1, 1)}
    first = exe.run(main, feed=feed, fetch_list=[loss], scope=scope)[0].item()
    for _ in range(100):
        last = exe.run(main, feed=feed, fetch_list=[loss], scope=scope)[0].item()
    assert last < first / 5, (first, last)
