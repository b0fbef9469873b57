"""``fused(mul+elementwise_add[+relu])``: an fc layer's forward (product, bias, relu) as one
kernel, the fc op's own (``ops/math_more.py``'s ``FC``).

Unfused, the product is written to memory, read back to add the bias into a new array, and
read again to make the relu's: three passes over the layer's output and two temporaries. The
fc kernel adds the bias and applies the relu to each block of the product right after its GEMM,
in place while the block is in cache. The GEMM is the call ``mul`` makes (the same cut, the
same bits) and the bias and relu are the same elementwise operations, so every output has the
unfused ops' bits.

The product and the biased sum are never made. Where the bias add's gradient reads the
product (for its shape alone: ``OpDef.shape_only_inputs``), the product's variable gets a
stand-in of its shape and dtype: a read-only broadcast zero, no memory.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Sequence

import numpy as np

from ....core import registry
from ..matcher import FusedDef


class LinearAct(FusedDef):
    """Out = act(flatten(X, x_num_col_dims) @ Y + Bias) (act "" or "relu"); each slot of
    ``stand_ins`` (the product's) gets a zero stand-in of Out's shape."""

    def __init__(self, x_num_col_dims: int, act: str, stand_ins: Sequence[str]) -> None:
        super().__init__("fused(mul+elementwise_add" + (f"+{act})" if act else ")"),
                         ("X", "Y", "Bias"), ("Out",) + tuple(stand_ins))
        self.fc = registry.get_op_def("fc")
        self.kw = {"in_num_col_dims": x_num_col_dims, "activation_type": act}
        self.stand_ins = tuple(stand_ins)

    def lower(self, in_specs: Sequence[Any], attrs: Dict[str, Any]) -> Optional[Callable]:
        """fc's own fast path (``FC.lower``: 2-D X, one float dtype), with the stand-ins of
        the last shape kept (a small layer pays every NumPy call)."""
        fast = self.fc.lower(in_specs, self.kw)
        if fast is None or not self.stand_ins:
            return fast
        slots, last = self.stand_ins, [np.zeros(0)]

        def with_stand_ins(X: np.ndarray, Y: np.ndarray, Bias: np.ndarray) -> Dict[str, Any]:
            out = fast(X, Y, Bias)
            zero = last[0]
            if zero.shape != out.shape or zero.dtype != out.dtype:
                zero = last[0] = np.broadcast_to(np.zeros((), out.dtype), out.shape)
            res = {"Out": out}
            for s in slots:
                res[s] = zero
            return res
        return with_stand_ins

    def forward(self, X: np.ndarray, Y: np.ndarray, Bias: np.ndarray) -> Dict[str, Any]:
        out = self.fc.forward(X, Y, Bias, **self.kw)["Out"]
        res = {"Out": out}
        if self.stand_ins:
            zero = np.broadcast_to(np.zeros((), out.dtype), out.shape)
            res.update((s, zero) for s in self.stand_ins)
        return res
