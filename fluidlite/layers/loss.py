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
    the input's shape with last dim 1."""
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
    ``return_softmax``)."""
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
    """``(input - label)^2`` elementwise (ops ``elementwise_sub`` + ``square``)."""
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
    to ``ignore_index`` give 0; ``normalize`` divides by the number of the others)."""
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
