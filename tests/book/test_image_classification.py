"""Book chapter 3, image_classification: the VGG network (img_conv_group with batch norm and
dropout) and the CIFAR ResNet (basic blocks with shortcuts), shrunk to 3x16x16 images."""
import numpy as np
import pytest

import fluidlite as fluid

from ._util import assert_decreases, batches, reload_and_compare


def vgg_bn_drop(input):
    def conv_block(ipt, num_filter, groups, dropouts):
        return fluid.nets.img_conv_group(
            input=ipt, pool_size=2, pool_stride=2, conv_num_filter=[num_filter] * groups,
            conv_filter_size=3, conv_act="relu", conv_with_batchnorm=True,
            conv_batchnorm_drop_rate=dropouts, pool_type="max")

    conv1 = conv_block(input, 8, 2, [0.3, 0])
    conv2 = conv_block(conv1, 16, 2, [0.4, 0])
    conv3 = conv_block(conv2, 16, 3, [0.4, 0.4, 0])
    drop = fluid.layers.dropout(x=conv3, dropout_prob=0.5)
    fc1 = fluid.layers.fc(input=drop, size=32, act=None)
    bn = fluid.layers.batch_norm(input=fc1, act="relu")
    drop2 = fluid.layers.dropout(x=bn, dropout_prob=0.5)
    fc2 = fluid.layers.fc(input=drop2, size=32, act=None)
    predict = fluid.layers.fc(input=fc2, size=4, act="softmax")
    return predict


def conv_bn_layer(input, ch_out, filter_size, stride, padding, act="relu", bias_attr=False):
    tmp = fluid.layers.conv2d(input=input, filter_size=filter_size, num_filters=ch_out,
                              stride=stride, padding=padding, act=None, bias_attr=bias_attr)
    return fluid.layers.batch_norm(input=tmp, act=act)


def shortcut(input, ch_in, ch_out, stride):
    if ch_in != ch_out:
        return conv_bn_layer(input, ch_out, 1, stride, 0, None)
    return input


def basicblock(input, ch_in, ch_out, stride):
    tmp = conv_bn_layer(input, ch_out, 3, stride, 1)
    tmp = conv_bn_layer(tmp, ch_out, 3, 1, 1, act=None, bias_attr=True)
    short = shortcut(input, ch_in, ch_out, stride)
    return fluid.layers.elementwise_add(x=tmp, y=short, act="relu")


def layer_warp(block_func, input, ch_in, ch_out, count, stride):
    tmp = block_func(input, ch_in, ch_out, stride)
    for _ in range(1, count):
        tmp = block_func(tmp, ch_out, ch_out, 1)
    return tmp


def resnet_cifar10(ipt, depth=8):
    assert (depth - 2) % 6 == 0
    n = (depth - 2) // 6
    conv1 = conv_bn_layer(ipt, ch_out=8, filter_size=3, stride=1, padding=1)
    res1 = layer_warp(basicblock, conv1, 8, 8, n, 1)
    res2 = layer_warp(basicblock, res1, 8, 16, n, 2)
    res3 = layer_warp(basicblock, res2, 16, 32, n, 2)
    pool = fluid.layers.pool2d(input=res3, pool_size=4, pool_type="avg", pool_stride=1)
    predict = fluid.layers.fc(input=pool, size=4, act="softmax")
    return predict


def tiny_cifar(n, seed):
    """4 classes of 3x16x16 images: a coloured blob in one of the four quadrants."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 4, n)
    yy, xx = np.mgrid[0:16, 0:16]
    imgs = rng.normal(0, 0.3, (n, 3, 16, 16))
    for k, lab in enumerate(labels):
        cy, cx = 4 + 8 * (lab // 2) + rng.integers(-1, 2), 4 + 8 * (lab % 2) + rng.integers(-1, 2)
        blob = np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / 6.0)
        imgs[k] += blob * rng.uniform(0.5, 1.5, (3, 1, 1))
    return imgs.astype("float32"), labels[:, None].astype("int64")


@pytest.mark.parametrize("net", [vgg_bn_drop, resnet_cifar10])
def test_image_classification(net, tmp_path):
    main_program, startup = fluid.default_main_program(), fluid.default_startup_program()
    main_program.random_seed = startup.random_seed = 7
    images = fluid.data(name="pixel", shape=[None, 3, 16, 16], dtype="float32")
    label = fluid.data(name="label", shape=[None, 1], dtype="int64")
    predict = net(images)
    cost = fluid.layers.cross_entropy(input=predict, label=label)
    avg_cost = fluid.layers.mean(cost)
    acc = fluid.layers.accuracy(input=predict, label=label)
    test_program = main_program.clone(for_test=True)
    fluid.optimizer.Adam(learning_rate=0.01).minimize(avg_cost)

    test_types = {op.type for op in test_program.global_block().ops}
    assert not any(t.endswith("_grad") for t in test_types) and "adam" not in test_types
    assert all(op.attr("is_test") for op in test_program.global_block().ops
               if op.type in ("dropout", "batch_norm"))

    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    xs, ys = tiny_cifar(256, 0)
    losses = [exe.run(main_program, feed={"pixel": x, "label": y}, fetch_list=[avg_cost])[0]
              for x, y in batches([xs, ys], 32, 24)]
    assert_decreases(losses, window=4, factor=0.8)
    tx, ty = tiny_cifar(64, 1)
    _, test_acc = exe.run(test_program, feed={"pixel": tx, "label": ty},
                          fetch_list=[avg_cost, acc])
    assert test_acc[0] > 0.4, (net.__name__, test_acc, losses)
    # inference is deterministic: dropout scales, batch norm uses the moving statistics
    a, = exe.run(test_program, feed={"pixel": tx, "label": ty}, fetch_list=[predict])
    b, = exe.run(test_program, feed={"pixel": tx, "label": ty}, fetch_list=[predict])
    np.testing.assert_array_equal(a, b)
    reload_and_compare(str(tmp_path / "image_classification.inference.model"), ["pixel"],
                       [predict], exe, main_program, {"pixel": tx}, test_program,
                       extra_feed={"label": ty})
