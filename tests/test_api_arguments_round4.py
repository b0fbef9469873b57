"""Arguments fluid refuses, found while documenting the API (issue 33's Raises sections)."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.incubate.fleet.base.role_maker import UserDefinedRoleMaker


@pytest.mark.parametrize("padding_idx", [3, 9, -4])
def test_dygraph_embedding_refuses_a_padding_idx_outside_the_vocabulary(padding_idx):
    """as ``fluid.embedding`` does (it used to index past the table silently)"""
    with fluid.dygraph.guard():
        with pytest.raises(ValueError, match=r"padding_idx must be in \[-3, 3\)"):
            fluid.dygraph.Embedding([3, 2], padding_idx=padding_idx)


def test_dygraph_embedding_counts_a_negative_padding_idx_from_the_end():
    with fluid.dygraph.guard():
        emb = fluid.dygraph.Embedding([3, 2], padding_idx=-1)
        out = emb(fluid.dygraph.to_variable(np.array([[2], [0]], dtype="int64")))
        assert out.shape == [2, 1, 2]           # fluid 1.8's lookup_table_v2 keeps the 1
        np.testing.assert_array_equal(out.numpy()[0, 0], np.zeros(2, np.float32))
        assert np.any(out.numpy()[1] != 0)


@pytest.mark.parametrize("value", [["a", 1], np.array([b"x"]), "abc"])
def test_to_variable_refuses_strings(value):
    with fluid.dygraph.guard():
        with pytest.raises(TypeError, match="holds strings or bytes"):
            fluid.dygraph.to_variable(value)


def test_attention_refuses_arrays_for_variables():
    with pytest.raises(TypeError, match="queries must be a Variable, but received ndarray"):
        fluid.nets.scaled_dot_product_attention(np.ones((1, 2, 4)), None, None)


@pytest.mark.parametrize("endpoints", ["127.0.0.1:6170", ["127.0.0.1:6170", 7]])
def test_role_maker_refuses_endpoints_that_are_not_a_string_list(endpoints):
    with pytest.raises(TypeError, match="server_endpoints must be as string list"):
        UserDefinedRoleMaker(server_endpoints=endpoints)


def test_role_maker_keeps_a_string_list():
    assert UserDefinedRoleMaker(server_endpoints=["127.0.0.1:6170"])._server_endpoints == [
        "127.0.0.1:6170"]


def test_assign_refuses_a_ragged_list_with_its_own_message():
    """NumPy >= 1.24 raises its own ValueError first; NumPy 1.23 makes an object array: the
    same TypeError either way"""
    with pytest.raises(TypeError, match="ragged nested list"):
        fluid.layers.assign([[1, 2], [3]])
