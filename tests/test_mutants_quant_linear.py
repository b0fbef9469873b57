"""Tests written from the mutation run of ``fluidlite/ops/quant_linear.py`` (issue 28, round 10):
quantize_linear / dequantize_linear at rounding halves (both round types), below -s and above
s, at 4 bits, per channel on axis 0, with a zero scale; the state outputs an inference program
may name; float64 inputs; the checks and their messages.

References: Paddle 2.6.2's own kernels -- the expected arrays below were produced by
tests/ops/paddle_oracle.py (legacy ``quantize_linear`` / ``dequantize_linear`` ops, static
mode, float32 CPU kernels) in /tmp/paddle-venv on 2026-11-29 and are written out here so the
test runs without Paddle."""
import warnings

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core.registry import VarSpec, get_op_def

F = np.float32
Q, D = get_op_def("quantize_linear"), get_op_def("dequantize_linear")


def _q(x, s, **attrs):
    attrs = dict(dict(quant_axis=-1, bit_length=8, round_type=0), **attrs)
    return Q.forward(np.asarray(x, F), np.asarray(s, F), np.zeros(np.size(s), F), **attrs)["Y"]


HALVES = [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.49, -200.0, 200.0]


@pytest.mark.parametrize("round_type,want", [
    (0, [0.0, 2.0, 2.0, -0.0, -2.0, -2.0, 3.0, -128.0, 127.0]),      # Paddle 2.6
    (1, [1.0, 2.0, 3.0, -1.0, -2.0, -3.0, 3.0, -127.0, 127.0])])
def test_quantize_halves_and_range_as_paddle(round_type, want):
    y = _q(HALVES, [127.0], round_type=round_type)
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("round_type,want", [(0, [7.0, -8.0, 3.0, -4.0, 0.0]),   # Paddle 2.6
                                             (1, [7.0, -7.0, 3.0, -4.0, 1.0])])
def test_quantize_at_four_bits_as_paddle(round_type, want):
    np.testing.assert_array_equal(_q([10.0, -10.0, 3.4, -3.6, 0.5], [7.0], bit_length=4,
                                     round_type=round_type), want)


def test_per_channel_on_axis_zero_as_paddle():
    x = [[1.0, -2.0, 0.3], [4.0, -0.2, 8.0]]
    for rt in (0, 1):
        np.testing.assert_array_equal(_q(x, [2.0, 8.0], quant_axis=0, round_type=rt),
                                      [[64.0, -127.0, 19.0], [64.0, -3.0, 127.0]])
    y = D.forward(np.array([[127, -64, 3], [-128, 5, 1]], F), np.array([2.0, 8.0], F),
                  quant_axis=0, bit_length=8)["Y"]
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y, np.array([[2.0, -1.0078740119934082, 0.04724409431219101],
                                               [-8.062992095947266, 0.31496062874794006,
                                                0.06299212574958801]], F))
    y = D.forward(np.array([7, -8, 3], F), np.array([3.5], F), quant_axis=-1,
                  bit_length=4)["Y"]
    np.testing.assert_array_equal(y, [3.5, -4.0, 1.5])


def test_zero_scale_as_paddle_and_silently():
    x = [10.0, -10.0, 3.4, -3.6, 0.5]
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # 1 / 0 and 0 * inf raise no warning
        np.testing.assert_array_equal(_q(x, [0.0], round_type=0), [127, -128, 127, -128, 127])
        np.testing.assert_array_equal(_q(x, [0.0], round_type=1), [0, 0, 0, 0, 0])
        np.testing.assert_array_equal(_q([0.0, 1.0], [0.0], round_type=0), [0, 127])


def test_float32_arithmetic_in_paddles_order():
    """Paddle's float32 kernels: (bin_cnt * (1 / s)) * x in float32 puts these values below
    the rounding half that float64 arithmetic would see (-119.5 -> -120, not -119); and
    dequantize's X * s / bin_cnt rounds twice in float32."""
    x = [-1.4114172458648682, -1.3877952098846436, -1.3051180839538574, 1.3051180839538574]
    for rt in (0, 1):
        np.testing.assert_array_equal(_q(x, [1.5], round_type=rt), [-120, -118, -111, 111])
    y = D.forward(np.array([-125, -112, -111, -109, 5, 64], F), np.array([0.7], F),
                  quant_axis=-1, bit_length=8)["Y"]
    np.testing.assert_array_equal(y, np.array(                          # Paddle 2.6
        [-0.6889764070510864, -0.6173228621482849, -0.6118109822273254, -0.600787341594696,
         0.027559055015444756, 0.35275590419769287], F))


def test_a_zero_dim_input_stays_zero_dim():
    y = _q(np.array(0.3, F), [1.5])
    assert y.shape == () and float(y) == 25.0                            # Paddle 2.6: () 25
    assert D.forward(np.array(25.0, F), np.array([1.5], F), quant_axis=-1)["Y"].shape == ()


def test_float64_inputs_keep_float64():
    x = np.array([0.3, -1.2, 2.5], np.float64)
    y = Q.forward(x, np.array([1.5]), quant_axis=-1, bit_length=8, round_type=0)["Y"]
    assert y.dtype == np.float64
    np.testing.assert_array_equal(y, np.clip(np.rint(x * 127 / 1.5), -128, 127))
    d = D.forward(y, np.array([1.5]), quant_axis=-1, bit_length=8)["Y"]
    assert d.dtype == np.float64
    np.testing.assert_allclose(d, y * 1.5 / 127, rtol=1e-15)


@pytest.mark.parametrize("op", [Q, D])
def test_state_outputs_are_kept_and_observer_passes_through(op):
    x = np.array([[0.3, -1.2]], F)
    s = np.array([1.5], F)
    acc, state = np.array([2.0], F), np.array([3.0], F)
    res = op.forward(x, s, None, acc, state, quant_axis=-1, bit_length=8, round_type=0)
    assert set(res) == {"Y", "OutScale", "OutAccum", "OutState"}
    np.testing.assert_array_equal(res["OutScale"], s)
    np.testing.assert_array_equal(res["OutAccum"], acc)
    np.testing.assert_array_equal(res["OutState"], state)
    assert res["OutScale"] is not s and res["OutAccum"] is not acc      # fresh buffers
    res = op.forward(x, s, None, acc, state, quant_axis=-1, only_observer=True)
    np.testing.assert_array_equal(res["Y"], x)
    assert res["Y"] is not x
    np.testing.assert_array_equal(res["OutScale"], s)
    np.testing.assert_array_equal(res["OutAccum"], acc)
    np.testing.assert_array_equal(res["OutState"], state)
    res = op.forward(x, s, quant_axis=-1, only_observer=True)
    assert res["OutAccum"].dtype == np.float32 and res["OutAccum"].tolist() == [0.0]
    assert res["OutState"].tolist() == [0.0]


def test_through_a_program_with_the_state_outputs():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        block = main.global_block()
        x = fluid.data("x", [2, 3], "float32")
        s = fluid.data("s", [1], "float32")
        outs = {n: block.create_var(name=n.lower(), dtype="float32")
                for n in ("Y", "OutScale")}
        block.append_op("quantize_linear", {"X": x, "Scale": s}, outs,
                        {"quant_axis": -1, "bit_length": 8, "round_type": 0, "is_test": True})
    xv = np.array([[0.5, 1.5, -2.5], [100.0, -100.0, 0.0]], F)
    y, sc = fluid.Executor().run(main, feed={"x": xv, "s": np.array([127.0], F)},
                                 fetch_list=[outs["Y"], outs["OutScale"]])
    np.testing.assert_array_equal(y, [[0.0, 2.0, -2.0], [100.0, -100.0, 0.0]])
    np.testing.assert_array_equal(sc, [127.0])


@pytest.mark.parametrize("op", [Q, D])
def test_checks_and_messages(op):
    x, s = np.ones((2, 3), F), np.array([1.0], F)
    name = op.type
    with pytest.raises(ValueError, match=rf"{name}: ZeroPoint must be 0 \(Paddle's quantization "
                                         rf"is symmetric\), got \[0.0, 2.0\]"):
        op.forward(x, np.ones(2, F), np.array([0.0, 2.0], F), quant_axis=0)
    with pytest.raises(ValueError, match=rf"{name}: ZeroPoint must be 0 .*, got \[0.0, 0.0, 0.0, "
                                         rf"0.0\]$"):          # the first four values
        op.forward(np.ones((6, 2), F), np.ones(6, F), np.array([0, 0, 0, 0, 1, 1], F),
                   quant_axis=0)
    op.forward(x, s, np.zeros(1, F), quant_axis=-1)             # a zero ZeroPoint is fine
    for bits in (1, 33):
        with pytest.raises(ValueError, match=rf"{name}: bit_length must be in \[2, 32\], got "
                                             rf"{bits}"):
            op.forward(x, s, quant_axis=-1, bit_length=bits)
    for bits in (2, 32):
        op.forward(x, s, quant_axis=-1, bit_length=bits)
    with pytest.raises(ValueError, match=rf"{name}: a per-tensor Scale \(quant_axis -1\) holds "
                                         rf"one value, got 2"):
        op.forward(x, np.ones(2, F), quant_axis=-1)
    with pytest.raises(ValueError, match=rf"{name}: Scale must hold one value per index of dim "
                                         rf"1 of X \[2, 3\], got 2"):
        op.forward(x, np.ones(2, F), quant_axis=1)
    with pytest.raises(ValueError, match=rf"{name}: Scale must hold one value per index of dim "
                                         rf"2 of X \[2, 3\], got 1"):
        op.forward(x, s, quant_axis=2)
    with pytest.raises(ValueError, match=rf"{name}: only inference programs \(is_test=True\) "
                                         rf"run in fluidlite; the training form updates "
                                         rf"moving-average scales"):
        op.infer(VarSpec((2, 3), "float32"), VarSpec((1,), "float32"), is_test=False)
    spec = VarSpec((2, 3), "float32")
    assert op.infer(spec, VarSpec((1,), "float32"), is_test=True) == {"Y": spec}
    assert op.infer(spec, VarSpec((1,), "float32")) == {"Y": spec}
