"""The ``fluidlite`` command line (also ``python -m fluidlite``).

    fluidlite viz PROGRAM [-o OUT] [--format F] [--block N] [--hide-backward] [--hide-optimizer]
                  [--highlight REGEX ...] [--diff-against OLD] [--title T] [--rankdir LR]
    fluidlite info PROGRAM [--json]
    fluidlite ops [PATTERN] [--with-grad-ops] [--json]

PROGRAM is a program JSON file (``fluidlite.io``'s ``__model__`` / ``.pdmodel``, or
``fluidlite.core.serialize.save_program`` output), a saved inference-model directory, or a
``fluid.save`` prefix / ``.pdparams`` path. Bad arguments exit with code 2 and a one-line
message; a file that cannot be read exits with code 1.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from typing import Any, Dict, Optional, Sequence, TextIO

__all__ = ["main", "build_parser", "load_input"]


class _UsageError(Exception):
    """A bad argument discovered after parsing (exit code 2)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> "NoReturn":  # type: ignore[name-defined]  # noqa: F821
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def _version() -> str:
    from . import __version__
    return __version__


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="fluidlite", description="fluidlite: PaddlePaddle fluid 1.x static graphs "
                "on NumPy. Inspect, draw and export saved programs.")
    p.add_argument("--version", action="version", version=f"fluidlite {_version()}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)

    v = sub.add_parser("viz", help="draw or export a program (DOT, SVG, PNG, PDF, HTML, "
                       "GraphML, JSON, text)",
                       description="Export a saved program as DOT, SVG, PNG, PDF, a "
                       "self-contained HTML page, GraphML, node-link JSON or readable text. "
                       "SVG/PNG/PDF/HTML pictures need Graphviz's `dot` (or pygraphviz).")
    v.add_argument("input", metavar="PROGRAM", help="program JSON file, inference-model "
                   "directory, or fluid.save prefix")
    v.add_argument("-o", "--output", help="output file (format from its extension); "
                   "default: text formats to stdout")
    v.add_argument("-f", "--format", choices=["dot", "svg", "png", "pdf", "html", "graphml",
                                              "json", "txt"],
                   help="output format (default: from --output's extension, else dot)")
    v.add_argument("--block", type=int, default=0, help="block index to draw (default 0)")
    v.add_argument("--hide-backward", action="store_true", help="leave out backward ops")
    v.add_argument("--hide-optimizer", action="store_true",
                   help="leave out optimizer, clip, regularization and LR-schedule ops")
    v.add_argument("--highlight", action="append", metavar="REGEX", default=None,
                   help="highlight variables / op types matching REGEX (repeatable)")
    v.add_argument("--diff-against", metavar="OLD_PROGRAM",
                   help="mark what PROGRAM adds to / removes from OLD_PROGRAM")
    v.add_argument("--title", help="title of the picture / page")
    v.add_argument("--rankdir", choices=["TB", "LR", "BT", "RL"], default="TB",
                   help="layout direction (default TB)")
    v.add_argument("--no-legend", action="store_true", help="omit the legend")
    v.add_argument("--no-clusters", action="store_true", help="do not group name scopes")
    v.add_argument("--no-edge-labels", action="store_true", help="omit slot names on edges")

    i = sub.add_parser("info", help="summarize a program: ops by role, parameters, feeds and "
                       "fetches", description="Print ops by role, parameters with shapes, the "
                       "parameter count and (for inference models) the feeds and fetches.")
    i.add_argument("input", metavar="PROGRAM", help="program JSON file, inference-model "
                   "directory, or fluid.save prefix")
    i.add_argument("--json", action="store_true", help="print JSON instead of text")

    o = sub.add_parser("ops", help="list the registered ops with slots, attributes and "
                       "gradients", description="List registered ops: input/output slots "
                       "(* duplicable, ? dispensable), attributes with defaults, and how the "
                       "gradient is defined.")
    o.add_argument("pattern", nargs="?", help="only op types matching this regex")
    o.add_argument("--with-grad-ops", action="store_true",
                   help="also list the generated <type>_grad ops")
    o.add_argument("--json", action="store_true", help="print JSON instead of text")
    return p


# -- loading ----------------------------------------------------------------------------------
def load_input(path: str) -> Any:
    """A Program from a program file, an inference-model directory or a fluid.save prefix."""
    from .core.serialize import load_program
    if os.path.isdir(path):
        model = os.path.join(path, "__model__")
        if os.path.isfile(model):
            return load_program(model)
        models = sorted(n for n in os.listdir(path) if n.endswith(".pdmodel"))
        if len(models) == 1:
            return load_program(os.path.join(path, models[0]))
        raise _UsageError(f"directory '{path}' holds no __model__ file"
                          + (f" and several .pdmodel files {models}" if models else ""))
    for suffix in (".pdparams", ".pdopt"):
        if path.endswith(suffix):
            path = path[:-len(suffix)] + ".pdmodel"
    if not os.path.exists(path) and os.path.isfile(path + ".pdmodel"):
        path += ".pdmodel"
    if not os.path.exists(path):
        raise _UsageError(f"input '{path}' does not exist")
    return load_program(path)


# -- commands ---------------------------------------------------------------------------------
_BINARY = ("png", "pdf")


def _cmd_viz(args: argparse.Namespace, out: TextIO) -> int:
    from . import viz
    program = load_input(args.input)
    if not 0 <= args.block < len(program.blocks):
        raise _UsageError(f"--block {args.block} is out of range: the program has "
                          f"{len(program.blocks)} block(s)")
    fmt = args.format
    if fmt is None:
        fmt = viz.format_from_path(args.output) if args.output else "dot"
    if args.output is None and fmt in _BINARY:
        raise _UsageError(f"format {fmt} is binary: give an output file with -o")
    if args.highlight:
        for pat in args.highlight:
            try:
                re.compile(pat)
            except re.error as e:
                raise _UsageError(f"--highlight {pat!r} is not a valid regex: {e}") from None
    opts: Dict[str, Any] = dict(block=args.block, hide_backward=args.hide_backward,
                                hide_optimizer=args.hide_optimizer, highlight=args.highlight)
    if args.diff_against:
        old = load_input(args.diff_against)
        obj: Any = viz.diff_graph(old, program, **opts)
        opts = {}
    else:
        obj = program
    style = dict(title=args.title, legend=not args.no_legend, clusters=not args.no_clusters,
                 edge_labels=not args.no_edge_labels, rankdir=args.rankdir)
    if args.output:
        viz.export(obj, args.output, fmt, **style, **opts)
        return 0
    if fmt == "txt":
        text = program.block(args.block).to_string() + "\n"
    elif fmt == "graphml":
        text = viz.to_graphml(obj, **opts)
    elif fmt == "json":
        text = json.dumps(viz.to_node_link(obj, **opts), indent=1) + "\n"
    elif fmt == "html":
        text = viz.to_html(obj, **style, **opts)
    elif fmt == "svg":
        text = viz.render(viz.to_dot(obj, **style, **opts), "svg").decode("utf-8")
    else:
        text = viz.to_dot(obj, **style, **opts)
    out.write(text)
    return 0


def _info(program: Any) -> Dict[str, Any]:
    from collections import Counter
    from .core.ir import Parameter
    from .io import feed_fetch_targets, is_belong_to_optimizer
    from .viz.graph import op_group
    ops = [op for b in program.blocks for op in b.ops]
    by_group = Counter(op_group(op) for op in ops)
    params = []
    total = 0
    for p in program.all_parameters():
        n = 1
        for d in p.shape:
            n *= int(d)
        total += n
        params.append({"name": p.name, "shape": list(p.shape),
                       "dtype": _dtype(p.dtype), "size": n, "trainable": bool(p.trainable)})
    opt_state = [v.name for v in program.list_vars() if is_belong_to_optimizer(v)
                 and not isinstance(v, Parameter)]
    feeds, fetches = feed_fetch_targets(program)
    block0 = program.global_block()
    describe = lambda v: {"name": v.name, "shape": list(v.shape), "dtype": _dtype(v.dtype)}
    return {"blocks": len(program.blocks), "ops": len(ops),
            "ops_by_role": {k: by_group[k] for k in sorted(by_group)},
            "op_types": dict(sorted(Counter(op.type for op in ops).items())),
            "parameters": params, "parameter_count": total,
            "optimizer_state": opt_state,
            "feeds": [describe(block0.var(n)) for n in feeds],
            "fetches": [describe(v) for v in fetches]}


def _dtype(dt: Any) -> str:
    from .core.dtypes import convert_dtype
    if dt is None:
        return "?"
    try:
        return convert_dtype(dt)
    except ValueError:
        return str(dt)


def _cmd_info(args: argparse.Namespace, out: TextIO) -> int:
    info = _info(load_input(args.input))
    if args.json:
        out.write(json.dumps(info, indent=1) + "\n")
        return 0
    lines = [f"blocks: {info['blocks']}", f"ops: {info['ops']}"]
    for k, n in info["ops_by_role"].items():
        lines.append(f"  {k:<15} {n}")
    lines.append(f"parameters: {len(info['parameters'])} ({info['parameter_count']:,} values)")
    width = max([len(p["name"]) for p in info["parameters"]] + [4])
    for p in info["parameters"]:
        flag = "" if p["trainable"] else "  (not trainable)"
        lines.append(f"  {p['name']:<{width}}  {str(p['shape']):<14} {p['dtype']}{flag}")
    if info["optimizer_state"]:
        lines.append(f"optimizer state: {len(info['optimizer_state'])} variables")
    if info["feeds"] or info["fetches"]:
        fmt = lambda v: f"{v['name']} {v['shape']} {v['dtype']}"
        lines.append("feeds: " + ", ".join(fmt(v) for v in info["feeds"]))
        lines.append("fetches: " + ", ".join(fmt(v) for v in info["fetches"]))
    out.write("\n".join(lines) + "\n")
    return 0


def _op_entry(op_type: str) -> Dict[str, Any]:
    from .core import registry
    d = registry.get_op_def(op_type)
    slot = lambda s: s.name + ("*" if s.duplicable else "") + ("?" if s.dispensable else "")
    if d.forward_def is not None:
        grad = f"gradient op of {d.forward_def.type}"
    elif op_type.endswith("_grad"):
        grad = f"gradient op of {op_type[:-len('_grad')]}"
    elif d.no_grad:
        grad = "none (no_grad)"
    elif d.has_make_grad():
        grad = "composite (make_grad)"
    elif d.has_backward():
        grad = f"{op_type}_grad"
    else:
        grad = "none"
    doc = [" ".join((type(d).__doc__ or "").strip().split("\n\n")[0].split())]
    return {"type": op_type, "inputs": [slot(s) for s in d.in_slots],
            "outputs": [slot(s) for s in d.out_slots],
            "attrs": {k: _jsonable(v) for k, v in d.attr_defaults.items()},
            "has_gradient": d.differentiable and not grad.startswith("gradient op of"),
            "gradient": grad, "doc": doc[0] if doc else ""}


def _jsonable(v: Any) -> Any:
    from .core.dtypes import VarType
    if isinstance(v, VarType):
        return v.name
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    return repr(v)


def _cmd_ops(args: argparse.Namespace, out: TextIO) -> int:
    from . import ops as _ops  # noqa: F401  (registers every op)
    from .core import registry
    try:
        pat = re.compile(args.pattern) if args.pattern else None
    except re.error as e:
        raise _UsageError(f"pattern {args.pattern!r} is not a valid regex: {e}") from None
    entries = []
    for t in registry.all_op_types():
        if pat is not None and not pat.search(t):
            continue
        e = _op_entry(t)
        if not args.with_grad_ops and e["gradient"].startswith("gradient op of"):
            continue
        entries.append(e)
    if args.json:
        out.write(json.dumps(entries, indent=1) + "\n")
        return 0
    lines = []
    for e in entries:
        attrs = ", ".join(f"{k}={json.dumps(v)}" for k, v in e["attrs"].items()) or "-"
        lines.append(f"{e['type']}")
        if e["doc"]:
            lines.append(f"    {e['doc']}")
        lines.append(f"    inputs:   {', '.join(e['inputs']) or '-'}")
        lines.append(f"    outputs:  {', '.join(e['outputs']) or '-'}")
        lines.append(f"    attrs:    {attrs}")
        lines.append(f"    gradient: {e['gradient']}")
    lines.append(f"{len(entries)} op(s)")
    out.write("\n".join(lines) + "\n")
    return 0


_COMMANDS = {"viz": _cmd_viz, "info": _cmd_info, "ops": _cmd_ops}


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of the ``fluidlite`` console script; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    prog = f"fluidlite {args.command}"
    try:
        return _COMMANDS[args.command](args, sys.stdout)
    except _UsageError as e:
        sys.stderr.write(f"{prog}: error: {e} (see '{prog} --help')\n")
        return 2
    except BrokenPipeError:
        return 0
    except (OSError, ValueError, RuntimeError, IndexError, TypeError) as e:
        msg = " ".join(str(e).split("\n"))
        sys.stderr.write(f"{prog}: error: {msg}\n")
        return 1
