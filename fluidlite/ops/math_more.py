"""fluid 1.8's remaining math ops: l1_norm, minus, frobenius_norm, fill, unbind, conv_shift and
fc (the fused op fluid's inference passes emit), with fluid's OpMaker slots and attributes."""
from __future__ import annotations

from typing import Any, Callable, List, Optional, Sequence

import numpy as np

from ..core import shape as S
from ..core import threads
from ..core.dtypes import FLOATS, VarType, convert_dtype, to_numpy_dtype
from ..core.registry import OpDef, VarSpec, get_op_def, register
from .activation import gelu_to
from .linalg import _ALL, _GEMM_MIN, _gemm, _gemm_jobs, _mm
from .reduce import _Reduce
from .tensor import norm_axis


def _need(op: str, cond: bool, msg: str) -> None:
    if not cond:
        raise ValueError(f"{op}: {msg}")


@register
class L1Norm(OpDef):
    """Out = sum(|X|) with shape [1];  dX = dOut * sign(X)."""
    type, inputs, outputs = "l1_norm", ("X",), ("Out",)

    def infer(self, X):
        return {"Out": VarSpec((1,), X.dtype)}

    def forward(self, X):
        return {"Out": np.array([np.sum(np.abs(X), dtype=X.dtype)], X.dtype)}

    def backward(self, X, dOut):
        return {"X": (np.sign(X) * dOut.reshape(-1)[0]).astype(X.dtype, copy=False)}


@register
class Minus(OpDef):
    """Out = X - Y (same shapes);  fluid's grad maker: X@GRAD = scale(dOut, 1),
    Y@GRAD = scale(dOut, -1)."""
    type, inputs, outputs = "minus", ("X", "Y"), ("Out",)

    def infer(self, X, Y):
        _need(self.type, len(X.shape) == len(Y.shape) and all(
            S.dims_match(a, b) for a, b in zip(X.shape, Y.shape)),
            f"X and Y must have the same shape, but received X {list(X.shape)} and Y "
            f"{list(Y.shape)}")
        return {"Out": X}

    def forward(self, X, Y):
        return {"Out": X - Y}

    def make_grad(self, g, **_):
        for slot, sign in (("X", 1.0), ("Y", -1.0)):
            if g.input_grad(slot):
                g.append("scale", {"X": g.output_grad("Out")}, {"Out": g.input_grad(slot)},
                         scale=sign)


@register
class FrobeniusNorm(_Reduce):
    """Out = sqrt(sum(X^2, dim)) (a reduce op: ``dim``, ``keep_dim``, ``reduce_all``);
    dX = X / (Out + 1e-12) * dOut (fluid's kernel guards the division by 1e-12)."""
    type = "frobenius_norm"
    grad_uses = ("X", "Out")

    def _kernel(self, X, axes, keep_dim):
        return np.sqrt(np.sum(X * X, axis=axes, keepdims=keep_dim, dtype=X.dtype))

    def infer(self, X, *, dim=(0,), keep_dim=False, reduce_all=False):
        if X.dtype not in FLOATS:
            raise ValueError(f"frobenius_norm: X must be a float tensor, but it is "
                             f"{convert_dtype(X.dtype)}")
        return super().infer(X, dim=dim, keep_dim=keep_dim, reduce_all=reduce_all)

    def backward(self, X, Out, dOut, *, dim=[0], keep_dim=False, reduce_all=False):
        y = self._expand(X, Out, dim, reduce_all)
        dy = self._expand(X, dOut, dim, reduce_all)
        return {"X": (X / (y + X.dtype.type(1e-12)) * dy).astype(X.dtype, copy=False)}


@register
class Fill(OpDef):
    """Out = array(value, dtype).reshape(shape): ``value`` is a flat float list whose first
    prod(shape) entries fluid casts to ``dtype``; no inputs, no gradient."""
    type, inputs, outputs = "fill", (), ("Out",)
    no_grad = True
    foldable = True         # a constant the plan computes once
    extra_attrs = {"force_cpu": False}

    def infer(self, *, shape=(), dtype=VarType.FP32):
        _need(self.type, all(int(d) >= 0 for d in shape),
              f"every dim of shape must be >= 0, got {list(shape)}")
        return {"Out": VarSpec(shape, dtype)}

    def forward(self, *, value=[], shape=[], dtype=VarType.FP32):
        n = int(np.prod(shape)) if len(shape) else 1
        _need(self.type, len(value) >= n,
              f"value has {len(value)} entries but shape {list(shape)} needs {n}")
        # fluid's kernel: the first numel floats (a std::vector<float> attr), each
        # static_cast to the dtype (ints truncate toward zero)
        vals = np.asarray(value[:n], np.float32)
        return {"Out": vals.astype(to_numpy_dtype(dtype)).reshape(shape)}


@register
class Unbind(OpDef):
    """Out[i] = X taken at index i of ``axis`` (that dim removed), one output per index;
    dX = stack(dOut, axis) (fluid's grad maker; missing pieces zero-filled)."""
    type, inputs, outputs = "unbind", ("X",), ("Out*",)

    def infer(self, X, *, axis=0):
        a = norm_axis(self.type, axis, len(X.shape))
        n = X.shape[a]
        _need(self.type, n >= 0, f"the size of axis {axis} must be known, X is "
                                 f"{list(X.shape)}")
        shape = tuple(d for i, d in enumerate(X.shape) if i != a)
        return {"Out": [VarSpec(shape, X.dtype, X.lod_level) for _ in range(n)]}

    def forward(self, X, *, axis=0):
        a = axis + X.ndim if axis < 0 else axis
        return {"Out": [np.ascontiguousarray(np.take(X, i, axis=a))
                        for i in range(X.shape[a])]}

    def make_grad(self, g, *, axis=0, **_):
        if g.input_grad("X"):
            g.append("stack", {"X": g.output_grad("Out")}, {"Y": g.input_grad("X")},
                     axis=axis)


def _shift_index(m: int, n: int) -> np.ndarray:
    """[M, N]: column (j + k - (N - 1) / 2) mod M read by output j for tap k."""
    half = (n - 1) // 2
    return (np.arange(m)[:, None] + np.arange(n)[None, :] - half) % m


@register
class ConvShift(OpDef):
    """Circular convolution per row: Out[i, j] = sum_k X[i, (j + k - (N-1)/2) mod M] * Y[i, k]
    for X [B, M], Y [B, N] (N odd, N <= M);  dX, dY by the same index map."""
    type, inputs, outputs = "conv_shift", ("X", "Y"), ("Out",)

    def infer(self, X, Y):
        _need(self.type, len(X.shape) == 2 and len(Y.shape) == 2,
              f"X and Y must be 2-D, got {list(X.shape)} and {list(Y.shape)}")
        _need(self.type, S.dims_match(X.shape[0], Y.shape[0]),
              f"X and Y must have the same batch size, got {list(X.shape)} and "
              f"{list(Y.shape)}")
        if Y.shape[1] >= 0:
            _need(self.type, Y.shape[1] % 2 == 1, f"Y's width must be odd, got {Y.shape[1]}")
            _need(self.type, X.shape[1] < 0 or Y.shape[1] <= X.shape[1],
                  f"Y's width {Y.shape[1]} must not exceed X's {X.shape[1]}")
        return {"Out": X}

    def forward(self, X, Y):
        idx = _shift_index(X.shape[1], Y.shape[1])
        return {"Out": np.einsum("bjk,bk->bj", X[:, idx], Y).astype(X.dtype, copy=False)}

    def backward(self, X, Y, dOut):
        m, n = X.shape[1], Y.shape[1]
        idx = _shift_index(m, n)
        dy = np.einsum("bj,bjk->bk", dOut, X[:, idx]).astype(Y.dtype, copy=False)
        dx = np.zeros(X.shape, dOut.dtype)
        contrib = dOut[:, :, None] * Y[:, None, :]             # [B, M, N] at X[:, idx]
        rows = np.arange(X.shape[0])[:, None, None]
        np.add.at(dx, (rows, idx[None]), contrib)
        return {"X": dx, "Y": dy}


def _plain(x: np.ndarray, w: np.ndarray) -> bool:
    """fc's two 2-D operands are multiplied by ``_gemm`` (float16 by ``_mm``, in float32)."""
    return np.result_type(x.dtype, w.dtype) != np.float16


# fc's activation_type: fluid's '' and relu, and the GELU forms Paddle's oneDNN fc takes (its
# fc_act_mkldnn_fuse_pass writes them; this engine's pass of that name too)
FC_ACTIVATIONS = ("", "relu", "gelu_erf", "gelu_tanh")


def fc_epilogue(bias: Optional[np.ndarray], act: str, dtype: Any
                ) -> Optional[Callable[[np.ndarray, slice, slice], None]]:
    """``epilogue(block, rows, cols)`` adding ``bias`` (1-D, the product's ``dtype``) to a
    block of an fc product and applying the activation ``act`` (one of ``FC_ACTIVATIONS``)
    in place -- the bits of the ``elementwise_add`` and activation ops -- or None when there
    is nothing to apply."""
    if bias is None and not act:
        return None
    zero = np.dtype(dtype).type(0)

    def epilogue(block: np.ndarray, rows: slice, cols: slice) -> None:
        if bias is not None:
            block += bias[cols]
        if act == "relu":
            np.maximum(block, zero, out=block)
        elif act:
            gelu_to(block, block, approximate=act == "gelu_tanh")
    return epilogue


@register
class FC(OpDef):
    """fluid's fused fully connected op (what its inference passes emit for mul +
    elementwise_add [+ relu]): Out = act(flatten(Input, in_num_col_dims) @ W + Bias), act
    one of ``FC_ACTIVATIONS``; with ``padding_weights`` W is [K + 4, N + 4] and only its
    top-left [K, N] block is used. (fluid registers no gradient; this one is mul's,
    elementwise_add's and the activation's, a GELU's from the recomputed pre-activation.)"""
    type, inputs, outputs = "fc", ("Input", "W", "Bias?"), ("Out",)
    grad_uses = ("Input", "W", "Bias", "Out")
    extra_attrs = {"use_mkldnn": False, "use_quantizer": False, "Scale_in": 1.0,
                   "Scale_weights": [1.0], "Scale_out": 1.0, "force_fp32_output": False,
                   "@ALL_KERNELS_MUST_COMPUTE_RUNTIME_SHAPE@": True}

    def infer(self, Input, W, Bias=None, *, in_num_col_dims=1, activation_type="",
              padding_weights=False):
        _need(self.type, activation_type in FC_ACTIVATIONS,
              f"activation_type must be one of {', '.join(map(repr, FC_ACTIVATIONS))}, got "
              f"{activation_type!r}")
        # fluid's FCOp::InferShape: Input's rank must be larger than in_num_col_dims (so a
        # 1-D Input is refused, as by mul, whose pattern the fc fuse pass replaces)
        _need(self.type, 1 <= in_num_col_dims < len(Input.shape),
              f"in_num_col_dims must be in [1, {len(Input.shape) - 1}] (Input's rank "
              f"{len(Input.shape)} must be larger than it), got {in_num_col_dims}")
        _need(self.type, len(W.shape) == 2, f"W must be 2-D, got {list(W.shape)}")
        k, n = (W.shape[0] - 4, W.shape[1] - 4) if padding_weights else W.shape
        rest = Input.shape[in_num_col_dims:]
        if all(d >= 0 for d in rest) and k >= 0:
            _need(self.type, int(np.prod(rest)) == k,
                  f"the flattened input width {int(np.prod(rest))} (Input {list(Input.shape)}, "
                  f"in_num_col_dims {in_num_col_dims}) must equal W's rows {k}")
        if Bias is not None:
            _need(self.type, int(np.prod(Bias.shape)) in (n, -1) and Bias.shape[-1] in (n, -1),
                  f"Bias must be [{n}] or [1, {n}], got {list(Bias.shape)}")
        return {"Out": VarSpec(tuple(Input.shape[:in_num_col_dims]) + (n,), Input.dtype,
                               Input.lod_level)}

    @staticmethod
    def _weights(W, padding_weights):
        return W[:-4, :-4] if padding_weights else W

    def _product(self, Input, W, Bias, in_num_col_dims, activation_type, padding_weights):
        """(x, w, epilogue or None, the output's shape): ``forward``'s product of the
        flattened Input and W, and the bias and activation it applies in place to each block
        of it (in place on the fresh product, block by block as the GEMM's parts -- cut on 2+
        threads -- make them: one temporary and one pass over memory less)."""
        w = self._weights(W, padding_weights)
        lead = Input.shape[:in_num_col_dims]
        x = Input.reshape(int(np.prod(lead)), -1)
        dt = np.result_type(x.dtype, w.dtype)
        bias = None if Bias is None else Bias.reshape(-1).astype(dt, copy=False)
        return x, w, fc_epilogue(bias, activation_type, dt), lead + (w.shape[1],)

    def _pre_activation(self, Input, W, Bias, in_num_col_dims, padding_weights):
        """(flatten(Input) @ W + Bias as [rows, N], the output's shape): ``forward`` without
        its activation (the product's dtype)."""
        x, w, epilogue, shape = self._product(Input, W, Bias, in_num_col_dims, "",
                                              padding_weights)
        z = _mm(x, w)
        if epilogue is not None:
            epilogue(z, _ALL, _ALL)
        return z, shape

    def forward(self, Input, W, Bias=None, *, in_num_col_dims=1, activation_type="",
                padding_weights=False):
        x, w, epilogue, shape = self._product(Input, W, Bias, in_num_col_dims, activation_type,
                                              padding_weights)
        if epilogue is None:
            out = _mm(x, w)
        elif _plain(x, w):
            out = _gemm(x, w, epilogue=epilogue)
        else:
            out = _mm(x, w)
            epilogue(out, _ALL, _ALL)
        return {"Out": out.reshape(shape).astype(Input.dtype, copy=False)}

    def forward_with(self, Input: np.ndarray, W: np.ndarray, Bias: Optional[np.ndarray],
                     then: Callable[[np.ndarray, slice, slice], None], *,
                     in_num_col_dims: int = 1, activation_type: str = "") -> np.ndarray:
        """``forward``'s Out as [rows, N] with ``then(block, rows, cols)`` applied in place to
        each block of the product right after fc's bias and activation, in the same GEMM
        part while the block is in cache (a fused op's epilogue:
        ``fused_fc_elementwise_layernorm``). Float32 / float64 operands of one dtype: the
        product, and the Out it ends as, are the operands' dtype (no padded weights)."""
        x, w, epilogue, _ = self._product(Input, W, Bias, in_num_col_dims, activation_type,
                                          False)

        def both(block: np.ndarray, rows: slice, cols: slice) -> None:
            if epilogue is not None:
                epilogue(block, rows, cols)
            then(block, rows, cols)
        return _gemm(x, w, epilogue=both)

    def lower(self, in_specs, attrs):
        """2-D Input (``in_num_col_dims`` 1), W and a 1-D Bias declared with one float32 /
        float64 dtype, no padded weights: ``forward``'s GEMM and epilogue without its
        reshapes, dtype promotion and casts, which a small layer pays every call (a 64-64-10
        MLP at batch 16 spent a third of its step there). As ``mul``'s fast path, it trusts
        the declarations (the plan's arrays have the declared ranks and dtypes)."""
        x, w, b = in_specs
        act = attrs.get("activation_type", "")
        if (x is None or w is None or len(x.shape) != 2 or len(w.shape) != 2
                or attrs.get("in_num_col_dims", 1) != 1 or attrs.get("padding_weights", False)
                or act not in FC_ACTIVATIONS or x.dtype != w.dtype
                or (b is not None and (len(b.shape) != 1 or b.dtype != x.dtype))):
            return None
        dt = np.dtype(to_numpy_dtype(x.dtype))
        if dt not in (np.float32, np.float64):
            return None
        act_fn = fc_epilogue(None, act, dt)

        def fast(Input, W, Bias=None):
            if Input.size * W.shape[1] < _GEMM_MIN:     # one block: no epilogue to make
                out = _gemm(Input, W)
                if Bias is not None:
                    out += Bias
                if act_fn is not None:
                    act_fn(out, _ALL, _ALL)
                return out
            if Bias is None and act_fn is None:
                return _gemm(Input, W)
            return _gemm(Input, W, epilogue=fc_epilogue(Bias, act, dt))
        return fast

    def forward_group(self, Input: np.ndarray, Ws: Sequence[np.ndarray],
                      Biases: Sequence[Optional[np.ndarray]], *, in_num_col_dims: int = 1,
                      activation_types: Sequence[str] = (),
                      padding_weights: bool = False) -> List[np.ndarray]:
        """``[forward(Input, Ws[j], Biases[j], activation_type=activation_types[j])]`` for
        fc layers reading one Input (``fc_group``): the GEMM calls of all of them -- each
        product whole or in the parts ``_gemm`` cuts it into, with its bias and activation -- as
        the items of one ``core.threads`` call instead of one call per layer. Each call is the
        one ``forward`` makes, so every output has ``forward``'s bits."""
        acts = list(activation_types) or [""] * len(Ws)
        preps = [self._product(Input, w, b, in_num_col_dims, a, padding_weights)
                 for w, b, a in zip(Ws, Biases, acts)]
        if not all(_plain(x, w) for x, w, _, _ in preps):      # float16: one layer at a time
            return [self.forward(Input, w, b, in_num_col_dims=in_num_col_dims,
                                 activation_type=a, padding_weights=padding_weights)["Out"]
                    for w, b, a in zip(Ws, Biases, acts)]
        outs, jobs = [], []
        for x, w, epilogue, shape in preps:
            out, parts = _gemm_jobs(x, w, None, epilogue)
            outs.append(out.reshape(shape))
            jobs.extend(parts)
        threads.parallel(lambda i: jobs[i](), len(jobs))
        return [o.astype(Input.dtype, copy=False) for o in outs]

    def backward(self, Input, W, Bias, Out, dOut, *, in_num_col_dims=1, activation_type="",
                 padding_weights=False):
        w = self._weights(W, padding_weights)
        d = dOut.reshape(-1, w.shape[1])
        if activation_type == "relu":
            d = d * (Out.reshape(d.shape) > 0)
        elif activation_type:                   # a GELU: its slope at the pre-activation
            z, _ = self._pre_activation(Input, W, Bias, in_num_col_dims, padding_weights)
            d = get_op_def("gelu").backward(z, d, approximate=activation_type == "gelu_tanh")["X"]
        x = Input.reshape(d.shape[0], -1)
        dw = x.T @ d
        if padding_weights:
            full = np.zeros(W.shape, dw.dtype)
            full[:-4, :-4] = dw
            dw = full
        res = {"Input": (d @ w.T).reshape(Input.shape).astype(Input.dtype, copy=False),
               "W": dw.astype(W.dtype, copy=False)}
        if Bias is not None:
            res["Bias"] = d.sum(axis=0).reshape(Bias.shape).astype(Bias.dtype, copy=False)
        return res
