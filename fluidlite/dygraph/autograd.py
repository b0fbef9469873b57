"""Eager reverse mode over the tracer's nodes: ``backward`` and ``grad``.

Nodes are numbered in creation order, so visiting the reachable nodes from the newest down is a
reverse topological order. For each node the incoming output gradients (zeros for outputs
nobody differentiated, as the static backward's ``fill_zeros_like``) go through the op's own
gradient rule:

* fast path (``create_graph=False`` and the op has a ``backward`` kernel): the generated
  ``<type>_grad`` def's ``bind`` -- the callable the static executor calls -- on the arrays
  (for ``backward()``, through a step function generated once per op entry and stop_gradient
  flags: see ``_engine_plain``);
* otherwise the op's grad maker (``grad_op_descs``: its ``make_grad`` composition or the
  ``<type>_grad`` op) emits op descs, which the tracer runs one by one. With
  ``create_graph=True`` those runs are recorded, so the gradients are differentiable (the
  ``double_grad`` rules give every order the static backward supports).

A leaf weight that two or more plain 2-D products (``matmul`` / ``mul``) use as Y, and no
other op of the pass reads, gets its gradient as one GEMM over the products' stacked rows
after the pass (``_shared_weights``; without ``create_graph``), as the static plan computes
it: the same sum of products in another order, so backward() and grad() agree with each other
and with a replayed step bit for bit.

Gradients reaching a leaf tensor (no node, ``stop_gradient=False``) accumulate into its
``gradient()`` (``backward``) or are returned (``grad``); ``backward`` also leaves every
intermediate tensor that is still referenced its gradient of that pass (as fluid 1.8). Unless
``retain_graph``, the visited nodes are released (their saved arrays are dropped) -- by
``backward`` each as soon as its gradient has run, so activations go as the pass walks back
(an error mid-pass leaves the walked part released, as in PyTorch); a second backward through
them raises an error saying to pass ``retain_graph=True``.
"""
from __future__ import annotations

import operator
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .. import profiler as _profiler
from ..core import mode as _mode
from ..core import names, registry
from ..core.registry import GradBuilder, VarSpec
from ..executor.fusion.kernels.stacked_grad import StackedWeightGrad
from ..executor.fusion.patterns.stacked_grad import PLAIN_PRODUCTS
from .tensor import VarBase, install_backward
from .tracer import Node, Tracer, kernel_entry

__all__ = ["run_backward", "grad", "backward"]

_GRAD = names.GRAD_SUFFIX
_GRAD_BINDINGS: Dict[Any, Any] = {}
_FAST: Dict[str, Any] = {}     # op type -> (opdef, has a plain backward kernel)


def _tracer() -> Tracer:
    from .tracer import _DEFAULT
    return _mode.tracer if _mode.tracer is not None else _DEFAULT


def _as_list(x: Any) -> List[Any]:
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _to_array(g: Any) -> Any:
    return g._array() if isinstance(g, VarBase) else np.asarray(g)


class _View:
    """What a grad maker sees of a traced op: slot -> names, attrs, and a block answering
    shape/dtype questions about those names (``Compose.shape``)."""

    def __init__(self, op_type: str, inputs: Dict[str, List[str]],
                 outputs: Dict[str, List[str]], attrs: Dict[str, Any],
                 env: Dict[str, VarBase]) -> None:
        self.type, self.inputs, self.outputs, self._attrs = op_type, inputs, outputs, attrs
        self._env = env
        self.block = self

    def attr(self, name: str) -> Any:
        return self._attrs.get(name)

    def all_attrs(self) -> Dict[str, Any]:
        return self._attrs

    def _find_var_recursive(self, name: str) -> Optional[VarBase]:
        while name not in self._env and name.endswith(_GRAD):
            name = name[:-len(_GRAD)]
        return self._env.get(name)


def _node_grads(node: Node, douts: List[Any], create_graph: bool, blocked: set) -> List[Any]:
    """The gradients of ``node``'s inputs (per input slot: array/tensor, list, or None) from its
    output gradients ``douts`` (per output slot)."""
    opdef = node.opdef
    need = []
    for v in node.in_vars:
        if v is None:
            need.append(False)
        elif v.__class__ is list:
            need.append(any(not x._stop_gradient and id(x) not in blocked for x in v))
        else:
            need.append(not v._stop_gradient and id(v) not in blocked)
    if node.__class__ is not Node:  # a @declarative call: its static backward (declarative.py)
        return opdef.node_grads(node, douts, need, create_graph)
    fast = _FAST.get(opdef.type)
    if fast is None or fast[0] is not opdef:
        fast = _FAST[opdef.type] = (opdef, opdef.has_backward() and not opdef.has_make_grad())
    if not create_graph and fast[1]:
        return _fast_grads(node, douts, need)
    return _composed_grads(node, douts, need, create_graph, blocked)


def _spec(a: Any) -> Any:
    if a is None:
        return None
    if a.__class__ is list:
        return [None if x is None else VarSpec(x.shape, x.dtype) for x in a]
    return VarSpec(a.shape, a.dtype)


def _fast_grads(node: Node, douts: Any, need: List[bool], bind_only: bool = False) -> Any:
    opdef = node.opdef
    bkey = (node.key, tuple(need))
    entry = _GRAD_BINDINGS.get(bkey)
    if entry is None:
        present = frozenset(s.name + _GRAD for s, n in zip(opdef.in_slots, need) if n)
        gdef = registry.get_op_def(opdef.type + "_grad")
        in_pos = {s.name: i for i, s in enumerate(opdef.in_slots)}
        out_pos = {s.name: i for i, s in enumerate(opdef.out_slots)}
        plan = []
        for s in gdef.in_slots:
            if s.name.endswith(_GRAD):
                plan.append((2, out_pos[s.name[:-len(_GRAD)]]))
            elif s.name in in_pos:
                plan.append((0, in_pos[s.name]))
            else:
                plan.append((1, out_pos[s.name]))
        # specs from this node's arrays (an output's gradient is shaped like the output): the
        # key is per (op, attrs, shapes), so they hold for every node sharing it
        arrs = (node.in_arrays, node.out_arrays, node.out_arrays)
        binding = gdef.bind([_spec(arrs[k][i]) for k, i in plan], node.attrs, present)
        # per input slot: the key of its gradient in the kernel's result (None: not wanted)
        keys = tuple(binding.result_keys.get(s.name + _GRAD, s.name + _GRAD) if n else None
                     for s, n in zip(opdef.in_slots, need))
        entry = (binding.fn, keys, tuple(plan))
        if len(_GRAD_BINDINGS) > 8192:
            _GRAD_BINDINGS.clear()
        _GRAD_BINDINGS[bkey] = entry
    if bind_only:
        return None
    fn, keys, plan = entry
    srcs = (node.in_arrays, node.out_arrays, douts)
    res = fn(*[srcs[k][i] for k, i in plan])
    return [None if k is None else res.get(k) for k in keys]


_DESCS: Dict[Any, Any] = {}


def _composed_arrays(node: Node, douts: List[Any], need: List[bool], blocked: Any,
                     fill: bool = False) -> List[Any]:
    """``_composed_grads`` without recording: the grad maker's op descs are built once per
    (op, attrs, shapes, which inputs need gradients) and then run as kernel calls on arrays.
    ``fill``: ``douts`` still has None for unreached outputs (zeros are made for those read)."""
    flags = tuple(None if v is None else
                  tuple(not x._stop_gradient and id(x) not in blocked and need[i] for x in v)
                  if isinstance(v, list) else (not v._stop_gradient and id(v) not in blocked
                                               and need[i])
                  for i, v in enumerate(node.in_vars))
    key = (node.key, flags)
    plan = _DESCS.get(key)
    if plan is None:
        plan = _DESCS[key] = _make_plan(node, douts, need, blocked)
        if len(_DESCS) > 4096:
            _DESCS.clear()
    x_names, o_names, steps, results, reads = plan
    if fill:                            # zeros for the unreached outputs the steps read
        for i in reads:
            g, arr = douts[i], node.out_arrays[i]
            if arr.__class__ is list:
                douts[i] = [np.zeros_like(a) if x is None else x for x, a in zip(g, arr)]
            elif g is None:
                douts[i] = np.zeros_like(arr)
    env = _plan_env(node, douts, x_names, o_names)
    for step in steps:
        _run_plan_step(step, env)
    out = []
    for spec in results:
        if spec is None:
            out.append(None)
            continue
        gnames, is_list = spec
        gs = [None if n is None else env.get(n) for n in gnames]
        out.append(gs if is_list else gs[0])
    return out


def _plan_env(node: Node, douts: List[Any], x_names: Any, o_names: Any) -> Dict[str, Any]:
    """The arrays a composed-gradient plan starts from, by the names its op descs use: the
    node's inputs, its outputs and their gradients ``douts``."""
    env: Dict[str, Any] = {}
    for ns, v in zip(x_names, node.in_arrays):
        if ns is not None:
            if v.__class__ is list:
                env.update(zip(ns, v))
            else:
                env[ns[0]] = v
    for (ns, gns), arr, g in zip(o_names, node.out_arrays, douts):
        if ns is None:
            continue
        if arr.__class__ is list:
            env.update(zip(ns, arr))
            env.update((n, x._array() if isinstance(x, VarBase) else x)
                       for n, x in zip(gns, g) if x is not None)
        else:
            env[ns[0]] = arr
            if g is not None:
                env[gns[0]] = g._array() if isinstance(g, VarBase) else g
    return env


def _run_plan_step(step: Any, env: Dict[str, Any]) -> None:
    """Run one op desc of a composed-gradient plan on the arrays of ``env`` (by name) and put
    its results there."""
    op_type, attrs, out_slots, in_spec, out_spec, bound = step
    ins = []
    for ns, dup in in_spec:
        if ns is None:              # a slot of the grad op the maker left empty
            ins.append(None)
            continue
        vals = [env[n] for n in ns if n in env]
        ins.append((vals if dup else vals[0]) if vals else None)
    # the bound kernel of this grad op per input signature (what ``kernel`` looks up)
    sig = tuple(None if a is None else
                tuple((x.shape, x.dtype.char) for x in a) if a.__class__ is list else
                (a.shape, a.dtype.char) for a in ins)
    entry = bound.get(sig)
    if entry is None:
        entry = bound[sig] = kernel_entry(op_type, attrs, ins, out_slots)
    fn, single, result_keys = entry
    res = fn(*ins)
    if single:
        res = {out_slots[0]: res}
    elif len(out_slots) == 1:
        res = {out_slots[0]: res[result_keys.get(out_slots[0], out_slots[0])]}
    else:
        res = {o: res.get(result_keys.get(o, o)) for o in out_slots}
    for slot, ns in out_spec:
        val = res.get(slot)
        if val is None:
            continue
        if val.__class__ is list:
            env.update(zip(ns, val))
        else:
            env[ns[0]] = val


def _bind_inputs(node: Node, need: List[bool], blocked: set, env: Dict[str, "VarBase"],
                 ins: Dict[str, List[str]], no_grad: set, live: bool) -> None:
    """Name a node's inputs ``x<slot>_<j>`` for its grad maker: ``env`` gets the tensors (the
    recorded tensors themselves when ``live``, for a differentiable gradient graph; detached
    copies otherwise), ``ins`` the names per slot, ``no_grad`` those needing no gradient."""
    for si, (s, v) in enumerate(zip(node.opdef.in_slots, node.in_vars)):
        if v is None:
            continue
        slot_names = []
        for j, x in enumerate(_as_list(v)):
            n = f"x{si}_{j}"
            slot_names.append(n)
            env[n] = x if live else VarBase(x._array())
            if x._stop_gradient or id(x) in blocked or not need[si]:
                no_grad.add(n)
        ins[s.name] = slot_names


def _make_plan(node: Node, douts: List[Any], need: List[bool], blocked: set) -> Any:
    opdef = node.opdef
    env: Dict[str, VarBase] = {}
    ins: Dict[str, List[str]] = {}
    outs: Dict[str, List[str]] = {}
    no_grad = set()
    _bind_inputs(node, need, blocked, env, ins, no_grad, live=False)
    for si, s in enumerate(opdef.out_slots):
        arr = node.out_arrays[si]
        if arr is None:
            continue
        slot_names = []
        for j, a in enumerate(_as_list(arr)):
            n = f"o{si}_{j}"
            slot_names.append(n)
            env[n] = VarBase(a)
        outs[s.name] = slot_names
    g = GradBuilder(_View(opdef.type, ins, outs, node.attrs, env), no_grad,
                    grad_name=lambda n: n + _GRAD)
    # the grad maker's descs, compiled to name tuples so a run only fills a dict of arrays
    steps = []
    for d in opdef.grad_op_descs(g):
        ddef = registry.get_op_def(d.type)
        # per input slot of the grad op's definition (the kernel's argument order): the
        # names the desc gives it (None: not given) and whether the slot is duplicable
        in_spec = tuple((tuple(d.inputs[sl.name]) if sl.name in d.inputs else None,
                         bool(sl.duplicable)) for sl in ddef.in_slots)
        out_spec = tuple((slot, tuple(n if n != names.EMPTY_VAR_NAME else "\0" for n in ns))
                         for slot, ns in d.outputs.items())
        steps.append((d.type, d.attrs, tuple(d.outputs), in_spec, out_spec, {}))
    x_names = [tuple(ins[s.name]) if s.name in ins else None for s in opdef.in_slots]
    o_names = [(tuple(outs[s.name]), tuple(n + _GRAD for n in outs[s.name]))
               if s.name in outs else (None, None) for s in opdef.out_slots]
    results = []
    for si, s in enumerate(opdef.in_slots):
        ns = ins.get(s.name)
        if ns is None or not need[si]:
            results.append(None)
            continue
        results.append((tuple(None if n in no_grad else n + _GRAD for n in ns),
                        isinstance(node.in_vars[si], list)))
    # the output slots whose gradient the steps (or the results) read: only those need the
    # zeros of an unreached output (``_composed_step``)
    read = {n for _, _, _, in_spec, _, _ in steps for ns, _ in in_spec if ns for n in ns}
    read.update(n for r in results if r is not None for n in r[0] if n is not None)
    reads = frozenset(si for si, (_, gns) in enumerate(o_names)
                      if gns is not None and read.intersection(gns))
    return x_names, o_names, tuple(steps), tuple(results), reads


def _composed_grads(node: Node, douts: List[Any], need: List[bool], create_graph: bool,
                    blocked: set) -> List[Any]:
    if not create_graph:
        return _composed_arrays(node, douts, need, blocked)
    opdef = node.opdef
    env: Dict[str, VarBase] = {}
    ins: Dict[str, List[str]] = {}
    outs: Dict[str, List[str]] = {}
    no_grad = set()
    _bind_inputs(node, need, blocked, env, ins, no_grad, live=True)
    for si, s in enumerate(opdef.out_slots):
        arr = node.out_arrays[si]
        if arr is None:
            continue
        refs = _as_list(node.out_refs[si])
        arrs = _as_list(arr)
        grads = _as_list(douts[si])
        slot_names = []
        for j, (ref, a, g) in enumerate(zip(refs, arrs, grads)):
            n = f"o{si}_{j}"
            slot_names.append(n)
            live = ref() if (create_graph and ref is not None) else None
            env[n] = live if live is not None else VarBase(a)
            env[n + _GRAD] = g if isinstance(g, VarBase) else VarBase(g)
        outs[s.name] = slot_names
    g = GradBuilder(_View(opdef.type, ins, outs, node.attrs, env), no_grad,
                    grad_name=lambda n: n + _GRAD)
    descs = opdef.grad_op_descs(g)
    tracer = _tracer()
    has_grad, tracer.has_grad = tracer.has_grad, create_graph
    try:
        for d in descs:
            d_ins = {}
            for slot, ns in d.inputs.items():
                vals = [env[n] for n in ns if n in env]
                if vals:
                    d_ins[slot] = vals
            d_outs = {}
            for slot, ns in d.outputs.items():
                vs = []
                for n in ns:
                    if n == names.EMPTY_VAR_NAME:
                        vs.append(VarBase(None))
                    else:
                        vs.append(env.setdefault(n, VarBase(None)))
                d_outs[slot] = vs
            tracer.trace_op(d.type, d_ins, d_outs, d.attrs)
    finally:
        tracer.has_grad = has_grad
    out = []
    for si, s in enumerate(opdef.in_slots):
        if s.name not in ins or not need[si]:
            out.append(None)
            continue
        gs = []
        for n in ins[s.name]:
            gv = env.get(n + _GRAD) if n not in no_grad else None
            if gv is not None and gv._value is None:
                gv = None
            gs.append(gv if (gv is None or create_graph) else gv._value)
        out.append(gs if isinstance(node.in_vars[si], list) else gs[0])
    return out


def _fill_zeros(node: Node, douts: List[Any]) -> None:
    """Zeros (as the static backward's ``fill_zeros_like``) for the outputs nobody
    differentiated, in place of their None."""
    for i, (g, arr) in enumerate(zip(douts, node.out_arrays)):
        if arr is None:
            continue
        if arr.__class__ is list:
            douts[i] = [np.zeros_like(a) if x is None else x for x, a in zip(g, arr)]
        elif g is None:
            douts[i] = np.zeros_like(arr)


# (node.key, which inputs need a gradient) -> (kernel, result keys, argument plan, dout slots
# the kernel reads), or None when the op has no plain backward kernel (composed gradients)
_PLAIN: Dict[Any, Any] = {}


def _plain_grads(node: Node, douts: List[Any]) -> Optional[List[Any]]:
    """``_fast_grads`` for ``backward()`` (no create_graph, nothing blocked), with the
    per-node bookkeeping cached: None when the op needs the general path. Zeros are made only
    for the unreached outputs whose gradient the kernel reads."""
    need = tuple(False if v is None else
                 (any(not x._stop_gradient for x in v) if v.__class__ is list
                  else not v._stop_gradient) for v in node.in_vars)
    key = (node.key, need)
    entry = _PLAIN.get(key, _MISSING)
    if entry is _MISSING:
        opdef = node.opdef
        entry = None
        if opdef.has_backward() and not opdef.has_make_grad():
            _fast_grads(node, None, list(need), bind_only=True)
            fn, keys, plan = _GRAD_BINDINGS[(node.key, need)]
            entry = (fn, keys, plan, tuple(sorted({i for k, i in plan if k == 2})),
                     opdef)
        if len(_PLAIN) > 8192:
            _PLAIN.clear()
        _PLAIN[key] = entry
    if entry is None or entry[4] is not node.opdef:
        return None
    fn, keys, plan, used, _ = entry
    for i in used:
        g = douts[i]
        if g is None:
            douts[i] = np.zeros_like(node.out_arrays[i])
        elif g.__class__ is list and any(x is None for x in g):
            douts[i] = [np.zeros_like(a) if x is None else x
                        for x, a in zip(g, node.out_arrays[i])]
    srcs = (node.in_arrays, node.out_arrays, douts)
    res = fn(*[srcs[k][i] for k, i in plan])
    return [None if k is None else res.get(k) for k in keys]


_MISSING = object()


def _add(a: Any, b: Any) -> Any:
    if a is None:
        return b
    return a + b          # arrays, or tensors (create_graph: a recorded elementwise_add)


def _discover(roots: Sequence[VarBase], root_grads: Sequence[Any]
              ) -> Tuple[Dict[int, Any], Dict[int, VarBase], List[Node]]:
    """The pass's start: ``({id(root): its gradient}, {id(leaf root): root}, the nodes reached
    from the roots in reverse creation order)``; raises when a reached node was released."""
    grads: Dict[int, Any] = {}
    leaves: Dict[int, VarBase] = {}
    nodes: Dict[int, Node] = {}         # seq -> node (seqs are unique and creation-ordered)
    stack = []
    for r, g in zip(roots, root_grads):
        grads[id(r)] = _add(grads.get(id(r)), g)
        if r._node is None:
            leaves[id(r)] = r
        else:
            stack.append(r._node)
    push = stack.append
    while stack:
        n = stack.pop()
        if n.seq in nodes:
            continue
        if n.released:
            raise RuntimeError(_RELEASED)
        nodes[n.seq] = n
        for v in n.in_vars:
            if v is None:
                continue
            if v.__class__ is list:
                for x in v:
                    if x is not None and x._node is not None and x._node.seq not in nodes:
                        push(x._node)
            else:
                x = v._node
                if x is not None and x.seq not in nodes:
                    push(x)
    return grads, leaves, [nodes[k] for k in sorted(nodes, reverse=True)]


def _engine(roots: Sequence[VarBase], root_grads: Sequence[Any], retain_graph: bool,
            create_graph: bool, capture: Optional[Sequence[VarBase]] = None,
            blocked: Sequence[VarBase] = ()) -> Dict[int, Any]:
    """Propagate; returns {id(tensor): gradient} for the leaves reached (and for ``capture``)."""
    if capture is None and not create_graph and not blocked:
        grads, leaves = _engine_plain(roots, root_grads, retain_graph)
        res = {k: grads[k] for k in leaves if k in grads}
        res["_leaves"] = leaves  # type: ignore[index]
        return res
    blocked_ids = {id(v) for v in blocked}
    keep = {id(v) for v in capture} if capture is not None else set()
    grads, leaves, order = _discover(roots, root_grads)
    # backward() (not grad()) leaves each reached intermediate tensor its gradient of this pass
    store = capture is None and not create_graph
    plain = not create_graph and not blocked_ids
    shared = _shared_weights(order) if plain else None
    stacked: Dict[int, Tuple[VarBase, List[Any], List[Any]]] = {}
    for n in order:
        douts: List[Any] = []
        reached = False
        for refs in n.out_refs:
            if refs is None:
                douts.append(None)
                continue
            if refs.__class__ is list:
                gl: List[Any] = []
                for ref in refs:
                    v = ref()
                    g = None
                    if v is not None:
                        k = id(v)
                        g = grads.get(k) if k in keep else grads.pop(k, None)
                    if g is not None:
                        reached = True
                        if store:
                            v._grad = g
                    gl.append(g)
                douts.append(gl)
            else:
                v = refs()
                g = None
                if v is not None:
                    k = id(v)
                    g = grads.get(k) if k in keep else grads.pop(k, None)
                if g is not None:
                    reached = True
                    if store:                   # fluid 1.8: non-leaf gradient() too
                        v._grad = g
                douts.append(g)
        if not reached:
            continue
        _check_versions(n)
        in_grads = None
        if plain and n.__class__ is Node:
            prof = _profiler._active
            t0 = time.perf_counter() if prof is not None else 0.0
            xy = shared.get(id(n)) if shared else None
            if xy is not None:              # the weight's part is stacked at the end
                in_grads = _fast_grads(n, douts, _defer_weight(n, xy, douts[0], stacked))
            else:
                in_grads = _plain_grads(n, douts)
            if prof is not None and in_grads is not None:   # (otherwise traced ops below)
                prof.add_op(n.opdef.type + "_grad", time.perf_counter() - t0)
        if in_grads is None:
            _fill_zeros(n, douts)
            in_grads = _node_grads(n, douts, create_graph, blocked_ids)
        _accumulate(n, in_grads, grads, leaves, blocked_ids, create_graph)
    _add_stacked(stacked, grads, leaves)
    if not retain_graph:
        for n in order:
            n.release()
    out = {k: grads[k] for k in leaves if k in grads}
    for k in keep:
        if k in grads:
            out[k] = grads[k]
    out["_leaves"] = leaves  # type: ignore[index]
    return out


# -- backward(): the plain engine ------------------------------------------------------------
# ``backward()`` (no create_graph, no capture, nothing blocked) runs each reached node through
# a *step*: a function generated once per (node.key, its inputs' stop_gradient flags) that
# fills the zeros its kernel reads, calls the op's bound ``<type>_grad`` kernel on the node's
# arrays and accumulates the wanted input gradients -- the work ``_plain_grads`` and the
# accumulation loop of ``_engine`` do per node, with every slot decision taken at generation
# time. Same kernels, same arguments, same accumulation order: bit-identical results.

_sg = operator.attrgetter("_stop_gradient")
# (node.key, stop flags) -> (opdef, step); the opdef guards against a re-registered op
_STEPS: Dict[Any, Any] = {}


def _stop_flags(in_vars: List[Any]) -> Any:
    """Per input slot: None (absent), its tensor's stop_gradient, or the tuple of them."""
    return tuple(None if v is None else tuple(map(_sg, v)) if v.__class__ is list
                 else v._stop_gradient for v in in_vars)


def _accumulate(n: Node, in_grads: List[Any], grads: Dict[int, Any],
                leaves: Dict[int, VarBase], blocked: Any = (), create_graph: bool = False
                ) -> None:
    """Add the per-slot ``in_grads`` of ``n`` into ``grads`` (skipping ``blocked`` tensor ids;
    with ``create_graph`` tensor gradients stay tensors) and record the leaves reached."""
    for v, g in zip(n.in_vars, in_grads):
        if v is None or g is None:
            continue
        if v.__class__ is list:
            pairs: Any = zip(v, g)
        else:
            if v._stop_gradient:
                continue
            pairs = ((v, g),)
        for x, gx in pairs:
            if gx is None or x._stop_gradient:
                continue
            k = id(x)
            if k in blocked:
                continue
            if not create_graph and isinstance(gx, VarBase):
                gx = gx._array()
            old = grads.get(k)
            grads[k] = gx if old is None else old + gx
            if x._node is None:
                leaves[k] = x


def _collect(n: Node, pop: Any) -> Optional[List[Any]]:
    """The output gradients of ``n`` (per output slot; taken out of the pass's gradients and
    left as the tensors' ``gradient()``), or None when no output was reached."""
    douts: List[Any] = []
    reached = False
    for refs in n.out_refs:
        if refs is None:
            douts.append(None)
        elif refs.__class__ is list:
            gl: List[Any] = []
            for ref in refs:
                v = ref()
                g = None if v is None else pop(id(v), None)
                if g is not None:
                    reached = True
                    v._grad = g             # fluid 1.8: non-leaf gradient() too
                gl.append(g)
            douts.append(gl)
        else:
            v = refs()
            g = None if v is None else pop(id(v), None)
            if g is not None:
                reached = True
                v._grad = g
            douts.append(g)
    return douts if reached else None


def _check_versions(n: Node) -> None:
    for p, version in n.versions:
        if p._version != version:
            raise RuntimeError(
                f"one of the tensors needed for gradient computation, parameter "
                f"'{p.name}', has been modified by an inplace operation (the optimizer "
                f"updated it after this graph was built): call backward() before "
                f"minimize(), or rebuild the graph")


def _composed_step(n: Node, grads: Dict[int, Any], leaves: Dict[int, VarBase],
                   pop: Any) -> None:
    douts = _collect(n, pop)
    if douts is None:
        return
    _check_versions(n)
    _composed_rest(n, douts, grads, leaves)


def _composed_rest(n: Node, douts: List[Any], grads: Dict[int, Any],
                   leaves: Dict[int, VarBase]) -> None:
    need = [False if v is None else
            (any(not x._stop_gradient for x in v) if v.__class__ is list
             else not v._stop_gradient) for v in n.in_vars]
    _accumulate(n, _composed_arrays(n, douts, need, _NOTHING, fill=True), grads, leaves)


def _declarative_step(n: Node, grads: Dict[int, Any], leaves: Dict[int, VarBase],
                      pop: Any) -> None:
    douts = _collect(n, pop)
    if douts is None:
        return
    _check_versions(n)
    _fill_zeros(n, douts)
    _accumulate(n, _node_grads(n, douts, False, set()), grads, leaves)


_NOTHING: frozenset = frozenset()

_ACC = """\
    old = grads.get(k)
    grads[k] = g if old is None else old + g
    if x._node is None:
        leaves[k] = x
"""


def _make_step(n: Node, stops: Any) -> Any:
    """The step of ``n`` (see above): a generated function for ops with a plain backward
    kernel or a grad maker of one kernel call, else ``_composed_step`` (the grad maker's
    ops, run as kernels)."""
    opdef = n.opdef
    need = tuple(False if s is None else (not all(s) if s.__class__ is tuple else not s)
                 for s in stops)
    plain = opdef.has_backward() and not opdef.has_make_grad()
    sig = None
    if plain:
        _fast_grads(n, None, list(need), bind_only=True)
        fn, keys, plan = _GRAD_BINDINGS[(n.key, need)]
        reads = {i for k, i in plan if k == 2}
    else:
        one = _one_kernel_plan(n, stops, need)
        if one is None:
            return _composed_step
        fn, sig, args, reads, result_exprs = one
    src = [f"# backward step of {opdef.type}",     # (names it in tracebacks and profiles)
           "def step(n, grads, leaves, pop):", "    r = n.out_refs"]
    lists = _step_collect_src(n, src)
    for i in sorted(reads):
        if i in lists:
            src += [f"    if any(x is None for x in d{i}):",
                    f"        d{i} = [zeros_like(a) if x is None else x "
                    f"for x, a in zip(d{i}, oa[{i}])]"]
        else:
            src += [f"    if d{i} is None:", f"        d{i} = zeros_like(oa[{i}])"]
    if plain:
        args = ", ".join(f"ia[{i}]" if k == 0 else f"oa[{i}]" if k == 1 else f"d{i}"
                         for k, i in plan)
        src.append(f"    res = fn({args})")
        result_exprs = [(i, None, f"res.get({k!r})") for i, k in enumerate(keys)
                        if k is not None]
    else:
        _step_one_kernel_src(n, sig, args, src)
    _step_accumulate_src(n, result_exprs, src)
    # the source depends on the op's slots and plan only, not on shapes: compiled once per
    # op type and shape of plan, so a graph whose shapes change every step compiles nothing
    text = "\n".join(src) + "\n"
    code = _STEP_CODE.get(text)
    if code is None:
        if len(_STEP_CODE) > 1024:
            _STEP_CODE.clear()
        code = _STEP_CODE[text] = compile(text, f"<backward step of {opdef.type}>", "exec")
    ns: Dict[str, Any] = {"fn": fn, "zeros_like": np.zeros_like,
                          "check_versions": _check_versions, "composed_rest": _composed_rest,
                          "SIG": sig}
    exec(code, ns)
    return ns["step"]


def _step_collect_src(n: Node, src: List[str]) -> List[int]:
    """A step's lines collecting the output gradients ``d<i>`` (as ``_collect``: slot
    presence is part of ``node.key``), returning early when none was reached; then the node's
    arrays. Returns the output slots that are lists."""
    lists = [i for i, refs in enumerate(n.out_refs) if refs.__class__ is list]
    outs = [i for i, refs in enumerate(n.out_refs) if refs is not None and i not in lists]
    for i in outs:
        src += [f"    v = r[{i}]()", f"    d{i} = None if v is None else pop(id(v), None)",
                f"    if d{i} is not None:", f"        v._grad = d{i}"]
    if lists:
        src.append("    reached = " + " or ".join(
            [f"d{i} is not None" for i in outs] + ["False"]))
        for i in lists:
            src += [f"    d{i} = []",
                    f"    for ref in r[{i}]:", "        v = ref()",
                    "        g = None if v is None else pop(id(v), None)",
                    "        if g is not None:", "            reached = True",
                    "            v._grad = g", f"        d{i}.append(g)"]
        src += ["    if not reached:", "        return"]
    else:
        src += ["    if " + (" and ".join(f"d{i} is None" for i in outs) or "True") + ":",
                "        return"]
    src += ["    if n.versions:", "        check_versions(n)",
            "    ia = n.in_arrays", "    oa = n.out_arrays", "    iv = n.in_vars"]
    return lists


def _step_one_kernel_src(n: Node, sig: Any, args: List[str], src: List[str]) -> None:
    """A step's lines calling a grad maker's one kernel. It was bound for the signature of
    the arrays seen when this step was made; other shapes or dtypes (data-dependent outputs,
    a user's grad_tensors) take the general path, which looks the kernel up per signature."""
    for j, arg in enumerate(args):
        src.append(f"    a{j} = {arg}")
    src.append("    if (" + "".join(
        "None, " if s is None else
        f"tuple((x.shape, x.dtype.char) for x in a{j}), " if s and isinstance(s[0], tuple)
        and isinstance(s[0][0], tuple) else f"(a{j}.shape, a{j}.dtype.char), "
        for j, s in enumerate(sig)) + ") != SIG:")
    src += ["        return composed_rest(n, [" + ", ".join(
        "None" if refs is None else f"d{i}" for i, refs in enumerate(n.out_refs))
        + "], grads, leaves)"]
    src.append("    res = fn(" + ", ".join(f"a{j}" for j in range(len(args))) + ")")


def _step_accumulate_src(n: Node, result_exprs: List[Any], src: List[str]) -> None:
    """A step's lines adding each input gradient (``(input slot, element or None,
    expression)``) into ``grads`` (``_ACC``), noting the leaves reached."""
    for i, j, expr in result_exprs:
        src.append(f"    g = {expr}")
        if j is None and n.in_vars[i].__class__ is list:
            src += ["    if g is not None:",
                    f"        for x, g in zip(iv[{i}], g):",
                    "            if g is None or x._stop_gradient:", "                continue",
                    "            k = id(x)"]
            src += ["        " + line for line in _ACC.splitlines()]
        elif j is None:
            src += ["    if g is not None:", f"        x = iv[{i}]", "        k = id(x)"]
            src += ["    " + line for line in _ACC.splitlines()]
        else:                           # element j of list slot i (composed results)
            src += ["    if g is not None:", f"        x = iv[{i}][{j}]",
                    "        if not x._stop_gradient:", "            k = id(x)"]
            src += ["        " + line for line in _ACC.splitlines()]


def _one_kernel_plan(n: Node, stops: Any, need: Any) -> Any:
    """For a grad maker that emits one op reading only the node's inputs, outputs and output
    gradients, and whose results are the input gradients: (bound kernel, the argument
    signature it was bound for, argument expressions, output slots read, result expressions
    per input gradient) for ``_make_step``; None otherwise (``_composed_step`` runs it)."""
    flags = tuple(None if s is None else
                  tuple(not x and need[i] for x in s) if s.__class__ is tuple
                  else (not s and need[i]) for i, s in enumerate(stops))
    key = (n.key, flags)
    plan = _DESCS.get(key)
    if plan is None:
        plan = _DESCS[key] = _make_plan(n, None, list(need), _NOTHING)
        if len(_DESCS) > 4096:
            _DESCS.clear()
    x_names, o_names, steps, results, reads = plan
    if len(steps) != 1:
        return None
    op_type, attrs, out_slots, in_spec, out_spec, _ = steps[0]
    ddef = registry.get_op_def(op_type)
    if any(s.duplicable for s in ddef.out_slots) or any(len(ns) != 1 for _, ns in out_spec):
        return None
    exprs: Dict[str, str] = {}
    arrays: Dict[str, Any] = {}       # name -> an array of its shape and dtype (for binding)
    for si, ns in enumerate(x_names):
        for j, name in enumerate(ns or ()):
            lst = n.in_arrays[si].__class__ is list
            exprs[name] = f"ia[{si}][{j}]" if lst else f"ia[{si}]"
            arrays[name] = n.in_arrays[si][j] if lst else n.in_arrays[si]
    for si, (ns, gns) in enumerate(o_names):
        for j, (name, gname) in enumerate(zip(ns or (), gns or ())):
            lst = n.out_arrays[si].__class__ is list
            arr = n.out_arrays[si][j] if lst else n.out_arrays[si]
            exprs[name] = f"oa[{si}][{j}]" if lst else f"oa[{si}]"
            arrays[name] = arr
            if si in reads:
                exprs[gname] = f"d{si}[{j}]" if lst else f"d{si}"
                arrays[gname] = arr
    args, specimen = [], []
    for ns, dup in in_spec:
        if ns is None:
            args.append("None")
            specimen.append(None)
            continue
        if any(name not in exprs for name in ns):
            return None
        if dup:
            args.append("[" + ", ".join(exprs[name] for name in ns) + "]")
            specimen.append([arrays[name] for name in ns])
        else:
            args.append(exprs[ns[0]])
            specimen.append(arrays[ns[0]])
    sig = tuple(None if a is None else
                tuple((x.shape, x.dtype.char) for x in a) if a.__class__ is list else
                (a.shape, a.dtype.char) for a in specimen)
    fn, single, result_keys = kernel_entry(op_type, attrs, specimen, out_slots)
    produced: Dict[str, str] = {}
    for slot, ns in out_spec:
        if ns[0] == "\0":
            continue
        if single:
            produced[ns[0]] = "res"
        elif len(out_slots) == 1:
            produced[ns[0]] = f"res[{result_keys.get(out_slots[0], out_slots[0])!r}]"
        else:
            produced[ns[0]] = f"res.get({result_keys.get(slot, slot)!r})"
    result_exprs = []
    for si, spec in enumerate(results):
        if spec is None:
            continue
        gnames, is_list = spec
        for j, name in enumerate(gnames):
            if name is None:
                continue
            if name not in produced:
                if name in exprs or name in arrays:
                    return None         # a gradient passed through: the general path
                continue
            result_exprs.append((si, j if is_list else None, produced[name]))
    return fn, sig, args, reads, result_exprs


_STEP_CODE: Dict[str, Any] = {}


_RELEASED = ("Trying to backward through the graph a second time, but its saved tensors "
             "have already been freed: the first backward()/grad() released it. Pass "
             "retain_graph=True to the first call if you need to backward twice.")


def _engine_plain(roots: Sequence[VarBase], root_grads: Sequence[Any],
                  retain_graph: bool) -> Any:
    """``_engine`` for ``backward()``: no create_graph, no capture, nothing blocked; every
    reached intermediate tensor keeps its gradient of this pass. Returns ({id(tensor):
    gradient}, {id(leaf): leaf}) -- the leaves' gradients are read from the first."""
    grads, leaves, order = _discover(roots, root_grads)
    pop = grads.pop
    steps = _STEPS
    shared = _shared_weights(order)
    stacked: Dict[int, Tuple[VarBase, List[Any], List[Any]]] = {}   # see _shared_weights
    # Without retain_graph each node is released as soon as its step has run, so the saved
    # activations go as the pass walks back (as the static plan frees them after their last
    # gradient op), not all at its end. A released consumer no longer keeps its inputs alive,
    # but the pass finds an input's gradient through that tensor (``out_refs`` are weak):
    # ``held`` keeps the intermediate tensors that have a pending gradient until their
    # producer has taken it.
    held: Dict[int, VarBase] = {}
    for n in order:
        if n.__class__ is not Node:     # a @declarative call: its static backward
            _declarative_step(n, grads, leaves, pop)
        else:
            try:
                stops = tuple(map(_sg, n.in_vars))  # the common case: one tensor per slot
            except AttributeError:
                stops = _stop_flags(n.in_vars)
            xy = shared.get(id(n)) if shared else None
            if xy is not None:              # the weight's part is stacked at the end
                v = n.out_refs[0]()
                _defer_weight(n, xy, grads.get(id(v)) if v is not None else None, stacked)
                stops = stops[:xy[1]] + (True,) + stops[xy[1] + 1:]     # (a dX-alone step)
            entry = steps.get((n.key, stops))
            if entry is None or entry[0] is not n.opdef:
                if len(steps) > 8192:
                    steps.clear()
                entry = steps[(n.key, stops)] = (n.opdef, _make_step(n, stops))
            prof = _profiler._active
            if prof is None:
                entry[1](n, grads, leaves, pop)
            else:
                t0 = time.perf_counter()
                entry[1](n, grads, leaves, pop)
                prof.add_op(n.opdef.type + "_grad", time.perf_counter() - t0)
        if not retain_graph:
            _release_walked(n, grads, held)
    _add_stacked(stacked, grads, leaves)
    return grads, leaves


# -- a weight shared by several products: its gradient as one GEMM -----------------------------
# A weight W used in T plain products (an unrolled recurrent layer) has the gradient
# sum_t X_t^T dOut_t. backward() computes it as the static plan does
# (executor/fusion/patterns/stacked_grad.py): the products' grad steps compute dX alone and
# keep X_t and dOut_t; after the pass, one GEMM over the stacked rows, in the pass's order. So
# a replayed step (dygraph/replay.py), whose static plan stacks them, gives these bits.
_STACKED = StackedWeightGrad()


def _plain_product(n: Any) -> Optional[Tuple[int, int]]:
    """The X and Y slots' indices when ``n`` is a plain X @ Y of 2-D operands of one float
    dtype (``PLAIN_PRODUCTS``' attrs), else None."""
    if n.__class__ is not Node:
        return None
    want = _PLAIN_FORWARD.get(n.opdef.type)
    if want is None or any(n.attrs.get(k, v) != v for k, v in want.items()):
        return None
    names_ = [sl.name for sl in n.opdef.in_slots]
    ix, iy = names_.index("X"), names_.index("Y")
    x, w, out = n.in_arrays[ix], n.in_arrays[iy], n.out_arrays[0]
    if not all(a.__class__ is np.ndarray and a.ndim == 2 for a in (x, w, out)):
        return None
    dt = x.dtype
    if dt not in _STACK_DTYPES or w.dtype != dt or out.dtype != dt:
        return None
    return ix, iy


# the forward op types of PLAIN_PRODUCTS' grad ops (mul, matmul), with their attrs
_PLAIN_FORWARD = {t[:-len("_grad")]: attrs for t, attrs in PLAIN_PRODUCTS.items()}
_STACK_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _shared_weights(order: Sequence[Any]) -> Dict[int, Tuple[int, int]]:
    """{id(node): its X and Y slots} for the nodes whose weight gradient is stacked: the plain
    products of a leaf that two or more of them use as Y and nothing else in the pass reads."""
    uses: Dict[int, List[Any]] = {}        # id(leaf) -> [(node, slots)], None: another use
    for n in order:
        xy = _plain_product(n)
        iy = xy[1] if xy is not None else -1
        for i, v in enumerate(n.in_vars or ()):
            for x in (v if v.__class__ is list else (v,)):
                if x is None or x._node is not None or x._stop_gradient:
                    continue
                k = id(x)
                if i == iy and uses.get(k, ()) is not None:
                    uses.setdefault(k, []).append((n, xy))
                else:
                    uses[k] = None         # type: ignore[assignment]
    return {id(n): xy for got in uses.values() if got is not None and len(got) >= 2
            for n, xy in got}


def _defer_weight(n: Node, xy: Tuple[int, int], dout: Any,
                  stacked: Dict[int, Tuple[VarBase, List[Any], List[Any]]]) -> List[bool]:
    """Keep X and the output gradient ``dout`` of ``n`` for its weight's stacked gradient
    (nothing when the output got none); returns the ``need`` flags of its dX alone."""
    ix, iy = xy
    if dout is not None:
        w = n.in_vars[iy]
        got = stacked.get(id(w))
        if got is None:
            got = stacked[id(w)] = (w, [], [])
        got[1].append(n.in_arrays[ix])
        got[2].append(dout)
    return [i != iy and v is not None and not v._stop_gradient
            for i, v in enumerate(n.in_vars)]


def _add_stacked(stacked: Dict[int, Tuple[VarBase, List[Any], List[Any]]],
                 grads: Dict[int, Any], leaves: Dict[int, VarBase]) -> None:
    """The deferred weights' gradients, one stacked GEMM each (``_shared_weights``)."""
    for k, (w, xs, ds) in stacked.items():
        grads[k] = _STACKED.forward(xs, ds)["Out"]
        leaves[k] = w


def _release_walked(n: Node, grads: Dict[int, Any], held: Dict[int, VarBase]) -> None:
    """``n``'s step has run: its outputs' gradients are taken (``held`` lets them go), its
    inputs' pending gradients keep their tensors in ``held``, and ``n`` is released."""
    for refs in n.out_refs or ():
        if refs is None:
            continue
        for ref in (refs if refs.__class__ is list else (refs,)):
            v = ref()
            if v is not None:
                held.pop(id(v), None)
    for v in n.in_vars or ():
        if v is None:
            continue
        for x in (v if v.__class__ is list else (v,)):
            if x is not None and x._node is not None and id(x) in grads:
                held[id(x)] = x
    n.release()


def _root_grads(roots: Sequence[VarBase], grad_tensors: Optional[Sequence[Any]],
                create_graph: bool) -> List[Any]:
    out = []
    for i, r in enumerate(roots):
        if not isinstance(r, VarBase):
            raise TypeError(f"backward: expected dygraph tensors, but received "
                            f"{type(r).__name__}")
        g = grad_tensors[i] if grad_tensors is not None and i < len(grad_tensors) else None
        if g is None:
            # fluid 1.8 (imperative BasicEngine::Init, PartialGradEngine) starts from ones of
            # the output's shape whatever its size: y.backward() on a non-scalar y is the
            # gradient of sum(y)
            g = np.ones_like(r._array())
        else:
            g = _to_array(g) if not create_graph else g
            if tuple(np.shape(_to_array(g))) != tuple(r._array().shape):
                raise ValueError(f"backward: the gradient given for '{r.name}' has shape "
                                 f"{list(np.shape(_to_array(g)))}, the tensor "
                                 f"{list(r._array().shape)}")
        if create_graph and not isinstance(g, VarBase):
            g = VarBase(np.asarray(g))
        out.append(g)
    return out


def run_backward(tensors: Sequence[VarBase], grad_tensors: Optional[Sequence[Any]] = None,
                 retain_graph: bool = False) -> None:
    """Accumulate the gradients of ``tensors`` into every reachable leaf's ``gradient()``."""
    tensors = _as_list(tensors)
    for t in tensors:
        if isinstance(t, VarBase) and t._stop_gradient and t._node is None:
            raise RuntimeError(f"backward: tensor '{t.name}' has stop_gradient=True and no "
                               f"history: nothing to differentiate (set stop_gradient=False on "
                               f"the inputs that need gradients)")
    roots = _root_grads(tensors, None if grad_tensors is None else _as_list(grad_tensors), False)
    res, leaves = _engine_plain(tensors, roots, retain_graph)
    for k, x in leaves.items():
        g = res.get(k)
        if g is None or x._stop_gradient:
            continue
        if x._grad is None:
            # gradients are fresh kernel results, never mutated in place: no copy needed
            dt = x._array().dtype
            x._grad = g if getattr(g, "dtype", None) == dt else np.asarray(g, dtype=dt)
        else:
            x._grad = x._grad + g


install_backward(run_backward)          # VarBase.backward runs it (tensor.py)


def backward(tensors: Any, grad_tensors: Any = None, retain_graph: bool = False) -> None:
    """``fluidlite.autograd.backward``: ``tensors[i].backward`` with ``grad_tensors[i]`` for all
    of them in one pass (gradients accumulate into the leaves).

    Args:
        tensors (VarBase | list): the tensors to backpropagate from.
        grad_tensors (VarBase | list | None): their upstream gradients (default: ones).
        retain_graph (bool, default False): keep the graph for another backward.
    Returns:
        None: the gradients are accumulated into the leaves' ``gradient()``.
    Raises:
        TypeError: an item of ``tensors`` is not a dygraph tensor.
        RuntimeError: a tensor has ``stop_gradient=True`` and no history, a non-scalar tensor has
            no ``grad_tensors`` entry, or the graph was released by an earlier backward (pass
            ``retain_graph=True``).
        ValueError: a given gradient's shape differs from its tensor's.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> import fluidlite.autograd as autograd
        >>> with fluid.dygraph.guard():
        ...     x = fluid.dygraph.to_variable(np.array([1.0, 2.0], "float32"))
        ...     x.stop_gradient = False
        ...     a, b = fluid.layers.reduce_sum(x * 3), fluid.layers.reduce_sum(x * x)
        ...     autograd.backward([a, b])            # gradients of a and b accumulate into x
        ...     print(x.gradient())
        [5. 7.]
    """
    run_backward(_as_list(tensors), None if grad_tensors is None else _as_list(grad_tensors),
                 retain_graph)


def grad(outputs: Any, inputs: Any, grad_outputs: Any = None, retain_graph: Optional[bool] = None,
         create_graph: bool = False, only_inputs: bool = True, allow_unused: bool = False,
         no_grad_vars: Any = None) -> List[Optional[VarBase]]:
    """fluid 1.8's ``fluid.dygraph.grad``: the gradients of ``outputs`` w.r.t. ``inputs`` (a
    list of tensors, one per input), without touching any tensor's ``gradient()``.
    ``grad_outputs``: the outputs' gradients (None: ones, for scalars). ``create_graph``: the
    results are recorded (differentiable, for higher orders); ``retain_graph`` defaults to it.
    ``allow_unused=False`` raises for an input the outputs do not depend on (else None).

    Args:
        outputs (VarBase | list): the tensors to differentiate.
        inputs (VarBase | list): with respect to what.
        grad_outputs (VarBase | list | None): upstream gradients (default: ones).
        retain_graph (bool | None): keep the graph for another backward (default:
            ``create_graph``).
        create_graph (bool, default False): record the gradient computation (higher order).
        only_inputs (bool, default True): fluid's argument (only True is meaningful).
        allow_unused (bool, default False): return None for an input that does not influence
            the outputs instead of raising.
        no_grad_vars (VarBase | list | None): tensors treated as constants.
    Returns:
        list: one gradient (or None) per input.
    Raises:
        ValueError: ``only_inputs`` is False, or a ``grad_outputs`` entry's shape differs from
            its output's.
        TypeError: an input or output is not a dygraph tensor.
        RuntimeError: an input is not used to compute the outputs (without ``allow_unused``), a
            non-scalar output has no ``grad_outputs`` entry, or the graph was already released.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> with fluid.dygraph.guard():
        ...     x = fluid.dygraph.to_variable(np.array([1.0, 2.0], "float32"))
        ...     x.stop_gradient = False
        ...     y = fluid.layers.reduce_sum(x * x)
        ...     dx, = fluid.dygraph.grad(y, x)
        ...     print(dx.numpy())                    # d(sum x^2)/dx = 2x
        [2. 4.]
    """
    if not only_inputs:
        raise ValueError("grad: only_inputs=False is not supported by fluid 1.8 either "
                         "(only the inputs' gradients are computed)")
    outs = _as_list(outputs)
    ins = _as_list(inputs)
    for x in ins:
        if not isinstance(x, VarBase):
            raise TypeError(f"grad: inputs must be dygraph tensors, but received "
                            f"{type(x).__name__}")
    if retain_graph is None:
        retain_graph = create_graph
    gouts = None if grad_outputs is None else _as_list(grad_outputs)
    roots = _root_grads(outs, gouts, create_graph)
    blocked = [] if no_grad_vars is None else _as_list(no_grad_vars)
    res = _engine(outs, roots, retain_graph, create_graph, capture=ins, blocked=blocked)
    result = []
    for x in ins:
        g = res.get(id(x))
        if g is None:
            if not allow_unused:
                raise RuntimeError(f"grad: the input tensor '{x.name}' is not used to compute "
                                   f"the outputs (pass allow_unused=True to get None for it)")
            result.append(None)
            continue
        if isinstance(g, VarBase):
            result.append(g)
        else:
            result.append(VarBase(np.asarray(g), name=x.name + _GRAD, stop_gradient=True))
    return result
