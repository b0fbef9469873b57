"""Random tensor ops. Deterministic: the executor supplies ``rng`` (see executor/plan.py)."""
from __future__ import annotations

import numpy as np

from ..core.dtypes import VarType, to_numpy_dtype
from ..core.registry import OpDef, VarSpec, register
from .tensor import tensor_values


def _standard(draw, shape, dtype) -> np.ndarray:
    """Draw in the target precision directly (float32 draws need no float64 temporary, which
    for a large weight would double the startup program's peak memory)."""
    dt = to_numpy_dtype(dtype)
    if dt in (np.float32, np.float64):
        return draw(size=shape, dtype=dt)
    return draw(size=shape).astype(dt)


class _RandomOp(OpDef):
    inputs, outputs = (), ("Out",)
    no_grad = True
    uses_rng = True

    def infer(self, *, shape=(), dtype=VarType.FP32):
        return {"Out": VarSpec(shape, dtype)}


class _ShapedRandomOp(_RandomOp):
    """A random op whose shape may come from a ``ShapeTensor`` (1-D int) or a
    ``ShapeTensorList`` (1-element int tensors) at run time, as in fluid 1.8."""
    inputs = ("ShapeTensor?", "ShapeTensorList*?")

    def infer(self, ShapeTensor=None, ShapeTensorList=(), *, shape=(), dtype=VarType.FP32):
        if ShapeTensor is not None:
            shape = (-1,) * max(ShapeTensor.shape[0], 1) if ShapeTensor.shape else shape
        elif ShapeTensorList and len(shape) != len(ShapeTensorList):
            shape = (-1,) * len(ShapeTensorList)
        return {"Out": VarSpec(shape, dtype)}


def _run_shape(ShapeTensor, ShapeTensorList, shape):
    dyn = tensor_values(ShapeTensor, ShapeTensorList)
    return dyn if dyn is not None else shape


@register
class UniformRandom(_ShapedRandomOp):
    """Out ~ U[min, max); with ``diag_num`` > 0, the flat elements i * (diag_step + 1),
    i < diag_num, are then set to ``diag_val`` (fluid 1.8's diagonal init)."""
    type = "uniform_random"

    def infer(self, ShapeTensor=None, ShapeTensorList=(), *, shape=(), dtype=VarType.FP32,
              diag_num=0, diag_step=0):
        if diag_num < 0 or diag_step < 0:
            raise ValueError(f"uniform_random: diag_num and diag_step must be >= 0, got "
                             f"diag_num={diag_num}, diag_step={diag_step}")
        return super().infer(ShapeTensor, ShapeTensorList, shape=shape, dtype=dtype)

    def forward(self, ShapeTensor=None, ShapeTensorList=(), *, rng, shape=[],
                dtype=VarType.FP32, min=-1.0, max=1.0, seed=0, diag_num=0, diag_step=0,
                diag_val=1.0):
        shape = _run_shape(ShapeTensor, ShapeTensorList, shape)
        out = _standard(rng.random, shape, dtype)
        out *= max - min
        out += min
        if diag_num > 0:
            last = (diag_num - 1) * (diag_step + 1)
            if out.size <= last:
                raise ValueError(f"uniform_random: the diagonal's last element {last} "
                                 f"((diag_num - 1) * (diag_step + 1)) is outside the "
                                 f"{out.size} elements of shape {list(out.shape)}")
            out.reshape(-1)[np.arange(diag_num) * (diag_step + 1)] = diag_val
        return {"Out": out}


@register
class GaussianRandom(_ShapedRandomOp):
    """Out ~ N(mean, std^2)."""
    type = "gaussian_random"

    def forward(self, ShapeTensor=None, ShapeTensorList=(), *, rng, shape=[],
                dtype=VarType.FP32, mean=0.0, std=1.0, seed=0):
        shape = _run_shape(ShapeTensor, ShapeTensorList, shape)
        out = _standard(rng.standard_normal, shape, dtype)
        out *= std
        out += mean
        return {"Out": out}


@register
class TruncatedGaussianRandom(_RandomOp):
    """Out ~ N(mean, std^2) with draws beyond 2 std resampled."""
    type = "truncated_gaussian_random"

    def forward(self, *, rng, shape=[], dtype=VarType.FP32, mean=0.0, std=1.0, seed=0):
        z = rng.standard_normal(size=shape)
        bad = np.abs(z) > 2.0
        while bad.any():
            z[bad] = rng.standard_normal(size=int(bad.sum()))
            bad = np.abs(z) > 2.0
        return {"Out": (mean + std * z).astype(to_numpy_dtype(dtype))}
