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
