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
