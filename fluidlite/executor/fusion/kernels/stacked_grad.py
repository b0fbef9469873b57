"""``fused(stacked_weight_grad)``: the gradient of a weight shared by T products, as one GEMM.

A weight W used in T products ``Out_t = X_t @ W`` (an unrolled recurrent layer: the same W at
every time step) has the gradient ``dW = sum_t X_t^T @ dOut_t``. Unfused, that is T GEMMs of
inner size ``M_t`` (the batch: 20 rows in the PTB model, which BLAS runs at a fraction of its
rate, packing all of W's shape for each) and a T-input ``sum`` over T arrays of W's size. Here
the rows are stacked instead: ``dW = [X_1; ...; X_T]^T @ [dOut_1; ...; dOut_T]``, one GEMM of
inner size ``sum_t M_t``. The same sum of products, rounded in another order (float32: within
a few ulps of the float64 gradient, as the unfused chain is).
"""
from __future__ import annotations

from typing import Dict, Sequence

import numpy as np

from ....ops.linalg import _gemm
from ..matcher import FusedDef


class StackedWeightGrad(FusedDef):
    """Out = concat(X, rows)^T @ concat(OutGrad, rows), for 2-D ``X[t]: [M_t, K]`` and
    ``OutGrad[t]: [M_t, N]``."""

    def __init__(self) -> None:
        super().__init__("fused(stacked_weight_grad)", ("X*", "OutGrad*"), ("Out",))

    def forward(self, X: Sequence[np.ndarray],
                OutGrad: Sequence[np.ndarray]) -> Dict[str, np.ndarray]:
        if len(X) != len(OutGrad) or not X:
            raise ValueError(f"fused(stacked_weight_grad): {len(X)} X for {len(OutGrad)} "
                             f"OutGrad; expected as many of each, at least one")
        for t, (x, d) in enumerate(zip(X, OutGrad)):
            if x.ndim != 2 or d.ndim != 2 or x.shape[0] != d.shape[0]:
                raise ValueError(f"fused(stacked_weight_grad): X[{t}] {list(x.shape)} and "
                                 f"OutGrad[{t}] {list(d.shape)} must be 2-D with as many rows")
        return {"Out": _gemm(np.concatenate(X, axis=0).T, np.concatenate(OutGrad, axis=0))}
