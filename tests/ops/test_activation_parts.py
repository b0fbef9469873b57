"""relu, its gradient and float32 gelu on arrays large enough to run as two parallel parts
(fluidlite/ops/activation.py): the one-pass values bit for bit, for any thread count, and an
odd element count split unevenly."""
import math

import numpy as np
import pytest

from fluidlite.core import threads
from fluidlite.core.registry import VarSpec, get_op_def
from fluidlite.ops import activation as A


@pytest.mark.parametrize("n", [A._SPLIT_MIN, A._SPLIT_MIN * 3 + 7])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_relu_and_its_gradient_in_parts(n, dtype):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n).astype(dtype).reshape(-1, 1) if n % 2 else \
        rng.standard_normal(n).astype(dtype).reshape(64, -1)
    x.reshape(-1)[::5] = 0                      # exact zeros: no gradient through them
    dout = rng.standard_normal(x.shape).astype(dtype)
    spec = VarSpec(x.shape, dtype)
    relu = get_op_def("relu")
    fwd = relu.lower([spec], {})
    bwd = relu.lower_grad([spec, spec], {}, {"X"})
    runs = []
    for t in (1, 2):
        with threads.using(t):
            assert A._big(x) == (t == 2)
            out = fwd(x)
            runs.append((out, bwd(out, dout)["X"]))
    for out, dx in runs:
        assert out.dtype == dtype and np.array_equal(out, np.maximum(x, 0))
        assert dx.dtype == dtype and np.array_equal(dx, dout * (np.maximum(x, 0) > 0))


def test_gelu_float32_in_parts_matches_float64_and_thread_counts():
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(3 * A._ERF_BLOCK + 11) * 3).astype(np.float32)
    dout = rng.standard_normal(x.shape).astype(np.float32)
    gelu = get_op_def("gelu")
    runs = []
    for t in (1, 2, 3):
        with threads.using(t):
            runs.append((gelu.forward(x)["Out"], gelu.backward(x, dout)["X"]))
    for out, dx in runs[1:]:
        assert np.array_equal(out, runs[0][0]) and np.array_equal(dx, runs[0][1])
    x64 = x.astype(np.float64)
    erf = np.vectorize(math.erf)(x64 / math.sqrt(2))
    want = 0.5 * x64 * (1 + erf)
    dwant = dout * (0.5 * (1 + erf) + x64 * np.exp(-0.5 * x64 * x64) / math.sqrt(2 * math.pi))
    np.testing.assert_allclose(runs[0][0], want, rtol=2e-6, atol=2e-6)
    np.testing.assert_allclose(runs[0][1], dwant, rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("shape", [(4, 64, 1024), (3, 87383), (1, 1 << 18), (513, 512)])
def test_softmax_and_its_gradient_in_row_parts(shape):
    rng = np.random.default_rng(2)
    x = (rng.standard_normal(shape) * 20).astype(np.float32)        # some clip at -64
    dout = rng.standard_normal(shape).astype(np.float32)
    sm = get_op_def("softmax")
    runs = []
    for t in (1, 2):
        with threads.using(t):
            out = sm.forward(x)["Out"]
            runs.append((out, sm.backward(out, dout)["X"]))
    # one pass over all rows (the kernels' own one-block path)
    want = A._softmax_into(x, -1, None)
    dwant = A._softmax_grad_into(want, dout, -1, None)
    for out, dx in runs:
        assert out.dtype == np.float32 and np.array_equal(out, want)
        assert dx.dtype == np.float32 and np.array_equal(dx, dwant)
    x64 = x.astype(np.float64)
    e = np.exp(np.maximum(x64 - x64.max(-1, keepdims=True), -64))
    np.testing.assert_allclose(want, e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-7)


def _bits(a):
    return a.view(np.dtype(f"u{a.dtype.itemsize}"))


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("shape", [(7,), (A._RELU_CHUNKED_MIN,), (2, A._RELU_CHUNK + 5),
                                   (3, 5, 40, 40), (2, 4, 300, 300)])
def test_relu_to_is_np_maximum_bit_for_bit(dtype, shape):
    """relu_to (max against arrays of zeros, chunk by chunk) gives np.maximum(x, 0)'s bits:
    nan stays nan, -0.0 and negatives give +0.0, inf stays -- contiguous, in place, and on a
    channel block of an NCHW map (each image's channels contiguous), whose other channels it
    must not touch (an image's block of more than one chunk: image by image)."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal(shape).astype(dtype)
    flat = x.reshape(-1)
    flat[::7] = -0.0
    flat[3::11] = np.nan
    flat[5::13] = np.inf
    flat[6::17] = -np.inf
    want = np.maximum(x, dtype(0))
    got = A.relu_to(x, np.empty_like(x))
    assert got.dtype == dtype and np.array_equal(_bits(got), _bits(want))
    y = x.copy()
    assert A.relu_to(y, y) is y and np.array_equal(_bits(y), _bits(want))
    if len(shape) == 4:                         # channels 1:4 of every image, in place
        y = x.copy()
        A.relu_to(y[:, 1:4], y[:, 1:4])
        ref = x.copy()
        ref[:, 1:4] = want[:, 1:4]
        assert np.array_equal(_bits(y), _bits(ref))


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("shape", [(7,), (A._RELU_CHUNKED_MIN,), (2, A._RELU_CHUNK + 5),
                                   (3, 5, 40, 40), (2, 4, 300, 300)])
@pytest.mark.parametrize("threshold", [6.0, 0.5])
def test_relu6_to_is_clip_or_max_then_min_bit_for_bit(dtype, shape, threshold, monkeypatch):
    """relu6_to gives np.clip's bits on NumPy 2 and np.minimum(np.maximum(x, 0), threshold)'s
    (against arrays of the bounds) on NumPy 1, whose clip gives the same bits, slower: nan
    stays nan, inf gives the threshold -- the values also checked against a reference built
    element by element in Python; contiguous, in place, and on a channel block of an NCHW
    map. Both paths are run on either NumPy (``_CLIP_FAST`` forced)."""
    rng = np.random.default_rng(4)
    x = (rng.standard_normal(shape) * 4).astype(dtype)
    flat = x.reshape(-1)
    flat[::7] = -0.0
    flat[3::11] = np.nan
    flat[5::13] = np.inf
    flat[6::17] = -np.inf
    t = dtype(threshold)
    zero = dtype(0)
    ref = np.array([v if v != v else (zero if v <= 0 else (t if v >= t else v))
                    for v in flat.tolist()], dtype).reshape(shape)
    if A._CLIP_FAST or dtype == np.float16:
        want = np.clip(x, zero, t)
    else:
        want = np.minimum(np.maximum(x, zero), t)   # NumPy 1's clip bits (-0.0 -> +0.0)
        assert np.array_equal(_bits(want), _bits(np.clip(x, zero, t)))
    np.testing.assert_array_equal(want, ref)        # (equal values: -0.0 == +0.0)
    for fast in (False, True):                      # the other path: the same values
        monkeypatch.setattr(A, "_CLIP_FAST", fast)
        np.testing.assert_array_equal(A.relu6_to(x, np.empty_like(x), threshold), ref)
    monkeypatch.undo()
    got = A.relu6_to(x, np.empty_like(x), threshold)
    assert got.dtype == dtype and np.array_equal(_bits(got), _bits(want))
    assert np.array_equal(_bits(get_op_def("relu6").forward(x, threshold=threshold)["Out"]),
                          _bits(want))
    y = x.copy()
    assert A.relu6_to(y, y, threshold) is y and np.array_equal(_bits(y), _bits(want))
    if len(shape) == 4:                         # channels 1:4 of every image, in place
        y = x.copy()
        A.relu6_to(y[:, 1:4], y[:, 1:4], threshold)
        ref = x.copy()
        ref[:, 1:4] = want[:, 1:4]
        assert np.array_equal(_bits(y), _bits(ref))


def test_constant_arrays_stop_at_their_cap(monkeypatch):
    """Past ``_CONST_CHUNKS_MAX`` constants (relu6 thresholds are attributes) the bounds run
    against the scalar, with the same values, and the cache does not grow."""
    monkeypatch.setattr(A, "_const_chunks", {})
    monkeypatch.setattr(A, "_CONST_CHUNKS_MAX", 2)
    monkeypatch.setattr(A, "_CLIP_FAST", False)
    x = np.linspace(-3, 9, A._RELU_CHUNKED_MIN * 3, dtype=np.float32)
    for thr in (1.0, 2.0, 3.0, 4.0):
        got = A.relu6_to(x, np.empty_like(x), thr)
        assert np.array_equal(got, np.minimum(np.maximum(x, np.float32(0)), np.float32(thr)))
    assert len(A._const_chunks) == 2


def test_relu_to_leaves_integers_and_mismatched_outputs_to_np_maximum():
    x = np.arange(-5000, 5000, dtype=np.int32)
    assert np.array_equal(A.relu_to(x, np.empty_like(x)), np.maximum(x, 0))
    x64 = np.linspace(-1, 1, 9000)
    out32 = np.empty(x64.shape, np.float32)    # another dtype: np.maximum casts into it
    assert np.array_equal(A.relu_to(x64, out32), np.maximum(x64, 0).astype(np.float32))


def test_gelu_block_function_takes_a_block_larger_than_its_constant_chunk():
    """The block function accepts any length (past its constant array's: the scalar bound),
    with the bits of smaller blocks."""
    x = (np.random.default_rng(5).standard_normal(A._RELU_CHUNK + 9) * 4).astype(np.float32)
    whole, parts = np.empty_like(x), np.empty_like(x)
    A._gelu_block(x, whole)
    for i in range(0, x.size, 1000):
        A._gelu_block(x[i:i + 1000], parts[i:i + 1000])
    assert np.array_equal(_bits(whole), _bits(parts))
