"""``fluid.contrib.layers.rnn_impl`` (fluid 1.8): GRU and LSTM built from basic operators.

``BasicGRUUnit`` / ``BasicLSTMUnit`` are one step of a cell, as dygraph ``Layer`` objects
that build static programs too (their parameters are created on the first call, when the input
size is known). ``basic_gru`` / ``basic_lstm`` stack ``num_layers`` of them, optionally in both
directions, and unroll them over the time steps of a padded batch with ``StaticRNN`` (static
programs only, as in fluid 1.8). The PTB language model of fluid's model zoo is built on
``basic_lstm``.

Parameter names follow fluid 1.8, so its checkpoints load: unit ``i`` of ``basic_lstm(...,
name="basic_lstm")`` owns ``basic_lstm_layers_<i>/BasicLSTMUnit_0.w_0`` ([in + H, 4H]) and
``.b_0`` ([4H]); the backward direction's units are ``basic_lstm_reverse_layers_<i>/...``.

Two fluid 1.8 bugs are fixed here (see docs/compatibility.md, "Recurrent networks"):
``BasicLSTMUnit`` applies ``gate_activation`` / ``activation`` (1.8's forward hard-coded
sigmoid / tanh), and ``basic_lstm``'s backward-direction biases take ``bias_attr`` (1.8 gave
them ``param_attr``). With the default arguments the numbers are 1.8's.
"""
from __future__ import annotations

import copy
from typing import Any, Callable, List, Optional, Sequence, Tuple

from ... import layers
from ...core import mode as _mode
from ...core import names
from ...core.ir import Variable
from ...dygraph.layers import Layer
from ...layer_helper import LayerHelper, check_int
from ...param_attr import ParamAttr

__all__ = ["BasicGRUUnit", "basic_gru", "BasicLSTMUnit", "basic_lstm"]


def _suffixed(attr: Any, suffix: str) -> Any:
    """A copy of ``attr`` whose name has ``suffix`` appended, when ``attr`` names its
    parameter; otherwise ``attr`` itself (the parameter gets a generated name)."""
    if isinstance(attr, ParamAttr) and attr.name is not None:
        attr = copy.deepcopy(attr)
        attr.name += suffix
    return attr


class _UnitBase(Layer):
    """What both units share: fluid 1.8's naming (``<name_scope>/<Class>_N``) and the check
    of the step input."""

    def __init__(self, name_scope: str, hidden_size: int, param_attr: Any, bias_attr: Any,
                 gate_activation: Optional[Callable], activation: Optional[Callable],
                 dtype: str) -> None:
        super().__init__(name_scope, dtype)
        who = type(self).__name__
        # fluid 1.8 names the unit (and so its parameters) "<name_scope>/<Class>_N"
        self._full_name = names.generate(f"{name_scope}/{who}")
        self._helper = LayerHelper(self._full_name, name=self._full_name)
        self._name = name_scope
        self._hiden_size = check_int(hidden_size, "hidden_size", who, minimum=1)
        self._param_attr = ParamAttr._to_attr(param_attr) if param_attr is not None else None
        self._bias_attr = ParamAttr._to_attr(bias_attr) if bias_attr is not None else None
        self._gate_activation = gate_activation or layers.sigmoid
        self._activation = activation or layers.tanh
        self._built = False

    def _input_size(self, input: Any) -> int:
        size = int(input.shape[-1])
        if size <= 0:
            raise ValueError(f"{type(self).__name__}: the last dimension of the input (its "
                             f"size) must be known, but the input's shape is "
                             f"{list(input.shape)}")
        return size


class BasicGRUUnit(_UnitBase):
    """One GRU step from basic operators (fluid 1.8's ``BasicGRUUnit``):

        [r, u] = act_gate([x, h] @ W_gate + b_gate)          (r first, then u)
        m      = act_node([x, r * h] @ W_cand + b_cand)
        h'     = u * h + (1 - u) * m

    Parameters (created on the first call): ``W_gate`` [in + H, 2H] (``<full_name>.w_0``),
    ``W_cand`` [in + H, H] (``.w_1``), ``b_gate`` [2H] (``.b_0``), ``b_cand`` [H] (``.b_1``);
    a named ``param_attr`` / ``bias_attr`` gets the suffixes ``_gate`` / ``_candidate``.

    Args:
        name_scope: the prefix of the unit's name and its parameters' names.
        hidden_size: H, the size of the hidden state.
        param_attr: the weights' ParamAttr (default: Xavier initialised).
        bias_attr: the biases' ParamAttr (default: zero initialised).
        gate_activation: act_gate (default ``fluid.layers.sigmoid``).
        activation: act_node (default ``fluid.layers.tanh``).
        dtype: the parameters' dtype.
    Returns:
        BasicGRUUnit: the layer; ``unit(input, pre_hidden)`` returns the new hidden state
        [batch, hidden_size] (Variable).
    Raises:
        TypeError: ``hidden_size`` is not an int.
        ValueError: ``hidden_size`` is below 1, or (on the first call) the input's last
            dimension is unknown.

    Example:
        >>> import fluidlite as fluid
        >>> from fluidlite.contrib.layers import BasicGRUUnit
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 8], "float32")
        ...     h = fluid.data("h", [-1, 16], "float32")
        ...     new_h = BasicGRUUnit("gru_unit", 16)(x, h)
        >>> new_h.shape
        (-1, 16)
    """

    def __init__(self, name_scope: str, hidden_size: int, param_attr: Any = None,
                 bias_attr: Any = None, gate_activation: Optional[Callable] = None,
                 activation: Optional[Callable] = None, dtype: str = "float32") -> None:
        super().__init__(name_scope, hidden_size, param_attr, bias_attr, gate_activation,
                         activation, dtype)

    def _build_once(self, input: Any, pre_hidden: Any) -> None:
        n_in, H = self._input_size(input), self._hiden_size
        self._gate_weight = self.create_parameter(
            attr=_suffixed(self._param_attr, "_gate"), shape=[n_in + H, 2 * H],
            dtype=self._dtype)
        self._candidate_weight = self.create_parameter(
            attr=_suffixed(self._param_attr, "_candidate"), shape=[n_in + H, H],
            dtype=self._dtype)
        self._gate_bias = self.create_parameter(
            attr=_suffixed(self._bias_attr, "_gate"), shape=[2 * H], dtype=self._dtype,
            is_bias=True)
        self._candidate_bias = self.create_parameter(
            attr=_suffixed(self._bias_attr, "_candidate"), shape=[H], dtype=self._dtype,
            is_bias=True)
        self._built = True

    def forward(self, input: Any, pre_hidden: Any) -> Any:
        """``h'`` from the step input [batch, in] and the previous hidden state [batch, H]."""
        if not self._built:
            self._build_once(input, pre_hidden)
        gates = layers.elementwise_add(
            layers.matmul(layers.concat([input, pre_hidden], 1), self._gate_weight),
            self._gate_bias)
        r, u = layers.split(self._gate_activation(gates), num_or_sections=2, dim=1)
        candidate = layers.elementwise_add(
            layers.matmul(layers.concat([input, r * pre_hidden], 1), self._candidate_weight),
            self._candidate_bias)
        m = self._activation(candidate)
        return u * pre_hidden + (1 - u) * m


class BasicLSTMUnit(_UnitBase):
    """One LSTM step from basic operators (fluid 1.8's ``BasicLSTMUnit``):

        [i, j, f, o] = [x, h] @ W + b                          (gate order i, j, f, o)
        c' = c * act_gate(f + forget_bias) + act_gate(i) * act_node(j)
        h' = act_node(c') * act_gate(o)

    Parameters (created on the first call): ``W`` [in + H, 4H] (``<full_name>.w_0``) and
    ``b`` [4H] (``.b_0``).

    Args:
        name_scope: the prefix of the unit's name and its parameters' names.
        hidden_size: H, the size of the hidden and cell states.
        param_attr: the weight's ParamAttr (default: Xavier initialised).
        bias_attr: the bias's ParamAttr (default: zero initialised).
        gate_activation: act_gate (default ``fluid.layers.sigmoid``; fluid 1.8 ignored it).
        activation: act_node (default ``fluid.layers.tanh``; fluid 1.8 ignored it).
        forget_bias: added to the forget gate's input.
        dtype: the parameters' dtype.
    Returns:
        BasicLSTMUnit: the layer; ``unit(input, pre_hidden, pre_cell)`` returns
        ``(new_hidden, new_cell)``, each Variable [batch, hidden_size].
    Raises:
        TypeError: ``hidden_size`` is not an int, or ``forget_bias`` is not a number or string.
        ValueError: ``hidden_size`` is below 1, ``forget_bias`` is a non-numeric string, or
            (on the first call) the input's last dimension is unknown.

    Example:
        >>> import fluidlite as fluid
        >>> from fluidlite.contrib.layers import BasicLSTMUnit
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 8], "float32")
        ...     h = fluid.data("h", [-1, 16], "float32")
        ...     c = fluid.data("c", [-1, 16], "float32")
        ...     new_h, new_c = BasicLSTMUnit("lstm_unit", 16)(x, h, c)
        >>> new_h.shape, new_c.shape
        ((-1, 16), (-1, 16))
    """

    def __init__(self, name_scope: str, hidden_size: int, param_attr: Any = None,
                 bias_attr: Any = None, gate_activation: Optional[Callable] = None,
                 activation: Optional[Callable] = None, forget_bias: float = 1.0,
                 dtype: str = "float32") -> None:
        super().__init__(name_scope, hidden_size, param_attr, bias_attr, gate_activation,
                         activation, dtype)
        # a Python float added with `scale` (fluid 1.8 built a fill_constant at construction,
        # which tied the unit to the program current then; the values are the same)
        self._forget_bias = float(forget_bias)

    def _build_once(self, input: Any, pre_hidden: Any, pre_cell: Any) -> None:
        n_in, H = self._input_size(input), self._hiden_size
        self._weight = self.create_parameter(attr=self._param_attr, shape=[n_in + H, 4 * H],
                                             dtype=self._dtype)
        self._bias = self.create_parameter(attr=self._bias_attr, shape=[4 * H],
                                           dtype=self._dtype, is_bias=True)
        self._built = True

    def forward(self, input: Any, pre_hidden: Any, pre_cell: Any) -> Tuple[Any, Any]:
        """``(h', c')`` from the step input [batch, in] and the previous states [batch, H]."""
        if not self._built:
            self._build_once(input, pre_hidden, pre_cell)
        gates = layers.elementwise_add(
            layers.matmul(layers.concat([input, pre_hidden], 1), self._weight), self._bias)
        i, j, f, o = layers.split(gates, num_or_sections=4, dim=-1)
        act_g, act = self._gate_activation, self._activation
        new_cell = layers.elementwise_add(
            layers.elementwise_mul(pre_cell, act_g(layers.scale(f, bias=self._forget_bias))),
            layers.elementwise_mul(act_g(i), act(j)))
        new_hidden = layers.elementwise_mul(act(new_cell), act_g(o))
        return new_hidden, new_cell


# -- the multi-layer, optionally bidirectional RNNs --------------------------------------------
def _check_rnn_args(who: str, input: Any, hidden_size: int, num_layers: int) -> None:
    if _mode.tracer is not None:
        unit = "BasicLSTMUnit" if who == "basic_lstm" else "BasicGRUUnit"
        raise RuntimeError(f"{who} builds a static program (it unrolls with StaticRNN); in "
                           f"dygraph mode call {unit} step by step")
    if not isinstance(input, Variable):
        raise TypeError(f"{who}: input must be a Variable, but received "
                        f"{type(input).__name__}")
    if len(input.shape) != 3:
        raise ValueError(f"{who}: input must be 3-D ([batch, seq_len, size] with batch_first,"
                         f" else [seq_len, batch, size]), but its shape is "
                         f"{list(input.shape)}")
    check_int(hidden_size, "hidden_size", who, minimum=1)
    check_int(num_layers, "num_layers", who, minimum=1)


def _check_dropout(who: str, dropout_prob: Optional[float]) -> None:
    if dropout_prob is not None and not (isinstance(dropout_prob, (int, float)) and
                                         0.0 <= dropout_prob <= 1.0):
        raise ValueError(f"{who}: dropout_prob must be None or a probability in [0, 1], but "
                         f"received {dropout_prob!r}")


def _unit_attrs(param_attr: Any, bias_attr: Any, tag: str, i: int) -> Tuple[Any, Any]:
    """Layer ``i``'s attrs: a named attr gets ``_<tag>_w_<i>`` / ``_<tag>_b_<i>`` appended
    (tag ``fw`` / ``bw``), as fluid 1.8 named them."""
    return _suffixed(param_attr, f"_{tag}_w_{i}"), _suffixed(bias_attr, f"_{tag}_b_{i}")


def _time_mask(input_tm: Variable, sequence_length: Variable) -> Variable:
    """[seq_len, batch] float32: 1 where step t < sequence_length[b], else 0. Built by
    comparing each step's index with the lengths, so the time dimension may be unknown."""
    ones = layers.fill_constant_batch_size_like(input_tm, shape=[-1, 1], dtype="int64",
                                                value=1, input_dim_idx=0, output_dim_idx=0)
    step = layers.cumsum(ones, axis=0, exclusive=True)             # [T, 1]: 0, 1, ...
    lengths = layers.unsqueeze(layers.cast(sequence_length, "int64"), [0])      # [1, B]
    mask = layers.cast(layers.less_than(step, lengths), "float32")
    mask.stop_gradient = True
    return mask


def _keep_where_masked(new: Variable, pre: Variable, step_mask: Variable) -> Variable:
    """``new`` in the rows whose step is real (mask 1), ``pre`` where it is padding (mask 0):
    new * m - pre * (m - 1)."""
    return layers.elementwise_sub(layers.elementwise_mul(new, step_mask, axis=0),
                                  layers.elementwise_mul(pre, step_mask - 1, axis=0))


def _initial_states(init: Optional[Variable], num_layers: int, direc_num: int,
                    hidden_size: int, who: str, what: str) -> Optional[List[List[Variable]]]:
    """``init`` [num_layers * direc_num, batch, H] split into [layer][direction] slices of
    [batch, H] (built before the loop: a memory's initial value lives outside the step)."""
    if init is None:
        return None
    if not isinstance(init, Variable):
        raise TypeError(f"{who}: {what} must be a Variable or None, but received "
                        f"{type(init).__name__}")
    init = layers.reshape(init, shape=[num_layers, direc_num, -1, hidden_size])
    return [[init[i, d] for d in range(direc_num)] for i in range(num_layers)]


def _last_steps(stacked: Sequence[Variable], num_layers: int, hidden_size: int) -> Variable:
    """[num_layers, batch, H]: the last step of each layer's stacked state."""
    last = layers.concat([s[-1] for s in stacked], axis=0)
    return layers.reshape(last, shape=[num_layers, -1, hidden_size])


def _run_direction(rnn_input: Variable, units: Sequence[Layer], n_states: int,
                   inits: Sequence[Optional[List[List[Variable]]]], direc_index: int,
                   mask: Optional[Variable], hidden_size: int, dropout_prob: Optional[float],
                   dropout_implementation: str) -> Tuple[Variable, List[Variable]]:
    """Unroll the stacked units over ``rnn_input`` [T, batch, in] in one direction.

    Returns the top layer's output [T, batch, H] (after dropout) and, per state (hidden, then
    cell for an LSTM), the per-layer last steps [num_layers, batch, H]."""
    num_layers = len(units)
    starts = [[None if init is None else init[i][direc_index] for init in inits]
              for i in range(num_layers)]
    rnn = layers.StaticRNN()
    with rnn.step():
        step_input = rnn.step_input(rnn_input)
        step_mask = rnn.step_input(mask) if mask is not None else None
        for i, unit in enumerate(units):
            pre = [rnn.memory(init=start) if start is not None else
                   rnn.memory(batch_ref=rnn_input, shape=[-1, hidden_size],
                              ref_batch_dim_idx=1)
                   for start in starts[i]]
            new = unit(step_input, *pre)
            new = list(new) if isinstance(new, (tuple, list)) else [new]
            if step_mask is not None:
                new = [_keep_where_masked(n, p, step_mask) for n, p in zip(new, pre)]
            for p, n in zip(pre, new):
                rnn.update_memory(p, n)
            for n in new:
                rnn.step_output(n)
            step_input = new[0]
            if dropout_prob is not None and dropout_prob > 0.0:
                step_input = layers.dropout(step_input, dropout_prob=dropout_prob,
                                            dropout_implementation=dropout_implementation)
        rnn.step_output(step_input)
    outs = rnn()
    per_layer = [outs[i * n_states:(i + 1) * n_states] for i in range(num_layers)]
    lasts = [_last_steps([states[k] for states in per_layer], num_layers, hidden_size)
             for k in range(n_states)]
    return outs[-1], lasts


def _basic_rnn(who: str, make_unit: Callable[[str, Any, Any], Layer], n_states: int,
               input: Variable, inits: Sequence[Optional[Variable]], hidden_size: int,
               num_layers: int, sequence_length: Optional[Variable],
               dropout_prob: Optional[float], bidirectional: bool, batch_first: bool,
               param_attr: Any, bias_attr: Any, name: str,
               dropout_implementation: str) -> Tuple[Variable, List[Variable]]:
    _check_rnn_args(who, input, hidden_size, num_layers)
    _check_dropout(who, dropout_prob)
    directions = [("fw", f"{name}_layers_")] + \
        ([("bw", f"{name}_reverse_layers_")] if bidirectional else [])
    units = [[make_unit(prefix + str(i), *_unit_attrs(param_attr, bias_attr, tag, i))
              for i in range(num_layers)] for tag, prefix in directions]
    direc_num = len(directions)
    if batch_first:
        input = layers.transpose(input, [1, 0, 2])
    mask = _time_mask(input, sequence_length) if sequence_length is not None else None
    states = [_initial_states(init, num_layers, direc_num, hidden_size, who, what)
              for init, what in zip(inits, ("init_hidden", "init_cell"))]
    out, lasts = _run_direction(input, units[0], n_states, states, 0, mask, hidden_size,
                                dropout_prob, dropout_implementation)
    if bidirectional:
        # the backward direction reads the padded batch reversed in time (padding first:
        # its mask keeps the initial state there), and its output is reversed back
        bw_mask = layers.reverse(mask, axis=[0]) if mask is not None else None
        bw_out, bw_lasts = _run_direction(layers.reverse(input, axis=[0]), units[1],
                                          n_states, states, 1, bw_mask, hidden_size,
                                          dropout_prob, dropout_implementation)
        out = layers.concat([out, layers.reverse(bw_out, axis=[0])], axis=2)
        # [num_layers, 2 * batch, H] -> [num_layers * 2, batch, H]: layer-major, fw then bw
        lasts = [layers.reshape(layers.concat([f, b], axis=1),
                                shape=[num_layers * direc_num, -1, hidden_size])
                 for f, b in zip(lasts, bw_lasts)]
    if batch_first:
        out = layers.transpose(out, [1, 0, 2])
    return out, lasts


def basic_gru(input: Variable, init_hidden: Optional[Variable], hidden_size: int,
              num_layers: int = 1, sequence_length: Optional[Variable] = None,
              dropout_prob: Optional[float] = 0.0, bidirectional: bool = False,
              batch_first: bool = True, param_attr: Any = None, bias_attr: Any = None,
              gate_activation: Optional[Callable] = None,
              activation: Optional[Callable] = None, dtype: str = "float32",
              name: str = "basic_gru") -> Tuple[Variable, Variable]:
    """A multi-layer (optionally bidirectional) GRU of ``BasicGRUUnit`` steps over a padded
    batch (fluid 1.8's ``basic_gru``). Layer ``l`` reads layer ``l - 1``'s output (after
    ``dropout_prob`` dropout, ``downgrade_in_infer``; the top layer's output is dropped out
    too); with ``sequence_length``, steps past a sequence's length keep the previous state.

    Args:
        input: [batch, seq_len, size] (``batch_first``) or [seq_len, batch, size].
        init_hidden: [num_layers * directions, batch, H] initial states, or None for zeros.
        hidden_size: H.
        num_layers: the number of stacked layers.
        sequence_length: [batch] int lengths, or None when no step is padding.
        dropout_prob: dropout between layers (not between steps).
        bidirectional: add a backward-direction GRU; outputs are concatenated.
        batch_first: the layout of ``input`` and of the output.
        param_attr: the weights' ParamAttr (a name gets ``_fw_w_<l>`` / ``_bw_w_<l>``).
        bias_attr: the biases' ParamAttr (a name gets ``_fw_b_<l>`` / ``_bw_b_<l>``).
        gate_activation: the gates' activation (default sigmoid).
        activation: the candidate's activation (default tanh).
        dtype: the parameters' dtype.
        name: the prefix of the units' names.

    Returns:
        ``(rnn_out, last_hidden)``: rnn_out [batch, seq_len, H * directions] (time major
        without ``batch_first``), last_hidden [num_layers * directions, batch, H] (the state
        after each sequence's last real step).
    Raises:
        RuntimeError: called in dygraph mode (use ``BasicGRUUnit`` step by step there).
        TypeError: ``input`` or a given ``init_hidden`` is not a Variable, or ``hidden_size`` /
            ``num_layers`` is not an int.
        ValueError: ``input`` is not 3-D, ``hidden_size`` / ``num_layers`` is below 1, or
            ``dropout_prob`` is outside [0, 1].

    Example:
        >>> import fluidlite as fluid
        >>> from fluidlite.contrib.layers import basic_gru
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 5, 8], "float32")
        ...     out, last = basic_gru(x, None, 16, num_layers=2, bidirectional=True)
        >>> out.shape[-1], last.shape[-1]
        (32, 16)
    """
    out, (last_hidden,) = _basic_rnn(
        "basic_gru",
        lambda scope, p, b: BasicGRUUnit(scope, hidden_size, p, b, gate_activation,
                                         activation, dtype),
        1, input, [init_hidden], hidden_size, num_layers, sequence_length, dropout_prob,
        bidirectional, batch_first, param_attr, bias_attr, name, "downgrade_in_infer")
    return out, last_hidden


def basic_lstm(input: Variable, init_hidden: Optional[Variable],
               init_cell: Optional[Variable], hidden_size: int, num_layers: int = 1,
               sequence_length: Optional[Variable] = None,
               dropout_prob: Optional[float] = 0.0, bidirectional: bool = False,
               batch_first: bool = True, param_attr: Any = None, bias_attr: Any = None,
               gate_activation: Optional[Callable] = None,
               activation: Optional[Callable] = None, forget_bias: float = 1.0,
               dtype: str = "float32", name: str = "basic_lstm"
               ) -> Tuple[Variable, Variable, Variable]:
    """A multi-layer (optionally bidirectional) LSTM of ``BasicLSTMUnit`` steps over a padded
    batch (fluid 1.8's ``basic_lstm``). Layer ``l`` reads layer ``l - 1``'s hidden output
    (after ``dropout_prob`` dropout, ``upscale_in_train``; the top layer's output is dropped
    out too); with ``sequence_length``, steps past a sequence's length keep the previous
    hidden and cell states.

    Args:
        input: [batch, seq_len, size] (``batch_first``) or [seq_len, batch, size].
        init_hidden: [num_layers * directions, batch, H] initial hidden states, or None for
            zeros.
        init_cell: the initial cell states, the same shape, or None for zeros.
        hidden_size: H.
        num_layers: the number of stacked layers.
        sequence_length: [batch] int lengths, or None when no step is padding.
        dropout_prob: dropout between layers (not between steps).
        bidirectional: add a backward-direction LSTM; outputs are concatenated.
        batch_first: the layout of ``input`` and of the output.
        param_attr: the weights' ParamAttr (a name gets ``_fw_w_<l>`` / ``_bw_w_<l>``).
        bias_attr: the biases' ParamAttr (a name gets ``_fw_b_<l>`` / ``_bw_b_<l>``).
        gate_activation: the gates' activation (default sigmoid).
        activation: the cell's activation (default tanh).
        forget_bias: added to the forget gate's input.
        dtype: the parameters' dtype.
        name: the prefix of the units' names.

    Returns:
        ``(rnn_out, last_hidden, last_cell)``: rnn_out [batch, seq_len, H * directions] (time
        major without ``batch_first``); last_hidden and last_cell [num_layers * directions,
        batch, H] (the states after each sequence's last real step).
    Raises:
        RuntimeError: called in dygraph mode (use ``BasicLSTMUnit`` step by step there).
        TypeError: ``input`` or a given ``init_hidden`` / ``init_cell`` is not a Variable, or
            ``hidden_size`` / ``num_layers`` is not an int.
        ValueError: ``input`` is not 3-D, ``hidden_size`` / ``num_layers`` is below 1, or
            ``dropout_prob`` is outside [0, 1].

    Example:
        >>> import fluidlite as fluid
        >>> from fluidlite.contrib.layers import basic_lstm
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 5, 8], "float32")
        ...     out, h, c = basic_lstm(x, None, None, 16, num_layers=2, forget_bias=0.0)
        >>> out.shape[-1], h.shape[-1], c.shape[-1]
        (16, 16, 16)
    """
    out, (last_hidden, last_cell) = _basic_rnn(
        "basic_lstm",
        lambda scope, p, b: BasicLSTMUnit(scope, hidden_size, param_attr=p, bias_attr=b,
                                          gate_activation=gate_activation,
                                          activation=activation, forget_bias=forget_bias,
                                          dtype=dtype),
        2, input, [init_hidden, init_cell], hidden_size, num_layers, sequence_length,
        dropout_prob, bidirectional, batch_first, param_attr, bias_attr, name,
        "upscale_in_train")
    return out, last_hidden, last_cell
