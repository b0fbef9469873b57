"""``fluid.evaluator`` (fluid 1.8): metrics accumulated inside the program.

An evaluator adds ops to the main program that add each mini-batch's counts into persistable
*state* variables; ``reset(exe)`` zeroes the states (start of a pass) and ``eval(exe)`` reads
them back and computes the metric over every batch since. fluid 1.8 already marked these
classes deprecated in favour of ``fluid.metrics`` (which accumulate in Python); constructing one
warns, as there.

Provided: ``ChunkEvaluator`` (precision / recall / F1 of ``chunk_eval``), ``EditDistance``
(average edit distance and instance error rate) and ``DetectionMAP`` (the batch's and the
accumulated mAP). Evaluators are built in the root block of a static program.
"""
from __future__ import annotations

import warnings
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

from . import layers, unique_name
from .core.ir import Program, Variable, program_guard
from .initializer import Constant
from .layer_helper import LayerHelper
from .metrics.detection import DetectionMAP as _MetricDetectionMAP

__all__ = ["ChunkEvaluator", "EditDistance", "DetectionMAP"]


def _clone_var_(block: Any, var: Variable) -> Variable:
    """``var`` declared (persistable, same name) in another program's ``block``: how the reset
    and eval programs reach the states the main program accumulates in the scope."""
    return block.create_var(name=var.name, shape=var.shape, dtype=var.dtype, type=var.type,
                            lod_level=var.lod_level, persistable=True)


class Evaluator:
    """Base class of the evaluators: holds the ``states`` (persistable accumulators, zeroed by
    ``reset``) and the ``metrics`` (this batch's values, Variables of the main program).

    Args:
        name: the evaluator's name, the prefix of its state variables' names.
        **kwargs: ``main_program`` / ``startup_program`` to build in (default: the current
            default programs), as ``LayerHelper`` takes them.

    Example:
        >>> import fluidlite as fluid
        >>> class Count(fluid.evaluator.Evaluator):
        ...     def __init__(self):
        ...         super().__init__("count")
        ...         self.n = self._create_state("n", "int64", [1])
    """

    def __init__(self, name: str, **kwargs: Any) -> None:
        # stacklevel 3: the user's constructor call (through the subclass's __init__)
        warnings.warn(f"fluid.evaluator.{type(self).__name__} is deprecated (keeping metric "
                      f"state inside a modified program is easy to get wrong): use "
                      f"fluid.metrics.{type(self).__name__} instead", Warning, stacklevel=3)
        self.states: List[Variable] = []
        self.metrics: List[Variable] = []
        self.helper = LayerHelper(name, **kwargs)

    def reset(self, executor: Any, reset_program: Optional[Program] = None) -> None:
        """Zero every state: run a program of ``fill_constant`` ops on them.

        Args:
            executor: the Executor (or ParallelExecutor) whose scope holds the states.
            reset_program: the program to add the ops to (default: a new one).
        """
        if reset_program is None:
            reset_program = Program()
        with program_guard(main_program=reset_program):
            for var in self.states:
                g_var = _clone_var_(reset_program.current_block(), var)
                layers.fill_constant(shape=g_var.shape, value=0.0, dtype=g_var.dtype,
                                     out=g_var)
        executor.run(reset_program)

    def eval(self, executor: Any, eval_program: Optional[Program] = None) -> Any:
        """The metric over every batch since the last ``reset`` (subclasses define it)."""
        raise NotImplementedError()

    def _create_state(self, suffix: str, dtype: Any, shape: Optional[Sequence[int]]
                      ) -> Variable:
        """A persistable state ``<name>_N_<suffix>`` of the main program, appended to
        ``states``. The startup program zero-fills it too (fluid relied on ``reset`` before the
        first batch; with the initializer a script that skips it still starts from zero)."""
        state = self.helper.create_variable(
            name="_".join([unique_name.generate(self.helper.name), suffix]),
            persistable=True, dtype=dtype, shape=shape)
        if shape is not None:
            self.helper.set_variable_initializer(state, initializer=Constant(0.0))
        self.states.append(state)
        return state


def _check_root_block(helper: LayerHelper) -> None:
    if helper.main_program.current_block().idx != 0:
        raise ValueError("You can only invoke Evaluator in root block")


class ChunkEvaluator(Evaluator):
    """Accumulate ``chunk_eval``'s counts over mini-batches; ``eval`` gives precision, recall
    and F1 over all of them:

        precision = correct / inferred,  recall = correct / labelled,
        F1 = 2 * precision * recall / (precision + recall)

    (each 0 when its denominator -- for F1, ``correct`` -- is 0).

    Args:
        input: the predicted tags (int64, LoD or padded, as ``layers.chunk_eval`` takes).
        label: the gold tags, same layout.
        chunk_scheme: "IOB", "IOE", "IOBES" or "plain".
        num_chunk_types: the number of chunk types.
        excluded_chunk_types: chunk type ids not counted.

    Attributes:
        metrics: ``[precision, recall, f1_score]`` of the current batch (Variables).

    Example:
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     pred = fluid.data("pred", [-1, 1], "int64", lod_level=1)
        ...     gold = fluid.data("gold", [-1, 1], "int64", lod_level=1)
        ...     ev = fluid.evaluator.ChunkEvaluator(pred, gold, "IOB", 2)
    """

    def __init__(self, input: Variable, label: Variable, chunk_scheme: str,
                 num_chunk_types: int,
                 excluded_chunk_types: Optional[Sequence[int]] = None) -> None:
        super().__init__("chunk_eval")
        _check_root_block(self.helper)
        self.num_infer_chunks = self._create_state("num_infer_chunks", "int64", [1])
        self.num_label_chunks = self._create_state("num_label_chunks", "int64", [1])
        self.num_correct_chunks = self._create_state("num_correct_chunks", "int64", [1])
        precision, recall, f1_score, n_infer, n_label, n_correct = layers.chunk_eval(
            input=input, label=label, chunk_scheme=chunk_scheme,
            num_chunk_types=num_chunk_types, excluded_chunk_types=excluded_chunk_types)
        for state, batch in ((self.num_infer_chunks, n_infer),
                             (self.num_label_chunks, n_label),
                             (self.num_correct_chunks, n_correct)):
            layers.sums(input=[state, batch], out=state)
        self.metrics.extend([precision, recall, f1_score])

    def eval(self, executor: Any, eval_program: Optional[Program] = None
             ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(precision, recall, f1_score)`` over every batch since ``reset``, each a float32
        array of shape [1].

        Args:
            executor: the executor whose scope holds the states.
            eval_program: the program to fetch them with (default: a new one).
        """
        if eval_program is None:
            eval_program = Program()
        block = eval_program.current_block()
        n_infer, n_label, n_correct = (
            float(np.asarray(v).reshape(-1)[0]) for v in executor.run(
                eval_program, fetch_list=[_clone_var_(block, s) for s in self.states]))
        precision = n_correct / n_infer if n_infer else 0.0
        recall = n_correct / n_label if n_label else 0.0
        f1 = 2 * precision * recall / (precision + recall) if n_correct else 0.0
        return (np.array([precision], dtype="float32"), np.array([recall], dtype="float32"),
                np.array([f1], dtype="float32"))


class EditDistance(Evaluator):
    """Accumulate ``edit_distance`` over mini-batches; ``eval`` gives the average distance per
    sequence and the instance error rate (the share of sequences with a non-zero distance):

        avg_distance = sum(distances) / seq_num,  avg_instance_error = errors / seq_num

    Args:
        input: the predicted token sequences (int64, LoD).
        label: the target sequences (as many as ``input``).
        ignored_tokens: tokens removed from both before the distance is computed.
        **kwargs: ``main_program`` / ``startup_program``, as ``Evaluator`` takes them.

    Attributes:
        metrics: ``[total_distance, instance_error_count]`` of the current batch.

    Example:
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     hyp = fluid.data("hyp", [-1, 1], "int64", lod_level=1)
        ...     ref = fluid.data("ref", [-1, 1], "int64", lod_level=1)
        ...     ev = fluid.evaluator.EditDistance(hyp, ref)
    """

    def __init__(self, input: Variable, label: Variable,
                 ignored_tokens: Optional[Sequence[int]] = None, **kwargs: Any) -> None:
        super().__init__("edit_distance", **kwargs)
        _check_root_block(self.helper)
        self.total_distance = self._create_state("total_distance", "float32", [1])
        self.seq_num = self._create_state("seq_num", "int64", [1])
        self.instance_error = self._create_state("instance_error", "int64", [1])
        distances, seq_num = layers.edit_distance(input=input, label=label,
                                                  ignored_tokens=ignored_tokens)
        zero = layers.fill_constant(shape=[1], value=0.0, dtype="float32")
        right = layers.reduce_sum(layers.cast(x=layers.equal(distances, zero), dtype="int64"))
        instance_error_count = layers.elementwise_sub(x=seq_num, y=right)
        total_distance = layers.reduce_sum(distances)
        layers.sums(input=[self.total_distance, total_distance], out=self.total_distance)
        layers.sums(input=[self.seq_num, seq_num], out=self.seq_num)
        layers.sums(input=[self.instance_error, instance_error_count],
                    out=self.instance_error)
        self.metrics.append(total_distance)
        self.metrics.append(instance_error_count)

    def eval(self, executor: Any, eval_program: Optional[Program] = None
             ) -> Tuple[np.ndarray, np.ndarray]:
        """``(avg_distance, avg_instance_error)`` over every batch since ``reset`` (computed by
        a small program on the states).

        Args:
            executor: the executor whose scope holds the states.
            eval_program: the program to compute them in (default: a new one).
        """
        if eval_program is None:
            eval_program = Program()
        block = eval_program.current_block()
        with program_guard(main_program=eval_program):
            total_distance = _clone_var_(block, self.total_distance)
            seq_num = layers.cast(x=_clone_var_(block, self.seq_num), dtype="float32")
            instance_error = layers.cast(x=_clone_var_(block, self.instance_error),
                                         dtype="float32")
            avg_distance = layers.elementwise_div(x=total_distance, y=seq_num)
            avg_instance_error = layers.elementwise_div(x=instance_error, y=seq_num)
            result = executor.run(eval_program, fetch_list=[avg_distance, avg_instance_error])
        return np.array(result[0]), np.array(result[1])


class DetectionMAP(Evaluator):
    """Mean average precision of detections: ``get_map_var()`` gives ``(cur_map, accum_map)``,
    this batch's mAP and the mAP accumulated since ``reset`` (both computed in the program by
    ``detection_map`` ops; the accumulated one carries its true/false-positive states).

    Args:
        input: the detections, [M, 6] LoD rows ``[label, score, xmin, ymin, xmax, ymax]``.
        gt_label: the ground-truth labels, [N, 1] LoD.
        gt_box: the ground-truth boxes, [N, 4] LoD ``[xmin, ymin, xmax, ymax]``.
        gt_difficult: whether each ground truth is difficult, [N, 1] LoD, or None (none is).
        class_num: the number of classes.
        background_label: the background class, ignored (-1: none).
        overlap_threshold: the IoU above which a detection is a true positive.
        evaluate_difficult: whether difficult ground truths count.
        ap_version: "integral" or "11point".

    Example:
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     det = fluid.data("det", [-1, 6], "float32", lod_level=1)
        ...     lab = fluid.data("lab", [-1, 1], "int32", lod_level=1)
        ...     box = fluid.data("box", [-1, 4], "float32", lod_level=1)
        ...     ev = fluid.evaluator.DetectionMAP(det, lab, box, class_num=3)
        ...     cur_map, accum_map = ev.get_map_var()                       
    """

    def __init__(self, input: Variable, gt_label: Variable, gt_box: Variable,
                 gt_difficult: Optional[Variable] = None, class_num: Optional[int] = None,
                 background_label: int = 0, overlap_threshold: float = 0.5,
                 evaluate_difficult: bool = True, ap_version: str = "integral") -> None:
        super().__init__("map_eval")
        # the ops and states are fluid.metrics.DetectionMAP's (fluid 1.8 built the same graph
        # in both classes); the evaluator adds its states list and base-class API
        self._map = _MetricDetectionMAP(input, gt_label, gt_box, gt_difficult, class_num,
                                        background_label, overlap_threshold,
                                        evaluate_difficult, ap_version)
        self.has_state = self._map.has_state
        self.cur_map, self.accum_map = self._map.get_map_var()
        self.states = list(self._map.states)

    def get_map_var(self) -> Tuple[Variable, Variable]:
        """``(cur_map, accum_map)``: this batch's mAP and the accumulated one."""
        return self.cur_map, self.accum_map

    def reset(self, executor: Any, reset_program: Optional[Program] = None) -> None:
        """Start a new accumulation: zero ``has_state``, so that the next batch's
        ``detection_map`` ignores the old true/false-positive states.

        Args:
            executor: the executor whose scope holds the states.
            reset_program: the program to add the op to (default: a new one).
        """
        self._map.reset(executor, reset_program)
