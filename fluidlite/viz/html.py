"""A single self-contained HTML page: summary, the inline SVG picture, variable and op tables.

No JavaScript, no external stylesheet, font or image: the page is one file that opens offline.
The picture is Graphviz's when Graphviz is installed and fluidlite's own drawing (``to_svg``)
otherwise; ``renderer="graphviz"`` (or ``require_svg=True``) insists on Graphviz and raises
``GraphvizNotFoundError`` without it.
"""
from __future__ import annotations

import html
import json
import re
from collections import Counter
from typing import Any, Dict, List, Optional

import networkx as nx

from .dot import OP_STYLES, VAR_STYLES, as_graph
from .graph import GROUPS, ops_in_order, op_slots
from .svg import svg_text

__all__ = ["to_html", "svg_for_inline"]

_CSS = """
body{font-family:Helvetica,Arial,sans-serif;margin:1.5em;color:#1B2631;background:#FFF}
h1{font-size:1.4em;margin-bottom:.2em} h2{font-size:1.15em;margin-top:1.6em}
.sub{color:#566573;margin-top:0}
table{border-collapse:collapse;font-size:12px;margin:.5em 0}
th,td{border:1px solid #D5D8DC;padding:3px 6px;text-align:left;vertical-align:top}
th{background:#F2F3F4} tr.added td{background:#E9F7EF} tr.removed td{color:#7F8C8D;
text-decoration:line-through} tr.changed td{background:#EBF5FB}
td.sw{width:14px} code{font-size:11px;white-space:pre-wrap;word-break:break-all}
.picture{overflow:auto;border:1px solid #D5D8DC;padding:.5em;max-height:90vh}
.picture svg{max-width:none;height:auto}
.summary td{border:none;padding:1px 10px 1px 0} .note{background:#FEF9E7;padding:.6em;
border:1px solid #F4D03F}
"""


def svg_for_inline(svg: bytes) -> str:
    """An SVG document (Graphviz's or ``to_svg``'s) without the XML prolog, DOCTYPE and
    comments, ready to inline in HTML.

    Args:
        svg: the SVG file's bytes (UTF-8).

    Example:
        >>> svg_for_inline(b'<?xml version="1.0"?><!-- x --><svg></svg>')
        '<svg></svg>'
    """
    text = svg.decode("utf-8")
    text = re.sub(r"<\?xml[^>]*\?>", "", text)
    text = re.sub(r"<!DOCTYPE[^>]*>", "", text, flags=re.S)
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    return text.strip()


def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _fmt_slots(slots: Dict[str, List[str]]) -> str:
    return "<br>".join(f"{_e(k)}: {_e(', '.join(v))}" for k, v in slots.items())


def _fmt_attrs(attrs_json: str) -> str:
    try:
        attrs = json.loads(attrs_json)
    except ValueError:
        return _e(attrs_json)
    return "<br>".join(f"{_e(k)} = {_e(json.dumps(v))}" for k, v in attrs.items())


def _summary(g: nx.MultiDiGraph) -> str:
    ops = [d for _, d in g.nodes(data=True) if d["fl_kind"] == "op" and d["fl_diff"] != "removed"]
    params = [d for _, d in g.nodes(data=True)
              if d["fl_kind"] == "var" and d.get("fl_category") == "parameter"
              and d["fl_diff"] != "removed"]
    n_elems = 0
    for d in params:
        dims = [int(x) for x in d["fl_shape"].strip("[]").split(",") if x.strip()]
        k = 1
        for x in dims:
            k *= x
        n_elems += k
    by_group = Counter(d["fl_group"] for d in ops)
    rows = [f"<tr><td>operators</td><td>{len(ops)}</td></tr>"]
    for grp in GROUPS:
        if by_group.get(grp):
            fill = OP_STYLES[grp][0]
            rows.append(f'<tr><td><span style="background:{fill}">&nbsp;&nbsp;&nbsp;</span> '
                        f'{_e(OP_STYLES[grp][3])}s</td><td>{by_group[grp]}</td></tr>')
    rows.append(f"<tr><td>parameters</td><td>{len(params)} ({n_elems:,} values)</td></tr>")
    nvars = sum(1 for _, d in g.nodes(data=True)
                if d["fl_kind"] == "var" and d["fl_diff"] != "removed")
    rows.append(f"<tr><td>variables</td><td>{nvars}</td></tr>")
    if g.graph.get("fl_diff"):
        s = json.loads(g.graph.get("fl_diff_summary", "{}"))
        added = Counter(s.get("added_ops", []))
        rows.append(f"<tr><td><b>added ops</b></td><td>{len(s.get('added_ops', []))}: "
                    + _e(", ".join(f"{k} x{v}" if v > 1 else k for k, v in added.items()))
                    + "</td></tr>")
        rows.append(f"<tr><td><b>added variables</b></td><td>{len(s.get('added_vars', []))}"
                    f"</td></tr>")
        if s.get("removed_ops") or s.get("removed_vars"):
            rows.append(f"<tr><td><b>removed</b></td><td>{len(s.get('removed_ops', []))} ops, "
                        f"{len(s.get('removed_vars', []))} variables</td></tr>")
        if s.get("changed_ops") or s.get("changed_vars"):
            rows.append(f"<tr><td><b>changed</b></td><td>{len(s.get('changed_ops', []))} ops, "
                        f"{len(s.get('changed_vars', []))} variables</td></tr>")
    return '<table class="summary">' + "".join(rows) + "</table>"


def _row(cells: List[str], d: Dict[str, Any], diff: bool) -> str:
    """A table row of a node's ``cells`` (plus its diff status in a diff), classed by that
    status so the page's style colours it."""
    if diff:
        cells = cells + [f"<td>{_e(d['fl_diff'])}</td>"]
    return f'<tr class="{_e(d["fl_diff"])}">' + "".join(cells) + "</tr>"


def _table(head: List[str], rows: List[str]) -> str:
    """A ``<table>`` of the ``head`` titles and the ready ``rows``."""
    return ("<table><tr>" + "".join(f"<th>{_e(h)}</th>" for h in head) + "</tr>"
            + "".join(rows) + "</table>")


def _var_table(g: nx.MultiDiGraph, diff: bool) -> str:
    head = ["", "name", "category", "type", "shape", "dtype", "persistable", "stop_gradient",
            "created by", "name scope"] + (["diff"] if diff else [])
    rows = []
    for n, d in g.nodes(data=True):
        if d["fl_kind"] != "var":
            continue
        fill = VAR_STYLES.get(d.get("fl_category", "temporary"), VAR_STYLES["temporary"])[0]
        extra = ""
        if d.get("fl_category") == "parameter":
            bits = [f"trainable={d.get('fl_trainable')}", f"need_clip={d.get('fl_need_clip')}"]
            if d.get("fl_regularizer"):
                bits.append(d["fl_regularizer"])
            extra = "<br><small>" + _e(", ".join(bits)) + "</small>"
        cells = [f'<td class="sw" style="background:{fill}"></td>',
                 f"<td><code>{_e(d['fl_name'])}</code>{extra}</td>",
                 f"<td>{_e(d.get('fl_category', ''))}</td>", f"<td>{_e(d.get('fl_type', ''))}</td>",
                 f"<td>{_e(d.get('fl_shape', ''))}</td>", f"<td>{_e(d.get('fl_dtype', ''))}</td>",
                 f"<td>{_e(d.get('fl_persistable', ''))}</td>",
                 f"<td>{_e(d.get('fl_stop_gradient', ''))}</td>",
                 f"<td>{_e(d.get('fl_pass', ''))}</td>",
                 f"<td>{_e(d.get('fl_namescope', ''))}</td>"]
        rows.append(_row(cells, d, diff))
    return _table(head, rows)


def _op_table(g: nx.MultiDiGraph, diff: bool) -> str:
    head = ["", "#", "type", "role", "pass", "name scope", "inputs", "outputs", "attributes",
            "created at"] + (["diff"] if diff else [])
    rows = []
    for n in ops_in_order(g):
        d = g.nodes[n]
        ins, outs = op_slots(g, n)
        fill = OP_STYLES.get(d["fl_group"], OP_STYLES["forward"])[0]
        idx = d["fl_index"] if d["fl_diff"] != "removed" else f"(old {d['fl_index']})"
        cells = [f'<td class="sw" style="background:{fill}"></td>', f"<td>{_e(idx)}</td>",
                 f"<td><b>{_e(d['fl_type'])}</b></td>",
                 f"<td>{_e(d['fl_role'])} ({d['fl_op_role']})</td>",
                 f"<td>{_e(d['fl_pass'])}</td>", f"<td>{_e(d['fl_namescope'])}</td>",
                 f"<td><code>{_fmt_slots(ins)}</code></td>",
                 f"<td><code>{_fmt_slots(outs)}</code></td>",
                 f"<td><code>{_fmt_attrs(d['fl_attrs'])}</code></td>",
                 f"<td><code>{_e(d.get('fl_callsite', ''))}</code></td>"]
        rows.append(_row(cells, d, diff))
    return _table(head, rows)


def to_html(obj: Any, *, title: Optional[str] = None, require_svg: bool = False,
            renderer: str = "auto", legend: bool = True, clusters: bool = True,
            edge_labels: bool = True, rankdir: str = "TB", **graph_opts: Any) -> str:
    """The static HTML page (summary, picture, op and variable tables) of a Program/Block or of
    a graph from ``to_networkx`` / ``diff_graph``.

    Args:
        obj: a Program, a Block, or a graph (then ``graph_opts`` must be empty).
        title: the page heading (default: the graph's title).
        require_svg: the same as ``renderer="graphviz"`` (kept for older callers).
        renderer: who draws the picture: ``auto`` (Graphviz when installed, else fluidlite's
            ``to_svg``), ``graphviz`` (``GraphvizNotFoundError`` without it) or ``builtin``.
        legend, clusters, edge_labels, rankdir: how the picture looks.
        **graph_opts: passed to ``to_networkx`` (``block``, ``hide_backward`` ...).

    Returns:
        The page, one self-contained HTML document.

    Example:
        >>> import fluidlite as fluid, fluidlite.viz as viz
        >>> "<svg" in viz.to_html(fluid.Program(), renderer="builtin")
        True
    """
    g = as_graph(obj, **graph_opts)
    diff = bool(g.graph.get("fl_diff"))
    heading = title or g.graph.get("fl_title") or "fluidlite program"
    picture = svg_for_inline(svg_text(
        g, renderer="graphviz" if require_svg else renderer, legend=legend, clusters=clusters,
        edge_labels=edge_labels, rankdir=rankdir, title=heading).encode("utf-8"))
    hidden = [w for w, k in (("backward", "fl_hide_backward"), ("optimizer", "fl_hide_optimizer"))
              if g.graph.get(k)]
    sub = f"block {g.graph.get('fl_block', 0)} of {g.graph.get('fl_num_blocks', 1)}"
    if hidden:
        sub += " &middot; hidden: " + ", ".join(hidden) + " ops"
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             f"<title>{_e(heading)}</title>", f"<style>{_CSS}</style></head><body>",
             f"<h1>{_e(heading)}</h1>", f'<p class="sub">{sub}</p>', _summary(g),
             "<h2>Graph</h2>", f'<div class="picture">{picture}</div>',
             "<h2>Operators</h2>", _op_table(g, diff),
             "<h2>Variables</h2>", _var_table(g, diff),
             '<p class="sub">Generated by fluidlite.viz</p></body></html>']
    return "\n".join(parts) + "\n"
