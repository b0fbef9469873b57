"""fluid 1.8's argument checks of static layer functions: the TypeError (or ValueError) its
layer code raises for a bad argument type or dtype, found by running fluid 1.8's own
``test_*_op.py`` error cases (tests/real/paddle_optests.py). The dtype lists are fluid 1.8's
``check_variable_and_dtype`` / ``check_dtype`` lists (python/paddle/fluid/layers/*.py at
release/1.8); dygraph layers keep every dtype, as fluid 1.8's dygraph branches checked none."""
import numpy as np
import pytest

import fluidlite as fluid

L = fluid.layers


@pytest.fixture
def static():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        yield


def test_mean_of_an_integer_input_is_a_type_error(static):
    x = fluid.data("x", [12, 10], "int32")
    with pytest.raises(TypeError, match=r"'x' in mean must be .*float.*received int32"):
        L.mean(x)
    assert L.mean(fluid.data("h", [12, 10], "float16")).dtype == fluid.core.VarDesc.VarType.FP16


@pytest.mark.parametrize("layer", ["fill_constant", "full"])
def test_fill_constant_and_full_take_fluid_18s_dtypes(static, layer):
    make = (lambda **kw: L.fill_constant(**kw)) if layer == "fill_constant" else \
        (lambda value, **kw: L.full(fill_value=value, **kw))
    for dtype in ("uint8", "int16", "int8"):
        with pytest.raises(TypeError, match=rf"'dtype' in fill_constant must be \['bool', "
                                            rf"'float16', 'float32', 'float64', 'int32', "
                                            rf"'int64'\], but received {dtype}"):
            make(shape=[1], value=5, dtype=dtype)
    with pytest.raises(TypeError, match=r"'out' in fill_constant must be \['float64'\], but "
                                        r"received int32"):
        make(shape=[1], value=5, dtype="float64", out=fluid.data("i", [1], "int32"))
    for dtype in ("bool", "float16", "float32", "float64", "int32", "int64"):
        assert make(shape=[1], value=1, dtype=dtype).dtype == dtype


def test_fill_constant_keeps_every_dtype_in_dygraph():
    with fluid.dygraph.guard():
        out = L.fill_constant([2], "uint8", 7)
        assert out.numpy().dtype == np.uint8 and out.numpy().tolist() == [7, 7]


def test_assign_refuses_a_variable_of_a_dtype_fluid_18_had_no_kernel_for(static):
    with pytest.raises(TypeError, match=r"'input' in assign must be \['bool', 'float16', "
                                        r"'float32', 'float64', 'int32', 'int64'\], but "
                                        r"received uint8"):
        L.assign(L.data("x3", [4], dtype="uint8"))
    assert L.assign(fluid.data("b", [2], "bool")).dtype == "bool"


def test_isfinite_in_a_static_program_refuses_float16(static):
    with pytest.raises(TypeError, match=r"'x' in isfinite must be \['float32', 'float64', "
                                        r"'int32', 'int64'\], but received float16"):
        L.isfinite(fluid.data("h", [10], "float16"))
    L.isfinite(fluid.data("f", [10], "float32"))
    L.has_inf(fluid.data("h2", [10], "float16"))        # fluid 1.8 checked no dtype there


def test_is_empty_condition_must_be_bool(static):
    x = fluid.data("x", [3, 2], "float32")
    with pytest.raises(TypeError, match=r"'cond' in is_empty must be \['bool'\], but received "
                                        r"float32"):
        L.is_empty(x, cond=fluid.data("c", [1], "float32"))
    assert L.is_empty(x, cond=fluid.data("cb", [1], "bool")).dtype == "bool"


def test_meshgrid_wants_a_list_or_at_least_two_variables(static):
    x, y = fluid.data("x", [3], "float32"), fluid.data("y", [4], "float32")
    with pytest.raises(TypeError, match=r"'input' in meshgrid must be .*list.*tuple.*"
                                        r"received Variable"):
        L.meshgrid(x)
    assert [v.shape for v in L.meshgrid([x, y])] == [(3, 4), (3, 4)]
    assert [v.shape for v in L.meshgrid(x, y)] == [(3, 4), (3, 4)]


def test_hsigmoid_label_must_be_int64(static):
    x = fluid.data("x", [4, 3], "float32")
    with pytest.raises(TypeError, match=r"'label' in hsigmoid must be \['int64'\], but "
                                        r"received .*INT32"):
        L.hsigmoid(x, fluid.data("l32", [4, 1], "int32"), 2)
    L.hsigmoid(x, fluid.data("l64", [4, 1], "int64"), 2)


def test_npair_loss_labels_are_float_or_int64(static):
    a, p = fluid.data("a", [2, 4], "float32"), fluid.data("p", [2, 4], "float32")
    with pytest.raises(TypeError, match=r"'labels' in npair_loss must be \['float32', "
                                        r"'float64', 'int64'\], but received int32"):
        L.npair_loss(a, p, fluid.data("l32", [2], "int32"))
    for dtype in ("float32", "int64"):
        L.npair_loss(a, p, fluid.data("l" + dtype, [2], dtype))


@pytest.mark.parametrize("layer", ["lod_reset", "lod_append"])
def test_lod_reset_and_append_take_numbers_only(static, layer):
    fn = getattr(L, layer)
    for dtype in ("bool", "float16"):
        x = L.data("x" + dtype, [4], dtype=dtype)
        y = L.data("y" + dtype, [4], dtype="int32", lod_level=2)
        with pytest.raises(TypeError, match=rf"'x' in {layer} must be \['float32', 'float64', "
                                            rf"'int32', 'int64'\], but received"):
            fn(x, y)
    fn(L.data("xi", [4], dtype="int64"), L.data("yi", [4], dtype="int32", lod_level=1))


def test_lod_append_level_must_be_a_list_or_variable(static):
    with pytest.raises(ValueError, match=r"lod_append: Input\(level\) must be list, tuple or "
                                         r"Variable, but received int"):
        L.lod_append(L.data("x", [4], dtype="float32"), 2)


def test_addcmul_value_type_follows_the_input_dtype(static):
    f = [fluid.data(n, [2, 2], "float32") for n in "abc"]
    i = [fluid.data(n + "i", [2, 2], "int32") for n in "abc"]
    with pytest.raises(TypeError, match=r"'value' in addcmul must be float for .*FP32 inputs, "
                                        r"but received 1 of type int"):
        L.addcmul(*f, value=1)
    with pytest.raises(TypeError, match=r"'value' in addcmul must be int for .*INT32 inputs, "
                                        r"but received 1.0 of type float"):
        L.addcmul(*i, value=1.0)
    with pytest.raises(TypeError, match=r"received True of type bool"):
        L.addcmul(*i, value=True)
    L.addcmul(*f, value=0.5)
    L.addcmul(*i, value=2)


def test_chunk_eval_takes_int64_tags(static):
    label = fluid.data("label", [None, 1], "int64")
    with pytest.raises(TypeError, match=r"'input' in chunk_eval must be \['int64'\], but "
                                        r"received .*INT32"):
        L.chunk_eval(fluid.data("in32", [None, 1], "int32"), label, "IOB", 3)
    L.chunk_eval(fluid.data("in64", [None, 1], "int64"), label, "IOB", 3)


def test_crop_tensor_refuses_float16(static):
    with pytest.raises(TypeError, match=r"'x' in crop_tensor must be \['float32', 'float64', "
                                        r"'int32', 'int64'\], but received float16"):
        L.crop_tensor(fluid.data("h", [2, 3, 6, 6], "float16"), shape=[2, 2, 3, 3])


def test_nce_input_is_float_and_label_int64(static):
    x, label = fluid.data("x", [-1, 4], "float32"), fluid.data("l", [-1, 1], "int64")
    with pytest.raises(TypeError, match=r"'input' in nce must be \['float32', 'float64'\], "
                                        r"but received float16"):
        L.nce(fluid.data("h", [-1, 4], "float16"), label, 5)
    with pytest.raises(TypeError, match=r"'label' in nce must be \['int64'\], but received "
                                        r"int32"):
        L.nce(x, fluid.data("l32", [-1, 1], "int32"), 5)
    L.nce(x, label, 5)


def test_expand_refuses_uint8_in_a_static_program(static):
    with pytest.raises(TypeError, match=r"'x' in expand must be \['bool', 'float32', "
                                        r"'float64', 'int32', 'int64'\], but received uint8"):
        L.expand(L.data("u", [4], dtype="uint8"), [2, 2])
    assert L.expand(fluid.data("b", [2, 4], "bool"), [2, 2]).shape == (4, 8)
