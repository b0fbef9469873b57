"""More activation ops of fluid 1.8: the inverse trigonometric functions, erf, log1p, the
shrink family, thresholded/bounded/soft ReLUs, selu, stanh, hard_swish, plus ``prelu`` (a
learnable slope) and ``maxout`` (max over channel groups).

The unary ones share ``activation._Act`` (Out = f(X), a fused ``backward``) but carry no
higher-order rule: fluid 1.8 has no double-grad kernels for them either, so their grad ops are
not themselves differentiable.
"""
from __future__ import annotations

import math
import numpy as np

from ..core.dtypes import FLOATS, convert_dtype
from ..core.registry import OpDef, get_op_def, register
from .activation import _Act, erf_numpy, relu6_to

_SELU_SCALE = 1.0507009873554804934193349852946
_SELU_ALPHA = 1.6732632423543772848170429916717
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


class _Unary(_Act):
    double_grad = None        # first order only (see the module docstring)


# -- no attributes ------------------------------------------------------------------------------
@register
class Acos(_Unary):
    """Out = arccos(X);  dX = -dOut / sqrt(1 - X^2)."""
    type = "acos"
    f = staticmethod(np.arccos)

    def backward(self, X, dOut):
        return {"X": -dOut / np.sqrt(1 - X * X)}


@register
class Asin(_Unary):
    """Out = arcsin(X);  dX = dOut / sqrt(1 - X^2)."""
    type = "asin"
    f = staticmethod(np.arcsin)

    def backward(self, X, dOut):
        return {"X": dOut / np.sqrt(1 - X * X)}


@register
class Atan(_Unary):
    """Out = arctan(X);  dX = dOut / (1 + X^2)."""
    type = "atan"
    f = staticmethod(np.arctan)

    def backward(self, X, dOut):
        return {"X": dOut / (1 + X * X)}


@register
class TanhShrink(_Unary):
    """Out = X - tanh(X);  dX = dOut * tanh(X)^2."""
    type = "tanh_shrink"

    @staticmethod
    def f(x):
        return x - np.tanh(x)

    def backward(self, X, dOut):
        t = np.tanh(X)
        return {"X": dOut * t * t}


@register
class Erf(_Unary):
    """Out = erf(X);  dX = dOut * 2 / sqrt(pi) * exp(-X^2)."""
    type = "erf"
    f = staticmethod(erf_numpy)

    def backward(self, X, dOut):
        return {"X": dOut * (np.exp(-X * X) * _TWO_OVER_SQRT_PI)}


@register
class Log1p(_Unary):
    """Out = ln(1 + X) (accurate for small X);  dX = dOut / (1 + X)."""
    type = "log1p"
    f = staticmethod(np.log1p)

    def backward(self, X, dOut):
        return {"X": dOut / (1 + X)}


# -- with attributes ----------------------------------------------------------------------------
@register
class HardShrink(_Unary):
    """Out = X where |X| > threshold, else 0;  dX = dOut * (|X| > threshold)."""
    type = "hard_shrink"

    @staticmethod
    def f(x, threshold=0.5):
        return np.where((x > threshold) | (x < -threshold), x, x.dtype.type(0))

    def forward(self, X, *, threshold=0.5):
        return {"Out": self.f(X, threshold)}

    def backward(self, X, dOut, *, threshold=0.5):
        return {"X": dOut * ((X > threshold) | (X < -threshold))}


@register
class Softshrink(_Unary):
    """Out = X - lambda (X > lambda), X + lambda (X < -lambda), else 0;
    dX = dOut * (|X| > lambda). (The attribute is fluid's ``lambda``, a Python keyword: the
    kernels read it from ``**attrs``.)"""
    type = "softshrink"

    @staticmethod
    def f(x, **attrs):
        lam = x.dtype.type(attrs.get("lambda", 0.5))
        return np.where(x > lam, x - lam, np.where(x < -lam, x + lam, x.dtype.type(0)))

    def forward(self, X, **attrs):
        return {"Out": self.f(X, **attrs)}

    def backward(self, X, dOut, **attrs):
        lam = attrs.get("lambda", 0.5)
        return {"X": dOut * ((X > lam) | (X < -lam))}


# ``lambda`` cannot be a keyword-only parameter, so the attr schema is stated here
Softshrink.attr_defaults = {"lambda": 0.5}
get_op_def("softshrink_grad").attr_defaults = {"lambda": 0.5}


@register
class ThresholdedRelu(_Unary):
    """Out = X * (X > threshold) (fluid's functor: -0.0 below a positive threshold for
    negative X);  dX = dOut * (X > threshold)."""
    type = "thresholded_relu"

    @staticmethod
    def f(x, threshold=1.0):
        return x * (x > threshold)

    def forward(self, X, *, threshold=1.0):
        return {"Out": self.f(X, threshold)}

    def backward(self, X, dOut, *, threshold=1.0):
        return {"X": dOut * (X > threshold)}


@register
class Brelu(_Unary):
    """Out = min(max(X, t_min), t_max);  dX = dOut * (t_min < X < t_max)."""
    type = "brelu"

    @staticmethod
    def f(x, t_min=0.0, t_max=24.0):
        return np.minimum(np.maximum(x, x.dtype.type(t_min)), x.dtype.type(t_max))

    def infer(self, X, *, t_min=0.0, t_max=24.0):
        if t_min > t_max:
            raise ValueError(f"brelu: t_min ({t_min}) must not be greater than t_max ({t_max})")
        return super().infer(X)

    def forward(self, X, *, t_min=0.0, t_max=24.0):
        return {"Out": self.f(X, t_min, t_max)}

    def backward(self, X, dOut, *, t_min=0.0, t_max=24.0):
        return {"X": dOut * ((X > t_min) & (X < t_max))}


@register
class SoftRelu(_Unary):
    """Out = ln(1 + exp(clip(X, -threshold, threshold)));
    dX = dOut * (1 - exp(-Out)) * (-threshold < X < threshold)."""
    type = "soft_relu"

    @staticmethod
    def f(x, threshold=40.0):
        t = x.dtype.type(threshold)
        return np.logaddexp(x.dtype.type(0), np.clip(x, -t, t))

    def forward(self, X, *, threshold=40.0):
        return {"Out": self.f(X, threshold)}

    def backward(self, X, dOut, *, threshold=40.0):
        inside = (X > -threshold) & (X < threshold)
        s = 1 / (1 + np.exp(-np.clip(X, -threshold, threshold)))   # 1 - exp(-Out), stably
        return {"X": dOut * s * inside}


@register
class Selu(_Unary):
    """Out = scale * (X if X > 0 else alpha * (exp(X) - 1));
    dX = dOut * scale * (1 if X > 0 else alpha * exp(X))."""
    type = "selu"

    @staticmethod
    def f(x, scale=_SELU_SCALE, alpha=_SELU_ALPHA):
        neg = np.expm1(np.minimum(x, 0)) * x.dtype.type(alpha)
        return np.where(x > 0, x, neg) * x.dtype.type(scale)

    def forward(self, X, *, scale=_SELU_SCALE, alpha=_SELU_ALPHA):
        return {"Out": self.f(X, scale, alpha)}

    def backward(self, X, dOut, *, scale=_SELU_SCALE, alpha=_SELU_ALPHA):
        d = np.where(X > 0, X.dtype.type(1), np.exp(np.minimum(X, 0)) * X.dtype.type(alpha))
        return {"X": dOut * d * X.dtype.type(scale)}


@register
class Stanh(_Unary):
    """Out = scale_b * tanh(scale_a * X);  dX = dOut * scale_a * scale_b * (1 - tanh^2)."""
    type = "stanh"

    @staticmethod
    def f(x, scale_a=0.67, scale_b=1.7159):
        return np.tanh(x * x.dtype.type(scale_a)) * x.dtype.type(scale_b)

    def forward(self, X, *, scale_a=0.67, scale_b=1.7159):
        return {"Out": self.f(X, scale_a, scale_b)}

    def backward(self, X, dOut, *, scale_a=0.67, scale_b=1.7159):
        t = np.tanh(X * X.dtype.type(scale_a))
        return {"X": dOut * (1 - t * t) * X.dtype.type(scale_a * scale_b)}


def hard_swish_to(x: np.ndarray, out: np.ndarray, threshold: float = 6.0, scale: float = 6.0,
                  offset: float = 3.0) -> np.ndarray:
    """``out[...] = x * min(max(x + offset, 0), threshold) / scale`` in that order (fluid's
    kernel), ``out`` of ``x``'s shape and float dtype, ``x`` itself for in place (a fused
    convolution's epilogue); returns ``out``. The bound is one ``relu6_to`` pass over
    ``x + offset`` (np.clip's loop on NumPy 2, arrays of the bounds on NumPy 1) instead of
    np.maximum and np.minimum against scalars: the same values (``x + offset`` is never
    -0.0), 0.55-0.7x the time.

    Example:
        >>> import numpy as np
        >>> from fluidlite.ops.activation_extra import hard_swish_to
        >>> x = np.float32([-4.0, 0.0, 1.0, 5.0])
        >>> hard_swish_to(x, x).tolist()
        [-0.0, 0.0, 0.6666666865348816, 5.0]
    """
    typ = x.dtype.type
    t = np.add(x, typ(offset))
    relu6_to(t, t, threshold)
    np.multiply(x, t, out=out)
    out /= typ(scale)
    return out


@register
class HardSwish(_Unary):
    """Out = X * min(max(X + offset, 0), threshold) / scale;
    dX = dOut * (0 if X + offset <= 0, (2X + offset) / scale below threshold, else
    threshold / scale)."""
    type = "hard_swish"

    @staticmethod
    def f(x, threshold=6.0, scale=6.0, offset=3.0):
        return hard_swish_to(x, np.empty(x.shape, x.dtype), threshold, scale, offset)

    def forward(self, X, *, threshold=6.0, scale=6.0, offset=3.0):
        return {"Out": self.f(X, threshold, scale, offset)}

    def backward(self, X, dOut, *, threshold=6.0, scale=6.0, offset=3.0):
        t = X.dtype.type
        u = X + t(offset)
        d = np.where(u <= 0, t(0), np.where(u < t(threshold), (X + X + t(offset)) / t(scale),
                                            t(threshold / scale)))
        return {"X": dOut * d.astype(X.dtype, copy=False)}


# -- prelu and maxout ---------------------------------------------------------------------------
def _prelu_alpha(X: np.ndarray, Alpha: np.ndarray, mode: str) -> np.ndarray:
    """Alpha reshaped so that it broadcasts against X for ``mode``."""
    if mode == "all":
        return Alpha.reshape((1,) * X.ndim)
    if mode == "channel":
        return Alpha.reshape((1, -1) + (1,) * (X.ndim - 2))
    return Alpha.reshape((1,) + X.shape[1:])


@register
class Prelu(OpDef):
    """Out = X if X > 0 else Alpha * X, with one Alpha (``mode='all'``), one per channel (dim
    1, ``'channel'``) or one per element of a sample (``'element'``);
    dX = dOut * (1 if X > 0 else Alpha);  dAlpha = sum of dOut * X over X <= 0 (per alpha)."""
    type, inputs, outputs = "prelu", ("X", "Alpha"), ("Out",)

    def infer(self, X, Alpha, *, mode="all"):
        if mode not in ("all", "channel", "element"):
            raise ValueError(f"prelu: mode must be one of 'all', 'channel', 'element', but "
                             f"received {mode!r}")
        n = int(np.prod(Alpha.shape)) if Alpha.shape else 1
        if mode == "all":
            want = 1
        elif mode == "channel":
            if len(X.shape) < 2:
                raise ValueError(f"prelu: mode 'channel' needs an input of rank >= 2 (channels "
                                 f"on dim 1), but X has shape {list(X.shape)}")
            want = X.shape[1]
        else:
            want = int(np.prod(X.shape[1:])) if all(d > 0 for d in X.shape[1:]) else -1
        if want > 0 and n > 0 and n != want:
            raise ValueError(f"prelu: mode {mode!r} needs {want} alpha values for input shape "
                             f"{list(X.shape)}, but Alpha has shape {list(Alpha.shape)}")
        if X.dtype not in FLOATS:
            raise ValueError(f"prelu: X must be a float tensor, but it is "
                             f"{convert_dtype(X.dtype)}")
        return {"Out": X}

    def forward(self, X, Alpha, *, mode="all"):
        a = _prelu_alpha(X, Alpha, mode)
        return {"Out": np.where(X > 0, X, X * a).astype(X.dtype, copy=False)}

    def backward(self, X, Alpha, dOut, *, mode="all"):
        a = _prelu_alpha(X, Alpha, mode)
        neg = X <= 0
        dx = np.where(neg, dOut * a, dOut).astype(X.dtype, copy=False)
        contrib = dOut * X
        contrib = np.where(neg, contrib, contrib.dtype.type(0))
        if mode == "all":
            da = contrib.sum().reshape(Alpha.shape)
        elif mode == "channel":
            axes = (0,) + tuple(range(2, X.ndim))
            da = contrib.sum(axis=axes).reshape(Alpha.shape)
        else:
            da = contrib.sum(axis=0).reshape(Alpha.shape)
        return {"X": dx, "Alpha": da.astype(Alpha.dtype, copy=False)}


def _maxout_view(X: np.ndarray, groups: int, axis: int) -> np.ndarray:
    """X with the channel axis split into (C / groups, groups), the group axis right after."""
    shape = X.shape[:axis] + (X.shape[axis] // groups, groups) + X.shape[axis + 1:]
    return X.reshape(shape)


@register
class Maxout(OpDef):
    """Out[.., c, ..] = max_k X[.., c * groups + k, ..] over the channel axis (1 for NCHW, 3 for
    NHWC);  dX = dOut at the first maximal entry of each group, 0 elsewhere."""
    type, inputs, outputs = "maxout", ("X",), ("Out",)

    @staticmethod
    def _axis(rank: int, axis: int) -> int:
        if axis not in (1, -1, 3):
            raise ValueError(f"maxout: axis must be 1 (NCHW) or -1 / 3 (NHWC), but received "
                             f"{axis}")
        return rank - 1 if axis == -1 else axis

    def infer(self, X, *, groups=1, axis=1):
        if len(X.shape) != 4:
            raise ValueError(f"maxout: X must be a 4-D tensor (NCHW or NHWC), but its shape is "
                             f"{list(X.shape)}")
        a = self._axis(4, axis)
        if groups < 1:
            raise ValueError(f"maxout: groups must be >= 1, but received {groups}")
        c = X.shape[a]
        if c > 0 and c % groups:
            raise ValueError(f"maxout: the number of channels ({c}, dim {a} of X "
                             f"{list(X.shape)}) must be divisible by groups ({groups})")
        shape = list(X.shape)
        shape[a] = c // groups if c > 0 else -1
        return {"Out": X.with_(shape=shape)}

    def forward(self, X, *, groups=1, axis=1):
        a = self._axis(X.ndim, axis)
        return {"Out": _maxout_view(X, groups, a).max(axis=a + 1)}

    def backward(self, X, dOut, *, groups=1, axis=1):
        a = self._axis(X.ndim, axis)
        v = _maxout_view(X, groups, a)
        first = np.expand_dims(v.argmax(axis=a + 1), a + 1)
        mask = np.arange(groups).reshape((1,) * (a + 1) + (groups,) + (1,) * (X.ndim - a - 1))
        dx = np.where(mask == first, np.expand_dims(dOut, a + 1), dOut.dtype.type(0))
        dx = dx.astype(X.dtype, copy=False)
        return {"X": dx.reshape(X.shape)}

