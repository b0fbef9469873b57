"""``fluid.contrib``: the parts of fluid 1.8's contrib package that fluidlite provides.

Provided: ``mixed_precision`` (automatic mixed precision with dynamic loss scaling) and
``layers`` (``fluid.contrib.layers``: ``BasicGRUUnit``, ``basic_gru``, ``BasicLSTMUnit``,
``basic_lstm``, the fused / CTR / text-matching / tree-retrieval layers of ``contrib.layers.nn``
and ``ctr_metric_bundle``, all re-exported here as in fluid 1.8) and ``op_freq_statistic``
(op-type counts of a program, from ``op_frequence``). The rest of fluid 1.8's contrib (slim,
quantization, decoders, ``search_pyramid_hash``, ...) is not provided: asking for it says
so.
"""
from __future__ import annotations

from typing import Any

from . import layers, mixed_precision  # noqa: F401
from .layers import *  # noqa: F401,F403  (fluid 1.8 re-exports every contrib layer here)
from . import op_frequence  # noqa: F401
from .op_frequence import op_freq_statistic  # noqa: F401

__all__ = ["mixed_precision", "layers", "op_freq_statistic"] + layers.__all__


def __getattr__(name: str) -> Any:
    # everything else of fluid 1.8's contrib (slim, quantize, decoders, CTR layers, ...) says
    # so, instead of a bare "no attribute"
    if name.startswith("__"):
        raise AttributeError(name)
    raise AttributeError(f"fluid.contrib.{name} is not provided by fluidlite (of fluid 1.8's "
                         f"contrib package only fluid.contrib.mixed_precision, "
                         f"op_freq_statistic and fluid.contrib.layers (but "
                         f"search_pyramid_hash) are)")
