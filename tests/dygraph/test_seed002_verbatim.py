"""The seed 002 dygraph example, read from the seed document and run verbatim with
``paddle`` / ``paddle.fluid`` mapped to fluidlite: after ``minimize`` the weights moved by
exactly ``-0.1 * clip(grad, -1, 1)``."""
import glob
import os
import sys
import types

import numpy as np
import pytest

import fluidlite

SEEDS = "/work/shared/reference/seeds"


def _example():
    paths = glob.glob(os.path.join(SEEDS, "002_*.txt"))
    if not paths:
        pytest.skip("seed documents not available")
    text = open(paths[0], encoding="utf-8").read()
    start = text.index("import paddle\nimport paddle.fluid as fluid\n\nwith fluid.dygraph.guard")
    end = text.index("sgd_optimizer.minimize(loss)", start) + len("sgd_optimizer.minimize(loss)")
    return text[start:end]


def test_seed002_dygraph_example_verbatim(monkeypatch):
    code = _example()
    paddle = types.ModuleType("paddle")
    paddle.fluid = fluidlite
    monkeypatch.setitem(sys.modules, "paddle", paddle)
    monkeypatch.setitem(sys.modules, "paddle.fluid", fluidlite)
    seen = {}
    real = fluidlite.optimizer.SGD.minimize

    def spy(self, loss, *a, **k):
        params = self._parameter_list
        seen["before"] = {p.name: (p.numpy(), p.gradient().copy()) for p in params}
        out = real(self, loss, *a, **k)
        seen["after"] = {p.name: p.numpy() for p in params}
        return out

    monkeypatch.setattr(fluidlite.optimizer.SGD, "minimize", spy)
    exec(compile(code, "seed002_dygraph_example", "exec"), {})
    assert set(seen["after"]) == {"linear_0.w_0", "linear_0.b_0"}
    for name, (w0, g) in seen["before"].items():
        np.testing.assert_array_equal(seen["after"][name],
                                      w0 - np.float32(0.1) * np.clip(g, -1, 1))
