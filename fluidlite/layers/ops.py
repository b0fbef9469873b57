"""Generated wrappers for activation ops (``layers.relu`` etc.)."""
from __future__ import annotations

from .layer_function_generator import generate_activation_fn

__all__ = ["relu", "softmax"]

relu = generate_activation_fn("relu")


def softmax(input, use_cudnn=False, name=None, axis=-1):
    """Softmax along ``axis``."""
    return generate_activation_fn("softmax")(input, name=name, axis=axis)
