"""fluid 1.8's dygraph learning-rate decays: objects passed as an optimizer's
``learning_rate``; the optimizer calls one once per ``minimize`` (which then advances
``step_num`` by ``step``). Formulas as fluid 1.8 (``div = step_num / decay_steps``, floored
with ``staircase``)."""
from __future__ import annotations

import math
from typing import Any, Dict, Sequence, Union

import numpy as np

from ..core import mode as _mode
from ..layer_helper import check_finite
from .tensor import VarBase

__all__ = ["LearningRateDecay", "PiecewiseDecay", "NaturalExpDecay", "ExponentialDecay",
           "InverseTimeDecay", "PolynomialDecay", "CosineDecay", "NoamDecay", "LinearLrWarmup",
           "ReduceLROnPlateau", "StepDecay", "MultiStepDecay", "LambdaDecay"]


class LearningRateDecay:
    """Base class: ``step()`` gives the rate for ``step_num``; calling the object returns it as a
    float32 [1] tensor and advances ``step_num`` by ``step_size``."""

    _fluidlite_dygraph_lr = True     # accepted by Optimizer(learning_rate=...)

    def __init__(self, begin: int = 0, step: int = 1, dtype: str = "float32") -> None:
        self.step_num = begin
        self.step_size = step
        self.dtype = dtype

    def __call__(self) -> VarBase:
        lr = self.step()
        self.step_num += self.step_size
        return self.create_lr_var(lr)

    def create_lr_var(self, lr: Union[float, VarBase]) -> VarBase:
        if isinstance(lr, VarBase):
            return lr
        return VarBase(np.array([lr], dtype=self.dtype), name="learning_rate")

    def step(self) -> float:
        raise NotImplementedError(f"{type(self).__name__} must define step()")

    def _peek(self) -> Any:
        """The rate the next ``minimize`` uses, without advancing (``current_step_lr``)."""
        return self.step()

    def state_dict(self) -> Dict[str, Any]:
        return {"step_num": self.step_num}

    def set_dict(self, state: Dict[str, Any]) -> None:
        if "step_num" in state:
            self.step_num = int(np.asarray(state["step_num"]).reshape(-1)[0])

    set_state_dict = set_dict


class PiecewiseDecay(LearningRateDecay):
    """``values[i]`` while ``step_num < boundaries[i]``, then ``values[-1]``.

    Args:
        boundaries (list of int): the steps where the rate changes.
        values (list of float): one more value than boundaries.
        begin (int): the step count at construction.
        step (int, default 1): the increment per ``minimize``.
        dtype (str, default "float32"): the rate's dtype.
    Returns:
        PiecewiseDecay: the schedule, for an optimizer's ``learning_rate``; calling it
        returns the rate as a float32 [1] tensor and advances ``step_num`` by ``step``.
    Raises:
        TypeError: a boundary or value is not a number.
        ValueError: ``len(values) != len(boundaries) + 1``, the boundaries are not increasing, or
            a boundary / value is not finite.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> with fluid.dygraph.guard():
        ...     lr = fluid.dygraph.PiecewiseDecay(boundaries=[2, 4], values=[1.0, 0.5, 0.1], begin=0)
        ...     print([round(float(lr().numpy()[0]), 4) for _ in range(6)])
        [1.0, 1.0, 0.5, 0.5, 0.1, 0.1]
    """

    def __init__(self, boundaries: Sequence[int], values: Sequence[float], begin: int,
                 step: int = 1, dtype: str = "float32") -> None:
        super().__init__(begin, step, dtype)
        if len(values) != len(boundaries) + 1:
            raise ValueError(f"PiecewiseDecay: needs len(values) == len(boundaries) + 1, got "
                             f"{len(values)} values and {len(boundaries)} boundaries")
        bounds = [check_finite(b, f"boundaries[{i}]", "PiecewiseDecay")
                  for i, b in enumerate(boundaries)]
        if any(b >= c for b, c in zip(bounds, bounds[1:])):
            raise ValueError(f"PiecewiseDecay: boundaries must be increasing, got {bounds}")
        self.boundaries = list(boundaries)
        self.vars = [check_finite(v, f"values[{i}]", "PiecewiseDecay")
                     for i, v in enumerate(values)]

    def step(self) -> float:
        for i, b in enumerate(self.boundaries):
            if self.step_num < b:
                return self.vars[i]
        return self.vars[-1]


class _Div(LearningRateDecay):
    def __init__(self, learning_rate: float, decay_steps: int, decay_rate: float,
                 staircase: bool = False, begin: int = 0, step: int = 1,
                 dtype: str = "float32") -> None:
        super().__init__(begin, step, dtype)
        name = type(self).__name__
        self.learning_rate = check_finite(learning_rate, "learning_rate", name)
        self.decay_steps = decay_steps
        check_finite(decay_steps, "decay_steps", name, positive=True)
        self.decay_rate = check_finite(decay_rate, "decay_rate", name, minimum=0.0)
        self.staircase = bool(staircase)

    def _div(self) -> float:
        div = self.step_num / self.decay_steps
        return math.floor(div) if self.staircase else div


class NaturalExpDecay(_Div):
    """``lr * exp(-decay_rate * div)``.

    Args:
        learning_rate (float): the initial rate.
        decay_steps (int): steps per decay period.
        decay_rate (float): the exponent's factor.
        staircase (bool, default False): decay in whole periods.
        begin (int, default 0): the step count at construction.
        step (int, default 1): the increment per ``minimize``.
        dtype (str, default "float32"): the rate's dtype.
    Returns:
        NaturalExpDecay: the schedule, for an optimizer's ``learning_rate``; calling it
        returns the rate as a float32 [1] tensor and advances ``step_num`` by ``step``.
    Raises:
        TypeError: ``learning_rate``, ``decay_steps`` or ``decay_rate`` is not a number.
        ValueError: one of them is not finite, ``decay_steps`` is not positive or ``decay_rate``
            is negative.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> with fluid.dygraph.guard():
        ...     lr = fluid.dygraph.NaturalExpDecay(learning_rate=1.0, decay_steps=1, decay_rate=0.5)
        ...     print([round(float(lr().numpy()[0]), 4) for _ in range(3)])
        [1.0, 0.6065, 0.3679]
    """

    def step(self) -> float:
        return self.learning_rate * math.exp(-self.decay_rate * self._div())


class ExponentialDecay(_Div):
    """``lr * decay_rate ** div``.

    Args:
        learning_rate (float): the initial rate.
        decay_steps (int): steps per decay period.
        decay_rate (float): the factor per period.
        staircase (bool, default False): decay in whole periods.
        begin (int, default 0): the step count at construction.
        step (int, default 1): the increment per ``minimize``.
        dtype (str, default "float32"): the rate's dtype.
    Returns:
        ExponentialDecay: the schedule, for an optimizer's ``learning_rate``; calling it
        returns the rate as a float32 [1] tensor and advances ``step_num`` by ``step``.
    Raises:
        TypeError: ``learning_rate``, ``decay_steps`` or ``decay_rate`` is not a number.
        ValueError: one of them is not finite, ``decay_steps`` is not positive or ``decay_rate``
            is negative.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> with fluid.dygraph.guard():
        ...     lr = fluid.dygraph.ExponentialDecay(learning_rate=1.0, decay_steps=1, decay_rate=0.5)
        ...     print([round(float(lr().numpy()[0]), 4) for _ in range(3)])
        [1.0, 0.5, 0.25]
    """

    def step(self) -> float:
        return self.learning_rate * self.decay_rate ** self._div()


class InverseTimeDecay(_Div):
    """``lr / (1 + decay_rate * div)``.

    Args:
        learning_rate (float): the initial rate.
        decay_steps (int): steps per decay period.
        decay_rate (float): the factor.
        staircase (bool, default False): decay in whole periods.
        begin (int, default 0): the step count at construction.
        step (int, default 1): the increment per ``minimize``.
        dtype (str, default "float32"): the rate's dtype.
    Returns:
        InverseTimeDecay: the schedule, for an optimizer's ``learning_rate``; calling it
        returns the rate as a float32 [1] tensor and advances ``step_num`` by ``step``.
    Raises:
        TypeError: ``learning_rate``, ``decay_steps`` or ``decay_rate`` is not a number.
        ValueError: one of them is not finite, ``decay_steps`` is not positive or ``decay_rate``
            is negative.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> with fluid.dygraph.guard():
        ...     lr = fluid.dygraph.InverseTimeDecay(learning_rate=1.0, decay_steps=1, decay_rate=0.5)
        ...     print([round(float(lr().numpy()[0]), 4) for _ in range(3)])
        [1.0, 0.6667, 0.5]
    """

    def step(self) -> float:
        return self.learning_rate / (1 + self.decay_rate * self._div())


class PolynomialDecay(LearningRateDecay):
    """``(lr - end_lr) * (1 - step/decay_steps) ** power + end_lr`` (``cycle``: restart).

    Args:
        learning_rate (float): the initial rate.
        decay_steps (int): steps to reach ``end_learning_rate``.
        end_learning_rate (float, default 1e-4): the final rate.
        power (float, default 1.0): the polynomial's power.
        cycle (bool, default False): restart after ``decay_steps``.
        begin (int, default 0): the step count at construction.
        step (int, default 1): the increment per ``minimize``.
        dtype (str, default "float32"): the rate's dtype.
    Returns:
        PolynomialDecay: the schedule, for an optimizer's ``learning_rate``; calling it
        returns the rate as a float32 [1] tensor and advances ``step_num`` by ``step``.
    Raises:
        TypeError: ``learning_rate``, ``decay_steps``, ``end_learning_rate`` or ``power`` is not
            a number.
        ValueError: one of them is not finite or ``decay_steps`` is not positive.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> with fluid.dygraph.guard():
        ...     lr = fluid.dygraph.PolynomialDecay(learning_rate=1.0, decay_steps=4, end_learning_rate=0.0)
        ...     print([round(float(lr().numpy()[0]), 4) for _ in range(5)])
        [1.0, 0.75, 0.5, 0.25, 0.0]
    """

    def __init__(self, learning_rate: float, decay_steps: int,
                 end_learning_rate: float = 0.0001, power: float = 1.0, cycle: bool = False,
                 begin: int = 0, step: int = 1, dtype: str = "float32") -> None:
        super().__init__(begin, step, dtype)
        self.learning_rate = check_finite(learning_rate, "learning_rate", "PolynomialDecay")
        check_finite(decay_steps, "decay_steps", "PolynomialDecay", positive=True)
        self.decay_steps = decay_steps
        self.end_learning_rate = check_finite(end_learning_rate, "end_learning_rate",
                                              "PolynomialDecay")
        self.power = check_finite(power, "power", "PolynomialDecay")
        self.cycle = cycle

    def step(self) -> float:
        step_num, decay_steps = self.step_num, self.decay_steps
        if self.cycle:
            div = math.ceil(step_num / decay_steps)
            decay_steps = decay_steps * (1 if step_num == 0 else div)
        else:
            step_num = min(step_num, decay_steps)
        return ((self.learning_rate - self.end_learning_rate)
                * (1 - step_num / decay_steps) ** self.power + self.end_learning_rate)


class CosineDecay(LearningRateDecay):
    """``lr * 0.5 * (cos(floor(step / step_each_epoch) * pi / epochs) + 1)``.

    Args:
        learning_rate (float): the initial rate.
        step_each_epoch (int): steps per epoch.
        epochs (int): the number of epochs.
        begin (int, default 0): the step count at construction.
        step (int, default 1): the increment per ``minimize``.
        dtype (str, default "float32"): the rate's dtype.
    Returns:
        CosineDecay: the schedule, for an optimizer's ``learning_rate``; calling it
        returns the rate as a float32 [1] tensor and advances ``step_num`` by ``step``.
    Raises:
        TypeError: ``learning_rate``, ``step_each_epoch`` or ``epochs`` is not a number.
        ValueError: one of them is not finite, or ``step_each_epoch`` / ``epochs`` is not
            positive.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> with fluid.dygraph.guard():
        ...     lr = fluid.dygraph.CosineDecay(learning_rate=1.0, step_each_epoch=1, epochs=4)
        ...     print([round(float(lr().numpy()[0]), 4) for _ in range(4)])
        [1.0, 0.8536, 0.5, 0.1464]
    """

    def __init__(self, learning_rate: float, step_each_epoch: int, epochs: int,
                 begin: int = 0, step: int = 1, dtype: str = "float32") -> None:
        super().__init__(begin, step, dtype)
        self.learning_rate = check_finite(learning_rate, "learning_rate", "CosineDecay")
        check_finite(step_each_epoch, "step_each_epoch", "CosineDecay", positive=True)
        check_finite(epochs, "epochs", "CosineDecay", positive=True)
        self.step_each_epoch, self.epochs = step_each_epoch, epochs

    def step(self) -> float:
        epoch = math.floor(self.step_num / self.step_each_epoch)
        return self.learning_rate * 0.5 * (math.cos(epoch * math.pi / self.epochs) + 1)


class NoamDecay(LearningRateDecay):
    """``lr * d_model ** -0.5 * min(step ** -0.5, warmup_steps ** -1.5 * step)``.

    Args:
        d_model (int): the model width.
        warmup_steps (int): the warm-up length.
        begin (int, default 1): the step count at construction.
        step (int, default 1): the increment per ``minimize``.
        dtype (str, default "float32"): the rate's dtype.
        learning_rate (float, default 1.0): a factor.
    Returns:
        NoamDecay: the schedule, for an optimizer's ``learning_rate``; calling it
        returns the rate as a float32 [1] tensor and advances ``step_num`` by ``step``.
    Raises:
        TypeError: ``d_model``, ``warmup_steps`` or ``learning_rate`` is not a number.
        ValueError: one of them is not finite, or ``d_model`` / ``warmup_steps`` is not
            positive.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> with fluid.dygraph.guard():
        ...     lr = fluid.dygraph.NoamDecay(d_model=4, warmup_steps=2)
        ...     print([round(float(lr().numpy()[0]), 4) for _ in range(4)])
        [0.1768, 0.3536, 0.2887, 0.25]
    """

    def __init__(self, d_model: int, warmup_steps: int, begin: int = 1, step: int = 1,
                 dtype: str = "float32", learning_rate: float = 1.0) -> None:
        super().__init__(begin, step, dtype)
        check_finite(d_model, "d_model", "NoamDecay", positive=True)
        check_finite(warmup_steps, "warmup_steps", "NoamDecay", positive=True)
        self.d_model, self.warmup_steps = d_model, warmup_steps
        self.learning_rate = check_finite(learning_rate, "learning_rate", "NoamDecay")

    def step(self) -> float:
        a = self.step_num ** -0.5
        b = self.warmup_steps ** -1.5 * self.step_num
        return self.learning_rate * self.d_model ** -0.5 * min(a, b)


class LinearLrWarmup(LearningRateDecay):
    """``start_lr + (end_lr - start_lr) * step / warmup_steps`` for ``warmup_steps`` steps, then
    ``learning_rate`` (a float or another decay, which then starts counting)."""

    def __init__(self, learning_rate: Union[float, LearningRateDecay], warmup_steps: int,
                 start_lr: float, end_lr: float, begin: int = 1, step: int = 1,
                 dtype: str = "float32") -> None:
        super().__init__(begin, step, dtype)
        if not isinstance(learning_rate, (float, int, LearningRateDecay)):
            raise TypeError(f"LinearLrWarmup: learning_rate must be a float or a "
                            f"LearningRateDecay, got {type(learning_rate).__name__}")
        if not isinstance(learning_rate, LearningRateDecay):
            check_finite(learning_rate, "learning_rate", "LinearLrWarmup")
        warm = check_finite(warmup_steps, "warmup_steps", "LinearLrWarmup", positive=True)
        self.learning_rate, self.warmup_steps = learning_rate, warmup_steps
        self.start_lr = check_finite(start_lr, "start_lr", "LinearLrWarmup")
        end = check_finite(end_lr, "end_lr", "LinearLrWarmup")
        self.lr_ratio_before_warmup = (end - self.start_lr) / warm

    def step(self) -> Any:
        if self.step_num < self.warmup_steps:
            return self.start_lr + self.lr_ratio_before_warmup * self.step_num
        if isinstance(self.learning_rate, LearningRateDecay):
            return self.learning_rate()
        return float(self.learning_rate)


class ReduceLROnPlateau(LearningRateDecay):
    """Multiply the rate by ``decay_rate`` when ``step(loss)`` has not improved by
    ``threshold`` for ``patience`` calls (then wait ``cooldown`` calls); never below
    ``min_lr``. Calling the object returns the current rate (it does not count steps)."""

    def __init__(self, learning_rate: float, mode: str = "min", decay_rate: float = 0.1,
                 patience: int = 10, verbose: bool = False, threshold: float = 1e-4,
                 threshold_mode: str = "rel", cooldown: int = 0, min_lr: float = 0,
                 eps: float = 1e-8, dtype: str = "float32") -> None:
        super().__init__(dtype=dtype)
        if mode not in ("min", "max"):
            raise ValueError(f"ReduceLROnPlateau: mode must be 'min' or 'max', got {mode!r}")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError(f"ReduceLROnPlateau: threshold_mode must be 'rel' or 'abs', got "
                             f"{threshold_mode!r}")
        check_finite(decay_rate, "decay_rate", "ReduceLROnPlateau")
        if not decay_rate < 1.0:
            raise ValueError("new_lr = origin_lr * decay_rate and decay_rate should be < 1.0.")
        for arg, value in (("threshold", threshold), ("min_lr", min_lr), ("eps", eps)):
            check_finite(value, arg, "ReduceLROnPlateau", minimum=0.0)
        self.learning_rate = check_finite(learning_rate, "learning_rate", "ReduceLROnPlateau")
        self.mode, self.decay_rate = mode, decay_rate
        self.patience, self.verbose, self.threshold = patience, verbose, threshold
        self.threshold_mode, self.cooldown, self.min_lr, self.eps = \
            threshold_mode, cooldown, min_lr, eps
        self.cooldown_counter = 0
        self.best_loss: Any = None
        self.num_bad_epochs = 0
        self.epoch_num = 0

    def __call__(self) -> VarBase:
        return self.create_lr_var(self.learning_rate)

    def _peek(self) -> Any:
        return self.learning_rate

    def step(self, loss: Any) -> None:  # type: ignore[override]
        loss = float(np.asarray(loss.numpy() if isinstance(loss, VarBase) else loss)
                     .reshape(-1)[0])
        self.epoch_num += 1
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
        elif self.best_loss is None or self._better(loss, self.best_loss):
            self.best_loss, self.num_bad_epochs = loss, 0
        else:
            self.num_bad_epochs += 1
            if self.num_bad_epochs > self.patience:
                self.cooldown_counter, self.num_bad_epochs = self.cooldown, 0
                new = max(self.learning_rate * self.decay_rate, self.min_lr)
                if self.learning_rate - new > self.eps:
                    self.learning_rate = new
        if self.best_loss is None or self._better(loss, self.best_loss):
            self.best_loss = loss

    def _better(self, current: float, best: float) -> bool:
        if self.mode == "min":
            ref = best - best * self.threshold if self.threshold_mode == "rel" \
                else best - self.threshold
            return current < ref
        ref = best + best * self.threshold if self.threshold_mode == "rel" \
            else best + self.threshold
        return current > ref

    def state_dict(self) -> Dict[str, Any]:
        return {"learning_rate": self.learning_rate, "num_bad_epochs": self.num_bad_epochs,
                "cooldown_counter": self.cooldown_counter, "epoch_num": self.epoch_num}

    def set_dict(self, state: Dict[str, Any]) -> None:
        for k in ("learning_rate",):
            if k in state:
                setattr(self, k, float(np.asarray(state[k]).reshape(-1)[0]))
        for k in ("num_bad_epochs", "cooldown_counter", "epoch_num"):
            if k in state:
                setattr(self, k, int(np.asarray(state[k]).reshape(-1)[0]))


class _LearningRateEpochDecay(LearningRateDecay):
    """fluid 1.8's per-epoch decays: ``epoch()`` (once per epoch, after its steps) moves to the
    next epoch and computes its rate with ``get_lr()``; calling the object returns that rate
    (``minimize`` does not advance it)."""

    def __init__(self, learning_rate: float, dtype: Any = None) -> None:
        super().__init__(dtype=dtype or "float32")
        name = type(self).__name__
        if isinstance(learning_rate, bool) or not isinstance(learning_rate, (float, int)):
            raise TypeError(f"{name}: the type of 'learning_rate' must be float or int, but "
                            f"received {type(learning_rate).__name__}")
        self.base_lr = check_finite(learning_rate, "learning_rate", name, minimum=0.0)
        self.epoch_num = -1
        self.learning_rate: Any = self.base_lr
        self.epoch()

    def __call__(self) -> VarBase:
        return self.create_lr_var(self.learning_rate)

    def _peek(self) -> Any:
        return self.learning_rate

    def epoch(self, epoch: Any = None) -> None:
        """Move to epoch ``epoch`` (default: the next one) and compute its rate."""
        self.epoch_num = self.epoch_num + 1 if epoch is None else int(epoch)
        self.learning_rate = self.get_lr()

    def get_lr(self) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must define get_lr()")

    def state_dict(self) -> Dict[str, Any]:
        return {"epoch_num": self.epoch_num, "learning_rate": self.learning_rate}

    def set_dict(self, state: Dict[str, Any]) -> None:
        if "epoch_num" in state:
            self.epoch_num = int(np.asarray(state["epoch_num"]).reshape(-1)[0])
        if "learning_rate" in state:
            lr = state["learning_rate"]
            self.learning_rate = float(np.asarray(
                lr.numpy() if isinstance(lr, VarBase) else lr).reshape(-1)[0])

    set_state_dict = set_dict

    def _decayed(self, times: int) -> np.float32:
        # fluid 1.8: base_lr * decay_rate_var ** times, in float32 (elementwise_pow, scale)
        f32 = np.float32
        return f32(self.base_lr) * (f32(self.decay_rate) ** f32(times))   # type: ignore


def _check_decay_rate(decay_rate: Any, name: str) -> float:
    rate = check_finite(decay_rate, "decay_rate", name)
    if not rate < 1.0:
        raise ValueError(f"{name}: decay_rate should be < 1.0 (new_lr = origin_lr * "
                         f"decay_rate), but received {decay_rate!r}")
    return rate


class StepDecay(_LearningRateEpochDecay):
    """``learning_rate * decay_rate ** (epoch // step_size)`` (fluid 1.8).

    Args:
        learning_rate (float | int): the rate of epoch 0.
        step_size (int): epochs between two decays.
        decay_rate (float): the factor, < 1.0. Default 0.1.

    Example:
        >>> import fluidlite as fluid
        >>> with fluid.dygraph.guard():
        ...     s = fluid.dygraph.StepDecay(0.5, step_size=2)
        ...     rates = []
        ...     for _ in range(5):
        ...         rates.append(round(float(s().numpy()[0]), 4))
        ...         s.epoch()
        >>> rates
        [0.5, 0.5, 0.05, 0.05, 0.005]
    """

    def __init__(self, learning_rate: float, step_size: int, decay_rate: float = 0.1) -> None:
        if isinstance(step_size, bool) or not isinstance(step_size, int) or step_size < 1:
            raise TypeError(f"StepDecay: step_size must be a positive int, but received "
                            f"{step_size!r}")
        self.step_size_epochs = step_size
        self.decay_rate = _check_decay_rate(decay_rate, "StepDecay")
        super().__init__(learning_rate)
        self.step_size = step_size      # fluid 1.8's attribute (the base's step increment is
        # unused: calling an epoch decay does not advance it)

    def get_lr(self) -> Any:
        return self._decayed(self.epoch_num // self.step_size_epochs)


class MultiStepDecay(_LearningRateEpochDecay):
    """``learning_rate * decay_rate ** k`` where ``k`` milestones are <= the epoch (fluid 1.8).

    Args:
        learning_rate (float | int): the rate before the first milestone.
        milestones (list | tuple of int): increasing epochs where the rate decays.
        decay_rate (float): the factor, < 1.0. Default 0.1.

    Example:
        >>> import fluidlite as fluid
        >>> with fluid.dygraph.guard():
        ...     s = fluid.dygraph.MultiStepDecay(0.5, milestones=[1, 3])
        ...     rates = []
        ...     for _ in range(4):
        ...         rates.append(round(float(s().numpy()[0]), 4))
        ...         s.epoch()
        >>> rates
        [0.5, 0.05, 0.05, 0.005]
    """

    def __init__(self, learning_rate: float, milestones: Sequence[int],
                 decay_rate: float = 0.1) -> None:
        if not isinstance(milestones, (tuple, list)):
            raise TypeError(f"MultiStepDecay: milestones must be a tuple or list, but received "
                            f"{type(milestones).__name__}")
        if any(a >= b for a, b in zip(milestones, milestones[1:])):
            raise ValueError(f"MultiStepDecay: the elements of milestones must be increasing, "
                             f"but received {list(milestones)}")
        self.milestones = list(milestones)
        self.decay_rate = _check_decay_rate(decay_rate, "MultiStepDecay")
        super().__init__(learning_rate)

    def get_lr(self) -> Any:
        passed = sum(1 for m in self.milestones if self.epoch_num >= m)
        return self._decayed(passed)


class LambdaDecay(_LearningRateEpochDecay):
    """``learning_rate * lr_lambda(epoch)`` (fluid 1.8).

    Args:
        learning_rate (float | int): the initial rate.
        lr_lambda (callable): epoch -> multiplicative factor.

    Example:
        >>> import fluidlite as fluid
        >>> with fluid.dygraph.guard():
        ...     s = fluid.dygraph.LambdaDecay(0.5, lr_lambda=lambda e: 0.9 ** e)
        ...     s.epoch(); s.epoch()
        ...     print(round(float(s().numpy()[0]), 4))
        0.405
    """

    def __init__(self, learning_rate: float, lr_lambda: Any) -> None:
        if not callable(lr_lambda):
            raise TypeError(f"LambdaDecay: lr_lambda must be callable, but received "
                            f"{type(lr_lambda).__name__}")
        self.lr_lambda = lr_lambda
        super().__init__(learning_rate)

    def get_lr(self) -> Any:
        return self.base_lr * self.lr_lambda(self.epoch_num)


# issue 29: fluid.layers' decay functions return these objects in dygraph mode, as fluid 1.8's
# (layers/learning_rate_scheduler.py reaches them through core.mode: layers never import dygraph)
for _cls in (PiecewiseDecay, ExponentialDecay, NaturalExpDecay, InverseTimeDecay,
             PolynomialDecay, NoamDecay, CosineDecay, LinearLrWarmup):
    _mode.register("lr." + _cls.__name__, _cls)
