"""The rest of fluid 1.8's Python inference API (``paddle/fluid/pybind/inference_api.cc``):
models from memory (``AnalysisConfig.set_model_buffer``), ``NativeConfig`` and its
``NativePaddlePredictor``, the copy constructor, ``Precision``, ``to_native_config``, the
refused quantizer, ``PaddlePassBuilder.set_passes`` / ``debug_string``, ``PaddlePlace``,
``paddle_dtype_size`` and ``predictor.scope()``."""
from __future__ import annotations

import os
import re

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.formats.checkpoint import CheckpointError
from fluidlite.inference import (AnalysisConfig, AnalysisPredictor, NativeConfig,
                                 NativePaddlePredictor, PaddleDType, PaddlePlace,
                                 PaddlePredictor, PaddleTensor, create_paddle_predictor,
                                 paddle_dtype_size)

PADDLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "paddle")


def _save(dirname, **kw):
    """An fc / batch-norm / softmax model saved by fluidlite; returns its directory."""
    main, startup = fluid.Program(), fluid.Program()
    scope = fluid.Scope()
    with fluid.program_guard(main, startup), fluid.scope_guard(scope), \
            fluid.unique_name.guard():
        x = fluid.data(name="x", shape=[-1, 6], dtype="float32")
        h = fluid.layers.fc(x, 8, act="relu")
        h = fluid.layers.batch_norm(h)
        y = fluid.layers.fc(h, 3, act="softmax")
        exe = fluid.Executor(fluid.CPUPlace())
        exe.run(startup)
        fluid.io.save_inference_model(str(dirname), ["x"], [y], exe, main_program=main, **kw)
    return str(dirname)


def _reference(d, x, model=None, params=None):
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        exe = fluid.Executor(fluid.CPUPlace())
        prog, feeds, fetches = fluid.io.load_inference_model(d, exe, model, params)
        return exe.run(prog, feed={feeds[0]: x}, fetch_list=fetches)[0]


def _read(path):
    with open(path, "rb") as f:
        return f.read()


@pytest.fixture(scope="module")
def combined(tmp_path_factory):
    return _save(tmp_path_factory.mktemp("combined"), model_filename="model",
                 params_filename="params")


X = np.random.default_rng(7).random((5, 6), dtype=np.float32)


# -- set_model_buffer -----------------------------------------------------------------------
@pytest.mark.parametrize("ir_optim", [False, True])
def test_model_buffer_of_files_paddle_wrote(ir_optim):
    """Paddle 2.x's own .pdmodel / .pdiparams, handed over as bytes, give Paddle's values."""
    d = os.path.join(PADDLE, "pd2_attention")
    exp = np.load(os.path.join(d, "expected.npz"))
    prog = _read(os.path.join(d, "model.pdmodel"))
    params = _read(os.path.join(d, "model.pdiparams"))
    config = AnalysisConfig()
    config.set_model_buffer(prog, len(prog), params, len(params))
    config.switch_ir_optim(ir_optim)
    assert config.model_from_memory()
    assert (config.model_dir(), config.prog_file(), config.params_file()) == ("", "", "")
    outs = create_paddle_predictor(config).run([PaddleTensor(exp["x"])])
    for got, key in zip(outs, ["flat", "red"]):
        np.testing.assert_allclose(got.as_ndarray(), exp[key], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_model_buffer_of_fluidlite_files(combined, kind):
    """fluidlite's own combined files, as any bytes-like object; bytes past the given sizes
    are not read, and the config keeps its own copy."""
    prog = bytearray(_read(os.path.join(combined, "model")))
    params = bytearray(_read(os.path.join(combined, "params")))
    n_prog, n_params = len(prog), len(params)
    prog += b"\x00garbage"
    params += b"\xffgarbage"
    config = AnalysisConfig()
    config.set_model_buffer(kind(prog), n_prog, kind(params), n_params)
    prog[:] = b"x" * len(prog)          # the caller reuses its buffers afterwards
    params[:] = b"y" * len(params)
    got = create_paddle_predictor(config).run([PaddleTensor(X)])[0].as_ndarray()
    np.testing.assert_allclose(got, _reference(combined, X, "model", "params"), rtol=1e-5,
                               atol=1e-6)


def test_model_buffer_refuses_bad_arguments_before_changing_anything(combined):
    prog = _read(os.path.join(combined, "model"))
    config = AnalysisConfig(combined)
    with pytest.raises(TypeError, match=r"binary mode, open\(path, 'rb'\)"):
        config.set_model_buffer(prog.decode("latin-1"), len(prog), b"", 0)
    with pytest.raises(TypeError, match="bytes, bytearray or memoryview, got list"):
        config.set_model_buffer(prog, len(prog), [1, 2], 2)
    for size in (len(prog) + 1, -1, True, 3.0):
        with pytest.raises(ValueError, match=f"the program buffer size must be an int from 0 "
                                             f"to the buffer's length {len(prog)}"):
            config.set_model_buffer(prog, size, b"", 0)
        with pytest.raises(ValueError, match=r"the params buffer size must be an int from 0 "
                                             r"to the buffer's length 3, got"):
            config.set_model_buffer(prog, len(prog), b"abc", size if size != len(prog) + 1
                                    else 4)
    assert config.model_dir() == combined and not config.model_from_memory()


def test_model_buffer_errors_name_the_buffer(combined):
    prog = _read(os.path.join(combined, "model"))
    params = _read(os.path.join(combined, "params"))

    def create(p, q):
        config = AnalysisConfig()
        config.set_model_buffer(p, len(p), q, len(q))
        return create_paddle_predictor(config)

    with pytest.raises(CheckpointError, match="the params buffer is empty, but the program "
                                              "has 8 persistable variables .'fc_0.w_0'"):
        create(prog, b"")
    with pytest.raises(Exception, match="Cannot load variable '.*' in the params buffer: the "
                                        "file is truncated or corrupted"):
        create(prog, params[: len(params) // 2])
    with pytest.raises(Exception, match="^the program buffer is not a valid Paddle "
                                        "ProgramDesc"):
        create(b"\x08\x01not a program", params)
    with pytest.raises(Exception, match="^the program buffer: not a fluidlite program"):
        create(b'{"not": 1}', params)


def test_files_again_after_a_buffer(combined):
    prog = _read(os.path.join(combined, "model"))
    config = AnalysisConfig()
    config.set_model_buffer(prog, len(prog), b"", 0)
    config.set_model(os.path.join(combined, "model"), os.path.join(combined, "params"))
    assert not config.model_from_memory()
    got = create_paddle_predictor(config).run([PaddleTensor(X)])[0].as_ndarray()
    np.testing.assert_allclose(got, _reference(combined, X, "model", "params"), rtol=1e-5,
                               atol=1e-6)


# -- AnalysisConfig: copy, Precision, refusals, to_native_config -------------------------------
def test_copy_constructor(combined):
    a = AnalysisConfig(combined)
    a.switch_ir_optim(False)
    a.set_cpu_math_library_num_threads(3)
    a.delete_pass("fc_fuse_pass")
    b = AnalysisConfig(a)
    assert (b.model_dir(), b.ir_optim(), b.cpu_math_library_num_threads()) == (combined, False, 3)
    assert b.pass_builder().all_passes() == a.pass_builder().all_passes()
    b.switch_ir_optim(True)
    b.pass_builder().append_pass("fc_fuse_pass")
    assert not a.ir_optim() and "fc_fuse_pass" not in a.pass_builder().all_passes()
    with pytest.raises(TypeError, match="takes no params_file"):
        AnalysisConfig(a, "params")


def test_precision_and_refused_engines():
    c = AnalysisConfig()
    assert [int(p) for p in AnalysisConfig.Precision] == [0, 1, 2]
    assert AnalysisConfig.Half is AnalysisConfig.Precision.Half
    with pytest.raises(RuntimeError, match="TensorRT needs a GPU"):
        c.enable_tensorrt_engine(1 << 20, 1, 3, AnalysisConfig.Precision.Half, False, False)
    for refused in (c.enable_quantizer, c.quantizer_config):
        with pytest.raises(RuntimeError, match="int8 quantizer is not available.*PaddleSlim"):
            refused()
    assert c.fraction_of_gpu_memory_for_pool() == 0.0


def test_to_native_config(combined):
    c = AnalysisConfig(os.path.join(combined, "model"), os.path.join(combined, "params"))
    c.switch_specify_input_names(True)
    n = c.to_native_config()
    assert isinstance(n, NativeConfig)
    assert (n.model_dir, n.prog_file, n.param_file, n.specify_input_name, n.use_gpu) == \
        ("", os.path.join(combined, "model"), os.path.join(combined, "params"), True, False)
    assert n.cpu_math_library_num_threads() == 1
    c.set_cpu_math_library_num_threads(2)
    assert c.to_native_config().cpu_math_library_num_threads() == 2
    prog = _read(os.path.join(combined, "model"))
    c.set_model_buffer(prog, len(prog), b"", 0)
    with pytest.raises(ValueError, match="holds its model in memory"):
        c.to_native_config()


# -- NativeConfig -----------------------------------------------------------------------------
def test_native_predictor_runs_the_model_as_saved(tmp_path):
    d = _save(tmp_path)
    config = NativeConfig()
    config.model_dir = d
    config.use_gpu = False
    config.specify_input_name = True
    predictor = create_paddle_predictor(config)
    assert type(predictor) is NativePaddlePredictor and isinstance(predictor, PaddlePredictor)
    assert not isinstance(predictor, AnalysisPredictor)
    assert predictor.applied_passes() == [] and predictor.engine() == "numpy"
    with fluid.scope_guard(fluid.Scope()):
        loaded = fluid.io.load_inference_model(d, fluid.Executor(fluid.CPUPlace()))[0]
    assert [op.type for op in predictor.program().global_block().ops] == \
        [op.type for op in loaded.global_block().ops]           # no pass ran
    want = _reference(d, X)
    got = predictor.run([PaddleTensor(X, name="x")])[0].as_ndarray()
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    twin = predictor.clone()
    assert type(twin) is NativePaddlePredictor
    np.testing.assert_array_equal(twin.run([PaddleTensor(X, name="x")])[0].as_ndarray(), got)
    with pytest.raises(ValueError, match=r"no PaddleTensor named \['x'\] \(inputs are matched "
                                         r"by name"):
        predictor.run([PaddleTensor(X, name="no_such_feed")])


def test_native_config_of_program_and_params_files(combined):
    config = NativeConfig()
    config.prog_file = os.path.join(combined, "model")
    config.param_file = os.path.join(combined, "params")
    config.set_cpu_math_library_num_threads(1)
    got = create_paddle_predictor(config).run([PaddleTensor(X)])[0].as_ndarray()
    np.testing.assert_allclose(got, _reference(combined, X, "model", "params"), rtol=1e-6,
                               atol=1e-7)


def test_native_config_refusals(combined):
    config = NativeConfig()
    with pytest.raises(ValueError, match="names no model"):
        create_paddle_predictor(config)
    config.model_dir = 3
    with pytest.raises(TypeError, match="NativeConfig.model_dir must be a str, got int"):
        create_paddle_predictor(config)
    config.model_dir = combined
    config.use_gpu = True
    with pytest.raises(RuntimeError, match="CPU only; set use_gpu = False"):
        create_paddle_predictor(config)
    with pytest.raises(ValueError, match=">= 1, got 0"):
        config.set_cpu_math_library_num_threads(0)
    with pytest.raises(TypeError, match="AnalysisConfig or a NativeConfig, got str"):
        create_paddle_predictor(combined)


# -- pass builder, enums, scope -----------------------------------------------------------------
def test_pass_builder_set_passes_and_debug_string():
    builder = AnalysisConfig().pass_builder()
    builder.set_passes(["fc_fuse_pass", "conv_bn_fuse_pass"])
    assert builder.all_passes() == ["fc_fuse_pass", "conv_bn_fuse_pass"]
    assert builder.debug_string() == \
        "Passes to apply:\n  - fc_fuse_pass\n  - conv_bn_fuse_pass\n"
    with pytest.raises(ValueError, match="unknown inference pass 'no_such_pass'"):
        builder.set_passes(["conv_bn_fuse_pass", "no_such_pass"])
    assert builder.all_passes() == ["fc_fuse_pass", "conv_bn_fuse_pass"]    # unchanged


def test_set_passes_decides_what_runs(combined):
    config = AnalysisConfig(os.path.join(combined, "model"), os.path.join(combined, "params"))
    config.pass_builder().set_passes(["fc_fuse_pass"])
    predictor = create_paddle_predictor(config)
    assert [name for name, _ in predictor.applied_passes()] == ["fc_fuse_pass"]
    types = {op.type for op in predictor.program().global_block().ops}
    assert "fc" in types and "batch_norm" in types          # no conv/bn folding asked for


def test_place_and_dtype_size():
    assert [(p.name, int(p)) for p in PaddlePlace] == [("UNK", -1), ("CPU", 0), ("GPU", 1)]
    sizes = {d.name: paddle_dtype_size(d) for d in PaddleDType}
    assert sizes == {"FLOAT32": 4, "INT64": 8, "INT32": 4, "UINT8": 1, "INT8": 1,
                     "FLOAT16": 2, "BOOL": 1}
    assert paddle_dtype_size(1) == 8
    with pytest.raises(ValueError):
        paddle_dtype_size(9)


def test_predictor_scope_is_its_own_and_sees_the_shared_weights(combined):
    config = AnalysisConfig(os.path.join(combined, "model"), os.path.join(combined, "params"))
    config.switch_ir_optim(False)
    p = create_paddle_predictor(config)
    q = p.clone()
    p.run([PaddleTensor(X)])
    weight = next(v.name for v in p.program().list_vars() if v.persistable
                  and v.name.endswith(".w_0"))
    assert p.scope() is not q.scope() and p.scope() is not fluid.global_scope()
    assert fluid.global_scope().find_var(weight) is None         # the caller's scope untouched
    held = p.scope().find_var(weight)
    assert held is not None and q.scope().find_var(weight) is held      # shared weights
    assert p.scope().parent is q.scope().parent


def test_fluid_core_reaches_the_new_names():
    import fluidlite.inference as inf
    for name in ("NativeConfig", "PaddlePredictor", "AnalysisPredictor",
                 "NativePaddlePredictor", "PaddlePlace", "paddle_dtype_size"):
        assert getattr(fluid.core, name) is getattr(inf, name)


def test_paddle_tensor_copy_false_shares_the_array(combined):
    """fluid's ``PaddleTensor(data, copy=False)`` wraps the array's memory: a write into the
    array afterwards is what the predictor reads; the default copies."""
    predictor = create_paddle_predictor(AnalysisConfig(os.path.join(combined, "model"),
                                                       os.path.join(combined, "params")))
    a, b = X.copy(), X.copy()
    shared, copied = PaddleTensor(a, copy=False), PaddleTensor(b)
    a[:] = 0.5
    b[:] = 0.5
    assert (shared.as_ndarray() == 0.5).all() and (copied.as_ndarray() == X).all()
    [got_shared] = predictor.run([shared])
    [got_copied] = predictor.run([copied])
    [want_half] = predictor.run([PaddleTensor(np.full_like(X, 0.5))])
    [want_x] = predictor.run([PaddleTensor(X)])
    np.testing.assert_array_equal(got_shared.as_ndarray(), want_half.as_ndarray())
    np.testing.assert_array_equal(got_copied.as_ndarray(), want_x.as_ndarray())
    assert shared.data.float_data() == [0.5] * X.size  # one flat buffer, as fluid's
    strided = X.astype(np.float64)[:, ::2]              # must be converted: a copy either way
    t = PaddleTensor(strided, copy=False)
    strided[:] = 9.0
    assert t.dtype == PaddleDType.FLOAT32 and (t.as_ndarray() == X[:, ::2]).all()


# -- switch_ir_debug ----------------------------------------------------------------------------
@pytest.mark.parametrize("how", ["switch_ir_debug", "turn_on_debug"])
def test_ir_debug_writes_the_program_after_each_pass(combined, tmp_path, monkeypatch, how):
    """fluid's graph_viz_pass after every pass: ``<i>_ir_<pass>.dot``, into the optim cache
    directory (made if missing) or the current directory; each the program after that pass."""
    config = AnalysisConfig(os.path.join(combined, "model"), os.path.join(combined, "params"))
    config.pass_builder().set_passes(["identity_op_clean_pass", "fc_bn_fuse_pass",
                                      "fc_fuse_pass"])
    if how == "switch_ir_debug":
        config.switch_ir_debug(True)
        config.set_optim_cache_dir(str(tmp_path / "graphs"))
        where = tmp_path / "graphs"
    else:
        config.pass_builder().turn_on_debug()
        monkeypatch.chdir(tmp_path)
        where = tmp_path
    assert config.ir_debug_enabled()
    predictor = create_paddle_predictor(config)
    names = ["0_ir_identity_op_clean_pass.dot", "1_ir_fc_bn_fuse_pass.dot",
             "2_ir_fc_fuse_pass.dot"]
    assert sorted(p.name for p in where.glob("*.dot")) == names
    graphs = [(where / n).read_text() for n in names]
    assert all(g.startswith("digraph") for g in graphs)
    assert all(f'label="after {n[5:-4]}"' in g for n, g in zip(names, graphs))
    ops = [sorted(re.findall(r'^\s*"op:[^"]*" \[label="([^"]+)"', g, re.M)) for g in graphs]
    with fluid.scope_guard(fluid.Scope()):
        loaded = fluid.io.load_inference_model(combined, fluid.Executor(fluid.CPUPlace()),
                                               "model", "params")[0]
    before = sorted(op.type for op in loaded.global_block().ops)
    assert ops[0] == [t for t in before if t != "scale"]    # the save's identity scale gone
    assert ops[1] == ops[0]                 # batch norm after a relu: nothing to fold
    assert ops[0].count("mul") == 2 and "mul" not in ops[2] and ops[2].count("fc") == 2
    assert ops[2] == sorted(op.type for op in predictor.program().global_block().ops)


def test_ir_debug_off_writes_nothing(combined, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = AnalysisConfig(os.path.join(combined, "model"), os.path.join(combined, "params"))
    config.switch_ir_debug(True)
    config.switch_ir_debug(False)
    assert not config.ir_debug_enabled()
    create_paddle_predictor(config)
    assert list(tmp_path.iterdir()) == []


def test_defaults_are_fluids():
    c = AnalysisConfig()
    assert (c.model_dir(), c.prog_file(), c.params_file(), c.model_from_memory()) == \
        ("", "", "", False)
    assert c.ir_optim() and c.use_feed_fetch_ops_enabled() and c.cpu_math_library_num_threads() == 1
    assert not (c.specify_input_name() or c.memory_optim_enabled() or c.profile_enabled()
                or c.glog_info_disabled() or c.mkldnn_enabled() or c.ir_debug_enabled()
                or c.use_onnxruntime() or c.use_gpu() or c.tensorrt_engine_enabled())
    n = NativeConfig()
    assert (n.model_dir, n.prog_file, n.param_file, n.use_gpu, n.device,
            n.fraction_of_gpu_memory, n.specify_input_name,
            n.cpu_math_library_num_threads()) == ("", "", "", False, 0, -1.0, False, 1)
    t = PaddleTensor()
    assert (t.name, t.shape, t.dtype, t.lod, t.data.length(), t.data.empty()) == \
        ("", [], PaddleDType.FLOAT32, [], 0, True)


def test_native_config_threads_and_a_model_dir_with_one_params_file(combined):
    from fluidlite.core import threads
    native = NativeConfig()
    native.model_dir, native.param_file = combined, "params"
    native.specify_input_name = True
    analysis = native.to_analysis_config()
    assert (analysis.model_dir(), analysis.params_file(), analysis.ir_optim(),
            analysis.specify_input_name()) == (combined, "params", False, True)
    before = threads.get_num_threads()
    try:
        fluid.core.set_num_threads(2)
        # model dir + its combined params file (fluid's __model__ default name is "model" here)
        native.prog_file = os.path.join(combined, "model")
        native.param_file = os.path.join(combined, "params")
        got = create_paddle_predictor(native).run([PaddleTensor(X, name="x")])[0]
        assert threads.get_num_threads() == 2           # never set: the process's count kept
        np.testing.assert_allclose(got.as_ndarray(), _reference(combined, X, "model", "params"),
                                   rtol=1e-6, atol=1e-7)
        native.set_cpu_math_library_num_threads(1)
        assert native.to_analysis_config().cpu_math_library_num_threads() == 1
        create_paddle_predictor(native)
        assert threads.get_num_threads() == 1           # set: applied when created, as fluid
    finally:
        fluid.core.set_num_threads(before)


def test_model_buffer_of_a_model_without_weights(tmp_path):
    """A program with no persistable variable needs no parameters: an empty params buffer."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data(name="x", shape=[-1, 6], dtype="float32")
        y = fluid.layers.relu(x)
    with pytest.warns(UserWarning, match="no variable in your model"):
        fluid.io.save_inference_model(str(tmp_path), ["x"], [y],
                                      fluid.Executor(fluid.CPUPlace()), main_program=main)
    prog = _read(os.path.join(tmp_path, "__model__"))
    config = AnalysisConfig()
    config.set_model_buffer(prog, len(prog), b"", 0)
    got = create_paddle_predictor(config).run([PaddleTensor(X - 0.5)])[0].as_ndarray()
    np.testing.assert_array_equal(got, np.maximum(X - 0.5, 0))
