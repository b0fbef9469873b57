"""Graph views of programs: one traversal (``to_networkx``) and thin writers over it.

    import fluidlite.viz as viz
    viz.export(main_program, "net.html")             # interactive viewer: groups first (ELK)
    viz.export(main_program, "net.html", format="html-static")  # static page: SVG + tables
    viz.export(main_program, "net.svg", hide_backward=True)     # also .dot .png .graphml .json
    svg = viz.to_svg(main_program)            # SVG drawn by fluidlite itself (no Graphviz)
    viz.export(viz.diff_graph(before, main_program), "diff.html")  # what minimize() added
"""
from __future__ import annotations

from .dot import (GraphvizNotFoundError, OP_STYLES, VAR_STYLES, graphviz_available, quote,
                  render, to_dot)
from .export import FORMATS, RENDERERS, export, format_from_path, to_graphml, to_node_link
from .graph import (CATEGORIES, GROUPS, ROLES, diff_graph, op_group, pass_name, role_name,
                    to_networkx, var_category)
from .html import to_html
from .interactive import to_interactive_html
from .layout import layout
from .svg import to_svg

__all__ = ["to_networkx", "diff_graph", "to_dot", "to_graphml", "to_node_link", "to_html",
           "to_interactive_html", "layout", "to_svg", "RENDERERS",
           "render", "export", "graphviz_available", "GraphvizNotFoundError", "FORMATS",
           "format_from_path", "role_name", "pass_name", "op_group", "var_category", "quote",
           "OP_STYLES", "VAR_STYLES", "ROLES", "GROUPS", "CATEGORIES"]
