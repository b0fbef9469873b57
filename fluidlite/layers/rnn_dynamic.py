"""``DynamicRNN`` (fluid 1.8 API) over LoD sequences, built as fluid built it: a ``While``
loop over the steps of a ``lod_rank_table``.

The rank table orders the sequences longest first. ``step_input(x, level)`` splits ``x`` into
per-step batches (``lod_tensor_to_array``: entry t holds step t of every sequence longer than t,
in rank order -- a row, or for a nested LoD stepped above its last level a whole sub-sequence
with its LoD) and reads entry ``i`` in the body; a memory is a loop variable holding one row
per sequence in rank order, cut to the sequences still running (``shrink_rnn_memory``) when a
step reads it; ``update_memory`` writes the new rows of the running sequences over its first
rows (fluid kept memories in tensor arrays written at step t + 1; the values are the same); a
``static_input`` is reordered by rank
(``reorder_lod_tensor_by_rank``) and shrunk the same way; outputs are written to arrays that
``array_to_lod_tensor`` reassembles in the input's order and LoD after the loop. Inside the
block the batch therefore holds the running sequences, longest first, as in fluid.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

from ..core.ir import Variable
from ..layer_helper import LayerHelper
from .rnn_static import _L, _LoopGuard, _ParentBlock, _WhileLoopBuild, _cf

__all__ = ["DynamicRNN"]


class DynamicRNN(_WhileLoopBuild):
    """RNN over LoD sequences of different lengths; define one step inside
    ``with drnn.block():`` (see the module docstring). ``step_input(x, level=0)`` -> this
    step's rows of the running sequences; ``static_input(x)`` -> ``x`` reordered by rank and
    shrunk to the running sequences; ``memory(init=None, shape=None, value=0.0,
    need_reorder=False, dtype='float32')``; ``update_memory(ex_mem, new_mem)``;
    ``output(*o)``; ``drnn()`` -> the outputs as LoD tensors in the input's order and LoD (one
    Variable or a list).

    Args:
        name (str | None): name prefix.
    Returns:
        DynamicRNN: the builder; after the ``with drnn.block():`` statement, ``drnn()`` returns
        the outputs (a Variable or a list).
    Raises:
        ValueError: ``block()`` is entered twice, the block has no ``step_input``, or ``drnn()``
            is called inside the block or without any ``output``.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 1], lod_level=1)
        ...     drnn = fluid.layers.DynamicRNN()
        ...     with drnn.block():
        ...         x_t = drnn.step_input(x)
        ...         acc = drnn.memory(shape=[1], value=0.0)
        ...         new = acc + x_t
        ...         drnn.update_memory(acc, new)
        ...         drnn.output(new)
        ...     out = fluid.layers.sequence_last_step(drnn())
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> place = fluid.CPUPlace()
        >>> seq = fluid.create_lod_tensor(np.arange(5, dtype="float32").reshape(5, 1), [[2, 3]], place)
        >>> exe.run(main, feed={"x": seq}, fetch_list=[out])[0].ravel()      # 0+1, 2+3+4
        array([1., 9.], dtype=float32)
    """

    BEFORE_RNN, IN_RNN, AFTER_RNN = 0, 1, 2
    # constructing one builds nothing; ``with drnn.block():`` is one build transaction
    __fluidlite_atomic__ = True

    def __init__(self, name: Optional[str] = None) -> None:
        self.helper = LayerHelper("dynamic_rnn", name=name)
        self.status = DynamicRNN.BEFORE_RNN
        self.lod_rank_table: Optional[Variable] = None
        self.max_seq_len: Optional[Variable] = None
        self.input_array: List[Any] = []          # (array, dtype) of each step input
        self.mem_dict: Dict[str, Variable] = {}   # memory var name -> its loop variable
        self.mem_link: List[Any] = []             # (new value, loop variable)
        self.output_array: List[Variable] = []
        self.outputs: List[Variable] = []
        self._entered = False

    def block(self) -> _LoopGuard:
        """The context in which the ops of one step are defined.

        Args:
            None: this method takes no arguments.
        Returns:
            _LoopGuard: a context manager; the ops built inside form one step.
        Raises:
            ValueError: the block was already entered once, or (on exit) no ``step_input`` was
                called inside it.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     x = fluid.data("x", [-1, 1], lod_level=1)
            ...     bias = fluid.data("bias", [2, 1])                 # one row per sequence
            ...     drnn = fluid.layers.DynamicRNN()
            ...     with drnn.block():
            ...         x_t = drnn.step_input(x)
            ...         b = drnn.static_input(bias)
            ...         acc = drnn.memory(shape=[1], value=0.0)
            ...         new = acc + x_t + b
            ...         drnn.update_memory(acc, new)
            ...         drnn.output(new)
            ...     out = fluid.layers.sequence_last_step(drnn())
            >>> exe = fluid.Executor(fluid.CPUPlace())
            >>> seq = fluid.create_lod_tensor(np.arange(5, dtype="float32").reshape(5, 1), [[2, 3]],
            ...                               fluid.CPUPlace())
            >>> exe.run(main, feed={"x": seq, "bias": np.array([[0], [10]], "float32")},
            ...         fetch_list=[out])[0].ravel()            # 0+1 and (2+10)+(3+10)+(4+10)
            array([ 1., 39.], dtype=float32)
        """
        if self._entered:
            raise ValueError("rnn.block() can only be invoke once")
        self._entered = True
        return _LoopGuard(self)

    def _assert_in_rnn_block_(self, method: str) -> None:
        if self.status != DynamicRNN.IN_RNN:
            raise ValueError(f"{method} can only be invoked inside rnn block.")

    def _parent(self) -> _ParentBlock:
        return _ParentBlock(self._prog)

    def _begin(self) -> None:
        (self.step_idx, self.zero_idx), self.cond = self._open_loop(2)
        self.status = DynamicRNN.IN_RNN

    def _end(self, exc: Any) -> None:
        L, cf = _L(), _cf()

        def finish_body() -> None:
            if self.lod_rank_table is None:
                raise ValueError("DynamicRNN: call step_input() at least once inside "
                                 "block(); the step inputs give the sequences")
            for new_mem, state in self.mem_link:
                # rows of the running sequences come first in rank order: replace them
                running = L.cast(L.slice(L.shape(new_mem), axes=[0], starts=[0],
                                         ends=[1]), "int64")
                total = L.cast(L.slice(L.shape(state), axes=[0], starts=[0], ends=[1]),
                               "int64")
                rest = L.gather(state, L.range(running, total, 1, "int64"))
                L.assign(L.concat([new_mem, rest], axis=0), state)
            L.increment(self.step_idx, 1.0, in_place=True)
            L.less_than(self.step_idx, self.max_seq_len, cond=self.cond)

        def after_loop() -> None:
            self.status = DynamicRNN.AFTER_RNN
            self.outputs = [cf.array_to_lod_tensor(a, self.lod_rank_table)
                            for a in self.output_array]

        self._close_loop(exc, finish_body, after_loop)
        self.status = DynamicRNN.AFTER_RNN

    def step_input(self, x: Variable, level: int = 0) -> Variable:
        """Mark the LoD tensor ``x`` as a sequence input (split at LoD ``level``); returns
        this step's rows of the running sequences.

        Args:
            x (Variable): a LoD tensor of the input sequences.
            level (int, default 0): the LoD level whose sequences are stepped over. A step of a
                sequence is one element of the next level: a row when ``level`` is ``x``'s
                last LoD level, a whole sub-sequence (with its LoD) above it -- fluid's
                hierarchical RNN over sentences of words.
        Returns:
            Variable: this step of the running sequences, longest first: [num_running, ...]
            rows, or the running sequences' current sub-sequences as a LoD tensor.
        Raises:
            ValueError: called outside ``block()``, or ``level`` is not one of ``x``'s LoD
                levels.
            TypeError: ``x`` is not a Variable.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     x = fluid.data("x", [-1, 1], lod_level=1)
            ...     bias = fluid.data("bias", [2, 1])                 # one row per sequence
            ...     drnn = fluid.layers.DynamicRNN()
            ...     with drnn.block():
            ...         x_t = drnn.step_input(x)
            ...         b = drnn.static_input(bias)
            ...         acc = drnn.memory(shape=[1], value=0.0)
            ...         new = acc + x_t + b
            ...         drnn.update_memory(acc, new)
            ...         drnn.output(new)
            ...     out = fluid.layers.sequence_last_step(drnn())
            >>> exe = fluid.Executor(fluid.CPUPlace())
            >>> seq = fluid.create_lod_tensor(np.arange(5, dtype="float32").reshape(5, 1), [[2, 3]],
            ...                               fluid.CPUPlace())
            >>> exe.run(main, feed={"x": seq, "bias": np.array([[0], [10]], "float32")},
            ...         fetch_list=[out])[0].ravel()            # 0+1 and (2+10)+(3+10)+(4+10)
            array([ 1., 39.], dtype=float32)
        """
        self._assert_in_rnn_block_("step_input")
        L, cf = _L(), _cf()
        if not isinstance(x, Variable):
            raise TypeError(f"step_input() can only take a Variable as its input, but "
                            f"received {type(x).__name__}")
        lod_level = getattr(x, "lod_level", 0)
        if not isinstance(level, int) or level < 0 or level >= max(lod_level, 1):
            raise ValueError(f"DynamicRNN.step_input: level must be an LoD level of '{x.name}', "
                             f"in [0, {max(lod_level, 1)}) for its lod_level {lod_level}, but "
                             f"received {level!r}")
        with self._parent():
            if self.lod_rank_table is None:
                self.lod_rank_table = cf.lod_rank_table(x, level=level)
                self.max_seq_len = cf.max_sequence_len(self.lod_rank_table)
                L.less_than(self.step_idx, self.max_seq_len, cond=self.cond)
            arr = cf.lod_tensor_to_array(x, self.lod_rank_table)
        self.input_array.append((arr, x.dtype))
        return cf.array_read(arr, self.step_idx)

    def static_input(self, x: Variable) -> Variable:
        """``x`` (one row per input sequence) reordered by rank and cut to the sequences
        still running at this step.

        Args:
            x (Variable): a tensor with one row (or sequence) per input sequence.
        Returns:
            Variable: ``x`` reordered by sequence length and cut to the sequences still running.
        Raises:
            ValueError: called outside ``block()``.
            TypeError: ``x`` is not a Variable.
            RuntimeError: called before ``step_input``.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     x = fluid.data("x", [-1, 1], lod_level=1)
            ...     bias = fluid.data("bias", [2, 1])                 # one row per sequence
            ...     drnn = fluid.layers.DynamicRNN()
            ...     with drnn.block():
            ...         x_t = drnn.step_input(x)
            ...         b = drnn.static_input(bias)
            ...         acc = drnn.memory(shape=[1], value=0.0)
            ...         new = acc + x_t + b
            ...         drnn.update_memory(acc, new)
            ...         drnn.output(new)
            ...     out = fluid.layers.sequence_last_step(drnn())
            >>> exe = fluid.Executor(fluid.CPUPlace())
            >>> seq = fluid.create_lod_tensor(np.arange(5, dtype="float32").reshape(5, 1), [[2, 3]],
            ...                               fluid.CPUPlace())
            >>> exe.run(main, feed={"x": seq, "bias": np.array([[0], [10]], "float32")},
            ...         fetch_list=[out])[0].ravel()            # 0+1 and (2+10)+(3+10)+(4+10)
            array([ 1., 39.], dtype=float32)
        """
        self._assert_in_rnn_block_("static_input")
        cf = _cf()
        if not isinstance(x, Variable):
            raise TypeError(f"static_input() can only take a Variable as its input, but "
                            f"received {type(x).__name__}")
        if self.lod_rank_table is None:
            raise RuntimeError("static_input() must be called after step_input().")
        with self._parent():
            reordered = cf.reorder_lod_tensor_by_rank(x, self.lod_rank_table)
        return cf.shrink_memory(reordered, self.step_idx, self.lod_rank_table)

    def memory(self, init: Optional[Variable] = None, shape: Optional[Sequence[int]] = None,
               value: float = 0.0, need_reorder: bool = False,
               dtype: Any = "float32") -> Variable:
        """A memory: its value at the start of the current step for the running sequences
        (from ``init`` -- reordered by rank when ``need_reorder`` -- or a ``[batch, *shape]``
        constant ``value``).

        Args:
            init (Variable | None, default None): the initial value, one row per sequence.
            shape (list of int | None, default None): without ``init``, the memory shape without
                the batch dim.
            value (float, default 0.0): without ``init``, the fill value.
            need_reorder (bool, default False): reorder ``init`` by sequence length (needed when
                its rows follow the input order).
            dtype (str | numpy dtype, default "float32"): without ``init``, the memory dtype.
        Returns:
            Variable: the memory's value at the start of the step, for the running sequences.
        Raises:
            ValueError: called outside ``block()``, ``need_reorder`` or ``shape`` is used before
                ``step_input``, or neither ``init`` nor ``shape`` is given.
            TypeError: ``init`` is not a Variable.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     x = fluid.data("x", [-1, 1], lod_level=1)
            ...     bias = fluid.data("bias", [2, 1])                 # one row per sequence
            ...     drnn = fluid.layers.DynamicRNN()
            ...     with drnn.block():
            ...         x_t = drnn.step_input(x)
            ...         b = drnn.static_input(bias)
            ...         acc = drnn.memory(shape=[1], value=0.0)
            ...         new = acc + x_t + b
            ...         drnn.update_memory(acc, new)
            ...         drnn.output(new)
            ...     out = fluid.layers.sequence_last_step(drnn())
            >>> exe = fluid.Executor(fluid.CPUPlace())
            >>> seq = fluid.create_lod_tensor(np.arange(5, dtype="float32").reshape(5, 1), [[2, 3]],
            ...                               fluid.CPUPlace())
            >>> exe.run(main, feed={"x": seq, "bias": np.array([[0], [10]], "float32")},
            ...         fetch_list=[out])[0].ravel()            # 0+1 and (2+10)+(3+10)+(4+10)
            array([ 1., 39.], dtype=float32)
        """
        self._assert_in_rnn_block_("memory")
        L, cf = _L(), _cf()
        if init is not None:
            if not isinstance(init, Variable):
                raise TypeError(f"The input arg `init` of memory() must be a Variable, but "
                                f"received {type(init).__name__}")
            with self._parent():
                if need_reorder:
                    if self.lod_rank_table is None:
                        raise ValueError("If set need_reorder to True, make sure step_input be "
                                         "invoked before memory(init=init, need_reordered="
                                         "True, ...).")
                    init = cf.reorder_lod_tensor_by_rank(init, self.lod_rank_table)
                state = L.assign(init)      # a copy: the loop must not overwrite init
            mem = cf.shrink_memory(state, self.step_idx, self.lod_rank_table)
            self.mem_dict[mem.name] = state
            return mem
        if not self.input_array:
            raise ValueError("step_input should be invoked before memory(shape=..., "
                             "value=...)")
        if shape is None:
            raise ValueError("DynamicRNN.memory: if init is None, shape must be given")
        with self._parent():
            first = cf.array_read(self.input_array[0][0], self.zero_idx)
            boot = L.fill_constant_batch_size_like(input=first, shape=[-1] + list(shape),
                                                   dtype=dtype, value=float(value))
            boot.stop_gradient = True
        return self.memory(init=boot)

    def update_memory(self, ex_mem: Variable, new_mem: Variable) -> None:
        """The memory ``ex_mem`` takes ``new_mem`` for the next step.

        Args:
            ex_mem (Variable): a memory returned by ``memory``.
            new_mem (Variable): its value for the next step (same rank and dtype).
        Returns:
            None: the link is recorded for the step.
        Raises:
            ValueError: called outside ``block()``, ``ex_mem`` is not a memory of this RNN, or
                ``new_mem`` differs from it in rank or dtype.
            TypeError: ``ex_mem`` or ``new_mem`` is not a Variable.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     x = fluid.data("x", [-1, 1], lod_level=1)
            ...     bias = fluid.data("bias", [2, 1])                 # one row per sequence
            ...     drnn = fluid.layers.DynamicRNN()
            ...     with drnn.block():
            ...         x_t = drnn.step_input(x)
            ...         b = drnn.static_input(bias)
            ...         acc = drnn.memory(shape=[1], value=0.0)
            ...         new = acc + x_t + b
            ...         drnn.update_memory(acc, new)
            ...         drnn.output(new)
            ...     out = fluid.layers.sequence_last_step(drnn())
            >>> exe = fluid.Executor(fluid.CPUPlace())
            >>> seq = fluid.create_lod_tensor(np.arange(5, dtype="float32").reshape(5, 1), [[2, 3]],
            ...                               fluid.CPUPlace())
            >>> exe.run(main, feed={"x": seq, "bias": np.array([[0], [10]], "float32")},
            ...         fetch_list=[out])[0].ravel()            # 0+1 and (2+10)+(3+10)+(4+10)
            array([ 1., 39.], dtype=float32)
        """
        self._assert_in_rnn_block_("update_memory")
        if not isinstance(ex_mem, Variable) or not isinstance(new_mem, Variable):
            raise TypeError("DynamicRNN.update_memory: ex_mem and new_mem must be Variables")
        state = self.mem_dict.get(ex_mem.name)
        if state is None:
            raise ValueError("Please invoke memory before update_memory")
        if len(ex_mem.shape) != len(new_mem.shape) or ex_mem.dtype != new_mem.dtype:
            raise ValueError(f"DynamicRNN.update_memory: new_mem '{new_mem.name}' "
                             f"{list(new_mem.shape)} must have the shape and dtype of "
                             f"ex_mem '{ex_mem.name}' {list(ex_mem.shape)}")
        self.mem_link.append((new_mem, state))

    def output(self, *outputs: Variable) -> None:
        """Collect these variables of every step; ``drnn()`` returns them as LoD tensors.

        Args:
            *outputs (Variable): the step's variables to collect.
        Returns:
            None: ``drnn()`` returns the collected outputs.
        Raises:
            ValueError: called outside ``block()``.
            TypeError: an output is not a Variable.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     x = fluid.data("x", [-1, 1], lod_level=1)
            ...     bias = fluid.data("bias", [2, 1])                 # one row per sequence
            ...     drnn = fluid.layers.DynamicRNN()
            ...     with drnn.block():
            ...         x_t = drnn.step_input(x)
            ...         b = drnn.static_input(bias)
            ...         acc = drnn.memory(shape=[1], value=0.0)
            ...         new = acc + x_t + b
            ...         drnn.update_memory(acc, new)
            ...         drnn.output(new)
            ...     out = fluid.layers.sequence_last_step(drnn())
            >>> exe = fluid.Executor(fluid.CPUPlace())
            >>> seq = fluid.create_lod_tensor(np.arange(5, dtype="float32").reshape(5, 1), [[2, 3]],
            ...                               fluid.CPUPlace())
            >>> exe.run(main, feed={"x": seq, "bias": np.array([[0], [10]], "float32")},
            ...         fetch_list=[out])[0].ravel()            # 0+1 and (2+10)+(3+10)+(4+10)
            array([ 1., 39.], dtype=float32)
        """
        self._assert_in_rnn_block_("output")
        cf = _cf()
        for o in outputs:
            if not isinstance(o, Variable):
                raise TypeError(f"DynamicRNN.output: outputs must be Variables, but received "
                                f"{type(o).__name__}")
            with self._parent():
                arr = cf.create_array(o.dtype)
            cf.array_write(o, self.step_idx, arr)
            self.output_array.append(arr)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.status != DynamicRNN.AFTER_RNN:
            raise ValueError("Output of the dynamic RNN can only be visited outside the rnn "
                             "block.")
        if not self.outputs:
            raise ValueError("DynamicRNN has no output; call output() inside block()")
        return self.outputs[0] if len(self.outputs) == 1 else list(self.outputs)
