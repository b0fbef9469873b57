"""``yolov3_loss``: fluid 1.8's YOLOv3 training loss and its gradient.

X is ``[N, M*(5 + class_num), H, W]`` for the M anchors of ``anchor_mask``; GTBox ``[N, B, 4]``
holds (cx, cy, w, h) normalized by the input size ``downsample_ratio * H``; GTLabel ``[N, B]``;
GTScore ``[N, B]`` (mixup weights; 1 when absent). With ``sce(x, t) = max(x, 0) - x*t +
log(1 + exp(-|x|))``:

* every predicted box whose best IoU with a ground truth exceeds ``ignore_thresh`` is ignored
  by the objectness loss (ObjectnessMask -1);
* each ground truth (w, h > 0) takes the anchor (over all anchors) whose shape fits it best;
  when that anchor is in ``anchor_mask`` its cell (int(cx*W), int(cy*H)) is a positive:
  location loss ``(2 - w*h) * score * (sce(tx) + sce(ty) + |tw - x_w| + |th - x_h|)`` with
  ``tx = cx*H - gi``, ``tw = log(w * input_size / anchor_w)``, class loss
  ``score * sum_c sce(x_c, pos if c == label else neg)`` (label smoothing
  ``neg = min(1/class_num, 1/40)``, ``pos = 1 - neg``), and ObjectnessMask = score;
* objectness loss: ``sce(x_obj, 1) * mask`` for positives, ``sce(x_obj, 0)`` where the mask
  is 0 (not ignored).

Loss ``[N]`` sums the terms per image; GTMatchMask ``[N, B]`` is the matched anchor's index in
``anchor_mask`` (-1: none). The gradient is the analytic derivative of the same terms
(``sigmoid(x) - t`` for sce, ``sign(x - t)`` for the L1 terms), w.r.t. X only.
"""
from __future__ import annotations

from typing import Any, Dict, List, Tuple

import numpy as np

from ..core.registry import OpDef, VarSpec, register
from .tensor import emit_grad_op


def _need(op: str, cond: bool, msg: str) -> None:
    if not cond:
        raise ValueError(f"{op}: {msg}")


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _sce(x: np.ndarray, t: Any) -> np.ndarray:
    return np.maximum(x, 0.0) - x * t + np.log1p(np.exp(-np.abs(x)))


def _iou_center(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of (cx, cy, w, h) boxes, broadcasting over the leading axes."""
    ix = np.minimum(a[..., 0] + a[..., 2] / 2, b[..., 0] + b[..., 2] / 2) - \
        np.maximum(a[..., 0] - a[..., 2] / 2, b[..., 0] - b[..., 2] / 2)
    iy = np.minimum(a[..., 1] + a[..., 3] / 2, b[..., 1] + b[..., 3] / 2) - \
        np.maximum(a[..., 1] - a[..., 3] / 2, b[..., 1] - b[..., 3] / 2)
    inter = np.where((ix < 0) | (iy < 0), 0.0, ix * iy)
    union = a[..., 2] * a[..., 3] + b[..., 2] * b[..., 3] - inter
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(union > 0, inter / np.where(union > 0, union, 1.0), 0.0)


class _Plan:
    """Everything the loss and its gradient share: targets, masks and positive cells."""

    def __init__(self, X, GTBox, GTLabel, GTScore, anchors, anchor_mask, class_num,
                 ignore_thresh, downsample_ratio, use_label_smooth, scale_x_y):
        N, _, H, W = X.shape
        M = len(anchor_mask)
        self.x = X.reshape(N, M, 5 + class_num, H, W).astype(np.float64)
        self.H, self.W, self.M, self.C = H, W, M, class_num
        input_size = downsample_ratio * H
        gt = GTBox.astype(np.float64)
        score = np.ones(GTLabel.shape) if GTScore is None else GTScore.astype(np.float64)
        # fluid's LessEqualZero skips a box only when w < 1e-6 or h < 1e-6
        valid = (gt[..., 2] >= 1e-6) & (gt[..., 3] >= 1e-6)
        # predicted boxes (normalized, centre format) of every masked anchor and cell
        aw = np.array([anchors[2 * m] for m in anchor_mask], np.float64)
        ah = np.array([anchors[2 * m + 1] for m in anchor_mask], np.float64)
        bias = -0.5 * (scale_x_y - 1.0)
        px = (np.arange(W) + _sigmoid(self.x[:, :, 0]) * scale_x_y + bias) / H
        py = (np.arange(H)[:, None] + _sigmoid(self.x[:, :, 1]) * scale_x_y + bias) / H
        pw = np.exp(self.x[:, :, 2]) * aw[None, :, None, None] / input_size
        ph = np.exp(self.x[:, :, 3]) * ah[None, :, None, None] / input_size
        pred = np.stack([px, py, pw, ph], axis=-1)                  # [N, M, H, W, 4]
        iou = _iou_center(pred[:, :, :, :, None, :], gt[:, None, None, None, :, :])
        iou = np.where(valid[:, None, None, None, :], iou, 0.0)
        best = iou.max(axis=-1) if gt.shape[1] else np.zeros(pred.shape[:4])
        self.obj_mask = np.where(best > ignore_thresh, -1.0, 0.0)   # [N, M, H, W]
        # positives: each valid gt's best anchor (over all anchors, by shape)
        all_w = np.asarray(anchors[0::2], np.float64) / input_size
        all_h = np.asarray(anchors[1::2], np.float64) / input_size
        self.match = np.full(GTLabel.shape, -1, np.int32)
        self.pos: List[Tuple[Any, ...]] = []   # one entry per positive cell
        smooth = min(1.0 / class_num, 1.0 / 40) if use_label_smooth else 0.0
        self.label_pos, self.label_neg = 1.0 - smooth, smooth
        for i in range(N):
            for t in range(gt.shape[1]):
                g = gt[i, t]
                if not valid[i, t]:
                    continue
                shape_iou = _iou_center(np.stack([np.zeros_like(all_w), np.zeros_like(all_w),
                                                  all_w, all_h], -1),
                                        np.array([0.0, 0.0, g[2], g[3]]))
                best_n = 0
                best_v = 0.0
                for a, v in enumerate(shape_iou):        # first strict maximum, as fluid
                    if v > best_v:
                        best_v, best_n = v, a
                m = anchor_mask.index(best_n) if best_n in anchor_mask else -1
                self.match[i, t] = m
                if m < 0:
                    continue
                gi, gj = int(g[0] * W), int(g[1] * H)
                tx, ty = g[0] * H - gi, g[1] * H - gj
                tw = np.log(g[2] * input_size / anchors[2 * best_n])
                th = np.log(g[3] * input_size / anchors[2 * best_n + 1])
                sc = float(score[i, t])
                self.pos.append((i, m, gj, gi, int(GTLabel[i, t]), tx, ty, tw, th, sc,
                                 (2.0 - g[2] * g[3]) * sc))
                self.obj_mask[i, m, gj, gi] = sc
        self.match = np.where(valid, self.match, self.match.dtype.type(-1)).astype(np.int32)

    def loss(self) -> np.ndarray:
        x, mask = self.x, self.obj_mask
        obj = x[:, :, 4]
        loss = np.where(mask > 1e-5, _sce(obj, 1.0) * mask,
                        np.where(mask > -0.5, _sce(obj, 0.0), 0.0)).sum(axis=(1, 2, 3))
        for i, m, gj, gi, label, tx, ty, tw, th, sc, box_scale in self.pos:
            cell = x[i, m, :, gj, gi]
            loss[i] += box_scale * (_sce(cell[0], tx) + _sce(cell[1], ty)
                                    + abs(tw - cell[2]) + abs(th - cell[3]))
            target = np.full(self.C, self.label_neg)
            target[label] = self.label_pos
            loss[i] += sc * _sce(cell[5:], target).sum()
        return loss

    def grad(self, dloss: np.ndarray) -> np.ndarray:
        x, mask = self.x, self.obj_mask
        g = np.zeros_like(x)
        obj = x[:, :, 4]
        s = _sigmoid(obj)
        g[:, :, 4] = np.where(mask > 1e-5, (s - 1.0) * mask, np.where(mask > -0.5, s, 0.0))
        for i, m, gj, gi, label, tx, ty, tw, th, sc, box_scale in self.pos:
            cell = x[i, m, :, gj, gi]
            g[i, m, 0, gj, gi] += box_scale * (_sigmoid(cell[0]) - tx)
            g[i, m, 1, gj, gi] += box_scale * (_sigmoid(cell[1]) - ty)
            g[i, m, 2, gj, gi] += box_scale * (1.0 if cell[2] > tw else -1.0)
            g[i, m, 3, gj, gi] += box_scale * (1.0 if cell[3] > th else -1.0)
            target = np.full(self.C, self.label_neg)
            target[label] = self.label_pos
            g[i, m, 5:, gj, gi] += sc * (_sigmoid(cell[5:]) - target)
        return g * dloss.reshape(-1, 1, 1, 1, 1)


@register
class Yolov3Loss(OpDef):
    """YOLOv3 loss per image (see the module docstring for every term); dX is its analytic
    derivative."""
    type = "yolov3_loss"
    inputs = ("X", "GTBox", "GTLabel", "GTScore?")
    outputs = ("Loss", "ObjectnessMask", "GTMatchMask")
    grad_uses = ("X", "GTBox", "GTLabel", "GTScore")

    def make_grad(self, g, **attrs):
        """fluid's grad maker: X@GRAD only (the ground truth gets none)."""
        emit_grad_op(g, self.type, attrs, uses=self.grad_uses, out_grads=("Loss",),
                     in_grads=("X",))

    def _check(self, X_shape, GTBox_shape, GTLabel_shape, anchors, anchor_mask,
               class_num) -> None:
        _need(self.type, len(X_shape) == 4, f"X must be 4-D, got {list(X_shape)}")
        _need(self.type, len(anchors) > 0 and len(anchors) % 2 == 0,
              f"anchors must hold (width, height) pairs, got {list(anchors)}")
        an = len(anchors) // 2
        _need(self.type, len(anchor_mask) > 0 and all(0 <= m < an for m in anchor_mask),
              f"anchor_mask must index the {an} anchors, got {list(anchor_mask)}")
        _need(self.type, class_num > 0, f"class_num must be > 0, got {class_num}")
        _need(self.type, X_shape[1] < 0 or X_shape[1] == len(anchor_mask) * (5 + class_num),
              f"the channel count of X ({X_shape[1]}) must be len(anchor_mask) * (5 + "
              f"class_num) = {len(anchor_mask) * (5 + class_num)}")
        _need(self.type, X_shape[2] < 0 or X_shape[2] == X_shape[3],
              f"X must have equal height and width, got {list(X_shape)}")
        _need(self.type, len(GTBox_shape) == 3 and GTBox_shape[2] == 4,
              f"GTBox must be [N, B, 4], got {list(GTBox_shape)}")
        _need(self.type, len(GTLabel_shape) == 2,
              f"GTLabel must be [N, B], got {list(GTLabel_shape)}")

    def infer(self, X, GTBox, GTLabel, GTScore=None, *, anchors=(), anchor_mask=(),
              class_num=1, ignore_thresh=0.7, downsample_ratio=32, use_label_smooth=True,
              scale_x_y=1.0):
        self._check(X.shape, GTBox.shape, GTLabel.shape, anchors, anchor_mask, class_num)
        return {"Loss": VarSpec([X.shape[0]], X.dtype),
                "ObjectnessMask": VarSpec([X.shape[0], len(anchor_mask), X.shape[2],
                                           X.shape[3]], X.dtype),
                "GTMatchMask": VarSpec(list(GTLabel.shape), "int32")}

    def _plan(self, X, GTBox, GTLabel, GTScore, attrs: Dict[str, Any]) -> _Plan:
        self._check(X.shape, GTBox.shape, GTLabel.shape, attrs["anchors"],
                    attrs["anchor_mask"], attrs["class_num"])
        return _Plan(X, GTBox, GTLabel, GTScore, list(attrs["anchors"]),
                     list(attrs["anchor_mask"]), attrs["class_num"], attrs["ignore_thresh"],
                     attrs["downsample_ratio"], attrs["use_label_smooth"], attrs["scale_x_y"])

    def forward(self, X, GTBox, GTLabel, GTScore=None, *, anchors=[], anchor_mask=[],
                class_num=1, ignore_thresh=0.7, downsample_ratio=32, use_label_smooth=True,
                scale_x_y=1.0):
        plan = self._plan(X, GTBox, GTLabel, GTScore, dict(
            anchors=anchors, anchor_mask=anchor_mask, class_num=class_num,
            ignore_thresh=ignore_thresh, downsample_ratio=downsample_ratio,
            use_label_smooth=use_label_smooth, scale_x_y=scale_x_y))
        return {"Loss": plan.loss().astype(X.dtype),
                "ObjectnessMask": plan.obj_mask.astype(X.dtype),
                "GTMatchMask": plan.match}

    def backward(self, X, GTBox, GTLabel, GTScore, dLoss, dObjectnessMask=None,
                 dGTMatchMask=None, *, anchors=[], anchor_mask=[], class_num=1,
                 ignore_thresh=0.7, downsample_ratio=32, use_label_smooth=True, scale_x_y=1.0):
        plan = self._plan(X, GTBox, GTLabel, GTScore, dict(
            anchors=anchors, anchor_mask=anchor_mask, class_num=class_num,
            ignore_thresh=ignore_thresh, downsample_ratio=downsample_ratio,
            use_label_smooth=use_label_smooth, scale_x_y=scale_x_y))
        return {"X": plan.grad(dLoss.astype(np.float64)).reshape(X.shape).astype(X.dtype)}
