"""Tensor ops: creation and plumbing (fill_constant, assign, sum for gradient accumulation,
feed/fetch), indexing (slice, strided_slice, gather), reshaping (reshape2, transpose2, squeeze2,
unsqueeze2, flatten2 with fluid's XShape output), joining (concat, split, stack), expand, shape
and one_hot."""
from __future__ import annotations

import numpy as np

from ..core import shape as S
from ..core.dtypes import VarType, to_numpy_dtype
from ..core.registry import OpDef, VarSpec, get_op_def, register


@register
class FillConstant(OpDef):
    """Out = full(shape, value, dtype); a ``ShapeTensor`` (1-D int) or ``ShapeTensorList``
    (1-element int tensors) gives the shape at run time instead of the attr."""
    type, inputs, outputs = "fill_constant", ("ShapeTensor?", "ShapeTensorList*?"), ("Out",)
    no_grad = True
    extra_attrs = {"str_value": "", "force_cpu": False}

    def infer(self, ShapeTensor=None, ShapeTensorList=(), *, shape=(), dtype=VarType.FP32):
        if ShapeTensor is not None:
            shape = (-1,) * max(ShapeTensor.shape[0], 0) if ShapeTensor.shape else shape
        elif ShapeTensorList and len(shape) != len(ShapeTensorList):
            shape = (-1,) * len(ShapeTensorList)
        return {"Out": VarSpec(shape, dtype)}

    def forward(self, ShapeTensor=None, ShapeTensorList=(), *, shape=[], dtype=VarType.FP32,
                value=0.0):
        dyn = _tensor_values(ShapeTensor, ShapeTensorList)
        return {"Out": np.full(dyn if dyn is not None else shape, value,
                               dtype=to_numpy_dtype(dtype))}


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

    def make_grad(self, g, **attrs):
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

    def make_grad(self, g, **attrs):
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


def emit_grad_op(g, fwd_type: str, attrs, uses=(), out_grads=("Out",), in_grads=("X",)
                 ) -> None:
    """Append ``<fwd_type>_grad`` reading only ``uses`` (forward inputs/outputs) and the listed
    output gradients, writing only the listed input gradients (fluid's explicit grad makers).

    Used by ops with several outputs (so unused output grads are not zero-filled) and by ops
    with integer inputs (whose gradient is never requested)."""
    in_slots = {s.name for s in get_op_def(g.op.type).in_slots}
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
        emit_grad_op(g, "strided_slice", attrs, uses=self.grad_uses, in_grads=("Input",))


# -- reshape-like ops: Out plus fluid's XShape ([0] + X.shape, no data) ---------------------
def _xshape(X: np.ndarray) -> np.ndarray:
    return np.empty((0,) + X.shape, dtype=X.dtype)


class _XShapeOp(OpDef):
    """Shared gradient of ops that only rearrange X: ``dX = reshape/transpose(dOut)``; the grad
    op reads XShape (X's shape) and Out@GRAD, as fluid's ``<type>_grad``."""
    inputs, outputs = ("X",), ("Out", "XShape")
    grad_uses = ("XShape",)

    def backward(self, XShape, dOut, dXShape=None, **attrs):
        return {"X": dOut.reshape(XShape.shape[1:])}

    def make_grad(self, g, **attrs):
        emit_grad_op(g, self.type, attrs, uses=("XShape",))

    def double_grad(self, g, **attrs):
        """The grad op is linear in Out@GRAD: its gradient is the forward op applied to ddX."""
        dd, target = live(g.output_grad("X@GRAD")), g.input_grad("Out@GRAD")
        if dd is not None and target is not None:
            g.append(self.forward_def.type, {"X": dd}, {"Out": target, "XShape": g.tmp("xshape")},
                     attrs)


def _spec_xshape(X: VarSpec) -> VarSpec:
    return VarSpec((0,) + tuple(X.shape), X.dtype)


def reshape_target(op_type: str, in_shape, shape):
    """fluid's reshape rule: 0 copies the input dim, one -1 is inferred. Works on static shapes
    (unknown dims -1 propagate) and validates the element count."""
    out, unknown = [], None
    for i, d in enumerate(shape):
        d = int(d)
        if d == -1:
            if unknown is not None:
                raise ValueError(f"{op_type}: only one dimension of the target shape {list(shape)}"
                                 f" can be -1")
            unknown = i
            out.append(-1)
        elif d == 0:
            if i >= len(in_shape):
                raise ValueError(f"{op_type}: target shape {list(shape)} copies dim {i} (0) but "
                                 f"X has only {len(in_shape)} dims ({list(in_shape)})")
            out.append(in_shape[i])
        elif d > 0:
            out.append(d)
        else:
            raise ValueError(f"{op_type}: target shape {list(shape)} has an invalid dim {d} "
                             f"(use a positive size, 0 to copy, or one -1)")
    copied = {i for i, d in enumerate(shape) if int(d) == 0}
    rest_in = [d for i, d in enumerate(in_shape) if i not in copied]
    rest_out = [d for i, d in enumerate(out) if i not in copied and i != unknown]
    n_in, n_out = S.numel(rest_in), S.numel(rest_out)
    if unknown is not None:
        if n_in >= 0 and n_out > 0:
            if n_in % n_out:
                raise ValueError(f"{op_type}: cannot reshape X of shape {list(in_shape)} to "
                                 f"{list(shape)}: {S.numel(in_shape)} elements are not divisible "
                                 f"by {n_out}")
            out[unknown] = n_in // n_out
    elif n_in >= 0 and n_out >= 0 and n_in != n_out:
        raise ValueError(f"{op_type}: cannot reshape X of shape {list(in_shape)} "
                         f"({S.numel(in_shape)} elements) to {list(shape)} "
                         f"({S.numel(out)} elements)")
    return tuple(out)


@register
class Reshape2(_XShapeOp):
    """Out = reshape(X, shape) (0 copies a dim, one -1 is inferred; a ``Shape`` tensor or a
    ``ShapeTensor`` list overrides the attr at run time);  dX = reshape(dOut, X.shape)."""
    type = "reshape2"
    inputs = ("X", "Shape?", "ShapeTensor*?")
    extra_attrs = {"use_quantizer": False}

    def infer(self, X, Shape, ShapeTensor, *, shape=()):
        if Shape is not None or ShapeTensor:
            try:
                out = reshape_target("reshape2", X.shape, shape) if shape else None
            except ValueError:
                out = None
            if out is None:
                n = Shape.shape[0] if Shape is not None else len(ShapeTensor)
                out = (-1,) * max(int(n), 1)
        else:
            out = reshape_target("reshape2", X.shape, shape)
        return {"Out": VarSpec(out, X.dtype, X.lod_level), "XShape": _spec_xshape(X)}

    def forward(self, X, Shape, ShapeTensor, *, shape=[]):
        dyn = _tensor_values(Shape, ShapeTensor)
        target = dyn if dyn is not None else shape
        target = [X.shape[i] if int(d) == 0 else int(d) for i, d in enumerate(target)]
        return {"Out": X.reshape(target), "XShape": _xshape(X)}

    def double_grad(self, g, **attrs):
        dd, target = live(g.output_grad("X@GRAD")), g.input_grad("Out@GRAD")
        if dd is None or target is None:
            return
        dout = g.input("Out@GRAD")       # reshape ddX to Out's run-time shape
        shp = g.tmp("shape")
        g.append("shape", {"Input": dout}, {"Out": shp})
        static = list(g.op.block._find_var_recursive(dout).shape)
        g.append("reshape2", {"X": dd, "Shape": shp}, {"Out": target, "XShape": g.tmp("xshape")},
                 shape=static)


@register
class Transpose2(_XShapeOp):
    """Out = transpose(X, axis);  dX = transpose(dOut, argsort(axis))."""
    type = "transpose2"
    extra_attrs = {"use_mkldnn": False, "data_format": "AnyLayout", "use_quantizer": False}

    def infer(self, X, *, axis=()):
        _check_perm("transpose2", X.shape, axis)
        return {"Out": VarSpec(tuple(X.shape[a] for a in axis), X.dtype, X.lod_level),
                "XShape": _spec_xshape(X)}

    def forward(self, X, *, axis=[]):
        return {"Out": np.transpose(X, axis), "XShape": _xshape(X)}

    def backward(self, XShape, dOut, dXShape=None, *, axis=[]):
        return {"X": np.transpose(dOut, np.argsort(axis))}


def _check_perm(op_type, shape, axis):
    if sorted(int(a) for a in axis) != list(range(len(shape))):
        raise ValueError(f"{op_type}: axis {list(axis)} is not a permutation of "
                         f"0..{len(shape) - 1} for X of shape {list(shape)}")


@register
class Squeeze2(_XShapeOp):
    """Out = X without the size-1 dims listed in ``axes`` (all size-1 dims when empty; listed
    dims of another size are kept, as fluid);  dX = reshape(dOut, X.shape)."""
    type = "squeeze2"

    @staticmethod
    def _out(shape, axes, runtime):
        rank = len(shape)
        if not axes:
            drop = {i for i, d in enumerate(shape) if d == 1}
        else:
            drop = set()
            for a in axes:
                a = norm_axis("squeeze2", a, rank, "axes entry")
                if shape[a] == 1 or (shape[a] == -1 and not runtime):
                    drop.add(a)
        return tuple(d for i, d in enumerate(shape) if i not in drop)

    def infer(self, X, *, axes=()):
        return {"Out": VarSpec(self._out(X.shape, axes, False), X.dtype, X.lod_level),
                "XShape": _spec_xshape(X)}

    def forward(self, X, *, axes=[]):
        return {"Out": X.reshape(self._out(X.shape, axes, True)), "XShape": _xshape(X)}


@register
class Unsqueeze2(_XShapeOp):
    """Out = X with size-1 dims inserted at ``axes`` (each relative to the shape built so far,
    as fluid);  dX = reshape(dOut, X.shape)."""
    type = "unsqueeze2"
    inputs = ("X", "AxesTensor?", "AxesTensorList*?")

    @staticmethod
    def _out(shape, axes):
        cur = list(shape)
        for a in axes:
            a = norm_axis("unsqueeze2", int(a), len(cur), "axes entry", extra=1)
            cur.insert(a, 1)
        return tuple(cur)

    def infer(self, X, AxesTensor, AxesTensorList, *, axes=()):
        if AxesTensor is not None or AxesTensorList:
            n = AxesTensor.shape[0] if AxesTensor is not None else len(AxesTensorList)
            out = (-1,) * (len(X.shape) + max(int(n), 0))
        else:
            out = self._out(X.shape, axes)
        return {"Out": VarSpec(out, X.dtype, X.lod_level), "XShape": _spec_xshape(X)}

    def forward(self, X, AxesTensor, AxesTensorList, *, axes=[]):
        dyn = _tensor_values(AxesTensor, AxesTensorList)
        return {"Out": X.reshape(self._out(X.shape, dyn if dyn is not None else axes)),
                "XShape": _xshape(X)}

    def double_grad(self, g, **attrs):
        dd, target = live(g.output_grad("X@GRAD")), g.input_grad("Out@GRAD")
        if dd is None or target is None:
            return
        shp = g.tmp("shape")
        g.append("shape", {"Input": g.input("Out@GRAD")}, {"Out": shp})
        g.append("reshape2", {"X": dd, "Shape": shp}, {"Out": target, "XShape": g.tmp("xshape")},
                 shape=list(g.op.block._find_var_recursive(g.input("Out@GRAD")).shape))


@register
class Flatten2(_XShapeOp):
    """Out = reshape(X, [prod(X.shape[:axis]), prod(X.shape[axis:])]);  dX = reshape(dOut)."""
    type = "flatten2"

    def infer(self, X, *, axis=1):
        if not 0 <= axis <= len(X.shape):
            raise ValueError(f"flatten2: axis {axis} is out of range for X of shape "
                             f"{list(X.shape)} (expected 0 <= axis <= {len(X.shape)})")
        return {"Out": VarSpec((S.numel(X.shape[:axis]), S.numel(X.shape[axis:])), X.dtype),
                "XShape": _spec_xshape(X)}

    def forward(self, X, *, axis=1):
        rows = int(np.prod(X.shape[:axis], dtype=np.int64))
        return {"Out": X.reshape(rows, -1 if rows else int(np.prod(X.shape[axis:]))),
                "XShape": _xshape(X)}


# -- joining and splitting ----------------------------------------------------------------------
@register
class Concat(OpDef):
    """Out = concatenate(X, axis);  dX[i] = the i-th slab of dOut along axis."""
    type, inputs, outputs = "concat", ("X*",), ("Out",)
    grad_uses = ("X",)
    extra_attrs = {"use_mkldnn": False, "use_quantizer": False}

    def infer(self, X, *, axis=0):
        if not X:
            raise ValueError("concat: X is empty; pass at least one Variable")
        rank = len(X[0].shape)
        a = norm_axis("concat", axis, rank)
        out = list(X[0].shape)
        for i, x in enumerate(X[1:], 1):
            bad = len(x.shape) != rank or any(
                j != a and not S.dims_match(d, e) for j, (d, e) in enumerate(zip(out, x.shape)))
            if bad:
                raise ValueError(f"concat: input shapes must match except on axis {axis}: "
                                 f"X[0] has shape {list(X[0].shape)} but X[{i}] has shape "
                                 f"{list(x.shape)}")
            out = [S.known(d, e) if j != a else d for j, (d, e) in enumerate(zip(out, x.shape))]
        sizes = [x.shape[a] for x in X]
        out[a] = -1 if any(s < 0 for s in sizes) else sum(sizes)
        return {"Out": VarSpec(out, X[0].dtype, X[0].lod_level)}

    def forward(self, X, *, axis=0):
        return {"Out": np.concatenate(X, axis=axis)}

    def lower(self, in_specs, attrs):
        axis = attrs.get("axis", 0)
        return lambda xs: np.concatenate(xs, axis=axis)

    def backward(self, X, dOut, *, axis=0):
        bounds = np.cumsum([x.shape[axis] for x in X])[:-1]
        return {"X": np.split(dOut, bounds, axis=axis)}

    def double_grad(self, g, **attrs):
        target = g.input_grad("Out@GRAD")
        dds = g.output_grad("X@GRAD")
        if target is None or dds is None:
            return
        parts = []
        for x, dd in zip(g.input("X"), dds):
            if live(dd) is None or dd.startswith("@EMPTY@"):
                z = g.tmp("zeros")
                g.append("fill_zeros_like", {"X": x}, {"Out": z})
                dd = z
            parts.append(dd)
        g.append("concat", {"X": parts}, {"Out": target}, attrs)


@register
class Split(OpDef):
    """Out[i] = the i-th piece of X along axis (``num`` equal pieces, or ``sections`` sizes with
    one -1 inferred);  dX = concat(dOut) (missing pieces zero-filled)."""
    type, inputs, outputs = "split", ("X",), ("Out*",)

    @staticmethod
    def _sizes(dim, num, sections):
        if num > 0:
            if dim >= 0 and dim % num:
                raise ValueError(f"split: the dim of size {dim} cannot be split into {num} "
                                 f"equal pieces")
            return [dim // num if dim >= 0 else -1] * num
        if not sections:
            raise ValueError("split: give num > 0 or a non-empty sections list")
        sizes = [int(s) for s in sections]
        if sizes.count(-1) > 1:
            raise ValueError(f"split: only one entry of sections {sizes} can be -1")
        if dim >= 0:
            if -1 in sizes:
                rest = dim - sum(s for s in sizes if s != -1)
                if rest < 0:
                    raise ValueError(f"split: sections {sizes} exceed the dim size {dim}")
                sizes[sizes.index(-1)] = rest
            elif sum(sizes) != dim:
                raise ValueError(f"split: sections {sizes} sum to {sum(sizes)}, but the dim "
                                 f"has size {dim}")
        return sizes

    def infer(self, X, *, num=0, sections=(), axis=0):
        a = norm_axis("split", axis, len(X.shape))
        outs = []
        for s in self._sizes(X.shape[a], num, sections):
            shape = list(X.shape)
            shape[a] = s
            outs.append(VarSpec(shape, X.dtype, X.lod_level))
        return {"Out": outs}

    def forward(self, X, *, num=0, sections=[], axis=0):
        a = axis + X.ndim if axis < 0 else axis
        sizes = self._sizes(X.shape[a], num, sections)
        return {"Out": np.split(X, np.cumsum(sizes)[:-1], axis=a)}

    def make_grad(self, g, *, num=0, sections=[], axis=0, **_):
        if g.input_grad("X") is not None:
            g.append("concat", {"X": g.output_grad("Out")}, {"Out": g.input_grad("X")}, axis=axis)


@register
class Stack(OpDef):
    """Y = stack(X, axis) (a new dim);  dX[i] = dY taken at index i of axis."""
    type, inputs, outputs = "stack", ("X*",), ("Y",)
    grad_uses = ()

    def infer(self, X, *, axis=0):
        if not X:
            raise ValueError("stack: X is empty; pass at least one Variable")
        shape = list(X[0].shape)
        for i, x in enumerate(X[1:], 1):
            if len(x.shape) != len(shape) or not all(
                    S.dims_match(d, e) for d, e in zip(shape, x.shape)):
                raise ValueError(f"stack: all inputs must have the same shape, but X[0] has "
                                 f"{list(X[0].shape)} and X[{i}] has {list(x.shape)}")
            shape = [S.known(d, e) for d, e in zip(shape, x.shape)]
        a = norm_axis("stack", axis, len(shape), extra=1)
        shape.insert(a, len(X))
        return {"Y": VarSpec(shape, X[0].dtype)}

    def forward(self, X, *, axis=0):
        return {"Y": np.stack(X, axis=axis)}

    def lower(self, in_specs, attrs):
        axis = attrs.get("axis", 0)
        return lambda xs: np.stack(xs, axis=axis)

    def backward(self, dY, *, axis=0):
        a = axis + dY.ndim if axis < 0 else axis
        return {"X": [np.take(dY, i, axis=a) for i in range(dY.shape[a])]}

    def double_grad(self, g, **attrs):
        target, dds = g.input_grad("Y@GRAD"), g.output_grad("X@GRAD")
        if target is None or dds is None:
            return
        if any(live(d) is None for d in dds):
            return _zero_fill_stack(g, dds, target, attrs)
        g.append("stack", {"X": dds}, {"Y": target}, attrs)


def _zero_fill_stack(g, dds, target, attrs):
    """Some entries carry no gradient: stack zeros shaped like a live one in their place."""
    ref = next((d for d in dds if live(d) is not None), None)
    if ref is None:
        return
    parts = []
    for d in dds:
        if live(d) is None:
            z = g.tmp("zeros")
            g.append("fill_zeros_like", {"X": ref}, {"Out": z})
            d = z
        parts.append(d)
    g.append("stack", {"X": parts}, {"Y": target}, attrs)


# -- gathering and tiling -------------------------------------------------------------------
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
        return {"Out": np.take(X, Index.reshape(-1), axis=0)}

    def lower(self, in_specs, attrs):
        return lambda x, i: np.take(x, i.reshape(-1), axis=0)

    def backward(self, X, Index, dOut, *, overwrite=True):
        dx = np.zeros(X.shape, dtype=dOut.dtype)
        if overwrite:
            dx[Index.reshape(-1)] = dOut
        else:
            np.add.at(dx, Index.reshape(-1), dOut)
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
        times = _tensor_values(t, tl)
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
class Shape(OpDef):
    """Out = int32 vector of Input's shape (not differentiable)."""
    type, inputs, outputs = "shape", ("Input",), ("Out",)
    no_grad = True

    def infer(self, Input):
        return {"Out": VarSpec((len(Input.shape),), VarType.INT32)}

    def forward(self, Input):
        return {"Out": np.asarray(Input.shape, dtype=np.int32)}

    def lower(self, in_specs, attrs):
        return lambda x: np.asarray(x.shape, dtype=np.int32)


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
