"""DOT writer over the ``to_networkx`` graph, and rendering through Graphviz.

Styling (see ``OP_STYLES`` / ``VAR_STYLES``): ops are coloured by role — forward, loss,
backward, optimize, LR schedule — and gradient-clip ops (yellow hexagons) and regularization
ops (orange octagons) stand apart from the other optimize-role ops. Parameters are teal boxes,
data inputs light-blue "input" shapes, other persistables light-teal boxes, temporaries grey
ellipses and gradients pink ellipses. Name scopes become nested clusters; a legend node lists
the classes present. In a diff, added nodes get a thick green border and a ``+`` prefix,
removed ones are dashed and grey with a ``-`` prefix, unchanged ones are faded.

Every id is quoted, so names such as ``fc_0.w_0@GRAD@RENAME@0`` or ``a:b`` are safe; control
characters are written as escapes (labels show ``\\x07``), so the SVG Graphviz makes of any
name is well-formed XML. Rendering runs ``dot`` with an argument list (no
shell), else pygraphviz, else raises ``GraphvizNotFoundError`` with install instructions (an
SVG can be had without Graphviz: ``svg.to_svg`` / ``export``).
"""
from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from typing import Any, Dict, List, Optional, Tuple

import networkx as nx

from .graph import CATEGORIES, GROUPS, ops_in_order, to_networkx

__all__ = ["to_dot", "render", "graphviz_available", "GraphvizNotFoundError", "OP_STYLES",
           "VAR_STYLES", "quote", "attr_list", "as_graph"]

#: group -> (fill colour, font colour, shape, legend label)
OP_STYLES: Dict[str, Tuple[str, str, str, str]] = {
    "io": ("#AAB7B8", "#000000", "box", "feed / fetch op"),
    "forward": ("#3B5B92", "#FFFFFF", "box", "forward op"),
    "loss": ("#7D3C98", "#FFFFFF", "box", "loss op"),
    "backward": ("#B03A2E", "#FFFFFF", "box", "backward op"),
    "gradient_clip": ("#F4D03F", "#000000", "hexagon", "gradient clip op"),
    "regularization": ("#E67E22", "#000000", "octagon", "regularization op"),
    "optimize": ("#1E8449", "#FFFFFF", "box", "optimizer update op"),
    "lr_schedule": ("#566573", "#FFFFFF", "box", "LR schedule op"),
    "distributed": ("#17202A", "#FFFFFF", "box", "distributed op"),
}
#: category -> (fill colour, border colour, font colour, shape, legend label)
VAR_STYLES: Dict[str, Tuple[str, str, str, str, str]] = {
    "data": ("#D6EAF8", "#2E86C1", "#1B2631", "invhouse", "data (fed) variable"),
    "parameter": ("#148B97", "#0B5E66", "#FFFFFF", "box", "parameter"),
    "persistable": ("#A3E4D7", "#148B97", "#1B2631", "box", "persistable (optimizer state, LR)"),
    "temporary": ("#F2F3F4", "#999999", "#333333", "ellipse", "temporary"),
    "gradient": ("#FADBD8", "#C0392B", "#333333", "ellipse", "gradient"),
}
_DIFF_COLOR = {"added": "#00A651", "changed": "#2E86C1", "removed": "#999999"}
_DIFF_PREFIX = {"added": "+ ", "changed": "~ ", "removed": "- ", "same": ""}
_HIGHLIGHT = "#FF8C00"
_FONT = "Helvetica"
RENDER_FORMATS = ("svg", "png", "pdf")


class GraphvizNotFoundError(RuntimeError):
    """Neither the ``dot`` program nor pygraphviz is available to render an image."""


# control characters other than newline (a line break in DOT) and CR (dropped), lone surrogates
# and U+FFFE/U+FFFF: Graphviz copies them into its SVG, where XML 1.0 forbids them (and a
# surrogate cannot even be encoded), so they become escapes
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff\ufffe\uffff]")


def quote(s: Any, text: bool = False) -> str:
    """A DOT double-quoted string: backslashes and quotes escaped, newlines as ``\\n``, other
    control characters as escapes, so any SVG Graphviz makes of it is well-formed XML.

    Args:
        s: any object; ``str(s)`` is quoted.
        text: ``s`` is shown (a label): a control character is drawn as its Python escape
            (``\\x00``). Otherwise ``s`` is an id: the escape is written after the backslashes
            are doubled, so that two different names stay two different ids.

    Example:
        >>> quote('a"b')
        '"a\\\\"b"'
    """
    s = str(s)
    if text:
        s = _CONTROL.sub(lambda m: repr(m.group())[1:-1], s)
    s = s.replace("\\", "\\\\").replace('"', '\\"')
    if not text:
        s = _CONTROL.sub(lambda m: repr(m.group())[1:-1], s)
    return '"' + s.replace("\r", "").replace("\n", "\\n") + '"'


def unquoted_id(s: Any) -> str:
    """The name Graphviz gives the node ``quote(s)`` (its JSON output and SVG ``<title>``):
    Graphviz's lexer turns ``\\"`` into ``"`` and keeps every other backslash."""
    return quote(s)[1:-1].replace('\\"', '"')


def attr_list(d: Dict[str, Any], text: bool = True) -> str:
    """A DOT attribute list ``[k="v", ...]`` of ``d`` (keys written as they are, values
    quoted by ``quote(v, text=text)``: shown text by default)."""
    return "[" + ", ".join(f"{k}={quote(v, text=text)}" for k, v in d.items()) + "]"


def as_graph(obj: Any, **opts: Any) -> nx.MultiDiGraph:
    """``obj`` itself when it is already a graph, else ``to_networkx(obj, **opts)`` (with the
    blocks its ops own, ``sub_blocks=True``, unless told otherwise)."""
    if isinstance(obj, nx.Graph):
        if opts:
            unused = sorted(k for k, v in opts.items() if v not in (None, False))
            if unused:
                raise ValueError(f"options {unused} apply when building the graph; pass them "
                                 f"to to_networkx() instead of with a ready graph")
        return obj
    opts.setdefault("sub_blocks", True)
    return to_networkx(obj, **opts)


def _fade(color: str) -> str:
    return color + "55" if color.startswith("#") and len(color) == 7 else color


def _node_attrs(d: Dict[str, Any], diff_mode: bool) -> Dict[str, Any]:
    status = d.get("fl_diff", "same")
    if d["fl_kind"] == "op":
        fill, font, shape, _ = OP_STYLES.get(d.get("fl_group", "forward"), OP_STYLES["forward"])
        border = "#1B2631"
        label = d["fl_type"]
        style = "rounded,filled,bold" if shape == "box" else "filled,bold"
    else:
        fill, border, font, shape, _ = VAR_STYLES.get(d.get("fl_category", "temporary"),
                                                      VAR_STYLES["temporary"])
        label = d["fl_name"]
        extra = " ".join(x for x in (d.get("fl_shape", ""), d.get("fl_dtype", "")) if x)
        if extra:
            label += "\n" + extra
        style = "rounded,filled" if shape == "box" else "filled"
        if d.get("fl_category") == "parameter":
            style += ",bold"
    a: Dict[str, Any] = {"label": _DIFF_PREFIX.get(status, "") + label, "shape": shape,
                         "style": style, "fillcolor": fill, "color": border, "fontcolor": font}
    if diff_mode:
        if status == "same":
            a["fillcolor"], a["color"] = _fade(fill), _fade(border)
            a["fontcolor"] = "#7F8C8D" if font == "#FFFFFF" else _fade(font)
        elif status == "removed":
            a["style"] = style.replace("filled", "dashed").replace(",bold", "")
            a["fillcolor"], a["color"], a["fontcolor"] = "#FFFFFF", _DIFF_COLOR["removed"], \
                "#7F8C8D"
        else:
            a["color"], a["penwidth"] = _DIFF_COLOR[status], "4"
    if d.get("fl_highlight"):
        a["color"], a["penwidth"] = _HIGHLIGHT, "4"
    return a


def _edge_attrs(d: Dict[str, Any], diff_mode: bool, edge_labels: bool,
                in_place: bool = False) -> Dict[str, Any]:
    a: Dict[str, Any] = {}
    if edge_labels:
        a["label"] = d["fl_slot"]
    if in_place:      # an op writing back a var it reads (ParamOut = Param): not a layout edge
        a["style"], a["constraint"] = "dashed", "false"
    status = d.get("fl_diff", "same")
    if diff_mode:
        if status == "added":
            a["color"], a["penwidth"] = _DIFF_COLOR["added"], "2"
        elif status == "removed":
            a["color"], a["style"] = _DIFF_COLOR["removed"], "dashed"
        else:
            a["color"] = "#BBBBBB"
    if d.get("fl_highlight"):
        a["color"], a["penwidth"] = _HIGHLIGHT, "2"
    return a


def _scope_path(ns: str) -> Tuple[str, ...]:
    return tuple(p for p in str(ns or "").split("/") if p)


def _cluster_of(d: Dict[str, Any]) -> Tuple[str, ...]:
    if d["fl_kind"] == "var" and d.get("fl_category") in ("parameter", "data", "persistable"):
        return ()
    return _scope_path(d.get("fl_namescope", ""))


def _legend(g: nx.MultiDiGraph, diff_mode: bool) -> str:
    groups = {d.get("fl_group") for _, d in g.nodes(data=True) if d["fl_kind"] == "op"}
    cats = {d.get("fl_category") for _, d in g.nodes(data=True) if d["fl_kind"] == "var"}
    rows = []
    for key in GROUPS:
        if key in groups:
            fill, font, shape, text = OP_STYLES[key]
            rows.append((fill, text))
    for key in CATEGORIES:
        if key in cats:
            fill, _, font, shape, text = VAR_STYLES[key]
            rows.append((fill, text))
    cells = ['<TR><TD COLSPAN="2"><B>Legend</B></TD></TR>']
    for fill, text in rows:
        cells.append(f'<TR><TD BGCOLOR="{fill}" WIDTH="24"></TD><TD ALIGN="LEFT">'
                     f'{html.escape(text)}</TD></TR>')
    if diff_mode:
        cells.append(f'<TR><TD BGCOLOR="{_DIFF_COLOR["added"]}"></TD><TD ALIGN="LEFT">'
                     f'+ added (thick green border)</TD></TR>')
        cells.append(f'<TR><TD BGCOLOR="{_DIFF_COLOR["changed"]}"></TD><TD ALIGN="LEFT">'
                     f'~ changed</TD></TR>')
        cells.append('<TR><TD BGCOLOR="#FFFFFF"></TD><TD ALIGN="LEFT">- removed (dashed)'
                     '</TD></TR>')
        cells.append('<TR><TD BGCOLOR="#DDDDDD"></TD><TD ALIGN="LEFT">unchanged (faded)'
                     '</TD></TR>')
    if any(d.get("fl_highlight") for _, d in g.nodes(data=True)):
        cells.append(f'<TR><TD BGCOLOR="{_HIGHLIGHT}"></TD><TD ALIGN="LEFT">highlighted</TD>'
                     f'</TR>')
    table = ('<<TABLE BORDER="0" CELLBORDER="1" CELLSPACING="0" CELLPADDING="3">'
             + "".join(cells) + "</TABLE>>")
    return f'  "legend:table" [shape="plaintext", fontsize="9", label={table}];'


def to_dot(obj: Any, *, legend: bool = True, clusters: bool = True, edge_labels: bool = True,
           rankdir: str = "TB", title: Optional[str] = None, dpi: Optional[float] = None,
           **graph_opts: Any) -> str:
    """DOT text of a Program/Block (``graph_opts`` go to ``to_networkx``: ``block``,
    ``hide_backward``, ``hide_optimizer``, ``highlight``) or of a graph from
    ``to_networkx``/``diff_graph``. ``dpi`` sets the resolution of PNG renderings."""
    if rankdir not in ("TB", "LR", "BT", "RL"):
        raise ValueError(f"rankdir must be one of TB, LR, BT, RL; got {rankdir!r}")
    g = as_graph(obj, **graph_opts)
    diff_mode = bool(g.graph.get("fl_diff"))
    label = title if title is not None else g.graph.get("fl_title", "")
    out = _dot_header(g, rankdir, label, dpi)
    # nodes: ops in program order, then vars in insertion order, grouped by name scope; the
    # nodes of a sub-block go to a cluster of their own, nested in its owner's block
    owners = json.loads(g.graph.get("fl_sub_block_owners") or "{}")
    op_ids = ops_in_order(g)
    tree, blocks = _partition(g, op_ids, owners, clusters)
    out += _scope_clusters(g, tree, diff_mode)
    out += _block_clusters(g, blocks, owners, diff_mode)
    for u, v, d in sorted(g.edges(data=True), key=lambda e: _edge_order(g, e)):
        in_place = d["fl_direction"] == "out" and g.has_edge(v, u)
        out.append(f"  {quote(u)} -> {quote(v)} "
                   + attr_list(_edge_attrs(d, diff_mode, edge_labels, in_place)) + ";")
    out += _layout_edges(g, op_ids)
    if legend:
        out.append(_legend(g, diff_mode))
    out.append("}")
    return "\n".join(out) + "\n"


def _dot_header(g: nx.MultiDiGraph, rankdir: str, label: str,
                dpi: Optional[float]) -> List[str]:
    """The ``digraph`` line and the graph/node/edge defaults."""
    return ["digraph " + quote(g.graph.get("fl_title", "program")) + " {",
            "  graph " + attr_list({"rankdir": rankdir, "fontname": _FONT, "fontsize": "12",
                                    "label": label, "labelloc": "t", "newrank": "true",
                                    "nodesep": "0.25", "ranksep": "0.35", "compound": "true",
                                    **({"dpi": str(float(dpi))} if dpi else {})}) + ";",
            "  node " + attr_list({"fontname": _FONT, "fontsize": "10", "height": "0.3",
                                   "margin": "0.08,0.03"}) + ";",
            "  edge " + attr_list({"fontname": _FONT, "fontsize": "8", "fontcolor": "#555555",
                                   "color": "#555555", "arrowsize": "0.6"}) + ";"]


def _partition(g: nx.MultiDiGraph, op_ids: List[str], owners: Dict[str, str], clusters: bool
               ) -> Tuple[Dict[Tuple[str, ...], List[str]], Dict[int, List[str]]]:
    """The nodes (ops in program order, then vars) split into those of the drawn block, by
    name-scope path (all under ``()`` without ``clusters``), and those of each sub-block."""
    main_block = g.graph.get("fl_block", 0)
    var_ids = [n for n, d in g.nodes(data=True) if d["fl_kind"] == "var"]
    tree: Dict[Tuple[str, ...], List[str]] = {}
    blocks: Dict[int, List[str]] = {}
    for n in op_ids + var_ids:
        b = g.nodes[n].get("fl_block", main_block)
        if str(b) in owners:
            blocks.setdefault(b, []).append(n)
            continue
        path = _cluster_of(g.nodes[n]) if clusters else ()
        tree.setdefault(path, []).append(n)
    return tree, blocks


def _scope_clusters(g: nx.MultiDiGraph, tree: Dict[Tuple[str, ...], List[str]],
                    diff_mode: bool) -> List[str]:
    """The drawn block's nodes, each name scope a dashed cluster nested in its parent's."""
    paths = set()
    for path in tree:
        for k in range(1, len(path) + 1):
            paths.add(path[:k])
    counter = iter(range(10 ** 9))
    out: List[str] = []

    def emit(path: Tuple[str, ...], indent: str) -> None:
        for n in tree.get(path, []):
            out.append(indent + quote(n) + " " + attr_list(_node_attrs(g.nodes[n], diff_mode))
                       + ";")
        for child in sorted(p for p in paths if len(p) == len(path) + 1 and p[:-1] == path):
            out.append(f"{indent}subgraph {quote(f'cluster_{next(counter)}')} {{")
            out.append(indent + "  graph " + attr_list({
                "label": "/" + "/".join(child) + "/", "style": "rounded,dashed",
                "color": "#7F8C8D", "fontcolor": "#566573", "fontsize": "10",
                "labeljust": "l"}) + ";")
            emit(child, indent + "  ")
            out.append(indent + "}")

    emit((), "  ")
    return out


def _block_clusters(g: nx.MultiDiGraph, blocks: Dict[int, List[str]], owners: Dict[str, str],
                    diff_mode: bool) -> List[str]:
    """Each sub-block as a cluster (nested in its owner's block), then a dashed edge from each
    owner op to the first op of its block."""
    out: List[str] = []

    def emit_block(b: int, indent: str) -> None:
        owner = owners[str(b)]
        kind = g.nodes[owner].get("fl_type", "") if owner in g else ""
        out.append(f"{indent}subgraph {quote(f'cluster_block_{b}')} {{")
        out.append(indent + "  graph " + attr_list({
            "label": f"block {b} ({kind} {owner})", "style": "rounded", "color": "#2E86C1",
            "fontcolor": "#1B4F72", "fontsize": "10", "labeljust": "l",
            "bgcolor": "#F4F9FD"}) + ";")
        for n in blocks.get(b, []):
            out.append(indent + "  " + quote(n) + " " + attr_list(_node_attrs(g.nodes[n],
                                                                              diff_mode)) + ";")
        for child in sorted(int(c) for c, o in owners.items()
                            if o in g and g.nodes[o].get("fl_block") == b):
            emit_block(child, indent + "  ")
        out.append(indent + "}")

    for b in sorted(int(c) for c, o in owners.items()
                    if o in g and str(g.nodes[o].get("fl_block")) not in owners):
        emit_block(b, "  ")
    for b_str, owner in sorted(owners.items()):       # the owner points at its block
        members = [n for n in blocks.get(int(b_str), []) if g.nodes[n]["fl_kind"] == "op"]
        if owner in g and members:
            out.append(f"  {quote(owner)} -> {quote(members[0])} " + attr_list({
                "lhead": f"cluster_block_{b_str}", "style": "dashed", "color": "#2E86C1",
                "label": "sub_block", "arrowhead": "odot"}) + ";")
    return out


def _layout_edges(g: nx.MultiDiGraph, op_ids: List[str]) -> List[str]:
    """Invisible edges that keep the picture in program order where the var-node graph alone
    does not (a variable node stands for every value the name takes):

    * an op reading a variable after an in-place rewrite of it (the regularization ``sum`` into
      a gradient, ``increment`` of a counter) is placed below that rewriting op;
    * an optimizer-side op (clip, regularization, update) is placed below the gradient named
      in its ``op_role_var`` when that gradient exists earlier (e.g. a regularization
      ``scale`` that only reads the parameter sits next to the gradient it is added to).
    """
    index = {n: (g.nodes[n]["fl_block"], g.nodes[n]["fl_index"]) for n in op_ids
             if g.nodes[n].get("fl_diff") != "removed"}
    pairs: List[Tuple[str, str]] = []
    for v, d in g.nodes(data=True):
        if d["fl_kind"] != "var":
            continue
        writers = sorted((index[u], u) for u in g.predecessors(v) if u in index)
        if not writers:
            continue
        for r in set(g.successors(v)):
            if r not in index:
                continue
            before = [w for (pos, w) in writers if pos < index[r]]
            # the value r reads came from an in-place rewrite (not from v's first producer)
            if before and before[-1] != r and (len(before) >= 2 or g.has_edge(v, before[-1])):
                pairs.append((before[-1], r))
    for n in op_ids:
        d = g.nodes[n]
        if n not in index or d.get("fl_group") not in ("gradient_clip", "regularization",
                                                        "optimize"):
            continue
        role_var = [x for x in str(d.get("fl_role_var", "")).split(",") if x]
        for grad in role_var[1::2]:
            vid = f"var:{grad}"
            if vid not in g or g.has_edge(vid, n) or g.has_edge(n, vid):
                continue
            if any(u in index and index[u] < index[n] for u in g.predecessors(vid)):
                pairs.append((vid, n))      # the gradient exists before this op: no cycle
    seen = set()
    lines = []
    for a, b in pairs:
        if (a, b) not in seen:
            seen.add((a, b))
            lines.append(f"  {quote(a)} -> {quote(b)} [style=\"invis\"];")
    return lines


def _edge_order(g: nx.MultiDiGraph, e: Tuple[str, str, Dict[str, Any]]) -> Tuple[Any, ...]:
    u, v, d = e
    op = v if d["fl_direction"] == "in" else u
    od = g.nodes[op]
    return (od.get("fl_diff") == "removed", od["fl_block"], od["fl_index"],
            d["fl_direction"] == "out", d["fl_slot"], d["fl_arg_index"])


# -- rendering --------------------------------------------------------------------------------
def graphviz_available() -> bool:
    """True when Graphviz can render (``dot`` on PATH or pygraphviz importable). PNG and PDF
    need it; SVG does not (``export`` then draws it with ``to_svg``).

    Example:
        >>> isinstance(graphviz_available(), bool)
        True
    """
    if shutil.which("dot"):
        return True
    try:
        import pygraphviz  # noqa: F401
    except ImportError:
        return False
    return True


_INSTALL_HINT = ("Rendering {fmt} needs Graphviz, which is not installed. Install the `dot` "
                 "program (Debian/Ubuntu: `sudo apt-get install graphviz`; macOS: `brew "
                 "install graphviz`; conda: `conda install graphviz`; Windows: "
                 "https://graphviz.org/download/) or the Python binding (`pip install "
                 "\"fluidlite[viz]\"`, i.e. pygraphviz, which builds against Graphviz's C "
                 "library). Without Graphviz, export SVG (drawn by fluidlite), HTML, DOT, "
                 "GraphML or JSON.")


def render(dot_source: str, fmt: str = "svg", timeout: float = 120.0) -> bytes:
    """Lay out ``dot_source`` with Graphviz and return the ``fmt`` (svg, png, pdf) bytes."""
    fmt = fmt.lower()
    if fmt not in RENDER_FORMATS:
        raise ValueError(f"cannot render format {fmt!r}; choose one of {list(RENDER_FORMATS)}")
    exe = shutil.which("dot")
    if exe:
        try:
            proc = subprocess.run([exe, f"-T{fmt}"], input=dot_source.encode("utf-8"),
                                  capture_output=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"`dot -T{fmt}` did not finish within {timeout:.0f}s; the graph "
                               f"may be too large (try hide_backward/hide_optimizer)") from None
        if proc.returncode != 0:
            err = proc.stderr.decode("utf-8", "replace").strip()
            raise RuntimeError(f"`dot -T{fmt}` failed with exit code {proc.returncode}: {err}")
        return proc.stdout
    try:
        import pygraphviz
    except ImportError:
        raise GraphvizNotFoundError(_INSTALL_HINT.format(fmt=fmt.upper())) from None
    agraph = pygraphviz.AGraph(string=dot_source)
    return agraph.draw(format=fmt, prog="dot")
