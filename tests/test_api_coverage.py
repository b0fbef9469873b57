"""docs/api_coverage.md is a ratchet over fluid 1.8's public names (docs/fluid18_api.txt).

A row the checked-in table records as provided / deviation must still resolve in fluidlite with
every parameter fluid 1.8 documents; a partial row may not lose more parameters. Names that
became available since the table was generated never fail here (they only make the table stale;
``python docs/api_coverage.py --check`` reports that, and regenerating fixes it).
"""
from __future__ import annotations

import importlib.util
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location("api_coverage",
                                               os.path.join(ROOT, "docs", "api_coverage.py"))
ac = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ac)                                       # type: ignore[union-attr]

ENTRIES = ac.read_list()
RECORDED = ac.read_table()
BY_KEY = {(e.module, e.name): e for e in ENTRIES}


def test_list_is_well_formed():
    keys = [(e.module, e.name) for e in ENTRIES]
    assert len(keys) == len(set(keys)), "duplicate (module, name) rows in fluid18_api.txt"
    assert len(ENTRIES) > 600
    for e in ENTRIES:
        assert e.module == "fluid" or e.module.startswith("fluid."), e
        assert re.fullmatch(r"\w+(\.\w+)?", e.name), e
        assert e.kind in ("function", "class", "module", "method"), e
        if e.kind == "method":
            assert (e.module, e.name.split(".")[0]) in BY_KEY, e
        assert e.source in ("docs", "package"), e
        if e.signature:
            assert e.signature.startswith("(") and e.signature.endswith(")"), e
            assert all(re.fullmatch(r"\w+", p) for p in ac.fluid_params(e.signature)), e
    modules = {e.module for e in ENTRIES}
    for wanted in ("fluid", "fluid.layers", "fluid.io", "fluid.optimizer", "fluid.dygraph",
                   "fluid.initializer", "fluid.regularizer", "fluid.clip", "fluid.metrics",
                   "fluid.nets", "fluid.contrib", "fluid.backward", "fluid.unique_name",
                   "fluid.data_feeder", "fluid.dataset", "fluid.profiler", "fluid.transpiler",
                   "fluid.layers.distributions", "fluid.incubate.fleet.collective"):
        assert wanted in modules, wanted
    # fluid 1.8 documented 350 names under fluid.layers and 50 at the top level
    assert sum(e.module == "fluid.layers" and e.source == "docs" and e.kind != "method"
               for e in ENTRIES) == 350
    assert sum(e.module == "fluid" and e.source == "docs" and e.kind != "method"
               for e in ENTRIES) == 50
    assert sum(e.kind == "method" for e in ENTRIES) > 200


def test_table_lists_exactly_the_names_of_the_list():
    recorded = {(r.module, r.name) for r in RECORDED}
    assert len(recorded) == len(RECORDED)
    assert recorded == set(BY_KEY), "regenerate: python docs/api_coverage.py"


def test_table_counts_match_its_rows():
    with open(ac.TABLE_FILE, encoding="utf-8") as f:
        text = f.read()
    for module, c in ac.counts([_as_row(r) for r in RECORDED]).items():
        line = f"| `{module}` | " + " | ".join(str(c[s]) for s in ac.STATUSES)
        assert line in text, line


def _as_row(r):
    return ac.Row(BY_KEY[(r.module, r.name)], r.status, r.lacking, "")


@pytest.mark.parametrize("rec", [r for r in RECORDED if r.status != "missing"],
                         ids=lambda r: f"{r.module}.{r.name}")
def test_recorded_names_still_provided(rec):
    entry = BY_KEY[(rec.module, rec.name)]
    obj = ac.resolve(entry.module, entry.name)
    assert obj is not ac._MISSING, (
        f"{entry.module}.{entry.name} is recorded as {rec.status} in docs/api_coverage.md "
        f"but fluidlite no longer provides it")
    lacking = set(ac.lacking_params(entry, obj))
    lost = lacking - set(rec.lacking)
    assert not lost, (f"{entry.module}.{entry.name}{entry.signature}: fluidlite's signature "
                      f"lost the parameter(s) {sorted(lost)}")


def test_deviation_links_point_at_compatibility_sections():
    text = open(os.path.join(ROOT, "docs", "compatibility.md"), encoding="utf-8").read()
    anchors = {ac.anchor(h) for h in re.findall(r"^## (.+)$", text, flags=re.M)}
    for (module, name), (_, section) in ac.DEVIATIONS.items():
        assert ac.anchor(section) in anchors, (module, name, section)
        assert (module, name) in BY_KEY, (module, name)


def test_fluid_params_parses_documented_signatures():
    assert ac.fluid_params("(input, size, num_flatten_dims=1, act=None, name=None)") == [
        "input", "size", "num_flatten_dims", "act", "name"]
    assert ac.fluid_params("(self, x, *, name=None)") == ["x", "name"]
    assert ac.fluid_params("") == []


def test_evaluate_statuses():
    e = ac.Entry("fluid.layers", "fc", "function", "(input, size, not_a_param=None)", "docs")
    row = ac.evaluate(e)
    assert row.status == "partial" and row.lacking == ("not_a_param",)
    gone = ac.evaluate(ac.Entry("fluid.layers", "no_such_layer_xyz", "function", "", "docs"))
    assert gone.status == "missing" and "issue 16" in gone.note
    cf = ac.evaluate(ac.Entry("fluid.layers", "StaticRNN_xyz", "class", "", "docs"))
    assert cf.status == "missing"
    assert ac.reason("fluid.layers", "While") == ac.ISSUE_14
    assert ac.reason("fluid.io", "PyReader") == ac.ISSUE_15
    assert ac.reason("fluid.dygraph", "Linear") == ac.ISSUE_12


def test_render_round_trips_through_read_table(tmp_path):
    rows = ac.evaluate_all(ENTRIES[:80])
    path = tmp_path / "cov.md"
    path.write_text(ac.render(rows), encoding="utf-8")
    back = {(r.module, r.name): (r.status, r.lacking) for r in ac.read_table(str(path))}
    assert back == {(r.entry.module, r.entry.name): (r.status, r.lacking) for r in rows}


def test_rev_evaluates_the_committed_tree(capfd):
    """``--rev HEAD`` imports fluidlite from ``git archive HEAD`` (not the shared work tree)."""
    import shutil
    import subprocess
    if shutil.which("git") is None or subprocess.run(
            ["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True).returncode != 0:
        pytest.skip("not a git checkout")
    assert ac.main(["--rev", "HEAD", "--summary"]) == 0
    out = capfd.readouterr().out
    assert re.search(r"^fluid\.layers\s+provided=\d+ deviation=\d+ partial=\d+ missing=\d+$",
                     out, flags=re.M), out
