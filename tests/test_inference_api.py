"""fluid 1.8's inference API (``fluidlite.inference``): AnalysisConfig, create_paddle_predictor,
PaddleTensor / ZeroCopyTensor, clone, the optimisation passes and the onnxruntime engine."""
from __future__ import annotations

import os
import threading

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.inference import (DEFAULT_PASSES, AnalysisConfig, PaddleBuf, PaddleDType,
                                 PaddleTensor, create_paddle_predictor, describe_passes)

try:
    import onnx  # noqa: F401
    import onnxruntime  # noqa: F401
    HAVE_ORT = True
except ImportError:         # pragma: no cover - depends on the onnx extra
    HAVE_ORT = False
needs_ort = pytest.mark.skipif(not HAVE_ORT, reason="onnx / onnxruntime not installed "
                                                    "(pip install 'fluidlite[onnx]')")


def _save(dirname, build, feeds, **kw):
    main, startup = fluid.Program(), fluid.Program()
    scope = fluid.Scope()
    # module-scoped fixtures run outside the per-test name guard: keep the global counters
    with fluid.program_guard(main, startup), fluid.scope_guard(scope), \
            fluid.unique_name.guard():
        out = build()
        exe = fluid.Executor(fluid.CPUPlace())
        exe.run(startup)
        rng = np.random.default_rng(0)
        for name, var in main.global_block().vars.items():   # non-trivial BN statistics
            if var.persistable and ("mean" in name or "variance" in name):
                held = scope.find_var(name)
                if held is not None and held.is_initialized():
                    shape = np.asarray(held.get_tensor()).shape
                    held.set(rng.uniform(0.5, 1.5, shape).astype("float32"))
        fluid.io.save_inference_model(str(dirname), feeds, out, exe, main_program=main, **kw)
    return str(dirname)


def _conv_bn_net():
    x = fluid.data(name="x", shape=[-1, 3, 8, 8], dtype="float32")
    c = fluid.layers.conv2d(x, 4, 3, padding=1, bias_attr=False)
    h = fluid.layers.batch_norm(c, act="relu")
    d = fluid.layers.conv2d(h, 4, 3, padding=1, groups=4, act=None,  # depthwise + bias, BN
                            use_cudnn=False)
    h = fluid.layers.batch_norm(d, act="tanh")
    return [fluid.layers.fc(h, 5, act="sigmoid")]


def _fc_dropout_net(impl="downgrade_in_infer"):
    x = fluid.data(name="x", shape=[-1, 6], dtype="float32")
    h = fluid.layers.fc(x, 8, act="relu")
    h = fluid.layers.dropout(h, 0.25, dropout_implementation=impl)
    h = fluid.layers.fc(h, 8)
    h = fluid.layers.batch_norm(h)
    return [fluid.layers.fc(h, 3, act="softmax")]


@pytest.fixture(scope="module")
def conv_dir(tmp_path_factory):
    return _save(tmp_path_factory.mktemp("conv"), _conv_bn_net, ["x"])


@pytest.fixture(scope="module")
def fc_dir(tmp_path_factory):
    return _save(tmp_path_factory.mktemp("fc"), _fc_dropout_net, ["x"])


def _predict(model_dir, x, ir_optim=True, **switches):
    config = AnalysisConfig(model_dir)
    config.switch_ir_optim(ir_optim)
    for name, arg in switches.items():
        getattr(config, name)(*arg)
    predictor = create_paddle_predictor(config)
    return predictor, predictor.run([PaddleTensor(x)])[0].as_ndarray()


def _reference(model_dir, x):
    """What fluid.io.load_inference_model + Executor computes."""
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        exe = fluid.Executor(fluid.CPUPlace())
        prog, feeds, fetches = fluid.io.load_inference_model(model_dir, exe)
        return exe.run(prog, feed={feeds[0]: x}, fetch_list=fetches)[0]


# -- config ------------------------------------------------------------------------------------
def test_config_switches(conv_dir):
    c = AnalysisConfig()
    c.set_model(conv_dir)
    assert c.model_dir() == conv_dir and c.prog_file() == "" and not c.use_gpu()
    c.disable_gpu()
    with pytest.raises(RuntimeError, match="CPU only"):
        c.enable_use_gpu(100, 0)
    assert c.ir_optim()
    c.switch_ir_optim(False)
    assert not c.ir_optim()
    c.set_cpu_math_library_num_threads(3)
    assert c.cpu_math_library_num_threads() == 3
    for switch in ("enable_mkldnn", "enable_memory_optim", "enable_profile",
                   "disable_glog_info", "switch_use_feed_fetch_ops",
                   "switch_specify_input_names"):
        getattr(c, switch)()
    assert c.mkldnn_enabled() and c.glog_info_disabled() and c.specify_input_name()
    c.delete_pass("fc_fuse_pass")
    assert "fc_fuse_pass" not in c.pass_builder().all_passes()
    assert set(c.pass_builder().all_passes()) == set(DEFAULT_PASSES) - {"fc_fuse_pass"}
    assert "conv_bn_fuse_pass:" in describe_passes()
    c2 = AnalysisConfig(conv_dir + "/__model__", conv_dir + "/params")
    assert c2.prog_file().endswith("__model__") and c2.model_dir() == ""


def test_missing_model_is_clear():
    with pytest.raises(ValueError, match="names no model"):
        create_paddle_predictor(AnalysisConfig())


# -- tensors -----------------------------------------------------------------------------------
def test_paddle_tensor_and_buf():
    t = PaddleTensor(np.arange(6, dtype="int64").reshape(2, 3), name="ids", lod=[[0, 2]])
    assert t.shape == [2, 3] and t.dtype == PaddleDType.INT64 and t.lod == [[0, 2]]
    assert t.as_ndarray().tolist() == [[0, 1, 2], [3, 4, 5]]
    assert t.data.int64_data() == list(range(6)) and t.data.length() == 48
    b = PaddleBuf([1.0, 2.0])
    assert b.float_data() == [1.0, 2.0] and not b.empty()
    e = PaddleTensor()
    e.name, e.shape, e.dtype, e.data = "x", [1, 2], PaddleDType.FLOAT32, PaddleBuf([3.0, 4.0])
    assert e.as_ndarray().tolist() == [[3.0, 4.0]]
    with pytest.raises(TypeError):
        PaddleTensor(np.zeros(2, dtype="complex64"))


# -- predictor ---------------------------------------------------------------------------------
def test_run_matches_load_inference_model(conv_dir):
    x = np.random.default_rng(1).random((2, 3, 8, 8), dtype=np.float32)
    ref = _reference(conv_dir, x)
    predictor, out = _predict(conv_dir, x, ir_optim=False)
    np.testing.assert_array_equal(out, ref)
    assert predictor.get_input_names() == ["x"]
    assert predictor.get_output_names() == ["save_infer_model/scale_0"]
    # the caller's global scope is untouched by a predictor
    assert fluid.global_scope().find_var("batch_norm_0.w_0") is None


def test_zero_copy(conv_dir):
    x = np.random.default_rng(2).random((3, 3, 8, 8), dtype=np.float32)
    predictor, out = _predict(conv_dir, x)
    t = predictor.get_input_tensor("x")
    t.reshape([3, 3, 8, 8])
    t.copy_from_cpu(x.ravel())
    predictor.zero_copy_run()
    o = predictor.get_output_tensor(predictor.get_output_names()[0])
    np.testing.assert_array_equal(o.copy_to_cpu(), out)
    assert o.shape() == [3, 5] and o.lod() == [] and t.name() == "x"
    with pytest.raises(ValueError, match="not an input"):
        predictor.get_input_tensor("nope")


def test_specify_input_names(fc_dir):
    config = AnalysisConfig(fc_dir)
    config.switch_specify_input_names(True)
    predictor = create_paddle_predictor(config)
    with pytest.raises(ValueError, match="no PaddleTensor named"):
        predictor.run([PaddleTensor(np.ones((1, 6), "float32"), name="y")])
    out = predictor.run([PaddleTensor(np.ones((1, 6), "float32"), name="x")])
    assert out[0].shape == [1, 3] and out[0].name == predictor.get_output_names()[0]


def test_params_file_pair(tmp_path):
    d = _save(tmp_path, lambda: _fc_dropout_net(), ["x"], model_filename="model",
              params_filename="params")
    x = np.random.default_rng(3).random((4, 6), dtype=np.float32)
    config = AnalysisConfig(d + "/model", d + "/params")
    out = create_paddle_predictor(config).run([PaddleTensor(x)])[0].as_ndarray()
    np.testing.assert_allclose(out, _reference_files(d, x), rtol=1e-5, atol=1e-6)


def _reference_files(d, x):
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        exe = fluid.Executor(fluid.CPUPlace())
        prog, feeds, fetches = fluid.io.load_inference_model(d, exe, "model", "params")
        return exe.run(prog, feed={feeds[0]: x}, fetch_list=fetches)[0]


def test_clone_threads(conv_dir):
    config = AnalysisConfig(conv_dir)
    main = create_paddle_predictor(config)
    rng = np.random.default_rng(4)
    xs = [rng.random((2, 3, 8, 8), dtype=np.float32) for _ in range(4)]
    want = [main.run([PaddleTensor(x)])[0].as_ndarray() for x in xs]
    got, errors = [None] * 4, []

    def work(i):
        try:
            p = main.clone()
            for _ in range(3):
                got[i] = p.run([PaddleTensor(xs[i])])[0].as_ndarray()
        except Exception as e:        # pragma: no cover - reported below
            errors.append(e)
    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


# -- passes ------------------------------------------------------------------------------------
def test_passes_conv_bn_relu(conv_dir):
    x = np.random.default_rng(5).random((2, 3, 8, 8), dtype=np.float32)
    _, plain = _predict(conv_dir, x, ir_optim=False)
    predictor, fused = _predict(conv_dir, x)
    np.testing.assert_allclose(fused, plain, rtol=1e-5, atol=1e-6)
    types = [op.type for op in predictor.program().global_block().ops]
    assert "batch_norm" not in types and types.count("conv2d_fusion") == 2
    assert "fc" in types and "mul" not in types
    applied = dict(predictor.applied_passes())
    assert applied["conv_bn_fuse_pass"] == 1 and applied["depthwise_conv_bn_fuse_pass"] == 1
    predictor.program().lint()
    # the model files are not changed: a fresh non-optimised predictor still sees batch_norm
    plain_pred = create_paddle_predictor(_cfg(conv_dir, False))
    assert "batch_norm" in [op.type for op in plain_pred.program().global_block().ops]


def _affine_net(a_shape=(1,), hs_attrs=None, act="hard_swish", a_value=1.5, variant=""):
    """PP-LCNetV3's block (PaddleOCR v4): conv + BN, times a one-element parameter ``a`` (on
    the left, as Paddle writes it), plus one ``c``, then hard_swish; ``variant`` builds the
    near misses the pass must leave alone."""
    L = fluid.layers
    # (10 wide: a depthwise layer's band is laid out from 9 output columns on)
    x = fluid.data(name="x", shape=[-1, 3, 8, 10], dtype="float32")
    h = L.batch_norm(L.conv2d(x, 4, 3, padding=1, bias_attr=False))
    a = L.create_parameter(list(a_shape), "float32",
                           default_initializer=fluid.initializer.Constant(a_value))
    c = L.create_parameter([1], "float32",
                           default_initializer=fluid.initializer.Constant(-0.25))
    extra = []
    if variant == "relu_before":            # a * relu(conv) is not relu(a * conv) for a < 0
        h = L.relu(h)
    elif variant == "residual":             # a shortcut add first (see the test)
        h = L.elementwise_add(h, L.conv2d(x, 4, 1))
    elif variant == "band_first":           # a depthwise filter laid out first (the test)
        h = L.batch_norm(L.conv2d(h, 4, 3, padding=1, groups=4, bias_attr=False))
    elif variant == "second_reader":        # the convolution's output is read twice
        extra = [L.reduce_mean(h, dim=[1, 2, 3])]
    elif variant == "other_operand":        # the product is not by a parameter
        h = L.elementwise_mul(h, L.relu(h))
    elif variant == "run_time_scalar":      # nor by a one-element run-time tensor
        a = L.fill_constant([1], "float32", a_value)
    h = L.elementwise_mul(a, h) if len(a_shape) == 1 and a_shape[0] == 1 else \
        L.elementwise_mul(h, a, axis=1)
    if variant == "sub_after":
        h = L.elementwise_sub(h, c)
    elif variant == "add_tensor":
        h = L.elementwise_add(h, L.conv2d(x, 4, 1))
    else:
        h = L.elementwise_add(h, c)
    if act == "hard_swish":
        h = L.hard_swish(h, **(hs_attrs or {}))
    return [L.reduce_mean(h, dim=[2, 3])] + extra


@pytest.mark.parametrize("case,folded,act", [
    ("block", 1, "hard_swish"), ("no_act", 1, "identity"),
    ("hard_swish_attrs", 1, "identity"),       # non-default attrs: folded, not activated
    ("per_channel", 0, None), ("other_operand", 0, None), ("relu_before", 0, None),
    ("residual", 0, None), ("band_first", 0, None), ("second_reader", 0, None),
    ("run_time_scalar", 0, None),
    ("sub_after", 0, None), ("add_tensor", 0, None)])
def test_passes_conv_affine_act(tmp_path, case, folded, act):
    kw = {"no_act": dict(act=None), "hard_swish_attrs": dict(hs_attrs={"threshold": 5.0}),
          "per_channel": dict(a_shape=(4,)), "relu_before": dict(a_value=-1.5)}
    d = _save(tmp_path, lambda: _affine_net(variant=case, **kw.get(case, {})), ["x"])
    x = np.random.default_rng(9).standard_normal((2, 3, 8, 10)).astype(np.float32)
    _, plain = _predict(d, x, ir_optim=False)
    config = AnalysisConfig(d)
    if case in ("residual", "band_first"):  # the fold after the shortcut's or band's
        # passes: a * (conv + b + r) stays, and a band laid out for W is not a W' one
        config.pass_builder().delete_pass("conv_affine_act_fuse_pass")
        config.pass_builder().append_pass("conv_affine_act_fuse_pass")
    predictor = create_paddle_predictor(config)
    fused = predictor.run([PaddleTensor(x)])[0].as_ndarray()
    np.testing.assert_allclose(fused, plain, rtol=1e-5, atol=1e-6)
    assert dict(predictor.applied_passes()).get("conv_affine_act_fuse_pass", 0) == folded
    ops = predictor.program().global_block().ops
    if case == "residual":
        assert any(op.type == "conv2d_fusion" and op.input("ResidualData") for op in ops)
    if case == "band_first":
        assert any(op.type == "conv2d_fusion" and op.input("FilterBand") for op in ops)
    if folded:
        conv, = [op for op in ops if op.type == "conv2d_fusion"]
        assert conv.attr("activation") == act
        assert [op.type for op in ops if op.type.startswith("elementwise")] == []
        assert ("hard_swish" in [op.type for op in ops]) == (case == "hard_swish_attrs")
    predictor.program().lint()


def _affine_in_net(variant=""):
    """PP-LCNetV3's depthwise half (PaddleOCR v4): a convolution and hard_swish, times a
    one-element parameter ``a`` plus one ``c``, read by a 1x1 convolution; ``variant``
    builds the other convolutions the affine folds into and the near misses."""
    L = fluid.layers
    x = fluid.data(name="x", shape=[-1, 4, 8, 8], dtype="float32")
    h = L.hard_swish(L.conv2d(x, 16 if variant == "tiles_first" else 4, 3, padding=1))
    a = L.create_parameter([4] if variant == "per_channel" else [1], "float32",
                           default_initializer=fluid.initializer.Constant(-1.5))
    c = L.create_parameter([1], "float32",
                           default_initializer=fluid.initializer.Constant(0.75))
    if variant == "run_time_scalar":
        a = L.fill_constant([1], "float32", -1.5)
    h = L.elementwise_mul(h, a, axis=1) if variant == "per_channel" else \
        L.elementwise_mul(a, h)
    h = L.elementwise_add(h, c)
    extra = [L.reduce_mean(h)] if variant == "second_reader" else []
    k, pad, groups = {"unpadded_3x3": (3, 0, 1), "padded": (3, 1, 1), "same": (3, "SAME", 1),
                      "grouped": (1, 0, 2), "tiles_first": (3, 0, 1)}.get(variant, (1, 0, 1))
    if variant == "residual":       # the affine's output is also the shortcut (see the test)
        h = L.elementwise_add(L.conv2d(h, 4, 1), h)
    else:
        h = L.conv2d(h, 16 if variant == "tiles_first" else 6, k, padding=pad, groups=groups)
    return [L.reduce_mean(h, dim=[1]) if variant != "no_mean" else h] + extra


@pytest.mark.parametrize("case,folded", [
    ("block", 1), ("unpadded_3x3", 1), ("grouped", 1), ("padded", 0), ("same", 0),
    ("per_channel", 0), ("run_time_scalar", 0), ("second_reader", 0), ("residual", 0),
    ("tiles_first", 0)])
def test_passes_affine_conv(tmp_path, case, folded):
    d = _save(tmp_path, lambda: _affine_in_net(case), ["x"])
    x = np.random.default_rng(11).standard_normal((2, 4, 8, 8)).astype(np.float32) * 3
    _, plain = _predict(d, x, ir_optim=False)
    config = AnalysisConfig(d)
    # (the near misses' affine would go into the first convolution's epilogue instead:
    # test_passes_conv_act_affine)
    config.pass_builder().delete_pass("conv_act_affine_fuse_pass")
    if case in ("residual", "tiles_first"):
        # after the shortcut's pass the affine is the convolution's input and its
        # ResidualData, which the filter cannot carry; after the Winograd pass the filter's
        # tiles were laid out for W, not W'
        config.pass_builder().delete_pass("affine_conv_fuse_pass")
        config.pass_builder().append_pass("affine_conv_fuse_pass")
    predictor = create_paddle_predictor(config)
    fused = predictor.run([PaddleTensor(x)])[0].as_ndarray()
    slot = {"residual": "ResidualData", "tiles_first": "FilterTiles"}.get(case)
    if slot is not None:
        assert any(op.type == "conv2d_fusion" and op.input(slot)
                   for op in predictor.program().global_block().ops)
    np.testing.assert_allclose(fused, plain, rtol=1e-5, atol=1e-5)
    assert dict(predictor.applied_passes()).get("affine_conv_fuse_pass", 0) == folded
    ops = [op.type for op in predictor.program().global_block().ops]
    assert ops.count("elementwise_mul") + ops.count("elementwise_add") == (0 if folded else 2)
    predictor.program().lint()


def test_conv_fusion_hard_swish_has_the_ops_bits(tmp_path):
    def build():
        x = fluid.data(name="x", shape=[-1, 3, 8, 8], dtype="float32")
        return [fluid.layers.hard_swish(fluid.layers.conv2d(x, 4, 3, padding=1))]
    d = _save(tmp_path, build, ["x"])
    x = np.random.default_rng(10).standard_normal((2, 3, 8, 8)).astype(np.float32) * 4
    _, plain = _predict(d, x, ir_optim=False)
    predictor, fused = _predict(d, x)
    conv, = [op for op in predictor.program().global_block().ops
             if op.type not in ("feed", "fetch")]
    assert (conv.type, conv.attr("activation")) == ("conv2d_fusion", "hard_swish")
    np.testing.assert_array_equal(fused, plain)


def _cfg(d, ir_optim):
    c = AnalysisConfig(d)
    c.switch_ir_optim(ir_optim)
    return c


@pytest.mark.parametrize("impl", ["downgrade_in_infer", "upscale_in_train"])
def test_passes_fc_dropout(tmp_path, impl):
    d = _save(tmp_path, lambda: _fc_dropout_net(impl), ["x"])
    x = np.random.default_rng(6).random((5, 6), dtype=np.float32)
    _, plain = _predict(d, x, ir_optim=False)
    predictor, fused = _predict(d, x)
    np.testing.assert_allclose(fused, plain, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(plain, _reference(d, x), rtol=1e-6)
    types = [op.type for op in predictor.program().global_block().ops]
    assert "dropout" not in types and "batch_norm" not in types and "mul" not in types
    assert types.count("fc") == 3
    if impl == "upscale_in_train":
        assert "scale" not in types and "assign" not in types


def test_delete_pass_and_ir_optim_off(fc_dir):
    c = AnalysisConfig(fc_dir)
    c.delete_pass("fc_fuse_pass")
    types = [op.type for op in create_paddle_predictor(c).program().global_block().ops]
    assert "fc" not in types and "mul" in types and "dropout" not in types
    c.switch_ir_optim(False)
    p = create_paddle_predictor(c)
    assert p.applied_passes() == [] and "dropout" in \
        [op.type for op in p.program().global_block().ops]


# -- onnxruntime ---------------------------------------------------------------------------------
@needs_ort
@pytest.mark.parametrize("which", ["conv", "fc"])
def test_onnxruntime_engine(conv_dir, fc_dir, which):
    d, shape = (conv_dir, (2, 3, 8, 8)) if which == "conv" else (fc_dir, (4, 6))
    x = np.random.default_rng(7).random(shape, dtype=np.float32)
    _, plain = _predict(d, x, ir_optim=False)
    config = AnalysisConfig(d)
    config.enable_onnxruntime()
    config.set_cpu_math_library_num_threads(2)
    assert config.use_onnxruntime()
    predictor = create_paddle_predictor(config)
    assert predictor.engine() == "onnxruntime"
    out = predictor.run([PaddleTensor(x)])[0].as_ndarray()
    np.testing.assert_allclose(out, plain, rtol=1e-5, atol=1e-6)
    clone = predictor.clone()
    clone.get_input_tensor("x").copy_from_cpu(x)
    clone.zero_copy_run()
    np.testing.assert_allclose(clone.get_output_tensor(clone.get_output_names()[0])
                               .copy_to_cpu(), plain, rtol=1e-5, atol=1e-6)
    # the configured threads are onnxruntime's intra-op threads, one inter-op thread
    opts = predictor._shared.session.get_session_options()
    assert (opts.intra_op_num_threads, opts.inter_op_num_threads) == (2, 1)
    assert predictor._shared.session.get_providers() == ["CPUExecutionProvider"]
    config.disable_onnxruntime()
    assert not config.use_onnxruntime()


def test_onnxruntime_missing_falls_back_to_numpy(fc_dir, monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "onnxruntime", None)     # import onnxruntime fails
    config = AnalysisConfig(fc_dir)
    config.enable_onnxruntime()
    with pytest.warns(RuntimeWarning, match=r"onnxruntime / onnx is not importable.*"
                                            r"pip install 'fluidlite\[onnx\]'"):
        predictor = create_paddle_predictor(config)
    assert predictor.engine() == "numpy"


def test_zero_copy_run_names_the_inputs_without_a_value(fc_dir):
    predictor = create_paddle_predictor(AnalysisConfig(fc_dir))
    with pytest.raises(RuntimeError, match=r"zero_copy_run: input\(s\) \['x'\] have no value: "
                                           r"call get_input_tensor\(name\).copy_from_cpu"):
        predictor.zero_copy_run()


@needs_ort
def test_onnxruntime_falls_back_with_warning(tmp_path):
    """A model with an op the exporter does not cover runs on the NumPy engine, warned with
    the op's name."""
    picked = []

    def build():
        x = fluid.data(name="x", shape=[-1, 4], dtype="float32")
        op_type, h = _unexportable(x)
        picked.append(op_type)
        return [fluid.layers.fc(h, 2)]
    d = _save(tmp_path, build, ["x"])
    config = AnalysisConfig(d)
    config.enable_onnxruntime()
    with pytest.warns(RuntimeWarning, match=f"NumPy engine.*'{picked[0]}'"):
        predictor = create_paddle_predictor(config)
    assert predictor.engine() == "numpy"
    x = np.random.default_rng(8).random((3, 4), dtype=np.float32)
    np.testing.assert_allclose(predictor.run([PaddleTensor(x)])[0].as_ndarray(),
                               _reference(d, x), rtol=1e-6)


def _unexportable(x):
    """(type, output) of an op the ONNX exporter does not cover (the exporter grows: try a
    few)."""
    from fluidlite.onnx import supported_ops
    supported = set(supported_ops())
    for name, make in (("cos_sim", lambda: fluid.layers.cos_sim(x, x)),
                       ("clip_by_norm", lambda: fluid.layers.clip_by_norm(x, 1.0)),
                       ("add_position_encoding", lambda: fluid.layers.add_position_encoding(
                           fluid.layers.unsqueeze(x, [1]), 1.0, 1.0))):
        if name not in supported:
            return name, make()
    pytest.skip("every candidate op is exportable")


def test_predictor_leaves_caller_names_alone(conv_dir):
    before = fluid.unique_name.generate("elementwise_add")
    create_paddle_predictor(AnalysisConfig(conv_dir))
    after = fluid.unique_name.generate("elementwise_add")
    assert int(after.rsplit("_", 1)[1]) == int(before.rsplit("_", 1)[1]) + 1


def test_lod_input(tmp_path):
    def build():
        x = fluid.data(name="words", shape=[-1, 3], dtype="float32", lod_level=1)
        return [fluid.layers.sequence_pool(x, "sum"), fluid.layers.fc(x, 2)]
    d = _save(tmp_path, build, ["words"])
    x = np.arange(15, dtype="float32").reshape(5, 3)
    predictor = create_paddle_predictor(AnalysisConfig(d))
    out = predictor.run([PaddleTensor(x, name="words", lod=[[0, 2, 5]])])[0]
    np.testing.assert_allclose(out.as_ndarray(), [x[:2].sum(0), x[2:].sum(0)])
    t = predictor.get_input_tensor("words")
    t.copy_from_cpu(x)
    t.set_lod([[0, 2, 5]])
    predictor.zero_copy_run()
    np.testing.assert_allclose(predictor.get_output_tensor(predictor.get_output_names()[0])
                               .copy_to_cpu(), out.as_ndarray())


def test_bench_main(fc_dir, capsys):
    from fluidlite.inference import bench
    assert bench.main([fc_dir, "--batch", "1", "4", "--repeat", "2", "--warmup", "0"]) == 0
    text = capsys.readouterr().out
    assert "numpy+ir_optim" in text and "median ms" in text
    if HAVE_ORT:
        assert "onnxruntime" in text


@needs_ort
def test_onnxruntime_refusing_the_export_falls_back_to_numpy(fc_dir, monkeypatch):
    import onnxruntime

    def refuse(*args, **kwargs):
        raise RuntimeError("[ShapeInferenceError] Target shape may not have multiple -1")
    monkeypatch.setattr(onnxruntime, "InferenceSession", refuse)
    config = AnalysisConfig(fc_dir)
    config.enable_onnxruntime()
    with pytest.warns(RuntimeWarning, match="onnxruntime refused the exported model.*"
                                            "RuntimeError: .*multiple -1"):
        predictor = create_paddle_predictor(config)
    assert predictor.engine() == "numpy"
    x = np.random.default_rng(0).standard_normal((3, 6)).astype("float32")
    np.testing.assert_allclose(predictor.run([PaddleTensor(x)])[0].as_ndarray(),
                               _reference(fc_dir, x), rtol=1e-6)


def _bench(argv, capsys):
    from fluidlite.inference import bench
    code = bench.main([str(a) for a in argv] + ["--repeat", "1", "--warmup", "0"])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_bench_sequences_of_a_lod_input(tmp_path, capsys):
    # a sequence model (lod_level 1, like LAC's words): batch rows are sequences of --seq-len
    def build():
        x = fluid.data(name="words", shape=[-1, 3], dtype="float32", lod_level=1)
        return [fluid.layers.sequence_pool(x, "sum")]
    d = _save(tmp_path, build, ["words"])
    code, out, err = _bench([d, "--batch", "2", "3", "--seq-len", "4"], capsys)
    assert code == 0, err
    assert "words [8, 3] (2 sequences)" in out and "words [12, 3] (3 sequences)" in out


def test_bench_inputs_of_every_kind(tmp_path):
    # int ids with a two-level LoD, a float map with a free dim, a fixed-size [1] feed
    from fluidlite.inference import bench

    def build():
        ids = fluid.data(name="ids", shape=[-1, 1], dtype="int64", lod_level=2)
        x = fluid.data(name="x", shape=[-1, 2, -1], dtype="float32")
        s = fluid.data(name="s", shape=[1], dtype="float32")
        emb = fluid.layers.embedding(ids, [10, 4])
        return [fluid.layers.sequence_pool(emb, "sum"),
                fluid.layers.elementwise_mul(fluid.layers.reduce_sum(x, dim=[1, 2]), s)]
    d = _save(tmp_path, build, ["ids", "x", "s"])
    predictor = create_paddle_predictor(AnalysisConfig(d))
    feeds = bench._feeds(predictor, {"x": (2, 5)})
    for seq_len in (4, 1):
        ids, x, s = bench._inputs(feeds, 3, seq_len, np.random.default_rng(0))
        assert (ids.name, x.name, s.name) == ("ids", "x", "s")
        assert ids.shape == [3 * seq_len, 1] and ids.dtype == PaddleDType.INT64
        assert ids.lod == [[0, 1, 2, 3], list(range(0, 3 * seq_len + 1, seq_len))]
        assert not ids.as_ndarray().any()           # zeros: a valid id for every embedding
        assert x.shape == [3, 2, 5] and x.dtype == PaddleDType.FLOAT32 and not x.lod
        xs = x.as_ndarray()
        assert 0 <= xs.min() and xs.max() < 1 and np.unique(xs).size == xs.size
        assert s.shape == [1] and s.dtype == PaddleDType.FLOAT32
        outs = predictor.run([ids, x, s])
        assert outs[0].as_ndarray().shape == (3, 4)
    assert bench._parse_shape("x=1,5") == ("x", (1, 5))
    assert bench._parse_shape("x=") == ("x", ())
    for bad in ("x", "=3", "x=0,4", "x=3,a"):
        with pytest.raises(Exception, match="expected NAME=D,D,..."):
            bench._parse_shape(bad)


def test_bench_free_dims_take_their_sizes_from_shape(tmp_path, capsys):
    def build():
        x = fluid.data(name="x", shape=[-1, 3, -1, -1], dtype="float32")
        h = fluid.layers.pool2d(fluid.layers.conv2d(x, 4, 3, padding=1), pool_type="avg",
                                global_pooling=True)
        return [fluid.layers.fc(fluid.layers.reshape(h, [-1, 4]), 2)]
    d = _save(tmp_path, build, ["x"])
    code, out, err = _bench([d, "--batch", "2"], capsys)      # no sizes: refused, not 1x1
    assert code == 2 and "input 'x' is declared [-1, 3, -1, -1]" in err
    assert "--shape x=3,N,N" in err and "median" not in out
    code, out, err = _bench([d, "--batch", "2", "--shape", "x=3,10,12"], capsys)
    assert code == 0, err
    assert "x [2, 3, 10, 12]" in out
    for shape, why in (("y=3,4,4", "not inputs of the model"),
                       ("x=3,4", "gives its 3 dim(s) after the first; got 2"),
                       ("x=2,4,4", "its dim 1 is fixed at 3, --shape gave 2")):
        code, out, err = _bench([d, "--shape", shape], capsys)
        assert code == 2 and why in err, err
    from fluidlite.inference import bench
    with pytest.raises(SystemExit):             # argparse: not NAME=D,D,...
        bench.main([d, "--shape", "x:3,4,4"])
    assert "expected NAME=D,D,..." in capsys.readouterr().err


def test_bench_a_fixed_batch_model_runs_its_batch_only(tmp_path, capsys):
    def build():
        return [fluid.layers.fc(fluid.data(name="x", shape=[1, 6], dtype="float32"), 2)]
    d = _save(tmp_path, build, ["x"])
    code, out, err = _bench([d, "--batch", "4"], capsys)
    assert code == 2 and "runs at batch 1 only; give --batch 1" in err
    code, out, err = _bench([d, "--batch", "1"], capsys)
    assert code == 0 and "x [1, 6]" in out, err


@pytest.mark.parametrize("bad, shown", [(["--repeat", "0"], "--repeat 0, --warmup 5, --threads 1"),
                                        (["--warmup", "-1"], "--repeat 50, --warmup -1"),
                                        (["--threads", "0"], "--warmup 5, --threads 0")])
def test_bench_refuses_counts_out_of_range(fc_dir, capsys, bad, shown):
    from fluidlite.inference import bench
    with pytest.raises(SystemExit) as e:
        bench.main([fc_dir] + bad)
    err = capsys.readouterr().err
    assert e.value.code == 2
    assert "--repeat and --threads must be >= 1 and --warmup >= 0, got" in err and shown in err


FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "paddle")


@pytest.mark.parametrize("engine", ["numpy", "numpy+ir_optim", "onnxruntime"])
@pytest.mark.parametrize("model", ["fluid18_fit_a_line", "pd2_attention"])
def test_models_saved_by_paddle(model, engine):
    """Models written by PaddlePaddle itself run through the predictor on every engine and
    give the values Paddle computed."""
    if engine == "onnxruntime" and not HAVE_ORT:
        pytest.skip("onnx / onnxruntime not installed (pip install 'fluidlite[onnx]')")
    d = os.path.join(FIXTURES, model)
    exp = np.load(os.path.join(d, "expected.npz"))
    config = (AnalysisConfig(d) if model == "fluid18_fit_a_line" else
              AnalysisConfig(os.path.join(d, "model.pdmodel"), os.path.join(d, "model.pdiparams")))
    config.switch_ir_optim(engine != "numpy")
    if engine == "onnxruntime":
        config.enable_onnxruntime()
    predictor = create_paddle_predictor(config)
    assert predictor.engine() == ("onnxruntime" if engine == "onnxruntime" else "numpy")
    outs = predictor.run([PaddleTensor(exp["x"])])
    wanted = [k for k in exp.files if k != "x"]
    assert len(outs) == len(wanted)
    for got, key in zip(outs, wanted):
        np.testing.assert_allclose(got.as_ndarray(), exp[key], rtol=1e-5, atol=1e-5)


def test_fluid_core_names():
    """fluid scripts reach the API as fluid.core.*: fluidlite/__init__.py installs a lazy
    ``__getattr__`` on fluidlite.core (core itself may not import the inference package)."""
    if not hasattr(fluid.core, "AnalysisConfig"):
        pytest.skip("fluidlite/__init__.py does not expose the inference names on fluid.core "
                    "yet (issue 30)")
    import fluidlite.inference as inf
    for name in ("AnalysisConfig", "create_paddle_predictor", "PaddleTensor", "PaddleDType",
                 "PaddleBuf", "ZeroCopyTensor"):
        assert getattr(fluid.core, name) is getattr(inf, name)
    with pytest.raises(AttributeError):
        fluid.core.NoSuchInferenceName
