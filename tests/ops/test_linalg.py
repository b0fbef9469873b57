"""OpTest cases for fluidlite/ops/linalg.py: mul and matmul."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core.registry import VarSpec, get_op_def
from fluidlite.testing import OpTest


def run_op(op_type, inputs, attrs, outputs, grad=("X", "Y")):
    t = OpTest()
    t.op_type, t.inputs, t.attrs, t.outputs = op_type, inputs, attrs, outputs
    t.check_infer()
    t.check_output()
    if grad:
        t.check_grad(list(grad), "Out")


def test_mul():
    x, y = OpTest.rand(3, 4, seed=1), OpTest.rand(4, 5, seed=2)
    run_op("mul", {"X": x, "Y": y}, {}, {"Out": x @ y})


def test_mul_num_col_dims():
    x2, y2 = OpTest.rand(2, 3, 4, seed=1), OpTest.rand(12, 5, seed=2)
    run_op("mul", {"X": x2, "Y": y2}, {"x_num_col_dims": 1},
           {"Out": x2.reshape(2, 12) @ y2})
    y3 = OpTest.rand(4, 2, 5, seed=3)
    run_op("mul", {"X": x2, "Y": y3}, {"x_num_col_dims": 2, "y_num_col_dims": 1},
           {"Out": (x2.reshape(6, 4) @ y3.reshape(4, 10)).reshape(2, 3, 2, 5)})


def test_mul_shape_error():
    with fluid.program_guard(fluid.Program()):
        x = fluid.layers.data("x", [3])
        w = fluid.layers.create_parameter([4, 2], "float32")
        with pytest.raises(ValueError, match="mul.*width 3.*height 4"):
            fluid.layers.mul(x, w)


@pytest.mark.parametrize("xs,ys,tx,ty", [
    ((3, 4), (4, 5), False, False),
    ((4, 3), (4, 5), True, False),
    ((3, 4), (5, 4), False, True),
    ((2, 3, 4), (2, 4, 5), False, False),
    ((2, 3, 4), (4, 5), False, False),       # broadcast Y over the batch
    # a stack times one matrix runs as one GEMM of the stacked rows (also its gradients)
    ((2, 3, 4), (5, 4), False, True),
    ((2, 3, 2, 4), (4, 5), False, False),
    ((2, 3, 4), (4,), False, False),
    ((2, 3, 4), (1, 4), False, True),
    ((2, 4, 3), (4, 5), True, False),        # a transposed stack: np.matmul, not one GEMM
    ((3, 4), (2, 4, 5), False, False),       # broadcast X over the batch
    ((2, 1, 3, 4), (5, 4, 2), False, False),  # numpy-style batch broadcasting
    ((4,), (4, 5), False, False),            # 1-D X: row vector, dim dropped
    ((3, 4), (4,), False, False),            # 1-D Y: column vector, dim dropped
    ((4,), (4,), False, False),              # both 1-D: shape [1]
    ((2, 4, 3), (2, 5, 4), True, True),
    ((2, 3, 4), (2, 5, 4), False, True),     # stacks: each gradient in its input's layout
    ((2, 2, 4, 3), (2, 2, 4, 5), True, False),
])
def test_matmul(xs, ys, tx, ty):
    x, y = OpTest.rand(*xs, seed=1), OpTest.rand(*ys, seed=2)
    a = np.swapaxes(x, -1, -2) if tx and x.ndim > 1 else x
    b = np.swapaxes(y, -1, -2) if ty and y.ndim > 1 else y
    out = np.matmul(a, b)
    if out.ndim == 0:
        out = out.reshape(1)
    run_op("matmul", {"X": x, "Y": y}, {"transpose_X": tx, "transpose_Y": ty, "alpha": 1.5},
           {"Out": 1.5 * out})


def test_matmul_errors():
    with fluid.program_guard(fluid.Program()):
        x = fluid.layers.data("x", [3, 4], append_batch_size=False)
        y = fluid.layers.data("y", [5, 6], append_batch_size=False)
        with pytest.raises(ValueError, match=r"matmul.*width 4.*height 5.*\[3, 4\].*\[5, 6\]"):
            fluid.layers.matmul(x, y)
        with pytest.raises(TypeError, match="matmul"):
            fluid.layers.matmul(x, np.zeros((4, 2)))
        a = fluid.layers.data("a", [2, 3, 4], append_batch_size=False)
        b = fluid.layers.data("b", [3, 4, 5], append_batch_size=False)
        with pytest.raises(ValueError, match="matmul.*batch dims"):
            fluid.layers.matmul(a, b)


def test_matmul_keeps_float32_and_lowers():
    x = np.ones((2, 3), np.float32)
    y = np.ones((3, 4), np.float32)
    out = get_op_def("matmul").forward(x, y, alpha=0.5)["Out"]
    assert out.dtype == np.float32
    g = get_op_def("matmul").backward(x, y, np.ones((2, 4), np.float32), alpha=0.5)
    assert g["X"].dtype == np.float32 and g["Y"].dtype == np.float32


@pytest.mark.parametrize("tx,ty", [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize("batch", [(), (2,)])
@pytest.mark.parametrize("rows", [True, False])
def test_matmul_head_number(tx, ty, batch, rows):
    # fluid 1.8's MatMulWithHead: op(X)'s columns in 4 blocks times op(Y)'s row blocks (Y's
    # height = X's width) or column blocks (Y's height = X's width / 4), joined on the last axis
    h = 4
    a = OpTest.rand(*batch, 3, 8)
    b = OpTest.rand(*batch, 8, 5, seed=1) if rows else OpTest.rand(*batch, 2, 12, seed=1)
    xa, yb = np.split(a, h, axis=-1), np.split(b, h, axis=-2 if rows else -1)
    ref = np.concatenate([x @ y for x, y in zip(xa, yb)], axis=-1) * 0.5
    t = OpTest()
    t.op_type = "matmul"
    t.inputs = {"X": np.swapaxes(a, -1, -2).copy() if tx else a,
                "Y": np.swapaxes(b, -1, -2).copy() if ty else b}
    t.attrs = {"transpose_X": tx, "transpose_Y": ty, "head_number": h, "alpha": 0.5}
    t.outputs = {"Out": ref}
    t.check_infer()
    t.check_output()
    t.check_grad(["X", "Y"], "Out")


@pytest.mark.parametrize("m, k, n, view", [
    (256, 256, 128, "plain"),          # row blocks
    (256, 256, 128, "transposed"),     # row blocks of X^T (a mul_grad dW): strided views
    (256, 256, 128, "strided"),        # every other column of a wider matrix
    (64, 512, 256, "transposed"),      # few rows: column blocks of Y
])
def test_large_gemm_of_views_matches_float64_for_any_thread_count(m, k, n, view):
    from fluidlite.core import threads
    from fluidlite.ops.linalg import _GEMM_MIN, _gemm
    assert m * k * n >= _GEMM_MIN                  # the cut path, not the small one
    rng = np.random.default_rng(5)
    if view == "transposed":
        a = rng.standard_normal((k, m)).astype(np.float32).T
    elif view == "strided":
        a = rng.standard_normal((m, 2 * k)).astype(np.float32)[:, ::2]
    else:
        a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((n, k)).astype(np.float32).T
    want = a.astype(np.float64) @ b.astype(np.float64)
    runs = []
    for t in (1, 2, 3):
        with threads.using(t):
            runs.append(_gemm(a, b))
            out = np.full((m, n), np.nan, np.float32)
            assert _gemm(a, b, out) is out
            assert np.array_equal(out, runs[-1])
    for got in runs:
        assert got.dtype == np.float32 and got.shape == (m, n)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    assert np.array_equal(runs[1], runs[2])        # every count from 2 on: the same bits


@pytest.mark.parametrize("m, k, n", [
    (256, 256, 128),        # row blocks
    (64, 512, 256),         # few rows: column blocks
    (8, 16, 12),            # small: one product
])
def test_gemm_epilogue_runs_on_each_block_with_its_columns(m, k, n):
    # ``_gemm``'s epilogue (fc's bias and relu) is applied to every block of the product with
    # the block's own columns: the same values as applying it to the whole product after
    from fluidlite.core import threads
    from fluidlite.ops.linalg import _GEMM_MIN, _gemm
    rng = np.random.default_rng(6)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)        # a different value per column
    seen = []

    def epilogue(block, rows, cols):
        seen.append(block.shape)
        assert np.shares_memory(block, got_buf) and block.shape == got_buf[rows, cols].shape
        block += bias[cols]
        np.maximum(block, np.float32(0), out=block)
    want = a.astype(np.float64) @ b.astype(np.float64) + bias
    for t in (1, 2):
        with threads.using(t):
            seen.clear()
            plain = _gemm(a, b)
            got_buf = np.empty((m, n), np.float32)
            got = _gemm(a, b, got_buf, epilogue=epilogue)
        assert np.array_equal(got, np.maximum(plain + bias, np.float32(0)))
        np.testing.assert_allclose(got, np.maximum(want, 0), rtol=1e-4, atol=1e-4)
        cut = t == 2 and m * k * n >= _GEMM_MIN
        assert len(seen) == (2 if cut else 1)
        assert sum(s[0] * s[1] for s in seen) == m * n     # every element once
        assert got is got_buf


@pytest.mark.parametrize("shape, act", [((2, 128, 256), "relu"), ((256, 256), ""),
                                        ((64, 512), "relu")])
def test_fc_bias_and_relu_on_the_parts_of_a_cut_product(shape, act):
    # fc adds its bias (and relu) to each part of a product cut over two threads: the same
    # bits as the cut product's bias (and relu) added after, and mul + bias (+ relu) in float64
    from fluidlite.core import threads
    from fluidlite.ops.linalg import _gemm
    fc = get_op_def("fc")
    rng = np.random.default_rng(7)
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((shape[-1], 192)).astype(np.float32)
    bias = rng.standard_normal(192).astype(np.float32)
    attrs = dict(in_num_col_dims=len(shape) - 1, activation_type=act)
    for t in (1, 2):
        with threads.using(t):
            got = fc.forward(x, w, bias, **attrs)["Out"]
            after = _gemm(x.reshape(-1, shape[-1]), w) + bias
        after = np.maximum(after, np.float32(0)) if act else after
        assert got.dtype == np.float32 and got.shape == shape[:-1] + (192,)
        assert np.array_equal(got.reshape(after.shape), after)
    want = x.astype(np.float64) @ w.astype(np.float64) + bias
    want = np.maximum(want, 0) if act else want
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def _product_grads(op_type, x, y, d, attrs):
    """float64 dX, dY of mul / matmul (no alpha) by the textbook formulas: with a = op(X) and
    b = op(Y) in 2-D rows, da = dOut b^T, db = a^T dOut, transposed back where op is."""
    x, y, d = (v.astype(np.float64) for v in (x, y, d))
    if op_type == "mul":
        k = attrs.get("x_num_col_dims", 1)
        a, b = x.reshape(int(np.prod(x.shape[:k])), -1), y
    else:
        a = x.T if attrs.get("transpose_X") else x.reshape(-1, x.shape[-1])
        b = y.T if attrs.get("transpose_Y") else y
    d2 = d.reshape(a.shape[0], b.shape[1])
    da, db = d2 @ b.T, a.T @ d2
    dx = da.T if op_type == "matmul" and attrs.get("transpose_X") else da
    dy = db.T if op_type == "matmul" and attrs.get("transpose_Y") else db
    return {"X": dx.reshape(x.shape), "Y": dy.reshape(y.shape)}


@pytest.mark.parametrize("op_type, xs, ys, attrs", [
    ("mul", (20, 400), (400, 800), {}),                          # a recurrent step's fc
    ("mul", (4, 128, 96), (96, 384), {"x_num_col_dims": 2}),     # flattened rows
    ("matmul", (20, 400), (400, 800), {}),                       # two matrices
    ("matmul", (800, 400), (20, 800), {"transpose_X": True, "transpose_Y": True}),
    ("matmul", (4, 32, 96), (96, 384), {}),                      # a stack @ a matrix
])
def test_gradient_products_side_by_side(op_type, xs, ys, attrs):
    # mul / matmul gradients whose dX and dY products both have _PAIR_MIN multiply-adds run as
    # two thread items, each product whole: the bits of one thread, for every thread count,
    # and the float64 gradients
    from fluidlite.core import threads
    from fluidlite.ops import linalg
    op = get_op_def(op_type)
    rng = np.random.default_rng(8)
    x = rng.standard_normal(xs).astype(np.float32)
    y = rng.standard_normal(ys).astype(np.float32)
    out = op.forward(x, y, **attrs)["Out"]
    d = rng.standard_normal(out.shape).astype(np.float32)
    items = []
    real = threads.parallel

    def counting(fn, n, sink=None):
        items.append(n)
        return real(fn, n, sink)
    runs = []
    for t in (1, 2, 3):
        items.clear()
        with threads.using(t), pytest.MonkeyPatch.context() as mp:
            mp.setattr(threads, "parallel", counting)
            runs.append(op.backward(x, y, d, **attrs))
            both = op.backward(x, y, d, wanted=frozenset({"X", "Y"}), **attrs)  # the plan's call
            assert all(np.array_equal(both[k], runs[-1][k]) for k in "XY")
            fast = op.lower_grad([VarSpec(a.shape, a.dtype) for a in (x, y, d)], attrs,
                                 frozenset({"X", "Y"}))
            if fast is not None:                         # mul's lowered gradient: the same
                lowered = fast(x, y, d)
                assert all(np.array_equal(lowered[k], runs[-1][k]) for k in "XY")
        assert items == ([] if t == 1 else [2] * (2 + (fast is not None)))
    want = _product_grads(op_type, x, y, d, attrs)
    for got in runs:
        for slot in ("X", "Y"):
            assert got[slot].dtype == np.float32 and got[slot].shape == want[slot].shape
            np.testing.assert_allclose(got[slot], want[slot], rtol=1e-4,
                                       atol=1e-4 * np.abs(want[slot]).max())
            assert np.array_equal(got[slot], runs[0][slot])


def test_gradient_products_below_pair_min_stay_apart():
    # small products (each under _PAIR_MIN) are not handed to the pool as a pair
    from fluidlite.core import threads
    from fluidlite.ops.linalg import _PAIR_MIN, _gemm_pair
    rng = np.random.default_rng(9)
    a = rng.standard_normal((32, 64)).astype(np.float32)
    b = rng.standard_normal((64, 48)).astype(np.float32)
    assert 32 * 64 * 48 < _PAIR_MIN
    items = []
    real = threads.parallel
    with threads.using(2), pytest.MonkeyPatch.context() as mp:
        mp.setattr(threads, "parallel", lambda fn, n, sink=None: (items.append(n),
                                                                  real(fn, n, sink))[1])
        p, q = _gemm_pair(a, b, b.T, a.T)
        assert items == []
        big = rng.standard_normal((64, 512)).astype(np.float32)      # one product above
        assert 64 * 512 * 128 >= _PAIR_MIN
        r, s = _gemm_pair(big, big[:128].T, a, b)
        assert items == []                                           # ... is not enough
    assert np.array_equal(p, a @ b) and np.array_equal(q, b.T @ a.T)
    assert np.array_equal(r, big @ big[:128].T) and np.array_equal(s, a @ b)


@pytest.mark.parametrize("op_type, xs", [("mul", (20, 400)), ("matmul", (20, 400)),
                                         ("matmul", (2, 10, 400))])
def test_float16_gradient_products_stay_in_float32(op_type, xs):
    # float16 operands never take the side-by-side pair (np.matmul would multiply in float16):
    # the gradients of one thread, computed in float32 and rounded once
    from fluidlite.core import threads
    op = get_op_def(op_type)
    rng = np.random.default_rng(10)
    x = rng.standard_normal(xs).astype(np.float16)
    y = rng.standard_normal((400, 800)).astype(np.float16)
    d = rng.standard_normal(xs[:-1] + (800,)).astype(np.float16)
    runs = []
    for t in (1, 2):
        with threads.using(t):
            runs.append(op.backward(x, y, d))
    x2, d2 = x.reshape(-1, 400).astype(np.float32), d.reshape(-1, 800).astype(np.float32)
    want = {"X": (d2 @ y.astype(np.float32).T).astype(np.float16).reshape(xs),
            "Y": (x2.T @ d2).astype(np.float16)}
    for got in runs:
        for k in "XY":
            assert got[k].dtype == np.float16 and np.array_equal(got[k], want[k])


@pytest.mark.parametrize("m, k, n, threads_, jobs, where", [
    (32, 64, 48, 2, 1, "all"),             # small: one dot
    (100, 2000, 100, 2, 1, "all"),         # big but few rows and columns: one matmul
    (128, 256, 256, 2, 2, "rows"),         # 128 rows: two row parts
    (64, 512, 256, 2, 2, "cols"),          # few rows: two column parts
    (256, 256, 128, 1, 1, "all"),          # one thread: whole
])
def test_gemm_jobs_are_the_calls_gemm_makes(m, k, n, threads_, jobs, where):
    # _gemm_jobs gives _gemm's calls as jobs (fc_group runs several products' jobs in one
    # call): their count and places, the product's dtype, and _gemm's bits
    from fluidlite.core import threads
    from fluidlite.ops.linalg import _gemm, _gemm_jobs
    rng = np.random.default_rng(11)
    a = rng.standard_normal((m, k)).astype(np.float64)     # mixed: a float64 product
    b = rng.standard_normal((k, n)).astype(np.float32)
    seen = []

    def epilogue(block, rows, cols):
        assert isinstance(rows, slice) and isinstance(cols, slice)
        seen.append((rows, cols))
        block += 1.0
    with threads.using(threads_):
        out, parts = _gemm_jobs(a, b, None, epilogue)
        assert len(parts) == jobs and out.dtype == np.float64 and out.shape == (m, n)
        for job in parts:
            job()
        want = _gemm(a, b) + 1.0
    assert np.array_equal(out, want)
    full = slice(None)
    if where == "all":
        assert seen == [(full, full)]
    elif where == "rows":
        assert seen == [(slice(0, m // 2), full), (slice(m // 2, m), full)]
    else:
        assert seen == [(full, slice(0, n // 2)), (full, slice(n // 2, n))]


@pytest.mark.parametrize("tx, ty", [(False, False), (False, True), (True, False), (True, True)])
def test_attention_sized_stacks_match_float64_for_any_thread_count(tx, ty):
    """A stack big enough for ``_bmm`` to cut in halves (an attention's scores): Out and both
    gradients, alpha included, equal float64 products for 1 and 2 threads, with the same bits
    for both, and the gradients come back contiguous in their inputs' layouts."""
    from fluidlite.core import threads
    from fluidlite.ops.linalg import _BMM_MIN
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 4, 64, 48) if tx else (2, 4, 48, 64)).astype(np.float32)
    y = rng.standard_normal((2, 4, 96, 64) if ty else (2, 4, 64, 96)).astype(np.float32)
    a = np.swapaxes(x, -1, -2) if tx else x
    b = np.swapaxes(y, -1, -2) if ty else y
    assert 8 * 48 * 64 * 96 >= _BMM_MIN
    d = rng.standard_normal((2, 4, 48, 96)).astype(np.float32)
    a64, b64, d64 = a.astype(np.float64), b.astype(np.float64), d.astype(np.float64)
    want_out = 0.3 * a64 @ b64
    da = 0.3 * d64 @ np.swapaxes(b64, -1, -2)
    db = 0.3 * np.swapaxes(a64, -1, -2) @ d64
    want_dx = np.swapaxes(da, -1, -2) if tx else da
    want_dy = np.swapaxes(db, -1, -2) if ty else db
    op = get_op_def("matmul")
    attrs = dict(transpose_X=tx, transpose_Y=ty, alpha=0.3)
    runs = []
    for t in (1, 2):
        with threads.using(t):
            out = op.forward(x, y, **attrs)["Out"]
            g = op.backward(x, y, d, **attrs)
        runs.append((out, g["X"], g["Y"]))
        for got, want in ((out, want_out), (g["X"], want_dx), (g["Y"], want_dy)):
            assert got.dtype == np.float32 and got.shape == want.shape
            assert got.flags.c_contiguous
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    for one, two in zip(*runs):
        assert np.array_equal(one, two)
    only = op.backward(x, y, d, wanted={"Y"}, **attrs)
    assert set(only) == {"Y"} and np.array_equal(only["Y"], runs[1][2])
