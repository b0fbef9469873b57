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

from typing import Any, Dict, Iterator, List, Set, Tuple

from . import names
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


