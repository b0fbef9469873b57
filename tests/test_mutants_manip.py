"""Tests written from mutation testing (issue 28, docs/mutation.md) for ``fluidlite/ops/manip.py``:
shape inference of concat, split, stack, reshape2, squeeze2, unsqueeze2, flatten2 and
transpose2 checked against the shapes their NumPy kernels actually produce (a property over
many shapes), the unknown-dim (-1) rules fluid's InferShape applies, and the error messages."""
import itertools

import numpy as np
import pytest

from fluidlite.core.registry import VarSpec, get_op_def

OP = get_op_def


def _spec(shape, dtype="float32", lod_level=0):
    return VarSpec(tuple(shape), dtype, lod_level)


def _arr(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


SHAPES = [(2, 3), (4, 1, 3), (2, 3, 4), (1, 5, 2, 3)]


@pytest.mark.parametrize("shape", SHAPES)
def test_concat_infer_matches_the_kernel_on_every_axis(shape):
    for axis in range(-len(shape), len(shape)):
        other = list(shape)
        other[axis] += 2
        xs = [_arr(shape), _arr(other, 1), _arr(shape, 2)]
        got = OP("concat").infer([_spec(x.shape, lod_level=1) for x in xs], axis=axis)["Out"]
        out = OP("concat").forward(xs, axis=axis)["Out"]
        assert tuple(got.shape) == out.shape and got.lod_level == 1
        np.testing.assert_array_equal(out, np.concatenate(xs, axis=axis))


def test_concat_unknown_dims():
    c = OP("concat")
    assert c.infer([_spec((-1, 3)), _spec((4, 3))], axis=0)["Out"].shape == (-1, 3)
    assert c.infer([_spec((-1, 3)), _spec((4, 2))], axis=1)["Out"].shape == (4, 5)
    assert c.infer([_spec((-1, 3)), _spec((-1, 2))], axis=1)["Out"].shape == (-1, 5)
    assert c.infer([_spec((2, 3))], np.array([1]), axis=0)["Out"].shape == (-1, -1)


def test_concat_errors_name_the_inputs():
    c = OP("concat")
    with pytest.raises(ValueError, match=r"concat: input shapes must match except on axis 0: "
                                         r"X\[0\] has shape \[2, 3\] but X\[1\] has shape "
                                         r"\[2, 4\]"):
        c.infer([_spec((2, 3)), _spec((2, 4))], axis=0)
    with pytest.raises(ValueError, match=r"X\[0\] has shape \[2, 3\] but X\[1\] has shape "
                                         r"\[2, 3, 1\]"):
        c.infer([_spec((2, 3)), _spec((2, 3, 1))], axis=1)
    with pytest.raises(ValueError, match=r"concat: all inputs must have the same dtype, but X\[0\] "
                                         r"is float32 and X\[1\] is int64"):
        c.infer([_spec((2, 3)), _spec((2, 3), "int64")], axis=0)
    with pytest.raises(ValueError, match="concat: X is empty"):
        c.infer([], axis=0)


@pytest.mark.parametrize("shape,axis,num,sections", [
    ((6, 4), 0, 3, ()), ((6, 4), 1, 2, ()), ((2, 9, 3), -2, 0, (2, -1, 3)),
    ((2, 9, 3), 1, 0, (4, 5)), ((5, 4), 0, 0, (-1, 1)), ((5, 4), 1, 4, ())])
def test_split_infer_matches_the_kernel(shape, axis, num, sections):
    x = _arr(shape)
    outs = OP("split").infer(_spec(shape, lod_level=1), axis=axis, num=num,
                             sections=list(sections))["Out"]
    got = OP("split").forward(x, axis=axis, num=num, sections=list(sections))["Out"]
    assert [tuple(o.shape) for o in outs] == [g.shape for g in got]
    assert all(o.lod_level == 1 for o in outs)
    np.testing.assert_array_equal(np.concatenate(got, axis=axis), x)


def test_split_unknown_dims_and_errors():
    s = OP("split")
    assert [o.shape for o in s.infer(_spec((-1, 4)), axis=0, num=2)["Out"]] == [(-1, 4)] * 2
    assert [o.shape for o in s.infer(_spec((-1, 4)), axis=0, num=0, sections=[1, -1])["Out"]] \
        == [(1, 4), (-1, 4)]
    with pytest.raises(ValueError, match=r"split: the dim of size 5 cannot be split into 2 equal"):
        s.infer(_spec((5, 4)), axis=0, num=2)
    with pytest.raises(ValueError, match=r"split: give num > 0 or a non-empty sections list"):
        s.infer(_spec((5, 4)), axis=0, num=0, sections=[])
    with pytest.raises(ValueError, match=r"split: only one entry of sections \[-1, -1\] can be -1"):
        s.infer(_spec((5, 4)), axis=0, num=0, sections=[-1, -1])
    with pytest.raises(ValueError, match=r"split: sections \[4, 3, -1\] exceed the dim size 5"):
        s.infer(_spec((5, 4)), axis=0, num=0, sections=[4, 3, -1])
    with pytest.raises(ValueError, match=r"split: sections \[2, 2\] sum to 4, but the dim"):
        s.infer(_spec((5, 4)), axis=0, num=0, sections=[2, 2])


@pytest.mark.parametrize("shape", SHAPES)
def test_stack_infer_matches_the_kernel(shape):
    for axis in range(-len(shape) - 1, len(shape) + 1):
        xs = [_arr(shape, k) for k in range(3)]
        got = OP("stack").infer([_spec(shape, lod_level=0)] * 3, axis=axis)
        out = OP("stack").forward(xs, axis=axis)
        key = next(iter(out))
        assert tuple(got[key].shape) == out[key].shape == np.stack(xs, axis=axis).shape


@pytest.mark.parametrize("shape,target", [
    ((2, 3, 4), (6, 4)), ((2, 3, 4), (0, -1)), ((2, 3, 4), (-1,)), ((2, 3, 4), (4, 0, 2)),
    ((2, 3, 4), (1, 24)), ((6,), (2, -1, 1))])
def test_reshape2_infer_matches_the_kernel(shape, target):
    x = _arr(shape)
    got = OP("reshape2").infer(_spec(shape), None, None, shape=list(target))
    out = OP("reshape2").forward(x, None, None, shape=list(target))
    assert tuple(got["Out"].shape) == out["Out"].shape
    assert tuple(got["XShape"].shape) == (0,) + shape
    np.testing.assert_array_equal(out["Out"].ravel(), x.ravel())


def test_reshape2_unknown_dims_and_errors():
    r = OP("reshape2")
    assert r.infer(_spec((-1, 3, 4)), None, None, shape=[-1, 12])["Out"].shape == (-1, 12)
    assert r.infer(_spec((-1, 3, 4)), None, None, shape=[0, -1])["Out"].shape == (-1, 12)
    assert r.infer(_spec((5, -1)), None, None, shape=[0, 2, -1])["Out"].shape == (5, 2, -1)
    for target, msg in [([-1, -1], r"only one dimension of the target shape \[-1, -1\] can be -1"),
                        ([0, 0, 0, 0], r"copies dim 3 \(0\) but X has only 3 dims"),
                        ([2, -2], r"has an invalid dim -2"),
                        ([5, -1], r"24 elements are not divisible by 5"),
                        ([5, 5], r"\(24 elements\) to \[5, 5\] \(25 elements\)")]:
        with pytest.raises(ValueError, match="reshape2: .*" + msg):
            r.infer(_spec((2, 3, 4)), None, None, shape=target)


@pytest.mark.parametrize("shape,axes", [((1, 3, 1, 4), [0, 2]), ((1, 3, 1, 4), []),
                                        ((2, 1, 3), [-2]), ((2, 3), [])])
def test_squeeze2_infer_matches_the_kernel(shape, axes):
    got = OP("squeeze2").infer(_spec(shape), axes=axes)
    out = OP("squeeze2").forward(_arr(shape), axes=axes)
    assert tuple(got["Out"].shape) == out["Out"].shape


@pytest.mark.parametrize("shape,axes", [((3, 4), [0]), ((3, 4), [0, 3]), ((3, 4), [-1]),
                                        ((3,), [0, 1, 2]), ((2, 3), [1, 1])])
def test_unsqueeze2_infer_matches_the_kernel(shape, axes):
    got = OP("unsqueeze2").infer(_spec(shape), None, None, axes=axes)
    out = OP("unsqueeze2").forward(_arr(shape), None, None, axes=axes)
    assert tuple(got["Out"].shape) == out["Out"].shape
    assert out["Out"].size == int(np.prod(shape))


@pytest.mark.parametrize("shape,axis", [((2, 3, 4), 0), ((2, 3, 4), 1), ((2, 3, 4), 3),
                                        ((5,), 1), ((-1, 3, 4), 1), ((2, -1, 4), 2)])
def test_flatten2_infer(shape, axis):
    got = OP("flatten2").infer(_spec(shape), axis=axis)["Out"].shape
    left, right = shape[:axis], shape[axis:]
    num = lambda dims: -1 if any(d < 0 for d in dims) else int(np.prod(dims, dtype=np.int64))
    assert tuple(got) == (num(left), num(right))
    if -1 not in shape:
        assert OP("flatten2").forward(_arr(shape), axis=axis)["Out"].shape == tuple(got)


@pytest.mark.parametrize("perm", list(itertools.permutations(range(3))))
def test_transpose2_infer_matches_the_kernel(perm):
    shape = (2, 3, 4)
    got = OP("transpose2").infer(_spec(shape), axis=list(perm))
    out = OP("transpose2").forward(_arr(shape), axis=list(perm))
    assert tuple(got["Out"].shape) == out["Out"].shape == tuple(shape[p] for p in perm)


# -- second round: run-time shape inputs, dtypes / LoD levels of every output, errors, lowering --
from fluidlite.core.dtypes import VarType          # noqa: E402

F64 = VarType.FP16       # not FP64: VarSpec(shape, None) means float64
I32 = VarType.INT32


def _s(shape, dtype=F64, lod=1):
    return VarSpec(tuple(shape), dtype, lod)


def _same(spec, shape, dtype=F64, lod=1):
    assert tuple(spec.shape) == tuple(shape), (spec.shape, shape)
    assert all(type(d) is int for d in spec.shape), spec.shape
    assert spec.dtype == dtype and spec.lod_level == lod


def _xshape_ok(res, x_shape):
    assert set(res) == {"Out", "XShape"}
    assert tuple(res["XShape"].shape) == (0,) + tuple(x_shape) and res["XShape"].dtype == F64


def test_reshape2_infer_with_run_time_shape_inputs():
    r = OP("reshape2")
    x = _s((4, 3))
    res = r.infer(x, _s((3,), I32, 0), [], shape=[])
    _same(res["Out"], (-1, -1, -1))
    _xshape_ok(res, (4, 3))
    _same(r.infer(x, _s((2,), I32, 0), [], shape=[2, -1])["Out"], (2, 6))   # attr still valid
    _same(r.infer(x, None, [_s((1,), I32, 0)] * 2, shape=[])["Out"], (-1, -1))
    # an attr that does not fit X: the run-time shape decides (rank from the tensor)
    _same(r.infer(x, _s((2,), I32, 0), [], shape=[5, 5])["Out"], (-1, -1))
    _same(r.infer(x, _s((0,), I32, 0), [], shape=[])["Out"], (-1,))
    res = r.infer(x, None, [], shape=[0, -1, 1])
    _same(res["Out"], (4, 3, 1))
    _xshape_ok(res, (4, 3))


def test_reshape_target_empty_tensors_and_integer_sizes():
    from fluidlite.ops.manip import reshape_target
    assert reshape_target("reshape2", (0, 3), [-1, 3]) == (0, 3)
    got = reshape_target("reshape2", (4, 6), [3, -1])
    assert got == (3, 8) and all(type(d) is int for d in got)
    with pytest.raises(ValueError, match=r"reshape2: cannot reshape X of shape \[0, 3\] \(0 "
                                         r"elements\) to \[2, 3\] \(6 elements\)"):
        reshape_target("reshape2", (0, 3), [2, 3])
    assert reshape_target("reshape2", (-1, 3), [3, -1]) == (3, -1)
    assert reshape_target("reshape2", (-1, 3), [6, 2]) == (6, 2)      # unknown: no count check


def test_unsqueeze2_infer_with_run_time_axes():
    u = OP("unsqueeze2")
    x = _s((2, 3))
    res = u.infer(x, _s((2,), I32, 0), [])
    _same(res["Out"], (-1, -1, -1, -1))
    _xshape_ok(res, (2, 3))
    _same(u.infer(x, None, [_s((1,), I32, 0)])["Out"], (-1, -1, -1))
    _same(u.infer(x, _s((0,), I32, 0), [])["Out"], (-1, -1))
    res = u.infer(x, None, [], axes=[0, 3])
    _same(res["Out"], (1, 2, 3, 1))
    _xshape_ok(res, (2, 3))
    with pytest.raises(ValueError, match=r"^unsqueeze2: axes entry 4 is out of range for input "
                                         r"of rank 3 \(valid: -4\.\.3\)$"):
        u.infer(x, None, [], axes=[0, 4])


def test_unsqueeze2_forward_with_axes_tensors():
    u = OP("unsqueeze2")
    x = _arr((2, 3))
    assert u.forward(x, np.array([0, -1], np.int32), [])["Out"].shape == (1, 2, 3, 1)
    out = u.forward(x, None, [np.array([1], np.int64), np.array([3], np.int32)], axes=[0])
    assert out["Out"].shape == (2, 1, 3, 1) and out["XShape"].shape == (0, 2, 3)


def test_split_infer_with_run_time_axis_or_sections():
    sp = OP("split")
    x = _s((6, 4))
    outs = sp.infer(x, _s((1,), I32, 0), [], num=3)["Out"]
    assert len(outs) == 3
    for o in outs:
        _same(o, (-1, -1))
    outs = sp.infer(x, _s((1,), I32, 0), [], num=1)["Out"]
    assert len(outs) == 1
    outs = sp.infer(x, _s((1,), I32, 0), [], sections=[2, -1])["Out"]
    assert len(outs) == 2
    outs = sp.infer(x, None, [_s((1,), I32, 0)] * 2, axis=-1)["Out"]
    assert len(outs) == 2
    for o in outs:
        _same(o, (6, -1))
    with pytest.raises(ValueError, match=r"^split: axis 2 is out of range for input of rank 2"):
        sp.infer(x, None, [_s((1,), I32, 0)], axis=2)
    with pytest.raises(ValueError, match=r"^split: axis -3 is out of range for input of rank 2"):
        sp.infer(x, num=2, axis=-3)
    outs = sp.infer(x, num=2, axis=1)["Out"]
    for o in outs:
        _same(o, (6, 2))


def test_split_sizes_edge_cases():
    sizes = OP("split")._sizes
    assert sizes(5, 1, []) == [5]
    assert sizes(0, 2, []) == [0, 0]
    assert sizes(-1, 2, []) == [-1, -1]
    assert sizes(2, 0, [2, -1]) == [2, 0]
    assert sizes(0, 0, [-1, 0]) == [0, 0]
    with pytest.raises(ValueError, match=r"^split: give num > 0 or a non-empty sections list$"):
        sizes(4, 0, [])
    with pytest.raises(ValueError, match=r"split: sections \[3, -1\] exceed the dim size 2"):
        sizes(2, 0, [3, -1])


def test_split_forward_with_tensors_negative_axis_and_default_axis():
    sp = OP("split")
    x = _arr((4, 6))
    outs = sp.forward(x, np.array([1], np.int32), [], num=2)["Out"]
    assert [o.shape for o in outs] == [(4, 3), (4, 3)]
    outs = sp.forward(x, None, [np.array([1]), np.array([5])], axis=1)["Out"]
    assert [o.shape for o in outs] == [(4, 1), (4, 5)]
    np.testing.assert_array_equal(outs[1], x[:, 1:])
    outs = sp.forward(x, None, [], sections=[2, 4], axis=-1)["Out"]
    assert [o.shape for o in outs] == [(4, 2), (4, 4)]
    outs = sp.forward(x, num=2)["Out"]                      # fluid's default axis 0
    assert [o.shape for o in outs] == [(2, 6), (2, 6)]


def test_concat_infer_axis_tensor_dtype_lod_and_empty_inputs():
    c = OP("concat")
    _same(c.infer([_s((2, 3)), _s((2, 3))], _s((1,), I32, 0))["Out"], (-1, -1))
    _same(c.infer([_s((0, 3)), _s((2, 3))], axis=0)["Out"], (2, 3))
    _same(c.infer([_s((2, 0)), _s((2, 0))], axis=1)["Out"], (2, 0))
    with pytest.raises(ValueError, match=r"^concat: X is empty; pass at least one Variable$"):
        c.infer([])
    with pytest.raises(ValueError, match=r"^concat: axis 2 is out of range for input of rank 2"):
        c.infer([_s((2, 3)), _s((2, 3))], axis=2)


def test_concat_forward_and_lowered_kernel_with_an_axis_tensor():
    c = OP("concat")
    a, b = _arr((2, 3)), _arr((2, 3), 1)
    np.testing.assert_array_equal(c.forward([a, b], np.array([1], np.int64))["Out"],
                                  np.concatenate([a, b], 1))
    np.testing.assert_array_equal(c.forward([a, b])["Out"], np.concatenate([a, b], 0))
    specs = [_s((2, 3)), _s((2, 3))]
    k = c.lower([specs, None], {})
    np.testing.assert_array_equal(k([a, b]), np.concatenate([a, b], 0))
    k = c.lower([specs], {"axis": 1})
    np.testing.assert_array_equal(k([a, b]), np.concatenate([a, b], 1))
    k = c.lower([specs, _s((1,), I32, 0)], {"axis": 0})
    np.testing.assert_array_equal(k([a, b], np.array([1], np.int32)), np.concatenate([a, b], 1))
    np.testing.assert_array_equal(k([a, b], np.array([-2], np.int32)), np.concatenate([a, b], 0))


def test_stack_infer_checks_every_input_and_keeps_the_dtype():
    st = OP("stack")
    got = st.infer([_s((2, -1)), _s((2, 3)), _s((2, 3))], axis=1)["Y"]
    assert tuple(got.shape) == (2, 3, 3) and got.dtype == F64
    with pytest.raises(ValueError, match=r"^stack: X is empty; pass at least one Variable$"):
        st.infer([])
    with pytest.raises(ValueError, match=r"^stack: all inputs must have the same shape, but "
                                         r"X\[0\] has \[2, 3\] and X\[1\] has \[3, 3\]$"):
        st.infer([_s((2, 3)), _s((3, 3))])
    with pytest.raises(ValueError, match=r"X\[0\] has \[2, 3\] and X\[2\] has \[2, 4\]$"):
        st.infer([_s((2, 3)), _s((2, 3)), _s((2, 4))])
    with pytest.raises(ValueError, match=r"^stack: axis 3 is out of range for input of rank 2"):
        st.infer([_s((2, 3))], axis=3)


def test_squeeze2_infer_dtype_lod_unknown_dims_and_errors():
    sq = OP("squeeze2")
    res = sq.infer(_s((-1, 1, 3)), axes=[0, 1])
    _same(res["Out"], (3,))                  # a listed unknown dim may be 1: squeezed
    _xshape_ok(res, (-1, 1, 3))
    _same(sq.infer(_s((-1, 1, 3)), axes=[])["Out"], (-1, 3))
    assert sq.forward(_arr((4, 1, 3)), axes=[0, 1])["Out"].shape == (4, 3)
    with pytest.raises(ValueError, match=r"^squeeze2: axes entry 3 is out of range for input "
                                         r"of rank 3 \(valid: -3\.\.2\)$"):
        sq.infer(_s((2, 1, 3)), axes=[3])


def test_transpose2_and_flatten2_infer_dtype_lod_and_errors():
    res = OP("transpose2").infer(_s((2, 3, 4)), axis=[2, 0, 1])
    _same(res["Out"], (4, 2, 3))
    _xshape_ok(res, (2, 3, 4))
    with pytest.raises(ValueError, match=r"^transpose2: axis \[0, 0\] is not a permutation of "
                                         r"0\.\.1 for X of shape \[2, 3\]$"):
        OP("transpose2").infer(_s((2, 3)), axis=[0, 0])
    res = OP("flatten2").infer(_s((2, 3, 4)), axis=2)
    _same(res["Out"], (6, 4), lod=0)
    _xshape_ok(res, (2, 3, 4))
    with pytest.raises(ValueError, match=r"^flatten2: axis 3 is out of range for X of shape "
                                         r"\[2, 3\] \(expected 0 <= axis <= 2\)$"):
        OP("flatten2").infer(_s((2, 3)), axis=3)


def test_flatten2_forward_of_empty_tensors():
    f = OP("flatten2")
    assert f.forward(np.zeros((0, 3, 4)), axis=1)["Out"].shape == (0, 12)
    assert f.forward(np.zeros((3, 0, 4)), axis=1)["Out"].shape == (3, 0)
    assert f.forward(np.zeros((3, 0, 4)), axis=2)["Out"].shape == (0, 4)
    assert f.forward(np.zeros((2, 3)), axis=0)["Out"].shape == (1, 6)
    out = f.forward(np.zeros((2, 3, 4)))
    assert out["Out"].shape == (2, 12) and out["XShape"].shape == (0, 2, 3, 4)


# -- second order through concat / stack with an input that carries no gradient --------------
def _second_order(join):
    """d/dw of mean(|d loss/dx|^2) for loss = sum(join([x w, c])^2 * k), c a constant without
    gradient: the double-grad rules of concat_grad / stack_grad must zero-fill c's missing
    entry. Checked against central differences (float64)."""
    import fluidlite as fluid
    L = fluid.layers
    w0 = np.arange(12.0).reshape(3, 4) / 10.0 - 0.5
    xv = np.array([[1.0, 2.0, 3.0], [0.5, -1.0, 2.0]])
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.data("x", [3], dtype="float64")
        x.stop_gradient = False
        w = L.create_parameter([3, 4], "float64", name="w",
                               default_initializer=fluid.initializer.NumpyArrayInitializer(w0))
        h = L.matmul(x, w)
        c = L.fill_constant([2, 4], "float64", 0.7)
        c.stop_gradient = True
        j = join(h, c)
        loss = L.reduce_sum(L.elementwise_mul(j, j))
        g, = fluid.gradients(loss, x)
        penalty = L.reduce_sum(L.elementwise_mul(g, g))
        gw, = fluid.gradients(penalty, w)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    got = exe.run(main, feed={"x": xv}, fetch_list=[gw], scope=scope)[0]
    # closed form: loss = 2 |x w|^2 (+ const) -> g = 4 x w w^T... computed numerically here
    def pen(wv):
        gx = 2.0 * (2.0 * (xv @ wv)) @ wv.T          # each of the 2 copies of h adds 2 h w^T
        return float((gx * gx).sum())
    num = np.zeros_like(w0)
    for i in np.ndindex(*w0.shape):
        wp, wm = w0.copy(), w0.copy()
        wp[i] += 1e-6
        wm[i] -= 1e-6
        num[i] = (pen(wp) - pen(wm)) / 2e-6
    np.testing.assert_allclose(got, num, rtol=1e-6, atol=1e-8)
    return main


@pytest.mark.parametrize("how", ["concat0", "concat1", "stack0", "stack2"])
def test_second_order_through_joins_with_a_constant_input(how):
    import fluidlite as fluid
    L = fluid.layers

    def join(h, c):
        hh = L.scale(h, 1.0)                 # two uses of h, one constant between them
        if how.startswith("concat"):
            return L.concat([h, c, hh], axis=int(how[-1]))
        return L.stack([h, c, hh], axis=int(how[-1]))
    _second_order(join)


def test_reshape2_forward_with_run_time_shapes_and_xshape_dtypes():
    r = OP("reshape2")
    x = np.arange(12, dtype=np.float16).reshape(4, 3)
    out = r.forward(x, np.array([2, 0, -1], np.int32), [], shape=[12])
    assert out["Out"].shape == (2, 3, 2) and out["XShape"].dtype == np.float16
    assert out["XShape"].shape == (0, 4, 3)
    out = r.forward(x, None, [np.array([6], np.int64), np.array([-1], np.int32)], shape=[12])
    assert out["Out"].shape == (6, 2)
    for op, kw in (("squeeze2", {"axes": []}), ("transpose2", {"axis": [1, 0]}),
                   ("flatten2", {})):
        assert OP(op).forward(x, **kw)["XShape"].dtype == np.float16


def test_stack_lowered_default_axis_and_backward_with_a_negative_axis():
    st = OP("stack")
    a, b = _arr((2, 3)), _arr((2, 3), 1)
    np.testing.assert_array_equal(st.lower([[_s((2, 3))] * 2], {})([a, b]), np.stack([a, b]))
    np.testing.assert_array_equal(st.forward([a, b])["Y"], np.stack([a, b]))
    dy = _arr((2, 3, 4), 2)
    got = st.backward(dy, axis=-1)["X"]
    assert len(got) == 4
    for i, g in enumerate(got):
        np.testing.assert_array_equal(g, dy[:, :, i])
    got = st.backward(dy)["X"]                            # fluid's default axis 0
    assert len(got) == 2 and got[1].shape == (3, 4)


def test_concat_backward_with_an_axis_tensor():
    c = OP("concat")
    a, b = _arr((2, 3)), _arr((2, 1), 1)
    d = _arr((2, 4), 2)
    ga, gb = c.backward([a, b], np.array([1], np.int64), d)["X"]
    np.testing.assert_array_equal(ga, d[:, :3])
    np.testing.assert_array_equal(gb, d[:, 3:])
    ga, gb = c.backward([_arr((1, 2)), _arr((3, 2))], None, _arr((4, 2), 3))["X"]  # default 0
    assert ga.shape == (1, 2) and gb.shape == (3, 2)


def test_second_order_through_concat_with_an_axis_tensor():
    import fluidlite as fluid
    L = fluid.layers

    def join(h, c):
        axis = L.fill_constant([1], "int32", 1)
        return L.concat([h, c, L.scale(h, 1.0)], axis=axis)
    main = _second_order(join)
    # the double-grad concat keeps reading the run-time axis
    cats = [op for op in main.global_block().ops if op.type == "concat"]
    assert len(cats) >= 2 and all(op.inputs.get("AxisTensor") for op in cats)


def test_split_with_an_axis_tensor_has_the_gradient_of_its_pieces():
    import fluidlite as fluid
    L = fluid.layers
    xv = np.arange(12.0).reshape(2, 6) / 5.0 - 1.0
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.data("x", [6], dtype="float64")
        x.stop_gradient = False
        dim = L.fill_constant([1], "int32", 1)
        a, b = L.split(x, 2, dim=dim)
        loss = L.reduce_sum(L.elementwise_mul(a, a)) + L.reduce_sum(b)
        g, = fluid.gradients(loss, x)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    got = exe.run(main, feed={"x": xv}, fetch_list=[g])[0]
    ref = np.concatenate([2.0 * xv[:, :3], np.ones((2, 3))], axis=1)   # d/dx of sum(a^2) + sum(b)
    np.testing.assert_allclose(got, ref, rtol=1e-15)
    grads = [op for op in main.global_block().ops if op.type == "concat"]
    assert grads and all(op.inputs.get("AxisTensor") for op in grads)
