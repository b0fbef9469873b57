"""Tests written from mutation testing (issue 28, docs/mutation.md) for ``fluidlite/ops/interp.py``:
fluid 1.8's float32 weights of the align_mode 0 rule, downscaling by a scale below 1, the
output-size priorities and unknown sizes in shape inference, nearest as a pure gather (no
other pixel mixed in, also not an inf), integer inputs, gradients with SizeTensor and Scale
tensors, the defaults and the error messages -- against loops written here in fluid's C++
arithmetic (bilinear_interp_op.h) and central differences (OpTest.check_grad)."""
import numpy as np
import pytest

from fluidlite.core.dtypes import VarType
from fluidlite.core.registry import VarSpec, get_op_def
from fluidlite.ops.interp import interp_matrix
from fluidlite.testing import check_grad

BI, NE, TRI = (get_op_def(t) for t in ("bilinear_interp", "nearest_interp", "trilinear_interp"))
F16, F32 = VarType.FP16, VarType.FP32


def spec(shape, dtype=F32, lod=0):
    return VarSpec(tuple(shape), dtype, lod)


def _fluid_weights_align_mode_0(n_in, n_out):
    """fluid 1.8's linear rule with align_flag (align_mode 0, align_corners False), in its
    C++ types: ratio float, the source ``ratio * (l + 0.5) - 0.5`` a double truncated to int
    for the index and stored in a float for the weight, ``d = idx_src - x`` a float."""
    f = np.float32
    ratio = f(n_in) / f(n_out) if n_out > 1 else f(0)
    m = np.zeros((n_out, n_in))
    for l in range(n_out):
        src = float(ratio) * (l + 0.5) - 0.5
        x = max(int(src), 0)
        x1 = x + (1 if x < n_in - 1 else 0)
        idx = f(src) if f(src) > 0 else f(0)
        d = f(idx - f(x))
        m[l, x] += float(f(1) - d)
        m[l, x1] += float(d)
    return m


@pytest.mark.parametrize("n_in,n_out", [(7, 5), (5, 7), (3, 10), (10, 3), (6, 4)])
def test_align_mode_0_weights_are_fluids_float32_ones(n_in, n_out):
    got = interp_matrix(n_in, n_out, "bilinear", False, 0)
    np.testing.assert_array_equal(got, _fluid_weights_align_mode_0(n_in, n_out))


def test_a_scale_below_one_downsamples():
    x = np.arange(2 * 8 * 6, dtype=np.float64).reshape(1, 2, 8, 6)
    attrs = {"scale": 0.5, "interp_method": "bilinear", "align_corners": False,
             "align_mode": 1}
    assert BI.infer(spec(x.shape), **attrs)["Out"].shape == (1, 2, 4, 3)
    out = BI.forward(x, **attrs)["Out"]
    # align_mode 1, ratio 2: output cell (i, j) reads input (2i, 2j) exactly
    np.testing.assert_array_equal(out, x[:, :, ::2, ::2])
    got = NE.forward(x, Scale=np.array([0.5], np.float32), interp_method="nearest",
                     align_corners=False)["Out"]
    np.testing.assert_array_equal(got, x[:, :, ::2, ::2])


def test_shape_inference_sizes_and_their_priorities():
    x = spec((2, 3, 5, 4), F16, 1)
    st = [spec((1,), VarType.INT32)] * 2
    assert BI.infer(x, None, st, out_h=6, out_w=0)["Out"] == VarSpec((2, 3, 6, -1), F16, 1)
    assert BI.infer(x, None, st, out_h=1, out_w=2)["Out"].shape == (2, 3, 1, 2)
    got = TRI.infer(spec((1, 2, 3, 4, 5)), None, [spec((1,), VarType.INT32)] * 3, out_h=4)
    assert got["Out"].shape == (1, 2, -1, 4, -1)
    assert BI.infer(x, None, None, spec((1,)), scale=2.0)["Out"].shape == (2, 3, -1, -1)
    assert BI.infer(spec((1, 3, -1, 1)), scale=2.0)["Out"].shape == (1, 3, -1, 2)
    assert BI.infer(x, spec((2,), VarType.INT32))["Out"].shape == (2, 3, -1, -1)
    assert BI.infer(x, out_h=1, out_w=3)["Out"].shape == (2, 3, 1, 3)
    assert BI.infer(x, out_h=2, out_w=3)["Out"] == VarSpec((2, 3, 2, 3), F16, 1)
    for sizes in ({"out_h": 0, "out_w": 5}, {"out_w": 5}, {"out_h": 5}, {}):
        with pytest.raises(ValueError, match=r"^bilinear_interp: the output size \[\d, \d\] "
                                             r"must be positive \(set out_h/out_w, a scale > "
                                             r"0, OutSize or SizeTensor\)$"):
            BI.infer(x, **sizes)
    with pytest.raises(ValueError, match=r"^trilinear_interp: the output size \[0, 3, 4\]"):
        TRI.infer(spec((1, 2, 3, 4, 5)), out_h=3, out_w=4)


def test_defaults_and_kernel_size_errors():
    x = np.arange(12.0).reshape(1, 1, 3, 4)
    # fluid 1.8: align_corners True, align_mode 1, interp_method the op's own
    np.testing.assert_array_equal(BI.forward(x, out_h=5, out_w=7)["Out"],
                                  BI.forward(x, out_h=5, out_w=7, interp_method="bilinear",
                                             align_corners=True, align_mode=1)["Out"])
    np.testing.assert_array_equal(BI.forward(x, out_h=5, out_w=7)["Out"][0, 0, :, 0],
                                  [0.0, 2.0, 4.0, 6.0, 8.0])       # corners to corners
    d = np.ones((1, 1, 5, 7))
    np.testing.assert_allclose(BI.backward(x, None, None, None, d, out_h=5, out_w=7)["X"],
                               BI.backward(x, None, None, None, d, out_h=5, out_w=7,
                                           align_corners=True, align_mode=1)["X"], rtol=0)
    for kw in ({"out_w": 3}, {"out_h": 3}, {}):
        for call in (lambda: BI.forward(x, **kw),
                     lambda: BI.backward(x, None, None, None, d, **kw)):
            with pytest.raises(ValueError, match=r"^bilinear_interp: the output size must be 2 "
                                                 r"positive values, got \[\d, \d\]$"):
                call()
    with pytest.raises(ValueError, match=r"^trilinear_interp: the output size must be 3 "
                                         r"positive values, got \[0, 2, 2\]$"):
        TRI.forward(np.zeros((1, 1, 2, 2, 2)), out_h=2, out_w=2)


def test_error_messages():
    x = np.zeros((1, 1, 2, 2))
    for call in (lambda: BI.infer(spec((1, 1, 2, 2)), out_h=2, out_w=2, data_layout="NCDHW"),
                 lambda: BI.forward(x, out_h=2, out_w=2, data_layout="NCDHW")):
        with pytest.raises(ValueError, match=r"^bilinear_interp: data_layout must be NCHW or "
                                             r"NHWC for a 4-D input, got 'NCDHW'$"):
            call()
    for call in (lambda: BI.infer(spec((1, 1, 2, 2)), out_h=2, out_w=2,
                                  interp_method="nearest"),
                 lambda: BI.forward(x, out_h=2, out_w=2, interp_method="bicubic"),
                 lambda: BI.backward(x, None, None, None, x, out_h=2, out_w=2,
                                     interp_method="linear")):
        with pytest.raises(ValueError, match=r"^bilinear_interp: interp_method must be "
                                             r"'bilinear', got '\w+'$"):
            call()
    with pytest.raises(ValueError, match=r"^nearest_interp: X must be 4-D, got 5-D$"):
        NE.infer(spec((1, 1, 1, 2, 2)), out_h=2, out_w=2)
    with pytest.raises(ValueError, match=r"^trilinear_interp: align_mode must be 0 or 1, "
                                         r"got 2$"):
        TRI.infer(spec((1, 1, 1, 2, 2)), out_d=1, out_h=2, out_w=2, align_mode=2)


def test_nearest_is_a_gather_that_never_reads_other_pixels():
    x = np.array([[[[np.inf, 1.0, 2.0], [3.0, -np.inf, 5.0], [6.0, 7.0, np.nan]]]])
    out = NE.forward(x, out_h=2, out_w=2, interp_method="nearest", align_corners=False)["Out"]
    # ratio 1.5: rows/cols int(1.5 k) = 0, 1
    np.testing.assert_array_equal(out, x[:, :, :2, :2])
    out = NE.forward(x[:, :, 1:, 1:], out_h=2, out_w=1, interp_method="nearest",
                     align_corners=False)["Out"]
    np.testing.assert_array_equal(out, [[[[-np.inf], [7.0]]]])


def test_bilinear_of_integer_images_interpolates_then_truncates():
    x = np.array([[[[0, 100, 255], [10, 50, 90]]]], np.uint8)
    out = BI.forward(x, out_h=2, out_w=5, interp_method="bilinear", align_corners=True)["Out"]
    assert out.dtype == np.uint8
    # align_corners: columns at 0, 0.5, 1, 1.5, 2 of the input
    ref = np.empty((2, 5))
    for i in range(2):
        for j in range(5):
            pos = j * 0.5
            lo = int(pos)
            hi = min(lo + 1, 2)
            ref[i, j] = x[0, 0, i, lo] * (1 - (pos - lo)) + x[0, 0, i, hi] * (pos - lo)
    np.testing.assert_array_equal(out[0, 0], ref.astype(np.uint8))
    assert out[0, 0, 0, 1] == 50 and out[0, 0, 0, 3] == 177


def test_gradients_with_size_tensors_and_a_scale_tensor():
    x = np.random.default_rng(4).uniform(-1, 1, (1, 2, 3, 4))
    check_grad("bilinear_interp",
               {"X": x, "SizeTensor": [("sh", np.array([5], np.int32)),
                                       ("sw", np.array([2], np.int32))]},
               "Out", attrs={"out_h": 9, "out_w": 9, "interp_method": "bilinear",
                             "align_corners": False, "align_mode": 0},
               inputs_to_check=["X"], weighted=True)
    check_grad("bilinear_interp", {"X": x, "Scale": np.array([1.5], np.float32)}, "Out",
               attrs={"out_h": 9, "out_w": 9, "interp_method": "bilinear"},
               inputs_to_check=["X"], weighted=True)
    got = BI.backward(x, None, [np.array([5], np.int32), np.array([2], np.int32)], None,
                      np.ones((1, 2, 5, 2)), out_h=9, out_w=9)["X"]
    assert got.shape == x.shape
    got = BI.backward(x, None, None, np.array([2.0], np.float32), np.ones((1, 2, 6, 8)),
                      out_h=9, out_w=9)["X"]
    assert got.shape == x.shape
    np.testing.assert_allclose(got.sum(), 2 * 6 * 8, rtol=1e-6)   # float32 weights sum to ~1
