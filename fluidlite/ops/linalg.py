"""Matrix products: ``mul`` (fluid's flattening matmul, used by fc) and ``matmul``.

First-order gradients are fused kernels (``mul_grad``, ``matmul_grad``). Both products are
bilinear, so the second-order rule (``double_grad``) is again made of the same ops: with ddX,
ddY the incoming gradients of dX, dY,
    grad X    = dX-formula with Y := ddY      (the grad op itself, fed ddY)
    grad Y    = dY-formula with X := ddX
    grad dOut = op(ddX, Y) + op(X, ddY)
which keeps every order differentiable.
"""
from __future__ import annotations

import functools
import math
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from ..core import shape as S
from ..core import threads
from ..core.dtypes import VarType
from ..core.names import live
from ..core.registry import OpDef, VarSpec, register

_prod = math.prod    # int(np.prod(dims)) is ~25x slower on the small tuples used here


def _mm(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b``; float16 operands multiply in float32 and round once (NumPy has no float16
    BLAS: a float16 product is ~100x slower, and accumulating in float16 loses accuracy).
    Two 2-D operands go through ``_gemm``, stacks of matrices through ``_bmm``."""
    if a.dtype == np.float16 or b.dtype == np.float16:
        out = np.matmul(a.astype(np.float32), b.astype(np.float32))
        return out.astype(np.result_type(a.dtype, b.dtype))
    if a.ndim == 2 and b.ndim == 2:
        return _gemm(a, b)
    return _bmm(a, b)


_dot = np.ndarray.dot
_GEMM_PARTS = 2             # row parts of a large GEMM (fixed: the bits never follow threads)
# multiply-adds from which a GEMM is cut into parts. A call on the pool costs some 60-110 us
# more than the parts' work on the 2-core machine measured (waking the helper, joining it;
# both parts also run slower side by side), so a product of 4.8M multiply-adds (~100 us on
# one thread: MobileNetV2's 1x1 layers at batch 1, [192, 32] x [32, 784]) ran 1.2-1.6x
# slower cut; from 7.5M on ([960, 160] x [160, 49]; BERT-mini's [128, 256] x [256, 256]) it
# gains 0.75-0.85x. The [20, 400] x [400, 800] steps of the PTB model (6.4M) gain.
_GEMM_MIN = 6 << 20
_GEMM_ROWS = 64             # rows a part needs at least
_BMM_MIN = 1 << 21          # multiply-adds from which a stack of products is cut in halves
# multiply-adds each of a gradient's two products needs for ``_gemm_pair`` to run them side by
# side. Measured on the 2-core Intel machine (dX and dW of one layer, ms): 64x256x256 (4.2M)
# 0.158 cut one after the other -> 0.153 side by side; 20x200x400 (1.6M) 0.107 -> 0.099 but
# 32x256x256 (2.1M) 0.104 -> 0.121; from 6M on 0.48-0.90 (the LSTM's [20, 800] x [800, 400]
# with [400, 20] x [20, 800]: 0.520 -> 0.308; DeepFM's 512x624x400 2.08 -> 1.80)
_PAIR_MIN = 1 << 22


def _gemm(a: np.ndarray, b: np.ndarray, out: Optional[np.ndarray] = None,
          epilogue: Optional[Callable[[np.ndarray, slice, slice], Any]] = None) -> np.ndarray:
    """``a @ b`` of two 2-D arrays. A small product goes through ``ndarray.dot`` (the BLAS GEMM
    with the least dispatch: ~0.4 us a call, which small models pay several times a step). A
    large one is cut into ``_GEMM_PARTS`` row blocks (column blocks when it has few rows) that
    run as ``core.threads`` items (BLAS on one thread each) when two threads or more are set:
    the cut depends on the shapes only, so every such thread count gives the same bits. Into
    ``out`` (C-contiguous, the product's dtype) when given. ``epilogue(block, rows, cols)``,
    an in-place elementwise function (a bias and an activation), is applied to each block of
    the product right after its GEMM, in the same item while the block is in cache --
    ``block`` is ``product[rows, cols]`` -- instead of in one more pass over the whole
    product on one thread (an ``fc`` of [2048, 256] x
    [256, 768]: 3.23 -> 2.76 ms on two threads; BERT-mini inference at batch 16 0.97x).

    Large products and their blocks go through ``np.matmul``: it hands a strided view (a row
    block of a transposed matrix, a column block) to BLAS as it is, where ``ndarray.dot``
    first copies it, holding the GIL (measured: a [512, 1024] block of X^T copied in 2.1 ms,
    longer than its 1.3 ms GEMM)."""
    m, n = a.shape[0], b.shape[1]
    if m * a.shape[1] * n < _GEMM_MIN:
        out = _dot(a, b) if out is None else _dot(a, b, out=out)
    elif (m < _GEMM_PARTS * _GEMM_ROWS and n < _GEMM_PARTS * _GEMM_ROWS) \
            or not threads.splitting():
        out = np.matmul(a, b) if out is None else np.matmul(a, b, out=out)
    else:
        return _gemm_parts(a, b, out, epilogue)
    if epilogue is not None:
        epilogue(out, _ALL, _ALL)
    return out


_ALL = slice(None)


def _gemm_parts(a: np.ndarray, b: np.ndarray, out: Optional[np.ndarray],
                epilogue: Optional[Callable[[np.ndarray, slice, slice], Any]]) -> np.ndarray:
    """``_gemm``'s cut product: row blocks, or column blocks for few rows."""
    out, jobs = _gemm_jobs(a, b, out, epilogue)
    threads.parallel(lambda i: jobs[i](), len(jobs))
    return out


def _gemm_jobs(a: np.ndarray, b: np.ndarray, out: Optional[np.ndarray] = None,
               epilogue: Optional[Callable[[np.ndarray, slice, slice], Any]] = None
               ) -> Tuple[np.ndarray, List[Callable[[], None]]]:
    """``(out, jobs)``: ``a @ b`` (with ``epilogue`` on each block) as the calls ``_gemm``
    makes for it -- one job when it runs the product whole, one per part when it cuts it --
    for a caller that runs the jobs of several products in one parallel call (``fc_group``):
    each job is the same BLAS call ``_gemm`` makes, so the bits are ``_gemm``'s. ``out``
    (allocated when None) holds the product once every job has run."""
    m, n = a.shape[0], b.shape[1]
    if out is None:
        out = np.empty((m, n), np.result_type(a.dtype, b.dtype))
    macs = m * a.shape[1] * n
    if macs < _GEMM_MIN or (m < _GEMM_PARTS * _GEMM_ROWS and n < _GEMM_PARTS * _GEMM_ROWS) \
            or not threads.splitting():
        def whole() -> None:
            if macs < _GEMM_MIN:
                _dot(a, b, out=out)
            else:
                np.matmul(a, b, out=out)
            if epilogue is not None:
                epilogue(out, _ALL, _ALL)
        return out, [whole]
    rows = m >= _GEMM_PARTS * _GEMM_ROWS

    def part(lo: int, hi: int) -> None:
        if rows:                                # row blocks, written in place
            where = (slice(lo, hi), _ALL)
            block = np.matmul(a[lo:hi], b, out=out[lo:hi])
        else:                                   # few rows (a recurrent step): column blocks
            where = (_ALL, slice(lo, hi))
            block = np.matmul(a, b[:, lo:hi], out=out[:, lo:hi])
        if epilogue is not None:
            epilogue(block, *where)
    total = m if rows else n
    cuts = [total * i // _GEMM_PARTS for i in range(_GEMM_PARTS + 1)]
    return out, [functools.partial(part, lo, hi) for lo, hi in zip(cuts[:-1], cuts[1:])
                 if hi > lo]


def _gemm_pair(a1: np.ndarray, b1: np.ndarray, a2: np.ndarray,
               b2: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """``(a1 @ b1, a2 @ b2)`` of 2-D arrays: a gradient's dX and dW. When threads are set and
    each product has ``_PAIR_MIN`` multiply-adds or more, the two run side by side as two
    ``core.threads`` items (BLAS on one thread each) instead of one after the other, each cut
    in parts: one hand-off instead of two, and every product packed once, not once a part
    (0.48-0.96x the time of the cut pair from 4M multiply-adds each). Each product is one BLAS
    call either way, so the bits do not follow the thread count."""
    if (not threads.splitting()
            or a1.shape[0] * a1.shape[1] * b1.shape[1] < _PAIR_MIN
            or a2.shape[0] * a2.shape[1] * b2.shape[1] < _PAIR_MIN):
        return _gemm(a1, b1), _gemm(a2, b2)
    out: list = [None, None]

    def product(i: int) -> None:
        out[i] = np.matmul(a1, b1) if i == 0 else np.matmul(a2, b2)
    threads.parallel(product, 2)
    return out[0], out[1]


def _bmm(a: np.ndarray, b: np.ndarray, alpha: float = 1.0) -> np.ndarray:
    """``alpha * np.matmul(a, b)`` of stacks of matrices; a large stack whose batch dims match
    is split in halves of the batch run as ``core.threads`` items (each matrix is its own BLAS
    call either way, so the bits do not change), each half scaled by ``alpha`` while it is in
    cache (not in one more pass over the whole product: an attention's [32, 128, 128] scores
    0.84 -> 0.6 ms)."""
    if a.ndim < 3 or a.shape[:-2] != b.shape[:-2] or a.dtype != b.dtype \
            or not threads.splitting() \
            or a.shape[-2] * a.shape[-1] * b.shape[-1] * _prod(a.shape[:-2]) < _BMM_MIN \
            or _prod(a.shape[:-2]) < 2:
        out = np.matmul(a, b)
        if alpha != 1.0:
            out *= out.dtype.type(alpha)
        return out
    lead = a.shape[:-2]
    n = _prod(lead)
    a3, b3 = a.reshape((n,) + a.shape[-2:]), b.reshape((n,) + b.shape[-2:])
    out = np.empty((n, a.shape[-2], b.shape[-1]), a.dtype)

    def part(lo: int, hi: int) -> None:
        np.matmul(a3[lo:hi], b3[lo:hi], out=out[lo:hi])
        if alpha != 1.0:
            out[lo:hi] *= out.dtype.type(alpha)
    threads.parallel_ranges(part, n)
    return out.reshape(lead + out.shape[1:])


def _product(in_specs) -> object:
    """The fast-path product of two 2-D operands with these specs: ``_gemm`` (what ``_mm``
    calls for them), or ``_mm`` itself for float16."""
    fp16 = any(s is not None and s.dtype == VarType.FP16 for s in in_specs)
    return _mm if fp16 else _gemm


def _sum_to(grad: np.ndarray, shape: Tuple[int, ...]) -> np.ndarray:
    """Sum ``grad`` over the leading/broadcast dims so it has ``shape``."""
    lead = grad.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, d in enumerate(shape) if d == 1 and grad.shape[lead + i] != 1)
    if axes:
        grad = grad.sum(axis=axes, keepdims=True)
    return grad.reshape(shape)


def _bilinear_double_grad(g, op_type: str, attrs) -> None:
    """Second-order rule shared by mul_grad and matmul_grad (see the module docstring)."""
    X, Y, dO = g.input("X"), g.input("Y"), g.input("Out@GRAD")
    ddX, ddY = live(g.output_grad("X@GRAD")), live(g.output_grad("Y@GRAD"))
    gX, gY, gdO = live(g.input_grad("X")), live(g.input_grad("Y")), \
        live(g.input_grad("Out@GRAD"))
    outs = {}
    if gX is not None and ddY is not None:
        outs["X@GRAD"] = gX
    if gY is not None and ddX is not None:
        outs["Y@GRAD"] = gY
    if outs:
        g.append(op_type + "_grad", {"X": ddX if ddX is not None else X,
                                     "Y": ddY if ddY is not None else Y, "Out@GRAD": dO},
                 outs, attrs)
    if gdO is not None and (ddX is not None or ddY is not None):
        terms = []
        for a, b in ((ddX, Y), (X, ddY)):
            if a is not None and b is not None:
                t = gdO if (ddX is None or ddY is None) else g.tmp("ddout")
                g.append(op_type, {"X": a, "Y": b}, {"Out": t}, attrs)
                terms.append(t)
        if len(terms) == 2:
            g.append("sum", {"X": terms}, {"Out": gdO})


@register
class Mul(OpDef):
    """Out = flatten(X, x_num_col_dims) @ flatten(Y, y_num_col_dims), reshaped to
    ``X.shape[:xk] + Y.shape[yk:]``;  dX = dOut @ Y^T, dY = X^T @ dOut (in the 2-D views)."""
    type, inputs, outputs = "mul", ("X", "Y"), ("Out",)
    fresh_grads = ("X", "Y")        # each a new GEMM result (reshaped): see OpDef.fresh_grads
    extra_attrs = {"use_mkldnn": False, "scale_x": 1.0, "scale_y": [1.0], "scale_out": 1.0,
                   "force_fp32_output": False}

    def infer(self, X, Y, *, x_num_col_dims=1, y_num_col_dims=1):
        if not 0 < x_num_col_dims < len(X.shape) or not 0 < y_num_col_dims < len(Y.shape):
            raise ValueError(f"mul: x_num_col_dims={x_num_col_dims} / y_num_col_dims="
                             f"{y_num_col_dims} out of range for X {list(X.shape)}, "
                             f"Y {list(Y.shape)}")
        k1 = S.numel(X.shape[x_num_col_dims:])
        k2 = S.numel(Y.shape[:y_num_col_dims])
        if not S.dims_match(k1, k2):
            raise ValueError(f"mul: X's flattened width {k1} (shape {list(X.shape)}, "
                             f"x_num_col_dims={x_num_col_dims}) != Y's flattened height {k2} "
                             f"(shape {list(Y.shape)}, y_num_col_dims={y_num_col_dims})")
        return {"Out": VarSpec(X.shape[:x_num_col_dims] + Y.shape[y_num_col_dims:], X.dtype)}

    def forward(self, X, Y, *, x_num_col_dims=1, y_num_col_dims=1):
        x2 = X.reshape(_prod(X.shape[:x_num_col_dims]), -1)
        y2 = Y.reshape(_prod(Y.shape[:y_num_col_dims]), -1)
        out = _mm(x2, y2)
        return {"Out": out.reshape(X.shape[:x_num_col_dims] + Y.shape[y_num_col_dims:])}

    def lower(self, in_specs, attrs):
        x, y = in_specs
        if len(x.shape) == 2 and len(y.shape) == 2:
            return _product(in_specs)
        return None

    def backward(self, X, Y, dOut, wanted=None, *, x_num_col_dims=1, y_num_col_dims=1):
        x2 = X.reshape(_prod(X.shape[:x_num_col_dims]), -1)
        y2 = Y.reshape(_prod(Y.shape[:y_num_col_dims]), -1)
        d2 = dOut.reshape(x2.shape[0], y2.shape[1])
        out = {}
        if (wanted is None or wanted == {"X", "Y"}) and np.float16 not in (X.dtype, Y.dtype):
            dx, dy = _gemm_pair(d2, y2.T, x2.T, d2)
            return {"X": dx.reshape(X.shape), "Y": dy.reshape(Y.shape)}
        if wanted is None or "X" in wanted:      # fc on fed data: skip dX's GEMM
            out["X"] = _mm(d2, y2.T).reshape(X.shape)
        if wanted is None or "Y" in wanted:
            out["Y"] = _mm(x2.T, d2).reshape(Y.shape)
        return out

    def lower_grad(self, in_specs, attrs, wanted):
        """2-D X and Y (num_col_dims 1, no float16): ``backward``'s GEMMs without its
        reshapes (an fc layer's gradient on every step of a small model)."""
        x, y = in_specs[0], in_specs[1]
        if (x is None or y is None or len(x.shape) != 2 or len(y.shape) != 2
                or attrs.get("x_num_col_dims", 1) != 1 or attrs.get("y_num_col_dims", 1) != 1
                or _product(in_specs[:2]) is not _gemm):
            return None
        mm = _gemm
        if wanted == {"X", "Y"}:
            return lambda X, Y, dOut: dict(zip("XY", _gemm_pair(dOut, Y.T, X.T, dOut)))
        if wanted == {"Y"}:
            return lambda X, Y, dOut: {"Y": mm(X.T, dOut)}
        if wanted == {"X"}:
            return lambda X, Y, dOut: {"X": mm(dOut, Y.T)}
        return None

    def double_grad(self, g, **attrs):
        _bilinear_double_grad(g, "mul", attrs)


def _one_gemm(x: np.ndarray, y: np.ndarray, transpose_x: bool) -> bool:
    """``x @ y`` (after ``Matmul._prep``) is a stack of matrices times ONE matrix, with the
    stack's rows contiguous in memory order (X not transposed): then it is a single GEMM of
    the stacked rows, ``[prod(lead) * M, K] @ [K, N]`` -- one BLAS call that ``_gemm`` may cut
    over the threads, where ``np.matmul`` loops over the stack (fluid 1.8's ``Linear`` on a
    [batch, seq, hidden] input: 3-4x faster). Its gradient dY is one GEMM too, summing over
    the stack inside the product instead of matrix by matrix."""
    return y.ndim == 2 and x.ndim > 2 and not transpose_x


def _stacks(x: np.ndarray, y: np.ndarray) -> bool:
    """``x @ y`` (after ``Matmul._prep``) is a stack of products with the same batch dims and
    dtype (an attention's scores and context), no float16: ``_bmm`` takes it whole, alpha
    included, and ``_stack_grads`` its gradients."""
    return x.ndim > 2 and x.shape[:-2] == y.shape[:-2] and x.dtype == y.dtype \
        and x.dtype != np.float16


def _stack_grads(X: np.ndarray, Y: np.ndarray, x: np.ndarray, y: np.ndarray, d: np.ndarray,
                 wanted: Optional[Any], tx: bool, ty: bool, alpha: float) -> Dict[str, Any]:
    """matmul's gradients of stacked operands, each made in the layout of its input (no
    transposed copy after the product) and scaled by alpha inside ``_bmm``, not through a
    scaled copy of dOut:  op(X) = x, op(Y) = y (views),
    dX = alpha * (y @ d^T if tx else d @ y^T),  dY = alpha * (d^T @ x if ty else x^T @ d)."""
    out = {}
    if wanted is None or "X" in wanted:
        dx = _bmm(y, np.swapaxes(d, -1, -2), alpha) if tx else \
            _bmm(d, np.swapaxes(y, -1, -2), alpha)
        out["X"] = dx.reshape(X.shape)
    if wanted is None or "Y" in wanted:
        dy = _bmm(np.swapaxes(d, -1, -2), x, alpha) if ty else \
            _bmm(np.swapaxes(x, -1, -2), d, alpha)
        out["Y"] = dy.reshape(Y.shape)
    return out


def _stacked_rows(a: np.ndarray) -> np.ndarray:
    """[..., M, K] -> [prod(...) * M, K] (a view when ``a`` is contiguous)."""
    return a.reshape(-1, a.shape[-1])


def _matmul_views(xs: Tuple[int, ...], ys: Tuple[int, ...], tx: bool, ty: bool):
    """fluid's matmul shapes: 1-D X is a row [1, K], 1-D Y a column [K, 1]; returns the
    (pre-transpose) 2-D+ view shapes, the full product shape and the output shape."""
    xv = (1,) + tuple(xs) if len(xs) == 1 else tuple(xs)
    yv = tuple(ys) + (1,) if len(ys) == 1 else tuple(ys)
    xm = xv[:-2] + ((xv[-1], xv[-2]) if tx else xv[-2:])
    ym = yv[:-2] + ((yv[-1], yv[-2]) if ty else yv[-2:])
    return xv, yv, xm, ym


def _matmul_out_shape(xs, ys, tx, ty):
    if len(xs) == 0 or len(ys) == 0:
        raise ValueError(f"matmul: inputs must have at least one dim, got X {list(xs)}, "
                         f"Y {list(ys)}")
    _, _, xm, ym = _matmul_views(xs, ys, tx, ty)
    if not S.dims_match(xm[-1], ym[-2]):
        raise ValueError(f"matmul: after the optional transposes X's width {xm[-1]} must equal "
                         f"Y's height {ym[-2]}; received X shape {list(xs)} (transpose_X={tx}), "
                         f"Y shape {list(ys)} (transpose_Y={ty})")
    bx, by = xm[:-2], ym[:-2]
    n = max(len(bx), len(by))
    bx, by = (1,) * (n - len(bx)) + bx, (1,) * (n - len(by)) + by
    batch = []
    for a, b in zip(bx, by):
        if a == 1 or b == 1 or S.dims_match(a, b):
            batch.append(b if a == 1 else a if b == 1 else S.known(a, b))
        else:
            raise ValueError(f"matmul: the batch dims of X {list(xs)} and Y {list(ys)} do not "
                             f"broadcast ({a} vs {b})")
    full = tuple(batch) + (xm[-2], ym[-1])
    out = list(full)
    if len(xs) == 1 and out[-2] == 1:
        del out[-2]
    if len(ys) == 1 and out[-1] == 1:
        del out[-1]
    return full, tuple(out) or (1,)


def _head_split(xs, ys, tx, ty, h):
    """fluid 1.8's ``head_number`` (BLAS MatMulWithHead): op(X) [.., M, K] is cut into h column
    blocks; op(Y) is cut into h row blocks when its height is K (Out [.., M, h * N]), or into
    h column blocks when its height is K / h (Out [.., M, N]). Returns (Out shape, rows)."""
    if len(xs) < 2 or len(ys) < 2:
        raise ValueError(f"matmul: head_number {h} needs X and Y of rank >= 2, got X "
                         f"{list(xs)}, Y {list(ys)}")
    xm = list(xs[:-2]) + ([xs[-1], xs[-2]] if tx else [xs[-2], xs[-1]])
    ym = list(ys[:-2]) + ([ys[-1], ys[-2]] if ty else [ys[-2], ys[-1]])
    k, kb, nb = xm[-1], ym[-2], ym[-1]
    if k % h:
        raise ValueError(f"matmul: X's width {k} is not divisible by head_number {h}")
    if kb == k:
        return tuple(xm[:-1]) + (nb * h,), True
    if kb == k // h and nb % h == 0:
        return tuple(xm[:-1]) + (nb,), False
    raise ValueError(f"matmul: with head_number {h}, Y's height {kb} must be X's width {k} or "
                     f"{k // h} (and then Y's width {nb} divisible by {h})")


def _head_blocks(X, Y, tx, ty, h):
    x = np.swapaxes(X, -1, -2) if tx else X
    y = np.swapaxes(Y, -1, -2) if ty else Y
    _, rows = _head_split(X.shape, Y.shape, tx, ty, h)
    return np.split(x, h, axis=-1), np.split(y, h, axis=-2 if rows else -1), rows


def _matmul_heads(X, Y, tx, ty, h, alpha):
    xs, ys, _ = _head_blocks(X, Y, tx, ty, h)
    out = np.concatenate([np.matmul(a, b) for a, b in zip(xs, ys)], axis=-1)
    return out * out.dtype.type(alpha) if alpha != 1.0 else out


def _matmul_heads_grad(X, Y, dOut, tx, ty, h, alpha):
    xs, ys, rows = _head_blocks(X, Y, tx, ty, h)
    d = dOut * dOut.dtype.type(alpha) if alpha != 1.0 else dOut
    ds = np.split(d, h, axis=-1)
    dx = np.concatenate([np.matmul(g, np.swapaxes(b, -1, -2)) for g, b in zip(ds, ys)], -1)
    dy = np.concatenate([np.matmul(np.swapaxes(a, -1, -2), g) for g, a in zip(ds, xs)],
                        axis=-2 if rows else -1)
    return {"X": np.swapaxes(dx, -1, -2) if tx else dx,
            "Y": np.swapaxes(dy, -1, -2) if ty else dy}


@register
class Matmul(OpDef):
    """Out = alpha * op(X) @ op(Y), op = optional transpose of the last two dims; batch dims
    broadcast; a 1-D X is a row vector and a 1-D Y a column vector whose unit dim is dropped
    (both 1-D: shape [1]);  dX = alpha * dOut @ op(Y)^T, dY = alpha * op(X)^T @ dOut (reduced
    over broadcast batch dims). ``head_number`` > 1: fluid 1.8's multi-head product (see
    ``_head_split``)."""
    type, inputs, outputs = "matmul", ("X", "Y"), ("Out",)
    extra_attrs = {"use_mkldnn": False, "fused_reshape_X": [], "fused_reshape_Y": [],
                   "fused_transpose_X": [], "fused_transpose_Y": [],
                   "fused_reshape_Out": [], "fused_transpose_Out": []}

    def infer(self, X, Y, *, transpose_X=False, transpose_Y=False, head_number=1):
        if head_number > 1:
            return {"Out": VarSpec(_head_split(X.shape, Y.shape, transpose_X, transpose_Y,
                                               head_number)[0], X.dtype)}
        _, out = _matmul_out_shape(X.shape, Y.shape, transpose_X, transpose_Y)
        return {"Out": VarSpec(out, X.dtype)}

    @staticmethod
    def _prep(X, Y, tx, ty):
        x = X.reshape(1, -1) if X.ndim == 1 else X
        y = Y.reshape(-1, 1) if Y.ndim == 1 else Y
        if tx:
            x = np.swapaxes(x, -1, -2)
        if ty:
            y = np.swapaxes(y, -1, -2)
        return x, y

    def forward(self, X, Y, *, transpose_X=False, transpose_Y=False, alpha=1.0, head_number=1):
        if head_number > 1:
            return {"Out": _matmul_heads(X, Y, transpose_X, transpose_Y, head_number, alpha)}
        x, y = self._prep(X, Y, transpose_X, transpose_Y)
        if _stacks(x, y):
            out = _bmm(x, y, alpha)
        else:
            out = _mm(_stacked_rows(x), y) if _one_gemm(x, y, transpose_X) else _mm(x, y)
            if alpha != 1.0:
                out *= out.dtype.type(alpha)
        _, shape = _matmul_out_shape(X.shape, Y.shape, transpose_X, transpose_Y)
        return {"Out": out.reshape(shape)}

    def lower(self, in_specs, attrs):
        x, y = in_specs
        plain = not attrs.get("transpose_X") and not attrs.get("transpose_Y") and \
            attrs.get("alpha", 1.0) == 1.0 and attrs.get("head_number", 1) <= 1
        if plain and x is not None and y is not None and len(x.shape) >= 2 and \
                len(y.shape) >= 2:
            if len(x.shape) == 2 and len(y.shape) == 2:
                return _product(in_specs)
            if len(y.shape) == 2:                                       # a stack @ a matrix
                mm = _product(in_specs)
                return lambda X, Y: mm(_stacked_rows(X), Y).reshape(X.shape[:-1] + Y.shape[1:])
            return _mm if _product(in_specs) is _mm else _bmm          # batched
        return None

    def backward(self, X, Y, dOut, wanted=None, *, transpose_X=False, transpose_Y=False,
                 alpha=1.0, head_number=1):
        if head_number > 1:
            return _matmul_heads_grad(X, Y, dOut, transpose_X, transpose_Y, head_number, alpha)
        x, y = self._prep(X, Y, transpose_X, transpose_Y)
        full, _ = _matmul_out_shape(X.shape, Y.shape, transpose_X, transpose_Y)
        d = dOut.reshape(full)
        if _stacks(x, y) and d.dtype == x.dtype:
            return _stack_grads(X, Y, x, y, d, wanted, transpose_X, transpose_Y, alpha)
        if alpha != 1.0:
            d = d * d.dtype.type(alpha)
        xv, yv, _, _ = _matmul_views(X.shape, Y.shape, False, False)
        out = {}
        if _one_gemm(x, y, transpose_X):       # the stack's rows: one GEMM each, dY summed in it
            d2 = _stacked_rows(d)
            if (wanted is None or wanted == {"X", "Y"}) and np.float16 not in (x.dtype, y.dtype):
                dx, dy = _gemm_pair(d2, y.T, _stacked_rows(x).T, d2)
                return {"X": dx.reshape(X.shape),
                        "Y": (dy.T if transpose_Y else dy).reshape(Y.shape)}
            if wanted is None or "X" in wanted:
                out["X"] = _mm(d2, y.T).reshape(X.shape)
            if wanted is None or "Y" in wanted:
                dy = _mm(_stacked_rows(x).T, d2)
                out["Y"] = (dy.T if transpose_Y else dy).reshape(Y.shape)
            return out
        if (wanted is None or wanted == {"X", "Y"}) and x.ndim == 2 and y.ndim == 2 \
                and np.float16 not in (x.dtype, y.dtype):    # two matrices: dX and dY together
            dx, dy = _gemm_pair(d, y.T, x.T, d)
            return {"X": (dx.T if transpose_X else dx).reshape(X.shape),
                    "Y": (dy.T if transpose_Y else dy).reshape(Y.shape)}
        if wanted is None or "X" in wanted:
            dx = _mm(d, np.swapaxes(y, -1, -2))              # grad of op(X)
            if transpose_X:
                dx = np.swapaxes(dx, -1, -2)
            out["X"] = _sum_to(dx, xv).reshape(X.shape)
        if wanted is None or "Y" in wanted:
            dy = _mm(np.swapaxes(x, -1, -2), d)              # grad of op(Y)
            if transpose_Y:
                dy = np.swapaxes(dy, -1, -2)
            out["Y"] = _sum_to(dy, yv).reshape(Y.shape)
        return out

    def double_grad(self, g, **attrs):
        if attrs.get("head_number", 1) > 1:
            raise ValueError("matmul: second-order gradients of a multi-head matmul "
                             "(head_number > 1) are not supported; fluid 1.8 has none either")
        _bilinear_double_grad(g, "matmul", attrs)
