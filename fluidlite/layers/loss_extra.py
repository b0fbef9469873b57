"""fluid 1.8 loss layers beyond cross entropy: huber_loss, smooth_l1, log_loss, kldiv_loss,
margin_rank_loss, rank_loss, bpr_loss, sigmoid_focal_loss, teacher_student_sigmoid_loss,
center_loss (each on the op of the same name; smooth_l1 on ``smooth_l1_loss``) and the
compositions mse_loss, dice_loss and npair_loss (built from existing layers, as fluid 1.8)."""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from ..core.dtypes import VarType
from ..core.ir import Variable
from ..pipeline.feeder import check_type, check_variable_and_dtype
from ..initializer import Constant
from ..layer_helper import LayerHelper, check_int
from .math_extra import _float as _number

__all__ = ["huber_loss", "smooth_l1", "log_loss", "kldiv_loss", "margin_rank_loss",
           "rank_loss", "bpr_loss", "sigmoid_focal_loss", "teacher_student_sigmoid_loss",
           "center_loss", "mse_loss", "dice_loss", "npair_loss"]

_FLOATS = ["float32", "float64"]
_INTS = ["int32", "int64"]


def _tmp(helper: LayerHelper, dtype: Any) -> Variable:
    return helper.create_variable_for_type_inference(dtype=dtype)


def huber_loss(input: Variable, label: Variable, delta: float) -> Variable:
    """0.5 r^2 where |r| <= delta, else delta (|r| - 0.5 delta), r = label - input, per
    entry (op ``huber_loss``; shape of ``input``, usually [N, 1]).

    Args:
        input (Variable): predictions ``[N, 1]``.
        label (Variable): targets ``[N, 1]``.
        delta (float): where the loss turns linear.
    Returns:
        Variable: ``[N, 1]`` losses.
    Raises:
        TypeError: ``input`` or ``label`` is not a float32/float64 Variable, or ``delta`` is not a
            number.
        ValueError: ``input`` and ``label`` differ in shape (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 1], "float32")
        ...     y = fluid.data("y", [-1, 1], "float32")
        ...     out = fluid.layers.huber_loss(x, y, delta=1.0)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.array([[0.5], [3.0]], "float32"), "y": np.zeros((2, 1), "float32")}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res.round(4)
        array([[0.125],
               [2.5  ]], dtype=float32)
    """
    check_variable_and_dtype(input, "input", _FLOATS, "huber_loss")
    check_variable_and_dtype(label, "label", _FLOATS, "huber_loss")
    delta = _number("huber_loss", "delta", delta)
    helper = LayerHelper("huber_loss")
    residual, out = _tmp(helper, input.dtype), _tmp(helper, input.dtype)
    helper.append_op(type="huber_loss", inputs={"X": input, "Y": label},
                     outputs={"Out": out, "Residual": residual}, attrs={"delta": delta})
    return out


def smooth_l1(x: Variable, y: Variable, inside_weight: Optional[Variable] = None,
              outside_weight: Optional[Variable] = None,
              sigma: Optional[float] = None) -> Variable:
    """Per sample [N, 1]: sum over the other dims of outside_weight * f(inside_weight *
    (x - y)), f(d) = 0.5 (sigma d)^2 where |d| < 1/sigma^2, else |d| - 0.5/sigma^2 (op
    ``smooth_l1_loss``; sigma defaults to 1).

    Args:
        x (Variable): predictions ``[N, ...]``.
        y (Variable): targets, same shape.
        inside_weight (Variable | None): multiplies ``x - y``.
        outside_weight (Variable | None): multiplies the elementwise loss.
        sigma (float | None): the transition point is ``1 / sigma^2`` (default 1).
    Returns:
        Variable: ``[N, 1]``, the loss summed per sample.
    Raises:
        TypeError: ``x``, ``y`` or a given weight is not a float32/float64 Variable, or ``sigma``
            is not a number.
        ValueError: ``x`` and ``y`` differ in shape (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 2], "float32")
        ...     y = fluid.data("y", [-1, 2], "float32")
        ...     out = fluid.layers.smooth_l1(x, y)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.array([[0.5, 3.0]], "float32"), "y": np.zeros((1, 2), "float32")}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res.round(4)
        array([[2.625]], dtype=float32)
    """
    check_variable_and_dtype(x, "x", _FLOATS, "smooth_l1_loss")
    check_variable_and_dtype(y, "y", _FLOATS, "smooth_l1_loss")
    inputs = {"X": x, "Y": y}
    for arg, slot, w in (("inside_weight", "InsideWeight", inside_weight),
                         ("outside_weight", "OutsideWeight", outside_weight)):
        if w is not None:
            check_variable_and_dtype(w, arg, _FLOATS, "smooth_l1_loss")
            inputs[slot] = w
    sigma = 1.0 if sigma is None else _number("smooth_l1_loss", "sigma", sigma)
    helper = LayerHelper("smooth_l1_loss")
    diff, loss = _tmp(helper, x.dtype), _tmp(helper, x.dtype)
    helper.append_op(type="smooth_l1_loss", inputs=inputs,
                     outputs={"Diff": diff, "Out": loss}, attrs={"sigma": sigma})
    return loss


def log_loss(input: Variable, label: Variable, epsilon: float = 1e-4,
             name: Optional[str] = None) -> Variable:
    """-label log(input + eps) - (1 - label) log(1 - input + eps) for probabilities
    ``input`` [N, 1] (op ``log_loss``).

    Args:
        input (Variable): probabilities ``[N, 1]``.
        label (Variable): 0/1 labels ``[N, 1]``.
        epsilon (float, default 1e-4): keeps the logarithms finite.
        name (str | None): name prefix of the output.
    Returns:
        Variable: ``[N, 1]`` negative log-likelihoods.
    Raises:
        TypeError: ``input`` or ``label`` is not a float32 Variable, or ``epsilon`` is not a
            number.
        ValueError: ``input`` and ``label`` differ in shape (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     p = fluid.data("p", [-1, 1], "float32")
        ...     y = fluid.data("y", [-1, 1], "float32")
        ...     out = fluid.layers.log_loss(p, y)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"p": np.array([[0.9], [0.2]], "float32"), "y": np.array([[1.0], [0.0]], "float32")}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res.round(4)
        array([[0.1052],
               [0.223 ]], dtype=float32)
    """
    check_variable_and_dtype(input, "input", ["float32"], "log_loss")
    check_variable_and_dtype(label, "label", ["float32"], "log_loss")
    helper = LayerHelper("log_loss", name=name)
    loss = _tmp(helper, input.dtype)
    helper.append_op(type="log_loss", inputs={"Predicted": input, "Labels": label},
                     outputs={"Loss": loss},
                     attrs={"epsilon": _number("log_loss", "epsilon", epsilon)})
    return loss


def kldiv_loss(x: Variable, target: Variable, reduction: str = "mean",
               name: Optional[str] = None) -> Variable:
    """Kullback-Leibler divergence target * (log target - x) of log-probabilities ``x``;
    ``reduction``: 'none' (elementwise), 'sum', 'mean' or 'batchmean' (sum / batch size)
    (op ``kldiv_loss``).

    Args:
        x (Variable): log-probabilities.
        target (Variable): probabilities, same shape.
        reduction (str, default "mean"): ``"none"``, ``"batchmean"``, ``"mean"`` or ``"sum"``.
        name (str | None): name prefix of the output.
    Returns:
        Variable: the KL divergence (elementwise with ``"none"``, else ``[1]``).
    Raises:
        TypeError: ``x`` or ``target`` is not a float32/float64 Variable, or ``reduction`` is not
            a str.
        ValueError: ``x`` and ``target`` differ in shape, or ``reduction`` is not ``"none"``,
            ``"batchmean"``, ``"mean"`` or ``"sum"`` (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 2], "float32")
        ...     t = fluid.data("t", [-1, 2], "float32")
        ...     out = fluid.layers.kldiv_loss(x, t, reduction="sum")
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.log(np.array([[0.5, 0.5]], "float32")), "t": np.array([[0.5, 0.5]], "float32")}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res.round(4)
        array([0.], dtype=float32)
    """
    check_variable_and_dtype(x, "x", _FLOATS, "kldiv_loss")
    check_variable_and_dtype(target, "target", _FLOATS, "kldiv_loss")
    check_type(reduction, "reduction", str, "kldiv_loss")
    helper = LayerHelper("kldiv_loss", name=name)
    loss = _tmp(helper, x.dtype)
    helper.append_op(type="kldiv_loss", inputs={"X": x, "Target": target},
                     outputs={"Loss": loss}, attrs={"reduction": reduction})
    return loss


def margin_rank_loss(label: Variable, left: Variable, right: Variable, margin: float = 0.1,
                     name: Optional[str] = None) -> Variable:
    """max(0, -label (left - right) + margin) with label in {1, -1} (op
    ``margin_rank_loss``).

    Args:
        label (Variable): ``[N, 1]`` +1 (left higher) or -1.
        left (Variable): ``[N, 1]`` scores.
        right (Variable): ``[N, 1]`` scores.
        margin (float, default 0.1): the margin.
        name (str | None): name prefix of the output.
    Returns:
        Variable: ``max(0, -label * (left - right) + margin)``.
    Raises:
        TypeError: ``label``, ``left`` or ``right`` is not a float32 Variable, or ``margin`` is
            not a number.
        ValueError: the shapes of ``left`` and ``right`` differ (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     label = fluid.data("label", [-1, 1], "float32")
        ...     l = fluid.data("l", [-1, 1], "float32")
        ...     r = fluid.data("r", [-1, 1], "float32")
        ...     out = fluid.layers.margin_rank_loss(label, l, r, margin=0.1)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"label": np.array([[1.0], [-1.0]], "float32"), "l": np.array([[0.5], [0.5]], "float32"), "r": np.array([[0.2], [0.2]], "float32")}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res.round(4)
        array([[0. ],
               [0.4]], dtype=float32)
    """
    check_variable_and_dtype(label, "label", ["float32"], "margin_rank_loss")
    check_variable_and_dtype(left, "left", ["float32"], "margin_rank_loss")
    check_variable_and_dtype(right, "right", ["float32"], "margin_rank_loss")
    helper = LayerHelper("margin_rank_loss", name=name)
    out, act = _tmp(helper, left.dtype), _tmp(helper, left.dtype)
    helper.append_op(type="margin_rank_loss", inputs={"Label": label, "X1": left, "X2": right},
                     outputs={"Out": out, "Activated": act},
                     attrs={"margin": _number("margin_rank_loss", "margin", margin)})
    return out


def rank_loss(label: Variable, left: Variable, right: Variable,
              name: Optional[str] = None) -> Variable:
    """RankNet: log(1 + exp(left - right)) - label (left - right) (op ``rank_loss``).

    Args:
        label (Variable): ``[N, 1]`` 1 when left should rank higher, else 0.
        left (Variable): ``[N, 1]`` scores.
        right (Variable): ``[N, 1]`` scores.
        name (str | None): name prefix of the output.
    Returns:
        Variable: ``[N, 1]`` RankNet losses.
    Raises:
        TypeError: ``label``, ``left`` or ``right`` is not a float32 Variable.
        ValueError: an input is not [N] or [N, 1] (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     label = fluid.data("label", [-1, 1], "float32")
        ...     l = fluid.data("l", [-1, 1], "float32")
        ...     r = fluid.data("r", [-1, 1], "float32")
        ...     out = fluid.layers.rank_loss(label, l, r)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"label": np.array([[1.0]], "float32"), "l": np.array([[2.0]], "float32"), "r": np.array([[1.0]], "float32")}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res.round(4)
        array([[0.3133]], dtype=float32)
    """
    for arg, v in (("label", label), ("left", left), ("right", right)):
        check_variable_and_dtype(v, arg, ["float32"], "rank_loss")
    helper = LayerHelper("rank_loss", name=name)
    out = _tmp(helper, left.dtype)
    helper.append_op(type="rank_loss", inputs={"Label": label, "Left": left, "Right": right},
                     outputs={"Out": out})
    return out


def bpr_loss(input: Variable, label: Variable, name: Optional[str] = None) -> Variable:
    """Bayesian personalised ranking: -mean over j != label of log(sigmoid(input[label] -
    input[j])), per row ([N, 1]; op ``bpr_loss``).

    Args:
        input (Variable): ``[N, C]`` scores.
        label (Variable): int64 ``[N, 1]`` positive class.
        name (str | None): name prefix of the output.
    Returns:
        Variable: ``[N, 1]`` Bayesian personalized ranking losses.
    Raises:
        TypeError: ``input`` is not a float32/float64 Variable, or ``label`` is not an int64
            Variable.
        ValueError: ``label``'s shape is not ``input``'s with last dim 1 (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 3], "float32")
        ...     label = fluid.data("label", [-1, 1], "int64")
        ...     out = fluid.layers.bpr_loss(x, label)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.array([[0.5, 0.2, 0.1]], "float32"), "label": np.array([[0]], "int64")}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res.round(4)
        array([[0.5337]], dtype=float32)
    """
    check_variable_and_dtype(input, "input", _FLOATS, "bpr_loss")
    check_variable_and_dtype(label, "label", ["int64"], "bpr_loss")
    helper = LayerHelper("bpr_loss", name=name)
    out = _tmp(helper, input.dtype)
    helper.append_op(type="bpr_loss", inputs={"X": input, "Label": label},
                     outputs={"Y": out})
    return out


def sigmoid_focal_loss(x: Variable, label: Variable, fg_num: Variable, gamma: float = 2.0,
                       alpha: float = 0.25) -> Variable:
    """Focal loss of logits ``x`` [N, C] against ``label`` [N, 1] (int32, 0 = background,
    1..C = classes, -1 = ignored), normalised by the foreground count ``fg_num`` (int32 [1])
    (op ``sigmoid_focal_loss``).

    Args:
        x (Variable): logits ``[N, C]`` (no background column).
        label (Variable): int32 ``[N, 1]`` class ids, 1-based (0: background).
        fg_num (Variable): int32 ``[1]``, the number of foreground samples (normalizer).
        gamma (float, default 2.0): the focusing exponent.
        alpha (float, default 0.25): the positives' weight.
    Returns:
        Variable: ``[N, C]`` losses.
    Raises:
        TypeError: ``x`` is not a float32/float64 Variable, ``label`` or ``fg_num`` is not an
            int32 Variable, or ``gamma`` / ``alpha`` is not a number.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 2], "float32")
        ...     label = fluid.data("label", [-1, 1], "int32")
        ...     fg = fluid.data("fg", [1], "int32")
        ...     out = fluid.layers.sigmoid_focal_loss(x, label, fg)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.array([[0.0, 1.0]], "float32"), "label": np.array([[1]], "int32"), "fg": np.array([1], "int32")}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res.round(4)
        array([[0.0433, 0.5264]], dtype=float32)
    """
    check_variable_and_dtype(x, "x", _FLOATS, "sigmoid_focal_loss")
    check_variable_and_dtype(label, "label", ["int32"], "sigmoid_focal_loss")
    check_variable_and_dtype(fg_num, "fg_num", ["int32"], "sigmoid_focal_loss")
    helper = LayerHelper("sigmoid_focal_loss")
    out = _tmp(helper, x.dtype)
    helper.append_op(type="sigmoid_focal_loss",
                     inputs={"X": x, "Label": label, "FgNum": fg_num}, outputs={"Out": out},
                     attrs={"gamma": _number("sigmoid_focal_loss", "gamma", gamma),
                            "alpha": _number("sigmoid_focal_loss", "alpha", alpha)})
    return out


def teacher_student_sigmoid_loss(input: Variable, label: Variable,
                                 soft_max_up_bound: float = 15.0,
                                 soft_max_lower_bound: float = -15.0) -> Variable:
    """Sigmoid cross entropy against a click label and an optional teacher score packed in
    ``label`` (-2: no click, -1: click, [0, 1): no click + score, >= 1: click + score - 1)
    (op ``teacher_student_sigmoid_loss``).

    Args:
        input (Variable): float32/float64 logits [N, 1].
        label (Variable): float32/float64 (or int64) packed labels [N, 1], coded as above; cast
            to ``input``'s dtype.
        soft_max_up_bound (float, default 15.0): the upper clip of the logits.
        soft_max_lower_bound (float, default -15.0): the lower clip of the logits.
    Returns:
        Variable: [N, 1] losses, dtype of ``input``.
    Raises:
        TypeError: ``input`` is not a float32/float64 Variable, ``label`` is not a
            float32/float64/int64 Variable, or a bound is not a number.
        ValueError: ``input`` and ``label`` differ in shape (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 1], "float32")
        ...     label = fluid.data("label", [-1, 1], "float32")
        ...     out = fluid.layers.teacher_student_sigmoid_loss(x, label)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.array([[0.5]], "float32"), "label": np.array([[1.0]], "float32")}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res.round(4)
        array([[1.4482]], dtype=float32)
    """
    check_variable_and_dtype(input, "input", _FLOATS, "teacher_student_sigmoid_loss")
    check_variable_and_dtype(label, "label", _FLOATS + ["int64"],
                             "teacher_student_sigmoid_loss")
    layer = "teacher_student_sigmoid_loss"
    if label.dtype != input.dtype:     # integer click labels (fluid's documented example)
        from .ops import cast
        label = cast(label, input.dtype)
    helper = LayerHelper(layer)
    out = _tmp(helper, input.dtype)
    helper.append_op(type=layer, inputs={"X": input, "Label": label}, outputs={"Y": out},
                     attrs={"soft_max_up_bound": _number(layer, "soft_max_up_bound",
                                                         soft_max_up_bound),
                            "soft_max_lower_bound": _number(layer, "soft_max_lower_bound",
                                                            soft_max_lower_bound)})
    return out


def center_loss(input: Variable, label: Variable, num_classes: int, alpha: Any,
                param_attr: Any, update_center: bool = True) -> Variable:
    """0.5 ||input - center[label]||^2 per row ([N, 1]; a sample's features are all its
    entries after the batch dim); the centers (a parameter [num_classes, D] made from
    ``param_attr``, not trained by the optimizer) move towards
    their rows by rate ``alpha`` (a float, kept in the global ``centerloss_alpha``, or a
    Variable) each run when ``update_center`` (op ``center_loss``).

    Args:
        input (Variable): float32/float64 features [N, D, ...] with the dims after N known.
        label (Variable): int32/int64 class ids [N, 1].
        num_classes (int): the number of centers (>= 1).
        alpha (float | Variable): the centers' update rate (a float [1] Variable, or a number).
        param_attr (ParamAttr | None): the attribute of the centers parameter
            [num_classes, prod(D, ...)].
        update_center (bool, default True): move the centers each run.
    Returns:
        Variable: [N, 1] losses, dtype of ``input``.
    Raises:
        TypeError: ``input`` / ``label`` / a Variable ``alpha`` has the wrong type or dtype,
            ``num_classes`` is not an int, ``alpha`` is not a number, or ``update_center`` is not
            a bool.
        ValueError: ``num_classes`` is below 1, or ``input`` is not [N, D, ...] with known dims
            after N.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 2])
        ...     label = fluid.data("label", [-1, 1], "int64")
        ...     loss = fluid.layers.center_loss(x, label, num_classes=3, alpha=0.1,
        ...                                     param_attr=fluid.ParamAttr(initializer=fluid.initializer.Constant(0.0)))
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> exe.run(main, feed={"x": np.array([[3, 4]], "float32"), "label": np.array([[1]], "int64")},
        ...         fetch_list=[loss])[0]                     # ||x - center||^2 / 2
        array([[12.5]], dtype=float32)
    """
    check_variable_and_dtype(input, "input", _FLOATS, "center_loss")
    check_variable_and_dtype(label, "label", _INTS, "center_loss")
    num_classes = check_int(num_classes, "num_classes", "center_loss", minimum=1)
    check_type(update_center, "update_center", bool, "center_loss")
    if len(input.shape) < 2 or any(d <= 0 for d in input.shape[1:]):
        raise ValueError(f"center_loss: input must be [N, D, ...] with the dims after N known, "
                         f"but its shape is {list(input.shape)}")
    if len(input.shape) > 2:
        # the features of a sample are everything after the batch dim (fluid 1.8 took only
        # dim 1 as the feature size and read the rest of the rows as other samples)
        from .tensor import reshape
        input = reshape(input, [-1, int(np.prod(input.shape[1:]))])
    helper = LayerHelper("center_loss", param_attr=param_attr)
    if isinstance(alpha, Variable):
        check_variable_and_dtype(alpha, "alpha", _FLOATS, "center_loss")
        rate = alpha
    else:
        value = _number("center_loss", "alpha", alpha)
        rate, created = helper.create_or_get_global_variable(
            "centerloss_alpha", shape=[1], dtype="float32", persistable=True)
        if created:
            helper.set_variable_initializer(rate, initializer=Constant(value))
    centers = helper.create_parameter(attr=helper.param_attr,
                                      shape=[num_classes, input.shape[1]], dtype=input.dtype)
    centers.stop_gradient = True
    diff, loss = _tmp(helper, input.dtype), _tmp(helper, input.dtype)
    helper.append_op(type="center_loss",
                     inputs={"X": input, "Label": label, "Centers": centers,
                             "CenterUpdateRate": rate},
                     outputs={"SampleCenterDiff": diff, "Loss": loss, "CentersOut": centers},
                     attrs={"cluster_num": num_classes, "need_update": update_center})
    return loss


# -- compositions ----------------------------------------------------------------------------------
def mse_loss(input: Variable, label: Variable) -> Variable:
    """mean((input - label)^2) as shape [1] (``reduce_mean`` of ``square_error_cost``).

    Args:
        input (Variable): predictions.
        label (Variable): targets, same shape.
    Returns:
        Variable: ``[1]``, the mean squared error.
    Raises:
        TypeError: ``input`` or ``label`` is not a float32/float64 Variable.
        ValueError: ``input`` and ``label`` cannot be broadcast (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 2], "float32")
        ...     y = fluid.data("y", [-1, 2], "float32")
        ...     out = fluid.layers.mse_loss(x, y)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.array([[1.0, 3.0]], "float32"), "y": np.zeros((1, 2), "float32")}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res.round(4)
        array([5.], dtype=float32)
    """
    check_variable_and_dtype(input, "input", _FLOATS, "mse_loss")
    check_variable_and_dtype(label, "label", _FLOATS, "mse_loss")
    from .loss import square_error_cost
    from .nn import reduce_mean
    return reduce_mean(square_error_cost(input, label))


def dice_loss(input: Variable, label: Variable, epsilon: float = 1e-5,
              name: Optional[str] = None) -> Variable:
    """1 - 2 |input * onehot(label)| / (|input| + |onehot(label)| + epsilon) per sample,
    averaged ([1]); ``input`` holds probabilities over the last dim, ``label`` the class
    indices with a last dim of 1 (composed of one_hot, reduce_sum, reduce_mean).

    Args:
        input (Variable): probabilities ``[..., C]``.
        label (Variable): int class ids ``[..., 1]``.
        epsilon (float, default 1e-5): keeps the ratio finite.
        name (str | None): name prefix of the output.
    Returns:
        Variable: ``[1]``, the mean dice loss.
    Raises:
        TypeError: ``input`` is not a float32/float64 Variable, ``label`` is not an int or float
            Variable, or ``epsilon`` is not a number.
        ValueError: ``input``'s last dim is unknown, or ``label``'s last dim is not 1 (shape
            inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     p = fluid.data("p", [-1, 2], "float32")
        ...     label = fluid.data("label", [-1, 1], "int64")
        ...     out = fluid.layers.dice_loss(p, label)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"p": np.array([[0.9, 0.1], [0.2, 0.8]], "float32"), "label": np.array([[0], [1]], "int64")}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res.round(4)
        array([0.15], dtype=float32)
    """
    check_variable_and_dtype(input, "input", _FLOATS, "dice_loss")
    check_variable_and_dtype(label, "label", _INTS + _FLOATS, "dice_loss")
    eps = _number("dice_loss", "epsilon", epsilon)
    from .nn import one_hot, reduce_mean, reduce_sum
    from .ops import cast, elementwise_add, elementwise_div, elementwise_mul, scale
    if label.dtype != VarType.INT64 and label.dtype != VarType.INT32:
        label = cast(label, "int64")       # class indices stored as floats (fluid's example)
    depth = input.shape[-1]
    if depth <= 0:
        raise ValueError(f"dice_loss: the last dim of input (the classes) must be known, but "
                         f"input has shape {list(input.shape)}")
    onehot = one_hot(label, depth=depth)
    dims = list(range(1, len(input.shape)))
    inse = reduce_sum(elementwise_mul(input, onehot), dim=dims)
    denom = elementwise_add(reduce_sum(input, dim=dims), reduce_sum(onehot, dim=dims))
    score = scale(elementwise_div(scale(inse, scale=2.0), scale(denom, bias=eps)),
                  scale=-1.0, bias=1.0)
    return reduce_mean(score, name=name)


def npair_loss(anchor: Variable, positive: Variable, labels: Variable,
               l2_reg: float = 0.002) -> Variable:
    """N-pair loss: softmax cross entropy of the similarities anchor @ positive^T against
    the same-label matrix (rows normalised), plus l2_reg / 4 times the mean squared norms of
    anchor and positive ([1]; composed of existing layers, as fluid 1.8).

    Args:
        anchor (Variable): ``[N, D]`` embeddings.
        positive (Variable): ``[N, D]`` embeddings of the same classes.
        labels (Variable): ``[N]`` class labels.
        l2_reg (float, default 0.002): the embeddings' L2 penalty.
    Returns:
        Variable: ``[1]``, the N-pair loss.
    Raises:
        TypeError: ``anchor`` / ``positive`` is not a float32/float64 Variable, ``labels`` is not
            an int or float Variable, or ``l2_reg`` is not a number.
        ValueError: ``anchor`` and ``positive`` are not [N, D] of one shape.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     a = fluid.data("a", [-1, 2], "float32")
        ...     p = fluid.data("p", [-1, 2], "float32")
        ...     label = fluid.data("label", [-1], "float32")
        ...     out = fluid.layers.npair_loss(a, p, label, l2_reg=0.0)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"a": np.array([[1, 0], [0, 1]], "float32"), "p": np.array([[1, 0], [0, 1]], "float32"), "label": np.array([0, 1], "float32")}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res.round(4)
        array([0.3133], dtype=float32)
    """
    check_variable_and_dtype(anchor, "anchor", _FLOATS, "npair_loss")
    check_variable_and_dtype(positive, "positive", _FLOATS, "npair_loss")
    check_variable_and_dtype(labels, "labels", _FLOATS + ["int64"], "npair_loss")  # fluid 1.8
    reg = _number("npair_loss", "l2_reg", l2_reg)
    if len(anchor.shape) != 2 or tuple(anchor.shape) != tuple(positive.shape):
        raise ValueError(f"npair_loss: anchor and positive must be [N, D] of the same shape, "
                         f"but received anchor {list(anchor.shape)} and positive "
                         f"{list(positive.shape)}")
    from .nn import matmul, reduce_mean, reduce_sum
    from .ops import cast, elementwise_add, elementwise_div, elementwise_mul, equal, scale, \
        square
    from .loss import softmax_with_cross_entropy
    from .tensor import reshape, transpose
    col = reshape(labels, shape=[-1, 1])
    same = cast(equal(col, transpose(col, perm=[1, 0])), anchor.dtype)     # [N, N]
    same = elementwise_div(same, reduce_sum(same, dim=1, keep_dim=True), axis=0)
    l2 = elementwise_add(reduce_mean(reduce_sum(square(anchor), dim=1)),
                         reduce_mean(reduce_sum(square(positive), dim=1)))
    l2 = scale(l2, scale=0.25 * reg)
    sim = matmul(anchor, positive, transpose_x=False, transpose_y=True)
    ce = softmax_with_cross_entropy(logits=sim, label=same, soft_label=True)    # [N, 1]
    ce = reduce_sum(elementwise_mul(same, ce, axis=0), dim=0)
    return elementwise_add(l2, reduce_mean(ce))
