"""``fluid.layers.sequence_*``: layers over variable-length (LoD) input.

Each builds one op of ``ops/sequence.py``; the op reads its input's LoD at run time, so the
input must be fed as a LoDTensor (``fluid.create_lod_tensor``) to a variable declared with
``lod_level >= 1``.
"""
from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple, Union

import numpy as np

from ..core.dtypes import VarType
from ..core.ir import Variable
from ..layer_helper import LayerHelper, check_int
from ..param_attr import ParamAttr

__all__ = ["sequence_pool", "sequence_first_step", "sequence_last_step", "sequence_softmax",
           "sequence_expand", "sequence_expand_as", "sequence_pad", "sequence_unpad",
           "sequence_reshape", "sequence_conv", "sequence_concat", "sequence_slice",
           "sequence_reverse", "sequence_enumerate", "sequence_scatter", "sequence_mask",
           "lod_reset", "lod_append", "row_conv", "ctc_greedy_decoder", "edit_distance",
           "chunk_eval", "im2sequence", "warpctc"]


def _var(x: Any, arg: str, layer: str) -> Variable:
    if not isinstance(x, Variable):
        raise TypeError(f"{layer}: {arg} must be a Variable, got {type(x).__name__}")
    return x


def _check_lengths(layer: str, input_length: Optional[Variable],
                   label_length: Optional[Variable]) -> None:
    """The padded form takes both ``input_length`` and ``label_length``, or neither."""
    if (input_length is None) != (label_length is None):
        raise ValueError(f"{layer}: input_length and label_length must be given together "
                         f"(got input_length={input_length is not None}, "
                         f"label_length={label_length is not None})")


def sequence_pool(input: Variable, pool_type: str, is_test: bool = False,
                  pad_value: float = 0.0) -> Variable:
    """Pool each sequence of ``input`` to one row: ``pool_type`` is sum, average, sqrt (sum /
    sqrt(len)), max, last or first; empty sequences give ``pad_value``.

    Args:
        input (Variable): a LoD tensor (``lod_level`` >= 1).
        pool_type (str): ``"sum"``, ``"average"``, ``"sqrt"``, ``"max"``, ``"first"`` or
            ``"last"``.
        is_test (bool, default False): accepted for fluid's signature.
        pad_value (float, default 0.0): the output row of an empty sequence.
    Returns:
        Variable: one row per sequence.
    Raises:
        TypeError: ``input`` is not a Variable.
        ValueError: ``pool_type`` is not one of the six names; at run time, ``input`` was fed
            without LoD.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 1], "float32", lod_level=1)
        ...     total = fluid.layers.sequence_pool(x, pool_type="sum")
        ...     last = fluid.layers.sequence_pool(x, pool_type="last")
        >>> t = fluid.create_lod_tensor(np.arange(5, dtype="float32").reshape(5, 1), [[2, 3]],
        ...                             fluid.CPUPlace())
        >>> fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": t}, fetch_list=[total, last])
        [array([[1.],
               [9.]], dtype=float32), array([[1.],
               [4.]], dtype=float32)]
    """
    _var(input, "input", "sequence_pool")
    if not isinstance(pool_type, str) or pool_type.upper() not in (
            "AVERAGE", "SUM", "SQRT", "MAX", "LAST", "FIRST"):
        raise ValueError(f"sequence_pool: pool_type must be one of sum, average, sqrt, max, "
                         f"last, first; got {pool_type!r}")
    helper = LayerHelper("sequence_pool", input=input)
    out = helper.create_variable_for_type_inference(input.dtype)
    max_index = helper.create_variable_for_type_inference(VarType.INT32, stop_gradient=True)
    helper.append_op(type="sequence_pool", inputs={"X": input},
                     outputs={"Out": out, "MaxIndex": max_index},
                     attrs={"pooltype": pool_type.upper(), "is_test": bool(is_test),
                            "pad_value": float(pad_value)})
    return out


def sequence_first_step(input: Variable) -> Variable:
    """The first row of each sequence (``sequence_pool(input, "first")``).

    Args:
        input (Variable): a LoD tensor.
    Returns:
        Variable: the first row of every sequence.
    Raises:
        TypeError: ``input`` is not a Variable.
        ValueError: at run time, ``input`` was fed without LoD.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 1], "float32", lod_level=1)
        ...     out = fluid.layers.sequence_first_step(x)
        >>> t = fluid.create_lod_tensor(np.array([[1], [2], [3], [4], [5]], "float32"), [[2, 3]],
        ...                             fluid.CPUPlace())
        >>> res, = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": t}, fetch_list=[out])
        >>> res.ravel().round(4)
        array([1., 3.], dtype=float32)
    """
    return sequence_pool(input, "first")


def sequence_last_step(input: Variable) -> Variable:
    """The last row of each sequence (``sequence_pool(input, "last")``).

    Args:
        input (Variable): a LoD tensor.
    Returns:
        Variable: the last row of every sequence.
    Raises:
        TypeError: ``input`` is not a Variable.
        ValueError: at run time, ``input`` was fed without LoD.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 1], "float32", lod_level=1)
        ...     out = fluid.layers.sequence_last_step(x)
        >>> t = fluid.create_lod_tensor(np.array([[1], [2], [3], [4], [5]], "float32"), [[2, 3]],
        ...                             fluid.CPUPlace())
        >>> res, = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": t}, fetch_list=[out])
        >>> res.ravel().round(4)
        array([2., 5.], dtype=float32)
    """
    return sequence_pool(input, "last")


def sequence_softmax(input: Variable, use_cudnn: bool = False,
                     name: Optional[str] = None) -> Variable:
    """Softmax over the rows of each sequence; ``input`` is [N, 1] or [N].

    Args:
        input (Variable): a LoD tensor ``[T, 1]`` of scores.
        use_cudnn (bool, default False): accepted for fluid's signature.
        name (str | None): name prefix of the output.
    Returns:
        Variable: the softmax within each sequence, same LoD.
    Raises:
        TypeError: ``input`` is not a Variable.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 1], "float32", lod_level=1)
        ...     out = fluid.layers.sequence_softmax(x)
        >>> t = fluid.create_lod_tensor(np.array([[1], [2], [3], [4], [5]], "float32"), [[2, 3]],
        ...                             fluid.CPUPlace())
        >>> res, = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": t}, fetch_list=[out])
        >>> res.ravel().round(4)
        array([0.2689, 0.7311, 0.09  , 0.2447, 0.6652], dtype=float32)
    """
    _var(input, "input", "sequence_softmax")
    helper = LayerHelper("sequence_softmax", input=input, name=name)
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op(type="sequence_softmax", inputs={"X": input}, outputs={"Out": out},
                     attrs={"use_cudnn": bool(use_cudnn)})
    return out


def sequence_expand(x: Variable, y: Variable, ref_level: int = -1,
                    name: Optional[str] = None) -> Variable:
    """Repeat each sequence of ``x`` (each row when x has no LoD) as many times as the length
    of the matching sequence of ``y``'s LoD level ``ref_level``.

    Args:
        x (Variable): the rows (or sequences) to repeat.
        y (Variable): a LoD tensor whose LoD at ``ref_level`` gives the repeat counts.
        ref_level (int, default -1): the LoD level of ``y`` used (-1: the last).
        name (str | None): name prefix of the output.
    Returns:
        Variable: ``x``'s rows repeated as ``y``'s sequences are long.
    Raises:
        TypeError: ``x`` or ``y`` is not a Variable, or ``ref_level`` is not an int.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 1], "float32", lod_level=1)
        ...     out = fluid.layers.sequence_expand(x, x)
        >>> t = fluid.create_lod_tensor(np.array([[1], [2], [3], [4], [5]], "float32"), [[2, 3]],
        ...                             fluid.CPUPlace())
        >>> res, = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": t}, fetch_list=[out])
        >>> res.ravel().round(4)
        array([1., 2., 1., 2., 3., 4., 5., 3., 4., 5., 3., 4., 5.], dtype=float32)
    """
    _var(x, "x", "sequence_expand")
    _var(y, "y", "sequence_expand")
    helper = LayerHelper("sequence_expand", input=x, name=name)
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op(type="sequence_expand", inputs={"X": x, "Y": y}, outputs={"Out": out},
                     attrs={"ref_level": check_int(ref_level, "ref_level", "sequence_expand")})
    return out


def sequence_expand_as(x: Variable, y: Variable, name: Optional[str] = None) -> Variable:
    """Repeat row i of ``x`` as many times as the length of ``y``'s i-th sequence.

    Args:
        x (Variable): one row per sequence of ``y``.
        y (Variable): a LoD tensor.
        name (str | None): name prefix of the output.
    Returns:
        Variable: row ``i`` of ``x`` repeated as long as sequence ``i`` of ``y``.
    Raises:
        TypeError: ``x`` or ``y`` is not a Variable.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [2, 1])
        ...     y = fluid.data("y", [-1, 1], lod_level=1)
        ...     out = fluid.layers.sequence_expand_as(x, y)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> place = fluid.CPUPlace()
        >>> seq = fluid.create_lod_tensor(np.arange(5, dtype="float32").reshape(5, 1), [[2, 3]], place)
        >>> exe.run(main, feed={"x": np.array([[7], [8]], "float32"), "y": seq},
        ...         fetch_list=[out])[0].ravel()
        array([7., 7., 8., 8., 8.], dtype=float32)
    """
    _var(x, "x", "sequence_expand_as")
    _var(y, "y", "sequence_expand_as")
    helper = LayerHelper("sequence_expand_as", input=x, name=name)
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op(type="sequence_expand_as", inputs={"X": x, "Y": y}, outputs={"Out": out})
    return out


def sequence_pad(x: Variable, pad_value: Variable, maxlen: Optional[int] = None,
                 name: Optional[str] = None) -> Tuple[Variable, Variable]:
    """Pad the sequences of ``x`` to one length (``maxlen``, default the longest): returns
    ``(out [num_seqs, maxlen, ...], length [num_seqs] int64)``.

    Args:
        x (Variable): a LoD tensor.
        pad_value (Variable): a one-element tensor (or one row) to pad with.
        maxlen (int | None): the padded length (default: the longest sequence).
        name (str | None): name prefix of the output.
    Returns:
        tuple: ``(padded [N, maxlen, ...], length [N] int64)``.
    Raises:
        TypeError: ``x`` or ``pad_value`` is not a Variable, or ``maxlen`` is not an int.
        ValueError: ``maxlen`` is below 1.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 1], lod_level=1)
        ...     pad = fluid.layers.fill_constant([1], "float32", -1.0)
        ...     padded, length = fluid.layers.sequence_pad(x, pad)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> place = fluid.CPUPlace()
        >>> seq = fluid.create_lod_tensor(np.arange(5, dtype="float32").reshape(5, 1), [[2, 3]], place)
        >>> out, lens = exe.run(main, feed={"x": seq}, fetch_list=[padded, length])
        >>> out[:, :, 0], lens
        (array([[ 0.,  1., -1.],
               [ 2.,  3.,  4.]], dtype=float32), array([2, 3]))
    """
    _var(x, "x", "sequence_pad")
    _var(pad_value, "pad_value", "sequence_pad")
    padded = -1 if maxlen is None else check_int(maxlen, "maxlen", "sequence_pad", minimum=1)
    helper = LayerHelper("sequence_pad", input=x, name=name)
    out = helper.create_variable_for_type_inference(x.dtype)
    length = helper.create_variable_for_type_inference(VarType.INT64, stop_gradient=True)
    pad_value.stop_gradient = True
    helper.append_op(type="sequence_pad", inputs={"X": x, "PadValue": pad_value},
                     outputs={"Out": out, "Length": length}, attrs={"padded_length": padded})
    return out, length


def sequence_unpad(x: Variable, length: Variable, name: Optional[str] = None) -> Variable:
    """The inverse of ``sequence_pad``: the first ``length[i]`` rows of each ``x[i]``, as one
    LoD tensor.

    Args:
        x (Variable): a padded tensor ``[N, maxlen, ...]``.
        length (Variable): int64 ``[N]`` real lengths.
        name (str | None): name prefix of the output.
    Returns:
        Variable: a LoD tensor of the unpadded rows.
    Raises:
        TypeError: ``x`` or ``length`` is not a Variable.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [2, 3])
        ...     length = fluid.data("length", [2], "int64")
        ...     out = fluid.layers.sequence_unpad(x, length)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> res, = exe.run(main, feed={"x": np.arange(6, dtype="float32").reshape(2, 3),
        ...                            "length": np.array([2, 3], "int64")}, fetch_list=[out],
        ...               return_numpy=False)
        >>> np.array(res).ravel(), res.recursive_sequence_lengths()
        (array([0., 1., 3., 4., 5.], dtype=float32), [[2, 3]])
    """
    _var(x, "x", "sequence_unpad")
    _var(length, "length", "sequence_unpad")
    helper = LayerHelper("sequence_unpad", input=x, name=name)
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op(type="sequence_unpad", inputs={"X": x, "Length": length},
                     outputs={"Out": out})
    return out


def sequence_reshape(input: Variable, new_dim: int) -> Variable:
    """Re-cut each sequence of a [N, D] LoD tensor into rows of width ``new_dim``.

    Args:
        input (Variable): a LoD tensor ``[T, D]``.
        new_dim (int): the new row width (each sequence's ``len * D`` divisible by it).
    Returns:
        Variable: the rows regrouped to width ``new_dim``, LoD scaled accordingly.
    Raises:
        TypeError: ``input`` is not a Variable, or ``new_dim`` is not an int.
        ValueError: ``new_dim`` is below 1.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 2], lod_level=1)
        ...     out = fluid.layers.sequence_reshape(x, new_dim=4)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> t = fluid.create_lod_tensor(np.arange(8, dtype="float32").reshape(4, 2), [[2, 2]],
        ...                             fluid.CPUPlace())
        >>> res, = exe.run(main, feed={"x": t}, fetch_list=[out], return_numpy=False)
        >>> np.array(res).shape, res.recursive_sequence_lengths()
        ((2, 4), [[1, 1]])
    """
    _var(input, "input", "sequence_reshape")
    new_dim = check_int(new_dim, "new_dim", "sequence_reshape", minimum=1)
    helper = LayerHelper("sequence_reshape", input=input)
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op(type="sequence_reshape", inputs={"X": input}, outputs={"Out": out},
                     attrs={"new_dim": new_dim})
    return out


def sequence_conv(input: Variable, num_filters: int, filter_size: int = 3,
                  filter_stride: int = 1, padding: bool = True,
                  padding_start: Optional[int] = None, bias_attr: Any = None,
                  param_attr: Any = None, act: Any = None,
                  name: Optional[str] = None, padding_trainable: bool = False) -> Variable:
    """Convolution along each sequence: context window ``filter_size`` starting at
    ``padding_start`` (default ``-(filter_size // 2)``, centred), rows outside a sequence read
    zeros; then bias and ``act``. ``padding_trainable=True`` (the op's ``paddingTrainable``;
    fluid 1.8's layer does not expose it) makes them read a learned ``[up_pad + down_pad, D]``
    parameter instead (``up_pad = max(0, -padding_start)``, ``down_pad = max(0,
    padding_start + filter_size - 1)``), created with ``param_attr``'s initializer.

    Args:
        input (Variable): a LoD tensor ``[T, D]``.
        num_filters (int): output width.
        filter_size (int, default 3): context window (rows).
        filter_stride (int, default 1): must be 1 (as in fluid).
        padding (bool, default True): accepted; windows are zero-padded at sequence ends.
        padding_start (int | None): the window's first row relative to the current one
            (default ``-(filter_size // 2)``).
        bias_attr (ParamAttr | bool | None): the bias's attribute.
        param_attr (ParamAttr | None): the filter ``[filter_size * D, num_filters]``.
        act (str | None): activation applied to the result.
        name (str | None): name prefix of the output.
        padding_trainable (bool, default False): learn the padding rows.
    Returns:
        Variable: LoD tensor ``[T, num_filters]``.
    Raises:
        TypeError: ``input`` is not a Variable, or ``num_filters`` / ``filter_size`` is not an int.
        ValueError: ``num_filters`` or ``filter_size`` is below 1, ``filter_stride`` is not 1, or
            ``input`` is not 2-D with a known last dimension.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 4], lod_level=1)
        ...     out = fluid.layers.sequence_conv(x, num_filters=6, filter_size=3)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> t = fluid.create_lod_tensor(np.ones((5, 4), "float32"), [[2, 3]], fluid.CPUPlace())
        >>> exe.run(main, feed={"x": t}, fetch_list=[out])[0].shape
        (5, 6)
    """
    _var(input, "input", "sequence_conv")
    num_filters = check_int(num_filters, "num_filters", "sequence_conv", minimum=1)
    filter_size = check_int(filter_size, "filter_size", "sequence_conv", minimum=1)
    if filter_stride != 1:
        raise ValueError("sequence_conv: filter_stride must be 1 (as in fluid)")
    if len(input.shape) != 2 or input.shape[1] < 0:
        raise ValueError(f"sequence_conv: input must be [N, D] with a known D, got "
                         f"{list(input.shape)}")
    start = -(filter_size // 2) if padding_start is None else int(padding_start)
    helper = LayerHelper("sequence_conv", input=input, param_attr=param_attr,
                         bias_attr=bias_attr, act=act, name=name)
    dtype = helper.input_dtype()
    w = helper.create_parameter(attr=helper.param_attr,
                                shape=[filter_size * input.shape[1], num_filters], dtype=dtype)
    pre_bias = helper.create_variable_for_type_inference(dtype)
    inputs = {"X": input, "Filter": w}
    pad_rows = max(0, -start) + max(0, start + filter_size - 1)
    trainable = bool(padding_trainable) and pad_rows > 0     # no row is ever padded otherwise
    if trainable:
        pad_attr = ParamAttr(initializer=getattr(helper.param_attr, "initializer", None))
        inputs["PaddingData"] = helper.create_parameter(
            attr=pad_attr, shape=[pad_rows, input.shape[1]], dtype=dtype)
    helper.append_op(type="sequence_conv", inputs=inputs,
                     outputs={"Out": pre_bias},
                     attrs={"contextStride": 1, "contextStart": start,
                            "contextLength": filter_size, "paddingTrainable": trainable})
    return helper.append_activation(helper.append_bias_op(pre_bias))



def _simple(op: str, like: Variable, inputs: dict, out_slot: str = "Out",
            attrs: Optional[dict] = None, name: Optional[str] = None) -> Variable:
    """One ``op`` writing one new variable of ``like``'s dtype."""
    helper = LayerHelper(op, name=name)
    out = helper.create_variable_for_type_inference(like.dtype)
    helper.append_op(type=op, inputs={k: v for k, v in inputs.items() if v is not None},
                     outputs={out_slot: out}, attrs=attrs or {})
    return out


def sequence_concat(input: List[Variable], name: Optional[str] = None) -> Variable:
    """Concatenate the i-th sequences of every input into the i-th output sequence.

    Args:
        input (list of Variable): LoD tensors with the same number of sequences.
        name (str | None): name prefix of the output.
    Returns:
        Variable: the i-th sequences concatenated, for every i.
    Raises:
        TypeError: ``input`` is not a non-empty list/tuple, or one of its items is not a Variable.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     a = fluid.data("a", [-1, 1], lod_level=1)
        ...     b = fluid.data("b", [-1, 1], lod_level=1)
        ...     out = fluid.layers.sequence_concat([a, b])
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> place = fluid.CPUPlace()
        >>> seq = fluid.create_lod_tensor(np.arange(5, dtype="float32").reshape(5, 1), [[2, 3]], place)
        >>> b = fluid.create_lod_tensor(np.array([[10], [20]], "float32"), [[1, 1]], place)
        >>> exe.run(main, feed={"a": seq, "b": b}, fetch_list=[out])[0].ravel()
        array([ 0.,  1., 10.,  2.,  3.,  4., 20.], dtype=float32)
    """
    if not isinstance(input, (list, tuple)) or not input:
        raise TypeError("sequence_concat: input must be a non-empty list of Variables")
    for i, v in enumerate(input):
        _var(v, f"input[{i}]", "sequence_concat")
    return _simple("sequence_concat", input[0], {"X": list(input)}, name=name)


def sequence_slice(input: Variable, offset: Variable, length: Variable,
                   name: Optional[str] = None) -> Variable:
    """Rows ``[offset[i], offset[i] + length[i])`` of each sequence i (offset, length: int64
    tensors with one entry per sequence).

    Args:
        input (Variable): a LoD tensor.
        offset (Variable): int64 ``[N, 1]`` start of the slice in each sequence.
        length (Variable): int64 ``[N, 1]`` length of each slice.
        name (str | None): name prefix of the output.
    Returns:
        Variable: a LoD tensor of the slices.
    Raises:
        TypeError: ``input``, ``offset`` or ``length`` is not a Variable.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 1], lod_level=1)
        ...     offset = fluid.data("offset", [2, 1], "int64")
        ...     length = fluid.data("length", [2, 1], "int64")
        ...     out = fluid.layers.sequence_slice(x, offset, length)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> place = fluid.CPUPlace()
        >>> seq = fluid.create_lod_tensor(np.arange(5, dtype="float32").reshape(5, 1), [[2, 3]], place)
        >>> feed = {"x": seq, "offset": np.array([[1], [0]], "int64"),
        ...         "length": np.array([[1], [2]], "int64")}
        >>> exe.run(main, feed=feed, fetch_list=[out])[0].ravel()
        array([1., 2., 3.], dtype=float32)
    """
    for arg, v in (("input", input), ("offset", offset), ("length", length)):
        _var(v, arg, "sequence_slice")
    offset.stop_gradient = length.stop_gradient = True
    return _simple("sequence_slice", input, {"X": input, "Offset": offset, "Length": length},
                   name=name)


def sequence_reverse(x: Variable, name: Optional[str] = None) -> Variable:
    """Reverse the rows of each sequence.

    Args:
        x (Variable): a LoD tensor.
        name (str | None): name prefix of the output.
    Returns:
        Variable: every sequence reversed, same LoD.
    Raises:
        TypeError: ``x`` is not a Variable.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 1], "float32", lod_level=1)
        ...     out = fluid.layers.sequence_reverse(x)
        >>> t = fluid.create_lod_tensor(np.array([[1], [2], [3], [4], [5]], "float32"), [[2, 3]],
        ...                             fluid.CPUPlace())
        >>> res, = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": t}, fetch_list=[out])
        >>> res.ravel().round(4)
        array([2., 1., 5., 4., 3.], dtype=float32)
    """
    _var(x, "x", "sequence_reverse")
    return _simple("sequence_reverse", x, {"X": x}, out_slot="Y", name=name)


def sequence_enumerate(input: Variable, win_size: int, pad_value: int = 0,
                       name: Optional[str] = None) -> Variable:
    """Each id with the ``win_size - 1`` ids after it in its sequence (``pad_value`` past the
    end): [N, 1] -> [N, win_size].

    Args:
        input (Variable): int64 LoD ids ``[T, 1]``.
        win_size (int): the window length.
        pad_value (int, default 0): fills windows past a sequence's end.
        name (str | None): name prefix of the output.
    Returns:
        Variable: ``[T, win_size]``, each id followed by the next ones of its sequence.
    Raises:
        TypeError: ``input`` is not a Variable, or ``win_size`` / ``pad_value`` is not an int.
        ValueError: ``win_size`` is below 1.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 1], "int64", lod_level=1)
        ...     out = fluid.layers.sequence_enumerate(x, win_size=2, pad_value=0)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> t = fluid.create_lod_tensor(np.array([[1], [2], [3]], "int64"), [[3]], fluid.CPUPlace())
        >>> exe.run(main, feed={"x": t}, fetch_list=[out])[0]
        array([[1, 2],
               [2, 3],
               [3, 0]])
    """
    _var(input, "input", "sequence_enumerate")
    win_size = check_int(win_size, "win_size", "sequence_enumerate", minimum=1)
    return _simple("sequence_enumerate", input, {"X": input},
                   attrs={"win_size": win_size, "pad_value": check_int(
                       pad_value, "pad_value", "sequence_enumerate")}, name=name)


def sequence_scatter(input: Variable, index: Variable, updates: Variable,
                     name: Optional[str] = None) -> Variable:
    """``input`` with ``updates`` added at the columns ``index`` (one sequence of ids per row
    of ``input``).

    Args:
        input (Variable): ``[N, D]``.
        index (Variable): int64 LoD column indices, one sequence per row of ``input``.
        updates (Variable): LoD values, same LoD as ``index``.
        name (str | None): name prefix of the output.
    Returns:
        Variable: ``input`` with ``updates`` added at ``(row, index)``.
    Raises:
        TypeError: ``input``, ``index`` or ``updates`` is not a Variable.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [2, 4])
        ...     ids = fluid.data("ids", [-1, 1], "int64", lod_level=1)
        ...     upd = fluid.data("upd", [-1, 1], lod_level=1)
        ...     out = fluid.layers.sequence_scatter(x, ids, upd)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> place = fluid.CPUPlace()
        >>> feed = {"x": np.zeros((2, 4), "float32"),
        ...         "ids": fluid.create_lod_tensor(np.array([[0], [3], [1]], "int64"), [[2, 1]], place),
        ...         "upd": fluid.create_lod_tensor(np.array([[1], [2], [3]], "float32"), [[2, 1]], place)}
        >>> exe.run(main, feed=feed, fetch_list=[out])[0]
        array([[1., 0., 0., 2.],
               [0., 3., 0., 0.]], dtype=float32)
    """
    for arg, v in (("input", input), ("index", index), ("updates", updates)):
        _var(v, arg, "sequence_scatter")
    return _simple("sequence_scatter", input, {"X": input, "Ids": index, "Updates": updates},
                   name=name)


def sequence_mask(x: Variable, maxlen: Optional[Union[int, Variable]] = None,
                  dtype: Any = "int64", name: Optional[str] = None) -> Variable:
    """``mask[..., j] = j < x[...]`` for ``j < maxlen`` (default: the largest length).
    ``maxlen`` may be a Variable (an int [1] tensor, read when the program runs, as fluid 1.8's
    ``MaxLenTensor``), e.g. the padded length of a batch in the machine translation chapter.

    Args:
        x (Variable): int lengths.
        maxlen (int | Variable | None): the mask's last dim (default: the largest length).
        dtype (str, default "int64"): the mask's dtype.
        name (str | None): name prefix of the output.
    Returns:
        Variable: ``x``'s shape + ``[maxlen]``; 1 where the position is below the length.
    Raises:
        TypeError: ``x`` is not a Variable, or ``maxlen`` is neither None, an int nor a Variable.
        ValueError: an int ``maxlen`` is below 1.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     lens = fluid.data("lens", [-1], "int64")
        ...     out = fluid.layers.sequence_mask(lens, maxlen=4, dtype="int64")
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> res, = exe.run(main, feed={"lens": np.array([1, 3], "int64")}, fetch_list=[out])
        >>> res
        array([[1, 0, 0, 0],
               [1, 1, 1, 0]])
    """
    _var(x, "x", "sequence_mask")
    inputs = {"X": x}
    if isinstance(maxlen, Variable):
        inputs["MaxLenTensor"] = maxlen
        n = -1
    else:
        n = -1 if maxlen is None else check_int(maxlen, "maxlen", "sequence_mask", minimum=1)
    helper = LayerHelper("sequence_mask", name=name)
    out = helper.create_variable_for_type_inference(dtype, stop_gradient=True)
    helper.append_op(type="sequence_mask", inputs=inputs, outputs={"Y": out},
                     attrs={"maxlen": n, "out_dtype": out.dtype})
    return out


def lod_reset(x: Variable, y: Optional[Variable] = None,
              target_lod: Optional[Sequence[int]] = None) -> Variable:
    """``x`` with a new one-level LoD: ``y``'s LoD (or ``y``'s values as offsets) or the
    offsets ``target_lod``.

    Args:
        x (Variable): the input.
        y (Variable | None): take its LoD (or, for a non-LoD tensor, its values as offsets).
        target_lod (list of int | None): the new level-0 offsets.
    Returns:
        Variable: ``x``'s data with the new LoD.
    Raises:
        TypeError: ``x`` is not a Variable.
        ValueError: neither ``y`` nor ``target_lod`` is given.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 1])
        ...     out = fluid.layers.lod_reset(x, target_lod=[0, 1, 3])
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> res, = exe.run(main, feed={"x": np.ones((3, 1), "float32")}, fetch_list=[out],
        ...               return_numpy=False)
        >>> res.lod()
        [[0, 1, 3]]
    """
    _lod_x(x, "lod_reset")
    if y is None and target_lod is None:
        raise ValueError("lod_reset: give y or target_lod")
    attrs = {"target_lod": [int(v) for v in target_lod]} if target_lod is not None else {}
    return _simple("lod_reset", x, {"X": x, "Y": y}, attrs=attrs)


def _lod_x(x: Any, layer: str) -> None:
    # fluid 1.8's lod_reset / lod_append take float32, float64, int32 and int64 data
    _var(x, "x", layer)
    if x.dtype not in (VarType.FP32, VarType.FP64, VarType.INT32, VarType.INT64):
        raise TypeError(f"The data type of 'x' in {layer} must be ['float32', 'float64', "
                        f"'int32', 'int64'], but received {x.dtype}")


def lod_append(x: Variable, level: Union[Sequence[int], Variable]) -> Variable:
    """``x`` with one more LoD level (offsets ``level``, or a Variable holding them) below its
    own.

    Args:
        x (Variable): the input tensor (any dtype); its data is passed through unchanged.
        level (list of int | Variable): the offsets of the new innermost LoD level (starting at 0,
            ending at ``x``'s row count), or a Variable holding them (its LoD, or its values for a
            non-LoD tensor, are used as in ``lod_reset``).
    Returns:
        Variable: ``x``'s data with the LoD extended by one level, dtype of ``x``.
    Raises:
        TypeError: ``x`` is not a float32/float64/int32/int64 Variable.
        ValueError: ``level`` is neither a Variable nor a list/tuple of ints (fluid 1.8's
            error).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 1])
        ...     out = fluid.layers.lod_append(x, [0, 1, 3])
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> res, = exe.run(main, feed={"x": np.ones((3, 1), "float32")}, fetch_list=[out],
        ...               return_numpy=False)
        >>> res.recursive_sequence_lengths()
        [[1, 2]]
    """
    _lod_x(x, "lod_append")
    if not isinstance(level, (Variable, list, tuple, np.ndarray)):     # fluid 1.8's ValueError
        raise ValueError(f"lod_append: Input(level) must be list, tuple or Variable, but "
                         f"received {type(level).__name__}")
    if isinstance(level, Variable):
        return _simple("lod_reset", x, {"X": x, "Y": level}, attrs={"append": True})
    return _simple("lod_reset", x, {"X": x}, attrs={"append": True,
                                                 "target_lod": [int(v) for v in level]})


def row_conv(input: Variable, future_context_size: int, param_attr: Any = None,
             act: Any = None) -> Variable:
    """Lookahead convolution: each row mixes itself and the next ``future_context_size`` rows
    of its sequence with a ``[future_context_size + 1, D]`` parameter, then ``act``.

    Args:
        input (Variable): a LoD tensor ``[T, D]``.
        future_context_size (int): how many following rows each output sees.
        param_attr (ParamAttr | None): the filter ``[future_context_size + 1, D]``.
        act (str | None): activation applied to the result.
    Returns:
        Variable: ``out[t] = sum_k w[k] * x[t + k]`` within each sequence.
    Raises:
        TypeError: ``input`` is not a Variable, or ``future_context_size`` is not an int.
        ValueError: ``future_context_size`` is negative.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 2], lod_level=1)
        ...     out = fluid.layers.row_conv(x, future_context_size=1,
        ...                                 param_attr=fluid.ParamAttr(initializer=fluid.initializer.Constant(1.0)))
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> t = fluid.create_lod_tensor(np.array([[1, 1], [2, 2], [3, 3]], "float32"), [[3]], fluid.CPUPlace())
        >>> exe.run(main, feed={"x": t}, fetch_list=[out])[0]      # x[t] + x[t + 1]
        array([[3., 3.],
               [5., 5.],
               [3., 3.]], dtype=float32)
    """
    _var(input, "input", "row_conv")
    k = check_int(future_context_size, "future_context_size", "row_conv", minimum=0)
    helper = LayerHelper("row_conv", input=input, param_attr=param_attr, act=act)
    dtype = helper.input_dtype()
    w = helper.create_parameter(attr=helper.param_attr, shape=[k + 1, input.shape[-1]],
                                dtype=dtype)
    out = helper.create_variable_for_type_inference(dtype)
    helper.append_op(type="row_conv", inputs={"X": input, "Filter": w}, outputs={"Out": out})
    return helper.append_activation(out)


def _length_var(v: Any, arg: str, layer: str) -> Variable:
    """A padded form's length argument: an int64 Variable [batch] (or [batch, 1])."""
    if not isinstance(v, Variable):
        raise TypeError(f"{layer}: {arg} must be a Variable (int64 [batch_size]), got "
                        f"{type(v).__name__}")
    if v.dtype != VarType.INT64:
        raise TypeError(f"{layer}: {arg} must be int64, got {v.dtype}")
    v.stop_gradient = True
    return v


def ctc_greedy_decoder(input: Variable, blank: int, input_length: Optional[Variable] = None,
                       padding_value: int = 0, name: Optional[str] = None) -> Any:
    """Best path decoding of per-step class probabilities ``input`` ([N, num_classes + 1],
    LoD): the most likely class per step, repeats merged, ``blank`` removed. Padded form
    (fluid 1.8): with ``input_length`` (int64 [B] or [B, 1]) ``input`` is [B, L, C] and the
    result is ``(output [B, L] int64 padded with padding_value, output_length [B, 1])``.

    Args:
        input (Variable): probabilities ``[T, num_classes]`` (LoD) or padded with
            ``input_length``.
        blank (int): the blank class.
        input_length (Variable | None): lengths for padded input.
        padding_value (int, default 0): fills padded outputs.
        name (str | None): name prefix of the output.
    Returns:
        Variable | tuple: the decoded ids (LoD); with ``input_length``, ``(output,
        output_length)``.
    Raises:
        TypeError: ``input`` is not a Variable, ``blank`` / ``padding_value`` is not an int, or
            ``input_length`` is not an int64 Variable.
        ValueError: ``input_length`` is given but ``input`` is not 3-D.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     probs = fluid.data("probs", [-1, 3], lod_level=1)        # blank = 2
        ...     out = fluid.layers.ctc_greedy_decoder(probs, blank=2)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> p = np.array([[0.9, 0.05, 0.05], [0.9, 0.05, 0.05], [0.1, 0.1, 0.8], [0.1, 0.8, 0.1]], "float32")
        >>> t = fluid.create_lod_tensor(p, [[4]], fluid.CPUPlace())
        >>> exe.run(main, feed={"probs": t}, fetch_list=[out])[0].ravel()     # 0 0 _ 1 -> 0 1
        array([0, 1])
    """
    from . import tensor                             # sibling layer module, at call time
    _var(input, "input", "ctc_greedy_decoder")
    blank = check_int(blank, "blank", "ctc_greedy_decoder")
    helper = LayerHelper("ctc_greedy_decoder", name=name)
    out = helper.create_variable_for_type_inference(VarType.INT64, stop_gradient=True)
    if input_length is not None:
        _length_var(input_length, "input_length", "ctc_greedy_decoder")
        if len(input.shape) != 3:
            raise ValueError(f"ctc_greedy_decoder: with input_length, input must be padded "
                             f"[batch, max_len, num_classes + 1], got {list(input.shape)}")
        ids = tensor.argmax(input, axis=2)                            # [B, L]
        out_len = helper.create_variable_for_type_inference(VarType.INT64, stop_gradient=True)
        helper.append_op(type="ctc_align", inputs={"Input": ids, "InputLength": input_length},
                         outputs={"Output": out, "OutputLength": out_len},
                         attrs={"blank": blank, "merge_repeated": True,
                                "padding_value": check_int(padding_value, "padding_value",
                                                           "ctc_greedy_decoder")})
        return out, out_len
    ids = tensor.unsqueeze(tensor.argmax(input, axis=1), [1])     # [N, 1], keeps the LoD
    helper.append_op(type="ctc_align", inputs={"Input": ids}, outputs={"Output": out},
                     attrs={"blank": blank, "merge_repeated": True})
    return out


def edit_distance(input: Variable, label: Variable, normalized: bool = True,
                  ignored_tokens: Optional[Sequence[int]] = None,
                  input_length: Optional[Variable] = None,
                  label_length: Optional[Variable] = None) -> Tuple[Variable, Variable]:
    """Levenshtein distance of each (hypothesis, reference) sequence pair: returns
    ``(distance [num_seqs, 1], sequence_num [1])``; ``ignored_tokens`` are erased from both
    first (fluid's sequence_erase, LoD input only). Padded form (fluid 1.8): with
    ``input_length`` and ``label_length`` (int64 [B]), ``input`` / ``label`` are [B, max_len]
    id tensors of which only the first length ids count.

    Args:
        input (Variable): int64 hypotheses (LoD, or padded with ``input_length``).
        label (Variable): int64 references (LoD, or padded with ``label_length``).
        normalized (bool, default True): divide by the reference length.
        ignored_tokens (list of int | None): tokens removed before comparing.
        input_length (Variable | None): lengths of padded hypotheses.
        label_length (Variable | None): lengths of padded references.
    Returns:
        tuple: ``(distance [N, 1] float32, sequence_num [1] int64)``.
    Raises:
        TypeError: ``input`` or ``label`` is not a Variable, an ``ignored_tokens`` item is not an
            int, or ``input_length`` / ``label_length`` is not an int64 Variable.
        ValueError: only one of ``input_length`` and ``label_length`` is given, or
            ``ignored_tokens`` is combined with the padded (length) form.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     hyp = fluid.data("hyp", [-1, 1], "int64", lod_level=1)
        ...     ref = fluid.data("ref", [-1, 1], "int64", lod_level=1)
        ...     dist, seq_num = fluid.layers.edit_distance(hyp, ref, normalized=False)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> place = fluid.CPUPlace()
        >>> h = fluid.create_lod_tensor(np.array([[1], [2], [3]], "int64"), [[3]], place)
        >>> r = fluid.create_lod_tensor(np.array([[1], [3]], "int64"), [[2]], place)
        >>> exe.run(main, feed={"hyp": h, "ref": r}, fetch_list=[dist, seq_num])
        [array([[1.]], dtype=float32), array([1])]
    """
    _var(input, "input", "edit_distance")
    _var(label, "label", "edit_distance")
    _check_lengths("edit_distance", input_length, label_length)
    if ignored_tokens:
        if input_length is not None:
            raise ValueError("edit_distance: ignored_tokens works on LoD input only (fluid's "
                             "sequence_erase); with input_length/label_length remove the "
                             "tokens from the padded rows before the call")
        tokens = [check_int(t, "ignored_tokens[i]", "edit_distance") for t in ignored_tokens]
        input = _simple("sequence_erase", input, {"X": input}, attrs={"tokens": tokens})
        label = _simple("sequence_erase", label, {"X": label}, attrs={"tokens": tokens})
    inputs = {"Hyps": input, "Refs": label}
    if input_length is not None:
        inputs["HypsLength"] = _length_var(input_length, "input_length", "edit_distance")
        inputs["RefsLength"] = _length_var(label_length, "label_length", "edit_distance")
    helper = LayerHelper("edit_distance")
    dist = helper.create_variable_for_type_inference(VarType.FP32, stop_gradient=True)
    num = helper.create_variable_for_type_inference(VarType.INT64, stop_gradient=True)
    helper.append_op(type="edit_distance", inputs=inputs,
                     outputs={"Out": dist, "SequenceNum": num},
                     attrs={"normalized": bool(normalized)})
    return dist, num


def chunk_eval(input: Variable, label: Variable, chunk_scheme: str, num_chunk_types: int,
               excluded_chunk_types: Optional[Sequence[int]] = None,
               seq_length: Optional[Variable] = None) -> Tuple[Variable, ...]:
    """Chunk precision, recall, F1 and the three chunk counts of tagged LoD sequences
    (``chunk_scheme``: IOB, IOE, IOBES or plain). Padded form (fluid 1.8): with ``seq_length``
    (int64 [B]), ``input`` and ``label`` are [B, max_len] tags.

    Args:
        input (Variable): int64 predicted tag ids, a LoD tensor [N, 1] (or padded
            [B, max_len] with ``seq_length``), encoded as in fluid's chunk_eval.
        label (Variable): int64 gold tags, the same layout as ``input``.
        chunk_scheme (str): ``"IOB"``, ``"IOE"``, ``"IOBES"`` or ``"plain"``.
        num_chunk_types (int): the number of chunk types (>= 1).
        excluded_chunk_types (list of int | None, default None): chunk types not counted.
        seq_length (Variable | None, default None): int64 [B] lengths for the padded form.
    Returns:
        tuple of Variable: ``(precision, recall, f1_score, num_infer_chunks, num_label_chunks,
        num_correct_chunks)``; the first three float32 [1], the counts int64 [1].
    Raises:
        TypeError: ``input`` or ``label`` is not a Variable, ``num_chunk_types`` is not an int,
            or ``seq_length`` is not an int64 Variable.
        ValueError: ``num_chunk_types`` is below 1.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     pred = fluid.data("pred", [-1, 1], "int64", lod_level=1)
        ...     label = fluid.data("label", [-1, 1], "int64", lod_level=1)
        ...     precision, recall, f1, n_infer, n_label, n_correct = fluid.layers.chunk_eval(
        ...         pred, label, chunk_scheme="IOB", num_chunk_types=1)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> place = fluid.CPUPlace()
        >>> # B I O B
        >>> p = fluid.create_lod_tensor(np.array([[0], [1], [2], [0]], "int64"), [[4]], place)
        >>> y = fluid.create_lod_tensor(np.array([[0], [1], [2], [2]], "int64"), [[4]], place)
        >>> [float(v[0]) for v in exe.run(main, feed={"pred": p, "label": y}, fetch_list=[precision, recall, f1])]
        [0.5, 1.0, 0.6666666865348816]
    """
    _var(input, "input", "chunk_eval")
    _var(label, "label", "chunk_eval")
    for arg, v in (("input", input), ("label", label)):     # fluid 1.8: int64 tags only
        if v.dtype != VarType.INT64:
            raise TypeError(f"The data type of '{arg}' in chunk_eval must be ['int64'], but "
                            f"received {v.dtype}")
    inputs = {"Inference": input, "Label": label}
    if seq_length is not None:
        inputs["SeqLength"] = _length_var(seq_length, "seq_length", "chunk_eval")
    helper = LayerHelper("chunk_eval")
    outs = {k: helper.create_variable_for_type_inference(
        VarType.FP32 if i < 3 else VarType.INT64, stop_gradient=True)
        for i, k in enumerate(("Precision", "Recall", "F1-Score", "NumInferChunks",
                               "NumLabelChunks", "NumCorrectChunks"))}
    helper.append_op(type="chunk_eval", inputs=inputs,
                     outputs=outs,
                     attrs={"num_chunk_types": check_int(num_chunk_types, "num_chunk_types",
                                                         "chunk_eval", minimum=1),
                            "chunk_scheme": chunk_scheme,
                            "excluded_chunk_types": list(excluded_chunk_types or [])})
    return tuple(outs.values())


def im2sequence(input: Variable, filter_size: Any = 1, stride: Any = 1, padding: Any = 0,
                input_image_size: Optional[Variable] = None, out_stride: Any = 1,
                name: Optional[str] = None) -> Variable:
    """Each image of ``input`` [N, C, H, W] as a sequence of its ``filter_size`` patches
    (``padding``: one int, [h, w] or [up, left, down, right]). ``input_image_size`` ([N, 2]
    float, each image's real height and width) with ``out_stride`` (int or [h, w]) keeps only
    the patches of image i's real area: ceil(size / out_stride) gives its patch grid, whose
    top-left part of the full grid becomes sequence i.

    Args:
        input (Variable): float32/float64 images [N, C, H, W].
        filter_size (int | list of int, default 1): the patch height and width.
        stride (int | list of int, default 1): the patch stride along height and width.
        padding (int | list of int, default 0): one int, [h, w] or [up, left, down, right].
        input_image_size (Variable | None, default None): [N, 2] real height and width per image.
        out_stride (int | list of int, default 1): with ``input_image_size``, the stride that
            maps an image's real size to its patch grid.
        name (str | None, default None): accepted for fluid's signature.
    Returns:
        Variable: a LoD tensor [total_patches, C * filter_h * filter_w] with one sequence per
        image, dtype of ``input``.
    Raises:
        TypeError: ``input`` or ``input_image_size`` is not a Variable.
        ValueError: ``input_image_size`` is not [N, 2], or ``out_stride`` is below 1.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 1, 3, 3])
        ...     out = fluid.layers.im2sequence(x, filter_size=2, stride=1)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> res, = exe.run(main, feed={"x": np.arange(9, dtype="float32").reshape(1, 1, 3, 3)},
        ...               fetch_list=[out])
        >>> res                                   # one row per 2x2 window
        array([[0., 1., 3., 4.],
               [1., 2., 4., 5.],
               [3., 4., 6., 7.],
               [4., 5., 7., 8.]], dtype=float32)
    """
    _var(input, "input", "im2sequence")
    inputs = {"X": input}
    if input_image_size is not None:
        _var(input_image_size, "input_image_size", "im2sequence")
        if len(input_image_size.shape) != 2 or input_image_size.shape[1] not in (2, -1):
            raise ValueError(f"im2sequence: input_image_size must be [N, 2] (real height and "
                             f"width per image), got {list(input_image_size.shape)}")
        input_image_size.stop_gradient = True
        inputs["Y"] = input_image_size
    pair = lambda v: [int(v), int(v)] if isinstance(v, int) else [int(x) for x in v]  # noqa
    pad = [int(padding)] * 4 if isinstance(padding, int) else [int(p) for p in padding]
    if len(pad) == 2:
        pad = pad * 2
    helper = LayerHelper("im2sequence", name=name)
    out = helper.create_variable_for_type_inference(input.dtype)
    stride_pair = pair(out_stride)
    if min(stride_pair) < 1:
        raise ValueError(f"im2sequence: out_stride must be >= 1, got {out_stride}")
    helper.append_op(type="im2sequence", inputs=inputs, outputs={"Out": out},
                     attrs={"kernels": pair(filter_size), "strides": pair(stride),
                            "paddings": pad, "out_stride": stride_pair})
    return out


def warpctc(input: Variable, label: Variable, blank: int = 0, norm_by_times: bool = False,
            input_length: Optional[Variable] = None,
            label_length: Optional[Variable] = None) -> Variable:
    """CTC loss [num_seqs, 1] of the unnormalised per-step scores ``input`` ([N, classes + 1],
    LoD) against the label sequences ``label`` (int, LoD). Padded form (fluid 1.8): with
    ``input_length`` and ``label_length`` (int64 [B]), ``input`` is time-major
    [max_logit_length, B, classes + 1] and ``label`` [B, max_label_length].

    Args:
        input (Variable): unnormalized logits ``[T, num_classes + 1]`` (LoD) or time-major
            padded ``[T, N, C]`` with ``input_length``.
        label (Variable): int32 label sequences (LoD, or padded with ``label_length``).
        blank (int, default 0): the blank class.
        norm_by_times (bool, default False): divide the gradient by the sequence length.
        input_length (Variable | None): logits lengths for padded input.
        label_length (Variable | None): label lengths for padded labels.
    Returns:
        Variable: ``[N, 1]`` CTC losses.
    Raises:
        TypeError: ``input`` or ``label`` is not a Variable, ``blank`` is not an int, or
            ``input_length`` / ``label_length`` is not an int64 Variable.
        ValueError: only one of ``input_length`` and ``label_length`` is given, ``input_length``
            is given but ``input`` is not 3-D, or ``blank`` is negative.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     logits = fluid.data("logits", [-1, 3], lod_level=1)    # blank = 0
        ...     label = fluid.data("label", [-1, 1], "int32", lod_level=1)
        ...     loss = fluid.layers.warpctc(logits, label, blank=0)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> place = fluid.CPUPlace()
        >>> x = fluid.create_lod_tensor(np.zeros((4, 3), "float32"), [[4]], place)
        >>> y = fluid.create_lod_tensor(np.array([[1], [2]], "int32"), [[2]], place)
        >>> exe.run(main, feed={"logits": x, "label": y}, fetch_list=[loss])[0].shape
        (1, 1)
    """
    _var(input, "input", "warpctc")
    _var(label, "label", "warpctc")
    _check_lengths("warpctc", input_length, label_length)
    inputs = {"Logits": input, "Label": label}
    if input_length is not None:
        if len(input.shape) != 3:
            raise ValueError(f"warpctc: with input_length, input must be [max_logit_length, "
                             f"batch_size, num_classes + 1], got {list(input.shape)}")
        inputs["LogitsLength"] = _length_var(input_length, "input_length", "warpctc")
        inputs["LabelLength"] = _length_var(label_length, "label_length", "warpctc")
    helper = LayerHelper("warpctc")
    loss = helper.create_variable_for_type_inference(input.dtype)
    grad = helper.create_variable_for_type_inference(input.dtype, stop_gradient=True)
    helper.append_op(type="warpctc", inputs=inputs,
                     outputs={"Loss": loss, "WarpCTCGrad": grad},
                     attrs={"blank": check_int(blank, "blank", "warpctc", minimum=0),
                            "norm_by_times": bool(norm_by_times)})
    return loss
