"""Faster/Mask R-CNN proposal ops of fluid 1.8: ``generate_proposals``,
``distribute_fpn_proposals``, ``collect_fpn_proposals``, ``box_decoder_and_assign`` and
``polygon_box_transform``. Boxes are in pixels (widths ``x2 - x1 + 1``); batched ROI tensors
carry their image in the LoD. None is differentiable in fluid."""
from __future__ import annotations

from typing import Any, Dict, List

import numpy as np

from ..core.dtypes import VarType
from ..core.registry import OpDef, VarSpec, get_op_def, register
from .detection import iou_matrix, offsets_of

_BBOX_CLIP = float(np.log(1000.0 / 16.0))      # fluid's kBBoxClipDefault


def _need(op: str, cond: bool, msg: str) -> None:
    if not cond:
        raise ValueError(f"{op}: {msg}")


def _offsets(counts: List[int]) -> tuple:
    return tuple(int(v) for v in np.concatenate([[0], np.cumsum(counts)]))


def _pixel_nms(boxes: np.ndarray, scores: np.ndarray, thresh: float, eta: float,
               pixel_offset: bool = True) -> List[int]:
    """Greedy NMS in descending score order (stable) with pixel IoU (sides + 1; plain areas
    without ``pixel_offset``) and fluid's adaptive threshold."""
    order = np.argsort(-scores, kind="stable")
    iou = iou_matrix(boxes[order], boxes[order], normalized=not pixel_offset)
    kept: List[int] = []
    thr = thresh
    for pos in range(order.size):
        if all(iou[pos, k] <= thr for k in kept):
            kept.append(pos)
            if eta < 1 and thr > 0.5:
                thr *= eta
    return [int(order[k]) for k in kept]


@register
class GenerateProposals(OpDef):
    """RPN proposals per image: take the ``pre_nms_topN`` best anchors by score, decode their
    deltas (centre-size with the anchor variances; log sizes clipped at log(1000/16)), clip to
    the image (ImInfo = (h, w, scale)), drop boxes smaller than ``min_size`` (at the original
    scale) or centred outside the image, NMS at ``nms_thresh`` (adaptive with ``eta``), keep
    ``post_nms_topN``. RpnRois [R, 4] and RpnRoiProbs [R, 1] with a per-image LoD (an image
    with nothing left yields one zero box); RpnRoisLod (int64 [N], optional) holds each image's
    end offset into RpnRois, as fluid 1.8's kernel writes it."""
    type = "generate_proposals"
    inputs = ("Scores", "BboxDeltas", "ImInfo", "Anchors", "Variances")
    outputs = ("RpnRois", "RpnRoiProbs", "RpnRoisLod?")
    no_grad = True
    lod_aware = True

    def infer(self, Scores, BboxDeltas, ImInfo, Anchors, Variances, *, pre_nms_topN=6000,
              post_nms_topN=1000, nms_thresh=0.5, min_size=0.1, eta=1.0):
        _need(self.type, Scores.ndim == 4 and BboxDeltas.ndim == 4,
              f"Scores and BboxDeltas must be 4-D, got {list(Scores.shape)} and "
              f"{list(BboxDeltas.shape)}")
        _need(self.type, BboxDeltas.shape[1] in (-1, 4 * Scores.shape[1]) or Scores.shape[1] < 0,
              f"BboxDeltas must have 4 channels per anchor ({4 * Scores.shape[1]}), got "
              f"{BboxDeltas.shape[1]}")
        _need(self.type, Anchors.shape[-1] == 4 and Variances.shape[-1] == 4,
              f"Anchors and Variances must end in 4, got {list(Anchors.shape)} and "
              f"{list(Variances.shape)}")
        return {"RpnRois": VarSpec([-1, 4], Scores.dtype, 1),
                "RpnRoiProbs": VarSpec([-1, 1], Scores.dtype, 1),
                "RpnRoisLod": VarSpec([Scores.shape[0]], VarType.INT64)}

    def forward(self, Scores, BboxDeltas, ImInfo, Anchors, Variances, lod=None, *,
                pre_nms_topN=6000, post_nms_topN=1000, nms_thresh=0.5, min_size=0.1, eta=1.0):
        rois, probs, counts = _proposals(
            self.type, Scores, BboxDeltas, [tuple(float(v) for v in r) for r in ImInfo],
            Anchors, Variances, pre_nms_topN, post_nms_topN, nms_thresh, min_size, eta, True,
            True)
        lod = (_offsets(counts),)
        return {"RpnRois": rois, "RpnRoiProbs": probs,
                # fluid's kernel writes each image's *end* offset (the LoD without its 0)
                "RpnRoisLod": np.asarray(lod[0][1:], np.int64),
                "lod": {"RpnRois": lod, "RpnRoiProbs": lod}}


def _decode(anchors: np.ndarray, deltas: np.ndarray, var: np.ndarray,
            offset: float = 1.0) -> np.ndarray:
    """Centre-size decoding of RPN deltas (``offset`` 1: pixel boxes, sides + 1)."""
    aw = anchors[:, 2] - anchors[:, 0] + offset
    ah = anchors[:, 3] - anchors[:, 1] + offset
    ax, ay = anchors[:, 0] + 0.5 * aw, anchors[:, 1] + 0.5 * ah
    cx = var[:, 0] * deltas[:, 0] * aw + ax
    cy = var[:, 1] * deltas[:, 1] * ah + ay
    w = np.exp(np.minimum(var[:, 2] * deltas[:, 2], _BBOX_CLIP)) * aw
    h = np.exp(np.minimum(var[:, 3] * deltas[:, 3], _BBOX_CLIP)) * ah
    return np.stack([cx - w / 2, cy - h / 2, cx + w / 2 - offset, cy + h / 2 - offset], axis=1)


def _proposals(op: str, Scores: np.ndarray, BboxDeltas: np.ndarray, images: List[tuple],
               Anchors: np.ndarray, Variances: np.ndarray, pre_nms_topN: int,
               post_nms_topN: int, nms_thresh: float, min_size: float, eta: float,
               pixel_offset: bool, scaled: bool) -> tuple:
    """The proposals of every image (see GenerateProposals): ``images`` holds (h, w[, scale])
    per image; ``scaled`` (fluid 1.8) measures min_size at the original scale and always
    checks the centre; Paddle 2.x's v2 compares the plain size and checks the centre only
    with ``pixel_offset``. Returns (rois, probs, counts per image)."""
    anchors, var = Anchors.reshape(-1, 4), Variances.reshape(-1, 4)
    off = 1.0 if pixel_offset else 0.0
    rois, probs, counts = [], [], []
    for i in range(Scores.shape[0]):
        sc = Scores[i].transpose(1, 2, 0).reshape(-1)
        deltas = BboxDeltas[i].transpose(1, 2, 0).reshape(-1, 4)
        _need(op, sc.size == anchors.shape[0],
              f"{sc.size} scores per image but {anchors.shape[0]} anchors")
        order = np.argsort(-sc, kind="stable")
        if 0 < pre_nms_topN < order.size:
            order = order[:pre_nms_topN]
        b, s = _decode(anchors[order], deltas[order], var[order], off), sc[order]
        h, w = images[i][0], images[i][1]
        scale = images[i][2] if scaled else 1.0
        b[:, 0::2] = np.clip(b[:, 0::2], 0, w - off)
        b[:, 1::2] = np.clip(b[:, 1::2], 0, h - off)
        ms = max(min_size, 1.0)
        ws, hs = b[:, 2] - b[:, 0] + off, b[:, 3] - b[:, 1] + off
        if scaled:
            keep = (((b[:, 2] - b[:, 0]) / scale + 1 >= ms)
                    & ((b[:, 3] - b[:, 1]) / scale + 1 >= ms))
        else:
            keep = (ws >= ms) & (hs >= ms)
        if scaled or pixel_offset:
            keep &= (b[:, 0] + ws / 2 <= w) & (b[:, 1] + hs / 2 <= h)
        b, s = b[keep], s[keep]
        if b.shape[0] == 0:
            b, s = np.zeros((1, 4), Scores.dtype), np.zeros(1, Scores.dtype)
        elif nms_thresh > 0:
            kept = _pixel_nms(b, s, nms_thresh, eta, pixel_offset)
            if 0 < post_nms_topN < len(kept):
                kept = kept[:post_nms_topN]
            b, s = b[kept], s[kept]
        rois.append(b)
        probs.append(s.reshape(-1, 1))
        counts.append(b.shape[0])
    return (np.concatenate(rois).astype(Scores.dtype),
            np.concatenate(probs).astype(Scores.dtype), counts)


@register
class GenerateProposalsV2(OpDef):
    """Paddle 2.x's ``generate_proposals_v2``: ``generate_proposals`` on ImShape [N, 2] =
    (h, w) (no scale: ``min_size`` compares the decoded size), ``pixel_offset`` choosing pixel
    boxes (sides + 1, the centre check) or plain ones (PaddleDetection 2.x's default);
    RpnRoisNum (int32 [N]) counts each image's proposals."""
    type = "generate_proposals_v2"
    inputs = ("Scores", "BboxDeltas", "ImShape", "Anchors", "Variances")
    outputs = ("RpnRois", "RpnRoiProbs", "RpnRoisNum?")
    no_grad = True
    lod_aware = True

    def infer(self, Scores, BboxDeltas, ImShape, Anchors, Variances, *, pre_nms_topN=6000,
              post_nms_topN=1000, nms_thresh=0.5, min_size=0.1, eta=1.0, pixel_offset=True):
        spec = get_op_def("generate_proposals").infer(Scores, BboxDeltas, ImShape, Anchors,
                                                      Variances)
        return {"RpnRois": spec["RpnRois"], "RpnRoiProbs": spec["RpnRoiProbs"],
                "RpnRoisNum": VarSpec([Scores.shape[0]], VarType.INT32)}

    def forward(self, Scores, BboxDeltas, ImShape, Anchors, Variances, lod=None, *,
                pre_nms_topN=6000, post_nms_topN=1000, nms_thresh=0.5, min_size=0.1, eta=1.0,
                pixel_offset=True):
        rois, probs, counts = _proposals(
            self.type, Scores, BboxDeltas, [tuple(float(v) for v in r[:2]) for r in ImShape],
            Anchors, Variances, pre_nms_topN, post_nms_topN, nms_thresh, min_size, eta,
            pixel_offset, False)
        lod = (_offsets(counts),)
        return {"RpnRois": rois, "RpnRoiProbs": probs,
                "RpnRoisNum": np.asarray(counts, np.int32),
                "lod": {"RpnRois": lod, "RpnRoiProbs": lod}}


def _counts_offsets(op: str, counts: Any, n: int) -> np.ndarray:
    """Offsets from per-image counts (Paddle 2.x's ``*RoisNum``), checked against ``n`` rows."""
    c = np.asarray(counts).reshape(-1).astype(np.int64)
    off = np.concatenate([[0], np.cumsum(c)])
    _need(op, bool((c >= 0).all()) and off[-1] == n,
          f"the per-image ROI counts {c.tolist()} must be >= 0 and sum to the {n} ROIs")
    return off


def _levels(rois: np.ndarray, min_level: int, max_level: int, refer_level: int,
            refer_scale: int, pixel_offset: bool = True) -> np.ndarray:
    w = rois[:, 2] - rois[:, 0]
    h = rois[:, 3] - rois[:, 1]
    t = rois.dtype.type
    one = t(1) if pixel_offset else t(0)
    area = np.where((w < 0) | (h < 0), t(0), (w + one) * (h + one))
    with np.errstate(divide="ignore"):
        lvl = np.floor(np.log2(np.sqrt(area) / refer_scale + 1e-6) + refer_level)
    return np.clip(lvl, min_level, max_level).astype(np.int64)


@register
class DistributeFpnProposals(OpDef):
    """Assign each ROI to an FPN level ``floor(log2(sqrt(area) / refer_scale + 1e-6) +
    refer_level)`` clipped to [min_level, max_level] (area with +1 pixel sides; plain with
    Paddle 2.x's ``pixel_offset`` false); MultiFpnRois[l] holds the level's ROIs image by
    image (LoD per image), and RestoreIndex [R, 1] the position of each original ROI in the
    concatenation of the levels. Paddle 2.x: ``RoisNum`` (ROIs per image) replaces the LoD
    and ``MultiLevelRoIsNum[l]`` (int32 [N]) counts each level's ROIs per image."""
    type = "distribute_fpn_proposals"
    inputs, outputs = ("FpnRois", "RoisNum?"), ("MultiFpnRois*", "RestoreIndex",
                                                "MultiLevelRoIsNum*?")
    no_grad = True
    lod_aware = True

    def infer(self, FpnRois, RoisNum=None, *, min_level=2, max_level=5, refer_level=4,
              refer_scale=224, pixel_offset=True):
        _need(self.type, FpnRois.ndim == 2 and FpnRois.shape[1] == 4,
              f"FpnRois must be [R, 4], got {list(FpnRois.shape)}")
        _need(self.type, min_level <= max_level, f"min_level ({min_level}) must not exceed "
                                                 f"max_level ({max_level})")
        n = max_level - min_level + 1
        return {"MultiFpnRois": [VarSpec([-1, 4], FpnRois.dtype, 1)] * n,
                "RestoreIndex": VarSpec([-1, 1], "int32"),
                "MultiLevelRoIsNum": [VarSpec([-1], "int32")] * n}

    def forward(self, FpnRois, RoisNum=None, lod=None, *, min_level=2, max_level=5,
                refer_level=4, refer_scale=224, pixel_offset=True):
        off = _counts_offsets(self.type, RoisNum, FpnRois.shape[0]) if RoisNum is not None \
            else offsets_of((lod or {}).get("FpnRois"), FpnRois.shape[0])
        lvl = _levels(FpnRois, min_level, max_level, refer_level, refer_scale, pixel_offset)
        outs, lods, order = [], [], []
        for level in range(min_level, max_level + 1):
            rows, counts = [], []
            for i in range(len(off) - 1):
                idx = np.nonzero(lvl[off[i]:off[i + 1]] == level)[0] + off[i]
                rows.append(idx)
                counts.append(idx.size)
            idx = np.concatenate(rows).astype(np.int64)
            order.append(idx)
            outs.append(FpnRois[idx])
            lods.append((_offsets(counts),))
        restore = np.empty(FpnRois.shape[0], np.int32)
        restore[np.concatenate(order)] = np.arange(FpnRois.shape[0], dtype=np.int32)
        # one LoD per entry of the duplicable output: attached here, entry by entry
        from ..core.lod import attach
        return {"MultiFpnRois": [attach(o, lod) for o, lod in zip(outs, lods)],
                "RestoreIndex": restore.reshape(-1, 1),
                "MultiLevelRoIsNum": [np.diff(np.asarray(lod[0])).astype(np.int32)
                                      for lod in lods]}


@register
class CollectFpnProposals(OpDef):
    """Merge the ROIs of every FPN level: the ``post_nms_topN`` highest scores over all levels
    and images (stable), then regrouped by image (LoD per image). Paddle 2.x: the per-level
    ``MultiLevelRoIsNum`` (ROIs per image) replace the LoD, and ``RoisNum`` (int32 [N])
    counts the result's ROIs per image."""
    type = "collect_fpn_proposals"
    inputs = ("MultiLevelRois*", "MultiLevelScores*", "MultiLevelRoIsNum*?")
    outputs = ("FpnRois", "RoisNum?")
    no_grad = True
    lod_aware = True

    def infer(self, MultiLevelRois, MultiLevelScores, MultiLevelRoIsNum=None, *,
              post_nms_topN=100):
        _need(self.type, len(MultiLevelRois) == len(MultiLevelScores),
              f"{len(MultiLevelRois)} levels of ROIs but {len(MultiLevelScores)} of scores")
        return {"FpnRois": VarSpec([-1, 4], MultiLevelRois[0].dtype, 1),
                "RoisNum": VarSpec([-1], "int32")}

    def forward(self, MultiLevelRois, MultiLevelScores, MultiLevelRoIsNum=None, lod=None, *,
                post_nms_topN=100):
        lod = lod or {}
        rois, scores, images = [], [], []
        for k, (r, s) in enumerate(zip(MultiLevelRois, MultiLevelScores)):
            if MultiLevelRoIsNum:
                off = _counts_offsets(self.type, MultiLevelRoIsNum[k], r.shape[0])
            else:
                lr = (lod.get("MultiLevelRois") or [None] * len(MultiLevelRois))[k]
                off = offsets_of(lr, r.shape[0])
            rois.append(r)
            scores.append(s.reshape(-1))
            images.append(np.repeat(np.arange(len(off) - 1), np.diff(off)))
        r, s, img = np.concatenate(rois), np.concatenate(scores), np.concatenate(images)
        top = np.argsort(-s, kind="stable")[:max(min(post_nms_topN, s.size), 0)]
        top = top[np.argsort(img[top], kind="stable")]
        n_img = int(img.max()) + 1 if img.size else 0
        if MultiLevelRoIsNum:
            n_img = max(n_img, len(np.asarray(MultiLevelRoIsNum[0]).reshape(-1)))
        counts = np.bincount(img[top], minlength=n_img).tolist()
        return {"FpnRois": r[top], "RoisNum": np.asarray(counts, np.int32),
                "lod": {"FpnRois": (_offsets(counts),)}}


@register
class BoxDecoderAndAssign(OpDef):
    """Decode per-class deltas TargetBox [N, C*4] against PriorBox [N, 4] (pixel centre-size,
    variances PriorBoxVar [4], log sizes clipped at ``box_clip``) into DecodeBox [N, C*4]; and
    OutputAssignBox [N, 4] = the decoded box of the best-scoring class > 0 (BoxScore [N, C]),
    or the prior itself when no class above 0 scores higher than -1."""
    type = "box_decoder_and_assign"
    inputs = ("PriorBox", "PriorBoxVar", "TargetBox", "BoxScore")
    outputs = ("DecodeBox", "OutputAssignBox")
    no_grad = True

    def infer(self, PriorBox, PriorBoxVar, TargetBox, BoxScore, *, box_clip=4.135):
        _need(self.type, PriorBox.ndim == 2 and PriorBox.shape[1] == 4,
              f"PriorBox must be [N, 4], got {list(PriorBox.shape)}")
        _need(self.type, TargetBox.ndim == 2 and BoxScore.ndim == 2 and
              (TargetBox.shape[1] < 0 or BoxScore.shape[1] < 0 or
               TargetBox.shape[1] == 4 * BoxScore.shape[1]),
              f"TargetBox must be [N, C*4] for BoxScore [N, C], got {list(TargetBox.shape)} "
              f"and {list(BoxScore.shape)}")
        return {"DecodeBox": VarSpec(list(TargetBox.shape), TargetBox.dtype,
                                     TargetBox.lod_level),
                "OutputAssignBox": VarSpec([TargetBox.shape[0], 4], TargetBox.dtype,
                                           TargetBox.lod_level)}

    def forward(self, PriorBox, PriorBoxVar, TargetBox, BoxScore, *, box_clip=4.135):
        n, c = BoxScore.shape
        var = np.asarray(PriorBoxVar, np.float64).reshape(-1)[:4]
        pw = PriorBox[:, 2] - PriorBox[:, 0] + 1
        ph = PriorBox[:, 3] - PriorBox[:, 1] + 1
        px, py = PriorBox[:, 0] + pw / 2, PriorBox[:, 1] + ph / 2
        t = TargetBox.reshape(n, c, 4).astype(np.float64)
        dw = np.minimum(var[2] * t[..., 2], box_clip)
        dh = np.minimum(var[3] * t[..., 3], box_clip)
        cx = var[0] * t[..., 0] * pw[:, None] + px[:, None]
        cy = var[1] * t[..., 1] * ph[:, None] + py[:, None]
        w, h = np.exp(dw) * pw[:, None], np.exp(dh) * ph[:, None]
        dec = np.stack([cx - w / 2, cy - h / 2, cx + w / 2 - 1, cy + h / 2 - 1], axis=-1)
        masked = np.where(np.arange(c) > 0, BoxScore, BoxScore.dtype.type(-np.inf))
        best = np.argmax(masked, axis=1) if c > 1 else np.zeros(n, np.int64)
        ok = (c > 1) & (np.max(masked, axis=1) > -1) if c > 1 else np.zeros(n, bool)
        assign = np.where(ok[:, None], dec[np.arange(n), best], PriorBox)
        return {"DecodeBox": dec.reshape(n, c * 4).astype(TargetBox.dtype),
                "OutputAssignBox": assign.astype(TargetBox.dtype)}


@register
class PolygonBoxTransform(OpDef):
    """EAST geometry to absolute coordinates: Output[n, c, h, w] = 4*w - Input[n, c, h, w] for
    even channels c, 4*h - Input[n, c, h, w] for odd ones."""
    type, inputs, outputs = "polygon_box_transform", ("Input",), ("Output",)
    no_grad = True

    def infer(self, Input):
        _need(self.type, Input.ndim == 4, f"Input must be 4-D, got {list(Input.shape)}")
        _need(self.type, Input.shape[1] < 0 or Input.shape[1] % 2 == 0,
              f"the channel count {Input.shape[1]} must be even")
        return {"Output": Input}

    def forward(self, Input):
        _need(self.type, Input.ndim == 4 and Input.shape[1] % 2 == 0,
              f"Input must be 4-D with an even channel count, got {list(Input.shape)}")
        n, c, h, w = Input.shape
        grid = np.where((np.arange(c) % 2 == 0)[:, None, None],
                        np.broadcast_to(np.arange(w), (h, w))[None] * 4.0,
                        np.broadcast_to(np.arange(h)[:, None], (h, w))[None] * 4.0)
        return {"Output": (grid[None] - Input).astype(Input.dtype)}


def _pixel_jaccard(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """fluid's pixel JaccardOverlap of every box of ``a`` with every box of ``b``: 0 for boxes
    that do not touch, else the +1-pixel intersection over union."""
    iou = iou_matrix(a, b, normalized=False)
    apart = ((b[None, :, 0] > a[:, None, 2]) | (b[None, :, 2] < a[:, None, 0])
             | (b[None, :, 1] > a[:, None, 3]) | (b[None, :, 3] < a[:, None, 1]))
    return np.where(apart, 0.0, iou)


@register
class RetinanetDetectionOutput(OpDef):
    """RetinaNet inference per image: on each FPN level keep the (anchor, class) pairs with
    score > ``score_threshold`` (> 0 on the last level), at most ``nms_top_k`` by score; decode
    their deltas against the anchors (pixel centre-size, no variances), scale back by the image
    scale and clip to the original image; per-class NMS (pixel IoU, adaptive ``nms_eta``);
    then the ``keep_top_k`` best of all classes by score. Out [K, 6] = (class + 1, score, box)
    in descending score order, LoD per image (an empty result is [0, 6])."""
    type = "retinanet_detection_output"
    inputs, outputs = ("BBoxes*", "Scores*", "Anchors*", "ImInfo"), ("Out",)
    no_grad = True
    lod_aware = True

    def infer(self, BBoxes, Scores, Anchors, ImInfo, *, score_threshold=0.05, nms_top_k=1000,
              nms_threshold=0.3, nms_eta=1.0, keep_top_k=100):
        _need(self.type, len(BBoxes) == len(Scores) == len(Anchors) and len(BBoxes) > 0,
              f"BBoxes, Scores and Anchors must list the same levels, got {len(BBoxes)}, "
              f"{len(Scores)} and {len(Anchors)}")
        for b, s, a in zip(BBoxes, Scores, Anchors):
            _need(self.type, b.ndim == 3 and s.ndim == 3 and a.ndim == 2,
                  f"each level needs BBoxes [N, Mi, 4], Scores [N, Mi, C], Anchors [Mi, 4]; "
                  f"got {list(b.shape)}, {list(s.shape)}, {list(a.shape)}")
        return {"Out": VarSpec([-1, 6], BBoxes[0].dtype, 1)}

    def forward(self, BBoxes, Scores, Anchors, ImInfo, lod=None, *, score_threshold=0.05,
                nms_top_k=1000, nms_threshold=0.3, nms_eta=1.0, keep_top_k=100):
        outs = []
        levels = len(Scores)
        for n in range(Scores[0].shape[0]):
            h, w, scale = (float(v) for v in ImInfo[n])
            ih, iw = float(np.round(h / scale)), float(np.round(w / scale))
            preds: Dict[int, List[np.ndarray]] = {}
            for lvl in range(levels):
                sc = Scores[lvl][n].reshape(-1).astype(np.float64)
                class_num = Scores[lvl].shape[2]
                thr = score_threshold if lvl < levels - 1 else 0.0
                cand = np.nonzero(sc > thr)[0]
                cand = cand[np.argsort(-sc[cand], kind="stable")]
                if nms_top_k > -1:
                    cand = cand[:nms_top_k]
                a_idx, c_idx = cand // class_num, cand % class_num
                anc = Anchors[lvl][a_idx].astype(np.float64)
                d = BBoxes[lvl][n][a_idx].astype(np.float64)
                aw, ah = anc[:, 2] - anc[:, 0] + 1, anc[:, 3] - anc[:, 1] + 1
                cx, cy = d[:, 0] * aw + anc[:, 0] + aw / 2, d[:, 1] * ah + anc[:, 1] + ah / 2
                bw, bh = np.exp(d[:, 2]) * aw, np.exp(d[:, 3]) * ah
                box = np.stack([cx - bw / 2, cy - bh / 2, cx + bw / 2 - 1, cy + bh / 2 - 1],
                               axis=1) / scale
                box[:, 0::2] = np.maximum(np.minimum(box[:, 0::2], iw - 1), 0)
                box[:, 1::2] = np.maximum(np.minimum(box[:, 1::2], ih - 1), 0)
                for k in range(cand.size):
                    preds.setdefault(int(c_idx[k]), []).append(
                        np.concatenate([box[k], [sc[cand[k]]]]))
            dets = []                 # (score, label, box)
            for c in sorted(preds):
                rows = np.asarray(preds[c])
                order = np.argsort(-rows[:, 4], kind="stable")
                iou = _pixel_jaccard(rows[order, :4], rows[order, :4])
                kept, thr = [], nms_threshold
                for pos in range(order.size):
                    if all(iou[pos, k] <= thr for k in kept):
                        kept.append(pos)
                        if nms_eta < 1 and thr > 0.5:
                            thr *= nms_eta
                dets += [(rows[order[k], 4], c, rows[order[k], :4]) for k in kept]
            dets = [dets[i] for i in sorted(range(len(dets)), key=lambda i: -dets[i][0])]
            dets = dets[:keep_top_k] if keep_top_k > -1 else dets
            outs.append(np.array([[c + 1, s, *b] for s, c, b in dets],
                                 BBoxes[0].dtype).reshape(-1, 6))
        offsets = tuple(int(v) for v in np.concatenate([[0], np.cumsum([len(o) for o in outs])]))
        return {"Out": np.concatenate(outs), "lod": {"Out": (offsets,)}}


def box_to_delta(ex: np.ndarray, gt: np.ndarray) -> np.ndarray:
    """fluid's BoxToDelta (pixel boxes, no weights): (dx, dy, log dw, log dh) of ``gt`` against
    ``ex``."""
    ew, eh = ex[:, 2] - ex[:, 0] + 1, ex[:, 3] - ex[:, 1] + 1
    gw, gh = gt[:, 2] - gt[:, 0] + 1, gt[:, 3] - gt[:, 1] + 1
    ex_x, ex_y = ex[:, 0] + 0.5 * ew, ex[:, 1] + 0.5 * eh
    gt_x, gt_y = gt[:, 0] + 0.5 * gw, gt[:, 1] + 0.5 * gh
    return np.stack([(gt_x - ex_x) / ew, (gt_y - ex_y) / eh, np.log(gw / ew),
                     np.log(gh / eh)], axis=1)


# fluid samples with an engine seeded from std::random_device (not reproducible); fluidlite
# likewise draws use_random subsets from one per-process generator
_SAMPLER = np.random.default_rng()


def _subsample(inds: List[int], num: int, use_random: bool, rng: Any) -> List[int]:
    """Keep ``num`` of ``inds``: the first ones, or a uniform random subset (reservoir)."""
    if len(inds) <= num:
        return list(inds)
    if not use_random:
        return list(inds[:num])
    out = list(inds)
    for i in range(num, len(out)):
        j = int(rng.integers(0, i + 1))
        if j < num:
            out[j], out[i] = out[i], out[j]
    return out[:num]


@register
class RpnTargetAssign(OpDef):
    """RPN training targets per image: anchors straddling the image by more than
    ``rpn_straddle_thresh`` (>= 0) are ignored, crowd ground truths dropped, the others scaled
    by ImInfo's scale. Foreground: for each ground truth the anchors of (nearly, 1e-5) its best
    IoU, and anchors with IoU >= ``rpn_positive_overlap``, at most ``rpn_fg_fraction *
    rpn_batch_size_per_im``; background: anchors with best IoU < ``rpn_negative_overlap``,
    filling the batch (a background pick overrides a foreground one, which then stays in
    LocationIndex with zero BBoxInsideWeight, as fluid's "fake" foreground). Subsets are the
    first candidates, or random ones with ``use_random``. Outputs: LocationIndex [F],
    ScoreIndex [F + B] (indices into all images' anchors), TargetLabel [F + B, 1],
    TargetBBox [F, 4] (deltas of the matched ground truth), BBoxInsideWeight [F, 4]."""
    type = "rpn_target_assign"
    inputs = ("Anchor", "GtBoxes", "IsCrowd", "ImInfo")
    outputs = ("LocationIndex", "ScoreIndex", "TargetLabel", "TargetBBox", "BBoxInsideWeight")
    no_grad = True
    lod_aware = True

    def infer(self, Anchor, GtBoxes, IsCrowd, ImInfo, *, rpn_batch_size_per_im=256,
              rpn_straddle_thresh=0.0, rpn_positive_overlap=0.7, rpn_negative_overlap=0.3,
              rpn_fg_fraction=0.25, use_random=True):
        _need(self.type, Anchor.ndim == 2 and Anchor.shape[1] == 4,
              f"Anchor must be [M, 4], got {list(Anchor.shape)}")
        _need(self.type, GtBoxes.ndim == 2 and GtBoxes.shape[1] == 4,
              f"GtBoxes must be [G, 4] (LoD per image), got {list(GtBoxes.shape)}")
        _need(self.type, ImInfo.ndim == 2 and ImInfo.shape[1] == 3,
              f"ImInfo must be [N, 3], got {list(ImInfo.shape)}")
        return {"LocationIndex": VarSpec([-1], "int32"), "ScoreIndex": VarSpec([-1], "int32"),
                "TargetLabel": VarSpec([-1, 1], "int32"),
                "TargetBBox": VarSpec([-1, 4], Anchor.dtype),
                "BBoxInsideWeight": VarSpec([-1, 4], Anchor.dtype)}

    def forward(self, Anchor, GtBoxes, IsCrowd, ImInfo, lod=None, *,
                rpn_batch_size_per_im=256, rpn_straddle_thresh=0.0, rpn_positive_overlap=0.7,
                rpn_negative_overlap=0.3, rpn_fg_fraction=0.25, use_random=True):
        lod = lod or {}
        goff = offsets_of(lod.get("GtBoxes"), GtBoxes.shape[0])
        coff = offsets_of(lod.get("IsCrowd"), IsCrowd.shape[0])
        M = Anchor.shape[0]
        loc, score, label, tbox, weight = [], [], [], [], []
        for i in range(len(goff) - 1):
            h, w, scale = (float(v) for v in ImInfo[i])
            t = rpn_straddle_thresh
            if t >= 0:
                inside = np.nonzero((Anchor[:, 0] >= -t) & (Anchor[:, 1] >= -t)
                                    & (Anchor[:, 2] < w + t) & (Anchor[:, 3] < h + t))[0]
            else:
                inside = np.arange(M)
            gt = GtBoxes[goff[i]:goff[i + 1]].astype(np.float64)
            crowd = np.asarray(IsCrowd[coff[i]:coff[i + 1]]).reshape(-1)
            gt = gt[crowd[:len(gt)] == 0] * scale
            anchors = Anchor[inside].astype(np.float64)
            fg_rows, bg_rows, fake, fg_gt = self._assign(
                anchors, gt, rpn_batch_size_per_im, rpn_fg_fraction, rpn_positive_overlap,
                rpn_negative_overlap, use_random, _SAMPLER)
            base = i * M
            loc_rows = fake + fg_rows
            loc.append(inside[loc_rows] + base)
            score.append(np.concatenate([inside[fg_rows], inside[bg_rows]]).astype(np.int64)
                         + base)
            label.append(np.concatenate([np.ones(len(fg_rows)), np.zeros(len(bg_rows))]))
            if loc_rows:
                tbox.append(box_to_delta(anchors[loc_rows], gt[fg_gt]))
            weight.append(np.concatenate([np.zeros((len(fake), 4)),
                                          np.ones((len(fg_rows), 4))]))
        cat = lambda parts, shape: np.concatenate(parts) if parts else np.zeros(shape)  # noqa
        return {"LocationIndex": cat(loc, (0,)).astype(np.int32),
                "ScoreIndex": cat(score, (0,)).astype(np.int32),
                "TargetLabel": cat(label, (0,)).astype(np.int32).reshape(-1, 1),
                "TargetBBox": cat(tbox, (0, 4)).reshape(-1, 4).astype(Anchor.dtype),
                "BBoxInsideWeight": cat(weight, (0, 4)).reshape(-1, 4).astype(Anchor.dtype)}

    @staticmethod
    def _assign(anchors, gt, batch, fg_fraction, pos, neg, use_random, rng):
        n = anchors.shape[0]
        if gt.shape[0] == 0 or n == 0:
            overlap = np.zeros((n, max(gt.shape[0], 1)))
        else:
            overlap = iou_matrix(anchors, gt, normalized=False)
        a_max = overlap.max(axis=1) if n else np.zeros(0)
        a_arg = overlap.argmax(axis=1) if n else np.zeros(0, np.int64)
        g_max = overlap.max(axis=0) if n else np.zeros(overlap.shape[1])
        # an anchor is a candidate once: best anchor of some ground truth, or above `pos`
        best_of_gt = (np.abs(overlap - g_max[None, :]) < 1e-5).any(axis=1) if n else \
            np.zeros(0, bool)
        cand = [] if gt.shape[0] == 0 else \
            [int(r) for r in np.nonzero(best_of_gt | (a_max >= pos))[0]]
        label = np.full(n, -1)
        sample = fg_fraction > 0 and batch > 0
        fg = _subsample(cand, int(fg_fraction * batch), use_random, rng) if sample else cand
        label[fg] = 1
        bg_cand = [r for r in range(n) if a_max[r] < neg]
        bg = _subsample(bg_cand, batch - len(fg), use_random, rng) if sample else bg_cand
        fake = []
        for r in bg:
            if label[r] == 1:
                fake.append(fg[0])
            label[r] = 0
        fg_rows = [r for r in range(n) if label[r] == 1]
        bg_rows = [r for r in range(n) if label[r] == 0]
        fg_gt = [int(a_arg[r]) for r in fake + fg_rows]
        return fg_rows, bg_rows, fake, fg_gt


@register
class RetinanetTargetAssign(OpDef):
    """RetinaNet training targets per image: every anchor (no straddle filter, no sampling) is
    foreground when it is some non-crowd ground truth's best anchor or its best IoU >=
    ``positive_overlap`` (label = that ground truth's GtLabels entry), background when its best
    IoU < ``negative_overlap`` (label 0; a background overriding a foreground leaves a "fake"
    LocationIndex entry with zero BBoxInsideWeight, as in rpn_target_assign); others are
    ignored. ForegroundNumber [N, 1] = number of LocationIndex entries + 1 (fluid's count)."""
    type = "retinanet_target_assign"
    inputs = ("Anchor", "GtBoxes", "GtLabels", "IsCrowd", "ImInfo")
    outputs = ("LocationIndex", "ScoreIndex", "TargetLabel", "TargetBBox", "BBoxInsideWeight",
               "ForegroundNumber")
    no_grad = True
    lod_aware = True

    def infer(self, Anchor, GtBoxes, GtLabels, IsCrowd, ImInfo, *, positive_overlap=0.5,
              negative_overlap=0.4):
        _need(self.type, Anchor.ndim == 2 and GtBoxes.ndim == 2 and GtLabels.ndim == 2
              and ImInfo.ndim == 2,
              f"Anchor, GtBoxes, GtLabels and ImInfo must be 2-D, got {list(Anchor.shape)}, "
              f"{list(GtBoxes.shape)}, {list(GtLabels.shape)}, {list(ImInfo.shape)}")
        return {"LocationIndex": VarSpec([-1], "int32"), "ScoreIndex": VarSpec([-1], "int32"),
                "TargetLabel": VarSpec([-1, 1], "int32"),
                "TargetBBox": VarSpec([-1, 4], Anchor.dtype),
                "BBoxInsideWeight": VarSpec([-1, 4], Anchor.dtype),
                "ForegroundNumber": VarSpec([-1, 1], "int32")}

    def forward(self, Anchor, GtBoxes, GtLabels, IsCrowd, ImInfo, lod=None, *,
                positive_overlap=0.5, negative_overlap=0.4):
        lod = lod or {}
        goff = offsets_of(lod.get("GtBoxes"), GtBoxes.shape[0])
        loff = offsets_of(lod.get("GtLabels"), GtLabels.shape[0])
        coff = offsets_of(lod.get("IsCrowd"), IsCrowd.shape[0])
        M = Anchor.shape[0]
        loc, score, label, tbox, weight, fg_num = [], [], [], [], [], []
        anchors = Anchor.astype(np.float64)
        for i in range(len(goff) - 1):
            scale = float(ImInfo[i][2])
            keep = np.asarray(IsCrowd[coff[i]:coff[i + 1]]).reshape(-1) == 0
            gt = GtBoxes[goff[i]:goff[i + 1]].astype(np.float64)[keep] * scale
            labels = np.asarray(GtLabels[loff[i]:loff[i + 1]]).reshape(-1)[keep]
            fg_rows, bg_rows, fake, fg_gt = RpnTargetAssign._assign(
                anchors, gt, -1, -1, positive_overlap, negative_overlap, False, None)
            overlap = iou_matrix(anchors, gt, normalized=False) if gt.shape[0] else None
            arg = overlap.argmax(axis=1) if overlap is not None else np.zeros(M, np.int64)
            loc_rows = fake + fg_rows
            loc.append(np.asarray(loc_rows, np.int64) + i * M)
            score.append(np.asarray(fg_rows + bg_rows, np.int64) + i * M)
            label.append(np.concatenate([labels[arg[fg_rows]] if fg_rows else np.zeros(0),
                                         np.zeros(len(bg_rows))]))
            if loc_rows:
                tbox.append(box_to_delta(anchors[loc_rows], gt[fg_gt]))
            weight.append(np.concatenate([np.zeros((len(fake), 4)),
                                          np.ones((len(fg_rows), 4))]))
            fg_num.append(len(loc_rows) + 1)
        cat = lambda parts, shape: np.concatenate(parts) if parts else np.zeros(shape)  # noqa
        return {"LocationIndex": cat(loc, (0,)).astype(np.int32),
                "ScoreIndex": cat(score, (0,)).astype(np.int32),
                "TargetLabel": cat(label, (0,)).astype(np.int32).reshape(-1, 1),
                "TargetBBox": cat(tbox, (0, 4)).reshape(-1, 4).astype(Anchor.dtype),
                "BBoxInsideWeight": cat(weight, (0, 4)).reshape(-1, 4).astype(Anchor.dtype),
                "ForegroundNumber": np.asarray(fg_num, np.int32).reshape(-1, 1)}


@register
class GenerateProposalLabels(OpDef):
    """Fast R-CNN training samples per image: the ground truths are prepended to the RPN ROIs
    (scaled back by ImInfo's scale; ``is_cascade_rcnn``: ROIs only, those with positive size);
    a proposal whose best IoU with the ground truths is > ``fg_thresh`` is foreground (crowd
    ground-truth rows never are) matched to that ground truth, one with best IoU in
    [``bg_thresh_lo``, ``bg_thresh_hi``) background; at most ``floor(batch_size_per_im *
    fg_fraction)`` foregrounds and ``batch_size_per_im - #fg`` backgrounds (the first ones, or
    random with ``use_random``; cascade mode keeps all). Rois (rescaled), LabelsInt32 (class or
    0), BboxTargets / BboxInsideWeights / BboxOutsideWeights ``[P, 4*class_nums]`` holding the
    weighted deltas in the label's 4 columns (column block 1 with ``is_cls_agnostic``); all
    with a per-image LoD."""
    type = "generate_proposal_labels"
    inputs = ("RpnRois", "GtClasses", "IsCrowd", "GtBoxes", "ImInfo")
    outputs = ("Rois", "LabelsInt32", "BboxTargets", "BboxInsideWeights",
               "BboxOutsideWeights")
    no_grad = True
    lod_aware = True

    def infer(self, RpnRois, GtClasses, IsCrowd, GtBoxes, ImInfo, *, batch_size_per_im=256,
              fg_fraction=0.25, fg_thresh=0.25, bg_thresh_hi=0.5, bg_thresh_lo=0.0,
              bbox_reg_weights=(0.1, 0.1, 0.2, 0.2), class_nums=1, use_random=True,
              is_cls_agnostic=False, is_cascade_rcnn=False):
        _need(self.type, class_nums >= 1, f"class_nums must be >= 1, got {class_nums}")
        _need(self.type, len(bbox_reg_weights) == 4,
              f"bbox_reg_weights must have 4 values, got {list(bbox_reg_weights)}")
        w = 4 * class_nums
        return {"Rois": VarSpec([-1, 4], RpnRois.dtype, 1),
                "LabelsInt32": VarSpec([-1, 1], "int32", 1),
                "BboxTargets": VarSpec([-1, w], RpnRois.dtype, 1),
                "BboxInsideWeights": VarSpec([-1, w], RpnRois.dtype, 1),
                "BboxOutsideWeights": VarSpec([-1, w], RpnRois.dtype, 1)}

    def forward(self, RpnRois, GtClasses, IsCrowd, GtBoxes, ImInfo, lod=None, *,
                batch_size_per_im=256, fg_fraction=0.25, fg_thresh=0.25, bg_thresh_hi=0.5,
                bg_thresh_lo=0.0, bbox_reg_weights=[0.1, 0.1, 0.2, 0.2], class_nums=1,
                use_random=True, is_cls_agnostic=False, is_cascade_rcnn=False):
        lod = lod or {}
        offs = {k: offsets_of(lod.get(k), v.shape[0]) for k, v in (
            ("RpnRois", RpnRois), ("GtClasses", GtClasses), ("IsCrowd", IsCrowd),
            ("GtBoxes", GtBoxes))}
        weights = np.asarray(bbox_reg_weights, np.float64)
        parts: Dict[str, List[np.ndarray]] = {k: [] for k in self._out_names()}
        counts = []
        for i in range(len(offs["RpnRois"]) - 1):
            sl = {k: slice(o[i], o[i + 1]) for k, o in offs.items()}
            scale = float(ImInfo[i][2])
            gt = GtBoxes[sl["GtBoxes"]].astype(np.float64)
            rois = RpnRois[sl["RpnRois"]].astype(np.float64) / scale
            cls = np.asarray(GtClasses[sl["GtClasses"]]).reshape(-1)
            crowd = np.asarray(IsCrowd[sl["IsCrowd"]]).reshape(-1)
            if is_cascade_rcnn:
                # fluid: the caller put the ground truths first in RpnRois, already at
                # image scale; rows of non-positive size (x2 - x1 + 1 <= 0) are skipped
                n_lead = min(gt.shape[0], rois.shape[0])
                rois[:n_lead] = RpnRois[sl["RpnRois"]][:n_lead]
                boxes = rois
                skip = (boxes[:, 2] - boxes[:, 0] + 1 <= 0) | (boxes[:, 3] - boxes[:, 1] + 1 <= 0)
            else:
                boxes = np.concatenate([gt, rois])
                skip = np.zeros(boxes.shape[0], bool)
            ov = iou_matrix(boxes, gt, normalized=False) if gt.shape[0] else \
                np.zeros((boxes.shape[0], 1))
            best = ov.max(axis=1) if boxes.shape[0] else np.zeros(0)
            n_crowd = min(crowd.size, best.size)     # fluid: row i < #gt with IsCrowd[i]
            best[:n_crowd] = np.where(crowd[:n_crowd] != 0, -1.0, best[:n_crowd])
            is_fg = (best >= fg_thresh) & ~skip & (gt.shape[0] > 0)
            fg = [int(r) for r in np.nonzero(is_fg)[0]]
            gt_of = {r: int(np.nonzero(np.abs(best[r] - ov[r]) < 1e-5)[0][0]) for r in fg}
            bg = [int(r) for r in np.nonzero(~is_fg & ~skip & (best >= bg_thresh_lo)
                                             & (best < bg_thresh_hi))[0]]
            if not is_cascade_rcnn:
                fg = _subsample(fg, int(np.floor(batch_size_per_im * fg_fraction)),
                                use_random, _SAMPLER)
                bg = _subsample(bg, batch_size_per_im - len(fg), use_random, _SAMPLER)
            sel = fg + bg
            labels = np.concatenate([cls[[gt_of[r] for r in fg]].astype(np.int64),
                                     np.zeros(len(bg), np.int64)])
            deltas = np.zeros((len(sel), 4))
            if fg:
                deltas[:len(fg)] = box_to_delta(boxes[fg], gt[[gt_of[r] for r in fg]]) / weights
            width = 4 * class_nums
            targets = np.zeros((len(sel), width))
            inside = np.zeros((len(sel), width))
            for k, lab in enumerate(labels):
                if lab > 0:
                    col = 4 * (1 if is_cls_agnostic else int(lab))
                    targets[k, col:col + 4] = deltas[k]
                    inside[k, col:col + 4] = 1.0
            parts["Rois"].append(boxes[sel].reshape(-1, 4) * scale)
            parts["LabelsInt32"].append(labels.reshape(-1, 1))
            parts["BboxTargets"].append(targets)
            parts["BboxInsideWeights"].append(inside)
            parts["BboxOutsideWeights"].append(inside.copy())
            counts.append(len(sel))
        lod_out = (tuple(int(v) for v in np.concatenate([[0], np.cumsum(counts)])),)
        out: Dict[str, Any] = {}
        for k, v in parts.items():
            arr = np.concatenate(v) if v else np.zeros((0, 1 if k == "LabelsInt32" else 4))
            out[k] = arr.astype(np.int32 if k == "LabelsInt32" else RpnRois.dtype)
        out["lod"] = {k: lod_out for k in parts}
        return out

    @staticmethod
    def _out_names() -> List[str]:
        return ["Rois", "LabelsInt32", "BboxTargets", "BboxInsideWeights",
                "BboxOutsideWeights"]
