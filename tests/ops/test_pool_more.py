"""fluid 1.8's spp and unpool (fluidlite/ops/pool_more.py) against per-window references of
fluid's kernels (Paddle 2.6's CPU kernels give the same values on these inputs), numeric
float64 gradients and errors."""
import math

import numpy as np
import pytest

from fluidlite.core.registry import VarSpec, get_op_def
from fluidlite.testing import OpTest


def distinct(*shape, seed=0):
    n = int(np.prod(shape))
    return np.random.default_rng(seed).permutation(n).reshape(shape) * 0.01 - n * 0.005


def ref_spp(x, height, ptype):
    n, c, h, w = x.shape
    parts = []
    for p in range(height):
        bins = 2 ** p
        kh, kw = math.ceil(h / bins), math.ceil(w / bins)
        ph, pw = (kh * bins - h + 1) // 2, (kw * bins - w + 1) // 2
        out = np.zeros((n, c, bins, bins))
        for i in range(bins):
            for j in range(bins):
                hs, ws = i * kh - ph, j * kw - pw
                he, we = min(hs + kh, h), min(ws + kw, w)
                hs, ws = max(hs, 0), max(ws, 0)
                win = x[:, :, hs:he, ws:we]
                out[:, :, i, j] = win.max(axis=(2, 3)) if ptype == "max" else \
                    win.sum(axis=(2, 3)) / ((he - hs) * (we - ws))
        parts.append(out.reshape(n, -1))
    return np.concatenate(parts, axis=1)


@pytest.mark.parametrize("ptype", ["max", "avg"])
@pytest.mark.parametrize("h,w,height", [(4, 4, 3), (5, 7, 2), (9, 6, 3)])
def test_spp(ptype, h, w, height):
    x = distinct(2, 3, h, w)
    t = OpTest()
    t.op_type, t.inputs = "spp", {"X": x}
    t.attrs = {"pyramid_height": height, "pooling_type": ptype}
    t.outputs = {"Out": ref_spp(x, height, ptype)}
    assert t.outputs["Out"].shape == (2, 3 * (4 ** height - 1) // 3)
    t.check_infer()
    t.check_output()
    t.check_grad(["X"], "Out")


def test_unpool_scatters_by_the_max_pool_indices():
    x = distinct(2, 3, 6, 8, seed=1)
    mp = get_op_def("max_pool2d_with_index").forward(x, ksize=[2, 2], strides=[2, 2],
                                                     paddings=[0, 0])
    pooled, mask = mp["Out"], mp["Mask"]
    out = np.zeros((2, 3, 6, 8))
    for n in range(2):
        for c in range(3):
            out[n, c].flat[mask[n, c].ravel()] = pooled[n, c].ravel()
    t = OpTest()
    t.op_type = "unpool"
    t.inputs = {"X": pooled, "Indices": mask}
    t.attrs = {"unpooling_type": "max", "ksize": [2, 2], "strides": [2, 2], "paddings": [0, 0]}
    t.outputs = {"Out": out}
    t.check_infer()
    t.check_output()
    t.check_grad(["X"], "Out")
    np.testing.assert_array_equal(np.where(out != 0, x, 0), out)       # maxima back in place


def test_unpool_output_size_and_errors():
    d = get_op_def("unpool")
    spec = d.infer(VarSpec([1, 2, 4, 4], "float32"), VarSpec([1, 2, 4, 4], "int32"),
                   ksize=[3, 3], strides=[2, 2], paddings=[1, 1])["Out"]
    assert spec.shape == (1, 2, 7, 7)           # (4 - 1) * 2 - 2 + 3
    with pytest.raises(ValueError, match="outside"):
        d.forward(np.ones((1, 1, 2, 2)), np.full((1, 1, 2, 2), 99, np.int32), ksize=[2, 2],
                  strides=[2, 2])
    with pytest.raises(ValueError, match="unpooling_type must be 'max'"):
        d.infer(VarSpec([1, 2, 4, 4], "float32"), VarSpec([1, 2, 4, 4], "int32"),
                unpooling_type="avg", ksize=[2, 2])
