"""Generate ``docs/api_coverage.md``: which of fluid 1.8's public names fluidlite provides.

    python docs/api_coverage.py            # rewrite docs/api_coverage.md
    python docs/api_coverage.py --check    # exit 1 if docs/api_coverage.md is out of date
    python docs/api_coverage.py --summary  # print the per-module counts only
    python docs/api_coverage.py --rev HEAD # any of the above for the committed fluidlite

The names come from ``docs/fluid18_api.txt`` (module, name, kind, signature: facts from fluid
1.8's API reference, see ``docs/fluid18_api_extract.py``). Each name is looked up in the live
``fluidlite`` namespaces and gets one status:

``provided``
    the name resolves and its signature has every parameter fluid 1.8 documents (compared by
    name with ``inspect.signature``; a ``**kwargs`` accepts any name);
``deviation``
    provided, with a difference from fluid 1.8 that ``docs/compatibility.md`` documents
    (``DEVIATIONS`` below links the section);
``partial``
    the name resolves but its signature lacks some of fluid 1.8's parameters (listed);
``missing``
    not provided; ``reason()`` says why (another open issue owns it, GPU-only, out of scope).

A last section, "Sub-module paths", covers ``docs/fluid18_modules.txt``: the public names of
fluid 1.8's sub-modules (``fluid.layers.nn``, ``fluid.evaluator``, ...), which scripts import
from the module that defined them. Each (module, name) pair is looked up at the same path under
``fluidlite``; the table lists the pairs that do not resolve, with ``module_path_reason()``
(``tests/test_fluid18_module_paths.py`` requires every other pair to resolve).

**How CI uses it** (``tests/test_api_coverage.py``): the checked-in table is a ratchet. Every
row it records as ``provided`` / ``deviation`` must still resolve with all of fluid's parameters,
and a ``partial`` row may not lose more parameters, so removing or breaking a name fails CI.
Names that become available later (other engineers add ops all the time) only make the table
stale, never CI red: the test does not require the table to list them. Whoever merges
regenerates the table with this script, and ``--check`` tells whether that is needed.
"""
from __future__ import annotations

import argparse
import ast
import importlib
import inspect
import os
import re
import sys
from collections import OrderedDict
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
LIST_FILE = os.path.join(HERE, "fluid18_api.txt")
TABLE_FILE = os.path.join(HERE, "api_coverage.md")
MODULES_FILE = os.path.join(HERE, "fluid18_modules.txt")
PATHS_HEADING = "## Sub-module paths"
STATUSES = ("provided", "deviation", "partial", "missing")

# -- documented deviations: (module, name) -> (what differs, docs/compatibility.md section) ----
_OPT = "Optimizers, gradient clipping, regularization, learning-rate schedules"
_CORE = "Core: Program IR, Executor, initializers"
_SER = "Serialization, checkpoints, visualization and the command line"
_DP = "Data-parallel training (MPI)"
DEVIATIONS: Dict[Tuple[str, str], Tuple[str, str]] = {
    ("fluid.optimizer", "Ftrl"): ("`l2` reaches the op as `l2` (1.8 passed `l1`)", _OPT),
    ("fluid.optimizer", "FtrlOptimizer"): ("`l2` reaches the op as `l2` (1.8 passed `l1`)", _OPT),
    ("fluid.optimizer", "Adadelta"): ("the update is scaled by `learning_rate`", _OPT),
    ("fluid.optimizer", "AdadeltaOptimizer"): ("the update is scaled by `learning_rate`", _OPT),
    ("fluid.optimizer", "ExponentialMovingAverage"): ("`apply()` does not compound the bias "
                                                      "correction", _OPT),
    ("fluid.optimizer", "LookaheadOptimizer"): ("sync ops have the Optimize role", _OPT),
    ("fluid.optimizer", "DGCMomentumOptimizer"): ("runs on the CPU and on one process "
                                                  "(fluid 1.8 required CUDA and >1 trainer); "
                                                  "regularization applies before rampup too",
                                                  _OPT),
    ("fluid.optimizer", "PipelineOptimizer"): ("one device: the whole batch is one "
                                               "micro-batch, one update per run", _OPT),
    ("fluid.optimizer", "DpsgdOptimizer"): ("Gaussian noise per element (1.8: one scalar per "
                                            "step), from the program's seeded generator", _OPT),
    ("fluid.optimizer", "Dpsgd"): ("Gaussian noise per element (1.8: one scalar per step), "
                                   "from the program's seeded generator", _OPT),
    ("fluid", "cuda_pinned_places"): ("returns CUDAPinnedPlace objects on a CPU-only build "
                                      "(1.8 asserted CUDA); everything runs on the CPU", _CORE),
    ("fluid", "device_guard"): ("records `op_device` on the ops; every op still runs on the "
                                "CPU", _CORE),
    ("fluid", "require_version"): ("compares with 1.8.5, the fluid API fluidlite implements",
                                   _CORE),
    ("fluid", "set_flags"): ("the values are kept and returned by `get_flags` but change "
                             "nothing in fluidlite", _CORE),
    ("fluid", "get_flags"): ("the values are kept and returned by `get_flags` but change "
                             "nothing in fluidlite", _CORE),
    ("fluid.clip", "set_gradient_clip"): ("each parameter is clipped with its own attribute",
                                          _OPT),
    ("fluid.profiler", "cuda_profiler"): ("profiles the ops on the CPU (no CUDA kernels) and "
                                          "writes their timings as csv / kvp", _CORE),
    ("fluid", "DistributeTranspiler"): ("nccl2 and collective modes on MPI; pserver mode "
                                        "(the default) raises", _DP),
    ("fluid.transpiler", "DistributeTranspiler"): ("nccl2 and collective modes on MPI; pserver "
                                                   "mode (the default) raises", _DP),
    **{(m, f"DistributeTranspiler.{n}"): ("parameter-server mode only: raises ValueError", _DP)
       for m in ("fluid", "fluid.transpiler")
       for n in ("get_pserver_program", "get_pserver_programs")},
    ("fluid.transpiler", "HashName"): ("hashes names with CRC-32 (the same endpoint in every "
                                       "process)", _DP),
    ("fluid", "memory_optimize"): ("a deprecated no-op that warns, as in 1.8", _CORE),
    ("fluid", "release_memory"): ("a deprecated no-op that warns, as in 1.8", _CORE),
    ("fluid.transpiler", "memory_optimize"): ("a deprecated no-op that warns, as in 1.8", _CORE),
    ("fluid.transpiler", "release_memory"): ("a deprecated no-op that warns, as in 1.8", _CORE),
    ("fluid.io", "save"): ("also writes fluidlite's JSON formats with `format='json'`", _SER),
}

# -- why a name is missing ---------------------------------------------------------------------
ISSUE_12 = "owned by issue 12 (dygraph), in progress"
ISSUE_13 = "owned by issue 13 (mixed precision), in progress"
ISSUE_14 = "owned by issue 14 (control flow and RNNs), in progress"
ISSUE_15 = "owned by issue 15 (LoD sequence ops, readers and datasets), in progress"
ISSUE_16_LAYERS = "issue 16 (the remaining fluid.layers ops), in progress"
CONTROL_FLOW_RNN = {
    "While", "Switch", "IfElse", "DynamicRNN", "StaticRNN", "cond", "case", "switch_case",
    "while_loop", "create_array", "array_read", "array_write", "array_length", "Print",
    "is_empty", "tensor_array_to_tensor", "reorder_lod_tensor_by_rank", "rnn", "RNNCell",
    "GRUCell", "LSTMCell", "Decoder", "BeamSearchDecoder", "BasicDecoder", "dynamic_decode",
    "DecodeHelper", "TrainingHelper", "GreedyEmbeddingHelper", "SampleEmbeddingHelper",
    "beam_search", "beam_search_decode", "gather_tree", "dynamic_lstm", "dynamic_lstmp",
    "dynamic_gru", "gru_unit", "lstm", "lstm_unit"}
LOD_READERS = {
    "lod_reset", "lod_append", "im2sequence", "py_reader", "create_py_reader_by_data",
    "double_buffer", "read_file", "load", "ctc_greedy_decoder", "warpctc", "edit_distance",
    "filter_by_instag", "DataLoader", "PyReader", "batch", "buffered", "cache", "chain",
    "compose", "ComposeNotAligned", "firstn", "map_readers", "multiprocess_reader", "shuffle",
    "xmap_readers", "DataFeedDesc", "DatasetFactory", "InMemoryDataset", "QueueDataset"}
# methods fluid 1.8 documents on Variable / Optimizer that only work in dygraph mode
DYGRAPH_METHODS = {"backward", "clear_gradient", "detach", "gradient", "numpy", "set_value",
                   "clear_gradients", "current_step_lr"}
SPECIFIC: Dict[Tuple[str, str], str] = {
    ("fluid", "load_op_library"): "loads compiled C++ custom-op libraries; fluidlite ops are "
                                  "Python `OpDef` classes (see docs/guides/extending.md, Writing an op)",
    ("fluid", "ComplexVariable"): "a dygraph-only complex container (issue 12); fluidlite's "
                                  "ops are real-valued",
    ("fluid.layers", "get_tensor_from_selected_rows"): "SelectedRows are not modelled: "
                                                       "gradients are dense in fluidlite",
    ("fluid.layers", "merge_selected_rows"): "SelectedRows are not modelled: gradients are "
                                             "dense in fluidlite",
    ("fluid.metrics", "DetectionMAP"): "needs `fluid.layers.detection_map` (the detection "
                                        "family, issue 16), in progress",
    ("fluid.layers", "continuous_value_model"): "CTR-specific op of fluid's parameter server "
                                                "(LoD show/click features)",
}


def reason(module: str, name: str) -> str:
    """Why (module, name) is not provided."""
    if (module, name) in SPECIFIC:
        return SPECIFIC[(module, name)]
    if "." in name:                                   # a method 'Class.method'
        cls, method = name.split(".", 1)
        if resolve(module, cls) is _MISSING:
            return reason(module, cls)
        if method in DYGRAPH_METHODS or module == "fluid.dygraph":
            return ISSUE_12 + (" (a dygraph-only method)" if method in DYGRAPH_METHODS else "")
        if module == "fluid.dataset" or cls in LOD_READERS or cls in ("LoDTensor", "Tensor"):
            return ISSUE_15
        return f"issue 16: `{cls}` has no `{method}` yet"
    if module == "fluid.dygraph" or name in {"enable_dygraph", "disable_dygraph",
                                             "enable_imperative", "disable_imperative"}:
        return ISSUE_12
    if module.startswith("fluid.contrib.mixed_precision") or name == "mixed_precision":
        return ISSUE_13
    if module.startswith("fluid.contrib"):
        return "fluid.contrib (slim, quantization, CTR layers, ...) is outside fluidlite's scope"
    if module.startswith("fluid.incubate.fleet"):
        if "parameter_server" in module or name in {"MPIRoleMaker", "GeneralRoleMaker"}:
            return "parameter-server training is not provided (collective mode is)"
        return ("fleet_base's classes are not exported under this module path; fleet "
                "collective mode is `fluid.incubate.fleet.collective` (issue 17)")
    if name in CONTROL_FLOW_RNN:
        return ISSUE_14
    if name in LOD_READERS or name.startswith("sequence_") or module == "fluid.dataset":
        return ISSUE_15
    if module in ("fluid.layers", "fluid.layers.distributions"):
        return ISSUE_16_LAYERS
    return "issue 16, not yet provided"


# -- the list ----------------------------------------------------------------------------------
class Entry(NamedTuple):
    module: str
    name: str
    kind: str
    signature: str          # '(a, b=1)' or '' when not recorded
    source: str


def read_list(path: str = LIST_FILE) -> List[Entry]:
    entries = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip() or line.startswith("#"):
                continue
            cols = line.rstrip("\n").split("\t")
            if len(cols) != 5:
                raise ValueError(f"{path}:{lineno}: expected 5 tab-separated columns "
                                 f"(module, name, kind, signature, source), got {len(cols)}")
            module, name, kind, sig, source = cols
            entries.append(Entry(module, name, kind, "" if sig == "-" else sig, source))
    return entries


def fluid_params(signature: str) -> List[str]:
    """Parameter names of a documented signature '(input, size, act=None, *, name=None)'."""
    if not signature:
        return []
    try:
        tree = ast.parse(f"def f{signature}: pass")
        args = tree.body[0].args                                      # type: ignore[attr-defined]
        names = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]
    except SyntaxError:       # a hand-written signature that is not Python: split it
        inner = signature.strip()[1:-1]
        names = [re.split(r"[=:]", p)[0].strip(" *") for p in inner.split(",")]
    return [n for n in names if n and n not in ("self", "cls")]


# -- the live namespace ------------------------------------------------------------------------
_MISSING = object()


def resolve(module: str, name: str) -> Any:
    """The fluidlite object for fluid's ``module.name``, or ``_MISSING``."""
    parts = module.split(".")[1:]
    try:
        obj: Any = importlib.import_module("fluidlite")
        path = "fluidlite"
        for part in parts:
            path += "." + part
            try:
                obj = getattr(obj, part)
            except AttributeError:
                obj = importlib.import_module(path)
        for part in name.split("."):           # 'Executor.run': a documented method
            obj = getattr(obj, part)
        return obj
    except Exception:          # AttributeError, ImportError, or a module failing to import
        return _MISSING


def live_params(obj: Any) -> Optional[Tuple[List[str], bool]]:
    """(parameter names, accepts **kwargs) of a callable; None if it has no signature."""
    if inspect.ismodule(obj):
        return None
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return None
    names = [p.name for p in sig.parameters.values()
             if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    var_kw = any(p.kind == p.VAR_KEYWORD for p in sig.parameters.values())
    return names, var_kw


class Row(NamedTuple):
    entry: Entry
    status: str
    lacking: Tuple[str, ...]     # fluid parameters the fluidlite signature does not take
    note: str                    # deviation text, or the reason a name is missing


def lacking_params(entry: Entry, obj: Any) -> Tuple[str, ...]:
    wanted = fluid_params(entry.signature)
    live = live_params(obj)
    if not wanted or live is None:
        return ()
    names, var_kw = live
    if var_kw:
        return ()
    return tuple(p for p in wanted if p not in names)


def evaluate(entry: Entry) -> Row:
    obj = resolve(entry.module, entry.name)
    if obj is _MISSING:
        return Row(entry, "missing", (), reason(entry.module, entry.name))
    lacking = lacking_params(entry, obj)
    dev = DEVIATIONS.get((entry.module, entry.name))
    if dev is not None:
        return Row(entry, "deviation", lacking, dev[0])
    if lacking:
        return Row(entry, "partial", lacking, "")
    return Row(entry, "provided", (), "")


def evaluate_all(entries: Optional[Sequence[Entry]] = None) -> List[Row]:
    return [evaluate(e) for e in (read_list() if entries is None else entries)]


# -- sub-module paths (docs/fluid18_modules.txt) ------------------------------------------------
_CONTRIB = "fluid.contrib (slim, quantization, CTR layers, ...) is outside fluidlite's scope"
_TRAINERS = ("configures fluid's C++ multi-thread trainers behind `train_from_dataset`; "
             "fluidlite's `train_from_dataset` runs the program in Python")
_PATCH_RELEASE = ("in the `__all__` of a fluid 1.8 patch release but not in its API reference; "
                  "not yet provided (issue 16)")
# a module's reason, or a (module, name) pair's (which wins)
MODULE_PATH_REASONS: Dict[Any, str] = {
    ("fluid.data", "data"): "`fluidlite.data` is the function `fluid.data` (as `paddle.fluid."
                            "data` was once fluid's `__init__` ran `from .data import *`); a "
                            "module of that name would replace the function when imported",
    "fluid.annotations": "Paddle's internal deprecation decorator; fluidlite has no "
                         "`fluidlite.annotations` module",
    "fluid.communicator": "the parameter-server communicator; parameter-server training is not "
                          "provided (collective mode is)",
    "fluid.contrib.layers": _CONTRIB,
    "fluid.contrib.layers.nn": _CONTRIB,
    "fluid.contrib.layers.metric_op": _CONTRIB,
    ("fluid.debugger", "prepare_fast_nan_inf_debug"): "fluid's remote NaN/Inf debugging of a "
                                                      "running C++ executor is not provided",
    ("fluid.debugger", "run_fast_nan_inf_debug"): "fluid's remote NaN/Inf debugging of a "
                                                  "running C++ executor is not provided",
    "fluid.debugger": "a helper formatting fluid's protobuf descs for `pprint_program_codes`; "
                      "fluidlite's debugger formats its own IR (`repr_var`, `repr_op`)",
    "fluid.default_scope_funcs": "fluid's thread-local stack of C++ scopes (a legacy test "
                                 "helper); use `fluid.Scope` with `fluid.scope_guard`",
    "fluid.device_worker": _TRAINERS,
    "fluid.trainer_desc": _TRAINERS,
    "fluid.trainer_factory": _TRAINERS,
    ("fluid.layers.detection", "matrix_nms"): _PATCH_RELEASE,
    "fluid.layers.layer_function_generator": "Paddle's docstring generators for its C++ op "
                                             "protos (and its own layers' deprecation "
                                             "marker); fluidlite's layers document themselves",
    "fluid.log_helper": "fluidlite has no `fluidlite.log_helper` module yet (it logs through "
                        "the standard `logging` module)",
    "fluid.net_drawer": "a helper of fluid's pydot-based drawing; fluidlite's "
                        "`net_drawer.draw_graph` writes its DOT text itself",
    "fluid.parallel_executor": "provided as `fluid.ParallelExecutor` (`fluidlite.compiler`); "
                               "the `fluidlite.parallel_executor` module path is not",
}


def read_module_list(path: str = MODULES_FILE) -> List[Tuple[str, str]]:
    """The (fluid module, name) pairs of ``docs/fluid18_modules.txt``."""
    out = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip() or line.startswith("#"):
                continue
            cols = line.rstrip("\n").split("\t")
            if len(cols) != 2:
                raise ValueError(f"{path}:{lineno}: expected 2 tab-separated columns "
                                 f"(module, name), got {len(cols)}")
            out.append((cols[0], cols[1]))
    return out


def resolve_path(module: str, name: str) -> Any:
    """``fluidlite.<module without 'fluid.'>.<name>`` the way a script imports it (import the
    module, then take the name), or ``_MISSING``."""
    try:
        mod = importlib.import_module("fluidlite" + module[len("fluid"):])
        return getattr(mod, name)
    except Exception:          # ImportError, AttributeError, or a module failing to import
        return _MISSING


def module_path_reason(module: str, name: str) -> str:
    """Why fluid 1.8's ``module.name`` has no fluidlite twin at that path."""
    if (module, name) in MODULE_PATH_REASONS:
        return MODULE_PATH_REASONS[(module, name)]
    if module in MODULE_PATH_REASONS:
        return MODULE_PATH_REASONS[module]
    if ("fluid", name) in SPECIFIC:                  # fluid.framework's top-level names
        return SPECIFIC[("fluid", name)]
    return "not yet provided"


class PathRow(NamedTuple):
    module: str
    name: str
    status: str              # 'provided' or 'missing'
    note: str


def evaluate_module_paths(pairs: Optional[Sequence[Tuple[str, str]]] = None) -> List[PathRow]:
    rows = []
    for module, name in (read_module_list() if pairs is None else pairs):
        if resolve_path(module, name) is _MISSING:
            rows.append(PathRow(module, name, "missing", module_path_reason(module, name)))
        else:
            rows.append(PathRow(module, name, "provided", ""))
    return rows


def render_module_paths(rows: Sequence[PathRow]) -> List[str]:
    """The "Sub-module paths" section: counts per module, then every missing pair."""
    lines = [
        "", PATHS_HEADING, "",
        "`docs/fluid18_modules.txt` lists the public names of fluid 1.8's sub-modules (their "
        "`__all__`), which scripts import from the module that defined them (`from "
        "paddle.fluid.layers.control_flow import StaticRNN`, `fluid.layers.nn.cos_sim`). Each "
        "resolves at the same path under `fluidlite` (the object `fluid.layers.<name>` is, for "
        "a `fluid.layers` module) except the pairs listed below. CI "
        "(`tests/test_fluid18_module_paths.py`) fails if any other pair stops resolving.",
        "",
        "| module | provided | missing | total |",
        "|---|---:|---:|---:|",
    ]
    per: "OrderedDict[str, Dict[str, int]]" = OrderedDict()
    for r in sorted(rows, key=lambda r: r.module):
        c = per.setdefault(r.module, {"provided": 0, "missing": 0})
        c[r.status] += 1
    for module, c in per.items():
        lines.append(f"| `{module}` | {c['provided']} | {c['missing']} | "
                     f"{c['provided'] + c['missing']} |")
    n_ok = sum(c["provided"] for c in per.values())
    n_missing = sum(c["missing"] for c in per.values())
    lines.append(f"| **all** | {n_ok} | {n_missing} | {n_ok + n_missing} |")
    lines += ["", "| name | status | note |", "|---|---|---|"]
    for r in sorted((r for r in rows if r.status == "missing"),
                    key=lambda r: (r.module, r.name.lower())):
        lines.append(f"| `{r.module}.{r.name}` | missing | {_cell(r.note)} |")
    return lines


def read_module_path_table(path: str = TABLE_FILE) -> List[Tuple[str, str, str]]:
    """(module, name, reason) of every pair the checked-in "Sub-module paths" section lists as
    missing."""
    out = []
    inside = False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("## "):
                inside = line.strip() == PATHS_HEADING
                continue
            m = re.match(r"^\| `(fluid(?:\.\w+)+)\.(\w+)` \| missing \| (.*) \|$", line)
            if inside and m:
                out.append((m.group(1), m.group(2), m.group(3)))
    return out


# -- the table ---------------------------------------------------------------------------------
def anchor(section: str) -> str:
    """GitHub's anchor for a markdown heading."""
    slug = re.sub(r"[^\w\- ]", "", section.lower()).replace(" ", "-")
    return f"compatibility.md#{slug}"


def counts(rows: Sequence[Row]) -> "OrderedDict[str, Dict[str, int]]":
    out: "OrderedDict[str, Dict[str, int]]" = OrderedDict()
    for r in sorted(rows, key=lambda r: r.entry.module):
        c = out.setdefault(r.entry.module, {s: 0 for s in STATUSES})
        c[r.status] += 1
    return out


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render(rows: Sequence[Row], paths: Optional[Sequence[PathRow]] = None) -> str:
    lines = [
        "# fluid 1.8 API coverage",
        "",
        "Generated by `python docs/api_coverage.py` from `docs/fluid18_api.txt` (fluid 1.8's "
        "documented names and signatures); do not edit by hand. `provided`: the name exists "
        "and takes every parameter fluid 1.8 documents. `deviation`: provided, with a "
        "difference documented in [compatibility.md](compatibility.md). `partial`: provided, "
        "but the listed fluid parameters are not accepted. `missing`: not provided, with the "
        "reason. CI (`tests/test_api_coverage.py`) fails if a row marked provided, deviation "
        "or partial stops resolving or loses a parameter.",
        "",
        "| module | provided | deviation | partial | missing | total |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    table = counts(rows)
    total = {s: 0 for s in STATUSES}
    for module, c in table.items():
        lines.append(f"| `{module}` | " + " | ".join(str(c[s]) for s in STATUSES)
                     + f" | {sum(c.values())} |")
        for s in STATUSES:
            total[s] += c[s]
    lines.append("| **all** | " + " | ".join(str(total[s]) for s in STATUSES)
                 + f" | {sum(total.values())} |")
    for module in table:
        lines += ["", f"## `{module}`", "", "| name | status | fluid 1.8 signature | note |",
                  "|---|---|---|---|"]
        for r in sorted((r for r in rows if r.entry.module == module),
                        key=lambda r: r.entry.name.lower()):
            e = r.entry
            note = r.note
            if r.status == "deviation":
                note = f"[{note}]({anchor(DEVIATIONS[(e.module, e.name)][1])})"
            if r.lacking:
                note = (note + "; " if note else "") + "lacks " + ", ".join(
                    f"`{p}`" for p in r.lacking)
            sig = f"`{e.signature}`" if e.signature else ""
            lines.append(f"| `{e.name}` | {r.status} | {_cell(sig)} | {_cell(note)} |")
    if paths is not None:
        lines += render_module_paths(paths)
    return "\n".join(lines) + "\n"


# -- reading the checked-in table back (for the CI ratchet) ------------------------------------
class Recorded(NamedTuple):
    module: str
    name: str
    status: str
    lacking: Tuple[str, ...]


def read_table(path: str = TABLE_FILE) -> List[Recorded]:
    out = []
    module = None
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = re.match(r"^## `([\w.]+)`", line)
            if m:
                module = m.group(1)
                continue
            m = re.match(r"^\| `(\w+(?:\.\w+)?)` \| (provided|deviation|partial|missing) \|(.*)$",
                         line)
            if m and module:
                lacking: Tuple[str, ...] = ()
                lm = re.search(r"lacks ((?:`\w+`(?:, )?)+)", m.group(3))
                if lm:
                    lacking = tuple(re.findall(r"`(\w+)`", lm.group(1)))
                out.append(Recorded(module, m.group(1), m.group(2), lacking))
    return out


def main(argv: Sequence[str]) -> int:
    ap = argparse.ArgumentParser(description="fluid 1.8 API coverage table")
    ap.add_argument("--check", action="store_true",
                    help="exit 1 if docs/api_coverage.md differs from a fresh generation")
    ap.add_argument("--summary", action="store_true", help="print the per-module counts")
    ap.add_argument("--rev", metavar="REV",
                    help="evaluate the fluidlite committed at git revision REV (e.g. HEAD) "
                         "instead of the working tree: several people edit one tree, and the "
                         "table must only claim what is committed")
    args = ap.parse_args(argv)
    if args.rev:
        return _main_at_rev(args.rev, [a for a in argv if not a.startswith("--rev")
                                       and a != args.rev])
    rows = evaluate_all()
    paths = evaluate_module_paths()
    text = render(rows, paths)
    if args.summary:
        for module, c in counts(rows).items():
            print(f"{module:60s} " + " ".join(f"{s}={c[s]}" for s in STATUSES))
        n_missing = sum(r.status == "missing" for r in paths)
        print(f"{'sub-module paths':60s} provided={len(paths) - n_missing} missing={n_missing}")
        return 0
    if args.check:
        try:
            with open(TABLE_FILE, encoding="utf-8") as f:
                current = f.read()
        except FileNotFoundError:
            current = ""
        if current != text:
            print(f"{TABLE_FILE} is out of date: run python docs/api_coverage.py")
            return 1
        return 0
    with open(TABLE_FILE, "w", encoding="utf-8") as f:
        f.write(text)
    return 0


def _main_at_rev(rev: str, argv: Sequence[str]) -> int:
    """Run this script on ``git archive <rev> fluidlite``, extracted to a temporary directory,
    in a child interpreter that imports fluidlite from there (not the editable install)."""
    import subprocess
    import tarfile
    import tempfile
    repo = os.path.dirname(HERE)
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(["git", "-C", repo, "archive", rev, "fluidlite"],
                                 check=True, capture_output=True).stdout
        with tarfile.open(fileobj=__import__("io").BytesIO(archive)) as tar:
            tar.extractall(tmp, filter="data")
        env = dict(os.environ, FLUIDLITE_COVERAGE_ROOT=tmp)
        return subprocess.run([sys.executable, os.path.abspath(__file__), *argv],
                              env=env, cwd=tmp).returncode


def _use_coverage_root() -> None:
    """In the child of ``--rev``: import fluidlite from FLUIDLITE_COVERAGE_ROOT only."""
    root = os.environ.get("FLUIDLITE_COVERAGE_ROOT")
    if not root:
        return
    sys.meta_path[:] = [f for f in sys.meta_path
                        if "editable" not in str(getattr(f, "__module__", ""))]
    sys.path.insert(0, root)
    import fluidlite
    if not os.path.abspath(fluidlite.__file__).startswith(os.path.abspath(root)):
        raise RuntimeError(f"--rev: imported {fluidlite.__file__}, not the copy in {root}")


if __name__ == "__main__":
    _use_coverage_root()
    sys.exit(main(sys.argv[1:]))
