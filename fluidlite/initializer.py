"""Initializers: each appends one init op writing the variable (normally in the startup program).

Random initializers with ``seed=0`` leave the op's seed at 0; the executor then draws from a
generator derived from the program's ``random_seed`` and the op's position, so the numbers are
deterministic for a given ``random_seed`` and differ between parameters. (fluid 1.8 copied the
program seed into every op, which gives same-shaped parameters identical values; see
docs/compatibility.md.)
"""
from __future__ import annotations

import copy
import math
import numbers
from typing import Any, Dict, Optional, Tuple

import numpy as np

from .core.dtypes import convert_dtype, is_float, to_numpy_dtype
from .ops.tensor import assign_value_attrs


__all__ = ["Initializer", "Constant", "Uniform", "Normal", "TruncatedNormal", "Xavier", "MSRA",
           "Bilinear", "NumpyArrayInitializer", "ConstantInitializer", "UniformInitializer",
           "NormalInitializer", "TruncatedNormalInitializer", "XavierInitializer",
           "MSRAInitializer", "BilinearInitializer", "force_init_on_cpu", "init_on_cpu",
           "set_global_initializer"]


def _number(cls: str, arg: str, value: Any) -> float:
    """``float(value)`` for a Python or numpy real number, else a TypeError naming it."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{cls}: {arg} must be a number (a Python or numpy int or float), but "
                        f"received {value!r} of type {type(value).__name__}")
    return float(value)


def _seed(cls: str, seed: Any) -> int:
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, numbers.Integral):
        raise TypeError(f"{cls}: seed must be an int (0: derive it from the program's "
                        f"random_seed), but received {seed!r} of type {type(seed).__name__}")
    return int(seed)


def _fan(cls: str, arg: str, value: Any, zero_ok: bool = False) -> Optional[float]:
    if value is None:
        return None
    fan = _number(cls, arg, value)
    if not (fan >= 0 if zero_ok else fan > 0):
        raise ValueError(f"{cls}: {arg} must be {'>=' if zero_ok else '>'} 0 (or None: computed "
                         f"from the shape), but received {value}")
    return fan


class Initializer:
    """Base class; ``__call__(var, block)`` appends the init op and returns it."""

    def __call__(self, var: Any, block: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must implement __call__")

    @staticmethod
    def _compute_fans(var: Any) -> Tuple[int, int]:
        shape = var.shape
        if not shape:
            return 1, 1
        if len(shape) == 1:
            return shape[0], shape[0]
        if len(shape) == 2:
            return shape[0], shape[1]
        receptive = int(np.prod(shape[2:]))
        return shape[1] * receptive, shape[0] * receptive

    def _append(self, block: Any, var: Any, op_type: str, **attrs: Any) -> Any:
        attrs.setdefault("shape", list(var.shape))
        attrs.setdefault("dtype", var.dtype)
        # fluid 1.8 prepends initializer ops: the startup program lists them newest first
        # (dygraph's tracer block runs the op at once: it has only append_op)
        add = getattr(block, "_prepend_op", None) or block.append_op
        return add(type=op_type, outputs={"Out": var}, attrs=attrs, stop_gradient=True)


class ConstantInitializer(Initializer):
    """Fill with ``value``.

    Args:
        value (float, default 0.0): the fill value.
        force_cpu (bool, default False): accepted for fluid's signature.
    Returns:
        ConstantInitializer: calling it as ``init(var, block)`` prepends a ``fill_constant`` op
        writing ``var`` to ``block`` and returns that op.
    Raises:
        TypeError: ``value`` is not a Python or NumPy number.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     w = fluid.layers.create_parameter([2, 3], "float32", name="w",
        ...         default_initializer=fluid.initializer.Constant(0.5))
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> w_value = np.array(fluid.global_scope().find_var("w").get_tensor())
        >>> w_value
        array([[0.5, 0.5, 0.5],
               [0.5, 0.5, 0.5]], dtype=float32)
    """

    def __init__(self, value: float = 0.0, force_cpu: bool = False) -> None:
        # a bool fills bool tensors (True -> 1.0), as in fluid
        self._value = float(value) if isinstance(value, (bool, np.bool_)) else \
            _number("ConstantInitializer", "value", value)
        self._force_cpu = force_cpu

    def __call__(self, var: Any, block: Any) -> Any:
        return self._append(block, var, "fill_constant", value=self._value,
                            force_cpu=self._force_cpu)

    def __repr__(self) -> str:
        return f"Constant({self._value})"


class UniformInitializer(Initializer):
    """Uniform on [low, high).

    Args:
        low (float, default -1.0): the lower bound.
        high (float, default 1.0): the upper bound (exclusive).
        seed (int, default 0): the random seed; 0 uses the program's ``random_seed``.
    Returns:
        UniformInitializer: calling it as ``init(var, block)`` prepends a ``uniform_random`` op
        writing ``var`` to ``block`` and returns that op.
    Raises:
        TypeError: ``low`` or ``high`` is not a number, or ``seed`` is not an int.
        ValueError: ``high < low``.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     w = fluid.layers.create_parameter([2, 3], "float32", name="w",
        ...         default_initializer=fluid.initializer.Uniform(low=-0.1, high=0.1, seed=1))
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> w_value = np.array(fluid.global_scope().find_var("w").get_tensor())
        >>> bool(np.all(np.abs(w_value) <= 0.1))
        True
    """

    def __init__(self, low: float = -1.0, high: float = 1.0, seed: int = 0) -> None:
        cls = "UniformInitializer"
        low, high = _number(cls, "low", low), _number(cls, "high", high)
        if not high >= low:
            raise ValueError(f"{cls}: high ({high}) should be greater than or equal to low "
                             f"({low})")
        self._low, self._high, self._seed = low, high, _seed(cls, seed)

    def __call__(self, var: Any, block: Any) -> Any:
        return self._append(block, var, "uniform_random", min=self._low, max=self._high,
                            seed=self._seed)


class NormalInitializer(Initializer):
    """Gaussian with mean ``loc`` and std ``scale``.

    Args:
        loc (float, default 0.0): the mean.
        scale (float, default 1.0): the standard deviation.
        seed (int, default 0): the random seed; 0 uses the program's ``random_seed``.
    Returns:
        NormalInitializer: calling it as ``init(var, block)`` prepends a ``gaussian_random`` op
        writing ``var`` to ``block`` and returns that op.
    Raises:
        TypeError: ``loc`` or ``scale`` is not a number, or ``seed`` is not an int.
        ValueError: ``scale`` is negative.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     w = fluid.layers.create_parameter([100, 100], "float32", name="w",
        ...         default_initializer=fluid.initializer.Normal(loc=0.0, scale=0.01, seed=1))
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> w_value = np.array(fluid.global_scope().find_var("w").get_tensor())
        >>> round(float(w_value.std()), 3)
        0.01
    """

    def __init__(self, loc: float = 0.0, scale: float = 1.0, seed: int = 0) -> None:
        cls = type(self).__name__
        self._mean, self._std = _number(cls, "loc", loc), _number(cls, "scale", scale)
        if not self._std >= 0:
            raise ValueError(f"{cls}: scale (the standard deviation) must be >= 0, but "
                             f"received {scale}")
        self._seed = _seed(cls, seed)

    def __call__(self, var: Any, block: Any) -> Any:
        return self._append(block, var, "gaussian_random", mean=self._mean, std=self._std,
                            seed=self._seed)


class TruncatedNormalInitializer(NormalInitializer):
    """Gaussian resampled beyond two standard deviations.

    Args:
        loc (float, default 0.0): the mean.
        scale (float, default 1.0): the standard deviation (values beyond two are redrawn).
        seed (int, default 0): the random seed; 0 uses the program's ``random_seed``.
    Returns:
        TruncatedNormalInitializer: calling it as ``init(var, block)`` prepends a
        ``truncated_gaussian_random`` op writing ``var`` to ``block`` and returns that op.
    Raises:
        TypeError: ``loc`` or ``scale`` is not a number, or ``seed`` is not an int.
        ValueError: ``scale`` is negative.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     w = fluid.layers.create_parameter([100, 100], "float32", name="w",
        ...         default_initializer=fluid.initializer.TruncatedNormal(loc=0.0, scale=1.0, seed=1))
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> w_value = np.array(fluid.global_scope().find_var("w").get_tensor())
        >>> bool(np.all(np.abs(w_value) <= 2.0))     # cut at two standard deviations
        True
    """

    def __call__(self, var: Any, block: Any) -> Any:
        return self._append(block, var, "truncated_gaussian_random", mean=self._mean,
                            std=self._std, seed=self._seed)


class XavierInitializer(Initializer):
    """Glorot: uniform limit ``sqrt(6/(fan_in+fan_out))`` or normal std
    ``sqrt(2/(fan_in+fan_out))``.

    Args:
        uniform (bool, default True): uniform (else normal) distribution.
        fan_in (float | None): inputs per unit (default: from the parameter's shape).
        fan_out (float | None): outputs per unit (default: from the parameter's shape).
        seed (int, default 0): the random seed; 0 uses the program's ``random_seed``.
    Returns:
        XavierInitializer: calling it as ``init(var, block)`` prepends a ``uniform_random`` (or
        ``gaussian_random``) op writing ``var`` to ``block`` and returns that op.
    Raises:
        TypeError: ``fan_in`` / ``fan_out`` is not a number, or ``seed`` is not an int.
        ValueError: ``fan_in`` / ``fan_out`` is negative; when called, ``fan_in + fan_out`` is 0.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     w = fluid.layers.create_parameter([30, 20], "float32", name="w",
        ...         default_initializer=fluid.initializer.Xavier(uniform=True))
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> w_value = np.array(fluid.global_scope().find_var("w").get_tensor())
        >>> limit = np.sqrt(6.0 / (30 + 20))
        >>> bool(np.all(np.abs(w_value) <= limit))
        True
    """

    def __init__(self, uniform: bool = True, fan_in: Optional[float] = None,
                 fan_out: Optional[float] = None, seed: int = 0) -> None:
        cls = "XavierInitializer"
        self._uniform, self._seed = bool(uniform), _seed(cls, seed)
        # fluid 1.8 takes a 0 fan (DARTS passes fan_in=0): only the sum divides
        self._fan_in = _fan(cls, "fan_in", fan_in, zero_ok=True)
        self._fan_out = _fan(cls, "fan_out", fan_out, zero_ok=True)

    def __call__(self, var: Any, block: Any) -> Any:
        f_in, f_out = self._compute_fans(var)
        fan_in = f_in if self._fan_in is None else self._fan_in
        fan_out = f_out if self._fan_out is None else self._fan_out
        if not fan_in + fan_out > 0:
            raise ValueError(f"XavierInitializer: fan_in + fan_out is {fan_in + fan_out} for "
                             f"'{var.name}' (shape {list(var.shape)}); give a positive fan_in "
                             f"or fan_out")
        if self._uniform:
            limit = math.sqrt(6.0 / float(fan_in + fan_out))
            return self._append(block, var, "uniform_random", min=-limit, max=limit,
                                seed=self._seed)
        std = math.sqrt(2.0 / float(fan_in + fan_out))
        return self._append(block, var, "gaussian_random", mean=0.0, std=std, seed=self._seed)


class MSRAInitializer(Initializer):
    """He/Kaiming: uniform limit ``sqrt(6/fan_in)`` or normal std ``sqrt(2/fan_in)``.

    Args:
        uniform (bool, default True): uniform (else normal) distribution.
        fan_in (float | None): inputs per unit (default: from the parameter's shape).
        seed (int, default 0): the random seed; 0 uses the program's ``random_seed``.
    Returns:
        MSRAInitializer: calling it as ``init(var, block)`` prepends a ``uniform_random`` (or
        ``gaussian_random``) op writing ``var`` to ``block`` and returns that op.
    Raises:
        TypeError: ``fan_in`` is not a number, or ``seed`` is not an int.
        ValueError: ``fan_in`` is not positive.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     w = fluid.layers.create_parameter([24, 10], "float32", name="w",
        ...         default_initializer=fluid.initializer.MSRA(uniform=True))
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> w_value = np.array(fluid.global_scope().find_var("w").get_tensor())
        >>> bool(np.all(np.abs(w_value) <= np.sqrt(6.0 / 24)))
        True
    """

    def __init__(self, uniform: bool = True, fan_in: Optional[float] = None,
                 seed: int = 0) -> None:
        cls = "MSRAInitializer"
        self._uniform, self._seed = bool(uniform), _seed(cls, seed)
        self._fan_in = _fan(cls, "fan_in", fan_in)

    def __call__(self, var: Any, block: Any) -> Any:
        fan_in = self._compute_fans(var)[0] if self._fan_in is None else self._fan_in
        if self._uniform:
            limit = math.sqrt(6.0 / float(fan_in))
            return self._append(block, var, "uniform_random", min=-limit, max=limit,
                                seed=self._seed)
        std = math.sqrt(2.0 / float(fan_in))
        return self._append(block, var, "gaussian_random", mean=0.0, std=std, seed=self._seed)


class NumpyArrayInitializer(Initializer):
    """Copy a fixed numpy array (op ``assign_value``).

    Args:
        value (numpy.ndarray): the exact initial value (the parameter's shape).
    Returns:
        NumpyArrayInitializer: calling it as ``init(var, block)`` prepends an ``assign_value``
        op writing ``value`` (cast to ``var``'s dtype) to ``var`` and returns that op.
    Raises:
        TypeError: ``value`` is not a numpy array.
        ValueError: when called, the array's shape differs from the variable's.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     w = fluid.layers.create_parameter([2, 3], "float32", name="w",
        ...         default_initializer=fluid.initializer.NumpyArrayInitializer(np.arange(6, dtype='float32').reshape(2, 3)))
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> w_value = np.array(fluid.global_scope().find_var("w").get_tensor())
        >>> w_value
        array([[0., 1., 2.],
               [3., 4., 5.]], dtype=float32)
    """

    def __init__(self, value: np.ndarray) -> None:
        if not isinstance(value, np.ndarray):
            raise TypeError(f"NumpyArrayInitializer expects a numpy array, got {type(value)}")
        self._value = value

    def __deepcopy__(self, memo: Dict[int, Any]) -> "NumpyArrayInitializer":
        # only read (into the assign_value op): copies of a ParamAttr share the array, so a
        # layer helper's defensive copy does not duplicate every initial weight
        clone = copy.copy(self)
        memo[id(self)] = clone
        return clone

    def __call__(self, var: Any, block: Any) -> Any:
        value = self._value
        if tuple(value.shape) != tuple(var.shape):
            # fluid 1.8 assigns the array with its own shape; one of the parameter's size
            # (e.g. [25] for [25, 1], as fluid's tdm_sampler tests pass) is reshaped to it
            if -1 in tuple(var.shape) or value.size != int(np.prod(var.shape)):
                raise ValueError(f"NumpyArrayInitializer for '{var.name}': array shape "
                                 f"{list(value.shape)} != parameter shape {list(var.shape)} "
                                 f"(and the sizes differ: {value.size} vs "
                                 f"{int(np.prod(var.shape))} elements)")
            value = value.reshape(var.shape)
        return self._append(block, var, "assign_value",
                            **assign_value_attrs(value.astype(to_numpy_dtype(var.dtype))))


class BilinearInitializer(Initializer):
    """Bilinear upsampling kernel for a ``[C, 1, k, k]``-style conv_transpose weight.

    Args:
        None: the constructor takes no arguments; the kernel size comes from the weight's shape.
    Returns:
        BilinearInitializer: calling it as ``init(var, block)`` prepends an ``assign_value`` op
        writing the bilinear kernel ``(1 - |x/f - c|) * (1 - |y/f - c|)``, ``f = ceil(k/2)``,
        ``c = (2f - 1 - f % 2) / (2f)``, to ``var`` and returns that op.
    Raises:
        ValueError: when called, the weight is not 4-D with square kernels (``shape[2] ==
            shape[3]``).
        TypeError: when called, the weight is not a float tensor.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     w = fluid.layers.create_parameter([1, 1, 4, 4], "float32", name="w",
        ...         default_initializer=fluid.initializer.Bilinear())
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> w_value = np.array(fluid.global_scope().find_var("w").get_tensor())
        >>> w_value[0, 0]
        array([[0.0625, 0.1875, 0.1875, 0.0625],
               [0.1875, 0.5625, 0.5625, 0.1875],
               [0.1875, 0.5625, 0.5625, 0.1875],
               [0.0625, 0.1875, 0.1875, 0.0625]], dtype=float32)
    """

    def __call__(self, var: Any, block: Any) -> Any:
        shape = var.shape
        if len(shape) != 4 or shape[2] != shape[3]:
            raise ValueError("Bilinear initializer needs a 4-D weight with square kernels, got "
                             f"{list(shape)}")
        size = shape[3]
        f = math.ceil(size / 2.0)
        c = (2 * f - 1 - f % 2) / (2.0 * f)
        idx = np.arange(int(np.prod(shape)))
        x, y = idx % size, (idx // size) % size
        weight = (1 - np.abs(x / f - c)) * (1 - np.abs(y / f - c))
        # fluid 1.8 computes float16/float64 weights through float32 values and rejects ints
        if not is_float(var.dtype):
            raise TypeError(f"BilinearInitializer for '{var.name}': the parameter must be a "
                            f"float tensor (float16, float32 or float64), but its dtype is "
                            f"{convert_dtype(var.dtype)}")
        weight = weight.reshape(shape).astype(np.float32).astype(to_numpy_dtype(var.dtype))
        return self._append(block, var, "assign_value", **assign_value_attrs(weight))


Constant = ConstantInitializer
Uniform = UniformInitializer
Normal = NormalInitializer
TruncatedNormal = TruncatedNormalInitializer
Xavier = XavierInitializer
MSRA = MSRAInitializer
Bilinear = BilinearInitializer


def force_init_on_cpu() -> bool:
    return True


class init_on_cpu:
    """Context manager accepted for compatibility (everything is on the CPU)."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


# set_global_initializer: used by LayerHelper.create_parameter for parameters whose ParamAttr
# names no initializer (ahead of each layer's own default)
_global_weight_initializer: Optional[Initializer] = None
_global_bias_initializer: Optional[Initializer] = None


def set_global_initializer(weight_init: Optional[Initializer],
                           bias_init: Optional[Initializer] = None) -> None:
    """Initialize every parameter created from now on with ``weight_init`` (biases with
    ``bias_init``) unless its ``ParamAttr`` gives an initializer; the layers' own defaults
    come last. ``set_global_initializer(None)`` restores them. Variables made with
    ``create_global_var`` / ``create_tensor`` are not parameters and are not affected."""
    for arg, init in (("weight_init", weight_init), ("bias_init", bias_init)):
        if init is not None and not isinstance(init, Initializer):
            raise TypeError(f"set_global_initializer: {arg} must be an Initializer (e.g. "
                            f"fluid.initializer.Uniform()) or None, but received "
                            f"{type(init).__name__}")
    global _global_weight_initializer, _global_bias_initializer
    _global_weight_initializer, _global_bias_initializer = weight_init, bias_init


def global_initializer(is_bias: bool) -> Optional[Initializer]:
    """The initializer ``set_global_initializer`` set for biases / weights (None: not set)."""
    return _global_bias_initializer if is_bias else _global_weight_initializer
