"""core/memory.py: glibc malloc tuning applied by the first Executor (never by the import),
idempotent, and switchable off."""
import os
import subprocess
import sys
import textwrap

import pytest

import fluidlite
from fluidlite.core import memory

glibc = memory._glibc() is not None


@pytest.mark.skipif(not glibc, reason="malloc tuning is glibc-only")
def test_tuning_is_applied_by_the_first_executor_and_idempotent():
    fluidlite.Executor()
    assert memory._done is True
    assert memory.tune_malloc() is True and memory.tune_malloc(trim_mb=1) is True


def test_importing_fluidlite_changes_nothing_in_the_process():
    code = "import fluidlite.core.memory as m, fluidlite; print(m._done)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "None"


def _done_in_child(env):
    code = ("import fluidlite.core.memory as m, fluidlite; fluidlite.Executor(); "
            "print(m._done)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ, **env), check=True)
    return out.stdout.strip()


def test_fluidlite_malloc_tuning_0_turns_it_off():
    assert _done_in_child({"FLUIDLITE_MALLOC_TUNING": "0"}) == "False"


@pytest.mark.skipif(not glibc, reason="malloc tuning is glibc-only")
def test_bad_trim_setting_falls_back_to_the_default():
    assert _done_in_child({"FLUIDLITE_MALLOC_TRIM_MB": "lots"}) == "True"


@pytest.mark.skipif(not glibc, reason="malloc tuning is glibc-only")
def test_buffers_above_32_mib_are_recycled_from_the_heap():
    # a 96 MB buffer freed and allocated again: from the heap (no page faults on rewriting
    # it) once the first Executor has tuned malloc; without the tuning, fresh mapped pages
    code = textwrap.dedent("""
        import resource, sys, numpy as np, fluidlite
        if sys.argv[1] == "1":
            fluidlite.Executor()
        a = np.ones(24 << 20, np.float32); del a
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        b = np.ones(24 << 20, np.float32)
        print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    env["FLUIDLITE_MALLOC_TUNING"] = "1"

    def faults(tuned):
        out = subprocess.run([sys.executable, "-c", code, "1" if tuned else "0"],
                             capture_output=True, text=True, env=env, check=True)
        return int(out.stdout.strip())
    tuned, untuned = faults(True), faults(False)
    # untuned: 96 MB of fresh pages, >= 48 faults even with 2 MiB transparent huge pages
    assert tuned <= 8 and untuned >= 40, (tuned, untuned)
