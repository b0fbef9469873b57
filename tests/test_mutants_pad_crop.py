"""Tests written from the sampled mutation run (issue 28, docs/mutation.md, seventh round) for
``fluidlite/ops/pad_crop.py``: ``crop`` / ``crop_tensor`` without offsets crop from 0 (fluid
1.8's ``layers.crop``: offsets default to zeros) and without a shape keep X's shape, the
window check of every dim alone, and ``pad2d``'s messages -- against NumPy slicing."""
import numpy as np
import pytest

from fluidlite.core.dtypes import VarType
from fluidlite.core.registry import VarSpec, get_op_def

X = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)


def test_crop_without_offsets_starts_at_zero_at_build_time_and_run_time():
    crop = get_op_def("crop")
    spec = VarSpec((2, 3, 4), VarType.FP32)
    # a window as large as X only fits with offsets 0
    assert list(crop.infer(X=spec, Y=None, Offsets=None, shape=[2, 3, 4])["Out"].shape) == [2, 3, 4]
    out = crop.forward(X=X, Y=None, Offsets=None, shape=[2, 3, 4])["Out"]
    np.testing.assert_array_equal(out, X)
    out = crop.forward(X=X, Y=None, Offsets=None, shape=[1, 2, 2])["Out"]
    np.testing.assert_array_equal(out, X[:1, :2, :2])


def test_crop_tensor_without_shape_keeps_x_and_without_offsets_starts_at_zero():
    ct = get_op_def("crop_tensor")
    spec = VarSpec((2, 3, 4), VarType.FP32)
    out = ct.infer(X=spec, Shape=None, Offsets=None, ShapeTensor=[], OffsetsTensor=[])["Out"]
    assert list(out.shape) == [2, 3, 4]
    out = ct.infer(X=spec, Shape=None, Offsets=None, ShapeTensor=[], OffsetsTensor=[],
                   shape=[2, 3, 4])["Out"]
    assert list(out.shape) == [2, 3, 4]


@pytest.mark.parametrize("shape,offsets,dim", [
    ([2, 3, 4], [0, -1, 0], 1),      # a negative offset alone
    ([2, 3, 5], [0, 0, 0], 2),       # a size alone too large
    ([2, 2, 4], [0, 2, 0], 1)])      # offset + size beyond the dim
def test_crop_window_refuses_each_condition_alone_naming_the_dim(shape, offsets, dim):
    crop = get_op_def("crop")
    with pytest.raises(ValueError, match=rf"crop: the crop window of dim {dim} "):
        crop.forward(X=X, Y=None, Offsets=None, shape=shape, offsets=offsets)
    if all(o >= 0 for o in offsets):     # the build-time check sees the same window
        with pytest.raises(ValueError, match=rf"crop: the crop window of dim {dim} "):
            crop.infer(X=VarSpec(X.shape, VarType.FP32), Y=None, Offsets=None, shape=shape,
                       offsets=offsets)
    ok = crop.forward(X=X, Y=None, Offsets=None, shape=[2, 1, 4], offsets=[0, 2, 0])["Out"]
    np.testing.assert_array_equal(ok, X[:, 2:3, :])


def test_pad2d_messages_name_the_paddings_and_the_data_format():
    pad = get_op_def("pad2d")
    spec = VarSpec((1, 1, 3, 3), VarType.FP32)
    with pytest.raises(ValueError, match=r"pad2d: 'reflect' padding \[1, 3\] of the width must "
                                         r"be smaller than the input width 3"):
        pad.infer(X=spec, Paddings=None, paddings=[0, 0, 1, 3], mode="reflect")
    with pytest.raises(ValueError, match=r"pad2d: data_format must be 'NCHW' or 'NHWC', but "
                                         r"received 'NDHW'"):
        pad.infer(X=spec, Paddings=None, paddings=[0, 0, 0, 0], data_format="NDHW")
