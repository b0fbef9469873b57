"""Inference of saved models: fluidlite's predictor (NumPy, ir_optim on / off; onnxruntime engine)
vs onnxruntime run directly on the same ONNX file, PyTorch eager and Paddle 2.6 static (issue 30).

Models: ResNet-50 224x224, MobileNetV2 224x224, BERT-mini (4 layers, hidden 256, 4 heads,
seq 128) and an LSTM tagger (embedding 128, one LSTM layer of 128 unrolled over 32 steps, a
tag classifier per step); batch 1 and 16. Each model is built once with ``fluid.layers``, its
weights drawn from one NumPy generator (batch-norm statistics from one calibration batch, so
folding them is not a no-op) and written with ``save_inference_model``. Every engine then runs
*that* saved model:

* ``np``        ``create_paddle_predictor`` with ``switch_ir_optim(False)``;
* ``np+ir``     the same with the inference passes (the default);
* ``fl-ort``    ``config.enable_onnxruntime()`` (fluidlite's ONNX export inside the predictor);
* ``ort``       ``onnxruntime.InferenceSession`` on the ``.onnx`` file ``fluidlite.onnx.export``
                wrote for the same program, with the same thread count, called directly;
* ``torch``     PyTorch eager: the saved program's ops replayed one by one with ``torch``
                functions on the loaded weights (what a hand-written ``nn.Module.forward``
                does), under ``torch.inference_mode()``;
* ``paddle``    Paddle 2.6 ``paddle.static.load_inference_model`` + ``Executor.run`` in a
                subprocess (``--paddle-python``; default ``/tmp/paddle-venv/bin/python``)
                driven over a pipe so that its runs interleave with the others.

All engines use 2 threads (``--threads``). Outputs are checked against ``np`` before anything
is timed: max |diff| / max |reference| <= 1e-5 is OK; above that the row says whether the
difference is within twice the spread of the independent float32 engines (ort, torch, paddle)
among themselves -- the accumulation-order noise a 50-layer network amplifies -- or a
MISMATCH. Engines run interleaved in blocks, ``--runs`` / ``--block`` rounds of one block per
engine; a block times ``--block`` runs, and more until they took ``--min-time`` seconds (a
0.5 ms run is otherwise a median of a dozen samples, each of which one preemption can double).
Each block starts after ``--settle`` seconds of idle and as many of untimed runs, so that the
spinning threads of the engine before are asleep and this one's awake. Printed are the means
over rounds of each block's median run (ms; ``interleave`` says why), the ratios np+ir/torch,
np+ir/paddle and fl-ort/ort (> 1 = fluidlite slower) as the median over rounds of the two
engines' ratio within a round, with its quartiles (``_paired`` says why), the peak RSS growth
of one run
(``VmHWM`` after a reset through ``/proc/self/clear_refs``) and the passes that fired. A
report, never an assertion; on a shared machine the numbers are noisy.

    python bench/inference.py                         # all models, batch 1 and 16
    python bench/inference.py -m bert --batch 1 --runs 5
    python bench/inference.py -m bert --delete-pass slice_pushdown_pass
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import warnings

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
MODELS = ("resnet50", "mobilenetv2", "bert", "lstm")
ENGINES = ("np", "np+ir", "fl-ort", "ort", "torch", "paddle")
ap.add_argument("-m", "--models", nargs="+", default=list(MODELS), choices=MODELS)
ap.add_argument("--batch", type=int, nargs="+", default=[1, 16])
ap.add_argument("--runs", type=int, default=8, help="timed runs per engine")
ap.add_argument("--block", type=int, default=2, help="runs per engine before switching")
ap.add_argument("--min-time", type=float, default=0.05,
                help="seconds a block's timed runs take at least: short runs are timed more "
                     "often, every engine alike")
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--settle", type=float, default=0.3,
                help="seconds of idle before each engine's block, so that the spinning "
                     "worker threads of the engine before (OpenBLAS, OpenMP, onnxruntime) "
                     "have gone to sleep; then as many seconds of untimed runs (at least one), "
                     "so that this engine's threads are awake")
ap.add_argument("--engines", nargs="+", default=list(ENGINES), choices=ENGINES)
ap.add_argument("--paddle-python", default=os.environ.get("FLUIDLITE_PADDLE_PYTHON",
                                                          "/tmp/paddle-venv/bin/python"))
ap.add_argument("--json", default=None, help="also write the results to this file")
ap.add_argument("--delete-pass", nargs="+", default=[], metavar="PASS",
                help="inference passes the np+ir engine runs without (config.delete_pass): "
                     "e.g. slice_pushdown_pass, to time the kernels on the whole graph")
ARGS = ap.parse_args()
if ARGS.settle < 0:
    ap.error(f"--settle must be >= 0 seconds, got {ARGS.settle}")
if ARGS.runs < 1 or ARGS.block < 1:
    ap.error(f"--runs and --block must be >= 1, got {ARGS.runs} and {ARGS.block}")
if ARGS.min_time < 0:
    ap.error(f"--min-time must be >= 0 seconds, got {ARGS.min_time}")
for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_v] = str(ARGS.threads)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _blas  # noqa: E402

import numpy as np  # noqa: E402

import fluidlite as fluid  # noqa: E402
from fluidlite.inference import AnalysisConfig, PaddleTensor, create_paddle_predictor  # noqa
from fluidlite.inference.passes import PASSES  # noqa: E402

L = fluid.layers
# config.delete_pass ignores an unknown name (as fluid's did): a misspelt one would time the
# full pipeline under another label
_unknown = [n for n in ARGS.delete_pass if n not in PASSES]
if _unknown:
    ap.error(f"--delete-pass: unknown pass {', '.join(_unknown)} (known: {', '.join(PASSES)})")


# -- models -------------------------------------------------------------------------------------
class Init:
    """Weights from one generator in build order (``NumpyArrayInitializer``)."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)

    def attr(self, shape, std):
        arr = (self.rng.standard_normal(shape) * std).astype(np.float32)
        return fluid.ParamAttr(initializer=fluid.initializer.NumpyArrayInitializer(arr))

    def uniform(self, shape, lo, hi):
        arr = self.rng.uniform(lo, hi, shape).astype(np.float32)
        return fluid.ParamAttr(initializer=fluid.initializer.NumpyArrayInitializer(arr))


def conv_bn(I, x, cout, k, stride=1, act="relu", groups=1):
    cin = x.shape[1]
    y = L.conv2d(x, cout, k, stride, (k - 1) // 2, groups=groups, bias_attr=False,
                 param_attr=I.attr((cout, cin // groups, k, k),
                                   (2.0 / (cin // groups * k * k)) ** 0.5),
                 use_cudnn=groups == 1)
    # momentum 0 and training mode: one calibration batch sets the moving statistics to its
    # own (``build``), so activations stay normalised as in a trained network
    return L.batch_norm(y, act=act, epsilon=1e-5, momentum=0.0,
                        param_attr=I.uniform((cout,), 0.5, 1.5),
                        bias_attr=I.attr((cout,), 0.1),
                        moving_mean_name=fluid.unique_name.generate("bn_mean"),
                        moving_variance_name=fluid.unique_name.generate("bn_var"))


def resnet50(I, x):
    def bottleneck(x, width, stride):
        y = conv_bn(I, conv_bn(I, x, width, 1), width, 3, stride)
        y = conv_bn(I, y, width * 4, 1, act=None)
        if stride != 1 or x.shape[1] != width * 4:
            x = conv_bn(I, x, width * 4, 1, stride, act=None)
        return L.relu(L.elementwise_add(y, x))
    x = L.pool2d(conv_bn(I, x, 64, 7, 2), 3, "max", 2, 1)
    for i, (width, n) in enumerate(((64, 3), (128, 4), (256, 6), (512, 3))):
        for j in range(n):
            x = bottleneck(x, width, 2 if j == 0 and i > 0 else 1)
    x = L.reshape(L.pool2d(x, pool_type="avg", global_pooling=True), [0, -1])
    return L.fc(x, 1000, param_attr=I.attr((2048, 1000), 0.02), bias_attr=I.attr((1000,), 0.1),
                act="softmax")


def mobilenetv2(I, x):
    x = L.relu6(conv_bn(I, x, 32, 3, 2, act=None))
    for t, c, n, s in ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                       (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)):
        for j in range(n):
            cin, stride = x.shape[1], s if j == 0 else 1
            y = x if t == 1 else L.relu6(conv_bn(I, x, cin * t, 1, act=None))
            y = L.relu6(conv_bn(I, y, cin * t, 3, stride, act=None, groups=cin * t))
            y = conv_bn(I, y, c, 1, act=None)
            x = L.elementwise_add(x, y) if stride == 1 and cin == c else y
    x = L.relu6(conv_bn(I, x, 1280, 1, act=None))
    x = L.reshape(L.pool2d(x, pool_type="avg", global_pooling=True), [0, -1])
    return L.fc(x, 1000, param_attr=I.attr((1280, 1000), 0.02), bias_attr=I.attr((1000,), 0.1),
                act="softmax")


BERT = dict(vocab=30522, hidden=256, layers=4, heads=4, ffn=1024, seq=128)


def _fc3(I, x, n):
    k = x.shape[-1]
    return L.fc(x, n, num_flatten_dims=2, param_attr=I.attr((k, n), 0.02),
                bias_attr=I.attr((n,), 0.02))


def _ln(I, x):
    h = x.shape[-1]
    return L.layer_norm(x, begin_norm_axis=2, epsilon=1e-5, param_attr=I.uniform((h,), 0.8, 1.2),
                        bias_attr=I.attr((h,), 0.1))


def bert(I, ids, pos):
    H, nh = BERT["hidden"], BERT["heads"]

    def heads(t):
        return L.transpose(L.reshape(t, [0, 0, nh, H // nh]), [0, 2, 1, 3])
    x = L.elementwise_add(
        fluid.embedding(ids, [BERT["vocab"], H], param_attr=I.attr((BERT["vocab"], H), 0.02)),
        fluid.embedding(pos, [BERT["seq"], H], param_attr=I.attr((BERT["seq"], H), 0.02)))
    x = _ln(I, x)
    for _ in range(BERT["layers"]):
        q, k, v = (heads(_fc3(I, x, H)) for _ in range(3))
        p = L.softmax(L.matmul(q, k, transpose_y=True, alpha=(H // nh) ** -0.5))
        p = L.dropout(p, 0.1, dropout_implementation="upscale_in_train")
        ctx = L.reshape(L.transpose(L.matmul(p, v), [0, 2, 1, 3]), [0, 0, H])
        x = _ln(I, L.elementwise_add(x, _fc3(I, ctx, H)))
        x = _ln(I, L.elementwise_add(x, _fc3(I, L.gelu(_fc3(I, x, BERT["ffn"])), H)))
    cls = L.reshape(L.slice(x, [1], [0], [1]), [0, H])
    pooled = L.fc(cls, H, act="tanh", param_attr=I.attr((H, H), 0.02),
                  bias_attr=I.attr((H,), 0.02))
    return L.fc(pooled, 2, param_attr=I.attr((H, 2), 0.02), bias_attr=I.attr((2,), 0.02))


LSTM = dict(vocab=5000, emb=128, hidden=128, steps=32, tags=20)


def lstm_tagger(I, ids):
    E, H, T = LSTM["emb"], LSTM["hidden"], LSTM["steps"]
    x = fluid.embedding(ids, [LSTM["vocab"], E], param_attr=I.attr((LSTM["vocab"], E), 0.1))
    w = L.create_parameter([E + H, 4 * H], "float32", attr=I.attr((E + H, 4 * H), 0.1))
    b = L.create_parameter([4 * H], "float32", attr=I.attr((4 * H,), 0.1))
    h = c = L.fill_constant_batch_size_like(ids, [-1, H], "float32", 0.0)
    out = []
    for t in range(T):
        xt = L.reshape(L.slice(x, [1], [t], [t + 1]), [0, E])
        gates = L.elementwise_add(L.matmul(L.concat([xt, h], 1), w), b)
        gi, gf, gc, go = L.split(gates, 4, 1)
        c = L.elementwise_add(L.elementwise_mul(L.sigmoid(gf), c),
                              L.elementwise_mul(L.sigmoid(gi), L.tanh(gc)))
        h = L.elementwise_mul(L.sigmoid(go), L.tanh(c))
        out.append(h)
    hs = L.stack(out, 1)                                               # [batch, T, H]
    return L.softmax(L.fc(hs, LSTM["tags"], num_flatten_dims=2,
                          param_attr=I.attr((H, LSTM["tags"]), 0.1),
                          bias_attr=I.attr((LSTM["tags"],), 0.1)))


def build(name, dirname):
    """Build ``name``, initialise it and save it as an inference model in ``dirname``."""
    main, startup = fluid.Program(), fluid.Program()
    I = Init(0)
    with fluid.unique_name.guard(), fluid.program_guard(main, startup):
        if name in ("resnet50", "mobilenetv2"):
            x = fluid.data("image", [-1, 3, 224, 224], "float32")
            feeds, out = ["image"], globals()[name](I, x)
        elif name == "bert":
            ids = fluid.data("ids", [-1, BERT["seq"]], "int64")
            pos = fluid.data("pos", [-1, BERT["seq"]], "int64")
            feeds, out = ["ids", "pos"], bert(I, ids, pos)
        else:
            ids = fluid.data("ids", [-1, LSTM["steps"]], "int64")
            feeds, out = ["ids"], lstm_tagger(I, ids)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(startup)
        if name in ("resnet50", "mobilenetv2"):
            # the calibration batch: batch-norm moving statistics := its batch statistics
            calib = np.random.default_rng(1).standard_normal((2, 3, 224, 224))
            exe.run(main, feed={"image": calib.astype(np.float32)}, fetch_list=[])
        fluid.io.save_inference_model(dirname, feeds, [out], exe, main_program=main)
    return feeds


def make_inputs(name, batch, rng):
    if name in ("resnet50", "mobilenetv2"):
        return [rng.standard_normal((batch, 3, 224, 224)).astype(np.float32)]
    if name == "bert":
        ids = rng.integers(0, BERT["vocab"], (batch, BERT["seq"])).astype(np.int64)
        pos = np.tile(np.arange(BERT["seq"], dtype=np.int64), (batch, 1))
        return [ids, pos]
    return [rng.integers(0, LSTM["vocab"], (batch, LSTM["steps"])).astype(np.int64)]


# -- engines ------------------------------------------------------------------------------------
def _config(dirname, ir_optim=True, ort=False):
    c = AnalysisConfig(dirname)
    c.disable_gpu()
    c.set_cpu_math_library_num_threads(ARGS.threads)
    c.switch_ir_optim(ir_optim)
    for name in ARGS.delete_pass if ir_optim else ():
        c.delete_pass(name)
    c.switch_use_feed_fetch_ops(False)
    if ort:
        c.enable_onnxruntime()
    return c


def predictor_runner(predictor, inputs):
    """The zero-copy API (fluid's fast path): inputs set once, ``zero_copy_run`` timed."""
    for n, a in zip(predictor.get_input_names(), inputs):
        predictor.get_input_tensor(n).copy_from_cpu(a)
    outs = [predictor.get_output_tensor(n) for n in predictor.get_output_names()]

    def run():
        predictor.zero_copy_run()
        return [t.copy_to_cpu() for t in outs]
    return run


def ort_runner(path, feeds, inputs):
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = ARGS.threads
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    feed = dict(zip(feeds, inputs))
    names = [o.name for o in sess.get_outputs()]
    return lambda: sess.run(names, feed)


class TorchProgram:
    """The saved program's ops replayed with ``torch`` functions (PyTorch eager)."""

    def __init__(self, program, scope, feeds, fetches):
        import torch
        import torch.nn.functional as F
        self.torch, self.F = torch, F
        torch.set_num_threads(ARGS.threads)
        self.ops = [o for o in program.global_block().ops if o.type not in ("feed", "fetch")]
        self.params = {}
        for v in program.list_vars():
            if v.persistable and scope.find_var(v.name) is not None \
                    and scope.find_var(v.name).is_initialized():
                self.params[v.name] = torch.from_numpy(np.array(scope.find_var(v.name)
                                                                .get_tensor()))
        self.feeds, self.fetches = feeds, fetches

    def __call__(self, inputs):
        env = dict(self.params)
        with self.torch.inference_mode():
            for n, a in zip(self.feeds, inputs):
                env[n] = self.torch.from_numpy(a)
            for op in self.ops:
                res = getattr(self, "_" + op.type)(op, env)
                for slot, val in res.items():
                    vals = val if isinstance(val, list) else [val]
                    for n, t in zip(op.output(slot), vals):
                        env[n] = t
            return [env[n].numpy() for n in self.fetches]

    @staticmethod
    def _x(op, env, slot="X"):
        return env[op.input(slot)[0]]

    def _conv2d(self, op, env):
        a = op.attrs
        p = list(a["paddings"])
        pad = p[:2] if len(p) == 2 else [p[0], p[2]]
        return {"Output": self.F.conv2d(self._x(op, env, "Input"), self._x(op, env, "Filter"),
                                        None, a["strides"], pad, a["dilations"], a["groups"])}
    _depthwise_conv2d = _conv2d

    def _batch_norm(self, op, env):
        g = lambda s: self._x(op, env, s)  # noqa: E731
        return {"Y": self.F.batch_norm(g("X"), g("Mean"), g("Variance"), g("Scale"), g("Bias"),
                                       False, 0.0, op.attrs["epsilon"])}

    def _relu(self, op, env):
        return {"Out": self.F.relu(self._x(op, env))}

    def _relu6(self, op, env):
        return {"Out": self.F.relu6(self._x(op, env))}

    def _sigmoid(self, op, env):
        return {"Out": self.torch.sigmoid(self._x(op, env))}

    def _tanh(self, op, env):
        return {"Out": self.torch.tanh(self._x(op, env))}

    def _gelu(self, op, env):
        approx = "tanh" if op.attrs.get("approximate") else "none"
        return {"Out": self.F.gelu(self._x(op, env), approximate=approx)}

    def _softmax(self, op, env):
        return {"Out": self.torch.softmax(self._x(op, env), op.attrs.get("axis", -1))}

    def _bcast(self, op, env):
        x, y = self._x(op, env), self._x(op, env, "Y")
        axis = op.attrs.get("axis", -1)
        if y.dim() < x.dim() and axis != -1:
            y = y.reshape(list(y.shape) + [1] * (x.dim() - axis - y.dim()))
        return x, y

    def _elementwise_add(self, op, env):
        x, y = self._bcast(op, env)
        return {"Out": x + y}

    def _elementwise_mul(self, op, env):
        x, y = self._bcast(op, env)
        return {"Out": x * y}

    def _pool2d(self, op, env):
        a, x = op.attrs, self._x(op, env)
        if a.get("global_pooling"):
            red = x.amax((2, 3), keepdim=True) if a["pooling_type"] == "max" \
                else x.mean((2, 3), keepdim=True)
            return {"Out": red}
        p = list(a["paddings"])[:2]
        if a["pooling_type"] == "max":
            return {"Out": self.F.max_pool2d(x, a["ksize"], a["strides"], p)}
        return {"Out": self.F.avg_pool2d(x, a["ksize"], a["strides"], p,
                                         count_include_pad=not a.get("exclusive", True))}

    def _mul(self, op, env):
        x, y = self._x(op, env), self._x(op, env, "Y")
        k = op.attrs.get("x_num_col_dims", 1)
        out = x.reshape(int(np.prod(x.shape[:k])), -1) @ y
        return {"Out": out.reshape(list(x.shape[:k]) + [y.shape[1]])}

    def _matmul(self, op, env):
        x, y = self._x(op, env), self._x(op, env, "Y")
        if op.attrs.get("transpose_X"):
            x = x.transpose(-1, -2)
        if op.attrs.get("transpose_Y"):
            y = y.transpose(-1, -2)
        out = x @ y
        alpha = op.attrs.get("alpha", 1.0)
        return {"Out": out * alpha if alpha != 1.0 else out}

    def _reshape2(self, op, env):
        x = self._x(op, env)
        shape = [x.shape[i] if d == 0 else d for i, d in enumerate(op.attrs["shape"])]
        return {"Out": x.reshape(shape)}

    def _transpose2(self, op, env):
        return {"Out": self._x(op, env).permute(op.attrs["axis"])}

    def _layer_norm(self, op, env):
        x = self._x(op, env)
        h = x.shape[op.attrs["begin_norm_axis"]:]
        return {"Y": self.F.layer_norm(x, h, self._x(op, env, "Scale").reshape(h),
                                       self._x(op, env, "Bias").reshape(h),
                                       op.attrs["epsilon"])}

    def _lookup_table_v2(self, op, env):
        return {"Out": self.F.embedding(self._x(op, env, "Ids"), self._x(op, env, "W"))}

    def _lookup_table(self, op, env):
        ids = self._x(op, env, "Ids")
        return {"Out": self.F.embedding(ids.squeeze(-1), self._x(op, env, "W"))}

    def _slice(self, op, env):
        x = self._x(op, env, "Input")
        for ax, s, e in zip(op.attrs["axes"], op.attrs["starts"], op.attrs["ends"]):
            x = x.narrow(ax, s, min(e, x.shape[ax]) - s)
        return {"Out": x}

    def _scale(self, op, env):
        a, x = op.attrs, self._x(op, env)
        s, b = a.get("scale", 1.0), a.get("bias", 0.0)
        return {"Out": x * s + b if a.get("bias_after_scale", True) else (x + b) * s}

    def _dropout(self, op, env):
        x = self._x(op, env)
        if op.attrs.get("dropout_implementation") == "upscale_in_train":
            return {"Out": x}
        return {"Out": x * (1.0 - op.attrs["dropout_prob"])}

    def _concat(self, op, env):
        return {"Out": self.torch.cat([env[n] for n in op.input("X")], op.attrs["axis"])}

    def _stack(self, op, env):
        return {"Y": self.torch.stack([env[n] for n in op.input("X")], op.attrs["axis"])}

    def _split(self, op, env):
        x, ax = self._x(op, env), op.attrs["axis"]
        return {"Out": list(self.torch.chunk(x, op.attrs["num"], ax))}

    def _fill_constant_batch_size_like(self, op, env):
        x, a = self._x(op, env, "Input"), op.attrs
        shape = list(a["shape"])
        shape[a.get("output_dim_idx", 0)] = x.shape[a.get("input_dim_idx", 0)]
        return {"Out": self.torch.full(shape, float(a["value"]), dtype=self.torch.float32)}


# Paddle 2.6 in a subprocess, driven line by line over a pipe
PADDLE_CHILD = textwrap.dedent(r"""
    import json, os, sys, time
    import numpy as np
    import paddle
    paddle.enable_static()
    models = {}

    def hwm_reset():
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")

    def status(key):
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key):
                    return int(line.split()[1]) / 1024.0
        return 0.0

    for line in sys.stdin:
        cmd = line.split()
        if cmd[0] == "load":             # load KEY DIR NPZ OUT_NPZ
            key, d, npz, out = cmd[1:]
            exe = paddle.static.Executor(paddle.CPUPlace())
            scope = paddle.static.Scope()
            with paddle.static.scope_guard(scope):
                prog, feeds, fetches = paddle.static.load_inference_model(
                    d, exe, model_filename=None, params_filename=None)
            data = np.load(npz)
            feed = {n: data[f"in{i}"] for i, n in enumerate(feeds)}
            models[key] = (exe, scope, prog, feed, fetches)
            with paddle.static.scope_guard(scope):
                res = exe.run(prog, feed=feed, fetch_list=fetches)
            np.savez(out, *[np.asarray(r) for r in res])
            print("ok", flush=True)
        elif cmd[0] == "time":           # time KEY N SETTLE MIN_TIME -> JSON [seconds...]
            exe, scope, prog, feed, fetches = models[cmd[1]]
            ts = []
            with paddle.static.scope_guard(scope):
                t0 = time.perf_counter()     # untimed runs first, as timed() does
                exe.run(prog, feed=feed, fetch_list=fetches)
                while time.perf_counter() - t0 < float(cmd[3]):
                    exe.run(prog, feed=feed, fetch_list=fetches)
                while len(ts) < int(cmd[2]) or sum(ts) < float(cmd[4]):
                    t0 = time.perf_counter()
                    exe.run(prog, feed=feed, fetch_list=fetches)
                    ts.append(time.perf_counter() - t0)
            print(json.dumps(ts), flush=True)
        elif cmd[0] == "rss":            # rss KEY -> peak RSS growth (MiB) of one run
            exe, scope, prog, feed, fetches = models[cmd[1]]
            try:
                import ctypes
                ctypes.CDLL("libc.so.6").malloc_trim(0)
            except (OSError, AttributeError):
                pass
            hwm_reset()
            base = status("VmRSS")
            with paddle.static.scope_guard(scope):
                exe.run(prog, feed=feed, fetch_list=fetches)
            print(json.dumps(status("VmHWM") - base), flush=True)
        elif cmd[0] == "drop":
            models.pop(cmd[1], None)
            print("ok", flush=True)
""")


class PaddleChild:
    def __init__(self, python):
        env = dict(os.environ, OMP_NUM_THREADS=str(ARGS.threads), CPU_NUM="1",
                   FLAGS_use_mkldnn="false")
        self.p = subprocess.Popen([python, "-c", PADDLE_CHILD], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                  env=env)

    def ask(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        reply = self.p.stdout.readline()
        if not reply:
            raise RuntimeError(f"the Paddle subprocess ended on '{line}'")
        return reply.strip()

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=60)


# -- measuring ----------------------------------------------------------------------------------
def _status(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1]) / 1024.0
    return 0.0


def _trim():
    """Give the freed heap back to the kernel first (``malloc_trim``): fluidlite's executor
    keeps freed buffers mapped for reuse (``core/memory.py``), which would hide a run's
    working set from the RSS."""
    try:
        import ctypes
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def peak_run_mib(run):
    """Peak RSS growth (MiB) of one ``run()``: VmHWM after a reset, minus VmRSS before."""
    _trim()
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return float("nan")
    base = _status("VmRSS")
    run()
    return _status("VmHWM") - base


def rel_diff(outs, ref):
    worst = 0.0
    for a, b in zip(outs, ref):
        a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
        scale = max(float(np.max(np.abs(b))), 1e-30)
        worst = max(worst, float(np.max(np.abs(a - b))) / scale)
    return worst


def in_process_runners(name, dirname, feeds, inputs):
    """{engine: run() -> outputs} for the engines of this process (``np`` always: it is the
    reference), and the passes that fired in ``np+ir``."""
    fired = None
    preds = {"np": create_paddle_predictor(_config(dirname, ir_optim=False))}
    if "np+ir" in ARGS.engines:
        preds["np+ir"] = create_paddle_predictor(_config(dirname))
        fired = [(n, k) for n, k in preds["np+ir"].applied_passes() if k]
    if "fl-ort" in ARGS.engines:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            p = create_paddle_predictor(_config(dirname, ort=True))
        if p.engine() == "onnxruntime":
            preds["fl-ort"] = p
    runners = {k: predictor_runner(p, inputs) for k, p in preds.items()}
    base = preds["np"]
    fetches = base.get_output_names()
    if "ort" in ARGS.engines:
        path = os.path.join(dirname, "model.onnx")
        if not os.path.exists(path):
            from fluidlite.onnx import export
            export(base._shared.loaded, path, feeds, fetches, scope=base._shared.params)
        runners["ort"] = ort_runner(path, feeds, inputs)
    if "torch" in ARGS.engines:
        tp = TorchProgram(base._shared.loaded, base._shared.params, feeds, fetches)
        runners["torch"] = lambda: tp(inputs)
    return runners, fired


def timed(run):
    """``block(n) -> [seconds]`` of an in-process ``run``, after ``--settle`` seconds of
    untimed runs (at least one; ``interleave`` idles as long before): the engine timed before
    may leave threads spinning for a while (onnxruntime's pool, OpenBLAS's for about 0.1 s
    after a GEMM; two sessions timed in turn measured 0.7-1.5x of each other without this,
    1.0x back to back), and after the idle this engine's own threads must wake up again.
    Then ``n`` timed runs, and more until they took ``--min-time`` seconds."""
    def block(n):
        t0 = time.perf_counter()
        run()
        while time.perf_counter() - t0 < ARGS.settle:
            run()
        ts = []
        while len(ts) < n or sum(ts) < ARGS.min_time:
            t0 = time.perf_counter()
            run()
            ts.append(time.perf_counter() - t0)
        return ts
    return block


def interleave(blocks):
    """{engine: [seconds per run, one per round]}: 2 warm-up blocks each, then
    ``ceil(--runs / --block)`` rounds of one block per engine in turn (the same rounds for
    every engine, however many runs its blocks timed), each block's median run.

    A block's median drops the runs a preemption hit. Across blocks, a short run's median is
    bimodal on this kind of machine (LSTM b1 on onnxruntime: blocks of 0.52 or 0.72 ms, the
    state of the threads' placement), so the figure printed is the *mean* over rounds: the
    median of a handful of bimodal blocks jumps between the modes."""
    for _ in range(2):                          # plans, caches, the allocator
        for block in blocks.values():
            block(1)
    times = {k: [] for k in blocks}
    for _ in range(-(-ARGS.runs // ARGS.block)):
        for k, block in blocks.items():
            time.sleep(ARGS.settle)
            times[k].append(statistics.median(block(ARGS.block)))
    return times


def bench_model(name, root, paddle, rng):
    dirname = os.path.join(root, name)
    feeds = build(name, dirname)
    rows, fired = [], None
    for batch in ARGS.batch:
        inputs = make_inputs(name, batch, rng)
        runners, fired = in_process_runners(name, dirname, feeds, inputs)
        ref = runners["np"]()
        got = {k: r() for k, r in runners.items()}
        blocks = {k: timed(r) for k, r in runners.items() if k in ARGS.engines}
        peak = {k: (lambda r=r: peak_run_mib(r)) for k, r in runners.items()}
        key = f"{name}_{batch}"
        if paddle is not None:
            npz = os.path.join(root, key + "_in.npz")
            np.savez(npz, **{f"in{i}": a for i, a in enumerate(inputs)})
            out = os.path.join(root, key + "_out.npz")
            paddle.ask(f"load {key} {dirname} {npz} {out}")
            with np.load(out) as held:
                got["paddle"] = [held[f"arr_{i}"] for i in range(len(ref))]
            blocks["paddle"] = lambda n: json.loads(
                paddle.ask(f"time {key} {n} {ARGS.settle} {ARGS.min_time}"))
            peak["paddle"] = lambda: json.loads(paddle.ask(f"rss {key}"))
        check = {k: rel_diff(v, ref) for k, v in got.items()}
        times = interleave(blocks)
        rss = {k: peak[k]() for k in times}
        if paddle is not None:
            paddle.ask(f"drop {key}")
        med = {k: statistics.fmean(v) * 1e3 for k, v in times.items()}
        ratios = {f"{a}/{b}": _paired(times, a, b) for a, b in RATIOS
                  if a in times and b in times}
        # how far the independent float32 engines are from each other: the accumulation-order
        # noise a deep network amplifies (the scale a check against "np" can be held to)
        peers = [k for k in ("ort", "torch", "paddle") if k in got]
        spread = max((rel_diff(got[a], got[b]) for a in peers for b in peers if a < b),
                     default=None)          # (None: fewer than two peers ran)
        rows.append((name, batch, med, check, rss, spread, ratios))
        _print_row(rows[-1])
    return rows, fired


# the ratios printed: (fluidlite engine, peer)
RATIOS = (("np+ir", "torch"), ("np+ir", "paddle"), ("fl-ort", "ort"))


def _paired(times, a, b):
    """(median, lower quartile, upper quartile) over rounds of engine ``a``'s block median /
    engine ``b``'s in the same round. The guest's speed drifts in phases of seconds that
    slow every engine alike (ResNet-50 at batch 1: rounds of 60 ms for both fluidlite and
    PyTorch, then four rounds of 78 ms for both, then 60 again), so a ratio of the means
    over rounds follows which engine's blocks the slow phases hit (1.01 in one run, 1.10
    in the next); two blocks of one round run within a second of each other, in the same
    phase, and their ratio does not."""
    r = sorted(x / y for x, y in zip(times[a], times[b]))
    if len(r) < 2:
        return r[0], r[0], r[0]
    q = statistics.quantiles(r, n=4, method="inclusive")
    return statistics.median(r), q[0], q[2]


def _ratio(ratios, a, b):
    return f"{ratios[f'{a}/{b}'][0]:.2f}" if f"{a}/{b}" in ratios else "-"


HEAD = (f"{'model':<12}{'batch':>5} " + "".join(f"{e:>8}" for e in ENGINES)
        + f"{'ir/torch':>9}{'ir/pdl':>8}{'flort/ort':>10}  worst rel diff")


def _print_row(row):
    name, batch, med, check, rss, spread, ratios = row
    cells = "".join(f"{med[e]:>8.1f}" if e in med else f"{'-':>8}" for e in ENGINES)
    worst = max(check.values())
    over = ", ".join(f"{k}={v:.1e}" for k, v in check.items() if v > 1e-5)
    if worst <= 1e-5:
        flag = "OK"
    elif spread is None:
        flag = (f"above 1e-5: {over}; fewer than two of ort, torch and paddle ran, so there "
                f"is no float32 spread to judge it by")
    elif worst <= 2 * spread:
        flag = f"float32 noise: {over}; the peers differ by {spread:.1e} among themselves"
    else:
        flag = f"MISMATCH {over} (peers differ by {spread:.1e})"
    print(f"{name:<12}{batch:>5} {cells}{_ratio(ratios, 'np+ir', 'torch'):>9}"
          f"{_ratio(ratios, 'np+ir', 'paddle'):>8}{_ratio(ratios, 'fl-ort', 'ort'):>10}  "
          f"{worst:.1e} {flag}", flush=True)
    print(f"{'  peak MiB':<18}" + "".join(f"{rss[e]:>8.0f}" if e in rss else f"{'-':>8}"
                                           for e in ENGINES), flush=True)
    if ratios:
        print("  ratio quartiles over rounds: " + ", ".join(
            f"{k} {lo:.2f}-{hi:.2f}" for k, (_, lo, hi) in ratios.items()),
            flush=True)


def main():
    paddle = None
    if "paddle" in ARGS.engines:
        if os.path.exists(ARGS.paddle_python):
            paddle = PaddleChild(ARGS.paddle_python)
        else:
            print(f"paddle: skipped ({ARGS.paddle_python} does not exist)")
    if "torch" in ARGS.engines:
        try:
            import torch  # noqa: F401
        except ImportError:
            print("torch: skipped (not importable)")
            ARGS.engines.remove("torch")
    print(f"ms per run: mean over {-(-ARGS.runs // ARGS.block)} interleaved rounds of a "
          f"block's median run, {ARGS.threads} threads each (OpenBLAS {_blas.describe()} "
          f"kernels); ratios: median over rounds of the two engines' ratio within a round, "
          f"> 1 = fluidlite slower; peak MiB = RSS growth of one run")
    print(HEAD, flush=True)
    rng = np.random.default_rng(0)
    results, passes = [], {}
    with tempfile.TemporaryDirectory() as root:
        for name in ARGS.models:
            rows, fired = bench_model(name, root, paddle, rng)
            results += rows
            passes[name] = fired
    if paddle is not None:
        paddle.close()
    print("\npasses that fired (rewrites):")
    for name, fired in passes.items():
        print(f"  {name}: " + ", ".join(f"{n} ({k})" for n, k in fired or []))
    if ARGS.json:
        with open(ARGS.json, "w") as f:
            json.dump({"rows": results, "passes": passes}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
