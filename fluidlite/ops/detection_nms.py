"""``multiclass_nms2`` (fluid 1.8: ``multiclass_nms`` plus the kept boxes' Index), ``matrix_nms``
(fluid 1.8: score decay instead of suppression) and
``multiclass_nms3`` (Paddle 2.x exports: the LoD form takes ``RoisNum``, per-image counts come
out as ``NmsRoisNum``), on the NMS of ``ops/detection.py``.

Index is the kept box's absolute row across the batch: ``n * M + box`` for BBoxes [N, M, 4]
with Scores [N, C, M]; ``(start_n + box) * C + label`` for the LoD form (BBoxes [M, C, 4],
Scores [M, C]). Unlike ``multiclass_nms``, an empty result is an empty [0, 6] Out (and [0, 1]
Index), not the [[-1]] row.
"""
from __future__ import annotations

from typing import Any, List, Optional, Tuple

import numpy as np

from ..core.registry import OpDef, VarSpec, register
from .detection import jaccard_matrix, multiclass_nms_pick, offsets_of


def _need(op: str, cond: bool, msg: str) -> None:
    if not cond:
        raise ValueError(f"{op}: {msg}")


def _check(op: str, BBoxes: VarSpec, Scores: VarSpec, nms_threshold: float) -> None:
    _need(op, Scores.ndim in (2, 3), f"Scores must be 2-D or 3-D, got {list(Scores.shape)}")
    _need(op, BBoxes.ndim == 3 and BBoxes.shape[2] in (4, -1),
          f"BBoxes must be [N, M, 4] (or [M, C, 4] with 2-D Scores), got "
          f"{list(BBoxes.shape)}")
    _need(op, nms_threshold >= 0, f"nms_threshold must be >= 0, got {nms_threshold}")


def _run(op: str, BBoxes: np.ndarray, Scores: np.ndarray, offsets: Optional[np.ndarray],
         attrs: Tuple[Any, ...]) -> Tuple[np.ndarray, np.ndarray, List[int]]:
    """(Out [K, 6], Index [K, 1] int32, per-image counts)."""
    rows: List[List[float]] = []
    index: List[int] = []
    counts: List[int] = []
    if Scores.ndim == 3:
        _need(op, BBoxes.shape[0] == Scores.shape[0] and BBoxes.shape[1] == Scores.shape[2],
              f"BBoxes {list(BBoxes.shape)} and Scores {list(Scores.shape)} disagree "
              f"(expected [N, M, 4] and [N, C, M])")
        m = Scores.shape[2]
        for n in range(Scores.shape[0]):
            picked = multiclass_nms_pick(BBoxes[n], Scores[n], *attrs)
            for c, i in picked:
                rows.append([c, Scores[n, c, i], *BBoxes[n, i]])
                index.append(n * m + i)
            counts.append(len(picked))
    else:
        c_num = Scores.shape[1]
        for k in range(len(offsets) - 1):
            lo, hi = int(offsets[k]), int(offsets[k + 1])
            picked = multiclass_nms_pick(BBoxes[lo:hi], Scores[lo:hi].T, *attrs)
            for c, i in picked:
                rows.append([c, Scores[lo + i, c], *BBoxes[lo + i, c]])
                index.append((lo + i) * c_num + c)
            counts.append(len(picked))
    out = np.asarray(rows, BBoxes.dtype).reshape(-1, BBoxes.shape[-1] + 2)
    return out, np.asarray(index, np.int32).reshape(-1, 1), counts


def _lod(counts: List[int]) -> Tuple[Tuple[int, ...]]:
    return (tuple(int(v) for v in np.concatenate([[0], np.cumsum(counts, dtype=np.int64)])),)


@register
class MulticlassNMS2(OpDef):
    """``multiclass_nms`` plus Index [K, 1] (int32), the absolute input row of each kept box
    (module docstring); Out and Index share the per-image LoD; no detection gives [0, 6]."""
    type = "multiclass_nms2"
    inputs, outputs = ("BBoxes", "Scores"), ("Out", "Index")
    no_grad = True
    lod_aware = True

    def infer(self, BBoxes, Scores, *, background_label=0, score_threshold=0.0,
              nms_top_k=-1, nms_threshold=0.3, nms_eta=1.0, keep_top_k=-1, normalized=True):
        _check(self.type, BBoxes, Scores, nms_threshold)
        return {"Out": VarSpec([-1, 6], BBoxes.dtype, 1),
                "Index": VarSpec([-1, 1], "int32", 1)}

    def forward(self, BBoxes, Scores, lod=None, *, background_label=0, score_threshold=0.0,
                nms_top_k=-1, nms_threshold=0.3, nms_eta=1.0, keep_top_k=-1, normalized=True):
        attrs = (background_label, score_threshold, nms_top_k, nms_threshold, nms_eta,
                 keep_top_k, normalized)
        offsets = None
        if Scores.ndim == 2:
            lod = lod or {}
            offsets = offsets_of(lod.get("BBoxes") or lod.get("Scores"), Scores.shape[0])
        out, index, counts = _run(self.type, BBoxes, Scores, offsets, attrs)
        lod_out = _lod(counts)
        return {"Out": out, "Index": index, "lod": {"Out": lod_out, "Index": lod_out}}


@register
class MulticlassNMS3(OpDef):
    """``multiclass_nms2`` of Paddle 2.x: with 2-D Scores the images are delimited by
    ``RoisNum`` (boxes per image) instead of LoD, and ``NmsRoisNum`` [N] (int32) gives the
    detections kept per image."""
    type = "multiclass_nms3"
    inputs, outputs = ("BBoxes", "Scores", "RoisNum?"), ("Out", "Index", "NmsRoisNum?")
    no_grad = True
    lod_aware = True

    def infer(self, BBoxes, Scores, RoisNum=None, *, score_threshold=0.0, nms_top_k=-1,
              keep_top_k=-1, nms_threshold=0.3, normalized=True, nms_eta=1.0,
              background_label=0):
        _check(self.type, BBoxes, Scores, nms_threshold)
        return {"Out": VarSpec([-1, 6], BBoxes.dtype, 1),
                "Index": VarSpec([-1, 1], "int32", 1),
                "NmsRoisNum": VarSpec([-1], "int32")}

    def forward(self, BBoxes, Scores, RoisNum=None, lod=None, *, score_threshold=0.0,
                nms_top_k=-1, keep_top_k=-1, nms_threshold=0.3, normalized=True, nms_eta=1.0,
                background_label=0):
        attrs = (background_label, score_threshold, nms_top_k, nms_threshold, nms_eta,
                 keep_top_k, normalized)
        offsets = None
        if Scores.ndim == 2:
            if RoisNum is not None:
                offsets = np.concatenate([[0], np.cumsum(np.asarray(RoisNum).reshape(-1))])
                _need(self.type, offsets[-1] == Scores.shape[0],
                      f"RoisNum sums to {int(offsets[-1])} boxes but Scores has "
                      f"{Scores.shape[0]} rows")
            else:
                lod = lod or {}
                offsets = offsets_of(lod.get("BBoxes") or lod.get("Scores"), Scores.shape[0])
        out, index, counts = _run(self.type, BBoxes, Scores, offsets, attrs)
        lod_out = _lod(counts)
        return {"Out": out, "Index": index, "NmsRoisNum": np.asarray(counts, np.int32),
                "lod": {"Out": lod_out, "Index": lod_out}}


def _matrix_nms_class(boxes: np.ndarray, scores: np.ndarray, score_threshold: float,
                      post_threshold: float, top_k: int, normalized: bool, use_gaussian: bool,
                      sigma: float) -> Tuple[np.ndarray, np.ndarray]:
    """fluid 1.8's NMSMatrix for one class: the candidates scoring above ``score_threshold``
    (descending score, ties by box index; at most ``top_k``) have their scores decayed by the
    minimum over every higher-scored candidate j of ``(1 - iou_ij) / (1 - max_iou_j)``
    (linear) or ``exp((max_iou_j^2 - iou_ij^2) * sigma)`` (gaussian), max_iou_j being j's
    largest IoU with a candidate scored above it; kept are those whose decayed score is
    > ``post_threshold``. Returns (box indices, decayed scores)."""
    cand = np.nonzero(scores > score_threshold)[0]
    order = cand[np.argsort(-scores[cand], kind="stable")]
    if top_k > -1:
        order = order[:top_k]
    if order.size == 0:
        return order, scores[order]
    # iou[j, i] for j < i (j scored higher); the lower triangle and diagonal are unused
    iou = np.triu(jaccard_matrix(boxes[order], boxes[order], normalized), k=1)
    max_iou = iou.max(axis=0)
    one = iou.dtype.type(1)
    with np.errstate(divide="ignore", invalid="ignore"):
        if use_gaussian:
            decay = np.exp((max_iou[:, None] ** 2 - iou ** 2) * iou.dtype.type(sigma))
        else:
            decay = (one - iou) / (one - max_iou[:, None])
    # only the pairs j < i decay candidate i (candidate 0 keeps its score); fmin skips the NaN
    # of a 0/0 decay as fluid's std::min(min_decay, NaN) does
    decay = np.where(np.triu(np.ones(iou.shape, bool), k=1), decay, one)
    decayed = scores[order] * np.fmin.reduce(decay, axis=0)
    keep = decayed > post_threshold
    return order[keep], decayed[keep]


@register
class MatrixNMS(OpDef):
    """Matrix NMS (SOLOv2, fluid 1.8's ``matrix_nms``): per image and class (but
    ``background_label``), the candidates' scores are decayed by their overlap with
    higher-scored ones (``_matrix_nms_class``) instead of being suppressed; then the
    ``keep_top_k`` best decayed detections of the image (all when -1) by descending score.
    Out [K, 6] rows (label, decayed score, x1, y1, x2, y2) and Index [K, 1] (int32, the box's
    absolute row ``n * M + box``) share the per-image LoD; nothing kept gives [0, 6] / [0, 1].
    BBoxes [N, M, 4], Scores [N, C, M]. No gradient (fluid: EmptyGradOpMaker)."""
    type = "matrix_nms"
    inputs, outputs = ("BBoxes", "Scores"), ("Out", "Index")
    no_grad = True
    lod_aware = True

    def infer(self, BBoxes, Scores, *, background_label=0, score_threshold=0.0,
              post_threshold=0.0, nms_top_k=-1, keep_top_k=-1, normalized=True,
              use_gaussian=False, gaussian_sigma=2.0):
        # fluid checks the ranks only at run time (a compile-time [M, C, 4] BBoxes passes)
        box = BBoxes.shape[-1] if BBoxes.ndim else -1
        lod_level = max(BBoxes.lod_level, 1)
        return {"Out": VarSpec([-1, box + 2 if box > 0 else -1], BBoxes.dtype, lod_level),
                "Index": VarSpec([-1, 1], "int32", lod_level)}

    def forward(self, BBoxes, Scores, lod=None, *, background_label=0, score_threshold=0.0,
                post_threshold=0.0, nms_top_k=-1, keep_top_k=-1, normalized=True,
                use_gaussian=False, gaussian_sigma=2.0):
        _need(self.type, Scores.ndim == 3, f"Scores must be 3-D [N, C, M], got "
                                           f"{list(Scores.shape)}")
        _need(self.type, BBoxes.ndim == 3 and BBoxes.shape[2] == 4,
              f"BBoxes must be 3-D [N, M, 4] (xmin, ymin, xmax, ymax), got "
              f"{list(BBoxes.shape)}")
        _need(self.type, BBoxes.shape[:2] == (Scores.shape[0], Scores.shape[2]),
              f"BBoxes {list(BBoxes.shape)} and Scores {list(Scores.shape)} disagree "
              f"(expected [N, M, 4] and [N, C, M])")
        n_img, n_cls, m = Scores.shape
        outs, index, counts = [], [], []
        for n in range(n_img):
            labels, idx, dec = [], [], []
            for c in range(n_cls):
                if c == background_label:
                    continue
                i, d = _matrix_nms_class(BBoxes[n], Scores[n, c], score_threshold,
                                         post_threshold, nms_top_k, normalized, use_gaussian,
                                         gaussian_sigma)
                labels.append(np.full(i.size, c, np.int64))
                idx.append(i)
                dec.append(d)
            lab = np.concatenate(labels) if labels else np.zeros(0, np.int64)
            ids = np.concatenate(idx) if idx else np.zeros(0, np.int64)
            sc = np.concatenate(dec) if dec else np.zeros(0, Scores.dtype)
            order = np.argsort(-sc, kind="stable")
            if keep_top_k > -1:
                order = order[:keep_top_k]
            rows = np.concatenate([lab[order, None].astype(BBoxes.dtype),
                                   sc[order, None].astype(BBoxes.dtype),
                                   BBoxes[n, ids[order]]], axis=1)
            outs.append(rows)
            index.append(n * m + ids[order])
            counts.append(int(order.size))
        out = np.concatenate(outs).astype(BBoxes.dtype) if outs else \
            np.zeros((0, 6), BBoxes.dtype)
        idx_out = (np.concatenate(index) if index else np.zeros(0)).astype(np.int32)
        lod_out = _lod(counts)
        return {"Out": out.reshape(-1, 6), "Index": idx_out.reshape(-1, 1),
                "lod": {"Out": lod_out, "Index": lod_out}}
