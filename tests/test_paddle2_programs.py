"""Paddle 2.x op types and attributes in ProgramDesc files (issue 18): each op is written into a
ProgramDesc built here with Paddle's attribute types (INT/FLOAT/LONGS..., empty dispensable
slots, extra outputs), loaded with fluidlite's reader, run, and checked against NumPy."""
import math

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.formats import paddle as pf

INT, FLOAT, STRING, INTS, FLOATS, STRINGS, BOOLEAN, LONG, LONGS = 0, 1, 2, 3, 4, 5, 6, 9, 11
DTYPES = {np.dtype("float32"): 5, np.dtype("float64"): 6, np.dtype("int64"): 3,
          np.dtype("int32"): 2, np.dtype("bool"): 0}


class Longs(list):
    """An int list Paddle declares int64 (written as LONGS)."""


class Long(int):
    """An int attr Paddle declares int64 (written as LONG)."""


def set_attr(a, name, value):
    a.name = name
    if isinstance(value, bool):
        a.type, a.b = BOOLEAN, value
    elif isinstance(value, Long):
        a.type, a.l = LONG, int(value)
    elif isinstance(value, int):
        a.type, a.i = INT, value
    elif isinstance(value, float):
        a.type, a.f = FLOAT, value
    elif isinstance(value, str):
        a.type, a.s = STRING, value.encode()
    elif isinstance(value, Longs):
        a.type = LONGS
        a.longs.extend(value)
    elif all(isinstance(v, str) for v in value) and value:
        a.type = STRINGS
        a.strings.extend(v.encode() for v in value)
    elif all(isinstance(v, int) for v in value):
        a.type = INTS
        a.ints.extend(value)
    else:
        a.type = FLOATS
        a.floats.extend(value)


def add_var(block, name, shape, dtype="float32", persistable=False, parameter=False):
    v = block.vars.add(name=name)
    v.type.type = 7
    v.type.lod_tensor.tensor.data_type = DTYPES[np.dtype(dtype)]
    v.type.lod_tensor.tensor.dims.extend(int(d) for d in shape)
    v.persistable = persistable
    if parameter:
        v.is_parameter = True
        v.stop_gradient = False


def add_op(block, type_, inputs, outputs, attrs=None, role=0):
    o = block.ops.add(type=type_)
    for slot, args in inputs.items():
        o.inputs.add(parameter=slot, arguments=list(args))
    for slot, args in outputs.items():
        o.outputs.add(parameter=slot, arguments=list(args))
    attrs = dict(attrs or {})
    attrs.update(op_role=role, op_namescope="/", op_device="", with_quant_attr=False,
                 op_callstack=["  File \"x.py\", line 1, in f", "y = f(x)"])
    for k, v in attrs.items():
        set_attr(o.attrs.add(), k, v)
    return o


def new_program():
    msg = pf.messages()["ProgramDesc"]()
    b = msg.blocks.add(idx=0, parent_idx=-1)
    msg.version.version = 2006002
    return msg, b


def run_op(type_, inputs, outputs, attrs=None, extra_outputs=None):
    """One op in a Paddle-style program. ``inputs``: {slot: array | [arrays] | None (empty
    slot)}; ``outputs``: {slot: expected array (declared with its shape)};
    ``extra_outputs``: {slot: shape} of outputs fluidlite may drop (XShape, Mask...). Returns
    {slot: fetched array} after checking every expected output."""
    msg, b = new_program()
    feed, in_slots = {}, {}
    for slot, value in inputs.items():
        if value is None:
            in_slots[slot] = []
            continue
        values = value if isinstance(value, list) else [value]
        names = []
        for i, arr in enumerate(values):
            arr = np.asarray(arr)
            name = f"{slot.lower()}_{i}"
            add_var(b, name, arr.shape, arr.dtype)
            feed[name] = arr
            names.append(name)
        in_slots[slot] = names
    out_slots, fetch = {}, []
    for slot, want in outputs.items():
        if want is None:
            out_slots[slot] = []
            continue
        name = f"out_{slot.lower()}"
        want = np.asarray(want)
        add_var(b, name, want.shape, want.dtype)
        out_slots[slot] = [name]
        fetch.append((slot, name, want))
    for slot, shape in (extra_outputs or {}).items():
        add_var(b, f"aux_{slot.lower()}", shape)
        out_slots[slot] = [f"aux_{slot.lower()}"]
    add_op(b, type_, in_slots, out_slots, attrs)
    program = pf.program_from_bytes(msg.SerializeToString(), "test.pdmodel")
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(fluid.Scope()):
        got = exe.run(program, feed=feed, fetch_list=[n for _, n, _ in fetch])
    result = {}
    for (slot, _, want), arr in zip(fetch, got):
        arr = np.asarray(arr)
        assert arr.dtype == want.dtype, f"{type_} {slot}: dtype {arr.dtype} != {want.dtype}"
        np.testing.assert_allclose(arr.reshape(want.shape), want, rtol=1e-5, atol=1e-6,
                                   err_msg=f"{type_} {slot}")
        result[slot] = arr
    return result


RNG = np.random.default_rng(0)


def r(*shape, dtype="float32"):
    return RNG.uniform(-1, 1, shape).astype(dtype)


# -- op variants ------------------------------------------------------------------------------
def test_matmul_v2_trans_and_batch_broadcast():
    x, y = r(2, 1, 3, 4), r(5, 6, 4)
    run_op("matmul_v2", {"X": x, "Y": y}, {"Out": np.matmul(x, np.swapaxes(y, -1, -2))},
           {"trans_x": False, "trans_y": True, "use_mkldnn": False})
    x, y = r(4, 3), r(4)
    run_op("matmul_v2", {"X": x, "Y": y}, {"Out": x.T @ y}, {"trans_x": True, "trans_y": False})


@pytest.mark.parametrize("op,fn", [("elementwise_add", np.add), ("elementwise_mul", np.multiply),
                                   ("elementwise_sub", np.subtract)])
@pytest.mark.parametrize("xs,ys", [((3, 1), (1, 4)), ((4,), (2, 3, 4)), ((2, 1, 4), (3, 1))])
def test_elementwise_numpy_broadcasting(op, fn, xs, ys):
    x, y = r(*xs), r(*ys)
    run_op(op, {"X": x, "Y": y}, {"Out": fn(x, y)}, {"axis": -1})


def test_reshape_squeeze_unsqueeze_flatten_transpose():
    x = r(2, 3, 4)
    run_op("reshape2", {"X": x, "Shape": None, "ShapeTensor": None},
           {"Out": x.reshape(2, 12)}, {"shape": [0, -1]}, {"XShape": [0, 2, 3, 4]})
    x1 = r(2, 1, 4)
    run_op("squeeze2", {"X": x1}, {"Out": x1.reshape(2, 4)}, {"axes": [1]},
           {"XShape": [0, 2, 1, 4]})
    run_op("unsqueeze2", {"X": x, "AxesTensor": None, "AxesTensorList": None},
           {"Out": x.reshape(2, 1, 3, 4)}, {"axes": [1]}, {"XShape": [0, 2, 3, 4]})
    run_op("flatten_contiguous_range", {"X": x}, {"Out": x.reshape(6, 4)},
           {"start_axis": 0, "stop_axis": 1}, {"XShape": [0, 2, 3, 4]})
    run_op("transpose2", {"X": x}, {"Out": x.transpose(2, 0, 1)},
           {"axis": [2, 0, 1], "data_format": "AnyLayout"})
    # fluid's first reshape / transpose (no XShape output) and Paddle 2.x's memcpy
    run_op("reshape", {"X": x, "Shape": None}, {"Out": x.reshape(4, 6)}, {"shape": [4, -1]})
    run_op("transpose", {"X": x}, {"Out": x.transpose(1, 0, 2)}, {"axis": [1, 0, 2]})
    run_op("memcpy", {"X": x}, {"Out": x}, {"dst_place_type": 0})


def _softmax(z, axis=-1):
    e = np.exp(z - z.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def test_softmax_with_cross_entropy_v2_attrs():
    logits = r(4, 5)
    label = np.array([[1], [0], [4], [2]], np.int64)
    sm = _softmax(logits)
    loss = -np.log(np.take_along_axis(sm, label, 1))
    run_op("softmax_with_cross_entropy", {"Logits": logits, "Label": label},
           {"Softmax": sm, "Loss": loss},
           {"soft_label": False, "ignore_index": -100, "numeric_stable_mode": True,
            "use_softmax": True, "axis": -1})
    probs = sm
    run_op("softmax_with_cross_entropy", {"Logits": probs, "Label": label},
           {"Softmax": probs, "Loss": loss},
           {"soft_label": False, "ignore_index": -100, "numeric_stable_mode": True,
            "use_softmax": False, "axis": -1})


def test_lookup_table_v2_fill_constant_scale():
    w = r(6, 3)
    ids = np.array([[0, 5], [2, 2]], np.int64)
    run_op("lookup_table_v2", {"W": w, "Ids": ids}, {"Out": w[ids]},
           {"padding_idx": Long(-1), "is_sparse": False, "is_distributed": False,
            "remote_prefetch": False, "entry_config": "", "table_names": []})
    run_op("fill_constant", {"ShapeTensor": None, "ValueTensor": None, "ShapeTensorList": None},
           {"Out": np.full((2, 3), 7, np.int64)},
           {"shape": Longs([2, 3]), "value": 0.0, "str_value": "7", "dtype": 3,
            "force_cpu": False, "place_type": -1})
    run_op("fill_constant", {}, {"Out": np.full((2,), -np.inf, np.float32)},
           {"shape": Longs([2]), "value": 0.0, "str_value": "-inf", "dtype": 5})
    # str_value is exact where the FLOAT value is not: an int64 beyond 2^53, a float64 0.1
    # (run_op compares to 1e-5; these must be exact)
    big = np.full((2,), 2 ** 60 + 3, np.int64)
    np.testing.assert_array_equal(run_op("fill_constant", {}, {"Out": big}, {
        "shape": Longs([2]), "value": 1.0, "str_value": str(2 ** 60 + 3), "dtype": 3})["Out"], big)
    tenth = np.full((2,), 0.1, np.float64)
    np.testing.assert_array_equal(run_op("fill_constant", {}, {"Out": tenth}, {
        "shape": Longs([2]), "value": 0.1, "str_value": "0.1", "dtype": 6})["Out"], tenth)
    got = run_op("fill_constant_batch_size_like", {"Input": r(3, 2)},
                 {"Out": np.full((3, 2), 0.1, np.float64)},
                 {"shape": Longs([1, 2]), "value": 0.0, "str_value": "0.1", "dtype": 6,
                  "input_dim_idx": 0, "output_dim_idx": 0, "force_cpu": False})["Out"]
    np.testing.assert_array_equal(got, np.full((3, 2), 0.1))
    x = r(3, 2)
    run_op("scale", {"X": x, "ScaleTensor": None}, {"Out": (x + 0.5) * 2.0},
           {"scale": 2.0, "bias": 0.5, "bias_after_scale": False})


def test_arg_max_arg_min_dtype_flatten():
    x = RNG.permutation(12).reshape(3, 4).astype("float32")
    run_op("arg_max", {"X": x}, {"Out": np.argmax(x, axis=1).astype(np.int32)},
           {"axis": Long(1), "dtype": 2, "flatten": False, "keepdims": False})
    run_op("arg_max", {"X": x}, {"Out": np.array(np.argmax(x), np.int64)},
           {"axis": Long(0), "dtype": 3, "flatten": True, "keepdims": False})
    run_op("arg_min", {"X": x}, {"Out": np.argmin(x, axis=0)[None, :].astype(np.int64)},
           {"axis": Long(0), "dtype": 3, "flatten": False, "keepdims": True})


def test_p_norm_gelu_layer_norm():
    x = r(3, 4)
    run_op("p_norm", {"X": x}, {"Out": np.linalg.norm(x, axis=1)},
           {"porder": 2.0, "axis": 1, "epsilon": 1e-12, "keepdim": False, "asvector": False})
    erf = np.vectorize(math.erf)
    run_op("gelu", {"X": x}, {"Out": (0.5 * x * (1 + erf(x / np.sqrt(2)))).astype("float32")},
           {"approximate": False, "use_mkldnn": False})
    scale, bias = r(4), r(4)
    mu, var = x.mean(1, keepdims=True), x.var(1, keepdims=True)
    y = (x - mu) / np.sqrt(var + 1e-5) * scale + bias
    run_op("layer_norm", {"X": x, "Scale": scale, "Bias": bias},
           {"Y": y, "Mean": mu.reshape(3), "Variance": var.reshape(3)},
           {"begin_norm_axis": 1, "epsilon": 1e-5, "is_test": True})


@pytest.mark.parametrize("impl,factor", [("upscale_in_train", 1.0), ("downgrade_in_infer", 0.8)])
def test_dropout_implementation_in_test_mode(impl, factor):
    x = r(3, 4)
    run_op("dropout", {"X": x, "Seed": None}, {"Out": x * factor},
           {"dropout_prob": 0.2, "is_test": True, "dropout_implementation": impl,
            "fix_seed": False, "seed": 0})


def test_pool2d_adaptive_batch_norm_conv2d_same():
    x = r(1, 2, 4, 6)
    want = x.reshape(1, 2, 2, 2, 2, 3).mean(axis=(3, 5))
    run_op("pool2d", {"X": x}, {"Out": want},
           {"pooling_type": "avg", "ksize": [2, 2], "adaptive": True, "strides": [1, 1],
            "paddings": [0, 0], "padding_algorithm": "EXPLICIT", "exclusive": True,
            "global_pooling": False, "ceil_mode": False, "data_format": "NCHW"})
    scale, bias, mean, var = r(2), r(2), r(2), np.abs(r(2)) + 0.5
    y = (x - mean[None, :, None, None]) / np.sqrt(var[None, :, None, None] + 1e-5) * \
        scale[None, :, None, None] + bias[None, :, None, None]
    run_op("batch_norm", {"X": x, "Scale": scale, "Bias": bias, "Mean": mean, "Variance": var,
                          "MomentumTensor": None},
           {"Y": y}, {"momentum": 0.9, "epsilon": 1e-5, "is_test": True,
                      "data_layout": "NCHW", "use_global_stats": False,
                      "trainable_statistics": False})
    w = r(3, 2, 3, 3)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((1, 3, 4, 6), np.float32)
    for i in range(4):
        for j in range(6):
            out[0, :, i, j] = np.tensordot(w, xp[0, :, i:i + 3, j:j + 3], axes=3)
    run_op("conv2d", {"Input": x, "Filter": w}, {"Output": out},
           {"strides": [1, 1], "paddings": [0, 0], "padding_algorithm": "SAME", "groups": 1,
            "dilations": [1, 1], "data_format": "NCHW", "exhaustive_search": False})


def test_concat_slice_stack_split():
    a, b = r(2, 3), r(2, 2)
    run_op("concat", {"X": [a, b], "AxisTensor": None}, {"Out": np.concatenate([a, b], 1)},
           {"axis": 1})
    x = r(3, 4, 5)
    run_op("slice", {"Input": x, "StartsTensor": None, "EndsTensor": None,
                     "StartsTensorList": None, "EndsTensorList": None},
           {"Out": x[1, :, 1:3]},
           {"axes": [0, 2], "starts": [1, 1], "ends": [2, 3], "infer_flags": [1, 1],
            "decrease_axis": [0]})
    run_op("stack", {"X": [a, a * 2]}, {"Y": np.stack([a, a * 2], 1)}, {"axis": 1})
    x = r(6, 2)
    msg, blk = new_program()
    add_var(blk, "x", [6, 2])
    for i, n in enumerate([1, 2, 3]):
        add_var(blk, f"s{i}", [n, 2])
    for i in range(3):
        add_var(blk, f"e{i}", [2, 2])
    add_op(blk, "split", {"X": ["x"], "AxisTensor": [], "SectionsTensorList": []},
           {"Out": ["s0", "s1", "s2"]}, {"num": 0, "sections": [1, 2, 3], "axis": 0})
    add_op(blk, "split", {"X": ["x"]}, {"Out": ["e0", "e1", "e2"]},
           {"num": 3, "sections": [], "axis": 0})
    program = pf.program_from_bytes(msg.SerializeToString(), "split.pdmodel")
    with fluid.scope_guard(fluid.Scope()):
        got = fluid.Executor().run(program, feed={"x": x},
                                   fetch_list=["s0", "s1", "s2", "e0", "e1", "e2"])
    for g, w in zip(got, np.split(x, [1, 3]) + np.split(x, 3)):
        np.testing.assert_array_equal(g, w)


def test_expand_v2_tile_where_cast_clip_tensors():
    x = r(3, 1)
    run_op("expand_v2", {"X": x, "Shape": None, "expand_shapes_tensor": None},
           {"Out": np.broadcast_to(x, (2, 3, 4))}, {"shape": [2, 3, 4]})
    run_op("tile", {"X": x, "RepeatTimes": None, "repeat_times_tensor": None},
           {"Out": np.tile(x, (2, 2))}, {"repeat_times": [2, 2]})
    c = np.array([[True, False], [False, True]])
    a, b = r(2, 2), r(2, 2)
    run_op("where", {"Condition": c, "X": a, "Y": b}, {"Out": np.where(c, a, b)})
    run_op("cast", {"X": a}, {"Out": a.astype(np.float64)}, {"in_dtype": 5, "out_dtype": 6})
    lo, hi = np.array([-0.2], np.float32), np.array([0.3], np.float32)
    x = r(4, 5)
    run_op("clip", {"X": x, "Min": lo, "Max": hi}, {"Out": np.clip(x, -0.2, 0.3)},
           {"min": -9.0, "max": 9.0})
    run_op("clip", {"X": x, "Min": None, "Max": hi}, {"Out": np.clip(x, -0.5, 0.3)},
           {"min": -0.5, "max": 9.0})
    run_op("clip", {"X": x, "Min": lo, "Max": None}, {"Out": np.clip(x, -0.2, 0.5)},
           {"min": -9.0, "max": 0.5})


def test_top_k_v2_arg_min_reduce_dtypes():
    x = RNG.permutation(20).reshape(4, 5).astype("float32")
    idx = np.argsort(x, axis=0, kind="stable")[:2]
    run_op("top_k_v2", {"X": x, "K": None},
           {"Out": np.take_along_axis(x, idx, 0), "Indices": idx.astype(np.int64)},
           {"k": 2, "axis": 0, "largest": False, "sorted": True})
    xi = np.arange(12, dtype=np.int32).reshape(3, 4)
    run_op("reduce_sum", {"X": xi}, {"Out": xi.sum(1).astype(np.int64)},
           {"dim": [1], "keep_dim": False, "reduce_all": False, "in_dtype": -1,
            "out_dtype": 3})
    xf = r(3, 4)
    run_op("reduce_mean", {"X": xf}, {"Out": xf.mean(0, keepdims=True)},
           {"dim": [0], "keep_dim": True, "reduce_all": False, "in_dtype": -1,
            "out_dtype": -1})


def test_fill_any_like_shape_gathers_one_hot():
    x = r(3, 4)
    run_op("fill_any_like", {"X": x}, {"Out": np.full((3, 4), 2.5, np.float32)},
           {"value": 2.5, "dtype": -1})
    run_op("shape", {"Input": x}, {"Out": np.array([3, 4], np.int32)})
    idx = np.array([2, 0], np.int64)
    run_op("gather", {"X": x, "Index": idx, "Axis": None}, {"Out": x[idx]},
           {"overwrite": True, "axis": 0})
    run_op("gather", {"X": x, "Index": idx, "Axis": None}, {"Out": x[:, idx]},
           {"overwrite": True, "axis": 1})
    nd = np.array([[0, 1], [2, 3]], np.int64)
    run_op("gather_nd", {"X": x, "Index": nd}, {"Out": x[nd[:, 0], nd[:, 1]]})
    run_op("index_select", {"X": x, "Index": idx}, {"Out": x[:, idx]}, {"dim": 1})
    lab = np.array([[1], [3]], np.int64)
    run_op("one_hot_v2", {"X": lab, "depth_tensor": None},
           {"Out": np.eye(4, dtype=np.float32)[lab]},
           {"depth": 4, "dtype": 5, "allow_out_of_range": False})


# -- errors -----------------------------------------------------------------------------------
def test_unmappable_combinations_name_op_and_file():
    msg, b = new_program()
    add_var(b, "x", [2, 3])
    add_var(b, "y", [2, 3])
    add_var(b, "lo", [1])
    add_op(b, "clip_grad", {"X": ["x"], "Min": ["lo"], "Out@GRAD": ["y"]}, {"X@GRAD": ["x"]},
           {"min": 0.0, "max": 1.0})
    with pytest.raises(pf.PaddleFormatError, match=r"grads\.pdmodel.*'clip_grad'.*Min/Max"):
        pf.program_from_bytes(msg.SerializeToString(), "grads.pdmodel")
    msg, b = new_program()
    add_var(b, "x", [2, 3])
    add_op(b, "frobnicate_grad", {"X": ["x"]}, {"X@GRAD": ["x"]})
    with pytest.raises(pf.PaddleFormatError,
                       match=r"t\.pdmodel: op type 'frobnicate_grad' .* not supported"):
        pf.program_from_bytes(msg.SerializeToString(), "t.pdmodel")
    msg, b = new_program()
    add_var(b, "x", [2, 3])
    add_var(b, "y", [2, 3])
    add_op(b, "relu_grad", {"Out": ["x"], "Out@GRAD": ["x"]},
           {"X@GRAD": ["y"], "Extra@GRAD": ["x"]})
    with pytest.raises(pf.PaddleFormatError, match="output slot 'Extra@GRAD'"):
        pf.program_from_bytes(msg.SerializeToString(), "t.pdmodel")
    msg, b = new_program()
    add_var(b, "x", [2, 3])
    add_op(b, "fill_constant", {}, {"Out": ["x"]},
           {"shape": Longs([2, 3]), "dtype": 5, "value": 0.0, "str_value": "abc"})
    with pytest.raises(pf.PaddleFormatError, match="str_value 'abc' is not a number"):
        pf.program_from_bytes(msg.SerializeToString(), "t.pdmodel")


def test_silu_unbind_interp_v2():
    x = r(3, 4)
    run_op("silu", {"X": x}, {"Out": x / (1 + np.exp(-x))}, {"use_mkldnn": False})
    msg, b = new_program()
    add_var(b, "x", [3, 4])
    for i in range(3):
        add_var(b, f"u{i}", [4])
    add_op(b, "unbind", {"X": ["x"]}, {"Out": ["u0", "u1", "u2"]}, {"axis": 0})
    program = pf.program_from_bytes(msg.SerializeToString(), "unbind.pdmodel")
    with fluid.scope_guard(fluid.Scope()):
        got = fluid.Executor().run(program, feed={"x": x}, fetch_list=["u0", "u1", "u2"])
    for i in range(3):
        np.testing.assert_array_equal(got[i], x[i])
    img = r(1, 2, 2, 3)
    run_op("nearest_interp_v2", {"X": img, "OutSize": None, "SizeTensor": None, "Scale": None},
           {"Out": img.repeat(2, axis=2).repeat(2, axis=3)},
           {"out_d": -1, "out_h": -1, "out_w": -1, "scale": [2.0, 2.0],
            "interp_method": "nearest", "align_corners": False, "align_mode": 1,
            "data_layout": "NCHW"})
    # bilinear, align_corners: source coordinate i * (in - 1) / (out - 1)
    hs, ws = np.linspace(0, 1, 3), np.linspace(0, 2, 5)
    h0, w0 = np.floor(hs).astype(int).clip(0, 0), np.floor(ws).astype(int).clip(0, 1)
    fh, fw = hs - h0, ws - w0
    a = img[:, :, h0][:, :, :, w0]
    bw = img[:, :, h0][:, :, :, w0 + 1]
    c = img[:, :, h0 + 1][:, :, :, w0]
    d = img[:, :, h0 + 1][:, :, :, w0 + 1]
    fh, fw = fh[:, None], fw[None, :]
    want = (a * (1 - fh) * (1 - fw) + bw * (1 - fh) * fw + c * fh * (1 - fw) +
            d * fh * fw).astype("float32")
    run_op("bilinear_interp_v2", {"X": img, "OutSize": None, "SizeTensor": None, "Scale": None},
           {"Out": want},
           {"out_d": -1, "out_h": 3, "out_w": 5, "scale": [], "interp_method": "bilinear",
            "align_corners": True, "align_mode": 1, "data_layout": "NCHW"})


def test_interp_v2_per_dim_scales_and_missing_kind_are_errors():
    msg, b = new_program()
    add_var(b, "x", [1, 1, 2, 2])
    add_var(b, "y", [1, 1, 4, 6])
    add_op(b, "bilinear_interp_v2", {"X": ["x"]}, {"Out": ["y"]},
           {"scale": [2.0, 3.0], "interp_method": "bilinear"})
    with pytest.raises(pf.PaddleFormatError, match=r"i\.pdmodel.*per-dim scales \[2.0, 3.0\]"):
        pf.program_from_bytes(msg.SerializeToString(), "i.pdmodel")
    msg, b = new_program()
    add_var(b, "x", [1, 1, 2, 2])
    add_op(b, "stft", {"X": ["x"]}, {"Out": ["x"]}, {"n_fft": 2})     # complex: not provided
    with pytest.raises(pf.PaddleFormatError, match="op type 'stft'"):
        pf.program_from_bytes(msg.SerializeToString(), "i.pdmodel")


def test_linear_interp_v2_resizes_the_last_axis():
    # (session 41: the 1-D kind maps onto fluidlite's linear_interp)
    x = r(2, 3, 4)
    src = np.maximum((np.arange(8) + 0.5) * 0.5 - 0.5, 0)       # half-pixel centres, ratio 1/2
    lo = np.minimum(src.astype(int), 3)
    hi = np.minimum(lo + 1, 3)
    d = src - lo
    want = (x[..., lo] * (1 - d) + x[..., hi] * d).astype(x.dtype)
    run_op("linear_interp_v2", {"X": x, "OutSize": None, "SizeTensor": None, "Scale": None},
           {"Out": want}, {"data_layout": "NCHW", "out_d": -1, "out_h": -1, "out_w": 8,
                           "scale": [], "interp_method": "linear", "align_corners": False,
                           "align_mode": 0})


def test_sync_batch_norm_and_empty():
    x = r(2, 3, 2, 2)
    scale, bias, mean, var = r(3), r(3), r(3), np.abs(r(3)) + 0.5
    sh = (None, slice(None), None, None)
    y = (x - mean[sh]) / np.sqrt(var[sh] + 1e-5) * scale[sh] + bias[sh]
    run_op("sync_batch_norm", {"X": x, "Scale": scale, "Bias": bias, "Mean": mean,
                               "Variance": var},
           {"Y": y}, {"momentum": 0.9, "epsilon": 1e-5, "is_test": True,
                      "data_layout": "NCHW"})
    run_op("empty", {"ShapeTensor": None, "ShapeTensorList": None},
           {"Out": np.zeros((2, 3), np.float32)}, {"shape": Longs([2, 3]), "dtype": 5})


def test_matmul_v2_vector_dot_is_zero_d():
    x, y = r(4), r(4)
    out = run_op("matmul_v2", {"X": x, "Y": y}, {"Out": np.array(x @ y, np.float32)},
                 {"trans_x": False, "trans_y": False})["Out"]
    assert out.shape == ()


def test_matmul_v2_grad_of_a_vector_dot():
    msg, b = new_program()
    for n, shape in [("x", [4]), ("y", [4]), ("o", []), ("o@GRAD", []), ("x@GRAD", [4]),
                     ("y@GRAD", [4])]:
        add_var(b, n, shape)
    add_op(b, "matmul_v2", {"X": ["x"], "Y": ["y"]}, {"Out": ["o"]},
           {"trans_x": False, "trans_y": False})
    add_op(b, "fill_constant", {}, {"Out": ["o@GRAD"]},
           {"shape": Longs([]), "value": 2.0, "dtype": 5}, role=257)
    add_op(b, "matmul_v2_grad", {"X": ["x"], "Y": ["y"], "Out@GRAD": ["o@GRAD"]},
           {"X@GRAD": ["x@GRAD"], "Y@GRAD": ["y@GRAD"]}, {"trans_x": False, "trans_y": False},
           role=1)
    program = pf.program_from_bytes(msg.SerializeToString(), "dot.pdmodel")
    x, y = r(4), r(4)
    with fluid.scope_guard(fluid.Scope()):
        o, gx, gy = fluid.Executor().run(program, feed={"x": x, "y": y},
                                         fetch_list=["o", "x@GRAD", "y@GRAD"])
    np.testing.assert_allclose(o, x @ y, rtol=1e-6)
    np.testing.assert_allclose(gx, 2 * y, rtol=1e-6)
    np.testing.assert_allclose(gy, 2 * x, rtol=1e-6)


def test_interp_v2_non_integer_scaled_size_is_refused():
    msg, b = new_program()
    add_var(b, "x", [1, 1, 5, 5])
    add_var(b, "y", [1, 1, 7, 7])
    add_op(b, "bilinear_interp_v2", {"X": ["x"]}, {"Out": ["y"]},
           {"scale": [1.5, 1.5], "interp_method": "bilinear", "align_corners": False,
            "align_mode": 0, "out_h": -1, "out_w": -1})
    with pytest.raises(pf.PaddleFormatError, match="1.5 times input size 5 is not an integer"):
        pf.program_from_bytes(msg.SerializeToString(), "i.pdmodel")


def test_reduce_sum_out_dtype_forward_and_grad_dtypes():
    msg, b = new_program()
    add_var(b, "x", [2, 3])
    add_var(b, "x@GRAD", [2, 3])
    add_var(b, "s", [2], "float64")
    add_var(b, "s@GRAD", [2], "float64")
    attrs = {"dim": [1], "keep_dim": False, "reduce_all": False, "in_dtype": -1,
             "out_dtype": 6}
    add_op(b, "reduce_sum", {"X": ["x"]}, {"Out": ["s"]}, attrs)
    add_op(b, "fill_constant", {}, {"Out": ["s@GRAD"]},
           {"shape": Longs([2]), "value": 0.5, "dtype": 6}, role=257)
    add_op(b, "reduce_sum_grad", {"X": ["x"], "Out@GRAD": ["s@GRAD"]}, {"X@GRAD": ["x@GRAD"]},
           attrs, role=1)
    program = pf.program_from_bytes(msg.SerializeToString(), "r.pdmodel")
    x = r(2, 3)
    with fluid.scope_guard(fluid.Scope()):
        s, dx = fluid.Executor().run(program, feed={"x": x}, fetch_list=["s", "x@GRAD"])
    assert s.dtype == np.float64 and dx.dtype == np.float32
    np.testing.assert_allclose(s, x.astype(np.float64).sum(1), rtol=1e-12)
    np.testing.assert_array_equal(dx, np.full((2, 3), 0.5, np.float32))


def test_pad3d_as_paddle2_writes_it():
    x = r(1, 2, 3, 4, 5)
    run_op("pad3d", {"X": x, "Paddings": None},
           {"Out": np.pad(x, [(0, 0), (0, 0), (1, 1), (0, 2), (2, 1)], mode="reflect")},
           {"paddings": [2, 1, 0, 2, 1, 1], "mode": "reflect", "value": 0.0,
            "data_format": "NCDHW"})


def _conv_transpose_ref(x, w, stride, pad, out_hw, groups=1):
    n, c, h, wd = x.shape
    cg, oc_g, kh, kw = w.shape[0] // groups, w.shape[1], w.shape[2], w.shape[3]
    out = np.zeros((n, oc_g * groups, out_hw[0] + 2 * pad, out_hw[1] + 2 * pad))
    for g in range(groups):
        for i in range(h):
            for j in range(wd):
                patch = np.einsum("nc,cokl->nokl", x[:, g * cg:(g + 1) * cg, i, j],
                                  w[g * cg:(g + 1) * cg])
                out[:, g * oc_g:(g + 1) * oc_g, i * stride:i * stride + kh,
                    j * stride:j * stride + kw] += patch[:, :, :out.shape[2] - i * stride,
                                                         :out.shape[3] - j * stride]
    return out[:, :, pad:pad + out_hw[0], pad:pad + out_hw[1]].astype("float32")


def test_conv2d_transpose_output_padding_and_depthwise():
    x, w = r(1, 2, 3, 3), r(2, 3, 3, 3)
    out_hw = (2 * 2 - 2 + 3 + 1, 2 * 2 - 2 + 3 + 1)       # (in-1)*s - 2p + k + output_padding
    run_op("conv2d_transpose", {"Input": x, "Filter": w, "Bias": None},
           {"Output": _conv_transpose_ref(x, w, 2, 1, out_hw)},
           {"strides": [2, 2], "paddings": [1, 1], "output_padding": [1, 1],
            "output_size": [], "padding_algorithm": "EXPLICIT", "groups": 1,
            "dilations": [1, 1], "data_format": "NCHW"})
    wd = r(2, 1, 3, 3)
    run_op("depthwise_conv2d_transpose", {"Input": x, "Filter": wd},
           {"Output": _conv_transpose_ref(x, wd, 1, 0, (5, 5), groups=2)},
           {"strides": [1, 1], "paddings": [0, 0], "output_padding": [],
            "padding_algorithm": "EXPLICIT", "groups": 2, "dilations": [1, 1],
            "data_format": "NCHW"})


def test_expand_as_v2():
    x = r(3, 1)
    run_op("expand_as_v2", {"X": x, "Y": None}, {"Out": np.broadcast_to(x, (2, 3, 4))},
           {"target_shape": [2, 3, 4]})


def test_conv2d_transpose_output_padding_needs_static_output_size():
    msg, b = new_program()
    add_var(b, "x", [-1, 2, 3, 3])
    add_var(b, "w", [2, 3, 3, 3])
    add_var(b, "y", [-1, 3, -1, -1])
    add_op(b, "conv2d_transpose", {"Input": ["x"], "Filter": ["w"]}, {"Output": ["y"]},
           {"strides": [2, 2], "paddings": [1, 1], "output_padding": [1, 1]})
    with pytest.raises(pf.PaddleFormatError, match=r"ct\.pdmodel.*output_padding \[1, 1\] "
                                                   r"needs the output's spatial size"):
        pf.program_from_bytes(msg.SerializeToString(), "ct.pdmodel")


def test_dropped_semantic_attribute_is_a_warning(caplog):
    msg, b = new_program()
    add_var(b, "x", [2, 3])
    add_var(b, "y", [2, 3])
    add_op(b, "relu", {"X": ["x"]}, {"Out": ["y"]}, {"use_mkldnn": True, "fancy_mode": 3,
                                                     "unused_flag": False})
    with caplog.at_level("WARNING", logger="fluidlite"):
        pf.program_from_bytes(msg.SerializeToString(), "w.pdmodel")
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warned) == 1 and "w.pdmodel" in warned[0] and "'fancy_mode': 3" in warned[0]
    assert "use_mkldnn" not in warned[0] and "unused_flag" not in warned[0]


def test_paddle2_programs_read_without_warnings(caplog):
    from test_paddle_format import paddle2_program
    with caplog.at_level("WARNING", logger="fluidlite"):
        pf.program_from_bytes(paddle2_program(), "model.pdmodel")
        x = r(2, 3)
        run_op("transpose2", {"X": x}, {"Out": x.T}, {"axis": [1, 0], "data_format": "NCHW",
                                                      "use_mkldnn": False})
    assert not [r for r in caplog.records if r.levelname == "WARNING"]


def test_full_reductions_declared_zero_d_come_out_zero_d():
    x = r(3, 4)
    out = run_op("reduce_mean", {"X": x}, {"Out": np.array(x.mean(), np.float32)},
                 {"dim": [], "keep_dim": False, "reduce_all": True})["Out"]
    assert out.shape == ()
    out = run_op("arg_max", {"X": x}, {"Out": np.array(np.argmax(x), np.int64)},
                 {"axis": Long(0), "dtype": 3, "flatten": True, "keepdims": False})["Out"]
    assert out.shape == ()
    out = run_op("reduce_sum", {"X": x}, {"Out": x.sum(1, keepdims=True)},
                 {"dim": [1], "keep_dim": True, "reduce_all": False})["Out"]
    assert out.shape == (3, 1)


def test_concat_and_split_with_axis_tensor():
    a, b = r(2, 3), r(2, 2)
    run_op("concat", {"X": [a, b], "AxisTensor": np.array([1], np.int32)},
           {"Out": np.concatenate([a, b], 1)}, {"axis": 0})
    msg, blk = new_program()
    add_var(blk, "x", [2, 4])
    add_var(blk, "ax", [1], "int32")
    add_var(blk, "s0", [2, 2])
    add_var(blk, "s1", [2, 2])
    add_op(blk, "split", {"X": ["x"], "AxisTensor": ["ax"], "SectionsTensorList": []},
           {"Out": ["s0", "s1"]}, {"num": 2, "sections": [], "axis": 0})
    program = pf.program_from_bytes(msg.SerializeToString(), "split.pdmodel")
    x = r(2, 4)
    with fluid.scope_guard(fluid.Scope()):
        got = fluid.Executor().run(program, feed={"x": x, "ax": np.array([1], np.int32)},
                                   fetch_list=["s0", "s1"])
    np.testing.assert_array_equal(got[0], x[:, :2])
    np.testing.assert_array_equal(got[1], x[:, 2:])


def test_flatten_contiguous_range_from_one_to_last_is_flatten2():
    x = r(2, 3, 4)
    msg, b = new_program()
    add_var(b, "x", [-1, 3, 4])
    add_var(b, "y", [-1, 12])
    add_var(b, "xs", [0, -1, 3, 4])
    add_var(b, "z", [6, 4])
    add_op(b, "flatten_contiguous_range", {"X": ["x"]}, {"Out": ["y"], "XShape": ["xs"]},
           {"start_axis": 1, "stop_axis": -1})
    add_op(b, "flatten_contiguous_range", {"X": ["x"]}, {"Out": ["z"]},
           {"start_axis": 0, "stop_axis": 1})
    program = pf.program_from_bytes(msg.SerializeToString(), "f.pdmodel")
    assert [op.type for op in program.global_block().ops] == ["flatten2",
                                                             "flatten_contiguous_range"]
    with fluid.scope_guard(fluid.Scope()):
        y, z = fluid.Executor().run(program, feed={"x": x}, fetch_list=["y", "z"])
    np.testing.assert_array_equal(y, x.reshape(2, 12))
    np.testing.assert_array_equal(z, x.reshape(6, 4))
