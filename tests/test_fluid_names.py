"""fluid 1.8's remaining top-level / fluid.io / fluid.transpiler names (issue 16)."""
from __future__ import annotations

import logging

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import framework


# -- Tensor / LoDTensorArray -------------------------------------------------------------------
def test_tensor_is_lodtensor():
    assert fluid.Tensor is fluid.LoDTensor
    t = fluid.Tensor()
    t.set(np.arange(6, dtype="float32").reshape(2, 3), fluid.CPUPlace())
    np.testing.assert_array_equal(np.array(t), np.arange(6).reshape(2, 3))
    assert t.shape() == [2, 3]


def test_lod_tensor_array_holds_lod_tensors():
    arr = fluid.LoDTensorArray()
    assert len(arr) == 0
    t = fluid.LoDTensor()
    t.set(np.ones((2, 2), "float32"), fluid.CPUPlace())
    arr.append(t)
    u = fluid.LoDTensor()
    u.set(np.zeros((3,), "int64"), fluid.CPUPlace())
    arr.append(u)
    assert len(arr) == 2 and arr[1] is u
    arr[0] = u
    assert arr[0] is u
    assert arr._move_to_list() == [u, u] and len(arr) == 0


def test_lod_tensor_array_rejects_non_tensors():
    arr = fluid.LoDTensorArray()
    with pytest.raises(TypeError, match="must be a fluid.LoDTensor, but received ndarray"):
        arr.append(np.ones(2))
    arr.append(fluid.LoDTensor(np.ones(2)))
    with pytest.raises(TypeError, match="received int"):
        arr[0] = 3
    assert isinstance(arr[0], fluid.LoDTensor)


# -- flags -------------------------------------------------------------------------------------
def test_set_and_get_flags_round_trip():
    old = fluid.get_flags(["FLAGS_eager_delete_tensor_gb", "FLAGS_check_nan_inf"])
    assert old == {"FLAGS_eager_delete_tensor_gb": 0.0, "FLAGS_check_nan_inf": False}
    try:
        fluid.set_flags({"FLAGS_eager_delete_tensor_gb": 1, "FLAGS_check_nan_inf": True})
        got = fluid.get_flags("FLAGS_eager_delete_tensor_gb")
        assert got == {"FLAGS_eager_delete_tensor_gb": 1.0}
        assert isinstance(got["FLAGS_eager_delete_tensor_gb"], float)
        assert fluid.get_flags(("FLAGS_check_nan_inf",)) == {"FLAGS_check_nan_inf": True}
    finally:
        fluid.set_flags(old)
    assert fluid.get_flags(list(old)) == old


def test_flag_errors_are_fluids():
    with pytest.raises(TypeError, match="flags in set_flags should be a dict"):
        fluid.set_flags([("FLAGS_check_nan_inf", True)])
    with pytest.raises(ValueError, match="Flag FLAGS_nope cannot set its value"):
        fluid.set_flags({"FLAGS_nope": 1})
    with pytest.raises(ValueError, match="Flag FLAGS_nope cannot get its value"):
        fluid.get_flags(["FLAGS_nope"])
    with pytest.raises(TypeError, match="should be a list, tuple or string"):
        fluid.get_flags({"FLAGS_check_nan_inf"})
    with pytest.raises(TypeError, match="FLAGS_paddle_num_threads takes a int, but received "
                                        "'4'"):
        fluid.set_flags({"FLAGS_paddle_num_threads": "4"})
    # all or nothing: a bad flag in the dict leaves the good one unset
    before = fluid.get_flags("FLAGS_benchmark")
    with pytest.raises(ValueError):
        fluid.set_flags({"FLAGS_benchmark": not before["FLAGS_benchmark"], "FLAGS_nope": 1})
    assert fluid.get_flags("FLAGS_benchmark") == before


def test_flags_start_from_the_environment(monkeypatch):
    monkeypatch.setenv("FLAGS_paddle_num_threads", "8")
    assert framework._parse_env_flag("FLAGS_paddle_num_threads", 1, "8") == 8
    assert framework._parse_env_flag("FLAGS_benchmark", False, "true") is True
    assert framework._parse_env_flag("FLAGS_eager_delete_tensor_gb", 0.0, "2.5") == 2.5


# -- require_version ---------------------------------------------------------------------------
def test_require_version_accepts_the_18_api():
    fluid.require_version("1.8")
    fluid.require_version("1.5.2.0")
    fluid.require_version("1.8.5")
    fluid.require_version(min_version="1.6", max_version="1.8.5")
    fluid.require_version("0.1", "2")


def test_require_version_rejects_other_ranges():
    with pytest.raises(Exception, match=r"VersionError: PaddlePaddle version 2.0 or higher is "
                                        r"required, but 1.8.5 installed"):
        fluid.require_version("2.0")
    with pytest.raises(framework.VersionError, match=r"in \[1.5, 1.7\] required"):
        fluid.require_version("1.5", "1.7")
    with pytest.raises(framework.VersionError):
        fluid.require_version("1.8.6")


def test_require_version_argument_errors():
    with pytest.raises(TypeError, match="'min_version' in require_version must be str"):
        fluid.require_version(1.8)
    with pytest.raises(TypeError, match="'max_version' in require_version must be str or "
                                        "type\\(None\\)"):
        fluid.require_version("1.5", 2)
    with pytest.raises(ValueError, match="'min_version' .* but received 1.8.a"):
        fluid.require_version("1.8.a")
    with pytest.raises(ValueError, match="'max_version' .* but received 1.2.3.4.5"):
        fluid.require_version("1.0", "1.2.3.4.5")


# -- device_guard / places ---------------------------------------------------------------------
def test_device_guard_annotates_ops():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data(name="x", shape=[-1, 3], dtype="float32")
        with fluid.device_guard("cpu"):
            y = fluid.layers.scale(x, scale=2.0)
        with fluid.device_guard("gpu:0"):
            z = fluid.layers.elementwise_add(y, y)
        w = fluid.layers.mean(z)
    devices = {op.type: op.attrs.get("op_device") for op in main.global_block().ops}
    assert devices["scale"] == "cpu"
    assert devices["elementwise_add"] == "gpu:0"
    assert not devices["mean"]
    with fluid.program_guard(main, startup):
        with fluid.device_guard("gpu"):
            fluid.layers.fc(x, size=2)
    init_devices = {op.attrs.get("op_device") for op in startup.global_block().ops}
    assert init_devices == {"gpu"}         # the fc's initializers were created inside too
    assert main.global_block().ops[-1].attrs["op_device"] == "gpu"
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    xv = np.random.rand(2, 3).astype("float32")
    out, = exe.run(main, feed={"x": xv}, fetch_list=[w])
    np.testing.assert_allclose(out, (4 * xv).mean(), rtol=1e-6)


def test_device_guard_errors():
    with pytest.raises(ValueError, match="should be 'cpu' or 'gpu'.*received xpu"):
        with fluid.device_guard("xpu"):
            pass
    with pytest.raises(ValueError, match="Should not set device id for cpu"):
        with fluid.device_guard("cpu:1"):
            pass
    with fluid.device_guard(None):
        pass


def test_cuda_pinned_places():
    assert fluid.cuda_pinned_places() == [fluid.CUDAPinnedPlace()]
    assert len(fluid.cuda_pinned_places(3)) == 3
    with pytest.raises(ValueError, match="device_count must be a positive int"):
        fluid.cuda_pinned_places(0)


# -- BuildStrategy enums -----------------------------------------------------------------------
def test_build_strategy_enums():
    bs = fluid.BuildStrategy()
    assert bs.reduce_strategy == fluid.BuildStrategy.ReduceStrategy.AllReduce == 0
    assert bs.gradient_scale_strategy == fluid.BuildStrategy.GradientScaleStrategy.CoeffNumDevice
    bs.reduce_strategy = fluid.BuildStrategy.ReduceStrategy.Reduce
    bs.gradient_scale_strategy = fluid.BuildStrategy.GradientScaleStrategy.Customized
    assert int(bs.reduce_strategy) == 1 and int(bs.gradient_scale_strategy) == 2
    assert fluid.BuildStrategy.ReduceStrategy(1) is fluid.BuildStrategy.ReduceStrategy.Reduce
    assert fluid.BuildStrategy.GradientScaleStrategy.One == 1
    assert fluid.BuildStrategy().reduce_strategy == 0     # the class default is untouched


# -- top-level re-exports ----------------------------------------------------------------------
def test_program_state_at_top_level(tmp_path):
    assert fluid.load_program_state is fluid.io.load_program_state
    assert fluid.set_program_state is fluid.io.set_program_state
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data(name="x", shape=[-1, 2], dtype="float32")
        fluid.layers.fc(x, size=3, param_attr=fluid.ParamAttr(name="w"),
                        bias_attr=fluid.ParamAttr(name="b"))
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(startup)
        w = np.array(scope.find_var("w").get_tensor())
        fluid.save(main, str(tmp_path / "m"))
        state = fluid.load_program_state(str(tmp_path / "m"))
        np.testing.assert_array_equal(state["w"], w)
        state["w"] = np.full_like(w, 0.5)
        fluid.set_program_state(main, state)
        np.testing.assert_array_equal(np.array(scope.find_var("w").get_tensor()), 0.5)


# -- fluid.io parameter values -----------------------------------------------------------------
def test_get_parameter_value_by_name():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data(name="x", shape=[-1, 2], dtype="float32")
        y = fluid.layers.fc(x, size=3, param_attr=fluid.ParamAttr(name="fc_w"),
                            bias_attr=fluid.ParamAttr(
                                name="fc_b", initializer=fluid.initializer.Constant(0.25)))
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(startup)
        b = fluid.io.get_parameter_value_by_name("fc_b", exe, main)
        np.testing.assert_array_equal(b, np.full([3], 0.25, "float32"))
        w = fluid.io.get_parameter_value(main.global_block().var("fc_w"), exe)
        np.testing.assert_array_equal(w, np.array(scope.find_var("fc_w").get_tensor()))
        w[:] = 7                  # a copy: the scope keeps its value
        assert not np.any(np.array(scope.find_var("fc_w").get_tensor()) == 7)
        with fluid.program_guard(main, startup):       # the default program is main here
            np.testing.assert_array_equal(fluid.io.get_parameter_value_by_name("fc_b", exe),
                                          b)
        with pytest.raises(TypeError, match="not parameter.*'x'"):
            fluid.io.get_parameter_value(x, exe)
        with pytest.raises(TypeError, match="not parameter"):
            fluid.io.get_parameter_value_by_name(y.name, exe, main)
        with pytest.raises(ValueError, match="no variable named 'nope'"):
            fluid.io.get_parameter_value_by_name("nope", exe, main)
    with fluid.scope_guard(fluid.Scope()):
        with pytest.raises(RuntimeError, match="'fc_w' has no value.*startup program"):
            fluid.io.get_parameter_value(main.global_block().var("fc_w"), exe)


# -- deprecated no-ops -------------------------------------------------------------------------
@pytest.mark.parametrize("fn", ["memory_optimize", "release_memory"])
def test_memory_optimize_is_a_deprecated_no_op(fn, caplog):
    assert getattr(fluid, fn) is getattr(fluid.transpiler, fn)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data(name="x", shape=[-1, 2], dtype="float32")
        loss = fluid.layers.mean(fluid.layers.fc(x, size=2))
        fluid.optimizer.SGD(0.1).minimize(loss)
    before = str(main)
    with pytest.warns(DeprecationWarning, match=rf"{fn}\(\) is deprecated"):
        if fn == "memory_optimize":
            assert fluid.memory_optimize(main, skip_opt_set={"x"}, print_log=True, level=1,
                                         skip_grads=False) is None
        else:
            assert fluid.release_memory(main, skip_opt_set=None) is None
    assert str(main) == before


# -- fluid.profiler.cuda_profiler ----------------------------------------------------------------
def _profiled_program():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data(name="x", shape=[-1, 3], dtype="float32")
        # (the scale keeps the relu an op of its own: fc's mul and bias add fuse into one step)
        h = fluid.layers.scale(fluid.layers.fc(x, size=4), 2.0)
        loss = fluid.layers.mean(fluid.layers.relu(h))
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    return exe, main, loss


@pytest.mark.parametrize("mode", [None, "csv", "kvp"])
def test_cuda_profiler_profiles_the_ops_on_the_cpu(tmp_path, mode):
    exe, main, loss = _profiled_program()
    out = tmp_path / "nvprof.txt"
    with fluid.profiler.cuda_profiler(str(out), output_mode=mode) as prof:
        for _ in range(3):
            exe.run(main, feed={"x": np.ones((2, 3), "float32")}, fetch_list=[loss])
    assert prof.runs == 3 and prof.by_type["relu"].calls == 3
    lines = out.read_text().splitlines()
    if mode == "kvp":
        relu = [ln for ln in lines if ln.startswith("Event=relu ")]
        assert len(relu) == 1 and "Calls=3 " in relu[0] and "Total(ms)=" in relu[0]
    else:
        assert lines[0] == "Event,Calls,Total(ms),Min(ms),Max(ms),Ave(ms)"
        relu = [ln.split(",") for ln in lines[1:] if ln.startswith("relu,")]
        assert len(relu) == 1 and relu[0][1] == "3" and float(relu[0][2]) >= 0
        assert {ln.split(",")[0] for ln in lines[1:]} >= {"fused(mul+elementwise_add)", "scale",
                                                          "mean"}
    # the block's runs only: a run after it is not profiled
    assert fluid.profiler.active() is None


def test_cuda_profiler_argument_errors(tmp_path):
    with pytest.raises(ValueError, match="The output mode must be 'kvp' or 'csv'"):
        with fluid.profiler.cuda_profiler(str(tmp_path / "o"), output_mode="json"):
            pass
    with pytest.raises(TypeError, match="config must be a list of nvprof option strings"):
        with fluid.profiler.cuda_profiler(str(tmp_path / "o"), config="gpustarttimestamp"):
            pass
    assert not (tmp_path / "o").exists()
