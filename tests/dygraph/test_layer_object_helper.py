"""``Layer._helper`` is fluid 1.8's LayerObjectHelper: its methods take inputs, parameter
attributes and the activation explicitly, as layers written for fluid 1.8 call them (the zoo's
similarity_net ``FC`` layer: ``self._helper.iter_inputs_and_params(input, self._param_attr)``)."""
import numpy as np
import pytest

import fluidlite as fluid


class _FC(fluid.dygraph.Layer):
    """A multi-input fully connected layer in the style of fluid 1.8's dygraph FC."""

    def __init__(self, size, param_attr=None, act=None):
        super().__init__("fc")
        self._size, self._param_attr, self._act = size, param_attr, act
        self._w = []

    def forward(self, input):
        outs = []
        for i, (inp, attr) in enumerate(self._helper.iter_inputs_and_params(
                input, self._param_attr)):
            if len(self._w) <= i:
                self._w.append(self.create_parameter(attr=attr, shape=[inp.shape[1],
                                                                       self._size],
                                                     dtype=self._helper.input_dtype(input)))
            outs.append(fluid.layers.matmul(inp, self._w[i]))
        total = outs[0] if len(outs) == 1 else fluid.layers.sums(outs)
        return self._helper.append_activation(total, act=self._act)


def test_fluid18_style_layer_runs():
    x = np.ones((2, 3), "float32")
    with fluid.dygraph.guard():
        fc = _FC(4, param_attr=fluid.ParamAttr(initializer=fluid.initializer.Constant(0.5)),
                 act="relu")
        v = fluid.dygraph.to_variable(x)
        out = fc([v, v]).numpy()
        np.testing.assert_allclose(out, np.full((2, 4), 3.0, "float32"))
        assert len(fc._w) == 2 and fc._w[0].name != fc._w[1].name


def test_helper_errors():
    with fluid.dygraph.guard():
        layer = fluid.dygraph.Layer("demo")
        a = fluid.dygraph.to_variable(np.ones((2, 3), "float32"))
        b = fluid.dygraph.to_variable(np.ones((2, 3), "float64"))
        with pytest.raises(ValueError, match="Data Type mismatch"):
            layer._helper.input_dtype([a, b])
        with pytest.raises(ValueError, match="should not be False"):
            list(layer._helper.iter_inputs_and_params(a, False))
        with pytest.raises(ValueError, match="parameter number mismatch"):
            list(layer._helper.iter_inputs_and_params(
                [a, a, a], [fluid.ParamAttr(), fluid.ParamAttr()]))
        with pytest.raises(TypeError, match="must be int"):
            layer._helper.is_instance(1.5, int)
        assert layer._helper.append_activation(a) is a


class _LazyFC(fluid.dygraph.Layer):
    """fluid 1.8 style: the weight is created in ``_build_once`` from the first input."""

    def __init__(self, size):
        super().__init__("lazy_fc")
        self._size, self._w, self.builds = size, None, 0

    def _build_once(self, input):
        self.builds += 1
        self._w = self.create_parameter(attr=None, shape=[input.shape[1], self._size],
                                        dtype="float32")

    def forward(self, input):
        return fluid.layers.matmul(input, self._w)


def test_build_once_runs_before_the_first_forward_only():
    with fluid.dygraph.guard():
        fc = _LazyFC(4)
        x = fluid.dygraph.to_variable(np.ones((2, 3), "float32"))
        assert fc(x).shape == [2, 4] and fc(x).shape == [2, 4]
        assert fc.builds == 1 and len(fc.parameters()) == 1
