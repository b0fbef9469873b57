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
           "LookaheadOptimizer", "Optimizer"]

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
