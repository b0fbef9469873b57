"""fluid 1.8's inference API on fluidlite: ``AnalysisConfig``, ``create_paddle_predictor``,
``PaddleTensor``, ``PaddleBuf``, ``PaddleDType``, ``ZeroCopyTensor``.

fluid scripts reach them as ``fluid.core.AnalysisConfig`` etc.; the predictor runs an
inference optimisation pipeline (``passes``) and can run on onnxruntime
(``config.enable_onnxruntime()``). ``python -m fluidlite.inference.bench MODEL_DIR`` measures
latency and throughput per engine.

Example:
    >>> from fluidlite.inference import AnalysisConfig, create_paddle_predictor, PaddleTensor
    >>> predictor = create_paddle_predictor(AnalysisConfig("./infer_model"))
    >>> outputs = predictor.run([PaddleTensor(np.ones((1, 4), "float32"))])
"""
from __future__ import annotations

from .config import AnalysisConfig, PassStrategy
from .passes import DEFAULT_PASSES, PASSES, describe as describe_passes
from .predictor import AnalysisPredictor, create_paddle_predictor
from .tensor import PaddleBuf, PaddleDType, PaddleTensor, ZeroCopyTensor

__all__ = ["AnalysisConfig", "PassStrategy", "AnalysisPredictor", "create_paddle_predictor",
           "PaddleTensor", "PaddleBuf", "PaddleDType", "ZeroCopyTensor", "PASSES",
           "DEFAULT_PASSES", "describe_passes"]
