"""ONNX export of control flow (``fluidlite.onnx``): ``conditional_block`` -> ``If``,
``while`` -> ``Loop``.

fluid programs are not in SSA form: a sub-block assigns its results to variables of the
enclosing block (``cond`` writes its output from both branches, a ``while`` body overwrites its
loop variables), whereas every ONNX value is produced exactly once, model-wide. So ops are
converted through a renaming layer: ``env`` maps each fluid variable to the ONNX value holding
its current version, and converters see a view of the op whose input names are those versions
and whose output names are fresh when the variable is written more than once. Variables written
once keep their own names (graphs without control flow come out exactly as before); a fetched
variable written more than once gets an ``Identity`` to its own name at the end.

* A ``cond`` pair -- ``conditional_block(Cond=p)``, ``logical_not(p)``,
  ``conditional_block(Cond=not p)`` writing the same variables, as ``cond``, ``case`` and
  ``switch_case`` build it -- becomes one ``If(p)`` whose then/else subgraphs are the two blocks.
  Any other (scalar-condition) ``conditional_block`` becomes ``If`` whose else branch passes the
  variables' previous values through. Nested blocks become nested subgraphs; a subgraph refers
  to outer values by name.
* ``while`` becomes ``Loop`` with an empty trip count and the ``Condition`` as its cond input.
  The loop-carried values are the outer variables the body writes that have a value before the
  loop and that the next iteration (read before written in the body) or the ops after the loop
  read, the condition among them; the body outputs the new condition and the new values. The
  body's other writes are its own temporaries.
* Tensor arrays become ONNX sequences: an array starts as ``SequenceEmpty`` where it is first
  needed; ``write_to_array`` appends (index = length) or replaces (index inside) the entry,
  ``read_from_array`` is ``SequenceAt``, ``lod_array_length`` ``SequenceLength``,
  ``tensor_array_to_tensor`` ``ConcatFromSequence`` (its ``OutIndex`` is not exported). So
  ``StaticRNN`` exports.
* LoD arrays (``lod_tensor_to_array`` and friends, ``DynamicRNN``), ``conditional_block`` without
  a scalar condition (``IfElse``: runs when its inputs are non-empty) and
  ``split/merge_lod_tensor`` are refused with a reason by ``_problem``.
"""
from __future__ import annotations

from typing import Any, Dict, Iterator, List, Optional, Sequence, Set, Tuple

import numpy as np

from ..core import control_flow as cf
from ..core import names
from ..core.dtypes import VarType, to_numpy_dtype
from ..core.ir import OpArgs
from .common import _ONNX_DTYPE, OnnxExportError, _conv, _Ctx, _onnx, _out, _x

BLOCK_OPS = ("while", "conditional_block")
# tensor arrays become ONNX sequences (converted by convert_ops: they need the renaming state)
_ARRAY_OPS = ("write_to_array", "read_from_array", "lod_array_length", "tensor_array_to_tensor")
_REFUSED_ARRAY_OPS = ("array_to_lod_tensor", "lod_tensor_to_array", "sum_tensor_array",
                      "clear_tensor_array_entry", "reorder_lod_tensor_by_rank")


def owns_block(op: Any) -> bool:
    return op.type in BLOCK_OPS and op.attrs.get("sub_block") is not None


def block_reads(op: Any) -> Set[str]:
    """What a sub-block op needs: its own inputs, everything its block reads from outside, and
    the previous values of what it writes (kept when the block does not run)."""
    reads, writes = cf.outer_reads_writes(op.attrs["sub_block"])
    return (set(op.input_arg_names) | set(reads) | set(writes)) - {names.EMPTY_VAR_NAME}


def walk(ops: Sequence[Any]) -> Iterator[Any]:
    """``ops`` and, depth first, every op of the blocks they own (all of a block is exported)."""
    for op in ops:
        yield op
        if owns_block(op):
            yield from walk(op.attrs["sub_block"].ops)


def problem(op: Any) -> Optional[str]:
    """Why a control-flow op (or an op only control flow uses) cannot be exported, or None."""
    if op.type in _REFUSED_ARRAY_OPS:
        return "LoD tensor arrays (and array gradients) are not exported to ONNX"
    if op.type == "tensor_array_to_tensor" and op.output("OutIndex") and any(
            n in _readers(op.block) for n in op.output("OutIndex")):
        return "its OutIndex output is not exported (only Out)"
    if op.type in ("split_lod_tensor", "merge_lod_tensor"):
        return "IfElse's row-wise split/merge is not exported to ONNX"
    if op.type not in BLOCK_OPS:
        return None
    if op.attrs.get("sub_block") is None:
        return "no sub_block attribute"
    if op.type == "while":
        if len(op.input("Condition")) != 1:
            return f"needs exactly one Condition variable, got {op.input('Condition')}"
        return None
    if not op.attr("is_scalar_condition"):
        return ("a condition that is not a scalar (the block runs when its inputs are "
                "non-empty, as IfElse builds it) is not exported")
    if len(op.input("Cond")) != 1:
        return f"needs exactly one Cond variable, got {op.input('Cond')}"
    return None


@_conv("increment")
def _increment(c: _Ctx, op: Any) -> None:
    x = _x(op, "X")
    c.node("Add", [x, c.const(op.attr("step"), c.np_dtype(x))], [_out(op)])


def _readers(block: Any) -> Set[str]:
    """Every variable some op of ``block`` (or of a block nested in it) reads."""
    return {n for op in cf.walk_ops(block) for n in op.input_arg_names}


@_conv("fill_constant_batch_size_like")
def _fill_batch_like(c: _Ctx, op: Any) -> None:
    """``Out``: ``shape`` with dim ``output_dim_idx`` taken from ``Input``'s dim
    ``input_dim_idx``, filled with ``value`` (StaticRNN's memory initialisation)."""
    onnx = _onnx()
    shape = [int(d) for d in op.attr("shape")]
    o, i = int(op.attr("output_dim_idx")), int(op.attr("input_dim_idx"))
    dim = c.node("Gather", [c.node("Shape", [_x(op, "Input")]), c.ints([i])], axis=0)
    parts = ([c.ints(shape[:o])] if o else []) + [dim] + \
        ([c.ints(shape[o + 1:])] if o + 1 < len(shape) else [])
    dt = to_numpy_dtype(VarType(int(op.attr("dtype"))))
    value = onnx.numpy_helper.from_array(np.full([1], op.attr("value"), dt))
    c.node("ConstantOfShape", [c.node("Concat", parts, axis=0)], [_out(op)], value=value)


@_conv("reverse")
def _reverse(c: _Ctx, op: Any) -> None:
    """``Out`` = ``X`` reversed along each axis of ``axis`` (``rnn(is_reverse=True)`` uses it):
    a ``Slice`` with step -1."""
    axes = [int(a) for a in op.attr("axis")]
    n = len(axes)
    c.node("Slice", [_x(op, "X"), c.ints([-1] * n), c.ints([-(2 ** 63)] * n), c.ints(axes),
                     c.ints([-1] * n)], [_out(op)])


@_conv("sequence_mask")
def _sequence_mask(c: _Ctx, op: Any) -> None:
    """``Y[..., j] = j < X[...]`` for ``j < maxlen`` (``maxlen < 0``: ``max(X)``), as
    ``out_dtype`` (``rnn(sequence_length=...)`` masks its steps with it)."""
    x = c.node("Cast", [_x(op, "X")], to=7)
    maxlen = int(op.attr("maxlen"))
    top = c.const(np.int64(maxlen)) if maxlen >= 0 else \
        c.node("ReduceMax", [x], keepdims=0)
    steps = c.node("Range", [c.const(np.int64(0)), top, c.const(np.int64(1))])
    less = c.node("Less", [steps, c.node("Unsqueeze", [x, c.ints([-1])])])
    c.node("Cast", [less], [_out(op, "Y")], to=_ONNX_DTYPE[VarType(int(op.attr("out_dtype")))])


@_conv(*BLOCK_OPS, *_ARRAY_OPS)
def _block_op(c: _Ctx, op: Any) -> None:
    # converted by ``convert_ops`` (they need the renaming state); registered so that
    # ``supported_ops`` lists them and ``_problem`` lets them through
    raise OnnxExportError(f"'{op.type}' is converted by fluidlite.onnx.control.convert_ops")


# -- renaming ---------------------------------------------------------------------------------
class _BlockView:
    """What ``op.block`` is to a converter: variable lookup through the renaming."""

    def __init__(self, c: _Ctx, block: Any) -> None:
        self._c, self.idx = c, block.idx

    def _find_var_recursive(self, name: str) -> Any:
        return self._c.var(name)


class _OpView(OpArgs):
    """An op with its input names replaced by current versions and its output names by the
    names chosen for the values it writes."""

    def __init__(self, op: Any, ins: Dict[str, List[str]], outs: Dict[str, List[str]],
                 block: _BlockView) -> None:
        self._op, self.inputs, self.outputs, self.block = op, ins, outs, block
        self.type, self.attrs = op.type, op.attrs

    def input(self, slot: str) -> List[str]:
        return self.inputs.get(slot, [])

    def output(self, slot: str) -> List[str]:
        return self.outputs.get(slot, [])

    def attr(self, name: str) -> Any:
        return self._op.attr(name)


class _State:
    """The renaming state of one graph (the main graph or a subgraph)."""

    def __init__(self, env: Dict[str, str], fresh: Set[str], top: bool) -> None:
        self.env = env          # fluid name -> ONNX name of its current version
        self.fresh = fresh      # fluid names whose every write gets a fresh ONNX name
        self.top = top


def _new_name(c: _Ctx, st: _State, fluid_name: str, block: Any) -> str:
    taken = c.taken
    local = fluid_name in block.vars     # declared in the block being converted
    if fluid_name in st.fresh or fluid_name in taken or (not st.top and not local):
        onnx_name = c.tmp(fluid_name)
    else:
        onnx_name = fluid_name
    taken.add(onnx_name)
    c.alias[onnx_name] = fluid_name
    return onnx_name


def _cur(st: _State, name: str) -> str:
    return st.env.get(name, name)


def _convert_plain(c: _Ctx, st: _State, op: Any, convert_one: Any) -> None:
    ins = {s: [_cur(st, n) for n in v] for s, v in op.inputs.items()}
    outs = {s: [n if n == names.EMPTY_VAR_NAME else _new_name(c, st, n, op.block) for n in v]
            for s, v in op.outputs.items()}
    start = len(c.nodes)
    convert_one(c, _OpView(op, ins, outs, _BlockView(c, op.block)))
    made = {o for n in c.nodes[start:] for o in n.output}
    for s, v in op.outputs.items():
        for fluid_name, onnx_name in zip(v, outs[s]):
            # an output the converter does not produce (batch_norm's moving statistics)
            # keeps its previous value
            if onnx_name in made:
                st.env[fluid_name] = onnx_name


def _vinfo(c: _Ctx, onnx_name: str, fluid_name: str) -> Any:
    onnx = _onnx()
    var = c.var(fluid_name)
    elem = _ONNX_DTYPE[VarType(int(var.dtype))]
    if var.type == VarType.LOD_TENSOR_ARRAY:
        return onnx.helper.make_tensor_sequence_value_info(onnx_name, elem, None)
    return onnx.helper.make_tensor_value_info(onnx_name, elem, None)


_ITER, _COND = "\0iter", "\0cond"     # fluid-name markers of a Loop body's first two inputs


def _subgraph(c: _Ctx, st: _State, block: Any, inputs: List[Tuple[str, str]],
              results: List[str], convert_one: Any, label: str,
              ops: Optional[Sequence[Any]] = None) -> Tuple[Any, Dict[str, str]]:
    """Convert ``block`` into a subgraph: ``inputs`` are (ONNX name, fluid name) pairs bound
    as the graph's inputs, ``results`` the fluid variables whose final versions are the graph's
    outputs (through Identity); ``ops``: the ops to convert (``block.ops`` when None)."""
    onnx = _onnx()
    saved_nodes, saved_block = c.nodes, c.block
    c.nodes, c.block = [], block
    sub = _State(dict(st.env), st.fresh, top=False)
    for onnx_name, fluid_name in inputs:
        sub.env[fluid_name] = onnx_name
    try:
        convert_ops(c, block.ops if ops is None else ops, convert_one, sub, set(results))
        outs = []
        for name in results:
            src = _cur(sub, name)
            dst = c.tmp(name)
            c.alias[dst] = name
            c.node("Identity", [src], [dst])
            outs.append(_vinfo(c, dst, name))
        nodes = c.nodes
    finally:
        c.nodes, c.block = saved_nodes, saved_block
    ins = [onnx.helper.make_tensor_value_info(n, 7, []) if f == _ITER else
           onnx.helper.make_tensor_value_info(n, 9, None) if f == _COND else
           _vinfo(c, n, f) for n, f in inputs]
    graph = onnx.helper.make_graph(nodes, c.tmp(label), ins, outs)
    return graph, sub.env


def _is_array(c: _Ctx, name: str) -> bool:
    var = c.var(name)
    return var is not None and var.type == VarType.LOD_TENSOR_ARRAY


def _has_value(c: _Ctx, st: _State, name: str) -> bool:
    if name in st.env or name in c.feeds or _is_array(c, name):    # arrays start empty
        return True
    var = c.var(name)
    return var is not None and bool(var.persistable)


def _value(c: _Ctx, st: _State, name: str) -> str:
    """The current version of ``name``; a tensor array not written yet is an empty sequence
    (``SequenceEmpty``, created where it is first needed)."""
    if name not in st.env and _is_array(c, name):
        st.env[name] = c.node("SequenceEmpty", [], [_new_name(c, st, name, c.block)],
                              dtype=_ONNX_DTYPE[VarType(int(c.var(name).dtype))])
    return _cur(st, name)


def _index(c: _Ctx, st: _State, op: Any) -> str:
    """An array op's ``I`` (int64 of one element) as the scalar the sequence ops take."""
    return c.node("Reshape", [_cur(st, op.input("I")[0]), c.ints([])])


def _convert_array(c: _Ctx, st: _State, op: Any) -> None:
    """``write_to_array`` / ``read_from_array`` / ``lod_array_length`` /
    ``tensor_array_to_tensor`` on ONNX sequences. A write at ``len`` appends; a write inside
    the array replaces the entry (``SequenceErase`` + ``SequenceInsert`` under an ``If``); a
    write past the end (leaving a gap) fails in onnxruntime."""
    onnx = _onnx()
    arr_in = op.input("X")[0] if op.type != "write_to_array" else op.output("Out")[0]
    seq = _value(c, st, arr_in)
    if op.type == "read_from_array":
        out = op.output("Out")[0]
        st.env[out] = c.node("SequenceAt", [seq, _index(c, st, op)],
                             [_new_name(c, st, out, op.block)])
    elif op.type == "lod_array_length":
        out = op.output("Out")[0]
        n = c.node("SequenceLength", [seq])
        st.env[out] = c.node("Reshape", [n, c.ints([1])], [_new_name(c, st, out, op.block)])
    elif op.type == "tensor_array_to_tensor":
        out = op.output("Out")[0]
        st.env[out] = c.node("ConcatFromSequence", [seq], [_new_name(c, st, out, op.block)],
                             axis=int(op.attr("axis")),
                             new_axis=int(bool(op.attr("use_stack"))))
    else:
        out = op.output("Out")[0]
        x, i = _cur(st, op.input("X")[0]), _index(c, st, op)
        inside = c.node("Less", [i, c.node("SequenceLength", [seq])])
        saved = c.nodes
        branches = []
        for label in ("replace", "append"):
            c.nodes = []
            if label == "replace":
                res = c.node("SequenceInsert", [c.node("SequenceErase", [seq, i]), x, i])
            else:
                res = c.node("SequenceInsert", [seq, x])
            c.node("Identity", [res], [c.tmp(label)])
            branches.append(onnx.helper.make_graph(
                c.nodes, c.tmp(label + "_graph"), [],
                [_vinfo(c, c.nodes[-1].output[0], out)]))
        c.nodes = saved
        st.env[out] = c.node("If", [inside], [_new_name(c, st, out, op.block)],
                             then_branch=branches[0], else_branch=branches[1])


def _written(op: Any) -> List[str]:
    """The outer variables a sub-block op writes: its ``Out`` and what its block assigns."""
    _, writes = cf.outer_reads_writes(op.attrs["sub_block"])
    out = list(dict.fromkeys(list(op.output("Out")) + writes))
    return [n for n in out if n != names.EMPTY_VAR_NAME]


def _convert_if(c: _Ctx, st: _State, op: Any, other: Optional[Any], convert_one: Any) -> None:
    written = _written(op) if other is None else \
        list(dict.fromkeys(_written(op) + _written(other)))
    # a variable only one branch writes keeps its previous value in the other one
    both = set(_written(op)) & set(_written(other)) if other is not None else set()
    missing = [n for n in written if n not in both and not _has_value(c, st, n)]
    if missing:
        raise OnnxExportError(
            f"conditional_block (block {op.attrs['sub_block'].idx}) writes {missing}, "
            f"which have no value when the block does not run; ONNX If needs one in both "
            f"branches (build the branches with fluid.layers.cond)")
    then_g, _ = _subgraph(c, st, op.attrs["sub_block"], [], written, convert_one, "then")
    if other is not None:
        else_g, _ = _subgraph(c, st, other.attrs["sub_block"], [], written, convert_one,
                              "else")
    else:                   # the block did not run: the variables keep their values
        else_g, _ = _subgraph(c, st, op.block, [], written, convert_one, "else", ops=[])
    outs = [_new_name(c, st, n, op.block) for n in written]
    c.node("If", [_cur(st, op.input("Cond")[0])], outs, then_branch=then_g, else_branch=else_g)
    for n, o in zip(written, outs):
        st.env[n] = o


def _reads(op: Any) -> Set[str]:
    """What ``op`` reads (a block op: what its block needs; ``write_to_array``: its array)."""
    if owns_block(op):
        return block_reads(op)
    if op.type == "write_to_array":
        return set(op.input_arg_names) | set(op.output("Out"))
    return set(op.input_arg_names)


def _read_first(block: Any) -> Set[str]:
    """The variables some op of ``block`` reads before the block (surely) writes them: what
    an iteration reads from the one before."""
    defined: Set[str] = set()
    first: Set[str] = set()
    for op in block.ops:
        first |= _reads(op) - defined
        if not owns_block(op):      # a block need not run: its writes are not sure
            defined |= set(op.output_arg_names)
    return first


def _convert_while(c: _Ctx, st: _State, op: Any, convert_one: Any, after: Set[str]) -> None:
    block = op.attrs["sub_block"]
    cond = op.input("Condition")[0]
    written = _written(op)
    if cond not in written:
        raise OnnxExportError(f"while (block {block.idx}): the loop body never updates the "
                              f"condition '{cond}'")
    # carried: what the next iteration or the ops after the loop read (with a value before
    # the loop); the body's other writes are its own temporaries
    first = _read_first(block)
    carried = [n for n in written if _has_value(c, st, n) and
               (n == cond or n in first or n in after)]
    iter_name, cond_name = c.tmp("iter"), c.tmp("cond_in")
    body_ins = [(iter_name, _ITER), (cond_name, _COND)]
    for n in carried:
        inner = c.tmp(n)
        c.alias[inner] = n
        body_ins.append((inner, n))
    results = [cond] + carried
    body, _ = _subgraph(c, st, block, body_ins, results, convert_one, "body")
    outs = [_new_name(c, st, n, op.block) for n in carried]
    c.node("Loop", ["", _cur(st, cond)] + [_value(c, st, n) for n in carried], outs, body=body)
    for n, o in zip(carried, outs):
        st.env[n] = o


def _pair_of(ops: Sequence[Any], i: int) -> Optional[int]:
    """The index of the else block of a ``cond`` pair starting at ``ops[i]``, or None."""
    a = ops[i]
    if i + 2 >= len(ops):
        return None
    neg, b = ops[i + 1], ops[i + 2]
    if neg.type != "logical_not" or b.type != "conditional_block" or not owns_block(b):
        return None
    if not (a.attr("is_scalar_condition") and b.attr("is_scalar_condition")):
        return None
    if neg.input("X") != a.input("Cond") or b.input("Cond") != neg.output("Out"):
        return None
    return i + 2


def convert_ops(c: _Ctx, ops: Sequence[Any], convert_one: Any,
                st: Optional[_State] = None, live: Optional[Set[str]] = None) -> _State:
    """Convert ``ops`` (in order) into ``c.nodes`` through the renaming state ``st`` (a new
    main-graph state when None); ``live``: the variables read after ``ops`` (the fetches or
    the subgraph's results; None: all of them)."""
    if st is None:
        counts: Dict[str, int] = {n: 1 for n in c.feeds}
        for op in ops:
            outs = _written(op) if owns_block(op) else op.output_arg_names
            for n in outs:
                counts[n] = counts.get(n, 0) + (2 if owns_block(op) else 1)
        st = _State({}, {n for n, k in counts.items() if k > 1}, top=True)
    ops = list(ops)
    # after[i]: the variables read after ops[i] (None: unknown, everything)
    after: List[Optional[Set[str]]] = [None] * len(ops)
    if live is not None:
        acc = set(live)
        for i in range(len(ops) - 1, -1, -1):
            after[i] = set(acc)
            acc |= _reads(ops[i])
    merged: Set[int] = set()
    for i, op in enumerate(ops):
        if i in merged or op.type in ("feed", "fetch"):
            continue
        if op.type == "while":
            everything = set(_written(op))
            _convert_while(c, st, op, convert_one, everything if after[i] is None else after[i])
        elif op.type == "conditional_block":
            j = _pair_of(ops, i)
            if j is not None:
                merged.add(j)
            _convert_if(c, st, op, ops[j] if j is not None else None, convert_one)
        elif op.type in _ARRAY_OPS:
            _convert_array(c, st, op)
        else:
            _convert_plain(c, st, op, convert_one)
    return st


def finish(c: _Ctx, st: _State, feed_names: Sequence[str], fetch_names: Sequence[str]) -> None:
    """Give each fetched variable written more than once its own name (an Identity of its
    final version)."""
    for name in fetch_names:
        cur = _cur(st, name)
        if cur == name:
            continue
        var = c.var(name)
        if name in feed_names or (var is not None and var.persistable):
            what = "a feed" if name in feed_names else "a persistable (an initializer)"
            raise OnnxExportError(
                f"fetch target '{name}' is also {what} that the program overwrites (a "
                f"while_loop loop variable?); ONNX inputs, initializers and outputs need "
                f"distinct names: fetch a copy (fluid.layers.assign) or pass a copy into the "
                f"loop")
        c.node("Identity", [cur], [name])


def graph_names(nodes: Sequence[Any]) -> Tuple[Set[str], Set[str]]:
    """(names read, names produced) by ``nodes`` and, recursively, their subgraphs (subgraph
    inputs count as produced): what is read and not produced must come from outside."""
    used: Set[str] = set()
    made: Set[str] = set()
    for n in nodes:
        used |= {i for i in n.input if i}
        made |= set(n.output)
        for a in n.attribute:
            for g in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                u, m = graph_names(g.node)
                used |= u
                made |= m | {v.name for v in g.input}
    return used, made
