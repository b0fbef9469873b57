"""Random and batch-size-like tensor layers: ``uniform_random``, ``gaussian_random``,
``fill_constant_batch_size_like``, ``uniform_random_batch_size_like``,
``gaussian_random_batch_size_like``.

``seed=0`` draws from the op's own generator (reproducible through ``Program.random_seed``); a
non-zero seed gives the same numbers on every run, as in fluid.
"""
from __future__ import annotations

from typing import Any, List, Optional, Sequence

from ..core.dtypes import convert_np_dtype_to_dtype_
from ..core.ir import Variable
from ..layer_helper import LayerHelper

__all__ = ["uniform_random", "gaussian_random", "fill_constant_batch_size_like",
           "uniform_random_batch_size_like", "gaussian_random_batch_size_like"]


def _shape(layer: str, shape: Any, batch_like: bool = False) -> List[int]:
    if isinstance(shape, Variable):
        raise TypeError(f"{layer}: shape must be a list of ints; a Variable shape is not "
                        f"supported")
    if isinstance(shape, int) and not isinstance(shape, bool):
        shape = [shape]
    try:
        out = [int(d) for d in shape]
    except (TypeError, ValueError):
        raise TypeError(f"{layer}: shape must be a list of ints, got {shape!r}") from None
    if not out or any(d < (-1 if batch_like else 0) for d in out):
        raise ValueError(f"{layer}: shape must be a non-empty list of non-negative ints"
                         f"{' (-1 marks the dim taken from input)' if batch_like else ''}, "
                         f"got {out}")
    return out


def uniform_random(shape: Sequence[int], dtype: Any = "float32", min: float = -1.0,
                   max: float = 1.0, seed: int = 0, name: Optional[str] = None) -> Variable:
    """A tensor of ``shape`` drawn from U[min, max)."""
    if min > max:
        raise ValueError(f"uniform_random: min ({min}) must not exceed max ({max})")
    helper = LayerHelper("uniform_random", name=name)
    dtype = convert_np_dtype_to_dtype_(dtype)
    out = helper.create_variable_for_type_inference(dtype)
    helper.append_op(type="uniform_random", outputs={"Out": out},
                     attrs={"shape": _shape("uniform_random", shape), "dtype": dtype,
                            "min": float(min), "max": float(max), "seed": int(seed)})
    return out


def gaussian_random(shape: Sequence[int], mean: float = 0.0, std: float = 1.0, seed: int = 0,
                    dtype: Any = "float32", name: Optional[str] = None) -> Variable:
    """A tensor of ``shape`` drawn from N(mean, std^2)."""
    helper = LayerHelper("gaussian_random", name=name)
    dtype = convert_np_dtype_to_dtype_(dtype)
    out = helper.create_variable_for_type_inference(dtype)
    helper.append_op(type="gaussian_random", outputs={"Out": out},
                     attrs={"shape": _shape("gaussian_random", shape), "dtype": dtype,
                            "mean": float(mean), "std": float(std), "seed": int(seed)})
    return out


def _batch_like(op: str, input: Variable, shape: Any, dtype: Any, input_dim_idx: int,
                output_dim_idx: int, attrs: dict) -> Variable:
    if not isinstance(input, Variable):
        raise TypeError(f"{op}: input must be a Variable, got {type(input).__name__}")
    helper = LayerHelper(op)
    dtype = convert_np_dtype_to_dtype_(dtype)
    out = helper.create_variable_for_type_inference(dtype)
    helper.append_op(type=op, inputs={"Input": input}, outputs={"Out": out},
                     attrs=dict(attrs, shape=_shape(op, shape, True), dtype=dtype,
                                input_dim_idx=int(input_dim_idx),
                                output_dim_idx=int(output_dim_idx)))
    out.stop_gradient = True
    return out


def fill_constant_batch_size_like(input: Variable, shape: Sequence[int], dtype: Any,
                                  value: float, input_dim_idx: int = 0, output_dim_idx: int = 0,
                                  force_cpu: bool = False) -> Variable:
    """``full(shape, value)`` with ``shape[output_dim_idx] = input.shape[input_dim_idx]`` taken
    at run time (the batch size)."""
    return _batch_like("fill_constant_batch_size_like", input, shape, dtype, input_dim_idx,
                       output_dim_idx, {"value": float(value), "force_cpu": bool(force_cpu)})


def uniform_random_batch_size_like(input: Variable, shape: Sequence[int],
                                   dtype: Any = "float32", input_dim_idx: int = 0,
                                   output_dim_idx: int = 0, min: float = -1.0,
                                   max: float = 1.0, seed: int = 0) -> Variable:
    """U[min, max) samples shaped like ``shape`` with the batch dim of ``input``."""
    return _batch_like("uniform_random_batch_size_like", input, shape, dtype, input_dim_idx,
                       output_dim_idx, {"min": float(min), "max": float(max), "seed": int(seed)})


def gaussian_random_batch_size_like(input: Variable, shape: Sequence[int],
                                    input_dim_idx: int = 0, output_dim_idx: int = 0,
                                    mean: float = 0.0, std: float = 1.0, seed: int = 0,
                                    dtype: Any = "float32") -> Variable:
    """N(mean, std^2) samples shaped like ``shape`` with the batch dim of ``input``."""
    return _batch_like("gaussian_random_batch_size_like", input, shape, dtype, input_dim_idx,
                       output_dim_idx, {"mean": float(mean), "std": float(std),
                                        "seed": int(seed)})
