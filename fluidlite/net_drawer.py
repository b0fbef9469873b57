"""``fluid.net_drawer.draw_graph``: an op-only picture of a startup + main program.

As in fluid, only block 0 of each program is drawn, ops are the nodes (green ovals labelled
with the op type, named ``<type>_<k>``) and an edge runs from the op that last wrote a variable
to each op reading it, labelled ``Slot(var_name)``; variables nobody wrote come from a ``Feed``
node. fluid built a ``graphviz.Digraph``; fluidlite returns a ``DrawnGraph`` with the same
``source`` / ``save()`` / ``render()`` surface and needs no Python graphviz package. The graph is
a projection of ``viz.to_networkx`` (variables contracted into labelled edges).
"""
from __future__ import annotations

import itertools
import os
from typing import Any, Dict, List, Optional, Tuple

from .core.ir import Program
from .formats.serialize import atomic_write

__all__ = ["draw_graph", "DrawnGraph", "GRAPH_STYLE", "OP_STYLE", "VAR_STYLE"]

GRAPH_STYLE = {"rankdir": "TB"}
OP_STYLE = {"shape": "oval", "color": "#0F9D58", "style": "filled", "fontcolor": "#FFFFFF"}
VAR_STYLE: Dict[str, str] = {}
_graph_ids = itertools.count()


class DrawnGraph:
    """DOT source plus the file it is saved to (mirrors ``graphviz.Digraph``'s basics)."""

    def __init__(self, name: str, filename: str, source: str) -> None:
        self.name, self.filename, self.source = name, filename, source

    def save(self, filename: Optional[str] = None, directory: Optional[str] = None) -> str:
        path = filename or self.filename
        if directory:
            path = os.path.join(directory, path)
        atomic_write(path, self.source.encode("utf-8"))
        return path

    def render(self, filename: Optional[str] = None, directory: Optional[str] = None,
               format: str = "pdf") -> str:
        """Save the DOT file and render ``<file>.<format>`` with Graphviz."""
        from .viz.dot import render
        path = self.save(filename, directory)
        out = f"{path}.{format}"
        atomic_write(out, render(self.source, format))
        return out

    def __str__(self) -> str:
        return self.source

    def _repr_svg_(self) -> str:  # pragma: no cover - notebook display
        from .viz.dot import render
        return render(self.source, "svg").decode("utf-8")


def _q(s: Any) -> str:
    from .viz.dot import quote
    return quote(s)


def _attr_list(d: Dict[str, Any]) -> str:
    """``viz.dot.attr_list`` with the values quoted as ids (``text=False``), as this module
    always wrote them."""
    from .viz.dot import attr_list
    return attr_list(d, text=False)


def draw_graph(startup_program: Program, main_program: Program, **kwargs: Any) -> DrawnGraph:
    """Draw both programs' block 0 into one op graph; kwargs ``graph_attr``, ``node_attr``,
    ``edge_attr`` (dicts merged over the defaults) and ``filename`` (default ``<id>.gv``).
    The DOT file is saved; returns the ``DrawnGraph``."""
    from .viz.graph import ops_in_order, op_slots, to_networkx
    for name, p in (("startup_program", startup_program), ("main_program", main_program)):
        if not isinstance(p, Program):
            raise TypeError(f"draw_graph: {name} must be a Program, got {type(p).__name__}")
    unknown = set(kwargs) - {"graph_attr", "node_attr", "edge_attr", "filename"}
    if unknown:
        raise TypeError(f"draw_graph got unexpected keyword arguments {sorted(unknown)}")
    graph_attr = dict(GRAPH_STYLE, **(kwargs.get("graph_attr") or {}))
    node_attr = dict(OP_STYLE, **(kwargs.get("node_attr") or {}))
    edge_attr = dict(VAR_STYLE, **(kwargs.get("edge_attr") or {}))
    graph_id = next(_graph_ids)
    filename = kwargs.get("filename") or f"{graph_id}.gv"
    nodes: List[Tuple[str, str]] = []
    edges: List[Tuple[str, str, str]] = []
    writer: Dict[str, str] = {}
    counter: Dict[str, int] = {}
    need_feed = False
    for program in (startup_program, main_program):
        g = to_networkx(program)
        for nid in ops_in_order(g):
            op_type = g.nodes[nid]["fl_type"]
            k = counter.get(op_type, 0)
            counter[op_type] = k + 1
            node = f"{op_type}_{k}"
            nodes.append((node, op_type))
            ins, outs = op_slots(g, nid)
            for slot, var_names in ins.items():
                for v in var_names:
                    src = writer.get(v)
                    if src is None:
                        src, need_feed = "Feed", True
                    edges.append((src, node, f"{slot}({v})"))
            for var_names in outs.values():
                for v in var_names:
                    writer[v] = node
    lines = [f"digraph {_q(str(graph_id))} {{", "  graph " + _attr_list(graph_attr) + ";",
             "  node " + _attr_list(node_attr) + ";", "  edge " + _attr_list(edge_attr) + ";"]
    if need_feed:
        lines.append(f"  {_q('Feed')} {_attr_list({'label': 'Feed'})};")
    lines += [f"  {_q(n)} {_attr_list({'label': t})};" for n, t in nodes]
    lines += [f"  {_q(a)} -> {_q(b)} {_attr_list({'label': lab})};" for a, b, lab in edges]
    lines.append("}")
    drawn = DrawnGraph(str(graph_id), filename, "\n".join(lines) + "\n")
    drawn.save()
    return drawn
