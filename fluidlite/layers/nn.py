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

    Args:
        input (Variable | list of Variable): ``[N, ...]`` float inputs; with several, each gets
            its own weight and the products are summed.
        size (int): number of output units (>= 1).
        num_flatten_dims (int, default 1): the leading dims kept as rows; the rest are flattened
            into the matrix multiply (``x.shape[:k]`` rows of ``prod(x.shape[k:])``).
        param_attr (ParamAttr | str | None): the weight's attribute (name, initializer,
            regularizer, learning rate); Xavier-initialized by default.
        bias_attr (ParamAttr | str | bool | None): the bias ``[size]``; ``False``: no bias.
        act (str | None): activation applied to the result (``"relu"``, ``"softmax"``, ...).
        name (str | None): name prefix of the output variable.
        is_test (bool, default False): accepted for fluid's signature; fc has no train/test mode.
    Returns:
        Variable: ``x.shape[:num_flatten_dims] + [size]``, the input's dtype.
    Raises:
        TypeError: an input is not a Variable or not float.
        ValueError: ``size`` or ``num_flatten_dims`` is out of range.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 4])
        ...     h = fluid.layers.fc(input=x, size=8, act="relu",
        ...                         param_attr=fluid.ParamAttr(name="fc_w"))
        ...     prob = fluid.layers.fc(input=h, size=3, act="softmax")
        >>> h.shape, prob.shape, main.global_block().var("fc_w").shape
        ((-1, 8), (-1, 3), (4, 8))
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> p, = exe.run(main, feed={"x": np.ones((2, 4), "float32")}, fetch_list=[prob])
        >>> p.shape, np.allclose(p.sum(axis=1), 1.0)
        ((2, 3), True)
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
    """Mean of all elements, shape [1].

    Args:
        x (Variable): the input.
        name (str | None): name prefix of the output.
    Returns:
        Variable: shape ``[1]``, ``x``'s dtype.
    Raises:
        TypeError: ``x`` is not a Variable or not float16/32/64 (in static mode).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 2])
        ...     m = fluid.layers.mean(x)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> exe.run(main, feed={"x": np.array([[1, 2], [3, 6]], "float32")}, fetch_list=[m])[0]
        array([3.], dtype=float32)
    """
    if _mode.tracer is not None and name is None:     # dygraph (fluid 1.8's core.ops.mean)
        return _mode.tracer.layer_op("mean", {"X": x}, _OUT, None, "mean.tmp")[0]
    helper = LayerHelper("mean", x=x, name=name)
    if not isinstance(x, Variable):
        raise TypeError(f"mean: x must be a Variable, got {type(x).__name__}")
    check_variable_and_dtype(x, "x", _FLOATS, "mean")       # fluid 1.8's check
    out = helper.create_variable_for_type_inference(dtype=x.dtype)
    helper.append_op(type="mean", inputs={"X": x}, outputs={"Out": out})
    return out


# -- products, reductions, top-k, one-hot (ops in ops/linalg.py, reduce.py, metric.py) ----------
_FLOATS = ["float16", "float32", "float64"]


def mul(x: Variable, y: Variable, x_num_col_dims: int = 1, y_num_col_dims: int = 1,
        name: Optional[str] = None) -> Variable:
    """``flatten(x, x_num_col_dims) @ flatten(y, y_num_col_dims)`` (op ``mul``).

    Args:
        x (Variable): flattened to a matrix at ``x_num_col_dims``.
        y (Variable): flattened to a matrix at ``y_num_col_dims``.
        x_num_col_dims (int, default 1): leading dims of ``x`` forming the rows.
        y_num_col_dims (int, default 1): leading dims of ``y`` forming the rows.
        name (str | None): name prefix of the output.
    Returns:
        Variable: ``x.shape[:x_num_col_dims] + y.shape[y_num_col_dims:]``.
    Raises:
        TypeError: ``x`` or ``y`` is not a float32/float64 Variable, or a ``*_num_col_dims`` is
            not an int.
        ValueError: a ``*_num_col_dims`` is below 1, or the flattened width of ``x`` differs
            from the flattened height of ``y`` (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [2, 3], "float32")
        ...     y = fluid.data("y", [3, 4], "float32")
        ...     out = fluid.layers.mul(x, y)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.ones((2, 3), "float32"), "y": np.ones((3, 4), "float32")}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res.round(4)
        array([[3., 3., 3., 3.],
               [3., 3., 3., 3.]], dtype=float32)
    """
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
    dims and fluid's 1-D rules (op ``matmul``).

    Args:
        x (Variable): ``[..., M, K]`` (or 1-D).
        y (Variable): ``[..., K, N]`` (or 1-D).
        transpose_x (bool, default False): use ``x``'s last two dims transposed.
        transpose_y (bool, default False): use ``y``'s last two dims transposed.
        alpha (float, default 1.0): scale of the product.
        name (str | None): name prefix of the output.
    Returns:
        Variable: ``[..., M, N]`` with broadcast batch dims.
    Raises:
        TypeError: ``x`` or ``y`` is not a float32/float64 Variable, ``transpose_x`` /
            ``transpose_y`` is not a bool, or ``alpha`` is not a number.
        ValueError: the inner dimensions (after the transposes) differ (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [2, 3])
        ...     y = fluid.data("y", [2, 3])
        ...     z = fluid.layers.matmul(x, y, transpose_y=True, alpha=0.5)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> exe.run(main, feed={"x": np.ones((2, 3), "float32"), "y": np.ones((2, 3), "float32")},
        ...         fetch_list=[z])[0]
        array([[1.5, 1.5],
               [1.5, 1.5]], dtype=float32)
    """
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
    """Sum over ``dim`` (int or list; None = every dim, giving shape [1]).

    Args:
        input (Variable): the input.
        dim (int | list of int | None): the axes to sum (negative counts from the end); None:
            all.
        keep_dim (bool, default False): keep the summed axes with size 1.
        name (str | None): name prefix of the output.
    Returns:
        Variable: the sums (shape ``[1]`` when every dim is summed without ``keep_dim``).

    Raises:
        TypeError: ``input`` is not a Variable of float16/float32/float64/int32/int64, ``dim``
            is not None, an int or a list of ints, or ``keep_dim`` is not a bool.
        ValueError: a dim is out of range for ``input``'s rank.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [2, 3])
        ...     rows = fluid.layers.reduce_sum(x, dim=1)
        ...     total = fluid.layers.reduce_sum(x)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> exe.run(main, feed={"x": np.arange(6, dtype="float32").reshape(2, 3)},
        ...         fetch_list=[rows, total])
        [array([ 3., 12.], dtype=float32), array([15.], dtype=float32)]
    """
    return _reduce("reduce_sum", input, dim, keep_dim, name)


def reduce_mean(input: Variable, dim: Any = None, keep_dim: bool = False,
                name: Optional[str] = None) -> Variable:
    """Mean over ``dim`` (int or list; None = every dim, giving shape [1]).

    Args:
        input (Variable): the input.
        dim (int | list of int | None): the axes to average; None: all.
        keep_dim (bool, default False): keep the averaged axes with size 1.
        name (str | None): name prefix of the output.
    Returns:
        Variable: the means.

    Raises:
        TypeError: ``input`` is not a Variable of float16/float32/float64/int32/int64, ``dim``
            is not None, an int or a list of ints, or ``keep_dim`` is not a bool.
        ValueError: a dim is out of range for ``input``'s rank.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [2, 3])
        ...     m = fluid.layers.reduce_mean(x, dim=0, keep_dim=True)
        >>> fluid.Executor(fluid.CPUPlace()).run(
        ...     main, feed={"x": np.arange(6, dtype="float32").reshape(2, 3)}, fetch_list=[m])[0]
        array([[1.5, 2.5, 3.5]], dtype=float32)
    """
    return _reduce("reduce_mean", input, dim, keep_dim, name)


def reduce_max(input: Variable, dim: Any = None, keep_dim: bool = False,
               name: Optional[str] = None) -> Variable:
    """Max over ``dim`` (int or list; None = every dim, giving shape [1]).

    Args:
        input (Variable): the input.
        dim (int | list of int | None): the axes reduced (negative counts from the end); None:
            all.
        keep_dim (bool, default False): keep the reduced axes with size 1.
        name (str | None): name prefix of the output.
    Returns:
        Variable: the maxima (shape ``[1]`` when every dim is reduced without ``keep_dim``).

    Raises:
        TypeError: ``input`` is not a Variable of float16/float32/float64/int32/int64, ``dim``
            is not None, an int or a list of ints, or ``keep_dim`` is not a bool.
        ValueError: a dim is out of range for ``input``'s rank.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [2, 3], "float32")
        ...     out = fluid.layers.reduce_max(x, dim=1)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.arange(6, dtype="float32").reshape(2, 3)}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res.round(4)
        array([2., 5.], dtype=float32)
    """
    return _reduce("reduce_max", input, dim, keep_dim, name)


def reduce_min(input: Variable, dim: Any = None, keep_dim: bool = False,
               name: Optional[str] = None) -> Variable:
    """Min over ``dim`` (int or list; None = every dim, giving shape [1]).

    Args:
        input (Variable): the input.
        dim (int | list of int | None): the axes reduced (negative counts from the end); None:
            all.
        keep_dim (bool, default False): keep the reduced axes with size 1.
        name (str | None): name prefix of the output.
    Returns:
        Variable: the minima (shape ``[1]`` when every dim is reduced without ``keep_dim``).

    Raises:
        TypeError: ``input`` is not a Variable of float16/float32/float64/int32/int64, ``dim``
            is not None, an int or a list of ints, or ``keep_dim`` is not a bool.
        ValueError: a dim is out of range for ``input``'s rank.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [2, 3], "float32")
        ...     out = fluid.layers.reduce_min(x, dim=0)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.arange(6, dtype="float32").reshape(2, 3)}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res.round(4)
        array([0., 1., 2.], dtype=float32)
    """
    return _reduce("reduce_min", input, dim, keep_dim, name)


def topk(input: Variable, k: Union[int, Variable],
         name: Optional[str] = None) -> Tuple[Variable, Variable]:
    """``(values, indices)`` of the k largest entries along the last dim (op ``top_k``).

    Args:
        input (Variable): the input.
        k (int | Variable): how many entries to keep along the last dim.
        name (str | None): name prefix of the outputs.
    Returns:
        tuple: ``(values, indices)``, the input's shape with the last dim ``k``; indices are
        int64.
    Raises:
        TypeError: ``input`` is not a float32/float64/int32/int64 Variable, or ``k`` is neither
            an int nor a Variable.
        ValueError: an int ``k`` is below 1.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 4])
        ...     values, indices = fluid.layers.topk(x, k=2)
        >>> fluid.Executor(fluid.CPUPlace()).run(
        ...     main, feed={"x": np.array([[1, 4, 2, 3]], "float32")}, fetch_list=[values, indices])
        [array([[4., 3.]], dtype=float32), array([[1, 3]])]
    """
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
    """One-hot float32 encoding of int ``input`` whose last dim is 1 (op ``one_hot``).

    Args:
        input (Variable): int ids with a last dim of 1.
        depth (int | Variable): the number of classes.
        allow_out_of_range (bool, default False): ids outside ``[0, depth)`` give all-zero rows
            instead of an error.
    Returns:
        Variable: float32, the ids' shape with the last dim 1 replaced by ``depth``.
    Raises:
        TypeError: ``input`` is not an int32/int64 Variable, or ``depth`` is neither an int nor a
            Variable.
        ValueError: an int ``depth`` is below 1; at run time, an id is outside [0, depth) while
            ``allow_out_of_range`` is False.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     ids = fluid.data("ids", [-1, 1], "int64")
        ...     oh = fluid.layers.one_hot(ids, depth=3)
        >>> fluid.Executor(fluid.CPUPlace()).run(main, feed={"ids": np.array([[2], [0]], "int64")},
        ...                                      fetch_list=[oh])[0]
        array([[0., 0., 1.],
               [1., 0., 0.]], dtype=float32)
    """
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
