"""Training steps of real architectures: fluidlite static vs fluidlite dygraph vs PyTorch eager.

Workloads (issue 31): ResNet-18 on CIFAR (batch 32, Momentum + L2 + global-norm clip),
ResNet-50 224x224 (batch 8), MobileNetV2 224x224 (batch 8, depthwise convs), BERT-mini
(4 layers, hidden 256, 4 heads, batch 8, seq 128, Adam + clip, GELU), an LSTM language model
(PTB small: 2 layers of 200, 20 steps, batch 20, SGD + clip) and DeepFM (39 fields, a
1,000,000 x 16 embedding with ``is_sparse=True``, batch 512, SGD).

Every model is written once against a small "backend" (conv, batch norm, fc, ...) that is
implemented three times: ``fluid.layers`` in a static Program, fluid's dygraph layers, and
``torch.nn.functional``. All parameters come from one NumPy generator in the order the model
asks for them, so the three start from the same weights; the first-step losses are checked to
agree before anything is timed. Each model runs in a fresh process of its own (``--one-process``:
all in this one; a model measured after another inherits its heap: ResNet-50's dygraph step
ran 1.14x its static step after ResNet-18, 1.01x alone). Its frameworks run interleaved in
short blocks in that process (machine load hits them alike), 2 threads each: torch's, and fluidlite's own intra-op
threads (``fluid.core.set_num_threads``, which holds OpenBLAS to one thread per part;
``--fl-threads 1`` gives the two threads to OpenBLAS's GEMMs instead). Before each block the
process idles ``--settle`` seconds and then runs untimed steps for as long: the worker threads
of the framework before spin for a while after its last call (OpenBLAS's for about 0.1 s), and
without the pause they compete with the next framework's timed steps -- the earlier tables of
this benchmark ran without it, which slowed PyTorch by up to 2.7x (DeepFM) behind fluidlite's
spinning GEMM threads. Printed: median ms/step,
the ratios static/torch, dygraph/torch and dygraph/static, the median process CPU time per step
(all threads; with ``--threads 1`` the least load-sensitive measure of the work a step does on a
busy machine), and the peak RSS of each framework measured in a fresh process of its own
(build + 3 steps; ``VmHWM``). The timings are a report, never an assertion; on a shared
machine they are noisy.

    python bench/real_models.py                      # all models
    python bench/real_models.py -m resnet18 bert --steps 10
    python bench/real_models.py --no-torch           # fluidlite only
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
MODELS = ("resnet18", "resnet50", "mobilenetv2", "bert", "lstm", "deepfm")
ap.add_argument("-m", "--models", nargs="+", default=list(MODELS), choices=MODELS)
ap.add_argument("--steps", type=int, default=6, help="timed steps per framework and model")
ap.add_argument("--block", type=int, default=2, help="steps per framework before switching")
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--fl-threads", type=int, default=None,
                help="fluidlite's intra-op threads (fluid.core.set_num_threads; default: "
                     "--threads). 1 leaves the threads to OpenBLAS's GEMMs")
ap.add_argument("--settle", type=float, default=0.3,
                help="seconds of idle before each framework's block, so that the spinning "
                     "worker threads of the framework before (OpenBLAS, OpenMP) have gone to "
                     "sleep and do not compete with this one's steps; then as many seconds "
                     "of untimed steps (at least one), so that this one's threads are awake")
ap.add_argument("--no-torch", action="store_true")
ap.add_argument("--no-dygraph", action="store_true")
ap.add_argument("--no-rss", dest="rss", action="store_false",
                help="skip the peak-RSS runs (one fresh process per model and framework)")
ap.add_argument("--one-process", action="store_true",
                help="time every model in this process instead of a fresh one each")
ap.add_argument("--only", choices=MODELS, help=argparse.SUPPRESS)     # the per-model child
ap.add_argument("--child", nargs=2, metavar=("MODEL", "FRAMEWORK"), help=argparse.SUPPRESS)
ARGS = ap.parse_args()
if ARGS.settle < 0:
    ap.error(f"--settle must be >= 0 seconds, got {ARGS.settle}")
if ARGS.fl_threads is not None and ARGS.fl_threads < 1:
    ap.error(f"--fl-threads must be >= 1, got {ARGS.fl_threads}")
for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, str(ARGS.threads))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _blas  # noqa: E402

import numpy as np  # noqa: E402

import fluidlite as fluid  # noqa: E402
from fluidlite import dygraph  # noqa: E402

FL_THREADS = ARGS.threads if ARGS.fl_threads is None else ARGS.fl_threads
fluid.core.set_num_threads(FL_THREADS)


class Init:
    """The weights: one generator, drawn in the order the model asks (same in every backend)."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)

    def normal(self, shape, std):
        return (self.rng.standard_normal(shape) * std).astype(np.float32)


# -- backends -----------------------------------------------------------------------------------
class FluidOps:
    """Parameter-free ops through ``fluid.layers`` (the same calls work in static and dygraph)."""
    L = fluid.layers

    def relu(self, x):
        return self.L.relu(x)

    def relu6(self, x):
        return self.L.relu6(x)

    def gelu(self, x):
        return self.L.gelu(x)

    def tanh(self, x):
        return self.L.tanh(x)

    def sigmoid(self, x):
        return self.L.sigmoid(x)

    def add(self, a, b):
        return self.L.elementwise_add(a, b)

    def sub(self, a, b):
        return self.L.elementwise_sub(a, b)

    def mul(self, a, b):
        return self.L.elementwise_mul(a, b)

    def scale(self, x, s):
        return self.L.scale(x, scale=s)

    def maxpool(self, x, k, s, p):
        return self.L.pool2d(x, k, "max", s, p)

    def gap(self, x):
        return self.L.reshape(self.L.pool2d(x, pool_type="avg", global_pooling=True),
                              [0, -1])

    def reshape(self, x, shape):
        return self.L.reshape(x, shape)

    def transpose(self, x, perm):
        return self.L.transpose(x, perm)

    def matmul(self, a, b, transpose_y=False, alpha=1.0):
        return self.L.matmul(a, b, transpose_y=transpose_y, alpha=alpha)

    def softmax(self, x):
        return self.L.softmax(x)

    def split(self, x, n, dim):
        return self.L.split(x, n, dim)

    def concat(self, xs, dim):
        return self.L.concat(xs, dim)

    def slice(self, x, axis, start, end):
        return self.L.slice(x, [axis], [start], [end])

    def square(self, x):
        return self.L.square(x)

    def sum(self, x, dim, keep=False):
        return self.L.reduce_sum(x, dim, keep_dim=keep)

    def stack(self, xs, axis):
        return self.L.stack(xs, axis)

    def ce_loss(self, logits, label):
        return self.L.mean(self.L.softmax_with_cross_entropy(logits, label))

    def bce_loss(self, logit, label):
        return self.L.mean(self.L.sigmoid_cross_entropy_with_logits(logit, label))


def _attr(arr):
    return fluid.ParamAttr(initializer=fluid.initializer.NumpyArrayInitializer(arr))


class StaticOps(FluidOps):
    """Layers with parameters as static ``fluid.layers`` calls initialized from ``Init``."""

    def __init__(self, init: Init) -> None:
        self.init = init

    def conv(self, x, cout, k, stride=1, pad=0, groups=1):
        cin = x.shape[1]
        w = self.init.normal((cout, cin // groups, k, k), (2.0 / (cin // groups * k * k)) ** .5)
        return self.L.conv2d(x, cout, k, stride, pad, groups=groups, param_attr=_attr(w),
                             bias_attr=False, use_cudnn=groups == 1)

    def bn(self, x, act=None):
        return self.L.batch_norm(x, act=act, momentum=0.9, epsilon=1e-5)

    def fc(self, x, n, std=None):
        k = x.shape[-1]
        w = self.init.normal((k, n), std or (1.0 / k) ** 0.5)
        return self.L.fc(x, n, num_flatten_dims=len(x.shape) - 1, param_attr=_attr(w),
                         bias_attr=_attr(np.zeros(n, np.float32)))

    def layer_norm(self, x):
        return self.L.layer_norm(x, begin_norm_axis=len(x.shape) - 1, epsilon=1e-5)

    def embedding(self, ids, vocab, dim, std, sparse=False):
        w = self.init.normal((vocab, dim), std)
        return fluid.embedding(ids, [vocab, dim], is_sparse=sparse, param_attr=_attr(w))

    def param(self, make_arr):
        arr = make_arr()
        return self.L.create_parameter(list(arr.shape), "float32",
                                       default_initializer=fluid.initializer.
                                       NumpyArrayInitializer(arr))


class DygraphOps(FluidOps):
    """Parameter layers as fluid dygraph Layer objects, made on the first forward and reused
    in call order afterwards."""

    def __init__(self, init: Init) -> None:
        self.init, self.made, self.i = init, [], 0

    def _get(self, make):
        if self.i == len(self.made):
            self.made.append(make())
        obj = self.made[self.i]
        self.i += 1
        return obj

    def parameters(self):
        out = []
        for m in self.made:
            out.extend(m.parameters() if hasattr(m, "parameters") else [m])
        return out

    def conv(self, x, cout, k, stride=1, pad=0, groups=1):
        def make():
            cin = x.shape[1]
            w = self.init.normal((cout, cin // groups, k, k),
                                 (2.0 / (cin // groups * k * k)) ** 0.5)
            return dygraph.Conv2D(cin, cout, k, stride, pad, groups=groups, param_attr=_attr(w),
                                  bias_attr=False, use_cudnn=groups == 1)
        return self._get(make)(x)

    def bn(self, x, act=None):
        return self._get(lambda: dygraph.BatchNorm(x.shape[1], act=act, momentum=0.9))(x)

    def fc(self, x, n, std=None):
        def make():
            k = x.shape[-1]
            w = self.init.normal((k, n), std or (1.0 / k) ** 0.5)
            return dygraph.Linear(k, n, param_attr=_attr(w),
                                  bias_attr=_attr(np.zeros(n, np.float32)))
        return self._get(make)(x)

    def layer_norm(self, x):
        return self._get(lambda: dygraph.LayerNorm([x.shape[-1]], epsilon=1e-5))(x)

    def embedding(self, ids, vocab, dim, std, sparse=False):
        def make():
            return dygraph.Embedding([vocab, dim], is_sparse=sparse,
                                     param_attr=_attr(self.init.normal((vocab, dim), std)))
        return self._get(make)(ids)

    def param(self, make_arr):
        def make():
            arr = make_arr()
            holder = dygraph.Layer()
            return holder.create_parameter(list(arr.shape), None, "float32",
                                           default_initializer=fluid.initializer.
                                           NumpyArrayInitializer(arr))
        return self._get(make)


class TorchOps:
    """The same backend in ``torch.nn.functional`` (fluid's weight layouts: fc W is [in, out])."""

    def __init__(self, init: Init) -> None:
        import torch
        import torch.nn.functional as F
        self.torch, self.F, self.init, self.made, self.i = torch, F, init, [], 0

    def _get(self, make):
        if self.i == len(self.made):
            self.made.append(make())
        obj = self.made[self.i]
        self.i += 1
        return obj

    def _t(self, arr):
        return self.torch.tensor(arr, requires_grad=True)

    def parameters(self):
        return [t for m in self.made for t in (m if isinstance(m, tuple) else (m,))
                if t.requires_grad]

    def conv(self, x, cout, k, stride=1, pad=0, groups=1):
        cin = x.shape[1]
        w = self._get(lambda: self._t(self.init.normal(
            (cout, cin // groups, k, k), (2.0 / (cin // groups * k * k)) ** 0.5)))
        return self.F.conv2d(x, w, None, stride, pad, 1, groups)

    def bn(self, x, act=None):
        c, torch = x.shape[1], self.torch
        w, b, m, v = self._get(lambda: (torch.ones(c, requires_grad=True),
                                        torch.zeros(c, requires_grad=True),
                                        torch.zeros(c), torch.ones(c)))
        y = self.F.batch_norm(x, m, v, w, b, True, 0.1, 1e-5)
        return self.F.relu(y) if act == "relu" else y

    def fc(self, x, n, std=None):
        k = x.shape[-1]
        w, b = self._get(lambda: (self._t(self.init.normal((k, n), std or (1.0 / k) ** 0.5)),
                                  self._t(np.zeros(n, np.float32))))
        return x @ w + b

    def layer_norm(self, x):
        h, torch = x.shape[-1], self.torch
        w, b = self._get(lambda: (torch.ones(h, requires_grad=True),
                                  torch.zeros(h, requires_grad=True)))
        return self.F.layer_norm(x, (h,), w, b, 1e-5)

    def embedding(self, ids, vocab, dim, std, sparse=False):
        w = self._get(lambda: self._t(self.init.normal((vocab, dim), std)))
        return self.F.embedding(ids, w, sparse=sparse)

    def param(self, make_arr):
        return self._get(lambda: self._t(make_arr()))

    relu = property(lambda self: self.F.relu)
    relu6 = property(lambda self: self.F.relu6)
    gelu = property(lambda self: self.F.gelu)
    tanh = property(lambda self: self.torch.tanh)
    sigmoid = property(lambda self: self.torch.sigmoid)
    softmax = property(lambda self: lambda x: self.F.softmax(x, -1))
    square = property(lambda self: self.torch.square)

    def add(self, a, b):
        return a + b

    def sub(self, a, b):
        return a - b

    def mul(self, a, b):
        return a * b

    def scale(self, x, s):
        return x * s

    def maxpool(self, x, k, s, p):
        return self.F.max_pool2d(x, k, s, p)

    def gap(self, x):
        return x.mean((2, 3))

    def reshape(self, x, shape):
        shape = [x.shape[i] if d == 0 else d for i, d in enumerate(shape)]
        return x.reshape(shape)

    def transpose(self, x, perm):
        return x.permute(perm)

    def matmul(self, a, b, transpose_y=False, alpha=1.0):
        y = a @ (b.transpose(-1, -2) if transpose_y else b)
        return y * alpha if alpha != 1.0 else y

    def split(self, x, n, dim):
        return list(self.torch.chunk(x, n, dim))

    def concat(self, xs, dim):
        return self.torch.cat(xs, dim)

    def slice(self, x, axis, start, end):
        return x.narrow(axis, start, end - start)

    def sum(self, x, dim, keep=False):
        return x.sum(dim, keepdim=keep)

    def stack(self, xs, axis):
        return self.torch.stack(xs, axis)

    def ce_loss(self, logits, label):
        return self.F.cross_entropy(logits, label.reshape(-1))

    def bce_loss(self, logit, label):
        return self.F.binary_cross_entropy_with_logits(logit, label)


# -- models (written once, against a backend ``B``) ---------------------------------------------
def conv_bn(B, x, cout, k, stride=1, act="relu", groups=1):
    return B.bn(B.conv(x, cout, k, stride, (k - 1) // 2, groups), act)


def basic_block(B, x, cout, stride):
    y = conv_bn(B, conv_bn(B, x, cout, 3, stride), cout, 3, act=None)
    if stride != 1 or x.shape[1] != cout:
        x = conv_bn(B, x, cout, 1, stride, act=None)
    return B.relu(B.add(y, x))


def bottleneck(B, x, width, stride):
    y = conv_bn(B, conv_bn(B, x, width, 1), width, 3, stride)
    y = conv_bn(B, y, width * 4, 1, act=None)
    if stride != 1 or x.shape[1] != width * 4:
        x = conv_bn(B, x, width * 4, 1, stride, act=None)
    return B.relu(B.add(y, x))


def resnet18(B, x, label):
    x = conv_bn(B, x, 64, 3)
    for i, c in enumerate((64, 128, 256, 512)):
        x = basic_block(B, basic_block(B, x, c, 1 if i == 0 else 2), c, 1)
    return B.ce_loss(B.fc(B.gap(x), 10), label)


def resnet50(B, x, label):
    x = B.maxpool(conv_bn(B, x, 64, 7, 2), 3, 2, 1)
    for i, (width, n) in enumerate(((64, 3), (128, 4), (256, 6), (512, 3))):
        for j in range(n):
            x = bottleneck(B, x, width, 2 if j == 0 and i > 0 else 1)
    return B.ce_loss(B.fc(B.gap(x), 1000), label)


def mobilenetv2(B, x, label):
    x = B.relu6(conv_bn(B, x, 32, 3, 2, act=None))
    for t, c, n, s in ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                       (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)):
        for j in range(n):
            cin, stride = x.shape[1], s if j == 0 else 1
            y = x if t == 1 else B.relu6(conv_bn(B, x, cin * t, 1, act=None))
            y = B.relu6(conv_bn(B, y, cin * t, 3, stride, act=None, groups=cin * t))
            y = conv_bn(B, y, c, 1, act=None)
            x = B.add(x, y) if stride == 1 and cin == c else y
    x = B.relu6(conv_bn(B, x, 1280, 1, act=None))
    return B.ce_loss(B.fc(B.gap(x), 1000), label)


BERT = dict(vocab=30522, hidden=256, layers=4, heads=4, ffn=1024, seq=128)


def bert_layer(B, x):
    H, nh = BERT["hidden"], BERT["heads"]

    def heads(t):
        return B.transpose(B.reshape(t, [0, 0, nh, H // nh]), [0, 2, 1, 3])
    q, k, v = (heads(B.fc(x, H, 0.02)) for _ in range(3))
    p = B.softmax(B.matmul(q, k, transpose_y=True, alpha=(H // nh) ** -0.5))
    ctx = B.reshape(B.transpose(B.matmul(p, v), [0, 2, 1, 3]), [0, 0, H])
    x = B.layer_norm(B.add(x, B.fc(ctx, H, 0.02)))
    return B.layer_norm(B.add(x, B.fc(B.gelu(B.fc(x, BERT["ffn"], 0.02)), H, 0.02)))


def bert(B, ids, pos, label):
    x = B.add(B.embedding(ids, BERT["vocab"], BERT["hidden"], 0.02),
              B.embedding(pos, BERT["seq"], BERT["hidden"], 0.02))
    x = B.layer_norm(x)
    for _ in range(BERT["layers"]):
        x = bert_layer(B, x)
    cls = B.reshape(B.slice(x, 1, 0, 1), [0, BERT["hidden"]])
    return B.ce_loss(B.fc(B.tanh(B.fc(cls, BERT["hidden"], 0.02)), 2, 0.02), label)


LSTM = dict(vocab=10000, hidden=200, layers=2, steps=20)


def lstm_lm(B, ids, label):
    H, T = LSTM["hidden"], LSTM["steps"]
    x = B.embedding(ids, LSTM["vocab"], H, 0.1)                       # [batch, T, H]
    init = Init(7)
    xs = [B.reshape(B.slice(x, 1, t, t + 1), [0, H]) for t in range(T)]
    for _ in range(LSTM["layers"]):
        # the weights are drawn when the parameter is made (once), not on every forward
        w = B.param(lambda: init.normal((2 * H, 4 * H), 0.1))
        b = B.param(lambda: np.zeros(4 * H, np.float32))
        h = c = B.scale(xs[0], 0.0)
        out = []
        for t in range(T):
            gi, gf, gc, go = B.split(B.add(B.matmul(B.concat([xs[t], h], 1), w), b), 4, 1)
            c = B.add(B.mul(B.sigmoid(gf), c), B.mul(B.sigmoid(gi), B.tanh(gc)))
            h = B.mul(B.sigmoid(go), B.tanh(c))
            out.append(h)
        xs = out
    hs = B.reshape(B.stack(xs, 1), [-1, H])
    return B.ce_loss(B.fc(hs, LSTM["vocab"], 0.1), label)


DEEPFM = dict(rows=1_000_000, dim=16, fields=39)


def deepfm(B, ids, label):
    F, D = DEEPFM["fields"], DEEPFM["dim"]
    first = B.sum(B.embedding(ids, DEEPFM["rows"], 1, 0.01, sparse=True), [1, 2])
    emb = B.embedding(ids, DEEPFM["rows"], D, 0.01, sparse=True)       # [batch, F, D]
    s = B.sum(emb, 1)
    second = B.scale(B.sum(B.sub(B.square(s), B.sum(B.square(emb), 1)), 1), 0.5)
    h = B.reshape(emb, [0, F * D])
    for _ in range(3):
        h = B.relu(B.fc(h, 400))
    logit = B.add(B.reshape(B.fc(h, 1), [-1]), B.add(first, second))
    return B.bce_loss(B.reshape(logit, [-1, 1]), label)


# -- workloads ----------------------------------------------------------------------------------
def _conv_opt(mod, params=None):
    """Momentum 0.9 + L2 1e-4 + global-norm clip 5 (torch: SGD momentum + weight_decay)."""
    if mod == "torch":
        return ("sgd", dict(lr=0.01, momentum=0.9, weight_decay=1e-4), 5.0)
    return fluid.optimizer.Momentum(0.01, 0.9, parameter_list=params,
                                    regularization=fluid.regularizer.L2Decay(1e-4),
                                    grad_clip=fluid.clip.GradientClipByGlobalNorm(5.0))


def _adam_opt(mod, params=None):
    if mod == "torch":
        return ("adam", dict(lr=1e-4), 1.0)
    return fluid.optimizer.Adam(1e-4, parameter_list=params,
                                grad_clip=fluid.clip.GradientClipByGlobalNorm(1.0))


def _sgd_opt(lr, clip):
    def make(mod, params=None):
        if mod == "torch":
            return ("sgd", dict(lr=lr), clip)
        return fluid.optimizer.SGD(lr, parameter_list=params, grad_clip=(
            fluid.clip.GradientClipByGlobalNorm(clip) if clip else None))
    return make


def _image(n, c, hw, classes):
    rng = np.random.default_rng(1)
    return {"img": rng.standard_normal((n, c, hw, hw)).astype(np.float32),
            "label": rng.integers(0, classes, (n, 1)).astype(np.int64)}


def _bert_feed(n=8):
    rng = np.random.default_rng(2)
    return {"ids": rng.integers(0, BERT["vocab"], (n, BERT["seq"])).astype(np.int64),
            "pos": np.tile(np.arange(BERT["seq"], dtype=np.int64), (n, 1)),
            "label": rng.integers(0, 2, (n, 1)).astype(np.int64)}


def _lstm_feed(n=20):
    rng = np.random.default_rng(3)
    return {"ids": rng.integers(0, LSTM["vocab"], (n, LSTM["steps"])).astype(np.int64),
            "label": rng.integers(0, LSTM["vocab"], (n * LSTM["steps"], 1)).astype(np.int64)}


def _deepfm_feed(n=512):
    rng = np.random.default_rng(4)
    # Zipf-like ids: a few hot rows, a long tail (what a CTR table sees)
    ids = np.minimum(rng.zipf(1.2, (n, DEEPFM["fields"])), DEEPFM["rows"]) - 1
    return {"ids": ids.astype(np.int64),
            "label": rng.integers(0, 2, (n, 1)).astype(np.float32)}


WORKLOADS = {
    "resnet18": ("ResNet-18 CIFAR, batch 32", resnet18, lambda: _image(32, 3, 32, 10),
                 _conv_opt),
    "resnet50": ("ResNet-50 224x224, batch 8", resnet50, lambda: _image(8, 3, 224, 1000),
                 _conv_opt),
    "mobilenetv2": ("MobileNetV2 224x224, batch 8", mobilenetv2,
                    lambda: _image(8, 3, 224, 1000), _conv_opt),
    "bert": ("BERT-mini, batch 8, seq 128", bert, _bert_feed, _adam_opt),
    "lstm": ("LSTM LM (PTB small), batch 20", lstm_lm, _lstm_feed, _sgd_opt(1.0, 5.0)),
    "deepfm": ("DeepFM 1M x 16 sparse embedding, batch 512", deepfm, _deepfm_feed,
               _sgd_opt(0.01, 0.0)),
}


# -- the three runners --------------------------------------------------------------------------
def static_runner(model, feed, make_opt):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.unique_name.guard(), fluid.program_guard(main, startup):
        ins = [fluid.data(k, [-1] + list(v.shape[1:]), str(v.dtype)) for k, v in feed.items()]
        loss = model(StaticOps(Init()), *ins)
        make_opt("static").minimize(loss)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)

    def step():
        return float(np.asarray(exe.run(main, feed=feed, fetch_list=[loss],
                                        scope=scope)[0]).reshape(-1)[0])
    return step


def dygraph_runner(model, feed, make_opt):
    B, state = DygraphOps(Init()), {}

    def step():
        with dygraph.guard():
            B.i = 0
            loss = model(B, *(dygraph.to_variable(v) for v in feed.values()))
            if "opt" not in state:
                state["params"] = B.parameters()
                state["opt"] = make_opt("dygraph", state["params"])
            loss.backward()
            state["opt"].minimize(loss)
            for p in state["params"]:
                p.clear_gradient()
            return float(loss.numpy().reshape(-1)[0])
    return step


def torch_runner(model, feed, make_opt):
    import torch
    torch.set_num_threads(ARGS.threads)
    B, state = TorchOps(Init()), {}
    ins = [torch.from_numpy(v) for v in feed.values()]

    def step():
        B.i = 0
        loss = model(B, *ins)
        if "opt" not in state:
            kind, kw, clip = make_opt("torch")
            state["params"] = B.parameters()
            cls = torch.optim.Adam if kind == "adam" else torch.optim.SGD
            state["opt"], state["clip"] = cls(state["params"], **kw), clip
        state["opt"].zero_grad(set_to_none=True)
        loss.backward()
        if state["clip"]:
            torch.nn.utils.clip_grad_norm_(state["params"], state["clip"])
        state["opt"].step()
        return float(loss.detach())
    return step


RUNNERS = {"static": static_runner, "dygraph": dygraph_runner, "torch": torch_runner}


def child_peak_rss(name, framework):
    """Peak RSS (MiB) of a fresh process that builds ``framework``'s runner of ``name`` and
    runs 3 steps (one process each: in this one the frameworks' memory would mix)."""
    import subprocess
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", name, framework,
                          "--threads", str(ARGS.threads), "--fl-threads", str(FL_THREADS)],
                         capture_output=True, text=True)
    if out.returncode:
        return float("nan")
    return float(out.stdout.split()[-1])


def _child(name, framework):
    _, model, make_feed, make_opt = WORKLOADS[name]
    step = RUNNERS[framework](model, make_feed(), make_opt)
    for _ in range(3):
        step()
    # VmHWM, not ru_maxrss: Linux carries ru_maxrss of the forked parent across exec
    with open("/proc/self/status") as f:
        print(next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) / 1024.0)


def run(name, torch_ok):
    title, model, make_feed, make_opt = WORKLOADS[name]
    feed = make_feed()
    runners = {"static": static_runner(model, feed, make_opt)}
    if not ARGS.no_dygraph:
        runners["dygraph"] = dygraph_runner(model, feed, make_opt)
    if torch_ok:
        runners["torch"] = torch_runner(model, feed, make_opt)
    first = {k: r() for k, r in runners.items()}
    for k, v in first.items():
        if not np.isclose(v, first["static"], rtol=2e-3, atol=2e-4):
            raise SystemExit(f"{name}: first loss of {k} {v:.6f} != static "
                             f"{first['static']:.6f}")
    for r in runners.values():          # the dygraph step replay starts at the third step
        r(), r()
    times = {k: [] for k in runners}
    cpu = {k: [] for k in runners}
    for _ in range(-(-ARGS.steps // ARGS.block)):
        for k, r in runners.items():
            time.sleep(ARGS.settle)
            t0 = time.perf_counter()    # untimed steps until threads and caches are warm again
            while time.perf_counter() - t0 < ARGS.settle:
                r()
            for _ in range(ARGS.block):
                t0, c0 = time.perf_counter(), time.process_time()
                r()
                times[k].append(time.perf_counter() - t0)
                cpu[k].append(time.process_time() - c0)
    peak = {k: child_peak_rss(name, k) for k in runners} if ARGS.rss else {}
    med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    med.update({"cpu " + k: statistics.median(v) * 1e3 for k, v in cpu.items()})
    return title, first, med, peak


def _ratio(med, a, b):
    return f"{med[a] / med[b]:.2f}" if a in med and b in med else "-"


def main():
    if ARGS.child:
        return _child(*ARGS.child)
    torch_ok = not ARGS.no_torch
    if torch_ok:
        try:
            import torch  # noqa: F401
        except ImportError:
            torch_ok = False
            if not ARGS.only:
                print("note: PyTorch is not installed; no torch column")
    if ARGS.only:                       # a per-model child: its rows only
        ARGS.models = [ARGS.only]
        return _rows(torch_ok)
    print(f"threads={ARGS.threads} (fluidlite's own: {FL_THREADS}); numpy {np.__version__} "
          f"(OpenBLAS {_blas.describe()} kernels); python {sys.version.split()[0]}; "
          f"{ARGS.steps} timed steps per framework, interleaved in blocks of {ARGS.block}; "
          f"median ms/step; peak = peak RSS (MiB) of a fresh process running 3 steps")
    print(f"{'model':<44}{'static':>9}{'dygraph':>9}{'torch':>9}{'st/torch':>9}"
          f"{'dy/torch':>9}{'dy/st':>7}{'peak st':>9}{'peak dy':>9}{'peak t':>8}")
    _rows(torch_ok)


def _model_process(name):
    """The rows of ``name``, timed in a fresh process (the same options)."""
    import subprocess
    argv, skip = [], False
    for a in sys.argv[1:]:              # every option but the model list
        if a in ("-m", "--models"):
            skip = True
            continue
        if a.startswith("--models="):
            continue
        if skip and not a.startswith("-"):
            continue
        skip = False
        argv.append(a)
    out = subprocess.run([sys.executable, os.path.abspath(__file__), *argv, "--only", name],
                         capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"{name}: the benchmark process failed:\n{out.stderr[-2000:]}")
    return out.stdout


def _rows(torch_ok):
    for name in ARGS.models:
        if len(ARGS.models) > 1 and not ARGS.one_process:
            print(_model_process(name), end="", flush=True)
            continue
        title, first, med, peak = run(name, torch_ok)

        def col(k, d=med):
            return f"{d[k]:9.1f}" if k in d else f"{'-':>9}"
        pk = peak
        print(f"{title:<44}{col('static')}{col('dygraph')}{col('torch')}"
              f"{_ratio(med, 'static', 'torch'):>9}{_ratio(med, 'dygraph', 'torch'):>9}"
              f"{_ratio(med, 'dygraph', 'static'):>7}{col('static', pk)}{col('dygraph', pk)}"
              f"{col('torch', pk)[1:]}", flush=True)
        print(f"{'':<4}first losses: " + ", ".join(f"{k} {v:.5f}" for k, v in first.items()))
        cpu = {k[4:]: v for k, v in med.items() if k.startswith("cpu ")}
        print(f"{'':<4}process CPU ms/step (all threads): " + ", ".join(
            f"{k} {v:.1f}" for k, v in cpu.items()) + f"; static/torch "
            f"{_ratio(cpu, 'static', 'torch')}, dygraph/static {_ratio(cpu, 'dygraph', 'static')}")


if __name__ == "__main__":
    main()
