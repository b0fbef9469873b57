"""Which inputs hold an op's output rows along an axis: the table ``slice_pushdown_pass`` reads.

For an op whose output ``out`` (its *row output*), cut along ``axis`` by a ``slice``, is the
same op run on some of its inputs cut along axes of theirs -- ``slice(op(X), a) ==
op(slice(X, b))`` -- ``row_inputs`` names those inputs and axes. A row-wise op (an ``fc`` over
the trailing dims, a ``layer_norm`` over later axes, an activation, a residual add, a
``reshape2`` / ``transpose2`` that keeps the axis apart, an attention's query rows) can then
compute only the rows the slice keeps. Every rule is stated on declared shapes and attrs; an
op not in the table, or a case a rule cannot decide (a free dim that might broadcast), gives
None and the slice stays where it is.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Tuple

from ..core.ir import Block, Operator

__all__ = ["ROW_RULES", "row_output", "row_inputs"]

Rule = Callable[[Operator, Block, int], Optional[Dict[str, int]]]


def _shape(block: Block, op: Operator, slot: str) -> Optional[Tuple[int, ...]]:
    names = op.input(slot) if slot in op.input_names else []
    if len(names) != 1 or names[0] not in block.vars:
        return None
    return tuple(block.var(names[0]).shape)


def _elementwise_x(op: Operator, block: Block, axis: int) -> Optional[Dict[str, int]]:
    """X -> Out of X's shape, element by element."""
    x = _shape(block, op, "X")
    return {"X": axis} if x is not None and axis < len(x) else None


def _binary(op: Operator, block: Block, axis: int) -> Optional[Dict[str, int]]:
    """fluid's elementwise ops: Y's dims line up with X's from ``axis`` (its trailing dims
    when -1). An operand is cut where its size is Out's, left whole where it broadcasts (size
    1 under a larger Out, or not covering the axis); a free size might be either: undecided."""
    x, y = _shape(block, op, "X"), _shape(block, op, "Y")
    outs = op.output("Out")
    if x is None or y is None or len(outs) != 1 or axis >= len(x) or len(y) > len(x):
        return None
    size = block.var(outs[0]).shape[axis] if outs[0] in block.vars else -1
    if size <= 0:
        return None
    start = op.attrs.get("axis", -1)
    start = len(x) - len(y) if start == -1 else start
    cut: Dict[str, int] = {}
    for slot, dims, j in (("X", x, axis), ("Y", y, axis - start)):
        if not 0 <= j < len(dims) or (dims[j] == 1 and size != 1):
            continue                            # broadcast over the axis: read whole
        if dims[j] != size:
            return None
        cut[slot] = j
    return cut


def _layer_norm(op: Operator, block: Block, axis: int) -> Optional[Dict[str, int]]:
    """Rows are normalised over the axes from ``begin_norm_axis``: cut before them."""
    return {"X": axis} if axis < op.attrs.get("begin_norm_axis", 1) else None


def _fc(op: Operator, block: Block, axis: int) -> Optional[Dict[str, int]]:
    """Out's leading ``in_num_col_dims`` axes are Input's; its last one is W's columns."""
    return {"Input": axis} if axis < op.attrs.get("in_num_col_dims", 1) else None


def _fused_fc_ln(op: Operator, block: Block, axis: int) -> Optional[Dict[str, int]]:
    """fc's leading axes, normalised after ``begin_norm_axis``; Y has Out's shape."""
    if axis < op.attrs.get("x_num_col_dims", 1) and axis < op.attrs.get("begin_norm_axis", 1):
        return {"X": axis, "Y": axis}
    return None


def _reshape2(op: Operator, block: Block, axis: int) -> Optional[Dict[str, int]]:
    """A ``shape`` attr copying the dims up to ``axis`` (0 entries: Paddle's "keep this dim")
    keeps the axis and everything before it: the dims after it are regrouped among
    themselves. A run-time shape (Shape / ShapeTensor inputs) is never read here."""
    if op.input("Shape") or op.input("ShapeTensor"):
        return None
    shape = list(op.attrs.get("shape", ()))
    x = _shape(block, op, "X")
    if x is None or axis >= len(x) or len(shape) <= axis or any(s != 0 for s in
                                                                 shape[:axis + 1]):
        return None
    return {"X": axis}


def _transpose2(op: Operator, block: Block, axis: int) -> Optional[Dict[str, int]]:
    """Out's axis ``a`` is X's axis ``perm[a]``."""
    perm = list(op.attrs.get("axis", ()))
    return {"X": int(perm[axis]) % len(perm)} if axis < len(perm) else None


def _attention(op: Operator, block: Block, axis: int) -> Optional[Dict[str, int]]:
    """Out [..., Lq, Dv]: its query rows are Q's rows (each attends over all of K and V); a
    Mask is left whole when it broadcasts over the queries (size 1, or not covering them)."""
    q = _shape(block, op, "Q")
    if q is None or axis != len(q) - 2:
        return None
    m = _shape(block, op, "Mask")
    if m is not None:
        j = axis - (len(q) - len(m))
        if 0 <= j and m[j] != 1:
            return None
    return {"Q": axis}


_UNARY = ("abs", "cast", "elu", "exp", "gelu", "hard_sigmoid", "hard_swish", "leaky_relu",
          "log", "relu", "relu6", "scale", "sigmoid", "softplus", "softsign", "sqrt", "square",
          "swish", "tanh")
ROW_RULES: Dict[str, Rule] = dict(
    {t: _elementwise_x for t in _UNARY},
    elementwise_add=_binary, elementwise_sub=_binary, elementwise_mul=_binary,
    elementwise_div=_binary, layer_norm=_layer_norm, fc=_fc,
    fused_fc_elementwise_layernorm=_fused_fc_ln, reshape2=_reshape2, transpose2=_transpose2,
    scaled_dot_product_attention=_attention)
# the output slot holding the rows (others must be unread for the op to be cut)
_ROW_OUTPUT = {"layer_norm": "Y"}


def row_output(op: Operator) -> str:
    """The slot of ``op``'s output that ``row_inputs`` speaks of."""
    return _ROW_OUTPUT.get(op.type, "Out")


def row_inputs(op: Operator, block: Block, axis: int) -> Optional[Dict[str, Any]]:
    """``{input slot: axis}``: the inputs of ``op`` to cut along those axes so that it makes
    its row output cut along ``axis`` (slots not named are read whole); None when ``op`` is
    not row-wise along ``axis`` (or its rule cannot tell from the declared shapes).

    Args:
        op: the op that writes the variable a ``slice`` cuts.
        block: its block (for the inputs' declared shapes).
        axis: the cut axis of its row output (non-negative).

    Example:
        >>> row_inputs(fc_op, block, 1)      # an fc with in_num_col_dims 2
        {'Input': 1}
    """
    rule = ROW_RULES.get(op.type)
    return None if rule is None else rule(op, block, axis)
