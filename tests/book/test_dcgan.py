"""Book chapter 9 / the fluid DCGAN: a generator (fc + batch_norm, two transposed convolutions)
and a discriminator (conv-pool, batch_norm, fc) trained with two programs: ``d_program`` updates
D, ``dg_program`` = G followed by D updates only G's parameters (``parameter_list``)."""
import numpy as np

import fluidlite as fluid

from ._util import assert_decreases, digits, reload_and_compare

NOISE_SIZE = 16
gf_dim, df_dim, gfc_dim, dfc_dim, img_dim = 8, 8, 64, 32, 28


def bn(x, name, act="relu"):
    return fluid.layers.batch_norm(x, param_attr=name + "1", bias_attr=name + "2",
                                   moving_mean_name=name + "3",
                                   moving_variance_name=name + "4", name=name, act=act)


def conv(x, num_filters, name, act=None):
    return fluid.nets.simple_img_conv_pool(input=x, filter_size=5, num_filters=num_filters,
                                           pool_size=2, pool_stride=2, param_attr=name + "w",
                                           bias_attr=name + "b", act=act)


def fc(x, num_filters, name, act=None):
    return fluid.layers.fc(input=x, size=num_filters, act=act, param_attr=name + "w",
                           bias_attr=name + "b")


def deconv(x, num_filters, name, filter_size=5, stride=2, dilation=1, padding=2,
           output_size=None, act=None):
    return fluid.layers.conv2d_transpose(input=x, param_attr=name + "w", bias_attr=name + "b",
                                         num_filters=num_filters, output_size=output_size,
                                         filter_size=filter_size, stride=stride,
                                         dilation=dilation, padding=padding, act=act)


def D(x):
    x = fluid.layers.reshape(x=x, shape=[-1, 1, 28, 28])
    x = conv(x, df_dim, act="leaky_relu", name="conv1")
    x = bn(conv(x, df_dim * 2, name="conv2"), act="leaky_relu", name="bn1")
    x = bn(fc(x, dfc_dim, name="fc1"), act="leaky_relu", name="bn2")
    x = fc(x, 1, act=None, name="fc2")
    return x


def G(x):
    x = bn(fc(x, gfc_dim, name="gfc1"), name="gbn1")
    x = bn(fc(x, gf_dim * 2 * img_dim // 4 * img_dim // 4, name="gfc2"), name="gbn2")
    x = fluid.layers.reshape(x, [-1, gf_dim * 2, img_dim // 4, img_dim // 4])
    x = deconv(x, gf_dim * 2, act="relu", output_size=[14, 14], name="gdeconv1")
    x = deconv(x, 1, filter_size=5, padding=2, act="tanh", output_size=[28, 28],
               name="gdeconv2")
    x = fluid.layers.reshape(x, shape=[-1, 28 * 28])
    return x


def loss(x, label):
    return fluid.layers.mean(
        fluid.layers.sigmoid_cross_entropy_with_logits(x=x, label=label))


def _params(scope, names):
    return {n: np.array(scope.find_var(n).get_tensor()).copy() for n in names}


def test_dcgan(tmp_path):
    startup = fluid.default_startup_program()
    startup.random_seed = 1
    d_program = fluid.Program()
    dg_program = fluid.Program()
    with fluid.program_guard(d_program):
        img = fluid.data(name="img", shape=[None, 784], dtype="float32")
        label = fluid.data(name="label", shape=[None, 1], dtype="float32")
        d_logit = D(img)
        d_loss = loss(d_logit, label)
    with fluid.program_guard(dg_program):
        noise = fluid.data(name="noise", shape=[None, NOISE_SIZE], dtype="float32")
        g_img = G(x=noise)
        g_program = dg_program.clone()
        g_program_test = dg_program.clone(for_test=True)
        dg_logit = D(g_img)
        dg_loss = loss(dg_logit, fluid.layers.fill_constant_batch_size_like(
            input=noise, dtype="float32", shape=[-1, 1], value=1.0))
    opt = fluid.optimizer.Adam(learning_rate=0.002)
    opt.minimize(loss=d_loss)
    g_params = [p.name for p in g_program.global_block().all_parameters()]
    d_params = [p.name for p in d_program.global_block().all_parameters() if p.trainable]
    opt.minimize(loss=dg_loss, parameter_list=g_params)

    def updated(prog):
        return {op.input("Param")[0] for op in prog.global_block().ops if op.type == "adam"}
    assert updated(d_program) == set(d_params)
    assert updated(dg_program) == {p for p in g_params if not p.endswith(("3", "4"))}
    assert not set(d_params) & set(g_params)
    assert g_img.shape == (-1, 784)

    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    scope = fluid.global_scope()
    rng = np.random.default_rng(0)
    real, _ = digits(32, seed=3)
    real = real.reshape(32, 784)
    batch = 16
    real_labels = np.ones((batch, 1), "float32")
    fake_labels = np.zeros((batch, 1), "float32")

    # one full GAN step as the book runs it
    noise_data = rng.uniform(-1.0, 1.0, (batch, NOISE_SIZE)).astype("float32")
    generated, = exe.run(g_program, feed={"noise": noise_data}, fetch_list=[g_img])
    assert generated.shape == (batch, 784) and np.abs(generated).max() <= 1.0
    total_images = np.concatenate([real[:batch], generated])
    total_labels = np.concatenate([real_labels, fake_labels])
    g_before = _params(scope, g_params)
    d_losses = [exe.run(d_program, feed={"img": total_images, "label": total_labels},
                        fetch_list=[d_loss])[0]]
    # the discriminator step leaves the generator alone ...
    for n, v in _params(scope, g_params).items():
        np.testing.assert_array_equal(v, g_before[n])
    d_before = _params(scope, d_params)
    dg_losses = [exe.run(dg_program, feed={"noise": noise_data}, fetch_list=[dg_loss])[0]]
    # ... and the generator step (parameter_list) leaves the discriminator's weights alone
    for n, v in _params(scope, d_params).items():
        np.testing.assert_array_equal(v, d_before[n])
    assert any(not np.array_equal(v, g_before[n]) for n, v in _params(scope, g_params).items())

    # D learns to separate real from these fakes; then G learns to fool the (fixed) D
    for _ in range(7):
        d_losses.append(exe.run(d_program, feed={"img": total_images, "label": total_labels},
                                fetch_list=[d_loss])[0])
    assert_decreases(d_losses, window=2, factor=0.9)
    for _ in range(7):
        dg_losses.append(exe.run(dg_program, feed={"noise": noise_data},
                                 fetch_list=[dg_loss])[0])
    assert_decreases(dg_losses, window=2, factor=0.9)

    # the generator as an inference model (batch norm switches to its moving statistics)
    assert all(op.attr("is_test") for op in g_program_test.global_block().ops
               if op.type == "batch_norm")
    reload_and_compare(str(tmp_path / "dcgan_generator.inference.model"), ["noise"], [g_img],
                       exe, g_program, {"noise": noise_data}, g_program_test)
