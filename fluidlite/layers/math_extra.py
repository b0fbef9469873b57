"""fluid 1.8 activation and math layers beyond the basic set: acos/asin/atan, erf, log1p, the
shrink family, brelu, selu, stanh, hard_swish, soft_relu, thresholded_relu, prelu, maxout,
cumsum, logsumexp, log_softmax, the reductions reduce_prod/all/any, isfinite/has_inf/has_nan,
sum, rank, size, clamp, kron, dot, bmm, cross, trace, addmm, addcmul, t, allclose, dist,
elementwise_equal (fluid 1.8 signatures; each layer appends the op of the same name unless its
docstring says otherwise)."""
from __future__ import annotations

from typing import Any, List, Optional, Sequence, Union

import numpy as np

from ..core.ir import Variable
from ..pipeline.feeder import check_type, check_variable_and_dtype
from ..initializer import Constant
from ..layer_helper import LayerHelper, check_int, is_number
from .layer_function_generator import generate_activation_fn

__all__ = ["acos", "asin", "atan", "tanh_shrink", "erf", "log1p", "hard_shrink", "softshrink",
           "thresholded_relu", "brelu", "soft_relu", "selu", "stanh", "hard_swish", "maxout",
           "prelu", "cumsum", "logsumexp", "log_softmax", "reduce_prod", "reduce_all",
           "reduce_any", "isfinite", "has_inf", "has_nan", "sum", "rank", "size", "clamp",
           "kron", "dot", "bmm", "cross", "trace", "addmm", "addcmul", "t", "allclose", "dist",
           "elementwise_equal"]

_FLOATS = ["float16", "float32", "float64"]
_NUMS = _FLOATS + ["int32", "int64"]


def _float(layer: str, arg: str, value: Any) -> float:
    if not is_number(value):
        raise TypeError(f"{layer}: '{arg}' must be a float (a Python or numpy number), but "
                        f"received {value!r} of type {type(value).__name__}")
    return float(value)


def _act(op_type: str, x: Variable, name: Optional[str] = None, **attrs: Any) -> Variable:
    """Append the unary op ``op_type`` on float ``x`` (attrs given as None keep the op's
    defaults, as fluid 1.8's generated layers)."""
    check_variable_and_dtype(x, "x", _FLOATS, op_type)
    attrs = {k: v for k, v in attrs.items() if v is not None}
    return generate_activation_fn(op_type)(x, name=name, **attrs)


def _out(helper: LayerHelper, dtype: Any, out: Optional[Variable] = None,
         name: Optional[str] = None) -> Variable:
    """``out`` when the caller passed one (fluid 1.8's ``out=`` parameters), else a new
    temporary (named ``name`` when given)."""
    if out is not None:
        check_type(out, "out", Variable, helper.layer_type)
        return out
    if name is None:
        return helper.create_variable_for_type_inference(dtype=dtype)
    return helper.create_variable(name=name, dtype=dtype, persistable=False)


# -- unary activations --------------------------------------------------------------------------
def acos(x: Variable, name: Optional[str] = None) -> Variable:
    """arccos(x) elementwise (op ``acos``)."""
    return _act("acos", x, name)


def asin(x: Variable, name: Optional[str] = None) -> Variable:
    """arcsin(x) elementwise (op ``asin``)."""
    return _act("asin", x, name)


def atan(x: Variable, name: Optional[str] = None) -> Variable:
    """arctan(x) elementwise (op ``atan``)."""
    return _act("atan", x, name)


def tanh_shrink(x: Variable, name: Optional[str] = None) -> Variable:
    """x - tanh(x) (op ``tanh_shrink``)."""
    return _act("tanh_shrink", x, name)


def erf(x: Variable, name: Optional[str] = None) -> Variable:
    """The error function erf(x) = 2/sqrt(pi) * integral_0^x exp(-t^2) dt (op ``erf``)."""
    return _act("erf", x, name)


def log1p(x: Variable, out: Optional[Variable] = None, name: Optional[str] = None) -> Variable:
    """ln(1 + x), accurate for small x (op ``log1p``); written into ``out`` when given."""
    check_variable_and_dtype(x, "x", ["float32", "float64"], "log1p")
    helper = LayerHelper("log1p", name=name)
    res = _out(helper, x.dtype, out)
    helper.append_op(type="log1p", inputs={"X": x}, outputs={"Out": res})
    return res


def hard_shrink(x: Variable, threshold: Optional[float] = None) -> Variable:
    """x where |x| > threshold, else 0 (op ``hard_shrink``; threshold defaults to 0.5)."""
    if threshold is not None:
        threshold = _float("hard_shrink", "threshold", threshold)
    return _act("hard_shrink", x, threshold=threshold)


def softshrink(x: Variable, alpha: Optional[float] = None) -> Variable:
    """x - alpha (x > alpha), x + alpha (x < -alpha), else 0 (op ``softshrink``, attr
    ``lambda`` = alpha, default 0.5)."""
    return _act("softshrink", x, **{"lambda": alpha})


def thresholded_relu(x: Variable, threshold: Optional[float] = None) -> Variable:
    """x where x > threshold, else 0 (op ``thresholded_relu``; threshold defaults to 1.0)."""
    if threshold is not None:
        threshold = _float("thresholded_relu", "threshold", threshold)
    return _act("thresholded_relu", x, threshold=threshold)


def brelu(x: Variable, t_min: float = 0.0, t_max: float = 24.0,
          name: Optional[str] = None) -> Variable:
    """min(max(x, t_min), t_max) (op ``brelu``)."""
    return _act("brelu", x, name, t_min=_float("brelu", "t_min", t_min),
                t_max=_float("brelu", "t_max", t_max))


def soft_relu(x: Variable, threshold: float = 40.0, name: Optional[str] = None) -> Variable:
    """ln(1 + exp(clip(x, -threshold, threshold))) (op ``soft_relu``)."""
    return _act("soft_relu", x, name, threshold=_float("soft_relu", "threshold", threshold))


def selu(x: Variable, scale: Optional[float] = None, alpha: Optional[float] = None,
         name: Optional[str] = None) -> Variable:
    """scale * (x if x > 0 else alpha * (exp(x) - 1)) (op ``selu``; the defaults are the
    self-normalizing constants 1.0507... and 1.6732...)."""
    if scale is not None:
        scale = _float("selu", "scale", scale)
        if scale <= 1.0:
            raise ValueError(f"selu: scale must be greater than 1.0, but received {scale}")
    if alpha is not None:
        alpha = _float("selu", "alpha", alpha)
        if alpha < 0:
            raise ValueError(f"selu: alpha must be no less than zero, but received {alpha}")
    return _act("selu", x, name, scale=scale, alpha=alpha)


def stanh(x: Variable, scale_a: float = 0.67, scale_b: float = 1.7159,
          name: Optional[str] = None) -> Variable:
    """scale_b * tanh(scale_a * x) (op ``stanh``)."""
    return _act("stanh", x, name, scale_a=_float("stanh", "scale_a", scale_a),
                scale_b=_float("stanh", "scale_b", scale_b))


def hard_swish(x: Variable, threshold: float = 6.0, scale: float = 6.0, offset: float = 3.0,
               name: Optional[str] = None) -> Variable:
    """x * min(max(x + offset, 0), threshold) / scale (op ``hard_swish``)."""
    return _act("hard_swish", x, name, threshold=_float("hard_swish", "threshold", threshold),
                scale=_float("hard_swish", "scale", scale),
                offset=_float("hard_swish", "offset", offset))


def maxout(x: Variable, groups: int, name: Optional[str] = None, axis: int = 1) -> Variable:
    """Max over groups of ``groups`` consecutive channels (channels on ``axis``: 1 for NCHW,
    -1 or 3 for NHWC); the channel count shrinks by ``groups`` (op ``maxout``)."""
    check_variable_and_dtype(x, "x", ["float32", "float64"], "maxout")
    groups = check_int(groups, "groups", "maxout", minimum=1)
    axis = check_int(axis, "axis", "maxout")
    if axis not in (1, -1, 3):
        raise ValueError(f"maxout: axis must be 1 when the data format is NCHW, -1 or 3 when it "
                         f"is NHWC, but received {axis}")
    if axis == -1:
        axis = 3
    helper = LayerHelper("maxout", name=name)
    out = helper.create_variable_for_type_inference(dtype=x.dtype)
    helper.append_op(type="maxout", inputs={"X": x}, outputs={"Out": out},
                     attrs={"groups": groups, "axis": axis})
    return out


def prelu(x: Variable, mode: str, param_attr: Any = None, name: Optional[str] = None
          ) -> Variable:
    """x if x > 0 else alpha * x with a learnable alpha (initialised to 0.25): one for the
    whole tensor (``mode='all'``), one per channel of dim 1 (``'channel'``, shape [1, C, 1, 1]
    for NCHW input) or one per element of a sample (``'element'``, shape [1] + x.shape[1:])
    (op ``prelu``)."""
    check_variable_and_dtype(x, "x", _FLOATS, "prelu")
    if mode not in ("all", "channel", "element"):
        raise ValueError(f"prelu: mode must be one of 'all', 'channel', 'element', but "
                         f"received {mode!r}")
    helper = LayerHelper("prelu", param_attr=param_attr, name=name)
    shape = list(x.shape)
    if mode == "all":
        alpha_shape = [1]
    elif mode == "channel":
        if len(shape) < 2 or shape[1] <= 0:
            raise ValueError(f"prelu: mode 'channel' needs a known channel dim 1, but x has "
                             f"shape {shape}")
        alpha_shape = [1, shape[1]] + [1] * (len(shape) - 2)
    else:
        if len(shape) < 2 or any(d <= 0 for d in shape[1:]):
            raise ValueError(f"prelu: mode 'element' needs known dims after the batch dim, but "
                             f"x has shape {shape}")
        alpha_shape = [1] + shape[1:]
    alpha = helper.create_parameter(attr=helper.param_attr, shape=alpha_shape, dtype=x.dtype,
                                    is_bias=False, default_initializer=Constant(0.25))
    out = helper.create_variable_for_type_inference(dtype=x.dtype)
    helper.append_op(type="prelu", inputs={"X": x, "Alpha": alpha}, outputs={"Out": out},
                     attrs={"mode": mode})
    return out



# -- cumulative and log-domain ------------------------------------------------------------------
def cumsum(x: Variable, axis: Optional[int] = None, exclusive: Optional[bool] = None,
           reverse: Optional[bool] = None) -> Variable:
    """Cumulative sum along ``axis`` (default -1, the last); ``exclusive``: each entry sums
    only the entries before it; ``reverse``: from the end (op ``cumsum``)."""
    check_variable_and_dtype(x, "x", _NUMS, "cumsum")
    attrs: dict = {}
    if axis is not None:
        attrs["axis"] = check_int(axis, "axis", "cumsum")
    for key, value in (("exclusive", exclusive), ("reverse", reverse)):
        if value is not None:
            check_type(value, key, bool, "cumsum")
            attrs[key] = value
    helper = LayerHelper("cumsum")
    out = helper.create_variable_for_type_inference(dtype=x.dtype)
    helper.append_op(type="cumsum", inputs={"X": x}, outputs={"Out": out}, attrs=attrs)
    return out


def _dims(layer: str, dim: Any) -> Optional[List[int]]:
    """fluid's ``dim`` argument: None, an int or a list/tuple of ints -> None or a list."""
    if dim is None:
        return None
    if isinstance(dim, (list, tuple)):
        return [check_int(d, f"dim[{i}]", layer) for i, d in enumerate(dim)]
    return [check_int(dim, "dim", layer)]


def logsumexp(x: Variable, dim: Any = None, keepdim: bool = False,
              out: Optional[Variable] = None, name: Optional[str] = None) -> Variable:
    """log(sum(exp(x))) over ``dim`` (None: every dim, shape [1]), computed without overflow
    (op ``logsumexp``)."""
    check_variable_and_dtype(x, "x", ["float32", "float64"], "logsumexp")
    check_type(keepdim, "keepdim", bool, "logsumexp")
    dims = _dims("logsumexp", dim)
    reduce_all = not dims or len(dims) == len(x.shape)
    helper = LayerHelper("logsumexp", name=name)
    res = _out(helper, x.dtype, out)
    helper.append_op(type="logsumexp", inputs={"X": x}, outputs={"Out": res},
                     attrs={"axis": dims or [0], "keepdim": keepdim, "reduce_all": reduce_all})
    return res


def log_softmax(input: Variable, axis: Optional[int] = None, dtype: Any = None,
                name: Optional[str] = None) -> Variable:
    """log(softmax(input)) along ``axis`` (default -1), computed stably (op ``log_softmax``);
    ``dtype``: cast the input to it first."""
    check_variable_and_dtype(input, "input", ["float32", "float64"], "log_softmax")
    if dtype is not None:
        from .ops import cast
        input = cast(input, dtype)
    axis = -1 if axis is None else check_int(axis, "axis", "log_softmax")
    helper = LayerHelper("log_softmax", name=name)
    out = helper.create_variable_for_type_inference(dtype=input.dtype)
    helper.append_op(type="log_softmax", inputs={"X": input}, outputs={"Out": out},
                     attrs={"axis": axis})
    return out


# -- reductions ---------------------------------------------------------------------------------
def _reduce(op_type: str, input: Variable, dim: Any, keep_dim: bool, name: Optional[str],
            dtypes: Sequence[str]) -> Variable:
    check_variable_and_dtype(input, "input", dtypes, op_type)
    check_type(keep_dim, "keep_dim", bool, op_type)
    dims = _dims(op_type, dim)
    reduce_all = not dims or len(dims) == len(input.shape)
    helper = LayerHelper(op_type, name=name)
    out = helper.create_variable_for_type_inference(dtype=input.dtype)
    helper.append_op(type=op_type, inputs={"X": input}, outputs={"Out": out},
                     attrs={"dim": dims or [0], "keep_dim": keep_dim, "reduce_all": reduce_all})
    return out


def reduce_prod(input: Variable, dim: Any = None, keep_dim: bool = False,
                name: Optional[str] = None) -> Variable:
    """Product over ``dim`` (int or list; None = every dim, giving shape [1])."""
    return _reduce("reduce_prod", input, dim, keep_dim, name, _NUMS)


def reduce_all(input: Variable, dim: Any = None, keep_dim: bool = False,
               name: Optional[str] = None) -> Variable:
    """Logical AND of a bool tensor over ``dim`` (None = every dim, giving shape [1])."""
    return _reduce("reduce_all", input, dim, keep_dim, name, ["bool"])


def reduce_any(input: Variable, dim: Any = None, keep_dim: bool = False,
               name: Optional[str] = None) -> Variable:
    """Logical OR of a bool tensor over ``dim`` (None = every dim, giving shape [1])."""
    return _reduce("reduce_any", input, dim, keep_dim, name, ["bool"])


def _check_whole(op_type: str, layer: str, x: Variable) -> Variable:
    check_variable_and_dtype(x, "x", _NUMS, layer)
    helper = LayerHelper(op_type)
    out = helper.create_variable_for_type_inference(dtype="bool", stop_gradient=True)
    helper.append_op(type=op_type, inputs={"X": x}, outputs={"Out": out})
    return out


def isfinite(x: Variable) -> Variable:
    """[True] when every entry of ``x`` is finite, else [False] (bool, shape [1]; op
    ``isfinite``)."""
    return _check_whole("isfinite", "isfinite", x)


def has_inf(x: Variable) -> Variable:
    """[True] when any entry of ``x`` is +-inf (bool, shape [1]; op ``isinf``)."""
    return _check_whole("isinf", "has_inf", x)


def has_nan(x: Variable) -> Variable:
    """[True] when any entry of ``x`` is nan (bool, shape [1]; op ``isnan``)."""
    return _check_whole("isnan", "has_nan", x)


def sum(x: Union[Variable, Sequence[Variable]]) -> Variable:
    """Elementwise sum of a Variable or a list of same-shaped Variables (op ``sum``; the same
    as ``sums`` without ``out``)."""
    check_type(x, "x", (Variable, list, tuple), "sum")
    xs = list(x) if isinstance(x, (list, tuple)) else [x]
    if not xs:
        raise ValueError("sum: x must be a Variable or a non-empty list of Variables, but "
                         "received an empty list")
    for i, v in enumerate(xs):
        check_variable_and_dtype(v, f"x[{i}]", _NUMS, "sum")
    helper = LayerHelper("sum")
    out = helper.create_variable_for_type_inference(dtype=xs[0].dtype)
    helper.append_op(type="sum", inputs={"X": xs}, outputs={"Out": out},
                     attrs={"use_mkldnn": False})
    return out


def rank(input: Variable) -> Variable:
    """The number of dims of ``input`` as an int32 tensor of shape [1] (a constant: fluid
    knows the rank when building)."""
    check_type(input, "input", Variable, "rank")
    from .tensor import assign
    return assign(np.array([len(input.shape)], dtype="int32"))


def size(input: Variable) -> Variable:
    """The number of elements of ``input`` as an int64 tensor of shape [1], computed when the
    program runs (op ``size``)."""
    check_type(input, "input", Variable, "size")
    helper = LayerHelper("size")
    out = helper.create_variable_for_type_inference(dtype="int64", stop_gradient=True)
    helper.append_op(type="size", inputs={"Input": input}, outputs={"Out": out})
    return out


def clamp(input: Variable, min: Optional[float] = None, max: Optional[float] = None,
          output: Optional[Variable] = None, name: Optional[str] = None) -> Variable:
    """min(max(input, min), max); a bound given as None is open (op ``clip`` with the float32
    limits, as fluid 1.8)."""
    check_variable_and_dtype(input, "input", _FLOATS, "clamp")
    if min is None and max is None:
        raise ValueError("clamp: at least one of min and max must be given")
    lo = float(np.finfo(np.float32).min) if min is None else _float("clamp", "min", min)
    hi = float(np.finfo(np.float32).max) if max is None else _float("clamp", "max", max)
    if lo > hi:
        raise ValueError(f"clamp: min ({lo}) must not be greater than max ({hi})")
    helper = LayerHelper("clamp", name=name)
    out = _out(helper, input.dtype, output)
    helper.append_op(type="clip", inputs={"X": input}, outputs={"Out": out},
                     attrs={"min": lo, "max": hi})
    return out


# -- products -----------------------------------------------------------------------------------
def _binary(op_type: str, x: Variable, y: Variable, name: Optional[str] = None,
            out: Optional[Variable] = None, dtypes: Sequence[str] = tuple(_FLOATS),
            names: Sequence[str] = ("x", "y"), slots: Sequence[str] = ("X", "Y"),
            **attrs: Any) -> Variable:
    check_variable_and_dtype(x, names[0], list(dtypes), op_type)
    check_variable_and_dtype(y, names[1], list(dtypes), op_type)
    helper = LayerHelper(op_type, name=name)
    res = _out(helper, x.dtype, out)
    helper.append_op(type=op_type, inputs={slots[0]: x, slots[1]: y}, outputs={"Out": res},
                     attrs=attrs)
    return res


def kron(x: Variable, y: Variable, out: Optional[Variable] = None,
         name: Optional[str] = None) -> Variable:
    """The Kronecker product of ``x`` and ``y`` (op ``kron``)."""
    return _binary("kron", x, y, name, out, dtypes=_NUMS)


def dot(x: Variable, y: Variable, name: Optional[str] = None) -> Variable:
    """Inner product along the last dim of 1-D or 2-D ``x``, ``y`` (shape [1] or [N, 1];
    op ``dot``)."""
    return _binary("dot", x, y, name, dtypes=_NUMS)


def bmm(x: Variable, y: Variable, name: Optional[str] = None) -> Variable:
    """Batched matrix product of [B, M, K] and [B, K, N] (op ``bmm``)."""
    return _binary("bmm", x, y, name)


def cross(input: Variable, other: Variable, dim: Optional[int] = None) -> Variable:
    """The cross product of 3-vectors along ``dim`` (default: the first dim of size 3; op
    ``cross``)."""
    attrs = {} if dim is None else {"dim": check_int(dim, "dim", "cross")}
    return _binary("cross", input, other, dtypes=_NUMS, names=("input", "other"), **attrs)


def trace(input: Variable, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Variable:
    """Sum of the ``offset`` diagonal of the (dim1, dim2) planes (op ``trace``)."""
    check_variable_and_dtype(input, "input", _NUMS, "trace")
    attrs = {"offset": check_int(offset, "offset", "trace"),
             "dim1": check_int(dim1, "dim1", "trace"), "dim2": check_int(dim2, "dim2", "trace")}
    helper = LayerHelper("trace")
    out = helper.create_variable_for_type_inference(dtype=input.dtype)
    helper.append_op(type="trace", inputs={"Input": input}, outputs={"Out": out}, attrs=attrs)
    return out


def addmm(input: Variable, x: Variable, y: Variable, alpha: float = 1.0, beta: float = 1.0,
          name: Optional[str] = None) -> Variable:
    """beta * input + alpha * (x @ y), ``input`` broadcast to [M, N] (op ``addmm``)."""
    for arg, v in (("input", input), ("x", x), ("y", y)):
        check_variable_and_dtype(v, arg, ["float32", "float64"], "addmm")
    helper = LayerHelper("addmm", name=name)
    out = helper.create_variable_for_type_inference(dtype=x.dtype)
    helper.append_op(type="addmm", inputs={"Input": input, "X": x, "Y": y},
                     outputs={"Out": out},
                     attrs={"Alpha": _float("addmm", "alpha", alpha),
                            "Beta": _float("addmm", "beta", beta)})
    return out


def addcmul(input: Variable, tensor1: Variable, tensor2: Variable, value: float = 1.0,
            out: Optional[Variable] = None, name: Optional[str] = None) -> Variable:
    """input + value * tensor1 * tensor2 elementwise (ops ``elementwise_mul``, ``scale``,
    ``elementwise_add``, as fluid 1.8)."""
    for arg, v in (("input", input), ("tensor1", tensor1), ("tensor2", tensor2)):
        check_variable_and_dtype(v, arg, ["float32", "float64", "int32", "int64"], "addcmul")
    if not is_number(value):
        raise TypeError(f"addcmul: 'value' must be a number (float for float inputs), but "
                        f"received {value!r} of type {type(value).__name__}")
    from .ops import elementwise_add, elementwise_mul, scale
    prod = scale(elementwise_mul(tensor1, tensor2), scale=float(value))
    if out is None:
        return elementwise_add(input, prod, name=name)
    check_type(out, "out", Variable, "addcmul")
    helper = LayerHelper("addcmul")
    helper.append_op(type="elementwise_add", inputs={"X": input, "Y": prod},
                     outputs={"Out": out}, attrs={"axis": -1})
    return out


def t(input: Variable, name: Optional[str] = None) -> Variable:
    """The transpose of a matrix (op ``transpose2``); a 1-D tensor is returned itself, as
    fluid 1.8 does. Higher ranks: use ``transpose`` with a permutation."""
    check_variable_and_dtype(input, "input", _NUMS, "t")
    if len(input.shape) > 2:
        raise ValueError(f"t: Input(input) only supports N-D (N <= 2) tensors, but received a "
                         f"tensor of rank {len(input.shape)}; use fluid.layers.transpose with "
                         f"perm for higher ranks")
    if len(input.shape) < 2:
        return input
    from .tensor import transpose
    return transpose(input, perm=[1, 0], name=name)


def allclose(input: Variable, other: Variable, rtol: float = 1e-05, atol: float = 1e-08,
             equal_nan: bool = False, name: Optional[str] = None) -> Variable:
    """[True] when |input - other| <= atol + rtol * |other| everywhere (bool, shape [1];
    ``equal_nan``: nan equals nan; op ``allclose``)."""
    check_variable_and_dtype(input, "input", ["float32", "float64"], "allclose")
    check_variable_and_dtype(other, "other", ["float32", "float64"], "allclose")
    check_type(equal_nan, "equal_nan", bool, "allclose")
    helper = LayerHelper("allclose", name=name)
    out = helper.create_variable_for_type_inference(dtype="bool", stop_gradient=True)
    helper.append_op(type="allclose", inputs={"Input": input, "Other": other},
                     outputs={"Out": out},
                     attrs={"rtol": _float("allclose", "rtol", rtol),
                            "atol": _float("allclose", "atol", atol), "equal_nan": equal_nan})
    return out


def dist(x: Variable, y: Variable, p: float = 2) -> Variable:
    """The p-norm of x - y (broadcast) as shape [1] (op ``dist``; p = 0 counts nonzeros,
    p = inf / -inf take the max / min magnitude)."""
    return _binary("dist", x, y, p=_float("dist", "p", p))


def elementwise_equal(x: Variable, y: Variable, name: Optional[str] = None) -> Variable:
    """x == y elementwise as a bool tensor (op ``equal``)."""
    check_variable_and_dtype(x, "x", _NUMS + ["bool"], "elementwise_equal")
    check_variable_and_dtype(y, "y", _NUMS + ["bool"], "elementwise_equal")
    helper = LayerHelper("elementwise_equal", name=name)
    out = helper.create_variable_for_type_inference(dtype="bool", stop_gradient=True)
    helper.append_op(type="equal", inputs={"X": x, "Y": y}, outputs={"Out": out})
    return out
