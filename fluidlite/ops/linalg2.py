"""Paddle 2.x's matrix ops (``paddle.linalg``) as exported programs hold them: ``inverse``,
``determinant``, ``slogdeterminant``, ``matrix_power``, ``cholesky``, ``mv``, ``multi_dot``,
``solve``, ``triangular_solve``. Batched over leading dims (broadcast for the two solves);
values and gradients are checked against Paddle 2.6 in tests/ops/test_paddle_oracle.py.

Gradients (A^-T the inverse transposed; sums over broadcast batch dims):
``inverse``: dA = -A^-T dOut A^-T;  ``determinant``: dA = dOut det(A) A^-T;
``slogdeterminant``: dA = dLogAbsDet A^-T (the sign's gradient is 0);  ``matrix_power``:
dA = sum_k (A^T)^k dOut (A^T)^(n-1-k) (negative n through the inverse);  ``cholesky``
(A = L L^T): dA = sym(L^-T Phi(L^T dL) L^-1), Phi the lower triangle with half its diagonal;
``solve``: dY = A^-T dOut, dA = -dY Out^T;  ``triangular_solve``: the same on the triangle.
"""
from __future__ import annotations

from typing import Any, List, Sequence, Tuple

import numpy as np

from ..core.registry import OpDef, VarSpec, register
from .broadcast import reduce_to


def _need(op: str, cond: bool, msg: str) -> None:
    if not cond:
        raise ValueError(f"{op}: {msg}")


def _square(op: str, shape: Sequence[int], name: str = "X") -> None:
    _need(op, len(shape) >= 2 and (shape[-1] == shape[-2] or -1 in shape[-2:]),
          f"{name} must be a (batch of) square matrices [..., n, n], got {list(shape)}")


def _t(a: np.ndarray) -> np.ndarray:
    return np.swapaxes(a, -1, -2)


@register
class Inverse(OpDef):
    """Output = Input^-1 (per matrix of the batch);  dInput = -Output^T dOutput Output^T."""
    type, inputs, outputs = "inverse", ("Input",), ("Output",)
    grad_uses = ("Output",)

    def infer(self, Input):
        _square(self.type, Input.shape, "Input")
        return {"Output": Input}

    def forward(self, Input):
        return {"Output": np.linalg.inv(Input).astype(Input.dtype, copy=False)}

    def backward(self, Output, dOutput):
        inv_t = _t(Output)
        return {"Input": -(inv_t @ dOutput @ inv_t)}


@register
class Determinant(OpDef):
    """Out = det(Input) per matrix;  dInput = dOut det(Input) Input^-T."""
    type, inputs, outputs = "determinant", ("Input",), ("Out",)
    grad_uses = ("Input", "Out")

    def infer(self, Input):
        _square(self.type, Input.shape, "Input")
        return {"Out": VarSpec(tuple(Input.shape[:-2]), Input.dtype)}

    def forward(self, Input):
        return {"Out": np.asarray(np.linalg.det(Input)).astype(Input.dtype, copy=False)}

    def backward(self, Input, Out, dOut):
        scale = (np.asarray(dOut) * np.asarray(Out))[..., None, None]
        return {"Input": (scale * _t(np.linalg.inv(Input))).astype(Input.dtype, copy=False)}


@register
class Slogdeterminant(OpDef):
    """Out [2, ...] = (sign of det(Input), log |det(Input)|) per matrix;
    dInput = dOut[1] Input^-T (the sign is piecewise constant)."""
    type, inputs, outputs = "slogdeterminant", ("Input",), ("Out",)
    grad_uses = ("Input",)

    def infer(self, Input):
        _square(self.type, Input.shape, "Input")
        return {"Out": VarSpec((2,) + tuple(Input.shape[:-2]), Input.dtype)}

    def forward(self, Input):
        sign, logdet = np.linalg.slogdet(Input)
        return {"Out": np.stack([sign, logdet]).astype(Input.dtype, copy=False)}

    def backward(self, Input, dOut):
        g = np.asarray(dOut)[1][..., None, None]
        return {"Input": (g * _t(np.linalg.inv(Input))).astype(Input.dtype, copy=False)}


@register
class MatrixPower(OpDef):
    """Out = X^n per matrix (n = 0: identity; n < 0: (X^-1)^|n|);
    dX = sum_{k<m} (B^T)^k dOut (B^T)^(m-1-k) with B = X (m = n) or B = X^-1 (m = -n, then
    dX = -B^T dB B^T)."""
    type, inputs, outputs = "matrix_power", ("X",), ("Out",)
    grad_uses = ("X",)

    def infer(self, X, *, n=1):
        _square(self.type, X.shape)
        return {"Out": X}

    def forward(self, X, *, n=1):
        base = np.linalg.inv(X) if n < 0 else X
        return {"Out": np.linalg.matrix_power(base, abs(int(n))).astype(X.dtype, copy=False)}

    def backward(self, X, dOut, *, n=1):
        m = abs(int(n))
        base = np.linalg.inv(X) if n < 0 else X
        bt = _t(base)
        powers = [np.broadcast_to(np.eye(X.shape[-1], dtype=X.dtype), X.shape)]
        for _ in range(max(m - 1, 0)):
            powers.append(powers[-1] @ bt)
        d = np.zeros_like(dOut)
        for k in range(m):
            d = d + powers[k] @ dOut @ powers[m - 1 - k]
        if n < 0:
            d = -(bt @ d @ bt)
        return {"X": d.astype(X.dtype, copy=False)}


@register
class Cholesky(OpDef):
    """Out = L (lower, A = L L^T) or U = L^T (``upper``) of the symmetric positive-definite X;
    dX = sym(L^-T Phi(L^T dL) L^-1) (Phi: lower triangle, half diagonal)."""
    type, inputs, outputs = "cholesky", ("X",), ("Out",)
    grad_uses = ("Out",)

    def infer(self, X, *, upper=False):
        _square(self.type, X.shape)
        return {"Out": X}

    def forward(self, X, *, upper=False):
        try:
            low = np.linalg.cholesky(X)
        except np.linalg.LinAlgError:
            raise ValueError("cholesky: X must be symmetric positive-definite (the "
                             "factorization failed)") from None
        return {"Out": (_t(low) if upper else low).astype(X.dtype, copy=False)}

    def backward(self, Out, dOut, *, upper=False):
        low = _t(Out) if upper else Out
        dl = _t(dOut) if upper else dOut
        phi = np.tril(_t(low) @ dl)
        phi = phi - 0.5 * np.eye(low.shape[-1], dtype=low.dtype) * phi
        inv = np.linalg.inv(low)
        s = _t(inv) @ phi @ inv
        return {"X": (0.5 * (s + _t(s))).astype(Out.dtype, copy=False)}


@register
class Mv(OpDef):
    """Out = X @ Vec (matrix [m, n] times vector [n]);  dX = dOut Vec^T, dVec = X^T dOut."""
    type, inputs, outputs = "mv", ("X", "Vec"), ("Out",)

    def infer(self, X, Vec):
        _need(self.type, len(X.shape) == 2 and len(Vec.shape) == 1 and
              (X.shape[1] in (-1, Vec.shape[0]) or Vec.shape[0] == -1),
              f"X must be [m, n] and Vec [n], got {list(X.shape)} and {list(Vec.shape)}")
        return {"Out": VarSpec((X.shape[0],), X.dtype)}

    def forward(self, X, Vec):
        return {"Out": X @ Vec}

    def backward(self, X, Vec, dOut):
        return {"X": np.outer(dOut, Vec).astype(X.dtype, copy=False), "Vec": X.T @ dOut}


@register
class MultiDot(OpDef):
    """Out = X[0] @ X[1] @ ... (a 1-D first operand is a row, a 1-D last one a column; the
    result drops those dims);  dX[i] = (left product)^T dOut (right product)^T."""
    type, inputs, outputs = "multi_dot", ("X*",), ("Out",)

    @staticmethod
    def _mats(xs: Sequence[Any]) -> Tuple[List[Any], bool, bool]:
        row, col = len(xs[0].shape) == 1, len(xs[-1].shape) == 1
        mats = list(xs)
        return mats, row, col

    def infer(self, X):
        _need(self.type, len(X) >= 2, f"needs at least 2 operands, got {len(X)}")
        _, row, col = self._mats(X)
        shape = ([] if row else [X[0].shape[0]]) + ([] if col else [X[-1].shape[-1]])
        return {"Out": VarSpec(shape, X[0].dtype)}

    def forward(self, X):
        return {"Out": np.linalg.multi_dot(list(X)).astype(X[0].dtype, copy=False)}

    def backward(self, X, dOut):
        mats = [np.atleast_2d(x) for x in X]
        if X[-1].ndim == 1:
            mats[-1] = X[-1].reshape(-1, 1)
        g = np.asarray(dOut).reshape(mats[0].shape[0], mats[-1].shape[1])
        grads = []
        for i in range(len(mats)):
            left = np.linalg.multi_dot(mats[:i]) if i > 1 else (mats[0] if i == 1 else None)
            right = np.linalg.multi_dot(mats[i + 1:]) if len(mats) - i > 2 else \
                (mats[-1] if i == len(mats) - 2 else None)
            d = g if left is None else left.T @ g
            d = d if right is None else d @ right.T
            grads.append(d.reshape(X[i].shape).astype(X[i].dtype, copy=False))
        return {"X": grads}


def _solve(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a^-1 b for matrices b [..., n, k] with the batch dims broadcast first: NumPy 1.x reads
    a b of one dim less than a as a batch of vectors, NumPy 2 as matrices -- equal ranks mean
    the same to both."""
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return np.linalg.solve(np.broadcast_to(a, batch + a.shape[-2:]),
                           np.broadcast_to(b, batch + b.shape[-2:]))


def _vector_rhs(x_shape: Sequence[int], y_shape: Sequence[int]) -> bool:
    """Paddle's solve: Y is a (batch of) column vector(s) when 1-D, or when its shape is X's
    without the last dim."""
    return len(y_shape) == 1 or tuple(y_shape) == tuple(x_shape[:-1])


def _as_matrix(Y: np.ndarray, X: np.ndarray) -> Tuple[np.ndarray, bool]:
    if _vector_rhs(X.shape, Y.shape):
        return Y[..., None], True
    return Y, False


@register
class Solve(OpDef):
    """Out = X^-1 Y (X [..., n, n]; Y [..., n, k], or vectors: [n] or X's shape without its
    last dim; batch dims broadcast);  dY = X^-T dOut, dX = -dY Out^T (summed over broadcast
    dims)."""
    type, inputs, outputs = "solve", ("X", "Y"), ("Out",)
    grad_uses = ("X", "Y", "Out")

    def infer(self, X, Y):
        _square(self.type, X.shape)
        vec = _vector_rhs(X.shape, Y.shape)
        yb = tuple(Y.shape[:-1] if vec else Y.shape[:-2])
        xb = tuple(X.shape[:-2])
        batch = (-1,) * max(len(xb), len(yb)) if -1 in xb + yb else \
            np.broadcast_shapes(xb, yb)
        tail = (X.shape[-1],) if vec else (X.shape[-1], Y.shape[-1])
        return {"Out": VarSpec(tuple(batch) + tail, X.dtype)}

    def forward(self, X, Y):
        y, vec = _as_matrix(Y, X)
        out = _solve(X, y)
        return {"Out": (out[..., 0] if vec else out).astype(X.dtype, copy=False)}

    def backward(self, X, Y, Out, dOut):
        y, vec = _as_matrix(Y, X)
        o = Out[..., None] if vec else Out
        d = dOut[..., None] if vec else dOut
        dy = _solve(_t(X), d)
        dx = -(dy @ _t(o))
        dyr = dy[..., 0] if vec else dy
        return {"X": reduce_to(dx, X.shape).astype(X.dtype, copy=False),
                "Y": reduce_to(dyr, Y.shape).astype(Y.dtype, copy=False)}


@register
class TriangularSolve(OpDef):
    """Out = op(A)^-1 Y with A the ``upper`` (else lower) triangle of X (unit diagonal with
    ``unitriangular``), op transposing with ``transpose``; batch dims broadcast.
    dY = op(A)^-T dOut, dX = the triangle of -dY Out^T (transposed back with ``transpose``;
    0 on a unit diagonal)."""
    type, inputs, outputs = "triangular_solve", ("X", "Y"), ("Out",)
    grad_uses = ("X", "Y", "Out")

    def infer(self, X, Y, *, upper=True, transpose=False, unitriangular=False):
        _square(self.type, X.shape)
        xb, yb = tuple(X.shape[:-2]), tuple(Y.shape[:-2])
        batch = (-1,) * max(len(xb), len(yb)) if -1 in xb + yb else \
            np.broadcast_shapes(xb, yb)
        return {"Out": VarSpec(tuple(batch) + tuple(Y.shape[-2:]), X.dtype)}

    @staticmethod
    def _a(X: np.ndarray, upper: bool, unitriangular: bool) -> np.ndarray:
        a = np.triu(X) if upper else np.tril(X)
        if unitriangular:
            n = X.shape[-1]
            a = a * (1 - np.eye(n, dtype=X.dtype)) + np.eye(n, dtype=X.dtype)
        return a

    def forward(self, X, Y, *, upper=True, transpose=False, unitriangular=False):
        a = self._a(X, upper, unitriangular)
        out = _solve(_t(a) if transpose else a, Y)
        return {"Out": out.astype(X.dtype, copy=False)}

    def backward(self, X, Y, Out, dOut, *, upper=True, transpose=False, unitriangular=False):
        a = self._a(X, upper, unitriangular)
        op_a = _t(a) if transpose else a
        dy = _solve(_t(op_a), dOut)
        d_op = -(dy @ _t(Out))
        da = _t(d_op) if transpose else d_op
        da = np.triu(da) if upper else np.tril(da)
        if unitriangular:
            da = da * (1 - np.eye(X.shape[-1], dtype=da.dtype))
        return {"X": reduce_to(da, X.shape).astype(X.dtype, copy=False),
                "Y": reduce_to(dy, Y.shape).astype(Y.dtype, copy=False)}
