"""Tests written from the mutation run of ``fluidlite/ops/random_like.py`` (issue 28, round 11):
fill_constant / uniform_random / gaussian_random ``_batch_size_like`` with fluid's default
attributes (input_dim_idx 0, output_dim_idx 0, value 0, U[-1, 1), N(0, 1)), other dim indices,
the checks with their messages, and the random ones' moments with fixed generators.

References: fluid 1.8's OpMakers (batch_size_like.h: input_dim_idx 0, output_dim_idx 0;
fill_constant_batch_size_like_op.cc: value 0; uniform_random_batch_size_like_op.cc: min -1,
max 1; gaussian_random_batch_size_like_op.cc: mean 0, std 1) and BatchSizeLikeOp's checks."""
import numpy as np
import pytest

from fluidlite.core.dtypes import VarType
from fluidlite.core.registry import VarSpec, get_op_def

OPS = ("fill_constant_batch_size_like", "uniform_random_batch_size_like",
       "gaussian_random_batch_size_like")


def run(t, x, **attrs):
    op = get_op_def(t)
    if t != OPS[0]:
        attrs["rng"] = np.random.default_rng(3)
    return op.forward(x, **attrs)["Out"]


@pytest.mark.parametrize("t", OPS)
def test_default_dims_and_values(t):
    x = np.zeros((300, 2), np.float32)
    out = run(t, x, shape=[-1, 120])
    assert out.shape == (300, 120) and out.dtype == np.float32
    spec = get_op_def(t).infer(VarSpec((300, 2), "float32"), shape=[-1, 120])
    assert list(spec) == ["Out"] and spec["Out"].shape == (300, 120)
    if t == OPS[0]:
        assert (out == 0).all()
    elif t == OPS[1]:
        assert out.min() >= -1 and out.max() < 1 and abs(out.mean()) < 0.02
        assert out.max() > 0.99
    else:
        assert abs(out.mean()) < 0.02 and abs(out.std() - 1) < 0.02
    out = run(t, np.zeros((2, 7, 3)), shape=[4, 5, -1], input_dim_idx=1, output_dim_idx=2)
    assert out.shape == (4, 5, 7)
    spec = get_op_def(t).infer(VarSpec((2, 7, 3), "float32"), shape=[4, 5, -1],
                               input_dim_idx=1, output_dim_idx=2, dtype=VarType.FP64)
    assert spec["Out"].shape == (4, 5, 7) and spec["Out"].dtype == VarType.FP64


@pytest.mark.parametrize("t", OPS)
def test_checks(t):
    x = VarSpec((3, 4), "float32")
    op = get_op_def(t)
    with pytest.raises(ValueError, match=rf"^{t}: attribute 'shape' must not be empty$"):
        op.infer(x, shape=[])
    with pytest.raises(ValueError, match=rf"^{t}: input_dim_idx 2 is out of range for Input "
                                         rf"of shape \[3, 4\]$"):
        op.infer(x, shape=[-1, 2], input_dim_idx=2)
    with pytest.raises(ValueError, match=rf"^{t}: output_dim_idx 2 is out of range for shape "
                                         rf"\[-1, 2\]$"):
        op.infer(x, shape=[-1, 2], output_dim_idx=2)
    with pytest.raises(ValueError, match=rf"^{t}: input_dim_idx 5"):
        run(t, np.zeros((3, 4)), shape=[-1], input_dim_idx=5)
