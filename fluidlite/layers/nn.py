"""Composite layers built from registry ops: ``fc`` and ``mean``."""
from __future__ import annotations

from typing import Any, Optional, Sequence, Union

from ..core.ir import Variable
from ..layer_helper import LayerHelper

__all__ = ["fc", "mean"]


def fc(input: Union[Variable, Sequence[Variable]], size: int, num_flatten_dims: int = 1,
       param_attr: Any = None, bias_attr: Any = None, act: Any = None,
       name: Optional[str] = None, is_test: bool = False) -> Variable:
    """Fully connected: ``act(sum_i flatten(x_i, num_flatten_dims) @ W_i + b)``.

    Each input gets its own weight ``[prod(x.shape[k:]), size]``; the products are summed (op
    ``sum``) when there are several inputs. Output shape: ``x.shape[:k] + [size]``.
    """
    helper = LayerHelper("fc", input=input, size=size, num_flatten_dims=num_flatten_dims,
                         param_attr=param_attr, bias_attr=bias_attr, act=act, name=name)
    if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
        raise ValueError(f"fc: size must be a positive int, got {size!r}")
    dtype = helper.input_dtype()
    products = []
    for x, attr in helper.iter_inputs_and_params():
        if not 0 < num_flatten_dims < len(x.shape):
            raise ValueError(f"fc: num_flatten_dims={num_flatten_dims} is out of range for input "
                             f"'{x.name}' of shape {list(x.shape)}")
        width = 1
        for d in x.shape[num_flatten_dims:]:
            if d < 0:
                raise ValueError(f"fc: input '{x.name}' has an unknown dim after "
                                 f"num_flatten_dims={num_flatten_dims}: {list(x.shape)}")
            width *= d
        w = helper.create_parameter(attr=attr, shape=[width, size], dtype=dtype)
        tmp = helper.create_variable_for_type_inference(dtype)
        helper.append_op(type="mul", inputs={"X": x, "Y": w}, outputs={"Out": tmp},
                         attrs={"x_num_col_dims": num_flatten_dims, "y_num_col_dims": 1})
        products.append(tmp)
    if len(products) == 1:
        pre_bias = products[0]
    else:
        pre_bias = helper.create_variable_for_type_inference(dtype)
        helper.append_op(type="sum", inputs={"X": products}, outputs={"Out": pre_bias},
                         attrs={"use_mkldnn": False})
    pre_act = helper.append_bias_op(pre_bias, dim_start=num_flatten_dims)
    return helper.append_activation(pre_act)


def mean(x: Variable, name: Optional[str] = None) -> Variable:
    """Mean of all elements, shape [1]."""
    helper = LayerHelper("mean", x=x, name=name)
    if not isinstance(x, Variable):
        raise TypeError(f"mean: x must be a Variable, got {type(x).__name__}")
    out = helper.create_variable_for_type_inference(dtype=x.dtype)
    helper.append_op(type="mean", inputs={"X": x}, outputs={"Out": out})
    return out
