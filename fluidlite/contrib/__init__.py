"""``fluid.contrib``: the parts of fluid 1.8's contrib package that fluidlite provides.

Provided: ``mixed_precision`` (automatic mixed precision with dynamic loss scaling) and
``layers`` (``fluid.contrib.layers``: ``BasicGRUUnit``, ``basic_gru``, ``BasicLSTMUnit``,
``basic_lstm``, re-exported here as in fluid 1.8). The rest of fluid 1.8's contrib (slim,
quantization, decoders, CTR layers, ...) is not provided: asking for it says so.
"""
from __future__ import annotations

from typing import Any

from . import layers, mixed_precision  # noqa: F401
from .layers import BasicGRUUnit, BasicLSTMUnit, basic_gru, basic_lstm  # noqa: F401

__all__ = ["mixed_precision", "layers", "BasicGRUUnit", "basic_gru", "BasicLSTMUnit",
           "basic_lstm"]


def __getattr__(name: str) -> Any:
    # everything else of fluid 1.8's contrib (slim, quantize, decoders, CTR layers, ...) says
    # so, instead of a bare "no attribute"
    if name.startswith("__"):
        raise AttributeError(name)
    raise AttributeError(f"fluid.contrib.{name} is not provided by fluidlite (of fluid 1.8's "
                         f"contrib package only fluid.contrib.mixed_precision and "
                         f"fluid.contrib.layers' basic_gru / basic_lstm / BasicGRUUnit / "
                         f"BasicLSTMUnit are)")
