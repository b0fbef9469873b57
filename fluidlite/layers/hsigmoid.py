"""``fluid.layers.hsigmoid``: hierarchical sigmoid loss over the default binary tree."""
from __future__ import annotations

from typing import Any, Optional

from ..core.ir import Variable
from ..layer_helper import LayerHelper, check_int

__all__ = ["hsigmoid"]


def hsigmoid(input: Variable, label: Variable, num_classes: int, param_attr: Any = None,
             bias_attr: Any = None, name: Optional[str] = None,
             path_table: Optional[Variable] = None, path_code: Optional[Variable] = None,
             is_custom: bool = False, is_sparse: bool = False) -> Variable:
    """-log p(label) [N, 1] under a hierarchical sigmoid with ``num_classes`` leaves (weights
    ``[num_classes - 1, D]``, bias ``[num_classes - 1, 1]``)."""
    if not isinstance(input, Variable) or not isinstance(label, Variable):
        raise TypeError("hsigmoid: input and label must be Variables")
    if is_custom or path_table is not None or path_code is not None:
        raise ValueError("hsigmoid: custom trees (is_custom, path_table, path_code) are not "
                         "supported; use the default tree")
    num_classes = check_int(num_classes, "num_classes", "hsigmoid", minimum=2)
    helper = LayerHelper("hierarchical_sigmoid", input=input, param_attr=param_attr,
                         bias_attr=bias_attr, name=name)
    dtype = helper.input_dtype()
    w = helper.create_parameter(attr=helper.param_attr,
                                shape=[num_classes - 1, input.shape[-1]], dtype=dtype)
    inputs = {"X": input, "W": w, "Label": label}
    if helper.bias_attr is not False:
        inputs["Bias"] = helper.create_parameter(attr=helper.bias_attr,
                                                 shape=[num_classes - 1, 1], dtype=dtype,
                                                 is_bias=True)
    out = helper.create_variable_for_type_inference(dtype)
    pre = helper.create_variable_for_type_inference(dtype, stop_gradient=True)
    helper.append_op(type="hierarchical_sigmoid", inputs=inputs,
                     outputs={"Out": out, "PreOut": pre},
                     attrs={"num_classes": num_classes, "is_sparse": bool(is_sparse)})
    return out
