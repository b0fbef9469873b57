"""Fuzzing every loader (seeded, bounded in time): Paddle protobuf programs, fluidlite JSON
programs, LoDTensor streams and combined files, ``.pdparams`` pickles. Each mutated input must
end in one of the documented exceptions (naming the file) quickly -- never a raw IndexError,
KeyError, RecursionError or a hang."""
import json
import pickle
import time

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
    for k, case in enumerate(_mutations(data, np.random.default_rng(seed))):
        t0 = time.perf_counter()
        try:
            load(case)
        except DOCUMENTED:
            pass
        except Exception as e:      # noqa: BLE001 -- collected for the report
            bad.append(f"case {k}: {type(e).__name__}: {e}"[:200])
        assert time.perf_counter() - t0 < SECONDS_PER_CASE, f"case {k} took too long"
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
