"""``paddle.fluid.op``: fluid 1.x's ``Operator`` -- one op built from names and run directly on
the variables of a Scope, without a user-visible Program (what Paddle's operator unit tests
use).

``Operator("scale", X="x", Out="out", scale=2.0)`` names the variables of each input/output
slot (a string, or a list for a duplicable slot) and gives the attributes as further keyword
arguments; ``op.run(scope, place)`` reads the inputs' tensors (values and LoD) from ``scope``,
runs the op through the Executor and stores every output's tensor (value and LoD) in
``scope``.
"""
from __future__ import annotations

from typing import Any, Dict, List, Tuple

import numpy as np

from .core.ir import Program, program_guard
from .core.dtypes import VarType
from .core.registry import get_op_def
from .core.scope import CPUPlace, LoDTensor, Scope
from .core.selected_rows import SelectedRows
from .executor import Executor

__all__ = ["Operator", "RecurrentOp", "DynamicRecurrentOp"]


def _names(slot: str, value: Any) -> List[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return list(value)
    raise TypeError(f"Operator: slot '{slot}' takes a variable name or a list of names, got "
                    f"{value!r}")


class Operator:
    """One op of type ``type`` over named scope variables (fluid's ``fluid.op.Operator``).

    Args:
        type: the op type, e.g. ``"sgd"``.
        **kwargs: each input / output slot of the op (``X="x"``, ``Out=["o1", "o2"]`` for a
            duplicable slot) and each attribute (``scale=2.0``).

    Raises:
        ValueError: ``type`` is not a registered op.
        TypeError: a slot is given something other than a name or a list of names.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> from fluidlite.op import Operator
        >>> scope = fluid.core.Scope()
        >>> scope.var("x").get_tensor().set(np.array([1., 2.], "float32"), fluid.CPUPlace())
        >>> Operator("scale", X="x", Out="y", scale=3.0).run(scope, fluid.CPUPlace())
        >>> np.array(scope.find_var("y").get_tensor())
        array([3., 6.], dtype=float32)
    """

    def __init__(self, type: str, **kwargs: Any) -> None:
        opdef = get_op_def(type)
        self._type = type
        self._in_slots = {s.name: s for s in opdef.in_slots}
        self._out_slots = {s.name: s for s in opdef.out_slots}
        self._reads_outputs = frozenset(opdef.reads_outputs)
        self._inputs = {k: _names(k, v) for k, v in kwargs.items() if k in self._in_slots}
        self._outputs = {k: _names(k, v) for k, v in kwargs.items() if k in self._out_slots}
        self._attrs = {k: v for k, v in kwargs.items()
                       if k not in self._in_slots and k not in self._out_slots}

    def type(self) -> str:
        """The op type."""
        return self._type

    def input(self, slot: str) -> List[str]:
        """The variable names of input ``slot`` (``[]`` when not given)."""
        return list(self._inputs.get(slot, []))

    def output(self, slot: str) -> List[str]:
        """The variable names of output ``slot`` (``[]`` when not given)."""
        return list(self._outputs.get(slot, []))

    def inputs(self) -> Dict[str, List[str]]:
        """Input slot -> variable names."""
        return {k: list(v) for k, v in self._inputs.items()}

    def outputs(self) -> Dict[str, List[str]]:
        """Output slot -> variable names."""
        return {k: list(v) for k, v in self._outputs.items()}

    def attr(self, name: str) -> Any:
        """The value given for attribute ``name`` (KeyError when it was not given)."""
        return self._attrs[name]

    def _declare(self, block: Any, scope: Any, run_scope: Any
                 ) -> Tuple[Dict[str, Any], Dict[str, Any], Dict[str, Any]]:
        """(feed, inputs, outputs) of the one-op program, the inputs read from ``scope``; a
        SelectedRows input (``get_selected_rows``) becomes a persistable SELECTED_ROWS
        variable of ``run_scope`` (dims ``[height, D...]``, as fluid's InferShape sees it)."""
        feed: Dict[str, Any] = {}
        ins: Dict[str, Any] = {}
        for slot, names in self._inputs.items():
            vs = []
            for n in names:
                holder = scope.find_var(n)
                if holder is None or not holder.is_initialized():
                    raise ValueError(f"Operator '{self._type}': input '{n}' of slot '{slot}' "
                                     f"is not initialized in the scope; set it first with "
                                     f"scope.var('{n}').get_tensor().set(array, place)")
                if holder.is_selected_rows():
                    sr = holder.selected_rows()
                    vs.append(block.create_var(
                        name=n, shape=(sr.height,) + tuple(sr.value.shape[1:]),
                        dtype=sr.value.dtype, type=VarType.SELECTED_ROWS, persistable=True))
                    run_scope.var(n).set_array(sr)
                    continue
                t = holder.get_tensor()
                arr = np.asarray(t)
                lod = t.lod()
                vs.append(block.create_var(name=n, shape=arr.shape, dtype=arr.dtype,
                                           lod_level=len(lod), is_data=True))
                feed[n] = LoDTensor(arr, lod) if lod else arr
            ins[slot] = vs if self._in_slots[slot].duplicable else vs[0]
        outs: Dict[str, Any] = {}
        for slot, names in self._outputs.items():
            vs = [self._output_var(block, scope, run_scope, slot, n) for n in names]
            outs[slot] = vs if self._out_slots[slot].duplicable else vs[0]
        return feed, ins, outs

    def _output_var(self, block: Any, scope: Any, run_scope: Any, slot: str, name: str
                    ) -> Any:
        """The variable of output ``name``. For a slot the kernel reads the previous value of
        (``reads_outputs``: e.g. adam's lazy sparse update keeps the rows it does not write)
        the value ``scope`` holds is carried over (a persistable of ``run_scope``), as fluid's
        op writes into the output's existing buffer."""
        holder = scope.find_var(name)
        if slot not in self._reads_outputs or block.has_var(name) or holder is None \
                or not holder.is_initialized() or holder.is_selected_rows():
            return block.create_var(name=name)
        arr = np.asarray(holder.get_tensor())
        run_scope.var(name).get_tensor().set(arr.copy())
        return block.create_var(name=name, shape=arr.shape, dtype=arr.dtype, persistable=True)

    def run(self, scope: Any, place: Any = None) -> None:
        """Run the op on ``scope``'s variables: inputs are read from it, outputs (value and
        LoD) written to it (created when missing). ``place``: fluid's device (CPU here)."""
        prog = Program()
        block = prog.global_block()
        run_scope = Scope()
        feed, ins, outs = self._declare(block, scope, run_scope)
        with program_guard(prog, Program()):
            block.append_op(self._type, ins, outs, dict(self._attrs))
        fetch: List[str] = []
        for v in outs.values():
            fetch += [x.name for x in (v if isinstance(v, list) else [v])]
        got = Executor(place or CPUPlace()).run(prog, feed=feed, fetch_list=fetch,
                                                scope=run_scope, return_numpy=False)
        for name, t in zip(fetch, got):
            holder = scope.var(name)
            if type(t) is SelectedRows:         # a sparse result: rows, height and value
                holder.set_selected_rows(t)
                continue
            holder._sparse = None
            dst = holder.get_tensor()
            dst.set(np.asarray(t))
            dst.set_lod(t.lod() if isinstance(t, LoDTensor) else [])


class _RetiredRNNOp:
    """fluid 1.8's ``fluid.op.RecurrentOp`` / ``DynamicRecurrentOp`` factories: importable, as
    in fluid 1.8, but the C++ classes they create (``core.RecurrentOp``,
    ``core.DynamicRecurrentOp``) no longer existed in fluid 1.8, so calling one failed there;
    it fails here with an error that says so and names the replacement."""

    def __init__(self, name: str, op_type: str, replacement: str) -> None:
        self.name, self.type, self.replacement = name, op_type, replacement

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # fluid 1.8 failed here with AttributeError (no core.RecurrentOp): the same type
        raise AttributeError(
            f"fluid.op.{self.name} creates core.{self.name}, which fluid 1.8 had already "
            f"removed (calling it failed in fluid 1.8 too); build the loop with "
            f"{self.replacement} instead")

    def __repr__(self) -> str:
        return f"<fluid.op.{self.name} (retired in fluid 1.8)>"


RecurrentOp = _RetiredRNNOp("RecurrentOp", "recurrent", "fluid.layers.StaticRNN")
DynamicRecurrentOp = _RetiredRNNOp("DynamicRecurrentOp", "dynamic_recurrent",
                                   "fluid.layers.DynamicRNN")
