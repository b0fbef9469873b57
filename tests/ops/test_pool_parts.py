"""pool2d and its gradient on maps large enough to run as two parallel parts (of the batch,
or of the channels for one image; fluidlite/ops/pool.py): the one-call values bit for bit for
any thread count, with max windows that overlap and ties inside a window."""
import numpy as np
import pytest

from fluidlite.core import threads
from fluidlite.core.registry import get_op_def
from fluidlite.ops import pool

POOL = get_op_def("pool2d")


@pytest.mark.parametrize("shape", [(4, 16, 64, 64), (1, 16, 128, 130), (3, 9, 97, 101)])
@pytest.mark.parametrize("attrs", [
    {"pooling_type": "max", "ksize": [3, 3], "strides": [2, 2], "paddings": [1, 1]},
    {"pooling_type": "avg", "ksize": [3, 3], "strides": [2, 2], "paddings": [1, 1],
     "exclusive": True},
    {"pooling_type": "max", "ksize": [2, 2], "strides": [2, 2]},
])
def test_parts_give_the_one_call_bits(shape, attrs, monkeypatch):
    rng = np.random.default_rng(0)
    x = np.round(rng.standard_normal(shape) * 4).astype(np.float32)    # ties in windows
    assert x.size >= pool._PARTS_MIN
    runs = []
    for t in (1, 2):
        with threads.using(t):
            out = POOL.forward(x, **attrs)["Out"]
            dout = np.ones_like(out) + rng.standard_normal(out.shape).astype(np.float32)
            runs.append((out, dout, POOL.backward(x, out, dout, **attrs)["X"]))
    monkeypatch.setattr(pool, "_PARTS_MIN", 1 << 62)                   # one call
    out1 = POOL.forward(x, **attrs)["Out"]
    for out, dout, dx in runs:
        assert out.dtype == np.float32 and np.array_equal(out, out1)
        want = POOL.backward(x, out1, dout, **attrs)["X"]
        assert dx.dtype == np.float32 and np.array_equal(dx, want)
