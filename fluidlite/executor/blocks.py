"""Code generation for ops that own a sub-block (the plan's part of control flow).

``emit(gen, op, opdef)`` writes the lines of one op whose definition declares ``sub_block_op``
into the plan being generated (``gen``: the plan's ``_CodeGen``), inline, from what the op
class declares (``ops/control_flow.py``'s ``_BlockOp``: ``block_loops``, ``block_backward``,
``condition_slot``, ``block_inputs_slot``, ``records_slot``) -- this module knows no op type:

* a loop (``while``): the loop-carried variables (outer variables the body writes) get a local
  of their own (a *phi*) before the loop; the body is generated one level deeper under
  ``while <condition phi>:``; at the end of each iteration the phis take the body's new
  values. An iteration counter names the iteration in error messages.
* a branch (``conditional_block``): the same under ``if <condition>:``; variables it writes keep
  their old value when it does not run.
* When the program holds the op's gradient, each iteration (each run of the block) appends
  the values its grad block reads -- the SSA versions (``core/control_flow.Versions``) -- to a
  list bound to the ``records_slot`` variable (``StepScopes`` / ``Scope``): fluid's step
  scopes, reduced to the values backward needs.
* a gradient op (``while_grad`` / ``conditional_block_grad``): ``for`` over the recorded
  iterations in reverse, binding each iteration's values, then the grad block. The gradient of
  a loop-carried variable flows from one iteration to the one before (zero when an iteration
  overwrote the variable without reading it); the gradient of a variable only read in the
  block is summed over iterations.

Locals bound inside a block body are dropped from the plan's name table when the body ends;
locals read inside a loop but bound before it live until the loop ends (eager deletion never
frees what a later iteration still reads).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Set, Tuple

from ..core import control_flow as cf
from ..core import names, registry
from ..core.dtypes import VarType
from ..core.registry import OpDef
from ..ops.control_flow import add_arrays
from .records import StepInfo


def add_up(acc: Any, g: Any) -> Any:
    """Sum two gradient contributions (``None`` = zero; tensor arrays position-wise)."""
    if acc is None:
        return g
    if g is None:
        return acc
    if isinstance(acc, list) or isinstance(g, list):
        return add_arrays(acc, g)
    return acc + g


def versions_of(gen: Any, op: Any, outs: List[Tuple[str, str]]) -> Dict[str, str]:
    """SSA version name -> local of the outputs ``op`` just bound (inside a block body)."""
    table = gen.version_table
    if table is None:
        return {}
    k = table.pos.get(id(op))
    if k is None:
        return {}
    out_versions = table.versions.outs[k]
    return {out_versions.get(n, n): loc for n, loc in outs}


class _VersionTable:
    def __init__(self, block: Any) -> None:
        self.versions = cf.Versions(block)
        self.pos = {id(op): k for k, op in enumerate(block.ops)}


def emit(gen: Any, op: Any, opdef: OpDef) -> None:
    """Generate the lines of ``op``, whose definition ``opdef`` declares ``sub_block_op``."""
    if opdef.block_backward:
        _GradBlock(gen, op, opdef).emit()
    else:
        _ForwardBlock(gen, op, opdef).emit()


# -- helpers ------------------------------------------------------------------------------------
def _use(gen: Any, loc: str) -> None:
    gen.last_use[loc] = max(gen.last_use.get(loc, -1), len(gen.body) - 1)


def _bind_outer(gen: Any, name: str, op: Any) -> str:
    """The current local of an outer variable (read from the scope / an empty array / None
    when it has no value yet)."""
    loc = gen.local.get(name)
    if loc is not None:
        return loc
    var = gen._var(name)
    if var is not None and (var.persistable or var.type == VarType.LOD_TENSOR_ARRAY):
        return gen._read(name, op)
    return "None"


def _hoist_persistables(gen: Any, block: Any) -> None:
    """Read the persistables a block uses before the loop (once, not per iteration)."""
    saved, gen.cur_block = gen.cur_block, block
    try:
        for sub_op in cf.walk_ops(block):
            for n in sub_op.input_arg_names:
                if n in gen.local or n == names.EMPTY_VAR_NAME:
                    continue
                var = sub_op.block._find_var_recursive(n)
                if var is not None and var.persistable:
                    gen._read_persistable(n)
    finally:
        gen.cur_block = saved


def _close_scope(gen: Any, start: int, end: int, block: Any) -> None:
    """After a body spanning body lines ``start..end``: locals bound before it and used in it
    live until ``end``; names declared in the body's blocks leave the name table."""
    for loc, last in list(gen.last_use.items()):
        if start <= last <= end and gen.def_at.get(loc, -1) < start:
            gen.last_use[loc] = end
    for n in [n for n in gen.local if _declared_in(block, n)]:
        del gen.local[n]


def _declared_in(block: Any, name: str) -> bool:
    var = block._find_var_recursive(name)
    return var is not None and cf.is_descendant(var.block, block)


def _step_info(gen: Any, op: Any) -> int:
    gen.steps.append(StepInfo(op.type, ((op.type, gen.block_pos.get(id(op), -1)),),
                              op.attrs.get("op_callstack"), (), gen.cur_block.idx,
                              tuple(gen.loops)))
    return len(gen.steps) - 1


def _gen_body(gen: Any, block: Any) -> None:
    saved = gen.cur_block
    gen.cur_block = block
    try:
        for sub_op in block.ops:
            if registry.get_op_def(sub_op.type).plan_skip:
                continue
            gen.step(sub_op)
    finally:
        gen.cur_block = saved


def _grad_reads(grad_op: Any) -> Set[str]:
    block = grad_op.attrs.get("sub_block")
    out: Set[str] = set()
    if block is not None:
        for sub_op in cf.walk_ops(block):
            out.update(sub_op.input_arg_names)
    return out


def _first(op: Any, slot: str, outputs: bool = False) -> Optional[str]:
    found = (op.outputs if outputs else op.inputs).get(slot, []) if slot else []
    return found[0] if found else None


# -- forward ------------------------------------------------------------------------------------
class _ForwardBlock:
    """The lines of a loop or branch op (module docstring), generated by ``emit``."""

    def __init__(self, gen: Any, op: Any, opdef: OpDef) -> None:
        self.gen, self.op, self.opdef = gen, op, opdef
        self.block = op.attrs.get("sub_block")
        self.loops = opdef.block_loops
        self.where = f"op #{gen.block_pos.get(id(op), -1)} of block {gen.cur_block.idx}"
        if self.block is None:
            raise ValueError(f"{op.type} ({self.where}) has no sub_block attribute")
        self.cond: Optional[str] = None           # a loop's condition variable
        self.counter: Optional[str] = None        # a loop's iteration counter local
        self.rec_loc: Optional[str] = None        # the list of recorded iterations
        self.scope_name = _first(op, opdef.records_slot, outputs=True)
        self.grad_ops = gen.grad_of_scope.get(self.scope_name) if self.scope_name else None

    def emit(self) -> None:
        gen = self.gen
        self.idx = _step_info(gen, self.op)
        _hoist_persistables(gen, self.block)
        _, writes = cf.outer_reads_writes(self.block)
        carried = list(dict.fromkeys(list(self.op.outputs.get("Out", [])) + writes))
        self.carried = [n for n in carried if n != names.EMPTY_VAR_NAME]
        if self.loops:      # the condition is read before the body runs
            self.cond = self._loop_condition()
        self.phis = self._bind_phis()
        if self.grad_ops:
            self.rec_loc = gen._new_local()
            gen._emit(self.idx, f"{self.rec_loc} = []")
        self.header_at = len(gen.body)
        if self.loops:
            self.counter = gen._new_local()
            gen._emit(self.idx, f"{self.counter} = -1")
            gen._emit(self.idx, f"while {self.phis[self.cond]}:")
        else:
            self._branch_header()
        self._body()
        self._close()

    def _loop_condition(self) -> str:
        gen, where = self.gen, self.where
        cond_names = self.op.inputs.get(self.opdef.condition_slot, [])
        if len(cond_names) != 1:
            raise ValueError(f"{self.op.type} ({where}) needs exactly one "
                             f"{self.opdef.condition_slot} variable, got {cond_names}")
        cond = cond_names[0]
        if cond not in gen.local and gen._var(cond) is not None and \
                not gen._var(cond).persistable:
            raise ValueError(f"{self.op.type} ({where}): the condition '{cond}' has no value "
                             f"before the loop; compute it (e.g. fluid.layers.less_than(i, n)) "
                             f"before creating the While")
        if cond not in self.carried:
            raise ValueError(f"{self.op.type} ({where}): the loop body never updates the "
                             f"condition '{cond}', so the loop would never end; recompute it "
                             f"inside the body, e.g. fluid.layers.less_than(i, n, cond={cond})")
        return cond

    def _bind_phis(self) -> Dict[str, str]:
        """One local per loop-carried variable, bound to its value before the block."""
        gen = self.gen
        phis: Dict[str, str] = {}
        for n in self.carried:
            src = _bind_outer(gen, n, self.op)
            phi = gen._new_local()
            gen._emit(self.idx, f"{phi} = {src}")
            if src != "None":
                _use(gen, src)
            phis[n] = phi
        gen.local.update(phis)
        return phis

    def _branch_header(self) -> None:
        """``if <condition>:`` -- the one element of the condition slot when the op's
        ``is_scalar_condition`` attr is set, else: every tensor the block reads is non-empty
        (fluid 1.8)."""
        gen, op = self.gen, self.op
        conds = [gen._read(n, op) for n in op.inputs.get(self.opdef.condition_slot, [])]
        if op.attrs.get("is_scalar_condition", False):
            if len(conds) != 1:
                raise ValueError(f"{op.type} ({self.where}) with is_scalar_condition needs "
                                 f"exactly one {self.opdef.condition_slot} variable, got "
                                 f"{len(conds)}")
            # fluid 1.8 (conditional_block_op ScalarCondition): exactly one element; item()
            # raises otherwise (a [-1, 1] predicate fed a batch of more than one)
            test = f"{conds[0]}.item()"
        else:
            ins = []
            for n in op.inputs.get(self.opdef.block_inputs_slot, []):
                var = gen._var(n)
                if var is not None and var.type == VarType.LOD_TENSOR and n in gen.local:
                    ins.append(gen.local[n])
            test = " and ".join(f"({t} is not None and {t}.size > 0)" for t in ins) or "True"
            conds += ins
        gen._emit(self.idx, f"if {test}:")
        for c in conds:
            _use(gen, c)

    def _body(self) -> None:
        """The block's lines one level deeper, then the records and the phi updates."""
        gen, idx = self.gen, self.idx
        gen.depth += 1
        saved_vlocal, saved_table = gen.vlocal, gen.version_table
        gen.vlocal = dict(self.phis)
        gen.version_table = _VersionTable(self.block)
        if self.counter is not None:
            gen._emit(idx, f"{self.counter} += 1")
            gen.loops.append((self.counter, self.where))
            # errors of the loop's own lines (the phi updates) name the iteration too
            gen.steps[idx] = gen.steps[idx]._replace(loops=tuple(gen.loops))
        try:
            _gen_body(gen, self.block)
            if self.rec_loc is not None:
                self._record()
            self._update_phis()
            if self.counter is None and not self.block.ops:
                gen._emit(idx, "pass")
            elif len(gen.body) == self.header_at + 1 + (self.counter is not None):
                gen._emit(idx, "pass")
        finally:
            gen.depth -= 1
            gen.vlocal, gen.version_table = saved_vlocal, saved_table
            if self.counter is not None:
                gen.loops.pop()

    def _record(self) -> None:
        """Append this run's values the grad block reads to the records list."""
        gen, vlocal = self.gen, self.gen.vlocal
        wanted = set().union(*(_grad_reads(g) for g in self.grad_ops))
        rec = [v for v in vlocal if v in wanted]
        gen.records[self.scope_name] = rec
        locs = [vlocal[v] for v in rec]
        gen._emit(self.idx, f"{self.rec_loc}.append(({''.join(x + ', ' for x in locs)}))")
        for x in locs:
            _use(gen, x)
        _use(gen, self.rec_loc)

    def _update_phis(self) -> None:
        gen, phis = self.gen, self.phis
        for n in self.carried:
            inner = gen.local.get(n, phis[n])
            if inner == phis[n]:
                continue
            # a loop variable may change its shape between iterations, as in fluid 1.8's
            # WhileOp (a beam search grows its ids from batch to batch * beam rows)
            gen._emit(self.idx, f"{phis[n]} = {inner}")
            _use(gen, inner)

    def _close(self) -> None:
        """After the block: what lives until its end, what the enclosing code sees."""
        gen, rec_loc = self.gen, self.rec_loc
        end = gen._emit(None, "")
        for loc in list(self.phis.values()) + ([self.counter] if self.counter else []) + \
                ([rec_loc] if rec_loc else []):
            _use(gen, loc)
        _close_scope(gen, self.header_at, end, self.block)
        gen.local.update(self.phis)
        if rec_loc is not None:
            gen.local[self.scope_name] = rec_loc
            gen.last_use[rec_loc] = end
        if gen.vlocal is not None:       # the loop itself is an op of an enclosing body
            gen.vlocal.update(versions_of(gen, self.op, list(self.phis.items())))
            if rec_loc is not None:      # its records are a value of the enclosing iteration
                gen.vlocal[self.scope_name] = rec_loc


# -- backward -----------------------------------------------------------------------------------
class _GradBlock:
    """The lines of a gradient op of a loop or branch (module docstring)."""

    def __init__(self, gen: Any, op: Any, opdef: OpDef) -> None:
        self.gen, self.op = gen, op
        self.block = op.attrs.get("sub_block")
        self.where = f"op #{gen.block_pos.get(id(op), -1)} of block {gen.cur_block.idx}"
        slot = opdef.block_inputs_slot
        self.xs = op.inputs.get(slot, [])
        self.outs = op.inputs.get("Out", [])
        self.dxs = op.outputs.get(slot + names.GRAD_SUFFIX, [])
        self.douts = op.inputs.get("Out" + names.GRAD_SUFFIX, [])
        n_x, n_out = len(self.xs), len(self.outs)
        self.in_grads = list(op.attrs.get("block_in_grads", [])) + [""] * n_out    # per Out
        self.out_grads = list(op.attrs.get("block_out_grads", [])) + [""] * n_x    # per X
        self.carried_from = list(op.attrs.get("carried_from", [])) + [-1] * n_x    # X -> Out
        self.scope_name = _first(op, opdef.records_slot)
        if self.block is None or self.scope_name is None or \
                self.scope_name not in gen.records:
            raise ValueError(f"{op.type} ({self.where}): its forward op's recorded iterations "
                             f"are missing (the forward op must run earlier in the same "
                             f"program)")
        self.carry: Dict[int, str] = {}    # Out position -> local holding its current gradient
        self.zeros: Dict[int, str] = {}
        self.acc: Dict[int, str] = {}      # X position (read only) -> its summed gradient

    def emit(self) -> None:
        gen = self.gen
        self.idx = _step_info(gen, self.op)
        self.rec = gen.records[self.scope_name]
        self.rec_loc = gen.local[self.scope_name]
        _hoist_persistables(gen, self.block)
        self._start_carries()
        for i in range(len(self.xs)):
            if self.carried_from[i] not in self.carry:
                self.acc[i] = gen._new_local()
                gen._emit(self.idx, f"{self.acc[i]} = None")
        self.header_at = len(gen.body)
        step_loc = gen._new_local()
        gen._emit(self.idx, f"for {step_loc} in reversed({self.rec_loc}):")
        gen.depth += 1
        outer_local = dict(gen.local)
        try:
            self._iteration(step_loc, outer_local)
        finally:
            gen.depth -= 1
        end = gen._emit(None, "")
        for loc in list(self.carry.values()) + list(self.acc.values()) + \
                list(self.zeros.values()) + [self.rec_loc]:
            _use(gen, loc)
        _close_scope(gen, self.header_at, end, self.block)
        gen.local = dict(outer_local)
        self._outputs()

    def _start_carries(self) -> None:
        """Gradients of loop-carried variables start from Out@GRAD (zeros when absent)."""
        gen, idx = self.gen, self.idx
        for j, (o, dname) in enumerate(zip(self.outs, self.douts)):
            if dname == names.EMPTY_VAR_NAME and not self.in_grads[j]:
                continue                # no gradient flows through it (a counter, a flag)
            var = gen._var(o)
            is_arr = var is not None and var.type == VarType.LOD_TENSOR_ARRAY
            src = gen.local.get(dname) if dname != names.EMPTY_VAR_NAME else None
            loc = gen._new_local()
            if is_arr:
                gen._emit(idx, f"{loc} = {src or 'None'}")
            else:
                self.zeros[j] = z = gen._new_local()
                fwd = _bind_outer(gen, o, self.op)
                gen._emit(idx, f"{z} = np.zeros_like({fwd})")
                if fwd != "None":
                    _use(gen, fwd)
                gen._emit(idx, f"{loc} = {src or z}")
            if src:
                _use(gen, src)
            self.carry[j] = loc

    def _iteration(self, step_loc: str, outer_local: Dict[str, str]) -> None:
        """One recorded iteration: bind its values, run the grad block, pass the gradients
        on to the iteration before."""
        gen, idx = self.gen, self.idx
        rec_locs = [gen._new_local() for _ in self.rec]
        if rec_locs:
            gen._emit(idx, f"{''.join(x + ', ' for x in rec_locs)}= {step_loc}")
        for v, loc in zip(self.rec, rec_locs):
            gen.local[v] = loc
        for j, name in enumerate(self.in_grads[:len(self.outs)]):
            if name and j in self.carry:
                gen.local[name] = self.carry[j]

        def computed(name: str) -> Optional[str]:
            got = gen.local.get(name) if name else None
            return got if got is not None and got != outer_local.get(name) else None

        _gen_body(gen, self.block)
        x_of_out = {self.carried_from[i]: i for i in range(len(self.xs))
                    if self.carried_from[i] >= 0}
        for j in self.carry:             # the gradient of the value before this iteration
            i = x_of_out.get(j)
            got = computed(self.out_grads[i]) if i is not None else None
            new = got or self.zeros.get(j, "None")   # not read by the body: zero gradient
            if new != self.carry[j]:
                gen._emit(idx, f"{self.carry[j]} = {new}")
                if new != "None":
                    _use(gen, new)
        for i in self.acc:
            got = computed(self.out_grads[i])
            if got is not None:
                gen._emit(idx, f"{self.acc[i]} = _acc({self.acc[i]}, {got})")
                _use(gen, got)
                _use(gen, self.acc[i])
        gen._emit(idx, "pass")

    def _outputs(self) -> None:
        """Bind X@GRAD: the carried gradient, or the summed one (zeros when none)."""
        gen, idx = self.gen, self.idx
        for i, (x, dname) in enumerate(zip(self.xs, self.dxs)):
            if dname == names.EMPTY_VAR_NAME:
                continue
            if i not in self.acc:
                gen.local[dname] = self.carry[self.carried_from[i]]
            else:
                acc = self.acc[i]
                var = gen._var(x)
                loc = gen._new_local()
                if var is not None and var.type == VarType.LOD_TENSOR_ARRAY:
                    gen._emit(idx, f"{loc} = {acc} if {acc} is not None else []")
                else:
                    fwd = _bind_outer(gen, x, self.op)
                    gen._emit(idx, f"{loc} = {acc} if {acc} is not None else "
                                   f"np.zeros_like({fwd})")
                    if fwd != "None":
                        _use(gen, fwd)
                _use(gen, acc)
                gen.local[dname] = loc
            gen.last_use.setdefault(gen.local[dname], len(gen.body) - 1)
