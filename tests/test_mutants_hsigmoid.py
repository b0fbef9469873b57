"""Mutation-round tests for fluidlite/ops/hsigmoid.py (hierarchical_sigmoid).

Reference: Paddle 2.6.2's ``paddle.nn.functional.hsigmoid_loss`` (fluid 1.8's
hierarchical_sigmoid kernel: the default complete binary tree for 2, 4, 5, 8 classes and a
custom PathTable / PathCode tree with -1 padding, with and without bias) in float64: Out and the
gradients of sum(Out * r) for X, W and Bias, stored in tests/fixtures/hsigmoid_paddle26.json.
PreOut's width is fluid's code_length, FindLastSet(num_classes - 1); the error messages are the
op's.
"""
import json
import os

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core.registry import get_op_def

with open(os.path.join(os.path.dirname(__file__), "fixtures", "hsigmoid_paddle26.json")) as f:
    CASES = json.load(f)

OP = get_op_def("hierarchical_sigmoid")


def _args(c, dtype="float64"):
    x, w = np.array(c["x"], dtype), np.array(c["w"], dtype)
    b = None if c["b"] is None else np.array(c["b"], dtype)
    table = None if c["table"] is None else np.array(c["table"], "int64")
    code = None if c["code"] is None else np.array(c["code"], "int64")
    return x, w, np.array(c["label"], "int64"), table, code, b


@pytest.mark.parametrize("k", range(len(CASES)))
def test_matches_paddle_hsigmoid_loss(k):
    c = CASES[k]
    x, w, label, table, code, b = _args(c)
    out = OP.forward(x, w, label, table, code, b, num_classes=c["num_classes"])
    np.testing.assert_allclose(out["Out"], c["out"], rtol=1e-10, atol=1e-12)
    width = table.shape[1] if table is not None else (c["num_classes"] - 1).bit_length()
    assert out["PreOut"].shape == (x.shape[0], width)
    g = OP.backward(x, w, label, b, np.array(c["up"]), PathTable=table, PathCode=code,
                    num_classes=c["num_classes"])
    np.testing.assert_allclose(g["X"], c["dx"], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(g["W"], c["dw"], rtol=1e-10, atol=1e-12)
    if b is not None:
        assert g["Bias"].shape == b.shape
        np.testing.assert_allclose(g["Bias"].reshape(-1), c["db"], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("k", [0, 4])
def test_float32_keeps_its_dtype(k):
    c = CASES[k]
    x, w, label, table, code, b = _args(c, "float32")
    out = OP.forward(x, w, label, table, code, b, num_classes=c["num_classes"])
    assert out["Out"].dtype == out["PreOut"].dtype == np.float32
    np.testing.assert_allclose(out["Out"], c["out"], rtol=1e-4)
    g = OP.backward(x, w, label, b, np.array(c["up"], "float32"), PathTable=table,
                    PathCode=code, num_classes=c["num_classes"])
    assert g["X"].dtype == g["W"].dtype == g["Bias"].dtype == np.float32
    np.testing.assert_allclose(g["X"], c["dx"], rtol=1e-3, atol=1e-5)


@pytest.mark.parametrize("label", [[[4]], [[-1]], [[0], [4]], [[-1], [1]]])
def test_labels_out_of_range(label):
    x, w = np.ones((len(label), 2)), np.ones((3, 2))
    with pytest.raises(ValueError, match=r"^hierarchical_sigmoid: labels must lie in \[0, 4\)$"):
        OP.forward(x, w, np.array(label, "int64"), num_classes=4)


def test_custom_tree_errors():
    x, w = np.ones((2, 2)), np.ones((3, 2))
    table = np.array([[0, 1], [2, -1]], "int64")
    code = np.array([[1, 0], [1, 0]], "int64")
    msg = r"^hierarchical_sigmoid: PathTable and PathCode must both be \[N, L\] with N = 2"
    for t, cd in ((table[:1], code[:1]), (table.reshape(-1), code.reshape(-1)),
                  (table, code[:, :1])):
        with pytest.raises(ValueError, match=msg):
            OP.forward(x, w, np.zeros((2, 1), "int64"), t, cd, num_classes=4)
    with pytest.raises(ValueError, match=r"^hierarchical_sigmoid: PathTable nodes must lie in "
                                         r"\[0, 3\) \(the rows of W\), got 3$"):
        OP.forward(x, w, np.zeros((2, 1), "int64"), np.array([[0, 3], [2, -1]]), code,
                   num_classes=4)


def test_inference():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [5, 3], "float32")
        w = fluid.data("w", [7, 3], "float32")
        lab = fluid.data("lab", [5, 1], "int64")
        table = fluid.data("table", [5, 4], "int64")
        code = fluid.data("code", [5, 4], "int64")
        block = main.global_block()
        outs = {s: block.create_var(name="hs_" + s) for s in ("Out", "PreOut", "W_Out")}
        block.append_op("hierarchical_sigmoid", {"X": x, "W": w, "Label": lab,
                                                 "PathTable": table, "PathCode": code},
                        outs, {"num_classes": 8})
        assert tuple(outs["Out"].shape) == (5, 1) and tuple(outs["PreOut"].shape) == (5, 4)
        assert tuple(outs["W_Out"].shape) == (7, 3)
        outs2 = {s: block.create_var(name="hs2_" + s) for s in ("Out", "PreOut", "W_Out")}
        block.append_op("hierarchical_sigmoid", {"X": x, "W": w, "Label": lab}, outs2,
                        {"num_classes": 8})
        assert tuple(outs2["PreOut"].shape) == (5, -1)
        with pytest.raises(ValueError, match="hierarchical_sigmoid: PathTable and PathCode "
                                             r"must be given together \(a custom tree\)"):
            block.append_op("hierarchical_sigmoid", {"X": x, "W": w, "Label": lab,
                                                     "PathTable": table},
                            {s: block.create_var(name="hs3_" + s) for s in ("Out", "PreOut")},
                            {"num_classes": 8})


def test_pre_is_clipped_to_40_as_fluid_and_w_out_is_w():
    # pre = +-45 and +-40.5: fluid clips pre to [-40, 40] before softplus
    x = np.array([[1.0], [1.0]])
    w = np.array([[45.0], [-40.5]])
    label = np.array([[0], [1]], "int64")              # 2 classes: one node (row 0 of W)
    for row in (0, 1):
        out = OP.forward(x, w[row:row + 1], label, num_classes=2)
        pre = np.clip(w[row, 0], -40.0, 40.0)
        soft = np.log(1.0 + np.exp(pre))                # fluid: log(1 + exp(pre))
        bits = np.array([0.0, 1.0])                     # code 2 -> bit 0, code 3 -> bit 1
        np.testing.assert_allclose(out["Out"].reshape(-1), soft - bits * pre, rtol=1e-12,
                                   atol=1e-12)
        np.testing.assert_allclose(out["PreOut"].reshape(-1), [soft, soft], rtol=1e-12)
        assert out["W_Out"] is w[row:row + 1] or np.shares_memory(out["W_Out"], w)
