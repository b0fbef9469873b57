"""OpTest cases for fluidlite/ops/creation_extra.py (range, linspace, diag, eye) and
fluidlite/ops/hash.py (hash, XXH64)."""
import numpy as np
import pytest

from fluidlite.ops.hash import xxh64_rows
from fluidlite.testing import OpTest
from tests.ops.optest_helpers import expect_error


def run_op(op_type, inputs, attrs, outputs):
    t = OpTest()
    t.op_type, t.inputs, t.attrs, t.outputs = op_type, inputs, attrs, outputs
    t.check_infer()
    t.check_output()
    return t


def one(v, dtype):
    return np.array([v], dtype)


def test_range():
    run_op("range", {"Start": one(0, "int64"), "End": one(10, "int64"),
                     "Step": one(3, "int64")}, {}, {"Out": np.array([0, 3, 6, 9], np.int64)})
    run_op("range", {"Start": one(1, "float32"), "End": one(0, "float32"),
                     "Step": one(-0.3, "float32")}, {},
           {"Out": np.arange(1, 0, -0.3, dtype=np.float32)})
    run_op("range", {"Start": one(5, "int32"), "End": one(5, "int32"),
                     "Step": one(1, "int32")}, {}, {"Out": np.zeros(0, np.int32)})


def test_range_accumulates_in_the_output_type():
    """fluid's kernel: ``out[i] = value; value += step`` in T, and the count ceil(|(end -
    start) / step|) in T (Paddle 2.6: these exact float32 values)."""
    from fluidlite.core.registry import get_op_def
    f = np.float32
    got = get_op_def("range").forward(one(0, "float32"), one(100, "float32"),
                                      one(0.37, "float32"))["Out"]
    want = [f(0)]
    for _ in range(270):
        want.append(f(want[-1] + f(0.37)))
    assert got.dtype == np.float32 and len(got) == 271
    np.testing.assert_array_equal(got, want)
    assert got[-1] != f(0) + f(0.37) * f(270)          # not start + i * step


def test_range_errors():
    ins = {"Start": one(0, "int64"), "End": one(5, "int64"), "Step": one(0, "int64")}
    expect_error("range", ins, {}, {"Out": np.zeros(1)}, "range: step must not be 0", "run")
    ins["Step"] = one(-1, "int64")
    expect_error("range", ins, {}, {"Out": np.zeros(1)},
                 r"step \(-1\) must be > 0 when start \(0\) < end \(5\)", "run")
    ins["Step"] = one(1, "int32")
    expect_error("range", ins, {}, {"Out": np.zeros(1)},
                 "range: Step must have the dtype of Start")


def test_linspace():
    run_op("linspace", {"Start": one(0, "float32"), "Stop": one(10, "float32"),
                        "Num": one(5, "int32")}, {"dtype": "float32"},
           {"Out": np.linspace(0, 10, 5, dtype=np.float32)})
    run_op("linspace", {"Start": one(2.5, "float64"), "Stop": one(-1, "float64"),
                        "Num": one(1, "int32")}, {"dtype": "float64"},
           {"Out": np.array([2.5])})
    expect_error("linspace", {"Start": one(0, "float32"), "Stop": one(1, "float32"),
                              "Num": one(0, "int32")}, {}, {"Out": np.zeros(1)},
                 "linspace: Num must be > 0, but received 0", "run")


def test_diag_and_eye():
    run_op("diag", {"Diagonal": np.array([1.5, 2, 3])}, {},
           {"Out": np.diag([1.5, 2, 3])})
    run_op("eye", {}, {"num_rows": 3, "dtype": "int32"}, {"Out": np.eye(3, dtype=np.int32)})
    run_op("eye", {}, {"num_rows": 2, "num_columns": 4}, {"Out": np.eye(2, 4, dtype="f4")})
    expect_error("diag", {"Diagonal": np.ones((2, 2))}, {}, {"Out": np.ones((2, 2))},
                 r"diag: Diagonal must be 1-D, but its shape is \[2, 2\]")


# -- hash ---------------------------------------------------------------------------------------
def test_xxh64_known_values():
    """Published XXH64 values (empty input and b"abc", seed 0) and values over 40 bytes (the
    32-byte stripe path) from the reference implementation."""
    assert int(xxh64_rows(np.zeros((1, 0), np.uint8), 0)[0]) == 0xEF46DB3751D8E999
    abc = np.frombuffer(b"abc", np.uint8).reshape(1, 3)
    assert int(xxh64_rows(abc, 0)[0]) == 0x44BC2CF5AD770999
    forty = np.arange(40, dtype=np.uint8).reshape(1, 40)
    assert int(xxh64_rows(forty, 0)[0]) == 0xF5DA40F1B11741E9
    assert int(xxh64_rows(forty, 5)[0]) == 0xDB3531C6E7C9CF62


def test_hash():
    x = np.array([[1, 2], [3, 4], [1, 2]], np.int32)
    ref = np.array([[7722, 8407, 6337], [1603, 5590, 3386], [7722, 8407, 6337]], np.int32)
    run_op("hash", {"X": x}, {"num_hash": 3, "mod_by": 10000}, {"Out": ref[..., None]})
    x64 = np.array([[7], [123456789012]], np.int64)
    run_op("hash", {"X": x64}, {"num_hash": 2, "mod_by": 1000},
           {"Out": np.array([[[877], [264]], [[408], [584]]], np.int64)})
    expect_error("hash", {"X": np.ones((2, 2))}, {}, {"Out": ref},
                 "hash: X must be int32 or int64")


def test_xxh64_rows_equal_the_reference_implementation_for_every_tail():
    # rows of 0 to 80 bytes (the 32-byte stripes, then 8-, 4- and 1-byte tails in every
    # combination) and seeds 0, 1 and 2**63 + 5, against the xxHash library's XXH64
    xxhash = pytest.importorskip("xxhash")
    rng = np.random.default_rng(11)
    for n in range(81):
        data = rng.integers(0, 256, (3, n), dtype=np.uint8)
        for seed in (0, 1, 2 ** 63 + 5):
            got = xxh64_rows(data, seed)
            want = [xxhash.xxh64_intdigest(row.tobytes(), seed=seed) for row in data]
            assert [int(v) for v in got] == want, (n, seed)
