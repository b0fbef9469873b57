"""Paddle's own fluid 1.8 operator unit tests (``test_*_op.py``) run against fluidlite (issue 29).

usage: python -m tests.real.paddle_optests DIR [--jobs N] [--timeout S] [--json OUT]
                                             [--only NAME ...] [--python PYTHON]

DIR holds the files of python/paddle/fluid/tests/unittests/ of PaddlePaddle/Paddle at
release/1.8 (``test_*_op.py``, their helper modules and ``white_list/``); they are Paddle's
code and are never copied into this repository. Each ``test_*_op.py`` runs in its own
subprocess (``--timeout`` seconds, default 300) in which ``import paddle`` /
``paddle.fluid`` / ``paddle.fluid.core`` resolve to fluidlite (fluidlite.paddle_compat.run's
import hook) and ``op_test`` to tests/real/paddle_op_test_shim.py (fluid 1.8's ``OpTest`` on
fluidlite). Prints one line per file (passed / failed / skipped cases) and the totals:

* a case is one test method of one TestCase class (unittest's count);
* ``skipped`` = unittest skips (``skipIf(not core.is_compiled_with_cuda())``, CUDAPlace) plus
  OpTest cases that finished without running anything on the CPU -- no check, no run of the
  op, no unittest assertion (a test whose body only checks ``if core.is_compiled_with_cuda()``):
  GPU-only, out of scope;
* ``in scope`` = cases that ran on the CPU = passed + failed;
* every failure is classified (``missing_op``, ``missing_attr``, ``missing_api``,
  ``selected_rows`` (fluid's SelectedRows tensors in the
  scope), ``api_error_check`` (a layer function does not raise fluid's TypeError for a bad
  argument), ``wrong_value``, ``wrong_grad``, ``lod``, ``shape``, ``no_grad``, ``harness``,
  ``timeout``,
  ``other``) from its exception.

``--json OUT`` writes every case's outcome, class and message.

``--python PYTHON`` runs each file under another interpreter (default: this one). fluid 1.8's
test files were written for the NumPy of 2020: under NumPy 2 some of them fail in their own
set-up code (ragged ``np.array`` of sequences, ``float()`` of a 1-element array, ...) before
fluidlite is reached. The aliases NumPy 2 removed (``np.float``, ``np.asscalar``, ...) are put
back in every interpreter; for the rest, run the files under NumPy 1.x as Paddle 1.8 did. That
interpreter needs fluidlite's dependencies (NumPy, networkx, protobuf) and the test files' own
imports (``six``, ``scipy``), e.g.::

    python3 -m venv /tmp/optests-np1
    echo numpy==1.23.5 > /tmp/optests-np1/c.txt
    /tmp/optests-np1/bin/pip install -c /tmp/optests-np1/c.txt numpy networkx protobuf six scipy
    python -m tests.real.paddle_optests DIR --python /tmp/optests-np1/bin/python

fluidlite itself always comes from this checkout (``PYTHONPATH``). The totals name the NumPy
the files ran under.

fluid's ``Operator`` keeps only the attributes the op's proto declares and silently drops the
others (several tests pass attributes their op does not have, e.g. ``lambda`` to
``hard_shrink``); fluidlite refuses undeclared attributes. The shim therefore drops an
attribute that neither fluidlite nor Paddle declares for the op, with Paddle's declarations
read from DIR/paddle_op_attrs.json, written once under a real Paddle's interpreter:

    $FLUIDLITE_PADDLE_PYTHON -m tests.real.paddle_optests --write-attrs DIR

(Paddle 2.6's protos stand in for 1.8's; ops absent from them keep every attribute, and
without the file every attribute is passed on.)
"""
import argparse
import concurrent.futures
import importlib.util
import inspect
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import unittest
from typing import Any, Dict, Optional, Sequence, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

_RULES: Sequence[Tuple[str, str]] = (
    ("missing_op", r"has not been registered|no op named|unknown op"),
    ("missing_attr", r"has no attribute '.*'; its attributes are|attribute .* (missing|required)"),
    ("missing_slot", r"has no (input|output)( slot)?|unknown (input|output) slot|slot '.*' of"),
    ("api_error_check", r"(TypeError|ValueError) not raised"),
    ("wrong_grad", r"max gradient diff|gradient of .* has shape"),
    ("no_grad", r"no gradient was produced|has no gradient|no grad(ient)? rule|KeyError"),
    ("selected_rows", r"set_rows|set_height|get_selected_rows|SelectedRows|selected_rows"),
    ("lod", r"lod|LoD"),
    ("wrong_value", r"Output \(.*\) has diff|Arrays are not|Not equal|!=|not almost equal"),
    ("shape", r"shape|dims?\b|rank"),
    ("missing_api", r"ImportError|ModuleNotFoundError|has no attribute|not supported|"
                    r"NotImplementedError|unexpected keyword|positional argument"),
)


def classify(kind: str, message: str, tb: str) -> str:
    """The failure class of one case from its exception type name, message and traceback."""
    text = f"{kind}: {message}"
    if kind in ("ImportError", "ModuleNotFoundError"):
        return "missing_api"
    shim_frame = "paddle_op_test_shim.py" in (tb.strip().splitlines() or [""])[-3:][0]
    for name, pattern in _RULES:
        if re.search(pattern, text):
            return name
    if shim_frame and kind != "AssertionError":
        return "harness"
    return "other"


# -- child: run one file -------------------------------------------------------------------------
class _Recorder(unittest.TestResult):
    """Writes one JSON line per finished case to ``out``."""

    def __init__(self, out: Any, shim: Any) -> None:
        super().__init__()
        self.out, self.shim, self._checks = out, shim, 0

    def _write(self, test: Any, outcome: str, err: Any = None, reason: str = "") -> None:
        rec: Dict[str, Any] = {"case": test.id(), "outcome": outcome,
                               "optest": isinstance(test, self.shim.OpTest)}
        if err is not None:
            kind, value, tb = err
            text = "".join(traceback.format_exception(kind, value, tb))
            cls = classify(kind.__name__, str(value), text)
            if re.search(r"\.test_errors?$", test.id()):     # fluid's argument-check tests
                cls = "api_error_check"
            rec.update(kind=kind.__name__, message=str(value)[:600], cls=cls, tb=text[-2500:])
        if reason:
            rec["message"] = reason[:300]
        self.out.write(json.dumps(rec) + "\n")
        self.out.flush()

    def startTest(self, test: Any) -> None:
        super().startTest(test)
        self._checks = self.shim.CHECKS[0]

    def addSuccess(self, test: Any) -> None:
        if isinstance(test, self.shim.OpTest) and self.shim.CHECKS[0] == self._checks:
            self._write(test, "skip", reason="no check ran on the CPU (GPU-only branch)")
        else:
            self._write(test, "pass")

    def addFailure(self, test: Any, err: Any) -> None:
        self._write(test, "fail", err)

    def addError(self, test: Any, err: Any) -> None:
        if isinstance(err[1], unittest.SkipTest):
            self._write(test, "skip", reason=str(err[1]))
        else:
            self._write(test, "fail", err)

    def addSkip(self, test: Any, reason: str) -> None:
        self._write(test, "skip", reason=reason)

    def addExpectedFailure(self, test: Any, err: Any) -> None:
        self._write(test, "pass")

    def addUnexpectedSuccess(self, test: Any) -> None:
        self._write(test, "fail", (AssertionError, AssertionError("unexpected success"), None))


# NumPy aliases fluid 1.8's tests use (NumPy of 2020); newer NumPy removed them
_NUMPY_ALIASES = {"int": int, "float": float, "bool": bool, "object": object, "long": int,
                  "complex": complex, "str": str, "unicode": str, "float_": "float64",
                  "complex_": "complex128", "NaN": "nan", "Inf": "inf", "PINF": "inf",
                  "NINF": None, "asscalar": None, "product": "prod", "cumproduct": "cumprod",
                  "alltrue": "all", "sometrue": "any"}


def _old_numpy() -> None:
    """Give NumPy back the names the 2020 test files use (the tests' environment, not
    fluidlite's: fluidlite itself never uses them)."""
    import numpy as np
    for name, value in _NUMPY_ALIASES.items():
        if name in np.__dict__:
            continue
        if name == "NINF":
            value = -np.inf
        elif name == "asscalar":
            value = lambda a: np.asarray(a).item()      # noqa: E731
        elif isinstance(value, str):
            value = getattr(np, value)
        setattr(np, name, value)
    reshape = np.reshape
    if "newshape" not in inspect.signature(reshape).parameters:
        def old_reshape(a: Any, newshape: Any = None, order: str = "C", **kw: Any) -> Any:
            """np.reshape with NumPy 1.x's ``newshape=`` keyword."""
            return reshape(a, kw.pop("shape", newshape), order=order, **kw)
        np.reshape = old_reshape


def run_one(path: str, out_path: str) -> None:
    """Child process: run every case of ``path`` under the paddle->fluidlite import hook."""
    sys.path.insert(0, ROOT)
    # only ROOT's fluidlite: an editable install's finder would supply modules missing there
    # from another checkout
    sys.meta_path[:] = [f for f in sys.meta_path if not (
        f.__module__ if isinstance(f, type) else type(f).__module__).startswith("__editable__")]
    _old_numpy()
    from fluidlite.paddle_compat.run import PaddleAlias
    sys.meta_path.insert(0, PaddleAlias())
    spec = importlib.util.spec_from_file_location("op_test", os.path.join(
        HERE, "paddle_op_test_shim.py"))
    shim = importlib.util.module_from_spec(spec)
    sys.modules["op_test"] = shim
    spec.loader.exec_module(shim)      # type: ignore[union-attr]
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    attrs_file = os.path.join(os.path.dirname(os.path.abspath(path)), "paddle_op_attrs.json")
    if os.path.isfile(attrs_file):
        with open(attrs_file) as f:
            shim.PADDLE_ATTRS.update({k: set(v) for k, v in json.load(f).items()})
    name = os.path.splitext(os.path.basename(path))[0]
    with open(out_path, "w") as out:
        try:
            module = __import__(name)
            suite = unittest.defaultTestLoader.loadTestsFromModule(module)
        except BaseException:       # the file does not even import
            kind, value, tb = sys.exc_info()
            text = traceback.format_exc()
            with open(path, encoding="utf-8", errors="replace") as f:
                n = max(1, len(re.findall(r"^\s+def test\w*\(", f.read(), re.M)))
            out.write(json.dumps({"total": n}) + "\n")
            for i in range(n):      # every test method the file defines fails with it
                out.write(json.dumps({"case": f"{name}.<import {i}>", "outcome": "fail",
                                      "kind": kind.__name__, "message": str(value)[:600],
                                      "cls": "missing_api", "tb": text[-2500:]}) + "\n")
            return
        out.write(json.dumps({"total": suite.countTestCases()}) + "\n")
        out.flush()
        suite.run(_Recorder(out, shim))


# -- parent --------------------------------------------------------------------------------------
def run_file(path: str, timeout: float, python: str = sys.executable) -> Dict[str, Any]:
    """Run one file in a subprocess of ``python``; its cases (a timeout fails the cases not
    yet run)."""
    fd, out_path = tempfile.mkstemp(suffix=".jsonl")
    os.close(fd)
    env = dict(os.environ, PYTHONPATH=ROOT, PYTHONDONTWRITEBYTECODE="1")
    t0 = time.time()
    # own session: a test that starts servers (listen_and_serv) is killed with its children
    proc = subprocess.Popen([python, "-m", "tests.real.paddle_optests", "--one", path,
                             out_path], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, encoding="utf-8",
                            errors="replace", start_new_session=True)
    try:
        _, err = proc.communicate(timeout=timeout)
        crashed = proc.returncode != 0 and (err or "")[-1500:]
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        crashed, timed_out = False, True
    with open(out_path) as f:
        lines = [json.loads(x) for x in f if x.strip()]
    os.unlink(out_path)
    total = lines[0]["total"] if lines and "total" in lines[0] else 1
    cases = [x for x in lines if "case" in x]
    missing = total - len(cases)
    if missing > 0:
        why = f"timeout after {timeout:.0f}s" if timed_out else f"crash: {crashed}"
        cases += [{"case": f"<not run {i}>", "outcome": "fail", "kind": "Timeout",
                   "message": why, "cls": "timeout" if timed_out else "other"}
                  for i in range(missing)]
    return {"file": os.path.basename(path), "cases": cases, "seconds": time.time() - t0}


def summarize(results: Sequence[Dict[str, Any]], optest_only: bool = False) -> Dict[str, Any]:
    """Totals over every case (``optest_only``: over the cases of OpTest classes, plus the
    cases of files that do not import, whose classes are unknown)."""
    tot = {"files": len(results), "cases": 0, "pass": 0, "fail": 0, "skip": 0, "classes": {}}
    for r in results:
        for c in r["cases"]:
            if optest_only and not c.get("optest", True):
                continue
            tot["cases"] += 1
            tot[c["outcome"]] += 1
            if c["outcome"] == "fail":
                tot["classes"][c["cls"]] = tot["classes"].get(c["cls"], 0) + 1
    scope = tot["pass"] + tot["fail"]
    tot["in_scope"] = scope
    tot["pass_rate"] = tot["pass"] / scope if scope else 0.0
    return tot


def _line(r: Dict[str, Any]) -> str:
    n = {k: sum(c["outcome"] == k for c in r["cases"]) for k in ("pass", "fail", "skip")}
    classes = sorted({c["cls"] for c in r["cases"] if c["outcome"] == "fail"})
    return (f"{r['file']:<48} pass {n['pass']:>3}  fail {n['fail']:>3}  skip {n['skip']:>3}  "
            f"{r['seconds']:6.1f}s  {','.join(classes)}")


def is_op_test_file(directory: str, name: str) -> bool:
    """``test_*_op.py``, or another ``test_*.py`` built on ``OpTest`` (e.g. sequence/)."""
    if re.fullmatch(r"test_\w+_op\.py", name):
        return True
    if not re.fullmatch(r"test_\w+\.py", name):
        return False
    with open(os.path.join(directory, name), encoding="utf-8", errors="replace") as f:
        return re.search(r"^\s*(from op_test import|import op_test)", f.read(), re.M) is not None


def _numpy_version(python: str) -> str:
    """The NumPy version of interpreter ``python`` (it must import NumPy to run the files)."""
    try:
        done = subprocess.run([python, "-c", "import numpy; print(numpy.__version__)"],
                              capture_output=True, text=True, timeout=120)
    except OSError as e:
        raise SystemExit(f"--python {python!r}: cannot run it ({e}); pass the path of a "
                         "Python interpreter, e.g. /tmp/optests-np1/bin/python") from None
    if done.returncode != 0:
        raise SystemExit(f"--python {python!r} cannot import numpy:\n{done.stderr[-800:]}"
                         "install fluidlite's dependencies and six, scipy into it")
    return done.stdout.strip()


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--json")
    ap.add_argument("--only", nargs="*", help="file names (test_x_op.py) to run")
    ap.add_argument("--python", default=sys.executable,
                    help="interpreter to run the files under (e.g. a venv with NumPy 1.x)")
    args = ap.parse_args(argv)
    numpy_version = _numpy_version(args.python)
    files = sorted(f for f in os.listdir(args.dir) if is_op_test_file(args.dir, f))
    if args.only:
        files = [f for f in files if f in set(args.only)]
    paths = [os.path.join(args.dir, f) for f in files]
    results = []
    with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        for r in pool.map(lambda p: run_file(p, args.timeout, args.python), paths):
            results.append(r)
            print(_line(r), flush=True)
            if args.json:           # kept up to date: a long run interrupted keeps its results
                with open(args.json, "w") as f:
                    json.dump({"files": results}, f)
    tot, opt = summarize(results), summarize(results, optest_only=True)
    print(f"\n{args.python}: NumPy {numpy_version}")
    for what, t in (("all cases", tot), ("OpTest cases", opt)):
        print(f"\n{what}: files {t['files']}  cases {t['cases']}  in scope (CPU) "
              f"{t['in_scope']}  passed {t['pass']}  failed {t['fail']}  skipped (GPU-only) "
              f"{t['skip']}  pass rate {100 * t['pass_rate']:.1f}%")
        print("  failures by class: " + ", ".join(f"{k} {v}" for k, v in sorted(
            t["classes"].items(), key=lambda kv: -kv[1])))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"python": args.python, "numpy": numpy_version, "totals": tot,
                       "optest_totals": opt, "files": results}, f, indent=1)
    return 0


def write_attrs(directory: str) -> None:
    """Under a real Paddle's interpreter: write DIR/paddle_op_attrs.json, op type -> the
    attribute names its OpProto declares (what fluid's ``Operator`` keeps of ``attrs``)."""
    from paddle.base import core as pcore                       # Paddle 2.x
    from paddle.base.proto import framework_pb2
    attrs = {}
    for blob in pcore.get_all_op_protos():
        proto = framework_pb2.OpProto.FromString(blob)
        attrs[proto.type] = sorted(a.name for a in proto.attrs)
    with open(os.path.join(directory, "paddle_op_attrs.json"), "w") as f:
        json.dump(attrs, f, indent=0, sort_keys=True)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--one":
        run_one(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 3 and sys.argv[1] == "--write-attrs":
        write_attrs(sys.argv[2])
    else:
        sys.exit(main())
