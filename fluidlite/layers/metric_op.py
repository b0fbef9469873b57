"""Metric layers: accuracy (top_k + accuracy ops)."""
from __future__ import annotations

from typing import Optional

from ..core.ir import Variable
from ..pipeline.feeder import check_variable_and_dtype
from ..layer_helper import LayerHelper, check_int
from .nn import topk

__all__ = ["accuracy"]


def accuracy(input: Variable, label: Variable, k: int = 1, correct: Optional[Variable] = None,
             total: Optional[Variable] = None) -> Variable:
    """Fraction of rows whose ``label`` (int64 [N, 1]) is among the top-``k`` entries of
    ``input``; float32 of shape [1]. ``correct`` / ``total`` receive the int32 counts.

    Args:
        input (Variable): ``[N, D]`` scores or probabilities.
        label (Variable): ``[N, 1]`` int64 class ids.
        k (int, default 1): a row counts as correct when its label is among the ``k`` best.
        correct (Variable | None): receives the int32 count of correct rows.
        total (Variable | None): receives the int32 row count.
    Returns:
        Variable: float32 ``[1]``, the fraction of correct rows.

    Raises:
        TypeError: ``input`` is not a float Variable, ``label`` not an int32/int64 one, or
            ``k`` not an int.
        ValueError: ``k`` < 1.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     prob = fluid.data("prob", [-1, 3])
        ...     label = fluid.data("label", [-1, 1], "int64")
        ...     acc = fluid.layers.accuracy(prob, label, k=1)
        >>> fluid.Executor(fluid.CPUPlace()).run(main, feed={
        ...     "prob": np.array([[0.1, 0.8, 0.1], [0.6, 0.3, 0.1]], "float32"),
        ...     "label": np.array([[1], [2]], "int64")}, fetch_list=[acc])[0]
        array([0.5], dtype=float32)
    """
    check_variable_and_dtype(input, "input", ["float16", "float32", "float64"], "accuracy")
    check_variable_and_dtype(label, "label", ["int32", "int64"], "accuracy",
                             "Labels are class indices: use dtype int64.")
    k = check_int(k, "k", "accuracy", minimum=1)
    helper = LayerHelper("accuracy")
    topk_out, topk_indices = topk(input, k=k)
    acc_out = helper.create_variable_for_type_inference(dtype="float32")
    if correct is None:
        correct = helper.create_variable_for_type_inference(dtype="int32")
    if total is None:
        total = helper.create_variable_for_type_inference(dtype="int32")
    helper.append_op(type="accuracy",
                     inputs={"Out": [topk_out], "Indices": [topk_indices], "Label": [label]},
                     outputs={"Accuracy": [acc_out], "Correct": [correct], "Total": [total]})
    for v in (acc_out, correct, total):
        v.stop_gradient = True
    return acc_out
