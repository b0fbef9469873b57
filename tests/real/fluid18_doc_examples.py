"""fluid 1.8's own documented examples, run unchanged on fluidlite (issue 29).

usage: python -m tests.real.fluid18_doc_examples SRC [--ref REF] [--only PATTERN]
                                                [--jobs N] [--timeout S] [--json OUT] [-v]

SRC is a checkout of PaddlePaddle/Paddle (a directory holding ``python/paddle/fluid``) or a git
directory of it (a bare mirror): then ``REF`` (default ``release/1.8``) is extracted with
``git archive`` into a temporary directory. Paddle's code is only read, never copied here.

What runs: every ``.. code-block:: python`` block (and every ``Examples:`` section written as
``>>>`` prompts) in the docstring of a public module-level function or class of
``python/paddle/fluid/**.py`` (tests/ excluded) and of the public methods of those classes.
Public = listed in the module's ``__all__`` when it has one, else not starting with ``_``.
Each block runs unchanged (``>>>`` / ``...`` prompts stripped) as ``__main__`` in its own
process forked from a parent that has installed fluidlite's ``fluidlite run`` import hook
(fluidlite.paddle_compat.run.PaddleAlias), so ``import paddle.fluid as fluid`` is fluidlite;
its working directory is a fresh empty temporary directory; ``--timeout`` seconds (20).

Every block gets one outcome:

* ``pass`` -- the block ran to its end;
* ``fail`` -- an exception (its class: exception type and first message line) or a timeout;
* ``skip`` -- by one of the rules in ``SKIP_RULES`` (GPU, downloads, distributed/fleet launches,
  third-party packages not installed, files or servers that do not exist, the example's own
  code converting an array of rank >= 1 to a Python number, which NumPy 2.4 refuses): static
  rules match the code before it runs, dynamic ones the exception it raised;
* ``broken`` -- broken in fluid 1.8's docs themselves, each with its evidence:
  ``syntax`` (the block is not valid Python 3, so fluid 1.8 under Python 3 cannot run it either),
  ``undefined_name`` (a NameError raised by the block's own code for a name the block never
  binds and no ``import *`` of it provides), ``python2_print`` (``print >>f, x``: Python 2's
  print statement, a TypeError under Python 3), ``not_in_fluid18`` (an attribute, ``from ...
  import`` name or module that no file of python/paddle at REF defines -- checked against every
  def, class, assignment, import alias, module name and list-of-strings literal there),
  ``no_such_argument_in_fluid18`` (an unexpected keyword argument that no 1.8 def of that
  name has, none taking ``**kwargs``), ``rejected_by_fluid18_check`` (a dtype error whose
  argument fluid 1.8's own ``check_variable_and_dtype`` / ``check_dtype`` call in that API
  rejects with the same dtype, a ``fluid.data`` feed 1.8's ``check_feed_shape_type`` refuses,
  a variable declared twice with different shapes, which 1.8's ``Variable`` refuses), and
  ``known_broken`` (``KNOWN_BROKEN``: failures only the bodies of fluid 1.8's code -- C++
  kernels and shape inference, Python function bodies -- explain, each with its evidence).
  A broken example still runs: its failure, not a guess, is what is classified.

Prints one line per module (pass / fail / skip / broken) and the totals; ``-v`` also prints
each failure.
"""
import argparse
import ast
import collections
import json
import linecache
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import traceback
import warnings
from typing import Dict, Iterator, List, NamedTuple, Optional, Sequence, Set, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
EXAMPLE_FILE = "<doc-example>"

# (rule name, pattern over the example's code): the block is not run
STATIC_SKIP_RULES: Sequence[Tuple[str, str]] = (
    ("downloads_data", r"paddle\.dataset\.|paddle\.v2\.dataset|\bdataset\.(mnist|cifar|"
                       r"uci_housing|imdb|imikolov|movielens|conll05|wmt14|wmt16|flowers|"
                       r"voc2012|sentiment)\b|download\("),
    # the example's file list names data files (a.txt, ...) that exist nowhere; reading them
    # fails in fluid 1.8 as well
    ("missing_file", r"set_filelist\((?s:.*)(load_into_memory|preload_into_memory|_from_dataset|"
                     r"local_shuffle|global_shuffle|preprocess_instance|set_current_phase)"),
    ("distributed", r"\bfleet\b|\bcommunicator\b|DistributeTranspiler|role_maker|RoleMaker|"
                    r"GeoSgdTranspiler|"
                    r"prepare_context|init_parallel_env|DataParallel\(|paddle\.distributed|"
                    r"HDFSClient|\bhdfs\b|pserver|PADDLE_TRAINER|\.launch\b|"
                    r"collective|ParallelEnv|trainer_id\s*=|endpoints|"
                    # the pause between a distributed global shuffle's sends to the other
                    # trainers (1.8's data_set.cc GlobalShuffle, SendClientToClientMsg rounds)
                    r"set_fleet_send_sleep_seconds"),
)
# (rule name, pattern over the example's code or None, pattern over "Type: message")
DYNAMIC_SKIP_RULES: Sequence[Tuple[str, Optional[str], str]] = (
    ("needs_gpu", r"CUDA|cuda|[Gg][Pp][Uu]", r"CUDA|cuda|GPU|gpu"),
    ("third_party_package", None, r"^ModuleNotFoundError: No module named '(?!paddle|fluidlite)"),
    ("missing_file", None, r"^(FileNotFoundError|IOError|OSError)\b|No such file|does not exist"
                           r"|not (a file|found)"),
)
# the example's own code converts a fetched 1-element array to a Python number (``"%f" %
# out[0]`` of a shape-[1] fetch, which fluid 1.8 returns too): NumPy deprecated that in 1.25 and
# NumPy 2.4 refuses it; the example's NumPy is not this one
NUMPY_SCALAR_RULE = ("numpy_removed_scalar_conversion",
                     r"^TypeError: only 0-dimensional arrays can be converted to Python scalars")
SKIP_RULES = (tuple(r for r, _ in STATIC_SKIP_RULES) + tuple(r for r, _, _ in DYNAMIC_SKIP_RULES)
              + (NUMPY_SCALAR_RULE[0],))


class Example(NamedTuple):
    module: str          # paddle.fluid.layers.nn
    qualname: str        # fc, Executor.run
    index: int           # its rank among the blocks of that docstring
    code: str


class Outcome(NamedTuple):
    example: Example
    status: str          # pass | fail | skip | broken
    klass: str           # the failure class, skip rule or broken-docs evidence
    detail: str          # the exception line


# -- the source -------------------------------------------------------------------------------

def source_root(src: str, ref: str, tmp: str) -> str:
    """A directory holding python/paddle: SRC itself, or REF of the git directory SRC."""
    if os.path.isdir(os.path.join(src, "python", "paddle", "fluid")):
        return src
    out = os.path.join(tmp, "paddle-src")
    os.makedirs(out, exist_ok=True)
    archive = subprocess.run(["git", "--git-dir", src, "archive", ref, "python/paddle"],
                             capture_output=True, check=False)
    if archive.returncode:
        raise SystemExit(f"fluid18_doc_examples: '{src}' is neither a checkout holding "
                         f"python/paddle/fluid nor a git directory with ref '{ref}': "
                         f"{archive.stderr.decode(errors='replace').strip()}")
    subprocess.run(["tar", "-x", "-C", out], input=archive.stdout, check=True)
    return out


def _fluid_files(root: str) -> Iterator[Tuple[str, str]]:
    base = os.path.join(root, "python")
    for dirpath, dirnames, filenames in os.walk(os.path.join(base, "paddle", "fluid")):
        dirnames[:] = sorted(d for d in dirnames if d != "tests")
        for name in sorted(filenames):
            if name.endswith(".py") and not name.endswith("_pb2.py"):
                path = os.path.join(dirpath, name)
                mod = os.path.relpath(path, base)[:-3].replace(os.sep, ".")
                yield (mod[:-len(".__init__")] if mod.endswith(".__init__") else mod), path


def _parse(text: str) -> ast.Module:
    """``ast.parse`` without the warnings of Paddle's docstrings (invalid escapes)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", (SyntaxWarning, DeprecationWarning))
        return ast.parse(text)


def _all_of(tree: ast.Module) -> Optional[Set[str]]:
    names: Optional[Set[str]] = None
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                names = names or set()
                names.update(c.value for c in ast.walk(node.value)
                             if isinstance(c, ast.Constant) and isinstance(c.value, str))
    return names


_BLOCK = re.compile(r"^(\s*)\.\. code-block::\s*(python3?|py)?\s*$", re.I)


def code_blocks(doc: str) -> List[str]:
    """The ``.. code-block:: python`` blocks of a docstring, dedented; an ``Examples:`` section
    written as ``>>>`` prompts when the docstring has no code-block."""
    lines = doc.expandtabs(4).splitlines()
    blocks: List[str] = []
    i = 0
    while i < len(lines):
        m = _BLOCK.match(lines[i])
        i += 1
        if not m:
            continue
        indent = len(m.group(1))
        body: List[str] = []
        while i < len(lines) and (not lines[i].strip()
                                  or len(lines[i]) - len(lines[i].lstrip()) > indent):
            body.append(lines[i])
            i += 1
        body = [ln for ln in body if not re.match(r"^\s*:\w+:", ln)]
        code = _dedent(body).strip("\n")
        if code.strip():
            blocks.append(_strip_prompts(code))
    if not blocks and "Examples:" in doc:
        section = doc.split("Examples:", 1)[1]
        prompts = [ln.strip() for ln in section.splitlines() if ln.strip().startswith((">>>",
                                                                                       "..."))]
        if prompts:
            blocks.append(_strip_prompts("\n".join(prompts)))
    return blocks


def _dedent(lines: List[str]) -> str:
    """Remove the code's common indentation, computed over code lines only: Python ignores
    the indentation of comment lines, so a comment written left of the code (``#dygraph
    mode``) does not make the block an IndentationError."""
    code = [ln for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]
    cut = min((len(ln) - len(ln.lstrip()) for ln in code), default=0)
    return "\n".join(ln[min(cut, len(ln) - len(ln.lstrip())):] for ln in lines)


def _strip_prompts(code: str) -> str:
    lines = [ln for ln in code.splitlines() if ln.strip()]
    if lines and all(ln.lstrip().startswith((">>>", "...")) for ln in lines):
        return "\n".join(ln.lstrip()[4:] for ln in code.splitlines()
                         if ln.lstrip().startswith((">>>", "...")))
    return code


def examples(root: str) -> List[Example]:
    """Every example block of fluid 1.8's public API under ``root``, in file order."""
    out: List[Example] = []
    for mod, path in _fluid_files(root):
        with open(path, encoding="utf-8", errors="replace") as f:
            try:
                tree = _parse(f.read())
            except SyntaxError:
                continue
        public = _all_of(tree)
        for node in tree.body:
            if not isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
                continue
            if (node.name not in public) if public is not None else node.name.startswith("_"):
                continue
            docs = [(node.name, ast.get_docstring(node) or "")]
            if isinstance(node, ast.ClassDef):
                docs += [(f"{node.name}.{m.name}", ast.get_docstring(m) or "")
                         for m in node.body
                         if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))
                         and (not m.name.startswith("_") or m.name == "__call__")]
            for qualname, doc in docs:
                for i, code in enumerate(code_blocks(doc)):
                    out.append(Example(mod, qualname, i, code))
    return out


def fluid18_names(root: str) -> Set[str]:
    """Every name python/paddle at REF defines: defs, classes, assignment targets, import
    aliases, module and package names, and the strings of list/tuple literals (the names
    fluid generates at import time, e.g. layers/ops.py's activation lists)."""
    names: Set[str] = set()
    for dirpath, _, filenames in os.walk(os.path.join(root, "python", "paddle")):
        names.update(os.path.basename(dirpath).split("."))
        for fn in filenames:
            if not fn.endswith(".py"):
                continue
            names.add(fn[:-3])
            with open(os.path.join(dirpath, fn), encoding="utf-8", errors="replace") as f:
                try:
                    tree = _parse(f.read())
                except SyntaxError:
                    continue
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
                    names.add(node.name)
                elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                    names.add(node.id)
                elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                    names.add(node.attr)
                elif isinstance(node, ast.alias):
                    names.add((node.asname or node.name).split(".")[0])
                    names.update(node.name.split("."))
                elif isinstance(node, (ast.List, ast.Tuple, ast.Set)):
                    names.update(e.value for e in node.elts
                                 if isinstance(e, ast.Constant) and isinstance(e.value, str))
                elif isinstance(node, ast.Call) and getattr(node.func, "id", "") == "setattr" \
                        and len(node.args) > 1 and isinstance(node.args[1], ast.Constant):
                    names.add(str(node.args[1].value))
    return names


# -- running ----------------------------------------------------------------------------------

def _preload() -> None:
    """Install fluidlite's ``paddle`` alias once in the parent: each forked child starts
    with fluidlite imported (fast) and a pristine copy of its state."""
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    from fluidlite.paddle_compat.run import PaddleAlias
    sys.meta_path.insert(0, PaddleAlias())
    import paddle.fluid   # noqa: F401  (the alias: fluidlite)


def _child(code: str, workdir: str, result: str) -> None:
    os.setpgid(0, 0)
    os.chdir(workdir)
    fd = os.open(os.path.join(workdir, ".output"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    sys.argv = [EXAMPLE_FILE]
    sys.stdin = open(os.devnull)
    out: Dict[str, object] = {"ok": True}
    # the block's source, as a script file's: inspect.getsource (dygraph-to-static's source
    # conversion, fluid 1.8's as well as fluidlite's) reads it through linecache
    linecache.cache[EXAMPLE_FILE] = (len(code), None, code.splitlines(True), EXAMPLE_FILE)
    try:
        exec(compile(code, EXAMPLE_FILE, "exec"), {"__name__": "__main__"})
    except SystemExit as e:
        out = {"ok": e.code in (None, 0), "type": "SystemExit", "message": str(e.code),
               "in_example": True}
    except BaseException as e:     # noqa: B902 -- every failure of the example is its outcome
        tb = traceback.extract_tb(e.__traceback__)
        out = {"ok": False, "type": type(e).__name__,
               "message": (str(e).strip().splitlines() or [""])[0][:300],
               "in_example": bool(tb) and tb[-1].filename == EXAMPLE_FILE,
               "where": f"{tb[-1].filename}:{tb[-1].lineno}" if tb else ""}
    with open(result, "w") as f:
        json.dump(out, f)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def run_all(items: Sequence[Example], jobs: int, timeout: float
            ) -> Dict[int, Dict[str, object]]:
    """Run each example in a forked child, ``jobs`` at a time; index -> its raw result. The
    ``paddle`` alias lives only while they run: the caller's process (a pytest run, where
    another test checks that ``paddle`` is not fluidlite) gets its import system back."""
    meta, modules = list(sys.meta_path), set(sys.modules)
    _preload()
    try:
        return _run_forked(items, jobs, timeout)
    finally:
        sys.meta_path[:] = meta
        for name in set(sys.modules) - modules:
            if name == "paddle" or name.startswith("paddle."):
                del sys.modules[name]


def _run_forked(items: Sequence[Example], jobs: int, timeout: float
                ) -> Dict[int, Dict[str, object]]:
    tmp = tempfile.mkdtemp(prefix="fluid18-doc-")
    results: Dict[int, Dict[str, object]] = {}
    running: Dict[int, Tuple[int, float, str]] = {}
    queue = list(range(len(items)))
    try:
        while queue or running:
            while queue and len(running) < jobs:
                i = queue.pop(0)
                work = os.path.join(tmp, str(i))
                os.makedirs(work)
                result = os.path.join(work, ".result.json")
                pid = os.fork()
                if pid == 0:
                    try:
                        _child(items[i].code, work, result)
                    finally:
                        os._exit(3)
                running[pid] = (i, time.monotonic(), result)
            pid, _ = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                now = time.monotonic()
                for p, (i, start, _) in list(running.items()):
                    if now - start > timeout:
                        _kill(p)
                        os.waitpid(p, 0)
                        del running[p]
                        results[i] = {"ok": False, "type": "Timeout",
                                      "message": f"no end within {timeout:g} s"}
                time.sleep(0.02)
                continue
            if pid not in running:
                continue
            i, _, result = running.pop(pid)
            _kill(pid)       # its own children (reader workers), if any outlived it
            try:
                with open(result) as f:
                    results[i] = json.load(f)
            except (OSError, ValueError):
                results[i] = {"ok": False, "type": "Crash", "message": "the process died"}
            shutil.rmtree(os.path.join(tmp, str(i)), ignore_errors=True)
    finally:
        for p in running:
            _kill(p)
        shutil.rmtree(tmp, ignore_errors=True)
    return results


def _kill(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


# -- classification ---------------------------------------------------------------------------

def _bound_names(tree: ast.AST) -> Set[str]:
    names: Set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
    return names


_MISSING = (
    re.compile(r"module '([\w.]+)' has no attribute '(\w+)'"),
    re.compile(r"cannot import name '(\w+)' from '([\w.]+)'"),
    re.compile(r"No module named '((?:paddle)[\w.]*)'"),
)


def _paddle_module(fluidlite_module: str) -> str:
    if fluidlite_module == "fluidlite.paddle_compat" or fluidlite_module.startswith(
            "fluidlite.paddle_compat."):
        return "paddle" + fluidlite_module[len("fluidlite.paddle_compat"):]
    if fluidlite_module.startswith("fluidlite"):
        return "paddle.fluid" + fluidlite_module[len("fluidlite"):]
    return fluidlite_module


def module_namespace(root: str, module: str, _seen: Optional[Set[str]] = None
                     ) -> Optional[Set[str]]:
    """The names the 1.8 module ``module`` (``paddle.fluid.layers``) has after import, read
    statically: its defs, classes, assignments, imports, ``from X import *`` (X's ``__all__``,
    else its public names, recursively) and its sub-modules. None: no such module file."""
    seen = set() if _seen is None else _seen
    base = os.path.join(root, "python", *module.split("."))
    path = os.path.join(base, "__init__.py") if os.path.isdir(base) else base + ".py"
    if not os.path.isfile(path) or module in seen:
        return None if not os.path.isfile(path) else set()
    seen.add(module)
    with open(path, encoding="utf-8", errors="replace") as f:
        try:
            tree = _parse(f.read())
        except SyntaxError:
            return None
    names: Set[str] = set()
    if os.path.isdir(base):
        names.update(n[:-3] if n.endswith(".py") else n for n in os.listdir(base))
    package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Import):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            src = node.module or ""
            if node.level:
                parts = package.split(".")
                src = ".".join(parts[:len(parts) - node.level + 1] + ([src] if src else []))
            for a in node.names:
                if a.name != "*":
                    names.add(a.asname or a.name)
                    continue
                sub = _all_of_module(root, src) or module_namespace(root, src, seen) or set()
                names.update(n for n in sub if not n.startswith("_"))
    return names


def _all_of_module(root: str, module: str) -> Optional[Set[str]]:
    base = os.path.join(root, "python", *module.split("."))
    path = os.path.join(base, "__init__.py") if os.path.isdir(base) else base + ".py"
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8", errors="replace") as f:
        try:
            return _all_of(_parse(f.read()))
        except SyntaxError:
            return None


def _not_in_fluid18(message: str, names: Set[str], root: Optional[str] = None
                    ) -> Optional[str]:
    m = _MISSING[0].search(message)
    if m and not m.group(1).endswith(".core"):
        if m.group(2) not in names:
            return m.group(2)
        space = module_namespace(root, _paddle_module(m.group(1))) if root else None
        if space is not None and m.group(2) not in space:
            return f"{m.group(2)}' in '{_paddle_module(m.group(1))}"
    m = _MISSING[1].search(message)
    if m and not m.group(2).endswith(".core") and m.group(1) not in names:
        return m.group(1)
    m = _MISSING[2].search(message)
    if m and any(part not in names for part in m.group(1).split(".")):
        return m.group(1)
    m = re.search(r"No module named '(fluidlite[\w.]*)'", message)
    if m and root and module_namespace(root, _paddle_module(m.group(1))) is None:
        return _paddle_module(m.group(1))      # a module (file) fluid 1.8 does not have
    return None


class Fluid18Facts(NamedTuple):
    root: str                                      # the directory holding python/paddle
    params: Dict[str, List[Optional[Set[str]]]]    # def name -> its parameter sets (None: **kw)
    dtypes: Dict[Tuple[str, str], Set[str]]        # (api, argument) -> the dtypes 1.8 accepts


_CHECK_CALL = re.compile(r"check_(?:variable_and_)?dtype\(\s*[\w.]+\s*,\s*['\"](\w+)['\"]\s*,"
                         r"\s*[\[(]([^\])]*)[\])]\s*,\s*['\"]([\w.]+)['\"]")


def fluid18_facts(root: str) -> Fluid18Facts:
    """Signatures of every def and the dtype checks of python/paddle/fluid at REF."""
    params: Dict[str, List[Optional[Set[str]]]] = collections.defaultdict(list)
    dtypes: Dict[Tuple[str, str], Set[str]] = collections.defaultdict(set)
    for _, path in _fluid_files(root):
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        for arg, allowed, api in _CHECK_CALL.findall(text):
            dtypes[(api.rpartition(".")[2], arg)].update(re.findall(r"\w+", allowed))
        try:
            tree = _parse(text)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = node.args
                params[node.name].append(None if a.kwarg else {
                    x.arg for x in a.posonlyargs + a.args + a.kwonlyargs})
    return Fluid18Facts(root, dict(params), dict(dtypes))


# examples fluid 1.8 itself cannot run (or whose program it cannot run), for reasons only the
# bodies of its code show (C++ kernels and shape inference, Python function bodies): the
# evidence
KNOWN_BROKEN: Dict[str, str] = {
    "paddle.fluid.framework.Variable.stop_gradient#0":
        "asserts (out1.gradient() == 0).all() for out1 with stop_gradient=True, but 1.8's own "
        "test_imperative_auto_prune.py test_auto_prune6, the same code line for line, asserts "
        "'out1.gradient() is None': in 1.8, None == 0 is False and False.all() raises this "
        "AttributeError",
    "paddle.fluid.dataset.QueueDataset.local_shuffle#0":
        "1.8's dataset.py QueueDataset.local_shuffle is 'raise NotImplementedError(\"QueueDataset "
        "does not support local shuffle, ...\")' (its docstring lists that Raises)",
    "paddle.fluid.layers.detection.ssd_loss#0":
        "declares location [10, 4] and confidence [10, 21]; 1.8's ssd_loss starts with "
        "'num, num_prior, num_class = confidence.shape' (detection.py), a ValueError (not "
        "enough values to unpack) for a rank-2 confidence: it needs [N, Np, C]",
    "paddle.fluid.layers.nn.deformable_roi_pooling#0":
        "position_sensitive=True: 1.8 computes output_dim = input_channels / pooled_height / "
        "pooled_width (nn.py), under Python 3 the float 3.0, set as the INT attribute "
        "'output_dim'; OpDesc.check_attrs (attribute.h ExtractAttribute<int>) throws "
        "'Cannot get attribute output_dim by type int, its type is float' when the op is "
        "appended",
    "paddle.fluid.initializer.NumpyArrayInitializer#0":
        "initializes fc's [1, 10] weight with a [2] array: 1.8's initializer writes "
        "assign_value with shape [2] into the parameter, so the first run of the program fails "
        "in mul (X [2, 1] needs Y with 1 row, 'First matrix's width must be equal with second "
        "matrix's height'); fluidlite refuses the mismatch when the layer is built",
    "paddle.fluid.initializer.BilinearInitializer#0":
        "its own text says num_filters=C and groups=C make a channel-wise transposed conv of "
        "a (B, C, H, W) map with filter (C, 1, K, K), but the example feeds 3 channels with "
        "C=2; 1.8's conv_transpose_op.h takes in_step = 3 / 2 = 1 channel per group and "
        "silently drops channel 2 (fluidlite refuses channels not divisible by groups)",
    "paddle.fluid.layers.detection.yolo_box#0":
        "declares img_size int64; 1.8's yolo_box kernel reads it as "
        "'imgsize->data<int>()' (yolo_box_op.h), which refuses an int64 tensor on the first "
        "run ('Tensor holds the wrong type'); the docstring itself says 'The data type is "
        "int32'. fluidlite checks the dtype when the layer is built",
    "paddle.fluid.layers.detection.generate_mask_labels#1":
        "declares gt_classes and is_crowd float32; 1.8's kernel reads both with "
        "'data<int>()' (generate_mask_labels_op.cc), refused on the first run; fluidlite "
        "checks them (int32, as generate_proposal_labels' own 1.8 checks) when the layer is "
        "built",
    "paddle.fluid.layers.nn.hash#0":
        "declares x with shape [1]; 1.8's hash_op.cc InferShape enforces "
        "dims.size() == 2 ('The input of hash_op's dimensions must be 2') when the op is "
        "appended",
    "paddle.fluid.layers.loss.edit_distance#0":
        "declares x_lod / y_lod and an edit_distance op on them but never feeds them; 1.8's "
        "Executor.run (use_prune=False) runs every op of the program, so that op reads "
        "uninitialized tensors",
}


def fluid18_feed_differs(declared: Sequence[int], fed: Sequence[int]) -> bool:
    """fluid 1.8's DiffTensorShapeWithVarDesc (pybind/reader_py.cc) on one place, for a
    tensor without LoD: it compares only the fed tensor's own dims (a fed rank below the
    declared one passes when those dims match; a higher one is out of its bounds, counted as
    a difference here)."""
    if not fed:
        return len(declared) != 0
    if len(fed) > len(declared):
        return True
    return any(d >= 0 and f != d for f, d in zip(fed, declared))


def _fluid18_rejects(kind: str, message: str, facts: Optional[Fluid18Facts],
                     code: str = "") -> Optional[Tuple[str, str]]:
    """(broken class, evidence) when fluid 1.8 itself refuses what the example does."""
    if facts is None:
        return None
    m = re.search(r"Variable (\w+) has been created before\. The previous shape is", message)
    if kind == "ValueError" and m:
        return ("rejected_by_fluid18_check",
                f"fluid 1.8's framework.Variable raises 'Variable {m.group(1)} has been created "
                f"before. the previous shape is ...' when a name is declared twice with "
                f"different shapes")
    m = re.search(r"The fed Variable '(\w+)' should have dimensions = \d+, shape = "
                  r"\[([-\d, ]*)\], but received fed shape \[([-\d, ]*)\]", message)
    if kind == "ValueError" and m and re.search(
            r"fluid\.data\(\s*name\s*=\s*['\"]%s['\"]" % m.group(1), code) and \
            fluid18_feed_differs([int(d) for d in re.findall(r"-?\d+", m.group(2))],
                                 [int(d) for d in re.findall(r"-?\d+", m.group(3))]):
        return ("rejected_by_fluid18_check",
                f"'{m.group(1)}' is a fluid.data variable (need_check_feed); fluid 1.8's "
                f"executor.check_feed_shape_type (DiffTensorShapeWithVarDesc) refuses this "
                f"feed too")
    if kind != "TypeError":
        return None
    m = re.search(r"(\w+)\(\) got an unexpected keyword argument '(\w+)'", message)
    if m and m.group(1) in facts.params and all(
            p is not None and m.group(2) not in p for p in facts.params[m.group(1)]):
        return ("no_such_argument_in_fluid18",
                f"no def {m.group(1)} of fluid 1.8 has a parameter '{m.group(2)}'")
    m = re.search(r"The data type of '(\w+)' in ([\w.]+) must be .*, but received (\w+)",
                  message)
    if m:
        allowed = facts.dtypes.get((m.group(2).rpartition(".")[2], m.group(1)))
        if allowed and m.group(3) not in allowed:
            return ("rejected_by_fluid18_check",
                    f"fluid 1.8's {m.group(2)} checks '{m.group(1)}' in {sorted(allowed)}")
    return None


def classify(ex: Example, raw: Optional[Dict[str, object]], names: Set[str],
             facts: Optional["Fluid18Facts"] = None) -> Outcome:
    """The outcome of one example: static rules when ``raw`` is None, else from its result."""
    if raw is None:
        try:
            compile(ex.code, EXAMPLE_FILE, "exec")
        except SyntaxError as e:
            return Outcome(ex, "broken", "syntax", f"SyntaxError: {e.msg} (line {e.lineno})")
        for rule, pattern in STATIC_SKIP_RULES:
            if re.search(pattern, ex.code):
                return Outcome(ex, "skip", rule, "")
        return Outcome(ex, "run", "", "")
    if raw.get("ok"):
        return Outcome(ex, "pass", "", "")
    kind, message = str(raw.get("type")), str(raw.get("message", ""))
    line = f"{kind}: {message}"
    if kind == "NameError" and raw.get("in_example"):
        m = re.search(r"name '(\w+)' is not defined", message)
        star = re.search(r"import \*", ex.code)
        if m and m.group(1) not in _bound_names(ast.parse(ex.code)) and (
                not star or m.group(1) not in names):
            return Outcome(ex, "broken", "undefined_name", line)
    if kind == "TypeError" and raw.get("in_example") and \
            "for >>: 'builtin_function_or_method'" in message:
        return Outcome(ex, "broken", "python2_print", line)
    if raw.get("in_example") and re.search(NUMPY_SCALAR_RULE[1], line):
        return Outcome(ex, "skip", NUMPY_SCALAR_RULE[0], line)
    key = f"{ex.module}.{ex.qualname}#{ex.index}"
    if key in KNOWN_BROKEN:
        return Outcome(ex, "broken", "known_broken", f"{line} ({KNOWN_BROKEN[key]})")
    evidence = _fluid18_rejects(kind, message, facts, ex.code)
    if evidence:
        return Outcome(ex, "broken", evidence[0], f"{line} ({evidence[1]})")
    missing = _not_in_fluid18(message, names, facts.root if facts else None) if kind in (
        "AttributeError", "ImportError", "ModuleNotFoundError") else None
    if missing:
        return Outcome(ex, "broken", "not_in_fluid18", f"{line} ('{missing}' is defined "
                                                         f"nowhere in fluid 1.8)")
    for rule, code_pattern, pattern in DYNAMIC_SKIP_RULES:
        if (code_pattern is None or re.search(code_pattern, ex.code)) and re.search(pattern,
                                                                                   line):
            return Outcome(ex, "skip", rule, line)
    return Outcome(ex, "fail", _failure_class(kind, message), line)


def _failure_class(kind: str, message: str) -> str:
    """Group failures: the exception type and its message with numbers, quoted values and
    shapes folded."""
    text = re.sub(r"'[^']*'|\"[^\"]*\"", "'*'", message)
    text = re.sub(r"\[[^\]]*\]|\([^)]*\)|\d+(\.\d+)?", "#", text)
    return f"{kind}: {text[:90]}"


def run(root: str, only: Optional[str], jobs: int, timeout: float) -> List[Outcome]:
    """Extract, filter, run and classify; every example's outcome."""
    items = [e for e in examples(root)
             if not only or re.search(only, f"{e.module}.{e.qualname}")]
    names = fluid18_names(root)
    facts = fluid18_facts(root)
    first = [classify(e, None, names) for e in items]
    todo = [o.example for o in first if o.status == "run"]
    raw = run_all(todo, jobs, timeout)
    done = iter(classify(e, raw[i], names, facts) for i, e in enumerate(todo))
    return [next(done) if o.status == "run" else o for o in first]


def report(outcomes: Sequence[Outcome], verbose: bool, out=sys.stdout) -> Dict[str, int]:
    """Per-module and total counts, the failure classes largest first; returns the totals."""
    per: Dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for o in outcomes:
        per[o.example.module][o.status] += 1
    cols = ("pass", "fail", "skip", "broken")
    out.write(f"{'module':56s} " + " ".join(f"{c:>6s}" for c in cols) + "\n")
    for mod in sorted(per):
        out.write(f"{mod:56s} " + " ".join(f"{per[mod][c]:6d}" for c in cols) + "\n")
    total = collections.Counter(o.status for o in outcomes)
    out.write(f"{'TOTAL (' + str(len(outcomes)) + ' examples)':56s} "
              + " ".join(f"{total[c]:6d}" for c in cols) + "\n")
    for status in ("fail", "skip", "broken"):
        classes = collections.Counter(o.klass for o in outcomes if o.status == status)
        out.write(f"\n{status} classes:\n")
        for klass, n in classes.most_common():
            out.write(f"  {n:4d}  {klass}\n")
    if verbose:
        out.write("\nfailures and broken examples:\n")
        for o in outcomes:
            if o.status in ("fail", "broken"):
                e = o.example
                out.write(f"  [{o.status}] {e.module}.{e.qualname}#{e.index}: {o.detail}\n")
    return {c: total[c] for c in cols}


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.real.fluid18_doc_examples",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("src", help="a Paddle checkout, or a git directory of Paddle")
    ap.add_argument("--ref", default="release/1.8", help="the git ref, when SRC is a git dir")
    ap.add_argument("--only", help="regex over module.qualname (e.g. 'layers\\.nn\\.fc$')")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=20.0)
    ap.add_argument("--json", help="write every example's outcome to this file")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="fluid18-src-") as tmp:
        root = source_root(args.src, args.ref, tmp)
        outcomes = run(root, args.only, args.jobs, args.timeout)
    report(outcomes, args.verbose)
    sys.stdout.write(f"\nrun time: {time.monotonic() - start:.0f} s\n")
    if args.json:
        with open(args.json, "w") as f:
            json.dump([{**o.example._asdict(), "status": o.status, "class": o.klass,
                        "detail": o.detail} for o in outcomes], f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
