"""Tests written from the mutation run of ``fluidlite/ops/quant.py`` (issue 28, round 11): the
fake quantize / dequantize ops' shape inference (slots, shapes, dtypes), fluid's default
attributes (bit_length 8, window_size 10000, moving_rate 0.9, is_test false), bit_length 1 and
16, a scale at fluid's 1e-30 threshold, empty inputs, float32 states, the range-abs-max window
over several steps (a scale leaving the window, Iter past the window, stale entries, a first
all-zero step), is_test steps, the two-scale channel-wise dequantizer with different bit widths,
and the checks with their messages.

References: fluid 1.8's kernels (paddle/fluid/operators/fake_quantize_op.{cc,h}:
ClipAndFakeQuantFunctor with inverse(s) = 1 / (s + 1e-6) when s <= 1e-30,
FindRangeAbsMaxFunctor, FindMovingAverageAbsMaxFunctor, the OpMakers' defaults;
fake_dequantize_op.{cc,h}: ChannelDequantizeFunctor), written below as float64 / float32 loops."""
import numpy as np
import pytest

from fluidlite.core.dtypes import VarType
from fluidlite.core.registry import VarSpec, get_op_def

F = np.float32
op = get_op_def


def fluid_round(v):
    return np.sign(v) * np.floor(np.abs(v) + 0.5)


def spec_of(d):
    return {k: (v.shape, v.dtype) for k, v in d.items()}


def test_infer_slots_shapes_dtypes():
    x = VarSpec((2, 3, 4), "float32")
    one = ((1,), VarType.FP32)
    assert spec_of(op("fake_quantize_abs_max").infer(x)) == {"Out": ((2, 3, 4), VarType.FP32),
                                                             "OutScale": one}
    assert spec_of(op("fake_channel_wise_quantize_abs_max").infer(x)) == {
        "Out": ((2, 3, 4), VarType.FP32), "OutScale": ((2,), VarType.FP32)}
    assert spec_of(op("fake_quantize_range_abs_max").infer(x, one, None)) == {
        "Out": ((2, 3, 4), VarType.FP32), "OutScale": one, "OutScales": ((10000,), VarType.FP32)}
    for t in ("fake_quantize_moving_average_abs_max",
              "fake_quantize_dequantize_moving_average_abs_max"):
        assert spec_of(op(t).infer(x, one, one, one)) == {
            "Out": ((2, 3, 4), VarType.FP32), "OutScale": one, "OutState": one,
            "OutAccum": one}
    assert spec_of(op("moving_average_abs_max_scale").infer(x, one, one)) == {
        "Out": ((2, 3, 4), VarType.FP32), "OutScale": one, "OutState": one, "OutAccum": one}
    assert spec_of(op("fake_dequantize_max_abs").infer(x, one, max_range=127.0)) == {
        "Out": ((2, 3, 4), VarType.FP32)}
    assert spec_of(op("fake_channel_wise_dequantize_max_abs").infer(x, [one])) == {
        "Out": ((2, 3, 4), VarType.FP32)}
    i8 = VarSpec((2, 3), "int8", 1)
    for t, args in (("dequantize_log", (VarSpec((128,), "float32"),)),
                    ("dequantize_abs_max", (VarSpec((1,), "float32"),))):
        kw = {"max_range": 127.0} if t == "dequantize_abs_max" else {}
        out = op(t).infer(i8, *args, **kw)
        assert list(out) == ["Out"]
        assert (out["Out"].shape, out["Out"].dtype, out["Out"].lod_level) == \
            ((2, 3), VarType.FP32, 1)


@pytest.mark.parametrize("t", ["fake_quantize_abs_max", "fake_channel_wise_quantize_abs_max",
                               "fake_quantize_range_abs_max",
                               "fake_quantize_moving_average_abs_max"])
def test_bit_length_range_and_default(t):
    x = VarSpec((2, 3), "float32")
    one = VarSpec((1,), "float32")
    args = {"fake_quantize_range_abs_max": (x, one, None),
            "fake_quantize_moving_average_abs_max": (x, one, one, one)}.get(t, (x,))
    for ok in (1, 16):
        op(t).infer(*args, bit_length=ok)
    for bad in (0, 17):
        with pytest.raises(ValueError, match=rf"^{t}: bit_length must be in \[1, 16\] \(fluid's "
                                             rf"check\), got {bad}$"):
            op(t).infer(*args, bit_length=bad)
    xv = np.array([[1.0, -0.5, 0.25], [0.0, 2.0, -2.0]], F)
    kw = {"fake_quantize_range_abs_max": dict(InScale=np.array([0], F), Iter=np.array([1])),
          "fake_quantize_moving_average_abs_max": dict(InScale=np.array([0], F),
                                                       InAccum=np.array([0], F),
                                                       InState=np.array([0], F))}.get(t, {})
    out = op(t).forward(xv, **kw)["Out"]                       # bit_length 8: 127 bins
    assert np.abs(out).max() == 127
    with pytest.raises(ValueError, match=rf"^{t}: bit_length must be in \[1, 16\]"):
        op(t).forward(xv, bit_length=17, **kw)


def test_scale_at_fluids_tiny_threshold_and_empty_inputs():
    for dt in (np.float32, np.float64):
        x = np.array([1e-30, -1e-30, 0.5e-30], dt)
        got = op("fake_quantize_abs_max").forward(x)
        assert got["OutScale"].dtype == dt
        # fluid's inverse(s) compares s <= 1e-30 in double: float64 1e-30 is at the threshold
        # (1 / (s + 1e-6): everything rounds to 0), float32(1e-30) = 1.0000000031e-30 is
        # above it (1 / s)
        want = [0, 0, 0] if dt == np.float64 else [127, -127, 64]
        np.testing.assert_array_equal(got["Out"], want)
        x2 = x * 1e7                                            # s = 1e-23: 1 / s
        np.testing.assert_array_equal(op("fake_quantize_abs_max").forward(x2)["Out"],
                                      [127, -127, 64])
    got = op("fake_quantize_abs_max").forward(np.zeros((0, 3), F))
    assert got["OutScale"].tolist() == [0.0] and got["OutScale"].dtype == F
    got = op("fake_channel_wise_quantize_abs_max").forward(np.zeros((3, 0), F))
    assert got["OutScale"].tolist() == [0.0, 0.0, 0.0] and got["OutScale"].dtype == F
    assert got["Out"].shape == (3, 0)
    x = np.arange(24, dtype=F).reshape(2, 3, 4) - 11
    got = op("fake_channel_wise_quantize_abs_max").forward(x, bit_length=4)
    s = np.abs(x.reshape(2, -1)).max(1)
    np.testing.assert_array_equal(got["OutScale"], s)
    np.testing.assert_array_equal(got["Out"], fluid_round(7 * x / s[:, None, None]))


def ref_range_abs_max(steps, window, last=0.0):
    """fluid 1.8's FindRangeAbsMaxFunctor over a sequence of steps (float64)."""
    arr = np.zeros(window)
    outs = []
    for it, cur in enumerate(steps):
        idx = it % window
        removed, arr[idx] = arr[idx], cur
        mx = last
        if mx < cur:
            mx = cur
        elif abs(removed - mx) < 1e-6:
            size = window if it > window else it
            mx = np.abs(arr[:size]).max() if size > 0 else 0.0
        outs.append(mx)
        last = mx
    return outs


def test_range_abs_max_over_steps():
    t = op("fake_quantize_range_abs_max")
    window = 3
    peaks = [0.0, 5.0, 1.0, 1.5, 0.5, 0.25, 3.0, 1.0, 1.0, 0.75, 0.5]
    want = ref_range_abs_max(peaks, window)
    scale, scales = np.array([0.0], F), None
    got = []
    for it, p in enumerate(peaks):
        x = np.array([p, -p / 2, p / 4], F)
        res = t.forward(x, scale, np.array([it], np.int64), scales, window_size=window,
                        bit_length=8)
        assert res["OutScale"].dtype == F and res["OutScales"].dtype == F
        assert res["OutScales"].shape == (window,)
        scale, scales = res["OutScale"], res["OutScales"]
        got.append(float(scale[0]))
        if p > 0:
            np.testing.assert_array_equal(res["Out"], fluid_round(127 * np.clip(x, -scale[0],
                                                                             scale[0])
                                                              / scale[0]))
    np.testing.assert_allclose(got, want, rtol=1e-6)
    # stale entries past Iter are not part of the window
    res = t.forward(np.array([2.0], F), np.array([9.0], F), np.array([1]),
                    np.array([1.0, 9.0, 9.0], F), window_size=3)
    assert res["OutScale"].tolist() == [1.0]
    # a fresh window buffer (no OutScales, or the wrong size) starts from zeros
    for buf in (None, np.array([7.0], F)):
        res = t.forward(np.array([2.0], F), np.array([0.0], F), np.array([4]), buf,
                        window_size=3)
        assert res["OutScales"].tolist() == [0.0, 2.0, 0.0]


def test_range_abs_max_defaults_is_test_and_checks():
    t = op("fake_quantize_range_abs_max")
    x = np.array([0.5, -1.0], F)
    res = t.forward(x, np.array([0.0], F), np.array([0]))        # window 10000, training
    assert res["OutScales"].shape == (10000,) and res["OutScales"][0] == 1.0
    res = t.forward(x, np.array([2.0], np.float64), None, is_test=True, window_size=4)
    assert res["OutScale"].tolist() == [2.0] and res["OutScale"].dtype == F
    np.testing.assert_array_equal(res["Out"], [32, -64])
    assert res["OutScales"].tolist() == [0.0] * 4 and res["OutScales"].dtype == F
    res = t.forward(x, np.array([2.0], F), None, np.array([1.0, 3.0], np.float64),
                    is_test=True, window_size=2)
    assert res["OutScales"].tolist() == [1.0, 3.0] and res["OutScales"].dtype == F
    with pytest.raises(ValueError, match=r"^fake_quantize_range_abs_max: training "
                                         r"\(is_test=False\) needs the Iter input$"):
        t.forward(x, np.array([1.0], F), None)
    with pytest.raises(ValueError, match=r"^fake_quantize_range_abs_max: window_size must be "
                                         r">= 1, got 0$"):
        t.forward(x, np.array([1.0], F), np.array([0]), window_size=0)
    res = t.forward(x, np.array([0.0], F), np.array([5]), window_size=1)
    assert res["OutScales"].tolist() == [1.0]


@pytest.mark.parametrize("dequant", [False, True])
def test_moving_average_quantizers(dequant):
    t = op("fake_quantize_dequantize_moving_average_abs_max" if dequant
           else "fake_quantize_moving_average_abs_max")
    x = np.array([0.5, -3.0, 1.2], F)
    res = t.forward(x, np.array([1.0], F), np.array([2.0], F), np.array([3.0], F))
    # fluid's defaults: moving_rate 0.9, training
    state, accum = 0.9 * 3.0 + 1, 0.9 * 2.0 + 3.0
    scale = F(accum) / F(state)
    for k, v in (("OutState", state), ("OutAccum", accum), ("OutScale", scale)):
        assert res[k].dtype == F and res[k].shape == (1,), k
        np.testing.assert_allclose(res[k], [v], rtol=1e-6, err_msg=k)
    q = fluid_round(127 * np.clip(x, -scale, scale) / scale)
    np.testing.assert_allclose(res["Out"], q * scale / 127 if dequant else q, rtol=1e-6)
    # is_test: quantized with InScale, the state passed through
    res = t.forward(x, np.array([2.0], np.float64), np.array([2.0], F), np.array([3.0], F),
                    is_test=True)
    assert res["OutScale"].tolist() == [2.0] and res["OutScale"].dtype == F
    q = fluid_round(127 * np.clip(x, -2, 2) / 2)
    np.testing.assert_allclose(res["Out"], q * 2 / 127 if dequant else q, rtol=1e-6)
    assert res["OutAccum"].tolist() == [2.0] and res["OutState"].tolist() == [3.0]
    for acc, st in ((np.array([2.0], F), None), (None, np.array([3.0], F)), (None, None)):
        with pytest.raises(ValueError, match=r"^moving-average quantization in training "
                                             r"\(is_test=False\) needs the InAccum and "
                                             r"InState inputs$"):
            t.forward(x, np.array([1.0], F), acc, st)


def test_moving_average_abs_max_scale():
    t = op("moving_average_abs_max_scale")
    x = np.array([[0.5, -4.0]], F)
    res = t.forward(x, np.array([2.0], F), np.array([3.0], F))      # training by default
    np.testing.assert_allclose(res["OutScale"], [(0.9 * 2 + 4) / (0.9 * 3 + 1)], rtol=1e-6)
    assert res["OutScale"].dtype == F and res["Out"] is not x
    np.testing.assert_array_equal(res["Out"], x)
    res = t.forward(x, np.array([2.0], np.float64), np.array([4.0], np.float64), is_test=True)
    assert res["OutScale"].tolist() == [0.5] and res["OutScale"].dtype == F
    assert res["OutAccum"].tolist() == [2.0] and res["OutState"].tolist() == [4.0]
    np.testing.assert_array_equal(res["Out"], x)
    res = t.forward(x, np.array([2.0], F), None, is_test=True)
    assert "OutScale" not in res and res["OutAccum"].tolist() == [2.0]
    res = t.forward(x, None, np.array([4.0], F), is_test=True)
    assert "OutScale" not in res and res["OutState"].tolist() == [4.0]


def test_channel_wise_dequantize_two_scales_and_checks():
    t = op("fake_channel_wise_dequantize_max_abs")
    x = np.arange(12, dtype=F).reshape(2, 3, 2) - 5
    s0, s1 = np.array([0.5, 2.0, 4.0], F), np.array([3.0], F)
    got = t.forward(x, [s0, s1], quant_bits=[8, 4])["Out"]
    want = x * (s0[None, :, None] * 3.0) / (127 * 7)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    got = t.forward(x, [np.array([0.5, 2.0], F)])["Out"]         # quant_bits default [8]
    np.testing.assert_allclose(got, x * np.array([0.5, 2.0], F)[:, None, None] / 127,
                               rtol=1e-6)
    sv = VarSpec((3,), "float32")
    for scales, bits in (([sv] * 3, [8, 8, 8]), ([sv, sv], [8])):
        with pytest.raises(ValueError, match=rf"^fake_channel_wise_dequantize_max_abs: Scales "
                                             rf"must hold 1 or 2 tensors and quant_bits one bit "
                                             rf"width per scale tensor, got {len(scales)} scales "
                                             rf"and quant_bits={bits}$".replace("[", r"\[")
                                                                       .replace("]", r"\]")):
            t.infer(VarSpec((2, 3), "float32"), scales, quant_bits=bits)
    with pytest.raises(ValueError, match=r"^fake_channel_wise_dequantize_max_abs: Scales\[0\] "
                                         r"must hold one value per X.shape\[1\] = 3, got 2$"):
        t.forward(x, [np.array([0.5, 2.0], F), s1], quant_bits=[8, 8])


def test_dequantize_ops():
    got = op("fake_dequantize_max_abs").forward(np.array([[127.0, -64.0]], F),
                                                np.array([[2.0]], F), max_range=127.0)["Out"]
    assert got.dtype == F
    np.testing.assert_allclose(got, [[2.0, -128 / 127]], rtol=1e-6)
    got = op("dequantize_abs_max").forward(np.array([[127, -64]], np.int8),
                                           np.array([[2.0]], np.float64), max_range=127.0)
    assert got["Out"].dtype == F
    np.testing.assert_allclose(got["Out"], [[2.0, -128 / 127]], rtol=1e-6)
    table = np.linspace(0, 1, 128)
    got = op("dequantize_log").forward(np.array([0, 5, -1, -128, 127], np.int8), table)
    assert got["Out"].dtype == F
    np.testing.assert_allclose(got["Out"], [0, table[5], -table[127], -table[0], table[127]],
                               rtol=1e-6)


def test_range_abs_max_keeps_a_larger_last_scale_and_its_window_dtype():
    """The value leaving the window (4.5) is not the running maximum (5.0, InScale): the scale
    stays 5.0 (fluid recomputes the window's maximum only when |removed - max| < 1e-6); a
    float64 window buffer comes back in X's type."""
    t = op("fake_quantize_range_abs_max")
    res = t.forward(np.array([2.0, -1.0], F), np.array([5.0], F), np.array([3]),
                    np.array([4.5, 1.0, 1.0], np.float64), window_size=3)
    assert res["OutScale"].tolist() == [5.0]
    assert res["OutScales"].tolist() == [2.0, 1.0, 1.0] and res["OutScales"].dtype == F
