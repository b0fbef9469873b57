"""The fluid 1.8 model zoo's own *dygraph* models on fluidlite.

Runs PaddlePaddle/models at branch release/1.8 (pinned commit ``zoo18.ZOO_COMMIT``), directory
``dygraph/``, unchanged: each model's own classes (``train.py`` / ``model.py`` / ``nets.py`` ...)
and, where the script defines one in a function, its own optimizer, imported as ``paddle.fluid``
through ``fluidlite run``'s import hook. The zoo's code is never copied into this repository:
point the runner at a checkout of it. This module holds only glue: which file and class, the
constructor arguments (the model's defaults, with vocabulary / hidden / layer / image sizes
shrunk through its own arguments or config to keep each model near a minute) and synthetic
inputs of the shapes and dtypes the model's training loop feeds.

Per model, in a process of its own, inside ``fluid.dygraph.guard()``:

* ``build``: the model is constructed and runs forward on one batch;
* ``train``: ``TRAIN_STEPS`` steps (``loss.backward()``, ``optimizer.minimize``,
  ``clear_gradients``) with the script's optimizer keep the loss finite;
* ``learn``: ``STEPS`` steps on one fixed batch bring the loss (the mean of the last five) at
  least 5 % below its start (the criterion of tests/real/zoo18.py);
* ``round_trip``: ``fluid.save_dygraph`` of the model's and the optimizer's state, then
  ``fluid.load_dygraph`` into a fresh model and optimizer (``set_dict``) gives the same
  parameters, the same optimizer state and identical eval-mode outputs.

Models that cannot run here are listed in ``SKIPPED`` with the reason. Where a model runs
in several variants the runner names them ``<dir>_<variant>`` (``sentiment_cnn``,
``seq2seq_attention``, ``similarity_net_gru``, ``mobilenet_v1`` ...). Glue that is not only
shapes and sizes is said where it is: stand-ins for packages a script imports but the harness
never uses (PIL, cv2, pandas, scipy.misc), ``collections.Sequence`` for Python > 3.8, and the
sentiment nets' loss taken from their prediction (their ``if label:`` is refused by fluid
1.8.0+ itself for a batch of labels).

Usage (a few minutes on an idle 2-core machine; prints a table, writes ``summary.json``)::

    git clone https://github.com/PaddlePaddle/models zoo && git -C zoo checkout ZOO_COMMIT
    python -m tests.real.zoo18_dygraph zoo [--models resnet ptb_lm] [--out DIR]

``tests/real/test_zoo18_dygraph.py`` runs the same when ``FLUIDLITE_ZOO18`` names the checkout.
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import traceback
import types
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from . import zoo18

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
ZOO_COMMIT = zoo18.ZOO_COMMIT      # PaddlePaddle/models release/1.8
ZOO_SUBDIR = "dygraph"
STAGES = ("build", "train", "learn", "round_trip")
TRAIN_STEPS, STEPS, SEED = 3, 15, 7
# the models of dygraph/ that cannot run here, and why
SKIPPED = {
    "word2vec": "word2vec.py downloads and preprocesses the text8 corpus at import time (no "
                "network); its SkipGram class is defined after that module-level code, and "
                "it is written for fluid <= 1.6: Embedding(self.full_name(), size=...) is a "
                "TypeError in fluid 1.8 itself (1.8: Embedding(size, is_sparse, ...))",
}
# dygraph/reinforcement_learning's scripts train at import time until gym's CartPole is
# solved, so they run whole, as a user starts them (``fluidlite run SCRIPT``): ``train`` = the
# script ran its episodes, ``learn`` = it printed "Solved!" (running reward above CartPole-v0's
# threshold of 195), ``round_trip`` = its ``test_*_load.py`` reloads the saved policy and
# scores at least that threshold. They need gym's old API (``env.seed``, a 4-tuple ``step``:
# gym <= 0.25, which itself needs NumPy 1.x): ``pip install gym==0.25.2`` in a NumPy 1 venv.
RL_SCRIPTS = {"reinforcement_learning_reinforce": "reinforce.py",
              "reinforcement_learning_actor_critic": "actor_critic.py"}
RL_THRESHOLD, RL_TIMEOUT = 195.0, 900


def _gym_problem() -> Optional[str]:
    """Why this interpreter cannot run the RL scripts' CartPole, or None."""
    import warnings
    try:
        with warnings.catch_warnings():
            import gym
            warnings.simplefilter("ignore")      # after the import: gym adds its own filters
            env = gym.make("CartPole-v0")
            env.seed(0)
            env.reset()
            step = env.step(0)
        if len(step) != 4:
            return f"gym {gym.__version__}'s step returns {len(step)} values (the scripts unpack 4)"
    except Exception as e:      # any failure of the third-party package means: not usable here
        return (f"gym's CartPole with the scripts' API (env.seed, a 4-tuple step: gym <= 0.25, "
                f"which needs NumPy 1.x) is not usable here: {type(e).__name__}: {e}"[:300])
    return None


_GYM = _gym_problem()
if _GYM is not None:
    SKIPPED["reinforcement_learning"] = "reinforce.py / actor_critic.py: " + _GYM


# -- glue shared by the model specs ------------------------------------------------------------
class Spec:
    """What the stages need of one model: ``make()`` a fresh model, ``batch`` (numpy inputs),
    ``loss(model, inputs)`` (a scalar Variable, as the script's training loop computes it),
    ``infer(model, inputs)`` (the output compared after the round trip) and
    ``optimizer(model)`` (the script's own)."""

    def __init__(self, make: Callable[[], Any], batch: List[np.ndarray],
                 loss: Callable[[Any, List[Any]], Any], optimizer: Callable[[Any], Any],
                 infer: Optional[Callable[[Any, List[Any]], Any]] = None,
                 learn_optimizer: Optional[Callable[[Any], Any]] = None,
                 step: Optional[Callable[[Any, Any], None]] = None,
                 inner: Callable[[Any], Any] = lambda opt: opt) -> None:
        self.make, self.batch, self.loss, self.optimizer = make, batch, loss, optimizer
        self.infer = infer or loss
        self.learn_optimizer = learn_optimizer or optimizer
        # the update from a loss (default: backward, minimize), and the fluid optimizer
        # inside the script's own optimizer object (whose state is saved)
        self.step = step or _backward_minimize
        self.inner = inner


def _backward_minimize(opt: Any, loss: Any) -> None:
    loss.backward()
    opt.minimize(loss)


class _Absent(types.ModuleType):
    """A stand-in for a package a zoo script imports at its top but the harness never uses
    (PIL for MNIST's inference helper and the readers, cv2 for the video reader): any name
    imported from it is another stand-in, and calling one raises."""

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Absent(f"{self.__name__}.{attr}")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise ImportError(f"{self.__name__} is not installed (the zoo script imports it; the "
                          f"harness does not use it)")


def _absent(*names: str) -> None:
    for name in names:
        sys.modules.setdefault(name, _Absent(name))


def _import_classes(name: str) -> types.ModuleType:
    """A zoo script that trains at import time (``ptb_dy.py`` ends in ``train_ptb_lm()``):
    executed until that training fails for want of its data set; the classes it defined
    before are kept."""
    spec = importlib.util.find_spec(name)
    mod = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(mod)
    except (OSError, SystemExit, ValueError, RuntimeError):
        pass
    return mod


def _enter(zoo: str, model_dir: str, argv: Optional[List[str]] = None) -> None:
    """The import hook, the model's directory first on ``sys.path`` and ``sys.argv`` as the
    script would be started (several scripts parse arguments at import time)."""
    from fluidlite.paddle_compat.run import PaddleAlias
    sys.meta_path.insert(0, PaddleAlias())
    # the zoo targets Python <= 3.8, where collections still re-exported the ABCs
    # (similarity_net's paddle_layers.py tests isinstance(seq, collections.Sequence))
    import collections
    import collections.abc
    for abc in ("Sequence", "Mapping", "Iterable"):
        if not hasattr(collections, abc):
            setattr(collections, abc, getattr(collections.abc, abc))
    path = os.path.join(zoo, ZOO_SUBDIR, model_dir)
    sys.path.insert(0, path)
    os.chdir(path)
    sys.argv = ["train.py"] + (argv or [])


def _ce_loss(prob_of: Callable[[Any, Any], Any]) -> Callable[[Any, List[Any]], Any]:
    """``mean(cross_entropy(softmax-probabilities, label))`` as the CV scripts' loops."""
    def loss(model: Any, inputs: List[Any]) -> Any:
        import paddle.fluid as fluid
        return fluid.layers.mean(fluid.layers.cross_entropy(prob_of(model, inputs[0]),
                                                            inputs[1]))
    return loss


def _images(shape: List[int], classes: int) -> List[np.ndarray]:
    rng = np.random.RandomState(SEED)
    return [rng.rand(*shape).astype("float32"),
            rng.randint(0, classes, (shape[0], 1)).astype("int64")]


def _softmax_of(model: Any, x: Any) -> Any:
    import paddle.fluid as fluid
    return fluid.layers.softmax(model(x), use_cudnn=False)


# -- the models ---------------------------------------------------------------------------------
def spec_mnist(zoo: str) -> Spec:
    _absent("PIL")
    _enter(zoo, "mnist")
    train = importlib.import_module("train")
    from paddle.fluid.optimizer import AdamOptimizer
    return Spec(train.MNIST, _images([8, 1, 28, 28], 10),
                lambda m, xs: _mnist_loss(m, xs),
                lambda m: AdamOptimizer(learning_rate=0.001, parameter_list=m.parameters()),
                infer=lambda m, xs: m(xs[0]))


def _mnist_loss(model: Any, inputs: List[Any]) -> Any:
    import paddle.fluid as fluid
    prob, _ = model(inputs[0], inputs[1])
    return fluid.layers.mean(fluid.layers.cross_entropy(prob, inputs[1]))


def spec_resnet(zoo: str) -> Spec:
    _enter(zoo, "resnet", ["--batch_size", "4"])
    train = importlib.import_module("train")

    def slow(m: Any) -> Any:
        # `learn`: train.py's optimizer_setting with its module-level base_lr 0.1 set to 0.002
        # (as tests/real/zoo18.py's --lr): 0.1 thrashes on one batch of 4 images
        saved, train.base_lr = train.base_lr, 0.002
        try:
            return train.optimizer_setting(parameter_list=m.parameters())
        finally:
            train.base_lr = saved
    return Spec(lambda: train.ResNet(layers=50, class_dim=10), _images([4, 3, 32, 32], 10),
                _ce_loss(lambda m, x: m(x)),
                lambda m: train.optimizer_setting(parameter_list=m.parameters()),
                infer=lambda m, xs: m(xs[0]), learn_optimizer=slow)


def spec_se_resnet(zoo: str) -> Spec:
    _enter(zoo, "se_resnet")
    train = importlib.import_module("train")
    return Spec(lambda: train.SeResNeXt(layers=50, class_dim=10), _images([4, 3, 32, 32], 10),
                _ce_loss(_softmax_of),
                lambda m: train.optimizer_setting(train.train_parameters, m.parameters()),
                infer=lambda m, xs: m(xs[0]))


def _spec_mobilenet(zoo: str, version: str) -> Spec:
    _enter(zoo, "mobilenet", ["--model", "MobileNet" + version, "--class_dim", "10",
                              "--batch_size", "4", "--use_gpu", "False"])
    mod = importlib.import_module("mobilenet_" + version.lower())
    from utils import optimizer, utility
    args = utility.parse_args()
    cls = getattr(mod, "MobileNet" + version)
    # mobilenet_v1.py reshapes to a fixed 1024 channels: only scale 1.0 runs there
    scale = 1.0 if version == "V1" else 0.25
    # `learn`: the same optimizer (piecewise-decay Momentum, L2 decay) at --lr 0.002, as
    # tests/real/zoo18.py: the zoo's 0.1 thrashes on one batch of 4 images
    slow = argparse.Namespace(**dict(vars(args), lr=0.002))
    return Spec(lambda: cls(scale=scale, class_dim=10), _images([4, 3, 64, 64], 10),
                _ce_loss(_softmax_of),
                lambda m: optimizer.create_optimizer(args=args, parameter_list=m.parameters()),
                infer=lambda m, xs: m(xs[0]),
                learn_optimizer=lambda m: optimizer.create_optimizer(
                    args=slow, parameter_list=m.parameters()))


def spec_mobilenet_v1(zoo: str) -> Spec:
    return _spec_mobilenet(zoo, "V1")


def spec_mobilenet_v2(zoo: str) -> Spec:
    return _spec_mobilenet(zoo, "V2")


def spec_tsm(zoo: str) -> Spec:
    _absent("cv2", "PIL")
    _enter(zoo, "tsm")
    from config_utils import merge_configs, parse_config
    model = importlib.import_module("model")
    train = importlib.import_module("train")
    cfg = parse_config("tsm.yaml")
    cfg.MODEL.num_classes, cfg.MODEL.seg_num = 10, 2       # shrunk: 10 classes, 2 segments
    train_cfg = merge_configs(cfg, "train", {})
    rng = np.random.RandomState(SEED)
    batch = [rng.rand(2, 2, 3, 32, 32).astype("float32"),
             rng.randint(0, 10, (2, 1)).astype("int64")]
    return Spec(lambda: model.TSM_ResNet("TSM", train_cfg), batch,
                _ce_loss(lambda m, x: m(x)),
                lambda m: train.create_optimizer(train_cfg.TRAIN, m.parameters()),
                infer=lambda m, xs: m(xs[0]))


def _spec_sentiment(zoo: str, net: str) -> Spec:
    vocab, batch_size, seq_len = 100, 4, 16
    _enter(zoo, "sentiment", ["--vocab_size", str(vocab), "--batch_size", str(batch_size),
                              "--padding_size", str(seq_len), "--use_cuda", "False"])
    main = importlib.import_module("main")
    nets = importlib.import_module("nets")
    rng = np.random.RandomState(SEED)
    doc = rng.randint(0, vocab, (batch_size, seq_len)).astype("int64")
    doc[:, seq_len - 3:] = vocab                      # padded with vocab_size, as main.py does
    batch = [doc.reshape(-1), rng.randint(0, 2, (batch_size, 1)).astype("int64")]
    cls = getattr(nets, net)

    def loss(m: Any, xs: List[Any]) -> Any:
        if net == "BOW":            # the one net that tests `label is not None`
            return m(xs[0], xs[1])[0]
        # CNN / GRU / BiGRU test `if label:`, which fluid 1.8.0+ (and fluidlite) refuse for a
        # batch of labels ("Variable can only contain one element"): the nets' own loss
        # (mean cross-entropy of the prediction) from the prediction they return
        return main.fluid.layers.mean(main.fluid.layers.cross_entropy(m(xs[0]), xs[1]))
    return Spec(lambda: cls(vocab, batch_size, seq_len), batch, loss,
                lambda m: main.fluid.optimizer.Adagrad(learning_rate=main.args.lr,
                                                       parameter_list=m.parameters()),
                infer=lambda m, xs: m(xs[0]))


def spec_sentiment_cnn(zoo: str) -> Spec:
    return _spec_sentiment(zoo, "CNN")


def spec_sentiment_bow(zoo: str) -> Spec:
    return _spec_sentiment(zoo, "BOW")


def spec_sentiment_gru(zoo: str) -> Spec:
    return _spec_sentiment(zoo, "GRU")


def spec_sentiment_bigru(zoo: str) -> Spec:
    return _spec_sentiment(zoo, "BiGRU")


def spec_ptb_lm(zoo: str) -> Spec:
    # the script's "small" configuration with a 1000-word vocabulary
    hidden, vocab, layers, steps, batch_size = 200, 1000, 2, 20, 4
    _enter(zoo, "ptb_lm", ["--use_gpu", "False", "--data_path", "no-such-dir"])
    ptb = _import_classes("ptb_dy")
    import paddle.fluid as fluid
    rng = np.random.RandomState(SEED)
    zeros = np.zeros((layers, batch_size, hidden), dtype="float32")
    batch = [rng.randint(0, vocab, (batch_size, steps, 1)).astype("int64"),
             rng.randint(0, vocab, (batch_size, steps, 1)).astype("int64"), zeros, zeros]

    def optimizer(m: Any) -> Any:       # ptb_dy.py's: SGD, piecewise decay from 1.0, clip 5
        return ptb.SGDOptimizer(
            learning_rate=fluid.layers.piecewise_decay(boundaries=[100], values=[1.0, 0.5]),
            parameter_list=m.parameters(),
            grad_clip=fluid.clip.GradientClipByGlobalNorm(5.0))
    return Spec(lambda: ptb.PtbModel(hidden, vocab, layers, steps, init_scale=0.1,
                                     dropout=0.0),
                batch, lambda m, xs: m(*xs)[0], optimizer)


def spec_ocr_recognition(zoo: str) -> Spec:
    # train.py's defaults (encoder 200, decoder 128, word vectors 128, 95 classes, Adam with
    # global-norm clip 5); 48-pixel-high images as its reader's, 64 wide; 4-token labels
    batch_size, steps, classes = 2, 4, 95
    _absent("PIL")
    _enter(zoo, "ocr_recognition", ["--batch_size", str(batch_size), "--use_gpu", "False"])
    train = importlib.import_module("train")
    nets = importlib.import_module("nets")
    args, fluid = train.parser.parse_args(), train.fluid
    rng = np.random.RandomState(SEED)
    mask = np.ones((batch_size, steps), "float32")
    mask[0, -1] = 0.0
    batch = [rng.rand(batch_size, 1, 48, 64).astype("float32"),
             rng.randint(0, classes, (batch_size, steps)).astype("int64"),
             rng.randint(0, classes, (batch_size, steps)).astype("int64"), mask.reshape(-1)]

    def loss(m: Any, xs: List[Any]) -> Any:         # train.py's loop
        img, label_in, label_out, mask_v = xs
        pred = m(img, label_in)
        pred = fluid.layers.reshape(pred, [label_out.shape[0] * label_out.shape[1], -1],
                                    inplace=False)
        label_out = fluid.layers.reshape(label_out, [-1, 1], inplace=False)
        cost = fluid.layers.cross_entropy(input=pred, label=label_out)
        return fluid.layers.reduce_sum(fluid.layers.elementwise_mul(cost, mask_v, axis=0))

    def optimizer(m: Any) -> Any:
        return fluid.optimizer.Adam(
            learning_rate=args.lr, parameter_list=m.parameters(),
            grad_clip=fluid.clip.GradientClipByGlobalNorm(args.gradient_clip))
    return Spec(lambda: nets.OCRAttention(
        batch_size=batch_size, encoder_size=args.encoder_size, decoder_size=args.decoder_size,
        num_classes=args.num_classes, word_vector_dim=args.word_vector_dim), batch, loss,
        optimizer)


def spec_lac(zoo: str) -> Spec:
    # conf/args.yaml's defaults (128-wide embeddings and GRUs, 2 BiGRUs, Adam 1e-3); train.py
    # reads them through utils.load_yaml, whose bare yaml.load PyYAML 6 refuses: the same
    # defaults read here; a 100-word vocabulary, 57 labels as conf/tag.dic
    _enter(zoo, "lac")
    seq = importlib.import_module("sequence_labeling")
    args = _yaml_args("conf/args.yaml", batch_size=4)       # h_0 is built for it
    vocab, labels, batch_size, steps = 100, 57, args.batch_size, 8
    rng = np.random.RandomState(SEED)
    batch = [rng.randint(0, vocab, (batch_size, steps)).astype("int64"),
             rng.randint(0, labels, (batch_size, steps)).astype("int64"),
             np.array([8, 6, 8, 3], "int64")]
    import paddle.fluid as fluid
    return Spec(lambda: seq.lex_net(args, vocab, labels), batch,
                lambda m, xs: m(xs[0], xs[1], xs[2])[0],
                lambda m: fluid.optimizer.AdamOptimizer(
                    learning_rate=args.base_learning_rate, parameter_list=m.parameters()),
                infer=lambda m, xs: m(xs[0], length=xs[2]))


def _spec_seq2seq(zoo: str, attention: bool) -> Spec:
    # run.sh's configuration (2 layers, dropout 0.2, init scale 0.1 -- args.py's default
    # init scale 0.0 makes every parameter zero --, Adam 1e-3, global-norm clip 5) with
    # hidden 32 and 100-word vocabularies
    batch_size, vocab, src_len, tar_len = 4, 100, 7, 6
    _enter(zoo, "seq2seq", ["--hidden_size", "32", "--src_vocab_size", str(vocab),
                            "--tar_vocab_size", str(vocab), "--batch_size", str(batch_size),
                            "--num_layers", "2", "--dropout", "0.2", "--init_scale", "0.1",
                            "--max_grad_norm", "5.0"])
    from args import parse_args
    base_model = importlib.import_module("base_model")
    attention_model = importlib.import_module("attention_model")
    import paddle.fluid as fluid
    args = parse_args()
    cls = attention_model.AttentionModel if attention else base_model.BaseModel

    def optimizer(lr: float) -> Callable[[Any], Any]:
        # train.py's Adam with global-norm clipping; `learn` at 0.01 (1e-3 moves the loss of
        # this small model < 1 % in 15 steps)
        return lambda m: fluid.optimizer.Adam(
            lr, parameter_list=m.parameters(),
            grad_clip=fluid.clip.GradientClipByGlobalNorm(args.max_grad_norm))
    rng = np.random.RandomState(SEED)
    tar = rng.randint(0, vocab, (batch_size, tar_len + 1)).astype("int64")
    batch = [rng.randint(0, vocab, (batch_size, src_len)).astype("int64"), tar[:, :-1],
             tar[:, 1:].reshape(batch_size, tar_len, 1),
             np.array([7, 5, 7, 3], "int64"), np.array([6, 6, 4, 2], "int64")]
    return Spec(lambda: cls(args.hidden_size, args.src_vocab_size, args.tar_vocab_size,
                            args.batch_size, num_layers=args.num_layers,
                            init_scale=args.init_scale, dropout=args.dropout),
                batch, lambda m, xs: m(batch),         # the model converts numpy itself
                optimizer(args.learning_rate), learn_optimizer=optimizer(0.01))


def spec_seq2seq_base(zoo: str) -> Spec:
    return _spec_seq2seq(zoo, False)


def spec_seq2seq_attention(zoo: str) -> Spec:
    return _spec_seq2seq(zoo, True)


def _yaml_args(path: str, **shrunk: Any) -> argparse.Namespace:
    """A zoo config file's values (flat, or grouped as ``{group: {name: {val: ...}}}``), with
    the sizes the harness shrinks."""
    import yaml
    with open(path, encoding="utf8") as f:
        conf = yaml.safe_load(f)
    if all(isinstance(g, dict) and all(isinstance(v, dict) and "val" in v
                                       for v in g.values()) for g in conf.values()):
        conf = {k: v["val"] for g in conf.values() for k, v in g.items()}
    conf.update(shrunk)
    return argparse.Namespace(**conf)


def spec_transformer(zoo: str) -> Spec:
    # transformer.yaml (the model as train.py builds it, its label-smoothed criterion and Adam
    # with NoamDecay) with 2 layers, 2 heads, d_model 32 and 100-word vocabularies; `learn`
    # uses a 20-step warm-up in place of 8000 (whose first steps barely move)
    _enter(zoo, "transformer")
    model = importlib.import_module("model")
    import paddle.fluid as fluid
    args = _yaml_args("transformer.yaml", n_layer=2, n_head=2, d_key=16, d_value=16,
                      d_model=32, d_inner_hid=64, src_vocab_size=100, trg_vocab_size=100,
                      max_length=16)
    b, s, t, h = 2, 6, 5, args.n_head
    rng = np.random.RandomState(SEED)
    src_len, trg_len = np.array([6, 4]), np.array([5, 3])
    src_bias = np.zeros((b, h, s, s), "float32")
    for i, n in enumerate(src_len):
        src_bias[i, :, :, n:] = -1e9
    trg_bias = np.tile(np.triu(np.ones((t, t)), 1) * -1e9, (b, h, 1, 1)).astype("float32")
    weight = (np.arange(t)[None, :] < trg_len[:, None]).astype("float32").reshape(-1, 1)
    batch = [rng.randint(2, 100, (b, s)).astype("int64"),
             np.tile(np.arange(s), (b, 1)).astype("int64"), src_bias,
             rng.randint(2, 100, (b, t)).astype("int64"),
             np.tile(np.arange(t), (b, 1)).astype("int64"), trg_bias,
             np.ascontiguousarray(src_bias[:, :, :1, :].repeat(t, axis=2)),
             rng.randint(2, 100, (b * t, 1)).astype("int64"), weight]
    criterion = model.CrossEntropyCriterion(args.label_smooth_eps)

    def make() -> Any:
        return model.Transformer(
            args.src_vocab_size, args.trg_vocab_size, args.max_length + 1, args.n_layer,
            args.n_head, args.d_key, args.d_value, args.d_model, args.d_inner_hid,
            args.prepostprocess_dropout, args.attention_dropout, args.relu_dropout,
            args.preprocess_cmd, args.postprocess_cmd, args.weight_sharing, args.bos_idx,
            args.eos_idx)

    def optimizer(warmup: int) -> Callable[[Any], Any]:
        return lambda m: fluid.optimizer.Adam(
            learning_rate=model.NoamDecay(args.d_model, warmup, args.learning_rate),
            beta1=args.beta1, beta2=args.beta2, epsilon=float(args.eps),
            parameter_list=m.parameters())
    return Spec(make, batch, lambda m, xs: criterion(m(*xs[:7]), xs[7], xs[8])[1],
                optimizer(args.warmup_steps), infer=lambda m, xs: m(*xs[:7]),
                learn_optimizer=optimizer(20))


def spec_bert(zoo: str) -> Spec:
    # pre-training (train.py): PretrainModelLayer and optimization.Optimizer (Adam, linear
    # warm-up decay, decoupled weight decay) at train.py's defaults; the model config (shipped
    # with the pretrained checkpoints, not in the zoo) is written here: 2 layers, hidden 32,
    # 2 heads, 100 words; `learn` warms up over 5 steps in place of 4000, to 1e-3 (1e-4
    # moves this small model too little in 15 steps)
    import json
    config = {"attention_probs_dropout_prob": 0.1, "hidden_act": "gelu",
              "hidden_dropout_prob": 0.1, "hidden_size": 32, "initializer_range": 0.02,
              "max_position_embeddings": 64, "num_attention_heads": 2,
              "num_hidden_layers": 2, "type_vocab_size": 2, "vocab_size": 100}
    path = os.path.join(tempfile.mkdtemp(prefix="bert-"), "bert_config.json")
    with open(path, "w") as f:
        json.dump(config, f)
    _enter(zoo, "bert", ["--bert_config_path", path, "--use_cuda", "False"])
    train = importlib.import_module("train")
    args = train.args
    bert_config = train.BertConfig(args.bert_config_path)
    b, s_len = 2, 8
    rng = np.random.RandomState(SEED)
    mask = np.ones((b, s_len, 1), "float32")
    mask[1, 6:] = 0.0
    batch = [rng.randint(0, 100, (b, s_len)).astype("int64"),
             np.tile(np.arange(s_len), (b, 1)).astype("int64"),
             np.zeros((b, s_len), "int64"), mask,
             rng.randint(0, 100, (3, 1)).astype("int64"),
             np.array([[1], [4], [10]], "int64"),        # flat positions in the batch
             rng.randint(0, 2, (b, 1)).astype("int64")]

    def optimizer(warmup: int, lr: float) -> Callable[[Any], Any]:
        return lambda m: train.Optimizer(
            warmup_steps=warmup, num_train_steps=args.num_train_steps,
            learning_rate=lr, model_cls=m, weight_decay=args.weight_decay,
            scheduler=args.lr_scheduler, loss_scaling=args.loss_scaling,
            parameter_list=m.parameters())
    return Spec(lambda: train.PretrainModelLayer(config=bert_config, return_pooled_out=True,
                                                 weight_sharing=args.weight_sharing,
                                                 use_fp16=args.use_fp16),
                batch, lambda m, xs: m(*xs)[3],
                optimizer(args.warmup_steps, args.learning_rate),
                learn_optimizer=optimizer(5, 1e-3),
                step=lambda opt, loss: opt.optimization(loss),
                inner=lambda opt: opt.optimizer)


def _spec_similarity_net(zoo: str, config: str) -> Spec:
    # run_classifier.py's pairwise training: the net and hinge loss its config/*.json names,
    # its optimizer from the same config; a 100-word vocabulary, sequences of 8
    import json
    _enter(zoo, "similarity_net")
    utils = importlib.import_module("utils")
    import paddle.fluid as fluid
    with open(os.path.join("config", config + ".json")) as f:
        conf = json.load(f)
    conf["dict_size"], conf["seq_len"] = 100, 8
    net_cls = utils.import_class("./nets", conf["net"]["module_name"],
                                 conf["net"]["class_name"])
    loss_fn = utils.import_class("./nets/losses", conf["loss"]["module_name"],
                                 conf["loss"]["class_name"])(conf)
    rng = np.random.RandomState(SEED)
    batch = [rng.randint(0, 100, (4, 8)).astype("int64") for _ in range(3)]

    def loss(m: Any, xs: List[Any]) -> Any:       # run_classifier.py's pairwise loop
        left, pos, neg = (fluid.layers.reshape(x, shape=[-1, 1]) for x in xs)
        _, pos_score = m(left, pos)
        _, neg_score = m(left, neg)
        return loss_fn.compute(pos_score, neg_score)

    def optimizer(m: Any) -> Any:
        opt = conf["optimizer"]
        if opt["class_name"] == "SGDOptimizer":
            return fluid.optimizer.SGDOptimizer(opt["learning_rate"],
                                                parameter_list=m.parameters())
        return fluid.optimizer.AdamOptimizer(opt["learning_rate"], beta1=opt["beta1"],
                                             beta2=opt["beta2"], epsilon=opt["epsilon"],
                                             parameter_list=m.parameters())
    return Spec(lambda: net_cls(conf), batch, loss, optimizer,
                infer=lambda m, xs: m(fluid.layers.reshape(xs[0], shape=[-1, 1]),
                                      fluid.layers.reshape(xs[1], shape=[-1, 1]))[1])


def spec_similarity_net_bow(zoo: str) -> Spec:
    return _spec_similarity_net(zoo, "bow_pairwise")


def spec_similarity_net_cnn(zoo: str) -> Spec:
    return _spec_similarity_net(zoo, "cnn_pairwise")


def spec_similarity_net_gru(zoo: str) -> Spec:
    return _spec_similarity_net(zoo, "gru_pairwise")


def spec_similarity_net_lstm(zoo: str) -> Spec:
    return _spec_similarity_net(zoo, "lstm_pairwise")


def spec_cycle_gan(zoo: str) -> Spec:
    # train.py's generator update (Cycle_Gan(..., is_G=True)'s g_loss: cycle, adversarial and
    # identity terms; Adam beta1 0.5 with its piecewise decay over the two generators'
    # parameters) on 32-pixel images, batch 1 as train.py; the discriminator updates (the same
    # code path with other parameter lists) are not repeated
    _absent("PIL", "scipy.misc")
    _enter(zoo, "cycle_gan")
    train = importlib.import_module("train")
    rng = np.random.RandomState(SEED)
    batch = [rng.rand(1, 3, 32, 32).astype("float32") * 2 - 1,
             rng.rand(1, 3, 32, 32).astype("float32") * 2 - 1]

    def gen_params(m: Any) -> List[Any]:
        return (m.build_generator_resnet_9blocks_a.parameters() +
                m.build_generator_resnet_9blocks_b.parameters())
    return Spec(lambda: train.Cycle_Gan(input_channel=3, istrain=True), batch,
                lambda m, xs: m(xs[0], xs[1], True, False, False)[-1],
                lambda m: train.optimizer_setting(gen_params(m)))


def spec_bmn(zoo: str) -> Spec:
    # train.py's BMN, bmn_loss_func and optimizer (Adam, piecewise decay, L2 decay) with
    # bmn.yaml's values, the temporal and duration scales shrunk from 100 to 16; batch 2
    _absent("pandas")            # bmn_utils.py's evaluation helpers only
    _enter(zoo, "bmn")
    train = importlib.import_module("train")
    model = importlib.import_module("model")
    cfg = train.parse_config("bmn.yaml")
    cfg.MODEL.tscale = cfg.MODEL.dscale = 16
    cfg = train.merge_configs(cfg, "train", {})
    t, d, b = cfg.MODEL.tscale, cfg.MODEL.dscale, 2
    rng = np.random.RandomState(SEED)
    gt_iou = rng.rand(b, d, t).astype("float32")
    gt_iou[gt_iou < 0.6] = 0.0
    batch = [rng.rand(b, cfg.MODEL.feat_dim, t).astype("float32"), gt_iou,
             (rng.rand(b, t) > 0.8).astype("float32"), (rng.rand(b, t) > 0.8).astype("float32")]
    import paddle.fluid as fluid

    def loss(m: Any, xs: List[Any]) -> Any:       # train.py's loop
        pred_bm, pred_start, pred_end = m(xs[0])
        return fluid.layers.mean(model.bmn_loss_func(pred_bm, pred_start, pred_end, xs[1],
                                                     xs[2], xs[3], cfg)[0])
    return Spec(lambda: model.BMN(cfg), batch, loss,
                lambda m: train.optimizer(cfg, parameter_list=m.parameters()),
                infer=lambda m, xs: m(xs[0]))


def spec_yolov3(zoo: str) -> Spec:
    # models/yolov3.py's YOLOv3(3, is_train=True): DarkNet-53, three detection heads and the sum
    # of their yolov3_loss means, on 64-pixel images (sizes are multiples of 32), batch 2, with
    # the reader's 50 ground-truth slots (three real boxes per image, the rest zero) and
    # config.py's cfg completed by utility.parse_args (label_smooth). train.py builds its
    # optimizer inline in train(): the same construction here with cfg's values (Momentum 0.9,
    # L2Decay 5e-4, piecewise decay under a linear warmup from 0 over 4000 iterations);
    # `learn` takes it without the warmup, which would keep the rate near 0 for 15 steps
    _enter(zoo, "yolov3", ["--use_gpu", "False", "--batch_size", "2", "--input_size", "64"])
    importlib.import_module("utility").parse_args()
    cfg = importlib.import_module("config").cfg
    yolov3 = importlib.import_module("models.yolov3")
    import paddle.fluid as fluid
    rng = np.random.RandomState(SEED)
    b, slots, real = 2, cfg.max_box_num, 3
    boxes = np.zeros((b, slots, 4), "float32")
    boxes[:, :real, :2] = rng.uniform(0.2, 0.8, (b, real, 2))
    boxes[:, :real, 2:] = rng.uniform(0.1, 0.5, (b, real, 2))
    labels = np.zeros((b, slots), "int32")
    labels[:, :real] = rng.randint(0, cfg.class_num, (b, real))
    scores = np.zeros((b, slots), "float32")
    scores[:, :real] = 1.0
    batch = [rng.rand(b, 3, cfg.input_size, cfg.input_size).astype("float32"), boxes, labels,
             scores]

    def optimizer(warmup: bool) -> Callable[[Any], Any]:
        def make(m: Any) -> Any:               # train.py's train(), lines 88-107
            values = [cfg.learning_rate * (cfg.lr_gamma ** i)
                      for i in range(len(cfg.lr_steps) + 1)]
            lr = fluid.dygraph.PiecewiseDecay(boundaries=cfg.lr_steps, values=values, begin=0)
            if warmup:
                lr = fluid.layers.linear_lr_warmup(learning_rate=lr,
                                                   warmup_steps=cfg.warm_up_iter,
                                                   start_lr=0.0, end_lr=cfg.learning_rate)
            return fluid.optimizer.Momentum(
                learning_rate=lr, regularization=fluid.regularizer.L2Decay(cfg.weight_decay),
                momentum=cfg.momentum, parameter_list=m.parameters())
        return make
    return Spec(lambda: yolov3.YOLOv3(3, is_train=True), batch,
                lambda m, xs: m(xs[0], xs[1], xs[2], xs[3], None, None), optimizer(True),
                learn_optimizer=optimizer(False))


# -- the stages --------------------------------------------------------------------------------
def _vars(batch: List[np.ndarray]) -> List[Any]:
    from paddle.fluid.dygraph import to_variable
    out = []
    for a in batch:
        v = to_variable(a)
        v.stop_gradient = True
        out.append(v)
    return out


def _scalar(v: Any) -> float:
    return float(np.ravel(v.numpy())[0])


def _steps(spec: Spec, model: Any, opt: Any, n: int) -> List[float]:
    losses = []
    model.train()
    for _ in range(n):
        loss = spec.loss(model, _vars(spec.batch))
        spec.step(opt, loss)
        model.clear_gradients()
        losses.append(_scalar(loss))
    return losses


def _seed() -> None:
    import paddle.fluid as fluid
    np.random.seed(SEED)
    fluid.default_startup_program().random_seed = SEED
    fluid.default_main_program().random_seed = SEED
    # fluidlite's dygraph random stream (dropout masks), restarted so that two runs of the
    # same step draw the same masks (fluid 1.8 itself reuses the program seed on every call)
    reseed = getattr(fluid.dygraph.base, "seed", None)
    if reseed is not None:
        reseed(SEED)


def _fresh(spec: Spec, learn: bool = True) -> Any:
    """A new model and its optimizer. Callers build it, and run its first step, in a fresh
    ``unique_name`` space, as a new process would: parameter and optimizer-accumulator names
    come from unique_name (several zoo models name parameters after ``full_name()``), and a
    checkpoint loads only into the same names (fluid 1.8's ``set_dict``)."""
    _seed()
    model = spec.make()
    return model, (spec.learn_optimizer if learn else spec.optimizer)(model)


def _outputs(spec: Spec, model: Any) -> List[np.ndarray]:
    model.eval()
    out = spec.infer(model, _vars(spec.batch))
    return [np.array(o.numpy()) for o in (out if isinstance(out, (list, tuple)) else [out])]


def _state(d: Dict[str, Any]) -> Dict[str, np.ndarray]:
    return {k: np.array(v.numpy() if hasattr(v, "numpy") else v) for k, v in d.items()}


def _shared_keys(trained: Dict[str, Any], fresh: Dict[str, Any]) -> List[str]:
    """The keys of the trained model's state to compare with the fresh model's. A key only
    the trained one has must name a parameter another key of both also holds: an alias made by
    the training forward (the LAC model's ``self.crf_decoding.weight =
    self.linear_chain_crf.weight`` registers the CRF's transitions under a second name, as
    fluid 1.8's ``Layer.__setattr__`` did), which an eval forward never makes."""
    shared = [k for k in trained if k in fresh]
    held = {id(trained[k]) for k in shared}
    lost = [k for k in trained if k not in fresh and id(trained[k]) not in held]
    if lost:
        raise AssertionError(f"the reloaded model lacks {lost[:10]}")
    return shared


def _round_trip(spec: Spec, trained: List[Any], case: str) -> str:
    """``save_dygraph`` of the trained model's and optimizer's state, ``load_dygraph`` into a
    fresh model and optimizer: the same parameters, eval outputs, and next step."""
    import paddle.fluid as fluid
    if not trained:
        raise RuntimeError("learn did not build a model")
    model, opt = trained
    want = _outputs(spec, model)
    path = os.path.join(case, "ckpt")
    fluid.save_dygraph(model.state_dict(), path)
    fluid.save_dygraph(spec.inner(opt).state_dict(), path)
    params, opt_state = fluid.load_dygraph(path)
    if opt_state is None:
        raise AssertionError("load_dygraph returned no optimizer state")
    with fluid.unique_name.guard():
        fresh, fresh_opt = _fresh(spec)
        # one forward first: layers that create parameters in _build_once (fluid 1.8's lazy
        # build, similarity_net's FC) have them only after their first call, and set_dict
        # fills the parameters a model has
        _outputs(spec, fresh)
        fresh.set_dict(params)
        spec.inner(fresh_opt).set_dict(opt_state)
        keys = _shared_keys(model.state_dict(), fresh.state_dict())
        for k, v in _state(model.state_dict()).items():
            if k in keys:
                np.testing.assert_array_equal(fresh.state_dict()[k].numpy(), v, err_msg=k)
        for g, w in zip(_outputs(spec, fresh), want):
            np.testing.assert_array_equal(g, w,
                                          err_msg="eval output after load_dygraph")
        # the optimizer's state (moments, velocities, LR step) shows in the next
        # step: one more step of each gives the same parameters and optimizer state. The
        # checkpoint again first: an eval forward may move batch-norm statistics
        # (cycle_gan's trainable_statistics), and the trained model's happened before saving
        fresh.set_dict(params)
        _seed()
        _steps(spec, fresh, fresh_opt, 1)
    _seed()
    _steps(spec, model, opt, 1)
    for k, v in _state(model.state_dict()).items():
        if k in keys:
            np.testing.assert_array_equal(fresh.state_dict()[k].numpy(), v,
                                          err_msg=f"{k} after one more step")
    got_opt = _state(spec.inner(fresh_opt).state_dict())
    want_opt = _state(spec.inner(opt).state_dict())
    if sorted(got_opt) != sorted(want_opt):
        raise AssertionError(f"optimizer state keys differ: "
                             f"{sorted(set(want_opt) ^ set(got_opt))[:10]}")
    for k, v in want_opt.items():
        np.testing.assert_array_equal(got_opt[k], v, err_msg=f"optimizer {k}")
    return f"{len(params)} parameters, {len(want_opt)} optimizer entries restored"


def _script(zoo: str, script: str, argv: List[str]) -> Tuple[int, str, float]:
    """``fluidlite run SCRIPT ARGV`` in the RL directory: exit code, output, seconds."""
    t = time.time()
    try:
        proc = subprocess.run([sys.executable, "-W", "ignore", "-m", "fluidlite", "run", script]
                              + argv, cwd=os.path.join(zoo, ZOO_SUBDIR, "reinforcement_learning"),
                              capture_output=True, text=True, timeout=RL_TIMEOUT,
                              env=dict(os.environ, PYTHONPATH=ROOT))
        code, out = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as e:
        code, out = -1, f"{e.stdout or ''}\ntimed out after {RL_TIMEOUT} s"
    return code, out, round(time.time() - t, 2)


def _run_rl(zoo: str, script: str, case: str) -> Dict[str, Any]:
    """The stages of one RL script (see ``RL_SCRIPTS``)."""
    save = os.path.join(case, "saved_policy")
    code, out, seconds = _script(zoo, script, ["--save_dir", save])
    tail = out[-1500:]
    episodes = [(int(m.group(1)), float(m.group(2)), float(m.group(3))) for m in re.finditer(
        r"Episode (\d+)\tLast reward: ([-\d.]+)\tAverage reward: ([-\d.]+)", out)]
    solved = re.search(r"Solved! Running reward is now ([-\d.]+)", out)
    res: Dict[str, Any] = {
        "build": {"ok": bool(episodes), "seconds": seconds,
                  "detail": f"{len(episodes) * 10}+ episodes logged" if episodes else tail},
        "train": {"ok": code == 0 and bool(episodes) and all(
                      np.isfinite(r) for _, r, _ in episodes), "seconds": seconds,
                  "detail": (f"exit {code}; average reward by episode "
                             f"{[(e, a) for e, _, a in episodes[::5]]}") if code == 0 else tail},
        "learn": {"ok": solved is not None and float(solved.group(1)) > RL_THRESHOLD,
                  "seconds": seconds,
                  "detail": (f"solved after {episodes[-1][0] if episodes else '?'}+ episodes: "
                             f"running reward {solved.group(1)}") if solved else tail}}
    if not res["learn"]["ok"]:
        res["round_trip"] = {"ok": False, "detail": "nothing saved: the script did not solve "
                                                    "CartPole", "seconds": 0.0}
        return res
    code, out, seconds = _script(zoo, f"test_{script}".replace(".py", "_load.py"),
                                 ["--save_dir", save])
    score = re.search(r"(?:Test|Last) reward: ([-\d.]+)", out)
    res["round_trip"] = {"ok": code == 0 and score is not None and
                         float(score.group(1)) >= RL_THRESHOLD, "seconds": seconds,
                         "detail": (f"the reloaded policy scores {score.group(1)}" if score
                                    else out[-1500:])}
    return res


def run_case(zoo: str, name: str, case: str) -> Dict[str, Any]:
    """The stages of one model (in this process: the import hook and the zoo's modules stay
    in it)."""
    result: Dict[str, Any] = {"model": name}

    def stage(st: str, fn: Callable[[], Any]) -> bool:
        t = time.time()
        try:
            result[st] = {"ok": True, "detail": fn()}
        except Exception as e:      # a failing stage is a result, not a crash of the runner
            result[st] = {"ok": False, "detail": f"{type(e).__name__}: {e}"[:2000],
                          "trace": traceback.format_exc()[-3000:]}
        result[st]["seconds"] = round(time.time() - t, 2)
        return result[st]["ok"]

    if name in RL_SCRIPTS:
        result.update(_run_rl(zoo, RL_SCRIPTS[name], case))
        return result
    specs: List[Spec] = []
    sys.setrecursionlimit(10000)
    spec_fn = globals()["spec_" + name]
    if not stage("import", lambda: specs.append(spec_fn(zoo)) or "ok"):
        result["build"] = result.pop("import")
        return result
    spec = specs[0]
    import paddle.fluid as fluid
    with fluid.dygraph.guard(fluid.CPUPlace()):
        def build() -> str:
            with fluid.unique_name.guard():
                model, _ = _fresh(spec)
                spec.infer(model, _vars(spec.batch))
            return f"{len(model.parameters())} parameters"
        if not stage("build", build):
            return result

        def train() -> List[float]:
            with fluid.unique_name.guard():
                model, opt = _fresh(spec, learn=False)
                losses = _steps(spec, model, opt, TRAIN_STEPS)
            if not np.all(np.isfinite(losses)):
                raise FloatingPointError(f"losses: {losses}")
            return [round(v, 4) for v in losses]
        stage("train", train)

        trained: List[Any] = []

        def learn() -> List[float]:
            with fluid.unique_name.guard():
                model, opt = _fresh(spec)
                trained.extend([model, opt])
                losses = _steps(spec, model, opt, STEPS)
            if not np.mean(losses[-5:]) < 0.95 * losses[0]:
                raise AssertionError(f"the loss did not fall 5 % below {losses[0]:.4g}: "
                                     f"{[round(v, 4) for v in losses]}")
            return [round(v, 4) for v in losses]
        stage("learn", learn)

        stage("round_trip", lambda: _round_trip(spec, trained, case))
    return result


def models() -> List[str]:
    names = [n[len("spec_"):] for n in globals() if n.startswith("spec_")]
    return sorted(names + (list(RL_SCRIPTS) if _GYM is None else []))


def run(zoo: str, names: List[str], out: str, timeout: float = 900
        ) -> Dict[str, Dict[str, Any]]:
    """Every model in a worker process of its own (``zoo18.run_workers``)."""
    results = zoo18.run_workers("tests.real.zoo18_dygraph", zoo, names, out, timeout,
                                env=dict(os.environ, PYTHONPATH=ROOT))
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(results, f, indent=1)
    return results


def table(results: Dict[str, Dict[str, Any]]) -> str:
    rows = [zoo18.table(results, STAGES)]
    rows += [f"| {name} | skipped: {why} |" for name, why in sorted(SKIPPED.items())]
    return "\n".join(rows)


def main(argv: List[str]) -> int:
    return zoo18.cli(argv, doc=__doc__, names=models(), needs=ZOO_SUBDIR,
                     prefix="zoo18-dygraph-", worker=run_case, run_all=run,
                     report=lambda results: table(results) + "\n" +
                     zoo18.failures(results, STAGES))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
