"""Detection ops of fluid 1.8 (SSD / YOLO / Faster R-CNN building blocks): prior and anchor
generators (``prior_box``, ``density_prior_box``, ``anchor_generator``), box arithmetic
(``box_coder``, ``iou_similarity``, ``box_clip``), matching (``bipartite_match``,
``target_assign``), ``multiclass_nms`` and ``yolo_box``.

None of them is differentiable in fluid (no gradient kernel): the losses built on them
(``ssd_loss``, ...) differentiate through ordinary ops. Boxes are ``[x1, y1, x2, y2]``;
``normalized=False`` / ``box_normalized=False`` means pixel boxes whose width is
``x2 - x1 + 1`` (fluid's convention). Batched inputs carry the image of each row in their
LoD (level 0), as fluid's LoDTensors do; without a LoD the whole input is one image.
"""
from __future__ import annotations

from typing import Any, Dict, List, Sequence, Tuple

import numpy as np

from ..core.registry import OpDef, VarSpec, register

__all__ = ["iou_matrix", "jaccard_matrix", "nms", "expand_aspect_ratios", "offsets_of"]


def _need(op: str, cond: bool, msg: str) -> None:
    if not cond:
        raise ValueError(f"{op}: {msg}")


def offsets_of(lod: Any, rows: int) -> np.ndarray:
    """Row offsets of the level-0 groups of a LoD (deeper levels composed in), or one group
    of all rows when there is no LoD."""
    if not lod:
        return np.array([0, rows], np.int64)
    off = np.asarray(lod[0], np.int64)
    for level in lod[1:]:
        off = np.asarray(level, np.int64)[off]
    return off


def expand_aspect_ratios(ratios: Sequence[float], flip: bool) -> List[float]:
    """fluid's ExpandAspectRatios: 1.0 first, then each new ratio (and 1/ratio when flip)."""
    out = [1.0]
    for ar in ratios:
        if any(abs(ar - o) < 1e-6 for o in out):
            continue
        out.append(float(ar))
        if flip:
            out.append(1.0 / float(ar))
    return out


def _variances(shape: Sequence[int], variances: Sequence[float], dtype) -> np.ndarray:
    return np.broadcast_to(np.asarray(variances, dtype), tuple(shape[:-1]) + (4,)).copy()


class _PriorBase(OpDef):
    inputs, outputs = ("Input", "Image"), ("Boxes", "Variances")
    no_grad = True

    @staticmethod
    def _steps(Input: np.ndarray, Image: np.ndarray, step_w: float, step_h: float):
        img_h, img_w = Image.shape[2], Image.shape[3]
        fh, fw = Input.shape[2], Input.shape[3]
        if step_w == 0 or step_h == 0:
            return img_w / fw, img_h / fh, img_w, img_h, fh, fw
        return step_w, step_h, img_w, img_h, fh, fw

    def _spec(self, Input, Image, num_priors: int, flatten: bool = False):
        _need(self.type, Input.ndim == 4 and Image.ndim == 4,
              f"Input and Image must be 4-D (NCHW), got {list(Input.shape)} and "
              f"{list(Image.shape)}")
        h, w = Input.shape[2], Input.shape[3]
        if flatten:
            n = h * w * num_priors if h >= 0 and w >= 0 else -1
            shape = [n, 4]
        else:
            shape = [h, w, num_priors, 4]
        spec = VarSpec(shape, Input.dtype)
        return {"Boxes": spec, "Variances": spec}


@register
class PriorBox(_PriorBase):
    """SSD prior boxes [H, W, num_priors, 4] (normalized by the image size) centred at
    ((w + offset) * step_w, (h + offset) * step_h); per min size: one box per expanded aspect
    ratio (w = min*sqrt(ar), h = min/sqrt(ar)) and, with max sizes, a square of side
    sqrt(min*max) -- ``min_max_aspect_ratios_order`` puts the min square, then the max square,
    then the other ratios (Caffe's order). Variances repeat ``variances``."""
    type = "prior_box"

    @staticmethod
    def _check(op: str, min_sizes, max_sizes, variances) -> None:
        _need(op, len(min_sizes) > 0 and all(m > 0 for m in min_sizes),
              f"min_sizes must be a non-empty list of positive sizes, got {list(min_sizes)}")
        _need(op, not max_sizes or len(max_sizes) == len(min_sizes),
              f"max_sizes must have as many values as min_sizes ({len(min_sizes)}), got "
              f"{list(max_sizes)}")
        for mn, mx in zip(min_sizes, max_sizes or []):
            _need(op, mx > mn, f"each max size must be greater than its min size, got "
                               f"min {mn} and max {mx}")
        _need(op, len(variances) == 4, f"variances must have 4 values, got {list(variances)}")

    def infer(self, Input, Image, *, min_sizes=(), max_sizes=(), aspect_ratios=(),
              variances=(), flip=True, clip=True, step_w=0.0, step_h=0.0, offset=0.5,
              min_max_aspect_ratios_order=False):
        self._check(self.type, min_sizes, max_sizes, variances)
        n = len(expand_aspect_ratios(aspect_ratios, flip)) * len(min_sizes) + len(max_sizes)
        return self._spec(Input, Image, n)

    def forward(self, Input, Image, *, min_sizes=[], max_sizes=[], aspect_ratios=[],
                variances=[], flip=True, clip=True, step_w=0.0, step_h=0.0, offset=0.5,
                min_max_aspect_ratios_order=False):
        self._check(self.type, min_sizes, max_sizes, variances)
        ars = expand_aspect_ratios(aspect_ratios, flip)
        sw, sh, img_w, img_h, fh, fw = self._steps(Input, Image, step_w, step_h)
        sizes: List[Tuple[float, float]] = []         # (half width, half height) per prior
        for s, mn in enumerate(min_sizes):
            square_max = [np.sqrt(mn * max_sizes[s]) / 2.0] if max_sizes else []
            if min_max_aspect_ratios_order:
                sizes.append((mn / 2.0, mn / 2.0))
                sizes += [(m, m) for m in square_max]
                sizes += [(mn * np.sqrt(ar) / 2.0, mn / np.sqrt(ar) / 2.0) for ar in ars
                          if abs(ar - 1.0) >= 1e-6]
            else:
                sizes += [(mn * np.sqrt(ar) / 2.0, mn / np.sqrt(ar) / 2.0) for ar in ars]
                sizes += [(m, m) for m in square_max]
        half = np.asarray(sizes)                                    # [P, 2]
        cx = (np.arange(fw) + offset) * sw
        cy = (np.arange(fh) + offset) * sh
        cxg = np.broadcast_to(cx[None, :, None], (fh, fw, len(sizes)))
        cyg = np.broadcast_to(cy[:, None, None], (fh, fw, len(sizes)))
        boxes = np.stack([(cxg - half[:, 0]) / img_w, (cyg - half[:, 1]) / img_h,
                          (cxg + half[:, 0]) / img_w, (cyg + half[:, 1]) / img_h], axis=-1)
        if clip:
            boxes = np.clip(boxes, 0.0, 1.0)
        boxes = boxes.astype(Input.dtype)
        return {"Boxes": boxes, "Variances": _variances(boxes.shape, variances, Input.dtype)}


@register
class DensityPriorBox(_PriorBase):
    """Density prior boxes: for each fixed size s (density d) and fixed ratio r, a d x d grid
    of boxes (w = s*sqrt(r), h = s/sqrt(r)) whose centres are spaced ``shift = int(step) // d``
    around the cell centre (``step = int((step_w + step_h) / 2)``); coordinates normalized by
    the image size and clamped to [0, 1]. [H, W, P, 4], or [H*W*P, 4] with
    ``flatten_to_2d``."""
    type = "density_prior_box"

    def _count(self, densities, fixed_sizes, fixed_ratios) -> int:
        _need(self.type, len(densities) == len(fixed_sizes) and len(fixed_sizes) > 0,
              f"densities and fixed_sizes must be non-empty lists of the same length, got "
              f"{list(densities)} and {list(fixed_sizes)}")
        _need(self.type, len(fixed_ratios) > 0 and all(d > 0 for d in densities),
              f"fixed_ratios must be non-empty and densities positive, got "
              f"{list(fixed_ratios)} and {list(densities)}")
        return len(fixed_ratios) * int(sum(d * d for d in densities))

    def infer(self, Input, Image, *, variances=(), clip=True, step_w=0.0, step_h=0.0,
              offset=0.5, densities=(), fixed_sizes=(), fixed_ratios=(), flatten_to_2d=False):
        return self._spec(Input, Image, self._count(densities, fixed_sizes, fixed_ratios),
                          flatten_to_2d)

    def forward(self, Input, Image, *, variances=[], clip=True, step_w=0.0, step_h=0.0,
                offset=0.5, densities=[], fixed_sizes=[], fixed_ratios=[],
                flatten_to_2d=False):
        self._count(densities, fixed_sizes, fixed_ratios)
        sw, sh, img_w, img_h, fh, fw = self._steps(Input, Image, step_w, step_h)
        step_avg = int((sw + sh) * 0.5)
        rel = []                     # (dx, dy, half w, half h) relative to the cell centre
        for size, d in zip(fixed_sizes, densities):
            shift = step_avg // int(d)
            for r in fixed_ratios:
                bw, bh = size * np.sqrt(r), size / np.sqrt(r)
                base = -step_avg / 2.0 + shift / 2.0
                for di in range(int(d)):
                    for dj in range(int(d)):
                        rel.append((base + dj * shift, base + di * shift, bw / 2.0, bh / 2.0))
        r_ = np.asarray(rel)
        cx = ((np.arange(fw) + offset) * sw)[None, :, None] + r_[:, 0]
        cy = ((np.arange(fh) + offset) * sh)[:, None, None] + r_[:, 1]
        cx, cy = np.broadcast_arrays(cx, cy)
        boxes = np.stack([np.maximum((cx - r_[:, 2]) / img_w, 0.0),
                          np.maximum((cy - r_[:, 3]) / img_h, 0.0),
                          np.minimum((cx + r_[:, 2]) / img_w, 1.0),
                          np.minimum((cy + r_[:, 3]) / img_h, 1.0)], axis=-1)
        if clip:
            boxes = np.clip(boxes, 0.0, 1.0)
        boxes = boxes.astype(Input.dtype)
        if flatten_to_2d:
            boxes = boxes.reshape(-1, 4)
        return {"Boxes": boxes, "Variances": _variances(boxes.shape, variances, Input.dtype)}


@register
class AnchorGenerator(OpDef):
    """Faster R-CNN anchors [H, W, A, 4] in pixels: at the cell (h, w) the centre is
    (w*stride_w + offset*(stride_w - 1), h*stride_h + offset*(stride_h - 1)); for each aspect
    ratio ar (outer) and anchor size s (inner): base_w = round(sqrt(stride_w*stride_h / ar)),
    base_h = round(base_w * ar), width = s/stride_w * base_w, height = s/stride_h * base_h,
    box = centre -/+ (size - 1)/2."""
    type, inputs, outputs = "anchor_generator", ("Input",), ("Anchors", "Variances")
    no_grad = True

    def _check(self, anchor_sizes, aspect_ratios, variances, stride) -> None:
        _need(self.type, len(anchor_sizes) > 0 and len(aspect_ratios) > 0,
              f"anchor_sizes and aspect_ratios must not be empty, got {list(anchor_sizes)} "
              f"and {list(aspect_ratios)}")
        _need(self.type, len(stride) == 2 and min(stride) > 0,
              f"stride must be 2 positive values, got {list(stride)}")
        _need(self.type, len(variances) == 4, f"variances must have 4 values, got "
                                              f"{list(variances)}")

    def infer(self, Input, *, anchor_sizes=(), aspect_ratios=(), variances=(), stride=(),
              offset=0.5):
        self._check(anchor_sizes, aspect_ratios, variances, stride)
        _need(self.type, Input.ndim == 4, f"Input must be 4-D (NCHW), got {list(Input.shape)}")
        spec = VarSpec([Input.shape[2], Input.shape[3],
                        len(anchor_sizes) * len(aspect_ratios), 4], Input.dtype)
        return {"Anchors": spec, "Variances": spec}

    def forward(self, Input, *, anchor_sizes=[], aspect_ratios=[], variances=[], stride=[],
                offset=0.5):
        self._check(anchor_sizes, aspect_ratios, variances, stride)
        fh, fw = Input.shape[2], Input.shape[3]
        sw, sh = float(stride[0]), float(stride[1])
        sizes = []
        for ar in aspect_ratios:
            base_w = np.round(np.sqrt(sw * sh / ar))
            base_h = np.round(base_w * ar)
            for s in anchor_sizes:
                sizes.append((s / sw * base_w, s / sh * base_h))
        wh = np.asarray(sizes)
        cx = (np.arange(fw) * sw + offset * (sw - 1))[None, :, None]
        cy = (np.arange(fh) * sh + offset * (sh - 1))[:, None, None]
        cx, cy = np.broadcast_arrays(cx, cy)
        cx = np.broadcast_to(cx, (fh, fw, len(sizes)))
        cy = np.broadcast_to(cy, (fh, fw, len(sizes)))
        anchors = np.stack([cx - 0.5 * (wh[:, 0] - 1), cy - 0.5 * (wh[:, 1] - 1),
                            cx + 0.5 * (wh[:, 0] - 1), cy + 0.5 * (wh[:, 1] - 1)], axis=-1)
        anchors = anchors.astype(Input.dtype)
        return {"Anchors": anchors,
                "Variances": _variances(anchors.shape, variances, Input.dtype)}


# -- box arithmetic -------------------------------------------------------------------------------
def _wh(boxes: np.ndarray, normalized: bool) -> Tuple[np.ndarray, np.ndarray]:
    extra = 0.0 if normalized else 1.0
    return boxes[..., 2] - boxes[..., 0] + extra, boxes[..., 3] - boxes[..., 1] + extra


@register
class BoxCoder(OpDef):
    """encode_center_size: OutputBox[i, j] = ((tx - px)/pw, (ty - py)/ph, log(|tw/pw|),
    log(|th/ph|)) / var[j] for every target i and prior j ([N, M, 4]);
    decode_center_size: centre = var*t*[pw, ph] + [px, py], size = exp(var*t)*[pw, ph], then
    corners (the prior of TargetBox[i, j] is prior j with ``axis=0``, prior i with ``axis=1``).
    var is PriorBoxVar, else the ``variance`` attr, else 1; widths add 1 unless
    ``box_normalized``."""
    type = "box_coder"
    inputs, outputs = ("PriorBox", "PriorBoxVar?", "TargetBox"), ("OutputBox",)
    no_grad = True

    def infer(self, PriorBox, PriorBoxVar=None, TargetBox=None, *,
              code_type="encode_center_size", box_normalized=True, axis=0, variance=()):
        _need(self.type, PriorBox.ndim == 2 and PriorBox.shape[1] == 4,
              f"PriorBox must be [M, 4], got {list(PriorBox.shape)}")
        if PriorBoxVar is not None:
            _need(self.type, PriorBoxVar.ndim == 2 and PriorBoxVar.shape[1] == 4,
                  f"PriorBoxVar must be [M, 4], got {list(PriorBoxVar.shape)}")
        _need(self.type, not variance or len(variance) == 4,
              f"variance must have 4 values, got {list(variance)}")
        _need(self.type, axis in (0, 1), f"axis must be 0 or 1, got {axis}")
        code = code_type.lower()
        if code == "encode_center_size":
            _need(self.type, TargetBox.ndim == 2 and TargetBox.shape[1] == 4,
                  f"TargetBox must be [N, 4] to encode, got {list(TargetBox.shape)}")
            shape = [TargetBox.shape[0], PriorBox.shape[0], 4]
        elif code == "decode_center_size":
            _need(self.type, TargetBox.ndim == 3 and TargetBox.shape[2] == 4,
                  f"TargetBox must be [N, M, 4] to decode, got {list(TargetBox.shape)}")
            shape = list(TargetBox.shape)
        else:
            raise ValueError(f"{self.type}: code_type must be 'encode_center_size' or "
                             f"'decode_center_size', got {code_type!r}")
        return {"OutputBox": VarSpec(shape, TargetBox.dtype, TargetBox.lod_level)}

    def forward(self, PriorBox, PriorBoxVar=None, TargetBox=None, *,
                code_type="encode_center_size", box_normalized=True, axis=0, variance=[]):
        pw, ph = _wh(PriorBox, box_normalized)
        px, py = PriorBox[:, 0] + pw / 2, PriorBox[:, 1] + ph / 2
        if PriorBoxVar is not None:
            var = PriorBoxVar
        elif variance:
            var = np.broadcast_to(np.asarray(variance, PriorBox.dtype), PriorBox.shape)
        else:
            var = None
        code = code_type.lower()
        if code == "encode_center_size":
            tw, th = _wh(TargetBox, box_normalized)
            tx = (TargetBox[:, 0] + TargetBox[:, 2]) / 2
            ty = (TargetBox[:, 1] + TargetBox[:, 3]) / 2
            out = np.stack([(tx[:, None] - px) / pw, (ty[:, None] - py) / ph,
                            np.log(np.abs(tw[:, None] / pw)),
                            np.log(np.abs(th[:, None] / ph))], axis=-1)
            if var is not None:
                out = out / var[None]
            return {"OutputBox": out.astype(TargetBox.dtype, copy=False)}
        if code != "decode_center_size":
            raise ValueError(f"{self.type}: code_type must be 'encode_center_size' or "
                             f"'decode_center_size', got {code_type!r}")
        n, m = TargetBox.shape[:2]
        expand = (lambda a: a[None, :]) if axis == 0 else (lambda a: a[:, None])
        _need(self.type, PriorBox.shape[0] == (m if axis == 0 else n),
              f"PriorBox has {PriorBox.shape[0]} boxes but TargetBox {list(TargetBox.shape)} "
              f"needs {m if axis == 0 else n} along axis {axis}")
        v = np.ones((1, 1, 4), TargetBox.dtype) if var is None else \
            (var[None] if axis == 0 else var[:, None])
        t = TargetBox
        cx = v[..., 0] * t[..., 0] * expand(pw) + expand(px)
        cy = v[..., 1] * t[..., 1] * expand(ph) + expand(py)
        w = np.exp(v[..., 2] * t[..., 2]) * expand(pw)
        h = np.exp(v[..., 3] * t[..., 3]) * expand(ph)
        extra = 0.0 if box_normalized else 1.0
        out = np.stack([cx - w / 2, cy - h / 2, cx + w / 2 - extra, cy + h / 2 - extra], -1)
        return {"OutputBox": out.astype(TargetBox.dtype, copy=False)}


def iou_matrix(a: np.ndarray, b: np.ndarray, normalized: bool = True) -> np.ndarray:
    """IoU of every box of ``a`` [N, 4] with every box of ``b`` [M, 4] -> [N, M]."""
    extra = 0.0 if normalized else 1.0
    aw, ah = np.maximum(a[:, 2] - a[:, 0] + extra, 0), np.maximum(a[:, 3] - a[:, 1] + extra, 0)
    bw, bh = np.maximum(b[:, 2] - b[:, 0] + extra, 0), np.maximum(b[:, 3] - b[:, 1] + extra, 0)
    iw = np.minimum(a[:, None, 2], b[None, :, 2]) - np.maximum(a[:, None, 0], b[None, :, 0])
    ih = np.minimum(a[:, None, 3], b[None, :, 3]) - np.maximum(a[:, None, 1], b[None, :, 1])
    inter = np.maximum(iw + extra, 0) * np.maximum(ih + extra, 0)
    union = (aw * ah)[:, None] + (bw * bh)[None, :] - inter
    with np.errstate(divide="ignore", invalid="ignore"):
        one, zero = union.dtype.type(1), union.dtype.type(0)
        out = np.where(union > 0, inter / np.where(union > 0, union, one), zero)
    return out


def jaccard_matrix(a: np.ndarray, b: np.ndarray, normalized: bool = True) -> np.ndarray:
    """fluid's ``JaccardOverlap`` (detection/nms_util.h, used by the NMS ops) of every box of
    ``a`` [N, 4] with every box of ``b`` [M, 4] -> [N, M]. Unlike ``iou_matrix`` a pair that
    does not touch is 0 even for pixel boxes (the +1 of ``normalized=False`` widths only
    applies to overlapping boxes), and a box with xmax < xmin or ymax < ymin has area 0."""
    extra = a.dtype.type(0 if normalized else 1)

    def area(r: np.ndarray) -> np.ndarray:
        valid = (r[:, 2] >= r[:, 0]) & (r[:, 3] >= r[:, 1])
        return np.where(valid, (r[:, 2] - r[:, 0] + extra) * (r[:, 3] - r[:, 1] + extra),
                        a.dtype.type(0))
    apart = ((b[None, :, 0] > a[:, None, 2]) | (b[None, :, 2] < a[:, None, 0]) |
             (b[None, :, 1] > a[:, None, 3]) | (b[None, :, 3] < a[:, None, 1]))
    iw = np.minimum(a[:, None, 2], b[None, :, 2]) - np.maximum(a[:, None, 0], b[None, :, 0])
    ih = np.minimum(a[:, None, 3], b[None, :, 3]) - np.maximum(a[:, None, 1], b[None, :, 1])
    inter = (iw + extra) * (ih + extra)
    union = area(a)[:, None] + area(b)[None, :] - inter
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(apart, a.dtype.type(0), inter / union)


@register
class IouSimilarity(OpDef):
    """Out[i, j] = IoU(X[i], Y[j]) (areas and intersections add 1 per side unless
    ``box_normalized``); Out keeps X's LoD."""
    type, inputs, outputs = "iou_similarity", ("X", "Y"), ("Out",)
    no_grad = True

    def infer(self, X, Y, *, box_normalized=True):
        _need(self.type, X.ndim == 2 and X.shape[1] == 4 and Y.ndim == 2 and Y.shape[1] == 4,
              f"X and Y must be [N, 4] and [M, 4], got {list(X.shape)} and {list(Y.shape)}")
        return {"Out": VarSpec([X.shape[0], Y.shape[0]], X.dtype, X.lod_level)}

    def forward(self, X, Y, *, box_normalized=True):
        return {"Out": iou_matrix(X, Y, box_normalized).astype(X.dtype, copy=False)}


@register
class BoxClip(OpDef):
    """Clip the boxes of image i (LoD level 0 of Input, or the leading axis of a 3-D Input)
    to [0, round(w/scale) - 1] x [0, round(h/scale) - 1] with ImInfo[i] = (h, w, scale)."""
    type, inputs, outputs = "box_clip", ("Input", "ImInfo"), ("Output",)
    no_grad = True
    lod_aware = True

    def infer(self, Input, ImInfo):
        _need(self.type, Input.shape[-1] == 4, f"the last dim of Input must be 4, got "
                                               f"{list(Input.shape)}")
        _need(self.type, ImInfo.ndim == 2 and ImInfo.shape[1] == 3,
              f"ImInfo must be [N, 3] (height, width, scale), got {list(ImInfo.shape)}")
        return {"Output": Input}

    def forward(self, Input, ImInfo, lod=None):
        lod_in = (lod or {}).get("Input")
        out = np.array(Input, copy=True)
        if Input.ndim == 3 and not lod_in:
            groups = [(i, slice(i, i + 1)) for i in range(Input.shape[0])]
        else:
            off = offsets_of(lod_in, Input.shape[0])
            groups = [(i, slice(off[i], off[i + 1])) for i in range(len(off) - 1)]
        _need(self.type, len(groups) <= ImInfo.shape[0],
              f"Input holds {len(groups)} images but ImInfo has {ImInfo.shape[0]} rows")
        for i, sl in groups:
            h = np.round(ImInfo[i, 0] / ImInfo[i, 2])
            w = np.round(ImInfo[i, 1] / ImInfo[i, 2])
            part = out[sl]
            zero, one = part.dtype.type(0), part.dtype.type(1)
            part[..., 0::2] = np.clip(part[..., 0::2], zero, part.dtype.type(w) - one)
            part[..., 1::2] = np.clip(part[..., 1::2], zero, part.dtype.type(h) - one)
        res: Dict[str, Any] = {"Output": out}
        if lod_in:
            res["lod"] = {"Output": lod_in}
        return res


# -- matching -------------------------------------------------------------------------------------
def _bipartite(dist: np.ndarray, match_type: str, threshold: float) -> Tuple[np.ndarray,
                                                                             np.ndarray]:
    """fluid's greedy bipartite match of one instance ``dist`` [rows, cols]."""
    rows, cols = dist.shape
    idx = np.full(cols, -1, np.int32)
    best = np.zeros(cols, dist.dtype)
    work = np.where(dist < 1e-6, -np.inf, dist.astype(np.float64))
    for _ in range(min(rows, cols)):
        # the global maximum; ties: the smallest column, then the smallest row (fluid's scan)
        flat = np.argmax(work.T)
        c, r = divmod(int(flat), rows)
        if not np.isfinite(work[r, c]):
            break
        idx[c], best[c] = r, dist[r, c]
        work[r, :] = -np.inf
        work[:, c] = -np.inf
    if match_type == "per_prediction":
        for c in np.nonzero(idx == -1)[0]:
            col = dist[:, c]
            ok = (col >= 1e-6) & (col >= threshold)
            if ok.any():
                r = int(np.argmax(np.where(ok, col, col.dtype.type(-np.inf))))
                idx[c], best[c] = r, col[r]
    return idx, best


@register
class BipartiteMatch(OpDef):
    """For each instance (a LoD sequence of DistMat's rows, the entity boxes, against its
    columns, the priors): repeatedly match the largest remaining distance (> 1e-6) whose row and
    column are both free; with ``match_type='per_prediction'`` every still-free column then
    takes its best row if that distance is >= ``dist_threshold``. ColToRowMatchIndices [N, M]
    (-1: unmatched) and ColToRowMatchDist [N, M]."""
    type = "bipartite_match"
    inputs, outputs = ("DistMat",), ("ColToRowMatchIndices", "ColToRowMatchDist")
    no_grad = True
    lod_aware = True

    def infer(self, DistMat, *, match_type="bipartite", dist_threshold=0.5):
        _need(self.type, DistMat.ndim == 2, f"DistMat must be 2-D, got {list(DistMat.shape)}")
        _need(self.type, match_type in ("bipartite", "per_prediction"),
              f"match_type must be 'bipartite' or 'per_prediction', got {match_type!r}")
        return {"ColToRowMatchIndices": VarSpec([-1, DistMat.shape[1]], "int32"),
                "ColToRowMatchDist": VarSpec([-1, DistMat.shape[1]], DistMat.dtype)}

    def forward(self, DistMat, lod=None, *, match_type="bipartite", dist_threshold=0.5):
        _need(self.type, match_type in ("bipartite", "per_prediction"),
              f"match_type must be 'bipartite' or 'per_prediction', got {match_type!r}")
        off = offsets_of((lod or {}).get("DistMat"), DistMat.shape[0])
        idx, dist = [], []
        for i in range(len(off) - 1):
            a, b = _bipartite(DistMat[off[i]:off[i + 1]], match_type, dist_threshold)
            idx.append(a)
            dist.append(b)
        return {"ColToRowMatchIndices": np.stack(idx).astype(np.int32),
                "ColToRowMatchDist": np.stack(dist).astype(DistMat.dtype)}


@register
class TargetAssign(OpDef):
    """Out[i, j] = X[lod[i] + MatchIndices[i, j], j % P] (X is [rows, P, K], LoD per instance)
    with OutWeight 1 where matched; unmatched entries get ``mismatch_value`` and weight 0;
    the entries listed in NegIndices (LoD per instance) get ``mismatch_value`` and weight 1."""
    type = "target_assign"
    inputs, outputs = ("X", "MatchIndices", "NegIndices?"), ("Out", "OutWeight")
    no_grad = True
    lod_aware = True

    def infer(self, X, MatchIndices, NegIndices=None, *, mismatch_value=0):
        _need(self.type, X.ndim == 3, f"X must be 3-D [rows, P, K], got {list(X.shape)}")
        _need(self.type, MatchIndices.ndim == 2,
              f"MatchIndices must be 2-D [N, M], got {list(MatchIndices.shape)}")
        n, m = MatchIndices.shape
        return {"Out": VarSpec([n, m, X.shape[2]], X.dtype),
                "OutWeight": VarSpec([n, m, 1], "float32")}

    def forward(self, X, MatchIndices, NegIndices=None, lod=None, *, mismatch_value=0):
        lod = lod or {}
        off = offsets_of(lod.get("X"), X.shape[0])
        n, m = MatchIndices.shape
        _need(self.type, len(off) - 1 == n,
              f"X holds {len(off) - 1} instances (its LoD) but MatchIndices has {n} rows")
        P, _K = X.shape[1], X.shape[2]
        match = MatchIndices.astype(np.int64)
        hit = match > -1
        rows = np.where(hit, off[:-1, None] + np.maximum(match, 0), 0)
        cols = np.broadcast_to(np.arange(m) % P, (n, m))
        out = np.where(hit[..., None], X[rows, cols], np.asarray(mismatch_value, X.dtype))
        weight = hit.astype(np.float32)[..., None]
        if NegIndices is not None:
            noff = offsets_of(lod.get("NegIndices"), NegIndices.shape[0])
            neg = NegIndices.reshape(-1).astype(np.int64)
            for i in range(len(noff) - 1):
                js = neg[noff[i]:noff[i + 1]]
                out[i, js] = mismatch_value
                weight[i, js] = 1.0
        return {"Out": out.astype(X.dtype, copy=False), "OutWeight": weight}


# -- polygon IoU (fluid's poly_util: boxes of 8, 16, 24 or 32 coordinates) ----------------------
POLY_BOX_SIZES = (8, 16, 24, 32)


def _signed_area(pts: np.ndarray) -> float:
    x, y = pts[:, 0], pts[:, 1]
    return 0.5 * float(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1)))


def _clip_convex(subject: List[Tuple[float, float]], clip: np.ndarray
                 ) -> List[Tuple[float, float]]:
    """Sutherland-Hodgman: ``subject`` clipped by the counter-clockwise convex ``clip``."""
    out = subject
    for k in range(len(clip)):
        (ax, ay), (bx, by) = clip[k], clip[(k + 1) % len(clip)]
        inp, out = out, []
        if not inp:
            break
        side = [(bx - ax) * (py - ay) - (by - ay) * (px - ax) for px, py in inp]
        for i, p in enumerate(inp):
            q, sp, sq = inp[i - 1], side[i], side[i - 1]
            if sp >= 0:
                if sq < 0:
                    t = sq / (sq - sp)
                    out.append((q[0] + t * (p[0] - q[0]), q[1] + t * (p[1] - q[1])))
                out.append(p)
            elif sq >= 0:
                t = sq / (sq - sp)
                out.append((q[0] + t * (p[0] - q[0]), q[1] + t * (p[1] - q[1])))
    return out


def _fan(pts: np.ndarray) -> List[Tuple[float, np.ndarray]]:
    """The polygon as signed triangles (p0, p_i, p_i+1), each (sign, ccw vertices)."""
    tris = []
    for i in range(1, len(pts) - 1):
        tri = np.stack([pts[0], pts[i], pts[i + 1]])
        a = _signed_area(tri)
        if a != 0:
            tris.append((1.0 if a > 0 else -1.0, tri if a > 0 else tri[::-1]))
    return tris


def poly_overlap_area(a: np.ndarray, b: np.ndarray) -> float:
    """Area of the intersection of the simple polygons ``a`` and ``b`` ([k, 2] vertices, any
    orientation; fluid clips them with GPC): the indicator of a polygon is the signed sum of
    its fan triangles' indicators, so the overlap is the signed sum of the triangle-pair
    overlaps (each a convex clip)."""
    sa, sb = _signed_area(a), _signed_area(b)
    if sa == 0 or sb == 0:
        return 0.0
    total = 0.0
    for s1, t1 in _fan(a):
        for s2, t2 in _fan(b):
            piece = _clip_convex([tuple(v) for v in t1], t2)
            if len(piece) >= 3:
                total += s1 * s2 * _signed_area(np.asarray(piece))
    return abs(total)                  # sign(sa) * sign(sb) * total, >= 0


def poly_iou_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """fluid's PolyIoU of every polygon box of ``a`` [N, 2k] with every one of ``b`` [M, 2k]:
    overlap / (area_a + area_b - overlap), 0 when an area or the overlap is 0 (``normalized``
    plays no part for polygons in fluid)."""
    pa = a.astype(np.float64).reshape(len(a), -1, 2)
    pb = b.astype(np.float64).reshape(len(b), -1, 2)
    area_a = [abs(_signed_area(p)) for p in pa]
    area_b = [abs(_signed_area(p)) for p in pb]
    out = np.zeros((len(a), len(b)), a.dtype)
    for i, p in enumerate(pa):
        for j, q in enumerate(pb):
            inter = poly_overlap_area(p, q)
            if area_a[i] and area_b[j] and inter:
                out[i, j] = inter / (area_a[i] + area_b[j] - inter)
    return out


def box_overlap_matrix(a: np.ndarray, b: np.ndarray, normalized: bool) -> np.ndarray:
    """The NMS ops' overlap: ``jaccard_matrix`` for 4-coordinate boxes, ``poly_iou_matrix``
    for polygon boxes of 8, 16, 24 or 32 coordinates (as fluid's NMSFast)."""
    if a.shape[-1] in POLY_BOX_SIZES:
        return poly_iou_matrix(a, b)
    return jaccard_matrix(a, b, normalized)


# -- non-maximum suppression ----------------------------------------------------------------------
def nms(boxes: np.ndarray, scores: np.ndarray, score_threshold: float, nms_threshold: float,
        eta: float, top_k: int, normalized: bool) -> List[int]:
    """fluid's NMSFast: candidates with score > threshold in descending score order (stable),
    at most ``top_k`` (-1: all); keep a box when its IoU with every kept box is <= the
    adaptive threshold (multiplied by ``eta`` after each kept box while it is > 0.5)."""
    cand = np.nonzero(scores > score_threshold)[0]
    order = cand[np.argsort(-scores[cand], kind="stable")]
    if top_k > -1:
        order = order[:top_k]
    kept: List[int] = []
    thr = nms_threshold
    if order.size == 0:
        return kept
    iou = box_overlap_matrix(boxes[order], boxes[order], normalized)
    kept_pos: List[int] = []
    for pos in range(order.size):
        if all(iou[pos, k] <= thr for k in kept_pos):
            kept_pos.append(pos)
            kept.append(int(order[pos]))
            if eta < 1 and thr > 0.5:
                thr *= eta
    return kept


def multiclass_nms_pick(boxes: np.ndarray, scores: np.ndarray, background_label: int,
                        score_threshold: float, nms_top_k: int, nms_threshold: float,
                        nms_eta: float, keep_top_k: int, normalized: bool
                        ) -> List[Tuple[int, int]]:
    """fluid's MultiClassNMS for one image: the kept (label, box index) pairs in its output
    order -- labels ascending; within a label by descending score, or (LoD form: ``boxes``
    [M, C, 4]) by ascending box index, as fluid's stable_sort of the indices."""
    lod_form = boxes.ndim == 3
    picked: List[Tuple[int, int]] = []              # (label, box index)
    for c in range(scores.shape[0]):
        if c == background_label:
            continue
        b = boxes[:, c] if lod_form else boxes
        kept = nms(b, scores[c], score_threshold, nms_threshold, nms_eta, nms_top_k,
                   normalized)
        picked += [(c, i) for i in (sorted(kept) if lod_form else kept)]
    if keep_top_k > -1 and len(picked) > keep_top_k:
        sc = np.array([scores[c, i] for c, i in picked])
        keep = np.sort(np.argsort(-sc, kind="stable")[:keep_top_k])
        chosen = [picked[k] for k in keep]
        # within a label fluid lists the survivors in descending score order (3-D form) or
        # by box index (LoD form)
        picked = sorted(chosen, key=lambda ci: (ci[0], ci[1] if lod_form
                                                else -scores[ci[0], ci[1]]))
    return picked


def multiclass_nms_one(boxes: np.ndarray, scores: np.ndarray, background_label: int,
                       score_threshold: float, nms_top_k: int, nms_threshold: float,
                       nms_eta: float, keep_top_k: int, normalized: bool) -> np.ndarray:
    """Detections [K, 6] = (label, score, x1, y1, x2, y2) of one image: ``boxes`` [M, 4] (or
    [M, C, 4], one box per class) and ``scores`` [C, M]."""
    picked = multiclass_nms_pick(boxes, scores, background_label, score_threshold,
                                 nms_top_k, nms_threshold, nms_eta, keep_top_k, normalized)
    rows = []
    for c, i in picked:
        b = boxes[i, c] if boxes.ndim == 3 else boxes[i]
        rows.append([c, scores[c, i], *b])
    return np.asarray(rows, boxes.dtype).reshape(-1, boxes.shape[-1] + 2)


@register
class MulticlassNMS(OpDef):
    """Per image and class (but ``background_label``): NMS (``nms``) of the boxes by that
    class's scores, then at most ``keep_top_k`` detections per image by score. Out [K, 6] rows
    (label, score, x1, y1, x2, y2), grouped by image in its LoD; no detection at all gives
    the single row [[-1]] as fluid does. BBoxes [N, M, 4] with Scores [N, C, M], or (LoD
    form) BBoxes [M, C, 4] with Scores [M, C]."""
    type = "multiclass_nms"
    inputs, outputs = ("BBoxes", "Scores"), ("Out",)
    no_grad = True
    lod_aware = True

    def infer(self, BBoxes, Scores, *, background_label=0, score_threshold=0.0, nms_top_k=-1,
              nms_threshold=0.3, nms_eta=1.0, keep_top_k=-1, normalized=True):
        _need(self.type, Scores.ndim in (2, 3), f"Scores must be 2-D or 3-D, got "
                                                f"{list(Scores.shape)}")
        _need(self.type, BBoxes.ndim == 3 and BBoxes.shape[2] in (4, 8, 16, 24, 32),
              f"BBoxes must be 3-D with 4 box coordinates, got {list(BBoxes.shape)}")
        _need(self.type, 0.0 <= nms_threshold, f"nms_threshold must be >= 0, got "
                                               f"{nms_threshold}")
        return {"Out": VarSpec([-1, BBoxes.shape[2] + 2], BBoxes.dtype, 1)}

    def forward(self, BBoxes, Scores, lod=None, *, background_label=0, score_threshold=0.0,
                nms_top_k=-1, nms_threshold=0.3, nms_eta=1.0, keep_top_k=-1, normalized=True):
        args = (background_label, score_threshold, nms_top_k, nms_threshold, nms_eta,
                keep_top_k, normalized)
        outs = []
        if Scores.ndim == 3:
            _need(self.type, BBoxes.shape[0] == Scores.shape[0] and
                  BBoxes.shape[1] == Scores.shape[2],
                  f"BBoxes {list(BBoxes.shape)} and Scores {list(Scores.shape)} disagree "
                  f"(expected [N, M, 4] and [N, C, M])")
            for n in range(Scores.shape[0]):
                outs.append(multiclass_nms_one(BBoxes[n], Scores[n], *args))
        else:
            off = offsets_of((lod or {}).get("Scores") or (lod or {}).get("BBoxes"),
                             Scores.shape[0])
            for i in range(len(off) - 1):
                sl = slice(off[i], off[i + 1])
                outs.append(multiclass_nms_one(BBoxes[sl], Scores[sl].T, *args))
        counts = [o.shape[0] for o in outs]
        if sum(counts) == 0:
            return {"Out": np.full((1, 1), -1, BBoxes.dtype), "lod": {"Out": ((0, 1),)}}
        offsets = tuple(int(v) for v in np.concatenate([[0], np.cumsum(counts)]))
        return {"Out": np.concatenate(outs).astype(BBoxes.dtype), "lod": {"Out": (offsets,)}}


# -- YOLO -----------------------------------------------------------------------------------------
def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


@register
class YoloBox(OpDef):
    """YOLOv3 boxes from X [N, A*(5 + class_num), H, W]: for anchor a at cell (k, l),
    conf = sigmoid(obj); cx = (l + sigmoid(tx)*s - (s-1)/2) * img_w / W, cy likewise with k,
    img_h and H (s = scale_x_y), w = exp(tw) * anchor_w * img_w / (downsample_ratio * W), h
    likewise with H (Paddle 2.x; fluid 1.8 divided both by H, a non-square grid's bug); Boxes [N, A*H*W, 4] the corners (clipped to the image
    with ``clip_bbox``), Scores [N, A*H*W, class_num] = conf * sigmoid(class logits); cells with
    conf < conf_thresh give zero boxes and scores. ImgSize [N, 2] is (height, width).
    ``iou_aware`` (Paddle 2.x, PP-YOLO): X starts with A more channels, an IoU logit per
    anchor, and conf = sigmoid(obj)^(1 - iou_aware_factor) * sigmoid(iou)^iou_aware_factor."""
    type, inputs, outputs = "yolo_box", ("X", "ImgSize"), ("Boxes", "Scores")
    no_grad = True

    def _check(self, X_shape, anchors, class_num, iou_aware=False) -> int:
        _need(self.type, len(X_shape) == 4, f"X must be 4-D, got {list(X_shape)}")
        _need(self.type, len(anchors) > 0 and len(anchors) % 2 == 0,
              f"anchors must hold (width, height) pairs, got {list(anchors)}")
        _need(self.type, class_num > 0, f"class_num must be > 0, got {class_num}")
        an, per = len(anchors) // 2, (6 if iou_aware else 5) + class_num
        _need(self.type, X_shape[1] < 0 or X_shape[1] == an * per,
              f"the channel count of X ({X_shape[1]}) must be anchor_num * ({per - class_num} "
              f"+ class_num) = {an * per}")
        return an

    def infer(self, X, ImgSize, *, anchors=(), class_num=1, conf_thresh=0.01,
              downsample_ratio=32, clip_bbox=True, scale_x_y=1.0, iou_aware=False,
              iou_aware_factor=0.5):
        an = self._check(X.shape, anchors, class_num, iou_aware)
        hw = X.shape[2] * X.shape[3] if X.shape[2] >= 0 and X.shape[3] >= 0 else -1
        boxes = an * hw if hw >= 0 else -1
        return {"Boxes": VarSpec([X.shape[0], boxes, 4], X.dtype),
                "Scores": VarSpec([X.shape[0], boxes, class_num], X.dtype)}

    def forward(self, X, ImgSize, *, anchors=[], class_num=1, conf_thresh=0.01,
                downsample_ratio=32, clip_bbox=True, scale_x_y=1.0, iou_aware=False,
                iou_aware_factor=0.5):
        an = self._check(X.shape, anchors, class_num, iou_aware)
        N, _, H, W = X.shape
        first = an if iou_aware else 0
        x = X[:, first:].reshape(N, an, 5 + class_num, H, W).astype(np.float64)
        img_h = ImgSize[:, 0].astype(np.float64).reshape(N, 1, 1, 1)
        img_w = ImgSize[:, 1].astype(np.float64).reshape(N, 1, 1, 1)
        bias = -0.5 * (scale_x_y - 1.0)
        grid_l = np.arange(W).reshape(1, 1, 1, W)
        grid_k = np.arange(H).reshape(1, 1, H, 1)
        aw = np.asarray(anchors[0::2], np.float64).reshape(1, an, 1, 1)
        ah = np.asarray(anchors[1::2], np.float64).reshape(1, an, 1, 1)
        cx = (grid_l + _sigmoid(x[:, :, 0]) * scale_x_y + bias) * img_w / W
        cy = (grid_k + _sigmoid(x[:, :, 1]) * scale_x_y + bias) * img_h / H
        w = np.exp(x[:, :, 2]) * aw * img_w / (downsample_ratio * W)
        h = np.exp(x[:, :, 3]) * ah * img_h / (downsample_ratio * H)
        conf = _sigmoid(x[:, :, 4])
        if iou_aware:
            iou = _sigmoid(X[:, :an].astype(np.float64))
            conf = conf ** (1.0 - iou_aware_factor) * iou ** iou_aware_factor
        boxes = np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], axis=-1)
        if clip_bbox:
            boxes[..., 0] = np.maximum(boxes[..., 0], 0)
            boxes[..., 1] = np.maximum(boxes[..., 1], 0)
            boxes[..., 2] = np.minimum(boxes[..., 2], img_w - 1)
            boxes[..., 3] = np.minimum(boxes[..., 3], img_h - 1)
        scores = conf[..., None] * _sigmoid(np.moveaxis(x[:, :, 5:], 2, -1))
        keep = (conf >= conf_thresh)[..., None]
        boxes = np.where(keep, boxes, 0.0).reshape(N, an * H * W, 4)
        scores = np.where(keep, scores, 0.0).reshape(N, an * H * W, class_num)
        return {"Boxes": boxes.astype(X.dtype), "Scores": scores.astype(X.dtype)}


@register
class MineHardExamples(OpDef):
    """SSD hard-negative mining (``mining_type='max_negative'``): per image, the unmatched
    priors (MatchIndices == -1) whose MatchDist < ``neg_dist_threshold`` are candidates; the
    ``int(num_positives * neg_pos_ratio)`` of them with the largest ClsLoss (ties: lower
    index first) become NegIndices (ascending, [K, 1] with a per-image LoD).
    ``hard_example`` keeps the ``sample_size`` largest losses of all priors (positives whose
    loss is not selected lose their match). UpdatedMatchIndices is the resulting match."""
    type = "mine_hard_examples"
    inputs = ("ClsLoss", "LocLoss?", "MatchIndices", "MatchDist")
    outputs = ("NegIndices", "UpdatedMatchIndices")
    no_grad = True
    lod_aware = True

    def infer(self, ClsLoss, LocLoss=None, MatchIndices=None, MatchDist=None, *,
              neg_pos_ratio=1.0, neg_dist_threshold=0.5, sample_size=0,
              mining_type="max_negative"):
        _need(self.type, mining_type in ("max_negative", "hard_example"),
              f"mining_type must be 'max_negative' or 'hard_example', got {mining_type!r}")
        _need(self.type, ClsLoss.ndim == 2 and MatchIndices.ndim == 2,
              f"ClsLoss and MatchIndices must be [N, Np], got {list(ClsLoss.shape)} and "
              f"{list(MatchIndices.shape)}")
        return {"NegIndices": VarSpec([-1, 1], "int32", 1),
                "UpdatedMatchIndices": VarSpec(list(MatchIndices.shape), "int32")}

    def forward(self, ClsLoss, LocLoss=None, MatchIndices=None, MatchDist=None, lod=None, *,
                neg_pos_ratio=1.0, neg_dist_threshold=0.5, sample_size=0,
                mining_type="max_negative"):
        _need(self.type, mining_type in ("max_negative", "hard_example"),
              f"mining_type must be 'max_negative' or 'hard_example', got {mining_type!r}")
        updated = np.array(MatchIndices, np.int32, copy=True)
        negs, counts = [], []
        for n in range(MatchIndices.shape[0]):
            match, dist = MatchIndices[n], MatchDist[n]
            loss = ClsLoss[n].astype(np.float64)
            if mining_type == "max_negative":
                cand = np.nonzero((match == -1) & (dist < neg_dist_threshold))[0]
                num = min(int(np.sum(match != -1) * neg_pos_ratio), cand.size)
            else:
                cand = np.arange(match.size)
                if LocLoss is not None:
                    loss = loss + LocLoss[n]
                num = min(int(sample_size), cand.size)
            order = cand[np.argsort(-loss[cand], kind="stable")][:num]
            sel = np.sort(order)
            if mining_type == "hard_example":
                chosen = np.zeros(match.size, bool)
                chosen[sel] = True
                updated[n][(match > -1) & ~chosen] = -1
                sel = sel[match[sel] == -1]
            negs.append(sel)
            counts.append(sel.size)
        offsets = tuple(int(v) for v in np.concatenate([[0], np.cumsum(counts)]))
        neg = np.concatenate(negs).astype(np.int32).reshape(-1, 1) if negs else \
            np.zeros((0, 1), np.int32)
        return {"NegIndices": neg, "UpdatedMatchIndices": updated,
                "lod": {"NegIndices": (offsets,)}}


def _locality_merge(boxes: np.ndarray, scores: np.ndarray, nms_threshold: float,
                    normalized: bool) -> np.ndarray:
    """fluid's locality-aware pass over the boxes in input order: a box overlapping the
    current anchor box by more than ``nms_threshold`` is merged into it (score-weighted
    coordinates, scores added); otherwise it becomes the new anchor. Returns the mask of
    surviving anchors; ``boxes`` / ``scores`` are updated in place."""
    keep = np.zeros(len(scores), bool)
    index = -1
    for i in range(len(scores)):
        if index > -1:
            overlap = box_overlap_matrix(boxes[i:i + 1], boxes[index:index + 1],
                                         normalized)[0, 0]
            if overlap > nms_threshold:
                total = scores[i] + scores[index]
                boxes[index] = (boxes[i] * scores[i] + boxes[index] * scores[index]) / total
                scores[index] += scores[i]
                continue
            keep[index] = True
        index = i
    if index > -1:
        keep[index] = True
    return keep


@register
class LocalityAwareNMS(OpDef):
    """Locality-aware NMS (EAST): per image and class (but ``background_label``), first merge
    consecutive overlapping boxes (``_locality_merge``), then ``multiclass_nms``'s greedy NMS
    on the merged boxes/scores above ``score_threshold`` (at most ``nms_top_k``), then at most
    ``keep_top_k`` per image. Out [K, 6] (label, merged score, merged box) with a per-image LoD;
    nothing detected gives [[-1]]. BBoxes [N, M, 4], Scores [N, C, M]."""
    type = "locality_aware_nms"
    inputs, outputs = ("BBoxes", "Scores"), ("Out",)
    no_grad = True
    lod_aware = True

    def infer(self, BBoxes, Scores, *, background_label=-1, score_threshold=0.0, nms_top_k=-1,
              nms_threshold=0.3, nms_eta=1.0, keep_top_k=-1, normalized=True):
        _need(self.type, BBoxes.ndim == 3 and Scores.ndim == 3,
              f"BBoxes [N, M, 4] and Scores [N, C, M] must be 3-D, got {list(BBoxes.shape)} "
              f"and {list(Scores.shape)}")
        _need(self.type, BBoxes.shape[2] in (4, -1) + POLY_BOX_SIZES,
              f"the box size (BBoxes.shape[2]) must be 4 or a polygon's 8, 16, 24 or 32 "
              f"coordinates, got {BBoxes.shape[2]}")
        box = BBoxes.shape[2]
        return {"Out": VarSpec([-1, box + 2 if box > 0 else -1], BBoxes.dtype, 1)}

    def forward(self, BBoxes, Scores, lod=None, *, background_label=-1, score_threshold=0.0,
                nms_top_k=-1, nms_threshold=0.3, nms_eta=1.0, keep_top_k=-1, normalized=True):
        _need(self.type, BBoxes.shape[2] in (4,) + POLY_BOX_SIZES,
              f"the box size (BBoxes.shape[2]) must be 4 or a polygon's 8, 16, 24 or 32 "
              f"coordinates, got {BBoxes.shape[2]}")
        outs = []
        for n in range(Scores.shape[0]):
            picked = []                       # (label, score, box)
            for c in range(Scores.shape[1]):
                if c == background_label:
                    continue
                # fluid merges into one buffer shared by all classes; each class gets its own
                # copy here (the intended per-class computation)
                b = BBoxes[n].astype(np.float64).copy()
                s = Scores[n, c].astype(np.float64).copy()
                alive = _locality_merge(b, s, nms_threshold, normalized)
                masked = np.where(alive, s, -np.inf)
                kept = nms(b, masked, score_threshold, nms_threshold, nms_eta, nms_top_k,
                           normalized)
                picked += [(c, s[i], b[i]) for i in kept]
            if keep_top_k > -1 and len(picked) > keep_top_k:
                order = sorted(range(len(picked)), key=lambda k: -picked[k][1])[:keep_top_k]
                picked = sorted((picked[k] for k in order), key=lambda t: t[0])
            outs.append(np.array([[c, s, *b] for c, s, b in picked],
                                 BBoxes.dtype).reshape(-1, BBoxes.shape[2] + 2))
        counts = [o.shape[0] for o in outs]
        if sum(counts) == 0:
            return {"Out": np.full((1, 1), -1, BBoxes.dtype), "lod": {"Out": ((0, 1),)}}
        offsets = tuple(int(v) for v in np.concatenate([[0], np.cumsum(counts)]))
        return {"Out": np.concatenate(outs), "lod": {"Out": (offsets,)}}
