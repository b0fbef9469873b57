"""Mutation-round tests for fluidlite/ops/optim_extra.py (dpsgd, dgc_clip_by_norm, dgc,
dgc_momentum).

References: fluid 1.8's dpsgd_op.h (clip the gradient to norm ``clip``, add Gaussian noise over
``batch_size``; fluidlite draws the noise per element from the op's generator, documented in
docs/compatibility.md -- the test draws the same stream from an equally seeded generator),
dgc_clip_by_norm_op.h (clip_by_norm once ``current_step >= rampup_begin_step``), and the
ops' own attribute checks (their messages).
"""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core.registry import get_op_def

DPSGD = get_op_def("dpsgd")
CLIP = get_op_def("dgc_clip_by_norm")


@pytest.mark.parametrize("gscale, sigma", [(1.0, 0.0), (10.0, 0.0), (10.0, 0.7), (0.1, 2.0)])
def test_dpsgd_update(gscale, sigma):
    rng = np.random.default_rng(1)
    p = rng.normal(size=(3, 4))
    g = rng.normal(size=(3, 4)) * gscale
    lr = np.array([0.1])
    clip, bs = 2.0, 4.0
    out = DPSGD.forward(p, g, lr, rng=np.random.default_rng(5), clip=clip, batch_size=bs,
                        sigma=sigma)["ParamOut"]
    norm = np.sqrt((g ** 2).sum())
    clipped = g / (norm / clip) if norm > clip else g
    noise = np.random.default_rng(5).normal(0.0, sigma, size=p.shape) if sigma > 0 else 0.0
    np.testing.assert_allclose(out, p - 0.1 * (clipped + noise / bs), rtol=1e-12)
    assert out.dtype == np.float64 and out.shape == p.shape
    out32 = DPSGD.forward(p.astype("float32"), g.astype("float32"), lr.astype("float32"),
                          rng=np.random.default_rng(5), clip=clip, batch_size=bs,
                          sigma=sigma)["ParamOut"]
    assert out32.dtype == np.float32


@pytest.mark.parametrize("attrs, msg", [
    ({"clip": 0.0}, "dpsgd: clip must be > 0, but received 0.0"),
    ({"batch_size": 0.0}, "dpsgd: batch_size must be > 0, but received 0.0"),
    ({"sigma": -0.5}, "dpsgd: sigma must be >= 0, but received -0.5"),
])
def test_dpsgd_attribute_checks(attrs, msg):
    kw = dict(clip=1.0, batch_size=2.0, sigma=0.0)
    kw.update(attrs)
    with pytest.raises(ValueError, match="^" + msg + "$"):
        DPSGD.forward(np.ones(2), np.ones(2), np.ones(1), rng=np.random.default_rng(0), **kw)


def _prog(op_type, ins, attrs, outs):
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        vs = {k: fluid.data(k.lower(), shape, dt) for k, (shape, dt) in ins.items()}
        block = main.global_block()
        out = {s: block.create_var(name=f"{op_type}_{s}") for s in outs}
        block.append_op(op_type, vs, out, attrs)
    return out


def test_dpsgd_inference_and_its_checks():
    out = _prog("dpsgd", {"Param": ([2, 3], "float32"), "Grad": ([2, 3], "float32"),
                          "LearningRate": ([1], "float32")}, {"clip": 1.0}, ["ParamOut"])
    assert tuple(out["ParamOut"].shape) == (2, 3)
    with pytest.raises(ValueError, match=r"dpsgd: Grad shape \[3\] must equal Param shape "
                                         r"\[2, 3\]"):
        _prog("dpsgd", {"Param": ([2, 3], "float32"), "Grad": ([3], "float32"),
                        "LearningRate": ([1], "float32")}, {"clip": 1.0}, ["ParamOut"])
    with pytest.raises(ValueError, match=r"dpsgd: LearningRate must hold exactly one element "
                                         r"\(shape \[1\]\), but its shape is \[2\]"):
        _prog("dpsgd", {"Param": ([2, 3], "float32"), "Grad": ([2, 3], "float32"),
                        "LearningRate": ([2], "float32")}, {"clip": 1.0}, ["ParamOut"])
    with pytest.raises(ValueError, match="dpsgd: batch_size must be > 0, but received -1.0"):
        _prog("dpsgd", {"Param": ([2, 3], "float32"), "Grad": ([2, 3], "float32"),
                        "LearningRate": ([1], "float32")}, {"batch_size": -1.0}, ["ParamOut"])


def test_dgc_clip_by_norm():
    x = np.array([3.0, 4.0])                                   # norm 5
    step = np.array([0.0])
    # rampup_begin_step 0: clipping is on from step 0
    np.testing.assert_allclose(CLIP.forward(x, step, max_norm=1.0, rampup_begin_step=0.0)["Out"],
                               [0.6, 0.8])
    np.testing.assert_array_equal(CLIP.forward(x, step, max_norm=1.0,
                                               rampup_begin_step=-1.0)["Out"], x)
    np.testing.assert_array_equal(CLIP.forward(x, np.array([2.0]), max_norm=1.0,
                                               rampup_begin_step=3.0)["Out"], x)
    np.testing.assert_allclose(CLIP.forward(x, np.array([3.0]), max_norm=2.0,
                                            rampup_begin_step=3.0)["Out"], [1.2, 1.6])
    np.testing.assert_array_equal(CLIP.forward(x, step, max_norm=6.0,
                                               rampup_begin_step=0.0)["Out"], x)
    out = _prog("dgc_clip_by_norm", {"X": ([4], "float32"), "current_step": ([1], "float32")},
                {"max_norm": 1.0}, ["Out"])
    assert tuple(out["Out"].shape) == (4,)
    with pytest.raises(ValueError, match=r"dgc_clip_by_norm: max_norm should be greater than 0, "
                                         r"but received max_norm = 0.0"):
        _prog("dgc_clip_by_norm", {"X": ([4], "float32"), "current_step": ([1], "float32")},
              {"max_norm": 0.0}, ["Out"])
    with pytest.raises(ValueError, match=r"dgc_clip_by_norm: current_step must hold exactly one "
                                         r"element"):
        _prog("dgc_clip_by_norm", {"X": ([4], "float32"), "current_step": ([2], "float32")},
              {"max_norm": 1.0}, ["Out"])


DGC = get_op_def("dgc")
DGC_MOM = get_op_def("dgc_momentum")


def ref_dgc(u, v, g, m, nesterov, ratio):
    """The DGC step of the op's docstring (Lin et al. 2018) on one process, as a loop."""
    if nesterov:
        u2 = m * (u + g)
        v2 = v + u2 + g
    else:
        u2 = m * u + g
        v2 = v + u2
    k = max(1, min(v2.size, int(v2.size * ratio)))
    flat = v2.reshape(-1)
    sel = sorted(sorted(range(flat.size), key=lambda i: -abs(flat[i]))[:k])
    out = np.zeros_like(flat)
    uo, vo = u2.reshape(-1).copy(), flat.copy()
    for i in sel:
        out[i] = flat[i]
        uo[i] = vo[i] = 0.0
    return uo.reshape(u.shape), vo.reshape(v.shape), out.reshape(g.shape), sel, k


@pytest.mark.parametrize("nesterov", [True, False])
@pytest.mark.parametrize("step, sparsity, rampup_step, ratio", [
    (3, [0.75], 1.0, 0.25),               # one period
    (3, [0.5, 0.75, 0.9], 6.0, 0.5),      # step 3 - 2 = 1 of 6: the first period
    (5, [0.5, 0.75, 0.9], 6.0, 0.25),     # 3 of 6: the second
    (20, [0.5, 0.75, 0.9], 6.0, 0.1),     # past the periods: the last
    (4, [0.5, 0.75], 0.0, 0.25),          # rampup_step 0: the last value
    (2, [0.99], 1.0, 0.01),               # k = int(12 * 0.01) = 0 -> at least 1
])
def test_dgc_against_the_rule(nesterov, step, sparsity, rampup_step, ratio):
    rng = np.random.default_rng(step)
    u, v, g = (rng.normal(size=(3, 4)) for _ in range(3))
    out = DGC.forward(u, v, g, np.array([float(step)]), m=0.5, use_nesterov=nesterov,
                      sparsity=sparsity, rampup_begin_step=2.0, rampup_step=rampup_step)
    uo, vo, go, sel, k = ref_dgc(u, v, g, 0.5, nesterov, ratio)
    np.testing.assert_allclose(out["U_out"], uo, rtol=1e-12)
    np.testing.assert_allclose(out["V_out"], vo, rtol=1e-12)
    np.testing.assert_allclose(out["Grad_out"], go, rtol=1e-12)
    assert out["k"].tolist() == [k] and out["k"].dtype == np.int32
    np.testing.assert_allclose(out["EncodeGrad"],
                               np.concatenate([sel, np.asarray(go).reshape(-1)[sel]]))
    assert out["EncodeGrad"].dtype == np.float64


@pytest.mark.parametrize("begin, step", [(3.0, 2), (-1.0, 7)])
def test_dgc_before_its_rampup_passes_through(begin, step):
    rng = np.random.default_rng(1)
    u, v, g = (rng.normal(size=(2, 3)).astype("float32") for _ in range(3))
    out = DGC.forward(u, v, g, np.array([float(step)]), m=0.9, sparsity=[0.5],
                      rampup_begin_step=begin, rampup_step=1.0)
    for slot, want in (("U_out", u), ("V_out", v), ("Grad_out", g)):
        np.testing.assert_array_equal(out[slot], want)
        assert out[slot] is not want
    assert out["EncodeGrad"].shape == (0,) and out["EncodeGrad"].dtype == np.float32
    assert out["k"].tolist() == [0] and out["k"].dtype == np.int32


def test_dgc_starts_at_step_zero_when_it_begins_there():
    u, v, g = np.zeros(4), np.zeros(4), np.array([1.0, -4.0, 2.0, 3.0])
    out = DGC.forward(u, v, g, np.array([0.0]), m=0.0, use_nesterov=False, sparsity=[0.5],
                      rampup_begin_step=0.0, rampup_step=1.0)
    np.testing.assert_array_equal(out["Grad_out"], [0.0, -4.0, 0.0, 3.0])


@pytest.mark.parametrize("sparsity", [[], [1.0], [-0.1], [0.5, 1.5]])
def test_dgc_sparsity_checks(sparsity):
    with pytest.raises(ValueError, match=r"^dgc: sparsity must be a non-empty list of numbers "
                                         r"in \[0, 1\), but received "):
        DGC.forward(np.zeros(2), np.zeros(2), np.zeros(2), np.array([0.0]), sparsity=sparsity)


def test_dgc_sparsity_zero_keeps_everything():
    g = np.array([1.0, -2.0, 3.0])
    out = DGC.forward(np.zeros(3), np.zeros(3), g, np.array([0.0]), m=0.0,
                      use_nesterov=False, sparsity=[0.0], rampup_begin_step=0.0)
    np.testing.assert_array_equal(out["Grad_out"], g)
    assert out["k"].tolist() == [3]


def test_dgc_inference_and_checks():
    ins = {"U": ([2, 3], "float32"), "V": ([2, 3], "float32"), "Grad": ([2, 3], "float32"),
           "current_step": ([1], "float32")}
    outs = _prog("dgc", ins, {"sparsity": [0.5]}, ["U_out", "V_out", "Grad_out", "EncodeGrad",
                                                    "k"])
    assert all(tuple(outs[s].shape) == (2, 3) for s in ("U_out", "V_out", "Grad_out"))
    for slot in ("U", "V"):
        bad = dict(ins)
        bad[slot] = ([3, 2], "float32")
        with pytest.raises(ValueError, match=rf"dgc: {slot} shape \[3, 2\] must equal Grad shape "
                                             r"\[2, 3\]"):
            _prog("dgc", bad, {"sparsity": [0.5]}, ["U_out", "V_out", "Grad_out", "EncodeGrad", "k"])
    bad = dict(ins)
    bad["current_step"] = ([2], "float32")
    with pytest.raises(ValueError, match="dgc: current_step must hold exactly one element"):
        _prog("dgc", bad, {"sparsity": [0.5]}, ["U_out", "V_out", "Grad_out", "EncodeGrad", "k"])
    with pytest.raises(ValueError, match="dgc: sparsity must be a non-empty list"):
        _prog("dgc", ins, {"sparsity": [2.0]}, ["U_out", "V_out", "Grad_out", "EncodeGrad", "k"])


@pytest.mark.parametrize("nesterov", [True, False])
def test_dgc_momentum_phases(nesterov):
    rng = np.random.default_rng(3)
    p, g, vel = (rng.normal(size=(2, 3)) for _ in range(3))
    lr = np.array([0.1])
    # before rampup: fluid's momentum rule
    out = DGC_MOM.forward(p, g, vel, lr, np.array([1.0]), mu=0.9, use_nesterov=nesterov,
                          rampup_begin_step=2.0)
    v2 = 0.9 * vel + g
    want = p - 0.1 * (g + 0.9 * v2) if nesterov else p - 0.1 * v2
    np.testing.assert_allclose(out["VelocityOut"], v2, rtol=1e-12)
    np.testing.assert_allclose(out["ParamOut"], want, rtol=1e-12)
    np.testing.assert_array_equal(out["Grad_out"], g)
    # from rampup_begin_step on: sgd on the compressed gradient
    out = DGC_MOM.forward(p, g, vel, lr, np.array([2.0]), mu=0.9, use_nesterov=nesterov,
                          rampup_begin_step=2.0)
    np.testing.assert_allclose(out["ParamOut"], p - 0.1 * g, rtol=1e-12)
    np.testing.assert_array_equal(out["VelocityOut"], vel)


def test_dgc_momentum_inference_and_checks():
    ins = {"Param": ([2, 3], "float32"), "Grad": ([2, 3], "float32"),
           "Velocity": ([2, 3], "float32"), "LearningRate": ([1], "float32"),
           "current_step": ([1], "float32")}
    outs = _prog("dgc_momentum", ins, {"mu": 0.9}, ["ParamOut", "VelocityOut", "Grad_out"])
    assert all(tuple(o.shape) == (2, 3) for o in outs.values())
    for slot in ("Grad", "Velocity"):
        bad = dict(ins)
        bad[slot] = ([3, 2], "float32")
        with pytest.raises(ValueError, match=rf"dgc_momentum: {slot} shape \[3, 2\] must equal "
                                             r"Param shape \[2, 3\]"):
            _prog("dgc_momentum", bad, {"mu": 0.9}, ["ParamOut", "VelocityOut", "Grad_out"])
    for slot in ("LearningRate", "current_step"):
        bad = dict(ins)
        bad[slot] = ([2], "float32")
        with pytest.raises(ValueError, match=rf"dgc_momentum: {slot} must hold exactly one"):
            _prog("dgc_momentum", bad, {"mu": 0.9}, ["ParamOut", "VelocityOut", "Grad_out"])
