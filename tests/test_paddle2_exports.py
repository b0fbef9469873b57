"""Models exported by real PaddlePaddle 2.6 (``paddle.jit.save``) load in fluidlite and give
Paddle's numbers; the ops and attributes those exports use that fluid 1.8 lacked.

* ``einsum`` (``paddle.einsum``): values against ``np.einsum`` in float64, gradients against
  central differences (random upstream weights), Paddle's own rules (labels of one size, the
  implicit output) and its errors;
* ``roi_align(aligned=True)`` and the ROI ops' ``RoisNum``; ``roll``'s ``ShiftsTensor``;
  ``unique`` sorted (``is_sorted``, ``axis``, ``Indices`` / ``Counts``);
* the reader: Paddle 2.x's renamed attributes (roll / flip ``axis``, trace ``axis1`` /
  ``axis2``) and the attributes 2.x added whose non-neutral values fluidlite refuses instead
  of dropping;
* end to end (``FLUIDLITE_PADDLE_PYTHON``, as CI sets it): Paddle 2.6 builds ``paddle.vision``
  classifiers and ``paddle.nn`` networks (RNNs, a Transformer encoder, normalisation,
  interpolation, pixel shuffle, a tensor-op zoo, ROI detection ops) with seeded weights, saves
  them with ``paddle.jit.save`` and records its outputs; fluidlite loads the ``.pdmodel`` /
  ``.pdiparams`` pair and must agree within 1e-5 of each output's scale.
"""
import os
import subprocess
import textwrap

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core.registry import VarSpec, get_op_def
from fluidlite.testing import OpTest

EQUATIONS = [("ij,jk->ik", [(2, 3), (3, 4)]), ("ii->i", [(3, 3)]), ("ii", [(3, 3)]),
             ("...j,jk", [(2, 3, 4), (4, 5)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
             ("ij->", [(2, 3)]), ("...j,...j->...j", [(2, 3, 4), (1, 4)]),
             ("iij,j->ij", [(3, 3, 2), (2,)]), ("ab,cd->abcd", [(2, 3), (4, 1)]),
             ("ba", [(2, 3)]), ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
             ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 6)]), ("i,i->", [(4,), (4,)])]


@pytest.mark.parametrize("equation,shapes", EQUATIONS)
def test_einsum_values_and_gradients(equation, shapes):
    rng = np.random.default_rng(len(equation))
    xs = [rng.uniform(-1, 1, s) for s in shapes]

    class T(OpTest):
        op_type = "einsum"
        inputs = {"Operands": [(f"x{k}", x) for k, x in enumerate(xs)]}
        attrs = {"equation": equation}
        outputs = {"Out": np.asarray(np.einsum(equation, *xs))}
    t = T()
    t.check_output(atol=1e-12, rtol=1e-12)
    # (a 0-D result, Paddle 2.x's full reduction, is checked through its mean)
    t.check_grad([f"x{k}" for k in range(len(xs))], "Out",
                 weighted=np.ndim(T.outputs["Out"]) > 0)


def test_einsum_shape_inference_and_dtype():
    op = get_op_def("einsum")
    f32 = VarSpec((-1, 3, 4), "float32")
    out = op.infer([f32, VarSpec((4, 5), "float32")], equation="...j,jk")["Out"]
    assert out == VarSpec((-1, 3, 5), "float32")
    assert op.infer([VarSpec((3, 3), "float64")], equation="ii")["Out"] == \
        VarSpec((), "float64")
    got = op.forward([np.ones((2, 3), np.float32), np.ones((3, 2), np.float32)],
                     equation="ij,jk->ik")["Out"]
    assert got.dtype == np.float32 and got.tolist() == [[3.0, 3.0], [3.0, 3.0]]


@pytest.mark.parametrize("equation,shapes,message", [
    ("ij,jk->ik", [(2, 3)], "names 2 operand"),
    ("ijk->i", [(2, 3)], "has rank 2"),
    ("ij,jk->ik", [(2, 3), (2, 4)], "label 'j' .* has size 3 in one operand and 2"),
    ("ij,ij->ij", [(1, 3), (2, 3)], "label 'i' .* size 1 in one operand and 2"),
    ("i1->i", [(2, 3)], "invalid subscripts 'i1'"),
    ("ij->iz", [(2, 3)], "must name each label once, and only labels of the operands"),
])
def test_einsum_errors_name_the_equation(equation, shapes, message):
    op = get_op_def("einsum")
    with pytest.raises(ValueError, match=message):
        op.infer([VarSpec(s, "float32") for s in shapes], equation=equation)
    with pytest.raises(ValueError, match="all operands must have one dtype"):
        op.infer([VarSpec((2,), "float32"), VarSpec((2,), "float64")], equation="i,i->i")


def test_roi_align_aligned_keeps_sub_pixel_rois_and_counts_rois_per_image():
    rng = np.random.default_rng(5)
    x = rng.uniform(-1, 1, (2, 2, 6, 6))
    rois = np.array([[0.5, 1.0, 5.0, 4.5], [2.0, 2.0, 2.2, 2.1], [1.0, 0.0, 5.5, 5.0]])

    class T(OpTest):
        op_type = "roi_align"
        inputs = {"X": x, "ROIs": rois, "RoisNum": np.array([1, 2], np.int32)}
        attrs = dict(spatial_scale=1.0, pooled_height=2, pooled_width=2, sampling_ratio=2,
                     aligned=True)
    op = get_op_def("roi_align")
    out = op.forward(x, rois, None, np.array([1, 2], np.int32), **T.attrs)["Out"]
    # ROI 1 (0.2 x 0.1 pixels) samples X[1] around (2.1 - 0.5, 2.05 - 0.5): bilinear by hand
    yy, xx = 2.0 - 0.5 + (np.array([0.25, 0.75]) * 0.1 / 2)[:, None], \
        2.0 - 0.5 + (np.array([0.25, 0.75]) * 0.2 / 2)[None, :]
    img = x[1, 0]
    y0, x0 = np.floor(yy).astype(int), np.floor(xx).astype(int)
    ly, lx = yy - y0, xx - x0
    ref = ((1 - ly) * (1 - lx) * img[y0, x0] + (1 - ly) * lx * img[y0, x0 + 1] +
           ly * (1 - lx) * img[y0 + 1, x0] + ly * lx * img[y0 + 1, x0 + 1]).mean()
    np.testing.assert_allclose(out[1, 0, 0, 0], ref, rtol=1e-12)
    T.outputs = {"Out": out}
    T().check_grad(["X"], "Out")            # Paddle 2.6's grad kernel clamps ROI 1 to 1 pixel
    with pytest.raises(ValueError, match="RoisNum must not be negative"):
        op.forward(x, rois, None, np.array([4, -1], np.int32), **T.attrs)


def test_roll_shifts_tensor_and_its_gradient():
    x = np.arange(12.0).reshape(3, 4)

    class T(OpTest):
        op_type = "roll"
        inputs = {"X": x, "ShiftsTensor": np.array([1, -1], np.int64)}
        attrs = {"shifts": [0, 0], "dims": [0, 1]}
        outputs = {"Out": np.roll(x, (1, -1), (0, 1))}
    T().check_output(atol=0, rtol=0)
    T().check_grad(["X"], "Out")
    with pytest.raises(ValueError, match="ShiftsTensor holds 1 shift"):
        get_op_def("roll").forward(x, np.array([1]), shifts=[0, 0], dims=[0, 1])


# -- the reader -------------------------------------------------------------------------------
def _read_one(build, op_type, **extra):
    """``build()``'s program written in Paddle's format, ``op_type``'s OpDesc given ``extra``
    attributes (name -> (proto attr type, field, value), or None: removed), read back."""
    from fluidlite.formats.paddle import program as pf
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()), fluid.unique_name.guard():
        build()
    desc = pf.program_to_desc(main)
    (od,) = [o for o in desc.blocks[0].ops if o.type == op_type]
    for name, spec in extra.items():
        for a in list(od.attrs):
            if a.name == name:
                od.attrs.remove(a)
        if spec is None:                  # an attribute Paddle 2.x does not write
            continue
        kind, field, value = spec
        a = od.attrs.add(name=name, type=kind)
        if isinstance(value, list):
            getattr(a, field).extend(value)
        else:
            setattr(a, field, value.encode() if isinstance(value, str) else value)
    return pf.program_from_bytes(desc.SerializeToString(), source="test")


def _attrs_of(prog, op_type):
    (op,) = [o for o in prog.global_block().ops if o.type == op_type]
    return op.attrs


def test_reader_maps_paddle2_roll_and_trace_attribute_names():
    L = fluid.layers
    prog = _read_one(lambda: L.roll(fluid.data("x", [2, 3], "float32"), [1], [0]), "roll",
                     axis=(11, "longs", [1]), dims=(11, "longs", []))
    assert list(_attrs_of(prog, "roll")["dims"]) == [1]
    prog = _read_one(lambda: fluid.layers.trace(fluid.data("x", [2, 3, 4], "float32")),
                     "trace", axis1=(0, "i", 1), axis2=(0, "i", 2), dim1=None, dim2=None)
    attrs = _attrs_of(prog, "trace")
    assert (attrs["dim1"], attrs["dim2"]) == (1, 2) and "axis1" not in attrs


def test_reader_refuses_paddle2_attributes_it_cannot_compute():
    L = fluid.layers

    soft = lambda: L.softplus(fluid.data("x", [2, 3], "float32"))     # noqa: E731
    prog = _read_one(soft, "softplus", beta=(1, "f", 1.0), threshold=(1, "f", 20.0))
    assert not {"beta", "threshold"} & set(_attrs_of(prog, "softplus"))
    with pytest.raises(Exception, match="softplus has the Paddle 2.x attribute\\(s\\) "
                                        "beta=2.0"):
        _read_one(soft, "softplus", beta=(1, "f", 2.0), threshold=(1, "f", 20.0))
    # grid_sampler's 2.x modes are read by meaning (values: tests/ops/test_paddle_oracle.py)
    prog = _read_one(lambda: L.grid_sampler(fluid.data("x", [1, 1, 3, 3], "float32"),
                                            fluid.data("g", [1, 2, 2, 2], "float32")),
                     "grid_sampler", mode=(2, "s", "nearest"), align_corners=(6, "b", False))
    attrs = _attrs_of(prog, "grid_sampler")
    assert attrs["mode"] == "nearest" and attrs["align_corners"] is False


# -- models saved by Paddle 2.6 ------------------------------------------------------------------
EXPORT = textwrap.dedent('''
    import os, sys, numpy as np, paddle
    import paddle.nn as nn, paddle.nn.functional as F
    import paddle.vision.models as M
    from paddle.vision.ops import roi_align, roi_pool
    out = sys.argv[1]

    class TextRNN(nn.Layer):
        def __init__(self, cell):
            super().__init__()
            self.emb = nn.Embedding(100, 16, padding_idx=0)
            self.rnn = cell(16, 12, num_layers=2, direction="bidirect")
            self.fc = nn.Linear(24, 5)
        def forward(self, ids):
            y, _ = self.rnn(self.emb(ids))
            return F.log_softmax(self.fc(y.mean(axis=1)), axis=-1)

    class Encoder(nn.Layer):
        def __init__(self):
            super().__init__()
            self.emb, self.pos = nn.Embedding(50, 32), nn.Embedding(16, 32)
            layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.1, activation="gelu",
                                               normalize_before=True)
            self.enc = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(32))
            self.out = nn.Linear(32, 3)
        def forward(self, ids):
            pos = paddle.arange(ids.shape[1]).unsqueeze(0)
            mask = (ids == 0).astype("float32").unsqueeze([1, 2]) * -1e4
            h = self.enc(self.emb(ids) + self.pos(pos), src_mask=mask)
            return F.softmax(self.out(h[:, 0]))

    class SegNet(nn.Layer):
        def __init__(self):
            super().__init__()
            self.c1, self.bn = nn.Conv2D(3, 8, 3, padding=1), nn.BatchNorm2D(8)
            self.c2 = nn.Conv2D(8, 16, 3, stride=2, padding=1, groups=2)
            self.gn, self.inorm = nn.GroupNorm(4, 16), nn.InstanceNorm2D(16)
            self.up = nn.Conv2DTranspose(16, 8, 4, stride=2, padding=1)
            self.pr, self.head = nn.PReLU(8), nn.Conv2D(16, 4, 1)
            self.ps, self.ap = nn.PixelShuffle(2), nn.AdaptiveAvgPool2D((3, 5))
        def forward(self, x):
            a = F.relu(self.bn(self.c1(x)))
            b = F.hardswish(self.gn(self.c2(a))) + F.mish(self.inorm(self.c2(a)))
            u = self.pr(self.up(b))
            u2 = F.interpolate(b, size=a.shape[2:], mode="bilinear", align_corners=False)[:, :8]
            y = F.interpolate(self.head(paddle.concat([a + u, u2], axis=1)), scale_factor=2,
                              mode="nearest")
            return F.sigmoid(y), self.ap(self.ps(y)), F.hardsigmoid(F.max_pool2d(y, 2, 2))

    class TensorOps(nn.Layer):
        def __init__(self):
            super().__init__()
            self.l = nn.Linear(8, 8)
        def forward(self, x):
            h = F.elu(self.l(x)) + F.selu(x) + F.softplus(x) + F.leaky_relu(x, 0.1) + F.silu(x)
            v, i = paddle.topk(h, 3, axis=-1)
            return (v, i.astype("float32"), paddle.argsort(h, axis=-1, descending=True),
                    paddle.cumsum(h, axis=1), paddle.gather(h, paddle.to_tensor([2, 0, 1]), axis=1),
                    paddle.where(h > 0, h, paddle.zeros_like(h)), F.normalize(h, axis=1),
                    paddle.roll(h, 1, axis=1) + paddle.flip(h, [1]),
                    paddle.einsum("ij,kj->ik", h, x), paddle.einsum("bi,bj->bij", h, x),
                    paddle.clip(h, -0.5, 0.5), F.one_hot(paddle.argmax(h, axis=1), 8),
                    h[:, 1:7:2], paddle.pow(paddle.abs(h) + 1, 1.5),
                    paddle.stack([h, x], 1), paddle.unbind(h, 1)[2],
                    paddle.trace(paddle.stack([h, x], 1), axis1=0, axis2=2),
                    *paddle.unique(paddle.round(h * 2), return_index=True,
                                   return_inverse=True, return_counts=True),
                    paddle.unique(paddle.round(x * 0.5), axis=0), *self.more(h, x))

        def more(self, h, x):
            y = h * 1.0
            y[:, 1:6:2] = x[:, :3] * 2.0          # set_value from a tensor
            y[0, -2:] = 0.25                      # set_value from values
            idx = paddle.argsort(x, axis=1)[:, :3]
            return (y, paddle.take_along_axis(h, idx, 1), paddle.cumprod(x, 1),
                    paddle.diagonal(paddle.stack([h, x], 0), 0, 1, 2),
                    paddle.repeat_interleave(x, 2, 1), paddle.tan(x), paddle.sinh(x),
                    paddle.log2(paddle.abs(x) + 1), paddle.expm1(x), F.celu(x, 0.5),
                    paddle.logit(F.sigmoid(x), 1e-3), paddle.lerp(h, x, F.sigmoid(x)),
                    paddle.atan2(h, x + 2), paddle.amax(h, axis=1), paddle.trunc(x * 3),
                    paddle.erfinv(F.tanh(x) * 0.9),
                    F.pixel_unshuffle(x.reshape([1, 2, 4, 4]), 2),
                    F.channel_shuffle(x.reshape([1, 4, 2, 4]), 2),
                    paddle.put_along_axis(h, idx, paddle.ones_like(idx).astype("float32") * 1.5,
                                          1),
                    paddle.index_add(h, paddle.to_tensor([1, 1]), 0, x[:2]))

    class Crf(nn.Layer):
        def __init__(self):
            super().__init__()
            self.emb, self.fc = nn.Embedding(50, 8), nn.Linear(8, 6)
            self.trans = self.create_parameter([6, 6])
        def forward(self, ids, lengths):
            return paddle.text.viterbi_decode(self.fc(self.emb(ids)), self.trans, lengths,
                                              include_bos_eos_tag=True)

    class Rois(nn.Layer):
        def __init__(self):
            super().__init__()
            self.c = nn.Conv2D(3, 8, 3, padding=1)
        def forward(self, x, boxes, num):
            f = self.c(x)
            # (psroi_pool crashes Paddle 2.6's jit-loaded program: tests/ops's oracle has it)
            return (roi_align(f, boxes, num, 3, spatial_scale=0.5, aligned=True),
                    roi_align(f, boxes, num, (2, 3), spatial_scale=0.5, aligned=False),
                    roi_pool(f, boxes, num, 2, spatial_scale=0.5))

    def ids(shape):
        x = np.random.RandomState(2).randint(1, 40, shape).astype("int64")
        x[0, -3:] = 0
        return x

    def img(*shape):
        return np.random.RandomState(2).uniform(-1, 1, shape).astype("float32")

    boxes = np.array([[1, 2, 12, 11], [4, 4, 9, 14], [0, 0, 15, 15]], "float32")
    cases = {
        "resnet18": (lambda: M.resnet18(num_classes=10), [img(2, 3, 64, 64)]),
        "mobilenet_v3_small": (lambda: M.mobilenet_v3_small(scale=0.5, num_classes=10),
                               [img(2, 3, 64, 64)]),
        "shufflenet_v2": (lambda: M.shufflenet_v2_x0_25(num_classes=10), [img(2, 3, 64, 64)]),
        "squeezenet1_1": (lambda: M.squeezenet1_1(num_classes=10), [img(2, 3, 64, 64)]),
        "inception_v3": (lambda: M.inception_v3(num_classes=10), [img(1, 3, 96, 96)]),
        "text_lstm": (lambda: TextRNN(nn.LSTM), [ids([3, 9])]),
        "text_gru": (lambda: TextRNN(nn.GRU), [ids([3, 9])]),
        "transformer_encoder": (Encoder, [ids([2, 12])]),
        "segnet": (SegNet, [img(2, 3, 16, 20)]),
        "tensor_ops": (TensorOps, [img(4, 8)]),
        "rois": (Rois, [img(2, 3, 16, 16), boxes, np.array([2, 1], "int32")]),
        "crf": (Crf, [ids([3, 7]), np.array([7, 4, 2], "int64")]),
    }
    for name, (make, xs) in cases.items():
        paddle.seed(1)
        m = make()
        m.eval()
        spec = [paddle.static.InputSpec([None] + list(a.shape[1:]), str(a.dtype), f"x{k}")
                for k, a in enumerate(xs)]
        path = os.path.join(out, name, "inference")
        paddle.jit.save(m, path, input_spec=spec)
        ys = paddle.jit.load(path)(*[paddle.to_tensor(a) for a in xs])
        ys = ys if isinstance(ys, (list, tuple)) else [ys]
        np.savez(os.path.join(out, name, "io.npz"), **{f"x{k}": a for k, a in enumerate(xs)},
                 **{f"y{k}": y.numpy() for k, y in enumerate(ys)})
''')


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    python = os.environ.get("FLUIDLITE_PADDLE_PYTHON")
    if not python:
        pytest.skip("FLUIDLITE_PADDLE_PYTHON is not set (an interpreter with paddlepaddle 2.6; "
                    ".ci/run makes one in /tmp/paddle-venv)")
    out = tmp_path_factory.mktemp("paddle2_exports")
    script = out / "export.py"
    script.write_text(EXPORT)
    proc = subprocess.run([python, str(script), str(out)], capture_output=True, text=True,
                          timeout=900, env=dict(os.environ, GLOG_minloglevel="2"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


MODELS = ["resnet18", "mobilenet_v3_small", "shufflenet_v2", "squeezenet1_1", "inception_v3",
          "text_lstm", "text_gru", "transformer_encoder", "segnet", "tensor_ops", "rois", "crf"]


@pytest.mark.parametrize("name", MODELS)
def test_paddle26_export_runs_as_in_paddle(exports, name):
    d = exports / name
    io = np.load(d / "io.npz")
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(fluid.Scope()):
        prog, feeds, fetches = fluid.io.load_inference_model(
            str(d), exe, model_filename="inference.pdmodel",
            params_filename="inference.pdiparams")
        outs = exe.run(prog, feed={f: io[f"x{k}"] for k, f in enumerate(feeds)},
                       fetch_list=fetches)
    _same(name, outs, io)
    # and through fluid's inference API with its optimisation passes (they rewrite ops whose
    # pruned outputs, such as XShape, the reader re-declares)
    from fluidlite.core import AnalysisConfig, create_paddle_predictor
    cfg = AnalysisConfig(str(d / "inference.pdmodel"), str(d / "inference.pdiparams"))
    cfg.switch_ir_optim(True)
    pred = create_paddle_predictor(cfg)
    for k, n in enumerate(pred.get_input_names()):
        pred.get_input_tensor(n).copy_from_cpu(io[f"x{k}"])
    pred.zero_copy_run()
    _same(name + " (predictor)", [pred.get_output_tensor(n).copy_to_cpu()
                                  for n in pred.get_output_names()], io)


def _same(name, outs, io):
    assert len(outs) == len([k for k in io.files if k.startswith("y")])
    for k, got in enumerate(outs):
        ref = io[f"y{k}"]
        assert got.shape == ref.shape, (k, got.shape, ref.shape)
        scale = max(float(np.abs(ref).max()), 1.0)
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5 * scale,
                                   err_msg=f"{name} output {k}")


def test_unique_sorted_as_paddle2():
    """paddle.unique's op (is_sorted): values Paddle 2.6 printed for this input."""
    u = get_op_def("unique")
    x = np.array([[2, 1, 2], [0, 1, 2]], "int64")
    r = u.forward(x, dtype=3, is_sorted=True, return_index=True, return_inverse=True,
                  return_counts=True)
    assert {k: v.tolist() for k, v in r.items()} == {
        "Out": [0, 1, 2], "Index": [2, 1, 2, 0, 1, 2], "Indices": [3, 1, 0], "Counts": [1, 2, 3]}
    r = u.forward(x, dtype=2, is_sorted=True, axis=[1])
    assert r["Out"].tolist() == [[1, 2, 2], [1, 0, 2]] and r["Index"].dtype == np.int32
    assert [r[k].tolist() for k in ("Index", "Indices", "Counts")] == [[1, 0, 2]] * 2 + [[1] * 3]
    spec = u.infer(VarSpec((2, 3), "int64"), dtype=3, is_sorted=True, axis=[1])
    assert spec["Out"].shape == (2, -1) and spec["Index"].shape == (3,)
    with pytest.raises(ValueError, match="axis must be one dim of X"):
        u.forward(x, is_sorted=True, axis=[2])
    # fluid 1.8's unique (is_sorted false): first appearance, 1-D only
    assert u.forward(np.array([3, 1, 3, 0]))["Out"].tolist() == [3, 1, 0]


@pytest.mark.parametrize("align", [True, False])
@pytest.mark.parametrize("pad", ["zeros", "border", "reflection"])
def test_grid_sampler_paddle2_modes_have_numeric_gradients(align, pad):
    """(values against Paddle 2.6 are in tests/ops/test_paddle_oracle.py)"""
    rng = np.random.default_rng(11)
    grid = rng.uniform(-1.6, 1.6, (2, 3, 4, 2))

    class T(OpTest):
        op_type = "grid_sampler"
        inputs = {"X": rng.uniform(-1, 1, (2, 3, 5, 6)), "Grid": grid}
        attrs = dict(align_corners=align, padding_mode=pad, mode="bilinear")
    T.outputs = {"Output": get_op_def("grid_sampler").forward(
        T.inputs["X"], grid, **T.attrs)["Output"]}
    T().check_grad(["X", "Grid"], "Output")
    with pytest.raises(ValueError, match="mode must be 'bilinear' or 'nearest'"):
        get_op_def("grid_sampler").forward(T.inputs["X"], grid, mode="bicubic")
