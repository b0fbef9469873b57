"""Loss scaling, MindSpore style (``mindspore.amp``): ``StaticLossScaler``, ``DynamicLossScaler``
and ``all_finite``.

Loss scaling multiplies the loss by a large factor before differentiation so that small
gradients survive float16, then divides the gradients by the same factor before the update::

    scaler = fluid.amp.StaticLossScaler(1024.0)
    loss = scaler.scale(loss)               # 1024 * loss
    loss.backward()
    grads = scaler.unscale(grads)           # every gradient / 1024
    if fluid.amp.all_finite(grads): ...     # update only when nothing overflowed

``scale`` / ``unscale`` take a dygraph tensor, a NumPy array, a Python number, a static
``Variable`` (they then append a ``scale`` op) or a (nested) tuple/list of those, and return the
same structure. ``DynamicLossScaler.adjust(grads_finite)`` applies MindSpore's rule: on an
overflow the scale is divided by ``scale_factor`` (never below 1) and the finite-step counter is
reset; after ``scale_window`` consecutive finite steps the scale is multiplied by
``scale_factor`` (kept when that would overflow). The static-graph form of dynamic loss scaling,
with the scale in a persistable variable updated by ops, is
``fluid.contrib.mixed_precision.decorate``.
"""
from __future__ import annotations

import math
import numbers
from typing import Any, Callable, List

import numpy as np

from ..core import mode as _mode, rewrite
from ..core.dtypes import FLOATS, INTS, VarType, convert_dtype
from ..core.ir import Variable, default_main_program
from ..core.selected_rows import SelectedRows

__all__ = ["LossScaler", "StaticLossScaler", "DynamicLossScaler", "all_finite"]

_is_eager = _mode.is_tensor     # a dygraph tensor (static Variables are not)


def _map(fn: Callable[[Any], Any], x: Any) -> Any:
    """``fn`` applied to every leaf of a (nested) tuple/list, same structure back."""
    if isinstance(x, (list, tuple)):
        out = [_map(fn, v) for v in x]
        return tuple(out) if isinstance(x, tuple) else out
    return fn(x)


def _leaves(x: Any) -> List[Any]:
    if isinstance(x, (list, tuple)):
        return [leaf for v in x for leaf in _leaves(v)]
    return [x]


def _real(owner: str, arg: str, value: Any) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{owner}: {arg} must be a real number, but received {value!r} "
                        f"({type(value).__name__})")
    return float(value)


def _multiply(x: Any, factor: float, what: str) -> Any:
    """``x * factor`` for one leaf (a tensor, a Variable, an array or a number)."""
    if isinstance(x, Variable):          # dygraph tensors are Variables too: one code path
        return _scale(x, factor)
    if isinstance(x, np.ndarray):
        if x.dtype.kind != "f":
            raise TypeError(f"{what}: expected floating-point values, but received an array "
                            f"of dtype {x.dtype}")
        if x.dtype.itemsize < 4:        # float16: a factor like 2**-20 is not a normal float16
            return (x.astype(np.float32) * np.float32(factor)).astype(x.dtype)
        return x * x.dtype.type(factor)
    if isinstance(x, numbers.Real) and not isinstance(x, bool):
        return x * factor
    raise TypeError(f"{what}: expected a tensor, a Variable, a NumPy array, a number or a "
                    f"(nested) tuple/list of them, but received {type(x).__name__}")


def _scale(x: Variable, factor: float) -> Variable:
    """``x * factor``: the ``scale`` op ``fluid.layers.scale(x, factor)`` appends, into a new
    ``scale_N.tmp_0`` -- run now for a dygraph tensor (its eager block), else appended to the
    current block of the default main program."""
    if x.dtype is not None and x.dtype not in FLOATS | INTS:
        raise TypeError(f"The data type of 'x' in scale must be one of "
                        f"{sorted(convert_dtype(t) for t in FLOATS | INTS)}, but received "
                        f"{convert_dtype(x.dtype)}. Cast it first, e.g. "
                        f"fluid.layers.cast(x, 'float32').")
    block = x.block if _is_eager(x) else default_main_program().current_block()
    return rewrite.op(block, "scale", X=x, attrs={"bias": 0.0, "bias_after_scale": True,
                                                   "scale": float(factor)})


class LossScaler:
    """Base class: ``scale(x)``, ``unscale(x)``, ``adjust(grads_finite)``, ``scale_value``."""

    def __init__(self, scale_value: float) -> None:
        owner = type(self).__name__
        value = _real(owner, "scale_value", scale_value)
        if not (value > 0 and math.isfinite(value)):
            raise ValueError(f"{owner}: scale_value (the loss scale) must be a finite number "
                             f"> 0, but received {scale_value!r}")
        self._scale_value = value

    @property
    def scale_value(self) -> float:
        """The current loss scale."""
        return self._scale_value

    def scale(self, inputs: Any) -> Any:
        """``inputs * scale_value`` (same structure back)."""
        self._check_static(inputs, "scale")
        s = self._scale_value
        return _map(lambda x: _multiply(x, s, f"{type(self).__name__}.scale"), inputs)

    def unscale(self, inputs: Any) -> Any:
        """``inputs * (1 / scale_value)`` (same structure back)."""
        self._check_static(inputs, "unscale")
        inv = 1.0 / self._scale_value
        return _map(lambda x: _multiply(x, inv, f"{type(self).__name__}.unscale"), inputs)

    def adjust(self, grads_finite: Any) -> bool:
        """Update the scale after a step (``grads_finite``: did every gradient stay finite).
        A fixed scale: nothing changes, returns False (MindSpore's ``StaticLossScaler``)."""
        return False

    def unscale_gradients(self, parameters: Any) -> bool:
        """Dygraph: divide the gradient accumulated in each parameter by ``scale_value``, in
        place, so that a fluid optimizer's ``minimize`` then applies the true gradients;
        returns ``all_finite`` of them. With ``False``, skip ``minimize``, call
        ``clear_gradients()`` and ``adjust(False)`` (see the recipe in docs/guides/amp.md)."""
        inv = 1.0 / self._scale_value
        grads = []
        for p in parameters:
            if not _is_eager(p):
                raise TypeError(f"{type(self).__name__}.unscale_gradients: expected dygraph "
                                f"parameters (e.g. layer.parameters()), but received "
                                f"{type(p).__name__}")
            g = p._grad             # the accumulated array (or SelectedRows)
            if type(g) is SelectedRows:     # a sparse embedding's gradient: its values
                p._grad = g.with_value(_multiply(g.value, inv,
                                                 f"{type(self).__name__}.unscale_gradients"))
                grads.append(p._grad.value)
            elif g is not None:
                p._grad = _multiply(g, inv, f"{type(self).__name__}.unscale_gradients")
                grads.append(p._grad)
        return all_finite(grads)

    def _check_static(self, inputs: Any, method: str) -> None:
        pass

    def __repr__(self) -> str:
        return f"{type(self).__name__}(scale_value={self._scale_value})"


class StaticLossScaler(LossScaler):
    """A fixed loss scale. ``adjust`` changes nothing and returns False (as MindSpore)."""


def _as_bool(value: Any, owner: str) -> bool:
    if isinstance(value, Variable) and not _is_eager(value):
        raise TypeError(f"{owner}.adjust: grads_finite is a static Variable ({value.name}); "
                        f"its value exists only when the program runs. Pass the fetched value, "
                        f"or use fluid.contrib.mixed_precision.decorate, whose "
                        f"update_loss_scaling op adjusts the scale inside the program")
    arr = np.asarray(value.numpy() if _is_eager(value) else value)
    if arr.size != 1:
        raise ValueError(f"{owner}.adjust: grads_finite must be one boolean, but received "
                         f"shape {list(arr.shape)}")
    return bool(arr.reshape(-1)[0])


class DynamicLossScaler(LossScaler):
    """A loss scale adjusted after each step by ``adjust(grads_finite)`` (module docstring):
    overflow: ``scale = max(scale / scale_factor, 1)``, counter reset; ``scale_window``
    consecutive finite steps: ``scale *= scale_factor`` (unless that overflows)."""

    def __init__(self, scale_value: float, scale_factor: float, scale_window: int) -> None:
        super().__init__(scale_value)
        owner = type(self).__name__
        factor = _real(owner, "scale_factor", scale_factor)
        if not (factor > 1 and math.isfinite(factor)):
            raise ValueError(f"{owner}: scale_factor must be a finite number > 1, but received "
                             f"{scale_factor!r}")
        if isinstance(scale_window, (bool, np.bool_)) or \
                not isinstance(scale_window, numbers.Integral):
            raise TypeError(f"{owner}: scale_window must be an integer >= 1, but received "
                            f"{scale_window!r} ({type(scale_window).__name__})")
        if scale_window < 1:
            raise ValueError(f"{owner}: scale_window must be an integer >= 1, but received "
                             f"{scale_window!r}")
        self.scale_factor = factor
        self.scale_window = int(scale_window)
        self.counter = 0

    def _check_static(self, inputs: Any, method: str) -> None:
        for leaf in _leaves(inputs):
            if isinstance(leaf, Variable) and not _is_eager(leaf):
                raise TypeError(
                    f"DynamicLossScaler.{method}: {leaf.name} is a static Variable; a dynamic "
                    f"scale changes between runs, so it cannot be baked into the program. Use "
                    f"StaticLossScaler, or fluid.contrib.mixed_precision.decorate (the scale "
                    f"lives in a persistable variable updated by update_loss_scaling)")

    def adjust(self, grads_finite: Any) -> bool:
        """Apply the rule for one step; returns True."""
        finite = _as_bool(grads_finite, type(self).__name__)
        if finite:
            if self.counter == self.scale_window - 1:
                grown = self._scale_value * self.scale_factor
                if math.isfinite(grown):
                    self._scale_value = grown
            self.counter = (self.counter + 1) % self.scale_window
        else:
            self._scale_value = max(1.0, self._scale_value / self.scale_factor)
            self.counter = 0
        return True

    def __repr__(self) -> str:
        return (f"DynamicLossScaler(scale_value={self._scale_value}, "
                f"scale_factor={self.scale_factor}, scale_window={self.scale_window})")


def all_finite(inputs: Any) -> Any:
    """True when no element of any leaf of ``inputs`` (tensors, arrays, numbers or static
    Variables, nested in tuples/lists) is NaN or +-Inf.

    Eager values give a Python ``bool``. Static Variables give a bool [1] Variable computed by
    ``check_finite_and_unscale`` + ``logical_not`` (ops appended to the current program)."""
    leaves = _leaves(inputs)
    static = [x for x in leaves if isinstance(x, Variable) and not _is_eager(x)]
    if static:
        if len(static) != len(leaves):
            raise TypeError("all_finite: mix of static Variables and eager values; pass only "
                            "Variables of the program being built, or only tensors/arrays")
        return _static_all_finite(static)
    from ..ops.amp import any_nonfinite
    arrays = []
    for x in leaves:
        if _is_eager(x):
            arrays.append(x.numpy())
        elif isinstance(x, (np.ndarray, numbers.Number, np.generic)):
            arrays.append(np.asarray(x))
        else:
            raise TypeError(f"all_finite: expected tensors, NumPy arrays, numbers or static "
                            f"Variables (nested in tuples/lists), but received "
                            f"{type(x).__name__}")
    return not any_nonfinite(arrays)


def _static_all_finite(variables: List[Variable]) -> Variable:
    block = variables[0].block
    one = rewrite.op(block, "fill_constant", dtype=VarType.FP32,
                     attrs={"shape": [1], "dtype": VarType.FP32, "value": 1.0})
    outs = [rewrite.tmp(block, "check_finite_and_unscale", v.dtype) for v in variables]
    found = rewrite.tmp(block, "check_finite_and_unscale", VarType.BOOL, [1])
    rewrite.append(block, "check_finite_and_unscale", {"X": variables, "Scale": one},
                   {"Out": outs, "FoundInfinite": found})
    return rewrite.op(block, "logical_not", X=found)

