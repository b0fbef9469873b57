"""``fluid.debugger``: Graphviz drawing of a block and text dumps of programs.

``draw_block_graphviz`` writes the DOT file (fluidlite's styling: roles, clusters, legend) and,
when Graphviz's ``dot`` is installed, renders ``<path without .dot>.pdf`` next to it (fluid
launched ``dot`` in the background; here it runs synchronously, without a shell). Node order is
deterministic (fluid shuffled it).
"""
from __future__ import annotations

import logging
import re
from typing import Optional, Sequence

from .core.ir import Block, Operator, Program, Variable
from .core.dtypes import VarType, convert_dtype
from .core.registry import COMMON_ATTRS
from .formats.serialize import atomic_write

__all__ = ["draw_block_graphviz", "pprint_program_codes", "pprint_block_codes", "repr_var",
           "repr_op"]

_log = logging.getLogger("fluidlite")


def draw_block_graphviz(block: Block, highlights: Optional[Sequence[str]] = None,
                        path: str = "./temp.dot") -> str:
    """Write the DOT graph of ``block`` to ``path``; ``highlights`` are regexes matched (with
    ``re.match``, as fluid) against variable names and op types and drawn in orange. Also
    renders a PDF next to it when ``dot`` is on PATH. Returns ``path``."""
    from .viz import dot as dot_mod
    from .viz.graph import to_networkx
    if not isinstance(block, Block):
        raise TypeError(f"draw_block_graphviz expects a Block (e.g. program.global_block()), "
                        f"got {type(block).__name__}")
    pats = [re.compile(h) for h in (highlights or [])]
    graph = to_networkx(block, highlight=lambda s: any(p.match(s) for p in pats),
                        title=f"block {block.idx}")
    text = dot_mod.to_dot(graph)
    atomic_write(path, text.encode("utf-8"))
    _log.info("write block debug graph to %s", path)
    if dot_mod.graphviz_available():
        pdf = (path[:-4] if path.endswith(".dot") else path) + ".pdf"
        try:
            atomic_write(pdf, dot_mod.render(text, "pdf"))
            _log.info("rendered %s", pdf)
        except RuntimeError as e:      # drawing is a debugging aid: never fail the caller here
            _log.warning("could not render %s: %s", pdf, e)
    return path


# -- text dumps -------------------------------------------------------------------------------
def repr_var(var: Variable) -> str:
    """``Tensor fc_0.w_0 (tensor(type=float32, shape=[13, 1]))``-style line."""
    if var.type not in (VarType.LOD_TENSOR, VarType.SELECTED_ROWS):
        return f"{var.type.name} {var.name}"
    try:
        dtype = convert_dtype(var.dtype) if var.dtype is not None else "unknown"
    except ValueError:
        dtype = str(var.dtype)
    tensor = f"tensor(type={dtype}, shape={list(var.shape)})"
    if var.type == VarType.SELECTED_ROWS:
        return f"SelectedRows {var.name} ({tensor})"
    if var.lod_level > 0:
        return f"LoDTensor {var.name} (level={var.lod_level}, {tensor})"
    return f"Tensor {var.name} ({tensor})"


def repr_op(op: Operator) -> str:
    """``out = optype(X=x, Y=w) [{attr=v,...}]``; fill_constant as ``out = value [shape=...]``."""
    outs = ", ".join(n for v in op.outputs.values() for n in v)
    if op.type == "fill_constant":
        return f"{outs} = {op.attrs.get('value')} [shape={list(op.attrs.get('shape', []))}]"
    ins = ", ".join(f"{k}={', '.join(v)}" for k, v in op.inputs.items())
    attrs = [f"{k}={op.attrs[k]}" for k in sorted(op.attrs) if k not in COMMON_ATTRS]
    tail = f" [{{{','.join(attrs)}}}]" if attrs else ""
    return f"{outs} = {op.type}({ins}){tail}"


def _is_backward_var(name: str) -> bool:
    return "@GRAD" in name


def _is_backward_op(op: Operator) -> bool:
    return op.type.endswith("_grad") or any(
        _is_backward_var(n) for n in op.input_arg_names + op.output_arg_names)


def pprint_block_codes(block: Block, show_backward: bool = False) -> str:
    """Text dump of one block (backward ops and ``@GRAD`` vars omitted unless
    ``show_backward``)."""
    var_lines = [repr_var(v) for v in block.vars.values()
                 if show_backward or not _is_backward_var(v.name)]
    op_lines = [repr_op(op) for op in block.ops if show_backward or not _is_backward_op(op)]
    return (f"// block-{block.idx}  parent-{block.parent_idx}\n// variables\n"
            + "\n".join(var_lines) + "\n\n// operators\n" + "\n".join(op_lines) + "\n")


def pprint_program_codes(program: Program) -> str:
    """``pprint_block_codes`` of every block, joined by newlines."""
    if not isinstance(program, Program):
        raise TypeError(f"pprint_program_codes expects a Program, got {type(program).__name__}")
    return "\n".join(pprint_block_codes(b) for b in program.blocks)
