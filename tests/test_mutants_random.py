"""Tests written from the mutation run of ``fluidlite/ops/random.py`` (issue 28, round 11):
uniform_random / gaussian_random / truncated_gaussian_random checked by properties with fixed
generators (ranges, moments, shapes, dtypes, no repeated values), fluid's default attributes
(U[-1, 1), N(0, 1), no diagonal), the diagonal init (diag_num / diag_step / diag_val and its
bounds), float16 output, the ShapeTensor / ShapeTensorList forms of shape inference and the
checks with their messages.

References: fluid 1.8's OpMakers (uniform_random_op.cc: min -1, max 1, diag_num 0, diag_step
0, diag_val 1.0; gaussian_random_op.cc: mean 0, std 1; truncated_gaussian_random_op.cc: draws
beyond 2 std are redrawn) and the distributions' moments (U[a, b): mean (a + b) / 2, variance
(b - a)^2 / 12; the normal truncated at +-2: standard deviation 0.8796)."""
import numpy as np
import pytest

from fluidlite.core.dtypes import VarType
from fluidlite.core.registry import VarSpec, get_op_def

U, G, TG = (get_op_def(t) for t in ("uniform_random", "gaussian_random",
                                    "truncated_gaussian_random"))


def rng(seed=0):
    return np.random.default_rng(seed)


def test_uniform_defaults_and_moments():
    out = U.forward(rng=rng(1), shape=[200, 100])["Out"]
    assert out.dtype == np.float32 and out.shape == (200, 100)
    assert out.min() >= -1.0 and out.max() < 1.0
    assert abs(out.mean()) < 0.02 and abs(out.var() - 4 / 12) < 0.01
    out = U.forward(rng=rng(2), shape=[100, 100], min=2.0, max=5.0, dtype=VarType.FP64)["Out"]
    assert out.dtype == np.float64 and out.min() >= 2.0 and out.max() < 5.0
    assert abs(out.mean() - 3.5) < 0.05
    # no diagonal by default: with a negative range no element is 1.0
    out = U.forward(rng=rng(3), shape=[4, 4], min=-3.0, max=-2.0)["Out"]
    assert (out < -1.9).all()


def test_uniform_diagonal():
    out = U.forward(rng=rng(4), shape=[3, 4], min=-3.0, max=-2.0, diag_num=3, diag_step=4)
    flat = out["Out"].reshape(-1)
    assert flat[[0, 5, 10]].tolist() == [1.0, 1.0, 1.0]          # diag_val 1.0 by default
    assert (np.delete(flat, [0, 5, 10]) < -1.9).all()
    out = U.forward(rng=rng(4), shape=[2, 2], min=-3.0, max=-2.0, diag_num=1,
                    diag_val=7.0)["Out"].reshape(-1)
    assert out[0] == 7.0 and (out[1:] < -1.9).all()
    with pytest.raises(ValueError, match=r"^uniform_random: the diagonal's last element 4 "
                                         r"\(\(diag_num - 1\) \* \(diag_step \+ 1\)\) is outside "
                                         r"the 4 elements of shape \[2, 2\]$"):
        U.forward(rng=rng(4), shape=[2, 2], diag_num=3, diag_step=1)
    U.forward(rng=rng(4), shape=[2, 2], diag_num=2, diag_step=2)      # last element 3: fits
    for num, step in ((-1, 0), (0, -1)):
        with pytest.raises(ValueError, match=rf"^uniform_random: diag_num and diag_step must "
                                             rf"be >= 0, got diag_num={num}, "
                                             rf"diag_step={step}$"):
            U.infer(None, (), shape=(2, 2), diag_num=num, diag_step=step)


def test_gaussian_defaults_moments_and_float16():
    out = G.forward(rng=rng(5), shape=[300, 100])["Out"]
    assert out.dtype == np.float32 and out.shape == (300, 100)
    assert abs(out.mean()) < 0.02 and abs(out.std() - 1.0) < 0.02
    out = G.forward(rng=rng(6), shape=[300, 100], mean=3.0, std=0.5,
                    dtype=VarType.FP16)["Out"]
    assert out.dtype == np.float16 and out.shape == (300, 100)
    assert abs(out.astype(np.float64).mean() - 3.0) < 0.02
    assert abs(out.astype(np.float64).std() - 0.5) < 0.02


def test_truncated_gaussian():
    out = TG.forward(rng=rng(7), shape=[200, 100])["Out"]
    assert out.dtype == np.float32 and out.shape == (200, 100)
    assert np.abs(out).max() <= 2.0
    assert np.abs(out).max() > 1.9
    assert abs(out.mean()) < 0.02 and abs(out.std() - 0.8796) < 0.01
    # every redrawn value is a fresh draw: no value repeats
    out = TG.forward(rng=rng(8), shape=[5000], dtype=VarType.FP64, mean=1.0, std=3.0)["Out"]
    assert out.dtype == np.float64 and np.unique(out).size == out.size
    assert np.abs(out - 1.0).max() <= 6.0 and abs(out.mean() - 1.0) < 0.1


@pytest.mark.parametrize("op", [U, G])
def test_shape_inference(op):
    assert list(op.infer(None, (), shape=(2, 3))) == ["Out"]
    spec = op.infer(None, (), shape=(2, 3), dtype=VarType.FP64)["Out"]
    assert spec.shape == (2, 3) and spec.dtype == VarType.FP64
    assert op.infer(VarSpec((3,), "int64"), (), shape=())["Out"].shape == (-1, -1, -1)
    assert op.infer(VarSpec((-1,), "int64"), (), shape=())["Out"].shape == (-1,)
    two = [VarSpec((1,), "int32")] * 2
    assert op.infer(None, two, shape=(4, 5))["Out"].shape == (4, 5)
    assert op.infer(None, two, shape=(4,))["Out"].shape == (-1, -1)
    assert list(TG.infer(shape=(2, 3))) == ["Out"]


def test_truncated_gaussian_small_samples_stay_within_two_std():
    """Small draws, where no value beyond 3 std forces a redraw: still none beyond 2 std."""
    for seed in range(20):
        out = TG.forward(rng=rng(seed), shape=[40], dtype=VarType.FP64)["Out"]
        assert np.abs(out).max() <= 2.0, seed
