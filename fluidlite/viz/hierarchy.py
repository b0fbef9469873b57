"""The group tree the interactive viewer draws first: passes, name scopes, per-parameter chains
and "series" of structurally identical siblings (TensorBoard's approach).

``group_tree(g)`` takes a graph from ``to_networkx`` (or ``diff_graph``) and returns
``(groups, op_group)``: a flat list of group records (parents before children) and, for every
op node id, the index of its innermost group (``-1``: drawn at the top level). Levels:

1. the pass that appended the op (``fl_pass``): forward (with the loss), backward, gradient
   clip, regularization, optimizer, LR schedule, distributed, feed/fetch;
2. the op's name scope, one group per path component (``/res2/block0/`` -> ``res2`` ->
   ``block0``). A backward op has no name scope of its own: it takes the scope of the forward op
   it differentiates (a ``conv2d_grad`` the one of the ``conv2d`` whose input gradients it
   writes), so the backward group mirrors the forward stages;
3. inside a group of clip / regularization / optimizer ops: one chain per parameter (the ops
   that read or write ``P`` or ``P@GRAD``, and those fed only by that chain);
4. three or more siblings with the same op-type structure (and, for scopes, the same name up to
   its number: ``optimizer_0`` ... ``optimizer_160``) become one series group ``x N`` whose
   children are the instances; three or more independent sibling ops of one type (161
   ``momentum`` updates of the optimizer pass) become a series too. A scope group holding a
   single op is dropped (the op takes its place), so per-parameter ``optimizer_N`` scopes
   become a series of ops.

Group record keys: ``n`` label, ``k`` kind (``pass``, ``scope``, ``param``, ``series``), ``p``
parent index (-1: top level), ``c`` number of ops inside, ``g`` the colour class of most of
them, ``x`` (series) the number of instances and ``par`` 1 when no instance reads what
another writes (per-parameter updates; not a chain of blocks), ``f`` the name-scope path
(scope groups).
"""
from __future__ import annotations

import re
from collections import Counter
from typing import Any, Dict, List, Optional, Tuple

import networkx as nx

from ..core import names
from .graph import ops_in_order

__all__ = ["group_tree", "PASS_LABELS", "natural_key"]

PASS_LABELS = {"io": "feed / fetch", "forward": "forward", "backward": "backward",
               "gradient_clip": "gradient clip", "regularization": "regularization",
               "optimizer": "optimizer", "lr_schedule": "LR schedule",
               "distributed": "distributed", "external": "other"}
_PASS_ORDER = list(PASS_LABELS)
_PARAM_PASSES = ("gradient_clip", "regularization", "optimizer")
SERIES_MIN = 3


def natural_key(text: str) -> Tuple[Any, ...]:
    """Sort key that orders embedded numbers numerically (``block2`` < ``block10``).

    Example:
        >>> sorted(["b10", "b2", "a"], key=natural_key)
        ['a', 'b2', 'b10']
    """
    return tuple((0, int(t), "") if t.isdigit() else (1, 0, t)
                 for t in re.split(r"(\d+)", text) if t)


def _stem(text: str) -> str:
    """A scope's name without its number: ``optimizer_12`` -> ``optimizer``."""
    return re.sub(r"[_.\-]?\d+$", "", text)


def _base_name(var: str) -> str:
    """``w@GRAD@RENAME@3`` -> ``w``: the forward variable a gradient name belongs to."""
    return var.split(names.GRAD_SUFFIX)[0].split(names.RENAME_SUFFIX)[0]


class _Node:
    """A group while the tree is built: children are ``_Node`` groups or op ids (str)."""

    def __init__(self, label: str, kind: str, path: str = "") -> None:
        self.label, self.kind, self.path = label, kind, path
        self.children: List[Any] = []
        self.scopes: Dict[str, "_Node"] = {}
        self.count = 0
        self.instances = 0
        self.parallel = False


def _op_vars(g: nx.MultiDiGraph, op: str) -> Tuple[List[str], List[str]]:
    ins = [g.nodes[u]["fl_name"] for u in g.predecessors(op)]
    outs = [g.nodes[v]["fl_name"] for v in g.successors(op)]
    return ins, outs


def _backward_scopes(g: nx.MultiDiGraph, ops: List[str]) -> Dict[str, str]:
    """For each backward op without a name scope, the scope of the forward op it
    differentiates: the forward op of its type minus ``_grad`` reading the variables whose
    gradients it writes; else any forward op touching those variables."""
    readers: Dict[str, List[str]] = {}
    writers: Dict[str, List[str]] = {}
    for op in ops:
        d = g.nodes[op]
        if d["fl_pass"] != "forward":
            continue
        ins, outs = _op_vars(g, op)
        for v in ins:
            readers.setdefault(v, []).append(op)
        for v in outs:
            writers.setdefault(v, []).append(op)
    out: Dict[str, str] = {}
    for op in ops:
        d = g.nodes[op]
        if d["fl_pass"] != "backward" or d["fl_namescope"].strip("/"):
            continue
        ins, outs = _op_vars(g, op)
        fwd_type = d["fl_type"][:-5] if d["fl_type"].endswith("_grad") else None
        grads = [_base_name(v) for v in outs if names.GRAD_SUFFIX in v]
        cands = [f for v in grads for f in readers.get(v, [])]
        best = [f for f in cands if g.nodes[f]["fl_type"] == fwd_type] or cands
        if not best:
            best = [f for v in ins + outs for f in writers.get(_base_name(v), [])
                    + readers.get(_base_name(v), [])]
        scoped = [f for f in best if g.nodes[f]["fl_namescope"].strip("/")]
        if scoped:
            out[op] = g.nodes[scoped[0]]["fl_namescope"]
    return out


def _insert(root: Dict[str, _Node], g: nx.MultiDiGraph, op: str, scope: str) -> None:
    d = g.nodes[op]
    p = d["fl_pass"] if d["fl_pass"] in PASS_LABELS else "external"
    node = root.get(p)
    if node is None:
        node = root[p] = _Node(PASS_LABELS[p], "pass", p)
    parts = [s for s in scope.split("/") if s]
    # the clip / regularization passes name their own scope: it is the pass group itself
    if parts and p in ("gradient_clip", "regularization") and \
            re.match(r"(gradient_clip|graident_clip|regularization)(_\d+)?$", parts[0]):
        parts = parts[1:]
    path = "/"
    for part in parts:
        path += part + "/"
        child = node.scopes.get(part)
        if child is None:
            child = node.scopes[part] = _Node(part, "scope", path)
            node.children.append(child)
        node = child
    node.children.append(op)


def _param_chains(g: nx.MultiDiGraph, node: _Node, params: set) -> None:
    """Split ``node``'s direct ops into one ``param`` group per parameter they serve."""
    ops = [c for c in node.children if isinstance(c, str)]
    owner: Dict[str, Optional[str]] = {}
    made_by: Dict[str, Optional[str]] = {}      # var -> the chain of the op writing it here
    for op in ops:
        ins, outs = _op_vars(g, op)
        direct = {_base_name(v) for v in ins + outs} & params
        if len(direct) == 1:
            key: Optional[str] = next(iter(direct))
        else:
            up = {made_by[v] for v in ins if v in made_by}
            key = next(iter(up)) if len(direct) == 0 and len(up) == 1 else None
        owner[op] = key
        for v in outs:
            made_by[v] = key
    chains: Dict[str, _Node] = {}
    for op in ops:
        key = owner[op]
        if key is not None and key not in chains:
            chains[key] = _Node(key, "param")
        if key is not None:
            chains[key].children.append(op)
    if len(chains) < SERIES_MIN:
        return
    new: List[Any] = []
    placed = set()
    for c in node.children:
        key = owner.get(c) if isinstance(c, str) else None
        if key is None:
            new.append(c)
        elif key not in placed:
            placed.add(key)
            new.append(chains[key])
    node.children = new


def _signature(g: nx.MultiDiGraph, c: Any, memo: Dict[int, str]) -> str:
    if isinstance(c, str):
        return g.nodes[c]["fl_type"]
    if id(c) not in memo:
        memo[id(c)] = "(" + ",".join(_signature(g, k, memo) for k in c.children) + ")"
    return memo[id(c)]


def _independent(g: nx.MultiDiGraph, ops: List[str]) -> bool:
    """No op of ``ops`` reads a variable another one writes (an op updating its own input in
    place, as ``momentum``'s ``ParamOut``, is still independent)."""
    writer: Dict[str, str] = {}
    for op in ops:
        for v in g.successors(op):
            writer.setdefault(v, op)
    return not any(writer.get(u, op) != op for op in ops for u in g.predecessors(op))


def _series(g: nx.MultiDiGraph, node: _Node, memo: Dict[int, str]) -> None:
    """Replace runs of identical siblings of ``node`` by series groups (recursively)."""
    for c in node.children:
        if not isinstance(c, str):
            _series(g, c, memo)
    # a scope holding a single op is that op
    node.children = [c.children[0] if not isinstance(c, str) and c.kind == "scope"
                     and len(c.children) == 1 and isinstance(c.children[0], str) else c
                     for c in node.children]
    # twice: a run of alike series (stage0_* x20, stage1_* x20, ...) is a series too
    node.children = _compress(g, _compress(g, node.children, memo), memo)


def _compress(g: nx.MultiDiGraph, children: List[Any], memo: Dict[int, str]) -> List[Any]:
    buckets: Dict[Tuple[str, str, str], List[Any]] = {}
    for c in children:
        if isinstance(c, str):
            key = ("op", g.nodes[c]["fl_type"], "")
        else:
            key = (c.kind, _stem(c.label) if c.kind == "scope" else "", _signature(g, c, memo))
        buckets.setdefault(key, []).append(c)
    # ops in a series: only the per-parameter updates of the clip / regularization /
    # optimizer passes (three conv2d_grad of one residual branch are a chain, not a run)
    alike = {key: len(run) >= SERIES_MIN and (key[0] != "op" or (
        g.nodes[run[0]]["fl_pass"] in _PARAM_PASSES and _independent(g, run)))
        for key, run in buckets.items()}
    new: List[Any] = []
    done = set()
    for c in children:
        key = (("op", g.nodes[c]["fl_type"], "") if isinstance(c, str) else
               (c.kind, _stem(c.label) if c.kind == "scope" else "", _signature(g, c, memo)))
        run = buckets[key]
        if not alike[key]:
            new.append(c)
            continue
        if key in done:
            continue
        done.add(key)
        new.append(_series_node(g, key, run))
    return new


def _series_node(g: nx.MultiDiGraph, key: Tuple[str, str, str], run: List[Any]) -> _Node:
    if key[0] == "op":
        label = f"{key[1]} \u00d7{len(run)}"
    elif key[0] == "scope":
        label = f"{key[1]}_* \u00d7{len(run)}"
    elif key[0] == "series":       # series of series: their label with numbers as *
        base = re.sub(r"\d+", "*", run[0].label.split(" \u00d7")[0])
        label = f"{base} \u00d7{len(run)}"
    else:            # per-parameter chains: name them by their op types
        types = []
        for op in run[0].children:
            t = g.nodes[op]["fl_type"] if isinstance(op, str) else op.label
            if t not in types:
                types.append(t)
        label = " + ".join(types[:3]) + (" \u2026" if len(types) > 3 else "") + \
            f" \u00d7{len(run)}"
    s = _Node(label, "series")
    s.children = list(run)
    s.instances = len(run)
    s.parallel = _parallel(g, run)
    return s


def _ops_of(c: Any) -> List[str]:
    if isinstance(c, str):
        return [c]
    return [op for k in c.children for op in _ops_of(k)]


def _parallel(g: nx.MultiDiGraph, run: List[Any]) -> bool:
    """No instance of ``run`` reads what another one writes (per-parameter updates, not a
    chain of blocks): the viewer may pack such instances in rows."""
    owner: Dict[str, int] = {}
    for k, c in enumerate(run):
        for op in _ops_of(c):
            for v in g.successors(op):
                owner.setdefault(v, k)
    return not any(owner.get(u, k) != k for k, c in enumerate(run)
                   for op in _ops_of(c) for u in g.predecessors(op))


def _sort_scopes(node: _Node) -> None:
    """Order the children of every group: program order, except that sibling scopes with a
    common stem (``block2``, ``block10``) follow their numbers."""
    for c in node.children:
        if not isinstance(c, str):
            _sort_scopes(c)
    for kind in ("scope", "param"):
        same = [c for c in node.children if not isinstance(c, str) and c.kind == kind]
        it = iter(sorted(same, key=lambda c: natural_key(c.label)))
        node.children = [next(it) if not isinstance(c, str) and c.kind == kind else c
                         for c in node.children]


def group_tree(g: nx.MultiDiGraph) -> Tuple[List[Dict[str, Any]], Dict[str, int]]:
    """The group tree of ``g`` (see the module docstring): ``(groups, op_group)``.

    Example:
        >>> import fluidlite as fluid, fluidlite.viz as viz
        >>> from fluidlite.viz.hierarchy import group_tree
        >>> groups, where = group_tree(viz.to_networkx(fluid.Program()))
        >>> groups, where
        ([], {})
    """
    ops = ops_in_order(g)
    bw_scope = _backward_scopes(g, ops)
    passes: Dict[str, _Node] = {}
    for op in ops:
        _insert(passes, g, op, bw_scope.get(op, g.nodes[op]["fl_namescope"]))
    params = {d["fl_name"] for _, d in g.nodes(data=True)
              if d["fl_kind"] == "var" and d.get("fl_category") == "parameter"}
    memo: Dict[int, str] = {}
    top = [passes[p] for p in _PASS_ORDER if p in passes]
    for p in top:
        _sort_scopes(p)
        stack = [p] if p.path in _PARAM_PASSES else []
        while stack:
            n = stack.pop()
            _param_chains(g, n, params)
            _sort_scopes(n)
            stack += [c for c in n.children if not isinstance(c, str) and c.kind == "scope"]
        _series(g, p, memo)
    return _flatten(g, top)


def _flatten(g: nx.MultiDiGraph, top: List[_Node]) -> Tuple[List[Dict[str, Any]],
                                                             Dict[str, int]]:
    groups: List[Dict[str, Any]] = []
    where: Dict[str, int] = {}

    def walk(n: _Node, parent: int) -> Counter:
        idx = len(groups)
        rec: Dict[str, Any] = {"n": n.label, "k": n.kind, "p": parent}
        if n.kind == "scope":
            rec["f"] = n.path
        if n.instances:
            rec["x"] = n.instances
            rec["par"] = int(n.parallel)
        groups.append(rec)
        colours: Counter = Counter()
        for c in n.children:
            if isinstance(c, str):
                where[c] = idx
                colours[g.nodes[c]["fl_group"]] += 1
            else:
                colours += walk(c, idx)
        rec["c"] = sum(colours.values())
        rec["g"] = colours.most_common(1)[0][0] if colours else "forward"
        return colours
    for p in top:
        # a pass with nothing but one op is not worth a group (a lone feed, a lone LR op)
        if len(p.children) == 1 and isinstance(p.children[0], str):
            where[p.children[0]] = -1
            continue
        walk(p, -1)
    return groups, where
