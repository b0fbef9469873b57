"""The fluid 1.8 model zoo's static NLP and recommendation models (tests/real/zoo18_static.py)
on fluidlite.

Skipped unless ``FLUIDLITE_ZOO18`` names a checkout of PaddlePaddle/models at
``zoo18_static.ZOO_COMMIT`` (the directory holding ``PaddleRec/`` and ``PaddleNLP/``; CI has no
access to GitHub and the zoo's code is not vendored). The ``paddle_infer`` stage also needs
``FLUIDLITE_PADDLE_PYTHON``. A few seconds per model:

    FLUIDLITE_ZOO18=/path/to/models FLUIDLITE_PADDLE_PYTHON=/tmp/paddle-venv/bin/python \\
        python -m pytest -q tests/real/test_zoo18_static.py -m slow
"""
import os
from typing import Any, Dict

import pytest

from . import zoo18_static

# open failures, each with its cause; a stage listed here must still fail with that message,
# so a fix shows up as an unexpected pass to remove from the list
KNOWN: Dict[Any, str] = {
    # the zoo itself: nets.py's CNNEncoder feeds fluid.embedding's [N, 1, D] output to
    # sequence_conv, whose InferShape in fluid 1.8 requires a 2-D input (fails there too)
    ("multiview_simnet_cnn", "build"): "sequence_conv: input must be [N, D]",
    # dynamic_lstm nets (hidden size 128): Paddle 2.6.2's CPU lstm_grad is wrong when the
    # hidden size is a multiple of 8 (its vectorized path): the candidate, input and forget
    # gates get zero gradients, against Paddle's own central differences (0.052 for the
    # first bias entry of a D=8 lstm, where Paddle's lstm_grad gives 0 and fluidlite 0.0518);
    # for D=5 Paddle and fluidlite agree to 1e-8, with and without peepholes, both
    # directions. Paddle's bug: its first update cannot match fluidlite's
    ("sentiment_lstm", "paddle_train"): "step 1: Paddle",
    ("sentiment_bilstm", "paddle_train"): "step 1: Paddle",
    ("emotion_lstm", "paddle_train"): "step 1: Paddle",
    ("emotion_bilstm", "paddle_train"): "step 1: Paddle",
}


@pytest.fixture(scope="module")
def zoo_results(tmp_path_factory) -> Dict[str, Dict[str, Any]]:
    zoo = os.environ.get("FLUIDLITE_ZOO18")
    if not zoo:
        pytest.skip("FLUIDLITE_ZOO18 is not set (a checkout of PaddlePaddle/models at "
                    f"{zoo18_static.ZOO_COMMIT})")
    out = str(tmp_path_factory.mktemp("zoo18_static"))
    return zoo18_static.run(os.path.abspath(zoo), zoo18_static.models(), out,
                            os.environ.get("FLUIDLITE_PADDLE_PYTHON"))


@pytest.mark.slow
@pytest.mark.parametrize("stage", zoo18_static.STAGES)
@pytest.mark.parametrize("model", zoo18_static.models())
def test_zoo_static_model_stage(zoo_results, model, stage):
    result = zoo_results[model]
    known = KNOWN.get((model, stage))
    if known is None and any(m == model for m, _ in KNOWN) and stage not in result:
        pytest.skip(f"{model}: an earlier stage fails for a known reason")
    if known is not None:
        assert not result[stage]["ok"] and known in result[stage]["detail"], \
            f"{model} {stage}: expected the known failure {known!r}, got {result[stage]}"
        return
    if stage.startswith("paddle"):
        if stage not in result and not os.environ.get("FLUIDLITE_PADDLE_PYTHON"):
            pytest.skip("FLUIDLITE_PADDLE_PYTHON is not set")
        if result.get(stage, {}).get("na"):
            # a fluid 1.8 program Paddle 2.6 cannot run: it must be the documented reason
            listed = (zoo18_static.NA_MODELS if stage == "paddle_infer"
                      else zoo18_static.TRAIN_NA_MODELS)
            assert listed.get(model), f"{model}: n/a without a listed reason"
            pytest.skip(result[stage]["na"])
    got = result.get(stage)
    assert got is not None, f"{model}: stage {stage} did not run (an earlier stage failed)"
    assert got["ok"], f"{model} {stage}: {got['detail']}"
