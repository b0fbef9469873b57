"""Step replay: a dygraph training step that repeats runs as one cached static plan.

The fluid 1.8 idiom -- forward through layers, ``loss.backward()``, ``opt.minimize(loss)`` --
runs the same ops on same-shaped tensors every step. After two eager steps whose op sequences
(op type, attrs, input shapes and dtypes, where every input comes from) are identical, the
step is compiled once: its ops become a static ``Program`` (as ``TracedLayer`` builds one; the
step's outside tensors are its feeds), the optimizer's static ``minimize`` appends backward,
clip, regularization and update to it, and the ``Executor`` plans it. From then on a step is
*replayed*:

* each op the layers call is matched against the compiled sequence and not run; its output
  tensors become *pending* (their shape and dtype are known, their value is not);
* ``loss.backward()`` on the step's loss is deferred;
* ``opt.minimize(loss)`` runs the plan once -- forward, backward, clip and update in the
  static plan's fused kernels -- and fills the pending tensors that something outside the
  step still refers to (the loss, a tensor the loop kept: found by reference count; the plan
  frees and fuses the others as static training does), every parameter's gradient and the
  optimizer's accumulators (shared with the eager path, so the two can alternate).

A recorded eager step keeps its tensors weakly (``_Snap``): recording frees what any eager
step frees.

Nothing else changes: reading a pending value (``numpy()``, ``float(loss)``, a kernel reading
it, ``x._value`` anywhere), a parameter's gradient before ``minimize``, an op that does not
match, ``backward`` with arguments, another optimizer, ``set_value`` ... first *materializes*
the step: its recorded ops run eagerly in order (values, autograd nodes, the deferred backward)
exactly as if replay had never started, and the step continues eagerly. Steps with ops writing
other parameters or persistable tensors, gradients already accumulated in a
parameter, learning-rate schedulers or non-tensor optimizer inputs are never replayed. An op's
own state is the exception: a non-trainable parameter an op reads and writes (``batch_norm``'s
moving mean and variance) is a persistable of the compiled program, written by the plan.
Random ops (dropout, noise) are replayed: the plan's random streams are all the tracer's
generator (``Tracer.random_stream``), so they draw in program order what the eager ops would
have drawn, and leave the generator as an eager step does. ``FLUIDLITE_STEP_REPLAY=0`` turns
replay off.

Numbers: a replayed step computes what static training computes for the same program, which
is what the eager step computes, bit for bit (tested for SGD, Momentum, Adam, RMSProp and
Adagrad, with each clip and with L2 decay); the same script replays from the same step.
"""
from __future__ import annotations

import copy
import logging
import operator
import os
import sys
import weakref
from collections import defaultdict
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from .. import unique_name
from ..core import mode as _mode
from ..core.dtypes import convert_np_dtype_to_dtype_
from ..core.ir import Program, program_guard
from ..core.registry import get_op_def
from ..core.scope import Scope
from ..executor import Executor
from .autograd import run_backward
from .optim import _accumulators
from .tensor import ParamBase, VarBase
from .tracer import _Call, install_replayer

__all__ = ["Replayer"]

_log = logging.getLogger("fluidlite")
_MAX_TAPE = 4096            # ops recorded between two minimize calls before recording stops
_NO_ATTRS: Dict[str, Any] = {}
_REST = 100                 # steps a repeatedly materialized compiled step waits
_MAX_FAILS = 3              # materialized replays of one compiled step before giving up on it
_MAX_RUNNERS = 8            # plans of one compiled step (one per set of outputs fetched)


def enabled() -> bool:
    return os.environ.get("FLUIDLITE_STEP_REPLAY", "1") != "0"


class _Snap:
    """A tensor other than a parameter as the ops of a recorded step saw it: its identity
    (weakly: the tape must not keep the step's activations alive -- a recorded eager step
    frees what its autograd graph does not need, as any eager step does), its class and
    flags, and its value's shape and dtype (None: no array) when the tape first met it."""

    __slots__ = ("ref", "cls", "shape", "dtype", "stop", "persistable")

    def __init__(self, t: VarBase) -> None:
        self.ref, self.cls = weakref.ref(t), t.__class__
        a = t.__dict__.get("_value")
        self.shape, self.dtype = (a.shape, a.dtype) if isinstance(a, np.ndarray) else (None, None)
        self.stop, self.persistable = t._stop_gradient, t._persistable


class _Tape(list):
    """The calls of an eager step being recorded, each with its tensors replaced by their
    ``_Snap`` (one per tensor: ``snaps``, by ``id``, checked against the live object since
    a freed tensor's id can be reused); parameters and anything that is not a tensor are
    kept as they are."""

    def __init__(self) -> None:
        super().__init__()
        self.snaps: Dict[int, _Snap] = {}

    def find(self, t: Any) -> Optional[_Snap]:
        """``t``'s snapshot, or None when the tape never met it."""
        s = self.snaps.get(id(t))
        return s if s is not None and s.ref() is t else None

    def _snap(self, t: Any) -> Any:
        if not isinstance(t, VarBase) or isinstance(t, ParamBase):
            return t
        s = self.find(t)
        if s is None:
            s = self.snaps[id(t)] = _Snap(t)
        return s

    def _slots(self, slots: Optional[Dict[str, Any]]) -> Dict[str, Any]:
        out: Dict[str, Any] = {}
        for slot, v in (slots or {}).items():
            if isinstance(v, list):
                out[slot] = [self._snap(t) for t in v]
            elif isinstance(v, tuple):
                out[slot] = tuple(self._snap(t) for t in v)
            else:
                out[slot] = None if v is None else self._snap(v)
        return out

    def add(self, call: _Call) -> None:
        """Record ``call`` (after it ran: its outputs hold their values and flags)."""
        self.append(_Call(call.type, self._slots(call.inputs), self._slots(call.outputs),
                          call.attrs, call.stop_gradient, call.has_grad))


class _Seq(NamedTuple):
    """A list or tuple slot of ``_Compiled.calls``: its class and its tensors' sources."""
    cls: type
    srcs: List[Tuple[int, Any]]


def _tensors(v: Any) -> List[Any]:
    if v is None:
        return []
    if isinstance(v, (list, tuple)):
        return list(v)
    return [v]


class _Compiled:
    """A step compiled from its eager record: the op sequence to match, the static program and
    its executor, and what is shared with the eager optimizer."""

    def __init__(self, tape: _Tape, sig: Any, opt: Any, loss: VarBase,
                 params: List[ParamBase]) -> None:
        self.sig, self.opt, self.fails, self.rest = sig, opt, 0, _REST
        self.settings = _Settings(opt)
        self.param_list = list(params)
        self.feeds: List[str] = []
        self.out_names: List[List[str]] = []            # per op: per output position
        self.out_specs: List[List[Any]] = []            # per op: (shape, dtype, stop_gradient)
        # per op, per input position: (0, op, pos) produced | (1, param) | (2, feed index,
        # shape, dtype) an outside tensor
        self.sources: List[List[Any]] = []
        self.params: Dict[str, ParamBase] = {}
        self.program, startup = Program(), Program()
        saved, _mode.tracer = _mode.tracer, None        # (built, not run eagerly)
        try:
            with unique_name.guard(), program_guard(self.program, startup):
                static, produced = self._add_ops(tape)
                at = id(tape.find(loss))
                self.loss_at = produced[at]
                so, names_used = self._add_update(opt, static[at], params)
        finally:
            _mode.tracer = saved
        self.scope = Scope()
        self.exe = Executor()
        self.exe.run(startup, scope=self.scope)
        self._share(opt, so, names_used)
        self.start = [0]                 # per op, its first output's index in ``_Step.outs``
        for names_ in self.out_names:
            self.start.append(self.start[-1] + len(names_))
        self.loss_k = self.start[self.loss_at[0]] + self.loss_at[1]
        self.match = [_matcher(i, call, srcs, specs, self.start) for i, (call, srcs, specs)
                      in enumerate(zip(tape, self.sources, self.out_specs))]
        self.calls = [self._call(i, call) for i, call in enumerate(tape)]
        # the ops that draw from the tracer's generator (random, no fixed seed): the plan
        # must have exactly as many random streams, or it would draw other numbers
        self.draws = sum(1 for call in tape if _draws(call))
        self._plan(so)

    # -- building the program ---------------------------------------------------------------
    def _add_ops(self, tape: _Tape) -> Tuple[Dict[int, Any], Dict[int, Tuple[int, int]]]:
        """Append the taped ops to the program, filling ``sources``, ``out_names``,
        ``out_specs``, ``feeds`` and ``params``. Returns ``{id(tensor): its variable}`` and
        ``{id(tensor): (op index, output position)}`` of the tensors the ops produced (the
        tape's tensors: parameters and ``_Snap`` objects)."""
        block = self.program.global_block()
        produced: Dict[int, Tuple[int, int]] = {}      # id(tensor) -> (op index, position)
        static: Dict[int, Any] = {}
        feed_of: Dict[int, int] = {}
        for i, call in enumerate(tape):
            srcs: List[Any] = []
            ins = {slot: [self._input(block, t, produced, static, feed_of, srcs)
                          for t in _tensors(v)] for slot, v in (call.inputs or {}).items()}
            outs, names_, specs = {}, [], []
            for slot, v in (call.outputs or {}).items():
                vs = []
                for t in _tensors(v):
                    if _is_state(t, call):      # written in place: its parameter variable
                        vs.append(static[id(t)])
                        specs.append(None)
                        continue
                    var = block.create_var(name=f"replay_tmp_{i}_{len(names_)}",
                                           shape=list(t.shape), dtype=t.dtype,
                                           stop_gradient=t.stop)
                    produced[id(t)] = (i, len(names_))
                    static[id(t)] = var
                    names_.append(var.name)
                    specs.append((t.shape, t.dtype, t.stop))
                    vs.append(var)
                outs[slot] = vs
            self.sources.append(srcs)
            self.out_names.append(names_)
            self.out_specs.append(specs)
            block.append_op(type=call.type, inputs=ins, outputs=outs,
                            attrs=dict(call.attrs or {}))
        return static, produced

    def _call(self, i: int, call: _Call) -> Tuple[Any, ...]:
        """Op ``i``'s call as ``_Step.materialize`` makes it again: ``(type, inputs, outputs,
        attrs, stop_gradient, has_grad)`` with each slot's tensors as sources -- ``(0, k)``
        the step's output ``k``, ``(1, param)``, ``(2, j)`` the step's feed ``j`` -- in the
        recorded structure (one source, a ``_Seq`` of them for a list or tuple, or None). A
        matched call equals its record in all of these, so a step keeps no call of its own:
        the caller's slot dicts die with the layer call (a replayed LSTM step made ~3000
        objects the collector then traced)."""
        srcs = iter(self.sources[i])
        made = iter(range(self.start[i], self.start[i + 1]))

        def src(t: Any, out: bool) -> Tuple[Any, ...]:
            if out:
                return (1, t) if _is_state(t, call) else (0, next(made))
            s = next(srcs)
            return (0, self.start[s[1]] + s[2]) if s[0] == 0 else s[:2]

        def slots(recorded: Optional[Dict[str, Any]], out: bool) -> Optional[Dict[str, Any]]:
            if recorded is None:
                return None
            return {slot: None if v is None else
                    _Seq(v.__class__, [src(t, out) for t in v]) if isinstance(v, (list, tuple))
                    else src(v, out) for slot, v in recorded.items()}
        return (call.type, slots(call.inputs, False), slots(call.outputs, True),
                call.attrs, call.stop_gradient, call.has_grad)

    def _input(self, block: Any, t: Any, produced: Dict[int, Tuple[int, int]],
               static: Dict[int, Any], feed_of: Dict[int, int], srcs: List[Any]) -> Any:
        """The variable of input tensor ``t`` (an earlier op's output, a parameter, or an
        outside tensor: a feed, one per tensor); appends its source to ``srcs``."""
        if id(t) in produced:
            srcs.append((0,) + produced[id(t)])
        elif isinstance(t, ParamBase):
            srcs.append((1, t))
            if id(t) not in static:
                static[id(t)] = self._parameter(block, t)
        else:
            if id(t) not in feed_of:
                feed_of[id(t)] = len(self.feeds)
                name = f"replay_feed_{len(self.feeds)}"
                static[id(t)] = block.create_var(name=name, shape=list(t.shape), dtype=t.dtype,
                                                 is_data=True, stop_gradient=True)
                self.feeds.append(name)
            srcs.append((2, feed_of[id(t)], t.shape, t.dtype))
        return static[id(t)]

    def _parameter(self, block: Any, t: ParamBase) -> Any:
        if t.regularizer is not None or t.gradient_clip_attr is not None or \
                t.optimize_attr.get("learning_rate", 1.0) != 1.0:
            raise _Unsupported(f"parameter {t.name} has its own regularizer, clip or rate")
        self.params[t.name] = t
        return block.create_parameter(name=t.name, shape=t.shape, dtype=t.dtype,
                                      trainable=t.trainable, need_clip=t.need_clip)

    def _add_update(self, opt: Any, loss: Any, params: List[ParamBase]
                    ) -> Tuple[Any, List[str]]:
        """The optimizer's static ``minimize`` of ``loss`` (backward, clip, regularization,
        update) on a clone of ``opt``; returns the clone and the parameters it updates."""
        so = _static_clone(opt)
        names_used = [p.name for p in params if p.name in self.params and p.trainable]
        others = [n for n, p in self.params.items()
                  if n not in names_used and not p._stop_gradient]
        if others:      # eager backward gives them gradients the plan would not
            raise _Unsupported(f"parameters outside parameter_list: {others}")
        so.minimize(loss, parameter_list=names_used)
        return so, names_used

    # -- what the plan shares with the eager side -------------------------------------------
    def _share(self, opt: Any, so: Any, names_used: List[str]) -> None:
        """``shared``, by static name: the parameters and the optimizer's accumulators (the
        eager optimizer's tensors: the plan reads and writes their ``_value`` directly,
        ``Executor._runner``'s cells); the learning rate's holder; the parameters updated,
        with and without a gradient."""
        self.shared: Dict[str, VarBase] = dict(self.params)
        for n in names_used:
            _accumulators(opt, self.params[n])      # created with their start values if new
        for table, by_param in so._accumulators.items():
            for pname, var in by_param.items():
                mine = opt._accumulators.get(table, {}).get(pname)
                if mine is None:
                    raise _Unsupported(f"no eager accumulator {table} for {pname}")
                self.shared[var.name] = mine
        lr_var = so._global_learning_rate(self.program)
        self.lr_holder = self.scope.var(lr_var.name) if lr_var is not None else None
        self.lr_value = opt._learning_rate
        self.updated = [self.params[n] for n in names_used]
        gblock = self.program.global_block()
        # (by name, as minimize's params_grads: fluid's apply_gradients sorts them so)
        self.grad_names = [(self.params[n], n + "@GRAD") for n in sorted(names_used)
                           if gblock.has_var(n + "@GRAD")]
        with_grad = {id(p) for p, _ in self.grad_names}
        self.updated_only = [p for p in self.updated if id(p) not in with_grad]

    def _plan(self, so: Any) -> None:
        """What the plans fetch: some op outputs (``runner``), then the gradients and the
        global norm (as the eager clip leaves it on ``clip.global_norm``)."""
        norm = getattr(so._grad_clip, "global_norm", None)
        self.norm_name = norm.name if norm is not None and hasattr(norm, "name") else None
        self.out_flat = [n for names_ in self.out_names for n in names_]
        self.tail = [g for _, g in self.grad_names] + ([self.norm_name] if self.norm_name else [])
        self.runners: Dict[Tuple[int, ...], Any] = {}

    def runner(self, live: Tuple[int, ...]) -> Any:
        """The executor's runner fetching the op outputs ``live`` (indices into ``out_flat``)
        and ``tail``: planned on first use, kept for the next steps (a loop's live outputs are
        the same every step; at most ``_MAX_RUNNERS`` sets, then every output is fetched).
        Fetching only what the step's caller still holds lets the plan free and fuse the
        rest, as static training does."""
        r = self.runners.get(live)
        if r is not None:
            return r
        if len(self.runners) >= _MAX_RUNNERS:
            return self.runner(tuple(range(len(self.out_flat))))
        fetch = [self.out_flat[i] for i in live] + self.tail
        for n, t in self.shared.items():            # (the scope must know them too)
            self.scope.var(n).set_array(t._value)
        try:
            # (the matchers check every feed's shape and dtype and make it C-contiguous)
            r = self.exe._runner(self.program, self.feeds, fetch, self.scope, trusted=True,
                                 cells=self.shared)
        finally:
            for n in self.shared:                   # (not kept alive by the scope)
                self.scope.var(n).set_array(None)
        if r.stream_count != self.draws:
            # (a random op the plan prunes or duplicates would shift every later draw)
            raise ValueError(f"the plan has {r.stream_count} random streams, the eager step "
                             f"drew from {self.draws}")
        self.runners[live] = r
        return r

    def run(self, runner: Any, feeds: List[np.ndarray], tracer: Any) -> List[np.ndarray]:
        lr = self.opt._learning_rate
        if lr != self.lr_value and self.lr_holder is not None:
            self.lr_holder.set_array(np.array([lr], self.lr_holder.get_array().dtype))
            self.lr_value = lr
        saved, _mode.tracer = _mode.tracer, None
        try:
            if not runner.stream_count:
                return runner(feeds)
            # the plan's random ops (dropout ...) draw, in program order, from the generator
            # the eager ops draw from: the same masks as an eager step, and the same state after
            g = tracer.random_stream()
            return runner(feeds, [g] * runner.stream_count)
        finally:
            _mode.tracer = saved


def _draws(call: _Call) -> bool:
    """The eager op drew from the tracer's generator (``Tracer._rng_for``): a random op
    without a fixed nonzero ``seed``."""
    opdef = get_op_def(call.type)
    if not opdef.uses_rng:
        return False
    attrs = {**opdef.attr_defaults, **(call.attrs or _NO_ATTRS)}     # as check_attrs fills
    return not (int(attrs.get("seed", 0) or 0) and attrs.get("fix_seed", True))


def _matcher(i: int, call: _Call, srcs: List[Any], specs: List[Any], start: List[int]) -> Any:
    """The test ``Tracer.trace_op`` applies to op ``i`` of a replayed step (``_Step.match``),
    generated once per op as straight-line code (it runs for every op of every replayed
    step), called with ``trace_op``'s arguments and the step: the call must have the
    recorded type, attrs and flags, the same input slots holding the same tensors -- an
    earlier op's output, the same parameter, or an outside tensor of the recorded shape and
    dtype with ``stop_gradient`` (a feed; one tensor per feed within a step) -- and output
    slots holding new empty tensors, which it then marks pending. Returns whether it
    matched; nothing changes when it did not."""
    code = _MatchCode(i, call, start)
    it = iter(srcs)
    for slot, v in (call.inputs or {}).items():
        ts = _tensors(v)
        if not ts and not isinstance(v, (list, tuple)):
            code.fail(f"inputs.get({slot!r}, MISSING) is not None")
            continue
        for expr, src in zip(code.slot(slot, v), (next(it) for _ in ts)):
            code.check_input(expr, src)
    got = code.check_outputs(call.outputs or {}, specs)
    return code.compile(got, [sp for sp in specs if sp is not None])


class _MatchCode:
    """The source of one matcher (``_matcher``) being generated: its lines, the names they
    refer to (``env``) and the feeds seen so far."""

    def __init__(self, i: int, call: _Call, start: List[int]) -> None:
        self.i, self.start = i, start
        self.env: Dict[str, Any] = {"VarBase": VarBase, "NO": _NO_ATTRS, "MISSING": _MISSING,
                                    "np": np, "A": dict(call.attrs or {})}
        ins = call.inputs or {}
        outs = call.outputs or {}
        self.lines = [f"def match_{i}(step, type, inputs, outputs, attrs, sg, hg):",
                      f"    if type != {call.type!r} or sg != {bool(call.stop_gradient)} or "
                      f"hg != {bool(call.has_grad)} or (attrs or NO) != A:",
                      "        return False",
                      "    if inputs is None: inputs = NO",
                      "    if outputs is None: outputs = NO",
                      f"    if len(inputs) != {len(ins)} or len(outputs) != {len(outs)}:",
                      "        return False",
                      "    outs, feeds = step.outs, step.feeds"]
        self.feeds: List[Tuple[str, int]] = []
        self.seen: Dict[int, str] = {}      # feed index -> the local holding its tensor
        self.n = 0

    def fail(self, cond: str) -> None:
        """The match fails when ``cond`` holds."""
        self.lines.extend([f"    if {cond}:", "        return False"])

    def slot(self, slot: str, v: Any) -> List[str]:
        """Read input ``slot`` (recorded as ``v``: a tensor or a list); returns the
        expressions of its tensors."""
        self.n += 1
        n = self.n
        self.lines.append(f"    v{n} = inputs.get({slot!r}, MISSING)")
        if isinstance(v, (list, tuple)):
            self.fail(f"(v{n}.__class__ is not list and v{n}.__class__ is not tuple) or "
                      f"len(v{n}) != {len(v)}")
            return [f"v{n}[{j}]" for j in range(len(v))]
        return [f"v{n}"]

    def check_input(self, expr: str, src: Any) -> None:
        """The input tensor ``expr`` must come from ``src`` (see ``_Compiled.sources``)."""
        if src[0] == 0:
            self.fail(f"{expr} is not outs[{self.start[src[1]] + src[2]}]")
        elif src[0] == 1:
            name = f"P{len(self.env)}"       # (a new name per parameter input)
            self.env[name] = src[1]
            self.fail(f"{expr} is not {name}")
        elif src[1] in self.seen:     # one outside tensor given twice when recorded
            self.fail(f"{expr} is not {self.seen[src[1]]}")
        else:
            self._check_feed(expr, src)

    def _check_feed(self, expr: str, src: Any) -> None:
        """An outside tensor: a stop_gradient ``VarBase`` of the recorded shape and dtype, the
        same as any other use of this feed in the step (made C-contiguous)."""
        f = f"f{len(self.feeds)}"
        self.env[f"S{f}"], self.env[f"D{f}"] = src[2], src[3]
        self.seen[src[1]] = f"t{f}"
        self.lines.append(f"    t{f} = t = {expr}")
        self.fail("t.__class__ is not VarBase or t._pending is not None")
        self.lines.append(f"    {f} = t._value")
        self.fail(f"{f} is None or {f}.shape != S{f} or {f}.dtype != D{f} or "
                  f"not t._stop_gradient")
        self.lines.extend([f"    if not {f}.flags.c_contiguous:",
                           f"        {f} = np.ascontiguousarray({f})",
                           f"    g = feeds[{src[1]}]"])
        self.fail(f"g is not None and g is not {f}")
        self.feeds.append((f, src[1]))

    def check_outputs(self, outs: Dict[str, Any], specs: List[Any]) -> List[str]:
        """Every output slot must hold new empty tensors, as eager ops get (each once), or,
        where ``specs`` has None, the recorded state parameter itself (``_is_state``);
        returns the locals holding the new tensors."""
        got: List[str] = []
        state = iter(t for v in outs.values() for t in _tensors(v))
        kinds = iter(specs)
        for slot, v in outs.items():
            self.lines.append(f"    v = outputs.get({slot!r}, MISSING)")
            if isinstance(v, (list, tuple)):
                self.fail(f"(v.__class__ is not list and v.__class__ is not tuple) or "
                          f"len(v) != {len(_tensors(v))}")
                exprs = [f"v[{j}]" for j in range(len(_tensors(v)))]
            else:
                exprs = ["v"]
            for expr in exprs:
                recorded = next(state)
                if next(kinds) is None:         # the op's state: the same parameter
                    name = f"P{len(self.env)}"
                    self.env[name] = recorded
                    self.fail(f"{expr} is not {name}")
                    continue
                o = f"o{len(got)}"
                self.lines.append(f"    {o} = {expr}")
                # (not pending, so it has a _value: VarBase's docstring)
                self.fail(f"{o}.__class__ is not VarBase or {o}._pending is not None or "
                          f"{o}._value is not None or {o}._node is not None")
                got.append(o)
        if len(got) > 1:            # one tensor given twice would be filled twice
            self.fail(f"len({{{', '.join(f'id({o})' for o in got)}}}) != {len(got)}")
        return got

    def compile(self, got: List[str], specs: List[Any]) -> Any:
        """The matcher: on a match it records the feeds, marks the outputs ``got`` pending
        with their recorded ``specs``, appends them to the step's ``outs`` and counts the
        call (``_Compiled.calls`` holds what ``materialize`` calls again)."""
        for f, j in self.feeds:
            self.lines.append(f"    feeds[{j}] = {f}; step.feed_t[{j}] = t{f}")
        for k, (o, (shape, dtype, stop)) in enumerate(zip(got, specs)):
            self.env[f"DECL{k}"] = (shape, convert_np_dtype_to_dtype_(dtype))    # (a VarType)
            self.lines.extend([f"    del {o}._value", f"    {o}._pending = step",
                               f"    {o}._decl = DECL{k}",
                               f"    {o}._stop_gradient = {bool(stop)}"])
        if len(got) == 1:
            self.lines.append(f"    outs.append({got[0]})")
        elif got:
            self.lines.append(f"    outs += {', '.join(got)},")
        self.lines.extend([f"    step.i = {self.i + 1}", "    return True"])
        exec(compile("\n".join(self.lines), f"<fluidlite-replay-match-{self.i}>", "exec"),
             self.env)
        return self.env[f"match_{self.i}"]


_MISSING = object()


def _refcounts(objs: List[Any]) -> List[int]:
    """The reference counts of ``objs`` (each also held by the list)."""
    return [sys.getrefcount(o) for o in objs]


# what ``_refcounts`` reports for an object only the list refers to (None: no refcounts)
_REFCOUNT_BASE: Optional[int] = (_refcounts([object()])[0] if hasattr(sys, "getrefcount")
                                 else None)


class _Unsupported(Exception):
    """This step cannot be replayed (the reason is logged at debug level)."""


def _static_clone(opt: Any) -> Any:
    """``opt`` without its eager state, for one static ``minimize``."""
    so = copy.copy(opt)
    so.__dict__ = {k: v for k, v in opt.__dict__.items() if not k.startswith("_dygraph")}
    so._accumulators = defaultdict(dict)
    so._learning_rate_map = {}
    so._opti_name_list = []
    so._parameter_list = None
    so._attrs = dict(opt._attrs)
    if opt._grad_clip is not None:      # the static clip records its norm Variable on itself
        so._grad_clip = copy.deepcopy(opt._grad_clip)
    return so


_CLIP_SETTINGS = ("clip_norm", "max", "min", "error_if_nonfinite", "need_clip")


class _Settings:
    """What the compiled update depends on besides the learning rate, as it was when the step
    was compiled, compared before each replay: the update op's attrs (the optimizer's
    hyper-parameters), the clip object and its settings, and the regularizer."""

    __slots__ = ("attrs", "clip", "get", "values", "reg")

    def __init__(self, opt: Any) -> None:
        clip = opt._grad_clip
        self.attrs, self.clip, self.reg = dict(opt._attrs), clip, opt.regularization
        present = [n for n in _CLIP_SETTINGS if hasattr(clip, n)] if clip is not None else []
        self.get = operator.attrgetter(*present) if present else None
        self.values = self.get(clip) if self.get is not None else None

    def same(self, opt: Any) -> bool:
        clip = opt._grad_clip
        return (clip is self.clip and opt.regularization is self.reg and
                opt._attrs == self.attrs and (self.get is None or self.get(clip) == self.values))


class _Step:
    """A step being replayed: how many calls matched so far (``i``), their pending outputs
    and the step's feeds."""

    def __init__(self, owner: "Replayer", compiled: _Compiled, tracer: Any) -> None:
        self.owner, self.c, self.tracer = owner, compiled, tracer
        # per op, its matcher (``_matcher``; Tracer.trace_op calls the next one)
        self.match, self.n = compiled.match, len(compiled.match)
        self.i = 0                              # calls matched (the matchers count)
        self.outs: List[VarBase] = []           # their new tensors, op after op
        self.feeds: List[Any] = [None] * len(compiled.feeds)    # arrays, as matched
        self.feed_t: List[Any] = [None] * len(compiled.feeds)   # and their tensors
        self.loss: Optional[VarBase] = None
        self.grads: List[ParamBase] = []        # parameters whose gradient is deferred
        self.backward = False
        self.done = False

    # -- matching ---------------------------------------------------------------------------
    def defer_backward(self, loss: VarBase) -> bool:
        """``loss.backward()`` with no arguments: deferred when ``loss`` is the compiled
        step's loss, every op has been matched and no parameter holds a gradient yet."""
        c = self.c
        if self.backward or self.i != self.n or loss is not self.outs[c.loss_k]:
            return False
        for p, _ in c.grad_names:
            if "_grad" not in p.__dict__ or p.__dict__["_grad"] is not None:
                return False
        for p, _ in c.grad_names:
            del p.__dict__["_grad"]
            p.__dict__["_pending"] = self
            self.grads.append(p)
        self.backward = True
        self.loss = loss
        return True

    def _live(self) -> Tuple[int, ...]:
        """The outputs (indices into ``outs``) that something besides ``outs`` refers to --
        the loss, a local the training loop keeps, an attribute, a list or dict the caller
        holds (``split``'s outputs) -- found by reference count as NumPy finds its
        temporaries (CPython; every output elsewhere). The step keeps no slot dict of its
        own (``_Compiled.calls``), so any other reference is the caller's. Whatever else the
        step produced dies with it, unread."""
        outs = self.outs
        if _REFCOUNT_BASE is None:
            return tuple(range(len(outs)))
        # (the loss is one: ``self.loss`` refers to it)
        return tuple(k for k, n in enumerate(_refcounts(outs)) if n > _REFCOUNT_BASE)

    # -- ending ------------------------------------------------------------------------------
    def _release(self, values: bool = True) -> None:
        """End the step: no tensor is pending any more (``values``: unmark the outputs too;
        ``commit`` does that as it fills them)."""
        self.done = True
        if self.owner.active is self:
            self.owner.active = None
        if values:
            for t in self.outs:
                t.__dict__.pop("_pending", None)
        for p in self.grads:
            p.__dict__.pop("_pending", None)
            p.__dict__.setdefault("_grad", None)

    def _slots(self, slots: Optional[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
        """A slot dict of ``_Compiled.calls`` with its sources replaced by the tensors."""
        if slots is None:
            return None
        out: Dict[str, Any] = {}
        for slot, v in slots.items():
            if v is None:
                out[slot] = None
            elif v.__class__ is _Seq:
                out[slot] = v.cls(self._tensor(src) for src in v.srcs)
            else:
                out[slot] = self._tensor(v)
        return out

    def _tensor(self, src: Tuple[int, Any]) -> Any:
        kind, at = src
        return self.outs[at] if kind == 0 else at if kind == 1 else self.feed_t[at]

    def materialize(self) -> None:
        """Run the matched calls eagerly (the step continues eagerly)."""
        if self.done:
            return
        self._release()
        self.c.fails += 1
        # the current tracer: autograd orders nodes by its counter (a loop may enter dygraph
        # mode with a new tracer every step)
        tracer = _mode.tracer if _mode.tracer is not None else self.tracer
        saved = tracer.has_grad
        try:
            for type_, inputs, outputs, attrs, stop_gradient, has_grad in \
                    self.c.calls[:self.i]:
                tracer.has_grad = has_grad
                tracer.trace_op(type_, self._slots(inputs), self._slots(outputs),
                                None if attrs is None else dict(attrs), stop_gradient)
        finally:
            tracer.has_grad = saved
        if self.backward:
            run_backward([self.loss])

    def commit(self, opt: Any) -> Optional[List[Tuple[ParamBase, VarBase]]]:
        """``opt.minimize(loss)`` of a fully matched step: run the plan; None when this step
        cannot be committed (it was materialized instead)."""
        c = self.c
        # (every op matched, so every feed is set)
        if not self.backward or opt is not c.opt or not c.settings.same(opt):
            self.materialize()
            return None
        live = self._live()
        try:
            runner = c.runner(live)
        except Exception as e:          # a bug: never break the step, continue it eagerly
            _log.debug("step replay: not planned (%r)", e)
            c.fails = _MAX_FAILS
            self.materialize()
            return None
        try:
            res = c.run(runner, self.feeds,
                        _mode.tracer if _mode.tracer is not None else self.tracer)
        except Exception:               # the eager run says where, in the user's terms
            self.materialize()
            raise
        self.done = True                # (_release, with the loops below doing its work)
        self.owner.active = None
        it = iter(res)
        wanted = iter(live)
        k, j = 0, next(wanted, -1)
        for t in self.outs:
            # an output nothing outside the step refers to goes with the step: no value
            t._value = next(it) if k == j else None
            if k == j:
                j = next(wanted, -1)
            k += 1
            del t._pending
        pairs = []
        for p, gname in c.grad_names:   # (defer_backward made exactly these pending)
            g = next(it)
            d = p.__dict__
            del d["_pending"]
            d["_grad"] = g
            d["_version"] += 1
            pairs.append((p, VarBase(g, name=gname)))
        for p in c.updated_only:        # updated without a gradient (none in practice)
            p._version += 1
        if c.norm_name is not None:
            opt._grad_clip.global_norm = VarBase(next(it), name="global_norm")
        c.fails = 0
        self.owner.replayed += 1
        return pairs


class Replayer:
    """Records eager steps, compiles a repeating one, replays it. One for the process (a
    training loop may enter and leave dygraph mode every step); the tracer a step runs on is
    the one current when it was armed."""

    def __init__(self) -> None:
        self.tape: Optional[_Tape] = None
        self.prev: Any = None               # the previous eager step's signature
        self.refused: Any = None            # a signature that failed to compile
        self.compiled: Optional[_Compiled] = None
        self.active: Optional[_Step] = None
        self.off = not enabled()
        self.replayed = 0                   # steps committed (for tests and curious users)

    def reset(self) -> None:
        """Forget the compiled step and any step in progress (materialized first)."""
        if self.active is not None:
            self.active.materialize()
        self.tape = self.prev = self.refused = self.compiled = None

    # -- called by the tracer ---------------------------------------------------------------
    def record(self, call: _Call) -> None:
        tape = self.tape
        if len(tape) >= _MAX_TAPE:
            self.tape = None
            return
        tape.add(call)

    def start_step(self) -> None:
        """After a step's ``minimize``: arm the compiled step, or record the next one. A
        compiled step materialized ``_MAX_FAILS`` times in a row (e.g. the loss is printed
        before ``minimize`` every step) rests ``_REST`` steps -- no arming, no recording --
        then one step is recorded: the same step with the same optimizer settings gets one
        more try, changed settings are compiled anew."""
        c = self.compiled
        self.tape = None
        if c is not None and c.fails >= _MAX_FAILS:
            c.rest -= 1
            if c.rest <= 0:             # record this step: eager_minimize decides what next
                c.rest = _REST
                self.tape = _Tape()
            return
        if c is not None and _mode.tracer is not None:
            self.active = _Step(self, c, _mode.tracer)
        else:
            self.tape = _Tape()

    def eager_minimize(self, opt: Any, loss: Any, params: Sequence[ParamBase],
                       plain: bool) -> None:
        """An eager ``minimize`` ended a step: compare it with the previous one; on the
        second identical step, compile. ``plain``: minimize had no per-call arguments
        (``no_grad_set``, another clip) -- the only kind replayed."""
        if self.off:
            return
        tape, self.tape = self.tape, None
        if tape is not None and tape and plain and isinstance(loss, VarBase):
            sig = _signature(tape, loss, opt)
            if sig is not None:
                c = self.compiled
                if c is not None and c.sig == sig and c.fails >= _MAX_FAILS and \
                        c.settings.same(opt):
                    c.fails = _MAX_FAILS - 1        # rested: one more try
                elif sig == self.refused or (c is not None and c.sig == sig and
                                             c.fails < _MAX_FAILS):
                    pass
                elif sig == self.prev:      # (also: changed optimizer settings recompile)
                    try:
                        self.compiled = _Compiled(tape, sig, opt, loss, list(params))
                    except Exception as e:  # _Unsupported, or a bug: never break the step
                        _log.debug("step replay: not compiled (%r)", e)
                        self.compiled, self.refused = None, sig
                self.prev = sig
        self.start_step()


def _is_state(t: Any, call: _Call) -> bool:
    """Output ``t`` of ``call`` is state the op updates in place: a non-trainable parameter
    that is also one of its inputs (batch_norm's MeanOut/VarianceOut = Mean/Variance). A
    replayed step writes it as the static plan writes a persistable."""
    if not isinstance(t, ParamBase) or t.trainable:
        return False
    return any(x is t for v in (call.inputs or {}).values() for x in _tensors(v))


def _signature(tape: _Tape, loss: VarBase, opt: Any) -> Any:
    """The step's identity for replay (None: not replayable): per op its type, attrs, stop
    flags, where each input comes from and the outputs' shapes, dtypes and stop flags."""
    produced: Dict[int, Tuple[int, int]] = {}
    ext: Dict[int, int] = {}
    out = []
    for i, call in enumerate(tape):
        srcs = []
        for slot, v in (call.inputs or {}).items():
            for t in _tensors(v):
                if id(t) in produced:
                    srcs.append((slot, "o") + produced[id(t)])
                elif isinstance(t, ParamBase):
                    srcs.append((slot, "p", id(t)))
                elif t.__class__ is not _Snap:
                    return None             # not a tensor
                else:
                    if t.persistable or not t.stop:
                        return None         # a leaf that wants a gradient: eager only
                    if t.shape is None:
                        return None
                    srcs.append((slot, "e", ext.setdefault(id(t), len(ext)), t.shape,
                                 t.dtype.str))
        outs = []
        n = 0
        for slot, v in (call.outputs or {}).items():
            for t in _tensors(v):
                if _is_state(t, call):      # batch_norm's moving statistics: the plan's
                    outs.append((slot, "state", id(t)))     # persistable write (cells)
                    continue
                if t.__class__ is not _Snap or t.cls is not VarBase or t.persistable or \
                        id(t) in produced or id(t) in ext:
                    return None             # writes a parameter, persistable or input
                if t.shape is None:
                    return None
                produced[id(t)] = (i, n)
                n += 1
                outs.append((slot, t.shape, t.dtype.str, t.stop))
        try:
            attrs = tuple(sorted((call.attrs or {}).items()))
            hash(attrs)
        except TypeError:
            attrs = repr(sorted((call.attrs or {}).items()))
        out.append((call.type, attrs, call.stop_gradient, call.has_grad, tuple(srcs),
                    tuple(outs)))
    at = produced.get(id(tape.find(loss)))
    if at is None:
        return None
    if opt._extra_inputs or not isinstance(opt._learning_rate, float):
        return None                 # tensor inputs or a learning-rate schedule: eager only
    return (tuple(out), at, id(opt))


REPLAYER = Replayer()
install_replayer(REPLAYER)
