"""Tests written from the mutation run of ``fluidlite/ops/dropout.py`` (issue 28, round 11):
dropout / dropout_grad with fluid's default attributes (dropout_prob 0.5, training,
downgrade_in_infer), the Seed input (the same seed value gives the same mask whatever the
executor's generator), the is_test mask, dropout_grad at p = 1 with upscale_in_train, and the
seed op's output.

References: fluid 1.8's dropout_op.{cc,h} (OpMaker defaults dropout_prob 0.5, is_test false,
dropout_implementation "downgrade_in_infer"; a kept element has Mask 1; the gradient is
dOut * Mask, / (1 - p) for upscale_in_train, 0 when p is 1) and seed_op.cc (a fixed seed
attribute is output as is, 0 draws one), checked by properties with fixed generators."""
import numpy as np
import pytest

from fluidlite.core.dtypes import VarType
from fluidlite.core.registry import VarSpec, get_op_def

D, DG, SEED = get_op_def("dropout"), get_op_def("dropout_grad"), get_op_def("seed")


def test_defaults_are_fluids():
    x = np.ones((200, 100), np.float32)
    got = D.forward(x, rng=np.random.default_rng(1))
    keep = got["Mask"].astype(bool)
    assert got["Mask"].dtype == np.uint8 and abs(keep.mean() - 0.5) < 0.02
    np.testing.assert_array_equal(got["Out"], x * keep)          # downgrade: no upscaling
    assert got["Out"].dtype == np.float32
    spec = D.infer(VarSpec((4, 5), "float32"))
    assert spec["Mask"].dtype == VarType.UINT8 and spec["Mask"].shape == (4, 5)
    d = np.full((200, 100), 2.0, np.float32)
    np.testing.assert_array_equal(DG.forward(got["Mask"], d)["X@GRAD"], d * keep)


def test_seed_input_fixes_the_mask():
    x = np.ones((50, 40))
    a = D.forward(x, np.array([5], np.int32), rng=np.random.default_rng(1), dropout_prob=0.3)
    b = D.forward(x, np.array([5], np.int32), rng=np.random.default_rng(2), dropout_prob=0.3)
    c = D.forward(x, np.array([6], np.int32), rng=np.random.default_rng(1), dropout_prob=0.3)
    np.testing.assert_array_equal(a["Mask"], b["Mask"])
    assert not np.array_equal(a["Mask"], c["Mask"])
    assert abs(a["Mask"].mean() - 0.7) < 0.05


def test_is_test_mask_and_grad_edges():
    x = np.full((3, 4), 2.0, np.float32)
    got = D.forward(x, rng=np.random.default_rng(0), is_test=True, dropout_prob=0.25)
    assert (np.asarray(got["Mask"]) == 1).all() and got["Mask"].dtype == np.uint8
    np.testing.assert_array_equal(got["Out"], np.full((3, 4), 1.5, np.float32))
    zeros = np.zeros((3, 4), np.uint8)
    g = DG.forward(zeros, x, dropout_prob=1.0, dropout_implementation="upscale_in_train")
    np.testing.assert_array_equal(g["X@GRAD"], np.zeros((3, 4)))
    ones = np.ones((3, 4), np.uint8)
    g = DG.forward(ones, x, dropout_prob=0.5, dropout_implementation="upscale_in_train")
    np.testing.assert_array_equal(g["X@GRAD"], np.full((3, 4), 4.0))


def test_seed_op():
    spec = SEED.infer(seed=3)["Out"]
    assert spec.shape == (1,) and spec.dtype == VarType.INT32
    got = SEED.forward(rng=np.random.default_rng(0), seed=42)["Out"]
    assert got.tolist() == [42] and got.dtype == np.int32
    a = SEED.forward(rng=np.random.default_rng(1))["Out"]
    b = SEED.forward(rng=np.random.default_rng(2))["Out"]
    assert a.dtype == np.int32 and a[0] >= 1 and a.tolist() != b.tolist()
    draws = [int(SEED.forward(rng=np.random.default_rng(s))["Out"][0]) for s in range(50)]
    assert min(draws) >= 1 and max(draws) < 2 ** 31 - 1 and max(draws) > 2 ** 30
