"""Weight decay: L1/L2 numbers, per-parameter precedence, clip -> regularize order, errors."""
import logging

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core.ir import OpRole

R = fluid.regularizer
W0 = np.array([[0.5, -0.3], [0.2, 0.4], [-0.6, 0.1]], "float32")
X = np.array([[0.2, 0.5, 0.2]], "float32")
LABEL = np.array([[0]], "int64")


def build(opt, w_attr=None, b_attr=None):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 3], "float32")
        label = fluid.data("label", [-1, 1], "int64")
        w_attr = w_attr or fluid.ParamAttr()
        w_attr.initializer = fluid.initializer.NumpyArrayInitializer(W0)
        logits = fluid.layers.fc(x, 2, param_attr=w_attr, bias_attr=b_attr)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, label))
        opt.minimize(loss)
    return main, startup


def raw_grads(w, b=np.zeros(2)):
    logits = X @ w + b
    p = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
    d = p - np.array([[1.0, 0.0]])
    return X.T @ d, d.sum(0)


def step(main, startup, fetch=("fc_0.w_0", "fc_0.b_0"), steps=1):
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    for _ in range(steps):
        out = exe.run(main, feed={"x": X, "label": LABEL}, fetch_list=list(fetch), scope=scope)
    return out


def test_l2_decay_numbers_over_steps():
    main, startup = build(fluid.optimizer.SGD(0.1, regularization=R.L2Decay(0.5)))
    w, b = W0.astype("float64"), np.zeros(2)
    for _ in range(3):
        gw, gb = raw_grads(w, b)
        w, b = w - 0.1 * (gw + 0.5 * w), b - 0.1 * (gb + 0.5 * b)
    got_w, got_b = step(main, startup, steps=3)
    np.testing.assert_allclose(got_w, w, rtol=1e-5)
    np.testing.assert_allclose(got_b, b, rtol=1e-5, atol=1e-7)


def test_l1_decay_numbers_and_ops():
    main, startup = build(fluid.optimizer.SGD(0.1, regularization=R.L1DecayRegularizer(0.01)))
    reg_ops = [op for op in main.global_block().ops
               if op.attr("op_namescope") == "/regularization/"]
    assert [op.type for op in reg_ops] == ["sign", "scale", "sum"] * 2
    for op in reg_ops:
        assert op.attr("op_role") == OpRole.Optimize
    summed = reg_ops[-1]
    assert summed.output("Out") == ["fc_0.w_0@GRAD"] == summed.input("X")[:1]  # in place
    assert summed.attr("op_role_var") == ["fc_0.w_0", "fc_0.w_0@GRAD"]
    gw, _ = raw_grads(W0.astype("float64"))
    (w,) = step(main, startup, ["fc_0.w_0"])
    np.testing.assert_allclose(w, W0 - 0.1 * (gw + 0.01 * np.sign(W0)), rtol=1e-5)


def test_fetched_grad_includes_decay_when_nothing_clipped():
    """As fluid: without a clip, the decay is summed in place into X@GRAD."""
    main, startup = build(fluid.optimizer.SGD(0.1, regularization=R.L2Decay(0.5)))
    (g,) = step(main, startup, ["fc_0.w_0@GRAD"])
    np.testing.assert_allclose(g, raw_grads(W0.astype("float64"))[0] + 0.5 * W0, rtol=1e-5)


def test_param_regularizer_wins_over_the_optimizer_one(caplog):
    with caplog.at_level(logging.INFO, logger="fluidlite"):
        main, startup = build(fluid.optimizer.SGD(0.1, regularization=R.L2Decay(0.5)),
                              w_attr=fluid.ParamAttr(regularizer=R.L1Decay(0.01)))
    assert "will not take effect" in caplog.text
    reg = [(op.type, op.input("X")[0]) for op in main.global_block().ops
           if op.attr("op_namescope") == "/regularization/" and op.type != "sum"]
    assert reg == [("scale", "fc_0.b_0"), ("sign", "fc_0.w_0"), ("scale", reg[2][1])]
    gw, gb = raw_grads(W0.astype("float64"))
    w, b = step(main, startup)
    np.testing.assert_allclose(w, W0 - 0.1 * (gw + 0.01 * np.sign(W0)), rtol=1e-5)
    np.testing.assert_allclose(b, -0.1 * gb, rtol=1e-5)      # b = 0: L2 term is 0


def test_clip_then_regularize():
    """The decay is added after clipping: never clipped, never counted in the global norm."""
    clip = fluid.clip.GradientClipByGlobalNorm(0.01)
    main, startup = build(fluid.optimizer.SGD(0.1, grad_clip=clip,
                                              regularization=R.L2Decay(5.0)))
    ops = main.global_block().ops
    first_reg = min(i for i, op in enumerate(ops) if "regularization" in op.attr("op_namescope"))
    last_clip = max(i for i, op in enumerate(ops) if "gradient_clip" in op.attr("op_namescope"))
    first_upd = min(i for i, op in enumerate(ops) if op.type == "sgd")
    assert last_clip < first_reg < first_upd
    summed = [op for op in ops if op.type == "sum" and "regularization" in op.attr("op_namescope")]
    assert all(op.input("X")[0].startswith("elementwise_mul") for op in summed)
    w0 = W0.astype("float64")
    gw, gb = raw_grads(w0)
    n = np.sqrt((gw ** 2).sum() + (gb ** 2).sum())
    w, norm, raw = step(main, startup, ["fc_0.w_0", clip.global_norm, "fc_0.w_0@GRAD"])
    np.testing.assert_allclose(norm, [n], rtol=1e-5)        # decay not counted
    np.testing.assert_allclose(raw, gw, rtol=1e-5)          # raw grad untouched
    np.testing.assert_allclose(w, w0 - 0.1 * (gw * 0.01 / n + 5.0 * w0), rtol=1e-5)


def test_passing_the_class_is_a_clear_type_error():
    with pytest.raises(TypeError, match=r"L2Decay\(regularization_coeff=1e-4\).*class"):
        fluid.optimizer.SGD(0.1, regularization=R.L2Decay)
    with pytest.raises(TypeError, match="not the class itself"):
        fluid.ParamAttr(regularizer=R.L1Decay)
    with pytest.raises(TypeError, match="must be an instance of fluid.regularizer"):
        fluid.optimizer.Adam(0.1, regularization=0.01)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 3], "float32")
        loss = fluid.layers.mean(fluid.layers.fc(x, 2))
        main.global_block().var("fc_0.w_0").regularizer = R.L2Decay
        with pytest.raises(TypeError, match="regularizer of parameter 'fc_0.w_0'"):
            fluid.optimizer.SGD(0.1).minimize(loss)


def test_names_str_and_no_ops_without_regularization():
    assert R.L1Decay is R.L1DecayRegularizer and R.L2Decay is R.L2DecayRegularizer
    assert str(R.L2Decay(0.5)) == "L2Decay, regularization_coeff=0.500000"
    assert str(R.L1Decay(0.25)) == "L1Decay, regularization_coeff=0.250000"
    with pytest.raises(TypeError, match="regularization_coeff must be a float"):
        R.L2Decay("big")
    main, _ = build(fluid.optimizer.SGD(0.1))
    assert not [op for op in main.global_block().ops
                if "regularization" in op.attr("op_namescope")]


def test_append_regularization_ops_keeps_none_grads():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.data("x", [-1, 3], "float32")
        fluid.layers.fc(x, 2)
        p = fluid.default_main_program().global_block().var("fc_0.w_0")
        assert R.append_regularization_ops([(p, None)], R.L2Decay(0.1)) == [(p, None)]
