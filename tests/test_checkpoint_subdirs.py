"""Variables whose names contain ``/`` (issue 29): fluid 1.8 saved ``block1/conv/w`` one file per
variable into sub-directories (Xception-deeplab's names do this); fluidlite does the same, in
both of its formats, atomically, and without ever following a link out of the directory.
"""
from __future__ import annotations

import json
import os
import subprocess
import textwrap

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.formats import checkpoint
from fluidlite.formats.checkpoint import CheckpointError

W, B = "block1/conv/w", "block1/b"


def _build():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [-1, 3])
        y = fluid.layers.fc(x, 2, param_attr=fluid.ParamAttr(name=W),
                            bias_attr=fluid.ParamAttr(name=B))
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(startup)
    return main, exe, scope, y


def _value(scope, name):
    return np.array(scope.find_var(name).get_tensor())


def _set(scope, name, value):
    scope.find_var(name).get_tensor().set(value, fluid.CPUPlace())


def _tree(root):
    return sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root)
                  for f in fs if not f.startswith("."))


@pytest.mark.parametrize("fmt", ["paddle", "json"])
def test_slash_names_round_trip_through_sub_directories(tmp_path, fmt):
    main, exe, scope, _ = _build()
    want = {n: _value(scope, n) for n in (W, B)}
    with fluid.scope_guard(scope):
        fluid.io.save_persistables(exe, str(tmp_path), main, format=fmt)
    assert [p for p in _tree(tmp_path) if not p.endswith(".json")] == sorted([W, B])
    for n in want:
        _set(scope, n, np.zeros_like(want[n]))
    with fluid.scope_guard(scope):
        fluid.io.load_persistables(exe, str(tmp_path), main)
    for n, v in want.items():
        np.testing.assert_array_equal(_value(scope, n), v)
    # a directory listing finds the nested files under their variable names
    assert sorted(fluid.load_program_state(str(tmp_path))) == sorted([W, B])


def test_saving_again_replaces_nested_files_and_keeps_the_manifest_true(tmp_path):
    main, exe, scope, _ = _build()
    with fluid.scope_guard(scope):
        fluid.io.save_persistables(exe, str(tmp_path), main)
        _set(scope, W, _value(scope, W) + 1)
        fluid.io.save_persistables(exe, str(tmp_path), main)
    # no staging directory (or its sub-directories) is left behind
    assert [e for e in os.listdir(tmp_path) if e.startswith(".fluidlite-staging")] == []
    with open(tmp_path / checkpoint.MANIFEST_NAME) as f:
        listed = json.load(f)["files"]
    assert W in listed and B in listed
    state = fluid.load_program_state(str(tmp_path))
    np.testing.assert_array_equal(state[W], _value(scope, W))


def test_inference_model_with_slash_names_runs_after_loading(tmp_path):
    main, exe, scope, y = _build()
    x = np.random.RandomState(0).rand(2, 3).astype("float32")
    with fluid.scope_guard(scope):
        want, = exe.run(main, feed={"x": x}, fetch_list=[y])
        fluid.io.save_inference_model(str(tmp_path), ["x"], [y], exe, main)
    assert os.path.isfile(tmp_path / "block1" / "conv" / "w")
    with fluid.scope_guard(fluid.Scope()):
        prog, feeds, fetches = fluid.io.load_inference_model(str(tmp_path), exe)
        got, = exe.run(prog, feed={feeds[0]: x}, fetch_list=fetches)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", ["../w", "/abs/w", "a//w", "a/./w", "a/../w", "a\\w",
                                  "a/.fluidlite-x/w"])
def test_names_that_would_leave_the_directory_are_refused(tmp_path, name):
    with pytest.raises(ValueError, match="checkpoint file name"):
        checkpoint.publish(str(tmp_path), {name: b"x"})
    assert os.listdir(tmp_path) == []


def test_a_symlinked_sub_directory_is_never_written_through(tmp_path):
    """A hostile checkpoint directory whose ``block1`` links elsewhere: the save refuses before
    writing anything, and nothing appears outside."""
    main, exe, scope, _ = _build()
    outside = tmp_path / "outside"
    outside.mkdir()
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    os.symlink(outside, ckpt / "block1")
    with fluid.scope_guard(scope), pytest.raises(CheckpointError, match="symlink or not a dir"):
        fluid.io.save_persistables(exe, str(ckpt), main)
    assert os.listdir(outside) == []
    assert sorted(os.listdir(ckpt)) == ["block1"]


def test_a_symlinked_sub_directory_is_never_read_through(tmp_path):
    main, exe, scope, _ = _build()
    outside = tmp_path / "outside"
    with fluid.scope_guard(scope):
        fluid.io.save_persistables(exe, str(outside), main)
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    os.symlink(outside / "block1", ckpt / "block1")
    with fluid.scope_guard(scope), pytest.raises(CheckpointError, match="never follows a link"):
        fluid.io.load_vars(exe, str(ckpt), main, vars=[main.global_block().var(W)])
    # a listing does not descend into it either
    with checkpoint.Reader(str(ckpt)) as r:
        assert r.names() == set()


def test_recovery_does_not_move_files_in_through_a_symlinked_staging_sub_directory(tmp_path):
    """Issue 28 item 1 for nested names: a manifest whose staging entry holds ``block1`` as a
    symlink to a directory outside, with a file whose size and checksum match, is not
    finished: the outside file stays where it is."""
    import hashlib
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "w"
    secret.write_bytes(b"secret")
    ckpt = tmp_path / "ckpt"
    staging = ckpt / ".fluidlite-staging-0123456789abcdef"
    staging.mkdir(parents=True)
    os.symlink(outside, staging / "block1")
    doc = {"format": "fluidlite.checkpoint", "version": 1, "staging": staging.name,
           "files": {"block1/w": {"size": 6, "sha256": hashlib.sha256(b"secret").hexdigest()}}}
    (ckpt / checkpoint.MANIFEST_NAME).write_text(json.dumps(doc))
    checkpoint.publish(str(ckpt), {"other": b"data"})
    assert secret.read_bytes() == b"secret"
    assert not os.path.lexists(ckpt / "block1" / "w")


@pytest.mark.parametrize("bad", ["../x", "a/../../x", "/etc/passwd", "a//b"])
def test_a_manifest_naming_a_path_outside_is_corrupted(tmp_path, bad):
    doc = {"format": "fluidlite.checkpoint", "version": 1, "staging": None,
           "files": {bad: {"size": 1, "sha256": "0" * 64}}}
    (tmp_path / checkpoint.MANIFEST_NAME).write_text(json.dumps(doc))
    with pytest.raises(CheckpointError, match="bad entry"):
        with checkpoint.Reader(str(tmp_path)):
            pass


def test_listing_a_directory_tree_is_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(checkpoint, "_MAX_DEPTH", 3)
    deep = tmp_path.joinpath("a", "b", "c", "d")
    deep.mkdir(parents=True)
    (deep / "w").write_bytes(b"x")
    with checkpoint.Reader(str(tmp_path)) as r, pytest.raises(CheckpointError, match="deep"):
        r.names()


# -- against real Paddle 2.6 ----------------------------------------------------------------
_PADDLE_SCRIPT = textwrap.dedent("""
    import sys, numpy as np, paddle
    paddle.enable_static()
    mode, d = sys.argv[1], sys.argv[2]
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        x = paddle.static.data("x", [-1, 3], "float32")
        y = paddle.static.nn.fc(x, 2, weight_attr=paddle.ParamAttr(name="block1/conv/w"),
                                bias_attr=paddle.ParamAttr(name="block1/b"))
    exe = paddle.static.Executor(paddle.CPUPlace())
    exe.run(startup)
    params = [main.global_block().var(n) for n in ("block1/conv/w", "block1/b")]
    scope = paddle.static.global_scope()
    if mode == "save":
        paddle.static.save_vars(exe, d, main, vars=params)
        for i, p in enumerate(params):
            np.save(f"{d}.{i}.npy", np.array(scope.find_var(p.name).get_tensor()))
    else:
        paddle.static.load_vars(exe, d, main, vars=params)
        for i, p in enumerate(params):
            np.save(f"{d}.{i}.npy", np.array(scope.find_var(p.name).get_tensor()))
""")


def _paddle(mode: str, directory: str) -> None:
    python = os.environ.get("FLUIDLITE_PADDLE_PYTHON")
    if not python:
        pytest.skip("FLUIDLITE_PADDLE_PYTHON is not set (an interpreter with paddlepaddle 2.6)")
    proc = subprocess.run([python, "-c", _PADDLE_SCRIPT, mode, directory], capture_output=True,
                          text=True, timeout=300, env=dict(os.environ, GLOG_minloglevel="2"))
    if proc.returncode != 0 and "No module named 'paddle'" in proc.stderr:
        pytest.skip("FLUIDLITE_PADDLE_PYTHON cannot import paddle")
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_paddle_saved_slash_names_load_in_fluidlite(tmp_path):
    d = str(tmp_path / "vars")
    _paddle("save", d)
    assert os.path.isfile(os.path.join(d, "block1", "conv", "w"))
    main, exe, scope, _ = _build()
    with fluid.scope_guard(scope):
        fluid.io.load_vars(exe, d, main, vars=[main.global_block().var(n) for n in (W, B)])
    for i, n in enumerate((W, B)):
        np.testing.assert_array_equal(_value(scope, n), np.load(f"{d}.{i}.npy"))


def test_fluidlite_saved_slash_names_load_in_paddle(tmp_path):
    d = str(tmp_path / "vars")
    main, exe, scope, _ = _build()
    with fluid.scope_guard(scope):
        fluid.io.save_vars(exe, d, main, vars=[main.global_block().var(n) for n in (W, B)])
    _paddle("load", d)
    for i, n in enumerate((W, B)):
        np.testing.assert_array_equal(np.load(f"{d}.{i}.npy"), _value(scope, n))
