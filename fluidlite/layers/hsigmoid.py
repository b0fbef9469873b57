"""``fluid.layers.hsigmoid``: hierarchical sigmoid loss over the default binary tree or a
custom tree (``is_custom``, ``path_table``, ``path_code``)."""
from __future__ import annotations

from typing import Any, Optional

from ..core.dtypes import VarType
from ..core.ir import Variable
from ..layer_helper import LayerHelper, check_int

__all__ = ["hsigmoid"]


def hsigmoid(input: Variable, label: Variable, num_classes: int, param_attr: Any = None,
             bias_attr: Any = None, name: Optional[str] = None,
             path_table: Optional[Variable] = None, path_code: Optional[Variable] = None,
             is_custom: bool = False, is_sparse: bool = False) -> Variable:
    """-log p(label) [N, 1] under a hierarchical sigmoid with ``num_classes`` leaves (weights
    ``[num_classes - 1, D]``, bias ``[num_classes - 1, 1]``). Custom tree (``is_custom=True``):
    ``path_table`` / ``path_code`` (int64 [N, L]) give each sample's internal nodes (ended by
    a negative entry) and their bits; ``num_classes`` is then the number of internal nodes
    (weights ``[num_classes, D]``, bias ``[num_classes, 1]``) and ``label`` is not read.

    Args:
        input (Variable): float32/float64 features [N, D].
        label (Variable): int64 class ids [N, 1] (not read with ``is_custom``).
        num_classes (int): the number of classes (>= 2); with ``is_custom``, the number of
            internal nodes (>= 1).
        param_attr (ParamAttr | None, default None): attribute of the weights.
        bias_attr (ParamAttr | bool | None, default None): attribute of the bias; False: no
            bias.
        name (str | None, default None): name prefix of the parameters.
        path_table (Variable | None, default None): with ``is_custom``, int64 [N, L] node ids.
        path_code (Variable | None, default None): with ``is_custom``, int64 [N, L] bits.
        is_custom (bool, default False): use ``path_table`` / ``path_code`` instead of the
            default tree.
        is_sparse (bool, default False): make the weight gradient sparse (SelectedRows).
    Returns:
        Variable: [N, 1] costs, dtype of ``input``.
    Raises:
        TypeError: ``input`` / ``label`` is not a Variable, ``path_table`` / ``path_code`` is
            not an int64 Variable, or ``num_classes`` is not an int.
        ValueError: ``num_classes`` is too small, a path is given without ``is_custom``, or one
            is missing with it.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 4])
        ...     label = fluid.data("label", [-1, 1], "int64")
        ...     loss = fluid.layers.hsigmoid(x, label, num_classes=6)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> exe.run(main, feed={"x": np.ones((2, 4), "float32"), "label": np.array([[1], [5]], "int64")},
        ...         fetch_list=[loss])[0].shape
        (2, 1)
    """
    if not isinstance(input, Variable) or not isinstance(label, Variable):
        raise TypeError("hsigmoid: input and label must be Variables")
    if label.dtype != VarType.INT64:        # fluid 1.8 checks label is int64
        raise TypeError(f"The data type of 'label' in hsigmoid must be ['int64'], but received "
                        f"{label.dtype}; cast it with fluid.layers.cast(label, 'int64')")
    if not is_custom and (path_table is not None or path_code is not None):
        raise ValueError("hsigmoid: path_table and path_code are only used with "
                         "is_custom=True (only num_classes is passed for the default tree)")
    if is_custom:
        for arg, v in (("path_table", path_table), ("path_code", path_code)):
            if v is None:
                raise ValueError(f"hsigmoid: {arg} should not be None with custom tree "
                                 f"(is_custom=True)")
            if not isinstance(v, Variable):
                raise TypeError(f"hsigmoid: {arg} must be a Variable (int64 [N, L]), got "
                                f"{type(v).__name__}")
            if v.dtype != VarType.INT64:
                raise TypeError(f"hsigmoid: {arg} must be int64, got {v.dtype}")
    num_classes = check_int(num_classes, "num_classes", "hsigmoid",
                            minimum=1 if is_custom else 2)
    rows = num_classes if is_custom else num_classes - 1
    helper = LayerHelper("hierarchical_sigmoid", input=input, param_attr=param_attr,
                         bias_attr=bias_attr, name=name)
    dtype = helper.input_dtype()
    w = helper.create_parameter(attr=helper.param_attr, shape=[rows, input.shape[-1]],
                                dtype=dtype)
    inputs = {"X": input, "W": w, "Label": label}
    if is_custom:
        inputs["PathTable"], inputs["PathCode"] = path_table, path_code
    if helper.bias_attr is not False:
        inputs["Bias"] = helper.create_parameter(attr=helper.bias_attr, shape=[rows, 1],
                                                 dtype=dtype, is_bias=True)
    out = helper.create_variable_for_type_inference(dtype)
    pre = helper.create_variable_for_type_inference(dtype, stop_gradient=True)
    helper.append_op(type="hierarchical_sigmoid", inputs=inputs,
                     outputs={"Out": out, "PreOut": pre},
                     attrs={"num_classes": num_classes, "is_sparse": bool(is_sparse)})
    return out
