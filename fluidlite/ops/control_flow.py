"""Control flow (fluid 1.8 op names and slots): ``while``, ``conditional_block``, their
``*_grad`` ops, and the tensor-array ops ``write_to_array``, ``read_from_array``,
``lod_array_length``, ``tensor_array_to_tensor``, plus ``print`` and ``assert``.

Ops that own a sub-block (``attrs['sub_block']``) have no kernel: the executor compiles their
block into the plan itself (a ``while`` becomes a Python ``while`` loop in the generated code, a
``conditional_block`` an ``if``; see ``executor/plan.py``). Their gradients are built by the
backward pass (``fluidlite/backward.py``: a grad block of the body's grad ops, run once per
recorded iteration in reverse order).

A tensor array (``VarType.LOD_TENSOR_ARRAY``) is a Python list of arrays at run time. Writes
copy the list (kernels never mutate their inputs), so every version of an array stays valid.
The gradient of an array is a list of the same positions where ``None`` means zero.
"""
from __future__ import annotations

import functools
import logging
import sys
import time
from typing import Any, Dict, List, Optional

import numpy as np

from ..core import shape as S
from ..core.dtypes import VarType
from ..core.registry import Binding, OpDef, VarSpec, register

_log = logging.getLogger("fluidlite")


class _BlockOp(OpDef):
    """Base of the ops owning a sub-block (compiled by the executor, no kernel). What the plan
    generates for one (``executor/blocks.py``) follows from these declarations alone."""
    sub_block_op = True
    # a loop (``while <the one bool of condition_slot>:`` over the block) or, when False, a
    # branch run at most once (``if``: the one element of condition_slot when the op's
    # ``is_scalar_condition`` attr is set, else every tensor of block_inputs_slot non-empty)
    block_loops: bool = False
    # the gradient op: runs the grad block once per recorded run of its forward op, last first
    block_backward: bool = False
    condition_slot: str = ""        # forward ops: the input slot holding the condition
    block_inputs_slot: str = ""     # the outer variables the block reads (grad ops: X of dX)
    # the slot naming the recorded runs (fluid's step scopes): an output of the forward op,
    # an input of its gradient op
    records_slot: str = ""

    def infer(self, *specs, **attrs):
        return {}


# The gradient of a sub-block op is a grad sub-block: built by the backward pass, which sits
# above the ops and registers its builder here when imported (``provide_grad_builder``).
_GRAD_BUILDER: List[Any] = []


def provide_grad_builder(build: Any) -> None:
    """Register ``build(grad_builder)``: appends the grad op of a sub-block op (``while``,
    ``conditional_block``, ...) with its grad sub-block. ``fluidlite.backward`` calls this."""
    _GRAD_BUILDER[:] = [build]


def _grad_through_blocks(g, **attrs):
    if not _GRAD_BUILDER:
        raise RuntimeError("the gradient of a control-flow op is built by fluidlite.backward; "
                           "call append_backward / gradients (import fluidlite) to build it")
    _GRAD_BUILDER[0](g)


@register
class While(_BlockOp):
    """Run ``sub_block`` while ``Condition`` (a bool tensor of one element, rewritten by the
    block) is true. ``X``: the outer variables the block reads; ``Out``: those it writes (the
    loop-carried variables); ``StepScopes``: the values of each iteration the gradient needs.
    Gradient: ``while_grad`` runs the grad block over the recorded iterations in reverse."""
    type, inputs, outputs = "while", ("X*", "Condition*"), ("Out*", "StepScopes?")
    block_loops, condition_slot, block_inputs_slot, records_slot = \
        True, "Condition", "X", "StepScopes"
    attr_defaults = {"sub_block": None, "is_test": False, "skip_eager_deletion_vars": []}

    def make_grad(self, g, **attrs):
        _grad_through_blocks(g)


@register
class ConditionalBlock(_BlockOp):
    """Run ``sub_block`` once if ``Cond`` holds: its one element when ``is_scalar_condition``,
    else when every tensor of ``Input`` is non-empty (fluid 1.8). ``Input``: outer variables
    the block reads; ``Out``: those it writes (unchanged when the block does not run).
    Gradient: ``conditional_block_grad`` runs the grad block under the same condition."""
    type, inputs, outputs = "conditional_block", ("Cond*", "Input*?"), ("Out*?", "Scope?")
    condition_slot, block_inputs_slot, records_slot = "Cond", "Input", "Scope"
    attr_defaults = {"sub_block": None, "is_scalar_condition": False,
                     "skip_eager_deletion_vars": []}

    def make_grad(self, g, **attrs):
        _grad_through_blocks(g)


@register
class WhileGrad(_BlockOp):
    """Gradient of ``while``: for each recorded iteration, last first, run ``sub_block`` (the
    body's grad ops). Gradients of loop-carried variables flow from one iteration to the one
    before; gradients of variables only read in the loop are summed over iterations."""
    type = "while_grad"
    inputs = ("X*", "Out*", "Out@GRAD*", "StepScopes?")
    outputs = ("X@GRAD*",)
    block_loops, block_backward, block_inputs_slot, records_slot = True, True, "X", "StepScopes"
    # block_in_grads[j]: the grad block's name for the incoming gradient of Out[j];
    # block_out_grads[i]: its name for X[i]'s gradient ("" where it computes none);
    # carried_from[i]: the position in Out of the loop-carried variable X[i] is (or -1)
    attr_defaults = {"sub_block": None, "original_output_grad": [],
                     "skip_eager_deletion_vars": [], "is_test": False,
                     "block_in_grads": [], "block_out_grads": [], "carried_from": []}
    no_grad = True

    def infer(self, X, Out, dOut, StepScopes, **attrs):
        return {"X@GRAD": list(X)}


@register
class ConditionalBlockGrad(_BlockOp):
    """Gradient of ``conditional_block``: the grad block runs iff the forward block ran;
    otherwise the gradients of the variables it would have written pass through unchanged."""
    type = "conditional_block_grad"
    inputs = ("Cond*", "Input*", "Out*", "Out@GRAD*", "Scope?")
    outputs = ("Input@GRAD*",)
    block_backward, block_inputs_slot, records_slot = True, "Input", "Scope"
    attr_defaults = {"sub_block": None, "is_scalar_condition": False,
                     "skip_eager_deletion_vars": [], "block_in_grads": [],
                     "block_out_grads": [], "carried_from": []}
    no_grad = True

    def infer(self, Cond, Input, Out, dOut, Scope, **attrs):
        return {"Input@GRAD": list(Input)}


# -- tensor arrays ------------------------------------------------------------------------------
def _index(I: Any, what: str) -> int:
    i = np.asarray(I)
    if i.size != 1:
        raise ValueError(f"{what}: the index I must hold one element, but its shape is "
                         f"{list(i.shape)}")
    return int(i.reshape(-1)[0])


def _check_index_spec(I: VarSpec, op: str) -> None:
    if S.numel(I.shape) not in (1, -1):
        raise ValueError(f"{op}: the index I must hold one element, but its shape is "
                         f"{list(I.shape)}")
    if I.dtype not in (VarType.INT64, VarType.INT32):
        raise ValueError(f"{op}: the index I must be int64 or int32, but it is "
                         f"{I.dtype.name.lower()}")


@register
class WriteToArray(OpDef):
    """``Out[I] = X`` (the array grows to ``I + 1`` entries; new gaps hold empty tensors);
    ``dX = dOut[I]``. The kernel receives the array's previous value (``reads_outputs``).
    Element ``I`` keeps ``X``'s LoD, the other elements theirs (``core/lod.py``, ``array_lod``).
    """
    type, inputs, outputs = "write_to_array", ("X", "I"), ("Out",)
    reads_outputs = ("Out",)
    grad_uses = ("X", "I")
    array_lod = True

    def infer(self, X, I):
        _check_index_spec(I, "write_to_array")
        return {"Out": X}

    def forward(self, X, I, Out=None, lod=None):
        i = _index(I, "array_write")
        if i < 0:
            raise IndexError(f"array_write: the index must be >= 0, but it is {i}")
        arr = list(Out) if Out is not None else []
        if i >= len(arr):
            arr.extend(np.zeros((0,), X.dtype) for _ in range(i + 1 - len(arr)))
        arr[i] = X
        if lod is None:
            return {"Out": arr}
        lods = list(lod.get("Out") or [])
        lods += [None] * (len(arr) - len(lods))
        lods[i] = lod.get("X")
        return {"Out": arr, "lod": {"Out": lods}}

    def backward(self, X, I, dOut, lod=None):
        i = _index(I, "array_write")
        g = dOut[i] if dOut is not None and i < len(dOut) else None
        return {"X": np.zeros_like(X) if g is None or g.size == 0 and X.size else g}

    def grad_op_descs(self, g):
        """``write_to_array_grad``, then ``clear_tensor_array_entry`` on ``Out@GRAD``: the
        write replaced entry ``I``, so the array's value before the write gets no gradient at
        ``I`` (every other entry passes through unchanged). Gradients of reads made before the
        write accumulate onto the cleared array (``backward._accumulate``)."""
        super().grad_op_descs(g)
        dout = g.output_grad("Out")
        if dout is not None:
            g.append("clear_tensor_array_entry", {"X": dout, "I": g.input("I")},
                     {"Out": dout})
        return g.ops


@register
class ClearTensorArrayEntry(OpDef):
    """``Out = X`` with entry ``I`` set to zero (``None``; entries past the end stay absent).
    A backward-pass helper (no fluid counterpart): the gradient of the array value that a
    ``write_to_array`` overwrote."""
    type, inputs, outputs = "clear_tensor_array_entry", ("X", "I"), ("Out",)
    no_grad = True

    def infer(self, X, I):
        _check_index_spec(I, "clear_tensor_array_entry")
        return {"Out": X}

    def forward(self, X, I):
        i = _index(I, "clear_tensor_array_entry")
        out = list(X) if X is not None else []
        if 0 <= i < len(out):
            out[i] = None
        return {"Out": out}


@register
class ReadFromArray(OpDef):
    """``Out = X[I]`` (an IndexError names the array's length when ``I`` is past its end);
    ``dX`` is the array gradient holding ``dOut`` at ``I`` (zero elsewhere). ``Out`` gets the
    LoD element ``I`` was written with (``array_lod``)."""
    type, inputs, outputs = "read_from_array", ("X", "I"), ("Out",)
    grad_uses = ("I",)
    array_lod = True

    def infer(self, X, I):
        _check_index_spec(I, "read_from_array")
        return {"Out": X}

    def forward(self, X, I, lod=None):
        i = _index(I, "array_read")
        n = len(X) if X is not None else 0
        if not 0 <= i < n:
            raise IndexError(f"array_read: index {i} is out of range: the array has {n} "
                             f"element(s) (valid indices 0..{n - 1})")
        if lod is None:
            return {"Out": X[i]}
        lods = lod.get("X") or []
        return {"Out": X[i], "lod": {"Out": lods[i] if i < len(lods) else None}}

    def lower(self, in_specs, attrs):
        return lambda x, i: self.forward(x, i)["Out"]

    def backward(self, I, dOut, lod=None):
        i = _index(I, "array_read")
        grad: List[Optional[np.ndarray]] = [None] * (i + 1)
        grad[i] = dOut
        return {"X": grad}


def add_arrays(a: Optional[list], b: Optional[list]) -> Optional[list]:
    """Position-wise sum of two array gradients (``None`` entries are zeros, and so are the
    empty tensors a ``write_to_array`` leaves in the gaps: Paddle's array gradients, written
    by ``write_to_array``, have them where nothing was read)."""
    if a is None:
        return b
    if b is None:
        return a
    out = list(a) + [None] * max(0, len(b) - len(a))
    for k, v in enumerate(b):
        if v is None or (v.size == 0 and out[k] is not None):
            continue
        out[k] = v if out[k] is None or out[k].size == 0 else out[k] + v
    return out


@register
class SumTensorArray(OpDef):
    """Position-wise sum of array gradients, ``Out[k] = sum_j X[j][k]`` (``None`` = zero); the
    backward pass uses it instead of ``sum`` where an array is read several times."""
    type, inputs, outputs = "sum_tensor_array", ("X*?",), ("Out",)
    no_grad = True

    def infer(self, X):
        return {"Out": X[0]} if X else {}

    def forward(self, X):
        out = None
        for x in X:
            out = add_arrays(out, x)
        return {"Out": out if out is not None else []}


@register
class LodArrayLength(OpDef):
    """``Out = [len(X)]`` (int64, shape [1])."""
    type, inputs, outputs = "lod_array_length", ("X",), ("Out",)
    no_grad = True

    def infer(self, X):
        return {"Out": VarSpec((1,), VarType.INT64)}

    def forward(self, X):
        return {"Out": np.array([len(X) if X is not None else 0], np.int64)}

    def lower(self, in_specs, attrs):
        return lambda x: np.array([len(x) if x is not None else 0], np.int64)


@register
class TensorArrayToTensor(OpDef):
    """Concatenate (``use_stack``: stack) the array's tensors along ``axis``; ``OutIndex`` holds
    each tensor's size along ``axis`` (int32). ``dX[k]`` is the slice of ``dOut`` of entry k."""
    type, inputs, outputs = "tensor_array_to_tensor", ("X",), ("Out", "OutIndex")
    grad_uses = ("X",)

    def infer(self, X, *, axis=1, use_stack=False):
        shape = list(X.shape)
        if use_stack:
            ax = axis if axis >= 0 else axis + len(shape) + 1
            shape.insert(ax, -1)
        elif shape:
            ax = axis if axis >= 0 else axis + len(shape)
            shape[ax] = -1
        return {"Out": X.with_(shape=shape), "OutIndex": VarSpec((-1,), VarType.INT32)}

    def forward(self, X, *, axis=1, use_stack=False):
        if not X:
            raise ValueError("tensor_array_to_tensor: the array is empty")
        if use_stack:
            out = np.stack(X, axis=axis)
            index = np.ones(len(X), np.int32)
        else:
            out = np.concatenate(X, axis=axis)
            index = np.array([x.shape[axis] for x in X], np.int32)
        return {"Out": out, "OutIndex": index}

    def backward(self, X, dOut, dOutIndex=None, *, axis=1, use_stack=False):
        if use_stack:
            ax = axis if axis >= 0 else axis + dOut.ndim
            return {"X": [np.take(dOut, k, axis=ax) for k in range(len(X))]}
        ax = axis if axis >= 0 else axis + dOut.ndim
        bounds = np.cumsum([x.shape[ax] for x in X])[:-1]
        return {"X": np.split(dOut, bounds, axis=ax)}


@register
class IsEmpty(OpDef):
    """``Out = [X.size == 0]`` (bool, shape [1])."""
    type, inputs, outputs = "is_empty", ("X",), ("Out",)
    no_grad = True

    def infer(self, X):
        return {"Out": VarSpec((1,), VarType.BOOL)}

    def forward(self, X):
        return {"Out": np.array([np.asarray(X).size == 0])}


# -- IfElse: sequences (rows without LoD) split by a mask and merged back ----------------------
def _mask_of(Mask: Any, n: int, op: str) -> np.ndarray:
    m = np.asarray(Mask).reshape(-1).astype(bool)
    if m.size != n:
        raise ValueError(f"{op}: the mask has {m.size} entries but the input has {n} "
                         f"sequences (rows when it has no LoD)")
    return m


def _ranges(offs: np.ndarray, picks: np.ndarray) -> np.ndarray:
    parts = [np.arange(offs[k], offs[k + 1]) for k in np.flatnonzero(picks)]
    return np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64)


def _lengths_lod(offs: np.ndarray, picks: np.ndarray) -> tuple:
    lengths = np.diff(offs)[picks]
    return (tuple(int(v) for v in np.concatenate([[0], np.cumsum(lengths)])),)


@register
class SplitLodTensor(OpDef):
    """``OutTrue`` / ``OutFalse``: the sequences of ``X`` (at LoD ``level``; rows when ``X`` has
    no LoD) whose ``Mask`` entry is true / false, in order, with their LoD; ``dX`` puts each
    part's gradient back at its rows."""
    type, inputs, outputs = "split_lod_tensor", ("X", "Mask"), ("OutTrue", "OutFalse")
    grad_uses = ("X", "Mask")
    lod_aware = True

    def infer(self, X, Mask, *, level=0):
        spec = X.with_(shape=(-1,) + tuple(X.shape[1:]))
        return {"OutTrue": spec, "OutFalse": spec}

    def forward(self, X, Mask, lod=None, *, level=0):
        x_lod = (lod or {}).get("X")
        offs = _seq_offsets(X, x_lod, level)
        m = _mask_of(Mask, len(offs) - 1, "split_lod_tensor")
        out = {"OutTrue": X[_ranges(offs, m)], "OutFalse": X[_ranges(offs, ~m)]}
        if x_lod:
            out["lod"] = {"OutTrue": _lengths_lod(offs, m), "OutFalse": _lengths_lod(offs, ~m)}
        return out

    def backward(self, X, Mask, dOutTrue, dOutFalse, lod=None, *, level=0):
        offs = _seq_offsets(X, (lod or {}).get("X"), level)
        m = _mask_of(Mask, len(offs) - 1, "split_lod_tensor")
        dX = np.zeros_like(X)
        if dOutTrue is not None:
            dX[_ranges(offs, m)] = dOutTrue
        if dOutFalse is not None:
            dX[_ranges(offs, ~m)] = dOutFalse
        return {"X": dX, "Mask": None}


def _merge_rows(Mask: Any, true_offs: np.ndarray, false_offs: np.ndarray) -> tuple:
    """Per mask entry, the rows of the merged tensor taken from InTrue / InFalse."""
    m = np.asarray(Mask).reshape(-1).astype(bool)
    if m.sum() != len(true_offs) - 1 or (~m).sum() != len(false_offs) - 1:
        raise ValueError(f"merge_lod_tensor: the mask selects {int(m.sum())} true and "
                         f"{int((~m).sum())} false sequences, but InTrue holds "
                         f"{len(true_offs) - 1} and InFalse {len(false_offs) - 1}")
    pos, lengths, rows_t, rows_f = 0, [], [], []
    kt = kf = 0
    for flag in m:
        offs, k = (true_offs, kt) if flag else (false_offs, kf)
        n = int(offs[k + 1] - offs[k])
        (rows_t if flag else rows_f).append(np.arange(pos, pos + n))
        lengths.append(n)
        pos += n
        if flag:
            kt += 1
        else:
            kf += 1
    cat = lambda r: np.concatenate(r).astype(np.int64) if r else np.zeros(0, np.int64)
    return cat(rows_t), cat(rows_f), pos, lengths


def _in_offs(x: Any, lod: Any) -> np.ndarray:
    if x is None:
        return np.zeros(1, np.int64)
    return _seq_offsets(x, lod)


@register
class MergeLodTensor(OpDef):
    """The inverse of ``split_lod_tensor``: for each ``Mask`` entry in order, the next sequence
    of ``InTrue`` (true) or ``InFalse`` (false); ``Out`` has their LoD when they have one (a
    branch that did not run holds nothing). ``dInTrue`` / ``dInFalse``: the rows of ``dOut``
    each came from."""
    type, inputs, outputs = "merge_lod_tensor", ("X", "Mask", "InTrue", "InFalse"), ("Out",)
    grad_uses = ("X", "Mask", "InTrue", "InFalse")
    lod_aware = True

    def infer(self, X, Mask, InTrue, InFalse, *, level=0):
        ref = InTrue if InTrue is not None else InFalse
        return {"Out": ref.with_(shape=(-1,) + tuple(ref.shape[1:]))}

    def forward(self, X, Mask, InTrue, InFalse, lod=None, *, level=0):
        lod = lod or {}
        rt, rf, n, lengths = _merge_rows(Mask, _in_offs(InTrue, lod.get("InTrue")),
                                         _in_offs(InFalse, lod.get("InFalse")))
        ref = InTrue if InTrue is not None and np.size(InTrue) else InFalse
        out = np.zeros((n,) + tuple(np.shape(ref)[1:]), np.asarray(ref).dtype)
        if rt.size:
            out[rt] = InTrue
        if rf.size:
            out[rf] = InFalse
        res: Dict[str, Any] = {"Out": out}
        if lod.get("InTrue") or lod.get("InFalse"):
            res["lod"] = {"Out": (tuple(int(v) for v in np.concatenate(
                [[0], np.cumsum(lengths)])),)}
        return res

    def backward(self, X, Mask, InTrue, InFalse, dOut, lod=None, *, level=0):
        lod = lod or {}
        rt, rf, _, _ = _merge_rows(Mask, _in_offs(InTrue, lod.get("InTrue")),
                                   _in_offs(InFalse, lod.get("InFalse")))
        return {"X": None, "Mask": None, "InTrue": dOut[rt], "InFalse": dOut[rf]}


# -- Print / Assert ---------------------------------------------------------------------------
@register
class Print(OpDef):
    """``Out = In``, printing the tensor (name, shape, dtype, LoD, the first ``summarize``
    values) to standard output each time the op runs, as fluid's ``Print``; ``dIn = dOut``
    (``print_phase`` 'backward'/'both' also prints the gradient)."""
    type, inputs, outputs = "print", ("In",), ("Out",)
    grad_uses = ()

    def infer(self, In, **attrs):
        return {"Out": In}

    def bind(self, in_specs, attrs, outputs_present):
        """``first_n`` > 0 logs only the first ``first_n`` runs of this op (counted per
        compiled plan); 0 or below logs every run (fluid's print_op: ``first_n > 0 &&
        ++times_ > first_n`` skips). The value always passes through."""
        kw = self.kernel_attrs(attrs)
        first_n = int(kw.get("first_n", -1))
        runs = [0]

        def run(In):
            runs[0] += 1
            if first_n <= 0 or runs[0] <= first_n:
                return self.forward(In, **kw)
            return {"Out": In}
        return Binding(run, False)

    def forward(self, In, *, first_n=-1, message="", summarize=20, print_tensor_name=True,
                print_tensor_type=True, print_tensor_shape=True, print_tensor_lod=True,
                print_phase="both", var_name="", is_forward=True):
        # fluid 1.8's layers.Print stores the phase upper-case ("BOTH"): a loaded program has it
        if print_phase.lower() in ("forward", "both"):
            _log_tensor(In, message, summarize, var_name if print_tensor_name else "",
                        print_tensor_type, print_tensor_shape, print_tensor_lod)
        return {"Out": In}

    def backward(self, dOut, *, message="", summarize=20, print_tensor_name=True,
                 print_tensor_type=True, print_tensor_shape=True, print_tensor_lod=True,
                 print_phase="both", var_name="", **_):
        if print_phase.lower() in ("backward", "both"):
            _log_tensor(dOut, message, summarize,
                        (var_name + "@GRAD") if print_tensor_name else "",
                        print_tensor_type, print_tensor_shape, print_tensor_lod)
        return {"In": dOut}


_DTYPE_CODES = {"float32": "float", "float64": "double", "float16": "float16", "int32": "int",
                "int64": "int64_t", "bool": "bool", "uint8": "uint8_t", "int8": "int8_t"}


def _log_tensor(x: Any, message: str, summarize: int, name: str, show_type: bool,
                show_shape: bool, show_lod: bool) -> None:
    """Write the tensor to standard output as fluid 1.8's ``Print`` did (its C++ kernel wrote
    to stdout): the message, then ``Tensor[name]`` with shape, dtype, LoD and the first
    ``summarize`` values (all with -1), one field per indented line."""
    arr = np.asarray(x)
    lines = [f"{time.time():.0f}\t{message}" if message else f"{time.time():.0f}"]
    lines.append(f"Tensor[{name}]" if name else "Tensor")
    if show_shape:
        lines.append("    shape: [" + "".join(f"{d}," for d in arr.shape) + "]")
    if show_type:
        lines.append(f"    dtype: {_DTYPE_CODES.get(arr.dtype.name, arr.dtype.name)}")
    lod = getattr(x, "lod", None)
    if show_lod and lod:
        lines.append("    LoD: [" + "".join("[" + "".join(f"{o}," for o in level) + "]"
                                            for level in lod) + "]")
    flat = arr.reshape(-1)
    shown = flat if summarize < 0 else flat[:summarize]
    lines.append("    data: " + "".join(f"{v.item()}," for v in shown))
    sys.stdout.write("\n".join(lines) + "\n")     # the op's purpose: fluid printed to stdout
    sys.stdout.flush()


@register
class Assert(OpDef):
    """Raise ``ValueError`` when ``Cond`` (one bool element) is false, showing up to
    ``summarize`` values of each ``Data`` tensor."""
    type, inputs, outputs = "assert", ("Cond", "Data*"), ()
    no_grad = True

    def infer(self, Cond, Data, **attrs):
        if S.numel(Cond.shape) not in (1, -1):
            raise ValueError(f"Assert: the condition must hold one element, but its shape is "
                             f"{list(Cond.shape)}")
        if Cond.dtype != VarType.BOOL:
            raise ValueError(f"Assert: the condition must be bool, but it is "
                             f"{Cond.dtype.name.lower()}")
        return {}

    def forward(self, Cond, Data, *, summarize=20):
        if bool(np.asarray(Cond).reshape(-1)[0]):
            return {}
        lines = ["Assert failed: the condition is False"]
        for k, d in enumerate(Data):
            flat = np.asarray(d).reshape(-1)
            shown = flat if summarize < 0 else flat[:summarize]
            lines.append(f"  Data[{k}]: shape {list(np.shape(d))}, values "
                         + " ".join(repr(v.item()) for v in shown))
        raise ValueError("\n".join(lines))


# -- LoD rank tables (the machinery of fluid's DynamicRNN) -------------------------------------
def _seq_offsets(X: Any, lod: Any, level: int = 0) -> np.ndarray:
    """Row offsets of the sequences of ``X`` at LoD ``level`` (each row is a sequence of one
    when ``X`` has no LoD)."""
    if lod:
        offs = np.asarray(lod[level], np.int64)
        for deeper in lod[level + 1:]:        # rows of the last level
            offs = np.asarray(deeper, np.int64)[offs]
        return offs
    return np.arange(np.shape(X)[0] + 1, dtype=np.int64)


class RankTable(tuple):
    """fluid's ``LoDRankTable``: the ``(index, length)`` of each sequence at LoD ``level``
    (its length counted in elements of the next level: rows for the last level, sub-sequences
    above it), longest first with ties in input order, and ``coarse_lod``, the LoD levels above
    ``level`` that ``array_to_lod_tensor`` puts back."""

    def __new__(cls, items: Any = (), level: int = 0, coarse_lod: Any = ()) -> "RankTable":
        self = super().__new__(cls, (tuple(item) for item in items))
        self.level, self.coarse_lod = int(level), tuple(tuple(l) for l in coarse_lod)
        return self

    def __getnewargs__(self) -> tuple:
        return tuple(self), self.level, self.coarse_lod


def _table_of(RankTable: Any) -> List[tuple]:
    return [tuple(item) for item in RankTable]


def _sub_lod(lod: Any, start: int, end: int, level: int) -> tuple:
    """fluid's ``GetSubLoDAndAbsoluteOffset``: the lengths, level by level from ``level`` down,
    of the elements ``[start, end)`` of LoD ``level``, and the rows ``[first, last)`` they
    span."""
    lengths = []
    for offs in lod[level:]:
        lengths.append([offs[i + 1] - offs[i] for i in range(start, end)])
        start, end = offs[start], offs[end]
    return lengths, int(start), int(end)


def _append_lod(acc: List[List[int]], lengths: List[List[int]]) -> None:
    """fluid's ``AppendLoD``: extend the offset levels ``acc`` by ``lengths``."""
    if not acc:
        acc.extend([0] for _ in lengths)
    for level, lens in zip(acc, lengths):
        for n in lens:
            level.append(level[-1] + n)


def _frozen(acc: List[List[int]]) -> Optional[tuple]:
    return tuple(tuple(level) for level in acc) or None


@register
class LodRankTable(OpDef):
    """``Out``: the rank table of ``X``'s sequences at LoD ``level`` (``RankTable``): the
    (index, length) of each, longest first, ties in order. A length counts the elements of the
    next level (rows when ``level`` is ``X``'s last, sub-sequences above it). ``X`` without
    LoD ranks its rows as sequences of one."""
    type, inputs, outputs = "lod_rank_table", ("X",), ("Out",)
    lod_aware = True
    no_grad = True

    def infer(self, X, *, level=0):
        return {}

    def forward(self, X, lod=None, *, level=0):
        x_lod = (lod or {}).get("X")
        if x_lod:
            if not 0 <= level < len(x_lod):
                raise ValueError(f"lod_rank_table: level {level} is out of range for X's LoD of "
                                 f"{len(x_lod)} level(s); pick a level in [0, {len(x_lod)})")
            lengths = np.diff(np.asarray(x_lod[level], np.int64))
        elif level != 0:
            raise ValueError(f"lod_rank_table: X has no LoD, so only level 0 (its rows) can be "
                             f"ranked, but level is {level}")
        else:
            lengths = np.ones(np.shape(X)[0], np.int64)
        order = sorted(range(len(lengths)), key=lambda k: -int(lengths[k]))
        return {"Out": RankTable(((k, int(lengths[k])) for k in order), level,
                                 tuple(x_lod[:level]) if x_lod else ())}


@register
class MaxSequenceLen(OpDef):
    """``Out = [length of the longest sequence]`` of a rank table (int64 [1])."""
    type, inputs, outputs = "max_sequence_len", ("RankTable",), ("Out",)
    no_grad = True

    def infer(self, RankTable):
        return {"Out": VarSpec((1,), VarType.INT64)}

    def forward(self, RankTable):
        table = _table_of(RankTable)
        return {"Out": np.array([table[0][1] if table else 0], np.int64)}


def _step_pieces(X: Any, RankTable: Any, x_lod: Any) -> List[tuple]:
    """Per step t, the row ranges and the sub-LoD lengths of step t of each sequence still
    running (in rank order): element t (at the level below the table's) of every sequence."""
    table, level = _table_of(RankTable), getattr(RankTable, "level", 0)
    if not x_lod:
        if level != 0:
            raise ValueError(f"lod_tensor_to_array: the rank table ranks LoD level {level}, but X "
                             f"has no LoD")
        x_lod = (tuple(range(np.shape(X)[0] + 1)),)
    elif level >= len(x_lod):
        raise ValueError(f"lod_tensor_to_array: the rank table ranks LoD level {level}, but X's "
                         f"LoD has {len(x_lod)} level(s)")
    steps: List[tuple] = [([], []) for _ in range(table[0][1] if table else 0)]
    for k, n in table:
        first = x_lod[level][k]
        if x_lod[level][k + 1] - first != n:
            raise ValueError(f"lod_tensor_to_array: sequence {k} of X has "
                             f"{x_lod[level][k + 1] - first} steps but the rank table says {n}; "
                             f"build the table from a tensor with X's LoD")
        for t in range(n):
            lengths, lo, hi = _sub_lod(x_lod, first + t, first + t + 1, level + 1)
            steps[t][0].append((lo, hi))
            steps[t][1].append(lengths)
    return steps


def _rows_of(ranges: List[tuple]) -> np.ndarray:
    parts = [np.arange(lo, hi) for lo, hi in ranges]
    return np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64)


@register
class LodTensorToArray(OpDef):
    """Time-major slices of ``X``'s sequences in rank-table order: ``Out[t]`` holds step t of
    every sequence longer than t (longest first) -- a row when the table ranks ``X``'s last
    LoD level, a whole sub-sequence (with its LoD) above it. ``dX`` scatters the slices back."""
    type, inputs, outputs = "lod_tensor_to_array", ("X", "RankTable"), ("Out",)
    lod_aware = True
    grad_uses = ("X", "RankTable")

    def infer(self, X, RankTable):
        return {"Out": X.with_(shape=(-1,) + tuple(X.shape[1:]))}

    def forward(self, X, RankTable, lod=None):
        out, lods = [], []
        for ranges, lengths in _step_pieces(X, RankTable, (lod or {}).get("X")):
            out.append(X[_rows_of(ranges)])
            acc: List[List[int]] = []
            for piece in lengths:
                _append_lod(acc, piece)
            lods.append(_frozen(acc))
        return {"Out": out, "lod": {"Out": lods}}

    def backward(self, X, RankTable, dOut, lod=None):
        dX = np.zeros_like(X)
        steps = _step_pieces(X, RankTable, (lod or {}).get("X"))
        for (ranges, _), g in zip(steps, dOut or []):
            if g is not None and np.size(g):
                dX[_rows_of(ranges)] += g
        return {"X": dX}


@register
class ArrayToLodTensor(OpDef):
    """The inverse of ``lod_tensor_to_array``: the sequences reassembled in their original
    order, with their LoD. ``dX[t]`` is the rows of ``dOut`` that came from ``X[t]``."""
    type, inputs, outputs = "array_to_lod_tensor", ("X", "RankTable"), ("Out",)
    lod_aware = True
    grad_uses = ("X", "RankTable")

    def infer(self, X, RankTable):
        return {"Out": X.with_(shape=(-1,) + tuple(X.shape[1:]))} if X.shape else {}

    @staticmethod
    def _pieces(X: List[Any], RankTable: Any, x_lods: Any) -> tuple:
        """Where each piece goes: per step t, (source rows in ``X[t]``, rows of ``Out``), and
        ``Out``'s LoD -- the table's coarse levels, the sequences' step counts, then the pieces'
        own LoD in output order (fluid's ``array_to_lod_tensor``)."""
        table = _table_of(RankTable)
        x_lods = list(x_lods or []) + [None] * len(X)
        rank_of = {k: p for p, (k, _) in enumerate(table)}
        top, deeper, moves = [0], [], [([], []) for _ in X]
        row = 0
        for k in sorted(rank_of):
            n = table[rank_of[k]][1]
            if n > len(X):
                raise ValueError(f"array_to_lod_tensor: sequence {k} has {n} steps but the "
                                 f"array holds {len(X)}")
            top.append(top[-1] + n)
            for t in range(n):
                p = rank_of[k]
                if x_lods[t]:
                    lengths, lo, hi = _sub_lod(x_lods[t], p, p + 1, 0)
                    _append_lod(deeper, lengths)
                else:
                    lo, hi = p, p + 1
                moves[t][0].append((lo, hi))
                moves[t][1].append((row, row + hi - lo))
                row += hi - lo
        coarse = tuple(getattr(RankTable, "coarse_lod", ()))
        return moves, row, coarse + (tuple(top),) + (_frozen(deeper) or ())

    def forward(self, X, RankTable, lod=None):
        if not X:
            raise ValueError("array_to_lod_tensor: the array is empty")
        moves, rows, out_lod = self._pieces(X, RankTable, (lod or {}).get("X"))
        out = np.zeros((rows,) + tuple(X[0].shape[1:]), X[0].dtype)
        for x, (src, dst) in zip(X, moves):
            out[_rows_of(dst)] = x[_rows_of(src)]
        return {"Out": out, "lod": {"Out": out_lod}}

    def backward(self, X, RankTable, dOut, lod=None):
        moves, _, _ = self._pieces(X, RankTable, (lod or {}).get("X"))
        dX = []
        for x, (src, dst) in zip(X, moves):
            g = np.zeros(np.shape(x), dOut.dtype)
            g[_rows_of(src)] = dOut[_rows_of(dst)]
            dX.append(g)
        return {"X": dX}


@register
class ReorderLodTensorByRank(OpDef):
    """``X``'s sequences (at its LoD level 0, each with its nested LoD; rows without LoD)
    reordered as the rank table lists them (longest first); ``dX`` puts the gradient back in
    the original order."""
    type, inputs, outputs = "reorder_lod_tensor_by_rank", ("X", "RankTable"), ("Out",)
    lod_aware = True
    grad_uses = ("X", "RankTable")

    def infer(self, X, RankTable):
        return {"Out": X}

    @staticmethod
    def _index(X: Any, table: List[tuple], lod: Any) -> tuple:
        n = len(lod[0]) - 1 if lod else np.shape(X)[0]
        ranges, acc = [], [[0] for _ in lod or ()]
        for k, _ in table:
            if not 0 <= k < n:
                raise ValueError(f"reorder_lod_tensor_by_rank: the rank table names sequence {k} "
                                 f"but X has {n}; build the table from X's batch")
            if lod:
                lengths, lo, hi = _sub_lod(lod, k, k + 1, 0)
                _append_lod(acc, lengths)
            else:
                lo, hi = k, k + 1
            ranges.append((lo, hi))
        return _rows_of(ranges), _frozen(acc)

    def forward(self, X, RankTable, lod=None):
        rows, out_lod = self._index(X, _table_of(RankTable), (lod or {}).get("X"))
        return {"Out": X[rows], "lod": {"Out": out_lod} if out_lod else {}}

    def backward(self, X, RankTable, dOut, lod=None):
        rows, _ = self._index(X, _table_of(RankTable), (lod or {}).get("X"))
        dX = np.zeros_like(X)
        dX[rows] = dOut
        return {"X": dX}


@register
class ShrinkRnnMemory(OpDef):
    """``Out = X[:k]``, k the number of sequences longer than step ``I`` (the batch of a
    DynamicRNN step in rank order); when ``X`` has a LoD, its first k sequences with their
    LoD. ``dX`` is ``dOut`` padded with zero rows."""
    type, inputs, outputs = "shrink_rnn_memory", ("X", "I", "RankTable"), ("Out",)
    lod_aware = True
    grad_uses = ("X", "I", "RankTable")

    def infer(self, X, I, RankTable):
        return {"Out": X.with_(shape=(-1,) + tuple(X.shape[1:]))}

    def forward(self, X, I, RankTable, lod=None):
        i = _index(I, "shrink_memory")
        k = sum(1 for _, n in _table_of(RankTable) if n > i)
        x_lod = (lod or {}).get("X")
        if x_lod and len(x_lod[0]) > k:
            lengths, _, rows = _sub_lod(x_lod, 0, k, 0)
            acc: List[List[int]] = []
            _append_lod(acc, lengths)
            return {"Out": X[:rows], "lod": {"Out": _frozen(acc)}}
        return {"Out": X[:k]}

    def backward(self, X, I, RankTable, dOut, lod=None):
        dX = np.zeros_like(X)
        dX[:dOut.shape[0]] = dOut
        return {"X": dX}


@register
class MergeLodTensorInfer(MergeLodTensor):
    """``merge_lod_tensor`` for inference programs (fluid 1.8: the same merge, no gradient;
    fluid also frees InTrue / InFalse afterwards, a memory saving with no visible effect)."""
    type = "merge_lod_tensor_infer"
    grad_uses = None
    no_grad = True


@register
class RnnMemoryHelper(OpDef):
    """fluid's StaticRNN memory link: ``Out = X`` (a copy, X's LoD kept). ``dX = dOut``, zeros
    of X's shape when no gradient reaches Out (fluid: a fill_constant 0)."""
    type, inputs, outputs = "rnn_memory_helper", ("X",), ("Out",)
    grad_uses = ("X", "Out")

    def infer(self, X, *, dtype=int(VarType.FP32)):
        return {"Out": X}

    def forward(self, X, *, dtype=int(VarType.FP32)):
        return {"Out": np.array(X, copy=True)}

    def backward(self, X, Out, dOut=None, *, dtype=int(VarType.FP32)):
        return {"X": np.zeros_like(X) if dOut is None else np.array(dOut, copy=True)}


@register
class SelectOutput(OpDef):
    """The inverse of ``select_input``: ``Out[Mask] = X`` (``Mask``: an integer tensor of one
    element in ``[0, len(Out))``; the value is passed through, no copy). The other outputs are
    not written (Paddle leaves them as they were; here they hold no value). ``dX = dOut[Mask]``
    (Paddle's grad maker: ``select_input(Out@GRAD, Mask)``)."""
    type, inputs, outputs = "select_output", ("X", "Mask"), ("Out*",)
    grad_uses = ("X", "Mask")

    def infer(self, X, Mask):
        if S.numel(Mask.shape) not in (1, -1):
            raise ValueError(f"select_output: input Mask must hold exactly one element, but its "
                             f"shape is {list(Mask.shape)}")
        return {"Out": [X]}

    def bind(self, in_specs, attrs, outputs_present):
        # the kernel returns one value per output variable: the plan tells how many
        count = getattr(in_specs, "output_count", None)
        n = count("Out") if count is not None else None
        return Binding(functools.partial(self.forward, n_out=n), False)

    @staticmethod
    def _branch(Mask: Any, n: Optional[int]) -> int:
        m = np.asarray(Mask)
        if m.size != 1:
            raise ValueError(f"select_output: input Mask must hold exactly one element, but its "
                             f"shape is {list(m.shape)}")
        i = int(m.reshape(-1)[0])
        if i < 0 or n is not None and i >= n:
            raise ValueError(f"select_output: Mask must be in [0, {n}) (the number of outputs "
                             f"Out), but received {i}")
        return i

    def forward(self, X, Mask, n_out=None):
        i = self._branch(Mask, n_out)
        out: List[Any] = [None] * (n_out if n_out is not None else i + 1)
        out[i] = X
        return {"Out": out}

    def backward(self, X, Mask, dOut):
        i = self._branch(Mask, len(dOut))
        g = dOut[i]
        return {"X": np.zeros_like(X) if g is None or np.shape(g) != np.shape(X) else g}
