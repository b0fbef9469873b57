"""``depthwise_separable_fusion`` (``inference/ops.py``) and its kernel (``ops/conv.py``
``separable_forward``, ``ops/_conv_last.py`` ``separable_fwd``): a [1x1 ->] depthwise -> 1x1
block on an NHWC map, strip by strip. Its values against a float64 reference made by NCHW
``conv2d`` layer by layer, its bits across thread counts and with the filters laid out ahead,
strips of a few rows (the rows two strips share), and what it refuses."""
from __future__ import annotations

import numpy as np
import pytest

import fluidlite as fluid
import fluidlite.inference  # noqa: F401  (registers the inference ops)
from fluidlite.core import threads
from fluidlite.core.registry import VarSpec, get_op_def
from fluidlite.core.dtypes import VarType
from fluidlite.ops import _conv_last
from fluidlite.ops.conv import channels_last_filter

OP = get_op_def("depthwise_separable_fusion")

_ACTS = {"identity": lambda a: a, "relu": lambda a: np.maximum(a, 0),
         "relu6": lambda a: np.clip(a, 0, 6), "tanh": np.tanh,
         "sigmoid": lambda a: 1 / (1 + np.exp(-a)),
         "hard_swish": lambda a: a * np.clip(a + 3, 0, 6) / 6}


def _layer(x, w, b, act, groups=1, **attrs):
    """float64 act(conv2d(x) + b) of the NHWC ``x`` by the NCHW conv2d op, returned NHWC."""
    y = get_op_def("conv2d").forward(x.transpose(0, 3, 1, 2).astype(np.float64),
                                      w.astype(np.float64), groups=groups,
                                      **attrs)["Output"].transpose(0, 2, 3, 1)
    return _ACTS[act](y + (0 if b is None else b.astype(np.float64)))


# (N, H, W, C, E, F, k, strides, paddings, dilations, expand, residual, activations)
CASES = [
    (3, 9, 9, 8, 16, 8, 3, [1, 1], [1, 1], [1, 1], True, True,
     ("relu6", "relu6", "identity")),
    (2, 10, 9, 8, 12, 6, 3, [2, 2], [1, 1], [1, 1], True, False,
     ("relu", "hard_swish", "relu")),
    (1, 7, 70, 4, 8, 5, 3, [1, 1], [1, 1], [1, 1], True, True,       # wide rows: a GEMM
     ("relu6", "relu6", "identity")),                                 # per map row
    (2, 11, 11, 6, 6, 7, 5, [2, 1], [2, 1, 0, 2], [1, 1], False, False,
     ("identity", "sigmoid", "tanh")),
    (2, 9, 9, 5, 10, 4, 3, [1, 1], [2, 2], [2, 2], True, False,
     ("identity", "identity", "identity")),
    (1, 8, 66, 3, 6, 4, 3, [2, 2], [0, 1, 1, 0], [1, 1], True, True,
     ("tanh", "relu", "relu6")),
    (4, 3, 3, 4, 8, 6, 3, [1, 1], [0, 0], [1, 1], True, True,           # one output pixel
     ("relu", "relu6", "relu")),
]


def _make(case, dtype, seed=0, biases=True):
    N, H, W, C, E, F, k, s, p, d, expand, residual, acts = case
    rng = np.random.default_rng(seed)
    E = E if expand else C
    x = rng.standard_normal((N, H, W, C)).astype(dtype)
    we = rng.standard_normal((E, C, 1, 1)).astype(dtype) if expand else None
    be = rng.standard_normal(E).astype(dtype) if expand else None
    wd = rng.standard_normal((E, 1, k, k)).astype(dtype) * 0.5
    bd = rng.standard_normal(E).astype(dtype)
    wp = rng.standard_normal((F, E, 1, 1)).astype(dtype) * 0.5
    bp = rng.standard_normal(F).astype(dtype)
    if not biases:
        be = bd = bp = None
    attrs = dict(strides=s, paddings=p, dilations=d)
    h = x if not expand else _layer(x, we, be, acts[0])
    h = _layer(h, wd, bd, acts[1], groups=E, **attrs)
    res = rng.standard_normal(h.shape[:3] + (F,)).astype(dtype) if residual else None
    want = _layer(h, wp, bp, "identity") + (0 if res is None else res)
    want = _ACTS[acts[2]](want)
    inputs = dict(Input=x, DepthwiseFilter=wd, ProjectFilter=wp, ExpandFilter=we,
                  ExpandBias=be, DepthwiseBias=bd, ProjectBias=bp, ResidualData=res)
    attrs.update(expand_activation=acts[0], depthwise_activation=acts[1], activation=acts[2])
    return inputs, attrs, want


def _run(inputs, attrs):
    return OP.forward(**inputs, **attrs)["Output"]


def _laid(inputs, attrs):
    """The three filters as ``channels_last_filter`` lays them out for their inputs."""
    x, wd = inputs["Input"], inputs["DepthwiseFilter"]
    N, H, W, _ = x.shape
    E = wd.shape[0]
    one = ([1, 1], [0, 0], "EXPLICIT", 1, [1, 1])
    got = dict(DepthwiseFilterLast=channels_last_filter(
        wd, (N, H, W, E), attrs["strides"], attrs["paddings"], "EXPLICIT", E,
        attrs["dilations"]))
    if inputs["ExpandFilter"] is not None:
        got["ExpandFilterLast"] = channels_last_filter(inputs["ExpandFilter"],
                                                       x.shape, *one)
    oh, ow = OP.infer(*(VarSpec(inputs[k].shape, VarType.FP32) for k in
                        ("Input", "DepthwiseFilter", "ProjectFilter")),
                      ExpandFilter=None if inputs["ExpandFilter"] is None else
                      VarSpec(inputs["ExpandFilter"].shape, VarType.FP32),
                      **{k: attrs[k] for k in ("strides", "paddings", "dilations")}
                      )["Output"].shape[1:3]
    got["ProjectFilterLast"] = channels_last_filter(inputs["ProjectFilter"], (N, oh, ow, E),
                                                    *one)
    return got


@pytest.mark.parametrize("case", CASES, ids=[str(i) for i in range(len(CASES))])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_block_matches_float64_layer_by_layer(case, dtype):
    inputs, attrs, want = _make(case, dtype)
    got = _run(inputs, attrs)
    assert got.dtype == dtype and got.shape == want.shape and got.flags.c_contiguous
    err = np.max(np.abs(got - want)) / np.max(np.abs(want))
    assert err <= (1e-5 if dtype == np.float32 else 1e-12)


@pytest.mark.parametrize("case", CASES, ids=[str(i) for i in range(len(CASES))])
@pytest.mark.parametrize("rows", [1, 2, 3])
def test_strips_of_a_few_rows_share_their_rows(case, rows, monkeypatch):
    """Strips of ``rows`` output rows (the canvas budget cut to that), each keeping the rows
    it shares with the strip before (``reach - sh``), the last one shorter -- against the
    reference."""
    inputs, attrs, want = _make(case, np.float64, seed=1)
    N, H, W, C, E, F, k, s, p, d, expand, *_ = case
    E = E if expand else C
    wp = W + (p[2] + p[3] if len(p) == 4 else 2 * p[1]) + s[1]     # >= the padded width
    monkeypatch.setattr(_conv_last, "_BLOCK", rows * s[0] * wp * E)
    got = _run(inputs, attrs)
    assert np.max(np.abs(got - want)) <= 1e-12 * np.max(np.abs(want))


@pytest.mark.parametrize("case", [CASES[0], CASES[3]], ids=["expand", "no expand"])
def test_without_biases(case):
    inputs, attrs, want = _make(case, np.float64, seed=4, biases=False)
    got = _run(inputs, attrs)
    assert np.max(np.abs(got - want)) <= 1e-12 * np.max(np.abs(want))


def test_activations_default_to_identity():
    inputs, attrs, want = _make(CASES[4], np.float64, seed=5)
    assert {attrs.pop(a) for a in ("expand_activation", "depthwise_activation",
                                    "activation")} == {"identity"}
    got = _run(inputs, attrs)
    assert np.max(np.abs(got - want)) <= 1e-12 * np.max(np.abs(want))


@pytest.mark.parametrize("case", CASES, ids=[str(i) for i in range(len(CASES))])
def test_bits_follow_neither_threads_nor_filters_laid_out_ahead(case):
    inputs, attrs, _ = _make(case, np.float32, seed=2)
    inputs["Input"] = np.repeat(inputs["Input"], 40, axis=0)     # parts on the threads
    if inputs["ResidualData"] is not None:
        inputs["ResidualData"] = np.repeat(inputs["ResidualData"], 40, axis=0)
    runs = []
    for n in (1, 2, 3):
        with threads.using(n):
            runs.append(_run(inputs, attrs))
    runs.append(_run({**inputs, **_laid(inputs, attrs)}, attrs))
    for got in runs[1:]:
        assert np.array_equal(got, runs[0])


def test_the_conv2d_fusion_layers_one_after_another():
    """The same arithmetic as the three ``conv2d_fusion`` layers it replaces."""
    inputs, attrs, _ = _make(CASES[0], np.float32, seed=3)
    fusion = get_op_def("conv2d_fusion")
    nhwc = dict(data_format="NHWC")
    h = fusion.forward(inputs["Input"], inputs["ExpandFilter"], inputs["ExpandBias"],
                       activation=attrs["expand_activation"], **nhwc)["Output"]
    h = fusion.forward(h, inputs["DepthwiseFilter"], inputs["DepthwiseBias"],
                       strides=attrs["strides"], paddings=attrs["paddings"],
                       dilations=attrs["dilations"], groups=h.shape[3],
                       activation=attrs["depthwise_activation"], **nhwc)["Output"]
    want = fusion.forward(h, inputs["ProjectFilter"], inputs["ProjectBias"],
                          ResidualData=inputs["ResidualData"], activation=attrs["activation"],
                          **nhwc)["Output"]
    np.testing.assert_allclose(_run(inputs, attrs), want, rtol=1e-6, atol=1e-6)


def _specs(dtype=VarType.FP32, **changes):
    shapes = dict(Input=(2, 9, 9, 4), DepthwiseFilter=(8, 1, 3, 3), ProjectFilter=(5, 8, 1, 1),
                  ExpandFilter=(8, 4, 1, 1))
    shapes.update(changes)
    return {k: None if v is None else VarSpec(v, dtype) for k, v in shapes.items()}


def test_infer_chains_the_layers():
    out = OP.infer(**_specs(), strides=[2, 2], paddings=[1, 1])["Output"]
    assert tuple(out.shape) == (2, 5, 5, 5) and out.dtype == VarType.FP32
    free = OP.infer(**_specs(Input=(-1, 9, 9, 4)))["Output"]
    assert tuple(free.shape) == (-1, 7, 7, 5)
    laid = OP.infer(**_specs(ExpandFilterLast=(4, 8), DepthwiseFilterLast=(3, 3, 7 * 8),
                             ProjectFilterLast=(8, 5), ExpandBias=(-1,), ProjectBias=(5,)))
    assert tuple(laid["Output"].shape) == (2, 7, 7, 5)


@pytest.mark.parametrize("changes, attrs, match", [
    (dict(ProjectFilter=(5, 8, 3, 3)), {}, "ProjectFilter .* pointwise .*stride 1, no pad"),
    (dict(ExpandFilter=(8, 3, 1, 1)), {}, "ExpandFilter .* pointwise"),
    (dict(DepthwiseFilter=(8, 2, 3, 3)), {}, "DepthwiseFilter .* depthwise .*groups 8"),
    (dict(DepthwiseFilter=(6, 1, 3, 3)), {}, "DepthwiseFilter .* depthwise"),
    (dict(dtype=VarType.FP16), {}, "ExpandFilter .* pointwise"),
    (dict(ExpandFilterLast=(8, 4)), {}, "FilterLast"),
    (dict(DepthwiseFilterLast=(3, 3, 8)), {}, "FilterLast"),
    (dict(ProjectFilterLast=(5, 8)), {}, "FilterLast"),
    (dict(ExpandBias=(4,)), {}, "ExpandBias must have 8"),
    (dict(DepthwiseBias=(5,)), {}, "DepthwiseBias must have 8"),
    (dict(ExpandFilter=None), dict(expand_activation="relu"), "without ExpandFilter"),
    ({}, dict(expand_activation="swish"), "activation 'swish'"),
    ({}, dict(depthwise_activation="elu"), "activation 'elu'"),
    (dict(Input=(2, -1, 9, 4)), {}, "known H and W"),
    (dict(Input=(9, 9, 4)), {}, "NHWC map"),
    (dict(ExpandFilter=None, ExpandBias=(8,)), {}, "without ExpandFilter"),
    (dict(ProjectBias=(4,)), {}, "ProjectBias must have 5"),
    (dict(ResidualData=(2, 7, 7, 4)), {}, "ResidualData"),
    ({}, dict(activation="gelu"), "activation 'gelu'"),
])
def test_infer_refuses(changes, attrs, match):
    with pytest.raises(ValueError, match=match):
        OP.infer(**_specs(**changes), **attrs)


def test_forward_refuses_a_layer_of_another_kind():
    inputs, attrs, _ = _make(CASES[0], np.float32)
    inputs["ProjectFilter"] = np.ones((8, 16, 3, 3), np.float32)
    with pytest.raises(ValueError, match="pointwise layer"):
        _run(inputs, attrs)


def test_the_op_runs_in_a_program():
    """Through the Executor's plan (whose dtype check compares the output with the declared
    float32), from the feeds' names and the attrs as the pass writes them."""
    inputs, attrs, want = _make(CASES[1], np.float32, seed=6)
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        slots = {k: fluid.data(k, list(v.shape), "float32") for k, v in inputs.items()
                 if v is not None}
        out = main.global_block().create_var(name="out", dtype="float32")
        main.global_block().append_op("depthwise_separable_fusion", slots, {"Output": out},
                                      attrs)
    feed = {k: v for k, v in inputs.items() if v is not None}
    (got,) = fluid.Executor(fluid.CPUPlace()).run(main, feed=feed, fetch_list=[out])
    assert got.dtype == np.float32 and got.shape == want.shape
    assert np.max(np.abs(got - want)) <= 1e-5 * np.max(np.abs(want))
