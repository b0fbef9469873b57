"""Tensor creation and plumbing: fill_constant, assign, sum (gradient accumulation), ..."""
from __future__ import annotations

import numpy as np

from ..core.dtypes import VarType, to_numpy_dtype
from ..core.registry import OpDef, VarSpec, register


@register
class FillConstant(OpDef):
    """Out = full(shape, value, dtype)."""
    type, inputs, outputs = "fill_constant", (), ("Out",)
    no_grad = True
    extra_attrs = {"str_value": "", "force_cpu": False}

    def infer(self, *, shape=(), dtype=VarType.FP32):
        return {"Out": VarSpec(shape, dtype)}

    def forward(self, *, shape=[], dtype=VarType.FP32, value=0.0):
        return {"Out": np.full(shape, value, dtype=to_numpy_dtype(dtype))}


@register
class AssignValue(OpDef):
    """Out = array(values).reshape(shape)."""
    type, inputs, outputs = "assign_value", (), ("Out",)
    no_grad = True

    def infer(self, *, shape=(), dtype=VarType.FP32):
        return {"Out": VarSpec(shape, dtype)}

    def forward(self, *, shape=[], dtype=VarType.FP32, values=[]):
        return {"Out": np.asarray(values, dtype=to_numpy_dtype(dtype)).reshape(shape)}


@register
class FillAnyLike(OpDef):
    """Out = full_like(X, value) (dtype: X's unless ``dtype`` >= 0)."""
    type, inputs, outputs = "fill_any_like", ("X",), ("Out",)
    no_grad = True

    def infer(self, X, *, dtype=-1):
        return {"Out": X if dtype < 0 else X.with_(dtype=dtype)}

    def forward(self, X, *, value=0.0, dtype=-1):
        dt = X.dtype if dtype < 0 else to_numpy_dtype(dtype)
        return {"Out": np.full(X.shape, value, dtype=dt)}


@register
class FillZerosLike(OpDef):
    """Out = zeros_like(X)."""
    type, inputs, outputs = "fill_zeros_like", ("X",), ("Out",)
    no_grad = True

    def infer(self, X):
        return {"Out": X}

    def forward(self, X):
        return {"Out": np.zeros_like(X)}


@register
class Assign(OpDef):
    """Out = copy(X);  dX = dOut."""
    type, inputs, outputs = "assign", ("X",), ("Out",)

    def infer(self, X):
        return {"Out": X}

    def forward(self, X):
        return {"Out": np.array(X, copy=True)}

    def make_grad(self, g):
        g.append("assign", {"X": g.output_grad("Out")}, {"Out": g.input_grad("X")})


@register
class Sum(OpDef):
    """Out = X[0] + X[1] + ...;  dX[i] = dOut. Also accumulates repeated gradients."""
    type, inputs, outputs = "sum", ("X*",), ("Out",)
    extra_attrs = {"use_mkldnn": False}

    def infer(self, X):
        return {"Out": X[0]}

    def forward(self, X):
        if len(X) == 1:
            return {"Out": np.array(X[0], copy=True)}
        out = np.add(X[0], X[1])
        for x in X[2:]:
            np.add(out, x, out=out)
        return {"Out": out}

    def lower(self, in_specs, attrs):
        if in_specs and len(in_specs) == 2 and in_specs[0].shape == in_specs[1].shape:
            return lambda xs: np.add(xs[0], xs[1])
        return None

    def make_grad(self, g):
        for x, dx in zip(g.input("X"), g.input_grad("X") or []):
            if dx != "@EMPTY@":
                g.append("assign", {"X": g.output_grad("Out")}, {"Out": dx})


@register
class Feed(OpDef):
    """Marks a fed variable (in saved inference programs); the executor binds feeds itself."""
    type, inputs, outputs = "feed", ("X?",), ("Out",)
    no_grad = True

    def infer(self, X, *, col=0):
        return {}

    def forward(self, X, *, col=0):
        raise RuntimeError("feed ops are bound by the executor, not run")


@register
class Fetch(OpDef):
    """Marks a fetch target (in saved inference programs); the executor returns it itself."""
    type, inputs, outputs = "fetch", ("X",), ("Out?",)
    no_grad = True

    def infer(self, X, *, col=0):
        return {}

    def forward(self, X, *, col=0):
        raise RuntimeError("fetch ops are bound by the executor, not run")


# -- shared helpers for the shape/indexing ops below -------------------------------------------
def norm_axis(op_type: str, axis: int, rank: int, what: str = "axis", extra: int = 0) -> int:
    """``axis`` made non-negative; ValueError naming the op when outside [-rank-extra, rank+extra)."""
    n = rank + extra
    a = axis + n if axis < 0 else axis
    if not 0 <= a < n:
        raise ValueError(f"{op_type}: {what} {axis} is out of range for an input of rank {rank} "
                         f"(expected {-n} <= {what} < {n})")
    return a


def emit_grad_op(g, fwd_type: str, attrs, uses=(), out_grads=("Out",), in_grads=("X",),
                 in_slots=()) -> None:
    """Append ``<fwd_type>_grad`` reading only ``uses`` (forward inputs/outputs) and the listed
    output gradients, writing only the listed input gradients (fluid's explicit grad makers).

    Used by ops with several outputs (so unused output grads are not zero-filled) and by ops
    with integer inputs (whose gradient is never requested)."""
    inputs = {}
    for slot in uses:
        n = g.input(slot) if slot in in_slots else g.output(slot)
        if n is not None:
            inputs[slot] = n
    for slot in out_grads:
        inputs[slot + "@GRAD"] = g.output_grad(slot)
    outputs = {}
    for slot in in_grads:
        n = g.input_grad(slot)
        if n is not None:
            outputs[slot + "@GRAD"] = n
    if outputs:
        g.append(fwd_type + "_grad", inputs, outputs, attrs)


def live(name):
    """None for absent/empty gradient names (an ``@EMPTY@`` entry carries no gradient)."""
    if name is None or (isinstance(name, str) and name.startswith("@EMPTY@")):
        return None
    return name


def _tensor_values(t, tlist):
    """Values given as a 1-D int tensor or as a list of 1-element tensors (None if neither)."""
    if t is not None:
        return [int(v) for v in np.asarray(t).reshape(-1)]
    if tlist:
        return [int(np.asarray(v).reshape(-1)[0]) for v in tlist]
    return None


def _slice_bounds(dim: int, start: int, end: int, step: int, op_type: str):
    """fluid's (strided_)slice clamping for one axis -> python ``slice`` (ValueError if empty)."""
    if step == 0:
        raise ValueError(f"{op_type}: stride must not be zero")
    if start < 0:
        start += dim
    if step > 0:
        if end < 0:
            end += dim
        lo, hi = max(start, 0), min(end, dim)
        if hi <= lo:
            raise ValueError(f"{op_type}: empty slice on a dim of size {dim}: start {start}, "
                             f"end {end} (fluid requires end > start after clamping)")
        return slice(lo, hi, step), (hi - lo + step - 1) // step
    # negative stride: end == -1 means "through index 0"
    if end < 0 and end != -1:
        end += dim
    top = min(start, dim - 1)
    if top <= end or top < 0:
        raise ValueError(f"{op_type}: empty slice on a dim of size {dim}: start {start}, end "
                         f"{end}, stride {step}")
    stop = end if end >= 0 else None
    n = (top - (end if end >= 0 else -1) + (-step) - 1) // (-step)
    return slice(top, stop, step), n


def _slice_index(op_type, shape, axes, starts, ends, strides, decrease_axis):
    """Index tuple and the kept (un-decreased) output shape for a slice."""
    idx = [slice(None)] * len(shape)
    full = list(shape)
    for i, a in enumerate(axes):
        a = norm_axis(op_type, a, len(shape), "axes entry")
        s, e = int(starts[i]), int(ends[i])
        st = int(strides[i]) if strides is not None else 1
        if s == -1 and e == 0 and st == 1 and a in decrease_axis:
            e = 1 << 62          # x[-1]: "from -1 to the end"
        idx[a], full[a] = _slice_bounds(shape[a], s, e, st, op_type)
    return tuple(idx), full


def _decreased(op_type, full, decrease_axis, strict):
    if not decrease_axis:
        return tuple(full)
    rank = len(full)
    dec = {norm_axis(op_type, d, rank, "decrease_axis entry") for d in decrease_axis}
    for d in dec:
        if strict and full[d] not in (1, -1):
            raise ValueError(f"{op_type}: decrease_axis {d} has size {full[d]} after slicing; "
                             f"only size-1 dims can be removed")
    out = tuple(n for i, n in enumerate(full) if i not in dec)
    return out or (1,)


def _static_slice_shape(op_type, shape, axes, starts, ends, strides, decrease_axis,
                        dynamic=False):
    if len(starts) != len(axes) and not dynamic or len(ends) != len(axes) and not dynamic:
        raise ValueError(f"{op_type}: axes {list(axes)}, starts {list(starts)} and ends "
                         f"{list(ends)} must have the same length")
    if strides is not None and len(strides) != len(axes) and not dynamic:
        raise ValueError(f"{op_type}: strides {list(strides)} must have the length of axes "
                         f"{list(axes)}")
    full = list(shape)
    seen = set()
    for i, a in enumerate(axes):
        a = norm_axis(op_type, a, len(shape), "axes entry")
        if a in seen:
            raise ValueError(f"{op_type}: axis {a} appears twice in axes {list(axes)}")
        seen.add(a)
        if dynamic or shape[a] < 0:
            full[a] = -1
            continue
        s, e = int(starts[i]), int(ends[i])
        st = int(strides[i]) if strides is not None else 1
        if s == -1 and e == 0 and st == 1 and a in {d % len(shape) for d in decrease_axis}:
            e = 1 << 62
        full[a] = _slice_bounds(shape[a], s, e, st, op_type)[1]
    return _decreased(op_type, full, decrease_axis, strict=True)


class _SliceBase(OpDef):
    outputs = ("Out",)

    def double_grad(self, g, **attrs):
        """slice_grad is linear in Out@GRAD: its gradient is the same slice of ddX."""
        dd = live(g.output_grad("Input@GRAD"))
        target = g.input_grad("Out@GRAD")
        if dd is None or target is None:
            return
        fwd = self.forward_def
        ins = {"Input": dd}
        for slot in fwd.in_slots[1:]:
            n = g.input(slot.name)
            if n:
                ins[slot.name] = n
        g.append(fwd.type, ins, {"Out": target}, attrs)


@register
class Slice(_SliceBase):
    """Out = Input[starts:ends] along ``axes`` (fluid clamping: negative indices count from the
    end, ends are clipped to the dim; ``decrease_axis`` dims are dropped);
    dInput = zeros with dOut written back into the sliced window."""
    type = "slice"
    inputs = ("Input", "StartsTensor?", "EndsTensor?", "StartsTensorList*?", "EndsTensorList*?")
    grad_uses = ("Input", "StartsTensor", "EndsTensor", "StartsTensorList", "EndsTensorList")

    def infer(self, Input, StartsTensor, EndsTensor, StartsTensorList, EndsTensorList, *,
              axes=(), starts=(), ends=(), decrease_axis=()):
        dyn = StartsTensor is not None or EndsTensor is not None or bool(StartsTensorList) \
            or bool(EndsTensorList)
        shape = _static_slice_shape("slice", Input.shape, axes, starts, ends, None,
                                    decrease_axis, dynamic=dyn)
        return {"Out": VarSpec(shape, Input.dtype, Input.lod_level)}

    @staticmethod
    def _window(Input, st, en, stl, enl, axes, starts, ends, decrease_axis):
        starts = _tensor_values(st, stl) or starts
        ends = _tensor_values(en, enl) or ends
        idx, full = _slice_index("slice", Input.shape, axes, starts, ends, None, decrease_axis)
        return idx, full

    def forward(self, Input, StartsTensor, EndsTensor, StartsTensorList, EndsTensorList, *,
                axes=[], starts=[], ends=[], infer_flags=[], decrease_axis=[]):
        idx, full = self._window(Input, StartsTensor, EndsTensor, StartsTensorList,
                                 EndsTensorList, axes, starts, ends, decrease_axis)
        out = Input[idx]
        if decrease_axis:
            out = out.reshape(_decreased("slice", full, decrease_axis, strict=True))
        return {"Out": out}

    def backward(self, Input, StartsTensor, EndsTensor, StartsTensorList, EndsTensorList,
                 dOut, *, axes=[], starts=[], ends=[], infer_flags=[], decrease_axis=[]):
        idx, full = self._window(Input, StartsTensor, EndsTensor, StartsTensorList,
                                 EndsTensorList, axes, starts, ends, decrease_axis)
        dx = np.zeros(Input.shape, dtype=dOut.dtype)
        dx[idx] = dOut.reshape(full)
        return {"Input": dx}

    def make_grad(self, g, **attrs):
        emit_grad_op(g, "slice", attrs, uses=self.grad_uses, in_grads=("Input",),
                     in_slots=self.grad_uses)


@register
class StridedSlice(_SliceBase):
    """Out = Input[starts:ends:strides] along ``axes`` (fluid clamping; a negative stride walks
    backwards, end -1 then means "through index 0"); dInput scatters dOut back."""
    type = "strided_slice"
    inputs = ("Input", "StartsTensor?", "EndsTensor?", "StridesTensor?", "StartsTensorList*?",
              "EndsTensorList*?", "StridesTensorList*?")
    grad_uses = ("Input", "StartsTensor", "EndsTensor", "StridesTensor", "StartsTensorList",
                 "EndsTensorList", "StridesTensorList")

    def infer(self, Input, StartsTensor, EndsTensor, StridesTensor, StartsTensorList,
              EndsTensorList, StridesTensorList, *, axes=(), starts=(), ends=(), strides=(),
              decrease_axis=()):
        dyn = any(t is not None for t in (StartsTensor, EndsTensor, StridesTensor)) or any(
            bool(t) for t in (StartsTensorList, EndsTensorList, StridesTensorList))
        shape = _static_slice_shape("strided_slice", Input.shape, axes, starts, ends, strides,
                                    decrease_axis, dynamic=dyn)
        return {"Out": VarSpec(shape, Input.dtype, Input.lod_level)}

    @staticmethod
    def _window(Input, tensors, axes, starts, ends, strides, decrease_axis):
        st, en, sd, stl, enl, sdl = tensors
        starts = _tensor_values(st, stl) or starts
        ends = _tensor_values(en, enl) or ends
        strides = _tensor_values(sd, sdl) or strides
        return _slice_index("strided_slice", Input.shape, axes, starts, ends, strides,
                            decrease_axis)

    def forward(self, Input, StartsTensor, EndsTensor, StridesTensor, StartsTensorList,
                EndsTensorList, StridesTensorList, *, axes=[], starts=[], ends=[], strides=[],
                infer_flags=[], decrease_axis=[]):
        idx, full = self._window(Input, (StartsTensor, EndsTensor, StridesTensor,
                                         StartsTensorList, EndsTensorList, StridesTensorList),
                                 axes, starts, ends, strides, decrease_axis)
        out = Input[idx]
        if decrease_axis:
            out = out.reshape(_decreased("strided_slice", full, decrease_axis, strict=True))
        return {"Out": out}

    def backward(self, Input, StartsTensor, EndsTensor, StridesTensor, StartsTensorList,
                 EndsTensorList, StridesTensorList, dOut, *, axes=[], starts=[], ends=[],
                 strides=[], infer_flags=[], decrease_axis=[]):
        idx, full = self._window(Input, (StartsTensor, EndsTensor, StridesTensor,
                                         StartsTensorList, EndsTensorList, StridesTensorList),
                                 axes, starts, ends, strides, decrease_axis)
        dx = np.zeros(Input.shape, dtype=dOut.dtype)
        dx[idx] = dOut.reshape(full)
        return {"Input": dx}

    def make_grad(self, g, **attrs):
        emit_grad_op(g, "strided_slice", attrs, uses=self.grad_uses, in_grads=("Input",),
                     in_slots=self.grad_uses)
