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
    """Base class: public attributes hold the state; ``reset`` zeroes them (keeping types).

    Args:
        name (str | None): the metric's name (``get_config()["name"]``, ``str(metric)``); None uses
            the class name. Default None.

    Returns:
        MetricBase: a metric with no state; subclasses add state attributes and implement
        ``update`` / ``eval``.

    Raises:
        None: the constructor does not raise.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> class Count(fluid.metrics.MetricBase):
        ...     def __init__(self, name=None):
        ...         super().__init__(name)
        ...         self.n = 0
        ...     def update(self, batch):
        ...         self.n += len(batch)
        ...     def eval(self):
        ...         return self.n
        >>> c = Count("count")
        >>> c.update([1, 2, 3])
        >>> c.eval(), c.get_config()["name"]
        (3, 'count')
        >>> c.reset()
        >>> c.eval()
        0
    """

    def __init__(self, name: Optional[str] = None) -> None:
        self._name = str(name) if name is not None else type(self).__name__

    def __str__(self) -> str:
        return self._name

    def reset(self) -> None:
        """Zero every public state attribute (ints to 0, floats to 0.0, arrays to zeros).

        Args:
            None: this method takes no arguments.

        Returns:
            None.

        Raises:
            None: this method does not raise.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> m = fluid.metrics.EditDistance("ed")
            >>> m.update(distances=np.array([[2.0]]), seq_num=1)
            >>> m.reset()
            >>> m.update(distances=np.array([[4.0]]), seq_num=1)
            >>> m.eval()
            (4.0, 1.0)
        """
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
        """The metric's name and a copy of its state.

        Args:
            None: this method takes no arguments.

        Returns:
            dict: ``{"name": str, "states": {attribute: deep copy of its value}}`` for every public
            attribute.

        Raises:
            None: this method does not raise.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> m = fluid.metrics.Precision("precision")
            >>> sorted(m.get_config())
            ['name', 'states']
        """
        states = {k: copy.deepcopy(v) for k, v in self.__dict__.items() if not k.startswith("_")}
        return {"name": self._name, "states": states}

    def update(self, preds: Any, labels: Any) -> None:
        """Accumulate one batch (subclasses implement it).

        Args:
            preds (Any): the batch's predictions (meaning set by the subclass).
            labels (Any): the batch's labels.

        Returns:
            None.

        Raises:
            NotImplementedError: always on MetricBase itself; subclasses override it.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> class Total(fluid.metrics.MetricBase):
            ...     def __init__(self):
            ...         super().__init__("total")
            ...         self.total = 0.0
            ...     def update(self, values):
            ...         self.total += float(np.sum(values))
            ...     def eval(self):
            ...         return self.total
            >>> t = Total()
            >>> t.update(np.array([1.0, 2.0]))
            >>> t.eval()
            3.0
        """
        raise NotImplementedError(f"{type(self).__name__} must implement update()")

    def eval(self) -> Any:
        """The metric's value from what ``update`` accumulated (subclasses implement it).

        Args:
            None: this method takes no arguments.

        Returns:
            Any: the metric's value (type set by the subclass).

        Raises:
            NotImplementedError: always on MetricBase itself; subclasses override it.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> m = fluid.metrics.Accuracy()          # every metric evaluates what it accumulated
            >>> m.update(value=0.5, weight=2)
            >>> m.eval()
            0.5
        """
        raise NotImplementedError(f"{type(self).__name__} must implement eval()")


class CompositeMetric(MetricBase):
    """Several metrics updated with the same ``(preds, labels)``; ``eval`` lists their results.

    Args:
        name (str | None): the metric's name (``get_config()["name"]``).

    Returns:
        CompositeMetric: an empty composite; ``add_metric`` fills it.

    Raises:
        None: the constructor does not raise.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> m = fluid.metrics.CompositeMetric()
        >>> m.add_metric(fluid.metrics.Precision())
        >>> m.add_metric(fluid.metrics.Recall())
        >>> m.update(preds=np.array([[0.9], [0.8], [0.2]]), labels=np.array([[1], [0], [1]]))
        >>> m.eval()
        [0.5, 0.5]
    """

    def __init__(self, name: Optional[str] = None) -> None:
        super().__init__(name)
        self._metrics: List[MetricBase] = []

    def add_metric(self, metric: MetricBase) -> None:
        """Add a metric; ``update`` and ``eval`` then include it.

        Args:
            metric (MetricBase): the metric to add.

        Returns:
            None.

        Raises:
            ValueError: ``metric`` is not a MetricBase.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> m = fluid.metrics.CompositeMetric()
            >>> m.add_metric(fluid.metrics.Precision())
            >>> m.update(preds=np.array([[0.9]]), labels=np.array([[1]]))
            >>> m.eval()
            [1.0]
        """
        if not isinstance(metric, MetricBase):
            raise ValueError("SubMetric should be inherit from MetricBase.")
        self._metrics.append(metric)

    def reset(self) -> None:
        for m in self._metrics:
            m.reset()

    def update(self, preds: Any, labels: Any) -> None:
        """Pass ``preds`` and ``labels`` to every added metric's ``update``.

        Args:
            preds (Any): the batch's predictions, passed to every added metric.
            labels (Any): the batch's labels, passed to every added metric.

        Returns:
            None.

        Raises:
            ValueError: an added metric rejects ``preds`` / ``labels`` (whatever its own ``update``
                raises is passed on).

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> m = fluid.metrics.CompositeMetric()
            >>> m.add_metric(fluid.metrics.Recall())
            >>> # every metric gets the batch
            >>> m.update(preds=np.array([[0.9], [0.8], [0.2]]), labels=np.array([[1], [0], [1]]))
            >>> m.eval()
            [0.5]
        """
        for m in self._metrics:
            m.update(preds, labels)

    def eval(self) -> List[Any]:
        """The list of every added metric's ``eval()``, in the order they were added.

        Args:
            None: this method takes no arguments.

        Returns:
            list: one ``eval()`` result per added metric, in the order added (empty without
                metrics).

        Raises:
            ValueError: an added metric cannot evaluate yet (e.g. an Accuracy without updates).

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> m = fluid.metrics.CompositeMetric()
            >>> m.add_metric(fluid.metrics.Precision())
            >>> m.add_metric(fluid.metrics.Recall())
            >>> m.update(preds=np.array([[0.9], [0.8], [0.2]]), labels=np.array([[1], [0], [1]]))
            >>> m.eval()                               # one value per metric, in order
            [0.5, 0.5]
        """
        return [m.eval() for m in self._metrics]


def _binary(preds: Any, labels: Any, who: str) -> Tuple[np.ndarray, np.ndarray]:
    preds, labels = np.asarray(preds), np.asarray(labels)
    if preds.shape[0] != labels.shape[0]:
        raise ValueError(f"{who}: preds has {preds.shape[0]} rows but labels has "
                         f"{labels.shape[0]}")
    return np.rint(preds).astype(np.int32).reshape(-1), labels.astype(np.int32).reshape(-1)


class Precision(MetricBase):
    """Binary precision ``tp / (tp + fp)``; ``preds`` are probabilities rounded at 0.5.

    Args:
        name (str | None): the metric's name (``get_config()["name"]``).

    Returns:
        Precision: a metric with ``tp = fp = 0``.

    Raises:
        None: the constructor does not raise.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> m = fluid.metrics.Precision()
        >>> m.update(preds=np.array([[0.9], [0.8], [0.2]]), labels=np.array([[1], [0], [1]]))
        >>> m.eval()                               # 1 true positive of 2 predicted positives
        0.5
    """

    def __init__(self, name: Optional[str] = None) -> None:
        super().__init__(name)
        self.tp, self.fp = 0, 0

    def update(self, preds: Any, labels: Any) -> None:
        """Accumulate a batch: ``preds`` probabilities ``[N, 1]`` (rounded at 0.5), ``labels``
        ``[N, 1]`` 0/1.

        Args:
            preds (numpy.ndarray): ``[N, 1]`` probabilities of the positive class.
            labels (numpy.ndarray): ``[N, 1]`` 0/1 labels.

        Returns:
            None.

        Raises:
            ValueError: ``preds`` and ``labels`` have different numbers of rows.
            IndexError: ``preds`` or ``labels`` is a scalar (0-d).

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> m = fluid.metrics.Precision()
            >>> m.update(preds=np.array([[0.9], [0.8], [0.2]]), labels=np.array([[1], [0], [1]]))
            >>> m.eval()
            0.5
        """
        p, y = _binary(preds, labels, "Precision")
        self.tp += int(np.sum((p == 1) & (y == 1)))
        self.fp += int(np.sum((p == 1) & (y != 1)))

    def eval(self) -> float:
        """``true positives / predicted positives`` so far (0.0 when nothing was predicted positive).

        Args:
            None: this method takes no arguments.

        Returns:
            float: ``tp / (tp + fp)``, 0.0 when nothing was predicted positive.

        Raises:
            None: this method does not raise.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> m = fluid.metrics.Precision()
            >>> m.update(preds=np.array([[0.9], [0.8], [0.2]]), labels=np.array([[1], [0], [1]]))
            >>> m.eval()
            0.5
        """
        ap = self.tp + self.fp
        return float(self.tp) / ap if ap != 0 else 0.0


class Recall(MetricBase):
    """Binary recall ``tp / (tp + fn)``; ``preds`` are probabilities rounded at 0.5.

    Args:
        name (str | None): the metric's name (``get_config()["name"]``).

    Returns:
        Recall: a metric with ``tp = fn = 0``.

    Raises:
        None: the constructor does not raise.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> m = fluid.metrics.Recall()
        >>> m.update(preds=np.array([[0.9], [0.8], [0.2]]), labels=np.array([[1], [0], [1]]))
        >>> m.eval()                               # 1 of 2 positives found
        0.5
    """

    def __init__(self, name: Optional[str] = None) -> None:
        super().__init__(name)
        self.tp, self.fn = 0, 0

    def update(self, preds: Any, labels: Any) -> None:
        """Accumulate a batch: ``preds`` probabilities ``[N, 1]`` (rounded at 0.5), ``labels``
        ``[N, 1]`` 0/1.

        Args:
            preds (numpy.ndarray): ``[N, 1]`` probabilities of the positive class.
            labels (numpy.ndarray): ``[N, 1]`` 0/1 labels.

        Returns:
            None.

        Raises:
            ValueError: ``preds`` and ``labels`` have different numbers of rows.
            IndexError: ``preds`` or ``labels`` is a scalar (0-d).

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> m = fluid.metrics.Recall()
            >>> m.update(preds=np.array([[0.9], [0.8], [0.2]]), labels=np.array([[1], [0], [1]]))
            >>> m.eval()
            0.5
        """
        p, y = _binary(preds, labels, "Recall")
        self.tp += int(np.sum((p == 1) & (y == 1)))
        self.fn += int(np.sum((p != 1) & (y == 1)))

    def eval(self) -> float:
        """``true positives / (true positives + false negatives)`` so far (0.0 without positives).

        Args:
            None: this method takes no arguments.

        Returns:
            float: ``tp / (tp + fn)``, 0.0 when no positive label was seen.

        Raises:
            None: this method does not raise.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> m = fluid.metrics.Recall()
            >>> m.update(preds=np.array([[0.9], [0.8], [0.2]]), labels=np.array([[1], [0], [1]]))
            >>> m.eval()
            0.5
        """
        recall = self.tp + self.fn
        return float(self.tp) / recall if recall != 0 else 0.0


class Accuracy(MetricBase):
    """Weighted mean of per-batch accuracies: ``sum(value * weight) / sum(weight)``.

    Args:
        name (str | None): the metric's name (``get_config()["name"]``).

    Returns:
        Accuracy: a metric with ``value = weight = 0.0``.

    Raises:
        None: the constructor does not raise.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> acc = fluid.metrics.Accuracy()
        >>> acc.update(value=0.5, weight=10)       # batch accuracy and batch size
        >>> acc.update(value=1.0, weight=30)
        >>> acc.eval()
        0.875
    """

    def __init__(self, name: Optional[str] = None) -> None:
        super().__init__(name)
        self.value, self.weight = 0.0, 0.0

    def update(self, value: Any, weight: Any) -> None:
        """Add one batch's accuracy ``value`` with ``weight`` (usually the batch size).

        Args:
            value (float | numpy.ndarray): the batch accuracy.
            weight (float | numpy.ndarray): its weight (usually the batch size).

        Returns:
            None.

        Raises:
            ValueError: ``value`` or ``weight`` is not an int, float, numpy number or ndarray (bools
                are rejected too).

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> m = fluid.metrics.Accuracy()
            >>> m.update(value=0.75, weight=4)
            >>> m.eval()
            0.75
        """
        if not _is_number_or_array(value):
            raise ValueError("The 'value' must be a number(int, float) or a numpy ndarray.")
        if not _is_number_or_array(weight):
            raise ValueError("The 'weight' must be a number(int, float) or a numpy ndarray.")
        self.value += float(np.sum(np.asarray(value, dtype=np.float64) * weight))
        self.weight += float(np.sum(weight))

    def eval(self) -> float:
        """``sum(value * weight) / sum(weight)`` over the updates; raises ValueError before any.

        Args:
            None: this method takes no arguments.

        Returns:
            float: ``sum(value * weight) / sum(weight)``.

        Raises:
            ValueError: the accumulated weight is 0 (no update yet).

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> m = fluid.metrics.Accuracy()
            >>> m.update(value=1.0, weight=1)
            >>> m.update(value=0.0, weight=3)
            >>> m.eval()
            0.25
        """
        if self.weight == 0:
            raise ValueError("There is no data in Accuracy Metrics. Please check layers.accuracy "
                             "output has added to Accuracy.")
        return self.value / self.weight


class ChunkEvaluator(MetricBase):
    """Chunk-level precision, recall and F1 from counts of inferred, labelled and correct
    chunks (accumulated over batches).

    Args:
        name (str | None): the metric's name (``get_config()["name"]``).

    Returns:
        ChunkEvaluator: a metric with all three chunk counts at 0.

    Raises:
        None: the constructor does not raise.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> m = fluid.metrics.ChunkEvaluator()
        >>> m.update(num_infer_chunks=4, num_label_chunks=5, num_correct_chunks=3)
        >>> [round(v, 4) for v in m.eval()]             # precision, recall, F1
        [0.75, 0.6, 0.6667]
    """

    def __init__(self, name: Optional[str] = None) -> None:
        super().__init__(name)
        self.num_infer_chunks = self.num_label_chunks = self.num_correct_chunks = 0

    def update(self, num_infer_chunks: Any, num_label_chunks: Any,
               num_correct_chunks: Any) -> None:
        """Add a batch's chunk counts (the last three outputs of ``layers.chunk_eval``).

        Args:
            num_infer_chunks (int | numpy.ndarray): chunks predicted.
            num_label_chunks (int | numpy.ndarray): chunks in the labels.
            num_correct_chunks (int | numpy.ndarray): chunks predicted correctly.

        Returns:
            None.

        Raises:
            ValueError: a count is not an int, float, numpy number or ndarray.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> m = fluid.metrics.ChunkEvaluator()
            >>> m.update(num_infer_chunks=2, num_label_chunks=2, num_correct_chunks=1)
            >>> m.eval()
            (0.5, 0.5, 0.5)
        """
        for v, what in ((num_infer_chunks, "num_infer_chunks"),
                        (num_label_chunks, "num_label_chunks"),
                        (num_correct_chunks, "num_correct_chunks")):
            if not _is_number_or_array(v):
                raise ValueError(f"The '{what}' must be a number(int) or a numpy ndarray.")
        self.num_infer_chunks += int(np.sum(num_infer_chunks))
        self.num_label_chunks += int(np.sum(num_label_chunks))
        self.num_correct_chunks += int(np.sum(num_correct_chunks))

    def eval(self) -> Tuple[float, float, float]:
        """``(precision, recall, F1)`` of the chunks counted so far (0 where undefined).

        Args:
            None: this method takes no arguments.

        Returns:
            tuple: ``(precision, recall, f1)`` floats: ``correct / infer``, ``correct / label`` and
            ``2 p r / (p + r)``, each 0.0 where its denominator (or the correct count) is 0.

        Raises:
            None: this method does not raise.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> m = fluid.metrics.ChunkEvaluator()
            >>> m.update(num_infer_chunks=4, num_label_chunks=2, num_correct_chunks=2)
            >>> m.eval()
            (0.5, 1.0, 0.6666666666666666)
        """
        precision = self.num_correct_chunks / self.num_infer_chunks \
            if self.num_infer_chunks else 0.0
        recall = self.num_correct_chunks / self.num_label_chunks \
            if self.num_label_chunks else 0.0
        f1 = 2 * precision * recall / (precision + recall) if self.num_correct_chunks else 0.0
        return float(precision), float(recall), float(f1)


class EditDistance(MetricBase):
    """Average edit distance and the fraction of sequences with a non-zero distance.

    Args:
        name (str | None): the metric's name (``get_config()["name"]``).

    Returns:
        EditDistance: a metric with ``total_distance = 0.0``, ``seq_num = instance_error = 0``.

    Raises:
        None: the constructor does not raise.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> m = fluid.metrics.EditDistance("ed")
        >>> m.update(distances=np.array([[0.0], [2.0]]), seq_num=2)
        >>> m.eval()                               # (mean distance, fraction of wrong sequences)
        (1.0, 0.5)
    """

    def __init__(self, name: Optional[str] = None) -> None:
        super().__init__(name)
        self.total_distance, self.seq_num, self.instance_error = 0.0, 0, 0

    def update(self, distances: Any, seq_num: Any) -> None:
        """Accumulate a batch: ``distances`` ``[N, 1]`` (e.g. from ``layers.edit_distance``) and
        ``seq_num`` sequences.

        Args:
            distances (numpy.ndarray): ``[N, 1]`` distances of a batch.
            seq_num (int | numpy.ndarray): the number of sequences in it.

        Returns:
            None.

        Raises:
            ValueError: ``distances`` or ``seq_num`` is not an int, float, numpy number or ndarray.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> m = fluid.metrics.EditDistance("ed")
            >>> m.update(distances=np.array([[1.0], [3.0]]), seq_num=2)
            >>> m.eval()
            (2.0, 1.0)
        """
        if not _is_number_or_array(distances):
            raise ValueError("The 'distances' must be a numpy ndarray.")
        if not _is_number_or_array(seq_num):
            raise ValueError("The 'seq_num' must be a number(int) or a numpy ndarray.")
        d = np.asarray(distances)
        self.seq_num += int(np.sum(seq_num))
        self.instance_error += int(np.sum(d != 0))
        self.total_distance += float(np.sum(d))

    def eval(self) -> Tuple[float, float]:
        """``(average distance, fraction of sequences with a non-zero distance)`` over everything
        ``update`` saw; raises ValueError before any update.

        Args:
            None: this method takes no arguments.

        Returns:
            tuple: ``(total_distance / seq_num, instance_error / seq_num)`` floats.

        Raises:
            ValueError: ``seq_num`` is 0 (no update yet).

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> m = fluid.metrics.EditDistance("ed")
            >>> m.update(distances=np.array([[0.0], [0.0], [6.0]]), seq_num=3)
            >>> m.eval()
            (2.0, 0.3333333333333333)
        """
        if self.seq_num == 0:
            raise ValueError("There is no data in EditDistance Metric. Please check layers."
                             "edit_distance output has been added to EditDistance.")
        return self.total_distance / self.seq_num, self.instance_error / self.seq_num


class Auc(MetricBase):
    """Area under the ROC curve from bucketed positive/negative score histograms (fluid's
    streaming AUC): ``preds[:, 1]`` is the positive-class probability.

    Args:
        name (str | None): the metric's name.
        curve (str, default "ROC"): only ``"ROC"`` is supported.
        num_thresholds (int, default 4095): histogram buckets of the scores.

    Returns:
        Auc: a metric with empty positive/negative histograms of ``num_thresholds + 1`` buckets.

    Raises:
        ValueError: ``curve`` is not ``"ROC"``, or ``num_thresholds`` is negative or not an integer
            string.
        TypeError: ``num_thresholds`` is not a number.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> auc = fluid.metrics.Auc("auc")
        >>> preds = np.array([[0.9, 0.1], [0.2, 0.8], [0.4, 0.6], [0.7, 0.3]])  # [P(0), P(1)]
        >>> auc.update(preds=preds, labels=np.array([[0], [1], [1], [0]]))
        >>> auc.eval()
        1.0
    """

    def __init__(self, name: Optional[str] = None, curve: str = "ROC",
                 num_thresholds: int = 4095) -> None:
        super().__init__(name)
        if curve != "ROC":
            raise ValueError(f"Auc: only curve='ROC' is supported, got {curve!r}")
        self._curve, self._num_thresholds = curve, int(num_thresholds)
        # Python lists of counts, as fluid 1.8's (its op tests extend ``_stat_pos * 2``)
        self._stat_pos: List[float] = [0] * (self._num_thresholds + 1)
        self._stat_neg: List[float] = [0] * (self._num_thresholds + 1)

    def reset(self) -> None:
        self._stat_pos = [0] * (self._num_thresholds + 1)
        self._stat_neg = [0] * (self._num_thresholds + 1)

    def update(self, preds: Any, labels: Any) -> None:
        """Accumulate a batch: ``preds`` ``[N, 2]`` class probabilities (column 1 is the positive
        score), ``labels`` ``[N, 1]`` 0/1.

        Args:
            preds (numpy.ndarray): ``[N, 2]`` class probabilities.
            labels (numpy.ndarray): ``[N, 1]`` 0/1 labels.

        Returns:
            None.

        Raises:
            ValueError: ``preds`` is not ``[N, >=2]`` or its rows differ from ``labels``'.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> m = fluid.metrics.Auc("auc")
            >>> m.update(preds=np.array([[0.2, 0.8], [0.7, 0.3]]), labels=np.array([[1], [0]]))
            >>> m.eval()
            1.0
        """
        preds, labels = np.asarray(preds), np.asarray(labels).reshape(-1)
        if preds.ndim != 2 or preds.shape[1] < 2 or preds.shape[0] != labels.shape[0]:
            raise ValueError(f"Auc: preds must be [N, 2] probabilities and labels [N, 1]; got "
                             f"{list(preds.shape)} and {list(labels.shape)}")
        bins = (preds[:, 1] * self._num_thresholds).astype(np.int64)
        bins = np.clip(bins, 0, self._num_thresholds)
        n = self._num_thresholds + 1
        self._stat_pos = (np.asarray(self._stat_pos, dtype=np.float64)
                          + np.bincount(bins[labels != 0], minlength=n)).tolist()
        self._stat_neg = (np.asarray(self._stat_neg, dtype=np.float64)
                          + np.bincount(bins[labels == 0], minlength=n)).tolist()

    def eval(self) -> float:
        """The area under the ROC curve of everything ``update`` saw (from ``num_thresholds``
        histogram buckets), 0.0 before any positive and negative were seen.

        Args:
            None: this method takes no arguments.

        Returns:
            float: the trapezoid area under the bucketed ROC curve, in [0, 1]; 0.0 before both a
            positive and a negative were seen.

        Raises:
            None: this method does not raise.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> m = fluid.metrics.Auc("auc")
            >>> m.update(preds=np.array([[0.6, 0.4], [0.3, 0.7]]), labels=np.array([[1], [0]]))
            >>> m.eval()
            0.0
        """
        # true positives / negatives above each threshold
        pos = np.asarray(self._stat_pos, dtype=np.float64)[::-1].cumsum()
        neg = np.asarray(self._stat_neg, dtype=np.float64)[::-1].cumsum()
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
