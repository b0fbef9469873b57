"""Thin writers over the graph (GraphML, node-link JSON) and ``export(obj, path)`` which picks
the writer from the file extension and writes atomically.

What needs Graphviz: PNG and PDF (rendered by Graphviz's ``dot`` program or pygraphviz). SVG
is drawn by Graphviz when it is installed and by fluidlite's own layered layout otherwise
(``renderer=`` chooses); DOT, HTML (both pages), GraphML, JSON and text need nothing."""
from __future__ import annotations

import io
import json
import os
import re
from typing import Any, Dict, Optional, Union

import networkx as nx

from ..formats.serialize import atomic_write
from .dot import as_graph, render, to_dot
from .html import to_html
from .interactive import to_interactive_html
from .svg import RENDERERS, svg_text

__all__ = ["to_graphml", "to_node_link", "export", "FORMATS", "RENDERERS", "format_from_path"]

#: format -> file extensions
FORMATS: Dict[str, tuple] = {
    "dot": (".dot", ".gv"), "svg": (".svg",), "png": (".png",), "pdf": (".pdf",),
    "html": (".html", ".htm"), "html-static": (), "graphml": (".graphml",), "json": (".json",),
    "txt": (".txt",),
}


def to_graphml(obj: Any, **graph_opts: Any) -> str:
    """GraphML text (readable with ``networkx.read_graphml``; node ids and keys kept)."""
    g = _xml_clean(as_graph(obj, **graph_opts))
    buf = io.BytesIO()
    nx.write_graphml(g, buf, encoding="utf-8", prettyprint=True)
    return buf.getvalue().decode("utf-8")


# characters XML 1.0 cannot carry at all (a variable name may hold any of them)
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _xml_clean(g: "nx.MultiDiGraph") -> "nx.MultiDiGraph":
    """``g`` with every string (node ids, attribute values) that holds a character XML 1.0
    cannot carry rewritten with its Python escape (``\\x00``), so the document is
    well-formed; ``g`` itself is not changed."""
    def clean(v: Any) -> Any:
        return _NOT_XML.sub(lambda m: repr(m.group())[1:-1], v) if isinstance(v, str) else v
    out = nx.MultiDiGraph(**{k: clean(v) for k, v in g.graph.items()})
    for n, d in g.nodes(data=True):
        out.add_node(clean(n), **{k: clean(v) for k, v in d.items()})
    for u, v, k, d in g.edges(keys=True, data=True):
        out.add_edge(clean(u), clean(v), key=clean(k), **{a: clean(b) for a, b in d.items()})
    return out


def to_node_link(obj: Any, **graph_opts: Any) -> Dict[str, Any]:
    """networkx's node-link document (``edges`` key): ``{"directed", "multigraph", "graph",
    "nodes": [{"id", ...attrs}], "edges": [{"source", "target", "key", ...attrs}]}``.
    Read it back with ``networkx.node_link_graph(doc, edges="edges")`` (networkx >= 3.4) or
    after renaming ``edges`` to ``links``."""
    g = as_graph(obj, **graph_opts)
    return {"directed": True, "multigraph": True, "graph": dict(g.graph),
            "nodes": [dict(d, id=n) for n, d in g.nodes(data=True)],
            "edges": [dict(d, source=u, target=v, key=k)
                      for u, v, k, d in g.edges(keys=True, data=True)]}


def format_from_path(path: str) -> str:
    """The export format named by ``path``'s extension (see ``FORMATS``); ValueError if none.

    Args:
        path: a file name such as ``net.svg``.

    Example:
        >>> format_from_path("net.gv")
        'dot'
    """
    ext = os.path.splitext(str(path))[1].lower()
    for fmt, exts in FORMATS.items():
        if ext in exts:
            return fmt
    raise ValueError(f"cannot tell the export format from the file name '{path}'; use one of "
                     f"{sorted(e for es in FORMATS.values() for e in es)} or pass format=")


def export(obj: Any, path: Union[str, "os.PathLike[str]"], format: Optional[str] = None, *,
           title: Optional[str] = None, legend: bool = True, clusters: bool = True,
           edge_labels: bool = True, rankdir: str = "TB", dpi: Optional[float] = None,
           layout: str = "elk", renderer: str = "auto", profile: Any = None,
           **graph_opts: Any) -> str:
    """Write ``obj`` to ``path`` in ``format``, atomically, and return the path written.

    Args:
        obj: a Program, a Block, or a graph from ``to_networkx`` / ``diff_graph``.
        path: the file to write.
        format: dot, svg, png, pdf, html, html-static, graphml, json or txt; default: from
            the extension (``.dot``/``.gv``, ``.svg``, ``.png``, ``.pdf``, ``.html``/``.htm``,
            ``.graphml``, ``.json``, ``.txt``). ``html`` is the interactive viewer,
            ``html-static`` the page of picture and tables (``to_html``).
        title, legend, clusters, edge_labels, rankdir: how the picture looks.
        dpi: resolution of a PNG.
        layout: the interactive viewer: ``elk`` (default; the hierarchical viewer laid out
            in the page by ELK), or the flat viewer laid out in Python: ``auto`` (Graphviz
            when installed and the graph is small enough), ``dot`` or ``layered``.
        renderer: who draws an SVG (``svg``, and the picture of ``html-static``): ``auto``
            (default) -- Graphviz when installed (``dot`` on PATH, or pygraphviz), else
            fluidlite's own drawing (``to_svg``, no Graphviz needed); ``graphviz``; or
            ``builtin``. PNG and PDF always need Graphviz: without it they raise
            ``GraphvizNotFoundError`` saying what to install.
        profile: the interactive viewer's time overlay: ``Executor.last_profile`` after
            ``exe.run(..., profile=True)`` (see ``to_interactive_html``); html only.
        **graph_opts: ``block``, ``hide_backward``, ``hide_optimizer``, ``highlight`` (passed
            to ``to_networkx``).

    Returns:
        ``path`` (as a string).

    Example:
        >>> import fluidlite as fluid, fluidlite.viz as viz
        >>> prog = fluid.Program()
        >>> with fluid.program_guard(prog):
        ...     y = fluid.layers.relu(fluid.data("x", [-1, 3]))
        >>> viz.export(prog, "relu.svg")       # with or without Graphviz: an SVG
        'relu.svg'
    """
    path = os.fspath(path)
    fmt = (format or format_from_path(path)).lower()
    if fmt not in FORMATS:
        raise ValueError(f"unknown export format {fmt!r}; choose one of {sorted(FORMATS)}")
    if renderer not in RENDERERS:
        raise ValueError(f"renderer must be one of {list(RENDERERS)}; got {renderer!r}")
    if profile is not None and fmt != "html":
        raise ValueError(f"profile= (the time overlay) is drawn by the interactive html "
                         f"viewer only; got format {fmt!r}")
    style = dict(legend=legend, clusters=clusters, edge_labels=edge_labels, rankdir=rankdir)
    if fmt == "txt":
        from ..core.ir import Block, Program
        if isinstance(obj, Program):
            blk = graph_opts.get("block")
            text = obj.to_string() if blk is None else obj.block(blk).to_string()
        elif isinstance(obj, Block):
            text = obj.to_string()
        else:
            raise TypeError("the txt format needs a Program or Block, not a graph")
        data = (text + "\n").encode("utf-8")
    elif fmt == "graphml":
        data = to_graphml(obj, **graph_opts).encode("utf-8")
    elif fmt == "json":
        data = (json.dumps(to_node_link(obj, **graph_opts), indent=1) + "\n").encode("utf-8")
    elif fmt == "html":
        data = to_interactive_html(obj, title=title, layout=layout, profile=profile, **style,
                                   **graph_opts).encode("utf-8")
    elif fmt == "html-static":
        data = to_html(obj, title=title, renderer=renderer, **style,
                       **graph_opts).encode("utf-8")
    elif fmt == "svg":
        data = svg_text(obj, renderer=renderer, title=title, **style,
                        **graph_opts).encode("utf-8")
    else:
        dot_text = to_dot(obj, title=title, dpi=dpi, **style, **graph_opts)
        data = dot_text.encode("utf-8") if fmt == "dot" else render(dot_text, fmt)
    atomic_write(path, data)
    return path
