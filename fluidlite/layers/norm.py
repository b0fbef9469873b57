"""Normalization and regularization layers: ``batch_norm``, ``layer_norm``, ``l2_normalize``,
``dropout`` (fluid 1.8 signatures)."""
from __future__ import annotations

import warnings
from typing import Any, Optional

from ..core import mode as _mode
from ..core import shape as S
from ..core.dtypes import VarType, is_float
from ..core.ir import Variable
from ..initializer import Constant
from ..layer_helper import LayerHelper, check_int, check_number, is_number
from ..param_attr import ParamAttr

__all__ = ["batch_norm", "layer_norm", "l2_normalize", "dropout"]


def _float_input(layer: str, x: Any, arg: str = "input") -> None:
    if not isinstance(x, Variable):
        raise TypeError(f"{layer}: {arg} must be a Variable, got {type(x).__name__}")
    if x.dtype is not None and not is_float(x.dtype):
        raise TypeError(f"{layer}: {arg} '{x.name}' must be float16/32/64, got "
                        f"{x.dtype.name.lower()}")


def _epsilon(value: object, layer: str) -> float:
    eps = check_number(value, "epsilon", layer)
    if not eps >= 0.0:          # fluid's attr checker: epsilon >= 0
        raise ValueError(f"{layer}: epsilon must be >= 0, but received {eps}")
    return eps


def batch_norm(input: Variable, act: Any = None, is_test: bool = False, momentum: Any = 0.9,
               epsilon: float = 1e-05, param_attr: Any = None, bias_attr: Any = None,
               data_layout: str = "NCHW", in_place: bool = False, name: Optional[str] = None,
               moving_mean_name: Optional[str] = None,
               moving_variance_name: Optional[str] = None,
               do_model_average_for_mean_and_var: bool = True,
               use_global_stats: bool = False) -> Variable:
    """Batch normalization over every axis but the channel axis (1 for NCHW, last for NHWC).

    Creates scale ``<name>.w_0`` (init 1), bias ``<name>.b_0`` (init 0) and the moving mean /
    variance ``<name>.w_1`` / ``<name>.w_2`` (init 0 / 1; persistable, not trainable, updated
    in place by the op: ``running = running*momentum + batch*(1-momentum)``). ``is_test`` (or
    ``Program.clone(for_test=True)``) normalizes with the moving statistics. ``in_place`` is
    accepted; the output is always a fresh variable (same values).

    Args:
        input (Variable): ``[N, C, ...]`` (or channels-last with ``data_layout="NHWC"``) floats.
        act (str | None): activation applied to the result.
        is_test (bool, default False): normalize with the moving statistics.
        momentum (float | Variable, default 0.9): the moving averages' decay.
        epsilon (float, default 1e-5): added to the variance.
        param_attr (ParamAttr | str | None): the scale's attribute.
        bias_attr (ParamAttr | str | None): the bias's attribute.
        data_layout (str, default "NCHW"): ``"NCHW"`` or ``"NHWC"``.
        in_place (bool, default False): accepted (the output is a fresh variable).
        name (str | None): name prefix of the parameters and output.
        moving_mean_name (str | None): name of the moving mean (to share it).
        moving_variance_name (str | None): name of the moving variance.
        do_model_average_for_mean_and_var (bool, default True): accepted for fluid's signature.
        use_global_stats (bool, default False): normalize with the moving statistics in
            training too.
    Returns:
        Variable: the normalized input, same shape and dtype.
    Raises:
        TypeError: ``input`` is not a float Variable, ``momentum`` is neither a number nor a
            one-element float Variable, or ``epsilon`` is not a number.
        ValueError: ``bias_attr`` is False, ``momentum`` is outside [0, 1], ``epsilon`` is
            negative, ``data_layout`` is not ``"NCHW"``/``"NHWC"``, or ``input`` has rank < 2 or
            an unknown channel dimension.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 2, 3, 3])
        ...     y = fluid.layers.batch_norm(x)          # training: normalise with the batch stats
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> out, = exe.run(main, feed={"x": np.random.RandomState(0).rand(4, 2, 3, 3).astype("float32")},
        ...                fetch_list=[y])
        >>> np.round(out.mean(axis=(0, 2, 3)), 4) + 0.0, np.round(out.std(axis=(0, 2, 3)), 2)
        (array([0., 0.], dtype=float32), array([1., 1.], dtype=float32))
    """
    if bias_attr is False:
        raise ValueError("batch_norm: bias_attr should not be False")
    _float_input("batch_norm", input)
    momentum_tensor = None
    if isinstance(momentum, Variable):      # fluid 1.8: op input MomentumTensor
        if momentum.dtype not in (VarType.FP32, VarType.FP64) or \
                S.numel(momentum.shape) not in (1, -1):
            raise TypeError(f"batch_norm: a Variable momentum must be a 1-element float "
                            f"tensor, but '{momentum.name}' has shape {list(momentum.shape)} "
                            f"and dtype {momentum.dtype.name.lower()}")
        momentum_tensor, momentum = momentum, 0.9
    momentum = check_number(momentum, "momentum", "batch_norm")
    epsilon = _epsilon(epsilon, "batch_norm")
    if not 0.0 <= momentum <= 1.0:
        raise ValueError(f"batch_norm: momentum must be in [0, 1], but received {momentum}")
    if data_layout == "NCHW":
        ch = 1
    elif data_layout == "NHWC":
        ch = len(input.shape) - 1
    else:
        raise ValueError(f"batch_norm: unsupported data_layout {data_layout!r}; use 'NCHW' or "
                         f"'NHWC'")
    if len(input.shape) < 2:
        raise ValueError(f"batch_norm: input '{input.name}' must have rank >= 2, got shape "
                         f"{list(input.shape)}")
    c = input.shape[ch]
    if c < 0:
        raise ValueError(f"batch_norm: the channel dimension of '{input.name}' must be known, got "
                         f"shape {list(input.shape)}")
    helper = LayerHelper("batch_norm", input=input, param_attr=param_attr,
                         bias_attr=bias_attr, act=act, name=name)
    dtype = VarType.FP32 if input.dtype == VarType.FP16 else input.dtype
    scale = helper.create_parameter(attr=helper.param_attr, shape=[c], dtype=dtype,
                                    default_initializer=Constant(1.0))
    bias = helper.create_parameter(attr=helper.bias_attr, shape=[c], dtype=dtype, is_bias=True)
    mean = helper.create_parameter(
        attr=ParamAttr(name=moving_mean_name, initializer=Constant(0.0), trainable=False,
                       do_model_average=do_model_average_for_mean_and_var),
        shape=[c], dtype=dtype)
    mean.stop_gradient = True
    variance = helper.create_parameter(
        attr=ParamAttr(name=moving_variance_name, initializer=Constant(1.0), trainable=False,
                       do_model_average=do_model_average_for_mean_and_var),
        shape=[c], dtype=dtype)
    variance.stop_gradient = True
    saved_mean = helper.create_variable_for_type_inference(dtype, stop_gradient=True)
    saved_variance = helper.create_variable_for_type_inference(dtype, stop_gradient=True)
    out = helper.create_variable_for_type_inference(input.dtype)
    inputs = {"X": input, "Scale": scale, "Bias": bias, "Mean": mean, "Variance": variance}
    if momentum_tensor is not None:
        inputs["MomentumTensor"] = momentum_tensor
    helper.append_op(type="batch_norm", inputs=inputs,
                     outputs={"Y": out, "MeanOut": mean, "VarianceOut": variance,
                              "SavedMean": saved_mean, "SavedVariance": saved_variance},
                     attrs={"momentum": float(momentum), "epsilon": float(epsilon),
                            "is_test": bool(is_test), "data_layout": data_layout,
                            "use_mkldnn": False, "fuse_with_relu": False,
                            "use_global_stats": bool(use_global_stats)})
    return helper.append_activation(out)


def layer_norm(input: Variable, scale: bool = True, shift: bool = True, begin_norm_axis: int = 1,
               epsilon: float = 1e-05, param_attr: Any = None, bias_attr: Any = None,
               act: Any = None, name: Optional[str] = None) -> Variable:
    """Normalize each sample over the dims from ``begin_norm_axis`` on, then apply the learned
    ``scale`` (init 1) and ``shift`` (init 0), both of shape ``[prod(shape[begin_norm_axis:])]``.

    Args:
        input (Variable): the input.
        scale (bool, default True): learn a scale (initialized to 1).
        shift (bool, default True): learn a bias (initialized to 0).
        begin_norm_axis (int, default 1): normalize over the dims from this one on.
        epsilon (float, default 1e-5): added to the variance.
        param_attr (ParamAttr | str | None): the scale's attribute.
        bias_attr (ParamAttr | str | None): the bias's attribute.
        act (str | None): activation applied to the result.
        name (str | None): name prefix of the output.
    Returns:
        Variable: the normalized input, same shape.
    Raises:
        TypeError: ``input`` is not a float Variable, ``begin_norm_axis`` is not an int, or
            ``epsilon`` is not a number.
        ValueError: ``begin_norm_axis`` is outside [1, rank - 1], a normalized dimension is
            unknown, ``epsilon`` is negative, or ``param_attr`` / ``bias_attr`` is False while
            ``scale`` / ``shift`` is True.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 4], "float32")
        ...     out = fluid.layers.layer_norm(x, begin_norm_axis=1)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> res, = exe.run(main, feed={"x": np.array([[1, 2, 3, 4]], "float32")}, fetch_list=[out])
        >>> res.round(4)
        array([[-1.3416, -0.4472,  0.4472,  1.3416]], dtype=float32)
    """
    _float_input("layer_norm", input)
    begin_norm_axis = check_int(begin_norm_axis, "begin_norm_axis", "layer_norm")
    epsilon = _epsilon(epsilon, "layer_norm")
    rank = len(input.shape)
    if not 0 < begin_norm_axis < rank:
        raise ValueError(f"layer_norm: begin_norm_axis must be in [1, {rank - 1}] for input "
                         f"'{input.name}' of shape {list(input.shape)}, got {begin_norm_axis}")
    size = 1
    for d in input.shape[begin_norm_axis:]:
        if d < 0:
            raise ValueError(f"layer_norm: the normalized dims of '{input.name}' must be known, "
                             f"got shape {list(input.shape)}")
        size *= d
    helper = LayerHelper("layer_norm", input=input, param_attr=param_attr,
                         bias_attr=bias_attr, act=act, name=name)
    inputs = {"X": input}
    if scale:
        if param_attr is False:
            raise ValueError("layer_norm: param_attr should not be False when scale is True")
        inputs["Scale"] = helper.create_parameter(attr=helper.param_attr, shape=[size],
                                                  dtype=input.dtype,
                                                  default_initializer=Constant(1.0))
    elif param_attr:
        warnings.warn("layer_norm: param_attr is only used when scale is True")
    if shift:
        if bias_attr is False:
            raise ValueError("layer_norm: bias_attr should not be False when shift is True")
        inputs["Bias"] = helper.create_parameter(attr=helper.bias_attr, shape=[size],
                                                 dtype=input.dtype, is_bias=True)
    elif bias_attr:
        warnings.warn("layer_norm: bias_attr is only used when shift is True")
    mean = helper.create_variable_for_type_inference(input.dtype, stop_gradient=True)
    var = helper.create_variable_for_type_inference(input.dtype, stop_gradient=True)
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op(type="layer_norm", inputs=inputs,
                     outputs={"Y": out, "Mean": mean, "Variance": var},
                     attrs={"epsilon": float(epsilon), "begin_norm_axis": begin_norm_axis})
    return helper.append_activation(out)


def l2_normalize(x: Variable, axis: int, epsilon: float = 1e-12,
                 name: Optional[str] = None) -> Variable:
    """``x / sqrt(sum(x^2, axis) + epsilon)`` (op ``norm``; a 1-D input uses axis 0).

    Args:
        x (Variable): the input.
        axis (int): the axis normalized.
        epsilon (float, default 1e-12): lower bound of the squared norm.
        name (str | None): name prefix of the output.
    Returns:
        Variable: ``x / sqrt(max(sum(x ** 2, axis), epsilon))``.
    Raises:
        TypeError: ``x`` is not a float Variable, ``axis`` is not an int, or ``epsilon`` is not a
            number.
        ValueError: ``epsilon`` is negative.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 2], "float32")
        ...     out = fluid.layers.l2_normalize(x, axis=1)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> res, = exe.run(main, feed={"x": np.array([[3.0, 4.0]], "float32")}, fetch_list=[out])
        >>> res.round(4)
        array([[0.6, 0.8]], dtype=float32)
    """
    _float_input("l2_normalize", x, "x")
    axis = None if axis is None else check_int(axis, "axis", "l2_normalize")
    epsilon = _epsilon(epsilon, "l2_normalize")
    if len(x.shape) == 1:
        axis = 0
    helper = LayerHelper("l2_normalize", name=name)
    out = helper.create_variable_for_type_inference(x.dtype)
    norm = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op(type="norm", inputs={"X": x}, outputs={"Out": out, "Norm": norm},
                     attrs={"axis": 1 if axis is None else int(axis), "epsilon": float(epsilon)})
    return out


def dropout(x: Variable, dropout_prob: float, is_test: bool = False, seed: Optional[int] = None,
            name: Optional[str] = None,
            dropout_implementation: str = "downgrade_in_infer") -> Variable:
    """Randomly zero elements with probability ``dropout_prob`` (see the ``dropout`` op for the
    two implementations). ``seed`` fixes the mask (the same mask on every run, as in fluid:
    do not use a fixed seed for training); without it masks are drawn from the op's own
    generator, reproducible through ``Program.random_seed``. ``is_test`` (or
    ``clone(for_test=True)``) switches to inference scaling.

    Args:
        x (Variable): the input.
        dropout_prob (float): probability of zeroing an element, in [0, 1].
        is_test (bool, default False): inference mode (no mask).
        seed (int | None): a fixed mask seed (the same mask every run).
        name (str | None): name prefix of the output.
        dropout_implementation (str, default "downgrade_in_infer"): ``"downgrade_in_infer"``
            (train: ``x * mask``; inference: ``x * (1 - p)``) or ``"upscale_in_train"``
            (train: ``x * mask / (1 - p)``; inference: ``x``).
    Returns:
        Variable: same shape and dtype as ``x``.
    Raises:
        TypeError: ``x`` is not a float Variable, or ``seed`` is not an int.
        ValueError: ``dropout_prob`` is not a number in [0, 1], or ``dropout_implementation`` is
            not ``"downgrade_in_infer"``/``"upscale_in_train"``.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 4])
        ...     # inference: x * (1 - p)
        ...     y = fluid.layers.dropout(x, dropout_prob=0.5, is_test=True)
        >>> fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": np.ones((1, 4), "float32")},
        ...                                      fetch_list=[y])[0]
        array([[0.5, 0.5, 0.5, 0.5]], dtype=float32)
    """
    _float_input("dropout", x, "x")
    if not is_number(dropout_prob) or not 0.0 <= dropout_prob <= 1.0:
        raise ValueError(f"dropout: dropout_prob must be a float in [0, 1] (Python or numpy), "
                         f"but received {dropout_prob!r}")
    if seed is not None:
        seed = check_int(seed, "seed", "dropout")
    if dropout_implementation not in ("downgrade_in_infer", "upscale_in_train"):
        raise ValueError(f"dropout: dropout_implementation must be 'downgrade_in_infer' or "
                         f"'upscale_in_train', got {dropout_implementation!r}")
    if _mode.tracer is not None and not _mode.tracer.train_mode:
        # fluid 1.8's dygraph branch takes is_test from the tracer's mode, which
        # Layer.eval() sets: models pass is_test=False and rely on eval() (fluid ignores the
        # argument entirely; here is_test=True still holds in train mode, as dygraph.Dropout
        # of an eval()-ed layer needs)
        is_test = True
    helper = LayerHelper("dropout", name=name)
    out = helper.create_variable_for_type_inference(x.dtype)
    mask = helper.create_variable_for_type_inference(VarType.UINT8, stop_gradient=True)
    helper.append_op(type="dropout", inputs={"X": x}, outputs={"Out": out, "Mask": mask},
                     attrs={"dropout_prob": float(dropout_prob), "is_test": bool(is_test),
                            "fix_seed": seed is not None,
                            "seed": int(seed) if seed is not None else 0,
                            "dropout_implementation": dropout_implementation})
    return out
