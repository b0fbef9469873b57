"""The table of fluid 1.8's update-rule optimizers (SGD, Momentum, Adam, ...).

Each optimizer is a table on top of ``base.Optimizer`` (the pass: backward, clip,
regularization, update ops; see that module): its update op ``type``, its accumulators ``_accs``
and the op attrs ``_attrs`` set by its constructor, whose hyper-parameters are range-checked.
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence, Union

from ..clip import GradientClipBase
from ..core import rewrite
from ..core.ir import OpRole, Parameter, Variable
from .base import Acc, Optimizer, _check_set, _hyper, _positive, _unit

__all__ = ["SGD", "Momentum", "Adagrad", "Adam", "Adamax", "DecayedAdagrad", "Adadelta",
           "RMSProp", "Ftrl", "Lamb", "LarsMomentum", "SGDOptimizer", "MomentumOptimizer",
           "AdagradOptimizer", "AdamOptimizer", "AdamaxOptimizer", "DecayedAdagradOptimizer",
           "AdadeltaOptimizer", "RMSPropOptimizer", "FtrlOptimizer", "LambOptimizer",
           "LarsMomentumOptimizer"]


# -- the optimizers ---------------------------------------------------------------------------
class SGDOptimizer(Optimizer):
    """``param -= lr * grad``.

    Args:
        learning_rate (float | Variable): the step size (a Variable for a schedule).
        parameter_list (list | None): the parameters to update (required in dygraph mode).
        regularization (WeightDecayRegularizer | None): e.g. ``L2Decay(1e-4)`` for every
            parameter without its own.
        grad_clip (GradientClipBase | None): e.g. ``GradientClipByGlobalNorm(1.0)``.
        name (str | None): name prefix of the optimizer's variables.
    Returns:
        SGDOptimizer: the optimizer; ``minimize(loss)`` appends its update ops and returns
        ``(optimize_ops, params_grads)``.
    Raises:
        TypeError: ``learning_rate`` is not a float or Variable (e.g. an int), ``regularization``
            is not a regularizer instance or ``grad_clip`` is not a ``GradientClipBase``.
        ValueError: ``learning_rate`` is negative or not finite.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 2])
        ...     y = fluid.data("y", [-1, 1])
        ...     pred = fluid.layers.fc(x, size=1, param_attr=fluid.ParamAttr(
        ...         name="w", initializer=fluid.initializer.Constant(1.0)), bias_attr=False)
        ...     loss = fluid.layers.mean(fluid.layers.square_error_cost(pred, y))
        ...     _ = fluid.optimizer.SGD(learning_rate=0.1).minimize(loss)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> feed = {"x": np.array([[1, 2]], "float32"), "y": np.array([[1]], "float32")}
        >>> _ = exe.run(main, feed=feed, fetch_list=[loss])
        >>> fluid.global_scope().find_var("w").get_tensor().__array__().ravel().round(4)
        array([0.6, 0.2], dtype=float32)
    """
    type = "sgd"


class MomentumOptimizer(Optimizer):
    """``v = mu * v + g``; ``p -= lr * v`` (Nesterov: ``p -= lr * (g + mu * v)``).

    Args:
        learning_rate (float | Variable): the step size.
        momentum (float): the decay ``mu`` of the velocity, in [0, 1).
        parameter_list (list | None): the parameters to update (required in dygraph mode).
        use_nesterov (bool, default False): Nesterov's update.
        regularization (WeightDecayRegularizer | None): weight decay for every parameter
            without its own.
        grad_clip (GradientClipBase | None): the gradient clip.
        name (str | None): name prefix of the optimizer's variables.
    Returns:
        MomentumOptimizer: the optimizer; ``minimize(loss)`` appends its update ops and returns
        ``(optimize_ops, params_grads)``.
    Raises:
        TypeError: ``learning_rate`` is not a float or Variable (e.g. an int), ``regularization``
            is not a regularizer instance or ``grad_clip`` is not a ``GradientClipBase``.
        ValueError: ``momentum`` is None, negative or not finite, or ``learning_rate`` is
            negative.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 2])
        ...     y = fluid.data("y", [-1, 1])
        ...     pred = fluid.layers.fc(x, size=1, param_attr=fluid.ParamAttr(
        ...         name="w", initializer=fluid.initializer.Constant(1.0)), bias_attr=False)
        ...     loss = fluid.layers.mean(fluid.layers.square_error_cost(pred, y))
        ...     _ = fluid.optimizer.Momentum(learning_rate=0.1, momentum=0.9).minimize(loss)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> feed = {"x": np.array([[1, 2]], "float32"), "y": np.array([[1]], "float32")}
        >>> _ = exe.run(main, feed=feed, fetch_list=[loss])
        >>> fluid.global_scope().find_var("w").get_tensor().__array__().ravel().round(4)
        array([0.6, 0.2], dtype=float32)
    """
    type = "momentum"
    _accs = (Acc("velocity", "Velocity", "VelocityOut"),)

    def __init__(self, learning_rate: Union[float, Variable], momentum: float,
                 parameter_list: Optional[Sequence[Any]] = None, use_nesterov: bool = False,
                 regularization: Any = None, grad_clip: Optional[GradientClipBase] = None,
                 name: Optional[str] = None):
        _check_set(momentum=momentum)
        super().__init__(learning_rate, parameter_list, regularization, grad_clip, name)
        self._attrs = {"mu": _hyper("Momentum", "momentum", momentum, 0.0),
                       "use_nesterov": bool(use_nesterov)}


class LarsMomentumOptimizer(Optimizer):
    """Momentum with a layer-wise local learning rate
    ``lr * lars_coeff * ||p|| / (||g|| + lars_weight_decay * ||p||)``.

    Args:
        learning_rate (float | Variable): the global step size.
        momentum (float): the velocity's decay.
        lars_coeff (float, default 0.001): the trust coefficient of the layer-wise rate.
        lars_weight_decay (float, default 0.0005): the weight decay inside the LARS rate.
        parameter_list (list | None): the parameters to update (required in dygraph mode).
        regularization (WeightDecayRegularizer | None): weight decay for every parameter
            without its own.
        grad_clip (GradientClipBase | None): the gradient clip.
        name (str | None): name prefix of the optimizer's variables.
    Returns:
        LarsMomentumOptimizer: the optimizer; ``minimize(loss)`` appends its update ops and returns
        ``(optimize_ops, params_grads)``.
    Raises:
        TypeError: ``learning_rate`` is not a float or Variable (e.g. an int), ``regularization``
            is not a regularizer instance or ``grad_clip`` is not a ``GradientClipBase``.
        ValueError: ``momentum`` is None, or ``momentum``, ``lars_coeff``,
            ``lars_weight_decay`` or ``learning_rate`` is negative or not finite.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 2])
        ...     pred = fluid.layers.fc(x, size=1, param_attr=fluid.ParamAttr(
        ...         name="w", initializer=fluid.initializer.Constant(1.0)), bias_attr=False)
        ...     loss = fluid.layers.mean(pred)
        ...     _ = fluid.optimizer.LarsMomentum(learning_rate=0.1, momentum=0.9).minimize(loss)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> for step in range(3):
        ...     l, = exe.run(main, feed={"x": np.ones((4, 2), "float32")}, fetch_list=[loss])
        ...     print(step, l.round(4))
        0 [2.]
        1 [1.9998]
        2 [1.9994]
    """
    type = "lars_momentum"
    _accs = MomentumOptimizer._accs

    def __init__(self, learning_rate: Union[float, Variable], momentum: float,
                 lars_coeff: float = 0.001, lars_weight_decay: float = 0.0005,
                 parameter_list: Optional[Sequence[Any]] = None, regularization: Any = None,
                 grad_clip: Optional[GradientClipBase] = None, name: Optional[str] = None):
        _check_set(momentum=momentum)
        super().__init__(learning_rate, parameter_list, regularization, grad_clip, name)
        owner = "LarsMomentum"
        self._attrs = {"mu": _hyper(owner, "momentum", momentum, 0.0),
                       "lars_coeff": _hyper(owner, "lars_coeff", lars_coeff, 0.0),
                       "lars_weight_decay": _hyper(owner, "lars_weight_decay",
                                                   lars_weight_decay, 0.0)}


class AdagradOptimizer(Optimizer):
    """``m += g^2``; ``p -= lr * g / (sqrt(m) + epsilon)``.

    Args:
        learning_rate (float | Variable): the step size.
        epsilon (float, default 1e-6): added to the denominator.
        parameter_list (list | None): the parameters to update (required in dygraph mode).
        regularization (WeightDecayRegularizer | None): weight decay for every parameter
            without its own.
        grad_clip (GradientClipBase | None): the gradient clip.
        name (str | None): name prefix of the optimizer's variables.
        initial_accumulator_value (float, default 0.0): the accumulator's start value.
    Returns:
        AdagradOptimizer: the optimizer; ``minimize(loss)`` appends its update ops and returns
        ``(optimize_ops, params_grads)``.
    Raises:
        TypeError: ``learning_rate`` is not a float or Variable (e.g. an int), ``regularization``
            is not a regularizer instance or ``grad_clip`` is not a ``GradientClipBase``.
        ValueError: ``epsilon`` is None or not positive, ``initial_accumulator_value`` or
            ``learning_rate`` is negative or not finite.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 2])
        ...     y = fluid.data("y", [-1, 1])
        ...     pred = fluid.layers.fc(x, size=1, param_attr=fluid.ParamAttr(
        ...         name="w", initializer=fluid.initializer.Constant(1.0)), bias_attr=False)
        ...     loss = fluid.layers.mean(fluid.layers.square_error_cost(pred, y))
        ...     _ = fluid.optimizer.Adagrad(learning_rate=0.1).minimize(loss)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> feed = {"x": np.array([[1, 2]], "float32"), "y": np.array([[1]], "float32")}
        >>> _ = exe.run(main, feed=feed, fetch_list=[loss])
        >>> fluid.global_scope().find_var("w").get_tensor().__array__().ravel().round(4)
        array([0.9, 0.9], dtype=float32)
    """
    type = "adagrad"
    _accs = (Acc("moment", "Moment", "MomentOut", fill=lambda o: o.initial_accumulator_value),)

    def __init__(self, learning_rate: Union[float, Variable], epsilon: float = 1.0e-6,
                 parameter_list: Optional[Sequence[Any]] = None, regularization: Any = None,
                 grad_clip: Optional[GradientClipBase] = None, name: Optional[str] = None,
                 initial_accumulator_value: float = 0.0):
        _check_set(epsilon=epsilon)
        super().__init__(learning_rate, parameter_list, regularization, grad_clip, name)
        self._attrs = {"epsilon": _positive("Adagrad", "epsilon", epsilon)}
        self.initial_accumulator_value = _hyper("Adagrad", "initial_accumulator_value",
                                                initial_accumulator_value, 0.0)


class AdamOptimizer(Optimizer):
    """Adam with fluid's in-op bias correction; ``beta1_pow_acc`` / ``beta2_pow_acc`` start at
    beta1 / beta2 and are advanced by the ``adam`` op itself. ``beta1``/``beta2`` may be [1]
    Variables (op inputs ``Beta1Tensor``/``Beta2Tensor``; their power accumulators then start
    at 0.9 / 0.999). ``lazy_mode`` is accepted; gradients are dense in fluidlite, so it changes
    nothing.

    Args:
        learning_rate (float | Variable, default 0.001): the step size.
        beta1 (float | Variable, default 0.9): the first moment's decay.
        beta2 (float | Variable, default 0.999): the second moment's decay.
        epsilon (float, default 1e-8): added to the denominator.
        parameter_list (list | None): the parameters to update (required in dygraph mode).
        regularization (WeightDecayRegularizer | None): weight decay for every parameter
            without its own.
        grad_clip (GradientClipBase | None): the gradient clip.
        name (str | None): name prefix of the optimizer's variables.
        lazy_mode (bool, default False): accepted (gradients are dense).
    Returns:
        AdamOptimizer: the optimizer; ``minimize(loss)`` appends its update ops and returns
        ``(optimize_ops, params_grads)``.
    Raises:
        TypeError: ``learning_rate`` is not a float or Variable (e.g. an int), ``regularization``
            is not a regularizer instance or ``grad_clip`` is not a ``GradientClipBase``.
        ValueError: ``beta1``/``beta2`` (floats) are None or outside [0, 1), ``epsilon`` is
            not positive or ``learning_rate`` is negative.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 2])
        ...     y = fluid.data("y", [-1, 1])
        ...     pred = fluid.layers.fc(x, size=1, param_attr=fluid.ParamAttr(
        ...         name="w", initializer=fluid.initializer.Constant(1.0)), bias_attr=False)
        ...     loss = fluid.layers.mean(fluid.layers.square_error_cost(pred, y))
        ...     _ = fluid.optimizer.Adam(learning_rate=0.01).minimize(loss)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> feed = {"x": np.array([[1, 2]], "float32"), "y": np.array([[1]], "float32")}
        >>> _ = exe.run(main, feed=feed, fetch_list=[loss])
        >>> # the first step moves each weight by about lr
        >>> fluid.global_scope().find_var("w").get_tensor().__array__().ravel().round(4)
        array([0.99, 0.99], dtype=float32)
    """
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
        owner = type(self).__name__.replace("Optimizer", "")
        self._beta1 = beta1 if isinstance(beta1, Variable) else _unit(owner, "beta1", beta1)
        self._beta2 = beta2 if isinstance(beta2, Variable) else _unit(owner, "beta2", beta2)
        self._epsilon = _positive(owner, "epsilon", epsilon)
        self._attrs = {"epsilon": self._epsilon, "lazy_mode": bool(lazy_mode),
                       "min_row_size_to_use_multithread": 1000}
        for key, beta in (("beta1", self._beta1), ("beta2", self._beta2)):
            if isinstance(beta, Variable):
                self._extra_inputs[key.capitalize() + "Tensor"] = beta
            else:
                self._attrs[key] = beta


class AdamaxOptimizer(Optimizer):
    """Adam with the infinity norm; ``beta1_pow_acc`` is advanced by a ``scale`` op per
    parameter after the updates (name_scope 'adamx', as fluid).

    Args:
        learning_rate (float | Variable, default 0.001): the step size.
        beta1 (float, default 0.9): the first moment's decay.
        beta2 (float, default 0.999): the infinity norm's decay.
        epsilon (float, default 1e-8): added to the denominator.
        parameter_list (list | None): the parameters to update (required in dygraph mode).
        regularization (WeightDecayRegularizer | None): weight decay for every parameter
            without its own.
        grad_clip (GradientClipBase | None): the gradient clip.
        name (str | None): name prefix of the optimizer's variables.
    Returns:
        AdamaxOptimizer: the optimizer; ``minimize(loss)`` appends its update ops and returns
        ``(optimize_ops, params_grads)``.
    Raises:
        TypeError: ``learning_rate`` is not a float or Variable (e.g. an int), ``regularization``
            is not a regularizer instance or ``grad_clip`` is not a ``GradientClipBase``.
        ValueError: ``beta1``/``beta2`` are None or outside [0, 1), ``epsilon`` is not
            positive or ``learning_rate`` is negative.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 2])
        ...     pred = fluid.layers.fc(x, size=1, param_attr=fluid.ParamAttr(
        ...         name="w", initializer=fluid.initializer.Constant(1.0)), bias_attr=False)
        ...     loss = fluid.layers.mean(pred)
        ...     _ = fluid.optimizer.Adamax(learning_rate=0.1).minimize(loss)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> for step in range(3):
        ...     l, = exe.run(main, feed={"x": np.ones((4, 2), "float32")}, fetch_list=[loss])
        ...     print(step, l.round(4))
        0 [2.]
        1 [1.8]
        2 [1.6]
    """
    type = "adamax"
    _accs = (Acc("moment", "Moment", "MomentOut"), Acc("inf_norm", "InfNorm", "InfNormOut"),
             Acc("beta1_pow_acc", "Beta1Pow", None, fill=lambda o: o._beta1, scalar=True))

    def __init__(self, learning_rate: Union[float, Variable] = 0.001, beta1: float = 0.9,
                 beta2: float = 0.999, epsilon: float = 1e-8,
                 parameter_list: Optional[Sequence[Any]] = None, regularization: Any = None,
                 grad_clip: Optional[GradientClipBase] = None, name: Optional[str] = None):
        _check_set(beta1=beta1, beta2=beta2, epsilon=epsilon)
        super().__init__(learning_rate, parameter_list, regularization, grad_clip, name)
        self._beta1 = _unit("Adamax", "beta1", beta1)
        self._attrs = {"beta1": self._beta1, "beta2": _unit("Adamax", "beta2", beta2),
                       "epsilon": _positive("Adamax", "epsilon", epsilon)}

    def _finish_update(self, block, parameters_and_grads):
        for p, g in parameters_and_grads:
            if g is None or not p.trainable:
                continue
            with rewrite.role(block.program, OpRole.Optimize, [p, g], name_scope="adamx"):
                b1p = self._get_accumulator("beta1_pow_acc", p)
                rewrite.append(block, "scale", {"X": b1p}, {"Out": b1p}, {"scale": self._beta1})


class DecayedAdagradOptimizer(Optimizer):
    """``m = decay * m + (1 - decay) * g^2``; ``p -= lr * g / (sqrt(m) + epsilon)``.

    Args:
        learning_rate (float | Variable): the step size.
        decay (float, default 0.95): the accumulator's decay.
        epsilon (float, default 1e-6): added to the denominator.
        parameter_list (list | None): the parameters to update (required in dygraph mode).
        regularization (WeightDecayRegularizer | None): weight decay for every parameter
            without its own.
        grad_clip (GradientClipBase | None): the gradient clip.
        name (str | None): name prefix of the optimizer's variables.
    Returns:
        DecayedAdagradOptimizer: the optimizer; ``minimize(loss)`` appends its update ops and
        returns ``(optimize_ops, params_grads)``.
    Raises:
        TypeError: ``learning_rate`` is not a float or Variable (e.g. an int), ``regularization``
            is not a regularizer instance or ``grad_clip`` is not a ``GradientClipBase``.
        ValueError: ``decay`` is None or outside [0, 1], ``epsilon`` is not positive or
            ``learning_rate`` is negative.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 2])
        ...     pred = fluid.layers.fc(x, size=1, param_attr=fluid.ParamAttr(
        ...         name="w", initializer=fluid.initializer.Constant(1.0)), bias_attr=False)
        ...     loss = fluid.layers.mean(pred)
        ...     _ = fluid.optimizer.DecayedAdagrad(learning_rate=0.1).minimize(loss)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> for step in range(3):
        ...     l, = exe.run(main, feed={"x": np.ones((4, 2), "float32")}, fetch_list=[loss])
        ...     print(step, l.round(4))
        0 [2.]
        1 [1.1056]
        2 [0.4651]
    """
    type = "decayed_adagrad"
    _accs = (Acc("moment", "Moment", "MomentOut"),)

    def __init__(self, learning_rate: Union[float, Variable], decay: float = 0.95,
                 epsilon: float = 1.0e-6, parameter_list: Optional[Sequence[Any]] = None,
                 regularization: Any = None, grad_clip: Optional[GradientClipBase] = None,
                 name: Optional[str] = None):
        _check_set(decay=decay, epsilon=epsilon)
        super().__init__(learning_rate, parameter_list, regularization, grad_clip, name)
        self._attrs = {"decay": _unit("DecayedAdagrad", "decay", decay, closed=True),
                       "epsilon": _positive("DecayedAdagrad", "epsilon", epsilon)}


class AdadeltaOptimizer(Optimizer):
    """Adadelta; the update is scaled by the learning rate (fluid 1.8 ignored it, see
    docs/compatibility.md: pass learning_rate=1.0 for 1.8's numbers).

    Args:
        learning_rate (float | Variable): the step size (scales the update, see the deviation
            note).
        epsilon (float, default 1e-6): added inside the square roots.
        rho (float, default 0.95): the averages' decay.
        parameter_list (list | None): the parameters to update (required in dygraph mode).
        regularization (WeightDecayRegularizer | None): weight decay for every parameter
            without its own.
        grad_clip (GradientClipBase | None): the gradient clip.
        name (str | None): name prefix of the optimizer's variables.
    Returns:
        AdadeltaOptimizer: the optimizer; ``minimize(loss)`` appends its update ops and returns
        ``(optimize_ops, params_grads)``.
    Raises:
        TypeError: ``learning_rate`` is not a float or Variable (e.g. an int), ``regularization``
            is not a regularizer instance or ``grad_clip`` is not a ``GradientClipBase``.
        ValueError: ``learning_rate``, ``epsilon`` or ``rho`` is None, ``epsilon`` is not
            positive, ``rho`` is outside [0, 1] or ``learning_rate`` is negative.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 2])
        ...     pred = fluid.layers.fc(x, size=1, param_attr=fluid.ParamAttr(
        ...         name="w", initializer=fluid.initializer.Constant(1.0)), bias_attr=False)
        ...     loss = fluid.layers.mean(pred)
        ...     _ = fluid.optimizer.Adadelta(learning_rate=1.0, epsilon=1e-6, rho=0.95).minimize(loss)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> for step in range(3):
        ...     l, = exe.run(main, feed={"x": np.ones((4, 2), "float32")}, fetch_list=[loss])
        ...     print(step, l.round(4))
        0 [2.]
        1 [1.9911]
        2 [1.982]
    """
    type = "adadelta"
    _accs = (Acc("_avg_squared_grad", "AvgSquaredGrad", "AvgSquaredGradOut"),
             Acc("_avg_squared_update", "AvgSquaredUpdate", "AvgSquaredUpdateOut"))

    def __init__(self, learning_rate: Union[float, Variable], epsilon: float = 1.0e-6,
                 rho: float = 0.95, parameter_list: Optional[Sequence[Any]] = None,
                 regularization: Any = None, grad_clip: Optional[GradientClipBase] = None,
                 name: Optional[str] = None):
        _check_set(learning_rate=learning_rate, epsilon=epsilon, rho=rho)
        super().__init__(learning_rate, parameter_list, regularization, grad_clip, name)
        self._attrs = {"epsilon": _positive("Adadelta", "epsilon", epsilon),
                       "rho": _unit("Adadelta", "rho", rho, closed=True)}


class RMSPropOptimizer(Optimizer):
    """``ms = rho*ms + (1-rho)*g^2``; ``mom = momentum*mom + lr*g/sqrt(ms + eps)`` (centered:
    ``sqrt(ms - mg^2 + eps)`` with ``mg = rho*mg + (1-rho)*g``); ``p -= mom``.

    Args:
        learning_rate (float | Variable): the step size.
        rho (float, default 0.95): the mean square's decay.
        epsilon (float, default 1e-6): added inside the square root.
        momentum (float, default 0.0): momentum of the update.
        centered (bool, default False): normalize by the variance (subtract the mean gradient).
        parameter_list (list | None): the parameters to update (required in dygraph mode).
        regularization (WeightDecayRegularizer | None): weight decay for every parameter
            without its own.
        grad_clip (GradientClipBase | None): the gradient clip.
        name (str | None): name prefix of the optimizer's variables.
    Returns:
        RMSPropOptimizer: the optimizer; ``minimize(loss)`` appends its update ops and returns
        ``(optimize_ops, params_grads)``.
    Raises:
        TypeError: ``learning_rate`` is not a float or Variable (e.g. an int), ``regularization``
            is not a regularizer instance or ``grad_clip`` is not a ``GradientClipBase``.
        ValueError: an argument is None, ``epsilon`` is not positive, ``rho`` is outside
            [0, 1], or ``momentum`` or ``learning_rate`` is negative.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 2])
        ...     y = fluid.data("y", [-1, 1])
        ...     pred = fluid.layers.fc(x, size=1, param_attr=fluid.ParamAttr(
        ...         name="w", initializer=fluid.initializer.Constant(1.0)), bias_attr=False)
        ...     loss = fluid.layers.mean(fluid.layers.square_error_cost(pred, y))
        ...     _ = fluid.optimizer.RMSProp(learning_rate=0.01, rho=0.9).minimize(loss)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> feed = {"x": np.array([[1, 2]], "float32"), "y": np.array([[1]], "float32")}
        >>> _ = exe.run(main, feed=feed, fetch_list=[loss])
        >>> fluid.global_scope().find_var("w").get_tensor().__array__().ravel().round(4)
        array([0.9684, 0.9684], dtype=float32)
    """
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
        self._attrs = {"epsilon": _positive("RMSProp", "epsilon", epsilon),
                       "decay": _unit("RMSProp", "rho", rho, closed=True),
                       "momentum": _hyper("RMSProp", "momentum", momentum, 0.0),
                       "centered": bool(centered)}


class FtrlOptimizer(Optimizer):
    """FTRL-Proximal. ``l2`` is passed to the op as ``l2`` (fluid 1.8 passed ``l1`` there, see
    docs/compatibility.md).

    Args:
        learning_rate (float | Variable): the step size.
        l1 (float, default 0.0): L1 regularization strength.
        l2 (float, default 0.0): L2 regularization strength.
        lr_power (float, default -0.5): the learning-rate power.
        parameter_list (list | None): the parameters to update (required in dygraph mode).
        regularization (WeightDecayRegularizer | None): weight decay for every parameter
            without its own.
        grad_clip (GradientClipBase | None): the gradient clip.
        name (str | None): name prefix of the optimizer's variables.
    Returns:
        FtrlOptimizer: the optimizer; ``minimize(loss)`` appends its update ops and returns
        ``(optimize_ops, params_grads)``.
    Raises:
        TypeError: ``learning_rate`` is not a float or Variable (e.g. an int), ``regularization``
            is not a regularizer instance or ``grad_clip`` is not a ``GradientClipBase``.
        ValueError: ``l1`` or ``l2`` is negative, ``lr_power`` is positive, or
            ``learning_rate`` is negative (or any of them is not finite).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 2])
        ...     pred = fluid.layers.fc(x, size=1, param_attr=fluid.ParamAttr(
        ...         name="w", initializer=fluid.initializer.Constant(1.0)), bias_attr=False)
        ...     loss = fluid.layers.mean(pred)
        ...     _ = fluid.optimizer.Ftrl(learning_rate=0.1).minimize(loss)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> for step in range(3):
        ...     l, = exe.run(main, feed={"x": np.ones((4, 2), "float32")}, fetch_list=[loss])
        ...     print(step, l.round(4))
        0 [2.]
        1 [1.8]
        2 [1.6586]
    """
    type = "ftrl"
    _accs = (Acc("squared", "SquaredAccumulator", "SquaredAccumOut"),
             Acc("linear", "LinearAccumulator", "LinearAccumOut"))

    def __init__(self, learning_rate: Union[float, Variable], l1: float = 0.0, l2: float = 0.0,
                 lr_power: float = -0.5, parameter_list: Optional[Sequence[Any]] = None,
                 regularization: Any = None, grad_clip: Optional[GradientClipBase] = None,
                 name: Optional[str] = None):
        super().__init__(learning_rate, parameter_list, regularization, grad_clip, name)
        self._attrs = {"l1": _hyper("Ftrl", "l1", l1, 0.0), "l2": _hyper("Ftrl", "l2", l2, 0.0),
                       "lr_power": _hyper("Ftrl", "lr_power", lr_power, high=0.0)}


class LambOptimizer(AdamOptimizer):
    """LAMB (layer-wise adaptive moments); ``exclude_from_weight_decay_fn(param) -> bool``
    turns the decay off for the parameters it selects (e.g. biases, norms). The ``lamb`` op
    only reads the beta powers (no bias correction, as fluid 1.8).

    Args:
        learning_rate (float | Variable, default 0.001): the step size.
        lamb_weight_decay (float, default 0.01): the decoupled weight decay.
        beta1 (float, default 0.9): the first moment's decay.
        beta2 (float, default 0.999): the second moment's decay.
        epsilon (float, default 1e-6): added to the denominator.
        parameter_list (list | None): the parameters to update (required in dygraph mode).
        regularization (WeightDecayRegularizer | None): weight decay for every parameter
            without its own.
        grad_clip (GradientClipBase | None): the gradient clip.
        exclude_from_weight_decay_fn (callable | None): ``fn(param) -> bool``: no weight
            decay for the parameters it selects.
        name (str | None): name prefix of the optimizer's variables.
    Returns:
        LambOptimizer: the optimizer; ``minimize(loss)`` appends its update ops and returns
        ``(optimize_ops, params_grads)``.
    Raises:
        TypeError: ``learning_rate`` is not a float or Variable (e.g. an int), ``regularization``
            is not a regularizer instance or ``grad_clip`` is not a ``GradientClipBase``.
        TypeError: ``exclude_from_weight_decay_fn`` is neither None nor callable.
        ValueError: ``lamb_weight_decay`` is None or negative, ``beta1``/``beta2`` are
            outside [0, 1), ``epsilon`` is not positive or ``learning_rate`` is negative.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 2])
        ...     pred = fluid.layers.fc(x, size=1, param_attr=fluid.ParamAttr(
        ...         name="w", initializer=fluid.initializer.Constant(1.0)), bias_attr=False)
        ...     loss = fluid.layers.mean(pred)
        ...     _ = fluid.optimizer.Lamb(learning_rate=0.1).minimize(loss)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> for step in range(3):
        ...     l, = exe.run(main, feed={"x": np.ones((4, 2), "float32")}, fetch_list=[loss])
        ...     print(step, l.round(4))
        0 [2.]
        1 [1.8]
        2 [1.62]
    """
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
        self._weight_decay = _hyper("Lamb", "lamb_weight_decay", lamb_weight_decay, 0.0)
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

