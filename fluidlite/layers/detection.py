"""Detection layers of fluid 1.8 (``fluid.layers.prior_box`` ... ``ssd_loss``), with fluid's
signatures, built on the ops of ``fluidlite/ops/detection.py`` and ``ops/roi.py``. Composite
layers (``detection_output``, ``ssd_loss``, ``multi_box_head``) append the same ops, in the same
order, as fluid 1.8's Python implementations."""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..core.ir import Variable
from ..pipeline.feeder import check_type, check_variable_and_dtype
from ..layer_helper import LayerHelper, is_int, is_number

__all__ = ["prior_box", "density_prior_box", "anchor_generator", "box_coder", "box_clip",
           "iou_similarity", "bipartite_match", "target_assign", "multiclass_nms", "yolo_box",
           "detection_output", "ssd_loss", "multi_box_head", "yolov3_loss",
           "generate_proposals", "distribute_fpn_proposals", "collect_fpn_proposals",
           "box_decoder_and_assign", "polygon_box_transform", "detection_map",
           "locality_aware_nms", "retinanet_detection_output", "rpn_target_assign",
           "retinanet_target_assign", "generate_proposal_labels",
           "roi_perspective_transform", "generate_mask_labels", "matrix_nms"]

_FLOATS = ["float32", "float64"]


def _listify(value: Any) -> List[Any]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _floats(value: Any, arg: str, layer: str) -> List[float]:
    out = _listify(value)
    if not all(is_number(v) for v in out):
        raise TypeError(f"{layer}: {arg} must be a number or a list of numbers, but received "
                        f"{value!r}")
    return [float(v) for v in out]


def _pair(value: Any, arg: str, layer: str, what: str) -> List[float]:
    if not (isinstance(value, (list, tuple)) and len(value) == 2):
        raise ValueError(f"{layer}: {arg} should be a list or tuple with length 2, {what}; "
                         f"received {value!r}")
    return _floats(value, arg, layer)


def _outputs(helper: LayerHelper, dtype: Any, n: int) -> List[Variable]:
    return [helper.create_variable_for_type_inference(dtype, stop_gradient=True)
            for _ in range(n)]


# -- priors ---------------------------------------------------------------------------------------
def prior_box(input: Variable, image: Variable, min_sizes: Any, max_sizes: Any = None,
              aspect_ratios: Any = [1.0], variance: Sequence[float] = [0.1, 0.1, 0.2, 0.2],
              flip: bool = False, clip: bool = False, steps: Sequence[float] = [0.0, 0.0],
              offset: float = 0.5, name: Optional[str] = None,
              min_max_aspect_ratios_order: bool = False) -> Tuple[Variable, Variable]:
    """SSD prior boxes of the feature map ``input`` for the image ``image`` (both NCHW): returns
    ``(boxes, variances)``, each ``[H, W, num_priors, 4]`` (see the ``prior_box`` op).

    Args:
        input (Variable): ``[N, C, H, W]`` feature map (uint8/int8/float32/float64).
        image (Variable): ``[N, C, H_img, W_img]`` input image (its size scales the boxes).
        min_sizes (float | list of float): the minimum box sizes, in pixels.
        max_sizes (float | list of float | None): the maximum box sizes (one per min size, each
            larger); None or a non-positive first value: none. Default None.
        aspect_ratios (float | list of float): the box aspect ratios. Default ``[1.0]``.
        variance (list of 4 floats): the variances written per box.
            Default ``[0.1, 0.1, 0.2, 0.2]``.
        flip (bool): also use the reciprocal of each aspect ratio. Default False.
        clip (bool): clip the boxes to ``[0, 1]``. Default False.
        steps (list of 2 floats): ``[step_w, step_h]`` between box centers; 0: image size /
            feature size. Default ``[0.0, 0.0]``.
        offset (float): center offset within a cell. Default 0.5.
        name (str | None): name prefix of the outputs. Default None.
        min_max_aspect_ratios_order (bool): order the priors as Caffe's min, max, then aspect
            ratios. Default False.
    Returns:
        tuple(Variable, Variable): ``(boxes, variances)``, each ``[H, W, num_priors, 4]`` in
        ``input``'s dtype; boxes are normalized ``(xmin, ymin, xmax, ymax)``.
    Raises:
        TypeError: ``input`` is not a Variable of a listed dtype, ``image`` is not a Variable, or
            a size/ratio/variance argument is not a number or list of numbers.
        ValueError: ``steps`` is not a list/tuple of 2 numbers, or (shape inference) the inputs
            are not 4-D, a max size does not exceed its min size, or ``variance`` does not have
            4 values.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     feat = fluid.data("feat", [-1, 8, 2, 2])
        ...     img = fluid.data("img", [-1, 3, 16, 16])
        ...     boxes, variances = fluid.layers.prior_box(feat, img, min_sizes=[4.0], aspect_ratios=[1.0])
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> b, = exe.run(main, feed={"feat": np.ones((1, 8, 2, 2), "float32"),
        ...                         "img": np.ones((1, 3, 16, 16), "float32")}, fetch_list=[boxes])
        >>> b.shape, b[0, 0, 0]
        ((2, 2, 1, 4), array([0.125, 0.125, 0.375, 0.375], dtype=float32))
    """
    layer = "prior_box"
    check_variable_and_dtype(input, "input", ["uint8", "int8", "float32", "float64"], layer)
    check_type(image, "image", Variable, layer)
    min_sizes = _floats(min_sizes, "min_sizes", layer)
    aspect_ratios = _floats(aspect_ratios, "aspect_ratios", layer)
    steps = _pair(steps, "steps", layer, "(step_width, step_height)")
    attrs: Dict[str, Any] = {"min_sizes": min_sizes, "aspect_ratios": aspect_ratios,
                             "variances": _floats(variance, "variance", layer), "flip": flip,
                             "clip": clip, "step_w": steps[0], "step_h": steps[1],
                             "offset": float(offset),
                             "min_max_aspect_ratios_order": min_max_aspect_ratios_order}
    if max_sizes is not None:
        max_sizes = _floats(max_sizes, "max_sizes", layer)
        if max_sizes and max_sizes[0] > 0:
            attrs["max_sizes"] = max_sizes
    helper = LayerHelper(layer, name=name)
    box, var = _outputs(helper, input.dtype, 2)
    helper.append_op(type=layer, inputs={"Input": input, "Image": image},
                     outputs={"Boxes": box, "Variances": var}, attrs=attrs)
    return box, var


def density_prior_box(input: Variable, image: Variable, densities: Any = None,
                      fixed_sizes: Any = None, fixed_ratios: Any = None,
                      variance: Sequence[float] = [0.1, 0.1, 0.2, 0.2], clip: bool = False,
                      steps: Sequence[float] = [0.0, 0.0], offset: float = 0.5,
                      flatten_to_2d: bool = False,
                      name: Optional[str] = None) -> Tuple[Variable, Variable]:
    """Density prior boxes (see the ``density_prior_box`` op): ``(boxes, variances)``,
    ``[H, W, num_priors, 4]`` or ``[H*W*num_priors, 4]`` with ``flatten_to_2d``.

    Args:
        input (Variable): ``[N, C, H, W]`` float32/float64 feature map.
        image (Variable): ``[N, C, H_img, W_img]`` input image.
        densities (list of int): the density of each fixed size (required despite the None
            default).
        fixed_sizes (list of float): the box sizes, one per density (required).
        fixed_ratios (list of float): the aspect ratios applied to every fixed size (required).
        variance (list of 4 floats): the variances written per box.
            Default ``[0.1, 0.1, 0.2, 0.2]``.
        clip (bool): clip the boxes to ``[0, 1]``. Default False.
        steps (list of 2 floats): ``[step_w, step_h]``; 0: image size / feature size.
            Default ``[0.0, 0.0]``.
        offset (float): center offset within a cell. Default 0.5.
        flatten_to_2d (bool): return ``[H * W * num_priors, 4]`` instead. Default False.
        name (str | None): name prefix of the outputs. Default None.
    Returns:
        tuple(Variable, Variable): ``(boxes, variances)``, ``[H, W, num_priors, 4]`` (or
        ``[H * W * num_priors, 4]``), ``input``'s dtype.
    Raises:
        TypeError: ``input`` is not a float32/float64 Variable, ``image`` is not a Variable,
            ``densities``/``fixed_sizes``/``fixed_ratios`` is not a list or tuple, a density is
            not an int, or a size/ratio/variance is not a number.
        ValueError: ``densities`` and ``fixed_sizes`` differ in length, ``steps`` is not 2
            numbers, or the inputs are not 4-D (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     feat = fluid.data("feat", [-1, 4, 2, 2])
        ...     img = fluid.data("img", [-1, 3, 8, 8])
        ...     boxes, variances = fluid.layers.density_prior_box(feat, img, densities=[2], fixed_sizes=[4.0],
        ...                                                       fixed_ratios=[1.0])
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> b, = exe.run(main, feed={"feat": np.ones((1, 4, 2, 2), "float32"),
        ...                         "img": np.ones((1, 3, 8, 8), "float32")}, fetch_list=[boxes])
        >>> b.shape
        (2, 2, 4, 4)
    """
    layer = "density_prior_box"
    check_variable_and_dtype(input, "input", _FLOATS, layer)
    check_type(image, "image", Variable, layer)
    for arg, v in (("densities", densities), ("fixed_sizes", fixed_sizes),
                   ("fixed_ratios", fixed_ratios)):
        if not isinstance(v, (list, tuple)):
            raise TypeError(f"{layer}: {arg} should be a list or a tuple, but received "
                            f"{v!r}")
    if len(densities) != len(fixed_sizes):
        raise ValueError(f"{layer}: densities and fixed_sizes length should be equal, got "
                         f"{len(densities)} and {len(fixed_sizes)}")
    if not all(is_int(d) for d in densities):
        raise TypeError(f"{layer}: densities must be ints, but received {densities!r}")
    steps = _pair(steps, "steps", layer, "(step_width, step_height)")
    helper = LayerHelper(layer, name=name)
    box, var = _outputs(helper, input.dtype, 2)
    helper.append_op(type=layer, inputs={"Input": input, "Image": image},
                     outputs={"Boxes": box, "Variances": var},
                     attrs={"variances": _floats(variance, "variance", layer), "clip": clip,
                            "step_w": steps[0], "step_h": steps[1], "offset": float(offset),
                            "densities": [int(d) for d in densities],
                            "fixed_sizes": _floats(fixed_sizes, "fixed_sizes", layer),
                            "fixed_ratios": _floats(fixed_ratios, "fixed_ratios", layer),
                            "flatten_to_2d": flatten_to_2d})
    return box, var


def anchor_generator(input: Variable, anchor_sizes: Any = None, aspect_ratios: Any = None,
                     variance: Sequence[float] = [0.1, 0.1, 0.2, 0.2], stride: Any = None,
                     offset: float = 0.5,
                     name: Optional[str] = None) -> Tuple[Variable, Variable]:
    """Faster R-CNN anchors of the feature map ``input``: ``(anchors, variances)``,
    ``[H, W, len(aspect_ratios) * len(anchor_sizes), 4]`` in pixels.

    Args:
        input (Variable): ``[N, C, H, W]`` float32/float64 feature map.
        anchor_sizes (float | list of float): the anchor sizes in pixels (required).
        aspect_ratios (float | list of float): the height/width ratios (required).
        variance (list of 4 floats): the variances written per anchor.
            Default ``[0.1, 0.1, 0.2, 0.2]``.
        stride (list of 2 floats): ``[stride_w, stride_h]`` of the feature map in pixels
            (required).
        offset (float): center offset within a cell. Default 0.5.
        name (str | None): name prefix of the outputs. Default None.
    Returns:
        tuple(Variable, Variable): ``(anchors, variances)``, each
        ``[H, W, len(anchor_sizes) * len(aspect_ratios), 4]``, ``input``'s dtype.
    Raises:
        TypeError: ``input`` is not a float32/float64 Variable, or a size/ratio/variance/stride
            is not a number.
        ValueError: ``anchor_sizes`` or ``aspect_ratios`` is None, ``stride`` is not a
            list/tuple of 2, or ``input`` is not 4-D (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     feat = fluid.data("feat", [-1, 4, 2, 2])
        ...     anchors, variances = fluid.layers.anchor_generator(feat, anchor_sizes=[32.0], aspect_ratios=[1.0],
        ...                                                        stride=[16.0, 16.0])
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> a, = exe.run(main, feed={"feat": np.ones((1, 4, 2, 2), "float32")}, fetch_list=[anchors])
        >>> a.shape, a[0, 0, 0]                                 # [H, W, anchors, 4]
        ((2, 2, 1, 4), array([-8., -8., 23., 23.], dtype=float32))
    """
    layer = "anchor_generator"
    check_variable_and_dtype(input, "input", _FLOATS, layer)
    if anchor_sizes is None or aspect_ratios is None:
        raise ValueError(f"{layer}: anchor_sizes and aspect_ratios must be given")
    stride = _pair(stride, "stride", layer, "(stride_width, stride_height)")
    helper = LayerHelper(layer, name=name)
    anchor, var = _outputs(helper, input.dtype, 2)
    helper.append_op(type=layer, inputs={"Input": input},
                     outputs={"Anchors": anchor, "Variances": var},
                     attrs={"anchor_sizes": _floats(anchor_sizes, "anchor_sizes", layer),
                            "aspect_ratios": _floats(aspect_ratios, "aspect_ratios", layer),
                            "variances": _floats(variance, "variance", layer),
                            "stride": stride, "offset": float(offset)})
    return anchor, var


# -- box arithmetic -------------------------------------------------------------------------------
def box_coder(prior_box: Variable, prior_box_var: Any, target_box: Variable,
              code_type: str = "encode_center_size", box_normalized: bool = True,
              name: Optional[str] = None, axis: int = 0) -> Variable:
    """Encode ``target_box`` against ``prior_box`` (``encode_center_size``) or decode
    predicted offsets (``decode_center_size``); ``prior_box_var`` is a Variable ``[M, 4]``, a
    list of 4 variances, or None (see the ``box_coder`` op).

    Args:
        prior_box (Variable): ``[M, 4]`` float32/float64 prior boxes ``(xmin, ymin, xmax, ymax)``.
        prior_box_var (Variable | list of 4 floats | None): ``[M, 4]`` variances, one list for
            all priors, or None (no variance).
        target_box (Variable): encode: ``[N, 4]`` boxes; decode: ``[N, M, 4]`` offsets
            (float32/float64, LoD allowed).
        code_type (str): ``"encode_center_size"`` or ``"decode_center_size"``.
            Default ``"encode_center_size"``.
        box_normalized (bool): the boxes are normalized (else pixel boxes, +1 in widths).
            Default True.
        name (str | None): name prefix of the output. Default None.
        axis (int): decode: the axis of ``target_box`` that ``prior_box`` broadcasts along (0 or
            1). Default 0.
    Returns:
        Variable: encode: ``[N, M, 4]`` offsets; decode: ``[N, M, 4]`` boxes; ``prior_box``'s
        dtype.
    Raises:
        TypeError: ``prior_box``/``target_box`` is not a float32/float64 Variable, or
            ``prior_box_var`` is not a Variable, list or None (or holds non-numbers).
        ValueError: ``code_type`` is unknown, or (shape inference) the shapes do not suit the
            code type or a variance list does not have 4 values.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     prior = fluid.data("prior", [-1, 4])
        ...     target = fluid.data("target", [-1, 4])
        ...     enc = fluid.layers.box_coder(prior, [0.1, 0.1, 0.2, 0.2], target, code_type="encode_center_size")
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> exe.run(main, feed={"prior": np.array([[0, 0, 10, 10]], "float32"),
        ...                     "target": np.array([[0, 0, 10, 10]], "float32")}, fetch_list=[enc])[0]
        array([[[0., 0., 0., 0.]]], dtype=float32)
    """
    layer = "box_coder"
    check_variable_and_dtype(prior_box, "prior_box", _FLOATS, layer)
    check_variable_and_dtype(target_box, "target_box", _FLOATS, layer)
    if code_type not in ("encode_center_size", "decode_center_size"):
        raise ValueError(f"{layer}: code_type must be 'encode_center_size' or "
                         f"'decode_center_size', but received {code_type!r}")
    inputs: Dict[str, Any] = {"PriorBox": prior_box, "TargetBox": target_box}
    attrs: Dict[str, Any] = {"code_type": code_type, "box_normalized": box_normalized,
                             "axis": axis}
    if isinstance(prior_box_var, Variable):
        inputs["PriorBoxVar"] = prior_box_var
    elif isinstance(prior_box_var, (list, tuple)):
        attrs["variance"] = _floats(prior_box_var, "prior_box_var", layer)
    elif prior_box_var is not None:
        raise TypeError(f"{layer}: the variance (prior_box_var) must be a Variable or a list, "
                        f"but received {type(prior_box_var).__name__}")
    helper = LayerHelper(layer, name=name)
    out = helper.create_variable_for_type_inference(prior_box.dtype)
    helper.append_op(type=layer, inputs=inputs, outputs={"OutputBox": out}, attrs=attrs)
    return out


def box_clip(input: Variable, im_info: Variable, name: Optional[str] = None) -> Variable:
    """Clip boxes to their image: ``[0, w/scale - 1] x [0, h/scale - 1]`` with
    ``im_info = (h, w, scale)`` per image (the image of each box row is given by the LoD).

    Args:
        input (Variable): ``[..., 4]`` boxes.
        im_info (Variable): ``[N, 3]`` image height, width and scale.
        name (str | None): name prefix of the output.
    Returns:
        Variable: the boxes clipped to the (unscaled) image.
    Raises:
        TypeError: ``input`` or ``im_info`` is not a float32/float64 Variable.
        ValueError: the last dim of ``input`` is not 4, or ``im_info`` is not ``[N, 3]``
            (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     boxes = fluid.data("boxes", [-1, 4])
        ...     im_info = fluid.data("im_info", [-1, 3])              # height, width, scale
        ...     out = fluid.layers.box_clip(boxes, im_info)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> exe.run(main, feed={"boxes": np.array([[-5, 2, 120, 50]], "float32"),
        ...                     "im_info": np.array([[100, 100, 1]], "float32")}, fetch_list=[out])[0]
        array([[ 0.,  2., 99., 50.]], dtype=float32)
    """
    layer = "box_clip"
    check_variable_and_dtype(input, "input", _FLOATS, layer)
    check_variable_and_dtype(im_info, "im_info", _FLOATS, layer)
    helper = LayerHelper(layer, name=name)
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op(type=layer, inputs={"Input": input, "ImInfo": im_info},
                     outputs={"Output": out})
    return out


def iou_similarity(x: Variable, y: Variable, box_normalized: bool = True,
                   name: Optional[str] = None) -> Variable:
    """IoU ``[N, M]`` of the boxes ``x`` ``[N, 4]`` with ``y`` ``[M, 4]``.

    Args:
        x (Variable): ``[N, 4]`` boxes (x1, y1, x2, y2).
        y (Variable): ``[M, 4]`` boxes.
        box_normalized (bool, default True): coordinates are normalized (else pixel boxes,
            +1 in widths).
        name (str | None): name prefix of the output.
    Returns:
        Variable: ``[N, M]`` intersection over union.
    Raises:
        TypeError: ``x`` or ``y`` is not a float32/float64 Variable.
        ValueError: ``x``/``y`` are not ``[N, 4]``/``[M, 4]`` (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     a = fluid.data("a", [-1, 4])
        ...     b = fluid.data("b", [-1, 4])
        ...     iou = fluid.layers.iou_similarity(a, b)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> exe.run(main, feed={"a": np.array([[0, 0, 2, 2]], "float32"),
        ...                     "b": np.array([[1, 1, 3, 3], [0, 0, 2, 2]], "float32")},
        ...         fetch_list=[iou])[0].round(4)
        array([[0.1429, 1.    ]], dtype=float32)
    """
    layer = "iou_similarity"
    check_variable_and_dtype(x, "x", _FLOATS, layer)
    check_variable_and_dtype(y, "y", _FLOATS, layer)
    helper = LayerHelper(layer, name=name)
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op(type=layer, inputs={"X": x, "Y": y}, outputs={"Out": out},
                     attrs={"box_normalized": box_normalized})
    return out


# -- matching -------------------------------------------------------------------------------------
def bipartite_match(dist_matrix: Variable, match_type: Optional[str] = None,
                    dist_threshold: Optional[float] = None,
                    name: Optional[str] = None) -> Tuple[Variable, Variable]:
    """Greedy bipartite matching of each instance's rows (a LoD sequence of ``dist_matrix``)
    to the columns: ``(match_indices int32 [N, M], match_distance [N, M])``.

    Args:
        dist_matrix (Variable): ``[K, M]`` float32/float64 distances (a LoD tensor: each
            sequence holds one instance's rows).
        match_type (str | None): ``"bipartite"`` (None) or ``"per_prediction"`` (also match the
            remaining columns whose best distance reaches ``dist_threshold``). Default None.
        dist_threshold (float | None): the ``per_prediction`` threshold (the op's default 0.5
            when None). Default None.
        name (str | None): name prefix of the outputs. Default None.
    Returns:
        tuple(Variable, Variable): ``(match_indices, match_distance)``, ``[N, M]``: the matched
        row per column (int32, -1: unmatched) and its distance.
    Raises:
        TypeError: ``dist_matrix`` is not a float32/float64 Variable.
        ValueError: ``match_type`` is unknown, ``dist_threshold`` is a string ``float()``
            rejects, or ``dist_matrix`` is not 2-D (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     dist = fluid.data("dist", [-1, 3], lod_level=1)
        ...     idx, d = fluid.layers.bipartite_match(dist)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> t = fluid.create_lod_tensor(np.array([[0.9, 0.1, 0.3], [0.2, 0.8, 0.4]], "float32"), [[2]],
        ...                             fluid.CPUPlace())
        >>> exe.run(main, feed={"dist": t}, fetch_list=[idx])[0]       # column -> matched row
        array([[ 0,  1, -1]], dtype=int32)
    """
    layer = "bipartite_match"
    check_variable_and_dtype(dist_matrix, "dist_matrix", _FLOATS, layer)
    attrs: Dict[str, Any] = {}
    if match_type is not None:
        if match_type not in ("bipartite", "per_prediction"):
            raise ValueError(f"{layer}: match_type must be 'bipartite' or 'per_prediction', "
                             f"but received {match_type!r}")
        attrs["match_type"] = match_type
    if dist_threshold is not None:
        attrs["dist_threshold"] = float(dist_threshold)
    helper = LayerHelper(layer, name=name)
    idx = helper.create_variable_for_type_inference("int32", stop_gradient=True)
    dist = helper.create_variable_for_type_inference(dist_matrix.dtype, stop_gradient=True)
    helper.append_op(type=layer, inputs={"DistMat": dist_matrix},
                     outputs={"ColToRowMatchIndices": idx, "ColToRowMatchDist": dist},
                     attrs=attrs)
    return idx, dist


def target_assign(input: Variable, matched_indices: Variable,
                  negative_indices: Optional[Variable] = None, mismatch_value: Any = None,
                  name: Optional[str] = None) -> Tuple[Variable, Variable]:
    """Gather the matched rows of ``input`` (``[rows, P, K]``, LoD per instance) for every
    column of ``matched_indices``: ``(out [N, M, K], out_weight [N, M, 1])``; unmatched
    entries get ``mismatch_value`` (weight 0), ``negative_indices`` entries weight 1.

    Args:
        input (Variable): ``[rows, P, K]`` LoD tensor of per-instance targets.
        matched_indices (Variable): ``[N, M]`` int32 row index per column (-1: unmatched).
        negative_indices (Variable | None): ``[Neg, 1]`` int32 LoD tensor of negative columns
            (weight 1, value ``mismatch_value``). Default None.
        mismatch_value (number | None): the value of unmatched entries (None: 0). Default None.
        name (str | None): name prefix of the outputs. Default None.
    Returns:
        tuple(Variable, Variable): ``(out, out_weight)``: ``[N, M, K]`` in ``input``'s dtype and
        ``[N, M, 1]`` float32 weights.
    Raises:
        TypeError: ``input`` is not a Variable, or ``matched_indices`` is not an int32 Variable.
        ValueError: ``matched_indices`` is not 2-D or ``input`` not 3-D (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 1, 1], lod_level=1)         # [gt rows, 1, K]
        ...     # per prior: the matched gt row or -1
        ...     matched = fluid.data("matched", [-1, 3], "int32")
        ...     out, weight = fluid.layers.target_assign(x, matched, mismatch_value=0)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> gt = fluid.create_lod_tensor(np.array([[[5.0]], [[6.0]]], "float32"), [[2]], fluid.CPUPlace())
        >>> o, w = exe.run(main, feed={"x": gt, "matched": np.array([[1, -1, 0]], "int32")},
        ...                fetch_list=[out, weight])
        >>> o.ravel(), w.ravel()
        (array([6., 0., 5.], dtype=float32), array([1., 0., 1.], dtype=float32))
    """
    layer = "target_assign"
    check_type(input, "input", Variable, layer)
    check_variable_and_dtype(matched_indices, "matched_indices", ["int32"], layer)
    helper = LayerHelper(layer, name=name)
    out = helper.create_variable_for_type_inference(input.dtype)
    weight = helper.create_variable_for_type_inference("float32")
    inputs: Dict[str, Any] = {"X": input, "MatchIndices": matched_indices}
    if negative_indices is not None:
        inputs["NegIndices"] = negative_indices
    helper.append_op(type=layer, inputs=inputs, outputs={"Out": out, "OutWeight": weight},
                     attrs={"mismatch_value": 0 if mismatch_value is None
                            else mismatch_value})
    return out, weight


def _nms_op(layer: str, bboxes: Variable, scores: Variable, score_threshold: float,
            nms_top_k: int, keep_top_k: int, nms_threshold: float, normalized: bool,
            nms_eta: float, background_label: int, name: Optional[str],
            with_index: bool = False) -> Any:
    """The ``multiclass_nms`` / ``locality_aware_nms`` op (same slots and attributes), its int
    arguments checked; a LoD tensor ``[K, 6]`` that stops gradients. ``with_index``: the
    ``multiclass_nms2`` op instead, returning ``(out, index)`` (Index ``[K, 1]`` int32)."""
    for arg, v in (("nms_top_k", nms_top_k), ("keep_top_k", keep_top_k),
                   ("background_label", background_label)):
        if not is_int(v):
            raise TypeError(f"{layer}: {arg} must be an int, but received {v!r}")
    helper = LayerHelper(layer, name=name)
    out = helper.create_variable_for_type_inference(bboxes.dtype, stop_gradient=True)
    outputs = {"Out": out}
    if with_index:
        outputs["Index"] = helper.create_variable_for_type_inference("int32",
                                                                     stop_gradient=True)
    helper.append_op(type="multiclass_nms2" if with_index else layer,
                     inputs={"BBoxes": bboxes, "Scores": scores}, outputs=outputs,
                     attrs={"background_label": int(background_label),
                            "score_threshold": float(score_threshold),
                            "nms_top_k": int(nms_top_k), "nms_threshold": float(nms_threshold),
                            "nms_eta": float(nms_eta), "keep_top_k": int(keep_top_k),
                            "normalized": normalized})
    return (out, outputs["Index"]) if with_index else out


def multiclass_nms(bboxes: Variable, scores: Variable, score_threshold: float, nms_top_k: int,
                   keep_top_k: int, nms_threshold: float = 0.3, normalized: bool = True,
                   nms_eta: float = 1.0, background_label: int = 0,
                   name: Optional[str] = None) -> Variable:
    """Per-class NMS then ``keep_top_k`` per image: a LoD tensor ``[K, 6]`` of
    ``(label, score, x1, y1, x2, y2)`` (see the ``multiclass_nms`` op).

    Args:
        bboxes (Variable): ``[N, M, 4]`` boxes (or a ``[M, C, 4]`` LoD tensor), float32/float64.
        scores (Variable): ``[N, C, M]`` scores (or ``[M, C]`` with LoD bboxes).
        score_threshold (float): drop boxes scoring below it.
        nms_top_k (int): boxes kept per class before NMS (-1: all).
        keep_top_k (int): boxes kept per image after NMS (-1: all).
        nms_threshold (float): the IoU threshold of NMS. Default 0.3.
        normalized (bool): the boxes are normalized (else pixel boxes, +1 in widths).
            Default True.
        nms_eta (float): adaptive NMS: the threshold is multiplied by it after each kept box
            while above 0.5 (1.0: fixed). Default 1.0.
        background_label (int): the class skipped (-1: none). Default 0.
        name (str | None): name prefix of the output. Default None.
    Returns:
        Variable: ``[K, 6]`` LoD tensor of ``(label, score, xmin, ymin, xmax, ymax)``, one
        sequence per image (``stop_gradient=True``).
    Raises:
        TypeError: ``bboxes`` or ``scores`` is not a float32/float64 Variable, a threshold or
            ``nms_eta`` is not a number, ``nms_top_k``/``keep_top_k``/``background_label`` is not
            an int, or ``normalized`` is not a bool.
        ValueError: the box/score shapes are invalid (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     boxes = fluid.data("boxes", [-1, 3, 4])
        ...     scores = fluid.data("scores", [-1, 2, 3])              # [batch, classes, boxes]
        ...     out = fluid.layers.multiclass_nms(boxes, scores, score_threshold=0.1, nms_top_k=10,
        ...                                       keep_top_k=10, nms_threshold=0.5, background_label=0)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"boxes": np.array([[[0, 0, 10, 10], [1, 1, 10, 10], [20, 20, 30, 30]]], "float32"),
        ...         "scores": np.array([[[0.0, 0.0, 0.0], [0.9, 0.8, 0.7]]], "float32")}
        >>> # [label, score, box]: the overlap is dropped
        >>> exe.run(main, feed=feed, fetch_list=[out])[0]
        array([[ 1. ,  0.9,  0. ,  0. , 10. , 10. ],
               [ 1. ,  0.7, 20. , 20. , 30. , 30. ]], dtype=float32)
    """
    layer = "multiclass_nms"
    check_variable_and_dtype(bboxes, "BBoxes", _FLOATS, layer)
    check_variable_and_dtype(scores, "Scores", _FLOATS, layer)
    for arg, v in (("score_threshold", score_threshold), ("nms_threshold", nms_threshold),
                   ("nms_eta", nms_eta)):
        check_type(v, arg, (float, int), layer)
    return _nms_op(layer, bboxes, scores, score_threshold, nms_top_k, keep_top_k, nms_threshold,
                   normalized, nms_eta, background_label, name)


def yolo_box(x: Variable, img_size: Variable, anchors: Sequence[int], class_num: int,
             conf_thresh: float, downsample_ratio: int, clip_bbox: bool = True,
             name: Optional[str] = None) -> Tuple[Variable, Variable]:
    """YOLOv3 boxes and scores of one detection head (see the ``yolo_box`` op):
    ``(boxes [N, A*H*W, 4], scores [N, A*H*W, class_num])``.

    Args:
        x (Variable): ``[N, A * (5 + class_num), H, W]`` float32/float64 head output.
        img_size (Variable): ``[N, 2]`` int32 image ``(height, width)``.
        anchors (list of int): the head's ``(width, height)`` anchor pairs, flattened.
        class_num (int): the number of classes.
        conf_thresh (float): boxes with lower confidence get zero scores and boxes.
        downsample_ratio (int): the head's stride in pixels (32, 16, 8).
        clip_bbox (bool): clip the boxes to the image. Default True.
        name (str | None): name prefix of the outputs. Default None.
    Returns:
        tuple(Variable, Variable): ``(boxes, scores)``: ``[N, A * H * W, 4]`` pixel boxes
        ``(x1, y1, x2, y2)`` and ``[N, A * H * W, class_num]`` scores, ``x``'s dtype.
    Raises:
        TypeError: ``x`` is not a float32/float64 Variable, ``img_size`` is not an int32
            Variable, ``anchors`` is not a list/tuple, ``class_num`` is not an int, or
            ``conf_thresh`` is not a number.
        ValueError: ``downsample_ratio`` is a string ``int()`` rejects, or (shape inference)
            ``anchors`` does not hold pairs or the channels are not ``A * (5 + class_num)``.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 14, 2, 2])                   # 2 anchors * (5 + 2 classes)
        ...     img_size = fluid.data("img_size", [-1, 2], "int32")
        ...     boxes, scores = fluid.layers.yolo_box(x, img_size, anchors=[10, 13, 16, 30], class_num=2,
        ...                                           conf_thresh=0.01, downsample_ratio=32)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> b, s = exe.run(main, feed={"x": np.zeros((1, 14, 2, 2), "float32"),
        ...                            "img_size": np.array([[64, 64]], "int32")}, fetch_list=[boxes, scores])
        >>> b.shape, s.shape
        ((1, 8, 4), (1, 8, 2))
    """
    layer = "yolo_box"
    check_variable_and_dtype(x, "x", _FLOATS, layer)
    check_variable_and_dtype(img_size, "img_size", ["int32"], layer)
    if not isinstance(anchors, (list, tuple)):
        raise TypeError(f"{layer}: anchors must be a list or tuple, but received {anchors!r}")
    if not is_int(class_num):
        raise TypeError(f"{layer}: class_num must be an int, but received {class_num!r}")
    if not is_number(conf_thresh):
        raise TypeError(f"{layer}: conf_thresh must be a float, but received {conf_thresh!r}")
    helper = LayerHelper(layer, name=name)
    boxes, scores = _outputs(helper, x.dtype, 2)
    helper.append_op(type=layer, inputs={"X": x, "ImgSize": img_size},
                     outputs={"Boxes": boxes, "Scores": scores},
                     attrs={"anchors": [int(a) for a in anchors], "class_num": int(class_num),
                            "conf_thresh": float(conf_thresh),
                            "downsample_ratio": int(downsample_ratio), "clip_bbox": clip_bbox})
    return boxes, scores


def yolov3_loss(x: Variable, gt_box: Variable, gt_label: Variable, anchors: Sequence[int],
                anchor_mask: Sequence[int], class_num: int, ignore_thresh: float,
                downsample_ratio: int, gt_score: Optional[Variable] = None,
                use_label_smooth: bool = True, name: Optional[str] = None) -> Variable:
    """YOLOv3 loss ``[N]`` of one detection head (see ``fluidlite/ops/yolo_loss.py``):
    ``gt_box`` ``[N, B, 4]`` normalized (cx, cy, w, h), ``gt_label`` ``[N, B]`` int32,
    ``gt_score`` ``[N, B]`` mixup weights (optional).

    Args:
        x (Variable): ``[N, len(anchor_mask) * (5 + class_num), H, W]`` float32/float64 head
            output.
        gt_box (Variable): ``[N, B, 4]`` normalized ``(cx, cy, w, h)`` ground-truth boxes.
        gt_label (Variable): ``[N, B]`` int32 class ids.
        anchors (list of int): all ``(width, height)`` anchor pairs, flattened.
        anchor_mask (list of int): the indices of the anchors this head uses.
        class_num (int): the number of classes.
        ignore_thresh (float): predictions whose best IoU with a ground truth exceeds it add no
            objectness loss.
        downsample_ratio (int): the head's stride in pixels.
        gt_score (Variable | None): ``[N, B]`` mixup weights of the boxes (None: 1).
            Default None.
        use_label_smooth (bool): smooth the class targets. Default True.
        name (str | None): name prefix of the output. Default None.
    Returns:
        Variable: ``[N]`` loss per image, ``x``'s dtype.
    Raises:
        TypeError: ``x``/``gt_box``/``gt_score`` is not a float32/float64 Variable, ``gt_label``
            is not int32, ``anchors``/``anchor_mask`` is not a list/tuple, ``class_num`` is not
            an int, ``ignore_thresh`` is not a number, or ``use_label_smooth`` is not a bool.
        ValueError: ``downsample_ratio`` is a string ``int()`` rejects, or (shape inference)
            ``anchor_mask`` indexes a missing anchor or the channels do not match.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 14, 2, 2])                   # 2 anchors * (5 + 2 classes)
        ...     gt_box = fluid.data("gt_box", [-1, 1, 4])
        ...     gt_label = fluid.data("gt_label", [-1, 1], "int32")
        ...     loss = fluid.layers.yolov3_loss(x, gt_box, gt_label, anchors=[10, 13, 16, 30], anchor_mask=[0, 1],
        ...                                     class_num=2, ignore_thresh=0.7, downsample_ratio=32)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.zeros((1, 14, 2, 2), "float32"),
        ...         "gt_box": np.array([[[0.5, 0.5, 0.2, 0.2]]], "float32"),
        ...         "gt_label": np.array([[1]], "int32")}
        >>> exe.run(main, feed=feed, fetch_list=[loss])[0].shape        # one loss per image
        (1,)
    """
    layer = "yolov3_loss"
    check_variable_and_dtype(x, "x", _FLOATS, layer)
    check_variable_and_dtype(gt_box, "gt_box", _FLOATS, layer)
    check_variable_and_dtype(gt_label, "gt_label", ["int32"], layer)
    if gt_score is not None:
        check_variable_and_dtype(gt_score, "gt_score", _FLOATS, layer)
    for arg, v in (("anchors", anchors), ("anchor_mask", anchor_mask)):
        if not isinstance(v, (list, tuple)):
            raise TypeError(f"{layer}: {arg} must be a list or tuple, but received {v!r}")
    if not is_int(class_num):
        raise TypeError(f"{layer}: class_num must be an int, but received {class_num!r}")
    if not is_number(ignore_thresh):
        raise TypeError(f"{layer}: ignore_thresh must be a float, but received "
                        f"{ignore_thresh!r}")
    if not isinstance(use_label_smooth, bool):
        raise TypeError(f"{layer}: use_label_smooth must be a bool, but received "
                        f"{use_label_smooth!r}")
    helper = LayerHelper(layer, name=name)
    loss = helper.create_variable_for_type_inference(x.dtype)
    obj_mask = helper.create_variable_for_type_inference(x.dtype, stop_gradient=True)
    match = helper.create_variable_for_type_inference("int32", stop_gradient=True)
    inputs: Dict[str, Any] = {"X": x, "GTBox": gt_box, "GTLabel": gt_label}
    if gt_score is not None:
        inputs["GTScore"] = gt_score
    helper.append_op(type=layer, inputs=inputs,
                     outputs={"Loss": loss, "ObjectnessMask": obj_mask, "GTMatchMask": match},
                     attrs={"anchors": [int(a) for a in anchors],
                            "anchor_mask": [int(a) for a in anchor_mask],
                            "class_num": int(class_num), "ignore_thresh": float(ignore_thresh),
                            "downsample_ratio": int(downsample_ratio),
                            "use_label_smooth": use_label_smooth})
    return loss


# -- SSD composites -------------------------------------------------------------------------------
def detection_output(loc: Variable, scores: Variable, prior_box: Variable,
                     prior_box_var: Variable, background_label: int = 0,
                     nms_threshold: float = 0.3, nms_top_k: int = 400, keep_top_k: int = 200,
                     score_threshold: float = 0.01, nms_eta: float = 1.0,
                     return_index: bool = False) -> Any:
    """SSD's detection output: decode ``loc`` ``[N, Np, 4]`` against the priors, softmax the
    class ``scores`` ``[N, Np, C]``, then ``multiclass_nms``: a LoD tensor ``[K, 6]``
    (``return_index``: ``multiclass_nms2``, also giving each kept box's row).

    Args:
        loc (Variable): ``[N, Np, 4]`` predicted box offsets (float32/float64).
        scores (Variable): ``[N, Np, C]`` class scores (softmax is applied here).
        prior_box (Variable): ``[Np, 4]`` prior boxes.
        prior_box_var (Variable): ``[Np, 4]`` prior variances.
        background_label (int): the background class (-1: none). Default 0.
        nms_threshold (float): the IoU threshold of NMS. Default 0.3.
        nms_top_k (int): boxes kept per class before NMS. Default 400.
        keep_top_k (int): boxes kept per image after NMS. Default 200.
        score_threshold (float): drop boxes scoring below it. Default 0.01.
        nms_eta (float): adaptive NMS factor (1.0: fixed threshold). Default 1.0.
        return_index (bool): also return Index (fluid 1.8). Default False.
    Returns:
        Variable: ``[K, 6]`` LoD tensor of ``(label, score, xmin, ymin, xmax, ymax)``, one
        sequence per image; with ``return_index`` the pair ``(out, index)``, ``index`` an int32
        ``[K, 1]`` LoD tensor of each kept box's row in the ``[N * Np]`` boxes of the batch.
    Raises:
        TypeError: an input is not a float32/float64 Variable, an NMS argument has the wrong
            type (see ``multiclass_nms``), or ``return_index`` is not a bool.
        ValueError: the shapes do not fit together (shape inference of ``box_coder``,
            ``softmax`` or ``multiclass_nms``).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     loc = fluid.data("loc", [-1, 2, 4])
        ...     scores = fluid.data("scores", [-1, 2, 2])            # [batch, priors, classes]
        ...     prior = fluid.data("prior", [2, 4])
        ...     prior_var = fluid.data("prior_var", [2, 4])
        ...     out = fluid.layers.detection_output(loc, scores, prior, prior_var, score_threshold=0.1)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"loc": np.zeros((1, 2, 4), "float32"),
        ...         "scores": np.array([[[0.1, 0.9], [0.8, 0.2]]], "float32"),
        ...         "prior": np.array([[0, 0, 0.5, 0.5], [0.5, 0.5, 1, 1]], "float32"),
        ...         "prior_var": np.full((2, 4), 0.1, "float32")}
        >>> exe.run(main, feed=feed, fetch_list=[out])[0].round(4)     # [label, score, box]
        array([[1.    , 0.69  , 0.    , 0.    , 0.5   , 0.5   ],
               [1.    , 0.3543, 0.5   , 0.5   , 1.    , 1.    ]], dtype=float32)
    """
    from . import softmax as _softmax, transpose
    if not isinstance(return_index, bool):
        raise TypeError(f"detection_output: return_index must be a bool, but received "
                        f"{return_index!r}")
    decoded = box_coder(prior_box=prior_box, prior_box_var=prior_box_var, target_box=loc,
                        code_type="decode_center_size")
    probs = _softmax(input=scores)
    probs = transpose(probs, perm=[0, 2, 1])
    probs.stop_gradient = True
    if not return_index:
        return multiclass_nms(decoded, probs, score_threshold=score_threshold,
                              nms_top_k=nms_top_k, keep_top_k=keep_top_k,
                              nms_threshold=nms_threshold, nms_eta=nms_eta,
                              background_label=background_label)
    for arg, v in (("score_threshold", score_threshold), ("nms_threshold", nms_threshold),
                   ("nms_eta", nms_eta)):
        check_type(v, arg, (float, int), "detection_output")
    return _nms_op("multiclass_nms", decoded, probs, score_threshold, nms_top_k, keep_top_k,
                   nms_threshold, True, nms_eta, background_label, None, with_index=True)


def ssd_loss(location: Variable, confidence: Variable, gt_box: Variable, gt_label: Variable,
             prior_box: Variable, prior_box_var: Optional[Variable] = None,
             background_label: int = 0, overlap_threshold: float = 0.5,
             neg_pos_ratio: float = 3.0, neg_overlap: float = 0.5,
             loc_loss_weight: float = 1.0, conf_loss_weight: float = 1.0,
             match_type: str = "per_prediction", mining_type: str = "max_negative",
             normalize: bool = True, sample_size: Optional[int] = None) -> Variable:
    """SSD's multibox loss ``[N, 1]`` (fluid 1.8's composition): match priors to the ground
    truth (``iou_similarity`` + ``bipartite_match``), mine hard negatives on the softmax
    confidence loss (``mine_hard_examples``), assign targets (``box_coder`` encode +
    ``target_assign``), then ``conf_loss_weight * softmax-CE + loc_loss_weight * smooth-L1``
    summed over the priors, divided by the number of matched priors when ``normalize``.

    Args:
        location (Variable): predicted box offsets ``[N, Np, 4]`` (float32/float64), e.g.
            ``multi_box_head``'s first output.
        confidence (Variable): class logits ``[N, Np, C]``.
        gt_box (Variable): ground-truth boxes ``[Ng, 4]`` (x1, y1, x2, y2), a LoD tensor with
            one sequence per image.
        gt_label (Variable): ground-truth labels ``[Ng, 1]`` (int), with ``gt_box``'s LoD.
        prior_box (Variable): the priors ``[Np, 4]``.
        prior_box_var (Variable, optional): the priors' variances ``[Np, 4]``. Default None
            (variances of 1).
        background_label (int): the background class. Default 0.
        overlap_threshold (float): with ``match_type="per_prediction"``, a prior also matches
            the ground truth it overlaps by more than this. Default 0.5.
        neg_pos_ratio (float): hard negatives mined per positive. Default 3.0.
        neg_overlap (float): the largest overlap a prior may have to count as a negative.
            Default 0.5.
        loc_loss_weight (float): weight of the localisation loss. Default 1.0.
        conf_loss_weight (float): weight of the confidence loss. Default 1.0.
        match_type (str): ``"per_prediction"`` (default) or ``"bipartite"``.
        mining_type (str): ``"max_negative"``, the only one fluid 1.8 supports.
        normalize (bool): divide by the number of matched priors. Default True.
        sample_size (int, optional): unused with ``"max_negative"`` mining. Default None.

    Returns:
        Variable: the loss per image, ``[N, 1]``, of ``location``'s dtype.

    Raises:
        TypeError: ``location``, ``confidence``, ``gt_box`` or ``prior_box`` is not a float
            Variable.
        ValueError: ``mining_type`` is not ``"max_negative"``, or ``confidence`` is not 3-D.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     loc = fluid.data("loc", [-1, 2, 4])            # 2 priors
        ...     conf = fluid.data("conf", [-1, 2, 3])          # 3 classes, 0 = background
        ...     gt_box = fluid.data("gt_box", [-1, 4], lod_level=1)
        ...     gt_label = fluid.data("gt_label", [-1, 1], "int64", lod_level=1)
        ...     prior = fluid.data("prior", [2, 4])
        ...     loss = fluid.layers.ssd_loss(loc, conf, gt_box, gt_label, prior)
        >>> place = fluid.CPUPlace()
        >>> feed = {"loc": np.zeros((1, 2, 4), "float32"),
        ...         "conf": np.zeros((1, 2, 3), "float32"),     # uniform: CE = log 3 each
        ...         "gt_box": fluid.create_lod_tensor(
        ...             np.array([[0.1, 0.1, 0.4, 0.4]], "float32"), [[1]], place),
        ...         "gt_label": fluid.create_lod_tensor(np.array([[2]], "int64"), [[1]], place),
        ...         "prior": np.array([[0.1, 0.1, 0.4, 0.4], [0.6, 0.6, 0.9, 0.9]], "float32")}
        >>> # one positive prior (exact box: no smooth-L1 loss) and one mined negative
        >>> fluid.Executor(place).run(main, feed=feed, fetch_list=[loss])[0]
        array([[2.1972246]], dtype=float32)
    """
    from . import (cast, flatten, reduce_sum, reshape, shape, slice as slice_,
                   smooth_l1, softmax_with_cross_entropy)
    if mining_type != "max_negative":
        raise ValueError("ssd_loss: only mining_type == 'max_negative' is supported (as in "
                         f"fluid 1.8), but received {mining_type!r}")
    for arg, v in (("location", location), ("confidence", confidence), ("gt_box", gt_box),
                   ("prior_box", prior_box)):
        check_variable_and_dtype(v, arg, _FLOATS, "ssd_loss")
    if len(confidence.shape) != 3:
        raise ValueError(f"ssd_loss: confidence must be [N, Np, C], but '{confidence.name}' "
                         f"has shape {list(confidence.shape)}")
    helper = LayerHelper("ssd_loss")
    conf_shape = shape(confidence)

    def to_2d(var: Variable) -> Variable:
        return flatten(x=var, axis=2)

    iou = iou_similarity(x=gt_box, y=prior_box)
    matched_indices, matched_dist = bipartite_match(iou, match_type, overlap_threshold)
    gt_label = reshape(x=gt_label, shape=(len(gt_label.shape) - 1) * (0,) + (-1, 1))
    gt_label.stop_gradient = True
    target_label, _ = target_assign(gt_label, matched_indices,
                                     mismatch_value=background_label)
    confidence = to_2d(confidence)
    target_label = to_2d(cast(x=target_label, dtype="int64"))
    target_label.stop_gradient = True
    conf_loss = softmax_with_cross_entropy(confidence, target_label)
    actual_shape = slice_(conf_shape, axes=[0], starts=[0], ends=[2])
    actual_shape.stop_gradient = True
    conf_loss = reshape(x=conf_loss, shape=(-1, 0), actual_shape=actual_shape)
    conf_loss.stop_gradient = True
    neg_indices = helper.create_variable_for_type_inference("int32", stop_gradient=True)
    updated = helper.create_variable_for_type_inference(matched_indices.dtype,
                                                        stop_gradient=True)
    helper.append_op(type="mine_hard_examples",
                     inputs={"ClsLoss": conf_loss, "MatchIndices": matched_indices,
                             "MatchDist": matched_dist},
                     outputs={"NegIndices": neg_indices, "UpdatedMatchIndices": updated},
                     attrs={"neg_pos_ratio": float(neg_pos_ratio),
                            "neg_dist_threshold": float(neg_overlap),
                            "mining_type": mining_type,
                            "sample_size": int(sample_size or 0)})
    encoded = box_coder(prior_box=prior_box, prior_box_var=prior_box_var, target_box=gt_box,
                        code_type="encode_center_size")
    target_bbox, target_loc_weight = target_assign(encoded, updated,
                                                   mismatch_value=background_label)
    target_label, target_conf_weight = target_assign(gt_label, updated,
                                                     negative_indices=neg_indices,
                                                     mismatch_value=background_label)
    target_label = cast(x=to_2d(target_label), dtype="int64")
    target_label.stop_gradient = True
    conf_loss = softmax_with_cross_entropy(confidence, target_label)
    target_conf_weight = to_2d(target_conf_weight)
    target_conf_weight.stop_gradient = True
    conf_loss = conf_loss * target_conf_weight
    location = to_2d(location)
    target_bbox = to_2d(target_bbox)
    target_bbox.stop_gradient = True
    loc_loss = smooth_l1(location, target_bbox)
    target_loc_weight = to_2d(target_loc_weight)
    target_loc_weight.stop_gradient = True
    loc_loss = loc_loss * target_loc_weight
    loss = conf_loss * conf_loss_weight + loc_loss * loc_loss_weight
    loss = reshape(x=loss, shape=(-1, 0), actual_shape=actual_shape)
    loss = reduce_sum(loss, dim=1, keep_dim=True)
    if normalize:
        loss = loss / reduce_sum(target_loc_weight)
    return loss


def multi_box_head(inputs: Sequence[Variable], image: Variable, base_size: int,
                   num_classes: int, aspect_ratios: Any, min_ratio: Optional[int] = None,
                   max_ratio: Optional[int] = None, min_sizes: Any = None,
                   max_sizes: Any = None, steps: Any = None, step_w: Any = None,
                   step_h: Any = None, offset: float = 0.5,
                   variance: Sequence[float] = [0.1, 0.1, 0.2, 0.2], flip: bool = True,
                   clip: bool = False, kernel_size: int = 1, pad: int = 0, stride: int = 1,
                   name: Optional[str] = None,
                   min_max_aspect_ratios_order: bool = False) -> Tuple[Variable, ...]:
    """SSD's prediction heads over several feature maps: per input a ``prior_box`` and two
    ``conv2d`` (locations, class confidences); returns ``(mbox_locs [N, P, 4], mbox_confs
    [N, P, num_classes], boxes, variances)`` with the priors of all inputs concatenated.
    Without explicit ``min_sizes``/``max_sizes`` (more than 2 inputs) the sizes are spread
    between ``min_ratio`` and ``max_ratio`` percent of ``base_size`` as in fluid.

    Args:
        inputs (list of Variable): the ``[N, C_i, H_i, W_i]`` feature maps.
        image (Variable): ``[N, C, H_img, W_img]`` input image.
        base_size (int): the image size the ratios refer to.
        num_classes (int): classes per prior box.
        aspect_ratios (list): per input, a float or list of floats.
        min_ratio (int | None): smallest size, in percent of ``base_size`` (used without
            ``min_sizes``, more than 2 inputs). Default None.
        max_ratio (int | None): largest size, in percent of ``base_size``. Default None.
        min_sizes (list | None): per input, the min box size(s). Default None.
        max_sizes (list | None): per input, the max box size(s). Default None.
        steps (list | None): per input, the step for both axes. Default None.
        step_w (list | None): per input, the horizontal step. Default None.
        step_h (list | None): per input, the vertical step. Default None.
        offset (float): center offset within a cell. Default 0.5.
        variance (list of 4 floats): prior variances. Default ``[0.1, 0.1, 0.2, 0.2]``.
        flip (bool): also use reciprocal aspect ratios. Default True.
        clip (bool): clip the priors to ``[0, 1]``. Default False.
        kernel_size (int): kernel of the prediction convolutions. Default 1.
        pad (int): padding of the prediction convolutions. Default 0.
        stride (int): stride of the prediction convolutions. Default 1.
        name (str | None): accepted for fluid's signature. Default None.
        min_max_aspect_ratios_order (bool): Caffe's prior order. Default False.
    Returns:
        tuple: ``(mbox_locs [N, P, 4], mbox_confs [N, P, num_classes], boxes [P, 4],
        variances [P, 4])`` over the P priors of all inputs.
    Raises:
        TypeError: an input or ``image`` is not a Variable, or a size/ratio is not a number
            (from ``prior_box`` / ``conv2d``).
        ValueError: ``inputs`` is not a list/tuple, sizes are missing (with <= 2 inputs
            ``min_sizes``/``max_sizes`` one per input; otherwise them or
            ``min_ratio``/``max_ratio``), a per-input list has the wrong length, or a prior box
            argument is invalid (from ``prior_box``).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     f1 = fluid.data("f1", [-1, 8, 4, 4])
        ...     f2 = fluid.data("f2", [-1, 8, 2, 2])
        ...     img = fluid.data("img", [-1, 3, 32, 32])
        ...     locs, confs, boxes, variances = fluid.layers.multi_box_head(
        ...         [f1, f2], img, base_size=32, num_classes=3, aspect_ratios=[[2.0], [2.0]],
        ...         min_sizes=[8.0, 16.0], max_sizes=[16.0, 32.0])
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> feed = {"f1": np.ones((1, 8, 4, 4), "float32"), "f2": np.ones((1, 8, 2, 2), "float32"),
        ...         "img": np.ones((1, 3, 32, 32), "float32")}
        >>> [a.shape for a in exe.run(main, feed=feed, fetch_list=[locs, confs, boxes])]
        [(1, 80, 4), (1, 80, 3), (80, 4)]
    """
    from . import concat, conv2d, flatten, reshape, transpose
    layer = "multi_box_head"
    if not isinstance(inputs, (list, tuple)):
        raise ValueError(f"{layer}: inputs should be a list or tuple, but received "
                         f"{type(inputs).__name__}")
    num_layer = len(inputs)
    if num_layer <= 2:
        if min_sizes is None or max_sizes is None or len(min_sizes) != num_layer or \
                len(max_sizes) != num_layer:
            raise ValueError(f"{layer}: with {num_layer} inputs, min_sizes and max_sizes must "
                             f"be given with one value per input")
    elif min_sizes is None and max_sizes is None:
        if min_ratio is None or max_ratio is None:
            raise ValueError(f"{layer}: give min_sizes/max_sizes or min_ratio/max_ratio")
        min_sizes, max_sizes = [], []
        step = int(math.floor((max_ratio - min_ratio) / (num_layer - 2)))
        for ratio in range(min_ratio, max_ratio + 1, step):
            min_sizes.append(base_size * ratio / 100.0)
            max_sizes.append(base_size * (ratio + step) / 100.0)
        min_sizes = [base_size * 0.10] + min_sizes
        max_sizes = [base_size * 0.20] + max_sizes

    def same_length(value: Any, arg: str) -> None:
        if not (isinstance(value, (list, tuple)) and len(value) == num_layer):
            raise ValueError(f"{layer}: {arg} should be list or tuple, and the length of "
                             f"inputs and {arg} should be the same")

    if aspect_ratios:
        same_length(aspect_ratios, "aspect_ratios")
    if step_h:
        same_length(step_h, "step_h")
    if step_w:
        same_length(step_w, "step_w")
    if steps:
        same_length(steps, "steps")
        step_w = step_h = steps
    locs, confs, boxes, variances = [], [], [], []
    for i, feat in enumerate(inputs):
        ar = _listify(aspect_ratios[i]) if aspect_ratios is not None else []
        st = [step_w[i] if step_w else 0.0, step_h[i] if step_w else 0.0]
        box, var = prior_box(feat, image, _listify(min_sizes[i]), _listify(max_sizes[i]), ar,
                             variance, flip, clip, st, offset, None,
                             min_max_aspect_ratios_order)
        boxes.append(box)
        variances.append(var)
        num_boxes = box.shape[2]
        for n_out, dest in ((num_boxes * 4, locs), (num_boxes * num_classes, confs)):
            y = conv2d(input=feat, num_filters=n_out, filter_size=kernel_size, padding=pad,
                       stride=stride)
            dest.append(flatten(transpose(y, perm=[0, 2, 3, 1]), axis=1))
    if len(boxes) == 1:
        box, var, loc_all, conf_all = boxes[0], variances[0], locs[0], confs[0]
    else:
        box = concat([flatten(b, axis=3) for b in boxes])
        var = concat([flatten(v, axis=3) for v in variances])
        loc_all = concat(locs, axis=1)
        conf_all = concat(confs, axis=1)
    loc_all = reshape(loc_all, shape=[0, -1, 4])
    conf_all = reshape(conf_all, shape=[0, -1, num_classes])
    box.stop_gradient = True
    var.stop_gradient = True
    return loc_all, conf_all, box, var


# -- R-CNN proposals (ops/rcnn.py) ----------------------------------------------------------------
def generate_proposals(scores: Variable, bbox_deltas: Variable, im_info: Variable,
                       anchors: Variable, variances: Variable, pre_nms_top_n: int = 6000,
                       post_nms_top_n: int = 1000, nms_thresh: float = 0.5,
                       min_size: float = 0.1, eta: float = 1.0,
                       name: Optional[str] = None) -> Tuple[Variable, Variable]:
    """Faster R-CNN's region proposals from an RPN's outputs, per image.

    Each anchor is decoded with its ``bbox_deltas`` (scaled by ``variances``) into a box,
    clipped to the image (``im_info``), boxes narrower or lower than ``min_size`` (scaled by
    the image scale) are dropped, the ``pre_nms_top_n`` highest-scoring ones go through
    non-maximum suppression at IoU ``nms_thresh``, and the ``post_nms_top_n`` best survive.

    Args:
        scores (Variable): objectness probabilities ``[N, A, H, W]`` (A anchors per cell),
            float32 or float64.
        bbox_deltas (Variable): box deltas ``[N, 4*A, H, W]`` (dx, dy, dw, dh per anchor).
        im_info (Variable): ``[N, 3]``: each image's height, width and scale.
        anchors (Variable): ``[H, W, A, 4]`` anchor boxes (x1, y1, x2, y2), e.g.
            ``anchor_generator``'s first output.
        variances (Variable): ``[H, W, A, 4]`` variances of the anchors' deltas.
        pre_nms_top_n (int): boxes kept per image before NMS. Default 6000.
        post_nms_top_n (int): boxes kept per image after NMS. Default 1000.
        nms_thresh (float): NMS IoU threshold. Default 0.5.
        min_size (float): the smallest box side kept. Default 0.1.
        eta (float): adaptive NMS: after each kept box the threshold is multiplied by ``eta``
            while it stays above 0.5; 1.0 (default) keeps it fixed.
        name (str, optional): a name prefix for the outputs. Default None.

    Returns:
        tuple(Variable, Variable): ``(rpn_rois, rpn_roi_probs)``: the proposals ``[R, 4]`` and
        their scores ``[R, 1]``, LoD tensors with one sequence per image, best first.

    Raises:
        TypeError: an input is not a float32/float64 Variable.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     scores = fluid.data("scores", [-1, 1, 2, 2])      # one anchor per cell
        ...     deltas = fluid.data("deltas", [-1, 4, 2, 2])
        ...     im_info = fluid.data("im_info", [-1, 3])
        ...     anchors = fluid.data("anchors", [2, 2, 1, 4])
        ...     variances = fluid.data("variances", [2, 2, 1, 4])
        ...     rois, probs = fluid.layers.generate_proposals(
        ...         scores, deltas, im_info, anchors, variances, post_nms_top_n=3)
        >>> cells = np.array([[[[0, 0, 7, 7]], [[8, 0, 15, 7]]],
        ...                   [[[0, 8, 7, 15]], [[8, 8, 15, 15]]]], "float32")
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> r, p = exe.run(main, feed={
        ...     "scores": np.array([[[[0.9, 0.2], [0.6, 0.4]]]], "float32"),
        ...     "deltas": np.zeros((1, 4, 2, 2), "float32"),
        ...     "im_info": np.array([[16, 16, 1]], "float32"),
        ...     "anchors": cells, "variances": np.ones((2, 2, 1, 4), "float32")},
        ...     fetch_list=[rois, probs], return_numpy=False)
        >>> np.asarray(r)              # the three best anchors (zero deltas), best first
        array([[ 0.,  0.,  7.,  7.],
               [ 0.,  8.,  7., 15.],
               [ 8.,  8., 15., 15.]], dtype=float32)
        >>> np.asarray(p)[:, 0], r.lod()
        (array([0.9, 0.6, 0.4], dtype=float32), [[0, 3]])
    """
    layer = "generate_proposals"
    for arg, v in (("scores", scores), ("bbox_deltas", bbox_deltas), ("im_info", im_info),
                   ("anchors", anchors), ("variances", variances)):
        check_variable_and_dtype(v, arg, _FLOATS, layer)
    helper = LayerHelper(layer, name=name)
    rois, probs = _outputs(helper, bbox_deltas.dtype, 2)
    helper.append_op(type=layer, inputs={"Scores": scores, "BboxDeltas": bbox_deltas,
                                         "ImInfo": im_info, "Anchors": anchors,
                                         "Variances": variances},
                     outputs={"RpnRois": rois, "RpnRoiProbs": probs},
                     attrs={"pre_nms_topN": int(pre_nms_top_n),
                            "post_nms_topN": int(post_nms_top_n),
                            "nms_thresh": float(nms_thresh), "min_size": float(min_size),
                            "eta": float(eta)})
    return rois, probs


def distribute_fpn_proposals(fpn_rois: Variable, min_level: int, max_level: int,
                             refer_level: int, refer_scale: int,
                             name: Optional[str] = None) -> Tuple[List[Variable], Variable]:
    """Split ROIs over the FPN levels ``min_level..max_level``: ``(multi_rois, restore_ind)``;
    ``gather(concat(per-level results), restore_ind)`` restores the original order.

    Args:
        fpn_rois (Variable): ``[R, 4]`` float32/float64 LoD tensor of ROIs.
        min_level (int): the lowest FPN level.
        max_level (int): the highest FPN level (>= ``min_level``).
        refer_level (int): the level of an ROI of size ``refer_scale``.
        refer_scale (int): the reference ROI size.
        name (str | None): name prefix of the outputs. Default None.
    Returns:
        tuple(list of Variable, Variable): ``(multi_rois, restore_ind)``: one ``[R_l, 4]`` LoD
        tensor per level, and ``[R, 1]`` int32 indices restoring the input order.
    Raises:
        TypeError: ``fpn_rois`` is not a float32/float64 Variable, or a level/scale is not an
            int.
        ValueError: ``min_level > max_level``, or ``fpn_rois`` is not ``[R, 4]``
            (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     rois = fluid.data("rois", [-1, 4], lod_level=1)
        ...     multi_rois, restore_index = fluid.layers.distribute_fpn_proposals(
        ...         rois, min_level=2, max_level=3, refer_level=2, refer_scale=224)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> rois = fluid.create_lod_tensor(np.array([[0, 0, 10, 10], [0, 0, 500, 500]], "float32"),
        ...                              [[2]], fluid.CPUPlace())
        >>> # per level
        >>> [a.shape for a in exe.run(main, feed={"rois": rois}, fetch_list=multi_rois)]
        [(1, 4), (1, 4)]
    """
    layer = "distribute_fpn_proposals"
    check_variable_and_dtype(fpn_rois, "fpn_rois", _FLOATS, layer)
    for arg, v in (("min_level", min_level), ("max_level", max_level),
                   ("refer_level", refer_level), ("refer_scale", refer_scale)):
        if not is_int(v):
            raise TypeError(f"{layer}: {arg} must be an int, but received {v!r}")
    if min_level > max_level:
        raise ValueError(f"{layer}: min_level ({min_level}) must not exceed max_level "
                         f"({max_level})")
    helper = LayerHelper(layer, name=name)
    multi = _outputs(helper, fpn_rois.dtype, max_level - min_level + 1)
    restore = helper.create_variable_for_type_inference("int32", stop_gradient=True)
    helper.append_op(type=layer, inputs={"FpnRois": fpn_rois},
                     outputs={"MultiFpnRois": multi, "RestoreIndex": restore},
                     attrs={"min_level": int(min_level), "max_level": int(max_level),
                            "refer_level": int(refer_level), "refer_scale": int(refer_scale)})
    return multi, restore


def collect_fpn_proposals(multi_rois: Sequence[Variable], multi_scores: Sequence[Variable],
                          min_level: int, max_level: int, post_nms_top_n: int,
                          name: Optional[str] = None) -> Variable:
    """Merge per-level ROIs (levels ``min_level..max_level`` of the lists) keeping the
    ``post_nms_top_n`` best scores: a LoD tensor ``[R, 4]`` grouped by image.

    Args:
        multi_rois (list of Variable): per level, ``[R_l, 4]`` LoD tensor of ROIs.
        multi_scores (list of Variable): per level, ``[R_l, 1]`` LoD tensor of scores.
        min_level (int): the first level used.
        max_level (int): the last level used.
        post_nms_top_n (int): ROIs kept per image.
        name (str | None): name prefix of the output. Default None.
    Returns:
        Variable: ``[R, 4]`` LoD tensor of the kept ROIs, grouped by image
        (``stop_gradient=True``).
    Raises:
        TypeError: ``multi_rois`` or ``multi_scores`` is not a list/tuple.
        ValueError: ``max_level < min_level``, fewer than ``max_level - min_level + 1`` tensors
            are given, or ``post_nms_top_n`` is a string ``int()`` rejects.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     r2 = fluid.data("r2", [-1, 4], lod_level=1)
        ...     r3 = fluid.data("r3", [-1, 4], lod_level=1)
        ...     s2 = fluid.data("s2", [-1, 1], lod_level=1)
        ...     s3 = fluid.data("s3", [-1, 1], lod_level=1)
        ...     rois = fluid.layers.collect_fpn_proposals([r2, r3], [s2, s3], min_level=2, max_level=3,
        ...                                               post_nms_top_n=2)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> place = fluid.CPUPlace()
        >>> t = lambda a: fluid.create_lod_tensor(np.array(a, "float32"), [[len(a)]], place)
        >>> feed = {"r2": t([[0, 0, 1, 1]]), "r3": t([[0, 0, 2, 2], [1, 1, 3, 3]]),
        ...         "s2": t([[0.5]]), "s3": t([[0.9], [0.1]])}
        >>> exe.run(main, feed=feed, fetch_list=[rois])[0]      # the 2 best scored
        array([[0., 0., 2., 2.],
               [0., 0., 1., 1.]], dtype=float32)
    """
    layer = "collect_fpn_proposals"
    if not isinstance(multi_rois, (list, tuple)) or not isinstance(multi_scores, (list, tuple)):
        raise TypeError(f"{layer}: multi_rois and multi_scores must be lists of Variables")
    num = max_level - min_level + 1
    if num < 1 or len(multi_rois) < num or len(multi_scores) < num:
        raise ValueError(f"{layer}: levels {min_level}..{max_level} need {num} inputs, got "
                         f"{len(multi_rois)} ROI and {len(multi_scores)} score tensors")
    helper = LayerHelper(layer, name=name)
    out = helper.create_variable_for_type_inference(multi_rois[0].dtype, stop_gradient=True)
    helper.append_op(type=layer, inputs={"MultiLevelRois": list(multi_rois[:num]),
                                         "MultiLevelScores": list(multi_scores[:num])},
                     outputs={"FpnRois": out}, attrs={"post_nms_topN": int(post_nms_top_n)})
    return out


def box_decoder_and_assign(prior_box: Variable, prior_box_var: Variable, target_box: Variable,
                           box_score: Variable, box_clip: float,
                           name: Optional[str] = None) -> Tuple[Variable, Variable]:
    """Decode per-class box deltas and pick the best-scoring class's box:
    ``(decoded_box [N, C*4], output_assign_box [N, 4])``.

    Args:
        prior_box (Variable): ``[N, 4]`` float32/float64 prior boxes.
        prior_box_var (Variable): ``[4]`` variances.
        target_box (Variable): ``[N, C * 4]`` per-class box deltas.
        box_score (Variable): ``[N, C]`` class scores.
        box_clip (float): the upper bound of the decoded ``log(w)``/``log(h)`` deltas.
        name (str | None): name prefix of the outputs. Default None.
    Returns:
        tuple(Variable, Variable): ``(decoded_box [N, C * 4], output_assign_box [N, 4])``, the
        box of the best-scoring non-background class.
    Raises:
        TypeError: an input is not a float32/float64 Variable, or ``box_clip`` is not a number.
        ValueError: ``target_box`` is not ``[N, C * 4]`` for ``box_score`` ``[N, C]``
            (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     prior = fluid.data("prior", [-1, 4])
        ...     prior_var = fluid.data("prior_var", [4])
        ...     target = fluid.data("target", [-1, 8])                # 2 classes * 4 deltas
        ...     score = fluid.data("score", [-1, 2])
        ...     decoded, assigned = fluid.layers.box_decoder_and_assign(prior, prior_var, target, score,
        ...                                                             box_clip=4.135)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"prior": np.array([[0, 0, 9, 9]], "float32"), "prior_var": np.ones(4, "float32"),
        ...         "target": np.zeros((1, 8), "float32"), "score": np.array([[0.2, 0.8]], "float32")}
        >>> exe.run(main, feed=feed, fetch_list=[assigned])[0]     # the best class's box
        array([[0., 0., 9., 9.]], dtype=float32)
    """
    layer = "box_decoder_and_assign"
    for arg, v in (("prior_box", prior_box), ("prior_box_var", prior_box_var),
                   ("target_box", target_box), ("box_score", box_score)):
        check_variable_and_dtype(v, arg, _FLOATS, layer)
    if not is_number(box_clip):
        raise TypeError(f"{layer}: box_clip must be a float, but received {box_clip!r}")
    helper = LayerHelper(layer, name=name)
    dec, assign = _outputs(helper, prior_box.dtype, 2)
    helper.append_op(type=layer, inputs={"PriorBox": prior_box, "PriorBoxVar": prior_box_var,
                                         "TargetBox": target_box, "BoxScore": box_score},
                     outputs={"DecodeBox": dec, "OutputAssignBox": assign},
                     attrs={"box_clip": float(box_clip)})
    return dec, assign


def polygon_box_transform(input: Variable, name: Optional[str] = None) -> Variable:
    """EAST geometry maps to absolute coordinates (``4*w - x`` on even channels, ``4*h - x`` on
    odd ones).

    Args:
        input (Variable): ``[N, 2k, H, W]`` float32/float64 geometry map (offsets of k points).
        name (str | None): name prefix of the output. Default None.
    Returns:
        Variable: absolute coordinates, ``input``'s shape and dtype (``stop_gradient=True``).
    Raises:
        TypeError: ``input`` is not a float32/float64 Variable.
        ValueError: ``input`` is not 4-D or has an odd channel count (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 4, 1, 2])
        ...     out = fluid.layers.polygon_box_transform(x)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> exe.run(main, feed={"x": np.zeros((1, 4, 1, 2), "float32")}, fetch_list=[out])[0][0, :, 0]
        array([[0., 4.],
               [0., 0.],
               [0., 4.],
               [0., 0.]], dtype=float32)
    """
    layer = "polygon_box_transform"
    check_variable_and_dtype(input, "input", _FLOATS, layer)
    helper = LayerHelper(layer, name=name)
    out = helper.create_variable_for_type_inference(input.dtype, stop_gradient=True)
    helper.append_op(type=layer, inputs={"Input": input}, outputs={"Output": out})
    return out


# -- evaluation (ops/detection_map.py) ------------------------------------------------------------
def detection_map(detect_res: Variable, label: Variable, class_num: int,
                  background_label: int = 0, overlap_threshold: float = 0.3,
                  evaluate_difficult: bool = True, has_state: Optional[Variable] = None,
                  input_states: Optional[Sequence[Variable]] = None,
                  out_states: Optional[Sequence[Variable]] = None,
                  ap_version: str = "integral") -> Variable:
    """Mean average precision ``[1]`` of ``detect_res`` (LoD ``[M, 6]``: label, score, box)
    against ``label`` (LoD ``[G, 6]``: label, difficult, box; or ``[G, 5]``). With
    ``has_state`` / ``input_states`` / ``out_states`` (pos count, true positives, false
    positives) the statistics accumulate across runs, as ``fluid.metrics.DetectionMAP`` does."""
    layer = "detection_map"
    check_variable_and_dtype(detect_res, "detect_res", _FLOATS, layer)
    check_variable_and_dtype(label, "label", _FLOATS, layer)
    if ap_version not in ("integral", "11point"):
        raise ValueError(f"{layer}: ap_version must be 'integral' or '11point', but received "
                         f"{ap_version!r}")
    if not is_int(class_num) or class_num < 1:
        raise ValueError(f"{layer}: class_num must be a positive int, but received "
                         f"{class_num!r}")
    for arg, states in (("input_states", input_states), ("out_states", out_states)):
        if states is not None and len(states) != 3:
            raise ValueError(f"{layer}: {arg} must hold 3 variables (pos count, true "
                             f"positives, false positives), got {len(states)}")
    helper = LayerHelper(layer)
    m_ap = helper.create_variable_for_type_inference("float32", stop_gradient=True)
    outs = list(out_states) if out_states else [
        helper.create_variable_for_type_inference(t, stop_gradient=True)
        for t in ("int32", "float32", "float32")]
    ins = list(input_states) if input_states else [None, None, None]
    inputs: Dict[str, Any] = {"Label": label, "DetectRes": detect_res}
    for slot, v in (("HasState", has_state), ("PosCount", ins[0]), ("TruePos", ins[1]),
                    ("FalsePos", ins[2])):
        if v is not None:
            inputs[slot] = v
    helper.append_op(type=layer, inputs=inputs,
                     outputs={"MAP": m_ap, "AccumPosCount": outs[0], "AccumTruePos": outs[1],
                              "AccumFalsePos": outs[2]},
                     attrs={"overlap_threshold": float(overlap_threshold),
                            "evaluate_difficult": evaluate_difficult, "ap_type": ap_version,
                            "class_num": int(class_num),
                            "background_label": int(background_label)})
    return m_ap


def locality_aware_nms(bboxes: Variable, scores: Variable, score_threshold: float,
                       nms_top_k: int, keep_top_k: int, nms_threshold: float = 0.3,
                       normalized: bool = True, nms_eta: float = 1.0,
                       background_label: int = -1, name: Optional[str] = None) -> Variable:
    """Locality-aware NMS (EAST): merge consecutive overlapping boxes by score, then per-class
    NMS; a LoD tensor ``[K, 2 + box size]`` (see the ``locality_aware_nms`` op; boxes of 4
    coordinates, or polygons of 8, 16, 24 or 32 compared by polygon IoU).

    Args:
        bboxes (Variable): ``[N, M, 4]`` float32/float64 boxes (or ``[N, M, 8|16|24|32]``
            polygons: x1, y1, x2, y2, ...).
        scores (Variable): ``[N, C, M]`` scores.
        score_threshold (float): drop boxes scoring below it.
        nms_top_k (int): boxes kept per class before NMS (-1: all).
        keep_top_k (int): boxes kept per image after NMS (-1: all).
        nms_threshold (float): the IoU threshold of NMS. Default 0.3.
        normalized (bool): the boxes are normalized (else pixel boxes, +1 in widths).
            Default True.
        nms_eta (float): adaptive NMS: the threshold is multiplied by it after each kept box
            while above 0.5 (1.0: fixed). Default 1.0.
        background_label (int): the class skipped (-1: none). Default -1.
        name (str | None): name prefix of the output. Default None.
    Returns:
        Variable: ``[K, 6]`` LoD tensor of ``(label, score, xmin, ymin, xmax, ymax)``
        (``stop_gradient=True``).
    Raises:
        TypeError: ``bboxes`` or ``scores`` is not a float32/float64 Variable, ``nms_top_k``/
            ``keep_top_k``/``background_label`` is not an int, ``score_threshold``/
            ``nms_threshold``/``nms_eta`` is not a float, or ``normalized`` is not a bool.
        ValueError: the box/score shapes are invalid (shape inference; e.g. a box size other
            than 4, 8, 16, 24 or 32).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     boxes = fluid.data("boxes", [-1, 2, 4])
        ...     scores = fluid.data("scores", [-1, 1, 2])
        ...     out = fluid.layers.locality_aware_nms(boxes, scores, score_threshold=0.1, nms_top_k=10,
        ...                                           keep_top_k=10, nms_threshold=0.5)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"boxes": np.array([[[0, 0, 1, 1], [2, 2, 3, 3]]], "float32"),
        ...         "scores": np.array([[[0.9, 0.8]]], "float32")}
        >>> exe.run(main, feed=feed, fetch_list=[out])[0].shape       # [kept, 6]: label, score, box
        (2, 6)
    """
    layer = "locality_aware_nms"
    check_variable_and_dtype(bboxes, "bboxes", _FLOATS, layer)
    check_variable_and_dtype(scores, "scores", _FLOATS, layer)
    # fluid 1.8 checks these types exactly (an int threshold is a TypeError)
    for arg, v, typ in (("background_label", background_label, int),
                        ("score_threshold", score_threshold, float),
                        ("nms_top_k", nms_top_k, int), ("nms_eta", nms_eta, float),
                        ("nms_threshold", nms_threshold, float),
                        ("keep_top_k", keep_top_k, int), ("normalized", normalized, bool)):
        check_type(v, arg, typ, layer)
    return _nms_op(layer, bboxes, scores, score_threshold, nms_top_k, keep_top_k, nms_threshold,
                   normalized, nms_eta, background_label, name)


def retinanet_detection_output(bboxes: Sequence[Variable], scores: Sequence[Variable],
                               anchors: Sequence[Variable], im_info: Variable,
                               score_threshold: float = 0.05, nms_top_k: int = 1000,
                               keep_top_k: int = 100, nms_threshold: float = 0.3,
                               nms_eta: float = 1.0) -> Variable:
    """RetinaNet's detections from its per-FPN-level box deltas and class scores.

    Per image and level, the (anchor, class) pairs scoring above ``score_threshold`` (above 0
    on the last level, as fluid), at most ``nms_top_k`` of them, are decoded against their
    anchors, scaled back by the image scale and clipped to the image; then per-class NMS over
    all levels and the ``keep_top_k`` best detections of all classes.

    Args:
        bboxes (list[Variable]): per level, box deltas ``[N, Mi, 4]`` (float32/float64).
        scores (list[Variable]): per level, sigmoid class scores ``[N, Mi, C]`` (no
            background class).
        anchors (list[Variable]): per level, anchor boxes ``[Mi, 4]`` (x1, y1, x2, y2).
        im_info (Variable): ``[N, 3]``: each image's height, width and scale.
        score_threshold (float): the lowest score kept (not on the last level). Default 0.05.
        nms_top_k (int): candidates kept per level before NMS. Default 1000.
        keep_top_k (int): detections kept per image. Default 100.
        nms_threshold (float): NMS IoU threshold. Default 0.3.
        nms_eta (float): adaptive NMS factor; 1.0 (default) keeps the threshold fixed.

    Returns:
        Variable: a LoD tensor ``[K, 6]``, one sequence per image, rows (class + 1, score, x1,
        y1, x2, y2) by descending score; no gradient.

    Raises:
        TypeError: ``bboxes``, ``scores`` or ``anchors`` is not a non-empty list of float
            Variables, or ``im_info`` is not one.
        ValueError: the three lists have different lengths (one entry per level).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     bboxes = fluid.data("bboxes", [-1, 2, 4])     # one level, 2 anchors
        ...     scores = fluid.data("scores", [-1, 2, 3])     # 3 classes
        ...     anchors = fluid.data("anchors", [2, 4])
        ...     im_info = fluid.data("im_info", [-1, 3])
        ...     out = fluid.layers.retinanet_detection_output(
        ...         [bboxes], [scores], [anchors], im_info, keep_top_k=2)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> res = exe.run(main, feed={
        ...     "bboxes": np.zeros((1, 2, 4), "float32"),
        ...     "scores": np.array([[[0.9, 0.01, 0.02], [0.03, 0.01, 0.7]]], "float32"),
        ...     "anchors": np.array([[0, 0, 9, 9], [10, 10, 19, 19]], "float32"),
        ...     "im_info": np.array([[32, 32, 1]], "float32")},
        ...     fetch_list=[out], return_numpy=False)[0]
        >>> np.asarray(res)           # class 1 at the first anchor, class 3 at the second
        array([[ 1. ,  0.9,  0. ,  0. ,  9. ,  9. ],
               [ 3. ,  0.7, 10. , 10. , 19. , 19. ]], dtype=float32)
    """
    layer = "retinanet_detection_output"
    for arg, v in (("bboxes", bboxes), ("scores", scores), ("anchors", anchors)):
        if not isinstance(v, (list, tuple)) or not v:
            raise TypeError(f"{layer}: {arg} must be a non-empty list of Variables, but "
                            f"received {v!r}")
        for x in v:
            check_variable_and_dtype(x, arg, _FLOATS, layer)
    if not len(bboxes) == len(scores) == len(anchors):
        raise ValueError(f"{layer}: bboxes, scores and anchors must have one entry per level, "
                         f"got {len(bboxes)}, {len(scores)} and {len(anchors)}")
    check_variable_and_dtype(im_info, "im_info", _FLOATS, layer)
    helper = LayerHelper(layer)
    out = helper.create_variable_for_type_inference(scores[0].dtype, stop_gradient=True)
    helper.append_op(type=layer, inputs={"BBoxes": list(bboxes), "Scores": list(scores),
                                         "Anchors": list(anchors), "ImInfo": im_info},
                     outputs={"Out": out},
                     attrs={"score_threshold": float(score_threshold),
                            "nms_top_k": int(nms_top_k), "nms_threshold": float(nms_threshold),
                            "nms_eta": float(nms_eta), "keep_top_k": int(keep_top_k)})
    return out


def rpn_target_assign(bbox_pred: Variable, cls_logits: Variable, anchor_box: Variable,
                      anchor_var: Variable, gt_boxes: Variable, is_crowd: Variable,
                      im_info: Variable, rpn_batch_size_per_im: int = 256,
                      rpn_straddle_thresh: float = 0.0, rpn_fg_fraction: float = 0.5,
                      rpn_positive_overlap: float = 0.7, rpn_negative_overlap: float = 0.3,
                      use_random: bool = True) -> Tuple[Variable, ...]:
    """RPN targets (see the ``rpn_target_assign`` op) and the predictions they apply to:
    ``(predicted_scores [F+B, 1], predicted_location [F, 4], target_label [F+B, 1],
    target_bbox [F, 4], bbox_inside_weight [F, 4])``; the predictions are gathered from
    ``cls_logits`` / ``bbox_pred`` flattened over images and anchors.

    Per image, anchors straddling the image border by more than ``rpn_straddle_thresh`` are
    ignored; an anchor is foreground when its IoU with a (non-crowd) ground-truth box is at least
    ``rpn_positive_overlap`` or it is a box's best anchor, background below
    ``rpn_negative_overlap``; at most ``rpn_fg_fraction * rpn_batch_size_per_im`` foreground
    anchors are sampled, background ones fill the batch.

    Args:
        bbox_pred (Variable): predicted box deltas ``[N, M, 4]`` (float32/float64).
        cls_logits (Variable): predicted objectness logits ``[N, M, 1]``.
        anchor_box (Variable): the anchors ``[M, 4]`` (x1, y1, x2, y2).
        anchor_var (Variable): the anchors' variances ``[M, 4]``; not read (as in fluid).
        gt_boxes (Variable): ground-truth boxes ``[G, 4]``, a LoD tensor, one sequence per image.
        is_crowd (Variable): ``[G, 1]`` int32/int64, 1 marks a crowd box (never matched).
        im_info (Variable): ``[N, 3]``: each image's height, width and scale.
        rpn_batch_size_per_im (int): anchors sampled per image. Default 256.
        rpn_straddle_thresh (float): how far outside the image an anchor may reach; negative
            keeps every anchor. Default 0.0.
        rpn_fg_fraction (float): the largest foreground share of the batch. Default 0.5.
        rpn_positive_overlap (float): the IoU from which an anchor is foreground. Default 0.7.
        rpn_negative_overlap (float): the IoU below which an anchor is background. Default 0.3.
        use_random (bool): sample randomly; False takes the first anchors in order. Default True.

    Returns:
        tuple(Variable, ...): ``(predicted_scores, predicted_location, target_label,
        target_bbox, bbox_inside_weight)``: the sampled anchors' logits ``[F+B, 1]``, the
        foreground anchors' deltas ``[F, 4]``, labels ``[F+B, 1]`` (int32, 1 foreground, 0
        background), the encoded box targets ``[F, 4]`` and their weights ``[F, 4]``.

    Raises:
        TypeError: an input is not a Variable of the expected dtype (float, ``is_crowd`` int).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     bbox_pred = fluid.data("bbox_pred", [-1, 3, 4])       # 3 anchors per image
        ...     cls_logits = fluid.data("cls_logits", [-1, 3, 1])
        ...     anchors = fluid.data("anchors", [3, 4])
        ...     anchor_var = fluid.data("anchor_var", [3, 4])
        ...     gt_boxes = fluid.data("gt_boxes", [-1, 4], lod_level=1)
        ...     is_crowd = fluid.data("is_crowd", [-1, 1], "int32", lod_level=1)
        ...     im_info = fluid.data("im_info", [-1, 3])
        ...     score, loc, label, target, weight = fluid.layers.rpn_target_assign(
        ...         bbox_pred, cls_logits, anchors, anchor_var, gt_boxes, is_crowd, im_info,
        ...         rpn_batch_size_per_im=4, use_random=False)
        >>> place = fluid.CPUPlace()
        >>> feed = {"bbox_pred": np.zeros((1, 3, 4), "float32"),
        ...         "cls_logits": np.array([[[0.5], [-1.0], [2.0]]], "float32"),
        ...         "anchors": np.array([[0, 0, 15, 15], [20, 20, 35, 35], [0, 0, 14, 15]],
        ...                             "float32"),
        ...         "anchor_var": np.ones((3, 4), "float32"),
        ...         "gt_boxes": fluid.create_lod_tensor(
        ...             np.array([[0, 0, 15, 15]], "float32"), [[1]], place),
        ...         "is_crowd": fluid.create_lod_tensor(np.array([[0]], "int32"), [[1]], place),
        ...         "im_info": np.array([[40, 40, 1]], "float32")}
        >>> s, l = fluid.Executor(place).run(main, feed=feed, fetch_list=[score, label])
        >>> s.ravel(), l.ravel()       # anchors 0 and 2 overlap the box, anchor 1 does not
        (array([ 0.5,  2. , -1. ], dtype=float32), array([1, 1, 0], dtype=int32))
    """
    from . import gather, reshape
    layer = "rpn_target_assign"
    for arg, v in (("bbox_pred", bbox_pred), ("cls_logits", cls_logits),
                   ("anchor_box", anchor_box), ("gt_boxes", gt_boxes), ("im_info", im_info)):
        check_variable_and_dtype(v, arg, _FLOATS, layer)
    check_variable_and_dtype(is_crowd, "is_crowd", ["int32", "int64"], layer)
    helper = LayerHelper(layer)
    loc_index = helper.create_variable_for_type_inference("int32", stop_gradient=True)
    score_index = helper.create_variable_for_type_inference("int32", stop_gradient=True)
    target_label = helper.create_variable_for_type_inference("int32", stop_gradient=True)
    target_bbox, inside_weight = _outputs(helper, anchor_box.dtype, 2)
    helper.append_op(type=layer, inputs={"Anchor": anchor_box, "GtBoxes": gt_boxes,
                                         "IsCrowd": is_crowd, "ImInfo": im_info},
                     outputs={"LocationIndex": loc_index, "ScoreIndex": score_index,
                              "TargetLabel": target_label, "TargetBBox": target_bbox,
                              "BBoxInsideWeight": inside_weight},
                     attrs={"rpn_batch_size_per_im": int(rpn_batch_size_per_im),
                            "rpn_straddle_thresh": float(rpn_straddle_thresh),
                            "rpn_positive_overlap": float(rpn_positive_overlap),
                            "rpn_negative_overlap": float(rpn_negative_overlap),
                            "rpn_fg_fraction": float(rpn_fg_fraction),
                            "use_random": bool(use_random)})
    cls_logits = reshape(x=cls_logits, shape=(-1, 1))
    bbox_pred = reshape(x=bbox_pred, shape=(-1, 4))
    predicted_cls = gather(cls_logits, score_index)
    predicted_bbox = gather(bbox_pred, loc_index)
    return predicted_cls, predicted_bbox, target_label, target_bbox, inside_weight


def retinanet_target_assign(bbox_pred: Variable, cls_logits: Variable, anchor_box: Variable,
                            anchor_var: Variable, gt_boxes: Variable, gt_labels: Variable,
                            is_crowd: Variable, im_info: Variable, num_classes: int = 1,
                            positive_overlap: float = 0.5,
                            negative_overlap: float = 0.4) -> Tuple[Variable, ...]:
    """RetinaNet targets (see the ``retinanet_target_assign`` op) and the predictions they
    apply to: ``(predicted_scores [F+B, num_classes], predicted_location [F, 4], target_label,
    target_bbox, bbox_inside_weight, fg_num)``.

    Per image, every anchor whose best IoU with a (non-crowd) ground-truth box is at least
    ``positive_overlap`` (or that is a box's best anchor) is foreground and takes that box's
    class; one below ``negative_overlap`` is background (label 0); the others are ignored.
    Unlike ``rpn_target_assign`` nothing is sampled: every labelled anchor is kept (focal loss
    weights them).

    Args:
        bbox_pred (Variable): predicted box deltas ``[N, M, 4]`` (float32/float64).
        cls_logits (Variable): predicted class logits ``[N, M, num_classes]``.
        anchor_box (Variable): the anchors ``[M, 4]`` (x1, y1, x2, y2).
        anchor_var (Variable): the anchors' variances ``[M, 4]``; not read (as in fluid).
        gt_boxes (Variable): ground-truth boxes ``[G, 4]``, a LoD tensor, one sequence per image.
        gt_labels (Variable): ``[G, 1]`` int32 classes, 1..num_classes, with ``gt_boxes``' LoD.
        is_crowd (Variable): ``[G, 1]`` int32, 1 marks a crowd box (never matched).
        im_info (Variable): ``[N, 3]``: each image's height, width and scale.
        num_classes (int): classes, without background. Default 1.
        positive_overlap (float): the IoU from which an anchor is foreground. Default 0.5.
        negative_overlap (float): the IoU below which an anchor is background. Default 0.4.

    Returns:
        tuple(Variable, ...): ``(predicted_scores, predicted_location, target_label,
        target_bbox, bbox_inside_weight, fg_num)``: the labelled anchors' logits
        ``[F+B, num_classes]``, the foreground anchors' deltas ``[F, 4]``, the labels
        ``[F+B, 1]`` (int32, 0 background), the encoded box targets ``[F, 4]``, their weights
        ``[F, 4]`` and, per image, the foreground count + 1 ``[N, 1]`` (int32, fluid's count:
        safe to divide by).

    Raises:
        TypeError: an input is not a Variable of the expected dtype (float; ``gt_labels`` and
            ``is_crowd`` int32).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     bbox_pred = fluid.data("bbox_pred", [-1, 3, 4])       # 3 anchors per image
        ...     cls_logits = fluid.data("cls_logits", [-1, 3, 2])     # 2 classes
        ...     anchors = fluid.data("anchors", [3, 4])
        ...     anchor_var = fluid.data("anchor_var", [3, 4])
        ...     gt_boxes = fluid.data("gt_boxes", [-1, 4], lod_level=1)
        ...     gt_labels = fluid.data("gt_labels", [-1, 1], "int32", lod_level=1)
        ...     is_crowd = fluid.data("is_crowd", [-1, 1], "int32", lod_level=1)
        ...     im_info = fluid.data("im_info", [-1, 3])
        ...     score, loc, label, target, weight, fg_num = fluid.layers.retinanet_target_assign(
        ...         bbox_pred, cls_logits, anchors, anchor_var, gt_boxes, gt_labels, is_crowd,
        ...         im_info, num_classes=2)
        >>> place = fluid.CPUPlace()
        >>> feed = {"bbox_pred": np.zeros((1, 3, 4), "float32"),
        ...         "cls_logits": np.zeros((1, 3, 2), "float32"),
        ...         "anchors": np.array([[0, 0, 15, 15], [20, 20, 35, 35], [0, 0, 14, 15]],
        ...                             "float32"),
        ...         "anchor_var": np.ones((3, 4), "float32"),
        ...         "gt_boxes": fluid.create_lod_tensor(
        ...             np.array([[0, 0, 15, 15]], "float32"), [[1]], place),
        ...         "gt_labels": fluid.create_lod_tensor(np.array([[2]], "int32"), [[1]], place),
        ...         "is_crowd": fluid.create_lod_tensor(np.array([[0]], "int32"), [[1]], place),
        ...         "im_info": np.array([[40, 40, 1]], "float32")}
        >>> l, n = fluid.Executor(place).run(main, feed=feed, fetch_list=[label, fg_num])
        >>> l.ravel(), n.ravel()        # anchors 0 and 2 are class 2, anchor 1 background
        (array([2, 2, 0], dtype=int32), array([3], dtype=int32))
    """
    from . import gather, reshape
    layer = "retinanet_target_assign"
    for arg, v in (("bbox_pred", bbox_pred), ("cls_logits", cls_logits),
                   ("anchor_box", anchor_box), ("gt_boxes", gt_boxes), ("im_info", im_info)):
        check_variable_and_dtype(v, arg, _FLOATS, layer)
    check_variable_and_dtype(gt_labels, "gt_labels", ["int32"], layer)
    check_variable_and_dtype(is_crowd, "is_crowd", ["int32"], layer)
    helper = LayerHelper(layer)
    loc_index, score_index, target_label, fg_num = [
        helper.create_variable_for_type_inference("int32", stop_gradient=True)
        for _ in range(4)]
    target_bbox, inside_weight = _outputs(helper, anchor_box.dtype, 2)
    helper.append_op(type=layer, inputs={"Anchor": anchor_box, "GtBoxes": gt_boxes,
                                         "GtLabels": gt_labels, "IsCrowd": is_crowd,
                                         "ImInfo": im_info},
                     outputs={"LocationIndex": loc_index, "ScoreIndex": score_index,
                              "TargetLabel": target_label, "TargetBBox": target_bbox,
                              "BBoxInsideWeight": inside_weight, "ForegroundNumber": fg_num},
                     attrs={"positive_overlap": float(positive_overlap),
                            "negative_overlap": float(negative_overlap)})
    cls_logits = reshape(x=cls_logits, shape=(-1, num_classes))
    bbox_pred = reshape(x=bbox_pred, shape=(-1, 4))
    predicted_cls = gather(cls_logits, score_index)
    predicted_bbox = gather(bbox_pred, loc_index)
    return predicted_cls, predicted_bbox, target_label, target_bbox, inside_weight, fg_num


def generate_proposal_labels(rpn_rois: Variable, gt_classes: Variable, is_crowd: Variable,
                             gt_boxes: Variable, im_info: Variable,
                             batch_size_per_im: int = 256, fg_fraction: float = 0.25,
                             fg_thresh: float = 0.25, bg_thresh_hi: float = 0.5,
                             bg_thresh_lo: float = 0.0,
                             bbox_reg_weights: Sequence[float] = [0.1, 0.1, 0.2, 0.2],
                             class_nums: Optional[int] = None, use_random: bool = True,
                             is_cls_agnostic: bool = False,
                             is_cascade_rcnn: bool = False) -> Tuple[Variable, ...]:
    """Sample Fast R-CNN ROIs and their targets (see the ``generate_proposal_labels`` op):
    ``(rois, labels_int32, bbox_targets, bbox_inside_weights, bbox_outside_weights)``.

    Per image the ground-truth boxes are put before the RPN's proposals; a proposal whose best
    IoU with a ground truth is above ``fg_thresh`` is foreground (that ground truth's class),
    one with best IoU in ``[bg_thresh_lo, bg_thresh_hi)`` background (label 0). At most
    ``floor(batch_size_per_im * fg_fraction)`` foregrounds are kept, backgrounds fill up to
    ``batch_size_per_im``.

    Args:
        rpn_rois (Variable): proposals ``[R, 4]`` (float32/float64), a LoD tensor with one
            sequence per image, e.g. ``generate_proposals``' first output.
        gt_classes (Variable): ``[G, 1]`` int32 ground-truth classes, a LoD tensor per image.
        is_crowd (Variable): ``[G, 1]`` int32, 1 marks a crowd box (never foreground).
        gt_boxes (Variable): ground-truth boxes ``[G, 4]``, with ``gt_classes``' LoD.
        im_info (Variable): ``[N, 3]``: each image's height, width and scale.
        batch_size_per_im (int): ROIs sampled per image. Default 256.
        fg_fraction (float): the largest foreground share. Default 0.25.
        fg_thresh (float): the IoU above which a ROI is foreground. Default 0.25.
        bg_thresh_hi (float): background IoU upper bound (exclusive). Default 0.5.
        bg_thresh_lo (float): background IoU lower bound. Default 0.0.
        bbox_reg_weights (list[float]): the weights the box deltas are divided by
            (x, y, w, h). Default [0.1, 0.1, 0.2, 0.2].
        class_nums (int): classes, background included; required.
        use_random (bool): sample randomly; False keeps the first ones. Default True.
        is_cls_agnostic (bool): one box-regression block for all classes. Default False.
        is_cascade_rcnn (bool): Cascade R-CNN: no ground truths added, nothing sampled.
            Default False.

    Returns:
        tuple(Variable, ...): ``(rois, labels_int32, bbox_targets, bbox_inside_weights,
        bbox_outside_weights)``, LoD tensors per image: the sampled ROIs ``[P, 4]``, their
        labels ``[P, 1]`` (int32), the regression targets and their weights
        ``[P, 4 * class_nums]`` (non-zero only in the label's four columns).

    Raises:
        TypeError: an input is not a Variable of the expected dtype.
        ValueError: ``class_nums`` is not a positive int.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     rpn_rois = fluid.data("rpn_rois", [-1, 4], lod_level=1)
        ...     gt_classes = fluid.data("gt_classes", [-1, 1], "int32", lod_level=1)
        ...     is_crowd = fluid.data("is_crowd", [-1, 1], "int32", lod_level=1)
        ...     gt_boxes = fluid.data("gt_boxes", [-1, 4], lod_level=1)
        ...     im_info = fluid.data("im_info", [-1, 3])
        ...     rois, labels, targets, inside_w, outside_w = fluid.layers.generate_proposal_labels(
        ...         rpn_rois, gt_classes, is_crowd, gt_boxes, im_info, batch_size_per_im=4,
        ...         class_nums=2, use_random=False)
        >>> place = fluid.CPUPlace()
        >>> def lod(a, dtype="float32"):
        ...     return fluid.create_lod_tensor(np.array(a, dtype), [[len(a)]], place)
        >>> feed = {"rpn_rois": lod([[0, 0, 15, 15], [20, 20, 35, 35]]),
        ...         "gt_classes": lod([[1]], "int32"), "is_crowd": lod([[0]], "int32"),
        ...         "gt_boxes": lod([[0, 0, 15, 14]]),
        ...         "im_info": np.array([[40, 40, 1]], "float32")}
        >>> r, l = fluid.Executor(place).run(main, feed=feed, fetch_list=[rois, labels])
        >>> r, l.ravel()    # 4 * 0.25 = 1 foreground (the ground truth), then a background
        (array([[ 0.,  0., 15., 14.],
               [20., 20., 35., 35.]], dtype=float32), array([1, 0], dtype=int32))
    """
    layer = "generate_proposal_labels"
    for arg, v in (("rpn_rois", rpn_rois), ("gt_boxes", gt_boxes), ("im_info", im_info)):
        check_variable_and_dtype(v, arg, _FLOATS, layer)
    check_variable_and_dtype(gt_classes, "gt_classes", ["int32"], layer)
    check_variable_and_dtype(is_crowd, "is_crowd", ["int32"], layer)
    if not is_int(class_nums) or class_nums < 1:
        raise ValueError(f"{layer}: class_nums must be a positive int, but received "
                         f"{class_nums!r}")
    helper = LayerHelper(layer)
    rois = helper.create_variable_for_type_inference(rpn_rois.dtype, stop_gradient=True)
    labels = helper.create_variable_for_type_inference("int32", stop_gradient=True)
    targets, inside, outside = _outputs(helper, rpn_rois.dtype, 3)
    helper.append_op(type=layer, inputs={"RpnRois": rpn_rois, "GtClasses": gt_classes,
                                         "IsCrowd": is_crowd, "GtBoxes": gt_boxes,
                                         "ImInfo": im_info},
                     outputs={"Rois": rois, "LabelsInt32": labels, "BboxTargets": targets,
                              "BboxInsideWeights": inside, "BboxOutsideWeights": outside},
                     attrs={"batch_size_per_im": int(batch_size_per_im),
                            "fg_fraction": float(fg_fraction), "fg_thresh": float(fg_thresh),
                            "bg_thresh_hi": float(bg_thresh_hi),
                            "bg_thresh_lo": float(bg_thresh_lo),
                            "bbox_reg_weights": _floats(bbox_reg_weights, "bbox_reg_weights",
                                                        layer),
                            "class_nums": int(class_nums), "use_random": bool(use_random),
                            "is_cls_agnostic": bool(is_cls_agnostic),
                            "is_cascade_rcnn": bool(is_cascade_rcnn)})
    return rois, labels, targets, inside, outside


def roi_perspective_transform(input: Variable, rois: Variable, transformed_height: int,
                              transformed_width: int,
                              spatial_scale: float = 1.0) -> Tuple[Variable, Variable, Variable]:
    """Warp quadrilateral ROIs (LoD ``[R, 8]``) to ``transformed_height x transformed_width``
    rectangles: ``(out [R, C, th, tw], mask [R, 1, th, tw] int32, transform_matrix [R, 9])``.

    Args:
        input (Variable): ``[N, C, H, W]`` float32/float64 feature map.
        rois (Variable): ``[R, 8]`` LoD tensor of quadrilaterals ``(x1, y1, ..., x4, y4)``.
        transformed_height (int): output height (>= 1).
        transformed_width (int): output width (>= 1).
        spatial_scale (float): factor from image to feature-map coordinates. Default 1.0.
    Returns:
        tuple(Variable, Variable, Variable): ``(out [R, C, th, tw], mask [R, 1, th, tw] int32,
        transform_matrix [R, 9])``.
    Raises:
        TypeError: ``input`` or ``rois`` is not a float32/float64 Variable, or
            ``transformed_height``/``transformed_width`` is not an int, or ``spatial_scale``
            is not a float.
        ValueError: ``transformed_height``/``transformed_width`` is below 1, or ``rois`` is
            not ``[R, 8]`` (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 1, 4, 4])
        ...     rois = fluid.data("rois", [-1, 8], lod_level=1)       # four corners per ROI
        ...     out, mask, matrix = fluid.layers.roi_perspective_transform(x, rois, 2, 2)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> rois = fluid.create_lod_tensor(np.array([[0, 0, 3, 0, 3, 3, 0, 3]], "float32"), [[1]],
        ...                              fluid.CPUPlace())
        >>> exe.run(main, feed={"x": np.ones((1, 1, 4, 4), "float32"), "rois": rois},
        ...         fetch_list=[out])[0].shape
        (1, 1, 2, 2)
    """
    layer = "roi_perspective_transform"
    check_variable_and_dtype(input, "input", _FLOATS, layer)
    check_variable_and_dtype(rois, "rois", _FLOATS, layer)
    for arg, v in (("transformed_height", transformed_height),
                   ("transformed_width", transformed_width)):
        check_type(v, arg, int, layer)          # fluid 1.8: a float size is a TypeError
        if v < 1:
            raise ValueError(f"{layer}: {arg} must be a positive int, but received {v!r}")
    check_type(spatial_scale, "spatial_scale", float, layer)     # fluid 1.8: an int too
    helper = LayerHelper(layer)
    out = helper.create_variable_for_type_inference(input.dtype)
    mask = helper.create_variable_for_type_inference("int32", stop_gradient=True)
    matrix = helper.create_variable_for_type_inference(input.dtype, stop_gradient=True)
    idx = helper.create_variable_for_type_inference("int32", stop_gradient=True)
    wts = helper.create_variable_for_type_inference(input.dtype, stop_gradient=True)
    helper.append_op(type=layer, inputs={"X": input, "ROIs": rois},
                     outputs={"Out": out, "Mask": mask, "TransformMatrix": matrix,
                              "Out2InIdx": idx, "Out2InWeights": wts},
                     attrs={"transformed_height": int(transformed_height),
                            "transformed_width": int(transformed_width),
                            "spatial_scale": float(spatial_scale)})
    return out, mask, matrix


def generate_mask_labels(im_info: Variable, gt_classes: Variable, is_crowd: Variable,
                         gt_segms: Variable, rois: Variable, labels_int32: Variable,
                         num_classes: int, resolution: int) -> Tuple[Variable, ...]:
    """Mask R-CNN mask targets (see the ``generate_mask_labels`` op; ``gt_segms`` is a
    3-level LoD tensor of polygon points): ``(mask_rois, roi_has_mask_int32, mask_int32)``.

    Each foreground ROI (``labels_int32 > 0``) takes the non-crowd ground truth whose polygons'
    bounding box it overlaps most; those polygons, rasterized on a ``resolution x resolution``
    grid over the ROI, fill the block of the ROI's class in its mask target, -1 (ignore)
    elsewhere. An image without foreground gives its first background ROI an all -1 target.

    Args:
        im_info (Variable): ``[N, 3]``: each image's height, width and scale (float).
        gt_classes (Variable): ``[G, 1]`` int32 ground-truth classes, a LoD tensor per image.
        is_crowd (Variable): ``[G, 1]`` int32, 1 marks a crowd object (never used).
        gt_segms (Variable): polygon points ``[P, 2]`` (x, y), a 3-level LoD tensor: images ->
            objects -> polygons -> points.
        rois (Variable): ROIs ``[R, 4]``, a LoD tensor per image (e.g.
            ``generate_proposal_labels``' first output).
        labels_int32 (Variable): ``[R, 1]`` int32 class of each ROI (0 background).
        num_classes (int): classes, background included (>= 1).
        resolution (int): the mask side (>= 1).

    Returns:
        tuple(Variable, Variable, Variable): ``(mask_rois, roi_has_mask_int32, mask_int32)``,
        LoD tensors per image: the foreground ROIs ``[F, 4]``, their row in their image's
        ``rois`` ``[F, 1]`` (int32) and the mask targets ``[F, num_classes * resolution**2]``
        (int32: 1 inside, 0 outside, -1 ignored).

    Raises:
        TypeError: an input is not a Variable of the expected dtype.
        ValueError: ``num_classes`` or ``resolution`` is not a positive int.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     im_info = fluid.data("im_info", [-1, 3])
        ...     gt_classes = fluid.data("gt_classes", [-1, 1], "int32", lod_level=1)
        ...     is_crowd = fluid.data("is_crowd", [-1, 1], "int32", lod_level=1)
        ...     gt_segms = fluid.data("gt_segms", [-1, 2], lod_level=3)
        ...     rois = fluid.data("rois", [-1, 4], lod_level=1)
        ...     labels = fluid.data("labels", [-1, 1], "int32", lod_level=1)
        ...     mask_rois, has_mask, masks = fluid.layers.generate_mask_labels(
        ...         im_info, gt_classes, is_crowd, gt_segms, rois, labels, num_classes=2,
        ...         resolution=4)
        >>> place = fluid.CPUPlace()
        >>> square = np.array([[0, 0], [8, 0], [8, 8], [0, 8]], "float32")   # one polygon
        >>> feed = {"im_info": np.array([[32, 32, 1]], "float32"),
        ...         "gt_classes": fluid.create_lod_tensor(np.array([[1]], "int32"), [[1]], place),
        ...         "is_crowd": fluid.create_lod_tensor(np.array([[0]], "int32"), [[1]], place),
        ...         "gt_segms": fluid.create_lod_tensor(square, [[1], [1], [4]], place),
        ...         "rois": fluid.create_lod_tensor(
        ...             np.array([[0, 0, 16, 16], [20, 20, 30, 30]], "float32"), [[2]], place),
        ...         "labels": fluid.create_lod_tensor(np.array([[1], [0]], "int32"), [[2]], place)}
        >>> r, h, m = fluid.Executor(place).run(main, feed=feed,
        ...                                     fetch_list=[mask_rois, has_mask, masks])
        >>> r, h.ravel()             # the foreground ROI, row 0 of its image
        (array([[ 0.,  0., 16., 16.]], dtype=float32), array([0], dtype=int32))
        >>> m[0, 16:].reshape(4, 4)  # class 1's block: the square covers the ROI's top-left
        array([[1, 1, 0, 0],
               [1, 1, 0, 0],
               [0, 0, 0, 0],
               [0, 0, 0, 0]], dtype=int32)
    """
    layer = "generate_mask_labels"
    check_variable_and_dtype(im_info, "im_info", _FLOATS, layer)
    check_variable_and_dtype(gt_classes, "gt_classes", ["int32"], layer)
    check_variable_and_dtype(is_crowd, "is_crowd", ["int32"], layer)
    check_variable_and_dtype(gt_segms, "gt_segms", _FLOATS, layer)
    check_variable_and_dtype(rois, "rois", _FLOATS, layer)
    check_variable_and_dtype(labels_int32, "labels_int32", ["int32"], layer)
    for arg, v in (("num_classes", num_classes), ("resolution", resolution)):
        if not is_int(v) or v < 1:
            raise ValueError(f"{layer}: {arg} must be a positive int, but received {v!r}")
    helper = LayerHelper(layer)
    mask_rois = helper.create_variable_for_type_inference(rois.dtype, stop_gradient=True)
    has_mask = helper.create_variable_for_type_inference("int32", stop_gradient=True)
    masks = helper.create_variable_for_type_inference("int32", stop_gradient=True)
    helper.append_op(type=layer, inputs={"ImInfo": im_info, "GtClasses": gt_classes,
                                         "IsCrowd": is_crowd, "GtSegms": gt_segms,
                                         "Rois": rois, "LabelsInt32": labels_int32},
                     outputs={"MaskRois": mask_rois, "RoiHasMaskInt32": has_mask,
                              "MaskInt32": masks},
                     attrs={"num_classes": int(num_classes), "resolution": int(resolution)})
    return mask_rois, has_mask, masks


def matrix_nms(bboxes: Variable, scores: Variable, score_threshold: float,
               post_threshold: float, nms_top_k: int, keep_top_k: int,
               use_gaussian: bool = False, gaussian_sigma: float = 2., background_label: int = 0,
               normalized: bool = True, return_index: bool = False,
               name: Optional[str] = None) -> Any:
    """Matrix NMS (SOLOv2): per class, each candidate's score is decayed by its IoU with the
    higher-scored candidates instead of being suppressed; see the ``matrix_nms`` op.

    For candidate i and every higher-scored candidate j of the same class (at most
    ``nms_top_k`` candidates scoring above ``score_threshold``), with ``max_iou_j`` j's largest
    IoU with a candidate above it: ``decay_i = min_j (1 - iou_ij) / (1 - max_iou_j)`` (linear)
    or ``min_j exp((max_iou_j^2 - iou_ij^2) * gaussian_sigma)``; a detection is kept when
    ``score_i * decay_i > post_threshold``, then the ``keep_top_k`` best of the image.

    Args:
        bboxes (Variable): ``[N, M, 4]`` boxes (xmin, ymin, xmax, ymax), float32/float64.
        scores (Variable): ``[N, C, M]`` class scores, float32/float64.
        score_threshold (float): candidates must score above it.
        post_threshold (float): decayed scores must be above it.
        nms_top_k (int): candidates per class (-1: all).
        keep_top_k (int): detections per image (-1: all).
        use_gaussian (bool): gaussian decay instead of linear. Default False.
        gaussian_sigma (float): sigma of the gaussian decay. Default 2.0.
        background_label (int): the class skipped (-1: none). Default 0.
        normalized (bool): the boxes are normalized (else pixel boxes, +1 in widths).
            Default True.
        return_index (bool): also return Index. Default False.
        name (str | None): name prefix of the outputs. Default None.
    Returns:
        Variable | tuple: the LoD tensor ``[K, 6]`` of ``(label, decayed score, xmin, ymin,
        xmax, ymax)``, one sequence per image (``stop_gradient=True``); with
        ``return_index`` also Index ``[K, 1]`` int32, each detection's row ``n * M + box``.
    Raises:
        TypeError: ``bboxes``/``scores`` is not a float32/float64 Variable, or an argument
            has the wrong type (as fluid 1.8: thresholds and sigma float, top-ks and
            background_label int, flags bool).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     boxes = fluid.data("boxes", [-1, 2, 4])
        ...     scores = fluid.data("scores", [-1, 2, 2])
        ...     out = fluid.layers.matrix_nms(boxes, scores, score_threshold=0.1,
        ...                                   post_threshold=0.0, nms_top_k=10, keep_top_k=10)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"boxes": np.array([[[0, 0, 1, 1], [0, 0, 1, 0.5]]], "float32"),
        ...         "scores": np.array([[[0.1, 0.1], [0.9, 0.8]]], "float32")}
        >>> exe.run(main, feed=feed, fetch_list=[out])[0][:, :2]   # label, decayed score
        array([[1. , 0.9],
               [1. , 0.4]], dtype=float32)
    """
    layer = "matrix_nms"
    check_variable_and_dtype(bboxes, "BBoxes", _FLOATS, layer)
    check_variable_and_dtype(scores, "Scores", _FLOATS, layer)
    for arg, v, typ in (("score_threshold", score_threshold, float),
                        ("post_threshold", post_threshold, float),
                        ("nums_top_k", nms_top_k, int), ("keep_top_k", keep_top_k, int),
                        ("normalized", normalized, bool), ("use_gaussian", use_gaussian, bool),
                        ("gaussian_sigma", gaussian_sigma, float),
                        ("background_label", background_label, int)):
        check_type(v, arg, typ, layer)
    helper = LayerHelper(layer, name=name)
    out = helper.create_variable_for_type_inference(bboxes.dtype, stop_gradient=True)
    index = helper.create_variable_for_type_inference("int32", stop_gradient=True)
    helper.append_op(type=layer, inputs={"BBoxes": bboxes, "Scores": scores},
                     outputs={"Out": out, "Index": index},
                     attrs={"background_label": background_label,
                            "score_threshold": score_threshold,
                            "post_threshold": post_threshold, "nms_top_k": nms_top_k,
                            "gaussian_sigma": gaussian_sigma, "use_gaussian": use_gaussian,
                            "keep_top_k": keep_top_k, "normalized": normalized})
    return (out, index) if return_index else out
