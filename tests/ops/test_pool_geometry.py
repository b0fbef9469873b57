"""Pooling geometry shared by pool3d and the with-index pools (``ops/pool3d.py``'s
``resolve_pool``), as fluid resolves it."""
import numpy as np
import pytest


@pytest.mark.parametrize("op,shape", [("max_pool2d_with_index", (2, 3, 5, 4)),
                                      ("max_pool3d_with_index", (1, 2, 3, 4, 5))])
def test_global_and_adaptive_pooling_outputs_the_input_size_as_fluid(op, shape):
    """fluid's pool_with_index InferShape: global_pooling sets ksize to the input's size,
    then adaptive pooling outputs ksize -- one window per input position (identity)."""
    from fluidlite.core.registry import get_op_def
    x = np.random.default_rng(0).random(shape)
    n = len(shape) - 2
    out = get_op_def(op).forward(x, ksize=[2] * n, strides=[2] * n, paddings=[0] * n,
                                 global_pooling=True, adaptive=True)
    np.testing.assert_array_equal(out["Out"], x)
    flat = np.arange(int(np.prod(shape[2:]))).reshape(shape[2:])
    np.testing.assert_array_equal(out["Mask"], np.broadcast_to(flat, shape))
    # without adaptive, global pooling is one window over everything
    g = get_op_def(op).forward(x, ksize=[2] * n, strides=[2] * n, paddings=[0] * n,
                               global_pooling=True, adaptive=False)["Out"]
    np.testing.assert_allclose(g.reshape(shape[:2]), x.reshape(shape[:2] + (-1,)).max(-1))
