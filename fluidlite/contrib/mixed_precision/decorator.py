"""``decorate(optimizer, ...)``: automatic mixed precision with loss scaling (fluid 1.8's
``fluid.contrib.mixed_precision.decorate`` / ``OptimizerWithMixedPrecision``).

``minimize(loss)`` of the decorated optimizer is one pass (one build transaction):

1. ``rewrite_program``: float16 casts around the white-list ops (``fp16_utils.py``);
2. ``scaled_loss = loss * loss_scaling`` (``loss_scaling``: a persistable float32 [1]
   initialised to ``init_loss_scaling``) and the inner optimizer's backward from it;
3. ``check_finite_and_unscale(grads, loss_scaling) -> grads / loss_scaling, found_inf``;
4. with ``use_dynamic_loss_scaling``: ``update_loss_scaling`` (persistable int32 counters
   ``num_good_steps`` / ``num_bad_steps``; zeroes the gradients on an overflow, grows the scale
   by ``incr_ratio`` after ``incr_every_n_steps`` finite steps, shrinks it by ``decr_ratio``
   after ``decr_every_n_nan_or_inf`` overflowing ones, never below 1);
5. the inner optimizer's ``apply_gradients`` on the unscaled gradients: its ``grad_clip``,
   regularization and update ops;
6. ``amp/guard.py``: every state write of step 5 (parameters, moments, beta powers, step and
   learning-rate counters) takes effect only when ``found_inf`` is false. A step whose
   gradients overflowed changes nothing but the loss-scaling variables.

fluid 1.8 zeroed the gradients and ran the updates anyway (Adam's moments decayed and its beta
powers advanced on a skipped step); fluidlite leaves them bit-identical. With
``use_dynamic_loss_scaling=False`` the scale is fixed and an overflowing step is still skipped.
``minimize`` returns ``(optimize_ops, scaled_params_grads)`` as fluid: the gradients of the
scaled loss.
"""
from __future__ import annotations

import math
import numbers
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

from ...amp.guard import skip_state_updates
from ...core import mode as _mode, names, rewrite
from ...core.dtypes import VarType
from ...core.ir import (Operator, OpRole, Parameter, Program, Variable,
                         default_main_program, default_startup_program, program_guard)
from .fp16_lists import AutoMixedPrecisionLists
from .fp16_utils import rewrite_program

__all__ = ["decorate", "OptimizerWithMixedPrecision"]

Pairs = List[Tuple[Parameter, Optional[Variable]]]


def _int_at_least_1(arg: str, value: Any) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral) \
            or value < 1:
        raise ValueError(f"decorate: {arg} must be an integer >= 1, but received {value!r}")
    return int(value)


def _float(arg: str, value: Any, ok: Any, expected: str) -> float:
    good = not isinstance(value, (bool, np.bool_)) and isinstance(value, numbers.Real)
    v = float(value) if good else math.nan
    if not (good and math.isfinite(v) and ok(v)):
        raise ValueError(f"decorate: {arg} must be {expected}, but received {value!r}")
    return v


class OptimizerWithMixedPrecision:
    """The optimizer ``decorate`` returns (module docstring). Create it with ``decorate``."""

    def __init__(self, optimizer: Any, amp_lists: AutoMixedPrecisionLists,
                 init_loss_scaling: float, use_dynamic_loss_scaling: bool,
                 incr_every_n_steps: int, decr_every_n_nan_or_inf: int, incr_ratio: float,
                 decr_ratio: float) -> None:
        self._optimizer = optimizer
        self._amp_lists = amp_lists
        self._init_loss_scaling = init_loss_scaling
        self._use_dynamic_loss_scaling = bool(use_dynamic_loss_scaling)
        self._incr_every_n_steps = incr_every_n_steps
        self._decr_every_n_nan_or_inf = decr_every_n_nan_or_inf
        self._incr_ratio = incr_ratio
        self._decr_ratio = decr_ratio
        self._train_program: Optional[Program] = None
        self._scaled_loss: Optional[Variable] = None
        self._found_inf: Optional[Variable] = None
        self._params_grads: Optional[Pairs] = None
        self._num_good_steps: Optional[Variable] = None
        self._num_bad_steps: Optional[Variable] = None
        # created now, in the default programs, as fluid does (get_loss_scaling() works
        # right after decorate)
        self._loss_scaling = self._global("loss_scaling", init_loss_scaling, VarType.FP32)
        if self._use_dynamic_loss_scaling:
            self._num_good_steps = self._global("num_good_steps", 0, VarType.INT32)
            self._num_bad_steps = self._global("num_bad_steps", 0, VarType.INT32)

    @staticmethod
    def _global(name: str, value: float, dtype: Any) -> Variable:
        return rewrite.global_var(default_main_program(), default_startup_program(),
                                  names.generate(name), [1], value, dtype)

    # -- fluid 1.8's accessors -------------------------------------------------------------
    def get_loss_scaling(self) -> Variable:
        """The persistable [1] loss-scaling variable (fetch it to watch the scale)."""
        return self._loss_scaling

    def get_scaled_loss(self) -> Optional[Variable]:
        """``loss * loss_scaling`` (after ``backward`` / ``minimize``)."""
        return self._scaled_loss

    # -- the pass ----------------------------------------------------------------------------
    def backward(self, loss: Variable, startup_program: Optional[Program] = None,
                 parameter_list: Optional[Sequence[Any]] = None, no_grad_set: Any = None,
                 callbacks: Any = None) -> Pairs:
        """Float16 rewrite, loss scaling and the inner optimizer's backward from the scaled
        loss; returns the ``(param, grad of the scaled loss)`` pairs."""
        if not isinstance(loss, Variable):
            raise TypeError(f"The loss should be an Variable, but received "
                            f"{type(loss).__name__}")
        program = loss.block.program
        if self._loss_scaling.block.program is not program:
            raise ValueError(
                f"decorate() created its loss-scaling variable {self._loss_scaling.name} in "
                f"another Program than the loss {loss.name}'s; call decorate() inside the "
                f"same program_guard as the network")
        self._train_program = program
        rewrite_program(program, self._amp_lists)
        block = loss.block
        with rewrite.role(program, OpRole.Forward):
            scaling = self._loss_scaling
            if loss.dtype != scaling.dtype:         # e.g. a float64 model: scale in its type
                scaling = rewrite.op(block, "cast", X=scaling, dtype=loss.dtype,
                                     attrs={"in_dtype": scaling.dtype, "out_dtype": loss.dtype})
            self._scaled_loss = rewrite.op(block, "elementwise_mul", X=loss, Y=scaling)
        self._params_grads = self._optimizer.backward(
            self._scaled_loss, startup_program, parameter_list, no_grad_set, callbacks)
        return self._params_grads

    def apply_gradients(self, params_grads: Pairs) -> List[Operator]:
        """Unscale (``check_finite_and_unscale``), update the scale (``update_loss_scaling``),
        apply the inner optimizer and make its state writes conditional on no overflow."""
        return self._apply_gradients(params_grads, getattr(self._optimizer, "_grad_clip", None))

    def _inner_apply(self, pairs: Pairs, grad_clip: Any) -> List[Operator]:
        inner = self._optimizer
        if hasattr(inner, "_apply_gradients"):      # fluidlite's Optimizer: clip passed in
            return inner._apply_gradients(pairs, grad_clip)
        return inner.apply_gradients(pairs)

    def _apply_gradients(self, params_grads: Pairs, grad_clip: Any) -> List[Operator]:
        program = default_main_program()
        block = program.global_block()
        pairs = [(p, g) for p, g in params_grads if g is not None]
        grads = [g for _, g in pairs]
        if not grads:
            return self._inner_apply(list(params_grads), grad_clip)
        with rewrite.role(program, OpRole.Optimize, [v for pg in pairs for v in pg],
                          name_scope="find_infinite_scale"):
            unscaled = [rewrite.tmp(block, "check_finite_and_unscale", g.dtype, g.shape)
                        for g in grads]
            found = rewrite.tmp(block, "find_infinite_scale", VarType.BOOL, [1])
            rewrite.append(block, "check_finite_and_unscale",
                           {"X": grads, "Scale": self._loss_scaling},
                           {"Out": unscaled, "FoundInfinite": found})
        exclude = [self._loss_scaling.name]
        if self._use_dynamic_loss_scaling:
            assert self._num_good_steps is not None and self._num_bad_steps is not None
            with rewrite.role(program, OpRole.Optimize, name_scope="update_loss_scaling"):
                rewrite.append(
                    block, "update_loss_scaling",
                    {"X": unscaled, "FoundInfinite": found,
                     "PrevLossScaling": self._loss_scaling,
                     "InGoodSteps": self._num_good_steps, "InBadSteps": self._num_bad_steps},
                    {"Out": unscaled, "LossScaling": self._loss_scaling,
                     "OutGoodSteps": self._num_good_steps, "OutBadSteps": self._num_bad_steps},
                    {"incr_every_n_steps": self._incr_every_n_steps,
                     "decr_every_n_nan_or_inf": self._decr_every_n_nan_or_inf,
                     "incr_ratio": self._incr_ratio, "decr_ratio": self._decr_ratio})
            exclude += [self._num_good_steps.name, self._num_bad_steps.name]
        self._found_inf = found
        new_pairs = dict(zip([p.name for p, _ in pairs], unscaled))
        unscaled_pairs = [(p, new_pairs.get(p.name, g)) for p, g in params_grads]
        start = len(block.ops)
        optimize_ops = self._inner_apply(unscaled_pairs, grad_clip)
        skip_state_updates(block, found, start, exclude=exclude)
        return optimize_ops

    def apply_optimize(self, loss: Variable, startup_program: Optional[Program],
                       params_grads: Pairs) -> List[Operator]:
        with program_guard(loss.block.program, startup_program):
            return self.apply_gradients(params_grads)

    def _apply_optimize(self, loss: Variable, startup_program: Optional[Program],
                        params_grads: Pairs, grad_clip: Any = None) -> List[Operator]:
        """What fleet's ``minimize`` calls after its all-reduce pass: this optimizer's
        ``apply_gradients`` (never the inner one's: the gradients are still scaled)."""
        with program_guard(loss.block.program, startup_program):
            return self._apply_gradients(params_grads, grad_clip)

    def minimize(self, loss: Variable, startup_program: Optional[Program] = None,
                 parameter_list: Optional[Sequence[Any]] = None, no_grad_set: Any = None
                 ) -> Tuple[List[Operator], Pairs]:
        """The whole pass (module docstring), one transaction; returns
        ``(optimize_ops, scaled_params_grads)``."""
        if _mode.tracer is not None:
            raise RuntimeError(
                "fluid.contrib.mixed_precision.decorate works on static programs; in dygraph "
                "mode scale the loss yourself with fluidlite.amp.StaticLossScaler / "
                "DynamicLossScaler (scale, unscale, all_finite, adjust)")
        if not isinstance(loss, Variable):
            raise TypeError(f"The loss should be an Variable, but received "
                            f"{type(loss).__name__}")
        startup = startup_program if startup_program is not None else default_startup_program()
        with rewrite.transaction(loss.block.program, startup):
            with program_guard(loss.block.program, startup_program):
                scaled_params_grads = self.backward(loss, startup_program, parameter_list,
                                                    no_grad_set)
                optimize_ops = self.apply_gradients(scaled_params_grads)
        return optimize_ops, scaled_params_grads

    def __getattr__(self, name: str) -> Any:
        # everything else (learning rate, state_dict, ...) is the inner optimizer's
        if name.startswith("__") or name == "_optimizer":
            raise AttributeError(name)
        return getattr(self._optimizer, name)


def decorate(optimizer: Any, amp_lists: Optional[AutoMixedPrecisionLists] = None,
             init_loss_scaling: float = 1.0, incr_every_n_steps: int = 1000,
             decr_every_n_nan_or_inf: int = 2, incr_ratio: float = 2.0,
             decr_ratio: float = 0.8, use_dynamic_loss_scaling: bool = True
             ) -> OptimizerWithMixedPrecision:
    """Wrap ``optimizer`` for mixed-precision training with loss scaling (fluid 1.8).

    ``amp_lists``: an ``AutoMixedPrecisionLists`` (default lists when None);
    ``init_loss_scaling`` > 0; ``incr_every_n_steps`` / ``decr_every_n_nan_or_inf``: integers
    >= 1; ``incr_ratio`` > 1; ``decr_ratio`` in (0, 1). The loss-scaling variables are created
    now in the default main/startup programs: call it inside the network's ``program_guard``.

    Args:
        optimizer (Optimizer): the optimizer to wrap.
        amp_lists (AutoMixedPrecisionLists | None): the op lists (default lists when None).
        init_loss_scaling (float, default 1.0): the initial loss scale (> 0).
        incr_every_n_steps (int, default 1000): grow the scale after this many finite steps in a
            row (>= 1).
        decr_every_n_nan_or_inf (int, default 2): shrink the scale after this many steps with
            NaN/Inf gradients (>= 1).
        incr_ratio (float, default 2.0): the growth factor (> 1).
        decr_ratio (float, default 0.8): the shrink factor, in (0, 1).
        use_dynamic_loss_scaling (bool, default True): adjust the scale as above (else it stays
            ``init_loss_scaling``).
    Returns:
        OptimizerWithMixedPrecision: the wrapped optimizer; its ``minimize(loss)`` rewrites the
        program to float16 per ``amp_lists`` and returns ``(optimize_ops, scaled_params_grads)``;
        ``get_loss_scaling()`` gives the scale Variable.
    Raises:
        TypeError: ``optimizer`` is not a fluid optimizer or ``amp_lists`` is not an
            ``AutoMixedPrecisionLists``.
        ValueError: a number is out of its range (see Args).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     loss = fluid.layers.mean(fluid.layers.fc(fluid.data("x", [-1, 2]), size=1))
        ...     opt = fluid.contrib.mixed_precision.decorate(fluid.optimizer.SGD(0.1),
        ...                                                   init_loss_scaling=128.0)
        ...     _ = opt.minimize(loss)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> _ = exe.run(main, feed={"x": np.ones((2, 2), "float32")}, fetch_list=[loss])
        >>> float(np.array(fluid.global_scope().find_var(opt.get_loss_scaling().name).get_tensor())[0])
        128.0
    """
    if optimizer is None or not hasattr(optimizer, "apply_gradients") or \
            not hasattr(optimizer, "backward"):
        raise TypeError(f"decorate: optimizer must be a fluid optimizer (e.g. "
                        f"fluid.optimizer.SGD(0.01)), but received {optimizer!r}")
    if amp_lists is None:
        amp_lists = AutoMixedPrecisionLists()
    elif not isinstance(amp_lists, AutoMixedPrecisionLists):
        raise TypeError(f"decorate: amp_lists must be an AutoMixedPrecisionLists, but received "
                        f"{type(amp_lists).__name__}")
    init = _float("init_loss_scaling", init_loss_scaling, lambda v: v > 0, "a number > 0")
    incr_n = _int_at_least_1("incr_every_n_steps", incr_every_n_steps)
    decr_n = _int_at_least_1("decr_every_n_nan_or_inf", decr_every_n_nan_or_inf)
    incr = _float("incr_ratio", incr_ratio, lambda v: v > 1, "a number > 1")
    decr = _float("decr_ratio", decr_ratio, lambda v: 0 < v < 1, "a number in (0, 1)")
    return OptimizerWithMixedPrecision(optimizer, amp_lists, init, use_dynamic_loss_scaling,
                                       incr_n, decr_n, incr, decr)
