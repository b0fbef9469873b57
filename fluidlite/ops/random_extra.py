"""More random ops of fluid 1.8: randint, randperm, sampling_id, random_crop and shuffle_batch.

Like the other random ops they are deterministic: the executor supplies ``rng`` (a fixed
non-zero ``seed`` attr reseeds every call, as in fluid). ``random_crop`` and ``shuffle_batch``
may instead carry their generator state in the ``Seed`` tensor, which they advance through
``SeedOut``, as fluid does."""
from __future__ import annotations

import numpy as np

from ..core.dtypes import VarType, to_numpy_dtype
from ..core.registry import OpDef, VarSpec, register
from .tensor import tensor_values


@register
class Randint(OpDef):
    """Out ~ uniform integers in [low, high) of ``shape`` (or the ``ShapeTensor`` /
    ``ShapeTensorList`` values)."""
    type, inputs, outputs = "randint", ("ShapeTensor?", "ShapeTensorList*?"), ("Out",)
    no_grad = True
    uses_rng = True

    def infer(self, ShapeTensor, ShapeTensorList, *, shape=(), low=0, high=0,
              dtype=VarType.INT64):
        if high <= low:
            raise ValueError(f"randint: high ({high}) must be greater than low ({low})")
        if dtype not in (VarType.INT32, VarType.INT64):
            raise ValueError(f"randint: dtype must be int32 or int64, but received {dtype}")
        if ShapeTensor is not None:
            shape = (-1,) * max(ShapeTensor.shape[0], 1)
        elif ShapeTensorList:
            shape = [d if d >= 0 else -1 for d in shape] if len(shape) == len(
                ShapeTensorList) else (-1,) * len(ShapeTensorList)
        return {"Out": VarSpec(shape, dtype)}

    def forward(self, ShapeTensor, ShapeTensorList, *, rng, shape=[], low=0, high=0, seed=0,
                dtype=VarType.INT64):
        dyn = tensor_values(ShapeTensor, ShapeTensorList)
        size = dyn if dyn is not None else [int(d) for d in shape]
        return {"Out": rng.integers(low, high, size=size).astype(to_numpy_dtype(dtype))}


@register
class Randperm(OpDef):
    """Out = a random permutation of 0 .. n-1."""
    type, inputs, outputs = "randperm", (), ("Out",)
    no_grad = True
    uses_rng = True

    def infer(self, *, n=1, dtype=VarType.INT64):
        if n < 1:
            raise ValueError(f"randperm: n must be >= 1, but received {n}")
        return {"Out": VarSpec((n,), dtype)}

    def forward(self, *, rng, n=1, dtype=VarType.INT64, seed=0):
        return {"Out": rng.permutation(n).astype(to_numpy_dtype(dtype))}


@register
class SamplingId(OpDef):
    """Out[i] = the first j where r - sum(X[i, :j+1]) < 0 for r ~ U[min, max) (the last column
    when the row sums to no more than r): one int64 id per row of probabilities X."""
    type, inputs, outputs = "sampling_id", ("X",), ("Out",)
    no_grad = True
    uses_rng = True

    def infer(self, X, *, min=0.0, max=1.0):
        if len(X.shape) != 2:
            raise ValueError(f"sampling_id: X must be 2-D [batch, classes], but its shape is "
                             f"{list(X.shape)}")
        if min > max:
            raise ValueError(f"sampling_id: min ({min}) must not exceed max ({max})")
        return {"Out": VarSpec((X.shape[0],), VarType.INT64)}

    def forward(self, X, *, rng, min=0.0, max=1.0, seed=0):
        r = rng.uniform(min, max, size=(X.shape[0], 1))
        hit = (r - np.cumsum(X, axis=1)) < 0
        ids = np.where(hit.any(axis=1), hit.argmax(axis=1), X.shape[1] - 1)
        return {"Out": ids.astype(np.int64)}


@register
class RandomCrop(OpDef):
    """Out = a window of ``shape`` (the trailing dims of X; the leading dims are instances, each
    cropped at its own uniform random offset). The generator is seeded from the int64 ``Seed``
    tensor when given (``startup_seed`` otherwise) and its next state is written to
    ``SeedOut``; without either, the executor's stream is used."""
    type, inputs, outputs = "random_crop", ("X", "Seed?"), ("Out", "SeedOut?")
    no_grad = True
    uses_rng = True

    def infer(self, X, Seed, *, shape=()):
        k = len(shape)
        if not 0 < k <= len(X.shape):
            raise ValueError(f"random_crop: shape {list(shape)} must name 1 to rank(X) = "
                             f"{len(X.shape)} trailing dims of X (shape {list(X.shape)})")
        for i, (d, s) in enumerate(zip(X.shape[-k:], shape)):
            if s <= 0 or d >= 0 and s > d:
                raise ValueError(f"random_crop: shape[{i}] = {s} must be in [1, {d}] (X has "
                                 f"shape {list(X.shape)})")
        return {"Out": VarSpec(tuple(X.shape[:-k]) + tuple(shape), X.dtype),
                "SeedOut": VarSpec((1,), VarType.INT64)}

    def forward(self, X, Seed, *, rng, shape=[], startup_seed=0):
        if Seed is not None or startup_seed:
            seed = int(np.asarray(Seed).reshape(-1)[0]) if Seed is not None else startup_seed
            rng = np.random.default_rng(seed & 0xFFFFFFFFFFFFFFFF)
        k = len(shape)
        lead, tail = X.shape[:-k], X.shape[-k:]
        if any(s > d for s, d in zip(shape, tail)):
            raise ValueError(f"random_crop: the crop {list(shape)} does not fit X of shape "
                             f"{list(X.shape)}")
        flat = X.reshape((-1,) + tail)
        out = np.empty((flat.shape[0],) + tuple(shape), dtype=X.dtype)
        for i in range(flat.shape[0]):
            idx = tuple(slice(o, o + s) for o, s in
                        zip((int(rng.integers(0, d - s + 1)) for d, s in zip(tail, shape)),
                            shape))
            out[i] = flat[i][idx]
        seed_out = np.array([rng.integers(0, np.iinfo(np.int64).max)], dtype=np.int64)
        return {"Out": out.reshape(tuple(lead) + tuple(shape)), "SeedOut": seed_out}


@register
class ShuffleBatch(OpDef):
    """Shuffles the rows of X (every dim but the last is a row index: X viewed as
    [prod(dims[:-1]), dims[-1]]): ``Out[ShuffleIdx[i]] = X[i]`` for a random permutation
    ShuffleIdx (int64). The permutation's generator is seeded from the int64 ``Seed`` tensor
    when given (else ``startup_seed``) and SeedOut [1] carries the next seed, so a persistable
    Seed fed back as SeedOut gives a new order every run, as in fluid 1.8. The permutation is
    NumPy's (``default_rng(seed)``), not libstdc++'s minstd_rand0 ``std::shuffle``, so the
    orders differ from fluid's for the same seed. dX[i] = dOut[ShuffleIdx[i]]."""
    type, inputs, outputs = "shuffle_batch", ("X", "Seed?"), ("Out", "ShuffleIdx", "SeedOut?")
    grad_uses = ("ShuffleIdx",)
    grad_outputs = ("X",)

    def infer(self, X, Seed, *, startup_seed=0):
        if X.ndim < 1:
            raise ValueError(f"shuffle_batch: X must have at least one dim, got shape "
                             f"{list(X.shape)}")
        if Seed is not None and Seed.dtype != VarType.INT64:
            raise ValueError(f"shuffle_batch: Seed must be an int64 tensor, got {Seed.dtype}")
        return {"Out": X, "ShuffleIdx": VarSpec((-1,), VarType.INT64),
                "SeedOut": VarSpec((1,), VarType.INT64)}

    def forward(self, X, Seed, *, startup_seed=0):
        seed = int(np.asarray(Seed).reshape(-1)[0]) if Seed is not None and np.size(Seed) \
            else int(startup_seed)
        rng = np.random.default_rng(seed & 0xFFFFFFFFFFFFFFFF)
        # fluid's kernel: rows = prod(dims[:-1]) (a 1-D X is one row, left in place)
        flat = X.reshape(int(np.prod(X.shape[:-1])), X.shape[-1])
        idx = rng.permutation(flat.shape[0]).astype(np.int64)
        out = np.empty_like(flat)
        out[idx] = flat
        seed_out = np.array([rng.integers(0, np.iinfo(np.int64).max)], dtype=np.int64)
        return {"Out": out.reshape(X.shape), "ShuffleIdx": idx, "SeedOut": seed_out}

    def backward(self, ShuffleIdx, dOut, dShuffleIdx=None, dSeedOut=None, *, startup_seed=0):
        flat = dOut.reshape(int(np.prod(dOut.shape[:-1])), dOut.shape[-1])
        return {"X": flat[np.asarray(ShuffleIdx, np.int64)].reshape(dOut.shape)}
