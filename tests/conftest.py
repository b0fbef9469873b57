"""Every test starts from fresh default programs, a fresh global scope and fresh name counters."""
import os

import pytest

# every plan compiled under test checks each kernel output against its declared dtype
# (executor/plan.py CHECK_DTYPES): a kernel drifting on NumPy 1.x or 2.x fails loudly
os.environ.setdefault("FLUIDLITE_CHECK_DTYPES", "1")

import fluidlite as fluid
from fluidlite.core import ir, names, scope


@pytest.fixture(autouse=True, scope="session")
def samples_write_to_tmp(tmp_path_factory):
    """A sample run by a test writes its files (docs/guides/samples.md: --out, else
    $FLUIDLITE_SAMPLES_OUT, else ./samples_out) into pytest's temporary folder."""
    old = os.environ.get("FLUIDLITE_SAMPLES_OUT")
    os.environ["FLUIDLITE_SAMPLES_OUT"] = str(tmp_path_factory.mktemp("samples_out"))
    yield
    if old is None:
        del os.environ["FLUIDLITE_SAMPLES_OUT"]
    else:
        os.environ["FLUIDLITE_SAMPLES_OUT"] = old


@pytest.fixture(autouse=True)
def fresh_state():
    main, startup = fluid.Program(), fluid.Program()
    old_main = ir.switch_main_program(main)
    old_startup = ir.switch_startup_program(startup)
    old_scope = scope._switch_scope(fluid.Scope())
    names.reset_name_scope()
    with fluid.unique_name.guard():
        yield
    ir.switch_main_program(old_main)
    ir.switch_startup_program(old_startup)
    scope._switch_scope(old_scope)
