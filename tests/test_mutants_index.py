"""Tests written from the mutation run of ``fluidlite/ops/index.py`` (issue 28,
docs/mutation.md): slice / strided_slice against Python's own slicing (fluid clamps starts and
ends like Python does; a negative stride's end -1 means "through index 0", fluid's "skip None
stop condition") for the output values, the scattered gradient and the shape inference, the
empty slices fluid refuses and every message; decrease_axis; run-time starts / ends / strides
as tensors and tensor lists; gather's kernel (``forward``; the OpTests take the lowered path),
its checks and overwrite semantics; expand's checks and run-time times; one_hot's checks,
depth tensor and dtype attribute; second-order gradients through slice, expand and gather with
their run-time inputs."""
import numpy as np
import pytest

from fluidlite.core.dtypes import VarType
from fluidlite.core.registry import VarSpec, get_op_def
from fluidlite.testing import OpTest

F32, I32, I64 = VarType.FP32, VarType.INT32, VarType.INT64
DIM = 5


def _spec(shape, dtype=F32, lod=0):
    return VarSpec(tuple(shape), dtype, lod)


def _python(s, e, st):
    """fluid's window on an axis of size DIM, from Python's slicing (a negative stride's end -1
    is fluid's "through index 0", Python's None)."""
    stop = None if (st < 0 and e == -1) else e
    return list(range(DIM))[s:stop:st]


_SLICES = [  # (start, end, stride): non-empty windows
    (0, 5, 1), (1, 3, 1), (-2, 10, 1), (-10, 2, 1), (2, -1, 1), (0, -4, 1), (3, 100, 1),
    (-1, 5, 1), (4, 5, 1), (0, 5, 2), (1, 5, 2), (0, 4, 3), (-4, -1, 2), (1, 2, 7),
    (4, -1, -1), (-1, -1, -1), (3, 0, -1), (10, 1, -2), (5, 1, -1), (2, -4, -1), (-2, -3, -1),
    (4, -2, -2), (0, -1, -1), (4, 0, -3), (1, -1, -1), (4, -10, -1), (3, -8, -2)]
_EMPTY = [(3, 2, 1), (3, 3, 1), (5, 10, 1), (0, -5, 1), (0, 0, 1), (2, -3, 1),
          (0, 0, -1), (1, 3, -1), (2, 2, -1), (-6, -1, -1), (3, 3, -2)]


@pytest.mark.parametrize("s,e,st", _SLICES)
def test_strided_slice_is_pythons_window(s, e, st):
    x = np.arange(3 * DIM, dtype=np.float64).reshape(3, DIM) * 1.5
    want = x[:, _python(s, e, st)]
    assert want.shape[1] > 0
    d = get_op_def("strided_slice")
    attrs = dict(axes=[1], starts=[s], ends=[e], strides=[st])
    none6 = (None,) * 6
    out = d.forward(x, *none6, **attrs)["Out"]
    np.testing.assert_array_equal(out, want)
    spec = d.infer(_spec(x.shape), None, None, None, [], [], [], **attrs)["Out"]
    assert tuple(spec.shape) == want.shape
    # the gradient scatters dOut back to the window; every other cell is 0
    g = np.arange(1, want.size + 1, dtype=np.float32).reshape(want.shape)
    dx = d.backward(x, *none6, g, **attrs)["Input"]
    ref = np.zeros(x.shape, np.float32)
    ref[:, _python(s, e, st)] = g
    np.testing.assert_array_equal(dx, ref)
    assert dx.dtype == np.float32
    if st == 1:             # slice: the same window
        d = get_op_def("slice")
        attrs = dict(axes=[1], starts=[s], ends=[e])
        np.testing.assert_array_equal(d.forward(x, None, None, [], [], **attrs)["Out"], want)
        spec = d.infer(_spec(x.shape), None, None, [], [], **attrs)["Out"]
        assert tuple(spec.shape) == want.shape
        dx = d.backward(x, None, None, [], [], g, **attrs)["Input"]
        np.testing.assert_array_equal(dx, ref)
        assert dx.dtype == np.float32


@pytest.mark.parametrize("s,e,st", _EMPTY)
def test_empty_windows_are_refused_naming_the_bounds(s, e, st):
    assert _python(s, e, st) == []
    x = np.zeros((2, DIM))
    d = get_op_def("strided_slice")
    attrs = dict(axes=[1], starts=[s], ends=[e], strides=[st])
    with pytest.raises(ValueError, match=rf"strided_slice: empty slice on a dim of size {DIM}: "
                                         rf"start -?\d+, end -?\d+"):
        d.forward(x, *(None,) * 6, **attrs)
    with pytest.raises(ValueError, match=r"strided_slice: empty slice"):
        d.infer(_spec(x.shape), None, None, None, [], [], [], **attrs)
    if st == 1:
        with pytest.raises(ValueError, match=rf"^slice: empty slice on a dim of size {DIM}"):
            get_op_def("slice").forward(x, None, None, [], [], axes=[1], starts=[s], ends=[e])


def test_empty_slice_messages_in_full():
    x = np.zeros((2, DIM))
    with pytest.raises(ValueError) as e:
        get_op_def("slice").forward(x, None, None, [], [], axes=[1], starts=[-2], ends=[2])
    assert str(e.value) == ("slice: empty slice on a dim of size 5: start 3, end 2 (fluid "
                            "requires end > start after clamping)")
    with pytest.raises(ValueError) as e:
        get_op_def("strided_slice").forward(x, *(None,) * 6, axes=[1], starts=[1], ends=[-2],
                                            strides=[-1])
    assert str(e.value) == ("strided_slice: empty slice on a dim of size 5: start 1, end 3, "
                            "stride -1")
    with pytest.raises(ValueError) as e:
        get_op_def("strided_slice").forward(x, *(None,) * 6, axes=[1], starts=[0], ends=[3],
                                            strides=[0])
    assert str(e.value) == "strided_slice: stride must not be zero"


# -- attribute checks ------------------------------------------------------------------------
@pytest.mark.parametrize("op,attrs,message", [
    ("slice", dict(axes=[0, 1], starts=[0], ends=[1, 2]),
     "slice: axes [0, 1], starts [0] and ends [1, 2] must have the same length"),
    ("slice", dict(axes=[0], starts=[0], ends=[1, 2]),
     "slice: axes [0], starts [0] and ends [1, 2] must have the same length"),
    ("strided_slice", dict(axes=[0, 1], starts=[0, 0], ends=[1, 2], strides=[1]),
     "strided_slice: strides [1] must have the length of axes [0, 1]"),
    ("slice", dict(axes=[1, -2], starts=[0, 0], ends=[1, 1]),
     "slice: axis 1 appears twice in axes [1, -2]"),
    ("slice", dict(axes=[3], starts=[0], ends=[1]),
     "slice: axes entry 3 is out of range for input of rank 3 (valid: -3..2)"),
    ("strided_slice", dict(axes=[-4], starts=[0], ends=[1], strides=[1]),
     "strided_slice: axes entry -4 is out of range for input of rank 3 (valid: -3..2)"),
    ("slice", dict(axes=[0], starts=[0], ends=[2], decrease_axis=[0]),
     "slice: decrease_axis 0 has size 2 after slicing; only size-1 dims can be removed"),
    ("strided_slice", dict(axes=[1], starts=[0], ends=[3], strides=[2], decrease_axis=[1]),
     "strided_slice: decrease_axis 1 has size 2 after slicing; only size-1 dims can be "
     "removed"),
    ("slice", dict(axes=[0], starts=[0], ends=[1], decrease_axis=[3]),
     "slice: decrease_axis entry 3 is out of range for input of rank 3 (valid: -3..2)"),
])
def test_attribute_checks_at_build_and_run_time(op, attrs, message):
    d = get_op_def(op)
    slots = 4 if op == "slice" else 6
    if op == "strided_slice":
        attrs.setdefault("strides", [1] * len(attrs["axes"]))
    with pytest.raises(ValueError) as e:
        d.infer(_spec((3, 4, 5)), *([None] * (slots // 2) + [[]] * (slots // 2)), **attrs)
    assert str(e.value) == message
    if "same length" in message or "length of axes" in message or "twice" in message:
        return                # build-time only
    with pytest.raises(ValueError) as e:
        d.forward(np.zeros((3, 4, 5)), *(None,) * slots, **attrs)
    assert str(e.value) == message


def test_a_dim_that_is_one_element_wide_is_dropped_by_decrease_axis():
    x = np.arange(60.0).reshape(3, 4, 5)
    d = get_op_def("slice")
    out = d.forward(x, None, None, [], [], axes=[0, 2], starts=[1, -1], ends=[2, 0],
                    decrease_axis=[0, 2])["Out"]
    np.testing.assert_array_equal(out, x[1, :, -1])
    spec = d.infer(_spec(x.shape), None, None, [], [], axes=[0, 2], starts=[1, -1], ends=[2, 0],
                   decrease_axis=[0, 2])["Out"]
    assert tuple(spec.shape) == (4,)
    # start -1, end 0 is x[-1] only on a decreased axis; elsewhere it is an empty window
    with pytest.raises(ValueError, match="empty slice"):
        d.forward(x, None, None, [], [], axes=[2], starts=[-1], ends=[0])
    with pytest.raises(ValueError, match="empty slice"):
        d.infer(_spec(x.shape), None, None, [], [], axes=[2], starts=[-1], ends=[0])
    # a decreased axis with an ordinary one-wide window keeps its window
    out = d.forward(x, None, None, [], [], axes=[1], starts=[2], ends=[3],
                    decrease_axis=[1])["Out"]
    np.testing.assert_array_equal(out, x[:, 2, :])
    dx = d.backward(x, None, None, [], [], np.ones((3, 5)), axes=[1], starts=[2], ends=[3],
                    decrease_axis=[1])["Input"]
    ref = np.zeros_like(x)
    ref[:, 2, :] = 1
    np.testing.assert_array_equal(dx, ref)
    # every dim decreased: a [1] result
    out = d.forward(x, None, None, [], [], axes=[0, 1, 2], starts=[0, 1, 2], ends=[1, 2, 3],
                    decrease_axis=[0, 1, 2])["Out"]
    assert out.shape == (1,) and out[0] == x[0, 1, 2]


def test_strided_slice_decrease_axis_and_x_minus_one():
    x = np.arange(60.0).reshape(3, 4, 5)
    d = get_op_def("strided_slice")
    attrs = dict(axes=[1], starts=[-1], ends=[0], strides=[1], decrease_axis=[1])
    np.testing.assert_array_equal(d.forward(x, *(None,) * 6, **attrs)["Out"], x[:, -1, :])
    g = np.arange(15.0).reshape(3, 5)
    ref = np.zeros_like(x)
    ref[:, -1, :] = g
    np.testing.assert_array_equal(d.backward(x, *(None,) * 6, g, **attrs)["Input"], ref)
    attrs = dict(axes=[1], starts=[2], ends=[0], strides=[-3], decrease_axis=[1])
    np.testing.assert_array_equal(d.forward(x, *(None,) * 6, **attrs)["Out"], x[:, 2, :])
    ref = np.zeros_like(x)
    ref[:, 2, :] = g
    np.testing.assert_array_equal(d.backward(x, *(None,) * 6, g, **attrs)["Input"], ref)


def test_unknown_and_zero_sized_dims_at_build_time():
    d = get_op_def("slice")
    # an unknown dim may be decreased (its size is checked at run time)
    spec = d.infer(_spec((-1, 4)), None, None, [], [], axes=[0], starts=[0], ends=[1],
                   decrease_axis=[0])["Out"]
    assert tuple(spec.shape) == (4,)
    # a window on a dim of size 0 is empty
    with pytest.raises(ValueError, match="slice: empty slice on a dim of size 0"):
        d.infer(_spec((0, 4)), None, None, [], [], axes=[0], starts=[0], ends=[1])


def test_x_minus_one_with_a_negative_decrease_axis():
    # decrease_axis entries count from the end like axes: [-1] is the last dim at run time too
    x = np.arange(24.0).reshape(2, 3, 4)
    d = get_op_def("slice")
    attrs = dict(axes=[2], starts=[-1], ends=[0], decrease_axis=[-1])
    out = d.forward(x, None, None, [], [], **attrs)["Out"]
    np.testing.assert_array_equal(out, x[:, :, -1])
    assert tuple(d.infer(_spec(x.shape), None, None, [], [], **attrs)["Out"].shape) == (2, 3)


def test_unknown_and_run_time_dims_in_the_shape_inference():
    d = get_op_def("slice")
    spec = d.infer(_spec((-1, 6, 5), F32, 2), None, None, [], [], axes=[0, 1], starts=[1, 1],
                   ends=[3, 4])["Out"]
    assert tuple(spec.shape) == (-1, 3, 5) and spec.dtype == F32 and spec.lod_level == 2
    for ins in ((_spec([1], I64), None, [], []), (None, _spec([1], I64), [], []),
                (None, None, [_spec([1], I64)], []), (None, None, [], [_spec([1], I64)])):
        spec = d.infer(_spec((4, 6, 5), VarType.FP64, 1), *ins, axes=[1], starts=[0],
                       ends=[1])["Out"]
        assert tuple(spec.shape) == (4, -1, 5)
        assert spec.dtype == VarType.FP64 and spec.lod_level == 1
    # the lengths of starts / ends are not checked when they come at run time
    d.infer(_spec((4, 6, 5)), _spec([2], I64), None, [], [], axes=[1, 2], starts=[], ends=[1, 1])
    d = get_op_def("strided_slice")
    for k in range(6):
        ins = [None, None, None, [], [], []]
        ins[k] = _spec([1], I64) if k < 3 else [_spec([1], I64)]
        spec = d.infer(_spec((4, 6, 5), VarType.INT64, 1), *ins, axes=[2], starts=[0], ends=[2],
                       strides=[1])["Out"]
        assert tuple(spec.shape) == (4, 6, -1), k
        assert spec.dtype == VarType.INT64 and spec.lod_level == 1
    d.infer(_spec((4, 6, 5)), None, None, _spec([2], I64), [], [], [], axes=[1, 2],
            starts=[0, 0], ends=[1, 1], strides=[])
    spec = d.infer(_spec((4, 6, 5)), None, None, None, [], [], [], axes=[0, 2], starts=[0, 4],
                   ends=[2, 0], strides=[1, -1])["Out"]
    assert tuple(spec.shape) == (2, 6, 4)


def _check_windows(d, x, attrs, cases):
    """Each (run-time inputs, window): the op's output is ``x[window]`` (Python's slicing)
    and its gradient scatters a ramp back into that window only."""
    for ins, window in cases:
        want = x[window]
        np.testing.assert_array_equal(d.forward(x, *ins, **attrs)["Out"], want)
        g = np.arange(1.0, want.size + 1).reshape(want.shape)
        ref = np.zeros_like(x)
        ref[window] = g
        np.testing.assert_array_equal(d.backward(x, *ins, g, **attrs)["Input"], ref)


def test_run_time_starts_ends_and_strides():
    x = np.arange(60.0).reshape(3, 4, 5)
    i64 = lambda *v: np.array(v, np.int64)
    d = get_op_def("slice")
    attrs = dict(axes=[1, 2], starts=[2, 1], ends=[3, 2])
    cases = [((i64(1, 0), None, [], []), np.s_[:, 1:3, 0:2]),
             ((None, i64(4, 2), [], []), np.s_[:, 2:4, 1:2]),
             ((None, None, [i64(0), i64(1)], []), np.s_[:, 0:3, 1:2]),
             ((None, None, [], [i64(3), i64(5)]), np.s_[:, 2:3, 1:5])]
    _check_windows(d, x, attrs, cases)
    d = get_op_def("strided_slice")
    attrs = dict(axes=[1, 2], starts=[0, 0], ends=[4, 5], strides=[1, 1])
    cases = [((i64(3, 4), None, None, [], [], []), np.s_[:, 3:4, 4:5]),
             ((None, i64(2, 3), None, [], [], []), np.s_[:, 0:2, 0:3]),
             ((None, None, i64(2, 3), [], [], []), np.s_[:, 0:4:2, 0:5:3]),
             ((None, None, None, [i64(1), i64(2)], [], []), np.s_[:, 1:4, 2:5]),
             ((None, None, None, [], [i64(1), i64(2)], []), np.s_[:, 0:1, 0:2]),
             ((None, None, None, [], [], [i64(3), i64(2)]), np.s_[:, 0:4:3, 0:5:2])]
    _check_windows(d, x, attrs, cases)


def _double(op, inputs, attrs, check):
    t = OpTest()
    t.op_type, t.inputs, t.outputs, t.attrs = op, inputs, {}, attrs
    t.check_double_grad(check, "Out")


def _grad_of_grad(build, x, feed, out_shape):
    """d/d(dOut) of sum(w * dX) where dX = gradients(out, x, dOut): the op's adjoint of the
    adjoint, i.e. the forward op applied to w (the ops here are linear in x)."""
    import fluidlite as fluid
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        xv = fluid.data("x", list(x.shape), "float64")
        xv.stop_gradient = False
        out = build(xv)
        dout = fluid.data("dout", list(out.shape), "float64")
        dout.stop_gradient = False
        gx, = fluid.gradients([out], [xv], target_gradients=[dout])
        w = fluid.data("w", list(x.shape), "float64")
        s = fluid.layers.reduce_sum(fluid.layers.elementwise_mul(gx, w))
        gd, = fluid.gradients([s], [dout])
    exe = fluid.Executor(fluid.CPUPlace())
    w_val = np.random.default_rng(2).standard_normal(x.shape)
    got, = exe.run(main, feed=dict(feed, x=x, w=w_val, dout=np.ones(out_shape)),
                   fetch_list=[gd], scope=fluid.Scope())
    return w_val, got


def test_second_order_gradients_keep_the_run_time_inputs():
    import fluidlite as fluid
    L = fluid.layers
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 4, 5))
    # slice with a StartsTensor: the double-grad slice must read the same run-time starts
    st = lambda: fluid.data("st", [2], "int64")
    w, got = _grad_of_grad(lambda v: L.slice(v, axes=[1, 2], starts=st(), ends=[4, 3]), x,
                           {"st": np.array([2, 1], np.int64)}, (3, 2, 2))
    np.testing.assert_allclose(got, w[:, 2:4, 1:3])
    sd = lambda: fluid.data("sd", [1], "int64")
    w, got = _grad_of_grad(lambda v: L.strided_slice(v, axes=[2], starts=[0], ends=[5],
                                                     strides=sd()), x,
                           {"sd": np.array([2], np.int64)}, (3, 4, 3))
    np.testing.assert_allclose(got, w[:, :, 0:5:2])
    et = lambda: fluid.data("et", [3], "int32")
    x2 = rng.standard_normal((2, 1, 3))
    w, got = _grad_of_grad(lambda v: L.expand(v, expand_times=et()), x2,
                           {"et": np.array([1, 3, 2], np.int32)}, (2, 3, 6))
    np.testing.assert_allclose(got, np.tile(w, (1, 3, 2)))
    _double("expand", {"X": x2}, {"expand_times": [2, 3, 1]}, ["X"])
    _double("gather", {"X": rng.standard_normal((4, 3)), "Index": np.array([3, 1], np.int64)},
            {}, ["X"])


# -- gather -----------------------------------------------------------------------------------
def test_gather_kernel_and_its_checks():
    x = np.arange(12.0, dtype=np.float32).reshape(4, 3)
    d = get_op_def("gather")
    for idx in (np.array([2, 0, 2], np.int64), np.array([[3], [1]], np.int32)):
        out = d.forward(x, idx)["Out"]
        np.testing.assert_array_equal(out, x[idx.reshape(-1)])
        assert set(d.forward(x, idx)) == {"Out"} and out.dtype == np.float32
    with pytest.raises(IndexError) as e:
        d.forward(x, np.array([1, -1, 7]))
    assert str(e.value) == ("gather: Index holds -1, outside [0, 4) (the rows of X); indices "
                            "are row numbers and do not wrap around")
    with pytest.raises(IndexError, match=r"gather: Index holds 4, outside \[0, 4\)"):
        d.forward(x, np.array([[4], [0]]))
    spec = d.infer(_spec((4, 3, 2), VarType.FP64), _spec((5, 1), I32))["Out"]
    assert tuple(spec.shape) == (5, 3, 2) and spec.dtype == VarType.FP64
    assert tuple(d.infer(_spec((4, 3)), _spec((-1, -1), I64))["Out"].shape) == (-1, 3)
    for bad in ((5, 2), (5, 1, 1)):
        with pytest.raises(ValueError) as e:
            d.infer(_spec((4, 3)), _spec(bad, I64))
        assert str(e.value) == f"gather: Index must be 1-D or [N, 1], got shape {list(bad)}"
    with pytest.raises(ValueError) as e:
        d.infer(_spec((4, 3)), _spec((5,), F32))
    assert str(e.value) == f"gather: Index must be int32 or int64, got {F32}"


def test_gather_gradient_of_a_repeated_index():
    x = np.zeros((4, 2))
    idx = np.array([1, 3, 1], np.int64)
    dout = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    d = get_op_def("gather")
    # overwrite (fluid's default): one update per row, the last one (ScatterAssign's order)
    np.testing.assert_array_equal(d.backward(x, idx, dout)["X"],
                                  [[0, 0], [5, 6], [0, 0], [3, 4]])
    np.testing.assert_array_equal(d.backward(x, idx, dout, overwrite=False)["X"],
                                  [[0, 0], [6, 8], [0, 0], [3, 4]])
    for ow in (True, False):        # dX has dOut's dtype
        gx = d.backward(x, idx, dout.astype(np.float32), overwrite=ow)["X"]
        assert gx.dtype == np.float32 and gx.shape == (4, 2)
    with pytest.raises(IndexError, match="gather: Index holds 4"):
        d.backward(x, np.array([4]), dout[:1])


# -- expand -----------------------------------------------------------------------------------
def test_expand_checks_and_run_time_times():
    d = get_op_def("expand")
    spec = d.infer(_spec((2, -1, 3), VarType.FP64, 1), None, [], expand_times=[2, 3, 1])["Out"]
    assert tuple(spec.shape) == (4, -1, 3) and spec.dtype == VarType.FP64
    assert spec.lod_level == 1
    for ins in ((_spec([3], I32), []), (None, [_spec([1], I32)] * 3)):
        spec = d.infer(_spec((2, 1, 3), F32, 2), *ins, expand_times=[])["Out"]
        assert tuple(spec.shape) == (-1, -1, -1) and spec.lod_level == 2
        assert spec.dtype == F32
    assert d.infer(_spec((2, 1, 3), F32), None, [], expand_times=[1, 2, 1])["Out"].dtype == F32
    with pytest.raises(ValueError) as e:
        d.infer(_spec((2, 1, 3)), None, [], expand_times=[2, 3])
    assert str(e.value) == ("expand: expand_times [2, 3] must have one entry per dim of X "
                            "(shape [2, 1, 3])")
    for bad in ([2, 0, 1], [1, 1, -1]):
        with pytest.raises(ValueError) as e:
            d.infer(_spec((2, 1, 3)), None, [], expand_times=bad)
        assert str(e.value) == f"expand: expand_times {bad} must be positive"
    d.infer(_spec((2, 1, 3)), None, [], expand_times=[1, 1, 1])
    assert tuple(d.infer(_spec((0, 2)), None, [], expand_times=[3, 2])["Out"].shape) == (0, 4)
    x = np.arange(6.0).reshape(2, 1, 3)
    for ins in ((np.array([2, 3, 1], np.int32), []),
                (None, [np.array([2], np.int32), np.array([3], np.int32),
                        np.array([1], np.int32)])):
        out = d.forward(x, *ins, expand_times=[1, 1, 1])["Out"]
        np.testing.assert_array_equal(out, np.tile(x, (2, 3, 1)))
        g = np.arange(out.size, dtype=np.float64).reshape(out.shape)
        want = sum(g[i * 2:(i + 1) * 2, j:j + 1, :] for i in range(2) for j in range(3))
        np.testing.assert_array_equal(d.backward(x, *ins, g, expand_times=[1, 1, 1])["X"], want)


# -- one_hot ----------------------------------------------------------------------------------
def test_one_hot_checks_specs_and_depth_tensor():
    d, d2 = get_op_def("one_hot"), get_op_def("one_hot_v2")
    spec = d.infer(_spec((4, 1), I64, 1), None, depth=6)["Out"]
    assert tuple(spec.shape) == (4, 6) and spec.dtype == F32 and spec.lod_level == 1
    spec = d.infer(_spec((4, -1), I32), None, depth=6, dtype=VarType.FP64)["Out"]
    assert tuple(spec.shape) == (4, 6) and spec.dtype == VarType.FP64
    spec = d.infer(_spec((4, 1), I64), _spec((1,), I32), depth=-1)["Out"]
    assert tuple(spec.shape) == (4, -1)
    # a depth tensor wins over the attribute: the depth is known only at run time
    assert tuple(d.infer(_spec((4, 1), I64), _spec((1,), I32), depth=3)["Out"].shape) == (4, -1)
    assert tuple(d2.infer(_spec((4,), I64), _spec((1,), I32), depth=3)["Out"].shape) == (4, -1)
    spec = d.infer(_spec((2, 3, 1), I64, 2), None, depth=5)["Out"]
    assert tuple(spec.shape) == (2, 3, 5) and spec.lod_level == 2
    spec = d2.infer(_spec((4, 3), I32, 1), None, depth=6)["Out"]
    assert tuple(spec.shape) == (4, 3, 6) and spec.dtype == F32 and spec.lod_level == 1
    spec = d2.infer(_spec((4,), I64), _spec((1,), I32), depth=-1, dtype=VarType.INT64)["Out"]
    assert tuple(spec.shape) == (4, -1) and spec.dtype == VarType.INT64
    for op, x, depth, msg in [
            (d, _spec((4, 2), I64), 3, "one_hot: the last dim of X must be 1, got shape [4, 2]"),
            (d, _spec((), I64), 3, "one_hot: the last dim of X must be 1, got shape []"),
            (d, _spec((4, 1), F32), 3, f"one_hot: X must be int32 or int64, got {F32}"),
            (d, _spec((4, 1), I64), 0, "one_hot: depth must be a positive int, got 0"),
            (d2, _spec((4, 1), F32), 3, f"one_hot_v2: X must be int32 or int64, got {F32}"),
            (d2, _spec((4,), I32), 0, "one_hot_v2: depth must be a positive int, got 0")]:
        with pytest.raises(ValueError) as e:
            op.infer(x, None, depth=depth)
        assert str(e.value) == msg
    d.infer(_spec((4, 1), I64), None, depth=1)
    d2.infer(_spec((4,), I64), None, depth=1)
    x = np.array([[2], [0], [1]], np.int64)
    out = d.forward(x, np.array([4], np.int32), depth=1)["Out"]
    np.testing.assert_array_equal(out, np.eye(4, dtype=np.float32)[[2, 0, 1]])
    assert out.dtype == np.float32
    out = d.forward(x, None, depth=3, dtype=VarType.INT32)["Out"]
    assert out.dtype == np.int32 and out.tolist() == np.eye(3, dtype=int)[[2, 0, 1]].tolist()
    out = d2.forward(np.array([1, 3], np.int32), np.array([5], np.int64), depth=2,
                     dtype=VarType.FP64)["Out"]
    assert out.dtype == np.float64 and out.tolist() == np.eye(5)[[1, 3]].tolist()
    with pytest.raises(ValueError) as e:
        d.forward(np.array([[1], [-2], [9]]), None, depth=4)
    assert str(e.value) == ("one_hot: index -2 is out of range [0, 4); pass "
                            "allow_out_of_range=True to map it to an all-zero row")
    out = d2.forward(np.array([[4, -1], [0, 3]]), None, depth=4, allow_out_of_range=True)["Out"]
    np.testing.assert_array_equal(out, [[[0, 0, 0, 0], [0, 0, 0, 0]],
                                        [[1, 0, 0, 0], [0, 0, 0, 1]]])
    with pytest.raises(ValueError, match=r"one_hot: index 4 is out of range \[0, 4\)"):
        d2.forward(np.array([4, 0]), None, depth=4)


def test_second_order_gradient_of_expand_with_a_tensor_list():
    import fluidlite as fluid
    x = np.random.default_rng(4).standard_normal((2, 1, 3))
    t = lambda n: fluid.data(n, [1], "int32")
    w, got = _grad_of_grad(lambda v: fluid.layers.expand(v, expand_times=[t("a"), t("b"), 1]),
                           x, {"a": np.array([2], np.int32), "b": np.array([3], np.int32)},
                           (4, 3, 3))
    np.testing.assert_allclose(got, np.tile(w, (2, 3, 1)))
