"""The seed 002 dygraph example, read from the seed document and run verbatim with
``paddle`` / ``paddle.fluid`` mapped to fluidlite: after ``minimize`` the weights moved by
exactly ``-0.1 * clip(grad, -1, 1)``.

The seed documents live in ``shared/reference/seeds`` beside the checkout (CI lays ``shared/``
next to the repository); ``FLUIDLITE_SEEDS`` names another folder. A missing document fails
the test: skipping would let the check vanish silently when the layout changes."""
import os
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

import fluidlite

REPO = Path(__file__).resolve().parents[2]
SEEDS = Path(os.environ.get("FLUIDLITE_SEEDS") or REPO.parent / "shared" / "reference" / "seeds")


def _example():
    paths = sorted(SEEDS.glob("002_*.txt"))
    if not paths:
        pytest.fail(f"seed document 002_*.txt not found in {SEEDS} (expected "
                    f"shared/reference/seeds beside the checkout {REPO}, or set "
                    f"FLUIDLITE_SEEDS to the folder holding it)", pytrace=False)
    text = paths[0].read_text(encoding="utf-8")
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


def test_a_missing_seed_document_fails_the_test(tmp_path):
    """Not found is a failure naming where it looked, never a silent skip."""
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         f"{__file__}::test_seed002_dygraph_example_verbatim"],
        capture_output=True, text=True, timeout=120, cwd=str(REPO),
        env=dict(os.environ, FLUIDLITE_SEEDS=str(tmp_path)))
    assert proc.returncode == 1, proc.stdout[-2000:]
    assert "1 failed" in proc.stdout and "skipped" not in proc.stdout
    assert f"seed document 002_*.txt not found in {tmp_path}" in proc.stdout
