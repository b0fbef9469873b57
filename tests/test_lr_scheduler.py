"""Learning-rate schedules over steps, with fluid's step-counter semantics."""
import math

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core.ir import OpRole

L = fluid.layers
STEPS = 8


def values(make, steps=STEPS):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        lr = make()
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    out = [exe.run(main, fetch_list=[lr], scope=scope)[0] for _ in range(steps)]
    assert all(v.shape == (1,) and v.dtype == np.float32 for v in out)
    return np.array([v[0] for v in out]), main, startup, lr


def poly(t, lr, steps, end, power, cycle):
    if cycle:
        steps = steps * max(math.ceil(t / steps), 1)
    else:
        t = min(t, steps)
    return (lr - end) * (1 - t / steps) ** power + end


def piecewise(t, bounds, vals):
    for b, v in zip(bounds, vals):
        if t < b:
            return v
    return vals[-1]


CASES = {
    "exponential": (lambda: L.exponential_decay(0.1, 3, 0.5),
                    lambda t: 0.1 * 0.5 ** (t / 3)),
    "exponential_staircase": (lambda: L.exponential_decay(0.1, 3, 0.5, staircase=True),
                              lambda t: 0.1 * 0.5 ** (t // 3)),
    "natural_exp": (lambda: L.natural_exp_decay(0.1, 2, 0.3),
                    lambda t: 0.1 * math.exp(-0.3 * t / 2)),
    "natural_exp_staircase": (lambda: L.natural_exp_decay(0.1, 2, 0.3, True),
                              lambda t: 0.1 * math.exp(-0.3 * (t // 2))),
    "inverse_time": (lambda: L.inverse_time_decay(0.1, 2, 0.5),
                     lambda t: 0.1 / (1 + 0.5 * t / 2)),
    "inverse_time_staircase": (lambda: L.inverse_time_decay(0.1, 2, 0.5, staircase=True),
                               lambda t: 0.1 / (1 + 0.5 * (t // 2))),
    "polynomial": (lambda: L.polynomial_decay(0.1, 5, 0.001, power=2.0),
                   lambda t: poly(t, 0.1, 5, 0.001, 2.0, False)),
    "polynomial_cycle": (lambda: L.polynomial_decay(0.1, 3, 0.01, power=1.0, cycle=True),
                         lambda t: poly(t, 0.1, 3, 0.01, 1.0, True)),
    "piecewise": (lambda: L.piecewise_decay([2, 5], [1.0, 0.5, 0.1]),
                  lambda t: piecewise(t, [2, 5], [1.0, 0.5, 0.1])),
    "noam": (lambda: L.noam_decay(16, 4, learning_rate=2.0),
             lambda t: 2.0 * 16 ** -0.5 * min((t + 1) ** -0.5, 4 ** -1.5 * (t + 1))),
    "cosine": (lambda: L.cosine_decay(0.1, 2, 4),
               lambda t: 0.1 * 0.5 * (math.cos((t // 2) * math.pi / 4) + 1)),
    "linear_warmup": (lambda: L.linear_lr_warmup(0.1, 4, 0.01, 0.09),
                      lambda t: 0.01 + 0.08 * t / 4 if t < 4 else 0.1),
    "warmup_then_decay": (lambda: L.linear_lr_warmup(L.exponential_decay(0.1, 3, 0.5), 3,
                                                     0.0, 0.1),
                          lambda t: 0.1 * t / 3 if t < 3 else 0.1 * 0.5 ** (t / 3)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_schedule_values_over_steps(case):
    make, formula = CASES[case]
    got, main, _, _ = values(make)
    want = [formula(t) for t in range(STEPS)]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-8)
    for op in main.global_block().ops:
        assert op.attr("op_role") == OpRole.LRSched, op


def test_piecewise_exact_values_and_named_var():
    got, main, startup, lr = values(lambda: L.piecewise_decay([1, 2, 3], [0.3, 0.7, 0.11, 1e-4]))
    assert lr.name == "learning_rate" and lr.persistable
    assert got.tolist() == np.array([0.3, 0.7, 0.11, 1e-4, 1e-4, 1e-4, 1e-4, 1e-4],
                                    "float32").tolist()      # bit-exact values


def test_decay_counter_semantics():
    _, main, startup, _ = values(lambda: L.exponential_decay(0.1, 3, 0.5), steps=1)
    first = main.global_block().ops[0]
    assert first.type == "increment" and first.input("X") == first.output("Out") == \
        ["@LR_DECAY_COUNTER@"]
    assert first.attr("step") == 1.0 and first.attr("op_role") == OpRole.LRSched
    counter = main.global_block().var("@LR_DECAY_COUNTER@")
    assert counter.persistable and counter.dtype == fluid.VarType.INT64 and counter.shape == (1,)
    init = [op for op in startup.global_block().ops
            if op.output("Out") == ["@LR_DECAY_COUNTER@"]][0]
    assert init.type == "fill_constant" and init.attr("value") == -1.0
    # noam starts counting at 1: initialised to 0
    _, _, startup2, _ = values(lambda: L.noam_decay(8, 2), steps=1)
    init2 = [op for op in startup2.global_block().ops
             if op.output("Out") == ["@LR_DECAY_COUNTER@"]][0]
    assert init2.attr("value") == 0.0


def test_two_schedules_share_one_counter():
    def make():
        a = L.exponential_decay(0.1, 3, 0.5)
        b = L.inverse_time_decay(0.1, 2, 0.5)
        return L.elementwise_add(a, b)
    got, main, _, _ = values(make, steps=3)
    assert [op.type for op in main.global_block().ops].count("increment") == 1
    np.testing.assert_allclose(got, [0.1 * 0.5 ** (t / 3) + 0.1 / (1 + 0.25 * t)
                                     for t in range(3)], rtol=1e-5)


def test_autoincreased_step_counter():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        c = L.autoincreased_step_counter()
        again = L.autoincreased_step_counter()
        c5 = L.autoincreased_step_counter(counter_name="my_counter", begin=5, step=2)
    assert c is again and c.name == "@STEP_COUNTER@" and c.stop_gradient
    assert [op.type for op in main.global_block().ops] == ["increment", "increment"]
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    got = [exe.run(main, fetch_list=[c, c5], scope=scope) for _ in range(3)]
    assert [int(a[0]) for a, _ in got] == [1, 2, 3]
    # as fluid: initialised to begin - 1, so with step != 1 the first run sees begin - 1 + step
    assert [int(b[0]) for _, b in got] == [6, 8, 10]


def test_schedule_drives_an_optimizer():
    """SGD with a decaying learning-rate Variable: each step uses that step's rate."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 2], "float32")
        y = fluid.layers.fc(x, 1, param_attr=fluid.initializer.Constant(0.0),
                            bias_attr=False)
        loss = fluid.layers.mean(y)
        lr = L.exponential_decay(0.5, 1, 0.5)
        fluid.optimizer.SGD(lr).minimize(loss)
    sgd = [op for op in main.global_block().ops if op.type == "sgd"][0]
    assert sgd.input("LearningRate") == [lr.name]
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    xv = np.array([[1.0, 2.0]], "float32")
    w = np.zeros((2, 1))
    for t in range(3):
        exe.run(main, feed={"x": xv}, scope=scope)
        w = w - 0.5 * 0.5 ** t * xv.T
    np.testing.assert_allclose(np.array(scope.find_var("fc_0.w_0").get_tensor()), w, rtol=1e-6)


def test_argument_errors():
    with pytest.raises(ValueError, match="len\\(values\\) - len\\(boundaries\\) should be 1"):
        L.piecewise_decay([1, 2], [0.1, 0.2])
    with pytest.raises(ValueError, match="boundaries must be increasing"):
        L.piecewise_decay([3, 2], [0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match="decay_steps must be > 0"):
        L.exponential_decay(0.1, 0, 0.5)
    with pytest.raises(TypeError, match="learning_rate must be a number"):
        L.natural_exp_decay("0.1", 2, 0.5)
    with pytest.raises(ValueError, match="warmup_steps must be > 0"):
        L.linear_lr_warmup(0.1, 0, 0.0, 0.1)
