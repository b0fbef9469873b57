"""fluid 1.8's cell-based RNN API: ``RNNCell``, ``GRUCell``, ``LSTMCell``, ``rnn``, ``birnn``
(decoding with cells is in ``layers/rnn_decode.py``).

Cells are written with ordinary layers, so the same objects build static programs and run
eagerly in dygraph mode. ``rnn`` is where the modes differ, as in fluid 1.8: in a static
program it unrolls through ``StaticRNN`` (a ``While`` loop over tensor arrays); in dygraph mode
it is a Python loop.

Inputs, states and outputs may be nested structures (lists, tuples, namedtuples, dicts) of
tensors; ``_flatten`` / ``_pack`` / ``_map`` walk them.
"""
from __future__ import annotations

import copy
from typing import Any, Callable, List, Optional, Sequence, Tuple

from ..core import mode as _mode
from ..core import names
from ..core.atomic import atomic_layer as _atomic_layer
from ..core.ir import Variable
from ..layer_helper import LayerHelper, check_int
from ..param_attr import ParamAttr

__all__ = ["RNNCell", "GRUCell", "LSTMCell", "rnn", "birnn"]


def _L() -> Any:
    from .. import layers          # the package (every layer module is loaded by then)
    return layers


# -- nested structures ------------------------------------------------------------------------
def _is_seq(x: Any) -> bool:
    return isinstance(x, (list, tuple, dict))


def _flatten(x: Any) -> List[Any]:
    if isinstance(x, dict):
        return [y for k in sorted(x) for y in _flatten(x[k])]
    if isinstance(x, (list, tuple)):
        return [y for v in x for y in _flatten(v)]
    return [x]


def _pack(structure: Any, flat: Sequence[Any]) -> Any:
    it = iter(flat)

    def build(s: Any) -> Any:
        if isinstance(s, dict):
            return type(s)((k, build(s[k])) for k in sorted(s))
        if isinstance(s, tuple) and hasattr(s, "_fields"):       # namedtuple
            return type(s)(*[build(v) for v in s])
        if isinstance(s, (list, tuple)):
            return type(s)(build(v) for v in s)
        return next(it)

    return build(structure)


def _map(fn: Callable, *structs: Any) -> Any:
    flats = [_flatten(s) for s in structs]
    for f in flats[1:]:
        if len(f) != len(flats[0]):
            raise ValueError(f"nested structures differ: {len(flats[0])} vs {len(f)} tensors")
    return _pack(structs[0], [fn(*xs) for xs in zip(*flats)])


def _assert_same_structure(a: Any, b: Any, what: str) -> None:
    def shape(s: Any) -> Any:
        if isinstance(s, dict):
            return {k: shape(v) for k, v in s.items()}
        if isinstance(s, (list, tuple)):
            return [shape(v) for v in s]
        return None
    if shape(a) != shape(b):
        raise ValueError(f"{what}: the structures differ: {shape(a)} vs {shape(b)}")


def _dygraph() -> bool:
    return _mode.tracer is not None


# -- cells ------------------------------------------------------------------------------------
class RNNCell:
    """Base class of cells: ``call(inputs, states, **kwargs) -> (outputs, new_states)`` (a cell
    is called as ``cell(inputs, states)``); ``state_shape`` / ``state_dtype`` describe the
    states ``get_initial_states`` builds.

    Args:
        name (str | None, default None): a name prefix (fluid's base-class argument).
    Returns:
        RNNCell: the cell (subclasses implement ``call`` and usually ``state_shape``); calling it
        returns ``call``'s ``(outputs, new_states)``.
    Raises:
        NotImplementedError: (when called) the subclass does not implement ``call``.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> class Accumulate(fluid.layers.RNNCell):
        ...     # h_t = h_{t-1} + x_t: the output and the new state
        ...     def call(self, inputs, states):
        ...         new = states + inputs
        ...         return new, new
        ...     @property
        ...     def state_shape(self):
        ...         return [2]
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 3, 2])
        ...     outputs, final = fluid.layers.rnn(Accumulate(), x)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> exe.run(main, feed={"x": np.ones((1, 3, 2), "float32")}, fetch_list=[final])[0]
        array([[3., 3.]], dtype=float32)
    """

    def __init__(self, name: Optional[str] = None) -> None:
        self.name = name        # fluid 1.8's base-class argument (a name prefix; unused here)

    def call(self, inputs: Any, states: Any, **kwargs: Any) -> Tuple[Any, Any]:
        """One step: ``(outputs, new_states) = call(inputs, states)``; subclasses implement it with
        layers (``rnn`` calls it once per time step).

        Args:
            inputs (Variable | nested structure of Variable): the step inputs [batch, ...].
            states (Variable | nested structure of Variable): the previous states.
            **kwargs: extra arguments passed through from ``rnn`` / the decoder.
        Returns:
            tuple: ``(outputs, new_states)``; ``new_states`` has the structure of ``states``.
        Raises:
            NotImplementedError: always, in the base class (subclasses override it).

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> class Doubler(fluid.layers.RNNCell):
            ...     def call(self, inputs, states):          # (output, new state) of one step
            ...         return inputs * 2, states
            ...     @property
            ...     def state_shape(self):
            ...         return [1]
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     x = fluid.data("x", [-1, 2, 1])
            ...     outputs, _ = fluid.layers.rnn(Doubler(), x)
            >>> fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": np.ones((1, 2, 1), "float32")},
            ...                                      fetch_list=[outputs])[0].ravel()
            array([2., 2.], dtype=float32)
        """
        raise NotImplementedError("RNNCell must implent the call function.")

    # constructing a cell builds nothing; a call is one build transaction (as every layer)
    __fluidlite_atomic__ = True

    @_atomic_layer
    def __call__(self, inputs: Any, states: Any, **kwargs: Any) -> Tuple[Any, Any]:
        return self.call(inputs, states, **kwargs)

    def get_initial_states(self, batch_ref: Any, shape: Any = None, dtype: Any = None,
                           init_value: float = 0, batch_dim_idx: int = 0) -> Any:
        """States filled with ``init_value``, shaped ``[batch, *shape]`` (a ``-1`` batch dim
        is added unless a shape starts with one) with the batch size of the first tensor of
        ``batch_ref`` along ``batch_dim_idx``; ``shape`` / ``dtype`` default to
        ``state_shape`` / ``state_dtype`` (float32 when the cell gives none).

        Args:
            batch_ref (Variable | nested structure of Variable): its first tensor gives the batch
                size.
            shape (list of int | nested lists | None, default None): the state shape(s) without the
                batch dim; None uses ``state_shape``.
            dtype (str | nested str | None, default None): the state dtype(s); None uses
                ``state_dtype`` (float32 when the cell gives none).
            init_value (float, default 0): the fill value.
            batch_dim_idx (int, default 0): the batch axis of ``batch_ref``'s first tensor.
        Returns:
            Variable | nested structure of Variable: the initial states, in the structure of
            ``shape``.
        Raises:
            TypeError: a leaf of ``shape`` is not a list of ints.
            NotImplementedError: ``shape`` is None and the cell defines no ``state_shape``.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     x = fluid.data("x", [-1, 3])
            ...     cell = fluid.layers.LSTMCell(hidden_size=4)
            ...     h, c = cell.get_initial_states(batch_ref=x)
            >>> exe = fluid.Executor(fluid.CPUPlace())
            >>> [a.shape for a in exe.run(main, feed={"x": np.ones((5, 3), "float32")}, fetch_list=[h, c])]
            [(5, 4), (5, 4)]
        """
        L = _L()
        ref = _flatten(batch_ref)[0]
        shapes = self.state_shape if shape is None else shape

        def is_shape(s: Any) -> bool:
            return isinstance(s, (list, tuple)) and all(isinstance(d, int) for d in s)

        def walk(s: Any) -> Any:
            if is_shape(s):
                return list(s) if (s and s[0] == -1) else [-1] + list(s)
            if isinstance(s, (list, tuple)):
                return type(s)(walk(v) for v in s)
            raise TypeError(f"get_initial_states: a shape must be a list of ints, got {s!r}")

        shapes = walk(shapes)
        leaves: List[List[int]] = []

        def collect(s: Any) -> None:
            if is_shape(s):
                leaves.append(s)
            else:
                for v in s:
                    collect(v)
        collect(shapes)
        if dtype is None:
            try:
                dtype = self.state_dtype
            except NotImplementedError:
                dtype = "float32"
        dtypes = _flatten(dtype) if _is_seq(dtype) else [dtype] * len(leaves)
        if len(dtypes) == 1:
            dtypes = dtypes * len(leaves)
        states = [L.fill_constant_batch_size_like(input=ref, shape=s, dtype=d,
                                                  value=init_value, input_dim_idx=batch_dim_idx)
                  for s, d in zip(leaves, dtypes)]
        it = iter(states)

        def rebuild(s: Any) -> Any:
            if is_shape(s):
                return next(it)
            return type(s)(rebuild(v) for v in s)
        return rebuild(shapes)

    @property
    def state_shape(self) -> Any:
        """The shape(s) of the cell's states without the batch dim (a list, or nested lists for
        several states); subclasses define it (``get_initial_states`` uses it).

        Args:
            None: a read-only property.
        Returns:
            list: the state shape(s) without the batch dim, nested for several states.
        Raises:
            NotImplementedError: the subclass does not define ``state_shape``.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> fluid.layers.GRUCell(hidden_size=3).state_shape       # without the batch dim
            [3]
        """
        raise NotImplementedError

    @property
    def state_dtype(self) -> Any:
        """The dtype(s) of the cell's states, nested like ``state_shape``; subclasses define it
        (``get_initial_states`` uses it).

        Args:
            None: a read-only property.
        Returns:
            str | list: the state dtype(s), nested like ``state_shape``.
        Raises:
            NotImplementedError: the subclass does not define ``state_dtype``.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> fluid.layers.GRUCell(hidden_size=3).state_dtype
            'float32'
        """
        raise NotImplementedError


class _Unit:
    """Parameters of a cell, created on first use (their shapes need the input size) and
    reused by every later call, in static and dygraph mode alike. Names as fluid 1.8's
    ``BasicGRUUnit`` / ``BasicLSTMUnit`` layers: ``<name>_N.w_0`` ..."""

    def __init__(self, name: str, param_attr: Any, bias_attr: Any, dtype: str) -> None:
        self.full_name = names.generate(name)
        self.helper = LayerHelper(self.full_name, name=self.full_name)
        self.param_attr, self.bias_attr, self.dtype = param_attr, bias_attr, dtype
        self.params: Optional[List[Any]] = None

    @staticmethod
    def _suffixed(attr: Any, suffix: str) -> Any:
        attr = ParamAttr._to_attr(attr)
        if isinstance(attr, ParamAttr) and attr.name is not None:
            attr = copy.deepcopy(attr)
            attr.name += suffix
        return attr

    def create(self, specs: Sequence[Tuple[Any, Sequence[int], bool]]) -> List[Any]:
        if self.params is None:
            self.params = [self.helper.create_parameter(attr=a, shape=list(s), dtype=self.dtype,
                                                        is_bias=b) for a, s, b in specs]
        return self.params


class GRUCell(RNNCell):
    """GRU cell (fluid's ``BasicGRUUnit``): ``[r, u] = act_g([x, h] @ W_g + b_g)``,
    ``c = act_c([x, r * h] @ W_c + b_c)``, ``h' = u * h + (1 - u) * c``. Parameters
    ``<name>_N.w_0`` [in + H, 2H], ``.w_1`` [in + H, H], ``.b_0`` [2H], ``.b_1`` [H].

    Args:
        hidden_size (int): the state size.
        param_attr (ParamAttr | None): the weights' attribute.
        bias_attr (ParamAttr | None): the biases' attribute.
        gate_activation (callable | None): the gates' activation (default sigmoid).
        activation (callable | None): the candidate's activation (default tanh).
        dtype (str, default "float32"): the parameters' dtype.
        name (str, default "GRUCell"): name prefix of the parameters.
    Returns:
        GRUCell: the cell; ``cell(inputs, states)`` returns ``(h, h)``.
    Raises:
        TypeError: ``hidden_size`` is not an int.
        ValueError: ``hidden_size`` is below 1.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 5, 3])                       # [batch, time, input]
        ...     cell = fluid.layers.GRUCell(hidden_size=4)
        ...     outputs, final = fluid.layers.rnn(cell, x)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> [a.shape for a in exe.run(main, feed={"x": np.ones((2, 5, 3), "float32")},
        ...                           fetch_list=[outputs, final])]
        [(2, 5, 4), (2, 4)]
    """

    def __init__(self, hidden_size: int, param_attr: Any = None, bias_attr: Any = None,
                 gate_activation: Optional[Callable] = None,
                 activation: Optional[Callable] = None, dtype: str = "float32",
                 name: str = "GRUCell") -> None:
        self.hidden_size = check_int(hidden_size, "hidden_size", "GRUCell", minimum=1)
        self._unit = _Unit(name, param_attr, bias_attr, dtype)
        self._gate_act, self._act = gate_activation, activation

    def parameters(self) -> List[Any]:
        """The cell's parameters (empty until the first call creates them)."""
        return list(self._unit.params or [])

    def call(self, inputs: Variable, states: Variable) -> Tuple[Variable, Variable]:
        """One GRU step: ``(h, h) = call(inputs, h_prev)``.

        Args:
            inputs (Variable): the step input [batch, in_size] with ``in_size`` known.
            states (Variable): the previous hidden state [batch, hidden_size].
        Returns:
            tuple of Variable: ``(h, h)``, the new hidden state [batch, hidden_size] as output and
            as state.
        Raises:
            ValueError: the last dimension of ``inputs`` is unknown, or the shapes do not match
                the parameters (shape inference).

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     x = fluid.data("x", [-1, 3])
            ...     h = fluid.data("h", [-1, 4])
            ...     out, new_h = fluid.layers.GRUCell(hidden_size=4).call(x, h)      # one step
            >>> exe = fluid.Executor(fluid.CPUPlace())
            >>> _ = exe.run(startup)
            >>> exe.run(main, feed={"x": np.ones((2, 3), "float32"), "h": np.zeros((2, 4), "float32")},
            ...         fetch_list=[new_h])[0].shape
            (2, 4)
        """
        L = _L()
        H, u = self.hidden_size, self._unit
        if inputs.shape[-1] < 0:
            raise ValueError("GRUCell: the last dimension of inputs must be known")
        n_in = inputs.shape[-1]
        w_g, w_c, b_g, b_c = u.create([
            (u._suffixed(u.param_attr, "_gate"), [n_in + H, 2 * H], False),
            (u._suffixed(u.param_attr, "_candidate"), [n_in + H, H], False),
            (u._suffixed(u.bias_attr, "_gate"), [2 * H], True),
            (u._suffixed(u.bias_attr, "_candidate"), [H], True)])
        gate_act = self._gate_act or L.sigmoid
        act = self._act or L.tanh
        gates = gate_act(L.elementwise_add(L.matmul(L.concat([inputs, states], 1), w_g), b_g))
        r, z = L.split(gates, num_or_sections=2, dim=1)
        c = act(L.elementwise_add(L.matmul(L.concat([inputs, r * states], 1), w_c), b_c))
        h = z * states + (1 - z) * c
        return h, h

    @property
    def state_shape(self) -> List[int]:
        """``[hidden_size]``: the shape of the hidden state without the batch dim.

        Args:
            None: a read-only property.
        Returns:
            list of int: ``[hidden_size]``.
        Raises:
            None: this property does not raise.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> fluid.layers.GRUCell(hidden_size=4).state_shape
            [4]
        """
        return [self.hidden_size]

    @property
    def state_dtype(self) -> str:
        return self._unit.dtype


class LSTMCell(RNNCell):
    """LSTM cell (fluid's ``BasicLSTMUnit``): ``[i, j, f, o] = [x, h] @ W + b``,
    ``c' = c * act_g(f + forget_bias) + act_g(i) * act_c(j)``, ``h' = act_c(c') * act_g(o)``.
    States ``[h, c]``; parameters ``<name>_N.w_0`` [in + H, 4H], ``.b_0`` [4H].

    Args:
        hidden_size (int): the state size.
        param_attr (ParamAttr | None): the weights' attribute.
        bias_attr (ParamAttr | None): the biases' attribute.
        gate_activation (callable | None): the gates' activation (default sigmoid).
        activation (callable | None): the cell's activation (default tanh).
        forget_bias (float, default 1.0): added to the forget gate.
        dtype (str, default "float32"): the parameters' dtype.
        name (str, default "LSTMCell"): name prefix of the parameters.
    Returns:
        LSTMCell: the cell; ``cell(inputs, [h, c])`` returns ``(h', [h', c'])``.
    Raises:
        TypeError: ``hidden_size`` is not an int, or ``forget_bias`` is not a number or string.
        ValueError: ``hidden_size`` is below 1, or ``forget_bias`` is a string that is not a
            number.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 5, 3])
        ...     cell = fluid.layers.LSTMCell(hidden_size=4)
        ...     outputs, (h, c) = fluid.layers.rnn(cell, x)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> [a.shape for a in exe.run(main, feed={"x": np.ones((2, 5, 3), "float32")},
        ...                           fetch_list=[outputs, h, c])]
        [(2, 5, 4), (2, 4), (2, 4)]
    """

    def __init__(self, hidden_size: int, param_attr: Any = None, bias_attr: Any = None,
                 gate_activation: Optional[Callable] = None,
                 activation: Optional[Callable] = None, forget_bias: float = 1.0,
                 dtype: str = "float32", name: str = "LSTMCell") -> None:
        self.hidden_size = check_int(hidden_size, "hidden_size", "LSTMCell", minimum=1)
        self._unit = _Unit(name, param_attr, bias_attr, dtype)
        self._gate_act, self._act = gate_activation, activation
        self.forget_bias = float(forget_bias)

    def parameters(self) -> List[Any]:
        return list(self._unit.params or [])

    def call(self, inputs: Variable, states: Sequence[Variable]
             ) -> Tuple[Variable, List[Variable]]:
        """One LSTM step: ``(h, (h, c)) = call(inputs, [h_prev, c_prev])`` (fluid's gate order
        i, j, f, o; ``forget_bias`` added to f).

        Args:
            inputs (Variable): the step input [batch, in_size] with ``in_size`` known.
            states (list of Variable): ``[h_prev, c_prev]``, each [batch, hidden_size].
        Returns:
            tuple: ``(h, [h, c])``, each Variable [batch, hidden_size].
        Raises:
            ValueError: ``states`` is not a pair, the last dimension of ``inputs`` is unknown, or
                the shapes do not match the parameters (shape inference).

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     x = fluid.data("x", [-1, 3])
            ...     h = fluid.data("h", [-1, 4])
            ...     c = fluid.data("c", [-1, 4])
            ...     out, (new_h, new_c) = fluid.layers.LSTMCell(hidden_size=4).call(x, [h, c])
            >>> exe = fluid.Executor(fluid.CPUPlace())
            >>> _ = exe.run(startup)
            >>> zeros = np.zeros((2, 4), "float32")
            >>> exe.run(main, feed={"x": np.ones((2, 3), "float32"), "h": zeros, "c": zeros},
            ...         fetch_list=[new_c])[0].shape
            (2, 4)
        """
        L = _L()
        if not isinstance(states, (list, tuple)) or len(states) != 2:
            raise ValueError("LSTMCell: states must be [pre_hidden, pre_cell]")
        pre_h, pre_c = states
        H, u = self.hidden_size, self._unit
        if inputs.shape[-1] < 0:
            raise ValueError("LSTMCell: the last dimension of inputs must be known")
        w, b = u.create([(u.param_attr, [inputs.shape[-1] + H, 4 * H], False),
                         (u.bias_attr, [4 * H], True)])
        gate_act = self._gate_act or L.sigmoid
        act = self._act or L.tanh
        g = L.elementwise_add(L.matmul(L.concat([inputs, pre_h], 1), w), b)
        i, j, f, o = L.split(g, num_or_sections=4, dim=-1)
        c = L.elementwise_add(L.elementwise_mul(pre_c, gate_act(L.scale(f, bias=self.forget_bias))),
                              L.elementwise_mul(gate_act(i), act(j)))
        h = act(c) * gate_act(o)
        return h, [h, c]

    @property
    def state_shape(self) -> List[List[int]]:
        """``[[hidden_size], [hidden_size]]``: the shapes of ``h`` and ``c`` without the batch dim.

        Args:
            None: a read-only property.
        Returns:
            list of list of int: ``[[hidden_size], [hidden_size]]``.
        Raises:
            None: this property does not raise.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> fluid.layers.LSTMCell(hidden_size=4).state_shape
            [[4], [4]]
        """
        return [[self.hidden_size], [self.hidden_size]]

    @property
    def state_dtype(self) -> str:
        return self._unit.dtype


# -- rnn / birnn ------------------------------------------------------------------------------
def _transpose_batch_time(x: Variable) -> Variable:
    return _L().transpose(x, [1, 0] + list(range(2, len(x.shape))))


def _maybe_copy(state: Variable, new_state: Variable, step_mask: Variable) -> Variable:
    """``new_state`` where ``step_mask`` is 1, ``state`` where it is 0 (per batch row)."""
    L = _L()
    return L.elementwise_mul(new_state, step_mask, axis=0) - \
        L.elementwise_mul(state, step_mask - 1, axis=0)


def rnn(cell: RNNCell, inputs: Any, initial_states: Any = None,
        sequence_length: Optional[Variable] = None, time_major: bool = False,
        is_reverse: bool = False, **kwargs: Any) -> Tuple[Any, Any]:
    """Run ``cell`` over the time steps of ``inputs`` ([batch, time, ...], or [time, batch, ...]
    with ``time_major``). With ``sequence_length`` ([batch]), states stop changing past each
    sequence's end. Returns ``(outputs, final_states)``; outputs stack every step's cell
    outputs along the time axis. Static mode: one ``StaticRNN``; dygraph: a Python loop.

    Args:
        cell (RNNCell): the cell run at each step.
        inputs (Variable | nested structure of Variable): [batch, time, ...] (or
            [time, batch, ...] with ``time_major``).
        initial_states (Variable | nested structure | None, default None): the initial states;
            None uses ``cell.get_initial_states``.
        sequence_length (Variable | None, default None): int [batch] lengths; states stop
            changing after each sequence's end.
        time_major (bool, default False): the time axis of ``inputs`` (and outputs) comes first.
        is_reverse (bool, default False): run the steps back to front.
        **kwargs: passed to every ``cell.call``.
    Returns:
        tuple: ``(outputs, final_states)``: the cell outputs stacked along the time axis (the
        layout of ``inputs``), and the states after the last step.
    Raises:
        TypeError: ``cell`` is not an RNNCell (nor has a ``call``), or an input is not a
            Variable.
        ValueError: an input has fewer than 2 dims, ``cell`` returns states of another
            structure, or (dygraph) the inputs have no time steps.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 4, 3])
        ...     length = fluid.data("length", [-1], "int64")
        ...     outputs, final = fluid.layers.rnn(fluid.layers.GRUCell(hidden_size=2), x,
        ...                                       sequence_length=length)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> out, = exe.run(main, feed={"x": np.ones((2, 4, 3), "float32"),
        ...                            "length": np.array([4, 2], "int64")}, fetch_list=[outputs])
        >>> out.shape                      # [batch, time, hidden]; sequence 1 stops after 2 steps
        (2, 4, 2)
    """
    if not isinstance(cell, RNNCell) and not callable(getattr(cell, "call", None)):
        raise TypeError(f"rnn: cell must be an RNNCell, but received {type(cell).__name__}")
    L = _L()
    flat_in = _flatten(inputs)
    for x in flat_in:
        if not isinstance(x, Variable):
            raise TypeError(f"rnn: inputs must be Variables, but received {type(x).__name__}")
        if len(x.shape) < 2:
            raise ValueError(f"rnn: every input needs a batch and a time dimension, got shape "
                             f"{list(x.shape)}")
    if initial_states is None:
        initial_states = cell.get_initial_states(batch_ref=inputs,
                                                 batch_dim_idx=1 if time_major else 0)
    if not time_major:
        inputs = _map(_transpose_batch_time, inputs)
    mask = None
    if sequence_length is not None:
        steps = _flatten(inputs)[0].shape[0]
        maxlen = steps if steps >= 0 else None
        mask = L.sequence_mask(sequence_length, maxlen=maxlen,
                               dtype=_flatten(initial_states)[0].dtype)
        mask = L.transpose(mask, [1, 0])
    if is_reverse:
        inputs = _map(lambda x: L.reverse(x, axis=[0]), inputs)
        if mask is not None:
            mask = L.reverse(mask, axis=[0])
    if _dygraph():
        outputs, final_states = _rnn_dygraph(cell, inputs, initial_states, mask, **kwargs)
    else:
        outputs, final_states = _rnn_static(cell, inputs, initial_states, mask, **kwargs)
    if is_reverse:
        outputs = _map(lambda x: L.reverse(x, axis=[0]), outputs)
    if not time_major:
        outputs = _map(_transpose_batch_time, outputs)
    return outputs, final_states


def _rnn_dygraph(cell: Any, inputs: Any, states: Any, mask: Any, **kwargs: Any
                 ) -> Tuple[Any, Any]:
    L = _L()
    steps = _flatten(inputs)[0].shape[0]
    per_step: List[Any] = []
    for t in range(steps):
        step_in = _map(lambda x: x[t], inputs)
        out, new_states = cell(step_in, states, **kwargs)
        _assert_same_structure(states, new_states, "rnn")
        if mask is not None:
            new_states = _map(lambda s, n: _maybe_copy(s, n, mask[t]), states, new_states)
        states = new_states
        per_step.append(out)
    if not per_step:
        raise ValueError("rnn: the inputs have no time steps")
    outputs = _pack(per_step[0], [L.stack(list(xs), axis=0)
                                  for xs in zip(*[_flatten(o) for o in per_step])])
    return outputs, states


def _rnn_static(cell: Any, inputs: Any, initial_states: Any, mask: Any, **kwargs: Any
                ) -> Tuple[Any, Any]:
    from .rnn_static import StaticRNN
    srnn = StaticRNN()
    with srnn.step():
        step_in = _map(srnn.step_input, inputs)
        states = _map(lambda s: srnn.memory(init=s), initial_states)
        outputs, new_states = cell(step_in, _map(lambda x: x, states), **kwargs)
        _assert_same_structure(states, new_states, "rnn")
        if mask is not None:
            step_mask = srnn.step_input(mask)
            new_states = _map(lambda s, n: _maybe_copy(s, n, step_mask), states, new_states)
        _map(srnn.update_memory, states, new_states)
        flat_out = _flatten(outputs)
        for o in flat_out:
            srnn.step_output(o)
    stacked = srnn()
    stacked = stacked if isinstance(stacked, list) else [stacked]
    return _pack(outputs, stacked), _pack(new_states, srnn.final_memories())


def birnn(cell_fw: RNNCell, cell_bw: RNNCell, inputs: Any, initial_states: Any = None,
          sequence_length: Optional[Variable] = None, time_major: bool = False,
          **kwargs: Any) -> Tuple[Any, Tuple[Any, Any]]:
    """A forward ``rnn`` with ``cell_fw`` and a reversed one with ``cell_bw`` over the same
    ``inputs``; outputs are concatenated on the last axis. ``initial_states`` is
    ``(states_fw, states_bw)`` or None. Returns ``(outputs, (final_fw, final_bw))``."""
    if initial_states is None:
        states_fw = cell_fw.get_initial_states(batch_ref=inputs,
                                               batch_dim_idx=1 if time_major else 0)
        states_bw = cell_bw.get_initial_states(batch_ref=inputs,
                                               batch_dim_idx=1 if time_major else 0)
    else:
        if not isinstance(initial_states, (list, tuple)) or len(initial_states) != 2:
            raise ValueError("birnn: initial_states must be (states_fw, states_bw)")
        states_fw, states_bw = initial_states
    out_fw, final_fw = rnn(cell_fw, inputs, states_fw, sequence_length, time_major, False,
                           **kwargs)
    out_bw, final_bw = rnn(cell_bw, inputs, states_bw, sequence_length, time_major, True,
                           **kwargs)
    L = _L()
    outputs = _map(lambda a, b: L.concat([a, b], axis=-1), out_fw, out_bw)
    return outputs, (final_fw, final_bw)
