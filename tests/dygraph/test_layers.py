"""Dygraph layers, fluid.layers in dygraph, the seed 002 example and nn.utils clipping."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import dygraph
from fluidlite.nn.utils import clip_grad_norm_, clip_grad_value_


@pytest.fixture(autouse=True)
def dy():
    with dygraph.guard():
        yield


def f32(*shape, seed=0):
    return np.random.RandomState(seed).rand(*shape).astype("float32")


def test_seed002_dygraph_example_moves_weights_by_clipped_grad():
    linear = fluid.dygraph.Linear(10, 10)
    assert (linear.weight.name, linear.bias.name) == ("linear_0.w_0", "linear_0.b_0")
    inputs = fluid.layers.uniform_random([32, 10]).astype('float32')
    out = linear(fluid.dygraph.to_variable(inputs))
    loss = fluid.layers.reduce_mean(out)
    loss.backward()
    clip = fluid.clip.GradientClipByValue(min=-1, max=1)
    w0, b0 = linear.weight.numpy().copy(), linear.bias.numpy().copy()
    gw, gb = linear.weight.gradient().copy(), linear.bias.gradient().copy()
    sgd_optimizer = fluid.optimizer.SGD(
        learning_rate=0.1, parameter_list=linear.parameters(), grad_clip=clip)
    ops, params_grads = sgd_optimizer.minimize(loss)
    assert ops == [] and [p.name for p, _ in params_grads] == ["linear_0.b_0", "linear_0.w_0"]
    np.testing.assert_array_equal(linear.weight.numpy(),
                                  w0 - np.float32(0.1) * np.clip(gw, -1, 1))
    np.testing.assert_array_equal(linear.bias.numpy(), b0 - np.float32(0.1) * np.clip(gb, -1, 1))
    np.testing.assert_allclose(gb, np.full(10, 0.1), rtol=1e-6)   # d mean / d b = 1/10


def test_need_clip_selects_parameters():
    linear = fluid.dygraph.Linear(4, 4)
    loss = fluid.layers.reduce_sum(linear(dygraph.to_variable(f32(8, 4) * 10)))
    loss.backward()
    clip = fluid.clip.GradientClipByValue(max=0.5,
                                          need_clip=lambda p: p.name == linear.weight.name)
    pairs = clip([(p, p.grad) for p in linear.parameters()])
    got = {p.name: g.numpy() for p, g in pairs}
    assert got["linear_0.w_0"].max() <= 0.5
    np.testing.assert_array_equal(got["linear_0.b_0"], np.full(4, 8.0))   # not clipped


def test_torch_clip_grad_value_example():
    lin = dygraph.Linear(3, 2, param_attr=fluid.initializer.Constant(0.0))
    x = dygraph.to_variable(np.array([[0.2, 0.5, 0.2]], "float32"))
    label = dygraph.to_variable(np.array([[0]], "int64"))
    loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(lin(x), label))
    loss.backward()
    np.testing.assert_allclose(lin.weight.gradient(),
                               [[-0.1, 0.1], [-0.25, 0.25], [-0.1, 0.1]], rtol=1e-6)
    np.testing.assert_allclose(lin.bias.gradient(), [-0.5, 0.5], rtol=1e-6)
    clip_grad_value_(lin.parameters(), 0.1)
    np.testing.assert_allclose(lin.weight.gradient(),
                               [[-0.1, 0.1], [-0.1, 0.1], [-0.1, 0.1]], rtol=1e-6)
    np.testing.assert_allclose(lin.bias.gradient(), [-0.1, 0.1], rtol=1e-6)


def test_clip_grad_norm_scales_and_returns_the_norm():
    lin = dygraph.Linear(3, 2)
    lin.weight._grad = np.full((3, 2), 3.0, "float32")
    lin.bias._grad = np.full(2, 3.0, "float32")
    total = clip_grad_norm_(lin.parameters(), max_norm=1.0)
    assert float(total) == pytest.approx(np.sqrt(8 * 9.0))
    got = np.concatenate([lin.weight.gradient().ravel(), lin.bias.gradient()])
    assert np.linalg.norm(got) == pytest.approx(1.0, rel=1e-5)
    lin.weight._grad = np.full((3, 2), 1e20, "float32")     # float32 squares overflow
    assert float(clip_grad_norm_(lin.parameters(), 1.0)) == pytest.approx(1e20 * np.sqrt(6),
                                                                          rel=1e-5)
    assert np.isfinite(lin.weight.gradient()).all()
    lin.weight._grad = np.full((3, 2), np.inf, "float32")
    with pytest.raises(RuntimeError, match="non-finite"):
        clip_grad_norm_(lin.parameters(), 1.0, error_if_nonfinite=True)
    assert float(clip_grad_norm_([lin.bias], 1.0, norm_type=float("inf"))) > 0


def test_layer_bookkeeping_and_state_dict():
    class Net(dygraph.Layer):
        def __init__(self):
            super().__init__()
            self.fc1 = dygraph.Linear(4, 8, act="relu")
            self.fc2 = dygraph.Linear(8, 2)
            self.extra = self.create_parameter([2], is_bias=True)

        def forward(self, x):
            return self.fc2(self.fc1(x)) + self.extra

    net = Net()
    names = [n for n, _ in net.named_parameters()]
    assert names == ["extra", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    assert [p.name for p in net.parameters()][1:] == ["linear_0.w_0", "linear_0.b_0",
                                                      "linear_1.w_0", "linear_1.b_0"]
    assert net.full_name() == "net_0" and len(net.sublayers()) == 2
    sd = net.state_dict()
    assert list(sd) == ["extra", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    other = Net()
    other.set_dict({k: v.numpy() for k, v in sd.items()})
    x = dygraph.to_variable(f32(3, 4))
    np.testing.assert_array_equal(net(x).numpy(), other(x).numpy())
    with pytest.raises(ValueError, match="shape"):
        other.set_dict(dict(sd, extra=np.zeros(3)))
    calls = []
    h = net.register_forward_pre_hook(lambda layer, inp: calls.append("pre"))
    net.register_forward_post_hook(lambda layer, inp, out: out * 0)
    assert float(fluid.layers.reduce_sum(net(x))) == 0 and calls == ["pre"]
    h.remove()
    net(x)
    assert calls == ["pre"]
    fluid.layers.reduce_sum(other(x)).backward()
    assert other.fc1.weight.gradient() is not None
    other.clear_gradients()
    assert all(p.gradient() is None for p in other.parameters())
    with pytest.raises(TypeError, match="assignment to parameter 'weight' should be of type "
                                        "Parameter or None, but got 'VarBase'"):
        other.fc1.weight = dygraph.to_variable(f32(4, 8))     # fluid's check
    assert other.fc1.weight is other.fc1.parameters()[0]
    other.fc2.bias = None                                     # None is allowed: no bias
    assert other.fc2(dygraph.to_variable(f32(3, 8))).shape == [3, 2]


def test_containers():
    seq = dygraph.Sequential(dygraph.Linear(2, 3), dygraph.Linear(3, 1))
    assert len(seq.parameters()) == 4 and seq(dygraph.to_variable(f32(5, 2))).shape == [5, 1]
    ll = dygraph.LayerList([dygraph.Linear(2, 2) for _ in range(3)])
    assert len(ll) == 3 and len(ll.parameters()) == 6
    pl = dygraph.ParameterList([ll[0].weight])
    assert pl.parameters() == [ll[0].weight]


def test_conv_pool_bn_dropout_embedding_layernorm():
    x = dygraph.to_variable(f32(2, 3, 8, 8))
    conv = dygraph.Conv2D(3, 4, 3, padding=1, act="relu")
    assert conv.weight.shape == [4, 3, 3, 3] and conv.weight.name == "conv2d_0.w_0"
    y = dygraph.Pool2D(2, "max", 2)(conv(x))
    assert y.shape == [2, 4, 4, 4]
    bn = dygraph.BatchNorm(4)
    z = bn(y)
    np.testing.assert_allclose(z.numpy().mean(axis=(0, 2, 3)), 0, atol=1e-5)
    assert not np.allclose(bn._mean.numpy(), 0)                  # running stats moved
    bn.eval()
    m = bn._mean.numpy().copy()
    bn(y)
    np.testing.assert_array_equal(bn._mean.numpy(), m)           # frozen in eval mode
    drop = dygraph.Dropout(0.5)
    d = drop(z)
    assert (d.numpy() == 0).mean() > 0.2
    drop.eval()
    np.testing.assert_allclose(drop(z).numpy(), z.numpy() * 0.5, rtol=1e-6)
    emb = dygraph.Embedding([10, 3], padding_idx=0)
    e = emb(dygraph.to_variable(np.array([[0, 2], [4, 0]], "int64")))
    assert e.shape == [2, 2, 3] and (e.numpy()[0, 0] == 0).all()
    ln = dygraph.LayerNorm([3])
    out = ln(e)
    fluid.layers.reduce_sum(out * out).backward()
    assert emb.weight.gradient()[0].sum() == 0 and emb.weight.gradient()[2].any()
    pr = dygraph.PRelu("all")      # fluid 1.8's dygraph PRelu starts alpha at 1.0
    assert pr.weight.shape == [1] and pr.weight.numpy()[0] == 1.0
    pr = dygraph.PRelu("all", param_attr=fluid.ParamAttr(
        initializer=fluid.initializer.Constant(0.25)))
    np.testing.assert_allclose(pr(dygraph.to_variable(np.array([-2.0, 3.0], "float32"))).numpy(),
                               [-0.5, 3.0])


def test_fluid_layers_in_dygraph():
    x = dygraph.to_variable(f32(4, 5))
    x.stop_gradient = False
    h = fluid.layers.fc(x, size=3, act="tanh")
    s = fluid.layers.softmax(h)
    c = fluid.layers.concat([s, s], axis=1)
    r = fluid.layers.reshape(c, [2, -1])
    loss = fluid.layers.reduce_mean(fluid.layers.square(r))
    loss.backward()
    assert x.gradient().shape == (4, 5) and np.abs(x.gradient()).sum() > 0


def test_optimizer_without_parameter_list_says_so():
    lin = dygraph.Linear(2, 2)
    loss = fluid.layers.reduce_mean(lin(dygraph.to_variable(f32(3, 2))))
    loss.backward()
    with pytest.raises(AttributeError, match="parameter_list argument given to the Optimizer "
                                             "should not be None in dygraph mode"):
        fluid.optimizer.SGD(0.1).minimize(loss)


def test_op_errors_name_the_user_line():
    a = dygraph.to_variable(np.ones((2, 3), "float32"))
    b = dygraph.to_variable(np.ones((4, 5), "float32"))
    with pytest.raises(ValueError, match=r"dygraph op 'mul' run at[\s\S]*test_layers.py"):
        fluid.layers.mul(a, b)


def test_sample_runs():
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "samples/dygraph_clip.py"], capture_output=True,
                         text=True, check=True, timeout=60).stdout
    assert "after clip 1.0000" in out and "every update was exactly" in out


def test_group_instance_norm_and_bilinear_match_numpy():
    x = f32(2, 4, 3, 3) * 5
    gn = dygraph.GroupNorm(4, 2)
    out = gn(dygraph.to_variable(x)).numpy()
    g = x.reshape(2, 2, -1)
    ref = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + 1e-5))
    np.testing.assert_allclose(out, ref.reshape(x.shape), rtol=1e-4, atol=1e-5)
    inorm = dygraph.InstanceNorm(4)
    i = x.reshape(2, 4, -1)
    ref = (i - i.mean(-1, keepdims=True)) / np.sqrt(i.var(-1, keepdims=True) + 1e-5)
    t = dygraph.to_variable(x)
    t.stop_gradient = False
    res = inorm(t)
    np.testing.assert_allclose(res.numpy(), ref.reshape(x.shape), rtol=1e-4, atol=1e-5)
    fluid.layers.reduce_sum(res * res).backward()
    assert inorm.weight.gradient().shape == (4,) and t.gradient().shape == x.shape
    btp = dygraph.BilinearTensorProduct(3, 2, 4)
    a, b = f32(5, 3), f32(5, 2, seed=1)
    w = btp.weight.numpy()
    ref = np.einsum("bp,ipq,bq->bi", a, w, b) + btp.bias.numpy()
    np.testing.assert_allclose(btp(dygraph.to_variable(a), dygraph.to_variable(b)).numpy(), ref,
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("origin_mode", [False, True])
def test_gru_unit_matches_numpy(origin_mode):
    d = 3
    gru = dygraph.GRUUnit(3 * d, origin_mode=origin_mode,
                          bias_attr=fluid.initializer.Uniform(-0.5, 0.5))
    x, h = f32(4, 3 * d), f32(4, d, seed=1)
    w, b = gru.weight.numpy(), gru.bias.numpy()
    sig = lambda v: 1 / (1 + np.exp(-v))
    g = x + b
    # the gru_unit op's weight layout: the first 2*d*d elements are W_ur [d, 2d], the rest W_c
    w_ur, w_c = w.reshape(-1)[:2 * d * d].reshape(d, 2 * d), w.reshape(-1)[2 * d * d:].reshape(d, d)
    ur = sig(g[:, :2 * d] + h @ w_ur)
    u, r = ur[:, :d], ur[:, d:]
    c = np.tanh(g[:, 2 * d:] + (r * h) @ w_c)
    ref = u * h + (1 - u) * c if origin_mode else u * (c - h) + h
    ht = dygraph.to_variable(h)
    ht.stop_gradient = False
    new_h, r_h, gate = gru(dygraph.to_variable(x), ht)
    np.testing.assert_allclose(new_h.numpy(), ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(r_h.numpy(), r * h, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gate.numpy(), np.concatenate([u, r, c], 1), rtol=1e-5,
                               atol=1e-6)
    fluid.layers.reduce_sum(new_h).backward()
    assert gru.weight.gradient().shape == (d, 3 * d) and ht.gradient().shape == (4, d)


def test_spectral_norm_divides_by_the_top_singular_value():
    w = f32(4, 3, 2) - 0.5
    sn = dygraph.SpectralNorm([4, 3, 2], dim=1, power_iters=30)
    wt = dygraph.to_variable(w)
    wt.stop_gradient = False
    out = sn(wt)
    sigma = np.linalg.svd(np.moveaxis(w, 1, 0).reshape(3, -1), compute_uv=False)[0]
    np.testing.assert_allclose(out.numpy(), w / sigma, rtol=1e-4, atol=1e-5)
    fluid.layers.reduce_sum(out).backward()
    assert wt.gradient().shape == w.shape and sn.weight_u.gradient() is None


def test_dygraph_layer_names_are_drawn_when_first_read():
    """An eager layer call draws no name until its output's (or its helper's) name is read;
    a key's numbers then go out in reading order, never twice, and parameters are named
    when made (``fc_0.w_0``), so the counters of other keys never move."""
    from fluidlite.core import names
    from fluidlite.layer_helper import LayerHelper
    with fluid.unique_name.guard():
        x = dygraph.to_variable(f32(2, 3))
        a = fluid.layers.relu(x)
        b = fluid.layers.relu(a)
        parts = fluid.layers.split(b, 3, dim=1)
        assert names.generator.ids == {}            # nothing drawn yet
        assert b.name == "relu_0.tmp_0" and a.name == "relu_1.tmp_0"
        assert [p.name for p in parts] == ["split_0.tmp_0", "split_0.tmp_1", "split_0.tmp_2"]
        fluid.layers.fc(a, 4)                       # its parameters: fc_0.w_0, fc_0.b_0
        assert names.generator.ids["fc"] == 1 and names.generator.ids["fc_0.w"] == 1
        helper = LayerHelper("fc")
        assert "name" not in vars(helper)
        assert helper.name == "fc_1" and helper.name == "fc_1"      # drawn once, kept
        assert fluid.layers.relu(x).name == "relu_2.tmp_0"
        with pytest.raises(AttributeError, match="no attribute 'nme'"):
            helper.nme
    with fluid.unique_name.guard():
        assert LayerHelper("fc", name="mine").name == "mine"


def test_simple_layers_in_dygraph_name_and_check_as_the_helper_does():
    """Activations and elementwise layers take dygraph's fast path (``layers/ops._eager``):
    their outputs are named ``<op>_N.tmp_M`` as through ``LayerHelper``, a given ``name`` or
    ``act`` still goes through the helper, and a wrong input is refused as before."""
    with fluid.unique_name.guard(), dygraph.guard():
        x = dygraph.to_variable(np.array([[-1.0, 0.5, 2.0]], "float32"))
        a = fluid.layers.sigmoid(x)
        b = fluid.layers.elementwise_add(a, x)
        c = fluid.layers.tanh(b)
        d = fluid.layers.elementwise_mul(c, x, act="relu")
        e = fluid.layers.relu(d, name="mine")
        assert [t.name for t in (a, b, c, d, e)] == [
            "sigmoid_0.tmp_0", "elementwise_add_0.tmp_0", "tanh_0.tmp_0",
            "elementwise_mul_0.tmp_0", "mine.tmp_0"]
        xv = x.numpy().astype(np.float64)
        want = np.maximum(np.tanh(1 / (1 + np.exp(-xv)) + xv) * xv, 0)
        np.testing.assert_allclose(e.numpy(), want, rtol=1e-6)
        with pytest.raises(TypeError, match="'x' in elementwise_add must be Variable"):
            fluid.layers.elementwise_add(xv, x)
        with pytest.raises(TypeError, match="sigmoid"):
            fluid.layers.sigmoid(dygraph.to_variable(np.array([1, 2], "bool")))


def test_single_output_layers_share_one_stem_per_op_type(monkeypatch):
    # one names.SoleStem per op type names every single-output layer call as a stem per
    # call would: <op>_N.tmp_0, N counting per op type in the order names are read
    from fluidlite.core import names
    monkeypatch.setattr(names, "_SOLE_STEMS", {})
    with fluid.unique_name.guard(), dygraph.guard():
        x = dygraph.to_variable(np.ones((2, 3), "float32"))
        a, b, c = fluid.layers.relu(x), fluid.layers.relu(x), fluid.layers.sigmoid(x)
        assert a._hint is b._hint is names.sole_stem("relu") and c._hint.key == "sigmoid"
        assert list(names._SOLE_STEMS) == ["relu", "sigmoid"]
        assert [b.name, c.name, a.name] == ["relu_0.tmp_0", "sigmoid_0.tmp_0", "relu_1.tmp_0"]
