"""The inference fast paths (``fluidlite/inference/ops.py``) and the passes that create them:
``attention_fuse_pass`` (``scaled_dot_product_attention``), relu6 in
``conv_elementwise_add_act_fuse_pass``, and ``conv2d_fusion`` on 1x1 and depthwise geometries.
Every optimised program must equal the unoptimised one within 1e-5 relative, and every pass can
be switched off on its own."""
from __future__ import annotations

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core.dtypes import VarType
from fluidlite.core.registry import VarSpec, get_op_def
from fluidlite.ops.conv import band_filter_shape
from fluidlite.inference import AnalysisConfig, PaddleTensor, create_paddle_predictor

L = fluid.layers
# the attention nets have no parameters: saving them warns that there is nothing to save
pytestmark = pytest.mark.filterwarnings("ignore:no variable in your model")


def _save(dirname, build, feeds, signed=False):
    """Save ``build()``'s program with weights drawn uniform in [0.5, 1.5] (batch-norm
    statistics must be positive), or standard normal (``signed``: nets without batch norm,
    whose activations then cut off something)."""
    main, startup = fluid.Program(), fluid.Program()
    scope = fluid.Scope()
    with fluid.program_guard(main, startup), fluid.scope_guard(scope), \
            fluid.unique_name.guard():
        outs = build()
        exe = fluid.Executor(fluid.CPUPlace())
        exe.run(startup)
        rng = np.random.default_rng(0)
        for name, var in main.global_block().vars.items():     # non-trivial weights / stats
            held = scope.find_var(name)
            if var.persistable and held is not None and held.is_initialized():
                shape = np.asarray(held.get_tensor()).shape
                held.set((rng.standard_normal(shape) if signed else
                          rng.uniform(0.5, 1.5, shape)).astype("float32"))
        fluid.io.save_inference_model(str(dirname), feeds, outs, exe, main_program=main)
    return str(dirname)


def _run(d, inputs, ir_optim=True, delete=()):
    c = AnalysisConfig(d)
    c.switch_ir_optim(ir_optim)
    for name in delete:
        c.delete_pass(name)
    p = create_paddle_predictor(c)
    outs = [t.as_ndarray() for t in p.run([PaddleTensor(a) for a in inputs])]
    return p, outs


def _types(p):
    return [op.type for op in p.program().global_block().ops]


def _close(a, b):
    for x, y in zip(a, b):
        scale = max(float(np.max(np.abs(y))), 1e-30)
        assert float(np.max(np.abs(x - y))) / scale <= 1e-5


def _attention_net(scale_op, mask, transpose_y=True):
    q = fluid.data("q", [-1, 2, 5, 4], "float32")
    k = fluid.data("k", [-1, 2, 5, 4] if transpose_y else [-1, 2, 4, 5], "float32")
    v = fluid.data("v", [-1, 2, 5, 3], "float32")
    s = L.matmul(q, k, transpose_y=transpose_y, alpha=1.0 if scale_op else 0.5)
    if scale_op:
        s = L.scale(s, scale=0.5)
    if mask:
        s = L.elementwise_add(s, fluid.data("m", [-1, 1, 1, 5], "float32"))
    p = L.dropout(L.softmax(s), 0.1, dropout_implementation="upscale_in_train")
    return [L.relu(L.matmul(p, v))]


@pytest.mark.parametrize("scale_op,mask,transpose_y",
                         [(False, False, True), (True, True, True), (False, True, False)])
def test_attention_fuse_pass(tmp_path, scale_op, mask, transpose_y):
    feeds = ["q", "k", "v"] + (["m"] if mask else [])
    d = _save(tmp_path, lambda: _attention_net(scale_op, mask, transpose_y), feeds)
    rng = np.random.default_rng(1)
    kshape = (3, 2, 5, 4) if transpose_y else (3, 2, 4, 5)
    inputs = [rng.standard_normal(s).astype("float32") * 3
              for s in ((3, 2, 5, 4), kshape, (3, 2, 5, 3))]
    if mask:
        m = np.zeros((3, 1, 1, 5), "float32")
        m[:, :, :, 3:] = -10000.0                     # padded keys, as BERT masks them
        inputs.append(m)
    _, plain = _run(d, inputs, ir_optim=False)
    p, fused = _run(d, inputs)
    _close(fused, plain)
    types = _types(p)
    assert "scaled_dot_product_attention" in types
    assert "softmax" not in types and "matmul" not in types and "dropout" not in types
    assert dict(p.applied_passes())["attention_fuse_pass"] == 1
    p.program().lint()
    # switched off on its own: the chain stays as it was (dropout still removed)
    p_off, off = _run(d, inputs, delete=["attention_fuse_pass"])
    _close(off, plain)
    assert "softmax" in _types(p_off) and "scaled_dot_product_attention" not in _types(p_off)


def test_attention_not_fused_when_scores_are_read_twice(tmp_path):
    def build():
        q = fluid.data("q", [-1, 4, 6], "float32")
        s = L.matmul(q, q, transpose_y=True)
        p = L.softmax(s)
        return [L.matmul(p, q), s]          # the scores are fetched too
    d = _save(tmp_path, build, ["q"])
    x = np.random.default_rng(2).standard_normal((2, 4, 6)).astype("float32")
    p, fused = _run(d, [x])
    _close(fused, _run(d, [x], ir_optim=False)[1])
    assert "scaled_dot_product_attention" not in _types(p) and "softmax" in _types(p)


def test_attention_kernel_errors_and_broadcast():
    op = get_op_def("scaled_dot_product_attention")
    from fluidlite.core.registry import VarSpec
    spec = op.infer(VarSpec((-1, 4, 8, 16), "float32"), VarSpec((1, 4, 9, 16), "float32"),
                    VarSpec((-1, 1, 9, 5), "float32"), alpha=0.25, transpose_k=True)
    assert spec["Out"].shape == (-1, 4, 8, 5)
    with pytest.raises(ValueError, match="contracted dim differ"):
        op.infer(VarSpec((2, 8, 16), "float32"), VarSpec((2, 9, 15), "float32"),
                 VarSpec((2, 9, 5), "float32"), transpose_k=True)
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal(s).astype("float32") for s in ((2, 8, 16), (1, 9, 16),
                                                                   (2, 9, 5)))
    s = np.matmul(q, np.swapaxes(k, -1, -2)) * np.float32(-0.3)       # negative alpha too
    e = np.exp(s - s.max(-1, keepdims=True))
    want = np.matmul(e / e.sum(-1, keepdims=True), v)
    got = op.forward(q, k, v, alpha=-0.3, transpose_k=True)["Out"]
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("lead, mask_shape", [
    ((4, 6), None),                 # cut on the batch axis
    ((4, 6), (4, 1, 1, 40)),        # a padding mask per sequence: cut with the batch
    ((1, 6), (1, 1, 24, 40)),       # batch 1: cut on the heads, the mask whole
    ((4, 6), (40,)),                # a mask of the key axis only
    ((4, 6), (6, 24, 40)),          # a mask per head, without the batch axis
])
@pytest.mark.parametrize("transpose_k", [True, False])
def test_attention_in_parts_matches_float64_for_any_thread_count(lead, mask_shape,
                                                                  transpose_k):
    from fluidlite.core import threads
    from fluidlite.inference import ops as iops
    op = get_op_def("scaled_dot_product_attention")
    rng = np.random.default_rng(8)
    lq, lk, d, dv = 24, 40, 64, 32
    q = rng.standard_normal(lead + (lq, d)).astype("float32")
    k = rng.standard_normal(lead + ((lk, d) if transpose_k else (d, lk))).astype("float32")
    v = rng.standard_normal(lead + (lk, dv)).astype("float32")
    mask = None if mask_shape is None else \
        np.where(rng.random(mask_shape) < 0.2, -1e4, 0.0).astype("float32")
    assert q.size * lk >= iops._SPLIT_MIN                     # the cut path
    kt = np.swapaxes(k, -1, -2) if transpose_k else k
    s = np.matmul(q.astype("float64"), kt.astype("float64")) * 0.125
    if mask is not None:
        s = s + mask
    e = np.exp(s - s.max(-1, keepdims=True))
    want = np.matmul(e / e.sum(-1, keepdims=True), v.astype("float64"))
    runs = []
    for n in (1, 2, 3):
        with threads.using(n):
            runs.append(op.forward(q, k, v, mask, alpha=0.125, transpose_k=transpose_k)["Out"])
    for got in runs:
        assert got.dtype == np.float32 and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert np.array_equal(runs[0], runs[1]) and np.array_equal(runs[1], runs[2])


def _mobile_block():
    x = fluid.data("x", [-1, 8, 9, 9], "float32")
    outs = []
    for stride, pad, k in ((1, 1, 3), (2, 1, 3), (2, 2, 5), (2, 0, 3)):
        y = L.conv2d(x, 8, k, stride, pad, groups=8, bias_attr=False, use_cudnn=False)
        y = L.relu6(L.batch_norm(y, is_test=True))
        y = L.conv2d(y, 6, 1, stride, bias_attr=False)                   # 1x1 (strided too)
        outs.append(L.batch_norm(y, act="relu", is_test=True))
    return outs


def test_conv_fusion_depthwise_1x1_relu6(tmp_path):
    d = _save(tmp_path, _mobile_block, ["x"])
    x = np.random.default_rng(4).standard_normal((2, 8, 9, 9)).astype("float32")
    _, plain = _run(d, [x], ir_optim=False)
    p, fused = _run(d, [x], delete=["depthwise_separable_fuse_pass"])
    _close(fused, plain)
    types = _types(p)
    assert types.count("conv2d_fusion") == 8
    assert "relu6" not in types and "batch_norm" not in types and "relu" not in types
    fusion = [op for op in p.program().global_block().ops if op.type == "conv2d_fusion"]
    assert sorted({op.attr("activation") for op in fusion}) == ["relu", "relu6"]
    # each branch is a group of just a depthwise and a 1x1 layer: all run channels-last, the
    # input transposed once for the four
    assert {op.attr("data_format") for op in fusion} == {"NHWC"}
    assert types.count("transpose2") == 5
    p_off, off = _run(d, [x], delete=["conv_elementwise_add_act_fuse_pass"])
    _close(off, plain)
    assert "conv2d_fusion" not in _types(p_off) and "relu6" in _types(p_off)


@pytest.mark.parametrize("groups,k,stride,pad,dil", [(6, 3, 1, 1, 1), (6, 3, 2, 0, 1),
                                                     (6, 3, 1, 2, 2), (1, 1, 2, 0, 1),
                                                     (1, 1, 1, 0, 1), (2, 3, 1, 1, 1)])
def test_conv2d_fusion_kernel_matches_conv2d(groups, k, stride, pad, dil):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 6, 7, 8)).astype("float32")
    w = rng.standard_normal((6, 6 // groups, k, k)).astype("float32")
    b = rng.standard_normal(6).astype("float32")
    attrs = dict(strides=[stride, stride], paddings=[pad, pad], groups=groups,
                 dilations=[dil, dil])
    want = get_op_def("conv2d").forward(x, w, **attrs)["Output"] + b.reshape(-1, 1, 1)
    got = get_op_def("conv2d_fusion").forward(x, w, b, activation="relu6", **attrs)["Output"]
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_allclose(got, np.clip(want, 0, 6), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("activation", ["identity", "relu", "relu6", "sigmoid", "tanh"])
@pytest.mark.parametrize("bias", [True, False])
def test_conv2d_fusion_epilogue_on_each_image(layout, activation, bias):
    """1x1 maps of >= 128 pixels: the bias and activation run on each image right after its
    GEMM -- the same operations as on the whole output, so the same bits."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((3, 5, 16, 12)).astype("float32")
    w = rng.standard_normal((7, 5, 1, 1)).astype("float32")
    b = rng.standard_normal(7).astype("float32") if bias else None
    if layout == "NHWC":
        x = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    want = get_op_def("conv2d").forward(x, w, data_format=layout)["Output"].copy()
    if b is not None:
        want += b if layout == "NHWC" else b.reshape(-1, 1, 1)
    act = {"identity": lambda v: v, "relu": lambda v: np.maximum(v, 0),
           "relu6": lambda v: np.clip(v, np.float32(0), np.float32(6)), "tanh": np.tanh,
           "sigmoid": lambda v: 1 / (1 + np.exp(-v))}[activation]
    got = get_op_def("conv2d_fusion").forward(x, w, b, activation=activation,
                                              data_format=layout)["Output"]
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_allclose(got, act(want), rtol=1e-6, atol=1e-7)
    if activation != "sigmoid":
        np.testing.assert_array_equal(got, act(want))


def test_relu6_other_threshold_not_fused(tmp_path):
    def build():
        x = fluid.data("x", [-1, 3, 5, 5], "float32")
        y = L.conv2d(x, 4, 3, padding=1)
        return [L.relu6(y, threshold=4.0)]
    d = _save(tmp_path, build, ["x"])
    x = np.random.default_rng(6).standard_normal((1, 3, 5, 5)).astype("float32")
    p, fused = _run(d, [x])
    _close(fused, _run(d, [x], ir_optim=False)[1])
    fusion = [op for op in p.program().global_block().ops if op.type == "conv2d_fusion"]
    assert "relu6" in _types(p) and fusion[0].attr("activation") == "identity"


def _winograd_net():
    x = fluid.data("x", [-1, 16, 10, 10], "float32")
    shared = fluid.ParamAttr(name="shared_w")
    y = L.batch_norm(L.conv2d(x, 16, 3, padding=1, bias_attr=False), act="relu", is_test=True)
    a = L.conv2d(y, 16, 3, padding=1, param_attr=shared)            # shares its filter ...
    b = L.conv2d(y, 16, 3, padding=1, param_attr=shared)            # ... with this one
    s2 = L.conv2d(y, 16, 3, stride=2, padding=1)                    # strided: no Winograd
    thin = L.conv2d(y, 8, 3, padding=1)                             # 8 channels: too thin
    k5 = L.conv2d(y, 16, 5, padding=2)                              # 5x5: no Winograd
    return [L.elementwise_add(a, b), s2, thin, k5]


def _winograd_reference(w):
    """U[4b + a, k, c] = (G W[k, c] G^T)[a, b] (positions column-major), F(2x2, 3x3)'s
    filter transform in float64."""
    g = np.array([[1, 0, 0], [.5, .5, .5], [.5, -.5, .5], [0, 0, 1]])
    u = np.einsum("ai,kcij,bj->bakc", g, w.astype(np.float64), g)
    return u.reshape(16, w.shape[0], w.shape[1])


def test_conv_winograd_filter_pass(tmp_path):
    d = _save(tmp_path, _winograd_net, ["x"])
    x = np.random.default_rng(7).standard_normal((2, 16, 10, 10)).astype("float32")
    _, plain = _run(d, [x], ir_optim=False)
    p, fused = _run(d, [x])
    _close(fused, plain)
    # the kernel uses the tiles instead of transforming the filter: the same bits
    _, untransformed = _run(d, [x], delete=["conv_winograd_filter_pass"])
    for got, want in zip(fused, untransformed):
        np.testing.assert_array_equal(got, want)
    assert ("conv_winograd_filter_pass", 3) in p.applied_passes()
    block = p.program().global_block()
    ops = [op for op in block.ops if op.type == "conv2d_fusion"]
    with_tiles = [op for op in ops if op.input("FilterTiles")]
    assert len(ops) == 6 and len(with_tiles) == 3
    # the two convolutions sharing a filter share one transform
    assert len({op.input("FilterTiles")[0] for op in with_tiles}) == 2
    params = p._shared.params
    for op in with_tiles:
        w = np.asarray(params.find_var(op.input("Filter")[0]).get_tensor())
        u = np.asarray(params.find_var(op.input("FilterTiles")[0]).get_tensor())
        assert u.dtype == np.float32 and u.shape == (16, 16, 16)
        np.testing.assert_allclose(u, _winograd_reference(w), rtol=1e-6, atol=1e-6)
        assert block.var(op.input("FilterTiles")[0]).persistable


def test_conv2d_fusion_refuses_tiles_of_another_filter():
    rng = np.random.default_rng(8)
    x = rng.standard_normal((2, 16, 10, 10)).astype("float32")
    w = rng.standard_normal((16, 16, 3, 3)).astype("float32")
    fusion = get_op_def("conv2d_fusion")
    good = get_op_def("winograd_filter_tiles").forward(w)["Out"]
    attrs = dict(strides=[1, 1], paddings=[1, 1])
    want = get_op_def("conv2d").forward(x, w, **attrs)["Output"]
    np.testing.assert_array_equal(fusion.forward(x, w, None, good, **attrs)["Output"], want)
    # the kernel computes with the tiles it is given (not a transform of Filter of its own)
    w2 = rng.standard_normal((16, 16, 3, 3)).astype("float32")
    other = get_op_def("winograd_filter_tiles").forward(w2)["Out"]
    np.testing.assert_allclose(fusion.forward(x, w, None, other, **attrs)["Output"],
                               get_op_def("conv2d").forward(x, w2, **attrs)["Output"],
                               rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match=r"filter tiles must be float32 \[16, 16, 16\]"):
        fusion.forward(x, w, None, good[:, :8], **attrs)
    with pytest.raises(ValueError, match=r"Filter must be \[K, C, 3, 3\], got \[16, 16, 3, 2\]"):
        get_op_def("winograd_filter_tiles").run_infer(
            [VarSpec((16, 16, 3, 2), VarType.FP32)], {})


def test_winograd_filter_tiles_op_runs_in_a_program():
    # the op the pass folds, in a program of its own through the Executor (its declared
    # float32 output checked by the plan), against the float64 transform
    w = np.random.default_rng(9).standard_normal((4, 3, 3, 3)).astype("float32")
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("w", [4, 3, 3, 3], "float32")
        out = main.global_block().create_var(name="tiles", dtype="float32")
        main.global_block().append_op("winograd_filter_tiles", {"Filter": x}, {"Out": out})
    (got,) = fluid.Executor(fluid.CPUPlace()).run(main, feed={"w": w}, fetch_list=[out])
    assert got.dtype == np.float32 and got.shape == (16, 4, 3)
    np.testing.assert_allclose(got, _winograd_reference(w), rtol=1e-6, atol=1e-6)


def _band_net():
    x = fluid.data("x", [-1, 8, 20, 20], "float32")
    free = fluid.data("free", [-1, 8, -1, -1], "float32")     # no fixed size: no band
    shared = fluid.ParamAttr(name="shared_dw")
    a = L.conv2d(x, 8, 3, padding=1, groups=8, param_attr=shared, act="relu6")
    b = L.conv2d(x, 8, 3, padding=1, groups=8, param_attr=shared)   # same filter and size
    s2 = L.conv2d(x, 8, 3, stride=2, padding=1, groups=8, param_attr=shared)   # another band
    # at most 8 wide: their forward runs the taps (``_conv_kernels.LAST_WIDTH``), no band to
    # lay out -- 5 wide, 5 wide with two filters per channel, 8 wide
    s4 = L.conv2d(x, 8, 3, stride=4, padding=1, groups=8, param_attr=shared)
    s4m2 = L.conv2d(x, 16, 3, stride=4, padding=1, groups=8)
    k5 = L.conv2d(x, 8, 5, stride=2, groups=8)
    m2 = L.conv2d(x, 16, 3, padding=2, dilation=2, groups=8)  # two filters per channel
    dense = L.conv2d(x, 8, 3, padding=1)                       # groups 1: not depthwise
    f = L.conv2d(free, 8, 3, padding=1, groups=8)
    return [L.elementwise_add(a, b), s2, s4, s4m2, k5, m2, dense, f]


def _band_reference(w, C, kh, kw, sw, dw, tw, span):
    """The banded matrices in float64 by their definition: column k*tw + t of channel c holds
    W[c*m + k, 0, i, j] at row i*span + t*sw + j*dw, zeros elsewhere."""
    m = w.shape[0] // C
    band = np.zeros((C, kh * span, m * tw))
    for c in range(C):
        for k in range(m):
            for t in range(tw):
                for i in range(kh):
                    for j in range(kw):
                        band[c, i * span + t * sw + j * dw, k * tw + t] = w[c * m + k, 0, i, j]
    return band


def test_conv_band_filter_pass(tmp_path):
    d = _save(tmp_path, _band_net, ["x", "free"])
    rng = np.random.default_rng(10)
    x = rng.standard_normal((2, 8, 20, 20)).astype("float32")
    free = rng.standard_normal((2, 8, 6, 7)).astype("float32")
    _, plain = _run(d, [x, free], ir_optim=False)
    p, fused = _run(d, [x, free])
    _close(fused, plain)
    # the kernel multiplies by the band it is given instead of laying out its own: same bits
    _, unbanded = _run(d, [x, free], delete=["conv_band_filter_pass"])
    for got, want in zip(fused, unbanded):
        np.testing.assert_array_equal(got, want)
    assert ("conv_band_filter_pass", 4) in p.applied_passes()
    block, params = p.program().global_block(), p._shared.params
    ops = [op for op in block.ops if op.type == "conv2d_fusion"]
    banded = [op for op in ops if op.input("FilterBand")]
    assert len(ops) == 9 and len(banded) == 4
    narrow = [op for op in ops if not op.input("FilterBand") and op.attr("groups") == 8
              and "free" not in op.input("Input")]
    assert sorted((op.attr("strides")[0], block.var(op.input("Filter")[0]).shape[0])
                  for op in narrow) == [(2, 8), (4, 8), (4, 16)]
    # one band per filter and geometry: a and b share theirs, s2 (stride 2) has its own
    assert len({op.input("FilterBand")[0] for op in banded}) == 3
    assert {op.input("FilterBand")[0] for op in banded
            if op.input("Filter") == ["shared_dw"]} == {"shared_dw@band", "shared_dw@band_1"}
    for op in banded:
        w = np.asarray(params.find_var(op.input("Filter")[0]).get_tensor())
        band = np.asarray(params.find_var(op.input("FilterBand")[0]).get_tensor())
        sw, dw = op.attr("strides")[1], op.attr("dilations")[1]
        ow = (20 + 2 * op.attr("paddings")[1] - dw * 2 - 1) // sw + 1
        tw = -(-ow // -(-ow // 16))                 # equal tiles of at most 16 pixels
        span = (tw - 1) * sw + 2 * dw + 1
        assert band.dtype == np.float32 and block.var(op.input("FilterBand")[0]).persistable
        np.testing.assert_array_equal(band, _band_reference(w, 8, 3, 3, sw, dw, tw, span))


@pytest.mark.parametrize("k,strides,dil", [(3, [1, 1], 1), (5, [2, 1], 1), (3, [1, 2], 2)])
def test_a_free_width_takes_the_full_tile_band(k, strides, dil):
    # an input of free width (an OCR line): the band of full tiles, laid out at load, holds
    # every width's band as its corner -- the same bits as laying the band out per run
    rng = np.random.default_rng(12)
    w = rng.standard_normal((10, 1, k, k)).astype("float32")
    attrs = dict(strides=strides, paddings=[k // 2, k // 2], groups=10, dilations=[dil, dil])
    fusion, make = get_op_def("conv2d_fusion"), get_op_def("depthwise_band_filter")
    tile = make.forward(w, input_size=[6, -1], **attrs)["Out"]
    assert tile.shape == make.run_infer([VarSpec(w.shape, VarType.FP32)],
                                        dict(attrs, input_size=[6, -1]))["Out"].shape
    for width in (5, 9, 16, 20, 37, 80):
        x = rng.standard_normal((2, 10, 6, width)).astype("float32")
        got = fusion.forward(x, w, None, None, tile, **attrs)["Output"]
        np.testing.assert_array_equal(got, fusion.forward(x, w, None, None, None,
                                                          **attrs)["Output"])
        np.testing.assert_allclose(got, get_op_def("depthwise_conv2d").forward(
            x.astype(np.float64), w.astype(np.float64), **attrs)["Output"], rtol=1e-5,
            atol=1e-5)
    fusion.run_infer([VarSpec((-1, 10, 6, -1), VarType.FP32), VarSpec(w.shape, VarType.FP32),
                      None, None, VarSpec(tile.shape, VarType.FP32)], attrs)
    exact = make.forward(w, input_size=[6, 9], **attrs)["Out"]
    with pytest.raises(ValueError, match=r"FilterBand must be the depthwise filter's banded"):
        fusion.run_infer([VarSpec((-1, 10, 6, -1), VarType.FP32),
                          VarSpec(w.shape, VarType.FP32), None, None,
                          VarSpec(exact.shape, VarType.FP32)], attrs)
    with pytest.raises(ValueError, match=r"banded filter must be float32"):
        fusion.forward(x, w, None, None, tile.astype(np.float64), **attrs)

    def shape(hw, dtype=np.float32):
        return band_filter_shape(hw, w.shape, dtype, strides, attrs["paddings"], "EXPLICIT",
                                 10, attrs["dilations"])
    assert all(type(d) is int for d in shape((6, -1)))
    # a free height takes the width's own band, also for widths past one tile
    assert shape((-1, 30)) == shape((5, 30)) != shape((6, -1))
    assert shape((-1, 700)) is not None     # one output row of 700 pixels fits
    with pytest.raises(ValueError, match="no banded depthwise kernel runs"):
        make.forward(w.astype(np.float16), input_size=[6, -1], **attrs)
    # too many output rows for a tile row, or a width too wide for a row: no band
    assert shape((200, -1)) is None and shape((-1, 3000)) is None and shape((-1, -1)) is None
    assert shape((6, -1), np.float16) is None and shape((-1, 30), np.int32) is None


def test_conv2d_fusion_refuses_a_band_of_another_geometry():
    rng = np.random.default_rng(11)
    # 4 images: more output pixels than the rows-last taps take (``_conv_kernels``)
    x = rng.standard_normal((4, 6, 9, 9)).astype("float32")
    w = rng.standard_normal((6, 1, 3, 3)).astype("float32")
    attrs = dict(strides=[1, 1], paddings=[1, 1], groups=6)
    fusion, make = get_op_def("conv2d_fusion"), get_op_def("depthwise_band_filter")
    band = make.forward(w, input_size=[9, 9], **attrs)["Out"]
    want = get_op_def("depthwise_conv2d").forward(x, w, **attrs)["Output"]
    np.testing.assert_array_equal(
        fusion.forward(x, w, None, None, band, **attrs)["Output"],
        fusion.forward(x, w, None, None, None, **attrs)["Output"])
    np.testing.assert_allclose(fusion.forward(x, w, None, None, band, **attrs)["Output"], want,
                               rtol=1e-5, atol=1e-5)
    # a band of another filter is what the kernel multiplies by
    w2 = rng.standard_normal((6, 1, 3, 3)).astype("float32")
    other = make.forward(w2, input_size=[9, 9], **attrs)["Out"]
    np.testing.assert_allclose(fusion.forward(x, w, None, None, other, **attrs)["Output"],
                               get_op_def("depthwise_conv2d").forward(x, w2, **attrs)["Output"],
                               rtol=1e-5, atol=1e-5)
    # a band made for a wider input does not fit: refused at run time and at build time
    wide = make.forward(w, input_size=[9, 20], **attrs)["Out"]
    with pytest.raises(ValueError, match=r"banded filter must be float32 \[6, 33, 9\]"):
        fusion.forward(x, w, None, None, wide, **attrs)
    with pytest.raises(ValueError, match=r"FilterBand must be the depthwise filter's banded"):
        fusion.run_infer([VarSpec((-1, 6, 9, 9), VarType.FP32), VarSpec(w.shape, VarType.FP32),
                          None, None, VarSpec(wide.shape, VarType.FP32)], attrs)
    with pytest.raises(ValueError, match=r"FilterBand .* \(none runs\)"):
        fusion.run_infer([VarSpec((-1, 6, -1, -1), VarType.FP32),
                          VarSpec(w.shape, VarType.FP32), None, None,
                          VarSpec(band.shape, VarType.FP32)], attrs)
    # a free height: the band depends on the output's width alone
    fusion.run_infer([VarSpec((-1, 6, -1, 9), VarType.FP32), VarSpec(w.shape, VarType.FP32),
                      None, None, VarSpec(band.shape, VarType.FP32)], attrs)
    # fluid's AnyLayout is NCHW here
    out = fusion.run_infer([VarSpec((-1, 6, 9, 9), VarType.FP32), VarSpec(w.shape, VarType.FP32),
                            None, None, VarSpec(band.shape, VarType.FP32)],
                           dict(attrs, data_format="AnyLayout"))
    assert tuple(out["Output"].shape) == (-1, 6, 9, 9)
    # no banded kernel for a dense filter, a big map, or shapes of other ranks: the op refuses
    # to make one, saying so
    for filt, size in (((6, 6, 3, 3), [9, 9]), ((6, 1, 3), [9, 9]), ((6, 1, 3, 3), [9, 9, 9])):
        with pytest.raises(ValueError, match=r"no banded depthwise kernel runs for the filter"):
            make.run_infer([VarSpec(filt, VarType.FP32)], dict(attrs, input_size=size))
    with pytest.raises(ValueError, match=r"no banded depthwise kernel runs .* \[64, 64\]"):
        make.forward(w, input_size=[64, 64], **attrs)


def test_depthwise_band_filter_op_runs_in_a_program():
    w = np.random.default_rng(12).standard_normal((4, 1, 3, 3)).astype("float32")
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        v = fluid.data("w", [4, 1, 3, 3], "float32")
        out = main.global_block().create_var(name="band", dtype="float32")
        main.global_block().append_op(
            "depthwise_band_filter", {"Filter": v}, {"Out": out},
            {"input_size": [5, 5], "strides": [2, 2], "paddings": [1, 1], "groups": 4})
    (got,) = fluid.Executor(fluid.CPUPlace()).run(main, feed={"w": w}, fetch_list=[out])
    # 5x5, stride 2, padding 1: 3 output columns, one tile, span (3 - 1) * 2 + 3 = 7
    assert got.dtype == np.float32 and got.shape == (4, 21, 3)
    np.testing.assert_array_equal(got, _band_reference(w, 4, 3, 3, 2, 1, 3, 7))


def _residual_net():
    x = fluid.data("x", [-1, 8, 12, 12], "float32")
    y = L.batch_norm(L.conv2d(x, 8, 3, padding=1, bias_attr=False), is_test=True)
    main = L.conv2d(y, 16, 1)                                       # bias; no activation
    short = L.conv2d(x, 16, 1, bias_attr=False)     # the shortcut: computed after ``main``
    a = L.relu(L.elementwise_add(short, main))      # the conv output as Y, then relu
    b = L.conv2d(a, 16, 3, padding=1)
    c = L.elementwise_add(b, a)                     # as X, no activation
    d = L.conv2d(c, 16, 1)
    e = L.elementwise_add(d, L.reduce_mean(c, dim=[2, 3], keep_dim=True))   # broadcast: no
    f = L.conv2d(e, 16, 1)
    g = L.sigmoid(L.elementwise_add(f, e))
    return [g, L.scale(f, 2.0)]                     # f is read twice: not fused with its add


def test_conv_elementwise_add2_act_fuse_pass(tmp_path):
    d = _save(tmp_path, _residual_net, ["x"])
    x = np.random.default_rng(13).standard_normal((2, 8, 12, 12)).astype("float32")
    _, plain = _run(d, [x], ir_optim=False)
    p, fused = _run(d, [x])
    _close(fused, plain)
    # the residual and the activation in the epilogue: the same operations in the same order
    _, unfused = _run(d, [x], delete=["conv_elementwise_add2_act_fuse_pass"])
    for got, want in zip(fused, unfused):
        np.testing.assert_array_equal(got, want)
    assert ("conv_elementwise_add2_act_fuse_pass", 2) in p.applied_passes()
    ops = p.program().global_block().ops
    res = [op for op in ops if op.type == "conv2d_fusion" and op.input("ResidualData")]
    assert [op.attr("activation") for op in res] == ["relu", "identity"]
    # the fused op sits where the add was: after the shortcut that feeds it
    short = next(i for i, op in enumerate(ops) if op.output_names and any(
        res[0].input("ResidualData")[0] in op.output(s) for s in op.output_names))
    assert short < ops.index(res[0])
    # (the near misses' adds: one left alone, one with its sigmoid in a fused_elemwise_activation)
    types = _types(p)
    assert types.count("elementwise_add") == 1 and types.count("fused_elemwise_activation") == 1
    assert "relu" not in types and "sigmoid" not in types


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("shape, k, groups", [
    ((1, 8, 16, 16), 1, 1),         # 1x1, one image: the parts of its GEMM
    ((3, 8, 16, 12), 1, 1),         # 1x1, image by image
    ((2, 8, 9, 9), 3, 1),           # im2col
    ((2, 8, 9, 9), 3, 8),           # depthwise
])
def test_conv2d_fusion_adds_the_residual_before_the_activation(layout, shape, k, groups):
    from fluidlite.core import threads
    rng = np.random.default_rng(14)
    x = rng.standard_normal(shape).astype("float32")
    F = 8 if groups > 1 else 24
    w = rng.standard_normal((F, shape[1] // groups, k, k)).astype("float32")
    b = rng.standard_normal(F).astype("float32")
    attrs = dict(paddings=[k // 2] * 2, groups=groups, data_format=layout)
    if layout == "NHWC":
        x = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    conv = get_op_def("conv2d").forward(x, w, **attrs)["Output"]
    r = rng.standard_normal(conv.shape).astype("float32")
    want = conv + (b if layout == "NHWC" else b.reshape(-1, 1, 1))
    want += r
    for t in (1, 2):
        with threads.using(t):
            got = get_op_def("conv2d_fusion").forward(x, w, b, None, None, r, activation="relu",
                                                      **attrs)["Output"]
        assert got.dtype == np.float32 and got.shape == want.shape
        np.testing.assert_allclose(got, np.maximum(want, 0), rtol=1e-5, atol=1e-5)
        if t == 1:
            np.testing.assert_array_equal(got, np.maximum(want, 0))
    fusion = get_op_def("conv2d_fusion")
    with pytest.raises(ValueError, match=r"ResidualData must have the output's shape"):
        fusion.run_infer([VarSpec((-1,) + x.shape[1:], VarType.FP32),
                          VarSpec(w.shape, VarType.FP32), None, None, None,
                          VarSpec((-1, 5) + conv.shape[2:], VarType.FP32)], attrs)


def test_conv_band_filter_pass_leaves_an_nhwc_fusion_alone(tmp_path):
    # a conv2d_fusion saved in NHWC (as Paddle may write one): its input's dims 2-3 are not
    # the map's height and width, so no band is made for it
    def build():
        x = fluid.data("x", [-1, 9, 9, 6], "float32")
        block = fluid.default_main_program().global_block()
        w = L.create_parameter([6, 1, 3, 3], "float32", name="nhwc_dw")
        b = L.create_parameter([6], "float32", name="nhwc_b")
        y = block.create_var(name="nhwc_y", dtype="float32", shape=[-1, 9, 9, 6])
        block.append_op("conv2d_fusion", {"Input": x, "Filter": w, "Bias": b},
                        {"Output": y}, {"paddings": [1, 1], "groups": 6,
                                        "data_format": "NHWC", "activation": "relu"})
        return [L.scale(y, 1.0)]
    d = _save(tmp_path, build, ["x"])
    x = np.random.default_rng(15).standard_normal((2, 9, 9, 6)).astype("float32")
    p, fused = _run(d, [x])
    _close(fused, _run(d, [x], ir_optim=False)[1])
    assert ("conv_band_filter_pass", 0) in p.applied_passes()
    assert not [op for op in p.program().global_block().ops if op.input_names
                and "FilterBand" in op.input_names and op.input("FilterBand")]


def _siblings_net():
    x = fluid.data("x", [-1, 16, 96], "float32")
    y = fluid.data("y", [-1, 96], "float32")
    q = L.fc(x, 256, num_flatten_dims=2)                     # Q, K, V: one Input
    k = L.fc(x, 256, num_flatten_dims=2, act="relu")
    v = L.fc(x, 128, num_flatten_dims=2)
    flat = L.fc(x, 64, num_flatten_dims=1)                   # another in_num_col_dims
    alone = L.fc(y, 32)                                      # a single reader of y
    return [q, k, v, flat, alone]


@pytest.mark.parametrize("threads_", [1, 2])
def test_fc_group_fuse_pass(tmp_path, threads_):
    from fluidlite.core import threads
    d = _save(tmp_path, _siblings_net, ["x", "y"])
    rng = np.random.default_rng(2)
    inputs = [rng.standard_normal((12, 16, 96)).astype("float32"),
              rng.standard_normal((12, 96)).astype("float32")]
    with threads.using(threads_):
        p_off, plain = _run(d, inputs, delete=["fc_group_fuse_pass"])
        p, fused = _run(d, inputs)
    for a, b in zip(fused, plain):             # each output is its fc's, bit for bit
        assert a.dtype == b.dtype and np.array_equal(a, b)
    types = _types(p)
    assert types.count("fc_group") == 1 and types.count("fc") == 2
    group = next(op for op in p.program().global_block().ops if op.type == "fc_group")
    assert len(group.output("Out")) == 3 and group.attr("activation_types") == ["", "relu", ""]
    assert group.attr("in_num_col_dims") == 2
    assert dict(p.applied_passes())["fc_group_fuse_pass"] == 1
    assert "fc_group" not in _types(p_off) and _types(p_off).count("fc") == 5
    p.program().lint()
    _, unoptimised = _run(d, inputs, ir_optim=False)
    _close(fused, unoptimised)


def test_fc_group_kernel_is_fc_for_every_layer():
    # the group's outputs are fc's, for float32 (one parallel call) and float16 (one layer
    # at a time); mismatched lists are refused
    from fluidlite.core import threads
    group, fc = get_op_def("fc_group"), get_op_def("fc")
    rng = np.random.default_rng(3)
    for dt in ("float32", "float16"):
        x = rng.standard_normal((600, 64)).astype(dt)      # 7.7M: cut; 5M: whole
        ws = [rng.standard_normal((64, n)).astype(dt) for n in (200, 130)]
        bs = [rng.standard_normal(n).astype(dt) for n in (200, 130)]
        with threads.using(2):
            got = group.forward(x, ws, bs, activation_types=["relu", ""])["Out"]
            want = [fc.forward(x, w, b, activation_type=a)["Out"]
                    for w, b, a in zip(ws, bs, ("relu", ""))]
        for g, w in zip(got, want):
            assert g.dtype == np.dtype(dt) and np.array_equal(g, w)
    specs = [VarSpec((3, 64), VarType.FP32), [VarSpec((64, 5), VarType.FP32)] * 2,
             [VarSpec((5,), VarType.FP32)]]
    with pytest.raises(ValueError, match="2 W, 1 Bias and 2 activation_types"):
        group.infer(*specs)
    with pytest.raises(ValueError, match="expected as many of each"):
        group.forward(x, ws, bs[:1])


def test_fc_group_kernel_runs_every_layers_jobs_in_one_call():
    # one parallel call with every layer's GEMM calls; fc's defaults (no activation types,
    # in_num_col_dims 1) and padded weights as fc reads them; a group of one is a group
    from fluidlite.core import threads
    fc = get_op_def("fc")
    rng = np.random.default_rng(4)
    x = rng.standard_normal((600, 64)).astype("float32")
    ws = [rng.standard_normal((68, n + 4)).astype("float32") for n in (200, 136)]
    bs = [rng.standard_normal(n).astype("float32") for n in (200, 136)]
    calls = []
    real = threads.parallel
    with threads.using(2), pytest.MonkeyPatch.context() as mp:
        mp.setattr(threads, "parallel", lambda fn, n, sink=None: (calls.append(n),
                                                                  real(fn, n, sink))[1])
        got = fc.forward_group(x, ws, bs, padding_weights=True)
        assert calls == [3]                  # 7.7M multiply-adds: two parts; 5.2M: whole
        w0 = np.ascontiguousarray(ws[0][:-4, :-4])
        one = get_op_def("fc_group").forward(x, [w0], bs[:1])["Out"]
        want0 = fc.forward(x, w0, bs[0])["Out"]
    # fc's own bits under the same thread count (one thread leaves the 7.7M product whole to
    # BLAS's threads, which may round otherwise: NumPy 1.23's OpenBLAS on an AMD EPYC does)
    with threads.using(2):
        wants = [fc.forward(x, w, b, padding_weights=True)["Out"] for w, b in zip(ws, bs)]
    for g, want, w in zip(got, wants, ws):
        assert np.array_equal(g, want) and g.shape == (600, w.shape[1] - 4)
    assert len(one) == 1 and np.array_equal(one[0], want0)


def test_fc_group_infers_each_fc_and_refuses_what_fc_refuses():
    group = get_op_def("fc_group")
    f32 = VarType.FP32
    x, w = VarSpec((-1, 7, 64), f32), [VarSpec((64, 5), f32), VarSpec((64, 3), f32)]
    b = [VarSpec((5,), f32), VarSpec((3,), f32)]
    out = group.infer(x, w, b, in_num_col_dims=2, activation_types=["", "relu"])
    assert list(out) == ["Out"] and [o.shape for o in out["Out"]] == [(-1, 7, 5), (-1, 7, 3)]
    with pytest.raises(ValueError, match="Bias must be"):
        group.infer(x, w, b[::-1], in_num_col_dims=2)
    with pytest.raises(ValueError, match="activation_type must be"):
        group.infer(x, w, b, in_num_col_dims=2, activation_types=["", "tanh"])


def _fc_program(build):
    """A block of hand-made fc ops: ``build(block, fc)`` adds them; fc(x, w, out, **attrs)."""
    from fluidlite.inference.passes import PassContext, fc_group_fuse_pass
    main = fluid.Program()
    block = main.global_block()

    def var(name, shape, persistable=False):
        if name not in block.vars:
            block.create_var(name=name, shape=shape, dtype="float32", persistable=persistable)

    def fc(x, w, out, n=4, **attrs):
        var(x, [-1, 8])
        var(w, [8, n] if not attrs.get("padding_weights") else [12, n + 4], True)
        var(w + ".b", [n], True)
        var(out, [-1, n])
        block.append_op("fc", {"Input": [x], "W": [w], "Bias": [w + ".b"]}, {"Out": [out]},
                        dict({"in_num_col_dims": 1}, **attrs))
    build(block, fc)
    count = fc_group_fuse_pass(PassContext(main, None, None, set()))
    return count, [op.type for op in block.ops]


@pytest.mark.parametrize("case, want", [
    ("two", 1),                     # two siblings are a group
    ("padded", 0),                  # padded weights: fc_group does not take them
    ("rewritten", 0),               # the Input written again between the two fcs
])
def test_which_sibling_fcs_are_grouped(case, want):
    def build(block, fc):
        fc("x", "w1", "o1")
        if case == "rewritten":
            block.append_op("scale", {"X": ["x"]}, {"Out": ["x"]}, {"scale": 2.0})
        fc("x", "w2", "o2", padding_weights=case == "padded")
    count, types = _fc_program(build)
    assert count == want
    assert types.count("fc_group") == want and types.count("fc") == 2 - 2 * want


# -- fc + GELU, and fc + residual add + layer_norm ----------------------------------------------
def _three_ops(x, w, b0, y, scale, b1, ncol, act, eps, axis):
    fc, ln = get_op_def("fc"), get_op_def("layer_norm")
    h = fc.forward(x, w, b0, in_num_col_dims=ncol, activation_type=act)["Out"]
    got = ln.forward(get_op_def("elementwise_add").forward(h, y)["Out"], scale, b1,
                     epsilon=eps, begin_norm_axis=axis)
    return got["Y"], got["Mean"], got["Variance"]


@pytest.mark.parametrize("case,lead,k,n,nthreads,normed_in_parts", [
    ("row parts", (16, 128), 64, 128, 2, 2),   # 256K sums: each GEMM part normalises its rows
    ("one thread", (16, 128), 64, 128, 1, 0),  # the product whole: the norm after it
    ("small", (2, 32), 96, 128, 2, 0),         # 8K sums: too few for parts, the norm after
    ("rows cut, norm small", (256,), 256, 128, 2, 0),   # GEMM parts; 32K sums: norm after
    ("column parts", (100,), 256, 2048, 2, 0),  # few rows: column blocks, the norm after
    ("gelu", (16, 128), 64, 128, 2, 2),
    ("float64", (16, 128), 64, 128, 2, 2),
    ("other width", (4, 6), 16, 32, 2, 0),     # begin_norm_axis 1: rows are not fc's rows
    ("float16", (4, 6), 16, 32, 2, 0),         # another dtype: the three kernels
])
def test_fused_fc_elementwise_layernorm_is_the_three_ops_bit_for_bit(
        case, lead, k, n, nthreads, normed_in_parts, monkeypatch):
    from fluidlite.core import threads
    from fluidlite.inference import ops as inference_ops
    dt = {"float64": "float64", "float16": "float16"}.get(case, "float32")
    act = "gelu_erf" if case == "gelu" else "relu" if case in ("small", "float16") else ""
    axis = 1 if case == "other width" else len(lead)
    rng = np.random.default_rng(len(case))
    x = rng.standard_normal(lead + (k,)).astype(dt)
    w = (rng.standard_normal((k, n)) * 0.2).astype(dt)
    b0, y = rng.standard_normal(n).astype(dt), rng.standard_normal(lead + (n,)).astype(dt)
    width = int(np.prod((lead + (n,))[axis:]))
    scale, b1 = rng.uniform(0.5, 1.5, width).astype(dt), rng.standard_normal(width).astype(dt)
    calls = []
    real = inference_ops.ln_rows
    monkeypatch.setattr(inference_ops, "ln_rows", lambda *a, **kw: (calls.append(1),
                                                                    real(*a, **kw))[1])
    attrs = dict(x_num_col_dims=len(lead), activation_type=act, epsilon=1e-4,
                 begin_norm_axis=axis)
    with threads.using(nthreads):
        got = get_op_def("fused_fc_elementwise_layernorm").forward(x, w, b0, y, scale, b1,
                                                                    **attrs)
        want = _three_ops(x, w, b0, y, scale, b1, len(lead), act, 1e-4, axis)
    assert len(calls) == normed_in_parts
    for slot, ref in zip(("Out", "Mean", "Variance"), want):
        assert got[slot].dtype == ref.dtype and got[slot].shape == ref.shape
        np.testing.assert_array_equal(got[slot], ref, err_msg=slot)
    # and layer_norm's formula in float64 on fc's float64 sum
    s = (x.reshape(-1, k).astype(np.float64) @ w.astype(np.float64) + b0).reshape(y.shape) + y
    rows = s.reshape(-1, width)
    if act == "":                       # (the activations: the fc tests check them)
        ref = (rows - rows.mean(1, keepdims=True)) / np.sqrt(rows.var(1, keepdims=True) + 1e-4)
        tol = {"float16": 1e-2, "float32": 2e-5}.get(dt, 1e-10)
        np.testing.assert_allclose(got["Out"].reshape(rows.shape), ref * scale + b1,
                                   rtol=tol, atol=tol)


def test_fused_fc_elementwise_layernorm_refuses_what_its_ops_refuse():
    op, f32 = get_op_def("fused_fc_elementwise_layernorm"), VarType.FP32
    x, w, b = VarSpec((-1, 8, 16), f32), VarSpec((16, 32), f32), VarSpec((32,), f32)
    s = VarSpec((32,), f32)
    out = op.infer(x, w, b, VarSpec((-1, 8, 32), f32), s, s, x_num_col_dims=2,
                   begin_norm_axis=2)
    assert out["Out"].shape == (-1, 8, 32) and out["Mean"].shape == (-1,)
    assert out["Variance"].shape == (-1,) and sorted(out) == ["Mean", "Out", "Variance"]
    with pytest.raises(ValueError, match=r"Y must have fc's output shape \[-1, 8, 32\], got "
                                         r"\[-1, 8, 16\]"):
        op.infer(x, w, b, VarSpec((-1, 8, 16), f32), s, s, x_num_col_dims=2,
                 begin_norm_axis=2)
    for eps in (0.0, 1e-3):                 # the ends of Paddle's range
        op.infer(x, w, b, VarSpec((-1, 8, 32), f32), s, s, x_num_col_dims=2,
                 begin_norm_axis=2, epsilon=eps)
    for y in ((4, 8, 32), (-1, 1, 32), (-1, 8, 1)):      # a known size that is not fc's
        with pytest.raises(ValueError, match="Y must have fc's output shape"):
            op.infer(VarSpec((3, 8, 16), f32) if y[0] == 4 else x, w, b, VarSpec(y, f32), s,
                     s, x_num_col_dims=2, begin_norm_axis=2)
    with pytest.raises(ValueError, match=r"epsilon must be in \[0, 0.001\], got 0.1"):
        op.infer(x, w, b, VarSpec((-1, 8, 32), f32), s, s, x_num_col_dims=2,
                 begin_norm_axis=2, epsilon=0.1)
    with pytest.raises(ValueError, match="Scale must have shape"):
        op.infer(x, w, b, VarSpec((-1, 8, 32), f32), VarSpec((16,), f32), s,
                 x_num_col_dims=2, begin_norm_axis=2)
    with pytest.raises(ValueError, match="activation_type must be one of"):
        op.infer(x, w, b, VarSpec((-1, 8, 32), f32), s, s, x_num_col_dims=2,
                 begin_norm_axis=2, activation_type="tanh")
    with pytest.raises(ValueError, match=r"Bias must be \[32\] or \[1, 32\]"):
        op.infer(x, w, VarSpec((16,), f32), VarSpec((-1, 8, 32), f32), s, s,
                 x_num_col_dims=2, begin_norm_axis=2)
    with pytest.raises(ValueError, match="Bias must have shape"):
        op.infer(x, w, b, VarSpec((-1, 8, 32), f32), s, VarSpec((16,), f32),
                 x_num_col_dims=2, begin_norm_axis=2)


def _encoder_block(fetch_mean=False, late_residual=False, gelu_read_twice=False,
                   approximate=False):
    x = fluid.data("x", [-1, 8, 32], "float32")
    h = L.fc(x, 64, num_flatten_dims=2)
    g = L.gelu(h, approximate=approximate)
    outs = [L.reduce_sum(h)] if gelu_read_twice else []
    o = L.fc(g, 32, num_flatten_dims=2)
    r = L.scale(x, 0.5) if late_residual else x          # made after the fc: not fused
    y = L.layer_norm(L.elementwise_add(r, o), begin_norm_axis=2)
    outs.insert(0, y)
    if fetch_mean:
        ln = next(op for op in y.block.ops if op.type == "layer_norm")
        outs.append(y.block.var(ln.output("Mean")[0]))
    return outs


@pytest.mark.parametrize("case", ["plain", "tanh", "mean fetched"])
def test_fc_act_and_fc_elementwise_layernorm_fuse_passes(tmp_path, case):
    d = _save(tmp_path, lambda: _encoder_block(fetch_mean=case == "mean fetched",
                                               approximate=case == "tanh"), ["x"])
    inputs = [np.random.default_rng(5).standard_normal((3, 8, 32)).astype("float32")]
    _, plain = _run(d, inputs, ir_optim=False)
    p, fused = _run(d, inputs)
    _close(fused, plain)
    ops = [o for o in p.program().global_block().ops if o.type not in ("feed", "fetch")]
    assert [o.type for o in ops] == ["fc", "fused_fc_elementwise_layernorm"]
    assert ops[0].attr("activation_type") == ("gelu_tanh" if case == "tanh" else "gelu_erf")
    fused_op = ops[1]
    assert fused_op.attr("x_num_col_dims") == 2 and fused_op.attr("begin_norm_axis") == 2
    assert fused_op.input("Y") == ["x"] and fused_op.attr("activation_type") == ""
    assert bool("Mean" in fused_op.output_names and fused_op.output("Mean")) == \
        (case == "mean fetched")
    applied = dict(p.applied_passes())
    assert applied["fc_act_mkldnn_fuse_pass"] == 1
    assert applied["fc_elementwise_layernorm_fuse_pass"] == 1
    p.program().lint()
    for off, kept in (("fc_act_mkldnn_fuse_pass", "gelu"),
                      ("fc_elementwise_layernorm_fuse_pass", "layer_norm")):
        p_off, got = _run(d, inputs, delete=[off])
        _close(got, plain)
        assert kept in _types(p_off)


@pytest.mark.parametrize("case", ["late residual", "pre-activation read twice"])
def test_fc_fusions_leave_what_they_cannot_fuse(tmp_path, case):
    d = _save(tmp_path, lambda: _encoder_block(late_residual=case == "late residual",
                                               gelu_read_twice=case != "late residual"),
              ["x"])
    inputs = [np.random.default_rng(6).standard_normal((2, 8, 32)).astype("float32")]
    _, plain = _run(d, inputs, ir_optim=False)
    p, fused = _run(d, inputs)
    _close(fused, plain)
    types, applied = _types(p), dict(p.applied_passes())
    if case == "late residual":         # Y is made after the fc: the fused op could not run
        assert "layer_norm" in types and "fused_fc_elementwise_layernorm" not in types
        assert applied["fc_elementwise_layernorm_fuse_pass"] == 0
        assert applied["fc_act_mkldnn_fuse_pass"] == 1
    else:                               # the fc's output is read by the gelu and a sum
        assert "gelu" in types and applied["fc_act_mkldnn_fuse_pass"] == 0
        assert applied["fc_elementwise_layernorm_fuse_pass"] == 1


# -- slice_pushdown_pass ----------------------------------------------------------------------
def _classifier(layers=2, h=16, nh=2, seq=6, mask=False, fetch_seq=False, decrease=False):
    """A BERT classifier as fluid 1.8's model zoo writes it: the encoder, then its [CLS] row
    (``slice`` on the token axis) through a tanh pooler and an fc."""
    x = fluid.data("x", [-1, seq, h], "float32")
    m = fluid.data("m", [-1, 1, 1, seq], "float32") if mask else None

    def heads(t):
        return L.transpose(L.reshape(t, [0, 0, nh, h // nh]), [0, 2, 1, 3])
    enc = L.layer_norm(x, begin_norm_axis=2)
    for _ in range(layers):
        q, k, v = (heads(L.fc(enc, h, num_flatten_dims=2)) for _ in range(3))
        s = L.matmul(q, k, transpose_y=True, alpha=(h // nh) ** -0.5)
        p = L.softmax(L.elementwise_add(s, m) if mask else s)
        ctx = L.reshape(L.transpose(L.matmul(p, v), [0, 2, 1, 3]), [0, 0, h])
        enc = L.layer_norm(L.elementwise_add(enc, L.fc(ctx, h, num_flatten_dims=2)),
                           begin_norm_axis=2)
        ffn = L.fc(L.gelu(L.fc(enc, 2 * h, num_flatten_dims=2)), h, num_flatten_dims=2)
        enc = L.layer_norm(L.elementwise_add(enc, ffn), begin_norm_axis=2)
    cls = L.slice(enc, [1], [0], [1])
    cls = L.reshape(cls, [0, h]) if not decrease else L.squeeze(cls, [1])
    outs = [L.fc(L.fc(cls, h, act="tanh"), 2)]
    return outs + [enc] if fetch_seq else outs


def _classifier_inputs(mask=False, batch=3):
    rng = np.random.default_rng(8)
    xs = [rng.standard_normal((batch, 6, 16)).astype("float32")]
    if mask:
        m = np.zeros((batch, 1, 1, 6), "float32")
        m[..., 4:] = -10000.0
        xs.append(m)
    return xs


@pytest.mark.parametrize("mask", [False, True])
def test_slice_pushdown_computes_the_last_layer_for_the_kept_row(tmp_path, mask):
    d = _save(tmp_path, lambda: _classifier(mask=mask), ["x", "m"] if mask else ["x"])
    inputs = _classifier_inputs(mask)
    _, plain = _run(d, inputs, ir_optim=False)
    p, cut = _run(d, inputs)
    _close(cut, plain)
    block = p.program().global_block()
    ops = [o for o in block.ops if o.type not in ("feed", "fetch")]
    # the last layer's FFN, its norms, output projection, attention and query projection run
    # on one token: each reads or writes [-1, 1, ...] (two slices remain: of the layer's input,
    # for its queries and residual, and of nothing else)
    slices = [o for o in ops if o.type == "slice"]
    assert len(slices) == 1 and dict(p.applied_passes())["slice_pushdown_pass"] >= 10
    tail = ops[ops.index(slices[0]) + 1:]
    last_ln = [o for o in tail if o.type == "fused_fc_elementwise_layernorm"]
    assert len(last_ln) == 2
    assert all(block.var(o.output("Out")[0]).shape == (-1, 1, 16) for o in last_ln)
    attn = next(o for o in tail if o.type == "scaled_dot_product_attention")
    assert block.var(attn.input("Q")[0]).shape == (-1, 2, 1, 8)
    assert block.var(attn.input("K")[0]).shape == (-1, 2, 6, 8)
    group = next(o for o in tail if o.type == "fc_group")       # K and V on every token
    assert len(group.output("Out")) == 2
    p.program().lint()
    p_off, off = _run(d, inputs, delete=["slice_pushdown_pass"])
    _close(off, plain)
    assert [o.type for o in p_off.program().global_block().ops].count("slice") == 1
    assert dict(p_off.applied_passes()).get("slice_pushdown_pass") is None


@pytest.mark.parametrize("case", ["sequence fetched", "decrease_axis"])
def test_slice_pushdown_leaves_a_slice_of_what_is_read_whole(tmp_path, case):
    # the encoder's output fetched as well: every row of it is made; a slice that drops its
    # axis is not one the pass moves (the squeeze after it keeps it apart here)
    d = _save(tmp_path, lambda: _classifier(fetch_seq=case == "sequence fetched",
                                            decrease=case == "decrease_axis"), ["x"])
    inputs = _classifier_inputs()
    _, plain = _run(d, inputs, ir_optim=False)
    p, got = _run(d, inputs)
    _close(got, plain)
    block = p.program().global_block()
    fused = [o for o in block.ops if o.type == "fused_fc_elementwise_layernorm"]
    if case == "sequence fetched":
        assert dict(p.applied_passes())["slice_pushdown_pass"] == 0
        assert all(block.var(o.output("Out")[0]).shape == (-1, 6, 16) for o in fused)
    else:
        assert block.var(fused[-1].output("Out")[0]).shape == (-1, 1, 16)


@pytest.mark.parametrize("mean_fetched", [False, True])
def test_slice_pushdown_keeps_an_op_whose_other_output_is_read(tmp_path, mean_fetched):
    def build():
        x = fluid.data("x", [-1, 6, 16], "float32")
        bias = fluid.data("bias", [16], "float32")               # broadcast: read whole
        y = L.layer_norm(L.elementwise_add(L.relu(x), bias), begin_norm_axis=2)
        outs = [L.slice(y, [1], [2], [4])]
        if mean_fetched:
            ln = next(op for op in y.block.ops if op.type == "layer_norm")
            outs.append(y.block.var(ln.output("Mean")[0]))
        return outs
    d = _save(tmp_path, build, ["x", "bias"])
    rng = np.random.default_rng(9)
    inputs = [rng.standard_normal((3, 6, 16)).astype("float32"),
              rng.standard_normal(16).astype("float32")]
    _, plain = _run(d, inputs, ir_optim=False)
    p, got = _run(d, inputs)
    _close(got, plain)
    block = p.program().global_block()
    ops = [o for o in block.ops if o.type not in ("feed", "fetch")]
    if mean_fetched:            # the norm's Mean is every row's: the slice stays after it
        assert [o.type for o in ops] == ["relu", "elementwise_add", "layer_norm", "slice"]
    else:                       # rows 2:4 of x are cut first; the bias is read whole
        assert [o.type for o in ops] == ["slice", "relu", "elementwise_add", "layer_norm"]
        assert ops[0].input("Input") == ["x"] and block.var(ops[0].output("Out")[0]).shape \
            == (-1, 2, 16)
        assert ops[2].input("Y") == ["bias"]
        assert dict(p.applied_passes())["slice_pushdown_pass"] == 3


@pytest.mark.parametrize("lod_level", [0, 1])
def test_slice_pushdown_never_cuts_a_sequence(lod_level):
    # an input with a LoD: its rows are its sequences' (the slice stays where it is)
    from fluidlite.inference.passes import PassContext, slice_pushdown_pass
    main = fluid.Program()
    block = main.global_block()
    block.create_var(name="u", shape=[-1, 6, 8], dtype="float32", lod_level=lod_level)
    for n, shape in (("v", [-1, 6, 8]), ("w", [-1, 1, 8])):
        block.create_var(name=n, shape=shape, dtype="float32")
    block.append_op("relu", {"X": ["u"]}, {"Out": ["v"]})
    block.vars["v"].lod_level = 0
    block.append_op("slice", {"Input": ["v"]}, {"Out": ["w"]},
                    {"axes": [1], "starts": [0], "ends": [1]})
    count = slice_pushdown_pass(PassContext(main, None, None, {"u", "w"}))
    assert count == 1 - lod_level
    assert [o.type for o in block.ops] == (["slice", "relu"] if count else ["relu", "slice"])


# -- conv2d_fusion_layout_transfer_pass ----------------------------------------------------------
def _separable_net(fetch_inner=False, outside_residual=False, depthwise=True,
                   grouped_reader=False):
    """stem conv (3x3 / 2) -> depthwise 3x3 -> 1x1 -> residual 1x1 block -> pool -> fc."""
    x = fluid.data("x", [-1, 3, 17, 17], "float32")

    def cbn(h, f, k, stride=1, groups=1, act="relu6"):
        h = L.conv2d(h, f, k, stride, (k - 1) // 2, groups=groups, bias_attr=False,
                     use_cudnn=False)
        h = L.batch_norm(h, is_test=True)
        return L.relu6(h) if act == "relu6" else h
    h = cbn(x, 16, 3, 2)
    inner = cbn(h, 16, 3, groups=16 if depthwise else 1)
    h = cbn(inner, 24, 1, act=None)
    e = cbn(h, 48, 1)
    e = cbn(e, 48, 3, groups=48 if depthwise else 1)
    side = L.scale(h, 0.5) if outside_residual else h
    h = L.elementwise_add(side, cbn(e, 24, 1, act=None))
    if grouped_reader:          # a grouped convolution (NCHW kernels) reads the group's sum
        h = cbn(h, 24, 3, groups=2)
    h = L.reshape(L.pool2d(h, pool_type="avg", global_pooling=True), [0, -1])
    out = L.fc(h, 5)
    return [out, inner] if fetch_inner else [out]


def _separable_run(tmp_path, seed, batch=2, delete=("depthwise_separable_fuse_pass",), **kw):
    """(predictor, its outputs) of ``_separable_net(**kw)``, the outputs checked against the
    unoptimised program's (by default without ``depthwise_separable_fuse_pass``: the layout
    transfer's own result)."""
    d = _save(tmp_path, lambda: _separable_net(**kw), ["x"])
    x = np.random.default_rng(seed).standard_normal((batch, 3, 17, 17)).astype("float32")
    p, fused = _run(d, [x], delete=delete)
    _close(fused, _run(d, [x], ir_optim=False)[1])
    return p, fused


def _nhwc_ops(p):
    return [op for op in p.program().global_block().ops if op.type == "conv2d_fusion"
            and op.attr("data_format") == "NHWC"]


@pytest.mark.parametrize("batch", [1, 3])
def test_layout_transfer_pass_runs_a_separable_stack_channels_last(tmp_path, batch):
    d = _save(tmp_path, _separable_net, ["x"])
    x = np.random.default_rng(16).standard_normal((batch, 3, 17, 17)).astype("float32")
    _, plain = _run(d, [x], ir_optim=False)
    p, fused = _run(d, [x], delete=["depthwise_separable_fuse_pass"])
    _close(fused, plain)
    assert ("conv2d_fusion_layout_transfer_pass", 6) in p.applied_passes()
    nhwc = _nhwc_ops(p)
    assert len(nhwc) == 6 and all(op.input("FilterLast") for op in nhwc)
    assert not any(op.input("FilterBand") for op in nhwc)
    # transposes at the group's edges only: the image in, the block's sum out to the pool
    t = [op for op in p.program().global_block().ops if op.type == "transpose2"]
    assert [op.attr("axis") for op in t] == [[0, 2, 3, 1], [0, 3, 1, 2]]
    assert t[0].input("X") == ["x"]
    p_off, off = _run(d, [x], delete=["conv2d_fusion_layout_transfer_pass"])
    _close(off, plain)
    assert not _nhwc_ops(p_off) and "transpose2" not in _types(p_off)
    assert any(op.input("FilterBand") for op in p_off.program().global_block().ops
               if op.type == "conv2d_fusion")


def test_layout_transfer_pass_keeps_a_fetched_result_nchw(tmp_path):
    p, fused = _separable_run(tmp_path, 17, fetch_inner=True)
    assert fused[1].shape == (2, 16, 9, 9)
    assert len(_nhwc_ops(p)) == 6
    back = [op for op in p.program().global_block().ops if op.type == "transpose2"
            and op.attr("axis") == [0, 3, 1, 2]]
    assert len(back) == 2       # the fetched depthwise result (still read in NHWC) and the sum


def test_layout_transfer_pass_transposes_a_residual_made_outside(tmp_path):
    p, _ = _separable_run(tmp_path, 18, outside_residual=True)
    ops = p.program().global_block().ops
    last = [op for op in ops if op.type == "conv2d_fusion" and op.input("ResidualData")][0]
    assert last.attr("data_format") == "NHWC"
    made = [op for op in ops if op.type == "transpose2"
            and op.output("Out") == last.input("ResidualData")]
    assert len(made) == 1 and made[0].attr("axis") == [0, 2, 3, 1]
    assert made[0].idx < last.idx and ops[made[0].idx - 1].type == "scale"
    # the 1x1 output the scale reads goes back to NCHW for it, and stays NHWC in the group
    h = [op for op in ops if op.type == "scale"][0].input("X")[0]
    back = [op for op in ops if h in op.output_arg_names]
    assert [op.type for op in back] == ["transpose2"] and back[0].attr("axis") == [0, 3, 1, 2]
    assert any(back[0].input("X")[0] in op.input("Input") for op in _nhwc_ops(p))


def test_layout_transfer_pass_leaves_a_stack_without_depthwise_layers(tmp_path):
    p, _ = _separable_run(tmp_path, 19, batch=1, depthwise=False)
    assert ("conv2d_fusion_layout_transfer_pass", 0) in p.applied_passes()
    assert not _nhwc_ops(p) and "transpose2" not in _types(p)


def test_layout_transfer_pass_hands_a_grouped_reader_nchw(tmp_path):
    p, _ = _separable_run(tmp_path, 20, grouped_reader=True)
    ops = p.program().global_block().ops
    grouped = [op for op in ops if op.type == "conv2d_fusion" and op.attr("groups") == 2][0]
    assert grouped.attr("data_format") == "NCHW"
    src = [op for op in ops if grouped.input("Input")[0] in op.output_arg_names]
    assert [op.type for op in src] == ["transpose2"] and src[0].attr("axis") == [0, 3, 1, 2]


@pytest.mark.parametrize("w_shape, groups, strides, want", [
    ((4, 1, 3, 3), 4, [1, 1], (3, 3, 5 * 4)),      # depthwise, tiled along the 5-wide row
    ((4, 1, 3, 3), 4, [2, 2], (3, 3, 4)),          # strided: the taps alone
    ((6, 4, 1, 1), 1, [1, 1], (4, 6))])            # 1x1: W^T
def test_channels_last_filter_op_runs_in_a_program(w_shape, groups, strides, want):
    w = np.random.default_rng(21).standard_normal(w_shape).astype("float32")
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        v = fluid.data("w", list(w_shape), "float32")
        out = main.global_block().create_var(name="laid", dtype="float32")
        main.global_block().append_op(
            "channels_last_filter", {"Filter": v}, {"Out": out},
            {"input_shape": [-1, 5, 5, 4], "strides": strides,
             "paddings": [1, 1] if w_shape[2] == 3 else [0, 0], "groups": groups})
    (got,) = fluid.Executor(fluid.CPUPlace()).run(main, feed={"w": w}, fetch_list=[out])
    assert got.dtype == np.float32 and got.shape == want
    if groups == 1:
        np.testing.assert_array_equal(got, w[:, :, 0, 0].T)
    else:                       # tap (i, j) of every output column: the channels' weights
        taps = got.reshape(3, 3, -1, 4)
        np.testing.assert_array_equal(taps, np.broadcast_to(
            w[:, 0].transpose(1, 2, 0)[:, :, None], taps.shape))


# -- depthwise_separable_fuse_pass --------------------------------------------------------------
def _blocks(p):
    return [op for op in p.program().global_block().ops
            if op.type == "depthwise_separable_fusion"]


@pytest.mark.parametrize("batch", [1, 3])
def test_depthwise_separable_fuse_pass(tmp_path, batch):
    p, _ = _separable_run(tmp_path, 22, batch=batch, delete=())
    assert ("depthwise_separable_fuse_pass", 2) in p.applied_passes()
    first, second = _blocks(p)
    # after the 3x3 stem: depthwise -> 1x1; then 1x1 -> depthwise -> 1x1 + the first's output
    assert not first.input("ExpandFilter") and not first.input("ResidualData")
    assert second.input("ExpandFilter") and second.input("ExpandFilterLast")
    assert second.input("ResidualData") == first.output("Output")
    assert (second.attr("expand_activation"), second.attr("depthwise_activation"),
            second.attr("activation")) == ("relu6", "relu6", "identity")
    assert all(op.input("DepthwiseFilterLast") and op.input("ProjectFilterLast")
               for op in (first, second))
    assert len(_nhwc_ops(p)) == 1                               # the stem
    assert [op.attr("axis") for op in p.program().global_block().ops
            if op.type == "transpose2"] == [[0, 2, 3, 1], [0, 3, 1, 2]]


def test_depthwise_separable_fuse_pass_keeps_a_fetched_depthwise_result(tmp_path):
    p, fused = _separable_run(tmp_path, 23, fetch_inner=True, delete=())
    assert fused[1].shape == (2, 16, 9, 9)
    (block,) = _blocks(p)
    assert block.input("ExpandFilter")          # the second block; the first's depthwise
    assert len(_nhwc_ops(p)) == 3               # result is fetched: its layers stay


def test_depthwise_separable_fuse_pass_leaves_strided_1x1_layers(tmp_path):
    d = _save(tmp_path, _mobile_block, ["x"])
    x = np.random.default_rng(24).standard_normal((2, 8, 9, 9)).astype("float32")
    p, fused = _run(d, [x])
    _close(fused, _run(d, [x], ir_optim=False)[1])
    (block,) = _blocks(p)                       # the stride-1 branch only
    assert block.attr("strides") == [1, 1] and not block.input("ExpandFilter")
    assert _types(p).count("conv2d_fusion") == 6


def _expand_read_twice():
    x = fluid.data("x", [-1, 4, 9, 9], "float32")

    def cbn(h, f, k, groups=1, act="relu6"):
        h = L.conv2d(h, f, k, 1, (k - 1) // 2, groups=groups, bias_attr=False,
                     use_cudnn=False)
        return L.batch_norm(h, act=act, is_test=True)
    e = cbn(x, 8, 1)
    out = cbn(cbn(e, 8, 3, groups=8), 5, 1, act=None)
    return [out, L.reduce_mean(e)]


def test_depthwise_separable_fuse_pass_keeps_an_expansion_read_elsewhere(tmp_path):
    d = _save(tmp_path, _expand_read_twice, ["x"])
    x = np.random.default_rng(25).standard_normal((2, 4, 9, 9)).astype("float32")
    p, fused = _run(d, [x])
    _close(fused, _run(d, [x], ir_optim=False)[1])
    (block,) = _blocks(p)
    (expand,) = _nhwc_ops(p)
    assert not block.input("ExpandFilter") and block.input("Input") == expand.output("Output")
    p_off, off = _run(d, [x], delete=["depthwise_separable_fuse_pass"])
    _close(off, fused)
    assert not _blocks(p_off) and len(_nhwc_ops(p_off)) == 3


def test_the_predictor_sizes_a_run_by_the_model_as_loaded(tmp_path):
    """The expanded map inside a fused block still sizes the run (``_blas_run``): the widest
    variable is the loaded program's, 48 channels of 9x9, whichever passes ran."""
    p, _ = _separable_run(tmp_path, 26, batch=1, delete=())
    assert len(_blocks(p)) == 2 and p._shared.widest == 48 * 9 * 9


def _signed_block(case):
    """x [4, 9, 9] -> 1x1 (bias) -> depthwise 3x3 (bias) -> 1x1 (bias), with what ``case``
    adds (weights signed: every bias and activation changes the result)."""
    x = fluid.data("x", [-1, 4, 9, 9], "float32")

    def conv(h, f, k=1, stride=1, groups=1, act=None):
        return L.conv2d(h, f, k, stride, (k - 1) // 2, groups=groups, act=act,
                        use_cudnn=False)
    e = conv(x, 8, act="relu")
    if case == "expand residual":           # 1x1 + a shortcut: the 1x1 is no expansion
        e = L.relu(L.elementwise_add(conv(x, 8), conv(x, 8)))
    d = conv(e, 8, 3, groups=8, act="relu6")
    if case == "depthwise residual":        # the depthwise layer adds the shortcut itself
        d = L.relu6(L.elementwise_add(conv(e, 8, 3, groups=8), e))
    if case == "project reads its input twice":
        return [L.relu(L.elementwise_add(conv(d, 8), d))]
    return [conv(d, 5, stride=2 if case == "strided project" else 1, act="relu")]


@pytest.mark.parametrize("case, fused, expand", [
    ("plain", 1, True), ("expand residual", 1, False), ("depthwise residual", 0, False),
    ("project reads its input twice", 0, False), ("strided project", 0, False)])
def test_which_separable_chains_are_fused(tmp_path, case, fused, expand):
    d = _save(tmp_path, lambda: _signed_block(case), ["x"], signed=True)
    x = np.random.default_rng(27).standard_normal((2, 4, 9, 9)).astype("float32")
    p, got = _run(d, [x])
    plain = _run(d, [x], ir_optim=False)[1]
    _close(got, plain)
    assert float(np.max(got[0])) > 0 and float(np.min(got[0])) == 0     # relu cut something
    blocks = _blocks(p)
    assert len(blocks) == fused
    if fused:
        (b,) = blocks
        assert bool(b.input("ExpandFilter")) == expand and b.attr("activation") == "relu"
        assert b.input("ProjectBias") and b.input("DepthwiseBias")
        assert bool(b.input("ExpandBias")) == expand


# -- conv_act_affine_fuse_pass ------------------------------------------------------------------
def _lcnet_net(variant=""):
    """PP-LCNetV3's layers (PaddleOCR v4): conv + BN + hard_swish, then a learnable affine
    ``a * y + c`` of one-element parameters, in a stem and two depthwise-separable blocks
    whose depthwise layers are padded (so the affine before them folds into no filter);
    ``variant`` builds the near misses the pass must leave alone."""
    x = fluid.data("x", [-1, 3, 17, 17], "float32")
    count = [0]

    def affine(h):
        count[0] += 1
        a = L.create_parameter([h.shape[1]] if variant == "per_channel" else [1], "float32")
        c = L.create_parameter([1], "float32")
        if variant == "run_time_scalar":
            a = L.fill_constant([1], "float32", -1.25)
        h = L.elementwise_mul(h, a, axis=1) if variant == "per_channel" else \
            L.elementwise_mul(a, h)
        if variant == "mul_only":
            return h
        return L.elementwise_sub(h, c) if variant == "sub" else L.elementwise_add(h, c)

    def cbn(h, f, k, stride=1, groups=1):
        h = L.conv2d(h, f, k, stride, (k - 1) // 2, groups=groups, bias_attr=False,
                     use_cudnn=False)
        return L.hard_swish(L.batch_norm(h, is_test=True))
    h = cbn(x, 16, 3, 2)
    extra = [L.reduce_mean(h)] if variant == "second_reader" else []
    h = affine(h)
    for f in (16, 24):
        h = affine(cbn(affine(cbn(h, h.shape[1], 3, groups=h.shape[1])), f, 1))
    return [L.fc(L.reshape(L.pool2d(h, pool_type="avg", global_pooling=True), [0, -1]), 5)] \
        + extra


def _affine_slots(op):
    return bool(op.input("ActScale")) + bool(op.input("ActShift"))


def test_conv_act_affine_fuse_pass_folds_pp_lcnet_affines(tmp_path):
    d = _save(tmp_path, _lcnet_net, ["x"])
    x = np.random.default_rng(28).standard_normal((2, 3, 17, 17)).astype("float32")
    p, got = _run(d, [x])
    _close(got, _run(d, [x], ir_optim=False)[1])
    applied = dict(p.applied_passes())
    # the two affines between a depthwise layer and its 1x1 go into the 1x1's filter; the
    # stem's and the blocks' ends into their convolutions' epilogues
    assert applied["affine_conv_fuse_pass"] == 2 and applied["conv_act_affine_fuse_pass"] == 3
    assert not [t for t in _types(p) if t.startswith("elementwise")]
    blocks = _blocks(p)
    assert len(blocks) == 2 and all(_affine_slots(b) == 2 for b in blocks)
    assert all(b.attr("activation") == "hard_swish" for b in blocks)
    (stem,) = [op for op in p.program().global_block().ops if op.type == "conv2d_fusion"]
    assert _affine_slots(stem) == 2
    # nothing breaks the channels-last run now: transposes only at its two edges
    assert _types(p).count("transpose2") == 2
    p.program().lint()


def test_conv_act_affine_fuse_pass_keeps_the_bits(tmp_path):
    """Without the layout passes (which change the kernels, so the rounding) the affine in
    the epilogue gives the elementwise ops' bits: one product and one sum, rounded alike."""
    d = _save(tmp_path, _lcnet_net, ["x"])
    x = np.random.default_rng(29).standard_normal((3, 3, 17, 17)).astype("float32")
    layout = ["conv2d_fusion_layout_transfer_pass", "depthwise_separable_fuse_pass"]
    p, got = _run(d, [x], delete=layout)
    _, want = _run(d, [x], delete=layout + ["conv_act_affine_fuse_pass"])
    assert dict(p.applied_passes())["conv_act_affine_fuse_pass"] == 3
    np.testing.assert_array_equal(got[0], want[0])


@pytest.mark.parametrize("variant", ["per_channel", "run_time_scalar", "second_reader",
                                     "mul_only", "sub"])
def test_conv_act_affine_fuse_pass_leaves_near_misses(tmp_path, variant):
    d = _save(tmp_path, lambda: _lcnet_net(variant), ["x"])
    x = np.random.default_rng(30).standard_normal((2, 3, 17, 17)).astype("float32")
    p, got = _run(d, [x])
    _close(got, _run(d, [x], ir_optim=False)[1])
    folded = dict(p.applied_passes())["conv_act_affine_fuse_pass"]
    # the stem's output is read twice: the two blocks' ends still fold
    assert folded == (2 if variant == "second_reader" else 0)
    convs = [op for op in p.program().global_block().ops
             if op.type in ("conv2d_fusion", "depthwise_separable_fusion")]
    assert sum(_affine_slots(op) for op in convs) == 2 * folded


def test_separable_fusion_takes_no_depthwise_affine(tmp_path):
    """With the affine between a depthwise layer and its 1x1 left to this pass (not folded
    into the 1x1's filter), the depthwise layer carries it and no block is fused: the fused
    op applies an affine to its last layer only."""
    d = _save(tmp_path, _lcnet_net, ["x"])
    x = np.random.default_rng(31).standard_normal((2, 3, 17, 17)).astype("float32")
    p, got = _run(d, [x], delete=["affine_conv_fuse_pass"])
    _close(got, _run(d, [x], ir_optim=False)[1])
    assert dict(p.applied_passes())["conv_act_affine_fuse_pass"] == 5
    assert not _blocks(p)
    depthwise = [op for op in p.program().global_block().ops
                 if op.type == "conv2d_fusion" and op.attr("groups") > 1]
    assert len(depthwise) == 2 and all(_affine_slots(op) == 2 for op in depthwise)


@pytest.mark.parametrize("slot, spec, what", [
    ("ActScale", VarSpec((2,), VarType.FP32), "FP32 [2]"),
    ("ActShift", VarSpec((1,), VarType.FP64), "FP64 [1]")])
def test_conv2d_fusion_refuses_a_bad_affine(slot, spec, what):
    fusion = get_op_def("conv2d_fusion")
    x, w = VarSpec((2, 4, 8, 8), VarType.FP32), VarSpec((6, 4, 3, 3), VarType.FP32)
    with pytest.raises(ValueError, match=rf"conv2d_fusion: {slot} must be a one-element "):
        fusion.infer(x, w, **{slot: spec}, paddings=[1, 1])
    sep = get_op_def("depthwise_separable_fusion")
    with pytest.raises(ValueError, match=rf"depthwise_separable_fusion: {slot} must be"):
        sep.infer(VarSpec((2, 8, 8, 4), VarType.FP32), VarSpec((4, 1, 3, 3), VarType.FP32),
                  VarSpec((6, 4, 1, 1), VarType.FP32), **{slot: spec}, paddings=[1, 1])


@pytest.mark.parametrize("data_format", ["NCHW", "NHWC"])
@pytest.mark.parametrize("slots", [("ActScale",), ("ActShift",), ("ActScale", "ActShift")])
def test_conv2d_fusion_applies_the_affine_after_the_activation(data_format, slots):
    rng = np.random.default_rng(32)
    x = rng.standard_normal((2, 4, 8, 8)).astype("float32")
    w = rng.standard_normal((6, 4, 1, 1)).astype("float32")
    b = rng.standard_normal(6).astype("float32")
    if data_format == "NHWC":
        x = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    aff = {"ActScale": np.array([-1.75], "float32"), "ActShift": np.array([0.375], "float32")}
    fusion = get_op_def("conv2d_fusion")
    kw = dict(data_format=data_format, activation="hard_swish")
    plain = fusion.forward(x, w, b, **kw)["Output"]
    got = fusion.forward(x, w, b, **{s: aff[s] for s in slots}, **kw)["Output"]
    want = plain.copy()
    if "ActScale" in slots:
        want = aff["ActScale"] * want
    if "ActShift" in slots:
        want = want + aff["ActShift"]
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, want)


def _affine_order_net(variant):
    """Nets where a pass run after ``conv_act_affine_fuse_pass`` (a user's pass order) meets a
    ``conv2d_fusion`` that carries an affine already and must leave it: "two_affines" (conv +
    BN, then two affines), "residual" (conv + BN, an affine, then the input added back and relu),
    "expand" (a 1x1 expansion whose affine goes into its epilogue, then a depthwise and a 1x1
    layer the separable fusion may take without it)."""
    x = fluid.data("x", [-1, 8, 9, 9], "float32")

    def affine(h):
        a, c = L.create_parameter([1], "float32"), L.create_parameter([1], "float32")
        return L.elementwise_add(L.elementwise_mul(a, h), c)

    def cbn(h, f, k, groups=1):
        h = L.conv2d(h, f, k, 1, (k - 1) // 2, groups=groups, bias_attr=False,
                     use_cudnn=False)
        return L.batch_norm(h, is_test=True)
    if variant == "two_affines":
        return [affine(affine(cbn(x, 8, 3)))]
    if variant == "residual":
        return [L.relu(L.elementwise_add(affine(cbn(x, 8, 3)), x))]
    e = affine(L.hard_swish(cbn(x, 16, 1)))
    return [L.relu6(cbn(L.hard_swish(cbn(e, 16, 3, groups=16)), 8, 1))]


@pytest.mark.parametrize("variant, moved", [
    ("two_affines", "conv_affine_act_fuse_pass"),
    ("residual", "conv_elementwise_add2_act_fuse_pass"),
    ("expand", None)])
def test_passes_after_the_affine_fold_leave_its_convolution(tmp_path, variant, moved):
    d = _save(tmp_path, lambda: _affine_order_net(variant), ["x"])
    x = np.random.default_rng(33).standard_normal((2, 8, 9, 9)).astype("float32")
    c = AnalysisConfig(d)
    if moved is not None:       # after the affine fold, not before it
        c.delete_pass(moved)
        c.pass_builder().append_pass(moved)
    if variant == "residual":   # (else the affine goes into the filter first; and the
        c.delete_pass("conv_affine_act_fuse_pass")       # add + relu left must stay)
        c.delete_pass("fuse_elewise_add_act_pass")
    p = create_paddle_predictor(c)
    got = [t.as_ndarray() for t in p.run([PaddleTensor(x)])]
    _close(got, _run(d, [x], ir_optim=False)[1])
    applied = dict(p.applied_passes())
    assert applied["conv_act_affine_fuse_pass"] == 1
    if variant == "two_affines":
        assert applied["conv_affine_act_fuse_pass"] == 0
        assert _types(p).count("elementwise_mul") == 1
    elif variant == "residual":
        assert applied["conv_elementwise_add2_act_fuse_pass"] == 0
        assert "relu" in _types(p)
    else:
        (block,) = _blocks(p)
        assert not block.input("ExpandFilter")
        expand = [op for op in p.program().global_block().ops if op.type == "conv2d_fusion"]
        assert len(expand) == 1 and _affine_slots(expand[0]) == 2


@pytest.mark.parametrize("protected, folded", [((), 1), (("y",), 0), (("t",), 0)])
def test_conv_act_affine_fuse_pass_keeps_a_protected_map(protected, folded):
    """A fetched (protected) convolution output or product keeps its producer: with no fetch
    op reading it (``switch_use_feed_fetch_ops(False)``) it has the affine as its only
    reader."""
    from fluidlite.inference.passes import PassContext, conv_act_affine_fuse_pass
    main = fluid.Program()
    block = main.global_block()
    for n, shape, persistable in (("x", [-1, 4, 6, 6], False), ("w", [4, 4, 1, 1], True),
                                  ("a", [1], True), ("c", [1], True), ("y", [-1, 4, 6, 6], False),
                                  ("t", [-1, 4, 6, 6], False), ("z", [-1, 4, 6, 6], False)):
        block.create_var(name=n, shape=shape, dtype="float32", persistable=persistable)
    block.append_op("conv2d_fusion", {"Input": ["x"], "Filter": ["w"]}, {"Output": ["y"]},
                    {"activation": "relu", "strides": [1, 1], "paddings": [0, 0],
                     "dilations": [1, 1], "groups": 1, "data_format": "NCHW"})
    block.append_op("elementwise_mul", {"X": ["a"], "Y": ["y"]}, {"Out": ["t"]})
    block.append_op("elementwise_add", {"X": ["t"], "Y": ["c"]}, {"Out": ["z"]})
    assert conv_act_affine_fuse_pass(PassContext(main, None, None,
                                                 {"x", "z", *protected})) == folded
    types = [o.type for o in block.ops]
    assert types == (["conv2d_fusion"] if folded else
                     ["conv2d_fusion", "elementwise_mul", "elementwise_add"])
    if folded:
        (conv,) = block.ops
        assert conv.input("ActScale") == ["a"] and conv.input("ActShift") == ["c"]
        assert conv.output("Output") == ["z"]


# -- fuse_elewise_add_act_pass ------------------------------------------------------------------
def _transpose_head_net(variant=""):
    """PaddleOCR's detector head: conv2d_transpose, a bias add, an activation; ``variant``
    builds the near misses."""
    x = fluid.data("x", [-1, 6, 5, 5], "float32")
    h = L.conv2d_transpose(x, 4, filter_size=2, stride=2, bias_attr=False)
    b = L.create_parameter([4], "float32")
    s = L.elementwise_add(h, b, axis=1)
    act = {"tanh": L.tanh, "relu6": L.relu6, "sigmoid": L.sigmoid}.get(variant, L.relu)
    out = [act(s)]
    if variant == "second_reader":
        out.append(L.reduce_mean(s))
    return out


@pytest.mark.parametrize("variant, fused", [("", 1), ("tanh", 1), ("sigmoid", 1),
                                            ("relu6", 0), ("second_reader", 0)])
def test_fuse_elewise_add_act_pass(tmp_path, variant, fused):
    d = _save(tmp_path, lambda: _transpose_head_net(variant), ["x"], signed=True)
    x = np.random.default_rng(34).standard_normal((2, 6, 5, 5)).astype("float32")
    p, got = _run(d, [x])
    _, want = _run(d, [x], delete=["fuse_elewise_add_act_pass"])
    for a, b in zip(got, want):             # the same sum, then the same activation
        np.testing.assert_array_equal(a, b)
    _close(got, _run(d, [x], ir_optim=False)[1])
    assert float(np.min(got[0])) < float(np.max(got[0]))
    assert dict(p.applied_passes())["fuse_elewise_add_act_pass"] == fused
    types = _types(p)
    assert types.count("fused_elemwise_activation") == fused
    if fused:
        (op,) = [o for o in p.program().global_block().ops
                 if o.type == "fused_elemwise_activation"]
        assert op.attr("functor_list") == [variant or "relu", "elementwise_add"]
        assert op.attr("axis") == 1 and "elementwise_add" not in types
        # no intermediate kept: the activation runs in place on the sum
        assert op.attr("save_intermediate_out") is False and not op.output("IntermediateOut")


def test_fuse_elewise_add_act_pass_leaves_fc_its_bias_and_relu(tmp_path):
    d = _save(tmp_path, lambda: [L.fc(fluid.data("x", [-1, 6], "float32"), 5, act="relu")],
              ["x"], signed=True)
    x = np.random.default_rng(35).standard_normal((3, 6)).astype("float32")
    p, got = _run(d, [x])
    _close(got, _run(d, [x], ir_optim=False)[1])
    assert dict(p.applied_passes())["fuse_elewise_add_act_pass"] == 0
    assert _types(p).count("fc") == 1
