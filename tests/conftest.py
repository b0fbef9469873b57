"""Every test starts from fresh default programs, a fresh global scope and fresh name counters."""
import os

import pytest

# every plan compiled under test checks each kernel output against its declared dtype
# (executor/plan.py CHECK_DTYPES): a kernel drifting on NumPy 1.x or 2.x fails loudly
os.environ.setdefault("FLUIDLITE_CHECK_DTYPES", "1")

import fluidlite as fluid
from fluidlite.core import ir, names, scope


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
