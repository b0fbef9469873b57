"""``broadcast.whole_runs``: NumPy's ufunc buffer at its smallest around elementwise ops whose
broadcast operand repeats along runs shorter than the buffer (per-channel vectors over NCHW
maps, per-row statistics). It must switch only in that range, restore the caller's buffer size
whatever happens, stay on its own thread, and never change a result: batch norm, layer norm,
the elementwise ops and the fused convolution's bias give the same bits with and without it
(on NumPy 1.x a reduction inside would not: it sums in buffer-sized chunks)."""
import threading

import numpy as np
import pytest

from fluidlite.core import threads
from fluidlite.core.registry import VarSpec, get_op_def
from fluidlite.ops import broadcast as B
from fluidlite.ops.broadcast import repeat_run, whole_runs


BIG = B._SWITCH_MIN


@pytest.mark.parametrize("run, on", [(0, False), (B.LONG_RUN - 1, False), (B.LONG_RUN, True),
                                     (3136, True), (8191, True), (8192, False), (-1, False)])
def test_switches_only_for_runs_shorter_than_the_buffer(run, on):
    before = np.getbufsize()
    with whole_runs(run, BIG) as w:
        assert w.active is on
        assert np.getbufsize() == (16 if on else before)
    assert np.getbufsize() == before
    assert B.buffered_run(run) is on


@pytest.mark.parametrize("size, on", [(0, False), (BIG - 1, False), (BIG, True), (BIG * 64, True)])
def test_switches_only_when_the_work_pays_for_the_switch(size, on):
    before = np.getbufsize()
    with whole_runs(3136, size) as w:
        assert w.active is on
        assert np.getbufsize() == (16 if on else before)
    assert np.getbufsize() == before


def test_restores_the_callers_buffer_after_an_error_and_when_nested():
    old = np.setbufsize(4096)
    try:
        with pytest.raises(ZeroDivisionError):
            with whole_runs(1000, BIG):
                with whole_runs(2000, BIG):
                    assert np.getbufsize() == 16
                assert np.getbufsize() == 16
                1 / 0
        assert np.getbufsize() == 4096
        with whole_runs(5000, BIG) as w:             # 5000 >= the caller's 4096: no switch
            assert not w.active and np.getbufsize() == 4096
    finally:
        np.setbufsize(old)


def test_the_buffer_of_other_threads_is_untouched():
    seen = []
    inside, leave = threading.Event(), threading.Event()

    def other():
        inside.wait()
        seen.append(np.getbufsize())
        leave.set()

    t = threading.Thread(target=other)
    t.start()
    with whole_runs(3136, BIG):
        inside.set()
        leave.wait(10)
    t.join()
    assert seen == [8192]


@pytest.mark.parametrize("a, b, run", [
    ((8, 64, 28, 28), (64, 1, 1), 784),
    ((64, 1, 1), (8, 64, 28, 28), 784),
    ((1024, 256), (1024, 1), 256),
    ((8, 256), (256,), 0),
    ((4, 5), (4, 5), 0),
    ((-1, 64, 28, 28), (64, 1, 1), 784),         # an unknown batch does not count
    ((8, 64, -1, 28), (64, 1, 1), -28),           # an unknown map does
    ((8, 64), (1,), 512),                         # a one-element operand repeats everywhere
    ((1,), (8, 64), 512),
])
def test_repeat_run(a, b, run):
    assert repeat_run(a, b) == run


def test_channel_run():
    assert B.channel_run((8, 64, 28, 28), 1) == 784
    assert B.channel_run((8, 28, 28, 64), 3) == 1           # NHWC: no run after the channels
    assert B.channel_run((2, 3, 4, 5, 6), 2) == 30


def _disabled(monkeypatch):
    """whole_runs switching to NumPy's default buffer: the same code path, no effect."""
    monkeypatch.setattr(B, "_SMALLEST_BUFFER", np.getbufsize())


def _both(monkeypatch, fn):
    """``fn()`` switching at every size, then never switching."""
    with threads.using(2):
        monkeypatch.setattr(B, "_SWITCH_MIN", 0)
        on = fn()
        monkeypatch.undo()
        _disabled(monkeypatch)
        off = fn()
        monkeypatch.undo()
    return on, off


@pytest.mark.parametrize("shape", [(4, 16, 28, 28), (2, 8, 56, 56), (3, 32, 16, 16)])
def test_batch_norm_bits_do_not_depend_on_the_buffer(monkeypatch, shape):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(shape) * 3 + 1).astype(np.float32)
    c = shape[1]
    scale, bias = rng.standard_normal(c).astype(np.float32), rng.standard_normal(c).astype(
        np.float32)
    mean, var = np.zeros(c, np.float32), np.ones(c, np.float32)
    dy = rng.standard_normal(shape).astype(np.float32)
    bn, bng = get_op_def("batch_norm"), get_op_def("batch_norm_grad")

    def run():
        out = {k: v.copy() for k, v in bn.forward(x, scale, bias, mean, var).items()}
        g = bng.forward(x, scale, out["SavedMean"], out["SavedVariance"], dy)
        out.update({k: g[k] for k in g})
        test = bn.forward(x, scale, bias, mean, var, is_test=True)["Y"]
        gs = bng.forward(x, scale, out["SavedMean"], out["SavedVariance"], dy,
                         use_global_stats=True)["X@GRAD"]
        return out, test, gs

    (on, test_on, gs_on), (off, test_off, gs_off) = _both(monkeypatch, run)
    assert set(on) >= {"Y", "SavedMean", "X@GRAD", "Scale@GRAD", "Bias@GRAD"}
    for k in on:
        assert np.array_equal(on[k], off[k]), k
    assert np.array_equal(test_on, test_off) and np.array_equal(gs_on, gs_off)


@pytest.mark.parametrize("rows", [4, 600])
def test_layer_norm_bits_do_not_depend_on_the_buffer(monkeypatch, rows):
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((rows, 512)) * 2 + 3).astype(np.float32)
    s, b = rng.standard_normal(512).astype(np.float32), rng.standard_normal(512).astype(
        np.float32)
    dy = rng.standard_normal(x.shape).astype(np.float32)
    ln, lng = get_op_def("layer_norm"), get_op_def("layer_norm_grad")

    def run():
        out = dict(ln.forward(x, s, b))
        g = lng.forward(x, s, out["Mean"], out["Variance"], dy)
        out.update({k: g[k] for k in ("X@GRAD", "Scale@GRAD", "Bias@GRAD")})
        xh = lng.forward(x, s, out["Mean"], out["Variance"], dy)["Scale@GRAD"]   # xhat first
        return out, xh

    (on, xh_on), (off, xh_off) = _both(monkeypatch, run)
    for k in on:
        assert np.array_equal(on[k], off[k]), k
    assert np.array_equal(xh_on, xh_off)


@pytest.mark.parametrize("op", ["elementwise_add", "elementwise_mul", "elementwise_sub",
                                "elementwise_div"])
def test_per_channel_elementwise_ops_run_and_lower_with_whole_runs(monkeypatch, op):
    """fluid's conv bias: Y [C] at axis 1 of an NCHW map; forward and the lowered kernel equal
    NumPy's own broadcast, and the lowered kernel is the wrapped one only in the slow range."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 6, 28, 28)).astype(np.float32)
    y = (rng.standard_normal(6) + 3).astype(np.float32)
    d = get_op_def(op)
    want = {"elementwise_add": np.add, "elementwise_mul": np.multiply,
            "elementwise_sub": np.subtract, "elementwise_div": np.divide}[op](
        x, y.reshape(6, 1, 1))
    got = d.forward(x, y, axis=1)["Out"]
    assert np.array_equal(got, want)
    kernel = d.lower([VarSpec((-1, 6, 28, 28), x.dtype), VarSpec((6,), y.dtype)], {"axis": 1})
    assert np.array_equal(kernel(x, y), want)
    seen = []
    monkeypatch.setattr(B.whole_runs, "__enter__",
                        lambda self: seen.append(np.getbufsize()) or self)
    monkeypatch.setattr(B.whole_runs, "__exit__", lambda self, *exc: None)
    kernel(x, y)
    assert seen == [8192]          # the wrapped kernel (the fake enter never switched)
    seen.clear()
    plain = d.lower([VarSpec((-1, 6), x.dtype), VarSpec((6,), y.dtype)], {"axis": 1})
    assert np.array_equal(plain(x[:, :, 0, 0], y), want[:, :, 0, 0])
    assert seen == []              # rows of a [N, C] matrix: NumPy's plain broadcast


@pytest.mark.parametrize("stride", [1, 2])
def test_depthwise_tap_kernels_bits_do_not_depend_on_the_buffer(monkeypatch, stride):
    """The flat depthwise kernels multiply each row's L = oh * Wq pixels by its weight."""
    from fluidlite.ops import _conv_kernels as K
    from fluidlite.ops import conv as C
    rng = np.random.default_rng(3)
    h = 28 * stride
    x = rng.standard_normal((2, 8, h, h)).astype(np.float32)
    w = rng.standard_normal((16, 1, 3, 3)).astype(np.float32)        # multiplier 2
    g = C._geom((h, h), (3, 3), (stride, stride), (1, 1), (1, 1), "EXPLICIT", 8)
    assert g.oh * g.ow >= K._ROWS_LAST_MAX                       # the flat kernels
    assert whole_runs(g.oh * -(-g.Wp // g.sw), BIG).active
    dy = rng.standard_normal((2, 16, g.oh, g.ow)).astype(np.float32)
    on, off = _both(monkeypatch, lambda: (K._taps_fwd(x, w, g), K._taps_dx(dy, w, g, 8)))
    assert np.array_equal(on[0], off[0]) and np.array_equal(on[1], off[1])


def test_softmax_over_rows_of_classes_bits_do_not_depend_on_the_buffer(monkeypatch):
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((600, 1000)) * 3).astype(np.float32)      # two parallel parts
    d = rng.standard_normal(x.shape).astype(np.float32)
    op = get_op_def("softmax")
    assert whole_runs(1000, x.size).active

    def run():
        out = op.forward(x)["Out"]
        return out, op.backward(out, d)["X"]

    on, off = _both(monkeypatch, run)
    assert np.array_equal(on[0], off[0]) and np.array_equal(on[1], off[1])
