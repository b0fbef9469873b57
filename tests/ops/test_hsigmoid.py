"""hierarchical_sigmoid against a per-sample walk of fluid's default tree, numeric gradients,
and a small classifier trained with fluid.layers.hsigmoid."""
import numpy as np

import fluidlite as fluid
from tests.ops.test_sequence import check_grad, run

RNG = np.random.default_rng(11)
C, D = 6, 4


def _ref(x, w, b, labels):
    """fluid's loss: the path's terms plus log(1 + exp(0)) = log 2 for each of the
    code_length = (C - 1).bit_length() columns the path does not use (Paddle 2.6: same)."""
    out = []
    code_length = (C - 1).bit_length()
    for xi, c in zip(x, labels.ravel()):
        code, loss, j = c + C, 0.0, 0
        while (code >> (j + 1)) > 0:
            node, bit = (code >> (j + 1)) - 1, (code >> j) & 1
            pre = np.clip(w[node] @ xi + b[node, 0], -40, 40)
            loss += np.log1p(np.exp(pre)) - bit * pre
            j += 1
        out.append(loss + (code_length - j) * np.log(2.0))
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


# -- custom trees (is_custom, PathTable / PathCode) -------------------------------------------
# 4 internal nodes; each sample's path (ended by -1) and bits, of different lengths
TABLE = np.array([[0, 1, 3, -1], [0, 2, -1, -1], [0, -1, -1, -1], [0, 1, 3, 2],
                  [0, 2, -1, 5]], np.int64)          # entries after the first -1 are ignored
CODE = np.array([[1, 0, 1, 0], [0, 1, 0, 0], [1, 0, 0, 0], [1, 1, 0, 1], [0, 0, 1, 1]],
                np.int64)


def _ref_custom(x, w, b, table, code):
    out = []
    for xi, nodes, bits in zip(x, table, code):
        loss, used = 0.0, 0
        for node, bit in zip(nodes, bits):
            if node < 0:
                break
            pre = np.clip(w[node] @ xi + (b[node, 0] if b is not None else 0.0), -40, 40)
            loss += np.log1p(np.exp(pre)) - bit * pre
            used += 1
        out.append(loss + (table.shape[1] - used) * np.log(2.0))     # fluid: log 2 per column
    return np.array(out).reshape(-1, 1)


def _custom_inputs(bias=True):
    x = RNG.uniform(-1, 1, (5, D))
    w = RNG.uniform(-1, 1, (4, D))
    ins = {"X": (x, None), "W": (w, None), "Label": (np.zeros((5, 1), np.int64), None),
           "PathTable": (TABLE, None), "PathCode": (CODE, None)}
    if bias:
        ins["Bias"] = (RNG.uniform(-1, 1, (4, 1)), None)
    return ins


def test_hsigmoid_custom_tree_matches_path_walk():
    for bias in (True, False):
        ins = _custom_inputs(bias)
        out, pre = run("hierarchical_sigmoid", ins, {"num_classes": 4}, outs=("Out", "PreOut"))
        b = ins["Bias"][0] if bias else None
        np.testing.assert_allclose(np.array(out), _ref_custom(ins["X"][0], ins["W"][0], b,
                                                              TABLE, CODE), rtol=1e-10)
        # PreOut is fluid's softrelu of every column: log(1 + exp(0)) past the path
        assert np.array(pre).shape == (5, 4)
        np.testing.assert_allclose(np.array(pre)[2, 1:], [np.log(2.0)] * 3)


def test_hsigmoid_custom_tree_grads():
    ins = _custom_inputs()
    for slot in ("X", "W", "Bias"):
        check_grad("hierarchical_sigmoid", ins, slot, {"num_classes": 4})


def test_hsigmoid_custom_tree_errors():
    import pytest
    ins = _custom_inputs()
    bad = dict(ins, PathTable=(np.array([[0, 7, -1, -1]] * 5, np.int64), None))
    with pytest.raises(ValueError, match=r"PathTable nodes must lie in \[0, 4\).*got 7"):
        run("hierarchical_sigmoid", bad, {"num_classes": 4})
    bad = dict(ins, PathCode=(CODE[:, :2].copy(), None))
    with pytest.raises(ValueError, match=r"PathTable and PathCode must both be \[N, L\]"):
        run("hierarchical_sigmoid", bad, {"num_classes": 4})
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.data("x", [-1, D], "float32")
        y = fluid.data("y", [-1, 1], "int64")
        t = fluid.data("t", [-1, 4], "int64")
        with pytest.raises(ValueError, match="path_code should not be None with custom tree"):
            fluid.layers.hsigmoid(x, y, 4, path_table=t, is_custom=True)
        with pytest.raises(ValueError, match="only used with is_custom=True"):
            fluid.layers.hsigmoid(x, y, 4, path_table=t, path_code=t)
        with pytest.raises(TypeError, match="path_code must be int64"):
            fluid.layers.hsigmoid(x, y, 4, path_table=t, is_custom=True,
                                  path_code=fluid.data("c", [-1, 4], "float32"))


def test_hsigmoid_custom_tree_layer_learns():
    """Two leaves under node 0, two more under node 1 (root node 2): class c's path is
    [2, c // 2] with bits [c // 2, c % 2]."""
    main, start = fluid.Program(), fluid.Program()
    main.random_seed = start.random_seed = 4
    with fluid.program_guard(main, start):
        x = fluid.data("x", [-1, 4], "float32")
        y = fluid.data("y", [-1, 1], "int64")
        table = fluid.data("table", [-1, 2], "int64")
        code = fluid.data("code", [-1, 2], "int64")
        cost = fluid.layers.hsigmoid(x, y, num_classes=3, path_table=table, path_code=code,
                                     is_custom=True)
        loss = fluid.layers.mean(cost)
        fluid.optimizer.Adam(0.1).minimize(loss)
    assert [p.shape for p in main.global_block().all_parameters()] == [(3, 4), (3, 1)]
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(start, scope=scope)
    labels = np.arange(40) % 4
    feed = {"x": np.eye(4, dtype="float32")[labels], "y": labels.reshape(-1, 1),
            "table": np.stack([np.full(40, 2), labels // 2], 1),
            "code": np.stack([labels // 2, labels % 2], 1)}
    first = exe.run(main, feed=feed, fetch_list=[loss], scope=scope)[0].item()
    for _ in range(60):
        last = exe.run(main, feed=feed, fetch_list=[loss], scope=scope)[0].item()
    assert last < first / 5, (first, last)


def test_hsigmoid_short_paths_cost_log2_per_missing_node_as_fluid():
    """num_classes = 5: code_length 3; labels 0..2 have 2-node paths. Paddle 2.6 (CPU) gives
    exactly the path loss + log 2 for them, and the same PreOut = log(1 + exp(pre))."""
    x = np.array([[3.0, -2.0], [-5.0, 4.5], [0.1, 0.2]])
    w = np.array([[1.0, 0.5], [-1.0, 2.0], [0.3, -0.7], [0.2, 0.1]])
    y = np.array([[0], [3], [4]])
    out, pre = run("hierarchical_sigmoid", {"X": (x, None), "W": (w, None), "Label": (y, None)},
                   {"num_classes": 5}, outs=("Out", "PreOut"))
    np.testing.assert_allclose(np.array(out).ravel(), [9.820987, 14.517462, 2.3258412],
                               rtol=1e-6)                     # Paddle 2.6's float32 values
    assert np.array(pre).shape == (3, 3)
    np.testing.assert_allclose(np.array(pre)[0], [9.1141637e-04, 2.1269281, np.log(2.0)],
                               rtol=1e-4)        # (float32's log(1 + exp(-7)) in Paddle)
