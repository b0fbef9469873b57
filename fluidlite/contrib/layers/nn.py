"""``fluid.contrib.layers.nn`` (fluid 1.8): contrib layers over ops with their own kernels.

Fused / CTR / text-matching / tree-retrieval layers: ``fused_elemwise_activation``,
``var_conv_2d``, ``match_matrix_tensor``, ``sequence_topk_avg_pooling``, ``tree_conv``,
``fused_embedding_seq_pool``, ``multiclass_nms2``, ``shuffle_batch``, ``partial_concat``,
``partial_sum``, ``tdm_child``, ``tdm_sampler``, ``rank_attention``. Each appends the same
op, with the same inputs, outputs and attributes, as fluid 1.8's function of that name; the
op's semantics are documented on its definition in ``fluidlite/ops/``. fluid 1.8's
``search_pyramid_hash`` is not provided (its ``pyramid_hash`` op is not).
"""
from __future__ import annotations

import warnings
from typing import Any, List, Optional, Sequence, Tuple, Union

import numpy as np

from ... import layers
from ...core import names
from ...core.dtypes import convert_np_dtype_to_dtype_
from ...core.ir import Variable
from ...initializer import Constant
from ...layer_helper import LayerHelper, is_int
from ...layers.utils import convert_to_list
from ...pipeline.feeder import check_dtype, check_type, check_variable_and_dtype

__all__ = ["fused_elemwise_activation", "sequence_topk_avg_pooling", "var_conv_2d",
           "match_matrix_tensor", "tree_conv", "fused_embedding_seq_pool", "multiclass_nms2",
           "shuffle_batch", "partial_concat", "partial_sum", "tdm_child", "tdm_sampler",
           "rank_attention"]

_FLOATS = ["float32", "float64"]


def fused_elemwise_activation(x: Variable, y: Variable, functor_list: Union[str, List[str]],
                              axis: int = -1, scale: float = 0.0,
                              save_intermediate_out: bool = True) -> Variable:
    """A binary elementwise op fused with a unary one: ``functor_list`` ``[f1, f2]`` computes
    ``f1(x, f2(y))`` when f1 is binary (``elementwise_add`` / ``elementwise_mul``) or
    ``f1(f2(x, y))`` when f1 is unary (``scale`` uses ``scale``, ``relu``, ``tanh``, ...).

    Args:
        x (Variable): the left operand.
        y (Variable): the right operand (broadcast from ``axis`` as in elementwise ops).
        functor_list (str | list[str]): the two functors, e.g. ``["elementwise_add", "relu"]``
            or ``"elementwise_add,relu"``.
        axis (int): broadcast axis of ``y``. Default -1.
        scale (float): the factor of a ``scale`` functor. Default 0.0.
        save_intermediate_out (bool): also write the inner functor's result
            (IntermediateOut, for the gradient). Default True.
    Returns:
        Variable: the fused result, of ``x``'s dtype.
    Raises:
        ValueError: ``functor_list`` is not two functor names.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [2, 2]); y = fluid.data("y", [2, 2])
        ...     out = fluid.contrib.layers.fused_elemwise_activation(
        ...         x, y, ["elementwise_add", "relu"])
        >>> feed = {"x": np.ones((2, 2), "float32"), "y": -np.full((2, 2), 3, "float32")}
        >>> fluid.Executor().run(main, feed=feed, fetch_list=[out])[0].tolist()   # x + relu(y)
        [[1.0, 1.0], [1.0, 1.0]]
    """
    if isinstance(functor_list, str):
        functor_list = functor_list.split(",")
    if not isinstance(functor_list, list) or len(functor_list) != 2:
        raise ValueError(f"fused_elemwise_activation: functor_list should be a list of str, "
                         f"and the length should be 2, but received {functor_list!r}")
    helper = LayerHelper("fused_elemwise_activation")
    out = helper.create_variable_for_type_inference(dtype=x.dtype)
    intermediate_out = helper.create_variable_for_type_inference(dtype=x.dtype)
    helper.append_op(type="fused_elemwise_activation", inputs={"X": x, "Y": y},
                     outputs={"Out": out, "IntermediateOut": intermediate_out},
                     attrs={"axis": axis, "scale": float(scale),
                            "save_intermediate_out": save_intermediate_out,
                            "functor_list": functor_list})
    return out


def var_conv_2d(input: Variable, row: Variable, col: Variable, input_channel: int,
                output_channel: int, filter_size: Union[int, Sequence[int]],
                stride: Union[int, Sequence[int]] = 1, param_attr: Any = None,
                act: Optional[str] = None, dtype: str = "float32",
                name: Optional[str] = None) -> Variable:
    """2-D convolution over variable-sized matrices: sequence i of ``input`` (a 1-level LoD
    tensor ``[sum_i C * h_i * w_i, 1]``) is a ``[input_channel, h_i, w_i]`` image, h_i / w_i
    being the lengths of sequence i of ``row`` / ``col``; each is convolved (zero padding
    ``filter // 2``, ``stride``) with the ``[output_channel, input_channel * kh * kw]``
    filter parameter. Out is the 1-level LoD tensor of the flattened results.

    Args:
        input (Variable): ``[N, 1]`` 1-level LoD tensor of the images' pixels.
        row (Variable): 1-level LoD tensor whose sequence lengths are the heights.
        col (Variable): 1-level LoD tensor whose sequence lengths are the widths.
        input_channel (int): channels of every image.
        output_channel (int): output channels.
        filter_size (int | list[int]): kernel height and width.
        stride (int | list[int]): strides. Default 1.
        param_attr (ParamAttr | None): the filter parameter's attribute. Default None.
        act (str | None): activation appended to the result. Default None.
        dtype (str): the filter's dtype. Default "float32".
        name (str | None): name prefix. Default None.
    Returns:
        Variable: the 1-level LoD tensor ``[M, 1]`` of the convolution results.
    Raises:
        ValueError: ``input`` is not 2-D.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 1], lod_level=1)
        ...     row = fluid.data("row", [-1, 1], lod_level=1)
        ...     col = fluid.data("col", [-1, 1], lod_level=1)
        ...     out = fluid.contrib.var_conv_2d(x, row, col, input_channel=1,
        ...                                     output_channel=2, filter_size=3)
        >>> exe = fluid.Executor(); _ = exe.run(startup)
        >>> place = fluid.CPUPlace()
        >>> feed = {"x": fluid.create_lod_tensor(np.ones((12, 1), "float32"), [[12]], place),
        ...         "row": fluid.create_lod_tensor(np.ones((3, 1), "float32"), [[3]], place),
        ...         "col": fluid.create_lod_tensor(np.ones((4, 1), "float32"), [[4]], place)}
        >>> exe.run(main, feed=feed, fetch_list=[out])[0].shape       # 2 channels x 3 x 4
        (24, 1)
    """
    if len(input.shape) != 2:
        raise ValueError(f"var_conv_2d: input must be a 2-D LoD tensor [N, 1], but its shape "
                         f"is {list(input.shape)}")
    helper = LayerHelper("var_conv_2d", param_attr=param_attr, act=act, name=name)
    fs = convert_to_list(filter_size, 2, "filter_size")
    st = convert_to_list(stride, 2, "stride")
    w = helper.create_parameter(attr=helper.param_attr, dtype=dtype,
                                shape=[int(output_channel), int(input_channel) * fs[0] * fs[1]])
    conv_res = helper.create_variable_for_type_inference(dtype)
    tmp_res = helper.create_variable_for_type_inference(dtype, stop_gradient=True)
    helper.append_op(type="var_conv_2d",
                     inputs={"X": input, "ROW": row, "COLUMN": col, "W": w},
                     outputs={"Out": conv_res, "Col": tmp_res},
                     attrs={"InputChannel": int(input_channel),
                            "OutputChannel": int(output_channel), "StrideH": st[0],
                            "StrideW": st[1], "KernelH": fs[0], "KernelW": fs[1]})
    return helper.append_activation(conv_res)


def match_matrix_tensor(x: Variable, y: Variable, channel_num: int, act: Optional[str] = None,
                        param_attr: Any = None, dtype: str = "float32",
                        name: Optional[str] = None) -> Tuple[Variable, Variable]:
    """Bilinear text matching: for sequence pair i (``x_i`` [len_x, h], ``y_i`` [len_y, h])
    and channel t, ``Out_i[t] = x_i W[:, t, :] y_i^T`` ([len_x, len_y]), W the
    ``[h, channel_num, h]`` parameter; Out is the 1-level LoD tensor of the flattened
    ``[channel_num, len_x, len_y]`` blocks.

    Args:
        x (Variable): ``[N, h]`` 1-level LoD tensor.
        y (Variable): ``[M, h]`` 1-level LoD tensor, as many sequences as ``x``.
        channel_num (int): channels of W.
        act (str | None): activation appended to Out. Default None.
        param_attr (ParamAttr | None): W's attribute. Default None.
        dtype (str): W's dtype. Default "float32".
        name (str | None): name prefix. Default None.
    Returns:
        tuple: (Out ``[sum_i channel_num * len_x_i * len_y_i, 1]``, Tmp: ``x W``, for the
        gradient).
    Raises:
        ValueError: ``x`` / ``y`` are not 2-D with the same width.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 4], lod_level=1)
        ...     y = fluid.data("y", [-1, 4], lod_level=1)
        ...     out, _ = fluid.contrib.match_matrix_tensor(x, y, channel_num=3)
        >>> exe = fluid.Executor(); _ = exe.run(startup)
        >>> place = fluid.CPUPlace()
        >>> feed = {"x": fluid.create_lod_tensor(np.ones((2, 4), "float32"), [[2]], place),
        ...         "y": fluid.create_lod_tensor(np.ones((5, 4), "float32"), [[5]], place)}
        >>> exe.run(main, feed=feed, fetch_list=[out])[0].shape       # 3 x 2 x 5
        (30, 1)
    """
    if not (len(x.shape) == 2 and len(y.shape) == 2 and x.shape[-1] == y.shape[-1]):
        raise ValueError(f"match_matrix_tensor: x and y must be 2-D with the same width, got "
                         f"shapes {list(x.shape)} and {list(y.shape)}")
    helper = LayerHelper("match_matrix_tensor", param_attr=param_attr, act=act, name=name)
    w = helper.create_parameter(attr=helper.param_attr, dtype=dtype, is_bias=False,
                                shape=[x.shape[-1], channel_num, y.shape[-1]])
    mm_res = helper.create_variable_for_type_inference(dtype)
    tmp_res = helper.create_variable_for_type_inference(dtype, stop_gradient=True)
    helper.append_op(type="match_matrix_tensor", inputs={"X": x, "Y": y, "W": w},
                     outputs={"Out": mm_res, "Tmp": tmp_res}, attrs={"dim_t": channel_num})
    return helper.append_activation(mm_res), tmp_res


def sequence_topk_avg_pooling(input: Variable, row: Variable, col: Variable,
                              topks: List[int], channel_num: int) -> Variable:
    """Top-k average pooling of ``match_matrix_tensor``-style blocks: sequence i of ``input``
    holds ``channel_num`` matrices [h_i, w_i] (h_i / w_i the lengths of sequence i of ``row`` /
    ``col``); for every channel, row r and k in ``topks``, the mean of the k largest entries of
    that row (padding counts as 0 when the row is shorter than k). Out [sum_i h_i,
    channel_num * len(topks)] is a 1-level LoD tensor with ``row``'s LoD.

    Args:
        input (Variable): 1-level LoD tensor ``[sum_i channel_num * h_i * w_i, 1]``.
        row (Variable): 1-level LoD tensor whose sequence lengths are the h_i.
        col (Variable): 1-level LoD tensor whose sequence lengths are the w_i.
        topks (list[int]): the k values.
        channel_num (int): the channels per sequence.
    Returns:
        Variable: the pooled 1-level LoD tensor.

    Raises:
        ValueError: ``topks`` is not increasing positive ints or ``channel_num`` < 1 (when
            the op is built).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 1], lod_level=1)
        ...     row = fluid.data("row", [-1, 1], lod_level=1)
        ...     col = fluid.data("col", [-1, 1], lod_level=1)
        ...     out = fluid.contrib.sequence_topk_avg_pooling(x, row, col, topks=[1, 2],
        ...                                                   channel_num=1)
        >>> place = fluid.CPUPlace()
        >>> vals = np.array([[1], [3], [2], [5], [4], [0]], "float32")       # 2 rows x 3 cols
        >>> feed = {"x": fluid.create_lod_tensor(vals, [[6]], place),
        ...         "row": fluid.create_lod_tensor(np.ones((2, 1), "float32"), [[2]], place),
        ...         "col": fluid.create_lod_tensor(np.ones((3, 1), "float32"), [[3]], place)}
        >>> fluid.Executor().run(main, feed=feed, fetch_list=[out])[0].tolist()
        [[3.0, 2.5], [5.0, 4.5]]
    """
    helper = LayerHelper("sequence_topk_avg_pooling")
    dtype = input.dtype
    out = helper.create_variable_for_type_inference(dtype=dtype)
    pos = helper.create_variable_for_type_inference(dtype=dtype, stop_gradient=True)
    helper.append_op(type="sequence_topk_avg_pooling",
                     inputs={"X": input, "ROW": row, "COLUMN": col},
                     outputs={"Out": out, "pos": pos},
                     attrs={"topks": list(topks), "channel_num": channel_num})
    return out


def tree_conv(nodes_vector: Variable, edge_set: Variable, output_size: int,
              num_filters: int = 1, max_depth: int = 2, act: Optional[str] = "tanh",
              param_attr: Any = None, bias_attr: Any = None,
              name: Optional[str] = None) -> Variable:
    """Tree-based convolution (TBCNN): every node's output is a weighted sum over its subtree
    window (``max_depth`` levels, continuous binary-tree weights of top/left/right) of the
    node features times the filter ``[feature_size, 3, output_size, num_filters]``; then an
    optional bias and ``act``.

    Args:
        nodes_vector (Variable): ``[batch, max_nodes, feature_size]`` node features.
        edge_set (Variable): ``[batch, max_edges, 2]`` int32 (parent, child) pairs, 1-based
            node ids, 0 pads.
        output_size (int): output features per filter.
        num_filters (int): filters. Default 1.
        max_depth (int): depth of the convolution window. Default 2.
        act (str | None): activation. Default "tanh".
        param_attr (ParamAttr | None): the filter's attribute. Default None.
        bias_attr (ParamAttr | bool | None): the bias's attribute (False: no bias).
            Default None.
        name (str | None): name prefix. Default None.
    Returns:
        Variable: ``[batch, max_nodes, output_size, num_filters]``.
    Raises:
        TypeError: ``nodes_vector`` or ``edge_set`` is not a Variable.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     nodes = fluid.data("nodes", [1, 3, 4])
        ...     edges = fluid.data("edges", [1, 2, 2], "int32")
        ...     out = fluid.contrib.layers.tree_conv(nodes, edges, output_size=6,
        ...                                          num_filters=2)
        >>> exe = fluid.Executor(); _ = exe.run(startup)
        >>> feed = {"nodes": np.ones((1, 3, 4), "float32"),
        ...         "edges": np.array([[[1, 2], [1, 3]]], "int32")}
        >>> exe.run(main, feed=feed, fetch_list=[out])[0].shape
        (1, 3, 6, 2)
    """
    check_type(nodes_vector, "nodes_vector", Variable, "tree_conv")
    check_type(edge_set, "edge_set", Variable, "tree_conv")
    helper = LayerHelper("tree_conv", param_attr=param_attr, bias_attr=bias_attr, act=act,
                         name=name)
    dtype = nodes_vector.dtype
    w = helper.create_parameter(attr=helper.param_attr, dtype=dtype, is_bias=False,
                                shape=[nodes_vector.shape[2], 3, output_size, num_filters])
    out = helper.create_variable_for_type_inference(dtype=dtype)
    helper.append_op(type="tree_conv",
                     inputs={"NodesVector": nodes_vector, "EdgeSet": edge_set, "Filter": w},
                     outputs={"Out": out}, attrs={"max_depth": max_depth})
    pre_activation = helper.append_bias_op(out) if helper.bias_attr else out
    return helper.append_activation(pre_activation)


def fused_embedding_seq_pool(input: Variable, size: Sequence[int], is_sparse: bool = False,
                             padding_idx: Optional[int] = None, combiner: str = "sum",
                             param_attr: Any = None, dtype: str = "float32") -> Variable:
    """``embedding`` then ``sequence_pool(pool_type='sum')`` in one op: row i of Out is the
    sum of the embeddings (the ``size`` = [vocab, dim] table) of the ids of sequence i of
    ``input``; ids equal to ``padding_idx`` contribute zeros.

    Args:
        input (Variable): 1-level LoD tensor ``[N, 1]`` of int64 ids.
        size (list[int]): ``[vocab_size, embedding_dim]``.
        is_sparse (bool): a SelectedRows gradient for the table. Default False.
        padding_idx (int | None): the id looked up as zeros (negative: counted from
            ``vocab_size``; None: none). Default None.
        combiner (str): the pooling, only ``"sum"``. Default "sum".
        param_attr (ParamAttr | None): the table's attribute. Default None.
        dtype (str): the table's dtype. Default "float32".
    Returns:
        Variable: ``[number of sequences, embedding_dim]``.

    Raises:
        ValueError: ``combiner`` is not ``"sum"``, ``size`` is not ``[vocab, dim]``, or (at
            run time) ``input`` is not a 1-level LoD tensor of ids in ``[0, vocab)``.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     ids = fluid.data("ids", [-1, 1], "int64", lod_level=1)
        ...     out = fluid.contrib.fused_embedding_seq_pool(
        ...         ids, size=[10, 3], param_attr=fluid.initializer.Constant(1.0))
        >>> exe = fluid.Executor(); _ = exe.run(startup)
        >>> feed = {"ids": fluid.create_lod_tensor(np.array([[1], [2], [3]], "int64"),
        ...                                        [[2, 1]], fluid.CPUPlace())}
        >>> exe.run(main, feed=feed, fetch_list=[out])[0].tolist()
        [[2.0, 2.0, 2.0], [1.0, 1.0, 1.0]]
    """
    helper = LayerHelper("fused_embedding_seq_pool", param_attr=param_attr)
    w = helper.create_parameter(attr=helper.param_attr, shape=list(size), dtype=dtype,
                                is_bias=False)
    out = helper.create_variable_for_type_inference(dtype)
    padding_idx = -1 if padding_idx is None else padding_idx if padding_idx >= 0 else \
        size[0] + padding_idx
    helper.append_op(type="fused_embedding_seq_pool", inputs={"Ids": input, "W": w},
                     outputs={"Out": out},
                     attrs={"is_sparse": is_sparse, "combiner": combiner,
                            "padding_idx": padding_idx})
    return out


def multiclass_nms2(bboxes: Variable, scores: Variable, score_threshold: float,
                    nms_top_k: int, keep_top_k: int, nms_threshold: float = 0.3,
                    normalized: bool = True, nms_eta: float = 1., background_label: int = 0,
                    return_index: bool = False, name: Optional[str] = None) -> Any:
    """``fluid.layers.multiclass_nms`` that can also return Index, each kept box's absolute
    input row (see the ``multiclass_nms2`` op); no detection gives an empty ``[0, 6]`` Out.

    Args:
        bboxes (Variable): ``[N, M, 4]`` boxes (or a ``[M, C, 4]`` LoD tensor).
        scores (Variable): ``[N, C, M]`` scores (or ``[M, C]`` with LoD boxes).
        score_threshold (float): drop boxes scoring below it.
        nms_top_k (int): boxes kept per class before NMS (-1: all).
        keep_top_k (int): boxes kept per image after NMS (-1: all).
        nms_threshold (float): the IoU threshold of NMS. Default 0.3.
        normalized (bool): normalized boxes (else pixel boxes). Default True.
        nms_eta (float): adaptive NMS factor (1.0: fixed threshold). Default 1.0.
        background_label (int): the class skipped (-1: none). Default 0.
        return_index (bool): also return Index ``[K, 1]`` int32. Default False.
        name (str | None): name prefix. Default None.
    Returns:
        Variable | tuple: Out ``[K, 6]`` (label, score, box) with a per-image LoD, and Index
        when ``return_index``.

    Raises:
        ValueError: at run time, ``bboxes`` and ``scores`` whose sizes do not pair up as
            above.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     boxes = fluid.data("boxes", [-1, 2, 4])
        ...     scores = fluid.data("scores", [-1, 2, 2])
        ...     out, index = fluid.contrib.multiclass_nms2(boxes, scores, 0.1, 10, 10,
        ...                                                return_index=True)
        >>> feed = {"boxes": np.array([[[0, 0, 1, 1], [2, 2, 3, 3]]], "float32"),
        ...         "scores": np.array([[[0.0, 0.0], [0.9, 0.8]]], "float32")}
        >>> fluid.Executor().run(main, feed=feed, fetch_list=[index])[0].tolist()
        [[0], [1]]
    """
    helper = LayerHelper("multiclass_nms2", name=name)
    output = helper.create_variable_for_type_inference(dtype=bboxes.dtype, stop_gradient=True)
    index = helper.create_variable_for_type_inference(dtype="int32", stop_gradient=True)
    helper.append_op(type="multiclass_nms2", inputs={"BBoxes": bboxes, "Scores": scores},
                     outputs={"Out": output, "Index": index},
                     attrs={"background_label": background_label,
                            "score_threshold": float(score_threshold),
                            "nms_top_k": nms_top_k, "nms_threshold": float(nms_threshold),
                            "nms_eta": float(nms_eta), "keep_top_k": keep_top_k,
                            "normalized": normalized})
    return (output, index) if return_index else output


def shuffle_batch(x: Variable, seed: Union[None, int, Variable] = None) -> Variable:
    """Shuffles the rows of ``x`` (every dim but the last indexes rows) with a new random
    order on every run: the order's seed lives in an int64 persistable variable that the op
    advances (``SeedOut``), started from ``seed``.

    Args:
        x (Variable): the tensor to shuffle (int32/int64/float32/float64).
        seed (None | int | Variable): the start seed; a Variable is used (and advanced) as
            the seed state itself; None takes the program's ``random_seed`` when set, else a
            random one (as fluid 1.8). Default None.
    Returns:
        Variable: the shuffled tensor, of ``x``'s shape, dtype and LoD.
    Raises:
        TypeError: ``seed`` is neither None, an int nor a Variable.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 2])
        ...     out = fluid.contrib.layers.shuffle_batch(x, seed=1)
        >>> exe = fluid.Executor(); _ = exe.run(startup)
        >>> got = exe.run(main, feed={"x": np.arange(8, dtype="float32").reshape(4, 2)},
        ...               fetch_list=[out])[0]
        >>> sorted(got[:, 0].tolist())
        [0.0, 2.0, 4.0, 6.0]
    """
    if not (seed is None or is_int(seed) or isinstance(seed, Variable)):
        raise TypeError(f"shuffle_batch: seed must be None, an int or a Variable, but "
                        f"received {type(seed).__name__}")
    helper = LayerHelper("shuffle_batch")
    out = helper.create_variable_for_type_inference(dtype=x.dtype)
    shuffle_idx = helper.create_variable_for_type_inference(dtype="int64", stop_gradient=True)
    if seed is None and helper.main_program.random_seed != 0:
        seed = helper.main_program.random_seed
    if seed is None:
        seed = int(np.random.randint(-65536, 65535))
    attrs = {}
    if not isinstance(seed, Variable):
        attrs["startup_seed"] = int(seed)
        # fluid reads startup_seed while the seed variable is uninitialized; fluidlite's
        # executor needs persistables initialized, so the startup program sets it to the seed
        seed_var = helper.create_global_variable(
            name=names.generate("shuffle_batch_seed"), dtype="int64", shape=[1],
            persistable=True, stop_gradient=True)
        helper.set_variable_initializer(seed_var, Constant(value=int(seed)))
        seed = seed_var
    helper.append_op(type="shuffle_batch", inputs={"X": x, "Seed": seed},
                     outputs={"Out": out, "ShuffleIdx": shuffle_idx, "SeedOut": seed},
                     attrs=attrs)
    return out


def _partial(layer: str, input: Any, start_index: int, length: int,
             dtypes: List[str]) -> Variable:
    if not isinstance(input, (list, tuple)):
        warnings.warn(f"The type of input in {layer} should be list, but received "
                      f"{type(input).__name__}.")
        input = [input]
    for i, x in enumerate(input):
        check_variable_and_dtype(x, f"input[{i}]", dtypes, layer)
    check_type(start_index, "start_index", int, layer)
    check_type(length, "length", int, layer)
    helper = LayerHelper(layer)
    out = helper.create_variable_for_type_inference(dtype=input[0].dtype)
    helper.append_op(type=layer, inputs={"X": list(input)}, outputs={"Out": [out]},
                     attrs={"start_index": start_index, "length": length})
    return out


def partial_concat(input: Union[Variable, List[Variable]], start_index: int = 0,
                   length: int = -1) -> Variable:
    """Concatenates the column slices ``[start_index, start_index + length)`` (``length``
    -1: to the end; a negative ``start_index`` counts from the end) of the 2-D inputs along
    dim 1.

    Args:
        input (list[Variable]): 2-D tensors of one shape (float16/32/64, int32/64); a single
            Variable is taken as a list of one, with a warning (as fluid 1.8).
        start_index (int): first column. Default 0.
        length (int): columns taken (-1: all after ``start_index``). Default -1.
    Returns:
        Variable: ``[N, len(input) * length]``.
    Raises:
        TypeError: an input is not a Variable of a listed dtype, or ``start_index`` /
            ``length`` is not an int.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     a = fluid.data("a", [-1, 3]); b = fluid.data("b", [-1, 3])
        ...     out = fluid.contrib.layers.partial_concat([a, b], start_index=1, length=2)
        >>> feed = {"a": np.array([[1, 2, 3]], "float32"), "b": np.array([[4, 5, 6]], "float32")}
        >>> fluid.Executor().run(main, feed=feed, fetch_list=[out])[0].tolist()
        [[2.0, 3.0, 5.0, 6.0]]
    """
    return _partial("partial_concat", input, start_index, length,
                    ["float16", "float32", "float64", "int32", "int64"])


def partial_sum(input: List[Variable], start_index: int = 0, length: int = -1) -> Variable:
    """Sums the column slices ``[start_index, start_index + length)`` (``length`` -1: to
    the end) of the 2-D inputs.

    Args:
        input (list[Variable]): 2-D tensors of one shape (float32/64, int32/64).
        start_index (int): first column. Default 0.
        length (int): columns taken (-1: all after ``start_index``). Default -1.
    Returns:
        Variable: ``[N, length]``.
    Raises:
        TypeError: an input is not a Variable of a listed dtype, or ``start_index`` /
            ``length`` is not an int.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     a = fluid.data("a", [-1, 3]); b = fluid.data("b", [-1, 3])
        ...     out = fluid.contrib.layers.partial_sum([a, b], start_index=1, length=2)
        >>> feed = {"a": np.array([[1, 2, 3]], "float32"), "b": np.array([[4, 5, 6]], "float32")}
        >>> fluid.Executor().run(main, feed=feed, fetch_list=[out])[0].tolist()
        [[7.0, 9.0]]
    """
    return _partial("partial_sum", input, start_index, length,
                    ["float32", "float64", "int32", "int64"])


def tdm_child(x: Variable, node_nums: int, child_nums: int, param_attr: Any = None,
              dtype: str = "int32") -> Tuple[Variable, Variable]:
    """The children of tree nodes (tree-based deep model retrieval): the tree is a
    ``[node_nums, 3 + child_nums]`` parameter of rows (item_id, layer_id, ancestor_id,
    child ids...), zero-initialized (load it through ``param_attr``'s initializer).

    Args:
        x (Variable): int32/int64 node ids.
        node_nums (int): the tree's node count.
        child_nums (int): the children per node.
        param_attr (ParamAttr | None): the tree table's attribute. Default None.
        dtype (str): the outputs' dtype, "int32" or "int64". Default "int32".
    Returns:
        tuple: (Child, LeafMask), each ``x.shape + [child_nums]``: the child ids (0 for
        leaves and node 0) and 1 where the child is an item.
    Raises:
        TypeError: ``dtype`` is not int32/int64.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> tree = np.array([[0, 0, 0, 1, 2], [0, 1, 0, 3, 4], [0, 1, 0, 5, 6],
        ...                  [7, 2, 1, 0, 0], [8, 2, 1, 0, 0], [9, 2, 2, 0, 0],
        ...                  [0, 2, 2, 0, 0]], "int32")
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 1], "int32")
        ...     child, mask = fluid.contrib.layers.tdm_child(
        ...         x, node_nums=7, child_nums=2,
        ...         param_attr=fluid.ParamAttr(
        ...             initializer=fluid.initializer.NumpyArrayInitializer(tree)))
        >>> exe = fluid.Executor(); _ = exe.run(startup)
        >>> exe.run(main, feed={"x": np.array([[1]], "int32")}, fetch_list=[child])[0].tolist()
        [[[3, 4]]]
    """
    check_dtype(dtype, "dtype", ["int32", "int64"], "fluid.contrib.layers.tdm_child")
    helper = LayerHelper("tdm_child", param_attr=param_attr)
    tree_info = helper.create_parameter(attr=helper.param_attr, dtype=dtype,
                                        shape=[node_nums, 3 + child_nums],
                                        default_initializer=Constant(0))
    tree_info.stop_gradient = True
    child = helper.create_variable_for_type_inference(dtype=dtype, stop_gradient=True)
    leaf_mask = helper.create_variable_for_type_inference(dtype=dtype, stop_gradient=True)
    helper.append_op(type="tdm_child", inputs={"X": x, "TreeInfo": tree_info},
                     outputs={"Child": child, "LeafMask": leaf_mask},
                     attrs={"child_nums": child_nums,
                            "dtype": int(convert_np_dtype_to_dtype_(dtype))})
    return child, leaf_mask


def _tdm_layer_offsets(neg_samples_num_list: Sequence[int],
                       layer_node_num_list: Sequence[int], leaf_node_num: int) -> List[int]:
    """fluid 1.8's checks of tdm_sampler's tree description; the layers' node offsets."""
    if len(neg_samples_num_list) != len(layer_node_num_list):
        raise ValueError(f"tdm_sampler: the shape of negative samples list must match the "
                         f"shape of layers, but received len of neg_samples_num_list: "
                         f"{len(neg_samples_num_list)}, and len of layer_node_num_list: "
                         f"{len(layer_node_num_list)}")
    if leaf_node_num is None:
        raise ValueError("tdm_sampler: leaf_node_num should not be None")
    offsets = [0]
    for i, (neg, nodes) in enumerate(zip(neg_samples_num_list, layer_node_num_list)):
        offsets.append(offsets[-1] + nodes)
        if neg >= nodes:
            raise ValueError(f"tdm_sampler: the number of negative samples must be less than "
                             f"the number of nodes in layer {i}, but received {neg} negatives "
                             f"for {nodes} nodes")
    if leaf_node_num >= offsets[-1]:
        raise ValueError(f"tdm_sampler: leaf_node_num ({leaf_node_num}) must be less than the "
                         f"total node count ({offsets[-1]})")
    return offsets


def tdm_sampler(x: Variable, neg_samples_num_list: List[int], layer_node_num_list: List[int],
                leaf_node_num: int, tree_travel_attr: Any = None, tree_layer_attr: Any = None,
                output_positive: bool = True, output_list: bool = True, seed: int = 0,
                tree_dtype: str = "int32", dtype: str = "int32") -> Tuple[Any, Any, Any]:
    """Layer-wise sampling of a retrieval tree: for every item of ``x`` and every tree layer,
    the item's ancestor on that layer (label 1, when ``output_positive``) and
    ``neg_samples_num_list[l]`` distinct other nodes of the layer (label 0). The tree is two
    zero-initialized parameters: Travel ``[leaf_node_num, layers]`` (each item's path) and
    Layer ``[sum(layer_node_num_list), 1]`` (the nodes, layer by layer).

    Args:
        x (Variable): ``[N, 1]`` int32/int64 item ids.
        neg_samples_num_list (list[int]): negatives per layer.
        layer_node_num_list (list[int]): nodes per layer.
        leaf_node_num (int): the items (rows of Travel).
        tree_travel_attr (ParamAttr | None): Travel's attribute. Default None.
        tree_layer_attr (ParamAttr | None): Layer's attribute. Default None.
        output_positive (bool): include the positive node. Default True.
        output_list (bool): split the outputs per layer into ``[N, k_l, 1]`` tensors.
            Default True.
        seed (int): the sampler's seed (0: random). Default 0.
        tree_dtype (str): the tree parameters' dtype (int32/int64). Default "int32".
        dtype (str): the outputs' dtype (int32/int64). Default "int32".
    Returns:
        tuple: (Out, Labels, Mask): ``[N, sum_l k_l]`` tensors, or lists of per-layer
        ``[N, k_l, 1]`` tensors when ``output_list``.
    Raises:
        TypeError: ``tree_dtype`` / ``dtype`` is not int32/int64.
        ValueError: the lists differ in length, a layer has no more nodes than negatives, or
            ``leaf_node_num`` is not below the total node count.

    Example:
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 1], "int32")
        ...     out, labels, mask = fluid.contrib.layers.tdm_sampler(
        ...         x, neg_samples_num_list=[1, 2], layer_node_num_list=[2, 4],
        ...         leaf_node_num=4)
        >>> [list(o.shape) for o in out]
        [[-1, 2, 1], [-1, 3, 1]]
    """
    layer = "fluid.contrib.layers.tdm_sampler"
    check_dtype(tree_dtype, "tree_dtype", ["int32", "int64"], layer)
    check_dtype(dtype, "dtype", ["int32", "int64"], layer)
    offsets = _tdm_layer_offsets(neg_samples_num_list, layer_node_num_list, leaf_node_num)
    helper = LayerHelper("tdm_sampler")
    travel = helper.create_parameter(attr=tree_travel_attr, dtype=tree_dtype,
                                     shape=[leaf_node_num, len(layer_node_num_list)],
                                     default_initializer=Constant(0))
    layer_var = helper.create_parameter(attr=tree_layer_attr, dtype=tree_dtype,
                                        shape=[offsets[-1], 1],
                                        default_initializer=Constant(0))
    outs = [helper.create_variable_for_type_inference(dtype=dtype, stop_gradient=True)
            for _ in range(3)]
    helper.append_op(type="tdm_sampler", inputs={"X": x, "Travel": travel, "Layer": layer_var},
                     outputs={"Out": outs[0], "Labels": outs[1], "Mask": outs[2]},
                     attrs={"neg_samples_num_list": list(neg_samples_num_list),
                            "output_positive": output_positive,
                            "layer_offset_lod": offsets, "seed": seed,
                            "dtype": int(convert_np_dtype_to_dtype_(dtype))})
    if not output_list:
        return outs[0], outs[1], outs[2]
    split: List[List[Variable]] = [[], [], []]
    start, pos = 0, 1 if output_positive else 0
    for neg in neg_samples_num_list:
        end = start + neg + pos
        for k, v in enumerate(outs):
            part = layers.reshape(layers.slice(v, axes=[1], starts=[start], ends=[end]),
                                  [-1, neg + pos, 1])
            part.stop_gradient = True
            split[k].append(part)
        start = end
    return split[0], split[1], split[2]


def rank_attention(input: Variable, rank_offset: Variable, rank_param_shape: Sequence[int],
                   rank_param_attr: Any, max_rank: int = 3) -> Variable:
    """Rank attention (PaddleRec): each ad's features are projected by the parameter block of
    its (own rank, neighbour rank) pair, summed over the ads shown with it (see the
    ``rank_attention`` op); the ``rank_param_shape`` parameter is created here.

    Args:
        input (Variable): ``[N, C]`` ad features (float32/float64).
        rank_offset (Variable): ``[N, 2 * max_rank + 1]`` int32: each instance's rank and its
            neighbours' (rank, row) pairs, -1 where absent.
        rank_param_shape (list[int]): ``[max_rank * max_rank * C, P]``.
        rank_param_attr (ParamAttr | None): the parameter's attribute.
        max_rank (int): the largest rank. Default 3.
    Returns:
        Variable: ``[N, P]``.
    Raises:
        ValueError: ``rank_param_shape[0]`` is not ``C * max_rank * max_rank``.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 2]); ro = fluid.data("ro", [-1, 7], "int32")
        ...     out = fluid.contrib.layers.rank_attention(
        ...         x, ro, rank_param_shape=[18, 4],
        ...         rank_param_attr=fluid.ParamAttr(
        ...             initializer=fluid.initializer.Constant(1.0)))
        >>> exe = fluid.Executor(); _ = exe.run(startup)
        >>> ro_v = np.array([[1, 1, 0, 2, 1, -1, -1], [2, 1, 0, 2, 1, -1, -1]], "int32")
        >>> exe.run(main, feed={"x": np.ones((2, 2), "float32"), "ro": ro_v},
        ...         fetch_list=[out])[0].tolist()
        [[4.0, 4.0, 4.0, 4.0], [4.0, 4.0, 4.0, 4.0]]
    """
    helper = LayerHelper("rank_attention", param_attr=rank_param_attr)
    if input.shape[1] * max_rank * max_rank != rank_param_shape[0]:
        raise ValueError(f"rank_attention: rank_param_shape[0] must be input.shape[1] * "
                         f"max_rank * max_rank = {input.shape[1] * max_rank * max_rank}, got "
                         f"{rank_param_shape[0]}")
    dtype = input.dtype
    rank_param = helper.create_parameter(attr=helper.param_attr, shape=list(rank_param_shape),
                                         dtype=dtype)
    rank_param.stop_gradient = False
    output = helper.create_variable_for_type_inference(dtype)
    helper.append_op(type="rank_attention",
                     inputs={"X": input, "RankOffset": rank_offset, "RankParam": rank_param},
                     outputs={"Out": output}, attrs={"MaxRank": max_rank})
    return output
