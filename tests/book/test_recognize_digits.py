"""Book chapter 2, recognize_digits: softmax regression, a multilayer perceptron and the
LeNet-style conv net with batch norm, trained with Adam on digit-like images."""
import numpy as np
import pytest

import fluidlite as fluid

from ._util import assert_decreases, batches, digits, reload_and_compare


def softmax_regression():
    img = fluid.data(name="img", shape=[None, 1, 28, 28], dtype="float32")
    predict = fluid.layers.fc(input=img, size=10, act="softmax")
    return predict


def multilayer_perceptron():
    img = fluid.data(name="img", shape=[None, 1, 28, 28], dtype="float32")
    hidden = fluid.layers.fc(input=img, size=200, act="relu")
    hidden = fluid.layers.fc(input=hidden, size=200, act="relu")
    prediction = fluid.layers.fc(input=hidden, size=10, act="softmax")
    return prediction


def convolutional_neural_network():
    img = fluid.data(name="img", shape=[None, 1, 28, 28], dtype="float32")
    conv_pool_1 = fluid.nets.simple_img_conv_pool(
        input=img, filter_size=5, num_filters=20, pool_size=2, pool_stride=2, act="relu")
    conv_pool_1 = fluid.layers.batch_norm(conv_pool_1)
    conv_pool_2 = fluid.nets.simple_img_conv_pool(
        input=conv_pool_1, filter_size=5, num_filters=50, pool_size=2, pool_stride=2,
        act="relu")
    prediction = fluid.layers.fc(input=conv_pool_2, size=10, act="softmax")
    return prediction


def train_program(net):
    label = fluid.data(name="label", shape=[None, 1], dtype="int64")
    predict = net()
    cost = fluid.layers.cross_entropy(input=predict, label=label)
    avg_cost = fluid.layers.mean(cost)
    acc = fluid.layers.accuracy(input=predict, label=label)
    return predict, [avg_cost, acc]


@pytest.mark.parametrize("net,steps,min_acc", [(softmax_regression, 120, 0.45),
                                               (multilayer_perceptron, 80, 0.45),
                                               (convolutional_neural_network, 40, 0.6)])
def test_recognize_digits(net, steps, min_acc, tmp_path):
    main_program, startup = fluid.default_main_program(), fluid.default_startup_program()
    main_program.random_seed = startup.random_seed = 90
    prediction, [avg_loss, acc] = train_program(net)
    test_program = main_program.clone(for_test=True)
    optimizer = fluid.optimizer.Adam(learning_rate=0.001)
    optimizer.minimize(avg_loss)

    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    train_x, train_y = digits(512, seed=1)
    test_x, test_y = digits(200, seed=2)
    losses = []
    for img, label in batches([train_x, train_y], 32, steps):
        loss, _ = exe.run(main_program, feed={"img": img, "label": label},
                          fetch_list=[avg_loss, acc])
        losses.append(loss)
    assert_decreases(losses, window=5, factor=0.7)
    test_loss, test_acc = exe.run(test_program, feed={"img": test_x, "label": test_y},
                                  fetch_list=[avg_loss, acc])
    assert test_acc[0] >= min_acc, (net.__name__, test_acc, losses)

    got, = reload_and_compare(str(tmp_path / "recognize_digits.inference.model"), ["img"],
                              [prediction], exe, main_program, {"img": test_x[:16]},
                              test_program, extra_feed={"label": test_y[:16]})
    assert got.shape == (16, 10)
    np.testing.assert_allclose(got.sum(axis=1), 1.0, rtol=1e-5)
