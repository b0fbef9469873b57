"""Optimizers (``fluid.optimizer``), fluid 1.8 semantics.

``minimize(loss)`` = ``backward`` (append_backward with ``error_clip_callback``) then
``apply_gradients``, which, in this order:

1. sorts the ``(param, grad)`` pairs by parameter name;
2. clips them: the optimizer's ``grad_clip`` (wins), else ``minimize(..., grad_clip=)``, else
   the legacy per-parameter clips (``set_gradient_clip`` / ``ParamAttr(gradient_clip=)``);
3. adds weight decay (``append_regularization_ops``), so the decay is never clipped;
4. creates the accumulators (persistable, initialised in the startup program, named
   ``<param>_<acc>_N`` as fluid) and the global learning rate (``learning_rate_N``), then
   appends one update op per trainable parameter in ``name_scope('optimizer')`` with op_role
   Optimize; a parameter with ``ParamAttr(learning_rate=r)``, r != 1, gets a ``scale`` op
   (op_role LRSched|Optimize) computing its learning rate.

``minimize`` returns ``(optimize_ops, params_grads)`` where ``params_grads`` are the raw
``(param, X@GRAD)`` pairs of the backward pass.

Each optimizer is declared by a table: its update op ``type``, its accumulators ``_accs``
(``Acc``: name, op slots, start value, shape [1] or the parameter's) and the op attrs
``_attrs`` set by its constructor; the base class creates the accumulators and appends the
update op. ModelAverage, ExponentialMovingAverage, LookaheadOptimizer and RecomputeOptimizer
live in ``optimizer_wrappers.py`` and are re-exported here.
"""
from __future__ import annotations

import logging
from collections import defaultdict
from typing import (TYPE_CHECKING, Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Set,
                    Tuple, Union)

import numpy as np

from .backward import append_backward
from .clip import GradientClipBase, append_gradient_clip_ops, append_tmp_op, error_clip_callback
from .core import names
from .core.dtypes import VarType
from .core.ir import (Block, Operator, Parameter, Program, Variable, default_main_program,
                      program_guard)
from .core.names import name_scope
from .initializer import Constant
from .layer_helper import LayerHelper
from .regularizer import append_regularization_ops, check_regularizer

if TYPE_CHECKING:      # re-exported at run time by __getattr__ (end of file)
    from .optimizer_wrappers import (ExponentialMovingAverage, LookaheadOptimizer,  # noqa: F401
                                     ModelAverage, RecomputeOptimizer)

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


def _check_set(**args: Any) -> None:
    """fluid's "<arg> is not set." for the first argument that is None."""
    for arg, value in args.items():
        if value is None:
            raise ValueError(f"{arg} is not set.")


class Acc(NamedTuple):
    """One accumulator of an update op: the persistable ``<param>_<name>_N``, read through
    input ``slot`` and written back through output ``out`` (None: the op only reads it).
    ``fill`` is its start value or a function of the optimizer giving it; a ``scalar``
    accumulator has shape [1], otherwise the parameter's shape."""
    name: str
    slot: str
    out: Optional[str]
    fill: Union[float, Callable[[Any], float]] = 0.0
    scalar: bool = False


class Optimizer:
    """Base class. ``learning_rate``: a float or a [1] Variable (e.g. a schedule from
    ``fluid.layers``); an int raises TypeError as in fluid.

    Subclasses declare ``type`` (the update op), ``_accs`` and set ``_attrs`` (plus
    ``_extra_inputs`` if any); override the hooks below only for what the table cannot say."""
    type: str
    _accs: Tuple[Acc, ...] = ()

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
        self._attrs: Dict[str, Any] = {}
        self._extra_inputs: Dict[str, Variable] = {}

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

    # -- the update op (hooks for subclasses) -----------------------------------------------
    def _create_accumulators(self, block: Block, parameters: List[Parameter]) -> None:
        """Every parameter's ``_accs``, in table order."""
        for p in parameters:
            for acc in self._accs:
                self._add_accumulator(
                    acc.name, p, fill_value=acc.fill(self) if callable(acc.fill) else acc.fill,
                    shape=[1] if acc.scalar else None,
                    type=VarType.LOD_TENSOR if acc.scalar else None)

    def _append_optimize_op(self, block: Block, param_and_grad: Tuple[Parameter, Variable]
                            ) -> Operator:
        """``ParamOut, <acc outs> = <type>(Param, Grad, LearningRate, <accs>, <extra inputs>)``
        with ``_op_attrs(param)``."""
        p, g = param_and_grad
        inputs = {"Param": p, "Grad": g, "LearningRate": self._create_param_lr(param_and_grad)}
        outputs = {"ParamOut": p}
        for acc in self._accs:
            var = inputs[acc.slot] = self._get_accumulator(acc.name, p)
            if acc.out is not None:
                outputs[acc.out] = var
        inputs.update(self._extra_inputs)
        return block.append_op(type=self.type, inputs=inputs, outputs=outputs,
                               attrs=self._op_attrs(p), stop_gradient=True)

    def _op_attrs(self, param: Parameter) -> Dict[str, Any]:
        """The update op's attrs for ``param`` (the constructor's ``_attrs`` by default)."""
        return self._attrs

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
    type = "sgd"


class MomentumOptimizer(Optimizer):
    """``v = mu * v + g``; ``p -= lr * v`` (Nesterov: ``p -= lr * (g + mu * v)``)."""
    type = "momentum"
    _accs = (Acc("velocity", "Velocity", "VelocityOut"),)

    def __init__(self, learning_rate: Union[float, Variable], momentum: float,
                 parameter_list: Optional[Sequence[Any]] = None, use_nesterov: bool = False,
                 regularization: Any = None, grad_clip: Optional[GradientClipBase] = None,
                 name: Optional[str] = None):
        _check_set(momentum=momentum)
        super().__init__(learning_rate, parameter_list, regularization, grad_clip, name)
        self._attrs = {"mu": float(momentum), "use_nesterov": bool(use_nesterov)}


class LarsMomentumOptimizer(Optimizer):
    """Momentum with a layer-wise local learning rate
    ``lr * lars_coeff * ||p|| / (||g|| + lars_weight_decay * ||p||)``."""
    type = "lars_momentum"
    _accs = MomentumOptimizer._accs

    def __init__(self, learning_rate: Union[float, Variable], momentum: float,
                 lars_coeff: float = 0.001, lars_weight_decay: float = 0.0005,
                 parameter_list: Optional[Sequence[Any]] = None, regularization: Any = None,
                 grad_clip: Optional[GradientClipBase] = None, name: Optional[str] = None):
        _check_set(momentum=momentum)
        super().__init__(learning_rate, parameter_list, regularization, grad_clip, name)
        self._attrs = {"mu": float(momentum), "lars_coeff": float(lars_coeff),
                       "lars_weight_decay": float(lars_weight_decay)}


class AdagradOptimizer(Optimizer):
    """``m += g^2``; ``p -= lr * g / (sqrt(m) + epsilon)``."""
    type = "adagrad"
    _accs = (Acc("moment", "Moment", "MomentOut", fill=lambda o: o.initial_accumulator_value),)

    def __init__(self, learning_rate: Union[float, Variable], epsilon: float = 1.0e-6,
                 parameter_list: Optional[Sequence[Any]] = None, regularization: Any = None,
                 grad_clip: Optional[GradientClipBase] = None, name: Optional[str] = None,
                 initial_accumulator_value: float = 0.0):
        _check_set(epsilon=epsilon)
        super().__init__(learning_rate, parameter_list, regularization, grad_clip, name)
        self._attrs = {"epsilon": float(epsilon)}
        self.initial_accumulator_value = float(initial_accumulator_value)


class AdamOptimizer(Optimizer):
    """Adam with fluid's in-op bias correction; ``beta1_pow_acc`` / ``beta2_pow_acc`` start at
    beta1 / beta2 and are advanced by the ``adam`` op itself. ``beta1``/``beta2`` may be [1]
    Variables (op inputs ``Beta1Tensor``/``Beta2Tensor``; their power accumulators then start
    at 0.9 / 0.999). ``lazy_mode`` is accepted; gradients are dense in fluidlite, so it changes
    nothing."""
    type = "adam"
    _accs = (Acc("moment1", "Moment1", "Moment1Out"), Acc("moment2", "Moment2", "Moment2Out"),
             Acc("beta1_pow_acc", "Beta1Pow", "Beta1PowOut", scalar=True,
                 fill=lambda o: 0.9 if isinstance(o._beta1, Variable) else o._beta1),
             Acc("beta2_pow_acc", "Beta2Pow", "Beta2PowOut", scalar=True,
                 fill=lambda o: 0.999 if isinstance(o._beta2, Variable) else o._beta2))

    def __init__(self, learning_rate: Union[float, Variable] = 0.001,
                 beta1: Union[float, Variable] = 0.9, beta2: Union[float, Variable] = 0.999,
                 epsilon: float = 1e-8, parameter_list: Optional[Sequence[Any]] = None,
                 regularization: Any = None, grad_clip: Optional[GradientClipBase] = None,
                 name: Optional[str] = None, lazy_mode: bool = False):
        _check_set(beta1=beta1, beta2=beta2, epsilon=epsilon)
        super().__init__(learning_rate, parameter_list, regularization, grad_clip, name)
        self._beta1 = beta1 if isinstance(beta1, Variable) else float(beta1)
        self._beta2 = beta2 if isinstance(beta2, Variable) else float(beta2)
        self._epsilon = float(epsilon)
        self._attrs = {"epsilon": self._epsilon, "lazy_mode": bool(lazy_mode),
                       "min_row_size_to_use_multithread": 1000}
        for key, beta in (("beta1", self._beta1), ("beta2", self._beta2)):
            if isinstance(beta, Variable):
                self._extra_inputs[key.capitalize() + "Tensor"] = beta
            else:
                self._attrs[key] = beta


class AdamaxOptimizer(Optimizer):
    """Adam with the infinity norm; ``beta1_pow_acc`` is advanced by a ``scale`` op per
    parameter after the updates (name_scope 'adamx', as fluid)."""
    type = "adamax"
    _accs = (Acc("moment", "Moment", "MomentOut"), Acc("inf_norm", "InfNorm", "InfNormOut"),
             Acc("beta1_pow_acc", "Beta1Pow", None, fill=lambda o: o._beta1, scalar=True))

    def __init__(self, learning_rate: Union[float, Variable] = 0.001, beta1: float = 0.9,
                 beta2: float = 0.999, epsilon: float = 1e-8,
                 parameter_list: Optional[Sequence[Any]] = None, regularization: Any = None,
                 grad_clip: Optional[GradientClipBase] = None, name: Optional[str] = None):
        _check_set(beta1=beta1, beta2=beta2, epsilon=epsilon)
        super().__init__(learning_rate, parameter_list, regularization, grad_clip, name)
        self._beta1 = float(beta1)
        self._attrs = {"beta1": self._beta1, "beta2": float(beta2), "epsilon": float(epsilon)}

    def _finish_update(self, block, parameters_and_grads):
        for p, g in parameters_and_grads:
            if g is None or not p.trainable:
                continue
            with p.block.program._optimized_guard([p, g]), name_scope("adamx"):
                b1p = self._get_accumulator("beta1_pow_acc", p)
                block.append_op(type="scale", inputs={"X": b1p}, outputs={"Out": b1p},
                                attrs={"scale": self._beta1}, stop_gradient=True)


class DecayedAdagradOptimizer(Optimizer):
    """``m = decay * m + (1 - decay) * g^2``; ``p -= lr * g / (sqrt(m) + epsilon)``."""
    type = "decayed_adagrad"
    _accs = (Acc("moment", "Moment", "MomentOut"),)

    def __init__(self, learning_rate: Union[float, Variable], decay: float = 0.95,
                 epsilon: float = 1.0e-6, parameter_list: Optional[Sequence[Any]] = None,
                 regularization: Any = None, grad_clip: Optional[GradientClipBase] = None,
                 name: Optional[str] = None):
        _check_set(decay=decay, epsilon=epsilon)
        super().__init__(learning_rate, parameter_list, regularization, grad_clip, name)
        self._attrs = {"decay": float(decay), "epsilon": float(epsilon)}


class AdadeltaOptimizer(Optimizer):
    """Adadelta; the update is scaled by the learning rate (fluid 1.8 ignored it, see
    docs/compatibility.md: pass learning_rate=1.0 for 1.8's numbers)."""
    type = "adadelta"
    _accs = (Acc("_avg_squared_grad", "AvgSquaredGrad", "AvgSquaredGradOut"),
             Acc("_avg_squared_update", "AvgSquaredUpdate", "AvgSquaredUpdateOut"))

    def __init__(self, learning_rate: Union[float, Variable], epsilon: float = 1.0e-6,
                 rho: float = 0.95, parameter_list: Optional[Sequence[Any]] = None,
                 regularization: Any = None, grad_clip: Optional[GradientClipBase] = None,
                 name: Optional[str] = None):
        _check_set(learning_rate=learning_rate, epsilon=epsilon, rho=rho)
        super().__init__(learning_rate, parameter_list, regularization, grad_clip, name)
        self._attrs = {"epsilon": float(epsilon), "rho": float(rho)}


class RMSPropOptimizer(Optimizer):
    """``ms = rho*ms + (1-rho)*g^2``; ``mom = momentum*mom + lr*g/sqrt(ms + eps)`` (centered:
    ``sqrt(ms - mg^2 + eps)`` with ``mg = rho*mg + (1-rho)*g``); ``p -= mom``."""
    type = "rmsprop"
    _accs = (Acc("momentum", "Moment", "MomentOut"),
             Acc("mean_square", "MeanSquare", "MeanSquareOut"),
             Acc("mean_grad", "MeanGrad", "MeanGradOut"))

    def __init__(self, learning_rate: Union[float, Variable], rho: float = 0.95,
                 epsilon: float = 1.0e-6, momentum: float = 0.0, centered: bool = False,
                 parameter_list: Optional[Sequence[Any]] = None, regularization: Any = None,
                 grad_clip: Optional[GradientClipBase] = None, name: Optional[str] = None):
        _check_set(learning_rate=learning_rate, rho=rho, epsilon=epsilon, momentum=momentum)
        super().__init__(learning_rate, parameter_list, regularization, grad_clip, name)
        self._attrs = {"epsilon": float(epsilon), "decay": float(rho),
                       "momentum": float(momentum), "centered": bool(centered)}


class FtrlOptimizer(Optimizer):
    """FTRL-Proximal. ``l2`` is passed to the op as ``l2`` (fluid 1.8 passed ``l1`` there, see
    docs/compatibility.md)."""
    type = "ftrl"
    _accs = (Acc("squared", "SquaredAccumulator", "SquaredAccumOut"),
             Acc("linear", "LinearAccumulator", "LinearAccumOut"))

    def __init__(self, learning_rate: Union[float, Variable], l1: float = 0.0, l2: float = 0.0,
                 lr_power: float = -0.5, parameter_list: Optional[Sequence[Any]] = None,
                 regularization: Any = None, grad_clip: Optional[GradientClipBase] = None,
                 name: Optional[str] = None):
        super().__init__(learning_rate, parameter_list, regularization, grad_clip, name)
        self._attrs = {"l1": float(l1), "l2": float(l2), "lr_power": float(lr_power)}


class LambOptimizer(AdamOptimizer):
    """LAMB (layer-wise adaptive moments); ``exclude_from_weight_decay_fn(param) -> bool``
    turns the decay off for the parameters it selects (e.g. biases, norms). The ``lamb`` op
    only reads the beta powers (no bias correction, as fluid 1.8)."""
    type = "lamb"
    _accs = AdamOptimizer._accs[:2] + tuple(acc._replace(out=None)
                                            for acc in AdamOptimizer._accs[2:])

    def __init__(self, learning_rate: Union[float, Variable] = 0.001,
                 lamb_weight_decay: float = 0.01, beta1: float = 0.9, beta2: float = 0.999,
                 epsilon: float = 1e-6, parameter_list: Optional[Sequence[Any]] = None,
                 regularization: Any = None, grad_clip: Optional[GradientClipBase] = None,
                 exclude_from_weight_decay_fn: Optional[Callable[[Parameter], bool]] = None,
                 name: Optional[str] = None):
        _check_set(lamb_weight_decay=lamb_weight_decay)
        if exclude_from_weight_decay_fn is not None and not callable(exclude_from_weight_decay_fn):
            raise TypeError(f"exclude_from_weight_decay_fn must be None or a function of a "
                            f"Parameter, but received {exclude_from_weight_decay_fn!r}")
        super().__init__(learning_rate, beta1, beta2, epsilon, parameter_list, regularization,
                         grad_clip, name)
        self._weight_decay = float(lamb_weight_decay)
        self._exclude_from_weight_decay_fn = exclude_from_weight_decay_fn
        self._attrs = {"beta1": self._beta1, "beta2": self._beta2, "epsilon": self._epsilon}
        self._extra_inputs = {}      # lamb has no Beta*Tensor inputs: its betas are attrs

    def _op_attrs(self, param):
        excluded = self._exclude_from_weight_decay_fn is not None and \
            self._exclude_from_weight_decay_fn(param)
        return dict(self._attrs, weight_decay=0.0 if excluded else self._weight_decay)


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

# The averaging and wrapping optimizers build on Optimizer (and that module imports this one),
# so they are re-exported on first use, as fluidlite/__init__.py does for its submodules.
_WRAPPERS = ("ModelAverage", "ExponentialMovingAverage", "LookaheadOptimizer",
             "RecomputeOptimizer")


def __getattr__(name: str) -> Any:
    if name in _WRAPPERS:
        from . import optimizer_wrappers
        return getattr(optimizer_wrappers, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> List[str]:
    return sorted(set(globals()) | set(_WRAPPERS))
