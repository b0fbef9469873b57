"""Rebuild ``docs/fluid18_modules.txt``: the public names of fluid 1.8's sub-modules.

This is a one-off maintenance tool, not used by the tests: the list it writes is checked in.
fluid 1.x scripts import names from the module fluid 1.8 defined them in
(``from paddle.fluid.layers.control_flow import StaticRNN``, ``fluid.layers.nn.cos_sim``,
``paddle.fluid.layers.utils.flatten``); ``docs/fluid18_api.txt`` only lists the documented
re-exports (``fluid.layers.*``). Given fluid 1.8's Python sources -- a checkout of the
PaddlePaddle/Paddle repository at branch ``release/1.8`` (the folder holding
``python/paddle/fluid``) or an unpacked paddlepaddle 1.8.x wheel (the folder holding
``paddle/fluid``) -- it prints one ``module<TAB>name`` row per public name::

    python docs/fluid18_modules_extract.py /path/to/Paddle > docs/fluid18_modules.txt

(The checked-in list was read from the paddlepaddle 1.8.5 wheel -- ``pip download
paddlepaddle==1.8.5 --no-deps --only-binary=:all: --python-version 37 --platform
manylinux1_x86_64`` and unzip it -- whose ``paddle/version.py`` names its release/1.8 commit;
the header records it.)

A module's public names are its ``__all__`` (evaluated statically from the source: list
literals, ``+`` / ``+=``, module-level list variables and ``other_module.__all__``); for a module
without ``__all__`` (``layers/utils.py``, ``layer_helper.py``, ...) they are its top-level
functions and classes whose names do not start with ``_``. Only names are recorded; nothing is
imported or executed.
"""
from __future__ import annotations

import argparse
import ast
import os
import sys
from typing import Dict, List, Optional, Sequence, Tuple

# the modules users import names from, relative to paddle.fluid. fluid.layers and the top-level
# modules that docs/fluid18_api.txt already covers (fluid.io, fluid.optimizer, ...) are left
# out; fluid.contrib.layers is kept because scripts spell fluid.contrib.layers.basic_lstm.
MODULES: Tuple[str, ...] = (
    "layers.nn", "layers.tensor", "layers.control_flow", "layers.io", "layers.ops",
    "layers.utils", "layers.learning_rate_scheduler", "layers.detection", "layers.sequence_lod",
    "layers.rnn", "layers.loss", "layers.metric_op", "layers.math_op_patch", "layers.device",
    "layers.collective", "layers.distributions", "layers.layer_function_generator",
    "evaluator", "wrapped_decorator",
    "contrib.layers", "contrib.layers.nn", "contrib.layers.rnn_impl", "contrib.layers.metric_op",
    # top-level modules with no row in docs/fluid18_api.txt
    "annotations", "average", "communicator", "compiler", "data", "data_feed_desc",
    "default_scope_funcs", "device_worker", "framework", "input", "install_check",
    "lod_tensor", "log_helper", "parallel_executor", "param_attr", "reader", "trainer_desc",
    "trainer_factory", "layer_helper", "debugger", "net_drawer",
)

HEADER = """\
# fluid 1.8's sub-module public names: module<TAB>name (fluidlite path: fluid -> fluidlite).
# Source: PaddlePaddle/Paddle release/1.8, python/paddle/fluid/
# (read from {source}).
# A module's names are its __all__; for a module without __all__, its public top-level
# functions and classes.
# Modules with no public name: {empty}.
# Regenerate with: python docs/fluid18_modules_extract.py PADDLE_CHECKOUT > THIS_FILE
# docs/api_coverage.md ("Sub-module paths") lists the pairs fluidlite does not provide.
"""

class Extractor:
    """Evaluates ``__all__`` statically over a tree of Python sources rooted at ``paddle``."""

    def __init__(self, paddle_root: str):
        self.root = paddle_root                      # the folder named 'paddle'
        self._cache: Dict[str, List[str]] = {}

    def path_of(self, dotted: str) -> str:
        """'paddle.fluid.layers.nn' -> its .py file (a package's __init__.py)."""
        rel = os.path.join(*dotted.split(".")[1:]) if "." in dotted else ""
        base = os.path.join(self.root, rel)
        if os.path.isdir(base):
            return os.path.join(base, "__init__.py")
        return base + ".py"

    def public_names(self, dotted: str) -> List[str]:
        if dotted not in self._cache:
            self._cache[dotted] = self._extract(dotted)
        return self._cache[dotted]

    def _extract(self, dotted: str) -> List[str]:
        path = self.path_of(dotted)
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), filename=path)
        is_package = path.endswith("__init__.py")
        package = dotted if is_package else dotted.rpartition(".")[0]
        lists: Dict[str, List[str]] = {}       # module-level list variables seen so far
        imports: Dict[str, str] = {}           # local name -> dotted module it is bound to
        names: Optional[List[str]] = None
        for node in tree.body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                imports.update(self._bindings(node, package))
                continue
            target, value, augmented = _assignment(node)
            if target is None:
                continue
            got = self._eval(value, lists, imports, package)
            if got is None:
                continue
            if target == "__all__":
                names = (names or []) + got if augmented else list(got)
            elif augmented:
                lists[target] = lists.get(target, []) + got
            else:
                lists[target] = list(got)
        if names is None:
            names = [n.name for n in tree.body
                     if isinstance(n, (ast.FunctionDef, ast.ClassDef))
                     and not n.name.startswith("_")]
        seen: List[str] = []
        for n in names:                    # __all__ may list a name twice; keep it once
            if n not in seen:
                seen.append(n)
        return seen

    def _bindings(self, node: ast.AST, package: str) -> Dict[str, str]:
        out: Dict[str, str] = {}
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    out[a.asname] = a.name
                else:
                    out[a.name.split(".")[0]] = a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1])
                mod = f"{base}.{node.module}" if node.module else base
            else:
                mod = node.module or ""
            for a in node.names:
                if a.name != "*":
                    out[a.asname or a.name] = f"{mod}.{a.name}"
        return out

    def _eval(self, value: ast.AST, lists: Dict[str, List[str]], imports: Dict[str, str],
              package: str) -> Optional[List[str]]:
        """The list of strings ``value`` evaluates to, or None when it is not such a list."""
        if isinstance(value, (ast.List, ast.Tuple)):
            if all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in value.elts):
                return [e.value for e in value.elts]
            return None
        if isinstance(value, ast.BinOp) and isinstance(value.op, ast.Add):
            left = self._eval(value.left, lists, imports, package)
            right = self._eval(value.right, lists, imports, package)
            return None if left is None or right is None else left + right
        if isinstance(value, ast.Name):
            return lists.get(value.id)
        if isinstance(value, ast.Attribute) and value.attr == "__all__":
            dotted = _dotted(value.value)
            if dotted is None:
                return None
            head, _, rest = dotted.partition(".")
            if head in imports:
                module = imports[head] + (f".{rest}" if rest else "")
            else:                    # a sibling module bound by 'from .x import *'
                module = f"{package}.{dotted}"
            if os.path.exists(self.path_of(module)):
                return list(self.public_names(module))
        return None


def _assignment(node: ast.AST) -> Tuple[Optional[str], Optional[ast.AST], bool]:
    if isinstance(node, ast.Assign) and len(node.targets) == 1 \
            and isinstance(node.targets[0], ast.Name):
        return node.targets[0].id, node.value, False
    if isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add) \
            and isinstance(node.target, ast.Name):
        return node.target.id, node.value, True
    return None, None, False


def _dotted(node: ast.AST) -> Optional[str]:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return None if head is None else f"{head}.{node.attr}"
    return None


def paddle_root(checkout: str) -> str:
    """The 'paddle' package folder of a Paddle checkout or of an unpacked wheel."""
    for candidate in (os.path.join(checkout, "python", "paddle"),
                      os.path.join(checkout, "paddle"), checkout):
        if os.path.isfile(os.path.join(candidate, "fluid", "__init__.py")):
            return candidate
    raise SystemExit(f"{checkout}: no python/paddle/fluid or paddle/fluid folder here")


def rows(checkout: str, modules: Optional[Sequence[str]] = None) -> List[Tuple[str, str]]:
    """Sorted (fluid module, name) pairs of ``modules`` (default ``MODULES``) in the Paddle
    tree at ``checkout``."""
    ex = Extractor(paddle_root(checkout))
    out = {(f"fluid.{m}", name) for m in (MODULES if modules is None else modules)
           for name in ex.public_names(f"paddle.fluid.{m}")}
    return sorted(out)


def source_note(checkout: str) -> str:
    """Which Paddle the names come from: the version and commit a built package records in
    paddle/version.py, else 'a checkout'."""
    path = os.path.join(paddle_root(checkout), "version.py")
    if not os.path.isfile(path):
        return "a checkout"
    found: Dict[str, str] = {}
    with open(path, encoding="utf-8") as f:
        for node in ast.parse(f.read()).body:
            target, value, _ = _assignment(node)
            if target in ("full_version", "commit") and isinstance(value, ast.Constant):
                found[target] = str(value.value)
    if not found:
        return "a checkout"
    return f"paddlepaddle {found.get('full_version', '?')}, commit {found.get('commit', '?')}"


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("checkout", help="Paddle checkout (release/1.8) or unpacked 1.8 wheel")
    args = parser.parse_args(argv)
    pairs = rows(args.checkout)
    present = {m for m, _ in pairs}
    empty = ", ".join(f"fluid.{m}" for m in MODULES if f"fluid.{m}" not in present) or "none"
    sys.stdout.write(HEADER.format(source=source_note(args.checkout), empty=empty))
    for module, name in pairs:
        sys.stdout.write(f"{module}\t{name}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
