"""Meta-tests over the op registry: every differentiable op has a numeric gradient check, every
op states its gradient rule (or ``no_grad = True``), every op has a docstring, and every
higher-order rule (``double_grad``) is checked at second order.

"Has a gradient check" is decided statically, from the test sources, so that this file gives the
same answer whether it runs alone or with the suite. An op type counts as checked when its exact
name appears as a string literal

* inside a test definition (function or class, decorators included) that calls ``check_grad``
  directly or through helpers defined in the same file (a class also through its in-file base
  classes), or
* in a module-level table (e.g. ``CASES = [("relu", ...)]``) that such a definition reads.

A mention in a comment, a docstring of an unrelated test, or a file that never calls
``check_grad`` does not count. For second order, a grad op ``<type>_grad`` with a
``double_grad`` rule counts as checked when ``"<type>_grad"`` is checked as above (an OpTest on
the grad op; also ``"<type>"`` in a check_grad definition that builds ``op + "_grad"``), or
``"<type>"`` appears (as a literal or a called name such as ``L.<type>(...)``) in a definition
that calls ``check_double_grad`` or builds a gradient of a gradient (two ``gradients`` calls,
transitively).
"""
from __future__ import annotations

import ast
import os
from typing import Dict, Iterable, List, Set

import fluidlite  # noqa: F401  (registers every op)
from fluidlite.core import registry

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
GRADIENT_CALLS = {"gradients", "calc_gradient"}


# -- registry view --------------------------------------------------------------------------------
def _is_grad_op(op_type: str) -> bool:
    d = registry.get_op_def(op_type)
    return d.forward_def is not None or (
        op_type.endswith("_grad") and registry.has_op(op_type[:-len("_grad")]))


def forward_ops() -> List[str]:
    return [t for t in registry.all_op_types() if not _is_grad_op(t)]


def differentiable_ops() -> List[str]:
    return [t for t in forward_ops() if registry.get_op_def(t).differentiable]


def higher_order_grad_ops() -> List[str]:
    """Grad ops that carry their own gradient rule (a ``double_grad`` / ``make_grad``)."""
    return [t for t in registry.all_op_types()
            if _is_grad_op(t) and registry.get_op_def(t).differentiable]


def _where(op_type: str) -> str:
    cls = type(registry.get_op_def(op_type))
    return f"{op_type} ({cls.__module__}.{cls.__qualname__})"


# -- static scan of the tests ---------------------------------------------------------------------
def _called_names(node: ast.AST) -> Iterable[str]:
    for n in ast.walk(node):
        if isinstance(n, ast.Call):
            f = n.func
            if isinstance(f, ast.Name):
                yield f.id
            elif isinstance(f, ast.Attribute):
                yield f.attr


def _strings(node: ast.AST) -> Set[str]:
    return {n.value for n in ast.walk(node) if isinstance(n, ast.Constant)
            and isinstance(n.value, str)}


def _loaded_names(node: ast.AST) -> Set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


class FileScan:
    """Which string literals of one test file are reachable from defs with a given property."""

    def __init__(self, path: str) -> None:
        with open(path, encoding="utf-8") as f:
            self.tree = ast.parse(f.read(), filename=path)
        self.defs: Dict[str, ast.AST] = {}          # top-level functions and classes
        self.assigns: Dict[str, List[ast.AST]] = {}   # module-level name -> assigned values
        for node in self.tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.defs[node.name] = node
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    for n in ast.walk(t):
                        if isinstance(n, ast.Name) and node.value is not None:
                            self.assigns.setdefault(n.id, []).append(node.value)
        self.calls = {name: list(_called_names(node)) for name, node in self.defs.items()}

    def _closure(self, direct: Set[str]) -> Set[str]:
        """Defs that reach one of ``direct`` via calls / base classes inside this file."""
        found = {name for name, calls in self.calls.items() if direct & set(calls)}
        changed = True
        while changed:
            changed = False
            for name, node in self.defs.items():
                if name in found:
                    continue
                via_call = found & set(self.calls[name])
                via_base = isinstance(node, ast.ClassDef) and any(
                    isinstance(b, ast.Name) and b.id in found for b in node.bases)
                if via_call or via_base:
                    found.add(name)
                    changed = True
        return found

    def gradient_depth(self) -> Dict[str, int]:
        """Number of ``gradients`` calls each def makes, following in-file helpers."""
        depth: Dict[str, int] = {}

        def count(name: str, stack: frozenset) -> int:
            if name in depth:
                return depth[name]
            total = 0
            for c in self.calls[name]:
                if c in GRADIENT_CALLS:
                    total += 1
                elif c in self.defs and c not in stack:
                    total += count(c, stack | {c})
            depth[name] = total
            return total

        for name in self.defs:
            count(name, frozenset({name}))
        return depth

    def literals_of(self, def_names: Iterable[str], called: bool = False) -> Set[str]:
        """String literals of ``def_names`` and of the module-level tables they read; with
        ``called``, also the names they call (``L.elementwise_min(...)`` -> the layer/op)."""
        out: Set[str] = set()
        seen: Set[str] = set()
        todo = []
        for name in def_names:
            node = self.defs[name]
            out |= _strings(node)
            if called:
                out |= set(_called_names(node))
            todo += list(_loaded_names(node))
        while todo:                       # module-level tables read by those defs
            n = todo.pop()
            if n in seen or n not in self.assigns:
                continue
            seen.add(n)
            for value in self.assigns[n]:
                out |= _strings(value)
                todo += list(_loaded_names(value))
        return out


def _test_files() -> List[str]:
    out = []
    for root, _, files in os.walk(TESTS_DIR):
        out += [os.path.join(root, f) for f in files if f.endswith(".py")]
    return sorted(out)


_SCAN = None


def scan():
    """Over every test file: (literals in check_grad defs, forward op names whose grad op such
    a def builds as ``op + "_grad"``, literals and called names in higher-order defs)."""
    global _SCAN
    if _SCAN is None:
        first: Set[str] = set()
        grad_op_of: Set[str] = set()
        second: Set[str] = set()
        for path in _test_files():
            if os.path.abspath(path) == os.path.abspath(__file__):
                continue
            fs = FileScan(path)
            checking = fs._closure({"check_grad"})
            first |= fs.literals_of(checking)
            builds = [n for n in checking if "_grad" in _strings(fs.defs[n])]
            grad_op_of |= fs.literals_of(builds)
            depth = fs.gradient_depth()
            higher = fs._closure({"check_double_grad"}) | {n for n, d in depth.items() if d >= 2}
            second |= fs.literals_of(higher, called=True)
        _SCAN = first, grad_op_of, second
    return _SCAN


# -- the meta-tests -------------------------------------------------------------------------------
def test_every_differentiable_op_has_a_gradient_check():
    checked = scan()[0]
    missing = [t for t in differentiable_ops() if t not in checked]
    assert not missing, (
        f"{len(missing)} differentiable op(s) have no numeric gradient check in tests/ "
        f"(add an OpTest case naming the op type, e.g. op_type = \"{missing[0]}\", that calls "
        f"check_grad):\n  " + "\n  ".join(_where(t) for t in missing))


# ops whose outputs are no dense tensors of a declared dtype (the plan's dtype check has nothing
# to compare), and layer names that differ from their op type
_NO_DENSE_OUTPUT = {"sum_tensor_array"}       # a tensor array, run by backward on array reads
_LAYER_NAMES = {"Assert": "assert"}


def _run_under_the_dtype_check() -> Set[str]:
    """Op types named (a literal, or a called layer name) in a test definition that runs a
    program: ``check_output`` / ``check_grad`` (OpTest) or ``run`` (an Executor)."""
    seen: Set[str] = set()
    for path in _test_files():
        if os.path.abspath(path) == os.path.abspath(__file__):
            continue
        fs = FileScan(path)
        seen |= fs.literals_of(fs._closure({"check_output", "check_grad", "run"}), called=True)
    return seen | {op for layer, op in _LAYER_NAMES.items() if layer in seen}


def test_every_op_runs_under_the_plans_dtype_check():
    """The suite compiles its plans with ``CHECK_DTYPES`` (tests/conftest.py): every kernel
    output is compared with its declared dtype. Each forward op must run that way somewhere,
    so a kernel that drifts (e.g. NumPy 1's scalar promotion) fails on every NumPy line."""
    seen = _run_under_the_dtype_check()
    missing = [t for t in forward_ops() if t not in seen and t not in _NO_DENSE_OUTPUT]
    assert not missing, (
        f"{len(missing)} op(s) never run through an Executor or OpTest in tests/ (add a test "
        f"that runs a program using them):\n  " + "\n  ".join(_where(t) for t in missing))


def test_every_op_states_its_gradient_rule():
    silent = [t for t in forward_ops() if not registry.get_op_def(t).no_grad
              and not registry.get_op_def(t).differentiable]
    assert not silent, (
        "op(s) with neither a gradient rule (backward / make_grad) nor no_grad = True:\n  "
        + "\n  ".join(_where(t) for t in silent))


def test_every_op_has_a_docstring():
    bare = [t for t in registry.all_op_types()
            if not (type(registry.get_op_def(t)).__doc__ or "").strip()]
    assert not bare, ("op definition(s) without a docstring stating the formula:\n  "
                      + "\n  ".join(_where(t) for t in bare))


def test_every_higher_order_rule_is_checked():
    first, grad_op_of, second = scan()
    missing = []
    for t in higher_order_grad_ops():
        fwd = registry.get_op_def(t).forward_def
        fwd_type = fwd.type if fwd is not None else t[:-len("_grad")]
        if t not in first and fwd_type not in grad_op_of and fwd_type not in second:
            missing.append(t)
    assert not missing, (
        f"{len(missing)} grad op(s) with a higher-order rule are not checked at second order "
        f"(an OpTest on the grad op calling check_grad, or the forward op in a test calling "
        f"check_double_grad / differentiating a gradient):\n  "
        + "\n  ".join(_where(t) for t in missing))


# -- the scanner itself ---------------------------------------------------------------------------
def _scan_source(tmp_path, src: str):
    p = tmp_path / "t.py"
    p.write_text(src)
    fs = FileScan(str(p))
    return fs.literals_of(fs._closure({"check_grad"}))


def test_scanner_counts_only_literals_reachable_from_check_grad(tmp_path):
    src = '''
"""mentions "docstring_op" in the module docstring"""
CASES = [("table_op", 1), ("table_op2", 2)]
OTHER = ["unused_table_op"]

def run_op(op_type):
    t = OpTest()
    t.op_type = op_type
    t.check_grad(["X"], "Out")

@pytest.mark.parametrize("op_type,n", CASES)
def test_table(op_type, n):
    run_op(op_type)

def test_helper_literal():
    run_op("helper_op")

def test_output_only():
    t = OpTest(); t.op_type = "output_only_op"; t.check_output()

class Base(OpTest):
    def test_grad(self):
        self.check_grad(["X"], "Out")

class TestSub(Base):
    op_type = "subclass_op"

class TestNoGrad(OpTest):
    op_type = "no_grad_class_op"
    def test_out(self):
        self.check_output()

def test_functional():
    check_grad("functional_op", {"X": 1}, "Out")
'''
    lits = _scan_source(tmp_path, src)
    for op in ("table_op", "table_op2", "helper_op", "subclass_op", "functional_op"):
        assert op in lits, op
    for op in ("docstring_op", "unused_table_op", "output_only_op", "no_grad_class_op"):
        assert op not in lits, op


def test_scanner_gradient_depth(tmp_path):
    p = tmp_path / "t.py"
    p.write_text('''
def check_second(build):
    g = fluid.gradients(build(), x)
    return fluid.gradients(g, x)

def test_first():
    fluid.gradients(y, x)

def test_second():
    check_second(lambda: L.tanh(x))
''')
    depth = FileScan(str(p)).gradient_depth()
    assert depth == {"check_second": 2, "test_first": 1, "test_second": 2}
