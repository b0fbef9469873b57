"""Tests written from the mutation run of ``fluidlite/ops/manip_extra.py`` (issue 28,
docs/mutation.md): roll's run-time ``ShiftsTensor`` (Paddle 2.x; forward, build-time length
checks, gradient), the attribute defaults of every op called directly (fluid 1.8's OpMakers:
unstack axis 0 / num 1, tril_triu diagonal 0 / lower true, diag_embed offset 0 / dim1 -2 /
dim2 -1, label_smooth epsilon 0), dtypes and LoD levels declared and kept, zero-sized and
unknown dims, missing upstream gradients (zeros), and every error message. References: NumPy
(np.roll, np.take, np.tril, np.meshgrid, np.tile) and loops written here."""
import numpy as np
import pytest

from fluidlite.core.registry import VarSpec, get_op_def
from fluidlite.testing import OpTest


def spec(*shape, dtype="float32", lod_level=0):
    return VarSpec(list(shape), dtype, lod_level)


def op(name):
    return get_op_def(name)


def raises(fn, msg):
    with pytest.raises(ValueError) as e:
        fn()
    assert str(e.value) == msg


X3 = OpTest.rand(2, 3, 4)


# -- roll -------------------------------------------------------------------------------------------
def test_roll_shifts_tensor_forward_with_and_without_dims():
    r = op("roll")
    out = r.forward(X3, np.array([2, -1], np.int64), dims=[0, 2])["Out"]
    np.testing.assert_array_equal(out, np.roll(X3, (2, -1), (0, 2)))
    out = r.forward(X3, np.array([[5]], np.int32))["Out"]          # flattened roll
    np.testing.assert_array_equal(out, np.roll(X3.reshape(-1), 5).reshape(X3.shape))
    # the tensor wins over the attribute
    out = r.forward(X3, np.array([1], np.int64), shifts=[7], dims=[1])["Out"]
    np.testing.assert_array_equal(out, np.roll(X3, 1, 1))
    raises(lambda: r.forward(X3, np.array([1, 2], np.int64), dims=[1]),
           "roll: ShiftsTensor holds 2 shift(s) but dims is [1]; give one shift per dim "
           "(one without dims)")
    raises(lambda: r.forward(X3, np.array([1, 2], np.int64)),
           "roll: ShiftsTensor holds 2 shift(s) but dims is []; give one shift per dim "
           "(one without dims)")


def test_roll_build_time_checks():
    r, x = op("roll"), spec(2, 3, 4)
    assert r.infer(x, spec(2, dtype="int64"), dims=[0, 1])["Out"] is x
    # a 2-D or unknown-length tensor: the count is unknown, any dims accepted
    r.infer(x, spec(2, 1, dtype="int64"), dims=[0, 1])
    r.infer(x, spec(2, 1, dtype="int64"))
    r.infer(x, spec(-1, dtype="int64"), dims=[0, 1, 2])
    r.infer(x, spec(1, dtype="int64"))
    raises(lambda: r.infer(x, spec(2, dtype="int64"), dims=[0]),
           "roll: shifts 2 and dims [0] must have the same length")
    raises(lambda: r.infer(x, spec(2, dtype="int64")),
           "roll: without dims, shifts must hold one value (the flattened tensor is rolled), "
           "but received []")
    raises(lambda: r.infer(x, None, shifts=[1, 2], dims=[0]),
           "roll: shifts [1, 2] and dims [0] must have the same length")
    raises(lambda: r.infer(x, None, shifts=[1, 2]),
           "roll: without dims, shifts must hold one value (the flattened tensor is rolled), "
           "but received [1, 2]")
    raises(lambda: r.infer(x, None, shifts=[1], dims=[3]),
           "roll: dims entry 3 is out of range for input of rank 3 (valid: -3..2)")


class TestRollShiftsTensorGradient(OpTest):
    """The gradient rolls dOut back by the run's shifts, negated (a scale of the tensor)."""
    op_type = "roll"

    def test_grad(self):
        self.inputs = {"X": X3, "ShiftsTensor": np.array([2, -3], np.int64)}
        self.attrs = {"shifts": [0, 0], "dims": [1, 2]}
        self.outputs = {"Out": np.roll(X3, (2, -3), (1, 2))}
        self.check_output()
        self.check_grad(["X"], "Out")


# -- unstack ----------------------------------------------------------------------------------------
def test_unstack_defaults_messages_dtypes_and_missing_gradients():
    u = op("unstack")
    x = OpTest.rand(1, 3)
    (piece,) = u.forward(x)["Y"]                       # axis 0, num 1
    np.testing.assert_array_equal(piece, x[0])
    out = u.infer(spec(1, 3, dtype="float16"))["Y"]
    assert len(out) == 1 and list(out[0].shape) == [3] and out[0].dtype == np.float16
    raises(lambda: u.infer(spec(2, 3, 4), axis=1, num=2),
           "unstack: num (2) must equal the size 3 of axis 1 of X (shape [2, 3, 4])")
    raises(lambda: u.infer(spec(0, 3), num=1),
           "unstack: num (1) must equal the size 0 of axis 0 of X (shape [0, 3])")
    assert len(u.infer(spec(-1, 3), num=4)["Y"]) == 4
    msg = "unstack: axis 3 is out of range for input of rank 3 (valid: -3..2)"
    raises(lambda: u.infer(spec(2, 3, 4), axis=3, num=1), msg)
    raises(lambda: u.forward(X3, axis=3), msg)
    d = [np.full((2, 4), 1.0, np.float32), None, np.full((2, 4), 3.0, np.float32)]
    raises(lambda: u.backward(X3.astype(np.float32), d, axis=3), msg)
    dx = u.backward(X3.astype(np.float32), d, axis=1, num=3)["X"]
    assert dx.dtype == np.float32 and dx.shape == (2, 3, 4)
    np.testing.assert_array_equal(dx[:, 1], 0)
    np.testing.assert_array_equal(dx[:, 2], 3)
    dx0 = u.backward(x, [None])["X"]                    # default axis 0
    assert dx0.shape == (1, 3) and not dx0.any()


# -- flip / reverse ---------------------------------------------------------------------------------
def test_flip_and_reverse_messages_at_run_time_and_default_dims():
    x = spec(2, 3)
    assert op("flip").infer(x)["Out"] is x                 # no dims attribute: nothing flipped
    np.testing.assert_array_equal(op("flip").forward(X3)["Out"], X3)
    raises(lambda: op("flip").forward(X3, dims=[3]),
           "flip: dims entry 3 is out of range for input of rank 3 (valid: -3..2)")
    raises(lambda: op("reverse").forward(X3, axis=[-4]),
           "reverse: axis entry -4 is out of range for input of rank 3 (valid: -3..2)")
    raises(lambda: op("reverse").forward(X3, axis=[1, -2]),
           "reverse: axis [1, -2] names an axis twice")


# -- expand_as --------------------------------------------------------------------------------------
def test_expand_as_checks_dtype_lod_and_zero_sizes():
    e = op("expand_as")
    out = e.infer(spec(2, 3, dtype="float16", lod_level=1), spec(4, 6))["Out"]
    assert list(out.shape) == [4, 6] and out.dtype == np.float16 and out.lod_level == 1
    raises(lambda: e.infer(spec(2, 3), spec(4, 6, 1)),
           "expand_as: target_tensor must have the rank of X, but X has shape [2, 3] and "
           "target_tensor [4, 6, 1]")
    # a 0 or unknown dim of X is not checked at build time
    assert list(e.infer(spec(0, 3), spec(0, 6))["Out"].shape) == [0, 6]
    assert list(e.infer(spec(-1, 3), spec(5, 6))["Out"].shape) == [5, 6]
    raises(lambda: e.forward(np.zeros((0, 3)), np.zeros((0, 6))),
           "expand_as: target_tensor.shape[0] = 0 is not a multiple of X.shape[0] = 0")
    raises(lambda: e.forward(np.zeros((2, 3)), np.zeros((4, 7))),
           "expand_as: target_tensor.shape[1] = 7 is not a multiple of X.shape[1] = 3")


# -- meshgrid ---------------------------------------------------------------------------------------
def test_meshgrid_messages_dtypes_and_missing_gradients():
    m = op("meshgrid")
    raises(lambda: m.infer([]), "meshgrid: X is empty; pass at least one 1-D Variable")
    raises(lambda: m.infer([spec(3), spec(2, 2)]),
           "meshgrid: every input must be 1-D, but input 1 has shape [2, 2]")
    outs = m.infer([spec(3, dtype="float16"), spec(2, dtype="float64")])["Out"]
    assert [o.dtype for o in outs] == [np.float16, np.float64]
    assert [list(o.shape) for o in outs] == [[3, 2], [3, 2]]
    a, b = OpTest.rand(3, seed=1), OpTest.rand(2, seed=2)
    d1 = OpTest.rand(3, 2, seed=3)
    ga, gb = m.backward([a, b], [None, d1])["X"]
    assert ga.shape == (3,) and ga.dtype == a.dtype and not ga.any()
    np.testing.assert_allclose(gb, d1.sum(axis=0), rtol=1e-12)
    ga, gb = m.backward([a, b], [d1, None])["X"]
    np.testing.assert_allclose(ga, d1.sum(axis=1), rtol=1e-12)
    assert gb.shape == (2,) and gb.dtype == b.dtype and not gb.any()


# -- tril_triu --------------------------------------------------------------------------------------
def test_tril_triu_defaults_and_message():
    t = op("tril_triu")
    x = OpTest.rand(3, 4)
    np.testing.assert_array_equal(t.forward(x)["Out"], np.tril(x, 0))
    raises(lambda: t.infer(spec(3)),
           "tril_triu: X must have at least 2 dims, but its shape is [3]")


# -- diag_embed -------------------------------------------------------------------------------------
def _diag_embed_loop(a, offset, d1, d2):
    """Out[..., i, j, ...] with (i, j) in dims (d1, d2): a[..., k] where i = k + max(-offset,
    0), j = k + max(offset, 0)."""
    n = a.shape[-1]
    side = n + abs(offset)
    rank = a.ndim + 1
    d1, d2 = d1 % rank, d2 % rank
    lead = list(a.shape[:-1])
    shape, it = [], iter(lead)
    for i in range(rank):
        shape.append(side if i in (d1, d2) else next(it))
    out = np.zeros(shape, a.dtype)
    for idx in np.ndindex(*lead):
        for k in range(n):
            full, li = [], iter(idx)
            for i in range(rank):
                if i == d1:
                    full.append(k + max(-offset, 0))
                elif i == d2:
                    full.append(k + max(offset, 0))
                else:
                    full.append(next(li))
            out[tuple(full)] = a[idx + (k,)]
    return out


def test_diag_embed_defaults_three_dims_dtype_and_gradient():
    d = op("diag_embed")
    a = OpTest.rand(2, 3, 4).astype(np.float32)
    out = d.forward(a)["Out"]
    assert out.dtype == np.float32 and out.shape == (2, 3, 4, 4)
    np.testing.assert_array_equal(out, _diag_embed_loop(a, 0, -2, -1))
    for offset, d1, d2 in ((1, 0, 2), (-2, 3, 1), (0, -1, 0)):
        out = d.forward(a, offset=offset, dim1=d1, dim2=d2)["Out"]
        ref = _diag_embed_loop(a, offset, d1, d2)
        np.testing.assert_array_equal(out, ref)
        spec_out = d.infer(spec(2, 3, 4, dtype="float16"), offset=offset, dim1=d1,
                           dim2=d2)["Out"]
        assert list(spec_out.shape) == list(ref.shape) and spec_out.dtype == np.float16
        g = OpTest.rand(*ref.shape, seed=5)
        back = d.backward(a, g, offset=offset, dim1=d1, dim2=d2)["Input"]
        # the adjoint: <embed(a), g> = <a, grad>
        np.testing.assert_allclose(float((back * a).sum()), float((ref * g).sum()), rtol=1e-5)
    assert list(d.infer(spec(2, 3, 4))["Out"].shape) == [2, 3, 4, 4]
    a4 = OpTest.rand(2, 3, 2, 3, seed=7)             # three leading dims
    for offset, d1, d2 in ((0, -2, -1), (1, 1, 3)):
        np.testing.assert_array_equal(d.forward(a4, offset=offset, dim1=d1, dim2=d2)["Out"],
                                      _diag_embed_loop(a4, offset, d1, d2))
    np.testing.assert_array_equal(d.backward(a, d.forward(a)["Out"])["Input"], a)
    # an empty or unknown last dim
    assert list(d.infer(spec(2, 3, 0), offset=2)["Out"].shape) == [2, 3, 2, 2]
    assert list(d.infer(spec(2, 3, -1), offset=2)["Out"].shape) == [2, 3, -1, -1]


def test_diag_embed_messages():
    d = op("diag_embed")
    raises(lambda: d.infer(spec(2, 3), dim1=3),
           "diag_embed: dim1 3 is out of range for input of rank 3 (valid: -3..2)")
    raises(lambda: d.forward(X3, dim2=-5),
           "diag_embed: dim2 -5 is out of range for input of rank 4 (valid: -4..3)")
    raises(lambda: d.backward(X3, np.zeros((2, 3, 4, 4)), dim1=1, dim2=-3),
           "diag_embed: dim1 (1) and dim2 (-3) must name different dims of the output (rank 4)")


# -- label_smooth -----------------------------------------------------------------------------------
def test_label_smooth_prior_checks_defaults_and_dtype():
    ls = op("label_smooth")
    ls.infer(spec(2, 3, 4), spec(1, 4))
    ls.infer(spec(2, 3, 4), spec(1, -1))
    raises(lambda: ls.infer(spec(2, 3, 4), spec(1, 1)),
           "label_smooth: PriorDist must have X's last dim (4), but its shape is [1, 1]")
    raises(lambda: ls.infer(spec(2, 4, 3), spec(1, 4)),
           "label_smooth: PriorDist must have X's last dim (3), but its shape is [1, 4]")
    x = np.eye(4, dtype=np.float32)[[0, 2]]
    np.testing.assert_array_equal(ls.forward(x, None)["Out"], x)             # epsilon 0
    x3 = np.eye(4)[[[0, 1, 3], [2, 2, 0]]].astype(np.float32)              # [2, 3, 4]
    out = ls.forward(x3, None, epsilon=0.2)["Out"]
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, 0.8 * x3 + 0.2 / 4, rtol=1e-6)
    out = ls.forward(x3, np.array([[0.1, 0.2, 0.3, 0.4]]), epsilon=0.5)["Out"]
    assert out.dtype == np.float32


class TestLabelSmoothDefaultGradient(OpTest):
    """Without attributes (epsilon 0) the gradient is dOut itself."""
    op_type = "label_smooth"

    def test_grad(self):
        x = self.rand(3, 4)
        self.inputs = {"X": x}
        self.attrs = {}
        self.outputs = {"Out": x}
        self.check_output()
        self.check_grad(["X"], "Out")


# -- second order when only some pieces need a gradient -----------------------------------------------
def _run(prog, feed, fetch):
    import fluidlite as fluid
    return fluid.Executor(fluid.CPUPlace()).run(prog, feed=feed, fetch_list=fetch)


def test_unstack_second_order_with_an_unused_piece():
    """x@GRAD = stack(d0, 0, d2) when only pieces 0 and 2 reach the loss; its gradient w.r.t.
    d0 / d2 (the double-grad unstack, whose output for the unused piece is a throw-away) is
    w[:, 0] / w[:, 2]."""
    import fluidlite as fluid
    from fluidlite import backward
    prog, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(prog, start):
        x = fluid.data("x", [2, 3, 2], "float64")
        x.stop_gradient = False
        ys = fluid.layers.unstack(x, axis=1)
        d0 = fluid.data("d0", [2, 2], "float64")
        d2 = fluid.data("d2", [2, 2], "float64")
        d0.stop_gradient = d2.stop_gradient = False
        (gx,) = backward.gradients([ys[0], ys[2]], [x], target_gradients=[d0, d2])
        w = fluid.data("w", [2, 3, 2], "float64")
        second = backward.gradients([gx], [d0, d2], target_gradients=[w])
    rng = np.random.default_rng(0)
    feed = {"x": rng.normal(size=(2, 3, 2)), "d0": rng.normal(size=(2, 2)),
            "d2": rng.normal(size=(2, 2)), "w": rng.normal(size=(2, 3, 2))}
    g, s0, s2 = _run(prog, feed, [gx] + second)
    np.testing.assert_array_equal(g, np.stack([feed["d0"], np.zeros((2, 2)), feed["d2"]], 1))
    np.testing.assert_array_equal(s0, feed["w"][:, 0])
    np.testing.assert_array_equal(s2, feed["w"][:, 2])
    assert "@EMPTY@" not in {n for op in prog.global_block().ops
                             for n in op.output_arg_names}


def test_meshgrid_second_order_when_one_input_needs_no_gradient():
    """a@GRAD = sum over b's dim of da; its gradient w.r.t. da is w broadcast along that dim,
    w.r.t. db zero (b's ddX is a zero fill)."""
    import fluidlite as fluid
    from fluidlite import backward
    prog, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(prog, start):
        a = fluid.data("a", [3], "float64")
        b = fluid.data("b", [2], "float64")
        a.stop_gradient = b.stop_gradient = False
        ga, gb = fluid.layers.meshgrid([a, b])
        da = fluid.data("da", [3, 2], "float64")
        db = fluid.data("db", [3, 2], "float64")
        da.stop_gradient = db.stop_gradient = False
        (grad_a,) = backward.gradients([ga, gb], [a], target_gradients=[da, db])
        w = fluid.data("w", [3], "float64")
        second = backward.gradients([grad_a], [da, db], target_gradients=[w])
    rng = np.random.default_rng(1)
    feed = {"a": rng.normal(size=3), "b": rng.normal(size=2), "da": rng.normal(size=(3, 2)),
            "db": rng.normal(size=(3, 2)), "w": rng.normal(size=3)}
    fetch = [grad_a] + [s for s in second if s is not None]
    got = _run(prog, feed, fetch)
    np.testing.assert_allclose(got[0], feed["da"].sum(axis=1), rtol=1e-12)
    np.testing.assert_array_equal(got[1], np.broadcast_to(feed["w"][:, None], (3, 2)))
    if second[1] is not None:
        np.testing.assert_array_equal(got[2], np.zeros((3, 2)))
