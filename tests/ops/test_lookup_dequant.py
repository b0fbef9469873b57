"""lookup_table_dequant (ops/embedding.py): 8-bit codes packed in float32 rows dequantized
with each row's (min, max), byte by byte in memory order as fluid reads them; padding_idx
rows are zeros; out-of-range ids raise."""
import struct

import numpy as np
import pytest

from fluidlite.core.registry import get_op_def


def test_dequantizes_the_packed_bytes():
    rng = np.random.default_rng(0)
    table = rng.random((5, 6)).astype("float32")
    ids = np.array([[3], [0], [3]], "int64")
    got = get_op_def("lookup_table_dequant").forward(table, ids)["Out"]
    assert got.shape == (3, 16) and got.dtype == np.float32
    for row, i in zip(got, ids[:, 0]):
        lo, hi = table[i, 0], table[i, 1]
        codes = [b for v in table[i, 2:] for b in bytearray(struct.pack("f", v))]
        np.testing.assert_allclose(row, [c * (hi - lo) / 256 + lo for c in codes], rtol=1e-6)
    padded = get_op_def("lookup_table_dequant").forward(table, ids, padding_idx=3)["Out"]
    assert not padded[[0, 2]].any() and np.array_equal(padded[1], got[1])
    with pytest.raises(ValueError, match=r"ids must be in \[0, 5\), got 5"):
        get_op_def("lookup_table_dequant").forward(table, np.array([[5]], "int64"))


def test_runs_in_a_program():
    from tests.ops.test_fusion_ops import run_multi as run
    table = np.random.default_rng(1).random((4, 3)).astype("float32")
    ids = np.array([[2], [1]], "int64")
    out = run("lookup_table_dequant", {"W": table, "Ids": ids}, {})
    np.testing.assert_array_equal(
        np.asarray(out), get_op_def("lookup_table_dequant").forward(table, ids)["Out"])
