"""fluid 1.8's dygraph ``Embedding`` is always ``lookup_table_v2``: ``ids.shape + [emb_dim]``,
also for ids ending in a 1-dim (the zoo's similarity_net GRU indexes ``emb[:, i:i + 1, :]`` of
``[N, 1]`` ids)."""
import numpy as np
import pytest

import fluidlite as fluid


@pytest.mark.parametrize("shape", [[4], [4, 1], [2, 3], [2, 3, 1]])
def test_output_is_ids_shape_plus_emb_dim(shape):
    ids = np.arange(int(np.prod(shape))).reshape(shape).astype("int64") % 5
    with fluid.dygraph.guard():
        emb = fluid.dygraph.Embedding([5, 3])
        out = emb(fluid.dygraph.to_variable(ids))
        assert out.shape == list(shape) + [3]
        np.testing.assert_array_equal(out.numpy(), emb.weight.numpy()[ids])
