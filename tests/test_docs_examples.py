"""The API reference's examples run, and the names without one do not grow in number.

``docs/check_examples.py`` lists the documented names (``docs/apigen.py``: everything
``docs/api_coverage.md`` marks provided, their documented methods, ``fluidlite.autograd`` and the
inference API) whose docstring has no ``Example:`` section with ``>>>`` lines. CI's docs build
runs the same examples with Sphinx's doctest builder; this test runs them here too, so a broken
example fails the suite without Sphinx installed.
"""
from __future__ import annotations

import importlib.util
import os
import tempfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location(
    "check_examples", os.path.join(ROOT, "docs", "check_examples.py"))
ce = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ce)                                       # type: ignore[union-attr]

# names without an example (a ratchet: lower it when you add examples, never raise it)
MISSING_EXAMPLES_MAX = 0

NAMES = list(ce.unique_objects())
WITH_EXAMPLE = [(n, o) for n, o in NAMES if ce.has_example(o)]


def test_every_documented_name_resolves():
    assert len(NAMES) > 700
    for names in ce.apigen.documented_names().values():
        for n in names:
            assert n.obj is not ce.apigen.ac._MISSING, n.target


def test_names_without_example_do_not_grow():
    lacking = ce.missing()
    assert len(lacking) <= MISSING_EXAMPLES_MAX, (
        f"{len(lacking)} documented names have no example (at most {MISSING_EXAMPLES_MAX}); "
        "add an `Example:` section with a doctest to the new ones: "
        + ", ".join(lacking[:20]))


def test_no_new_name_lacks_a_docstring_section():
    """Args:/Returns:/Raises: sections are a ratchet: only the names and sections recorded in
    docs/sections_allowlist.txt may lack them (the Sphinx build checks the same)."""
    new, stale = ce.section_problems()
    assert not new, ("docstring sections missing (add them; docs/check_examples.py --sections): "
                     + "; ".join(new[:20]))
    assert not stale, ("these sections exist now: remove them from docs/sections_allowlist.txt "
                       "(python docs/check_examples.py --write-allowlist): "
                       + "; ".join(stale[:20]))


@pytest.mark.parametrize("name,obj", WITH_EXAMPLE, ids=[n for n, _ in WITH_EXAMPLE])
def test_example_runs(name, obj, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)          # examples that save files write into a scratch folder
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))    # and so do their mkdtemp()s
    attempted, failed, report = ce.run_examples(name, obj)
    assert attempted > 0, f"{name}: the Example section has no >>> line doctest can run"
    assert failed == 0, report
