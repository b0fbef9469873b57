"""``broadcast.in_parts``: a large same-shape elementwise add / subtract / multiply / divide
(a residual connection, a gradient's sum) as two parallel halves -- one call's bits, and one
call whenever the halves would not be plain slices of the same layout."""
import numpy as np
import pytest

from fluidlite.core import threads
from fluidlite.core.registry import VarSpec, get_op_def
from fluidlite.ops import broadcast as B
from fluidlite.ops.broadcast import in_parts


@pytest.fixture
def cuts(monkeypatch):
    """The parallel_ranges calls in_parts makes (and runs)."""
    seen = []
    real = threads.parallel_ranges

    def spy(fn, n, parts=2):
        seen.append(n)
        return real(fn, n, parts)
    monkeypatch.setattr(B.threads, "parallel_ranges", spy)
    return seen


@pytest.mark.parametrize("fn", [np.add, np.subtract, np.multiply, np.divide])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_halves_give_one_calls_bits(cuts, fn, dtype):
    rng = np.random.default_rng(0)
    n = B.PARTS_MIN + 3                                   # an odd cut
    a, b = rng.standard_normal(n).astype(dtype), (rng.standard_normal(n) + 4).astype(dtype)
    with threads.using(2):
        got = in_parts(fn, a.reshape(1, -1), b.reshape(1, -1))
        into = np.empty((1, n), dtype)
        assert in_parts(fn, a.reshape(1, -1), b.reshape(1, -1), into) is into
    want = fn(a, b).reshape(1, -1)
    assert got.dtype == dtype and got.shape == (1, n)
    assert np.array_equal(got, want) and np.array_equal(into, want)
    assert cuts == [n, n]


@pytest.mark.parametrize("case", ["small", "shape", "int", "strided", "one thread", "out",
                                  "list"])
def test_one_call_otherwise(cuts, case):
    rng = np.random.default_rng(1)
    n = B.PARTS_MIN
    a, b = rng.standard_normal(n), rng.standard_normal(n)
    out, count = None, 2
    if case == "small":
        a, b = a[:100], b[:100]
    elif case == "shape":
        a, b = a.reshape(2, -1), b[: n // 2]
    elif case == "int":
        a, b = (a * 100).astype(np.int64), (b * 100).astype(np.int64)
    elif case == "strided":
        a, b = np.repeat(a, 2)[::2], b
    elif case == "one thread":
        count = 1
    elif case == "out":
        out = np.empty(n, np.float32)                     # another dtype
    elif case == "list":
        a = a.tolist()                                    # not an ndarray (a SelectedRows X)
    with threads.using(count):
        got = in_parts(np.add, a, b, out) if out is not None else in_parts(np.add, a, b)
    want = np.add(a, b, out=np.empty(n, np.float32)) if out is not None else np.add(a, b)
    assert np.array_equal(got, want) and got.dtype == want.dtype
    assert cuts == []


def test_sum_and_same_shape_elementwise_ops_cut_large_maps(cuts):
    rng = np.random.default_rng(2)
    shape = (2, 4, 256, 256)                              # 512K elements
    xs = [rng.standard_normal(shape).astype(np.float32) for _ in range(3)]
    total = get_op_def("sum")
    add = get_op_def("elementwise_add")
    with threads.using(2):
        three = total.forward(xs)["Out"]
        two = total.lower([VarSpec(shape, xs[0].dtype)] * 2, {})(xs[:2])
        lowered = add.lower([VarSpec((-1,) + shape[1:], xs[0].dtype)] * 2, {"axis": -1})
        plus = lowered(xs[0], xs[1])
        eager = add.forward(xs[0], xs[1])["Out"]
    assert np.array_equal(three, (xs[0] + xs[1]) + xs[2])
    assert np.array_equal(two, xs[0] + xs[1])
    assert np.array_equal(plus, xs[0] + xs[1]) and np.array_equal(eager, plus)
    assert len(cuts) == 5
