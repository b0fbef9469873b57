"""The argument handling conv2d/conv3d, their transposes and pool2d/pool3d share
(``layers/conv.py``): one padding parser for 2-D and 3-D, one transposed-conv size rule, one
set of pool argument checks -- the same answers and messages for every layer that uses them."""
import pytest

import fluidlite as fluid
from fluidlite.layers.conv import _padding, _padding_nd


def _build(fn):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        return fn(), main


@pytest.mark.parametrize("padding, fmt, expected", [
    (1, "NCHW", ([1, 1], "EXPLICIT")),
    ([1, 2], "NHWC", ([1, 2], "EXPLICIT")),
    ([1, 1, 2, 2], "NCHW", ([1, 2], "EXPLICIT")),          # symmetric: one value per axis
    ([0, 1, 2, 3], "NCHW", ([0, 1, 2, 3], "EXPLICIT")),
    ([[0, 0], [0, 0], [1, 2], [3, 4]], "NCHW", ([1, 2, 3, 4], "EXPLICIT")),
    ([[0, 0], [1, 1], [2, 2], [0, 0]], "NHWC", ([1, 2], "EXPLICIT")),
    ("same", "NCHW", ([0, 0], "SAME")),
    ("VALID", "NHWC", ([0, 0], "VALID")),
])
def test_2d_padding_is_the_nd_rule_with_two_axes(padding, fmt, expected):
    assert _padding(padding, fmt, "conv2d") == expected
    assert _padding_nd(padding, fmt, 2, "conv2d") == expected


def test_3d_padding_forms():
    assert _padding_nd([1, 1, 2, 2, 3, 3], "NCDHW", 3, "conv3d") == ([1, 2, 3], "EXPLICIT")
    assert _padding_nd([[0, 0], [1, 2], [0, 0], [3, 4], [0, 0]], "NDHWC", 3, "conv3d") == \
        ([1, 2, 0, 0, 3, 4], "EXPLICIT")
    with pytest.raises(ValueError, match="conv3d: non-zero padding .* batch or channel"):
        _padding_nd([[0, 1], [0, 0], [1, 1], [1, 1], [1, 1]], "NCDHW", 3, "conv3d")
    with pytest.raises(ValueError, match="pool3d: padding must have 3 values"):
        _padding_nd([1, 2], "NCDHW", 3, "pool3d")


def test_transposed_filter_size_is_derived_from_output_size():
    def two_d():
        x = fluid.data(name="x", shape=[-1, 4, 8, 8], dtype="float32")
        return fluid.layers.conv2d_transpose(x, num_filters=6, output_size=[16, 17], stride=2,
                                             padding=[0, 1, 1, 2], groups=2)
    out, main = _build(two_d)
    assert tuple(out.shape) == (-1, 6, 16, 17)
    w = [p for p in main.global_block().all_parameters() if p.name.endswith("w_0")][0]
    assert tuple(w.shape) == (4, 3, 3, 6)           # kh = 3, kw = 6 give exactly 16 x 17

    def three_d():
        x = fluid.data(name="x", shape=[-1, 4, 4, 4, 2], dtype="float32")
        return fluid.layers.conv3d_transpose(x, num_filters=2, output_size=8, stride=2,
                                             padding=1, data_format="NDHWC")
    out, main = _build(three_d)
    assert tuple(out.shape) == (-1, 8, 8, 8, 2)
    w = [p for p in main.global_block().all_parameters() if p.name.endswith("w_0")][0]
    assert tuple(w.shape) == (2, 2, 4, 4, 4)


@pytest.mark.parametrize("layer, shape", [("conv2d_transpose", [-1, 4, 8, 8]),
                                          ("conv3d_transpose", [-1, 4, 4, 4, 4])])
def test_transposed_argument_errors_read_the_same(layer, shape):
    def call(**kw):
        x = fluid.data(name="x", shape=shape, dtype="float32")
        return getattr(fluid.layers, layer)(x, **kw)
    with pytest.raises(ValueError, match=rf"{layer}: input channels \(4\) and num_filters "
                                         rf"\(3\) must be divisible by groups \(2\)"):
        _build(lambda: call(num_filters=3, filter_size=3, groups=2))
    with pytest.raises(ValueError, match=f"{layer}: output_size must be set when filter_size "
                                         f"is None"):
        _build(lambda: call(num_filters=4))
    with pytest.raises(ValueError, match=f"{layer}: output_size should be an int or a list"):
        _build(lambda: call(num_filters=4, output_size="8"))


@pytest.mark.parametrize("layer, shape", [("pool2d", [-1, 4, 8, 8]),
                                          ("pool3d", [-1, 4, 4, 4, 4])])
def test_pool_argument_errors_read_the_same(layer, shape):
    def call(**kw):
        x = fluid.data(name="x", shape=shape, dtype="float32")
        return getattr(fluid.layers, layer)(x, **kw)
    with pytest.raises(ValueError, match=f"{layer}: unknown pool_type 'sum'"):
        _build(lambda: call(pool_size=2, pool_type="sum"))
    with pytest.raises(ValueError, match=f"{layer}: when global_pooling is False, pool_size"):
        _build(lambda: call())
    with pytest.raises(TypeError, match=f"{layer}: use_cudnn should be True or False"):
        _build(lambda: call(pool_size=2, use_cudnn=1))
    # fluid 1.8 refuses ceil_mode with 'VALID' padding (and takes it with 'SAME')
    with pytest.raises(ValueError, match=f"{layer}: when Attr\\(pool_padding\\) is \"VALID\", "
                                         f"Attr\\(ceil_mode\\) must be False"):
        _build(lambda: call(pool_size=2, pool_padding="VALID", ceil_mode=True))
    _build(lambda: call(pool_size=2, pool_padding="SAME", ceil_mode=True))


@pytest.mark.parametrize("layer, shape", [("conv2d", [-1, 2, 8, 8]),
                                          ("conv2d_transpose", [-1, 2, 8, 8]),
                                          ("conv3d", [-1, 2, 4, 4, 4]),
                                          ("conv3d_transpose", [-1, 2, 4, 4, 4])])
def test_conv_use_cudnn_must_be_a_bool_valueerror_as_fluid18(layer, shape):
    # fluid 1.8's conv layers raise ValueError (Paddle's TestConv3dAPI_Error expects it);
    # its pool layers raise TypeError (above)
    def call(**kw):
        x = fluid.data(name="x", shape=shape, dtype="float32")
        return getattr(fluid.layers, layer)(x, 2, filter_size=3, **kw)
    with pytest.raises(ValueError, match=r"Attr\(use_cudnn\) should be True or False. "
                                         r"Received Attr\(use_cudnn\): \[0\]"):
        _build(lambda: call(use_cudnn=[0]))
    _build(lambda: call(use_cudnn=False))


def test_conv2d_checks_the_dtype_before_the_rank_as_fluid18():
    # Paddle's TestConv2dOpError: an int32 input of the wrong rank is a TypeError (dtype)
    with pytest.raises(TypeError, match="conv2d: input 'x2' must be float16/32/64, got int32"):
        _build(lambda: fluid.layers.conv2d(
            fluid.layers.data("x2", [3, 4, 5, 6], dtype="int32"), 1, 1))
