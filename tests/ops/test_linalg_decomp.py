"""ops/linalg_decomp.py: eigh, eigvalsh, svd, qr, cholesky_solve, matrix_rank (values and
gradients against Paddle 2.6 are in tests/ops/test_paddle_oracle.py). Here: the defining
identities (X = V diag(w) V^T, X = U S VH, X = Q R, A Out = X), numeric gradients with random
upstream weights in float64 (symmetric inputs perturbed symmetrically), and the errors."""
import numpy as np
import pytest

from fluidlite.core.registry import VarSpec, get_op_def
from fluidlite.testing import OpTest

RNG = np.random.default_rng(4242)


def _sym(*batch_n, shift=0.0):
    a = RNG.uniform(-1, 1, batch_n[:-1] + (batch_n[-1], batch_n[-1]))
    return a + np.swapaxes(a, -1, -2) + shift * np.eye(batch_n[-1])


def _check(op_type, inputs, attrs, out_slots, grads, **kw):
    op = get_op_def(op_type)
    res = op.forward(*[inputs.get(s.name) for s in op.in_slots], **attrs)

    class T(OpTest):
        pass
    T.op_type, T.inputs, T.attrs = op_type, inputs, attrs
    T.outputs = {s: res[s] for s in out_slots}
    T().check_output(atol=1e-12, rtol=1e-12)
    if grads:
        T().check_grad(grads, out_slots, **kw)
    return res


def _aligned(v, ref):
    """``v`` with each column's (singular / eigen) vector sign flipped to agree with ``ref``:
    LAPACK's signs may flip under a perturbation, a central difference must not see that."""
    return v * np.sign((v * ref).sum(axis=-2, keepdims=True))


def _directional(f, x, e, h=1e-6):
    return (f(x + h * e) - f(x - h * e)) / (2 * h)


@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh_decomposes_and_its_gradient(uplo):
    x = _sym(2, 4)
    # eigenvalues through OpTest (sign-free); eigenvectors by sign-aligned differences below
    res = _check("eigh", {"X": x}, {"UPLO": uplo}, ["Eigenvalues"], ["X"], symmetric=["X"])
    w, v = res["Eigenvalues"], res["Eigenvectors"]
    np.testing.assert_allclose(v @ (w[..., None] * np.swapaxes(v, -1, -2)), x, atol=1e-12)
    assert (np.diff(w, axis=-1) > 0).all()
    # only the UPLO triangle is read, as LAPACK does
    skew = np.triu(RNG.uniform(-1, 1, (4, 4)), 1)
    other = skew.T if uplo == "U" else skew
    np.testing.assert_allclose(get_op_def("eigh").forward(x[0] + other, UPLO=uplo)[
        "Eigenvalues"], w[0], rtol=1e-12)
    gw, gv = RNG.uniform(-1, 1, w.shape), RNG.uniform(-1, 1, v.shape)

    def loss(xx):
        ww, vv = np.linalg.eigh(xx, UPLO=uplo)
        return (gw * ww).sum() + (gv * _aligned(vv, v)).sum()
    g = get_op_def("eigh").backward(w, v, gw, gv, UPLO=uplo)["X"]
    for _ in range(3):                    # <G, E> is the derivative along symmetric E
        e = _sym(2, 4)
        np.testing.assert_allclose((g * e).sum(), _directional(loss, x, e), rtol=1e-6)
    assert np.abs(g - get_op_def("eigh").backward(w, v, gw, None, UPLO=uplo)["X"]).max() > 0.1
    _check("eigvalsh", {"X": x}, {"UPLO": uplo, "is_test": False}, ["Eigenvalues"], ["X"],
           symmetric=["X"])
    with pytest.raises(ValueError, match="UPLO must be 'L' or 'U'"):
        get_op_def("eigh").infer(VarSpec((3, 3), "float64"), UPLO="X")
    with pytest.raises(ValueError, match="square"):
        get_op_def("eigvalsh").infer(VarSpec((3, 4), "float64"))


@pytest.mark.parametrize("shape", [(4, 3), (2, 3, 5)])
def test_svd_decomposes_and_its_gradient(shape):
    x = RNG.uniform(-1, 1, shape)
    # singular values through OpTest (sign-free); the vectors by sign-aligned differences
    res = _check("svd", {"X": x}, {"full_matrices": False}, ["S"], ["X"])
    u, s, vh = res["U"], res["S"], res["VH"]
    np.testing.assert_allclose((u * s[..., None, :]) @ vh, x, atol=1e-12)
    assert (np.diff(s, axis=-1) < 0).all()
    gu, gs, gvh = (RNG.uniform(-1, 1, a.shape) for a in (u, s, vh))

    def loss(xx):
        uu, ss, vv = np.linalg.svd(xx, full_matrices=False)
        flip = np.sign((uu * u).sum(axis=-2, keepdims=True))     # pairs flip together
        return (gs * ss).sum() + (gu * uu * flip).sum() + \
            (gvh * vv * np.swapaxes(flip, -1, -2)).sum()
    g = get_op_def("svd").backward(u, s, vh, gu, gs, gvh)["X"]
    for _ in range(3):
        e = RNG.uniform(-1, 1, shape)
        np.testing.assert_allclose((g * e).sum(), _directional(loss, x, e), rtol=1e-6)
    full = get_op_def("svd").forward(x, full_matrices=True)
    m, n = shape[-2:]
    assert full["U"].shape[-2:] == (m, m) and full["VH"].shape[-2:] == (n, n)
    spec = get_op_def("svd").infer(VarSpec((-1, 6, 4), "float32"), full_matrices=False)
    assert [spec[k].shape for k in ("U", "S", "VH")] == [(-1, 6, 4), (-1, 4), (-1, 4, 4)]


def test_qr_decomposes_and_its_gradient():
    x = RNG.uniform(-1, 1, (2, 5, 3))
    res = _check("qr", {"X": x}, {"mode": "reduced"}, ["Q", "R"], ["X"])
    q, r = res["Q"], res["R"]
    np.testing.assert_allclose(q @ r, x, atol=1e-12)
    np.testing.assert_allclose(np.swapaxes(q, -1, -2) @ q, np.broadcast_to(np.eye(3), (2, 3, 3)),
                               atol=1e-12)
    assert np.allclose(np.tril(r, -1), 0)
    _check("qr", {"X": x[0]}, {"mode": "reduced"}, ["R"], ["X"])
    comp = get_op_def("qr").forward(x, mode="complete")
    assert comp["Q"].shape == (2, 5, 5) and comp["R"].shape == (2, 5, 3)
    only_r = get_op_def("qr").forward(x, mode="r")
    assert only_r["Q"].size == 0 and np.allclose(only_r["R"], r)
    with pytest.raises(ValueError, match="mode 'reduced' with m >= n"):
        get_op_def("qr").backward(comp["Q"], comp["R"], None, np.ones_like(comp["R"]),
                                  mode="complete")
    with pytest.raises(ValueError, match="mode must be"):
        get_op_def("qr").infer(VarSpec((3, 3), "float64"), mode="full")


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_solve_solves_and_its_gradient(upper):
    a = _sym(3, shift=4.0)
    low = np.linalg.cholesky(a)
    y = low.T.copy() if upper else low
    b = RNG.uniform(-1, 1, (2, 3, 2))
    res = _check("cholesky_solve", {"X": b, "Y": y}, {"upper": upper}, ["Out"], ["X", "Y"])
    np.testing.assert_allclose(a @ res["Out"], b, atol=1e-12)
    spec = get_op_def("cholesky_solve").infer(VarSpec((4, 3, 2), "float64"),
                                              VarSpec((1, 3, 3), "float64"))
    assert spec["Out"].shape == (4, 3, 2)
    with pytest.raises(ValueError, match="must have Y's 3 rows"):
        get_op_def("cholesky_solve").infer(VarSpec((4, 2), "float64"),
                                           VarSpec((3, 3), "float64"))


def test_matrix_rank():
    op = get_op_def("matrix_rank")
    x = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0.0, 1.0, 1.0]])
    res = _check("matrix_rank", {"X": x}, {"tol": 0.0, "hermitian": False,
                                          "use_default_tol": True}, ["Out"], [])
    assert res["Out"].dtype == np.int64 and int(res["Out"]) == 2
    d = np.diag([3.0, 0.5, 1e-3])
    assert int(op.forward(d, tol=0.01, hermitian=True, use_default_tol=False)["Out"]) == 2
    assert int(op.forward(d, np.array([1.0]), tol=0.01, use_default_tol=False)["Out"]) == 1
    batch = np.stack([np.eye(3), np.zeros((3, 3)), x])
    assert op.forward(batch)["Out"].tolist() == [3, 0, 2]
    # the default tolerance scales with the largest singular value and the dtype's eps
    tiny = np.diag([1.0, 1e-13]).astype(np.float64)
    assert int(op.forward(tiny)["Out"]) == 2
    assert int(op.forward(tiny.astype(np.float32))["Out"]) == 1
    with pytest.raises(ValueError, match="float tensor"):
        op.infer(VarSpec((3, 3), "int64"))


def test_vector_signs_are_fixed_whatever_lapack_returns():
    # the largest-magnitude entry of every eigen / singular vector is positive, and a
    # singular pair flips together (X = U S VH still holds)
    x = _sym(3, 5)
    v = get_op_def("eigh").forward(x)["Eigenvectors"]
    top = np.take_along_axis(v, np.argmax(np.abs(v), axis=-2)[..., None, :], axis=-2)
    assert (top > 0).all()
    a = RNG.uniform(-1, 1, (3, 6, 4))
    r = get_op_def("svd").forward(a, full_matrices=False)
    top = np.take_along_axis(r["U"], np.argmax(np.abs(r["U"]), axis=-2)[..., None, :], axis=-2)
    assert (top > 0).all()
    np.testing.assert_allclose((r["U"] * r["S"][..., None, :]) @ r["VH"], a, atol=1e-12)
    full = get_op_def("svd").forward(a, full_matrices=True)
    np.testing.assert_allclose(full["U"][..., :4], r["U"], atol=1e-12)
