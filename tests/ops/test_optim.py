"""Optimizer update ops against closed-form NumPy references (one step each; the optimizer
tests check several steps through ``minimize``). All are ``no_grad`` ops."""
import numpy as np
import pytest

from fluidlite.core.registry import get_op_def
from fluidlite.testing import OpTest

SHAPE = (3, 4)


def r(seed, low=-1.0, high=1.0, shape=SHAPE):
    return OpTest.rand(*shape, low=low, high=high, dtype="float32", seed=seed)


LR = np.array([0.1], dtype="float32")


class _Case(OpTest):
    def test_infer_and_output(self):
        self.setup_method()
        assert get_op_def(self.op_type).no_grad
        self.check_infer()
        self.check_output(atol=1e-5, rtol=1e-4)


class TestSgd(_Case):
    op_type = "sgd"

    def setup_method(self, *_):
        p, g = r(0), r(1)
        self.inputs = {"Param": p, "LearningRate": LR, "Grad": g}
        self.outputs = {"ParamOut": p - 0.1 * g}


@pytest.mark.parametrize("nesterov", [False, True])
def test_momentum(nesterov):
    class T(_Case):
        op_type = "momentum"

        def setup_method(self, *_):
            p, g, v = r(0), r(1), r(2)
            self.inputs = {"Param": p, "Grad": g, "Velocity": v, "LearningRate": LR}
            self.attrs = {"mu": 0.9, "use_nesterov": nesterov}
            v_out = 0.9 * v + g
            p_out = p - (g + 0.9 * v_out) * 0.1 if nesterov else p - 0.1 * v_out
            self.outputs = {"ParamOut": p_out, "VelocityOut": v_out}
    T().test_infer_and_output()


class TestLarsMomentum(_Case):
    op_type = "lars_momentum"

    def setup_method(self, *_):
        p, g, v = r(0), r(1), r(2)
        self.inputs = {"Param": p, "Grad": g, "Velocity": v, "LearningRate": LR}
        self.attrs = {"mu": 0.9, "lars_coeff": 0.001, "lars_weight_decay": 0.0005}
        pn, gn = np.linalg.norm(p), np.linalg.norm(g)
        llr = 0.1 * 0.001 * pn / (gn + 0.0005 * pn)
        v_out = 0.9 * v + llr * (g + 0.0005 * p)
        self.outputs = {"ParamOut": p - v_out, "VelocityOut": v_out}


class TestAdagrad(_Case):
    op_type = "adagrad"

    def setup_method(self, *_):
        p, g, m = r(0), r(1), r(2, 0.0, 1.0)
        self.inputs = {"Param": p, "Grad": g, "Moment": m, "LearningRate": LR}
        self.attrs = {"epsilon": 1e-6}
        m_out = m + g * g
        self.outputs = {"ParamOut": p - 0.1 * g / (np.sqrt(m_out) + 1e-6), "MomentOut": m_out}


class TestDecayedAdagrad(_Case):
    op_type = "decayed_adagrad"

    def setup_method(self, *_):
        p, g, m = r(0), r(1), r(2, 0.0, 1.0)
        self.inputs = {"Param": p, "Grad": g, "Moment": m, "LearningRate": LR}
        self.attrs = {"decay": 0.95, "epsilon": 1e-6}
        m_out = 0.95 * m + 0.05 * g * g
        self.outputs = {"ParamOut": p - 0.1 * g / (np.sqrt(m_out) + 1e-6), "MomentOut": m_out}


class TestAdam(_Case):
    op_type = "adam"

    def setup_method(self, *_):
        p, g, m1, m2 = r(0), r(1), r(2), r(3, 0.0, 1.0)
        b1p, b2p = np.array([0.9 ** 3], "float32"), np.array([0.999 ** 3], "float32")
        self.inputs = {"Param": p, "Grad": g, "LearningRate": LR, "Moment1": m1, "Moment2": m2,
                       "Beta1Pow": b1p, "Beta2Pow": b2p}
        self.attrs = {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8}
        m1o = 0.9 * m1 + 0.1 * g
        m2o = 0.999 * m2 + 0.001 * g * g
        lr_t = 0.1 * np.sqrt(1 - b2p) / (1 - b1p)
        po = p - lr_t * m1o / (np.sqrt(m2o) + 1e-8 * np.sqrt(1 - b2p))
        self.outputs = {"ParamOut": po, "Moment1Out": m1o, "Moment2Out": m2o,
                        "Beta1PowOut": b1p * 0.9, "Beta2PowOut": b2p * 0.999}


class TestAdamBetaTensor(TestAdam):
    """Beta1Tensor/Beta2Tensor override the attrs."""

    def setup_method(self, *_):
        super().setup_method()
        self.inputs["Beta1Tensor"] = np.array([0.9], "float32")
        self.inputs["Beta2Tensor"] = np.array([0.999], "float32")
        self.attrs = {"beta1": 0.5, "beta2": 0.5, "epsilon": 1e-8}


class TestAdamax(_Case):
    op_type = "adamax"

    def setup_method(self, *_):
        p, g, m, u = r(0), r(1), r(2), r(3, 0.1, 1.0)
        b1p = np.array([0.81], "float32")
        self.inputs = {"Param": p, "Grad": g, "LearningRate": LR, "Moment": m, "InfNorm": u,
                       "Beta1Pow": b1p}
        self.attrs = {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8}
        mo = 0.9 * m + 0.1 * g
        uo = np.maximum(0.999 * u + 1e-8, np.abs(g))
        self.outputs = {"ParamOut": p - 0.1 / (1 - 0.81) * mo / uo, "MomentOut": mo,
                        "InfNormOut": uo}


@pytest.mark.parametrize("with_lr", [True, False])
def test_adadelta(with_lr):
    class T(_Case):
        op_type = "adadelta"

        def setup_method(self, *_):
            p, g, eg, edx = r(0), r(1), r(2, 0.0, 1.0), r(3, 0.0, 1.0)
            self.inputs = {"Param": p, "Grad": g, "AvgSquaredGrad": eg, "AvgSquaredUpdate": edx}
            if with_lr:
                self.inputs["LearningRate"] = LR
            self.attrs = {"rho": 0.95, "epsilon": 1e-6}
            ego = 0.95 * eg + 0.05 * g * g
            upd = -np.sqrt((edx + 1e-6) / (ego + 1e-6)) * g
            edxo = 0.95 * edx + 0.05 * upd * upd
            self.outputs = {"ParamOut": p + (0.1 if with_lr else 1.0) * upd,
                            "AvgSquaredGradOut": ego, "AvgSquaredUpdateOut": edxo}
    T().test_infer_and_output()


@pytest.mark.parametrize("centered", [False, True])
def test_rmsprop(centered):
    class T(_Case):
        op_type = "rmsprop"

        def setup_method(self, *_):
            p, g, ms, mg, mom = r(0), r(1), r(2, 0.5, 1.0), r(3, -0.1, 0.1), r(4)
            self.inputs = {"Param": p, "MeanSquare": ms, "MeanGrad": mg, "LearningRate": LR,
                           "Grad": g, "Moment": mom}
            self.attrs = {"decay": 0.95, "epsilon": 1e-6, "momentum": 0.5, "centered": centered}
            mso = 0.95 * ms + 0.05 * g * g
            if centered:
                mgo = 0.95 * mg + 0.05 * g
                momo = 0.5 * mom + 0.1 * g / np.sqrt(mso - mgo * mgo + 1e-6)
            else:
                mgo = mg
                momo = 0.5 * mom + 0.1 * g / np.sqrt(mso + 1e-6)
            self.outputs = {"ParamOut": p - momo, "MomentOut": momo, "MeanSquareOut": mso,
                            "MeanGradOut": mgo}
    T().test_infer_and_output()


@pytest.mark.parametrize("lr_power", [-0.5, -0.3])
def test_ftrl(lr_power):
    class T(_Case):
        op_type = "ftrl"

        def setup_method(self, *_):
            p, g, n, z = r(0), r(1), r(2, 0.1, 1.0), r(3)
            l1, l2 = 0.1, 0.2
            self.inputs = {"Param": p, "SquaredAccumulator": n, "LinearAccumulator": z,
                           "Grad": g, "LearningRate": LR}
            self.attrs = {"l1": l1, "l2": l2, "lr_power": lr_power}
            n2 = n + g * g
            z2 = z + g - (n2 ** -lr_power - n ** -lr_power) / 0.1 * p
            po = np.where(np.abs(z2) > l1, (l1 * np.sign(z2) - z2) / (n2 ** -lr_power / 0.1
                                                                     + 2 * l2), 0.0)
            self.outputs = {"ParamOut": po, "SquaredAccumOut": n2, "LinearAccumOut": z2}
    T().test_infer_and_output()


class TestLamb(_Case):
    op_type = "lamb"

    def setup_method(self, *_):
        p, g, m1, m2 = r(0), r(1), r(2), r(3, 0.0, 1.0)
        b = np.array([0.5], "float32")
        self.inputs = {"Param": p, "Grad": g, "LearningRate": LR, "Moment1": m1, "Moment2": m2,
                       "Beta1Pow": b, "Beta2Pow": b}
        self.attrs = {"weight_decay": 0.01, "beta1": 0.9, "beta2": 0.999, "epsilon": 1e-6}
        m1o = 0.9 * m1 + 0.1 * g
        m2o = 0.999 * m2 + 0.001 * g * g
        rr = m1o / (np.sqrt(m2o) + 1e-6) + 0.01 * p
        trust = np.linalg.norm(p) / np.linalg.norm(rr)
        self.outputs = {"ParamOut": p - 0.1 * trust * rr, "Moment1Out": m1o, "Moment2Out": m2o}


def _avg_case(num_updates, num_acc, min_w, max_w, rate):
    class T(_Case):
        op_type = "average_accumulates"

        def setup_method(self, *_):
            p, s1, s2, s3 = r(0), r(1), r(2), r(3)
            i64 = lambda v: np.array([v], "int64")
            self.inputs = {"param": p, "in_sum_1": s1, "in_sum_2": s2, "in_sum_3": s3,
                           "in_num_accumulates": i64(num_acc),
                           "in_old_num_accumulates": i64(7), "in_num_updates": i64(num_updates)}
            self.attrs = {"average_window": rate, "min_average_window": min_w,
                          "max_average_window": max_w}
            nu, na, old = num_updates + 1, num_acc + 1, 7
            o1, o2, o3 = s1 + p, s2, s3
            if nu % 16384 == 0:
                o2, o1 = s2 + s1 + p, np.zeros_like(s1)
            if na >= min_w and na >= min(max_w, nu * rate):
                o3, o1, o2 = o1 + o2, np.zeros_like(s1), np.zeros_like(s2)
                old, na = na, 0
            self.outputs = {"out_sum_1": o1, "out_sum_2": o2, "out_sum_3": o3,
                            "out_num_accumulates": i64(na), "out_old_num_accumulates": i64(old),
                            "out_num_updates": i64(nu)}
    return T()


@pytest.mark.parametrize("args", [(3, 3, 10, 20, 0.5),      # accumulate only
                                  (30, 14, 10, 20, 0.5),    # window reached: roll into sum_3
                                  (16383, 1, 100, 200, 0.5),   # precision guard
                                  (16383, 199, 100, 200, 0.5)])  # guard and window together
def test_average_accumulates(args):
    _avg_case(*args).test_infer_and_output()


def test_average_accumulates_rejects_bad_windows():
    t = _avg_case(3, 3, 30, 20, 0.5)
    t.setup_method()
    with pytest.raises(ValueError, match="min_average_window"):
        t.check_output()


def test_update_ops_keep_float32():
    """No hidden float64 upcast: every output of a float32 update is float32."""
    from fluidlite.core.registry import get_op_def
    p, g = r(0), r(1)
    out = get_op_def("sgd").forward(p, LR, g)["ParamOut"]
    assert out.dtype == np.float32
    out = get_op_def("adam").forward(p, g, LR, p, np.abs(p), np.array([0.9], "float32"),
                                    np.array([0.999], "float32"))
    assert {k: v.dtype for k, v in out.items()} == {k: np.dtype("float32") for k in out}
    out = get_op_def("lamb").forward(p, g, LR, p, np.abs(p), LR, LR)
    assert all(v.dtype == np.float32 for v in out.values())
    out = get_op_def("lars_momentum").forward(p, g, p, LR, mu=0.9)
    assert all(v.dtype == np.float32 for v in out.values())
    out = get_op_def("ftrl").forward(p, np.abs(g), g, g, LR, l1=0.1, lr_power=-0.3)
    assert all(v.dtype == np.float32 for v in out.values())


def test_update_op_rejects_mismatched_grad():
    import fluidlite as fluid
    prog = fluid.Program()
    b = prog.global_block()
    p = b.create_var(name="p", shape=[3, 4], dtype="float32", persistable=True)
    g = b.create_var(name="g", shape=[4, 3], dtype="float32")
    lr = b.create_var(name="lr", shape=[1], dtype="float32", persistable=True)
    with pytest.raises(ValueError, match="Grad shape \\[4, 3\\] must equal Param shape"):
        b.append_op("sgd", {"Param": p, "LearningRate": lr, "Grad": g}, {"ParamOut": p})
    lr2 = b.create_var(name="lr2", shape=[2], dtype="float32", persistable=True)
    with pytest.raises(ValueError, match="LearningRate must hold exactly one element"):
        b.append_op("sgd", {"Param": p, "LearningRate": lr2, "Grad": p}, {"ParamOut": p})


# -- in-place variants (plan-time fusion) -------------------------------------------------------
from fluidlite.ops import optim  # noqa: E402

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
@pytest.mark.parametrize("n", [7, 3000], ids=["one_chunk", "chunked"])
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("op", _UPDATE_TYPES)
def test_update_in_place_is_forward_bit_for_bit(op, seed, n, scale, monkeypatch):
    monkeypatch.setattr(optim, "CHUNK", 1024)        # 3000 elements: three chunks
    opdef = get_op_def(op)
    ins, attrs = _update_inputs(op, n, seed)
    grad = ins["Grad"]
    if scale is not None:        # what forward sees: Grad * scale rounded once to float32
        grad = (grad * scale).astype("float32") if scale.dtype == np.float64 else grad * scale
    args = [dict(ins, Grad=grad).get(s.name) for s in opdef.in_slots]
    want = opdef.forward(*args, **attrs)
    mine = {k: v.copy() for k, v in ins.items()}
    buffers = {k: mine[k] for k in ["Param"] + [i for i, _ in opdef.state_slots if i in mine]}
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


def test_scratch_is_per_thread():
    import threading
    mine = optim.scratch(np.float32, 2)
    assert optim.scratch(np.float32, 2) is mine          # reused within a thread
    other = []
    t = threading.Thread(target=lambda: other.append(optim.scratch(np.float32, 2)))
    t.start()
    t.join()
    assert not any(a is b or np.shares_memory(a, b) for a in mine for b in other[0])


def test_sum_squares_is_float64_and_chunk_invariant(monkeypatch):
    monkeypatch.setattr(optim, "CHUNK", 1024)
    x = np.full(optim.CHUNK * 2 + 5, 3e19, "float32")       # float32 squares overflow
    assert np.isinf(np.vdot(x, x))
    assert optim.sum_squares(x) == pytest.approx(x.size * float(x[0]) ** 2, rel=1e-12)
    g = np.random.default_rng(0).normal(size=optim.CHUNK + 9).astype("float32")
    s = np.float32(0.3)
    assert optim.sum_squares(g, s) == optim.sum_squares(g * s)


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
