"""Issue 15: LoD is stored in checkpoints and restored with the values, in both formats."""
import os
import struct

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.formats.checkpoint import CheckpointError


def _program():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        seq = fluid.layers.create_global_var([5, 2], 0.0, "float32", persistable=True,
                                             name="seq")
        w = fluid.layers.create_global_var([3], 1.0, "float32", persistable=True, name="w")
    return main, startup, seq, w


LOD = [[0, 2, 3], [0, 1, 2, 5]]


def _fill(scope):
    vals = np.arange(10, dtype="float32").reshape(5, 2)
    t = scope.var("seq").get_tensor()
    t.set(vals, fluid.CPUPlace())
    t.set_lod(LOD)
    scope.var("w").get_tensor().set(np.array([1., 2., 3.], "float32"), fluid.CPUPlace())
    return vals


@pytest.mark.parametrize("fmt", ["paddle", "json"])
@pytest.mark.parametrize("filename", [None, "all_params"])
def test_lod_survives_save_and_load(tmp_path, fmt, filename):
    main, startup, _, _ = _program()
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(startup)
        vals = _fill(scope)
        fluid.io.save_persistables(exe, str(tmp_path), main, filename=filename, format=fmt)
    fresh = fluid.Scope()
    with fluid.scope_guard(fresh):
        fluid.io.load_persistables(exe, str(tmp_path), main, filename=filename)
    t = fresh.find_var("seq").get_tensor()
    np.testing.assert_array_equal(np.array(t), vals)
    assert t.lod() == LOD
    assert t.recursive_sequence_lengths() == [[2, 1], [1, 1, 3]]
    assert fresh.find_var("w").get_tensor().lod() == []
    np.testing.assert_array_equal(np.array(fresh.find_var("w").get_tensor()), [1., 2., 3.])
    if fmt == "json" and filename is None:
        assert os.path.isfile(tmp_path / fluid.io.LOD_SIDECAR)


def test_lod_survives_save_to_bytes():
    main, startup, _, _ = _program()
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(startup)
        _fill(scope)
        for fmt in ("paddle", "json"):
            blob = fluid.io.save_persistables(exe, None, main, format=fmt)
            fresh = fluid.Scope()
            with fluid.scope_guard(fresh):
                fluid.io.load_persistables(exe, None, main, filename=blob)
            assert fresh.find_var("seq").get_tensor().lod() == LOD, fmt


def test_load_replaces_stale_lod(tmp_path):
    """A variable saved without LoD loads without one, even over a scope tensor with LoD."""
    main, startup, _, _ = _program()
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(startup)
        fluid.io.save_persistables(exe, str(tmp_path), main, format="json")
        _fill(scope)
        fluid.io.load_persistables(exe, str(tmp_path), main)
        assert scope.find_var("seq").get_tensor().lod() == []


def test_lod_survives_executor_runs(tmp_path):
    """The executor writes persistables back as arrays and keeps the tensor's LoD."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.create_global_var([4, 1], 1.0, "float32", persistable=True, name="acc")
        fluid.layers.assign(fluid.layers.scale(x, 2.0), x)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(startup)
        scope.find_var("acc").get_tensor().set_lod([[0, 1, 4]])
        exe.run(main)
        exe.run(main)
        fluid.io.save_persistables(exe, str(tmp_path), main)
    fresh = fluid.Scope()
    with fluid.scope_guard(fresh):
        fluid.io.load_persistables(exe, str(tmp_path), main)
    t = fresh.find_var("acc").get_tensor()
    np.testing.assert_array_equal(np.array(t), np.full((4, 1), 4.0, "float32"))
    assert t.lod() == [[0, 1, 4]]


def test_paddle_stream_with_lod_written_byte_by_byte(tmp_path):
    """A tensor file laid out as docs/file_formats.md describes, with one LoD level."""
    data = np.array([[1.5], [2.5], [3.5]], dtype="<f4")
    offsets = [0, 1, 3]
    raw = struct.pack("<I", 0) + struct.pack("<Q", 1)           # version, 1 LoD level
    raw += struct.pack("<Q", 8 * len(offsets)) + struct.pack("<3Q", *offsets)
    raw += struct.pack("<I", 0)                                  # tensor version
    desc = bytes([0x08, 0x05, 0x10, 0x03, 0x10, 0x01])           # FP32, dims [3, 1]
    raw += struct.pack("<i", len(desc)) + desc + data.tobytes()
    (tmp_path / "seq").write_bytes(raw)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        fluid.layers.create_global_var([3, 1], 0.0, "float32", persistable=True, name="seq")
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        fluid.io.load_persistables(exe, str(tmp_path), main)
    t = scope.find_var("seq").get_tensor()
    np.testing.assert_array_equal(np.array(t), data)
    assert t.lod() == [offsets]
    # and fluidlite writes the same bytes back
    with fluid.scope_guard(scope):
        fluid.io.save_persistables(exe, str(tmp_path / "out"), main)
    assert (tmp_path / "out" / "seq").read_bytes() == raw


def test_bad_lod_sidecar_is_refused(tmp_path):
    main, startup, _, _ = _program()
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(startup)
        fluid.io.save_persistables(exe, str(tmp_path), main, format="json")
    # a sidecar the user put there by hand (not covered by the manifest) is still validated
    (tmp_path / fluid.io.LOD_SIDECAR).write_text('{"seq": [[1, 0]]}')
    with fluid.scope_guard(fluid.Scope()):
        with pytest.raises(CheckpointError, match="LoD sidecar"):
            fluid.io.load_persistables(exe, str(tmp_path), main)
