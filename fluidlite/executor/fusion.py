"""Plan-time fusion: cheaper kernels for common op sequences; the Program is never changed.

A fused step replaces one or more ops of the plan by a single kernel call with the same inputs
and outputs as the ops it covers. Rules:

* ``elementwise_mul(G, s) -> G'`` followed later by ``sgd(P, lr, G') -> P`` (what the global-norm
  clip inserts before every update), where ``G'`` has no other reader: one kernel computing
  ``P -= (lr * s) * G`` in place with a plan-owned scratch buffer (no allocation per step).
* a plain ``sgd(P, lr, G) -> P`` updates ``P`` in place the same way.

In-place updates are only used in the plan's *commit tail*: the run of parameter-update ops at the
end of the block. Every op before the tail has already succeeded when the tail runs, and update
kernels cannot fail on validated shapes, so a failing step still leaves the scope untouched.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Set

import numpy as np

from ..core.ir import Block, Operator
from ..core.registry import OpDef, Slot

_UPDATE_OPS = frozenset({"sgd"})


class FusedOp:
    """Stands in for the ops it covers inside a Plan (duck-types ``Operator`` for the plan)."""

    def __init__(self, opdef: "OpDef", ops: Sequence[Operator], inputs: Dict[str, List[str]],
                 outputs: Dict[str, List[str]]) -> None:
        self.opdef, self.covered = opdef, list(ops)
        self.type = opdef.type
        self.inputs, self.outputs = inputs, outputs
        self.attrs = dict(ops[-1].attrs)

    @property
    def input_arg_names(self) -> List[str]:
        return [n for v in self.inputs.values() for n in v]

    @property
    def output_arg_names(self) -> List[str]:
        return [n for v in self.outputs.values() for n in v]


class _ScaledSgd(OpDef):
    """ParamOut = Param - (LearningRate * Scale) * Grad, written into Param's buffer."""
    type = "fused(elementwise_mul+sgd)"
    inputs, outputs = ("Param", "LearningRate", "Grad", "Scale"), ("ParamOut",)

    def __init__(self, inplace: bool) -> None:
        self.inplace = inplace

    def lower(self, in_specs: Sequence[Any], attrs: Dict[str, Any]) -> Callable:
        return _sgd_kernel(self.inplace, scaled=True)


class _Sgd(_ScaledSgd):
    """ParamOut = Param - LearningRate * Grad, written into Param's buffer."""
    type = "sgd(in place)"
    inputs = ("Param", "LearningRate", "Grad")

    def lower(self, in_specs: Sequence[Any], attrs: Dict[str, Any]) -> Callable:
        return _sgd_kernel(self.inplace, scaled=False)


for _cls in (_ScaledSgd, _Sgd):
    _cls.in_slots = tuple(Slot(s) for s in _cls.inputs)
    _cls.out_slots = tuple(Slot(s) for s in _cls.outputs)
    _cls.attr_defaults = {}


_CHUNK = 1 << 17        # elements per pass when updating a large parameter in place
_WHOLE = 1 << 20        # up to this size one temporary is cheaper than a chunk loop


def _sgd_kernel(inplace: bool, scaled: bool) -> Callable:
    """``P - (lr * s) * G`` written into P. The scalar product ``lr * s`` is formed first, so the
    update is two passes over G (the unfused ops round ``lr * (G * s)``: the results agree to
    float32 rounding and are deterministic). Large parameters go chunk by chunk through a small
    reused scratch buffer so an update never allocates a parameter-sized temporary."""
    scratch: List[Optional[np.ndarray]] = [None]

    def step(p: np.ndarray, lr: np.ndarray, g: np.ndarray, s: Any = None) -> np.ndarray:
        c = lr.reshape(()) if s is None else lr.reshape(()) * s.reshape(())
        if not inplace or not (p.flags.c_contiguous and g.flags.c_contiguous):
            return p - g * c
        if g.size <= _WHOLE:
            np.subtract(p, g * c, out=p)
            return p
        buf = scratch[0]
        if buf is None or buf.dtype != p.dtype:
            buf = scratch[0] = np.empty(_CHUNK, p.dtype)
        pf, gf = p.reshape(-1), g.reshape(-1)
        for a in range(0, pf.size, _CHUNK):
            b = min(a + _CHUNK, pf.size)
            tmp = buf[:b - a]
            np.multiply(gf[a:b], c, out=tmp)
            np.subtract(pf[a:b], tmp, out=pf[a:b])
        return p

    if scaled:
        return step
    return lambda p, lr, g: step(p, lr, g)


def fuse(ops: Sequence[Operator], block: Block, protected: Set[str]) -> List[Any]:
    """Return the plan's op list with fusable sequences replaced by ``FusedOp``s.

    ``protected`` holds names that must stay materialised (fetch targets).
    """
    readers: Dict[str, int] = {}
    for op in ops:
        for n in op.input_arg_names:
            readers[n] = readers.get(n, 0) + 1
    producer: Dict[str, int] = {}
    for i, op in enumerate(ops):
        for n in op.output_arg_names:
            producer[n] = i
    tail_start = len(ops)
    while tail_start > 0 and ops[tail_start - 1].type in _UPDATE_OPS:
        tail_start -= 1

    out: List[Any] = list(ops)
    drop: Set[int] = set()
    for i, op in enumerate(ops):
        if op.type != "sgd":
            continue
        p_name = op.inputs["Param"][0]
        param = block._find_var_recursive(p_name)
        inplace = (i >= tail_start and op.outputs["ParamOut"] == [p_name]
                   and param is not None and param.persistable)
        g_name = op.inputs["Grad"][0]
        j = producer.get(g_name)
        mul = ops[j] if j is not None else None
        if (mul is not None and mul.type == "elementwise_mul" and readers.get(g_name) == 1
                and g_name not in protected and _is_scalar_scale(block, mul)
                and not _var(block, g_name).persistable):
            inputs = {"Param": [p_name], "LearningRate": op.inputs["LearningRate"],
                      "Grad": mul.inputs["X"], "Scale": mul.inputs["Y"]}
            out[i] = FusedOp(_ScaledSgd(inplace), [mul, op], inputs, dict(op.outputs))
            drop.add(j)
        elif inplace:
            out[i] = FusedOp(_Sgd(True), [op], dict(op.inputs), dict(op.outputs))
    return [o for k, o in enumerate(out) if k not in drop]


def _var(block: Block, name: str) -> Any:
    return block._find_var_recursive(name)


def _is_scalar_scale(block: Block, mul: Operator) -> bool:
    """``elementwise_mul(X, Y)`` with a one-element Y: a pure rescaling of X."""
    y = _var(block, mul.inputs["Y"][0])
    x = _var(block, mul.inputs["X"][0])
    return (y is not None and x is not None and tuple(y.shape) == (1,)
            and mul.attrs.get("axis", -1) in (-1, len(x.shape) - 1, 0))
