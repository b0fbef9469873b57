"""fluid 1.8: ``Layer.eval()`` / ``train()`` set the dygraph tracer's mode, and
``fluid.layers.dropout`` in dygraph follows it -- models call ``dropout(x, p, is_test=False)``
and rely on ``model.eval()`` for inference (the zoo's dygraph Transformer)."""
import numpy as np

import fluidlite as fluid


class _Net(fluid.dygraph.Layer):
    def forward(self, x):
        return fluid.layers.dropout(x, dropout_prob=0.5, is_test=False)


def test_eval_turns_off_functional_dropout():
    x = np.ones((64, 64), "float32")
    with fluid.dygraph.guard():
        net = _Net()
        net.eval()
        out = net(fluid.dygraph.to_variable(x)).numpy()
        np.testing.assert_array_equal(out, x * 0.5)     # downgrade_in_infer: x * (1 - p)
        net.train()
        out = net(fluid.dygraph.to_variable(x)).numpy()
        assert (out == 0).mean() > 0.3                   # dropping again


def test_eval_sets_the_tracer_mode():
    with fluid.dygraph.guard():
        net = _Net()
        from fluidlite.core import mode
        net.eval()
        assert mode.tracer.train_mode is False
        net.train()
        assert mode.tracer.train_mode is True
