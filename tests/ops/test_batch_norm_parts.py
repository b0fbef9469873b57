"""batch_norm and batch_norm_grad over channel parts on the thread pool (fluidlite/ops/norm.py,
two threads or more) and over cache-sized blocks of channels on big maps: the same bits for
every thread count, the one-pass kernels' values (one thread), float64 formulas,
every requested gradient and only those, and a float64 numeric gradient check through the
parts."""
import numpy as np
import pytest

from fluidlite.core import threads
from fluidlite.core.registry import get_op_def
from fluidlite.ops import broadcast, norm
from fluidlite.testing import OpTest
from tests.ops.test_batch_norm_buffers import _reference

BN, BN_GRAD = get_op_def("batch_norm"), get_op_def("batch_norm_grad")
SLOTS = ("X@GRAD", "Scale@GRAD", "Bias@GRAD")
NEVER = 1 << 62             # ``blocks_from``: no cache-sized blocks, the thread halves only


@pytest.fixture(autouse=True)
def _parts_from_64k(monkeypatch):
    """The cases here are small enough to check: let maps of 64K elements take the parts
    (the threshold has its own test)."""
    monkeypatch.setattr(norm, "_BN_PARALLEL_MIN", 1 << 16)


def _case(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    c = shape[1]
    x = (rng.standard_normal(shape) * 3 + 2).astype(dtype)
    scale, bias = (rng.standard_normal(c).astype(dtype) for _ in range(2))
    dy = rng.standard_normal(shape).astype(dtype)
    return x, scale, bias, dy


def _run(x, scale, bias, dy, wanted=None):
    c = x.shape[1]
    out = BN.forward(x, scale, bias, np.zeros(c, x.dtype), np.ones(c, x.dtype), momentum=0.9)
    grads = BN_GRAD.forward(x, scale, out["SavedMean"], out["SavedVariance"], dy,
                            wanted=wanted)
    return out, {k: np.asarray(grads[k]) for k in (wanted or SLOTS)}


@pytest.mark.parametrize("shape", [(4, 5, 64, 64), (2, 64, 33, 31), (3, 2, 128, 100)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_parts_give_the_one_pass_bits_for_any_thread_count(shape, dtype):
    x, scale, bias, dy = _case(shape, dtype)
    with threads.using(2):
        assert norm._channel_parts(x, 1, NEVER) is not None
    inputs = [a.copy() for a in (x, scale, bias, dy)]
    runs = []
    for n in (2, 3, 4):
        with threads.using(n):
            runs.append(_run(x, scale, bias, dy))
    for out, grads in runs[1:]:
        for k in ("Y", "MeanOut", "VarianceOut", "SavedMean", "SavedVariance"):
            assert out[k].dtype == dtype and np.array_equal(out[k], runs[0][0][k]), k
        for k in SLOTS:
            assert grads[k].dtype == dtype and np.array_equal(grads[k], runs[0][1][k]), k
    # one thread: the one-pass kernel, the same formulas (einsum may order a part's sums
    # differently)
    with threads.using(1):
        assert norm._channel_parts(x, 1, NEVER) is None
        out1, grads1 = _run(x, scale, bias, dy)
    close = 2e-6 if dtype == np.float32 else 1e-13
    for k in ("Y", "SavedMean", "SavedVariance"):
        np.testing.assert_allclose(out1[k], runs[0][0][k], rtol=close, atol=close)
    for k in SLOTS:
        np.testing.assert_allclose(grads1[k], runs[0][1][k], rtol=close * 10, atol=close * 10)
    for a, b in zip(inputs, (x, scale, bias, dy)):
        assert np.array_equal(a, b)                              # inputs never written
    y_ref, g_ref = _reference(x, scale, dy, (0, 2, 3), (1, shape[1], 1, 1))
    tol = 1e-4 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(runs[0][0]["Y"], y_ref + bias.reshape(1, -1, 1, 1), rtol=tol,
                               atol=tol)
    for k in SLOTS:
        np.testing.assert_allclose(runs[0][1][k], g_ref[k], rtol=tol, atol=tol * 10)


@pytest.mark.parametrize("wanted", [{"X@GRAD"}, {"X@GRAD", "Bias@GRAD"}, set(SLOTS)])
def test_only_the_wanted_gradients_come_back(wanted):
    x, scale, bias, dy = _case((4, 6, 64, 64), np.float32, seed=1)
    with threads.using(2):
        _, grads = _run(x, scale, bias, dy, wanted=frozenset(wanted))
    full = _run(x, scale, bias, dy)[1]
    assert set(grads) == wanted
    for k in wanted:
        assert np.array_equal(grads[k], full[k])


def test_numeric_gradient_through_the_parts(monkeypatch):
    monkeypatch.setattr(norm, "_BN_PARALLEL_MIN", 1)
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 4, 5, 6)) * 2 + 1
    with threads.using(2):
        assert norm._channel_parts(x, 1, NEVER) is not None
    check = OpTest()
    check.op_type = "batch_norm"
    c = x.shape[1]
    check.inputs = {"X": x, "Scale": rng.standard_normal(c) + 1.5, "Bias": rng.standard_normal(c),
                    "Mean": np.zeros(c), "Variance": np.ones(c)}
    check.attrs = {"epsilon": 1e-5, "momentum": 0.9}
    with threads.using(2):
        check.outputs = {"Y": BN.forward(**check.inputs, **check.attrs)["Y"]}
        check.check_grad(["X", "Scale", "Bias"], "Y")


def test_one_thread_small_channel_last_and_test_mode_keep_one_pass():
    x = np.ones((64, 64, 8, 4), np.float32)
    with threads.using(1):
        assert norm._channel_parts(x, 1, NEVER) is None                               # one thread
    with threads.using(2):
        assert norm._channel_parts(x, 1, NEVER) is not None
        assert norm._channel_parts(x, 3, NEVER) is None                               # NHWC
        assert norm._channel_parts(np.ones((2, 3, 4, 4), np.float32), 1, NEVER) is None   # small
        assert norm._channel_parts(np.ones((70000, 1), np.float32), 1, NEVER) is None     # no map
        assert norm._channel_parts(x.astype(np.float16), 1, NEVER) is None


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_big_maps_run_in_blocks_of_channels_with_the_same_bits_on_any_thread_count(
        dtype, monkeypatch):
    x, scale, bias, dy = _case((3, 7, 20, 24), dtype, seed=3)
    monkeypatch.setattr(norm, "_BLOCK_BYTES", 2 * x.nbytes // 7)      # two channels' share
    blocks = norm._channel_parts(x, 1, 2 * norm._BLOCK_BYTES)
    assert blocks == [(0, 1), (1, 3), (3, 5), (5, 7)]       # 2 channels at most, an even count
    assert norm._channel_parts(x, 1, x.nbytes + 1) is None                # under the size
    runs = []
    for n in (1, 2, 3):
        with threads.using(n):
            runs.append(_run(x, scale, bias, dy))
    for out, grads in runs[1:]:
        for k in ("Y", "SavedMean", "SavedVariance"):
            assert np.array_equal(out[k], runs[0][0][k]), k
        for k in SLOTS:
            assert np.array_equal(grads[k], runs[0][1][k]), k
    y_ref, g_ref = _reference(x, scale, dy, (0, 2, 3), (1, 7, 1, 1))
    tol = 1e-4 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(runs[0][0]["Y"], y_ref + bias.reshape(1, -1, 1, 1), rtol=tol,
                               atol=tol)
    for k in SLOTS:
        np.testing.assert_allclose(runs[0][1][k], g_ref[k], rtol=tol, atol=tol * 10)


def test_maps_under_the_threshold_take_one_pass(monkeypatch):
    """Two parallel halves from ``_BN_PARALLEL_MIN`` elements on (under it one pass is
    faster): the boundary itself."""
    monkeypatch.undo()
    n = norm._BN_PARALLEL_MIN // (16 * 16)
    with threads.using(2):
        assert norm._channel_parts(np.ones((n, 16, 4, 4), np.float32), 1, NEVER) is not None
        assert norm._channel_parts(np.ones((n - 1, 16, 4, 4), np.float32), 1, NEVER) is None


@pytest.mark.parametrize("shape", [(5, 6, 4, 4), (3, 4, 7, 7), (2, 3, 5), (6, 5, 40, 9)])
@pytest.mark.parametrize("n_threads", [1, 2])
def test_short_channel_runs_broadcast_expanded_vectors_with_the_same_bits(shape, n_threads,
                                                                          monkeypatch):
    """A map whose channel runs are short broadcasts its per-channel vectors repeated over the
    run (``_bc``: NumPy loops over whole rows): forward and gradients give exactly the bits
    of the plain [1, C, 1, 1] broadcast, through the one pass and the parts."""
    monkeypatch.setattr(norm, "_BN_PARALLEL_MIN", 1)
    x, scale, bias, dy = _case(shape, np.float32, seed=4)
    inner = int(np.prod(shape[2:]))
    plain_shape = (1, shape[1]) + (1,) * (len(shape) - 2)
    assert norm._bc(scale, x, 1).shape == (shape[1:] if inner < broadcast.LONG_RUN else plain_shape)
    with threads.using(n_threads):
        expanded = _run(x, scale, bias, dy)
        monkeypatch.setattr(broadcast, "LONG_RUN", 1)      # never expanded
        plain = _run(x, scale, bias, dy)
    for a, b in zip(expanded, plain):
        for k in a:
            assert np.array_equal(a[k], b[k]), k
