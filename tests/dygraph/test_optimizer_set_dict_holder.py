"""fluid 1.8's dygraph ``Optimizer.set_dict``: the loaded state is kept whole
(``_accumulators_holder``); an accumulator created later takes its value from it, and one whose
name is not in it is an error, as is an existing accumulator missing from the state -- never a
silently fresh accumulator (tests/real/zoo18_dygraph.py's resume check found the silent case)."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.dygraph import Linear, to_variable


def _model_and_opt():
    np.random.seed(1)
    model = Linear(3, 2)
    return model, fluid.optimizer.Adam(learning_rate=0.1, parameter_list=model.parameters())


def _step(model, opt):
    x = to_variable(np.ones((4, 3), "float32"))
    loss = fluid.layers.mean(model(x) * model(x))
    loss.backward()
    opt.minimize(loss)
    model.clear_gradients()


def test_resume_in_the_same_name_space_continues_exactly():
    with fluid.dygraph.guard():
        with fluid.unique_name.guard():
            model, opt = _model_and_opt()
            for _ in range(3):
                _step(model, opt)
        state = opt.state_dict()
        with fluid.unique_name.guard():
            fresh, fresh_opt = _model_and_opt()
            fresh.set_dict(model.state_dict())
            fresh_opt.set_dict(state)
            _step(fresh, fresh_opt)
        _step(model, opt)
        for a, b in zip(model.parameters(), fresh.parameters()):
            np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_accumulator_missing_from_the_loaded_state_is_an_error():
    with fluid.dygraph.guard():
        model, opt = _model_and_opt()
        _step(model, opt)
        fresh, fresh_opt = _model_and_opt()         # other unique names (linear_1 ...)
        fresh.set_dict(model.state_dict())
        fresh_opt.set_dict(opt.state_dict())
        with pytest.raises(ValueError, match="Optimizer set error: .* has no accumulator"):
            _step(fresh, fresh_opt)


def test_existing_accumulator_missing_from_the_state_is_an_error():
    with fluid.dygraph.guard():
        model, opt = _model_and_opt()
        _step(model, opt)
        state = {k: v for k, v in opt.state_dict().items() if "moment2" not in k}
        before = {k: v.numpy().copy() for k, v in opt.state_dict().items()}
        with pytest.raises(ValueError, match="optimizer variable .*moment2.* not found"):
            opt.set_dict(state)
        for k, v in opt.state_dict().items():          # nothing was overwritten
            np.testing.assert_array_equal(v.numpy(), before[k])
