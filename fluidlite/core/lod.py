"""LoD (level of detail) at run time: how sequence offsets travel through a compiled plan.

Between two ops of a plan a value that has a LoD travels as a ``LoDArray``: a view of the
ndarray carrying ``.lod`` (a tuple of offset tuples, fluid's ``LoDTensor.lod()``). Kernels never
see one: when a program uses LoD (a variable declared with ``lod_level > 0`` or an op with
``lod_aware = True``), the plan compiler passes every binding through ``wrap_binding``, which
strips the inputs to plain arrays, calls the kernel and attaches the output LoD given by the
op's rule. Programs without LoD compile exactly as before (no wrapper, no cost).

**An op's LoD rule lives in its OpDef** (read with ``getattr``, so existing ops need nothing):

* ``lod_aware = True``: ``forward(..., lod=None, *, attrs)`` receives ``lod``, a dict
  ``{input slot: lod or None}`` (a list for duplicable slots), and returns the output LoD under
  the key ``"lod"`` (``{output slot: lod}``; an output it does not name has none). ``backward``
  receives the same dict for its forward-input slots; ``<X>@GRAD`` gets the LoD of ``X``.
* ``array_lod = True``: the same contract as ``lod_aware`` for ops that move tensors in and
  out of tensor arrays (``write_to_array``, ``read_from_array``): an array's LoD is a list
  holding each element's LoD, so every element keeps its own. Unlike ``lod_aware`` it does not
  by itself make a program track LoD (a program of arrays of plain tensors stays unwrapped).
  The slots in ``reads_outputs`` (the array's previous value) get their LoD too.
* ``lod_passthrough = True`` (with ``lod_aware``): the op only passes on LoD its inputs have
  (``concat`` joins them); it makes no LoD of its own, so it does not by itself make a program
  track LoD either -- a ResNet or an LSTM that concatenates plain tensors stays unwrapped (and
  a dygraph step of it can be replayed).
* ``lod_share = ("X",)`` (default: every input slot, in order): fluid's ``ShareLoD`` -- each
  output whose first dimension equals the row count of the first of these inputs that has a
  LoD gets that LoD; ``lod_share = ()`` drops it (reductions, losses). A generated
  ``<type>_grad`` op gives ``<X>@GRAD`` the LoD of ``X``.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import names
from .registry import Binding, OpDef

Lod = Tuple[Tuple[int, ...], ...]

__all__ = ["LoDArray", "normalize", "lod_of", "strip", "strip_all", "attach", "block_uses_lod",
           "wrap_binding", "lengths_to_offsets", "drop_stale"]


class LoDArray(np.ndarray):
    """An ndarray view with ``.lod``; results of numpy operations on it carry no LoD."""

    lod: Optional[Lod] = None

    def __array_finalize__(self, obj: Any) -> None:
        self.lod = None          # never inherited: only an op's rule gives an output its LoD


def normalize(lod: Any) -> Optional[Lod]:
    """``lod`` (any nested sequence of offsets) as a tuple of int tuples; None when empty."""
    if lod is None:
        return None
    out = tuple(tuple(int(v) for v in level) for level in lod)
    return out or None


def lengths_to_offsets(lengths: Sequence[Any]) -> Tuple[int, ...]:
    return tuple(int(v) for v in np.concatenate([[0], np.cumsum(np.asarray(lengths, np.int64))]))


def lod_of(value: Any) -> Optional[Lod]:
    return value.lod if type(value) is LoDArray else None


def strip(value: Any) -> Any:
    """The plain ndarray under a LoDArray (a view, no copy); other values unchanged."""
    if type(value) is LoDArray:
        return value.view(np.ndarray)
    if isinstance(value, list):
        return [strip(v) for v in value]
    return value


def strip_all(values: Sequence[Any]) -> tuple:
    return tuple(strip(v) for v in values)


def attach(value: Any, lod: Optional[Lod]) -> Any:
    """``value`` carrying ``lod`` (a LoDArray view) when its rows match the LoD's last level."""
    if lod is None or not isinstance(value, np.ndarray) or value.ndim == 0 \
            or value.shape[0] != lod[-1][-1]:
        return value
    out = value.view(LoDArray)
    out.lod = lod
    return out


def drop_stale(holders: Sequence[Any], written: Sequence[Any],
               written_lods: Optional[Sequence[Optional[Lod]]], names: Sequence[str] = (),
               read: Any = ()) -> None:
    """After a run wrote the persistables ``holders`` (scope variables named ``names``) with
    ``written``: one written by an op without a LoD loses the LoD it held before, as in fluid
    (an op's output LoD is the one its rule gives, none otherwise). ``written_lods`` (the LoD
    each value left the plan with) is None for a plan without LoD tracking; there a variable
    the run also read (``read``: names; an in-place update such as an optimizer step, whose
    output shares its input's LoD in fluid) keeps its LoD while its rows still match it."""
    for i, h in enumerate(holders):
        t = getattr(h, "_tensor", None)
        if t is None or not t._lod:
            continue
        if written_lods is not None:
            if written_lods[i] is None:
                t._lod = []
            continue
        arr = written[i]
        in_place = i < len(names) and names[i] in read
        if not in_place or not isinstance(arr, np.ndarray) or arr.ndim == 0 \
                or arr.shape[0] != t._lod[-1][-1]:
            t._lod = []


def block_uses_lod(block: Any) -> bool:
    """Does a block need LoD tracking: a variable with ``lod_level > 0`` or a LoD-aware op
    that can make LoD (not only pass it on: ``lod_passthrough``)."""
    from .registry import has_op, get_op_def
    if any(getattr(v, "lod_level", 0) for v in block.vars.values()):
        return True
    for op in block.ops:
        if has_op(op.type):
            d = get_op_def(op.type)
            if getattr(d, "lod_aware", False) and not getattr(d, "lod_passthrough", False):
                return True
    return False


# -- binding wrappers -------------------------------------------------------------------------
def _lods(args: Sequence[Any]) -> Tuple[List[Any], List[Any]]:
    plain, lods = [], []
    for a in args:
        if type(a) is LoDArray:
            plain.append(a.view(np.ndarray))
            lods.append(a.lod)
        elif isinstance(a, list):
            plain.append([strip(v) for v in a])
            lods.append([lod_of(v) for v in a])
        else:
            plain.append(a)
            lods.append(None)
    return plain, lods


def wrap_binding(opdef: OpDef, attrs: Any, binding: Binding) -> Binding:
    """The binding the plan calls in a program that uses LoD (see the module docstring)."""
    fwd = opdef.forward_def
    if getattr(opdef, "lod_aware", False) or getattr(opdef, "array_lod", False):
        return _aware_forward(opdef, attrs)
    if fwd is not None and (getattr(fwd, "lod_aware", False) or getattr(fwd, "array_lod", False)):
        return _aware_backward(opdef, fwd, attrs)
    return _share(opdef, binding)


def _first(lods: Sequence[Any]) -> Optional[Lod]:
    for lod in lods:
        if isinstance(lod, list):
            lod = next((l for l in lod if l is not None), None)
        if lod is not None:
            return lod
    return None


def _share(opdef: OpDef, binding: Binding) -> Binding:
    slots = [s.name for s in opdef.in_slots]
    share = getattr(opdef, "lod_share", None)
    picks = list(range(len(slots))) if share is None else [slots.index(s) for s in share]
    fn, single = binding.fn, binding.single
    grad_src: Dict[str, int] = {}
    if opdef.forward_def is not None:            # <X>@GRAD shares the LoD of X
        for s in opdef.forward_def.in_slots:
            if s.name in slots:
                grad_src[s.name] = slots.index(s.name)
    keys = binding.result_keys

    def run(*args: Any, **kw: Any) -> Any:
        plain, lods = _lods(args)
        res = fn(*plain, **kw)
        if all(l is None for l in lods):
            return res
        lod = _first([lods[i] for i in picks])
        if single:
            return attach(res, lod)
        out = dict(res)
        for slot, key in keys.items():
            if key in out and key in grad_src and lods[grad_src[key]] is not None:
                out[key] = attach(out[key], lods[grad_src[key]])
        for k, v in out.items():
            if lod is not None and (k not in grad_src):
                out[k] = [attach(x, lod) for x in v] if isinstance(v, list) else attach(v, lod)
        return out

    return Binding(run, single, keys)


def _apply_out_lods(res: Dict[str, Any]) -> Dict[str, Any]:
    out_lods = res.pop("lod", None) or {}
    for slot, lod in out_lods.items():
        if slot not in res:
            continue
        if isinstance(res[slot], list):       # a tensor array: one LoD per element
            lods = list(lod or [])
            res[slot] = [attach(v, normalize(lods[k]) if k < len(lods) else None)
                         for k, v in enumerate(res[slot])]
        else:
            res[slot] = attach(res[slot], normalize(lod))
    return res


def _aware_forward(opdef: OpDef, attrs: Any) -> Binding:
    kw = opdef.kernel_attrs(attrs)
    slots = [s.name for s in opdef.in_slots] + list(getattr(opdef, "reads_outputs", ()))
    forward = opdef.forward

    def run(*args: Any) -> Dict[str, Any]:
        plain, lods = _lods(args)
        return _apply_out_lods(dict(forward(*plain, lod=dict(zip(slots, lods)), **kw)))

    return Binding(run, False, {})


def _aware_backward(opdef: OpDef, fwd: OpDef, attrs: Any) -> Binding:
    kw = opdef.kernel_attrs(attrs)
    uses = fwd.grad_uses if fwd.grad_uses is not None else tuple(s.name for s in fwd.in_slots)
    arg_keys = tuple(uses) + tuple("d" + s.name for s in fwd.out_slots)
    backward: Callable[..., Dict[str, Any]] = fwd.backward
    result_keys = {s.name + names.GRAD_SUFFIX: s.name for s in fwd.in_slots}

    def run(*args: Any) -> Dict[str, Any]:
        plain, lods = _lods(args)
        lod_by_slot = dict(zip(arg_keys, lods))
        res = dict(backward(**dict(zip(arg_keys, plain)), lod=lod_by_slot, **kw))
        for slot, g in res.items():
            res[slot] = attach(g, lod_by_slot.get(slot))
        return res

    return Binding(run, False, result_keys)
