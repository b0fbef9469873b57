"""Layer arguments fluid 1.8 scripts get wrong, refused at build time with a message naming the
argument, what was received and what is expected, before the program changes (issue 29)."""
import numpy as np
import pytest

import fluidlite as fluid


def _build(fn, inputs=lambda: ()):
    """``fn(*inputs())`` must raise and leave the program as ``inputs`` left it."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        args = inputs()
        before = (len(main.global_block().ops), set(main.global_block().vars))
        with pytest.raises((TypeError, ValueError)) as e:
            fn(*args)
        assert (len(main.global_block().ops), set(main.global_block().vars)) == before
    return e


@pytest.mark.parametrize("fn", [fluid.data, lambda n, shape: fluid.layers.data(n, shape)])
def test_data_with_an_int_shape_says_a_list_is_expected(fn):
    e = _build(lambda: fn("x", shape=5))
    assert e.type is TypeError
    assert "'x'" in str(e.value) and "list or tuple" in str(e.value) and "received int 5" in \
        str(e.value)


def test_data_with_a_non_int_dim_names_its_index():
    e = _build(lambda: fluid.data("x", shape=[None, "8"]))
    assert e.type is ValueError and "shape[1]" in str(e.value) and "'8'" in str(e.value)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):        # NumPy ints and None are fine
        v = fluid.data("y", shape=(None, np.int64(3)))
    assert v.shape == (-1, 3)


@pytest.mark.parametrize("p", [-0.5, 1.5, "0.1"])
def test_basic_gru_and_lstm_refuse_a_dropout_that_is_no_probability(p):
    from fluidlite.contrib.layers import basic_gru, basic_lstm

    def gru(x):
        basic_gru(x, None, 16, dropout_prob=p)

    def lstm(x):
        basic_lstm(x, None, None, 16, dropout_prob=p)
    for fn in (gru, lstm):
        e = _build(fn, lambda: [fluid.data("g", [-1, 5, 8], "float32")])
        assert e.type is ValueError and "dropout_prob" in str(e.value) and repr(p) in \
            str(e.value)


def test_chunk_eval_refuses_an_unknown_scheme_when_built():
    def fn(inference, label):
        fluid.layers.chunk_eval(inference, label, chunk_scheme="XYZ", num_chunk_types=3)
    e = _build(fn, lambda: [fluid.data("ci", [-1, 1], "int64", lod_level=1),
                            fluid.data("cl", [-1, 1], "int64", lod_level=1)])
    assert e.type is ValueError and "'XYZ'" in str(e.value) and "IOB" in str(e.value)
