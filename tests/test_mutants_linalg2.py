"""Tests written from mutation testing (issue 28, docs/mutation.md, round 11) for
``fluidlite/ops/linalg2.py`` (paddle.linalg's matrix ops): the shape inference of every op
(unknown -1 dims, batch broadcasting, vector right-hand sides, the square-matrix and mv errors
with their messages), float32 kernels keeping float32 (values and gradients), and every
gradient rule -- each attribute combination, matrix_power's n = 0 / 1 / negative, cholesky's
``upper``, multi_dot's vector ends and operand counts, solve / triangular_solve with broadcast
batches -- against float64 central differences of NumPy's linalg (the references below: a
triangular solve's matrix read through its triangle, so its gradient is the triangle's and 0
on a unit diagonal; cholesky's input perturbed symmetrically, the symmetrised gradient, as
Paddle 2.6 and PyTorch give) with random upstream weights, and NumPy's linalg for the
values."""
import numpy as np
import pytest

from fluidlite.core.dtypes import VarType
from fluidlite.core.registry import VarSpec, get_op_def

F32, F64 = VarType.FP32, VarType.FP64


def _rng(seed):
    return np.random.default_rng(seed)


def _u(seed, *shape):
    return _rng(seed).uniform(-1, 1, shape)


def _well(seed, *shape):
    return _u(seed, *shape) + 3 * np.eye(shape[-1])


def _spd(seed, *shape):
    a = _u(seed, *shape)
    return a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])


def _grads(f, arrays, w_seed=7, h=1e-6, sym=()):
    """f(*arrays) -> output; returns (out, W, [d sum(out * W) / d array]) by float64 central
    differences (arrays listed in ``sym`` are perturbed symmetrically: a pair at once)."""
    out = np.asarray(f(*arrays))
    w = _rng(w_seed).standard_normal(out.shape)
    grads = []
    for k, a in enumerate(arrays):
        g = np.zeros_like(a)
        for idx in np.ndindex(a.shape):
            if k in sym and idx[-1] > idx[-2]:
                continue
            val = []
            for sgn in (1, -1):
                args = [x.copy() for x in arrays]
                args[k][idx] += sgn * h
                if k in sym and idx[-1] != idx[-2]:
                    args[k][idx[:-2] + (idx[-1], idx[-2])] += sgn * h
                val.append((np.asarray(f(*args)) * w).sum())
            g[idx] = (val[0] - val[1]) / (2 * h)
        if k in sym:                  # a pair's derivative is split evenly between the two
            off = np.tril(np.ones(a.shape[-2:]), -1).astype(bool)
            g = np.where(off, g / 2, g)
            g = g + np.swapaxes(np.where(off, g, 0), -1, -2)
        grads.append(g)
    return out, w, grads


def _close(got, want):
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


def spec(shape, dtype=F64):
    return VarSpec(tuple(shape), dtype)


# -- the square-matrix check and inference ------------------------------------------------
@pytest.mark.parametrize("op_type,slot", [("inverse", "Input"), ("determinant", "Input"),
                                          ("slogdeterminant", "Input"), ("matrix_power", "X"),
                                          ("cholesky", "X")])
def test_square_check_message_and_unknown_dims(op_type, slot):
    op = get_op_def(op_type)
    for bad in ((2, 3), (3,), (4, 2, 3)):
        with pytest.raises(ValueError) as e:
            op.infer(spec(bad))
        assert str(e.value) == (f"{op_type}: {slot} must be a (batch of) square matrices "
                                f"[..., n, n], got {list(bad)}")
    for ok in ((3, 3), (-1, 3), (3, -1), (2, -1, -1), (-1, 4, 4)):
        op.infer(spec(ok))
    with pytest.raises(ValueError, match="square"):
        op.infer(spec((-1, 2, 3)))                 # an unknown batch dim is not a matrix dim


def test_inference_shapes_and_dtypes():
    x = spec((2, 5, 3, 3), F32)
    assert get_op_def("inverse").infer(x) == {"Output": x}
    assert get_op_def("determinant").infer(x) == {"Out": spec((2, 5), F32)}
    assert get_op_def("determinant").infer(spec((3, 3))) == {"Out": spec(())}
    assert get_op_def("slogdeterminant").infer(x) == {"Out": spec((2, 2, 5), F32)}
    assert get_op_def("slogdeterminant").infer(spec((-1, 3, 3))) == {"Out": spec((2, -1))}
    assert get_op_def("matrix_power").infer(x, n=-3) == {"Out": x}
    assert get_op_def("matrix_power").infer(x) == {"Out": x}
    assert get_op_def("cholesky").infer(x, upper=True) == {"Out": x}
    assert get_op_def("cholesky").infer(x) == {"Out": x}


def test_mv_inference_and_errors():
    mv = get_op_def("mv")
    assert mv.infer(spec((3, 4), F32), spec((4,), F32)) == {"Out": spec((3,), F32)}
    assert mv.infer(spec((-1, 4)), spec((4,))) == {"Out": spec((-1,))}
    assert mv.infer(spec((3, -1)), spec((4,))) == {"Out": spec((3,))}
    assert mv.infer(spec((3, 4)), spec((-1,))) == {"Out": spec((3,))}
    for xs, vs in (((3, 4), (5,)), ((2, 3, 4), (4,)), ((3, 4), (4, 1)), ((4,), (4,))):
        with pytest.raises(ValueError) as e:
            mv.infer(spec(xs), spec(vs))
        assert str(e.value) == (f"mv: X must be [m, n] and Vec [n], got {list(xs)} and "
                                f"{list(vs)}")


def test_multi_dot_inference():
    md = get_op_def("multi_dot")
    assert md.infer([spec((4,), F32), spec((4, 3), F32), spec((3, 2), F32)]) == \
        {"Out": spec((2,), F32)}
    assert md.infer([spec((5, 4)), spec((4, 3)), spec((3,))]) == {"Out": spec((5,))}
    assert md.infer([spec((4,)), spec((4,))]) == {"Out": spec(())}
    assert md.infer([spec((-1, 4)), spec((4, 7))]) == {"Out": spec((-1, 7))}
    with pytest.raises(ValueError) as e:
        md.infer([spec((2, 2))])
    assert str(e.value) == "multi_dot: needs at least 2 operands, got 1"


def test_solve_inference():
    s = get_op_def("solve")
    assert s.infer(spec((2, 3, 3), F32), spec((3, 2), F32)) == {"Out": spec((2, 3, 2), F32)}
    assert s.infer(spec((3, 3)), spec((3,))) == {"Out": spec((3,))}
    assert s.infer(spec((2, 3, 3)), spec((2, 3))) == {"Out": spec((2, 3))}      # vectors
    assert s.infer(spec((2, 5, 3, 3)), spec((2, 5, 3))) == {"Out": spec((2, 5, 3))}
    assert s.infer(spec((3, 3)), spec((4, 1, 3, 5))) == {"Out": spec((4, 1, 3, 5))}
    assert s.infer(spec((2, 1, 3, 3)), spec((5, 3, 4))) == {"Out": spec((2, 5, 3, 4))}
    assert s.infer(spec((-1, 3, 3)), spec((3, 4))) == {"Out": spec((-1, 3, 4))}
    assert s.infer(spec((3, 3)), spec((2, -1, 3, 4))) == {"Out": spec((-1, -1, 3, 4))}
    with pytest.raises(ValueError, match=r"solve: X must be a \(batch of\) square"):
        s.infer(spec((3, 2)), spec((3, 1)))


def test_triangular_solve_inference():
    t = get_op_def("triangular_solve")
    assert t.infer(spec((3, 3), F32), spec((3, 2), F32)) == {"Out": spec((3, 2), F32)}
    assert t.infer(spec((2, 1, 3, 3)), spec((5, 3, 4))) == {"Out": spec((2, 5, 3, 4))}
    assert t.infer(spec((3, 3)), spec((-1, 3, 4))) == {"Out": spec((-1, 3, 4))}
    assert t.infer(spec((-1, 2, 3, 3)), spec((3, 4))) == {"Out": spec((-1, -1, 3, 4))}
    with pytest.raises(ValueError, match=r"triangular_solve: X must be a \(batch of\)"):
        t.infer(spec((3, 2)), spec((3, 1)))


# -- values and gradients against central differences --------------------------------------
def test_inverse_determinant_slogdet_gradients():
    a = _well(1, 2, 3, 3)
    a[1] = -a[1]                                           # a negative determinant too
    out, w, (ga,) = _grads(np.linalg.inv, [a])
    inv = get_op_def("inverse")
    o = inv.forward(a)["Output"]
    np.testing.assert_allclose(o, out, rtol=1e-12, atol=1e-13)
    _close(inv.backward(o, w)["Input"], ga)

    out, w, (ga,) = _grads(np.linalg.det, [a])
    det = get_op_def("determinant")
    o = det.forward(a)["Out"]
    np.testing.assert_allclose(o, out, rtol=1e-12)
    _close(det.backward(a, o, w)["Input"], ga)

    out, w, (ga,) = _grads(lambda t: np.stack(np.linalg.slogdet(t)), [a])
    sl = get_op_def("slogdeterminant")
    o = sl.forward(a)["Out"]
    assert o.shape == (2, 2) and o[0].tolist() == [1.0, -1.0]
    np.testing.assert_allclose(o, out, rtol=1e-12)
    _close(sl.backward(a, w)["Input"], ga)


def _power(t, n):
    return np.linalg.matrix_power(np.linalg.inv(t) if n < 0 else t, abs(n))


@pytest.mark.parametrize("n", [0, 1, 2, 3, -1, -3])
def test_matrix_power_values_and_gradients(n):
    a = _well(2, 2, 3, 3) * 0.5
    out, w, (ga,) = _grads(lambda t: _power(t, n), [a])
    mp = get_op_def("matrix_power")
    np.testing.assert_allclose(mp.forward(a, n=n)["Out"], out, rtol=1e-11, atol=1e-12)
    _close(mp.backward(a, w, n=n)["X"], ga)
    assert mp.backward(a, w, n=n)["X"].shape == a.shape
    if n == 1:
        np.testing.assert_array_equal(mp.forward(a)["Out"], a)       # the default n
        np.testing.assert_array_equal(mp.backward(a, w)["X"], w)


def test_matrix_power_zero_of_a_singular_matrix_and_4d_batches():
    # X^0 = I for any X, a singular one too (Paddle 2.6: identity, gradient 0)
    sing = np.array([[1.0, 2.0], [2.0, 4.0]])
    mp = get_op_def("matrix_power")
    np.testing.assert_array_equal(mp.forward(sing, n=0)["Out"], np.eye(2))
    g = mp.backward(sing, np.ones((2, 2)), n=0)["X"]
    assert g.shape == (2, 2) and not g.any()
    a = _well(3, 2, 4, 3, 3) * 0.5                   # batch dims other than n
    for n in (2, -2):
        out, w, (ga,) = _grads(lambda t: _power(t, n), [a])
        _close(mp.backward(a, w, n=n)["X"], ga)


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_values_and_gradients(upper):
    a = _spd(3, 2, 4, 4)

    def f(t):
        low = np.linalg.cholesky(t)
        return np.swapaxes(low, -1, -2) if upper else low
    out, w, (ga,) = _grads(f, [a], sym=(0,))
    ch = get_op_def("cholesky")
    o = ch.forward(a, upper=upper)["Out"]
    np.testing.assert_allclose(o, out, rtol=1e-12, atol=1e-13)
    _close(ch.backward(o, w, upper=upper)["X"], ga)
    if not upper:
        np.testing.assert_array_equal(ch.forward(a)["Out"], o)            # the default
        np.testing.assert_array_equal(ch.backward(o, w)["X"],
                                      ch.backward(o, w, upper=False)["X"])


def test_cholesky_gradient_with_two_batch_dims():
    a = _spd(5, 2, 3, 4, 4)                          # batch dims 2, 3 other than n = 4
    out, w, (ga,) = _grads(np.linalg.cholesky, [a], sym=(0,))
    ch = get_op_def("cholesky")
    _close(ch.backward(ch.forward(a)["Out"], w)["X"], ga)


def test_cholesky_error_message():
    with pytest.raises(ValueError) as e:
        get_op_def("cholesky").forward(np.array([[1.0, 2.0], [2.0, 1.0]]))
    assert str(e.value) == ("cholesky: X must be symmetric positive-definite (the "
                            "factorization failed)")


def test_mv_values_and_gradients():
    x, v = _u(4, 3, 5), _u(5, 5)
    out, w, (gx, gv) = _grads(lambda a, b: a @ b, [x, v])
    mv = get_op_def("mv")
    np.testing.assert_allclose(mv.forward(x, v)["Out"], out, rtol=1e-12)
    g = mv.backward(x, v, w)
    _close(g["X"], gx)
    _close(g["Vec"], gv)


@pytest.mark.parametrize("shapes", [
    [(3, 4), (4, 2)], [(4,), (4, 3)], [(2, 4), (4,)], [(4,), (4,)],
    [(4,), (4, 3), (3, 2)], [(2, 4), (4, 3), (3,)], [(2, 4), (4, 3), (3, 5)],
    [(2, 4), (4, 3), (3, 5), (5, 2)], [(4,), (4, 3), (3, 5), (5,)],
    [(2, 3), (3, 4), (4, 5), (5, 2), (2, 3)]])
def test_multi_dot_values_and_gradients(shapes):
    xs = [_u(10 + i, *s) for i, s in enumerate(shapes)]

    def chain(*ms):                   # left to right with @ (1-D ends as NumPy's matmul)
        out = ms[0]
        for m in ms[1:]:
            out = out @ m
        return out
    out, w, gs = _grads(chain, xs)
    md = get_op_def("multi_dot")
    o = md.forward(xs)["Out"]
    assert o.shape == out.shape
    np.testing.assert_allclose(o, out, rtol=1e-12, atol=1e-13)
    got = md.backward(xs, w)["X"]
    assert len(got) == len(xs)
    for g, want, x in zip(got, gs, xs):
        assert g.shape == x.shape
        _close(g, want)


def _bsolve(a, b):
    """a^-1 b, b a (batch of) matrices, batch dims broadcast (the reference)."""
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = np.broadcast_to(a, batch + a.shape[-2:])
    b = np.broadcast_to(b, batch + b.shape[-2:])
    out = np.empty(batch + (a.shape[-1], b.shape[-1]))
    for idx in np.ndindex(*batch):
        out[idx] = np.linalg.solve(a[idx], b[idx])
    return out


@pytest.mark.parametrize("xs,ys", [((3, 3), (3,)), ((3, 3), (3, 2)), ((2, 3, 3), (2, 3)),
                                   ((2, 3, 3), (3, 2)), ((3, 3), (2, 3, 2)),
                                   ((2, 1, 3, 3), (4, 3, 1)), ((4, 3, 3), (4, 3, 3))])
def test_solve_values_and_gradients(xs, ys):
    x, y = _well(20, *xs), _u(21, *ys)
    vec = len(ys) == 1 or ys == xs[:-1]

    def f(a, b):
        return _bsolve(a, b[..., None])[..., 0] if vec else _bsolve(a, b)
    out, w, (gx, gy) = _grads(f, [x, y])
    s = get_op_def("solve")
    o = s.forward(x, y)["Out"]
    assert o.shape == out.shape
    np.testing.assert_allclose(o, out, rtol=1e-11, atol=1e-12)
    g = s.backward(x, y, o, w)
    assert g["X"].shape == x.shape and g["Y"].shape == y.shape
    _close(g["X"], gx)
    _close(g["Y"], gy)


@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize("transpose", [False, True])
@pytest.mark.parametrize("unit", [False, True])
@pytest.mark.parametrize("xs,ys", [((3, 3), (3, 2)), ((2, 3, 3), (3, 2)),
                                   ((3, 3), (2, 3, 4)), ((2, 1, 3, 3), (4, 3, 1))])
def test_triangular_solve_values_and_gradients(upper, transpose, unit, xs, ys):
    x, y = _well(30, *xs), _u(31, *ys)

    def f(a, b):
        n = a.shape[-1]
        t = np.triu(a) if upper else np.tril(a)
        if unit:
            t = np.where(np.eye(n, dtype=bool), 1.0, t)
        return _bsolve(np.swapaxes(t, -1, -2) if transpose else t, b)
    out, w, (gx, gy) = _grads(f, [x, y])
    t = get_op_def("triangular_solve")
    attrs = dict(upper=upper, transpose=transpose, unitriangular=unit)
    o = t.forward(x, y, **attrs)["Out"]
    np.testing.assert_allclose(o, out, rtol=1e-11, atol=1e-12)
    g = t.backward(x, y, o, w, **attrs)
    _close(g["X"], gx)
    _close(g["Y"], gy)
    if attrs == dict(upper=True, transpose=False, unitriangular=False):     # the defaults
        np.testing.assert_array_equal(t.forward(x, y)["Out"], o)
        np.testing.assert_array_equal(t.backward(x, y, o, w)["X"], g["X"])


# -- float32 stays float32 ----------------------------------------------------------------
def test_float32_kernels_keep_float32():
    f = np.float32
    a, spd = _well(40, 2, 3, 3).astype(f), _spd(41, 3, 3).astype(f)
    y, w33 = _u(42, 3, 2).astype(f), _u(43, 2, 3, 3).astype(f)
    res = {
        "inverse": get_op_def("inverse").forward(a)["Output"],
        "determinant": get_op_def("determinant").forward(a)["Out"],
        "det_grad": get_op_def("determinant").backward(
            a, get_op_def("determinant").forward(a)["Out"], np.ones(2, f))["Input"],
        "slogdet": get_op_def("slogdeterminant").forward(a)["Out"],
        "slogdet_grad": get_op_def("slogdeterminant").backward(a, np.ones((2, 2), f))["Input"],
        "matrix_power": get_op_def("matrix_power").forward(a, n=-2)["Out"],
        "matrix_power_grad": get_op_def("matrix_power").backward(a, w33, n=-2)["X"],
        "matrix_power_0": get_op_def("matrix_power").backward(a, w33, n=0)["X"],
        "cholesky": get_op_def("cholesky").forward(spd)["Out"],
        "cholesky_grad": get_op_def("cholesky").backward(
            np.linalg.cholesky(spd), w33[0])["X"],
        "mv_grad": get_op_def("mv").backward(a[0], y[:, 0], np.ones(3, f))["X"],
        "multi_dot": get_op_def("multi_dot").forward([a[0], y])["Out"],
        "solve": get_op_def("solve").forward(a, y)["Out"],
        "triangular_solve": get_op_def("triangular_solve").forward(a, y)["Out"],
    }
    o = res["solve"]
    g = get_op_def("solve").backward(a, y, o, np.ones_like(o))
    res["solve_dx"], res["solve_dy"] = g["X"], g["Y"]
    o = res["triangular_solve"]
    g = get_op_def("triangular_solve").backward(a, y, o, np.ones_like(o), unitriangular=True)
    res["tri_dx"], res["tri_dy"] = g["X"], g["Y"]
    md = get_op_def("multi_dot").backward([a[0], y], np.ones((3, 2), f))["X"]
    res["md0"], res["md1"] = md
    assert {k: v.dtype for k, v in res.items()} == {k: np.dtype(f) for k in res}
    assert res["determinant"].shape == (2,) and res["slogdet"].shape == (2, 2)
