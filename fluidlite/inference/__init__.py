"""fluid 1.8's inference API on fluidlite: ``AnalysisConfig``, ``NativeConfig``,
``create_paddle_predictor``, ``PaddleTensor``, ``PaddleBuf``, ``PaddleDType``, ``PaddlePlace``,
``ZeroCopyTensor``, ``paddle_dtype_size``.

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

from .config import AnalysisConfig, NativeConfig, PassStrategy
from .passes import DEFAULT_PASSES, PASSES, describe as describe_passes
from .predictor import (AnalysisPredictor, NativePaddlePredictor, PaddlePredictor,
                        create_paddle_predictor)
from .tensor import (PaddleBuf, PaddleDType, PaddlePlace, PaddleTensor, ZeroCopyTensor,
                     paddle_dtype_size)

__all__ = ["AnalysisConfig", "NativeConfig", "PassStrategy", "PaddlePredictor",
           "AnalysisPredictor", "NativePaddlePredictor", "create_paddle_predictor",
           "PaddleTensor", "PaddleBuf", "PaddleDType", "PaddlePlace", "ZeroCopyTensor",
           "paddle_dtype_size", "PASSES", "DEFAULT_PASSES", "describe_passes"]
