"""Tensor layers (fluidlite/layers/tensor.py and nn.py additions) through real programs."""
import numpy as np
import pytest

import fluidlite as fluid

L = fluid.layers


def run(main, startup, feed, fetch, scope=None):
    exe = fluid.Executor(fluid.CPUPlace())
    scope = scope or fluid.Scope()
    exe.run(startup, scope=scope)
    return exe.run(main, feed=feed, fetch_list=fetch, scope=scope)


def test_creation_layers():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        a = L.fill_constant([2, 3], "int64", 7)
        z, o = L.zeros([2], "float32"), L.ones([1, 2], "float64")
        x = L.data("x", [3])
        zl, ol = L.zeros_like(x), L.ones_like(x)
        v = L.assign(np.array([[1, 2], [3, 4]], np.int32))
        f = L.assign([1.5, 2.5])
        c = L.assign(x)
        out = L.create_tensor("float32")
        s = L.sums([x, c, zl], out=out)
        g = L.create_global_var([2], 3.0, "float32", persistable=True, name="gvar")
        p = L.create_parameter([3, 2], "float32", name="pp",
                               default_initializer=fluid.initializer.Constant(0.5))
        assert a.stop_gradient and a.dtype == "int64" and a.shape == (2, 3)
        assert g.persistable and g.stop_gradient and p.name == "pp" and not p.stop_gradient
        assert [op.type for op in startup.global_block().ops] == ["fill_constant", "fill_constant"]
    xv = np.array([[1, 2, 3], [4, 5, 6]], np.float32)
    got = run(main, startup, {"x": xv}, [a, z, o, zl, ol, v, f, s, g, p])
    np.testing.assert_array_equal(got[0], np.full((2, 3), 7))
    assert got[0].dtype == np.int64 and got[1].dtype == np.float32 and got[2].dtype == np.float64
    np.testing.assert_array_equal(got[3], np.zeros_like(xv))
    np.testing.assert_array_equal(got[4], np.ones_like(xv))
    np.testing.assert_array_equal(got[5], [[1, 2], [3, 4]])
    assert got[5].dtype == np.int32 and got[6].dtype == np.float32
    np.testing.assert_allclose(got[7], 2 * xv)
    np.testing.assert_allclose(got[8], [3, 3])
    np.testing.assert_allclose(got[9], np.full((3, 2), 0.5))


def test_fill_constant_out_and_errors():
    with fluid.program_guard(fluid.Program()):
        out = L.create_tensor("float32")
        assert L.fill_constant([2], "float32", 1.0, out=out) is out
        with pytest.raises(TypeError, match="'shape' in fill_constant"):
            L.fill_constant(3, "float32", 1.0)
        with pytest.raises(TypeError, match="'value' in fill_constant"):
            L.fill_constant([3], "float32", "1")
        with pytest.raises(TypeError, match="'input' in assign"):
            L.assign("abc")
        with pytest.raises(TypeError, match="'input\\[1\\]' in sums"):
            L.sums([out, np.ones(2)])
        with pytest.raises(TypeError, match="'x' in reshape"):
            L.reshape(np.ones(2), [2])


def test_shape_layers_forward_and_backward():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.data("x", [2, 3], dtype="float64")       # [-1, 2, 3]
        x.stop_gradient = False
        r = L.reshape(x, [0, -1])                        # [-1, 6]
        t = L.transpose(x, [0, 2, 1])                    # [-1, 3, 2]
        u = L.unsqueeze(x, [1])                          # [-1, 1, 2, 3]
        sq = L.squeeze(u, [1])                           # [-1, 2, 3]
        fl = L.flatten(x, axis=2)                        # [-1*2, 3]
        c = L.concat([r, r], axis=1)                     # [-1, 12]
        parts = L.split(c, [5, -1], dim=1)               # [-1, 5], [-1, 7]
        st = L.stack([x, x], axis=1)                     # [-1, 2, 2, 3]
        sl = L.slice(x, axes=[1, 2], starts=[1, 0], ends=[2, 2])       # [-1, 1, 2]
        ss = L.strided_slice(x, axes=[2], starts=[2], ends=[-4], strides=[-2])  # [-1, 2, 2]
        ex = L.expand(x, [1, 2, 1])                      # [-1, 4, 3]
        ga = L.gather(L.reshape(x, [-1, 3]), L.assign(np.array([1, 0], np.int64)))
        sh = L.shape(x)
        shapes = [v.shape for v in (r, t, u, sq, fl, c, parts[0], parts[1], st, sl, ss, ex, ga)]
        assert shapes == [(-1, 6), (-1, 3, 2), (-1, 1, 2, 3), (-1, 2, 3), (-1, 3), (-1, 12),
                          (-1, 5), (-1, 7), (-1, 2, 2, 3), (-1, 1, 2), (-1, 2, 2), (-1, 4, 3),
                          (2, 3)]
        total = L.sums([L.reduce_sum(v) for v in (r, t, sq, fl, parts[1], st, sl, ss, ex, ga)])
        dx, = fluid.gradients(total, x)
    xv = np.arange(12.0).reshape(2, 2, 3)
    got = run(main, startup, {"x": xv}, [r, t, sq, fl, parts[1], st, sl, ss, ex, ga, sh, dx])
    np.testing.assert_array_equal(got[0], xv.reshape(2, 6))
    np.testing.assert_array_equal(got[1], xv.transpose(0, 2, 1))
    np.testing.assert_array_equal(got[2], xv)
    np.testing.assert_array_equal(got[3], xv.reshape(4, 3))
    np.testing.assert_array_equal(got[4], np.concatenate([xv.reshape(2, 6)] * 2, 1)[:, 5:])
    np.testing.assert_array_equal(got[5], np.stack([xv, xv], 1))
    np.testing.assert_array_equal(got[6], xv[:, 1:2, 0:2])
    np.testing.assert_array_equal(got[7], xv[:, :, 2::-2])
    np.testing.assert_array_equal(got[8], np.tile(xv, (1, 2, 1)))
    np.testing.assert_array_equal(got[9], xv.reshape(-1, 3)[[1, 0]])
    np.testing.assert_array_equal(got[10], [2, 2, 3])
    # r, t, sq, fl count each element once, st and ex twice: 8
    expect = np.full_like(xv, 8.0)
    expect.reshape(2, 6)[:, 5] += 1      # parts[1] = c[:, 5:12] = r[:, 5] and all of r
    expect.reshape(2, 6)[:, :] += 1
    expect[:, 1:2, 0:2] += 1
    expect[:, :, 2::-2] += 1
    expect.reshape(-1, 3)[[1, 0]] += 1
    np.testing.assert_allclose(got[11], expect)


def test_shape_layer_arg_errors():
    with fluid.program_guard(fluid.Program()):
        x = L.data("x", [2, 3])
        with pytest.raises(ValueError, match="transpose: perm"):
            L.transpose(x, [1, 0])
        with pytest.raises(TypeError, match="'perm' in transpose"):
            L.transpose(x, "012")
        with pytest.raises(ValueError, match="flatten.*range"):
            L.flatten(x, axis=4)
        with pytest.raises(ValueError, match="split: dim 3"):
            L.split(x, 2, dim=3)
        with pytest.raises(ValueError, match="split.*divided|split.*split into"):
            L.split(x, 4, dim=2)
        with pytest.raises(ValueError, match="stack: all inputs must have the same shape"):
            L.stack([x, L.data("y", [3, 2])])
        with pytest.raises(ValueError, match="squeeze2.*out of range"):
            L.squeeze(x, [5])
        with pytest.raises(ValueError, match="unsqueeze2.*out of range"):
            L.unsqueeze(x, [7])
        with pytest.raises(TypeError, match="'index' in gather"):
            L.gather(x, x)
        with pytest.raises(ValueError, match="expand: expand_times"):
            L.expand(x, [2, 2])


def test_dynamic_shape_arguments():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.data("x", [6], append_batch_size=False)
        n = L.fill_constant([1], "int32", 2)
        r = L.reshape(x, [n, -1])
        r2 = L.reshape(x, [1, 1], actual_shape=L.assign(np.array([3, 2], np.int32)))
        s = L.slice(x, axes=[0], starts=[n], ends=[5])
        e = L.expand(L.reshape(x, [1, 6]), L.assign(np.array([2, 1], np.int32)))
        f = L.fill_constant([n, 3], "float32", 1.5)
        assert f.shape == (-1, 3)
    xv = np.arange(6.0, dtype=np.float32)
    got = run(main, startup, {"x": xv}, [r, r2, s, e, f])
    np.testing.assert_array_equal(got[4], np.full((2, 3), 1.5, np.float32))
    np.testing.assert_array_equal(got[0], xv.reshape(2, 3))
    np.testing.assert_array_equal(got[1], xv.reshape(3, 2))
    np.testing.assert_array_equal(got[2], xv[2:5])
    np.testing.assert_array_equal(got[3], np.tile(xv, (2, 1)))


def test_matmul_mul_topk_onehot_layers():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.data("x", [3])
        w = L.create_parameter([3, 2], "float32", name="w",
                               default_initializer=fluid.initializer.Constant(1.0))
        m1, m2 = L.mul(x, w), L.matmul(x, w, alpha=2.0)
        vals, idx = L.topk(x, 2)
        lab = L.data("lab", [1], dtype="int64")
        oh = L.one_hot(lab, 4)
        am, an = L.argmax(x, axis=1), L.argmin(x, axis=-1)
        assert m2.shape == (-1, 2) and idx.stop_gradient and oh.shape == (-1, 4)
    xv = np.array([[1, 3, 2], [0, -1, 5]], np.float32)
    got = run(main, startup, {"x": xv, "lab": np.array([[2], [0]], np.int64)},
              [m1, m2, vals, idx, oh, am, an])
    np.testing.assert_allclose(got[0], xv @ np.ones((3, 2)))
    np.testing.assert_allclose(got[1], 2 * xv @ np.ones((3, 2)))
    np.testing.assert_allclose(got[2], [[3, 2], [5, 0]])
    np.testing.assert_array_equal(got[3], [[1, 2], [2, 0]])
    np.testing.assert_array_equal(got[4], [[0, 0, 1, 0], [1, 0, 0, 0]])
    np.testing.assert_array_equal(got[5], [1, 2])
    np.testing.assert_array_equal(got[6], [0, 1])
    assert got[0].dtype == np.float32 and got[5].dtype == np.int64


def test_concat_of_different_dtypes_is_refused_at_build():
    """fluid: all inputs of concat share one dtype; float32 + int64 used to build, declare
    float32 and return float64."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        a = fluid.data("a", [2, 3], "float32")
        b = fluid.data("b", [2, 3], "int64")
        with pytest.raises(ValueError, match="concat: all inputs must have the same dtype, "
                                             "but X\\[0\\] is float32 and X\\[1\\] is int64"):
            fluid.layers.concat([a, b])
    assert not main.global_block().ops


def test_concat_of_a_tensor_array_and_fluid18s_dtype_list():
    # fluid 1.8: a tensor array's entries are joined by tensor_array_to_tensor (the joined
    # dim unknown at build); the inputs' dtypes are float16/32/64, int32, int64 only
    x = np.arange(6, dtype="float32").reshape(2, 3)
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        arr = fluid.layers.create_array(dtype="float32")
        zero = fluid.layers.fill_constant(shape=[1], value=0, dtype="int64")
        for i in range(3):
            fluid.layers.array_write(fluid.layers.assign(x * (i + 1)), zero + i, arr)
        out = fluid.layers.concat(arr, axis=1)
        assert out.shape == (2, -1)
        for dt in ("uint8", "bool", "int8"):
            with pytest.raises(TypeError, match=r"input\[0\].*concat"):
                fluid.layers.concat([fluid.data(f"u_{dt}", [2], dt)] * 2)
    got, = fluid.Executor(fluid.CPUPlace()).run(main, fetch_list=[out])
    np.testing.assert_array_equal(got, np.concatenate([x, 2 * x, 3 * x], axis=1))


def test_dygraph_concat_takes_any_dtype_as_fluid18():
    with fluid.dygraph.guard():
        a = fluid.dygraph.to_variable(np.array([True, False]))
        assert fluid.layers.concat([a, a]).numpy().tolist() == [True, False, True, False]


def test_flatten_dtypes_as_fluid18():
    # Paddle's TestFlatten2OpError: a float16 input is a TypeError in a static program
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        with pytest.raises(TypeError, match=r"'x' in flatten"):
            fluid.layers.flatten(fluid.data("x2", [3, 2, 4, 5], "float16"), axis=1)
        assert fluid.layers.flatten(fluid.data("x3", [3, 2, 4], "int8"), axis=1).shape == (3, 8)


def test_static_layers_take_fluid18s_dtype_lists():
    # Paddle's op-test error cases: fluid 1.8's static layers refuse these dtypes with a
    # TypeError (dygraph keeps every dtype the ops run on)
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        b = fluid.layers.data(name="b", shape=[10, 5, 3], dtype="bool")
        with pytest.raises(TypeError, match="'x' in transpose"):
            fluid.layers.transpose(b, perm=[1, 0, 2])
        with pytest.raises(TypeError, match="'dtype' in zeros"):
            fluid.layers.zeros([4], "int8")
        with pytest.raises(TypeError, match="'x' in clip"):
            fluid.layers.clip(fluid.layers.data(name="i", shape=[1], dtype="int32"), -1.0, 1.0)
        f = fluid.layers.data(name="f", shape=[5, 2, 2], dtype="float32",
                              append_batch_size=False)
        p = fluid.layers.data(name="p", shape=[5, 2, 2], dtype="int64", append_batch_size=False)
        with pytest.raises(TypeError, match="'ids' in gather_tree"):
            fluid.layers.gather_tree(f, p)
    with fluid.dygraph.guard():
        v = fluid.dygraph.to_variable(np.array([[True, False]]))
        assert fluid.layers.transpose(v, [1, 0]).numpy().tolist() == [[True], [False]]
