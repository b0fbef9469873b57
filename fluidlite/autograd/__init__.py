"""``fluidlite.autograd``: functional gradients and eager autograd helpers.

* ``grad(fn, grad_position=0, weights=None, has_aux=False, *, jit=False)`` and
  ``value_and_grad(...)``: MindSpore's functional gradients, returning functions (eager on
  dygraph tensors, or compiled into a cached static Program with ``jit=True``); see
  ``functional.py``. To differentiate tensors already computed, use
  ``fluid.dygraph.grad(outputs, inputs)`` (dygraph) or ``fluid.gradients`` (static).
* ``backward(tensors, grad_tensors=None, retain_graph=False)`` (PyTorch / Paddle 2 spelling) and
  ``no_grad`` for dygraph tensors.
"""
from __future__ import annotations

from .functional import GradFunction, grad, value_and_grad  # noqa: F401
from ..dygraph.autograd import backward  # noqa: F401
from ..dygraph.base import no_grad  # noqa: F401

__all__ = ["backward", "grad", "value_and_grad", "GradFunction", "no_grad"]
