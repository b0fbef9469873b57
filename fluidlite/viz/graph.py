"""The one traversal every export uses: ``to_networkx`` (and ``diff_graph`` for two programs).

A block becomes a ``networkx.MultiDiGraph`` with two kinds of nodes:

* variables, id ``var:<name>``;
* ops, id ``op:<block>:<index>`` (ops of the earlier program that a diff shows as removed:
  ``old-op:<block>:<index>``).

Edges run var -> op for inputs and op -> var for outputs; the key is ``in:<slot>:<i>`` /
``out:<slot>:<i>``. Every attribute is prefixed ``fl_`` so it can never be mistaken for a
Graphviz attribute (a node attr ``shape="[-1, 4]"`` makes ``dot`` warn) and is a plain
str/int/float/bool, so GraphML and JSON writers take the graph as is.

Node attributes: ``fl_kind`` (``op``/``var``), ``fl_name``, ``fl_block``, ``fl_namescope``,
``fl_pass`` (which pass created it: forward, backward, gradient_clip, regularization, optimizer,
lr_schedule, io; for a variable the pass of its first producer, ``external`` when none),
``fl_highlight``, ``fl_diff`` (same/added/removed/changed; always ``same`` outside a diff).
Ops add ``fl_type``, ``fl_index``, ``fl_role`` (forward, loss, backward, optimize, lr_schedule,
distributed), ``fl_op_role`` (the int), ``fl_group`` (the colour class: ``fl_role`` except for
gradient_clip / regularization / io ops), ``fl_role_var``, ``fl_attrs`` (JSON of the op's own
attrs), ``fl_callsite`` and ``fl_sub_blocks`` (comma-separated indices of the blocks its
attributes refer to). Variables add ``fl_category`` (parameter, data, persistable,
gradient, temporary), ``fl_type`` (LOD_TENSOR...), ``fl_shape``, ``fl_dtype``,
``fl_persistable``, ``fl_stop_gradient``, ``fl_lod_level`` and, for parameters, ``fl_trainable``,
``fl_need_clip``, ``fl_regularizer``. Edges carry ``fl_slot``, ``fl_arg_index``,
``fl_direction``, ``fl_highlight`` and ``fl_diff``.
"""
from __future__ import annotations

import difflib
import json
import re
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import networkx as nx

from ..core import names, rewrite
from ..core.ir import Block, OpRole, Operator, Parameter, Program, Variable, creation_site
from ..core.dtypes import convert_dtype
from ..core.registry import COMMON_ATTRS

__all__ = ["to_networkx", "diff_graph", "role_name", "pass_name", "op_group", "var_category",
           "GRAPH_FORMAT", "ROLES", "GROUPS", "CATEGORIES"]

GRAPH_FORMAT = "fluidlite.graph/1"
ROLES = ("forward", "loss", "backward", "optimize", "lr_schedule", "distributed")
GROUPS = ("io", "forward", "loss", "backward", "gradient_clip", "regularization", "optimize",
          "lr_schedule", "distributed")
CATEGORIES = ("data", "parameter", "persistable", "temporary", "gradient")

Highlight = Union[None, str, Sequence[str], Callable[[str], bool]]


# -- classification ---------------------------------------------------------------------------
def role_name(role: int) -> str:
    """The display role of an ``op_role`` int (LR schedule wins over optimize, as 0x12)."""
    role = int(role or 0)
    if role & OpRole.LRSched:
        return "lr_schedule"
    if role & OpRole.Optimize:
        return "optimize"
    if role & OpRole.Backward:
        return "backward"
    if role & OpRole.Loss:
        return "loss"
    if role & (OpRole.RPC | OpRole.Dist | OpRole.Collective):
        return "distributed"
    return "forward"


def pass_name(op: Operator) -> str:
    """Which pass appended ``op``, from its role and name scope."""
    if op.type in ("feed", "fetch"):
        return "io"
    ns = str(op.attrs.get("op_namescope") or "")
    if "gradient_clip" in ns or "graident_clip" in ns:   # fluid's legacy path misspells it
        return "gradient_clip"
    if "regularization" in ns:
        return "regularization"
    role = role_name(op.attrs.get("op_role", 0))
    return {"lr_schedule": "lr_schedule", "optimize": "optimizer", "backward": "backward",
            "distributed": "distributed"}.get(role, "forward")


def op_group(op: Operator) -> str:
    """The colour class: the role, except that clip, regularization and feed/fetch ops stand out."""
    p = pass_name(op)
    if p in ("gradient_clip", "regularization", "io"):
        return p
    return role_name(op.attrs.get("op_role", 0))


def var_category(var: Variable) -> str:
    if isinstance(var, Parameter):
        return "parameter"
    if var.is_data:
        return "data"
    if var.persistable:
        return "persistable"
    if names.GRAD_SUFFIX in var.name:
        return "gradient"
    return "temporary"


def _matcher(highlight: Highlight) -> Callable[[str], bool]:
    if highlight is None:
        return lambda s: False
    if callable(highlight):
        return lambda s: bool(highlight(s))
    pats = [highlight] if isinstance(highlight, str) else list(highlight)
    try:
        compiled = [re.compile(p) for p in pats]
    except re.error as e:
        raise ValueError(f"highlight pattern is not a valid regular expression: {e}") from None
    return lambda s: any(c.search(s) for c in compiled)


def _attrs_json(op: Operator) -> str:
    from ..formats.serialize import ProgramFormatError, _enc_value
    out = {}
    for k in sorted(op.attrs):
        if k in COMMON_ATTRS:
            continue
        try:
            out[k] = _enc_value(op.attrs[k], k)
        except ProgramFormatError:
            out[k] = repr(op.attrs[k])
    return json.dumps(out, sort_keys=True)


def _dtype_str(dtype: Any) -> str:
    if dtype is None:
        return ""
    try:
        return convert_dtype(dtype)
    except ValueError:
        return dtype.name.lower()


def _shape_str(shape: Sequence[int]) -> str:
    return "[" + ", ".join(str(int(d)) for d in shape) + "]"


# -- the traversal ----------------------------------------------------------------------------
def _resolve_block(obj: Union[Program, Block], block: Optional[int]) -> Block:
    if isinstance(obj, Program):
        idx = 0 if block is None else int(block)
        if not 0 <= idx < len(obj.blocks):
            raise IndexError(f"block index {idx} is out of range: the program has "
                             f"{len(obj.blocks)} block(s) (0..{len(obj.blocks) - 1})")
        return obj.blocks[idx]
    if isinstance(obj, Block):
        if block is not None and block != obj.idx:
            raise ValueError(f"block={block} was given with Block {obj.idx}; pass the Program "
                             f"to choose a block by index")
        return obj
    raise TypeError(f"expected a fluid Program or Block, got {type(obj).__name__}")


def _hidden(op: Operator, hide_backward: bool, hide_optimizer: bool) -> bool:
    role = int(op.attrs.get("op_role", 0) or 0)
    if hide_backward and role & OpRole.Backward:
        return True
    if hide_optimizer and role & (OpRole.Optimize | OpRole.LRSched):
        return True
    return False


def _var_node(block: Block, var: Variable, producer: Optional[Operator],
              hl: bool) -> Dict[str, Any]:
    d: Dict[str, Any] = {
        "fl_kind": "var", "fl_name": var.name, "fl_block": var.block.idx,
        "fl_category": var_category(var), "fl_type": var.type.name,
        "fl_shape": _shape_str(var.shape),
        "fl_dtype": _dtype_str(var.dtype),
        "fl_persistable": bool(var.persistable), "fl_stop_gradient": bool(var.stop_gradient),
        "fl_lod_level": int(var.lod_level),
        "fl_namescope": str(producer.attrs.get("op_namescope") or "") if producer else "",
        "fl_pass": pass_name(producer) if producer else "external",
        "fl_highlight": hl, "fl_diff": "same"}
    if isinstance(var, Parameter):
        d["fl_trainable"] = bool(var.trainable)
        d["fl_need_clip"] = bool(var.need_clip)
        d["fl_regularizer"] = str(var.regularizer) if var.regularizer is not None else ""
    return d


def _op_node(block: Block, idx: int, op: Operator, hl: bool) -> Dict[str, Any]:
    role = int(op.attrs.get("op_role", 0) or 0)
    return {
        "fl_kind": "op", "fl_name": op.type, "fl_type": op.type, "fl_block": block.idx,
        "fl_index": idx, "fl_op_role": role, "fl_role": role_name(role),
        "fl_pass": pass_name(op), "fl_group": op_group(op),
        "fl_namescope": str(op.attrs.get("op_namescope") or ""),
        "fl_role_var": ",".join(str(x) for x in (op.attrs.get("op_role_var") or [])),
        "fl_attrs": _attrs_json(op),
        "fl_callsite": creation_site(op.attrs.get("op_callstack"))
        if op.attrs.get("op_callstack") else "",
        "fl_sub_blocks": ",".join(str(b) for b in _sub_blocks(op)),
        "fl_highlight": hl, "fl_diff": "same"}


def _sub_blocks(op: Operator) -> List[int]:
    """Indices of the blocks an op's attributes refer to (while / conditional_block bodies)."""
    out: List[int] = []
    for value in op.attrs.values():
        for b in (value if isinstance(value, list) else [value]):
            if isinstance(b, Block) and b.idx not in out:
                out.append(b.idx)
    return out


def op_id(block_idx: int, idx: int, prefix: str = "op") -> str:
    return f"{prefix}:{block_idx}:{idx}"


def var_id(name: str) -> str:
    return f"var:{name}"


def to_networkx(obj: Union[Program, Block], block: Optional[int] = None, *,
                hide_backward: bool = False, hide_optimizer: bool = False,
                highlight: Highlight = None, title: Optional[str] = None,
                sub_blocks: bool = False) -> nx.MultiDiGraph:
    """The graph of one block of ``obj`` (a Program: block ``block``, default 0; or a Block).

    ``hide_backward`` / ``hide_optimizer`` drop ops whose role has the Backward /
    Optimize-or-LRSched bit, and the variables only those ops touched. ``highlight``: a regex
    (or list of them, matched with ``re.search``) or a predicate, applied to variable names
    and op types; matching nodes (and edges touching a matching variable) get
    ``fl_highlight=True``.

    ``sub_blocks``: also add the ops of every block a visible op owns (a ``while`` body, a
    branch, a grad block; nested ones too), with the variables declared there; their nodes
    keep their own ``fl_block``, and the graph attribute ``fl_sub_block_owners`` (JSON) maps
    each such block to the id of the op owning it (the exports draw them as nested clusters
    attached to that op).
    """
    blk = _resolve_block(obj, block)
    match = _matcher(highlight)
    g = nx.MultiDiGraph()
    g.graph.update({"fl_format": GRAPH_FORMAT, "fl_block": blk.idx,
                    "fl_num_blocks": len(blk.program.blocks),
                    "fl_parent": max(int(getattr(blk, "parent_idx", 0) or 0), 0),
                    "fl_title": title or f"block {blk.idx}", "fl_diff": False,
                    "fl_hide_backward": bool(hide_backward),
                    "fl_hide_optimizer": bool(hide_optimizer)})
    uses = rewrite.Uses(blk)
    touched: Dict[str, bool] = {}     # var name -> used by a visible op
    visible = []
    for idx, op in enumerate(blk.ops):
        hidden = _hidden(op, hide_backward, hide_optimizer)
        for n in op.input_arg_names + op.output_arg_names:
            if n != names.EMPTY_VAR_NAME:
                touched[n] = touched.get(n, False) or not hidden
        if not hidden:
            visible.append((idx, op))
    for name, var in blk.vars.items():
        if touched.get(name, True):        # untouched vars stay; vars only hidden ops use go
            g.add_node(var_id(name), **_var_node(blk, var, uses.first_producer(name), match(name)))
    for idx, op in visible:
        nid = op_id(blk.idx, idx)
        g.add_node(nid, **_op_node(blk, idx, op, match(op.type)))
        _add_edges(g, blk, nid, op)
    if sub_blocks:
        owners: Dict[str, str] = {}
        for idx, op in visible:
            _add_sub_blocks(g, blk, op, op_id(blk.idx, idx), owners, hide_backward,
                            hide_optimizer, match)
        g.graph["fl_sub_block_owners"] = json.dumps(owners, sort_keys=True)
    return g


def _add_sub_blocks(g: nx.MultiDiGraph, blk: Block, op: Operator, owner: str,
                    owners: Dict[str, str], hide_backward: bool, hide_optimizer: bool,
                    match: Callable[[str], bool]) -> None:
    prog = blk.program
    for b in _sub_blocks(op):
        if str(b) in owners or b == blk.idx or not 0 <= b < len(prog.blocks):
            continue
        sub = prog.blocks[b]
        owners[str(b)] = owner
        for idx, sub_op in enumerate(sub.ops):
            if _hidden(sub_op, hide_backward, hide_optimizer):
                continue
            nid = op_id(b, idx)
            g.add_node(nid, **_op_node(sub, idx, sub_op, match(sub_op.type)))
            _add_edges(g, sub, nid, sub_op)
            _add_sub_blocks(g, sub, sub_op, nid, owners, hide_backward, hide_optimizer, match)


def _add_edges(g: nx.MultiDiGraph, blk: Block, nid: str, op: Operator,
               diff: str = "same") -> None:
    for direction, table in (("in", op.inputs), ("out", op.outputs)):
        for slot, arg_names in table.items():
            for i, n in enumerate(arg_names):
                if n == names.EMPTY_VAR_NAME:
                    continue
                vid = var_id(n)
                if vid not in g:     # a var of a parent block (or an undeclared one)
                    var = blk._find_var_recursive(n)
                    if var is not None:
                        g.add_node(vid, **_var_node(blk, var, None, False))
                    else:
                        g.add_node(vid, fl_kind="var", fl_name=n, fl_block=blk.idx,
                                   fl_category="temporary", fl_type="UNDECLARED", fl_shape="",
                                   fl_dtype="", fl_persistable=False, fl_stop_gradient=False,
                                   fl_lod_level=0, fl_namescope="", fl_pass="external",
                                   fl_highlight=False, fl_diff="same")
                hl = bool(g.nodes[vid].get("fl_highlight"))
                attrs = {"fl_slot": slot, "fl_arg_index": i, "fl_direction": direction,
                         "fl_highlight": hl, "fl_diff": diff}
                key = f"{direction}:{slot}:{i}"
                if direction == "in":
                    g.add_edge(vid, nid, key=key, **attrs)
                else:
                    g.add_edge(nid, vid, key=key, **attrs)


# -- diff -------------------------------------------------------------------------------------
def _op_signature(op: Operator) -> Tuple[Any, ...]:
    return (op.type,
            tuple(sorted((k, tuple(v)) for k, v in op.inputs.items())),
            tuple(sorted((k, tuple(v)) for k, v in op.outputs.items())))


def _var_signature(v: Variable) -> Tuple[Any, ...]:
    return (v.type, tuple(v.shape), v.dtype, bool(v.persistable), isinstance(v, Parameter))


def diff_graph(old: Union[Program, Block], new: Union[Program, Block],
               block: Optional[int] = None, **opts: Any) -> nx.MultiDiGraph:
    """The graph of ``new`` with every node and edge marked against ``old`` (typically a clone
    taken before ``minimize``): ``fl_diff`` is ``added`` (not in old), ``changed`` (same op or
    var, different attrs/shape), ``same``, or ``removed`` (only in old; added to the graph with
    ids ``old-op:<block>:<idx>`` / ``var:<name>``). Ops are matched by type and argument names
    in program order (a longest-common-subsequence match), variables by name.
    ``graph.graph['fl_diff_summary']`` is a JSON summary with the added op types."""
    ob, nb = _resolve_block(old, block), _resolve_block(new, block)
    g = to_networkx(new, block, **opts)
    g.graph["fl_diff"] = True
    if "title" not in opts:
        g.graph["fl_title"] = f"block {nb.idx}: changes since the earlier program"
    hide_bw, hide_opt = opts.get("hide_backward", False), opts.get("hide_optimizer", False)
    old_sigs = [_op_signature(op) for op in ob.ops]
    new_sigs = [_op_signature(op) for op in nb.ops]
    sm = difflib.SequenceMatcher(a=old_sigs, b=new_sigs, autojunk=False)
    matched_new: Dict[int, int] = {}
    for a, b, size in sm.get_matching_blocks():
        for k in range(size):
            matched_new[b + k] = a + k
    summary: Dict[str, Any] = {"added_ops": [], "removed_ops": [], "changed_ops": [],
                               "added_vars": [], "removed_vars": [], "changed_vars": []}
    for idx, op in enumerate(nb.ops):
        nid = op_id(nb.idx, idx)
        if idx not in matched_new:
            status = "added"
            summary["added_ops"].append(op.type)
        else:
            old_op = ob.ops[matched_new[idx]]
            status = "same" if _cmp_attrs(old_op) == _cmp_attrs(op) else "changed"
            if status == "changed":
                summary["changed_ops"].append(op.type)
        if nid in g:
            g.nodes[nid]["fl_diff"] = status
            if status == "added":
                for _, _, d in g.in_edges(nid, data=True):
                    d["fl_diff"] = "added"
                for _, _, d in g.out_edges(nid, data=True):
                    d["fl_diff"] = "added"
    for name, v in nb.vars.items():
        vid = var_id(name)
        if name not in ob.vars:
            status = "added"
            summary["added_vars"].append(name)
        elif _var_signature(ob.vars[name]) != _var_signature(v):
            status = "changed"
            summary["changed_vars"].append(name)
        else:
            status = "same"
        if vid in g:
            g.nodes[vid]["fl_diff"] = status
    match = _matcher(opts.get("highlight"))
    old_uses = rewrite.Uses(ob)
    for name, v in ob.vars.items():
        if name not in nb.vars:
            summary["removed_vars"].append(name)
            g.add_node(var_id(name), **dict(_var_node(ob, v, old_uses.first_producer(name),
                                                      match(name)), fl_diff="removed"))
    matched_old = set(matched_new.values())
    for idx, op in enumerate(ob.ops):
        if idx in matched_old or _hidden(op, hide_bw, hide_opt):
            continue
        summary["removed_ops"].append(op.type)
        nid = op_id(ob.idx, idx, prefix="old-op")
        g.add_node(nid, **dict(_op_node(ob, idx, op, match(op.type)), fl_diff="removed"))
        _add_edges(g, ob, nid, op, diff="removed")
    g.graph["fl_diff_summary"] = json.dumps(summary)
    return g


def _cmp_attrs(op: Operator) -> str:
    return json.dumps({k: repr(v) for k, v in sorted(op.attrs.items()) if k != "op_callstack"})


def ops_in_order(g: nx.MultiDiGraph) -> List[str]:
    """Op node ids sorted by (removed last, block, index)."""
    ops = [n for n, d in g.nodes(data=True) if d.get("fl_kind") == "op"]
    return sorted(ops, key=lambda n: (g.nodes[n].get("fl_diff") == "removed",
                                      g.nodes[n]["fl_block"], g.nodes[n]["fl_index"]))


def op_slots(g: nx.MultiDiGraph, nid: str) -> Tuple[Dict[str, List[str]], Dict[str, List[str]]]:
    """(inputs, outputs) of op node ``nid`` as slot -> variable names, in argument order."""
    ins: Dict[str, List[Tuple[int, str]]] = {}
    outs: Dict[str, List[Tuple[int, str]]] = {}
    for u, _, d in g.in_edges(nid, data=True):
        ins.setdefault(d["fl_slot"], []).append((d["fl_arg_index"], g.nodes[u]["fl_name"]))
    for _, v, d in g.out_edges(nid, data=True):
        outs.setdefault(d["fl_slot"], []).append((d["fl_arg_index"], g.nodes[v]["fl_name"]))
    srt = lambda t: {k: [n for _, n in sorted(v)] for k, v in t.items()}
    return srt(ins), srt(outs)
