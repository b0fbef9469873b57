"""``StaticRNN`` (fluid 1.8 API), built on ``While`` and tensor arrays (``DynamicRNN``, its
LoD counterpart, is in ``layers/rnn_dynamic.py``).

**StaticRNN** (equal-length sequences, time major ``[seq_len, batch, ...]``) is a ``While``
loop over a step counter ``i``: ``step_input(x)`` reads ``x[i]`` inside the body, a
``memory`` is a loop-carried variable that ``update_memory`` assigns at the end of the body
(so every read in the body sees the value the step started with), and ``step_output`` writes
the step's value to a tensor array that ``rnn()`` stacks to ``[seq_len, ...]``. fluid 1.8
compiled StaticRNN into one ``recurrent`` op; fluidlite uses the ``while`` op instead (same
values and gradients; the program shows ``while`` / ``while_grad``).
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..core import atomic as _atomic
from ..core.ir import Variable, default_startup_program
from ..layer_helper import LayerHelper
from .rnn import _var

__all__ = ["StaticRNN"]



def _L() -> Any:
    from .. import layers
    return layers


def _cf() -> Any:
    from . import control_flow
    return control_flow


class _Memory:
    def __init__(self, state: Variable) -> None:
        self.state = state              # the loop-carried variable (outer block)
        self.new: Optional[Variable] = None


class _ParentBlock:
    """Build in the parent of the current block (the block holding the loop)."""

    def __init__(self, prog: Any) -> None:
        self.prog = prog

    def __enter__(self) -> Any:
        self.cur = self.prog.current_block_idx
        self.prog.current_block_idx = self.prog.current_block().parent_idx
        return self.prog.current_block()

    def __exit__(self, *exc: Any) -> bool:
        self.prog.current_block_idx = self.cur
        return False


class _WhileLoopBuild:
    """The build skeleton that ``StaticRNN`` and ``DynamicRNN`` share: the whole step block is
    one build transaction (an error leaves the programs as they were) holding a ``While`` loop
    on the condition variable ``<name>.cond``. Uses ``self.helper``; sets ``self._prog``,
    ``_txn``, ``_while`` and ``_guard``."""

    helper: LayerHelper

    def _open_loop(self, n_counters: int) -> Tuple[List[Variable], Variable]:
        """Open the transaction, create ``n_counters`` int64 ``[1]`` zero counters and the
        bool condition (all stop_gradient) in the current block, enter the ``While`` block;
        returns ``(counters, cond)``."""
        L, cf = _L(), _cf()
        prog = self.helper.main_program
        self._prog = prog
        self._txn = _atomic.atomic(prog, default_startup_program())
        self._txn.__enter__()
        counters = []
        for _ in range(n_counters):
            counters.append(L.fill_constant([1], "int64", 0))
            counters[-1].stop_gradient = True
        cond = prog.current_block().create_var(
            name=self.helper.name + ".cond", shape=[1], dtype="bool")
        cond.stop_gradient = True
        self._while = cf.While(cond)
        self._guard = self._while.block()
        self._guard.__enter__()
        return counters, cond

    def _close_loop(self, exc: Any, finish_body: Callable[[], None],
                    after_loop: Optional[Callable[[], None]] = None) -> None:
        """End the build ``_open_loop`` started; ``exc`` is the error leaving the user's
        block (or None). Without one, ``finish_body()`` adds the step's last ops inside the
        body, the ``While`` block closes, ``after_loop()`` builds what follows the loop and
        the transaction commits. Any error (``exc``, or one raised here, which propagates)
        closes the block and rolls the transaction back."""
        closed = False
        try:
            if exc is None:
                finish_body()
            closed = True
            self._guard.__exit__(type(exc) if exc else None, exc, None)
            if exc is None and after_loop is not None:
                after_loop()
        except BaseException as e:
            if not closed:
                self._guard.__exit__(type(e), e, e.__traceback__)
            self._txn.__exit__(type(e), e, e.__traceback__)
            raise
        self._txn.__exit__(type(exc) if exc else None, exc, None)


class _LoopGuard:
    """``with rnn.step():`` / ``with drnn.block():``: ``rnn._begin()`` on entry,
    ``rnn._end(error or None)`` on exit (the error, if any, propagates)."""

    def __init__(self, rnn: Any) -> None:
        self.rnn = rnn

    def __enter__(self) -> Any:
        self.rnn._begin()
        return self.rnn

    def __exit__(self, exc_type: Any, exc_val: Any, exc_tb: Any) -> bool:
        self.rnn._end(exc_val)
        return False


class StaticRNN(_WhileLoopBuild):
    """Equal-length RNN: define one step inside ``with rnn.step():`` (see module docstring).

    ``step_input(x)`` -> the current step of ``x`` ([seq_len, ...]); ``memory(init=None,
    shape=None, batch_ref=None, init_value=0.0, init_batch_dim_idx=0, ref_batch_dim_idx=1)``
    -> the memory at the start of the step (from ``init``, or a ``[batch, *shape]`` constant
    whose batch size is ``batch_ref``'s dim ``ref_batch_dim_idx`` -- for a step input, of the
    whole sequence, as in fluid); ``update_memory(mem, var)``; ``step_output(o)`` /
    ``output(*o)``; ``rnn()`` -> the stacked outputs (one Variable or a list).

    Args:
        name (str | None): name prefix.
    Returns:
        StaticRNN: the builder; after the ``with rnn.step():`` statement, ``rnn()`` returns the
        stacked outputs (a Variable or a list).
    Raises:
        ValueError: ``step()`` is entered twice, the step has no ``step_input`` or leaves a
            memory never updated, or ``rnn()`` is called before the step ends or without
            outputs.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [3, 1, 2])            # [time, batch, feature]
        ...     rnn = fluid.layers.StaticRNN()
        ...     with rnn.step():
        ...         x_t = rnn.step_input(x)
        ...         h_prev = rnn.memory(shape=[-1, 2], batch_ref=x_t)
        ...         h = h_prev + x_t                       # a running sum over time
        ...         rnn.update_memory(h_prev, h)
        ...         rnn.step_output(h)
        ...     out = rnn()
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> exe.run(main, feed={"x": np.ones((3, 1, 2), "float32")}, fetch_list=[out])[0][:, 0]
        array([[1., 1.],
               [2., 2.],
               [3., 3.]], dtype=float32)
    """

    BEFORE_RNN_BLOCK, IN_RNN_BLOCK, AFTER_RNN_BLOCK = 0, 1, 2
    # constructing one builds nothing; ``with rnn.step():`` is one build transaction
    __fluidlite_atomic__ = True

    def __init__(self, name: Optional[str] = None) -> None:
        self.helper = LayerHelper("static_rnn", name=name)
        self.status = StaticRNN.BEFORE_RNN_BLOCK
        self._step_inputs: Dict[str, Variable] = {}   # inner step var name -> outer sequence
        self._mems: Dict[str, _Memory] = {}           # state var name -> memory
        self._mem_order: List[str] = []
        self._outputs: List[Variable] = []            # arrays, one per step output
        self._step_outs: List[Variable] = []
        self._seq_len: Any = None
        self._stacked: Optional[List[Variable]] = None

    # -- the block ---------------------------------------------------------------------------
    def step(self) -> "_LoopGuard":
        """The context in which the ops of one step are defined.

        Args:
            None: this method takes no arguments.
        Returns:
            _LoopGuard: a context manager; the ops built inside form one step.
        Raises:
            ValueError: the step was already entered once, or (on exit) no ``step_input`` was
                called or a memory was never updated.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     x = fluid.data("x", [3, 1, 2])
            ...     rnn = fluid.layers.StaticRNN()
            ...     with rnn.step():
            ...         # one time step of x: [1, 2]
            ...         x_t = rnn.step_input(x)
            ...         h_prev = rnn.memory(shape=[-1, 2], batch_ref=x_t)  # zeros at t = 0
            ...         h = h_prev * 0.5 + x_t
            ...         rnn.update_memory(h_prev, h)
            ...         rnn.step_output(h)
            ...     out = rnn()
            >>> exe = fluid.Executor(fluid.CPUPlace())
            >>> exe.run(main, feed={"x": np.ones((3, 1, 2), "float32")}, fetch_list=[out])[0][:, 0]
            array([[1.  , 1.  ],
                   [1.5 , 1.5 ],
                   [1.75, 1.75]], dtype=float32)
        """
        return _LoopGuard(self)

    def _assert_in_rnn_block_(self, method: str) -> None:
        if self.status != StaticRNN.IN_RNN_BLOCK:
            raise ValueError(f"You must invoke {method} in rnn block")

    def _begin(self) -> None:
        if self.status != StaticRNN.BEFORE_RNN_BLOCK:
            raise ValueError("StaticRNN: step() can be entered only once")
        (self._i,), self._cond = self._open_loop(1)
        self.status = StaticRNN.IN_RNN_BLOCK

    def _end(self, exc: Any) -> None:
        L = _L()

        def finish_body() -> None:
            if self._seq_len is None:
                raise ValueError("StaticRNN: call step_input() at least once inside step(); "
                                 "the step inputs give the number of steps")
            for name in self._mem_order:
                mem = self._mems[name]
                if mem.new is None:
                    raise ValueError(f"StaticRNN: memory '{name}' is never updated; call "
                                     f"update_memory(mem, new_value) inside step()")
                L.assign(mem.new, mem.state)
            L.increment(self._i, 1.0, in_place=True)
            L.less_than(self._i, self._seq_len, cond=self._cond)

        self._close_loop(exc, finish_body)
        self.status = StaticRNN.AFTER_RNN_BLOCK

    # -- step API ----------------------------------------------------------------------------
    def step_input(self, x: Variable) -> Variable:
        """Mark ``x`` ([seq_len, ...]) as a sequence input; returns its current step.

        Args:
            x (Variable): a tensor [seq_len, ...]; every step input has the same ``seq_len``.
        Returns:
            Variable: the current step ``x[t]``, shape ``x.shape[1:]``.
        Raises:
            ValueError: called outside ``step()``, ``x`` has no dimension, or its ``seq_len``
                differs from the first step input's.
            TypeError: ``x`` is not a Variable.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     x = fluid.data("x", [3, 1, 2])
            ...     rnn = fluid.layers.StaticRNN()
            ...     with rnn.step():
            ...         # one time step of x: [1, 2]
            ...         x_t = rnn.step_input(x)
            ...         h_prev = rnn.memory(shape=[-1, 2], batch_ref=x_t)  # zeros at t = 0
            ...         h = h_prev * 0.5 + x_t
            ...         rnn.update_memory(h_prev, h)
            ...         rnn.step_output(h)
            ...     out = rnn()
            >>> exe = fluid.Executor(fluid.CPUPlace())
            >>> exe.run(main, feed={"x": np.ones((3, 1, 2), "float32")}, fetch_list=[out])[0][:, 0]
            array([[1.  , 1.  ],
                   [1.5 , 1.5 ],
                   [1.75, 1.75]], dtype=float32)
        """
        self._assert_in_rnn_block_("step_input")
        L = _L()
        _var(x, "x", "StaticRNN.step_input")
        if len(x.shape) < 1:
            raise ValueError("StaticRNN.step_input: x must have a time dimension")
        if self._seq_len is None:
            with _ParentBlock(self._prog):
                if x.shape[0] >= 0:
                    self._seq_len = L.fill_constant([1], "int64", int(x.shape[0]))
                    self._static_len = int(x.shape[0])
                else:
                    self._seq_len = L.cast(L.slice(L.shape(x), axes=[0], starts=[0],
                                                   ends=[1]), "int64")
                    self._static_len = -1
                self._seq_len.stop_gradient = True
                L.less_than(self._i, self._seq_len, cond=self._cond)
        elif x.shape[0] >= 0 and self._static_len >= 0 and x.shape[0] != self._static_len:
            raise ValueError(f"Static RNN only take fix seq_len input: step input "
                             f"'{x.name}' has {x.shape[0]} steps, the first had "
                             f"{self._static_len}")
        step = L.squeeze(L.gather(x, self._i), axes=[0])
        self._step_inputs[step.name] = x
        return step

    def memory(self, init: Optional[Variable] = None, shape: Optional[Sequence[int]] = None,
               batch_ref: Optional[Variable] = None, init_value: float = 0.0,
               init_batch_dim_idx: int = 0, ref_batch_dim_idx: int = 1) -> Variable:
        """A memory: its value at the start of the current step (see the class docstring).

        Args:
            init (Variable | None, default None): the initial value (copied).
            shape (list of int | None, default None): without ``init``, the memory shape (its
                batch dim is taken from ``batch_ref``).
            batch_ref (Variable | None, default None): without ``init``, the variable giving the
                batch size.
            init_value (float, default 0.0): without ``init``, the fill value.
            init_batch_dim_idx (int, default 0): the batch axis in ``shape``.
            ref_batch_dim_idx (int, default 1): the batch axis of ``batch_ref``.
        Returns:
            Variable: the memory's value at the start of the step.
        Raises:
            ValueError: called outside ``step()``, ``init`` is None without both ``shape`` and
                ``batch_ref``, or ``batch_ref`` is computed inside the step.
            TypeError: ``init`` or ``batch_ref`` is not a Variable.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     x = fluid.data("x", [3, 1, 2])
            ...     rnn = fluid.layers.StaticRNN()
            ...     with rnn.step():
            ...         # one time step of x: [1, 2]
            ...         x_t = rnn.step_input(x)
            ...         h_prev = rnn.memory(shape=[-1, 2], batch_ref=x_t)  # zeros at t = 0
            ...         h = h_prev * 0.5 + x_t
            ...         rnn.update_memory(h_prev, h)
            ...         rnn.step_output(h)
            ...     out = rnn()
            >>> exe = fluid.Executor(fluid.CPUPlace())
            >>> exe.run(main, feed={"x": np.ones((3, 1, 2), "float32")}, fetch_list=[out])[0][:, 0]
            array([[1.  , 1.  ],
                   [1.5 , 1.5 ],
                   [1.75, 1.75]], dtype=float32)
        """
        self._assert_in_rnn_block_("memory")
        L = _L()
        if init is None:
            if shape is None or batch_ref is None:
                raise ValueError("StaticRNN.memory: if init is None, memory at least need "
                                 "shape and batch_ref")
            if not isinstance(batch_ref, Variable):
                raise TypeError("StaticRNN.memory: batch_ref must be a Variable")
            ref = self._step_inputs.get(batch_ref.name, batch_ref)
            if ref is batch_ref and ref.block is self._prog.current_block():
                raise ValueError(f"StaticRNN.memory: batch_ref '{batch_ref.name}' is computed "
                                 f"inside the step; use a step input or an outer variable")
            with _ParentBlock(self._prog):
                boot = L.fill_constant_batch_size_like(
                    input=ref, shape=list(shape), dtype=batch_ref.dtype, value=init_value,
                    input_dim_idx=ref_batch_dim_idx, output_dim_idx=init_batch_dim_idx)
                boot.stop_gradient = True
                state = L.assign(boot)
        else:
            _var(init, "init", "StaticRNN.memory")
            with _ParentBlock(self._prog):
                state = L.assign(init)     # a copy: the loop must not overwrite init
        self._mems[state.name] = _Memory(state)
        self._mem_order.append(state.name)
        return state

    def update_memory(self, mem: Variable, var: Variable) -> None:
        """The memory ``mem`` takes ``var``'s value for the next step.

        Args:
            mem (Variable): a memory returned by ``memory``.
            var (Variable): its value for the next step (same shape and dtype).
        Returns:
            None: the link is recorded for the step.
        Raises:
            ValueError: called outside ``step()``, ``mem`` is not a memory of this RNN, or ``var``
                differs from it in shape or dtype.
            TypeError: ``mem`` or ``var`` is not a Variable.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     x = fluid.data("x", [3, 1, 2])
            ...     rnn = fluid.layers.StaticRNN()
            ...     with rnn.step():
            ...         # one time step of x: [1, 2]
            ...         x_t = rnn.step_input(x)
            ...         h_prev = rnn.memory(shape=[-1, 2], batch_ref=x_t)  # zeros at t = 0
            ...         h = h_prev * 0.5 + x_t
            ...         rnn.update_memory(h_prev, h)
            ...         rnn.step_output(h)
            ...     out = rnn()
            >>> exe = fluid.Executor(fluid.CPUPlace())
            >>> exe.run(main, feed={"x": np.ones((3, 1, 2), "float32")}, fetch_list=[out])[0][:, 0]
            array([[1.  , 1.  ],
                   [1.5 , 1.5 ],
                   [1.75, 1.75]], dtype=float32)
        """
        self._assert_in_rnn_block_("update_memory")
        if not isinstance(mem, Variable) or not isinstance(var, Variable):
            raise TypeError("StaticRNN.update_memory: mem and var must be Variables")
        if mem.name not in self._mems:
            raise ValueError(f"StaticRNN.update_memory: '{mem.name}' is not a memory of this "
                             f"StaticRNN (create it with rnn.memory())")
        if len(mem.shape) != len(var.shape) or any(
                a >= 0 and b >= 0 and a != b for a, b in zip(mem.shape, var.shape)) \
                or mem.dtype != var.dtype:
            raise ValueError(f"StaticRNN.update_memory: var '{var.name}' "
                             f"{list(var.shape)} must have the shape and dtype of memory "
                             f"'{mem.name}' {list(mem.shape)}")
        self._mems[mem.name].new = var

    def step_output(self, o: Variable) -> None:
        """Collect ``o`` of every step; ``rnn()`` returns them stacked ([seq_len, ...]).

        Args:
            o (Variable): the step's variable to collect.
        Returns:
            None: ``rnn()`` returns the collected outputs stacked.
        Raises:
            ValueError: called outside ``step()``.
            TypeError: ``o`` is not a Variable.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     x = fluid.data("x", [3, 1, 2])
            ...     rnn = fluid.layers.StaticRNN()
            ...     with rnn.step():
            ...         # one time step of x: [1, 2]
            ...         x_t = rnn.step_input(x)
            ...         h_prev = rnn.memory(shape=[-1, 2], batch_ref=x_t)  # zeros at t = 0
            ...         h = h_prev * 0.5 + x_t
            ...         rnn.update_memory(h_prev, h)
            ...         rnn.step_output(h)
            ...     out = rnn()
            >>> exe = fluid.Executor(fluid.CPUPlace())
            >>> exe.run(main, feed={"x": np.ones((3, 1, 2), "float32")}, fetch_list=[out])[0][:, 0]
            array([[1.  , 1.  ],
                   [1.5 , 1.5 ],
                   [1.75, 1.75]], dtype=float32)
        """
        self._assert_in_rnn_block_("step_output")
        cf = _cf()
        _var(o, "o", "StaticRNN.step_output")
        with _ParentBlock(self._prog):
            arr = cf.create_array(o.dtype)
        cf.array_write(o, self._i, arr)
        self._outputs.append(arr)
        self._step_outs.append(o)

    def output(self, *outputs: Variable) -> None:
        """``step_output`` for each of ``outputs``.

        Args:
            *outputs (Variable): the step's variables to collect.
        Returns:
            None: ``rnn()`` returns the collected outputs stacked.
        Raises:
            ValueError: called outside ``step()``.
            TypeError: an output is not a Variable.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     x = fluid.data("x", [3, 1, 2])
            ...     rnn = fluid.layers.StaticRNN()
            ...     with rnn.step():
            ...         # one time step of x: [1, 2]
            ...         x_t = rnn.step_input(x)
            ...         h_prev = rnn.memory(shape=[-1, 2], batch_ref=x_t)  # zeros at t = 0
            ...         h = h_prev * 0.5 + x_t
            ...         rnn.update_memory(h_prev, h)
            ...         rnn.output(h)
            ...     out = rnn()
            >>> exe = fluid.Executor(fluid.CPUPlace())
            >>> exe.run(main, feed={"x": np.ones((3, 1, 2), "float32")}, fetch_list=[out])[0][:, 0]
            array([[1.  , 1.  ],
                   [1.5 , 1.5 ],
                   [1.75, 1.75]], dtype=float32)
        """
        for o in outputs:
            self.step_output(o)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.status != StaticRNN.AFTER_RNN_BLOCK:
            raise ValueError("RNN output can only be retrieved after rnn block")
        if not self._outputs:
            raise ValueError("RNN has no output")
        if self._stacked is None:
            L = _L()
            self._stacked = [L.tensor_array_to_tensor(a, axis=0, use_stack=True)[0]
                             for a in self._outputs]
            if self._static_len >= 0:       # the number of steps is known: say so
                for v, o in zip(self._stacked, self._step_outs):
                    v._set_spec(v.spec.with_(shape=[self._static_len] + list(o.shape)))
        return self._stacked[0] if len(self._stacked) == 1 else list(self._stacked)

    def final_memories(self) -> List[Variable]:
        """The memories after the last step (in creation order)."""
        if self.status != StaticRNN.AFTER_RNN_BLOCK:
            raise ValueError("StaticRNN: memories are final only after the rnn block")
        return [self._mems[n].state for n in self._mem_order]
