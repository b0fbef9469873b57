"""Mutation-round tests for fluidlite/ops/tree_conv.py.

Reference: fluid 1.8's Tree2ColUtil / TreeNode (paddle/fluid/operators/math/tree2col.{h,cc}):
per root a depth-first patch of the nodes less than max_depth levels below it, member weights
eta_t = (max_depth - d) / max_depth, eta_l = (1 - eta_t) * (0.5 if one sibling else
(i - 1) / (s - 1)), eta_r = (1 - eta_t) * (1 - eta_l); Out = patch . Filter. The eta tables
below are worked out by hand for two small trees (a chain under a root with two children,
and a root with three children), not computed by the op's code. Gradients are the exact
adjoints of that linear map (checked against the same tables).
"""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core.registry import get_op_def

OP = get_op_def("tree_conv")
N = 5
# sample 0: 2 -> [1, 3], 1 -> [5], 5 -> [4]   (ids up to N in both columns; 1 as a child)
# sample 1: 1 -> [2, 3, 4], then padding (node 5 is in no edge)
EDGES = np.array([[[2, 1], [2, 3], [1, 5], [5, 4]],
                  [[1, 2], [1, 3], [1, 4], [0, 0]]], "int32")


def _hand_etas():
    """A[b, k, p, m] (k = l, r, t) for max_depth 3, from the formulas by hand."""
    a = np.zeros((2, 3, N, N))

    def put(b, p, m, l, r, t):
        a[b, :, p - 1, m - 1] += (l, r, t)
    # sample 0
    put(0, 1, 1, 0, 0, 1)
    put(0, 1, 5, 1 / 6, 5 / 18, 2 / 3)              # depth 1, only child
    put(0, 1, 4, 1 / 3, 4 / 9, 1 / 3)               # depth 2, only child
    put(0, 2, 2, 0, 0, 1)
    put(0, 2, 1, 0, 1 / 3, 2 / 3)                   # depth 1, child 1 of 2
    put(0, 2, 3, 1 / 3, 2 / 9, 2 / 3)               # depth 1, child 2 of 2
    put(0, 2, 5, 1 / 3, 4 / 9, 1 / 3)               # depth 2, only child (4 is too deep)
    put(0, 3, 3, 0, 0, 1)
    put(0, 4, 4, 0, 0, 1)
    put(0, 5, 5, 0, 0, 1)
    put(0, 5, 4, 1 / 6, 5 / 18, 2 / 3)
    # sample 1: 4 nodes (row 5 stays zero)
    put(1, 1, 1, 0, 0, 1)
    put(1, 1, 2, 0, 1 / 3, 2 / 3)                   # child 1 of 3
    put(1, 1, 3, 1 / 6, 5 / 18, 2 / 3)              # child 2 of 3
    put(1, 1, 4, 1 / 3, 2 / 9, 2 / 3)               # child 3 of 3
    for p in (2, 3, 4):
        put(1, p, p, 0, 0, 1)
    return a


def test_tree_conv_against_hand_worked_patches():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, N, 4))
    w = rng.normal(size=(4, 3, 2, 3))
    a = _hand_etas()
    want = np.zeros((2, N, 2, 3))
    for b in range(2):
        for k in range(3):
            want[b] += np.tensordot(a[b, k] @ x[b], w[:, k], axes=([1], [0]))
    out = OP.forward(x, EDGES, w, max_depth=3)["Out"]
    np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-12)
    dout = rng.normal(size=want.shape)
    g = OP.backward(x, EDGES, w, dout, max_depth=3)
    dx = np.zeros_like(x)
    dw = np.zeros_like(w)
    for b in range(2):
        for k in range(3):
            dx[b] += a[b, k].T @ np.tensordot(dout[b], w[:, k], axes=([1, 2], [1, 2]))
            dw[:, k] += np.tensordot(a[b, k] @ x[b], dout[b], axes=([0], [0]))
    np.testing.assert_allclose(g["NodesVector"], dx, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(g["Filter"], dw, rtol=1e-12, atol=1e-12)
    out32 = OP.forward(x.astype("float32"), EDGES, w.astype("float32"), max_depth=3)["Out"]
    assert out32.dtype == np.float32
    g32 = OP.backward(x.astype("float32"), EDGES, w.astype("float32"),
                      dout.astype("float32"), max_depth=3)
    assert g32["NodesVector"].dtype == g32["Filter"].dtype == np.float32


def test_an_empty_batch():
    out = OP.forward(np.zeros((0, N, 4)), np.zeros((0, 3, 2), "int32"), np.ones((4, 3, 2, 3)),
                     max_depth=2)["Out"]
    assert out.shape == (0, N, 2, 3)


@pytest.mark.parametrize("edges, msg", [
    ([[1, 6]], r"EdgeSet holds the edge \(1, 6\), but node ids must lie in \[1, 5\] "
               r"\(NodesVector has 5 nodes; 0 ends the edge list\)"),
    ([[6, 1]], r"EdgeSet holds the edge \(6, 1\)"),
    ([[-1, 2]], r"EdgeSet holds the edge \(-1, 2\)"),
    ([[1, 2], [2, 3], [3, 4], [4, 5], [5, 1]], r"EdgeSet describes 6 nodes, but NodesVector "
                                               r"has only 5"),
])
def test_edge_errors(edges, msg):
    with pytest.raises(ValueError, match="^tree_conv: " + msg):
        OP.forward(np.ones((1, N, 2)), np.array([edges], "int32"), np.ones((2, 3, 1, 1)),
                   max_depth=2)


def _infer(x, e, w, max_depth=2):
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        xv = fluid.data("x", x, "float64")
        ev = fluid.data("e", e, "int32")
        wv = fluid.data("w", w, "float64")
        out = main.global_block().create_var(name="tc_out")
        main.global_block().append_op("tree_conv", {"NodesVector": xv, "EdgeSet": ev,
                                                    "Filter": wv}, {"Out": out},
                                      {"max_depth": max_depth})
    return out


def test_inference():
    out = _infer([2, 5, 4], [2, 4, 2], [4, 3, 6, 7])
    assert tuple(out.shape) == (2, 5, 6, 7) and out.dtype == fluid.core.VarDesc.VarType.FP64
    assert tuple(_infer([2, 5, 0], [2, 4, 2], [0, 3, 6, 7], max_depth=1).shape) == (2, 5, 6, 7)
    _infer([2, 5, -1], [2, 4, 2], [4, 3, 6, 7])
    _infer([2, 5, 4], [2, 4, 2], [-1, 3, 6, 7])


@pytest.mark.parametrize("x, e, w, depth, msg", [
    ([2, 5], [2, 4, 2], [4, 3, 6, 7], 2,
     r"NodesVector must be 3-D \[batch, nodes, features\], but its shape is \[2, 5\]"),
    ([2, 5, 4], [2, 4], [4, 3, 6, 7], 2,
     r"EdgeSet must be \[batch, edges, 2\], but its shape is \[2, 4\]"),
    ([2, 5, 4], [2, 4, 3], [4, 3, 6, 7], 2,
     r"EdgeSet must be \[batch, edges, 2\], but its shape is \[2, 4, 3\]"),
    ([2, 5, 4], [2, 4, 2], [4, 3, 6], 2,
     r"Filter must be \[features, 3, output_size, num_filters\], but its shape is \[4, 3, 6\]"),
    ([2, 5, 4], [2, 4, 2], [4, 2, 6, 7], 2, r"Filter must be \[features, 3, output_size, "
                                             r"num_filters\], but its shape is \[4, 2, 6, 7\]"),
    ([2, 5, 4], [2, 4, 2], [3, 3, 6, 7], 2,
     r"Filter's first dim \(3\) must equal the feature size of NodesVector \(4\)"),
    ([2, 5, 0], [2, 4, 2], [1, 3, 6, 7], 2,
     r"Filter's first dim \(1\) must equal the feature size of NodesVector \(0\)"),
    ([2, 5, 1], [2, 4, 2], [0, 3, 6, 7], 2,
     r"Filter's first dim \(0\) must equal the feature size of NodesVector \(1\)"),
    ([2, 5, 4], [2, 4, 2], [4, 3, 6, 7], 0, "max_depth must be >= 1, but received 0"),
])
def test_inference_errors(x, e, w, depth, msg):
    with pytest.raises(ValueError, match="tree_conv: " + msg):
        _infer(x, e, w, depth)
