"""Normalization ops: ``batch_norm``, ``layer_norm`` and ``norm`` (behind ``l2_normalize``).

Their extra outputs (running statistics, saved mean / inverse std, norms) carry no gradient, so
each op emits its grad op by hand (fluid's grad makers do the same) instead of asking for
gradients of every output. The grad kernels return a lazy mapping (``LazyOutputs``): a
gradient the program does not bind is never computed.

Training-mode ``batch_norm`` and its gradient on big NCHW maps run over cache-sized blocks of
channels, and on maps of at least ``_BN_PARALLEL_MIN`` elements, when two threads or more
are set, as ``_PARTS`` fixed halves of the channels on ``core.threads``' pool
(``_channel_parts``): the parts never depend on the thread count, so neither do the results
(bit for bit); they are the one-pass kernels' formulas, with einsum free to order a part's
sums its own way. Per-channel vectors broadcast over maps of short channel runs repeated over
the run (``_bc``). layer_norm's rows split the same way from ``_LN_PARALLEL_MIN`` elements
(row-wise: the one-pass bits).
"""
from __future__ import annotations

import functools
import math
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple, Union

import numpy as np

from ..core import threads
from ..core.registry import Binding, OpDef, VarSpec, get_op_def, register
from .activation import row_sums
from .broadcast import channel_run, channel_vector, whole_runs
from .conv import LazyOutputs
from .tensor import norm_axis


def _layout_axes(op: str, ndim: int, data_layout: str) -> Tuple[int, Tuple[int, ...]]:
    """(channel axis, reduction axes) for a batch_norm input of rank ``ndim``."""
    if ndim < 2:
        raise ValueError(f"{op}: X must have rank >= 2 (N, C, ...), got rank {ndim}")
    if data_layout in ("NCHW", "AnyLayout"):
        ch = 1
    elif data_layout == "NHWC":
        ch = ndim - 1
    else:
        raise ValueError(f"{op}: data_layout must be 'NCHW' or 'NHWC', got {data_layout!r}")
    return ch, tuple(a for a in range(ndim) if a != ch)


def _bshape(ndim: int, ch: int, c: int) -> Tuple[int, ...]:
    return tuple(c if a == ch else 1 for a in range(ndim))


def _bc(v: np.ndarray, X: np.ndarray, ch: int) -> np.ndarray:
    """The per-channel vector ``v`` shaped to broadcast against ``X`` (``channel_vector``:
    repeated over short channel runs, so that NumPy loops over whole rows)."""
    return channel_vector(v, X.shape, ch)


def _per_channel(a: np.ndarray, ch: int) -> np.ndarray:
    """``a`` as [outer, C, inner] (channel axis ``ch``; a view when ``a`` is contiguous)."""
    outer, inner = math.prod(a.shape[:ch]), math.prod(a.shape[ch + 1:])   # (not np.prod: 4 us)
    return a.reshape(outer, a.shape[ch], inner)


def _channel_sum(a: np.ndarray, ch: int, b: Any = None, mean: bool = False) -> np.ndarray:
    """sum(a) -- or sum(a * b) -- over every axis but ``ch`` (the mean with ``mean``), in a's
    dtype. float32/float64 go through einsum's sum-of-products loop: one pass and no
    temporary, where a multi-axis ``sum`` of a product walks NCHW's strided channel slices
    and allocates the product (4x slower on a MobileNetV2 map); other dtypes take NumPy's
    reductions (a float16 mean accumulates in float32)."""
    if a.dtype not in (np.float32, np.float64) or (b is not None and b.dtype != a.dtype):
        axes = tuple(i for i in range(a.ndim) if i != ch)
        prod = a if b is None else a * b
        return prod.mean(axis=axes) if mean else prod.sum(axis=axes)
    if b is None:
        out = np.einsum("nci->c", _per_channel(a, ch))
    else:
        out = np.einsum("nci,nci->c", _per_channel(a, ch), _per_channel(b, ch))
    if mean:
        out /= a.dtype.type(a.size // max(a.shape[ch], 1))     # (0 / 0 = NaN on an empty batch)
    return out


# -- batch_norm ---------------------------------------------------------------------------------
_PARTS = 2                  # fixed channel parts (never the thread count: results stay put)
_BN_PARALLEL_MIN = 1 << 19  # elements from which batch norm's parts are worth a thread each
                            # (under it one pass took 0.6-0.9x the time of
                            # two parallel halves: a [32, 512, 4, 4] map, a [8, 960, 7, 7] one)


_BLOCK_BYTES = 4 << 20      # a block of channels' share of X on big maps (``_channel_parts``)

# what a fused activation does to batch_norm's Y (a block of it, in place): see ``forward_then``
Epilogue = Optional[Callable[[np.ndarray], None]]
# dY of batch_norm_grad: an array, or ``f(lo, hi)`` giving its channels lo:hi of an NCHW map
# (``f(None, None)``: all of it) -- a fused activation gradient made block by block
GradSource = Union[np.ndarray, Callable[[Optional[int], Optional[int]], np.ndarray]]


def _channel_parts(X: np.ndarray, ch: int, blocks_from: int
                   ) -> Optional[List[Tuple[int, int]]]:
    """The channel parts of a training-mode batch norm of ``X``, or None for one pass. An
    NCHW float32/float64 ``X`` of at least ``blocks_from`` bytes runs as blocks of channels
    of about ``_BLOCK_BYTES``, so that after the first pass over a block the others find it in
    cache (the gradient's six passes over MobileNetV2's 38 MB maps: 0.66-0.83x the time);
    otherwise, with two threads or more, as ``_PARTS`` halves. The blocks depend on the shape
    alone, never on the thread count (they run on the pool when there is one)."""
    if ch != 1 or X.ndim < 3 or X.dtype not in (np.float32, np.float64):
        return None
    C = X.shape[1]
    if X.nbytes >= blocks_from:
        cb = max(1, _BLOCK_BYTES // max(X.nbytes // C, 1))
        if cb < C:          # an even count of equal blocks (the threads share them)
            return threads.even_ranges(C, cb)
    if X.size < _BN_PARALLEL_MIN or C < _PARTS or not threads.splitting():
        return None
    return [(C * i // _PARTS, C * (i + 1) // _PARTS) for i in range(_PARTS)]


def _bn_train(X: np.ndarray, Scale: np.ndarray, Bias: np.ndarray, eps: float,
              y: Optional[np.ndarray], ch: int, keep: bool = False,
              xc_out: Optional[np.ndarray] = None) -> Tuple[Any, ...]:
    """Training batch norm of ``X``: (mu, var, inv_std, Y, Xc), Y into ``y`` when given (else
    into the centred copy of X: one batch-sized array fewer), Xc = X - mu (into ``xc_out``
    when given) when ``keep`` or ``xc_out``, else None -- Y is then never made in its
    place."""
    run = channel_run(X.shape, ch)
    keep = keep or xc_out is not None
    mu = _channel_sum(X, ch, mean=True)
    with whole_runs(run, X.size):
        xc = X - _bc(mu, X, ch) if xc_out is None else \
            np.subtract(X, _bc(mu, X, ch), out=xc_out)
    var = _channel_sum(xc, ch, xc, mean=True)
    inv_std = 1.0 / np.sqrt(var + eps)
    a = _bc(Scale * inv_std, X, ch)
    with whole_runs(run, X.size):
        if y is None:
            y = np.multiply(xc, a, out=xc) if xc.dtype == np.result_type(xc, a) and not keep \
                else xc * a
        else:
            np.multiply(xc, a, out=y)
        y += _bc(Bias, X, ch)
    return mu, var, inv_std, y, (xc if keep else None)


class CentredBlocks(NamedTuple):
    """X - mean as a training batch norm's channel parts made it (``_channel_parts``), for
    its gradient: ``blocks[i]`` is the contiguous [N, hi - lo, ...] part ``parts[i]`` of the
    map of ``shape`` -- the layout in which the gradient's parts centre X themselves, so that
    their channel sums add in the same order (the same bits)."""
    parts: List[Tuple[int, int]]
    blocks: List[np.ndarray]
    shape: Tuple[int, ...]


def _bn_train_parts(X: np.ndarray, Scale: np.ndarray, Bias: np.ndarray, eps: float,
                    parts: List[Tuple[int, int]], then: Epilogue = None,
                    residual: Optional[np.ndarray] = None, keep: bool = False
                    ) -> Tuple[Any, ...]:
    """``_bn_train`` over the channel ``parts`` in parallel: (y, mu, var, inv_std, Xc or
    None); the ``residual``'s part is added to each part of y, then ``then`` applied to it,
    right after it is made (while it is in cache). With ``keep`` each part's X - mu is kept
    (``CentredBlocks``, the parts one batch-sized buffer), else None."""
    y = np.empty(X.shape, X.dtype)
    xc = None
    if keep:
        buf, per = np.empty(X.size, X.dtype), X.size // max(X.shape[1], 1)
        xc = CentredBlocks(parts, [buf[lo * per:hi * per].reshape(
            (X.shape[0], hi - lo) + X.shape[2:]) for lo, hi in parts], X.shape)
    stats: List[Any] = [None] * len(parts)

    def one(i: int) -> None:
        lo, hi = parts[i]
        stats[i] = _bn_train(X[:, lo:hi], Scale[lo:hi], Bias[lo:hi], eps, y[:, lo:hi], 1,
                             xc_out=None if xc is None else xc.blocks[i])[:3]
        if residual is not None:
            np.add(y[:, lo:hi], residual[:, lo:hi], out=y[:, lo:hi])
        if then is not None:
            then(y[:, lo:hi])
    threads.parallel(one, len(parts))
    mu, var, inv_std = (np.concatenate([st[k] for st in stats]) for k in range(3))
    return y, mu, var, inv_std, xc


def _bn_centred(X: np.ndarray, mean: np.ndarray, ch: int) -> np.ndarray:
    """X - mean (per channel): batch_norm_grad's centred X, a new array."""
    with whole_runs(channel_run(X.shape, ch), X.size):
        return X - _bc(mean, X, ch)


def _bn_dx(dY: np.ndarray, xc: np.ndarray, Scale: np.ndarray, inv_std: np.ndarray,
           ds: np.ndarray, db: np.ndarray, m: int, ch: int, out: Optional[np.ndarray] = None
           ) -> np.ndarray:
    """dX = k dY - (k ds inv_std / M) xc - k db / M, k = Scale inv_std (the batch-statistics
    gradient k (dY - db/M - xh ds/M) with xh = xc inv_std folded into per-channel factors:
    four passes over the map where scaling xh first took five). ``xc`` (``_bn_centred``) is
    overwritten; into ``out`` when given, else into a new array of dY's dtype (a float16
    map's gradient stays float16 when its statistics are float32)."""
    inv_m = 1.0 / m
    k = Scale * inv_std
    a, b = _bc(k * ds * inv_std * inv_m, xc, ch), _bc(k * db * inv_m, xc, ch)
    with whole_runs(channel_run(xc.shape, ch), xc.size):
        dx = np.multiply(dY, _bc(k, xc, ch),
                         out=np.empty(dY.shape, dY.dtype) if out is None else out)
        xc = np.multiply(xc, a, out=xc) if xc.dtype == np.result_type(xc, a) else xc * a
        dx -= xc
        dx -= b
    return dx


def _bn_grad_part(X: np.ndarray, Scale: np.ndarray, mean: np.ndarray, inv_std: np.ndarray,
                  dY: np.ndarray, dx: Optional[np.ndarray], m: int, centred: bool = False
                  ) -> Tuple[np.ndarray, np.ndarray]:
    """The batch-statistics gradient of channels of an NCHW map: (dScale, dBias), dX into
    ``dx`` (when given) -- the arithmetic of ``BatchNormGrad``'s lazy kernels (``centred``:
    ``X`` is X - mean already, and is written over)."""
    xc = X if centred else _bn_centred(X, mean, 1)
    db, ds = _channel_sum(dY, 1), _channel_sum(dY, 1, xc) * inv_std
    if dx is not None:
        _bn_dx(dY, xc, Scale, inv_std, ds, db, m, 1, dx)
    return ds, db


@register
class BatchNorm(OpDef):
    """Train: mu, var = batch mean / biased variance over all axes but the channel axis;
    Y = (X - mu) / sqrt(var + eps) * Scale + Bias; MeanOut = Mean*m + mu*(1-m), VarianceOut =
    Variance*m + var*(1-m); SavedMean = mu, SavedVariance = 1/sqrt(var + eps).
    Test (is_test, unless trainable_statistics) or use_global_stats: the running Mean/Variance
    replace mu/var and the running statistics are passed through unchanged. ``m`` comes from
    the 1-element ``MomentumTensor`` when given (fluid 1.8's ``momentum=Variable``)."""
    type = "batch_norm"
    inputs = ("X", "Scale", "Bias", "Mean", "Variance", "MomentumTensor?")
    outputs = ("Y", "MeanOut", "VarianceOut", "SavedMean", "SavedVariance")
    extra_attrs = {"use_mkldnn": False, "fuse_with_relu": False, "use_cudnn": False}

    def infer(self, X, Scale, Bias, Mean, Variance, MomentumTensor=None, *,
              data_layout="NCHW"):
        ch, _ = _layout_axes(self.type, X.ndim, data_layout)
        c = X.shape[ch]
        for name, spec in (("Scale", Scale), ("Bias", Bias), ("Mean", Mean),
                           ("Variance", Variance)):
            if spec.ndim != 1 or (c >= 0 and spec.shape[0] != c):
                raise ValueError(f"batch_norm: {name} must have shape [{c}] (the channel count "
                                 f"of X {list(X.shape)} with data_layout={data_layout!r}), got "
                                 f"{list(spec.shape)}")
        stat = VarSpec((c,), X.dtype)
        return {"Y": X, "MeanOut": stat, "VarianceOut": stat, "SavedMean": stat,
                "SavedVariance": stat}

    def forward(self, X, Scale, Bias, Mean, Variance, MomentumTensor=None, *, momentum=0.9,
                epsilon=1e-5, is_test=False, data_layout="NCHW", use_global_stats=False,
                trainable_statistics=False):
        return self.forward_then(None, X, Scale, Bias, Mean, Variance, MomentumTensor,
                                 momentum=momentum, epsilon=epsilon, is_test=is_test,
                                 data_layout=data_layout, use_global_stats=use_global_stats,
                                 trainable_statistics=trainable_statistics)

    def forward_then(self, then: Epilogue, X, Scale, Bias, Mean, Variance,
                     MomentumTensor=None, momentum=0.9, epsilon=1e-5, is_test=False,
                     data_layout="NCHW", use_global_stats=False,
                     trainable_statistics=False, residual=None, centred=False
                     ) -> Dict[str, Any]:
        """``forward``, with ``then(block)`` applied in place to Y as it is made: to each
        channel block right after it is normalized when the kernel runs in blocks (the block
        is still in cache), else to all of Y. ``residual`` (an array of Y's shape and dtype)
        is added to each block first. The plan's fused ``batch_norm`` [+ ``elementwise_add``]
        + activation (``executor/fusion``): the same values as the ops, one or two passes over
        memory fewer. ``centred``: the output ``Centred`` is also X - SavedMean, which this
        kernel makes anyway and ``batch_norm_grad`` would make again (its ``centred``)."""
        ch, _ = _layout_axes(self.type, X.ndim, data_layout)
        bs = _bshape(X.ndim, ch, X.shape[ch])
        eps = float(epsilon)
        if residual is not None and (residual.shape != X.shape or residual.dtype != X.dtype):
            raise ValueError(f"batch_norm: a fused residual must have Y's shape {list(X.shape)} "
                             f"and dtype {X.dtype}, got {list(residual.shape)} "
                             f"{residual.dtype}")
        if use_global_stats or (is_test and not trainable_statistics):
            inv_std = 1.0 / np.sqrt(Variance + eps)
            a = (Scale * inv_std).reshape(bs)
            with whole_runs(channel_run(X.shape, ch), X.size):
                y = (X * a + (Bias - Mean * Scale * inv_std).reshape(bs)).astype(X.dtype,
                                                                                    copy=False)
            if residual is not None:
                np.add(y, residual, out=y)
            if then is not None:
                then(y)
            out = {"Y": y, "MeanOut": Mean, "VarianceOut": Variance, "SavedMean": Mean,
                   "SavedVariance": inv_std.astype(X.dtype, copy=False)}
            if centred:
                out["Centred"] = _bn_centred(X, Mean, ch)
            return out
        # (the forward's three passes gain less from blocks: only on maps of 24 MB and more --
        # but a forward keeping X - mean for its gradient cuts the map as the gradient does)
        parts = _channel_parts(X, ch, (2 if centred else 6) * _BLOCK_BYTES)
        if parts is None:
            mu, var, inv_std, y, xc = _bn_train(X, Scale, Bias, eps, None, ch, centred)
            if residual is not None:
                np.add(y, residual, out=y)
            if then is not None:
                then(y)
        else:
            y, mu, var, inv_std, xc = _bn_train_parts(X, Scale, Bias, eps, parts, then,
                                                      residual, centred)
        m = float(momentum if MomentumTensor is None else MomentumTensor.reshape(-1)[0])
        out = {"Y": y, "MeanOut": Mean * m + mu * (1.0 - m),
               "VarianceOut": Variance * m + var * (1.0 - m),
               "SavedMean": mu, "SavedVariance": inv_std.astype(X.dtype, copy=False)}
        if centred:
            out["Centred"] = xc
        return out

    def make_grad(self, g, **attrs):
        g.append("batch_norm_grad",
                 {"X": g.input("X"), "Scale": g.input("Scale"), "SavedMean": g.output("SavedMean"),
                  "SavedVariance": g.output("SavedVariance"), "Y@GRAD": g.output_grad("Y")},
                 {"X@GRAD": g.input_grad("X"), "Scale@GRAD": g.input_grad("Scale"),
                  "Bias@GRAD": g.input_grad("Bias")}, attrs)


@register
class BatchNormGrad(OpDef):
    """Batch statistics: xh = (X - SavedMean) * SavedVariance, dBias = sum(dY),
    dScale = sum(dY * xh), dX = Scale * SavedVariance * (dY - dBias/M - xh * dScale/M)
    (M = elements per channel). Global statistics: dX = dY * Scale * SavedVariance."""
    type = "batch_norm_grad"
    inputs = ("X", "Scale", "SavedMean", "SavedVariance", "Y@GRAD")
    outputs = ("X@GRAD?", "Scale@GRAD?", "Bias@GRAD?")
    no_grad = True
    extra_attrs = BatchNorm.extra_attrs

    def infer(self, *specs, **attrs):
        return {}

    def bind(self, in_specs, attrs, outputs_present):
        """``forward`` told which gradients the program writes (``wanted``)."""
        kw = self.kernel_attrs(attrs)
        return Binding(functools.partial(self.forward, wanted=frozenset(outputs_present), **kw),
                       False)

    def forward(self, X, Scale, SavedMean, SavedVariance, dY: GradSource, wanted=None,
                centred=False, *, momentum=0.9, epsilon=1e-5, is_test=False,
                data_layout="NCHW", use_global_stats=False, trainable_statistics=False):
        """The gradients (lazily, see the module docstring). ``dY`` may be a function of a
        channel range (``GradSource``): the plan's fused activation gradient + batch_norm_grad
        (``executor/fusion``) makes each channel block of dY right before this kernel reads
        it, in cache, instead of writing all of dY to memory first. ``centred``: ``X`` is
        X - SavedMean already (the forward's ``Centred``, a value of the plan alone that this
        kernel writes over: an array, or ``CentredBlocks`` when the forward ran in channel
        parts -- those this kernel cuts the map into), so it is not made again."""
        if isinstance(X, CentredBlocks):
            return self._parts(X.blocks.__getitem__, X.shape, Scale, SavedMean, SavedVariance,
                               dY, X.parts, wanted, True)
        ch, _ = _layout_axes(self.type, X.ndim, data_layout)
        global_stats = use_global_stats or (is_test and not trainable_statistics)
        m = X.size // X.shape[ch]
        parts = None if global_stats else _channel_parts(X, ch, 2 * _BLOCK_BYTES)
        if parts is not None and (wanted is None or "X@GRAD" in wanted):
            return self._parts(lambda i: X[:, parts[i][0]:parts[i][1]], X.shape, Scale,
                               SavedMean, SavedVariance, dY, parts, wanted, centred)
        if callable(dY):
            dY = dY(None, None)
        cache: Dict[str, Any] = {}

        def centred_x() -> np.ndarray:
            if "xc" not in cache:
                cache["xc"] = X if centred else _bn_centred(X, SavedMean, ch)
            return cache["xc"]

        def dbias() -> np.ndarray:
            if "db" not in cache:
                cache["db"] = _channel_sum(dY, ch)
            return cache["db"]

        def dscale() -> np.ndarray:         # sum(dY * xh) = sum(dY * xc) * inv_std
            if "ds" not in cache:
                cache["ds"] = _channel_sum(dY, ch, centred_x()) * SavedVariance
            return cache["ds"]

        def dx() -> np.ndarray:
            if global_stats:
                with whole_runs(channel_run(X.shape, ch), X.size):
                    return dY * _bc(Scale * SavedVariance, X, ch)
            ds, db = dscale(), dbias()          # (before xc is scaled in place below)
            return _bn_dx(dY, cache.pop("xc"), Scale, SavedVariance, ds, db, m, ch)

        return LazyOutputs({"X@GRAD": dx, "Scale@GRAD": dscale, "Bias@GRAD": dbias})

    @staticmethod
    def _parts(part_x: Callable[[int], np.ndarray], shape: Tuple[int, ...], Scale, SavedMean,
               SavedVariance, dY: GradSource, parts, wanted, centred=False) -> Dict[str, Any]:
        """The gradients over the channel ``parts`` in parallel, ``part_x(i)`` giving part
        i of X (``centred``: of X - SavedMean) of a map of ``shape``."""
        part_of = dY if callable(dY) else (lambda lo, hi: dY[:, lo:hi])
        x0 = part_x(0)
        dx = np.empty(shape, np.result_type(x0.dtype, Scale, SavedVariance)) \
            if wanted is None or "X@GRAD" in wanted else None
        m = math.prod(shape) // max(shape[1], 1)
        sums: List[Any] = [None] * len(parts)

        def one(i: int) -> None:
            lo, hi = parts[i]
            sums[i] = _bn_grad_part(part_x(i), Scale[lo:hi], SavedMean[lo:hi],
                                    SavedVariance[lo:hi], part_of(lo, hi),
                                    None if dx is None else dx[:, lo:hi], m, centred)
        threads.parallel(one, len(parts))
        out = {"X@GRAD": dx, "Scale@GRAD": np.concatenate([s[0] for s in sums]),
               "Bias@GRAD": np.concatenate([s[1] for s in sums])}
        return out if wanted is None else {k: v for k, v in out.items() if k in wanted}


BatchNormGrad.forward_def = get_op_def("batch_norm")


def _summed(*arrays: np.ndarray) -> bool:
    """layer_norm's row means go through ``row_sums`` (einsum: 2-3x NumPy's ``mean`` on rows
    of 256) for float32/float64 arrays of one dtype; float16 keeps NumPy's float32-accumulated
    mean."""
    return arrays[0].dtype in (np.float32, np.float64) and \
        all(a.dtype == arrays[0].dtype for a in arrays)


def _ln_dx_rows(dy: np.ndarray, scale: Any, xh: np.ndarray, inv_std: np.ndarray,
                out: Any) -> np.ndarray:
    """layer_norm's dX of rows: (g - mean_row(g) - xh * mean_row(g * xh)) * inv_std with
    g = dY * Scale, into ``out`` when given."""
    gy = dy * scale if scale is not None else dy
    if _summed(gy, xh):
        inv_n = gy.dtype.type(1.0 / gy.shape[1])
        m1 = row_sums(gy, 1) * inv_n
        m2 = row_sums(gy, 1, xh) * inv_n
    else:
        m1 = gy.mean(axis=1, keepdims=True)
        m2 = (gy * xh).mean(axis=1, keepdims=True)
    with whole_runs(dy.shape[1], dy.size):
        out = np.subtract(gy, m1, out=out)
        out -= xh * m2
        out *= inv_std
    return out


# -- layer_norm ---------------------------------------------------------------------------------
def _column_sums(dy: np.ndarray, xh: Optional[np.ndarray] = None) -> np.ndarray:
    """sum(dy, axis=0) -- or sum(dy * xh, axis=0) -- of rows [rows, right]: layer_norm's
    dBias and dScale. From 8 columns on through einsum, which adds the rows in the same order
    as NumPy's column sum (the same bits) without making the product (2.4x faster on BERT's
    [1024, 256]); narrower rows keep NumPy's pairwise sum (a single column is summed down its
    contiguous run there)."""
    if dy.shape[1] >= 8 and dy.dtype in (np.float32, np.float64) and \
            (xh is None or xh.dtype == dy.dtype):
        return np.einsum("ij->j", dy) if xh is None else np.einsum("ij,ij->j", dy, xh)
    return (dy if xh is None else dy * xh).sum(axis=0)


def _split(op: str, shape: Tuple[int, ...], begin_norm_axis: int) -> Tuple[int, int]:
    if not 0 < begin_norm_axis < len(shape):
        raise ValueError(f"{op}: begin_norm_axis must be in [1, {len(shape) - 1}] for X of "
                         f"shape {list(shape)}, got {begin_norm_axis}")
    left, right = 1, 1
    for d in shape[:begin_norm_axis]:
        left = -1 if d < 0 or left < 0 else left * d
    for d in shape[begin_norm_axis:]:
        right = -1 if d < 0 or right < 0 else right * d
    return left, right


# elements from which layer_norm's rows run in two parts: each part is a few NumPy calls over
# all its rows, and a thread that finds the GIL taken sleeps until it is handed over. Rows of
# 256 and 768 (2 threads, AMD EPYC guest, 2026-12-03), two parts against one: 64K elements
# 2.0x the time, 128K 1.2x, 192K 0.87x, 384K 0.76-0.83x
_LN_PARALLEL_MIN = 3 << 16


def ln_row_parts(x: np.ndarray, *others: Any) -> bool:
    """layer_norm's rows [left, right] run as two parallel parts: two threads or more,
    float32/float64 throughout, at least two rows and ``_LN_PARALLEL_MIN`` elements."""
    return (x.dtype in (np.float32, np.float64) and x.shape[0] >= 2
            and x.size >= _LN_PARALLEL_MIN
            and all(o is None or o.dtype == x.dtype for o in others) and threads.splitting())


def ln_rows(x: np.ndarray, scale: Any, bias: Any, eps: float, y: Any = None, mu: Any = None,
             var: Any = None, xh: Any = None) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """layer_norm of the rows ``x`` [rows, right]: (Y, Mean, Variance), into ``y``, ``mu``,
    ``var`` when given (every row on its own: a block of rows gives the whole's bits). With
    ``xh`` (an array of x's shape and dtype) the normalized rows (X - Mean) / sqrt(Variance +
    eps) are made there first and Y from them -- the same operations in the same order."""
    summed = _summed(x)
    inv_n = x.dtype.type(1.0 / x.shape[1])
    m = np.multiply(row_sums(x, 1)[:, 0], inv_n, out=mu) if summed else \
        x.mean(axis=1, out=mu)
    with whole_runs(x.shape[1], x.size):
        xc = x - m[:, None] if xh is None else np.subtract(x, m[:, None], out=xh)
    v = np.multiply(row_sums(xc, 1, xc)[:, 0], inv_n, out=var) if summed else \
        np.mean(np.square(xc), axis=1, out=var)
    with whole_runs(x.shape[1], x.size):
        out = np.multiply(xc, (1.0 / np.sqrt(v + float(eps)))[:, None],
                          out=y if xh is None else xh)
    if xh is not None:
        if scale is not None:
            out = np.multiply(xh, scale, out=y)
        elif y is None:
            out = xh.copy()
        else:
            np.copyto(y, xh)
            out = y
    elif scale is not None:
        out *= scale
    if bias is not None:
        out += bias
    return out, m, v


@register
class LayerNorm(OpDef):
    """Rows = X flattened to [prod(shape[:k]), prod(shape[k:])] (k = begin_norm_axis);
    Mean, Variance = per-row mean / biased variance;
    Y = (X - Mean) / sqrt(Variance + eps) * Scale + Bias (Scale, Bias over the row)."""
    type = "layer_norm"
    inputs, outputs = ("X", "Scale?", "Bias?"), ("Y", "Mean", "Variance")
    extra_attrs = {"use_mkldnn": False, "is_test": False}

    def infer(self, X, Scale, Bias, *, begin_norm_axis=1):
        left, right = _split(self.type, X.shape, begin_norm_axis)
        for name, spec in (("Scale", Scale), ("Bias", Bias)):
            if spec is not None and right >= 0 and spec.shape != (right,):
                raise ValueError(f"layer_norm: {name} must have shape [{right}] (prod of X's "
                                 f"dims from begin_norm_axis={begin_norm_axis}), got "
                                 f"{list(spec.shape)}")
        stat = VarSpec((left,), X.dtype)
        return {"Y": X, "Mean": stat, "Variance": stat}

    def forward(self, X, Scale, Bias, *, epsilon=1e-5, begin_norm_axis=1):
        return self._rows(X, Scale, Bias, epsilon, begin_norm_axis, None)

    def _rows(self, X, Scale, Bias, epsilon, begin_norm_axis, xh):
        """The outputs, the normalized rows made into ``xh`` when given (``ln_rows``)."""
        left, right = _split(self.type, X.shape, begin_norm_axis)
        x = X.reshape(left, right)
        if ln_row_parts(x, Scale, Bias):       # two parallel parts of the rows: the same bits
            y, mu, var = np.empty_like(x), np.empty(left, x.dtype), np.empty(left, x.dtype)
            threads.parallel_ranges(lambda lo, hi: ln_rows(
                x[lo:hi], Scale, Bias, epsilon, y[lo:hi], mu[lo:hi], var[lo:hi],
                None if xh is None else xh[lo:hi]), left)
        else:
            y, mu, var = ln_rows(x, Scale, Bias, epsilon, xh=xh)
        return {"Y": y.reshape(X.shape), "Mean": mu, "Variance": var}

    saves_for_grad = True

    def forward_saving(self, X, Scale, Bias, *, epsilon=1e-5, begin_norm_axis=1):
        """``forward``'s outputs and the normalized rows xh = (X - Mean) / sqrt(Variance +
        eps) [rows, right], which it makes on its way to Y and ``layer_norm_grad`` would make
        again (two passes over X): ``backward_saved`` reads them (float32 / float64; other
        dtypes save nothing). The same operations, so the same bits."""
        left, right = _split(self.type, X.shape, begin_norm_axis)
        xh = np.empty((left, right), X.dtype) if X.dtype in (np.float32, np.float64) else None
        return self._rows(X, Scale, Bias, epsilon, begin_norm_axis, xh), xh

    def backward_saved(self, saved, X, Scale, Mean, Variance, dY, *, wanted=None,
                       epsilon=1e-5, begin_norm_axis=1):
        """``layer_norm_grad`` (the gradients ``wanted``, by input slot) with the normalized
        rows ``forward_saving`` kept instead of making them again; the gradient op's own
        kernel when nothing was kept (a dtype other than float32 / float64)."""
        left, right = _split(self.type, X.shape, begin_norm_axis)
        if saved is None:
            got = get_op_def("layer_norm_grad").forward(
                X, Scale, Mean, Variance, dY, epsilon=epsilon, begin_norm_axis=begin_norm_axis)
            return {k: got[k + "@GRAD"] for k in ("X", "Scale", "Bias")
                    if wanted is None or k in wanted}
        inv_std = (1.0 / np.sqrt(Variance + float(epsilon)))[:, None]
        dy = dY.reshape(left, right)
        out: Dict[str, Any] = {}
        if wanted is None or "X" in wanted:
            if ln_row_parts(saved, Scale, dy, Mean):
                dx = np.empty(saved.shape, dy.dtype)
                threads.parallel_ranges(lambda lo, hi: _ln_dx_rows(
                    dy[lo:hi], Scale, saved[lo:hi], inv_std[lo:hi], dx[lo:hi]), left)
            else:
                dx = _ln_dx_rows(dy, Scale, saved, inv_std, None)
            out["X"] = dx.reshape(X.shape)
        if wanted is None or "Scale" in wanted:
            out["Scale"] = _column_sums(dy, saved)
        if wanted is None or "Bias" in wanted:
            out["Bias"] = _column_sums(dy)
        return out

    def make_grad(self, g, **attrs):
        g.append("layer_norm_grad",
                 {"X": g.input("X"), "Scale": g.input("Scale"), "Mean": g.output("Mean"),
                  "Variance": g.output("Variance"), "Y@GRAD": g.output_grad("Y")},
                 {"X@GRAD": g.input_grad("X"), "Scale@GRAD": g.input_grad("Scale"),
                  "Bias@GRAD": g.input_grad("Bias")}, attrs)


@register
class LayerNormGrad(OpDef):
    """xh = (X - Mean) / sqrt(Variance + eps); dBias = sum_rows(dY), dScale = sum_rows(dY*xh);
    g = dY * Scale; dX = (g - mean_row(g) - xh * mean_row(g * xh)) / sqrt(Variance + eps)."""
    type = "layer_norm_grad"
    inputs = ("X", "Scale?", "Mean", "Variance", "Y@GRAD")
    outputs = ("X@GRAD?", "Scale@GRAD?", "Bias@GRAD?")
    no_grad = True
    extra_attrs = LayerNorm.extra_attrs

    def infer(self, *specs, **attrs):
        return {}

    def forward(self, X, Scale, Mean, Variance, dY, *, epsilon=1e-5, begin_norm_axis=1):
        left, right = _split(self.type, X.shape, begin_norm_axis)
        inv_std = (1.0 / np.sqrt(Variance + float(epsilon)))[:, None]
        dy = dY.reshape(left, right)
        cache: Dict[str, np.ndarray] = {}

        def xhat() -> np.ndarray:
            if "xh" not in cache:
                with whole_runs(right, X.size):
                    cache["xh"] = (X.reshape(left, right) - Mean[:, None]) * inv_std
            return cache["xh"]

        def dx() -> np.ndarray:
            x = X.reshape(left, right)
            if "xh" not in cache and ln_row_parts(x, Scale, dy, Mean):
                # two parallel parts of the rows (row-wise: the same bits); xh kept for dScale
                xh, out = np.empty_like(x), np.empty(x.shape, dy.dtype)

                def part(lo: int, hi: int) -> None:
                    with whole_runs(right, (hi - lo) * right):
                        np.subtract(x[lo:hi], Mean[lo:hi, None], out=xh[lo:hi])
                        xh[lo:hi] *= inv_std[lo:hi]
                    _ln_dx_rows(dy[lo:hi], Scale, xh[lo:hi], inv_std[lo:hi], out[lo:hi])
                threads.parallel_ranges(part, left)
                cache["xh"] = xh
                return out.reshape(X.shape)
            return _ln_dx_rows(dy, Scale, xhat(), inv_std, None).reshape(X.shape)

        return LazyOutputs({"X@GRAD": dx,
                            "Scale@GRAD": lambda: _column_sums(dy, xhat()),
                            "Bias@GRAD": lambda: _column_sums(dy)})


LayerNormGrad.forward_def = get_op_def("layer_norm")


# -- norm (l2_normalize) ------------------------------------------------------------------------
@register
class Norm(OpDef):
    """Norm = sqrt(sum(X^2, axis) + epsilon) (keeping the axis); Out = X / Norm."""
    type, inputs, outputs = "norm", ("X",), ("Out", "Norm")
    extra_attrs = {"use_mkldnn": False}

    def infer(self, X, *, axis=1):
        a = norm_axis(self.type, axis, X.ndim)
        norm_shape = [1 if i == a else d for i, d in enumerate(X.shape)]
        return {"Out": X, "Norm": X.with_(shape=norm_shape)}

    def forward(self, X, *, axis=1, epsilon=1e-10, is_test=False):
        a = norm_axis(self.type, axis, X.ndim)
        norm = np.sqrt(np.sum(np.square(X), axis=a, keepdims=True) + float(epsilon))
        return {"Out": X / norm, "Norm": norm.astype(X.dtype, copy=False)}

    def make_grad(self, g, **attrs):
        g.append("norm_grad", {"X": g.input("X"), "Norm": g.output("Norm"),
                               "Out@GRAD": g.output_grad("Out")},
                 {"X@GRAD": g.input_grad("X")}, attrs)


@register
class NormGrad(OpDef):
    """dX = (dOut - Out * sum(dOut * Out, axis)) / Norm, with Out = X / Norm."""
    type = "norm_grad"
    inputs, outputs = ("X", "Norm", "Out@GRAD"), ("X@GRAD",)
    no_grad = True
    extra_attrs = Norm.extra_attrs

    def infer(self, *specs, **attrs):
        return {}

    def forward(self, X, Norm, dOut, *, axis=1, epsilon=1e-10, is_test=False):
        a = norm_axis(self.type, axis, X.ndim)
        out = X / Norm
        dx = dOut - out * np.sum(dOut * out, axis=a, keepdims=True)
        return {"X@GRAD": dx / Norm}


NormGrad.forward_def = get_op_def("norm")
