"""The names the API reference documents, and the reST pages that document them.

The reference covers every name ``docs/api_coverage.md`` marks provided, deviation or partial
(fluid 1.8's documented names that fluidlite has), grouped by fluid module, plus fluidlite's own
front doors: ``fluidlite.autograd`` and the inference API (``fluid.core.AnalysisConfig`` ...).
``docs/conf.py`` calls :func:`write_pages` when Sphinx starts; ``docs/check_examples.py`` and
``tests/test_docs_examples.py`` use :func:`documented_names` to find docstrings without an
example.

A name bound to the same object as an earlier one (``SGDOptimizer`` and ``SGD``) is written as
an alias pointing at the first, so each docstring and its example appear (and run) once.
"""
from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
from collections import OrderedDict
from typing import Any, Dict, List, NamedTuple, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
API_DIR = os.path.join(HERE, "api")

_spec = importlib.util.spec_from_file_location("api_coverage",
                                               os.path.join(HERE, "api_coverage.py"))
ac = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ac)                                       # type: ignore[union-attr]

# fluidlite modules documented in full (their __all__), beyond fluid 1.8's list
EXTRA_MODULES: Tuple[Tuple[str, str], ...] = (
    ("fluidlite.autograd", "Functional gradients (fluidlite.autograd)"),
    ("fluidlite.inference", "Inference API (fluid.core.AnalysisConfig, ...)"),
)
# fluidlite.inference's __all__ entries that are tables, not API
_SKIP = {("fluidlite.inference", "PASSES"), ("fluidlite.inference", "DEFAULT_PASSES")}


class Name(NamedTuple):
    page: str            # the page's module, e.g. "fluid.layers" or "fluidlite.autograd"
    name: str            # "fc", "Executor"
    target: str          # the dotted path autodoc imports: "fluidlite.layers.fc"
    kind: str            # "function", "class", "module" or "data"
    members: Tuple[str, ...]   # documented methods of a class
    obj: Any


def _fluidlite_path(module: str) -> str:
    return "fluidlite" + module[len("fluid"):]


def _kind(obj: Any) -> str:
    if inspect.ismodule(obj):
        return "module"
    if inspect.isclass(obj):
        return "class"
    if callable(obj):
        return "function"
    return "data"


def documented_names() -> "OrderedDict[str, List[Name]]":
    """Page module -> the names documented there, in the coverage table's order."""
    recorded = {(r.module, r.name): r.status for r in ac.read_table()}
    entries = [e for e in ac.read_list() if recorded.get((e.module, e.name), "missing")
               != "missing"]
    methods: Dict[Tuple[str, str], List[str]] = {}
    for e in entries:
        if e.kind == "method":
            cls, meth = e.name.split(".", 1)
            methods.setdefault((e.module, cls), []).append(meth)
    pages: "OrderedDict[str, List[Name]]" = OrderedDict()
    for e in sorted((e for e in entries if e.kind != "method"), key=lambda e: e.module):
        obj = ac.resolve(e.module, e.name)
        target = f"{_fluidlite_path(e.module)}.{e.name}"
        pages.setdefault(e.module, []).append(
            Name(e.module, e.name, target, _kind(obj),
                 tuple(methods.get((e.module, e.name), ())), obj))
    for module, _title in EXTRA_MODULES:
        mod = importlib.import_module(module)
        for name in mod.__all__:
            if (module, name) in _SKIP:
                continue
            obj = getattr(mod, name)
            pages.setdefault(module, []).append(
                Name(module, name, f"{module}.{name}", _kind(obj), (), obj))
    return pages


def _title(module: str) -> str:
    for mod, title in EXTRA_MODULES:
        if mod == module:
            return title
    return f"``{module}``"


def _render(module: str, names: List[Name], first: Dict[int, str]) -> str:
    title = _title(module)
    lines = [title, "=" * len(title), ""]
    if module == "fluid" or module.startswith("fluid."):
        lines += [f"fluid 1.8's ``{module}`` names, reached in fluidlite as "
                  f"``{_fluidlite_path(module).replace('fluidlite', 'fluid', 1)}`` after "
                  "``import fluidlite as fluid``.", ""]
    for n in names:
        key = id(n.obj)
        if n.kind in ("function", "class") and key in first and first[key] != n.target:
            lines += [f".. py:data:: {n.target}", "",
                      f"   Alias of :py:obj:`{first[key]}`.", ""]
            continue
        first.setdefault(key, n.target)
        if n.kind == "class":
            lines.append(f".. autoclass:: {n.target}")
            if n.members:
                lines.append(f"   :members: {', '.join(n.members)}")
        elif n.kind == "function":
            lines.append(f".. autofunction:: {n.target}")
        elif n.kind == "module":
            lines += [f".. py:module:: {n.target}", "",
                      f"   The ``{n.name}`` module (see the names below).", ""]
            continue
        else:
            lines.append(f".. autodata:: {n.target}")
            lines.append("   :no-value:")
        lines.append("")
    return "\n".join(lines) + "\n"


def page_file(module: str) -> str:
    return module.replace("fluidlite.", "fluidlite_") + ".rst"


def write_pages(out_dir: str = API_DIR) -> List[str]:
    """Write one reST page per module into ``out_dir`` (only files whose text changed, so
    Sphinx rebuilds incrementally) and an ``index.rst`` listing them; return the page names."""
    os.makedirs(out_dir, exist_ok=True)
    pages = documented_names()
    first: Dict[int, str] = {}
    written = []
    for module, names in pages.items():
        fname = page_file(module)
        _write_if_changed(os.path.join(out_dir, fname), _render(module, names, first))
        written.append(fname[:-4])
    index = ["API reference", "=============", "",
             "Every fluid 1.8 name fluidlite provides (``docs/api_coverage.md``), by module, "
             "and fluidlite's own functional-gradient and inference APIs.", "",
             ".. toctree::", "   :maxdepth: 1", ""] + [f"   {w}" for w in written]
    _write_if_changed(os.path.join(out_dir, "index.rst"), "\n".join(index) + "\n")
    _write_if_changed(os.path.join(out_dir, "missing.md.txt"), missing_page())
    return written


def missing_page() -> str:
    """Markdown listing fluid 1.8's names fluidlite lacks, with the reasons: the rows
    ``docs/api_coverage.md`` marks missing or partial, and the sub-module paths of
    ``docs/fluid18_modules.txt`` that do not resolve."""
    entries = {(e.module, e.name): e for e in ac.read_list()}
    lines = ["| module | name | status | why |", "|---|---|---|---|"]
    for r in ac.read_table():
        if r.status == "missing":
            why = ac.reason(r.module, r.name)
        elif r.status == "partial":
            why = "not accepted: " + ", ".join(f"`{p}`" for p in r.lacking)
        else:
            continue
        if entries.get((r.module, r.name)) is not None:
            lines.append(f"| `{r.module}` | `{r.name}` | {r.status} | {ac._cell(why)} |")
    paths = ["| module | name | why |", "|---|---|---|"]
    for module, name, why in ac.read_module_path_table():
        paths.append(f"| `{module}` | `{name}` | {ac._cell(why)} |")
    return ("## Names fluid 1.8 documents that are missing or partial\n\n"
            + "\n".join(lines) + "\n\n## Sub-module paths that do not resolve\n\n"
            "A script importing these names from the module that defined them in fluid 1.8 "
            "fails (most are reachable under their public path):\n\n"
            + "\n".join(paths) + "\n")


def _write_if_changed(path: str, text: str) -> None:
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            if f.read() == text:
                return
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
