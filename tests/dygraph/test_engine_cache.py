"""backward()'s per-(op entry, stop flags) generated steps (autograd._engine_plain) against the
general engine (``fluid.dygraph.grad``, which never uses them): the same gradients, bit for
bit, also when the graph's shape, dtypes or stop_gradient flags change between steps (the
cached steps must not be reused for a different node signature)."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import dygraph
from fluidlite.dygraph import autograd

L = fluid.layers


def _var(a, trainable=True):
    v = dygraph.to_variable(a)
    v.stop_gradient = not trainable
    return v


def _both(build, inputs):
    """Gradients of build(*inputs) w.r.t. the trainable inputs: by backward() (the generated
    steps) and by grad() (the general engine), on two separately built graphs."""
    trainable = [x for x in inputs if not x.stop_gradient]
    ref = dygraph.grad(build(*inputs), trainable, allow_unused=True)
    for x in trainable:
        x.clear_gradient()
    build(*inputs).backward()
    got = [x.gradient() for x in trainable]
    return got, [None if r is None else r.numpy() for r in ref]


def _assert_same(got, ref):
    assert len(got) == len(ref)
    for g, r in zip(got, ref):
        assert (g is None) == (r is None)
        if g is not None:
            assert g.dtype == r.dtype and g.shape == r.shape
            np.testing.assert_array_equal(g, r)


def test_mlp_steps_match_general_engine_across_shapes_and_stop_flags():
    rng = np.random.default_rng(1)
    with dygraph.guard():
        w1 = _var(rng.standard_normal((5, 4)))
        b1 = _var(rng.standard_normal(4))
        w2 = _var(rng.standard_normal((4, 3)))

        def f(x, w1, b1, w2, lab):
            h = L.relu(L.elementwise_add(L.matmul(x, w1), b1))
            return L.mean(L.softmax_with_cross_entropy(L.matmul(h, w2), lab))

        for batch, x_trainable, b_trainable in [(6, False, True), (6, True, True),
                                                (3, True, False), (6, False, True)]:
            x = _var(rng.standard_normal((batch, 5)), x_trainable)
            lab = _var(rng.integers(0, 3, (batch, 1)).astype("int64"), False)
            b1.stop_gradient = not b_trainable
            got, ref = _both(f, [x, w1, b1, w2, lab])
            _assert_same(got, ref)
            assert len(got) == 2 + x_trainable + b_trainable


def test_dtype_change_reuses_no_step():
    rng = np.random.default_rng(2)
    with dygraph.guard():
        for dt in ("float64", "float32", "float64"):
            a = _var(rng.standard_normal((3, 4)).astype(dt))
            b = _var(rng.standard_normal((3, 4)).astype(dt))
            got, ref = _both(lambda a, b: L.reduce_sum(L.tanh(a * b) + a), [a, b])
            _assert_same(got, ref)
            assert got[0].dtype == np.dtype(dt)


def test_list_inputs_multi_outputs_and_unreached_outputs():
    rng = np.random.default_rng(3)
    with dygraph.guard():
        a = _var(rng.standard_normal((3, 4)))
        b = _var(rng.standard_normal((3, 4)))
        c = _var(rng.standard_normal((3, 4)), trainable=False)

        def f(a, b, c):
            cat = L.concat([a, b, c, a], axis=1)
            s1, s2, _, _ = L.split(cat, 4, dim=1)      # two outputs never reached
            return L.reduce_sum(L.sums([s1 * s1, a, L.sigmoid(s2)]))

        got, ref = _both(f, [a, b, c])
        _assert_same(got, ref)
        # the gradient of a: through the concat twice, the split and the sum
        cat = np.concatenate([a.numpy(), b.numpy()], axis=1)
        np.testing.assert_allclose(got[0], 2 * a.numpy() + 1, rtol=1e-12)
        sig = 1 / (1 + np.exp(-cat[:, 4:]))
        np.testing.assert_allclose(got[1], sig * (1 - sig), rtol=1e-12)


def test_same_tensor_twice_and_shared_parameter_accumulate_in_order():
    rng = np.random.default_rng(4)
    with dygraph.guard():
        lin = dygraph.Linear(4, 4)
        x = _var(rng.standard_normal((2, 4)).astype("float32"))

        def f(x, w, b):
            h = lin(x)
            return L.reduce_sum(lin(h * h) * h)

        got, ref = _both(f, [x, lin.weight, lin.bias])
        _assert_same(got, ref)
        # accumulation across backward calls: twice the gradient of one call
        f(x, lin.weight, lin.bias).backward()
        np.testing.assert_allclose(lin.weight.gradient(), 2 * got[1], rtol=1e-12)


def test_intermediate_gradient_kept_and_retain_graph():
    with dygraph.guard():
        x = _var(np.arange(6.0).reshape(2, 3))
        h = L.scale(x, 3.0)
        y = L.reduce_sum(h * h)
        y.backward(retain_graph=True)
        np.testing.assert_array_equal(h.gradient(), 2 * h.numpy())
        y.backward()
        np.testing.assert_array_equal(x.gradient(), 2 * 18 * x.numpy())
        with pytest.raises(RuntimeError, match="retain_graph=True"):
            y.backward()


def test_inplace_version_check_still_raises():
    with dygraph.guard():
        lin = dygraph.Linear(3, 2)
        loss = L.reduce_sum(lin(_var(np.ones((2, 3), "float32"), trainable=False)))
        lin.weight.set_value(np.zeros((3, 2), "float32"))
        lin.weight._version += 1        # what an optimizer update does
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            loss.backward()


def test_steps_are_keyed_by_stop_flags():
    """A step built when one input needed no gradient is not reused when it does."""
    with dygraph.guard():
        a = _var(np.full((2, 2), 2.0), trainable=False)
        b = _var(np.full((2, 2), 5.0))
        L.reduce_sum(a * b).backward()
        assert a.gradient() is None
        np.testing.assert_array_equal(b.gradient(), a.numpy())
        a.stop_gradient = False
        L.reduce_sum(a * b).backward()
        np.testing.assert_array_equal(a.gradient(), b.numpy())
        keys = [k for k in autograd._STEPS if isinstance(k[1], tuple) and len(k[1]) == 2]
        assert any(k[1] == (True, False) for k in keys)
        assert any(k[1] == (False, False) for k in keys)


def test_one_kernel_grad_maker_with_data_dependent_shapes():
    """masked_select's grad maker is one kernel call bound for the first step's output shape;
    later steps select other counts (same node signature) and must take the general path."""
    rng = np.random.default_rng(5)
    with dygraph.guard():
        for _ in range(4):
            a = _var(rng.standard_normal((4, 6)))
            mask_np = rng.random((4, 6)) > 0.5
            mask = _var(mask_np, trainable=False)
            got, ref = _both(lambda a, m: L.reduce_sum(L.masked_select(a, m) ** 2), [a, mask])
            _assert_same(got, ref)
            np.testing.assert_array_equal(got[0], np.where(mask_np, 2 * a.numpy(), 0.0))


def test_one_kernel_grad_maker_with_other_gradient_dtype():
    """A float64 grad_tensor for a float32 softmax_with_cross_entropy: the step bound for
    float32 gradients is not used (the general path binds the kernel for float64)."""
    rng = np.random.default_rng(6)
    with dygraph.guard():
        logits = rng.standard_normal((4, 3)).astype("float32")
        lab = np.array([[0], [2], [1], [2]], "int64")
        for dt in ("float32", "float64", "float32"):
            x = _var(logits)
            loss = L.softmax_with_cross_entropy(x, _var(lab, trainable=False))
            gt = rng.random((4, 1)).astype(dt)
            (ref,) = dygraph.grad(loss, [x], grad_outputs=[gt])
            loss = L.softmax_with_cross_entropy(x, _var(lab, trainable=False))
            loss.backward(grad_tensor=gt)
            # (backward() stores a leaf's gradient in the leaf's dtype; grad() returns it as
            # computed)
            assert x.gradient().dtype == np.float32
            np.testing.assert_array_equal(x.gradient(), ref.numpy().astype(np.float32))
            p = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
            np.testing.assert_allclose(x.gradient(), (p - np.eye(3)[lab[:, 0]]) * gt,
                                       rtol=1e-5)
