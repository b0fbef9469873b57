"""The fusion matcher: declared patterns applied to a plan's op list (tinygrad ``PatternMatcher``
style). It knows no op type; everything op-specific is in the pattern tables
(``fusion/patterns/``) and in the op definitions' declared properties.

A pattern is a tree of ``P`` nodes rooted at one op. A node matches an op by type (``P("sqrt")``;
no type: any op), by a predicate on the op (``where``: declared properties, attrs, dtypes) and
by dataflow: ``src={"X": child}`` matches ``child`` against the op producing the slot's first
variable -- the last op writing it before the consumer --, ``each={"X": child}`` against the
producer of every variable of a duplicable slot. Node flags state the dataflow constraints of a
fusion:

* ``name``: the builder finds the op under that name; a name met twice must be the same op;
* ``optional``: when the producer does not match, the node (and its subtree) binds ``None``;
* ``adjacent``: the producer is the op right before its consumer;
* ``folded``: the op is folded into its consumer, so its outputs must be private temporaries
  only that consumer reads, and its inputs must not be written in between;
* ``internal``: its outputs are private temporaries read only by ops of the match;
* ``keep``: bound for the builder but not replaced (the op stays in the list).

``Pattern(name, root, build)``: the matcher tries ``root`` at every op (last first with
``reverse``) and calls ``build(match, cx)`` for each match, which returns a ``Rewrite`` (the fused
op and the positions it replaces) or None (no fusion). All matches of one pattern are found on
the same op list and applied together; a match overlapping an earlier one is skipped.
``GroupPattern(name, member, key, build)`` merges the ops matching ``member`` with equal keys
that can move down to the last of them (nothing in between reads what they write or writes what
they read or write) and calls ``build(members, cx)`` for the ops to put there.

After the patterns, the *commit tail*: a fused kernel that writes in place
(``writes_in_place``) keeps doing so only when everything after it is such a kernel or an op
declared ``infallible``; otherwise ``keep_out_of_place()`` -- so every op that can fail has run
before the first in-place write, and a failing step leaves the scope untouched.
"""
from __future__ import annotations

import bisect
from typing import (Any, Callable, Dict, FrozenSet, Hashable, Iterable, List, Mapping,
                    NamedTuple, Optional, Sequence, Set, Tuple, Union)

import numpy as np

from ...core import registry, rewrite
from ...core.dtypes import to_numpy_dtype
from ...core.ir import Block, OpArgs
from ...core.registry import OpDef, Slot


# -- what fused ops are ---------------------------------------------------------------------------
class FusedOp(OpArgs):
    """Stands in for the ops it covers inside a Plan (duck-types ``Operator`` for the plan)."""

    def __init__(self, opdef: OpDef, ops: Sequence[Any], inputs: Dict[str, List[str]],
                 outputs: Dict[str, List[str]]) -> None:
        self.opdef, self.covered = opdef, [c for o in ops for c in getattr(o, "covered", [o])]
        self.type = opdef.type
        self.inputs, self.outputs = inputs, outputs
        self.attrs = dict(self.covered[-1].attrs)


class FusedDef(OpDef):
    """A plan-time kernel: slots per instance, no attrs (everything is bound at plan time).
    ``writes_in_place``: the kernel writes its inputs' buffers unless ``keep_out_of_place()``
    was called (the commit tail)."""

    attr_defaults: Dict[str, Any] = {}
    writes_in_place = False

    def __init__(self, type_: str, inputs: Sequence[str], outputs: Sequence[str]) -> None:
        self.type = type_
        self.in_slots = tuple(Slot.parse(s) for s in inputs)
        self.out_slots = tuple(Slot.parse(s) for s in outputs)

    def keep_out_of_place(self) -> None:
        """Write nothing in place (called when a fallible op follows the kernel)."""


# -- the pattern language ----------------------------------------------------------------------
Where = Callable[[Any, "Context"], bool]


class P:
    """One node of a pattern (module docstring): an op of one of ``types`` (any op when none
    is given) for which ``where(op, cx)`` holds, whose input slots' producers match ``src``
    (first variable) and ``each`` (every variable; leaf nodes only)."""

    __slots__ = ("types", "name", "where", "src", "each", "optional", "adjacent", "folded",
                 "internal", "keep")

    def __init__(self, *types: str, name: Optional[str] = None, where: Optional[Where] = None,
                 src: Optional[Mapping[str, "Node"]] = None,
                 each: Optional[Mapping[str, "P"]] = None, optional: bool = False,
                 adjacent: bool = False, folded: bool = False, internal: bool = False,
                 keep: bool = False) -> None:
        self.types: Optional[FrozenSet[str]] = frozenset(types) if types else None
        self.name, self.where = name, where
        self.src: Mapping[str, Node] = dict(src or {})
        self.each: Mapping[str, P] = dict(each or {})
        self.optional, self.adjacent, self.folded = optional, adjacent, folded
        self.internal, self.keep = internal, keep

    def but(self, **changes: Any) -> "P":
        """A copy with some fields changed (the same node used as root and as a child)."""
        new = P.__new__(P)
        for f in P.__slots__:
            setattr(new, f, changes.get(f, getattr(self, f)))
        return new


class Alt:
    """The first of ``alts`` that matches (each alternative keeps its own flags: as a ``src``
    child, the first that matches the producer under its ``adjacent`` and ``folded``)."""

    __slots__ = ("alts", "optional", "adjacent", "folded")

    def __init__(self, *alts: P, optional: bool = False) -> None:
        self.alts = alts
        self.optional = optional         # none matching binds nothing (see ``P``)
        self.adjacent = self.folded = False


Node = Union[P, Alt]


class Rewrite(NamedTuple):
    """A fusion: ``op`` stands at old position ``at`` (``None``: nothing does), the old
    positions in ``drop`` are removed, and each ``(position, op)`` of ``more`` replaces the
    op there (a fusion of two distant ops: a forward and its grad op)."""

    at: int
    op: Any
    drop: FrozenSet[int]
    more: Tuple[Tuple[int, Any], ...] = ()


class Match:
    """The ops a pattern bound, by node name (``m["div"]``: the op, a list for ``each`` nodes,
    None for an optional node that did not match); ``m.pos[name]``: their positions."""

    __slots__ = ("cx", "root", "pos", "covered", "internal")

    def __init__(self, cx: "Context", root: int) -> None:
        self.cx, self.root = cx, root
        self.pos: Dict[str, Any] = {}
        self.covered: Set[int] = set()       # positions the fusion replaces (not ``keep``)
        self.internal: List[int] = []        # positions of ``internal`` nodes

    def copy(self) -> "Match":
        new = Match(self.cx, self.root)
        new.pos, new.covered, new.internal = dict(self.pos), set(self.covered), list(self.internal)
        return new

    def __getitem__(self, name: str) -> Any:
        at = self.pos.get(name)
        if at is None:
            return None
        ops = self.cx.ops
        return [ops[i] for i in at] if isinstance(at, tuple) else ops[at]

    def replace(self, op: Any, at: Optional[int] = None, also: Iterable[int] = ()) -> Rewrite:
        """``op`` stands for the covered ops (and ``also``) at ``at`` (default: the root)."""
        at = self.root if at is None else at
        return Rewrite(at, op, frozenset(self.covered.union(also)) - {at})

    def remove(self) -> Rewrite:
        """The covered ops are dropped, nothing replaces them."""
        return Rewrite(self.root, None, frozenset(self.covered) - {self.root})


class Pattern(NamedTuple):
    """``root`` matched at every op; ``build(match, cx) -> Rewrite | None``."""

    name: str
    root: P
    build: Callable[[Match, "Context"], Optional[Rewrite]]
    reverse: bool = False               # try the roots last first


class GroupPattern(NamedTuple):
    """Ops matching ``member`` with equal ``key(op, cx)`` are merged where they may move
    together; ``build(members, cx)`` gives the ops that replace them."""

    name: str
    member: P
    key: Callable[[Any, "Context"], Hashable]
    build: Callable[[List[Any], "Context"], List[Any]]


# -- what a pattern may ask about the op list ----------------------------------------------------
def opdef_of(op: Any) -> Optional[OpDef]:
    """The definition of ``op`` (a fused op's kernel), None for an unregistered type."""
    d = getattr(op, "opdef", None)
    if d is not None:
        return d
    t = getattr(op, "type", None)
    return registry.get_op_def(t) if t is not None and registry.has_op(t) else None


class Context:
    """One op list under fusion (a snapshot: built anew for every pattern): its block, the names
    the caller protects (``fetch``: stay materialised; ``feed``: never written in place), the
    fusion options, and the producers and readers of every variable."""

    def __init__(self, ops: List[Any], block: Block, fetch: Set[str], feed: Set[str],
                 options: Mapping[str, Any]) -> None:
        self.ops, self.block, self.fetch, self.feed = ops, block, fetch, feed
        self.options = options
        self.uses = rewrite.Uses(ops)

    def var(self, name: str) -> Any:
        """The variable ``name`` as the block sees it (None when undeclared)."""
        return self.block._find_var_recursive(name)

    def persistable(self, name: str) -> bool:
        """Persistable, or undeclared (then nothing may assume it private)."""
        v = self.var(name)
        return v is None or bool(v.persistable)

    def dtype(self, name: str) -> Optional[np.dtype]:
        """The NumPy dtype ``name`` is declared with (None: undeclared or not a tensor's)."""
        v = self.var(name)
        if v is None or v.dtype is None:
            return None
        try:
            return np.dtype(to_numpy_dtype(v.dtype))
        except (KeyError, TypeError, ValueError):
            return None

    def private(self, name: str) -> bool:
        """A temporary nobody outside the plan can see."""
        return name not in self.fetch and name not in self.feed and not self.persistable(name)

    def readers(self, name: str) -> List[int]:
        """Positions of the ops reading ``name``, in order."""
        return self.uses.readers.get(name, [])

    def producer(self, name: str, before: int) -> Optional[int]:
        """Position of the last op writing ``name`` before position ``before``."""
        found = self.uses.producers.get(name)
        if not found:
            return None
        k = bisect.bisect_left(found, before)
        return found[k - 1] if k else None

    def written_between(self, names_: Iterable[str], a: int, b: int) -> bool:
        """Whether an op strictly between positions ``a`` and ``b`` writes one of ``names_``."""
        producers = self.uses.producers
        return any(_inside(producers.get(n), a, b) for n in names_)

    def can_sink(self, i: int, anchor: int) -> bool:
        """Can op ``i`` move down to ``anchor`` past everything in between (no op after it up
        to ``anchor`` reads what it writes or writes what it reads or writes)?"""
        op, readers, producers = self.ops[i], self.uses.readers, self.uses.producers
        writes = op.output_arg_names
        return not (any(_inside(readers.get(n), i, anchor + 1) for n in writes) or
                    any(_inside(producers.get(n), i, anchor + 1)
                        for n in set(op.input_arg_names).union(writes)))

    def opdef(self, op: Any) -> Optional[OpDef]:
        """The definition of ``op`` (see ``opdef_of``)."""
        return opdef_of(op)

    def matches(self, node: P, i: int) -> Optional[Match]:
        """``node`` matched at position ``i``, its ``internal`` nodes checked once the whole
        match is bound (None: no match)."""
        m = _bind(node, i, Match(self, i))
        if m is None or not all(self.is_internal(j, m) for j in m.internal):
            return None
        return m

    def first_reader(self, name: str, node: P) -> Optional[int]:
        """Position of the first op reading ``name`` that matches ``node``."""
        return next((r for r in self.readers(name) if self.matches(node, r) is not None), None)

    def foldable_into(self, j: int, i: int) -> bool:
        """Op ``j`` may be folded into its consumer ``i``: its outputs are private and only
        ``i`` reads them, and nothing between them writes its inputs."""
        op = self.ops[j]
        return (all(self.private(n) and self.readers(n) == [i] for n in op.output_arg_names)
                and not self.written_between(op.input_arg_names, j, i))

    def reads_shape_only(self, j: int, name: str) -> bool:
        """Op ``j`` reads ``name`` only for its shape and dtype: every input slot holding it
        is declared ``shape_only_inputs`` by the op's definition."""
        op, d = self.ops[j], opdef_of(self.ops[j])
        slots = [s for s, ns in op.inputs.items() if name in ns]
        return d is not None and bool(slots) and all(s in d.shape_only_inputs for s in slots)

    def is_internal(self, j: int, m: Match) -> bool:
        """Op ``j``'s outputs are private and read only by ops ``m`` covers."""
        return all(self.private(n) and all(r in m.covered for r in self.readers(n))
                   for n in self.ops[j].output_arg_names)


# -- matching ----------------------------------------------------------------------------------
def _bind(node: Node, i: int, m: Match, named: bool = True) -> Optional[Match]:
    """``m`` extended by ``node`` matched at position ``i`` (None: no match)."""
    if isinstance(node, Alt):
        for alt in node.alts:
            got = _bind(alt, i, m, named)
            if got is not None:
                return got
        return None
    op = m.cx.ops[i]
    if node.types is not None and getattr(op, "type", None) not in node.types:
        return None
    if named and node.name is not None and node.name in m.pos:
        return m if m.pos[node.name] == i else None     # one name, one op
    if node.where is not None and not node.where(op, m.cx):
        return None
    m = m.copy()
    if named and node.name is not None:
        m.pos[node.name] = i
    if not node.keep:
        m.covered.add(i)
    if node.internal:
        m.internal.append(i)
    for slot, child in node.src.items():
        got = _bind_src(op, i, slot, child, m)
        if got is None:
            return None
        m = got
    for slot, child in node.each.items():
        got = _bind_each(op, i, slot, child, m)
        if got is None:
            return None
        m = got
    return m


def _bind_src(op: Any, i: int, slot: str, child: Node, m: Match) -> Optional[Match]:
    """``child`` matched at the producer of ``op``'s first ``slot`` variable (an ``Alt``: its
    first alternative that matches there under its own flags)."""
    if isinstance(child, Alt):
        for alt in child.alts:
            got = _bind_src(op, i, slot, alt, m)
            if got is not None:
                return got
        return m.copy() if child.optional else None
    names_ = op.inputs.get(slot) or []
    j = m.cx.producer(names_[0], i) if names_ else None
    if j is not None and child.adjacent and j != i - 1:
        j = None
    got = _bind(child, j, m) if j is not None else None
    if got is not None and child.folded and not m.cx.foldable_into(j, i):
        got = None
    if got is None and child.optional:
        got = m.copy()
        if isinstance(child, P) and child.name is not None:
            got.pos[child.name] = None
    return got


def _bind_each(op: Any, i: int, slot: str, child: P, m: Match) -> Optional[Match]:
    """``child`` matched at the producer of every variable of ``op``'s ``slot``."""
    names_ = op.inputs.get(slot) or []
    if not names_:
        return None
    at = []
    for n in names_:
        j = m.cx.producer(n, i)
        got = _bind(child, j, m, named=False) if j is not None else None
        if got is None:
            return None
        m = got
        at.append(j)
    if child.name is not None:
        m.pos[child.name] = tuple(at)
    return m


# -- applying patterns ---------------------------------------------------------------------------
def apply_pattern(pattern: Pattern, cx: Context) -> List[Any]:
    """The op list with every non-overlapping match of ``pattern`` rewritten."""
    ops = cx.ops
    types = pattern.root.types
    roots = [i for i, op in enumerate(ops) if types is None or getattr(op, "type", None) in types]
    if pattern.reverse:
        roots.reverse()
    claimed: Set[int] = set()
    rewrites: List[Rewrite] = []
    for i in roots:
        if i in claimed:
            continue
        m = cx.matches(pattern.root, i)
        r = pattern.build(m, cx) if m is not None else None
        if r is None:
            continue
        spans = r.drop | {r.at} | {j for j, _ in r.more}
        if spans & claimed:
            continue
        claimed |= spans
        rewrites.append(r)
    if not rewrites:
        return ops
    put = {r.at: r.op for r in rewrites}
    put.update(kv for r in rewrites for kv in r.more)
    gone = set().union(*(r.drop for r in rewrites))
    out = []
    for i, op in enumerate(ops):
        if i in put:
            if put[i] is not None:
                out.append(put[i])
        elif i not in gone:
            out.append(op)
    return out


def apply_group(pattern: GroupPattern, cx: Context) -> List[Any]:
    """The op list with the ``pattern``'s members merged (``GroupPattern``)."""
    ops = cx.ops
    groups: Dict[Hashable, List[int]] = {}
    for i, op in enumerate(ops):
        if cx.matches(pattern.member, i) is not None:
            groups.setdefault(pattern.key(op, cx), []).append(i)
    placed: Dict[int, List[int]] = {}     # anchor (the last member) -> member positions
    for members in groups.values():
        current = [members[-1]]
        for i in reversed(members[:-1]):
            if cx.can_sink(i, max(current)):
                current.insert(0, i)
            else:
                placed[max(current)] = current
                current = [i]
        placed[max(current)] = current
    member_of = {i for ms in placed.values() for i in ms}
    out: List[Any] = []
    for i, op in enumerate(ops):
        if i in placed:
            out.extend(pattern.build([ops[k] for k in placed[i]], cx))
        elif i not in member_of:
            out.append(op)
    return out


def _inside(positions: Optional[List[int]], a: int, b: int) -> bool:
    """Whether one of the sorted ``positions`` lies strictly between ``a`` and ``b``."""
    if not positions:
        return False
    k = bisect.bisect_right(positions, a)
    return k < len(positions) and positions[k] < b


def commit_tail(ops: Sequence[Any]) -> None:
    """In-place kernels followed by an op that may fail write nothing in place (docstring)."""
    safe = True
    for op in reversed(ops):
        d = opdef_of(op)
        if d is not None and getattr(d, "writes_in_place", False):
            if not safe:
                d.keep_out_of_place()
        elif d is None or not d.infallible:
            safe = False


def run(ops: Sequence[Any], block: Block, fetch: Set[str], feed: Set[str],
        pipeline: Sequence[Union[Pattern, GroupPattern]],
        options: Mapping[str, Any]) -> List[Any]:
    """Apply ``pipeline``'s patterns in order, then the commit tail; returns the new op list."""
    out = list(ops)
    for pattern in pipeline:
        cx = Context(out, block, fetch, feed, options)
        if isinstance(pattern, GroupPattern):
            out = apply_group(pattern, cx)
        else:
            out = apply_pattern(pattern, cx)
    commit_tail(out)
    return out


__all__ = ["Alt", "Context", "FusedDef", "FusedOp", "GroupPattern", "Match", "P", "Pattern",
           "Rewrite", "commit_tail", "opdef_of", "run"]
