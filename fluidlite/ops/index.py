"""Indexing and tiling ops: slice, strided_slice (fluid's clamping rules), gather, expand and
one_hot."""
from __future__ import annotations

import numpy as np

from ..core.dtypes import VarType, to_numpy_dtype
from ..core.names import live
from ..core.registry import OpDef, VarSpec, register
from .tensor import emit_grad_op, norm_axis, tensor_values


# -- slice / strided_slice ------------------------------------------------------------------
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
    # decrease_axis entries may count from the end, as in the shape inference
    dec = {d % len(shape) for d in decrease_axis} if shape else set()
    for i, a in enumerate(axes):
        a = norm_axis(op_type, a, len(shape), "axes entry")
        s, e = int(starts[i]), int(ends[i])
        st = int(strides[i]) if strides is not None else 1
        if s == -1 and e == 0 and st == 1 and a in dec:
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
        starts = tensor_values(st, stl) or starts
        ends = tensor_values(en, enl) or ends
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
        emit_grad_op(g, "slice", attrs, uses=self.grad_uses, in_grads=("Input",))


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
        starts = tensor_values(st, stl) or starts
        ends = tensor_values(en, enl) or ends
        strides = tensor_values(sd, sdl) or strides
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
        emit_grad_op(g, "strided_slice", attrs, uses=self.grad_uses, in_grads=("Input",))


# -- gathering and tiling -------------------------------------------------------------------
def _rows(op: str, n: int, index: np.ndarray) -> np.ndarray:
    """``index`` flattened, every entry checked to lie in ``[0, n)``: fluid's kernels read rows
    by index, so a negative index is an error there, never NumPy's wrap-around."""
    idx = index.reshape(-1)
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        bad = int(idx[(idx < 0) | (idx >= n)][0])
        raise IndexError(f"{op}: Index holds {bad}, outside [0, {n}) (the rows of X); "
                         f"indices are row numbers and do not wrap around")
    return idx


@register
class Gather(OpDef):
    """Out = X[Index] along dim 0 (Index int, 1-D or [N, 1]);  dX = scatter of dOut into zeros
    (``overwrite=True``: a repeated index keeps one update, as fluid; False: updates add)."""
    type, inputs, outputs = "gather", ("X", "Index"), ("Out",)
    extra_attrs = {"Axis": None}

    def infer(self, X, Index, *, overwrite=True):
        if len(Index.shape) == 2 and Index.shape[1] not in (1, -1) or len(Index.shape) > 2:
            raise ValueError(f"gather: Index must be 1-D or [N, 1], got shape "
                             f"{list(Index.shape)}")
        if Index.dtype not in (VarType.INT32, VarType.INT64):
            raise ValueError(f"gather: Index must be int32 or int64, got {Index.dtype}")
        return {"Out": VarSpec((Index.shape[0],) + tuple(X.shape[1:]), X.dtype)}

    def forward(self, X, Index, *, overwrite=True):
        return {"Out": np.take(X, _rows("gather", X.shape[0], Index), axis=0)}

    def lower(self, in_specs, attrs):
        return lambda x, i: np.take(x, _rows("gather", x.shape[0], i), axis=0)

    def backward(self, X, Index, dOut, *, overwrite=True):
        dx = np.zeros(X.shape, dtype=dOut.dtype)
        idx = _rows("gather", X.shape[0], Index)
        if overwrite:
            dx[idx] = dOut
        else:
            np.add.at(dx, idx, dOut)
        return {"X": dx}

    def make_grad(self, g, **attrs):
        emit_grad_op(g, "gather", attrs, uses=("X", "Index"))

    def double_grad(self, g, **attrs):
        dd, target = live(g.output_grad("X@GRAD")), g.input_grad("Out@GRAD")
        if dd is not None and target is not None:
            g.append("gather", {"X": dd, "Index": g.input("Index")}, {"Out": target}, attrs)


@register
class Expand(OpDef):
    """Out = tile(X, expand_times);  dX = dOut summed over the tiles."""
    type, inputs, outputs = "expand", ("X", "ExpandTimes?", "expand_times_tensor*?"), ("Out",)
    grad_uses = ("X", "ExpandTimes", "expand_times_tensor")

    def infer(self, X, ExpandTimes, expand_times_tensor, *, expand_times=()):
        if ExpandTimes is not None or expand_times_tensor:
            return {"Out": VarSpec((-1,) * len(X.shape), X.dtype, X.lod_level)}
        if len(expand_times) != len(X.shape):
            raise ValueError(f"expand: expand_times {list(expand_times)} must have one entry per "
                             f"dim of X (shape {list(X.shape)})")
        if any(int(t) < 1 for t in expand_times):
            raise ValueError(f"expand: expand_times {list(expand_times)} must be positive")
        out = [d * int(t) if d >= 0 else -1 for d, t in zip(X.shape, expand_times)]
        return {"Out": VarSpec(out, X.dtype, X.lod_level)}

    @staticmethod
    def _times(X, t, tl, expand_times):
        times = tensor_values(t, tl)
        return times if times is not None else [int(v) for v in expand_times]

    def forward(self, X, ExpandTimes, expand_times_tensor, *, expand_times=[]):
        return {"Out": np.tile(X, self._times(X, ExpandTimes, expand_times_tensor, expand_times))}

    def backward(self, X, ExpandTimes, expand_times_tensor, dOut, *, expand_times=[]):
        times = self._times(X, ExpandTimes, expand_times_tensor, expand_times)
        inter = []
        for t, d in zip(times, X.shape):
            inter += [t, d]
        d = dOut.reshape(inter).sum(axis=tuple(range(0, 2 * X.ndim, 2)))
        return {"X": d.reshape(X.shape)}

    def make_grad(self, g, **attrs):
        emit_grad_op(g, "expand", attrs, uses=self.grad_uses)

    def double_grad(self, g, **attrs):
        dd, target = live(g.output_grad("X@GRAD")), g.input_grad("Out@GRAD")
        if dd is None or target is None:
            return
        ins = {"X": dd}
        for slot in ("ExpandTimes", "expand_times_tensor"):
            if g.input(slot):
                ins[slot] = g.input(slot)
        g.append("expand", ins, {"Out": target}, attrs)


@register
class OneHot(OpDef):
    """Out[..., j] = (X[..., 0] == j) for int X whose last dim is 1 (-> depth); an index outside
    [0, depth) is an error unless ``allow_out_of_range`` (then its row is all zeros)."""
    type, inputs, outputs = "one_hot", ("X", "depth_tensor?"), ("Out",)
    no_grad = True

    def infer(self, X, depth_tensor, *, depth=-1, dtype=VarType.FP32):
        if not X.shape or X.shape[-1] not in (1, -1):
            raise ValueError(f"one_hot: the last dim of X must be 1, got shape {list(X.shape)}")
        if X.dtype not in (VarType.INT32, VarType.INT64):
            raise ValueError(f"one_hot: X must be int32 or int64, got {X.dtype}")
        d = -1 if depth_tensor is not None else depth
        if depth_tensor is None and depth < 1:
            raise ValueError(f"one_hot: depth must be a positive int, got {depth}")
        return {"Out": VarSpec(tuple(X.shape[:-1]) + (d,), dtype, X.lod_level)}

    def forward(self, X, depth_tensor, *, depth=-1, dtype=VarType.FP32,
                allow_out_of_range=False):
        if depth_tensor is not None:
            depth = int(np.asarray(depth_tensor).reshape(-1)[0])
        idx = X.reshape(X.shape[:-1])
        bad = (idx < 0) | (idx >= depth)
        if bad.any() and not allow_out_of_range:
            v = idx[bad].reshape(-1)[0]
            raise ValueError(f"one_hot: index {v} is out of range [0, {depth}); pass "
                             f"allow_out_of_range=True to map it to an all-zero row")
        out = (idx[..., None] == np.arange(depth)).astype(to_numpy_dtype(dtype))
        return {"Out": out}


@register
class OneHotV2(OneHot):
    """``fluid.one_hot``: Out[..., j] = (X[...] == j) for int X of any shape (no trailing-1
    dimension: Out has X's shape + [depth]); out-of-range indices as ``one_hot``."""
    type = "one_hot_v2"

    def infer(self, X, depth_tensor, *, depth=-1, dtype=VarType.FP32):
        if X.dtype not in (VarType.INT32, VarType.INT64):
            raise ValueError(f"one_hot_v2: X must be int32 or int64, got {X.dtype}")
        if depth_tensor is None and depth < 1:
            raise ValueError(f"one_hot_v2: depth must be a positive int, got {depth}")
        d = -1 if depth_tensor is not None else depth
        return {"Out": VarSpec(tuple(X.shape) + (d,), dtype, X.lod_level)}

    def forward(self, X, depth_tensor, *, depth=-1, dtype=VarType.FP32,
                allow_out_of_range=False):
        return super().forward(X[..., None], depth_tensor, depth=depth, dtype=dtype,
                               allow_out_of_range=allow_out_of_range)
