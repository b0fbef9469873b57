"""Loss layers: cross_entropy, softmax_with_cross_entropy, square_error_cost,
sigmoid_cross_entropy_with_logits."""
from __future__ import annotations

from typing import Optional, Tuple, Union

from ..core import mode as _mode
from ..core.ir import Variable
from ..pipeline.feeder import check_type, check_variable_and_dtype
from ..layer_helper import LayerHelper, check_int

__all__ = ["cross_entropy", "softmax_with_cross_entropy", "square_error_cost",
           "sigmoid_cross_entropy_with_logits"]

_FLOATS = ["float16", "float32", "float64"]
_LABELS = ["int32", "int64"]
kIgnoreIndex = -100


def _check_label(label: Variable, soft_label: bool, layer: str) -> None:
    check_variable_and_dtype(label, "label", _FLOATS if soft_label else _LABELS, layer,
                             "" if soft_label else "Hard labels are class indices: use "
                             "dtype int64 (e.g. label.astype('int64')) or soft_label=True.")


def cross_entropy(input: Variable, label: Variable, soft_label: bool = False,
                  ignore_index: int = kIgnoreIndex) -> Variable:
    """``-log(input[label])`` per row for probabilities ``input`` (op ``cross_entropy2``), or
    ``-sum(label * log(input))`` with ``soft_label=True`` (op ``cross_entropy``). Output has
    the input's shape with last dim 1.

    Args:
        input (Variable): ``[..., D]`` probabilities (e.g. a softmax output).
        label (Variable): int64 class ids ``[..., 1]``, or with ``soft_label`` a float
            distribution of the input's shape.
        soft_label (bool, default False): the label is a distribution.
        ignore_index (int, default -100): rows with this label give 0 (hard labels only).
    Returns:
        Variable: ``[..., 1]`` per-row losses.
    Raises:
        TypeError: ``input`` is not a float32/float64 Variable, ``label`` has the wrong dtype
            (int64 class ids, or float with ``soft_label``), or ``ignore_index`` is not an int.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     prob = fluid.data("prob", [-1, 3])
        ...     label = fluid.data("label", [-1, 1], "int64")
        ...     ce = fluid.layers.cross_entropy(prob, label)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> out, = exe.run(main, feed={"prob": np.array([[0.5, 0.25, 0.25]], "float32"),
        ...                            "label": np.array([[0]], "int64")}, fetch_list=[ce])
        >>> out.round(4)                         # -log(0.5)
        array([[0.6931]], dtype=float32)
    """
    check_variable_and_dtype(input, "input", _FLOATS, "cross_entropy")
    _check_label(label, soft_label, "cross_entropy")
    ignore_index = check_int(ignore_index, "ignore_index", "cross_entropy")
    if not soft_label:
        helper = LayerHelper("cross_entropy2")
        out = helper.create_variable_for_type_inference(dtype=input.dtype)
        xshape = helper.create_variable_for_type_inference(dtype=input.dtype)
        match_x = helper.create_variable_for_type_inference(dtype=input.dtype)
        helper.append_op(type="cross_entropy2", inputs={"X": [input], "Label": [label]},
                         outputs={"Y": [out], "MatchX": [match_x], "XShape": [xshape]},
                         attrs={"ignore_index": ignore_index})
        return out
    helper = LayerHelper("cross_entropy")
    out = helper.create_variable_for_type_inference(dtype=input.dtype)
    helper.append_op(type="cross_entropy", inputs={"X": [input], "Label": [label]},
                     outputs={"Y": [out]},
                     attrs={"soft_label": soft_label, "ignore_index": ignore_index})
    return out


def softmax_with_cross_entropy(logits: Variable, label: Variable, soft_label: bool = False,
                               ignore_index: int = kIgnoreIndex,
                               numeric_stable_mode: bool = True, return_softmax: bool = False,
                               axis: int = -1) -> Union[Variable, Tuple[Variable, Variable]]:
    """Cross entropy of ``softmax(logits, axis)`` against ``label`` (int64 with dim ``axis`` of
    size 1, or soft probabilities). Returns the loss (and the softmax when
    ``return_softmax``).

    Args:
        logits (Variable): unnormalized scores ``[..., D]``.
        label (Variable): int64 ids with dim ``axis`` of size 1, or with ``soft_label`` a
            distribution of the logits' shape.
        soft_label (bool, default False): the label is a distribution.
        ignore_index (int, default -100): rows with this label give 0 (hard labels only).
        numeric_stable_mode (bool, default True): subtract the row maximum first (always done
            here).
        return_softmax (bool, default False): also return the softmax.
        axis (int, default -1): the class axis.
    Returns:
        Variable | tuple: the loss, with dim ``axis`` of size 1; ``(loss, softmax)`` with
        ``return_softmax``.
    Raises:
        TypeError: ``logits`` is not a float32/float64 Variable, ``label`` has the wrong dtype
            (int64 class ids, or float with ``soft_label``), or ``axis`` / ``ignore_index`` is
            not an int.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     logits = fluid.data("logits", [-1, 3])
        ...     label = fluid.data("label", [-1, 1], "int64")
        ...     loss = fluid.layers.softmax_with_cross_entropy(logits, label)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> out, = exe.run(main, feed={"logits": np.zeros((2, 3), "float32"),
        ...                            "label": np.array([[0], [2]], "int64")}, fetch_list=[loss])
        >>> out.round(4)                         # log(3) for uniform logits
        array([[1.0986],
               [1.0986]], dtype=float32)
    """
    check_variable_and_dtype(logits, "logits", _FLOATS, "softmax_with_cross_entropy")
    _check_label(label, soft_label, "softmax_with_cross_entropy")
    axis = check_int(axis, "axis", "softmax_with_cross_entropy")
    ignore_index = check_int(ignore_index, "ignore_index", "softmax_with_cross_entropy")
    attrs = {"soft_label": soft_label, "ignore_index": ignore_index,
             "numeric_stable_mode": numeric_stable_mode, "axis": axis}
    if _mode.tracer is not None:        # dygraph (fluid 1.8's core.ops path)
        softmax, loss = _mode.tracer.layer_op(
            "softmax_with_cross_entropy", {"Logits": logits, "Label": label},
            ("Softmax", "Loss"), attrs, "softmax_with_cross_entropy.tmp")
    else:
        helper = LayerHelper("softmax_with_cross_entropy")
        softmax = helper.create_variable_for_type_inference(dtype=logits.dtype)
        loss = helper.create_variable_for_type_inference(dtype=logits.dtype)
        helper.append_op(type="softmax_with_cross_entropy",
                         inputs={"Logits": logits, "Label": label},
                         outputs={"Softmax": softmax, "Loss": loss}, attrs=attrs)
    if return_softmax:
        return loss, softmax
    return loss


def square_error_cost(input: Variable, label: Variable) -> Variable:
    """``(input - label)^2`` elementwise (ops ``elementwise_sub`` + ``square``).

    Args:
        input (Variable): predictions.
        label (Variable): targets of the same shape.
    Returns:
        Variable: ``(input - label) ** 2``, elementwise.
    Raises:
        TypeError: ``input`` or ``label`` is not a float32/float64 Variable.
        ValueError: ``input`` and ``label`` cannot be broadcast (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     pred = fluid.data("pred", [-1, 1])
        ...     y = fluid.data("y", [-1, 1])
        ...     cost = fluid.layers.square_error_cost(pred, y)
        >>> fluid.Executor(fluid.CPUPlace()).run(main, feed={
        ...     "pred": np.array([[1.0], [2.0]], "float32"), "y": np.array([[0.5], [4.0]], "float32")},
        ...     fetch_list=[cost])[0]
        array([[0.25],
               [4.  ]], dtype=float32)
    """
    check_variable_and_dtype(input, "input", _FLOATS, "square_error_cost")
    check_variable_and_dtype(label, "label", _FLOATS, "square_error_cost")
    helper = LayerHelper("square_error_cost")
    minus_out = helper.create_variable_for_type_inference(dtype=input.dtype)
    helper.append_op(type="elementwise_sub", inputs={"X": [input], "Y": [label]},
                     outputs={"Out": [minus_out]})
    square_out = helper.create_variable_for_type_inference(dtype=input.dtype)
    helper.append_op(type="square", inputs={"X": [minus_out]}, outputs={"Out": [square_out]})
    return square_out


def sigmoid_cross_entropy_with_logits(x: Variable, label: Variable,
                                      ignore_index: int = kIgnoreIndex,
                                      name: Optional[str] = None,
                                      normalize: bool = False) -> Variable:
    """Elementwise logistic loss of logits ``x`` against probabilities ``label`` (entries equal
    to ``ignore_index`` give 0; ``normalize`` divides by the number of the others).

    Args:
        x (Variable): logits.
        label (Variable): probabilities of the logits' shape.
        ignore_index (int, default -100): entries whose label equals it give 0.
        name (str | None): name prefix of the output.
        normalize (bool, default False): divide by the number of entries not ignored.
    Returns:
        Variable: elementwise losses, the logits' shape.
    Raises:
        TypeError: ``x`` or ``label`` is not a float32/float64 Variable, ``ignore_index`` is not
            an int, or ``normalize`` is not a bool.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 2], "float32")
        ...     label = fluid.data("label", [-1, 2], "float32")
        ...     out = fluid.layers.sigmoid_cross_entropy_with_logits(x, label)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.array([[0.0, 2.0]], "float32"), "label": np.array([[1.0, 0.0]], "float32")}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res.round(4)
        array([[0.6931, 2.1269]], dtype=float32)
    """
    check_variable_and_dtype(x, "x", _FLOATS, "sigmoid_cross_entropy_with_logits")
    check_variable_and_dtype(label, "label", _FLOATS, "sigmoid_cross_entropy_with_logits")
    ignore_index = check_int(ignore_index, "ignore_index", "sigmoid_cross_entropy_with_logits")
    check_type(normalize, "normalize", bool, "sigmoid_cross_entropy_with_logits")
    helper = LayerHelper("sigmoid_cross_entropy_with_logits", name=name)
    out = helper.create_variable_for_type_inference(dtype=x.dtype)
    helper.append_op(type="sigmoid_cross_entropy_with_logits",
                     inputs={"X": x, "Label": label}, outputs={"Out": out},
                     attrs={"ignore_index": ignore_index, "normalize": normalize})
    return out
