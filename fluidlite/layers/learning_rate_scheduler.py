"""Learning-rate schedules (``fluid.layers.*_decay``), fluid 1.8 semantics.

Each returns a [1] float32 Variable recomputed every run of the main program, usable as an
optimizer's ``learning_rate``. The step ``t`` is the persistable int64 counter
``@LR_DECAY_COUNTER@`` (``autoincreased_step_counter``: initialised to ``begin - 1`` in the
startup program, incremented by an op prepended to block 0), so the first run sees ``t = 0``
(``noam_decay``: ``t = 1``). All ops carry op_role LRSched.

``piecewise_decay``, ``linear_lr_warmup`` and ``polynomial_decay(cycle=True)`` are written as
fluid 1.8 wrote them, with ``Switch`` (conditional blocks): each case assigns the schedule's
value to the persistable variable (``learning_rate`` / ``learning_rate_warmup``) or, for the
cycle, replaces ``ceil(t / decay_steps)`` by 1 at ``t = 0``.

In dygraph mode (inside ``fluid.dygraph.guard()``) each returns, as fluid 1.8's did, the
matching ``fluid.dygraph`` decay object built from the same arguments (``PiecewiseDecay`` with
``begin=0``, ...): there is no program to hold the step counter, and the object counts the
optimizer's steps instead.
"""
from __future__ import annotations

import functools
import inspect
import math
from typing import Any, Callable, Dict, Optional, Sequence, TypeVar, Union

from ..core import mode as _mode
from ..core.dtypes import VarType
from ..core.ir import Variable, default_main_program
from ..initializer import Constant
from ..layer_helper import LayerHelper, check_finite
from .control_flow import Switch, autoincreased_step_counter

__all__ = ["exponential_decay", "natural_exp_decay", "inverse_time_decay", "polynomial_decay",
           "piecewise_decay", "noam_decay", "cosine_decay", "linear_lr_warmup"]

_COUNTER = "@LR_DECAY_COUNTER@"
_F = TypeVar("_F", bound=Callable[..., Any])


def _dygraph_form(cls_name: str, **extra: Any) -> Callable[[_F], _F]:
    """Make the decorated schedule return, in dygraph mode, ``fluid.dygraph.<cls_name>`` of
    its arguments in order (plus ``extra``), as fluid 1.8's ``in_dygraph_mode()`` branches did;
    dygraph registers the classes with ``core.mode`` (layers never import dygraph)."""
    def wrap(fn: _F) -> _F:
        sig = inspect.signature(fn)

        @functools.wraps(fn)
        def schedule(*args: Any, **kwargs: Any) -> Any:
            if _mode.tracer is None:
                return fn(*args, **kwargs)
            bound = sig.bind(*args, **kwargs)
            bound.apply_defaults()
            values = dict(bound.arguments)
            if cls_name == "PiecewiseDecay" and len(values["values"]) - \
                    len(values["boundaries"]) != 1:
                raise ValueError("len(values) - len(boundaries) should be 1")
            return _mode.implementation("lr." + cls_name)(**values, **extra)
        return schedule  # type: ignore[return-value]
    return wrap


def _op(op_type: str, inputs: Dict[str, Any], attrs: Optional[Dict[str, Any]] = None,
        dtype: Any = "float32", out: Optional[Variable] = None) -> Variable:
    helper = LayerHelper(op_type)
    if out is None:
        out = helper.create_variable_for_type_inference(dtype=dtype)
    helper.append_op(type=op_type, inputs=inputs, outputs={"Out": out}, attrs=attrs or {})
    return out


def _const(value: float, dtype: Any = "float32") -> Variable:
    return _op("fill_constant", {}, {"shape": [1], "dtype": dtype, "value": float(value)},
               dtype=dtype)


def _scale(x: Variable, scale: float, bias: float = 0.0) -> Variable:
    return _op("scale", {"X": x}, {"scale": float(scale), "bias": float(bias)}, dtype=x.dtype)


def _fill(value: float, out: Variable) -> Variable:
    """``fill_constant`` of ``value`` into ``out`` ([1], its dtype)."""
    return _op("fill_constant", {}, {"shape": [1], "dtype": out.dtype, "value": float(value)},
               dtype=out.dtype, out=out)


def _less_than(x: Variable, y: Variable) -> Variable:
    return _op("less_than", {"X": x, "Y": y}, dtype="bool")


def _decay_step_counter(begin: int = 0) -> Variable:
    counter = autoincreased_step_counter(counter_name=_COUNTER, begin=begin, step=1)
    return _op("cast", {"X": counter}, {"in_dtype": counter.dtype, "out_dtype": VarType.FP32})


def _number(fn: str, arg: str, value: Any, positive: bool = False) -> float:
    return check_finite(value, arg, fn, positive)


def _div_res(fn: str, decay_steps: Any, staircase: bool) -> Variable:
    steps = _number(fn, "decay_steps", decay_steps, positive=True)
    div = _scale(_decay_step_counter(), 1.0 / steps)
    return _op("floor", {"X": div}) if staircase else div


@_dygraph_form("ExponentialDecay")
def exponential_decay(learning_rate: float, decay_steps: Union[int, float], decay_rate: float,
                      staircase: bool = False) -> Variable:
    """``learning_rate * decay_rate ** (t / decay_steps)`` (exponent floored if staircase).

    Args:
        learning_rate (float): the initial rate.
        decay_steps (int | float): steps per decay period.
        decay_rate (float): the factor per period.
        staircase (bool, default False): decay in whole periods.
    Returns:
        Variable: ``learning_rate * decay_rate ** (step / decay_steps)``, updated every run.
    Raises:
        TypeError: ``learning_rate``, ``decay_steps`` or ``decay_rate`` is not a number.
        ValueError: a number is not finite, ``decay_steps`` is not positive, or ``decay_rate`` is
            negative.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     lr = fluid.layers.exponential_decay(1.0, decay_steps=1, decay_rate=0.5)
        ...     step = fluid.layers.autoincreased_step_counter(begin=0)  # see the schedule advance
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> [round(float(exe.run(main, fetch_list=[lr])[0][0]), 4) for _ in range(4)]
        [1.0, 0.5, 0.25, 0.125]
    """
    return _rate_decay("exponential_decay", learning_rate, decay_steps, decay_rate, staircase,
                       lambda lr, rate, div: _scale(
                           _op("elementwise_pow", {"X": _const(rate), "Y": div}), lr))


@_dygraph_form("NaturalExpDecay")
def natural_exp_decay(learning_rate: float, decay_steps: Union[int, float], decay_rate: float,
                      staircase: bool = False) -> Variable:
    """``learning_rate * exp(-decay_rate * t / decay_steps)`` (floored if staircase).

    Args:
        learning_rate (float): the initial rate.
        decay_steps (int | float): steps per decay period.
        decay_rate (float): the exponent's factor.
        staircase (bool, default False): decay in whole periods.
    Returns:
        Variable: ``learning_rate * exp(-decay_rate * step / decay_steps)``.
    Raises:
        TypeError: ``learning_rate``, ``decay_steps`` or ``decay_rate`` is not a number.
        ValueError: a number is not finite, ``decay_steps`` is not positive, or ``decay_rate`` is
            negative.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     lr = fluid.layers.natural_exp_decay(1.0, decay_steps=1, decay_rate=0.5)
        ...     step = fluid.layers.autoincreased_step_counter(begin=0)  # see the schedule advance
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> [round(float(exe.run(main, fetch_list=[lr])[0][0]), 4) for _ in range(4)]
        [1.0, 0.6065, 0.3679, 0.2231]
    """
    return _rate_decay("natural_exp_decay", learning_rate, decay_steps, decay_rate, staircase,
                       lambda lr, rate, div: _scale(_op("exp", {"X": _scale(div, -rate)}), lr))


@_dygraph_form("InverseTimeDecay")
def inverse_time_decay(learning_rate: float, decay_steps: Union[int, float], decay_rate: float,
                       staircase: bool = False) -> Variable:
    """``learning_rate / (1 + decay_rate * t / decay_steps)`` (floored if staircase).

    Args:
        learning_rate (float): the initial rate.
        decay_steps (int | float): steps per decay period.
        decay_rate (float): the factor.
        staircase (bool, default False): decay in whole periods.
    Returns:
        Variable: ``learning_rate / (1 + decay_rate * step / decay_steps)``.
    Raises:
        TypeError: ``learning_rate``, ``decay_steps`` or ``decay_rate`` is not a number.
        ValueError: a number is not finite, ``decay_steps`` is not positive, or ``decay_rate`` is
            negative.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     lr = fluid.layers.inverse_time_decay(1.0, decay_steps=1, decay_rate=0.5)
        ...     step = fluid.layers.autoincreased_step_counter(begin=0)  # see the schedule advance
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> [round(float(exe.run(main, fetch_list=[lr])[0][0]), 4) for _ in range(4)]
        [1.0, 0.6667, 0.5, 0.4]
    """
    return _rate_decay("inverse_time_decay", learning_rate, decay_steps, decay_rate, staircase,
                       lambda lr, rate, div: _op("elementwise_div",
                                                 {"X": _const(lr), "Y": _scale(div, rate, 1.0)}))


def _rate_decay(fn: str, learning_rate: Any, decay_steps: Any, decay_rate: Any,
                staircase: bool, formula: Callable[[float, float, Variable], Variable]
                ) -> Variable:
    """What the ``decay_rate`` schedules share: ``learning_rate`` and ``decay_rate`` checked
    (as numbers, named after ``fn``), then ``formula(lr, rate, div)`` built in the LR-schedule
    guard, ``div`` being ``t / decay_steps`` (floored if ``staircase``)."""
    lr = _number(fn, "learning_rate", learning_rate)
    rate = _number(fn, "decay_rate", decay_rate)
    if rate < 0:    # exponential: NaN for fractional exponents; the others grow or divide by 0
        raise ValueError(f"{fn}: decay_rate must be >= 0, but received {decay_rate!r}")
    with default_main_program()._lr_schedule_guard():
        return formula(lr, rate, _div_res(fn, decay_steps, staircase))


@_dygraph_form("PolynomialDecay")
def polynomial_decay(learning_rate: float, decay_steps: Union[int, float],
                     end_learning_rate: float = 0.0001, power: float = 1.0,
                     cycle: bool = False) -> Variable:
    """``(lr - end) * (1 - t / decay_steps) ** power + end`` with ``t`` capped at decay_steps;
    ``cycle``: decay_steps is multiplied by ``ceil(t / decay_steps)`` (1 when t = 0).

    Args:
        learning_rate (float): the initial learning rate ``lr``.
        decay_steps (int | float): the steps of one decay period (> 0).
        end_learning_rate (float, default 0.0001): the final learning rate ``end``.
        power (float, default 1.0): the exponent of the polynomial.
        cycle (bool, default False): restart the decay after each period with a longer one.
    Returns:
        Variable: float32 [1], the decayed learning rate, updated every run (in dygraph mode a
        ``fluid.dygraph.PolynomialDecay``).
    Raises:
        TypeError: ``learning_rate``, ``decay_steps``, ``end_learning_rate`` or ``power`` is not
            a number.
        ValueError: a number is not finite, or ``decay_steps`` is not positive.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     lr = fluid.layers.polynomial_decay(1.0, decay_steps=3, end_learning_rate=0.0)
        ...     step = fluid.layers.autoincreased_step_counter(begin=0)  # see the schedule advance
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> [round(float(exe.run(main, fetch_list=[lr])[0][0]), 4) for _ in range(4)]
        [1.0, 0.6667, 0.3333, 0.0]
    """
    fn = "polynomial_decay"
    lr = _number(fn, "learning_rate", learning_rate)
    end = _number(fn, "end_learning_rate", end_learning_rate)
    pw = _number(fn, "power", power)
    steps = _number(fn, "decay_steps", decay_steps, positive=True)
    with default_main_program()._lr_schedule_guard():
        t = _decay_step_counter()
        if cycle:
            div = _op("ceil", {"X": _scale(t, 1.0 / steps)})
            zero, one = _const(0.0), _const(1.0)
            with Switch() as switch:                                   # t = 0 -> 1
                with switch.case(_op("equal", {"X": t, "Y": zero}, dtype="bool")):
                    _op("assign", {"X": one}, out=div)
            frac = _op("elementwise_div", {"X": t, "Y": _scale(div, steps)})
        else:
            t = _op("elementwise_min", {"X": t, "Y": _const(steps)})
            frac = _scale(t, 1.0 / steps)
        base = _scale(frac, -1.0, 1.0)
        return _scale(_op("elementwise_pow", {"X": base, "Y": _const(pw)}), lr - end, end)


@_dygraph_form("PiecewiseDecay", begin=0)
def piecewise_decay(boundaries: Sequence[Union[int, float]],
                    values: Sequence[float]) -> Variable:
    """``values[i]`` while ``t < boundaries[i]`` (first match), else ``values[-1]``; the result
    is the persistable global variable ``learning_rate``.

    Args:
        boundaries (list of int): the steps where the rate changes.
        values (list of float): one more value than boundaries.
    Returns:
        Variable: ``values[i]`` while ``step < boundaries[i]``.
    Raises:
        TypeError: a boundary or value is not a number.
        ValueError: ``len(values) != len(boundaries) + 1``, a number is not finite, or the
            boundaries are not increasing.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     lr = fluid.layers.piecewise_decay(boundaries=[2], values=[1.0, 0.1])
        ...     step = fluid.layers.autoincreased_step_counter(begin=0)  # see the schedule advance
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> [round(float(exe.run(main, fetch_list=[lr])[0][0]), 4) for _ in range(4)]
        [1.0, 1.0, 0.1, 0.1]
    """
    if len(values) - len(boundaries) != 1:
        raise ValueError("len(values) - len(boundaries) should be 1")
    bounds = [_number("piecewise_decay", "boundaries[%d]" % i, b) for i, b in enumerate(boundaries)]
    vals = [_number("piecewise_decay", "values[%d]" % i, v) for i, v in enumerate(values)]
    if any(b2 < b1 for b1, b2 in zip(bounds, bounds[1:])):
        raise ValueError(f"piecewise_decay: boundaries must be increasing, got {list(bounds)}")
    with default_main_program()._lr_schedule_guard():
        t = _decay_step_counter()
        helper = LayerHelper("global_var")
        lr, is_new = helper.create_or_get_global_variable(
            name="learning_rate", shape=[1], dtype="float32", persistable=True,
            stop_gradient=True)
        if is_new:
            helper.set_variable_initializer(lr, Constant(value=0.0, force_cpu=True))
        if not bounds:
            _fill(vals[0], lr)
            return lr
        with Switch() as switch:
            for b, v in zip(bounds, vals):
                with switch.case(_less_than(t, _const(b))):
                    _fill(v, lr)
            with switch.default():
                _fill(vals[-1], lr)
        return lr


@_dygraph_form("NoamDecay")
def noam_decay(d_model: Union[int, float], warmup_steps: Union[int, float],
               learning_rate: float = 1.0) -> Variable:
    """``learning_rate * d_model**-0.5 * min(t**-0.5, warmup_steps**-1.5 * t)``, t from 1.

    Args:
        d_model (int | float): the model width.
        warmup_steps (int | float): the warm-up length.
        learning_rate (float, default 1.0): a factor.
    Returns:
        Variable: ``learning_rate * d_model ** -0.5 * min(step ** -0.5, step * warmup_steps **
        -1.5)``.
    Raises:
        TypeError: ``d_model``, ``warmup_steps`` or ``learning_rate`` is not a number.
        ValueError: a number is not finite, or ``d_model`` / ``warmup_steps`` is not positive.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     lr = fluid.layers.noam_decay(d_model=4, warmup_steps=2)
        ...     step = fluid.layers.autoincreased_step_counter(begin=0)  # see the schedule advance
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> [round(float(exe.run(main, fetch_list=[lr])[0][0]), 4) for _ in range(4)]
        [0.1768, 0.3536, 0.2887, 0.25]
    """
    d = _number("noam_decay", "d_model", d_model, positive=True)
    warm = _number("noam_decay", "warmup_steps", warmup_steps, positive=True)
    lr = _number("noam_decay", "learning_rate", learning_rate)
    with default_main_program()._lr_schedule_guard():
        t = _decay_step_counter(1)
        a = _op("elementwise_pow", {"X": t, "Y": _const(-0.5)})
        b = _scale(t, warm ** -1.5)
        return _scale(_op("elementwise_min", {"X": a, "Y": b}), lr * d ** -0.5)


@_dygraph_form("CosineDecay")
def cosine_decay(learning_rate: float, step_each_epoch: int, epochs: int) -> Variable:
    """``learning_rate * 0.5 * (cos(floor(t / step_each_epoch) * pi / epochs) + 1)``.

    Args:
        learning_rate (float): the initial rate.
        step_each_epoch (int): steps per epoch.
        epochs (int): the number of epochs.
    Returns:
        Variable: ``learning_rate * (cos(epoch * pi / epochs) + 1) / 2``.
    Raises:
        TypeError: ``learning_rate``, ``step_each_epoch`` or ``epochs`` is not a number.
        ValueError: a number is not finite, or ``step_each_epoch`` / ``epochs`` is not positive.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     lr = fluid.layers.cosine_decay(1.0, step_each_epoch=1, epochs=4)
        ...     step = fluid.layers.autoincreased_step_counter(begin=0)  # see the schedule advance
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> [round(float(exe.run(main, fetch_list=[lr])[0][0]), 4) for _ in range(4)]
        [1.0, 0.8536, 0.5, 0.1464]
    """
    lr = _number("cosine_decay", "learning_rate", learning_rate)
    per = _number("cosine_decay", "step_each_epoch", step_each_epoch, positive=True)
    epochs_ = _number("cosine_decay", "epochs", epochs, positive=True)
    with default_main_program()._lr_schedule_guard():
        t = _decay_step_counter()
        epoch = _op("floor", {"X": _scale(t, 1.0 / per)})
        cos = _op("cos", {"X": _scale(epoch, math.pi / epochs_)})
        return _scale(cos, lr * 0.5, lr * 0.5)


@_dygraph_form("LinearLrWarmup")
def linear_lr_warmup(learning_rate: Union[float, Variable], warmup_steps: int, start_lr: float,
                     end_lr: float) -> Variable:
    """``start_lr + (end_lr - start_lr) * t / warmup_steps`` while ``t < warmup_steps``, then
    ``learning_rate`` (a float or a schedule Variable). The result is the persistable global
    variable ``learning_rate_warmup``.

    Args:
        learning_rate (float | Variable): the rate after the warm-up.
        warmup_steps (int): the warm-up length.
        start_lr (float): the first rate.
        end_lr (float): the rate reached at ``warmup_steps``.
    Returns:
        Variable: linear from ``start_lr`` to ``end_lr``, then ``learning_rate``.
    Raises:
        TypeError: ``warmup_steps``, ``start_lr``, ``end_lr`` or a non-Variable ``learning_rate``
            is not a number.
        ValueError: a number is not finite, or ``warmup_steps`` is not positive.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     lr = fluid.layers.linear_lr_warmup(0.5, warmup_steps=2, start_lr=0.0, end_lr=0.5)
        ...     step = fluid.layers.autoincreased_step_counter(begin=0)  # see the schedule advance
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> [round(float(exe.run(main, fetch_list=[lr])[0][0]), 4) for _ in range(4)]
        [0.0, 0.25, 0.5, 0.5]
    """
    fn = "linear_lr_warmup"
    dtype = learning_rate.dtype if isinstance(learning_rate, Variable) else VarType.FP32
    warm = _number(fn, "warmup_steps", warmup_steps, positive=True)
    start = _number(fn, "start_lr", start_lr)
    end = _number(fn, "end_lr", end_lr)
    if not isinstance(learning_rate, Variable):
        base_value = _number(fn, "learning_rate", learning_rate)
    with default_main_program()._lr_schedule_guard():
        helper = LayerHelper("global_var")
        lr, is_new = helper.create_or_get_global_variable(
            name="learning_rate_warmup", shape=[1], dtype=dtype, persistable=True,
            stop_gradient=True)
        if is_new:
            helper.set_variable_initializer(lr, Constant(value=0.0, force_cpu=True))
        t = _decay_step_counter()
        with Switch() as switch:
            with switch.case(_less_than(t, _const(warm))):
                ramp = _scale(t, (end - start) / warm, start)
                if lr.dtype != VarType.FP32:
                    ramp = _op("cast", {"X": ramp}, {"in_dtype": VarType.FP32,
                                                     "out_dtype": lr.dtype}, dtype=lr.dtype)
                _op("assign", {"X": ramp}, out=lr)
            with switch.default():
                base = learning_rate if isinstance(learning_rate, Variable) else \
                    _const(base_value, dtype)
                _op("assign", {"X": base}, out=lr)
        return lr
