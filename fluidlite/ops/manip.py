"""Shape manipulation ops: the reshape-like ops with fluid's XShape output (reshape2,
transpose2, squeeze2, unsqueeze2, flatten2), their first versions without it (squeeze,
unsqueeze, flatten) and joining / splitting (concat, partial_concat, partial_sum, split, stack)."""
from __future__ import annotations

from typing import Any, Dict, Tuple

import numpy as np

from ..core.dtypes import to_numpy_dtype

from ..core import shape as S
from ..core.names import live
from ..core.registry import OpDef, VarSpec, register
from .tensor import emit_grad_op, norm_axis, tensor_values


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
    """Out = reshape(X, shape) (0 copies a dim, one -1 is inferred; at run time a
    ``ShapeTensor`` list, else a ``Shape`` tensor, overrides the attr, as fluid's kernel
    picks them);  dX = reshape(dOut, X.shape)."""
    type = "reshape2"
    inputs = ("X", "Shape?", "ShapeTensor*?")
    # Paddle 2.x's reshape2 also declares its oneDNN kernel switches (one CPU kernel here)
    extra_attrs = {"use_quantizer": False, "use_mkldnn": False, "mkldnn_data_type": "float32"}

    def infer(self, X, Shape, ShapeTensor, *, shape=()):
        if Shape is not None or ShapeTensor:
            # the attr, when it has the run-time target's rank, still tells the dims it fixes
            n = len(ShapeTensor) if ShapeTensor else int(Shape.shape[0])
            out = None
            if shape and (n < 0 or len(shape) == n):
                try:
                    out = reshape_target("reshape2", X.shape, shape)
                except ValueError:
                    out = None
            if out is None:
                out = (-1,) * max(n, 1)
        else:
            out = reshape_target("reshape2", X.shape, shape)
        return {"Out": VarSpec(out, X.dtype, X.lod_level), "XShape": _spec_xshape(X)}

    def forward(self, X, Shape, ShapeTensor, *, shape=[]):
        # fluid's kernel: the ShapeTensor list first, then the Shape tensor, then the attr
        dyn = tensor_values(None, ShapeTensor) if ShapeTensor else tensor_values(Shape, None)
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
        dyn = tensor_values(AxesTensor, AxesTensorList)
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


# fluid 1.8's first versions of squeeze / unsqueeze / flatten: the same shapes without XShape;
# the gradient reshapes dOut to X's shape (so X is kept for the backward pass)
class _ReshapeV1(OpDef):
    outputs = ("Out",)
    grad_uses = ("X",)
    v2: type = OpDef            # the XShape version whose Out this op computes

    def _v2(self, method: str, *args: Any, **attrs: Any) -> Dict[str, Any]:
        return {"Out": getattr(self.v2, method)(self.v2, *args, **attrs)["Out"]}


@register
class Squeeze(_ReshapeV1):
    """squeeze (fluid 1.8's v1 op): squeeze2's Out, no XShape;  dX = reshape(dOut, X.shape)."""
    type, inputs, v2 = "squeeze", ("X",), Squeeze2

    def infer(self, X, *, axes=()):
        return self._v2("infer", X, axes=axes)

    def forward(self, X, *, axes=[]):
        return self._v2("forward", X, axes=axes)

    def backward(self, X, dOut, *, axes=[]):
        return {"X": dOut.reshape(X.shape)}


@register
class Unsqueeze(_ReshapeV1):
    """unsqueeze (fluid 1.8's v1 op): unsqueeze2's Out, no XShape;  dX = reshape(dOut)."""
    type, inputs, v2 = "unsqueeze", ("X", "AxesTensor?", "AxesTensorList*?"), Unsqueeze2
    grad_uses = ("X", "AxesTensor", "AxesTensorList")

    def infer(self, X, AxesTensor, AxesTensorList, *, axes=()):
        return self._v2("infer", X, AxesTensor, AxesTensorList, axes=axes)

    def forward(self, X, AxesTensor, AxesTensorList, *, axes=[]):
        return self._v2("forward", X, AxesTensor, AxesTensorList, axes=axes)

    def backward(self, X, AxesTensor, AxesTensorList, dOut, *, axes=[]):
        return {"X": dOut.reshape(X.shape)}


@register
class Flatten(_ReshapeV1):
    """flatten (fluid 1.8's v1 op): flatten2's Out, no XShape;  dX = reshape(dOut, X.shape)."""
    type, inputs, v2 = "flatten", ("X",), Flatten2

    def infer(self, X, *, axis=1):
        return self._v2("infer", X, axis=axis)

    def forward(self, X, *, axis=1):
        return self._v2("forward", X, axis=axis)

    def backward(self, X, dOut, *, axis=1):
        return {"X": dOut.reshape(X.shape)}


# -- joining and splitting ----------------------------------------------------------------------
def _partial_cols(op: str, size: int, start_index: int, length: int) -> Tuple[int, int]:
    """fluid's column window [start, start + length) of ``partial_concat`` / ``partial_sum``:
    a negative start counts from the end, a negative length runs to the last column."""
    if not -size <= start_index < size:
        raise ValueError(f"{op}: start_index {start_index} is out of range for inputs of "
                         f"{size} columns (expected -{size} <= start_index < {size})")
    start = start_index + size if start_index < 0 else start_index
    n = size - start if length < 0 else length
    if start + n > size:
        raise ValueError(f"{op}: start_index {start_index} + length {length} exceeds the "
                         f"{size} columns of the inputs")
    return start, n


@register
class PartialConcat(OpDef):
    """Out = concat([x[:, start:start + length] for x in X], axis=1) (X: 2-D, one shape);
    dX[i] = dOut's i-th block of columns, placed at [start, start + length), zeros elsewhere."""
    type, inputs, outputs = "partial_concat", ("X*",), ("Out",)

    def infer(self, X, *, start_index=0, length=-1):
        if not X or any(len(x.shape) != 2 for x in X):
            raise ValueError(f"partial_concat: X must be one or more 2-D tensors, got shapes "
                             f"{[list(x.shape) for x in X]}")
        if any(tuple(x.shape) != tuple(X[0].shape) for x in X):
            raise ValueError(f"partial_concat: every X must have the shape of X[0] "
                             f"{list(X[0].shape)}, got {[list(x.shape) for x in X]}")
        cols = X[0].shape[1]
        if cols < 0:
            return {"Out": VarSpec((X[0].shape[0], -1), X[0].dtype)}
        _, n = _partial_cols(self.type, cols, start_index, length)
        return {"Out": VarSpec((X[0].shape[0], n * len(X)), X[0].dtype)}

    def forward(self, X, *, start_index=0, length=-1):
        start, n = _partial_cols(self.type, X[0].shape[1], start_index, length)
        return {"Out": np.concatenate([x[:, start:start + n] for x in X], axis=1)}

    def backward(self, X, dOut, *, start_index=0, length=-1):
        start, n = _partial_cols(self.type, X[0].shape[1], start_index, length)
        grads = []
        for i, x in enumerate(X):
            g = np.zeros_like(x)
            g[:, start:start + n] = dOut[:, i * n:(i + 1) * n]
            grads.append(g)
        return {"X": grads}


@register
class PartialSum(OpDef):
    """Out = sum(x[:, start:start + length] for x in X) (X: 2-D, one shape);
    dX[i] = dOut placed at columns [start, start + length), zeros elsewhere."""
    type, inputs, outputs = "partial_sum", ("X*",), ("Out",)

    def infer(self, X, *, start_index=0, length=-1):
        spec = PartialConcat.infer(self, X, start_index=start_index, length=length)["Out"]
        cols = spec.shape[1] // len(X) if spec.shape[1] >= 0 else -1
        return {"Out": VarSpec((spec.shape[0], cols), X[0].dtype)}

    def forward(self, X, *, start_index=0, length=-1):
        start, n = _partial_cols(self.type, X[0].shape[1], start_index, length)
        out = X[0][:, start:start + n].copy()
        for x in X[1:]:
            out += x[:, start:start + n]
        return {"Out": out}

    def backward(self, X, dOut, *, start_index=0, length=-1):
        start, n = _partial_cols(self.type, X[0].shape[1], start_index, length)
        grads = []
        for x in X:
            g = np.zeros_like(x)
            g[:, start:start + n] = dOut
            grads.append(g)
        return {"X": grads}


@register
class Concat(OpDef):
    """Out = concatenate(X, axis) (an int ``AxisTensor`` overrides axis);  dX[i] = slab i."""
    type, inputs, outputs = "concat", ("X*", "AxisTensor?"), ("Out",)
    grad_uses = ("X", "AxisTensor")
    fresh_outputs = ("Out",)        # np.concatenate always allocates (also for one input)
    extra_attrs = {"use_mkldnn": False, "use_quantizer": False}
    lod_aware = True                # axis 0 joins the inputs' LoDs (see _out_lod)
    lod_passthrough = True          # ... and makes none: plain programs stay unwrapped

    def infer(self, X, AxisTensor=None, *, axis=0):
        if not X:
            raise ValueError("concat: X is empty; pass at least one Variable")
        rank = len(X[0].shape)
        for i, x in enumerate(X[1:], 1):     # fluid: "All Inputs of Concat OP should have
            if x.dtype != X[0].dtype:        # same data type" -- no silent promotion
                raise ValueError(f"concat: all inputs must have the same dtype, but X[0] is "
                                f"{_dtype_name(X[0].dtype)} and X[{i}] is "
                                f"{_dtype_name(x.dtype)}; cast them first "
                                f"(fluid.layers.cast)")
        if AxisTensor is not None:       # the axis is known only at run time
            return {"Out": VarSpec((-1,) * rank, X[0].dtype, X[0].lod_level)}
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

    @staticmethod
    def _axis(t, axis):
        return int(np.asarray(t).reshape(-1)[0]) if t is not None else axis

    def forward(self, X, AxisTensor=None, lod=None, *, axis=0):
        a = self._axis(AxisTensor, axis)
        res = {"Out": np.concatenate(X, axis=a)}
        out_lod = self._out_lod(X, (lod or {}).get("X"), a)
        if out_lod is not None:
            res["lod"] = {"Out": out_lod}
        return res

    @staticmethod
    def _out_lod(X, lods, axis):
        """fluid's ConcatKernel: Out shares X[0]'s LoD; on axis 0, when every input has a LoD
        of the same depth, each level is X[0]'s followed by the other inputs' sequences."""
        lods = list(lods or [])
        first = lods[0] if lods else None
        if first is None:
            return None
        if (axis % X[0].ndim if X[0].ndim else 0) != 0 or any(l is None for l in lods):
            return first
        if any(len(l) != len(first) for l in lods):
            raise ValueError(f"concat: the inputs' LoDs must have the same number of levels "
                             f"to be joined on axis 0, got {[len(l) for l in lods]} levels")
        levels = []
        for k in range(len(first)):
            offs = list(first[k])
            for l in lods[1:]:
                offs += [offs[-1] + int(v) - int(l[k][0]) for v in l[k][1:]]
            levels.append(tuple(offs))
        return tuple(levels)

    def lower(self, in_specs, attrs):
        axis = attrs.get("axis", 0)
        if len(in_specs) > 1 and in_specs[1] is not None:
            return lambda xs, t: np.concatenate(xs, axis=self._axis(t, axis))
        return lambda xs, t=None: np.concatenate(xs, axis=axis)

    def backward(self, X, AxisTensor, dOut, lod=None, *, axis=0):
        axis = self._axis(AxisTensor, axis)
        bounds = np.cumsum([x.shape[axis] for x in X])[:-1]
        return {"X": np.split(dOut, bounds, axis=axis)}

    def make_grad(self, g, **attrs):
        emit_grad_op(g, "concat", attrs, uses=self.grad_uses)

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
        ins = {"X": parts}
        if g.input("AxisTensor"):
            ins["AxisTensor"] = g.input("AxisTensor")
        g.append("concat", ins, {"Out": target}, attrs)


@register
class Split(OpDef):
    """Out[i] = the i-th piece of X along axis (``num`` equal pieces, or ``sections`` sizes with
    one -1 inferred; ``AxisTensor`` / ``SectionsTensorList`` override them at run time);
    dX = concat(dOut) (missing pieces zero-filled)."""
    type, inputs, outputs = "split", ("X", "AxisTensor?", "SectionsTensorList*?"), ("Out*",)

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

    def infer(self, X, AxisTensor=None, SectionsTensorList=(), *, num=0, sections=(), axis=0):
        if AxisTensor is not None or SectionsTensorList:     # sizes known only at run time
            count = num if num > 0 else len(sections) or len(SectionsTensorList)
            shape = [-1] * len(X.shape) if AxisTensor is not None else list(X.shape)
            if AxisTensor is None:
                shape[norm_axis("split", axis, len(X.shape))] = -1
            return {"Out": [VarSpec(shape, X.dtype, X.lod_level) for _ in range(count)]}
        a = norm_axis("split", axis, len(X.shape))
        outs = []
        for s in self._sizes(X.shape[a], num, sections):
            shape = list(X.shape)
            shape[a] = s
            outs.append(VarSpec(shape, X.dtype, X.lod_level))
        return {"Out": outs}

    def forward(self, X, AxisTensor=None, SectionsTensorList=(), *, num=0, sections=[],
                axis=0):
        axis = Concat._axis(AxisTensor, axis)
        dyn = tensor_values(None, SectionsTensorList)
        a = axis + X.ndim if axis < 0 else axis
        sizes = self._sizes(X.shape[a], num, dyn if dyn is not None else sections)
        return {"Out": np.split(X, np.cumsum(sizes)[:-1], axis=a)}

    def make_grad(self, g, *, num=0, sections=[], axis=0, **_):
        if g.input_grad("X") is not None:
            ins = {"X": g.output_grad("Out")}
            if g.input("AxisTensor"):
                ins["AxisTensor"] = g.input("AxisTensor")
            g.append("concat", ins, {"Out": g.input_grad("X")}, axis=axis)


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


def _dtype_name(dtype) -> str:
    try:
        return np.dtype(to_numpy_dtype(dtype)).name
    except (TypeError, ValueError, KeyError):
        return str(dtype)
