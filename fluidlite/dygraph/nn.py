"""fluid 1.8's dygraph layer classes. Each creates its parameters once (fluid's names and
shapes: ``linear_0.w_0`` ``[in, out]``, ``conv2d_0.w_0`` ``[out, in/groups, kh, kw]`` ...) and its
``forward`` runs the same ops as the static layer function (``mul``/``matmul``, ``conv2d``,
``pool2d``, ``batch_norm``, ``lookup_table_v2``, ``dropout``, ``layer_norm``, ``prelu``,
``group_norm``, ``instance_norm``, ``bilinear_tensor_product``, ``gru_unit``,
``spectral_norm`` ...) through the tracer: one registered op per layer, so a model gives the
same numbers in both modes.
Layers without parameters call the ``fluid.layers`` function itself.
"""
from __future__ import annotations

from typing import Any, List, Optional, Sequence

from .. import layers as _layers
from ..core import mode as _mode
from ..core.dtypes import VarType, convert_np_dtype_to_dtype_
from ..initializer import Constant, Normal
from ..layer_helper import check_act, check_int, check_number
from ..layers.conv import _padding, _to_list
from ..layers.rnn import _ACT_CODES as _GRU_ACT_CODES
from ..param_attr import ParamAttr
from .layers import Layer
from .tensor import VarBase

__all__ = ["Linear", "Conv2D", "Conv2DTranspose", "Pool2D", "BatchNorm", "LayerNorm",
           "Embedding", "Dropout", "PRelu", "Flatten", "GroupNorm", "InstanceNorm",
           "BilinearTensorProduct", "GRUUnit", "SpectralNorm", "NCE", "TreeConv", "L1Loss",
           "MSELoss", "BCELoss", "NLLLoss"]


class _Op(Layer):
    """Helpers shared by the layer classes: run one op, add a bias, apply ``act``."""

    def _run(self, op_type: str, inputs: dict, attrs: Optional[dict] = None,
             out_slot: str = "Out", dtype: Any = None, extra_outputs: Sequence[str] = ()
             ) -> VarBase:
        tracer = _mode.tracer
        if tracer is not None and not extra_outputs:    # the common case, called per op
            return tracer.layer_op(op_type, inputs, (out_slot,), attrs,
                                   self._helper.tmp_hint)[0]
        helper = self._helper
        out = helper.create_variable_for_type_inference(dtype)
        outputs = {out_slot: out}
        for slot in extra_outputs:
            outputs[slot] = helper.create_variable_for_type_inference(dtype, stop_gradient=True)
        helper.append_op(type=op_type, inputs=inputs, outputs=outputs, attrs=attrs or {})
        return out

    def _bias_act(self, x: VarBase, bias: Optional[VarBase], axis: int, act: Any) -> VarBase:
        if bias is not None:
            x = self._run("elementwise_add", {"X": x, "Y": bias}, {"axis": axis})
        if act is None:
            return x
        if act.__class__ is str:
            return self._run(act, {"X": x})
        act = dict(act)
        act_type = act.pop("type")
        return self._run(act_type, {"X": x}, act)


_MUL_ATTRS = {"x_num_col_dims": 1, "y_num_col_dims": 1}     # (never changed by a caller)


class Linear(_Op):
    """``act(input @ W + b)``, ``W: [input_dim, output_dim]`` (``linear_N.w_0``, Xavier),
    ``b: [output_dim]`` (``linear_N.b_0``, zeros; ``bias_attr=False``: none). The input may have
    any rank >= 2 (the last dim is contracted, as fluid's ``matmul``).

    Args:
        input_dim (int): the input's last dim.
        output_dim (int): the output's last dim.
        param_attr (ParamAttr | str | None): the weight's attribute.
        bias_attr (ParamAttr | str | bool | None): the bias's attribute; ``False``: no bias.
        act (str | None): activation applied to the result.
        dtype (str, default "float32"): the parameters' dtype.
    Returns:
        Linear: the layer; ``layer(input)`` returns ``act(input @ W + b)``, shape
        ``input.shape[:-1] + [output_dim]``, the input's dtype.
    Raises:
        TypeError: ``input_dim`` / ``output_dim`` is not an int, or ``act`` / ``param_attr`` /
            ``bias_attr`` has the wrong type.
        ValueError: ``input_dim`` or ``output_dim`` < 1 or ``act`` is not an activation; when
            called, the input's last dim differs from ``input_dim``.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> with fluid.dygraph.guard():
        ...     fc = fluid.dygraph.Linear(3, 2, param_attr=fluid.ParamAttr(
        ...         initializer=fluid.initializer.Constant(1.0)))
        ...     y = fc(fluid.dygraph.to_variable(np.array([[1, 2, 3]], "float32")))
        ...     print(y.numpy())                      # bias starts at 0
        [[6. 6.]]
    """

    def __init__(self, input_dim: int, output_dim: int, param_attr: Any = None,
                 bias_attr: Any = None, act: Any = None, dtype: Any = "float32") -> None:
        super().__init__("linear", dtype)
        input_dim = check_int(input_dim, "input_dim", "Linear", minimum=1)
        output_dim = check_int(output_dim, "output_dim", "Linear", minimum=1)
        check_act(act, "Linear")
        self._act = act
        self.weight = self.create_parameter([input_dim, output_dim], param_attr, dtype)
        self.bias = self.create_parameter([output_dim], bias_attr, dtype, is_bias=True)

    def forward(self, input: VarBase) -> VarBase:
        params = self._parameters      # (what self.weight reads, without __getattr__)
        rank = input.ndim
        if rank == 2:
            out = self._run("mul", {"X": input, "Y": params["weight"]}, _MUL_ATTRS)
        else:
            out = self._run("matmul", {"X": input, "Y": params["weight"]},
                            {"transpose_X": False, "transpose_Y": False, "alpha": 1.0})
        return self._bias_act(out, params.get("bias"), rank - 1, self._act)


class Conv2D(_Op):
    """2-D convolution as ``fluid.layers.conv2d``: ``W: [num_filters, C/groups, kh, kw]``
    (Normal(0, sqrt(2/(kh*kw*C)))), bias ``[num_filters]`` on axis 1, then ``act``.

    Args:
        num_channels (int): input channels.
        num_filters (int): output channels.
        filter_size (int | tuple of 2 ints): kernel height and width.
        stride (int | tuple, default 1): window step.
        padding (int | tuple, default 0): zero padding.
        dilation (int | tuple, default 1): spacing of the kernel taps.
        groups (int | None): channel groups.
        param_attr (ParamAttr | str | None): the filter's attribute.
        bias_attr (ParamAttr | str | bool | None): the bias's attribute; ``False``: none.
        use_cudnn (bool, default True): accepted for fluid's signature.
        act (str | None): activation applied to the result.
        dtype (str, default "float32"): the parameters' dtype.
    Returns:
        Conv2D: the layer; ``layer(input)`` maps ``[N, num_channels, H, W]`` to
        ``[N, num_filters, H', W']``.
    Raises:
        TypeError: a count is not an int, a size/stride/padding/dilation is not an int or list
            of 2 ints, or ``act`` has the wrong type.
        ValueError: a count < 1, ``num_channels`` / ``num_filters`` not divisible by ``groups``,
            a list of the wrong length, an unknown padding or ``act``; when called, the input is
            not 4-D or its channels differ from ``num_channels``.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> with fluid.dygraph.guard():
        ...     conv = fluid.dygraph.Conv2D(num_channels=3, num_filters=4, filter_size=3, padding=1)
        ...     y = conv(fluid.dygraph.to_variable(np.ones((2, 3, 8, 8), "float32")))
        ...     print(y.shape, conv.weight.shape)
        [2, 4, 8, 8] [4, 3, 3, 3]
    """

    def __init__(self, num_channels: int, num_filters: int, filter_size: Any, stride: Any = 1,
                 padding: Any = 0, dilation: Any = 1, groups: Optional[int] = None,
                 param_attr: Any = None, bias_attr: Any = None, use_cudnn: bool = True,
                 act: Any = None, dtype: Any = "float32") -> None:
        super().__init__("conv2d", dtype)
        c = check_int(num_channels, "num_channels", "Conv2D", minimum=1)
        num_filters = check_int(num_filters, "num_filters", "Conv2D", minimum=1)
        groups = 1 if groups is None else check_int(groups, "groups", "Conv2D", minimum=1)
        if c % groups or num_filters % groups:
            raise ValueError(f"Conv2D: num_channels ({c}) and num_filters ({num_filters}) must "
                             f"be divisible by groups ({groups})")
        check_act(act, "Conv2D")
        fs = _to_list(filter_size, 2, "filter_size", "Conv2D")
        paddings, algorithm = _padding(padding, "NCHW", "Conv2D")
        self._op_type = "depthwise_conv2d" if (c == groups and num_filters % c == 0
                                               and not use_cudnn) else "conv2d"
        self._attrs = {"strides": _to_list(stride, 2, "stride", "Conv2D"), "paddings": paddings,
                       "dilations": _to_list(dilation, 2, "dilation", "Conv2D"),
                       "groups": groups, "use_cudnn": use_cudnn, "use_mkldnn": False,
                       "fuse_relu_before_depthwise_conv": False,
                       "padding_algorithm": algorithm, "data_format": "NCHW"}
        self._act = act
        std = (2.0 / (fs[0] * fs[1] * c)) ** 0.5
        self.weight = self.create_parameter([num_filters, c // groups] + fs, param_attr, dtype,
                                            default_initializer=Normal(0.0, std, 0))
        self.bias = self.create_parameter([num_filters], bias_attr, dtype, is_bias=True)

    def forward(self, input: VarBase) -> VarBase:
        out = self._run(self._op_type, {"Input": input, "Filter": self.weight}, self._attrs,
                        out_slot="Output")
        return self._bias_act(out, self.bias, 1, self._act)


class Conv2DTranspose(_Op):
    """Transposed 2-D convolution as ``fluid.layers.conv2d_transpose``:
    ``W: [C, num_filters/groups, kh, kw]``, bias on axis 1, then ``act``.

    Args:
        num_channels (int): input channels ``C``.
        num_filters (int): output channels.
        filter_size (int | tuple of 2 ints): kernel height and width.
        output_size (int | tuple of 2 ints | None): the output's height and width (when the
            stride leaves it ambiguous).
        padding (int | tuple | str, default 0): zero padding (or ``"SAME"`` / ``"VALID"``).
        stride (int | tuple, default 1): the upsampling step.
        dilation (int | tuple, default 1): spacing of the kernel taps.
        groups (int | None): channel groups (default 1).
        param_attr (ParamAttr | str | None): the filter's attribute.
        bias_attr (ParamAttr | str | bool | None): the bias's attribute; ``False``: none.
        use_cudnn (bool, default True): accepted for fluid's signature.
        act (str | None): activation applied to the result.
        dtype (str, default "float32"): the parameters' dtype.
    Returns:
        Conv2DTranspose: the layer; ``layer(input)`` maps ``[N, C, H, W]`` to
        ``[N, num_filters, H', W']``.
    Raises:
        TypeError: a count is not an int, a size/stride/padding/dilation is not an int or list
            of 2 ints, or ``act`` has the wrong type.
        ValueError: a count < 1, a list of the wrong length, an unknown padding or ``act``; when
            called, the input is not 4-D or its channels differ from ``num_channels``.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> with fluid.dygraph.guard():
        ...     conv = fluid.dygraph.Conv2DTranspose(num_channels=2, num_filters=3, filter_size=2, stride=2)
        ...     print(conv(fluid.dygraph.to_variable(np.ones((1, 2, 4, 4), "float32"))).shape)
        [1, 3, 8, 8]
    """

    def __init__(self, num_channels: int, num_filters: int, filter_size: Any,
                 output_size: Any = None, padding: Any = 0, stride: Any = 1, dilation: Any = 1,
                 groups: Optional[int] = None, param_attr: Any = None, bias_attr: Any = None,
                 use_cudnn: bool = True, act: Any = None, dtype: Any = "float32") -> None:
        super().__init__("conv2d_transpose", dtype)
        c = check_int(num_channels, "num_channels", "Conv2DTranspose", minimum=1)
        num_filters = check_int(num_filters, "num_filters", "Conv2DTranspose", minimum=1)
        groups = 1 if groups is None else check_int(groups, "groups", "Conv2DTranspose",
                                                    minimum=1)
        check_act(act, "Conv2DTranspose")
        fs = _to_list(filter_size, 2, "filter_size", "Conv2DTranspose")
        paddings, algorithm = _padding(padding, "NCHW", "Conv2DTranspose")
        self._attrs = {"output_size": [] if output_size is None else
                       _to_list(output_size, 2, "output_size", "Conv2DTranspose"),
                       "strides": _to_list(stride, 2, "stride", "Conv2DTranspose"),
                       "paddings": paddings, "padding_algorithm": algorithm,
                       "dilations": _to_list(dilation, 2, "dilation", "Conv2DTranspose"),
                       "groups": groups, "use_cudnn": use_cudnn, "data_format": "NCHW"}
        self._act = act
        self.weight = self.create_parameter([c, num_filters // groups] + fs, param_attr, dtype)
        self.bias = self.create_parameter([num_filters], bias_attr, dtype, is_bias=True)

    def forward(self, input: VarBase) -> VarBase:
        out = self._run("conv2d_transpose", {"Input": input, "Filter": self.weight},
                        self._attrs, out_slot="Output")
        return self._bias_act(out, self.bias, 1, self._act)


class Pool2D(Layer):
    """``fluid.layers.pool2d`` with the constructor's arguments.

    Args:
        pool_size (int | tuple, default -1): window size.
        pool_type (str, default "max"): ``"max"`` or ``"avg"``.
        pool_stride (int | tuple, default 1): window step.
        pool_padding (int | tuple, default 0): padding.
        global_pooling (bool, default False): pool the whole map.
        use_cudnn (bool, default True): accepted for fluid's signature.
        ceil_mode (bool, default False): round the output size up.
        exclusive (bool, default True): averages ignore padding.
        data_format (str, default "NCHW"): ``"NCHW"`` or ``"NHWC"``.
    Returns:
        Pool2D: the layer; ``layer(input)`` returns ``fluid.layers.pool2d(input, ...)``.
    Raises:
        ValueError: when called, ``pool_type`` is not ``"max"`` / ``"avg"``, the input is not 4-D,
            or a size/stride/padding is invalid (the constructor only stores the arguments).
        TypeError: when called, the input is not a float tensor.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> with fluid.dygraph.guard():
        ...     pool = fluid.dygraph.Pool2D(pool_size=2, pool_type="max", pool_stride=2)
        ...     x = np.arange(16, dtype="float32").reshape(1, 1, 4, 4)
        ...     print(pool(fluid.dygraph.to_variable(x)).numpy()[0, 0])
        [[ 5.  7.]
         [13. 15.]]
    """

    def __init__(self, pool_size: Any = -1, pool_type: str = "max", pool_stride: Any = 1,
                 pool_padding: Any = 0, global_pooling: bool = False, use_cudnn: bool = True,
                 ceil_mode: bool = False, exclusive: bool = True,
                 data_format: str = "NCHW") -> None:
        super().__init__("pool2d")
        self._kw = dict(pool_size=pool_size, pool_type=pool_type, pool_stride=pool_stride,
                        pool_padding=pool_padding, global_pooling=global_pooling,
                        use_cudnn=use_cudnn, ceil_mode=ceil_mode, exclusive=exclusive,
                        data_format=data_format)

    def forward(self, input: VarBase) -> VarBase:
        return _layers.pool2d(input, **self._kw)


class BatchNorm(_Op):
    """Batch normalization as ``fluid.layers.batch_norm``: scale ``w_0`` (1), bias ``b_0`` (0),
    moving mean ``w_1`` (0) and variance ``w_2`` (1), updated in place while training
    (``running = running*momentum + batch*(1-momentum)``); ``eval()`` (or ``is_test=True`` /
    ``use_global_stats=True``) normalizes with the moving statistics.

    Args:
        num_channels (int): input channels.
        act (str | None): activation applied to the result.
        is_test (bool, default False): normalize with the moving statistics (``eval()`` does
            too).
        momentum (float, default 0.9): the moving averages' decay.
        epsilon (float, default 1e-5): added to the variance.
        param_attr (ParamAttr | str | None): the scale's attribute.
        bias_attr (ParamAttr | str | None): the bias's attribute.
        dtype (str, default "float32"): the parameters' dtype.
        data_layout (str, default "NCHW"): the layout.
        in_place (bool, default False): accepted (the output is a fresh tensor).
        moving_mean_name (str | None): name of the moving mean.
        moving_variance_name (str | None): name of the moving variance.
        do_model_average_for_mean_and_var (bool, default True): accepted for fluid's
            signature.
        use_global_stats (bool, default False): use the moving statistics in training too.
        trainable_statistics (bool, default False): batch statistics in eval mode too.
    Returns:
        BatchNorm: the layer; ``layer(input)`` returns the normalized input, same shape and dtype.
    Raises:
        TypeError: ``num_channels`` is not an int, ``momentum`` / ``epsilon`` is not a number, or
            ``act`` has the wrong type.
        ValueError: ``num_channels`` < 1, ``data_layout`` is not NCHW/NHWC or ``act`` is unknown;
            when called, the input's channels differ from ``num_channels``.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> with fluid.dygraph.guard():
        ...     bn = fluid.dygraph.BatchNorm(num_channels=2)
        ...     x = np.random.RandomState(0).rand(4, 2, 3, 3).astype("float32")
        ...     y = bn(fluid.dygraph.to_variable(x)).numpy()
        ...     print(y.shape, np.abs(y.mean(axis=(0, 2, 3))).max() < 1e-5)
        (4, 2, 3, 3) True
    """

    def __init__(self, num_channels: int, act: Any = None, is_test: bool = False,
                 momentum: float = 0.9, epsilon: float = 1e-05, param_attr: Any = None,
                 bias_attr: Any = None, dtype: Any = "float32", data_layout: str = "NCHW",
                 in_place: bool = False, moving_mean_name: Optional[str] = None,
                 moving_variance_name: Optional[str] = None,
                 do_model_average_for_mean_and_var: bool = True,
                 use_global_stats: bool = False, trainable_statistics: bool = False) -> None:
        super().__init__("batch_norm", dtype)
        c = check_int(num_channels, "num_channels", "BatchNorm", minimum=1)
        check_act(act, "BatchNorm")
        if data_layout not in ("NCHW", "NHWC"):
            raise ValueError(f"BatchNorm: unsupported data_layout {data_layout!r}")
        self._act, self._is_test, self._layout = act, bool(is_test), data_layout
        self._momentum = check_number(momentum, "momentum", "BatchNorm")
        self._epsilon = check_number(epsilon, "epsilon", "BatchNorm")
        self._use_global_stats = bool(use_global_stats)
        self._trainable_statistics = bool(trainable_statistics)
        pdtype = "float32" if convert_np_dtype_to_dtype_(dtype) == VarType.FP16 else dtype
        self.weight = self.create_parameter([c], param_attr, pdtype,
                                            default_initializer=Constant(1.0))
        self.bias = self.create_parameter([c], bias_attr, pdtype, is_bias=True)
        self._mean = self.create_parameter(
            [c], ParamAttr(name=moving_mean_name, initializer=Constant(0.0), trainable=False,
                           do_model_average=do_model_average_for_mean_and_var), pdtype)
        self._variance = self.create_parameter(
            [c], ParamAttr(name=moving_variance_name, initializer=Constant(1.0),
                           trainable=False,
                           do_model_average=do_model_average_for_mean_and_var), pdtype)
        self._mean.stop_gradient = self._variance.stop_gradient = True

    def forward(self, input: VarBase) -> VarBase:
        helper = self._helper
        out = helper.create_variable_for_type_inference(input.dtype)
        saved_mean = helper.create_variable_for_type_inference(stop_gradient=True)
        saved_var = helper.create_variable_for_type_inference(stop_gradient=True)
        is_test = self._is_test or not self.training
        helper.append_op(
            type="batch_norm",
            inputs={"X": input, "Scale": self.weight, "Bias": self.bias, "Mean": self._mean,
                    "Variance": self._variance},
            outputs={"Y": out, "MeanOut": self._mean, "VarianceOut": self._variance,
                     "SavedMean": saved_mean, "SavedVariance": saved_var},
            attrs={"momentum": self._momentum, "epsilon": self._epsilon, "is_test": is_test,
                   "data_layout": self._layout, "use_mkldnn": False, "fuse_with_relu": False,
                   "use_global_stats": self._use_global_stats,
                   "trainable_statistics": self._trainable_statistics})
        return self._bias_act(out, None, 1, self._act)


class LayerNorm(_Op):
    """``fluid.layers.layer_norm`` over the trailing ``normalized_shape`` dims (scale init 1,
    shift init 0).

    Args:
        normalized_shape (int | list of int): the trailing dims normalized.
        scale (bool, default True): learn a scale.
        shift (bool, default True): learn a bias.
        epsilon (float, default 1e-5): added to the variance.
        param_attr (ParamAttr | str | None): the scale's attribute.
        bias_attr (ParamAttr | str | None): the bias's attribute.
        act (str | None): activation applied to the result.
        dtype (str, default "float32"): the parameters' dtype.
    Returns:
        LayerNorm: the layer; ``layer(input)`` returns the normalized input, same shape and dtype.
    Raises:
        ValueError: ``normalized_shape`` holds a non-integer; when called, the input's trailing
            dims differ from ``normalized_shape``.
        TypeError: ``param_attr`` / ``bias_attr`` has the wrong type.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> with fluid.dygraph.guard():
        ...     ln = fluid.dygraph.LayerNorm(normalized_shape=[4])
        ...     y = ln(fluid.dygraph.to_variable(np.array([[1, 2, 3, 4]], "float32"))).numpy()
        ...     print(y.round(3))
        [[-1.342 -0.447  0.447  1.342]]
    """

    def __init__(self, normalized_shape: Any, scale: bool = True, shift: bool = True,
                 epsilon: float = 1e-05, param_attr: Any = None, bias_attr: Any = None,
                 act: Any = None, dtype: Any = "float32") -> None:
        super().__init__("layer_norm", dtype)
        shape = [normalized_shape] if isinstance(normalized_shape, int) else \
            list(normalized_shape)
        self._shape, self._epsilon, self._act = shape, float(epsilon), act
        size = 1
        for d in shape:
            size *= int(d)
        self.weight = self.create_parameter([size], param_attr, dtype,
                                            default_initializer=Constant(1.0)) if scale else None
        self.bias = self.create_parameter([size], bias_attr, dtype,
                                          is_bias=True) if shift else None

    def forward(self, input: VarBase) -> VarBase:
        begin = len(input.shape) - len(self._shape)
        if list(input.shape[begin:]) != [int(d) for d in self._shape]:
            raise ValueError(f"LayerNorm: the input's trailing dims {input.shape[begin:]} must "
                             f"equal normalized_shape {self._shape}")
        inputs = {"X": input}
        if self.weight is not None:
            inputs["Scale"] = self.weight
        if self.bias is not None:
            inputs["Bias"] = self.bias
        out = self._run("layer_norm", inputs, {"epsilon": self._epsilon,
                                               "begin_norm_axis": begin},
                        out_slot="Y", extra_outputs=("Mean", "Variance"))
        return self._bias_act(out, None, 1, self._act)


class Embedding(_Op):
    """``W: [vocab_size, emb_dim]`` (``embedding_N.w_0``, Xavier); ``forward(ids)`` gives
    ``ids.shape + [emb_dim]`` (op ``lookup_table_v2``, as fluid 1.8's dygraph Embedding, also
    for ids ending in a 1-dim). ``padding_idx`` rows are zero and get no gradient.

    Args:
        size (list of 2 ints): ``[vocab_size, emb_dim]``.
        is_sparse (bool, default False): fluid's sparse-gradient switch.
        is_distributed (bool, default False): accepted for fluid's signature.
        padding_idx (int | None): this id looks up zeros and gets no gradient.
        param_attr (ParamAttr | str | None): the table's attribute.
        dtype (str, default "float32"): the table's dtype.
    Returns:
        Embedding: the layer; ``layer(ids)`` returns ``ids.shape + [emb_dim]``, dtype
        ``dtype``.
    Raises:
        ValueError: ``size`` is not two positive ints or ``padding_idx`` is outside
            ``[-vocab_size, vocab_size)``; when called, the ids are not int64/int32 or an id is
            outside ``[0, vocab_size)``.
        TypeError: ``param_attr`` has the wrong type or ``padding_idx`` is not an int.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> with fluid.dygraph.guard():
        ...     emb = fluid.dygraph.Embedding(size=[10, 4])
        ...     y = emb(fluid.dygraph.to_variable(np.array([[1], [5]], "int64")))
        ...     print(y.shape)
        [2, 1, 4]
    """

    def __init__(self, size: Sequence[int], is_sparse: bool = False,
                 is_distributed: bool = False, padding_idx: Optional[int] = None,
                 param_attr: Any = None, dtype: Any = "float32") -> None:
        super().__init__("embedding", dtype)
        size = [int(s) for s in size]
        if len(size) != 2 or min(size) <= 0:
            raise ValueError(f"Embedding: size must be [vocab_size, emb_dim], got {size}")
        if padding_idx is None:
            padding_idx = -1
        elif not -size[0] <= check_int(padding_idx, "padding_idx", "Embedding") < size[0]:
            raise ValueError(f"Embedding: padding_idx must be in [{-size[0]}, {size[0]}), got "
                             f"{padding_idx}")
        elif padding_idx < 0:
            padding_idx += size[0]
        self._size, self._padding_idx = size, int(padding_idx)
        self._is_sparse, self._is_distributed = bool(is_sparse), bool(is_distributed)
        self.weight = self.create_parameter(size, param_attr, dtype)

    def forward(self, input: VarBase) -> VarBase:
        # fluid 1.8's dygraph Embedding is always lookup_table_v2: a trailing 1 of the ids is
        # kept ([N, 1] ids give [N, 1, emb_dim]; the zoo's similarity_net GRU indexes it)
        return self._run("lookup_table_v2", {"Ids": input, "W": self.weight},
                         {"is_sparse": self._is_sparse, "is_distributed": self._is_distributed,
                          "remote_prefetch": False, "padding_idx": self._padding_idx})


class Dropout(Layer):
    """``fluid.layers.dropout`` with ``is_test = not self.training``.

    Args:
        p (float, default 0.5): the drop probability.
        seed (int | None): a fixed mask seed.
        dropout_implementation (str, default "downgrade_in_infer"): as ``layers.dropout``.
        is_test (bool, default False): inference mode (``eval()`` sets it too).
    Returns:
        Dropout: the layer; ``layer(input)`` returns ``fluid.layers.dropout(input, p, ...)``, same
        shape and dtype.
    Raises:
        ValueError: ``p`` is a non-numeric string; when called, ``p`` is outside [0, 1] or
            ``dropout_implementation`` is unknown (the constructor only stores them).
        TypeError: ``p`` is neither a number nor a string (e.g. None); when called, the input
            is not a float tensor.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> with fluid.dygraph.guard():
        ...     drop = fluid.dygraph.Dropout(p=0.5)
        ...     _ = drop.eval()                          # inference: scale by 1 - p
        ...     print(drop(fluid.dygraph.to_variable(np.ones((1, 4), "float32"))).numpy())
        [[0.5 0.5 0.5 0.5]]
    """

    def __init__(self, p: float = 0.5, seed: Optional[int] = None,
                 dropout_implementation: str = "downgrade_in_infer",
                 is_test: bool = False) -> None:
        super().__init__("dropout")
        self._p, self._seed, self._impl = float(p), seed, dropout_implementation
        self._is_test = bool(is_test)

    def forward(self, input: VarBase) -> VarBase:
        # fluid 1.8's dygraph.Dropout follows this layer's own `training`, not the tracer's
        # mode that layers.dropout reads (a new layer drops after another layer's eval())
        tracer = _mode.tracer
        mode = tracer.train_mode if tracer is not None else None
        if tracer is not None:
            tracer.train_mode = True
        try:
            return _layers.dropout(input, self._p, is_test=self._is_test or not self.training,
                                   seed=self._seed, dropout_implementation=self._impl)
        finally:
            if tracer is not None:
                tracer.train_mode = mode


class PRelu(_Op):
    """``Out = x if x > 0 else alpha * x`` (op ``prelu``) with a learned ``alpha``
    (``prelu_N.w_0``, init 1.0 as fluid 1.8's dygraph class; the static ``fluid.layers.prelu``
    starts at 0.25). Shapes as fluid 1.8: ``mode='all'`` ``[1]``, ``'channel'``
    ``[1, C, 1, 1]`` with C = ``input_shape[1]`` (fluid 1.8) or ``channel=`` (the later
    keyword), one per channel of dim 1 for any input rank, ``'element'``
    ``[1] + input_shape[1:]`` (one per element of a sample).

    Args:
        mode (str): ``"all"``, ``"channel"`` or ``"element"``.
        input_shape (list of int | None): the input's shape (``"element"`` mode).
        param_attr (ParamAttr | str | None): the slopes' attribute (default 0.25).
        dtype (str, default "float32"): the slopes' dtype.
        channel (int | None): the channel count (``"channel"`` mode).
    Returns:
        PRelu: the layer; ``layer(input)`` returns the input with negative parts scaled by
        ``alpha``, same shape and dtype.
    Raises:
        ValueError: ``mode`` is unknown, or ``"channel"`` / ``"element"`` mode lacks the shape
            it needs.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> with fluid.dygraph.guard():
        ...     prelu = fluid.dygraph.PRelu(mode="all", param_attr=fluid.ParamAttr(
        ...         initializer=fluid.initializer.Constant(0.1)))
        ...     print(prelu(fluid.dygraph.to_variable(np.array([[-2.0, 3.0]], "float32"))).numpy())
        [[-0.2  3. ]]
    """

    def __init__(self, mode: str, input_shape: Optional[Sequence[int]] = None,
                 param_attr: Any = None, dtype: Any = "float32",
                 channel: Optional[int] = None) -> None:
        super().__init__("prelu", dtype)
        if mode == "all":
            shape: List[int] = [1]
        elif mode == "channel":
            if channel is None and (input_shape is None or len(input_shape) < 2):
                raise ValueError("PRelu: mode 'channel' needs input_shape= (its dim 1 is the "
                                 "channel count) or channel=")
            c = int(channel) if channel is not None else int(input_shape[1])
            # fluid 1.8 keeps the trailing 1s for models saved by older versions
            shape = [1, c, 1, 1]
        elif mode == "element":
            if input_shape is None:
                raise ValueError("PRelu: mode 'element' needs input_shape=")
            shape = [1] + [int(d) for d in list(input_shape)[1:]]
        else:
            raise ValueError(f"PRelu: mode must be 'all', 'channel' or 'element', got {mode!r}")
        self._mode = mode
        self.weight = self.create_parameter(shape, param_attr, dtype,
                                            default_initializer=Constant(1.0))

    def forward(self, input: VarBase) -> VarBase:
        return self._run("prelu", {"X": input, "Alpha": self.weight}, {"mode": self._mode},
                         dtype=input.dtype)


class Flatten(Layer):
    """Reshape to 2-D keeping dims before ``axis`` (``fluid.layers.flatten``)."""

    def __init__(self, axis: int = 1) -> None:
        super().__init__("flatten")
        self._axis = axis

    def forward(self, input: VarBase) -> VarBase:
        return _layers.flatten(input, axis=self._axis)


class GroupNorm(_Op):
    """Group normalization of an NCHW input (op ``group_norm``): the channels are split into
    ``groups``; each (sample, group) is normalized over its channels and spatial positions,
    ``y = (x - mean) / sqrt(var + epsilon) * w_0[c] + b_0[c]`` (scale init 1, bias init 0;
    ``param_attr`` / ``bias_attr`` False: none), then ``act``.

    Args:
        channels (int): input channels.
        groups (int): channel groups.
        epsilon (float, default 1e-5): added to the variance.
        param_attr (ParamAttr | str | None): the scale's attribute.
        bias_attr (ParamAttr | str | None): the bias's attribute.
        act (str | None): activation applied to the result.
        data_layout (str, default "NCHW"): the layout.
        dtype (str, default "float32"): the parameters' dtype.
    Returns:
        GroupNorm: the layer; ``layer(input)`` returns the normalized ``[N, C, ...]`` input, same
        shape and dtype.
    Raises:
        TypeError: ``channels`` / ``groups`` is not an int or ``act`` has the wrong type.
        ValueError: ``channels`` or ``groups`` < 1, ``channels`` not divisible by ``groups``,
            ``data_layout`` is not NCHW, or ``act`` is unknown; when called, the input's channels
            differ from ``channels``.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> with fluid.dygraph.guard():
        ...     gn = fluid.dygraph.GroupNorm(channels=4, groups=2)
        ...     y = gn(fluid.dygraph.to_variable(np.arange(8, dtype="float32").reshape(1, 4, 1, 2)))
        ...     print(y.numpy().ravel().round(3))
        [-1.342 -0.447  0.447  1.342 -1.342 -0.447  0.447  1.342]
    """

    def __init__(self, channels: int, groups: int, epsilon: float = 1e-05,
                 param_attr: Any = None, bias_attr: Any = None, act: Any = None,
                 data_layout: str = "NCHW", dtype: Any = "float32") -> None:
        super().__init__("group_norm", dtype)
        channels = check_int(channels, "channels", "GroupNorm", minimum=1)
        groups = check_int(groups, "groups", "GroupNorm", minimum=1)
        if channels % groups:
            raise ValueError(f"GroupNorm: channels ({channels}) must be divisible by groups "
                             f"({groups})")
        if data_layout != "NCHW":
            raise ValueError(f"GroupNorm: unsupported data_layout {data_layout!r} (NCHW only)")
        check_act(act, "GroupNorm")
        self._groups, self._epsilon, self._act = groups, float(epsilon), act
        self._layout = data_layout
        self.weight = self.create_parameter([channels], param_attr, dtype,
                                            default_initializer=Constant(1.0))
        self.bias = self.create_parameter([channels], bias_attr, dtype, is_bias=True)

    def forward(self, input: VarBase) -> VarBase:
        inputs = {"X": input}
        if self.weight is not None:
            inputs["Scale"] = self.weight
        if self.bias is not None:
            inputs["Bias"] = self.bias
        out = self._run("group_norm", inputs,
                        {"epsilon": self._epsilon, "groups": self._groups,
                         "data_layout": self._layout},
                        out_slot="Y", dtype=input.dtype, extra_outputs=("Mean", "Variance"))
        return self._bias_act(out, None, 1, self._act)


class InstanceNorm(_Op):
    """Instance normalization of ``[N, C, ...]`` (op ``instance_norm``): every (sample,
    channel) normalized over its positions, ``y = (x - mean) / sqrt(var + epsilon) *
    scale[c] + bias[c]``. As fluid 1.8 the parameters are the attributes ``scale``
    (``instance_norm_N.w_0``, init 1) and ``bias`` (``.b_0``, init 0); ``param_attr`` /
    ``bias_attr`` False leaves that one out.

    Args:
        num_channels (int): input channels.
        epsilon (float, default 1e-5): added to the variance.
        param_attr (ParamAttr | str | None): the scale's attribute.
        bias_attr (ParamAttr | str | None): the bias's attribute.
        dtype (str, default "float32"): the parameters' dtype.
    Returns:
        InstanceNorm: the layer; ``layer(input)`` returns the normalized input, same shape and
        dtype.
    Raises:
        TypeError: ``num_channels`` is not an int.
        ValueError: ``num_channels`` < 1; when called, the input's channels differ from it.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> with fluid.dygraph.guard():
        ...     norm = fluid.dygraph.InstanceNorm(num_channels=1)
        ...     y = norm(fluid.dygraph.to_variable(np.array([1, 2, 3, 4], "float32").reshape(1, 1, 2, 2)))
        ...     print(y.numpy().ravel().round(3))
        [-1.342 -0.447  0.447  1.342]
    """

    def __init__(self, num_channels: int, epsilon: float = 1e-05, param_attr: Any = None,
                 bias_attr: Any = None, dtype: Any = "float32") -> None:
        super().__init__("instance_norm", dtype)
        c = check_int(num_channels, "num_channels", "InstanceNorm", minimum=1)
        self._epsilon = float(epsilon)
        self.scale = self.create_parameter([c], param_attr, dtype,
                                           default_initializer=Constant(1.0))
        self.bias = self.create_parameter([c], bias_attr, dtype, is_bias=True,
                                          default_initializer=Constant(0.0))

    @property
    def weight(self) -> Optional[VarBase]:
        """The scale parameter under the name the other normalization layers use (an alias of
        ``scale``, not a second parameter)."""
        return self.scale

    def forward(self, input: VarBase) -> VarBase:
        inputs = {"X": input}
        if self.scale is not None:
            inputs["Scale"] = self.scale
        if self.bias is not None:
            inputs["Bias"] = self.bias
        return self._run("instance_norm", inputs, {"epsilon": self._epsilon}, out_slot="Y",
                         dtype=input.dtype, extra_outputs=("SavedMean", "SavedVariance"))


class BilinearTensorProduct(_Op):
    """``out[:, i] = act(x @ W[i] @ y^T + b[i])`` (op ``bilinear_tensor_product``),
    ``W: [output_dim, input1_dim, input2_dim]`` (Xavier), ``b: [1, output_dim]`` (zeros;
    ``bias_attr=False``: none).

    Args:
        input1_dim (int): the width ``M`` of ``x``.
        input2_dim (int): the width ``N`` of ``y``.
        output_dim (int): the number of outputs ``K``.
        name (str | None): accepted for fluid's signature.
        act (str | None): activation applied to the result.
        param_attr (ParamAttr | str | None): the weight's attribute.
        bias_attr (ParamAttr | str | bool | None): the bias's attribute; ``False``: none.
        dtype (str, default "float32"): the parameters' dtype.
    Returns:
        BilinearTensorProduct: the layer; ``layer(x [B, M], y [B, N])`` returns ``[B, K]``.
    Raises:
        TypeError: a dim is not an int or ``act`` has the wrong type.
        ValueError: a dim < 1 or ``act`` is unknown; when called, the inputs' widths differ from
            ``input1_dim`` / ``input2_dim``.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> with fluid.dygraph.guard():
        ...     btp = fluid.dygraph.BilinearTensorProduct(input1_dim=3, input2_dim=2, output_dim=4)
        ...     x = fluid.dygraph.to_variable(np.ones((5, 3), "float32"))
        ...     y = fluid.dygraph.to_variable(np.ones((5, 2), "float32"))
        ...     print(btp(x, y).shape)
        [5, 4]
    """

    def __init__(self, input1_dim: int, input2_dim: int, output_dim: int,
                 name: Optional[str] = None, act: Any = None, param_attr: Any = None,
                 bias_attr: Any = None, dtype: Any = "float32") -> None:
        super().__init__("bilinear_tensor_product", dtype)
        self._dims = (check_int(input1_dim, "input1_dim", "BilinearTensorProduct", minimum=1),
                      check_int(input2_dim, "input2_dim", "BilinearTensorProduct", minimum=1),
                      check_int(output_dim, "output_dim", "BilinearTensorProduct", minimum=1))
        check_act(act, "BilinearTensorProduct")
        self._act = act
        m, n, k = self._dims
        self.weight = self.create_parameter([k, m, n], param_attr, dtype)
        self.bias = self.create_parameter([1, k], bias_attr, dtype, is_bias=True)

    def forward(self, x: VarBase, y: VarBase) -> VarBase:
        inputs = {"X": x, "Y": y, "Weight": self.weight}
        if self.bias is not None:
            inputs["Bias"] = self.bias
        out = self._run("bilinear_tensor_product", inputs, dtype=x.dtype)
        return self._bias_act(out, None, -1, self._act)


class GRUUnit(_Op):
    """One GRU step (op ``gru_unit``) as fluid 1.8's ``GRUUnit(size=3*D)``: ``forward(input
    [B, 3D], hidden [B, D])`` returns ``(updated_hidden, reset_hidden_pre, gate)``. With
    ``g = input + b``, ``W_ur`` the first ``2*D*D`` elements of ``W`` viewed as ``[D, 2D]``
    and ``W_c`` the last ``D*D`` as ``[D, D]`` (the memory layout of the static
    ``fluid.layers.gru_unit``): ``u, r = gate_act(g[:, :2D] + hidden @ W_ur)``,
    ``c = act(g[:, 2D:] + (r * hidden) @ W_c)``, ``h = (1 - u) * hidden + u * c``
    (``origin_mode``: ``u * hidden + (1 - u) * c``); ``gate = [u, r, c]``,
    ``reset_hidden_pre = r * hidden``. ``W: [D, 3D]``, ``b: [1, 3D]`` (``bias_attr=False``:
    none). ``activation`` / ``gate_activation``: 'identity', 'sigmoid', 'tanh' or 'relu'.

    Args:
        size (int): ``3 * D``, three times the hidden size.
        param_attr (ParamAttr | str | None): the weight's attribute.
        bias_attr (ParamAttr | str | bool | None): the bias's attribute; ``False``: none.
        activation (str, default "tanh"): the candidate's activation.
        gate_activation (str, default "sigmoid"): the gates' activation.
        origin_mode (bool, default False): ``h = u * hidden + (1 - u) * c``.
        dtype (str, default "float32"): the parameters' dtype.
    Returns:
        GRUUnit: the layer; ``layer(input [B, 3D], hidden [B, D])`` returns
        ``(updated_hidden [B, D], reset_hidden_pre [B, D], gate [B, 3D])``.
    Raises:
        TypeError: ``size`` is not an int.
        ValueError: ``size`` < 3 or not divisible by 3, or an activation is not one of
            'identity', 'sigmoid', 'tanh', 'relu'; when called, the input shapes do not match.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> with fluid.dygraph.guard():
        ...     gru = fluid.dygraph.GRUUnit(size=3 * 4)             # hidden size 4
        ...     x = fluid.dygraph.to_variable(np.ones((2, 12), "float32"))
        ...     h = fluid.dygraph.to_variable(np.zeros((2, 4), "float32"))
        ...     hidden, reset_hidden_pre, gate = gru(x, h)
        ...     print(hidden.shape)
        [2, 4]
    """

    def __init__(self, size: int, param_attr: Any = None, bias_attr: Any = None,
                 activation: str = "tanh", gate_activation: str = "sigmoid",
                 origin_mode: bool = False, dtype: Any = "float32") -> None:
        super().__init__("gru_unit", dtype)
        size = check_int(size, "size", "GRUUnit", minimum=3)
        if size % 3:
            raise ValueError(f"GRUUnit: size must be 3 * hidden size, got {size}")
        for arg, value in (("activation", activation), ("gate_activation", gate_activation)):
            if value not in _GRU_ACT_CODES:
                raise ValueError(f"GRUUnit: {arg} must be one of {list(_GRU_ACT_CODES)}, but "
                                 f"received {value!r}")
        d = size // 3
        # the op's attributes are fluid's int codes, kept public as fluid 1.8's layer does
        self.activation = _GRU_ACT_CODES[activation]
        self.gate_activation = _GRU_ACT_CODES[gate_activation]
        self._origin_mode = bool(origin_mode)
        self.weight = self.create_parameter([d, 3 * d], param_attr, dtype)
        self.bias = self.create_parameter([1, 3 * d], bias_attr, dtype, is_bias=True)

    def forward(self, input: VarBase, hidden: VarBase) -> Any:
        helper = self._helper
        inputs = {"Input": input, "HiddenPrev": hidden, "Weight": self.weight}
        if self.bias is not None:
            inputs["Bias"] = self.bias
        outs = {slot: helper.create_variable_for_type_inference(input.dtype)
                for slot in ("Gate", "ResetHiddenPrev", "Hidden")}
        helper.append_op(type="gru_unit", inputs=inputs, outputs=outs,
                         attrs={"activation": self.activation,
                                "gate_activation": self.gate_activation,
                                "origin_mode": self._origin_mode})
        return outs["Hidden"], outs["ResetHiddenPrev"], outs["Gate"]


class SpectralNorm(_Op):
    """``weight / sigma`` (op ``spectral_norm``), sigma the largest singular value of
    ``weight`` viewed as a ``[shape[dim], rest]`` matrix, estimated by ``power_iters`` power
    iterations (``v = W^T u / (||W^T u|| + eps)``, ``u = W v / (||W v|| + eps)``,
    ``sigma = u^T W v``) that start every call from the vectors ``weight_u`` ``[h]`` and
    ``weight_v`` ``[w]`` (Normal(0, 1) init, not trainable, no gradient). As fluid's kernel
    and the static ``fluid.layers.spectral_norm``, the op reads U and V and does not write
    them back, so repeated calls give the same result; the gradient treats u and v as
    constants.

    Args:
        weight_shape (list of int): the shape of the weight to normalize.
        dim (int, default 0): the dim viewed as the matrix rows, in ``[0, len(weight_shape))``.
        power_iters (int, default 1): power iterations per call (>= 0).
        eps (float, default 1e-12): added to the norms.
        name (str | None): the layer's name prefix.
        dtype (str, default "float32"): the dtype of ``weight_u`` / ``weight_v``.
    Returns:
        SpectralNorm: the layer; ``layer(weight)`` returns ``weight / sigma``, same shape.
    Raises:
        ValueError: ``dim`` is out of range, ``power_iters`` < 0, or ``weight_shape`` holds a
            non-integer.
        TypeError: ``power_iters`` is not an int.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> with fluid.dygraph.guard():
        ...     sn = fluid.dygraph.SpectralNorm(weight_shape=[3, 4], power_iters=20)
        ...     w = sn(fluid.dygraph.to_variable(np.diag([3.0, 1.0, 0.5]).astype("float32") @ np.eye(3, 4, dtype="float32")))
        ...     # largest singular value
        ...     print(round(float(np.linalg.svd(w.numpy(), compute_uv=False)[0]), 3))
        1.0
    """

    def __init__(self, weight_shape: Sequence[int], dim: int = 0, power_iters: int = 1,
                 eps: float = 1e-12, name: Optional[str] = None,
                 dtype: Any = "float32") -> None:
        super().__init__(name or "spectral_norm", dtype)
        shape = [int(d) for d in weight_shape]
        if not 0 <= dim < len(shape):
            raise ValueError(f"SpectralNorm: dim must be in [0, {len(shape) - 1}], got {dim}")
        self._shape, self._dim = shape, int(dim)
        self._iters = check_int(power_iters, "power_iters", "SpectralNorm", minimum=0)
        self._eps = float(eps)
        h = shape[dim]
        w = 1
        for i, d in enumerate(shape):
            if i != dim:
                w *= d
        self.weight_u = self.create_parameter(
            [h], ParamAttr(initializer=Normal(0.0, 1.0), trainable=False), dtype)
        self.weight_v = self.create_parameter(
            [w], ParamAttr(initializer=Normal(0.0, 1.0), trainable=False), dtype)
        self.weight_u.stop_gradient = self.weight_v.stop_gradient = True

    def forward(self, weight: VarBase) -> VarBase:
        return self._run("spectral_norm",
                         {"Weight": weight, "U": self.weight_u, "V": self.weight_v},
                         {"dim": self._dim, "power_iters": self._iters, "eps": self._eps},
                         dtype=weight.dtype)


# -- issue 12: the remaining classes of fluid 1.8's fluid.dygraph ---------------------------

_NCE_SAMPLERS = {"uniform": 0, "log_uniform": 1, "custom_dist": 2}


class NCE(_Op):
    """Noise-contrastive estimation loss (op ``nce``, see ``fluidlite/ops/nce.py``) as fluid
    1.8's ``NCE``: ``forward(input [N, dim], label [N, num_true] int64, sample_weight=None)``
    returns the cost ``[N, 1]``. ``weight: [num_total_classes, dim]`` (``nce_N.w_0``);
    ``bias: [num_total_classes, 1]`` only when ``bias_attr`` is given (as fluid 1.8's dygraph
    class; else ``bias`` is None). ``sampler``: 'uniform', 'log_uniform' or 'custom_dist'
    (``custom_dist``: one probability per class).

    Args:
        num_total_classes (int): the number of classes (>= 2).
        dim (int): the input's width (>= 1).
        sample_weight (tensor | None): default per-sample weights ``[N, 1]``.
        param_attr (ParamAttr | str | None): the weight's attribute.
        bias_attr (ParamAttr | str | None): the bias's attribute; a bias exists only when given.
        num_neg_samples (int | None): negative samples per example (default 10).
        sampler (str, default "uniform"): ``"uniform"``, ``"log_uniform"`` or ``"custom_dist"``.
        custom_dist (list of float | None): one probability per class (``custom_dist`` sampler).
        seed (int, default 0): the sampler's seed (>= 0).
        is_sparse (bool, default False): fluid's sparse-gradient switch.
        dtype (str, default "float32"): the parameters' dtype.
    Returns:
        NCE: the layer; ``layer(input [N, dim], label [N, num_true], sample_weight=None)``
        returns the cost ``[N, 1]``.
    Raises:
        TypeError: a count is not an int; when called, ``input`` / ``label`` is not a dygraph
            tensor.
        ValueError: a count is out of range, ``sampler`` is unknown, ``custom_dist`` is given
            without the ``custom_dist`` sampler (or missing with it) or is not one non-negative
            probability per class; when called, the input's width differs from ``dim``.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> with fluid.dygraph.guard():
        ...     nce = fluid.dygraph.NCE(num_total_classes=10, dim=4, num_neg_samples=3, seed=1)
        ...     x = fluid.dygraph.to_variable(np.ones((2, 4), "float32"))
        ...     label = fluid.dygraph.to_variable(np.array([[1], [7]], "int64"))
        ...     print(nce(x, label).shape)
        [2, 1]
    """

    def __init__(self, num_total_classes: int, dim: int, sample_weight: Any = None,
                 param_attr: Any = None, bias_attr: Any = None,
                 num_neg_samples: Optional[int] = None, sampler: str = "uniform",
                 custom_dist: Optional[Sequence[float]] = None, seed: int = 0,
                 is_sparse: bool = False, dtype: Any = "float32") -> None:
        import numpy as np
        super().__init__("nce", dtype)
        self._num_total_classes = check_int(num_total_classes, "num_total_classes", "NCE",
                                            minimum=2)
        dim = check_int(dim, "dim", "NCE", minimum=1)
        self._num_neg_samples = 10 if num_neg_samples is None else check_int(
            num_neg_samples, "num_neg_samples", "NCE", minimum=1)
        self._seed = check_int(seed, "seed", "NCE", minimum=0)
        if sampler not in _NCE_SAMPLERS:
            raise ValueError(f"NCE: sampler must be one of {sorted(_NCE_SAMPLERS)}, but "
                             f"received {sampler!r}")
        if (sampler == "custom_dist") != (custom_dist is not None):
            raise ValueError("NCE: custom_dist must be given exactly when "
                             "sampler='custom_dist'")
        self._sampler = _NCE_SAMPLERS[sampler]
        self._is_sparse = bool(is_sparse)
        self._probs = None
        if custom_dist is not None:
            probs = np.asarray(custom_dist, np.float32).reshape(-1)
            if probs.size != self._num_total_classes or (probs < 0).any() or \
                    not probs.sum() > 0:
                raise ValueError(f"NCE: custom_dist must hold {self._num_total_classes} "
                                 f"non-negative probabilities (one per class), but received "
                                 f"{probs.size} values")
            self._probs = VarBase(probs, stop_gradient=True)
        self._sample_weight = sample_weight
        self.weight = self.create_parameter([self._num_total_classes, dim], param_attr, dtype)
        self.bias = (self.create_parameter([self._num_total_classes, 1], bias_attr, dtype,
                                           is_bias=True) if bias_attr else None)

    def forward(self, input: VarBase, label: VarBase, sample_weight: Any = None) -> VarBase:
        for arg, v in (("input", input), ("label", label)):
            if not isinstance(v, VarBase):
                raise TypeError(f"NCE: {arg} must be a dygraph tensor, but received "
                                f"{type(v).__name__}")
        if input.shape[-1] != self.weight.shape[1]:
            raise ValueError(f"NCE: input's last dim ({input.shape[-1]}) must equal dim "
                             f"({self.weight.shape[1]})")
        inputs = {"Input": input, "Label": label, "Weight": self.weight}
        if self.bias is not None:
            inputs["Bias"] = self.bias
        sw = sample_weight if sample_weight is not None else self._sample_weight
        if sw is not None:
            inputs["SampleWeight"] = sw
        if self._probs is not None:
            inputs["CustomDistProbs"] = self._probs
        return self._run("nce", inputs, {
            "num_total_classes": self._num_total_classes,
            "num_neg_samples": self._num_neg_samples, "sampler": self._sampler,
            "seed": self._seed, "is_sparse": self._is_sparse},
            out_slot="Cost", extra_outputs=("SampleLogits", "SampleLabels"))


class TreeConv(_Op):
    """Tree-based convolution (op ``tree_conv``, see ``fluidlite/ops/tree_conv.py``) as fluid
    1.8's ``TreeConv``: ``forward(nodes_vector [B, N, feature_size], edge_set [B, E, 2] int)``
    returns ``act(out)`` of shape ``[B, N, output_size, num_filters]``. ``weight:
    [feature_size, 3, output_size, num_filters]`` (``tree_conv_N.w_0``); ``bias:
    [num_filters]`` only when ``bias_attr`` is given (as fluid 1.8; else None), added along
    the last axis (fluid 1.8 used axis 1, which only broadcasts when N == num_filters).

    Args:
        feature_size (int): the node features' width.
        output_size (int): the output's width per filter.
        num_filters (int, default 1): the number of filters.
        max_depth (int, default 2): the depth of the convolution window (>= 1).
        act (str | None, default "tanh"): activation applied to the result.
        param_attr (ParamAttr | str | None): the filter's attribute.
        bias_attr (ParamAttr | str | None): the bias's attribute; a bias exists only when given.
        name (str | None): accepted for fluid's signature.
        dtype (str, default "float32"): the parameters' dtype.
    Returns:
        TreeConv: the layer; ``layer(nodes_vector [B, N, feature_size], edge_set [B, E, 2])``
        returns ``[B, N, output_size, num_filters]``.
    Raises:
        TypeError: a count is not an int or ``act`` has the wrong type.
        ValueError: a count < 1 or ``act`` is unknown; when called, the node features' width
            differs from ``feature_size``.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> with fluid.dygraph.guard():
        ...     conv = fluid.dygraph.TreeConv(feature_size=4, output_size=6, num_filters=1, max_depth=2)
        ...     nodes = fluid.dygraph.to_variable(np.ones((1, 3, 4), "float32"))
        ...     edges = fluid.dygraph.to_variable(np.array([[[1, 2], [1, 3]]], "int32"))
        ...     print(conv(nodes, edges).shape)
        [1, 3, 6, 1]
    """

    def __init__(self, feature_size: int, output_size: int, num_filters: int = 1,
                 max_depth: int = 2, act: Any = "tanh", param_attr: Any = None,
                 bias_attr: Any = None, name: Optional[str] = None,
                 dtype: Any = "float32") -> None:
        super().__init__("tree_conv", dtype)
        feature_size = check_int(feature_size, "feature_size", "TreeConv", minimum=1)
        output_size = check_int(output_size, "output_size", "TreeConv", minimum=1)
        num_filters = check_int(num_filters, "num_filters", "TreeConv", minimum=1)
        self._max_depth = check_int(max_depth, "max_depth", "TreeConv", minimum=1)
        check_act(act, "TreeConv")
        self._act = act
        self.bias = (self.create_parameter([num_filters], bias_attr, dtype, is_bias=True)
                     if bias_attr else None)
        self.weight = self.create_parameter([feature_size, 3, output_size, num_filters],
                                            param_attr, dtype)

    def forward(self, nodes_vector: VarBase, edge_set: VarBase) -> VarBase:
        out = self._run("tree_conv", {"NodesVector": nodes_vector, "EdgeSet": edge_set,
                                      "Filter": self.weight}, {"max_depth": self._max_depth})
        return self._bias_act(out, self.bias, -1, self._act)


_REDUCTIONS = ("none", "mean", "sum")


def _check_reduction(reduction: str, api: str) -> str:
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{api}: reduction must be 'none', 'mean' or 'sum', but received "
                         f"{reduction!r}")
    return reduction


def _reduce(x: Any, reduction: str) -> Any:
    if reduction == "mean":
        return _layers.reduce_mean(x)
    if reduction == "sum":
        return _layers.reduce_sum(x)
    return x


class L1Loss(Layer):
    """``|input - label|``, then mean (default), sum or none (fluid 1.8's ``L1Loss``; works in
    static and dygraph mode, composed of ``elementwise_sub``, ``abs`` and a reduction).

    Args:
        reduction (str, default "mean"): ``"none"``, ``"mean"`` or ``"sum"``.
    Returns:
        L1Loss: the layer; ``layer(input, label)`` returns the loss (``[1]`` for mean/sum, the
        input's shape for none).
    Raises:
        ValueError: ``reduction`` is not ``"none"``, ``"mean"`` or ``"sum"``; when called, the
            shapes cannot be broadcast.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> with fluid.dygraph.guard():
        ...     loss = fluid.dygraph.L1Loss(reduction="sum")
        ...     print(loss(fluid.dygraph.to_variable(np.array([1.0, -3.0], "float32")),
        ...                fluid.dygraph.to_variable(np.zeros(2, "float32"))).numpy())
        [4.]
    """

    def __init__(self, reduction: str = "mean") -> None:
        super().__init__()
        self.reduction = _check_reduction(reduction, "L1Loss")

    def forward(self, input: Any, label: Any) -> Any:
        return _reduce(_layers.abs(_layers.elementwise_sub(input, label)), self.reduction)


class MSELoss(Layer):
    """``(input - label)^2``, then mean (default), sum or none (fluid 1.8's ``MSELoss``).

    Args:
        reduction (str, default "mean"): ``"none"``, ``"mean"`` or ``"sum"``.
    Returns:
        MSELoss: the layer; ``layer(input, label)`` returns the loss (``[1]`` for mean/sum, the
        input's shape for none).
    Raises:
        ValueError: ``reduction`` is not ``"none"``, ``"mean"`` or ``"sum"``; when called, the
            shapes cannot be broadcast.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> with fluid.dygraph.guard():
        ...     loss = fluid.dygraph.MSELoss()
        ...     print(loss(fluid.dygraph.to_variable(np.array([1.0, 3.0], "float32")),
        ...                fluid.dygraph.to_variable(np.zeros(2, "float32"))).numpy())
        [5.]
    """

    def __init__(self, reduction: str = "mean") -> None:
        super().__init__()
        self.reduction = _check_reduction(reduction, "MSELoss")

    def forward(self, input: Any, label: Any) -> Any:
        return _reduce(_layers.square(_layers.elementwise_sub(input, label)), self.reduction)


class BCELoss(Layer):
    """Binary cross-entropy of probabilities: ``-weight * (label * log(input) + (1 - label) *
    log(1 - input))`` with each log clamped at -100 (as fluid's ``bce_loss``), then mean
    (default), sum or none (fluid 1.8's ``BCELoss``).

    Args:
        weight (tensor | None): per-element weights.
        reduction (str, default "mean"): ``"none"``, ``"mean"`` or ``"sum"``.
    Returns:
        BCELoss: the layer; ``layer(input, label)`` returns the loss (``[1]`` for mean/sum, the
        input's shape for none).
    Raises:
        ValueError: ``reduction`` is not ``"none"``, ``"mean"`` or ``"sum"``; when called, the
            shapes cannot be broadcast.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> with fluid.dygraph.guard():
        ...     loss = fluid.dygraph.BCELoss()
        ...     p = fluid.dygraph.to_variable(np.array([0.9, 0.2], "float32"))
        ...     y = fluid.dygraph.to_variable(np.array([1.0, 0.0], "float32"))
        ...     print(loss(p, y).numpy().round(4))
        [0.1643]
    """

    def __init__(self, weight: Any = None, reduction: str = "mean") -> None:
        super().__init__()
        self.weight = weight
        self.reduction = _check_reduction(reduction, "BCELoss")

    def forward(self, input: Any, label: Any) -> Any:
        def clamped_log(x: Any) -> Any:
            return _layers.clip(_layers.log(x), -100.0, 3.0e38)
        one_minus = _layers.scale(input, scale=-1.0, bias=1.0)
        pos = _layers.elementwise_mul(label, clamped_log(input))
        neg = _layers.elementwise_mul(_layers.scale(label, scale=-1.0, bias=1.0),
                                      clamped_log(one_minus))
        out = _layers.scale(_layers.elementwise_add(pos, neg), scale=-1.0)
        if self.weight is not None:
            out = _layers.elementwise_mul(out, self.weight)
        return _reduce(out, self.reduction)


class NLLLoss(Layer):
    """Negative log likelihood of log-probabilities ``input [N, C]`` (or ``[N, C, d1, ...]``)
    at int64 labels ``[N]`` (``[N, d1, ...]``): ``l_n = -w[y_n] * input[n, y_n]`` with
    ``w[c] = weight[c]`` (ones without ``weight``) and 0 for ``ignore_index``; ``mean`` is
    ``sum(l) / sum(w[y_n])``, as fluid 1.8's ``NLLLoss``.

    Args:
        weight (tensor | None): per-class weights.
        reduction (str, default "mean"): ``"none"``, ``"mean"`` or ``"sum"``.
        ignore_index (int, default -100): labels that contribute nothing.
    Returns:
        NLLLoss: the layer; ``layer(input, label)`` returns the loss (``[1]`` for mean/sum,
        ``[N, d1, ...]`` for none).
    Raises:
        ValueError: ``reduction`` is unknown; when called, ``input`` has fewer than 2 dims, the
            label is not an int tensor, or a label (other than ``ignore_index``) is outside
            ``[0, C)``.
        TypeError: ``ignore_index`` is not an int.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> with fluid.dygraph.guard():
        ...     loss = fluid.dygraph.NLLLoss()
        ...     logp = fluid.dygraph.to_variable(np.log(np.array([[0.5, 0.5], [0.1, 0.9]], "float32")))
        ...     label = fluid.dygraph.to_variable(np.array([0, 1], "int64"))
        ...     print(loss(logp, label).numpy().round(4))
        [0.3993]
    """

    def __init__(self, weight: Any = None, reduction: str = "mean",
                 ignore_index: int = -100) -> None:
        super().__init__()
        self.weight = weight
        self.reduction = _check_reduction(reduction, "NLLLoss")
        self.ignore_index = check_int(ignore_index, "ignore_index", "NLLLoss")

    def forward(self, input: Any, label: Any) -> Any:
        shape = list(input.shape)
        if len(shape) < 2:
            raise ValueError(f"NLLLoss: input must be [N, C] or [N, C, d1, ...], but its shape "
                             f"is {shape}")
        c = shape[1]
        x = input
        if len(shape) > 2:              # classes last: [N, d1, ..., C]
            perm = [0] + list(range(2, len(shape))) + [1]
            x = _layers.transpose(x, perm)
        x = _layers.reshape(x, [-1, c])
        lab = _layers.reshape(label, [-1, 1])
        keep = _layers.cast(_layers.logical_not(_layers.equal(
            lab, _layers.fill_constant([1], "int64", self.ignore_index))), x.dtype)
        safe = _layers.elementwise_mul(lab, _layers.cast(keep, "int64"))
        onehot = _layers.cast(_layers.one_hot(safe, c), x.dtype)
        picked = _layers.reduce_sum(_layers.elementwise_mul(x, onehot), dim=1, keep_dim=True)
        if self.weight is not None:
            w = _layers.reduce_sum(_layers.elementwise_mul(
                onehot, _layers.reshape(self.weight, [1, c])), dim=1, keep_dim=True)
            w = _layers.elementwise_mul(w, keep)
        else:
            w = keep
        loss = _layers.scale(_layers.elementwise_mul(picked, w), scale=-1.0)
        if self.reduction == "none":
            return _layers.reshape(loss, [-1] + shape[2:]) if len(shape) > 2 else \
                _layers.reshape(loss, [-1])
        total = _layers.reduce_sum(loss)
        if self.reduction == "sum":
            return total
        return _layers.elementwise_div(total, _layers.reduce_sum(w))
