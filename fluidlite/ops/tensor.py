"""Tensor creation and plumbing ops: fill_constant, assign_value, fill_any_like,
fill_zeros_like, assign, sum (also gradient accumulation), feed/fetch markers and shape; plus the
helpers the other op modules share (``norm_axis``, ``emit_grad_op``, ``live``,
``tensor_values``). Shape manipulation lives in manip.py, indexing and tiling in index.py."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..core.dtypes import VarType, convert_np_dtype_to_dtype_, to_numpy_dtype
from ..core.errors import InvalidArgument
from ..core.registry import OpDef, VarSpec, get_op_def, register
from ..core.selected_rows import SelectedRows, concat
from .broadcast import in_parts


@register
class FillConstant(OpDef):
    """Out = full(shape, value, dtype); a ``ShapeTensor`` (1-D int) or ``ShapeTensorList``
    (1-element int tensors) gives the shape at run time instead of the attr; a 1-element
    ``ValueTensor`` gives the value."""
    type = "fill_constant"
    inputs, outputs = ("ValueTensor?", "ShapeTensor?", "ShapeTensorList*?"), ("Out",)
    no_grad = True
    foldable = True         # without tensor inputs: a constant the plan computes once
    extra_attrs = {"str_value": "", "force_cpu": False}

    def infer(self, ValueTensor=None, ShapeTensor=None, ShapeTensorList=(), *, shape=(),
              dtype=VarType.FP32):
        if ShapeTensor is not None:
            shape = (-1,) * max(ShapeTensor.shape[0], 0) if ShapeTensor.shape else shape
        elif ShapeTensorList and len(shape) != len(ShapeTensorList):
            shape = (-1,) * len(ShapeTensorList)
        elif not ShapeTensorList and any(d < 0 for d in shape):
            raise ValueError(f"fill_constant: every dim of shape must be >= 0, but received "
                             f"shape {list(shape)}; pass a size tensor for a size known "
                             f"only at run time")
        return {"Out": VarSpec(shape, dtype)}

    def forward(self, ValueTensor=None, ShapeTensor=None, ShapeTensorList=(), *, shape=[],
                dtype=VarType.FP32, value=0.0):
        if ValueTensor is not None:
            value = np.asarray(ValueTensor).reshape(-1)[0]
        dyn = tensor_values(ShapeTensor, ShapeTensorList)
        return {"Out": np.full(dyn if dyn is not None else shape, value,
                               dtype=to_numpy_dtype(dtype))}


# fluid's value attribute of assign_value per dtype (fp64_values: Paddle 2.x's, for float64)
_VALUE_ATTRS = {VarType.FP32: "fp32_values", VarType.INT32: "int32_values",
                VarType.INT64: "int64_values", VarType.BOOL: "bool_values",
                VarType.FP64: "fp64_values"}


def assign_value_attrs(array: np.ndarray) -> dict:
    """The attributes of an ``assign_value`` op producing ``array`` (fluid's names: float16 is
    stored as float32 values, as fluid did). Raises TypeError for other dtypes."""
    dtype = convert_np_dtype_to_dtype_(array.dtype)
    attr = _VALUE_ATTRS.get(VarType.FP32 if dtype == VarType.FP16 else dtype)
    if attr is None:
        raise TypeError(f"assign_value holds bool, float16, float32, float64, int32 or int64 "
                        f"values, but received {array.dtype}; cast the array first")
    flat = array.ravel()
    values = [bool(v) for v in flat] if dtype == VarType.BOOL else \
        [int(v) for v in flat] if attr.startswith("int") else [float(v) for v in flat]
    return {"dtype": dtype, "shape": list(array.shape), attr: values}


@register
class AssignValue(OpDef):
    """Out = array(<dtype>_values).reshape(shape), the values in the attribute fluid names by
    dtype: ``fp32_values`` (float32, float16), ``int32_values``, ``int64_values``,
    ``bool_values``, ``fp64_values`` (float64). ``values`` is read from programs saved by
    earlier fluidlite versions."""
    type, inputs, outputs = "assign_value", (), ("Out",)
    no_grad = True
    foldable = True         # a constant the plan computes once

    def infer(self, *, shape=(), dtype=VarType.FP32):
        return {"Out": VarSpec(shape, dtype)}

    def forward(self, *, shape=[], dtype=VarType.FP32, fp32_values=[], int32_values=[],
                int64_values=[], bool_values=[], fp64_values=[], values=[]):
        vt = convert_np_dtype_to_dtype_(dtype)
        given = {"fp32_values": fp32_values, "int32_values": int32_values,
                 "int64_values": int64_values, "bool_values": bool_values,
                 "fp64_values": fp64_values}
        data = given.get(_VALUE_ATTRS.get(VarType.FP32 if vt == VarType.FP16 else vt, ""), [])
        if not len(data):
            data = values or next((v for v in given.values() if len(v)), [])
        return {"Out": np.asarray(data, dtype=to_numpy_dtype(dtype)).reshape(shape)}


def _check_fill_value(op: str, value: Any, dt: np.dtype) -> None:
    """fluid's fill_any_like range check: the float32 ``value`` within ``dt``'s range, not NaN."""
    with np.errstate(over="ignore"):     # (1e100 becomes inf, as in fluid's float attr)
        v = float(np.float32(value))
    info = np.iinfo(dt) if dt.kind in "iu" else np.finfo(dt) if dt.kind == "f" else None
    if math.isnan(v) or (info is not None and not float(info.min) <= v <= float(info.max)):
        raise InvalidArgument(
            f"{op}: the filled value {value!r} ({v!r} as the float32 attribute) is "
            f"{'NaN' if math.isnan(v) else 'out of range'} for the output dtype {dt} "
            f"[{info.min if info is not None else ''}, {info.max if info is not None else ''}]; "
            f"pass a value {dt} can hold")


@register
class FillAnyLike(OpDef):
    """Out = full_like(X, value) (dtype: X's unless ``dtype`` >= 0). ``value`` is a FLOAT
    attr (float32, as fluid keeps it) and must be a number the output dtype holds: NaN or a
    value out of its range raises ``InvalidArgument`` (fluid's kernel check), at build."""
    type, inputs, outputs = "fill_any_like", ("X",), ("Out",)
    no_grad = True

    def infer(self, X, *, value=0.0, dtype=-1):
        out = X if dtype < 0 else X.with_(dtype=dtype)
        _check_fill_value(self.type, value, to_numpy_dtype(out.dtype))
        return {"Out": out}

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
        # an unwritten X (an output select_output did not select) has an absent zero gradient
        return {"Out": None if X is None else np.zeros_like(X)}


@register
class FillZerosLike2(OpDef):
    """Out = zeros of X's shape in ``dtype`` (a VarType code; default FP32): fluid 1.8's
    fill_zeros_like2, whose output dtype is an attribute instead of X's."""
    type, inputs, outputs = "fill_zeros_like2", ("X",), ("Out",)
    no_grad = True

    def infer(self, X, *, dtype=5):
        return {"Out": X.with_(dtype=dtype)}

    def forward(self, X, *, dtype=5):
        return {"Out": np.zeros(X.shape, dtype=to_numpy_dtype(dtype))}


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
        if any(type(x) is SelectedRows for x in X):
            return {"Out": _sum_sparse(X)}
        if len(X) == 1:
            return {"Out": np.array(X[0], copy=True)}
        out = in_parts(np.add, X[0], X[1])
        for x in X[2:]:
            in_parts(np.add, out, x, out)
        return {"Out": out}

    def lower(self, in_specs, attrs):
        if in_specs and len(in_specs) == 2 and in_specs[0].shape == in_specs[1].shape:
            def add2(xs):
                a, b = xs
                if type(a) is SelectedRows or type(b) is SelectedRows:
                    return _sum_sparse(xs)
                return in_parts(np.add, a, b)
            return add2
        return None

    def var_types(self, in_types, attrs):
        """fluid: Out is SELECTED_ROWS when every input is, else a dense tensor."""
        ts = in_types.get("X") or []
        sparse = bool(ts) and all(t == VarType.SELECTED_ROWS for t in ts)
        return {"Out": VarType.SELECTED_ROWS if sparse else VarType.LOD_TENSOR}

    def make_grad(self, g, **attrs):
        for x, dx in zip(g.input("X"), g.input_grad("X") or []):
            if dx != "@EMPTY@":
                g.append("assign", {"X": g.output_grad("Out")}, {"Out": dx})


def _sum_sparse(xs: Any) -> Any:
    """fluid's sum with SelectedRows inputs: all sparse -> their rows merged (MergeAdd); any
    dense input -> a dense tensor (the dense inputs added, the rows scatter-added)."""
    sparse = [x for x in xs if type(x) is SelectedRows]
    dense = [x for x in xs if type(x) is not SelectedRows]
    if not dense:
        return concat(sparse).merged()
    out = np.array(dense[0], copy=True)
    for x in dense[1:]:
        np.add(out, x, out=out)
    for x in sparse:
        m = x.merged()
        out[m.rows] += m.value
    return out


@register
class Feed(OpDef):
    """Marks a fed variable (in saved inference programs); the executor binds feeds itself."""
    type, inputs, outputs = "feed", ("X?",), ("Out",)
    no_grad = True
    plan_skip = True        # the executor binds feeds itself

    def infer(self, X, *, col=0):
        return {}

    def forward(self, X, *, col=0):
        raise RuntimeError("feed ops are bound by the executor, not run")


@register
class Fetch(OpDef):
    """Marks a fetch target (in saved inference programs); the executor returns it itself."""
    type, inputs, outputs = "fetch", ("X",), ("Out?",)
    no_grad = True
    plan_skip = True        # the executor returns fetches itself

    def infer(self, X, *, col=0):
        return {}

    def forward(self, X, *, col=0):
        raise RuntimeError("fetch ops are bound by the executor, not run")


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


# -- helpers shared with the other op modules (manip, index, loss, metric, ...) ---------------
def norm_axis(op_type: str, axis: int, rank: int, what: str = "axis", extra: int = 0) -> int:
    """``axis`` made non-negative; ValueError naming the op when outside
    [-rank-extra, rank+extra)."""
    n = rank + extra
    a = axis + n if axis < 0 else axis
    if not 0 <= a < n:
        raise ValueError(f"{op_type}: {what} {axis} is out of range for input of rank {rank} "
                         f"(valid: {-n}..{n - 1})")
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


def tensor_values(t, tlist):
    """Values given as a 1-D int tensor or as a list of 1-element tensors (None if neither)."""
    if t is not None:
        return [int(v) for v in np.asarray(t).reshape(-1)]
    if tlist:
        return [int(np.asarray(v).reshape(-1)[0]) for v in tlist]
    return None
