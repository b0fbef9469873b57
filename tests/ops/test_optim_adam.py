"""Adam-family update ops (``ops/optim_adam.py``) against closed-form NumPy references."""
import numpy as np

from .test_optim import LR, _Case, r


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
