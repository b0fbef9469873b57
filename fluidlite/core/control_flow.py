"""What the IR knows about ops that own sub-blocks (``while``, ``conditional_block`` and their
``*_grad`` ops): which blocks they own, which outer variables their blocks read and write, and
the SSA versions of the variables inside one run of a block (used by the backward pass and the
executor to keep the value each op of one iteration saw).

A *sub-block op* names its block in a Block-valued attribute (``sub_block``); the block's
``parent_idx`` is the block holding the op. Variables declared in a block live for one run of
it (one loop iteration); variables declared in an ancestor are *outer* variables.

SSA versions. Inside one run of a block, the first write of a variable declared in the block
keeps its name; every later write, and every write of an outer variable, makes a new version
``<name>@SSA@<op position>``. Reads see the latest version. So the value an outer variable had
when the iteration started is ``<name>`` and its value at the end is the last version. Tensor
arrays are never versioned (they are updated position by position; their gradients are
position-wise too).
"""
from __future__ import annotations

import abc
import contextlib
from typing import Any, Dict, Iterator, List, Optional, Sequence, Set, Tuple

from . import atomic, names
from .dtypes import VarType

SSA_TAG = "@SSA@"
GRAD_BLOCK_OPS = frozenset({"while_grad", "conditional_block_grad"})
BLOCK_OPS = frozenset({"while", "conditional_block"}) | GRAD_BLOCK_OPS


def sub_blocks(op: Any) -> List[Any]:
    """The blocks an op refers to in its attributes (``sub_block``, lists of blocks)."""
    from .ir import Block
    out = []
    for value in op.attrs.values():
        for b in value if isinstance(value, list) else [value]:
            if isinstance(b, Block) and b not in out:
                out.append(b)
    return out


def walk_ops(block: Any) -> Iterator[Any]:
    """Every op of ``block`` and, depth first, of the blocks its ops own."""
    for op in block.ops:
        yield op
        for sub in sub_blocks(op):
            if sub is not block:
                yield from walk_ops(sub)


def is_descendant(block: Any, ancestor: Any) -> bool:
    """``block`` is ``ancestor`` or nested in it."""
    prog = block.program
    while block is not None:
        if block is ancestor:
            return True
        block = prog.blocks[block.parent_idx] if block.parent_idx >= 0 else None
    return False


def outer_reads_writes(block: Any) -> Tuple[List[str], List[str]]:
    """(outer variables read, outer variables written) by ``block`` and its nested blocks, in
    first-use order: the ``X`` / ``Out`` lists of the op owning the block."""
    reads: Dict[str, None] = {}
    writes: Dict[str, None] = {}
    for op in walk_ops(block):
        for n in op.input_arg_names:
            if _is_outer(block, n):
                reads.setdefault(n)
        for n in op.output_arg_names:
            if _is_outer(block, n):
                writes.setdefault(n)
    return list(reads), list(writes)


def _is_outer(block: Any, name: str) -> bool:
    if name == names.EMPTY_VAR_NAME:
        return False
    var = block._find_var_recursive(name)
    if var is None:
        # declared in a nested block only: local to it
        return False
    return not is_descendant(var.block, block)


def is_array(block: Any, name: str) -> bool:
    var = block._find_var_recursive(name)
    return var is not None and var.type == VarType.LOD_TENSOR_ARRAY


class Versions:
    """SSA versions of one run of ``block`` (see the module docstring).

    ``ins[k]`` / ``outs[k]`` map each input / output name of op ``k`` to the version it reads /
    writes; ``final`` maps each written name to its last version; ``base`` maps a version back
    to its variable.
    """

    def __init__(self, block: Any) -> None:
        self.block = block
        self.ins: List[Dict[str, str]] = []
        self.outs: List[Dict[str, str]] = []
        self.base: Dict[str, str] = {}
        cur: Dict[str, str] = {}
        written: Set[str] = set()
        for k, op in enumerate(block.ops):
            self.ins.append({n: cur.get(n, n) for n in op.input_arg_names})
            outs = {}
            for n in op.output_arg_names:
                if n == names.EMPTY_VAR_NAME or is_array(block, n):
                    outs[n] = n
                    continue
                if n in written or _is_outer(block, n):
                    v = f"{n}{SSA_TAG}{k}"
                    self.base[v] = n
                else:
                    v = n
                written.add(n)
                outs[n] = cur[n] = v
            self.outs.append(outs)
        self.final = dict(cur)

    def rename_op(self, k: int) -> Tuple[Dict[str, List[str]], Dict[str, List[str]]]:
        """Op ``k``'s slots with every name replaced by the version it reads / writes."""
        op = self.block.ops[k]
        ins = {s: [self.ins[k].get(n, n) for n in v] for s, v in op.inputs.items()}
        outs = {s: [self.outs[k].get(n, n) for n in v] for s, v in op.outputs.items()}
        return ins, outs


def base_name(name: str) -> str:
    """``h@SSA@3`` -> ``h`` (other names unchanged)."""
    pos = name.find(SSA_TAG)
    return name if pos < 0 else name[:pos]


# -- building a sub-block: fluid.layers' While / ConditionalBlock, and passes ---------------------
def has_value(block: Any, name: str) -> bool:
    """Whether an outer variable holds a value before the op owning ``block`` runs (written
    by an earlier op, fed, persistable, or an array)."""
    var = block._find_var_recursive(name)
    if var is None:
        return False
    if var.is_data or var.persistable or var.type == VarType.LOD_TENSOR_ARRAY:
        return True
    prog = block.program
    b = prog.blocks[block.parent_idx] if block.parent_idx >= 0 else None
    while b is not None:            # an op of an enclosing block wrote it before
        if any(name in op.output_arg_names for op in b.ops):
            return True
        b = prog.blocks[b.parent_idx] if b.parent_idx >= 0 else None
    return False


@contextlib.contextmanager
def in_parent(prog: Any) -> Iterator[None]:
    """Run with the parent of the current block as the current block (ops appended to the
    parent carry its role/name-scope context as usual)."""
    cur = prog.current_block_idx
    prog._rollback()
    try:
        yield
    finally:
        prog.current_block_idx = cur


class BlockBuild(abc.ABC):
    """``with ...:`` building a new sub-block as one build transaction: an error in the body (or
    in completing the op that owns the block) leaves the programs as they were before it,
    without the new block. Subclasses enter with ``_open(program)`` and complete their op in
    ``_complete`` (called with the parent block current)."""

    def _open(self, prog: Any) -> Any:
        from .ir import default_startup_program
        self.txn = atomic.atomic(prog, default_startup_program())
        self.txn.__enter__()
        self.block = prog._create_block()
        return self.block

    @abc.abstractmethod
    def _complete(self) -> None:
        """Complete the op owning ``self.block`` (the parent block is current)."""

    def __exit__(self, exc_type: Any, exc_val: Any, exc_tb: Any) -> bool:
        prog = self.block.program
        try:
            if exc_type is None:
                with in_parent(prog):
                    self._complete()
        except BaseException as e:
            self.txn.__exit__(type(e), e, e.__traceback__)
            raise
        finally:
            if prog.current_block_idx == self.block.idx:
                prog._rollback()
        self.txn.__exit__(exc_type, exc_val, exc_tb)
        return False


class Conditional(BlockBuild):
    """``with Conditional(conds):`` -- the ops appended inside (to the new current block) run
    only when ``conds[0]`` (a bool scalar) holds (``is_scalar_condition``), or else when every
    variable of ``conds`` is non-empty: a ``conditional_block`` op owning the block is appended
    to the enclosing block when the body ends, its ``Input`` / ``Out`` the outer variables the
    body reads / writes (a written variable that already had a value is an input too: it keeps
    that value when the block does not run). ``name`` (default: a fresh
    ``conditional_block_N``, generated here) names its ``<name>.scope_N`` variable;
    ``program``: the default main program when entered, unless given. This is what
    ``fluid.layers.ConditionalBlock`` builds; passes use it through ``rewrite.conditional``."""

    def __init__(self, conds: Sequence[Any], is_scalar_condition: bool = True,
                 name: Optional[str] = None, program: Any = None) -> None:
        self.conds = list(conds)
        self.is_scalar_condition = is_scalar_condition
        self.name = name if name is not None else names.generate("conditional_block")
        self.program = program

    def __enter__(self) -> Any:
        from .ir import default_main_program
        return self._open(self.program if self.program is not None else default_main_program())

    def _complete(self) -> None:
        block = self.block
        parent = block.program.block(block.parent_idx)
        reads, writes = outer_reads_writes(block)
        cond_names = [v.name for v in self.conds]
        ins = [n for n in reads + [w for w in writes if w not in reads and has_value(block, w)]
               if n not in cond_names]
        scope = parent.create_var(type=VarType.STEP_SCOPES,
                                  name=names.generate(f"{self.name}.scope"))
        parent.append_op(type="conditional_block",
                         inputs={"Cond": self.conds, "Input": ins},
                         outputs={"Out": writes, "Scope": [scope]},
                         attrs={"sub_block": block,
                                "is_scalar_condition": self.is_scalar_condition})
