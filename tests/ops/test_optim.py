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
