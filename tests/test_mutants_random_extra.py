"""Tests written from the mutation run of ``fluidlite/ops/random_extra.py`` (issue 28, round
11): randint, randperm, sampling_id and random_crop -- shape inference (ShapeTensor /
ShapeTensorList forms, unknown dims), fluid's defaults, the checks with their messages, and the
draws checked by properties with fixed generators (frequencies, permutations, crops being
windows of their own instance, seeding).

References: fluid 1.8's OpMakers and checks (randint_op.cc: high > low, int32 / int64;
randperm_op.cc: n >= 1; sampling_id_op.h: id = the first j with r - cumsum < 0, r ~ U[min, max),
defaults min 0, max 1; random_crop_op.h: shape names 1 to rank(X) trailing dims, each in
[1, dim], every instance cropped at its own offset, startup_seed 0)."""
import numpy as np
import pytest

from fluidlite.core.dtypes import VarType
from fluidlite.core.registry import VarSpec, get_op_def

RI, RP, SID, RC = (get_op_def(t) for t in ("randint", "randperm", "sampling_id",
                                           "random_crop"))


def test_randint_infer_and_checks():
    with pytest.raises(ValueError, match=r"^randint: high \(0\) must be greater than low "
                                         r"\(0\)$"):
        RI.infer(None, (), shape=(2,))
    with pytest.raises(ValueError, match=r"^randint: high \(3\) must be greater than low "
                                         r"\(3\)$"):
        RI.infer(None, (), shape=(2,), low=3, high=3)
    with pytest.raises(ValueError, match=r"^randint: dtype must be int32 or int64, but "
                                         r"received "):
        RI.infer(None, (), shape=(2,), high=4, dtype=VarType.FP32)
    spec = RI.infer(None, (), shape=(2, 3), high=4)
    assert list(spec) == ["Out"] and spec["Out"].shape == (2, 3)
    assert spec["Out"].dtype == VarType.INT64
    assert RI.infer(VarSpec((3,), "int64"), (), high=4)["Out"].shape == (-1, -1, -1)
    assert RI.infer(VarSpec((-1,), "int64"), (), high=4)["Out"].shape == (-1,)
    two = [VarSpec((1,), "int32")] * 2
    assert RI.infer(None, two, shape=(4, -3), high=4)["Out"].shape == (4, -1)
    assert RI.infer(None, two, shape=(0, 5), high=4)["Out"].shape == (0, 5)
    assert RI.infer(None, two, shape=(4,), high=4)["Out"].shape == (-1, -1)


def test_randint_draws():
    out = RI.forward(None, (), rng=np.random.default_rng(0), shape=[4000], low=-2, high=3,
                     dtype=VarType.INT32)["Out"]
    assert out.dtype == np.int32 and out.min() == -2 and out.max() == 2
    assert abs(np.bincount(out + 2).min() / 4000 - 0.2) < 0.03


def test_randperm():
    spec = RP.infer()["Out"]
    assert spec.shape == (1,) and spec.dtype == VarType.INT64
    assert list(RP.infer(n=1)) == ["Out"]
    with pytest.raises(ValueError, match=r"^randperm: n must be >= 1, but received 0$"):
        RP.infer(n=0)
    assert RP.forward(rng=np.random.default_rng(0))["Out"].tolist() == [0]
    out = RP.forward(rng=np.random.default_rng(0), n=20, dtype=VarType.INT32)["Out"]
    assert out.dtype == np.int32 and sorted(out.tolist()) == list(range(20))


def test_sampling_id():
    spec = SID.infer(VarSpec((3, 5), "float32"))
    assert list(spec) == ["Out"] and spec["Out"].shape == (3,)
    assert spec["Out"].dtype == VarType.INT64
    SID.infer(VarSpec((3, 5), "float32"), min=0.5, max=0.5)
    with pytest.raises(ValueError, match=r"^sampling_id: X must be 2-D \[batch, classes\], but "
                                         r"its shape is \[5\]$"):
        SID.infer(VarSpec((5,), "float32"))
    with pytest.raises(ValueError, match=r"^sampling_id: min \(0.6\) must not exceed max "
                                         r"\(0.5\)$"):
        SID.infer(VarSpec((3, 5), "float32"), min=0.6, max=0.5)
    p = np.tile([[0.2, 0.5, 0.3]], (6000, 1))
    ids = SID.forward(p, rng=np.random.default_rng(4))["Out"]       # r ~ U[0, 1)
    assert ids.dtype == np.int64
    np.testing.assert_allclose(np.bincount(ids, minlength=3) / 6000, [0.2, 0.5, 0.3],
                               atol=0.02)


def test_random_crop_infer_and_checks():
    x = VarSpec((2, 3, 8, 6), "float32")
    spec = RC.infer(x, None, shape=(4, 5))
    assert spec["Out"].shape == (2, 3, 4, 5) and spec["Out"].dtype == VarType.FP32
    assert spec["SeedOut"].shape == (1,) and spec["SeedOut"].dtype == VarType.INT64
    assert RC.infer(x, None, shape=(2, 3, 8, 6))["Out"].shape == (2, 3, 8, 6)
    assert RC.infer(x, None, shape=(1,))["Out"].shape == (2, 3, 8, 1)
    assert RC.infer(VarSpec((-1, -1, 5), "float32"), None, shape=(3, 5))["Out"].shape == \
        (-1, 3, 5)                                 # an unknown dim is checked at run time
    with pytest.raises(ValueError, match=r"^random_crop: shape\[0\] = 1 must be in \[1, 0\]"):
        RC.infer(VarSpec((2, 0, 5), "float32"), None, shape=(1, 5))
    for shape in ((), (1, 1, 1, 1, 1)):
        with pytest.raises(ValueError, match=r"^random_crop: shape \[.*\] must name 1 to "
                                             r"rank\(X\) = 4 trailing dims of X \(shape "
                                             r"\[2, 3, 8, 6\]\)$"):
            RC.infer(x, None, shape=shape)
    for shape, i, s, d in (((9, 5), 0, 9, 8), ((4, 0), 1, 0, 6)):
        with pytest.raises(ValueError, match=rf"^random_crop: shape\[{i}\] = {s} must be in "
                                             rf"\[1, {d}\] \(X has shape \[2, 3, 8, 6\]\)$"):
            RC.infer(x, None, shape=shape)
    with pytest.raises(ValueError, match=r"^random_crop: the crop \[9, 2\] does not fit X of "
                                         r"shape \[2, 8, 6\]$"):
        RC.forward(np.zeros((2, 8, 6)), None, rng=np.random.default_rng(0), shape=[9, 2])


def _is_window(inst, crop):
    h, w = crop.shape
    return any(np.array_equal(inst[a:a + h, b:b + w], crop)
               for a in range(inst.shape[0] - h + 1) for b in range(inst.shape[1] - w + 1))


def test_random_crop_draws_and_seeds():
    x = np.arange(6 * 8 * 7, dtype=np.float32).reshape(6, 8, 7)
    got = RC.forward(x, None, rng=np.random.default_rng(0), shape=[3, 7])
    out = got["Out"]
    assert out.shape == (6, 3, 7) and out.dtype == np.float32
    assert all(_is_window(x[i], out[i]) for i in range(6))
    assert got["SeedOut"].dtype == np.int64 and got["SeedOut"].shape == (1,)
    full = RC.forward(x, None, rng=np.random.default_rng(0), shape=[8, 7])["Out"]
    np.testing.assert_array_equal(full, x)
    # without Seed and startup_seed the executor's generator is used; startup_seed / Seed
    # make the crops reproducible
    big = np.arange(40 * 20 * 20, dtype=np.float64).reshape(40, 20, 20)
    a = RC.forward(big, None, rng=np.random.default_rng(1), shape=[5, 5])["Out"]
    b = RC.forward(big, None, rng=np.random.default_rng(2), shape=[5, 5])["Out"]
    assert not np.array_equal(a, b)
    s1 = RC.forward(big, None, rng=np.random.default_rng(1), shape=[5, 5], startup_seed=9)
    s2 = RC.forward(big, None, rng=np.random.default_rng(2), shape=[5, 5], startup_seed=9)
    np.testing.assert_array_equal(s1["Out"], s2["Out"])
    t1 = RC.forward(big, np.array([9], np.int64), rng=np.random.default_rng(3), shape=[5, 5])
    np.testing.assert_array_equal(t1["Out"], s1["Out"])
    np.testing.assert_array_equal(t1["SeedOut"], s1["SeedOut"])


SB = get_op_def("shuffle_batch")


def test_shuffle_batch_rows_and_a_1d_input():
    """fluid 1.8's ShuffleBatchKernel: rows = prod(dims[:-1]) of width dims[-1], so a 1-D X
    is a single row and comes back unchanged (ShuffleIdx [0])."""
    x = np.arange(10.0)
    got = SB.forward(x, None, startup_seed=3)
    np.testing.assert_array_equal(got["Out"], x)
    assert got["ShuffleIdx"].tolist() == [0] and got["ShuffleIdx"].dtype == np.int64
    dx = SB.backward(got["ShuffleIdx"], x * 2)["X"]
    np.testing.assert_array_equal(dx, x * 2)
    x = np.arange(2 * 6 * 3, dtype=np.float32).reshape(2, 6, 3)
    got = SB.forward(x, np.array([11], np.int64))
    idx = got["ShuffleIdx"]
    assert sorted(idx.tolist()) == list(range(12)) and idx.tolist() != list(range(12))
    rows = x.reshape(12, 3)
    np.testing.assert_array_equal(got["Out"].reshape(12, 3)[idx], rows)   # Out[idx[i]] = X[i]
    assert got["Out"].shape == x.shape and got["Out"].dtype == np.float32
    assert got["SeedOut"].dtype == np.int64 and got["SeedOut"].shape == (1,)
    dout = np.random.default_rng(0).standard_normal(x.shape)
    dx = SB.backward(idx, dout)["X"]
    np.testing.assert_array_equal(dx.reshape(12, 3), dout.reshape(12, 3)[idx])
    # the Seed tensor decides the order; without it startup_seed (default 0) does
    again = SB.forward(x, np.array([11], np.int64), startup_seed=5)
    np.testing.assert_array_equal(again["ShuffleIdx"], idx)
    np.testing.assert_array_equal(SB.forward(x, None)["ShuffleIdx"],
                                  SB.forward(x, None, startup_seed=0)["ShuffleIdx"])
    assert not np.array_equal(SB.forward(x, None, startup_seed=1)["ShuffleIdx"],
                              SB.forward(x, None, startup_seed=0)["ShuffleIdx"])


def test_shuffle_batch_infer():
    spec = SB.infer(VarSpec((4, 3), "float32"), VarSpec((1,), "int64"))
    assert {k: (v.shape, v.dtype) for k, v in spec.items()} == {
        "Out": ((4, 3), VarType.FP32), "ShuffleIdx": ((-1,), VarType.INT64),
        "SeedOut": ((1,), VarType.INT64)}
    SB.infer(VarSpec((4,), "float32"), None)
    with pytest.raises(ValueError, match=r"^shuffle_batch: X must have at least one dim, got "
                                         r"shape \[\]$"):
        SB.infer(VarSpec((), "float32"), None)
    with pytest.raises(ValueError, match=r"^shuffle_batch: Seed must be an int64 tensor, got "):
        SB.infer(VarSpec((4, 3), "float32"), VarSpec((1,), "int32"))


def test_shuffle_batch_with_an_empty_seed_uses_startup_seed():
    """An empty (not yet initialized) Seed tensor: fluid falls back on startup_seed."""
    x = np.arange(24.0).reshape(8, 3)
    got = SB.forward(x, np.zeros(0, np.int64), startup_seed=4)
    np.testing.assert_array_equal(got["ShuffleIdx"],
                                  SB.forward(x, None, startup_seed=4)["ShuffleIdx"])
