"""Ops whose output shape borrows one dim (the batch size) from an input:
``fill_constant_batch_size_like``, ``uniform_random_batch_size_like``,
``gaussian_random_batch_size_like``. Out.shape = shape with
shape[output_dim_idx] = Input.shape[input_dim_idx]."""
from __future__ import annotations

from typing import List, Sequence

import numpy as np

from ..core.dtypes import VarType, to_numpy_dtype
from ..core.registry import OpDef, VarSpec, register


def _shape(op: str, in_shape: Sequence[int], shape: Sequence[int], input_dim_idx: int,
           output_dim_idx: int) -> List[int]:
    out = [int(d) for d in shape]
    if not out:
        raise ValueError(f"{op}: attribute 'shape' must not be empty")
    if not 0 <= input_dim_idx < len(in_shape):
        raise ValueError(f"{op}: input_dim_idx {input_dim_idx} is out of range for Input of "
                         f"shape {list(in_shape)}")
    if not 0 <= output_dim_idx < len(out):
        raise ValueError(f"{op}: output_dim_idx {output_dim_idx} is out of range for shape "
                         f"{out}")
    out[output_dim_idx] = int(in_shape[input_dim_idx])
    return out


class _BatchSizeLike(OpDef):
    inputs, outputs = ("Input",), ("Out",)
    no_grad = True

    def infer(self, Input, *, shape=(), dtype=VarType.FP32, input_dim_idx=0, output_dim_idx=0):
        return {"Out": VarSpec(_shape(self.type, Input.shape, shape, input_dim_idx,
                                      output_dim_idx), dtype)}


@register
class FillConstantBatchSizeLike(_BatchSizeLike):
    """Out = full(shape with the batch dim of Input, value, dtype). When Input has a LoD and
    ``input_dim_idx`` is 0, the batch is its number of sequences (of the last LoD level), not
    its rows, as in fluid's kernel."""
    type = "fill_constant_batch_size_like"
    extra_attrs = {"force_cpu": False, "str_value": ""}
    # reads Input's LoD when it has one; gives Out none and makes no program track LoD
    lod_aware = lod_passthrough = True

    def forward(self, Input, lod=None, *, shape=[], dtype=VarType.FP32, value=0.0,
                input_dim_idx=0, output_dim_idx=0):
        out = _shape(self.type, Input.shape, shape, input_dim_idx, output_dim_idx)
        in_lod = (lod or {}).get("Input")
        if in_lod and input_dim_idx == 0:
            out[output_dim_idx] = len(in_lod[-1]) - 1
        return {"Out": np.full(out, value, dtype=to_numpy_dtype(dtype))}


@register
class UniformRandomBatchSizeLike(_BatchSizeLike):
    """Out ~ U[min, max) with the batch dim of Input."""
    type = "uniform_random_batch_size_like"
    uses_rng = True
    extra_attrs = {"diag_num": 0, "diag_step": 0, "diag_val": 1.0}

    def forward(self, Input, *, rng, shape=[], dtype=VarType.FP32, input_dim_idx=0,
                output_dim_idx=0, min=-1.0, max=1.0, seed=0):
        out = _shape(self.type, Input.shape, shape, input_dim_idx, output_dim_idx)
        return {"Out": rng.uniform(min, max, size=out).astype(to_numpy_dtype(dtype))}


@register
class GaussianRandomBatchSizeLike(_BatchSizeLike):
    """Out ~ N(mean, std^2) with the batch dim of Input."""
    type = "gaussian_random_batch_size_like"
    uses_rng = True

    def forward(self, Input, *, rng, shape=[], dtype=VarType.FP32, input_dim_idx=0,
                output_dim_idx=0, mean=0.0, std=1.0, seed=0):
        out = _shape(self.type, Input.shape, shape, input_dim_idx, output_dim_idx)
        return {"Out": rng.normal(mean, std, size=out).astype(to_numpy_dtype(dtype))}
