"""Small fluid 1.8 behaviours the model zoo and fluid's docs rely on (issue 29): top-level
dygraph classes, ``sequence_mask(maxlen=Variable)``, ``auc(slide_steps=0)``, Xavier with a 0
fan, ``fluid.layers`` learning-rate decays inside ``dygraph.guard``."""
import numpy as np
import pytest

import fluidlite as fluid

# fluid 1.8's __init__: `from .dygraph.nn import *`, `from .dygraph.layers import *`,
# `from .dataset import *`
DYGRAPH_TOP = ("Conv2D", "Conv3D", "Pool2D", "Linear", "BatchNorm", "Dropout", "Embedding",
               "GRUUnit", "InstanceNorm", "LayerNorm", "NCE", "PRelu", "BilinearTensorProduct",
               "Conv2DTranspose", "Conv3DTranspose", "GroupNorm", "SpectralNorm", "TreeConv",
               "Layer")


@pytest.mark.parametrize("name", DYGRAPH_TOP)
def test_dygraph_classes_at_top_level(name):
    assert getattr(fluid, name) is getattr(fluid.dygraph, name)


@pytest.mark.parametrize("name", ["DatasetFactory", "InMemoryDataset", "QueueDataset"])
def test_dataset_classes_at_top_level(name):
    assert getattr(fluid, name) is getattr(fluid.dataset, name)


def test_top_level_linear_runs_as_in_the_docs():
    with fluid.dygraph.guard():
        linear = fluid.Linear(3, 2, param_attr=fluid.ParamAttr(
            initializer=fluid.initializer.Constant(0.5)), bias_attr=False)
        out = linear(fluid.dygraph.to_variable(np.ones((2, 3), "float32")))
        np.testing.assert_allclose(out.numpy(), np.full((2, 2), 1.5, "float32"))
        assert isinstance(linear, fluid.Layer)


# -- sequence_mask(maxlen=Variable) ----------------------------------------------------------
def _mask_program(maxlen_value):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        lens = fluid.data("lens", [-1], "int64")
        maxlen = fluid.data("maxlen", [1], "int64")
        mask = fluid.layers.sequence_mask(lens, maxlen=maxlen, dtype="float32")
    (op,) = [op for op in main.global_block().ops if op.type == "sequence_mask"]
    assert op.input("MaxLenTensor") == ["maxlen"] and mask.shape == (-1, -1)
    (got,) = fluid.Executor(fluid.CPUPlace()).run(
        main, feed={"lens": np.array([1, 3, 0], "int64"),
                    "maxlen": np.array([maxlen_value], "int64")}, fetch_list=[mask])
    return main, got


def test_sequence_mask_maxlen_variable_is_read_at_run_time():
    _, got = _mask_program(5)
    want = (np.arange(5)[None, :] < np.array([1, 3, 0])[:, None]).astype("float32")
    np.testing.assert_array_equal(got, want)
    assert got.dtype == np.float32
    _, got = _mask_program(2)                 # another run, another length
    assert got.shape == (3, 2)


def test_sequence_mask_maxlen_tensor_in_dygraph():
    """The sentiment models' dygraph form: maxlen is a tensor (here reduce_max of lengths)."""
    with fluid.dygraph.guard():
        lens = fluid.dygraph.to_variable(np.array([1, 3], "int64"))
        got = fluid.layers.sequence_mask(lens, maxlen=fluid.layers.reduce_max(lens) + 1,
                                         dtype="float32").numpy()
    np.testing.assert_array_equal(got, [[1, 0, 0, 0], [1, 1, 1, 0]])


def test_sequence_mask_maxlen_variable_in_paddle_format():
    from fluidlite.formats.paddle import program as pf
    main, _ = _mask_program(4)
    back = pf.program_from_bytes(pf.program_to_bytes(main))
    (op,) = [op for op in back.global_block().ops if op.type == "sequence_mask"]
    assert op.input("MaxLenTensor") == ["maxlen"]


def test_sequence_mask_int_maxlen_unchanged():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        mask = fluid.layers.sequence_mask(fluid.data("lens", [-1], "int64"), maxlen=3)
    assert mask.shape == (-1, 3)
    with pytest.raises(TypeError, match="maxlen"):
        with fluid.program_guard(fluid.Program(), fluid.Program()):
            fluid.layers.sequence_mask(fluid.data("lens", [-1], "int64"), maxlen="3")


# -- auc(slide_steps=0) ----------------------------------------------------------------------
def test_auc_slide_steps_zero_is_the_global_auc():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        pred = fluid.data("pred", [-1, 2], "float32")
        label = fluid.data("label", [-1, 1], "int64")
        auc_out, batch_auc, _ = fluid.layers.auc(pred, label, slide_steps=0)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    rng = np.random.RandomState(0)
    for _ in range(3):
        p = rng.rand(8, 1).astype("float32")
        feed = {"pred": np.concatenate([1 - p, p], axis=1),
                "label": rng.randint(0, 2, (8, 1)).astype("int64")}
        glob, batch = exe.run(main, feed=feed, fetch_list=[auc_out, batch_auc])
        np.testing.assert_array_equal(glob, batch)
    with pytest.raises(ValueError, match="slide_steps"):
        with fluid.program_guard(fluid.Program(), fluid.Program()):
            fluid.layers.auc(fluid.data("p", [-1, 2]), fluid.data("l", [-1, 1], "int64"),
                             slide_steps=-1)


# -- Xavier with a 0 fan ---------------------------------------------------------------------
@pytest.mark.parametrize("uniform", [True, False])
def test_xavier_fan_in_zero_uses_fan_out(uniform):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        fluid.layers.conv2d(fluid.data("x", [-1, 4, 6, 6]), 8, 3, bias_attr=False,
                            param_attr=fluid.ParamAttr(name="w", initializer=fluid.initializer
                                                       .Xavier(uniform=uniform, fan_in=0)))
    (init,) = [op for op in startup.global_block().ops if op.output_arg_names == ["w"]]
    fan_out = 8 * 3 * 3
    if uniform:
        assert init.type == "uniform_random"
        assert init.attr("max") == pytest.approx(np.sqrt(6.0 / fan_out))
    else:
        assert init.type == "gaussian_random"
        assert init.attr("std") == pytest.approx(np.sqrt(2.0 / fan_out))


def test_xavier_zero_fan_sum_is_refused_before_any_op():
    main, startup = fluid.Program(), fluid.Program()
    init = fluid.initializer.Xavier(fan_in=0, fan_out=0)
    with fluid.program_guard(main, startup):
        with pytest.raises(ValueError, match=r"fan_in \+ fan_out is 0(\.0)? for 'w'"):
            fluid.layers.create_parameter([3, 4], "float32", name="w", default_initializer=init)
    assert not startup.global_block().ops
    with pytest.raises(ValueError, match="fan_in must be >= 0"):
        fluid.initializer.Xavier(fan_in=-1)


# -- fluid.layers decays in dygraph mode -----------------------------------------------------
def _lrs(make_lr, steps=5):
    with fluid.dygraph.guard():
        linear = fluid.dygraph.Linear(2, 2)
        opt = fluid.optimizer.SGD(make_lr(), parameter_list=linear.parameters())
        out = []
        for _ in range(steps):
            out.append(opt.current_step_lr())
            loss = fluid.layers.reduce_mean(linear(fluid.dygraph.to_variable(
                np.ones((1, 2), "float32"))))
            loss.backward()
            opt.minimize(loss)
            linear.clear_gradients()
        return out


@pytest.mark.parametrize("layer_fn,dygraph_cls", [
    (lambda: fluid.layers.piecewise_decay([2, 4], [0.1, 0.01, 0.001]),
     lambda: fluid.dygraph.PiecewiseDecay([2, 4], [0.1, 0.01, 0.001], 0)),
    (lambda: fluid.layers.exponential_decay(0.1, 2, 0.5, staircase=True),
     lambda: fluid.dygraph.ExponentialDecay(0.1, 2, 0.5, True)),
    (lambda: fluid.layers.natural_exp_decay(0.1, 2, 0.5),
     lambda: fluid.dygraph.NaturalExpDecay(0.1, 2, 0.5)),
    (lambda: fluid.layers.inverse_time_decay(0.1, 2, 0.5),
     lambda: fluid.dygraph.InverseTimeDecay(0.1, 2, 0.5)),
    (lambda: fluid.layers.polynomial_decay(0.1, 3, 0.01, cycle=True),
     lambda: fluid.dygraph.PolynomialDecay(0.1, 3, 0.01, cycle=True)),
    (lambda: fluid.layers.noam_decay(16, 2, learning_rate=0.5),
     lambda: fluid.dygraph.NoamDecay(16, 2, learning_rate=0.5)),
    (lambda: fluid.layers.cosine_decay(0.1, 2, 4),
     lambda: fluid.dygraph.CosineDecay(0.1, 2, 4)),
    (lambda: fluid.layers.linear_lr_warmup(0.1, 3, 0.0, 0.1),
     lambda: fluid.dygraph.LinearLrWarmup(0.1, 3, 0.0, 0.1)),
])
def test_layers_decay_in_dygraph_is_fluids_decay_object(layer_fn, dygraph_cls):
    """fluid 1.8: inside dygraph.guard the fluid.layers schedule *is* the dygraph decay (no
    '@LR_DECAY_COUNTER@' program variable), so the learning rates per step are the same."""
    got = _lrs(layer_fn)
    assert got == _lrs(dygraph_cls)
    assert len(set(got)) > 1                   # the schedule moves


def test_layers_piecewise_decay_checks_lengths_in_dygraph():
    with fluid.dygraph.guard():
        with pytest.raises(ValueError, match="len\\(values\\) - len\\(boundaries\\)"):
            fluid.layers.piecewise_decay([2, 4], [0.1, 0.01])


# -- conv2d_transpose picks depthwise_conv2d_transpose as fluid 1.8 --------------------------
def test_conv2d_transpose_per_channel_without_cudnn_is_depthwise():
    w = np.random.RandomState(0).rand(4, 1, 3, 3).astype("float32")
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 4, 5, 5])
        init = fluid.initializer.NumpyArrayInitializer(w)
        outs = [fluid.layers.conv2d_transpose(x, 4, filter_size=3, groups=4, use_cudnn=cudnn,
                                              param_attr=fluid.ParamAttr(initializer=init),
                                              bias_attr=False)
                for cudnn in (False, True)]
        fluid.layers.conv2d_transpose(x, 4, filter_size=3, use_cudnn=False)   # no groups
    types = [op.type for op in main.global_block().ops if "conv" in op.type]
    assert types == ["depthwise_conv2d_transpose", "conv2d_transpose", "conv2d_transpose"]
    assert [p.name for p in main.all_parameters()][0] == "depthwise_conv2d_transpose_0.w_0"
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    a, b = exe.run(main, feed={"x": np.random.RandomState(1).rand(2, 4, 5, 5).astype("float32")},
                   fetch_list=outs)
    np.testing.assert_allclose(a, b, rtol=1e-6)
