"""Image layers: ``conv2d``, ``conv2d_transpose`` and ``pool2d`` (fluid 1.8 signatures)."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from ..core.dtypes import is_float
from ..core.ir import Variable
from ..initializer import Normal
from ..layer_helper import LayerHelper, check_int, is_int, is_number

__all__ = ["conv2d", "conv2d_transpose", "pool2d"]

_IntOrPair = Union[int, Sequence[int]]


def _to_list(value: Any, n: int, name: str, layer: str) -> List[int]:
    """fluid's ``utils.convert_to_list``: an int is repeated ``n`` times."""
    if is_int(value):
        return [int(value)] * n
    # fluid's convert_to_list takes anything int() takes; integral floats (3.0) are kept
    if not isinstance(value, (list, tuple)) or \
            not all(is_number(v) and float(v) == int(v) for v in value):
        raise TypeError(f"{layer}: {name} must be an int or a list of {n} ints, but received "
                        f"{value!r}")
    out = [int(v) for v in value]
    if len(out) != n:
        raise ValueError(f"{layer}: {name} must have {n} values, got {list(value)}")
    return out


def _padding_nd(padding: Any, data_format: str, n: int, layer: str
                ) -> Tuple[List[int], str]:
    """fluid's padding forms for ``n`` spatial axes -> (paddings attr, padding_algorithm):
    an int, ``n`` ints, ``2n`` ints (before/after per axis), ``n + 2`` pairs including the zero
    batch/channel pairs (``[[0,0],[0,0],[t,b],[l,r]]`` for NCHW / NCDHW, the channel pair last
    otherwise), or 'SAME' / 'VALID'. Symmetric ``2n`` paddings come back as ``n`` values."""
    if isinstance(padding, str):
        algo = padding.upper()
        if algo not in ("SAME", "VALID"):
            raise ValueError(f"{layer}: unknown padding {padding!r}; it can only be 'SAME' or "
                             f"'VALID' (or ints)")
        return [0] * n, algo
    if isinstance(padding, (list, tuple)) and len(padding) == n + 2 and \
            isinstance(padding[0], (list, tuple)):
        channel_first = data_format in ("NCHW", "NCDHW")
        spatial = padding[2:] if channel_first else padding[1:n + 1]
        other = padding[:2] if channel_first else [padding[0], padding[-1]]
        if any(list(p) != [0, 0] for p in other):
            raise ValueError(f"{layer}: non-zero padding {padding} in the batch or channel "
                             f"dimensions is not supported")
        padding = [int(v) for pair in spatial for v in pair]
    if isinstance(padding, (list, tuple)) and len(padding) == 2 * n:
        pads = [int(v) for v in padding]
        if all(pads[2 * i] == pads[2 * i + 1] for i in range(n)):
            return pads[::2], "EXPLICIT"
        return pads, "EXPLICIT"
    return _to_list(padding, n, "padding", layer), "EXPLICIT"


def _padding(padding: Any, data_format: str, layer: str) -> Tuple[List[int], str]:
    """``_padding_nd`` for 2-D layers (NCHW / NHWC): an int, [ph, pw], [top, bottom, left,
    right], the 4-pair form or 'SAME' / 'VALID'."""
    return _padding_nd(padding, data_format, 2, layer)


def _check_input(layer: str, input: Variable, data_format: str) -> int:
    if not isinstance(input, Variable):
        raise TypeError(f"{layer}: input must be a Variable, got {type(input).__name__}")
    # fluid 1.8 checks the dtype first (check_variable_and_dtype), then the layout and rank
    if input.dtype is not None and not is_float(input.dtype):
        raise TypeError(f"{layer}: input '{input.name}' must be float16/32/64, got "
                        f"{input.dtype.name.lower()}")
    if data_format not in ("NCHW", "NHWC"):
        raise ValueError(f"{layer}: data_format must be 'NCHW' or 'NHWC', got {data_format!r}")
    if len(input.shape) != 4:
        raise ValueError(f"{layer}: input must be 4-D ({data_format}), got shape "
                         f"{list(input.shape)} for '{input.name}'")
    c = input.shape[1] if data_format == "NCHW" else input.shape[3]
    if c < 0:
        raise ValueError(f"{layer}: the channel dimension of the input '{input.name}' must be "
                         f"known, got shape {list(input.shape)}")
    return c


def _filters_and_groups(layer: str, input: Variable, C: int, num_filters: Any,
                        groups: Optional[int]) -> Tuple[int, int]:
    """``num_filters`` and ``groups`` (default 1) checked: positive ints dividing the filters
    and the input's ``C`` channels."""
    num_filters = check_int(num_filters, "num_filters", layer, minimum=1)
    groups = 1 if groups is None else check_int(groups, "groups", layer, minimum=1)
    if C % groups:
        raise ValueError(f"{layer}: the channel count of the input ({C}, shape "
                         f"{list(input.shape)}) must be divisible by groups ({groups})")
    if num_filters % groups:
        raise ValueError(f"{layer}: num_filters ({num_filters}) must be divisible by groups "
                         f"({groups})")
    return num_filters, groups


def _transpose_filters_and_groups(layer: str, C: int, num_filters: Any, groups: Optional[int]
                                  ) -> Tuple[int, int]:
    """A transposed convolution's ``num_filters`` and ``groups`` (default 1) checked: positive
    ints, both the input's ``C`` channels and the filters divisible by ``groups``."""
    num_filters = check_int(num_filters, "num_filters", layer, minimum=1)
    groups = 1 if groups is None else check_int(groups, "groups", layer, minimum=1)
    if C % groups or num_filters % groups:
        raise ValueError(f"{layer}: input channels ({C}) and num_filters ({num_filters}) must "
                         f"be divisible by groups ({groups})")
    return num_filters, groups


def _transpose_sizes(layer: str, n: int, output_size: Any, filter_size: Any,
                     spatial: Sequence[int], stride: List[int], paddings: List[int],
                     dilation: List[int]) -> Tuple[List[int], List[int]]:
    """A transposed convolution's ``output_size`` attr (``[]`` when not given, else ``n`` ints)
    and its filter size: ``filter_size`` as ``n`` ints, or, when it is None, the size that
    makes ``output_size`` from the input's ``spatial`` dims (``paddings`` as ``_padding_nd``
    returns them)."""
    if output_size is None:
        output_size = []
    elif is_int(output_size) or isinstance(output_size, (list, tuple)):
        output_size = _to_list(output_size, n, "output_size", layer)
    else:
        raise ValueError(f"{layer}: output_size should be an int or a list, got "
                         f"{output_size!r}")
    if filter_size is not None:
        return output_size, _to_list(filter_size, n, "filter_size", layer)
    if not output_size:
        raise ValueError(f"{layer}: output_size must be set when filter_size is None")
    # before/after per axis (symmetric paddings come as one value per axis)
    pads = paddings if len(paddings) == 2 * n else [v for p in paddings for v in (p, p)]
    return output_size, [(output_size[i] - (spatial[i] - 1) * stride[i] + pads[2 * i]
                          + pads[2 * i + 1] - 1) // dilation[i] + 1 for i in range(n)]


def _append_conv(helper: LayerHelper, op_type: str, input: Variable, filter_shape: List[int],
                 attrs: Dict[str, Any], channel_axis: int, initializer: Any = None
                 ) -> Variable:
    """``act(conv(input, W) + b)`` appended through ``helper``: the filter parameter W of
    ``filter_shape`` (``initializer`` unless ``param_attr`` names one; None: the helper's
    default), the ``op_type`` op (``Input``, ``Filter`` -> ``Output``) with ``attrs``, the bias
    on ``channel_axis`` (none with ``bias_attr=False``), then the activation."""
    w = helper.create_parameter(attr=helper.param_attr, shape=filter_shape, dtype=input.dtype,
                                default_initializer=initializer)
    pre_bias = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op(type=op_type, inputs={"Input": input, "Filter": w},
                     outputs={"Output": pre_bias}, attrs=attrs)
    pre_act = helper.append_bias_op(pre_bias, dim_start=channel_axis, dim_end=channel_axis + 1)
    return helper.append_activation(pre_act)


def conv2d(input: Variable, num_filters: int, filter_size: _IntOrPair, stride: _IntOrPair = 1,
           padding: Any = 0, dilation: _IntOrPair = 1, groups: Optional[int] = None,
           param_attr: Any = None, bias_attr: Any = None, use_cudnn: bool = True,
           act: Any = None, name: Optional[str] = None, data_format: str = "NCHW") -> Variable:
    """2-D convolution ``act(conv(input, W) + b)``; W is ``[num_filters, C/groups, kh, kw]``
    initialized Normal(0, sqrt(2 / (kh*kw*C))) unless ``param_attr`` says otherwise; the bias
    ``[num_filters]`` is added on the channel axis (``bias_attr=False``: no bias).

    Args:
        input (Variable): ``[N, C, H, W]`` (``data_format="NHWC"``: ``[N, H, W, C]``) float map.
        num_filters (int): output channels.
        filter_size (int | tuple of 2 ints): kernel height and width.
        stride (int | tuple of 2 ints, default 1): window step.
        padding (int | tuple | list | str, default 0): per-side zero padding (2 or 4 ints, or
            the per-dimension pairs), or ``"SAME"`` / ``"VALID"``.
        dilation (int | tuple of 2 ints, default 1): spacing of the kernel taps.
        groups (int | None): channel groups (``C`` and ``num_filters`` divisible by it).
        param_attr (ParamAttr | str | None): the filter's attribute.
        bias_attr (ParamAttr | str | bool | None): the bias ``[num_filters]``; ``False``: none.
        use_cudnn (bool, default True): accepted for fluid's signature (everything runs on
            the CPU).
        act (str | None): activation applied to the result.
        name (str | None): name prefix of the output variable.
        data_format (str, default "NCHW"): ``"NCHW"`` or ``"NHWC"``.
    Returns:
        Variable: ``[N, num_filters, H_out, W_out]`` with ``H_out = (H + pad_top + pad_bottom -
        (dilation * (kh - 1) + 1)) // stride + 1`` (likewise ``W_out``).
    Raises:
        ValueError: the input is not 4-D, or channels and groups do not divide.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     img = fluid.data("img", [-1, 3, 32, 32])
        ...     y = fluid.layers.conv2d(img, num_filters=8, filter_size=3, stride=2, padding=1,
        ...                             act="relu")
        >>> y.shape          # (32 + 2*1 - 3) // 2 + 1 = 16
        (-1, 8, 16, 16)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> exe.run(main, feed={"img": np.ones((2, 3, 32, 32), "float32")}, fetch_list=[y])[0].shape
        (2, 8, 16, 16)
    """
    C = _check_input("conv2d", input, data_format)
    _check_use_cudnn(use_cudnn)
    num_filters, groups = _filters_and_groups("conv2d", input, C, num_filters, groups)
    l_type = "depthwise_conv2d" if (C == groups and num_filters % C == 0 and not use_cudnn) \
        else "conv2d"
    helper = LayerHelper(l_type, input=input, param_attr=param_attr, bias_attr=bias_attr,
                         act=act, name=name)
    filter_size = _to_list(filter_size, 2, "filter_size", "conv2d")
    stride = _to_list(stride, 2, "stride", "conv2d")
    dilation = _to_list(dilation, 2, "dilation", "conv2d")
    paddings, algorithm = _padding(padding, data_format, "conv2d")
    std = (2.0 / (filter_size[0] * filter_size[1] * C)) ** 0.5
    ch = 1 if data_format == "NCHW" else 3
    return _append_conv(helper, l_type, input, [num_filters, C // groups] + filter_size,
                        {"strides": stride, "paddings": paddings, "dilations": dilation,
                         "groups": groups, "use_cudnn": use_cudnn, "use_mkldnn": False,
                         "fuse_relu_before_depthwise_conv": False,
                         "padding_algorithm": algorithm, "data_format": data_format},
                        ch, initializer=Normal(0.0, std, 0))


def conv2d_transpose(input: Variable, num_filters: int, output_size: Any = None,
                     filter_size: Any = None, padding: Any = 0, stride: _IntOrPair = 1,
                     dilation: _IntOrPair = 1, groups: Optional[int] = None,
                     param_attr: Any = None, bias_attr: Any = None, use_cudnn: bool = True,
                     act: Any = None, name: Optional[str] = None,
                     data_format: str = "NCHW") -> Variable:
    """Transposed 2-D convolution (the adjoint of conv2d): W is
    ``[C, num_filters/groups, kh, kw]`` (default Xavier init); output
    ``(H-1)*stride - pad_top - pad_bottom + dilation*(k-1) + 1`` per axis, or ``output_size``
    when given (``filter_size`` may then be omitted and is derived from it).

    Args:
        input (Variable): ``[N, C, H, W]`` (or NHWC) float map.
        num_filters (int): output channels.
        output_size (int | tuple | None): the output's height and width (then ``filter_size``
            may be omitted and is derived).
        filter_size (int | tuple | None): kernel height and width.
        padding (int | tuple | str, default 0): padding removed from the output, or
            ``"SAME"`` / ``"VALID"``.
        stride (int | tuple, default 1): the upsampling step.
        dilation (int | tuple, default 1): spacing of the kernel taps.
        groups (int | None): channel groups.
        param_attr (ParamAttr | str | None): the filter's attribute.
        bias_attr (ParamAttr | str | bool | None): the bias's attribute; ``False``: none.
        use_cudnn (bool, default True): accepted for fluid's signature.
        act (str | None): activation applied to the result.
        name (str | None): name prefix of the output.
        data_format (str, default "NCHW"): ``"NCHW"`` or ``"NHWC"``.
    Returns:
        Variable: ``[N, num_filters, H_out, W_out]`` with ``H_out = (H - 1) * stride - pad_top -
        pad_bottom + dilation * (kh - 1) + 1``.
    Raises:
        TypeError: ``input`` is not a float Variable, ``num_filters`` / ``groups`` is not an int,
            or ``stride`` / ``dilation`` / ``filter_size`` is not an int or list of ints.
        ValueError: ``param_attr`` is False, ``data_format`` is not ``"NCHW"``/``"NHWC"``,
            ``input`` is not 4-D with a known channel count, ``num_filters`` / ``groups`` is
            below 1 or does not divide the channels, ``padding`` is malformed, or neither
            ``output_size`` nor ``filter_size`` is given.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 2, 4, 4], "float32")
        ...     out = fluid.layers.conv2d_transpose(x, num_filters=3, filter_size=2, stride=2)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> res, = exe.run(main, feed={"x": np.ones((1, 2, 4, 4), "float32")}, fetch_list=[out])
        >>> res.shape
        (1, 3, 8, 8)
    """
    if param_attr is False:
        raise ValueError("conv2d_transpose: param_attr should not be False")
    C = _check_input("conv2d_transpose", input, data_format)
    _check_use_cudnn(use_cudnn)
    # fluid 1.8: a per-channel transpose without cuDNN is the depthwise op (its helper also
    # names the parameters depthwise_conv2d_transpose_N); the groups *given* are compared
    op_type = "depthwise_conv2d_transpose" if (
        groups is not None and C == groups and num_filters == C and not use_cudnn) \
        else "conv2d_transpose"
    num_filters, groups = _transpose_filters_and_groups("conv2d_transpose", C, num_filters,
                                                        groups)
    helper = LayerHelper(op_type, input=input, param_attr=param_attr,
                         bias_attr=bias_attr, act=act, name=name)
    stride = _to_list(stride, 2, "stride", "conv2d_transpose")
    dilation = _to_list(dilation, 2, "dilation", "conv2d_transpose")
    paddings, algorithm = _padding(padding, data_format, "conv2d_transpose")
    hw = input.shape[2:] if data_format == "NCHW" else input.shape[1:3]
    output_size, filter_size = _transpose_sizes("conv2d_transpose", 2, output_size, filter_size,
                                                hw, stride, paddings, dilation)
    ch = 1 if data_format == "NCHW" else 3
    return _append_conv(helper, op_type, input,
                        [C, num_filters // groups] + filter_size,
                        {"output_size": output_size, "strides": stride,
                         "paddings": paddings, "padding_algorithm": algorithm,
                         "dilations": dilation, "groups": groups, "use_cudnn": use_cudnn,
                         "data_format": data_format}, ch)


def pool2d(input: Variable, pool_size: _IntOrPair = -1, pool_type: str = "max",
           pool_stride: _IntOrPair = 1, pool_padding: Any = 0, global_pooling: bool = False,
           use_cudnn: bool = True, ceil_mode: bool = False, name: Optional[str] = None,
           exclusive: bool = True, data_format: str = "NCHW") -> Variable:
    """Max or average pooling over ``pool_size`` windows (``global_pooling``: the whole map;
    ``ceil_mode``: round the output size up; ``exclusive``: averages ignore padding).

    Args:
        input (Variable): ``[N, C, H, W]`` (or NHWC) float map.
        pool_size (int | tuple of 2 ints, default -1): window size (ignored with
            ``global_pooling``).
        pool_type (str, default "max"): ``"max"`` or ``"avg"``.
        pool_stride (int | tuple of 2 ints, default 1): window step.
        pool_padding (int | tuple | list | str, default 0): per-side padding, or ``"SAME"`` /
            ``"VALID"``.
        global_pooling (bool, default False): pool the whole map to ``1 x 1``.
        use_cudnn (bool, default True): accepted for fluid's signature.
        ceil_mode (bool, default False): round the output size up instead of down.
        name (str | None): name prefix of the output variable.
        exclusive (bool, default True): averages count only the unpadded elements.
        data_format (str, default "NCHW"): ``"NCHW"`` or ``"NHWC"``.
    Returns:
        Variable: the pooled map, ``[N, C, H_out, W_out]``.
    Raises:
        TypeError: ``input`` is not a float Variable, ``use_cudnn`` is not a bool, or
            ``pool_size`` / ``pool_stride`` is not an int or list of ints.
        ValueError: ``pool_type`` is not ``"max"``/``"avg"``, ``pool_size`` is missing without
            ``global_pooling``, ``data_format`` is not ``"NCHW"``/``"NHWC"``, ``input`` is not
            4-D, ``pool_padding`` is malformed, or ``pool_padding="VALID"`` with ``ceil_mode``.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 1, 4, 4])
        ...     mx = fluid.layers.pool2d(x, pool_size=2, pool_type="max", pool_stride=2)
        ...     avg = fluid.layers.pool2d(x, pool_type="avg", global_pooling=True)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> a, b = exe.run(main, feed={"x": np.arange(16, dtype="float32").reshape(1, 1, 4, 4)},
        ...                fetch_list=[mx, avg])
        >>> a[0, 0]
        array([[ 5.,  7.],
               [13., 15.]], dtype=float32)
        >>> b.ravel()
        array([7.5], dtype=float32)
    """
    _check_pool_args("pool2d", pool_type, pool_size, global_pooling, use_cudnn)
    _check_input("pool2d", input, data_format)
    pool_size = _to_list(pool_size, 2, "pool_size", "pool2d")
    return _append_pool("pool2d", 2, input, pool_size, pool_type, pool_stride, pool_padding,
                        global_pooling, use_cudnn, ceil_mode, name, exclusive, data_format)


def _check_use_cudnn(use_cudnn: Any) -> None:
    """fluid 1.8's conv layers: a non-bool ``use_cudnn`` is a ValueError (their wording)."""
    if not isinstance(use_cudnn, bool):
        raise ValueError(f"Attr(use_cudnn) should be True or False. Received "
                         f"Attr(use_cudnn): {use_cudnn}. ")


def _check_pool_args(layer: str, pool_type: str, pool_size: Any, global_pooling: bool,
                     use_cudnn: Any) -> None:
    """The checks of pool2d / pool3d's arguments that come before the input's: ``pool_type``
    'max' or 'avg', a ``pool_size`` unless ``global_pooling``, a bool ``use_cudnn``."""
    if pool_type not in ("max", "avg"):
        raise ValueError(f"{layer}: unknown pool_type {pool_type!r}; it can only be 'max' or "
                         f"'avg'")
    if not global_pooling and (pool_size == -1 or pool_size is None):
        raise ValueError(f"{layer}: when global_pooling is False, pool_size must be passed and "
                         f"be a valid value; received pool_size: {pool_size}")
    if not isinstance(use_cudnn, bool):
        raise TypeError(f"{layer}: use_cudnn should be True or False, got {use_cudnn!r}")


def _append_pool(layer: str, n: int, input: Variable, pool_size: List[int], pool_type: str,
                 pool_stride: Any, pool_padding: Any, global_pooling: bool, use_cudnn: bool,
                 ceil_mode: bool, name: Optional[str], exclusive: bool,
                 data_format: str) -> Variable:
    """The ``layer`` op (pool2d / pool3d, ``n`` spatial axes) appended, its stride and padding
    normalized first ('VALID' padding refuses ``ceil_mode``); returns its output."""
    pool_stride = _to_list(pool_stride, n, "pool_stride", layer)
    paddings, algorithm = _padding_nd(pool_padding, data_format, n, layer)
    if algorithm == "VALID" and ceil_mode:       # fluid 1.8's check (SAME takes ceil_mode)
        raise ValueError(f"{layer}: when Attr(pool_padding) is \"VALID\", Attr(ceil_mode) "
                         f"must be False. Received ceil_mode: True.")
    helper = LayerHelper(layer, input=input, name=name)
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op(type=layer, inputs={"X": input}, outputs={"Out": out},
                     attrs={"pooling_type": pool_type, "ksize": pool_size,
                            "global_pooling": global_pooling, "strides": pool_stride,
                            "paddings": paddings, "padding_algorithm": algorithm,
                            "use_cudnn": use_cudnn, "ceil_mode": ceil_mode, "use_mkldnn": False,
                            "exclusive": exclusive, "data_format": data_format})
    return out
