"""The dygraph PRelu, GroupNorm, InstanceNorm, BilinearTensorProduct, GRUUnit and SpectralNorm
run their dedicated op (prelu, group_norm, instance_norm, bilinear_tensor_product, gru_unit,
spectral_norm), so with the same parameter values they give the static layer's outputs and the
static ``append_backward`` gradients exactly; a traced layer records only that op (+ act)."""
from typing import Callable, Dict, List, Sequence, Tuple

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import dygraph

RNG = np.random.default_rng(20240518)


def _arr(*shape: int, lo: float = -1.0, hi: float = 1.0) -> np.ndarray:
    return RNG.uniform(lo, hi, shape).astype("float64")


def _attr(name: str) -> fluid.ParamAttr:
    # the static parameter gets a fixed name; its value is copied from the dygraph layer below
    return fluid.ParamAttr(name=name)


def _dygraph_run(make_layer: Callable, inputs: Sequence[np.ndarray], coef: np.ndarray,
                 pick: Callable = lambda out: out
                 ) -> Tuple[object, np.ndarray, Dict[str, np.ndarray], List[np.ndarray]]:
    """Run the layer, then ``loss = sum(pick(out) * coef)`` and backward: returns the layer,
    the output, the parameter gradients by attribute and the input gradients."""
    layer = make_layer()
    xs = []
    for a in inputs:
        t = dygraph.to_variable(a)
        t.stop_gradient = False
        xs.append(t)
    out = pick(layer(*xs))
    loss = fluid.layers.reduce_sum(fluid.layers.elementwise_mul(out, dygraph.to_variable(coef)))
    loss.backward()
    grads = {k: p.gradient() for k, p in layer._parameters.items()
             if p is not None and not p.stop_gradient}
    return layer, out.numpy(), grads, [x.gradient() for x in xs]


def _static_run(build: Callable, inputs: Sequence[np.ndarray], coef: np.ndarray,
                values: object, grad_names: Sequence[str]
                ) -> Tuple[np.ndarray, Dict[str, np.ndarray], List[np.ndarray], fluid.Program]:
    """Build ``out = build(*data)`` and ``loss = sum(out * coef)`` with ``append_backward``,
    set the parameters to ``values`` (static name -> array, or a function of the program
    returning that) and run once."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        xs = []
        for i, a in enumerate(inputs):
            v = fluid.data(f"x{i}", list(a.shape), "float64")
            v.stop_gradient = False
            xs.append(v)
        c = fluid.data("coef", list(coef.shape), "float64")
        out = build(*xs)
        loss = fluid.layers.reduce_sum(fluid.layers.elementwise_mul(out, c))
        fluid.backward.append_backward(loss)
    scope = fluid.Scope()
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    if callable(values):
        values = values(main)
    for name, value in values.items():
        scope.var(name).get_tensor().set(value)
    feed = {f"x{i}": a for i, a in enumerate(inputs)}
    feed["coef"] = coef
    fetch = [out.name] + [n + "@GRAD" for n in grad_names] + \
        [f"x{i}@GRAD" for i in range(len(inputs))]
    res = exe.run(main, feed=feed, fetch_list=fetch, scope=scope)
    k = len(grad_names)
    return res[0], dict(zip(grad_names, res[1:1 + k])), res[1 + k:], main


def _check(make_layer: Callable, build: Callable, inputs: Sequence[np.ndarray],
           params: Dict[str, str], pick: Callable = lambda out: out) -> object:
    """params: dygraph attribute -> static parameter name. Outputs, parameter gradients and
    input gradients of the two modes must agree to float64 rounding."""
    with dygraph.guard():
        probe = pick(make_layer()(*[dygraph.to_variable(a) for a in inputs]))
        coef = _arr(*probe.shape)
        layer, d_out, d_grads, d_xgrads = _dygraph_run(make_layer, inputs, coef, pick)
        values = {params[k]: getattr(layer, k).numpy() for k in params}
    s_out, s_grads, s_xgrads, _ = _static_run(build, inputs, coef, values,
                                              [params[k] for k in d_grads])
    np.testing.assert_allclose(d_out, s_out, rtol=1e-13, atol=1e-14)
    assert set(d_grads) == set(params)
    for k, g in d_grads.items():
        assert g is not None and np.abs(g).sum() > 0, k
        np.testing.assert_allclose(g, s_grads[params[k]], rtol=1e-12, atol=1e-13, err_msg=k)
    for dg, sg in zip(d_xgrads, s_xgrads):
        np.testing.assert_allclose(dg, sg, rtol=1e-12, atol=1e-13)
    return layer


def _traced_ops(make_layer: Callable, inputs: Sequence[np.ndarray]) -> List[str]:
    with dygraph.guard():
        layer = make_layer()
        xs = [dygraph.to_variable(a.astype("float32")) for a in inputs]
        outs, traced = dygraph.TracedLayer.trace(layer, xs)
        types = [op.type for op in traced.program.global_block().ops]
        first = outs[0] if isinstance(outs, (tuple, list)) else outs
        np.testing.assert_allclose(traced(xs)[0], first.numpy(), rtol=1e-6, atol=1e-7)
    return types


# -- PRelu ------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode,shape", [("all", [1]), ("channel", [1, 3, 1, 1]),
                                        ("element", [1, 3, 2, 4])])
def test_prelu_matches_static(mode, shape):
    x = _arr(2, 3, 2, 4)
    x[0, 0, 0, :2] = 0.0                      # the kink: both modes take the x <= 0 branch

    def make():
        layer = dygraph.PRelu(mode, channel=3, input_shape=[2, 3, 2, 4], dtype="float64")
        layer.weight.set_value(_arr(*shape, lo=0.1, hi=0.5))
        return layer

    with dygraph.guard():
        probe = make()
        assert probe.weight.shape == shape and probe.weight.name.startswith("prelu_")
    _check(make, lambda xv: fluid.layers.prelu(xv, mode, param_attr=_attr("alpha")), [x],
           {"weight": "alpha"})


def test_prelu_fluid18_defaults_and_trace():
    with dygraph.guard():
        # fluid 1.8's positional order: mode, input_shape (dim 1 = the channels)
        layer = dygraph.PRelu("channel", [2, 5, 3, 3])
        assert layer.weight.shape == [1, 5, 1, 1]
        np.testing.assert_array_equal(layer.weight.numpy(), np.ones([1, 5, 1, 1], "float32"))
        assert dygraph.PRelu("channel", channel=4).weight.shape == [1, 4, 1, 1]   # later keyword
        with pytest.raises(ValueError, match="needs input_shape="):
            dygraph.PRelu("channel")
        with pytest.raises(ValueError, match="needs input_shape="):
            dygraph.PRelu("element")
        with pytest.raises(ValueError, match="mode must be"):
            dygraph.PRelu("row")
    assert _traced_ops(lambda: dygraph.PRelu("element", input_shape=[1, 2, 3]),
                       [_arr(4, 2, 3)]) == ["prelu"]


# -- GroupNorm --------------------------------------------------------------------------------
@pytest.mark.parametrize("act", [None, "relu"])
def test_group_norm_matches_static(act):
    x = _arr(2, 6, 3, 2) * 3

    def make():
        layer = dygraph.GroupNorm(6, 3, epsilon=1e-4, act=act, dtype="float64")
        layer.weight.set_value(_arr(6, lo=0.5, hi=1.5))
        layer.bias.set_value(_arr(6))
        return layer

    with dygraph.guard():
        probe = make()
        assert probe.weight.name.startswith("group_norm_") and probe.weight.shape == [6]
    _check(make, lambda xv: fluid.layers.group_norm(xv, 3, epsilon=1e-4, act=act,
                                                    param_attr=_attr("gn_s"),
                                                    bias_attr=_attr("gn_b")),
           [x], {"weight": "gn_s", "bias": "gn_b"})


def test_group_norm_without_bias_and_trace():
    x = _arr(2, 4, 3)

    def make():
        layer = dygraph.GroupNorm(4, 2, bias_attr=False, dtype="float64")
        layer.weight.set_value(_arr(4, lo=0.5, hi=1.5))
        return layer

    layer = _check(make, lambda xv: fluid.layers.group_norm(xv, 2, param_attr=_attr("s"),
                                                            bias_attr=False),
                   [x], {"weight": "s"})
    assert layer.bias is None
    assert _traced_ops(lambda: dygraph.GroupNorm(4, 2), [_arr(2, 4, 3, 3)]) == ["group_norm"]
    assert _traced_ops(lambda: dygraph.GroupNorm(4, 2, act="sigmoid"),
                       [_arr(2, 4, 3, 3)]) == ["group_norm", "sigmoid"]
    with dygraph.guard():
        with pytest.raises(ValueError, match="divisible by groups"):
            dygraph.GroupNorm(6, 4)
        with pytest.raises(ValueError, match="NCHW only"):
            dygraph.GroupNorm(4, 2, data_layout="NHWC")


# -- InstanceNorm -----------------------------------------------------------------------------
def test_instance_norm_matches_static():
    x = _arr(3, 4, 2, 3) * 2

    def make():
        layer = dygraph.InstanceNorm(4, epsilon=1e-5, dtype="float64")
        layer.scale.set_value(_arr(4, lo=0.5, hi=1.5))
        layer.bias.set_value(_arr(4))
        return layer

    layer = _check(make, lambda xv: fluid.layers.instance_norm(
        xv, epsilon=1e-5, param_attr=_attr("in_s"), bias_attr=_attr("in_b")),
        [x], {"scale": "in_s", "bias": "in_b"})
    # fluid 1.8's attribute names; ``weight`` is the same parameter, not a second one
    assert layer.weight is layer.scale and layer.scale.name.startswith("instance_norm_")
    assert [k for k, _ in layer.named_parameters()] == ["scale", "bias"]
    assert list(layer.state_dict()) == ["scale", "bias"]


def test_instance_norm_without_affine_and_trace():
    x = _arr(2, 3, 5)
    with dygraph.guard():
        layer = dygraph.InstanceNorm(3, param_attr=False, bias_attr=False, dtype="float64")
        assert layer.scale is None and layer.bias is None and layer.parameters() == []
        out = layer(dygraph.to_variable(x)).numpy()
    ref = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(out, ref, rtol=1e-12, atol=1e-12)
    assert _traced_ops(lambda: dygraph.InstanceNorm(3), [_arr(2, 3, 4, 4)]) == ["instance_norm"]


# -- BilinearTensorProduct --------------------------------------------------------------------
@pytest.mark.parametrize("act", [None, "tanh"])
def test_bilinear_tensor_product_matches_static(act):
    x, y = _arr(5, 3), _arr(5, 4)

    def make():
        layer = dygraph.BilinearTensorProduct(3, 4, 6, act=act, dtype="float64")
        layer.bias.set_value(_arr(1, 6))
        return layer

    with dygraph.guard():
        probe = make()
        assert probe.weight.shape == [6, 3, 4] and probe.bias.shape == [1, 6]
        assert probe.weight.name.startswith("bilinear_tensor_product_")
    _check(make, lambda xv, yv: fluid.layers.bilinear_tensor_product(
        xv, yv, 6, act=act, param_attr=_attr("btp_w"), bias_attr=_attr("btp_b")),
        [x, y], {"weight": "btp_w", "bias": "btp_b"})


def test_bilinear_tensor_product_without_bias_and_trace():
    x, y = _arr(4, 2), _arr(4, 3)
    layer = _check(lambda: dygraph.BilinearTensorProduct(2, 3, 5, bias_attr=False,
                                                         dtype="float64"),
                   lambda xv, yv: fluid.layers.bilinear_tensor_product(
                       xv, yv, 5, param_attr=_attr("w"), bias_attr=False),
                   [x, y], {"weight": "w"})
    assert layer.bias is None
    assert _traced_ops(lambda: dygraph.BilinearTensorProduct(2, 3, 5), [x, y]) == \
        ["bilinear_tensor_product"]
    assert _traced_ops(lambda: dygraph.BilinearTensorProduct(2, 3, 5, act="relu"), [x, y]) == \
        ["bilinear_tensor_product", "relu"]


# -- GRUUnit ----------------------------------------------------------------------------------
@pytest.mark.parametrize("origin_mode,act,gate_act", [(False, "tanh", "sigmoid"),
                                                      (True, "tanh", "sigmoid"),
                                                      (False, "relu", "sigmoid"),
                                                      (True, "identity", "tanh")])
def test_gru_unit_matches_static(origin_mode, act, gate_act):
    d = 3
    x, h = _arr(4, 3 * d), _arr(4, d)

    def make():
        layer = dygraph.GRUUnit(3 * d, activation=act, gate_activation=gate_act,
                                origin_mode=origin_mode, dtype="float64")
        layer.bias.set_value(_arr(1, 3 * d))
        return layer

    with dygraph.guard():
        probe = make()
        assert probe.weight.shape == [d, 3 * d] and probe.bias.shape == [1, 3 * d]
        assert probe.weight.name.startswith("gru_unit_")
    for i in range(3):     # updated_hidden, reset_hidden_pre and gate all equal the static ones
        def static(xv, hv, i=i):
            return fluid.layers.gru_unit(xv, hv, 3 * d, param_attr=_attr("gw"),
                                         bias_attr=_attr("gb"), activation=act,
                                         gate_activation=gate_act,
                                         origin_mode=origin_mode)[i]
        if i == 0:
            _check(make, static, [x, h], {"weight": "gw", "bias": "gb"},
                   pick=lambda outs: outs[0])
        else:
            with dygraph.guard():
                layer = make()
                outs = layer(dygraph.to_variable(x), dygraph.to_variable(h))
                values = {"gw": layer.weight.numpy(), "gb": layer.bias.numpy()}
            coef = np.ones(outs[i].shape)
            s_out = _static_run(static, [x, h], coef, values, [])[0]
            np.testing.assert_allclose(outs[i].numpy(), s_out, rtol=1e-13, atol=1e-14)


def test_gru_unit_weight_layout_is_the_ops():
    """W's first 2*D*D elements are W_ur [D, 2D] and the last D*D are W_c [D, D] (not column
    blocks of W): the layout of the static gru_unit, so a ported model gives the same numbers."""
    d = 2
    x, h = _arr(3, 3 * d), _arr(3, d)
    with dygraph.guard():
        layer = dygraph.GRUUnit(3 * d, bias_attr=False, dtype="float64")
        assert layer.bias is None
        w = _arr(d, 3 * d)
        layer.weight.set_value(w)
        new_h, r_h, gate = layer(dygraph.to_variable(x), dygraph.to_variable(h))
    flat = w.reshape(-1)
    w_ur, w_c = flat[:2 * d * d].reshape(d, 2 * d), flat[2 * d * d:].reshape(d, d)
    ur = 1 / (1 + np.exp(-(x[:, :2 * d] + h @ w_ur)))
    u, r = ur[:, :d], ur[:, d:]
    c = np.tanh(x[:, 2 * d:] + (r * h) @ w_c)
    np.testing.assert_allclose(new_h.numpy(), (1 - u) * h + u * c, rtol=1e-12)
    np.testing.assert_allclose(r_h.numpy(), r * h, rtol=1e-12)
    np.testing.assert_allclose(gate.numpy(), np.concatenate([u, r, c], 1), rtol=1e-12)
    assert _traced_ops(lambda: dygraph.GRUUnit(3 * d), [x, h]) == ["gru_unit"]
    with dygraph.guard():
        with pytest.raises(ValueError, match="activation must be one of"):
            dygraph.GRUUnit(6, activation="softmax")
        with pytest.raises(ValueError, match="3 \\* hidden size"):
            dygraph.GRUUnit(7)


# -- SpectralNorm -----------------------------------------------------------------------------
@pytest.mark.parametrize("shape,dim,iters", [([4, 3, 2], 1, 2), ([5, 3], 0, 1),
                                             ([2, 3, 2, 2], 3, 0)])
def test_spectral_norm_matches_static(shape, dim, iters):
    w = _arr(*shape)
    h = shape[dim]
    rest = int(np.prod(shape)) // h

    def make():
        return dygraph.SpectralNorm(shape, dim=dim, power_iters=iters, eps=1e-12,
                                    dtype="float64")

    with dygraph.guard():
        layer = make()
        u0, v0 = layer.weight_u.numpy().copy(), layer.weight_v.numpy().copy()
        assert layer.weight_u.shape == [h] and layer.weight_v.shape == [rest]
        assert layer.weight_u.stop_gradient and layer.weight_v.stop_gradient
        assert not layer.weight_u.trainable and not layer.weight_v.trainable
        wt = dygraph.to_variable(w)
        wt.stop_gradient = False
        first = layer(wt).numpy()
        coef = _arr(*shape)
        loss = fluid.layers.reduce_sum(fluid.layers.elementwise_mul(layer(wt),
                                                                    dygraph.to_variable(coef)))
        loss.backward()
        # U and V are read, not written (fluid's kernel, the static layer): calls repeat
        np.testing.assert_array_equal(layer.weight_u.numpy(), u0)
        np.testing.assert_array_equal(layer(dygraph.to_variable(w)).numpy(), first)
        assert layer.weight_u.gradient() is None
        d_grad = wt.gradient()

    def static(wv):
        return fluid.layers.spectral_norm(wv, dim=dim, power_iters=iters, eps=1e-12)

    def copy_uv(prog):
        # the static layer creates U then V itself; give them the dygraph layer's values
        params = prog.global_block().all_parameters()
        assert [list(p.shape) for p in params] == [[h], [rest]]
        return {params[0].name: u0, params[1].name: v0}

    s_out, _, s_xgrads, _ = _static_run(static, [w], coef, copy_uv, [])
    np.testing.assert_allclose(first, s_out, rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(d_grad, s_xgrads[0], rtol=1e-12, atol=1e-13)


def test_spectral_norm_converges_and_traces():
    # singular values 3, 1, 0.5, 0.2: 50 power iterations converge whatever the random start
    # (a matrix drawn from the shared RNG could have sigma2 / sigma1 near 1, and then 50
    # iterations miss rtol 1e-8 -- the test's outcome depended on the tests run before it)
    q1, _ = np.linalg.qr(np.random.default_rng(360).standard_normal((6, 4)))
    q2, _ = np.linalg.qr(np.random.default_rng(361).standard_normal((4, 4)))
    w = q1 @ np.diag([3.0, 1.0, 0.5, 0.2]) @ q2.T
    with dygraph.guard():
        layer = dygraph.SpectralNorm([6, 4], power_iters=50, dtype="float64")
        out = layer(dygraph.to_variable(w)).numpy()
    np.testing.assert_allclose(out, w / np.linalg.svd(w, compute_uv=False)[0], rtol=1e-8)
    assert _traced_ops(lambda: dygraph.SpectralNorm([6, 4]), [w]) == ["spectral_norm"]
    with dygraph.guard():
        with pytest.raises(ValueError, match="dim must be in"):
            dygraph.SpectralNorm([6, 4], dim=2)
