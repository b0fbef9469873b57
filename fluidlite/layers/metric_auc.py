"""``fluid.layers.auc``: running and sliding-window AUC on the ``auc`` op."""
from __future__ import annotations

from typing import List, Tuple

from ..core.ir import Variable
from ..pipeline.feeder import check_variable_and_dtype
from ..initializer import Constant
from ..layer_helper import LayerHelper, check_int

__all__ = ["auc"]


def auc(input: Variable, label: Variable, curve: str = "ROC", num_thresholds: int = 2 ** 12 - 1,
        topk: int = 1, slide_steps: int = 1) -> Tuple[Variable, Variable, List[Variable]]:
    """Area under the ROC curve of ``input`` (``[N, 2]`` class probabilities; column 1 is the
    positive class) against int64 ``label`` ``[N, 1]``, from ``num_thresholds + 1`` buckets.

    Returns ``(auc_out, batch_auc_out, [batch_stat_pos, batch_stat_neg, stat_pos,
    stat_neg])``: ``auc_out`` over every batch run so far, ``batch_auc_out`` over the last
    ``slide_steps`` batches (``slide_steps=0``: over every batch too, as fluid); the stat
    variables are persistable int64 counters (zero them to restart). ``topk`` is accepted as
    in fluid (unused).

    Args:
        input (Variable): float32/float64 [N, 2] class probabilities.
        label (Variable): int32/int64 [N, 1] labels (0 or 1).
        curve (str, default "ROC"): only ``"ROC"``.
        num_thresholds (int, default 4095): the number of thresholds (buckets - 1), >= 1.
        topk (int, default 1): accepted for fluid's signature (unused, as in fluid).
        slide_steps (int, default 1): the batches ``batch_auc_out`` covers (0: all, >= 0).
    Returns:
        tuple: ``(auc_out, batch_auc_out, [batch_stat_pos, batch_stat_neg, stat_pos,
        stat_neg])``; the AUCs are float64 [1], the stats persistable int64 counters.
    Raises:
        TypeError: ``input`` is not a float32/float64 Variable, ``label`` is not an int32/int64
            Variable, or ``num_thresholds`` / ``slide_steps`` is not an int.
        ValueError: ``curve`` is not ``"ROC"``, ``num_thresholds`` is below 1, or
            ``slide_steps`` is negative.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     pred = fluid.data("pred", [-1, 2])
        ...     label = fluid.data("label", [-1, 1], "int64")
        ...     auc_out, batch_auc, states = fluid.layers.auc(pred, label)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> feed = {"pred": np.array([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4]], "float32"),
        ...         "label": np.array([[0], [1], [1]], "int64")}
        >>> exe.run(main, feed=feed, fetch_list=[auc_out])[0].round(4)
        array([1.])
    """
    check_variable_and_dtype(input, "input", ["float32", "float64"], "auc")
    check_variable_and_dtype(label, "label", ["int32", "int64"], "auc")
    if curve != "ROC":
        raise ValueError(f"auc: curve must be 'ROC' (fluid's auc op computes the ROC AUC only), "
                         f"but received {curve!r}")
    num_thresholds = check_int(num_thresholds, "num_thresholds", "auc", minimum=1)
    # 0 is fluid's global AUC: the batch counters then accumulate forever, like stat_pos
    slide_steps = check_int(slide_steps, "slide_steps", "auc", minimum=0)
    helper = LayerHelper("auc")
    auc_out = helper.create_variable_for_type_inference(dtype="float64")
    batch_auc_out = helper.create_variable_for_type_inference(dtype="float64")
    buckets = num_thresholds + 1
    stats = []
    for shape in ([(1 + slide_steps) * buckets + 1], [(1 + slide_steps) * buckets + 1],
                  [1, buckets], [1, buckets]):
        var = helper.create_global_variable(persistable=True, dtype="int64", shape=shape)
        helper.set_variable_initializer(var, Constant(0.0))
        var.stop_gradient = True
        stats.append(var)
    batch_pos, batch_neg, stat_pos, stat_neg = stats
    for out, pos, neg, steps in ((batch_auc_out, batch_pos, batch_neg, slide_steps),
                                 (auc_out, stat_pos, stat_neg, 0)):
        helper.append_op(type="auc",
                         inputs={"Predict": [input], "Label": [label], "StatPos": [pos],
                                 "StatNeg": [neg]},
                         outputs={"AUC": [out], "StatPosOut": [pos], "StatNegOut": [neg]},
                         attrs={"curve": curve, "num_thresholds": num_thresholds,
                                "slide_steps": steps})
        out.stop_gradient = True
    return auc_out, batch_auc_out, stats
