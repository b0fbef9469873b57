"""Paddle's own files (issue 18): the ProgramDesc protobuf and LoDTensor streams, read and
written by fluidlite.io; byte layouts as in docs/file_formats.md."""
import os
import struct

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.formats import paddle as pf
from fluidlite.io import CheckpointError

MANIFEST = ".fluidlite-manifest.json"


# -- raw protobuf bytes, laid out by hand as Paddle writes them (independent of the codec) ----
def varint(n):
    n &= (1 << 64) - 1                 # negative int32/int64: 10-byte two's complement
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(num, wire, payload):
    key = varint(num << 3 | wire)
    if wire == 0:
        return key + varint(payload)
    if wire == 5:
        return key + struct.pack("<f", payload)
    return key + varint(len(payload)) + payload


def s(num, text):
    return field(num, 2, text.encode() if isinstance(text, str) else text)


def tensor_var(name, dims, persistable=False, dtype=5, parameter=None, need_check_feed=None):
    tdesc = field(1, 0, dtype) + b"".join(field(2, 0, d) for d in dims)
    vtype = field(1, 0, 7) + s(3, s(1, tdesc) + field(2, 0, 0))
    out = s(1, name) + s(2, vtype) + field(3, 0, int(persistable))
    if need_check_feed is not None:
        out += field(4, 0, int(need_check_feed))
    if parameter is not None:
        out += field(5, 0, int(parameter)) + field(6, 0, 0)
    return out


def plain_var(name, vtype):
    return s(1, name) + s(2, field(1, 0, vtype)) + field(3, 0, 1)


def slot(tag, name, args):
    return s(tag, s(1, name) + b"".join(s(2, a) for a in args))


def attr_int(name, v):
    return s(4, s(1, name) + field(2, 0, 0) + field(3, 0, v))


def attr_float(name, v):
    return s(4, s(1, name) + field(2, 0, 1) + field(4, 5, v))


def attr_str(name, v):
    return s(4, s(1, name) + field(2, 0, 2) + s(5, v))


def attr_bool(name, v):
    return s(4, s(1, name) + field(2, 0, 6) + field(10, 0, int(v)))


def attr_longs(name, vs):
    return s(4, s(1, name) + field(2, 0, 11) + b"".join(field(15, 0, v) for v in vs))


def attr_long(name, v):
    return s(4, s(1, name) + field(2, 0, 9) + field(13, 0, v))


def attr_strings_empty(name):
    return s(4, s(1, name) + field(2, 0, 5))


def op(type_, inputs, outputs, attrs=b""):
    body = b"".join(slot(1, k, v) for k, v in inputs) + \
        b"".join(slot(2, k, v) for k, v in outputs)
    return s(4, body + s(3, type_) + attrs)


def program_bytes(vars_, ops, version=2006002):
    block = field(1, 0, 0) + field(2, 0, -1) + b"".join(s(3, v) for v in vars_) + b"".join(ops)
    return s(1, block) + s(4, field(1, 0, version)) + \
        s(5, s(1, s(1, "fill_constant") + s(2, field(1, 0, 2))))      # op_version_map


def paddle2_program():
    """A Paddle 2.x-style inference program: feeds stored in reverse col order, matmul_v2,
    lookup_table_v2 (padding_idx LONG), fill_constant with str_value, the appended scale op
    with its empty ScaleTensor slot, fetch; clipped and unclipped extra attrs."""
    common = attr_int("op_role", 0) + attr_str("op_device", "") + \
        attr_str("op_namescope", "/") + attr_strings_empty("op_role_var")
    vars_ = [tensor_var("emb.w", [10, 3], True, parameter=True),
             tensor_var("ids", [-1, 1], dtype=3, need_check_feed=True),
             tensor_var("x", [-1, 3], need_check_feed=True),
             tensor_var("w", [3, 2], True, parameter=True),
             tensor_var("emb.out", [-1, 1, 3]),
             tensor_var("mm.out", [-1, 2]),
             tensor_var("c", [1]),
             tensor_var("sum.out", [-1, 2]),
             tensor_var("save_infer_model/scale_0.tmp_0", [-1, 2]),
             tensor_var("save_infer_model/scale_1.tmp_0", [-1, 1, 3]),
             plain_var("feed", 9), plain_var("fetch", 10)]
    ops = [op("feed", [("X", ["feed"])], [("Out", ["x"])], attr_int("col", 1) + common),
           op("feed", [("X", ["feed"])], [("Out", ["ids"])], attr_int("col", 0) + common),
           op("lookup_table_v2", [("Ids", ["ids"]), ("W", ["emb.w"])],
              [("Out", ["emb.out"])],
              attr_long("padding_idx", 0) + attr_bool("is_sparse", False) + common),
           op("matmul_v2", [("X", ["x"]), ("Y", ["w"])], [("Out", ["mm.out"])],
              attr_bool("trans_x", False) + attr_bool("trans_y", False) + common +
              attr_bool("use_mkldnn", False)),
           op("fill_constant", [("ShapeTensor", []), ("ValueTensor", [])], [("Out", ["c"])],
              attr_longs("shape", [1]) + attr_float("value", 0.0) +
              attr_str("str_value", "0.5") + attr_int("dtype", 5) +
              attr_bool("force_cpu", False) + attr_int("place_type", -1) + common),
           op("elementwise_add", [("X", ["mm.out"]), ("Y", ["c"])], [("Out", ["sum.out"])],
              attr_int("axis", -1) + common),
           op("scale", [("ScaleTensor", []), ("X", ["sum.out"])],
              [("Out", ["save_infer_model/scale_0.tmp_0"])],
              attr_float("bias", 0.0) + attr_bool("bias_after_scale", True) +
              attr_float("scale", 1.0) + common),
           op("scale", [("ScaleTensor", []), ("X", ["emb.out"])],
              [("Out", ["save_infer_model/scale_1.tmp_0"])],
              attr_float("bias", 0.0) + attr_bool("bias_after_scale", True) +
              attr_float("scale", 1.0) + common),
           op("fetch", [("X", ["save_infer_model/scale_1.tmp_0"])], [("Out", ["fetch"])],
              attr_int("col", 1) + common),
           op("fetch", [("X", ["save_infer_model/scale_0.tmp_0"])], [("Out", ["fetch"])],
              attr_int("col", 0) + common)]
    return program_bytes(vars_, ops)


def stream(arr, lod=()):
    """A LoDTensor stream laid out by hand (docs/file_formats.md)."""
    codes = {np.dtype(np.float32): 5, np.dtype(np.int64): 3, np.dtype(np.float64): 6}
    out = struct.pack("<IQ", 0, len(lod))
    for level in lod:
        out += struct.pack("<Q", 8 * len(level)) + np.asarray(level, "<u8").tobytes()
    desc = field(1, 0, codes[arr.dtype]) + b"".join(field(2, 0, d) for d in arr.shape)
    return out + struct.pack("<Ii", 0, len(desc)) + desc + arr.tobytes()


PARAMS = {"emb.w": np.arange(30, dtype=np.float32).reshape(10, 3) / 7,
          "w": np.array([[1, 2], [3, 4], [5, 6]], np.float32) / 3}


def write_paddle2_model(directory):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "model.pdmodel"), "wb") as f:
        f.write(paddle2_program())
    with open(os.path.join(directory, "model.pdiparams"), "wb") as f:
        f.write(b"".join(stream(PARAMS[n]) for n in sorted(PARAMS)))


# -- codec against the documented bytes -------------------------------------------------------
def test_var_desc_bytes_match_paddle_layout():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        fluid.layers.fc(fluid.data("x", [-1, 13], "float32"), size=32)
    data = pf.program_to_bytes(main)
    # fit_a_line's fc_0.b_0 VarDesc as Paddle wrote it (reference section 2.1)
    want = bytes.fromhex("1a1c0a0866635f302e625f30120a08071a060a040805102018012801300 0"
                         .replace(" ", ""))
    assert want in data
    assert data.startswith(b"\x0a") and bytes.fromhex("10ffffffffffffffffff01") in data[:20]


def test_tensor_stream_bytes_match_paddle_layout():
    b = pf.tensor_to_bytes(np.array([0.01821987], np.float32))
    assert b == bytes.fromhex("00000000" "0000000000000000" "00000000" "04000000" "08051001") + \
        np.array([0.01821987], "<f4").tobytes()
    assert len(b) == 28
    scalar = pf.tensor_to_bytes(np.array(3.25, np.float32))      # 0-D: no dims, 26 bytes
    assert len(scalar) == 26 and scalar[16:22] == bytes.fromhex("020000000805")
    lod2 = pf.tensor_to_bytes(np.arange(12, dtype=np.int64).reshape(6, 2),
                              [[0, 1, 3], [0, 2, 3, 6]])
    assert len(lod2) == 194 and lod2 == stream(np.arange(12, dtype=np.int64).reshape(6, 2),
                                               [[0, 1, 3], [0, 2, 3, 6]])
    arr, lod, end = pf.read_tensor(lod2, 0, "f", "t_lod2")
    assert end == 194 and lod == [[0, 1, 3], [0, 2, 3, 6]]
    np.testing.assert_array_equal(arr, np.arange(12).reshape(6, 2))


@pytest.mark.parametrize("dtype, code", [("bool", 0), ("int16", 1), ("int32", 2), ("int64", 3),
                                         ("float16", 4), ("float32", 5), ("float64", 6),
                                         ("uint8", 20), ("int8", 21)])
def test_tensor_dtype_codes(dtype, code):
    a = (np.arange(6).reshape(2, 3) % 2).astype(dtype)
    b = pf.tensor_to_bytes(a)
    assert b[20:22] == bytes([0x08, code])
    back, _, end = pf.read_tensor(b, 0, "f", "v")
    assert end == len(b) and back.dtype == a.dtype and back.tobytes() == a.tobytes()


def test_read_hand_laid_paddle2_program():
    program = pf.program_from_bytes(paddle2_program(), "model.pdmodel")
    block = program.global_block()
    types = [o.type for o in block.ops]
    assert types == ["feed", "feed", "lookup_table_v2", "matmul", "fill_constant",
                     "elementwise_add", "scale", "scale", "fetch", "fetch"]
    mm = block.ops[3]
    assert mm.attr("transpose_X") is False and mm.attr("transpose_Y") is False
    assert mm.attr("alpha") == 1.0 and not mm.has_attr("trans_x")
    assert block.ops[4].attr("value") == 0.5 and block.ops[4].attr("shape") == [1]
    assert block.ops[2].attr("padding_idx") == 0
    assert block.ops[6].input("ScaleTensor") == [] and block.ops[6].attr("scale") == 1.0
    assert isinstance(block.var("w"), fluid.framework.Parameter)
    assert block.var("x").shape == (-1, 3)
    assert block.var("ids").dtype == fluid.core.VarDesc.VarType.INT64
    feeds, fetches = fluid.io.feed_fetch_targets(program)
    assert feeds == ["ids", "x"]
    assert [v.name for v in fetches] == ["save_infer_model/scale_0.tmp_0",
                                         "save_infer_model/scale_1.tmp_0"]


def test_load_paddle2_inference_model_and_run(tmp_path):
    write_paddle2_model(tmp_path / "m")
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    ids = np.array([[0], [4], [9]], np.int64)
    x = np.array([[1, 0, 0], [0, 1, 0], [1, 1, 1]], np.float32)
    with fluid.scope_guard(scope):
        program, feeds, fetches = fluid.io.load_inference_model(
            str(tmp_path / "m"), exe, model_filename="model.pdmodel",
            params_filename="model.pdiparams")
        out, emb = exe.run(program, feed={"ids": ids, "x": x}, fetch_list=fetches)
    np.testing.assert_allclose(out, x @ PARAMS["w"] + 0.5, rtol=1e-6)
    want_emb = PARAMS["emb.w"][ids]
    want_emb[0] = 0.0                                   # padding_idx 0 gives zeros
    np.testing.assert_array_equal(emb, want_emb)


def test_paddle2_prefix_and_extensionless_names(tmp_path):
    write_paddle2_model(tmp_path / "m")
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(fluid.Scope()):
        program, feeds, _ = fluid.io.load_inference_model(
            str(tmp_path / "m"), exe, model_filename="model", params_filename="model")
        assert feeds == ["ids", "x"]
    with fluid.scope_guard(fluid.Scope()):
        program, feeds, _ = fluid.io.load_inference_model(str(tmp_path / "m" / "model"), exe)
        assert feeds == ["ids", "x"]


def test_unknown_op_names_op_and_file(tmp_path):
    data = program_bytes([tensor_var("x", [-1, 3])],
                         [op("fancy_new_op", [("X", ["x"])], [("Out", ["x"])])])
    (tmp_path / "__model__").write_bytes(data)
    exe = fluid.Executor(fluid.CPUPlace())
    with pytest.raises(pf.PaddleFormatError,
                       match=r"__model__'.*op type 'fancy_new_op'.*not supported"):
        fluid.io.load_inference_model(str(tmp_path), exe)


# -- round trips ------------------------------------------------------------------------------
def build_trained():
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 3
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 4], "float32")
        ids = fluid.data("ids", [-1, 1], "int64")
        e = fluid.layers.embedding(ids, size=[7, 4], padding_idx=1)
        h = fluid.layers.fc(fluid.layers.elementwise_add(x, e), size=8, act="tanh")
        h = fluid.layers.dropout(h, 0.25)
        pred = fluid.layers.fc(h, size=3, act="softmax")
        loss = fluid.layers.mean(pred)
        fluid.optimizer.Adam(learning_rate=0.01).minimize(loss)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    feed = {"x": np.random.default_rng(0).normal(size=(5, 4)).astype("float32"),
            "ids": np.array([[0], [1], [2], [3], [6]], np.int64)}
    with fluid.scope_guard(scope):
        exe.run(startup)
        exe.run(main, feed=feed, fetch_list=[loss])
    return main, startup, pred, scope, exe, feed


@pytest.fixture(scope="module")
def trained():
    return build_trained()


def test_program_round_trip_main_and_startup(trained):
    main, startup, *_ = trained
    for program in (main, startup):
        back = pf.program_from_bytes(pf.program_to_bytes(program), "mem")
        assert str(back) == str(program)
        assert pf.program_to_bytes(back) == pf.program_to_bytes(program)


def test_float_attr_exact_and_float32_compatible():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [-1, 2], "float32")
        fluid.layers.scale(x, scale=1 / 3, bias=0.2)
    desc = pf.program_to_bytes(main)
    back = pf.program_from_bytes(desc, "mem")
    assert back.global_block().ops[-1].attr("scale") == 1 / 3       # exact (float64 field)
    assert back.global_block().ops[-1].attr("bias") == 0.2          # shortest float32 decimal
    msg = pf.messages()["ProgramDesc"]()
    msg.ParseFromString(desc)
    attrs = {a.name: a for a in msg.blocks[0].ops[-1].attrs}
    assert attrs["scale"].type == 1 and attrs["scale"].f == np.float32(1 / 3)  # Paddle reads f
    assert not attrs["bias"].HasField("float64")


def scope_arrays(scope, names):
    return {n: np.array(scope.find_var(n).get_tensor()) for n in names}


@pytest.mark.parametrize("params_filename", [None, "__params__"])
def test_inference_model_round_trip_default_is_paddle(tmp_path, trained, params_filename):
    main, startup, pred, scope, exe, feed = trained
    with fluid.scope_guard(scope):
        fluid.io.save_inference_model(str(tmp_path / "p"), ["x", "ids"], [pred], exe, main,
                                      params_filename=params_filename)
        fluid.io.save_inference_model(str(tmp_path / "j"), ["x", "ids"], [pred], exe, main,
                                      params_filename=params_filename, format="json")
        want = exe.run(main.clone(for_test=True), feed=feed, fetch_list=[pred])[0]
    model = (tmp_path / "p" / "__model__").read_bytes()
    assert model[:1] == b"\x0a" and (tmp_path / "j" / "__model__").read_bytes()[:1] == b"{"
    if params_filename is None:
        assert (tmp_path / "p" / "fc_0.w_0").read_bytes()[:12] == bytes(12)
    else:
        assert (tmp_path / "p" / "__params__").read_bytes()[:4] == bytes(4)
    results = {}
    for kind in ("p", "j"):
        s = fluid.Scope()
        with fluid.scope_guard(s):
            program, feeds, fetches = fluid.io.load_inference_model(
                str(tmp_path / kind), exe, params_filename=params_filename)
            out = exe.run(program, feed=feed, fetch_list=fetches)[0]
            names = [v.name for v in fluid.io.get_program_persistable_vars(program)]
            results[kind] = (str(program), scope_arrays(s, names), out, feeds)
    assert results["p"][0] == results["j"][0]
    assert results["p"][3] == ["x", "ids"]
    for n, a in results["j"][1].items():
        b = results["p"][1][n]
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
        assert a.tobytes() == np.array(scope.find_var(n).get_tensor()).tobytes()
    np.testing.assert_array_equal(results["p"][2], want)


def test_persistables_and_fluid_save_round_trip(tmp_path, trained):
    main, startup, pred, scope, exe, feed = trained
    names = [v.name for v in fluid.io.get_program_persistable_vars(main)]
    with fluid.scope_guard(scope):
        fluid.io.save_persistables(exe, str(tmp_path / "d"), main)
        fluid.io.save_persistables(exe, str(tmp_path), main, filename="all")
        fluid.save(main, str(tmp_path / "ck" / "model"))
        want = scope_arrays(scope, names)
    assert (tmp_path / "ck" / "model.pdmodel").read_bytes()[:1] == b"\x0a"
    saved_program = fluid.Program.parse_from_string(
        (tmp_path / "ck" / "model.pdmodel").read_bytes())
    assert str(saved_program) == str(main)
    for load in (lambda: fluid.io.load_persistables(exe, str(tmp_path / "d"), main),
                 lambda: fluid.io.load_persistables(exe, str(tmp_path), main, filename="all"),
                 lambda: fluid.load(main, str(tmp_path / "ck" / "model"), exe)):
        s = fluid.Scope()
        with fluid.scope_guard(s):
            load()
            got = scope_arrays(s, names)
        assert all(got[n].tobytes() == want[n].tobytes() and got[n].dtype == want[n].dtype
                   for n in names)
    state = fluid.io.load_program_state(str(tmp_path / "d"))
    assert set(state) == set(names)


def test_save_vars_bytes_and_back(trained):
    main, startup, pred, scope, exe, feed = trained
    with fluid.scope_guard(scope):
        blob = fluid.io.save_params(exe, None, main)
        want = scope_arrays(scope, [p.name for p in main.all_parameters()])
    assert blob[:4] == bytes(4)
    s = fluid.Scope()
    with fluid.scope_guard(s):
        fluid.io.load_params(exe, None, main, filename=blob)
        assert all(np.array(s.find_var(n).get_tensor()).tobytes() == a.tobytes()
                   for n, a in want.items())


def test_bad_format_argument(tmp_path, trained):
    main, startup, pred, scope, exe, feed = trained
    with fluid.scope_guard(scope), pytest.raises(ValueError, match="format must be one of"):
        fluid.io.save_params(exe, str(tmp_path), main, format="onnx")
    assert not os.listdir(tmp_path)


# -- bad input --------------------------------------------------------------------------------
@pytest.fixture
def saved(tmp_path, trained):
    main, startup, pred, scope, exe, feed = trained
    with fluid.scope_guard(scope):
        fluid.io.save_inference_model(str(tmp_path), ["x", "ids"], [pred], exe, main)
    os.remove(tmp_path / MANIFEST)              # as if Paddle had written the files
    target = fluid.Scope()
    return tmp_path, exe, target


def assert_untouched(scope):
    assert scope.find_var("fc_0.w_0") is None and scope.find_var("fc_1.b_0") is None


def test_truncated_protobuf(saved):
    path, exe, target = saved
    data = (path / "__model__").read_bytes()
    (path / "__model__").write_bytes(data[:len(data) // 2])
    with fluid.scope_guard(target), pytest.raises(
            pf.PaddleFormatError, match=r"__model__'.*truncated or corrupted protobuf"):
        fluid.io.load_inference_model(str(path), exe)
    assert_untouched(target)


def test_corrupted_protobuf(saved):
    path, exe, target = saved
    data = bytearray((path / "__model__").read_bytes())
    data[0] = 0xFF                              # a field key with an invalid wire type
    (path / "__model__").write_bytes(bytes(data))
    with fluid.scope_guard(target), pytest.raises(pf.PaddleFormatError, match="__model__"):
        fluid.io.load_inference_model(str(path), exe)
    assert_untouched(target)


def test_wrong_tensor_version(saved):
    path, exe, target = saved
    data = bytearray((path / "fc_1.b_0").read_bytes())
    data[0] = 1
    (path / "fc_1.b_0").write_bytes(bytes(data))
    with fluid.scope_guard(target), pytest.raises(
            CheckpointError, match=r"variable 'fc_1.b_0'.*fc_1.b_0'.*unsupported tensor "
                                   r"version 1"):
        fluid.io.load_inference_model(str(path), exe)
    assert_untouched(target)


def test_size_field_larger_than_file(saved):
    path, exe, target = saved
    data = bytearray((path / "fc_0.w_0").read_bytes())
    # the TensorDesc claims dims [8, 2**40]: ~32 TiB, far beyond the file: refused unallocated
    desc = bytes([0x08, 0x05, 0x10, 0x08, 0x10]) + varint(1 << 40)
    bad = bytes(data[:16]) + struct.pack("<i", len(desc)) + desc + bytes(data[26:])
    (path / "fc_0.w_0").write_bytes(bad)
    with fluid.scope_guard(target), pytest.raises(
            CheckpointError, match=r"variable 'fc_0.w_0'.*truncated or corrupted.*shape "
                                   r"\[8, 1099511627776\]"):
        fluid.io.load_inference_model(str(path), exe)
    data[16:20] = struct.pack("<i", 1 << 30)        # description size beyond the file
    (path / "fc_0.w_0").write_bytes(bytes(data))
    with fluid.scope_guard(target), pytest.raises(CheckpointError, match="'fc_0.w_0'"):
        fluid.io.load_inference_model(str(path), exe)
    assert_untouched(target)


def test_unknown_dtype(saved):
    path, exe, target = saved
    data = bytearray((path / "fc_1.b_0").read_bytes())
    assert data[20:22] == b"\x08\x05"
    data[21] = 22                                   # BF16: a code fluidlite cannot hold
    (path / "fc_1.b_0").write_bytes(bytes(data))
    with fluid.scope_guard(target), pytest.raises(
            CheckpointError, match=r"variable 'fc_1.b_0'.*unknown or unsupported data type "
                                   r"BF16|variable 'fc_1.b_0'.*code 22"):
        fluid.io.load_inference_model(str(path), exe)
    assert_untouched(target)


def test_missing_parameter(saved):
    path, exe, target = saved
    os.remove(path / "fc_1.w_0")
    with fluid.scope_guard(target), pytest.raises(
            FileNotFoundError, match=r"variable 'fc_1.w_0'.*fc_1.w_0' does not exist"):
        fluid.io.load_inference_model(str(path), exe)
    assert_untouched(target)


def test_combined_file_missing_parameter(tmp_path):
    write_paddle2_model(tmp_path)
    (tmp_path / "model.pdiparams").write_bytes(stream(PARAMS["emb.w"]))   # "w" missing
    with pytest.raises(CheckpointError, match=r"variable 'w'.*model.pdiparams'.*missing "
                                              r"parameter"):
        fluid.io.load_inference_model(str(tmp_path), fluid.Executor(fluid.CPUPlace()),
                                      model_filename="model.pdmodel",
                                      params_filename="model.pdiparams")


def test_program_dtype_not_supported(tmp_path):
    data = program_bytes([tensor_var("x", [-1, 3], dtype=23)], [])        # COMPLEX64
    with pytest.raises(pf.PaddleFormatError, match=r"model.pdmodel: block 0 variable 'x': "
                                                   r"data type 23"):
        pf.program_from_bytes(data, "model.pdmodel")


# -- command line: convert, info/viz on Paddle files ------------------------------------------
def run_cli(*args):
    from fluidlite.cli import main
    return main(list(args))


def test_cli_convert_round_trip(tmp_path, trained, capsys):
    main, startup, pred, scope, exe, feed = trained
    with fluid.scope_guard(scope):
        fluid.io.save_inference_model(str(tmp_path / "p"), ["x", "ids"], [pred], exe, main,
                                      params_filename="__params__")
    assert run_cli("convert", str(tmp_path / "p"), str(tmp_path / "j"), "--to", "json") == 0
    assert run_cli("convert", str(tmp_path / "j"), str(tmp_path / "p2"), "--to", "paddle") == 0
    assert (tmp_path / "j" / "__model__").read_bytes()[:1] == b"{"
    assert (tmp_path / "j" / "__params__").read_bytes()[:2] == b"PK"
    for name in ("__model__", "__params__"):        # paddle -> json -> paddle: same bytes
        assert (tmp_path / "p2" / name).read_bytes() == (tmp_path / "p" / name).read_bytes()
    progs = []
    for kind in ("p", "j", "p2"):
        with fluid.scope_guard(fluid.Scope()):
            program, _, fetches = fluid.io.load_inference_model(
                str(tmp_path / kind), exe, params_filename="__params__")
            progs.append(str(program))
            out = exe.run(program, feed=feed, fetch_list=fetches)[0]
        if kind == "p":
            first = out
        else:
            assert out.tobytes() == first.tobytes()
    assert progs[0] == progs[1] == progs[2]
    capsys.readouterr()
    assert run_cli("info", str(tmp_path / "p")) == 0
    text = capsys.readouterr().out
    assert "fc_0.w_0" in text
    assert run_cli("viz", str(tmp_path / "p"), "-f", "txt") == 0
    assert "lookup_table" in capsys.readouterr().out


def test_cli_info_and_convert_paddle2_prefix(tmp_path, capsys):
    write_paddle2_model(tmp_path / "m")
    assert run_cli("info", str(tmp_path / "m")) == 0
    assert "emb.w" in capsys.readouterr().out
    assert run_cli("convert", str(tmp_path / "m" / "model"), str(tmp_path / "j"),
                   "--to", "json") == 0
    with fluid.scope_guard(fluid.Scope()):
        program, feeds, _ = fluid.io.load_inference_model(str(tmp_path / "j"),
                                                          fluid.Executor(fluid.CPUPlace()),
                                                          params_filename="__params__")
    assert feeds == ["ids", "x"]
    state = fluid.io.load_program_state(str(tmp_path / "j" / "__params__"))   # an .npz
    assert state["w"].tobytes() == PARAMS["w"].tobytes()


def test_cli_convert_program_file_and_errors(tmp_path, trained, capsys):
    main, startup, pred, scope, exe, feed = trained
    with fluid.scope_guard(scope):
        fluid.save(main, str(tmp_path / "ck"))
    assert run_cli("convert", str(tmp_path / "ck.pdmodel"), str(tmp_path / "ck.json"),
                   "--to", "json") == 0
    assert str(fluid.io.read_program(str(tmp_path / "ck.json"))) == str(main)
    assert run_cli("convert", str(tmp_path / "nothing"), str(tmp_path / "o"),
                   "--to", "json") == 2
    assert "does not exist" in capsys.readouterr().err
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "__model__").write_bytes(b"\x0a\x05\x08")          # truncated
    assert run_cli("info", str(tmp_path / "bad")) == 1
    assert "truncated or corrupted protobuf" in capsys.readouterr().err


# -- fixture models (tests/fixtures/paddle, written from the documented layout) ---------------
FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "paddle")


def test_fixture_fluid18_fit_a_line():
    d = os.path.join(FIXTURES, "fluid18_fit_a_line")
    exp = np.load(os.path.join(d, "expected.npz"))
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        program, feeds, fetches = fluid.io.load_inference_model(d, exe)
        assert feeds == ["x"] and [v.name for v in fetches] == ["save_infer_model/scale_0.tmp_0"]
        assert not isinstance(program.global_block().var("fc_0.w_0"),
                              fluid.framework.Parameter)        # 1.x files: plain persistables
        out = exe.run(program, feed={"x": exp["x"]}, fetch_list=fetches)[0]
    np.testing.assert_allclose(out, exp["out"], rtol=1e-5, atol=1e-6)


def test_fixture_pd2_attention():
    d = os.path.join(FIXTURES, "pd2_attention")
    exp = np.load(os.path.join(d, "expected.npz"))
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(fluid.Scope()):
        program, feeds, fetches = fluid.io.load_inference_model(os.path.join(d, "model"), exe)
        assert feeds == ["x"]
        types = [o.type for o in program.global_block().ops]
        assert types.count("matmul") == 3 and "matmul_v2" not in types
        flat, red = exe.run(program, feed={"x": exp["x"]}, fetch_list=fetches)
    np.testing.assert_allclose(flat, exp["flat"], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(red, exp["red"], rtol=1e-5, atol=1e-5)


def test_scalar_attr_and_unknown_attr_type():
    # Attr SCALAR (type 16) with Scalar {type 3, r (field 4, fixed64 key 0x21) = 2.5}
    scal = s(4, s(1, "value") + field(2, 0, 16) +
             s(20, field(1, 0, 3) + b"\x21" + struct.pack("<d", 2.5)))
    data = program_bytes([tensor_var("c", [1])],
                         [op("fill_constant", [], [("Out", ["c"])],
                             attr_longs("shape", [1]) + attr_int("dtype", 5) + scal)])
    program = pf.program_from_bytes(data, "m.pdmodel")
    assert program.global_block().ops[0].attr("value") == 2.5
    bad = program_bytes([tensor_var("c", [1])],
                        [op("fill_constant", [], [("Out", ["c"])],
                            s(4, s(1, "value") + field(2, 0, 16) + s(20, field(1, 0, 4))))])
    with pytest.raises(pf.PaddleFormatError, match=r"m.pdmodel: block 0 op #0 "
                                                   r"'fill_constant'.*SCALAR"):
        pf.program_from_bytes(bad, "m.pdmodel")


def test_protobuf_missing_names_install_command(monkeypatch):
    import sys
    from fluidlite.formats.paddle import proto
    proto.messages.cache_clear()
    monkeypatch.setitem(sys.modules, "google.protobuf", None)
    try:
        with pytest.raises(pf.ProtobufMissing, match="pip install protobuf"):
            proto.messages()
    finally:
        monkeypatch.undo()
        proto.messages.cache_clear()
    assert "ProgramDesc" in proto.messages()


def test_op_referring_to_undeclared_var():
    data = program_bytes([tensor_var("x", [-1, 3])],
                         [op("relu", [("X", ["x"])], [("Out", ["y_typo"])])])
    with pytest.raises(pf.PaddleFormatError, match=r"m.pdmodel: block 0 op #0 'relu': slot "
                                                   r"'Out' refers to variable 'y_typo'"):
        pf.program_from_bytes(data, "m.pdmodel")


def test_attr_types_as_paddle_declares_them(trained):
    main, startup, *_ = trained
    types = {}
    for program in (main, startup):
        msg = pf.messages()["ProgramDesc"]()
        msg.ParseFromString(pf.program_to_bytes(program))
        for o in msg.blocks[0].ops:
            for a in o.attrs:
                types[(o.type, a.name)] = a.type
    assert types[("lookup_table", "padding_idx")] == 9            # LONG
    assert types[("fill_constant", "shape")] == 11                # LONGS
    assert types[("uniform_random", "shape")] == 11
    assert types[("mul", "x_num_col_dims")] == 0                  # INT
    assert types[("dropout", "dropout_prob")] == 1                # FLOAT
    assert types[("dropout", "is_test")] == 6                     # BOOLEAN
    assert types[("fill_constant", "dtype")] == 0                 # VarType code as INT
    assert types[("dropout", "dropout_implementation")] == 2      # STRING


def test_paddle2_zero_d_learning_rate_fits_fluid1_program(tmp_path, trained):
    """Paddle 2.6 saves learning_rate_0 0-D; a fluid 1.x program declares [1]."""
    import pickle
    main, startup, pred, scope, exe, feed = trained
    assert main.global_block().var("learning_rate_0").shape == (1,)
    params = {p.name: np.array(scope.find_var(p.name).get_tensor())
              for p in main.all_parameters()}
    opt = {v.name: np.array(scope.find_var(v.name).get_tensor())
           for v in fluid.io.get_program_persistable_vars(main) if v.name not in params}
    opt["learning_rate_0"] = np.array(0.01, np.float32)                  # 0-D, as 2.6
    for suffix, d in ((".pdparams", params), (".pdopt", opt)):
        with open(tmp_path / ("ck" + suffix), "wb") as f:
            pickle.dump(d, f, protocol=4)
    (tmp_path / "vars").mkdir()
    for name, arr in {**params, **opt}.items():
        (tmp_path / "vars" / name).write_bytes(pf.tensor_to_bytes(arr))
    for load in (lambda: fluid.load(main, str(tmp_path / "ck"), exe),
                 lambda: fluid.io.load_persistables(exe, str(tmp_path / "vars"), main)):
        s = fluid.Scope()
        with fluid.scope_guard(s):
            load()
            lr = np.array(s.find_var("learning_rate_0").get_tensor())
        assert lr.shape == (1,) and lr[0] == np.float32(0.01)


# -- loaded programs on feed shapes other than the saved ones (issue 29) ---------------------
def _fully_convolutional(data):
    L = fluid.layers
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = data()
        c = L.batch_norm(L.conv2d(x, 4, 3, padding=1), act="relu")
        u = L.resize_bilinear(L.pool2d(c, 2, "max", 2), scale=2.0)
        s = L.concat([u, c], axis=1)
        a = L.elementwise_add(s, L.pool2d(s, pool_type="avg", global_pooling=True))
        out = L.softmax(L.transpose(L.reshape(a, [0, 0, -1]), [0, 2, 1]))
    return main, startup, out


@pytest.mark.parametrize("fmt", ["paddle", "json"])
def test_loaded_program_runs_on_other_feed_sizes(tmp_path, fmt):
    """As Paddle's Executor: a feed variable the file does not mark need_check_feed (fluid's
    layers.data, files of fluid <= 1.5) takes a batch and image size other than the saved
    [1, 3, 8, 8]; every shape follows the fed array, and the numbers are the original
    program's."""
    L = fluid.layers
    main, startup, out = _fully_convolutional(
        lambda: L.data("x", [1, 3, 8, 8], dtype="float32", append_batch_size=False))
    x = np.random.RandomState(0).rand(2, 3, 12, 10).astype("float32")
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        exe = fluid.Executor(fluid.CPUPlace())
        exe.run(startup)
        (want,) = exe.run(main.clone(for_test=True), feed={"x": x}, fetch_list=[out])
        fluid.io.save_inference_model(str(tmp_path), ["x"], [out], exe, main, format=fmt)
        program, feeds, targets = fluid.io.load_inference_model(str(tmp_path), exe)
        assert program.global_block().var("x").shape == (1, 3, 8, 8)
        (got,) = exe.run(program, feed={"x": x}, fetch_list=targets)
    assert want.shape == got.shape == (2, 120, 8)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


def test_loaded_fluid_data_stays_checked(tmp_path):
    """A ``fluid.data`` feed (need_check_feed in the file) is checked after loading, as in
    Paddle ("The fed Variable 'x' should have dimensions = 4 ...")."""
    main, startup, out = _fully_convolutional(
        lambda: fluid.data("x", [-1, 3, 8, 8], dtype="float32"))
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        exe = fluid.Executor(fluid.CPUPlace())
        exe.run(startup)
        fluid.io.save_inference_model(str(tmp_path), ["x"], [out], exe, main)
        program, _, targets = fluid.io.load_inference_model(str(tmp_path), exe)
        ok = np.zeros((3, 3, 8, 8), "float32")
        assert exe.run(program, feed={"x": ok}, fetch_list=targets)[0].shape == (3, 64, 8)
        with pytest.raises(ValueError, match=r"'x' should have dimensions = 4, shape = "
                                             r"\[-1, 3, 8, 8\].*\[3, 3, 12, 8\]"):
            exe.run(program, feed={"x": np.zeros((3, 3, 12, 8), "float32")},
                    fetch_list=targets)


def test_loaded_training_program_inputs_follow_need_check_feed(tmp_path):
    """A program saved without feed ops (``fluid.save``'s .pdmodel): the tensors it reads and
    never writes are its inputs, checked only where the file sets need_check_feed."""
    L = fluid.layers
    main, startup, out = _fully_convolutional(
        lambda: L.data("x", [1, 3, 8, 8], dtype="float32", append_batch_size=False))
    with fluid.program_guard(main, startup):
        y = fluid.data("y", [-1, 1], "float32")
        loss = L.mean(out) + L.mean(y)
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        exe = fluid.Executor(fluid.CPUPlace())
        exe.run(startup)
        fluid.save(main, str(tmp_path / "ckpt"))
        program = fluid.io.read_program(str(tmp_path / "ckpt.pdmodel"))
        block = program.global_block()
        assert block.var("x").is_data and block.var("y").is_data
        assert not block.var(out.name).is_data
        feed = {"x": np.zeros((2, 3, 12, 10), "float32"), "y": np.ones((2, 1), "float32")}
        (got,) = exe.run(program, feed=feed, fetch_list=[loss.name])
        np.testing.assert_allclose(got, [1.0 + 1.0 / 8], rtol=1e-6)   # softmax over 8 channels
        with pytest.raises(ValueError, match="'y' should have dimensions = 2"):
            exe.run(program, feed=dict(feed, y=np.ones((2, 2, 1), "float32")),
                    fetch_list=[loss.name])
