"""fluid 1.8's remaining optimizers: ``DpsgdOptimizer`` (``Dpsgd``), ``DGCMomentumOptimizer``
and ``PipelineOptimizer``, re-exported by ``fluidlite.optimizer``.

* ``DpsgdOptimizer``: one ``dpsgd`` op per parameter (norm clipping + Gaussian noise, see
  ``ops/optim_extra.py``); like fluid 1.8 it takes no regularization or grad_clip.
* ``DGCMomentumOptimizer``: deep gradient compression on one process -- momentum before
  ``rampup_begin_step``, then momentum correction, top-k sparsification with local residual
  accumulation and SGD on what was "sent" (the ``dgc`` / ``dgc_momentum`` ops). Only float32
  parameters of at least 16384 elements are compressed (fluid's rule); the others use the
  ``momentum`` op. fluid 1.8 required a CUDA build and several trainers; see
  docs/compatibility.md.
* ``PipelineOptimizer``: fluid 1.8 cut the program into per-device sections at
  ``device_guard`` boundaries and ran ``num_microbatches`` micro-batches through them,
  averaging their gradients into one update. On one device the sections are one program: the
  whole batch runs at once and the wrapped optimizer updates once, which is the same update for
  a loss that averages over the batch (micro-batches of equal size, no batch statistics).
"""
from __future__ import annotations

import math
import numbers
from typing import Any, List, Optional, Sequence, Tuple, Union

from ..clip import GradientClipBase, GradientClipByNorm, append_gradient_clip_ops
from ..core import mode as _mode, rewrite
from ..core.ir import (Block, Operator, OpRole, Parameter, Program, Variable,
                      default_main_program, default_startup_program)
from ..core.dtypes import VarType
from .optimizers import MomentumOptimizer
from .base import Acc, Optimizer, Pairs, _check_not_updated, _check_set, _hyper, _positive
from ..regularizer import append_regularization_ops

__all__ = ["DpsgdOptimizer", "Dpsgd", "DGCMomentumOptimizer", "PipelineOptimizer"]

DGC_MIN_NUMEL = 16384                     # fluid 1.8: smaller parameters are not compressed
DGC_COUNTER_NAME = "__g_dgc_counter__"    # fluid 1.8's core.dgc.kDGCCounterName()


class DpsgdOptimizer(Optimizer):
    """Differentially private SGD: per parameter, ``g' = g / max(1, ||g|| / clip)``;
    ``param -= lr * (g' + N(0, sigma^2) / batch_size)`` (noise per element, from the plan's
    seeded generator: ``program.random_seed`` makes runs reproducible).

    Args:
        learning_rate (float | Variable, default 0.001): the step size ``lr``.
        clip (float, default 0.9): the gradient-norm bound ``clip`` (> 0).
        batch_size (float, default 0.999): the noise divisor ``batch_size`` (> 0).
        sigma (float, default 1e-8): the standard deviation of the Gaussian noise (>= 0).
        parameter_list (list | None): the parameters to update (required in dygraph mode).
    Returns:
        DpsgdOptimizer: the optimizer; ``minimize(loss)`` appends one ``dpsgd`` op per
        parameter and returns ``(optimize_ops, params_grads)``.
    Raises:
        TypeError: ``learning_rate`` is not a float or Variable.
        ValueError: an argument is None, ``clip`` or ``batch_size`` is not positive, ``sigma``
            or ``learning_rate`` is negative (or any is not finite).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup), fluid.unique_name.guard():
        ...     x = fluid.data("x", [-1, 2])
        ...     pred = fluid.layers.fc(x, size=1, param_attr=fluid.ParamAttr(
        ...         name="w", initializer=fluid.initializer.Constant(1.0)), bias_attr=False)
        ...     loss = fluid.layers.mean(pred)
        ...     _ = fluid.optimizer.Dpsgd(learning_rate=0.01, clip=10.0, batch_size=16.0, sigma=1.0).minimize(loss)
        >>> main.random_seed = 1
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> exe.run(main, feed={"x": np.ones((2, 2), "float32")}, fetch_list=[loss])[0]
        array([2.], dtype=float32)
    """
    type = "dpsgd"

    def __init__(self, learning_rate: Union[float, Variable] = 0.001, clip: float = 0.9,
                 batch_size: float = 0.999, sigma: float = 1e-8,
                 parameter_list: Optional[Sequence[Any]] = None) -> None:
        _check_set(learning_rate=learning_rate, clip=clip, batch_size=batch_size, sigma=sigma)
        super().__init__(learning_rate, parameter_list)
        self._clip = _positive("Dpsgd", "clip", clip)
        self._batch_size = _positive("Dpsgd", "batch_size", batch_size)
        self._sigma = _hyper("Dpsgd", "sigma", sigma, 0.0)
        self._attrs = {"clip": self._clip, "batch_size": self._batch_size,
                       "sigma": self._sigma, "seed": 0}

    def minimize(self, loss: Variable, startup_program: Optional[Program] = None,
                 parameter_list: Optional[Sequence[Any]] = None, no_grad_set: Any = None,
                 grad_clip: Optional[GradientClipBase] = None) -> Tuple[List[Operator], Pairs]:
        """Static mode: the base pass (one ``dpsgd`` op per parameter). Dygraph: update the
        parameters now from the gradients of ``loss.backward()``, drawing the noise from the
        dygraph generator (``fluid.dygraph.guard`` / ``program.random_seed`` seed it)."""
        if _mode.tracer is None:
            return super().minimize(loss, startup_program, parameter_list, no_grad_set,
                                    grad_clip)
        return _mode.implementation("optimizer.dpsgd_minimize")(self, parameter_list,
                                                                no_grad_set)


Dpsgd = DpsgdOptimizer


class DGCMomentumOptimizer(MomentumOptimizer):
    """Momentum with deep gradient compression (see the module docstring and the ``dgc`` op).

    ``rampup_begin_step``: the step (counted from 0 by the persistable ``__g_dgc_counter__``)
    where compression starts; ``sparsity``: the sparsity of each of the equal periods of
    ``rampup_step`` steps, the last one afterwards. ``local_grad_clip_norm`` or a
    ``GradientClipByNorm`` ``grad_clip`` (the only clip DGC takes: TypeError otherwise) clips
    each compressed gradient to ``clip_norm / sqrt(num_trainers)`` once compression started;
    both need ``num_trainers``. As in fluid 1.8, ``grad_clip`` also clips every gradient DGC
    does not compress (to ``clip_norm``, from the first step); without it those take the
    legacy per-parameter clips (``set_gradient_clip``).

    Args:
        learning_rate (float | Variable): the step size.
        momentum (float): the velocity's decay ``mu`` (>= 0).
        rampup_begin_step (int): the step where compression starts (>= 0).
        rampup_step (int, default 1): the number of steps over which ``sparsity`` ramps up (>= 1).
        sparsity (list of float, default (0.999,)): the sparsity of each rampup period, each in
            [0, 1); the last one is used after the rampup.
        parameter_list (list | None): the parameters to update.
        use_nesterov (bool, default False): Nesterov's momentum update.
        local_grad_clip_norm (float | None): clip each compressed gradient to this norm divided by
            ``sqrt(num_trainers)``; needs ``num_trainers``.
        num_trainers (int | None): the number of trainers (> 0) used by the local clip.
        regularization (WeightDecayRegularizer | None): weight decay for every parameter without
            its own.
        grad_clip (GradientClipByNorm | None): fluid 1.8's spelling of
            ``local_grad_clip_norm`` (its ``clip_norm``), which also clips the uncompressed
            gradients; no other clip is accepted.
        name (str | None): name prefix of the optimizer's variables.
    Returns:
        DGCMomentumOptimizer: the optimizer; ``minimize(loss)`` appends the ``dgc`` /
        ``dgc_momentum`` (or ``momentum``) ops and returns ``(optimize_ops, params_grads)``.
    Raises:
        RuntimeError: called in dygraph mode.
        TypeError: ``grad_clip`` is not a ``GradientClipByNorm``, ``sparsity`` is not a non-empty
            list/tuple, ``num_trainers`` is not an int while a clip norm is given, or
            ``learning_rate`` / ``regularization`` has the wrong type.
        ValueError: ``momentum`` or ``rampup_begin_step`` is None, ``rampup_begin_step`` /
            ``rampup_step`` is not an int >= 0 / >= 1, a sparsity is outside [0, 1),
            ``num_trainers`` <= 0 or the clip norm is not positive.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup), fluid.unique_name.guard():
        ...     x = fluid.data("x", [-1, 2])
        ...     pred = fluid.layers.fc(x, size=1, param_attr=fluid.ParamAttr(
        ...         name="w", initializer=fluid.initializer.Constant(1.0)), bias_attr=False)
        ...     loss = fluid.layers.mean(pred)
        ...     opt = fluid.optimizer.DGCMomentumOptimizer(learning_rate=0.1, momentum=0.9,
        ...                                                rampup_begin_step=0)
        ...     _ = opt.minimize(loss)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> for step in range(2):
        ...     print(exe.run(main, feed={"x": np.ones((2, 2), "float32")}, fetch_list=[loss])[0])
        [2.]
        [1.8]
    """

    _accs = MomentumOptimizer._accs + (Acc("_dgc_u_", "U", "U_out"),
                                       Acc("_dgc_v_", "V", "V_out"))

    def __init__(self, learning_rate: Union[float, Variable], momentum: float,
                 rampup_begin_step: int, rampup_step: int = 1,
                 sparsity: Sequence[float] = (0.999,),
                 parameter_list: Optional[Sequence[Any]] = None, use_nesterov: bool = False,
                 local_grad_clip_norm: Optional[float] = None,
                 num_trainers: Optional[int] = None, regularization: Any = None,
                 grad_clip: Optional[GradientClipBase] = None,
                 name: Optional[str] = None) -> None:
        if _mode.tracer is not None:
            raise RuntimeError("In dygraph, don't support DGCMomentumOptimizer.")
        _check_set(momentum=momentum, rampup_begin_step=rampup_begin_step)
        if grad_clip is not None and not isinstance(grad_clip, GradientClipByNorm):
            raise TypeError("The type of grad_clip should be 'GradientClipByNorm', because "
                            "DGCMomentumOptimizer only support GradientClipByNorm, but "
                            f"received {type(grad_clip).__name__}")
        # the clip is also the optimizer's own: fluid 1.8 clips the gradients DGC does not
        # compress with it (``self._grad_clip(not_dgc_params_grads)``)
        super().__init__(learning_rate, momentum, parameter_list, use_nesterov, regularization,
                         grad_clip, name)
        self._rampup_begin_step = _int_arg("rampup_begin_step", rampup_begin_step, 0)
        self._rampup_step = _int_arg("rampup_step", rampup_step, 1)
        if isinstance(sparsity, (int, float)) or not isinstance(sparsity, (list, tuple)) or \
                not sparsity:
            raise TypeError(f"DGCMomentumOptimizer: sparsity must be a non-empty list of "
                            f"floats in [0, 1), but received {sparsity!r}")
        self._sparsity = [_hyper("DGCMomentum", "sparsity", s, 0.0, 1.0, high_open=True)
                          for s in sparsity]
        self._clip_norm: Optional[float] = None
        norm = grad_clip.clip_norm if grad_clip is not None else local_grad_clip_norm
        if norm is not None:
            if isinstance(num_trainers, bool) or not isinstance(num_trainers, int):
                raise TypeError(f"The type of num_trainers should be 'int', but received "
                                f"{type(num_trainers).__name__}")
            if num_trainers <= 0:
                raise ValueError(f"The value of num_trainers should be greater than 0, but "
                                 f"received {num_trainers}")
            self._clip_norm = _positive("DGCMomentum", "clip norm", norm) / math.sqrt(
                num_trainers)
        self._num_trainers = num_trainers
        self._local_grad_clip_norm = local_grad_clip_norm
        self._global_step_var: Optional[Variable] = None

    @staticmethod
    def _is_use_dgc(param: Parameter, grad: Optional[Variable]) -> bool:
        """fluid 1.8's rule: dense float32 parameters of at least 16384 elements."""
        numel = abs(math.prod(int(d) for d in param.shape))
        return grad is not None and numel >= DGC_MIN_NUMEL and param.dtype == VarType.FP32

    def _counter(self) -> Variable:
        if self._global_step_var is None:
            self._global_step_var = rewrite.step_counter(
                default_main_program(), default_startup_program(), DGC_COUNTER_NAME, begin=0)
        return self._global_step_var

    def _apply_gradients(self, params_grads: Pairs,
                         grad_clip: Optional[GradientClipBase]) -> List[Operator]:
        """fluid 1.8's ``apply_gradients``: sort; the gradients DGC does not compress are
        clipped as by any optimizer (``grad_clip``, else the legacy per-parameter clips), the
        compressed ones locally (``dgc_clip_by_norm``, only after rampup_begin_step);
        regularize every gradient; then the update ops."""
        params_grads = sorted(params_grads, key=lambda pg: pg[0].name)
        _check_not_updated(default_main_program(), params_grads)
        plain = [(p, g) for p, g in params_grads if not self._is_use_dgc(p, g)]
        plain = grad_clip(plain) if grad_clip is not None else append_gradient_clip_ops(plain)
        compressed = []
        for p, g in params_grads:
            if not self._is_use_dgc(p, g):
                continue
            if self._clip_norm is not None:
                block = g.block
                with rewrite.role(block.program, OpRole.Backward, [p, g], name_scope="dgc_clip"):
                    g = rewrite.op(block, "dgc_clip_by_norm", X=g, current_step=self._counter(),
                                   attrs={"max_norm": self._clip_norm,
                                          "rampup_begin_step": float(self._rampup_begin_step)})
            compressed.append((p, g))
        params_grads = sorted(plain + compressed, key=lambda pg: pg[0].name)
        params_grads = append_regularization_ops(params_grads, self.regularization)
        return self._create_optimization_pass(params_grads)

    def _create_accumulators(self, block: Block, parameters: List[Parameter]) -> None:
        for p in parameters:
            self._add_accumulator("velocity", p)
            if self._is_use_dgc(p, p):
                self._add_accumulator("_dgc_u_", p)
                self._add_accumulator("_dgc_v_", p)

    def _append_optimize_op(self, block: Block, param_and_grad: Tuple[Parameter, Variable]
                            ) -> Operator:
        p, g = param_and_grad
        lr = self._create_param_lr(param_and_grad)
        velocity = self._get_accumulator("velocity", p)
        if not self._is_use_dgc(p, g):
            return rewrite.append(block, "momentum",
                                  {"Param": p, "Grad": g, "Velocity": velocity,
                                   "LearningRate": lr},
                                  {"ParamOut": p, "VelocityOut": velocity}, self._attrs)
        step = self._counter()
        u, v = self._get_accumulator("_dgc_u_", p), self._get_accumulator("_dgc_v_", p)
        sent = rewrite.tmp(block, "dgc", g.dtype, g.shape)
        encoded = rewrite.tmp(block, "dgc_encoded", g.dtype, [-1])
        k = rewrite.tmp(block, "dgc_k", VarType.INT32, [1])
        rewrite.append(block, "dgc", {"U": u, "V": v, "Grad": g, "current_step": step},
                       {"U_out": u, "V_out": v, "EncodeGrad": encoded, "Grad_out": sent,
                        "k": k},
                       {"m": self._attrs["mu"], "use_nesterov": self._attrs["use_nesterov"],
                        "sparsity": list(self._sparsity),
                        "rampup_begin_step": float(self._rampup_begin_step),
                        "rampup_step": float(self._rampup_step)})
        return rewrite.append(block, "dgc_momentum",
                              {"Param": p, "Grad": sent, "Velocity": velocity,
                               "LearningRate": lr, "current_step": step},
                              {"ParamOut": p, "VelocityOut": velocity, "Grad_out": sent},
                              dict(self._attrs,
                                   rampup_begin_step=float(self._rampup_begin_step)))


def _int_arg(arg: str, value: Any, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
        raise ValueError(f"DGCMomentumOptimizer: {arg} must be an int >= {low}, but received "
                         f"{value!r}")
    return int(value)


class PipelineOptimizer:
    """``PipelineOptimizer(optimizer, num_microbatches=1, start_cpu_core_id=0)`` on one
    device (see the module docstring): ``minimize`` is the wrapped optimizer's; the
    ``device_guard`` sections stay in one program and run in order.

    Args:
        optimizer (Optimizer): the optimizer whose ``minimize`` does the update.
        num_microbatches (int, default 1): fluid's number of micro-batches (>= 1); recorded in
            ``program._pipeline_opt``, the whole batch runs at once on one device.
        start_cpu_core_id (int, default 0): fluid's first CPU core to bind (>= 0); recorded only.
    Returns:
        PipelineOptimizer: the wrapper; ``minimize(loss)`` returns the wrapped optimizer's
        ``(optimize_ops, params_grads)``.
    Raises:
        RuntimeError: called in dygraph mode.
        ValueError: ``optimizer`` is not an ``Optimizer``, ``num_microbatches`` is not an int
            >= 1 or ``start_cpu_core_id`` is not an int >= 0.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup), fluid.unique_name.guard():
        ...     x = fluid.data("x", [-1, 2])
        ...     pred = fluid.layers.fc(x, size=1, param_attr=fluid.ParamAttr(
        ...         name="w", initializer=fluid.initializer.Constant(1.0)), bias_attr=False)
        ...     loss = fluid.layers.mean(pred)
        ...     opt = fluid.optimizer.PipelineOptimizer(fluid.optimizer.SGD(0.1), num_microbatches=1)
        ...     _ = opt.minimize(loss)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> exe.run(main, feed={"x": np.ones((2, 2), "float32")}, fetch_list=[loss])[0]
        array([2.], dtype=float32)
    """

    def __init__(self, optimizer: Optimizer, num_microbatches: int = 1,
                 start_cpu_core_id: int = 0) -> None:
        if _mode.tracer is not None:
            raise RuntimeError("In dygraph, don't support PipelineOptimizer.")
        if not isinstance(optimizer, Optimizer):
            raise ValueError(f"The 'optimizer' parameter for PipelineOptimizer must be an "
                             f"instance of Optimizer, but the given type is "
                             f"{type(optimizer)}.")
        if isinstance(num_microbatches, bool) or not isinstance(num_microbatches, int) or \
                num_microbatches < 1:
            raise ValueError(f"num_microbatches must be a positive value, but received "
                             f"{num_microbatches!r}")
        if isinstance(start_cpu_core_id, bool) or not isinstance(start_cpu_core_id, int) or \
                start_cpu_core_id < 0:
            raise ValueError(f"start_cpu_core_id must be greater than or equal to 0, but "
                             f"received {start_cpu_core_id!r}")
        self._optimizer = optimizer
        self._num_microbatches = num_microbatches
        self._start_cpu_core_id = start_cpu_core_id

    def minimize(self, loss: Variable, startup_program: Optional[Program] = None,
                 parameter_list: Optional[Sequence[Any]] = None,
                 no_grad_set: Any = None) -> Tuple[List[Operator], Pairs]:
        """The wrapped optimizer's ``minimize``; the program records the pipeline settings
        (``program._pipeline_opt``, as fluid) for tools that read them."""
        result = self._optimizer.minimize(loss, startup_program, parameter_list, no_grad_set)
        loss.block.program._pipeline_opt = {
            "num_microbatches": self._num_microbatches,
            "start_cpu_core_id": self._start_cpu_core_id, "section_program": None}
        return result

    def __getattr__(self, name: str) -> Any:       # e.g. _learning_rate, _global_learning_rate
        if name.startswith("__") or name == "_optimizer":
            raise AttributeError(name)
        return getattr(self._optimizer, name)
