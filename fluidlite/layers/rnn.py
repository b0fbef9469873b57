"""``fluid.layers`` recurrent layers on the ops of ``ops/rnn.py`` (fluid 1.8 signatures,
parameter names and shapes): ``dynamic_lstm``, ``dynamic_lstmp``, ``dynamic_gru`` (LoD input,
static graph only as in fluid 1.8), ``gru_unit``, ``lstm_unit`` and ``lstm`` (the cuDNN-style
multi-layer LSTM, run on CPU).

The cell API (``rnn``, ``birnn``) lives in ``layers/rnn_cells.py``, decoding in
``layers/rnn_decode.py``, ``StaticRNN`` in ``layers/rnn_static.py``, ``DynamicRNN`` in
``layers/rnn_dynamic.py`` and the beam-search op layers in ``layers/rnn_beam.py``.
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from ..core import mode as _mode
from ..core.dtypes import convert_dtype
from ..core.ir import Variable
from ..layer_helper import LayerHelper, check_int, check_number
from ..ops.rnn_unit import cudnn_lstm_weight_size

__all__ = ["dynamic_lstm", "dynamic_lstmp", "dynamic_gru", "gru_unit", "lstm_unit", "lstm"]

_ACTS = ("sigmoid", "tanh", "relu", "identity")
_ACT_CODES = {"identity": 0, "sigmoid": 1, "tanh": 2, "relu": 3}


def _var(x: Any, arg: str, layer: str) -> Variable:
    if not isinstance(x, Variable):
        raise TypeError(f"{layer}: {arg} must be a Variable, but received {type(x).__name__}")
    return x


def _float_dtype(x: Variable, arg: str, layer: str) -> None:
    if convert_dtype(x.dtype) not in ("float32", "float64"):
        raise TypeError(f"{layer}: {arg} must be float32 or float64, but received "
                        f"{convert_dtype(x.dtype)}")


def _acts(layer: str, **acts: str) -> None:
    for arg, value in acts.items():
        if value not in _ACTS:
            raise ValueError(f"{layer}: {arg} must be one of {list(_ACTS)}, but received "
                             f"{value!r}")


def _static_only(layer: str, instead: str) -> None:
    if _mode.tracer is not None:
        raise AssertionError(f"please use {instead} instead of {layer} in dygraph mode!")


def _size(size: Any, k: int, layer: str, what: str) -> int:
    size = check_int(size, "size", layer, minimum=k)
    if size % k:
        raise ValueError(f"{layer}: size must be {k} * hidden size ({what}), but received "
                         f"{size}")
    return size // k


def _init_dtypes(layer: str, **states: Any) -> None:
    """fluid 1.8 checks every initial state's type and dtype (TypeError) before any shape."""
    for arg, x in states.items():
        if x is not None:
            _var(x, arg, layer)
            _float_dtype(x, arg, layer)


def _init_state(x: Any, arg: str, width: int, layer: str) -> Optional[Variable]:
    if x is None:
        return None
    _var(x, arg, layer)
    _float_dtype(x, arg, layer)
    if len(x.shape) != 2 or (x.shape[1] >= 0 and x.shape[1] != width):
        raise ValueError(f"{layer}: {arg} must be [batch_size, {width}], but received shape "
                         f"{list(x.shape)}")
    return x


def _lstm_prologue(layer: str, input: Any, size: Any, bias_attr: Any, **acts: str) -> int:
    """The argument checks ``dynamic_lstm`` and ``dynamic_lstmp`` share; returns D
    (``size`` = 4D)."""
    _static_only(layer, "lstm")
    _var(input, "input", layer)
    _float_dtype(input, "input", layer)
    if bias_attr is False:
        raise ValueError(f"{layer}: bias_attr should not be False in {layer}")
    _acts(layer, **acts)
    return _size(size, 4, layer, "the input is projected to 4 gates")


def _check_input_width(input: Variable, width: int, layer: str) -> None:
    if input.shape[-1] >= 0 and input.shape[-1] != width:
        raise ValueError(f"{layer}: input width must equal size = {width}, but received "
                         f"input shape {list(input.shape)}")


def _lstm_inputs(helper: LayerHelper, d: int, use_peepholes: bool, dtype: str,
                 h_0: Optional[Variable], c_0: Optional[Variable],
                 **inputs: Variable) -> Dict[str, Variable]:
    """Create the ``Bias`` parameter of ``lstm`` / ``lstmp`` ([1, 4D], [1, 7D] with the
    peepholes) and return the op's inputs: ``inputs``, Bias, then H0 / C0 when given."""
    inputs["Bias"] = helper.create_parameter(attr=helper.bias_attr,
                                             shape=[1, (7 if use_peepholes else 4) * d],
                                             dtype=dtype, is_bias=True)
    if h_0 is not None:
        inputs["H0"] = h_0
    if c_0 is not None:
        inputs["C0"] = c_0
    return inputs


def dynamic_lstm(input: Variable, size: int, h_0: Optional[Variable] = None,
                 c_0: Optional[Variable] = None, param_attr: Any = None, bias_attr: Any = None,
                 use_peepholes: bool = True, is_reverse: bool = False,
                 gate_activation: str = "sigmoid", cell_activation: str = "tanh",
                 candidate_activation: str = "tanh", dtype: str = "float32",
                 name: Optional[str] = None) -> Tuple[Variable, Variable]:
    """LSTM over a LoD batch (op ``lstm``); ``input`` [T, 4D] is already projected
    (``size`` = 4D). Parameters: ``Weight`` [D, 4D] (``{W_ch, W_ih, W_fh, W_oh}``) and ``Bias``
    [1, 4D] or, with peepholes, [1, 7D]. Returns ``(hidden, cell)``, both [T, D] with input's
    LoD.

    Args:
        input (Variable): a LoD tensor ``[T, 4 * hidden]`` (already projected, e.g. by ``fc``).
        size (int): ``4 * hidden``.
        h_0 (Variable | None): ``[N, hidden]`` initial hidden state.
        c_0 (Variable | None): ``[N, hidden]`` initial cell state.
        param_attr (ParamAttr | None): the recurrent weight ``[hidden, 4 * hidden]``.
        bias_attr (ParamAttr | None): the bias (with peephole weights when ``use_peepholes``).
        use_peepholes (bool, default True): peephole connections.
        is_reverse (bool, default False): run from the end of each sequence.
        gate_activation (str, default "sigmoid"): the gates' activation.
        cell_activation (str, default "tanh"): the cell's activation.
        candidate_activation (str, default "tanh"): the candidate's activation.
        dtype (str, default "float32"): the parameters' dtype.
        name (str | None): name prefix.
    Returns:
        tuple: ``(hidden, cell)``, LoD tensors ``[T, hidden]``.
    Raises:
        AssertionError: called in dygraph mode (use ``fluid.dygraph`` LSTM layers there).
        TypeError: ``input`` / ``h_0`` / ``c_0`` is not a Variable or not float32/float64,
            or ``size`` is not an int.
        ValueError: ``bias_attr`` is False, an activation is not sigmoid/tanh/relu/identity,
            ``size`` is not a positive multiple of 4, ``input``'s width is not ``size``, or
            ``h_0`` / ``c_0`` is not [batch_size, size / 4].

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     # already projected: 4 * hidden
        ...     x = fluid.data("x", [-1, 8], lod_level=1)
        ...     hidden, cell = fluid.layers.dynamic_lstm(x, size=8)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> t = fluid.create_lod_tensor(np.ones((5, 8), "float32"), [[2, 3]], fluid.CPUPlace())
        >>> # [total steps, hidden]
        >>> exe.run(main, feed={"x": t}, fetch_list=[hidden])[0].shape
        (5, 2)
    """
    d = _lstm_prologue("dynamic_lstm", input, size, bias_attr,
                       gate_activation=gate_activation, cell_activation=cell_activation,
                       candidate_activation=candidate_activation)
    _check_input_width(input, 4 * d, "dynamic_lstm")
    _init_dtypes("dynamic_lstm", h_0=h_0, c_0=c_0)
    h_0 = _init_state(h_0, "h_0", d, "dynamic_lstm")
    c_0 = _init_state(c_0, "c_0", d, "dynamic_lstm")
    helper = LayerHelper("lstm", param_attr=param_attr, bias_attr=bias_attr, name=name)
    weight = helper.create_parameter(attr=helper.param_attr, shape=[d, 4 * d], dtype=dtype)
    inputs = _lstm_inputs(helper, d, use_peepholes, dtype, h_0, c_0, Input=input,
                          Weight=weight)
    outs = {k: helper.create_variable_for_type_inference(dtype)
            for k in ("Hidden", "Cell", "BatchGate", "BatchCellPreAct")}
    helper.append_op(type="lstm", inputs=inputs, outputs=outs,
                     attrs={"use_peepholes": bool(use_peepholes), "is_reverse": bool(is_reverse),
                            "gate_activation": gate_activation,
                            "cell_activation": cell_activation,
                            "candidate_activation": candidate_activation})
    return outs["Hidden"], outs["Cell"]


def dynamic_lstmp(input: Variable, size: int, proj_size: int, param_attr: Any = None,
                  bias_attr: Any = None, use_peepholes: bool = True, is_reverse: bool = False,
                  gate_activation: str = "sigmoid", cell_activation: str = "tanh",
                  candidate_activation: str = "tanh", proj_activation: str = "tanh",
                  dtype: str = "float32", name: Optional[str] = None,
                  h_0: Optional[Variable] = None, c_0: Optional[Variable] = None,
                  cell_clip: Optional[float] = None,
                  proj_clip: Optional[float] = None) -> Tuple[Variable, Variable]:
    """LSTM with a recurrent projection (op ``lstmp``): r_t = proj_act(h_t @ W_rh). Parameters
    ``Weight`` [P, 4D], ``ProjWeight`` [D, P], ``Bias`` as ``dynamic_lstm``; ``h_0`` is r_0
    [N, P], ``c_0`` [N, D]. Returns ``(projection [T, P], cell [T, D])``.

    Args:
        input (Variable): float32/float64 LoD tensor [T, 4D], the input already projected to
            the four gates.
        size (int): 4 * D, D the hidden (cell) size.
        proj_size (int): P, the projection size (>= 1).
        param_attr (ParamAttr | None, default None): attribute of ``Weight`` and ``ProjWeight``.
        bias_attr (ParamAttr | None, default None): attribute of ``Bias`` (must not be False).
        use_peepholes (bool, default True): add the peephole connections (bias [1, 7D]).
        is_reverse (bool, default False): run each sequence back to front.
        gate_activation (str, default "sigmoid"): activation of the gates.
        cell_activation (str, default "tanh"): activation of the cell output.
        candidate_activation (str, default "tanh"): activation of the candidate.
        proj_activation (str, default "tanh"): activation of the projection.
        dtype (str, default "float32"): dtype of the parameters.
        name (str | None, default None): name prefix of the parameters.
        h_0 (Variable | None, default None): the initial projection [N, P].
        c_0 (Variable | None, default None): the initial cell [N, D].
        cell_clip (float | None, default None): clip the cell to [-cell_clip, cell_clip]
            (None or 0: no clip).
        proj_clip (float | None, default None): clip the projection likewise.
    Returns:
        tuple of Variable: ``(projection, cell)``, LoD tensors [T, P] and [T, D].
    Raises:
        AssertionError: called in dygraph mode.
        TypeError: ``input`` / ``h_0`` / ``c_0`` is not a Variable or not float32/float64,
            ``size`` / ``proj_size`` is not an int, or a clip is not a number.
        ValueError: ``bias_attr`` is False, an activation is not sigmoid/tanh/relu/identity,
            ``size`` is not a positive multiple of 4, ``proj_size`` is below 1, ``input``'s width
            is not ``size``, a clip is negative, or ``h_0`` / ``c_0`` has the wrong width.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 8], lod_level=1)
        ...     proj, cell = fluid.layers.dynamic_lstmp(x, size=8, proj_size=3)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> t = fluid.create_lod_tensor(np.ones((5, 8), "float32"), [[2, 3]], fluid.CPUPlace())
        >>> exe.run(main, feed={"x": t}, fetch_list=[proj])[0].shape
        (5, 3)
    """
    d = _lstm_prologue("dynamic_lstmp", input, size, bias_attr,
                       gate_activation=gate_activation, cell_activation=cell_activation,
                       candidate_activation=candidate_activation,
                       proj_activation=proj_activation)
    p = check_int(proj_size, "proj_size", "dynamic_lstmp", minimum=1)
    _check_input_width(input, 4 * d, "dynamic_lstmp")
    clips = {}
    for arg, v in (("cell_clip", cell_clip), ("proj_clip", proj_clip)):
        v = 0.0 if v is None else check_number(v, arg, "dynamic_lstmp")
        if v < 0:
            raise ValueError(f"dynamic_lstmp: {arg} should not be negative, but received {v}")
        clips[arg] = float(v)
    _init_dtypes("dynamic_lstmp", h_0=h_0, c_0=c_0)
    h_0 = _init_state(h_0, "h_0", p, "dynamic_lstmp")
    c_0 = _init_state(c_0, "c_0", d, "dynamic_lstmp")
    helper = LayerHelper("lstmp", param_attr=param_attr, bias_attr=bias_attr, name=name)
    weight = helper.create_parameter(attr=helper.param_attr, shape=[p, 4 * d], dtype=dtype)
    proj_weight = helper.create_parameter(attr=helper.param_attr, shape=[d, p], dtype=dtype)
    inputs = _lstm_inputs(helper, d, use_peepholes, dtype, h_0, c_0, Input=input,
                          Weight=weight, ProjWeight=proj_weight)
    outs = {k: helper.create_variable_for_type_inference(dtype)
            for k in ("Projection", "Cell", "BatchHidden", "BatchGate", "BatchCellPreAct")}
    helper.append_op(type="lstmp", inputs=inputs, outputs=outs,
                     attrs={"use_peepholes": bool(use_peepholes), "is_reverse": bool(is_reverse),
                            "gate_activation": gate_activation,
                            "cell_activation": cell_activation,
                            "candidate_activation": candidate_activation,
                            "proj_activation": proj_activation, **clips})
    return outs["Projection"], outs["Cell"]


def dynamic_gru(input: Variable, size: int, param_attr: Any = None, bias_attr: Any = None,
                is_reverse: bool = False, gate_activation: str = "sigmoid",
                candidate_activation: str = "tanh", h_0: Optional[Variable] = None,
                origin_mode: bool = False) -> Variable:
    """GRU over a LoD batch (op ``gru``); ``input`` [T, 3D] is already projected, ``size`` = D.
    Parameters ``Weight`` [D, 3D] (W_ur [D, 2D] then W_c [D, D] in memory) and ``Bias``
    [1, 3D]. Returns ``hidden`` [T, D] with input's LoD.

    Args:
        input (Variable): a LoD tensor ``[T, 3 * size]`` (already projected).
        size (int): the hidden size.
        param_attr (ParamAttr | None): the recurrent weight ``[size, 3 * size]``.
        bias_attr (ParamAttr | None): the bias ``[1, 3 * size]``.
        is_reverse (bool, default False): run from the end of each sequence.
        gate_activation (str, default "sigmoid"): the gates' activation.
        candidate_activation (str, default "tanh"): the candidate's activation.
        h_0 (Variable | None): ``[N, size]`` initial state.
        origin_mode (bool, default False): the original GRU paper's update form.
    Returns:
        Variable: LoD tensor ``[T, size]``, the hidden states.
    Raises:
        AssertionError: called in dygraph mode (use ``fluid.dygraph.GRUUnit`` there).
        TypeError: ``input`` / ``h_0`` is not a Variable or not float32/float64, or ``size``
            is not an int.
        ValueError: an activation is not sigmoid/tanh/relu/identity, ``size`` is below 1,
            ``input``'s width is not 3 * ``size``, or ``h_0`` is not [batch_size, size].

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     # already projected: 3 * hidden
        ...     x = fluid.data("x", [-1, 6], lod_level=1)
        ...     hidden = fluid.layers.dynamic_gru(x, size=2)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> t = fluid.create_lod_tensor(np.ones((5, 6), "float32"), [[2, 3]], fluid.CPUPlace())
        >>> exe.run(main, feed={"x": t}, fetch_list=[hidden])[0].shape
        (5, 2)
    """
    _static_only("dynamic_gru", "GRUUnit")
    _var(input, "input", "dynamic_gru")
    _float_dtype(input, "input", "dynamic_gru")
    _acts("dynamic_gru", gate_activation=gate_activation,
          candidate_activation=candidate_activation)
    d = check_int(size, "size", "dynamic_gru", minimum=1)
    if input.shape[-1] >= 0 and input.shape[-1] != 3 * d:
        raise ValueError(f"dynamic_gru: input width must be 3 * size = {3 * d}, but received "
                         f"input shape {list(input.shape)}")
    h_0 = _init_state(h_0, "h_0", d, "dynamic_gru")
    helper = LayerHelper("gru", param_attr=param_attr, bias_attr=bias_attr)
    dtype = input.dtype
    weight = helper.create_parameter(attr=helper.param_attr, shape=[d, 3 * d], dtype=dtype)
    bias = helper.create_parameter(attr=helper.bias_attr, shape=[1, 3 * d], dtype=dtype,
                                   is_bias=True)
    inputs = {"Input": input, "Weight": weight}
    if bias is not None:
        inputs["Bias"] = bias
    if h_0 is not None:
        inputs["H0"] = h_0
    outs = {k: helper.create_variable_for_type_inference(dtype)
            for k in ("Hidden", "BatchGate", "BatchResetHiddenPrev", "BatchHidden")}
    helper.append_op(type="gru", inputs=inputs, outputs=outs,
                     attrs={"is_reverse": bool(is_reverse), "gate_activation": gate_activation,
                            "activation": candidate_activation,
                            "origin_mode": bool(origin_mode)})
    return outs["Hidden"]


def gru_unit(input: Variable, hidden: Variable, size: int, param_attr: Any = None,
             bias_attr: Any = None, activation: str = "tanh", gate_activation: str = "sigmoid",
             origin_mode: bool = False) -> Tuple[Variable, Variable, Variable]:
    """One GRU step (op ``gru_unit``): ``input`` [N, 3D] projected, ``hidden`` [N, D],
    ``size`` = 3D. Parameters ``Weight`` [D, 3D] and (unless ``bias_attr=False``) ``Bias``
    [1, 3D]. Returns ``(updated_hidden, reset_hidden_pre, gate)``.

    Args:
        input (Variable): float32/float64 [N, 3D], the input projected to the three gates.
        hidden (Variable): the previous hidden state [N, D].
        size (int): 3 * D.
        param_attr (ParamAttr | None, default None): attribute of ``Weight`` [D, 3D].
        bias_attr (ParamAttr | bool | None, default None): attribute of ``Bias`` [1, 3D];
            False: no bias.
        activation (str, default "tanh"): activation of the candidate.
        gate_activation (str, default "sigmoid"): activation of the update and reset gates.
        origin_mode (bool, default False): ``h = u * h_prev + (1 - u) * c`` (the GRU paper's
            form) instead of ``h = (1 - u) * h_prev + u * c``.
    Returns:
        tuple of Variable: ``(hidden [N, D], reset_hidden_prev [N, D], gate [N, 3D])``.
    Raises:
        TypeError: ``input`` or ``hidden`` is not a Variable, ``input`` is not float32/float64,
            or ``size`` is not an int.
        ValueError: an activation is not sigmoid/tanh/relu/identity, ``size`` is not a positive
            multiple of 3, ``input``'s width is not ``size``, or ``hidden``'s is not size / 3.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 6])                          # 3 * hidden
        ...     h = fluid.data("h", [-1, 2])
        ...     hidden, reset_hidden_pre, gate = fluid.layers.gru_unit(x, h, size=6)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> exe.run(main, feed={"x": np.ones((4, 6), "float32"), "h": np.zeros((4, 2), "float32")},
        ...         fetch_list=[hidden])[0].shape
        (4, 2)
    """
    _var(input, "input", "gru_unit")
    _var(hidden, "hidden", "gru_unit")
    _float_dtype(input, "input", "gru_unit")
    _acts("gru_unit", activation=activation, gate_activation=gate_activation)
    d = _size(size, 3, "gru_unit", "the input is projected to 3 gates")
    _check_input_width(input, 3 * d, "gru_unit")
    if hidden.shape[-1] >= 0 and hidden.shape[-1] != d:
        raise ValueError(f"gru_unit: hidden must be [batch_size, size / 3 = {d}], but "
                         f"received shape {list(hidden.shape)}")
    helper = LayerHelper("gru_unit", param_attr=param_attr, bias_attr=bias_attr)
    dtype = input.dtype
    weight = helper.create_parameter(attr=helper.param_attr, shape=[d, 3 * d], dtype=dtype)
    inputs = {"Input": input, "HiddenPrev": hidden, "Weight": weight}
    if bias_attr is not False:
        inputs["Bias"] = helper.create_parameter(attr=helper.bias_attr, shape=[1, 3 * d],
                                                 dtype=dtype, is_bias=True)
    outs = {k: helper.create_variable_for_type_inference(dtype)
            for k in ("Gate", "ResetHiddenPrev", "Hidden")}
    helper.append_op(type="gru_unit", inputs=inputs, outputs=outs,
                     attrs={"activation": _ACT_CODES[activation],
                            "gate_activation": _ACT_CODES[gate_activation],
                            "origin_mode": bool(origin_mode)})
    return outs["Hidden"], outs["ResetHiddenPrev"], outs["Gate"]


def lstm_unit(x_t: Variable, hidden_t_prev: Variable, cell_t_prev: Variable,
              forget_bias: float = 0.0, param_attr: Any = None, bias_attr: Any = None,
              name: Optional[str] = None) -> Tuple[Variable, Variable]:
    """One LSTM step: ``fc(concat([x_t, hidden_t_prev], 1), 4D)`` then op ``lstm_unit``
    (gates i, f, o, g; f gets ``forget_bias``). Returns ``(hidden, cell)``, each [N, D].

    Args:
        x_t (Variable): the step input [N, M].
        hidden_t_prev (Variable): the previous hidden state [N, D].
        cell_t_prev (Variable): the previous cell state [N, D].
        forget_bias (float, default 0.0): added to the forget gate before its sigmoid.
        param_attr (ParamAttr | None, default None): attribute of the fc weight [M + D, 4D].
        bias_attr (ParamAttr | None, default None): attribute of the fc bias [4D].
        name (str | None, default None): name prefix of the outputs.
    Returns:
        tuple of Variable: ``(hidden, cell)``, each [N, D], dtype of ``x_t``.
    Raises:
        TypeError: an input is not a Variable, or ``forget_bias`` is not a number.
        ValueError: an input is not 2-D, or the known batch sizes differ.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 3])
        ...     h = fluid.data("h", [-1, 2])
        ...     c = fluid.data("c", [-1, 2])
        ...     hidden, cell = fluid.layers.lstm_unit(x, h, c)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> feed = {"x": np.ones((4, 3), "float32"), "h": np.zeros((4, 2), "float32"),
        ...         "c": np.zeros((4, 2), "float32")}
        >>> [a.shape for a in exe.run(main, feed=feed, fetch_list=[hidden, cell])]
        [(4, 2), (4, 2)]
    """
    from .nn import fc
    from .tensor import concat
    for arg, v in (("x_t", x_t), ("hidden_t_prev", hidden_t_prev),
                   ("cell_t_prev", cell_t_prev)):
        _var(v, arg, "lstm_unit")
        if len(v.shape) != 2:
            raise ValueError(f"lstm_unit: {arg} must be a 2-D tensor, but received shape "
                             f"{list(v.shape)}")
    if x_t.shape[0] >= 0 and hidden_t_prev.shape[0] >= 0 and cell_t_prev.shape[0] >= 0 and \
            not x_t.shape[0] == hidden_t_prev.shape[0] == cell_t_prev.shape[0]:
        raise ValueError("lstm_unit: the batch sizes of x_t, hidden_t_prev and cell_t_prev "
                         "must be the same")
    forget_bias = check_number(forget_bias, "forget_bias", "lstm_unit")
    size = cell_t_prev.shape[1]
    fc_out = fc(input=concat([x_t, hidden_t_prev], axis=1), size=4 * size,
                param_attr=param_attr, bias_attr=bias_attr)
    helper = LayerHelper("lstm_unit", name=name)
    c = helper.create_variable_for_type_inference(x_t.dtype)
    h = helper.create_variable_for_type_inference(x_t.dtype)
    helper.append_op(type="lstm_unit", inputs={"X": fc_out, "C_prev": cell_t_prev},
                     outputs={"C": c, "H": h}, attrs={"forget_bias": float(forget_bias)})
    return h, c


def lstm(input: Variable, init_h: Variable, init_c: Variable, max_len: int, hidden_size: int,
         num_layers: int, dropout_prob: float = 0.0, is_bidirec: bool = False,
         is_test: bool = False, name: Optional[str] = None, default_initializer: Any = None,
         seed: int = -1) -> Tuple[Variable, Variable, Variable]:
    """Multi-layer (bidirectional) LSTM of cuDNN's form (op ``cudnn_lstm``, run on CPU).
    ``input`` is time-major [seq_len, batch, input_size] (what the op computes over in
    fluid 1.8, whatever its docstring said); ``init_h`` / ``init_c`` [num_layers * dirs, batch,
    hidden_size]. All weights live in one flat parameter (size:
    ``ops.rnn.cudnn_lstm_weight_size``). Returns ``(rnn_out [seq_len, batch, dirs * hidden],
    last_h, last_c)``.

    Args:
        input (Variable): ``[T, N, D]`` (time major).
        init_h (Variable): ``[num_layers * directions, N, hidden_size]``.
        init_c (Variable): same shape as ``init_h``.
        max_len (int): the number of time steps.
        hidden_size (int): the hidden size.
        num_layers (int): stacked layers.
        dropout_prob (float, default 0.0): dropout between layers (training only).
        is_bidirec (bool, default False): bidirectional.
        is_test (bool, default False): inference mode.
        name (str | None): name prefix.
        default_initializer (Initializer | None): the weights' initializer.
        seed (int, default -1): the dropout seed.
    Returns:
        tuple: ``(out [T, N, hidden_size * directions], last_h, last_c)``.
    Raises:
        TypeError: ``input`` / ``init_h`` / ``init_c`` is not a float32/float64 Variable,
            ``max_len`` / ``hidden_size`` / ``num_layers`` is not an int, or ``dropout_prob`` is
            not a number.
        ValueError: an input is not 3-D, an int argument is below 1, ``dropout_prob`` is
            outside [0, 1], ``input``'s length exceeds ``max_len``, ``init_h`` / ``init_c`` is
            not [num_layers * directions, batch_size, hidden_size], or ``input``'s last dim is
            unknown.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [5, 2, 3])                        # [time, batch, input]
        ...     h0 = fluid.layers.fill_constant([1, 2, 4], "float32", 0.0)
        ...     c0 = fluid.layers.fill_constant([1, 2, 4], "float32", 0.0)
        ...     out, last_h, last_c = fluid.layers.lstm(x, h0, c0, max_len=5, hidden_size=4, num_layers=1)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> [a.shape for a in exe.run(main, feed={"x": np.ones((5, 2, 3), "float32")},
        ...                           fetch_list=[out, last_h])]
        [(5, 2, 4), (1, 2, 4)]
    """
    for arg, v in (("input", input), ("init_h", init_h), ("init_c", init_c)):
        _var(v, arg, "lstm")
        _float_dtype(v, arg, "lstm")
        if len(v.shape) != 3:
            raise ValueError(f"lstm: {arg} must be a 3-D tensor, but received shape "
                             f"{list(v.shape)}")
    hidden_size = check_int(hidden_size, "hidden_size", "lstm", minimum=1)
    num_layers = check_int(num_layers, "num_layers", "lstm", minimum=1)
    max_len = check_int(max_len, "max_len", "lstm", minimum=1)
    dropout_prob = check_number(dropout_prob, "dropout_prob", "lstm")
    if not 0.0 <= dropout_prob <= 1.0:
        raise ValueError(f"lstm: dropout_prob must be in [0, 1], but received {dropout_prob}")
    if input.shape[0] >= 0 and input.shape[0] > max_len:
        raise ValueError(f"lstm: the sequence length (input.shape[0] = {input.shape[0]}) "
                         f"must not exceed max_len = {max_len}")
    dirs = 2 if is_bidirec else 1
    for arg, v in (("init_h", init_h), ("init_c", init_c)):
        if (v.shape[0] >= 0 and v.shape[0] != num_layers * dirs) or \
                (v.shape[2] >= 0 and v.shape[2] != hidden_size):
            raise ValueError(f"lstm: {arg} must be [num_layers * {dirs} = {num_layers * dirs}, "
                             f"batch_size, hidden_size = {hidden_size}], but received shape "
                             f"{list(v.shape)}")
    input_size = input.shape[-1]
    if input_size < 0:
        raise ValueError("lstm: the last dimension of input (input_size) must be known")
    helper = LayerHelper("cudnn_lstm", name=name)
    dtype = input.dtype
    weight = helper.create_parameter(
        attr=helper.param_attr,
        shape=[cudnn_lstm_weight_size(input_size, hidden_size, num_layers, is_bidirec)],
        dtype=dtype, default_initializer=default_initializer)
    out = helper.create_variable_for_type_inference(dtype)
    last_h = helper.create_variable_for_type_inference(dtype)
    last_c = helper.create_variable_for_type_inference(dtype)
    reserve = helper.create_variable_for_type_inference(dtype, stop_gradient=True)
    state_out = helper.create_variable_for_type_inference("uint8", stop_gradient=True)
    helper.append_op(type="cudnn_lstm",
                     inputs={"Input": input, "InitH": init_h, "InitC": init_c, "W": weight},
                     outputs={"Out": out, "LastH": last_h, "LastC": last_c,
                              "Reserve": reserve, "StateOut": state_out},
                     attrs={"is_bidirec": bool(is_bidirec), "input_size": int(input_size),
                            "hidden_size": hidden_size, "num_layers": num_layers,
                            "is_test": bool(is_test), "dropout_prob": float(dropout_prob),
                            "seed": int(seed)})
    return out, last_h, last_c
