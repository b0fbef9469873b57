"""Fuzzing every loader (seeded, bounded in time): Paddle protobuf programs, fluidlite JSON
programs, LoDTensor streams and combined files, ``.pdparams`` pickles. Each mutated input must
end in one of the documented exceptions (naming the file) quickly -- never a raw IndexError,
KeyError, RecursionError or a hang."""
import json
import pickle
import time
import tracemalloc

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.formats import checkpoint
from fluidlite.formats.paddle import (PaddleFormatError, combined_to_bytes, program_from_bytes,
                                      program_to_bytes, read_combined, read_tensor,
                                      tensor_to_bytes)
from fluidlite.formats.serialize import ProgramFormatError, loads_program
from fluidlite.io.program_state import _load_pickled_dict

DOCUMENTED = (PaddleFormatError, ProgramFormatError, checkpoint.CheckpointError)
CASES_PER_LOADER = 300
SECONDS_PER_CASE = 1.0
BYTES_PER_CASE = 64 << 20      # peak Python allocation while loading one mutated input


def _model():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 4], "float32")
        h = fluid.layers.fc(x, 3, act="relu")
        i = fluid.layers.fill_constant([1], "int64", 0)
        n = fluid.layers.fill_constant([1], "int64", 2)
        cond = fluid.layers.less_than(i, n)
        w = fluid.layers.While(cond)
        with w.block():
            fluid.layers.increment(i, in_place=True)
            fluid.layers.less_than(i, n, cond=cond)
        fluid.layers.mean(h)
    return main


def _mutations(data: bytes, rng: np.random.Generator):
    """Bit flips, byte overwrites with boundary values, truncations, insertions, splices."""
    for _ in range(CASES_PER_LOADER):
        b = bytearray(data)
        kind = rng.integers(0, 5)
        if kind == 0:
            for _ in range(rng.integers(1, 8)):
                b[rng.integers(0, len(b))] ^= 1 << int(rng.integers(0, 8))
        elif kind == 1:
            for _ in range(rng.integers(1, 4)):
                b[rng.integers(0, len(b))] = int(rng.choice([0, 1, 0x7F, 0x80, 0xFF]))
        elif kind == 2:
            b = b[:rng.integers(0, len(b))]
        elif kind == 3:
            at = rng.integers(0, len(b))
            b[at:at] = bytes(rng.integers(0, 256, rng.integers(1, 16), dtype=np.uint8))
        else:
            a, c = sorted(rng.integers(0, len(b), 2))
            b[a:c] = b[a:c][::-1]
        yield bytes(b)


def _check(load, data: bytes, seed: int) -> None:
    bad = []
    tracemalloc.start()
    try:
        for k, case in enumerate(_mutations(data, np.random.default_rng(seed))):
            tracemalloc.reset_peak()
            base = tracemalloc.get_traced_memory()[0]
            t0 = time.perf_counter()
            try:
                load(case)
            except DOCUMENTED:
                pass
            except Exception as e:      # noqa: BLE001 -- collected for the report
                bad.append(f"case {k}: {type(e).__name__}: {e}"[:200])
            assert time.perf_counter() - t0 < SECONDS_PER_CASE, f"case {k} took too long"
            peak = tracemalloc.get_traced_memory()[1] - base
            assert peak < BYTES_PER_CASE, f"case {k} allocated {peak} bytes"
    finally:
        tracemalloc.stop()
    assert not bad, f"{len(bad)} undocumented error(s):\n" + "\n".join(bad[:10])


def test_fuzz_paddle_protobuf_programs():
    data = bytes(program_to_bytes(_model()))
    _check(lambda b: program_from_bytes(b, "__model__"), data, 1)


def test_fuzz_json_programs():
    data = json.dumps(_model().to_dict()).encode()
    _check(lambda b: loads_program(b, "model.json"), data, 2)


def test_json_nested_200000_deep_is_a_format_error():
    with pytest.raises(ProgramFormatError):
        loads_program("[" * 200000 + "]" * 200000, "deep.json")
    with pytest.raises(ProgramFormatError):
        loads_program('{"a":' * 100000 + "1" + "}" * 100000, "deep.json")


def test_fuzz_lod_tensor_streams():
    arr = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    data = bytes(tensor_to_bytes(arr, [[0, 1, 2]]))
    _check(lambda b: read_tensor(b, 0, "w.tensor", "w"), data, 3)


def test_fuzz_combined_files():
    arrays = {"a": np.ones((3, 2), np.float32), "b": np.arange(5, dtype=np.int64)}
    data = bytes(combined_to_bytes(arrays, {}))
    _check(lambda b: list(read_combined(b, ["a", "b"], "__params__", {})), data, 4)


def test_fuzz_pdparams_pickles(tmp_path):
    data = pickle.dumps({"w": np.ones((2, 3), np.float32), "b": np.zeros(3)}, protocol=2)

    def load(b):
        (tmp_path / "m.pdparams").write_bytes(b)
        with checkpoint.Reader(tmp_path) as r:
            _load_pickled_dict(r, "m.pdparams")
    _check(load, data, 5)


def _stream_with_dims(dims, data_type=5):
    """A tensor stream whose header claims ``dims`` (float32 by default) and holds no data."""
    import struct
    from fluidlite.formats.paddle.proto import messages
    desc = messages()["VarType"].TensorDesc(data_type=data_type, dims=dims).SerializeToString()
    return struct.pack("<IQ", 0, 0) + struct.pack("<Ii", 0, len(desc)) + desc


def _npy_with_shape(shape):
    """A .npy file whose header claims ``shape`` (float32) and holds no data."""
    head = repr({"descr": "<f4", "fortran_order": False, "shape": tuple(shape)}).encode()
    head += b" " * (-(10 + len(head) + 1) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(head).to_bytes(2, "little") + head


# headers NumPy cannot even describe (more dims than it has; non-zero dims past its index
# range, also next to a zero dim that makes the tensor empty) or whose data is missing
HOSTILE_DIMS = {"100 dims of 1": [1] * 100, "100 dims of 0": [0] * 100,
                "2**62": [2 ** 62], "0 x 2**62": [0, 2 ** 62],
                "2**62 x 2**62 x 0": [2 ** 62] * 2 + [0],
                "2**31 x 2**31 x 4": [2 ** 31, 2 ** 31, 4], "2**63 - 1": [2 ** 63 - 1]}


def _peak_bytes(fn):
    import tracemalloc
    tracemalloc.start()
    try:
        fn()
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak


@pytest.mark.parametrize("case", sorted(HOSTILE_DIMS))
def test_tensor_headers_with_impossible_dims_name_file_and_variable(case):
    data = _stream_with_dims(HOSTILE_DIMS[case])
    with pytest.raises(PaddleFormatError, match=r"variable 'w' in w\.tensor") as e:
        read_tensor(data, 0, "w.tensor", "w")
    assert "corrupted" in str(e.value) or "truncated" in str(e.value)
    with pytest.raises(PaddleFormatError, match=r"variable 'b' in __params__"):
        read_combined(bytes(tensor_to_bytes(np.ones(2, np.float32))) + data, ["a", "b"],
                      "__params__", {})
    # refused from the header: nothing the size of the claim is allocated
    assert _peak_bytes(lambda: pytest.raises(PaddleFormatError, read_tensor, data, 0,
                                             "w.tensor", "w")) < 1 << 20


@pytest.mark.parametrize("case", sorted(HOSTILE_DIMS))
def test_npy_headers_with_impossible_dims_name_file_and_variable(tmp_path, case):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        w = fluid.layers.create_parameter([3], "float32", name="w0")
    exe = fluid.Executor(fluid.CPUPlace())
    (tmp_path / "w0").write_bytes(_npy_with_shape(HOSTILE_DIMS[case]))
    with pytest.raises(checkpoint.CheckpointError, match=r"variable 'w0'.*w0'") as e:
        fluid.io.load_vars(exe, str(tmp_path), main, vars=[w])
    assert "corrupted" in str(e.value)


def test_the_largest_accepted_rank_still_loads():
    from fluidlite.formats.paddle.tensor import MAX_DIMS
    arr = np.arange(6, dtype=np.float32).reshape((1,) * (MAX_DIMS - 1) + (6,))
    back, _, _ = read_tensor(bytes(tensor_to_bytes(arr)), 0, "w.tensor", "w")
    np.testing.assert_array_equal(back, arr)
    empty = np.zeros((0, 2 ** 20, 3), np.float32)          # empty, large dims: still an array
    back, _, _ = read_tensor(bytes(tensor_to_bytes(empty)), 0, "w.tensor", "w")
    assert back.shape == (0, 2 ** 20, 3)


def _json_with_attr(value):
    doc = _model().to_dict()
    doc["blocks"][0]["ops"][0]["attrs"]["hostile"] = value
    return json.dumps(doc)


# @npscalar / @ndarray values the dtype cannot hold: NumPy raises OverflowError / ValueError /
# TypeError, wraps around (NumPy 1), truncates or turns them into inf silently
BAD_SCALARS = {
    "int8 1000": ("<i1", 1000), "uint8 -1": ("|u1", -1), "int64 2**70": ("<i8", 2 ** 70),
    "float32 1e300": ("<f4", 1e300), "float16 1e10": ("<f2", 1e10),
    "float64 10**400": ("<f8", 10 ** 400), "int32 'abc'": ("<i4", "abc"),
    "float32 'abc'": ("<f4", "abc"), "int32 None": ("<i4", None),
    "float32 [1, 2]": ("<f4", [1, 2]), "int32 1.5": ("<i4", 1.5), "int32 true": ("<i4", True),
    "bool 'x'": ("|b1", "x"), "int32 inf": ("<i4", {"@float": "inf"}),
    "int32 VarType": ("<i4", {"@vartype": "FP32"}),
}


@pytest.mark.parametrize("case", sorted(BAD_SCALARS))
def test_npscalar_values_that_overflow_or_do_not_parse_are_format_errors(case):
    dtype, value = BAD_SCALARS[case]
    with pytest.raises(ProgramFormatError, match=r"model\.json: .*attrs\.hostile.*@npscalar"):
        loads_program(_json_with_attr({"@npscalar": {"dtype": dtype, "value": value}}),
                      "model.json")
    with pytest.raises(ProgramFormatError, match=r"model\.json: .*attrs\.hostile.*@ndarray"):
        loads_program(_json_with_attr({"@ndarray": {"dtype": dtype, "shape": [2],
                                                    "data": [0 if "b1" not in dtype else False,
                                                             value]}}), "model.json")


@pytest.mark.parametrize("shape,data", [
    ([0] * 100, []), ([0, 2 ** 62], []), ([3], [1.0, 2.0]), ([-1], [1.0]), ("ab", [1.0, 2.0]),
    ([2], "ab")])
def test_ndarray_shapes_that_do_not_fit_their_data_are_format_errors(shape, data):
    body = {"dtype": "<f4", "shape": shape, "data": data}
    with pytest.raises(ProgramFormatError, match=r"model\.json: .*attrs\.hostile.*@ndarray"):
        loads_program(_json_with_attr({"@ndarray": body}), "model.json")


def test_numpy_scalars_and_arrays_of_every_dtype_round_trip_through_json():
    from fluidlite.formats.serialize import _enc_value
    values = [np.int8(-128), np.uint8(255), np.int64(2 ** 63 - 1), np.float16(65504.0),
              np.float64(1.5), np.float32(np.finfo(np.float32).max), np.float64(np.nan),
              np.float32(-np.inf),
              np.bool_(True), np.array([[1.5, -2.0]], np.float32), np.array(7, np.int16),
              np.zeros((0, 3), np.int32), np.array([True, False])]
    for v in values:
        back = loads_program(_json_with_attr(_enc_value(v, "attr")), "model.json")
        got = back.blocks[0].ops[0].attrs["hostile"]
        if isinstance(v, float):    # np.float64 is a Python float and is stored as one
            assert type(got) is float and (got == v or np.isnan(got) and np.isnan(v))
            continue
        assert type(got) is type(v) and got.dtype == v.dtype, (v, got)
        np.testing.assert_array_equal(got, v)
        assert np.shape(got) == np.shape(v)
