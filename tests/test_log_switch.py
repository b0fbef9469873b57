"""What a user must see is a warning; the rest goes to the ``fluidlite`` logger, silent unless
FLUIDLITE_LOG_LEVEL names a level (fluidlite/_log.py)."""
import subprocess
import sys

import pytest

import fluidlite as fluid


def _stderr(env_level):
    code = ("import logging, fluidlite; logging.getLogger('fluidlite').info('hello-info'); "
            "logging.getLogger('fluidlite').debug('hello-debug')")
    env = {"PATH": "/usr/bin:/bin"}
    if env_level is not None:
        env["FLUIDLITE_LOG_LEVEL"] = env_level
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, check=True).stderr


def test_the_logger_is_silent_by_default_and_one_variable_turns_it_on():
    assert "hello" not in _stderr(None)
    out = _stderr("info")
    assert "INFO fluidlite: hello-info" in out and "hello-debug" not in out
    assert "hello-debug" in _stderr("DEBUG")
    assert "is not a logging level" in _stderr("LOUD")


def test_saving_nothing_warns_the_user(tmp_path):
    main = fluid.Program()
    with pytest.warns(UserWarning, match="no variable in your model"):
        fluid.io.save_persistables(fluid.Executor(), str(tmp_path), main)
