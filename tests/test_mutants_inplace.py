"""Tests written from the mutation run of ``fluidlite/ops/inplace.py`` (issue 28, round 10): the
shared machinery of the update ops -- the build-time checks and their messages, the per-thread
scratch pool, the float64 sum of squares (overflow, underflow, chunks, scale, the few-tensor
fast path), ``chunked``, and the sparse (SelectedRows) paths of ``Update``: ``sparse_forward``
(rows only: the other rows from the outputs' previous values or the inputs), ``sparse_in_place``
(rows only, the dense-equivalent update of an elementwise op, the densified update of another
op, the clip scale), and ``bind``'s switch on a SELECTED_ROWS gradient.

References: fluid 1.8's adam kernel (``adam_op.h``: lazy_mode updates only the gradient's
merged rows; without it every row moves, missing rows with a zero gradient) and sgd's sparse
kernel, written as float64 NumPy formulas; float64 sums of squares; the dense ``forward``."""
import threading
import warnings

import numpy as np
import pytest

from fluidlite.core.dtypes import VarType
from fluidlite.core.registry import VarSpec, get_op_def
from fluidlite.core.selected_rows import SelectedRows
from fluidlite.ops import inplace

F = np.float32


# -- checks ------------------------------------------------------------------------------------
def test_check_like_and_check_scalar_messages():
    ref = VarSpec((4, 3), "float32")
    inplace.check_like("adam", "Param", ref, Grad=VarSpec((-1, 3), "float32"), Moment1=None)
    with pytest.raises(ValueError, match=r"adam: Moment1 shape \[4, 2\] must equal Param shape "
                                         r"\[4, 3\]"):
        inplace.check_like("adam", "Param", ref, Grad=ref, Moment1=VarSpec((4, 2), "float32"))
    with pytest.raises(ValueError, match=r"adam: Grad shape \[4, 3, 1\] must equal Param shape"):
        inplace.check_like("adam", "Param", ref, Grad=VarSpec((4, 3, 1), "float32"))
    with pytest.raises(ValueError, match=r"adam: Moment2 shape \[3, 4\] must equal Param shape"):
        inplace.check_like("adam", "Param", ref, Grad=None, Moment1=None,
                           Moment2=VarSpec((3, 4), "float32"))
    inplace.check_scalar("adam", LearningRate=VarSpec((1,), "float32"),
                         Beta1Pow=VarSpec((-1,), "float32"), Beta2Tensor=None)
    with pytest.raises(ValueError, match=r"adam: Beta1Pow must hold exactly one element \(shape "
                                         r"\[1\]\), but its shape is \[2\]"):
        inplace.check_scalar("adam", LearningRate=VarSpec((1,), "float32"),
                             Beta1Pow=VarSpec((2,), "float32"))


# -- scratch -----------------------------------------------------------------------------------
def _in_a_fresh_thread(fn):
    """fn() in a new thread (its scratch pool starts empty: the test is re-runnable in one
    process); returns fn's result, re-raising its exception."""
    box = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as exc:          # noqa: B902 (re-raised in the caller)
            box["error"] = exc
    t = threading.Thread(target=run)
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


def test_scratch_pool_per_dtype_tag_and_count():
    def check():
        a = inplace.scratch(np.float32, 2, "t")
        assert len(a) == 3                                   # at least 3 kept per key
        assert all(b.size == inplace.CHUNK and b.dtype == np.float32 for b in a)
        assert inplace.scratch(np.float32, 1, "t") is a                    # reused
        assert inplace.scratch(np.float32, 3, "t") is a
        assert inplace.scratch(np.float64, 2, "t") is not a
        assert inplace.scratch(np.float64, 2, "t")[0].dtype == np.float64
        assert inplace.scratch(np.float32, 2, "t-other") is not a
        big = inplace.scratch(np.float32, 5, "t")
        assert len(big) == 5 and big is not a
        assert inplace.scratch(np.float32, 5, "t") is big
        return big
    big = _in_a_fresh_thread(check)
    assert _in_a_fresh_thread(lambda: inplace.scratch(np.float32, 5, "t")) is not big


# -- sum of squares ----------------------------------------------------------------------------
def _ss(x, scale=None):
    x = np.asarray(x, np.float64).reshape(-1)
    if scale is not None:
        x = x * float(scale)
    return float(np.dot(x, x))


@pytest.mark.parametrize("case", ["overflow", "tiny", "plain", "nan"])
def test_sum_squares_float32_cases(case):
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, 50).astype(F)
    if case == "overflow":
        x *= F(1e25)                     # squares overflow float32, not float64
    elif case == "tiny":
        x *= F(1e-25)                    # squares underflow in float32
    elif case == "nan":
        x[3] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("error")            # an overflow is redone, silently
        got = inplace.sum_squares(x)
        many = inplace.sum_squares_many([x, x[:10]])
    assert isinstance(got, float)
    if case == "nan":
        assert np.isnan(got)
        return
    assert np.isfinite(got) and got > 0
    np.testing.assert_allclose(got, _ss(x), rtol=1e-6)
    np.testing.assert_allclose(many, [_ss(x), _ss(x[:10])], rtol=1e-6)


def test_sum_squares_chunks_and_scale(monkeypatch):
    monkeypatch.setattr(inplace, "CHUNK", 16)
    rng = np.random.default_rng(2)
    for dtype in (F, np.float64):
        x = rng.uniform(-1, 1, (7, 5)).astype(dtype)           # 35: three pieces of 16
        np.testing.assert_allclose(inplace.sum_squares(x), _ss(x), rtol=1e-6)
        s = np.asarray(0.5, dtype)
        np.testing.assert_allclose(inplace.sum_squares(x, s), _ss(x, 0.5), rtol=1e-6)
        np.testing.assert_allclose(inplace.sum_squares(x[:2], s), _ss(x[:2], 0.5), rtol=1e-6)
    big = (rng.uniform(-1, 1, 40) * 1e25).astype(F)               # overflow in a later piece
    got = inplace.sum_squares(big)
    np.testing.assert_allclose(got, _ss(big), rtol=1e-6)
    assert np.isfinite(got)


def test_sum_squares_of_an_infinite_value_scaled_by_zero_is_nan_silently():
    x = np.array([np.inf, 1.0, 2.0], F)
    with warnings.catch_warnings():
        warnings.simplefilter("error")            # inf * 0: invalid, but no warning
        got = inplace.sum_squares(x, np.asarray(0.0, F))
    assert np.isnan(got)


def test_sum_squares_many_general_path():
    rng = np.random.default_rng(3)
    xs = [rng.uniform(-1, 1, 5).astype(F) for _ in range(inplace._FEW + 2)]
    xs.append(rng.uniform(-1, 1, 5))                                   # a float64 one
    got = inplace.sum_squares_many(xs)
    np.testing.assert_allclose(got, [_ss(x) for x in xs], rtol=1e-6)
    few = [rng.uniform(-1, 1, 4).astype(F), np.full(3, 1e25, F), np.full(2, 1e-30, F)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = inplace.sum_squares_many(few)
    np.testing.assert_allclose(got, [_ss(x) for x in few], rtol=1e-6)
    assert inplace.sum_squares_many([]) == []


def test_consts_and_wide():
    a, b = inplace.consts(np.dtype(F), 0.1, 2)
    assert a.shape == () and a.dtype == np.float32 and float(a) == float(np.float32(0.1))
    assert b.dtype == np.float32 and float(b) == 2.0
    x = np.ones(3, F)
    assert inplace.wide(x, np.asarray(1.0)) == np.float64
    assert inplace.wide(x, np.float32(1.0)) == np.float32
    assert inplace.wide(np.ones(2), np.asarray(1.0, F)) == np.float64


def test_chunked_visits_aligned_pieces_with_the_scaled_gradient(monkeypatch):
    monkeypatch.setattr(inplace, "CHUNK", 8)
    rng = np.random.default_rng(4)
    for n in (5, 20):
        p = rng.uniform(-1, 1, n).astype(F).reshape(-1, 1) if n == 5 else \
            rng.uniform(-1, 1, (4, 5)).astype(F)
        g = rng.uniform(-1, 1, p.shape).astype(F)
        v = rng.uniform(-1, 1, p.shape).astype(F)
        p0, v0 = p.copy(), v.copy()
        sizes = []

        def body(pc, gc, states, tmps):
            (vc,) = states
            sizes.append(pc.size)
            assert len(tmps) == 2 and all(t.shape == pc.shape for t in tmps)
            np.multiply(gc, F(2), out=tmps[0])
            vc += tmps[0]
            pc -= vc

        inplace.chunked({"Param": p, "Grad": g, "Velocity": v}, ["Velocity"], np.float32(0.5),
                        2, body)
        assert sizes == ([5] if n == 5 else [8, 8, 4])
        want_v = v0 + 2 * (g * F(0.5))
        np.testing.assert_allclose(v, want_v, rtol=1e-6)
        np.testing.assert_allclose(p, p0 - want_v, rtol=1e-6, atol=1e-7)
        p1 = p.copy()
        inplace.chunked({"Param": p, "Grad": g, "Velocity": v}, ["Velocity"], None, 2,
                        lambda pc, gc, st, tm: np.subtract(pc, gc, out=pc))
        np.testing.assert_array_equal(p, p1 - g)


@pytest.mark.parametrize("chunk", [None, 4])
@pytest.mark.parametrize("ntmp,before", [(3, 0), (2, 6), (1, 0)])
def test_chunked_hands_the_body_exactly_ntmp_scratch_pieces(ntmp, before, chunk, monkeypatch):
    """In a fresh thread (an empty scratch pool), after ``before`` buffers were reserved; in
    one piece or (CHUNK 4) in two."""
    if chunk:
        monkeypatch.setattr(inplace, "CHUNK", chunk)
    seen = []

    def run():
        if before:
            inplace.scratch(np.float32, before)
        p = np.ones(5, F)

        def body(pc, gc, states, tmps):          # (checked in the main thread)
            seen.append((len(tmps), all(t.shape == pc.shape and t.dtype == np.float32
                                        for t in tmps)))
        inplace.chunked({"Param": p, "Grad": np.ones(5, F)}, [], np.float32(2.0), ntmp, body)

    t = threading.Thread(target=run)
    t.start()
    t.join()
    assert seen == [(ntmp, True)] * (2 if chunk else 1)


# -- sparse gradients --------------------------------------------------------------------------
ATTRS = {"beta1": 0.8, "beta2": 0.99, "epsilon": 1e-6}        # not adam's defaults


def _adam_ref(p, m1, m2, g, lr, b1p, b2p, beta1=0.8, beta2=0.99, eps=1e-6):
    p, m1, m2, g = (np.asarray(a, np.float64) for a in (p, m1, m2, g))
    m1 = beta1 * m1 + (1 - beta1) * g
    m2 = beta2 * m2 + (1 - beta2) * g * g
    lr_t = lr * np.sqrt(1 - b2p) / (1 - b1p)
    return p - lr_t * m1 / (np.sqrt(m2) + eps * np.sqrt(1 - b2p)), m1, m2


def _adam_inputs(seed=0):
    rng = np.random.default_rng(seed)
    u = lambda lo, hi: rng.uniform(lo, hi, (5, 3)).astype(F)     # noqa: E731
    return {"Param": u(-1, 1), "LearningRate": np.array([0.01], F), "Moment1": u(-1, 1),
            "Moment2": u(0, 1), "Beta1Pow": np.array([0.8 ** 3], F),
            "Beta2Pow": np.array([0.99 ** 3], F)}


def _grad():
    # rows 3 and 1, row 3 twice (merged: summed)
    return SelectedRows(np.array([3, 1, 3]), np.array([[1, 2, 3], [4, 5, 6], [0.5, 0.5, 0.5]],
                                                     F) * F(0.1), height=5)


def _merged_rows():
    return np.array([1, 3]), np.array([[0.4, 0.5, 0.6], [0.15, 0.25, 0.35]])


def test_lazy_sparse_forward_updates_only_the_rows():
    adam = get_op_def("adam")
    ins = _adam_inputs()
    before = {k: v.copy() for k, v in ins.items()}
    attrs = dict(ATTRS, lazy_mode=True)
    out = adam.sparse_forward(dict(ins, Grad=_grad()), attrs)
    for k, v in ins.items():                                   # nothing written
        np.testing.assert_array_equal(v, before[k])
    rows, g = _merged_rows()
    p, m1, m2 = _adam_ref(ins["Param"][rows], ins["Moment1"][rows], ins["Moment2"][rows], g,
                          0.01, 0.8 ** 3, 0.99 ** 3)
    other = [0, 2, 4]
    for slot, src, want in (("ParamOut", "Param", p), ("Moment1Out", "Moment1", m1),
                            ("Moment2Out", "Moment2", m2)):
        assert out[slot].dtype == np.float32 and out[slot] is not ins[src]
        np.testing.assert_allclose(out[slot][rows], want, rtol=1e-5, atol=1e-7)
        np.testing.assert_array_equal(out[slot][other], ins[src][other])
    np.testing.assert_allclose(out["Beta1PowOut"], [0.8 ** 4], rtol=1e-6)
    # the outputs' previous values keep the other rows (fluid writes only the rows into the
    # output buffers); a previous value of another shape or dtype is not used
    prev = {"ParamOut": np.full((5, 3), 7.0, F), "Moment1Out": np.full((5, 3), 8.0, np.float64),
            "Moment2Out": np.full((4, 3), 9.0, F)}
    out = adam.sparse_forward(dict(ins, Grad=_grad()), attrs, prev)
    np.testing.assert_array_equal(out["ParamOut"][other], 7.0)
    np.testing.assert_allclose(out["ParamOut"][rows], p, rtol=1e-5, atol=1e-7)
    assert out["ParamOut"] is not prev["ParamOut"] and (prev["ParamOut"] == 7.0).all()
    np.testing.assert_array_equal(out["Moment1Out"][other], ins["Moment1"][other])
    np.testing.assert_array_equal(out["Moment2Out"][other], ins["Moment2"][other])


def test_dense_sparse_forward_is_the_dense_update():
    adam = get_op_def("adam")
    ins = _adam_inputs(1)
    attrs = dict(ATTRS, lazy_mode=False)
    out = adam.sparse_forward(dict(ins, Grad=_grad()), attrs)
    dense = adam.forward(**dict(ins, Grad=_grad().to_dense()), **attrs)
    for k in ("ParamOut", "Moment1Out", "Moment2Out"):
        np.testing.assert_array_equal(out[k], dense[k])
    assert not np.array_equal(out["Moment1Out"][0], ins["Moment1"][0])   # missing rows decay


@pytest.mark.parametrize("lazy", [True, False])
@pytest.mark.parametrize("scale", [None, np.float32(0.5)])
def test_sparse_in_place(lazy, scale):
    adam = get_op_def("adam")
    ins = _adam_inputs(2)
    attrs = dict(ATTRS, lazy_mode=lazy)
    g = _grad()
    scaled = g if scale is None else SelectedRows(g.rows, g.value * scale, g.height)
    want = (adam.sparse_forward(dict(ins, Grad=scaled), attrs) if lazy else
            adam.forward(**dict(ins, Grad=scaled.to_dense()), **attrs))
    work = {k: v.copy() for k, v in ins.items()}
    arrays = {k: work[k] for k in ("Param", "Moment1", "Moment2")}
    rest = adam.sparse_in_place(dict(work, Grad=g), scale, attrs)
    assert work["Param"] is arrays["Param"]                     # written in place
    np.testing.assert_array_equal(work["Param"], want["ParamOut"])
    np.testing.assert_array_equal(work["Moment1"], want["Moment1Out"])
    np.testing.assert_array_equal(work["Moment2"], want["Moment2Out"])
    np.testing.assert_allclose(rest["Beta1PowOut"], want["Beta1PowOut"], rtol=0)


def test_sparse_in_place_of_an_op_that_is_not_elementwise():
    """lars_momentum's norms cover the whole tensor: a sparse gradient is densified."""
    op = get_op_def("lars_momentum")
    assert not op.sparse_elementwise and not op.sparse_rows_only({})
    rng = np.random.default_rng(5)
    ins = {"Param": rng.uniform(-1, 1, (5, 3)).astype(F),
           "Velocity": rng.uniform(-1, 1, (5, 3)).astype(F), "LearningRate": np.array([0.1], F)}
    attrs = {"mu": 0.9, "lars_coeff": 0.001, "lars_weight_decay": 0.0005}
    want = op.forward(**dict(ins, Grad=_grad().to_dense()), **attrs)
    work = {k: v.copy() for k, v in ins.items()}
    op.sparse_in_place(dict(work, Grad=_grad()), None, attrs)
    np.testing.assert_array_equal(work["Param"], want["ParamOut"])
    np.testing.assert_array_equal(work["Velocity"], want["VelocityOut"])


class _Specs(list):
    def __init__(self, specs, grad_type):
        super().__init__(specs)
        self.grad_type = grad_type

    def var_type(self, slot):
        return self.grad_type if slot == "Grad" else VarType.LOD_TENSOR


def test_bind_switches_on_a_selected_rows_gradient():
    sgd = get_op_def("sgd")
    spec = VarSpec((5, 3), "float32")
    specs = [spec, VarSpec((1,), "float32"), spec]
    p = np.arange(15, dtype=F).reshape(5, 3)
    lr = np.array([0.5], F)
    g = _grad()
    b = sgd.bind(_Specs(specs, VarType.SELECTED_ROWS), {}, {"ParamOut"})
    out = b.fn(p, lr, g)
    out = out if b.single else out["ParamOut"]
    want = p - F(0.5) * g.to_dense()
    np.testing.assert_allclose(out, want, rtol=1e-6)
    np.testing.assert_array_equal(out[[0, 2, 4]], p[[0, 2, 4]])
    dense = b.fn(p, lr, g.to_dense())                      # a dense Grad takes the dense path
    dense = dense if b.single else dense["ParamOut"]
    np.testing.assert_allclose(dense, want, rtol=1e-6)
    # a LOD_TENSOR Grad, or in_specs without var_type: the plain binding
    for s in (_Specs(specs, VarType.LOD_TENSOR), specs):
        b2 = sgd.bind(s, {}, {"ParamOut"})
        r = b2.fn(p, lr, g.to_dense())
        np.testing.assert_allclose(r if b2.single else r["ParamOut"], want, rtol=1e-6)


def test_bind_of_a_lazy_adam_reads_the_previous_outputs():
    """The plan passes, after the inputs, the previous values of ParamOut / Moment1Out /
    Moment2Out (``reads_outputs``): a lazy sparse update keeps their other rows."""
    adam = get_op_def("adam")
    ins = _adam_inputs(6)
    spec = VarSpec((5, 3), "float32")
    one = VarSpec((1,), "float32")
    specs = _Specs([spec, spec, one, spec, spec, one, one, None, None], VarType.SELECTED_ROWS)
    b = adam.bind(specs, dict(ATTRS, lazy_mode=True),
                  {"ParamOut", "Moment1Out", "Moment2Out", "Beta1PowOut", "Beta2PowOut"})
    prev = [np.full((5, 3), v, F) for v in (7.0, 8.0, 9.0)]
    args = [ins["Param"], _grad(), ins["LearningRate"], ins["Moment1"], ins["Moment2"],
            ins["Beta1Pow"], ins["Beta2Pow"], None, None]
    out = b.fn(*args, *prev)
    rows, g = _merged_rows()
    p, m1, m2 = _adam_ref(ins["Param"][rows], ins["Moment1"][rows], ins["Moment2"][rows], g,
                          0.01, 0.8 ** 3, 0.99 ** 3)
    for slot, want, fill in (("ParamOut", p, 7.0), ("Moment1Out", m1, 8.0),
                             ("Moment2Out", m2, 9.0)):
        np.testing.assert_allclose(out[slot][rows], want, rtol=1e-5, atol=1e-7)
        np.testing.assert_array_equal(out[slot][[0, 2, 4]], fill)
    np.testing.assert_allclose(out["Beta2PowOut"], [0.99 ** 4], rtol=1e-6)


def test_update_in_place_is_required():
    with pytest.raises(NotImplementedError, match=r"average_accumulates has no in-place "
                                                  r"update"):
        inplace.Update.update_in_place(get_op_def("average_accumulates"), {}, None, {})


def test_a_lazy_adam_step_on_a_sparse_embedding_through_the_executor():
    """End to end: embedding(is_sparse=True) gives a SelectedRows gradient; the plan binds
    adam's sparse path (a multi-output op: its result keys are read by slot) and only the
    looked-up rows move, by fluid's first adam step (Beta1Pow = beta1, Beta2Pow = beta2)."""
    import fluidlite as fluid
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start):
        ids = fluid.data("ids", [-1, 1], "int64")
        c = fluid.data("c", [-1, 2], "float32")
        emb = fluid.layers.embedding(ids, size=[8, 2], is_sparse=True, param_attr="w")
        loss = fluid.layers.reduce_sum(emb * c)            # dW rows = c
        fluid.optimizer.Adam(0.05, beta1=0.8, beta2=0.99, epsilon=1e-6,
                             lazy_mode=True).minimize(loss)
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(start, scope=scope)
    w0 = np.array(scope.find_var("w").get_tensor())
    rows = np.array([5, 2, 5], np.int64)
    vals = np.array([[1.0, -2.0], [0.5, 0.25], [3.0, 1.0]], F)
    exe.run(main, feed={"ids": rows[:, None], "c": vals}, scope=scope)
    got = np.array(scope.find_var("w").get_tensor())
    g = np.array([vals[1], vals[0] + vals[2]], np.float64)                # rows 2, 5
    p, _, _ = _adam_ref(w0[[2, 5]], np.zeros((2, 2)), np.zeros((2, 2)), g, 0.05, 0.8, 0.99)
    np.testing.assert_allclose(got[[2, 5]], p, rtol=1e-5, atol=1e-6)
    untouched = [0, 1, 3, 4, 6, 7]
    np.testing.assert_array_equal(got[untouched], w0[untouched])
