"""The executor package's structure (issue 27): no import cycle inside it, no import of the layers
above it (``fluidlite.dataset``, ``fluidlite.distributed``), no function over 80 lines, and no op
type tested by name -- what the executor knows of an op is declared on the op's class."""
from __future__ import annotations

import ast
import pathlib
import re
from typing import Dict, Set

import fluidlite
from fluidlite.core import registry
from fluidlite.ops.inplace import Update

PKG = pathlib.Path(fluidlite.__file__).parent
EXECUTOR = PKG / "executor"


def _module(path: pathlib.Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: pathlib.Path, modules: Set[str]) -> Set[str]:
    """Every fluidlite module ``path`` imports, at module level or inside functions; imports
    under ``if TYPE_CHECKING:`` do not count."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = {id(n) for node in ast.walk(tree)
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            for sub in node.body for n in ast.walk(sub)}
    me = _module(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    found: Set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                       for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in modules:
                t = t.rpartition(".")[0]
            if t and t != me:
                found.add(t)
    return found


def _graph() -> Dict[str, Set[str]]:
    modules = {_module(p) for p in PKG.rglob("*.py")}
    return {_module(p): _imports(p, modules) for p in EXECUTOR.rglob("*.py")}


def test_no_import_cycle_inside_the_executor():
    graph = _graph()

    def reaches(a: str, b: str) -> bool:
        seen, todo = set(), [a]
        while todo:
            m = todo.pop()
            for t in graph.get(m, ()):
                if t == b:
                    return True
                if t in graph and t not in seen:
                    seen.add(t)
                    todo.append(t)
        return False

    cyclic = sorted(f"{a} -> {b}" for a, ts in graph.items() for b in ts
                    if b in graph and reaches(b, a))
    assert not cyclic, cyclic


def test_the_executor_imports_nothing_above_it():
    allowed = ("fluidlite.core", "fluidlite.ops", "fluidlite.executor", "fluidlite.profiler",
               "fluidlite._log")
    bad = sorted(f"{a} -> {t}" for a, ts in _graph().items() for t in ts
                 if not t.startswith(allowed))
    assert not bad, bad


def test_no_function_over_80_lines():
    long = []
    for path in sorted(EXECUTOR.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if ast.get_docstring(node, clean=False) is not None:   # documentation, not
                    n -= node.body[0].end_lineno - node.body[0].lineno + 1  # steps (issue 33)
                if n > 80:
                    long.append(f"{path.relative_to(PKG)}:{node.lineno} {node.name} ({n})")
    assert not long, long


def test_no_op_type_is_tested_by_name():
    pattern = re.compile(r"op\.type ==|\.type in|_SKIP_OPS|_FOLDABLE")
    hits = [f"{p.relative_to(PKG)}:{i}: {line.strip()}"
            for p in sorted(EXECUTOR.rglob("*.py"))
            for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
            if pattern.search(line)]
    assert not hits, hits


def _declaring(attr: str) -> Set[str]:
    return {t for t in registry.all_op_types() if getattr(registry.get_op_def(t), attr, False)}


def test_the_executor_reads_declared_op_properties():
    assert _declaring("plan_skip") == {"feed", "fetch"}
    assert _declaring("foldable") == {"fill_constant", "assign_value", "fill"}
    assert _declaring("infallible") == {"scale", "increment", "select_input"}
    blocks = {t: registry.get_op_def(t) for t in _declaring("sub_block_op")}
    assert {t for t, d in blocks.items() if d.block_backward} == {"while_grad",
                                                              "conditional_block_grad"}
    assert {t for t, d in blocks.items() if d.block_loops} == {"while", "while_grad"}
    for t, d in blocks.items():      # every slot an op declares is one of its slots
        slots = {s.name for s in d.in_slots + d.out_slots}
        for attr in ("condition_slot", "block_inputs_slot", "records_slot"):
            assert not getattr(d, attr) or getattr(d, attr) in slots, (t, attr)
    updates = {t for t in registry.all_op_types()
               if isinstance(registry.get_op_def(t), Update)
               and type(registry.get_op_def(t)).update_in_place is not Update.update_in_place}
    assert updates == {"sgd", "momentum", "lars_momentum", "adam", "adamax", "adagrad",
                       "decayed_adagrad", "adadelta", "rmsprop", "ftrl", "lamb"}
    for t in updates:               # what the fused group reads of each update op
        d = registry.get_op_def(t)
        slots = {s.name for s in d.in_slots}
        assert "Param" in slots and "Grad" in slots, t
        assert all(s in slots for _, s in d.in_place_needs), t
        assert all(count >= 1 for _, count, _ in d.in_place_scratch), t
