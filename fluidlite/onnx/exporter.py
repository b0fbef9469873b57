"""The export pipeline of ``fluidlite.onnx``: which ops are needed, which of them cannot be
exported and why (``_problem``), the conversion through the control-flow renaming layer, the
initializers, the checked model (``to_model``) and the atomic write (``export``).

The converters live in ``basic``, ``more`` and ``control``; importing them here registers them
(``common._CONVERTERS``), in that order, before any export can run.
"""
from __future__ import annotations

from typing import Any, List, Optional, Sequence, Set

import numpy as np

from ..core.dtypes import VarType
# the converter modules register on import, in this order (a later one may override)
from . import basic as _basic  # noqa: F401
from . import more as _more
from . import control as _control
from .basic import _adaptive_window
from .common import _CONVERTERS, _ONNX_DTYPE, OnnxExportError, _Ctx, _onnx

# inputs that make an op's result depend on a run-time tensor (op type -> slots): the
# converters read those values from attrs only, so an op using one is refused
_DYNAMIC_INPUTS = {"unsqueeze2": ("AxesTensor", "AxesTensorList"),
                   "slice": ("StartsTensor", "EndsTensor", "StartsTensorList",
                             "EndsTensorList"),
                   "scale": ("ScaleTensor",),
                   "fill_constant": ("ShapeTensor", "ShapeTensorList", "ValueTensor"),
                   "top_k": ("K",),
                   "expand": ("ExpandTimes", "expand_times_tensor"),
                   "one_hot": ("depth_tensor",), "one_hot_v2": ("depth_tensor",),
                   "strided_slice": ("StartsTensor", "EndsTensor", "StridesTensor",
                                     "StartsTensorList", "EndsTensorList",
                                     "StridesTensorList"),
                   "pad2d": ("Paddings",), "pow": ("FactorTensor",),
                   "expand_v2": ("Shape", "expand_shapes_tensor"),
                   "tile": ("RepeatTimes", "repeat_times_tensor"),
                   "top_k_v2": ("K",)}


def _problem(op: Any) -> Optional[str]:
    """Why ``op`` cannot be exported, or None."""
    why = _control.problem(op)      # control flow and tensor arrays
    if why:
        return why
    if op.type not in _CONVERTERS:
        return "no ONNX conversion"
    for slot in _DYNAMIC_INPUTS.get(op.type, ()):
        if op.input(slot):
            return f"input '{slot}' (a run-time tensor) is not supported"
    if op.type == "pool2d" and op.attr("adaptive") and \
            [int(k) for k in op.attr("ksize")] != [1, 1] and not op.attr("global_pooling") \
            and _adaptive_window(op) is None:
        return "adaptive pooling whose input size is not a multiple of the output size"
    layout = op.attr("data_layout") if op.type == "batch_norm" else \
        op.attr("data_format") if op.type in _more._NHWC_SLOTS else "NCHW"
    if layout not in ("NCHW", "AnyLayout", "NHWC"):
        return f"data_format {layout}"
    if layout == "NHWC" and (len(op.block._find_var_recursive(
            op.input(_more._NHWC_SLOTS[op.type][0])[0]).shape) != 4 or
            (op.type == "pool2d" and op.attr("adaptive"))):
        return "NHWC other than a 4-D conv, pool or batch norm"
    if op.type in ("arg_max", "arg_min") and op.attr("flatten"):
        return "flatten=True"
    return _more.problem(op)


# -- graph ------------------------------------------------------------------------------------
def _needed_ops(program: Any, feed_names: Sequence[str], fetch_names: Sequence[str]
                ) -> List[Any]:
    """The ops of block 0 that compute ``fetch_names`` from the feeds and persistables."""
    block = program.global_block()
    wanted: Set[str] = set(fetch_names)
    feeds = set(feed_names)
    keep = []
    for op in reversed(block.ops):
        if op.type in ("feed", "fetch"):
            continue
        outs = set(op.output_arg_names)
        if outs & wanted:
            keep.append(op)
            if _control.owns_block(op):
                # a while / conditional_block may leave its outputs unchanged (the block need
                # not run), so their previous values stay wanted, as does all its block reads
                wanted |= _control.block_reads(op) - feeds
                continue
            wanted -= outs
            wanted |= {n for n in op.input_arg_names if n not in feeds}
    return list(reversed(keep))


def _value_info(c: _Ctx, name: str) -> Any:
    onnx = _onnx()
    v = c.var(name)
    if v is None:
        raise OnnxExportError(f"variable '{name}' is not in the program")
    dims = [d if d >= 0 else ("batch" if i == 0 else f"{name}_dim{i}")
            for i, d in enumerate(int(s) for s in v.shape)]
    return onnx.helper.make_tensor_value_info(name, _ONNX_DTYPE[VarType(int(v.dtype))], dims)


def _convert_one(c: _Ctx, op: Any) -> None:
    """Convert one op that owns no block into ``c.nodes``."""
    if op.type in _more._NHWC_SLOTS and "NHWC" in (
            op.attr("data_layout") if op.type == "batch_norm" else op.attr("data_format")):
        _more.convert_nhwc(c, op, _CONVERTERS[op.type])
    else:
        _CONVERTERS[op.type](c, op)


def to_model(program: Any, feed_names: Sequence[str], fetch_names: Sequence[str],
             opset_version: int = 17, scope: Any = None) -> Any:
    """The checked ``onnx.ModelProto`` of ``program`` (see the module docstring)."""
    onnx = _onnx()
    from ..core import scope as scope_mod
    feed_names, fetch_names = list(feed_names), list(fetch_names)
    if not fetch_names:
        raise OnnxExportError("fetch_names is empty: name the outputs to export")
    if opset_version < 13:
        raise OnnxExportError(f"opset_version {opset_version} is not supported (13 or newer)")
    ops = _needed_ops(program, feed_names, fetch_names)
    # the ops inside sub-blocks are checked too (all of a needed block is exported)
    bad = [(op, why) for op in _control.walk(ops) if (why := _problem(op))]
    if bad:
        listed = "; ".join(f"'{op.type}' (output {op.output_arg_names[:1]}"
                           f"{f', block {op.block.idx}' if op.block.idx else ''}): {why}"
                           for op, why in bad)
        raise OnnxExportError(f"cannot export the program to ONNX: {len(bad)} op(s) cannot be "
                              f"exported: {listed}")
    c = _Ctx(program, opset_version)
    c.feeds = feed_names
    # control.convert_ops renames variables written more than once (ONNX is SSA) and turns
    # while / conditional_block into Loop / If; every other op goes through _convert_one
    _control.finish(c, _control.convert_ops(c, ops, _convert_one, live=set(fetch_names)),
                    feed_names, fetch_names)
    # names read inside subgraphs count: a Loop body may read a parameter
    used, made = _control.graph_names(c.nodes)
    # not the ops' output names: batch_norm "writes" its moving stats, which stay initializers
    produced = set(feed_names) | {o for n in c.nodes for o in n.output}
    used -= made - produced
    scope = scope if scope is not None else scope_mod.global_scope()
    inits = []
    for name in sorted(used - produced - {t.name for t in c.consts}):
        v = c.var(name)
        held = scope.find_var(name)
        if v is None or not v.persistable or held is None or not held.is_initialized():
            raise OnnxExportError(f"variable '{name}' is neither fed, computed, nor a "
                                  f"persistable with a value in the scope (load the model's "
                                  f"parameters first)")
        inits.append(onnx.numpy_helper.from_array(np.asarray(held.get_tensor()), name))
    missing = [n for n in fetch_names if n not in produced]
    if missing:
        raise OnnxExportError(f"fetch targets {missing} are not computed by the program")
    graph = onnx.helper.make_graph(
        c.nodes, "fluidlite", [_value_info(c, n) for n in feed_names],
        [_value_info(c, n) for n in fetch_names], initializer=inits + c.consts)
    model = onnx.helper.make_model(graph, producer_name="fluidlite",
                                   opset_imports=[onnx.helper.make_opsetid("", opset_version)])
    model.ir_version = min(model.ir_version, 8 if opset_version <= 18 else model.ir_version)
    onnx.checker.check_model(model)
    return model


def export(program: Any, path: str, feed_names: Sequence[str], fetch_names: Sequence[str],
           opset_version: int = 17, scope: Any = None) -> Any:
    """Write ``program`` as an ONNX model to ``path`` (atomically) and return the model.
    Raises ``OnnxExportError`` (listing every op that cannot be exported) before writing."""
    from ..formats.checkpoint import write_file
    model = to_model(program, feed_names, fetch_names, opset_version, scope)
    write_file(path, model.SerializeToString())
    return model
