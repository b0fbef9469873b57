"""Run under PaddlePaddle 2.6's interpreter (tests/real/test_model_zoo.py).

usage: python paddle_zoo.py export OUTDIR
    Builds the zoo networks of zoo_nets.py again in Paddle 2.6's static API (ResNet,
    MobileNet v1, text CNN, word2vec), runs them in test mode and saves, per model,
    OUTDIR/<model>/model.pdmodel + .pdiparams (paddle.static.save_inference_model),
    feed_<set>_<i>.npy (+ lod_<set>_<i>.json) and fetch_<set>_<i>.npy for two feed sets: "a"
    and "b", the second with another batch size (and, for the CNNs, another image size:
    their image input is declared [-1, 3, -1, -1]).
usage: python paddle_zoo.py run CASES_DIR
    For every CASES_DIR/<model>/ that fluidlite wrote: loads infer/ (fluid 1.x
    ``__model__`` + ``__params__`` directory) with paddle.static.load_inference_model and
    runs feed_<i>.npy, saving paddle_<i>.npy; then loads the training program train/ckpt.pdmodel
    (paddle.static.deserialize_program) with its state (paddle.static.load), runs the number
    of steps in steps.txt on the training feeds and saves paddle_loss_<step>.npy, and the
    parameters named in names.txt after the first step (paddle_param_<i>.npy) and after the
    last (paddle_final_<i>.npy). Failures go to error_infer.txt / error_train.txt.
"""
import json
import math
import os
import sys
import traceback

import numpy as np
import paddle
import paddle.nn.functional as F

paddle.enable_static()
S = paddle.static


def _conv_bn(x, num_filters, filter_size, stride=1, groups=1, act=None, name=None):
    conv = S.nn.conv2d(x, num_filters, filter_size, stride=stride,
                       padding=(filter_size - 1) // 2, groups=groups,
                       param_attr=paddle.ParamAttr(name=name + "_weights"), bias_attr=False)
    bn = "bn_" + name
    return S.nn.batch_norm(conv, act=act, param_attr=paddle.ParamAttr(bn + "_scale"),
                           bias_attr=paddle.ParamAttr(bn + "_offset"),
                           moving_mean_name=bn + "_mean", moving_variance_name=bn + "_variance")


def _classifier(feat, class_dim):
    pool = F.adaptive_avg_pool2d(feat, 1)
    stdv = 1.0 / math.sqrt(pool.shape[1] * 1.0)
    out = S.nn.fc(pool, class_dim, weight_attr=paddle.ParamAttr(
        initializer=paddle.nn.initializer.Uniform(-stdv, stdv)))
    return F.softmax(out)


def resnet(rng):
    img = S.data("image", [-1, 3, -1, -1], "float32")
    x = _conv_bn(img, 16, 7, 2, act="relu", name="conv1")
    x = F.max_pool2d(x, 3, 2, padding=1)
    for stage, filters in enumerate((16, 32, 64, 128)):
        for i in range(2):
            stride = 2 if i == 0 and stage else 1
            name = f"res{stage + 2}{chr(97 + i)}"
            a = _conv_bn(x, filters, 3, stride, act="relu", name=name + "_branch2a")
            b = _conv_bn(a, filters, 3, name=name + "_branch2b")
            short = x
            if x.shape[1] != filters or stride != 1:
                short = _conv_bn(x, filters, 1, stride, name=name + "_branch1")
            x = F.relu(paddle.add(short, b))
    return [img], [_classifier(x, 10)], [
        {"image": rng.rand(4, 3, 32, 32).astype("float32")},
        {"image": rng.rand(2, 3, 48, 40).astype("float32")}]


def mobilenet(rng):
    scale = 0.25
    img = S.data("image", [-1, 3, -1, -1], "float32")
    x = _conv_bn(img, int(32 * scale), 3, 2, act="relu", name="conv1")
    for i, (f1, f2, groups, stride) in enumerate(((32, 64, 32, 1), (64, 128, 64, 2),
                                                  (128, 128, 128, 1), (128, 256, 128, 2))):
        name = f"conv2_{i + 1}"
        x = _conv_bn(x, int(f1 * scale), 3, stride, groups=int(groups * scale), act="relu",
                     name=name + "_dw")
        x = _conv_bn(x, int(f2 * scale), 1, act="relu", name=name + "_sep")
    return [img], [_classifier(x, 10)], [
        {"image": rng.rand(3, 3, 32, 32).astype("float32")},
        {"image": rng.rand(5, 3, 40, 24).astype("float32")}]


def _lod(rng, lengths, vocab):
    ids = rng.randint(0, vocab, (sum(lengths),)).astype("int64")
    return paddle.base.create_lod_tensor(ids, [lengths], paddle.CPUPlace())


def text_cnn(rng):
    # 1-D ids: Paddle 2.6's embedding (lookup_table_v2) appends the embedding dim
    words = S.data("words", [-1], "int64", lod_level=1)
    emb = S.nn.embedding(words, [100, 16])
    conv = S.nn.sequence_conv(emb, 24, 3, act="tanh")
    pooled = S.nn.sequence_pool(conv, "max")
    prob = S.nn.fc(S.nn.fc(pooled, 12), 2, activation="softmax")
    return [words], [prob], [{"words": _lod(rng, [5, 3, 7], 100)},
                             {"words": _lod(rng, [2, 9], 100)}]


def word2vec(rng):
    names = ["firstw", "secondw", "thirdw", "forthw"]
    words = [S.data(n, [-1, 1], "int64") for n in names]
    embs = [S.nn.embedding(w, [60, 8], param_attr="shared_w") for w in words]
    hidden = S.nn.fc(paddle.concat(embs, axis=1), 16, activation="sigmoid")
    prob = S.nn.fc(hidden, 60, activation="softmax")
    return words, [prob], [{n: rng.randint(0, 60, (6, 1)).astype("int64") for n in names},
                           {n: rng.randint(0, 60, (9, 1)).astype("int64") for n in names}]


NETS = {"resnet": resnet, "mobilenet": mobilenet, "text_cnn": text_cnn, "word2vec": word2vec}


def _save_feed(d, tag, i, value):
    if isinstance(value, paddle.base.core.LoDTensor):
        with open(os.path.join(d, f"lod_{tag}_{i}.json"), "w") as f:
            json.dump(value.recursive_sequence_lengths(), f)
        value = np.array(value)
    np.save(os.path.join(d, f"feed_{tag}_{i}.npy"), value)


def export(outdir):
    for name, build in NETS.items():
        main, startup = S.Program(), S.Program()
        main.random_seed = startup.random_seed = 1
        with S.program_guard(main, startup):
            feed_vars, fetch_vars, feed_sets = build(np.random.RandomState(5))
        exe = S.Executor(paddle.CPUPlace())
        scope = S.Scope()
        d = os.path.join(outdir, name)
        os.makedirs(d)
        with S.scope_guard(scope):
            exe.run(startup)
            test = main.clone(for_test=True)
            for tag, feeds in zip("ab", feed_sets):
                outs = exe.run(test, feed=feeds, fetch_list=fetch_vars)
                for i, v in enumerate(feed_vars):
                    _save_feed(d, tag, i, feeds[v.name])
                for i, o in enumerate(outs):
                    np.save(os.path.join(d, f"fetch_{tag}_{i}.npy"), np.asarray(o))
            S.save_inference_model(os.path.join(d, "model"), feed_vars, fetch_vars, exe,
                                   program=main)


def _lines(path):
    with open(path) as f:
        return f.read().split()


def _load_feed(d, i):
    arr = np.load(os.path.join(d, f"feed_{i}.npy"))
    lod = os.path.join(d, f"lod_{i}.json")
    if os.path.exists(lod):
        with open(lod) as f:
            return paddle.base.create_lod_tensor(arr, json.load(f), paddle.CPUPlace())
    return arr


def run_infer(case):
    exe = S.Executor(paddle.CPUPlace())
    with S.scope_guard(S.Scope()):
        program, feed_names, targets = S.load_inference_model(
            os.path.join(case, "infer"), exe, model_filename=None,
            params_filename="__params__")
        feeds = {n: _load_feed(case, i) for i, n in enumerate(feed_names)}
        # LoD outputs (a sequence net's) come back as LoDTensors: the array and its LoD
        outs = exe.run(program, feed=feeds, fetch_list=targets, return_numpy=False)
        for i, o in enumerate(outs):
            np.save(os.path.join(case, f"paddle_{i}.npy"), np.array(o))
            with open(os.path.join(case, f"paddle_lod_{i}.json"), "w") as f:
                json.dump(o.recursive_sequence_lengths(), f)


def run_train(case):
    with open(os.path.join(case, "train", "ckpt.pdmodel"), "rb") as f:
        program = S.deserialize_program(f.read())
    exe = S.Executor(paddle.CPUPlace())
    scope = S.Scope()
    with S.scope_guard(scope):
        S.load(program, os.path.join(case, "train", "ckpt"), exe)
        names = _lines(os.path.join(case, "train_feeds.txt"))
        feeds = {n: _load_feed(os.path.join(case, "train"), i) for i, n in enumerate(names)}
        names = _lines(os.path.join(case, "names.txt"))
        for step in range(int(_lines(os.path.join(case, "steps.txt"))[0])):
            (loss,) = exe.run(program, feed=feeds,
                              fetch_list=_lines(os.path.join(case, "loss_name.txt")))
            np.save(os.path.join(case, f"paddle_loss_{step}.npy"), np.asarray(loss))
            stem = "paddle_param" if step == 0 else "paddle_final"
            for i, n in enumerate(names):
                np.save(os.path.join(case, f"{stem}_{i}.npy"),
                        np.array(scope.find_var(n).get_tensor()))


def run(cases):
    for name in sorted(os.listdir(cases)):
        case = os.path.join(cases, name)
        if not os.path.isdir(case):         # summary.json of an earlier run
            continue
        for what, fn in (("infer", run_infer), ("train", run_train)):
            if not os.path.isdir(os.path.join(case, what)):    # a training-only case
                continue
            try:
                fn(case)
            except Exception:                   # reported per case by the test
                with open(os.path.join(case, f"error_{what}.txt"), "w") as f:
                    f.write(traceback.format_exc()[-4000:])


if __name__ == "__main__":
    {"export": export, "run": run}[sys.argv[1]](sys.argv[2])
