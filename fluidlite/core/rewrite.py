"""The rewrite toolkit: the verbs every pass (backward, clip, regularizer, optimizer, ...) uses.

A pass never sets ``op_role`` by hand: it opens a ``role`` context and every op created inside
gets that role (and ``op_role_var``) at creation, plus the context's name scope::

    with rewrite.role(program, OpRole.Optimize, [param, clipped]), name_scope("gradient_clip"):
        rewrite.op(block, "clip", X=grad, out=clipped, min=-1.0, max=1.0)

Verbs (each mutation goes through a ``Block`` method, so ``program.version`` is bumped and the
result passes ``Program.lint()``):

* ``append`` / ``insert``: add an op (``Block.append_op`` / ``_insert_op``); ``op``: append an op
  writing a fresh temporary ``<type>_N.tmp_0`` (what a fluid layer would name it) and return it;
* ``tmp`` / ``tmp_name`` (a fresh temporary named as above), ``var_like`` (a variable shaped
  like another);
* ``global_var``: a persistable variable of the main program initialised in the startup program;
  ``step_counter``: one counting the main program's runs;
* ``conditional``: a sub-block whose ops run only when a bool scalar holds;
* ``Uses``: the producers and readers of every variable of a block (one index, built once);
* ``remove_ops`` / ``replace_op`` / ``set_role``;
* ``transaction``: a build transaction — the programs are restored exactly if the body raises.
"""
from __future__ import annotations

import contextlib
from typing import Any, Dict, Iterator, List, Optional, Sequence, Union

from . import names
from .atomic import atomic as transaction
from .control_flow import Conditional
from .dtypes import VarType
from .ir import Block, Operator, OpRole, Program, Variable

__all__ = ["role", "append", "insert", "op", "tmp", "tmp_name", "var_like", "global_var",
           "step_counter", "conditional", "Uses", "remove_ops", "replace_op", "set_role",
           "add_role_var", "transaction", "OpRole"]

_VarOrName = Union[Variable, str]


def _names(items: Sequence[Any]) -> List[str]:
    return [v.name if isinstance(v, Variable) else v for v in items if v is not None]


@contextlib.contextmanager
def role(program: Program, op_role: int, role_var: Sequence[_VarOrName] = (),
         name_scope: Optional[str] = None) -> Iterator[None]:
    """Every op created inside gets ``op_role`` and ``op_role_var`` (names of the given
    variables; fluid's ``[param, grad]`` pairs) and, with ``name_scope``, that scope."""
    with program._role_guard(op_role, _names(role_var)):
        if name_scope is None:
            yield
        else:
            with names.name_scope(name_scope):
                yield


def append(block: Block, type: str, inputs: Optional[Dict[str, Any]] = None,
           outputs: Optional[Dict[str, Any]] = None,
           attrs: Optional[Dict[str, Any]] = None) -> Operator:
    """Append an op (validated and shape-inferred by its ``OpDef``); returns it."""
    return block.append_op(type=type, inputs=inputs, outputs=outputs, attrs=attrs)


def insert(block: Block, index: int, type: str, inputs: Optional[Dict[str, Any]] = None,
           outputs: Optional[Dict[str, Any]] = None,
           attrs: Optional[Dict[str, Any]] = None) -> Operator:
    """Insert an op at ``index`` of ``block``; returns it."""
    return block._insert_op(index, type=type, inputs=inputs, outputs=outputs, attrs=attrs)


def tmp_name(op_type: str) -> str:
    """A fresh ``<op_type>_N.tmp_0`` name, as a fluid layer names the output of its op."""
    return names.generate(names.generate(op_type) + ".tmp")


def tmp(block: Block, op_type: str, dtype: Any, shape: Sequence[int] = (),
        name: Optional[str] = None) -> Variable:
    """A fresh non-persistable variable (named ``tmp_name(op_type)`` unless ``name`` is given,
    e.g. one reserved earlier so that ops before it can name it in their ``op_role_var``)."""
    return block.create_var(name=name or tmp_name(op_type), dtype=dtype, shape=shape,
                            type=VarType.LOD_TENSOR, persistable=False)


def op(block: Block, type: str, out: Optional[Variable] = None, dtype: Any = None,
       attrs: Optional[Dict[str, Any]] = None, **inputs: Any) -> Variable:
    """Append ``type`` reading ``inputs`` (slot=Variable or list) and writing its ``Out`` slot
    into ``out`` (default: a fresh ``tmp``, of ``dtype`` or the first input's dtype); returns
    the output variable, shaped by the op's inference."""
    if out is None:
        if dtype is None:
            first = next(iter(inputs.values()), None)
            first = first[0] if isinstance(first, (list, tuple)) else first
            if first is None:
                raise ValueError(f"rewrite.op('{type}'): an op without inputs needs a dtype")
            dtype = first.dtype
        out = tmp(block, type, dtype)
    block.append_op(type=type, inputs=inputs, outputs={"Out": out}, attrs=attrs or {})
    return out


def var_like(block: Block, name: str, like: Optional[Variable]) -> Variable:
    """The variable ``name`` of ``block``, created with ``like``'s shape/dtype/lod_level when it
    does not exist yet (untyped when ``like`` is None)."""
    v = block.vars.get(name)
    if v is not None:
        return v
    if like is None:
        return block.create_var(name=name)
    return block.create_var(name=name, shape=like.shape, dtype=like.dtype,
                            lod_level=like.lod_level)


def global_var(main: Program, startup: Program, name: str, shape: Sequence[int], value: float,
               dtype: Any, persistable: bool = True, **flags: Any) -> Variable:
    """A global variable of ``main`` initialised to ``value`` by a ``fill_constant`` prepended
    to ``startup`` (fluid's ``layers.create_global_var``; fluid prepends every initializer). The
    init op is a startup op: Forward role, whatever context the caller is in."""
    var = main.global_block().create_var(name=name, shape=list(shape), dtype=dtype,
                                         persistable=persistable, stop_gradient=True, **flags)
    sblock = startup.global_block()
    svar = sblock.create_var(name=name, shape=list(shape), dtype=dtype,
                             persistable=persistable, **flags)
    with startup._role_guard(OpRole.Forward):
        sblock._prepend_op(type="fill_constant", outputs={"Out": svar},
                           attrs={"shape": list(shape), "dtype": svar.dtype,
                                  "value": float(value), "force_cpu": True})
    return var


def step_counter(main: Program, startup: Program, name: str, begin: int = 1,
                 step: int = 1) -> Variable:
    """A persistable int64 [1] counter of ``main``'s runs (fluid's
    ``layers.autoincreased_step_counter``): initialised to ``begin - 1`` in ``startup``, with an
    ``increment`` by ``step`` *prepended* to ``main``'s block 0 (in the caller's role context),
    so the first run sees ``begin - 1 + step`` (``begin`` with the default step 1). When
    ``main`` already has a variable ``name`` it is returned and nothing is added (one counter,
    one increment per name and program)."""
    block = main.global_block()
    if block.has_var(name):
        return block.var(name)
    counter = global_var(main, startup, name, [1], begin - 1, "int64")
    insert(block, 0, "increment", {"X": [counter]}, {"Out": [counter]}, {"step": float(step)})
    return counter


def conditional(cond: Variable, program: Optional[Program] = None) -> Conditional:
    """``with rewrite.conditional(cond):`` -- the ops appended inside, to the new current block
    of ``program`` (default: the default main program when entered), run only when ``cond`` (a
    bool scalar) holds; the ``conditional_block`` op owning them is appended to the enclosing
    block at the end of the body, listing the outer variables they read and write. One build
    transaction. The op's ``conditional_block_N`` name is taken when this is called: create it
    where fluid's ``ConditionalBlock`` would be (``core/control_flow.py``, ``Conditional``)."""
    return Conditional([cond], True, None, program)


class Uses:
    """Producers and readers of every variable of a block (or of a list of ops): positions
    into that op list, built in one pass. Stale after the ops change: build a new one."""

    def __init__(self, ops: Union[Block, Sequence[Operator]]) -> None:
        self.ops = list(ops.ops if isinstance(ops, Block) else ops)
        self.producers: Dict[str, List[int]] = {}
        self.readers: Dict[str, List[int]] = {}
        for i, o in enumerate(self.ops):
            for n in dict.fromkeys(o.input_arg_names):       # an op reading n twice: once
                self.readers.setdefault(n, []).append(i)
            for n in o.output_arg_names:
                self.producers.setdefault(n, []).append(i)

    def first_producer(self, name: str) -> Optional[Operator]:
        """The first op writing ``name`` (None if nothing writes it)."""
        found = self.producers.get(name)
        return self.ops[found[0]] if found else None

    def producer(self, name: str) -> Optional[int]:
        """Position of the last op writing ``name`` (None if nothing writes it)."""
        found = self.producers.get(name)
        return found[-1] if found else None

    def reader_count(self, name: str) -> int:
        """How many ops read ``name``."""
        return len(self.readers.get(name, ()))


def remove_ops(block: Block, start: int, end: Optional[int] = None) -> None:
    """Remove ``block.ops[start:end]`` (one op when ``end`` is None)."""
    block._remove_op(start, end)


def replace_op(block: Block, old: Operator, type: str, inputs: Optional[Dict[str, Any]] = None,
               outputs: Optional[Dict[str, Any]] = None,
               attrs: Optional[Dict[str, Any]] = None) -> Operator:
    """Put a new op where ``old`` was (the new op takes the current role context)."""
    index = old.idx
    new = block._insert_op(index, type=type, inputs=inputs, outputs=outputs, attrs=attrs)
    block._remove_op(index + 1)
    return new


def set_role(op_: Operator, op_role: int) -> None:
    """Mark an existing op (e.g. the loss op gets Forward|Loss when backward starts from it)."""
    op_._set_attr("op_role", int(op_role))


def add_role_var(op_: Operator, role_var: Sequence[_VarOrName]) -> None:
    """Prepend ``role_var`` (e.g. ``[param, grad]``) to an existing op's ``op_role_var``."""
    op_._set_attr("op_role_var", _names(role_var) + list(op_.attrs.get("op_role_var") or []))
