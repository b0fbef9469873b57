"""fluid 1.8 model-zoo networks, written here in fluid 1.x's API after the structure of
PaddlePaddle/models release/1.8 (the zoo's own code is not vendored): each builder takes the
``fluid`` module (fluidlite here) and returns (feed names, feeds, prediction, loss).

* ``resnet``: PaddleCV/image_classification/models/resnet.py -- conv_bn_layer (conv without
  bias + batch_norm with the zoo's ``bn_<name>_scale/_offset/_mean/_variance`` names),
  basic blocks with 1x1 projection shortcuts, 7x7/2 stem, 3x3/2 max pool, global average
  pool, fc with Uniform(+-1/sqrt(fan_in)); loss as build_model.py: softmax then
  ``cross_entropy`` and ``mean``. ResNet-18's layout at a reduced width, 32x32 images.
* ``mobilenet``: models/mobilenet.py (v1): depthwise_separable = depthwise conv_bn_layer
  (groups = channels, use_cudnn=False) + pointwise 1x1, ``scale`` 0.25, the first blocks.
* ``text_cnn``: PaddleNLP's classification nets.py ``cnn_net``: embedding,
  ``nets.sequence_conv_pool`` (tanh, max), fc, fc softmax, cross_entropy.
* ``lstm_net``: the same file's ``lstm_net``: embedding, fc(4h), dynamic_lstm, max
  sequence_pool, tanh, fc tanh, fc softmax.
* ``word2vec``: the N-gram model of the book's word2vec chapter: four ``shared_w``
  embeddings concatenated, fc sigmoid, fc softmax over the dictionary, cross_entropy.
* ``seq2seq``: the book's machine translation, GRU encoder-decoder: trained teacher-forced,
  predicting by greedy decoding in a While loop over tensor arrays.
"""
import math
from typing import Any, Callable, Dict, List, Tuple

import numpy as np

Built = Tuple[List[str], Dict[str, Any], Any, Any]


def _conv_bn(fluid, x, num_filters, filter_size, stride=1, groups=1, act=None, name=None,
             use_cudnn=True):
    conv = fluid.layers.conv2d(x, num_filters, filter_size, stride=stride,
                               padding=(filter_size - 1) // 2, groups=groups, act=None,
                               use_cudnn=use_cudnn,
                               param_attr=fluid.ParamAttr(name=name + "_weights"),
                               bias_attr=False)
    bn = "bn_" + name
    return fluid.layers.batch_norm(conv, act=act, param_attr=fluid.ParamAttr(bn + "_scale"),
                                   bias_attr=fluid.ParamAttr(bn + "_offset"),
                                   moving_mean_name=bn + "_mean",
                                   moving_variance_name=bn + "_variance")


def _basic_block(fluid, x, num_filters, stride, name):
    a = _conv_bn(fluid, x, num_filters, 3, stride, act="relu", name=name + "_branch2a")
    b = _conv_bn(fluid, a, num_filters, 3, act=None, name=name + "_branch2b")
    short = x
    if x.shape[1] != num_filters or stride != 1:
        short = _conv_bn(fluid, x, num_filters, 1, stride, name=name + "_branch1")
    return fluid.layers.elementwise_add(short, b, act="relu")


def _classifier(fluid, feat, class_dim, label):
    pool = fluid.layers.pool2d(feat, pool_type="avg", global_pooling=True)
    stdv = 1.0 / math.sqrt(pool.shape[1] * 1.0)
    out = fluid.layers.fc(pool, class_dim, param_attr=fluid.ParamAttr(
        initializer=fluid.initializer.Uniform(-stdv, stdv)))
    prob = fluid.layers.softmax(out, use_cudnn=False)
    loss = fluid.layers.mean(fluid.layers.cross_entropy(prob, label))
    return prob, loss


def resnet(fluid, rng) -> Built:
    img = fluid.layers.data("image", [3, 32, 32], dtype="float32")
    label = fluid.layers.data("label", [1], dtype="int64")
    x = _conv_bn(fluid, img, 16, 7, 2, act="relu", name="conv1")
    x = fluid.layers.pool2d(x, 3, "max", 2, pool_padding=1)
    for stage, filters in enumerate((16, 32, 64, 128)):
        for i in range(2):
            x = _basic_block(fluid, x, filters, 2 if i == 0 and stage else 1,
                             name=f"res{stage + 2}{chr(97 + i)}")
    prob, loss = _classifier(fluid, x, 10, label)
    feeds = {"image": rng.rand(4, 3, 32, 32).astype("float32"),
             "label": rng.randint(0, 10, (4, 1)).astype("int64")}
    return ["image"], feeds, prob, loss


def mobilenet(fluid, rng) -> Built:
    scale = 0.25
    img = fluid.layers.data("image", [3, 32, 32], dtype="float32")
    label = fluid.layers.data("label", [1], dtype="int64")
    x = _conv_bn(fluid, img, int(32 * scale), 3, 2, act="relu", name="conv1")
    for i, (f1, f2, groups, stride) in enumerate(((32, 64, 32, 1), (64, 128, 64, 2),
                                                  (128, 128, 128, 1), (128, 256, 128, 2))):
        name = f"conv2_{i + 1}"
        x = _conv_bn(fluid, x, int(f1 * scale), 3, stride, groups=int(groups * scale),
                     act="relu", name=name + "_dw", use_cudnn=False)
        x = _conv_bn(fluid, x, int(f2 * scale), 1, act="relu", name=name + "_sep")
    prob, loss = _classifier(fluid, x, 10, label)
    feeds = {"image": rng.rand(3, 3, 32, 32).astype("float32"),
             "label": rng.randint(0, 10, (3, 1)).astype("int64")}
    return ["image"], feeds, prob, loss


def _words(fluid, rng, dict_dim, lengths):
    words = fluid.layers.data("words", [1], dtype="int64", lod_level=1)
    label = fluid.layers.data("label", [1], dtype="int64")
    ids = rng.randint(0, dict_dim, (sum(lengths), 1)).astype("int64")
    feeds = {"words": (ids, [lengths]),
             "label": rng.randint(0, 2, (len(lengths), 1)).astype("int64")}
    return words, label, feeds


def text_cnn(fluid, rng) -> Built:
    words, label, feeds = _words(fluid, rng, 100, [5, 3, 7])
    emb = fluid.layers.embedding(words, [100, 16], param_attr=fluid.ParamAttr(learning_rate=1.0))
    conv = fluid.nets.sequence_conv_pool(emb, 24, 3, act="tanh", pool_type="max")
    fc = fluid.layers.fc(conv, 12)
    prob = fluid.layers.fc(fc, 2, act="softmax")
    loss = fluid.layers.mean(fluid.layers.cross_entropy(prob, label))
    return ["words"], feeds, prob, loss


def lstm_net(fluid, rng) -> Built:
    words, label, feeds = _words(fluid, rng, 100, [4, 6, 2])
    emb = fluid.layers.embedding(words, [100, 16])
    fc0 = fluid.layers.fc(emb, 4 * 12)
    h, _ = fluid.layers.dynamic_lstm(fc0, 4 * 12, is_reverse=False)
    pooled = fluid.layers.tanh(fluid.layers.sequence_pool(h, "max"))
    fc1 = fluid.layers.fc(pooled, 8, act="tanh")
    prob = fluid.layers.fc(fc1, 2, act="softmax")
    loss = fluid.layers.mean(fluid.layers.cross_entropy(prob, label))
    return ["words"], feeds, prob, loss


def word2vec(fluid, rng) -> Built:
    dict_size, n = 60, 4
    names = ["firstw", "secondw", "thirdw", "forthw"]
    words = [fluid.layers.data(nm, [1], dtype="int64") for nm in names]
    nextw = fluid.layers.data("nextw", [1], dtype="int64")
    embs = [fluid.layers.embedding(w, [dict_size, 8], param_attr="shared_w") for w in words]
    hidden = fluid.layers.fc(fluid.layers.concat(embs, axis=1), 16, act="sigmoid")
    prob = fluid.layers.fc(hidden, dict_size, act="softmax")
    loss = fluid.layers.mean(fluid.layers.cross_entropy(prob, nextw))
    feeds = {nm: rng.randint(0, dict_size, (6, 1)).astype("int64") for nm in names}
    feeds["nextw"] = rng.randint(0, dict_size, (6, 1)).astype("int64")
    return names, feeds, prob, loss


def _greedy_decode(fluid, h0, vocab, hidden, steps):
    """The book's machine translation decoding, greedy: a While over tensor arrays; each step
    embeds the last id (``trg_emb``), runs the decoder's GRU cell (``gru_unit`` on the
    training decoder's weights) and takes the argmax of the shared output layer."""
    L = fluid.layers
    ids, states = L.create_array("int64"), L.create_array("float32")
    i = L.fill_constant([1], "int64", 0)
    n = L.fill_constant([1], "int64", steps)
    L.array_write(L.fill_constant_batch_size_like(h0, [-1, 1], "int64", 0), i, array=ids)
    L.array_write(h0, i, array=states)
    cond = L.less_than(i, n)
    loop = L.While(cond)
    with loop.block():
        emb = L.reshape(L.embedding(L.array_read(ids, i), [vocab, hidden],
                                    param_attr="trg_emb"), [-1, hidden])
        gates = L.fc(emb, 3 * hidden, param_attr="dec_in_w", bias_attr=False)
        h, _, _ = L.gru_unit(gates, L.array_read(states, i), 3 * hidden,
                             param_attr="dec_gru_w", bias_attr="dec_gru_b")
        prob = L.fc(h, vocab, act="softmax", param_attr="out_w", bias_attr="out_b")
        L.increment(i, in_place=True)
        L.array_write(L.reshape(L.argmax(prob, axis=1), [-1, 1]), i, array=ids)
        L.array_write(h, i, array=states)
        L.less_than(i, n, cond=cond)
    return L.tensor_array_to_tensor(ids, axis=1)[0]


def seq2seq(fluid, rng) -> Built:
    """A GRU encoder-decoder after the book's machine translation chapter: the encoder's last
    state starts a teacher-forced GRU decoder trained with cross_entropy; the prediction is
    the greedy While decoding of ``_greedy_decode`` (int64 ids)."""
    L, vocab, hidden = fluid.layers, 30, 8
    src = L.data("src", [1], dtype="int64", lod_level=1)
    trg = L.data("trg", [1], dtype="int64", lod_level=1)
    label = L.data("label", [1], dtype="int64", lod_level=1)
    enc = L.dynamic_gru(L.fc(L.embedding(src, [vocab, hidden]), 3 * hidden), hidden)
    h0 = L.sequence_last_step(enc)
    temb = L.embedding(trg, [vocab, hidden], param_attr="trg_emb")
    dec = L.dynamic_gru(L.fc(temb, 3 * hidden, param_attr="dec_in_w", bias_attr=False),
                        hidden, param_attr="dec_gru_w", bias_attr="dec_gru_b", h_0=h0)
    prob = L.fc(dec, vocab, act="softmax", param_attr="out_w", bias_attr="out_b")
    loss = L.mean(L.cross_entropy(prob, label))
    decoded = _greedy_decode(fluid, h0, vocab, hidden, 4)
    src_len, trg_len = [3, 5], [4, 2]
    feeds = {"src": (rng.randint(0, vocab, (8, 1)).astype("int64"), [src_len]),
             "trg": (rng.randint(0, vocab, (6, 1)).astype("int64"), [trg_len]),
             "label": (rng.randint(0, vocab, (6, 1)).astype("int64"), [trg_len])}
    return ["src"], feeds, decoded, loss


NETS: Dict[str, Callable[..., Built]] = {
    "resnet": resnet, "mobilenet": mobilenet, "text_cnn": text_cnn, "lstm_net": lstm_net,
    "word2vec": word2vec, "seq2seq": seq2seq}
# the zoo's optimizers for these families (image classification: Momentum 0.9)
OPTIMIZERS = {"resnet": ("Momentum", 0.05), "mobilenet": ("Momentum", 0.05),
              "text_cnn": ("Adagrad", 0.05), "lstm_net": ("Adam", 0.01),
              "word2vec": ("SGD", 0.1), "seq2seq": ("Adam", 0.01)}
