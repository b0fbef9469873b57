"""Activation ops: Out = f(X) (relu family, sigmoid, tanh, softmax, elu, gelu, softplus, ...).
The plain math functions (exp, log, sqrt, ...) share this machinery and live in ``unary.py``.

Each op: ``f`` (the kernel, also its ``lower`` fast path), a fused first-order ``backward``
reading X or Out (``grad_uses``, as fluid), and ``second``: the gradient of its grad op w.r.t.
that X/Out input as a formula (``Sym``) of differentiable ops, or None when it is zero
(piecewise-linear ops). ``double_grad`` (shared) turns it into the higher-order rule: the grad op
``dX = f'(.) * dOut`` is linear in dOut with a diagonal Jacobian, so the gradient w.r.t. dOut is
the same grad op applied to ddX, and the gradient w.r.t. X/Out is ``ddX * dOut * f''``.
"""
from __future__ import annotations

import math
import threading
from typing import Any, Callable, Dict, Optional, Tuple

import numpy as np

from ..core import threads
from ..core.dtypes import FLOATS, convert_dtype, to_numpy_dtype
from ..core.registry import OpDef, register
from .broadcast import whole_runs
from .compose import Compose, Sym, live

_SQRT_2PI_INV = 1.0 / math.sqrt(2.0 * math.pi)
_SQRT_2_INV = 1.0 / math.sqrt(2.0)
_GELU_K = math.sqrt(2.0 / math.pi)
_GELU_A = 0.044715


# -- erf without scipy: piecewise Chebyshev interpolants of math.erf -----------------------
_ERF_W, _ERF_N, _ERF_DEG, _ERF_TOP = 0.25, 24, 12, 6.0   # intervals of 0.25 on [0, 6)


def _erf_tables() -> np.ndarray:
    """Chebyshev coefficients (deg+1, n) of erf on each interval (rows: degree)."""
    j = np.arange(_ERF_DEG + 1)
    nodes = np.cos(np.pi * (j + 0.5) / (_ERF_DEG + 1))          # Chebyshev points on [-1, 1]
    coef = np.empty((_ERF_DEG + 1, _ERF_N))
    for k in range(_ERF_N):
        pts = [(k + 0.5) * _ERF_W + 0.5 * _ERF_W * t for t in nodes]
        # the first interval interpolates erf(z)/z (smooth, even) so that erf keeps full
        # relative accuracy near 0; the others erf(z) itself
        vals = np.array([math.erf(z) / z if k == 0 else math.erf(z) for z in pts])
        coef[:, k] = np.polynomial.chebyshev.chebfit(nodes, vals, _ERF_DEG)
    return coef


_ERF_COEF: list = []    # built on first use: importing fluidlite stays cheap


# -- float32 erf: two table-free pieces (coefficients fitted here, minimax by Lawson's IRLS) --
# |x| < 1:  erf(x) = x P(x^2), P of degree 6 (relative error 1.2e-9);
# |x| >= 1: erf(x) = 1 - exp(-x^2) R(x), R = erfc(x) exp(x^2) ~ p(x)/q(x) of degrees 3/4 on
#           [1, 4] (relative error 4.6e-10; beyond 4 erf is 1 in float32). Positive
#           coefficients and erfc <= 0.16 keep float32 rounding near 1e-7 absolute.
_ERF_SMALL = (1.1283791657, -0.37612625828, 0.11283585191, -0.026853813869, 0.0051883316282,
              -0.00080102305298, 7.8539904571e-05)
_ERF_SMALL_M1 = (_ERF_SMALL[0] - 1.0,) + _ERF_SMALL[1:]
_ERFCX_P = (0.99974835029, 1.0665060694, 0.51850187733, 0.11546669543)
_ERFCX_Q = (1.0, 2.1931690307, 1.998784007, 0.91843913919, 0.20468432323)


def _horner(t: np.ndarray, coef: tuple, out: np.ndarray) -> np.ndarray:
    """``sum coef[i] t^i`` into ``out`` (scalars of ``t``'s dtype: no promotion)."""
    typ = t.dtype.type
    np.multiply(t, typ(coef[-1]), out=out)      # (no fill pass: c_n t, then the loop)
    out += typ(coef[-2])
    for c in coef[-3::-1]:
        out *= t
        out += typ(c)
    return out


# elements per block of erf_fast and the float32 GELU: their float32 temporaries of a block
# stay in the cache, so the ~20-40 passes run from cache instead of memory (1.7x on 2M
# elements against no blocks). Not smaller: each pass is a NumPy call that holds the GIL while
# it dispatches, and two threads taking blocks of 64K elements waited on each other's
# dispatches -- GELU on two threads ran 0.95-1.05x its one-thread time; with 256K it ran
# 0.57-0.63x (and 0.95x on one thread). The 20-pass GELU keeps six block-sized arrays: with
# 128K elements they fit a core's 2 MB L2 (0.94-0.95x 256K's time for the saving forward on
# [1024, 1024] and [2048, 1024]; BERT-mini step 0.978 and 0.980); 512K: 1.13-1.15x.
_ERF_BLOCK = 1 << 17


def erf_fast(x: np.ndarray) -> np.ndarray:
    """erf of a float32 (or float16, computed in float32) array without table lookups: about
    40 vectorized passes (over cache-sized blocks), max absolute error ~1e-7 (under 2 float32
    ulps of 1); nan stays nan, +-inf give +-1. Use ``erf_numpy`` for float64 (1e-15).

    Example:
        >>> import numpy as np
        >>> from fluidlite.ops.activation import erf_fast
        >>> round(float(erf_fast(np.float32([0.5]))[0]), 7)    # math.erf(0.5) = 0.5204998778
        0.5204999
    """
    x = np.asarray(x)
    dt, shape = x.dtype, x.shape
    xf = x.astype(np.float32, copy=False).reshape(-1)     # 1-D: ufuncs on 0-d give scalars
    r = np.empty(xf.shape, np.float32)
    for i in range(0, xf.size, _ERF_BLOCK):
        _erf_block(xf[i:i + _ERF_BLOCK], r[i:i + _ERF_BLOCK])
    return r.astype(dt, copy=False).reshape(shape)


def _erf_block(xf: np.ndarray, out: np.ndarray) -> None:
    """``erf_fast`` of the 1-D float32 ``xf`` into ``out``."""
    f = np.float32
    a = np.abs(xf)
    t = a * a
    # x + x (P(t) - 1): the leading 1 is added last and exactly (halves the rounding error)
    small = _horner(_min_const(t, 1.0, np.empty_like(t)), _ERF_SMALL_M1, np.empty_like(t))
    a1 = _min_const(a, 1.0, np.empty_like(a))
    small *= a1
    small += a1
    ac = _min_const(a, 4.0, a)                       # nan stays nan
    num = _horner(ac, _ERFCX_P, np.empty_like(t))
    num /= _horner(ac, _ERFCX_Q, np.empty_like(t))
    _min_const(t, 16.0, t)
    np.negative(t, out=t)
    np.exp(t, out=t)
    num *= t
    np.subtract(f(1), num, out=num)                  # 1 - exp(-x^2) R(x)
    np.copysign(np.where(ac < f(1), small, num), xf, out=out)


def erf_numpy(x: np.ndarray) -> np.ndarray:
    """Vectorized erf, same dtype as ``x``: float32/float16 through ``erf_fast`` (~1e-7
    absolute), float64 (and integers, as float64) through piecewise Chebyshev interpolants
    of ``math.erf`` (max error ~1e-15)."""
    x = np.asarray(x)
    if x.dtype in (np.float32, np.float16):
        return erf_fast(x)
    dt = x.dtype if x.dtype.kind == "f" else np.dtype(np.float64)
    z = np.fmin(np.abs(x).astype(dt, copy=False), _ERF_TOP)     # nan/inf -> 6 (fixed below)
    k = np.minimum((z * (1.0 / _ERF_W)).astype(np.intp), _ERF_N - 1)
    t = (z - (k + 0.5).astype(dt) * _ERF_W) * (2.0 / _ERF_W)
    if not _ERF_COEF:
        _ERF_COEF.append(_erf_tables())
    coef = _ERF_COEF[0].astype(dt)
    t2 = t * 2.0
    b1 = coef[_ERF_DEG][k]
    b2 = np.zeros_like(t)
    for j in range(_ERF_DEG - 1, 0, -1):      # Clenshaw recurrence (a loop over degree)
        b1, b2 = coef[j][k] + t2 * b1 - b2, b1
    r = coef[0][k] + t * b1 - b2
    r = np.where(k == 0, r * z, r)
    r = np.where(z >= _ERF_TOP, dt.type(1), r)
    r = np.copysign(r, x).astype(dt, copy=False)
    return np.where(np.isnan(x), x, r).astype(dt, copy=False)


# always our own erf (never scipy's, even when installed): the same bits on every machine
_erf = erf_numpy


_SOFTMAX_CLIP = -64.0      # fluid's ValueClip: shifted logits below -64 count as -64


def fluid_softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """fluid 1.8's SoftmaxFunctor along ``axis`` (a fresh array): the logits shifted by their
    max are clipped at -64 (``ValueClip``: no probability below e^-64 of the largest, so
    -log(p) stays below ~64 + log(classes) and gradients stay finite), exponentiated, and
    multiplied by the reciprocal of their sum."""
    if axis in (-1, x.ndim - 1) and x.size > x.shape[-1] > 0 and _big(x):   # rows: 2 parts
        rows = x.reshape(-1, x.shape[-1])
        out = np.empty(rows.shape, x.dtype)
        threads.parallel_ranges(lambda lo, hi: _softmax_into(rows[lo:hi], -1, out[lo:hi]),
                                rows.shape[0])
        return out.reshape(x.shape)
    return _softmax_into(x, axis, None)


def row_sums(a: np.ndarray, axis: int, b: Optional[np.ndarray] = None) -> np.ndarray:
    """sum(a) -- or sum(a * b) -- over ``axis``, keeping it (size 1). Over the last axis of
    float32/float64 arrays through einsum's sum-of-products loop: 2-2.5x NumPy's pairwise row
    sum on rows of 128-1024 elements, and a product is summed without being made; each row is
    summed on its own, so a block of rows gives the whole's bits."""
    if axis in (-1, a.ndim - 1) and a.dtype in (np.float32, np.float64) and a.ndim >= 1 \
            and (b is None or (b.dtype == a.dtype and b.shape == a.shape)):
        s = np.einsum("...i->...", a) if b is None else np.einsum("...i,...i->...", a, b)
        return np.asarray(s)[..., None]
    return (a if b is None else a * b).sum(axis=axis, keepdims=True)


def _softmax_into(x: np.ndarray, axis: int, out: Optional[np.ndarray]) -> np.ndarray:
    """``fluid_softmax`` into ``out`` (a new array when None); rows are independent, so a
    block of rows gives the same bits as the whole. The row max is ``fmax``'s (0.65-0.8x
    ``max``'s time): a NaN it skips still makes its row all NaN through the sum."""
    run = x.shape[axis] if axis in (-1, x.ndim - 1) else 0      # rows of classes
    m = np.fmax.reduce(x, axis=axis, keepdims=True)
    with whole_runs(run, x.size):
        e = np.subtract(x, m, out=out)
    max_to(e, e, _SOFTMAX_CLIP)
    np.exp(e, out=e)
    r = np.reciprocal(row_sums(e, axis))
    with whole_runs(run, e.size):
        e *= r
    return e


def _sigmoid(x: np.ndarray) -> np.ndarray:
    t = np.negative(x)
    with np.errstate(over="ignore"):     # exp(-x) = inf for x << 0 gives the right limit 0
        np.exp(t, out=t)
    t += 1
    return np.reciprocal(t, out=t)


def _slope_fits(saved: Any, X: np.ndarray, dOut: Any) -> bool:
    """A slope ``forward_saving`` saved serves ``backward_saved``: it exists and X, dOut and
    it share one shape (and X and dOut one dtype); otherwise ``backward``'s own path, whose
    bits it would not give (a broadcast or another dtype's gradient)."""
    return (saved is not None and isinstance(dOut, np.ndarray) and dOut.shape == X.shape
            and dOut.dtype == X.dtype and saved.shape == X.shape)


# -- base class ---------------------------------------------------------------------------------
class _Act(OpDef):
    inputs, outputs = ("X",), ("Out",)
    extra_attrs = {"use_mkldnn": False, "use_cudnn": False}
    grad_uses = ("X",)
    grad_like = {"X": "Out"}  # every activation keeps its input's shape
    int_ok = False           # also defined on integer tensors
    f: Callable[..., np.ndarray]

    def infer(self, X, **_):
        if not self.int_ok and X.dtype not in FLOATS:
            raise ValueError(f"X must be a float tensor, but it is {convert_dtype(X.dtype)}; "
                             f"cast it first, e.g. fluid.layers.cast(x, 'float32')")
        return {"Out": X}

    def forward(self, X):
        return {"Out": self.f(X)}

    def forward_into(self, x: np.ndarray, **attrs: Any) -> None:
        """Out = f(x) written over ``x`` (a block its producer just made, still in cache: the
        plan's fused ``batch_norm`` + activation). The values of ``forward``."""
        np.copyto(x, self.forward(x, **attrs)["Out"])

    def lower(self, in_specs, attrs):
        kw = {k: attrs.get(k, d) for k, d in self.attr_defaults.items()}
        f = self.f
        return (lambda x: f(x, **kw)) if kw else f

    def second(self, c: Compose, use: Sym, p: Sym, **attrs: Any) -> Optional[Sym]:
        """Gradient of the grad op w.r.t. its X/Out input, given ``p = ddX * dOut``."""
        return None

    def double_grad(self, g, **attrs):
        """d(dOut) = <type>_grad(use, ddX);  d(use) = ddX * dOut * f'' (``second``)."""
        dd = live(g.output_grad("X@GRAD"))
        if dd is None:
            return
        fwd = self.forward_def
        c = Compose(g)
        use = fwd.grad_uses[0]
        t_dout, t_use = g.input_grad("Out@GRAD"), g.input_grad(use)
        if t_dout:
            c(g.op.type, {use: g.input(use), "Out@GRAD": dd}, t_dout, out_slot="X@GRAD",
              **attrs)
        if t_use:
            kw = {k: attrs[k] for k in fwd.attr_defaults if k in attrs}
            expr = fwd.second(c, c.var(g.input(use)), c.var(dd) * c.var(g.input("Out@GRAD")),
                              **kw)
            if expr is not None:
                expr.into(t_use)


# -- piecewise linear ------------------------------------------------------------------------
@register
class Relu(_Act):
    """Out = max(X, 0);  dX = dOut * (Out > 0)."""
    type, grad_uses, int_ok = "relu", ("Out",), True
    @staticmethod
    def f(x):
        x = np.asarray(x)
        if x.dtype.kind != "f" or x.ndim == 0:
            return np.maximum(x, 0)
        return relu_to(x, np.empty(x.shape, x.dtype))

    def backward(self, Out, dOut):
        return {"X": dOut * (Out > 0)}

    def forward_into(self, x: np.ndarray) -> None:
        relu_to(x, x)

    def lower(self, in_specs, attrs):
        """``max(x, 0)`` of a float input: small ones with a 0-d zero of its dtype (NumPy
        dispatches a 0-d array faster than a Python scalar; the same values), others through
        ``relu_to``, large ones in two parallel halves."""
        zero = _float_zero(in_specs[0])
        if zero is None:
            return super().lower(in_specs, attrs)
        maximum, small = np.maximum, _RELU_CHUNKED_MIN

        def relu(x: np.ndarray) -> np.ndarray:
            if x.size < small:
                return maximum(x, zero)
            return _relu_into(x) if _big(x) else relu_to(x, np.empty(x.shape, x.dtype))
        return relu

    def lower_grad(self, in_specs, attrs, wanted):
        """``backward`` with the same 0-d zero (a float ``Out``)."""
        zero = _float_zero(in_specs[0])
        if zero is None or wanted != {"X"}:
            return None
        greater = np.greater
        return lambda Out, dOut: {"X": _relu_grad_into(Out, dOut, zero) if _big(Out, dOut)
                                  else dOut * greater(Out, zero)}


def _float_zero(spec: Any) -> Optional[np.ndarray]:
    """A read-only 0-d zero of ``spec``'s float dtype (None when unknown or not float)."""
    if spec is None or spec.dtype not in FLOATS:
        return None
    zero = np.zeros((), to_numpy_dtype(spec.dtype))
    zero.flags.writeable = False
    return zero


@register
class LeakyRelu(_Act):
    """Out = max(X, alpha * X) (fluid 1.8's functor; X where X > 0 else alpha X for alpha <=
    1);  dX = dOut * (1 if X >= 0 else alpha) (fluid's: the kink at 0 passes dOut)."""
    type = "leaky_relu"

    @staticmethod
    def f(x, alpha=0.02):
        return np.maximum(x, x * x.dtype.type(alpha))

    def forward(self, X, *, alpha=0.02):
        return {"Out": self.f(X, alpha)}

    def backward(self, X, dOut, *, alpha=0.02):
        return {"X": np.where(X >= 0, dOut, dOut * dOut.dtype.type(alpha))}


@register
class Relu6(_Act):
    """Out = min(max(X, 0), threshold);  dX = dOut * (0 < Out < threshold)."""
    type, grad_uses = "relu6", ("Out",)

    @staticmethod
    def f(x, threshold=6.0):
        x = np.asarray(x)
        if x.dtype.kind != "f" or x.ndim == 0:
            return np.minimum(np.maximum(x, 0), threshold)
        return relu6_to(x, np.empty_like(x), threshold)

    def forward(self, X, *, threshold=6.0):
        return {"Out": self.f(X, threshold)}

    def forward_into(self, x: np.ndarray, *, threshold: float = 6.0) -> None:
        if x.dtype.kind != "f" or x.ndim == 0:
            super().forward_into(x, threshold=threshold)
        else:
            relu6_to(x, x, threshold)

    def backward(self, Out, dOut, *, threshold=6.0):
        mask = np.greater(Out, 0)
        mask &= np.less(Out, threshold)     # (in place: one bool array fewer, 0.8x the time)
        return {"X": dOut * mask}


@register
class HardSigmoid(_Act):
    """Out = clip(slope * X + offset, 0, 1);  dX = dOut * slope * (0 < Out < 1)."""
    type, grad_uses = "hard_sigmoid", ("Out",)

    @staticmethod
    def f(x, slope=0.2, offset=0.5):
        out = x * slope
        out += offset
        return np.clip(out, 0, 1, out=out)

    def forward(self, X, *, slope=0.2, offset=0.5):
        return {"Out": self.f(X, slope, offset)}

    def backward(self, Out, dOut, *, slope=0.2, offset=0.5):
        # a product with the mask, not a select: a NaN dOut stays NaN, as fluid's kernel
        return {"X": dOut * (((Out > 0) & (Out < 1)) * dOut.dtype.type(slope))}


# -- smooth ------------------------------------------------------------------------------------
@register
class Sigmoid(_Act):
    """Out = 1 / (1 + exp(-X));  dX = dOut * Out * (1 - Out)."""
    type, grad_uses = "sigmoid", ("Out",)
    f = staticmethod(_sigmoid)

    def backward(self, Out, dOut):
        return {"X": dOut * Out * (1 - Out)}

    def second(self, c, out, p):
        return p * (1.0 - 2.0 * out)


@register
class Tanh(_Act):
    """Out = tanh(X);  dX = dOut * (1 - Out^2)."""
    type, grad_uses = "tanh", ("Out",)
    f = staticmethod(np.tanh)

    def backward(self, Out, dOut):
        return {"X": dOut * (1 - Out * Out)}

    def second(self, c, out, p):
        return -2.0 * (p * out)


@register
class Elu(_Act):
    """Out = X if X > 0 else alpha * (exp(X) - 1);  dX = dOut * (1 if X > 0 else alpha*exp(X))."""
    type = "elu"

    @staticmethod
    def f(x, alpha=1.0):
        return np.where(x > 0, x, np.expm1(np.minimum(x, 0)) * alpha)

    def forward(self, X, *, alpha=1.0):
        return {"Out": self.f(X, alpha)}

    def backward(self, X, dOut, *, alpha=1.0):
        return {"X": np.where(X > 0, dOut, dOut * (np.exp(np.minimum(X, 0)) * alpha))}

    def second(self, c, x, p, alpha=1.0):
        # p * alpha*exp(X) * (X <= 0) == elu_grad(X, p) - relu_grad(Out=X, p)
        return (c.node("elu_grad", {"X": x, "Out@GRAD": p}, out_slot="X@GRAD", alpha=alpha)
                - c.node("relu_grad", {"Out": x, "Out@GRAD": p}, out_slot="X@GRAD"))


def _float32_blocks(fn: Any, *xs: np.ndarray, n_out: int = 1) -> Any:
    """``fn(*blocks, *out_blocks)`` over cache-sized blocks (``_ERF_BLOCK``) of the float32
    arrays ``xs`` (one shape), into ``n_out`` new arrays of that shape (a tuple when
    ``n_out`` > 1): the passes of an elementwise formula then run from cache. The blocks are
    shared by two fixed parts run as ``core.threads`` items (elementwise: the bits never
    depend on the split)."""
    flat = [np.ascontiguousarray(x).reshape(-1) for x in xs]
    outs = [np.empty(flat[0].shape, np.float32) for _ in range(n_out)]
    starts = range(0, flat[0].size, _ERF_BLOCK)

    def part(lo: int, hi: int) -> None:
        for i in starts[lo:hi]:
            fn(*(a[i:i + _ERF_BLOCK] for a in flat), *(o[i:i + _ERF_BLOCK] for o in outs))
    threads.parallel_ranges(part, len(starts))
    shaped = tuple(o.reshape(xs[0].shape) for o in outs)
    return shaped[0] if n_out == 1 else shaped


_SPLIT_MIN = 1 << 18        # elements from which relu and its gradient run in two parts
# max(x, 0) runs against chunks of a read-only array of zeros, not the scalar 0: NumPy's
# maximum has a SIMD loop for two arrays but runs a scalar loop (with its nan checks) when one
# operand is a scalar or 0-d -- 2.2-3.6x slower on float32 maps, on NumPy 1.26 and 2.4 alike;
# np.clip is fast on NumPy 2 only, and keeps the sign of -0.0 there. The same values as
# np.maximum(x, 0): nan stays nan, -0.0 gives +0.0.
_RELU_CHUNK = 1 << 18     # elements per call (1 MB of float32 zeros; erf's blocks fit)
_RELU_CHUNKED_MIN = 1 << 12     # smaller arrays: one call against the scalar (less dispatch)
_const_chunks: Dict[Any, np.ndarray] = {}
_CONST_CHUNKS_MAX = 16      # constants with a chunk (dtype and value pairs)
# NumPy 2's clip loop is SIMD (one pass, 190 us on 1.2M float32 against 306 us for maximum
# then minimum against arrays); NumPy 1's runs 500-810 us
_CLIP_FAST = int(np.__version__.split(".")[0]) >= 2
# np.clip's ufunc itself on NumPy 2: np.clip wraps it in a Python function that costs several
# microseconds a call (relu6 epilogues call it on every block)
_CLIP = np._core.umath.clip if _CLIP_FAST else np.clip


def _const_chunk(dtype: np.dtype, value: float = 0.0) -> Optional[np.ndarray]:
    """A read-only array of ``_RELU_CHUNK`` elements ``value`` (made once, shared by every
    thread): the second operand of np.maximum / np.minimum against a constant. None once
    ``_CONST_CHUNKS_MAX`` other constants have one (relu6's threshold is an attribute: the
    cache must not grow with every value a program uses)."""
    key = (np.dtype(dtype), float(value))
    z = _const_chunks.get(key)
    if z is None:
        if len(_const_chunks) >= _CONST_CHUNKS_MAX:
            return None
        z = np.full(_RELU_CHUNK, value, dtype)
        z.flags.writeable = False
        z = _const_chunks.setdefault(key, z)
    return z


def _min_const(a: np.ndarray, value: float, out: np.ndarray) -> np.ndarray:
    """``np.minimum(a, value)`` of a 1-D block into ``out``, against ``_const_chunk`` (see
    ``_RELU_CHUNK``; np.clip, the other fast way, is 3x slower on NumPy 1); the same values."""
    c = _const_chunk(a.dtype, value)
    fits = c is not None and a.size <= c.size
    return np.minimum(a, c[:a.size] if fits else a.dtype.type(value), out=out)


def _bound_to(x: np.ndarray, out: np.ndarray, fn: np.ufunc, value: float) -> np.ndarray:
    """``out[...] = fn(x, value)`` (np.maximum / np.minimum) against arrays of ``value`` (see
    ``_RELU_CHUNK``) for float arrays of one shape and dtype, each contiguous or each ``[i]``
    of the first axis contiguous (a channel block of an NCHW map); other arrays against the
    scalar (the same values). Returns ``out``."""
    z = None
    if x.size >= _RELU_CHUNKED_MIN and x.dtype == out.dtype and x.shape == out.shape \
            and x.dtype.kind == "f":
        z = _const_chunk(x.dtype, value)
    if z is None:
        return fn(x, x.dtype.type(value), out=out)
    if not (x.flags.c_contiguous and out.flags.c_contiguous):
        if x.ndim > 1 and x[0].flags.c_contiguous and out[0].flags.c_contiguous:
            if x[0].size <= _RELU_CHUNK:    # one call: the constants broadcast along axis 0
                fn(x, z[:x[0].size].reshape(x.shape[1:]), out=out)
            else:
                for i in range(x.shape[0]):
                    _bound_to(x[i], out[i], fn, value)
        else:
            fn(x, x.dtype.type(value), out=out)
        return out
    xf, of = x.reshape(-1), out.reshape(-1)
    for i in range(0, xf.size, _RELU_CHUNK):
        xs = xf[i:i + _RELU_CHUNK]
        fn(xs, z[:xs.size], out=of[i:i + _RELU_CHUNK])
    return out


def max_to(x: np.ndarray, out: np.ndarray, value: float) -> np.ndarray:
    """``out[...] = max(x, value)`` (``np.maximum``'s values: nan stays nan) for float arrays
    of one shape and dtype, each contiguous or each ``[i]`` of the first axis contiguous,
    against arrays of ``value`` (see ``_RELU_CHUNK``: 2.3-3.9x faster than against the scalar
    on softmax's clip of [4, 128, 128] and [64, 128, 128] scores); returns ``out``.

    Example:
        >>> import numpy as np
        >>> from fluidlite.ops.activation import max_to
        >>> x = np.float32([-100.0, 0.5])
        >>> max_to(x, x, -64.0).tolist()
        [-64.0, 0.5]
    """
    return _bound_to(x, out, np.maximum, value)


def relu_to(x: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``out[...] = max(x, 0)`` for float arrays of one shape and dtype (``out`` may be ``x``;
    each contiguous, or each ``[i]`` of the first axis contiguous, as a channel block of an
    NCHW map) through ``np.maximum`` against arrays of zeros (see ``_RELU_CHUNK``); returns
    ``out``. Other arrays: ``np.maximum`` with a scalar 0 (the same values).

    Args:
        x: the input.
        out: where the result goes (``x`` itself for in place).

    Example:
        >>> import numpy as np
        >>> from fluidlite.ops.activation import relu_to
        >>> x = np.linspace(-1, 1, 5, dtype=np.float32)
        >>> relu_to(x, x).tolist()
        [0.0, 0.0, 0.0, 0.5, 1.0]
    """
    return _bound_to(x, out, np.maximum, 0.0)


def relu6_to(x: np.ndarray, out: np.ndarray, threshold: float = 6.0) -> np.ndarray:
    """``out[...] = min(max(x, 0), threshold)`` (same layouts as ``relu_to``); returns
    ``out``. One ``np.clip`` pass on NumPy 2 (its SIMD loop; 0.6x the time of two passes);
    on NumPy 1, whose clip loop is 1.8-2.6x slower than that, float32 / float64 go through
    ``relu_to`` and then ``np.minimum`` against arrays of ``threshold``: the bits of NumPy 1's
    clip. Both keep nan and give equal values; a -0.0 input gives +0.0 on NumPy 1 and -0.0
    on NumPy 2 (np.clip's own behaviour there).

    Args:
        x: the input.
        out: where the result goes (``x`` itself for in place).
        threshold: the upper bound.

    Example:
        >>> import numpy as np
        >>> from fluidlite.ops.activation import relu6_to
        >>> x = np.float32([-1.0, 3.0, 7.0])
        >>> relu6_to(x, x).tolist()
        [0.0, 3.0, 6.0]
    """
    return _clip_to(x, 0.0, threshold, out)


def _clip_to(x: np.ndarray, lo: float, hi: float, out: np.ndarray) -> np.ndarray:
    """``out[...] = min(max(x, lo), hi)``; returns ``out``: np.clip on NumPy 2 (and for other
    dtypes), on NumPy 1 (whose clip is 1.8-3x slower) np.maximum and np.minimum against
    arrays of the bounds (``_bound_to``) for float32 / float64 -- the same values, nan kept."""
    if _CLIP_FAST or x.dtype not in (np.float32, np.float64):
        typ = x.dtype.type
        return _CLIP(x, typ(lo), typ(hi), out=out)
    _bound_to(x, out, np.maximum, lo)
    return _bound_to(out, out, np.minimum, hi)


def _relu_into(x: np.ndarray) -> np.ndarray:
    """max(x, 0) of a large contiguous array as two parallel halves (elementwise: the same
    bits as one pass)."""
    out = np.empty(x.shape, x.dtype)
    xf, of = x.reshape(-1), out.reshape(-1)
    threads.parallel_ranges(lambda lo, hi: relu_to(xf[lo:hi], of[lo:hi]), xf.size)
    return out


def _relu_grad_into(out_: np.ndarray, dout: np.ndarray, zero: Any) -> np.ndarray:
    """dOut * (Out > 0) of large contiguous arrays as two parallel halves."""
    res = np.empty(dout.shape, np.result_type(dout.dtype, np.bool_))
    o, d, r = out_.reshape(-1), dout.reshape(-1), res.reshape(-1)
    threads.parallel_ranges(
        lambda lo, hi: np.multiply(d[lo:hi], np.greater(o[lo:hi], zero), out=r[lo:hi]), r.size)
    return res


def _big(*xs: np.ndarray) -> bool:
    """Two threads or more, and every array contiguous, of one shape, and at least
    ``_SPLIT_MIN`` elements."""
    return xs[0].size >= _SPLIT_MIN and all(
        x.flags.c_contiguous and x.shape == xs[0].shape for x in xs) and threads.splitting()


# GELU in float32 by table. A float32's top 19 bits -- sign, exponent and the first 10 of its
# 23 mantissa bits (``_GELU_SHIFT``) -- name a bucket 2^-10 of its magnitude wide. On each
# bucket d(x) = GELU(x) - max(x, 0) = -|x| c(|x|), c(a) = 0.5 erfc(a / sqrt 2), is a line
# B x + A, and so is GELU'(x) = Phi(x) + x phi(x): the chord through the bucket's ends
# (B rounded to float32), lifted by half its sag to the function at the middle, made once in
# float64 from math.erfc and math.exp (``_gelu_table``). Then GELU = max(x, 0) + (B x + A):
# a clip, a shift, a gather and four passes, where the rational fit around NumPy's float32
# exp took ~20 passes and the exp (1.3-1.4x faster on NumPy 2.4, 1.1x on 1.23). Split so,
# the line is small wherever GELU is large (|d| <= 0.17): the result rounds once near x,
# within 2.4e-7 of float64 erf on [-12, 12] (a line for GELU itself, B x + A with B ~ 1,
# rounds twice: 6.9e-7 at x = 4.1). d keeps its relative accuracy in the negative tail
# (1.4e-5 at x = -4, 4e-5 at -6, the sag of a line on a 2^-10 bucket), where fluid's
# float32 0.5 x (1 + erf(x / sqrt 2)) loses it (4e-3 at -4, 0.6 at -5). Its only float
# operations are exact ones (a clip, IEEE products and sums): the same bits on every NumPy.
_GELU_SHIFT = 13                # mantissa bits inside a bucket (2^(32 - 13) buckets)
_GELU_TINY = 2.0 ** -30         # |x| below: d = -|x| / 2, GELU' = 0.5 + x sqrt(2 / pi)
_GELU_WIDE = 16.0               # |x| from (and +-inf, clipped to it): d = 0, GELU' = 1 or 0
_gelu_tables: Dict[bool, np.ndarray] = {}
_gelu_lock = threading.Lock()
# np.take's clip mode gathers 0.76 ns an element on NumPy 1.26 and 2.4 but 2.8 on 1.23.5,
# where indexing by the integer array takes 1.0 (the same values)
_TAKE_FAST = tuple(int(v) for v in np.__version__.split(".")[:2]) >= (1, 26)


def _gelu_table(slope: bool) -> np.ndarray:
    """[2^19, 2] float32 (B, A) per bucket of float32 bits >> ``_GELU_SHIFT``: the lines of
    d(x) (or, ``slope``, of GELU'(x)); made on first use (~15 ms) and kept (4 MiB)."""
    table = _gelu_tables.get(slope)
    if table is not None:
        return table
    with _gelu_lock:
        if slope not in _gelu_tables:
            _gelu_tables[slope] = _make_gelu_table(slope)
    return _gelu_tables[slope]


def _make_gelu_table(slope: bool) -> np.ndarray:
    half = 1 << (31 - _GELU_SHIFT)                  # buckets of one sign
    table = np.zeros((2 * half, 2), np.float32)
    lo, hi = (int(np.float32(v).view(np.uint32)) >> _GELU_SHIFT
              for v in (_GELU_TINY, _GELU_WIDE))
    k = np.arange(lo, hi + 1, dtype=np.uint32)
    ends = (k << _GELU_SHIFT).view(np.float32).astype(np.float64)     # bucket starts, + 1
    mids = ((k[:-1] << _GELU_SHIFT) | (1 << (_GELU_SHIFT - 1))).view(np.float32)
    mids = mids.astype(np.float64)
    erfc, exp = np.frompyfunc(math.erfc, 1, 1), np.frompyfunc(math.exp, 1, 1)

    def fn(a: np.ndarray, sign: float) -> np.ndarray:        # at x = sign * a, a > 0
        c = erfc(a * _SQRT_2_INV).astype(np.float64) * 0.5
        if not slope:
            return -a * c
        phi = exp(a * a * -0.5).astype(np.float64) * _SQRT_2PI_INV
        return (1.0 - c if sign > 0 else c) + sign * a * phi
    for sign, base in ((1.0, 0), (-1.0, half)):
        xe, xm, fe, fm = sign * ends, sign * mids, fn(ends, sign), fn(mids, sign)
        b = ((fe[1:] - fe[:-1]) / (xe[1:] - xe[:-1])).astype(np.float32).astype(np.float64)
        rows = table[base + lo:base + hi]
        rows[:, 0] = b
        rows[:, 1] = ((fe[:-1] - b * xe[:-1]) + (fm - b * xm)) * 0.5
        if slope:
            table[base:base + lo] = (math.sqrt(2.0 / math.pi), 0.5)
            table[base + hi:base + half, 1] = 1.0 if sign > 0 else 0.0
        else:
            table[base:base + lo, 0] = -0.5 * sign
    return table


def _gelu_lines(table: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """The rows of ``table`` at ``idx``: [n, 2] float32 (B, A)."""
    if _TAKE_FAST:
        return table.take(idx, axis=0, mode="clip")        # (idx < 2^19: nothing to clip)
    return table.view(np.uint64).reshape(-1)[idx].view(np.float32).reshape(-1, 2)


def _gelu_clipped(x: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """(xc, idx) of a float32 block: x clipped to +-``_GELU_WIDE`` (nan stays nan, +-inf
    become finite: a line's 0 * inf would be nan) and each element's bucket."""
    xc = _clip_to(x, -_GELU_WIDE, _GELU_WIDE, np.empty_like(x))
    idx = np.right_shift(xc.view(np.uint32), _GELU_SHIFT, out=np.empty(x.shape, np.intp),
                         casting="unsafe")
    return xc, idx


def _line_into(line: np.ndarray, xc: np.ndarray, out: np.ndarray) -> np.ndarray:
    """out = B xc + A."""
    np.multiply(line[:, 0], xc, out=out)
    out += line[:, 1]
    return out


def _gelu_from(x: np.ndarray, xc: np.ndarray, idx: np.ndarray, out: np.ndarray) -> None:
    """GELU(x) = max(x, 0) + d(x) into ``out`` (``xc`` is overwritten)."""
    _line_into(_gelu_lines(_gelu_table(False), idx), xc, xc)
    relu_to(x, out)
    out += xc


def _gelu_block(x: np.ndarray, out: np.ndarray) -> None:
    """GELU(x) of a float32 block (see ``_GELU_SHIFT``)."""
    xc, idx = _gelu_clipped(x)
    _gelu_from(x, xc, idx, out)


def _gelu_grad_block(x: np.ndarray, dout: np.ndarray, out: np.ndarray) -> None:
    """dOut GELU'(x) of a float32 block."""
    xc, idx = _gelu_clipped(x)
    _line_into(_gelu_lines(_gelu_table(True), idx), xc, out)
    out *= dout


def _gelu_saving_block(x: np.ndarray, out: np.ndarray, slope: np.ndarray) -> None:
    """GELU(x) and GELU'(x) of a float32 block from one clip and bucket index: the bits of
    ``_gelu_block`` and of ``_gelu_grad_block``'s slope."""
    xc, idx = _gelu_clipped(x)
    _line_into(_gelu_lines(_gelu_table(True), idx), xc, slope)
    _gelu_from(x, xc, idx, out)


def gelu_to(x: np.ndarray, out: np.ndarray, approximate: bool = False) -> np.ndarray:
    """out = GELU(x) (``out`` may be ``x``) with the ``gelu`` op's bits, on the calling thread:
    for a GEMM epilogue that applies it to each block of a product while the block is in
    cache (``fc``'s ``gelu_erf``). A contiguous float32 block goes through the table in
    ``_ERF_BLOCK`` pieces; other blocks are made whole by the op's formula and copied."""
    if approximate or x.dtype != np.float32 or not (x.flags.c_contiguous
                                                     and out.flags.c_contiguous):
        np.copyto(out, Gelu.f(x, approximate))
        return out
    xf, of = x.reshape(-1), out.reshape(-1)
    for i in range(0, xf.size, _ERF_BLOCK):
        _gelu_block(xf[i:i + _ERF_BLOCK], of[i:i + _ERF_BLOCK])
    return out


@register
class Gelu(_Act):
    """Out = 0.5 X (1 + erf(X / sqrt 2)) (approximate: 0.5 X (1 + tanh(k (X + 0.044715 X^3))),
    k = sqrt(2/pi));  dX = dOut * (Phi(X) + X phi(X)) (or the tanh form's derivative)."""
    type = "gelu"

    @staticmethod
    def f(x, approximate=False):
        if approximate:
            u = np.tanh((x + x * x * x * _GELU_A) * _GELU_K)
            u += 1
            return u * x * 0.5
        if x.dtype == np.float32:
            return _float32_blocks(_gelu_block, x)
        typ = x.dtype.type
        e = _erf(x * typ(_SQRT_2_INV)).astype(x.dtype, copy=False)
        e += typ(1)
        e *= x
        e *= typ(0.5)
        return e

    def forward(self, X, *, approximate=False):
        return {"Out": self.f(X, approximate)}

    saves_for_grad = True

    def forward_saving(self, X, *, approximate=False):
        """``forward``'s Out and the slope S = GELU'(X), made from the erf (or tanh) and the
        exp the forward evaluates anyway, so that ``backward_saved`` is one multiply: the
        operations of ``forward`` and ``backward``, so their bits."""
        if approximate:
            x2 = X * X
            t = np.tanh((X + x2 * X * _GELU_A) * _GELU_K)
            u = t + 1
            du = (x2 * (3.0 * _GELU_A) + 1) * _GELU_K
            return {"Out": u * X * 0.5}, u * 0.5 + X * (1 - t * t) * du * 0.5
        if X.dtype == np.float32:
            out, slope = _float32_blocks(_gelu_saving_block, X, n_out=2)
            return {"Out": out}, slope
        typ = X.dtype.type
        e = _erf(X * typ(_SQRT_2_INV)).astype(X.dtype, copy=False)
        slope = e * typ(0.5)                   # backward's Phi(X) + X phi(X)
        slope += typ(0.5)
        pdf = np.multiply(X, X, out=np.empty_like(X))
        pdf *= typ(-0.5)
        np.exp(pdf, out=pdf)
        pdf *= X
        pdf *= typ(_SQRT_2PI_INV)
        slope += pdf
        e += typ(1)                            # forward's 0.5 X (1 + erf)
        e *= X
        e *= typ(0.5)
        return {"Out": e}, slope

    def backward_saved(self, saved, X, dOut, *, approximate=False):
        """dX = dOut * S, S the slope ``forward_saving`` made (written over: the plan hands
        it to this op alone); ``backward`` where that rule would take another path (a
        gradient of another dtype or shape)."""
        if not _slope_fits(saved, X, dOut):
            return self.backward(X, dOut, approximate=approximate)
        return {"X": np.multiply(saved, dOut, out=saved)}

    def backward(self, X, dOut, *, approximate=False):
        if approximate:
            x2 = X * X
            t = np.tanh((X + x2 * X * _GELU_A) * _GELU_K)
            du = (x2 * (3.0 * _GELU_A) + 1) * _GELU_K
            d = (t + 1) * 0.5 + X * (1 - t * t) * du * 0.5
        elif X.dtype == np.float32 and dOut.dtype == np.float32 and dOut.shape == X.shape:
            return {"X": _float32_blocks(_gelu_grad_block, X, dOut)}
        else:
            typ = X.dtype.type
            d = _erf(X * typ(_SQRT_2_INV)).astype(X.dtype, copy=False)   # Phi(X) = ...
            d *= typ(0.5)
            d += typ(0.5)
            pdf = np.multiply(X, X, out=np.empty_like(X))           # ... + X phi(X)
            pdf *= typ(-0.5)
            np.exp(pdf, out=pdf)
            pdf *= X
            pdf *= typ(_SQRT_2PI_INV)
            d += pdf
            d *= dOut
            return {"X": d}
        return {"X": dOut * d}

    def second(self, c, x, p, approximate=False):
        x2 = x.apply("square")
        if not approximate:       # f'' = phi(X) (2 - X^2)
            return p * ((x2 * -0.5).apply("exp") * (2.0 - x2)) * _SQRT_2PI_INV
        # u = k (X + a X^3), t = tanh(u): f'' = (1 - t^2) (u' - X t u'^2 + 0.5 X u'')
        t = ((x + _GELU_A * (x2 * x)) * _GELU_K).apply("tanh")
        du = (3.0 * _GELU_A * _GELU_K) * x2 + _GELU_K
        ddu_half_x = (3.0 * _GELU_A * _GELU_K) * x2          # 0.5 * X * u''
        return p * ((1.0 - t * t) * (du - x * t * du * du + ddu_half_x))


@register
class Softplus(_Act):
    """Out = ln(1 + exp(X));  dX = dOut * sigmoid(X)."""
    type = "softplus"
    f = staticmethod(lambda x: np.logaddexp(0, x))

    def backward(self, X, dOut):
        return {"X": dOut * _sigmoid(X)}

    def second(self, c, x, p):
        return c.node("sigmoid_grad", {"Out": x.apply("sigmoid"), "Out@GRAD": p},
                      out_slot="X@GRAD")


@register
class LogSigmoid(_Act):
    """Out = ln(sigmoid(X)) = -softplus(-X);  dX = dOut * sigmoid(-X)."""
    type = "logsigmoid"
    f = staticmethod(lambda x: -np.logaddexp(0, -x))

    def backward(self, X, dOut):
        return {"X": dOut * _sigmoid(-X)}

    def second(self, c, x, p):
        return c.node("sigmoid_grad", {"Out": x.apply("sigmoid"), "Out@GRAD": -p},
                      out_slot="X@GRAD")


@register
class Softsign(_Act):
    """Out = X / (1 + |X|);  dX = dOut / (1 + |X|)^2."""
    type = "softsign"

    @staticmethod
    def f(x):
        d = np.abs(x)
        d += 1
        return np.divide(x, d, out=d)

    def backward(self, X, dOut):
        d = np.abs(X)
        d += 1
        return {"X": dOut / (d * d)}

    def second(self, c, x, p):
        a = x.apply("abs") + 1.0
        return -2.0 * (p * x.apply("sign")) / (a * a * a)


@register
class Swish(_Act):
    """Out = X * sigmoid(beta X);  dX = dOut * (s + beta X s (1 - s)), s = sigmoid(beta X)."""
    type = "swish"

    @staticmethod
    def f(x, beta=1.0):
        return x * _sigmoid(x * beta)

    def forward(self, X, *, beta=1.0):
        return {"Out": self.f(X, beta)}

    def backward(self, X, dOut, *, beta=1.0):
        s = _sigmoid(X * beta)
        return {"X": dOut * (s + X * s * (1 - s) * beta)}

    saves_for_grad = True

    def forward_saving(self, X, *, beta=1.0):
        """``forward``'s Out and the slope ``backward`` multiplies dOut by, from one sigmoid
        (the operations of ``forward`` and ``backward``, so their bits)."""
        s = _sigmoid(X * beta)
        return {"Out": X * s}, s + X * s * (1 - s) * beta

    def backward_saved(self, saved, X, dOut, *, beta=1.0):
        """dX = dOut * slope (``forward_saving``'s); ``backward`` for a gradient of another
        shape or dtype."""
        if not _slope_fits(saved, X, dOut):
            return self.backward(X, dOut, beta=beta)
        return {"X": np.multiply(dOut, saved, out=saved)}

    def second(self, c, x, p, beta=1.0):
        # f'' = beta s (1 - s) (2 + beta X (1 - 2 s))
        s = (x * beta).apply("sigmoid")
        return p * (beta * (s * (1.0 - s)) * (2.0 + beta * (x * (1.0 - 2.0 * s))))


def _softmax_grad_into(out_: np.ndarray, dout: np.ndarray, axis: int,
                       dx: Optional[np.ndarray]) -> np.ndarray:
    """(dOut - sum(dOut * Out, axis)) * Out, into ``dx`` when given."""
    s = row_sums(dout, axis, out_)
    with whole_runs(dout.shape[axis] if axis in (-1, dout.ndim - 1) else 0, dout.size):
        dx = np.subtract(dout, s, out=dx)
    dx *= out_
    return dx


@register
class Softmax(_Act):
    """Out = exp(max(X - max, -64)) / sum(...) along ``axis`` (fluid's SoftmaxFunctor with its
    ``ValueClip`` at -64); dX = (dOut - sum(dOut * Out, axis)) * Out."""
    type, grad_uses = "softmax", ("Out",)
    extra_attrs = {"use_mkldnn": False, "use_cudnn": False, "data_format": "AnyLayout",
                   "is_test": False}

    f = staticmethod(fluid_softmax)

    def infer(self, X, *, axis=-1):
        if not -len(X.shape) <= axis < max(len(X.shape), 1):
            n = max(len(X.shape), 1)
            raise ValueError(f"softmax: axis {axis} is out of range for input of rank "
                             f"{len(X.shape)} (valid: {-len(X.shape)}..{n - 1}); use -1 for the "
                             f"last dim")
        return super().infer(X)

    def forward(self, X, *, axis=-1):
        return {"Out": self.f(X, axis)}

    def backward(self, Out, dOut, *, axis=-1):
        if axis in (-1, Out.ndim - 1) and Out.size > Out.shape[-1] > 0 and _big(Out, dOut) \
                and Out.dtype == dOut.dtype:
            o, d = Out.reshape(-1, Out.shape[-1]), dOut.reshape(-1, Out.shape[-1])
            dx = np.empty(o.shape, Out.dtype)
            # rows are independent: the same bits as one pass
            threads.parallel_ranges(
                lambda lo, hi: _softmax_grad_into(o[lo:hi], d[lo:hi], -1, dx[lo:hi]),
                o.shape[0])
            return {"X": dx.reshape(Out.shape)}
        return {"X": _softmax_grad_into(Out, dOut, axis, None)}

    def second(self, c, out, p, axis=-1):
        """d(Out) = ddX * (dOut - S(dOut*Out)) - dOut * S(ddX*Out), S = broadcast sum on axis.
        S(v) = v - softmax_grad(Out=1, v): with Out = 1 the grad kernel is v - sum(v)."""
        g = c.g
        dd, dout = c.var(g.output_grad("X@GRAD")), c.var(g.input("Out@GRAD"))
        ones = c.node("fill_any_like", {"X": out}, value=1.0)

        def bsum(v: Sym) -> Sym:
            return v - c.node("softmax_grad", {"Out": ones, "Out@GRAD": v}, out_slot="X@GRAD",
                              axis=axis)

        return dd * (dout - bsum(dout * out)) - dout * bsum(dd * out)
