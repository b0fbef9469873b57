"""Normalization ops of fluid 1.8's layers: ``group_norm``, ``instance_norm``,
``spectral_norm`` and ``data_norm``.

``group_norm`` and ``instance_norm`` normalize groups of elements (a group of channels with
their spatial positions, or one channel) with the shared rule

    xhat = (x - mean) / sqrt(var + eps),   y = xhat * scale[c] + bias[c]
    dx = inv_std * (g - mean(g) - xhat * mean(g * xhat)),   g = dy * scale[c]

(means over the group's elements); ``_group_stats`` / ``_group_backward`` implement it on a
``[N, G, M]`` view.
"""
from __future__ import annotations

from typing import Any, Dict, Tuple

import numpy as np

from ..core.registry import OpDef, VarSpec, get_op_def, register
from .tensor import emit_grad_op


def _need(op: str, cond: bool, msg: str) -> None:
    if not cond:
        raise ValueError(f"{op}: {msg}")


def _group_stats(x: np.ndarray, eps: float) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mean, var, inv_std) over the last axis of ``x`` [N, G, M]."""
    mean = x.mean(axis=-1)
    var = np.maximum((x * x).mean(axis=-1) - mean * mean, 0.0)
    return mean, var, 1.0 / np.sqrt(var + eps)


def _group_backward(xg: np.ndarray, g: np.ndarray, mean: np.ndarray,
                    inv: np.ndarray) -> np.ndarray:
    """dx on the ``[N, G, M]`` view from g = dy * scale (see the module docstring)."""
    xhat = (xg - mean[..., None]) * inv[..., None]
    return inv[..., None] * (g - g.mean(axis=-1, keepdims=True)
                             - xhat * (g * xhat).mean(axis=-1, keepdims=True))


def _channel_bcast(ndim: int, channel_axis: int) -> Tuple[int, ...]:
    shape = [1] * ndim
    shape[channel_axis] = -1
    return tuple(shape)


@register
class GroupNorm(OpDef):
    """Group normalization (NCHW or NHWC): the C channels form ``groups`` groups; each
    (sample, group) is normalized over its channels and positions (Mean/Variance [N, groups]),
    then Y = xhat * Scale[c] + Bias[c]. Gradients by the shared rule of the module docstring;
    dScale = sum dY * xhat, dBias = sum dY per channel."""
    type = "group_norm"
    inputs, outputs = ("X", "Scale?", "Bias?"), ("Y", "Mean", "Variance")
    grad_uses = ("X", "Scale", "Bias", "Mean", "Variance")

    def _layout(self, X_ndim: int, data_layout: str) -> int:
        _need(self.type, X_ndim >= 2, f"X must have rank >= 2, got {X_ndim}")
        if data_layout not in ("NCHW", "NHWC", "AnyLayout"):
            raise ValueError(f"{self.type}: data_layout must be 'NCHW' or 'NHWC', got "
                             f"{data_layout!r}")
        return X_ndim - 1 if data_layout == "NHWC" else 1

    def infer(self, X, Scale=None, Bias=None, *, epsilon=1e-5, groups=1, data_layout="NCHW"):
        ch = self._layout(X.ndim, data_layout)
        C = X.shape[ch]
        _need(self.type, groups >= 1, f"groups must be >= 1, got {groups}")
        _need(self.type, C < 0 or C % groups == 0,
              f"the channel count {C} must be divisible by groups {groups}")
        for name, s in (("Scale", Scale), ("Bias", Bias)):
            if s is not None:
                _need(self.type, s.ndim == 1 and (C < 0 or s.shape[0] == C),
                      f"{name} must be [{C}], got {list(s.shape)}")
        stat = VarSpec([X.shape[0], groups], X.dtype)
        return {"Y": X, "Mean": stat, "Variance": stat}

    def _grouped(self, X, groups, data_layout):
        ch = self._layout(X.ndim, data_layout)
        xt = np.moveaxis(X, ch, 1) if ch != 1 else X
        _need(self.type, xt.shape[1] % groups == 0,
              f"the channel count {xt.shape[1]} must be divisible by groups {groups}")
        return ch, xt, xt.reshape(X.shape[0], groups, -1)

    def forward(self, X, Scale=None, Bias=None, *, epsilon=1e-5, groups=1, data_layout="NCHW"):
        ch, xt, xg = self._grouped(X, groups, data_layout)
        mean, var, inv = _group_stats(xg, epsilon)
        y = ((xg - mean[..., None]) * inv[..., None]).reshape(xt.shape)
        b = _channel_bcast(X.ndim, 1)
        if Scale is not None:
            y = y * Scale.reshape(b)
        if Bias is not None:
            y = y + Bias.reshape(b)
        y = np.moveaxis(y, 1, ch) if ch != 1 else y
        return {"Y": np.ascontiguousarray(y.astype(X.dtype, copy=False)),
                "Mean": mean.astype(X.dtype, copy=False),
                "Variance": var.astype(X.dtype, copy=False)}

    def backward(self, X, Scale, Bias, Mean, Variance, dY, dMean=None, dVariance=None, *,
                 epsilon=1e-5, groups=1, data_layout="NCHW"):
        ch, xt, xg = self._grouped(X, groups, data_layout)
        dyt = np.moveaxis(dY, ch, 1) if ch != 1 else dY
        b = _channel_bcast(X.ndim, 1)
        inv = 1.0 / np.sqrt(Variance + epsilon)
        g = dyt * Scale.reshape(b) if Scale is not None else dyt
        dx = _group_backward(xg, g.reshape(xg.shape), Mean, inv).reshape(xt.shape)
        grads: Dict[str, Any] = {"X": np.moveaxis(dx, 1, ch) if ch != 1 else dx}
        axes = tuple(i for i in range(X.ndim) if i != 1)
        if Scale is not None:
            xhat = ((xg - Mean[..., None]) * inv[..., None]).reshape(xt.shape)
            grads["Scale"] = (dyt * xhat).sum(axis=axes).astype(Scale.dtype, copy=False)
        if Bias is not None:
            grads["Bias"] = dyt.sum(axis=axes).astype(Bias.dtype, copy=False)
        return grads


@register
class InstanceNorm(OpDef):
    """Instance normalization of X [N, C, ...]: each (sample, channel) normalized over its
    positions, Y = xhat * Scale[c] + Bias[c]; SavedMean [N*C] and SavedVariance [N*C] (the
    inverse standard deviation 1/sqrt(var + eps), as fluid stores it). Gradients by the shared
    rule of the module docstring."""
    type = "instance_norm"
    inputs, outputs = ("X", "Scale?", "Bias?"), ("Y", "SavedMean", "SavedVariance")
    grad_uses = ("X", "Scale", "Bias", "SavedMean", "SavedVariance")

    def infer(self, X, Scale=None, Bias=None, *, epsilon=1e-5):
        _need(self.type, 2 <= X.ndim <= 5, f"X must have rank 2 to 5, got shape "
                                           f"{list(X.shape)}")
        _need(self.type, 0.0 <= epsilon <= 0.001, f"epsilon must be in [0, 0.001], got "
                                                  f"{epsilon}")
        C = X.shape[1]
        for name, s in (("Scale", Scale), ("Bias", Bias)):
            if s is not None:
                _need(self.type, s.ndim == 1 and (C < 0 or s.shape[0] == C),
                      f"{name} must be [{C}], got {list(s.shape)}")
        nc = X.shape[0] * C if X.shape[0] >= 0 and C >= 0 else -1
        return {"Y": X, "SavedMean": VarSpec([nc], X.dtype),
                "SavedVariance": VarSpec([nc], X.dtype)}

    def forward(self, X, Scale=None, Bias=None, *, epsilon=1e-5):
        N, C = X.shape[:2]
        xg = X.reshape(N, C, -1)
        mean, _, inv = _group_stats(xg, epsilon)
        y = (xg - mean[..., None]) * inv[..., None]
        if Scale is not None:
            y = y * Scale.reshape(1, C, 1)
        if Bias is not None:
            y = y + Bias.reshape(1, C, 1)
        return {"Y": y.reshape(X.shape).astype(X.dtype, copy=False),
                "SavedMean": mean.reshape(-1).astype(X.dtype, copy=False),
                "SavedVariance": inv.reshape(-1).astype(X.dtype, copy=False)}

    def backward(self, X, Scale, Bias, SavedMean, SavedVariance, dY, dSavedMean=None,
                 dSavedVariance=None, *, epsilon=1e-5):
        N, C = X.shape[:2]
        xg = X.reshape(N, C, -1)
        mean, inv = SavedMean.reshape(N, C), SavedVariance.reshape(N, C)
        dyg = dY.reshape(N, C, -1)
        g = dyg * Scale.reshape(1, C, 1) if Scale is not None else dyg
        grads: Dict[str, Any] = {"X": _group_backward(xg, g, mean, inv).reshape(X.shape)}
        if Scale is not None:
            xhat = (xg - mean[..., None]) * inv[..., None]
            grads["Scale"] = (dyg * xhat).sum(axis=(0, 2)).astype(Scale.dtype, copy=False)
        if Bias is not None:
            grads["Bias"] = dyg.sum(axis=(0, 2)).astype(Bias.dtype, copy=False)
        return grads


def _as_matrix(w: np.ndarray, dim: int) -> np.ndarray:
    perm = [dim] + [i for i in range(w.ndim) if i != dim]
    return w.transpose(perm).reshape(w.shape[dim], -1)


def _power_iteration(mat: np.ndarray, u: np.ndarray, v: np.ndarray, iters: int,
                     eps: float) -> Tuple[np.ndarray, np.ndarray, float]:
    for _ in range(iters):
        v = mat.T @ u
        v = v / (np.linalg.norm(v) + v.dtype.type(eps))
        u = mat @ v
        u = u / (np.linalg.norm(u) + u.dtype.type(eps))
    return u, v, float(u @ mat @ v)


@register
class SpectralNorm(OpDef):
    """Out = Weight / sigma, sigma = u^T W v for W = Weight viewed as [shape[dim], rest], after
    ``power_iters`` power iterations from U, V (v = W^T u / (|W^T u| + eps),
    u = W v / (|W v| + eps); U and V are read, not written, as in fluid's kernel).
    dWeight = dOut / sigma - (sum(dOut * Weight) / sigma^2) * (u v^T) (u, v held constant)."""
    type, inputs, outputs = "spectral_norm", ("Weight", "U", "V"), ("Out",)
    grad_uses = ("Weight", "U", "V")

    def make_grad(self, g, **attrs):
        """fluid's grad maker: Weight@GRAD only (U and V get none)."""
        emit_grad_op(g, self.type, attrs, uses=self.grad_uses, out_grads=("Out",),
                     in_grads=("Weight",))

    def infer(self, Weight, U, V, *, dim=0, power_iters=1, eps=1e-12):
        r = Weight.ndim
        _need(self.type, 2 <= r <= 5, f"Weight must have rank 2 to 5, got {r}")
        _need(self.type, 0 <= dim < r, f"dim must be in [0, {r - 1}], got {dim}")
        _need(self.type, power_iters >= 0, f"power_iters must be >= 0, got {power_iters}")
        _need(self.type, eps > 0, f"eps must be > 0, got {eps}")
        h = Weight.shape[dim]
        rest = [d for i, d in enumerate(Weight.shape) if i != dim]
        # an unknown dim (-1, e.g. the batch dim of a traced program's feed) can't be checked
        w = int(np.prod(rest)) if all(d >= 0 for d in rest) else -1
        _need(self.type, U.ndim == 1 and (h < 0 or U.shape[0] in (h, -1)),
              f"U must be [{h}] (the size of Weight's dim {dim}), got {list(U.shape)}")
        _need(self.type, V.ndim == 1 and (w < 0 or V.shape[0] in (w, -1)),
              f"V must be [{w}], got {list(V.shape)}")
        return {"Out": Weight}

    def _parts(self, Weight, U, V, dim, power_iters, eps):
        mat = _as_matrix(Weight, dim)
        u, v, sigma = _power_iteration(mat, U.astype(mat.dtype), V.astype(mat.dtype),
                                       power_iters, eps)
        return mat, u, v, sigma

    def forward(self, Weight, U, V, *, dim=0, power_iters=1, eps=1e-12):
        _, _, _, sigma = self._parts(Weight, U, V, dim, power_iters, eps)
        return {"Out": (Weight / sigma).astype(Weight.dtype, copy=False)}

    def backward(self, Weight, U, V, dOut, *, dim=0, power_iters=1, eps=1e-12):
        mat, u, v, sigma = self._parts(Weight, U, V, dim, power_iters, eps)
        uv = np.outer(u, v)
        perm = [dim] + [i for i in range(Weight.ndim) if i != dim]
        shaped = uv.reshape([Weight.shape[i] for i in perm]).transpose(np.argsort(perm))
        t = Weight.dtype.type            # the float sigma as a scalar of Weight's dtype
        dw = dOut / t(sigma) - (np.sum(dOut * Weight) / t(sigma ** 2)) * shaped
        return {"Weight": dw.astype(Weight.dtype, copy=False)}


@register
class DataNorm(OpDef):
    """Y = (X - Means) * Scales per feature column, Means = BatchSum / BatchSize,
    Scales = sqrt(BatchSize / BatchSquareSum). dX = dY * Scales; the "gradients" of the three
    statistics are this batch's summary as fluid's kernel writes them: BatchSize@GRAD = N,
    BatchSum@GRAD = sum_n X, BatchSquareSum@GRAD = sum_n (X - Means)^2 + N * epsilon (the
    optimizer folds them into the running statistics). With ``slot_dim`` > 0 (X joins slot
    embeddings led by a show count), a slot whose show count is 0 gives zeros and is left out
    of the statistics, which become per-slot means (see ``_slot_stats``); dX stays dY * Scales
    everywhere, as fluid's kernel computes it."""
    type = "data_norm"
    inputs = ("X", "BatchSize", "BatchSum", "BatchSquareSum")
    outputs = ("Y", "Means", "Scales")
    grad_uses = ("X", "BatchSize", "BatchSum", "BatchSquareSum")
    # fluid 1.8 declares them; its CPU kernels do not read them (multi-GPU / oneDNN only)
    extra_attrs = {"use_mkldnn": False, "summary_decay_rate": 0.9999999, "sync_stats": False}

    def _cols(self, X_ndim: int, data_layout: str) -> None:
        _need(self.type, X_ndim >= 2, f"X must have rank >= 2, got {X_ndim}")
        if data_layout not in ("NCHW", "NHWC", "AnyLayout"):
            raise ValueError(f"{self.type}: data_layout must be 'NCHW' or 'NHWC', got "
                             f"{data_layout!r}")

    def infer(self, X, BatchSize, BatchSum, BatchSquareSum, *, epsilon=1e-4,
              data_layout="NCHW"):
        self._cols(X.ndim, data_layout)
        C = X.shape[-1] if data_layout == "NHWC" or X.ndim == 2 else X.shape[1]
        for name, s in (("BatchSize", BatchSize), ("BatchSum", BatchSum),
                        ("BatchSquareSum", BatchSquareSum)):
            _need(self.type, s.ndim == 1 and (C < 0 or s.shape[0] == C),
                  f"{name} must be [{C}], got {list(s.shape)}")
        stat = VarSpec([C], X.dtype)
        return {"Y": X, "Means": stat, "Scales": stat}

    @staticmethod
    def _rows(X: np.ndarray, data_layout: str) -> np.ndarray:
        if X.ndim == 2:
            return X
        x = X if data_layout == "NHWC" else np.moveaxis(X, 1, -1)
        return x.reshape(-1, x.shape[-1])

    @staticmethod
    def _unrows(rows: np.ndarray, X: np.ndarray, data_layout: str) -> np.ndarray:
        if X.ndim == 2:
            return rows
        if data_layout == "NHWC":
            return rows.reshape(X.shape)
        shaped = rows.reshape((X.shape[0],) + X.shape[2:] + (X.shape[1],))
        return np.ascontiguousarray(np.moveaxis(shaped, -1, 1))

    @staticmethod
    def _shown(rows: np.ndarray, slot_dim: int) -> np.ndarray:
        """With ``slot_dim`` > 0 (X concatenates slot embeddings whose first value is the
        show count): per element, whether its slot's show count is non-zero (|show| >= 1e-7,
        fluid's min_precision); the others are skipped."""
        show = rows[:, ::slot_dim]
        live = (show <= rows.dtype.type(-1e-7)) | (show >= rows.dtype.type(1e-7))
        return np.repeat(live, slot_dim, axis=1)[:, :rows.shape[1]]

    def forward(self, X, BatchSize, BatchSum, BatchSquareSum, *, epsilon=1e-4,
                data_layout="NCHW", slot_dim=-1):
        self._cols(X.ndim, data_layout)
        means = BatchSum / BatchSize
        scales = np.sqrt(BatchSize / BatchSquareSum)
        rows = self._rows(X, data_layout)
        y = (rows - means) * scales
        if slot_dim > 0 and rows.shape[0]:       # a slot never shown normalizes to zeros
            y = np.where(self._shown(rows, slot_dim), y, y.dtype.type(0))
        return {"Y": self._unrows(y, X, data_layout).astype(X.dtype, copy=False),
                "Means": means.astype(X.dtype, copy=False),
                "Scales": scales.astype(X.dtype, copy=False)}

    def backward(self, X, BatchSize, BatchSum, BatchSquareSum, dY, dMeans=None, dScales=None,
                 *, epsilon=1e-4, data_layout="NCHW", slot_dim=-1):
        rows = self._rows(X, data_layout)
        means = BatchSum / BatchSize
        scales = np.sqrt(BatchSize / BatchSquareSum)
        # fluid's kernel: dX = dY * Scales everywhere (also in skipped slots)
        dx = self._unrows(self._rows(dY, data_layout) * scales, X, data_layout)
        n = rows.shape[0]
        if slot_dim > 0 and n:
            return dict(self._slot_stats(rows, means, epsilon, slot_dim),
                        X=dx.astype(X.dtype, copy=False))
        return {"X": dx.astype(X.dtype, copy=False),
                "BatchSize": np.full_like(BatchSize, n),
                "BatchSum": rows.sum(axis=0).astype(BatchSum.dtype, copy=False),
                "BatchSquareSum": (((rows - means) ** 2).sum(axis=0) + n * epsilon).astype(
                    BatchSquareSum.dtype, copy=False)}

    def _slot_stats(self, rows: np.ndarray, means: np.ndarray, epsilon: float,
                    slot_dim: int) -> Dict[str, np.ndarray]:
        """fluid's per-slot summary: over the rows where the slot was shown (count c), the
        mean and the mean squared deviation + c * epsilon, with BatchSize 1; zeros where c
        is 0."""
        live = self._shown(rows, slot_dim).astype(rows.dtype)
        c = live.sum(axis=0)
        s = (rows * live).sum(axis=0)
        sq = (((rows - means) ** 2) * live).sum(axis=0)
        seen = c >= 1
        t = rows.dtype.type            # a typed 1: a Python 1 promotes differently in NumPy 1.x
        safe = np.where(seen, c, t(1))
        return {"BatchSize": np.where(seen, t(1), t(0)).astype(rows.dtype),
                "BatchSum": np.where(seen, s / safe, t(0)).astype(rows.dtype),
                "BatchSquareSum": np.where(seen, sq / safe + c * t(epsilon),
                                           t(0)).astype(rows.dtype)}


# -- inplace_abn: batch_norm followed by an activation, one op ---------------------------------
_ABN_ACTS = ("identity", "", "leaky_relu", "elu")


def _abn_act(op: str, activation: str) -> str:
    if activation not in _ABN_ACTS:
        raise ValueError(f"{op}: activation must be 'identity', 'leaky_relu' or 'elu', got "
                         f"{activation!r}")
    return activation or "identity"


@register
class InplaceABN(OpDef):
    """``batch_norm`` (same slots, attrs and statistics) followed by ``activation``:
    identity, leaky_relu (slope ``alpha``) or elu (``alpha``); the gradient first undoes the
    activation from Y (leaky: dY * (Y > 0 ? 1 : alpha); elu: dY * (Y > 0 ? 1 : Y + alpha)),
    then applies batch_norm's rule."""
    type = "inplace_abn"
    inputs = ("X", "Scale", "Bias", "Mean", "Variance", "MomentumTensor?")
    outputs = ("Y", "MeanOut", "VarianceOut", "SavedMean", "SavedVariance")
    extra_attrs = {"use_mkldnn": False, "fuse_with_relu": False, "use_cudnn": False}

    def infer(self, X, Scale, Bias, Mean, Variance, MomentumTensor=None, *,
              data_layout="NCHW", activation="identity"):
        _abn_act(self.type, activation)
        return get_op_def("batch_norm").infer(X, Scale, Bias, Mean, Variance, MomentumTensor,
                                              data_layout=data_layout)

    def forward(self, X, Scale, Bias, Mean, Variance, MomentumTensor=None, *, momentum=0.9,
                epsilon=1e-5, is_test=False, data_layout="NCHW", use_global_stats=False,
                trainable_statistics=False, activation="identity", alpha=1.0):
        act = _abn_act(self.type, activation)
        out = dict(get_op_def("batch_norm").forward(
            X, Scale, Bias, Mean, Variance, MomentumTensor, momentum=momentum, epsilon=epsilon,
            is_test=is_test, data_layout=data_layout, use_global_stats=use_global_stats,
            trainable_statistics=trainable_statistics))
        y = out["Y"]
        if act == "leaky_relu":
            y = np.where(y > 0, y, alpha * y)
        elif act == "elu":
            y = np.where(y > 0, y, alpha * (np.exp(np.minimum(y, 0.0)) - 1.0))
        out["Y"] = y.astype(X.dtype, copy=False)
        return out

    def make_grad(self, g, **attrs):
        g.append("inplace_abn_grad",
                 {"X": g.input("X"), "Scale": g.input("Scale"), "Y": g.output("Y"),
                  "SavedMean": g.output("SavedMean"),
                  "SavedVariance": g.output("SavedVariance"), "Y@GRAD": g.output_grad("Y")},
                 {"X@GRAD": g.input_grad("X"), "Scale@GRAD": g.input_grad("Scale"),
                  "Bias@GRAD": g.input_grad("Bias")}, attrs)


@register
class InplaceABNGrad(OpDef):
    """Gradient of inplace_abn: dY through the activation (read from Y), then batch_norm_grad."""
    type = "inplace_abn_grad"
    inputs = ("X", "Scale", "Y", "SavedMean", "SavedVariance", "Y@GRAD")
    outputs = ("X@GRAD?", "Scale@GRAD?", "Bias@GRAD?")
    no_grad = True
    extra_attrs = InplaceABN.extra_attrs

    def infer(self, *specs, **attrs):
        return {}

    def forward(self, X, Scale, Y, SavedMean, SavedVariance, dY, *, momentum=0.9,
                epsilon=1e-5, is_test=False, data_layout="NCHW", use_global_stats=False,
                trainable_statistics=False, activation="identity", alpha=1.0):
        act = _abn_act(self.type, activation)
        t = dY.dtype.type                # the slopes in dY's dtype (Python floats would be
        if act == "leaky_relu":          # float64 arrays: the gradients would drift)
            dY = dY * np.where(Y > 0, t(1), t(alpha))
        elif act == "elu":
            dY = dY * np.where(Y > 0, t(1), Y + t(alpha))
        return get_op_def("batch_norm_grad").forward(
            X, Scale, SavedMean, SavedVariance, dY, momentum=momentum, epsilon=epsilon,
            is_test=is_test, data_layout=data_layout, use_global_stats=use_global_stats,
            trainable_statistics=trainable_statistics)


InplaceABNGrad.forward_def = get_op_def("inplace_abn")
