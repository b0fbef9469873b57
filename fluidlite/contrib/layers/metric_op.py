"""``fluid.contrib.layers.metric_op`` (fluid 1.8): ``ctr_metric_bundle``, running sums of
CTR metrics kept in persistable variables, with the same ops in the same order as fluid 1.8
(plus one cast: fluidlite's ``squared_l2_norm`` gives float64).
"""
from __future__ import annotations

from typing import Tuple

from ...core.ir import Variable
from ...initializer import Constant
from ...layer_helper import LayerHelper

__all__ = ["ctr_metric_bundle"]


def ctr_metric_bundle(input: Variable, label: Variable
                      ) -> Tuple[Variable, Variable, Variable, Variable, Variable, Variable]:
    """Running CTR metric sums over the batches a program runs on: each call of the program
    adds the batch's values to six float32 ``[1]`` persistable accumulators (zero after the
    startup program).

    * local_sqrerr += sum((input - label)^2), local_abserr += sum(|input - label|)
    * local_prob += sum(input), local_q += sum(sigmoid(input))
    * local_pos_num += sum(label), local_ins_num += batch size

    Divide by the instance count for the metrics: MAE = local_abserr / ins, RMSE =
    sqrt(local_sqrerr / ins), predicted CTR = local_prob / ins, q = local_q / ins (all-reduce
    the sums first in distributed jobs).

    Args:
        input (Variable): ``[N, 1]`` float32 predicted click probabilities.
        label (Variable): ``[N, 1]`` labels (0 / 1), of ``input``'s shape: float32, or an
            integer tensor (fluid 1.8's documented example passes int32), cast to float32.
    Returns:
        tuple: (local_sqrerr, local_abserr, local_prob, local_q, local_pos_num,
        local_ins_num).
    Raises:
        ValueError: ``input`` and ``label`` differ in shape.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     pred = fluid.data("pred", [-1, 1]); label = fluid.data("label", [-1, 1])
        ...     sqrerr, abserr, prob, q, pos, ins = fluid.contrib.layers.ctr_metric_bundle(
        ...         pred, label)
        >>> exe = fluid.Executor(); _ = exe.run(startup)
        >>> feed = {"pred": np.array([[0.5], [0.25]], "float32"),
        ...         "label": np.array([[1.0], [0.0]], "float32")}
        >>> _ = exe.run(main, feed=feed)
        >>> [float(v[0]) for v in exe.run(main, feed=feed, fetch_list=[abserr, pos, ins])]
        [1.5, 2.0, 4.0]
    """
    if tuple(input.shape) != tuple(label.shape):
        raise ValueError(f"ctr_metric_bundle: input and label must have the same shape, got "
                         f"{list(input.shape)} and {list(label.shape)}")
    helper = LayerHelper("ctr_metric_bundle")

    def var(persistable: bool, shape: list) -> Variable:
        return helper.create_global_variable(persistable=persistable, dtype="float32",
                                             shape=shape)
    local_abserr, local_sqrerr, local_prob, local_q, local_pos_num, local_ins_num = (
        var(True, [1]) for _ in range(6))
    tmp_res_elesub, tmp_res_sigmoid, tmp_ones = (var(False, [-1]) for _ in range(3))
    batch_prob, batch_abserr, batch_sqrerr, batch_q, batch_pos_num, batch_ins_num = (
        var(False, [1]) for _ in range(6))
    for v in (local_abserr, batch_abserr, local_sqrerr, batch_sqrerr, local_prob, batch_prob,
              local_q, batch_q, batch_pos_num, batch_ins_num, local_pos_num, local_ins_num):
        helper.set_variable_initializer(v, Constant(value=0.0, force_cpu=True))

    def op(type_: str, x: Variable, out: Variable, y: Variable = None, **attrs) -> None:
        inputs = {"X": [x]} if y is None else {"X": [x], "Y": [y]}
        helper.append_op(type=type_, inputs=inputs, outputs={"Out": [out]}, attrs=attrs)
    if label.dtype != input.dtype:
        # fluid 1.8 subtracted an int label from the float input and failed when run; the
        # documented int32 label is the intended use: compare it as a number
        as_float = helper.create_variable_for_type_inference(input.dtype)
        helper.append_op(type="cast", inputs={"X": [label]}, outputs={"Out": [as_float]},
                         attrs={"in_dtype": label.dtype, "out_dtype": input.dtype})
        label = as_float
    op("elementwise_sub", input, tmp_res_elesub, label)
    # fluidlite's squared_l2_norm answers float64 (it accumulates there, ops/clip.py), fluid's
    # the input's dtype: cast back so the accumulator stays float32 as in fluid
    sqrerr64 = helper.create_variable_for_type_inference("float64")
    op("squared_l2_norm", tmp_res_elesub, sqrerr64)
    helper.append_op(type="cast", inputs={"X": [sqrerr64]}, outputs={"Out": [batch_sqrerr]},
                     attrs={"in_dtype": sqrerr64.dtype, "out_dtype": batch_sqrerr.dtype})
    op("elementwise_add", batch_sqrerr, local_sqrerr, local_sqrerr)
    op("l1_norm", tmp_res_elesub, batch_abserr)
    op("elementwise_add", batch_abserr, local_abserr, local_abserr)
    op("reduce_sum", input, batch_prob)
    op("elementwise_add", batch_prob, local_prob, local_prob)
    op("sigmoid", input, tmp_res_sigmoid)
    op("reduce_sum", tmp_res_sigmoid, batch_q)
    op("elementwise_add", batch_q, local_q, local_q)
    op("reduce_sum", label, batch_pos_num)
    op("elementwise_add", batch_pos_num, local_pos_num, local_pos_num)
    helper.append_op(type="fill_constant_batch_size_like", inputs={"Input": label},
                     outputs={"Out": [tmp_ones]},
                     attrs={"shape": [-1, 1], "dtype": tmp_ones.dtype, "value": 1.0})
    op("reduce_sum", tmp_ones, batch_ins_num)
    op("elementwise_add", batch_ins_num, local_ins_num, local_ins_num)
    return local_sqrerr, local_abserr, local_prob, local_q, local_pos_num, local_ins_num
