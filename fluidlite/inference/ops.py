"""The op types the inference passes create: ``conv2d_fusion``, ``winograd_filter_tiles``,
``depthwise_band_filter``, ``depthwise_separable_fusion``, ``scaled_dot_product_attention``,
``fc_group`` and ``fused_fc_elementwise_layernorm`` (``fc`` is fluid's own op, in
``ops/math_more.py``).

``conv2d_fusion`` is Paddle's name for the same fusion (``conv_elementwise_add_act_fuse_pass``
makes it), so a program optimised here and saved still names ops Paddle Inference knows. Its
kernel is ``conv2d``'s (with its pointwise, depthwise and im2col paths) followed by the bias
and the activation in place on the fresh product -- one temporary and one pass over memory
less per fused op. ``fused_fc_elementwise_layernorm`` is Paddle's too, and works the same way:
the residual add and the layer norm run on each block of the fc's product as its GEMM part
makes it.

``scaled_dot_product_attention`` (made by ``attention_fuse_pass``; fluidlite's own type, Paddle
fuses attention only together with its QKV projections) is
``softmax(alpha * Q @ K^T [+ Mask]) @ V`` in the fewest passes over the score matrix: the
product is written once, shifted by its row max, scaled, clipped and exponentiated in place,
and the normalisation by the row sums is applied to the (smaller) ``[.., Lq, Dv]`` result
instead of the ``[.., Lq, Lk]`` probabilities. With two threads or more (``core.threads``) a
large attention is cut along its first batch axis of two or more (the batch, else the heads)
into fixed parts that run in parallel, each through its own matrices: the bits do not depend
on the threads.

Inference-only: ``no_grad`` (the passes run on test-mode programs). Registered on import of
``fluidlite.inference``.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Tuple

import numpy as np

from ..core import threads
from ..core.dtypes import to_numpy_dtype
from ..core.registry import OpDef, VarSpec, get_op_def, register
from ..ops import _winograd
from ..ops.activation import max_to, relu6_to, relu_to, row_sums
from ..ops.activation_extra import hard_swish_to
from ..ops.broadcast import whole_runs
from ..ops.conv import (band_filter, band_filter_shape, channels_last_filter,
                        channels_last_filter_shape, channels_last_kernel, conv2d_forward,
                        separable_forward)
from ..ops.norm import ln_row_parts, ln_rows

# fluid's SoftmaxFunctor clips the shifted logits here (ops/activation.py, ValueClip)
_SOFTMAX_CLIP = -64.0

__all__ = ["ACTIVATIONS", "ACTIVATION_ATTRS", "ChannelsLastFilter", "Conv2DFusion",
           "DepthwiseBandFilter", "DepthwiseSeparableFusion", "FCGroup",
           "FusedFCElementwiseLayerNorm",
           "ScaledDotProductAttention", "WinogradFilterTiles"]


def _sigmoid(x: np.ndarray) -> np.ndarray:
    # in place on the fresh product; exp of -x without overflow warnings for large |x|
    with np.errstate(over="ignore"):
        np.negative(x, out=x)
        np.exp(x, out=x)
    x += 1
    np.reciprocal(x, out=x)
    return x


def _relu(x: np.ndarray) -> np.ndarray:
    return relu_to(x, x)


def _tanh(x: np.ndarray) -> np.ndarray:
    return np.tanh(x, out=x)


def _relu6(x: np.ndarray) -> np.ndarray:
    # fluid's relu6 with its default threshold (the pass fuses only threshold 6)
    return relu6_to(x, x)


def _hard_swish(x: np.ndarray) -> np.ndarray:
    # fluid's hard_swish with its default attrs (the pass fuses only those), in place: the
    # op's own kernel (ops/activation_extra.py)
    return hard_swish_to(x, x)


# activation attr value -> in-place kernel ("" / "identity": none)
ACTIVATIONS = {"": None, "identity": None, "relu": _relu, "sigmoid": _sigmoid, "tanh": _tanh,
               "relu6": _relu6, "hard_swish": _hard_swish}
# the attrs an activation op must have for its kernel above to be its own
ACTIVATION_ATTRS = {"relu6": {"threshold": 6.0},
                    "hard_swish": {"threshold": 6.0, "scale": 6.0, "offset": 3.0}}


@register
class WinogradFilterTiles(OpDef):
    """Out [16, K, C] = (G (x) G) W: the Winograd F(2x2, 3x3) transform of a 3x3 filter
    W [K, C, 3, 3] (``ops/_winograd.py``), which ``conv2d_fusion`` takes as ``FilterTiles``
    so that a constant filter is transformed once, at load (fluidlite's own op;
    ``conv_winograd_filter_pass`` folds it)."""
    type, inputs, outputs = "winograd_filter_tiles", ("Filter",), ("Out",)
    no_grad = True

    def infer(self, Filter: Any) -> Dict[str, Any]:
        if len(Filter.shape) != 4 or tuple(Filter.shape[2:]) != (3, 3):
            raise ValueError(f"winograd_filter_tiles: Filter must be [K, C, 3, 3], got "
                             f"{list(Filter.shape)}")
        return {"Out": VarSpec((16, Filter.shape[0], Filter.shape[1]), Filter.dtype)}

    def forward(self, Filter: np.ndarray) -> Dict[str, np.ndarray]:
        return {"Out": _winograd.filter_tiles(Filter)}


@register
class ChannelsLastFilter(OpDef):
    """Out: the filter W [F, C/groups, kh, kw] laid out for the channels-last kernel of an
    NHWC input of ``input_shape`` [N, H, W, C] and the convolution's attributes
    (``ops/_conv_last.py``: W^T [C*kh*kw, F] for a GEMM, a depthwise filter's taps
    [kh, kw, C], tiled along the output row for stride 1); ``conv2d_fusion`` takes it as
    ``FilterLast`` so that a constant filter is laid out once, at load (fluidlite's own op;
    ``conv2d_fusion_layout_transfer_pass`` folds it)."""
    type, inputs, outputs = "channels_last_filter", ("Filter",), ("Out",)
    no_grad = True

    def infer(self, Filter: Any, *, input_shape: Any = (), strides: Any = (1, 1),
              paddings: Any = (0, 0), padding_algorithm: str = "EXPLICIT", groups: int = 1,
              dilations: Any = (1, 1)) -> Dict[str, Any]:
        shape = channels_last_filter_shape(Filter.shape, to_numpy_dtype(Filter.dtype),
                                           input_shape, strides, paddings, padding_algorithm,
                                           groups, dilations)
        return {"Out": VarSpec(shape, Filter.dtype)}

    def forward(self, Filter: np.ndarray, *, input_shape: Any = (), strides: Any = (1, 1),
                paddings: Any = (0, 0), padding_algorithm: str = "EXPLICIT", groups: int = 1,
                dilations: Any = (1, 1)) -> Dict[str, np.ndarray]:
        return {"Out": channels_last_filter(Filter, input_shape, strides, paddings,
                                            padding_algorithm, groups, dilations)}


@register
class DepthwiseBandFilter(OpDef):
    """Out [C, K, m*tw]: the banded matrices the depthwise kernel multiplies a small map's
    GEMM rows by (``ops/_conv_kernels.py``, ``_Band``) for the depthwise filter
    W [C*m, 1, kh, kw], an NCHW input of ``input_size`` [H, W] and the convolution's
    attributes; ``conv2d_fusion`` takes it as ``FilterBand`` so that a constant filter is laid
    out once, at load (fluidlite's own op; ``conv_band_filter_pass`` folds it)."""
    type, inputs, outputs = "depthwise_band_filter", ("Filter",), ("Out",)
    no_grad = True

    def infer(self, Filter: Any, *, input_size: Any = (0, 0), strides: Any = (1, 1),
              paddings: Any = (0, 0), padding_algorithm: str = "EXPLICIT", groups: int = 1,
              dilations: Any = (1, 1)) -> Dict[str, Any]:
        shape = None
        if len(Filter.shape) == 4 and len(input_size) == 2:
            shape = band_filter_shape(input_size, Filter.shape, to_numpy_dtype(Filter.dtype),
                                      strides, paddings, padding_algorithm, groups, dilations)
        if shape is None:
            raise ValueError(f"depthwise_band_filter: no banded depthwise kernel runs for the "
                             f"filter {Filter.dtype} {list(Filter.shape)} (groups {groups}) on "
                             f"an input of size {list(input_size)}")
        return {"Out": VarSpec(shape, Filter.dtype)}

    def forward(self, Filter: np.ndarray, *, input_size: Any = (0, 0), strides: Any = (1, 1),
                paddings: Any = (0, 0), padding_algorithm: str = "EXPLICIT", groups: int = 1,
                dilations: Any = (1, 1)) -> Dict[str, np.ndarray]:
        return {"Out": band_filter(Filter, input_size, strides, paddings, padding_algorithm,
                                   groups, dilations)}


@register
class Conv2DFusion(OpDef):
    """Output = act(conv2d(Input, Filter) + Bias[channel]) (Paddle's ``conv2d_fusion``;
    ``activation`` identity, relu, relu6 (threshold 6), sigmoid, tanh or hard_swish (its
    default attrs: fluidlite's extension of the cuDNN set, fused by the passes); NCHW or NHWC as
    ``data_format``). ``FilterTiles`` (fluidlite's own slot, made by
    ``conv_winograd_filter_pass``): the filter's ``winograd_filter_tiles``, used instead of
    transforming the filter on every run when the Winograd kernel runs (same bits);
    ``FilterBand`` (likewise, from ``conv_band_filter_pass``): a depthwise filter's
    ``depthwise_band_filter`` for the input's size, used when the banded kernel runs.
    ``FilterLast`` (likewise, from ``conv2d_fusion_layout_transfer_pass``): the filter's
    ``channels_last_filter`` for an NHWC input, used by the channels-last kernels.
    ``ResidualData`` (Paddle's slot, made by ``conv_elementwise_add2_act_fuse_pass``): a tensor
    of the output's shape added after the bias, before the activation. ``ActScale`` and
    ``ActShift`` (fluidlite's own one-element slots, from ``conv_act_affine_fuse_pass``): a
    learnable affine after the activation, each optional:

        Output = act(conv2d(Input, Filter) + Bias + ResidualData) * ActScale + ActShift"""
    type, inputs, outputs = ("conv2d_fusion",
                             ("Input", "Filter", "Bias?", "FilterTiles?", "FilterBand?",
                              "ResidualData?", "FilterLast?", "ActScale?", "ActShift?"),
                             ("Output",))
    no_grad = True
    extra_attrs = {"use_cudnn": False, "use_mkldnn": False, "workspace_size_MB": 512,
                   "exhaustive_search": False, "split_channels": [], "is_test": True}

    def infer(self, Input: Any, Filter: Any, Bias: Any = None, FilterTiles: Any = None,
              FilterBand: Any = None, ResidualData: Any = None, FilterLast: Any = None,
              ActScale: Any = None, ActShift: Any = None, *,
              strides: Any = (1, 1),
              paddings: Any = (0, 0), padding_algorithm: str = "EXPLICIT", groups: int = 1,
              dilations: Any = (1, 1), data_format: str = "NCHW",
              activation: str = "identity") -> Dict[str, Any]:
        _check_affine(self.type, Filter, ActScale, ActShift)
        if FilterBand is not None:
            hw = tuple(Input.shape[2:]) if len(Input.shape) == 4 else (-1, -1)
            want = None
            if data_format in ("NCHW", "AnyLayout") and len(Filter.shape) == 4:
                want = band_filter_shape(hw, Filter.shape, to_numpy_dtype(Filter.dtype),
                                         strides, paddings, padding_algorithm, groups,
                                         dilations)
            if want is None or tuple(FilterBand.shape) != want \
                    or FilterBand.dtype != Filter.dtype:
                raise ValueError(f"conv2d_fusion: FilterBand must be the depthwise filter's "
                                 f"banded matrices for the NCHW input {list(Input.shape)}, "
                                 f"{Filter.dtype} {list(want) if want else '(none runs)'}, "
                                 f"got {FilterBand.dtype} {list(FilterBand.shape)}")
        if FilterLast is not None:
            try:
                want = channels_last_filter_shape(
                    Filter.shape, to_numpy_dtype(Filter.dtype), Input.shape, strides, paddings,
                    padding_algorithm, groups, dilations) if data_format == "NHWC" else None
            except ValueError:
                want = None
            if want is None or tuple(FilterLast.shape) != want \
                    or FilterLast.dtype != Filter.dtype:
                raise ValueError(f"conv2d_fusion: FilterLast must be the filter laid out for "
                                 f"the channels-last kernel of the {data_format} input "
                                 f"{list(Input.shape)}, {Filter.dtype} "
                                 f"{list(want) if want else '(none runs)'}, got "
                                 f"{FilterLast.dtype} {list(FilterLast.shape)}")
        if FilterTiles is not None:
            want = (16,) + tuple(Filter.shape[:2])
            if tuple(FilterTiles.shape) != want or FilterTiles.dtype != Filter.dtype:
                raise ValueError(f"conv2d_fusion: FilterTiles must be the filter's Winograd "
                                 f"transform, {Filter.dtype} {list(want)}, got "
                                 f"{FilterTiles.dtype} {list(FilterTiles.shape)}")
        out = get_op_def("conv2d").run_infer(
            [Input, Filter], dict(strides=strides, paddings=paddings,
                                  padding_algorithm=padding_algorithm, groups=groups,
                                  dilations=dilations, data_format=data_format))
        if ResidualData is not None:
            got, want = tuple(ResidualData.shape), tuple(out["Output"].shape)
            if len(got) != len(want) or any(a != b and a >= 0 and b >= 0
                                              for a, b in zip(got, want)) \
                    or ResidualData.dtype != out["Output"].dtype:
                raise ValueError(f"conv2d_fusion: ResidualData must have the output's shape "
                                 f"and dtype, {out['Output'].dtype} {list(want)}, got "
                                 f"{ResidualData.dtype} {list(got)}")
        return out

    def forward(self, Input: np.ndarray, Filter: np.ndarray, Bias: Any = None,
                FilterTiles: Any = None, FilterBand: Any = None, ResidualData: Any = None,
                FilterLast: Any = None, ActScale: Any = None, ActShift: Any = None, *,
                strides: Any = [1, 1], paddings: Any = [0, 0],
                padding_algorithm: str = "EXPLICIT", groups: int = 1, dilations: Any = [1, 1],
                data_format: str = "NCHW", activation: str = "identity"
                ) -> Dict[str, np.ndarray]:
        if activation not in ACTIVATIONS:
            raise ValueError(f"{self.type}: activation '{activation}' is not supported "
                             f"(supported: {sorted(k for k in ACTIVATIONS if k)})")
        act = ACTIVATIONS[activation]
        if channels_last_kernel(Input.shape, Filter.shape, np.result_type(Input, Filter),
                                strides, paddings, padding_algorithm, groups, dilations,
                                data_format):
            epilogue = _rows_epilogue(Bias, ResidualData, act, ActScale, ActShift)
        else:
            epilogue = _nchw_epilogue(Bias, ResidualData, act, data_format, ActScale,
                                      ActShift)
        # conv2d's own kernels (depthwise, pointwise, Winograd and im2col paths, one place),
        # the bias, residual and activation applied to each image (or each part of its GEMM)
        # while it is in cache where they can
        out = conv2d_forward(Input, Filter, strides, paddings, padding_algorithm, groups,
                             dilations, data_format, FilterTiles, epilogue, FilterBand,
                             FilterLast)
        return {"Output": out}


_Epilogue = Optional[Callable[[np.ndarray, tuple], None]]


def _check_affine(op: str, Filter: Any, scale: Any, shift: Any, prefix: str = "") -> None:
    """``ActScale`` / ``ActShift`` are one-element tensors of the filter's dtype."""
    for slot, v in (("ActScale", scale), ("ActShift", shift)):
        if v is not None and (any(int(d) != 1 for d in v.shape) or v.dtype != Filter.dtype):
            raise ValueError(f"{op}: {prefix}{slot} must be a one-element {Filter.dtype} "
                             f"tensor (the learnable affine after the activation), got "
                             f"{v.dtype} {list(v.shape)}")


def _affine(act: Any, scale: Any, shift: Any) -> Any:
    """``act`` followed by ``block * scale + shift`` in place (each optional; the bits of
    elementwise_mul then elementwise_add by one-element tensors), or ``act`` alone."""
    if scale is None and shift is None:
        return act
    s = None if scale is None else scale.reshape(())
    c = None if shift is None else shift.reshape(())

    def both(block: np.ndarray) -> None:
        if act is not None:
            act(block)
        if s is not None:
            np.multiply(block, s.astype(block.dtype, copy=False), out=block)
        if c is not None:
            np.add(block, c.astype(block.dtype, copy=False), out=block)
    return both


def _rows_epilogue(Bias: Any, ResidualData: Any, act: Any, ActScale: Any = None,
                   ActShift: Any = None) -> _Epilogue:
    """``conv2d_fusion``'s epilogue for a channels-last kernel: blocks of the NHWC output seen
    as [N*oh*ow, F] rows (``conv2d_forward``); None when there is nothing to apply. A bias
    of fewer than ``_NARROW`` channels is added to whole runs of pixels (T pixels of F
    channels against the bias tiled T times): NumPy loops over the rows one F-element run at
    a time otherwise -- [8192, 32] 0.069 ms against 0.046, [8192, 16] 0.048 against 0.021 on
    one thread; the same additions, so the same bits. ``ActScale`` / ``ActShift``: the
    affine after the activation (``Conv2DFusion``)."""
    act = _affine(act, ActScale, ActShift)
    if Bias is None and ResidualData is None and act is None:
        return None
    res = None if ResidualData is None else ResidualData.reshape(-1, ResidualData.shape[-1])
    bias = None if Bias is None else Bias.reshape(-1)
    runs = None
    if bias is not None and bias.size < _NARROW:
        runs = np.tile(bias, _NARROW * 64 // bias.size)

    def epilogue(block: np.ndarray, where: tuple) -> None:
        if bias is not None:
            b = bias[where[1]].astype(block.dtype, copy=False)
            whole = 0 if runs is None or block.shape[1] != bias.size \
                or not block.flags.c_contiguous else block.size // runs.size * runs.size
            if whole:
                flat = block.reshape(-1)
                flat[:whole].reshape(-1, runs.size).__iadd__(runs.astype(block.dtype,
                                                                          copy=False))
                block[whole // bias.size:] += b
            else:
                block += b
        if res is not None:
            block += res[where].astype(block.dtype, copy=False)
        if act is not None:
            act(block)
    return epilogue


_NARROW = 64        # channels below which ``_rows_epilogue`` adds its bias in tiled runs


def _nchw_epilogue(Bias: Any, ResidualData: Any, act: Any, data_format: str,
                   ActScale: Any = None, ActShift: Any = None) -> _Epilogue:
    """``conv2d_fusion``'s epilogue for the NCHW kernels: blocks of the output seen as
    [N, F, oh*ow] (``conv2d_forward``); None when there is nothing to apply."""
    act = _affine(act, ActScale, ActShift)
    if Bias is None and ResidualData is None and act is None:
        return None
    bias = None if Bias is None else Bias.reshape(-1, 1)
    res = None
    if ResidualData is not None:        # as the NCHW output the epilogue sees: [N, F, P]
        r = ResidualData.transpose(0, 3, 1, 2) if data_format == "NHWC" else ResidualData
        res = r.reshape(r.shape[0], r.shape[1], -1)

    def epilogue(block: np.ndarray, where: tuple) -> None:
        # block = Output as [N, F, oh*ow], at ``where`` (see conv2d_forward)
        if bias is not None:
            with whole_runs(block.shape[-1], block.size):   # a channel's bias on its map
                block += bias[where[1] if len(where) > 1 else slice(None)].astype(
                    block.dtype, copy=False)
        if res is not None:
            block += res[where].astype(block.dtype, copy=False)
        if act is not None:
            act(block)
    return epilogue


def _stage_epilogue(Bias: Any, act: Any) -> Optional[Callable[[np.ndarray], None]]:
    """``depthwise_separable_fusion``'s expand epilogue: bias and activation in place on a
    block [rows, W, E] of the expanded map; None when there is nothing to apply."""
    if Bias is None and act is None:
        return None
    bias = None if Bias is None else Bias.reshape(-1)

    def post(block: np.ndarray) -> None:
        if bias is not None:
            block += bias.astype(block.dtype, copy=False)
        if act is not None:
            act(block)
    return post


@register
class DepthwiseSeparableFusion(OpDef):
    """A depthwise-separable block of three NHWC ``conv2d_fusion`` layers in one op
    (fluidlite's own type, made by ``depthwise_separable_fuse_pass``; MobileNet's blocks)::

        E = expand_activation(conv2d(Input, ExpandFilter) + ExpandBias)        1x1, optional
        D = depthwise_activation(conv2d(E, DepthwiseFilter, groups=E's channels) + DepthwiseBias)
        Output = activation(conv2d(D, ProjectFilter) + ProjectBias + ResidualData)      1x1
                 * ActScale + ActShift

    ``strides``, ``paddings``, ``padding_algorithm`` and ``dilations`` are the depthwise
    layer's; the 1x1 layers have stride 1 and no padding. Biases, ``ResidualData``, the
    ``*FilterLast`` layouts (``channels_last_filter`` of each layer, folded at load) and the
    last layer's affine ``ActScale`` / ``ActShift`` are optional, as in ``conv2d_fusion``;
    activations as its ``activation``.

    The kernel (``ops/_conv_last.py``, ``separable_fwd``) runs the three layers strip by strip
    of output rows, so E and D -- the block's largest maps -- never exist whole and the block
    costs one hand-off to the threads instead of three. Each layer's arithmetic is its
    ``conv2d_fusion``'s (the same GEMMs and einsum, the same bias and activation in the same
    order); an expanding GEMM cut per map row may round differently in the last bit."""
    type, inputs, outputs = ("depthwise_separable_fusion",
                             ("Input", "DepthwiseFilter", "ProjectFilter", "ExpandFilter?",
                              "ExpandBias?", "ExpandFilterLast?", "DepthwiseBias?",
                              "DepthwiseFilterLast?", "ProjectBias?", "ProjectFilterLast?",
                              "ResidualData?", "ActScale?", "ActShift?"),
                             ("Output",))
    no_grad = True

    def infer(self, Input: Any, DepthwiseFilter: Any, ProjectFilter: Any,
              ExpandFilter: Any = None, ExpandBias: Any = None, ExpandFilterLast: Any = None,
              DepthwiseBias: Any = None, DepthwiseFilterLast: Any = None,
              ProjectBias: Any = None, ProjectFilterLast: Any = None,
              ResidualData: Any = None, ActScale: Any = None, ActShift: Any = None, *,
              strides: Any = (1, 1), paddings: Any = (0, 0),
              padding_algorithm: str = "EXPLICIT", dilations: Any = (1, 1),
              expand_activation: str = "identity", depthwise_activation: str = "identity",
              activation: str = "identity") -> Dict[str, Any]:
        self._acts(expand_activation, depthwise_activation, activation)
        _check_affine(self.type, ProjectFilter, ActScale, ActShift)
        if len(Input.shape) != 4:
            raise ValueError(f"{self.type}: Input must be an NHWC map [N, H, W, C], got "
                             f"{list(Input.shape)}")
        if ExpandFilter is None and (ExpandBias is not None or ExpandFilterLast is not None
                                     or expand_activation not in ("", "identity")):
            raise ValueError(f"{self.type}: ExpandBias, ExpandFilterLast or an "
                             f"expand_activation ({expand_activation!r}) given without "
                             f"ExpandFilter: there is no expanding layer to apply them to")
        fusion, h = get_op_def("conv2d_fusion"), Input
        one = dict(strides=[1, 1], paddings=[0, 0], padding_algorithm="EXPLICIT",
                   dilations=[1, 1], data_format="NHWC")
        if ExpandFilter is not None:
            self._check(h, ExpandFilter, ExpandBias, "Expand", "pointwise", one, 1)
            h = fusion.infer(h, ExpandFilter, ExpandBias, FilterLast=ExpandFilterLast,
                             groups=1, **one)["Output"]
        dw = dict(strides=strides, paddings=paddings, padding_algorithm=padding_algorithm,
                  dilations=dilations, data_format="NHWC")
        self._check(h, DepthwiseFilter, DepthwiseBias, "Depthwise", "depthwise", dw,
                    h.shape[3])
        h = fusion.infer(h, DepthwiseFilter, DepthwiseBias, FilterLast=DepthwiseFilterLast,
                         groups=h.shape[3], **dw)["Output"]
        self._check(h, ProjectFilter, ProjectBias, "Project", "pointwise", one, 1)
        return fusion.infer(h, ProjectFilter, ProjectBias, ResidualData=ResidualData,
                            FilterLast=ProjectFilterLast, groups=1, **one)

    def _check(self, x: Any, w: Any, bias: Any, layer: str, kind: str,
               attrs: Dict[str, Any], groups: int) -> None:
        """``w`` runs as a ``kind`` channels-last layer on ``x``; ``bias`` has its channels."""
        geom = {k: v for k, v in attrs.items() if k != "data_format"}
        got = "" if len(w.shape) != 4 or w.shape[1] * groups != x.shape[3] else \
            channels_last_kernel(x.shape, w.shape, to_numpy_dtype(w.dtype), groups=groups,
                                 data_format="NHWC", **geom)
        if got != kind:
            raise ValueError(f"{self.type}: {layer}Filter {list(w.shape)} must be a {kind} "
                             f"layer on its NHWC input {list(x.shape)} (known H and W"
                             + (", stride 1, no padding)" if kind == "pointwise" else
                                f"; {geom}, groups {groups})"))
        if bias is not None and int(np.prod(bias.shape)) not in (-1, int(w.shape[0])):
            raise ValueError(f"{self.type}: {layer}Bias must have {w.shape[0]} elements (the "
                             f"layer's channels), got shape {list(bias.shape)}")

    def _acts(self, *names: str) -> list:
        for a in names:
            if a not in ACTIVATIONS:
                raise ValueError(f"{self.type}: activation '{a}' is not supported "
                                 f"(supported: {sorted(k for k in ACTIVATIONS if k)})")
        return [ACTIVATIONS[a] for a in names]

    def forward(self, Input: np.ndarray, DepthwiseFilter: np.ndarray,
                ProjectFilter: np.ndarray, ExpandFilter: Any = None, ExpandBias: Any = None,
                ExpandFilterLast: Any = None, DepthwiseBias: Any = None,
                DepthwiseFilterLast: Any = None, ProjectBias: Any = None,
                ProjectFilterLast: Any = None, ResidualData: Any = None,
                ActScale: Any = None, ActShift: Any = None, *,
                strides: Any = (1, 1), paddings: Any = (0, 0),
                padding_algorithm: str = "EXPLICIT", dilations: Any = (1, 1),
                expand_activation: str = "identity", depthwise_activation: str = "identity",
                activation: str = "identity") -> Dict[str, np.ndarray]:
        acts = self._acts(expand_activation, depthwise_activation, activation)
        out = separable_forward(
            Input, ExpandFilter, DepthwiseFilter, ProjectFilter, strides, paddings,
            padding_algorithm, dilations, _stage_epilogue(ExpandBias, acts[0]),
            _rows_epilogue(DepthwiseBias, None, acts[1]),
            _rows_epilogue(ProjectBias, ResidualData, acts[2], ActScale, ActShift),
            (ExpandFilterLast, DepthwiseFilterLast, ProjectFilterLast))
        return {"Output": out}


def _attention_shape(q: Any, k: Any, v: Any, transpose_k: bool) -> Tuple[int, ...]:
    """The output shape of ``softmax(Q @ op(K)) @ V`` (batch dims broadcast), checked."""
    if len(q.shape) < 2 or len(k.shape) < 2 or len(v.shape) < 2:
        raise ValueError(f"scaled_dot_product_attention: Q, K and V must be at least 2-D, got "
                         f"{list(q.shape)}, {list(k.shape)}, {list(v.shape)}")
    dk, lk = (k.shape[-1], k.shape[-2]) if transpose_k else (k.shape[-2], k.shape[-1])
    for a, b, what in ((q.shape[-1], dk, "Q's last dim and K's contracted dim"),
                       (lk, v.shape[-2], "the key lengths of K and V")):
        if a >= 0 and b >= 0 and a != b:
            raise ValueError(f"scaled_dot_product_attention: {what} differ ({a} vs {b}); Q "
                             f"{list(q.shape)}, K {list(k.shape)}, V {list(v.shape)}, "
                             f"transpose_k={transpose_k}")
    n = max(len(t.shape) for t in (q, k, v)) - 2
    batch = []
    for i in range(n):              # right-aligned batch dims; -1 (unknown) wins over 1
        dims = [t.shape[len(t.shape) - 2 - n + i] for t in (q, k, v)
                if len(t.shape) - 2 - n + i >= 0]
        batch.append(-1 if -1 in dims else max(dims))
    return tuple(batch) + (q.shape[-2], v.shape[-1])


@register
class ScaledDotProductAttention(OpDef):
    """Out = softmax(alpha * Q @ op(K) [+ Mask], last axis) @ V with op = transpose when
    ``transpose_k`` (what ``attention_fuse_pass`` makes of matmul [scale] [elementwise_add]
    softmax matmul); the softmax is fluid's (row max subtracted, clipped at -64)."""
    type, inputs, outputs = "scaled_dot_product_attention", ("Q", "K", "V", "Mask?"), ("Out",)
    no_grad = True

    def infer(self, Q: Any, K: Any, V: Any, Mask: Any = None, *, alpha: float = 1.0,
              transpose_k: bool = True) -> Dict[str, Any]:
        return {"Out": VarSpec(_attention_shape(Q, K, V, transpose_k), Q.dtype)}

    def forward(self, Q: np.ndarray, K: np.ndarray, V: np.ndarray, Mask: Any = None, *,
                alpha: float = 1.0, transpose_k: bool = True) -> Dict[str, np.ndarray]:
        lead = Q.shape[:-2]
        axis = next((i for i, d in enumerate(lead) if d >= _PARTS), None)
        if axis is None or K.shape[:-2] != lead or V.shape[:-2] != lead \
                or Q.size * K.shape[-1 if not transpose_k else -2] < _SPLIT_MIN \
                or not threads.splitting():
            return {"Out": _attention(Q, K, V, Mask, alpha, transpose_k)}
        # the first batch axis of two or more cut in fixed parts (every thread count from 2
        # gives the same bits: each matrix's rows are computed alike in any part)
        out = np.empty(lead + (Q.shape[-2], V.shape[-1]), np.result_type(Q, K, V))
        mask_axis = None if Mask is None else axis - (out.ndim - Mask.ndim)

        def part(lo: int, hi: int) -> None:
            cut = (slice(None),) * axis + (slice(lo, hi),)
            m = Mask
            if m is not None and mask_axis is not None and mask_axis >= 0 \
                    and m.shape[mask_axis] != 1:
                m = m[(slice(None),) * mask_axis + (slice(lo, hi),)]
            out[cut] = _attention(Q[cut], K[cut], V[cut], m, alpha, transpose_k)
        threads.parallel_ranges(part, lead[axis], _PARTS)
        return {"Out": out}


_PARTS = 2                  # fixed parts of a large attention (``ScaledDotProductAttention``)
_SPLIT_MIN = 1 << 18        # score-matrix entries times head width from which it is cut


def _attention(Q: np.ndarray, K: np.ndarray, V: np.ndarray, Mask: Any, alpha: float,
               transpose_k: bool) -> np.ndarray:
    """``ScaledDotProductAttention`` of one part."""
    typ = Q.dtype.type
    s = np.matmul(Q, np.swapaxes(K, -1, -2) if transpose_k else K)
    if Mask is not None or alpha < 0:
        s *= typ(alpha)
        if Mask is not None:
            s += Mask.astype(s.dtype, copy=False)
        s -= np.fmax.reduce(s, axis=-1, keepdims=True)      # (as softmax: see row_sums)
    else:
        # alpha >= 0: max(alpha s) = alpha max(s), so shift first and scale the shift
        s -= np.fmax.reduce(s, axis=-1, keepdims=True)
        s *= typ(alpha)
    max_to(s, s, _SOFTMAX_CLIP)
    np.exp(s, out=s)
    total = row_sums(s, -1)
    out = np.matmul(s, V)
    out /= total
    return out


@register
class FCGroup(OpDef):
    """Out[j] = fc(Input, W[j], Bias[j]; in_num_col_dims, activation_types[j]) for every j:
    fc layers reading one Input (a transformer's Q, K and V projections), made by
    ``fc_group_fuse_pass``. ``fc``'s own kernel (``FC.forward_group``): the GEMM calls of all
    the layers -- each product whole or cut in parts as ``fc`` cuts it, with its bias and
    activation -- run as the items of one parallel call instead of one call per layer, so every
    output has the bits of its ``fc``."""
    type, inputs, outputs = "fc_group", ("Input", "W*", "Bias*"), ("Out*",)
    no_grad = True

    def infer(self, Input: Any, W: Any, Bias: Any, *, in_num_col_dims: int = 1,
              activation_types: Any = ()) -> Dict[str, Any]:
        acts = self._acts(W, Bias, activation_types)
        fc = get_op_def("fc")
        return {"Out": [fc.infer(Input, w, b, in_num_col_dims=in_num_col_dims,
                                 activation_type=a)["Out"] for w, b, a in zip(W, Bias, acts)]}

    @staticmethod
    def _acts(W: Any, Bias: Any, activation_types: Any) -> list:
        acts = list(activation_types) or [""] * len(W)
        if not (len(W) == len(Bias) == len(acts) >= 1):
            raise ValueError(f"fc_group: {len(W)} W, {len(Bias)} Bias and "
                             f"{len(acts)} activation_types; expected as many of each, at "
                             f"least one")
        return acts

    def forward(self, Input: np.ndarray, W: Any, Bias: Any, *, in_num_col_dims: int = 1,
                activation_types: Any = ()) -> Dict[str, Any]:
        acts = self._acts(W, Bias, activation_types)
        return {"Out": get_op_def("fc").forward_group(
            Input, W, Bias, in_num_col_dims=in_num_col_dims, activation_types=acts)}


@register
class FusedFCElementwiseLayerNorm(OpDef):
    """(Out, Mean, Variance) = layer_norm(fc(X, W, Bias0) + Y, Scale, Bias1): fc with
    ``x_num_col_dims`` and ``activation_type``, then layer_norm with ``epsilon`` and
    ``begin_norm_axis`` (Paddle's op, made by ``fc_elementwise_layernorm_fuse_pass`` of a
    transformer's output projections and their residual add). Y has fc's output shape.

    When the normalised rows are fc's rows (the norm's width is W's columns), all operands
    share one float dtype and the product is cut in row blocks: each GEMM part adds its bias,
    activation and Y and normalises its rows while they are in cache -- if the norm is large
    enough to be cut in parts itself (``ops/norm.py``, ``ln_row_parts``); otherwise the norm
    runs on the whole sum after the product. Every row is normalised on its own, so the bits
    are those of ``fc``, ``elementwise_add`` and ``layer_norm`` one after another (what
    other shapes and dtypes run)."""
    type = "fused_fc_elementwise_layernorm"
    inputs = ("X", "W", "Bias0?", "Y", "Scale?", "Bias1?")
    outputs = ("Out", "Mean?", "Variance?")
    no_grad = True

    def infer(self, X: Any, W: Any, Bias0: Any, Y: Any, Scale: Any, Bias1: Any, *,
              x_num_col_dims: int = 1, activation_type: str = "", epsilon: float = 1e-5,
              begin_norm_axis: int = 1) -> Dict[str, Any]:
        fc = get_op_def("fc").infer(X, W, Bias0, in_num_col_dims=x_num_col_dims,
                                    activation_type=activation_type)["Out"]
        if len(fc.shape) != len(Y.shape) or any(
                a >= 0 and b >= 0 and a != b for a, b in zip(fc.shape, Y.shape)):
            raise ValueError(f"{self.type}: Y must have fc's output shape {list(fc.shape)}, "
                             f"got {list(Y.shape)} (input '{self.type}' Y)")
        if not 0.0 <= float(epsilon) <= 1e-3:
            raise ValueError(f"{self.type}: epsilon must be in [0, 0.001], got {epsilon}")
        ln = get_op_def("layer_norm").infer(Y, Scale, Bias1, begin_norm_axis=begin_norm_axis)
        return {"Out": ln["Y"], "Mean": ln["Mean"], "Variance": ln["Variance"]}

    def forward(self, X: np.ndarray, W: np.ndarray, Bias0: Any, Y: np.ndarray, Scale: Any,
                Bias1: Any, *, x_num_col_dims: int = 1, activation_type: str = "",
                epsilon: float = 1e-5, begin_norm_axis: int = 1) -> Dict[str, np.ndarray]:
        fc, ln = get_op_def("fc"), get_op_def("layer_norm")
        rows, n = int(np.prod(X.shape[:x_num_col_dims])), W.shape[1]
        dt = X.dtype

        def norm(s: np.ndarray) -> Dict[str, np.ndarray]:     # layer_norm's own kernel
            got = ln.forward(s, Scale, Bias1, epsilon=epsilon, begin_norm_axis=begin_norm_axis)
            return {"Out": got["Y"], "Mean": got["Mean"], "Variance": got["Variance"]}
        if (dt not in (np.float32, np.float64) or Y.size != rows * n
                or int(np.prod(Y.shape[begin_norm_axis:])) != n
                or any(a is not None and a.dtype != dt for a in (W, Bias0, Y, Scale, Bias1))):
            return norm(fc.forward(X, W, Bias0, in_num_col_dims=x_num_col_dims,
                                   activation_type=activation_type)["Out"] + Y)
        y = Y.reshape(rows, n)
        mu, var = np.empty(rows, dt), np.empty(rows, dt)
        in_parts = ln_row_parts(y, Scale, Bias1)     # decided here: not inside a GEMM part
        normed = []

        def then(block: np.ndarray, r: slice, c: slice) -> None:
            block += y[r, c]
            if in_parts and c == _ALL and r != _ALL:       # a row part: its rows, in cache
                ln_rows(block, Scale, Bias1, epsilon, block, mu[r], var[r])
                normed.append(block.shape[0])
        out = fc.forward_with(X, W, Bias0, then, in_num_col_dims=x_num_col_dims,
                              activation_type=activation_type)
        if not normed:              # the product was not cut in rows: the norm on the sum
            return norm(out.reshape(Y.shape))
        return {"Out": out.reshape(Y.shape), "Mean": mu, "Variance": var}


_ALL = slice(None)
