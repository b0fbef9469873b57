"""The ``fluidlite`` command line (also ``python -m fluidlite``).

    fluidlite viz PROGRAM [-o OUT] [--format F] [--block N] [--hide-backward] [--hide-optimizer]
                  [--highlight REGEX ...] [--diff-against OLD] [--title T] [--rankdir LR]
                  [--renderer auto|graphviz|builtin]
    fluidlite info PROGRAM [--json]
    fluidlite ops [PATTERN] [--with-grad-ops] [--json]

PROGRAM is a program JSON file (``fluidlite.io``'s ``__model__`` / ``.pdmodel``, or
``fluidlite.formats.serialize.save_program`` output), a saved inference-model directory, or a
``fluid.save`` prefix / ``.pdparams`` path; it is read like ``fluidlite.io`` reads it (through
the checkpoint manifest, so a file that changed after it was saved is refused).

Exit codes, always with exactly one line on stderr and never a traceback:

* 0 -- success (also when stdout is closed early, e.g. piped into ``head``);
* 2 -- usage error: a bad option or value, an input path that names nothing loadable (does not
  exist, a directory without a program), an output whose directory does not exist, that is a
  directory, or whose extension names no format;
* 1 -- the input exists but cannot be read or is not a valid program (unreadable, not a regular
  file, corrupted, truncated, failing its checkpoint checksum, from a newer format, using an
  unknown op), the output cannot be written, or any other failure;
* 130 -- interrupted (Ctrl-C).
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


class _InputError(Exception):
    """An input that exists but cannot be read or parsed, or an output that cannot be written
    (exit code 1)."""


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
                       "Only PNG and PDF need Graphviz (the `dot` program, e.g. `apt-get "
                       "install graphviz`, or pip install \"fluidlite[viz]\" for pygraphviz). "
                       "SVG is drawn by Graphviz when it is installed and by fluidlite's own "
                       "layered layout otherwise (--renderer chooses). The HTML pages work "
                       "without Graphviz too (laid out by Graphviz when installed, else by "
                       "fluidlite). DOT, GraphML, JSON and text need nothing.")
    v.add_argument("input", metavar="PROGRAM", help="program JSON file, inference-model "
                   "directory, or fluid.save prefix")
    v.add_argument("-o", "--output", help="output file (format from its extension); "
                   "default: text formats to stdout")
    v.add_argument("-f", "--format", choices=["dot", "svg", "png", "pdf", "html", "graphml",
                                              "json", "txt",
                                              "html-static"],   # issue 19: html = viewer
                   help="output format (default: from --output's extension, else dot); html "
                   "is the interactive viewer, html-static the picture-and-tables page")
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
    v.add_argument("--renderer", choices=["auto", "graphviz", "builtin"], default="auto",
                   help="who draws SVG and the html-static picture: auto (default: Graphviz "
                   "when installed, else fluidlite), graphviz (fail without it) or builtin "
                   "(fluidlite, no Graphviz needed)")

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
    _add_format_commands(sub)       # issue 18: convert, export-onnx
    return p


# -- issue 18: convert / export-onnx (logic in fluidlite/convert.py) --------------------------
def _add_format_commands(sub: Any) -> None:
    c = sub.add_parser("convert", help="convert a saved model between Paddle's format and "
                       "fluidlite's JSON", description="Rewrite an inference-model directory "
                       "(or Paddle path prefix, or one program file) in another format: "
                       "'paddle' (ProgramDesc protobuf + tensor streams, as fluid 1.8) or "
                       "'json' (fluidlite's JSON program + .npy tensors).")
    c.add_argument("input", metavar="SRC", help="model directory, <prefix> of "
                   "<prefix>.pdmodel, or a program file")
    c.add_argument("output", metavar="DST", help="output directory (a file for a program "
                   "file)")
    c.add_argument("--to", required=True, choices=["json", "paddle"], help="target format")
    b = sub.add_parser("bench", add_help=False,
                       help="inference latency (median, p90) and throughput per engine and "
                       "batch size: fluidlite bench MODEL_DIR [--batch 1 8 32] (see "
                       "'fluidlite bench --help')")
    b.add_argument("args", nargs=argparse.REMAINDER)
    r = sub.add_parser("run", help="run an unchanged fluid 1.x script: in that process "
                       "`import paddle` / `import paddle.fluid` resolve to fluidlite "
                       "(paddle.batch, paddle.reader, paddle.dataset included)")
    r.add_argument("script", help="the script, e.g. train.py")
    r.add_argument("args", nargs=argparse.REMAINDER, help="the script's own arguments")
    e = sub.add_parser("export-onnx", help="export a saved inference model to ONNX",
                       description="Export an inference-model directory (or Paddle path "
                       "prefix) to an ONNX model with a dynamic batch dimension. Needs "
                       "pip install 'fluidlite[onnx]'.")
    e.add_argument("input", metavar="MODEL_DIR", help="inference-model directory or "
                   "<prefix> of <prefix>.pdmodel")
    e.add_argument("-o", "--output", required=True, help="the .onnx file to write")
    e.add_argument("--opset", type=int, default=17, help="ONNX opset version (default 17)")


def _format_input(path: str) -> None:
    if not os.path.exists(path) and not os.path.isfile(path + ".pdmodel"):
        raise _UsageError(f"input '{path}' does not exist")


def _cmd_convert(args: argparse.Namespace, out: TextIO) -> int:
    from .convert import convert
    _format_input(args.input)
    what = convert(args.input, args.output, args.to)
    out.write(f"wrote {what} '{args.output}' ({args.to})\n")
    return 0


def _cmd_export_onnx(args: argparse.Namespace, out: TextIO) -> int:
    from .convert import export_onnx
    _format_input(args.input)
    _check_output(args.output)
    model = export_onnx(args.input, args.output, args.opset)
    out.write(f"wrote '{args.output}': {len(model.graph.node)} ONNX nodes, opset "
              f"{args.opset}\n")
    return 0


# -- loading ----------------------------------------------------------------------------------
def load_input(path: str) -> Any:
    """A Program from a program file, an inference-model directory or a fluid.save prefix.
    Raises ``_UsageError`` when ``path`` names nothing loadable and ``_InputError`` when what it
    names cannot be read; format errors (``ProgramFormatError``, ``CheckpointError``) pass."""
    if os.path.isdir(path):
        names = _files(path)
        if "__model__" in names:
            return _read(os.path.join(path, "__model__"))
        models = sorted(n for n in names if n.endswith(".pdmodel"))
        if len(models) == 1:
            return _read(os.path.join(path, models[0]))
        if os.path.exists(os.path.join(path, "__model__")):
            raise _InputError(f"'{os.path.join(path, '__model__')}' is not a regular file")
        raise _UsageError(f"directory '{path}' holds no __model__ file"
                          + (f" and several .pdmodel files {models}" if models else ""))
    for suffix in (".pdparams", ".pdopt"):
        if path.endswith(suffix):
            path = path[:-len(suffix)] + ".pdmodel"
    if not _exists(path) and _exists(path + ".pdmodel"):
        path += ".pdmodel"
    if not _exists(path):
        raise _UsageError(f"input '{path}' does not exist")
    return _read(path)


def _files(directory: str) -> Any:
    """The file names a checkpoint reader sees in ``directory`` (including published ones
    still in a staging directory after an interrupted save)."""
    from .formats import checkpoint
    try:
        with checkpoint.Reader(directory) as reader:
            return reader.names()
    except OSError as e:
        raise _InputError(f"cannot read directory '{directory}': {e.strerror or e}") from None


def _exists(path: str) -> bool:
    if os.path.exists(path):
        return True
    directory, name = os.path.split(path)
    return bool(name) and os.path.isdir(directory or ".") and name in _files(directory or ".")


def _read(path: str) -> Any:
    from .io import read_program
    if os.path.exists(path) and not os.path.isfile(path):
        raise _InputError(f"input '{path}' is not a regular file")
    try:
        return read_program(path)
    except RecursionError:
        raise _InputError(f"program file '{path}' is not a valid fluidlite program: it is "
                          f"nested too deeply") from None
    except MemoryError:
        raise _InputError(f"program file '{path}' is too large to load") from None
    except OSError as e:
        raise _InputError(f"cannot read '{path}': {e.strerror or e}") from None


# -- commands ---------------------------------------------------------------------------------
_BINARY = ("png", "pdf")


def _cmd_viz(args: argparse.Namespace, out: TextIO) -> int:
    from . import viz
    fmt = args.format
    if args.output:
        _check_output(args.output)
        if fmt is None:
            try:
                fmt = viz.format_from_path(args.output)
            except ValueError as e:
                raise _UsageError(str(e).replace(" or pass format=", " or pass -f")) from None
    fmt = fmt or "dot"
    if args.output is None and fmt in _BINARY:
        raise _UsageError(f"format {fmt} is binary: give an output file with -o")
    if args.highlight:
        for pat in args.highlight:
            try:
                re.compile(pat)
            except re.error as e:
                raise _UsageError(f"--highlight {pat!r} is not a valid regex: {e}") from None
    program = load_input(args.input)
    if not 0 <= args.block < len(program.blocks):
        raise _UsageError(f"--block {args.block} is out of range: the program has "
                          f"{len(program.blocks)} block(s)")
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
        try:
            viz.export(obj, args.output, fmt, renderer=args.renderer, **style, **opts)
        except OSError as e:
            raise _InputError(f"cannot write '{args.output}': {e.strerror or e}") from None
        return 0
    if fmt == "txt":
        text = program.block(args.block).to_string() + "\n"
    elif fmt == "graphml":
        text = viz.to_graphml(obj, **opts)
    elif fmt == "json":
        text = json.dumps(viz.to_node_link(obj, **opts), indent=1) + "\n"
    elif fmt == "html":        # issue 19: the interactive viewer, as `-o x.html` writes
        text = viz.to_interactive_html(obj, **style, **opts)
    elif fmt == "html-static":
        text = viz.to_html(obj, renderer=args.renderer, **style, **opts)
    elif fmt == "svg":
        from .viz.svg import svg_text
        text = svg_text(obj, renderer=args.renderer, **style, **opts)
    else:
        text = viz.to_dot(obj, **style, **opts)
    out.write(text)
    return 0


def _check_output(path: str) -> None:
    parent = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise _UsageError(f"output '{path}' is a directory; give a file name")
    if not os.path.isdir(parent):
        raise _UsageError(f"the directory of output '{path}' does not exist")


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

    def describe(v: Any) -> Dict[str, Any]:
        return {"name": v.name, "shape": list(v.shape), "dtype": _dtype(v.dtype)}
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
        lines.append("feeds: " + ", ".join(map(_var_text, info["feeds"])))
        lines.append("fetches: " + ", ".join(map(_var_text, info["fetches"])))
    out.write(_printable("\n".join(lines)) + "\n")
    return 0


# a model's names are data: escape sequences in them must not drive the user's terminal
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _printable(text: str) -> str:
    """``text`` with control characters (ESC, BEL, ...; not newline or tab) shown as
    ``\\x1b``-style escapes."""
    return _CONTROLS.sub(lambda m: repr(m.group())[1:-1], text)


def _var_text(v: Dict[str, Any]) -> str:
    return f"{v['name']} {v['shape']} {v['dtype']}"


def _op_entry(op_type: str) -> Dict[str, Any]:
    from .core import registry
    d = registry.get_op_def(op_type)

    def slot(s: Any) -> str:
        return s.name + ("*" if s.duplicable else "") + ("?" if s.dispensable else "")
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
            "gradient": grad, "doc": doc[0] if doc else "",
            "defined_in": f"{type(d).__module__.replace('.', '/')}.py ({type(d).__qualname__})"}


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
        lines.append(f"    defined in: {e['defined_in']}")
    lines.append(f"{len(entries)} op(s)")
    out.write("\n".join(lines) + "\n")
    return 0


_COMMANDS = {"viz": _cmd_viz, "info": _cmd_info, "ops": _cmd_ops,
             "convert": _cmd_convert, "export-onnx": _cmd_export_onnx}   # issue 18


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of the ``fluidlite`` console script; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["run"]:          # the script's own arguments are its business, not argparse's
        from .paddle_compat import run
        return run.main(argv[1:])
    if argv[:1] == ["bench"]:        # its options are fluidlite.inference.bench's
        from .inference import bench
        return bench.main(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    prog = f"fluidlite {args.command}"
    try:
        return _COMMANDS[args.command](args, sys.stdout)
    except _UsageError as e:
        sys.stderr.write(f"{prog}: error: {_one_line(e)} (see '{prog} --help')\n")
        return 2
    except BrokenPipeError:
        _silence_stdout()
        return 0
    except KeyboardInterrupt:
        sys.stderr.write(f"{prog}: interrupted\n")
        return 130
    except Exception as e:  # noqa: BLE001 - the contract: one line and an exit code, always
        known = (_InputError, OSError, ValueError, RuntimeError)
        msg = _one_line(e) if isinstance(e, known) else f"{type(e).__name__}: {_one_line(e)}"
        sys.stderr.write(f"{prog}: error: {msg}\n")
        return 1


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split()) or type(e).__name__


def _silence_stdout() -> None:
    """The reader went away: point stdout at /dev/null so the exit-time flush stays quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass
