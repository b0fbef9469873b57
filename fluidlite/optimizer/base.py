"""The optimizer pass (``Optimizer`` base class of ``fluid.optimizer``), fluid 1.8 semantics.

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

Each optimizer (``optimizer.py``) is declared by a table: its update op ``type``, its
accumulators ``_accs`` (``Acc``: name, op slots, start value, shape [1] or the parameter's) and
the op attrs ``_attrs`` set by its constructor; this base class creates the accumulators and
appends the update op. Every op is created with the rewrite verbs inside a role context
(``core/rewrite.py``); ``minimize`` is one build transaction: on any error the main and startup
programs are left exactly as they were.
"""
from __future__ import annotations

import logging
import math
import numbers
import warnings
from collections import defaultdict
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Set, Tuple, Union

import numpy as np

from ..backward import _no_grad_names, append_backward
from ..clip import GradientClipBase, append_gradient_clip_ops, error_clip_callback
from ..core import mode as _mode, names, rewrite
from ..core.dtypes import VarType
from ..core.ir import (Block, Operator, OpRole, Parameter, Program, Variable,
                      default_main_program, default_startup_program, program_guard)
from ..regularizer import append_regularization_ops, check_regularizer

__all__ = ["Optimizer", "Acc"]

_log = logging.getLogger("fluidlite")
Pairs = List[Tuple[Parameter, Optional[Variable]]]


def _create_global_var(name: str, shape: Sequence[int], value: float, dtype: Any,
                       persistable: bool = True, **flags: Any) -> Variable:
    """A global variable of the default main program, initialised to ``value`` in the default
    startup program (fluid's ``layers.create_global_var``)."""
    return rewrite.global_var(default_main_program(), default_startup_program(), name, shape,
                              value, dtype, persistable, **flags)


def _hyper(owner: str, arg: str, value: Any, low: float = -math.inf, high: float = math.inf,
           low_open: bool = False, high_open: bool = False) -> float:
    """``value`` as a float after checking it is a finite real number (Python or NumPy) in the
    range; the error names the argument, the range and what was received. NaN and +-inf are
    never accepted: an infinite learning rate or decay makes every parameter NaN on step one."""
    ok = not isinstance(value, (bool, np.bool_)) and isinstance(value, numbers.Real)
    v = float(value) if ok else math.nan
    ok = ok and math.isfinite(v) and (v > low if low_open else v >= low) and \
        (v < high if high_open else v <= high)
    if not ok:
        lo = "(" if low_open or math.isinf(low) else "["
        hi = ")" if high_open or math.isinf(high) else "]"
        raise ValueError(f"{owner}: {arg} must be a number in {lo}{low}, {high}{hi}, but "
                         f"received {value!r}")
    return v


def _positive(owner: str, arg: str, value: Any) -> float:
    return _hyper(owner, arg, value, 0.0, low_open=True)


def _unit(owner: str, arg: str, value: Any, closed: bool = False) -> float:
    """A decay rate / beta: in [0, 1) (``closed``: [0, 1])."""
    return _hyper(owner, arg, value, 0.0, 1.0, high_open=not closed)


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

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # fluid 1.8's accumulator-name attributes, which scripts use with _get_accumulator:
        # "velocity" -> _velocity_acc_str, "beta1_pow_acc" -> _beta1_pow_acc_str, ...
        super().__init_subclass__(**kwargs)
        for acc in cls.__dict__.get("_accs", ()):
            stem = acc.name.strip("_")
            stem = stem[:-len("_acc")] if stem.endswith("_acc") else stem
            setattr(cls, f"_{stem}_acc_str", acc.name)

    def __init__(self, learning_rate: Union[float, Variable],
                 parameter_list: Optional[Sequence[Any]] = None, regularization: Any = None,
                 grad_clip: Optional[GradientClipBase] = None,
                 name: Optional[str] = None) -> None:
        if isinstance(learning_rate, np.floating):
            learning_rate = float(learning_rate)
        if not isinstance(learning_rate, (float, Variable)) and \
                not getattr(learning_rate, "_fluidlite_dygraph_lr", False):   # dygraph decays
            raise TypeError(f"learning rate should be float or Variable, got "
                            f"{type(learning_rate)} here (write e.g. 1.0 instead of 1)")
        if isinstance(learning_rate, float):
            _hyper(type(self).__name__, "learning_rate", learning_rate, 0.0)
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
        with rewrite.role(program, OpRole.LRSched | OpRole.Optimize,
                          name_scope="scale_with_param_lr"):
            return rewrite.op(program.global_block(), "scale", X=glr,
                              attrs={"scale": float(param_lr)})

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
        var = _create_global_var(var_name, shape, fill_value, dtype or param.dtype,
                                 type=param.type if type is None else type,
                                 belong_to_optimizer=True)
        self._opti_name_list.append(var_name)
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
        return rewrite.append(block, self.type, inputs, outputs, self._op_attrs(p))

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
        self._create_accumulators(target_block, [p for p, g in parameters_and_grads
                                                 if g is not None and p.trainable])
        self._create_global_learning_rate()
        for param_and_grad in parameters_and_grads:
            param, grad = param_and_grad
            if grad is None or not param.trainable:
                continue
            with rewrite.role(program, OpRole.Optimize, [param, grad], name_scope="optimizer"):
                self._append_optimize_op(target_block, (param, grad))
        self._finish_update(target_block, parameters_and_grads)
        return list(target_block.ops[start:])

    def backward(self, loss: Variable, startup_program: Optional[Program] = None,
                 parameter_list: Optional[Sequence[Any]] = None, no_grad_set: Any = None,
                 callbacks: Optional[List[Callable]] = None) -> Pairs:
        """append_backward for ``loss`` (non-trainable parameters get no gradient; the error
        clip callback is always included). Returns ``[(param, param@GRAD)]``.

        Args:
            loss (Variable): the loss (one element) whose gradients are built.
            startup_program (Program | None): the startup program guarded while building (default:
                the default startup program).
            parameter_list (list | None): the parameters (or names) to differentiate (default: every
                trainable parameter).
            no_grad_set (set | None): variables or names that get no gradient.
            callbacks (list of callable | None): ``append_backward`` callbacks; the error clip
                callback is always added.
        Returns:
            list: ``[(param, param@GRAD)]`` pairs, one per parameter reached from ``loss``.
        Raises:
            TypeError: ``loss`` is not a Variable or ``callbacks`` is not a list.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup), fluid.unique_name.guard():
            ...     x = fluid.data("x", [-1, 2])
            ...     loss = fluid.layers.mean(fluid.layers.fc(x, size=1, param_attr=fluid.ParamAttr(
            ...         name="w", initializer=fluid.initializer.Constant(1.0)), bias_attr=False))
            ...     opt = fluid.optimizer.SGD(0.1)
            ...     params_grads = opt.backward(loss)             # append_backward, nothing else
            ...     _ = opt.apply_gradients(params_grads)         # clip, regularization, update
            >>> [(p.name, g.name) for p, g in params_grads]
            [('w', 'w@GRAD')]
            >>> exe = fluid.Executor(fluid.CPUPlace())
            >>> _ = exe.run(startup)
            >>> _ = exe.run(main, feed={"x": np.ones((1, 2), "float32")}, fetch_list=[loss])
            >>> np.array(fluid.global_scope().find_var("w").get_tensor()).ravel()
            array([0.9, 0.9], dtype=float32)
        """
        if _mode.tracer is not None:    # issue 12: dygraph, the gradients loss.backward() left
            return _dygraph("backward")(self, parameter_list, no_grad_set)
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
    def _get_no_grad_set(loss: Variable, no_grad_set: Any) -> Set[str]:
        """The user's no-grad names plus every non-trainable parameter."""
        return _no_grad_names(no_grad_set) | {
            p.name for p in loss.block.program.global_block().all_parameters()
            if not p.trainable}

    def apply_gradients(self, params_grads: Pairs) -> List[Operator]:
        """Sort, clip (with the optimizer's ``grad_clip``), regularize and append the update
        ops (see the module docstring).

        Args:
            params_grads (list of tuple): ``(param, grad)`` pairs, e.g. from ``backward``.
        Returns:
            list of Operator: the ops appended for the update (clip, regularization, update).
        Raises:
            RuntimeError: a parameter is already updated by an optimizer op in the program.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup), fluid.unique_name.guard():
            ...     x = fluid.data("x", [-1, 2])
            ...     loss = fluid.layers.mean(fluid.layers.fc(x, size=1, param_attr=fluid.ParamAttr(
            ...         name="w", initializer=fluid.initializer.Constant(1.0)), bias_attr=False))
            ...     opt = fluid.optimizer.SGD(0.5)
            ...     params_grads = fluid.backward.append_backward(loss)
            ...     _ = opt.apply_gradients(params_grads)
            >>> exe = fluid.Executor(fluid.CPUPlace())
            >>> _ = exe.run(startup)
            >>> _ = exe.run(main, feed={"x": np.ones((1, 2), "float32")}, fetch_list=[loss])
            >>> np.array(fluid.global_scope().find_var("w").get_tensor()).ravel()
            array([0.5, 0.5], dtype=float32)
        """
        return self._apply_gradients(params_grads, self._grad_clip)

    def _apply_gradients(self, params_grads: Pairs,
                         grad_clip: Optional[GradientClipBase]) -> List[Operator]:
        if _mode.tracer is not None:    # issue 12: dygraph, externally computed gradients
            return _dygraph("apply_gradients")(self, params_grads, grad_clip)
        params_grads = sorted(params_grads, key=lambda pg: pg[0].name)
        _check_not_updated(default_main_program(), params_grads)
        if grad_clip is not None:
            params_grads = grad_clip(params_grads)
        else:
            params_grads = append_gradient_clip_ops(params_grads)
        params_grads = append_regularization_ops(params_grads, self.regularization)
        return self._create_optimization_pass(params_grads)

    def apply_optimize(self, loss: Variable, startup_program: Optional[Program],
                       params_grads: Pairs) -> List[Operator]:
        """``apply_gradients`` inside ``program_guard(loss's program, startup_program)``.

        Args:
            loss (Variable): the loss; its program is the one the ops are appended to.
            startup_program (Program | None): where the optimizer's state is initialized.
            params_grads (list of tuple): ``(param, grad)`` pairs, e.g. from ``backward``.
        Returns:
            list of Operator: the ops appended for the update.
        Raises:
            RuntimeError: a parameter is already updated by an optimizer op in the program.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup), fluid.unique_name.guard():
            ...     x = fluid.data("x", [-1, 2])
            ...     loss = fluid.layers.mean(fluid.layers.fc(x, size=1, param_attr=fluid.ParamAttr(
            ...         name="w", initializer=fluid.initializer.Constant(1.0)), bias_attr=False))
            ...     opt = fluid.optimizer.SGD(0.5)
            ...     params_grads = opt.backward(loss)
            ...     _ = opt.apply_optimize(loss, startup, params_grads)
            >>> exe = fluid.Executor(fluid.CPUPlace())
            >>> _ = exe.run(startup)
            >>> _ = exe.run(main, feed={"x": np.ones((1, 2), "float32")}, fetch_list=[loss])
            >>> np.array(fluid.global_scope().find_var("w").get_tensor()).ravel()
            array([0.5, 0.5], dtype=float32)
        """
        return self._apply_optimize(loss, startup_program, params_grads, self._grad_clip)

    def _apply_optimize(self, loss: Variable, startup_program: Optional[Program],
                        params_grads: Pairs, grad_clip: Optional[GradientClipBase]
                        ) -> List[Operator]:
        if _mode.tracer is not None:    # issue 12: dygraph has no program to guard
            return self._apply_gradients(params_grads, grad_clip)
        with program_guard(loss.block.program, startup_program):
            return self._apply_gradients(params_grads, grad_clip)

    # -- dygraph state (issue 12; fluidlite/dygraph/optim.py) --------------------------------
    def state_dict(self) -> Dict[str, Any]:
        """Dygraph: ``{accumulator name: tensor}`` (save it with ``save_dygraph``)."""
        return _dygraph("state_dict")(self)

    def set_dict(self, state_dict: Dict[str, Any]) -> None:
        """Dygraph: load accumulator values saved by ``state_dict``."""
        _dygraph("set_dict")(self, state_dict)

    set_state_dict = load_state_dict = set_dict

    # -- issue 16: fluid 1.8's dygraph-only Optimizer methods (additive) ----------------------
    def _dygraph_only(self, what: str) -> None:
        if _mode.tracer is None:
            raise RuntimeError(f"We Only support {what} in imperative mode, please use "
                               f"fluid.dygraph.guard() as context to run it in imperative Mode")

    def current_step_lr(self) -> float:
        """Dygraph: the learning rate the next ``minimize`` uses (a float; a dygraph decay is
        evaluated at its current step without advancing it).

        Args:
            None: this method takes no arguments.
        Returns:
            float: the learning rate of the next step.
        Raises:
            RuntimeError: called outside dygraph mode.
            TypeError: the learning rate is a static Variable, which has no value in dygraph mode.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> with fluid.dygraph.guard():
            ...     fc = fluid.dygraph.Linear(2, 1)
            ...     opt = fluid.optimizer.SGD(learning_rate=0.25, parameter_list=fc.parameters())
            ...     print(opt.current_step_lr())
            0.25
        """
        self._dygraph_only("current_step_lr")
        lr = self._learning_rate
        if isinstance(lr, float):
            return lr
        if getattr(lr, "_fluidlite_dygraph_lr", False):
            # per-step decays evaluate step() at the current step; per-epoch decays and
            # ReduceLROnPlateau hold their rate (fluid 1.8 calls them, step() takes a loss)
            value = lr._peek() if hasattr(lr, "_peek") else lr.step()
        elif hasattr(lr, "numpy") and not isinstance(lr, Variable):     # a dygraph tensor
            value = lr.numpy()
        else:
            raise TypeError(f"current_step_lr: the learning rate of {type(self).__name__} is "
                            f"a static Variable ({getattr(lr, 'name', lr)!r}), which has no "
                            f"value in dygraph mode")
        value = value.numpy() if hasattr(value, "numpy") else value
        return float(np.asarray(value).reshape(-1)[0])

    def clear_gradients(self) -> None:
        """Dygraph: clear the gradient of every trainable parameter in ``parameter_list``.

        Args:
            None: this method takes no arguments.
        Returns:
            None: the gradients are cleared in place.
        Raises:
            RuntimeError: called outside dygraph mode.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> with fluid.dygraph.guard():
            ...     fc = fluid.dygraph.Linear(2, 1)
            ...     opt = fluid.optimizer.SGD(learning_rate=0.1, parameter_list=fc.parameters())
            ...     fluid.layers.mean(fc(fluid.dygraph.to_variable(np.ones((1, 2), "float32")))).backward()
            ...     opt.clear_gradients()
            ...     print(fc.weight.gradient())
            None
        """
        self._dygraph_only("clear_gradients")
        for p in self._parameter_list or []:
            if p.trainable:
                p.clear_gradient()

    def minimize(self, loss: Variable, startup_program: Optional[Program] = None,
                 parameter_list: Optional[Sequence[Any]] = None, no_grad_set: Any = None,
                 grad_clip: Optional[GradientClipBase] = None
                 ) -> Tuple[List[Operator], Pairs]:
        """Append backward, clip, regularization and update ops for ``loss``; returns
        ``(optimize_ops, params_grads)``. ``grad_clip`` here is the develop-1.8 spelling; the
        optimizer's own ``grad_clip`` wins when both are given. One transaction: if anything
        fails, the main and startup programs are left exactly as they were.

        Args:
            loss (Variable): the loss (one element).
            startup_program (Program | None): where the optimizer's state is initialized (default:
                the default startup program).
            parameter_list (list | None): the parameters to update (default: all trainable).
            no_grad_set (set | None): variables or names that get no gradient.
            grad_clip (GradientClipBase | None): a clip used when the optimizer has none.
        Returns:
            tuple: ``(optimize_ops, params_grads)``.
        Raises:
            TypeError: ``loss`` is not a Variable.
            RuntimeError: a parameter is already updated by an optimizer op of this program (e.g.
                ``minimize`` called twice on one loss).

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
            ...     opt_ops, params_grads = fluid.optimizer.SGD(0.1).minimize(loss)
            >>> exe = fluid.Executor(fluid.CPUPlace())
            >>> _ = exe.run(startup)
            >>> feed = {"x": np.array([[1, 2]], "float32"), "y": np.array([[1]], "float32")}
            >>> [(p.name, g.name) for p, g in params_grads]
            [('w', 'w@GRAD')]
            >>> sorted({op.type for op in main.global_block().ops})
            ['elementwise_sub', 'elementwise_sub_grad', 'fill_constant', 'mean', 'mean_grad', 'mul',
             'mul_grad', 'sgd', 'square', 'square_grad']
        """
        if _mode.tracer is not None:    # dygraph: clip, regularize and update now
            return _dygraph("minimize")(self, loss, parameter_list, no_grad_set,
                                        _resolve_clip(self._grad_clip, grad_clip))
        if not isinstance(loss, Variable):
            raise TypeError(f"The loss should be an Variable, but received "
                            f"{type(loss).__name__}")
        clip = _resolve_clip(self._grad_clip, grad_clip)
        parameter_list = parameter_list if parameter_list else self._parameter_list
        startup = startup_program if startup_program is not None else default_startup_program()
        with rewrite.transaction(loss.block.program, startup):
            params_grads = self.backward(loss, startup_program=startup_program,
                                         parameter_list=parameter_list, no_grad_set=no_grad_set)
            _check_not_updated(loss.block.program, params_grads, loss)
            optimize_ops = self._apply_optimize(loss, startup_program, params_grads, clip)
        return optimize_ops, params_grads


def _dygraph(name: str) -> Callable[..., Any]:
    """The dygraph branch of ``Optimizer.<name>``: ``fluidlite.dygraph.optim.<name>``, which
    registers itself with ``core.mode`` as ``optimizer.<name>`` (dygraph sits above this
    module)."""
    return _mode.implementation("optimizer." + name)


def _resolve_clip(own: Optional[GradientClipBase], given: Any) -> Optional[GradientClipBase]:
    """The clip ``minimize`` applies: the optimizer's own wins over ``minimize(grad_clip=)``
    (a UserWarning says so: one of the two clips the user asked for is not applied)."""
    given = _check_clip(given, "minimize()")
    if given is not None and own is not None and given is not own:
        warnings.warn(f"minimize(grad_clip={given}) is ignored: the optimizer was built with "
                      f"grad_clip={own}, which wins. Pass the clip in one place only "
                      f"(the optimizer's grad_clip argument).", UserWarning, stacklevel=3)
    return own if own is not None else given


def _check_not_updated(program: Program, params_grads: Pairs,
                       loss: Optional[Variable] = None) -> None:
    """A parameter gets one update per step: refuse to append a second update op for a
    parameter that an optimizer op of ``program`` already writes (``minimize(loss)`` called
    twice would run two backward passes and two updates per step, doubling the step size).
    Read from the program itself, so a clone made after ``minimize`` is refused too."""
    wanted = {p.name for p, g in params_grads if g is not None and p.trainable}
    if not wanted:
        return
    for block in program.blocks:
        for op in block.ops:
            if not int(op.attrs.get("op_role", 0)) & OpRole.Optimize:
                continue
            hit = [n for n in op.output_arg_names if n in wanted]
            if hit:
                what = f"minimize(loss '{loss.name}')" if loss is not None else \
                    "apply_gradients"
                raise RuntimeError(
                    f"{what}: parameter '{hit[0]}' is already updated by the '{op.type}' op "
                    f"of this program (block {block.idx}), from an earlier minimize or "
                    f"apply_gradients; a second update would run every step, doubling the "
                    f"step. Call minimize once per program (one optimizer per set of "
                    f"parameters: pass parameter_list to split them), or build the second "
                    f"training program from a clone taken before the first minimize "
                    f"(program.clone()).")
