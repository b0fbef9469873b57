"""What bench/mlp_step.py and bench/dygraph_step.py share: the MLP's initial weights and data.
Import it after setting the BLAS thread variables (it imports NumPy)."""
from __future__ import annotations

import numpy as np


def init_weights(sizes, seed=0):
    """Glorot-uniform weights ``[fan_in, fan_out]`` and zero biases, float32."""
    rng = np.random.default_rng(seed)
    ws, bs = [], []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        limit = np.sqrt(6.0 / (fan_in + fan_out))
        ws.append(rng.uniform(-limit, limit, (fan_in, fan_out)).astype(np.float32))
        bs.append(np.zeros(fan_out, np.float32))
    return ws, bs


def make_data(sizes, batch, n=4, seed=1):
    """``n`` batches of (float32 normal inputs, int64 labels ``[batch, 1]``)."""
    rng = np.random.default_rng(seed)
    return [(rng.normal(size=(batch, sizes[0])).astype(np.float32),
             rng.integers(0, sizes[-1], (batch, 1)).astype(np.int64)) for _ in range(n)]
