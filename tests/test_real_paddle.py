"""fluidlite against the real PaddlePaddle 2.6, both directions (issue 18 follow-up).

Paddle runs in a subprocess with the interpreter named by ``FLUIDLITE_PADDLE_PYTHON`` (a
separate venv with paddlepaddle 2.6 and numpy<2, made by ``.ci/run``); the tests skip with the
reason when it is unset or cannot import paddle.

* Paddle -> fluidlite: tests/fixtures/real_paddle/paddle_export.py builds models in Paddle's
  static mode, saves them as ``<prefix>.pdmodel/.pdiparams``, as a fluid 1.x ``__model__``
  directory (one file per variable) and as ``__model__`` + ``__params__``, with Paddle's outputs
  for fixed inputs; fluidlite loads each and must reproduce those outputs. A Paddle Adam
  checkpoint (``paddle.static.save``) must load bitwise and train on identically.
* fluidlite -> Paddle: models built in fluidlite are saved in the three layouts;
  tests/fixtures/real_paddle/paddle_run.py loads them with ``paddle.static.load_inference_model``
  and runs them with Paddle's executor, whose outputs must equal fluidlite's.
"""
import json
import os
import subprocess
from typing import Dict, List, Tuple

import numpy as np
import pytest

import fluidlite as fluid

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "real_paddle")
MODELS = ("mlp", "conv", "embed", "shapes")       # built in both directions
PADDLE_MODELS = MODELS + ("misc", "sequence", "rnn")      # built by Paddle only
RTOL, ATOL = 1e-5, 1e-6


def _paddle_python() -> str:
    python = os.environ.get("FLUIDLITE_PADDLE_PYTHON")
    if not python:
        pytest.skip("FLUIDLITE_PADDLE_PYTHON is not set (an interpreter with paddlepaddle 2.6; "
                    ".ci/run makes one in /tmp/paddle-venv)")
    try:
        probe = subprocess.run([python, "-c", "import paddle; print(paddle.__version__)"],
                               capture_output=True, text=True, timeout=120)
    except OSError as exc:
        pytest.skip(f"FLUIDLITE_PADDLE_PYTHON={python!r} cannot be run: {exc}")
    if probe.returncode != 0:
        pytest.skip(f"FLUIDLITE_PADDLE_PYTHON={python!r} cannot import paddle: "
                    f"{probe.stderr.strip()[-300:]}")
    return python


def _run_paddle(python: str, script: str, arg: str) -> None:
    env = dict(os.environ, GLOG_minloglevel="2")
    proc = subprocess.run([python, os.path.join(FIXTURES, script), arg], capture_output=True,
                          text=True, timeout=600, env=env)
    assert proc.returncode == 0, f"{script} failed:\n{proc.stderr[-3000:]}"


def _numbered(directory: str, stem: str) -> List[np.ndarray]:
    out, i = [], 0
    while os.path.exists(os.path.join(directory, f"{stem}_{i}.npy")):
        out.append(np.load(os.path.join(directory, f"{stem}_{i}.npy")))
        i += 1
    return out


def _assert_same(got: np.ndarray, want: np.ndarray, what: str) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, expected {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype}, expected {want.dtype}"
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL, err_msg=what)


# -- Paddle -> fluidlite ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def paddle_models(tmp_path_factory) -> str:
    python = _paddle_python()
    out = str(tmp_path_factory.mktemp("paddle_models") / "out")
    _run_paddle(python, "paddle_export.py", out)
    return out


LAYOUTS = {"prefix": (("prefix", "model"), {}),
           "legacy_dir": (("legacy_dir",), {}),
           "legacy_combined": (("legacy_combined",), {"params_filename": "__params__"})}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("model", PADDLE_MODELS)
def test_paddle_inference_model_runs_in_fluidlite(paddle_models, model, layout):
    d = os.path.join(paddle_models, model)
    parts, kwargs = LAYOUTS[layout]
    feeds, expected = _numbered(d, "feed"), _numbered(d, "fetch")
    for i, a in enumerate(feeds):
        if os.path.exists(os.path.join(d, f"lod_{i}.json")):       # a LoD feed
            with open(os.path.join(d, f"lod_{i}.json")) as f:
                feeds[i] = fluid.create_lod_tensor(a, json.load(f), fluid.CPUPlace())
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        exe = fluid.Executor(fluid.CPUPlace())
        program, feed_names, targets = fluid.io.load_inference_model(
            os.path.join(d, *parts), exe, **kwargs)
        assert len(feed_names) == len(feeds) and len(targets) == len(expected)
        outs = exe.run(program, feed=dict(zip(feed_names, feeds)), fetch_list=targets)
    for i, (got, want) in enumerate(zip(outs, expected)):
        _assert_same(got, want, f"{model}/{layout} fetch {i} ({targets[i].name})")


def test_paddle_inference_feed_and_fetch_names(paddle_models):
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        exe = fluid.Executor(fluid.CPUPlace())
        _, feed_names, targets = fluid.io.load_inference_model(
            os.path.join(paddle_models, "shapes", "prefix", "model"), exe)
    assert feed_names == ["x", "y", "z"]
    assert [t.name for t in targets] == [f"save_infer_model/scale_{i}.tmp_0" for i in range(3)]


PADDLE_TRAINERS = ("train", "train_conv_momentum", "train_mlp_adamw")


def _train_dir(paddle_models: str, name: str) -> Tuple[str, List[str]]:
    d = os.path.join(paddle_models, name)
    with open(os.path.join(d, "names.txt")) as f:
        return d, f.read().split()


@pytest.mark.parametrize("name", PADDLE_TRAINERS)
def test_paddle_checkpoint_program_state(paddle_models, name):
    d, names = _train_dir(paddle_models, name)
    state = fluid.io.load_program_state(os.path.join(d, "ckpt"))
    assert sorted(state) == sorted(names)
    for n in names:
        want = np.load(os.path.join(d, f"expected_{n}.npy"))
        assert state[n].shape == want.shape and state[n].dtype == want.dtype, n
        np.testing.assert_array_equal(state[n], want, err_msg=n)


@pytest.mark.parametrize("name", PADDLE_TRAINERS)
def test_paddle_checkpoint_trains_on_in_fluidlite(paddle_models, name):
    """The whole training program from ``paddle.static.save``'s .pdmodel (forward, grad,
    regularization and optimizer ops: adam, momentum with L2Decay, adamw) plus its
    .pdparams/.pdopt: one more step in fluidlite gives Paddle's loss and persistables."""
    d, names = _train_dir(paddle_models, name)
    program = fluid.io.read_program(os.path.join(d, "ckpt.pdmodel"))
    assert any(op.type.endswith("_grad") for op in program.global_block().ops)
    with open(os.path.join(d, "loss_name.txt")) as f:
        loss = f.read().strip()
    with open(os.path.join(d, "feed_names.txt")) as f:
        feeds = {k: np.load(os.path.join(d, f"feed_{k}.npy")) for k in f.read().split()}
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        exe = fluid.Executor(fluid.CPUPlace())
        fluid.load(program, os.path.join(d, "ckpt"), exe)
        for n in names:
            np.testing.assert_array_equal(np.asarray(scope.find_var(n).get_tensor()),
                                          np.load(os.path.join(d, f"expected_{n}.npy")))
        (got,) = exe.run(program, feed=feeds, fetch_list=[loss])
        np.testing.assert_allclose(got, np.load(os.path.join(d, "next_loss.npy")), rtol=RTOL)
        for n in names:
            # learning_rate_0 is 0-D in Paddle 2.6 and [1] once loaded (allclose broadcasts)
            np.testing.assert_allclose(np.asarray(scope.find_var(n).get_tensor()),
                                       np.load(os.path.join(d, f"next_{n}.npy")),
                                       rtol=RTOL, atol=ATOL, err_msg=n)


# -- fluidlite -> Paddle ---------------------------------------------------------------------
L = fluid.layers


def _mlp(rng):
    x = L.data("x", [13], dtype="float32")
    out = L.softmax(L.fc(L.fc(x, 32, act="relu"), 10))
    return ["x"], [out], [rng.rand(4, 13).astype("float32")]


def _conv(rng):
    img = L.data("img", [2, 8, 8], dtype="float32")
    bn = L.batch_norm(L.conv2d(img, 4, 3, padding=1), act="relu")
    p = L.pool2d(bn, 2, "max", 2)
    a = L.pool2d(p, 2, "avg", 2)
    d = L.dropout(p, 0.3)                                       # fluid's downgrade_in_infer
    d2 = L.dropout(a, 0.25, dropout_implementation="upscale_in_train")
    f = L.concat([L.flatten(d, 1), L.flatten(d2, 1)], axis=1)
    return ["img"], [L.fc(f, 5)], [rng.rand(3, 2, 8, 8).astype("float32")]


def _embed(rng):
    ids = L.data("ids", [4, 1], dtype="int64")
    e = L.embedding(ids, (20, 8))                               # lookup_table: [N, 4, 8]
    w = L.create_parameter([8, 8], "float32", name="proj_w")
    m = L.matmul(e, w)
    m2 = L.matmul(m, m, transpose_y=True, alpha=0.5)
    ln = L.layer_norm(m, begin_norm_axis=2)
    return ["ids"], [L.gelu(ln), L.gelu(m2, approximate=True)], \
        [rng.randint(0, 20, (2, 4, 1)).astype("int64")]


def _shapes(rng):
    x = L.data("x", [3, 4], dtype="float32")
    y = L.data("y", [3], dtype="float32", append_batch_size=False)
    a = L.elementwise_add(x, y, axis=1)                         # fluid 1.x axis broadcasting
    b = L.elementwise_mul(a, L.fc(x, 4, num_flatten_dims=2))
    t = L.transpose(L.reshape(b, [-1, 4, 3]), [0, 2, 1])
    c = L.concat([t, x], axis=2)
    s1, s2 = L.split(c, 2, dim=2)
    s3, s4 = L.split(c, [3, 5], dim=2)
    sl = L.slice(c, axes=[1, 2], starts=[1, 2], ends=[3, 7])
    out = L.elementwise_div(s1, L.scale(s2, bias=2.0)) + L.reduce_sum(s3, dim=2, keep_dim=True)
    out2 = L.tanh(sl) * 3.0 + L.scale(sl, 0.5, bias=1.0)
    out3 = L.unsqueeze(L.squeeze(L.slice(s3, [1], [0], [1]), [1]), [0])
    return ["x", "y"], [out, out2, out3], \
        [rng.rand(2, 3, 4).astype("float32"), rng.rand(3).astype("float32")]


def _misc(rng):
    """fluid 1.x layers over many more op types, one fetch per group."""
    x = L.data("x", [6], dtype="float32")
    i = L.data("img", [2, 4, 4], dtype="float32")
    const = lambda v: L.scale(x, 0.0, v)                        # noqa: E731
    outs = [
        L.leaky_relu(x - 0.5, 0.1) + L.hard_swish(x) + L.sigmoid(x) + L.exp(x) + L.log(x + 1)
        + L.sqrt(x) + L.pow(x, 2.0) + L.elu(x) + L.softplus(x) + L.swish(x) + L.relu6(x * 9)
        + L.hard_sigmoid(x) + L.logsigmoid(x) + L.softsign(x),
        L.concat([L.cast(L.argmax(x, axis=1), "float32"), L.topk(x, 2)[0][:, 0]], axis=0),
        L.gather(L.cast(L.cast(x * 10, "int64"), "float32"), L.fill_constant([2], "int64", 1)),
        L.cast(L.logical_and(L.greater_than(x, const(0.3)), L.less_than(x, const(0.8))),
               "float32"),
        L.elementwise_pow(x, const(2.0)) + L.elementwise_min(x, L.scale(x, -1.0, 1.0))
        + L.elementwise_floordiv(x * 10, const(3.0)) + L.elementwise_mod(x * 10, const(3.0)),
        L.reduce_sum(L.embedding(L.cast(L.reshape(x * 5, [-1, 6, 1]), "int64"), (6, 3),
                                 padding_idx=0), dim=1),
        L.clip(L.expand(L.unsqueeze(x, [1]), [1, 3, 1]), 0.2, 0.7),
        L.matmul(L.reshape(x, [-1, 2, 3]), L.reshape(x, [-1, 2, 3]), transpose_x=True),
        L.group_norm(i, 2) + L.instance_norm(i) + L.l2_normalize(i, axis=1),
        L.pad(x, [0, 0, 1, 2], pad_value=0.5),
        L.pool2d(i, pool_type="avg", global_pooling=True) + L.pool2d(i, 3, "max", 1,
                                                                     pool_padding=1),
        L.reduce_max(x, dim=1) + L.reduce_min(x, dim=1) + L.reduce_prod(x, dim=1)
        + L.reduce_mean(x) + L.reduce_sum(i, dim=[1, 2, 3]),
        L.resize_nearest(i, out_shape=[8, 8]) + L.resize_bilinear(i, out_shape=[8, 8]),
        L.squeeze(L.unsqueeze(x, [0, 2]), [2]),
        L.stack([L.cumsum(x, axis=1), L.flip(x, [1])], axis=0),   # found: 2.6 needs axis
    ]
    return ["x", "img"], outs, [rng.rand(2, 6).astype("float32"),
                                rng.rand(2, 2, 4, 4).astype("float32")]


def _sequence(rng):
    """LoD input: sequence_conv + sequence_pool (text CNN), dynamic_lstm, dynamic_gru,
    sequence_softmax; the feed is (ids, sequence lengths)."""
    words = L.data("words", [1], dtype="int64", lod_level=1)
    e = L.embedding(words, (30, 8))
    cnn = L.fc(fluid.nets.sequence_conv_pool(e, 4, 3, act="tanh", pool_type="sqrt"), 2,
               act="softmax")
    h, _ = L.dynamic_lstm(L.fc(e, 16), 16)
    g = L.dynamic_gru(L.fc(e, 12), 4)
    outs = [cnn, L.fc(L.sequence_pool(h, "max"), 2),
            L.sequence_pool(g, "last") + L.sequence_pool(L.sequence_softmax(L.fc(g, 1)), "sum")]
    return ["words"], outs, [(rng.randint(0, 30, (7, 1)).astype("int64"), [[3, 4]])]


FEED_NAMES = {"mlp": ["x"], "conv": ["img"], "embed": ["ids"], "shapes": ["x", "y"],
              "misc": ["x", "img"], "sequence": ["words"]}
BUILDERS = {"mlp": _mlp, "conv": _conv, "embed": _embed, "shapes": _shapes, "misc": _misc,
            "sequence": _sequence}


def _feed_value(feed):
    """A builder's feed: an array, or (array, sequence lengths) for a LoD input."""
    if isinstance(feed, tuple):
        return fluid.create_lod_tensor(feed[0], feed[1], fluid.CPUPlace())
    return feed
# layout -> (save_inference_model kwargs, the three lines of paddle_run.py's args.txt)
SAVE_LAYOUTS = {
    "dir": ({}, ["m", "-", "-"]),
    "combined": ({"params_filename": "__params__"}, ["m", "__model__", "__params__"]),
    "prefix": ({"model_filename": "model.pdmodel", "params_filename": "model.pdiparams"},
               ["m/model", "prefix", "-"]),
}


@pytest.fixture(scope="module")
def fluidlite_models(tmp_path_factory) -> Dict[str, str]:
    python = _paddle_python()
    root = str(tmp_path_factory.mktemp("fluidlite_models"))
    cases = {}
    for name, build in BUILDERS.items():
        main, startup = fluid.Program(), fluid.Program()
        with fluid.program_guard(main, startup), fluid.unique_name.guard():
            feed_names, targets, feeds = build(np.random.RandomState(7))
        scope = fluid.Scope()
        with fluid.scope_guard(scope):
            exe = fluid.Executor(fluid.CPUPlace())
            exe.run(startup)
            outs = exe.run(main.clone(for_test=True),
                           feed={n: _feed_value(f) for n, f in zip(feed_names, feeds)},
                           fetch_list=[t.name for t in targets])
            for layout, (kwargs, args) in SAVE_LAYOUTS.items():
                case = os.path.join(root, f"{name}_{layout}")
                os.makedirs(case)
                fluid.io.save_inference_model(os.path.join(case, "m"), feed_names, targets,
                                              exe, main, **kwargs)
                with open(os.path.join(case, "args.txt"), "w") as f:
                    f.write("\n".join(args))
                for i, a in enumerate(feeds):
                    if isinstance(a, tuple):                # LoD: lengths for paddle_run.py
                        a, lengths = a
                        with open(os.path.join(case, f"lod_{i}.json"), "w") as f:
                            json.dump(lengths, f)
                    np.save(os.path.join(case, f"feed_{i}.npy"), a)
                for i, a in enumerate(outs):
                    np.save(os.path.join(case, f"fluidlite_{i}.npy"), a)
                cases[f"{name}_{layout}"] = case
    _run_paddle(python, "paddle_run.py", root)
    return cases


@pytest.mark.parametrize("layout", sorted(SAVE_LAYOUTS))
@pytest.mark.parametrize("model", sorted(BUILDERS))
def test_fluidlite_inference_model_runs_in_paddle(fluidlite_models, model, layout):
    case = fluidlite_models[f"{model}_{layout}"]
    error = os.path.join(case, "error.txt")
    if os.path.exists(error):
        with open(error) as f:
            pytest.fail(f"Paddle could not load/run {model}/{layout}:\n{f.read()}")
    expected, got = _numbered(case, "fluidlite"), _numbered(case, "paddle")
    assert len(got) == len(expected)
    for i, (g, w) in enumerate(zip(got, expected)):
        _assert_same(g, w, f"{model}/{layout} fetch {i}")
    with open(os.path.join(case, "feed_names.txt")) as f:
        assert f.read().split() == FEED_NAMES[model]


def test_fill_constant_values_reach_paddle_exactly(tmp_path):
    """fill_constant's FLOAT ``value`` is float32 in Paddle's format: 0.002 would run as
    0.0020000000949 in a float64 program and an int64 above 2^24 would round. The writer
    spells the exact number in ``str_value``, as fluid 1.8's layers did, which Paddle's
    kernel prefers; Paddle's outputs must equal fluidlite's bit for bit."""
    python = _paddle_python()
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()), fluid.unique_name.guard():
        x = L.data("x", [2], dtype="float64")
        outs = [x + L.fill_constant([1], "float64", 0.002),
                L.fill_constant([2], "int64", 2 ** 40 + 1) + L.cast(x, "int64"),
                L.fill_constant([2], "int32", -(2 ** 30) - 7),
                L.fill_constant_batch_size_like(x, [1, 2], "float64", 0.1)]
    feed = np.array([[0.25, -1.0]])
    exe = fluid.Executor(fluid.CPUPlace())
    want = exe.run(main, feed={"x": feed}, fetch_list=outs)
    np.testing.assert_array_equal(want[1], [[2 ** 40 + 1, 2 ** 40]])
    case = tmp_path / "cases" / "constants"
    case.mkdir(parents=True)
    fluid.io.save_inference_model(str(case / "m"), ["x"], outs, exe, main)
    (case / "args.txt").write_text("m\n-\n-")
    np.save(case / "feed_0.npy", feed)
    _run_paddle(python, "paddle_run.py", str(tmp_path / "cases"))
    assert not (case / "error.txt").exists(), (case / "error.txt").read_text()
    for i, w in enumerate(want):
        got = np.load(case / f"paddle_{i}.npy")
        assert got.dtype == w.dtype, f"fetch {i}"
        np.testing.assert_array_equal(got, w, err_msg=f"fetch {i}")


# -- fluidlite training checkpoint -> Paddle -------------------------------------------------
def _conv_momentum(rng):
    img = L.data("x", [2, 6, 6], dtype="float32")
    label = L.data("label", [1], dtype="int64")
    ids = L.data("ids", [3, 1], dtype="int64")
    c = L.batch_norm(L.conv2d(img, 3, 3, padding=1), act="relu")      # training mode
    p = L.pool2d(c, 2, "max", 2)
    e = L.reduce_mean(L.embedding(ids, (10, 4)), dim=1)
    logits = L.fc(L.concat([L.flatten(p, 1), e], axis=1), 4)
    loss = L.mean(L.softmax_with_cross_entropy(logits, label)) + \
        L.reduce_sum(L.softmax(logits)) * 0.01
    fluid.optimizer.Momentum(0.05, 0.9).minimize(loss)
    return loss, {"x": rng.rand(5, 2, 6, 6).astype("float32"),
                  "label": rng.randint(0, 4, (5, 1)).astype("int64"),
                  "ids": rng.randint(0, 10, (5, 3, 1)).astype("int64")}


def _attention_adam(rng):
    x = L.data("x", [4, 8], dtype="float32")
    y = L.data("y", [4, 8], dtype="float32")
    q = L.fc(x, 8, num_flatten_dims=2)
    k = L.fc(x, 8, num_flatten_dims=2, act="sigmoid")
    a = L.softmax(L.matmul(q, k, transpose_y=True, alpha=0.35))
    h = L.layer_norm(L.elementwise_add(L.matmul(a, L.tanh(x)), x), begin_norm_axis=2)
    h = L.gelu(L.dropout(h, 0.0))
    t = L.transpose(L.reshape(h, [-1, 8, 4]), [0, 2, 1])
    s1, s2 = L.split(t, 2, dim=2)
    o = L.concat([L.elementwise_mul(s1, s2), L.slice(t, [2], [2], [6])], axis=2)
    o = L.scale(o, 2.0, bias=0.5) + L.sums([o, o])
    loss = L.reduce_mean(L.square(o - y)) + L.mean(L.abs(h)) * 0.1
    fluid.optimizer.Adam(0.01).minimize(loss)
    return loss, {"x": rng.rand(3, 4, 8).astype("float32"),
                  "y": rng.rand(3, 4, 8).astype("float32")}


def _cross_entropy_while(rng):
    """fluid 1.x ``cross_entropy`` (the cross_entropy2 op, whose grad Paddle names
    cross_entropy_grad2) and a While loop (its empty ``skip_eager_deletion_vars``, a STRINGS
    attribute in Paddle), as the zoo's classifiers and decoders write them."""
    x = L.data("x", [6], dtype="float32")
    label = L.data("label", [1], dtype="int64")
    h = L.fc(x, 8, act="tanh")
    i = L.fill_constant([1], "int64", 0)
    n = L.fill_constant([1], "int64", 3)
    acc = L.fill_constant([1], "float32", 0.0)
    cond = L.less_than(i, n)
    loop = L.While(cond)
    with loop.block():
        L.assign(acc + 1.0, acc)
        L.increment(i, in_place=True)
        L.less_than(i, n, cond=cond)
    prob = L.softmax(L.fc(h, 4))
    loss = L.mean(L.cross_entropy(prob, label)) + L.mean(acc) * 0.0
    fluid.optimizer.Adam(0.05).minimize(loss)
    return loss, {"x": rng.rand(5, 6).astype("float32"),
                  "label": rng.randint(0, 4, (5, 1)).astype("int64")}


def _array_grads(rng):
    """Tensor arrays in the main block with gradients through them (an entry read twice):
    fluidlite's write_to_array_grad / read_from_array_grad / sum_tensor_array (and the
    clear_tensor_array_entry after a write's gradient), which Paddle registers in fluid's
    form: read_from_array with X_W, write_to_array, sum. (No entry is written twice: there
    fluid, and Paddle, also send the gradient to the overwritten value; fluidlite does not,
    docs/compatibility.md.)"""
    x = L.data("x", [3], dtype="float32")
    label = L.data("label", [1], dtype="int64")
    arr = L.create_array("float32")
    i0, i1 = L.fill_constant([1], "int64", 0), L.fill_constant([1], "int64", 1)
    L.array_write(L.fc(x, 4, act="tanh"), i0, array=arr)
    L.array_write(L.fc(x, 4, act="sigmoid"), i1, array=arr)
    feats = [L.array_read(arr, i0), L.array_read(arr, i1), L.array_read(arr, i1)]
    prob = L.softmax(L.fc(L.concat(feats, axis=1), 3))
    loss = L.mean(L.cross_entropy(prob, label))
    fluid.optimizer.Momentum(0.1, 0.9).minimize(loss)
    return loss, {"x": rng.rand(4, 3).astype("float32"),
                  "label": rng.randint(0, 3, (4, 1)).astype("int64")}


def _global_norm_clip(rng):
    """``GradientClipByGlobalNorm``, as the zoo's language models and din train: fluidlite's
    squared norms are float64 sums of the float32 gradients (docs/compatibility.md), which
    the writer gives Paddle as a ``cast`` + ``squared_l2_norm`` (Paddle's op keeps its input's
    dtype). The clip is active: the gradients' norm is far above 0.05."""
    x = L.data("x", [5], dtype="float32")
    label = L.data("label", [1], dtype="int64")
    h = L.fc(L.fc(x, 7, act="tanh"), 6, act="sigmoid")
    loss = L.mean(L.softmax_with_cross_entropy(L.fc(h, 3), label))
    fluid.optimizer.Momentum(0.1, 0.9, grad_clip=fluid.clip.GradientClipByGlobalNorm(0.05)) \
        .minimize(loss)
    return loss, {"x": rng.rand(6, 5).astype("float32") * 4,
                  "label": rng.randint(0, 3, (6, 1)).astype("int64")}


def _while_rnn(rng):
    """A While loop that gradients flow through (fluid 1.8's test_while_op.py pattern, with a
    shared fc inside the body): step t reads input t and the memory of step t from arrays,
    writes the new memory at t + 1; the loss reads the last. Its grad is a ``while_grad`` op
    over the body's grad block, and the fc's weight gradient is summed over the steps; the
    grad block reads the counter before and after the body's ``increment``, which Paddle's
    form expresses with decrements (formats/paddle/while_grad.py)."""
    x = L.data("x", [3, 4], dtype="float32")
    label = L.data("label", [1], dtype="int64")
    steps = L.unstack(x, axis=1)
    i = L.fill_constant([1], "int64", 0)
    inputs = L.array_write(steps[0], i)
    for t in (1, 2):
        L.array_write(steps[t], L.fill_constant([1], "int64", t), array=inputs)
    # the first memory, written at the counter before the loop: its gradient reads the
    # counter's value from before the loop (restored after while_grad, backward.py)
    mem = L.array_write(L.fc(steps[0], 5, act="tanh"), i)
    n = L.fill_constant([1], "int64", 3)
    cond = L.less_than(i, n)
    loop = L.While(cond)
    with loop.block():
        h = L.fc(L.concat([L.array_read(inputs, i), L.array_read(mem, i)], axis=1), 5,
                 act="tanh", param_attr="loop_w", bias_attr="loop_b")
        L.increment(i, in_place=True)
        L.array_write(h, i, array=mem)
        L.less_than(i, n, cond=cond)
    last = L.array_read(mem, n)
    loss = L.mean(L.softmax_with_cross_entropy(L.fc(last, 3), label))
    fluid.optimizer.Adam(0.05).minimize(loss)
    return loss, {"x": rng.rand(4, 3, 4).astype("float32"),
                  "label": rng.randint(0, 3, (4, 1)).astype("int64")}


def _static_rnn(rng):
    """fluidlite's ``StaticRNN`` (a While over the time steps, the memory carried by
    ``assign``, the counter by ``increment``): Paddle links the memory's incoming gradient by
    its versioned inner name and reads the counter undone by decrements; the unused output's
    all-zero array gradient (``sum_tensor_array`` of nothing) is an unwritten array there."""
    x = fluid.data("x", [4, 2, 3], "float32")          # [T, N, D]
    label = fluid.data("label", [2, 1], "int64")
    h0 = L.fill_constant([2, 5], "float32", 0.0)
    rnn = L.StaticRNN()
    with rnn.step():
        xt = rnn.step_input(x)
        h = rnn.memory(init=h0)
        nh = L.fc([xt, h], 5, act="tanh")
        rnn.update_memory(h, nh)
        rnn.step_output(nh)
        rnn.step_output(L.scale(nh, 2.0))     # unused: its array gradient is all zero
    out, _ = rnn()
    last = L.reshape(L.slice(out, axes=[0], starts=[3], ends=[4]), [2, 5])
    loss = L.mean(L.softmax_with_cross_entropy(L.fc(last, 3), label))
    fluid.optimizer.Momentum(0.1, 0.9).minimize(loss)
    return loss, {"x": rng.rand(4, 2, 3).astype("float32"),
                  "label": rng.randint(0, 3, (2, 1)).astype("int64")}


TRAINERS = {"conv_momentum": _conv_momentum, "attention_adam": _attention_adam,
            "cross_entropy_while": _cross_entropy_while, "array_grads": _array_grads,
            "global_norm_clip": _global_norm_clip, "while_rnn": _while_rnn,
            "static_rnn": _static_rnn}


def _write_lines(path: str, lines: List[str]) -> None:
    with open(path, "w") as f:
        f.write("\n".join(lines))


@pytest.fixture(scope="module")
def fluidlite_checkpoints(tmp_path_factory) -> Dict[str, str]:
    python = _paddle_python()
    root = str(tmp_path_factory.mktemp("fluidlite_checkpoints"))
    cases = {}
    for name, build in TRAINERS.items():
        main, startup = fluid.Program(), fluid.Program()
        with fluid.program_guard(main, startup), fluid.unique_name.guard():
            loss, feeds = build(np.random.RandomState(3))
        case = os.path.join(root, name)
        os.makedirs(case)
        scope = fluid.Scope()
        with fluid.scope_guard(scope):
            exe = fluid.Executor(fluid.CPUPlace())
            exe.run(startup)
            for _ in range(2):
                exe.run(main, feed=feeds, fetch_list=[loss])
            fluid.save(main, os.path.join(case, "ckpt"))
            fluid.io.save_persistables(exe, os.path.join(case, "persist_dir"), main)
            fluid.io.save_persistables(exe, os.path.join(case, "persist_combined"), main,
                                       filename="all")
            (step_loss,) = exe.run(main, feed=feeds, fetch_list=[loss])
            names = [v.name for v in main.list_vars()
                     if v.persistable and v.name not in ("feed", "fetch")]
            np.save(os.path.join(case, "fluidlite_loss.npy"), step_loss)
            for i, n in enumerate(names):
                np.save(os.path.join(case, f"fluidlite_{i}.npy"),
                        np.asarray(scope.find_var(n).get_tensor()))
        for i, a in enumerate(feeds.values()):
            np.save(os.path.join(case, f"feed_{i}.npy"), a)
        _write_lines(os.path.join(case, "feed_names.txt"), list(feeds))
        _write_lines(os.path.join(case, "loss_name.txt"), [loss.name])
        _write_lines(os.path.join(case, "names.txt"), names)
        cases[name] = case
    _run_paddle(python, "paddle_train.py", root)
    return cases


@pytest.mark.parametrize("mode", ["ckpt", "vars_dir", "vars_combined"])
@pytest.mark.parametrize("model", sorted(TRAINERS))
def test_fluidlite_checkpoint_trains_on_in_paddle(fluidlite_checkpoints, model, mode):
    """``fluid.save``'s whole training program (forward, grad and optimizer ops) runs in
    Paddle's executor from the saved state (``fluid.save``'s .pdparams/.pdopt through
    ``paddle.static.load``, or ``save_persistables``' files through ``paddle.static.load_vars``),
    and one step gives fluidlite's loss and updated persistables (parameters, BN statistics,
    optimizer accumulators)."""
    case = fluidlite_checkpoints[model]
    error = os.path.join(case, f"error_{mode}.txt")
    if os.path.exists(error):
        with open(error) as f:
            pytest.fail(f"Paddle could not train on {model} ({mode}):\n{f.read()}")
    # Paddle 2.6's mean op gives a 0-D loss where fluid 1.x's (and fluidlite's) gives [1]
    paddle_loss = np.load(os.path.join(case, f"paddle_{mode}_loss.npy"))
    np.testing.assert_allclose(paddle_loss.reshape(-1),
                               np.load(os.path.join(case, "fluidlite_loss.npy")).reshape(-1),
                               rtol=RTOL, atol=ATOL)
    with open(os.path.join(case, "names.txt")) as f:
        names = f.read().split()
    assert len(names) > 10
    for i, n in enumerate(names):
        _assert_same(np.load(os.path.join(case, f"paddle_{mode}_{i}.npy")),
                     np.load(os.path.join(case, f"fluidlite_{i}.npy")), f"{model}: {n}")


# -- what the writer adds for Paddle 2.6 (no Paddle needed) ---------------------------------
def _training_desc(build):
    from fluidlite.formats.paddle import program as pf
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        build(np.random.RandomState(0))
    return main, pf.program_to_desc(main)


def _ops(desc, op_type):
    return [od for od in desc.blocks[0].ops if od.type == op_type]


def _attrs(od):
    return {a.name: a for a in od.attrs}


def _slots(od, inputs=True):
    return {v.parameter: list(v.arguments) for v in (od.inputs if inputs else od.outputs)}


def test_writer_adds_batch_norm_reserve_space_for_paddle():
    from fluidlite.formats.paddle import program as pf
    main, desc = _training_desc(_conv_momentum)
    (bn,) = _ops(desc, "batch_norm")
    (reserve,) = _slots(bn, inputs=False)["ReserveSpace"]
    y = _slots(bn, inputs=False)["Y"][0]
    assert reserve == y + "@RESERVE_SPACE"
    (vd,) = [v for v in desc.blocks[0].vars if v.name == reserve]
    assert vd.type.lod_tensor.tensor.data_type == 5 and list(vd.type.lod_tensor.tensor.dims) \
        == [-1] and not vd.persistable
    assert "ReserveSpace" not in main.global_block().ops[2].outputs      # program untouched
    # an inference (is_test) batch_norm gets none, as Paddle writes it
    test_desc = pf.program_to_desc(main.clone(for_test=True))
    assert "ReserveSpace" not in _slots(_ops(test_desc, "batch_norm")[0], inputs=False)


def test_writer_widens_squared_l2_norm_with_a_cast_for_paddle():
    main, desc = _training_desc(_global_norm_clip)
    norms = _ops(desc, "squared_l2_norm")
    assert len(norms) == 6                          # one per gradient
    casts = {_slots(od, inputs=False)["Out"][0]: od for od in _ops(desc, "cast")}
    fp64 = {v.name for v in desc.blocks[0].vars if v.type.lod_tensor.tensor.data_type == 6}
    for od in norms:
        (x,) = _slots(od)["X"]
        (out,) = _slots(od, inputs=False)["Out"]
        assert x.endswith("@GRAD@WIDENED") and x in casts and x in fp64 and out in fp64
        assert _attrs(casts[x])["in_dtype"].i == 5 and _attrs(casts[x])["out_dtype"].i == 6
    # the program itself is untouched: one float64 squared_l2_norm per float32 gradient
    ops = [op for op in main.global_block().ops if op.type == "squared_l2_norm"]
    assert len(ops) == 6 and all(not op.input("X")[0].endswith("@WIDENED") for op in ops)


def test_writer_adds_grad_attrs_and_inputs_paddle_reads():
    _, desc = _training_desc(_conv_momentum)
    for op_type in ("reduce_sum_grad", "reduce_mean_grad"):
        (od,) = _ops(desc, op_type)
        attrs = _attrs(od)
        assert attrs["in_dtype"].i == -1 and attrs["out_dtype"].i == -1, op_type
    (sce,) = _ops(desc, "softmax_with_cross_entropy_grad")
    assert _attrs(sce)["use_softmax"].b is True
    main, desc = _training_desc(_attention_adam)
    (ln,) = _ops(desc, "layer_norm")
    (ln_grad,) = _ops(desc, "layer_norm_grad")
    assert _slots(ln_grad)["Bias"] == _slots(ln)["Bias"]
    assert "Bias" not in next(op for op in main.global_block().ops
                              if op.type == "layer_norm_grad").inputs


@pytest.mark.parametrize("model", sorted(TRAINERS))
def test_paddle_additions_vanish_on_reading(model, caplog):
    """fluidlite -> Paddle format -> fluidlite stays identical: the ReserveSpace var, the grad
    attributes and layer_norm_grad's Bias are dropped again, without warnings."""
    from fluidlite.formats.paddle import program as pf
    main, _ = _training_desc(TRAINERS[model])
    with caplog.at_level("WARNING", logger="fluidlite"):
        back = pf.program_from_bytes(pf.program_to_bytes(main))
    assert str(back) == str(main)
    assert not [r for r in caplog.records if r.levelname == "WARNING"]
    assert not [n for n in back.global_block().vars if n.endswith("@RESERVE_SPACE")]


# -- Paddle 2.6 spellings found with real files (no Paddle needed) --------------------------
def _desc_of(build):
    from fluidlite.formats.paddle import program as pf
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()), fluid.unique_name.guard():
        build()
    return pf.program_to_desc(main)


def _read(desc):
    from fluidlite.formats.paddle import program as pf
    return pf.program_from_bytes(desc.SerializeToString(), source="test")


def test_flip_axis_attribute_of_paddle2():
    desc = _desc_of(lambda: L.flip(L.data("x", [2, 3], dtype="float32"), [1]))
    (od,) = _ops(desc, "flip")
    od.attrs.remove(next(a for a in od.attrs if a.name == "dims"))   # Paddle 2.6: no dims,
    od.attrs.add(name="axis", type=3, ints=[1])          # ... but axis
    prog = _read(desc)
    (op,) = [op for op in prog.global_block().ops if op.type == "flip"]
    assert op.attr("dims") == [1]
    x = np.arange(12, dtype="float32").reshape(2, 2, 3)
    (out,) = fluid.Executor(fluid.CPUPlace()).run(prog, feed={"x": x},
                                                  fetch_list=[op.output("Out")[0]])
    np.testing.assert_array_equal(out, x[:, ::-1])


@pytest.mark.parametrize("beta,threshold,refused", [
    (1.0, 20.0, None), (2.0, 20.0, "beta=2.0, threshold=20.0"),
    (1.0, 1.0, "beta=1.0, threshold=1.0")])
def test_softplus_beta_threshold_of_paddle2(beta, threshold, refused):
    """beta 1 with a threshold >= 15 is fluid's softplus in float32 and loads; any other
    value would be another function: the reader refuses it, naming the attribute (it was
    dropped with a warning before, computing fluid's softplus instead)."""
    desc = _desc_of(lambda: L.softplus(L.data("x", [3], dtype="float32")))
    (od,) = _ops(desc, "softplus")
    od.attrs.add(name="beta", type=1, f=beta)
    od.attrs.add(name="threshold", type=1, f=threshold)
    if refused is None:
        _read(desc)
        return
    with pytest.raises(Exception, match=f"softplus has the Paddle 2.x attribute\\(s\\) {refused}"):
        _read(desc)


def test_dims_below_minus_one_read_as_unknown():
    desc = _desc_of(lambda: L.relu(L.data("x", [3], dtype="float32")))
    (vd,) = [v for v in desc.blocks[0].vars if v.name == "x"]
    del vd.type.lod_tensor.tensor.dims[:]
    vd.type.lod_tensor.tensor.dims.extend([-2, 3])       # as 2.6's instance_norm SavedMean
    assert _read(desc).global_block().var("x").shape == (-1, 3)


def test_writer_gives_flip_paddle2_axis_and_reads_it_back(caplog):
    from fluidlite.formats.paddle import program as pf
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()), fluid.unique_name.guard():
        L.flip(L.data("x", [2, 3], dtype="float32"), [1, 2])
    desc = pf.program_to_desc(main)
    (od,) = _ops(desc, "flip")
    attrs = _attrs(od)
    assert list(attrs["dims"].ints) == [1, 2] and list(attrs["axis"].ints) == [1, 2]
    with caplog.at_level("WARNING", logger="fluidlite"):
        back = pf.program_from_bytes(pf.program_to_bytes(main))
    assert str(back) == str(main) and not caplog.records
    od.attrs.remove(attrs["axis"])
    od.attrs.add(name="axis", type=3, ints=[2])
    with pytest.raises(pf.PaddleFormatError, match=r"'flip'.*dims \[1, 2\] and axis \[2\]"):
        _read(desc)


# -- attribute encodings and grad-op names Paddle reads (issue 29) ---------------------------
def test_writer_uses_paddle_grad_type_and_list_types():
    """cross_entropy2's grad is written as Paddle's ``cross_entropy_grad2``; empty string
    lists (a While's ``skip_eager_deletion_vars``) as STRINGS; both read back unchanged."""
    from fluidlite.formats.paddle import program as pf
    main, desc = _training_desc(_cross_entropy_while)
    types = [od.type for od in desc.blocks[0].ops]
    assert "cross_entropy_grad2" in types and "cross_entropy2_grad" not in types
    (loop,) = _ops(desc, "while")
    assert _attrs(loop)["skip_eager_deletion_vars"].type == pf.STRINGS
    back = pf.program_from_bytes(pf.program_to_bytes(main))
    assert str(back) == str(main)
    assert "cross_entropy2_grad" in [op.type for op in back.global_block().ops]


def test_writer_gives_while_grad_in_paddles_form():
    """A While loop's gradient as Paddle 2.6 runs it (formats/paddle/while_grad.py): one
    ``original_output_grad`` name per ``Out@GRAD``; no SSA version in the grad block, where
    the counter's versions become the counter with ``increment`` ops of the opposite step
    (back to the iteration's start at the end); the body's variables not declared again."""
    from fluidlite.formats.paddle import program as pf
    main, desc = _training_desc(_while_rnn)
    (wg,) = _ops(desc, "while_grad")
    og = [b.decode() for b in _attrs(wg)["original_output_grad"].strings]
    assert len(og) == len(_slots(wg)["Out@GRAD"]) and "array_write_3.out@GRAD" in og
    gb = desc.blocks[main.global_block().ops[[op.type for op in main.global_block().ops]
                                              .index("while_grad")].attrs["sub_block"].idx]
    args = [a for od in gb.ops for v in list(od.inputs) + list(od.outputs) for a in v.arguments]
    assert not [a for a in args if "@SSA@" in a]
    steps = [_attrs(od)["step"].f for od in gb.ops if od.type == "increment"]
    assert steps == [-1.0]                  # after i's post-increment value was read
    body = {v.name for v in desc.blocks[gb.forward_block_idx].vars}
    assert body and not body & {v.name for v in gb.vars}
    back = pf.program_from_bytes(pf.program_to_bytes(main))
    assert str(back) == str(main)


def test_while_grad_without_a_paddle_form_is_written_as_fluidlites(caplog):
    """A loop-carried tensor overwritten by ``assign`` whose new value an op of the body
    reads (so its gradient op reads it too) has no Paddle form: written unchanged (fluidlite
    reads it back exactly), with a warning naming the variable. (Only overwriting, as
    StaticRNN's memories do, has one: tests ``static_rnn`` above.)"""
    from fluidlite.formats.paddle import program as pf
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()), fluid.unique_name.guard():
        x = L.data("x", [3], dtype="float32")
        h = L.assign(x)
        w = L.create_parameter([3, 3], "float32", name="w")
        i, n = L.fill_constant([1], "int64", 0), L.fill_constant([1], "int64", 2)
        cond = L.less_than(i, n)
        loop = L.While(cond)
        with loop.block():
            L.assign(L.tanh(h), h)
            L.assign(L.matmul(h, w), h)         # reads the value the first assign wrote
            L.increment(i)
            L.less_than(i, n, cond=cond)
        fluid.optimizer.SGD(0.1).minimize(L.mean(h))
    with caplog.at_level("WARNING", logger="fluidlite"):
        data = pf.program_to_bytes(main)
    (rec,) = [r for r in caplog.records if "while_grad" in r.getMessage()]
    assert repr(h.name) in rec.getMessage() and "Paddle cannot" in rec.getMessage()
    assert str(pf.program_from_bytes(data)) == str(main)


def test_writer_gives_array_gradients_in_fluids_form():
    from fluidlite.formats.paddle import program as pf
    main, desc = _training_desc(_array_grads)
    types = [od.type for od in desc.blocks[0].ops]
    for fluidlite_only in ("write_to_array_grad", "read_from_array_grad", "sum_tensor_array",
                           "clear_tensor_array_entry"):
        assert fluidlite_only not in types
    grads = [od for od in _ops(desc, "read_from_array") if "X_W" in _slots(od)]
    assert len(grads) == 2
    assert all(_attrs(od)["fluidlite_form"].s == b"write_to_array_grad+clear" for od in grads)
    assert _ops(desc, "sum") and _ops(desc, "write_to_array")
    back = pf.program_from_bytes(pf.program_to_bytes(main))
    assert str(back) == str(main)


def test_writer_stores_declared_float_lists():
    from fluidlite.formats.paddle import program as pf
    desc = _desc_of(lambda: L.prior_box(L.data("f", [4, 2, 2], dtype="float32"),
                                        L.data("im", [3, 8, 8], dtype="float32"),
                                        min_sizes=[2, 4], aspect_ratios=[1]))
    attrs = _attrs(_ops(desc, "prior_box")[0])
    assert attrs["min_sizes"].type == pf.FLOATS and list(attrs["min_sizes"].floats) == [2, 4]
    assert attrs["max_sizes"].type == pf.FLOATS and not attrs["max_sizes"].floats


def _bool_as_int_desc():
    desc = _desc_of(lambda: L.softmax(L.batch_norm(L.data("x", [3, 4, 4], dtype="float32"),
                                                   is_test=True), axis=1))
    (bn,) = _ops(desc, "batch_norm")
    for a in bn.attrs:
        if a.name in ("is_test", "use_global_stats"):       # as fluid <= 1.6 wrote them
            value = a.b
            a.ClearField("b")
            a.type, a.i = 0, int(value)
    return desc


def test_reader_takes_int_for_declared_bool():
    prog = _read(_bool_as_int_desc())
    (bn,) = [op for op in prog.global_block().ops if op.type == "batch_norm"]
    assert bn.attr("is_test") is True and bn.attr("use_global_stats") is False


def test_reader_refuses_bool_for_declared_int():
    from fluidlite.formats.paddle import program as pf
    desc = _bool_as_int_desc()
    (sm,) = _ops(desc, "softmax")
    axis = _attrs(sm)["axis"]
    axis.ClearField("i")
    axis.type, axis.b = pf.BOOLEAN, True            # Paddle 2.6 refuses this too
    with pytest.raises(pf.PaddleFormatError, match=r"'softmax'.*'axis' expects int"):
        _read(desc)


# what Paddle's ExtractAttribute converts: declared type -> stored types it accepts
_PADDLE_ACCEPTS = {6: {6, 0, 1}, 9: {9, 0, 1}, 1: {1, 0, 9}, 11: {11, 3, 4}}
# fluid 1.8 semantics fluidlite keeps where Paddle 2.6 changed the attribute's type
_PADDLE2_RETYPED = {("allclose", "rtol"), ("allclose", "atol"),
                    ("lars_momentum", "lars_weight_decay")}


def test_written_attribute_types_are_those_paddle_declares(tmp_path):
    """Every default attribute of every op type fluidlite shares with Paddle 2.6 is written
    with a type Paddle's registry declares or converts (``ExtractAttribute``)."""
    from fluidlite.core import registry
    from fluidlite.formats.paddle import program as pf
    python = _paddle_python()
    out = tmp_path / "protos.json"
    script = ("import json, sys, paddle\n"
              "from paddle.base.framework import OpProtoHolder\n"
              "h, protos = OpProtoHolder.instance(), {}\n"
              "for n in paddle.base.core.get_all_op_names():\n"
              "    try: protos[n] = {a.name: a.type for a in h.get_op_proto(n).attrs}\n"
              "    except Exception: pass\n"
              "json.dump(protos, open(sys.argv[1], 'w'))\n")
    proc = subprocess.run([python, "-c", script, str(out)], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, GLOG_minloglevel="2"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    protos = json.loads(out.read_text())
    checked, wrong = 0, []
    for op_type in registry.all_op_types():
        opdef = registry.get_op_def(op_type)
        for name, value in {**opdef.attr_defaults, **opdef.extra_attrs}.items():
            declared = protos.get(op_type, {}).get(name)
            if declared is None or value is None or isinstance(value, type) or \
                    (op_type, name) in _PADDLE2_RETYPED:
                continue
            attr = pf.messages()["OpDesc"]().attrs.add(name=name, type=0)
            pf._set_attr(attr, name, value, op_type, op_type)
            checked += 1
            if attr.type != declared and attr.type not in _PADDLE_ACCEPTS.get(declared, ()):
                wrong.append((op_type, name, attr.type, declared))
    assert checked > 500 and not wrong, (checked, wrong)


def test_reader_takes_paddles_own_array_gradients():
    """Paddle's own training programs (no ``fluidlite_form`` marker): read_from_array with X_W
    reads as write_to_array_grad, write_to_array as itself, a sum of arrays as
    sum_tensor_array; one step gives fluidlite's loss and parameters (no entry is written
    twice, where fluidlite's extra clear would differ)."""
    from fluidlite.formats.paddle import program as pf
    main, desc = _training_desc(_array_grads)
    for bd in desc.blocks:
        for od in bd.ops:
            for a in [a for a in od.attrs if a.name == "fluidlite_form"]:
                od.attrs.remove(a)
    paddle_form = _read(desc)
    types = [op.type for op in paddle_form.global_block().ops]
    assert "write_to_array_grad" in types and "sum_tensor_array" in types
    assert "read_from_array_grad" not in types and "clear_tensor_array_entry" not in types
    startup = fluid.Program()
    with fluid.program_guard(fluid.Program(), startup), fluid.unique_name.guard():
        _array_grads(np.random.RandomState(0))
    rng = np.random.RandomState(5)
    feed = {"x": rng.rand(4, 3).astype("float32"),
            "label": rng.randint(0, 3, (4, 1)).astype("int64")}
    loss = [op for op in main.global_block().ops if op.type == "mean"][0].output("Out")[0]
    results = []
    for prog in (main, paddle_form):
        scope = fluid.Scope()
        with fluid.scope_guard(scope):
            exe = fluid.Executor(fluid.CPUPlace())
            exe.run(startup)
            losses = [exe.run(prog, feed=feed, fetch_list=[loss])[0] for _ in range(3)]
            params = {p.name: np.asarray(scope.find_var(p.name).get_tensor())
                      for p in main.all_parameters()}
        results.append((losses, params))
    np.testing.assert_allclose(results[1][0], results[0][0], rtol=1e-6)
    for name, value in results[0][1].items():
        np.testing.assert_allclose(results[1][1][name], value, rtol=1e-6, err_msg=name)


def test_allclose_string_tolerances_of_paddle2():
    desc = _desc_of(lambda: L.allclose(L.data("x", [3], dtype="float32"),
                                       L.data("y", [3], dtype="float32"), rtol=1e-3))
    (od,) = _ops(desc, "allclose")
    for name, text in (("rtol", b"0.001"), ("atol", b"1e-08")):   # as Paddle 2.6 writes them
        attr = _attrs(od)[name]
        attr.ClearField("f")
        attr.type, attr.s = 2, text
    (op,) = [op for op in _read(desc).global_block().ops if op.type == "allclose"]
    assert op.attr("rtol") == 1e-3 and op.attr("atol") == 1e-8
