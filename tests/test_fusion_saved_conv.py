"""conv2d keeps its Winograd input tiles for its gradient (``Conv2D.forward_saving``, the
``saved_grad`` fusion): training gives the unpaired ops' bits, the grad op reads the kept
tiles and computes only the gradients the program writes, and tiles that do not fit the
input are transformed again."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core import registry
from fluidlite.executor import fusion
from fluidlite.executor.fusion.patterns import saved_grad
from fluidlite.ops import _winograd as WG
from fluidlite.ops import conv

L = fluid.layers
ATTRS = dict(strides=[1, 1], paddings=[1, 1], padding_algorithm="EXPLICIT", groups=1,
             dilations=[1, 1], data_format="NCHW")


def build(dtype, data_format="NCHW", grad_input=True):
    """image -> conv 3x3 (16 -> 16, Winograd) -> relu -> conv 3x3 -> mean, SGD. Without
    ``grad_input`` the first convolution reads the feed (no Input@GRAD is written)."""
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 7
    shape = [-1, 16, 10, 10] if data_format == "NCHW" else [-1, 10, 10, 16]
    with fluid.unique_name.guard(), fluid.program_guard(main, startup):
        x = fluid.data("x", shape, dtype)
        h = x
        if grad_input:
            h = L.scale(L.create_parameter([1], dtype, default_initializer=fluid.initializer
                                           .Constant(1.0)) * x, 1.0)
        h = L.relu(L.conv2d(h, 16, 3, padding=1, bias_attr=False, data_format=data_format))
        h = L.conv2d(h, 16, 3, padding=1, bias_attr=False, data_format=data_format)
        loss = L.mean(L.square(h))
        fluid.optimizer.SGD(0.01).minimize(loss)
    return main, startup, loss


def train(dtype, data_format="NCHW", grad_input=True, steps=3):
    main, startup, loss = build(dtype, data_format, grad_input)
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    x = np.random.default_rng(0).standard_normal((4, 16, 10, 10))
    if data_format == "NHWC":
        x = x.transpose(0, 2, 3, 1)
    losses = [exe.run(main, feed={"x": x.astype(dtype)}, fetch_list=[loss], scope=scope)[0]
              for _ in range(steps)]
    block = main.global_block()
    types = [op.type for op in fusion.fuse(list(block.ops), block, [loss.name], ["x"])]
    return losses, [np.asarray(scope.find_var(p.name).get_tensor()).copy()
                    for p in main.all_parameters()], types


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("data_format", ["NCHW", "NHWC"])
@pytest.mark.parametrize("grad_input", [True, False])
def test_conv_layers_train_with_the_unpaired_bits(dtype, data_format, grad_input,
                                                  monkeypatch):
    got = train(dtype, data_format, grad_input)
    assert got[2].count("fused(conv2d+saved)") == 2
    assert got[2].count("fused(saved+conv2d_grad)") == 2
    monkeypatch.setattr(fusion, "PIPELINE",
                        tuple(p for p in fusion.PIPELINE if p is not saved_grad.SAVED_GRAD))
    want = train(dtype, data_format, grad_input)
    assert "fused(conv2d+saved)" not in want[2]
    for g, w in zip(got[0] + got[1], want[0] + want[1]):
        assert g.dtype == w.dtype and np.array_equal(g, w)


def _inputs(dtype, n=4, c=16, hw=10):
    rng = np.random.default_rng(2)
    return (rng.standard_normal((n, c, hw, hw)).astype(dtype),
            rng.standard_normal((c, c, 3, 3)).astype(dtype),
            rng.standard_normal((n, c, hw, hw)).astype(dtype))


def test_the_gradient_reads_the_kept_tiles(monkeypatch):
    d = registry.get_op_def("conv2d")
    x, w, dy = _inputs("float32")
    outs, tiles = d.forward_saving(x, w, **ATTRS)
    assert np.array_equal(outs["Output"], d.forward(x, w, **ATTRS)["Output"])
    assert isinstance(tiles, tuple) and tiles
    made = []
    real = WG._input_tiles
    monkeypatch.setattr(WG, "_input_tiles", lambda *a: made.append(1) or real(*a))
    got = d.backward_saved(tiles, x, w, dy, **ATTRS)
    assert not made                                  # the filter gradient used the tiles
    want = conv._conv2d_grads(x, w, dy, frozenset({"Input@GRAD", "Filter@GRAD"}), **ATTRS)
    assert made                                      # ... which unsaved, it makes again
    assert got.keys() == {"Input", "Filter"}
    for k in got:
        assert np.array_equal(got[k], want[k + "@GRAD"])


@pytest.mark.parametrize("wanted", [{"Input"}, {"Filter"}, None])
def test_only_the_wanted_gradients_are_made(wanted):
    d = registry.get_op_def("conv2d")
    x, w, dy = _inputs("float64")
    _, tiles = d.forward_saving(x, w, **ATTRS)
    got = d.backward_saved(tiles, x, w, dy, wanted=wanted, **ATTRS)
    assert set(got) == (wanted or {"Input", "Filter"})
    ref = conv._conv2d_grads(x, w, dy, frozenset({"Input@GRAD", "Filter@GRAD"}), **ATTRS)
    for k in got:
        assert np.array_equal(got[k], ref[k + "@GRAD"])


def test_tiles_that_do_not_fit_are_made_again():
    d = registry.get_op_def("conv2d")
    x, w, dy = _inputs("float32")
    _, tiles = d.forward_saving(x, w, **ATTRS)
    g = conv._conv_geom(x, w, [1, 1], [1, 1], [1, 1], "EXPLICIT", 1)
    assert WG.tiles_fit(tiles, x, g)
    other = x[:2]                                    # another batch: other blocks
    assert not WG.tiles_fit(tiles, other, g)
    assert not WG.tiles_fit(tiles[:-1], x, g)
    assert not WG.tiles_fit(tuple(t.astype(np.float64) for t in tiles), x, g)
    assert not WG.tiles_fit(tuple(t[:, :, 1:] for t in tiles), x, g)
    assert not WG.tiles_fit(list(tiles), x, g)
    want = conv._conv2d_grads(x, w, dy, frozenset({"Input@GRAD", "Filter@GRAD"}), **ATTRS)
    for bad in (tiles[:-1], tuple(t.astype(np.float64) for t in tiles), list(tiles)):
        got = d.backward_saved(bad, x, w, dy, **ATTRS)
        for k in got:
            assert np.array_equal(got[k], want[k + "@GRAD"])


def test_other_kernels_keep_nothing():
    d = registry.get_op_def("conv2d")
    x = np.random.default_rng(0).standard_normal((2, 3, 8, 8))     # 3 channels: im2col
    w = np.random.default_rng(1).standard_normal((4, 3, 3, 3))
    outs, saved = d.forward_saving(x, w, **ATTRS)
    assert saved is None
    assert np.array_equal(outs["Output"], d.forward(x, w, **ATTRS)["Output"])
    dy = np.random.default_rng(2).standard_normal(outs["Output"].shape)
    got = d.backward_saved(None, x, w, dy, **ATTRS)
    ref = conv._conv2d_grads(x, w, dy, frozenset({"Input@GRAD", "Filter@GRAD"}), **ATTRS)
    for k in got:
        assert np.array_equal(got[k], ref[k + "@GRAD"])
    assert not registry.get_op_def("depthwise_conv2d").saves_for_grad


@pytest.mark.parametrize("present", [{"Filter@GRAD"}, {"Input@GRAD"},
                                     {"Input@GRAD", "Filter@GRAD"}])
def test_the_paired_grad_op_is_told_which_gradients_to_make(present):
    from fluidlite.executor.fusion.kernels.saved_grad import SavedGrad
    gdef = registry.get_op_def("conv2d_grad")
    op = SavedGrad(gdef, dict(ATTRS))
    binding = op.bind([], {}, frozenset(present))
    x, w, dy = _inputs("float32")
    _, tiles = registry.get_op_def("conv2d").forward_saving(x, w, **ATTRS)
    got = binding.fn(tiles, x, w, dy)
    assert set(got) == present
    ref = conv._conv2d_grads(x, w, dy, frozenset(present), **ATTRS)
    assert set(ref) == present                   # the Winograd kernels make only those
    for k in present:
        assert np.array_equal(got[k], ref[k])


def test_a_batch_too_small_for_winograd_keeps_nothing():
    # one 10x10 image: 25 tiles, under the kernel's threshold (though 16 channels x 25 would
    # pass it)
    d = registry.get_op_def("conv2d")
    x, w, dy = _inputs("float32", n=1)
    assert conv._kind(1, 16, w.shape, conv._conv_geom(x, w, [1, 1], [1, 1], [1, 1],
                                                      "EXPLICIT", 1), x.dtype) == ""
    outs, saved = d.forward_saving(x, w, **ATTRS)
    assert saved is None
    np.testing.assert_array_equal(outs["Output"], d.forward(x, w, **ATTRS)["Output"])


def test_channels_last_gradients_of_a_pointwise_convolution():
    # 1x1 kernels (not Winograd) in NHWC: the gradients are NCHW's, transposed
    d = registry.get_op_def("conv2d")
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 16, 12, 12))
    w = rng.standard_normal((8, 16, 1, 1))
    dy = rng.standard_normal((2, 8, 12, 12))
    attrs = dict(ATTRS, paddings=[0, 0])
    want = d.backward_saved(None, x, w, dy, **attrs)
    got = d.backward_saved(None, x.transpose(0, 2, 3, 1), w, dy.transpose(0, 2, 3, 1),
                           **dict(attrs, data_format="NHWC"))
    np.testing.assert_allclose(got["Input"], want["Input"].transpose(0, 2, 3, 1), rtol=1e-12)
    np.testing.assert_allclose(got["Filter"], want["Filter"], rtol=1e-12)
