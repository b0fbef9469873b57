"""Node positions for the interactive view: Graphviz ``dot`` when present, else a layered
(Sugiyama-style) layout computed here, so the page works without Graphviz.

``layout(g)`` returns a :class:`Layout`: per node ``(x, y, w, h)`` (centre, size; y grows
downwards), per edge the Bezier control points from ``dot`` (empty for the layered layout:
the viewer draws a vertical S-curve), name-scope boxes, and which engine ran. For a graph with
sub-blocks (``to_networkx(..., sub_blocks=True)``) the layered layout draws each sub-block with
its own layers in a box beside the op that owns it (``Layout.blocks``), as Graphviz's clusters.

``dot`` is run with bounded network-simplex iterations (``nslimit``/``mclimit``): unbounded,
a 300-node training program takes a minute, bounded it takes a fraction of a second. Graphs
above ``DOT_MAX_NODES`` nodes, or a ``dot`` run slower than ``DOT_TIMEOUT`` seconds, use the
layered layout (``dot`` is super-linear; a 5,000-op program would take many minutes).
"""
from __future__ import annotations

import json
import logging
import shutil
import subprocess
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

import networkx as nx

from .dot import _cluster_of, to_dot, unquoted_id
from .graph import ops_in_order

__all__ = ["Layout", "layout", "node_size", "DOT_MAX_NODES", "DOT_TIMEOUT"]

_log = logging.getLogger("fluidlite")

DOT_MAX_NODES = 700      # measured: ~470 nodes 1.3 s, ~610 nodes 6 s, ~890 nodes 7 s
DOT_TIMEOUT = 15.0
_ROW = 58.0        # layered layout: distance between layers
_GAP = 16.0        # layered layout: horizontal gap between nodes


@dataclass
class Layout:
    engine: str                                           # "dot" or "layered"
    pos: Dict[str, Tuple[float, float, float, float]]     # id -> (cx, cy, w, h)
    edges: Dict[Tuple[str, str], List[Tuple[float, float]]] = field(default_factory=dict)
    scopes: Dict[Tuple[str, ...], Tuple[float, float, float, float]] = field(
        default_factory=dict)                             # path -> (x0, y0, x1, y1)
    blocks: Dict[int, Tuple[float, float, float, float]] = field(
        default_factory=dict)                             # sub-block -> (x0, y0, x1, y1)


def node_size(d: Dict[str, Any]) -> Tuple[float, float]:
    """Width and height of a node's box in px (10 px Helvetica: ~6 px per character)."""
    if d["fl_kind"] == "op":
        return max(44.0, 6.3 * len(str(d["fl_type"])) + 18.0), 26.0
    extra = " ".join(x for x in (d.get("fl_shape", ""), d.get("fl_dtype", "")) if x)
    chars = max(len(str(d["fl_name"])), int(len(extra) * 0.85))
    return max(44.0, 6.0 * chars + 22.0), 34.0 if extra else 24.0


def layout(g: nx.MultiDiGraph, engine: str = "auto", rankdir: str = "TB",
           clusters: bool = True) -> Layout:
    """Positions for every node of ``g``. ``engine``: ``auto`` (dot when available and the
    graph has at most ``DOT_MAX_NODES`` nodes), ``dot`` or ``layered``."""
    if engine not in ("auto", "dot", "layered"):
        raise ValueError(f"layout engine must be auto, dot or layered; got {engine!r}")
    if engine == "auto" and shutil.which("dot") and g.number_of_nodes() > DOT_MAX_NODES:
        _log.info("%d nodes > DOT_MAX_NODES=%d: using the layered layout (dot would be slow)",
                  g.number_of_nodes(), DOT_MAX_NODES)
    elif engine == "dot" or (engine == "auto" and shutil.which("dot")):
        try:
            return _dot_layout(g, rankdir, clusters)
        except (RuntimeError, OSError, ValueError, subprocess.TimeoutExpired) as e:
            if engine == "dot":
                raise RuntimeError(f"dot layout failed: {e}") from None
            _log.warning("dot layout failed (%s); using the layered layout", e)
    return _layered_layout(g, rankdir, clusters)


# -- dot --------------------------------------------------------------------------------------
def _points(spec: str) -> List[Tuple[float, float]]:
    pts, tip = [], None
    for tok in spec.split():
        if tok.startswith("e,"):
            x, y = tok[2:].split(",")
            tip = (float(x), float(y))
        elif tok.startswith("s,"):
            continue
        else:
            x, y = tok.split(",")
            pts.append((float(x), float(y)))
    if tip is not None:
        pts += [pts[-1], tip, tip]            # one more Bezier segment to the arrow tip
    return pts


def _dot_layout(g: nx.MultiDiGraph, rankdir: str, clusters: bool) -> Layout:
    exe = shutil.which("dot")
    if not exe:
        raise RuntimeError("Graphviz `dot` is not on PATH")
    src = to_dot(g, legend=False, edge_labels=False, clusters=clusters, rankdir=rankdir)
    proc = subprocess.run([exe, "-Tjson0", "-Gnslimit=2", "-Gnslimit1=2", "-Gmclimit=0.1"],
                          input=src.encode("utf-8"), capture_output=True, timeout=DOT_TIMEOUT,
                          check=False)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.decode("utf-8", "replace").strip())
    doc = json.loads(proc.stdout)
    height = float(doc["bb"].split(",")[3])
    flip = lambda x, y: (round(x, 1), round(height - y, 1))
    pos: Dict[str, Tuple[float, float, float, float]] = {}
    names: Dict[int, str] = {}
    ids = {unquoted_id(n): n for n in g}      # Graphviz's name of each node -> its id
    scopes: Dict[Tuple[str, ...], Tuple[float, float, float, float]] = {}
    for obj in doc.get("objects", []):
        if "nodes" in obj or str(obj.get("name", "")).startswith("cluster"):
            if "bb" in obj:
                x0, y0, x1, y1 = (float(v) for v in obj["bb"].split(","))
                path = tuple(p for p in str(obj.get("label", "")).split("/") if p)
                a, b = flip(x0, y1), flip(x1, y0)
                scopes[path] = (a[0], a[1], b[0], b[1])
            continue
        name = ids.get(obj["name"], obj["name"])
        names[obj["_gvid"]] = name
        if name in g and "pos" in obj:
            x, y = (float(v) for v in obj["pos"].split(","))
            cx, cy = flip(x, y)
            pos[name] = (cx, cy, round(float(obj["width"]) * 72, 1),
                                round(float(obj["height"]) * 72, 1))
    edges: Dict[Tuple[str, str], List[Tuple[float, float]]] = {}
    for e in doc.get("edges", []):
        if e.get("style") == "invis" or "pos" not in e:
            continue
        u, v = names.get(e["tail"]), names.get(e["head"])
        if u is None or v is None:
            continue
        edges[(u, v)] = [flip(x, y) for x, y in _points(e["pos"])]
    missing = [n for n in g if n not in pos]
    if missing:
        raise RuntimeError(f"dot placed no position for {len(missing)} node(s)")
    return Layout("dot", pos, edges, scopes)


# -- layered ----------------------------------------------------------------------------------
def _layers(g: nx.MultiDiGraph) -> Dict[str, int]:
    """Layer of each node in program order: an op one below its deepest already-placed input,
    its new outputs one below it (a variable rewritten later keeps its first place)."""
    layer: Dict[str, int] = {}
    for op in ops_in_order(g):
        ins = [u for u in g.predecessors(op)]
        known = [layer[u] for u in ins if u in layer]
        lo = max(known) + 1 if known else 1
        for u in ins:
            layer.setdefault(u, lo - 1)
        layer[op] = lo
        for v in g.successors(op):
            layer.setdefault(v, lo + 1)
    for n in g:
        layer.setdefault(n, 0)
    # an op with no inputs (fill_constant ...) sits just above its first reader, not at the top
    for op in ops_in_order(g):
        if g.in_degree(op):
            continue
        outs = list(g.successors(op))
        readers = [r for v in outs for r in g.successors(v) if r != op]
        if outs and readers:
            new = min(layer[r] for r in readers) - 2
            if new > layer[op] and all(layer[v] == layer[op] + 1 for v in outs):
                layer[op] = new
                for v in outs:
                    layer[v] = new + 1
    return layer


def _layered_layout(g: nx.MultiDiGraph, rankdir: str, clusters: bool) -> Layout:
    """The layered layout of ``g``; each block an op owns gets a layout of its own, placed in a
    box beside (TB/BT: right of, LR/RL: below) everything drawn so far, level with its owner."""
    owners = json.loads(g.graph.get("fl_sub_block_owners") or "{}")
    owned = {int(b) for b in owners}
    members: Dict[int, List[str]] = {}
    for n, d in g.nodes(data=True):
        b = d.get("fl_block", 0)
        members.setdefault(b if b in owned else -1, []).append(n)
    lay = _layered_block(g.subgraph(members.get(-1, [])) if owned else g, rankdir, clusters)
    across = 0 if rankdir in ("TB", "BT") else 1      # the axis sub-blocks are stacked along
    pending = sorted(owned)
    while pending:        # a nested block goes after the block holding its owner
        ready = [b for b in pending if owners[str(b)] in lay.pos or owners[str(b)] not in g]
        b = (ready or pending)[0]
        pending.remove(b)
        if members.get(b):
            sub = _layered_block(g.subgraph(members[b]), rankdir, False)
            _place_block(lay, sub, b, lay.pos.get(owners[str(b)]), across)
    _flip(lay, rankdir)
    return lay


def _place_block(lay: Layout, sub: Layout, b: int,
                 owner: Optional[Tuple[float, float, float, float]], across: int) -> None:
    """Move ``sub`` (the layout of block ``b``) into ``lay``: a box past the far edge of what
    ``lay`` holds along axis ``across``, its top level with the ``owner`` op's (when drawn)."""
    pad, head = 14.0, 26.0
    x0 = min(x - w / 2 for x, y, w, h in sub.pos.values())
    y0 = min(y - h / 2 for x, y, w, h in sub.pos.values())
    x1 = max(x + w / 2 for x, y, w, h in sub.pos.values())
    y1 = max(y + h / 2 for x, y, w, h in sub.pos.values())
    boxes = [(x - w / 2, y - h / 2, x + w / 2, y + h / 2) for x, y, w, h in lay.pos.values()]
    boxes += list(lay.scopes.values()) + list(lay.blocks.values())
    if across == 0:
        left = max((bx[2] for bx in boxes), default=0.0) + 40.0
        top = owner[1] - owner[3] / 2 if owner else min((bx[1] for bx in boxes), default=0.0)
    else:
        top = max((bx[3] for bx in boxes), default=0.0) + 40.0
        left = owner[0] - owner[2] / 2 if owner else min((bx[0] for bx in boxes), default=0.0)
    dx, dy = left + pad - x0, top + head - y0
    for n, (x, y, w, h) in sub.pos.items():
        lay.pos[n] = (round(x + dx, 1), round(y + dy, 1), w, h)
    lay.blocks[b] = (round(left, 1), round(top, 1), round(x1 + dx + pad, 1),
                     round(y1 + dy + pad, 1))


def _flip(lay: Layout, rankdir: str) -> None:
    """Mirror a top-down (left-right) layout for BT (RL), as Graphviz does."""
    if rankdir not in ("BT", "RL") or not lay.pos:
        return
    axis = 1 if rankdir == "BT" else 0
    lo = min(p[axis] - p[axis + 2] / 2 for p in lay.pos.values())
    hi = max(p[axis] + p[axis + 2] / 2 for p in lay.pos.values())
    for bx in list(lay.scopes.values()) + list(lay.blocks.values()):
        lo, hi = min(lo, bx[axis]), max(hi, bx[axis + 2])

    def f(v: float) -> float:
        return round(lo + hi - v, 1)
    for n, p in lay.pos.items():
        q = list(p)
        q[axis] = f(p[axis])
        lay.pos[n] = (q[0], q[1], q[2], q[3])
    for table in (lay.scopes, lay.blocks):
        for k, bx in table.items():
            q = list(bx)
            q[axis], q[axis + 2] = f(bx[axis + 2]), f(bx[axis])
            table[k] = (q[0], q[1], q[2], q[3])


def _layered_block(g: nx.MultiDiGraph, rankdir: str, clusters: bool) -> Layout:
    layer = _layers(g)
    rows: Dict[int, List[str]] = {}
    for n in g:                           # insertion order: ops in program order, then vars
        rows.setdefault(layer[n], []).append(n)
    size = {n: node_size(d) for n, d in g.nodes(data=True)}
    nbrs: Dict[str, List[str]] = {n: list(set(g.predecessors(n)) | set(g.successors(n)))
                                  for n in g}
    x: Dict[str, float] = {}
    # two barycentre sweeps (down then up) order each layer by its neighbours' mean position
    for sweep in range(3):
        keys = sorted(rows) if sweep % 2 == 0 else sorted(rows, reverse=True)
        for k in keys:
            row = rows[k]
            if x:
                def bary(n: str, i: int) -> float:
                    xs = [x[m] for m in nbrs[n] if m in x and layer[m] != k]
                    return sum(xs) / len(xs) if xs else x.get(n, i * 60.0)
                want = {n: bary(n, i) for i, n in enumerate(row)}
                row.sort(key=lambda n: want[n])
            else:
                want = {n: 0.0 for n in row}
            right = float("-inf")
            for n in row:                 # pack left to right, each as near its wish as fits
                w = size[n][0]
                x[n] = max(want[n], right + _GAP + w / 2)
                right = x[n] + w / 2
    left = min(x[n] - size[n][0] / 2 for n in g) if len(g) else 0.0
    pos: Dict[str, Tuple[float, float, float, float]] = {}
    for n in g:
        w, h = size[n]
        cx, cy = round(x[n] - left + 20, 1), round(layer[n] * _ROW + 30, 1)
        if rankdir in ("LR", "RL"):
            cx, cy = round(layer[n] * 1.0 * (_ROW + 120) + 80, 1), round((x[n] - left) + 20, 1)
        pos[n] = (cx, cy, w, h)
    scopes: Dict[Tuple[str, ...], Tuple[float, float, float, float]] = {}
    if clusters:
        for n, d in g.nodes(data=True):
            path = _cluster_of(d)
            cx, cy, w, h = pos[n]
            for k in range(1, len(path) + 1):
                p = path[:k]
                pad = 8.0 + 6.0 * (len(path) - k)
                b = (cx - w / 2 - pad, cy - h / 2 - pad - 12, cx + w / 2 + pad, cy + h / 2 + pad)
                o = scopes.get(p)
                scopes[p] = b if o is None else (min(o[0], b[0]), min(o[1], b[1]),
                                                 max(o[2], b[2]), max(o[3], b[3]))
    return Layout("layered", pos, {}, scopes)
