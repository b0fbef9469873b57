"""Random and batch-size-like tensor layers: ``uniform_random``, ``gaussian_random``,
``fill_constant_batch_size_like``, ``uniform_random_batch_size_like``,
``gaussian_random_batch_size_like``.

``seed=0`` draws from the op's own generator (reproducible through ``Program.random_seed``); a
non-zero seed gives the same numbers on every run, as in fluid.
"""
from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple

from ..core.dtypes import convert_np_dtype_to_dtype_
from ..core.ir import Variable
from ..layer_helper import LayerHelper, check_int, check_number, is_int

__all__ = ["uniform_random", "gaussian_random", "fill_constant_batch_size_like",
           "uniform_random_batch_size_like", "gaussian_random_batch_size_like"]


def _shape(layer: str, shape: Any, batch_like: bool = False) -> List[int]:
    if isinstance(shape, Variable):
        raise TypeError(f"{layer}: shape must be a list of ints; a Variable shape is not "
                        f"supported")
    if is_int(shape):
        shape = [shape]
    if not isinstance(shape, (list, tuple)) or not all(is_int(d) for d in shape):
        raise TypeError(f"{layer}: 'shape' must be a list of ints (numpy integers included), "
                        f"but received {shape!r}")
    out = [int(d) for d in shape]
    if not out or any(d < (-1 if batch_like else 0) for d in out):
        raise ValueError(f"{layer}: shape must be a non-empty list of non-negative ints"
                         f"{' (-1 marks the dim taken from input)' if batch_like else ''}, "
                         f"got {out}")
    return out


def _shape_inputs(layer: str, shape: Any) -> Tuple[List[int], dict]:
    """(shape attr, inputs): fluid 1.8 lets ``shape`` be a 1-D int Variable (``ShapeTensor``)
    or a list mixing ints and 1-element int Variables (``ShapeTensorList``)."""
    has_var = isinstance(shape, Variable) or (
        isinstance(shape, (list, tuple)) and any(isinstance(d, Variable) for d in shape))
    if not has_var:
        return _shape(layer, shape), {}
    from .tensor import _ints_or_tensors      # layers/tensor.py imports nothing from here
    attrs, tensor, tensors = _ints_or_tensors(shape, "shape", layer)
    return attrs, ({"ShapeTensor": tensor} if tensor is not None else
                   {"ShapeTensorList": tensors})


def uniform_random(shape: Any, dtype: Any = "float32", min: float = -1.0,
                   max: float = 1.0, seed: int = 0, name: Optional[str] = None) -> Variable:
    """A tensor of ``shape`` drawn from U[min, max); ``shape`` is a list of ints and/or int
    Variables of shape [1], or a 1-D int Variable.

    Args:
        shape (list | tuple | Variable): the output's shape.
        dtype (str, default "float32"): the output's dtype.
        min (float, default -1.0): the lower bound.
        max (float, default 1.0): the upper bound (exclusive).
        seed (int, default 0): a fixed seed; 0 draws from the program's random stream.
        name (str | None): name prefix of the output.
    Returns:
        Variable: the random tensor (new values every run).
    Raises:
        TypeError: ``shape`` is not a list of ints / int Variables (or a 1-D int Variable),
            ``min`` / ``max`` is not a number, ``seed`` is not an int, or ``dtype`` is unknown.
        ValueError: ``min`` exceeds ``max``, or ``shape`` is empty or has a negative dim.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     out = fluid.layers.uniform_random([2, 3], min=-1.0, max=1.0, seed=1)
        >>> res, = fluid.Executor(fluid.CPUPlace()).run(main, fetch_list=[out])
        >>> res.shape, bool((np.abs(res) <= 1).all())
        ((2, 3), True)
    """
    lo = check_number(min, "min", "uniform_random")
    hi = check_number(max, "max", "uniform_random")
    if lo > hi:
        raise ValueError(f"uniform_random: min ({lo}) must not exceed max ({hi})")
    attr_shape, inputs = _shape_inputs("uniform_random", shape)
    attrs = {"shape": attr_shape, "dtype": convert_np_dtype_to_dtype_(dtype),
             "min": lo, "max": hi, "seed": check_int(seed, "seed", "uniform_random")}
    helper = LayerHelper("uniform_random", name=name)
    out = helper.create_variable_for_type_inference(attrs["dtype"])
    helper.append_op(type="uniform_random", inputs=inputs, outputs={"Out": out}, attrs=attrs)
    return out


def gaussian_random(shape: Any, mean: float = 0.0, std: float = 1.0, seed: int = 0,
                    dtype: Any = "float32", name: Optional[str] = None) -> Variable:
    """A tensor of ``shape`` drawn from N(mean, std^2) (``shape`` as in ``uniform_random``).

    Args:
        shape (list | tuple | Variable): the output's shape.
        mean (float, default 0.0): the mean.
        std (float, default 1.0): the standard deviation.
        seed (int, default 0): a fixed seed; 0 draws from the program's random stream.
        dtype (str, default "float32"): the output's dtype.
        name (str | None): name prefix of the output.
    Returns:
        Variable: the random tensor (new values every run).
    Raises:
        TypeError: ``shape`` is not a list of ints / int Variables (or a 1-D int Variable),
            ``mean`` / ``std`` is not a number, ``seed`` is not an int, or ``dtype`` is unknown.
        ValueError: ``std`` is negative, or ``shape`` is empty or has a negative dim.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     out = fluid.layers.gaussian_random([1000], mean=0.0, std=2.0, seed=1)
        >>> res, = fluid.Executor(fluid.CPUPlace()).run(main, fetch_list=[out])
        >>> res.shape, round(float(res.std()), 1)
        ((1000,), 1.9)
    """
    attr_shape, inputs = _shape_inputs("gaussian_random", shape)
    attrs = {"shape": attr_shape,
             "dtype": convert_np_dtype_to_dtype_(dtype),
             "mean": check_number(mean, "mean", "gaussian_random"),
             "std": check_number(std, "std", "gaussian_random"),
             "seed": check_int(seed, "seed", "gaussian_random")}
    if attrs["std"] < 0:
        raise ValueError(f"gaussian_random: 'std' must be >= 0, but received {attrs['std']}")
    helper = LayerHelper("gaussian_random", name=name)
    out = helper.create_variable_for_type_inference(attrs["dtype"])
    helper.append_op(type="gaussian_random", inputs=inputs, outputs={"Out": out}, attrs=attrs)
    return out


def _batch_like(op: str, input: Variable, shape: Any, dtype: Any, input_dim_idx: int,
                output_dim_idx: int, attrs: dict) -> Variable:
    if not isinstance(input, Variable):
        raise TypeError(f"{op}: input must be a Variable, got {type(input).__name__}")
    attrs = dict(attrs, shape=_shape(op, shape, True), dtype=convert_np_dtype_to_dtype_(dtype),
                 input_dim_idx=check_int(input_dim_idx, "input_dim_idx", op),
                 output_dim_idx=check_int(output_dim_idx, "output_dim_idx", op))
    helper = LayerHelper(op)
    out = helper.create_variable_for_type_inference(attrs["dtype"])
    helper.append_op(type=op, inputs={"Input": input}, outputs={"Out": out}, attrs=attrs)
    out.stop_gradient = True
    return out


def fill_constant_batch_size_like(input: Variable, shape: Sequence[int], dtype: Any,
                                  value: float, input_dim_idx: int = 0, output_dim_idx: int = 0,
                                  force_cpu: bool = False) -> Variable:
    """``full(shape, value)`` with ``shape[output_dim_idx] = input.shape[input_dim_idx]`` taken
    at run time (the batch size)."""
    return _batch_like("fill_constant_batch_size_like", input, shape, dtype, input_dim_idx,
                       output_dim_idx,
                       {"value": check_number(value, "value", "fill_constant_batch_size_like"),
                        "force_cpu": bool(force_cpu)})


def uniform_random_batch_size_like(input: Variable, shape: Sequence[int],
                                   dtype: Any = "float32", input_dim_idx: int = 0,
                                   output_dim_idx: int = 0, min: float = -1.0,
                                   max: float = 1.0, seed: int = 0) -> Variable:
    """U[min, max) samples shaped like ``shape`` with the batch dim of ``input``."""
    op = "uniform_random_batch_size_like"
    return _batch_like(op, input, shape, dtype, input_dim_idx, output_dim_idx,
                       {"min": check_number(min, "min", op), "max": check_number(max, "max", op),
                        "seed": check_int(seed, "seed", op)})


def gaussian_random_batch_size_like(input: Variable, shape: Sequence[int],
                                    input_dim_idx: int = 0, output_dim_idx: int = 0,
                                    mean: float = 0.0, std: float = 1.0, seed: int = 0,
                                    dtype: Any = "float32") -> Variable:
    """N(mean, std^2) samples shaped like ``shape`` with the batch dim of ``input``."""
    op = "gaussian_random_batch_size_like"
    return _batch_like(op, input, shape, dtype, input_dim_idx, output_dim_idx,
                       {"mean": check_number(mean, "mean", op), "std": check_number(std, "std", op),
                        "seed": check_int(seed, "seed", op)})
