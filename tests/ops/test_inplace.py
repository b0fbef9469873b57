"""In-place update variants (``ops/inplace.py``): every update op's ``update_in_place`` equals its
``forward`` bit for bit; scratch is per thread; the float64 sum of squares."""
import numpy as np
import pytest

from fluidlite.core import threads
from fluidlite.core.registry import get_op_def
from fluidlite.ops import inplace

from .test_optim import LR

_F32 = lambda v: np.array([v], "float32")   # noqa: E731


def _update_inputs(op, n, seed):
    """Inputs for ``op`` with ``n``-element arrays (accumulators of the right sign)."""
    rng = np.random.default_rng(seed)
    a = lambda lo=-1.0, hi=1.0: rng.uniform(lo, hi, n).astype("float32")   # noqa: E731
    p, g = a(), a()
    table = {
        "sgd": ({"Param": p, "LearningRate": LR, "Grad": g}, {}),
        "momentum": ({"Param": p, "Grad": g, "Velocity": a(), "LearningRate": LR},
                     {"mu": 0.9, "use_nesterov": seed % 2 == 1}),
        "lars_momentum": ({"Param": p, "Grad": g, "Velocity": a(), "LearningRate": LR},
                          {"mu": 0.9, "lars_coeff": 0.001, "lars_weight_decay": 0.0005}),
        "adagrad": ({"Param": p, "Grad": g, "Moment": a(0, 1), "LearningRate": LR},
                    {"epsilon": 1e-6}),
        "decayed_adagrad": ({"Param": p, "Grad": g, "Moment": a(0, 1), "LearningRate": LR},
                            {"decay": 0.95, "epsilon": 1e-6}),
        "adam": ({"Param": p, "Grad": g, "LearningRate": LR, "Moment1": a(), "Moment2": a(0, 1),
                  "Beta1Pow": _F32(0.9 ** 3), "Beta2Pow": _F32(0.999 ** 3)},
                 {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8}),
        "adamax": ({"Param": p, "Grad": g, "LearningRate": LR, "Moment": a(),
                    "InfNorm": a(0, 1), "Beta1Pow": _F32(0.9 ** 2)},
                   {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8}),
        "adadelta": ({"Param": p, "Grad": g, "AvgSquaredGrad": a(0, 1),
                      "AvgSquaredUpdate": a(0, 1), "LearningRate": LR},
                     {"rho": 0.95, "epsilon": 1e-6}),
        "rmsprop": ({"Param": p, "MeanSquare": a(1, 2), "MeanGrad": a(-0.5, 0.5),
                     "LearningRate": LR, "Grad": g, "Moment": a()},
                    {"epsilon": 1e-10, "decay": 0.9, "momentum": 0.5,
                     "centered": seed % 2 == 1}),
        "ftrl": ({"Param": p, "SquaredAccumulator": a(0.1, 1), "LinearAccumulator": a(),
                  "Grad": g, "LearningRate": LR},
                 {"l1": 0.1, "l2": 0.01, "lr_power": -0.5 if seed % 2 else -0.3}),
        "lamb": ({"Param": p, "Grad": g, "LearningRate": LR, "Moment1": a(), "Moment2": a(0, 1),
                  "Beta1Pow": _F32(0.5), "Beta2Pow": _F32(0.5)},
                 {"weight_decay": 0.01, "beta1": 0.9, "beta2": 0.999, "epsilon": 1e-6}),
    }
    return table[op]


_UPDATE_TYPES = ["sgd", "momentum", "lars_momentum", "adagrad", "decayed_adagrad", "adam",
                 "adamax", "adadelta", "rmsprop", "ftrl", "lamb"]


@pytest.mark.parametrize("scale", [None, np.float32(0.37), np.float64(3e-39)],
                         ids=["noscale", "scale", "tinyscale"])


@pytest.mark.parametrize("nthreads", [1, 2], ids=["1thread", "2threads"])
@pytest.mark.parametrize("n", [7, 3000], ids=["one_chunk", "chunked"])
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("op", _UPDATE_TYPES)
def test_update_in_place_is_forward_bit_for_bit(op, seed, n, scale, nthreads, monkeypatch):
    monkeypatch.setattr(inplace, "CHUNK", 1024)        # 3000 elements: three chunks, two parts
    opdef = get_op_def(op)
    ins, attrs = _update_inputs(op, n, seed)
    grad = ins["Grad"]
    if scale is not None:        # what forward sees: Grad * scale rounded once to float32
        grad = (grad * scale).astype("float32") if scale.dtype == np.float64 else grad * scale
    args = [dict(ins, Grad=grad).get(s.name) for s in opdef.in_slots]
    want = opdef.forward(*args, **attrs)
    mine = {k: v.copy() for k, v in ins.items()}
    buffers = {k: mine[k] for k in ["Param"] + [i for i, _ in opdef.state_slots if i in mine]}
    with threads.using(nthreads):
        rest = opdef.update_in_place(mine, scale, attrs)
    got = dict(rest, ParamOut=buffers["Param"])
    for i, o in opdef.state_slots:
        if i in buffers:
            got[o] = buffers[i]
    assert set(got) >= set(want)
    for k, v in want.items():
        assert got[k].dtype == v.dtype and got[k].shape == v.shape, k
        assert got[k].tobytes() == v.tobytes(), (op, k)
    assert ins["Grad"] is not grad or scale is None


@pytest.mark.parametrize("ordered", [False, True])
def test_chunked_parts_take_their_own_scratch_unless_ordered(ordered, monkeypatch):
    import threading
    monkeypatch.setattr(inplace, "CHUNK", 1000)
    n = 4500                                        # five chunks: parts of two and three
    p, g, m = np.zeros(n, "float32"), np.arange(n, dtype="float32"), np.zeros(n, "float32")
    seen = []

    def body(p_, g_, st, t):
        seen.append((threading.current_thread().name, g_.size, id(t[0].base)))
        t[0][...] = g_                              # a scratch chunk of the part's own
        np.add(st[0], t[0], out=st[0])
        np.subtract(p_, t[0], out=p_)
    with threads.using(2):
        inplace.chunked({"Param": p, "Grad": g, "M": m}, ("M",), None, 1, body,
                        ordered=ordered)
    assert np.array_equal(m, g) and np.array_equal(p, -g)
    assert [s for _, s, _ in sorted(seen, key=lambda e: e[1])] == [500] + [1000] * 4
    parts = {}
    for _, size, buf in seen:
        parts[buf] = parts.get(buf, 0) + size
    # two parts of whole chunks (2 and 3), each on its own scratch; ordered: one, here
    assert sorted(parts.values()) == ([n] if ordered else [2000, 2500])
    if ordered or not threads.blas_available():
        assert {name for name, _, _ in seen} == {threading.current_thread().name}


def test_chunked_extra_scratch_never_aliases(monkeypatch):
    monkeypatch.setattr(inplace, "CHUNK", 1000)
    p, g = np.zeros(2500, "float32"), np.ones(2500, "float32")
    seen = []

    def body(p_, g_, st, t):
        seen.append([x.__array_interface__["data"][0] for x in (g_, *t)])
    with threads.using(2):
        inplace.chunked({"Param": p, "Grad": g}, (), np.float32(2), 2, body,
                        (np.float32, np.bool_, np.bool_))
    for bufs in seen:       # the scaled gradient, 2 temporaries, 3 extras: all distinct
        assert len(bufs) == 6 and len(set(bufs)) == 6


@pytest.mark.parametrize("op", ["adam", "ftrl"])
def test_reserved_scratch_covers_every_part(op, monkeypatch):
    """What a fused update group reserves (``in_place_scratch``, every part) is all a
    two-thread update then takes: a MemoryError can only come before anything is written."""
    import threading
    monkeypatch.setattr(inplace, "CHUNK", 1024)
    opdef = get_op_def(op)
    ins, attrs = _update_inputs(op, 3000, 0)
    got = []

    def work():                                     # a fresh thread: an empty scratch pool
        for want, count, tag in opdef.in_place_scratch:
            inplace.reserve(ins["Param"].dtype if want is None else want, count, tag)
        before = dict(inplace._tls.pool)
        with threads.using(2):
            opdef.update_in_place({k: v.copy() for k, v in ins.items()}, None, attrs)
        after = inplace._tls.pool
        got.append(after.keys() == before.keys() and all(after[k] is before[k] for k in after))
    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert got == [True]


def test_scratch_is_per_thread():
    import threading
    mine = inplace.scratch(np.float32, 2)
    assert inplace.scratch(np.float32, 2) is mine          # reused within a thread
    other = []
    t = threading.Thread(target=lambda: other.append(inplace.scratch(np.float32, 2)))
    t.start()
    t.join()
    assert not any(a is b or np.shares_memory(a, b) for a in mine for b in other[0])


def test_sum_squares_is_float64_and_chunk_invariant(monkeypatch):
    monkeypatch.setattr(inplace, "CHUNK", 1024)
    x = np.full(inplace.CHUNK * 2 + 5, 3e19, "float32")       # float32 squares overflow
    assert np.isinf(np.vdot(x, x))
    assert inplace.sum_squares(x) == pytest.approx(x.size * float(x[0]) ** 2, rel=1e-12)
    g = np.random.default_rng(0).normal(size=inplace.CHUNK + 9).astype("float32")
    s = np.float32(0.3)
    assert inplace.sum_squares(g, s) == inplace.sum_squares(g * s)


def test_lars_and_lamb_norms_do_not_overflow():
    p = np.full((4, 5), 1e20, "float32")     # |P|^2 = 2e41: inf in float32
    g = np.full((4, 5), 2e19, "float32")
    v = np.zeros_like(p)
    out = get_op_def("lars_momentum").forward(p, g, v, LR, mu=0.0, lars_coeff=0.001,
                                              lars_weight_decay=0.0)
    # local_lr = lr * coeff * |P| / |G| = 0.1 * 0.001 * 5
    np.testing.assert_allclose(out["VelocityOut"], 0.1 * 0.001 * 5 * g, rtol=1e-6)
    g = np.full((4, 5), 1e18, "float32")
    out = get_op_def("lamb").forward(p, g, LR, np.zeros_like(p), np.zeros_like(p), LR, LR,
                                     weight_decay=0.0, beta1=0.0, beta2=0.0, epsilon=0.0)
    # r = g / |g| elementwise = 1, trust = |P| / |r| = 1e20 * sqrt(20) / sqrt(20) = 1e20
    assert np.isfinite(out["ParamOut"]).all()
    np.testing.assert_allclose(out["ParamOut"], p - 0.1 * 1e20, rtol=1e-6)
