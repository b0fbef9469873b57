"""Checkpoint files: the manifest, interrupted publishes, stale staging, concurrent saves, and
files that lie about their size (refused before anything big is allocated)."""
import io
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import tracemalloc
import zipfile
from pathlib import Path

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.formats import checkpoint, serialize
from fluidlite.io import CheckpointError

MANIFEST = ".fluidlite-manifest.json"


def build():
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 2
    with fluid.program_guard(main, startup):
        x = fluid.data(name="x", shape=[-1, 4], dtype="float32")
        pred = fluid.layers.fc(input=x, size=8)
        fluid.optimizer.Adam(0.01).minimize(fluid.layers.mean(pred))
    return main, startup, pred


@pytest.fixture
def model():
    main, startup, pred = build()
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    return main, exe, pred


@pytest.fixture
def scratch(tmp_path):
    """A directory on tmpfs when there is one: locking does not depend on the filesystem, and
    fsync-heavy concurrent saves on a shared disk are slow and noisy."""
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
        d = tempfile.mkdtemp(prefix="fluidlite-concurrent-", dir="/dev/shm")
        yield d
        shutil.rmtree(d, ignore_errors=True)
    else:
        yield str(tmp_path)


def persistables(main):
    return [v.name for v in main.list_vars() if fluid.io.is_persistable(v)]


def set_all(main, value):
    scope = fluid.global_scope()
    for n in persistables(main):
        t = scope.find_var(n).get_tensor()
        t.set(np.full(np.array(t).shape, value, np.array(t).dtype))


def loaded(main, exe, d, **kw):
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        fluid.io.load_persistables(exe, d, main, **kw)
    return {n: np.array(scope.find_var(n).get_tensor()) for n in persistables(main)}


def uniform(values):
    """The single value every array holds (asserts there is one)."""
    seen = {float(v.flat[0]) for v in values.values()} | \
        {float(x) for v in values.values() for x in np.unique(v)}
    assert len(seen) == 1, seen
    return seen.pop()


# -- the manifest and interrupted publishes ---------------------------------------------------
def test_manifest_lists_sizes_and_checksums(tmp_path, model):
    import hashlib
    main, exe, pred = model
    fluid.io.save_persistables(exe, str(tmp_path), main)
    doc = json.loads((tmp_path / MANIFEST).read_text())
    assert doc["format"] == "fluidlite.checkpoint" and doc["version"] == 1
    assert set(doc["files"]) == set(persistables(main))
    for name, entry in doc["files"].items():
        data = (tmp_path / name).read_bytes()
        assert entry == {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    assert not (tmp_path / doc["staging"]).exists()          # published and removed
    # another save into the same directory keeps the older entries
    fluid.save(main, str(tmp_path / "m"))
    files = json.loads((tmp_path / MANIFEST).read_text())["files"]
    assert set(files) == set(persistables(main)) | {"m.pdparams", "m.pdopt", "m.pdmodel"}


def test_a_publish_interrupted_after_its_commit_loads_as_new_and_is_finished(
        tmp_path, model, monkeypatch):
    main, exe, pred = model
    set_all(main, 1.0)
    fluid.io.save_persistables(exe, str(tmp_path), main)
    set_all(main, 2.0)
    real_replace, calls = os.replace, []

    def crash_on_second_replace(src, dst):          # 1st: the manifest (commit); 2nd: a file
        calls.append(dst)
        if len(calls) == 2:
            raise KeyboardInterrupt("killed")
        real_replace(src, dst)
    monkeypatch.setattr(os, "replace", crash_on_second_replace)
    with pytest.raises(KeyboardInterrupt):
        fluid.io.save_persistables(exe, str(tmp_path), main)
    monkeypatch.setattr(os, "replace", real_replace)
    staging = json.loads((tmp_path / MANIFEST).read_text())["staging"]
    assert len(os.listdir(tmp_path / staging)) == len(persistables(main))     # none published
    assert uniform(loaded(main, exe, str(tmp_path))) == 2.0      # readers roll forward
    state = fluid.io.load_program_state(str(tmp_path))
    assert uniform({k: v for k, v in state.items()}) == 2.0
    set_all(main, 3.0)                                  # the next save finishes and cleans up
    fluid.io.save_vars(exe, str(tmp_path), main, vars=["learning_rate_0"])
    assert not (tmp_path / staging).exists()
    values = loaded(main, exe, str(tmp_path))
    assert float(values.pop("learning_rate_0")[0]) == 3.0 and uniform(values) == 2.0


def test_a_failed_save_before_its_commit_changes_nothing(tmp_path, model, monkeypatch):
    main, exe, pred = model
    set_all(main, 1.0)
    fluid.save(main, str(tmp_path / "m"))
    before = {n: (tmp_path / n).read_bytes() for n in os.listdir(tmp_path)
              if not n.startswith(".")}
    set_all(main, 2.0)

    def disk_full(fd, data):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "write", disk_full)
    with pytest.raises(OSError, match="No space"):
        fluid.save(main, str(tmp_path / "m"))
    monkeypatch.undo()
    assert {n: (tmp_path / n).read_bytes() for n in os.listdir(tmp_path)
            if not n.startswith(".")} == before
    assert sorted(os.listdir(tmp_path)) == sorted([MANIFEST, *before])   # staging removed
    state = fluid.io.load_program_state(str(tmp_path / "m"))
    assert uniform(state) == 1.0


def test_stale_staging_of_crashed_saves_is_cleaned_by_the_next_save(tmp_path, model):
    main, exe, pred = model
    fluid.io.save_persistables(exe, str(tmp_path), main)
    litter = [".fluidlite-staging-0123456789abcdef", ".fluidlite-staging-feedfacecafebeef"]
    for d in litter:                                   # what crashed saves leave behind
        os.mkdir(tmp_path / d)
        (tmp_path / d / "fc_0.w_0").write_bytes(b"partial")
    (tmp_path / f"{MANIFEST}.abcd1234.tmp").write_bytes(b"{")
    (tmp_path / ".fc_0.w_0.k2j4h5g6.tmp").write_bytes(b"old atomic_write temp")
    keep = [".user_file", ".unrelated.k2j4h5g6.tmp", "notes.txt"]
    for n in keep:
        (tmp_path / n).write_bytes(b"mine")
    expected = loaded(main, exe, str(tmp_path))        # litter is invisible to readers
    fluid.io.save_persistables(exe, str(tmp_path), main)
    hidden = sorted(n for n in os.listdir(tmp_path) if n.startswith("."))
    assert hidden == sorted([MANIFEST, ".user_file", ".unrelated.k2j4h5g6.tmp"])
    assert (tmp_path / "notes.txt").read_bytes() == b"mine"
    for n, v in loaded(main, exe, str(tmp_path)).items():
        np.testing.assert_array_equal(v, expected[n])


def test_concurrent_saves_from_threads_never_interleave(scratch, model):
    main, exe, pred = model
    names = persistables(main)
    shapes = {n: np.array(fluid.global_scope().find_var(n).get_tensor()).shape for n in names}
    d = scratch
    from fluidlite.io.files import _npy_bytes

    def files(value):
        return {n: _npy_bytes(np.full(shapes[n], value, np.float32)) for n in names}
    checkpoint.publish(d, files(0))
    errors, seen = [], set()

    def writer(k):
        try:
            for i in range(10):
                checkpoint.publish(d, files(100 * k + i))
        except BaseException as e:      # noqa: B036 - reported below
            errors.append(e)

    def reader():
        try:
            while True:              # (at least one read, however fast the writers are)
                seen.add(uniform(fluid.io.load_program_state(d, var_list=names)))
                if not any(t.is_alive() for t in writers):
                    break
                time.sleep(0.002)
        except BaseException as e:      # noqa: B036
            errors.append(e)
    writers = [threading.Thread(target=writer, args=(k,)) for k in (1, 2, 3)]
    threads = writers + [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert uniform(fluid.io.load_program_state(d, var_list=names)) in {109, 209, 309}
    assert seen and seen <= {0} | {100 * k + i for k in (1, 2, 3) for i in range(10)}
    assert sorted(n for n in os.listdir(d) if n.startswith(".")) == [MANIFEST]


def test_concurrent_saves_from_processes_never_interleave(scratch):
    d = Path(scratch) / "ckpt"
    script = textwrap.dedent(f"""
        import sys, numpy as np, fluidlite as fluid
        k = int(sys.argv[1])
        main = fluid.Program()
        for i in range(20):
            main.global_block().create_var(name=f"v{{i}}", shape=[16], dtype="float32",
                                           persistable=True)
        exe = fluid.Executor()
        for step in range(30):
            for i in range(20):
                fluid.global_scope().var(f"v{{i}}").get_tensor().set(
                    np.full(16, 1000 * k + step, np.float32))
            fluid.io.save_persistables(exe, {str(d)!r}, main)
    """)
    procs = [subprocess.Popen([sys.executable, "-c", script, str(k)]) for k in (1, 2)]
    names = [f"v{i}" for i in range(20)]
    seen = set()
    while any(p.poll() is None for p in procs):
        if (d / MANIFEST).exists():
            seen.add(uniform(fluid.io.load_program_state(str(d), var_list=names)))
        time.sleep(0.01)
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    assert uniform(fluid.io.load_program_state(str(d), var_list=names)) in {1029, 2029}
    assert seen <= {1000 * k + i for k in (1, 2) for i in range(30)}
    assert sorted(n for n in os.listdir(d) if n.startswith(".")) == [MANIFEST]


# -- the manifest's own failure modes -------------------------------------------------------------
def test_a_corrupted_manifest_is_reported_and_replaced_by_the_next_save(tmp_path, model, caplog):
    main, exe, pred = model
    fluid.io.save_persistables(exe, str(tmp_path), main)
    (tmp_path / MANIFEST).write_text('{"format": "fluidlite.checkpoint", "version": 1, "fil')
    with pytest.raises(CheckpointError, match=r"manifest .* is corrupted .*Delete it"):
        loaded(main, exe, str(tmp_path))
    (tmp_path / MANIFEST).write_text('{"format": "fluidlite.checkpoint", "version": 7, '
                                     '"files": {}}')
    with pytest.raises(CheckpointError, match="version 7.*Upgrade fluidlite"):
        loaded(main, exe, str(tmp_path))
    fluid.io.save_persistables(exe, str(tmp_path), main)
    assert "no longer verified" in caplog.text
    loaded(main, exe, str(tmp_path))


def test_atomic_write_into_a_checkpoint_keeps_the_manifest_true(tmp_path, model):
    main, exe, pred = model
    fluid.io.save_inference_model(str(tmp_path), ["x"], [pred], exe, main)
    program, _, _ = fluid.io.load_inference_model(str(tmp_path), exe)
    serialize.save_program(program, tmp_path / "__model__")     # rewrites a listed file
    again, _, fetches = fluid.io.load_inference_model(str(tmp_path), exe)
    assert str(again) == str(program) and fetches[0].name == "save_infer_model/scale_0"
    # outside a checkpoint directory it is a plain temp-file write: no manifest appears
    (tmp_path / "plain").mkdir()
    serialize.atomic_write(tmp_path / "plain" / "p.json", b"{}")
    assert os.listdir(tmp_path / "plain") == ["p.json"]


def test_reserved_names_are_refused(tmp_path, model):
    main, exe, pred = model
    main.global_block().create_var(name=MANIFEST, shape=[1], dtype="float32", persistable=True)
    fluid.global_scope().var(MANIFEST).get_tensor().set(np.zeros(1, np.float32))
    with pytest.raises(ValueError, match="reserves"):
        fluid.io.save_vars(exe, str(tmp_path), main, vars=[MANIFEST])
    assert os.listdir(tmp_path) == []
    fluid.io.save_vars(exe, str(tmp_path), main, vars=[MANIFEST], filename="combined")


# -- files that lie: refused before allocating, naming the variable and the file ---------------
@pytest.fixture
def small_memory(monkeypatch):
    """Pretend the machine has 4 MiB, so 'more than the memory' cases are cheap to build."""
    monkeypatch.setattr(checkpoint, "memory_limit", lambda: 4 << 20)


class _Peak:
    """Peak traced allocation (numpy reports its buffers to tracemalloc) in a with-block."""

    def __enter__(self):
        tracemalloc.start()
        return self

    def __exit__(self, *exc):
        self.peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()


def _header(shape, descr="<f4"):
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": descr, "fortran_order": False,
                                               "shape": shape})
    return buf.getvalue()


def test_npy_header_claiming_a_huge_shape(tmp_path, model):
    main, exe, pred = model
    fluid.io.save_params(exe, str(tmp_path), main)
    os.remove(tmp_path / MANIFEST)                      # as if written by another tool
    (tmp_path / "fc_0.w_0").write_bytes(_header((10 ** 12,)) + b"\0" * 64)
    with _Peak() as p, pytest.raises(CheckpointError, match=(
            r"variable 'fc_0.w_0'.*fc_0.w_0' is truncated or corrupted: its header describes "
            r"a float32 array of shape \(1000000000000,\) \(4000000000000 bytes\) but it holds "
            r"64 bytes")):
        fluid.io.load_params(exe, str(tmp_path), main)
    assert p.peak < 1 << 20
    # an honest header whose shape is not the variable's: refused before the data is read
    (tmp_path / "fc_0.w_0").write_bytes(_header((3, 8)) + b"\0" * 96)
    with pytest.raises(CheckpointError, match=r"Shape not matching.*\(4, 8\).*fc_0.w_0.*\(3, 8\)"):
        fluid.io.load_params(exe, str(tmp_path), main)
    (tmp_path / "fc_0.w_0").write_bytes(_header((4, 8), descr="|O") + b"\0" * 256)
    with pytest.raises(CheckpointError, match="'fc_0.w_0'.*dtype object"):
        fluid.io.load_params(exe, str(tmp_path), main)
    (tmp_path / "fc_0.w_0").write_bytes(b"\x93NUMPY\x01\x00\xff\xff" + b"{" * 100)
    with pytest.raises(CheckpointError, match="'fc_0.w_0'.*header claims 65535 bytes"):
        fluid.io.load_params(exe, str(tmp_path), main)


def test_files_larger_than_memory(tmp_path, model, small_memory):
    main, exe, pred = model
    fluid.io.save_params(exe, str(tmp_path), main)
    fluid.save(main, str(tmp_path / "m"))
    os.remove(tmp_path / MANIFEST)
    (tmp_path / "fc_0.b_0").write_bytes(_header((2 << 20,)) + b"\0" * (8 << 20))
    with pytest.raises(CheckpointError, match=r"variable 'fc_0.b_0'.*fc_0.b_0' is 8388736 "
                                              r"bytes, more than this machine's memory"):
        fluid.io.load_params(exe, str(tmp_path), main)
    (tmp_path / "m.pdparams").write_bytes(b"\0" * (5 << 20))
    with pytest.raises(CheckpointError, match=r"m.pdparams' is 5242880 bytes, more than"):
        fluid.load(main, str(tmp_path / "m"), exe)


def test_manifest_entry_checked_before_reading(tmp_path, model):
    main, exe, pred = model
    fluid.io.save_params(exe, str(tmp_path), main)
    doc = json.loads((tmp_path / MANIFEST).read_text())
    doc["files"]["fc_0.w_0"]["size"] = 10 ** 12         # a manifest lying about a size
    (tmp_path / MANIFEST).write_text(json.dumps(doc))
    with _Peak() as p, pytest.raises(CheckpointError, match=(
            r"variable 'fc_0.w_0'.*holds 154 bytes but the checkpoint manifest records "
            r"1000000000000")):
        fluid.io.load_params(exe, str(tmp_path), main)
    assert p.peak < 1 << 20


def _zip_member(path, name, header, data_chunks, compression=zipfile.ZIP_DEFLATED):
    with zipfile.ZipFile(path, "w", compression=compression) as zf:
        with zf.open(name + ".npy", "w", force_zip64=True) as m:
            m.write(header)
            for chunk in data_chunks:
                m.write(chunk)


def test_decompression_bomb_in_a_combined_file(tmp_path, model, small_memory):
    main, exe, pred = model
    combined = tmp_path / "all.npz"
    zeros = b"\0" * (1 << 20)
    # 16 MiB of zeros that compress to ~16 KiB, honestly declared: more than the 'memory'
    _zip_member(combined, "fc_0.w_0", _header((4 << 20,)), [zeros] * 16)
    assert combined.stat().st_size < 100_000
    with _Peak() as p, pytest.raises(CheckpointError, match=(
            r"variable 'fc_0.w_0': its entry in combined file '.*all.npz' claims 16777344 "
            r"bytes uncompressed, more than this machine's memory")):
        fluid.io.load_params(exe, str(tmp_path), main, filename="all.npz")
    assert p.peak < 1 << 20
    with pytest.raises(CheckpointError, match="'fc_0.w_0'.*claims 16777344 bytes"):
        fluid.io.load_program_state(str(combined))


def test_combined_member_whose_header_disagrees_with_the_variable_or_itself(tmp_path, model):
    main, exe, pred = model
    combined = tmp_path / "all.npz"
    _zip_member(combined, "fc_0.w_0", _header((1024, 1024)), [b"\0" * (1 << 20)] * 4)
    with _Peak() as p, pytest.raises(CheckpointError, match=(
            r"Shape not matching.*\(4, 8\).*fc_0.w_0.*\(1024, 1024\) in combined file")):
        fluid.io.load_vars(exe, str(tmp_path), main, vars=["fc_0.w_0"], filename="all.npz")
    assert p.peak < 1 << 20                             # refused before decompressing
    _zip_member(combined, "fc_0.w_0", _header((10 ** 9,)), [b"\0" * 128])
    with pytest.raises(CheckpointError, match=r"'fc_0.w_0'.*shape \(1000000000,\) "
                                              r"\(4000000000 bytes\) but it holds 128 bytes"):
        fluid.io.load_vars(exe, str(tmp_path), main, vars=["fc_0.w_0"], filename="all.npz")


class _Reduce:
    def __init__(self, *reduce):
        self.reduce = reduce

    def __reduce__(self):
        return self.reduce


def _multiarray():
    try:
        from numpy._core import multiarray
    except ImportError:  # numpy < 2
        from numpy.core import multiarray
    return multiarray


@pytest.mark.parametrize("payload, message", [
    (lambda: _Reduce(_multiarray()._reconstruct, (np.ndarray, (10 ** 12,), b"b")),
     r"refusing to start an array of shape \(1000000000000,\)"),
    (lambda: _Reduce(np.ndarray, ((10 ** 12,), "f4")),
     r"refusing to call numpy.ndarray\(\(1000000000000,\), 'f4'\)"),
    (lambda: _Reduce(_multiarray()._reconstruct, (np.ndarray, (0,), b"b"),
                     (1, (10 ** 12,), np.dtype("f4"), False, b"1234")),
     r"claims shape \(1000000000000,\) of float32 \(4000000000000 bytes\) but holds 4 bytes"),
    (lambda: _Reduce(_multiarray()._reconstruct, (np.ndarray, (0,), b"b"),
                     (1, (10 ** 6,), np.dtype("O"), False, [0] * 10)),
     r"refusing to rebuild an array of dtype"),
])
def test_pickle_bombs_in_pdparams(tmp_path, model, payload, message):
    main, exe, pred = model
    fluid.save(main, str(tmp_path / "m"))
    os.remove(tmp_path / MANIFEST)
    with open(tmp_path / "m.pdparams", "wb") as f:
        pickle.dump({"fc_0.w_0": payload()}, f, protocol=2)
    with _Peak() as p, pytest.raises(CheckpointError, match=r"m.pdparams' is corrupted: .*"
                                                           + message):
        fluid.load(main, str(tmp_path / "m"), exe)
    assert p.peak < 1 << 20


def test_real_pickles_still_load(tmp_path, model):
    """fluid's own kind of .pdparams: numpy arrays pickled with protocols 2 and 5."""
    main, exe, pred = model
    fluid.save(main, str(tmp_path / "m"))
    os.remove(tmp_path / MANIFEST)
    state = fluid.io.load_program_state(str(tmp_path / "m"))
    for protocol in (2, 4, 5):
        with open(tmp_path / "m.pdparams", "wb") as f:
            pickle.dump({k: v for k, v in state.items() if k.startswith("fc_")}, f,
                        protocol=protocol)
        got = fluid.io.load_program_state(str(tmp_path / "m"))
        for k, v in got.items():
            np.testing.assert_array_equal(v, state[k])
            assert type(v) is np.ndarray and v.flags.writeable


def test_special_files_are_refused_not_read(tmp_path, model):
    main, exe, pred = model
    fluid.io.save_params(exe, str(tmp_path), main)
    os.remove(tmp_path / "fc_0.w_0")
    os.mkfifo(tmp_path / "fc_0.w_0")                    # reading it would block forever
    with pytest.raises(CheckpointError, match="'fc_0.w_0'.*is not a regular file"):
        fluid.io.load_params(exe, str(tmp_path), main)
    os.remove(tmp_path / "fc_0.w_0")
    os.mkdir(tmp_path / "fc_0.w_0")                     # in the way of a save: nothing written
    before = sorted(os.listdir(tmp_path))
    with pytest.raises(IsADirectoryError, match="fc_0.w_0': a directory of that name"):
        fluid.io.save_params(exe, str(tmp_path), main)
    assert sorted(os.listdir(tmp_path)) == before


def test_files_written_by_numpy_load_as_before(tmp_path, model):
    """No manifest: per-variable np.save files and an np.savez_compressed combined file."""
    main, exe, pred = model
    params = {p.name: np.random.default_rng(0).normal(size=p.shape).astype(np.float32)
              for p in main.all_parameters()}
    for name, value in params.items():
        np.save(tmp_path / "x.npy", value)
        os.replace(tmp_path / "x.npy", tmp_path / name)
    np.savez_compressed(tmp_path / "all.npz", **params)
    for kw in ({}, {"filename": "all.npz"}):
        scope = fluid.Scope()
        with fluid.scope_guard(scope):
            fluid.io.load_params(exe, str(tmp_path), main, **kw)
        for name, value in params.items():
            np.testing.assert_array_equal(np.array(scope.find_var(name).get_tensor()), value)
    state = fluid.io.load_program_state(str(tmp_path / "all.npz"))
    assert state.keys() == params.keys() and all(v.flags.writeable for v in state.values())
    assert not (tmp_path / MANIFEST).exists()           # loading never writes


def test_a_lock_file_where_directories_cannot_be_flocked(scratch, model, monkeypatch):
    """NFS emulates flock with byte-range locks, which fail on a directory opened read-only:
    then saves and loads lock ``.fluidlite-lock`` instead, and still exclude each other."""
    import errno
    import fcntl
    import stat
    real_flock = fcntl.flock

    def nfs_like_flock(fd, op):
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            raise OSError(errno.EBADF, "Bad file descriptor")
        real_flock(fd, op)
    monkeypatch.setattr(fcntl, "flock", nfs_like_flock)
    main, exe, pred = model
    set_all(main, 1.0)
    fluid.io.save_persistables(exe, scratch, main)
    assert os.path.isfile(os.path.join(scratch, ".fluidlite-lock"))
    assert uniform(loaded(main, exe, scratch)) == 1.0
    names = persistables(main)
    errors = []

    def save(value):
        try:
            for _ in range(5):
                checkpoint.publish(scratch, {n: fluid.io.files._npy_bytes(
                    np.full(np.array(fluid.global_scope().find_var(n).get_tensor()).shape,
                            value, np.float32)) for n in names})
        except BaseException as e:      # noqa: B036
            errors.append(e)
    threads = [threading.Thread(target=save, args=(v,)) for v in (5.0, 6.0)]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        uniform(fluid.io.load_program_state(scratch, var_list=names))
    for t in threads:
        t.join()
    assert not errors and uniform(loaded(main, exe, scratch)) in (5.0, 6.0)
