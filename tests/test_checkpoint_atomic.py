"""Crash safety of every save API, measured by killing real saving processes.

``checkpoint_crash_worker.py`` (one interpreter per test; each crashing save is a ``fork()``ed
child) crashes a save right after each of its file operations, and SIGKILLs a 300-variable save
at random instants; these tests check that the directory then loads as exactly the previous or
exactly the new checkpoint, that later saves finish or clean up what a crash left, and that
nothing is left behind.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

WORKER = os.path.join(os.path.dirname(__file__), "checkpoint_crash_worker.py")
APIS = {"save_vars", "save_params", "save_persistables", "save_persistables(filename)",
        "save_inference_model", "save_inference_model(params_filename)", "fluid.save"}

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")]


@pytest.fixture
def scratch(tmp_path):
    """tmpfs when there is one: the protocol needs only POSIX rename semantics, which tmpfs
    has, and the hundreds of crashed saves run several times faster there."""
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
        d = tempfile.mkdtemp(prefix="fluidlite-crash-", dir="/dev/shm")
        yield d
        shutil.rmtree(d, ignore_errors=True)
    else:
        yield str(tmp_path)


def run_worker(*args):
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, WORKER, *map(str, args)], capture_output=True,
                          text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout)


def test_crash_after_every_file_operation_of_every_save_api(scratch):
    report = run_worker("inject", scratch)
    assert set(report) == APIS
    for api, r in report.items():
        outcomes = r["outcomes"]
        assert r["crash_points"] == len(outcomes) >= 10, (api, r)
        assert set(outcomes) <= {"old", "new"}, (api, outcomes)
        # one commit point: exactly the old checkpoint before it, exactly the new one after
        first_new = outcomes.index("new")
        assert 0 < first_new and outcomes == ["old"] * first_new + \
            ["new"] * (len(outcomes) - first_new), (api, outcomes)
        # some crashes hit the publish phase: the reader took the committed files from the
        # staging directory (roll-forward on read)
        assert any(n > 0 for n, o in zip(r["pending"], outcomes) if o == "new"), (api, r)
        assert not any(n > 0 for n, o in zip(r["pending"], outcomes) if o == "old"), (api, r)
        assert r["final"] == "new"
        # a second save crashing at a random point on top: the previous state or its own
        for first, second in r["second"]:
            assert second in (first, "C"), (api, r["second"])
        # a complete save afterwards finishes/cleans everything and loads exactly
        assert r["clean"] == [["D", []]] * len(outcomes), (api, r["clean"])


def test_random_sigkill_during_a_300_variable_save(scratch):
    report = run_worker("kill", scratch, 8, 0.25)
    results = report["results"]
    assert len(results) == 8
    for res in results:
        assert "error" not in res, results
        assert res["uniform"], results                 # every variable from one save
    # the kills landed in different saves, not all before the first one finished
    assert len({tuple(r["steps"]) for r in results}) > 1, results
