"""Issue 28 item 12 in dygraph mode: the learning-rate decays refuse NaN / infinite / out of
range arguments when they are constructed, naming the class and the argument, as the static
schedules do, instead of training every parameter to NaN later."""
import math

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.dygraph import learning_rate_scheduler as lrs

NAN, INF = float("nan"), float("inf")

# (class, valid keyword arguments, argument to spoil)
CASES = [
    (lrs.PiecewiseDecay, dict(boundaries=[2, 4], values=[1.0, 0.5, 0.1], begin=0), "values"),
    (lrs.PiecewiseDecay, dict(boundaries=[2, 4], values=[1.0, 0.5, 0.1], begin=0),
     "boundaries"),
    (lrs.ExponentialDecay, dict(learning_rate=0.1, decay_steps=10, decay_rate=0.5),
     "learning_rate"),
    (lrs.ExponentialDecay, dict(learning_rate=0.1, decay_steps=10, decay_rate=0.5),
     "decay_rate"),
    (lrs.NaturalExpDecay, dict(learning_rate=0.1, decay_steps=10, decay_rate=0.5),
     "decay_steps"),
    (lrs.InverseTimeDecay, dict(learning_rate=0.1, decay_steps=10, decay_rate=0.5),
     "learning_rate"),
    (lrs.PolynomialDecay, dict(learning_rate=0.1, decay_steps=10), "end_learning_rate"),
    (lrs.PolynomialDecay, dict(learning_rate=0.1, decay_steps=10), "power"),
    (lrs.CosineDecay, dict(learning_rate=0.1, step_each_epoch=10, epochs=3), "learning_rate"),
    (lrs.CosineDecay, dict(learning_rate=0.1, step_each_epoch=10, epochs=3), "epochs"),
    (lrs.NoamDecay, dict(d_model=16, warmup_steps=4), "learning_rate"),
    (lrs.NoamDecay, dict(d_model=16, warmup_steps=4), "warmup_steps"),
    (lrs.LinearLrWarmup, dict(learning_rate=0.1, warmup_steps=4, start_lr=0.0, end_lr=0.1),
     "start_lr"),
    (lrs.LinearLrWarmup, dict(learning_rate=0.1, warmup_steps=4, start_lr=0.0, end_lr=0.1),
     "learning_rate"),
    (lrs.ReduceLROnPlateau, dict(learning_rate=0.1), "learning_rate"),
    (lrs.ReduceLROnPlateau, dict(learning_rate=0.1), "min_lr"),
]


def _spoiled(kwargs, arg, bad):
    out = dict(kwargs)
    out[arg] = [bad] + out[arg][1:] if isinstance(out.get(arg), list) else bad
    return out


@pytest.mark.parametrize("bad", [NAN, INF, -INF])
@pytest.mark.parametrize("cls,kwargs,arg", CASES, ids=[f"{c.__name__}-{a}" for c, _, a in CASES])
def test_a_non_finite_argument_is_refused_naming_class_and_argument(cls, kwargs, arg, bad):
    cls(**kwargs)                                   # the valid arguments construct
    with pytest.raises(ValueError, match=rf"{cls.__name__}: {arg}(\[0\])? must be"):
        cls(**_spoiled(kwargs, arg, bad))


def test_layers_schedules_in_dygraph_mode_check_like_static_mode():
    with fluid.dygraph.guard():
        with pytest.raises(ValueError, match="ExponentialDecay: learning_rate must be a finite"):
            fluid.layers.exponential_decay(NAN, 10, 0.5)
        with pytest.raises(ValueError, match="InverseTimeDecay: decay_rate must be >= 0"):
            fluid.layers.inverse_time_decay(0.1, 10, -0.5)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        with pytest.raises(ValueError, match="learning_rate must be a finite"):
            fluid.layers.exponential_decay(NAN, 10, 0.5)


def test_piecewise_boundaries_must_increase_in_dygraph():
    with pytest.raises(ValueError, match=r"boundaries must be increasing, got \[4.0, 2.0\]"):
        lrs.PiecewiseDecay([4, 2], [1.0, 0.5, 0.1], begin=0)


def test_valid_schedules_still_give_fluids_values():
    with fluid.dygraph.guard():
        lr = lrs.LinearLrWarmup(0.5, warmup_steps=4, start_lr=0.0, end_lr=0.4, begin=0)
        got = [float(lr().numpy()[0]) for _ in range(6)]
    np.testing.assert_allclose(got, [0.0, 0.1, 0.2, 0.3, 0.5, 0.5], rtol=1e-6)
    assert math.isclose(lrs.ExponentialDecay(1.0, 2, 0.25, begin=4).step(), 0.0625)
