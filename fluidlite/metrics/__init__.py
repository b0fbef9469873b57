"""``fluid.metrics``: accumulate evaluation statistics over batches in Python.

These run on fetched numpy values, outside the Program (as in fluid):

    acc = fluid.metrics.Accuracy()
    for batch in data:
        a, = exe.run(test_program, feed=..., fetch_list=[batch_acc])
        acc.update(value=a, weight=len(batch))
    print(acc.eval())
"""
from __future__ import annotations

import copy
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

__all__ = ["MetricBase", "CompositeMetric", "Precision", "Recall", "Accuracy",
           "ChunkEvaluator", "EditDistance", "Auc"]


def _is_number_or_array(x: Any) -> bool:
    return isinstance(x, (int, float, np.number, np.ndarray)) and not isinstance(x, bool)


class MetricBase:
    """Base class: public attributes hold the state; ``reset`` zeroes them (keeping types)."""

    def __init__(self, name: Optional[str] = None) -> None:
        self._name = str(name) if name is not None else type(self).__name__

    def __str__(self) -> str:
        return self._name

    def reset(self) -> None:
        """Zero every public state attribute (ints to 0, floats to 0.0, arrays to zeros)."""
        for attr, value in self.__dict__.items():
            if attr.startswith("_"):
                continue
            if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
                setattr(self, attr, 0)
            elif isinstance(value, (float, np.floating)):
                setattr(self, attr, 0.0)
            elif isinstance(value, np.ndarray):
                setattr(self, attr, np.zeros_like(value))
            else:
                setattr(self, attr, None)

    def get_config(self) -> Dict[str, Any]:
        """The metric's name and a copy of its state."""
        states = {k: copy.deepcopy(v) for k, v in self.__dict__.items() if not k.startswith("_")}
        return {"name": self._name, "states": states}

    def update(self, preds: Any, labels: Any) -> None:
        raise NotImplementedError(f"{type(self).__name__} must implement update()")

    def eval(self) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must implement eval()")


class CompositeMetric(MetricBase):
    """Several metrics updated with the same ``(preds, labels)``; ``eval`` lists their results."""

    def __init__(self, name: Optional[str] = None) -> None:
        super().__init__(name)
        self._metrics: List[MetricBase] = []

    def add_metric(self, metric: MetricBase) -> None:
        if not isinstance(metric, MetricBase):
            raise ValueError("SubMetric should be inherit from MetricBase.")
        self._metrics.append(metric)

    def reset(self) -> None:
        for m in self._metrics:
            m.reset()

    def update(self, preds: Any, labels: Any) -> None:
        for m in self._metrics:
            m.update(preds, labels)

    def eval(self) -> List[Any]:
        return [m.eval() for m in self._metrics]


def _binary(preds: Any, labels: Any, who: str) -> Tuple[np.ndarray, np.ndarray]:
    preds, labels = np.asarray(preds), np.asarray(labels)
    if preds.shape[0] != labels.shape[0]:
        raise ValueError(f"{who}: preds has {preds.shape[0]} rows but labels has "
                         f"{labels.shape[0]}")
    return np.rint(preds).astype(np.int32).reshape(-1), labels.astype(np.int32).reshape(-1)


class Precision(MetricBase):
    """Binary precision ``tp / (tp + fp)``; ``preds`` are probabilities rounded at 0.5."""

    def __init__(self, name: Optional[str] = None) -> None:
        super().__init__(name)
        self.tp, self.fp = 0, 0

    def update(self, preds: Any, labels: Any) -> None:
        p, y = _binary(preds, labels, "Precision")
        self.tp += int(np.sum((p == 1) & (y == 1)))
        self.fp += int(np.sum((p == 1) & (y != 1)))

    def eval(self) -> float:
        ap = self.tp + self.fp
        return float(self.tp) / ap if ap != 0 else 0.0


class Recall(MetricBase):
    """Binary recall ``tp / (tp + fn)``; ``preds`` are probabilities rounded at 0.5."""

    def __init__(self, name: Optional[str] = None) -> None:
        super().__init__(name)
        self.tp, self.fn = 0, 0

    def update(self, preds: Any, labels: Any) -> None:
        p, y = _binary(preds, labels, "Recall")
        self.tp += int(np.sum((p == 1) & (y == 1)))
        self.fn += int(np.sum((p != 1) & (y == 1)))

    def eval(self) -> float:
        recall = self.tp + self.fn
        return float(self.tp) / recall if recall != 0 else 0.0


class Accuracy(MetricBase):
    """Weighted mean of per-batch accuracies: ``sum(value * weight) / sum(weight)``."""

    def __init__(self, name: Optional[str] = None) -> None:
        super().__init__(name)
        self.value, self.weight = 0.0, 0.0

    def update(self, value: Any, weight: Any) -> None:
        if not _is_number_or_array(value):
            raise ValueError("The 'value' must be a number(int, float) or a numpy ndarray.")
        if not _is_number_or_array(weight):
            raise ValueError("The 'weight' must be a number(int, float) or a numpy ndarray.")
        self.value += float(np.sum(np.asarray(value, dtype=np.float64) * weight))
        self.weight += float(np.sum(weight))

    def eval(self) -> float:
        if self.weight == 0:
            raise ValueError("There is no data in Accuracy Metrics. Please check layers.accuracy "
                             "output has added to Accuracy.")
        return self.value / self.weight


class ChunkEvaluator(MetricBase):
    """Chunk-level precision, recall and F1 from counts of inferred, labelled and correct
    chunks (accumulated over batches)."""

    def __init__(self, name: Optional[str] = None) -> None:
        super().__init__(name)
        self.num_infer_chunks = self.num_label_chunks = self.num_correct_chunks = 0

    def update(self, num_infer_chunks: Any, num_label_chunks: Any,
               num_correct_chunks: Any) -> None:
        for v, what in ((num_infer_chunks, "num_infer_chunks"),
                        (num_label_chunks, "num_label_chunks"),
                        (num_correct_chunks, "num_correct_chunks")):
            if not _is_number_or_array(v):
                raise ValueError(f"The '{what}' must be a number(int) or a numpy ndarray.")
        self.num_infer_chunks += int(np.sum(num_infer_chunks))
        self.num_label_chunks += int(np.sum(num_label_chunks))
        self.num_correct_chunks += int(np.sum(num_correct_chunks))

    def eval(self) -> Tuple[float, float, float]:
        precision = self.num_correct_chunks / self.num_infer_chunks \
            if self.num_infer_chunks else 0.0
        recall = self.num_correct_chunks / self.num_label_chunks \
            if self.num_label_chunks else 0.0
        f1 = 2 * precision * recall / (precision + recall) if self.num_correct_chunks else 0.0
        return float(precision), float(recall), float(f1)


class EditDistance(MetricBase):
    """Average edit distance and the fraction of sequences with a non-zero distance."""

    def __init__(self, name: Optional[str] = None) -> None:
        super().__init__(name)
        self.total_distance, self.seq_num, self.instance_error = 0.0, 0, 0

    def update(self, distances: Any, seq_num: Any) -> None:
        if not _is_number_or_array(distances):
            raise ValueError("The 'distances' must be a numpy ndarray.")
        if not _is_number_or_array(seq_num):
            raise ValueError("The 'seq_num' must be a number(int) or a numpy ndarray.")
        d = np.asarray(distances)
        self.seq_num += int(np.sum(seq_num))
        self.instance_error += int(np.sum(d != 0))
        self.total_distance += float(np.sum(d))

    def eval(self) -> Tuple[float, float]:
        if self.seq_num == 0:
            raise ValueError("There is no data in EditDistance Metric. Please check layers."
                             "edit_distance output has been added to EditDistance.")
        return self.total_distance / self.seq_num, self.instance_error / self.seq_num


class Auc(MetricBase):
    """Area under the ROC curve from bucketed positive/negative score histograms (fluid's
    streaming AUC): ``preds[:, 1]`` is the positive-class probability."""

    def __init__(self, name: Optional[str] = None, curve: str = "ROC",
                 num_thresholds: int = 4095) -> None:
        super().__init__(name)
        if curve != "ROC":
            raise ValueError(f"Auc: only curve='ROC' is supported, got {curve!r}")
        self._curve, self._num_thresholds = curve, int(num_thresholds)
        self._stat_pos = np.zeros(self._num_thresholds + 1, dtype=np.int64)
        self._stat_neg = np.zeros(self._num_thresholds + 1, dtype=np.int64)

    def reset(self) -> None:
        self._stat_pos[:] = 0
        self._stat_neg[:] = 0

    def update(self, preds: Any, labels: Any) -> None:
        preds, labels = np.asarray(preds), np.asarray(labels).reshape(-1)
        if preds.ndim != 2 or preds.shape[1] < 2 or preds.shape[0] != labels.shape[0]:
            raise ValueError(f"Auc: preds must be [N, 2] probabilities and labels [N, 1]; got "
                             f"{list(preds.shape)} and {list(labels.shape)}")
        bins = (preds[:, 1] * self._num_thresholds).astype(np.int64)
        bins = np.clip(bins, 0, self._num_thresholds)
        self._stat_pos += np.bincount(bins[labels != 0], minlength=self._num_thresholds + 1)
        self._stat_neg += np.bincount(bins[labels == 0], minlength=self._num_thresholds + 1)

    def eval(self) -> float:
        pos = self._stat_pos[::-1].cumsum()      # true positives above each threshold
        neg = self._stat_neg[::-1].cumsum()
        tot_pos, tot_neg = pos[-1], neg[-1]
        if tot_pos == 0 or tot_neg == 0:
            return 0.0
        prev_pos = np.concatenate(([0], pos[:-1]))
        prev_neg = np.concatenate(([0], neg[:-1]))
        area = np.sum((neg - prev_neg) * (pos + prev_pos) / 2.0)
        return float(area / (tot_pos * tot_neg))


# fluid.metrics.DetectionMAP (in-program mAP accumulation; see detection.py)
from .detection import DetectionMAP  # noqa: E402,F401  (re-exported)

__all__.append("DetectionMAP")
