"""layer_norm keeps its normalized rows for its gradient (``LayerNorm.forward_saving`` /
``backward_saved``, paired at plan time by executor/fusion/patterns/saved_grad.py): the
gradient reads them instead of centring and scaling X again. The same operations, so the
unfused ops' bits -- on one thread and two (rows in parallel parts), with and without Scale
and Bias -- and the gradient op's own kernel where nothing was kept."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core import registry
from fluidlite.core import threads
from fluidlite.executor import fusion
from fluidlite.executor.fusion.patterns import saved_grad

L = fluid.layers
LN, LN_GRAD = registry.get_op_def("layer_norm"), registry.get_op_def("layer_norm_grad")


def build(dtype, rows, affine=True):
    """x [rows, 64] -> fc(256) -> layer_norm -> fc(4) -> mean square, trained by SGD."""
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 3
    with fluid.unique_name.guard(), fluid.program_guard(main, startup):
        x = fluid.data("x", [rows, 64], dtype)
        h = L.layer_norm(L.fc(x, 256), scale=affine, shift=affine, begin_norm_axis=1)
        loss = L.mean(L.square(L.fc(h, 4)))
        fluid.optimizer.SGD(0.005).minimize(loss)
    return main, startup, loss


def train(dtype, rows, affine, steps=3):
    main, startup, loss = build(dtype, rows, affine)
    block = main.global_block()
    types = [op.type for op in fusion.fuse(list(block.ops), block, [loss.name], ["x"])]
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    x = np.random.default_rng(0).standard_normal((rows, 64)).astype(dtype) * 2 + 0.5
    losses = [exe.run(main, feed={"x": x}, fetch_list=[loss], scope=scope)[0]
              for _ in range(steps)]
    params = [np.asarray(scope.find_var(p.name).get_tensor()).copy()
              for p in main.all_parameters()]
    return types, losses + params


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("rows,nthreads", [(16, 1), (512, 2), (512, 1)])   # 512 x 256: parts
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_trains_with_the_unfused_bits(dtype, rows, nthreads, affine, monkeypatch):
    with threads.using(nthreads):
        types, got = train(dtype, rows, affine)
        assert "fused(layer_norm+saved)" in types and "fused(saved+layer_norm_grad)" in types
        assert "layer_norm" not in types and "layer_norm_grad" not in types
        monkeypatch.setattr(fusion, "PIPELINE", tuple(
            p for p in fusion.PIPELINE if p is not saved_grad.SAVED_GRAD))
        types, want = train(dtype, rows, affine)
        assert "layer_norm_grad" in types
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and np.array_equal(g, w)
    assert got[2] < got[0]                                  # it learns


@pytest.mark.parametrize("shape,axis", [((6, 5, 40), 2), ((600, 256), 1), ((3, 4, 5), 1)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_saved_rows_give_the_gradient_ops_bits(shape, axis, dtype):
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(shape) * 3 + 1).astype(dtype)
    right = int(np.prod(shape[axis:]))
    scale, bias = rng.standard_normal(right).astype(dtype), rng.standard_normal(right).astype(dtype)
    dy = rng.standard_normal(shape).astype(dtype)
    for s, b in ((scale, bias), (None, None), (scale, None)):
        with threads.using(2):
            outs, saved = LN.forward_saving(x, s, b, epsilon=1e-5, begin_norm_axis=axis)
            want = LN.forward(x, s, b, epsilon=1e-5, begin_norm_axis=axis)
            for k in want:
                assert np.array_equal(outs[k], want[k]), k
            ref = LN_GRAD.forward(x, s, want["Mean"], want["Variance"], dy, epsilon=1e-5,
                                  begin_norm_axis=axis)
            xc = x.reshape(saved.shape) - want["Mean"][:, None]
            np.testing.assert_allclose(saved, xc / np.sqrt(want["Variance"][:, None] + 1e-5),
                                       rtol=1e-5, atol=1e-5)
            for wanted in (None, {"X"}, {"Scale", "Bias"}):
                got = LN.backward_saved(saved, x, s, want["Mean"], want["Variance"], dy,
                                        wanted=wanted, epsilon=1e-5, begin_norm_axis=axis)
                keys = {"X", "Scale", "Bias"} if wanted is None else wanted
                assert set(got) == keys
                for k in keys:
                    assert np.array_equal(got[k], ref[k + "@GRAD"]), (k, wanted)


def test_other_dtypes_keep_nothing_and_take_the_gradient_ops_kernel():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 4, 16)).astype(np.float16)
    scale = rng.uniform(0.5, 2, 16).astype(np.float16)
    bias = rng.standard_normal(16).astype(np.float16)
    kw = {"epsilon": 0.25, "begin_norm_axis": 2}            # not the defaults
    outs, saved = LN.forward_saving(x, scale, bias, **kw)
    assert saved is None
    want = LN.forward(x, scale, bias, **kw)
    assert all(np.array_equal(outs[k], want[k]) for k in want)
    dy = rng.standard_normal(x.shape).astype(np.float16)
    ref = LN_GRAD.forward(x, scale, want["Mean"], want["Variance"], dy, **kw)
    for wanted in (None, {"X"}, {"Scale", "Bias"}):
        got = LN.backward_saved(None, x, scale, want["Mean"], want["Variance"], dy,
                                wanted=wanted, **kw)
        assert set(got) == ({"X", "Scale", "Bias"} if wanted is None else wanted)
        for k in got:
            assert np.array_equal(got[k], ref[k + "@GRAD"]), k


def test_the_defaults_are_the_ops_defaults():
    rng = np.random.default_rng(4)
    x, dy = rng.standard_normal((5, 12)), rng.standard_normal((5, 12))
    scale, bias = rng.standard_normal(12), rng.standard_normal(12)
    outs, saved = LN.forward_saving(x, scale, bias)
    want = LN.forward(x, scale, bias)
    assert all(np.array_equal(outs[k], want[k]) for k in want)
    got = LN.backward_saved(saved, x, scale, want["Mean"], want["Variance"], dy)
    ref = LN_GRAD.forward(x, scale, want["Mean"], want["Variance"], dy)
    assert all(np.array_equal(got[k], ref[k + "@GRAD"]) for k in got)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("rows,right", [(1, 8), (3, 9), (513, 256), (1024, 768), (7, 1), (5, 7)])
def test_column_sums_are_numpys_column_sums_bit_for_bit(dtype, rows, right):
    """dScale and dBias through einsum from 8 columns: NumPy's axis-0 sums, the same bits."""
    from fluidlite.ops.norm import _column_sums
    rng = np.random.default_rng(rows * right)
    dy = (rng.standard_normal((rows, right)) * 10 ** rng.uniform(-3, 3, (rows, 1))).astype(dtype)
    xh = rng.standard_normal((rows, right)).astype(dtype)
    assert np.array_equal(_column_sums(dy), dy.sum(axis=0))
    assert np.array_equal(_column_sums(dy, xh), (dy * xh).sum(axis=0))
    assert _column_sums(dy).dtype == dtype
