"""Paddle 2.x's matrix decompositions (``paddle.linalg``) as exported programs hold them:
``eigh``, ``eigvalsh``, ``svd``, ``qr``, ``cholesky_solve`` and ``matrix_rank``, batched over
leading dims, real dtypes (values and gradients are checked against Paddle 2.6 in
tests/ops/test_paddle_oracle.py). Each eigen / singular vector's sign is fixed (its
largest-magnitude entry positive), so results are the same whichever LAPACK NumPy links;
Paddle returns its LAPACK's signs, which differ between builds.

Gradients (V^T the transpose; F_ij = 1 / (w_j - w_i) off the diagonal, 0 on it):
``eigh`` (X = V diag(w) V^T): dX = sym(V (diag(dw) + F o (V^T dV)) V^T), sym(G) =
(G + G^T) / 2: the gradient along symmetric matrices, as Paddle (not the triangle ``UPLO``
reads);  ``eigvalsh``: dX = V diag(dw) V^T;
``svd`` (X = U diag(s) VH, reduced): with J = F o (U^T dU - dU^T U),
K = F o (V^T dV - dV^T V) for F_ij = 1 / (s_j^2 - s_i^2):  dX = U (diag(ds) + J S + S K) V^T
+ (I - U U^T) dU S^-1 V^T + U S^-1 dV^T (I - V V^T);
``qr`` (X = Q R, reduced, m >= n):  M = R dR^T - dQ^T Q,  dX = (dQ + Q copyltu(M)) R^-T with
copyltu(M) = tril(M) + tril(M, -1)^T;
``cholesky_solve`` (Out = (Y Y^T)^-1 X for the lower factor Y):  dX = (Y Y^T)^-1 dOut,
dY = tril(dA Y) (``upper``: triu(Y dA)) with dA = -(dX Out^T + Out dX^T).
"""
from __future__ import annotations

from typing import Any, Sequence, Tuple

import numpy as np

from ..core.dtypes import FLOATS, VarType
from ..core.registry import OpDef, VarSpec, register
from .broadcast import reduce_to


def _need(op: str, cond: bool, msg: str) -> None:
    if not cond:
        raise ValueError(f"{op}: {msg}")


def _t(a: np.ndarray) -> np.ndarray:
    return np.swapaxes(a, -1, -2)


def _float(op: str, spec: Any, name: str = "X") -> None:
    _need(op, spec.dtype in FLOATS, f"{name} must be a float tensor, got {spec.dtype.name}")


def _matrices(op: str, shape: Sequence[int], square: bool = False) -> None:
    _need(op, len(shape) >= 2, f"X must be a (batch of) matrices [..., m, n], got {list(shape)}")
    if square:
        _need(op, shape[-1] == shape[-2] or -1 in shape[-2:],
              f"X must be a (batch of) square matrices [..., n, n], got {list(shape)}")


def _gaps(w: np.ndarray) -> np.ndarray:
    """F_ij = 1 / (w_j - w_i) for i != j, 0 on the diagonal (and for equal values)."""
    diff = w[..., None, :] - w[..., :, None]
    with np.errstate(divide="ignore"):
        f = np.where(diff != 0, 1.0 / np.where(diff != 0, diff, 1.0), 0.0)
    return f.astype(w.dtype, copy=False)


def _sign_fixed(v: np.ndarray) -> np.ndarray:
    """The signs of the column vectors of ``v`` [..., n, k] fixed so that each column's
    largest-magnitude entry (the first of equal ones) is positive: LAPACK builds differ in the
    signs they return (NumPy 1.23's and 2.4's do), a fixed rule gives the same numbers on
    every one."""
    idx = np.argmax(np.abs(v), axis=-2)[..., None, :]
    sign = np.where(np.take_along_axis(v, idx, axis=-2) < 0, -1.0, 1.0).astype(v.dtype)
    return sign


def _uplo(op: str, UPLO: str) -> str:
    _need(op, UPLO in ("L", "U"), f"UPLO must be 'L' or 'U', got {UPLO!r}")
    return UPLO


@register
class Eigh(OpDef):
    """Eigenvalues (ascending) and eigenvectors (columns) of the symmetric X, read from its
    ``UPLO`` triangle;  dX = sym(V (diag(dw) + F o (V^T dV)) V^T) (module docstring)."""
    type, inputs, outputs = "eigh", ("X",), ("Eigenvalues", "Eigenvectors")
    grad_uses = ("Eigenvalues", "Eigenvectors")

    def infer(self, X, *, UPLO="L"):
        _uplo(self.type, UPLO)
        _float(self.type, X)
        _matrices(self.type, X.shape, square=True)
        return {"Eigenvalues": VarSpec(X.shape[:-1], X.dtype), "Eigenvectors": X}

    def forward(self, X, *, UPLO="L"):
        w, v = np.linalg.eigh(X, UPLO=_uplo(self.type, UPLO))
        v = v * _sign_fixed(v)
        return {"Eigenvalues": w.astype(X.dtype, copy=False),
                "Eigenvectors": v.astype(X.dtype, copy=False)}

    def backward(self, Eigenvalues, Eigenvectors, dEigenvalues, dEigenvectors, *, UPLO="L"):
        w, v = Eigenvalues, Eigenvectors
        inner = np.zeros(v.shape, v.dtype)
        if dEigenvectors is not None:
            inner = _gaps(w) * (_t(v) @ dEigenvectors)
        if dEigenvalues is not None:
            inner = inner + dEigenvalues[..., None] * np.eye(w.shape[-1], dtype=v.dtype)
        g = v @ inner @ _t(v)
        return {"X": ((g + _t(g)) / 2).astype(v.dtype, copy=False)}


@register
class Eigvalsh(OpDef):
    """Eigenvalues (ascending) of the symmetric X (its ``UPLO`` triangle); Eigenvectors is
    Paddle's intermediate output, kept for the gradient;  dX = V diag(dw) V^T."""
    type, inputs, outputs = "eigvalsh", ("X",), ("Eigenvalues", "Eigenvectors")
    grad_uses = ("Eigenvectors",)

    def infer(self, X, *, UPLO="L", is_test=False):
        _uplo(self.type, UPLO)
        _float(self.type, X)
        _matrices(self.type, X.shape, square=True)
        return {"Eigenvalues": VarSpec(X.shape[:-1], X.dtype), "Eigenvectors": X}

    def forward(self, X, *, UPLO="L", is_test=False):
        w, v = np.linalg.eigh(X, UPLO=_uplo(self.type, UPLO))
        v = v * _sign_fixed(v)
        return {"Eigenvalues": w.astype(X.dtype, copy=False),
                "Eigenvectors": v.astype(X.dtype, copy=False)}

    def backward(self, Eigenvectors, dEigenvalues, dEigenvectors=None, *, UPLO="L",
                 is_test=False):
        v = Eigenvectors
        return {"X": ((v * dEigenvalues[..., None, :]) @ _t(v)).astype(v.dtype, copy=False)}


@register
class Svd(OpDef):
    """X = U diag(S) VH with S descending (``full_matrices``: U [.., m, m], VH [.., n, n];
    else k = min(m, n) columns);  dX: the module docstring's formula (reduced form)."""
    type, inputs, outputs = "svd", ("X",), ("U", "S", "VH")
    grad_uses = ("U", "S", "VH")

    def infer(self, X, *, full_matrices=False):
        _float(self.type, X)
        _matrices(self.type, X.shape)
        m, n = X.shape[-2:]
        k = -1 if -1 in (m, n) else min(m, n)
        batch = list(X.shape[:-2])
        u_cols, vh_rows = (m, n) if full_matrices else (k, k)
        return {"U": VarSpec(batch + [m, u_cols], X.dtype), "S": VarSpec(batch + [k], X.dtype),
                "VH": VarSpec(batch + [vh_rows, n], X.dtype)}

    def forward(self, X, *, full_matrices=False):
        u, s, vh = np.linalg.svd(X, full_matrices=full_matrices)
        k = s.shape[-1]
        sign = _sign_fixed(u[..., :k])           # a singular pair flips together
        u = np.concatenate([u[..., :k] * sign, u[..., k:]], axis=-1)
        vh = np.concatenate([vh[..., :k, :] * np.swapaxes(sign, -1, -2), vh[..., k:, :]],
                            axis=-2)
        return {"U": u.astype(X.dtype, copy=False), "S": s.astype(X.dtype, copy=False),
                "VH": vh.astype(X.dtype, copy=False)}

    def backward(self, U, S, VH, dU, dS, dVH, *, full_matrices=False):
        k = S.shape[-1]
        u, vh = U[..., :k], VH[..., :k, :]
        v = _t(vh)
        eye = np.eye(k, dtype=S.dtype)
        mid = np.zeros(S.shape + (k,), S.dtype)
        if dS is not None:
            mid = mid + dS[..., None] * eye
        s_mat = S[..., None] * eye
        s_inv = np.where(S != 0, 1.0 / np.where(S != 0, S, 1.0), 0.0).astype(S.dtype)
        gaps = _gaps(S * S)
        extra = 0
        if dU is not None:
            du = dU[..., :k]
            j = gaps * (_t(u) @ du)            # F o (M - M^T) = J + J^T: F is antisymmetric
            mid = mid + (j + _t(j)) @ s_mat
            if u.shape[-2] > k:
                proj = du - u @ (_t(u) @ du)
                extra = extra + (proj * s_inv[..., None, :]) @ vh
        if dVH is not None:
            dv = _t(dVH[..., :k, :])
            kk = gaps * (_t(v) @ dv)
            mid = mid + s_mat @ (kk + _t(kk))
            if v.shape[-2] > k:
                proj = dv - v @ (_t(v) @ dv)
                extra = extra + (u * s_inv[..., None, :]) @ _t(proj)
        return {"X": (u @ mid @ vh + extra).astype(S.dtype, copy=False)}


@register
class Qr(OpDef):
    """X = Q R (``mode`` 'reduced': Q [.., m, k], R [.., k, n] for k = min(m, n);
    'complete': Q [.., m, m]; 'r': R only, Q empty), LAPACK's signs (R's diagonal may be
    negative);  dX (reduced, m >= n): the module docstring's formula."""
    type, inputs, outputs = "qr", ("X",), ("Q", "R")
    grad_uses = ("Q", "R")

    def _mode(self, mode: str) -> str:
        _need(self.type, mode in ("reduced", "complete", "r"),
              f"mode must be 'reduced', 'complete' or 'r', got {mode!r}")
        return mode

    def infer(self, X, *, mode="reduced"):
        self._mode(mode)
        _float(self.type, X)
        _matrices(self.type, X.shape)
        m, n = X.shape[-2:]
        k = -1 if -1 in (m, n) else min(m, n)
        batch = list(X.shape[:-2])
        q = [0] if mode == "r" else batch + [m, m if mode == "complete" else k]
        r = batch + [m if mode == "complete" else k, n]
        return {"Q": VarSpec(q, X.dtype), "R": VarSpec(r, X.dtype)}

    def forward(self, X, *, mode="reduced"):
        q, r = np.linalg.qr(X, mode="complete" if self._mode(mode) == "complete" else "reduced")
        if mode == "r":
            q = np.zeros((0,), X.dtype)
        return {"Q": q.astype(X.dtype, copy=False), "R": r.astype(X.dtype, copy=False)}

    def backward(self, Q, R, dQ, dR, *, mode="reduced"):
        m, n = (Q.shape[-2] if Q.ndim >= 2 else -1), R.shape[-1]
        _need(self.type, mode == "reduced" and m >= n,
              f"the gradient is defined for mode 'reduced' with m >= n (Paddle's rule), got "
              f"mode {mode!r} and X [.., {m}, {n}]")
        dq = np.zeros(Q.shape, Q.dtype) if dQ is None else dQ
        dr = np.zeros(R.shape, R.dtype) if dR is None else dR
        mm = R @ _t(dr) - _t(dq) @ Q
        copyltu = np.tril(mm) + _t(np.tril(mm, -1))
        rhs = dq + Q @ copyltu                      # dX R^T = rhs  ->  dX = rhs R^-T
        dx = _t(np.linalg.solve(R, _t(rhs)))
        return {"X": dx.astype(Q.dtype, copy=False)}


@register
class CholeskySolve(OpDef):
    """Out = A^-1 X for A = Y Y^T (``upper``: A = Y^T Y), Y a Cholesky factor (batch dims
    broadcast);  dX = A^-1 dOut, dY = tril(dA Y) (``upper``: triu(Y dA)) for
    dA = -(dX Out^T + Out dX^T)."""
    type, inputs, outputs = "cholesky_solve", ("X", "Y"), ("Out",)
    grad_uses = ("X", "Y", "Out")

    def infer(self, X, Y, *, upper=False):
        _float(self.type, X)
        _matrices(self.type, Y.shape, square=True)
        _need(self.type, len(X.shape) >= 2, f"X must be [..., n, k], got {list(X.shape)}")
        n = Y.shape[-1]
        _need(self.type, -1 in (n, X.shape[-2]) or X.shape[-2] == n,
              f"X [..., {X.shape[-2]}, k] must have Y's {n} rows")
        batch = np.broadcast_shapes(tuple(max(d, 1) for d in X.shape[:-2]),
                                    tuple(max(d, 1) for d in Y.shape[:-2]))
        return {"Out": VarSpec(tuple(batch) + tuple(X.shape[-2:]), X.dtype)}

    def _a(self, Y: np.ndarray, upper: bool) -> np.ndarray:
        # only Y's triangle is read (LAPACK's potrs): the other one may hold anything
        return _t(np.triu(Y)) @ np.triu(Y) if upper else np.tril(Y) @ _t(np.tril(Y))

    def forward(self, X, Y, *, upper=False):
        a = self._a(Y, upper)
        batch = np.broadcast_shapes(X.shape[:-2], Y.shape[:-2])
        a = np.broadcast_to(a, batch + a.shape[-2:])
        b = np.broadcast_to(X, batch + X.shape[-2:])
        return {"Out": np.linalg.solve(a, b).astype(X.dtype, copy=False)}

    def backward(self, X, Y, Out, dOut, *, upper=False):
        a = self._a(Y, upper)
        batch = np.broadcast_shapes(X.shape[:-2], Y.shape[:-2])
        dx = np.linalg.solve(np.broadcast_to(a, batch + a.shape[-2:]), dOut)
        da = -(dx @ _t(Out))
        da = da + _t(da)                           # d/dA of A^-1 X, symmetric
        dy = np.triu(np.triu(Y) @ da) if upper else np.tril(da @ np.tril(Y))
        return {"X": reduce_to(dx, X.shape).astype(X.dtype, copy=False),
                "Y": reduce_to(dy, Y.shape).astype(Y.dtype, copy=False)}


@register
class MatrixRank(OpDef):
    """Out = the number of singular values (``hermitian``: |eigenvalues|) above the
    tolerance: ``tol`` or TolTensor, or with ``use_default_tol`` max(m, n) * s_max * eps of
    X's dtype (int64; one value per matrix of the batch)."""
    type, inputs, outputs = "matrix_rank", ("X", "TolTensor?"), ("Out",)
    no_grad = True

    def infer(self, X, TolTensor=None, *, tol=0.0, hermitian=False, use_default_tol=True):
        _float(self.type, X)
        _matrices(self.type, X.shape, square=hermitian)
        return {"Out": VarSpec(X.shape[:-2], VarType.INT64)}

    def forward(self, X, TolTensor=None, *, tol=0.0, hermitian=False, use_default_tol=True):
        s = np.abs(np.linalg.eigvalsh(X)) if hermitian else np.linalg.svd(X, compute_uv=False)
        s = s.astype(np.float64)      # the threshold in float64 whatever X's dtype
        smax = s.max(axis=-1, initial=0.0)
        if TolTensor is not None:
            tol_t = np.asarray(TolTensor, np.float64)
            limit = np.broadcast_to(tol_t.reshape(()) if tol_t.size == 1 else tol_t, smax.shape)
        elif use_default_tol:
            limit = smax * (max(X.shape[-2:]) * float(np.finfo(X.dtype).eps))
        else:
            limit = np.full(smax.shape, float(np.float32(tol)))
        return {"Out": (s > limit[..., None]).sum(axis=-1).astype(np.int64)}
