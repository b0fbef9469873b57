"""The converters of the basic op set (``fluidlite.onnx``): activations, elementwise math,
``mul`` / ``matmul``, conv and pool, the normalizations, embedding lookup, shape manipulation,
reductions, ``scale`` / ``cast`` / ``clip`` / ``fill_constant``, ``arg_max`` / ``top_k`` /
``shape``. Importing the module registers them (``common._conv``); ``more`` adds the wider
fluid 1.8 set and ``control`` the sub-block ops.

Numerics: fluid's ``elementwise_*`` ``axis`` broadcasting becomes an explicit ``Unsqueeze`` of
Y; ``mul`` flattens with ``Flatten`` and restores the leading dims; ``lookup_table`` with
``padding_idx`` multiplies by a mask (rows equal to the padding id are zeros, as in fluid).
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from ..core.dtypes import VarType, to_numpy_dtype
from .common import (_ONNX_DTYPE, OnnxExportError, _conv, _Ctx, _fluid_broadcast, _int64_list,
                     _out, _reduce_node, _to_declared, _x)

_UNARY = {"relu": "Relu", "sigmoid": "Sigmoid", "tanh": "Tanh", "exp": "Exp", "sqrt": "Sqrt",
          "abs": "Abs", "log": "Log", "softsign": "Softsign", "softplus": "Softplus",
          "ceil": "Ceil", "floor": "Floor", "reciprocal": "Reciprocal", "sign": "Sign",
          "sin": "Sin", "cos": "Cos", "round": "Round", "assign": "Identity",
          "logical_not": "Not"}


@_conv(*_UNARY)
def _unary(c: _Ctx, op: Any) -> None:
    c.node(_UNARY[op.type], [_x(op, "X")], [_out(op)])


@_conv("square")
def _square(c: _Ctx, op: Any) -> None:
    c.node("Mul", [_x(op, "X"), _x(op, "X")], [_out(op)])


@_conv("rsqrt")
def _rsqrt(c: _Ctx, op: Any) -> None:
    c.node("Reciprocal", [c.node("Sqrt", [_x(op, "X")])], [_out(op)])


@_conv("relu6")
def _relu6(c: _Ctx, op: Any) -> None:
    dt = c.np_dtype(_x(op, "X"))
    c.node("Clip", [_x(op, "X"), c.const(0, dt), c.const(op.attr("threshold"), dt)],
           [_out(op)])


@_conv("leaky_relu")
def _leaky(c: _Ctx, op: Any) -> None:
    c.node("LeakyRelu", [_x(op, "X")], [_out(op)], alpha=float(op.attr("alpha")))


@_conv("elu")
def _elu(c: _Ctx, op: Any) -> None:
    c.node("Elu", [_x(op, "X")], [_out(op)], alpha=float(op.attr("alpha")))


@_conv("hard_sigmoid")
def _hsig(c: _Ctx, op: Any) -> None:
    c.node("HardSigmoid", [_x(op, "X")], [_out(op)], alpha=float(op.attr("slope")),
           beta=float(op.attr("offset")))


@_conv("swish")
def _swish(c: _Ctx, op: Any) -> None:
    x = _x(op, "X")
    bx = c.node("Mul", [x, c.const(op.attr("beta"), c.np_dtype(x))])
    c.node("Mul", [x, c.node("Sigmoid", [bx])], [_out(op)])


@_conv("gelu")
def _gelu(c: _Ctx, op: Any) -> None:
    x = _x(op, "X")
    dt = c.np_dtype(x)
    if op.attr("approximate"):      # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        x3 = c.node("Mul", [c.node("Mul", [x, x]), x])
        inner = c.node("Add", [x, c.node("Mul", [x3, c.const(0.044715, dt)])])
        t = c.node("Tanh", [c.node("Mul", [inner, c.const(math.sqrt(2 / math.pi), dt)])])
    else:                           # 0.5 x (1 + erf(x / sqrt 2))
        t = c.node("Erf", [c.node("Div", [x, c.const(math.sqrt(2.0), dt)])])
    c.node("Mul", [c.node("Mul", [x, c.const(0.5, dt)]),
                   c.node("Add", [t, c.const(1.0, dt)])], [_out(op)])


@_conv("pow")
def _pow(c: _Ctx, op: Any) -> None:
    x = _x(op, "X")
    c.node("Pow", [x, c.const(op.attr("factor"), c.np_dtype(x))], [_out(op)])


@_conv("softmax")
def _softmax(c: _Ctx, op: Any) -> None:
    c.node("Softmax", [_x(op, "X")], [_out(op)], axis=int(op.attr("axis")))


_BINARY = {"elementwise_add": "Add", "elementwise_sub": "Sub", "elementwise_mul": "Mul",
           "elementwise_div": "Div", "elementwise_max": "Max", "elementwise_min": "Min",
           "elementwise_pow": "Pow"}


@_conv(*_BINARY)
def _binary(c: _Ctx, op: Any) -> None:
    x, y = _x(op, "X"), _x(op, "Y")
    c.node(_BINARY[op.type], [x, _fluid_broadcast(c, x, y, int(op.attr("axis")))], [_out(op)])


@_conv("mul")
def _mul(c: _Ctx, op: Any) -> None:
    x, y = _x(op, "X"), _x(op, "Y")
    k, yk = int(op.attr("x_num_col_dims")), int(op.attr("y_num_col_dims"))
    ys = c.shape(y)
    fx = c.node("Flatten", [x], axis=k) if len(c.shape(x)) != 2 or k != 1 else x
    fy = c.node("Flatten", [y], axis=yk) if len(ys) != 2 or yk != 1 else y
    if k == 1 and len(ys) - yk == 1:
        c.node("MatMul", [fx, fy], [_out(op)])
        return
    lead = c.node("Slice", [c.node("Shape", [x]), c.ints([0]), c.ints([k])])
    shape = c.node("Concat", [lead, c.ints(ys[yk:])], axis=0)
    c.node("Reshape", [c.node("MatMul", [fx, fy]), shape], [_out(op)])


def _swap_last(c: _Ctx, name: str) -> str:
    r = len(c.shape(name))
    perm = list(range(r - 2)) + [r - 1, r - 2]
    return c.node("Transpose", [name], perm=perm)


@_conv("matmul")
def _matmul(c: _Ctx, op: Any) -> None:
    x, y = _x(op, "X"), _x(op, "Y")
    if op.attr("transpose_X"):
        x = _swap_last(c, x)
    if op.attr("transpose_Y"):
        y = _swap_last(c, y)
    alpha = float(op.attr("alpha"))
    if alpha == 1.0:
        c.node("MatMul", [x, y], [_out(op)])
    else:
        m = c.node("MatMul", [x, y])
        c.node("Mul", [m, c.const(alpha, c.np_dtype(_out(op)))], [_out(op)])


def _pads(paddings: Sequence[int]) -> List[int]:
    p = [int(v) for v in paddings]
    if len(p) == 2:
        return [p[0], p[1], p[0], p[1]]
    return [p[0], p[2], p[1], p[3]]         # fluid [top, bottom, left, right]


def _conv_attrs(op: Any) -> Dict[str, Any]:
    attrs: Dict[str, Any] = dict(strides=[int(s) for s in op.attr("strides")],
                                 dilations=[int(d) for d in op.attr("dilations")],
                                 group=int(op.attr("groups") or 1))
    algo = op.attr("padding_algorithm")
    if algo == "SAME":
        attrs["auto_pad"] = "SAME_UPPER"
    elif algo == "VALID":
        attrs["pads"] = [0, 0, 0, 0]
    else:
        attrs["pads"] = _pads(op.attr("paddings"))
    return attrs


@_conv("conv2d", "depthwise_conv2d")
def _conv2d(c: _Ctx, op: Any) -> None:
    c.node("Conv", [_x(op, "Input"), _x(op, "Filter")], [_out(op, "Output")], **_conv_attrs(op))


@_conv("conv2d_transpose")
def _conv2d_t(c: _Ctx, op: Any) -> None:
    attrs = _conv_attrs(op)
    if op.attr("output_size"):
        attrs["output_shape"] = [int(s) for s in op.attr("output_size")]
    c.node("ConvTranspose", [_x(op, "Input"), _x(op, "Filter")], [_out(op, "Output")], **attrs)


@_conv("pool2d")
def _pool2d(c: _Ctx, op: Any) -> None:
    kind = op.attr("pooling_type")
    x = _x(op, "X")
    ksize = [int(k) for k in op.attr("ksize")]
    if op.attr("global_pooling") or (op.attr("adaptive") and ksize == [1, 1]):
        c.node("GlobalMaxPool" if kind == "max" else "GlobalAveragePool", [x], [_out(op)])
        return
    attrs: Dict[str, Any] = dict(kernel_shape=ksize, strides=[int(s) for s in op.attr("strides")],
                                 ceil_mode=int(bool(op.attr("ceil_mode"))))
    if op.attr("adaptive"):         # equal windows: input size a multiple of the output size
        window = _adaptive_window(op)
        attrs = dict(kernel_shape=window, strides=window, ceil_mode=0)
        c.node("MaxPool" if kind == "max" else "AveragePool", [x], [_out(op)], pads=[0] * 4,
               **attrs)
        return
    algo = op.attr("padding_algorithm")
    if algo == "SAME":
        attrs["auto_pad"] = "SAME_UPPER"
    else:
        attrs["pads"] = [0, 0, 0, 0] if algo == "VALID" else _pads(op.attr("paddings"))
    if kind == "max":
        c.node("MaxPool", [x], [_out(op)], **attrs)
    else:
        c.node("AveragePool", [x], [_out(op)],
               count_include_pad=0 if op.attr("exclusive") else 1, **attrs)


def _adaptive_window(op: Any) -> Optional[List[int]]:
    """The pooling window of an adaptive pool2d whose known input H, W are multiples of its
    output size (then every adaptive window has that size), else None."""
    x = op.block._find_var_recursive(op.input("X")[0])
    hw, out = [int(d) for d in x.shape[2:4]], [int(k) for k in op.attr("ksize")]
    if len(hw) != 2 or min(hw) <= 0 or any(h % o for h, o in zip(hw, out)):
        return None
    return [h // o for h, o in zip(hw, out)]


@_conv("batch_norm")
def _batch_norm(c: _Ctx, op: Any) -> None:
    c.node("BatchNormalization", [_x(op, "X"), _x(op, "Scale"), _x(op, "Bias"), _x(op, "Mean"),
                                  _x(op, "Variance")], [_out(op, "Y")],
           epsilon=float(op.attr("epsilon")))


@_conv("dropout")
def _dropout(c: _Ctx, op: Any) -> None:
    x = _x(op, "X")
    if op.attr("dropout_implementation") == "upscale_in_train":
        c.node("Identity", [x], [_out(op)])
    else:
        c.node("Mul", [x, c.const(1.0 - float(op.attr("dropout_prob")), c.np_dtype(x))],
               [_out(op)])


@_conv("layer_norm")
def _layer_norm(c: _Ctx, op: Any) -> None:
    x = _x(op, "X")
    begin = int(op.attr("begin_norm_axis"))
    norm_shape = c.shape(x)[begin:]
    dt = c.np_dtype(x)
    ins = [x]
    for slot, fill in (("Scale", 1.0), ("Bias", 0.0)):
        if op.input(slot):
            v = _x(op, slot)
            ins.append(c.node("Reshape", [v, c.ints(norm_shape)]) if len(norm_shape) > 1 else v)
        else:
            ins.append(c.const(np.full(norm_shape, fill, dt)))
    eps = float(op.attr("epsilon"))
    if c.opset >= 17:
        c.node("LayerNormalization", ins, [_out(op, "Y")], axis=begin, epsilon=eps)
        return
    # before opset 17: (x - mean) / sqrt(var + eps) * scale + bias over the trailing axes
    axes = list(range(begin, len(c.shape(x))))
    centred = c.node("Sub", [x, _reduce_node(c, "ReduceMean", x, axes, True, None)])
    var = _reduce_node(c, "ReduceMean", c.node("Mul", [centred, centred]), axes, True, None)
    std = c.node("Sqrt", [c.node("Add", [var, c.const(eps, dt)])])
    normed = c.node("Mul", [c.node("Div", [centred, std]), ins[1]])
    c.node("Add", [normed, ins[2]], [_out(op, "Y")])


@_conv("lookup_table", "lookup_table_v2")
def _lookup(c: _Ctx, op: Any) -> None:
    w, ids = _x(op, "W"), _x(op, "Ids")
    if op.type == "lookup_table":           # ids [..., 1] -> out [..., D]
        ids = c.node("Squeeze", [ids, c.ints([-1])])
    pad = int(op.attr("padding_idx"))
    if pad < 0 and pad != -1:
        pad += c.shape(w)[0]
    if pad == -1:
        c.node("Gather", [w, ids], [_out(op)], axis=0)
        return
    rows = c.node("Gather", [w, ids], axis=0)
    keep = c.node("Not", [c.node("Equal", [ids, c.const(pad, c.np_dtype(_x(op, "Ids")))])])
    mask = c.node("Unsqueeze", [c.node("Cast", [keep], to=_ONNX_DTYPE[c.var(w).dtype]),
                                c.ints([-1])])
    c.node("Mul", [rows, mask], [_out(op)])


@_conv("reshape2")
def _reshape(c: _Ctx, op: Any) -> None:
    # the target, as fluid's kernel picks it: the ShapeTensor list, else the Shape tensor, else
    # the attr -- 0 copies a dim and -1 is inferred in ONNX's Reshape too
    if op.input("ShapeTensor"):
        shape = _int64_list(c, op.input("ShapeTensor"))
    elif op.input("Shape"):
        shape = c.node("Cast", [op.input("Shape")[0]], to=7)
    else:
        shape = c.ints(op.attr("shape"))
    c.node("Reshape", [_x(op, "X"), shape], [_out(op)])


@_conv("transpose2")
def _transpose(c: _Ctx, op: Any) -> None:
    c.node("Transpose", [_x(op, "X")], [_out(op)], perm=[int(a) for a in op.attr("axis")])


@_conv("concat")
def _concat(c: _Ctx, op: Any) -> None:
    c.node("Concat", op.input("X"), [_out(op)], axis=int(op.attr("axis")))


@_conv("stack")
def _stack(c: _Ctx, op: Any) -> None:
    axis = int(op.attr("axis"))
    parts = [c.node("Unsqueeze", [x, c.ints([axis])]) for x in op.input("X")]
    c.node("Concat", parts, [_out(op, "Y")], axis=axis)


@_conv("split")
def _split(c: _Ctx, op: Any) -> None:
    x = _x(op, "X")
    axis = int(op.attr("axis"))
    dim = c.shape(x)[axis]
    outs = op.output("Out")
    sections = [int(s) for s in op.attr("sections")]
    if not sections:
        sections = [dim // len(outs)] * len(outs)
    if -1 in sections:
        sections[sections.index(-1)] = dim - (sum(sections) + 1)
    c.node("Split", [x, c.ints(sections)], outs, axis=axis)


@_conv("slice")
def _slice(c: _Ctx, op: Any) -> None:
    x = _x(op, "Input")
    dec = [int(a) for a in op.attr("decrease_axis")]
    out = _out(op)
    sl = c.node("Slice", [x, c.ints(op.attr("starts")), c.ints(op.attr("ends")),
                          c.ints(op.attr("axes"))], None if dec else [out])
    if dec:
        if len(dec) == len(c.shape(x)):     # fluid keeps [1] when every dim is decreased
            c.node("Reshape", [sl, c.ints([1])], [out])
        else:
            c.node("Squeeze", [sl, c.ints(dec)], [out])


@_conv("gather")
def _gather(c: _Ctx, op: Any) -> None:
    c.node("Gather", [_x(op, "X"), _x(op, "Index")], [_out(op)], axis=0)


@_conv("squeeze2")
def _squeeze(c: _Ctx, op: Any) -> None:
    axes = [int(a) for a in op.attr("axes")]
    x = _x(op, "X")
    if not axes:
        axes = [i for i, d in enumerate(c.shape(x)) if d == 1]
    c.node("Squeeze", [x, c.ints(axes)], [_out(op)])


@_conv("unsqueeze2")
def _unsqueeze(c: _Ctx, op: Any) -> None:
    c.node("Unsqueeze", [_x(op, "X"), c.ints(op.attr("axes"))], [_out(op)])


@_conv("flatten2")
def _flatten(c: _Ctx, op: Any) -> None:
    c.node("Flatten", [_x(op, "X")], [_out(op)], axis=int(op.attr("axis")))


_REDUCE = {"reduce_mean": "ReduceMean", "reduce_sum": "ReduceSum", "reduce_max": "ReduceMax",
           "reduce_min": "ReduceMin"}


@_conv(*_REDUCE)
def _reduce(c: _Ctx, op: Any) -> None:
    x, out = _x(op, "X"), _out(op)
    axes = None if op.attr("reduce_all") else [int(a) for a in op.attr("dim")]
    keep = bool(op.attr("keep_dim"))
    r = len(c.shape(x))
    full = axes is None or sorted(a % r for a in axes) == list(range(r))
    if full and not keep and c.shape(out) == (1,):
        _to_declared(c, _reduce_node(c, _REDUCE[op.type], x, axes, keep, None), out)
    else:
        _reduce_node(c, _REDUCE[op.type], x, axes, keep, [out])


@_conv("mean")
def _mean(c: _Ctx, op: Any) -> None:
    x, out = _x(op, "X"), _out(op)
    _to_declared(c, _reduce_node(c, "ReduceMean", x, None, False, None), out)


@_conv("sum")
def _sum(c: _Ctx, op: Any) -> None:
    c.node("Sum", op.input("X"), [_out(op)])


@_conv("scale")
def _scale(c: _Ctx, op: Any) -> None:
    if op.input("ScaleTensor"):
        raise OnnxExportError("scale with a ScaleTensor input")
    x = _x(op, "X")
    dt = c.np_dtype(x)
    s, b = float(op.attr("scale")), float(op.attr("bias"))
    if op.attr("bias_after_scale"):
        y = c.node("Mul", [x, c.const(s, dt)])
        c.node("Add", [y, c.const(b, dt)], [_out(op)])
    else:
        y = c.node("Add", [x, c.const(b, dt)])
        c.node("Mul", [y, c.const(s, dt)], [_out(op)])


@_conv("cast")
def _cast(c: _Ctx, op: Any) -> None:
    c.node("Cast", [_x(op, "X")], [_out(op)], to=_ONNX_DTYPE[VarType(int(op.attr("out_dtype")))])


@_conv("clip")
def _clip(c: _Ctx, op: Any) -> None:
    x = _x(op, "X")
    dt = c.np_dtype(x)
    c.node("Clip", [x, c.const(op.attr("min"), dt), c.const(op.attr("max"), dt)], [_out(op)])


@_conv("fill_constant")
def _fill_constant(c: _Ctx, op: Any) -> None:
    if op.input("ShapeTensor") or op.input("ShapeTensorList") or op.input("ValueTensor"):
        raise OnnxExportError("fill_constant with a shape or value tensor")
    arr = np.full([int(s) for s in op.attr("shape")], op.attr("value"),
                  to_numpy_dtype(op.attr("dtype")))
    c.node("Identity", [c.const(arr)], [_out(op)])


@_conv("arg_max", "arg_min")
def _argmax(c: _Ctx, op: Any) -> None:
    if op.attr("flatten"):
        raise OnnxExportError("arg_max/arg_min with flatten=True")
    c.node("ArgMax" if op.type == "arg_max" else "ArgMin", [_x(op, "X")], [_out(op)],
           axis=int(op.attr("axis")), keepdims=int(bool(op.attr("keepdims"))))


@_conv("top_k")
def _top_k(c: _Ctx, op: Any) -> None:
    if op.input("K"):
        raise OnnxExportError("top_k with a K tensor")
    c.node("TopK", [_x(op, "X"), c.ints([op.attr("k")])],
           [_out(op), _out(op, "Indices")], axis=-1)


@_conv("shape")
def _shape(c: _Ctx, op: Any) -> None:
    c.node("Cast", [c.node("Shape", [_x(op, "Input")])], [_out(op)], to=6)
