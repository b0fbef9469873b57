"""The backward pass: insert gradient ops into the Program (fluid's ``append_backward``).

Ops inserted (all with ``op_role`` Backward; the loss seed with Backward|Loss):
* a seed: ``fill_constant`` writing ``loss@GRAD`` = 1.0 (shape [1]) for ``append_backward``;
  ``fill_any_like`` (ones shaped like the target) or ``assign`` (a given target gradient) for
  ``gradients``;
* each forward op's grad ops (its ``<type>_grad`` kernel or a composition of existing ops), in
  reverse order, only for ops on a path from a gradient-requiring variable to the targets;
* ``sum`` where a variable feeds several ops: its partial gradients are written to
  ``X@GRAD@RENAME@k`` and summed into ``X@GRAD`` right before the first reader;
* ``fill_zeros_like`` for a needed gradient that nothing produced (an unused output of a
  multi-output op, or a path through a non-differentiable op);
* with ``checkpoints``: copies of the forward ops between two checkpoints (outputs renamed
  ``<name>.subprog_<k>``), recomputed right before their grad ops.

The pass works in two phases so that a failure leaves the program untouched: every argument is
validated and every grad op desc is built (pure data) before the first op is appended.

Names. The gradient of ``x`` is ``x@GRAD``. When that name already exists in the block (a second
``append_backward`` / ``gradients`` call, or higher-order gradients where ``x@GRAD`` is a forward
value of this pass), the pass uses ``unique_name(x@GRAD)`` (``x@GRAD_0``, ...) for all of its own
references, so repeated passes never clash; grads of grads are ``x@GRAD@GRAD``.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple, Union

from .core import control_flow as _cf
from .core import names, rewrite
from .core.dtypes import FLOATS, VarType
from .core.ir import Block, OpArgs, OpRole, Operator, Program, Variable
from .core.registry import GradBuilder, OpDesc, get_op_def
from .ops import control_flow as _cf_ops

__all__ = ["append_backward", "gradients", "calc_gradient"]

_log = logging.getLogger("fluidlite")
_VarOrName = Union[Variable, str]
_API = "fluid.backward.append_backward"


# -- argument checks ---------------------------------------------------------------------------
def _type_error(arg: str, api: str, expected: str, value: Any) -> TypeError:
    return TypeError(f"The type of '{arg}' in {api} must be {expected}, but received "
                     f"{type(value)}. ")


def _no_grad_names(no_grad_set: Any) -> Set[str]:
    """fluid's ``_get_no_grad_set_name``: a set/list/tuple of Variables or names."""
    if no_grad_set is None:
        return set()
    if not isinstance(no_grad_set, (set, frozenset, list, tuple)):
        raise TypeError(f"The type of no_grad_set should be set or list or tuple, but received "
                        f"{type(no_grad_set)}")
    out = set()
    for x in no_grad_set:
        if isinstance(x, Variable):
            out.add(x.name)
        elif isinstance(x, str):
            out.add(x)
        else:
            raise TypeError(f"The type of no_grad_set's member must be paddle.fluid.Variable or "
                            f"str, but received {type(x)}.")
    return out


def _stop_gradient_names(program: Program) -> Set[str]:
    """Variables no gradient flows through: ``stop_gradient`` ones, and every variable whose
    dtype is not floating point (labels, indices, masks, counters have no derivative)."""
    return {v.name for v in program.list_vars()
            if v.stop_gradient or (v.dtype is not None and v.dtype not in FLOATS)}


def _pass_no_grad(program: Program, user: Set[str]) -> Set[str]:
    """Every name a pass must not differentiate: the user's, the non-differentiable ones and
    ``@EMPTY@``."""
    return user | _stop_gradient_names(program) | {names.EMPTY_VAR_NAME}


def _find_producer(var: Variable, what: str, api: str) -> Tuple[Block, int]:
    """(block, index) of the op that computes ``var`` (fluid's loss-op lookup, made strict)."""
    block = var.block
    program = block.program
    op = var.op
    if op is not None and op.block.program is not program:
        raise ValueError(f"{api}: {what} '{var.name}' is computed by an op of a different "
                         f"Program than the one the variable belongs to; build the {what} and "
                         f"call {api} inside the same fluid.program_guard")
    if op is not None:
        for i in range(len(block.ops) - 1, -1, -1):
            if block.ops[i] is op:
                return block, i
    # the op is gone (cloned program, removed op): take the last op writing the name
    for i in range(len(block.ops) - 1, -1, -1):
        if var.name in block.ops[i].output_arg_names:
            return block, i
    raise ValueError(f"{api}: {what} '{var.name}' is not computed by any op of its program "
                     f"(block {block.idx}); it must be the output of an op, e.g. "
                     f"loss = fluid.layers.mean(cost)")


def _check_same_program(v: Variable, program: Program, what: str, api: str) -> None:
    if v.block.program is not program:
        raise ValueError(f"{api}: {what} '{v.name}' belongs to a different Program than the "
                         f"loss/targets; every variable must come from one Program")


# -- naming ------------------------------------------------------------------------------------
class _GradNames:
    """Gradient names of one pass: ``fwd -> fwd@GRAD`` unless that name already exists in the
    block, then ``unique_name(fwd@GRAD)``. Remembers the forward var of every grad name."""

    def __init__(self, block: Block) -> None:
        self.block = block
        self.grad_of: Dict[str, str] = {}
        self.fwd_of: Dict[str, str] = {}      # grad name (and partial @RENAME@ names) -> fwd

    def _taken(self, name: str) -> bool:
        return name in self.fwd_of or self.block._find_var_recursive(name) is not None

    def _fresh(self, name: str) -> str:
        while self._taken(name):
            name = names.generate(name)
        return name

    def __call__(self, fwd: str) -> str:
        g = self.grad_of.get(fwd)
        if g is None:
            g = self._fresh(fwd + names.GRAD_SUFFIX)
            self.grad_of[fwd] = g
            self.fwd_of[g] = fwd
        return g

    def partial(self, grad: str, k: int) -> str:
        p = self._fresh(f"{grad}{names.RENAME_SUFFIX}{k}")
        self.fwd_of[p] = self.fwd_of[grad]
        return p


def _forward_var(block: Block, grad_name: str,
                 fwd_of: Optional[Dict[str, str]] = None) -> Optional[Variable]:
    """The forward variable of a gradient name: ``a@GRAD`` / ``a@GRAD@RENAME@1`` / ``a@GRAD_0``
    -> ``a``; ``a@GRAD@GRAD`` -> ``a@GRAD`` (the last ``@GRAD`` is the one this pass added)."""
    if fwd_of is not None and grad_name in fwd_of:
        return block._find_var_recursive(fwd_of[grad_name])
    pos = grad_name.rfind(names.GRAD_SUFFIX)
    return block._find_var_recursive(grad_name[:pos] if pos != -1 else grad_name)


# -- phase 1: what to differentiate ------------------------------------------------------------
def _op_path(ops: Sequence[Operator], sources: Optional[Set[str]], targets: Set[str],
             no_grad: Set[str], params: Iterable[str] = ()) -> Tuple[List[Operator], Set[str]]:
    """Ops on a path from a gradient-requiring variable (any non-no-grad leaf, or only
    ``sources``) to ``targets``; and the variables that carry a gradient along it. Parameters
    are leaves even when an op writes them in place (an optimizer update before the loss)."""
    needed = set(targets)
    kept: List[Tuple[Operator, bool]] = []
    for op in reversed(ops):
        if any(n in needed for n in op.output_arg_names):
            differentiable = not get_op_def(op.type).no_grad
            kept.append((op, differentiable))
            if differentiable:        # a no_grad op (argmax, cast to int, ...) stops the walk
                needed.update(n for n in op.input_arg_names if n not in no_grad)
    kept.reverse()
    tracked = set(sources - no_grad) if sources is not None else set()
    produced: Set[str] = set()
    if sources is None:
        for op, _ in kept:
            produced.update(op.output_arg_names)
        produced.difference_update(params)
    path = []
    for op, differentiable in kept:
        ins = [n for n in op.input_arg_names if n not in no_grad]
        # an op updating an output in place (write_to_array: one entry of an array) is on the
        # path when that output carries a gradient: its grad op clears the replaced entry
        for slot in getattr(get_op_def(op.type), "reads_outputs", ()):
            ins += [n for n in op.outputs.get(slot, []) if n in tracked]
        if sources is None:
            tracked.update(n for n in ins if n not in produced)
        if differentiable and any(n in tracked for n in ins):
            path.append(op)
            tracked.update(n for n in op.output_arg_names if n not in no_grad)
    return path, tracked


def _grad_descs(path: Sequence[Operator], tracked: Set[str], no_grad: Set[str],
                grad_name: _GradNames) -> List[OpDesc]:
    """The grad op descs of ``path`` in reverse order (fluid's GradOpMakers)."""
    descs: List[OpDesc] = []
    missing = []
    for op in reversed(path):
        opdef = get_op_def(op.type)
        if not opdef.differentiable:
            missing.append(op)
            continue
        # the builder only asks about this op's inputs: pass just those (copying the whole
        # no-grad set per op would make the pass O(ops x stop_gradient vars))
        skip = {n for n in op.input_arg_names if n in no_grad or n not in tracked}
        made = opdef.grad_op_descs(GradBuilder(op, skip, grad_name=grad_name))
        callstack = op.attrs.get("op_callstack")
        if callstack is not None:        # runtime errors in grad ops point at the forward op
            for d in made:
                d.attrs.setdefault("op_callstack", callstack)
        descs.extend(made)
    if missing:
        shown = ", ".join(sorted({f"'{op.type}'" for op in missing}))
        hint = (" (a gradient op: its forward op's class can define `double_grad` for higher "
                "order)" if any(op.type.endswith("_grad") for op in missing) else "")
        raise ValueError(f"cannot differentiate through op(s) {shown}: no gradient rule is "
                         f"registered{hint}. Mark the inputs that need no gradient with "
                         f"stop_gradient=True or pass them in no_grad_set to cut the path.")
    return descs


def _accumulate(descs: List[OpDesc], grad_name: _GradNames,
                is_array: Optional[Callable[[str], bool]] = None) -> List[OpDesc]:
    """Rename repeated writes of a gradient to ``@RENAME@k`` and insert ``sum`` ops right before
    the first reader (or at the end). A grad written after it was read starts a new
    accumulation (the forward variable was overwritten in place) -- except the gradient of a
    tensor array (``is_array``): an array is updated entry by entry, so a later write adds to
    the gradient read so far (``write_to_array``'s grad clears the one entry it replaced)."""
    is_grad = grad_name.fwd_of
    consumed: Set[str] = set()                   # array grads read since their last write
    parts: Dict[str, List[str]] = {}             # grad name -> partial names (pending)
    first: Dict[str, Tuple[List[str], int]] = {}  # grad name -> (arg list, index) of 1st writer
    counter: Dict[str, int] = {}
    out: List[OpDesc] = []

    def flush(name: str) -> None:
        ps = parts.pop(name)
        first.pop(name, None)
        if is_array is not None and is_array(name):
            consumed.add(name)
        if len(ps) > 1:
            out.append(OpDesc("sum", {"X": ps}, {"Out": [name]}, {"use_mkldnn": False}))

    def next_partial(name: str) -> str:
        k = counter.get(name, 0)
        counter[name] = k + 1
        return grad_name.partial(name, k)

    for desc in descs:
        ins = set()
        for arg_names in desc.inputs.values():
            for n in arg_names:
                ins.add(n)
                if n in parts:
                    flush(n)
        for arg_names in desc.outputs.values():
            for i, n in enumerate(arg_names):
                if n not in is_grad or n in ins:      # not a grad of this pass, or in-place
                    continue
                ps = parts.get(n)
                if ps is None and n in consumed:     # array: add to what is there
                    new = next_partial(n)
                    arg_names[i] = new
                    parts[n] = [n, new]
                    continue
                if ps is None:
                    parts[n] = [n]
                    first[n] = (arg_names, i)
                    continue
                if len(ps) == 1:                      # second writer: rename the first one
                    lst, j = first[n]
                    lst[j] = ps[0] = next_partial(n)
                new = next_partial(n)
                arg_names[i] = new
                ps.append(new)
        out.append(desc)
    for n in list(parts):
        flush(n)
    return [d for d in out if any(x != names.EMPTY_VAR_NAME for v in d.outputs.values()
                                  for x in v)]


# -- recompute (checkpoints) ---------------------------------------------------------------------
def _recompute_segments(path: Sequence[Operator], checkpoints: List[str]) -> List[List[int]]:
    """Index ranges (into ``path``) of the forward segments recomputed during backward: from the
    start to the only checkpoint, or between consecutive checkpoints (fluid's recompute)."""
    uses = rewrite.Uses(path)
    ends = sorted({uses.producer(c) for c in checkpoints if c in uses.producers})
    if not ends:
        return []
    if len(ends) == 1:
        return [[0, ends[0] + 1]] if ends[0] > 0 else []
    return [[a + 1, b + 1] for a, b in zip(ends, ends[1:]) if b > a + 1]


def _random(op: Operator) -> bool:
    """A random op that cannot be replayed: a ``dropout`` seeded by a ``Seed`` input (which
    RecomputeOptimizer adds, as fluid 1.8) draws the same mask again and can."""
    return get_op_def(op.type).uses_rng and not (op.type == "dropout" and op.input("Seed"))


def _grad_descs_with_recompute(block: Block, path: Sequence[Operator], tracked: Set[str],
                               no_grad: Set[str], grad_name: _GradNames,
                               checkpoints: List[str]) -> Tuple[List[OpDesc], Dict[str, str]]:
    """Grad descs where each segment's forward ops are re-emitted (renamed outputs) right
    before the segment's grad ops, which then read the recomputed values."""
    segments = _recompute_segments(path, checkpoints)
    in_segment = {}
    for k, (a, b) in enumerate(segments):
        for i in range(a, b):
            in_segment[i] = k
    # held in memory (never renamed): checkpoints, persistables, leaves, outputs of random ops
    # and values used outside their segment
    hold = set(checkpoints)
    seg_of_var: Dict[str, int] = {}
    for i, op in enumerate(path):
        k = in_segment.get(i, -1)
        if _random(op):
            hold.update(op.output_arg_names)
        for n in op.output_arg_names:
            seg_of_var[n] = k
    for i, op in enumerate(path):
        k = in_segment.get(i, -1)
        for n in op.input_arg_names:
            if seg_of_var.get(n, k) != k:
                hold.add(n)
    new_vars: Dict[str, str] = {}                 # recomputed name -> original name
    descs: List[OpDesc] = []
    seg_idx = 0              # fluid 1.8 numbers the segments from the last one: .subprog_0
    i = len(path) - 1
    while i >= 0:
        k = in_segment.get(i, -1)
        if k < 0:
            descs.extend(_grad_descs([path[i]], tracked, no_grad, grad_name))
            i -= 1
            continue
        a, b = segments[k]
        rename = {}
        for op in path[a:b]:
            for n in op.output_arg_names:
                var = block._find_var_recursive(n)
                if n not in hold and var is not None and not var.persistable:
                    rename[n] = f"{n}.subprog_{seg_idx}"
                    new_vars[rename[n]] = n
        for op in path[a:b]:
            if _random(op) or not any(n in rename for n in op.output_arg_names):
                continue       # random ops are never replayed; held outputs need no replay
            # the replayed copy takes the pass's role, not the forward op's
            attrs = {k: v for k, v in op.attrs.items() if k not in ("op_role", "op_role_var")}
            descs.append(OpDesc(op.type, _renamed(op.inputs, rename),
                                _renamed(op.outputs, rename), attrs))
        for d in _grad_descs(path[a:b], tracked, no_grad, grad_name):
            d.inputs = _renamed(d.inputs, rename)
            descs.append(d)
        seg_idx += 1
        i = a - 1
    return descs, new_vars


def _renamed(table: Dict[str, List[str]], rename: Dict[str, str]) -> Dict[str, List[str]]:
    return {k: [rename.get(n, n) for n in v] for k, v in table.items()}


# -- phase 2: append -----------------------------------------------------------------------------
class _Appender:
    """Appends descs to a block with the rewrite verbs (the caller holds the transaction and the
    Backward role context); tracks which gradients have been written."""

    def __init__(self, block: Block, grad_name: _GradNames) -> None:
        self.block = block
        self.grad_name = grad_name
        self.n_ops = len(block.ops)
        self.available: Set[str] = set()          # grads written so far by this pass

    def ensure_var(self, name: str, like: Optional[Variable] = None) -> Variable:
        if like is None and name not in self.block.vars:
            like = _forward_var(self.block, name, self.grad_name.fwd_of)
        var = rewrite.var_like(self.block, name, like)
        if like is not None and like.type == VarType.LOD_TENSOR_ARRAY and \
                var.type != VarType.LOD_TENSOR_ARRAY:
            var.type = VarType.LOD_TENSOR_ARRAY     # the gradient of an array is an array
        return var

    def append(self, desc: OpDesc) -> List[Operator]:
        """Append ``desc`` (preceded by ``fill_zeros_like`` for each gradient it reads that
        nothing wrote; skipped when it reads no written gradient at all); returns the appended
        ops."""
        block, fwd_of = self.block, self.grad_name.fwd_of
        incoming = [n for ns in desc.inputs.values() for n in ns if n in fwd_of]
        if incoming and not any(n in self.available for n in incoming) and all(
                n in fwd_of or n == names.EMPTY_VAR_NAME
                for ns in desc.outputs.values() for n in ns):
            # every gradient it reads is zero, so are the gradients it writes: prune it (fluid's
            # step 9); its readers see them as absent in turn. (Ops writing temporaries of a
            # composition are kept: the composition's next op reads those.)
            return []
        if desc.type == "sum":    # an absent partial gradient is a zero term: leave it out
            terms = desc.inputs.get("X", [])
            kept = [n for n in terms if n not in fwd_of or n in self.available]
            if kept and len(kept) < len(terms):
                desc = OpDesc(desc.type, dict(desc.inputs, X=kept), desc.outputs, desc.attrs)
        if desc.type == "sum" and _is_array(block, desc.outputs["Out"][0], fwd_of):
            desc = OpDesc("sum_tensor_array", desc.inputs, desc.outputs, {})
        ops = []
        for arg_names in desc.inputs.values():
            for n in arg_names:
                if n in fwd_of and n not in self.available:
                    fwd = _forward_var(block, n, fwd_of)
                    self.ensure_var(n, fwd)
                    if fwd.type == VarType.LOD_TENSOR_ARRAY:   # an all-zero array gradient
                        ops.append(rewrite.append(block, "sum_tensor_array", {"X": []},
                                                  {"Out": n}))
                    else:
                        ops.append(rewrite.append(block, "fill_zeros_like", {"X": fwd.name},
                                                  {"Out": n}))
                    self.available.add(n)
        for arg_names in desc.outputs.values():
            for n in arg_names:
                if n in fwd_of:
                    self.ensure_var(n)
        loop = desc.attrs.get(_SNAPSHOT)
        if loop is not None:                # restore a loop counter (_control_flow_grad)
            desc = OpDesc(desc.type, desc.inputs, desc.outputs,
                          {k: v for k, v in desc.attrs.items() if k != _SNAPSHOT})
            counter, copy = desc.outputs["Out"][0], desc.inputs["X"][0]
            if not block.has_var(copy):
                like = block._find_var_recursive(counter)
                block.create_var(name=copy, shape=like.shape, dtype=like.dtype,
                                 stop_gradient=True)
                with rewrite.role(block.program, OpRole.Forward):
                    block._insert_op(block.ops.index(loop), "assign", {"X": [counter]},
                                     {"Out": [copy]})
        pending = desc.attrs.get("sub_block")
        if isinstance(pending, _PendingGradBlock):
            desc = OpDesc(desc.type, desc.inputs, desc.outputs,
                          dict(desc.attrs, sub_block=pending.build(block, self.grad_name)))
        op = rewrite.append(block, desc.type, desc.inputs, desc.outputs, desc.attrs)
        self.available.update(op.output_arg_names)
        ops.append(op)
        return ops


def _run_pass(block: Block, seeds: Sequence[OpDesc], seed_role: int, body: Sequence[OpDesc],
              grad_name: _GradNames, recomputed: Optional[Dict[str, str]] = None,
              callbacks: Sequence[Callable[..., Any]] = (),
              before: Optional[Callable[[], None]] = None,
              after: Optional[Callable[[_Appender], Any]] = None) -> Any:
    """Phase 2, shared by ``append_backward`` and ``gradients``: inside one transaction (any
    failure leaves the program exactly as before), run ``before``, append the seeds (role
    ``seed_role``) and the accumulated body (role Backward; ``callbacks`` after each body op),
    and return ``after(appender)``."""
    program = block.program
    descs = _accumulate(list(seeds) + list(body), grad_name,
                        lambda n: _is_array(block, n, grad_name.fwd_of))
    seed_ids = {id(d) for d in seeds}
    app = _Appender(block, grad_name)
    context: Dict[str, Any] = {g: f for f, g in grad_name.grad_of.items()}
    with rewrite.transaction(program):
        if before is not None:
            before()
        for new, orig in (recomputed or {}).items():
            app.ensure_var(new, block._find_var_recursive(orig))
        for desc in descs:
            role = seed_role if id(desc) in seed_ids else OpRole.Backward
            with rewrite.role(program, role):
                appended = app.append(desc)
                if _cbs_apply(callbacks, desc, seed_ids):
                    for op in appended:
                        context["__current_op_desc__"] = op
                        for cb in callbacks:
                            cb(block=block, context=context)
        result = after(app) if after is not None else None
        program._appending_grad_times += 1
    return result


def _cbs_apply(callbacks: Sequence[Any], desc: OpDesc, seed_ids: Set[int]) -> bool:
    return bool(callbacks) and id(desc) not in seed_ids


def _annotate_role_var(block: Block, start: int,
                       params_grads: Sequence[Tuple[Variable, Variable]]) -> None:
    """The last op writing each param's grad gets ``op_role_var = [p, g] + existing``."""
    wanted = {g.name for _, g in params_grads}
    last: Dict[str, Operator] = {}
    for op in reversed(block.ops[start:]):
        for n in op.output_arg_names:
            if n in wanted and n not in last:
                last[n] = op
    for p, g in params_grads:
        op = last[g.name]
        g.op = op
        rewrite.add_role_var(op, [p, g])


def _loss_seed_shape(loss: Variable) -> List[int]:
    """The seed's shape: the loss's own when every dim is 1 (``[1, 1]``, and ``[]`` for a 0-d
    loss, as Paddle 2.x: a gradient has its variable's shape), else fluid's ``[1]``."""
    shape = list(loss.shape)
    return shape if all(d == 1 for d in shape) else [1]


# -- public API ----------------------------------------------------------------------------------
def append_backward(loss: Variable, parameter_list: Optional[Sequence[_VarOrName]] = None,
                    no_grad_set: Optional[Iterable[_VarOrName]] = None,
                    callbacks: Optional[Sequence[Callable[..., Any]]] = None,
                    checkpoints: Optional[Sequence[_VarOrName]] = None) -> Any:
    """Append the gradient ops of ``loss`` (a 1-element Variable) to its program.

    Args:
        loss: the scalar loss (e.g. ``fluid.layers.mean(cost)``).
        parameter_list: Parameters (or names) whose ``(param, grad)`` pairs to return; default
            every trainable parameter of the global block.
        no_grad_set: Variables or names that get no gradient (in addition to every variable
            with ``stop_gradient=True``).
        callbacks: callables run as ``cb(block=block, context=grad_to_var)`` after each grad op
            (``context`` maps grad name -> forward var name, plus ``"__current_op_desc__"``).
        checkpoints: Variables or names; the forward ops between two checkpoints are recomputed
            during the backward pass (fluid's recompute).

    Returns:
        ``[(param, grad)]`` for the parameters that received a gradient; with ``checkpoints``,
        ``(params_grads, checkpoint_names)``.
    Raises:
        TypeError: ``loss`` is not a Variable or not float16/32/64, ``callbacks`` is not a list,
            ``parameter_list`` / ``no_grad_set`` / ``checkpoints`` has the wrong type.
        ValueError: ``loss`` has more than one element, no op of its program computes it, a
            callback is not callable, a ``parameter_list`` name is not in the loss's program, or
            the path holds an op without a gradient rule.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup), fluid.unique_name.guard():
        ...     x = fluid.data("x", [-1, 2])
        ...     loss = fluid.layers.mean(fluid.layers.fc(x, size=1))
        ...     params_grads = fluid.backward.append_backward(loss)
        >>> sorted((p.name, g.name) for p, g in params_grads)
        [('fc_0.b_0', 'fc_0.b_0@GRAD'), ('fc_0.w_0', 'fc_0.w_0@GRAD')]
    """
    if not isinstance(loss, Variable):
        raise _type_error("loss", _API, f"{Variable}", loss)
    program, block = loss.block.program, loss.block
    cbs = _check_callbacks(callbacks)
    no_grad = _pass_no_grad(program, _no_grad_names(no_grad_set))
    params = _check_parameter_list(parameter_list, program)
    ckpts = _check_checkpoints(checkpoints, program)
    numel = 1
    for d in loss.shape:
        numel *= d
    if numel != 1:
        raise ValueError(f"The loss.shape should be (1L,), but the current loss.shape is "
                         f"{tuple(loss.shape)}. Maybe that you should call fluid.layers.mean to "
                         f"process the current loss.")
    if loss.dtype is not None and loss.dtype not in FLOATS:
        # gradients flow only through floating-point variables: nothing would be returned
        raise TypeError(f"{_API}: the loss '{loss.name}' is {loss.dtype.name.lower()}, but a "
                        f"loss must be float16, float32 or float64 (no gradient flows through "
                        f"an integer or bool variable, so no parameter would get one). Build "
                        f"the loss from floating-point ops, e.g. fluid.layers.mean of a float "
                        f"cost.")
    _, loss_idx = _find_producer(loss, "loss", _API)
    loss_op = block.ops[loss_idx]
    if loss.op is None:          # e.g. a cloned program's loss: found by name, as fluid does
        loss.op = loss_op

    # phase 1: build every desc (no program change yet)
    grad_name = _GradNames(block)
    path, tracked = _op_path(block.ops[:loss_idx + 1], None, {loss.name}, no_grad,
                             [p.name for p in program.all_parameters()])
    seed = OpDesc("fill_constant", {}, {"Out": [grad_name(loss.name)]},
                  {"shape": _loss_seed_shape(loss), "value": 1.0, "dtype": loss.dtype,
                   "force_cpu": False})
    if ckpts:
        body, recomputed = _grad_descs_with_recompute(block, path, tracked, no_grad,
                                                      grad_name, ckpts)
    else:
        body, recomputed = _grad_descs(path, tracked, no_grad, grad_name), {}

    # phase 2: append (one transaction)
    def pairs(app: _Appender) -> List[Tuple[Variable, Variable]]:
        out = []
        for p in params:
            g = grad_name.grad_of.get(p.name)
            if g is not None and p.name in tracked and g in app.available:
                out.append((p, block.var(g)))
        _annotate_role_var(block, app.n_ops, out)
        return out

    result = _run_pass(block, [seed], OpRole.Backward | OpRole.Loss, body, grad_name,
                       recomputed, cbs,
                       before=lambda: rewrite.set_role(loss_op, OpRole.Forward | OpRole.Loss),
                       after=pairs)
    if checkpoints is not None:
        return result, list(ckpts)
    return result


def _check_callbacks(callbacks: Any) -> List[Callable[..., Any]]:
    if callbacks is None:
        return []
    if not isinstance(callbacks, (list, tuple)):
        raise _type_error("callbacks", _API, "<class 'list'>", callbacks)
    for cb in callbacks:
        if not callable(cb):
            raise ValueError("'callback' must be a callable object.")
    return list(callbacks)


def _check_parameter_list(parameter_list: Any, program: Program) -> List[Variable]:
    glob = program.global_block()
    if parameter_list is None:
        return [p for p in glob.all_parameters() if p.trainable]
    if not isinstance(parameter_list, (list, tuple, set, frozenset)):
        raise TypeError(f"The type of parameter_list argument must be list or tuple or set, but "
                        f"received {type(parameter_list)}.")
    params = []
    for i, p in enumerate(parameter_list):
        if isinstance(p, Variable):
            _check_same_program(p, program, f"parameter_list[{i}]", _API)
            params.append(p)
        elif isinstance(p, str):
            v = glob.vars.get(p)
            if v is None:
                raise ValueError(f"{_API}: parameter_list[{i}] names '{p}', but the loss's "
                                 f"program has no variable of that name in its global block")
            params.append(v)
        else:
            raise _type_error(f"parameter_list[{i}]", _API, "(Variable, str)", p)
    return list({p.name: p for p in params}.values())      # first occurrence order


def _check_checkpoints(checkpoints: Any, program: Program) -> List[str]:
    if checkpoints is None:
        return []
    if not isinstance(checkpoints, (list, tuple)):
        raise _type_error("checkpoints", _API, "<class 'list'>", checkpoints)
    out = []
    for i, c in enumerate(checkpoints):
        if isinstance(c, Variable):
            _check_same_program(c, program, f"checkpoints[{i}]", _API)
            out.append(c.name)
        elif isinstance(c, str):
            out.append(c)
        else:
            raise _type_error(f"checkpoints[{i}]", _API, "(Variable, str)", c)
    return list(dict.fromkeys(out))


def gradients(targets: Union[Variable, Sequence[Variable]],
              inputs: Union[Variable, Sequence[Variable]],
              target_gradients: Union[None, Variable, Sequence[Optional[Variable]]] = None,
              no_grad_set: Optional[Iterable[_VarOrName]] = None) -> List[Optional[Variable]]:
    """Gradients of ``sum(targets * target_gradients)`` w.r.t. each of ``inputs``.

    Returns a list aligned with ``inputs``: the gradient Variable, or None where the input does
    not influence the targets (or is ``stop_gradient``: data inputs need
    ``x.stop_gradient = False``). Without ``target_gradients`` each target is seeded with ones
    of its shape. Can be applied again to its own results (higher-order gradients).

    Args:
        targets (Variable | list of Variable): what to differentiate.
        inputs (Variable | list of Variable): with respect to what.
        target_gradients (Variable | list | None): the upstream gradients (default: ones).
        no_grad_set (set | None): variables or names that get no gradient.
    Returns:
        list: one gradient Variable (or None) per input.
    Raises:
        TypeError: ``targets`` / ``inputs`` / ``target_gradients`` / ``no_grad_set`` has the
            wrong type.
        ValueError: ``targets`` or ``inputs`` is empty, the targets are in different blocks, an
            input belongs to another program, ``target_gradients`` does not match ``targets`` in
            number or shape, or the path holds an op without a gradient rule.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 2])
        ...     x.stop_gradient = False
        ...     y = fluid.layers.reduce_sum(x * x)
        ...     dx, = fluid.gradients(y, x)
        >>> fluid.Executor(fluid.CPUPlace()).run(
        ...     main, feed={"x": np.array([[1, 2]], "float32")}, fetch_list=[dx])[0]
        array([[2., 4.]], dtype=float32)
    """
    api = "fluid.backward.gradients"
    targets = _as_var_list(targets, "targets", api)
    inputs = _as_var_list(inputs, "inputs", api)
    block = targets[0].block
    program = block.program
    for t in targets:
        if t.block is not block:
            raise ValueError("all targets must be in the same block")
    for i, v in enumerate(inputs):
        _check_same_program(v, program, f"inputs[{i}]", api)
    tgs = _target_gradients(target_gradients, targets, block, api)
    user_no_grad = _no_grad_names(no_grad_set)
    no_grad = _pass_no_grad(program, user_no_grad)
    for v in inputs:
        if v.stop_gradient and v.name not in user_no_grad:
            _log.warning("fluid.gradients: input '%s' has stop_gradient=True, so its gradient "
                         "is None; set %s.stop_gradient = False to differentiate w.r.t. it",
                         v.name, v.name)
    last = -1
    for t in targets:
        try:
            last = max(last, _find_producer(t, "target", api)[1])
        except ValueError:
            pass      # a target that no op computes (e.g. an input): only its seed applies

    # phase 1
    grad_name = _GradNames(block)
    target_names = {t.name for t in targets}
    path, tracked = _op_path(block.ops[:last + 1], {v.name for v in inputs}, target_names,
                             no_grad)
    tracked |= target_names - no_grad
    # each target's gradient starts as its target_gradient, or ones of its shape
    seeds = [OpDesc("fill_any_like", {"X": [t.name]}, {"Out": [grad_name(t.name)]},
                    {"value": 1.0}) if tg is None else
             OpDesc("assign", {"X": [tg.name]}, {"Out": [grad_name(t.name)]}, {})
             for t, tg in zip(targets, tgs)]
    body = _grad_descs(path, tracked, no_grad, grad_name)

    # phase 2
    def grads(app: _Appender) -> List[Optional[Variable]]:
        out: List[Optional[Variable]] = []
        for v in inputs:
            g = grad_name.grad_of.get(v.name)
            ok = (g is not None and v.name in tracked and v.name not in no_grad
                  and g in app.available)
            out.append(block.var(g) if ok else None)
        return out

    return _run_pass(block, seeds, OpRole.Backward, body, grad_name, after=grads)


def _target_gradients(target_gradients: Any, targets: List[Variable], block: Block,
                      api: str) -> List[Optional[Variable]]:
    """``target_gradients`` as a list aligned with ``targets`` (None: seed with ones), each
    one a Variable of its target's block and shape."""
    if target_gradients is None:
        tgs: List[Optional[Variable]] = [None] * len(targets)
    else:
        tgs = [target_gradients] if isinstance(target_gradients, Variable) else \
            list(target_gradients) if isinstance(target_gradients, (list, tuple)) else None
        if tgs is None:
            raise _type_error("target_gradients", api, "(Variable, list, tuple, None)",
                              target_gradients)
        if not tgs:
            tgs = [None] * len(targets)
    if len(tgs) != len(targets):
        raise ValueError("Should have the same number of target_gradients as targets")
    for t, tg in zip(targets, tgs):
        if tg is None:
            continue
        if not isinstance(tg, Variable):
            raise _type_error("target_gradients", api, "Variable or None", tg)
        if tg.block.program is not block.program or tg.block is not block:
            raise ValueError("all targets must be in the same block")
        if tuple(tg.shape) != tuple(t.shape):
            raise ValueError(f"The shapes of target and grad are different: {t.name} {tg.name} "
                             f"(target shape {list(t.shape)}, grad shape {list(tg.shape)})")
    return tgs


def _as_var_list(x: Any, what: str, api: str) -> List[Variable]:
    items = [x] if isinstance(x, Variable) else list(x) if isinstance(x, (list, tuple)) else None
    if items is None:
        raise _type_error(what, api, "(Variable, list, tuple)", x)
    if not items:
        raise ValueError(f"{api}: '{what}' is empty; pass at least one Variable")
    for i, v in enumerate(items):
        if not isinstance(v, Variable):
            raise _type_error(f"{what}[{i}]", api, "Variable", v)
    return items


def calc_gradient(targets: Union[Variable, Sequence[Variable]],
                  inputs: Union[Variable, Sequence[Variable]],
                  target_gradients: Any = None, no_grad_set: Any = None
                  ) -> Union[None, Variable, List[Optional[Variable]]]:
    """Like ``gradients``, but a single input Variable returns a bare Variable (or None)."""
    out = gradients(targets, inputs, target_gradients, no_grad_set)
    return out[0] if isinstance(inputs, Variable) else out


# -- control flow: while_grad / conditional_block_grad -------------------------------------------
def _is_array(block: Block, grad: str, fwd_of: Dict[str, str]) -> bool:
    fwd = _forward_var(block, grad, fwd_of)
    return fwd is not None and fwd.type == VarType.LOD_TENSOR_ARRAY


class _OpView(OpArgs):
    """A forward op of a sub-block seen with SSA-versioned names (``core/control_flow``); what
    the grad makers read of an op (type, slots, attrs)."""

    def __init__(self, op: Operator, inputs: Dict[str, List[str]],
                 outputs: Dict[str, List[str]]) -> None:
        self.type, self.block, self.attrs = op.type, op.block, op.attrs
        self.inputs, self.outputs = inputs, outputs
        self.orig = op                  # the op with its own (unversioned) names

    def attr(self, name: str) -> Any:
        return self.attrs.get(name)

    def all_attrs(self) -> Dict[str, Any]:
        return dict(self.attrs)


class _PendingGradBlock:
    """The grad block of a sub-block op, as data until phase 2 appends it: ``descs`` (the
    body's accumulated grad op descs), the SSA versions they read (declared in the new block
    like their variables) and the gradients bound on entry (``seeded``)."""

    def __init__(self, forward: Block, descs: List[OpDesc], versions: Dict[str, str],
                 seeded: Sequence[str]) -> None:
        self.forward, self.descs, self.versions, self.seeded = forward, descs, versions, seeded

    def build(self, parent: Block, grad_name: _GradNames) -> Block:
        program = parent.program
        cur = program.current_block_idx
        gb = program._create_block(parent_idx=parent.idx)
        program.current_block_idx = cur
        gb.forward_block_idx = self.forward.idx
        for v, base in self.versions.items():
            like = self.forward._find_var_recursive(base)
            gb.create_var(name=v, shape=like.shape, dtype=like.dtype, lod_level=like.lod_level,
                          type=like.type)
        # the body's own variables (declared in the forward block) are read here too
        for d in self.descs:
            for n in [n for ns in d.inputs.values() for n in ns]:
                if gb._find_var_recursive(n) is None:
                    like = self.forward._find_var_recursive(n)
                    if like is not None:
                        gb.create_var(name=n, shape=like.shape, dtype=like.dtype,
                                      lod_level=like.lod_level, type=like.type)
        app = _Appender(gb, grad_name)
        for n in self.seeded:
            app.ensure_var(n)
            app.available.add(n)
        for desc in self.descs:
            app.append(desc)
        return gb


_LOOP_START = "@LOOP_START"        # the copy of a loop counter taken before its loop
_SNAPSHOT = "@snapshot_before"     # desc attr: take that copy before this forward op


def _counters_read_before(op: Any, body: Block, xs: Sequence[str],
                          outs: Sequence[str]) -> List[str]:
    """The loop counters of while ``op`` (outer variables the body changes only by in-place
    ``increment``) that a differentiable op before the loop reads: their gradients read the
    counter's value from before the loop. Empty for a loop nested in another block op."""
    if getattr(op, "orig", op) is not op or op not in op.block.ops:
        return []
    found = []
    before = op.block.ops[:op.block.ops.index(op)]
    for v in sorted(set(xs) & set(outs)):
        writers = [o for o in body.ops if v in o.output_arg_names]
        if not writers or v in body.vars or any(
                o.type != "increment" or o.inputs.get("X") != [v] or o.outputs.get("Out") != [v]
                for o in writers):
            continue
        if any(v in o.input_arg_names and get_op_def(o.type).differentiable for o in before):
            found.append(v)
    return found


def _control_flow_grad(g: GradBuilder) -> None:
    """The grad op of a ``while`` / ``conditional_block`` (called by their ``make_grad``).

    The body's ops are seen in SSA form (``core/control_flow.Versions``): the gradient of the
    value an outer variable had when the iteration started is ``x@GRAD``; the gradient of its
    value at the end (the incoming gradient, from the next iteration or from after the loop)
    is seeded under its last version's gradient name. The body's grad ops are built and
    accumulated as in block 0; their descs become the grad block, appended in phase 2.
    """
    op = g.op
    fwd_block = op.attrs["sub_block"]
    program = fwd_block.program
    is_while = op.type == "while"
    x_slot = "X" if is_while else "Input"
    # inside the block variables have their own names; the op's slots may carry the SSA
    # versions of an enclosing block (a nested loop / branch): the grad op uses those
    orig = getattr(op, "orig", op)
    xs = list(orig.inputs.get(x_slot, []))
    outs = list(orig.outputs.get("Out", []))
    xs_outer = list(op.inputs.get(x_slot, []))
    outs_outer = list(op.outputs.get("Out", []))
    if is_while and op.attrs.get("is_test", False):
        raise ValueError("cannot differentiate a While built with is_test=True (an inference "
                         "loop keeps no per-iteration values); build it with is_test=False")
    scope = op.outputs.get("StepScopes" if is_while else "Scope", [])
    if not scope:
        raise ValueError(f"{op.type}: the op has no {'StepScopes' if is_while else 'Scope'} "
                         f"output, so its iterations cannot be recorded for the gradient")
    versions = _cf.Versions(fwd_block)
    views = []
    for k, sub_op in enumerate(fwd_block.ops):
        ins, outs_k = versions.rename_op(k)
        views.append(_OpView(sub_op, ins, outs_k))
    base_no_grad = _stop_gradient_names(program) | set(g.no_grad) | {names.EMPTY_VAR_NAME}
    all_names = {n for v in views for n in v.input_arg_names + v.output_arg_names}
    no_grad = {n for n in all_names if _cf.base_name(n) in base_no_grad} | {names.EMPTY_VAR_NAME}
    finals = {o: versions.final.get(o, o) for o in outs}
    targets = {finals[o] for o in outs if finals[o] not in no_grad}
    grad_name: _GradNames = g._grad_name
    # an outer array the body reads is a leaf even though the body writes it: a write
    # replaces one entry, the others keep the value the iteration started with
    outer_arrays = [x for x in xs if _cf.is_array(fwd_block, x)]
    path, tracked = _op_path(views, None, targets, no_grad, outer_arrays)
    tracked |= targets
    body = _grad_descs(path, tracked, no_grad, grad_name)
    seeds = [OpDesc("@seed", {}, {"Out": [grad_name(finals[o])]}, {}) for o in outs
             if finals[o] in targets]
    seed_of = {id(d): o for d, o in zip(seeds, [o for o in outs if finals[o] in targets])}
    accumulated = _accumulate(seeds + body, grad_name,
                              lambda n: _is_array(fwd_block, n, grad_name.fwd_of))
    in_grads = {seed_of[id(d)]: d.outputs["Out"][0] for d in accumulated if id(d) in seed_of}
    descs = [d for d in accumulated if id(d) not in seed_of]
    written = {n for d in descs for ns in d.outputs.values() for n in ns}
    dxs = g.input_grad(x_slot) or [names.EMPTY_VAR_NAME] * len(xs)
    out_grads = []
    for x, dx in zip(xs, dxs):
        gname = grad_name.grad_of.get(x)
        ok = dx != names.EMPTY_VAR_NAME and gname is not None and (
            gname in written or gname in in_grads.values())
        out_grads.append(gname if ok else "")
    used = {n for d in descs for ns in d.inputs.values() for n in ns}
    version_vars = {n: versions.base[n] for n in used | set(finals.values())
                    if n in versions.base}
    douts = [grad_name(oo) if finals[o] in targets else names.EMPTY_VAR_NAME
             for o, oo in zip(outs, outs_outer)]
    pending = _PendingGradBlock(fwd_block, descs, version_vars, list(in_grads.values()))
    attrs = {"sub_block": pending, "block_in_grads": [in_grads.get(o, "") for o in outs],
             "block_out_grads": out_grads,
             "carried_from": [outs.index(x) if x in outs else -1 for x in xs]}
    if is_while:
        g.append("while_grad", {"X": xs_outer, "Out": outs_outer, "Out@GRAD": douts,
                                "StepScopes": scope}, {"X@GRAD": dxs}, attrs)
        for v in _counters_read_before(op, fwd_block, xs, outs):
            # fluid's grad block undoes each increment of a loop counter (increment's
            # gradient), so after while_grad the counter again holds its value from before
            # the loop, which the gradients of the ops before the loop read (an array entry
            # written at the counter). fluidlite's grad block reads recorded values instead:
            # the counter is restored from a copy taken before the loop (_Appender.append).
            g.append("assign", {"X": [v + _LOOP_START]}, {"Out": [v]}, {_SNAPSHOT: op})
    else:
        attrs["is_scalar_condition"] = op.attrs.get("is_scalar_condition", False)
        g.append("conditional_block_grad",
                 {"Cond": op.inputs.get("Cond", []), "Input": xs_outer, "Out": outs_outer,
                  "Out@GRAD": douts, "Scope": scope}, {"Input@GRAD": dxs}, attrs)


_cf_ops.provide_grad_builder(_control_flow_grad)      # sub-block ops' gradients (ops/control_flow)
