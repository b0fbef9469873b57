"""``fused(c_allreduce_sum+scale)`` / ``fused(c_allreduce_wait+scale)``: the data-parallel
averaging of a gradient as one kernel.

The communicators are the ones the collective ops use (``ops/collective.py``'s registered
backend): the executor never imports ``fluidlite.distributed``.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Sequence

import numpy as np

from ....ops import collective
from ..matcher import FusedDef


class ReduceScale(FusedDef):
    """Out = scale * allreduce_sum(X) (``c_allreduce_sum`` + ``scale``), or scale * the result
    of a ``c_allreduce_wait`` Request: the data-parallel pass's averaging of a gradient. The
    reduction's result is a fresh buffer of the communicator's, so it is scaled in place: one
    pass over the gradient instead of a copy (the same float multiply as the ``scale`` op).
    ``inplace`` (the plan proved X -- for the wait, the X its ``c_allreduce_start`` took -- a
    fresh buffer nothing else reads, ``patterns/allreduce_scale.py``): the reduction itself
    runs in X's buffer (``MPI_IN_PLACE``; for a request, when the shared-memory window reduces
    it at the wait). Otherwise, alone (one process) the reduction returns X itself, which is
    then scaled out of place."""

    def __init__(self, wait: bool, ring_id: int, scale: float, inplace: bool = False) -> None:
        super().__init__("fused(c_allreduce_%s+scale)" % ("wait" if wait else "sum"),
                         ("Request",) if wait else ("X",), ("Out",))
        self.wait, self.ring_id, self.scale, self.inplace = wait, ring_id, scale, inplace

    def lower(self, in_specs: Sequence[Any], attrs: Dict[str, Any]) -> Callable:
        ring, scale, wait, inplace = self.ring_id, self.scale, self.wait, self.inplace

        def run(x: Any) -> np.ndarray:
            if wait:
                owned = not x.done                 # in flight: its result buffer is its own
                if owned and scale != 1.0:
                    return x.wait(scale=x.x.dtype.type(scale), inplace=inplace)
                y = x.wait(inplace=inplace)
            elif scale != 1.0:              # the reduction scales its own result buffer
                return _comm(ring).allreduce(x, inplace=inplace, scale=x.dtype.type(scale))
            else:
                y = _comm(ring).allreduce(x, inplace=inplace)
                owned = inplace or y is not x
            s = y.dtype.type(scale)
            if scale == 1.0:
                return y if owned else y.copy()
            return np.multiply(y, s, out=y) if owned else y * s
        return run

    def forward(self, **ins: Any) -> Dict[str, np.ndarray]:
        return {"Out": self.lower((), {})(ins["Request" if self.wait else "X"])}


def _comm(ring_id: int) -> Any:
    """Ring ``ring_id``'s communicator, as the collective ops get it."""
    return collective.backend("get")(ring_id)
