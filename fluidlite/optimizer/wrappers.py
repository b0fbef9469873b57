"""Averaging and wrapping optimizers of ``fluid.optimizer``: ModelAverage,
ExponentialMovingAverage, LookaheadOptimizer, RecomputeOptimizer (fluid 1.8 semantics).

They build on ``optimizer.Optimizer`` and are re-exported by ``fluidlite.optimizer``, where
users find them (``fluid.optimizer.ModelAverage``)."""
from __future__ import annotations

import contextlib
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from ..backward import append_backward
from ..clip import GradientClipBase, error_clip_callback
from ..core import names, rewrite
from ..core.ir import (Block, Operator, OpRole, Parameter, Program, Variable,
                      default_main_program, default_startup_program, program_guard)
from .base import Optimizer, Pairs, _create_global_var, _resolve_clip

__all__ = ["ModelAverage", "ExponentialMovingAverage", "LookaheadOptimizer",
           "RecomputeOptimizer"]


def _clone(block: Block, var: Variable) -> Variable:
    """``var`` declared (persistable) in another program's block, to read/write its scope value."""
    return block._clone_variable(var, force_persistable=True)


def _cast(block: Block, x: Variable, dtype: Any) -> Variable:
    if x.dtype == dtype:
        return x
    return rewrite.op(block, "cast", dtype=dtype, attrs={"in_dtype": x.dtype, "out_dtype": dtype},
                      X=x)


class _SwapIn:
    """``apply(exe)`` runs ``apply_program`` (saves the parameters, swaps the averages in);
    ``restore(exe)`` runs ``restore_program`` (puts the saved values back)."""
    apply_program: Program
    restore_program: Program

    def _build_restore_program(self, saved: List[Tuple[Parameter, Variable]]) -> None:
        self.restore_program = Program()
        block = self.restore_program.global_block()
        with program_guard(self.restore_program, Program()):
            for param, backup in saved:
                rewrite.append(block, "assign", {"X": _clone(block, backup)},
                               {"Out": _clone(block, param)})

    @contextlib.contextmanager
    def apply(self, executor: Any, need_restore: bool = True) -> Iterator[None]:
        """Swap the averages into the parameters; restore them on exit.

        Args:
            executor (Executor): runs ``apply_program`` (and ``restore_program`` on exit) in its
                scope.
            need_restore (bool, default True): put the trained values back when the block exits.
        Returns:
            contextmanager: a context in which the parameters hold the averaged values.
        Raises:
            RuntimeError: the executor fails to run the program (e.g. the startup program, and so
                the accumulators, never ran).

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup), fluid.unique_name.guard():
            ...     x = fluid.data("x", [-1, 2])
            ...     loss = fluid.layers.mean(fluid.layers.fc(x, size=1, param_attr=fluid.ParamAttr(
            ...         name="w", initializer=fluid.initializer.Constant(1.0)), bias_attr=False))
            ...     _ = fluid.optimizer.SGD(0.1).minimize(loss)
            ...     ema = fluid.optimizer.ExponentialMovingAverage(0.5)
            ...     ema.update()
            >>> exe = fluid.Executor(fluid.CPUPlace())
            >>> _ = exe.run(startup)
            >>> for _ in range(3):
            ...     _ = exe.run(main, feed={"x": np.ones((1, 2), "float32")}, fetch_list=[loss])
            >>> w = lambda: np.array(fluid.global_scope().find_var("w").get_tensor()).ravel().round(4)
            >>> with ema.apply(exe, need_restore=True):
            ...     print(w())                   # the average
            [0.7571 0.7571]
            >>> w()                              # restored
            array([0.7, 0.7], dtype=float32)
        """
        executor.run(self.apply_program)
        try:
            yield
        finally:
            if need_restore:
                self.restore(executor)

    def restore(self, executor: Any) -> None:
        """Put back the parameter values saved by ``apply``.

        Args:
            executor (Executor): runs ``restore_program`` in its scope.
        Returns:
            None: the parameters are restored in the executor's scope.
        Raises:
            RuntimeError: the executor fails to run the program (e.g. ``apply`` never saved the
                values).

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup), fluid.unique_name.guard():
            ...     x = fluid.data("x", [-1, 2])
            ...     loss = fluid.layers.mean(fluid.layers.fc(x, size=1, param_attr=fluid.ParamAttr(
            ...         name="w", initializer=fluid.initializer.Constant(1.0)), bias_attr=False))
            ...     _ = fluid.optimizer.SGD(0.1).minimize(loss)
            ...     ema = fluid.optimizer.ExponentialMovingAverage(0.5)
            ...     ema.update()
            >>> exe = fluid.Executor(fluid.CPUPlace())
            >>> _ = exe.run(startup)
            >>> for _ in range(3):
            ...     _ = exe.run(main, feed={"x": np.ones((1, 2), "float32")}, fetch_list=[loss])
            >>> w = lambda: np.array(fluid.global_scope().find_var("w").get_tensor()).ravel().round(4)
            >>> with ema.apply(exe, need_restore=False):
            ...     averaged = w()
            >>> ema.restore(exe)                 # put the trained weights back
            >>> averaged, w()
            (array([0.7571, 0.7571], dtype=float32), array([0.7, 0.7], dtype=float32))
        """
        executor.run(self.restore_program)


class ModelAverage(Optimizer, _SwapIn):
    """Average each parameter over a sliding window of recent updates (fluid 1.8).

    Build it *after* ``minimize``: for every parameter with ``do_model_average != False`` it
    appends an ``average_accumulates`` op to the main program (accumulators ``sum_1``, ``sum_2``,
    ``sum_3``, ``num_accumulates``, ``old_num_accumulates``, ``num_updates``). ``apply(exe)`` is a
    context manager that swaps the averages in (``param = (sum_1 + sum_2 + sum_3) /
    (num_accumulates + old_num_accumulates)``) and restores the trained values on exit.

    Args:
        average_window_rate (float): the window size as a rate of the number of updates.
        min_average_window (int, default 10000): the smallest window, in updates.
        max_average_window (int, default 10000): the largest window, in updates.
        regularization (WeightDecayRegularizer | None): kept for fluid's signature; the averaging
            appends no update op, so it has no effect.
        name (str | None): name prefix of the accumulators.
    Returns:
        ModelAverage: the averager; ``apply(exe)`` / ``restore(exe)`` swap the averages in and out.
        Its ``minimize`` raises TypeError: it is not a standalone optimizer.
    Raises:
        ValueError: ``min_average_window > max_average_window``, or a window / rate cannot be
            converted to a number.
        TypeError: ``regularization`` is not a regularizer instance.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup), fluid.unique_name.guard():
        ...     x = fluid.data("x", [-1, 2])
        ...     pred = fluid.layers.fc(x, size=1, param_attr=fluid.ParamAttr(
        ...         name="w", initializer=fluid.initializer.Constant(1.0)), bias_attr=False)
        ...     loss = fluid.layers.mean(pred)
        ...     _ = fluid.optimizer.SGD(0.1).minimize(loss)
        ...     avg = fluid.optimizer.ModelAverage(0.15, min_average_window=2, max_average_window=10)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> for _ in range(3):
        ...     _ = exe.run(main, feed={"x": np.ones((1, 2), "float32")}, fetch_list=[loss])
        >>> w = lambda: np.array(fluid.global_scope().find_var("w").get_tensor()).ravel().round(4)
        >>> with avg.apply(exe):
        ...     print(w())
        [0.8 0.8]
        >>> w()
        array([0.7, 0.7], dtype=float32)
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
            with rewrite.role(main, OpRole.Optimize, [param, backup],
                              name_scope="move_average"):
                self._append_average_accumulate_op(param)
        self.apply_program = Program()
        block = self.apply_program.global_block()
        with program_guard(self.apply_program, Program()):
            for pg in self.params_grads:
                self._add_average_apply_op(block, pg)
        self._build_restore_program(self.params_grads)

    _ACCS = ("sum_1", "sum_2", "sum_3", "num_accumulates", "old_num_accumulates", "num_updates")

    def _append_average_accumulate_op(self, param: Parameter) -> None:
        accs = {}
        for acc in self._ACCS:
            counter = acc.startswith(("num", "old"))
            accs[acc] = self._add_accumulator(acc, param, dtype="int64" if counter else None,
                                              shape=[1] if counter else None)
        rewrite.append(
            param.block.program.global_block(), "average_accumulates",
            dict({"param": param}, **{"in_" + k: v for k, v in accs.items()}),
            {"out_" + k: v for k, v in accs.items()},
            {"average_window": self.average_window,
             "min_average_window": self.min_average_window,
             "max_average_window": self.max_average_window})

    def _add_average_apply_op(self, block: Block, param_grad: Tuple[Parameter, Variable]) -> None:
        param, backup = (_clone(block, v) for v in param_grad)
        accs = {k: _clone(block, self._get_accumulator(k, param_grad[0])) for k in self._ACCS}
        rewrite.append(block, "assign", {"X": param}, {"Out": backup})
        count = rewrite.op(block, "sum", X=[accs["num_accumulates"], accs["old_num_accumulates"]])
        total = rewrite.op(block, "sum", X=[accs["sum_1"], accs["sum_2"], accs["sum_3"]])
        dtype = param.dtype
        rewrite.append(block, "elementwise_div",
                       {"X": _cast(block, total, dtype), "Y": _cast(block, count, dtype)},
                       {"Out": param})

    def minimize(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("ModelAverage is not a standalone optimizer: build it after "
                        "another optimizer's minimize() and use apply()/restore()")


class ExponentialMovingAverage(_SwapIn):
    """Shadow every parameter (``do_model_average != False``) with ``ema = ema*d + p*(1-d)``.

    ``update()`` appends the EMA ops (and the ``@EMA_STEP_COUNTER@`` step counter) to the main
    program; call it after ``minimize``. ``d = decay``, or ``min(decay, (1+t)/(10+t))`` with
    ``thres_steps=t`` (a Variable such as a step counter). ``apply(exe)`` swaps the
    bias-corrected averages ``ema / (1 - d**step)`` into the parameters and restores them on
    exit. (fluid 1.8 also wrote the corrected value back into the EMA variable, so every apply
    compounded the correction; fluidlite leaves the EMA untouched.)

    Args:
        decay (float, default 0.999): the decay ``d`` of the average, in [0, 1].
        thres_steps (Variable | None): a step counter ``t``; when given the decay is
            ``min(decay, (1 + t) / (10 + t))``.
        name (str | None): prefix of the EMA variables' names.
    Returns:
        ExponentialMovingAverage: the averager; ``update()`` appends the EMA ops, ``apply(exe)`` /
        ``restore(exe)`` swap the averages in and out.
    Raises:
        ValueError: ``decay`` is not a number in [0, 1].
        TypeError: ``thres_steps`` is neither None nor a Variable.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup), fluid.unique_name.guard():
        ...     x = fluid.data("x", [-1, 2])
        ...     pred = fluid.layers.fc(x, size=1, param_attr=fluid.ParamAttr(
        ...         name="w", initializer=fluid.initializer.Constant(1.0)), bias_attr=False)
        ...     loss = fluid.layers.mean(pred)
        ...     _ = fluid.optimizer.SGD(0.1).minimize(loss)
        ...     ema = fluid.optimizer.ExponentialMovingAverage(0.5)
        ...     ema.update()
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> for _ in range(3):
        ...     _ = exe.run(main, feed={"x": np.ones((1, 2), "float32")}, fetch_list=[loss])
        >>> w = lambda: np.array(fluid.global_scope().find_var("w").get_tensor()).ravel().round(4)
        >>> trained = w()
        >>> with ema.apply(exe):                 # the averaged weights, inside the block only
        ...     averaged = w()
        >>> trained, averaged, np.array_equal(w(), trained)
        (array([0.7, 0.7], dtype=float32), array([0.7571, 0.7571], dtype=float32), True)
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
            with rewrite.role(main, OpRole.Optimize, [param, tmp], name_scope="moving_average"):
                self._ema_vars[param.name] = _create_global_var(
                    name=names.generate(self._name + param.name + "_ema"), shape=param.shape,
                    value=0.0, dtype=param.dtype)
        self.apply_program = Program()
        block = self.apply_program.global_block()
        with program_guard(self.apply_program, Program()):
            step = _cast(block, block.create_var(name=self._step_counter_name, shape=[1],
                                                 dtype="int64", persistable=True), "float32")
            decay = _clone(block, self._decay_var)
            decay_pow = rewrite.op(block, "elementwise_pow", X=decay, Y=step)
            zero = rewrite.op(block, "fill_constant", dtype="float32",
                              attrs={"shape": [1], "dtype": "float32", "value": 0.0})
            started = _cast(block, rewrite.op(block, "less_than", dtype="bool", X=zero, Y=step),
                            "float32")
            # 1 - d**step once a step ran, else exactly 1 (no correction before any update)
            denom = rewrite.op(block, "scale", attrs={"scale": -1.0, "bias": 1.0},
                               X=rewrite.op(block, "elementwise_mul", X=decay_pow, Y=started))
            for param, tmp in self._params_tmps:
                p, t, ema = (_clone(block, v) for v in (param, tmp, self._ema_vars[param.name]))
                rewrite.append(block, "assign", {"X": p}, {"Out": t})
                rewrite.append(block, "elementwise_div",
                               {"X": ema, "Y": _cast(block, denom, p.dtype)}, {"Out": p})
        self._build_restore_program(self._params_tmps)

    def _get_ema_decay(self) -> Variable:
        main = default_main_program()
        with rewrite.role(main, OpRole.LRSched):
            decay_var = _create_global_var(name="scheduled_ema_decay_rate", shape=[1],
                                           value=self._decay, dtype="float32")
            if self._thres_steps is not None:
                block = main.global_block()
                t = _cast(block, self._thres_steps, "float32")
                ratio = rewrite.op(block, "elementwise_div",
                                   X=rewrite.op(block, "scale", attrs={"bias": 1.0}, X=t),
                                   Y=rewrite.op(block, "scale", attrs={"bias": 10.0}, X=t))
                limit = rewrite.op(block, "fill_constant", dtype="float32", attrs={
                    "shape": [1], "dtype": "float32", "value": self._decay})
                rewrite.append(block, "elementwise_min", {"X": ratio, "Y": limit},
                               {"Out": decay_var})
        return decay_var

    def update(self) -> None:
        """Append the EMA update ops to the main program (call once, after minimize).

        Args:
            None: this method takes no arguments; it appends to the default main program.
        Returns:
            None: the EMA ops and the step counter are appended to the main program.
        Raises:
            None: this method raises no error of its own.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup), fluid.unique_name.guard():
            ...     x = fluid.data("x", [-1, 2])
            ...     loss = fluid.layers.mean(fluid.layers.fc(x, size=1, param_attr=fluid.ParamAttr(
            ...         name="w", initializer=fluid.initializer.Constant(1.0)), bias_attr=False))
            ...     _ = fluid.optimizer.SGD(0.1).minimize(loss)
            ...     ema = fluid.optimizer.ExponentialMovingAverage(0.9)
            ...     ema.update()                     # append the averaging ops after the update
            >>> "ema" in " ".join(v.name for v in main.list_vars())
            True
        """
        main = default_main_program()
        rewrite.step_counter(main, default_startup_program(), self._step_counter_name)
        block = main.global_block()
        for param, tmp in self._params_tmps:
            with rewrite.role(main, OpRole.Optimize, [param, tmp], name_scope="moving_average"):
                ema = self._ema_vars[param.name]
                d = _cast(block, self._decay_var, param.dtype)
                keep = rewrite.op(block, "elementwise_mul", X=ema, Y=d)
                one_minus = rewrite.op(block, "scale", attrs={"scale": -1.0, "bias": 1.0}, X=d)
                new = rewrite.op(block, "elementwise_mul", X=param, Y=one_minus)
                rewrite.append(block, "elementwise_add", {"X": keep, "Y": new}, {"Out": ema})


class LookaheadOptimizer:
    """Lookahead (Zhang et al. 2019): the inner optimizer updates the fast weights every step;
    every ``k`` steps the slow weights move ``alpha`` of the way to them and the fast weights
    are reset to the slow ones (``<param>@SLOW``, initialised from the parameter in the startup
    program).

    Args:
        inner_optimizer (Optimizer): the optimizer updating the fast weights every step.
        alpha (float, default 0.5): how far the slow weights move toward the fast ones, in [0, 1].
        k (int, default 5): the number of fast steps between syncs (> 0).
    Returns:
        LookaheadOptimizer: the wrapper; ``minimize(loss, startup_program=None)`` returns the
        inner optimizer's ``(optimize_ops, params_grads)``.
    Raises:
        ValueError: ``inner_optimizer`` is None, ``alpha`` is not in [0, 1] or ``k`` is not a
            positive int.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup), fluid.unique_name.guard():
        ...     x = fluid.data("x", [-1, 2])
        ...     pred = fluid.layers.fc(x, size=1, param_attr=fluid.ParamAttr(
        ...         name="w", initializer=fluid.initializer.Constant(1.0)), bias_attr=False)
        ...     loss = fluid.layers.mean(pred)
        ...     opt = fluid.optimizer.LookaheadOptimizer(fluid.optimizer.SGD(0.1), alpha=0.5, k=2)
        ...     _ = opt.minimize(loss)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> for step in range(4):
        ...     l, = exe.run(main, feed={"x": np.ones((1, 2), "float32")}, fetch_list=[loss])
        ...     print(step, l.round(4))
        0 [2.]
        1 [1.8]
        2 [1.8]
        3 [1.6]
    """

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
            rewrite.append(startup_block, "assign", {"X": s_fast}, {"Out": s_slow})
        # the sync ops update state: Optimize role, so clone(for_test) drops them
        program = main_block.program
        with program_guard(program, startup), rewrite.role(program, OpRole.Optimize):
            k = _create_global_var("lookahead_k", [1], self.k, "int32")
            alpha = _create_global_var("lookahead_alpha", [1], self.alpha, "float32")
            step = _create_global_var("lookahead_step", [1], 0, "int32")
            rewrite.append(main_block, "increment", {"X": step}, {"Out": step}, {"step": 1.0})
            one = rewrite.op(main_block, "fill_constant", dtype="float32", attrs={
                "shape": [1], "dtype": "float32", "value": 1.0})
            zero = rewrite.op(main_block, "fill_constant", dtype="int32", attrs={
                "shape": [1], "dtype": "int32", "value": 0.0})
            mod = rewrite.op(main_block, "elementwise_mod", X=step, Y=k)
            # fluid 1.8: every k-th step (step % k == 0) both weights become
            # alpha * fast + (1 - alpha) * slow; the other steps run nothing
            sync = rewrite.op(main_block, "equal", dtype="bool", X=mod, Y=zero)
            _switch(main_block, sync, lambda block: self._sync(block, main_block, params,
                                                               slow_vars, one, alpha))
        return mini_out

    @staticmethod
    def _sync(block: Block, main_block: Block, params: List[str], slow_vars: Dict[str, Variable],
              one: Variable, alpha: Variable) -> None:
        """Append to ``block`` the sync of every parameter: both weights become
        ``alpha * fast + (1 - alpha) * slow``."""
        one_minus_alpha = rewrite.op(block, "elementwise_sub", X=one, Y=alpha)
        for name in params:
            fast, slow = main_block.var(name), slow_vars[name]
            mixed = rewrite.op(
                block, "elementwise_add",
                X=rewrite.op(block, "elementwise_mul", X=fast, Y=_cast(block, alpha, fast.dtype)),
                Y=rewrite.op(block, "elementwise_mul", X=slow,
                             Y=_cast(block, one_minus_alpha, fast.dtype)))
            rewrite.append(block, "assign", {"X": mixed}, {"Out": slow})
            rewrite.append(block, "assign", {"X": mixed}, {"Out": fast})


def _switch(block: Block, cond: Variable, body: Callable[[Block], None]) -> None:
    """``body(sub_block)`` run when ``cond`` holds, as fluid 1.8's ``layers.Switch`` with that
    one case and an empty default built it (so programs keep fluid's ops): ``logical_not`` of
    ``cond``, the case's ``conditional_block`` and the default's, which owns an empty block."""
    case = rewrite.conditional(cond, block.program)
    otherwise = rewrite.op(block, "logical_not", X=cond)
    with case as sub:
        body(sub)
    with rewrite.conditional(otherwise, block.program):
        pass


class RecomputeLoadError(NotImplementedError):
    """``RecomputeOptimizer.load``'s error: a ``NotImplementedError``, as fluid 1.8 raised
    (its documented example catches that type)."""


def _seed_dropouts(block: Block) -> None:
    """fluid 1.8's recompute rewrite: a ``seed`` op before every ``dropout`` without one,
    feeding its ``Seed`` input, so the dropout the backward pass replays draws the forward's
    mask (a fixed ``seed`` attr moves to the seed op)."""
    for drop in [op for op in block.ops if op.type == "dropout" and not op.input("Seed")]:
        fixed = int(drop.attr("seed")) if drop.attr("fix_seed") else 0
        out = rewrite.tmp(block, "seed", "int32", (1,))
        with rewrite.role(block.program, int(drop.attr("op_role"))):
            rewrite.insert(block, drop.idx, "seed", outputs={"Out": out}, attrs={"seed": fixed})
            attrs = dict(drop.attrs, fix_seed=False, seed=0)
            rewrite.replace_op(block, drop, "dropout", dict(drop.inputs, Seed=[out.name]),
                               {k: list(v) for k, v in drop.outputs.items()}, attrs)


class RecomputeOptimizer(Optimizer):
    """Wrap ``optimizer`` so the backward pass recomputes the forward ops between checkpoints
    instead of keeping their outputs (fluid's recompute; the gradients are the same).
    Call ``_set_checkpoints([vars])`` before ``minimize``.

    Args:
        optimizer (Optimizer): the optimizer doing the clip, regularization and update.
    Returns:
        RecomputeOptimizer: the wrapper; call ``_set_checkpoints(vars)`` then ``minimize(loss)``,
        which returns ``(optimize_ops, params_grads)``.
    Raises:
        TypeError: ``optimizer`` is not an ``Optimizer``.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 4])
        ...     h = fluid.layers.fc(x, size=4, act="relu")
        ...     loss = fluid.layers.mean(fluid.layers.fc(h, size=1))
        ...     opt = fluid.optimizer.RecomputeOptimizer(fluid.optimizer.SGD(0.1))
        ...     opt._set_checkpoints([h])        # keep h; recompute the rest in backward
        ...     _ = opt.minimize(loss)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> exe.run(main, feed={"x": np.ones((2, 4), "float32")}, fetch_list=[loss])[0].shape
        (1,)
    """

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
        """append_backward with the checkpoints set by ``_set_checkpoints``.

        Args:
            loss (Variable): the loss (one element).
            startup_program (Program | None): the startup program guarded while building.
            parameter_list (list | None): the parameters to differentiate (default: all trainable).
            no_grad_set (set | None): variables or names that get no gradient.
            callbacks (list of callable | None): ``append_backward`` callbacks; the error clip
                callback is always added.
        Returns:
            list: ``[(param, param@GRAD)]`` pairs.
        Raises:
            ValueError: ``_set_checkpoints`` was not called.
            TypeError: ``loss`` is not a Variable.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup), fluid.unique_name.guard():
            ...     x = fluid.data("x", [-1, 2])
            ...     h = fluid.layers.fc(x, size=2, act="relu")
            ...     loss = fluid.layers.mean(fluid.layers.fc(h, size=1))
            ...     opt = fluid.optimizer.RecomputeOptimizer(fluid.optimizer.SGD(0.1))
            ...     opt._set_checkpoints([h])
            ...     params_grads = opt.backward(loss)
            ...     _ = opt.apply_optimize(loss, startup, params_grads)
            >>> sorted(p.name for p, _ in params_grads)
            ['fc_0.b_0', 'fc_0.w_0', 'fc_1.b_0', 'fc_1.w_0']
        """
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
        program = loss.block.program
        with program_guard(program, startup_program), rewrite.transaction(program):
            _seed_dropouts(program.global_block())
            params_grads, _ = append_backward(loss, parameter_list, no_grad, callbacks,
                                              checkpoints=self._checkpoints)
        return params_grads

    # issue 16: fluid 1.8's RecomputeOptimizer.load raised this error (additive)
    def load(self, stat_dict: Any) -> None:
        """Not supported, as in fluid 1.8 (which raised this error): restore the parameters and
        the wrapped optimizer's accumulators with ``fluid.io.load_persistables`` or
        ``fluid.load`` instead."""
        raise RecomputeLoadError("load function is not supported by Recompute Optimizer for "
                                 "now; restore parameters and optimizer state with "
                                 "fluid.io.load_persistables or fluid.load instead")

    def apply_optimize(self, loss: Variable, startup_program: Optional[Program],
                       params_grads: Pairs) -> List[Operator]:
        """The wrapped optimizer's ``apply_optimize`` on the ``params_grads`` of this optimizer's
        ``backward`` (which recomputes the segments between checkpoints).

        Args:
            loss (Variable): the loss; its program gets the update ops.
            startup_program (Program | None): where the optimizer's state is initialized.
            params_grads (list of tuple): ``(param, grad)`` pairs from ``backward``.
        Returns:
            list of Operator: the ops appended by the wrapped optimizer.
        Raises:
            RuntimeError: a parameter is already updated by an optimizer op in the program.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup), fluid.unique_name.guard():
            ...     x = fluid.data("x", [-1, 2])
            ...     h = fluid.layers.fc(x, size=2, act="relu")
            ...     loss = fluid.layers.mean(fluid.layers.fc(h, size=1))
            ...     opt = fluid.optimizer.RecomputeOptimizer(fluid.optimizer.SGD(0.1))
            ...     opt._set_checkpoints([h])
            ...     params_grads = opt.backward(loss)
            ...     _ = opt.apply_optimize(loss, startup, params_grads)
            >>> exe = fluid.Executor(fluid.CPUPlace())
            >>> _ = exe.run(startup)
            >>> exe.run(main, feed={"x": np.ones((2, 2), "float32")}, fetch_list=[loss])[0].shape
            (1,)
        """
        return self._optimizer.apply_optimize(loss, startup_program, params_grads)

    def apply_gradients(self, params_grads: Pairs) -> List[Operator]:
        """The wrapped optimizer's ``apply_gradients`` (clip, regularization and updates) on
        ``params_grads``.

        Args:
            params_grads (list of tuple): ``(param, grad)`` pairs from ``backward``.
        Returns:
            list of Operator: the ops appended by the wrapped optimizer.
        Raises:
            RuntimeError: a parameter is already updated by an optimizer op in the program.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup), fluid.unique_name.guard():
            ...     x = fluid.data("x", [-1, 2])
            ...     h = fluid.layers.fc(x, size=2, act="relu")
            ...     loss = fluid.layers.mean(fluid.layers.fc(h, size=1))
            ...     opt = fluid.optimizer.RecomputeOptimizer(fluid.optimizer.SGD(0.1))
            ...     opt._set_checkpoints([h])
            ...     params_grads = opt.backward(loss)
            ...     _ = opt.apply_gradients(params_grads)
            >>> "sgd" in [op.type for op in main.global_block().ops]
            True
        """
        return self._optimizer.apply_gradients(params_grads)

    def minimize(self, loss: Variable, startup_program: Optional[Program] = None,
                 parameter_list: Optional[Sequence[Any]] = None, no_grad_set: Any = None,
                 grad_clip: Optional[GradientClipBase] = None
                 ) -> Tuple[List[Operator], Pairs]:
        """Recomputing backward, then the wrapped optimizer's clip/regularize/update."""
        if self._checkpoints is None:
            raise ValueError("You should call _set_checkpoints first")
        clip = _resolve_clip(self._optimizer._grad_clip, grad_clip)
        startup = startup_program if startup_program is not None else default_startup_program()
        with rewrite.transaction(loss.block.program, startup):
            params_grads = self.backward(loss, startup_program, parameter_list, no_grad_set)
            ops = self._optimizer._apply_optimize(loss, startup_program, params_grads, clip)
        return ops, params_grads
