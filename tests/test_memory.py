"""core/memory.py: glibc malloc tuning applied by the first Executor (never by the import),
idempotent, and switchable off."""
import os
import subprocess
import sys

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
