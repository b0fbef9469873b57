"""Adagrad-family update ops (``ops/optim_adagrad.py``) against closed-form NumPy references."""
import numpy as np
import pytest

from .test_optim import LR, _Case, r


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
