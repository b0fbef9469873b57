"""Neural-net layers: ``fc``, ``mean``, ``mul``, ``matmul``, ``reduce_*``, ``topk``, ``one_hot``."""
from __future__ import annotations

from typing import Any, Optional, Sequence, Tuple, Union

from ..core import mode as _mode
from ..core.ir import Variable
from ..pipeline.feeder import check_type, check_variable_and_dtype
from ..layer_helper import LayerHelper, check_int, check_number, is_int

__all__ = ["fc", "mean", "mul", "matmul", "reduce_sum", "reduce_mean", "reduce_max",
           "reduce_min", "topk", "one_hot"]


def fc(input: Union[Variable, Sequence[Variable]], size: int, num_flatten_dims: int = 1,
       param_attr: Any = None, bias_attr: Any = None, act: Any = None,
       name: Optional[str] = None, is_test: bool = False) -> Variable:
    """Fully connected: ``act(sum_i flatten(x_i, num_flatten_dims) @ W_i + b)``.

    Each input gets its own weight ``[prod(x.shape[k:]), size]``; the products are summed (op
    ``sum``) when there are several inputs. Output shape: ``x.shape[:k] + [size]``.
    """
    size = check_int(size, "size", "fc", minimum=1)
    num_flatten_dims = check_int(num_flatten_dims, "num_flatten_dims", "fc", minimum=1)
    helper = LayerHelper("fc", input=input, size=size, num_flatten_dims=num_flatten_dims,
                         param_attr=param_attr, bias_attr=bias_attr, act=act, name=name)
    dtype = helper.input_dtype()
    for x in helper.multiple_input():        # every input is checked before anything is built
        _fc_width(x, num_flatten_dims)
    products = []
    for x, attr in helper.iter_inputs_and_params():
        w = helper.create_parameter(attr=attr, shape=[_fc_width(x, num_flatten_dims), size],
                                    dtype=dtype)
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


def _fc_width(x: Variable, num_flatten_dims: int) -> int:
    """prod(x.shape[num_flatten_dims:]): the weight's height for input ``x``."""
    if not 0 < num_flatten_dims < len(x.shape):
        raise ValueError(f"fc: num_flatten_dims={num_flatten_dims} is out of range for input "
                         f"'{x.name}' of shape {list(x.shape)}; it must be in [1, "
                         f"{len(x.shape) - 1}]")
    width = 1
    for d in x.shape[num_flatten_dims:]:
        if d < 0:
            raise ValueError(f"fc: input '{x.name}' has an unknown dim after "
                             f"num_flatten_dims={num_flatten_dims}: {list(x.shape)}; declare "
                             f"those dims or lower num_flatten_dims")
        width *= d
    return width


_OUT = ("Out",)


def mean(x: Variable, name: Optional[str] = None) -> Variable:
    """Mean of all elements, shape [1]."""
    if _mode.tracer is not None and name is None:     # dygraph (fluid 1.8's core.ops.mean)
        return _mode.tracer.layer_op("mean", {"X": x}, _OUT, None, "mean.tmp")[0]
    helper = LayerHelper("mean", x=x, name=name)
    if not isinstance(x, Variable):
        raise TypeError(f"mean: x must be a Variable, got {type(x).__name__}")
    out = helper.create_variable_for_type_inference(dtype=x.dtype)
    helper.append_op(type="mean", inputs={"X": x}, outputs={"Out": out})
    return out


# -- products, reductions, top-k, one-hot (ops in ops/linalg.py, reduce.py, metric.py) ----------
_FLOATS = ["float16", "float32", "float64"]


def mul(x: Variable, y: Variable, x_num_col_dims: int = 1, y_num_col_dims: int = 1,
        name: Optional[str] = None) -> Variable:
    """``flatten(x, x_num_col_dims) @ flatten(y, y_num_col_dims)`` (op ``mul``)."""
    check_variable_and_dtype(x, "x", _FLOATS, "mul")
    check_variable_and_dtype(y, "y", _FLOATS, "mul")
    x_num_col_dims = check_int(x_num_col_dims, "x_num_col_dims", "mul", minimum=1)
    y_num_col_dims = check_int(y_num_col_dims, "y_num_col_dims", "mul", minimum=1)
    helper = LayerHelper("mul", name=name)
    out = helper.create_variable_for_type_inference(dtype=x.dtype)
    helper.append_op(type="mul", inputs={"X": x, "Y": y}, outputs={"Out": out},
                     attrs={"x_num_col_dims": x_num_col_dims, "y_num_col_dims": y_num_col_dims})
    return out


def matmul(x: Variable, y: Variable, transpose_x: bool = False, transpose_y: bool = False,
           alpha: float = 1.0, name: Optional[str] = None) -> Variable:
    """``alpha * op(x) @ op(y)`` with optional transposes of the last two dims, broadcast batch
    dims and fluid's 1-D rules (op ``matmul``)."""
    check_variable_and_dtype(x, "x", _FLOATS, "matmul")
    check_variable_and_dtype(y, "y", _FLOATS, "matmul")
    check_type(transpose_x, "transpose_x", bool, "matmul")
    check_type(transpose_y, "transpose_y", bool, "matmul")
    alpha = check_number(alpha, "alpha", "matmul")
    helper = LayerHelper("matmul", name=name)
    out = helper.create_variable_for_type_inference(dtype=x.dtype)
    helper.append_op(type="matmul", inputs={"X": x, "Y": y}, outputs={"Out": out},
                     attrs={"transpose_X": transpose_x, "transpose_Y": transpose_y,
                            "alpha": float(alpha)})
    return out


def _reduce(op_type: str, input: Variable, dim: Any, keep_dim: bool,
            name: Optional[str]) -> Variable:
    check_variable_and_dtype(input, "input", _FLOATS + ["int32", "int64"], op_type)
    if not (dim is None or is_int(dim) or isinstance(dim, (list, tuple))):
        raise TypeError(f"{op_type}: 'dim' must be None, an int or a list of ints, but received "
                        f"{dim!r} of type {type(dim).__name__}")
    check_type(keep_dim, "keep_dim", bool, op_type)
    if is_int(dim):
        dim = [int(dim)]
    elif dim is not None:
        dim = [check_int(d, f"dim[{i}]", op_type) for i, d in enumerate(dim)]
    reduce_all = dim is None or dim == [] or len(dim) == len(input.shape)
    helper = LayerHelper(op_type, name=name)
    out = helper.create_variable_for_type_inference(dtype=input.dtype)
    helper.append_op(type=op_type, inputs={"X": input}, outputs={"Out": out},
                     attrs={"dim": dim if dim else [0], "keep_dim": keep_dim,
                            "reduce_all": reduce_all})
    return out


def reduce_sum(input: Variable, dim: Any = None, keep_dim: bool = False,
               name: Optional[str] = None) -> Variable:
    """Sum over ``dim`` (int or list; None = every dim, giving shape [1])."""
    return _reduce("reduce_sum", input, dim, keep_dim, name)


def reduce_mean(input: Variable, dim: Any = None, keep_dim: bool = False,
                name: Optional[str] = None) -> Variable:
    """Mean over ``dim`` (int or list; None = every dim, giving shape [1])."""
    return _reduce("reduce_mean", input, dim, keep_dim, name)


def reduce_max(input: Variable, dim: Any = None, keep_dim: bool = False,
               name: Optional[str] = None) -> Variable:
    """Max over ``dim`` (int or list; None = every dim, giving shape [1])."""
    return _reduce("reduce_max", input, dim, keep_dim, name)


def reduce_min(input: Variable, dim: Any = None, keep_dim: bool = False,
               name: Optional[str] = None) -> Variable:
    """Min over ``dim`` (int or list; None = every dim, giving shape [1])."""
    return _reduce("reduce_min", input, dim, keep_dim, name)


def topk(input: Variable, k: Union[int, Variable],
         name: Optional[str] = None) -> Tuple[Variable, Variable]:
    """``(values, indices)`` of the k largest entries along the last dim (op ``top_k``)."""
    check_variable_and_dtype(input, "input", _FLOATS + ["int32", "int64"], "topk")
    if not isinstance(k, Variable):
        k = check_int(k, "k", "topk", minimum=1)
    helper = LayerHelper("top_k", name=name)
    values = helper.create_variable_for_type_inference(dtype=input.dtype)
    indices = helper.create_variable_for_type_inference(dtype="int64")
    inputs: dict = {"X": [input]}
    attrs = {}
    if isinstance(k, Variable):
        inputs["K"] = [k]
    else:
        attrs["k"] = k
    helper.append_op(type="top_k", inputs=inputs,
                     outputs={"Out": [values], "Indices": [indices]}, attrs=attrs)
    indices.stop_gradient = True
    return values, indices


def one_hot(input: Variable, depth: Union[int, Variable],
            allow_out_of_range: bool = False) -> Variable:
    """One-hot float32 encoding of int ``input`` whose last dim is 1 (op ``one_hot``)."""
    return _one_hot("one_hot", input, depth, allow_out_of_range)


def _one_hot(op_type: str, input: Variable, depth: Union[int, Variable],
             allow_out_of_range: bool) -> Variable:
    check_variable_and_dtype(input, "input", ["int32", "int64"], "one_hot")
    if not isinstance(depth, Variable):
        depth = check_int(depth, "depth", "one_hot", minimum=1)
    helper = LayerHelper("one_hot")
    out = helper.create_variable_for_type_inference(dtype="float32")
    inputs: dict = {"X": input}
    attrs: dict = {"allow_out_of_range": allow_out_of_range}
    if isinstance(depth, Variable):
        depth.stop_gradient = True
        inputs["depth_tensor"] = depth
    else:
        attrs["depth"] = depth
    helper.append_op(type=op_type, inputs=inputs, outputs={"Out": out}, attrs=attrs)
    out.stop_gradient = True
    return out
