"""ONNX export of the wider fluid 1.8 op set (fluidlite/onnx/more.py): each small program is
exported, passes onnx.checker, and onnxruntime reproduces fluidlite's output."""
import numpy as np
import pytest

import fluidlite as fluid

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from fluidlite.onnx import export  # noqa: E402

L = fluid.layers
RNG = np.random.default_rng(3)


def img(shape=(None, 4, 6, 6)):
    return fluid.data("x", list(shape), "float32")


def x2d():
    return fluid.data("x", [None, 6], "float32")


CASES = {
    "acos_asin_atan": lambda: L.acos(L.tanh(x2d())) + L.asin(L.tanh(x2d())) + L.atan(x2d()),
    "erf_log1p": lambda: L.erf(x2d()) + L.log1p(L.abs(x2d())),
    "shrinks": lambda: L.hard_shrink(x2d(), 0.3) + L.softshrink(x2d(), 0.2) +
    L.tanh_shrink(x2d()),
    "relu_family": lambda: L.thresholded_relu(x2d(), 0.1) + L.selu(x2d()) +
    L.brelu(x2d(), 0.1, 0.6) + L.soft_relu(x2d(), 0.8),
    "stanh_hard_swish_logsigmoid": lambda: L.stanh(x2d()) + L.hard_swish(x2d()) +
    L.logsigmoid(x2d()),
    "prelu_all": lambda: L.prelu(img(), "all"),
    "prelu_channel": lambda: L.prelu(img(), "channel"),
    "prelu_element": lambda: L.prelu(img(), "element"),
    "maxout": lambda: L.maxout(img(), 2),
    "log_softmax_logsumexp": lambda: L.log_softmax(x2d()) + L.logsumexp(x2d(), dim=[1],
                                                                        keepdim=True),
    "logsumexp_all": lambda: L.logsumexp(x2d()),
    "reduce_prod": lambda: L.reduce_prod(L.tanh(x2d()), dim=1),
    "cumsum": lambda: L.cumsum(x2d(), axis=1, exclusive=True, reverse=True),
    "compare_and_logic": lambda: L.cast(L.logical_or(L.less_than(x2d(), L.tanh(x2d())),
                                                      L.logical_not(L.greater_equal(
                                                          x2d(), L.abs(x2d())))), "float32"),
    "not_equal": lambda: L.cast(L.not_equal(x2d(), L.relu(x2d())), "float32"),
    "floordiv_mod": lambda: L.elementwise_floordiv(x2d(), L.abs(x2d()) + 0.5) +
    L.elementwise_mod(x2d(), L.abs(x2d()) + 0.5),
    "pad": lambda: L.pad(x2d(), [0, 0, 1, 2], pad_value=0.5),
    "pad2d_reflect": lambda: L.pad2d(img(), [1, 2, 2, 1], mode="reflect"),
    "pad2d_edge": lambda: L.pad2d(img(), [1, 0, 0, 1], mode="edge"),
    "pixel_shuffle": lambda: L.pixel_shuffle(img(), 2),
    "resize_bilinear": lambda: L.resize_bilinear(img(), out_shape=[9, 12]),
    "resize_bilinear_align_mode0": lambda: L.resize_bilinear(img(), out_shape=[12, 9],
                                                             align_corners=False, align_mode=0),
    "resize_nearest": lambda: L.resize_nearest(img(), out_shape=[12, 12], align_corners=False),
    "instance_norm": lambda: L.instance_norm(img()),
    "group_norm": lambda: L.group_norm(img(), groups=2),
    "adaptive_pool": lambda: L.adaptive_pool2d(img(), [3, 2], "avg") +
    L.adaptive_pool2d(img(), [3, 2], "max"),
    "flip_strided_slice": lambda: L.flip(L.strided_slice(img(), [2, 3], [0, 1], [6, 6],
                                                         [2, 2]), [1, 3]),
    "expand_tile": lambda: L.expand(x2d(), [1, 3]),
    "label_smooth": lambda: L.label_smooth(L.softmax(x2d()), epsilon=0.1),
    "fill_any_like": lambda: L.ones_like(x2d()) + x2d(),
    "unstack": lambda: L.unstack(img(), axis=1)[2],
    "tril": lambda: L.tril(L.reshape(x2d(), [-1, 2, 3]), 0) if hasattr(L, "tril") else
    L.relu(x2d()),
    "nhwc_conv_bn_pool": lambda: L.pool2d(L.batch_norm(L.conv2d(
        img((None, 6, 6, 4)), 3, 3, padding=1, data_format="NHWC"), data_layout="NHWC"),
        2, "max", 2, data_format="NHWC"),
    "conv3d_pool3d": lambda: L.pool3d(L.conv3d(fluid.data("x", [None, 2, 4, 4, 4], "float32"),
                                               3, 3, padding=1), 2, "avg", 2),
    "conv3d_transpose": lambda: L.conv3d_transpose(
        fluid.data("x", [None, 2, 3, 3, 3], "float32"), 2, filter_size=2, stride=2),
    "index_select": lambda: L.index_select(x2d(), L.assign(np.array([4, 0, 2], "int64")),
                                           dim=1),
    "argsort": lambda: L.cast(L.argsort(x2d(), axis=1, descending=True)[1], "float32") +
    L.argsort(x2d())[0],
    "roll": lambda: L.roll(img(), shifts=[1, -2], dims=[2, 3]),
    "lrn": lambda: L.lrn(img(), n=3, k=1.0, alpha=0.01, beta=0.75),
    "affine_channel": lambda: L.affine_channel(
        img(), scale=L.assign(np.arange(1, 5, dtype="float32")),
        bias=L.assign(np.arange(4, dtype="float32"))),
    "shuffle_channel": lambda: L.shuffle_channel(img(), 2),
    "range": lambda: L.cast(L.range(0, 6, 2, "int64"), "float32") + x2d()[:, :3],
}


def _one_hot_case():
    ids = fluid.data("x", [None, 1], "int64")
    return fluid.one_hot(ids, 5) + L.unsqueeze(L.one_hot(ids, 5), [1])


@pytest.mark.parametrize("name", sorted(CASES) + ["one_hot"])
def test_op_exports_and_onnxruntime_agrees(tmp_path, name):
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start):
        out = _one_hot_case() if name == "one_hot" else CASES[name]()
        x = main.global_block().var("x")
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(start, scope=scope)
    shape = [3] + [d for d in x.shape[1:]]
    feed = {"x": RNG.integers(0, 5, shape).astype("int64") if name == "one_hot"
            else RNG.uniform(-1, 1, shape).astype("float32")}
    (want,) = exe.run(main.clone(for_test=True), feed=feed, fetch_list=[out], scope=scope)
    path = str(tmp_path / "m.onnx")
    with fluid.scope_guard(scope):
        export(main, path, ["x"], [out.name])
    onnx.checker.check_model(onnx.load(path), full_check=True)
    got = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feed)[0]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


# -- Paddle 2.x ops (loaded from .pdmodel files) ---------------------------------------------
P2 = {  # op type: (attrs, extra int64 outputs)
    "flatten_contiguous_range": ({"start_axis": 1, "stop_axis": 2}, ("XShape",)),
    "expand_v2": ({"shape": [2, -1, 3, 4]}, ()),
    "tile": ({"repeat_times": [2, 1, 2, 1]}, ()),
    "top_k_v2": ({"k": 2, "axis": -1, "largest": False, "sorted": True}, ("Indices",)),
    "mish": ({"threshold": 0.5}, ()),
    "isnan_v2": ({}, ()),
    "isfinite_v2": ({}, ()),
}


@pytest.mark.parametrize("op_type", sorted(P2) + ["where"])
def test_paddle2_op_exports(tmp_path, op_type):
    from fluidlite.core import rewrite
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start):
        x = fluid.data("x", [None, 3, 4], "float32")
        block = main.global_block()
        if op_type == "where":
            out = rewrite.tmp(block, "where", "float32")
            rewrite.append(block, "where", {"Condition": [L.greater_than(x, L.zeros_like(x))],
                                            "X": [x], "Y": [L.scale(x, -2.0)]}, {"Out": [out]})
        else:
            attrs, extra = P2[op_type]
            dtype = "bool" if op_type.startswith("is") else "float32"
            out = rewrite.tmp(block, op_type, dtype)
            outs = {"Out": [out], **{s: [rewrite.tmp(block, op_type, "int64")] for s in extra}}
            rewrite.append(block, op_type, {"X": [x]}, outs, attrs)
    feed = {"x": RNG.normal(size=(2, 3, 4)).astype("float32")}
    exe = fluid.Executor(fluid.CPUPlace())
    (want,) = exe.run(main, feed=feed, fetch_list=[out])
    path = str(tmp_path / "m.onnx")
    export(main, path, ["x"], [out.name])
    got = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feed)[0]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_float_equal_exports_fluids_tolerance(tmp_path, dtype):
    # fluid's equal on floats: |x - y| < 1e-8, infinities only to themselves, NaN to nothing
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start):
        x = fluid.data("x", [None], dtype)
        y = fluid.data("y", [None], dtype)
        eq, ne = L.cast(L.equal(x, y), "int32"), L.cast(L.not_equal(x, y), "int32")
    a = np.array([0.1 + 0.2, 1.0, np.inf, np.inf, np.nan, 1e-3, 5.0], dtype)
    b = np.array([0.3, 1.0 + 2e-8, np.inf, -np.inf, np.nan, 1e-3 + 5e-9, 5.0], dtype)
    feed = {"x": a, "y": b}
    want = fluid.Executor(fluid.CPUPlace()).run(main, feed=feed, fetch_list=[eq, ne])
    assert want[0].tolist() == ([1, 1, 1, 0, 0, 1, 1] if dtype == "float32"
                                else [1, 0, 1, 0, 0, 1, 1])
    path = str(tmp_path / "m.onnx")
    export(main, path, ["x", "y"], [eq.name, ne.name])
    onnx.checker.check_model(onnx.load(path), full_check=True)
    got = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feed)
    assert [g.tolist() for g in got] == [w.tolist() for w in want]
