"""Tests written from mutation testing (issue 28, docs/mutation.md, tenth round) for the update-rule
optimizers of ``fluidlite/optimizer/optimizers.py`` (Momentum, LarsMomentum, Adagrad, Adam,
Adamax, DecayedAdagrad, Adadelta, RMSProp, Ftrl, Lamb).

What they check, and against what:

* every constructor hands ``parameter_list``, ``regularization``, ``grad_clip`` and ``name`` to
  the pass: ``regularization=L2Decay(c)`` trains exactly like the same optimizer on the loss
  plus ``c/2 * ||p||^2`` (the definition of L2 decay); ``grad_clip=GradientClipByValue(m)`` on a
  linear loss ``sum(p * c)`` (gradient ``c``) trains exactly like the unclipped optimizer fed
  ``clip(c, -m, m)``; ``parameter_list=["w"]`` leaves the other parameter alone; ``name``
  prefixes the accumulators as fluid 1.8 named them (``<param>_<name>_<acc>_N``);
* the update ops carry fluid 1.8's attributes (python/paddle/fluid/optimizer.py of release/1.8
  and the OpMakers' attribute names), with the constructors' defaults of fluid 1.8's
  signatures, and no attribute the op does not declare (``UnknownAttributeWarning``);
* the range checks: every hyper-parameter rejects a value out of its documented range with
  the message naming the optimizer, the argument, the range and the value, accepts the ends
  of a closed range, and ``None`` gives fluid's "<arg> is not set.";
* Adamax's ``beta1_pow`` advance (a ``scale`` op per updated parameter, fluid 1.8's
  ``_finish_update``: op_role Optimize, op_role_var [param, grad], name scope ``adamx``) over
  several steps and with a parameter that has no gradient;
* Lamb's per-parameter weight decay (``exclude_from_weight_decay_fn``) in the op attrs and in
  a float64 NumPy loop of fluid 1.8's lamb_op.h.

Everything is seeded and built in fresh programs (the tests can run twice in one process).
"""
import re
import warnings

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core.ir import OpRole
from fluidlite.core.registry import UnknownAttributeWarning

O = fluid.optimizer
RNG = np.random.default_rng(2810)
W0 = RNG.uniform(-0.8, 0.8, (2, 3))
V0 = RNG.uniform(-0.8, 0.8, (3,))
FEEDS = [{"cw": RNG.uniform(-1, 1, (2, 3)), "cv": RNG.uniform(-1, 1, (3,))} for _ in range(3)]

# every optimizer of the module, built with non-default hyper-parameters that matter on the
# small linear problem below
MAKERS = {
    "momentum": lambda **kw: O.Momentum(0.1, 0.7, **kw),
    "lars_momentum": lambda **kw: O.LarsMomentum(0.1, 0.7, lars_coeff=0.05,
                                                 lars_weight_decay=0.01, **kw),
    "adagrad": lambda **kw: O.Adagrad(0.1, epsilon=1e-3, initial_accumulator_value=0.2, **kw),
    "adam": lambda **kw: O.Adam(0.05, beta1=0.8, beta2=0.95, epsilon=1e-3, **kw),
    "adamax": lambda **kw: O.Adamax(0.05, beta1=0.8, beta2=0.95, epsilon=1e-3, **kw),
    "decayed_adagrad": lambda **kw: O.DecayedAdagrad(0.1, decay=0.8, epsilon=1e-3, **kw),
    "adadelta": lambda **kw: O.Adadelta(0.5, epsilon=1e-3, rho=0.8, **kw),
    "rmsprop": lambda **kw: O.RMSProp(0.05, rho=0.8, epsilon=1e-3, momentum=0.3, **kw),
    "ftrl": lambda **kw: O.Ftrl(0.1, l1=0.01, l2=0.05, lr_power=-0.5, **kw),
    "lamb": lambda **kw: O.Lamb(0.05, lamb_weight_decay=0.02, beta1=0.8, beta2=0.95,
                                epsilon=1e-3, **kw),
}


def _program(make_opt, dtype="float64", l2_in_loss=0.0, **minimize_kw):
    """w [2, 3], v [3]; loss = sum(w * cw) + sum(v * cv) (+ l2_in_loss / 2 * ||w, v||^2)."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        cw = fluid.data("cw", [2, 3], dtype)
        cv = fluid.data("cv", [3], dtype)
        w = fluid.layers.create_parameter(
            [2, 3], dtype, name="w",
            default_initializer=fluid.initializer.NumpyArrayInitializer(W0.astype(dtype)))
        v = fluid.layers.create_parameter(
            [3], dtype, name="v",
            default_initializer=fluid.initializer.NumpyArrayInitializer(V0.astype(dtype)))
        loss = fluid.layers.reduce_sum(w * cw) + fluid.layers.reduce_sum(v * cv)
        if l2_in_loss:
            loss = loss + (fluid.layers.reduce_sum(w * w) + fluid.layers.reduce_sum(v * v)) * \
                (0.5 * l2_in_loss)
        opt = make_opt()
        opt.minimize(loss, **minimize_kw)
    return main, startup, opt


def _train(main, startup, feeds=FEEDS, dtype="float64"):
    scope, exe = fluid.Scope(), fluid.Executor()
    exe.run(startup, scope=scope)
    for feed in feeds:
        exe.run(main, feed={k: x.astype(dtype) for k, x in feed.items()}, scope=scope)
    return [np.array(scope.find_var(n).get_tensor()) for n in ("w", "v")]


def _update_op(main, type_, param="w"):
    ops = [op for op in main.global_block().ops
           if op.type == type_ and op.input("Param") == [param]]
    assert len(ops) == 1, [op.type for op in main.global_block().ops]
    return ops[0]


# -- the constructors hand their common arguments to the pass --------------------------------
@pytest.mark.parametrize("case", sorted(MAKERS))
def test_regularization_is_l2_decay_of_the_loss(case):
    make = MAKERS[case]
    got = _train(*_program(lambda: make(regularization=fluid.regularizer.L2Decay(0.5)))[:2])
    want = _train(*_program(lambda: make(), l2_in_loss=0.5)[:2])
    plain = _train(*_program(lambda: make())[:2])
    for g, w_, p in zip(got, want, plain):
        np.testing.assert_allclose(g, w_, rtol=1e-9, atol=1e-12)
        assert not np.allclose(g, p, rtol=1e-6, atol=1e-9), "the decay changed nothing"


@pytest.mark.parametrize("case", sorted(MAKERS))
def test_grad_clip_clips_the_gradients(case):
    make = MAKERS[case]
    clipped = [{k: np.clip(x, -0.3, 0.3) for k, x in f.items()} for f in FEEDS]
    got = _train(*_program(lambda: make(grad_clip=fluid.clip.GradientClipByValue(0.3)))[:2])
    want = _train(*_program(lambda: make())[:2], feeds=clipped)
    plain = _train(*_program(lambda: make())[:2])
    for g, w_, p in zip(got, want, plain):
        np.testing.assert_allclose(g, w_, rtol=1e-9, atol=1e-12)
        assert not np.allclose(g, p, rtol=1e-6, atol=1e-9), "the clip changed nothing"


@pytest.mark.parametrize("case", sorted(MAKERS))
def test_parameter_list_and_name(case):
    main, startup, _ = _program(lambda: MAKERS[case](parameter_list=["w"], name="pfx"))
    w, v = _train(main, startup)
    np.testing.assert_array_equal(v, V0)                 # not in parameter_list: never updated
    assert not np.allclose(w, W0)
    accs = [n for n in main.global_block().vars if n.startswith("w_")]
    assert accs and all(n.startswith("w_pfx_") for n in accs), accs
    assert not [n for n in main.global_block().vars if n.startswith("v_")]


# -- fluid 1.8's op attributes and defaults ----------------------------------------------------
# (op type, constructor with fluid 1.8's defaults, expected attrs, learning rate)
DEFAULTS = [
    ("momentum", lambda: O.Momentum(0.1, 0.9), {"mu": 0.9, "use_nesterov": False}, 0.1),
    ("lars_momentum", lambda: O.LarsMomentum(0.1, 0.9),
     {"mu": 0.9, "lars_coeff": 0.001, "lars_weight_decay": 0.0005}, 0.1),
    ("adagrad", lambda: O.Adagrad(0.1), {"epsilon": 1e-6}, 0.1),
    ("adam", lambda: O.Adam(), {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8,
                                "lazy_mode": False, "min_row_size_to_use_multithread": 1000},
     0.001),
    ("adamax", lambda: O.Adamax(), {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8}, 0.001),
    ("decayed_adagrad", lambda: O.DecayedAdagrad(0.1), {"decay": 0.95, "epsilon": 1e-6}, 0.1),
    ("adadelta", lambda: O.Adadelta(0.1), {"epsilon": 1e-6, "rho": 0.95}, 0.1),
    ("rmsprop", lambda: O.RMSProp(0.1), {"decay": 0.95, "epsilon": 1e-6, "momentum": 0.0,
                                         "centered": False}, 0.1),
    ("ftrl", lambda: O.Ftrl(0.1), {"l1": 0.0, "l2": 0.0, "lr_power": -0.5}, 0.1),
    ("lamb", lambda: O.Lamb(), {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-6,
                                "weight_decay": 0.01}, 0.001),
]


@pytest.mark.parametrize("op_type, make, attrs, lr", DEFAULTS, ids=[d[0] for d in DEFAULTS])
def test_defaults_are_fluid_18s(op_type, make, attrs, lr):
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnknownAttributeWarning)
        main, startup, _ = _program(make)
    op = _update_op(main, op_type)
    for key, value in attrs.items():
        assert op.attr(key) == pytest.approx(value), key
    inits = {op.output("Out")[0]: op for op in startup.global_block().ops
             if op.type == "fill_constant"}
    assert inits["learning_rate_0"].attr("value") == pytest.approx(lr)
    if op_type == "adagrad":                       # initial_accumulator_value=0.0
        assert inits["w_moment_0"].attr("value") == 0.0


# (op type, constructor, the op attrs it must set), every value away from its default
GIVEN = [
    ("momentum", lambda: O.Momentum(0.1, 0.7, use_nesterov=True),
     {"mu": 0.7, "use_nesterov": True}),
    ("lars_momentum", lambda: O.LarsMomentum(0.1, 0.7, lars_coeff=0.05, lars_weight_decay=0.01),
     {"mu": 0.7, "lars_coeff": 0.05, "lars_weight_decay": 0.01}),
    ("adagrad", lambda: O.Adagrad(0.1, epsilon=1e-3), {"epsilon": 1e-3}),
    ("adam", lambda: O.Adam(0.05, beta1=0.8, beta2=0.95, epsilon=1e-3, lazy_mode=True),
     {"beta1": 0.8, "beta2": 0.95, "epsilon": 1e-3, "lazy_mode": True}),
    ("adamax", lambda: O.Adamax(0.05, beta1=0.8, beta2=0.95, epsilon=1e-3),
     {"beta1": 0.8, "beta2": 0.95, "epsilon": 1e-3}),
    ("decayed_adagrad", lambda: O.DecayedAdagrad(0.1, decay=0.8, epsilon=1e-3),
     {"decay": 0.8, "epsilon": 1e-3}),
    ("adadelta", lambda: O.Adadelta(0.5, epsilon=1e-3, rho=0.8), {"epsilon": 1e-3, "rho": 0.8}),
    # fluid 1.8 passes RMSProp's rho as the op's "decay"
    ("rmsprop", lambda: O.RMSProp(0.05, rho=0.8, epsilon=1e-3, momentum=0.3, centered=True),
     {"decay": 0.8, "epsilon": 1e-3, "momentum": 0.3, "centered": True}),
    ("ftrl", lambda: O.Ftrl(0.1, l1=0.01, l2=0.05, lr_power=-0.7),
     {"l1": 0.01, "l2": 0.05, "lr_power": -0.7}),
    ("lamb", lambda: O.Lamb(0.05, lamb_weight_decay=0.02, beta1=0.8, beta2=0.95, epsilon=1e-3),
     {"beta1": 0.8, "beta2": 0.95, "epsilon": 1e-3, "weight_decay": 0.02}),
]


@pytest.mark.parametrize("op_type, make, attrs", GIVEN, ids=[g[0] for g in GIVEN])
def test_update_op_attrs_are_the_arguments(op_type, make, attrs):
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnknownAttributeWarning)
        main, _, _ = _program(make)
    op = _update_op(main, op_type)
    for key, value in attrs.items():
        assert op.attr(key) == pytest.approx(value), key


def test_adagrad_initial_accumulator_value_fills_the_moment():
    main, startup, _ = _program(lambda: O.Adagrad(0.1, initial_accumulator_value=0.25))
    inits = {op.output("Out")[0]: op for op in startup.global_block().ops}
    assert inits["w_moment_0"].attr("value") == pytest.approx(0.25)


# -- the range checks --------------------------------------------------------------------------
def _msg(owner, arg, rng, value):
    return "^" + re.escape(f"{owner}: {arg} must be a number in {rng}, but received {value!r}") \
        + "$"


BAD = [
    (lambda: O.Momentum(0.1, -0.1), "Momentum", "momentum", "[0.0, inf)", -0.1),
    (lambda: O.LarsMomentum(0.1, -0.1), "LarsMomentum", "momentum", "[0.0, inf)", -0.1),
    (lambda: O.LarsMomentum(0.1, 0.9, lars_coeff=-1e-3), "LarsMomentum", "lars_coeff",
     "[0.0, inf)", -1e-3),
    (lambda: O.LarsMomentum(0.1, 0.9, lars_weight_decay=-1e-3), "LarsMomentum",
     "lars_weight_decay", "[0.0, inf)", -1e-3),
    (lambda: O.Adagrad(0.1, epsilon=0.0), "Adagrad", "epsilon", "(0.0, inf)", 0.0),
    (lambda: O.Adagrad(0.1, initial_accumulator_value=-0.5), "Adagrad",
     "initial_accumulator_value", "[0.0, inf)", -0.5),
    (lambda: O.Adam(beta1=1.0), "Adam", "beta1", "[0.0, 1.0)", 1.0),
    (lambda: O.Adam(beta2=-0.1), "Adam", "beta2", "[0.0, 1.0)", -0.1),
    (lambda: O.Adam(epsilon=-1e-8), "Adam", "epsilon", "(0.0, inf)", -1e-8),
    (lambda: O.Adamax(beta1=1.0), "Adamax", "beta1", "[0.0, 1.0)", 1.0),
    (lambda: O.Adamax(beta2=1.0), "Adamax", "beta2", "[0.0, 1.0)", 1.0),
    (lambda: O.Adamax(epsilon=0.0), "Adamax", "epsilon", "(0.0, inf)", 0.0),
    (lambda: O.DecayedAdagrad(0.1, decay=1.5), "DecayedAdagrad", "decay", "[0.0, 1.0]", 1.5),
    (lambda: O.DecayedAdagrad(0.1, epsilon=0.0), "DecayedAdagrad", "epsilon", "(0.0, inf)",
     0.0),
    (lambda: O.Adadelta(0.1, epsilon=0.0), "Adadelta", "epsilon", "(0.0, inf)", 0.0),
    (lambda: O.Adadelta(0.1, rho=1.5), "Adadelta", "rho", "[0.0, 1.0]", 1.5),
    (lambda: O.RMSProp(0.1, epsilon=0.0), "RMSProp", "epsilon", "(0.0, inf)", 0.0),
    (lambda: O.RMSProp(0.1, rho=1.5), "RMSProp", "rho", "[0.0, 1.0]", 1.5),
    (lambda: O.RMSProp(0.1, momentum=-0.5), "RMSProp", "momentum", "[0.0, inf)", -0.5),
    (lambda: O.Ftrl(0.1, l1=-0.1), "Ftrl", "l1", "[0.0, inf)", -0.1),
    (lambda: O.Ftrl(0.1, l2=-0.1), "Ftrl", "l2", "[0.0, inf)", -0.1),
    (lambda: O.Ftrl(0.1, lr_power=0.5), "Ftrl", "lr_power", "(-inf, 0.0]", 0.5),
    (lambda: O.Lamb(lamb_weight_decay=-0.01), "Lamb", "lamb_weight_decay", "[0.0, inf)", -0.01),
    # Lamb's betas / epsilon are checked by Adam's constructor under Lamb's name
    (lambda: O.Lamb(beta1=1.0), "Lamb", "beta1", "[0.0, 1.0)", 1.0),
    (lambda: O.Lamb(beta2=1.0), "Lamb", "beta2", "[0.0, 1.0)", 1.0),
    (lambda: O.Lamb(epsilon=0.0), "Lamb", "epsilon", "(0.0, inf)", 0.0),
]


@pytest.mark.parametrize("make, owner, arg, rng, value", BAD,
                         ids=[f"{b[1]}-{b[2]}" for b in BAD])
def test_out_of_range_hyper_parameters_are_refused(make, owner, arg, rng, value):
    with pytest.raises(ValueError, match=_msg(owner, arg, rng, value)):
        make()


def test_closed_ends_are_accepted():
    """decay / rho in [0, 1] (a decay of 1 keeps the average), Ftrl's lr_power 0."""
    assert _update_op(_program(lambda: O.DecayedAdagrad(0.1, decay=1.0))[0],
                      "decayed_adagrad").attr("decay") == 1.0
    assert _update_op(_program(lambda: O.Adadelta(0.1, rho=1.0))[0], "adadelta").attr("rho") == 1.0
    assert _update_op(_program(lambda: O.RMSProp(0.1, rho=1.0))[0], "rmsprop").attr("decay") == 1.0
    assert _update_op(_program(lambda: O.Ftrl(0.1, lr_power=0.0))[0], "ftrl").attr(
        "lr_power") == 0.0
    for make in (lambda: O.Momentum(0.1, 0.0), lambda: O.Adam(beta1=0.0, beta2=0.0),
                 lambda: O.Lamb(lamb_weight_decay=0.0)):
        make()


NOT_SET = [
    (lambda: O.Momentum(0.1, None), "momentum"),
    (lambda: O.LarsMomentum(0.1, None), "momentum"),
    (lambda: O.Adagrad(0.1, epsilon=None), "epsilon"),
    (lambda: O.Adam(beta1=None), "beta1"),
    (lambda: O.Adam(beta2=None), "beta2"),
    (lambda: O.Adam(epsilon=None), "epsilon"),
    (lambda: O.Adamax(beta1=None), "beta1"),
    (lambda: O.Adamax(beta2=None), "beta2"),
    (lambda: O.Adamax(epsilon=None), "epsilon"),
    (lambda: O.DecayedAdagrad(0.1, decay=None), "decay"),
    (lambda: O.DecayedAdagrad(0.1, epsilon=None), "epsilon"),
    (lambda: O.Adadelta(None), "learning_rate"),
    (lambda: O.Adadelta(0.1, epsilon=None), "epsilon"),
    (lambda: O.Adadelta(0.1, rho=None), "rho"),
    (lambda: O.RMSProp(None), "learning_rate"),
    (lambda: O.RMSProp(0.1, rho=None), "rho"),
    (lambda: O.RMSProp(0.1, epsilon=None), "epsilon"),
    (lambda: O.RMSProp(0.1, momentum=None), "momentum"),
    (lambda: O.Lamb(lamb_weight_decay=None), "lamb_weight_decay"),
]


@pytest.mark.parametrize("make, arg", NOT_SET, ids=[f"{i}-{n[1]}" for i, n in enumerate(NOT_SET)])
def test_none_is_not_set(make, arg):
    """fluid 1.8's message (Adadelta / RMSProp raised it; the others asserted)."""
    with pytest.raises(ValueError, match=f"^{arg} is not set.$"):
        make()


# -- Adamax's beta1_pow advance ----------------------------------------------------------------
def test_adamax_advances_beta1_pow_once_per_step_per_parameter():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [-1, 2], "float32")
        loss = fluid.layers.mean(fluid.layers.fc(x, 1, param_attr=fluid.ParamAttr(name="w"),
                                                 bias_attr=fluid.ParamAttr(name="b")))
        opt = O.Adamax(0.05, beta1=0.8)
        pg = opt.backward(loss)
        # a parameter without a gradient sorts first: it gets no update and no scale op, and
        # the parameters after it still get theirs
        extra = main.global_block().create_parameter(shape=[2], dtype="float32", name="a_extra")
        opt.apply_gradients([(extra, None)] + pg)
    scales = [op for op in main.global_block().ops if op.type == "scale"]
    assert [op.input("X") for op in scales] == [["b_beta1_pow_acc_0"], ["w_beta1_pow_acc_0"]]
    for op, p in zip(scales, ("b", "w")):
        assert op.output("Out") == op.input("X")
        assert op.attr("scale") == pytest.approx(0.8)
        assert op.attr("op_role") == OpRole.Optimize
        assert op.attr("op_role_var") == [p, p + "@GRAD"]
        assert re.search(r"/adamx(_\d+)?/$", op.attr("op_namescope"))   # fluid's unique scopes
    scope, exe = fluid.Scope(), fluid.Executor()
    exe.run(startup, scope=scope)
    for step in range(1, 4):
        exe.run(main, feed={"x": np.ones((2, 2), "float32")}, scope=scope)
        for p in ("w", "b"):
            np.testing.assert_allclose(np.array(scope.find_var(f"{p}_beta1_pow_acc_0")
                                                .get_tensor()), [0.8 ** (step + 1)], rtol=1e-6)


# -- Lamb's weight decay -----------------------------------------------------------------------
def _lamb_ref(p, grads, lr, wd, b1, b2, eps):
    """fluid 1.8's lamb_op.h in float64: no bias correction, trust ratio ||p|| / ||r||."""
    m1, m2 = np.zeros_like(p), np.zeros_like(p)
    for g in grads:
        m1 = b1 * m1 + (1 - b1) * g
        m2 = b2 * m2 + (1 - b2) * g * g
        r = m1 / (np.sqrt(m2) + eps) + wd * p
        pn, rn = np.linalg.norm(p), np.linalg.norm(r)
        p = p - lr * (pn / rn if pn > 0 and rn > 0 else 1.0) * r
    return p


def test_lamb_weight_decay_per_parameter():
    make = lambda: O.Lamb(0.05, lamb_weight_decay=0.5, beta1=0.8, beta2=0.95, epsilon=1e-3,
                          exclude_from_weight_decay_fn=lambda p: p.name == "v")
    main, startup, _ = _program(make)
    assert _update_op(main, "lamb", "w").attr("weight_decay") == 0.5
    assert _update_op(main, "lamb", "v").attr("weight_decay") == 0.0
    for key, value in {"beta1": 0.8, "beta2": 0.95, "epsilon": 1e-3}.items():
        assert _update_op(main, "lamb", "v").attr(key) == pytest.approx(value)
    w, v = _train(main, startup)
    args = dict(lr=0.05, b1=0.8, b2=0.95, eps=1e-3)
    np.testing.assert_allclose(w, _lamb_ref(W0, [f["cw"] for f in FEEDS], wd=0.5, **args),
                               rtol=1e-10)
    np.testing.assert_allclose(v, _lamb_ref(V0, [f["cv"] for f in FEEDS], wd=0.0, **args),
                               rtol=1e-10)
