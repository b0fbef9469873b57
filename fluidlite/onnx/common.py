"""What every ONNX converter module shares (``fluidlite.onnx``): the converter registry
(``_conv`` / ``_CONVERTERS`` / ``supported_ops``), the conversion context ``_Ctx`` (the op's
variables and the nodes and constants added so far), the error type, the lazy ``onnx`` import
and the small graph helpers more than one converter module uses.

It imports no other module of the package: ``basic``, ``more`` and ``control`` register their
converters here, ``exporter`` drives them, and ``fluidlite.onnx`` only re-exports the public API.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

import numpy as np

from ..core.dtypes import VarType, to_numpy_dtype

ONNX_INSTALL_HINT = "pip install 'fluidlite[onnx]'  (or: pip install onnx onnxruntime)"


class OnnxExportError(ValueError):
    """The program cannot be exported (the message lists every op that cannot)."""


def _onnx() -> Any:
    """The ``onnx`` module, imported on first use (it is an optional extra); ImportError with
    the install hint when it is missing."""
    try:
        import onnx
    except ImportError:
        raise ImportError(f"ONNX export needs the onnx package: {ONNX_INSTALL_HINT}") from None
    return onnx


_ONNX_DTYPE = {VarType.FP32: 1, VarType.UINT8: 2, VarType.INT8: 3, VarType.INT16: 5,
               VarType.INT32: 6, VarType.INT64: 7, VarType.BOOL: 9, VarType.FP16: 10,
               VarType.FP64: 11}


class _Ctx:
    """What a converter sees: the op's vars, and helpers that add nodes and constants."""

    def __init__(self, program: Any, opset: int) -> None:
        self.block = program.global_block()
        self.opset = opset
        self.nodes: List[Any] = []
        self.consts: List[Any] = []
        self._n = 0
        # control flow (onnx/control.py) renames re-written variables: ONNX name -> fluid name,
        # and every ONNX value name given out (model-wide unique); the feeds' names
        self.alias: Dict[str, str] = {}
        self.taken: Set[str] = set()
        self.feeds: List[str] = []

    def tmp(self, hint: str) -> str:
        self._n += 1
        return f"_onnx_{hint}_{self._n}"

    def var(self, name: str) -> Any:
        return self.block._find_var_recursive(self.alias.get(name, name))

    def shape(self, name: str) -> Tuple[int, ...]:
        return tuple(self.var(name).shape)

    def np_dtype(self, name: str) -> np.dtype:
        return to_numpy_dtype(self.var(name).dtype)

    def node(self, op_type: str, inputs: Sequence[str], outputs: Optional[Sequence[str]] = None,
             **attrs: Any) -> str:
        onnx = _onnx()
        outs = list(outputs) if outputs is not None else [self.tmp(op_type.lower())]
        self.nodes.append(onnx.helper.make_node(op_type, list(inputs), outs,
                                                name=self.tmp("n_" + op_type.lower()), **attrs))
        return outs[0]

    def const(self, value: Any, dtype: Any = None, hint: str = "const") -> str:
        onnx = _onnx()
        arr = np.asarray(value, dtype=dtype)
        name = self.tmp(hint)
        self.consts.append(onnx.numpy_helper.from_array(arr, name))
        return name

    def ints(self, values: Sequence[int]) -> str:
        return self.const(np.asarray(list(values), np.int64), hint="ints")


def _int64_list(c: _Ctx, tensors: Sequence[str]) -> str:
    """A list of 1-element int tensors (fluid's ``*TensorList`` inputs, e.g. reshape2's
    ``ShapeTensor``) as one int64 vector."""
    return c.node("Concat", [c.node("Cast", [c.node("Reshape", [t, c.ints([1])])], to=7)
                             for t in tensors], axis=0)


def _x(op: Any, slot: str, i: int = 0) -> str:
    """The ``i``-th variable name of ``op``'s input ``slot``."""
    return op.input(slot)[i]


def _out(op: Any, slot: str = "Out") -> str:
    """The (first) variable name of ``op``'s output ``slot``."""
    return op.output(slot)[0]


# -- the converter registry --------------------------------------------------------------
_CONVERTERS: Dict[str, Callable[[_Ctx, Any], None]] = {}


def _conv(*types: str) -> Callable:
    """Decorator: register ``fn(ctx, op)`` as the converter of the op ``types`` (a later
    registration of a type replaces an earlier one)."""
    def deco(fn: Callable) -> Callable:
        for t in types:
            _CONVERTERS[t] = fn
        return fn
    return deco


def supported_ops() -> List[str]:
    """The op types ``export`` translates (besides feed/fetch, which are left out)."""
    return sorted(_CONVERTERS)


# -- helpers shared by the converter modules ----------------------------------------------
def _fluid_broadcast(c: _Ctx, x: str, y: str, axis: int) -> str:
    """Y reshaped so numpy broadcasting matches fluid's: Y's dims align with X's from
    ``axis`` (trailing when ``axis == -1``), so trailing 1s are appended to Y."""
    rx, ry = len(c.shape(x)), len(c.shape(y))
    if axis == -1 or ry >= rx or axis + ry == rx:
        return y
    return c.node("Unsqueeze", [y, c.ints(range(ry, rx - axis))])    # trailing 1s


def _reduce_node(c: _Ctx, kind: str, x: str, axes: Optional[List[int]], keep: bool,
                 outputs: Optional[List[str]]) -> str:
    """A ``kind`` reduce node over ``axes`` (all when None): from opset 18 (and for
    ``ReduceSum`` from 13) the axes are an input, before that an attribute."""
    if axes is None:
        axes = list(range(len(c.shape(x))))
    if kind == "ReduceSum" or c.opset >= 18:        # axes became an input
        return c.node(kind, [x, c.ints(axes)], outputs, keepdims=int(keep))
    return c.node(kind, [x], outputs, axes=axes, keepdims=int(keep))


def _to_declared(c: _Ctx, value: str, out: str) -> None:
    """Reshape to ``out``'s declared shape when fluid keeps a ``[1]`` ONNX reduces to ()."""
    c.node("Reshape", [value, c.ints(c.shape(out))], [out])
