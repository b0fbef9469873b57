"""fluid 1.8's 3-D dygraph layers ``Conv3D`` and ``Conv3DTranspose``: the parameters of
``fluid.layers.conv3d`` / ``conv3d_transpose`` (names ``conv3d_N.w_0`` / ``.b_0``, shapes
``[num_filters, C/groups, kd, kh, kw]`` and ``[C, num_filters/groups, kd, kh, kw]``), and the
same ``conv3d`` / ``conv3d_transpose`` ops run through the tracer."""
from __future__ import annotations

from typing import Any, Optional

from ..initializer import Normal
from ..layer_helper import check_act, check_int
from ..layers.conv import _to_list
from ..layers.vision import _padding_nd
from .nn import _Op
from .tensor import VarBase

__all__ = ["Conv3D", "Conv3DTranspose"]


def _common(layer: str, num_channels: Any, num_filters: Any, groups: Any, act: Any):
    c = check_int(num_channels, "num_channels", layer, minimum=1)
    f = check_int(num_filters, "num_filters", layer, minimum=1)
    g = 1 if groups is None else check_int(groups, "groups", layer, minimum=1)
    if c % g or f % g:
        raise ValueError(f"{layer}: num_channels ({c}) and num_filters ({f}) must be divisible "
                         f"by groups ({g})")
    check_act(act, layer)
    return c, f, g


class Conv3D(_Op):
    """3-D convolution as ``fluid.layers.conv3d`` (NCDHW): ``W: [num_filters, C/groups, kd,
    kh, kw]`` (Normal(0, sqrt(2/(kd*kh*kw*C)))), bias ``[num_filters]`` on axis 1, then
    ``act``.

    Args:
        num_channels (int): input channels ``C``.
        num_filters (int): output channels.
        filter_size (int | tuple of 3 ints): kernel depth, height and width.
        stride (int | tuple, default 1): window step.
        padding (int | tuple | str, default 0): zero padding (or ``"SAME"`` / ``"VALID"``).
        dilation (int | tuple, default 1): spacing of the kernel taps.
        groups (int | None): channel groups (default 1).
        param_attr (ParamAttr | str | None): the filter's attribute.
        bias_attr (ParamAttr | str | bool | None): the bias's attribute; ``False``: none.
        use_cudnn (bool, default True): accepted for fluid's signature.
        act (str | None): activation applied to the result.
        dtype (str, default "float32"): the parameters' dtype.
    Returns:
        Conv3D: the layer; ``layer(input)`` maps ``[N, C, D, H, W]`` to
        ``[N, num_filters, D', H', W']``.
    Raises:
        TypeError: a count is not an int, a size/stride/padding/dilation is not an int or list
            of 3 ints, or ``act`` has the wrong type.
        ValueError: a count < 1, ``num_channels`` / ``num_filters`` not divisible by ``groups``,
            a list of the wrong length, an unknown padding or ``act``; when called, the input is
            not 5-D or its channels differ from ``num_channels``.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> with fluid.dygraph.guard():
        ...     conv = fluid.dygraph.Conv3D(num_channels=2, num_filters=3, filter_size=3, padding=1)
        ...     print(conv(fluid.dygraph.to_variable(np.ones((1, 2, 4, 4, 4), "float32"))).shape)
        [1, 3, 4, 4, 4]
    """

    def __init__(self, num_channels: int, num_filters: int, filter_size: Any, stride: Any = 1,
                 padding: Any = 0, dilation: Any = 1, groups: Optional[int] = None,
                 param_attr: Any = None, bias_attr: Any = None, use_cudnn: bool = True,
                 act: Any = None, dtype: Any = "float32") -> None:
        super().__init__("conv3d", dtype)
        c, f, g = _common("Conv3D", num_channels, num_filters, groups, act)
        fs = _to_list(filter_size, 3, "filter_size", "Conv3D")
        paddings, algorithm = _padding_nd(padding, "NCDHW", 3, "Conv3D")
        self._attrs = {"strides": _to_list(stride, 3, "stride", "Conv3D"),
                       "paddings": paddings, "padding_algorithm": algorithm,
                       "dilations": _to_list(dilation, 3, "dilation", "Conv3D"), "groups": g,
                       "use_cudnn": use_cudnn, "use_mkldnn": False, "data_format": "NCDHW"}
        self._act = act
        std = (2.0 / (fs[0] * fs[1] * fs[2] * c)) ** 0.5
        self.weight = self.create_parameter([f, c // g] + fs, param_attr, dtype,
                                            default_initializer=Normal(0.0, std, 0))
        self.bias = self.create_parameter([f], bias_attr, dtype, is_bias=True)

    def forward(self, input: VarBase) -> VarBase:
        out = self._run("conv3d", {"Input": input, "Filter": self.weight}, self._attrs,
                        out_slot="Output")
        return self._bias_act(out, self.bias, 1, self._act)


class Conv3DTranspose(_Op):
    """Transposed 3-D convolution as ``fluid.layers.conv3d_transpose`` (NCDHW):
    ``W: [C, num_filters/groups, kd, kh, kw]`` (Xavier), bias on axis 1, then ``act``.

    Args:
        num_channels (int): input channels ``C``.
        num_filters (int): output channels.
        filter_size (int | tuple of 3 ints): kernel depth, height and width.
        output_size (int | tuple of 3 ints | None): the output's depth, height and width.
        padding (int | tuple | str, default 0): zero padding (or ``"SAME"`` / ``"VALID"``).
        stride (int | tuple, default 1): the upsampling step.
        dilation (int | tuple, default 1): spacing of the kernel taps.
        groups (int | None): channel groups (default 1).
        param_attr (ParamAttr | str | None): the filter's attribute (not ``False``).
        bias_attr (ParamAttr | str | bool | None): the bias's attribute; ``False``: none.
        use_cudnn (bool, default True): accepted for fluid's signature.
        act (str | None): activation applied to the result.
        name (str | None): accepted for fluid's signature.
        dtype (str, default "float32"): the parameters' dtype.
    Returns:
        Conv3DTranspose: the layer; ``layer(input)`` maps ``[N, C, D, H, W]`` to
        ``[N, num_filters, D', H', W']``.
    Raises:
        TypeError: a count is not an int, a size/stride/padding/dilation is not an int or list
            of 3 ints, or ``act`` has the wrong type.
        ValueError: ``param_attr`` is False, a count < 1, ``num_channels`` / ``num_filters`` not
            divisible by ``groups``, a list of the wrong length, an unknown padding or ``act``;
            when called, the input is not 5-D or its channels differ from ``num_channels``.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> with fluid.dygraph.guard():
        ...     conv = fluid.dygraph.Conv3DTranspose(num_channels=2, num_filters=3, filter_size=2, stride=2)
        ...     print(conv(fluid.dygraph.to_variable(np.ones((1, 2, 2, 2, 2), "float32"))).shape)
        [1, 3, 4, 4, 4]
    """

    def __init__(self, num_channels: int, num_filters: int, filter_size: Any,
                 output_size: Any = None, padding: Any = 0, stride: Any = 1, dilation: Any = 1,
                 groups: Optional[int] = None, param_attr: Any = None, bias_attr: Any = None,
                 use_cudnn: bool = True, act: Any = None, name: Optional[str] = None,
                 dtype: Any = "float32") -> None:
        super().__init__("conv3d_transpose", dtype)
        layer = "Conv3DTranspose"
        if param_attr is False:
            raise ValueError(f"{layer}: param_attr should not be False")
        c, f, g = _common(layer, num_channels, num_filters, groups, act)
        fs = _to_list(filter_size, 3, "filter_size", layer)
        paddings, algorithm = _padding_nd(padding, "NCDHW", 3, layer)
        self._attrs = {"output_size": [] if output_size is None else
                       _to_list(output_size, 3, "output_size", layer),
                       "strides": _to_list(stride, 3, "stride", layer), "paddings": paddings,
                       "padding_algorithm": algorithm,
                       "dilations": _to_list(dilation, 3, "dilation", layer), "groups": g,
                       "use_cudnn": use_cudnn, "data_format": "NCDHW"}
        self._act = act
        self.weight = self.create_parameter([c, f // g] + fs, param_attr, dtype)
        self.bias = self.create_parameter([f], bias_attr, dtype, is_bias=True)

    def forward(self, input: VarBase) -> VarBase:
        out = self._run("conv3d_transpose", {"Input": input, "Filter": self.weight},
                        self._attrs, out_slot="Output")
        return self._bias_act(out, self.bias, 1, self._act)
