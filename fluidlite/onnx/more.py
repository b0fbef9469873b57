"""More ONNX converters (``fluidlite.onnx``): the activations, math, comparison, indexing,
padding, resizing and normalization ops added with fluid 1.8's wider layer set. Each one is
checked against onnxruntime by ``tests/test_onnx_more.py``; semantics follow the fluid op's
kernel (e.g. ``elementwise_floordiv`` floors, ``soft_relu`` clips before the softplus)."""
from __future__ import annotations

from typing import Any, List

import numpy as np

from ..core.dtypes import VarType
from .common import (_ONNX_DTYPE, OnnxExportError, _conv, _Ctx, _fluid_broadcast, _int64_list,
                     _onnx, _out, _reduce_node, _to_declared, _x)

_SIMPLE = {"acos": "Acos", "asin": "Asin", "atan": "Atan", "erf": "Erf"}


@_conv(*_SIMPLE)
def _simple(c: _Ctx, op: Any) -> None:
    c.node(_SIMPLE[op.type], [_x(op, "X")], [_out(op)])


def _const_like(c: _Ctx, x: str, value: float) -> str:
    return c.const(value, c.np_dtype(x))


@_conv("log1p")
def _log1p(c: _Ctx, op: Any) -> None:
    x = _x(op, "X")
    c.node("Log", [c.node("Add", [x, _const_like(c, x, 1.0)])], [_out(op)])


@_conv("logsigmoid")
def _logsigmoid(c: _Ctx, op: Any) -> None:         # log(sigmoid(x)) = -softplus(-x)
    c.node("Neg", [c.node("Softplus", [c.node("Neg", [_x(op, "X")])])], [_out(op)])


@_conv("tanh_shrink")
def _tanh_shrink(c: _Ctx, op: Any) -> None:
    x = _x(op, "X")
    c.node("Sub", [x, c.node("Tanh", [x])], [_out(op)])


@_conv("hard_shrink", "softshrink")
def _shrink(c: _Ctx, op: Any) -> None:
    lam = float(op.attr("threshold") if op.type == "hard_shrink" else op.attr("lambda"))
    c.node("Shrink", [_x(op, "X")], [_out(op)], lambd=lam,
           bias=0.0 if op.type == "hard_shrink" else lam)


@_conv("thresholded_relu")
def _thresholded_relu(c: _Ctx, op: Any) -> None:
    c.node("ThresholdedRelu", [_x(op, "X")], [_out(op)], alpha=float(op.attr("threshold")))


@_conv("selu")
def _selu(c: _Ctx, op: Any) -> None:
    c.node("Selu", [_x(op, "X")], [_out(op)], alpha=float(op.attr("alpha")),
           gamma=float(op.attr("scale")))


@_conv("brelu")
def _brelu(c: _Ctx, op: Any) -> None:
    x = _x(op, "X")
    c.node("Clip", [x, _const_like(c, x, op.attr("t_min")), _const_like(c, x, op.attr("t_max"))],
           [_out(op)])


@_conv("soft_relu")
def _soft_relu(c: _Ctx, op: Any) -> None:           # log(1 + exp(clip(x, -t, t)))
    x, t = _x(op, "X"), float(op.attr("threshold"))
    clipped = c.node("Clip", [x, _const_like(c, x, -t), _const_like(c, x, t)])
    c.node("Softplus", [clipped], [_out(op)])


@_conv("stanh")
def _stanh(c: _Ctx, op: Any) -> None:               # b * tanh(a * x)
    x = _x(op, "X")
    t = c.node("Tanh", [c.node("Mul", [x, _const_like(c, x, op.attr("scale_a"))])])
    c.node("Mul", [t, _const_like(c, x, op.attr("scale_b"))], [_out(op)])


@_conv("hard_swish")
def _hard_swish(c: _Ctx, op: Any) -> None:          # x * min(max(x + offset, 0), t) / scale
    x = _x(op, "X")
    shifted = c.node("Add", [x, _const_like(c, x, op.attr("offset"))])
    gate = c.node("Clip", [shifted, _const_like(c, x, 0.0),
                           _const_like(c, x, op.attr("threshold"))])
    c.node("Div", [c.node("Mul", [x, gate]), _const_like(c, x, op.attr("scale"))], [_out(op)])


@_conv("prelu")
def _prelu(c: _Ctx, op: Any) -> None:
    x, alpha = _x(op, "X"), _x(op, "Alpha")
    rank, mode = len(c.shape(x)), op.attr("mode")
    if mode == "all":
        shape = [1] * rank
    elif mode == "channel":
        shape = [1, -1] + [1] * (rank - 2)
    else:
        shape = [1] + [int(d) for d in c.shape(x)[1:]]
    c.node("PRelu", [x, c.node("Reshape", [alpha, c.ints(shape)])], [_out(op)])


@_conv("maxout")
def _maxout(c: _Ctx, op: Any) -> None:
    x, g = _x(op, "X"), int(op.attr("groups"))
    shape = [int(d) for d in c.shape(x)]
    axis = int(op.attr("axis")) % len(shape)
    # dims before the channel axis copied (0), those after it as declared (-1 if unknown)
    split = [0] * axis + [shape[axis] // g, g] + [d if d > 0 else -1 for d in shape[axis + 1:]]
    viewed = c.node("Reshape", [x, c.ints(split)])
    _reduce_node(c, "ReduceMax", viewed, [axis + 1], False, [_out(op)])


@_conv("log_softmax")
def _log_softmax(c: _Ctx, op: Any) -> None:
    c.node("LogSoftmax", [_x(op, "X")], [_out(op)], axis=int(op.attr("axis")))


@_conv("logsumexp")
def _logsumexp(c: _Ctx, op: Any) -> None:
    x, out = _x(op, "X"), _out(op)
    rank = len(c.shape(x))
    axes = None if op.attr("reduce_all") else [int(a) % rank for a in op.attr("axis")]
    keep = bool(op.attr("keepdim"))
    full = axes is None or sorted(axes) == list(range(rank))
    if full and not keep:
        _to_declared(c, _reduce_node(c, "ReduceLogSumExp", x, axes, keep, None), out)
    else:
        _reduce_node(c, "ReduceLogSumExp", x, axes, keep, [out])


_BOOL_REDUCE = {"reduce_all": "ReduceMin", "reduce_any": "ReduceMax"}


@_conv("reduce_prod", *_BOOL_REDUCE)
def _reduce_more(c: _Ctx, op: Any) -> None:
    x, out = _x(op, "X"), _out(op)
    rank = len(c.shape(x))
    axes = None if op.attr("reduce_all") else [int(a) % rank for a in op.attr("dim")]
    keep = bool(op.attr("keep_dim"))
    if op.type != "reduce_prod":                    # bools: min / max over 0/1
        x = c.node("Cast", [x], to=_ONNX_DTYPE[VarType.INT32])
    kind = "ReduceProd" if op.type == "reduce_prod" else _BOOL_REDUCE[op.type]
    full = axes is None or sorted(axes) == list(range(rank))
    target = None if op.type != "reduce_prod" or (full and not keep) else [out]
    y = _reduce_node(c, kind, x, axes, keep, target)
    if op.type != "reduce_prod":
        y = c.node("Cast", [y], to=_ONNX_DTYPE[VarType.BOOL])
    if target is None:
        c.node("Reshape", [y, c.ints(c.shape(out))], [out])


@_conv("cumsum")
def _cumsum(c: _Ctx, op: Any) -> None:
    x = _x(op, "X")
    axis = int(op.attr("axis"))
    if op.attr("flatten"):
        x, axis = c.node("Reshape", [x, c.ints([-1])]), 0
    c.node("CumSum", [x, c.const(np.array(axis, np.int64))], [_out(op)],
           exclusive=int(bool(op.attr("exclusive"))), reverse=int(bool(op.attr("reverse"))))


@_conv("one_hot", "one_hot_v2")
def _one_hot(c: _Ctx, op: Any) -> None:
    x = _x(op, "X")
    if op.type == "one_hot":                        # ids [..., 1] -> [...]
        x = c.node("Squeeze", [x, c.ints([len(c.shape(x)) - 1])])
    dtype = np.dtype(np.float32) if int(op.attr("dtype")) == int(VarType.FP32) else \
        c.np_dtype(_out(op))
    c.node("OneHot", [x, c.ints([int(op.attr("depth"))]), c.const(np.array([0, 1], dtype))],
           [_out(op)], axis=-1)


@_conv("expand")
def _expand(c: _Ctx, op: Any) -> None:
    c.node("Tile", [_x(op, "X"), c.ints([int(t) for t in op.attr("expand_times")])],
           [_out(op)])


@_conv("expand_as")
def _expand_as(c: _Ctx, op: Any) -> None:
    x, target = _x(op, "X"), _x(op, "target_tensor")
    repeats = c.node("Div", [c.node("Shape", [target]), c.node("Shape", [x])])
    c.node("Tile", [x, repeats], [_out(op)])


_COMPARE = {"less_than": "Less", "less_equal": "LessOrEqual", "greater_than": "Greater",
            "greater_equal": "GreaterOrEqual", "equal": "Equal", "not_equal": "Equal",
            "logical_and": "And", "logical_or": "Or", "logical_xor": "Xor"}


@_conv(*_COMPARE)
def _compare(c: _Ctx, op: Any) -> None:
    x, y = _x(op, "X"), _x(op, "Y")
    y = _fluid_broadcast(c, x, y, int(op.attr("axis")))
    if op.type in ("equal", "not_equal") and c.np_dtype(x).kind == "f":
        # fluid's EqualFunctor (ops/compare.py): |x - y| < 1e-8 as a double, infinities
        # only to themselves, NaN to nothing
        diff = c.node("Cast", [c.node("Abs", [c.node("Sub", [x, y])])], to=11)
        near = c.node("Less", [diff, c.const(1e-8, np.float64)])    # false for inf, NaN
        eq = c.node("Or", [near, c.node("And", [c.node("IsInf", [x]),
                                                 c.node("Equal", [x, y])])])
        c.node("Not" if op.type == "not_equal" else "Identity", [eq], [_out(op)])
    elif op.type == "not_equal":
        c.node("Not", [c.node("Equal", [x, y])], [_out(op)])
    else:
        c.node(_COMPARE[op.type], [x, y], [_out(op)])


@_conv("elementwise_floordiv", "elementwise_mod")
def _floor_ops(c: _Ctx, op: Any) -> None:
    x, y = _x(op, "X"), _x(op, "Y")
    y = _fluid_broadcast(c, x, y, int(op.attr("axis")))
    integer = c.np_dtype(x).kind in "iu"
    if op.type == "elementwise_mod":
        if integer:                                 # sign of the divisor, as Python's %
            c.node("Mod", [x, y], [_out(op)], fmod=0)
        else:
            q = c.node("Floor", [c.node("Div", [x, y])])
            c.node("Sub", [x, c.node("Mul", [q, y])], [_out(op)])
        return
    if integer:                                     # floor, not truncation: via float64
        f64 = _ONNX_DTYPE[VarType.FP64]
        q = c.node("Floor", [c.node("Div", [c.node("Cast", [x], to=f64),
                                            c.node("Cast", [y], to=f64)])])
        c.node("Cast", [q], [_out(op)], to=_ONNX_DTYPE[VarType(int(c.var(x).dtype))])
    else:
        c.node("Floor", [c.node("Div", [x, y])], [_out(op)])


@_conv("gather_nd")
def _gather_nd(c: _Ctx, op: Any) -> None:
    c.node("GatherND", [_x(op, "X"), c.node("Cast", [_x(op, "Index")],
                                            to=_ONNX_DTYPE[VarType.INT64])], [_out(op)])


@_conv("pad")
def _pad(c: _Ctx, op: Any) -> None:
    x = _x(op, "X")
    p = [int(v) for v in op.attr("paddings")]
    pads = p[0::2] + p[1::2]                        # fluid [b0, a0, b1, a1..] -> [b.., a..]
    c.node("Pad", [x, c.ints(pads), _const_like(c, x, op.attr("pad_value"))], [_out(op)],
           mode="constant")


_PAD_MODES = {"constant": "constant", "reflect": "reflect", "edge": "edge"}


@_conv("pad2d")
def _pad2d(c: _Ctx, op: Any) -> None:
    x = _x(op, "X")
    top, bottom, left, right = [int(v) for v in op.attr("paddings")]
    if op.attr("data_format") == "NHWC":
        pads = [0, top, left, 0, 0, bottom, right, 0]
    else:
        pads = [0, 0, top, left, 0, 0, bottom, right]
    ins = [x, c.ints(pads)]
    if op.attr("mode") == "constant":
        ins.append(_const_like(c, x, op.attr("pad_value")))
    c.node("Pad", ins, [_out(op)], mode=_PAD_MODES[op.attr("mode")])


@_conv("pixel_shuffle")
def _pixel_shuffle(c: _Ctx, op: Any) -> None:
    c.node("DepthToSpace", [_x(op, "X")], [_out(op)],
           blocksize=int(op.attr("upscale_factor")), mode="CRD")


@_conv("bilinear_interp", "nearest_interp")
def _interp(c: _Ctx, op: Any) -> None:
    x, out = _x(op, "X"), _out(op)
    axes = [1, 2] if op.attr("data_layout") == "NHWC" else [2, 3]
    known = [int(c.shape(out)[a]) for a in axes]
    shape = c.node("Shape", [x])
    # the output size, as fluid's kernel picks it: SizeTensor, OutSize, a scale (the Scale
    # tensor, else the attr: int(in * scale) of a float32 product), the out_h / out_w attrs
    if op.input("SizeTensor"):
        hw = _int64_list(c, op.input("SizeTensor"))
    elif op.input("OutSize"):
        hw = c.node("Cast", [op.input("OutSize")[0]], to=7)
    elif min(known) > 0 and not op.input("Scale"):     # sizes fixed at build time
        hw = c.ints(known)
    elif op.input("Scale") or float(op.attr("scale")) > 0:
        scale = c.node("Cast", [c.node("Reshape", [op.input("Scale")[0], c.ints([1])])], to=1) \
            if op.input("Scale") else c.const(np.float32(op.attr("scale")), np.float32)
        ins = c.node("Cast", [c.node("Gather", [shape, c.ints(axes)], axis=0)], to=1)
        hw = c.node("Cast", [c.node("Floor", [c.node("Mul", [ins, scale])])], to=7)
    else:
        raise OnnxExportError(f"{op.type}: the output size must be known")
    # sizes in the input's dim order: N, C (NCHW) or N (NHWC), then H, W, then C (NHWC)
    parts = [c.node("Slice", [shape, c.ints([0]), c.ints([axes[0]])]), hw]
    if axes[0] == 1:
        parts.append(c.node("Slice", [shape, c.ints([3]), c.ints([4])]))
    sizes = c.node("Concat", parts, axis=0)
    align = bool(op.attr("align_corners"))
    if op.type == "bilinear_interp":
        mode = "align_corners" if align else \
            ("half_pixel" if int(op.attr("align_mode")) == 0 else "asymmetric")
        c.node("Resize", [x, "", "", sizes], [out], mode="linear",
               coordinate_transformation_mode=mode)
    else:
        c.node("Resize", [x, "", "", sizes], [out], mode="nearest",
               coordinate_transformation_mode="align_corners" if align else "asymmetric",
               nearest_mode="round_prefer_ceil" if align else "floor")


@_conv("instance_norm")
def _instance_norm(c: _Ctx, op: Any) -> None:
    x = _x(op, "X")
    ch = int(c.shape(x)[1])
    dt = c.np_dtype(x)
    scale = op.input("Scale")[0] if op.input("Scale") else c.const(np.ones(ch, dt))
    bias = op.input("Bias")[0] if op.input("Bias") else c.const(np.zeros(ch, dt))
    c.node("InstanceNormalization", [x, scale, bias], [_out(op, "Y")],
           epsilon=float(op.attr("epsilon")))


@_conv("group_norm")
def _group_norm(c: _Ctx, op: Any) -> None:
    x = _x(op, "X")
    g, dt = int(op.attr("groups")), c.np_dtype(x)
    shape = [int(d) for d in c.shape(x)]
    grouped = c.node("Reshape", [x, c.ints([0, g, -1])])
    mean = _reduce_node(c, "ReduceMean", grouped, [2], True, None)
    d = c.node("Sub", [grouped, mean])
    var = _reduce_node(c, "ReduceMean", c.node("Mul", [d, d]), [2], True, None)
    y = c.node("Div", [d, c.node("Sqrt", [c.node("Add", [var, c.const(
        float(op.attr("epsilon")), dt)])])])
    y = c.node("Reshape", [y, c.node("Shape", [x])])
    affine = [1, shape[1]] + [1] * (len(shape) - 2)
    if op.input("Scale"):
        y = c.node("Mul", [y, c.node("Reshape", [op.input("Scale")[0], c.ints(affine)])])
    if op.input("Bias"):
        y = c.node("Add", [y, c.node("Reshape", [op.input("Bias")[0], c.ints(affine)])])
    c.node("Identity", [y], [_out(op, "Y")])


@_conv("tril_triu")
def _tril_triu(c: _Ctx, op: Any) -> None:
    c.node("Trilu", [_x(op, "X"), c.const(np.array(int(op.attr("diagonal")), np.int64))],
           [_out(op)], upper=0 if op.attr("lower") else 1)


@_conv("flip")
def _flip(c: _Ctx, op: Any) -> None:
    dims: List[int] = [int(d) for d in op.attr("dims")]
    n = len(dims)
    c.node("Slice", [_x(op, "X"), c.ints([-1] * n), c.ints([-(2 ** 63)] * n), c.ints(dims),
                     c.ints([-1] * n)], [_out(op)])


@_conv("strided_slice")
def _strided_slice(c: _Ctx, op: Any) -> None:
    x, out = _x(op, "Input"), _out(op)
    sliced = c.node("Slice", [x, c.ints(op.attr("starts")), c.ints(op.attr("ends")),
                              c.ints(op.attr("axes")), c.ints(op.attr("strides"))])
    dec = [int(a) for a in op.attr("decrease_axis")]
    if dec and len(dec) < len(c.shape(x)):
        c.node("Squeeze", [sliced, c.ints(dec)], [out])
    else:
        c.node("Reshape", [sliced, c.ints(c.shape(out))], [out])


@_conv("unstack")
def _unstack(c: _Ctx, op: Any) -> None:
    x, outs = _x(op, "X"), op.output("Y")
    axis = int(op.attr("axis")) % len(c.shape(x))
    parts = [c.tmp("unstack") for _ in outs]
    c.node("Split", [x, c.ints([1] * len(outs))], parts, axis=axis)
    for part, out in zip(parts, outs):
        c.node("Squeeze", [part, c.ints([axis])], [out])


@_conv("fill_any_like", "fill_zeros_like")
def _fill_like(c: _Ctx, op: Any) -> None:
    x, out = _x(op, "X"), _out(op)
    value = float(op.attr("value")) if op.type == "fill_any_like" else 0.0
    c.node("ConstantOfShape", [c.node("Shape", [x])], [out],
           value=_onnx_scalar(np.array([value], c.np_dtype(out))))


def _onnx_scalar(arr: np.ndarray) -> Any:
    """``arr`` as an ONNX TensorProto (a node attribute value)."""
    return _onnx().numpy_helper.from_array(arr)


@_conv("size")
def _size(c: _Ctx, op: Any) -> None:
    c.node("Reshape", [c.node("Size", [_x(op, "Input")]), c.ints([1])], [_out(op)])


@_conv("label_smooth")
def _label_smooth(c: _Ctx, op: Any) -> None:
    x = _x(op, "X")
    eps = float(op.attr("epsilon"))
    kept = c.node("Mul", [x, _const_like(c, x, 1.0 - eps)])
    if op.input("PriorDist"):
        prior = c.node("Mul", [op.input("PriorDist")[0], _const_like(c, x, eps)])
    else:
        prior = _const_like(c, x, eps / int(c.shape(x)[-1]))
    c.node("Add", [kept, prior], [_out(op)])


@_conv("isfinite", "isinf", "isnan")
def _finite_tests(c: _Ctx, op: Any) -> None:
    x, out = _x(op, "X"), _out(op)
    if c.np_dtype(x).kind not in "fc":
        c.node("Identity", [c.const(np.array([op.type == "isfinite"]))], [out])
        return
    bad = c.node("IsNaN", [x]) if op.type == "isnan" else c.node("IsInf", [x])
    if op.type == "isfinite":
        bad = c.node("Or", [bad, c.node("IsNaN", [x])])
    any_bad = _reduce_node(c, "ReduceMax", c.node("Cast", [bad], to=_ONNX_DTYPE[VarType.INT32]),
                           None, False, None)
    flag = c.node("Cast", [c.node("Reshape", [any_bad, c.ints([1])])],
                  to=_ONNX_DTYPE[VarType.BOOL])
    c.node("Not" if op.type == "isfinite" else "Identity", [flag], [out])


@_conv("seed")
def _seed(c: _Ctx, op: Any) -> None:
    # only a test-mode dropout reads it (recompute's seeded dropout), which ignores the value
    c.node("Identity", [c.const(np.array([int(op.attr("seed"))], np.int32))], [_out(op)])


# -- NHWC layouts: the NCHW conversion between two transposes -----------------------------------
class _NCHWView:
    """An op seen with its NHWC input/output renamed to NCHW temporaries."""

    def __init__(self, op: Any, rename: dict) -> None:
        self._op, self._rename, self.type, self.block = op, rename, op.type, op.block

    def input(self, slot: str) -> List[str]:
        return [self._rename.get(n, n) for n in self._op.input(slot)]

    def output(self, slot: str) -> List[str]:
        return [self._rename.get(n, n) for n in self._op.output(slot)]

    def attr(self, name: str) -> Any:
        if name in ("data_format", "data_layout"):
            return "NCHW"
        return self._op.attr(name)


_NHWC_SLOTS = {"conv2d": ("Input", "Output"), "depthwise_conv2d": ("Input", "Output"),
               "conv2d_transpose": ("Input", "Output"), "pool2d": ("X", "Out"),
               "batch_norm": ("X", "Y")}


def convert_nhwc(c: _Ctx, op: Any, convert: Any) -> None:
    """``convert`` (an NCHW converter) applied to an NHWC ``op``."""
    src, dst = _NHWC_SLOTS[op.type]
    x, y = op.input(src)[0], op.output(dst)[0]
    nchw_in = c.node("Transpose", [x], perm=[0, 3, 1, 2])
    nchw_out = c.tmp("nchw")
    convert(c, _NCHWView(op, {x: nchw_in, y: nchw_out}))
    c.node("Transpose", [nchw_out], [y], perm=[0, 2, 3, 1])


# -- 3-D convolution and pooling ----------------------------------------------------------------
def _pads3d(paddings: Any) -> List[int]:
    p = [int(v) for v in paddings]
    if len(p) == 3:
        return p + p
    return p[0::2] + p[1::2]                        # [d0, d1, h0, h1, w0, w1] -> begins, ends


def _conv3d_attrs(op: Any) -> dict:
    attrs = dict(strides=[int(v) for v in op.attr("strides")],
                 dilations=[int(v) for v in op.attr("dilations")],
                 group=int(op.attr("groups") or 1))
    algo = op.attr("padding_algorithm")
    if algo == "SAME":
        attrs["auto_pad"] = "SAME_UPPER"
    else:
        attrs["pads"] = [0] * 6 if algo == "VALID" else _pads3d(op.attr("paddings"))
    return attrs


@_conv("conv3d")
def _conv3d(c: _Ctx, op: Any) -> None:
    c.node("Conv", [_x(op, "Input"), _x(op, "Filter")], [_out(op, "Output")],
           **_conv3d_attrs(op))


@_conv("conv3d_transpose")
def _conv3d_t(c: _Ctx, op: Any) -> None:
    attrs = _conv3d_attrs(op)
    if op.attr("output_size"):
        attrs["output_shape"] = [int(v) for v in op.attr("output_size")]
    c.node("ConvTranspose", [_x(op, "Input"), _x(op, "Filter")], [_out(op, "Output")], **attrs)


@_conv("pool3d")
def _pool3d(c: _Ctx, op: Any) -> None:
    x, kind = _x(op, "X"), op.attr("pooling_type")
    if op.attr("global_pooling"):
        c.node("GlobalMaxPool" if kind == "max" else "GlobalAveragePool", [x], [_out(op)])
        return
    attrs = dict(kernel_shape=[int(k) for k in op.attr("ksize")],
                 strides=[int(v) for v in op.attr("strides")],
                 ceil_mode=int(bool(op.attr("ceil_mode"))))
    if op.attr("padding_algorithm") == "SAME":
        attrs["auto_pad"] = "SAME_UPPER"
    else:
        attrs["pads"] = [0] * 6 if op.attr("padding_algorithm") == "VALID" else \
            _pads3d(op.attr("paddings"))
    if kind == "max":
        c.node("MaxPool", [x], [_out(op)], **attrs)
    else:
        c.node("AveragePool", [x], [_out(op)],
               count_include_pad=0 if op.attr("exclusive") else 1, **attrs)


# -- indexing and rearranging -------------------------------------------------------------------
@_conv("index_select")
def _index_select(c: _Ctx, op: Any) -> None:
    c.node("Gather", [_x(op, "X"), _x(op, "Index")], [_out(op)], axis=int(op.attr("dim")))


@_conv("argsort")
def _argsort(c: _Ctx, op: Any) -> None:
    x = _x(op, "X")
    axis = int(op.attr("axis")) % len(c.shape(x))
    k = c.node("Slice", [c.node("Shape", [x]), c.ints([axis]), c.ints([axis + 1])])
    c.node("TopK", [x, k], [_out(op), _out(op, "Indices")], axis=axis,
           largest=int(bool(op.attr("descending"))), sorted=1)


@_conv("where_index")
def _where_index(c: _Ctx, op: Any) -> None:
    c.node("Transpose", [c.node("NonZero", [_x(op, "Condition")])], [_out(op)], perm=[1, 0])


@_conv("roll")
def _roll(c: _Ctx, op: Any) -> None:
    x, out = _x(op, "X"), _out(op)
    shape = [int(d) for d in c.shape(x)]
    for i, (shift, dim) in enumerate(zip(op.attr("shifts"), op.attr("dims"))):
        n = shape[int(dim)]
        k = int(shift) % n                          # rows [n-k:] move to the front
        dims = c.ints([int(dim)])
        tail = c.node("Slice", [x, c.ints([n - k]), c.ints([n]), dims])
        head = c.node("Slice", [x, c.ints([0]), c.ints([n - k]), dims])
        last = i == len(op.attr("dims")) - 1
        x = c.node("Concat", [tail, head], [out] if last else None, axis=int(dim))


@_conv("lrn")
def _lrn(c: _Ctx, op: Any) -> None:
    n = int(op.attr("n"))                           # fluid: alpha not divided by n
    c.node("LRN", [_x(op, "X")], [_out(op)], size=n, alpha=float(op.attr("alpha")) * n,
           beta=float(op.attr("beta")), bias=float(op.attr("k")))


@_conv("affine_channel")
def _affine_channel(c: _Ctx, op: Any) -> None:
    x = _x(op, "X")
    rank = len(c.shape(x))
    shape = [1, -1] + [1] * (rank - 2) if op.attr("data_layout") != "NHWC" else \
        [1] * (rank - 1) + [-1]
    scale = c.node("Reshape", [_x(op, "Scale"), c.ints(shape)])
    bias = c.node("Reshape", [_x(op, "Bias"), c.ints(shape)])
    c.node("Add", [c.node("Mul", [x, scale]), bias], [_out(op)])


@_conv("shuffle_channel")
def _shuffle_channel(c: _Ctx, op: Any) -> None:
    x, g = _x(op, "X"), int(op.attr("group"))
    n, ch, h, w = [int(d) for d in c.shape(x)]
    grouped = c.node("Reshape", [x, c.ints([0, g, ch // g, h, w])])
    swapped = c.node("Transpose", [grouped], perm=[0, 2, 1, 3, 4])
    c.node("Reshape", [swapped, c.node("Shape", [x])], [_out(op)])


@_conv("range")
def _range(c: _Ctx, op: Any) -> None:
    scalars = [c.node("Squeeze", [_x(op, s), c.ints([0])]) for s in ("Start", "End", "Step")]
    c.node("Range", scalars, [_out(op)])


@_conv("assign_value")
def _assign_value(c: _Ctx, op: Any) -> None:
    from ..core.registry import get_op_def
    opdef = get_op_def(op.type)         # the op's own kernel builds the constant
    value = opdef.forward(**{k: op.attr(k) for k in opdef.attr_defaults})["Out"]
    c.node("Identity", [c.const(value)], [_out(op)])


def problem(op: Any) -> Any:
    """Why an op this module converts cannot be exported in this form, or None."""
    if op.type == "roll":
        x = op.block._find_var_recursive(op.input("X")[0])
        dims = [int(d) for d in op.attr("dims")]
        if not dims:
            return "roll without dims (a roll of the flattened tensor)"
        if "ShiftsTensor" in op.inputs and op.input("ShiftsTensor"):
            return "roll with a ShiftsTensor input (shifts known only at run time)"
        if any(int(x.shape[d]) < 0 for d in dims):
            return "roll along a dimension of unknown size"
    return None


# -- the Paddle 2.x ops a loaded .pdmodel may hold (ops/paddle2.py) ---------------------------
@_conv("flatten_contiguous_range")
def _flatten_range(c: _Ctx, op: Any) -> None:
    x, out = _x(op, "X"), _out(op)
    dims = [d if d >= 0 else -1 for d in c.shape(out)]
    if dims.count(-1) <= 1:
        c.node("Reshape", [x, c.ints(dims)], [out])
        return
    # several sizes known only at run time (a batch and an image width): the target is X's
    # shape with dims start..stop replaced by their product
    rank = len(c.shape(x))
    start, stop = int(op.attr("start_axis")) % rank, int(op.attr("stop_axis")) % rank
    shape = c.node("Shape", [x])
    merged = c.node("Slice", [shape, c.ints([start]), c.ints([stop + 1])])
    parts = [_reduce_node(c, "ReduceProd", merged, [0], True, None)]
    if start > 0:
        parts.insert(0, c.node("Slice", [shape, c.ints([0]), c.ints([start])]))
    if stop + 1 < rank:
        parts.append(c.node("Slice", [shape, c.ints([stop + 1]), c.ints([rank])]))
    c.node("Reshape", [x, c.node("Concat", parts, axis=0)], [out])


@_conv("expand_v2")
def _expand_v2(c: _Ctx, op: Any) -> None:
    x, out = _x(op, "X"), _out(op)
    shape = [int(d) for d in op.attr("shape")]
    lead = len(shape) - len(c.shape(x))
    # -1 keeps the input's size: ONNX Expand broadcasts a target 1 to it
    target = [1 if d == -1 and i >= lead else d for i, d in enumerate(shape)]
    c.node("Expand", [x, c.ints(target)], [out])


@_conv("tile")
def _tile(c: _Ctx, op: Any) -> None:
    x = _x(op, "X")
    reps = [int(r) for r in op.attr("repeat_times")]
    rank = len(c.shape(x))
    if len(reps) > rank:                            # tile prepends 1-dims to X
        x = c.node("Unsqueeze", [x, c.ints(range(len(reps) - rank))])
    reps = [1] * (max(rank, len(reps)) - len(reps)) + reps
    c.node("Tile", [x, c.ints(reps)], [_out(op)])


@_conv("where")
def _where(c: _Ctx, op: Any) -> None:
    c.node("Where", [_x(op, "Condition"), _x(op, "X"), _x(op, "Y")], [_out(op)])


@_conv("top_k_v2")
def _top_k_v2(c: _Ctx, op: Any) -> None:
    x = _x(op, "X")
    c.node("TopK", [x, c.ints([int(op.attr("k"))])], [_out(op), _out(op, "Indices")],
           axis=int(op.attr("axis")), largest=int(bool(op.attr("largest"))),
           sorted=int(bool(op.attr("sorted"))))


@_conv("mish")
def _mish(c: _Ctx, op: Any) -> None:
    """x * tanh(sp), sp = fluid's softplus: x past t, exp(x) below -t (t > 0), else
    softplus(x)."""
    x, t = _x(op, "X"), float(op.attr("threshold"))
    sp = c.node("Softplus", [x])
    if t > 0:
        sp = c.node("Where", [c.node("Less", [x, _const_like(c, x, -t)]), c.node("Exp", [x]),
                              sp])
        sp = c.node("Where", [c.node("Greater", [x, _const_like(c, x, t)]), x, sp])
    c.node("Mul", [x, c.node("Tanh", [sp])], [_out(op)])


@_conv("isfinite_v2", "isnan_v2", "isinf_v2")
def _finite_v2(c: _Ctx, op: Any) -> None:
    x, out = _x(op, "X"), _out(op)
    if op.type == "isnan_v2":
        c.node("IsNaN", [x], [out])
    elif op.type == "isinf_v2":
        c.node("IsInf", [x], [out])
    else:
        c.node("Not", [c.node("Or", [c.node("IsInf", [x]), c.node("IsNaN", [x])])], [out])
