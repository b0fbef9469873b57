"""The backward pass: insert gradient ops into the Program (fluid's ``append_backward``).

Ops inserted (all with ``op_role`` Backward, the seed with Backward|Loss):
* ``fill_constant`` seeding ``loss@GRAD`` with 1.0 (shape [1]);
* each forward op's grad ops (its ``<type>_grad`` kernel or a composition), in reverse order,
  only for ops on a path from a gradient-requiring variable to the loss;
* ``sum`` where a variable feeds several ops: its partial gradients are written to
  ``X@GRAD@RENAME@k`` and summed into ``X@GRAD`` before the first reader;
* ``fill_zeros_like`` for a needed output gradient that nothing produced.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple, Union

from .core import names
from .core.ir import Block, OpRole, Operator, Parameter, Program, Variable
from .core.registry import GradBuilder, OpDesc, get_op_def

__all__ = ["append_backward", "gradients", "calc_gradient"]

_VarOrName = Union[Variable, str]


def _names_of(items: Any, what: str) -> Set[str]:
    if items is None:
        return set()
    if not isinstance(items, (set, list, tuple, frozenset)):
        raise TypeError(f"The type of {what} should be set or list or tuple, but received "
                        f"{type(items)}")
    out = set()
    for x in items:
        if isinstance(x, Variable):
            out.add(x.name)
        elif isinstance(x, str):
            out.add(x)
        else:
            raise TypeError(f"The type of {what}'s member should be Variable or str, but "
                            f"received {type(x)}")
    return out


def _stop_gradient_names(program: Program) -> Set[str]:
    return {v.name for v in program.list_vars() if v.stop_gradient}


def _op_path(ops: Sequence[Operator], sources: Optional[Set[str]], targets: Set[str],
             no_grad: Set[str]) -> Tuple[List[Operator], Set[str]]:
    """Ops on a path from a gradient-requiring var (or ``sources``) to ``targets``, and the set
    of variable names that carry a gradient along that path."""
    needed, backward_ops = set(targets), []
    for op in reversed(ops):
        if any(n in needed for n in op.output_arg_names):
            backward_ops.append(op)
            needed.update(n for n in op.input_arg_names if n not in no_grad)
    backward_ops.reverse()
    produced = {n for op in backward_ops for n in op.output_arg_names}
    tracked: Set[str] = set()
    path = []
    for op in backward_ops:
        ins = [n for n in op.input_arg_names if n not in no_grad]
        leaf = [n for n in ins if n not in produced and (sources is None or n in sources)]
        tracked.update(leaf)
        if any(n in tracked for n in ins):
            path.append(op)
            tracked.update(n for n in op.output_arg_names if n not in no_grad)
    return path, tracked


def _grad_descs(path: Sequence[Operator], tracked: Set[str], no_grad: Set[str]) -> List[OpDesc]:
    descs: List[OpDesc] = []
    for op in reversed(path):
        opdef = get_op_def(op.type)
        if opdef.no_grad or not opdef.differentiable:
            continue
        skip = no_grad | {n for n in op.input_arg_names if n not in tracked}
        descs.extend(opdef.grad_op_descs(GradBuilder(op, skip)))
    return descs


def _accumulate(descs: List[OpDesc]) -> List[OpDesc]:
    """Rename repeated writes of a gradient to ``@RENAME@k`` and insert ``sum`` ops."""
    pending: Dict[str, List[str]] = {}
    first_writer: Dict[str, Tuple[OpDesc, str, int]] = {}
    out: List[OpDesc] = []

    def flush(name: str) -> None:
        parts = pending.get(name)
        if parts and len(parts) > 1:
            out.append(OpDesc("sum", {"X": list(parts)}, {"Out": [name]}, {"use_mkldnn": False}))
        pending[name] = [name]

    for desc in descs:
        for arg_names in desc.inputs.values():
            for n in arg_names:
                if n in pending and len(pending[n]) > 1:
                    flush(n)
        for slot, arg_names in desc.outputs.items():
            for i, n in enumerate(arg_names):
                if n == names.EMPTY_VAR_NAME or names.GRAD_SUFFIX not in n:
                    continue
                if n in desc_inputs(desc):
                    continue   # in-place update of an existing gradient
                if n not in pending:
                    pending[n] = [n]
                    first_writer[n] = (desc, slot, i)
                    continue
                parts = pending[n]
                if parts == [n]:
                    d0, s0, i0 = first_writer[n]
                    d0.outputs[s0][i0] = f"{n}{names.RENAME_SUFFIX}0"
                    parts[0] = d0.outputs[s0][i0]
                new = f"{n}{names.RENAME_SUFFIX}{len(parts)}"
                arg_names[i] = new
                parts.append(new)
        out.append(desc)
    for n in list(pending):
        if len(pending[n]) > 1:
            flush(n)
    return out


def desc_inputs(desc: OpDesc) -> Set[str]:
    return {n for v in desc.inputs.values() for n in v}


def _forward_var(block: Block, grad_name: str) -> Optional[Variable]:
    return block._find_var_recursive(names.strip_grad_suffix(grad_name))


def _append_descs(block: Block, descs: List[OpDesc], callbacks: Sequence[Callable],
                  available: Set[str]) -> List[Operator]:
    appended = []
    grad_to_var: Dict[str, str] = {}
    for desc in descs:
        for arg_names in desc.inputs.values():
            for n in arg_names:
                if n in available or n == names.EMPTY_VAR_NAME or names.GRAD_SUFFIX not in n:
                    continue
                fwd = _forward_var(block, n)
                if fwd is not None:     # a needed gradient nothing produced: zeros
                    _ensure_grad_var(block, n)
                    appended.append(block.append_op(
                        "fill_zeros_like", {"X": fwd.name}, {"Out": n}))
                    available.add(n)
        for arg_names in desc.outputs.values():
            for n in arg_names:
                if n != names.EMPTY_VAR_NAME and names.GRAD_SUFFIX in n:
                    _ensure_grad_var(block, n)
                    grad_to_var[n] = names.strip_grad_suffix(n)
        op = block.append_op(desc.type, desc.inputs, desc.outputs, desc.attrs)
        appended.append(op)
        available.update(op.output_arg_names)
        for cb in callbacks:
            cb(block=block, context=dict(grad_to_var, __current_op_desc__=op))
    return appended


def _ensure_grad_var(block: Block, grad_name: str) -> Variable:
    if block.has_var(grad_name):
        return block.var(grad_name)
    fwd = _forward_var(block, grad_name)
    if fwd is None:
        return block.create_var(name=grad_name)
    return block.create_var(name=grad_name, shape=fwd.shape, dtype=fwd.dtype,
                            lod_level=fwd.lod_level)


def append_backward(loss: Variable, parameter_list: Optional[Sequence[_VarOrName]] = None,
                    no_grad_set: Optional[Iterable[_VarOrName]] = None,
                    callbacks: Optional[Sequence[Callable]] = None,
                    checkpoints: Any = None) -> List[Tuple[Parameter, Variable]]:
    """Append gradient ops for ``loss`` (a 1-element Variable) to its program.

    Returns ``[(param, param@GRAD)]`` for the parameters (``parameter_list`` or every trainable
    parameter) that received a gradient.
    """
    if not isinstance(loss, Variable):
        raise TypeError(f"The type of 'loss' in append_backward must be Variable, but received "
                        f"{type(loss).__name__}")
    if callbacks is not None:
        if not isinstance(callbacks, (list, tuple)):
            raise TypeError("callbacks should be a list of callables")
        for cb in callbacks:
            if not callable(cb):
                raise ValueError("'callback' must be a callable object.")
    program, block = loss.block.program, loss.block
    no_grad = _names_of(no_grad_set, "no_grad_set") | _stop_gradient_names(program)
    if parameter_list is not None:
        if not isinstance(parameter_list, (list, tuple, set)):
            raise TypeError(f"The type of parameter_list should be list, tuple or set, but "
                            f"received {type(parameter_list)}")
        params = [block.program.global_block().var(p) if isinstance(p, str) else p
                  for p in parameter_list]
    else:
        params = [p for p in program.global_block().all_parameters() if p.trainable]
    n = 1
    for d in loss.shape:
        n *= d
    if n != 1:
        raise ValueError(f"The loss.shape should be (1L,), but the current loss.shape is "
                         f"{tuple(loss.shape)}. Maybe that you should call fluid.layers.mean to "
                         f"process the current loss.")
    if loss.op is None:
        raise ValueError("loss.op is None. Should not happend")
    loss.op._set_attr("op_role", OpRole.Forward | OpRole.Loss)
    program._appending_grad_times += 1
    loss_idx = block.ops.index(loss.op)
    path, tracked = _op_path(block.ops[:loss_idx + 1], None, {loss.name}, no_grad)
    descs = _accumulate(_grad_descs(path, tracked, no_grad))
    available = {n for op in block.ops for n in op.output_arg_names}
    with program._backward_role_guard():
        loss_grad = names.grad_var_name(loss.name)
        _ensure_grad_var(block, loss_grad)
        block.append_op("fill_constant", outputs={"Out": loss_grad},
                        attrs={"shape": [1], "value": 1.0, "dtype": loss.dtype,
                               "force_cpu": False,
                               "op_role": OpRole.Backward | OpRole.Loss})
        available.add(loss_grad)
        _append_descs(block, descs, callbacks or [], available)
    result = []
    for p in params:
        g = names.grad_var_name(p.name)
        if block.has_var(g) and p.name in tracked:
            result.append((p, block.var(g)))
    _annotate_role_var(block, result)
    return result


def _annotate_role_var(block: Block, params_grads: Sequence[Tuple[Parameter, Variable]]) -> None:
    for p, g in params_grads:
        for op in reversed(block.ops):
            if g.name in op.output_arg_names:
                op._set_attr("op_role_var", [p.name, g.name] + list(op.attr("op_role_var") or []))
                break


def gradients(targets: Union[Variable, Sequence[Variable]],
              inputs: Union[Variable, Sequence[Variable]],
              target_gradients: Any = None, no_grad_set: Any = None) -> List[Optional[Variable]]:
    """Gradients of ``sum(targets * target_gradients)`` w.r.t. each of ``inputs`` (None where an
    input does not influence the targets). Inputs must have ``stop_gradient=False``."""
    targets = [targets] if isinstance(targets, Variable) else list(targets)
    inputs = [inputs] if isinstance(inputs, Variable) else list(inputs)
    block = targets[0].block
    program = block.program
    no_grad = _names_of(no_grad_set, "no_grad_set") | _stop_gradient_names(program)
    if target_gradients is None:
        target_gradients = [None] * len(targets)
    elif isinstance(target_gradients, Variable):
        target_gradients = [target_gradients]
    if len(target_gradients) != len(targets):
        raise ValueError("Should have the same number of target_gradients as targets")
    program._appending_grad_times += 1
    last = max(block.ops.index(t.op) for t in targets if t.op is not None)
    path, tracked = _op_path(block.ops[:last + 1], {v.name for v in inputs},
                             {t.name for t in targets}, no_grad)
    descs = _accumulate(_grad_descs(path, tracked, no_grad))
    available = {n for op in block.ops for n in op.output_arg_names}
    with program._backward_role_guard():
        for t, tg in zip(targets, target_gradients):
            gname = names.grad_var_name(t.name)
            if tg is None:
                _ensure_grad_var(block, gname)
                block.append_op("fill_any_like", {"X": t}, {"Out": gname}, {"value": 1.0})
            else:
                if tuple(tg.shape) != tuple(t.shape):
                    raise ValueError(f"The shapes of target and grad are different: "
                                     f"{t.shape} {tg.shape}")
                _ensure_grad_var(block, gname)
                block.append_op("assign", {"X": tg}, {"Out": gname})
            available.add(gname)
        _append_descs(block, descs, [], available)
    out = []
    for v in inputs:
        g = names.grad_var_name(v.name)
        out.append(block.var(g) if block.has_var(g) and v.name in tracked else None)
    return out


def calc_gradient(targets: Any, inputs: Any, target_gradients: Any = None,
                  no_grad_set: Any = None) -> Any:
    """Like ``gradients``; a single input returns a bare Variable."""
    single = isinstance(inputs, Variable)
    out = gradients(targets, inputs, target_gradients, no_grad_set)
    return out[0] if single else out
