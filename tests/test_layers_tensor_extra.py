"""fluid 1.8's remaining tensor layers (fluidlite/layers/tensor_extra.py, creation_extra.py)
through real programs, against NumPy; fluid's documented examples; argument errors."""
import numpy as np
import pytest

import fluidlite as fluid

L = fluid.layers


def run(fetch, feed=None, main=None, startup=None):
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup or fluid.default_startup_program(), scope=scope)
    return exe.run(main or fluid.default_main_program(), feed=feed or {}, fetch_list=fetch,
                   scope=scope)


def data(name, arr):
    return fluid.data(name, list(arr.shape), str(arr.dtype))


X = np.arange(24, dtype=np.float32).reshape(2, 3, 4)


# -- padding / cropping -------------------------------------------------------------------------
def test_pad_layers():
    x = data("x", X)
    img = np.arange(2 * 3 * 3 * 4, dtype=np.float32).reshape(2, 3, 3, 4)
    xi = data("img", img)
    y = fluid.data("y", [1, 3, 1, 4], "float32")
    pads = fluid.data("pads", [4], "int32")
    outs = run([L.pad(x, [0, 1, 1, 0, 2, 2], pad_value=-1.0),
                L.pad2d(xi, [1, 0, 2, 1], mode="reflect"),
                L.pad2d(xi, [1, 1, 0, 2], mode="edge", data_format="NHWC"),
                L.pad2d(xi, pads, pad_value=9.0),
                L.pad_constant_like(xi, y, pad_value=0.5)],
               {"x": X, "img": img, "y": np.ones((1, 3, 1, 4), np.float32),
                "pads": np.array([0, 2, 1, 0], np.int32)})
    np.testing.assert_array_equal(outs[0], np.pad(X, [(0, 1), (1, 0), (2, 2)],
                                                  constant_values=-1))
    np.testing.assert_array_equal(outs[1], np.pad(img, [(0, 0), (0, 0), (1, 0), (2, 1)],
                                                  mode="reflect"))
    np.testing.assert_array_equal(outs[2], np.pad(img, [(0, 0), (1, 1), (0, 2), (0, 0)],
                                                  mode="edge"))
    np.testing.assert_array_equal(outs[3], np.pad(img, [(0, 0), (0, 0), (0, 2), (1, 0)],
                                                  constant_values=9))
    np.testing.assert_array_equal(outs[4], np.pad(np.ones((1, 3, 1, 4)),
                                                  [(0, 1), (0, 0), (0, 2), (0, 0)],
                                                  constant_values=0.5))


def test_pad_errors():
    x = fluid.data("x", [2, 3], "float32")
    with pytest.raises(ValueError, match=r"pad: paddings must have 2 \* rank\(x\) = 4 entries"):
        L.pad(x, [1, 1])
    with pytest.raises(TypeError, match="'x' in pad must be Variable"):
        L.pad(np.ones((2, 3)), [0, 0, 0, 0])
    img = fluid.data("img", [1, 1, 2, 3], "float32")
    with pytest.raises(ValueError, match="pad2d: mode must be 'constant', 'reflect' or 'edge', "
                                         "but received 'wrap'"):
        L.pad2d(img, [1, 1, 1, 1], mode="wrap")
    with pytest.raises(ValueError, match=r"'reflect' padding \[2, 0\] of the height must be "
                                         r"smaller than the input height 2"):
        L.pad2d(img, [2, 0, 1, 1], mode="reflect")
    with pytest.raises(ValueError, match=r"Y.shape\[1\] = 5 must not exceed X.shape\[1\] = 3"):
        L.pad_constant_like(x, fluid.data("y", [2, 5], "float32"))


def test_crop_layers_docs_examples():
    x = fluid.data("x", [None, 3, 5], "float32")
    crop_shape = fluid.data("crop_shape", [3], "int32")
    crop0 = L.crop_tensor(x, shape=crop_shape)
    crop1 = L.crop_tensor(x, shape=[-1, -1, 3], offsets=[0, 1, 0])
    dim1 = fluid.data("dim1", [1], "int32")
    crop2 = L.crop_tensor(x, shape=[2, dim1, 4])
    crop_offsets = fluid.data("crop_offsets", [3], "int32")
    crop3 = L.crop_tensor(x, shape=[-1, 2, 3], offsets=crop_offsets)
    off = fluid.data("off", [1], "int32")
    crop4 = L.crop_tensor(x, shape=[-1, 2, 3], offsets=[0, 1, off])
    assert crop0.shape == (-1, -1, -1) and crop1.shape == (-1, 2, 3)
    assert crop2.shape == (2, -1, 4) and crop3.shape == (-1, 2, 3) and crop4.shape == (-1, 2, 3)
    y = fluid.data("y", [-1, 2, 2], "float32")
    crop5 = L.crop(x, shape=y, offsets=[0, 1, 2])
    crop6 = L.crop(x, shape=[-1, 2, 3])
    assert crop5.shape == (-1, 2, 2) and crop6.shape == (-1, 2, 3)
    xv = np.arange(30, dtype=np.float32).reshape(2, 3, 5)
    got = run([crop0, crop1, crop2, crop3, crop4, crop5, crop6],
              {"x": xv, "crop_shape": np.array([1, 2, 3], np.int32),
               "dim1": np.array([3], np.int32), "crop_offsets": np.array([1, 0, 2], np.int32),
               "off": np.array([2], np.int32), "y": np.zeros((2, 2, 2), np.float32)})
    for g, ref in zip(got, [xv[:1, :2, :3], xv[:, 1:, :3], xv[:, :3, :4], xv[1:, :2, 2:5],
                            xv[:, 1:3, 2:5], xv[:, 1:3, 2:4], xv[:, :2, :3]]):
        np.testing.assert_array_equal(g, ref)


def test_crop_errors():
    x = fluid.data("x", [3, 5], "float32")
    with pytest.raises(ValueError, match="crop: shape should be a list, tuple or Variable"):
        L.crop(x, shape=3)
    with pytest.raises(TypeError, match="'shape' in crop_tensor must be list or tuple or "
                                        "Variable"):
        L.crop_tensor(x, shape="2,2")
    with pytest.raises(ValueError, match=r"every entry of shape must be positive or -1, but "
                                         r"shape\[1\] = 0"):
        L.crop_tensor(x, shape=[2, 0])
    with pytest.raises(ValueError, match=r"every entry of offsets must be >= 0, but "
                                         r"offsets\[0\] = -1"):
        L.crop_tensor(x, shape=[2, 2], offsets=[-1, 0])
    with pytest.raises(ValueError, match="crop window of dim 1"):
        L.crop_tensor(x, shape=[2, 4], offsets=[0, 2])


def test_crop_tensor_trains():
    """The gradient reaches a parameter through crop_tensor (zeros outside the window)."""
    x = fluid.data("x", [2, 4], "float32")
    w = L.create_parameter([2, 4], "float32", name="w",
                           default_initializer=fluid.initializer.Constant(1.0))
    loss = L.reduce_sum(L.crop_tensor(L.elementwise_mul(x, w), shape=[2, 2], offsets=[0, 1]))
    grads = fluid.backward.gradients([loss], [w])
    g, = run(grads, {"x": np.arange(8, dtype=np.float32).reshape(2, 4)})
    np.testing.assert_array_equal(g, [[0, 1, 2, 0], [0, 5, 6, 0]])


# -- unstack / flip / reverse / roll / expand_as ----------------------------------------------
def test_unstack_flip_reverse_roll_expand_as():
    x = data("x", X)
    parts = L.unstack(x, axis=1)
    assert len(parts) == 3 and parts[0].shape == (2, 4)
    t = fluid.data("t", [2, 6, 8], "float32")
    got = run(parts + [L.flip(x, [0, -1]), L.reverse(x, 1), L.reverse(x, [0, 2]),
                       L.roll(x, 1), L.roll(x, [1, -2], [1, 2]), L.roll(x, shifts=2, dims=0),
                       L.expand_as(x, t)], {"x": X, "t": np.zeros((2, 6, 8), np.float32)})
    for i in range(3):
        np.testing.assert_array_equal(got[i], X[:, i])
    refs = [X[::-1, :, ::-1], X[:, ::-1], X[::-1, :, ::-1],
            np.roll(X.reshape(-1), 1).reshape(X.shape), np.roll(X, (1, -2), (1, 2)),
            np.roll(X, 2, 0), np.tile(X, (1, 2, 2))]
    for g, ref in zip(got[3:], refs):
        np.testing.assert_array_equal(g, ref)


def test_reverse_docs_example():
    d = L.assign(np.array([[0, 1, 2], [3, 4, 5], [6, 7, 8]], dtype="float32"))
    r1, r2 = run([L.reverse(d, 0), L.reverse(d, [0, 1])])
    np.testing.assert_array_equal(r1, [[6, 7, 8], [3, 4, 5], [0, 1, 2]])
    np.testing.assert_array_equal(r2, [[8, 7, 6], [5, 4, 3], [2, 1, 0]])


def test_manip_errors():
    x = fluid.data("x", [2, 3], "float32")
    with pytest.raises(ValueError, match=r"unstack: axis 2 is out of range for x of rank 2"):
        L.unstack(x, axis=2)
    with pytest.raises(ValueError, match=r"unstack: the size of axis 0 of x .* is unknown"):
        L.unstack(fluid.data("b", [None, 3], "float32"))
    with pytest.raises(TypeError, match="'dims' in flip must be list or tuple"):
        L.flip(x, 1)
    with pytest.raises(ValueError, match=r"flip: dims entry 2 is out of range .* \[-2, 2\)"):
        L.flip(x, [2])
    with pytest.raises(ValueError, match=r"reverse: axis \[0, -2\] names an axis twice"):
        L.reverse(x, [0, -2])
    with pytest.raises(ValueError, match=r"roll: shifts \[1, 2\] and dims \[0\] must have the "
                                         r"same length"):
        L.roll(x, [1, 2], [0])
    with pytest.raises(TypeError, match=r"roll: shifts\[0\] must be an int"):
        L.roll(x, [1.5])
    with pytest.raises(ValueError, match="is not a multiple"):
        L.expand_as(x, fluid.data("t", [4, 4], "float32"))


# -- indexing -----------------------------------------------------------------------------------
def test_where_docs_examples():
    c1 = L.cast(L.assign(np.array([1, 0, 1], dtype="int32")), "bool")
    c2 = L.cast(L.assign(np.array([[1, 0], [0, 1]], dtype="int32")), "bool")
    c3 = L.cast(L.assign(np.array([0, 0, 0], dtype="int32")), "bool")
    o1, o2, o3 = L.where(c1), L.where(c2), L.where(c3)
    assert o1.dtype == "int64" and o1.shape == (-1, 1) and o2.shape == (-1, 2)
    r1, r2, r3 = run([o1, o2, o3])
    np.testing.assert_array_equal(r1, [[0], [2]])
    np.testing.assert_array_equal(r2, [[0, 0], [1, 1]])
    assert r3.shape == (0, 1) and r3.dtype == np.int64
    with pytest.raises(TypeError, match=r"'condition' in where must be \['bool'\], but "
                                        r"received int32"):
        L.where(L.assign(np.array([1, 0], dtype="int32")))


def test_scatter_gather_nd_layers():
    base = np.arange(12, dtype=np.float32).reshape(4, 3)
    x = data("x", base)
    ids = fluid.data("ids", [2], "int64")
    up = fluid.data("up", [2, 3], "float32")
    idx = fluid.data("idx", [2, 2], "int32")
    vals = fluid.data("vals", [2], "float32")
    s1 = L.scatter(x, ids, up)
    s2 = L.scatter(x, ids, up, overwrite=False)
    g = L.gather_nd(x, idx)
    sn = L.scatter_nd(idx, vals, [3, 4])
    sa = L.scatter_nd_add(x, idx, vals)
    upv = np.ones((2, 3), np.float32) * 5
    got = run([s1, s2, g, sn, sa], {"x": base, "ids": np.array([1, 1], np.int64), "up": upv,
                                    "idx": np.array([[0, 1], [2, 2]], np.int32),
                                    "vals": np.array([10., 20.], np.float32)})
    r1 = base.copy()
    r1[1] = 5
    r2 = base.copy()
    r2[1] = 10
    np.testing.assert_array_equal(got[0], r1)
    np.testing.assert_array_equal(got[1], r2)
    np.testing.assert_array_equal(got[2], [base[0, 1], base[2, 2]])
    ref_sn = np.zeros((3, 4), np.float32)
    ref_sn[0, 1], ref_sn[2, 2] = 10, 20
    np.testing.assert_array_equal(got[3], ref_sn)
    ref_sa = base.copy()
    ref_sa[0, 1] += 10
    ref_sa[2, 2] += 20
    np.testing.assert_array_equal(got[4], ref_sa)


def test_scatter_trains_rows_it_keeps():
    """The gradient of scatter w.r.t. input is zero on the overwritten rows."""
    x = fluid.data("x", [3, 2], "float32")
    x.stop_gradient = False
    up = L.fill_constant([1, 2], "float32", 1.0)
    ids = L.assign(np.array([1], np.int64))
    loss = L.reduce_sum(L.scatter(x, ids, up))
    g, = run(fluid.backward.gradients([loss], [x]), {"x": np.ones((3, 2), np.float32)})
    np.testing.assert_array_equal(g, [[1, 1], [0, 0], [1, 1]])


def test_index_layers():
    base = np.array([[1., 2., 3., 4.], [5., 6., 7., 8.], [9., 10., 11., 12.]], np.float32)
    x = data("x", base)
    a, b = data("a", base), data("b", -base)
    sel = fluid.data("sel", [3, 1], "int32")
    i1 = fluid.data("i1", [3], "int32")
    i2 = fluid.data("i2", [3, 2], "int64")
    m = fluid.data("m", [3, 1], "bool")
    got = run([L.multiplex([a, b], sel), L.index_select(x, i1), L.index_select(x, i1, dim=1),
               L.index_sample(x, i2), L.masked_select(x, m)],
              {"x": base, "a": base, "b": -base, "sel": np.array([[1], [0], [1]], np.int32),
               "i1": np.array([0, 1, 1], np.int32),
               "i2": np.array([[3, 0], [1, 1], [2, 0]], np.int64),
               "m": np.array([[True], [False], [True]])})
    np.testing.assert_array_equal(got[0], [-base[0], base[1], -base[2]])
    np.testing.assert_array_equal(got[1], base[[0, 1, 1]])
    np.testing.assert_array_equal(got[2], base[:, [0, 1, 1]])
    np.testing.assert_array_equal(got[3], [[4, 1], [6, 6], [11, 9]])
    np.testing.assert_array_equal(got[4], np.concatenate([base[0], base[2]]))


def test_index_errors():
    x = fluid.data("x", [3, 4], "float32")
    with pytest.raises(TypeError, match=r"'index' in scatter must be \['int32', 'int64'\], "
                                        r"but received float32"):
        L.scatter(x, x, x)
    with pytest.raises(TypeError, match="scatter: updates must have the data type of input "
                                        r"\(float32\), but received float64"):
        L.scatter(x, fluid.data("i", [2], "int64"), fluid.data("u", [2, 4], "float64"))
    with pytest.raises(ValueError, match="multiplex: inputs should be a list of at least 2"):
        L.multiplex([x], fluid.data("s", [3, 1], "int32"))
    with pytest.raises(TypeError, match=r"'mask' in masked_select must be \['bool'\]"):
        L.masked_select(x, x)
    with pytest.raises(ValueError, match="index_select: dim 2 is out of range"):
        L.index_select(x, fluid.data("j", [2], "int64"), dim=2)
    with pytest.raises(ValueError, match=r"shard_index: shard_id \(3\) should be in \[0, 2\)"):
        L.shard_index(fluid.data("k", [4, 1], "int64"), 20, 2, 3)
    with pytest.raises(ValueError, match=r"unique: x must be a 1-D tensor, but its shape is "
                                         r"\[3, 4\]"):
        L.unique(x)
    with pytest.raises(TypeError, match=r"'dtype' in unique_with_counts must be "
                                        r"\['int32', 'int64'\], but received float32"):
        L.unique_with_counts(fluid.data("v", [4], "int64"), dtype="float32")


def test_sort_unique_shard_layers():
    v = np.array([2, 3, 3, 1, 5, 3], np.int32)
    x = L.assign(v)
    out, index = L.unique(x)
    out2, index2, count = L.unique_with_counts(x, dtype="int64")
    f = fluid.data("f", [2, 3], "float32")
    srt, ids = L.argsort(f, axis=1, descending=True)
    lab = fluid.data("lab", [4, 1], "int64")
    sh = L.shard_index(lab, index_num=20, nshards=2, shard_id=1)
    fv = np.array([[0.5, -1., 2.], [3., 3., 1.]], np.float32)
    got = run([out, index, out2, index2, count, srt, ids, sh],
              {"f": fv, "lab": np.array([[16], [1], [9], [19]], np.int64)})
    np.testing.assert_array_equal(got[0], [2, 3, 1, 5])
    np.testing.assert_array_equal(got[1], [0, 1, 1, 2, 3, 1])
    assert got[1].dtype == np.int32 and got[3].dtype == np.int64
    np.testing.assert_array_equal(got[4], [1, 3, 1, 1])
    np.testing.assert_array_equal(got[5], [[2., 0.5, -1.], [3., 3., 1.]])
    np.testing.assert_array_equal(got[6], [[2, 0, 1], [0, 1, 2]])
    np.testing.assert_array_equal(got[7], [[6], [-1], [-1], [9]])


def test_layers_run_in_dygraph():
    with fluid.dygraph.guard():
        x = fluid.dygraph.to_variable(X)
        np.testing.assert_array_equal(L.flip(x, [0, 1]).numpy(), X[::-1, ::-1])
        np.testing.assert_array_equal(L.roll(x, 1, dims=0).numpy(), np.roll(X, 1, 0))
        parts = L.unstack(x, axis=2)
        assert len(parts) == 4
        np.testing.assert_array_equal(parts[3].numpy(), X[..., 3])
        idx = fluid.dygraph.to_variable(np.array([[0, 1], [1, 2]], np.int64))
        np.testing.assert_array_equal(L.gather_nd(x, idx).numpy(), X[[0, 1], [1, 2]])
        out, ids = L.argsort(x, axis=-1, descending=True)
        np.testing.assert_array_equal(ids.numpy(), np.argsort(-X, -1, kind="stable"))


# -- creation layers (layers/creation_extra.py) -------------------------------------------------
def test_creation_docs_examples():
    r = L.range(0, 10, 2, "int32")
    l5, l1 = L.linspace(0, 10, 5, "float32"), L.linspace(0, 10, 1, "float32")
    d = L.diag(np.arange(3, 6, dtype="int32"))
    e1, e2 = L.eye(3, dtype="int32"), L.eye(2, 3, dtype="int32")
    e3 = L.eye(2, batch_shape=[3])
    assert r.shape == (5,) and l5.shape == (5,) and d.shape == (3, 3) and e3.shape == (3, 2, 2)
    got = run([r, l5, l1, d, e1, e2, e3])
    np.testing.assert_array_equal(got[0], [0, 2, 4, 6, 8])
    assert got[0].dtype == np.int32
    np.testing.assert_allclose(got[1], [0.0, 2.5, 5.0, 7.5, 10.0])
    np.testing.assert_allclose(got[2], [0.0])
    np.testing.assert_array_equal(got[3], np.diag([3, 4, 5]))
    np.testing.assert_array_equal(got[4], np.eye(3))
    np.testing.assert_array_equal(got[5], np.eye(2, 3))
    np.testing.assert_array_equal(got[6], np.stack([np.eye(2)] * 3))
    assert got[6].dtype == np.float32


def test_range_linspace_with_variables():
    start = fluid.data("start", [1], "float32")
    n = fluid.data("n", [1], "int32")
    r = L.range(start, 3, 0.5, "float64")             # a float32 Variable is cast to float64
    ls = L.linspace(start, 2.0, n, "float64")
    assert r.shape == (-1,) and ls.shape == (-1,) and r.dtype == "float64"
    got = run([r, ls], {"start": np.array([1.0], np.float32), "n": np.array([3], np.int32)})
    np.testing.assert_allclose(got[0], [1.0, 1.5, 2.0, 2.5])
    np.testing.assert_allclose(got[1], [1.0, 1.5, 2.0])


def test_meshgrid_and_full_like():
    x = fluid.data("x", [3], "int32")
    y = fluid.data("y", [4], "int32")
    gx, gy = L.meshgrid([x, y])
    assert gx.shape == (3, 4) and gy.shape == (3, 4)
    assert [v.shape for v in L.meshgrid(x, y)] == [(3, 4), (3, 4)]
    inp = fluid.data("inp", [2, 3], "float32")
    f1 = L.full_like(inp, 2.0)
    f2 = L.full_like(inp, 1, dtype="int64")
    xv, yv = np.array([1, 2, 3], np.int32), np.array([4, 5, 6, 7], np.int32)
    got = run([gx, gy, f1, f2], {"x": xv, "y": yv, "inp": np.zeros((2, 3), np.float32)})
    rx, ry = np.meshgrid(xv, yv, indexing="ij")
    np.testing.assert_array_equal(got[0], rx)
    np.testing.assert_array_equal(got[1], ry)
    np.testing.assert_array_equal(got[2], [[2, 2, 2], [2, 2, 2]])
    assert got[2].dtype == np.float32 and got[3].dtype == np.int64
    assert f1.stop_gradient


def test_meshgrid_trains():
    a = fluid.data("a", [2], "float64")
    b = fluid.data("b", [3], "float64")
    a.stop_gradient = b.stop_gradient = False
    ga, gb = L.meshgrid([a, b])
    loss = L.reduce_sum(L.elementwise_mul(ga, gb))
    da, db = run(fluid.backward.gradients([loss], [a, b]),
                 {"a": np.array([1.0, 2.0]), "b": np.array([1.0, 2.0, 3.0])})
    np.testing.assert_allclose(da, [6, 6])       # d/da_i sum_ij a_i b_j = sum_j b_j
    np.testing.assert_allclose(db, [3, 3, 3])


def test_hash_docs_example():
    """fluid 1.8's documented output for this input (XXH64, as fluid computes it)."""
    x = L.data(name="x", shape=[1], dtype="int32", lod_level=1)
    res = L.hash(name="res", input=x, hash_size=1000, num_hash=4)
    in1 = np.array([[1, 2], [3, 4]]).astype("int32")
    got, = run([res], {"x": in1})              # layers.data is not feed-checked (fluid)
    np.testing.assert_array_equal(got, [[[722], [407], [337], [395]],
                                        [[603], [590], [386], [901]]])


def test_creation_errors():
    with pytest.raises(TypeError, match=r"'dtype' in range must be \['float32', 'float64', "
                                        r"'int32', 'int64'\], but received bool"):
        L.range(0, 3, 1, "bool")
    with pytest.raises(ValueError, match="range: step must not be 0"):
        L.range(0, 3, 0, "int64")
    with pytest.raises(ValueError, match="linspace: num must be >= 1, but received 0"):
        L.linspace(0, 1, 0, "float32")
    with pytest.raises(TypeError, match="'diagonal' in diag must be Variable or ndarray"):
        L.diag([1, 2])
    with pytest.raises(TypeError, match="eye: num_rows should be a non-negative int, but "
                                        "received -1"):
        L.eye(-1)
    with pytest.raises(TypeError, match=r"eye: batch_shape should be a list of positive ints"):
        L.eye(2, batch_shape=[0])
    with pytest.raises(TypeError, match="'fill_value' in full_like must be"):
        L.full_like(fluid.data("q", [2], "float32"), "1")
    with pytest.raises(TypeError, match=r"'input' in hash must be \['int32', 'int64'\]"):
        L.hash(fluid.data("h", [2, 2], "float32"), 100)


def test_creation_layers_in_dygraph():
    with fluid.dygraph.guard():
        np.testing.assert_array_equal(L.range(0, 5, 2, "int64").numpy(), [0, 2, 4])
        np.testing.assert_array_equal(L.eye(2, batch_shape=[2], dtype="int32").numpy(),
                                      [np.eye(2)] * 2)
        np.testing.assert_allclose(L.linspace(0, 1, 3, "float64").numpy(), [0, 0.5, 1])
        v = L.randint(0, 4, shape=[100])
        assert v.numpy().min() >= 0 and v.numpy().max() <= 3
        crop = L.random_crop(fluid.dygraph.to_variable(np.ones((2, 5, 5), np.float32)), [3, 3],
                             seed=1)
        assert crop.shape == [2, 3, 3] or tuple(crop.shape) == (2, 3, 3)


# -- Variable axis / sections (fluid 1.8's AxisTensor / SectionsTensorList) ---------------------
def test_concat_and_split_with_variable_axis_and_sections():
    a = fluid.data("a", [2, 3], "float32")
    b = fluid.data("b", [2, 3], "float32")
    ax = fluid.data("ax", [1], "int32")
    c = L.concat([a, b], axis=ax)
    assert c.shape == (-1, -1)
    s1 = L.split(c, 2, dim=ax)
    n = L.fill_constant([1], "int64", 1)
    s2 = L.split(a, [n, -1], dim=1)
    assert len(s2) == 2 and s2[0].shape == (2, -1)
    av = np.arange(6, dtype=np.float32).reshape(2, 3)
    bv = -av
    for axis in (0, 1):
        got = run([c] + s1 + s2, {"a": av, "b": bv, "ax": np.array([axis], np.int32)})
        np.testing.assert_array_equal(got[0], np.concatenate([av, bv], axis))
        np.testing.assert_array_equal(got[1], av)
        np.testing.assert_array_equal(got[2], bv)
        np.testing.assert_array_equal(got[3], av[:, :1])
        np.testing.assert_array_equal(got[4], av[:, 1:])


def test_concat_variable_axis_trains():
    a = fluid.data("a", [2, 2], "float64")
    b = fluid.data("b", [2, 2], "float64")
    a.stop_gradient = b.stop_gradient = False
    ax = L.fill_constant([1], "int32", 1)
    w = L.assign(np.arange(8, dtype=np.float64).reshape(2, 4))
    parts = L.split(L.elementwise_mul(L.concat([a, b], axis=ax), w), 2, dim=ax)
    loss = L.reduce_sum(parts[1])
    da, db = run(fluid.backward.gradients([loss], [a, b]),
                 {"a": np.ones((2, 2)), "b": np.ones((2, 2))})
    np.testing.assert_array_equal(da, np.zeros((2, 2)))
    np.testing.assert_array_equal(db, [[2, 3], [6, 7]])


def test_concat_split_variable_errors():
    a = fluid.data("a", [2, 3], "float32")
    with pytest.raises(TypeError, match=r"'axis' in concat must be \['int32', 'int64'\], but "
                                        r"received float32"):
        L.concat([a, a], axis=fluid.data("f", [1], "float32"))
    with pytest.raises(TypeError, match=r"'num_or_sections element' in split must be "
                                        r"\['int32', 'int64'\]"):
        L.split(a, [fluid.data("g", [1], "float32"), -1], dim=1)


# -- arange / full / tril / triu / diag_embed / nonzero / label_smooth --------------------------
def test_arange_full_tril_triu_diag_embed():
    a = L.arange(0, 6, 2)
    f = L.full([2, 3], 1.5)
    fi = L.full([2], 7, dtype="int64")
    x = data("x", X[0])
    lo, up = L.tril(x), L.triu(x, diagonal=1)
    d = np.arange(6, dtype=np.float32).reshape(2, 3)
    de1 = L.diag_embed(d)
    de2 = L.diag_embed(d, offset=-1, dim1=0, dim2=2)
    assert a.dtype == "float32" and de1.shape == (2, 3, 3) and de2.shape == (4, 2, 4)
    got = run([a, f, fi, lo, up, de1, de2], {"x": X[0]})
    np.testing.assert_array_equal(got[0], [0, 2, 4])
    np.testing.assert_array_equal(got[1], np.full((2, 3), 1.5, np.float32))
    assert got[2].dtype == np.int64 and got[2].tolist() == [7, 7]
    np.testing.assert_array_equal(got[3], np.tril(X[0]))
    np.testing.assert_array_equal(got[4], np.triu(X[0], 1))
    np.testing.assert_array_equal(got[5], [np.diag(r) for r in d])
    np.testing.assert_array_equal(got[6][:, 0, :], np.diag(d[0], -1))
    np.testing.assert_array_equal(got[6][:, 1, :], np.diag(d[1], -1))


def test_nonzero_docs_example():
    data1 = np.array([[1.0, 0.0, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, 3.0]])
    data2 = np.array([0.0, 1.0, 0.0, 3.0])
    with fluid.dygraph.guard():
        x1 = fluid.dygraph.to_variable(data1)
        np.testing.assert_array_equal(L.nonzero(x1).numpy(), [[0, 0], [1, 1], [2, 2]])
        cols = L.nonzero(x1, as_tuple=True)
        assert len(cols) == 2
        for c in cols:
            np.testing.assert_array_equal(c.numpy(), [[0], [1], [2]])
        np.testing.assert_array_equal(L.nonzero(fluid.dygraph.to_variable(data2)).numpy(),
                                      [[1], [3]])


def test_label_smooth_layer():
    label = fluid.data("label", [3, 4], "float32")
    prior = fluid.data("prior", [1, 4], "float32")
    s1 = L.label_smooth(label, epsilon=0.1)
    s2 = L.label_smooth(label, prior_dist=prior, epsilon=0.2)
    lv = np.eye(4, dtype=np.float32)[[0, 2, 3]]
    pv = np.array([[0.1, 0.2, 0.3, 0.4]], np.float32)
    g1, g2 = run([s1, s2], {"label": lv, "prior": pv})
    np.testing.assert_allclose(g1, 0.9 * lv + 0.025, rtol=1e-6)
    np.testing.assert_allclose(g2, 0.8 * lv + 0.2 * pv, rtol=1e-6)
    with pytest.raises(ValueError, match="label_smooth: the value of epsilon must be between 0 "
                                         "and 1, but received 1.5"):
        L.label_smooth(label, epsilon=1.5)
    with pytest.raises(TypeError, match=r"'label' in label_smooth must be \['float32', "
                                        r"'float64'\], but received int64"):
        L.label_smooth(fluid.data("ilab", [3, 4], "int64"))


def test_tril_diag_embed_errors():
    with pytest.raises(ValueError, match=r"input shape in tril must be at least 2-D, but its "
                                         r"shape is \[3\]"):
        L.tril(fluid.data("v", [3], "float32"))
    with pytest.raises(TypeError, match=r"diagonal in triu must be a python Int, but received "
                                        r"2.5 of type float"):
        L.triu(fluid.data("m", [3, 3], "float32"), diagonal=2.5)
    with pytest.raises(ValueError, match="diag_embed: dim1 .* and dim2 .* must name different"):
        L.diag_embed(np.ones((2, 3), np.float32), dim1=0, dim2=-3)


def test_paddle_format_attr_types_of_new_ops(tmp_path):
    """Saved as Paddle declares the attrs (int64 where fluid's ops use int64) and reloaded."""
    from fluidlite.formats import paddle as pf
    x = fluid.data("x", [2, 3, 4, 4], "float32")
    y = L.crop_tensor(L.flip(L.roll(L.pad2d(x, [1, 1, 2, 0], mode="reflect"), [1, -2], [2, 3]),
                             [1]), shape=[-1, 2, 3, 3], offsets=[0, 1, 1, 1])
    L.eye(3, dtype="int64")
    L.randint(0, 4, shape=[2])
    msg = pf.messages()["ProgramDesc"]()
    msg.ParseFromString(pf.program_to_bytes(fluid.default_main_program()))
    types = {(o.type, a.name): a.type for o in msg.blocks[0].ops for a in o.attrs}
    assert types[("roll", "shifts")] == 11 and types[("roll", "dims")] == 11      # LONGS
    assert types[("randint", "shape")] == 11
    assert types[("eye", "num_rows")] == 9 and types[("eye", "num_columns")] == 9  # LONG
    assert types[("pad2d", "paddings")] == 3 and types[("pad2d", "mode")] == 2    # INTS, STRING
    assert types[("crop_tensor", "offsets")] == 3 and types[("flip", "dims")] == 3
    exe = fluid.Executor(fluid.CPUPlace())
    xv = np.random.rand(2, 3, 4, 4).astype("float32")
    ref, = exe.run(feed={"x": xv}, fetch_list=[y])
    fluid.io.save_inference_model(str(tmp_path), ["x"], [y], exe)
    prog, feeds, fetches = fluid.io.load_inference_model(str(tmp_path), exe)
    got, = exe.run(prog, feed={"x": xv}, fetch_list=fetches)
    np.testing.assert_array_equal(got, ref)


# -- more of fluid 1.8's documented examples ---------------------------------------------------
def test_scatter_multiplex_argsort_docs_examples():
    inp = L.data(name="data", shape=[3, 2], dtype="float32", append_batch_size=False)
    index = L.data(name="index", shape=[4], dtype="int64", append_batch_size=False)
    updates = L.data(name="update", shape=[4, 2], dtype="float32", append_batch_size=False)
    output = L.scatter(inp, index, updates, overwrite=False)
    x1 = L.data(name="x1", shape=[4], dtype="float32")
    x2 = L.data(name="x2", shape=[4], dtype="float32")
    sel = L.data(name="sel", shape=[1], dtype="int32")
    out = L.multiplex(inputs=[x1, x2], index=sel)
    got = run([output, out], {
        "data": np.array([[1, 1], [2, 2], [3, 3]], np.float32),
        "index": np.array([2, 1, 0, 1], np.int64),
        "update": np.array([[1, 1], [2, 2], [3, 3], [4, 4]], np.float32),
        "x1": np.array([[1, 2, 0, 0], [3, 4, 0, 0]], np.float32),
        "x2": np.array([[5, 6, 0, 0], [7, 8, 0, 0]], np.float32),
        "sel": np.array([[1], [0]], np.int32)})
    np.testing.assert_array_equal(got[0], [[3, 3], [6, 6], [1, 1]])
    np.testing.assert_array_equal(got[1], [[5, 6, 0, 0], [3, 4, 0, 0]])
    in1 = np.array([[[5, 8, 9, 5], [0, 0, 1, 7], [6, 9, 2, 4]],
                    [[5, 2, 4, 2], [4, 7, 7, 9], [1, 7, 0, 6]]]).astype(np.float32)
    with fluid.dygraph.guard():
        x = fluid.dygraph.to_variable(in1)
        out1 = L.argsort(input=x, axis=-1)
        out2 = L.argsort(input=x, axis=0)
        out3 = L.argsort(input=x, axis=1)
        np.testing.assert_array_equal(out1[0].numpy(), [[[5, 5, 8, 9], [0, 0, 1, 7], [2, 4, 6, 9]],
                                                        [[2, 2, 4, 5], [4, 7, 7, 9],
                                                         [0, 1, 6, 7]]])
        np.testing.assert_array_equal(out1[1].numpy(), [[[0, 3, 1, 2], [0, 1, 2, 3], [2, 3, 0, 1]],
                                                        [[1, 3, 2, 0], [0, 1, 2, 3],
                                                         [2, 0, 3, 1]]])
        np.testing.assert_array_equal(out2[0].numpy(), [[[5, 2, 4, 2], [0, 0, 1, 7], [1, 7, 0, 4]],
                                                        [[5, 8, 9, 5], [4, 7, 7, 9],
                                                         [6, 9, 2, 6]]])
        np.testing.assert_array_equal(out3[0].numpy(), [[[0, 0, 1, 4], [5, 8, 2, 5], [6, 9, 9, 7]],
                                                        [[1, 2, 0, 2], [4, 7, 4, 6],
                                                         [5, 7, 7, 9]]])


def test_docs_shape_examples():
    """The shapes fluid 1.8's docs state for scatter_nd(_add), gather_nd, random_crop, unstack."""
    ref = L.data(name="ref", shape=[3, 5, 9, 10], dtype="float32", append_batch_size=False)
    index = L.data(name="index", shape=[3, 2], dtype="int32", append_batch_size=False)
    updates = L.data(name="update", shape=[3, 9, 10], dtype="float32", append_batch_size=False)
    assert L.scatter_nd_add(ref, index, updates).shape == (3, 5, 9, 10)
    assert L.scatter_nd(index, updates, [3, 5, 9, 10]).shape == (3, 5, 9, 10)
    x = L.data(name="x", shape=[3, 4, 5], dtype="float32")
    idx = L.data(name="idx", shape=[2, 2], dtype="int32")
    assert L.gather_nd(x, idx).shape == (-1, 2, 4, 5)     # batch dims appended to both
    img = fluid.data("img", [None, 3, 256, 256])
    assert L.random_crop(img, shape=[3, 224, 224]).shape == (-1, 3, 224, 224)
    assert L.random_crop(img, shape=[128, 224]).shape == (-1, 3, 128, 224)
    y = fluid.data(name="y", shape=[2, 3, 5], dtype="float32")
    parts = L.unstack(y, axis=1)
    assert len(parts) == 3 and all(p.shape == (2, 5) for p in parts)
    assert L.sampling_id(L.data(name="X", shape=[13, 11], dtype="float32",
                                append_batch_size=False)).shape == (13,)


def test_argmax_argmin_int8():
    x = fluid.data("x", [2, 3], "int8")
    a, b = run([L.argmax(x, 1), L.argmin(x, 0)], {"x": np.array([[1, 5, 2], [7, 0, -3]], "int8")})
    np.testing.assert_array_equal(a, [1, 0])
    np.testing.assert_array_equal(b, [0, 1, 1])
