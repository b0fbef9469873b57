"""Vision layers of fluid 1.8 (signatures as fluid's): resizing (``image_resize``,
``resize_bilinear`` / ``resize_nearest`` / ``resize_trilinear``, ``interpolate``,
``image_resize_short``) and the image/feature-map ops built on ``fluidlite/ops/interp.py``,
``ops/vision.py``, ``ops/vision_norm.py``, ``ops/conv3d.py`` and ``ops/roi.py``."""
from __future__ import annotations

import logging
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from ..core.ir import Variable
from ..pipeline.feeder import check_type, check_variable_and_dtype
from ..initializer import Constant, Normal
from ..param_attr import ParamAttr
from ..layer_helper import LayerHelper, check_int, is_int, is_number
from .conv import (_append_conv, _append_pool, _check_pool_args, _check_use_cudnn,
                   _filters_and_groups, _padding_nd, _to_list, _transpose_filters_and_groups,
                   _transpose_sizes)

__all__ = ["image_resize", "interpolate", "resize_bilinear", "resize_nearest",
           "resize_trilinear", "image_resize_short", "conv3d", "conv3d_transpose", "pool3d",
           "adaptive_pool2d", "adaptive_pool3d", "pixel_shuffle", "space_to_depth",
           "shuffle_channel", "temporal_shift", "unfold", "affine_channel", "lrn",
           "affine_grid", "grid_sampler", "fsp_matrix", "cos_sim", "bilinear_tensor_product",
           "add_position_encoding", "similarity_focus", "mean_iou", "group_norm",
           "instance_norm", "spectral_norm", "data_norm", "roi_align", "roi_pool",
           "psroi_pool", "inplace_abn", "deformable_conv", "prroi_pool",
           "deformable_roi_pooling"]

_log = logging.getLogger("fluidlite")

_RESAMPLE = {"BILINEAR": "bilinear", "TRILINEAR": "trilinear", "NEAREST": "nearest"}


def image_resize(input: Variable, out_shape: Any = None, scale: Any = None,
                 name: Optional[str] = None, resample: str = "BILINEAR",
                 actual_shape: Optional[Variable] = None, align_corners: bool = True,
                 align_mode: int = 1, data_format: str = "NCHW") -> Variable:
    """Resize the spatial axes of a 4-D (BILINEAR, NEAREST) or 5-D (TRILINEAR) batch.

    The output size is ``out_shape`` (a list of ints and/or 1-element int Variables, or one
    1-D int Variable), else ``int(in * scale)`` (``scale`` a float or a Variable);
    ``actual_shape`` (deprecated) overrides both at run time. ``align_corners`` /
    ``align_mode`` choose fluid's index rule (see ``fluidlite/ops/interp.py``).

    Args:
        input (Variable): ``[N, C, H, W]`` (or ``[N, C, D, H, W]`` for trilinear) map.
        out_shape (list | tuple | Variable | None): the output's spatial shape.
        scale (float | Variable | None): the factor, when ``out_shape`` is not given.
        name (str | None): name prefix of the output.
        resample (str, default "BILINEAR"): ``"BILINEAR"``, ``"NEAREST"`` or ``"TRILINEAR"``.
        actual_shape (Variable | None): an int tensor overriding ``out_shape`` at run time.
        align_corners (bool, default True): align the corner pixels of input and output.
        align_mode (int, default 1): with ``align_corners=False``: 0 is half-pixel, 1 is
            ``src = dst * scale``.
        data_format (str, default "NCHW"): the layout.
    Returns:
        Variable: the resized map.
    Raises:
        TypeError: ``input`` is not a float16/float32/float64/uint8 Variable, ``align_corners``
            is not a bool, ``out_shape`` is not a list/tuple/Variable (or an entry is not a
            positive int or int Variable), ``scale`` is neither a number nor a Variable, or
            ``actual_shape`` is neither a Variable nor None.
        ValueError: ``resample`` is unknown, the input rank does not suit the method (4-D for
            BILINEAR/NEAREST, 5-D for TRILINEAR), ``align_mode`` is not 0 or 1, both ``out_shape``
            and ``scale`` are None, ``data_format`` is not a layout of that rank, ``out_shape`` has
            the wrong length, or ``scale <= 0``.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 1, 2, 2], "float32")
        ...     out = fluid.layers.image_resize(x, out_shape=[4, 6], resample="BILINEAR")
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> res, = exe.run(main, feed={"x": np.ones((1, 1, 2, 2), "float32")}, fetch_list=[out])
        >>> res.shape
        (1, 1, 4, 6)
    """
    layer = "image_resize"
    if resample not in _RESAMPLE:
        raise ValueError("The 'resample' of image_resize can only be 'BILINEAR', 'TRILINEAR' "
                         f"or 'NEAREST' currently, but received {resample!r}")
    check_variable_and_dtype(input, "input", ["float16", "float32", "float64", "uint8"], layer)
    method = _RESAMPLE[resample]
    rank = len(input.shape)
    if method in ("bilinear", "nearest") and rank != 4:
        raise ValueError(f"{layer}: 'BILINEAR' and 'NEAREST' only support a 4-D input, but "
                         f"'{input.name}' has shape {list(input.shape)}")
    if method == "trilinear" and rank != 5:
        raise ValueError(f"{layer}: 'TRILINEAR' only supports a 5-D input, but "
                         f"'{input.name}' has shape {list(input.shape)}")
    if not isinstance(align_corners, bool):
        raise TypeError(f"{layer}: align_corners must be a bool, but received "
                        f"{align_corners!r}")
    if align_mode not in (0, 1) or isinstance(align_mode, bool):
        raise ValueError(f"{layer}: align_mode can only be 0 or 1, but received "
                         f"{align_mode!r}")
    if out_shape is None and scale is None:
        raise ValueError(f"{layer}: one of out_shape and scale must not be None")
    formats = ("NCHW", "NHWC") if rank == 4 else ("NCDHW", "NDHWC")
    if data_format not in formats:
        raise ValueError(f"{layer}: data_format must be {' or '.join(formats)} for a {rank}-D "
                         f"input, but received {data_format!r}")
    layout = "NHWC" if data_format in ("NHWC", "NDHWC") else "NCHW"
    helper = LayerHelper(f"{method}_interp", input=input, name=name)
    n = rank - 2
    inputs: Dict[str, Any] = {"X": input}
    attrs: Dict[str, Any] = {"out_d": -1, "out_h": -1, "out_w": -1, "interp_method": method,
                             "align_corners": align_corners, "align_mode": align_mode,
                             "data_layout": layout}
    if out_shape is not None:
        if isinstance(out_shape, Variable):
            out_shape.stop_gradient = True
            inputs["OutSize"] = out_shape
        else:
            check_type(out_shape, "out_shape", (list, tuple), layer)
            if len(out_shape) != n:
                raise ValueError(f"{layer}: out_shape length should be {n} for a {rank}-D "
                                 f"input, but received {list(out_shape)}")
            sizes = _sizes(out_shape, helper, layer, inputs)
            keys = ["out_h", "out_w"] if n == 2 else ["out_d", "out_h", "out_w"]
            attrs.update(zip(keys, sizes))
    else:
        if isinstance(scale, Variable):
            scale.stop_gradient = True
            inputs["Scale"] = scale
        elif is_number(scale):
            if not scale > 0:
                raise ValueError(f"{layer}: scale should be greater than zero, but received "
                                 f"{scale}")
            attrs["scale"] = float(scale)
        else:
            raise TypeError(f"{layer}: scale should be a float or a Variable, but received "
                            f"{scale!r}")
    if isinstance(actual_shape, Variable):
        _log.warning("image_resize: actual_shape will be deprecated; use out_shape instead")
        actual_shape.stop_gradient = True
        inputs["OutSize"] = actual_shape
    elif actual_shape is not None:
        raise TypeError(f"{layer}: actual_shape should be a Variable or None, but received "
                        f"{type(actual_shape).__name__}")
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op(type=f"{method}_interp", inputs=inputs, outputs={"Out": out}, attrs=attrs)
    return out


def _sizes(out_shape: Sequence[Any], helper: LayerHelper, layer: str,
           inputs: Dict[str, Any]) -> List[int]:
    """Attr sizes for ``out_shape``; when it holds Variables, also the ``SizeTensor`` list
    (ints become 1-element int32 constants, as fluid does)."""
    from .tensor import fill_constant
    sizes: List[int] = []
    for d in out_shape:
        if isinstance(d, Variable):
            sizes.append(-1)
        elif is_int(d) and d > 0:
            sizes.append(int(d))
        else:
            raise TypeError(f"{layer}: each element of out_shape must be a positive int or a "
                            f"1-element int Variable, but received {d!r}")
    if any(isinstance(d, Variable) for d in out_shape):
        tensors = []
        for d in out_shape:
            if isinstance(d, Variable):
                d.stop_gradient = True
                tensors.append(d)
            else:
                tensors.append(fill_constant([1], "int32", int(d), force_cpu=True))
        inputs["SizeTensor"] = tensors
    return sizes


def interpolate(input: Variable, out_shape: Any = None, scale: Any = None,
                name: Optional[str] = None, resample: str = "BILINEAR",
                actual_shape: Optional[Variable] = None, align_corners: bool = True,
                align_mode: int = 1, data_format: str = "NCHW") -> Variable:
    """fluid 1.8's alias of ``image_resize`` (same arguments, same ops).

    Args:
        input (Variable): ``[N, C, H, W]`` (``[N, C, D, H, W]`` for TRILINEAR) float16/32/64 or
            uint8 map.
        out_shape (list | tuple | Variable | None): the output's spatial shape (ints and/or
            1-element int Variables, or a 1-D int Variable). Default None.
        scale (float | Variable | None): the factor, used when ``out_shape`` is None.
            Default None.
        name (str | None): name prefix of the output. Default None.
        resample (str): ``"BILINEAR"``, ``"NEAREST"`` or ``"TRILINEAR"``. Default ``"BILINEAR"``.
        actual_shape (Variable | None): deprecated int tensor overriding ``out_shape`` at run
            time. Default None.
        align_corners (bool): align the corner pixels of input and output. Default True.
        align_mode (int): with ``align_corners=False``: 0 is half-pixel, 1 is
            ``src = dst * scale``. Default 1.
        data_format (str): ``"NCHW"``/``"NHWC"`` (4-D) or ``"NCDHW"``/``"NDHWC"`` (5-D).
            Default ``"NCHW"``.
    Returns:
        Variable: the resized map, ``input``'s dtype, spatial dims replaced by the output size.
    Raises:
        TypeError: ``input`` is not a float16/float32/float64/uint8 Variable, ``align_corners``
            is not a bool, ``out_shape`` is not a list/tuple/Variable (or an entry is not a
            positive int or int Variable), ``scale`` is neither a number nor a Variable, or
            ``actual_shape`` is neither a Variable nor None.
        ValueError: ``resample`` is unknown, the input rank does not suit the method (4-D for
            BILINEAR/NEAREST, 5-D for TRILINEAR), ``align_mode`` is not 0 or 1, both ``out_shape``
            and ``scale`` are None, ``data_format`` is not a layout of that rank, ``out_shape`` has
            the wrong length, or ``scale <= 0``.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 1, 2, 2])
        ...     out = fluid.layers.interpolate(x, out_shape=[4, 4], resample="NEAREST")
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> exe.run(main, feed={"x": np.array([[[[1, 2], [3, 4]]]], "float32")}, fetch_list=[out])[0][0, 0]
        array([[1., 1., 2., 2.],
               [1., 1., 2., 2.],
               [3., 3., 4., 4.],
               [3., 3., 4., 4.]], dtype=float32)
    """
    return image_resize(input, out_shape, scale, name, resample, actual_shape, align_corners,
                        align_mode, data_format)


def resize_bilinear(input: Variable, out_shape: Any = None, scale: Any = None,
                    name: Optional[str] = None, actual_shape: Optional[Variable] = None,
                    align_corners: bool = True, align_mode: int = 1,
                    data_format: str = "NCHW") -> Variable:
    """``image_resize(..., resample='BILINEAR')`` of a 4-D input.

    Args:
        input (Variable): ``[N, C, H, W]`` (or NHWC) map.
        out_shape (list | tuple | Variable | None): the output's ``[H_out, W_out]``.
        scale (float | Variable | None): the factor, when ``out_shape`` is not given.
        name (str | None): name prefix of the output.
        actual_shape (Variable | None): an int tensor overriding ``out_shape`` at run time.
        align_corners (bool, default True): align the corner pixels of input and output.
        align_mode (int, default 1): with ``align_corners=False``: 0 is half-pixel, 1 is
            ``src = dst * scale``.
        data_format (str, default "NCHW"): ``"NCHW"`` or ``"NHWC"``.
    Returns:
        Variable: the resized map.
    Raises:
        TypeError: ``input`` is not a float16/float32/float64/uint8 Variable, ``align_corners``
            is not a bool, ``out_shape`` is not a list/tuple/Variable (or an entry is not a
            positive int or int Variable), ``scale`` is neither a number nor a Variable, or
            ``actual_shape`` is neither a Variable nor None.
        ValueError: ``input`` is not 4-D, ``align_mode`` is not 0 or 1, both ``out_shape`` and
            ``scale`` are None, ``data_format`` is not NCHW/NHWC, ``out_shape`` does not have 2
            entries, or ``scale <= 0``.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 1, 2, 2], "float32")
        ...     out = fluid.layers.resize_bilinear(x, out_shape=[3, 3], align_corners=True)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.array([[[[0, 1], [2, 3]]]], "float32")}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res[0, 0]
        array([[0. , 0.5, 1. ],
               [1. , 1.5, 2. ],
               [2. , 2.5, 3. ]], dtype=float32)
    """
    return image_resize(input, out_shape, scale, name, "BILINEAR", actual_shape, align_corners,
                        align_mode, data_format)


def resize_trilinear(input: Variable, out_shape: Any = None, scale: Any = None,
                     name: Optional[str] = None, actual_shape: Optional[Variable] = None,
                     align_corners: bool = True, align_mode: int = 1,
                     data_format: str = "NCDHW") -> Variable:
    """``image_resize(..., resample='TRILINEAR')`` of a 5-D input.

    Args:
        input (Variable): ``[N, C, D, H, W]`` (or NDHWC) float16/32/64 or uint8 volume.
        out_shape (list | tuple | Variable | None): the output's ``[D_out, H_out, W_out]`` (ints
            and/or 1-element int Variables, or a 1-D int Variable). Default None.
        scale (float | Variable | None): the factor, used when ``out_shape`` is None.
            Default None.
        name (str | None): name prefix of the output. Default None.
        actual_shape (Variable | None): deprecated int tensor overriding ``out_shape`` at run
            time. Default None.
        align_corners (bool): align the corner voxels of input and output. Default True.
        align_mode (int): with ``align_corners=False``: 0 is half-pixel, 1 is
            ``src = dst * scale``. Default 1.
        data_format (str): ``"NCDHW"`` or ``"NDHWC"``. Default ``"NCDHW"``.
    Returns:
        Variable: ``[N, C, D_out, H_out, W_out]`` (or NDHWC), ``input``'s dtype.
    Raises:
        TypeError: ``input`` is not a float16/float32/float64/uint8 Variable, ``align_corners``
            is not a bool, ``out_shape`` is not a list/tuple/Variable (or an entry is not a
            positive int or int Variable), ``scale`` is neither a number nor a Variable, or
            ``actual_shape`` is neither a Variable nor None.
        ValueError: ``input`` is not 5-D, ``align_mode`` is not 0 or 1, both ``out_shape`` and
            ``scale`` are None, ``data_format`` is not NCDHW/NDHWC, ``out_shape`` does not have 3
            entries, or ``scale <= 0``.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 1, 2, 2, 2])
        ...     out = fluid.layers.resize_trilinear(x, out_shape=[4, 4, 4])
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> exe.run(main, feed={"x": np.ones((1, 1, 2, 2, 2), "float32")}, fetch_list=[out])[0].shape
        (1, 1, 4, 4, 4)
    """
    return image_resize(input, out_shape, scale, name, "TRILINEAR", actual_shape,
                        align_corners, align_mode, data_format)


def resize_nearest(input: Variable, out_shape: Any = None, scale: Any = None,
                   name: Optional[str] = None, actual_shape: Optional[Variable] = None,
                   align_corners: bool = True, data_format: str = "NCHW") -> Variable:
    """``image_resize(..., resample='NEAREST')`` of a 4-D input.

    Args:
        input (Variable): ``[N, C, H, W]`` (or NHWC) map.
        out_shape (list | tuple | Variable | None): the output's ``[H_out, W_out]``.
        scale (float | Variable | None): the factor, when ``out_shape`` is not given.
        name (str | None): name prefix of the output.
        actual_shape (Variable | None): an int tensor overriding ``out_shape`` at run time.
        align_corners (bool, default True): align the corner pixels of input and output.
        data_format (str, default "NCHW"): ``"NCHW"`` or ``"NHWC"``.
    Returns:
        Variable: the resized map.
    Raises:
        TypeError: ``input`` is not a float16/float32/float64/uint8 Variable, ``align_corners``
            is not a bool, ``out_shape`` is not a list/tuple/Variable (or an entry is not a
            positive int or int Variable), ``scale`` is neither a number nor a Variable, or
            ``actual_shape`` is neither a Variable nor None.
        ValueError: ``input`` is not 4-D, both ``out_shape`` and ``scale`` are None,
            ``data_format`` is not NCHW/NHWC, ``out_shape`` does not have 2 entries, or
            ``scale <= 0``.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 1, 2, 2], "float32")
        ...     out = fluid.layers.resize_nearest(x, scale=2.0)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.array([[[[0, 1], [2, 3]]]], "float32")}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res[0, 0]
        array([[0., 0., 1., 1.],
               [0., 0., 1., 1.],
               [2., 2., 3., 3.],
               [2., 2., 3., 3.]], dtype=float32)
    """
    return image_resize(input, out_shape, scale, name, "NEAREST", actual_shape, align_corners,
                        1, data_format)


def image_resize_short(input: Variable, out_short_len: int,
                       resample: str = "BILINEAR") -> Variable:
    """Resize a 4-D NCHW batch so that its shorter side becomes ``out_short_len`` and the
    longer one ``int(long * out_short_len / short + 0.5)`` (aspect ratio kept).

    Args:
        input (Variable): ``[N, C, H, W]`` map with known H and W (float16/32/64 or uint8).
        out_short_len (int): the length of the shorter side after resizing (>= 1).
        resample (str): ``"BILINEAR"`` or ``"NEAREST"``. Default ``"BILINEAR"``.
    Returns:
        Variable: ``[N, C, H_out, W_out]``, the shorter side ``out_short_len``, ``input``'s
        dtype.
    Raises:
        TypeError: ``input`` is not a Variable (or not of a dtype ``image_resize`` takes).
        ValueError: ``input`` is not 4-D or has an unknown H/W, ``out_short_len`` is not a
            positive int, or ``resample`` is not BILINEAR/NEAREST.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 1, 4, 8])
        ...     out = fluid.layers.image_resize_short(x, out_short_len=2)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> exe.run(main, feed={"x": np.ones((1, 1, 4, 8), "float32")}, fetch_list=[out])[0].shape
        (1, 1, 2, 4)
    """
    check_type(input, "input", Variable, "image_resize_short")
    if len(input.shape) != 4:
        raise ValueError(f"image_resize_short: the rank of input must be 4 (num_batches, "
                         f"channels, in_h, in_w), but '{input.name}' has shape "
                         f"{list(input.shape)}")
    if not is_int(out_short_len) or out_short_len < 1:
        raise ValueError(f"image_resize_short: out_short_len must be a positive int, but "
                         f"received {out_short_len!r}")
    hw = list(input.shape[2:4])
    if any(d < 0 for d in hw):
        raise ValueError(f"image_resize_short: the height and width of '{input.name}' must be "
                         f"known, got shape {list(input.shape)}")
    short = 0 if hw[0] <= hw[1] else 1
    long_ = 1 - short
    out = [0, 0]
    out[short] = int(out_short_len)
    out[long_] = int(float(hw[long_]) * (float(out_short_len) / float(hw[short])) + 0.5)
    return image_resize(input=input, out_shape=out, resample=resample)


# -- 3-D convolution and pooling ------------------------------------------------------------------
def _check_nd_input(layer: str, input: Any, data_format: str, formats: Sequence[str],
                    rank: int) -> int:
    check_variable_and_dtype(input, "input", ["float16", "float32", "float64"], layer)
    if data_format not in formats:
        raise ValueError(f"{layer}: data_format must be {' or '.join(formats)}, but received "
                         f"{data_format!r}")
    if len(input.shape) != rank:
        raise ValueError(f"{layer}: input must be {rank}-D ({data_format}), got shape "
                         f"{list(input.shape)} for '{input.name}'")
    c = input.shape[1] if data_format == formats[0] else input.shape[-1]
    if c < 0:
        raise ValueError(f"{layer}: the channel dimension of the input '{input.name}' must be "
                         f"known, got shape {list(input.shape)}")
    return c


def conv3d(input: Variable, num_filters: int, filter_size: Any, stride: Any = 1,
           padding: Any = 0, dilation: Any = 1, groups: Optional[int] = None,
           param_attr: Any = None, bias_attr: Any = None, use_cudnn: bool = True,
           act: Any = None, name: Optional[str] = None, data_format: str = "NCDHW") -> Variable:
    """3-D convolution ``act(conv3d(input, W) + b)``; W is
    ``[num_filters, C/groups, kd, kh, kw]`` initialized Normal(0, sqrt(2 / (kd*kh*kw*C)))
    unless ``param_attr`` says otherwise; the bias ``[num_filters]`` is added on the channel
    axis (``bias_attr=False``: no bias).

    Args:
        input (Variable): ``[N, C, D, H, W]`` (or NDHWC) map.
        num_filters (int): output channels.
        filter_size (int | tuple of 3 ints): kernel size.
        stride (int | tuple, default 1): window step.
        padding (int | tuple | str, default 0): zero padding, or ``"SAME"`` / ``"VALID"``.
        dilation (int | tuple, default 1): spacing of the kernel taps.
        groups (int | None): channel groups.
        param_attr (ParamAttr | str | None): the filter's attribute.
        bias_attr (ParamAttr | str | bool | None): the bias's attribute; ``False``: none.
        use_cudnn (bool, default True): accepted for fluid's signature.
        act (str | None): activation applied to the result.
        name (str | None): name prefix of the output.
        data_format (str, default "NCDHW"): ``"NCDHW"`` or ``"NDHWC"``.
    Returns:
        Variable: ``[N, num_filters, D_out, H_out, W_out]``.
    Raises:
        TypeError: ``input`` is not a float16/32/64 Variable, ``num_filters``/``groups`` is not
            an int, or ``filter_size``/``stride``/``dilation`` is not an int or list of 3 ints.
        ValueError: ``data_format`` is not NCDHW/NDHWC, ``input`` is not 5-D or its channel dim is
            unknown, ``num_filters``/``groups`` < 1, the channels or ``num_filters`` are not
            divisible by ``groups``, a list argument does not have 3 values, or ``padding`` is
            invalid.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 2, 4, 4, 4], "float32")
        ...     out = fluid.layers.conv3d(x, num_filters=3, filter_size=3, padding=1)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> res, = exe.run(main, feed={"x": np.ones((1, 2, 4, 4, 4), "float32")}, fetch_list=[out])
        >>> res.shape
        (1, 3, 4, 4, 4)
    """
    layer = "conv3d"
    C = _check_nd_input(layer, input, data_format, ("NCDHW", "NDHWC"), 5)
    _check_use_cudnn(use_cudnn)
    num_filters, groups = _filters_and_groups(layer, input, C, num_filters, groups)
    helper = LayerHelper(layer, input=input, param_attr=param_attr, bias_attr=bias_attr,
                         act=act, name=name)
    filter_size = _to_list(filter_size, 3, "filter_size", layer)
    stride = _to_list(stride, 3, "stride", layer)
    dilation = _to_list(dilation, 3, "dilation", layer)
    paddings, algorithm = _padding_nd(padding, data_format, 3, layer)
    std = (2.0 / (filter_size[0] * filter_size[1] * filter_size[2] * C)) ** 0.5
    ch = 1 if data_format == "NCDHW" else 4
    return _append_conv(helper, layer, input, [num_filters, C // groups] + filter_size,
                        {"strides": stride, "paddings": paddings, "dilations": dilation,
                         "groups": groups, "use_cudnn": use_cudnn, "use_mkldnn": False,
                         "padding_algorithm": algorithm, "data_format": data_format},
                        ch, initializer=Normal(0.0, std, 0))


def conv3d_transpose(input: Variable, num_filters: int, output_size: Any = None,
                     filter_size: Any = None, padding: Any = 0, stride: Any = 1,
                     dilation: Any = 1, groups: Optional[int] = None, param_attr: Any = None,
                     bias_attr: Any = None, use_cudnn: bool = True, act: Any = None,
                     name: Optional[str] = None, data_format: str = "NCDHW") -> Variable:
    """Transposed 3-D convolution (the adjoint of conv3d): W is
    ``[C, num_filters/groups, kd, kh, kw]`` (default Xavier init); output per axis
    ``(in-1)*stride - pad_before - pad_after + dilation*(k-1) + 1``, or ``output_size`` when
    given (``filter_size`` may then be omitted and is derived from it).

    Args:
        input (Variable): ``[N, C, D, H, W]`` (or NDHWC) float16/32/64 map, C known.
        num_filters (int): output channels (divisible by ``groups``).
        output_size (int | list of 3 ints | None): the output's ``[D, H, W]``; None: computed
            from ``filter_size``. Default None.
        filter_size (int | list of 3 ints | None): kernel size; None: derived from
            ``output_size``. Default None.
        padding (int | list | str): zero padding, or ``"SAME"``/``"VALID"``. Default 0.
        stride (int | list of 3 ints): the upsampling step. Default 1.
        dilation (int | list of 3 ints): spacing of the kernel taps. Default 1.
        groups (int | None): channel groups (None: 1). Default None.
        param_attr (ParamAttr | str | None): the filter's attribute (Xavier init by default).
        bias_attr (ParamAttr | str | bool | None): the bias's attribute; ``False``: no bias.
        use_cudnn (bool): accepted for fluid's signature. Default True.
        act (str | None): activation applied to the result. Default None.
        name (str | None): name prefix of the output. Default None.
        data_format (str): ``"NCDHW"`` or ``"NDHWC"``. Default ``"NCDHW"``.
    Returns:
        Variable: ``[N, num_filters, D_out, H_out, W_out]`` (or NDHWC), ``input``'s dtype.
    Raises:
        TypeError: ``input`` is not a float16/32/64 Variable, ``num_filters``/``groups`` is not
            an int, or ``stride``/``dilation``/``filter_size`` is not an int or list of 3 ints.
        ValueError: ``param_attr`` is False, ``data_format`` is unknown, ``input`` is not 5-D or
            its channel dim is unknown, ``num_filters``/``groups`` < 1 or not divisible,
            ``padding`` is invalid, or both ``output_size`` and ``filter_size`` are None.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 2, 2, 2, 2], "float32")
        ...     out = fluid.layers.conv3d_transpose(x, num_filters=3, filter_size=2, stride=2)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> res, = exe.run(main, feed={"x": np.ones((1, 2, 2, 2, 2), "float32")}, fetch_list=[out])
        >>> res.shape
        (1, 3, 4, 4, 4)
    """
    layer = "conv3d_transpose"
    if param_attr is False:
        raise ValueError(f"{layer}: param_attr should not be False")
    C = _check_nd_input(layer, input, data_format, ("NCDHW", "NDHWC"), 5)
    _check_use_cudnn(use_cudnn)
    num_filters, groups = _transpose_filters_and_groups(layer, C, num_filters, groups)
    helper = LayerHelper(layer, input=input, param_attr=param_attr, bias_attr=bias_attr,
                         act=act, name=name)
    stride = _to_list(stride, 3, "stride", layer)
    dilation = _to_list(dilation, 3, "dilation", layer)
    paddings, algorithm = _padding_nd(padding, data_format, 3, layer)
    size = input.shape[2:] if data_format == "NCDHW" else input.shape[1:4]
    output_size, filter_size = _transpose_sizes(layer, 3, output_size, filter_size, size, stride,
                                                paddings, dilation)
    ch = 1 if data_format == "NCDHW" else 4
    return _append_conv(helper, layer, input, [C, num_filters // groups] + filter_size,
                        {"output_size": output_size, "strides": stride,
                         "paddings": paddings, "padding_algorithm": algorithm,
                         "dilations": dilation, "groups": groups, "use_cudnn": use_cudnn,
                         "data_format": data_format}, ch)


def pool3d(input: Variable, pool_size: Any = -1, pool_type: str = "max", pool_stride: Any = 1,
           pool_padding: Any = 0, global_pooling: bool = False, use_cudnn: bool = True,
           ceil_mode: bool = False, name: Optional[str] = None, exclusive: bool = True,
           data_format: str = "NCDHW") -> Variable:
    """Max or average pooling of a 5-D batch over ``pool_size`` windows (``global_pooling``:
    the whole volume; ``ceil_mode``: round the output size up; ``exclusive``: averages ignore
    padding).

    Args:
        input (Variable): ``[N, C, D, H, W]`` (or NDHWC) map.
        pool_size (int | tuple, default -1): window size.
        pool_type (str, default "max"): ``"max"`` or ``"avg"``.
        pool_stride (int | tuple, default 1): window step.
        pool_padding (int | tuple | str, default 0): padding.
        global_pooling (bool, default False): pool the whole volume.
        use_cudnn (bool, default True): accepted for fluid's signature.
        ceil_mode (bool, default False): round the output size up.
        name (str | None): name prefix of the output.
        exclusive (bool, default True): averages ignore padding.
        data_format (str, default "NCDHW"): the layout.
    Returns:
        Variable: the pooled volume.
    Raises:
        TypeError: ``input`` is not a float16/32/64 Variable, ``use_cudnn`` is not a bool, or
            ``pool_size``/``pool_stride`` is not an int or list of 3 ints.
        ValueError: ``pool_type`` is not ``"max"``/``"avg"``, ``pool_size`` is missing without
            ``global_pooling``, ``data_format`` is not NCDHW/NDHWC, ``input`` is not 5-D, or
            ``pool_padding`` is invalid (e.g. ``"VALID"`` with ``ceil_mode``).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 1, 2, 2, 2], "float32")
        ...     out = fluid.layers.pool3d(x, pool_size=2, pool_type="avg", pool_stride=2)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.arange(8, dtype="float32").reshape(1, 1, 2, 2, 2)}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res.ravel()
        array([3.5], dtype=float32)
    """
    layer = "pool3d"
    _check_pool_args(layer, pool_type, pool_size, global_pooling, use_cudnn)
    _check_nd_input(layer, input, data_format, ("NCDHW", "NDHWC"), 5)
    pool_size = [1, 1, 1] if global_pooling and pool_size in (-1, None) else \
        _to_list(pool_size, 3, "pool_size", layer)
    return _append_pool(layer, 3, input, pool_size, pool_type, pool_stride, pool_padding,
                        global_pooling, use_cudnn, ceil_mode, name, exclusive, data_format)


def _adaptive_pool(layer: str, n: int, input: Variable, pool_size: Any, pool_type: str,
                   require_index: bool, name: Optional[str]) -> Any:
    check_variable_and_dtype(input, "input", ["float16", "float32", "float64"], layer)
    if len(input.shape) != n + 2:
        raise ValueError(f"{layer}: input must be {n + 2}-D, got shape {list(input.shape)} "
                         f"for '{input.name}'")
    if pool_type not in ("max", "avg"):
        raise ValueError(f"{layer}: unknown pool_type {pool_type!r}; it can only be 'max' or "
                         f"'avg'")
    if pool_type == "avg" and require_index:
        raise ValueError(f"{layer}: invalid setting 'require_index' true when 'pool_type' is "
                         f"'avg'")
    pool_size = _to_list(pool_size, n, "pool_size", layer)
    if any(p < 1 for p in pool_size):
        raise ValueError(f"{layer}: pool_size must be positive, got {pool_size}")
    helper = LayerHelper(layer, input=input, name=name)
    out = helper.create_variable_for_type_inference(input.dtype)
    outputs = {"Out": out}
    if require_index:
        op_type = f"max_pool{n}d_with_index"
        mask = helper.create_variable_for_type_inference("int32")
        outputs["Mask"] = mask
    else:
        op_type = f"pool{n}d"
    helper.append_op(type=op_type, inputs={"X": input}, outputs=outputs,
                     attrs={"pooling_type": pool_type, "ksize": pool_size, "adaptive": True}
                     if not require_index else {"ksize": pool_size, "adaptive": True})
    return (out, mask) if require_index else out


def adaptive_pool2d(input: Variable, pool_size: Any, pool_type: str = "max",
                    require_index: bool = False, name: Optional[str] = None) -> Any:
    """Adaptive max/avg pooling of a 4-D NCHW batch to ``pool_size`` (output cell ``o`` of an
    axis covers ``[floor(o*in/out), ceil((o+1)*in/out))``); ``require_index`` (max only) also
    returns the flat index ``h*W + w`` of each maximum.

    Args:
        input (Variable): ``[N, C, H, W]`` map.
        pool_size (int | tuple): the output's ``[H_out, W_out]``.
        pool_type (str, default "max"): ``"max"`` or ``"avg"``.
        require_index (bool, default False): also return the max positions (max only).
        name (str | None): name prefix of the output.
    Returns:
        Variable | tuple: ``[N, C, H_out, W_out]`` (and the indices with ``require_index``).
    Raises:
        TypeError: ``input`` is not a float16/32/64 Variable, or ``pool_size`` is not an int or a
            list of 2 ints.
        ValueError: ``input`` is not 4-D, ``pool_type`` is not ``"max"``/``"avg"``,
            ``require_index`` is set with ``"avg"``, or ``pool_size`` has a value < 1 or the
            wrong length.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 1, 4, 4], "float32")
        ...     out = fluid.layers.adaptive_pool2d(x, pool_size=2, pool_type="max")
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.arange(16, dtype="float32").reshape(1, 1, 4, 4)}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res[0, 0]
        array([[ 5.,  7.],
               [13., 15.]], dtype=float32)
    """
    return _adaptive_pool("adaptive_pool2d", 2, input, pool_size, pool_type, require_index,
                          name)


def adaptive_pool3d(input: Variable, pool_size: Any, pool_type: str = "max",
                    require_index: bool = False, name: Optional[str] = None) -> Any:
    """Adaptive max/avg pooling of a 5-D NCDHW batch to ``pool_size`` (see
    ``adaptive_pool2d``).

    Args:
        input (Variable): ``[N, C, D, H, W]`` float16/32/64 volume.
        pool_size (int | list of 3 ints): the output's ``[D_out, H_out, W_out]``.
        pool_type (str): ``"max"`` or ``"avg"``. Default ``"max"``.
        require_index (bool): also return the flat index of each maximum (max only).
            Default False.
        name (str | None): name prefix of the output. Default None.
    Returns:
        Variable | tuple: ``[N, C, D_out, H_out, W_out]`` in ``input``'s dtype; with
        ``require_index`` the pair ``(out, mask)``, ``mask`` int32 of the same shape.
    Raises:
        TypeError: ``input`` is not a float16/32/64 Variable, or ``pool_size`` is not an int or a
            list of 3 ints.
        ValueError: ``input`` is not 5-D, ``pool_type`` is not ``"max"``/``"avg"``,
            ``require_index`` is set with ``"avg"``, or ``pool_size`` has a value < 1 or the
            wrong length.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 1, 2, 2, 2], "float32")
        ...     out = fluid.layers.adaptive_pool3d(x, pool_size=1, pool_type="avg")
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.arange(8, dtype="float32").reshape(1, 1, 2, 2, 2)}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res.ravel()
        array([3.5], dtype=float32)
    """
    return _adaptive_pool("adaptive_pool3d", 3, input, pool_size, pool_type, require_index,
                          name)


# -- feature-map rearrangements and maps (ops/vision.py) ------------------------------------------
def _float_var(layer: str, x: Any, arg: str = "x") -> None:
    check_variable_and_dtype(x, arg, ["float16", "float32", "float64"], layer)


def _simple(layer: str, op_type: str, inputs: Dict[str, Any], attrs: Dict[str, Any],
            dtype: Any, name: Optional[str] = None, out_slot: str = "Out") -> Variable:
    helper = LayerHelper(op_type, name=name)
    out = helper.create_variable_for_type_inference(dtype)
    helper.append_op(type=op_type, inputs=inputs, outputs={out_slot: out}, attrs=attrs)
    return out


def _rank(layer: str, x: Variable, rank: int, arg: str = "x") -> None:
    if len(x.shape) != rank:
        raise ValueError(f"{layer}: {arg} must be a {rank}-D tensor, but '{x.name}' has shape "
                         f"{list(x.shape)}")


def pixel_shuffle(x: Variable, upscale_factor: int) -> Variable:
    """Rearrange ``[N, C*r*r, H, W]`` into ``[N, C, H*r, W*r]`` (r = ``upscale_factor``):
    ``out[n, c, h*r + i, w*r + j] = x[n, c*r*r + i*r + j, h, w]``.

    Args:
        x (Variable): ``[N, C * r * r, H, W]`` map.
        upscale_factor (int): ``r``.
    Returns:
        Variable: ``[N, C, H * r, W * r]``.
    Raises:
        TypeError: ``x`` is not a float16/32/64 Variable, or ``upscale_factor`` is not an int.
        ValueError: ``x`` is not 4-D, or its channels are not divisible by
            ``upscale_factor ** 2`` (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 4, 1, 1], "float32")
        ...     out = fluid.layers.pixel_shuffle(x, upscale_factor=2)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.arange(4, dtype="float32").reshape(1, 4, 1, 1)}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res[0, 0]
        array([[0., 1.],
               [2., 3.]], dtype=float32)
    """
    _float_var("pixel_shuffle", x)
    _rank("pixel_shuffle", x, 4)
    if not is_int(upscale_factor):
        raise TypeError(f"pixel_shuffle: upscale_factor must be an int, but received "
                        f"{upscale_factor!r}")
    return _simple("pixel_shuffle", "pixel_shuffle", {"X": x},
                   {"upscale_factor": int(upscale_factor)}, x.dtype)


def space_to_depth(x: Variable, blocksize: int, name: Optional[str] = None) -> Variable:
    """fluid's ``space_to_depth`` (darknet reorg): ``[N, C, H, W]`` ->
    ``[N, C*bs², H/bs, W/bs]`` with fluid's element order (see the op).

    Args:
        x (Variable): ``[N, C, H, W]`` map (``H``, ``W`` divisible by ``blocksize``).
        blocksize (int): the block edge.
        name (str | None): name prefix of the output.
    Returns:
        Variable: ``[N, C * blocksize^2, H / blocksize, W / blocksize]``.
    Raises:
        TypeError: ``x`` is not a float16/32/64/int32/int64 Variable, or ``blocksize`` is not an
            int.
        ValueError: ``x`` is not 4-D, or H/W are not divisible by ``blocksize``
            (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 4, 2, 2], "float32")
        ...     out = fluid.layers.space_to_depth(x, blocksize=2)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.arange(16, dtype="float32").reshape(1, 4, 2, 2)}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res.shape
        (1, 16, 1, 1)
    """
    check_variable_and_dtype(x, "x", ["float16", "float32", "float64", "int32", "int64"],
                             "space_to_depth")
    _rank("space_to_depth", x, 4)
    if not is_int(blocksize):
        raise TypeError(f"space_to_depth: blocksize must be an int, but received {blocksize!r}")
    return _simple("space_to_depth", "space_to_depth", {"X": x}, {"blocksize": int(blocksize)},
                   x.dtype, name)


def shuffle_channel(x: Variable, group: int, name: Optional[str] = None) -> Variable:
    """ShuffleNet's channel shuffle: channels viewed as ``[group, C/group]`` and transposed.

    Args:
        x (Variable): ``[N, C, H, W]`` map.
        group (int): channel groups (``C`` divisible by it).
        name (str | None): name prefix of the output.
    Returns:
        Variable: the channels regrouped (the transpose of ``[group, C / group]``).
    Raises:
        TypeError: ``x`` is not a float16/32/64 Variable, or ``group`` is not an int.
        ValueError: ``x`` is not 4-D, or its channels are not divisible by ``group``
            (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 4, 1, 1], "float32")
        ...     out = fluid.layers.shuffle_channel(x, group=2)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.arange(4, dtype="float32").reshape(1, 4, 1, 1)}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res.ravel()
        array([0., 2., 1., 3.], dtype=float32)
    """
    _float_var("shuffle_channel", x)
    _rank("shuffle_channel", x, 4)
    if not is_int(group):
        raise TypeError(f"shuffle_channel: group must be an int, but received {group!r}")
    return _simple("shuffle_channel", "shuffle_channel", {"X": x}, {"group": int(group)},
                   x.dtype, name)


def temporal_shift(x: Variable, seg_num: int, shift_ratio: float = 0.25,
                   name: Optional[str] = None) -> Variable:
    """TSM's temporal shift of ``[N*seg_num, C, H, W]``: the first ``C*shift_ratio`` channels
    take the previous frame, the next ``C*shift_ratio`` the following one (zeros at the ends).

    Args:
        x (Variable): ``[N * seg_num, C, H, W]`` frames.
        seg_num (int): frames per clip.
        shift_ratio (float, default 0.25): the fraction of channels shifted each way in time.
        name (str | None): name prefix of the output.
    Returns:
        Variable: same shape; a quarter of the channels (by default) come from the previous
        frame, a quarter from the next.
    Raises:
        TypeError: ``x`` is not a float16/32/64 Variable, ``seg_num`` is not an int, or
            ``shift_ratio`` is not a number.
        ValueError: ``x`` is not 4-D, or its batch is not divisible by ``seg_num``
            (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 4, 1, 1])                   # batch * seg_num frames
        ...     out = fluid.layers.temporal_shift(x, seg_num=2, shift_ratio=0.25)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> exe.run(main, feed={"x": np.arange(8, dtype="float32").reshape(2, 4, 1, 1)},
        ...         fetch_list=[out])[0].reshape(2, 4)
        array([[0., 5., 2., 3.],
               [0., 0., 6., 7.]], dtype=float32)
    """
    _float_var("temporal_shift", x)
    _rank("temporal_shift", x, 4)
    if not is_int(seg_num):
        raise TypeError(f"temporal_shift: seg_num must be an int, but received {seg_num!r}")
    if not is_number(shift_ratio):
        raise TypeError(f"temporal_shift: shift_ratio must be a float, but received "
                        f"{shift_ratio!r}")
    return _simple("temporal_shift", "temporal_shift", {"X": x},
                   {"seg_num": int(seg_num), "shift_ratio": float(shift_ratio)}, x.dtype, name)


def unfold(x: Variable, kernel_sizes: Any = None, strides: Any = 1, paddings: Any = 0,
           dilations: Any = 1, name: Optional[str] = None, *, kernel_size: Any = None,
           dilation: Any = None) -> Variable:
    """im2col of ``[N, C, H, W]``: ``[N, C*kh*kw, L]`` sliding blocks. ``paddings`` is an int,
    ``[ph, pw]`` or ``[top, left, bottom, right]``. (fluid 1.8's code names the arguments
    ``kernel_sizes`` / ``dilations``, its documentation ``kernel_size`` / ``dilation``: both
    are accepted.)

    Args:
        x (Variable): ``[N, C, H, W]`` float16/32/64 map.
        kernel_sizes (int | list of 2 ints): the block size ``[kh, kw]`` (required; also
            accepted as ``kernel_size=``).
        strides (int | list of 2 ints): the block step. Default 1.
        paddings (int | list of 2 or 4 ints): padding, ``[ph, pw]`` or
            ``[top, left, bottom, right]``. Default 0.
        dilations (int | list of 2 ints): spacing inside a block (also ``dilation=``).
            Default 1.
        name (str | None): name prefix of the output. Default None.
    Returns:
        Variable: ``[N, C * kh * kw, L]``, L the number of blocks, ``x``'s dtype.
    Raises:
        TypeError: ``kernel_sizes`` is missing, ``x`` is not a float16/32/64 Variable, or a size
            argument is not an int or list of ints.
        ValueError: ``x`` is not 4-D, ``paddings`` is not an int or 2/4 ints, a list argument has
            the wrong length, or no block fits (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 1, 3, 3])
        ...     out = fluid.layers.unfold(x, kernel_sizes=2)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> exe.run(main, feed={"x": np.arange(9, dtype="float32").reshape(1, 1, 3, 3)},
        ...         fetch_list=[out])[0]                      # [batch, C*kh*kw, windows]
        array([[[0., 1., 3., 4.],
                [1., 2., 4., 5.],
                [3., 4., 6., 7.],
                [4., 5., 7., 8.]]], dtype=float32)
    """
    layer = "unfold"
    if kernel_size is not None:
        kernel_sizes = kernel_size
    if dilation is not None:
        dilations = dilation
    if kernel_sizes is None:
        raise TypeError("unfold: missing the argument kernel_sizes")
    _float_var(layer, x)
    _rank(layer, x, 4)
    kernel_sizes = _to_list(kernel_sizes, 2, "kernel_sizes", layer)
    strides = _to_list(strides, 2, "strides", layer)
    dilations = _to_list(dilations, 2, "dilations", layer)
    if is_int(paddings):
        paddings = [int(paddings)] * 4
    elif isinstance(paddings, (list, tuple)) and len(paddings) == 2:
        paddings = _to_list(paddings, 2, "paddings", layer) * 2
    elif isinstance(paddings, (list, tuple)) and len(paddings) == 4:
        paddings = _to_list(paddings, 4, "paddings", layer)
    else:
        raise ValueError(f"unfold: paddings must be an int or a list of 2 or 4 ints, but "
                         f"received {paddings!r}")
    return _simple(layer, "unfold", {"X": x},
                   {"kernel_sizes": kernel_sizes, "strides": strides, "paddings": paddings,
                    "dilations": dilations}, x.dtype, name, out_slot="Y")


def affine_channel(x: Variable, scale: Optional[Variable] = None,
                   bias: Optional[Variable] = None, data_layout: str = "NCHW",
                   name: Optional[str] = None, act: Any = None) -> Variable:
    """``x * scale[c] + bias[c]`` on the channel axis (``scale`` / ``bias`` are 1-D
    Variables of the channel count), then ``act``.

    Args:
        x (Variable): ``[N, C, ...]`` (NCHW) or ``[N, ..., C]`` (NHWC) float16/32/64 map.
        scale (Variable): ``[C]`` per-channel factors (required despite the None default).
        bias (Variable): ``[C]`` per-channel offsets (required despite the None default).
        data_layout (str): ``"NCHW"`` or ``"NHWC"``. Default ``"NCHW"``.
        name (str | None): name prefix of the output. Default None.
        act (str | None): activation applied to the result. Default None.
    Returns:
        Variable: ``x * scale[c] + bias[c]`` (then ``act``), ``x``'s shape and dtype.
    Raises:
        TypeError: ``x`` is not a float16/32/64 Variable, or ``scale``/``bias`` is not a
            Variable.
        ValueError: ``data_layout`` is unknown, or ``scale``/``bias`` do not match the channel
            count (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 2, 1, 1], "float32")
        ...     out = fluid.layers.affine_channel(x, scale=fluid.layers.assign(np.array([2, 3], "float32")), bias=fluid.layers.assign(np.array([1, 0], "float32")))
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> res, = exe.run(main, feed={"x": np.ones((1, 2, 1, 1), "float32")}, fetch_list=[out])
        >>> res.ravel()
        array([3., 3.], dtype=float32)
    """
    layer = "affine_channel"
    _float_var(layer, x)
    check_type(scale, "scale", Variable, layer)
    check_type(bias, "bias", Variable, layer)
    helper = LayerHelper(layer, name=name, act=act)
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op(type=layer, inputs={"X": x, "Scale": scale, "Bias": bias},
                     outputs={"Out": out}, attrs={"data_layout": data_layout})
    return helper.append_activation(out)


def lrn(input: Variable, n: int = 5, k: float = 1.0, alpha: float = 0.0001,
        beta: float = 0.75, name: Optional[str] = None, data_format: str = "NCHW") -> Variable:
    """Local response normalization across channels:
    ``out = x / (k + alpha * sum_{n neighbouring channels} x^2) ** beta``.

    Args:
        input (Variable): ``[N, C, H, W]`` map.
        n (int, default 5): channels in the normalization window.
        k (float, default 1.0): the bias.
        alpha (float, default 1e-4): the scale.
        beta (float, default 0.75): the exponent.
        name (str | None): name prefix of the output.
        data_format (str, default "NCHW"): the layout.
    Returns:
        Variable: ``x / (k + alpha * sum(x^2 over the window)) ** beta``.
    Raises:
        TypeError: ``input`` is not a float16/32/64 Variable, or ``n`` is not an int.
        ValueError: ``input`` is not 4-D, ``data_format`` is not NCHW/NHWC, or ``n < 1``.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 3, 1, 1], "float32")
        ...     out = fluid.layers.lrn(x, n=3)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> res, = exe.run(main, feed={"x": np.ones((1, 3, 1, 1), "float32")}, fetch_list=[out])
        >>> res.ravel()
        array([0.99985 , 0.999775, 0.99985 ], dtype=float32)
    """
    layer = "lrn"
    _float_var(layer, input, "input")
    if len(input.shape) != 4:
        raise ValueError(f"lrn: the dimension size of the input must be 4, but '{input.name}' "
                         f"has shape {list(input.shape)}")
    if data_format not in ("NCHW", "NHWC"):
        raise ValueError(f"lrn: data_format must be 'NCHW' or 'NHWC', but received "
                         f"{data_format!r}")
    n = check_int(n, "n", layer, minimum=1)
    helper = LayerHelper(layer, name=name)
    out = helper.create_variable_for_type_inference(input.dtype)
    mid = helper.create_variable_for_type_inference(input.dtype, stop_gradient=True)
    helper.append_op(type=layer, inputs={"X": input}, outputs={"Out": out, "MidOut": mid},
                     attrs={"n": n, "k": float(k), "alpha": float(alpha), "beta": float(beta),
                            "data_format": data_format})
    return out


def affine_grid(theta: Variable, out_shape: Any, name: Optional[str] = None) -> Variable:
    """Sampling grid ``[N, H, W, 2]`` of the affine maps ``theta`` ``[N, 2, 3]`` over an output
    of shape ``out_shape`` (``[N, C, H, W]``: a list of ints or a 1-D int Variable).

    Args:
        theta (Variable): ``[N, 2, 3]`` affine matrices.
        out_shape (list | Variable): ``[N, C, H, W]`` of the output grid.
        name (str | None): name prefix of the output.
    Returns:
        Variable: ``[N, H, W, 2]`` sampling grid for ``grid_sampler``.
    Raises:
        TypeError: ``theta`` is not a float16/32/64 Variable, or ``out_shape`` is not a list,
            tuple or Variable (or holds non-ints).
        ValueError: a list ``out_shape`` does not have 4 values, or ``theta`` is not
            ``[N, 2, 3]`` (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     theta = fluid.data("theta", [-1, 2, 3])
        ...     grid = fluid.layers.affine_grid(theta, out_shape=[1, 1, 2, 2])
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> identity = np.array([[[1, 0, 0], [0, 1, 0]]], "float32")
        >>> exe.run(main, feed={"theta": identity}, fetch_list=[grid])[0][0]
        array([[[-1., -1.],
                [ 1., -1.]],
        <BLANKLINE>
               [[-1.,  1.],
                [ 1.,  1.]]], dtype=float32)
    """
    layer = "affine_grid"
    _float_var(layer, theta, "theta")
    if not isinstance(out_shape, (list, tuple, Variable)):
        raise TypeError(f"affine_grid: out_shape should be a list, tuple or Variable, but "
                        f"received {type(out_shape).__name__}")
    inputs: Dict[str, Any] = {"Theta": theta}
    attrs: Dict[str, Any] = {}
    if isinstance(out_shape, Variable):
        inputs["OutputShape"] = out_shape
    else:
        attrs["output_shape"] = _to_list(out_shape, 4, "out_shape", layer)
    return _simple(layer, layer, inputs, attrs, theta.dtype, name, out_slot="Output")


def grid_sampler(x: Variable, grid: Variable, name: Optional[str] = None) -> Variable:
    """Bilinear sampling of ``x`` ``[N, C, H, W]`` at ``grid`` ``[N, Ho, Wo, 2]`` (x, y in
    [-1, 1] reaching the corner pixels; samples outside read 0).

    Args:
        x (Variable): ``[N, C, H, W]`` map.
        grid (Variable): ``[N, H_out, W_out, 2]`` sampling positions in ``[-1, 1]`` (x, y).
        name (str | None): name prefix of the output.
    Returns:
        Variable: ``[N, C, H_out, W_out]``, bilinear samples (zeros outside).
    Raises:
        TypeError: ``x`` or ``grid`` is not a float16/32/64 Variable.
        ValueError: ``x`` is not 4-D or ``grid`` is not ``[N, H_out, W_out, 2]`` matching ``x``'s
            batch (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 1, 2, 2])
        ...     grid = fluid.data("grid", [-1, 1, 1, 2])
        ...     out = fluid.layers.grid_sampler(x, grid)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> exe.run(main, feed={"x": np.array([[[[0, 1], [2, 3]]]], "float32"),
        ...                     # the centre
        ...                     "grid": np.zeros((1, 1, 1, 2), "float32")}, fetch_list=[out])[0].ravel()
        array([1.5], dtype=float32)
    """
    layer = "grid_sampler"
    _float_var(layer, x)
    _float_var(layer, grid, "grid")
    return _simple(layer, layer, {"X": x, "Grid": grid}, {"use_cudnn": False}, x.dtype, name,
                   out_slot="Output")


def fsp_matrix(x: Variable, y: Variable) -> Variable:
    """The FSP matrix ``[N, C1, C2]`` of two feature maps with equal height and width:
    ``x_flat @ y_flat^T / (H*W)``.

    Args:
        x (Variable): a feature map ``[N, C1, H, W]`` (float16/float32/float64).
        y (Variable): a feature map ``[N, C2, H, W]`` with ``x``'s height and width.

    Returns:
        Variable: ``[N, C1, C2]``, ``x``'s dtype.

    Raises:
        TypeError: ``x`` or ``y`` is not a float Variable.
        ValueError: ``x`` or ``y`` is not 4-D, or their heights or widths differ.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     a = fluid.data("a", [-1, 2, 2, 2])
        ...     b = fluid.data("b", [-1, 3, 2, 2])
        ...     out = fluid.layers.fsp_matrix(a, b)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> exe.run(main, feed={"a": np.ones((1, 2, 2, 2), "float32"), "b": np.ones((1, 3, 2, 2), "float32")},
        ...         fetch_list=[out])[0]
        array([[[1., 1., 1.],
                [1., 1., 1.]]], dtype=float32)
    """
    _float_var("fsp_matrix", x)
    _float_var("fsp_matrix", y, "y")
    return _simple("fsp_matrix", "fsp", {"X": x, "Y": y}, {}, x.dtype)


def cos_sim(X: Variable, Y: Variable) -> Variable:
    """Row-wise cosine similarity ``[N, 1]`` of X and Y (Y may have a single row).

    Args:
        X (Variable): ``[N, D]``.
        Y (Variable): ``[N, D]`` or ``[1, D]`` (broadcast).
    Returns:
        Variable: ``[N, 1]`` cosine similarities.
    Raises:
        TypeError: ``X`` or ``Y`` is not a float16/32/64 Variable.
        ValueError: ``Y`` has neither ``X``'s shape nor one row of ``X``'s width
            (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 2], "float32")
        ...     y = fluid.data("y", [-1, 2], "float32")
        ...     out = fluid.layers.cos_sim(x, y)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.array([[1, 0], [1, 1]], "float32"), "y": np.array([[1, 0], [1, 0]], "float32")}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res.round(4)
        array([[1.    ],
               [0.7071]], dtype=float32)
    """
    _float_var("cos_sim", X, "X")
    _float_var("cos_sim", Y, "Y")
    helper = LayerHelper("cos_sim")
    out = helper.create_variable_for_type_inference(X.dtype)
    xn = helper.create_variable_for_type_inference(X.dtype, stop_gradient=True)
    yn = helper.create_variable_for_type_inference(X.dtype, stop_gradient=True)
    helper.append_op(type="cos_sim", inputs={"X": X, "Y": Y},
                     outputs={"Out": out, "XNorm": xn, "YNorm": yn})
    return out


def bilinear_tensor_product(x: Variable, y: Variable, size: int, act: Any = None,
                            name: Optional[str] = None, param_attr: Any = None,
                            bias_attr: Any = None) -> Variable:
    """``out[:, i] = act(x @ W[i] @ y^T + b[i])`` with W ``[size, x_dim, y_dim]`` and b
    ``[1, size]``.

    Args:
        x (Variable): ``[N, M]`` float16/32/64, M known.
        y (Variable): ``[N, K]`` of ``x``'s dtype, K known.
        size (int): output width (>= 1).
        act (str | None): activation applied to the result. Default None.
        name (str | None): name prefix of the output. Default None.
        param_attr (ParamAttr | str | None): the weight ``[size, M, K]``'s attribute.
        bias_attr (ParamAttr | str | bool | None): the bias ``[1, size]``'s attribute;
            ``False``: no bias.
    Returns:
        Variable: ``[N, size]``, ``x``'s dtype.
    Raises:
        TypeError: ``x`` or ``y`` is not a float16/32/64 Variable, or ``size`` is not an int.
        ValueError: ``size < 1``, or ``x``/``y`` is not 2-D with a known width.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 3])
        ...     y = fluid.data("y", [-1, 2])
        ...     out = fluid.layers.bilinear_tensor_product(x, y, size=4)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> exe.run(main, feed={"x": np.ones((5, 3), "float32"), "y": np.ones((5, 2), "float32")},
        ...         fetch_list=[out])[0].shape
        (5, 4)
    """
    layer = "bilinear_tensor_product"
    _float_var(layer, x)
    _float_var(layer, y, "y")
    size = check_int(size, "size", layer, minimum=1)
    for arg, v in (("x", x), ("y", y)):
        if len(v.shape) != 2 or v.shape[1] < 0:
            raise ValueError(f"{layer}: {arg} must be 2-D with a known width, but '{v.name}' "
                             f"has shape {list(v.shape)}")
    helper = LayerHelper(layer, name=name, param_attr=param_attr, bias_attr=bias_attr, act=act)
    w = helper.create_parameter(attr=helper.param_attr, shape=[size, x.shape[1], y.shape[1]],
                                dtype=x.dtype)
    inputs = {"X": x, "Y": y, "Weight": w}
    bias = helper.create_parameter(attr=helper.bias_attr, shape=[1, size], dtype=x.dtype,
                                   is_bias=True)
    if bias is not None:
        inputs["Bias"] = bias
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op(type=layer, inputs=inputs, outputs={"Out": out})
    return helper.append_activation(out)


def add_position_encoding(input: Variable, alpha: float, beta: float,
                          name: Optional[str] = None) -> Variable:
    """``alpha * input + beta * PE`` with the sinusoid position table of the Transformer
    (input ``[batch, length, size]``, size even).

    Args:
        input (Variable): ``[batch, length, size]`` float16/32/64, ``size`` even.
        alpha (float): the factor of ``input``.
        beta (float): the factor of the position table.
        name (str | None): name prefix of the output. Default None.
    Returns:
        Variable: ``alpha * input + beta * PE``, ``input``'s shape and dtype.
    Raises:
        TypeError: ``input`` is not a float16/32/64 Variable, or ``alpha``/``beta`` is an object
            ``float()`` rejects with a TypeError (e.g. None).
        ValueError: ``alpha``/``beta`` is a non-numeric string, or ``input`` is not 3-D (or a 2-D
            LoD tensor) with an even last dim (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 3, 4])
        ...     # the encoding alone
        ...     out = fluid.layers.add_position_encoding(x, alpha=0.0, beta=1.0)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> exe.run(main, feed={"x": np.zeros((1, 3, 4), "float32")}, fetch_list=[out])[0][0].round(4)
        array([[ 0.000e+00,  0.000e+00,  1.000e+00,  1.000e+00],
               [ 8.415e-01,  1.000e-04,  5.403e-01,  1.000e+00],
               [ 9.093e-01,  2.000e-04, -4.161e-01,  1.000e+00]], dtype=float32)
    """
    layer = "add_position_encoding"
    _float_var(layer, input, "input")
    return _simple(layer, layer, {"X": input},
                   {"alpha": float(alpha), "beta": float(beta)}, input.dtype, name)


def similarity_focus(input: Variable, axis: int, indexes: Sequence[int],
                     name: Optional[str] = None) -> Variable:
    """A 0/1 mask of ``input``'s shape marking, for each slice ``indexes`` of ``axis``
    (1, 2 or 3), the greedy row/column-exclusive maxima (see the op).

    Args:
        input (Variable): ``[N, A, B, C]`` float16/32/64 tensor.
        axis (int): the axis whose slices are scanned: 1, 2 or 3.
        indexes (list of int): the slice indices along ``axis`` (non-empty).
        name (str | None): name prefix of the output. Default None.
    Returns:
        Variable: a 0/1 mask of ``input``'s shape and dtype (``stop_gradient=True``).
    Raises:
        TypeError: ``input`` is not a float16/32/64 Variable.
        ValueError: ``input`` is not 4-D, ``axis`` is not 1, 2 or 3, or ``indexes`` is not a
            non-empty list of ints.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 2, 2, 2])
        ...     out = fluid.layers.similarity_focus(x, axis=1, indexes=[0])
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> res, = exe.run(main, feed={"x": np.array([[[[1, 2], [3, 4]], [[0, 0], [0, 0]]]], "float32")},
        ...               fetch_list=[out])
        >>> res[0, 0]
        array([[1., 0.],
               [0., 1.]], dtype=float32)
    """
    layer = "similarity_focus"
    _float_var(layer, input, "input")
    _rank(layer, input, 4, "input")
    if not is_int(axis) or axis not in (1, 2, 3):
        raise ValueError(f"similarity_focus: axis must be 1, 2 or 3, but received {axis!r}")
    if not isinstance(indexes, (list, tuple)) or not indexes or \
            not all(is_int(i) for i in indexes):
        raise ValueError(f"similarity_focus: indexes must be a non-empty list of ints, but "
                         f"received {indexes!r}")
    out = _simple(layer, layer, {"X": input}, {"axis": int(axis),
                                               "indexes": [int(i) for i in indexes]},
                  input.dtype, name)
    out.stop_gradient = True
    return out


def mean_iou(input: Variable, label: Variable, num_classes: int) -> Any:
    """Mean intersection-over-union of integer predictions ``input`` and ``label``; returns
    ``(mean_iou [1] float32, out_wrong [num_classes] int32, out_correct [num_classes] int32)``.

    Args:
        input (Variable): int32/int64 predicted class ids, any shape.
        label (Variable): int32/int64 ground-truth ids, ``input``'s shape.
        num_classes (int): the number of classes (>= 1).
    Returns:
        tuple: ``(mean_iou, out_wrong, out_correct)``: ``[1]`` float32, and per-class
        ``[num_classes]`` int32 counts of wrong and correct predictions.
    Raises:
        TypeError: ``input``/``label`` is not an int32/int64 Variable, or ``num_classes`` is not
            an int.
        ValueError: ``num_classes < 1``.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     pred = fluid.data("pred", [-1], "int32")
        ...     label = fluid.data("label", [-1], "int32")
        ...     miou, wrong, correct = fluid.layers.mean_iou(pred, label, num_classes=2)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> exe.run(main, feed={"pred": np.array([0, 1, 1, 0], "int32"),
        ...                     "label": np.array([0, 1, 0, 0], "int32")}, fetch_list=[miou])[0].round(4)
        array([0.5833], dtype=float32)
    """
    layer = "mean_iou"
    check_variable_and_dtype(input, "Predictions", ["int32", "int64"], layer)
    check_variable_and_dtype(label, "Labels", ["int32", "int64"], layer)
    num_classes = check_int(num_classes, "num_classes", layer, minimum=1)
    helper = LayerHelper(layer)
    iou = helper.create_variable_for_type_inference("float32", stop_gradient=True)
    wrong = helper.create_variable_for_type_inference("int32", stop_gradient=True)
    correct = helper.create_variable_for_type_inference("int32", stop_gradient=True)
    helper.append_op(type=layer, inputs={"Predictions": input, "Labels": label},
                     outputs={"OutMeanIou": iou, "OutWrong": wrong, "OutCorrect": correct},
                     attrs={"num_classes": num_classes})
    return iou, wrong, correct


# -- normalizations (ops/vision_norm.py) ----------------------------------------------------------
def _scale_bias_inputs(helper: LayerHelper, input: Variable, c: int) -> Dict[str, Any]:
    """``{"X", "Scale", "Bias"}`` of a normalization op: per-channel scale (init 1) and bias
    (init 0) parameters of ``[c]``, each left out when its attr is False."""
    inputs: Dict[str, Any] = {"X": input}
    scale = helper.create_parameter(attr=helper.param_attr, shape=[c], dtype=input.dtype,
                                    default_initializer=Constant(1.0))
    if scale is not None:
        inputs["Scale"] = scale
    bias = helper.create_parameter(attr=helper.bias_attr, shape=[c], dtype=input.dtype,
                                   is_bias=True, default_initializer=Constant(0.0))
    if bias is not None:
        inputs["Bias"] = bias
    return inputs


def group_norm(input: Variable, groups: int, epsilon: float = 1e-05, param_attr: Any = None,
               bias_attr: Any = None, act: Any = None, data_layout: str = "NCHW",
               name: Optional[str] = None) -> Variable:
    """Group normalization: the channels split into ``groups``; each (sample, group) is
    normalized over its channels and positions, then the per-channel scale (init 1) and bias
    (init 0) apply (``param_attr`` / ``bias_attr`` False: none), then ``act``.

    Args:
        input (Variable): ``[N, C, ...]`` map.
        groups (int): channel groups (``C`` divisible by it).
        epsilon (float, default 1e-5): added to the variance.
        param_attr (ParamAttr | str | None): the scale's attribute.
        bias_attr (ParamAttr | str | None): the bias's attribute.
        act (str | None): activation applied to the result.
        data_layout (str, default "NCHW"): the layout.
        name (str | None): name prefix of the output.
    Returns:
        Variable: normalized per sample and group, same shape.
    Raises:
        TypeError: ``input`` is not a float16/32/64 Variable, or ``groups`` is not an int.
        ValueError: ``data_layout`` is not NCHW/NHWC, ``groups < 1``, ``input`` has rank < 2 or
            an unknown channel dim, or the channels are not divisible by ``groups``.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 4, 1, 2], "float32")
        ...     out = fluid.layers.group_norm(x, groups=2)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> feed = {"x": np.arange(8, dtype="float32").reshape(1, 4, 1, 2)}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res.ravel().round(3)
        array([-1.342, -0.447,  0.447,  1.342, -1.342, -0.447,  0.447,  1.342],
              dtype=float32)
    """
    layer = "group_norm"
    _float_var(layer, input, "input")
    if data_layout not in ("NCHW", "NHWC"):
        raise ValueError(f"group_norm: data_layout must be 'NCHW' or 'NHWC', but received "
                         f"{data_layout!r}")
    groups = check_int(groups, "groups", layer, minimum=1)
    if len(input.shape) < 2:
        raise ValueError(f"group_norm: input must have rank >= 2, got {list(input.shape)}")
    c = input.shape[1] if data_layout == "NCHW" else input.shape[-1]
    if c < 0:
        raise ValueError(f"group_norm: the channel dimension of '{input.name}' must be known, "
                         f"got shape {list(input.shape)}")
    if c % groups:
        raise ValueError(f"group_norm: the channel count {c} of '{input.name}' must be "
                         f"divisible by groups {groups}")
    helper = LayerHelper(layer, param_attr=param_attr, bias_attr=bias_attr, act=act, name=name)
    inputs = _scale_bias_inputs(helper, input, c)
    mean = helper.create_variable_for_type_inference(input.dtype, stop_gradient=True)
    var = helper.create_variable_for_type_inference(input.dtype, stop_gradient=True)
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op(type=layer, inputs=inputs,
                     outputs={"Y": out, "Mean": mean, "Variance": var},
                     attrs={"epsilon": float(epsilon), "groups": groups,
                            "data_layout": data_layout})
    return helper.append_activation(out)


def instance_norm(input: Variable, epsilon: float = 1e-05, param_attr: Any = None,
                  bias_attr: Any = None, name: Optional[str] = None) -> Variable:
    """Instance normalization of ``[N, C, ...]``: each (sample, channel) normalized over its
    positions, then the per-channel scale (init 1) and bias (init 0).

    Args:
        input (Variable): ``[N, C, ...]`` map.
        epsilon (float, default 1e-5): added to the variance.
        param_attr (ParamAttr | str | None): the scale's attribute.
        bias_attr (ParamAttr | str | None): the bias's attribute.
        name (str | None): name prefix of the output.
    Returns:
        Variable: normalized per sample and channel, same shape.
    Raises:
        TypeError: ``input`` is not a float16/32/64 Variable.
        ValueError: ``input``'s rank is not 2 to 5, or its channel dim is unknown.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 1, 2, 2], "float32")
        ...     out = fluid.layers.instance_norm(x)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> feed = {"x": np.array([1, 2, 3, 4], "float32").reshape(1, 1, 2, 2)}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res.ravel().round(3)
        array([-1.342, -0.447,  0.447,  1.342], dtype=float32)
    """
    layer = "instance_norm"
    _float_var(layer, input, "input")
    if not 2 <= len(input.shape) <= 5:
        raise ValueError(f"instance_norm: input must have rank 2 to 5, but '{input.name}' has "
                         f"shape {list(input.shape)}")
    c = input.shape[1]
    if c < 0:
        raise ValueError(f"instance_norm: the channel dimension of '{input.name}' must be "
                         f"known, got shape {list(input.shape)}")
    helper = LayerHelper(layer, param_attr=param_attr, bias_attr=bias_attr, name=name)
    inputs = _scale_bias_inputs(helper, input, c)
    mean = helper.create_variable_for_type_inference(input.dtype, stop_gradient=True)
    var = helper.create_variable_for_type_inference(input.dtype, stop_gradient=True)
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op(type=layer, inputs=inputs,
                     outputs={"Y": out, "SavedMean": mean, "SavedVariance": var},
                     attrs={"epsilon": float(epsilon)})
    return out


def spectral_norm(weight: Variable, dim: int = 0, power_iters: int = 1, eps: float = 1e-12,
                  name: Optional[str] = None) -> Variable:
    """``weight / sigma``, sigma the largest singular value of ``weight`` viewed as
    ``[shape[dim], rest]``, estimated by ``power_iters`` power iterations from the persistent
    vectors U ``[shape[dim]]`` and V ``[rest]`` (Normal(0, 1) init, not trainable).

    Args:
        weight (Variable): float16/32/64 weight of known shape (rank >= 1).
        dim (int): the dim treated as rows: 0 for fc weights, 1 for conv weights. Default 0.
        power_iters (int): power iterations per call (>= 0). Default 1.
        eps (float): added to the norms for stability. Default 1e-12.
        name (str | None): name prefix of the output. Default None.
    Returns:
        Variable: ``weight / sigma``, ``weight``'s shape and dtype.
    Raises:
        TypeError: ``weight`` is not a float16/32/64 Variable, or ``dim``/``power_iters`` is not
            an int.
        ValueError: ``power_iters < 0``, ``dim`` is not in ``[0, rank)``, or ``weight`` has an
            unknown dim.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     w = fluid.layers.create_parameter([3, 4], "float32", default_initializer=fluid.initializer.NumpyArrayInitializer(
        ...         np.diag([3.0, 1.0, 0.5]).astype("float32") @ np.eye(3, 4, dtype="float32")))
        ...     out = fluid.layers.spectral_norm(w, dim=0, power_iters=20)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> res, = exe.run(main, fetch_list=[out])
        >>> round(float(np.linalg.svd(res, compute_uv=False)[0]), 3)
        1.0
    """
    layer = "spectral_norm"
    _float_var(layer, weight, "weight")
    dim = check_int(dim, "dim", layer)
    power_iters = check_int(power_iters, "power_iters", layer, minimum=0)
    shape = list(weight.shape)
    if not 0 <= dim < len(shape):
        raise ValueError(f"spectral_norm: dim must be in [0, {len(shape) - 1}], but received "
                         f"{dim}")
    if any(d < 0 for d in shape):
        raise ValueError(f"spectral_norm: the shape of '{weight.name}' must be known, got "
                         f"{shape}")
    h = shape[dim]
    w = 1
    for i, d in enumerate(shape):
        if i != dim:
            w *= d
    helper = LayerHelper(layer, name=name)
    u = helper.create_parameter(attr=ParamAttr(), shape=[h], dtype=weight.dtype,
                                default_initializer=Normal(0.0, 1.0))
    v = helper.create_parameter(attr=ParamAttr(), shape=[w], dtype=weight.dtype,
                                default_initializer=Normal(0.0, 1.0))
    for p in (u, v):
        p.stop_gradient = True
        p.trainable = False
    out = helper.create_variable_for_type_inference(weight.dtype)
    helper.append_op(type=layer, inputs={"Weight": weight, "U": u, "V": v},
                     outputs={"Out": out},
                     attrs={"dim": dim, "power_iters": power_iters, "eps": float(eps)})
    return out


def data_norm(input: Variable, act: Any = None, epsilon: float = 1e-05, param_attr: Any = None,
              data_layout: str = "NCHW", in_place: bool = False, name: Optional[str] = None,
              moving_mean_name: Optional[str] = None,
              moving_variance_name: Optional[str] = None,
              do_model_average_for_mean_and_var: bool = False) -> Variable:
    """Normalize each feature column by accumulated statistics:
    ``(x - batch_sum / batch_size) * sqrt(batch_size / batch_square_sum)``. The statistics are
    parameters ``<name>.batch_size`` (init 1e4), ``.batch_sum`` (0), ``.batch_square_sum``
    (1e4); ``param_attr`` may be a dict with ``batch_size`` / ``batch_sum`` /
    ``batch_square`` initial values, as fluid's.

    Args:
        input (Variable): ``[N, C]`` (or ``[N, C, ...]`` NCHW / ``[N, ..., C]`` NHWC) float16/32/64.
        act (str | None): activation applied to the result. Default None.
        epsilon (float): added for stability. Default 1e-5.
        param_attr (dict | None): initial ``batch_size`` / ``batch_sum`` / ``batch_square``
            values of the statistics. Default None.
        data_layout (str): ``"NCHW"`` or ``"NHWC"``. Default ``"NCHW"``.
        in_place (bool): accepted for fluid's signature. Default False.
        name (str | None): prefix of the statistics' and output's names. Default None.
        moving_mean_name (str | None): accepted for fluid's signature. Default None.
        moving_variance_name (str | None): accepted for fluid's signature. Default None.
        do_model_average_for_mean_and_var (bool): accepted for fluid's signature.
            Default False.
    Returns:
        Variable: the normalized input (then ``act``), its shape and dtype.
    Raises:
        TypeError: ``input`` is not a float16/32/64 Variable.
        ValueError: ``data_layout`` is unknown, ``input`` has rank < 2 or an unknown feature dim,
            or a ``param_attr`` value is a string ``float()`` rejects.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 2])
        ...     out = fluid.layers.data_norm(x)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> exe.run(main, feed={"x": np.array([[1, 2], [3, 4]], "float32")}, fetch_list=[out])[0].shape
        (2, 2)
    """
    layer = "data_norm"
    _float_var(layer, input, "input")
    if data_layout not in ("NCHW", "NHWC"):
        raise ValueError(f"data_norm: data_layout must be 'NCHW' or 'NHWC', but received "
                         f"{data_layout!r}")
    if len(input.shape) < 2:
        raise ValueError(f"data_norm: input must have rank >= 2, got {list(input.shape)}")
    c = input.shape[1] if data_layout == "NCHW" or len(input.shape) == 2 else input.shape[-1]
    if c < 0:
        raise ValueError(f"data_norm: the feature dimension of '{input.name}' must be known, "
                         f"got shape {list(input.shape)}")
    defaults = {"batch_size": 1e4, "batch_sum": 0.0, "batch_square": 1e4}
    if isinstance(param_attr, dict):
        defaults.update({k: float(param_attr[k]) for k in defaults if k in param_attr})
    helper = LayerHelper(layer, act=act, name=name)
    prefix = helper.name

    def stat(suffix: str, value: float) -> Variable:
        return helper.create_parameter(
            attr=ParamAttr(name=f"{prefix}.{suffix}", initializer=Constant(value),
                           trainable=True), shape=[c], dtype=input.dtype)

    size = stat("batch_size", defaults["batch_size"])
    bsum = stat("batch_sum", defaults["batch_sum"])
    square = stat("batch_square_sum", defaults["batch_square"])
    means = helper.create_variable_for_type_inference(input.dtype, stop_gradient=True)
    scales = helper.create_variable_for_type_inference(input.dtype, stop_gradient=True)
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op(type=layer, inputs={"X": input, "BatchSize": size, "BatchSum": bsum,
                                         "BatchSquareSum": square},
                     outputs={"Y": out, "Means": means, "Scales": scales},
                     attrs={"epsilon": float(epsilon), "data_layout": data_layout})
    return helper.append_activation(out)


# -- region-of-interest pooling (ops/roi.py) ------------------------------------------------------
def _roi_args(layer: str, input: Any, rois: Any, pooled_height: Any, pooled_width: Any) -> None:
    _float_var(layer, input, "input")
    check_variable_and_dtype(rois, "rois", ["float32", "float64"], layer)
    check_int(pooled_height, "pooled_height", layer, minimum=1)
    check_int(pooled_width, "pooled_width", layer, minimum=1)


def roi_align(input: Variable, rois: Variable, pooled_height: int = 1, pooled_width: int = 1,
              spatial_scale: float = 1.0, sampling_ratio: int = -1,
              name: Optional[str] = None, rois_lod: Optional[Variable] = None) -> Variable:
    """RoIAlign: each ROI (a LoD tensor ``[R, 4]``, its LoD giving the image of each ROI, or a
    plain tensor with ``rois_lod``) is split into ``pooled_height x pooled_width`` bins
    averaging bilinear samples: ``[R, C, pooled_height, pooled_width]``.

    Args:
        input (Variable): ``[N, C, H, W]`` float16/32/64 feature map.
        rois (Variable): ``[R, 4]`` float32/float64 boxes ``(x1, y1, x2, y2)`` in input-image
            coordinates, a LoD tensor whose LoD maps each box to its image.
        pooled_height (int): output bins per column (>= 1). Default 1.
        pooled_width (int): output bins per row (>= 1). Default 1.
        spatial_scale (float): factor from image to feature-map coordinates. Default 1.0.
        sampling_ratio (int): samples per bin side; <= 0: adaptive
            (``ceil(roi_size / pooled_size)``). Default -1.
        name (str | None): name prefix of the output. Default None.
        rois_lod (Variable | None): int64 ``[N + 1]`` offsets of each image's ROIs in ``rois``
            (op input ``RoisLod``, fluid 1.8), in place of the ROIs' LoD. Default None.
    Returns:
        Variable: ``[R, C, pooled_height, pooled_width]``, ``input``'s dtype.
    Raises:
        TypeError: ``input`` is not a float16/32/64 Variable, ``rois`` is not a float32/float64
            Variable, ``rois_lod`` is not an int64 Variable, or ``pooled_height`` /
            ``pooled_width`` is not an int.
        ValueError: ``pooled_height``/``pooled_width`` < 1, or ``input`` is not 4-D or ``rois``
            not ``[R, 4]`` (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 1, 4, 4])
        ...     rois = fluid.data("rois", [-1, 4], lod_level=1)
        ...     out = fluid.layers.roi_align(x, rois, pooled_height=1, pooled_width=1, sampling_ratio=2)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> rois = fluid.create_lod_tensor(np.array([[0, 0, 3, 3]], "float32"), [[1]], fluid.CPUPlace())
        >>> exe.run(main, feed={"x": np.ones((1, 1, 4, 4), "float32"), "rois": rois},
        ...         fetch_list=[out])[0].ravel()
        array([1.], dtype=float32)
    """
    _roi_args("roi_align", input, rois, pooled_height, pooled_width)
    inputs = {"X": input, "ROIs": rois}
    if rois_lod is not None:
        # fluid 1.8's kernel reads RoisLod as int64 offsets (roi_align_op.h)
        check_variable_and_dtype(rois_lod, "rois_lod", ["int64"], "roi_align")
        inputs["RoisLod"] = rois_lod
    return _simple("roi_align", "roi_align", inputs,
                   {"pooled_height": int(pooled_height), "pooled_width": int(pooled_width),
                    "spatial_scale": float(spatial_scale),
                    "sampling_ratio": int(sampling_ratio)}, input.dtype, name)


def roi_pool(input: Variable, rois: Variable, pooled_height: int = 1, pooled_width: int = 1,
             spatial_scale: float = 1.0) -> Variable:
    """RoI max pooling of each ROI (LoD tensor ``[R, 4]``) into
    ``[R, C, pooled_height, pooled_width]``.

    Args:
        input (Variable): ``[N, C, H, W]`` float16/32/64 feature map.
        rois (Variable): ``[R, 4]`` float32/float64 boxes ``(x1, y1, x2, y2)``, a LoD tensor
            whose LoD maps each box to its image.
        pooled_height (int): output bins per column (>= 1). Default 1.
        pooled_width (int): output bins per row (>= 1). Default 1.
        spatial_scale (float): factor from image to feature-map coordinates. Default 1.0.
    Returns:
        Variable: ``[R, C, pooled_height, pooled_width]``, the maximum of each bin.
    Raises:
        TypeError: ``input`` is not a float16/32/64 Variable, ``rois`` is not a float32/float64
            Variable, or ``pooled_height``/``pooled_width`` is not an int.
        ValueError: ``pooled_height``/``pooled_width`` < 1, or ``input`` is not 4-D or ``rois``
            not ``[R, 4]`` (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 1, 4, 4])
        ...     rois = fluid.data("rois", [-1, 4], lod_level=1)
        ...     out = fluid.layers.roi_pool(x, rois, pooled_height=2, pooled_width=2)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> rois = fluid.create_lod_tensor(np.array([[0, 0, 3, 3]], "float32"), [[1]], fluid.CPUPlace())
        >>> exe.run(main, feed={"x": np.arange(16, dtype="float32").reshape(1, 1, 4, 4), "rois": rois},
        ...         fetch_list=[out])[0][0, 0]
        array([[ 5.,  7.],
               [13., 15.]], dtype=float32)
    """
    _roi_args("roi_pool", input, rois, pooled_height, pooled_width)
    helper = LayerHelper("roi_pool")
    out = helper.create_variable_for_type_inference(input.dtype)
    argmax = helper.create_variable_for_type_inference("int64", stop_gradient=True)
    helper.append_op(type="roi_pool", inputs={"X": input, "ROIs": rois},
                     outputs={"Out": out, "Argmax": argmax},
                     attrs={"pooled_height": int(pooled_height),
                            "pooled_width": int(pooled_width),
                            "spatial_scale": float(spatial_scale)})
    return out


def _position_sensitive(layer: str, input: Variable, rois: Variable, output_channels: int,
                        spatial_scale: float, pooled_height: int, pooled_width: int,
                        name: Optional[str]) -> Variable:
    """The ``psroi_pool`` op, arguments checked."""
    _roi_args(layer, input, rois, pooled_height, pooled_width)
    output_channels = check_int(output_channels, "output_channels", layer, minimum=1)
    if not is_number(spatial_scale):
        raise TypeError(f"{layer}: spatial_scale must be a float, but received "
                        f"{spatial_scale!r}")
    return _simple(layer, layer, {"X": input, "ROIs": rois},
                   {"output_channels": output_channels, "spatial_scale": float(spatial_scale),
                    "pooled_height": int(pooled_height), "pooled_width": int(pooled_width)},
                   input.dtype, name)


def psroi_pool(input: Variable, rois: Variable, output_channels: int, spatial_scale: float,
               pooled_height: int, pooled_width: int, name: Optional[str] = None) -> Variable:
    """Position-sensitive RoI average pooling (R-FCN): ``input`` has
    ``output_channels * pooled_height * pooled_width`` channels; the result is
    ``[R, output_channels, pooled_height, pooled_width]``.

    Args:
        input (Variable): ``[N, output_channels * pooled_height * pooled_width, H, W]``
            float16/32/64 feature map.
        rois (Variable): ``[R, 4]`` float32/float64 boxes ``(x1, y1, x2, y2)``, a LoD tensor
            whose LoD maps each box to its image.
        output_channels (int): channels of the output (>= 1).
        spatial_scale (float): factor from image to feature-map coordinates.
        pooled_height (int): output bins per column (>= 1).
        pooled_width (int): output bins per row (>= 1).
        name (str | None): name prefix of the output. Default None.
    Returns:
        Variable: ``[R, output_channels, pooled_height, pooled_width]``, ``input``'s dtype.
    Raises:
        TypeError: ``input`` is not a float16/32/64 Variable, ``rois`` is not a float32/float64
            Variable, ``output_channels``/``pooled_height``/``pooled_width`` is not an int, or
            ``spatial_scale`` is not a number.
        ValueError: ``output_channels``/``pooled_height``/``pooled_width`` < 1, or the channels
            of ``input`` do not equal their product (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     # 4 = output_channels * 2 * 2 bins... of 1
        ...     x = fluid.data("x", [-1, 4, 4, 4])
        ...     rois = fluid.data("rois", [-1, 4], lod_level=1)
        ...     out = fluid.layers.psroi_pool(x, rois, output_channels=1, spatial_scale=1.0,
        ...                                   pooled_height=2, pooled_width=2)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> rois = fluid.create_lod_tensor(np.array([[0, 0, 3, 3]], "float32"), [[1]], fluid.CPUPlace())
        >>> exe.run(main, feed={"x": np.ones((1, 4, 4, 4), "float32"), "rois": rois}, fetch_list=[out])[0].shape
        (1, 1, 2, 2)
    """
    return _position_sensitive("psroi_pool", input, rois, output_channels, spatial_scale,
                               pooled_height, pooled_width, name)


def inplace_abn(input: Variable, act: Optional[str] = None, is_test: bool = False,
                momentum: float = 0.9, epsilon: float = 1e-05, param_attr: Any = None,
                bias_attr: Any = None, data_layout: str = "NCHW", name: Optional[str] = None,
                moving_mean_name: Optional[str] = None,
                moving_variance_name: Optional[str] = None,
                do_model_average_for_mean_and_var: bool = False,
                use_global_stats: bool = False, act_alpha: float = 1.0) -> Variable:
    """``batch_norm`` fused with its activation in one ``inplace_abn`` op (``act``: None /
    'identity', 'leaky_relu' or 'elu', slope/scale ``act_alpha``); the same parameters and
    moving statistics as ``batch_norm``. (fluid computes it in place to save memory; here the
    output is a fresh variable with the same values.)

    Args:
        input (Variable): ``[N, C, ...]`` (or channels-last) float16/32/64 map, C known.
        act (str | None): None/``"identity"``, ``"leaky_relu"`` or ``"elu"``. Default None.
        is_test (bool): use the moving statistics (inference). Default False.
        momentum (float): moving-average factor in ``[0, 1]``. Default 0.9.
        epsilon (float): added to the variance. Default 1e-5.
        param_attr (ParamAttr | str | None): the scale's attribute (init 1).
        bias_attr (ParamAttr | str | None): the bias's attribute (init 0); must not be False.
        data_layout (str): ``"NCHW"`` or ``"NHWC"``. Default ``"NCHW"``.
        name (str | None): name prefix of the output. Default None.
        moving_mean_name (str | None): the moving mean's name. Default None.
        moving_variance_name (str | None): the moving variance's name. Default None.
        do_model_average_for_mean_and_var (bool): model-average the statistics.
            Default False.
        use_global_stats (bool): normalize with the moving statistics in training too.
            Default False.
        act_alpha (float): the slope of leaky_relu / the alpha of elu. Default 1.0.
    Returns:
        Variable: the normalized and activated map, ``input``'s shape and dtype.
    Raises:
        TypeError: ``input`` is not a float16/32/64 Variable.
        ValueError: ``act`` is not one of the listed values, ``bias_attr`` is False,
            ``data_layout`` is unknown, ``momentum`` is not a number in ``[0, 1]``, or the
            channel dim is unknown.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 2, 2, 2])
        ...     y = fluid.layers.inplace_abn(x, act="leaky_relu")
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> out, = exe.run(main, feed={"x": np.random.RandomState(0).rand(4, 2, 2, 2).astype("float32")},
        ...               fetch_list=[y])
        >>> out.shape
        (4, 2, 2, 2)
    """
    layer = "inplace_abn"
    _float_var(layer, input, "input")
    act = "identity" if act is None else act
    if act not in ("identity", "leaky_relu", "elu"):
        raise ValueError(f"inplace_abn: act must be None, 'identity', 'leaky_relu' or 'elu', "
                         f"but received {act!r}")
    if bias_attr is False:
        raise ValueError("inplace_abn: bias_attr should not be False")
    if data_layout not in ("NCHW", "NHWC"):
        raise ValueError(f"inplace_abn: data_layout must be 'NCHW' or 'NHWC', but received "
                         f"{data_layout!r}")
    if not is_number(momentum) or not 0.0 <= momentum <= 1.0:
        raise ValueError(f"inplace_abn: momentum must be a number in [0, 1], but received "
                         f"{momentum!r}")
    ch = 1 if data_layout == "NCHW" else len(input.shape) - 1
    c = input.shape[ch]
    if c < 0:
        raise ValueError(f"inplace_abn: the channel dimension of '{input.name}' must be known, "
                         f"got shape {list(input.shape)}")
    helper = LayerHelper(layer, param_attr=param_attr, bias_attr=bias_attr, name=name)
    scale = helper.create_parameter(attr=helper.param_attr, shape=[c], dtype=input.dtype,
                                    default_initializer=Constant(1.0))
    bias = helper.create_parameter(attr=helper.bias_attr, shape=[c], dtype=input.dtype,
                                   is_bias=True)
    stats = []
    for stat_name, value in ((moving_mean_name, 0.0), (moving_variance_name, 1.0)):
        v = helper.create_parameter(
            attr=ParamAttr(name=stat_name, initializer=Constant(value), trainable=False,
                           do_model_average=do_model_average_for_mean_and_var),
            shape=[c], dtype=input.dtype)
        v.stop_gradient = True
        stats.append(v)
    saved_mean = helper.create_variable_for_type_inference(input.dtype, stop_gradient=True)
    saved_var = helper.create_variable_for_type_inference(input.dtype, stop_gradient=True)
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op(type=layer, inputs={"X": input, "Scale": scale, "Bias": bias,
                                         "Mean": stats[0], "Variance": stats[1]},
                     outputs={"Y": out, "MeanOut": stats[0], "VarianceOut": stats[1],
                              "SavedMean": saved_mean, "SavedVariance": saved_var},
                     attrs={"momentum": float(momentum), "epsilon": float(epsilon),
                            "is_test": bool(is_test), "data_layout": data_layout,
                            "use_global_stats": bool(use_global_stats), "activation": act,
                            "alpha": float(act_alpha)})
    return out


def deformable_conv(input: Variable, offset: Variable, mask: Optional[Variable],
                    num_filters: int, filter_size: Any, stride: Any = 1, padding: Any = 0,
                    dilation: Any = 1, groups: Optional[int] = None,
                    deformable_groups: Optional[int] = None, im2col_step: Optional[int] = None,
                    param_attr: Any = None, bias_attr: Any = None, modulated: bool = True,
                    name: Optional[str] = None) -> Variable:
    """Deformable convolution (DCN v2 with ``mask`` when ``modulated``, else v1): W is
    ``[num_filters, C/groups, kh, kw]`` (Normal(0, sqrt(2/(kh*kw*C)))), ``offset``
    ``[N, 2*deformable_groups*kh*kw, oh, ow]``, ``mask`` ``[N, deformable_groups*kh*kw, oh,
    ow]``; the bias ``[num_filters]`` is added on the channel axis.

    Args:
        input (Variable): ``[N, C, H, W]`` float16/32/64 map, C known.
        offset (Variable): ``[N, 2 * deformable_groups * kh * kw, H_out, W_out]`` offsets.
        mask (Variable | None): ``[N, deformable_groups * kh * kw, H_out, W_out]`` modulation
            (required when ``modulated``; ignored otherwise).
        num_filters (int): output channels (>= 1).
        filter_size (int | list of 2 ints): kernel size ``[kh, kw]``.
        stride (int | list of 2 ints): window step. Default 1.
        padding (int | list of 2 ints): zero padding. Default 0.
        dilation (int | list of 2 ints): spacing of the kernel taps. Default 1.
        groups (int | None): channel groups (None: 1). Default None.
        deformable_groups (int | None): offset groups (None: 1). Default None.
        im2col_step (int | None): images per im2col step (None: 64). Default None.
        param_attr (ParamAttr | str | None): the filter's attribute.
        bias_attr (ParamAttr | str | bool | None): the bias's attribute; ``False``: no bias.
        modulated (bool): True: DCN v2 with ``mask``; False: v1 without. Default True.
        name (str | None): name prefix of the output. Default None.
    Returns:
        Variable: ``[N, num_filters, H_out, W_out]``, ``input``'s dtype.
    Raises:
        TypeError: ``input``/``offset`` (or, when ``modulated``, ``mask``) is not a
            float16/32/64 Variable, an int argument is not an int, or a size argument is not an
            int or list of 2 ints.
        ValueError: ``input`` is not 4-D or its channel dim is unknown, ``num_filters``/
            ``groups``/``deformable_groups`` < 1, the channels are not divisible by ``groups``,
            or ``offset``/``mask`` do not match the output size (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 1, 4, 4])
        ...     # 2 * 3 * 3 offsets per position
        ...     offset = fluid.data("offset", [-1, 18, 4, 4])
        ...     mask = fluid.data("mask", [-1, 9, 4, 4])
        ...     out = fluid.layers.deformable_conv(x, offset, mask, num_filters=2, filter_size=3, padding=1)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> feed = {"x": np.ones((1, 1, 4, 4), "float32"), "offset": np.zeros((1, 18, 4, 4), "float32"),
        ...         "mask": np.ones((1, 9, 4, 4), "float32")}
        >>> exe.run(main, feed=feed, fetch_list=[out])[0].shape
        (1, 2, 4, 4)
    """
    layer = "deformable_conv"
    _float_var(layer, input, "input")
    _float_var(layer, offset, "offset")
    if modulated:
        _float_var(layer, mask, "mask")
    _rank(layer, input, 4, "input")
    C = input.shape[1]
    if C < 0:
        raise ValueError(f"{layer}: the channel dimension of '{input.name}' must be known, got "
                         f"shape {list(input.shape)}")
    num_filters = check_int(num_filters, "num_filters", layer, minimum=1)
    groups = 1 if groups is None else check_int(groups, "groups", layer, minimum=1)
    dg = 1 if deformable_groups is None else check_int(deformable_groups,
                                                       "deformable_groups", layer, minimum=1)
    if C % groups:
        raise ValueError(f"{layer}: the channel count {C} must be divisible by groups {groups}")
    filter_size = _to_list(filter_size, 2, "filter_size", layer)
    helper = LayerHelper(layer, param_attr=param_attr, bias_attr=bias_attr, name=name)
    std = (2.0 / (filter_size[0] * filter_size[1] * C)) ** 0.5
    w = helper.create_parameter(attr=helper.param_attr,
                                shape=[num_filters, C // groups] + filter_size,
                                dtype=input.dtype, default_initializer=Normal(0.0, std, 0))
    attrs = {"strides": _to_list(stride, 2, "stride", layer),
             "paddings": _to_list(padding, 2, "padding", layer),
             "dilations": _to_list(dilation, 2, "dilation", layer), "groups": groups,
             "deformable_groups": dg, "im2col_step": 64 if im2col_step is None
             else int(im2col_step)}
    inputs: Dict[str, Any] = {"Input": input, "Filter": w, "Offset": offset}
    if modulated:
        inputs["Mask"] = mask
    pre_bias = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op(type="deformable_conv" if modulated else "deformable_conv_v1",
                     inputs=inputs, outputs={"Output": pre_bias}, attrs=attrs)
    return helper.append_bias_op(pre_bias, dim_start=1, dim_end=2)


def prroi_pool(input: Variable, rois: Variable, spatial_scale: float = 1.0,
               pooled_height: int = 1, pooled_width: int = 1,
               batch_roi_nums: Optional[Variable] = None,
               name: Optional[str] = None) -> Variable:
    """Precise RoI pooling (fluid 1.8): each bin is the exact integral of the bilinear
    interpolant of the feature map over the bin divided by its area, per channel;
    ``[R, C, pooled_height, pooled_width]``.

    Args:
        input (Variable): ``[N, C, H, W]`` float16/32/64 feature map.
        rois (Variable): ``[R, 4]`` float32/float64 boxes ``(x1, y1, x2, y2)``, a LoD tensor
            whose LoD maps each box to its image (or a plain tensor with ``batch_roi_nums``).
        spatial_scale (float): factor from image to feature-map coordinates. Default 1.0.
        pooled_height (int): output bins per column (>= 1). Default 1.
        pooled_width (int): output bins per row (>= 1). Default 1.
        batch_roi_nums (Variable | None): int64 ``[N]``, the number of ROIs of each image
            (op input ``BatchRoINums``), in place of the ROIs' LoD. Default None.
        name (str | None): name prefix of the output. Default None.
    Returns:
        Variable: ``[R, C, pooled_height, pooled_width]``, ``input``'s dtype.
    Raises:
        TypeError: ``input`` is not a float16/32/64 Variable, ``rois`` is not a float32/float64
            Variable, ``batch_roi_nums`` is not an int64 Variable, ``pooled_height`` /
            ``pooled_width`` is not an int, or ``spatial_scale`` is not a float (an int is
            refused, as in fluid 1.8).
        ValueError: ``pooled_height``/``pooled_width`` < 1, or ``input`` is not 4-D or ``rois``
            not ``[R, 4]`` (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 1, 4, 4])
        ...     rois = fluid.data("rois", [-1, 4], lod_level=1)
        ...     out = fluid.layers.prroi_pool(x, rois, 1.0, 1, 1)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> rois = fluid.create_lod_tensor(np.array([[0.5, 0.5, 2.5, 2.5]], "float32"), [[1]],
        ...                              fluid.CPUPlace())
        >>> exe.run(main, feed={"x": np.ones((1, 1, 4, 4), "float32"), "rois": rois},
        ...         fetch_list=[out])[0].ravel()             # the mean of the interpolated map
        array([1.], dtype=float32)
    """
    layer = "prroi_pool"
    _roi_args(layer, input, rois, pooled_height, pooled_width)
    if not isinstance(spatial_scale, (float, np.floating)):     # fluid 1.8 refuses an int too
        raise TypeError(f"{layer}: spatial_scale must be a float, but received "
                        f"{spatial_scale!r} of type {type(spatial_scale).__name__}")
    inputs = {"X": input, "ROIs": rois}
    if batch_roi_nums is not None:
        # fluid 1.8's kernel reads BatchRoINums as int64 counts (prroi_pool_op.h)
        check_variable_and_dtype(batch_roi_nums, "batch_roi_nums", ["int64"], layer)
        inputs["BatchRoINums"] = batch_roi_nums
    return _simple(layer, layer, inputs,
                   {"spatial_scale": float(spatial_scale), "pooled_height": int(pooled_height),
                    "pooled_width": int(pooled_width)}, input.dtype, name)


def deformable_roi_pooling(input: Variable, rois: Variable, trans: Variable,
                           no_trans: bool = False, spatial_scale: float = 1.0,
                           group_size: Any = [1, 1], pooled_height: int = 1,
                           pooled_width: int = 1, part_size: Any = None,
                           sample_per_part: int = 1, trans_std: float = 0.1,
                           position_sensitive: bool = False,
                           name: Optional[str] = None) -> Variable:
    """Deformable RoI pooling (DCN): each bin, shifted by the learned ``trans`` offsets,
    averages ``sample_per_part``² bilinear samples; ``position_sensitive`` reads
    ``C / (pooled_height * pooled_width)`` output channels position-sensitively. Op
    ``deformable_psroi_pooling``.

    Args:
        input (Variable): ``[N, C, H, W]`` float16/32/64 feature map, C known.
        rois (Variable): ``[R, 4]`` float32/float64 boxes, a LoD tensor whose LoD maps each box
            to its image.
        trans (Variable): ``[R, 2, part_h, part_w]`` offsets of the bins (float16/32/64).
        no_trans (bool): ignore ``trans`` (plain RoI pooling). Default False.
        spatial_scale (float): factor from image to feature-map coordinates. Default 1.0.
        group_size (int | list of 2 ints): channel groups ``[gh, gw]`` of position-sensitive
            pooling. Default ``[1, 1]``.
        pooled_height (int): output bins per column (>= 1). Default 1.
        pooled_width (int): output bins per row (>= 1). Default 1.
        part_size (int | list of 2 ints | None): ``[part_h, part_w]`` of ``trans``; None:
            ``[pooled_height, pooled_width]``. Default None.
        sample_per_part (int): samples per bin side. Default 1.
        trans_std (float): factor applied to ``trans``. Default 0.1.
        position_sensitive (bool): read ``C / (pooled_height * pooled_width)`` output channels
            position-sensitively. Default False.
        name (str | None): name prefix of the output. Default None.
    Returns:
        Variable: ``[R, C_out, pooled_height, pooled_width]``, ``C_out`` = C, or
        ``C / (pooled_height * pooled_width)`` when ``position_sensitive``.
    Raises:
        TypeError: ``input``/``trans`` is not a float16/32/64 Variable, ``rois`` is not a
            float32/float64 Variable, ``pooled_height``/``pooled_width`` is not an int, or
            ``part_size``/``group_size`` is not an int or list of 2 ints.
        ValueError: ``pooled_height``/``pooled_width`` < 1, the channel dim is unknown, or a
            shape does not match (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 2, 4, 4])
        ...     rois = fluid.data("rois", [-1, 4], lod_level=1)
        ...     trans = fluid.data("trans", [-1, 2, 2, 2])
        ...     out = fluid.layers.deformable_roi_pooling(x, rois, trans, no_trans=True, pooled_height=2,
        ...                                               pooled_width=2, part_size=[2, 2])
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> rois = fluid.create_lod_tensor(np.array([[0, 0, 3, 3]], "float32"), [[1]], fluid.CPUPlace())
        >>> feed = {"x": np.ones((1, 2, 4, 4), "float32"), "rois": rois,
        ...         "trans": np.zeros((1, 2, 2, 2), "float32")}
        >>> exe.run(main, feed=feed, fetch_list=[out])[0].shape
        (1, 2, 2, 2)
    """
    layer = "deformable_roi_pooling"
    _roi_args(layer, input, rois, pooled_height, pooled_width)
    _float_var(layer, trans, "trans")
    c = input.shape[1]
    if c < 0:
        raise ValueError(f"{layer}: the channel dimension of '{input.name}' must be known, got "
                         f"shape {list(input.shape)}")
    out_dim = c // (pooled_height * pooled_width) if position_sensitive else c
    part_size = [pooled_height, pooled_width] if part_size is None else \
        _to_list(part_size, 2, "part_size", layer)
    group_size = _to_list(group_size, 2, "group_size", layer)
    helper = LayerHelper(layer, name=name)
    out = helper.create_variable_for_type_inference(input.dtype)
    count = helper.create_variable_for_type_inference(input.dtype, stop_gradient=True)
    helper.append_op(type="deformable_psroi_pooling",
                     inputs={"Input": input, "ROIs": rois, "Trans": trans},
                     outputs={"Output": out, "TopCount": count},
                     attrs={"no_trans": bool(no_trans), "spatial_scale": float(spatial_scale),
                            "output_dim": int(out_dim), "group_size": group_size,
                            "pooled_height": int(pooled_height),
                            "pooled_width": int(pooled_width), "part_size": part_size,
                            "sample_per_part": int(sample_per_part),
                            "trans_std": float(trans_std)})
    return out
