"""fluid 1.8's quantization ops (ops/quant.py) against NumPy references written from fluid's
formulas: bin_cnt = 2^(bits-1) - 1, clip to ±scale, round halves away from zero, the 1e-6
guard on a zero scale, the moving-average and windowed scales, and the dequantizers. fluid
registers no gradient for them (inference / pass ops), so there is no gradient check."""
import numpy as np
import pytest

from tests.ops.test_fusion_ops import run_multi as run

F = np.float32


def _q(x, s, bits=8):
    b = F((1 << (bits - 1)) - 1)
    inv = F(1) / (s + F(1e-6)) if s <= 1e-30 else F(1) / s
    y = b * inv * np.clip(x, -s, s)
    return np.copysign(np.floor(np.abs(y) + F(0.5)), y)


def test_fake_quantize_abs_max_rounds_halves_away_from_zero():
    x = np.array([[0.5, -0.5, 1.5, -2.5, 127.0]], F) / F(127)
    out, scale = run("fake_quantize_abs_max", {"X": x}, {"bit_length": 8},
                           outs=("Out", "OutScale"))
    # 0.5 -> 1 and -2.5 -> -3 (NumPy's round would give 0 and -2)
    np.testing.assert_array_equal(np.asarray(out), [[1, -1, 2, -3, 127]])
    assert np.asarray(scale).tolist() == [x.max()]
    zero, = [run("fake_quantize_abs_max", {"X": np.full((2, 2), 1e-40, F)}, {},
                       outs=("Out",))]
    np.testing.assert_array_equal(np.asarray(zero), _q(np.full((2, 2), 1e-40, F), F(1e-40)))


def test_channel_wise_quantize_and_dequantize():
    x = np.random.default_rng(0).standard_normal((3, 2, 4)).astype(F)
    out, scales = run("fake_channel_wise_quantize_abs_max", {"X": x}, {"bit_length": 5},
                            outs=("Out", "OutScale"))
    s = np.abs(x).reshape(3, -1).max(1)
    np.testing.assert_array_equal(np.asarray(scales), s)
    want = np.stack([_q(x[c], s[c], 5) for c in range(3)])
    np.testing.assert_array_equal(np.asarray(out), want)
    back = run("fake_channel_wise_dequantize_max_abs",
                     {"X": want, "Scales": [("s0", s, None)]}, {"quant_bits": [5]})
    np.testing.assert_allclose(np.asarray(back), want * (s / 15).reshape(3, 1, 1), rtol=1e-6)
    two = run("fake_channel_wise_dequantize_max_abs",
                    {"X": want, "Scales": [("s0", np.array([0.5, 2.0], F), None),
                                           ("s1", np.array([3.0], F), None)]},
                    {"quant_bits": [8, 8]})
    np.testing.assert_allclose(np.asarray(two), want * (np.array([0.5, 2.0], F) * 3.0 /
                                                         (127 * 127)).reshape(1, 2, 1),
                               rtol=1e-6)


def test_moving_average_quantizers_and_scale():
    x = np.random.default_rng(1).uniform(-2, 2, (4, 5)).astype(F)
    ins = {"X": x, "InScale": np.array([0.1], F), "InAccum": np.array([1.0], F),
           "InState": np.array([2.0], F)}
    state, accum = F(0.9) * F(2) + F(1), F(0.9) * F(1) + np.abs(x).max()
    s = accum / state
    for op, deq in (("fake_quantize_moving_average_abs_max", False),
                    ("fake_quantize_dequantize_moving_average_abs_max", True)):
        out, sc, st, ac = run(op, ins, {"moving_rate": 0.9},
                                    outs=("Out", "OutScale", "OutState", "OutAccum"))
        q = _q(x, s)
        np.testing.assert_allclose(np.asarray(out), q * s / 127 if deq else q, rtol=1e-6)
        np.testing.assert_allclose([np.asarray(sc)[0], np.asarray(st)[0], np.asarray(ac)[0]],
                                   [s, state, accum], rtol=1e-6)
    test = run("fake_quantize_moving_average_abs_max", ins, {"is_test": True})
    np.testing.assert_array_equal(np.asarray(test), _q(x, F(0.1)))
    out, sc = run("moving_average_abs_max_scale", {k: ins[k] for k in
                                                         ("X", "InAccum", "InState")},
                        {}, outs=("Out", "OutScale"))
    np.testing.assert_array_equal(np.asarray(out), x)
    np.testing.assert_allclose(np.asarray(sc), [s], rtol=1e-6)


def test_range_abs_max_window():
    x = np.array([[1.0, -3.0]], F)
    ins = {"X": x, "InScale": np.array([2.0], F), "Iter": np.array([0], np.int64)}
    out, sc, scales = run("fake_quantize_range_abs_max", ins, {"window_size": 3},
                                outs=("Out", "OutScale", "OutScales"))
    np.testing.assert_array_equal(np.asarray(scales), [3.0, 0.0, 0.0])
    assert np.asarray(sc).tolist() == [3.0]          # max(InScale, max|X|)
    np.testing.assert_array_equal(np.asarray(out), _q(x, F(3)))
    test = run("fake_quantize_range_abs_max", ins, {"is_test": True})
    np.testing.assert_array_equal(np.asarray(test), _q(x, F(2)))      # InScale, clipped


def test_dequantize_ops_and_errors():
    x = np.array([[-127, 3, 64]], np.int8)
    got = run("dequantize_abs_max", {"X": x, "Scale": np.array([2.0], F)},
                    {"max_range": 127.0})
    assert np.asarray(got).dtype == np.float32
    np.testing.assert_allclose(np.asarray(got), x * F(2) / F(127), rtol=1e-7)
    got = run("fake_dequantize_max_abs", {"X": x.astype(np.float64),
                                                "Scale": np.array([2.0])}, {"max_range": 15.0})
    np.testing.assert_allclose(np.asarray(got), x * 2.0 / 15.0)
    with pytest.raises(ValueError, match=r"bit_length must be in \[1, 16\]"):
        run("fake_quantize_abs_max", {"X": np.ones((2, 2), F)}, {"bit_length": 0})
    with pytest.raises(ValueError, match="training \\(is_test=False\\) needs the Iter input"):
        run("fake_quantize_range_abs_max", {"X": np.ones((2, 2), F),
                                                  "InScale": np.ones(1, F)}, {})


def test_dequantize_log_looks_codes_up_in_the_dict():
    """fluid 1.8's dequantize_log: code c >= 0 -> Dict[c], c < 0 -> -Dict[c + 128]."""
    table = np.linspace(0.5, 64.0, 128).astype(F)
    x = np.array([[-128, -1, 0], [1, 127, -64]], np.int8)
    got = np.asarray(run("dequantize_log", {"X": x, "Dict": table}, {}))
    want = np.array([[-table[0], -table[127], table[0]], [table[1], table[127], -table[64]]])
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, want.astype(F))
    with pytest.raises(ValueError, match="Dict must hold 128 values"):
        run("dequantize_log", {"X": x, "Dict": table[:10]}, {})
    with pytest.raises(ValueError, match="X must be int8, but it is INT32"):
        run("dequantize_log", {"X": x.astype(np.int32), "Dict": table}, {})


def test_is_test_steps_leave_the_state_as_it_is():
    """Inference (is_test) quantizes with InScale and writes the moving / windowed state back
    unchanged (a program that declares those outputs runs; fluid's kernels do not touch them)."""
    x = np.array([[0.3, -1.0]], F)
    ins = {"X": x, "InScale": np.array([0.5], F), "InAccum": np.array([3.0], F),
           "InState": np.array([2.0], F)}
    out, st, ac = run("fake_quantize_moving_average_abs_max", ins, {"is_test": True},
                      outs=("Out", "OutState", "OutAccum"))
    np.testing.assert_array_equal(np.asarray(out), _q(x, F(0.5)))
    assert (np.asarray(st).tolist(), np.asarray(ac).tolist()) == ([2.0], [3.0])
    out, sc = run("moving_average_abs_max_scale", {k: ins[k] for k in ("X", "InAccum",
                                                                       "InState")},
                  {"is_test": True}, outs=("Out", "OutScale"))
    assert np.asarray(sc).tolist() == [1.5]
    out, scales = run("fake_quantize_range_abs_max", {"X": x, "InScale": np.array([0.5], F),
                                                      "Iter": np.array([4], np.int64)},
                      {"is_test": True, "window_size": 2}, outs=("Out", "OutScales"))
    np.testing.assert_array_equal(np.asarray(out), _q(x, F(0.5)))
    np.testing.assert_array_equal(np.asarray(scales), [0.0, 0.0])
