"""warpctc against brute force over every alignment, and its numeric gradient."""
import itertools

import numpy as np

import fluidlite as fluid
from tests.ops.test_sequence import check_grad, run

RNG = np.random.default_rng(9)


def _collapse(path, blank):
    out = [k for i, k in enumerate(path) if i == 0 or k != path[i - 1]]
    return [k for k in out if k != blank]


def _brute(logits, label, blank):
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    total = 0.0
    for path in itertools.product(range(logits.shape[1]), repeat=logits.shape[0]):
        if _collapse(path, blank) == list(label):
            total += np.prod([p[t, k] for t, k in enumerate(path)])
    return -np.log(total)


CASES = ([4, 3, 2, 1], [[1, 2], [1, 1], [2], []])      # a repeat and an empty label included


def test_warpctc_matches_brute_force():
    tl, labels = CASES
    logits = RNG.uniform(-1, 1, (sum(tl), 3))
    lab = np.array([v for s in labels for v in s], "int32").reshape(-1, 1)
    loss, = run("warpctc", {"Logits": (logits, tl), "Label": (lab, [len(s) for s in labels])},
                {"blank": 0}, outs=("Loss",))
    want, at = [], 0
    for n, s in zip(tl, labels):
        want.append(_brute(logits[at:at + n], s, 0))
        at += n
    np.testing.assert_allclose(np.array(loss).ravel(), want, rtol=1e-6)


def test_warpctc_grad():
    tl, labels = CASES
    logits = RNG.uniform(-1, 1, (sum(tl), 3))
    lab = np.array([v for s in labels for v in s], "int32").reshape(-1, 1)
    # (norm_by_times scales the gradient only, as in fluid: it is not the loss's derivative)
    check_grad("warpctc", {"Logits": (logits, tl), "Label": (lab, [len(s) for s in labels])},
               "Logits", {"blank": 0}, out="Loss")


def test_warpctc_layer_trains():
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start):
        x = fluid.data("x", [-1, 4], "float32", lod_level=1)
        y = fluid.data("y", [-1, 1], "int32", lod_level=1)
        logits = fluid.layers.fc(x, 3)
        loss = fluid.layers.mean(fluid.layers.warpctc(logits, y, blank=0))
        fluid.optimizer.Adam(0.1).minimize(loss)
        decoded = fluid.layers.ctc_greedy_decoder(fluid.layers.softmax(logits), blank=0)
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(start, scope=scope)
    feats = np.eye(4, dtype="float32")[[1, 1, 0, 2, 2, 0]]      # one-hot frames
    feed = {"x": fluid.create_lod_tensor(feats, [[3, 3]], None),
            "y": fluid.create_lod_tensor(np.array([[1], [2]], "int32"), [[1, 1]], None)}
    first = float(exe.run(main, feed=feed, fetch_list=[loss], scope=scope)[0].ravel()[0])
    for _ in range(60):
        last, got = exe.run(main, feed=feed, fetch_list=[loss, decoded], scope=scope,
                            return_numpy=False)
    assert float(np.array(last).ravel()[0]) < first / 4
    assert got.recursive_sequence_lengths() == [[1, 1]]
    assert np.array(got).ravel().tolist() == [1, 2]


def test_warpctc_infeasible_sequences_cost_nothing():
    """A label needing more steps than the input has (U + repeats > T: [1, 1] in 2 steps,
    [2, 2, 2] in 4) gets loss 0 and a zero gradient, as warp-ctc's early return in fluid 1.8
    and Paddle 2.6 (whose CPU kernel gives exactly [0, 4.5754304, 0] on these float32
    logits); the feasible sequence in between is unaffected."""
    logits = np.random.default_rng(5).uniform(-2, 2, (9, 4)).astype("float32")
    lab = np.array([[1], [1], [1], [2], [3], [2], [2], [2]], "int32")
    ins = {"Logits": (logits, [2, 3, 4]), "Label": (lab, [2, 3, 3])}
    loss, = run("warpctc", ins, {"blank": 0}, outs=("Loss",))
    np.testing.assert_allclose(np.array(loss).ravel(), [0.0, 4.5754304, 0.0], rtol=1e-6)
    assert np.array(loss).dtype == np.float32
    from fluidlite.core.registry import get_op_def
    lod = {"Logits": ((0, 2, 5, 9),), "Label": ((0, 2, 5, 8),)}
    g = get_op_def("warpctc").backward(logits, lab, dLoss=np.ones((3, 1), "float32"),
                                       lod=lod)["Logits"]
    assert not g[:2].any() and not g[5:].any() and g[2:5].any()
    alone = get_op_def("warpctc").backward(logits[2:5], lab[2:5], dLoss=np.ones((1, 1)),
                                           lod={"Logits": ((0, 3),), "Label": ((0, 3),)})
    np.testing.assert_allclose(g[2:5], alone["Logits"], rtol=1e-6)
    # exactly feasible: [1, 1] needs 3 steps (1, blank, 1)
    one, = run("warpctc", {"Logits": (logits[:3], [3]), "Label": (lab[:2], [2])}, {"blank": 0},
               outs=("Loss",))
    assert np.array(one).item() > 0
    # the padded form too
    pad = np.zeros((4, 3, 4), "float32")
    for b, (s, n) in enumerate(((0, 2), (2, 3), (5, 4))):
        pad[:n, b] = logits[s:s + n]
    lab_pad = np.array([[1, 1, 0], [1, 2, 3], [2, 2, 2]], "int32")
    out = get_op_def("warpctc").forward(pad, lab_pad, np.array([2, 3, 4], "int64"),
                                        np.array([2, 3, 3], "int64"))["Loss"]
    np.testing.assert_allclose(out.ravel(), [0.0, 4.5754304, 0.0], rtol=1e-6)
