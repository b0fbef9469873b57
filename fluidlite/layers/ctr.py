"""CTR layers of fluid 1.8 (``continuous_value_model``, ``filter_by_instag``) and the two
SelectedRows layers (``merge_selected_rows``, ``get_tensor_from_selected_rows``): on a sparse
embedding's SelectedRows gradient as fluid's, on a dense tensor copies (``ops/selected_rows.py``)."""
from __future__ import annotations

from typing import List, Optional

from ..core.dtypes import VarType
from ..core.ir import Variable
from ..pipeline.feeder import check_type, check_variable_and_dtype
from ..layer_helper import LayerHelper

__all__ = ["continuous_value_model", "filter_by_instag", "merge_selected_rows",
           "get_tensor_from_selected_rows"]

_FLOATS = ["float32", "float64"]
_INTS = ["int32", "int64"]


def continuous_value_model(input: Variable, cvm: Variable, use_cvm: bool = True) -> Variable:
    """The ``cvm`` op: ``input`` is [N, D] with the show and click counts in its first two
    columns (D = 2 + embedding size), ``cvm`` the [N, 2] show/click values. With ``use_cvm``
    the result is [N, D]: log(show + 1), log(click + 1) - log(show + 1), then the embedding;
    without, [N, D - 2]: the embedding alone. The result keeps ``input``'s LoD. Its gradient is
    fluid's: the embedding columns get the incoming gradient, the show/click columns get the
    rows of ``cvm`` (see ``ops/ctr.py``).

    Args:
        input (Variable): float32/float64 [N, D] (LoD kept), show and click in columns 0, 1.
        cvm (Variable): float32/float64 [N, 2] show/click values.
        use_cvm (bool, default True): keep the two (log-transformed) columns.
    Returns:
        Variable: [N, D] with ``use_cvm``, else [N, D - 2]; dtype of ``input``.
    Raises:
        TypeError: ``input`` or ``cvm`` is not a float32/float64 Variable, or ``use_cvm`` is not
            a bool.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 4])
        ...     cvm = fluid.data("cvm", [-1, 2])
        ...     out = fluid.layers.continuous_value_model(x, cvm, use_cvm=False)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> exe.run(main, feed={"x": np.arange(4, dtype="float32").reshape(1, 4),
        ...                     "cvm": np.ones((1, 2), "float32")}, fetch_list=[out])[0]
        array([[2., 3.]], dtype=float32)
    """
    check_variable_and_dtype(input, "input", _FLOATS, "cvm")
    check_variable_and_dtype(cvm, "cvm", _FLOATS, "cvm")
    check_type(use_cvm, "use_cvm", bool, "cvm")
    helper = LayerHelper("cvm", input=input)
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op(type="cvm", inputs={"X": [input], "CVM": [cvm]}, outputs={"Y": [out]},
                     attrs={"use_cvm": use_cvm})
    return out


def filter_by_instag(ins: Variable, ins_tag: Variable, filter_tag: Variable,
                     is_lod: bool) -> List[Variable]:
    """``[out, loss_weight]`` of the ``filter_by_instag`` op: the instances of ``ins`` (its rows,
    or with ``is_lod`` its sequences) one of whose tags (``ins_tag``: one tag list per instance,
    its sequences) is in ``filter_tag`` (int64 tags), concatenated in order; ``loss_weight`` is
    [k, 1] float32 ones, one per kept instance. When no instance is kept, ``out`` is one row of
    zeros and ``loss_weight`` ``[[0]]`` (a weighted loss is then 0). The op's third output, the
    row map, is an internal variable as in fluid.

    Args:
        ins (Variable): the instances, [N, ...] (a LoD tensor with ``is_lod``).
        ins_tag (Variable): int32/int64 LoD tensor, each instance's tag list.
        filter_tag (Variable): int32/int64 [M], the tags to keep.
        is_lod (bool): the instances are the sequences of ``ins`` (else its rows).
    Returns:
        list of Variable: ``[out, loss_weight]``: the kept instances (dtype of ``ins``) and
        float32 [k, 1] weights.
    Raises:
        TypeError: ``ins`` is not a Variable, ``ins_tag`` / ``filter_tag`` is not an int32/int64
            Variable, or ``is_lod`` is not a bool.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     ins = fluid.data("ins", [-1, 1], lod_level=1)
        ...     tag = fluid.data("tag", [-1, 1], "int64", lod_level=1)
        ...     keep = fluid.data("keep", [-1], "int64")
        ...     out, loss_weight = fluid.layers.filter_by_instag(ins, tag, keep, is_lod=True)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> place = fluid.CPUPlace()
        >>> feed = {"ins": fluid.create_lod_tensor(np.array([[1], [2], [3]], "float32"), [[1, 2]], place),
        ...         "tag": fluid.create_lod_tensor(np.array([[7], [8]], "int64"), [[1, 1]], place),
        ...         "keep": np.array([8], "int64")}
        >>> exe.run(main, feed=feed, fetch_list=[out])[0].ravel()       # the instance tagged 8
        array([2., 3.], dtype=float32)
    """
    check_type(ins, "ins", Variable, "filter_by_instag")
    check_variable_and_dtype(ins_tag, "ins_tag", _INTS, "filter_by_instag")
    check_variable_and_dtype(filter_tag, "filter_tag", _INTS, "filter_by_instag")
    check_type(is_lod, "is_lod", bool, "filter_by_instag")
    helper = LayerHelper("filter_by_instag", ins=ins)
    out = helper.create_variable_for_type_inference(ins.dtype)
    loss_weight = helper.create_variable_for_type_inference(VarType.FP32, stop_gradient=True)
    index_map = helper.create_variable_for_type_inference(VarType.INT64, stop_gradient=True)
    helper.append_op(type="filter_by_instag",
                     inputs={"Ins": ins, "Ins_tag": ins_tag, "Filter_tag": filter_tag},
                     outputs={"Out": out, "LossWeight": loss_weight, "IndexMap": index_map},
                     attrs={"is_lod": is_lod})
    return [out, loss_weight]


def _dense_copy(op_type: str, x: Variable, name: Optional[str]) -> Variable:
    check_type(x, "x", Variable, op_type)
    helper = LayerHelper(op_type, x=x, name=name)
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op(type=op_type, inputs={"X": x}, outputs={"Out": out}, attrs={})
    return out


def merge_selected_rows(x: Variable, name: Optional[str] = None) -> Variable:
    """Sum the duplicated rows of a SelectedRows ``x`` and sort its row indices (fluid's
    ``MergeAdd``).

    A SelectedRows is a sparse set of rows of a tall tensor, e.g. the gradient of
    ``embedding(is_sparse=True)``: ids ``[4, 1, 4]`` give rows ``[4, 1, 4]``, and merging sums
    the two rows of id 4. A dense ``x`` (where fluid fails) has no duplicated rows: the result
    is a copy of it. The op is differentiable as the identity.

    Args:
        x (Variable): a SELECTED_ROWS variable (rows ``[n]``, value ``[n, D...]``), or a dense
            tensor of any shape and dtype.
        name (str, optional): a name prefix for the output variable. Default None.

    Returns:
        Variable: a SELECTED_ROWS variable with unique, sorted rows (values of equal rows
        summed) when ``x`` is one, else a dense copy of ``x``; ``x``'s dtype.

    Raises:
        TypeError: ``x`` is not a Variable.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     ids = fluid.data("ids", [-1, 1], "int64")
        ...     emb = fluid.layers.embedding(ids, size=[10, 3], is_sparse=True,
        ...                                  param_attr=fluid.ParamAttr(name="table"))
        ...     _ = fluid.backward.append_backward(fluid.layers.reduce_sum(emb))
        ...     grad = main.global_block().var("table@GRAD")
        ...     merged = fluid.layers.merge_selected_rows(grad)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> g, m = exe.run(main, feed={"ids": np.array([[4], [1], [4]], "int64")},
        ...                fetch_list=[grad, merged])
        >>> g.rows, m.rows
        (array([4, 1, 4]), array([1, 4]))
        >>> m.value
        array([[1., 1., 1.],
               [2., 2., 2.]], dtype=float32)
    """
    return _dense_copy("merge_selected_rows", x, name)


def get_tensor_from_selected_rows(x: Variable, name: Optional[str] = None) -> Variable:
    """The value tensor of a SelectedRows ``x``: its rows' values, ``[len(rows), D...]``, as a
    dense tensor (the row indices and the height are dropped).

    fluid's gradient clipping inserts it (after ``merge_selected_rows``) to take the norm of a
    sparse gradient. A dense ``x`` (where fluid fails) is its own value: the result is a copy
    of it. The op is differentiable as the identity.

    Args:
        x (Variable): a SELECTED_ROWS variable (value ``[n, D...]``), or a dense tensor of any
            shape and dtype.
        name (str, optional): a name prefix for the output variable. Default None.

    Returns:
        Variable: a dense LOD_TENSOR of ``x``'s dtype: the value ``[n, D...]`` of a SelectedRows
        ``x``, else a copy of ``x``.

    Raises:
        TypeError: ``x`` is not a Variable.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     ids = fluid.data("ids", [-1, 1], "int64")
        ...     emb = fluid.layers.embedding(ids, size=[10, 3], is_sparse=True,
        ...                                  param_attr=fluid.ParamAttr(name="table"))
        ...     _ = fluid.backward.append_backward(fluid.layers.reduce_sum(emb))
        ...     grad = main.global_block().var("table@GRAD")
        ...     value = fluid.layers.get_tensor_from_selected_rows(
        ...         fluid.layers.merge_selected_rows(grad))
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> exe.run(main, feed={"ids": np.array([[4], [1], [4]], "int64")},
        ...         fetch_list=[value])[0]
        array([[1., 1., 1.],
               [2., 2., 2.]], dtype=float32)
    """
    return _dense_copy("get_tensor_from_selected_rows", x, name)
