"""``fluidlite.autograd``: eager autograd functions for dygraph tensors (PyTorch / Paddle 2
spelling): ``backward(tensors, grad_tensors=None, retain_graph=False)`` and ``grad``."""
from __future__ import annotations

from .dygraph.autograd import backward, grad  # noqa: F401
from .dygraph.base import no_grad  # noqa: F401

__all__ = ["backward", "grad", "no_grad"]
