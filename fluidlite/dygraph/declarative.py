"""Dygraph to static by tracing: ``fluid.dygraph.declarative`` and ``ProgramTranslator``.

fluid 1.8 converted the Python source of a ``@declarative`` function (AST rewriting) into a
static program. fluidlite converts only the control flow that depends on tensors (see "Control
flow" below) and otherwise traces, reusing ``TracedLayer``'s record-and-replay
(``traced._build``): per *input signature* (each tensor/array argument's shape, dtype and
``stop_gradient``; other arguments by value; a Layer's ``training`` flag) the function runs
once on dygraph tensors while the tracer records every op, and the record becomes a static
``Program`` whose feeds are the tensor arguments (``feed_<i>``) and whose parameters are the
dygraph parameters it read (same names). The backward ops of that program (``fluid.gradients``
w.r.t. the trainable parameters and the arguments that need gradients, seeded with one
gradient variable per output) are appended once. Every call then:

1. runs the forward part with the ``Executor`` (pruned to the outputs), reading the
   parameters' current values, and returns dygraph tensors;
2. when gradients are needed, links those outputs into the dygraph autograd graph with one
   ``run_program`` node (fluid 1.8's name for the same thing) that keeps the forward values
   the backward ops read. ``loss.backward()`` runs the backward part with the outputs'
   gradients and accumulates the results into the parameters' ``gradient()`` (and into the
   arguments' graph), so a dygraph optimizer trains a ``@declarative`` model exactly as it
   trains the plain dygraph one.

Persistable state an op writes (``batch_norm``'s moving mean/variance) is written back to the
dygraph parameters after each forward; the tracing run itself leaves no trace (the state it
changed is restored).

Control flow (fluid 1.8's source conversion for the common cases, dy2static.py): before the
first trace the function's source is converted once, so that a Python ``if`` / ``while`` whose
condition is a tensor computed from the inputs or parameters (``if mean(x) > 0:``, ``while i <
n:``, also with ``and`` / ``or`` / ``not``; also in the user functions and sub-layers it
calls) becomes ``fluid.layers.cond`` / ``fluid.layers.while_loop`` in the traced program:
both branches (one loop body) are traced, and the branch taken (the number of iterations) is
decided each time the program runs; ``fluid.layers.cond`` / ``while_loop`` called in that
code compile the same way. Gradients flow through them (``conditional_block_grad`` /
``while_grad``); a parameter used only in branches that did not run gets no gradient, as in
dygraph. Python-valued conditions stay Python (fixed per signature).

Differences from fluid 1.8: code that still reads a tensor *value* while being traced -- a
statement the conversion leaves alone (e.g. ``return`` / ``break`` inside a tensor ``if``, see
dy2static.py), ``float(t)``, ``t.numpy()`` -- cannot be one traced program: that signature
runs eagerly (dygraph) instead -- correct numbers, no static program -- and this is logged
once. A converted statement whose branches disagree (a tensor in one, a Python value in the
other; shapes that differ) makes the trace retry the original function (logged at INFO), with
the same eager result. While tracing, both branches of a tensor ``if`` run once in Python (so
their Python side effects happen twice), as fluid 1.8's static ``cond`` did.
Tensor and numpy arguments -- positional or keyword, also inside lists, tuples and dicts --
become feeds (the function receives dygraph tensors for numpy arrays); other arguments are part
of the signature by value (a new value traces again).
"""
from __future__ import annotations

import functools
import inspect
import logging
import textwrap
import weakref
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from .. import layers as _layers
from ..backward import gradients
from ..core import control_flow as _cf
from ..core import mode as _mode
from ..core import names as _names
from ..core.dtypes import VarType
from ..core.ir import Program, Variable, program_guard
from .tensor import ParamBase, VarBase
from .traced import TracedLayer, _build, feed_vars
from .tracer import Node

__all__ = ["declarative", "to_static", "ProgramTranslator", "StaticFunction"]

_log = logging.getLogger("fluidlite")
_SEED = "@SEED"          # suffix of the variables feeding the outputs' gradients


class _Recorder(list):
    """The tracer's op record during a trace. Also remembers the value each pre-existing
    tensor had before an op first wrote it (restored after the trace, so tracing does not
    move e.g. batch norm statistics) and whether Python read a traced value.

    A converted tensor ``if`` / ``while`` (dy2static.py) records its branches / its condition
    and body into nested recorders sharing the root's bookkeeping (``root``); the record then
    holds a ``_CondEntry`` / ``_WhileEntry`` that ``_build_traced`` turns into
    ``fluid.layers.cond`` / ``fluid.layers.while_loop``."""

    def __init__(self, feeds: Sequence[VarBase] = (), root: Optional["_Recorder"] = None
                 ) -> None:
        super().__init__()
        if root is None:
            self.root = self
            self.saved: Dict[int, Tuple[VarBase, Any]] = {}
            self.produced: set = set()
            self.watched = {id(t) for t in feeds}
            self.value_read: Optional[str] = None
            self.keep: List[Any] = []       # tensors whose ids the sets above hold
        else:
            self.root = root
            self.saved, self.produced, self.watched = root.saved, root.produced, root.watched
            self.keep = root.keep

    def append(self, entry: Any) -> None:
        for vs in entry[2].values():
            for t in vs:
                if id(t) not in self.produced and id(t) not in self.saved and \
                        t._value is not None:
                    self.saved[id(t)] = (t, t._value)
                self.produced.add(id(t))
        super().append(entry)

    def is_traced(self, t: VarBase) -> bool:
        """Whether the traced program computes ``t`` (an input, a parameter, an op result)."""
        return isinstance(t, ParamBase) or id(t) in self.produced or id(t) in self.watched

    def on_read(self, t: VarBase) -> None:
        """Called by ``VarBase`` when Python reads its value (bool/float/numpy) in a trace."""
        root = self.root
        if root.value_read is None and self.is_traced(t):
            root.value_read = t.name

    def restore(self) -> None:
        for t, value in self.saved.values():
            t._value = value

    # -- converted control flow (dy2static.py) --------------------------------------------------
    def _nested(self, fn: Callable[[], Any]) -> Tuple["_Recorder", Any]:
        """Run ``fn`` recording into a new nested recorder; ``(recorder, fn())``."""
        tracer = _mode.tracer
        sub = _Recorder(root=self.root)
        saved, tracer.recorder = tracer.recorder, sub
        try:
            return sub, fn()
        finally:
            tracer.recorder = saved

    def _produce(self, like: Sequence[VarBase]) -> List[VarBase]:
        outs = [VarBase(np.array(t._array())) for t in like]
        self.produced.update(id(o) for o in outs)
        self.keep.extend(outs)
        return outs

    def trace_cond(self, pred: VarBase, true_fn: Callable[[], Tuple[Any, ...]],
                   false_fn: Callable[[], Tuple[Any, ...]],
                   select: Callable[[Tuple[Any, ...], Tuple[Any, ...]], List[int]]
                   ) -> Tuple[List[VarBase], List[int], Tuple[Any, ...]]:
        """Record both branches of a tensor ``if``. ``select(true_result, false_result)``
        gives the positions of the tensor outputs (and validates the rest). Returns the output
        tensors (holding the taken branch's trace values), those positions and the true
        branch's result."""
        from .dy2static import Dy2StaticError
        arr = pred._array()
        if arr.size != 1:
            raise Dy2StaticError(f"the condition '{pred.name}' of a tensor if has shape "
                                 f"{list(arr.shape)}; it must hold one element")
        t_rec, t_res = self._nested(true_fn)
        f_rec, f_res = self._nested(false_fn)
        pos = select(t_res, f_res)
        t_outs, f_outs = [t_res[k] for k in pos], [f_res[k] for k in pos]
        for k, a, b in zip(pos, t_outs, f_outs):
            if not isinstance(a, VarBase) or not isinstance(b, VarBase):
                raise Dy2StaticError(f"output {k} of a tensor if is not a dygraph tensor")
            if a._array().shape != b._array().shape or a._array().dtype != b._array().dtype:
                raise Dy2StaticError(
                    f"output {k} of a tensor if is {list(a.shape)} {a._array().dtype} in the "
                    f"true branch but {list(b.shape)} {b._array().dtype} in the false branch")
        taken = bool(arr.reshape(-1)[0])
        outs = self._produce(t_outs if taken else f_outs)
        list.append(self, _CondEntry(pred, t_rec, t_outs, f_rec, f_outs, outs))
        return outs, pos, t_res

    def trace_while_probe(self, cond_fn: Callable[..., Any], vals: Sequence[Any]) -> Any:
        """``cond_fn(*vals)``, its ops not kept: a traced tensor makes the loop a
        ``while_loop`` (its condition is traced again on placeholders); any other value
        (computed without recording ops unless Python read a traced value, which makes the
        trace run eagerly anyway) is the Python loop's first condition."""
        _, pred = self._nested(lambda: cond_fn(*vals))
        self.keep.append(pred)
        return pred

    def trace_while(self, cond_fn: Callable[..., VarBase], body_fn: Callable[..., List[Any]],
                    loop_vars: Sequence[VarBase]) -> List[VarBase]:
        """Record the condition and one body of a tensor ``while`` on placeholders of
        ``loop_vars``; returns the loop's output tensors (trace values: the initial ones)."""
        from .dy2static import Dy2StaticError
        ph = [VarBase(np.array(t._array()), stop_gradient=t._stop_gradient)
              for t in loop_vars]
        self.watched.update(id(p) for p in ph)
        self.keep.extend(ph)
        c_rec, pred = self._nested(lambda: cond_fn(*ph))
        if not isinstance(pred, VarBase) or pred._array().size != 1:
            raise Dy2StaticError("the condition of a tensor while loop must stay a tensor of "
                                 "one element")
        b_rec, new = self._nested(lambda: body_fn(*ph))
        new = list(new)
        for k, (p, n) in enumerate(zip(ph, new)):
            if not isinstance(n, VarBase) or n._array().shape != p._array().shape or \
                    n._array().dtype != p._array().dtype:
                raise Dy2StaticError(f"loop variable {k} of a tensor while loop changes its "
                                     f"shape or dtype in the body")
        outs = self._produce(loop_vars)
        list.append(self, _WhileEntry(ph, c_rec, pred, b_rec, new, list(loop_vars), outs))
        return outs


class _CondEntry:
    """A converted tensor ``if`` in a record (see ``_Recorder.trace_cond``)."""

    def __init__(self, pred: VarBase, t_rec: _Recorder, t_outs: List[VarBase],
                 f_rec: _Recorder, f_outs: List[VarBase], outs: List[VarBase]) -> None:
        self.pred, self.t_rec, self.t_outs = pred, t_rec, t_outs
        self.f_rec, self.f_outs, self.outs = f_rec, f_outs, outs


class _WhileEntry:
    """A converted tensor ``while`` in a record (see ``_Recorder.trace_while``)."""

    def __init__(self, ph: List[VarBase], c_rec: _Recorder, pred: VarBase, b_rec: _Recorder,
                 new: List[VarBase], inits: List[VarBase], outs: List[VarBase]) -> None:
        self.ph, self.c_rec, self.pred, self.b_rec = ph, c_rec, pred, b_rec
        self.new, self.inits, self.outs = new, inits, outs


def _produced_ids(record: Sequence[Any], into: set) -> set:
    for e in record:
        if isinstance(e, _CondEntry):
            _produced_ids(e.t_rec, into)
            _produced_ids(e.f_rec, into)
            into.update(id(o) for o in e.outs)
        elif isinstance(e, _WhileEntry):
            _produced_ids(e.c_rec, into)
            _produced_ids(e.b_rec, into)
            into.update(id(o) for o in e.outs)
        else:
            into.update(id(v) for vs in e[2].values() for v in vs)
    return into


def _param_guards(program: Program, params: Dict[str, Any]) -> Dict[str, List[List[str]]]:
    """For each parameter whose every use (in the forward ``program``) is inside a converted
    cond branch: the guard chain of each use, i.e. the global-block bool variables that must
    all hold for the branch to run. A parameter used only in branches that did not run has no
    gradient in dygraph (None, not zeros -- an optimizer skips it), so the ``run_program``
    node drops its gradient too. A condition computed inside a branch (not fetchable) or a
    loop body (may run zero times) adds no guard: conservatively, such a use may happen."""
    gblock = program.global_block()
    uses: Dict[str, List[List[str]]] = {}

    def walk(block: Any, chain: List[str]) -> None:
        for op in block.ops:
            subs = _cf.sub_blocks(op)
            for n in () if subs else op.input_arg_names:   # (a sub-block op lists the
                if n in params:                             # reads of its block)
                    uses.setdefault(n, []).append(chain)
            for sub in subs:
                inner = chain
                if op.type == "conditional_block":
                    cond = op.input("Cond")[0]
                    if gblock.has_var(cond):
                        inner = chain + [cond]
                walk(sub, inner)

    walk(gblock, [])
    return {n: chains for n, chains in uses.items() if all(chains)}


def _build_traced(record: Sequence[Any], inputs: List[VarBase], outputs: List[Any]) -> Any:
    """``traced._build`` for records holding converted control flow: a static ``Program`` (in a
    ``TracedLayer``) replaying ``record``; a ``_CondEntry`` becomes ``fluid.layers.cond`` and a
    ``_WhileEntry`` ``fluid.layers.while_loop`` whose sub-blocks replay the nested records."""
    if not any(isinstance(e, (_CondEntry, _WhileEntry)) for e in record):
        return _build(list(record), inputs, outputs)
    return _TracedBuild(record).build(record, inputs, outputs)


class _TracedBuild:
    """One ``_build_traced``: the program being built and what it maps tensors to. A *scope*
    maps tensor ids to variables; nested records (branches, loop condition and body) replay
    in a new scope on top of their caller's, so that a tensor a nested record produced is a
    variable of that sub-block."""

    def __init__(self, record: Sequence[Any]) -> None:
        self.program, self.startup = Program(), Program()
        self.gblock = self.program.global_block()
        self.params: Dict[str, ParamBase] = {}
        self.constants: Dict[str, np.ndarray] = {}
        self.produced = _produced_ids(record, set())
        self.top: Dict[int, Any] = {}

    def build(self, record: Sequence[Any], inputs: List[VarBase], outputs: List[Any]) -> Any:
        saved, _mode.tracer = _mode.tracer, None
        try:
            with program_guard(self.program, self.startup):
                feed_names = feed_vars(self.gblock, inputs, self.top)
                self.replay(record, [self.top])
                fetch = [self.static(o, [self.top]) for o in outputs]
        finally:
            _mode.tracer = saved
        return TracedLayer(self.program, self.params, feed_names, fetch, self.constants)

    def static(self, t: VarBase, scopes: List[Dict[int, Any]]) -> Any:
        """The variable of tensor ``t``: from the innermost scope that has it, else a new
        parameter, temporary (in the current block) or persistable constant."""
        for sc in reversed(scopes):
            got = sc.get(id(t))
            if got is not None:
                return got
        if isinstance(t, ParamBase):
            got = self.gblock.create_parameter(name=t.name, shape=t.shape, dtype=t.dtype,
                                               trainable=t.trainable)
            self.params[t.name] = t
            self.top[id(t)] = got
        elif id(t) in self.produced:
            # nested records are replayed more than once (a loop condition): fresh names
            name = t._name if len(scopes) == 1 and t._name else _names.generate("traced.tmp")
            got = self.program.current_block().create_var(name=name, dtype=t.dtype,
                                                          shape=t.shape)
            scopes[-1][id(t)] = got
        else:
            got = self.gblock.create_var(name=t._name or _names.generate("traced.const"),
                                         dtype=t.dtype, shape=t.shape, persistable=True)
            self.constants[got.name] = np.array(t._array())
            self.top[id(t)] = got
        return got

    @staticmethod
    def as_bool(v: Any) -> Any:
        """``v`` as the bool scalar fluid's cond / while_loop take: a condition computed from
        a feed has an unknown static first dimension although it holds one element (checked
        while tracing)."""
        if v.dtype != VarType.BOOL:
            v = _layers.cast(v, "bool")
        if list(v.shape) not in ([1], []):
            v = _layers.reshape(v, [1])
        return v

    def replay(self, rec: Sequence[Any], scopes: List[Dict[int, Any]]) -> None:
        """Append the ops of ``rec`` to the current block."""
        for e in rec:
            if isinstance(e, _CondEntry):
                self.replay_cond(e, scopes)
            elif isinstance(e, _WhileEntry):
                self.replay_while(e, scopes)
            else:
                op_type, ins, outs, attrs = e
                self.program.current_block().append_op(
                    type=op_type, inputs={k: [self.static(t, scopes) for t in vs]
                                          for k, vs in ins.items()},
                    outputs={k: [self.static(t, scopes) for t in vs] for k, vs in outs.items()},
                    attrs=dict(attrs))

    def branch(self, rec: Sequence[Any], outs: List[VarBase], scopes: List[Dict[int, Any]]
               ) -> Callable[[], List[Any]]:
        """A ``cond`` branch function replaying ``rec`` and returning ``outs``' variables."""
        def build() -> List[Any]:
            sc = scopes + [{}]
            self.replay(rec, sc)
            return [self.static(o, sc) for o in outs]
        return build

    def replay_cond(self, e: "_CondEntry", scopes: List[Dict[int, Any]]) -> None:
        pred = self.as_bool(self.static(e.pred, scopes))
        res = _layers.cond(pred, self.branch(e.t_rec, e.t_outs, scopes),
                       self.branch(e.f_rec, e.f_outs, scopes))
        for o, r in zip(e.outs, res or []):
            scopes[-1][id(o)] = r

    def replay_while(self, e: "_WhileEntry", scopes: List[Dict[int, Any]]) -> None:
        def cond_fn(*vs: Any) -> Any:
            sc = scopes + [{id(p): v for p, v in zip(e.ph, vs)}]
            self.replay(e.c_rec, sc)
            return self.as_bool(self.static(e.pred, sc))

        def body_fn(*vs: Any) -> List[Any]:
            sc = scopes + [{id(p): v for p, v in zip(e.ph, vs)}]
            self.replay(e.b_rec, sc)
            return [self.static(n, sc) for n in e.new]

        # the loop updates its variables in place: start from copies (the initial values may
        # be feeds or read again later)
        init = [_layers.assign(self.static(t, scopes)) for t in e.inits]
        res = _layers.while_loop(cond_fn, body_fn, init)
        for o, r in zip(e.outs, res):
            scopes[-1][id(o)] = r


def _append_backward(entry: _Entry, program: Program) -> None:
    """Append to ``program`` the gradients of ``sum(out_i * seed_i)`` over the entry's
    differentiable outputs w.r.t. its trainable parameters and the feeds that need gradients
    (``fluid.gradients``; one ``<out>@SEED`` variable per output); sets ``entry.seeds`` and
    ``entry.grad_vars``."""
    block = program.global_block()
    wrt_vars = [block.var(entry.feed_names[i]) for i in entry.wrt_feeds] + \
        [block.var(p.name) for p in entry.wrt_params]
    for v in wrt_vars:
        v.stop_gradient = False
    saved_tracer, _mode.tracer = _mode.tracer, None
    try:
        with program_guard(program):
            seed_vars = []
            for i in entry.diff_outs:
                o = entry.outs[i]
                s = block.create_var(name=o.name + _SEED, shape=list(o.shape),
                                     dtype=o.dtype, stop_gradient=True)
                seed_vars.append(s)
            entry.seeds = [s.name for s in seed_vars]
            entry.grad_vars = list(gradients([entry.outs[i] for i in entry.diff_outs],
                                             wrt_vars, target_gradients=seed_vars))
    finally:
        _mode.tracer = saved_tracer


def _saved_names(block: Any, n_fwd: int, feed_names: List[str]) -> List[str]:
    """The forward values (of ``block.ops[:n_fwd]``) the backward ops after them read: what a
    forward run keeps for the backward run. What a converted cond / while op writes is not
    saved: the backward run reruns those ops (and the ops feeding them), since their gradient
    ops read the step scopes the forward sub-blocks fill (not fetchable), and a while loop
    updates its variables in place (their fetched values are the final ones)."""
    produced = set(feed_names)
    rerun: set = set()
    for op in block.ops[:n_fwd]:
        produced.update(op.output_arg_names)
        if op.type in ("while", "conditional_block"):
            rerun.update(op.output_arg_names)
    need = []
    for op in block.ops[n_fwd:]:
        for n in op.input_arg_names:
            v = block._find_var_recursive(n)
            if n in produced and n not in need and n not in rerun and \
                    v is not None and not v.persistable and v.type == VarType.LOD_TENSOR:
                need.append(n)
    return need


def _arg_array(a: Any) -> Optional[np.ndarray]:
    if isinstance(a, VarBase):
        return a._array()
    if isinstance(a, np.ndarray) and a.dtype != object:
        return a
    return None


def _spec(x: Any, leaves: List[Any]) -> Any:
    """A hashable signature of an argument; its tensors/arrays (inside lists, tuples and dicts
    too) are appended to ``leaves`` and keyed by shape, dtype and ``stop_gradient``."""
    arr = _arg_array(x)
    if arr is not None:
        leaves.append(x)
        sg = x._stop_gradient if isinstance(x, VarBase) else True
        return ("tensor", arr.shape, arr.dtype.str, sg)
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, tuple(_spec(e, leaves) for e in x))
    if isinstance(x, dict):
        return ("dict", tuple((k, _spec(x[k], leaves)) for k in sorted(x, key=repr)))
    return _const_key(x)


def _rebuild(x: Any, it: Any) -> Any:
    """``x`` with its tensors/arrays replaced, in ``_spec`` order, by ``next(it)``."""
    if _arg_array(x) is not None:
        return next(it)
    if isinstance(x, (list, tuple)):
        items = [_rebuild(e, it) for e in x]
        if hasattr(x, "_fields"):           # a namedtuple
            return type(x)(*items)
        return type(x)(items)
    if isinstance(x, dict):
        return {k: _rebuild(x[k], it) for k in sorted(x, key=repr)}
    return x


def _const_key(a: Any) -> Any:
    try:
        hash(a)
        return (type(a).__name__, a)
    except TypeError:
        return (type(a).__name__, repr(a))


class _Entry:
    """One traced signature: the programs and what a call feeds, fetches and keeps."""

    def __init__(self) -> None:
        self.eager = False                  # value-dependent Python code: run eagerly
        self.traced: Any = None             # the TracedLayer (program, params, scope)
        self.forward: Optional[Program] = None
        self.feed_names: List[str] = []
        self.feed_pos: List[int] = []       # index (into the call's leaves) of each feed
        self.outs: List[Any] = []           # fetch Variables of the tensor outputs
        self.out_is_tensor: List[bool] = []
        self.structure: Any = None          # the traced return value (for its shape)
        self.diff_outs: List[int] = []      # indices (into outs) of float outputs
        self.seeds: List[str] = []          # gradient feed per differentiable output
        self.wrt_feeds: List[int] = []      # feed indices (into feed_names) needing gradients
        self.wrt_params: List[ParamBase] = []
        self.grad_vars: List[Optional[Variable]] = []
        self.saved_names: List[str] = []    # forward values the backward ops read
        # parameter -> guard chains of its uses, when every use is inside a converted cond
        # branch (see _param_guards); the bool variables those chains name
        self.guards: Dict[str, List[List[str]]] = {}
        self.guard_conds: List[str] = []
        self.written: List[ParamBase] = []  # parameters the forward writes (BN statistics)
        self.exe: Any = None


class _ProgramOp:
    """The ``opdef`` of a ``run_program`` autograd node: gradients come from the entry's
    backward ops run by the Executor (``autograd._node_grads`` calls ``node_grads``)."""

    type = "run_program"

    def __init__(self, fn: "StaticFunction", entry: _Entry) -> None:
        self.fn, self.entry = fn, entry

    def node_grads(self, node: Node, douts: List[Any], need: List[bool],
                   create_graph: bool) -> List[Any]:
        if create_graph:
            raise RuntimeError(
                f"create_graph=True cannot differentiate through the @declarative function "
                f"'{self.fn.__name__}' (its static backward is not itself traced); disable "
                f"it with ProgramTranslator().enable(False) for higher-order gradients")
        e = self.entry
        feed = dict(node.attrs["saved"])
        for name, g, arr in zip(e.seeds, douts[0], node.out_arrays[0]):
            feed[name] = np.asarray(g, dtype=arr.dtype).reshape(arr.shape)
        fetch = [g for g in e.grad_vars if g is not None]
        values = iter(_run(e, feed, fetch) if fetch else ())
        grads = [None if g is None else next(values) for g in e.grad_vars]
        n = len(e.wrt_feeds)
        shapes = [x._array().shape for x in node.in_vars[0]] + \
            [p._array().shape for p in node.in_vars[1]]
        grads = [None if g is None else np.asarray(g).reshape(s) for g, s in zip(grads, shapes)]
        conds = node.attrs["conds"]
        for k, p in enumerate(e.wrt_params):
            chains = e.guards.get(p.name)
            if chains and not any(all(conds[c] for c in ch) for ch in chains):
                grads[n + k] = None     # used only in branches not taken: no gradient
        return [grads[:n], grads[n:]]


class _ProgramNode(Node):
    __slots__ = ()

    def release(self) -> None:
        super().release()
        self.attrs = None           # the saved forward values


def _run(entry: _Entry, feed: Dict[str, np.ndarray], fetch: List[Any]) -> List[Any]:
    from ..core.scope import CPUPlace
    from ..executor import Executor
    if entry.exe is None:
        entry.exe = Executor(CPUPlace())
    entry.traced._sync()
    saved, _mode.tracer = _mode.tracer, None        # the executor builds nothing eagerly
    try:
        return entry.exe.run(entry.traced.program, feed=feed, fetch_list=fetch,
                             scope=entry.traced._scope, use_prune=True)
    finally:
        _mode.tracer = saved


class ConcreteProgram(NamedTuple):
    """One traced input signature of a ``@declarative`` function, as fluid 1.8's
    ``ConcreteProgram``: the forward program, its feed and output Variables and the dygraph
    parameters it reads (the startup program is empty: parameters keep their dygraph
    values)."""
    inputs: List[Variable]
    outputs: List[Variable]
    parameters: List[ParamBase]
    func: Callable
    main_program: Program
    startup_program: Program


class ProgramCache:
    """The programs the ``@declarative`` functions have traced, in the order they were traced
    (fluid 1.8's ``ProgramCache``, kept by the ``ProgramTranslator``). Each function keeps its
    own per-signature entries; this records only which function and signature came last, by
    weak reference, so a dropped function (or Layer) is not kept alive.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> @fluid.dygraph.declarative
        ... def double(x):
        ...     return x * 2
        >>> with fluid.dygraph.guard():
        ...     _ = double(fluid.dygraph.to_variable(np.ones([2], "float32")))
        >>> cache = fluid.dygraph.ProgramTranslator().get_program_cache()
        >>> key, concrete = cache.last()
        >>> [v.name for v in concrete.inputs]
        ['feed_0']
    """

    def __init__(self) -> None:
        self._order: "Dict[Tuple[int, Any], Tuple[weakref.ref, Any]]" = {}

    def _add(self, fn: "StaticFunction", key: Any) -> None:
        for k in [k for k, (ref, _) in self._order.items() if ref() is None]:
            del self._order[k]              # functions garbage-collected since
        self._order[(id(fn), key)] = (weakref.ref(fn), key)

    def _live(self) -> List[Tuple["StaticFunction", Any]]:
        out = []
        for ref, key in self._order.values():
            fn = ref()
            if fn is not None and key in fn._cache:
                out.append((fn, key))
        return out

    def __len__(self) -> int:
        return len(self._live())

    def _last_entry(self) -> Tuple["StaticFunction", Any, "_Entry"]:
        live = self._live()
        if not live:
            raise ValueError("ProgramCache.last: no @declarative function has been traced yet "
                             "(no valid cached program); call one in dygraph mode first")
        fn, key = live[-1]
        return fn, key, fn._cache[key]

    def last(self) -> Tuple[Any, ConcreteProgram]:
        """``(key, ConcreteProgram)`` of the signature traced last; the key is
        ``(function name, input signature)``.

        Raises:
            ValueError: nothing has been traced yet.
        """
        fn, key, entry = self._last_entry()
        block = entry.forward.global_block()
        concrete = ConcreteProgram(
            inputs=[block.var(n) for n in entry.feed_names],
            outputs=[block.var(v.name) for v in entry.outs],
            parameters=list(entry.traced._params.values()), func=fn,
            main_program=entry.forward, startup_program=Program())
        return (fn.__name__, key), concrete


class ProgramTranslator:
    """The singleton switching ``@declarative`` functions between static (traced program,
    default) and eager execution, and giving access to their programs (fluid 1.8's
    ``fluid.dygraph.ProgramTranslator``; see the module docstring).

    Args:
        None: the constructor takes no arguments and always returns the one instance.
    Returns:
        ProgramTranslator: the singleton; ``enable(bool)``, ``get_output(func, *args)``,
        ``get_program(func, *args)`` ... act on ``@declarative`` functions.
    Raises:
        None: the constructor does not raise; ``enable`` raises TypeError for a non-bool and
            ``get_output`` for a non-callable.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> @fluid.dygraph.declarative
        ... def absolute(x):
        ...     if fluid.layers.reduce_sum(x) < 0:
        ...         x = -x
        ...     return x
        >>> translator = fluid.dygraph.ProgramTranslator()
        >>> code = translator.get_code(absolute)          # the converted source, as text
        >>> with fluid.dygraph.guard():
        ...     print(absolute(fluid.dygraph.to_variable(np.array([-2.0], "float32"))).numpy())
        [2.]
    """

    _instance: Optional["ProgramTranslator"] = None

    def __new__(cls) -> "ProgramTranslator":
        if cls._instance is None:
            inst = super().__new__(cls)
            inst.enable_declarative = True
            inst._program_cache = ProgramCache()
            cls._instance = inst
        return cls._instance

    @classmethod
    def get_instance(cls) -> "ProgramTranslator":
        return cls()

    @classmethod
    def reset(cls) -> None:
        """Back to the default state (translation enabled)."""
        cls().enable_declarative = True

    def enable(self, enable_declarative: bool) -> None:
        """``False``: ``@declarative`` functions run eagerly (plain dygraph)."""
        if not isinstance(enable_declarative, bool):
            raise TypeError(f"ProgramTranslator.enable: enable_declarative must be a bool, but "
                            f"received {type(enable_declarative).__name__}")
        self.enable_declarative = enable_declarative

    def get_output(self, dygraph_func: Callable, *args: Any, **kwargs: Any) -> Any:
        """``dygraph_func(*args, **kwargs)`` computed by its traced static program (eagerly
        when translation is disabled); returns dygraph tensors. Needs dygraph mode."""
        if not callable(dygraph_func):
            raise TypeError(f"ProgramTranslator.get_output: dygraph_func must be callable, but "
                            f"received {type(dygraph_func).__name__}")
        if _mode.tracer is None:
            from .base import guard
            with guard():
                return _static(dygraph_func)(*args, **kwargs)
        return _static(dygraph_func)(*args, **kwargs)

    def get_func(self, dygraph_func: Callable) -> Callable:
        """A function building ``dygraph_func``'s ops into the current static program: its
        dy2static conversion (a tensor ``if`` / ``while`` builds ``fluid.layers.cond`` /
        ``while_loop``; see dy2static.py), or the original function when there is nothing to
        convert (fluid's layer functions already build static ops outside dygraph mode)."""
        if not callable(dygraph_func):
            raise TypeError(f"ProgramTranslator.get_func: dygraph_func must be callable, but "
                            f"received {type(dygraph_func).__name__}")
        sf = _static(dygraph_func)
        fn = sf._converted() or sf._fn
        if sf._instance is not None:
            return functools.partial(fn, sf._instance)
        return fn

    def get_program(self, dygraph_func: Callable, *args: Any, **kwargs: Any
                    ) -> Tuple[Program, Program, List[Variable], List[Variable]]:
        """``(main_program, startup_program, inputs, outputs)`` of ``dygraph_func`` traced on
        these arguments: the forward program, its feed Variables and output Variables (the
        startup program is empty: parameters keep their dygraph values)."""
        if not callable(dygraph_func):
            raise TypeError(f"ProgramTranslator.get_program: dygraph_func must be callable, but "
                            f"received {type(dygraph_func).__name__}")
        sf = _static(dygraph_func)
        if _mode.tracer is None:
            from .base import guard
            with guard():
                entry = sf._entry(args, kwargs)[0]
        else:
            entry = sf._entry(args, kwargs)[0]
        if entry.eager:
            raise ValueError(f"ProgramTranslator.get_program: '{sf.__name__}' reads a tensor "
                             f"value in Python ({entry.value_read!r}), so it has no single "
                             f"traced program; write data-dependent control flow as a Python "
                             f"if / while on tensors (without return / break / continue "
                             f"inside) so that it converts")
        block = entry.forward.global_block()
        return (entry.forward, Program(), [block.var(n) for n in entry.feed_names],
                [entry.forward.global_block().var(v.name) for v in entry.outs])

    def get_code(self, dygraph_func: Callable) -> str:
        """The converted source of ``dygraph_func`` (fluid 1.8): its Python source with the
        tensor-convertible ``if`` / ``while`` statements rewritten into ``convert_ifelse`` /
        ``convert_while`` calls (see dy2static.py); the original source when nothing is
        converted."""
        if not callable(dygraph_func):
            raise TypeError(f"ProgramTranslator.get_code: dygraph_func must be callable, but "
                            f"received {type(dygraph_func).__name__}")
        from .dy2static import convert_function
        sf = _static(dygraph_func)
        conv = convert_function(sf._fn)
        if conv is not None:
            return conv.source
        try:
            return textwrap.dedent(inspect.getsource(sf._fn))
        except (OSError, TypeError):
            return repr(sf._fn)


    def get_program_cache(self) -> ProgramCache:
        """The ``ProgramCache`` of the programs traced so far (fluid 1.8; its ``last()`` is
        the signature traced last)."""
        return self._program_cache

    def save_inference_model(self, dirname: str, feed: Optional[Sequence[int]] = None,
                             fetch: Optional[Sequence[int]] = None) -> List[str]:
        """Save the program traced last (``get_program_cache().last()``) with the current
        parameter values as an inference model (``fluid.io.save_inference_model``), as fluid
        1.8: ``feed`` / ``fetch`` pick the inputs / tensor outputs by index (default: all),
        the program is pruned to them.

        Args:
            dirname (str): the directory to write.
            feed (list of int | None): indices of the inputs to keep as feeds.
            fetch (list of int | None): indices of the tensor outputs to save as targets.
        Returns:
            list of str: the names of the saved fetch targets.
        Raises:
            ValueError: no ``@declarative`` function has been traced yet.
            IndexError: an index in ``feed`` / ``fetch`` is out of range.
        """
        entry = self._program_cache._last_entry()[2]
        return entry.traced.save_inference_model(dirname, feed=feed, fetch=fetch)


_PLAIN: "weakref.WeakKeyDictionary[Any, StaticFunction]" = weakref.WeakKeyDictionary()


def _static(fn: Callable) -> "StaticFunction":
    if isinstance(fn, StaticFunction):
        return fn
    try:
        sf = _PLAIN.get(fn)
    except TypeError:
        return StaticFunction(fn)
    if sf is None:
        sf = StaticFunction(fn)
        try:
            _PLAIN[fn] = sf
        except TypeError:
            pass
    return sf


class StaticFunction:
    """What ``@declarative`` returns (see the module docstring). On a ``Layer`` method it binds
    per instance (each layer object has its own cache)."""

    def __init__(self, fn: Callable, instance: Any = None) -> None:
        self._fn = fn
        self._instance = instance
        self._cache: Dict[Any, _Entry] = {}
        self._last: Optional[_Entry] = None
        self._conv: Optional[Tuple[Any]] = None     # (dy2static conversion or None,)
        functools.update_wrapper(self, fn)
        self.__name__ = getattr(fn, "__name__", type(fn).__name__)

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        if instance is None:
            return self
        key = "_declarative_" + self.__name__ + f"_{id(self)}"
        d = instance.__dict__
        bound = d.get(key)
        if bound is None:
            bound = d[key] = StaticFunction(self._fn, instance)
        return bound

    @property
    def cache_size(self) -> int:
        """How many input signatures were traced."""
        return len(self._cache)

    @property
    def program(self) -> Optional[Program]:
        """The forward program of the last traced call (None before any)."""
        return None if self._last is None else self._last.forward

    def _args(self, args: Sequence[Any]) -> Tuple[Any, ...]:
        return (self._instance,) + tuple(args) if self._instance is not None else tuple(args)

    def _eager(self, args: Sequence[Any], kwargs: Dict[str, Any]) -> Any:
        return self._fn(*self._args(args), **kwargs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        tracer = _mode.tracer
        if not ProgramTranslator().enable_declarative:
            return self._eager(args, kwargs)                    # disabled: plain dygraph
        if tracer is None or tracer.recorder is not None:
            # static mode: the layer functions build static ops (and the converted tensor
            # if / while build cond / while_loop); inside another trace: the outer record takes
            # the ops (and the converted control flow)
            fn = self._converted() or self._fn
            return fn(*self._args(args), **kwargs)
        for i, a in enumerate(args):
            if isinstance(a, Variable) and not isinstance(a, VarBase):
                raise TypeError(f"@declarative '{self.__name__}': argument {i} is the static "
                                f"Variable '{a.name}'; in dygraph mode pass dygraph tensors or "
                                f"numpy arrays")
        entry, leaves = self._entry(args, kwargs)
        if entry.eager:
            return self._eager(args, kwargs)
        return self._call(entry, leaves)

    # -- tracing ----------------------------------------------------------------------------
    def _entry(self, args: Sequence[Any], kwargs: Dict[str, Any]) -> Tuple[_Entry, List[Any]]:
        """The traced entry of this call's signature (traced now if new) and the call's
        tensor/array leaves (the feeds, in order)."""
        leaves: List[Any] = []
        key = (_spec(tuple(args), leaves), _spec(kwargs, leaves),
               getattr(self._instance, "training", None))
        entry = self._cache.get(key)
        if entry is None:
            entry = self._cache[key] = self._trace(args, kwargs, leaves)
            if not entry.eager:
                ProgramTranslator()._program_cache._add(self, key)
        self._last = entry
        return entry, leaves

    def _converted(self) -> Optional[Callable]:
        """The dy2static conversion of the function (None: nothing to convert); cached."""
        if self._conv is None:
            from .dy2static import convert_function
            self._conv = (convert_function(self._fn),)
        got = self._conv[0]
        return None if got is None else got.function

    def _trace(self, args: Sequence[Any], kwargs: Dict[str, Any], leaves: List[Any]
               ) -> _Entry:
        conv = self._converted()
        if conv is not None:
            try:
                return self._trace_fn(conv, args, kwargs, leaves)
            except Exception as e:      # noqa: BLE001 -- the original function decides
                _log.info("@declarative '%s': the converted control flow cannot be traced "
                          "for this input signature (%s: %s); tracing the original function",
                          self.__name__, type(e).__name__, e)
        return self._trace_fn(self._fn, args, kwargs, leaves)

    def _trace_fn(self, fn: Callable, args: Sequence[Any], kwargs: Dict[str, Any],
                  leaves: List[Any]) -> _Entry:
        """Trace ``fn`` once for the signature of ``leaves`` (the tensor/array arguments):
        the entry holding its static program, forward and backward (see the module
        docstring); an ``eager`` entry when Python read a traced value."""
        entry = _Entry()
        feeds: List[VarBase] = []
        for i, a in enumerate(leaves):
            sg = a._stop_gradient if isinstance(a, VarBase) else True
            feeds.append(VarBase(np.array(_arg_array(a)), name=f"feed_{i}", stop_gradient=sg))
            entry.feed_pos.append(i)
        rec, out = self._record(fn, args, kwargs, feeds)
        entry.value_read = rec.value_read
        if rec.value_read is not None:
            _log.warning("@declarative '%s': Python reads the value of tensor '%s' while "
                         "tracing (data-dependent control flow the conversion leaves alone?), "
                         "so this input signature runs eagerly in dygraph mode; write it as "
                         "a Python if / while on tensors without return / break / continue "
                         "inside to compile it", self.__name__, rec.value_read)
            entry.eager = True
            return entry
        outs = list(out) if isinstance(out, (list, tuple)) else [out]
        entry.structure = out
        entry.out_is_tensor = [isinstance(o, VarBase) for o in outs]
        tensor_outs = [o for o in outs if isinstance(o, VarBase)]
        for o in tensor_outs:           # an argument returned unchanged: copy it (assign)
            if o._value is None:
                raise ValueError(f"@declarative '{self.__name__}': an output tensor has no "
                                 f"value")
        traced = _build_traced(rec, feeds, tensor_outs)
        entry.traced = traced
        entry.feed_names = list(traced._feed_names)
        entry.outs = list(traced._fetch_vars)
        program = traced.program
        entry.forward = program.clone()
        n_fwd = len(program.global_block().ops)
        written = {}
        for b in program.blocks:        # (also inside converted cond / while blocks)
            for op in b.ops:
                for n in op.output_arg_names:
                    if n in traced._params:
                        written[n] = traced._params[n]
        entry.written = list(written.values())
        entry.guards = _param_guards(program, traced._params)
        entry.guard_conds = sorted({c for chains in entry.guards.values() for ch in chains
                                    for c in ch})
        # the backward part: gradients of sum(out_i * seed_i) w.r.t. params and feeds
        entry.diff_outs = [i for i, o in enumerate(tensor_outs)
                           if o._array().dtype.kind == "f"]
        entry.wrt_params = [p for p in traced._params.values() if p.trainable]
        entry.wrt_feeds = [i for i, t in enumerate(feeds) if not t._stop_gradient]
        if entry.diff_outs and (entry.wrt_feeds or entry.wrt_params):
            _append_backward(entry, program)
            entry.saved_names = _saved_names(program.global_block(), n_fwd, entry.feed_names)
        return entry

    def _record(self, fn: Callable, args: Sequence[Any], kwargs: Dict[str, Any],
                feeds: List[VarBase]) -> Tuple["_Recorder", Any]:
        """Run ``fn`` on ``feeds`` (in place of the tensor arguments) while the tracer records
        its ops without autograd; returns the record and ``fn``'s result. The tensors it
        changed get their values back."""
        tracer = _mode.tracer
        it = iter(feeds)
        ins = _rebuild(tuple(args), it)
        kw = _rebuild(kwargs, it)
        rec = _Recorder(feeds)
        saved = tracer.recorder, tracer.has_grad
        tracer.recorder, tracer.has_grad = rec, False
        try:
            out = fn(*self._args(ins), **kw)
        finally:
            tracer.recorder, tracer.has_grad = saved
            rec.restore()
        return rec, out

    # -- running ----------------------------------------------------------------------------
    def _call(self, entry: _Entry, args: Sequence[Any]) -> Any:
        """Run ``entry`` on the call's tensor/array leaves ``args``."""
        tracer = _mode.tracer
        feed = {}
        for name, i in zip(entry.feed_names, entry.feed_pos):
            feed[name] = np.asarray(_arg_array(args[i]))
        grad_inputs = [args[entry.feed_pos[i]] for i in entry.wrt_feeds]
        grad_inputs = [x for x in grad_inputs if isinstance(x, VarBase)]
        record = tracer.has_grad and bool(entry.grad_vars) and \
            (any(p.trainable for p in entry.wrt_params) or
             any(not x._stop_gradient for x in grad_inputs))
        n_out = len(entry.outs)
        fetch = list(entry.outs) + (entry.saved_names + entry.guard_conds if record else [])
        values = _run(entry, feed, fetch)
        for p in entry.written:         # e.g. batch norm's moving statistics
            p._value = np.array(entry.traced._scope.find_var(p.name).get_tensor())
        tensors = [VarBase(np.asarray(v)) for v in values[:n_out]]
        if record:
            n_saved = n_out + len(entry.saved_names)
            saved = dict(zip(entry.saved_names, values[n_out:n_saved]))
            conds = {c: bool(np.asarray(v).reshape(-1)[0])
                     for c, v in zip(entry.guard_conds, values[n_saved:])}
            diff = [tensors[i] for i in entry.diff_outs]
            in_vars = [[args[entry.feed_pos[i]] if isinstance(args[entry.feed_pos[i]], VarBase)
                        else VarBase(feed[entry.feed_names[i]]) for i in entry.wrt_feeds],
                       list(entry.wrt_params)]
            node = _ProgramNode(_ProgramOp(self, entry), {"saved": saved, "conds": conds},
                                None, in_vars,
                                [None, None], [[weakref.ref(t) for t in diff]],
                                [[t._value for t in diff]], next(tracer._seq))
            node.versions = [(p, p._version) for p in entry.wrt_params]
            for t in diff:
                t._node = node
                t._stop_gradient = False
        it = iter(tensors)
        outs = [next(it) if is_t else o for is_t, o in zip(entry.out_is_tensor,
                                                            _as_list(entry.structure))]
        s = entry.structure
        return type(s)(outs) if isinstance(s, (list, tuple)) else outs[0]


def _as_list(x: Any) -> List[Any]:
    return list(x) if isinstance(x, (list, tuple)) else [x]


def declarative(function: Optional[Callable] = None) -> Any:
    """``@fluid.dygraph.declarative`` (also ``@declarative()``): run ``function`` (or a
    ``Layer.forward``) as a traced static program in dygraph mode (see the module
    docstring).

    Args:
        function (callable | None): the function or ``Layer.forward`` to convert; None returns
            the decorator itself (the ``@declarative()`` form).
    Returns:
        StaticFunction: a callable running ``function`` through its traced static program (one
        per input signature), returning dygraph tensors.
    Raises:
        TypeError: ``function`` is not callable.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> @fluid.dygraph.declarative
        ... def relu_sum(x):
        ...     if fluid.layers.reduce_sum(x) > 0:        # becomes fluid.layers.cond
        ...         return fluid.layers.relu(x)
        ...     return x * -1
        >>> with fluid.dygraph.guard():
        ...     print(relu_sum(fluid.dygraph.to_variable(np.array([1.0, -0.5], "float32"))).numpy())
        [1. 0.]
    """
    if function is None:
        return declarative
    if not callable(function):
        raise TypeError(f"declarative: expected a function or method, but received "
                        f"{type(function).__name__}")
    return StaticFunction(function)


to_static = declarative
