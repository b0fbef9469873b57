"""Tests written from mutation testing (issue 28, docs/mutation.md) for ``fluidlite/regularizer.py``:
defaults and config round trips, the decay term's variable, fluid's one-time info message, a
None gradient in the middle of the list, and the error messages."""
import logging

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.regularizer import WeightDecayRegularizer, append_regularization_ops

R = fluid.regularizer
PADDLE_MSG = ("If regularizer of a Parameter has been set by 'fluid.ParamAttr' or "
              "'fluid.WeightNormParamAttr' already. The Regularization[%s] in Optimizer will not "
              "take effect, and it will only be applied to other Parameters!")


def test_defaults_and_config_round_trip():
    assert R.L2Decay().to_config() == {"coeff": 0.0}
    assert R.L1Decay().to_config() == {"coeff": 0.0}
    for cls in (R.L1Decay, R.L2Decay):
        back = cls.from_config({"coeff": 0.25})
        assert type(back) is cls and back.to_config() == {"coeff": 0.25}
        with pytest.raises(ValueError, match=r"exactly \{'coeff'\}, got \['coeff', 'x'\]"):
            cls.from_config({"coeff": 0.25, "x": 1})
    with pytest.raises(NotImplementedError, match="WeightDecayRegularizer must define __call__"):
        WeightDecayRegularizer(0.1)(None, None, None)


def _params(n, own=None):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        block = main.global_block()
        out = []
        for i in range(n):
            attr = fluid.ParamAttr(name=f"p{i}", regularizer=own[i] if own else None)
            p = fluid.layers.create_parameter([3, 2], "float32", attr=attr)
            g = block.create_var(name=f"p{i}@GRAD", shape=[3, 2], dtype="float32")
            out.append((p, g))
    return main, out


def test_decay_term_variable_is_like_the_parameter():
    main, pg = _params(1)
    append_regularization_ops(pg, R.L2Decay(0.1))
    ops = main.global_block().ops
    scale = [op for op in ops if op.type == "scale"][0]
    term = main.global_block().var(scale.output("Out")[0])
    assert term.name.startswith("_generated_var")
    assert tuple(term.shape) == (3, 2) and term.dtype == pg[0][0].dtype
    assert term.lod_level == pg[0][0].lod_level
    total = [op for op in ops if op.type == "sum"][0]
    assert total.attr("use_mkldnn") is False
    assert total.input("X") == ["p0@GRAD", term.name] and total.output("Out") == ["p0@GRAD"]


def test_a_none_gradient_does_not_stop_the_others():
    main, pg = _params(3)
    pg[0] = (pg[0][0], None)
    out = append_regularization_ops(pg, R.L2Decay(0.1))
    assert out[0][1] is None
    sums = [op.output("Out")[0] for op in main.global_block().ops if op.type == "sum"]
    assert sums == ["p1@GRAD", "p2@GRAD"]


def test_info_message_once_and_only_when_a_parameter_has_its_own(caplog):
    reg = R.L2Decay(0.1)
    with caplog.at_level(logging.INFO, logger="fluidlite"):
        _, pg = _params(3)
        append_regularization_ops(pg, reg)           # no own regularizer: no message
        assert not [r for r in caplog.records if "Regularization[" in r.getMessage()]
        _, pg = _params(3, own=[None, R.L1Decay(0.2), R.L1Decay(0.3)])
        append_regularization_ops(pg, reg)
    msgs = [r.getMessage() for r in caplog.records if "Regularization[" in r.getMessage()]
    assert msgs == [PADDLE_MSG % reg]


def test_error_messages_name_the_place_and_the_type():
    with pytest.raises(TypeError, match=r"^regularization must be an instance of "
                                        r"fluid\.regularizer\.L1Decay or L2Decay \(or None\), "
                                        r"but received 'l2' of type str$"):
        append_regularization_ops([], "l2")
    with pytest.raises(TypeError, match=r"^regularization must be a regularizer instance such as "
                                        r"L2Decay\(regularization_coeff=1e-4\)"):
        append_regularization_ops([], R.L2DecayRegularizer)


@pytest.mark.parametrize("cls", [R.L1DecayRegularizer, R.L2DecayRegularizer])
def test_a_negative_coefficient_is_refused_naming_the_class_and_the_value(cls):
    # a negative decay pushes the weights away from zero: refused when the regularizer is made
    with pytest.raises(ValueError, match=rf"^{cls.__name__}: regularization_coeff must be >= 0, "
                                         r"got -0\.5 \(.*use 0 for no decay\)$"):
        cls(-0.5)
    assert cls(0.0).to_config() == {"coeff": 0.0}


def _embedding_step(is_sparse, reg):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        ids = fluid.data("ids", [-1, 1], "int64")
        emb = fluid.layers.embedding(ids, size=[6, 3], is_sparse=is_sparse,
                                     param_attr=fluid.ParamAttr(
                                         name="table",
                                         initializer=fluid.initializer.Uniform(-1, 1, seed=3)))
        loss = fluid.layers.reduce_sum(emb * emb)
        fluid.optimizer.SGD(0.5, regularization=reg).minimize(loss)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    before = np.array(scope.find_var("table").get_tensor())
    exe.run(main, feed={"ids": np.array([[1], [4], [1]], np.int64)}, scope=scope)
    return main, before, np.array(scope.find_var("table").get_tensor())


def test_a_sparse_gradient_plus_decay_is_a_new_dense_gradient():
    """fluid 1.8: SelectedRows grad + decay -> a dense ``<grad>@NEWGRAD`` (every row decays),
    and the step equals the dense-gradient step: W - lr * (2 * count * W[rows] + coeff * W)."""
    main, w0, w1 = _embedding_step(True, R.L2Decay(0.1))
    block = main.global_block()
    total = [op for op in block.ops if op.type == "sum" and
             op.output("Out")[0].endswith("@NEWGRAD")]
    assert len(total) == 1
    out = block.var(total[0].output("Out")[0])
    assert out.name == "table@GRAD@NEWGRAD" and out.type == fluid.core.VarDesc.VarType.LOD_TENSOR
    assert tuple(out.shape) == (6, 3) and out.dtype == block.var("table").dtype
    sgd = [op for op in block.ops if op.type == "sgd"][0]
    assert sgd.input("Grad") == [out.name]
    count = np.bincount([1, 4, 1], minlength=6)[:, None]
    np.testing.assert_allclose(w1, w0 - 0.5 * (2 * count * w0 + 0.1 * w0), rtol=1e-6, atol=1e-7)
    _, d0, d1 = _embedding_step(False, R.L2Decay(0.1))
    np.testing.assert_allclose(w1, d1, rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(w0, d0)
