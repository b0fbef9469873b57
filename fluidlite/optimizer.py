"""Optimizers (``fluid.optimizer``), fluid 1.8 semantics.

``minimize(loss)`` = ``backward`` (append_backward with ``error_clip_callback``) then
``apply_gradients``, which, in this order:

1. sorts the ``(param, grad)`` pairs by parameter name;
2. clips them: the optimizer's ``grad_clip`` (wins), else ``minimize(..., grad_clip=)``, else
   the legacy per-parameter clips (``set_gradient_clip`` / ``ParamAttr(gradient_clip=)``);
3. adds weight decay (``append_regularization_ops``), so the decay is never clipped;
4. creates the accumulators (persistable, zero-initialised in the startup program, named
   ``<param>_<acc>_N`` as fluid) and the global learning rate (``learning_rate_N``), then
   appends one update op per trainable parameter in ``name_scope('optimizer')`` with op_role
   Optimize; a parameter with ``ParamAttr(learning_rate=r)``, r != 1, gets a ``scale`` op
   (op_role LRSched|Optimize) computing its learning rate.

``minimize`` returns ``(optimize_ops, params_grads)`` where ``params_grads`` are the raw
``(param, X@GRAD)`` pairs of the backward pass.
"""
from __future__ import annotations

import contextlib
import logging
from collections import defaultdict
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Set, Tuple, Union

import numpy as np

from .backward import append_backward
from .clip import GradientClipBase, append_gradient_clip_ops, append_tmp_op, error_clip_callback
from .core import names
from .core.dtypes import VarType
from .core.ir import (Block, Operator, Parameter, Program, Variable, default_main_program,
                      default_startup_program, program_guard)
from .core.names import name_scope
from .initializer import Constant
from .layer_helper import LayerHelper
from .regularizer import append_regularization_ops, check_regularizer

__all__ = ["SGD", "Momentum", "Adagrad", "Adam", "Adamax", "DecayedAdagrad", "Adadelta",
           "RMSProp", "Ftrl", "Lamb", "LarsMomentum", "SGDOptimizer", "MomentumOptimizer",
           "AdagradOptimizer", "AdamOptimizer", "AdamaxOptimizer", "DecayedAdagradOptimizer",
           "AdadeltaOptimizer", "RMSPropOptimizer", "FtrlOptimizer", "LambOptimizer",
           "LarsMomentumOptimizer", "ModelAverage", "ExponentialMovingAverage",
           "LookaheadOptimizer", "RecomputeOptimizer", "Optimizer"]

_log = logging.getLogger("fluidlite")
Pairs = List[Tuple[Parameter, Optional[Variable]]]


def _create_global_var(name: str, shape: Sequence[int], value: float, dtype: Any,
                       persistable: bool = True) -> Variable:
    """A global variable of the default main program, initialised to ``value`` in the default
    startup program (fluid's ``layers.create_global_var``)."""
    helper = LayerHelper("global_var")
    var = helper.create_global_variable(name=name, shape=list(shape), dtype=dtype,
                                        persistable=persistable, stop_gradient=True)
    helper.set_variable_initializer(var, Constant(value=float(value), force_cpu=True))
    return var


def _check_clip(grad_clip: Any, where: str) -> Optional[GradientClipBase]:
    if grad_clip is not None and not isinstance(grad_clip, GradientClipBase):
        raise TypeError(f"'grad_clip' should be an instance of GradientClipBase's derived class "
                        f"(fluid.clip.GradientClipByValue / ByNorm / ByGlobalNorm), but {where} "
                        f"received {grad_clip!r}")
    return grad_clip


class Optimizer:
    """Base class. ``learning_rate``: a float or a [1] Variable (e.g. a schedule from
    ``fluid.layers``); an int raises TypeError as in fluid."""

    def __init__(self, learning_rate: Union[float, Variable],
                 parameter_list: Optional[Sequence[Any]] = None, regularization: Any = None,
                 grad_clip: Optional[GradientClipBase] = None,
                 name: Optional[str] = None) -> None:
        if isinstance(learning_rate, np.floating):
            learning_rate = float(learning_rate)
        if not isinstance(learning_rate, (float, Variable)):
            raise TypeError(f"learning rate should be float or Variable, got "
                            f"{type(learning_rate)} here (write e.g. 1.0 instead of 1)")
        self._learning_rate = learning_rate
        self._parameter_list = list(parameter_list) if parameter_list is not None else None
        self.regularization = check_regularizer(regularization, "regularization")
        self._grad_clip = _check_clip(grad_clip, f"{type(self).__name__}()")
        self._name = name
        self._dtype: Any = None
        self._learning_rate_map: Dict[Program, Variable] = {}
        if isinstance(learning_rate, Variable):
            self._learning_rate_map[learning_rate.block.program] = learning_rate
        self._accumulators: Dict[str, Dict[str, Variable]] = defaultdict(dict)
        self._opti_name_list: List[str] = []
        self.helper: Optional[LayerHelper] = None
        self._minimize_clip: Optional[GradientClipBase] = None

    # -- learning rate ----------------------------------------------------------------------
    def _create_global_learning_rate(self) -> None:
        if isinstance(self._global_learning_rate(), Variable):
            return
        if not isinstance(self._learning_rate, float):
            raise TypeError("learning rate variable is create outside optimizer,can not create "
                            "new learning rate variable for new program (the learning_rate "
                            "Variable belongs to another Program; build the schedule in the "
                            "program being optimized)")
        self._learning_rate_map[default_main_program()] = _create_global_var(
            name=names.generate("learning_rate"), shape=[1], value=self._learning_rate,
            dtype="float32" if self._dtype is None else self._dtype)

    def _global_learning_rate(self, program: Optional[Program] = None) -> Optional[Variable]:
        return self._learning_rate_map.get(program if program is not None
                                           else default_main_program())

    def _create_param_lr(self, param_and_grad: Tuple[Parameter, Variable]) -> Variable:
        """The parameter's learning rate: the global one, or global * ParamAttr.learning_rate
        through a ``scale`` op (op_role LRSched|Optimize, name_scope 'scale_with_param_lr')."""
        param = param_and_grad[0]
        param_lr = param.optimize_attr.get("learning_rate", 1.0)
        if isinstance(param_lr, Variable):
            return param_lr
        glr = self._global_learning_rate()
        if param_lr == 1.0:
            return glr
        program = default_main_program()
        with program._lr_schedule_guard(is_with_opt=True), name_scope("scale_with_param_lr"):
            return append_tmp_op(program.global_block(), "scale", {"X": glr},
                                 {"scale": float(param_lr)})

    # -- accumulators -----------------------------------------------------------------------
    def _add_accumulator(self, name: str, param: Parameter, dtype: Any = None,
                         fill_value: float = 0.0, shape: Optional[Sequence[int]] = None,
                         type: Any = None, device: Any = None) -> Variable:
        """Create the persistable ``<param>_<name>_N`` (zero-filled in startup by default)."""
        if self._name is not None:
            name = self._name + "_" + name
        if param.name in self._accumulators[name]:
            raise RuntimeError(f"Accumulator {name} already exists for parameter {param.name}: "
                               f"this optimizer instance already built its update ops for it "
                               f"(minimize called twice?); use a new optimizer instance")
        shape = list(param.shape) if shape is None else list(shape)
        var_name = names.generate(param.name + "_" + name)
        self._opti_name_list.append(var_name)
        assert self.helper is not None
        var = self.helper.create_global_variable(
            name=var_name, persistable=True, dtype=dtype or param.dtype,
            type=param.type if type is None else type, shape=shape, belong_to_optimizer=True)
        self.helper.set_variable_initializer(var, initializer=Constant(value=float(fill_value)))
        self._accumulators[name][param.name] = var
        return var

    def _get_accumulator(self, name: str, param: Parameter) -> Variable:
        if self._name is not None:
            name = self._name + "_" + name
        if param.name not in self._accumulators.get(name, {}):
            raise RuntimeError(f"Accumulator {name} does not exist for parameter {param.name}")
        return self._accumulators[name][param.name]

    def get_opti_var_name_list(self) -> List[str]:
        """Names of every accumulator this optimizer created."""
        return list(self._opti_name_list)

    # -- hooks for subclasses ---------------------------------------------------------------
    def _create_accumulators(self, block: Block, parameters: List[Parameter]) -> None:
        pass

    def _append_optimize_op(self, block: Block, param_and_grad: Tuple[Parameter, Variable]
                            ) -> Operator:
        raise NotImplementedError(f"{type(self).__name__} must define _append_optimize_op")

    def _finish_update(self, block: Block, parameters_and_grads: Pairs) -> None:
        pass

    # -- the pass ---------------------------------------------------------------------------
    def _create_optimization_pass(self, parameters_and_grads: Pairs) -> List[Operator]:
        program = default_main_program()
        target_block = program.global_block()
        start = len(target_block.ops)
        self.helper = LayerHelper(type(self).__name__)
        self._create_accumulators(target_block, [p for p, g in parameters_and_grads
                                                 if g is not None and p.trainable])
        self._create_global_learning_rate()
        for param_and_grad in parameters_and_grads:
            param, grad = param_and_grad
            if grad is None or not param.trainable:
                continue
            with param.block.program._optimized_guard([param, grad]), name_scope("optimizer"):
                self._append_optimize_op(target_block, (param, grad))
        self._finish_update(target_block, parameters_and_grads)
        return list(target_block.ops[start:])

    def backward(self, loss: Variable, startup_program: Optional[Program] = None,
                 parameter_list: Optional[Sequence[Any]] = None, no_grad_set: Any = None,
                 callbacks: Optional[List[Callable]] = None) -> Pairs:
        """append_backward for ``loss`` (non-trainable parameters get no gradient; the error
        clip callback is always included). Returns ``[(param, param@GRAD)]``."""
        if not isinstance(loss, Variable):
            raise TypeError(f"The loss should be an Variable, but received "
                            f"{type(loss).__name__}")
        no_grad = self._get_no_grad_set(loss, no_grad_set)
        self._dtype = loss.dtype
        if callbacks is None:
            callbacks = [error_clip_callback]
        else:
            if not isinstance(callbacks, list):
                raise TypeError(f"callbacks should be a list, but received {type(callbacks)}")
            if error_clip_callback not in callbacks:
                callbacks = list(callbacks) + [error_clip_callback]
        program = loss.block.program
        with program_guard(program, startup_program):
            return append_backward(loss, parameter_list, no_grad, callbacks)

    @staticmethod
    def _get_no_grad_set(loss: Variable, no_grad_set: Any) -> Set[Any]:
        out: Set[Any] = set()
        if no_grad_set is not None:
            if not isinstance(no_grad_set, (set, list, tuple, frozenset)):
                raise TypeError(f"The type of no_grad_set should be set or list or tuple, but "
                                f"received {type(no_grad_set)}")
            out = {v.name if isinstance(v, Variable) else v for v in no_grad_set}
        out.update(p.name for p in loss.block.program.global_block().all_parameters()
                   if not p.trainable)
        return out

    def apply_gradients(self, params_grads: Pairs) -> List[Operator]:
        """Sort, clip, regularize and append the update ops (see the module docstring)."""
        params_grads = sorted(params_grads, key=lambda pg: pg[0].name)
        clip = self._grad_clip if self._grad_clip is not None else self._minimize_clip
        if clip is not None:
            params_grads = clip(params_grads)
        else:
            params_grads = append_gradient_clip_ops(params_grads)
        params_grads = append_regularization_ops(params_grads, self.regularization)
        return self._create_optimization_pass(params_grads)

    def apply_optimize(self, loss: Variable, startup_program: Optional[Program],
                       params_grads: Pairs) -> List[Operator]:
        """``apply_gradients`` inside ``program_guard(loss's program, startup_program)``."""
        with program_guard(loss.block.program, startup_program):
            return self.apply_gradients(params_grads)

    def minimize(self, loss: Variable, startup_program: Optional[Program] = None,
                 parameter_list: Optional[Sequence[Any]] = None, no_grad_set: Any = None,
                 grad_clip: Optional[GradientClipBase] = None
                 ) -> Tuple[List[Operator], Pairs]:
        """Append backward, clip, regularization and update ops for ``loss``; returns
        ``(optimize_ops, params_grads)``. ``grad_clip`` here is the develop-1.8 spelling; the
        optimizer's own ``grad_clip`` wins when both are given."""
        if not isinstance(loss, Variable):
            raise TypeError(f"The loss should be an Variable, but received "
                            f"{type(loss).__name__}")
        grad_clip = _check_clip(grad_clip, "minimize()")
        if grad_clip is not None and self._grad_clip is not None:
            _log.warning("minimize(grad_clip=%s) is ignored: the optimizer was built with "
                         "grad_clip=%s, which wins", grad_clip, self._grad_clip)
        parameter_list = parameter_list if parameter_list else self._parameter_list
        params_grads = self.backward(loss, startup_program=startup_program,
                                     parameter_list=parameter_list, no_grad_set=no_grad_set)
        self._minimize_clip = grad_clip
        try:
            optimize_ops = self.apply_optimize(loss, startup_program=startup_program,
                                               params_grads=params_grads)
        finally:
            self._minimize_clip = None
        return optimize_ops, params_grads


# -- the optimizers ---------------------------------------------------------------------------
class SGDOptimizer(Optimizer):
    """``param -= lr * grad``."""

    def __init__(self, learning_rate: Union[float, Variable],
                 parameter_list: Optional[Sequence[Any]] = None, regularization: Any = None,
                 grad_clip: Optional[GradientClipBase] = None, name: Optional[str] = None):
        super().__init__(learning_rate, parameter_list, regularization, grad_clip, name)
        self.type = "sgd"

    def _append_optimize_op(self, block, param_and_grad):
        p, g = param_and_grad
        return block.append_op(type="sgd", inputs={
            "Param": p, "Grad": g, "LearningRate": self._create_param_lr(param_and_grad)},
            outputs={"ParamOut": p}, stop_gradient=True)


class MomentumOptimizer(Optimizer):
    """``v = mu * v + g``; ``p -= lr * v`` (Nesterov: ``p -= lr * (g + mu * v)``)."""
    _velocity_acc_str = "velocity"

    def __init__(self, learning_rate: Union[float, Variable], momentum: float,
                 parameter_list: Optional[Sequence[Any]] = None, use_nesterov: bool = False,
                 regularization: Any = None, grad_clip: Optional[GradientClipBase] = None,
                 name: Optional[str] = None):
        if momentum is None:
            raise ValueError("momentum is not set.")
        super().__init__(learning_rate, parameter_list, regularization, grad_clip, name)
        self.type = "momentum"
        self._momentum = float(momentum)
        self._use_nesterov = bool(use_nesterov)

    def _create_accumulators(self, block, parameters):
        for p in parameters:
            self._add_accumulator(self._velocity_acc_str, p)

    def _append_optimize_op(self, block, param_and_grad):
        p, g = param_and_grad
        v = self._get_accumulator(self._velocity_acc_str, p)
        return block.append_op(
            type="momentum",
            inputs={"Param": p, "Grad": g, "Velocity": v,
                    "LearningRate": self._create_param_lr(param_and_grad)},
            outputs={"ParamOut": p, "VelocityOut": v},
            attrs={"mu": self._momentum, "use_nesterov": self._use_nesterov},
            stop_gradient=True)


class LarsMomentumOptimizer(Optimizer):
    """Momentum with a layer-wise local learning rate
    ``lr * lars_coeff * ||p|| / (||g|| + lars_weight_decay * ||p||)``."""
    _velocity_acc_str = "velocity"

    def __init__(self, learning_rate: Union[float, Variable], momentum: float,
                 lars_coeff: float = 0.001, lars_weight_decay: float = 0.0005,
                 parameter_list: Optional[Sequence[Any]] = None, regularization: Any = None,
                 grad_clip: Optional[GradientClipBase] = None, name: Optional[str] = None):
        if momentum is None:
            raise ValueError("momentum is not set.")
        super().__init__(learning_rate, parameter_list, regularization, grad_clip, name)
        self.type = "lars_momentum"
        self._momentum = float(momentum)
        self._lars_coeff = float(lars_coeff)
        self._lars_weight_decay = float(lars_weight_decay)

    def _create_accumulators(self, block, parameters):
        for p in parameters:
            self._add_accumulator(self._velocity_acc_str, p)

    def _append_optimize_op(self, block, param_and_grad):
        p, g = param_and_grad
        v = self._get_accumulator(self._velocity_acc_str, p)
        return block.append_op(
            type="lars_momentum",
            inputs={"Param": p, "Grad": g, "Velocity": v,
                    "LearningRate": self._create_param_lr(param_and_grad)},
            outputs={"ParamOut": p, "VelocityOut": v},
            attrs={"mu": self._momentum, "lars_coeff": self._lars_coeff,
                   "lars_weight_decay": self._lars_weight_decay},
            stop_gradient=True)


class AdagradOptimizer(Optimizer):
    """``m += g^2``; ``p -= lr * g / (sqrt(m) + epsilon)``."""
    _moment_acc_str = "moment"

    def __init__(self, learning_rate: Union[float, Variable], epsilon: float = 1.0e-6,
                 parameter_list: Optional[Sequence[Any]] = None, regularization: Any = None,
                 grad_clip: Optional[GradientClipBase] = None, name: Optional[str] = None,
                 initial_accumulator_value: float = 0.0):
        if epsilon is None:
            raise ValueError("epsilon is not set.")
        super().__init__(learning_rate, parameter_list, regularization, grad_clip, name)
        self.type = "adagrad"
        self._epsilon = float(epsilon)
        self.initial_accumulator_value = float(initial_accumulator_value)

    def _create_accumulators(self, block, parameters):
        for p in parameters:
            self._add_accumulator(self._moment_acc_str, p,
                                  fill_value=self.initial_accumulator_value)

    def _append_optimize_op(self, block, param_and_grad):
        p, g = param_and_grad
        m = self._get_accumulator(self._moment_acc_str, p)
        return block.append_op(
            type="adagrad",
            inputs={"Param": p, "Grad": g, "Moment": m,
                    "LearningRate": self._create_param_lr(param_and_grad)},
            outputs={"ParamOut": p, "MomentOut": m}, attrs={"epsilon": self._epsilon},
            stop_gradient=True)


class AdamOptimizer(Optimizer):
    """Adam with fluid's in-op bias correction; ``beta1_pow_acc`` / ``beta2_pow_acc`` start at
    beta1 / beta2 and are advanced by the ``adam`` op itself. ``beta1``/``beta2`` may be [1]
    Variables. ``lazy_mode`` is accepted; gradients are dense in fluidlite, so it changes
    nothing."""
    _moment1_acc_str = "moment1"
    _moment2_acc_str = "moment2"
    _beta1_pow_acc_str = "beta1_pow_acc"
    _beta2_pow_acc_str = "beta2_pow_acc"

    def __init__(self, learning_rate: Union[float, Variable] = 0.001,
                 beta1: Union[float, Variable] = 0.9, beta2: Union[float, Variable] = 0.999,
                 epsilon: float = 1e-8, parameter_list: Optional[Sequence[Any]] = None,
                 regularization: Any = None, grad_clip: Optional[GradientClipBase] = None,
                 name: Optional[str] = None, lazy_mode: bool = False):
        for arg, v in (("beta1", beta1), ("beta2", beta2), ("epsilon", epsilon)):
            if v is None:
                raise ValueError(f"{arg} is not set.")
        super().__init__(learning_rate, parameter_list, regularization, grad_clip, name)
        self.type = "adam"
        self._beta1 = beta1 if isinstance(beta1, Variable) else float(beta1)
        self._beta2 = beta2 if isinstance(beta2, Variable) else float(beta2)
        self._epsilon = float(epsilon)
        self._lazy_mode = bool(lazy_mode)

    def _create_accumulators(self, block, parameters):
        for p in parameters:
            self._add_accumulator(self._moment1_acc_str, p)
            self._add_accumulator(self._moment2_acc_str, p)
            self._add_accumulator(
                self._beta1_pow_acc_str, p, shape=[1], type=VarType.LOD_TENSOR,
                fill_value=0.9 if isinstance(self._beta1, Variable) else self._beta1)
            self._add_accumulator(
                self._beta2_pow_acc_str, p, shape=[1], type=VarType.LOD_TENSOR,
                fill_value=0.999 if isinstance(self._beta2, Variable) else self._beta2)

    def _append_optimize_op(self, block, param_and_grad):
        p, g = param_and_grad
        m1 = self._get_accumulator(self._moment1_acc_str, p)
        m2 = self._get_accumulator(self._moment2_acc_str, p)
        b1p = self._get_accumulator(self._beta1_pow_acc_str, p)
        b2p = self._get_accumulator(self._beta2_pow_acc_str, p)
        inputs = {"Param": p, "Grad": g, "LearningRate": self._create_param_lr(param_and_grad),
                  "Moment1": m1, "Moment2": m2, "Beta1Pow": b1p, "Beta2Pow": b2p}
        attrs: Dict[str, Any] = {"epsilon": self._epsilon, "lazy_mode": self._lazy_mode,
                                 "min_row_size_to_use_multithread": 1000}
        for key, beta in (("beta1", self._beta1), ("beta2", self._beta2)):
            if isinstance(beta, Variable):
                inputs[key.capitalize() + "Tensor"] = beta
            else:
                attrs[key] = beta
        return block.append_op(
            type="adam", inputs=inputs,
            outputs={"ParamOut": p, "Moment1Out": m1, "Moment2Out": m2, "Beta1PowOut": b1p,
                     "Beta2PowOut": b2p},
            attrs=attrs, stop_gradient=True)


class AdamaxOptimizer(Optimizer):
    """Adam with the infinity norm; ``beta1_pow_acc`` is advanced by a ``scale`` op per
    parameter after the updates (name_scope 'adamx', as fluid)."""
    _moment_acc_str = "moment"
    _inf_norm_acc_str = "inf_norm"
    _beta1_pow_acc_str = "beta1_pow_acc"

    def __init__(self, learning_rate: Union[float, Variable] = 0.001, beta1: float = 0.9,
                 beta2: float = 0.999, epsilon: float = 1e-8,
                 parameter_list: Optional[Sequence[Any]] = None, regularization: Any = None,
                 grad_clip: Optional[GradientClipBase] = None, name: Optional[str] = None):
        for arg, v in (("beta1", beta1), ("beta2", beta2), ("epsilon", epsilon)):
            if v is None:
                raise ValueError(f"{arg} is not set.")
        super().__init__(learning_rate, parameter_list, regularization, grad_clip, name)
        self.type = "adamax"
        self._beta1, self._beta2, self._epsilon = float(beta1), float(beta2), float(epsilon)

    def _create_accumulators(self, block, parameters):
        for p in parameters:
            self._add_accumulator(self._moment_acc_str, p)
            self._add_accumulator(self._inf_norm_acc_str, p)
            self._add_accumulator(self._beta1_pow_acc_str, p, fill_value=self._beta1,
                                  shape=[1])

    def _append_optimize_op(self, block, param_and_grad):
        p, g = param_and_grad
        m = self._get_accumulator(self._moment_acc_str, p)
        u = self._get_accumulator(self._inf_norm_acc_str, p)
        b1p = self._get_accumulator(self._beta1_pow_acc_str, p)
        return block.append_op(
            type="adamax",
            inputs={"Param": p, "Grad": g, "LearningRate": self._create_param_lr(param_and_grad),
                    "Moment": m, "InfNorm": u, "Beta1Pow": b1p},
            outputs={"ParamOut": p, "MomentOut": m, "InfNormOut": u},
            attrs={"beta1": self._beta1, "beta2": self._beta2, "epsilon": self._epsilon},
            stop_gradient=True)

    def _finish_update(self, block, parameters_and_grads):
        for p, g in parameters_and_grads:
            if g is None or not p.trainable:
                continue
            with p.block.program._optimized_guard([p, g]), name_scope("adamx"):
                b1p = self._get_accumulator(self._beta1_pow_acc_str, p)
                block.append_op(type="scale", inputs={"X": b1p}, outputs={"Out": b1p},
                                attrs={"scale": self._beta1}, stop_gradient=True)


class DecayedAdagradOptimizer(Optimizer):
    """``m = decay * m + (1 - decay) * g^2``; ``p -= lr * g / (sqrt(m) + epsilon)``."""
    _moment_acc_str = "moment"

    def __init__(self, learning_rate: Union[float, Variable], decay: float = 0.95,
                 epsilon: float = 1.0e-6, parameter_list: Optional[Sequence[Any]] = None,
                 regularization: Any = None, grad_clip: Optional[GradientClipBase] = None,
                 name: Optional[str] = None):
        for arg, v in (("decay", decay), ("epsilon", epsilon)):
            if v is None:
                raise ValueError(f"{arg} is not set.")
        super().__init__(learning_rate, parameter_list, regularization, grad_clip, name)
        self.type = "decayed_adagrad"
        self._decay, self._epsilon = float(decay), float(epsilon)

    def _create_accumulators(self, block, parameters):
        for p in parameters:
            self._add_accumulator(self._moment_acc_str, p)

    def _append_optimize_op(self, block, param_and_grad):
        p, g = param_and_grad
        m = self._get_accumulator(self._moment_acc_str, p)
        return block.append_op(
            type="decayed_adagrad",
            inputs={"Param": p, "Grad": g, "Moment": m,
                    "LearningRate": self._create_param_lr(param_and_grad)},
            outputs={"ParamOut": p, "MomentOut": m},
            attrs={"decay": self._decay, "epsilon": self._epsilon}, stop_gradient=True)


class AdadeltaOptimizer(Optimizer):
    """Adadelta; the update is scaled by the learning rate (fluid 1.8 ignored it, see
    docs/compatibility.md: pass learning_rate=1.0 for 1.8's numbers)."""
    _avg_squared_grad_acc_str = "_avg_squared_grad"
    _avg_squared_update_acc_str = "_avg_squared_update"

    def __init__(self, learning_rate: Union[float, Variable], epsilon: float = 1.0e-6,
                 rho: float = 0.95, parameter_list: Optional[Sequence[Any]] = None,
                 regularization: Any = None, grad_clip: Optional[GradientClipBase] = None,
                 name: Optional[str] = None):
        if learning_rate is None:
            raise ValueError("learning_rate is not set.")
        if epsilon is None:
            raise ValueError("epsilon is not set.")
        if rho is None:
            raise ValueError("rho is not set.")
        super().__init__(learning_rate, parameter_list, regularization, grad_clip, name)
        self.type = "adadelta"
        self._epsilon, self._rho = float(epsilon), float(rho)

    def _create_accumulators(self, block, parameters):
        for p in parameters:
            self._add_accumulator(self._avg_squared_grad_acc_str, p)
            self._add_accumulator(self._avg_squared_update_acc_str, p)

    def _append_optimize_op(self, block, param_and_grad):
        p, g = param_and_grad
        eg = self._get_accumulator(self._avg_squared_grad_acc_str, p)
        edx = self._get_accumulator(self._avg_squared_update_acc_str, p)
        return block.append_op(
            type="adadelta",
            inputs={"Param": p, "Grad": g, "AvgSquaredGrad": eg, "AvgSquaredUpdate": edx,
                    "LearningRate": self._create_param_lr(param_and_grad)},
            outputs={"ParamOut": p, "AvgSquaredGradOut": eg, "AvgSquaredUpdateOut": edx},
            attrs={"epsilon": self._epsilon, "rho": self._rho}, stop_gradient=True)


class RMSPropOptimizer(Optimizer):
    """``ms = rho*ms + (1-rho)*g^2``; ``mom = momentum*mom + lr*g/sqrt(ms + eps)`` (centered:
    ``sqrt(ms - mg^2 + eps)`` with ``mg = rho*mg + (1-rho)*g``); ``p -= mom``."""
    _momentum_acc_str = "momentum"
    _mean_square_acc_str = "mean_square"
    _mean_grad_acc_str = "mean_grad"

    def __init__(self, learning_rate: Union[float, Variable], rho: float = 0.95,
                 epsilon: float = 1.0e-6, momentum: float = 0.0, centered: bool = False,
                 parameter_list: Optional[Sequence[Any]] = None, regularization: Any = None,
                 grad_clip: Optional[GradientClipBase] = None, name: Optional[str] = None):
        if learning_rate is None:
            raise ValueError("learning_rate is not set.")
        for arg, v in (("rho", rho), ("epsilon", epsilon), ("momentum", momentum)):
            if v is None:
                raise ValueError(f"{arg} is not set.")
        super().__init__(learning_rate, parameter_list, regularization, grad_clip, name)
        self.type = "rmsprop"
        self._rho, self._epsilon = float(rho), float(epsilon)
        self._momentum, self._centered = float(momentum), bool(centered)

    def _create_accumulators(self, block, parameters):
        for p in parameters:
            self._add_accumulator(self._momentum_acc_str, p)
            self._add_accumulator(self._mean_square_acc_str, p)
            self._add_accumulator(self._mean_grad_acc_str, p)

    def _append_optimize_op(self, block, param_and_grad):
        p, g = param_and_grad
        mom = self._get_accumulator(self._momentum_acc_str, p)
        ms = self._get_accumulator(self._mean_square_acc_str, p)
        mg = self._get_accumulator(self._mean_grad_acc_str, p)
        return block.append_op(
            type="rmsprop",
            inputs={"Param": p, "Grad": g, "Moment": mom, "MeanSquare": ms, "MeanGrad": mg,
                    "LearningRate": self._create_param_lr(param_and_grad)},
            outputs={"ParamOut": p, "MomentOut": mom, "MeanSquareOut": ms, "MeanGradOut": mg},
            attrs={"epsilon": self._epsilon, "decay": self._rho, "momentum": self._momentum,
                   "centered": self._centered},
            stop_gradient=True)


class FtrlOptimizer(Optimizer):
    """FTRL-Proximal. ``l2`` is passed to the op as ``l2`` (fluid 1.8 passed ``l1`` there, see
    docs/compatibility.md)."""
    _squared_acc_str = "squared"
    _linear_acc_str = "linear"

    def __init__(self, learning_rate: Union[float, Variable], l1: float = 0.0, l2: float = 0.0,
                 lr_power: float = -0.5, parameter_list: Optional[Sequence[Any]] = None,
                 regularization: Any = None, grad_clip: Optional[GradientClipBase] = None,
                 name: Optional[str] = None):
        super().__init__(learning_rate, parameter_list, regularization, grad_clip, name)
        self.type = "ftrl"
        self._l1, self._l2, self._lr_power = float(l1), float(l2), float(lr_power)

    def _create_accumulators(self, block, parameters):
        for p in parameters:
            self._add_accumulator(self._squared_acc_str, p)
            self._add_accumulator(self._linear_acc_str, p)

    def _append_optimize_op(self, block, param_and_grad):
        p, g = param_and_grad
        sq = self._get_accumulator(self._squared_acc_str, p)
        lin = self._get_accumulator(self._linear_acc_str, p)
        return block.append_op(
            type="ftrl",
            inputs={"Param": p, "Grad": g, "SquaredAccumulator": sq, "LinearAccumulator": lin,
                    "LearningRate": self._create_param_lr(param_and_grad)},
            outputs={"ParamOut": p, "SquaredAccumOut": sq, "LinearAccumOut": lin},
            attrs={"l1": self._l1, "l2": self._l2, "lr_power": self._lr_power},
            stop_gradient=True)


class LambOptimizer(AdamOptimizer):
    """LAMB (layer-wise adaptive moments); ``exclude_from_weight_decay_fn(param) -> bool``
    turns the decay off for the parameters it selects (e.g. biases, norms)."""

    def __init__(self, learning_rate: Union[float, Variable] = 0.001,
                 lamb_weight_decay: float = 0.01, beta1: float = 0.9, beta2: float = 0.999,
                 epsilon: float = 1e-6, parameter_list: Optional[Sequence[Any]] = None,
                 regularization: Any = None, grad_clip: Optional[GradientClipBase] = None,
                 exclude_from_weight_decay_fn: Optional[Callable[[Parameter], bool]] = None,
                 name: Optional[str] = None):
        if lamb_weight_decay is None:
            raise ValueError("lamb_weight_decay is not set.")
        if exclude_from_weight_decay_fn is not None and not callable(exclude_from_weight_decay_fn):
            raise TypeError(f"exclude_from_weight_decay_fn must be None or a function of a "
                            f"Parameter, but received {exclude_from_weight_decay_fn!r}")
        super().__init__(learning_rate, beta1, beta2, epsilon, parameter_list, regularization,
                         grad_clip, name)
        self.type = "lamb"
        self._weight_decay = float(lamb_weight_decay)
        self._exclude_from_weight_decay_fn = exclude_from_weight_decay_fn

    def _append_optimize_op(self, block, param_and_grad):
        p, g = param_and_grad
        m1 = self._get_accumulator(self._moment1_acc_str, p)
        m2 = self._get_accumulator(self._moment2_acc_str, p)
        b1p = self._get_accumulator(self._beta1_pow_acc_str, p)
        b2p = self._get_accumulator(self._beta2_pow_acc_str, p)
        wd = self._weight_decay
        if self._exclude_from_weight_decay_fn is not None and \
                self._exclude_from_weight_decay_fn(p):
            wd = 0.0
        return block.append_op(
            type="lamb",
            inputs={"Param": p, "Grad": g, "LearningRate": self._create_param_lr(param_and_grad),
                    "Moment1": m1, "Moment2": m2, "Beta1Pow": b1p, "Beta2Pow": b2p},
            outputs={"ParamOut": p, "Moment1Out": m1, "Moment2Out": m2},
            attrs={"beta1": self._beta1, "beta2": self._beta2, "epsilon": self._epsilon,
                   "weight_decay": wd},
            stop_gradient=True)


SGD = SGDOptimizer
Momentum = MomentumOptimizer
Adagrad = AdagradOptimizer
Adam = AdamOptimizer
Adamax = AdamaxOptimizer
DecayedAdagrad = DecayedAdagradOptimizer
Adadelta = AdadeltaOptimizer
RMSProp = RMSPropOptimizer
Ftrl = FtrlOptimizer
Lamb = LambOptimizer
LarsMomentum = LarsMomentumOptimizer


# -- averaging and wrappers -------------------------------------------------------------------
def _clone(block: Block, var: Variable) -> Variable:
    """``var`` declared (persistable) in another program's block, to read/write its scope value."""
    return block._clone_variable(var, force_persistable=True)


def _cast(block: Block, x: Variable, dtype: Any) -> Variable:
    if x.dtype == dtype:
        return x
    return append_tmp_op(block, "cast", {"X": x}, {"in_dtype": x.dtype, "out_dtype": dtype},
                         dtype=dtype)


class ModelAverage(Optimizer):
    """Average each parameter over a sliding window of recent updates (fluid 1.8).

    Build it *after* ``minimize``: for every parameter with ``do_model_average != False`` it
    appends an ``average_accumulates`` op to the main program (accumulators ``sum_1``, ``sum_2``,
    ``sum_3``, ``num_accumulates``, ``old_num_accumulates``, ``num_updates``). ``apply(exe)`` is a
    context manager that swaps the averages in (``param = (sum_1 + sum_2 + sum_3) /
    (num_accumulates + old_num_accumulates)``) and restores the trained values on exit.
    """

    def __init__(self, average_window_rate: float, min_average_window: int = 10000,
                 max_average_window: int = 10000, regularization: Any = None,
                 name: Optional[str] = None) -> None:
        super().__init__(0.0, regularization=regularization, name=name)
        if min_average_window > max_average_window:
            raise ValueError(f"ModelAverage: min_average_window ({min_average_window}) must be "
                             f"<= max_average_window ({max_average_window})")
        self.average_window = float(average_window_rate)
        self.min_average_window = int(min_average_window)
        self.max_average_window = int(max_average_window)
        self.params_grads: List[Tuple[Parameter, Variable]] = []
        main = default_main_program()
        for param in main.global_block().all_parameters():
            if param.do_model_average is not False:
                backup = param.block.create_var(
                    name=names.generate(param.name + ".tmp"), dtype=param.dtype,
                    shape=param.shape, persistable=False, stop_gradient=True)
                self.params_grads.append((param, backup))
        for param, backup in self.params_grads:
            with main._optimized_guard([param, backup]), name_scope("move_average"):
                self._append_average_accumulate_op(param)
        self.apply_program = Program()
        block = self.apply_program.global_block()
        with program_guard(self.apply_program, Program()):
            for pg in self.params_grads:
                self._add_average_apply_op(block, pg)
        self.restore_program = Program()
        block = self.restore_program.global_block()
        with program_guard(self.restore_program, Program()):
            for param, backup in self.params_grads:
                block.append_op(type="assign", inputs={"X": _clone(block, backup)},
                                outputs={"Out": _clone(block, param)})

    _ACCS = ("sum_1", "sum_2", "sum_3", "num_accumulates", "old_num_accumulates", "num_updates")

    def _append_average_accumulate_op(self, param: Parameter) -> None:
        self.helper = LayerHelper("average_accumulate")
        accs = {}
        for acc in self._ACCS:
            counter = acc.startswith(("num", "old"))
            accs[acc] = self._add_accumulator(acc, param, dtype="int64" if counter else None,
                                              shape=[1] if counter else None)
        self.helper.append_op(
            type="average_accumulates",
            inputs=dict({"param": param}, **{"in_" + k: v for k, v in accs.items()}),
            outputs={"out_" + k: v for k, v in accs.items()},
            attrs={"average_window": self.average_window,
                   "min_average_window": self.min_average_window,
                   "max_average_window": self.max_average_window},
            stop_gradient=True)

    def _add_average_apply_op(self, block: Block, param_grad: Tuple[Parameter, Variable]) -> None:
        param, backup = (_clone(block, v) for v in param_grad)
        accs = {k: _clone(block, self._get_accumulator(k, param_grad[0])) for k in self._ACCS}
        block.append_op(type="assign", inputs={"X": param}, outputs={"Out": backup})
        count = append_tmp_op(block, "sum",
                              {"X": [accs["num_accumulates"], accs["old_num_accumulates"]]})
        total = append_tmp_op(block, "sum", {"X": [accs["sum_1"], accs["sum_2"],
                                                   accs["sum_3"]]})
        dtype = param.dtype
        block.append_op(type="elementwise_div",
                        inputs={"X": _cast(block, total, dtype), "Y": _cast(block, count, dtype)},
                        outputs={"Out": param})

    def minimize(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("ModelAverage is not a standalone optimizer: build it after "
                        "another optimizer's minimize() and use apply()/restore()")

    @contextlib.contextmanager
    def apply(self, executor: Any, need_restore: bool = True) -> Iterator[None]:
        """Swap the averaged values into the parameters; restore them on exit."""
        executor.run(self.apply_program)
        try:
            yield
        finally:
            if need_restore:
                self.restore(executor)

    def restore(self, executor: Any) -> None:
        """Put back the parameter values saved by ``apply``."""
        executor.run(self.restore_program)


class ExponentialMovingAverage:
    """Shadow every parameter (``do_model_average != False``) with ``ema = ema*d + p*(1-d)``.

    ``update()`` appends the EMA ops (and the ``@EMA_STEP_COUNTER@`` step counter) to the main
    program; call it after ``minimize``. ``d = decay``, or ``min(decay, (1+t)/(10+t))`` with
    ``thres_steps=t`` (a Variable such as a step counter). ``apply(exe)`` swaps the
    bias-corrected averages ``ema / (1 - d**step)`` into the parameters and restores them on
    exit. (fluid 1.8 also wrote the corrected value back into the EMA variable, so every apply
    compounded the correction; fluidlite leaves the EMA untouched.)
    """

    def __init__(self, decay: float = 0.999, thres_steps: Optional[Variable] = None,
                 name: Optional[str] = None) -> None:
        if isinstance(decay, bool) or not isinstance(decay, (int, float)) or \
                not 0.0 <= decay <= 1.0:
            raise ValueError(f"ExponentialMovingAverage: decay must be a float in [0, 1], but "
                             f"received {decay!r}")
        if thres_steps is not None and not isinstance(thres_steps, Variable):
            raise TypeError(f"ExponentialMovingAverage: thres_steps must be a Variable (a step "
                            f"counter) or None, but received {thres_steps!r}")
        self._decay = float(decay)
        self._thres_steps = thres_steps
        self._name = name if name is not None else ""
        self._step_counter_name = "@EMA_STEP_COUNTER@"
        main = default_main_program()
        self._decay_var = self._get_ema_decay()
        self._params_tmps: List[Tuple[Parameter, Variable]] = []
        for param in main.global_block().all_parameters():
            if param.do_model_average is not False:
                tmp = param.block.create_var(
                    name=names.generate(self._name + param.name + ".ema_tmp"),
                    dtype=param.dtype, shape=param.shape, persistable=False,
                    stop_gradient=True)
                self._params_tmps.append((param, tmp))
        self._ema_vars: Dict[str, Variable] = {}
        for param, tmp in self._params_tmps:
            with main._optimized_guard([param, tmp]), name_scope("moving_average"):
                self._ema_vars[param.name] = _create_global_var(
                    name=names.generate(self._name + param.name + "_ema"), shape=param.shape,
                    value=0.0, dtype=param.dtype)
        self.apply_program = Program()
        block = self.apply_program.global_block()
        with program_guard(self.apply_program, Program()):
            step = _cast(block, block.create_var(name=self._step_counter_name, shape=[1],
                                                 dtype="int64", persistable=True), "float32")
            decay = _clone(block, self._decay_var)
            decay_pow = append_tmp_op(block, "elementwise_pow", {"X": decay, "Y": step})
            zero = append_tmp_op(block, "fill_constant", {}, {"shape": [1], "dtype": "float32",
                                                              "value": 0.0}, dtype="float32")
            started = _cast(block, append_tmp_op(block, "less_than", {"X": zero, "Y": step},
                                                 dtype="bool"), "float32")
            # 1 - d**step once a step ran, else exactly 1 (no correction before any update)
            denom = append_tmp_op(block, "scale", {"X": append_tmp_op(
                block, "elementwise_mul", {"X": decay_pow, "Y": started})},
                {"scale": -1.0, "bias": 1.0})
            for param, tmp in self._params_tmps:
                p, t, ema = (_clone(block, v) for v in (param, tmp, self._ema_vars[param.name]))
                block.append_op(type="assign", inputs={"X": p}, outputs={"Out": t})
                block.append_op(type="elementwise_div",
                                inputs={"X": ema, "Y": _cast(block, denom, p.dtype)},
                                outputs={"Out": p})
        self.restore_program = Program()
        block = self.restore_program.global_block()
        with program_guard(self.restore_program, Program()):
            for param, tmp in self._params_tmps:
                block.append_op(type="assign", inputs={"X": _clone(block, tmp)},
                                outputs={"Out": _clone(block, param)})

    def _get_ema_decay(self) -> Variable:
        main = default_main_program()
        with main._lr_schedule_guard():
            decay_var = _create_global_var(name="scheduled_ema_decay_rate", shape=[1],
                                           value=self._decay, dtype="float32")
            if self._thres_steps is not None:
                block = main.global_block()
                t = _cast(block, self._thres_steps, "float32")
                ratio = append_tmp_op(block, "elementwise_div", {
                    "X": append_tmp_op(block, "scale", {"X": t}, {"bias": 1.0}),
                    "Y": append_tmp_op(block, "scale", {"X": t}, {"bias": 10.0})})
                limit = append_tmp_op(block, "fill_constant", {}, {
                    "shape": [1], "dtype": "float32", "value": self._decay}, dtype="float32")
                block.append_op(type="elementwise_min", inputs={"X": ratio, "Y": limit},
                                outputs={"Out": decay_var})
        return decay_var

    def update(self) -> None:
        """Append the EMA update ops to the main program (call once, after minimize)."""
        from .layers.control_flow import autoincreased_step_counter
        autoincreased_step_counter(counter_name=self._step_counter_name)
        main = default_main_program()
        block = main.global_block()
        for param, tmp in self._params_tmps:
            with main._optimized_guard([param, tmp]), name_scope("moving_average"):
                ema = self._ema_vars[param.name]
                d = _cast(block, self._decay_var, param.dtype)
                keep = append_tmp_op(block, "elementwise_mul", {"X": ema, "Y": d})
                one_minus = append_tmp_op(block, "scale", {"X": d}, {"scale": -1.0, "bias": 1.0})
                new = append_tmp_op(block, "elementwise_mul", {"X": param, "Y": one_minus})
                block.append_op(type="elementwise_add", inputs={"X": keep, "Y": new},
                                outputs={"Out": ema})

    @contextlib.contextmanager
    def apply(self, executor: Any, need_restore: bool = True) -> Iterator[None]:
        """Swap the bias-corrected averages into the parameters; restore them on exit."""
        executor.run(self.apply_program)
        try:
            yield
        finally:
            if need_restore:
                self.restore(executor)

    def restore(self, executor: Any) -> None:
        """Put back the parameter values saved by ``apply``."""
        executor.run(self.restore_program)


class LookaheadOptimizer:
    """Lookahead (Zhang et al. 2019): the inner optimizer updates the fast weights every step;
    every ``k`` steps the slow weights move ``alpha`` of the way to them and the fast weights
    are reset to the slow ones (``<param>@SLOW``, initialised from the parameter in the startup
    program)."""

    def __init__(self, inner_optimizer: Optimizer, alpha: float = 0.5, k: int = 5) -> None:
        if inner_optimizer is None:
            raise ValueError("inner optimizer can not be None")
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or \
                not 0.0 <= alpha <= 1.0:
            raise ValueError("alpha should be larger or equal to 0.0, and less or equal than "
                             f"1.0, but received {alpha!r}")
        if isinstance(k, bool) or not isinstance(k, int) or k <= 0:
            raise ValueError(f"k should be a positive integer, but received {k!r}")
        self.inner_optimizer = inner_optimizer
        self.alpha, self.k = float(alpha), k
        self.type = "lookahead"

    def minimize(self, loss: Variable, startup_program: Optional[Program] = None) -> Any:
        """Inner ``minimize``, then the slow-weight sync ops; returns the inner result."""
        mini_out = self.inner_optimizer.minimize(loss, startup_program=startup_program)
        startup = startup_program if startup_program is not None else default_startup_program()
        main_block = loss.block.program.global_block()
        params = [p.name for p in main_block.all_parameters()]
        startup_block = startup.global_block()
        slow_vars = {}
        for name in params:
            fast = main_block.var(name)
            slow_vars[name] = main_block.create_var(name=name + "@SLOW", shape=fast.shape,
                                                    dtype=fast.dtype, persistable=True)
            s_fast = startup_block.var(name)
            s_slow = startup_block.create_var(name=name + "@SLOW", shape=fast.shape,
                                              dtype=fast.dtype, persistable=True)
            startup_block.append_op(type="assign", inputs={"X": s_fast},
                                    outputs={"Out": s_slow})
        with program_guard(main_block.program, startup):
            k = _create_global_var("lookahead_k", [1], self.k, "int32")
            alpha = _create_global_var("lookahead_alpha", [1], self.alpha, "float32")
            step = _create_global_var("lookahead_step", [1], 0, "int32")
            main_block.append_op(type="increment", inputs={"X": step}, outputs={"Out": step},
                                 attrs={"step": 1.0})
            mod = append_tmp_op(main_block, "elementwise_mod", {"X": step, "Y": k})
            zero = append_tmp_op(main_block, "fill_constant", {}, {
                "shape": [1], "dtype": "int32", "value": 0.0}, dtype="int32")
            sync = _cast(main_block, append_tmp_op(main_block, "equal", {"X": mod, "Y": zero},
                                                   dtype="bool"), "float32")
            keep = append_tmp_op(main_block, "scale", {"X": sync}, {"scale": -1.0, "bias": 1.0})
            one_minus_alpha = append_tmp_op(main_block, "scale", {"X": alpha},
                                            {"scale": -1.0, "bias": 1.0})
            for name in params:
                fast, slow = main_block.var(name), slow_vars[name]
                m_sync, m_keep = _cast(main_block, sync, fast.dtype), \
                    _cast(main_block, keep, fast.dtype)
                mixed = append_tmp_op(main_block, "elementwise_add", {
                    "X": append_tmp_op(main_block, "elementwise_mul",
                                       {"X": fast, "Y": _cast(main_block, alpha, fast.dtype)}),
                    "Y": append_tmp_op(main_block, "elementwise_mul",
                                       {"X": slow, "Y": _cast(main_block, one_minus_alpha,
                                                              fast.dtype)})})
                # every k-th step both become `mixed`, otherwise they keep their values
                # (x*1 + y*0 is exact, so the untouched weights are bit-identical)
                for var, other in ((slow, slow), (fast, fast)):
                    main_block.append_op(type="elementwise_add", inputs={
                        "X": append_tmp_op(main_block, "elementwise_mul",
                                           {"X": mixed, "Y": m_sync}),
                        "Y": append_tmp_op(main_block, "elementwise_mul",
                                           {"X": other, "Y": m_keep})},
                        outputs={"Out": var})
        return mini_out


class RecomputeOptimizer(Optimizer):
    """Wrap ``optimizer`` so the backward pass recomputes the forward ops between checkpoints
    instead of keeping their outputs (fluid's recompute; the gradients are the same).
    Call ``_set_checkpoints([vars])`` before ``minimize``."""

    def __init__(self, optimizer: Optimizer) -> None:
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"RecomputeOptimizer wraps an Optimizer, but received {optimizer!r}")
        self._optimizer = optimizer
        self._checkpoints: Optional[List[Any]] = None
        self._learning_rate = optimizer._learning_rate
        self._learning_rate_map = optimizer._learning_rate_map
        self.type = "recompute"

    def _set_checkpoints(self, checkpoints: Sequence[Any]) -> None:
        if not isinstance(checkpoints, (list, tuple)):
            raise TypeError(f"checkpoints must be a list of Variables or names, but received "
                            f"{type(checkpoints).__name__}")
        self._checkpoints = list(checkpoints)

    def backward(self, loss: Variable, startup_program: Optional[Program] = None,
                 parameter_list: Optional[Sequence[Any]] = None, no_grad_set: Any = None,
                 callbacks: Optional[List[Callable]] = None) -> Pairs:
        """append_backward with the checkpoints set by ``_set_checkpoints``."""
        if self._checkpoints is None:
            raise ValueError("You should call _set_checkpoints first")
        if not isinstance(loss, Variable):
            raise TypeError(f"The loss should be an Variable, but received "
                            f"{type(loss).__name__}")
        self._optimizer._dtype = loss.dtype
        no_grad = self._get_no_grad_set(loss, no_grad_set)
        callbacks = list(callbacks or [])
        if error_clip_callback not in callbacks:
            callbacks.append(error_clip_callback)
        with program_guard(loss.block.program, startup_program):
            params_grads, _ = append_backward(loss, parameter_list, no_grad, callbacks,
                                              checkpoints=self._checkpoints)
        return params_grads

    def apply_optimize(self, loss: Variable, startup_program: Optional[Program],
                       params_grads: Pairs) -> List[Operator]:
        return self._optimizer.apply_optimize(loss, startup_program, params_grads)

    def apply_gradients(self, params_grads: Pairs) -> List[Operator]:
        return self._optimizer.apply_gradients(params_grads)

    def minimize(self, loss: Variable, startup_program: Optional[Program] = None,
                 parameter_list: Optional[Sequence[Any]] = None, no_grad_set: Any = None,
                 grad_clip: Optional[GradientClipBase] = None
                 ) -> Tuple[List[Operator], Pairs]:
        """Recomputing backward, then the wrapped optimizer's clip/regularize/update."""
        if self._checkpoints is None:
            raise ValueError("You should call _set_checkpoints first")
        grad_clip = _check_clip(grad_clip, "minimize()")
        params_grads = self.backward(loss, startup_program, parameter_list, no_grad_set)
        self._optimizer._minimize_clip = grad_clip
        try:
            ops = self.apply_optimize(loss, startup_program, params_grads)
        finally:
            self._optimizer._minimize_clip = None
        return ops, params_grads
