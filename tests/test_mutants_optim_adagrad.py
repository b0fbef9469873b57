"""Tests written from the mutation run of ``fluidlite/ops/optim_adagrad.py`` (issue 28,
docs/mutation.md): the build-time checks of adagrad, decayed_adagrad, adadelta, rmsprop and ftrl
with their messages (op, slot, reference slot), fluid 1.8's attribute defaults (the OpMakers:
adagrad epsilon 1e-6; decayed_adagrad decay 0.95, epsilon 1e-6; adadelta rho 0.95, epsilon
1e-6; rmsprop epsilon 1e-10, decay 0.9, momentum 0, centered false; ftrl l1 0, l2 0,
lr_power -0.5) in ``forward`` and in the fused in-place kernels, adadelta without a
LearningRate (fluid 1.8's op has none) in place, rmsprop without MeanGrad, ftrl's 0/0 for
coordinates that never had a gradient (no RuntimeWarning) and 2-D parameters, and adagrad's
rows-only SelectedRows update (fluid 1.8's SparseAdagradFunctor). References are closed-form
float64 NumPy written here."""
import warnings

import numpy as np
import pytest

from fluidlite.core.registry import VarSpec, get_op_def
from fluidlite.core.selected_rows import SelectedRows

SHAPE = (3, 4)
LR = np.array([0.1])


def r(seed, low=-1.0, high=1.0, shape=SHAPE):
    return np.random.default_rng(seed).uniform(low, high, size=shape)


def spec(*shape, dtype="float32"):
    return VarSpec(list(shape), dtype)


def forward(op, ins, attrs):
    opdef = get_op_def(op)
    return opdef.forward(*[ins.get(s.name) for s in opdef.in_slots], **attrs)


def in_place(op, ins, attrs):
    """``update_in_place`` on copies: {output slot: array}."""
    opdef = get_op_def(op)
    mine = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in ins.items()}
    out = dict(opdef.update_in_place(mine, None, attrs), ParamOut=mine["Param"])
    for i, o in opdef.state_slots:
        if mine.get(i) is not None:
            out[o] = mine[i]
    return out


def assert_outputs(got, want, rtol=1e-12):
    for slot, value in want.items():
        np.testing.assert_allclose(got[slot], value, rtol=rtol, atol=1e-15, err_msg=slot)


# -- build-time checks ----------------------------------------------------------------------------
@pytest.mark.parametrize("op, slots", [
    ("adagrad", ("Grad", "Moment")),
    ("decayed_adagrad", ("Grad", "Moment")),
    ("adadelta", ("Grad", "AvgSquaredGrad", "AvgSquaredUpdate")),
    ("rmsprop", ("Grad", "MeanSquare", "Moment", "MeanGrad")),
    ("ftrl", ("Grad", "SquaredAccumulator", "LinearAccumulator")),
])
def test_each_state_and_the_learning_rate_are_checked_naming_op_and_slot(op, slots):
    opdef = get_op_def(op)
    good = {s.name: spec(1) if s.name == "LearningRate" else spec(3, 4)
            for s in opdef.in_slots}
    out = opdef.infer(**good)
    assert list(out["ParamOut"].shape) == [3, 4]
    for slot in slots:
        with pytest.raises(ValueError) as e:
            opdef.infer(**dict(good, **{slot: spec(3, 5)}))
        assert str(e.value) == f"{op}: {slot} shape [3, 5] must equal Param shape [3, 4]"
    with pytest.raises(ValueError) as e:
        opdef.infer(**dict(good, LearningRate=spec(2)))
    assert str(e.value) == (f"{op}: LearningRate must hold exactly one element (shape [1]), "
                            f"but its shape is [2]")


def test_rmsprop_mean_grad_out_is_declared_like_mean_grad_or_mean_square():
    opdef = get_op_def("rmsprop")
    ins = {s.name: spec(1) if s.name == "LearningRate" else spec(3, 4) for s in opdef.in_slots}
    with_mg = opdef.infer(**dict(ins, MeanGrad=spec(3, 4, dtype="float64")))
    assert with_mg["MeanGradOut"].dtype == np.float64
    assert list(with_mg["MeanGradOut"].shape) == [3, 4]
    without = opdef.infer(**dict(ins, MeanGrad=None, MeanSquare=spec(3, 4, dtype="float16")))
    assert without["MeanGradOut"].dtype == np.float16
    assert list(without["MeanGradOut"].shape) == [3, 4]


# -- fluid 1.8's defaults, out of place and in place ------------------------------------------------
def _small():
    """Gradients and accumulators small enough that every epsilon shows in the result."""
    return r(1, -2e-3, 2e-3), r(2, 1e-7, 1e-6)


def _adagrad_case():
    p, (g, m) = r(0), _small()
    m2 = m + g * g
    return ({"Param": p, "Grad": g, "Moment": m, "LearningRate": LR},
            {"ParamOut": p - 0.1 * g / (np.sqrt(m2) + 1e-6), "MomentOut": m2})


def _decayed_case():
    p, (g, m) = r(0), _small()
    m2 = 0.95 * m + 0.05 * g * g
    return ({"Param": p, "Grad": g, "Moment": m, "LearningRate": LR},
            {"ParamOut": p - 0.1 * g / (np.sqrt(m2) + 1e-6), "MomentOut": m2})


def _adadelta_case(with_lr=True):
    p, (g, eg), edx = r(0), _small(), r(3, 1e-7, 1e-6)
    eg2 = 0.95 * eg + 0.05 * g * g
    upd = -np.sqrt((edx + 1e-6) / (eg2 + 1e-6)) * g
    ins = {"Param": p, "Grad": g, "AvgSquaredGrad": eg, "AvgSquaredUpdate": edx}
    if with_lr:
        ins["LearningRate"] = LR
    return (ins, {"ParamOut": p + (0.1 if with_lr else 1.0) * upd, "AvgSquaredGradOut": eg2,
                  "AvgSquaredUpdateOut": 0.95 * edx + 0.05 * upd * upd})


def _rmsprop_case(mean_grad=True):
    p, (g, ms), mom = r(0), _small(), r(4, -1e-3, 1e-3)
    ms2 = 0.9 * ms + 0.1 * g * g
    mom2 = 0.0 * mom + 0.1 * g / np.sqrt(ms2 + 1e-10)      # not centered, momentum 0
    ins = {"Param": p, "MeanSquare": ms, "LearningRate": LR, "Grad": g, "Moment": mom}
    want = {"ParamOut": p - mom2, "MomentOut": mom2, "MeanSquareOut": ms2}
    if mean_grad:
        ins["MeanGrad"] = r(5, -1e-3, 1e-3)
    return ins, want


def _ftrl_case():
    p, g, n, z = r(0), r(1), r(2, 0.1, 1.0), r(3, -0.5, 0.5)
    n2 = n + g * g
    z2 = z + g - (np.sqrt(n2) - np.sqrt(n)) / 0.1 * p
    # l1 = l2 = 0: every coordinate is shrunk to -z' / (sqrt(n') / lr)
    return ({"Param": p, "SquaredAccumulator": n, "LinearAccumulator": z, "Grad": g,
             "LearningRate": LR},
            {"ParamOut": -z2 / (np.sqrt(n2) / 0.1), "SquaredAccumOut": n2,
             "LinearAccumOut": z2})


CASES = {"adagrad": _adagrad_case, "decayed_adagrad": _decayed_case,
         "adadelta": _adadelta_case, "rmsprop": _rmsprop_case, "ftrl": _ftrl_case}


@pytest.mark.parametrize("op", sorted(CASES))
def test_attribute_defaults_are_fluids_out_of_place_and_in_place(op):
    ins, want = CASES[op]()
    assert_outputs(forward(op, ins, {}), want)
    assert_outputs(in_place(op, ins, {}), want)


NON_DEFAULT = {
    "adagrad": {"epsilon": 0.02},
    "decayed_adagrad": {"decay": 0.5, "epsilon": 0.02},
    "adadelta": {"rho": 0.5, "epsilon": 0.02},
    "rmsprop": {"epsilon": 0.02, "decay": 0.5, "momentum": 0.7, "centered": True},
}


def _non_default_reference(op, ins, a):
    p, g, lr = ins["Param"], ins["Grad"], 0.1
    if op in ("adagrad", "decayed_adagrad"):
        d = a.get("decay", 0.0)
        m2 = (d * ins["Moment"] + (1 - d) * g * g) if op == "decayed_adagrad" else \
            ins["Moment"] + g * g
        return {"ParamOut": p - lr * g / (np.sqrt(m2) + a["epsilon"]), "MomentOut": m2}
    if op == "adadelta":
        rho, eps, edx = a["rho"], a["epsilon"], ins["AvgSquaredUpdate"]
        eg2 = rho * ins["AvgSquaredGrad"] + (1 - rho) * g * g
        upd = -np.sqrt((edx + eps) / (eg2 + eps)) * g
        return {"ParamOut": p + lr * upd, "AvgSquaredGradOut": eg2,
                "AvgSquaredUpdateOut": rho * edx + (1 - rho) * upd * upd}
    d, eps, mu = a["decay"], a["epsilon"], a["momentum"]
    ms2 = d * ins["MeanSquare"] + (1 - d) * g * g
    mg2 = d * ins["MeanGrad"] + (1 - d) * g
    mom2 = mu * ins["Moment"] + lr * g / np.sqrt(ms2 - mg2 * mg2 + eps)
    return {"ParamOut": p - mom2, "MomentOut": mom2, "MeanSquareOut": ms2, "MeanGradOut": mg2}


@pytest.mark.parametrize("op", sorted(NON_DEFAULT))
def test_every_attribute_reaches_the_in_place_kernel(op):
    ins, _ = CASES[op]()
    want = _non_default_reference(op, ins, NON_DEFAULT[op])
    assert_outputs(forward(op, ins, NON_DEFAULT[op]), want)
    assert_outputs(in_place(op, ins, NON_DEFAULT[op]), want)


def test_adadelta_without_learning_rate_in_place_is_fluid_18s_update():
    ins, want = _adadelta_case(with_lr=False)
    assert "LearningRate" not in ins
    assert_outputs(in_place("adadelta", ins, {"rho": 0.95, "epsilon": 1e-6}), want)
    assert_outputs(forward("adadelta", ins, {}), want)


def test_rmsprop_without_mean_grad_runs_uncentered_and_refuses_centered():
    ins, want = _rmsprop_case(mean_grad=False)
    assert_outputs(in_place("rmsprop", ins, {}), want)
    out = forward("rmsprop", ins, {})
    assert_outputs(out, want)
    assert "MeanGradOut" not in out
    msg = "rmsprop: centered=True needs the MeanGrad input"
    with pytest.raises(ValueError) as e:
        forward("rmsprop", ins, {"centered": True})
    assert str(e.value) == msg
    with pytest.raises(ValueError) as e:
        in_place("rmsprop", ins, {"centered": True})
    assert str(e.value) == msg


def test_rmsprop_uncentered_leaves_a_given_mean_grad_alone_in_place():
    ins, want = _rmsprop_case(mean_grad=True)
    out = in_place("rmsprop", ins, {"momentum": 0.0})
    assert_outputs(out, want)
    np.testing.assert_array_equal(out["MeanGradOut"], ins["MeanGrad"])


# -- ftrl --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("path", [forward, in_place])
def test_ftrl_coordinates_without_any_gradient_yet_are_zero_without_warnings(path):
    """n = n' = 0 and l2 = 0: shrunk is 0 / 0 there, masked to 0 (|z'| = 0 is not > l1) --
    silently, as fluid's kernel (no floating-point warnings in C++)."""
    p, g = r(0, shape=(2, 3)), r(1, shape=(2, 3))
    n, z = r(2, 0.1, 1.0, shape=(2, 3)), r(3, shape=(2, 3))
    g[0, :] = 0.0
    n[0, :] = 0.0
    z[0, :] = 0.0
    p[0, :] = 0.0
    # no squared gradient yet but a linear accumulator: within l1 (x / 0, masked) and exactly
    # l1 (0 / 0: not shrunk, |z'| > l1 is false)
    g[1, :2] = n[1, :2] = 0.0
    z[1, :2] = [0.03, 0.05]
    ins = {"Param": p, "SquaredAccumulator": n, "LinearAccumulator": z, "Grad": g,
           "LearningRate": LR}
    l1 = 0.05
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = path("ftrl", ins, {"l1": l1, "l2": 0.0, "lr_power": -0.5})
    n2 = n + g * g
    z2 = z + g - (np.sqrt(n2) - np.sqrt(n)) / 0.1 * p
    with np.errstate(invalid="ignore", divide="ignore"):
        shrunk = (l1 * np.sign(z2) - z2) / (np.sqrt(n2) / 0.1)
    want = np.where(np.abs(z2) > l1, shrunk, 0.0)
    assert np.all(out["ParamOut"][0] == 0) and np.all(out["ParamOut"][1, :2] == 0)
    np.testing.assert_allclose(out["ParamOut"], want, rtol=1e-12)
    np.testing.assert_allclose(out["SquaredAccumOut"], n2, rtol=1e-12)


def test_ftrl_in_place_keeps_a_2d_param_and_an_explicit_power():
    p, g, n, z = r(0, shape=(4, 5)), r(1, shape=(4, 5)), r(2, 0.1, 1.0, shape=(4, 5)), \
        r(3, shape=(4, 5))
    ins = {"Param": p, "SquaredAccumulator": n, "LinearAccumulator": z, "Grad": g,
           "LearningRate": LR}
    attrs = {"l1": 0.3, "l2": 0.2, "lr_power": -0.25}
    n2 = n + g * g
    z2 = z + g - (n2 ** 0.25 - n ** 0.25) / 0.1 * p
    want = np.where(np.abs(z2) > 0.3, (0.3 * np.sign(z2) - z2) / (n2 ** 0.25 / 0.1 + 0.4), 0.0)
    assert 0 < np.count_nonzero(want) < want.size
    for path in (forward, in_place):
        out = path("ftrl", ins, attrs)
        assert out["ParamOut"].shape == (4, 5)
        np.testing.assert_allclose(out["ParamOut"], want, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(out["LinearAccumOut"], z2, rtol=1e-12)


# -- adagrad's SelectedRows gradient: fluid 1.8 updates the gradient's rows only ----------------------
def test_sparse_adagrad_writes_only_the_gradients_rows_of_the_previous_output():
    """SparseAdagradFunctor writes the merged rows into ParamOut / MomentOut; a ParamOut that
    is not Param keeps its other rows (the dense update would recompute them from Param)."""
    opdef = get_op_def("adagrad")
    p, m = r(0, shape=(5, 2)), r(1, 0.1, 1.0, shape=(5, 2))
    grad = SelectedRows([3, 1, 3], r(2, shape=(3, 2)), 5)
    prev_p, prev_m = r(7, shape=(5, 2)), r(8, 0.1, 1.0, shape=(5, 2))
    out = opdef.sparse_forward({"Param": p, "Grad": grad, "Moment": m, "LearningRate": LR},
                               {"epsilon": 1e-6}, {"ParamOut": prev_p, "MomentOut": prev_m})
    g = np.zeros((5, 2))
    np.add.at(g, [3, 1, 3], grad.value)
    m2 = m + g * g
    p2 = p - 0.1 * g / (np.sqrt(m2) + 1e-6)
    rows, rest = [1, 3], [0, 2, 4]
    np.testing.assert_allclose(out["ParamOut"][rows], p2[rows], rtol=1e-12)
    np.testing.assert_allclose(out["MomentOut"][rows], m2[rows], rtol=1e-12)
    np.testing.assert_array_equal(out["ParamOut"][rest], prev_p[rest])
    np.testing.assert_array_equal(out["MomentOut"][rest], prev_m[rest])
