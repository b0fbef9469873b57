"""``fluid.nets``: ready-made compositions of layers (fluid 1.8 signatures)."""
from __future__ import annotations

from typing import Any, List, Sequence

from . import layers
from .core.atomic import atomic_layer
from .core.ir import Variable

__all__ = ["simple_img_conv_pool", "img_conv_group", "glu", "scaled_dot_product_attention",
           "sequence_conv_pool"]   # sequence_conv_pool: issue 15 (LoD sequences)


def simple_img_conv_pool(input: Variable, num_filters: int, filter_size: Any, pool_size: Any,
                         pool_stride: Any, pool_padding: Any = 0, pool_type: str = "max",
                         global_pooling: bool = False, conv_stride: Any = 1,
                         conv_padding: Any = 0, conv_dilation: Any = 1, conv_groups: int = 1,
                         param_attr: Any = None, bias_attr: Any = None, act: Any = None,
                         use_cudnn: bool = True) -> Variable:
    """``pool2d(conv2d(input, act=act))``: one conv layer followed by one pooling layer.

    Args:
        input (Variable): ``[N, C, H, W]`` map.
        num_filters (int): conv output channels.
        filter_size (int | tuple): conv kernel size.
        pool_size (int | tuple): pooling window.
        pool_stride (int | tuple): pooling step.
        pool_padding (int | tuple, default 0): pooling padding.
        pool_type (str, default "max"): ``"max"`` or ``"avg"``.
        global_pooling (bool, default False): pool the whole map.
        conv_stride (int | tuple, default 1): conv step.
        conv_padding (int | tuple, default 0): conv padding.
        conv_dilation (int | tuple, default 1): conv dilation.
        conv_groups (int, default 1): conv groups.
        param_attr (ParamAttr | None): the filter's attribute.
        bias_attr (ParamAttr | bool | None): the conv bias's attribute.
        act (str | None): the conv's activation.
        use_cudnn (bool, default True): accepted for fluid's signature.
    Returns:
        Variable: the pooled map.
    Raises:
        TypeError: ``input`` is not a Variable or not float16/32/64.
        ValueError: ``input`` is not 4-D, ``pool_type`` is not ``"max"`` / ``"avg"``, or a size,
            stride or padding is invalid for the map.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     img = fluid.data("img", [-1, 1, 28, 28])
        ...     y = fluid.nets.simple_img_conv_pool(img, num_filters=20, filter_size=5, pool_size=2,
        ...                                         pool_stride=2, act="relu")
        >>> y.shape
        (-1, 20, 12, 12)
    """
    conv_out = layers.conv2d(input=input, num_filters=num_filters, filter_size=filter_size,
                             stride=conv_stride, padding=conv_padding, dilation=conv_dilation,
                             groups=conv_groups, param_attr=param_attr, bias_attr=bias_attr,
                             act=act, use_cudnn=use_cudnn)
    return layers.pool2d(input=conv_out, pool_size=pool_size, pool_type=pool_type,
                         pool_stride=pool_stride, pool_padding=pool_padding,
                         global_pooling=global_pooling, use_cudnn=use_cudnn)


def img_conv_group(input: Variable, conv_num_filter: Sequence[int], pool_size: Any,
                   conv_padding: Any = 1, conv_filter_size: Any = 3, conv_act: Any = None,
                   param_attr: Any = None, conv_with_batchnorm: Any = False,
                   conv_batchnorm_drop_rate: Any = 0.0, pool_stride: Any = 1,
                   pool_type: str = "max", use_cudnn: bool = True) -> Variable:
    """A VGG block: ``len(conv_num_filter)`` conv layers (each optionally followed by
    batch_norm with ``conv_act`` and dropout), then one pooling layer. Per-conv arguments may be
    scalars (shared) or lists of ``len(conv_num_filter)``.

    Args:
        input (Variable): ``[N, C, H, W]`` float map.
        conv_num_filter (list | tuple of int): output channels of each conv layer; its length is
            the number of conv layers.
        pool_size (int | tuple): the pooling window.
        conv_padding (int | list, default 1): conv padding, shared or one per conv.
        conv_filter_size (int | list, default 3): conv kernel size, shared or one per conv.
        conv_act (str | None): the activation after each conv (after its batch_norm when there is
            one).
        param_attr (ParamAttr | list | None): the filters' attributes, shared or one per conv.
        conv_with_batchnorm (bool | list, default False): follow a conv with ``batch_norm``.
        conv_batchnorm_drop_rate (float | list, default 0.0): dropout after a batch_norm (applied
            when its magnitude exceeds 1e-5).
        pool_stride (int | tuple, default 1): the pooling step.
        pool_type (str, default "max"): ``"max"`` or ``"avg"``.
        use_cudnn (bool, default True): accepted for fluid's signature.
    Returns:
        Variable: the pooled map ``[N, conv_num_filter[-1], H', W']``.
    Raises:
        TypeError: ``conv_num_filter`` is not a list or tuple, or ``input`` is not a float
            Variable.
        ValueError: a per-conv list's length differs from ``len(conv_num_filter)``, ``input`` is
            not 4-D, or ``pool_type`` is not ``"max"`` / ``"avg"``.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     img = fluid.data("img", [-1, 3, 32, 32])
        ...     y = fluid.nets.img_conv_group(img, conv_num_filter=[16, 16], pool_size=2,
        ...                                   conv_padding=1, conv_act="relu", pool_stride=2)
        >>> y.shape
        (-1, 16, 16, 16)
    """
    if not isinstance(conv_num_filter, (list, tuple)):
        raise TypeError(f"img_conv_group: conv_num_filter must be a list or tuple, got "
                        f"{conv_num_filter!r}")
    n = len(conv_num_filter)

    def extend(obj: Any, name: str) -> List[Any]:
        if not hasattr(obj, "__len__") or isinstance(obj, str):
            return [obj] * n
        if len(obj) != n:
            raise ValueError(f"img_conv_group: {name} has {len(obj)} entries but "
                             f"conv_num_filter has {n}")
        return list(obj)

    conv_padding = extend(conv_padding, "conv_padding")
    conv_filter_size = extend(conv_filter_size, "conv_filter_size")
    param_attr = extend(param_attr, "param_attr")
    conv_with_batchnorm = extend(conv_with_batchnorm, "conv_with_batchnorm")
    conv_batchnorm_drop_rate = extend(conv_batchnorm_drop_rate, "conv_batchnorm_drop_rate")
    tmp = input
    for i in range(n):
        local_act = None if conv_with_batchnorm[i] else conv_act
        tmp = layers.conv2d(input=tmp, num_filters=conv_num_filter[i],
                            filter_size=conv_filter_size[i], padding=conv_padding[i],
                            param_attr=param_attr[i], act=local_act, use_cudnn=use_cudnn)
        if conv_with_batchnorm[i]:
            tmp = layers.batch_norm(input=tmp, act=conv_act, in_place=True)
            drop_rate = conv_batchnorm_drop_rate[i]
            if abs(drop_rate) > 1e-5:
                tmp = layers.dropout(x=tmp, dropout_prob=drop_rate)
    return layers.pool2d(input=tmp, pool_size=pool_size, pool_type=pool_type,
                         pool_stride=pool_stride, use_cudnn=use_cudnn)


def glu(input: Variable, dim: int = -1) -> Variable:
    """Gated linear unit: split ``input`` in two halves a, b along ``dim``; ``a * sigmoid(b)``.

    Args:
        input (Variable): the input; ``dim`` must have an even size.
        dim (int, default -1): the axis split in two halves ``a`` and ``b``.
    Returns:
        Variable: ``a * sigmoid(b)``.
    Raises:
        TypeError: ``input`` is not a Variable or not float16/32/64.
        ValueError: the size of ``dim`` is odd (the halves would differ).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 6])
        ...     y = fluid.nets.glu(x, dim=1)            # first half * sigmoid(second half)
        >>> fluid.Executor(fluid.CPUPlace()).run(
        ...     main, feed={"x": np.array([[1, 2, 3, 0, 0, 0]], "float32")}, fetch_list=[y])[0]
        array([[0.5, 1. , 1.5]], dtype=float32)
    """
    a, b = layers.split(input, num_or_sections=2, dim=dim)
    return layers.elementwise_mul(a, layers.sigmoid(b))


def scaled_dot_product_attention(queries: Variable, keys: Variable, values: Variable,
                                 num_heads: int = 1, dropout_rate: float = 0.0) -> Variable:
    """Multi-head attention ``softmax(Q K^T / sqrt(d)) V`` over ``[batch, length, dim]``
    inputs (no projections, as in fluid.nets); heads split the last dim.

    Args:
        queries (Variable): ``[N, Lq, D]``.
        keys (Variable): ``[N, Lk, D]``.
        values (Variable): ``[N, Lk, Dv]``.
        num_heads (int, default 1): heads (``D`` and ``Dv`` divisible by it).
        dropout_rate (float, default 0.0): dropout on the attention weights.
    Returns:
        Variable: ``[N, Lq, Dv]``, ``softmax(Q K^T / sqrt(D / num_heads)) V`` per head.
    Raises:
        TypeError: ``queries``, ``keys`` or ``values`` is not a Variable.
        ValueError: an input is not 3-D, the last dims of ``queries`` and ``keys`` differ, the
            lengths of ``keys`` and ``values`` differ, or ``D`` / ``Dv`` is not divisible by
            ``num_heads``.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     q = fluid.data("q", [-1, 5, 8])
        ...     k = fluid.data("k", [-1, 7, 8])
        ...     v = fluid.data("v", [-1, 7, 8])
        ...     ctx = fluid.nets.scaled_dot_product_attention(q, k, v, num_heads=2)
        >>> ctx.shape
        (-1, 5, 8)
    """
    for name, v in (("queries", queries), ("keys", keys), ("values", values)):
        if not isinstance(v, Variable):
            raise TypeError(f"scaled_dot_product_attention: {name} must be a Variable, but "
                            f"received {type(v).__name__}")
        if len(v.shape) != 3:
            raise ValueError(f"scaled_dot_product_attention: {name} must be 3-D [batch, length, "
                             f"dim], got {list(v.shape)}")
    if queries.shape[-1] != keys.shape[-1]:
        raise ValueError(f"scaled_dot_product_attention: the last dims of queries "
                         f"({queries.shape[-1]}) and keys ({keys.shape[-1]}) must be equal")
    if keys.shape[1] != values.shape[1]:
        raise ValueError(f"scaled_dot_product_attention: keys and values must have the same "
                         f"length, got {keys.shape[1]} and {values.shape[1]}")
    for name, v in (("queries", queries), ("values", values)):
        if v.shape[-1] % num_heads:
            raise ValueError(f"scaled_dot_product_attention: the last dim of {name} "
                             f"({v.shape[-1]}) must be divisible by num_heads ({num_heads})")

    def split_heads(x: Variable) -> Variable:
        if num_heads == 1:
            return x
        d = x.shape[-1]
        r = layers.reshape(x, shape=[0, 0, num_heads, d // num_heads])
        return layers.transpose(r, perm=[0, 2, 1, 3])

    def combine_heads(x: Variable) -> Variable:
        if num_heads == 1:
            return x
        t = layers.transpose(x, perm=[0, 2, 1, 3])
        return layers.reshape(t, shape=[0, 0, t.shape[2] * t.shape[3]])

    q, k, v = split_heads(queries), split_heads(keys), split_heads(values)
    key_dim = keys.shape[-1] // num_heads
    product = layers.matmul(q, k, transpose_y=True, alpha=key_dim ** -0.5)
    weights = layers.softmax(product)
    if dropout_rate:
        weights = layers.dropout(weights, dropout_prob=dropout_rate, is_test=False)
    return combine_heads(layers.matmul(weights, v))


def sequence_conv_pool(input: Variable, num_filters: int, filter_size: int,
                       param_attr: Any = None, act: str = "sigmoid",
                       pool_type: str = "max", bias_attr: Any = None) -> Variable:
    """``sequence_pool(sequence_conv(input, act=act), pool_type)`` over LoD input (issue 15).

    Args:
        input (Variable): a LoD tensor ``[T, D]``.
        num_filters (int): conv output size.
        filter_size (int): context window.
        param_attr (ParamAttr | None): the filter's attribute.
        act (str, default "sigmoid"): the conv's activation.
        pool_type (str, default "max"): the sequence pooling.
        bias_attr (ParamAttr | bool | None): the conv bias's attribute.
    Returns:
        Variable: one row per sequence, ``[num_sequences, num_filters]``.
    Raises:
        TypeError: ``input`` is not a Variable.
        ValueError: ``pool_type`` is not one of ``sum``, ``average``, ``sqrt``, ``max``, ``last``,
            ``first``.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     words = fluid.data("words", [-1, 4], lod_level=1)
        ...     feat = fluid.nets.sequence_conv_pool(words, num_filters=8, filter_size=3, act="tanh",
        ...                                          pool_type="max")
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> t = fluid.create_lod_tensor(np.ones((5, 4), "float32"), [[2, 3]], fluid.CPUPlace())
        >>> exe.run(main, feed={"words": t}, fetch_list=[feat])[0].shape
        (2, 8)
    """
    conv_out = layers.sequence_conv(input=input, num_filters=num_filters,
                                    filter_size=filter_size, param_attr=param_attr,
                                    bias_attr=bias_attr, act=act)
    return layers.sequence_pool(input=conv_out, pool_type=pool_type)


# each composition is one transaction: a failure in its third layer also undoes the first two
for _name in __all__:
    globals()[_name] = atomic_layer(globals()[_name])
del _name
