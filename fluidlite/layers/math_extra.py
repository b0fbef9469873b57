"""fluid 1.8 activation and math layers beyond the basic set: acos/asin/atan, erf, log1p, the
shrink family, brelu, selu, stanh, hard_swish, soft_relu, thresholded_relu, prelu, maxout,
cumsum, logsumexp, log_softmax, the reductions reduce_prod/all/any, isfinite/has_inf/has_nan,
sum, rank, size, clamp, kron, dot, bmm, cross, trace, addmm, addcmul, t, allclose, dist,
elementwise_equal (fluid 1.8 signatures; each layer appends the op of the same name unless its
docstring says otherwise)."""
from __future__ import annotations

from typing import Any, List, Optional, Sequence, Union

import numpy as np

from ..core import mode as _mode
from ..core.ir import Variable
from ..pipeline.feeder import check_type, check_variable_and_dtype
from ..initializer import Constant
from ..layer_helper import LayerHelper, check_int, is_number
from .layer_function_generator import generate_activation_fn

__all__ = ["acos", "asin", "atan", "tanh_shrink", "erf", "log1p", "hard_shrink", "softshrink",
           "thresholded_relu", "brelu", "soft_relu", "selu", "stanh", "hard_swish", "mish", "maxout",
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
    """arccos(x) elementwise (op ``acos``).

    Args:
        x (Variable): the input.
        name (str | None): name prefix of the output.
    Returns:
        Variable: same shape and dtype as ``x``.
    Raises:
        TypeError: ``x`` is not a float16/float32/float64 Variable.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 3], "float32")
        ...     out = fluid.layers.acos(x)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.array([[0.1, 0.5, 0.9]], "float32")}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res.round(4)
        array([[1.4706, 1.0472, 0.451 ]], dtype=float32)
    """
    return _act("acos", x, name)


def asin(x: Variable, name: Optional[str] = None) -> Variable:
    """arcsin(x) elementwise (op ``asin``).

    Args:
        x (Variable): the input.
        name (str | None): name prefix of the output.
    Returns:
        Variable: same shape and dtype as ``x``.
    Raises:
        TypeError: ``x`` is not a float16/float32/float64 Variable.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 3], "float32")
        ...     out = fluid.layers.asin(x)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.array([[0.1, 0.5, 0.9]], "float32")}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res.round(4)
        array([[0.1002, 0.5236, 1.1198]], dtype=float32)
    """
    return _act("asin", x, name)


def atan(x: Variable, name: Optional[str] = None) -> Variable:
    """arctan(x) elementwise (op ``atan``).

    Args:
        x (Variable): the input.
        name (str | None): name prefix of the output.
    Returns:
        Variable: same shape and dtype as ``x``.
    Raises:
        TypeError: ``x`` is not a float16/float32/float64 Variable.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 3], "float32")
        ...     out = fluid.layers.atan(x)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.array([[0.1, 0.5, 0.9]], "float32")}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res.round(4)
        array([[0.0997, 0.4636, 0.7328]], dtype=float32)
    """
    return _act("atan", x, name)


def tanh_shrink(x: Variable, name: Optional[str] = None) -> Variable:
    """x - tanh(x) (op ``tanh_shrink``).

    Args:
        x (Variable): a float16/float32/float64 tensor of any shape.
        name (str, optional): a name prefix for the output. Default None.

    Returns:
        Variable: ``x - tanh(x)``, ``x``'s shape and dtype.

    Raises:
        TypeError: ``x`` is not a float Variable.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 3], "float32")
        ...     out = fluid.layers.tanh_shrink(x)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.array([[-2.0, 0.0, 3.0]], "float32")}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res.round(4)
        array([[-1.036 ,  0.    ,  2.0049]], dtype=float32)
    """
    return _act("tanh_shrink", x, name)


def erf(x: Variable, name: Optional[str] = None) -> Variable:
    """The error function erf(x) = 2/sqrt(pi) * integral_0^x exp(-t^2) dt (op ``erf``).

    Args:
        x (Variable): the input.
        name (str | None): name prefix of the output.
    Returns:
        Variable: same shape and dtype as ``x``.
    Raises:
        TypeError: ``x`` is not a float16/float32/float64 Variable.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 3], "float32")
        ...     out = fluid.layers.erf(x)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.array([[0.1, 0.5, 0.9]], "float32")}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res.round(4)
        array([[0.1125, 0.5205, 0.7969]], dtype=float32)
    """
    return _act("erf", x, name)


def log1p(x: Variable, out: Optional[Variable] = None, name: Optional[str] = None) -> Variable:
    """ln(1 + x), accurate for small x (op ``log1p``); written into ``out`` when given.

    Args:
        x (Variable): the input.
        out (Variable | None): an existing variable to write.
        name (str | None): name prefix of the output.
    Returns:
        Variable: same shape and dtype as ``x``.
    Raises:
        TypeError: ``x`` is not a float32/float64 Variable, or ``out`` is not a Variable.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 3], "float32")
        ...     out = fluid.layers.log1p(x)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.array([[0.1, 0.5, 0.9]], "float32")}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res.round(4)
        array([[0.0953, 0.4055, 0.6419]], dtype=float32)
    """
    check_variable_and_dtype(x, "x", ["float32", "float64"], "log1p")
    helper = LayerHelper("log1p", name=name)
    res = _out(helper, x.dtype, out)
    helper.append_op(type="log1p", inputs={"X": x}, outputs={"Out": res})
    return res


def hard_shrink(x: Variable, threshold: Optional[float] = None) -> Variable:
    """x where |x| > threshold, else 0 (op ``hard_shrink``; threshold defaults to 0.5).

    Args:
        x (Variable): the input.
        threshold (float | None): entries with ``|x|`` at most this become 0
            (default 0.5).
    Returns:
        Variable: same shape and dtype as ``x``.
    Raises:
        TypeError: ``x`` is not a float16/float32/float64 Variable, or ``threshold`` is not a
            number.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 3], "float32")
        ...     out = fluid.layers.hard_shrink(x, threshold=1.0)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.array([[-2.0, 0.0, 3.0]], "float32")}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res.round(4)
        array([[-2.,  0.,  3.]], dtype=float32)
    """
    if threshold is not None:
        threshold = _float("hard_shrink", "threshold", threshold)
    return _act("hard_shrink", x, threshold=threshold)


def softshrink(x: Variable, alpha: Optional[float] = None) -> Variable:
    """x - alpha (x > alpha), x + alpha (x < -alpha), else 0 (op ``softshrink``, attr
    ``lambda`` = alpha, default 0.5).

    Args:
        x (Variable): the input.
        alpha (float | None): the shrink amount (default 0.5).
    Returns:
        Variable: same shape and dtype as ``x``.
    Raises:
        TypeError: ``x`` is not a float16/float32/float64 Variable, or ``alpha`` is not a number.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 3], "float32")
        ...     out = fluid.layers.softshrink(x)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.array([[-2.0, 0.0, 3.0]], "float32")}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res.round(4)
        array([[-1.5,  0. ,  2.5]], dtype=float32)
    """
    return _act("softshrink", x, **{"lambda": alpha})


def thresholded_relu(x: Variable, threshold: Optional[float] = None) -> Variable:
    """x where x > threshold, else 0 (op ``thresholded_relu``; threshold defaults to 1.0).

    Args:
        x (Variable): a float16/float32/float64 tensor of any shape.
        threshold (float, optional): the threshold. Default None (1.0).

    Returns:
        Variable: ``x`` where ``x > threshold``, else 0; ``x``'s shape and dtype.

    Raises:
        TypeError: ``x`` is not a float Variable, or ``threshold`` is not a number.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 3], "float32")
        ...     out = fluid.layers.thresholded_relu(x, threshold=1.0)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.array([[-2.0, 0.0, 3.0]], "float32")}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res.round(4) + 0.0
        array([[0., 0., 3.]], dtype=float32)
    """
    if threshold is not None:
        threshold = _float("thresholded_relu", "threshold", threshold)
    return _act("thresholded_relu", x, threshold=threshold)


def brelu(x: Variable, t_min: float = 0.0, t_max: float = 24.0,
          name: Optional[str] = None) -> Variable:
    """min(max(x, t_min), t_max) (op ``brelu``).

    Args:
        x (Variable): the input.
        t_min (float, default 0.0): the lower bound.
        t_max (float, default 24.0): the upper bound.
        name (str | None): name prefix of the output.
    Returns:
        Variable: same shape and dtype as ``x``.
    Raises:
        TypeError: ``x`` is not a float16/float32/float64 Variable, or ``t_min`` or ``t_max`` is not
            a number.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 3], "float32")
        ...     out = fluid.layers.brelu(x)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.array([[-2.0, 0.0, 3.0]], "float32")}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res.round(4)
        array([[0., 0., 3.]], dtype=float32)
    """
    return _act("brelu", x, name, t_min=_float("brelu", "t_min", t_min),
                t_max=_float("brelu", "t_max", t_max))


def soft_relu(x: Variable, threshold: float = 40.0, name: Optional[str] = None) -> Variable:
    """ln(1 + exp(clip(x, -threshold, threshold))) (op ``soft_relu``).

    Args:
        x (Variable): the input.
        threshold (float, default 40.0): ``x`` is clipped to
            ``[-threshold, threshold]`` first.
        name (str | None): name prefix of the output.
    Returns:
        Variable: same shape and dtype as ``x``.
    Raises:
        TypeError: ``x`` is not a float16/float32/float64 Variable, or ``threshold`` is not a
            number.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 3], "float32")
        ...     out = fluid.layers.soft_relu(x)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.array([[-2.0, 0.0, 3.0]], "float32")}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res.round(4)
        array([[0.1269, 0.6931, 3.0486]], dtype=float32)
    """
    return _act("soft_relu", x, name, threshold=_float("soft_relu", "threshold", threshold))


def selu(x: Variable, scale: Optional[float] = None, alpha: Optional[float] = None,
         name: Optional[str] = None) -> Variable:
    """scale * (x if x > 0 else alpha * (exp(x) - 1)) (op ``selu``; the defaults are the
    self-normalizing constants 1.0507... and 1.6732...).

    Args:
        x (Variable): the input.
        scale (float | None): the output scale (default 1.0507...).
        alpha (float | None): the negative saturation (default 1.6733...).
        name (str | None): name prefix of the output.
    Returns:
        Variable: same shape and dtype as ``x``.
    Raises:
        TypeError: ``x`` is not a float16/float32/float64 Variable, or ``scale``/``alpha`` is not a
            number.
        ValueError: ``scale <= 1.0`` or ``alpha < 0``.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 3], "float32")
        ...     out = fluid.layers.selu(x)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.array([[-2.0, 0.0, 3.0]], "float32")}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res.round(4)
        array([[-1.5202,  0.    ,  3.1521]], dtype=float32)
    """
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
    """scale_b * tanh(scale_a * x) (op ``stanh``).

    Args:
        x (Variable): the input.
        scale_a (float, default 0.67): the input scale.
        scale_b (float, default 1.7159): the output scale.
        name (str | None): name prefix of the output.
    Returns:
        Variable: same shape and dtype as ``x``.
    Raises:
        TypeError: ``x`` is not a float16/float32/float64 Variable, or ``scale_a`` or ``scale_b`` is
            not a number.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 3], "float32")
        ...     out = fluid.layers.stanh(x)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.array([[-2.0, 0.0, 3.0]], "float32")}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res.round(4)
        array([[-1.4957,  0.    ,  1.6554]], dtype=float32)
    """
    return _act("stanh", x, name, scale_a=_float("stanh", "scale_a", scale_a),
                scale_b=_float("stanh", "scale_b", scale_b))


def hard_swish(x: Variable, threshold: float = 6.0, scale: float = 6.0, offset: float = 3.0,
               name: Optional[str] = None) -> Variable:
    """x * min(max(x + offset, 0), threshold) / scale (op ``hard_swish``).

    Args:
        x (Variable): the input.
        threshold (float, default 6.0): the clip bound.
        scale (float, default 6.0): the divisor.
        offset (float, default 3.0): added before clipping.
        name (str | None): name prefix of the output.
    Returns:
        Variable: same shape and dtype as ``x``.
    Raises:
        TypeError: ``x`` is not a float16/float32/float64 Variable, or ``threshold``, ``scale`` or
            ``offset`` is not a number.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 3], "float32")
        ...     out = fluid.layers.hard_swish(x)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.array([[-2.0, 0.0, 3.0]], "float32")}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res.round(4)
        array([[-0.3333,  0.    ,  3.    ]], dtype=float32)
    """
    return _act("hard_swish", x, name, threshold=_float("hard_swish", "threshold", threshold),
                scale=_float("hard_swish", "scale", scale),
                offset=_float("hard_swish", "offset", offset))


def mish(x: Variable, threshold: Optional[float] = 20, name: Optional[str] = None) -> Variable:
    """x * tanh(softplus(x)) (op ``mish``): with a positive ``threshold`` fluid's approximate
    softplus -- x above ``threshold``, exp(x) below ``-threshold``, ln(1 + e^x) between --
    else ln(1 + e^x) everywhere.

    Args:
        x (Variable): float32 or float64 input.
        threshold (float | int | None, default 20): where the softplus approximations start;
            None or a value <= 0 uses none (fluid 1.8's documented behaviour; its code
            asserted a positive value -- docs/compatibility.md).
        name (str | None): name prefix of the output.
    Returns:
        Variable: same shape and dtype as ``x``.
    Raises:
        TypeError: ``x`` is not a float32/float64 Variable, or ``threshold`` is not a number
            or None.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 4], "float32")
        ...     out = fluid.layers.mish(x)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> res, = exe.run(main, feed={"x": np.array([[-1.0, 0.0, 1.0, 3.0]], "float32")},
        ...                fetch_list=[out])
        >>> res.round(4)
        array([[-0.3034,  0.    ,  0.8651,  2.9865]], dtype=float32)
    """
    check_variable_and_dtype(x, "x", ["float32", "float64"], "mish")
    if threshold is not None and (isinstance(threshold, bool) or not is_number(threshold)):
        raise TypeError(f"mish: threshold must be a number or None, but received "
                        f"{type(threshold).__name__} ({threshold!r})")
    t = -1.0 if threshold is None or threshold <= 0 else float(threshold)
    return _act("mish", x, name, threshold=t)


def maxout(x: Variable, groups: int, name: Optional[str] = None, axis: int = 1) -> Variable:
    """Max over groups of ``groups`` consecutive channels (channels on ``axis``: 1 for NCHW,
    -1 or 3 for NHWC); the channel count shrinks by ``groups`` (op ``maxout``).

    Args:
        x (Variable): ``[N, C, H, W]`` map.
        groups (int): the channels per output channel (``C`` divisible by it).
        name (str | None): name prefix of the output.
        axis (int, default 1): the channel axis.
    Returns:
        Variable: the maximum of each group, ``C / groups`` channels.
    Raises:
        TypeError: ``x`` is not a float32/float64 Variable, or ``groups``/``axis`` is not an int.
        ValueError: ``groups < 1``, ``axis`` does not name the channel dim (1 for NCHW, -1 or 3 for
            NHWC), or the channel count is not divisible by ``groups``.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 4, 1, 1], "float32")
        ...     out = fluid.layers.maxout(x, groups=2)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.array([1, 5, 3, 2], "float32").reshape(1, 4, 1, 1)}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res.ravel()
        array([5., 3.], dtype=float32)
    """
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
    (op ``prelu``).

    Args:
        x (Variable): the input.
        mode (str): ``"all"`` (one slope), ``"channel"`` (one per channel) or ``"element"``
            (one per element).
        param_attr (ParamAttr | str | None): the slopes' attribute (default 0.25).
        name (str | None): name prefix of the output.
    Returns:
        Variable: ``x`` where positive, ``alpha * x`` elsewhere.
    Raises:
        TypeError: ``x`` is not a float16/float32/float64 Variable.
        ValueError: ``mode`` is not ``'all'``, ``'channel'`` or ``'element'``, or the dims that mode
            needs (the channel dim, or all dims after the batch) are unknown (-1).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 3], "float32")
        ...     out = fluid.layers.prelu(x, mode="all", param_attr=fluid.ParamAttr(initializer=fluid.initializer.Constant(0.1)))
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> feed = {"x": np.array([[-2.0, 0.0, 3.0]], "float32")}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res.round(4)
        array([[-0.2,  0. ,  3. ]], dtype=float32)
    """
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
    only the entries before it; ``reverse``: from the end (op ``cumsum``).

    Args:
        x (Variable): the input.
        axis (int | None): the axis (default: the flattened input).
        exclusive (bool | None): exclude the current element.
        reverse (bool | None): accumulate from the end.
    Returns:
        Variable: the running sums.
    Raises:
        TypeError: ``x`` is not a float16/float32/float64/int32/int64 Variable, ``axis`` is not an
            int, or ``exclusive``/``reverse`` is not a bool.
        ValueError: ``axis`` is outside ``[-rank, rank)`` (from the op's shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [2, 3], "float32")
        ...     out = fluid.layers.cumsum(x, axis=1)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.arange(6, dtype="float32").reshape(2, 3)}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res.round(4)
        array([[ 0.,  1.,  3.],
               [ 3.,  7., 12.]], dtype=float32)
    """
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
    (op ``logsumexp``).

    Args:
        x (Variable): the input.
        dim (int | list | None): the axes reduced (None: all).
        keepdim (bool, default False): keep the reduced axes with size 1.
        out (Variable | None): an existing variable to write.
        name (str | None): name prefix of the output.
    Returns:
        Variable: ``log(sum(exp(x)))``, computed stably.
    Raises:
        TypeError: ``x`` is not a float32/float64 Variable, an entry of ``dim`` is not an int,
            ``keepdim`` is not a bool, or ``out`` is not a Variable.
        ValueError: an entry of ``dim`` is outside ``[-rank, rank)`` (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [2, 3], "float32")
        ...     out = fluid.layers.logsumexp(x, dim=1)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.arange(6, dtype="float32").reshape(2, 3)}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res.round(4)
        array([2.4076, 5.4076], dtype=float32)
    """
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
    ``dtype``: cast the input to it first.

    Args:
        input (Variable): the scores.
        axis (int | None): the axis normalized (default the last).
        dtype (str | None): cast the input first.
        name (str | None): name prefix of the output.
    Returns:
        Variable: ``log(softmax(input))``, computed stably.
    Raises:
        TypeError: ``input`` is not a float32/float64 Variable, or ``axis`` is not an int.
        ValueError: ``axis`` is outside ``[-rank, rank)`` (from the op's shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 3], "float32")
        ...     out = fluid.layers.log_softmax(x)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.array([[0.1, 0.5, 0.9]], "float32")}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res.round(4)
        array([[-1.5513, -1.1513, -0.7513]], dtype=float32)
    """
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
    """Product over ``dim`` (int or list; None = every dim, giving shape [1]).

    Args:
        input (Variable): the input.
        dim (int | list of int | None): the axes reduced (negative counts from the end); None:
            all.
        keep_dim (bool, default False): keep the reduced axes with size 1.
        name (str | None): name prefix of the output.
    Returns:
        Variable: the products (shape ``[1]`` when every dim is reduced without ``keep_dim``).

    Raises:
        TypeError: ``input`` is not a Variable of float16/float32/float64/int32/int64, a dim is
            not an int, or ``keep_dim`` is not a bool.
        ValueError: a dim is out of range for ``input``'s rank.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [2, 3], "float32")
        ...     out = fluid.layers.reduce_prod(x, dim=1)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.arange(6, dtype="float32").reshape(2, 3)}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res.round(4)
        array([ 0., 60.], dtype=float32)
    """
    return _reduce("reduce_prod", input, dim, keep_dim, name, _NUMS)


def reduce_all(input: Variable, dim: Any = None, keep_dim: bool = False,
               name: Optional[str] = None) -> Variable:
    """Logical AND of a bool tensor over ``dim`` (None = every dim, giving shape [1]).

    Args:
        input (Variable): a bool tensor.
        dim (int | list of int | None): the axes reduced; None: all.
        keep_dim (bool, default False): keep the reduced axes with size 1.
        name (str | None): name prefix of the output.
    Returns:
        Variable: bool, true where every reduced entry is true.

    Raises:
        TypeError: ``input`` is not a bool Variable, a dim is not an int, or ``keep_dim`` is
            not a bool.
        ValueError: a dim is out of range for ``input``'s rank.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [2, 2], "bool")
        ...     out = fluid.layers.reduce_all(x, dim=1)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.array([[True, False], [True, True]])}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res
        array([False,  True])
    """
    return _reduce("reduce_all", input, dim, keep_dim, name, ["bool"])


def reduce_any(input: Variable, dim: Any = None, keep_dim: bool = False,
               name: Optional[str] = None) -> Variable:
    """Logical OR of a bool tensor over ``dim`` (None = every dim, giving shape [1]).

    Args:
        input (Variable): a bool tensor.
        dim (int | list of int | None): the axes reduced; None: all.
        keep_dim (bool, default False): keep the reduced axes with size 1.
        name (str | None): name prefix of the output.
    Returns:
        Variable: bool, true where some reduced entry is true.

    Raises:
        TypeError: ``input`` is not a bool Variable, a dim is not an int, or ``keep_dim`` is
            not a bool.
        ValueError: a dim is out of range for ``input``'s rank.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [2, 2], "bool")
        ...     out = fluid.layers.reduce_any(x, dim=1)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.array([[True, False], [False, False]])}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res
        array([ True, False])
    """
    return _reduce("reduce_any", input, dim, keep_dim, name, ["bool"])


def _check_whole(op_type: str, layer: str, x: Variable) -> Variable:
    # fluid 1.8's static isfinite takes no float16 (its dygraph layers checked no dtype)
    static18 = layer == "isfinite" and _mode.tracer is None
    check_variable_and_dtype(x, "x", _NUMS[1:] if static18 else _NUMS, layer)
    helper = LayerHelper(op_type)
    out = helper.create_variable_for_type_inference(dtype="bool", stop_gradient=True)
    helper.append_op(type=op_type, inputs={"X": x}, outputs={"Out": out})
    return out


def isfinite(x: Variable) -> Variable:
    """[True] when every entry of ``x`` is finite, else [False] (bool, shape [1]; op
    ``isfinite``).

    Args:
        x (Variable): the input.
    Returns:
        Variable: bool ``[1]``: every element is finite.
    Raises:
        TypeError: ``x`` is not a Variable of float16/float16/float32/float64/int32/int64.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1], "float32")
        ...     out = fluid.layers.isfinite(x)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> res, = exe.run(main, feed={"x": np.array([1, np.inf], "float32")}, fetch_list=[out])
        >>> res
        array([False])
    """
    return _check_whole("isfinite", "isfinite", x)


def has_inf(x: Variable) -> Variable:
    """[True] when any entry of ``x`` is +-inf (bool, shape [1]; op ``isinf``).

    Args:
        x (Variable): the input.
    Returns:
        Variable: bool ``[1]``: some element is infinite.
    Raises:
        TypeError: ``x`` is not a Variable of float16/float16/float32/float64/int32/int64.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1], "float32")
        ...     out = fluid.layers.has_inf(x)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> res, = exe.run(main, feed={"x": np.array([1, np.inf], "float32")}, fetch_list=[out])
        >>> res
        array([ True])
    """
    return _check_whole("isinf", "has_inf", x)


def has_nan(x: Variable) -> Variable:
    """[True] when any entry of ``x`` is nan (bool, shape [1]; op ``isnan``).

    Args:
        x (Variable): the input.
    Returns:
        Variable: bool ``[1]``: some element is NaN.
    Raises:
        TypeError: ``x`` is not a Variable of float16/float16/float32/float64/int32/int64.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1], "float32")
        ...     out = fluid.layers.has_nan(x)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> res, = exe.run(main, feed={"x": np.array([1, np.nan], "float32")}, fetch_list=[out])
        >>> res
        array([ True])
    """
    return _check_whole("isnan", "has_nan", x)


def sum(x: Union[Variable, Sequence[Variable]]) -> Variable:
    """Elementwise sum of a Variable or a list of same-shaped Variables (op ``sum``; the same
    as ``sums`` without ``out``).

    Args:
        x (Variable | list of Variable): same-shaped tensors.
    Returns:
        Variable: their elementwise sum.
    Raises:
        TypeError: ``x`` is not a Variable or a list/tuple of Variables, or an entry is not
            float16/float32/float64/int32/int64.
        ValueError: ``x`` is an empty list.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [2, 3], "float32")
        ...     y = fluid.data("y", [2, 3], "float32")
        ...     out = fluid.layers.sum([x, y])
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.arange(6, dtype="float32").reshape(2, 3), "y": np.full((2, 3), 2.0, "float32")}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res.round(4)
        array([[2., 3., 4.],
               [5., 6., 7.]], dtype=float32)
    """
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
    knows the rank when building).

    Args:
        input (Variable): the tensor.
    Returns:
        Variable: int32 ``[1]``, its number of dims.
    Raises:
        TypeError: ``input`` is not a Variable.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 3, 4])
        ...     r = fluid.layers.rank(x)
        >>> fluid.Executor(fluid.CPUPlace()).run(main, fetch_list=[r])[0]
        array([3], dtype=int32)
    """
    check_type(input, "input", Variable, "rank")
    from .tensor import assign
    return assign(np.array([len(input.shape)], dtype="int32"))


def size(input: Variable) -> Variable:
    """The number of elements of ``input`` as an int64 tensor of shape [1], computed when the
    program runs (op ``size``).

    Args:
        input (Variable): the tensor.
    Returns:
        Variable: int64 ``[1]``, its number of elements at run time.
    Raises:
        TypeError: ``input`` is not a Variable.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 3], "float32")
        ...     out = fluid.layers.size(x)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> res, = exe.run(main, feed={"x": np.ones((4, 3), "float32")}, fetch_list=[out])
        >>> res
        array([12])
    """
    check_type(input, "input", Variable, "size")
    helper = LayerHelper("size")
    out = helper.create_variable_for_type_inference(dtype="int64", stop_gradient=True)
    helper.append_op(type="size", inputs={"Input": input}, outputs={"Out": out})
    return out


def clamp(input: Variable, min: Optional[float] = None, max: Optional[float] = None,
          output: Optional[Variable] = None, name: Optional[str] = None) -> Variable:
    """min(max(input, min), max); a bound given as None is open (op ``clip`` with the float32
    limits, as fluid 1.8).

    Args:
        input (Variable): a float16/float32/float64 tensor of any shape.
        min (float, optional): the lower bound; None leaves it open. Default None.
        max (float, optional): the upper bound; None leaves it open. Default None.
        output (Variable, optional): a Variable to write the result into. Default None (a new
            one).
        name (str, optional): a name prefix for the output. Default None.

    Returns:
        Variable: ``input`` clamped to ``[min, max]``, its shape and dtype.

    Raises:
        TypeError: ``input`` is not a float Variable, or a bound is not a number.
        ValueError: both bounds are None, or ``min > max``.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 3])
        ...     out = fluid.layers.clamp(x, min=-1.0, max=1.0)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> exe.run(main, feed={"x": np.array([[-2.0, 0.5, 3.0]], "float32")}, fetch_list=[out])[0]
        array([[-1. ,  0.5,  1. ]], dtype=float32)
    """
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
    """The Kronecker product of ``x`` and ``y`` (op ``kron``).

    Args:
        x (Variable): the first factor.
        y (Variable): the second.
        out (Variable | None): an existing variable to write.
        name (str | None): name prefix of the output.
    Returns:
        Variable: the Kronecker product.
    Raises:
        TypeError: ``x`` or ``y`` is not a float16/float32/float64/int32/int64 Variable, or ``out``
            is not a Variable.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [2, 2], "float32")
        ...     y = fluid.data("y", [1, 2], "float32")
        ...     out = fluid.layers.kron(x, y)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.eye(2, dtype="float32"), "y": np.array([[1, 2]], "float32")}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res.round(4)
        array([[1., 2., 0., 0.],
               [0., 0., 1., 2.]], dtype=float32)
    """
    return _binary("kron", x, y, name, out, dtypes=_NUMS)


def dot(x: Variable, y: Variable, name: Optional[str] = None) -> Variable:
    """Inner product along the last dim of 1-D or 2-D ``x``, ``y`` (shape [1] or [N, 1];
    op ``dot``).

    Args:
        x (Variable): ``[N]`` or ``[B, N]``.
        y (Variable): same shape.
        name (str | None): name prefix of the output.
    Returns:
        Variable: the inner products (``[B, 1]`` for batched input).
    Raises:
        TypeError: ``x`` or ``y`` is not a float16/float32/float64/int32/int64 Variable.
        ValueError: ``x`` and ``y`` are not 1-D or 2-D tensors of the same shape (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [2, 3], "float32")
        ...     y = fluid.data("y", [2, 3], "float32")
        ...     out = fluid.layers.dot(x, y)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.arange(6, dtype="float32").reshape(2, 3), "y": np.full((2, 3), 2.0, "float32")}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res.round(4)
        array([[ 6.],
               [24.]], dtype=float32)
    """
    return _binary("dot", x, y, name, dtypes=_NUMS)


def bmm(x: Variable, y: Variable, name: Optional[str] = None) -> Variable:
    """Batched matrix product of [B, M, K] and [B, K, N] (op ``bmm``).

    Args:
        x (Variable): ``[B, M, K]``.
        y (Variable): ``[B, K, N]``.
        name (str | None): name prefix of the output.
    Returns:
        Variable: ``[B, M, N]``.
    Raises:
        TypeError: ``x`` or ``y`` is not a float16/float32/float64 Variable.
        ValueError: ``x``/``y`` are not 3-D, or disagree on the batch size B or on K (shape
            inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [2, 2, 3], "float32")
        ...     y = fluid.data("y", [2, 3, 1], "float32")
        ...     out = fluid.layers.bmm(x, y)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.ones((2, 2, 3), "float32"), "y": np.ones((2, 3, 1), "float32")}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res.shape, float(res[0, 0, 0])
        ((2, 2, 1), 3.0)
    """
    return _binary("bmm", x, y, name)


def cross(input: Variable, other: Variable, dim: Optional[int] = None) -> Variable:
    """The cross product of 3-vectors along ``dim`` (default: the first dim of size 3; op
    ``cross``).

    Args:
        input (Variable): the first operand.
        other (Variable): the second, same shape.
        dim (int | None): an axis of size 3 (default: the first one).
    Returns:
        Variable: the cross products.
    Raises:
        TypeError: ``input`` or ``other`` is not a float16/float32/float64/int32/int64 Variable, or
            ``dim`` is not an int.
        ValueError: the shapes differ, or the dim used (``dim``, else the first of size 3) does not
            have size 3 (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [1, 3], "float32")
        ...     y = fluid.data("y", [1, 3], "float32")
        ...     out = fluid.layers.cross(x, y, dim=1)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.array([[1, 0, 0]], "float32"), "y": np.array([[0, 1, 0]], "float32")}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res.round(4)
        array([[0., 0., 1.]], dtype=float32)
    """
    attrs = {} if dim is None else {"dim": check_int(dim, "dim", "cross")}
    return _binary("cross", input, other, dtypes=_NUMS, names=("input", "other"), **attrs)


def trace(input: Variable, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Variable:
    """Sum of the ``offset`` diagonal of the (dim1, dim2) planes (op ``trace``).

    Args:
        input (Variable): a tensor of rank >= 2 (float or int).
        offset (int): which diagonal: 0 the main one, > 0 above it, < 0 below. Default 0.
        dim1 (int): the first axis of the planes (negative counts from the end). Default 0.
        dim2 (int): the second axis of the planes. Default 1.

    Returns:
        Variable: ``input``'s shape without ``dim1`` and ``dim2`` (``[1]`` for a matrix),
        ``input``'s dtype.

    Raises:
        TypeError: ``input`` is not a numeric Variable, or an axis or ``offset`` is not an int.
        ValueError: ``dim1`` or ``dim2`` is out of range, or they are the same axis.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [3, 3], "float32")
        ...     out = fluid.layers.trace(x)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.arange(9, dtype="float32").reshape(3, 3)}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res.round(4)
        array([12.], dtype=float32)
    """
    check_variable_and_dtype(input, "input", _NUMS, "trace")
    attrs = {"offset": check_int(offset, "offset", "trace"),
             "dim1": check_int(dim1, "dim1", "trace"), "dim2": check_int(dim2, "dim2", "trace")}
    helper = LayerHelper("trace")
    out = helper.create_variable_for_type_inference(dtype=input.dtype)
    helper.append_op(type="trace", inputs={"Input": input}, outputs={"Out": out}, attrs=attrs)
    return out


def addmm(input: Variable, x: Variable, y: Variable, alpha: float = 1.0, beta: float = 1.0,
          name: Optional[str] = None) -> Variable:
    """beta * input + alpha * (x @ y), ``input`` broadcast to [M, N] (op ``addmm``).

    Args:
        input (Variable): added, broadcast to ``[M, N]``.
        x (Variable): ``[M, K]``.
        y (Variable): ``[K, N]``.
        alpha (float, default 1.0): scale of the product.
        beta (float, default 1.0): scale of ``input``.
        name (str | None): name prefix of the output.
    Returns:
        Variable: ``beta * input + alpha * x @ y``.
    Raises:
        TypeError: ``input``, ``x`` or ``y`` is not a float32/float64 Variable, or ``alpha``/
            ``beta`` is not a number.
        ValueError: ``x`` and ``y`` are not matrices with matching inner dim, or ``input`` does not
            broadcast to ``[M, N]`` (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     i = fluid.data("i", [2, 2], "float32")
        ...     x = fluid.data("x", [2, 3], "float32")
        ...     y = fluid.data("y", [3, 2], "float32")
        ...     out = fluid.layers.addmm(i, x, y, alpha=2.0, beta=1.0)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"i": np.ones((2, 2), "float32"), "x": np.ones((2, 3), "float32"), "y": np.ones((3, 2), "float32")}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res.round(4)
        array([[7., 7.],
               [7., 7.]], dtype=float32)
    """
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
    ``elementwise_add``, as fluid 1.8).

    Args:
        input (Variable): the base.
        tensor1 (Variable): a factor.
        tensor2 (Variable): the other factor.
        value (float, default 1.0): the product's scale.
        out (Variable | None): an existing variable to write.
        name (str | None): name prefix of the output.
    Returns:
        Variable: ``input + value * tensor1 * tensor2``.
    Raises:
        TypeError: ``input``/``tensor1``/``tensor2`` is not a float32/float64/int32/int64 Variable,
            ``value`` is not a float for float inputs (an int for int inputs), or ``out`` is not a Variable.
        ValueError: the shapes do not broadcast (shape inference of the elementwise ops).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [2, 3], "float32")
        ...     y = fluid.data("y", [2, 3], "float32")
        ...     z = fluid.data("z", [2, 3], "float32")
        ...     out = fluid.layers.addcmul(x, y, z, value=0.5)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.arange(6, dtype="float32").reshape(2, 3), "y": np.full((2, 3), 2.0, "float32"), "z": np.ones((2, 3), "float32")}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res.round(4)
        array([[1., 2., 3.],
               [4., 5., 6.]], dtype=float32)
    """
    for arg, v in (("input", input), ("tensor1", tensor1), ("tensor2", tensor2)):
        check_variable_and_dtype(v, arg, ["float32", "float64", "int32", "int64"], "addcmul")
    # fluid 1.8: a float value for float inputs, an int for int inputs
    want = float if input.dtype in ("float32", "float64") else int
    if not is_number(value) or isinstance(value, bool) or \
            isinstance(value, (int, np.integer)) != (want is int):
        raise TypeError(f"The type of 'value' in addcmul must be {want.__name__} for "
                        f"{input.dtype} inputs, but received {value!r} of type "
                        f"{type(value).__name__}")
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
    fluid 1.8 does. Higher ranks: use ``transpose`` with a permutation.

    Args:
        input (Variable): a 1-D or 2-D tensor.
        name (str | None): name prefix of the output.
    Returns:
        Variable: the transpose (a 1-D input is returned as is).
    Raises:
        TypeError: ``input`` is not a float16/float16/float32/float64/int32/int64 Variable.
        ValueError: ``input`` has more than 2 dims.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [2, 3], "float32")
        ...     out = fluid.layers.t(x)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.arange(6, dtype="float32").reshape(2, 3)}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res
        array([[0., 3.],
               [1., 4.],
               [2., 5.]], dtype=float32)
    """
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
    ``equal_nan``: nan equals nan; op ``allclose``).

    Args:
        input (Variable): the first tensor.
        other (Variable): the second.
        rtol (float, default 1e-5): relative tolerance.
        atol (float, default 1e-8): absolute tolerance.
        equal_nan (bool, default False): NaN equals NaN.
        name (str | None): name prefix of the output.
    Returns:
        Variable: bool ``[1]``.

    Raises:
        TypeError: ``input`` or ``other`` is not a float32/float64 Variable, ``rtol`` or
            ``atol`` is not a number, or ``equal_nan`` is not a bool.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [2, 3], "float32")
        ...     y = fluid.data("y", [2, 3], "float32")
        ...     out = fluid.layers.allclose(x, y)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.arange(6, dtype="float32").reshape(2, 3), "y": np.arange(6, dtype="float32").reshape(2, 3) + 1e-9}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res
        array([ True])
    """
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
    p = inf / -inf take the max / min magnitude).

    Args:
        x (Variable): the first tensor.
        y (Variable): the second (broadcast against ``x``).
        p (float, default 2): the norm's order (``inf``, ``-inf`` and 0 too).
    Returns:
        Variable: ``[1]``, ``||x - y||_p``.
    Raises:
        TypeError: ``x`` or ``y`` is not a float16/float32/float64 Variable, or ``p`` is not a
            number.
        ValueError: the shapes of ``x`` and ``y`` cannot be broadcast together (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [2, 3], "float32")
        ...     y = fluid.data("y", [2, 3], "float32")
        ...     out = fluid.layers.dist(x, y, p=2)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.arange(6, dtype="float32").reshape(2, 3), "y": np.full((2, 3), 2.0, "float32")}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res.round(4)
        array([4.3589], dtype=float32)
    """
    return _binary("dist", x, y, p=_float("dist", "p", p))


def elementwise_equal(x: Variable, y: Variable, name: Optional[str] = None) -> Variable:
    """x == y elementwise as a bool tensor (op ``equal``).

    Args:
        x (Variable): the first operand.
        y (Variable): the second, same shape.
        name (str | None): name prefix of the output.
    Returns:
        Variable: bool, elementwise ``x == y``.
    Raises:
        TypeError: ``x`` or ``y`` is not a Variable of a numeric or bool dtype.
        ValueError: ``y`` does not broadcast to ``x`` (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [2, 3], "float32")
        ...     y = fluid.data("y", [2, 3], "float32")
        ...     out = fluid.layers.elementwise_equal(x, y)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.arange(6, dtype="float32").reshape(2, 3), "y": np.full((2, 3), 2.0, "float32")}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res
        array([[False, False,  True],
               [False, False, False]])
    """
    check_variable_and_dtype(x, "x", _NUMS + ["bool"], "elementwise_equal")
    check_variable_and_dtype(y, "y", _NUMS + ["bool"], "elementwise_equal")
    helper = LayerHelper("elementwise_equal", name=name)
    out = helper.create_variable_for_type_inference(dtype="bool", stop_gradient=True)
    helper.append_op(type="equal", inputs={"X": x, "Y": y}, outputs={"Out": out})
    return out
