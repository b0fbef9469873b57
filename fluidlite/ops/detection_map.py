"""``detection_map``: mean average precision of detections against the ground truth, with the
accumulator state fluid's ``fluid.metrics.DetectionMAP`` threads through successive runs.

Per image (LoD of DetectRes and Label), per class: ground truths count as positives (difficult
ones only with ``evaluate_difficult``); detections in descending score order (boxes clipped to
[0, 1]) match the unvisited ground truth of best IoU > ``overlap_threshold`` as true positives,
the rest are false positives (a detection whose best match is difficult is skipped when
difficult boxes are not evaluated). Per class with positives: precision/recall over the
score-sorted (stable) cumulative counts, AP by ``integral`` (sum of precision times recall
steps) or ``11point`` (VOC2007), MAP their mean.

The state: AccumPosCount [class_num, 1] int32; AccumTruePos / AccumFalsePos [K, 2] of
(score, flag) rows grouped by class in their LoD. With HasState = 1 the input state is added
before the batch's.
"""
from __future__ import annotations

from typing import Any, Dict, List, Tuple

import numpy as np

from ..core.lod import attach
from ..core.registry import OpDef, VarSpec, register
from .detection import iou_matrix, offsets_of


def _need(op: str, cond: bool, msg: str) -> None:
    if not cond:
        raise ValueError(f"{op}: {msg}")


def average_precision(pairs_tp: List[Tuple[float, int]], pairs_fp: List[Tuple[float, int]],
                      num_pos: int, ap_type: str) -> float:
    """AP of one class from its (score, flag) lists (fluid's GetAccumulation + CalcMAP)."""
    def accumulate(pairs):
        order = sorted(range(len(pairs)), key=lambda i: -pairs[i][0])      # stable
        return np.cumsum([pairs[i][1] for i in order])

    tp, fp = accumulate(pairs_tp), accumulate(pairs_fp)
    if tp.size == 0:
        return 0.0
    precision = tp / np.maximum(tp + fp, 1e-12)
    recall = tp / num_pos
    if ap_type == "11point":
        max_prec = [0.0] * 11
        start = tp.size - 1
        for j in range(10, -1, -1):
            for i in range(start, -1, -1):
                if recall[i] < j / 10.0:
                    start = i
                    if j > 0:
                        max_prec[j - 1] = max_prec[j]
                    break
                if max_prec[j] < precision[i]:
                    max_prec[j] = precision[i]
        return float(sum(max_prec) / 11.0)
    ap, prev = 0.0, 0.0
    for p, r in zip(precision, recall):
        if abs(r - prev) > 1e-6:
            ap += p * abs(r - prev)
        prev = r
    return float(ap)


@register
class DetectionMAP(OpDef):
    """Mean average precision of DetectRes [M, 6] (label, score, x1, y1, x2, y2) against
    Label [G, 6] (label, difficult, x1, y1, x2, y2) or [G, 5] (no difficult flag), both with a
    per-image LoD; accumulates into AccumPosCount / AccumTruePos / AccumFalsePos (module
    docstring). Classes equal to ``background_label`` or without positives are left out of
    the mean; a class with positives but no detection counts with AP 0 (fluid 1.8)."""
    type = "detection_map"
    inputs = ("DetectRes", "Label", "HasState?", "PosCount?", "TruePos?", "FalsePos?")
    outputs = ("MAP", "AccumPosCount", "AccumTruePos", "AccumFalsePos")
    no_grad = True
    lod_aware = True

    def infer(self, DetectRes, Label, HasState=None, PosCount=None, TruePos=None,
              FalsePos=None, *, overlap_threshold=0.5, evaluate_difficult=True,
              ap_type="integral", class_num=1, background_label=0):
        _need(self.type, ap_type in ("integral", "11point"),
              f"ap_type must be 'integral' or '11point', got {ap_type!r}")
        _need(self.type, class_num > 0, f"class_num must be > 0, got {class_num}")
        _need(self.type, DetectRes.ndim == 2 and DetectRes.shape[1] in (-1, 6),
              f"DetectRes must be [M, 6], got {list(DetectRes.shape)}")
        _need(self.type, Label.ndim == 2 and Label.shape[1] in (-1, 5, 6),
              f"Label must be [G, 6] or [G, 5], got {list(Label.shape)}")
        return {"MAP": VarSpec([1], "float32"),
                "AccumPosCount": VarSpec([class_num, 1], "int32"),
                "AccumTruePos": VarSpec([-1, 2], DetectRes.dtype, 1),
                "AccumFalsePos": VarSpec([-1, 2], DetectRes.dtype, 1)}

    @staticmethod
    def _state(arr: Any, lod: Any, class_num: int) -> Dict[int, List[Tuple[float, int]]]:
        out: Dict[int, List[Tuple[float, int]]] = {}
        if arr is None or np.asarray(arr).size == 0:
            return out
        a = np.asarray(arr).reshape(-1, 2)
        off = offsets_of(lod, a.shape[0]) if lod else np.array([0, a.shape[0]])
        for c in range(min(len(off) - 1, class_num)):
            rows = a[off[c]:off[c + 1]]
            if rows.size:
                out[c] = [(float(s), int(f)) for s, f in rows]
        return out

    def forward(self, DetectRes, Label, HasState=None, PosCount=None, TruePos=None,
                FalsePos=None, lod=None, *, overlap_threshold=0.5, evaluate_difficult=True,
                ap_type="integral", class_num=1, background_label=0):
        lod = lod or {}
        pos_count: Dict[int, int] = {}
        true_pos: Dict[int, List[Tuple[float, int]]] = {}
        false_pos: Dict[int, List[Tuple[float, int]]] = {}
        if HasState is not None and int(np.asarray(HasState).reshape(-1)[0]) != 0:
            if PosCount is not None:
                for c, v in enumerate(np.asarray(PosCount).reshape(-1)[:class_num]):
                    if v:
                        pos_count[c] = int(v)
            true_pos = self._state(TruePos, lod.get("TruePos"), class_num)
            false_pos = self._state(FalsePos, lod.get("FalsePos"), class_num)
        doff = offsets_of(lod.get("DetectRes"), DetectRes.shape[0])
        goff = offsets_of(lod.get("Label"), Label.shape[0])
        _need(self.type, len(doff) == len(goff),
              f"DetectRes holds {len(doff) - 1} images (its LoD) but Label {len(goff) - 1}")
        has_difficult = Label.shape[1] == 6
        for n in range(len(goff) - 1):
            gt = Label[goff[n]:goff[n + 1]]
            det = DetectRes[doff[n]:doff[n + 1]]
            g_label = gt[:, 0].astype(np.int64)
            g_diff = gt[:, 1].astype(bool) if has_difficult else np.zeros(len(gt), bool)
            g_box = gt[:, 2:6] if has_difficult else gt[:, 1:5]
            for c in np.unique(g_label):
                cnt = int(np.sum(g_label == c)) if evaluate_difficult else \
                    int(np.sum((g_label == c) & ~g_diff))
                if cnt:
                    pos_count[int(c)] = pos_count.get(int(c), 0) + cnt
            for c in np.unique(det[:, 0].astype(np.int64)) if det.size else []:
                rows = det[det[:, 0].astype(np.int64) == c]
                tp = true_pos.setdefault(int(c), [])
                fp = false_pos.setdefault(int(c), [])
                mine = g_label == c
                if not mine.any():
                    for s in rows[:, 1]:
                        tp.append((float(s), 0))
                        fp.append((float(s), 1))
                    continue
                boxes, diff = g_box[mine], g_diff[mine]
                visited = np.zeros(len(boxes), bool)
                order = np.argsort(-rows[:, 1], kind="stable")
                iou = iou_matrix(np.clip(rows[order, 2:6], 0.0, 1.0), boxes, normalized=True)
                for k, i in enumerate(order):
                    s = float(rows[i, 1])
                    j = int(np.argmax(iou[k]))
                    if iou[k, j] > overlap_threshold:
                        if evaluate_difficult or not diff[j]:
                            hit = not visited[j]
                            visited[j] = True
                            tp.append((s, int(hit)))
                            fp.append((s, int(not hit)))
                    else:
                        tp.append((s, 0))
                        fp.append((s, 1))
        total, count = 0.0, 0
        for c in sorted(pos_count):
            # fluid 1.8 compares the positive *count* with background_label (a bug); the
            # intended rule, used here, leaves out the background and classes without positives
            if c == background_label or pos_count[c] == 0:
                continue
            count += 1
            if c in true_pos:       # fluid: a class with positives but no detection has AP 0
                total += average_precision(true_pos[c], false_pos[c], pos_count[c], ap_type)
        m_ap = total / count if count else 0.0
        pc = np.array([[pos_count.get(c, 0)] for c in range(class_num)], np.int32)

        def pack(state):
            rows = [np.asarray(state.get(c, []), np.float64).reshape(-1, 2)
                    for c in range(class_num)]
            offs = tuple(int(v) for v in np.concatenate([[0], np.cumsum([len(r)
                                                                         for r in rows])]))
            return attach(np.concatenate(rows).astype(DetectRes.dtype), (offs,)), offs

        tp_arr, tp_off = pack(true_pos)
        fp_arr, fp_off = pack(false_pos)
        return {"MAP": np.array([m_ap], np.float32), "AccumPosCount": pc,
                "AccumTruePos": tp_arr, "AccumFalsePos": fp_arr,
                "lod": {"AccumTruePos": (tp_off,), "AccumFalsePos": (fp_off,)}}
