"""Thin writers over the graph (GraphML, node-link JSON) and ``export(obj, path)`` which picks
the writer from the file extension and writes atomically."""
from __future__ import annotations

import io
import json
import os
from typing import Any, Dict, Optional, Union

import networkx as nx

from ..core.serialize import atomic_write
from .dot import as_graph, render, to_dot
from .html import to_html
from .interactive import to_interactive_html

__all__ = ["to_graphml", "to_node_link", "export", "FORMATS", "format_from_path"]

#: format -> file extensions
FORMATS: Dict[str, tuple] = {
    "dot": (".dot", ".gv"), "svg": (".svg",), "png": (".png",), "pdf": (".pdf",),
    "html": (".html", ".htm"), "html-static": (), "graphml": (".graphml",), "json": (".json",),
    "txt": (".txt",),
}


def to_graphml(obj: Any, **graph_opts: Any) -> str:
    """GraphML text (readable with ``networkx.read_graphml``; node ids and keys kept)."""
    g = as_graph(obj, **graph_opts)
    buf = io.BytesIO()
    nx.write_graphml(g, buf, encoding="utf-8", prettyprint=True)
    return buf.getvalue().decode("utf-8")


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
    ext = os.path.splitext(str(path))[1].lower()
    for fmt, exts in FORMATS.items():
        if ext in exts:
            return fmt
    raise ValueError(f"cannot tell the export format from the file name '{path}'; use one of "
                     f"{sorted(e for es in FORMATS.values() for e in es)} or pass format=")


def export(obj: Any, path: Union[str, "os.PathLike[str]"], format: Optional[str] = None, *,
           title: Optional[str] = None, legend: bool = True, clusters: bool = True,
           edge_labels: bool = True, rankdir: str = "TB", dpi: Optional[float] = None,
           layout: str = "auto", **graph_opts: Any) -> str:
    """Write ``obj`` (Program, Block, or a graph from ``to_networkx``/``diff_graph``) to
    ``path`` in ``format`` (default: from the extension: dot/gv, svg, png, pdf, html,
    graphml, json, txt). ``html`` is the interactive viewer (``layout``: auto, dot or
    layered); ``html-static`` the page of picture and tables (``to_html``). ``graph_opts``:
    ``block``, ``hide_backward``, ``hide_optimizer``, ``highlight``; ``dpi`` sets the PNG
    resolution. Returns the path written."""
    path = os.fspath(path)
    fmt = (format or format_from_path(path)).lower()
    if fmt not in FORMATS:
        raise ValueError(f"unknown export format {fmt!r}; choose one of {sorted(FORMATS)}")
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
        data = to_interactive_html(obj, title=title, layout=layout, **style,
                                   **graph_opts).encode("utf-8")
    elif fmt == "html-static":
        data = to_html(obj, title=title, **style, **graph_opts).encode("utf-8")
    else:
        dot_text = to_dot(obj, title=title, dpi=dpi, **style, **graph_opts)
        data = dot_text.encode("utf-8") if fmt == "dot" else render(dot_text, fmt)
    atomic_write(path, data)
    return path
