"""The package's import graph: no cycle, no upward edge between the declared layers.

Every ``import`` / ``from ... import`` of a ``fluidlite`` module counts, at module level and inside
functions alike (an import deferred into a function is still a dependency: it only hides the
cycle until run time). Imports under ``if TYPE_CHECKING:`` are annotations, not dependencies, and
do not count. ``from pkg import name`` is an edge to ``pkg.name`` when that is a module, else to
``pkg`` (its ``__init__``).

The layers, lowest first (docs/architecture.md, "Layout"): a module may import its own layer and the layers
below, never one above.
"""
from __future__ import annotations

import ast
import pathlib
import re
from typing import Dict, Iterator, List, Optional, Set, Tuple

import fluidlite

PKG = pathlib.Path(fluidlite.__file__).parent

# (pattern over the dotted module name, layer); the first match decides
LAYERS: List[Tuple[str, int, str]] = [
    (r"fluidlite\._log$|fluidlite\.core(\.|$)", 0, "core: IR, op contract, rewrite verbs"),
    (r"fluidlite\.formats(\.|$)", 1, "formats: JSON, Paddle protobuf/tensors, checkpoints"),
    (r"fluidlite\.ops(\.|$)", 2, "ops: op definitions (shape, kernel, gradient)"),
    (r"fluidlite\.(executor|profiler|op)(\.|$)", 3, "executor: plans, fusion, profiling"),
    (r"fluidlite\.(backward|clip|regularizer|optimizer|initializer|param_attr|framework"
     r"|unique_name|average|amp|transpiler|distributed|compiler|layer_helper)(\.|$)",
     4, "passes: backward, clip, regularization, optimizers, parallelism"),
    (r"fluidlite\.(layers|nets|input|pipeline|reader|dataset|data_feeder|data_feed_desc"
     r"|lod_tensor|io|metrics|evaluator|wrapped_decorator|install_check)(\.|$)",
     5, "layers: fluid.layers, the data pipeline, fluid.io, metrics"),
    # fluid.contrib: mixed precision (a decorator over the optimizers) and contrib.layers (RNN
    # units as dygraph Layers and static layers): it builds on both the layers and dygraph
    (r"fluidlite\.(dygraph|autograd|nn|incubate|contrib)(\.|$)", 6,
     "front-ends: dygraph, autograd, contrib"),
    (r"fluidlite\.(viz|onnx|cli|convert|debugger|net_drawer|testing|inference|paddle_compat"
     r"|__main__)(\.|$)|fluidlite$",
     7, "tools: viewers, exporters, the CLI, the package root"),
]


def layer_of(module: str) -> Optional[int]:
    for pattern, layer, _ in LAYERS:
        if re.match(pattern, module):
            return layer
    return None


def _modules() -> Dict[str, pathlib.Path]:
    out = {}
    for path in PKG.rglob("*.py"):
        parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _type_checking_nodes(tree: ast.AST) -> Set[int]:
    """ids of the import nodes inside ``if TYPE_CHECKING:`` blocks."""
    skip: Set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for sub in node.body:
                skip.update(id(n) for n in ast.walk(sub))
    return skip


def _imported(module: str, path: pathlib.Path, modules: Dict[str, pathlib.Path]) -> Iterator[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _type_checking_nodes(tree)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in modules else mod
                       for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in modules:           # a name inside a module: the module
                t = t.rpartition(".")[0]
            if t and t != module:
                yield t


def import_graph() -> Dict[str, Set[str]]:
    modules = _modules()
    return {m: set(_imported(m, p, modules)) for m, p in modules.items()}


def cycles(graph: Dict[str, Set[str]]) -> List[List[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    found: List[List[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    comp.append(m)
                    if m == node:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def test_there_is_no_import_cycle():
    graph = import_graph()
    found = cycles(graph)
    detail = []
    for comp in found:
        members = set(comp)
        detail.append("  " + " <-> ".join(comp) + "\n    edges: " + ", ".join(
            f"{a} -> {b}" for a in comp for b in sorted(graph[a] & members)))
    assert not found, f"{len(found)} import cycle(s):\n" + "\n".join(detail)


def test_every_module_has_a_layer():
    unplaced = [m for m in import_graph() if layer_of(m) is None]
    assert not unplaced, f"modules in no declared layer (add them to LAYERS): {unplaced}"


def test_no_module_imports_a_layer_above_its_own():
    names = {layer: text for _, layer, text in LAYERS}
    upward = []
    for module, targets in sorted(import_graph().items()):
        mine = layer_of(module)
        for t in sorted(targets):
            theirs = layer_of(t)
            if mine is not None and theirs is not None and theirs > mine:
                upward.append(f"  {module} ({names[mine].split(':')[0]}) imports {t} "
                              f"({names[theirs].split(':')[0]})")
    assert not upward, f"{len(upward)} upward import(s):\n" + "\n".join(upward)


def test_the_scanner_sees_lazy_imports_and_skips_type_checking(tmp_path):
    src = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import X\n"
           "def f():\n    from .c import y\n")
    path = tmp_path / "a.py"
    path.write_text(src)
    modules = {"p.a": path, "p.b": path, "p.c": path}
    assert set(_imported("p.a", path, modules)) == {"p.c"}
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


MAX_FUNCTION_LINES = 80


def test_no_function_is_longer_than_80_lines():
    """Long functions are split into named steps (docs/architecture.md, "Layout"): a reader follows one step
    at a time. The docstring does not count: issue 33 asks every public name for Args,
    Returns, Raises and a runnable Example, which is documentation, not steps to follow."""
    long = []
    for path in sorted(PKG.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if ast.get_docstring(node, clean=False) is not None:
                    doc = node.body[0]
                    n -= doc.end_lineno - doc.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long.append(f"  {path.relative_to(PKG.parent)}:{node.lineno} "
                                f"{node.name} ({n} lines)")
    assert not long, "functions over 80 lines:\n" + "\n".join(long)
